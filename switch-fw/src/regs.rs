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
//! Route and multicast masks take effect as each half is written (write the half that removes ports
//! first when changing a live route). A reduction group's contributor masks are staged: they read back
//! as written and take effect, together, when the control word commits the group.

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

/// The reduction group and the offset within its 16 bytes that register `a` (at or above [`REDUCTION`])
/// addresses, if there is such a group.
fn reduction_register(a: u32) -> Option<(u16, u32)> {
    let group = u16::try_from((a - REDUCTION) / 16).ok()?;
    (usize::from(group) < crate::reduce::REDUCTION_GROUPS).then_some((group, (a - REDUCTION) % 16))
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
        // A mask naming a port the switch does not have: a route there would queue packets nowhere, a
        // reduction wait for ever for a contributor.
        let port_mask = self.port_mask();
        let ports = |mask: PortSet| {
            if mask.0 & !port_mask == 0 {
                Ok(mask)
            } else {
                Err(bad)
            }
        };
        match address {
            a if a < PARTITIONS => {
                let endpoint = u16::try_from((a - ROUTES) / 8).map_err(|_| bad)?;
                let high = (a - ROUTES) % 8 == 4;
                let mask = ports(set_half(self.routes.get(endpoint), high, value))?;
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
                let mask = ports(set_half(current, high, value))?;
                self.multicast.set(group, mask).map_err(|_| bad)
            }
            a if a < PORT_COUNT => {
                let (group, field) = reduction_register(a).ok_or(bad)?;
                let index = usize::from(group);
                let contributors = self.contributors(group);
                match field {
                    field @ (0 | 4) => {
                        self.staged_contributors[index] =
                            Some(ports(set_half(contributors, field == 4, value))?);
                        Ok(())
                    }
                    // Bits 31:18 are reserved: a write with any set means something this switch does
                    // not know (a hostile 0004_0001h would otherwise read as element 0 and remove the
                    // group).
                    8 if value >> 18 != 0 => Err(bad),
                    8 => {
                        let config = match (value >> 16) & 3 {
                            1 => Some(Element::U32),
                            2 => Some(Element::F32),
                            0 => None,
                            _ => return Err(bad),
                        }
                        .map(|element| ReductionGroup {
                            contributors,
                            result_group: value as u16,
                            element,
                        });
                        // A group with no contributors, or a result group out of range, is refused and
                        // changes nothing, what is staged included.
                        self.reducer.set(group, config).map_err(|_| bad)?;
                        self.staged_contributors[index] = None;
                        Ok(())
                    }
                    _ => Err(bad),
                }
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
                let (group, field) = reduction_register(a).ok_or(bad)?;
                let live = self.reducer.get(group);
                match field {
                    0 => Ok(half(self.contributors(group), false)),
                    4 => Ok(half(self.contributors(group), true)),
                    8 => Ok(match live {
                        None => 0,
                        Some(g) => {
                            u32::from(g.result_group)
                                | match g.element {
                                    Element::U32 => 1 << 16,
                                    Element::F32 => 2 << 16,
                                }
                        }
                    }),
                    _ => Err(bad),
                }
            }
            a => self.identity.read_register(a),
        }
    }

    /// A reduction group's contributors as its registers read: those staged since its last commit, or
    /// else the live group's (none if there is no group).
    fn contributors(&self, group: u16) -> PortSet {
        self.staged_contributors[usize::from(group)]
            .or_else(|| self.reducer.get(group).map(|g| g.contributors))
            .unwrap_or(PortSet::EMPTY)
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

    /// Contributor masks are staged: they read back as written, change nothing until the control word
    /// commits them, and may move a group's contributors from one half to the other. A commit that is
    /// refused changes nothing.
    #[test]
    fn reduction_masks_take_effect_when_committed() {
        let mut s: Switch<64, 16> = Switch::new();
        let (low, high, control) = (REDUCTION + 16 * 3, REDUCTION + 16 * 3 + 4, REDUCTION + 16 * 3 + 8);
        s.write_register(low, 0xF).unwrap();
        assert_eq!(s.reducer.get(3), None, "not before the commit");
        assert_eq!((s.read_register(low), s.read_register(control)), (Ok(0xF), Ok(0)));
        s.write_register(control, 1 | 1 << 16).unwrap();
        assert_eq!(s.reducer.get(3).unwrap().contributors, PortSet(0xF));
        // Ports 0-3 to ports 32-35: the low half cleared, then the high half set, then the commit.
        s.write_register(low, 0).unwrap();
        assert_eq!(s.reducer.get(3).unwrap().contributors, PortSet(0xF), "still live");
        s.write_register(high, 0xF).unwrap();
        assert_eq!((s.read_register(low), s.read_register(high)), (Ok(0), Ok(0xF)));
        s.write_register(control, 2 | 2 << 16).unwrap();
        let g = s.reducer.get(3).unwrap();
        assert_eq!(
            (g.contributors, g.result_group, g.element),
            (PortSet(0xF << 32), 2, Element::F32)
        );
        assert_eq!(s.read_register(control), Ok(2 | 2 << 16));
        // Refused: a result group out of range, and a group with no contributors.
        s.write_register(low, 1).unwrap();
        let refused = Err(SwitchError::BadRegister { address: control });
        assert_eq!(s.write_register(control, 100 | 1 << 16), refused);
        assert_eq!(s.reducer.get(3).unwrap().contributors, PortSet(0xF << 32));
        assert_eq!(s.read_register(low), Ok(1), "still staged");
        let empty = REDUCTION + 16 * 4;
        assert_eq!(
            s.write_register(empty + 8, 1 | 1 << 16),
            Err(SwitchError::BadRegister { address: empty + 8 })
        );
        assert_eq!(
            s.write_register(empty + 8, 100 | 1 << 16),
            Err(SwitchError::BadRegister { address: empty + 8 })
        );
        // Element 0 removes the group and what was staged for it.
        s.write_register(control, 0).unwrap();
        assert_eq!(
            (s.reducer.get(3), s.read_register(low), s.read_register(control)),
            (None, Ok(0), Ok(0))
        );
    }
}
