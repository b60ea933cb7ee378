//! The transaction layer's one error type.

use link_dl::{DlError, Vc};

/// What was wrong, and with which input or request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum TlError {
    /// An opcode this layer does not implement: a reserved one, or where the decoder is not
    /// [`crate::coherence::wire::decode`], a coherence opcode.
    UnknownOpcode {
        /// The 5-bit opcode.
        opcode: u8,
    },
    /// A known opcode on a virtual channel it does not travel on.
    WrongChannel {
        /// The 5-bit opcode.
        opcode: u8,
        /// The channel it arrived on.
        vc: Vc,
    },
    /// A message code this layer does not know.
    UnknownMessage {
        /// The 8-bit message code.
        code: u8,
    },
    /// Reserved bits that are not zero.
    ReservedBits,
    /// A packet with the wrong number of flits after its header for its opcode and lengths.
    FlitCount {
        /// The 5-bit opcode.
        opcode: u8,
        /// Flits after the header.
        flits: usize,
    },
    /// A length field or byte-enable mask that reaches beyond the packet's data flits.
    LengthOverrun {
        /// Bytes the header asks for, counted from the first data flit's first byte.
        needed: usize,
        /// Bytes the data flits hold.
        room: usize,
    },
    /// A length of zero, or more than the operation allows.
    BadLength {
        /// The length.
        len: usize,
    },
    /// A completion that carries data with a status other than Successful Completion: only a successful
    /// one may.
    DataOnFailure {
        /// The status.
        status: crate::header::Status,
    },
    /// A posted partial write whose byte enables select no byte.
    NoBytesEnabled,
    /// A piece of data that crosses a 128-byte boundary, or a read request that crosses a 4096-byte one.
    CrossesBoundary {
        /// The local address of its first byte.
        addr: u64,
        /// Its length in bytes.
        len: usize,
    },
    /// An atomic whose address is not aligned to its size.
    MisalignedAtomic {
        /// The local address.
        addr: u64,
        /// The operand size in bytes.
        size: u8,
    },
    /// A local address at or beyond 2^47, which no header can carry.
    AddressTooWide {
        /// The address.
        addr: u64,
    },
    /// An endpoint ID at or beyond 1024.
    EndpointOutOfRange {
        /// The ID.
        endpoint: u16,
    },
    /// A tag at or beyond 1024.
    TagOutOfRange {
        /// The tag.
        tag: u16,
    },
    /// A global address that no window of the address map covers.
    Unmapped {
        /// The global address.
        global: u64,
    },
    /// An address-map window that is empty, not 4096-byte aligned, or runs past the end of an address space.
    BadWindow {
        /// The window's global base.
        base: u64,
    },
    /// An address-map window that overlaps one already in the map.
    OverlappingWindow {
        /// The new window's global base.
        base: u64,
    },
    /// The address map has no room for another window.
    MapFull,
    /// A completion for a tag that has no outstanding request.
    UnknownTag {
        /// The tag.
        tag: u16,
    },
    /// A completion for a request that already timed out (or failed): counted and dropped.
    LateCompletion {
        /// The tag.
        tag: u16,
    },
    /// A completion from an endpoint other than the one the request went to.
    UnexpectedCompleter {
        /// The tag.
        tag: u16,
        /// The request's destination.
        expected: u16,
        /// The completion's completer.
        got: u16,
    },
    /// A completion whose offset, length or data do not fit what its request is still waiting for
    /// (a duplicate piece, a piece that does not end at a 128-byte boundary, data on a write's completion).
    CompletionMismatch {
        /// The tag.
        tag: u16,
        /// The completion's byte offset in the request.
        offset: u16,
    },
    /// Every tag is in use: wait for completions or timeouts.
    NoFreeTag,
    /// Every transfer slot of a requester is in use: wait for a transfer to end.
    TransfersFull,
    /// The queue of a virtual channel is full: back-pressure, try again after `pump`.
    QueueFull {
        /// The channel.
        vc: Vc,
    },
    /// A buffer too small for the data asked of it.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// The data link refused a packet.
    Link(DlError),
    /// A coherence opcode's message code (bits 42:40) that is reserved.
    UnknownCoherenceCode {
        /// The 5-bit opcode.
        opcode: u8,
        /// The 3-bit code.
        code: u8,
    },
    /// A coherence message for a line beyond those the receiving engine tracks.
    LineOutOfRange {
        /// The line number.
        line: u32,
    },
    /// A caching agent index beyond those the home agent serves.
    AgentOutOfRange {
        /// The agent index.
        agent: usize,
    },
    /// A coherence message that does not fit the line's protocol state (a GO with no request pending, a
    /// snoop response nobody asked for, a second request for a line): the sender broke the protocol. The
    /// message is dropped and counted.
    UnexpectedCoherence {
        /// The message's 5-bit opcode.
        opcode: u8,
        /// The line.
        line: u32,
    },
    /// The caching agent already holds as many core operations as it can: wait for completions.
    CoreOpsFull,
}

impl From<DlError> for TlError {
    fn from(e: DlError) -> Self {
        TlError::Link(e)
    }
}

impl core::fmt::Display for TlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TlError::UnknownOpcode { opcode } => write!(f, "unknown opcode {opcode:#04x}"),
            TlError::WrongChannel { opcode, vc } => {
                write!(
                    f,
                    "opcode {opcode:#04x} does not travel on the {} channel",
                    vc.name()
                )
            }
            TlError::UnknownMessage { code } => write!(f, "unknown message code {code:#04x}"),
            TlError::ReservedBits => write!(f, "reserved bits are set"),
            TlError::FlitCount { opcode, flits } => {
                write!(f, "opcode {opcode:#04x} with {flits} flits after the header")
            }
            TlError::LengthOverrun { needed, room } => {
                write!(f, "{needed} bytes asked of data flits that hold {room}")
            }
            TlError::BadLength { len } => write!(f, "length {len} is out of range"),
            TlError::DataOnFailure { status } => {
                write!(
                    f,
                    "a completion with status {status:?} carries data, which only a successful one may"
                )
            }
            TlError::NoBytesEnabled => write!(f, "byte enables select no byte"),
            TlError::CrossesBoundary { addr, len } => {
                write!(
                    f,
                    "{len} bytes at {addr:#x} cross a 128-byte (or, for a read, 4096-byte) boundary"
                )
            }
            TlError::MisalignedAtomic { addr, size } => {
                write!(f, "{size}-byte atomic at {addr:#x} is not aligned")
            }
            TlError::AddressTooWide { addr } => write!(f, "local address {addr:#x} is wider than 47 bits"),
            TlError::EndpointOutOfRange { endpoint } => write!(f, "endpoint {endpoint} is beyond 1023"),
            TlError::TagOutOfRange { tag } => write!(f, "tag {tag} is beyond 1023"),
            TlError::Unmapped { global } => write!(f, "global address {global:#x} is not in the address map"),
            TlError::BadWindow { base } => {
                write!(
                    f,
                    "window at {base:#x} is empty, not 4096-byte aligned, or too long"
                )
            }
            TlError::OverlappingWindow { base } => write!(f, "window at {base:#x} overlaps another"),
            TlError::MapFull => write!(f, "the address map is full"),
            TlError::UnknownTag { tag } => write!(f, "completion for tag {tag}, which is not outstanding"),
            TlError::LateCompletion { tag } => write!(f, "late completion for timed-out tag {tag}"),
            TlError::UnexpectedCompleter { tag, expected, got } => {
                write!(f, "completion for tag {tag} from endpoint {got}, not {expected}")
            }
            TlError::CompletionMismatch { tag, offset } => {
                write!(
                    f,
                    "completion for tag {tag} at offset {offset} does not fit its request"
                )
            }
            TlError::NoFreeTag => write!(f, "every tag is outstanding"),
            TlError::TransfersFull => write!(f, "every transfer slot is in use"),
            TlError::QueueFull { vc } => write!(f, "the {} queue is full", vc.name()),
            TlError::BufferTooSmall { needed, got } => {
                write!(f, "{got}-byte buffer where {needed} are needed")
            }
            TlError::Link(e) => write!(f, "data link: {e}"),
            TlError::UnknownCoherenceCode { opcode, code } => {
                write!(f, "coherence opcode {opcode:#04x} with reserved code {code}")
            }
            TlError::LineOutOfRange { line } => write!(f, "line {line} is beyond the lines tracked"),
            TlError::AgentOutOfRange { agent } => write!(f, "caching agent {agent} is beyond those served"),
            TlError::UnexpectedCoherence { opcode, line } => {
                write!(
                    f,
                    "coherence opcode {opcode:#04x} for line {line} does not fit the line's state"
                )
            }
            TlError::CoreOpsFull => write!(f, "the caching agent's core operation queue is full"),
        }
    }
}

impl core::error::Error for TlError {}
