//! In-switch reduction (like NVLink SHARP): each contributor port sends its chunk of a reduction group's
//! buffer; the switch sums the chunks element by element and, once every contributor's has arrived, sends
//! the sum to the group's result ports (a multicast group).

use crate::multicast::GROUPS;
use crate::portset::PortSet;
use crate::SwitchError;

/// Reduction groups a switch holds.
pub const REDUCTION_GROUPS: usize = 32;
/// Largest chunk: one packet's payload.
pub const MAX_CHUNK: usize = 128;

/// How the elements of a chunk are summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Element {
    /// Little-endian 32-bit integers, wrapping: exact whatever the order of arrival.
    U32,
    /// Little-endian IEEE 754 single precision, summed in order of arrival.
    F32,
}

/// A reduction group: who contributes, where the result goes, what is summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReductionGroup {
    /// Ports that each contribute one chunk per chunk number.
    pub contributors: PortSet,
    /// The multicast group the result is sent to.
    pub result_group: u16,
    /// Element type.
    pub element: Element,
}

/// A finished reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduced {
    /// The reduction group.
    pub group: u16,
    /// The chunk number.
    pub chunk: u32,
    /// Where the result goes.
    pub result_group: u16,
    /// Bytes of `data` in use.
    pub len: u8,
    /// The sum.
    pub data: [u8; MAX_CHUNK],
}

#[derive(Clone, Copy, Debug)]
struct Accumulator {
    arrived: PortSet,
    len: u8,
    sum: [u8; MAX_CHUNK],
}

impl Accumulator {
    /// Nothing summed yet, for chunks of `len` bytes.
    const fn fresh(len: u8) -> Accumulator {
        Accumulator {
            arrived: PortSet::EMPTY,
            len,
            sum: [0; MAX_CHUNK],
        }
    }
}

/// The reduction engine, with `SLOTS` chunks in progress at once.
#[derive(Clone, Debug)]
pub struct Reducer<const SLOTS: usize> {
    groups: [Option<ReductionGroup>; REDUCTION_GROUPS],
    /// What each slot sums, as [`key`], or [`FREE`]: an open-addressed table with linear probing, so
    /// that a contribution finds its chunk's slot in about one probe (a scan of all 512 slots was 4% of
    /// a switch-reduce run), kept apart from the sums (8 bytes a slot to read instead of 140).
    keys: [u64; SLOTS],
    /// The sums; `slots[i]` means something only while `keys[i]` is not [`FREE`].
    slots: [Accumulator; SLOTS],
}

/// The key of a slot that sums nothing.
const FREE: u64 = u64::MAX;

/// A slot's key: its group and chunk number (never [`FREE`]: groups are below [`REDUCTION_GROUPS`]).
fn key(group: u16, chunk: u32) -> u64 {
    u64::from(group) << 32 | u64::from(chunk)
}

/// The group of a slot's [`key`].
fn group_of(key: u64) -> u16 {
    (key >> 32) as u16
}

impl<const SLOTS: usize> Default for Reducer<SLOTS> {
    fn default() -> Self {
        Reducer {
            groups: [None; REDUCTION_GROUPS],
            keys: [FREE; SLOTS],
            slots: [Accumulator::fresh(0); SLOTS],
        }
    }
}

impl<const SLOTS: usize> Reducer<SLOTS> {
    /// Program (or with `None`, remove) a reduction group. Removing a group abandons its chunks in
    /// progress (a fabric manager removes the groups of a contributor port that failed: their sums can
    /// never complete), and contributions to it are refused from then on. Programming it with other
    /// contributors or another element type abandons them too: they were summed under the old ones.
    pub fn set(&mut self, group: u16, config: Option<ReductionGroup>) -> Result<(), SwitchError> {
        if let Some(c) = config {
            if usize::from(c.result_group) >= GROUPS || c.contributors.is_empty() {
                return Err(SwitchError::NoSuchGroup {
                    group: c.result_group,
                });
            }
        }
        let slot = self
            .groups
            .get_mut(usize::from(group))
            .ok_or(SwitchError::NoSuchGroup { group })?;
        // Sums begun under other contributors or another element type can never complete right.
        let abandon = match (*slot, config) {
            (Some(old), Some(new)) => old.contributors != new.contributors || old.element != new.element,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        *slot = config;
        if abandon {
            let mut i = 0;
            while i < SLOTS {
                if self.keys[i] != FREE && group_of(self.keys[i]) == group {
                    // Another key may move into slot `i`: it is looked at again.
                    self.remove(i);
                } else {
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// Where the search for `key` starts.
    fn home(key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % SLOTS.max(1)
    }

    /// The slot after `i`, round the table.
    fn after(i: usize) -> usize {
        if i + 1 >= SLOTS {
            0
        } else {
            i + 1
        }
    }

    /// The slot that sums `key`, or else (`Err`) the free slot where it would go: the first from its
    /// home, which is where a search for it stops, or none if every slot is taken.
    fn probe(&self, key: u64) -> Result<usize, Option<usize>> {
        let mut i = Self::home(key);
        for _ in 0..SLOTS {
            match self.keys[i] {
                k if k == key => return Ok(i),
                FREE => return Err(Some(i)),
                _ => i = Self::after(i),
            }
        }
        Err(None)
    }

    /// Free slot `hole`, moving back into it any key further along that could no longer be found past a
    /// free slot (backward-shift deletion: the table needs no tombstones).
    fn remove(&mut self, mut hole: usize) {
        self.keys[hole] = FREE;
        let mut next = hole;
        for _ in 0..SLOTS {
            next = Self::after(next);
            let k = self.keys[next];
            if k == FREE {
                return;
            }
            // A key stays where it is if its home lies cyclically within (hole, next].
            let home = Self::home(k);
            let stays = if hole <= next {
                hole < home && home <= next
            } else {
                hole < home || home <= next
            };
            if !stays {
                self.keys[hole] = k;
                self.slots[hole] = self.slots[next];
                self.keys[next] = FREE;
                hole = next;
            }
        }
    }

    /// A group's configuration.
    pub fn get(&self, group: u16) -> Option<ReductionGroup> {
        self.groups.get(usize::from(group)).copied().flatten()
    }

    /// Chunks in progress.
    pub fn in_progress(&self) -> usize {
        self.keys.iter().filter(|&&k| k != FREE).count()
    }

    /// Port `port`'s contribution to chunk `chunk` of `group`. Returns the sum once every contributor's
    /// chunk has arrived. A chunk must be a whole number of 4-byte elements, at most 128 bytes, the same
    /// length from every contributor, once from each.
    pub fn contribute(
        &mut self,
        port: usize,
        group: u16,
        chunk: u32,
        data: &[u8],
    ) -> Result<Option<Reduced>, SwitchError> {
        let config = self.get(group).ok_or(SwitchError::NoSuchGroup { group })?;
        let bad = SwitchError::BadContribution { group, port };
        if !config.contributors.contains(port) || data.len() % 4 != 0 || data.len() > MAX_CHUNK {
            return Err(bad);
        }
        let index = match self.probe(key(group, chunk)) {
            Ok(i) => i,
            Err(free) => {
                let free = free.ok_or(SwitchError::ReductionFull { group })?;
                self.keys[free] = key(group, chunk);
                self.slots[free] = Accumulator::fresh(data.len() as u8);
                free
            }
        };
        let acc = &mut self.slots[index];
        if acc.arrived.contains(port) || usize::from(acc.len) != data.len() {
            return Err(bad);
        }
        let first = acc.arrived.is_empty();
        acc.arrived = acc.arrived.with(port);
        for (sum, x) in acc.sum.chunks_exact_mut(4).zip(data.chunks_exact(4)) {
            let x: [u8; 4] = [x[0], x[1], x[2], x[3]];
            let s: [u8; 4] = [sum[0], sum[1], sum[2], sum[3]];
            let out = match config.element {
                Element::U32 => u32::from_le_bytes(s)
                    .wrapping_add(u32::from_le_bytes(x))
                    .to_le_bytes(),
                Element::F32 if first => x,
                Element::F32 => (f32::from_le_bytes(s) + f32::from_le_bytes(x)).to_le_bytes(),
            };
            sum.copy_from_slice(&out);
        }
        if acc.arrived != config.contributors {
            return Ok(None);
        }
        let done = Reduced {
            group,
            chunk,
            result_group: config.result_group,
            len: acc.len,
            data: acc.sum,
        };
        self.remove(index);
        Ok(Some(done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn sums_arrive_once_all_contributors_have() {
        let mut r: Reducer<4> = Reducer::default();
        let cfg = ReductionGroup {
            contributors: PortSet(0b111),
            result_group: 5,
            element: Element::U32,
        };
        r.set(2, Some(cfg)).unwrap();
        let chunk = |v: u32| -> [u8; 8] {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&v.to_le_bytes());
            b[4..].copy_from_slice(&(u32::MAX - v).to_le_bytes());
            b
        };
        assert_eq!(r.contribute(1, 2, 9, &chunk(10)), Ok(None));
        assert_eq!(r.contribute(0, 2, 9, &chunk(20)), Ok(None));
        assert!(r.contribute(0, 2, 9, &chunk(20)).is_err(), "twice from one port");
        let done = r.contribute(2, 2, 9, &chunk(30)).unwrap().unwrap();
        assert_eq!(done.result_group, 5);
        assert_eq!(u32::from_le_bytes(done.data[..4].try_into().unwrap()), 60);
        assert_eq!(
            u32::from_le_bytes(done.data[4..8].try_into().unwrap()),
            (3 * u32::MAX as u64 - 60) as u32
        );
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn malformed_contributions_are_refused() {
        let mut r: Reducer<1> = Reducer::default();
        r.set(
            0,
            Some(ReductionGroup {
                contributors: PortSet(0b11),
                result_group: 0,
                element: Element::F32,
            }),
        )
        .unwrap();
        assert!(r.contribute(5, 0, 0, &[0; 4]).is_err(), "not a contributor");
        assert!(r.contribute(0, 0, 0, &[0; 3]).is_err(), "not whole elements");
        assert!(r.contribute(0, 1, 0, &[0; 4]).is_err(), "no such group");
        r.contribute(0, 0, 0, &[0; 8]).unwrap();
        assert!(r.contribute(1, 0, 0, &[0; 4]).is_err(), "length differs");
        assert_eq!(
            r.contribute(0, 0, 1, &[0; 8]),
            Err(SwitchError::ReductionFull { group: 0 })
        );
    }

    /// Every slot is found again, past blocks of eight and in the remainder, whatever the order.
    #[test]
    fn many_chunks_in_progress_each_find_their_slot() {
        let mut r: Reducer<13> = Reducer::default();
        let cfg = ReductionGroup {
            contributors: PortSet(0b11),
            result_group: 1,
            element: Element::U32,
        };
        r.set(3, Some(cfg)).unwrap();
        for chunk in 0..13u32 {
            assert_eq!(r.contribute(0, 3, chunk * 7, &chunk.to_le_bytes()), Ok(None));
        }
        assert_eq!(r.in_progress(), 13);
        assert_eq!(
            r.contribute(0, 3, 1000, &[0; 4]),
            Err(SwitchError::ReductionFull { group: 3 })
        );
        for chunk in (0..13u32).rev() {
            let done = r
                .contribute(1, 3, chunk * 7, &100u32.to_le_bytes())
                .unwrap()
                .unwrap();
            assert_eq!(
                (done.chunk, done.data[..4].to_vec()),
                (chunk * 7, (chunk + 100).to_le_bytes().to_vec())
            );
        }
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn the_slot_table_sums_like_a_map_through_any_order_of_work() {
        // Contributions, completions and groups removed in a random order, with the table often full
        // (backward shifts wrap round it), against a plain map of what is in progress.
        use std::collections::BTreeMap;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x2545_F491_4F6C_DD1D);
        let mut rand = move |n: u64| rng.next_u64() % n;
        let cfg = ReductionGroup {
            contributors: PortSet(0b111),
            result_group: 0,
            element: Element::U32,
        };
        let mut r: Reducer<11> = Reducer::default();
        let mut model: BTreeMap<(u16, u32), (u16, u32)> = BTreeMap::new();
        for g in 0..3 {
            r.set(g, Some(cfg)).unwrap();
        }
        for step in 0..200_000 {
            let (group, chunk) = (rand(3) as u16, rand(40) as u32);
            if rand(500) == 0 {
                r.set(group, None).unwrap();
                r.set(group, Some(cfg)).unwrap();
                model.retain(|&(g, _), _| g != group);
                continue;
            }
            let (seen, sum) = model.get(&(group, chunk)).copied().unwrap_or((0, 0));
            let port = (0..3).find(|p| seen & (1 << p) == 0).unwrap();
            let value = rand(1000) as u32;
            let got = r.contribute(port, group, chunk, &value.to_le_bytes());
            if seen == 0 && model.len() == 11 {
                assert_eq!(got, Err(SwitchError::ReductionFull { group }), "step {step}");
                continue;
            }
            let (seen, sum) = (seen | 1 << port, sum + value);
            if seen == 0b111 {
                let done = got.unwrap().unwrap();
                assert_eq!(
                    (done.group, done.chunk, &done.data[..4]),
                    (group, chunk, &sum.to_le_bytes()[..])
                );
                model.remove(&(group, chunk));
            } else {
                assert_eq!(got, Ok(None), "step {step}");
                model.insert((group, chunk), (seen, sum));
            }
            assert_eq!(r.in_progress(), model.len(), "step {step}");
        }
    }

    /// A group committed again with other contributors (a manager leaving out a port that failed) or
    /// another element type abandons its sums in progress, as removing it does: they were summed under
    /// the old configuration, and would otherwise wait for ever for a port no longer a contributor, or
    /// never match the new set, and hold their slots.
    #[test]
    fn reprogramming_a_group_abandons_its_sums_in_progress() {
        let mut r: Reducer<4> = Reducer::default();
        let three = ReductionGroup {
            contributors: PortSet(0b111),
            result_group: 1,
            element: Element::U32,
        };
        r.set(0, Some(three)).unwrap();
        assert_eq!(r.contribute(0, 0, 7, &1u32.to_le_bytes()), Ok(None));
        assert_eq!(r.contribute(1, 0, 7, &2u32.to_le_bytes()), Ok(None));
        assert_eq!(r.contribute(2, 0, 8, &4u32.to_le_bytes()), Ok(None));
        // The same configuration again keeps them.
        r.set(0, Some(three)).unwrap();
        assert_eq!(r.in_progress(), 2);
        let two = ReductionGroup {
            contributors: PortSet(0b011),
            ..three
        };
        r.set(0, Some(two)).unwrap();
        assert_eq!(r.in_progress(), 0, "summed for the old contributors");
        for chunk in [7, 8] {
            assert_eq!(r.contribute(0, 0, chunk, &10u32.to_le_bytes()), Ok(None));
            let done = r.contribute(1, 0, chunk, &20u32.to_le_bytes()).unwrap().unwrap();
            assert_eq!(done.data[..4], 30u32.to_le_bytes(), "chunk {chunk}");
        }
        assert_eq!(r.contribute(0, 0, 9, &1.5f32.to_le_bytes()), Ok(None));
        r.set(
            0,
            Some(ReductionGroup {
                element: Element::F32,
                ..two
            }),
        )
        .unwrap();
        assert_eq!(r.in_progress(), 0, "summed as another type");
    }

    #[test]
    fn removing_a_group_abandons_its_sums_in_progress() {
        let mut r: Reducer<2> = Reducer::default();
        let cfg = ReductionGroup {
            contributors: PortSet(0b11),
            result_group: 1,
            element: Element::U32,
        };
        r.set(0, Some(cfg)).unwrap();
        r.set(1, Some(cfg)).unwrap();
        assert_eq!(r.contribute(0, 0, 7, &[1; 4]), Ok(None));
        assert_eq!(r.contribute(0, 1, 7, &[1; 4]), Ok(None));
        r.set(0, None).unwrap();
        assert_eq!(r.in_progress(), 1, "only group 0's chunk is abandoned");
        assert_eq!(
            r.contribute(1, 0, 7, &[1; 4]),
            Err(SwitchError::NoSuchGroup { group: 0 }),
            "a late contribution to a removed group is refused, not a new sum"
        );
        assert!(r.contribute(1, 1, 7, &[1; 4]).unwrap().is_some());
        assert_eq!(r.in_progress(), 0);
    }
}
