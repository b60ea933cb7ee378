//! Sequence numbers: 10 bits, compared within a window of half the space.

/// Bits in a sequence number.
pub const SEQ_BITS: u32 = 10;
/// Sequence numbers before they wrap.
pub const SEQ_SPACE: u16 = 1 << SEQ_BITS;
const MASK: u16 = SEQ_SPACE - 1;

/// A 10-bit sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Seq(u16);

impl Seq {
    /// The number `n` modulo 1024.
    pub const fn new(n: u16) -> Seq {
        Seq(n & MASK)
    }

    /// The number.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// The next number.
    pub const fn next(self) -> Seq {
        Seq::new(self.0.wrapping_add(1))
    }

    /// The previous number.
    pub const fn prev(self) -> Seq {
        Seq::new(self.0.wrapping_sub(1))
    }

    /// How far `self` is ahead of `base`, modulo the sequence space.
    pub const fn distance_from(self, base: Seq) -> u16 {
        self.0.wrapping_sub(base.0) & MASK
    }

    /// Whether `self` comes after `other` (within half the sequence space).
    pub const fn is_after(self, other: Seq) -> bool {
        let d = self.distance_from(other);
        d != 0 && d < SEQ_SPACE / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_compares() {
        assert_eq!(Seq::new(1023).next(), Seq::new(0));
        assert_eq!(Seq::new(0).prev(), Seq::new(1023));
        assert!(Seq::new(2).is_after(Seq::new(1020)));
        assert!(!Seq::new(1020).is_after(Seq::new(2)));
        assert!(!Seq::new(5).is_after(Seq::new(5)));
        assert_eq!(Seq::new(3).distance_from(Seq::new(1022)), 5);
    }
}
