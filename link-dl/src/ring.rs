//! A fixed-capacity ring buffer of `Copy` items that is written in place and moved in runs. The replay
//! buffer and the receive queues use it so that a packet's flits cost one copy in and one copy out (a
//! `heapless::Deque` takes and gives items one at a time, by value, and a replay entry would be built
//! on the stack and then copied in).

use core::marker::PhantomData;

/// Up to `N` items, oldest first, kept in `S`: `N` of them in place, or anything else that holds `N`.
/// The indices come first (`repr(C)`): checking how full a ring is touches the cache line next to
/// whatever precedes it, not one past a large array.
#[derive(Clone, Debug)]
#[repr(C)]
pub(crate) struct Ring<T, const N: usize, S = [T; N]> {
    head: usize,
    len: usize,
    items: S,
    item: PhantomData<T>,
}

impl<T: Copy + Default, const N: usize> Ring<T, N> {
    pub(crate) fn new() -> Self {
        Ring::with_items([T::default(); N])
    }
}

impl<T: Copy, const N: usize, S: AsRef<[T]> + AsMut<[T]>> Ring<T, N, S> {
    /// An empty ring in `items`, which must hold `N`.
    pub(crate) fn with_items(items: S) -> Self {
        debug_assert_eq!(items.as_ref().len(), N);
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
        (i < self.len).then(|| &self.items.as_ref()[self.slot(i)])
    }

    /// The item `i` places from the front, to change in place.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        let at = self.slot(i);
        (i < self.len).then(|| &mut self.items.as_mut()[at])
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
        fill(&mut self.items.as_mut()[tail]);
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
        let slots = self.items.as_mut();
        slots[tail..tail + wrapped.len()].copy_from_slice(wrapped);
        slots[..rest.len()].copy_from_slice(rest);
        self.len += items.len();
        true
    }

    /// The first `n` items (or all, if fewer), as the two runs they occupy.
    pub(crate) fn front_run(&self, n: usize) -> (&[T], &[T]) {
        let n = n.min(self.len);
        let first = n.min(N - self.head);
        let slots = self.items.as_ref();
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

    /// The ring against a model (a growable queue) over pushes, runs and pops that wrap around.
    #[test]
    fn behaves_as_a_bounded_queue() {
        let mut ring: Ring<u32, 7> = Ring::new();
        let mut model: heapless::Deque<u32, 64> = heapless::Deque::new();
        let mut next = 0u32;
        let mut x = 0x2545_F491u32;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
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
    }
}
