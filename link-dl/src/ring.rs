//! A fixed-capacity ring buffer of `Copy` items that is written in place and moved in runs. The replay
//! buffer and the receive queues use it so that a packet's flits cost one copy in and one copy out (a
//! `heapless::Deque` takes and gives items one at a time, by value, and a replay entry would be built
//! on the stack and then copied in).

use core::marker::PhantomData;

/// `to.copy_from_slice(from)`. A packet's run (its header and the largest payload, 10 flits; the
/// payload alone, 9; or the payload without NVLink's extension flit, 8) is copied in pieces of constant
/// size, which the compiler writes out in line: a copy of variable length is a library call, and the
/// baseline x86-64 build inlines constant copies of at most 128 bytes.
#[inline(always)]
pub(crate) fn copy_run<T: Copy>(to: &mut [T], from: &[T]) {
    if !(copy_in_halves::<T, 10>(to, from)
        || copy_in_halves::<T, 9>(to, from)
        || copy_in_halves::<T, 8>(to, from))
    {
        to.copy_from_slice(from);
    }
}

/// [`copy_run`] of exactly `N` items in two constant-size pieces; whether both slices held `N`.
#[inline(always)]
fn copy_in_halves<T: Copy, const N: usize>(to: &mut [T], from: &[T]) -> bool {
    let (Ok(to), Ok(from)) = (<&mut [T; N]>::try_from(to), <&[T; N]>::try_from(from)) else {
        return false;
    };
    let (to_first, to_second) = to.split_at_mut(N / 2);
    let (from_first, from_second) = from.split_at(N / 2);
    to_first.copy_from_slice(from_first);
    to_second.copy_from_slice(from_second);
    true
}

/// Where a ring keeps its items. A ring writes its slots for the first time in order (its tail moves on
/// one slot at a time and comes back to the first only when it has been all the way round or the ring
/// is empty), so the slots written so far are always a prefix, and storage can grow as they are written.
pub(crate) trait Slots<T> {
    /// The slots written so far, from the first.
    fn written(&self) -> &[T];
    /// The same, to change in place.
    fn written_mut(&mut self) -> &mut [T];
    /// Write `items` from slot `at`, which is at most the number written so far.
    fn write(&mut self, at: usize, items: &[T]);
}

/// Every slot in place, written when the ring is made.
impl<T: Copy, const N: usize> Slots<T> for [T; N] {
    fn written(&self) -> &[T] {
        self
    }

    fn written_mut(&mut self) -> &mut [T] {
        self
    }

    fn write(&mut self, at: usize, items: &[T]) {
        self[at..at + items.len()].copy_from_slice(items);
    }
}

/// Slots on the heap, allocated whole when the ring is made (a vector's capacity) but written, and so
/// touched, only as the ring first reaches them: a queue that never fills never uses most of its memory.
#[cfg(feature = "std")]
impl<T: Copy> Slots<T> for std::vec::Vec<T> {
    fn written(&self) -> &[T] {
        self
    }

    fn written_mut(&mut self) -> &mut [T] {
        self
    }

    fn write(&mut self, at: usize, items: &[T]) {
        let over = self.len().saturating_sub(at).min(items.len());
        self[at..at + over].copy_from_slice(&items[..over]);
        self.extend_from_slice(&items[over..]);
    }
}

/// Up to `N` items, oldest first, kept in `S` (see [`Slots`]). The indices come first (`repr(C)`):
/// checking how full a ring is touches the cache line next to whatever precedes it, not one past a large
/// array.
#[derive(Clone, Debug)]
#[repr(C)]
pub(crate) struct Ring<T, const N: usize, S = [T; N]> {
    head: usize,
    len: usize,
    items: S,
    item: PhantomData<T>,
}

#[cfg(test)]
impl<T: Copy + Default, const N: usize> Ring<T, N> {
    /// An empty ring with its slots in place.
    pub(crate) fn new() -> Self {
        Ring::with_items([T::default(); N])
    }
}

impl<T: Copy + Default, const N: usize, S: Slots<T>> Ring<T, N, S> {
    /// An empty ring in `items`, which must be able to hold `N`.
    pub(crate) fn with_items(items: S) -> Self {
        Ring {
            items,
            head: 0,
            len: 0,
            item: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len == N
    }

    /// Items that can still be added.
    pub(crate) fn room(&self) -> usize {
        N - self.len
    }

    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Index into `items` of the item `i` places after the head (`i <= N`).
    fn slot(&self, i: usize) -> usize {
        let at = self.head + i;
        if at >= N {
            at - N
        } else {
            at
        }
    }

    /// The item `i` places from the front.
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self.items.written()[self.slot(i)])
    }

    /// The item `i` places from the front, to change in place.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        let at = self.slot(i);
        (i < self.len).then(|| &mut self.items.written_mut()[at])
    }

    pub(crate) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// Append one item, written in place by `fill` over whatever the slot held before; false (and
    /// nothing appended) when full.
    pub(crate) fn push_back_with(&mut self, fill: impl FnOnce(&mut T)) -> bool {
        if self.is_full() {
            return false;
        }
        let tail = self.slot(self.len);
        if tail == self.items.written().len() {
            self.items.write(tail, &[T::default()]);
        }
        fill(&mut self.items.written_mut()[tail]);
        self.len += 1;
        true
    }

    /// Append `items`: all of them, or none (false) without room for all.
    pub(crate) fn extend_from_slice(&mut self, items: &[T]) -> bool {
        if items.len() > self.room() {
            return false;
        }
        let tail = self.slot(self.len);
        let (wrapped, rest) = items.split_at(items.len().min(N - tail));
        self.items.write(tail, wrapped);
        // Most runs do not wrap: an empty write still costs a `memcpy` call per packet received.
        if !rest.is_empty() {
            self.items.write(0, rest);
        }
        self.len += items.len();
        true
    }

    /// Append `first`, then `items`: all of them, or none (false) without room for all. A received
    /// packet's header and payload go in with one tail and bounds computed, where they fit before the
    /// end of the slots already written (nearly always).
    pub(crate) fn push_back_and_extend(&mut self, first: T, items: &[T]) -> bool {
        if items.len() >= self.room() {
            return false;
        }
        let tail = self.slot(self.len);
        if let Some((slot, rest)) = self
            .items
            .written_mut()
            .get_mut(tail..(tail + 1 + items.len()).min(N))
            .and_then(|run| run.split_first_mut())
            .filter(|(_, rest)| rest.len() == items.len())
        {
            *slot = first;
            copy_run(rest, items);
            self.len += 1 + items.len();
            return true;
        }
        self.push_back_with(|slot| *slot = first);
        self.extend_from_slice(items)
    }

    /// The first `n` items (or all, if fewer), as the two runs they occupy.
    pub(crate) fn front_run(&self, n: usize) -> (&[T], &[T]) {
        let n = n.min(self.len);
        let first = n.min(N - self.head);
        let slots = self.items.written();
        (&slots[self.head..self.head + first], &slots[..n - first])
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let item = *self.front()?;
        self.drop_front(1);
        Some(item)
    }

    /// Remove the first `n` items (all, if fewer). An emptied ring starts again at its first slot, so a
    /// queue that is drained as fast as it fills keeps reusing the same few cache lines instead of
    /// walking its whole array.
    pub(crate) fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.head = if n == self.len { 0 } else { self.slot(n) };
        self.len -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// `copy_run` copies what `copy_from_slice` does at every length, the constant-size ones included.
    #[test]
    fn copy_run_copies_every_length() {
        let from: [u16; 11] = core::array::from_fn(|i| 100 + i as u16);
        for len in 0..=from.len() {
            // One guard item before the run and at least one after it.
            let mut to = [0u16; 13];
            super::copy_run(&mut to[1..1 + len], &from[..len]);
            assert_eq!(to[1..1 + len], from[..len], "length {len}");
            assert!(
                to[0] == 0 && to[1 + len..].iter().all(|&x| x == 0),
                "length {len}: wrote outside"
            );
        }
    }

    /// The ring against a model (a growable queue) over pushes, runs and pops that wrap around.
    #[test]
    fn behaves_as_a_bounded_queue() {
        behaves_as_a_bounded_queue_in(Ring::<u32, 7>::new());
    }

    /// On slots written as they are reached, the same (and never more than `N` of them).
    #[test]
    fn behaves_as_a_bounded_queue_on_a_growing_vector() {
        let ring: Ring<u32, 7, std::vec::Vec<u32>> = Ring::with_items(std::vec::Vec::with_capacity(7));
        let ring = behaves_as_a_bounded_queue_in(ring);
        assert!(ring.items.len() <= 7);
    }

    fn behaves_as_a_bounded_queue_in<S: super::Slots<u32>>(mut ring: Ring<u32, 7, S>) -> Ring<u32, 7, S> {
        let mut model: heapless::Deque<u32, 64> = heapless::Deque::new();
        let mut next = 0u32;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x2545_F491);
        for _ in 0..2000 {
            let x = rng.next_u32();
            let k = (x % 5) as usize;
            match x % 4 {
                0 => {
                    let items: heapless::Vec<u32, 8> = (0..k as u32).map(|i| next + i).collect();
                    let fits = model.len() + k <= 7;
                    assert_eq!(ring.extend_from_slice(&items), fits);
                    if fits {
                        next += k as u32;
                        items.iter().for_each(|&i| model.push_back(i).unwrap());
                    }
                }
                3 if x & 16 != 0 => {
                    let items: heapless::Vec<u32, 8> = (0..k as u32).map(|i| next + 1 + i).collect();
                    let fits = model.len() + 1 + k <= 7;
                    assert_eq!(ring.push_back_and_extend(next, &items), fits);
                    if fits {
                        model.push_back(next).unwrap();
                        items.iter().for_each(|&i| model.push_back(i).unwrap());
                        next += 1 + k as u32;
                    }
                }
                1 => {
                    let fits = model.len() < 7;
                    assert_eq!(ring.push_back_with(|slot| *slot = next), fits);
                    if fits {
                        model.push_back(next).unwrap();
                        next += 1;
                    }
                }
                2 => {
                    let (a, b) = ring.front_run(k);
                    let run: heapless::Vec<u32, 8> = a.iter().chain(b).copied().collect();
                    let expected: heapless::Vec<u32, 8> = model.iter().take(k).copied().collect();
                    assert_eq!(run, expected);
                    ring.drop_front(k);
                    for _ in 0..k {
                        model.pop_front();
                    }
                }
                _ => assert_eq!(ring.pop_front(), model.pop_front()),
            }
            assert_eq!(ring.len(), model.len());
            assert_eq!(ring.is_empty(), model.is_empty());
            assert_eq!(ring.room(), 7 - model.len());
            for i in 0..8 {
                assert_eq!(ring.get(i), model.iter().nth(i));
                assert_eq!(ring.get_mut(i).copied(), model.iter().nth(i).copied());
            }
        }
        ring.clear();
        assert!(ring.is_empty() && ring.front().is_none());
        ring
    }
}
