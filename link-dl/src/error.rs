//! The data link layer's one error type.

use crate::vc::Vc;

/// What was wrong, and with which input or request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DlError {
    /// A flit whose kind bits are `00` (idle) but which is not all zero, or `11` (reserved).
    BadFlitKind {
        /// The first byte of the flit.
        first: u8,
    },
    /// A packet header announcing more than 9 flits after it.
    TooManyFlits {
        /// The count announced.
        flits: u8,
    },
    /// A control flit of a kind this layer does not know.
    UnknownControl {
        /// The kind field.
        kind: u8,
    },
    /// Reserved bits that are not zero.
    ReservedBits,
    /// A CRC that does not check.
    CrcMismatch {
        /// The CRC computed over the received bytes.
        computed: u32,
        /// The CRC field as received.
        received: u32,
    },
    /// A buffer of the wrong length for the wire format.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// `send` while the link is not active (down, or still exchanging initial credits).
    LinkNotActive,
    /// `send` while the link is entering low power (L1): the power-management handshake holds new
    /// packets back until the link is in L1 (where a packet sent wakes it) or the handshake is over.
    EnteringLowPower,
    /// `send` without enough credit on the virtual channel: try again once the partner returns some.
    NoCredit {
        /// The channel.
        vc: Vc,
        /// Flits the packet needs.
        needed: u16,
        /// Flits of credit available.
        available: u16,
    },
    /// `send` with the replay buffer full: try again once the partner acknowledges.
    ReplayFull,
    /// A packet longer than 9 flits after its header.
    PayloadTooLong {
        /// Flits given.
        flits: usize,
    },
    /// A transaction-layer header wider than its 58-bit field.
    HeaderTooWide,
    /// A credit report (a freed-flits counter from the partner) that frees more flits than were sent on
    /// the channel and not yet reported freed: a flow-control protocol error, refused.
    ImpossibleCredit {
        /// The channel.
        vc: Vc,
        /// Flits the report would free.
        freed: u16,
        /// Flits sent on the channel whose freeing was not yet reported: the most a report may free.
        outstanding: u16,
    },
}

impl core::fmt::Display for DlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            DlError::BadFlitKind { first } => {
                write!(f, "flit starting {first:02x} has a reserved or non-idle kind")
            }
            DlError::TooManyFlits { flits } => write!(f, "packet header announces {flits} flits (at most 9)"),
            DlError::UnknownControl { kind } => write!(f, "unknown control flit kind {kind}"),
            DlError::ReservedBits => write!(f, "reserved bits are set"),
            DlError::CrcMismatch { computed, received } => {
                write!(
                    f,
                    "CRC mismatch: computed {computed:08x}, received {received:08x}"
                )
            }
            DlError::Truncated { needed, got } => write!(f, "{got} bytes where {needed} are needed"),
            DlError::LinkNotActive => write!(f, "the link is not active"),
            DlError::EnteringLowPower => write!(f, "the link is entering low power (L1)"),
            DlError::NoCredit {
                vc,
                needed,
                available,
            } => {
                write!(
                    f,
                    "no credit on {vc:?}: {needed} flits needed, {available} available"
                )
            }
            DlError::ReplayFull => write!(f, "the replay buffer is full"),
            DlError::PayloadTooLong { flits } => write!(f, "{flits} payload flits (at most 9)"),
            DlError::HeaderTooWide => write!(f, "transaction-layer header wider than 58 bits"),
            DlError::ImpossibleCredit {
                vc,
                freed,
                outstanding,
            } => write!(
                f,
                "credit report on {vc:?} frees {freed} flits, {outstanding} outstanding"
            ),
        }
    }
}

impl core::error::Error for DlError {}
