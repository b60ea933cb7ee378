//! The 8b/10b line code of PCI Express at 2.5 and 5 GT/s (ANSI X3.230 / IEEE 802.3 clause 36).
//!
//! Each byte becomes a 10-bit code group, held in a `u16` with bit `a` (first on the wire) as bit 0, so
//! K28.5 is `0x17C` at RD- and `0x283` at RD+. Running disparity (RD) starts negative. The pieces:
//!
//! - [`encode_symbol`] / [`decode_code_group`]: one symbol, the reference the fast paths are tested against.
//! - [`Encoder`] / [`Decoder`]: streams that carry the running disparity, with fast all-data paths
//!   ([`Encoder::encode_data`], [`Decoder::decode_data`]) for payload.
//! - [`CommaAligner`]: a lane's receiver front end that finds code-group boundaries in a raw bit stream.
//!
//! Whether a code group flips the running disparity depends only on its byte, never on the column it is
//! sent in, so the RD before every symbol of a run is known from the bytes alone; the fast paths use this
//! to turn encoding and decoding into independent table look-ups.

mod align;
mod decode;
mod encode;
mod tables;

pub use align::CommaAligner;
pub use decode::Decoder;
pub use encode::Encoder;

use crate::error::Error;
use crate::symbol::{Disparity, Symbol};

/// Bits in one code group.
pub const CODE_GROUP_BITS: u32 = tables::CODE_BITS;

/// The comma as sent at RD-: the first seven bits on the wire (`a b c d e i f`) of K28.1, K28.5 and K28.7,
/// `0011111`, held with bit `a` as bit 0. Its complement [`COMMA_RD_PLUS`] (`1100000`) is the same bits at
/// RD+. No other code group, and no pair of code groups at any offset except after K28.7, contains either.
pub const COMMA_RD_MINUS: u16 = 0b111_1100;
/// The comma as sent at RD+ (`1100000`), bit `a` as bit 0.
pub const COMMA_RD_PLUS: u16 = 0b000_0011;
/// Bits in a comma.
pub const COMMA_BITS: u32 = 7;

/// The code group of one symbol sent at running disparity `rd`, and the running disparity after it.
///
/// Fails with [`Error::NotAControlSymbol`] for a [`Symbol::Control`] whose byte has no K code group.
pub fn encode_symbol(rd: Disparity, s: Symbol) -> Result<(u16, Disparity), Error> {
    let column = column(rd);
    match s {
        Symbol::Data(byte) => {
            let b = usize::from(byte);
            let code = tables::DATA_CODES[b][column];
            Ok((code, flip_if(rd, tables::DATA_FLIPS[b] != 0)))
        }
        Symbol::Control(byte) => {
            let codes = tables::control_codes(byte).ok_or(Error::NotAControlSymbol { byte })?;
            let code = codes[column];
            Ok((code, flip_if(rd, is_unbalanced(code))))
        }
    }
}

/// The symbol a code group received at running disparity `rd` carries, and the running disparity after it.
///
/// Any `u16` is accepted. Fails with [`Error::InvalidCodeGroup`] for a value that is no code group in either
/// column (including every value wider than 10 bits), and with [`Error::DisparityError`] for a code group
/// of the other column. Errors report `position` 0.
pub fn decode_code_group(rd: Disparity, code: u16) -> Result<(Symbol, Disparity), Error> {
    let mut decoder = Decoder::new(rd);
    let symbol = decoder.step(code, 0)?;
    Ok((symbol, decoder.disparity()))
}

/// Whether the first seven bits (`a b c d e i f`) of a code group are a comma (`0011111` or `1100000`): true exactly for K28.1,
/// K28.5 and K28.7, in either column.
pub const fn contains_comma(code: u16) -> bool {
    let first_seven = code & ((1 << COMMA_BITS) - 1);
    first_seven == COMMA_RD_MINUS || first_seven == COMMA_RD_PLUS
}

/// A symbol's name as the standards write it, `D10.2` or `K28.5` (`Dx.y` for the byte `y << 5 | x`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolName(pub Symbol);

impl core::fmt::Display for SymbolName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let kind = if self.0.is_control() { 'K' } else { 'D' };
        let byte = self.0.byte();
        write!(f, "{kind}{}.{}", byte & 0x1F, byte >> 5)
    }
}

/// Index of a running disparity's column in the tables: 0 for RD-, 1 for RD+.
const fn column(rd: Disparity) -> usize {
    match rd {
        Disparity::Negative => 0,
        Disparity::Positive => 1,
    }
}

const fn disparity_of_column(column: usize) -> Disparity {
    if column & 1 == 0 {
        Disparity::Negative
    } else {
        Disparity::Positive
    }
}

const fn flip_if(rd: Disparity, flip: bool) -> Disparity {
    if flip {
        rd.flipped()
    } else {
        rd
    }
}

const fn is_unbalanced(code: u16) -> bool {
    code.count_ones() != CODE_GROUP_BITS / 2
}

fn symbol_of(entry: u32) -> Symbol {
    let byte = (entry & tables::entry::BYTE) as u8;
    if entry & tables::entry::CONTROL != 0 {
        Symbol::Control(byte)
    } else {
        Symbol::Data(byte)
    }
}

/// [`Error::BufferTooSmall`] unless `available >= needed`.
fn check_room(needed: usize, available: usize) -> Result<(), Error> {
    if available < needed {
        Err(Error::BufferTooSmall { needed, available })
    } else {
        Ok(())
    }
}
