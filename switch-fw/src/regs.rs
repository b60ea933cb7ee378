//! The register interface: how a fabric manager (or the firmware on the switch's soft core) programs the
//! tables, as 32-bit writes to a flat address space. `docs/spec.md` section 5 is the normative map.
//!
//! | address | register |
//! |---|---|
//! | `0x0000_0000 + 8e` | route to endpoint `e` (0-1023): output ports 0-31 |
//! | `0x0000_0004 + 8e` | route to endpoint `e`: output ports 32-63 |
//! | `0x0001_0000 + 4e` | partition of endpoint `e` (bits 7:0) |
//! | `0x0002_0000 + 8g` | multicast group `g` (0-63): ports 0-31 |
//! | `0x0002_0004 + 8g` | multicast group `g`: ports 32-63 |
//! | `0x0003_0000 + 16g` | reduction group `g` (0-31): contributor ports 0-31 |
//! | `0x0003_0004 + 16g` | reduction group `g`: contributor ports 32-63 |
//! | `0x0003_0008 + 16g` | reduction group `g`: bits 15:0 result multicast group, bits 17:16 element (0 none, 1 u32, 2 f32); writing it commits the group |
//! | `0x0004_0000` to `0x0005_FFFC` | read only: the node's identity and its ports' peers ([`crate::identity`]) |
//!
//! Route and group masks take effect as each half is written (write the half that removes ports first
//! when changing a live route).

use crate::portset::PortSet;
use crate::reduce::{Element, ReductionGroup};
use crate::switch::Switch;
use crate::SwitchError;

/// Base of the route table.
pub const ROUTES: u32 = 0x0000_0000;
/// Base of the partition table.
pub const PARTITIONS: u32 = 0x0001_0000;
/// Base of the multicast groups.
pub const MULTICAST: u32 = 0x0002_0000;
/// Base of the reduction groups.
pub const REDUCTION: u32 = 0x0003_0000;
pub use crate::identity::PORT_COUNT;

fn set_half(mask: PortSet, high: bool, value: u32) -> PortSet {
    if high {
        PortSet((mask.0 & 0xFFFF_FFFF) | (u64::from(value) << 32))
    } else {
        PortSet((mask.0 & !0xFFFF_FFFF) | u64::from(value))
    }
}

fn half(mask: PortSet, high: bool) -> u32 {
    if high {
        (mask.0 >> 32) as u32
    } else {
        mask.0 as u32
    }
}

impl<const PORTS: usize, const SLOTS: usize, const REDUCE: usize> Switch<PORTS, SLOTS, REDUCE> {
    /// Write a register.
    pub fn write_register(&mut self, address: u32, value: u32) -> Result<(), SwitchError> {
        let bad = SwitchError::BadRegister { address };
        if address % 4 != 0 {
            return Err(bad);
        }
        match address {
            a if a < PARTITIONS => {
                let endpoint = u16::try_from((a - ROUTES) / 8).map_err(|_| bad)?;
                let high = (a - ROUTES) % 8 == 4;
                let mask = set_half(self.routes.get(endpoint), high, value);
                self.routes.set(endpoint, mask).map_err(|_| bad)
            }
            a if a < MULTICAST => {
                let endpoint = u16::try_from((a - PARTITIONS) / 4).map_err(|_| bad)?;
                self.partitions.assign(endpoint, value as u8).map_err(|_| bad)
            }
            a if a < REDUCTION => {
                let group = u16::try_from((a - MULTICAST) / 8).map_err(|_| bad)?;
                let high = (a - MULTICAST) % 8 == 4;
                let current = self.multicast.get(group).unwrap_or_default();
                self.multicast
                    .set(group, set_half(current, high, value))
                    .map_err(|_| bad)
            }
            a if a < PORT_COUNT => {
                let group = u16::try_from((a - REDUCTION) / 16).map_err(|_| bad)?;
                let field = (a - REDUCTION) % 16;
                let staged = self.staged_reduction(group);
                let next = match field {
                    0 | 4 => ReductionGroup {
                        contributors: set_half(staged.contributors, field == 4, value),
                        ..staged
                    },
                    8 => ReductionGroup {
                        result_group: value as u16,
                        element: match (value >> 16) & 3 {
                            1 => Element::U32,
                            2 => Element::F32,
                            0 => return self.reducer.set(group, None).map_err(|_| bad),
                            _ => return Err(bad),
                        },
                        ..staged
                    },
                    _ => return Err(bad),
                };
                self.stage_reduction(group, next).map_err(|_| bad)
            }
            _ => Err(bad),
        }
    }

    /// Read a register.
    pub fn read_register(&self, address: u32) -> Result<u32, SwitchError> {
        let bad = SwitchError::BadRegister { address };
        if address % 4 != 0 {
            return Err(bad);
        }
        match address {
            a if a < PARTITIONS => {
                let endpoint = u16::try_from((a - ROUTES) / 8).map_err(|_| bad)?;
                if usize::from(endpoint) >= crate::MAX_ENDPOINTS {
                    return Err(bad);
                }
                Ok(half(self.routes.get(endpoint), (a - ROUTES) % 8 == 4))
            }
            a if a < MULTICAST => {
                let endpoint = u16::try_from((a - PARTITIONS) / 4).map_err(|_| bad)?;
                self.partitions.of(endpoint).map(u32::from).ok_or(bad)
            }
            a if a < REDUCTION => {
                let group = u16::try_from((a - MULTICAST) / 8).map_err(|_| bad)?;
                if usize::from(group) >= crate::multicast::GROUPS {
                    return Err(bad);
                }
                Ok(half(
                    self.multicast.get(group).unwrap_or_default(),
                    (a - MULTICAST) % 8 == 4,
                ))
            }
            a if a < PORT_COUNT => {
                let group = u16::try_from((a - REDUCTION) / 16).map_err(|_| bad)?;
                if usize::from(group) >= crate::reduce::REDUCTION_GROUPS {
                    return Err(bad);
                }
                let g = self.staged_reduction(group);
                match (a - REDUCTION) % 16 {
                    0 => Ok(half(g.contributors, false)),
                    4 => Ok(half(g.contributors, true)),
                    8 => Ok(u32::from(g.result_group)
                        | match self.reducer.get(group).map(|c| c.element) {
                            None => 0,
                            Some(Element::U32) => 1 << 16,
                            Some(Element::F32) => 2 << 16,
                        }),
                    _ => Err(bad),
                }
            }
            a => self.identity.read_register(a),
        }
    }

    fn staged_reduction(&self, group: u16) -> ReductionGroup {
        self.reducer.get(group).unwrap_or(ReductionGroup {
            contributors: PortSet::EMPTY,
            result_group: 0,
            element: Element::U32,
        })
    }

    fn stage_reduction(&mut self, group: u16, config: ReductionGroup) -> Result<(), SwitchError> {
        // A group only exists once it has contributors; until then the halves are held by leaving the
        // group unset and retrying the commit when the control word is written.
        if config.contributors.is_empty() {
            return Ok(());
        }
        self.reducer.set(group, Some(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::Flow;

    #[test]
    fn tables_are_programmed_through_registers() {
        let mut s: Switch<8, 16> = Switch::new();
        s.write_register(ROUTES + 8 * 42, 0b1010).unwrap();
        assert_eq!(s.routes.get(42), PortSet(0b1010));
        assert_eq!(s.read_register(ROUTES + 8 * 42).unwrap(), 0b1010);
        assert!([1, 3].contains(
            &s.routes
                .select(Flow {
                    source: 1,
                    destination: 42,
                    vc: 0
                })
                .unwrap()
        ));
        s.write_register(PARTITIONS + 4 * 7, 3).unwrap();
        assert_eq!(s.partitions.of(7), Some(3));
        s.write_register(MULTICAST + 8 * 5, 0xF0).unwrap();
        assert_eq!(s.multicast.get(5).unwrap(), PortSet(0xF0));
        s.write_register(REDUCTION + 16 * 2, 0b111).unwrap();
        s.write_register(REDUCTION + 16 * 2 + 8, 5 | 1 << 16).unwrap();
        let g = s.reducer.get(2).unwrap();
        assert_eq!(
            (g.contributors, g.result_group, g.element),
            (PortSet(0b111), 5, Element::U32)
        );
        assert_eq!(s.read_register(PORT_COUNT), Ok(8));
    }

    #[test]
    fn bad_addresses_are_refused() {
        let mut s: Switch<8, 16> = Switch::new();
        for a in [
            2,
            ROUTES + 8 * 1024,
            PARTITIONS + 4 * 1024,
            MULTICAST + 8 * 64,
            REDUCTION + 16 * 32,
            0x0005_0000,
        ] {
            assert_eq!(
                s.write_register(a, 1),
                Err(SwitchError::BadRegister { address: a }),
                "{a:#x}"
            );
        }
        assert!(s.write_register(REDUCTION + 8, 3 << 16).is_err());
    }
}
