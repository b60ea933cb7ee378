//! Virtual output queues: one queue per (virtual channel, output) at each input, so that a packet waiting
//! for a busy output never blocks one behind it bound elsewhere (no head-of-line blocking). The queues of
//! an input share a pool of `SLOTS` descriptors, linked in place.

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

/// The virtual output queues of one input.
#[derive(Clone, Debug)]
pub struct InputQueues<const PORTS: usize, const SLOTS: usize> {
    pool: [Descriptor; SLOTS],
    next: [u16; SLOTS],
    free: u16,
    used: usize,
    head: [[u16; PORTS]; VCS],
    tail: [[u16; PORTS]; VCS],
    len: [[u16; PORTS]; VCS],
}

impl<const PORTS: usize, const SLOTS: usize> Default for InputQueues<PORTS, SLOTS> {
    fn default() -> Self {
        let mut next = [NIL; SLOTS];
        for (i, n) in next.iter_mut().enumerate() {
            *n = if i + 1 < SLOTS { (i + 1) as u16 } else { NIL };
        }
        InputQueues {
            pool: [Descriptor::default(); SLOTS],
            next,
            free: if SLOTS > 0 { 0 } else { NIL },
            used: 0,
            head: [[NIL; PORTS]; VCS],
            tail: [[NIL; PORTS]; VCS],
            len: [[0; PORTS]; VCS],
        }
    }
}

impl<const PORTS: usize, const SLOTS: usize> InputQueues<PORTS, SLOTS> {
    const FITS: () = assert!(SLOTS < NIL as usize, "at most 65534 descriptors per input");

    /// Descriptors in use.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Whether another descriptor fits.
    pub fn has_room(&self) -> bool {
        self.free != NIL
    }

    /// Packets waiting for `output` on `vc`.
    pub fn len(&self, vc: usize, output: usize) -> usize {
        self.len
            .get(vc)
            .and_then(|l| l.get(output))
            .map_or(0, |&n| usize::from(n))
    }

    /// Append to the queue of (`vc`, `output`); false if the pool is full or the indices are out of range.
    pub fn push(&mut self, vc: usize, output: usize, d: Descriptor) -> bool {
        #[allow(clippy::let_unit_value)]
        let () = Self::FITS;
        if vc >= VCS || output >= PORTS || self.free == NIL {
            return false;
        }
        let slot = self.free;
        let s = usize::from(slot);
        self.free = self.next[s];
        self.pool[s] = d;
        self.next[s] = NIL;
        match self.tail[vc][output] {
            NIL => self.head[vc][output] = slot,
            t => self.next[usize::from(t)] = slot,
        }
        self.tail[vc][output] = slot;
        self.len[vc][output] += 1;
        self.used += 1;
        true
    }

    /// The head of the queue of (`vc`, `output`).
    pub fn peek(&self, vc: usize, output: usize) -> Option<&Descriptor> {
        let h = *self.head.get(vc)?.get(output)?;
        (h != NIL).then(|| &self.pool[usize::from(h)])
    }

    /// Take the head of the queue of (`vc`, `output`).
    pub fn pop(&mut self, vc: usize, output: usize) -> Option<Descriptor> {
        let h = *self.head.get(vc)?.get(output)?;
        if h == NIL {
            return None;
        }
        let s = usize::from(h);
        self.head[vc][output] = self.next[s];
        if self.head[vc][output] == NIL {
            self.tail[vc][output] = NIL;
        }
        self.next[s] = self.free;
        self.free = h;
        self.len[vc][output] -= 1;
        self.used -= 1;
        Some(self.pool[s])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_fifo_and_share_the_pool() {
        let mut q: InputQueues<4, 3> = InputQueues::default();
        let d = |handle| Descriptor {
            handle,
            flits: 9,
            arrived: 0,
        };
        assert!(q.push(1, 2, d(10)));
        assert!(q.push(0, 3, d(20)));
        assert!(q.push(1, 2, d(11)));
        assert!(!q.push(1, 2, d(12)), "pool full");
        assert_eq!(q.pop(1, 2).map(|d| d.handle), Some(10));
        assert!(q.push(3, 0, d(30)));
        assert_eq!(q.pop(1, 2).map(|d| d.handle), Some(11));
        assert_eq!(q.pop(1, 2), None);
        assert_eq!((q.len(0, 3), q.len(3, 0), q.used()), (1, 1, 2));
        assert!(!q.push(4, 0, d(1)) && !q.push(0, 4, d(1)), "out of range");
    }
}
