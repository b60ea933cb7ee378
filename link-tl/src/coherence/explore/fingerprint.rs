//! Fingerprints of model states, and the hash tables that hold them.
//!
//! The explorer recognises a state by a 128-bit fingerprint of its representative, so two distinct
//! states share one with probability about `n² / 2^129` for `n` states (below 10^-20 at 10^9 states);
//! a shared fingerprint would prune a state unexplored. The derived `Hash` of a state makes hundreds of
//! small writes, which is what made the standard SipHash the explorer's largest cost (half its time):
//! [`Fingerprinter`] packs the writes into 64-bit words and folds each into two independent lanes with a
//! 64 × 64 → 128-bit multiply, the mixing step of wyhash and its descendants. The fingerprints are
//! already uniformly spread, so the tables that hold them ([`FingerprintSet`]) use their low bits as the
//! table hash instead of hashing them again.

use core::hash::{BuildHasherDefault, Hash, Hasher};
use std::collections::HashSet;

/// A state's identity in the search.
pub type Fingerprint = u128;

/// A set of fingerprints, hashed by their own low bits.
pub type FingerprintSet = HashSet<Fingerprint, BuildHasherDefault<LowBits>>;

/// The fingerprint of `value`.
pub fn fingerprint<T: Hash + ?Sized>(value: &T) -> Fingerprint {
    let mut h = Fingerprinter::default();
    value.hash(&mut h);
    h.finish128()
}

// Odd constants with well-spread bits (wyhash's secrets).
const SEED_A: u64 = 0xa076_1d64_78bd_642f;
const SEED_B: u64 = 0xe703_7ed1_a0b4_28db;
const MULT_A: u64 = 0x8ebc_6af0_9c88_c6e3;
const MULT_B: u64 = 0x5899_65cc_7537_4cc3;

/// The high and low halves of `x · y`, folded together.
fn fold_multiply(x: u64, y: u64) -> u64 {
    let product = u128::from(x) * u128::from(y);
    (product as u64) ^ (product >> 64) as u64
}

/// A streaming 128-bit hash: bytes are packed into little-endian words, each folded into both lanes.
#[derive(Clone, Debug)]
pub struct Fingerprinter {
    a: u64,
    b: u64,
    word: u64,
    filled: u32,
    bytes: u64,
}

impl Default for Fingerprinter {
    fn default() -> Self {
        Fingerprinter {
            a: SEED_A,
            b: SEED_B,
            word: 0,
            filled: 0,
            bytes: 0,
        }
    }
}

impl Fingerprinter {
    fn absorb(&mut self, word: u64) {
        self.a = fold_multiply(self.a ^ word, MULT_A);
        self.b = fold_multiply(self.b ^ word.rotate_left(32), MULT_B).wrapping_add(word);
    }

    /// Append the low `n` bytes of `value`.
    fn push(&mut self, value: u64, n: u32) {
        self.bytes += u64::from(n);
        let bits = 8 * self.filled;
        self.word |= value.checked_shl(bits).unwrap_or(0);
        self.filled += n;
        if self.filled >= 8 {
            let full = self.word;
            self.filled -= 8;
            // The bytes of `value` that did not fit start the next word.
            self.word = if self.filled == 0 {
                0
            } else {
                value >> (8 * (n - self.filled))
            };
            self.absorb(full);
        }
    }

    /// The 128-bit result.
    pub fn finish128(&self) -> u128 {
        let mut h = self.clone();
        if h.filled > 0 {
            let word = h.word;
            h.absorb(word);
        }
        let a = fold_multiply(h.a ^ h.bytes, MULT_B ^ SEED_A);
        let b = fold_multiply(h.b ^ h.bytes.rotate_left(17), MULT_A ^ SEED_B);
        u128::from(fold_multiply(a, b ^ SEED_A) ^ b) << 64 | u128::from(fold_multiply(b, a ^ SEED_B) ^ a)
    }
}

impl Hasher for Fingerprinter {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.push(u64::from_le_bytes(word), 8);
        }
        for &byte in chunks.remainder() {
            self.push(u64::from(byte), 1);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.push(u64::from(i), 1);
    }

    fn write_u16(&mut self, i: u16) {
        self.push(u64::from(i), 2);
    }

    fn write_u32(&mut self, i: u32) {
        self.push(u64::from(i), 4);
    }

    fn write_u64(&mut self, i: u64) {
        self.push(i, 8);
    }

    fn write_usize(&mut self, i: usize) {
        self.push(i as u64, 8);
    }

    fn finish(&self) -> u64 {
        self.finish128() as u64
    }
}

/// The table hash of a value that is already a uniformly spread fingerprint: its low 64 bits.
#[derive(Clone, Copy, Debug, Default)]
pub struct LowBits(u64);

impl Hasher for LowBits {
    fn write(&mut self, bytes: &[u8]) {
        for (i, &byte) in bytes.iter().take(8).enumerate() {
            self.0 ^= u64::from(byte) << (8 * i);
        }
    }

    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_does_not_depend_on_how_the_bytes_are_written() {
        let mut whole = Fingerprinter::default();
        whole.write(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        let mut pieces = Fingerprinter::default();
        pieces.write_u8(1);
        pieces.write_u16(u16::from_le_bytes([2, 3]));
        pieces.write_u32(u32::from_le_bytes([4, 5, 6, 7]));
        pieces.write(&[8, 9]);
        pieces.write_u16(u16::from_le_bytes([10, 11]));
        assert_eq!(whole.finish128(), pieces.finish128());
    }

    #[test]
    fn nearby_inputs_get_distinct_well_spread_fingerprints() {
        // Every one-byte value at every place of a 64-byte zero state, alone and with a second byte
        // changed nearby (about 49 k inputs): no two fingerprints equal, and about half the bits set.
        let mut inputs = std::collections::HashSet::new();
        for i in 0..64 {
            for v in 0..=255u8 {
                for (j, w) in [(i, 0u8), ((i + 1) % 64, 1), ((i + 7) % 64, 3)] {
                    let mut input = [0u8; 64];
                    input[i] = v;
                    input[j] ^= w;
                    inputs.insert(input);
                }
            }
        }
        let mut seen = FingerprintSet::default();
        let mut ones = 0u64;
        for input in &inputs {
            let fp = fingerprint(&input[..]);
            seen.insert(fp);
            ones += u64::from(fp.count_ones());
        }
        assert_eq!(seen.len(), inputs.len());
        let mean = ones as f64 / inputs.len() as f64;
        assert!((mean - 64.0).abs() < 0.5, "mean bits set {mean}");
    }

    #[test]
    fn the_table_hash_is_the_low_half() {
        let mut h = LowBits::default();
        0x1234_5678_9abc_def0_0fed_cba9_8765_4321_u128.hash(&mut h);
        assert_eq!(h.finish(), 0x0fed_cba9_8765_4321);
    }
}
