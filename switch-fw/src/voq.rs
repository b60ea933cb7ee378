//! Virtual output queues: one queue per (input, virtual channel, output), so that a packet waiting for a
//! busy output never blocks one behind it bound elsewhere (no head-of-line blocking). All queues share one
//! pool of `SLOTS` descriptors, linked in place, as a switch's shared buffer does; each (port, virtual
//! channel) may hold at most its share, `SLOTS / ((PORTS + 1) * VCS)`, so that no input, and no channel,
//! can take the buffer another needs to make progress (virtual channels must stay independent, or the
//! protocols above them can deadlock). The switch's own engine (input `PORTS`) may use whatever is free:
//! it bounds its own work.

use crate::arbiter::INPUTS;
use crate::VCS;

const NIL: u16 = u16::MAX;

/// A packet waiting at an input: the caller's handle for its bytes, and what the switch needs to know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Descriptor {
    /// The caller's handle for the packet.
    pub handle: u32,
    /// Flits in the packet (what it costs in credits downstream).
    pub flits: u8,
    /// The arbitration cycle in which it arrived (for cut-through).
    pub arrived: u32,
}

/// The virtual output queues of a switch of `PORTS` ports (plus its reduction engine as one more input).
#[derive(Clone, Debug)]
pub struct Voqs<const PORTS: usize, const SLOTS: usize> {
    pool: [Descriptor; SLOTS],
    next: [u16; SLOTS],
    free: u16,
    /// Descriptors in use, all queues (the sum of `used`, kept so that asking costs nothing).
    in_use: usize,
    used: [[u16; VCS]; INPUTS],
    head: [[[u16; PORTS]; VCS]; INPUTS],
    tail: [[[u16; PORTS]; VCS]; INPUTS],
}

impl<const PORTS: usize, const SLOTS: usize> Default for Voqs<PORTS, SLOTS> {
    fn default() -> Self {
        let mut next = [NIL; SLOTS];
        for (i, n) in next.iter_mut().enumerate() {
            *n = if i + 1 < SLOTS { (i + 1) as u16 } else { NIL };
        }
        Voqs {
            pool: [Descriptor::default(); SLOTS],
            next,
            free: if SLOTS > 0 { 0 } else { NIL },
            in_use: 0,
            used: [[0; VCS]; INPUTS],
            head: [[[NIL; PORTS]; VCS]; INPUTS],
            tail: [[[NIL; PORTS]; VCS]; INPUTS],
        }
    }
}

impl<const PORTS: usize, const SLOTS: usize> Voqs<PORTS, SLOTS> {
    const FITS: () = assert!(SLOTS < NIL as usize, "at most 65534 descriptors");

    /// Descriptors each (port, virtual channel) may hold.
    pub const fn share() -> usize {
        SLOTS / ((PORTS + 1) * VCS)
    }

    /// Descriptors `input` holds, all channels.
    pub fn used(&self, input: usize) -> usize {
        self.used
            .get(input)
            .map_or(0, |u| u.iter().map(|&n| usize::from(n)).sum())
    }

    /// Whether `input` may queue another packet (one copy) on `vc`.
    pub fn has_room(&self, input: usize, vc: usize) -> bool {
        let used = self
            .used
            .get(input)
            .and_then(|u| u.get(vc))
            .map_or(usize::MAX, |&n| usize::from(n));
        self.free != NIL && vc < VCS && (input == PORTS || used < Self::share())
    }

    /// How many more packets (copies) `input` may queue on `vc`.
    pub fn room(&self, input: usize, vc: usize) -> usize {
        let used = self
            .used
            .get(input)
            .and_then(|u| u.get(vc))
            .map_or(usize::MAX, |&n| usize::from(n));
        let pool = self.free_slots();
        if vc >= VCS {
            0
        } else if input == PORTS {
            pool
        } else {
            Self::share().saturating_sub(used).min(pool)
        }
    }

    /// Descriptors free in the pool.
    pub fn free_slots(&self) -> usize {
        SLOTS - self.in_use
    }

    /// Whether the queue of (`input`, `vc`, `output`) is empty.
    pub fn is_empty(&self, input: usize, vc: usize, output: usize) -> bool {
        self.peek(input, vc, output).is_none()
    }

    /// Append to the queue of (`input`, `vc`, `output`); false if there is no room or an index is out of
    /// range.
    pub fn push(&mut self, input: usize, vc: usize, output: usize, d: Descriptor) -> bool {
        #[allow(clippy::let_unit_value)]
        let () = Self::FITS;
        if input >= INPUTS || vc >= VCS || output >= PORTS || !self.has_room(input, vc) {
            return false;
        }
        let slot = self.free;
        let s = usize::from(slot);
        self.free = self.next[s];
        self.pool[s] = d;
        self.next[s] = NIL;
        match self.tail[input][vc][output] {
            NIL => self.head[input][vc][output] = slot,
            t => self.next[usize::from(t)] = slot,
        }
        self.tail[input][vc][output] = slot;
        self.used[input][vc] += 1;
        self.in_use += 1;
        true
    }

    /// The head of the queue of (`input`, `vc`, `output`).
    pub fn peek(&self, input: usize, vc: usize, output: usize) -> Option<&Descriptor> {
        let h = *self.head.get(input)?.get(vc)?.get(output)?;
        (h != NIL).then(|| &self.pool[usize::from(h)])
    }

    /// Take the head of the queue of (`input`, `vc`, `output`).
    pub fn pop(&mut self, input: usize, vc: usize, output: usize) -> Option<Descriptor> {
        let h = *self.head.get(input)?.get(vc)?.get(output)?;
        if h == NIL {
            return None;
        }
        let s = usize::from(h);
        self.head[input][vc][output] = self.next[s];
        if self.next[s] == NIL {
            self.tail[input][vc][output] = NIL;
        }
        self.next[s] = self.free;
        self.free = h;
        self.used[input][vc] -= 1;
        self.in_use -= 1;
        Some(self.pool[s])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_fifo_and_channels_keep_to_their_share() {
        let mut q: Voqs<4, 60> = Voqs::default();
        assert_eq!(Voqs::<4, 60>::share(), 3);
        let d = |handle| Descriptor {
            handle,
            flits: 9,
            arrived: 0,
        };
        assert!(q.push(0, 1, 2, d(10)));
        assert!(q.push(0, 1, 3, d(20)));
        assert!(q.push(0, 1, 2, d(11)));
        assert!(!q.push(0, 1, 2, d(12)), "input 0, channel 1: share used");
        assert!(q.push(0, 2, 2, d(13)), "another channel still has room");
        assert!(q.push(1, 1, 2, d(30)), "another input still has room");
        assert!(
            q.push(4, 1, 2, d(40))
                && q.push(4, 1, 2, d(41))
                && q.push(4, 1, 2, d(42))
                && q.push(4, 1, 2, d(43)),
            "the engine is not held to a share"
        );
        assert_eq!(q.pop(0, 1, 2).map(|d| d.handle), Some(10));
        assert_eq!(q.pop(0, 1, 2).map(|d| d.handle), Some(11));
        assert_eq!(q.pop(0, 1, 2), None);
        assert!(q.is_empty(0, 1, 2) && !q.is_empty(0, 1, 3));
        assert_eq!((q.used(0), q.used(1), q.free_slots()), (2, 1, 60 - 7));
        assert!(!q.push(0, 4, 0, d(1)) && !q.push(0, 0, 4, d(1)), "out of range");
    }

    /// A channel there is not has no room, at a port or at the engine, as `push` refuses it.
    #[test]
    fn a_channel_out_of_range_has_no_room_even_at_the_engine() {
        let q: Voqs<4, 60> = Voqs::default();
        for input in [0, 4] {
            assert!(q.has_room(input, 0));
            assert!(!q.has_room(input, 4), "input {input}");
            assert_eq!(q.room(input, 4), 0, "input {input}");
        }
    }
}
