//! Lanes: how a byte stream is spread over a link's lanes and put back together.
//!
//! - [`stripe`]: byte `i` of the stream goes on logical lane `i mod width` (PCIe 4.2.1.2 and 4.2.2.3).
//! - [`deskew`]: lanes arrive with different delays; ordered sets, which every lane sends in the same
//!   symbol time, line them up again.
//! - [`LaneMap`]: which physical lane carries which logical lane (lane reversal), and which lanes have
//!   their differential pair swapped (polarity inversion).

pub mod deskew;
pub mod stripe;

use crate::error::Error;

/// Most lanes a port may have.
pub const MAX_LANES: usize = 16;

/// A negotiated link width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LinkWidth {
    /// One lane.
    X1 = 1,
    /// Two lanes.
    X2 = 2,
    /// Four lanes.
    X4 = 4,
    /// Eight lanes.
    X8 = 8,
    /// Sixteen lanes.
    X16 = 16,
}

impl LinkWidth {
    /// Widest first: the order in which training tries them.
    pub const WIDEST_FIRST: [LinkWidth; 5] = [
        LinkWidth::X16,
        LinkWidth::X8,
        LinkWidth::X4,
        LinkWidth::X2,
        LinkWidth::X1,
    ];

    /// Lanes in this width.
    pub const fn lanes(self) -> usize {
        self as usize
    }

    /// The width of `lanes` lanes, if it is one a link can have.
    pub const fn from_lanes(lanes: usize) -> Result<LinkWidth, Error> {
        Ok(match lanes {
            1 => LinkWidth::X1,
            2 => LinkWidth::X2,
            4 => LinkWidth::X4,
            8 => LinkWidth::X8,
            16 => LinkWidth::X16,
            _ => return Err(Error::UnsupportedWidth { lanes }),
        })
    }
}

/// Which physical lanes make up a link and in which order.
///
/// Logical lane `l` is physical lane `l` normally, and physical lane `port_lanes - 1 - l` when the link is
/// reversed (the board wired lane 0 of one chip to the last lane of the other, or the usable lanes are at
/// the top of the port). Polarity inversion is a per-physical-lane bit mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LaneMap {
    /// Lanes on the port (physical).
    pub port_lanes: u8,
    /// Negotiated width.
    pub width: LinkWidth,
    /// Whether logical lane 0 is the port's last physical lane.
    pub reversed: bool,
}

impl LaneMap {
    /// A map of `width` lanes over a port of `port_lanes`, checked.
    pub const fn new(port_lanes: usize, width: LinkWidth, reversed: bool) -> Result<LaneMap, Error> {
        if !fits(port_lanes, width) {
            return Err(Error::UnsupportedWidth { lanes: width.lanes() });
        }
        Ok(LaneMap {
            port_lanes: port_lanes as u8,
            width,
            reversed,
        })
    }

    /// The physical lane carrying logical lane `logical`, if it is part of the link (and the map is one
    /// [`LaneMap::new`] would make: its fields are public).
    pub const fn physical(&self, logical: usize) -> Option<usize> {
        let port_lanes = self.port_lanes as usize;
        if !fits(port_lanes, self.width) || logical >= self.width.lanes() {
            None
        } else if self.reversed {
            Some(port_lanes - 1 - logical)
        } else {
            Some(logical)
        }
    }

    /// The logical lane a physical lane carries, if it is part of the link (and the map is one
    /// [`LaneMap::new`] would make).
    pub const fn logical(&self, physical: usize) -> Option<usize> {
        let port_lanes = self.port_lanes as usize;
        if !fits(port_lanes, self.width) || physical >= port_lanes {
            return None;
        }
        let logical = if self.reversed {
            port_lanes - 1 - physical
        } else {
            physical
        };
        if logical < self.width.lanes() {
            Some(logical)
        } else {
            None
        }
    }

    /// A bit mask of the physical lanes in the link.
    pub const fn physical_mask(&self) -> u32 {
        let mut mask = 0;
        let mut l = 0;
        while l < self.width.lanes() {
            if let Some(physical) = self.physical(l) {
                mask |= 1 << physical;
            }
            l += 1;
        }
        mask
    }

    /// The widest link that the lanes in `good` (a physical lane mask) can form on a port of `port_lanes`:
    /// lanes `0..w` in order, or the top `w` lanes reversed. Prefers the unreversed map at equal width.
    pub fn widest(port_lanes: usize, good: u32) -> Option<LaneMap> {
        for width in LinkWidth::WIDEST_FIRST {
            for reversed in [false, true] {
                if let Ok(map) = LaneMap::new(port_lanes, width, reversed) {
                    if map.physical_mask() & good == map.physical_mask() {
                        return Some(map);
                    }
                }
            }
        }
        None
    }
}

/// Whether a link of `width` fits on a port of `port_lanes`.
const fn fits(port_lanes: usize, width: LinkWidth) -> bool {
    port_lanes <= MAX_LANES && width.lanes() <= port_lanes
}

/// Invert every bit of a lane's serial stream: what a receiver does once it knows the lane's differential
/// pair is swapped. `count` bits of `bits` are meaningful.
pub const fn invert_polarity(bits: u64, count: u32) -> u64 {
    let mask = if count >= 64 {
        u64::MAX
    } else {
        (1u64 << count) - 1
    };
    !bits & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_lane_3_on_x8_leaves_the_top_four_reversed() {
        let good = 0xFF & !(1 << 3);
        let map = LaneMap::widest(8, good).unwrap();
        assert_eq!((map.width, map.reversed), (LinkWidth::X4, true));
        assert_eq!([0, 1, 2, 3].map(|l| map.physical(l)), [7, 6, 5, 4].map(Some));
        assert_eq!(map.logical(4), Some(3));
        assert_eq!(map.logical(3), None);
    }

    #[test]
    fn full_and_empty_ports() {
        assert_eq!(LaneMap::widest(16, 0xFFFF).map(|m| m.width), Some(LinkWidth::X16));
        assert_eq!(LaneMap::widest(8, 0), None);
        assert_eq!(
            LaneMap::widest(8, 0b1000_0000).map(|m| (m.width, m.reversed)),
            Some((LinkWidth::X1, true))
        );
    }

    /// A logical lane beyond the link, or a map whose public fields say what `new` refuses (no lanes, a
    /// link wider than its port, a port wider than any), maps to no lane: no underflow, no lane off the
    /// port, no shift past the mask's bits.
    #[test]
    fn lanes_outside_the_link_or_odd_maps_map_to_none() {
        for reversed in [false, true] {
            let map = LaneMap::new(8, LinkWidth::X4, reversed).unwrap();
            assert_eq!([4, 8, 9, usize::MAX].map(|l| map.physical(l)), [None; 4]);
            assert_eq!([8, 9, usize::MAX].map(|l| map.logical(l)), [None; 3]);
            for (port_lanes, width) in [
                (0, LinkWidth::X1),
                (2, LinkWidth::X4),
                (40, LinkWidth::X16),
                (u8::MAX, LinkWidth::X1),
            ] {
                let odd = LaneMap {
                    port_lanes,
                    width,
                    reversed,
                };
                assert_eq!([0, 1, 3].map(|l| odd.physical(l)), [None; 3], "{odd:?}");
                assert_eq!([0, 1, 39].map(|l| odd.logical(l)), [None; 3], "{odd:?}");
                assert_eq!(odd.physical_mask(), 0, "{odd:?}");
            }
        }
    }

    #[test]
    fn widths_are_checked() {
        assert!(LinkWidth::from_lanes(3).is_err());
        assert!(LaneMap::new(4, LinkWidth::X8, false).is_err());
        assert_eq!(invert_polarity(0b1010, 4), 0b0101);
    }
}
