//! The simulator's event queue: a radix heap. A discrete-event simulation never schedules before the
//! event it is processing, so times only grow; a radix heap exploits that and moves each event between
//! at most a few buckets, where a binary heap sifts through log n levels of scattered memory per event.
//!
//! Events come out in the order of (time, sequence number), exactly as a binary heap ordered by that pair
//! would give them, without storing the sequence: every bucket keeps its events in the order they were
//! scheduled (see [`EventQueue::settle`]), and the events at the current time leave first in, first out.

use std::collections::VecDeque;

use link_phy::time::Instant;

/// Events in order of their time, then of when they were scheduled.
#[derive(Debug)]
pub struct EventQueue<T> {
    /// The events at time `last`, the time of the last event taken out (or to be taken out next).
    current: VecDeque<T>,
    /// Bucket `b` holds the later events whose time differs from `last` first in bit `b` (counting from
    /// the least significant).
    buckets: [Vec<(u64, T)>; 64],
    /// Bit `b` set: bucket `b` is not empty.
    occupied: u64,
    last: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            current: VecDeque::new(),
            buckets: core::array::from_fn(|_| Vec::new()),
            occupied: 0,
            last: 0,
        }
    }
}

impl<T> EventQueue<T> {
    pub fn len(&self) -> usize {
        self.current.len() + self.buckets.iter().map(Vec::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn put(&mut self, at: u64, item: T) {
        let differ = at ^ self.last;
        if differ == 0 {
            self.current.push_back(item);
        } else {
            let b = 63 - differ.leading_zeros() as usize;
            self.buckets[b].push((at, item));
            self.occupied |= 1 << b;
        }
    }

    /// Schedule `item` at `at`. A simulation never schedules into the past; a time before the last event
    /// taken out counts as that event's time (the item comes out after the events already waiting for
    /// that time, where a binary heap would give it out first).
    pub fn push(&mut self, at: Instant, item: T) {
        self.put(at.as_ps().max(self.last), item);
    }

    /// Make `current` hold the earliest events, if there are any.
    ///
    /// Every bucket is in the order its events were scheduled: a push appends the newest event, and a
    /// bucket is emptied into the lower ones (and `current`) only when they are all empty, in its order.
    #[inline]
    fn settle(&mut self) -> bool {
        // Most calls find events waiting at the current time: that test is inlined where it is asked.
        !self.current.is_empty() || self.refill()
    }

    /// [`EventQueue::settle`] with `current` empty: empty the earliest bucket into the lower ones.
    #[inline(never)]
    fn refill(&mut self) -> bool {
        if self.occupied == 0 {
            return false;
        }
        let b = self.occupied.trailing_zeros() as usize;
        let mut moving = core::mem::take(&mut self.buckets[b]);
        self.occupied &= !(1 << b);
        self.last = moving.iter().map(|&(at, _)| at).min().unwrap_or(self.last);
        for (at, item) in moving.drain(..) {
            self.put(at, item);
        }
        // Keep the allocation for next time.
        self.buckets[b] = moving;
        true
    }

    /// The next event, if it is at the same time as the last one popped (no settling: events pushed
    /// now still go before later ones).
    pub fn peek_now(&self) -> Option<&T> {
        self.current.front()
    }

    /// The time of the next event.
    pub fn peek_time(&mut self) -> Option<Instant> {
        self.settle().then_some(Instant(self.last))
    }

    /// Every event waiting, with its time, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Instant, &T)> {
        let current = self.current.iter().map(|item| (Instant(self.last), item));
        current.chain(
            self.buckets
                .iter()
                .flatten()
                .map(|(at, item)| (Instant(*at), item)),
        )
    }

    /// Move the events that `moves` picks `by` later, keeping the order of every event that is not
    /// moved past another. The events come out and go back in their order, so ties keep theirs.
    pub fn shift(&mut self, by: link_phy::time::Duration, moves: impl Fn(&T) -> bool) {
        let mut events = Vec::with_capacity(self.len());
        while let Some(e) = self.pop() {
            events.push(e);
        }
        *self = EventQueue::default();
        for (at, item) in events {
            let at = if moves(&item) { at + by } else { at };
            self.push(at, item);
        }
    }

    /// Take out the next event, with its time.
    pub fn pop(&mut self) -> Option<(Instant, T)> {
        if !self.settle() {
            return None;
        }
        self.current.pop_front().map(|item| (Instant(self.last), item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_phy::time::Duration;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// The same order as a binary heap of (time, sequence), over random schedules that never go back in
    /// time, with many ties.
    #[test]
    fn same_order_as_a_binary_heap() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        let mut rand = move |n: u64| rng.next_u64() % n;
        let mut queue = EventQueue::default();
        let mut heap = BinaryHeap::new();
        let (mut now, mut seq, mut id) = (0u64, 0u64, 0u32);
        for round in 0..100_000 {
            for _ in 0..rand(4) {
                // Ties, picoseconds to microseconds apart (around 4.2 us, where a timing wheel would end),
                // and far beyond.
                let at = now
                    + [
                        0,
                        1,
                        rand(100),
                        rand(1 << 14),
                        rand(1 << 23),
                        (1 << 22) - 1024 + rand(2048),
                        rand(1 << 40),
                    ][rand(7) as usize];
                seq += 1;
                id += 1;
                queue.push(Instant::ZERO + Duration::from_ps(at), id);
                heap.push(Reverse((at, seq, id)));
            }
            assert_eq!(queue.len(), heap.len());
            let peeked = queue.peek_now().copied();
            let popped = queue.pop().map(|(at, id)| (at.as_ps(), id));
            let expected = heap.pop().map(|Reverse((at, _, id))| (at, id));
            assert_eq!(popped, expected, "round {round}");
            // What `peek_now` shows is the next event, at the time of the last one popped.
            if let Some(peeked) = peeked {
                assert_eq!(popped, Some((now, peeked)), "round {round}");
            }
            if let Some((at, _)) = popped {
                now = at;
            }
        }
        while let Some(Reverse((at, _, id))) = heap.pop() {
            assert_eq!(queue.peek_time(), Some(Instant::ZERO + Duration::from_ps(at)));
            assert_eq!(queue.pop(), Some((Instant::ZERO + Duration::from_ps(at), id)));
        }
        assert!(queue.is_empty() && queue.pop().is_none());
    }
}
