//! The simulator's event queue: a radix heap. A discrete-event simulation never schedules before the
//! event it is processing, so keys only grow; a radix heap exploits that and moves each event between
//! at most a few buckets, where a binary heap sifts through log n levels of scattered memory per event.
//!
//! Events come out in the order of (time, sequence number), exactly as a binary heap ordered by that pair
//! would give them: the key is the pair itself, as one 128-bit number.

use link_phy::time::Instant;

/// Bucket `b > 0` holds the events whose key differs from the last one taken out first in bit `b - 1`
/// (counting from the least significant); bucket 0 holds keys equal to it.
const BUCKETS: usize = 129;

/// Events in order of their time, then of when they were scheduled.
#[derive(Debug)]
pub struct EventQueue<T> {
    buckets: Vec<Vec<(u128, T)>>,
    /// Bit `b` set: bucket `b` is not empty.
    occupied: [u64; 3],
    last: u128,
    seq: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            occupied: [0; 3],
            last: 0,
            seq: 0,
        }
    }
}

fn key(at: Instant, seq: u64) -> u128 {
    (u128::from(at.as_ps()) << 64) | u128::from(seq)
}

fn time_of(key: u128) -> Instant {
    Instant((key >> 64) as u64)
}

impl<T> EventQueue<T> {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.buckets.iter().map(Vec::len).sum()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bucket_of(&self, key: u128) -> usize {
        (128 - (key ^ self.last).leading_zeros()) as usize
    }

    fn put(&mut self, key: u128, item: T) {
        let b = self.bucket_of(key);
        self.buckets[b].push((key, item));
        self.occupied[b / 64] |= 1 << (b % 64);
    }

    /// Schedule `item` at `at`. A simulation never schedules into the past; a time before the last event
    /// taken out counts as that event's time (the item comes out after the events already waiting for
    /// that time, where a binary heap would give it out first).
    pub fn push(&mut self, at: Instant, item: T) {
        self.seq += 1;
        let key = key(at.max(time_of(self.last)), self.seq);
        self.put(key, item);
    }

    /// Make bucket 0 hold the smallest key, if there is any event.
    fn settle(&mut self) -> bool {
        if self.occupied[0] & 1 != 0 {
            return true;
        }
        let Some(b) = (0..3).find_map(|w| {
            let bits = self.occupied[w];
            (bits != 0).then(|| w * 64 + bits.trailing_zeros() as usize)
        }) else {
            return false;
        };
        let mut moving = core::mem::take(&mut self.buckets[b]);
        self.occupied[b / 64] &= !(1 << (b % 64));
        self.last = moving.iter().map(|&(k, _)| k).min().unwrap_or(self.last);
        for (k, item) in moving.drain(..) {
            self.put(k, item);
        }
        // Keep the allocation for next time.
        self.buckets[b] = moving;
        true
    }

    /// The time of the next event.
    pub fn peek_time(&mut self) -> Option<Instant> {
        self.settle().then(|| time_of(self.last))
    }

    /// Take out the next event, with its time.
    pub fn pop(&mut self) -> Option<(Instant, T)> {
        if !self.settle() {
            return None;
        }
        let (k, item) = self.buckets[0].pop()?;
        if self.buckets[0].is_empty() {
            self.occupied[0] &= !1;
        }
        Some((time_of(k), item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_phy::time::Duration;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// The same order as a binary heap of (time, sequence), over random schedules that never go back in
    /// time, with many ties.
    #[test]
    fn same_order_as_a_binary_heap() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut queue = EventQueue::default();
        let mut heap = BinaryHeap::new();
        let (mut now, mut seq, mut id) = (0u64, 0u64, 0u32);
        for round in 0..20_000 {
            for _ in 0..rand(4) {
                let at = now + [0, 1, rand(100), rand(1 << 40)][rand(4) as usize];
                seq += 1;
                id += 1;
                queue.push(Instant::ZERO + Duration::from_ps(at), id);
                heap.push(Reverse((at, seq, id)));
            }
            assert_eq!(queue.len(), heap.len());
            let popped = queue.pop().map(|(at, id)| (at.as_ps(), id));
            let expected = heap.pop().map(|Reverse((at, _, id))| (at, id));
            assert_eq!(popped, expected, "round {round}");
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
