//! The receive side: code groups to symbols, checking running disparity.

use super::tables::{self, entry};
use super::{check_room, column, flip_if, symbol_of};
use crate::error::Error;
use crate::symbol::{Disparity, Symbol};

/// Code groups per block of the data fast path: validity is checked once per block, and a block with an
/// error is decoded again by the scalar path to find it.
const BLOCK: usize = 128;

/// An 8b/10b decoder for one lane: code groups in, symbols out, running disparity checked and kept.
///
/// After a disparity error the decoder continues in the running disparity the received code group implies
/// (as IEEE 802.3 receivers do), so one flipped bit is reported once rather than on every following group;
/// after an invalid code group it keeps its running disparity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decoder {
    rd: Disparity,
}

impl Decoder {
    /// A decoder expecting the next code group in running disparity `rd`.
    pub const fn new(rd: Disparity) -> Self {
        Decoder { rd }
    }

    /// The running disparity the next code group is expected in.
    pub const fn disparity(&self) -> Disparity {
        self.rd
    }

    /// Expect the next code group in running disparity `rd`.
    pub fn set_disparity(&mut self, rd: Disparity) {
        self.rd = rd;
    }

    /// Decode one code group (any `u16`). Errors report `position` 0.
    pub fn decode(&mut self, code: u16) -> Result<Symbol, Error> {
        self.step(code, 0)
    }

    /// Decode `codes` into `out[..codes.len()]` and return how many symbols were written (`codes.len()`).
    ///
    /// Stops at the first error, whose `position` indexes `codes`: `out[..position]` then holds the symbols
    /// before it, and the running disparity is as after the failing code group, so decoding can resume at
    /// `codes[position + 1..]`. [`Error::BufferTooSmall`] if `out` is shorter than `codes` (nothing decoded).
    pub fn decode_symbols(&mut self, codes: &[u16], out: &mut [Symbol]) -> Result<usize, Error> {
        check_room(codes.len(), out.len())?;
        for (position, (&code, o)) in codes.iter().zip(out.iter_mut()).enumerate() {
            *o = self.step(code, position)?;
        }
        Ok(codes.len())
    }

    /// Decode code groups that must all be data into bytes, `out[..codes.len()]`: the fast path for payload.
    ///
    /// Errors as [`Decoder::decode_symbols`], plus [`Error::UnexpectedControl`] for a valid K code group
    /// (after which the running disparity follows that code group). On error `out[..position]` holds the
    /// bytes before it and the rest of `out` is unspecified.
    pub fn decode_data(&mut self, codes: &[u16], out: &mut [u8]) -> Result<(), Error> {
        check_room(codes.len(), out.len())?;
        let mut position = 0;
        for (block, out_block) in codes.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
            // The running disparity is one-hot in bits 8..=9 so that one AND picks the "not data in this
            // column" bit of each entry and one XOR applies its flip: no branches, no variable shifts.
            let mut rd_bit = entry::NOT_DATA_AT_NEGATIVE << column(self.rd);
            let mut bad = 0;
            // A separate pass so that it vectorises and the main loop stays short.
            let wide = block.iter().fold(0, |acc, &code| acc | code);
            for (&code, o) in block.iter().zip(out_block.iter_mut()) {
                let e = tables::DECODE[usize::from(code & tables::CODE_MASK)];
                bad |= e & rd_bit;
                rd_bit ^= e >> 16;
                *o = e as u8;
            }
            if bad == 0 && wide <= tables::CODE_MASK {
                self.rd = if rd_bit == entry::NOT_DATA_AT_NEGATIVE {
                    Disparity::Negative
                } else {
                    Disparity::Positive
                };
            } else {
                // Rare: redo the block one code group at a time to report the first error exactly.
                self.decode_data_scalar(block, out_block, position)?;
            }
            position += block.len();
        }
        Ok(())
    }

    /// [`Decoder::decode_data`] one code group at a time; `first_position` is the index of `codes[0]`.
    fn decode_data_scalar(
        &mut self,
        codes: &[u16],
        out: &mut [u8],
        first_position: usize,
    ) -> Result<(), Error> {
        for (i, (&code, o)) in codes.iter().zip(out.iter_mut()).enumerate() {
            let position = first_position + i;
            match self.step(code, position)? {
                Symbol::Data(byte) => *o = byte,
                Symbol::Control(byte) => return Err(Error::UnexpectedControl { position, byte }),
            }
        }
        Ok(())
    }

    /// Decode one code group at `position`, updating the running disparity as the type documents.
    pub(super) fn step(&mut self, code: u16, position: usize) -> Result<Symbol, Error> {
        let e = tables::decode_entry(code);
        let here = column(self.rd);
        let flips = e & entry::FLIP != 0;
        if e & (entry::VALID_AT_NEGATIVE << here) != 0 {
            self.rd = flip_if(self.rd, flips);
            Ok(symbol_of(e))
        } else if e & (entry::VALID_AT_NEGATIVE << (here ^ 1)) != 0 {
            let expected = self.rd;
            // The transmitter was in the other disparity: follow it from here on.
            self.rd = flip_if(self.rd.flipped(), flips);
            Err(Error::DisparityError {
                position,
                code,
                expected,
            })
        } else {
            Err(Error::InvalidCodeGroup { position, code })
        }
    }
}
