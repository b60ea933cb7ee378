//! Serial bits packed into bytes as a capture of a lane holds them: the first bit on the wire in bit 0 of
//! the first byte (docs/spec.md 1.1 and 1.3.1).

use std::io::{self, Read, StdinLock, Write};

use anyhow::Context;

/// Stdin as packed bits, every bit inverted if `invert`: a capture of a lane whose differential pair is
/// swapped.
pub fn packed_stdin(invert: bool) -> impl Read {
    PackedStdin {
        input: io::stdin().lock(),
        invert,
    }
}

struct PackedStdin {
    input: StdinLock<'static>,
    invert: bool,
}

impl Read for PackedStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.input.read(buf)?;
        if self.invert {
            for byte in &mut buf[..n] {
                *byte = !*byte;
            }
        }
        Ok(n)
    }
}

/// Packed bits as words of up to 64 bits, the first on the wire in bit 0, and how many bits each holds.
pub fn words(bytes: &[u8]) -> impl Iterator<Item = (u64, u32)> + '_ {
    bytes.chunks(8).map(|word| {
        let mut w = [0u8; 8];
        w[..word.len()].copy_from_slice(word);
        (u64::from_le_bytes(w), 8 * word.len() as u32)
    })
}

/// Writes serial bits packed into bytes, each byte as soon as it is whole.
pub struct BitWriter<W: Write> {
    out: W,
    /// Bits not yet written (fewer than 8), the first in bit 0.
    carry: u8,
    carry_bits: u32,
}

impl<W: Write> BitWriter<W> {
    pub fn new(out: W) -> Self {
        BitWriter {
            out,
            carry: 0,
            carry_bits: 0,
        }
    }

    /// The writer the bits go to, for what is written beside them.
    pub fn inner(&mut self) -> &mut W {
        &mut self.out
    }

    /// Append the low `count` (at most 64) bits of `bits`, the first on the wire in bit 0.
    pub fn push(&mut self, bits: u64, count: u32) -> anyhow::Result<()> {
        let count = count.min(64);
        let bits = if count == 64 {
            bits
        } else {
            bits & ((1 << count) - 1)
        };
        let wide = u128::from(self.carry) | u128::from(bits) << self.carry_bits;
        let total = self.carry_bits + count;
        let whole = (total / 8) as usize;
        self.out
            .write_all(&wide.to_le_bytes()[..whole])
            .context("writing stdout")?;
        self.carry_bits = total % 8;
        self.carry = (wide >> (8 * whole)) as u8 & ((1u16 << self.carry_bits) - 1) as u8;
        Ok(())
    }

    /// Fill the byte the last bits are in with alternating bits, the first unlike the last bit written:
    /// padding that makes no run of more than one bit, so that it forms no comma (five equal bits) with
    /// what came before.
    pub fn pad_alternating(&mut self) -> anyhow::Result<()> {
        if self.carry_bits == 0 {
            return Ok(());
        }
        let last = self.carry >> (self.carry_bits - 1) & 1;
        let pattern = if last == 1 { 0b1010_1010 } else { 0b0101_0101 };
        self.push(pattern, 8 - self.carry_bits)
    }

    /// Write the last bits, the rest of their byte zero, and flush.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        if self.carry_bits > 0 {
            self.out.write_all(&[self.carry]).context("writing stdout")?;
            self.carry_bits = 0;
        }
        self.out.flush().context("writing stdout")
    }
}
