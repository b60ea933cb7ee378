//! A set of switch ports, as a 64-bit mask.

/// A set of up to 64 ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PortSet(pub u64);

impl PortSet {
    /// No ports.
    pub const EMPTY: PortSet = PortSet(0);

    /// One port.
    pub const fn single(port: usize) -> PortSet {
        PortSet(1u64 << (port & 63))
    }

    /// Whether `port` is in the set.
    pub const fn contains(self, port: usize) -> bool {
        port < 64 && self.0 & (1 << port) != 0
    }

    /// Ports in the set.
    pub const fn len(self) -> u32 {
        // Most sets (a unicast's route and outputs) have one port: counted without a population count,
        // about 20 instructions on processors the portable build cannot assume have POPCNT.
        if self.0 & self.0.wrapping_sub(1) == 0 {
            (self.0 != 0) as u32
        } else {
            self.0.count_ones()
        }
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The set with `port` added.
    pub const fn with(self, port: usize) -> PortSet {
        PortSet(self.0 | PortSet::single(port).0)
    }

    /// The `n`-th port of the set in increasing order, if there are more than `n`.
    pub fn nth(self, n: u32) -> Option<usize> {
        let mut bits = self.0;
        for _ in 0..n {
            bits &= bits.wrapping_sub(1);
        }
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }

    /// The ports, in increasing order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut bits = self.0;
        core::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let p = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(p)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::PortSet;

    /// The count of one port taken without a population count agrees with one, for every size of set.
    #[test]
    fn len_counts_every_port() {
        let mut sets = std::vec![
            0u64,
            1,
            1 << 63,
            u64::MAX,
            0x8000_0000_0000_0001,
            0x5555_5555_5555_5555
        ];
        sets.extend((0..64).map(|p| 1u64 << p));
        sets.extend((0..64).map(|p| (1u64 << p) | 1));
        sets.extend((0..64).map(|p| u64::MAX >> p));
        for bits in sets {
            assert_eq!(PortSet(bits).len(), bits.count_ones(), "{bits:#x}");
            assert_eq!(
                PortSet(bits).iter().count(),
                bits.count_ones() as usize,
                "{bits:#x}"
            );
        }
    }
}
