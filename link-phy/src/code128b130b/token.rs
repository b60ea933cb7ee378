//! Framing tokens of the 128b/130b data stream (PCIe 4.2.2.3.1, figure 4-13).
//!
//! Bits within a symbol are numbered 7..0 as in the specification's figure; symbol +0 is sent first.
//!
//! | token | symbols | layout |
//! |-------|---------|--------|
//! | IDL   | 1 | `00h` |
//! | SDP   | 2 | `F0h ACh` |
//! | STP   | 4 | +0: \[7:4\] length\[3:0\], \[3:0\] `1111b`; +1: \[7\] frame parity, \[6:0\] length\[10:4\]; +2: \[7:4\] frame CRC, \[3:0\] sequence\[11:8\]; +3: sequence\[7:0\] |
//! | EDB   | 4 | `C0h C0h C0h C0h` |
//! | EDS   | 4 | `1Fh 80h 90h 00h` (an STP shape with length 1, which no TLP has) |

use crate::error::Error;

/// The SDP token.
pub const SDP: [u8; 2] = [0xF0, 0xAC];
/// The EDB token.
pub const EDB: [u8; 4] = [0xC0; 4];
/// The EDS token.
pub const EDS: [u8; 4] = [0x1F, 0x80, 0x90, 0x00];
/// The IDL token.
pub const IDL: u8 = 0x00;
/// The largest value of the STP length field (11 bits).
pub const MAX_STP_LENGTH: u16 = 0x7FF;
/// The largest TLP sequence number (12 bits).
pub const MAX_SEQUENCE: u16 = 0xFFF;

/// A framing token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FramingToken {
    /// Logical idle, one symbol.
    Idl,
    /// Start of a DLLP (6 symbols follow).
    Sdp,
    /// Start of a TLP.
    Stp {
        /// TLP length in DW, counting this token and the LCRC (11 bits; never 1).
        length_dw: u16,
        /// TLP sequence number (12 bits).
        seq: u16,
    },
    /// The preceding TLP is nullified.
    Edb,
    /// End of data stream: an ordered-set block follows.
    Eds,
}

/// The frame CRC of an 11-bit TLP length (PCIe 4.2.2.3.1): C = (L\[0\]x^14 + L\[1\]x^13 + ... + L\[10\]x^4)
/// mod (x^4 + x + 1), written out as the specification's four XOR equations.
pub const fn frame_crc(length: u16) -> u8 {
    // Each CRC bit is the parity of the length bits its equation names.
    const fn parity_of(length: u16, bits: u16) -> u8 {
        ((length & bits).count_ones() & 1) as u8
    }
    const fn mask(bits: &[u32]) -> u16 {
        let mut m = 0;
        let mut i = 0;
        while i < bits.len() {
            m |= 1 << bits[i];
            i += 1;
        }
        m
    }
    let c0 = parity_of(length, mask(&[10, 7, 6, 4, 2, 1, 0]));
    let c1 = parity_of(length, mask(&[10, 9, 7, 5, 4, 3, 2]));
    let c2 = parity_of(length, mask(&[9, 8, 6, 4, 3, 2, 1]));
    let c3 = parity_of(length, mask(&[8, 7, 5, 3, 2, 1, 0]));
    c0 | c1 << 1 | c2 << 2 | c3 << 3
}

/// The frame parity: even parity over the 11 length bits and the 4 frame CRC bits.
pub const fn frame_parity(length: u16) -> u8 {
    (((length & MAX_STP_LENGTH).count_ones() + frame_crc(length).count_ones()) & 1) as u8
}

fn need(bytes: &[u8], needed: usize) -> Result<(), Error> {
    if bytes.len() < needed {
        Err(Error::BufferTooSmall {
            needed,
            available: bytes.len(),
        })
    } else {
        Ok(())
    }
}

impl FramingToken {
    /// Symbols in this token.
    pub const fn len(&self) -> usize {
        match self {
            FramingToken::Idl => 1,
            FramingToken::Sdp => 2,
            FramingToken::Stp { .. } | FramingToken::Edb | FramingToken::Eds => 4,
        }
    }

    /// Whether the token has no symbols (never: every token has at least one).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Parse the token that starts `bytes`; returns it and its length in symbols.
    ///
    /// Errors: [`Error::BufferTooSmall`] if `bytes` ends inside the token; [`Error::InvalidFramingToken`]
    /// for symbols that start no token; [`Error::FramingTokenCheck`] for an STP whose frame CRC or parity
    /// fails, or that has length 1 without being exactly EDS.
    pub fn parse(bytes: &[u8]) -> Result<(FramingToken, usize), Error> {
        need(bytes, 1)?;
        let first = bytes[0];
        let invalid = Error::InvalidFramingToken { first };
        let token = match first {
            IDL => FramingToken::Idl,
            0xF0 => {
                need(bytes, 2)?;
                if bytes[1] != SDP[1] {
                    return Err(invalid);
                }
                FramingToken::Sdp
            }
            0xC0 => {
                need(bytes, 4)?;
                if bytes[..4] != EDB {
                    return Err(invalid);
                }
                FramingToken::Edb
            }
            _ if first & 0x0F == 0x0F => {
                need(bytes, 4)?;
                let token = [bytes[0], bytes[1], bytes[2], bytes[3]];
                if token == EDS {
                    FramingToken::Eds
                } else {
                    Self::parse_stp(token)?
                }
            }
            _ => return Err(invalid),
        };
        Ok((token, token.len()))
    }

    fn parse_stp(token: [u8; 4]) -> Result<FramingToken, Error> {
        let length = u16::from(token[0] >> 4) | u16::from(token[1] & 0x7F) << 4;
        let parity = token[1] >> 7;
        let crc = token[2] >> 4;
        if length == 1 || crc != frame_crc(length) || parity != frame_parity(length) {
            return Err(Error::FramingTokenCheck { token });
        }
        Ok(FramingToken::Stp {
            length_dw: length,
            seq: u16::from(token[2] & 0x0F) << 8 | u16::from(token[3]),
        })
    }

    /// Write the token to the start of `out`; returns its length in symbols.
    ///
    /// Errors: [`Error::BufferTooSmall`]; [`Error::ValueOutOfRange`] for an STP length above 2047 or equal
    /// to 1 (that pattern is EDS), or a sequence number above 4095.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, Error> {
        let len = self.len();
        let available = out.len();
        let dst = out.get_mut(..len).ok_or(Error::BufferTooSmall {
            needed: len,
            available,
        })?;
        match *self {
            FramingToken::Idl => dst[0] = IDL,
            FramingToken::Sdp => dst.copy_from_slice(&SDP),
            FramingToken::Edb => dst.copy_from_slice(&EDB),
            FramingToken::Eds => dst.copy_from_slice(&EDS),
            FramingToken::Stp { length_dw, seq } => {
                if length_dw > MAX_STP_LENGTH || length_dw == 1 {
                    return Err(Error::ValueOutOfRange {
                        field: "STP TLP length",
                        value: u32::from(length_dw),
                    });
                }
                if seq > MAX_SEQUENCE {
                    return Err(Error::ValueOutOfRange {
                        field: "STP sequence number",
                        value: u32::from(seq),
                    });
                }
                dst.copy_from_slice(&[
                    (length_dw as u8 & 0x0F) << 4 | 0x0F,
                    frame_parity(length_dw) << 7 | (length_dw >> 4) as u8,
                    frame_crc(length_dw) << 4 | (seq >> 8) as u8,
                    seq as u8,
                ]);
            }
        }
        Ok(len)
    }
}
