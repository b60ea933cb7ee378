//! The switch core's one error type.

/// What was wrong, and with what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SwitchError {
    /// A port number at or beyond the switch's port count.
    NoSuchPort {
        /// The port.
        port: usize,
    },
    /// An endpoint ID at or beyond 1024.
    NoSuchEndpoint {
        /// The ID.
        endpoint: u16,
    },
    /// A virtual channel number at or beyond 4.
    NoSuchVc {
        /// The channel.
        vc: usize,
    },
    /// No route is programmed for the destination.
    NoRoute {
        /// The destination endpoint.
        endpoint: u16,
    },
    /// The packet would cross a partition boundary.
    CrossPartition {
        /// Source endpoint's partition.
        from: u8,
        /// Destination endpoint's partition.
        to: u8,
    },
    /// A multicast or reduction group that is not programmed, or out of range.
    NoSuchGroup {
        /// The group.
        group: u16,
    },
    /// Every port of the destination's route is marked failed ([`crate::switch::Switch::set_port_down`]):
    /// the packet was not queued, and can go once the routes change.
    PortDown {
        /// The port its flow hashes onto.
        port: usize,
    },
    /// An input port's buffer is full (the sender ignored credits).
    BufferFull {
        /// The input port.
        port: usize,
    },
    /// A reduction contribution of the wrong length, or a second one from the same port.
    BadContribution {
        /// The group.
        group: u16,
        /// The contributing port.
        port: usize,
    },
    /// No accumulator is free for a new reduction chunk.
    ReductionFull {
        /// The group.
        group: u16,
    },
    /// The destination's route names an output port the switch does not have (a route set directly, not
    /// through the registers, which refuse it): the packet was taken and dropped.
    RouteToNoPort {
        /// The destination endpoint.
        endpoint: u16,
        /// The lowest such port its route names.
        port: usize,
    },
    /// The multicast group names an output port the switch does not have (set directly, not through the
    /// registers, which refuse it): the packet was taken and dropped, no copy sent.
    GroupToNoPort {
        /// The multicast group.
        group: u16,
        /// The lowest such port it names.
        port: usize,
    },
    /// A register address that maps to nothing.
    BadRegister {
        /// The address.
        address: u32,
    },
}

impl core::fmt::Display for SwitchError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SwitchError::NoSuchPort { port } => write!(f, "no port {port}"),
            SwitchError::NoSuchEndpoint { endpoint } => write!(f, "endpoint {endpoint} is beyond 1023"),
            SwitchError::NoSuchVc { vc } => write!(f, "no virtual channel {vc}"),
            SwitchError::NoRoute { endpoint } => write!(f, "no route to endpoint {endpoint}"),
            SwitchError::CrossPartition { from, to } => {
                write!(f, "packet would cross from partition {from} to partition {to}")
            }
            SwitchError::NoSuchGroup { group } => write!(f, "group {group} is not programmed"),
            SwitchError::PortDown { port } => {
                write!(f, "port {port} is down and its route has no other port up")
            }
            SwitchError::BufferFull { port } => write!(f, "input buffer of port {port} is full"),
            SwitchError::BadContribution { group, port } => {
                write!(f, "bad reduction contribution to group {group} from port {port}")
            }
            SwitchError::ReductionFull { group } => write!(f, "no free accumulator for group {group}"),
            SwitchError::RouteToNoPort { endpoint, port } => {
                write!(
                    f,
                    "the route to endpoint {endpoint} names port {port}, which the switch lacks"
                )
            }
            SwitchError::GroupToNoPort { group, port } => {
                write!(
                    f,
                    "multicast group {group} names port {port}, which the switch lacks"
                )
            }
            SwitchError::BadRegister { address } => write!(f, "no register at {address:#010x}"),
        }
    }
}

impl core::error::Error for SwitchError {}
