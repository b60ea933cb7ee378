//! What travels on a lane: a slot's worth of serial bits, or electrical idle.
//!
//! A port transmits in *slots*: one 10-bit code group per lane at 8b/10b, one 130-bit block per lane at
//! 128b/130b. The lanes of a slot share its rate and start time; the channel delays each lane on its own.

use crate::lanes::MAX_LANES;
use crate::rate::Rate;

/// Most bits in one slot of one lane (a 128b/130b block).
pub const MAX_SLOT_BITS: u32 = 192;

/// Up to [`MAX_SLOT_BITS`] serial bits; the first on the wire is bit 0 of `words[0]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotBits {
    words: [u64; 3],
    len: u32,
}

impl SlotBits {
    /// No bits.
    pub const EMPTY: SlotBits = SlotBits {
        words: [0; 3],
        len: 0,
    };

    /// Bits held.
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// Whether no bits are held.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append the low `count` (at most 64) bits of `bits`; bits past the capacity are dropped.
    pub fn push(&mut self, bits: u64, count: u32) {
        let count = count.min(64).min(MAX_SLOT_BITS - self.len);
        if count == 0 {
            return;
        }
        let bits = if count == 64 {
            bits
        } else {
            bits & ((1u64 << count) - 1)
        };
        let (w, b) = ((self.len / 64) as usize, self.len % 64);
        self.words[w] |= bits << b;
        if b != 0 && b + count > 64 {
            self.words[w + 1] |= bits >> (64 - b);
        }
        self.len += count;
    }

    /// `count` (at most 64) bits starting at bit `start`; bits past the end read as zero.
    pub fn get(&self, start: u32, count: u32) -> u64 {
        if start >= self.len || count == 0 {
            return 0;
        }
        let count = count.min(64).min(self.len - start);
        let (w, b) = ((start / 64) as usize, start % 64);
        let mut v = self.words[w] >> b;
        if b != 0 && w + 1 < self.words.len() {
            v |= self.words[w + 1] << (64 - b);
        }
        if count == 64 {
            v
        } else {
            v & ((1u64 << count) - 1)
        }
    }

    /// Flip bit `i` (a bit error); ignored past the end.
    pub fn flip(&mut self, i: u32) {
        if i < self.len {
            self.words[(i / 64) as usize] ^= 1 << (i % 64);
        }
    }

    /// Complement every bit (a swapped differential pair).
    pub fn invert(&mut self) {
        let mut left = self.len;
        for w in &mut self.words {
            let n = left.min(64);
            if n == 0 {
                break;
            }
            *w = !*w & if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            left -= n;
        }
    }

    /// The bits as chunks of at most 64, first on the wire first.
    pub fn chunks(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (0..self.len.div_ceil(64)).map(move |i| {
            let start = i * 64;
            let n = (self.len - start).min(64);
            (self.get(start, n), n)
        })
    }
}

/// One lane's signal during one slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LaneSignal {
    /// Electrical idle: the transmitter is quiet.
    #[default]
    Idle,
    /// Serial bits.
    Bits(SlotBits),
}

/// What a port puts on (or receives from) all of its lanes during one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The rate every lane runs at during this slot.
    pub rate: Rate,
    /// Per physical lane; lanes beyond the port's are [`LaneSignal::Idle`].
    pub lanes: [LaneSignal; MAX_LANES],
}

impl Slot {
    /// A slot of electrical idle on every lane.
    pub const fn idle(rate: Rate) -> Slot {
        Slot {
            rate,
            lanes: [LaneSignal::Idle; MAX_LANES],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_get_across_word_boundaries() {
        let mut s = SlotBits::default();
        for i in 0..13 {
            s.push(0x3FF ^ i, 10);
        }
        assert_eq!(s.len(), 130);
        for i in 0..13 {
            assert_eq!(s.get(i * 10, 10), 0x3FF ^ i as u64);
        }
        s.flip(63);
        assert_eq!(s.get(60, 10), (0x3FF ^ 6u64) ^ 0b1000);
        s.invert();
        assert_eq!(s.get(0, 10), 0);
        assert_eq!(s.get(120, 10), 0x3FF ^ (0x3FF ^ 12));
        let total: u32 = s.chunks().map(|(_, n)| n).sum();
        assert_eq!(total, 130);
    }

    #[test]
    fn capacity_is_bounded() {
        let mut s = SlotBits::default();
        for _ in 0..5 {
            s.push(u64::MAX, 64);
        }
        assert_eq!(s.len(), MAX_SLOT_BITS);
        assert_eq!(s.get(190, 64), 0b11);
    }
}
