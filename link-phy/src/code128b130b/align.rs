//! Block alignment (PCIe 4.2.2.2.1): where in the received bit stream the blocks start.

use super::block::{to_wire, SyncHeader, BLOCK_BITS};
use super::ordered_set::EIEOS;

/// The receiver's block alignment phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BlockAlignment {
    /// Searching the bit stream for an EIEOS; no blocks are delivered.
    #[default]
    Unaligned,
    /// Block boundaries known from an EIEOS; an EIEOS seen at another boundary moves them. An SDS locks.
    Aligned,
    /// After an SDS: a data stream, boundaries fixed.
    Locked,
}

/// The 130 wire bits of an EIEOS: (first 128, last 2).
const EIEOS_WIRE: (u128, u8) = to_wire(SyncHeader::OrderedSet.bits(), u128::from_le_bytes(EIEOS));

/// Bits kept before the current block boundary, so that an EIEOS straddling it can still be recognised.
pub(crate) const HISTORY_BITS: u32 = BLOCK_BITS - 1;
const WORDS: usize = 16;
const CAPACITY: u32 = 64 * WORDS as u32;

/// A bounded queue of received bits, first on the wire in bit 0 of `words[0]`. Bits before `head` are
/// already consumed but kept (up to [`HISTORY_BITS`]) for the EIEOS search.
#[derive(Clone, Debug)]
pub(crate) struct BitQueue {
    words: [u64; WORDS],
    /// Bits held, consumed or not.
    len: u32,
    /// The first unconsumed bit.
    head: u32,
}

impl BitQueue {
    pub(crate) const fn new() -> Self {
        BitQueue {
            words: [0; WORDS],
            len: 0,
            head: 0,
        }
    }

    pub(crate) const fn head(&self) -> u32 {
        self.head
    }

    pub(crate) const fn len(&self) -> u32 {
        self.len
    }

    /// Unconsumed bits.
    pub(crate) const fn available(&self) -> u32 {
        self.len - self.head
    }

    /// Append the low `count` (at most 64) bits of `bits`. Returns false, appending nothing, when full.
    pub(crate) fn push(&mut self, bits: u64, count: u32) -> bool {
        let count = count.min(64);
        if count == 0 {
            return true;
        }
        if self.len + count > CAPACITY {
            return false;
        }
        let bits = if count == 64 {
            bits
        } else {
            bits & ((1u64 << count) - 1)
        };
        let (w, b) = ((self.len / 64) as usize, self.len % 64);
        if let Some(word) = self.words.get_mut(w) {
            *word |= bits << b;
        }
        if b != 0 && b + count > 64 {
            if let Some(word) = self.words.get_mut(w + 1) {
                *word |= bits >> (64 - b);
            }
        }
        self.len += count;
        true
    }

    /// `count` (1 to 64) bits starting at bit `at`; bits past the end read as zero.
    pub(crate) fn get(&self, at: u32, count: u32) -> u64 {
        let (w, b) = ((at / 64) as usize, at % 64);
        let lo = self.words.get(w).copied().unwrap_or(0) >> b;
        let hi = if b == 0 {
            0
        } else {
            self.words.get(w + 1).copied().unwrap_or(0) << (64 - b)
        };
        let v = lo | hi;
        if count >= 64 {
            v
        } else {
            v & ((1u64 << count) - 1)
        }
    }

    /// Symbol `i` of the block starting at `at` (after its 2 header bits).
    pub(crate) fn symbol(&self, at: u32, i: u32) -> u8 {
        self.get(at + 2 + 8 * i, 8) as u8
    }

    /// The 130 bits at `at` as (first 128, last 2).
    pub(crate) fn block_at(&self, at: u32) -> (u128, u8) {
        let lo = self.get(at, 64) as u128 | (self.get(at + 64, 64) as u128) << 64;
        (lo, self.get(at + 128, 2) as u8)
    }

    /// Whether the 130 bits at `at` are an EIEOS.
    pub(crate) fn eieos_at(&self, at: u32) -> bool {
        // Compare the first word before building the whole block: almost every position fails there.
        self.get(at, 64) == EIEOS_WIRE.0 as u64 && self.block_at(at) == EIEOS_WIRE
    }

    /// Mark `n` bits consumed, then drop history older than [`HISTORY_BITS`] whole words at a time.
    pub(crate) fn consume(&mut self, n: u32) {
        self.head = (self.head + n).min(self.len);
        let drop_words = (self.head.saturating_sub(HISTORY_BITS) / 64) as usize;
        if drop_words > 0 {
            let drop_words = drop_words.min(WORDS);
            self.words.copy_within(drop_words.., 0);
            if let Some(vacated) = self.words.get_mut(WORDS - drop_words..) {
                vacated.fill(0);
            }
            self.head -= 64 * drop_words as u32;
            self.len -= 64 * drop_words as u32;
        }
    }
}
