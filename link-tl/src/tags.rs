//! The outstanding-request table: tags for non-posted requests, matching of completions to them, and
//! completion timeouts.
//!
//! A table of `N` slots (1 to 1024, chosen by the user) hands out 10-bit tags `generation * N + slot`.
//! Lookup is `slot = tag % N`, and the whole tag must match, so a tag is only ever matched to the request
//! it was issued for. When a request ends without all its completions having arrived (it timed out, or a
//! read ended with an error status while pieces were still owed), its slot is *quarantined* for one more
//! timeout: completions for it in that time are counted as late and dropped. When the slot is freed its
//! generation advances, through every tag `generation * N + slot` below 1024, so its next tag differs
//! from the old one (in every slot when `N` <= 512; above that, in the slots below `1024 - N`), and a
//! completion still later than the quarantine finds no request with its tag (counted as unknown,
//! dropped) until the slot's tag comes round again: after as many more requests in the slot as it has
//! tags, `(1023 - slot) / N + 1`, or at its next request in a slot whose tag cannot change (`N` = 1024,
//! or a slot from `1024 - N` up when `N` > 512). Only a completion that late, more than two completion
//! timeouts in the fabric, can reach the wrong request: a 10-bit tag cannot do better.
//!
//! A read's completions arrive in pieces, one per 128-byte block of the range (spec section 3.5), in any
//! order; the table keeps one bit per piece and rejects duplicates and pieces that do not fit.

use heapless::Vec;
use link_phy::time::{Duration, Instant};

use crate::error::TlError;
use crate::header::{CompletionHeader, EndpointId, Status, Tag, MAX_DATA, MAX_READ, MAX_TAGS};

/// What kind of request a tag was issued for, and how much it waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RequestKind {
    /// A read of `len` bytes (1 to 4096, not crossing a 4096-byte boundary).
    Read {
        /// Bytes.
        len: u16,
    },
    /// A non-posted write: one completion without data.
    Write,
    /// An atomic of `size` bytes: one completion with the old value.
    Atomic {
        /// 4 or 8.
        size: u8,
    },
}

/// An outstanding request, as the table remembers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Request {
    /// Where it went (completions must come from there).
    pub dest: EndpointId,
    /// Its local address.
    pub addr: u64,
    /// What it is.
    pub kind: RequestKind,
    /// The caller's own value (for a read, typically where in its buffer the bytes go).
    pub cookie: u64,
}

impl Request {
    /// Completions a successful request gets: one per 128-byte block a read touches, otherwise one.
    pub fn pieces(&self) -> u32 {
        match self.kind {
            RequestKind::Read { len } => {
                let first = (self.addr % MAX_DATA as u64) as usize;
                (first + usize::from(len)).div_ceil(MAX_DATA) as u32
            }
            _ => 1,
        }
    }
}

/// A completion accepted for an outstanding request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Delivery {
    /// The tag.
    pub tag: Tag,
    /// The request's cookie.
    pub cookie: u64,
    /// Byte offset of the completion's data in the request.
    pub offset: u16,
    /// Data bytes.
    pub len: u8,
    /// `Some(status)` when this completion ends the request (with every piece, or with an error).
    pub finished: Option<Status>,
}

/// A request that timed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Expired {
    /// Its tag (now quarantined).
    pub tag: Tag,
    /// The request.
    pub request: Request,
}

/// Counters of the table. They only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TagCounters {
    /// Tags handed out.
    pub issued: u64,
    /// Requests ended by their completions, any status.
    pub completed: u64,
    /// Of those, ended with a status other than success.
    pub failed: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Completions for a timed-out (or failed) request, dropped.
    pub late_completions: u64,
    /// Completions for a tag with no outstanding request, dropped.
    pub unknown_tags: u64,
    /// Completions from an endpoint other than the request's destination, dropped.
    pub wrong_completer: u64,
    /// Completions that do not fit their request (duplicate or misplaced pieces), dropped.
    pub mismatched: u64,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    tag: Tag,
    request: Request,
    deadline: Instant,
    /// One bit per piece still owed.
    owed: u32,
}

#[derive(Clone, Copy, Debug)]
enum Slot {
    Free,
    Pending(Pending),
    Quarantined { tag: Tag, until: Instant },
}

/// The outstanding-request table of one requester, with `N` slots (1 to 1024).
#[derive(Clone, Debug)]
pub struct Outstanding<const N: usize> {
    timeout: Duration,
    slots: [Slot; N],
    generation: [u16; N],
    free: Vec<u16, N>,
    counters: TagCounters,
}

impl<const N: usize> Outstanding<N> {
    const VALID: () = assert!(N >= 1 && N <= MAX_TAGS, "a table holds 1 to 1024 requests");

    /// An empty table whose requests time out `timeout` after they are issued.
    pub fn new(timeout: Duration) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        let mut free = Vec::new();
        // Popped from the end: slot 0 first.
        for slot in (0..N as u16).rev() {
            let _ = free.push(slot);
        }
        Outstanding {
            timeout,
            slots: [Slot::Free; N],
            generation: [0; N],
            free,
            counters: TagCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &TagCounters {
        &self.counters
    }

    /// Requests outstanding.
    pub fn outstanding(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Pending(_)))
            .count()
    }

    /// Tags that can be handed out now.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// The completion timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Hand out a tag for `request`, issued at `now`; [`TlError::NoFreeTag`] when every slot is in use.
    pub fn allocate(&mut self, now: Instant, request: Request) -> Result<Tag, TlError> {
        if let RequestKind::Read { len } = request.kind {
            crate::packet::check_piece(request.addr, usize::from(len), MAX_READ)?;
        }
        let slot = self.free.pop().ok_or(TlError::NoFreeTag)?;
        let i = usize::from(slot);
        let tag = self.generation[i] * N as u16 + slot;
        // 1 to 32 pieces (a read never crosses a 4096-byte boundary).
        let owed = ((1u64 << request.pieces()) - 1) as u32;
        self.slots[i] = Slot::Pending(Pending {
            tag,
            request,
            deadline: now + self.timeout,
            owed,
        });
        self.counters.issued += 1;
        Ok(tag)
    }

    /// The request waiting under `tag`, if any.
    #[inline]
    pub fn get(&self, tag: Tag) -> Option<&Request> {
        match self.slots.get(usize::from(tag) % N) {
            Some(Slot::Pending(p)) if p.tag == tag => Some(&p.request),
            _ => None,
        }
    }

    /// Match a completion to its request. On success says where its data goes and whether it ended the
    /// request; otherwise the completion is counted and must be dropped.
    #[inline]
    pub fn complete(&mut self, now: Instant, c: &CompletionHeader) -> Result<Delivery, TlError> {
        let tag = c.tag;
        let i = usize::from(tag) % N;
        let pending = match self.slots.get_mut(i) {
            Some(Slot::Pending(p)) if p.tag == tag => p,
            Some(Slot::Quarantined { tag: t, .. }) if *t == tag => {
                self.counters.late_completions += 1;
                return Err(TlError::LateCompletion { tag });
            }
            _ => {
                self.counters.unknown_tags += 1;
                return Err(TlError::UnknownTag { tag });
            }
        };
        let request = pending.request;
        if c.completer != request.dest {
            self.counters.wrong_completer += 1;
            return Err(TlError::UnexpectedCompleter {
                tag,
                expected: request.dest,
                got: c.completer,
            });
        }
        let mismatch = TlError::CompletionMismatch {
            tag,
            offset: c.offset,
        };
        if c.status != Status::Success {
            if c.len != 0 {
                self.counters.mismatched += 1;
                return Err(mismatch);
            }
            self.counters.completed += 1;
            self.counters.failed += 1;
            // A read may still have pieces on their way: hold the tag until they cannot come.
            if matches!(request.kind, RequestKind::Read { .. }) {
                self.slots[i] = Slot::Quarantined {
                    tag,
                    until: now + self.timeout,
                };
            } else {
                self.release(i);
            }
            return Ok(Delivery {
                tag,
                cookie: request.cookie,
                offset: 0,
                len: 0,
                finished: Some(c.status),
            });
        }
        let piece = match request.kind {
            RequestKind::Read { len } => read_piece(request.addr, len, c.offset, c.len),
            RequestKind::Write => (c.offset == 0 && c.len == 0).then_some(0),
            RequestKind::Atomic { size } => (c.offset == 0 && c.len == size).then_some(0),
        };
        let Some(piece) = piece.filter(|&k| pending.owed >> k & 1 == 1) else {
            self.counters.mismatched += 1;
            return Err(mismatch);
        };
        pending.owed &= !(1 << piece);
        let finished = if pending.owed == 0 {
            self.counters.completed += 1;
            self.release(i);
            Some(Status::Success)
        } else {
            None
        };
        Ok(Delivery {
            tag,
            cookie: request.cookie,
            offset: c.offset,
            len: c.len,
            finished,
        })
    }

    /// Time out one request whose deadline has passed (call until `None`), and free quarantined slots
    /// whose quarantine is over.
    pub fn expire(&mut self, now: Instant) -> Option<Expired> {
        let mut expired = None;
        for i in 0..N {
            match self.slots[i] {
                Slot::Quarantined { until, .. } if until <= now => self.release(i),
                Slot::Pending(p) if expired.is_none() && p.deadline <= now => {
                    self.slots[i] = Slot::Quarantined {
                        tag: p.tag,
                        until: now + self.timeout,
                    };
                    self.counters.timeouts += 1;
                    expired = Some(Expired {
                        tag: p.tag,
                        request: p.request,
                    });
                }
                _ => {}
            }
        }
        expired
    }

    /// When [`Outstanding::expire`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.slots
            .iter()
            .filter_map(|s| match *s {
                Slot::Pending(p) => Some(p.deadline),
                Slot::Quarantined { until, .. } => Some(until),
                Slot::Free => None,
            })
            .min()
    }

    fn release(&mut self, i: usize) {
        self.slots[i] = Slot::Free;
        // Slot `i` cycles through every tag `generation * N + i` below 1024, not only the generations
        // every slot has (1024 / N): for N above 512 that is one, and the slot's next tag would repeat.
        let generations = ((MAX_TAGS - 1 - i) / N + 1) as u16;
        self.generation[i] = (self.generation[i] + 1) % generations;
        let _ = self.free.push(i as u16);
    }
}

/// Which piece of a read of `len` bytes at `addr` a completion at `offset` of `got` bytes is, if it is
/// exactly one: the request's bytes in the k-th 128-byte block it touches.
#[inline]
fn read_piece(addr: u64, len: u16, offset: u16, got: u8) -> Option<u32> {
    let first = (addr % MAX_DATA as u64) as usize;
    let (offset, len, got) = (usize::from(offset), usize::from(len), usize::from(got));
    if offset >= len {
        return None;
    }
    let k = (first + offset) / MAX_DATA;
    let start = (k * MAX_DATA).saturating_sub(first);
    let end = ((k + 1) * MAX_DATA - first).min(len);
    (offset == start && got == end - start).then_some(k as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_pieces_are_the_blocks_of_the_range() {
        // 300 bytes at 0x70: pieces [0, 16), [16, 144), [144, 272), [272, 300).
        assert_eq!(read_piece(0x70, 300, 0, 16), Some(0));
        assert_eq!(read_piece(0x70, 300, 16, 128), Some(1));
        assert_eq!(read_piece(0x70, 300, 144, 128), Some(2));
        assert_eq!(read_piece(0x70, 300, 272, 28), Some(3));
        assert_eq!(read_piece(0x70, 300, 272, 29), None);
        assert_eq!(read_piece(0x70, 300, 17, 127), None);
        assert_eq!(read_piece(0x70, 300, 300, 1), None);
        assert_eq!(read_piece(0x70, 300, 0, 0), None);
        let r = Request {
            dest: 0,
            addr: 0x70,
            kind: RequestKind::Read { len: 300 },
            cookie: 0,
        };
        assert_eq!(r.pieces(), 4);
        let whole = Request {
            addr: 0,
            kind: RequestKind::Read { len: 4096 },
            ..r
        };
        assert_eq!(whole.pieces(), 32);
    }
}
