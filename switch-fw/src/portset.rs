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
        self.0.count_ones()
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
