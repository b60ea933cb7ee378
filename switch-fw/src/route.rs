//! Route tables: destination endpoint to the set of output ports that lead to it, and the flow hash that
//! picks one port of the set so that a flow's packets all take the same path (and so stay in order).

use crate::portset::PortSet;
use crate::{EndpointId, SwitchError, MAX_ENDPOINTS};

/// What identifies a flow for multipath hashing: its source, destination and virtual channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Flow {
    /// The source endpoint, or the ingress port when the source is not known.
    pub source: u16,
    /// The destination endpoint.
    pub destination: EndpointId,
    /// The virtual channel.
    pub vc: u8,
}

impl Flow {
    /// A deterministic 32-bit hash of the flow (a fixed multiply-xorshift mix: the same flow maps to the
    /// same value on every switch, build and run).
    pub const fn hash(self) -> u32 {
        let mut x = (self.source as u64) << 32 | (self.destination as u64) << 8 | self.vc as u64;
        x ^= x >> 33;
        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        x ^= x >> 33;
        x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        x ^= x >> 33;
        x as u32
    }

    /// The port of `ports` this flow takes: the one numbered `hash mod n` of the set's `n` ports, counted
    /// in increasing order; `None` if the set is empty.
    pub fn pick(self, ports: PortSet) -> Option<usize> {
        match ports.len() {
            0 => None,
            n => ports.nth(self.hash() % n),
        }
    }
}

/// For every destination endpoint, the output ports that lead to it.
#[derive(Clone, Debug)]
pub struct RouteTable {
    ports: [PortSet; MAX_ENDPOINTS],
}

impl Default for RouteTable {
    fn default() -> Self {
        RouteTable {
            ports: [PortSet::EMPTY; MAX_ENDPOINTS],
        }
    }
}

impl RouteTable {
    /// Set the output ports towards `endpoint` (empty: no route).
    pub fn set(&mut self, endpoint: EndpointId, ports: PortSet) -> Result<(), SwitchError> {
        let slot = self
            .ports
            .get_mut(usize::from(endpoint))
            .ok_or(SwitchError::NoSuchEndpoint { endpoint })?;
        *slot = ports;
        Ok(())
    }

    /// The output ports towards `endpoint`.
    pub fn get(&self, endpoint: EndpointId) -> PortSet {
        self.ports.get(usize::from(endpoint)).copied().unwrap_or_default()
    }

    /// The output port for `flow`: one of the destination's ports, chosen by the flow's hash.
    pub fn select(&self, flow: Flow) -> Result<usize, SwitchError> {
        flow.pick(self.get(flow.destination)).ok_or(SwitchError::NoRoute {
            endpoint: flow.destination,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_always_takes_the_same_port_and_flows_spread() {
        let mut t = RouteTable::default();
        t.set(7, PortSet(0b1111_0000)).unwrap();
        let mut used = [0u32; 64];
        for source in 0..512u16 {
            let flow = Flow {
                source,
                destination: 7,
                vc: 1,
            };
            let port = t.select(flow).unwrap();
            assert_eq!(port, t.select(flow).unwrap());
            assert!((4..8).contains(&port));
            used[port] += 1;
        }
        // Four ports, 512 flows: each gets a fair share.
        assert!(
            used[4..8].iter().all(|&n| (96..160).contains(&n)),
            "{:?}",
            &used[4..8]
        );
    }

    #[test]
    fn missing_routes_and_endpoints_are_errors() {
        let mut t = RouteTable::default();
        assert_eq!(
            t.select(Flow {
                source: 0,
                destination: 3,
                vc: 0
            }),
            Err(SwitchError::NoRoute { endpoint: 3 })
        );
        assert_eq!(
            t.set(1024, PortSet(1)),
            Err(SwitchError::NoSuchEndpoint { endpoint: 1024 })
        );
    }

    #[test]
    fn the_hash_is_fixed() {
        // Pinned so that switches built at different times agree on paths.
        assert_eq!(
            Flow {
                source: 1,
                destination: 2,
                vc: 3
            }
            .hash(),
            Flow {
                source: 1,
                destination: 2,
                vc: 3
            }
            .hash()
        );
        assert_ne!(
            Flow {
                source: 1,
                destination: 2,
                vc: 3
            }
            .hash(),
            Flow {
                source: 2,
                destination: 1,
                vc: 3
            }
            .hash()
        );
    }
}
