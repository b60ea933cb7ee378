//! Optional forward error correction: corrects any burst of up to 16 bits on one lane per 256-byte block.
//!
//! A FEC **block** is 16 units of 16 bytes (256 bytes, the size of a PCIe 6.0 flit): 250 data bytes followed
//! by 6 check bytes. Its bytes form three interleaved codewords by position modulo 3 (86, 85 and 85 bytes),
//! each a shortened Reed-Solomon code over GF(2^8) ([`gf256`]) with two check symbols: minimum distance 3.
//!
//! What a codeword guarantees (see `docs/spec.md` section 2.7):
//! - any error in one of its bytes (any value) is corrected;
//! - errors in two of its bytes are never taken for an error-free codeword: the decoder either reports the
//!   block uncorrectable or "corrects" a third byte (a mis-correction, which the packet CRC behind it
//!   catches); two equal error values are always reported;
//! - three or more byte errors may go unnoticed by the FEC; the CRC is still there.
//!
//! Because the link width W (1, 2, 4, 8 or 16) is never a multiple of 3, the consecutive bytes of one lane
//! fall into different codewords, and a burst of up to 16 bits on one lane touches at most three of them.
//!
//! **Codeword layout.** Byte `p` of the block belongs to codeword `p mod 3` and has locator α^e with
//! `e = (255 - p) / 3`: the last byte of each codeword has e = 0, as in a codeword polynomial sent highest
//! degree first. The check bytes are the two last bytes of each codeword (positions 250..256) and make both
//! syndromes S0 = Σ c and S1 = Σ c·α^e zero, which is the code with generator (x - 1)(x - α).

pub mod gf256;

use core::fmt;

/// Bytes of one PHY unit; a block is a whole number of them.
pub const UNIT_LEN: usize = 16;
/// Bytes of a FEC block on the wire.
pub const BLOCK_LEN: usize = 16 * UNIT_LEN;
/// Check bytes at the end of a block.
pub const CHECK_LEN: usize = 6;
/// Data bytes at the start of a block.
pub const DATA_LEN: usize = BLOCK_LEN - CHECK_LEN;
/// Interleaved codewords per block.
pub const CODEWORDS: usize = 3;

/// A FEC block: [`DATA_LEN`] data bytes, then [`CHECK_LEN`] check bytes.
pub type Block = [u8; BLOCK_LEN];

/// Bytes of each codeword: positions `k, k + 3, k + 6, ...` of the block.
const CODEWORD_LEN: [usize; CODEWORDS] = [86, 85, 85];

/// 1/(1 + α) = α^-25, since 1 + α = 3 = α^25.
const INV_ONE_PLUS_ALPHA_EXP: u8 = 255 - 25;

/// What [`decode`] repaired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Corrections {
    /// Bytes corrected, at most one per codeword.
    pub symbols: u8,
    /// Bits flipped back by those corrections (for estimating the raw bit error rate).
    pub bits: u8,
}

/// Why a block could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FecError {
    /// A codeword's syndromes match no single-byte error: it has two or more byte errors. The block is
    /// left as received.
    Uncorrectable {
        /// The codeword (block position modulo 3).
        codeword: u8,
    },
}

impl fmt::Display for FecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FecError::Uncorrectable { codeword } => write!(
                f,
                "FEC block uncorrectable: codeword {codeword} has more than one byte in error"
            ),
        }
    }
}

impl core::error::Error for FecError {}

/// Fills the check bytes of `block` from its data bytes. Whatever the check bytes held before is ignored.
pub fn encode(block: &mut Block) {
    let syndromes = Syndromes::of(block);
    for codeword in 0..CODEWORDS {
        let (s0, s1) = (syndromes.s0[codeword], syndromes.s1[codeword]);
        // Adding d1 at locator α^1 and d0 at α^0 cancels both syndromes: d1 + d0 = S0, d1·α + d0 = S1.
        let d1 = gf256::mul_exp(s0 ^ s1, INV_ONE_PLUS_ALPHA_EXP);
        let d0 = s0 ^ d1;
        block[position(codeword, 1)] ^= d1;
        block[position(codeword, 0)] ^= d0;
    }
}

/// Corrects `block` in place and reports what was corrected, or reports it uncorrectable and leaves it
/// untouched. An error-free block costs one syndrome computation.
pub fn decode(block: &mut Block) -> Result<Corrections, FecError> {
    let syndromes = Syndromes::of(block);
    if syndromes.are_zero() {
        return Ok(Corrections::default());
    }
    // Locate every codeword's error before changing anything, so a failure leaves the block as received.
    let mut errors = [None; CODEWORDS];
    for (codeword, error) in errors.iter_mut().enumerate() {
        *error = locate(codeword, syndromes.s0[codeword], syndromes.s1[codeword])?;
    }
    let mut corrections = Corrections::default();
    for (at, value) in errors.into_iter().flatten() {
        if let Some(byte) = block.get_mut(at) {
            *byte ^= value;
            corrections.symbols += 1;
            corrections.bits += value.count_ones() as u8;
        }
    }
    Ok(corrections)
}

/// The block position of codeword `codeword`'s byte with locator α^`exponent`, if the codeword has one.
fn position(codeword: usize, exponent: usize) -> usize {
    // 255 - p = 3·e + ((3 - k) mod 3) for a byte p of codeword k.
    (BLOCK_LEN - 1) - (3 * exponent + (CODEWORDS - codeword) % CODEWORDS)
}

/// The single-byte error `(position, value)` that explains a codeword's syndromes, `None` if they are zero.
fn locate(codeword: usize, s0: u8, s1: u8) -> Result<Option<(usize, u8)>, FecError> {
    let uncorrectable = FecError::Uncorrectable {
        codeword: codeword as u8,
    };
    match (gf256::log(s0), gf256::log(s1)) {
        (None, None) => Ok(None),
        // One error of value v at locator α^e gives S0 = v and S1 = v·α^e, so e = log S1 - log S0.
        (Some(log_s0), Some(log_s1)) => {
            let exponent = (usize::from(log_s1) + 255 - usize::from(log_s0)) % 255;
            if exponent < CODEWORD_LEN[codeword % CODEWORDS] {
                Ok(Some((position(codeword, exponent), s0)))
            } else {
                Err(uncorrectable)
            }
        }
        // A single error makes both syndromes nonzero; exactly one zero means two or more errors.
        _ => Err(uncorrectable),
    }
}

/// Full 24-byte chunks in each half of the syndrome computation: (256 - 16) / 24 = 10 in all.
const HALF_CHUNKS: usize = 5;

/// Both syndromes of the three codewords.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Syndromes {
    /// S0 = Σ c: the XOR of the codeword's bytes.
    s0: [u8; CODEWORDS],
    /// S1 = Σ c·α^e.
    s1: [u8; CODEWORDS],
}

impl Syndromes {
    /// The syndromes of a block, eight bytes at a time.
    ///
    /// Read from its end, the block is a sequence of 24-byte chunks (the first one 8 bytes short, as if
    /// preceded by zeros). A byte `r` bytes before the block's end has exponent `r / 3` and codeword
    /// `-r mod 3`; since 24 is a multiple of 3, moving a whole chunk towards the start multiplies every
    /// byte's term by α^8 and keeps its codeword. So three 64-bit Horner accumulators, one per 8-byte slot of
    /// a chunk, each multiplied by α^8 per chunk, reduce the block to one 24-byte chunk with the same
    /// syndromes, which a 3-lane Horner by α then folds, one group of 3 bytes (one byte per codeword) at a
    /// time.
    fn of(block: &Block) -> Self {
        let mut words = [0u64; BLOCK_LEN / 8];
        for (word, bytes) in words.iter_mut().zip(block.chunks_exact(8)) {
            *word = u64::from_le_bytes(bytes.try_into().unwrap_or_default());
        }
        // Two independent Horner chains over the two halves (the first starting with the short first chunk,
        // whose first slot lies before the block and is zero), joined by one multiplication by α^40: half
        // the dependency chain of a single pass.
        let (first, second) = words.split_at(2 + 3 * HALF_CHUNKS);
        let mut horner = [[0, first[0], first[1]], [0; 3]];
        let mut parity = [0u64; 3];
        for (half, words) in [&first[2..], second].into_iter().enumerate() {
            for chunk in words.chunks_exact(3) {
                for slot in 0..3 {
                    horner[half][slot] = gf256::mul_alpha8_lanes(horner[half][slot]) ^ chunk[slot];
                    parity[slot] ^= chunk[slot];
                }
            }
        }
        let [early, late] = horner;
        let horner = core::array::from_fn(|slot| gf256::mul_alpha40_lanes(early[slot]) ^ late[slot]);
        parity[1] ^= words[0];
        parity[2] ^= words[1];
        let (horner, parity) = (chunk_bytes(horner), chunk_bytes(parity));
        let mut s1 = 0u32;
        let mut s0 = 0u32;
        for (h, p) in horner.chunks_exact(3).zip(parity.chunks_exact(3)) {
            s1 = gf256::mul_alpha_lanes(s1) ^ u32::from_le_bytes([h[0], h[1], h[2], 0]);
            s0 ^= u32::from_le_bytes([p[0], p[1], p[2], 0]);
        }
        // Byte c of a chunk is 23 - c bytes before its end, so it belongs to codeword (c + 1) mod 3.
        let [s0_1, s0_2, s0_0, _] = s0.to_le_bytes();
        let [s1_1, s1_2, s1_0, _] = s1.to_le_bytes();
        Self {
            s0: [s0_0, s0_1, s0_2],
            s1: [s1_0, s1_1, s1_2],
        }
    }

    fn are_zero(&self) -> bool {
        self.s0 == [0; CODEWORDS] && self.s1 == [0; CODEWORDS]
    }
}

/// The 24 bytes of a chunk held in three little-endian words.
fn chunk_bytes(words: [u64; 3]) -> [u8; 24] {
    let mut bytes = [0u8; 24];
    for (bytes, word) in bytes.chunks_exact_mut(8).zip(words) {
        bytes.copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The syndromes by their definition, one byte at a time.
    fn syndromes_by_definition(block: &Block) -> Syndromes {
        let mut syndromes = Syndromes::default();
        for (p, &byte) in block.iter().enumerate() {
            let exponent = (BLOCK_LEN - 1 - p) / 3;
            syndromes.s0[p % 3] ^= byte;
            syndromes.s1[p % 3] ^= gf256::mul(byte, gf256::exp(exponent));
        }
        syndromes
    }

    #[test]
    fn word_parallel_syndromes_match_the_definition() {
        for seed in 0..64u32 {
            let block: Block =
                core::array::from_fn(|i| (i as u32 ^ seed).wrapping_mul(0x9E37_79B9).rotate_left(seed) as u8);
            assert_eq!(
                Syndromes::of(&block),
                syndromes_by_definition(&block),
                "seed {seed}"
            );
        }
        for p in 0..BLOCK_LEN {
            let mut block = [0u8; BLOCK_LEN];
            block[p] = 1;
            assert_eq!(Syndromes::of(&block), syndromes_by_definition(&block), "byte {p}");
        }
    }

    #[test]
    fn positions_and_exponents_agree() {
        for p in 0..BLOCK_LEN {
            assert_eq!(position(p % 3, (BLOCK_LEN - 1 - p) / 3), p);
        }
        for (codeword, &len) in CODEWORD_LEN.iter().enumerate() {
            assert_eq!(
                position(codeword, len - 1),
                codeword,
                "first byte of codeword {codeword}"
            );
            assert_eq!(position(codeword, 0) % 3, codeword);
            assert_eq!(position(codeword, 1) % 3, codeword);
            assert!(position(codeword, 1) >= DATA_LEN);
        }
    }

    #[test]
    fn one_plus_alpha_is_alpha_25() {
        assert_eq!(gf256::exp(25), 1 ^ gf256::exp(1));
    }
}
