//! The physical layer's one error type.

use crate::symbol::Disparity;

/// What was wrong, and with which input. Every decoder in this crate returns one of these for malformed
/// input instead of panicking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A 10-bit value that is not a code group of the 8b/10b code in either running disparity
    /// (or a value wider than 10 bits). `position` counts code groups from the start of the input.
    InvalidCodeGroup {
        /// Index of the code group in the input.
        position: usize,
        /// The received value, bit `a` as bit 0.
        code: u16,
    },
    /// A valid code group, but from the column of the other running disparity.
    DisparityError {
        /// Index of the code group in the input.
        position: usize,
        /// The received value, bit `a` as bit 0.
        code: u16,
        /// The running disparity the receiver was in.
        expected: Disparity,
    },
    /// A byte that has no K code group was asked to be sent as a control symbol.
    NotAControlSymbol {
        /// The offending byte.
        byte: u8,
    },
    /// A valid control (K) code group where only data was expected.
    UnexpectedControl {
        /// Index of the code group in the input.
        position: usize,
        /// The control byte it carries.
        byte: u8,
    },
    /// An output buffer is too small for the result.
    BufferTooSmall {
        /// Elements needed.
        needed: usize,
        /// Elements available.
        available: usize,
    },
    /// A 128b/130b sync header of `00b` or `11b`, which name no block type.
    InvalidSyncHeader {
        /// Index of the block in the input.
        position: usize,
        /// The two header bits, H0 as bit 0.
        header: u8,
    },
    /// An ordered set whose symbol at `position` is not what its type requires.
    MalformedOrderedSet {
        /// Index of the offending symbol within the ordered set.
        position: usize,
        /// The byte found there.
        found: u8,
    },
    /// A framing token (128b/130b) that is not one of IDL, SDP, STP, EDB or EDS, or is truncated.
    InvalidFramingToken {
        /// The first byte of the token.
        first: u8,
    },
    /// An STP token whose frame CRC or parity does not check.
    FramingTokenCheck {
        /// The raw four bytes of the token.
        token: [u8; 4],
    },
    /// A link width other than 1, 2, 4, 8, 12, 16 or 32 lanes, or more lanes than the port has.
    UnsupportedWidth {
        /// The width asked for.
        lanes: usize,
    },
    /// A lane index outside the port.
    NoSuchLane {
        /// The lane asked for.
        lane: usize,
    },
    /// Lanes could not be deskewed: their skew exceeds what the deskew buffer can absorb.
    SkewTooLarge {
        /// The depth of the deskew FIFO that filled, in symbols (blocks at 128b/130b): a lower bound on
        /// the skew, since the late lanes had not shown their marker when it filled.
        symbols: usize,
    },
    /// An ordered-set block where a stream of data blocks was expected (128b/130b).
    UnexpectedOrderedSetBlock {
        /// Index of the block in the input.
        position: usize,
    },
    /// An input whose length is not a whole number of units (e.g. 16-byte blocks).
    LengthNotMultiple {
        /// The length given.
        len: usize,
        /// The unit it must be a multiple of.
        unit: usize,
    },
    /// A field value that does not fit its field on the wire.
    ValueOutOfRange {
        /// Which field.
        field: &'static str,
        /// The value asked for.
        value: u32,
    },
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Error::InvalidCodeGroup { position, code } => {
                write!(f, "code group {position}: {code:03x} is not an 8b/10b code group")
            }
            Error::DisparityError {
                position,
                code,
                expected,
            } => write!(
                f,
                "code group {position}: {code:03x} is valid but not in running disparity {}",
                match expected {
                    Disparity::Negative => "RD-",
                    Disparity::Positive => "RD+",
                }
            ),
            Error::NotAControlSymbol { byte } => write!(f, "byte {byte:02x} has no K code group"),
            Error::UnexpectedControl { position, byte } => write!(
                f,
                "code group {position}: control symbol K{}.{} ({byte:02x}) where data was expected",
                byte & 0x1F,
                byte >> 5
            ),
            Error::BufferTooSmall { needed, available } => {
                write!(f, "output buffer holds {available}, {needed} needed")
            }
            Error::InvalidSyncHeader { position, header } => {
                write!(
                    f,
                    "block {position}: sync header {header:02b} (H1H0) names no block type"
                )
            }
            Error::MalformedOrderedSet { position, found } => {
                write!(f, "ordered set symbol {position}: unexpected {found:02x}")
            }
            Error::InvalidFramingToken { first } => write!(f, "no framing token starts with {first:02x}"),
            Error::FramingTokenCheck { token } => write!(
                f,
                "STP token {:02x} {:02x} {:02x} {:02x} fails its frame CRC or parity",
                token[0], token[1], token[2], token[3]
            ),
            Error::UnsupportedWidth { lanes } => write!(f, "unsupported link width x{lanes}"),
            Error::NoSuchLane { lane } => write!(f, "no lane {lane}"),
            Error::SkewTooLarge { symbols } => {
                write!(
                    f,
                    "lane-to-lane skew of at least {symbols} symbols (blocks at 128b/130b) is too large"
                )
            }
            Error::UnexpectedOrderedSetBlock { position } => {
                write!(f, "block {position}: ordered-set block inside a data stream")
            }
            Error::LengthNotMultiple { len, unit } => {
                write!(f, "length {len} is not a multiple of {unit}")
            }
            Error::ValueOutOfRange { field, value } => {
                write!(f, "{field} {value} does not fit its field")
            }
        }
    }
}

impl core::error::Error for Error {}
