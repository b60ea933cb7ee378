//! The transmit side: symbols to code groups, carrying the running disparity.

use super::{check_room, column, disparity_of_column, encode_symbol, tables};
use crate::error::Error;
use crate::symbol::{Disparity, Symbol};

/// An 8b/10b encoder for one lane: symbols in, code groups out, running disparity kept between calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Encoder {
    rd: Disparity,
}

impl Encoder {
    /// An encoder at RD-, where every transmitter starts.
    pub const fn new() -> Self {
        Encoder {
            rd: Disparity::Negative,
        }
    }

    /// An encoder at the given running disparity.
    pub const fn with_disparity(rd: Disparity) -> Self {
        Encoder { rd }
    }

    /// The running disparity the next code group will be sent in.
    pub const fn disparity(&self) -> Disparity {
        self.rd
    }

    /// The code group of one symbol. On error ([`Error::NotAControlSymbol`]) nothing is sent and the running
    /// disparity is unchanged.
    pub fn encode(&mut self, s: Symbol) -> Result<u16, Error> {
        let (code, rd) = encode_symbol(self.rd, s)?;
        self.rd = rd;
        Ok(code)
    }

    /// Encode `symbols` into `out[..symbols.len()]`. All or nothing: the output must have room
    /// ([`Error::BufferTooSmall`]) and every control byte must have a K code group
    /// ([`Error::NotAControlSymbol`]), otherwise nothing is written and the running disparity is unchanged.
    pub fn encode_symbols(&mut self, symbols: &[Symbol], out: &mut [u16]) -> Result<(), Error> {
        check_room(symbols.len(), out.len())?;
        if let Some(&Symbol::Control(byte)) = symbols
            .iter()
            .find(|s| matches!(s, Symbol::Control(b) if tables::control_codes(*b).is_none()))
        {
            return Err(Error::NotAControlSymbol { byte });
        }
        for (s, o) in symbols.iter().zip(out.iter_mut()) {
            // Cannot fail: every control byte was checked above.
            *o = self.encode(*s)?;
        }
        Ok(())
    }

    /// Encode data bytes into `out[..bytes.len()]`: the fast path for payload, several times the speed of
    /// [`Encoder::encode`] per byte. Fails only with [`Error::BufferTooSmall`], writing nothing.
    pub fn encode_data(&mut self, bytes: &[u8], out: &mut [u16]) -> Result<(), Error> {
        check_room(bytes.len(), out.len())?;
        // The column of each byte is the starting column XOR the flips of the bytes before it, so the only
        // loop-carried dependency is one XOR; each code group is then an independent look-up.
        let mut col = column(self.rd);
        for (&byte, o) in bytes.iter().zip(out.iter_mut()) {
            let b = usize::from(byte);
            *o = tables::DATA_CODES[b][col & 1];
            col ^= usize::from(tables::DATA_FLIPS[b]);
        }
        self.rd = disparity_of_column(col);
        Ok(())
    }
}
