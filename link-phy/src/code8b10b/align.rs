//! Symbol alignment: finding code-group boundaries in a raw serial bit stream by its commas.

use super::tables::{self, CODE_BITS, CODE_MASK};
use super::{COMMA_BITS, COMMA_RD_MINUS};
use crate::symbol::control;

/// Aligned code groups held until [`CommaAligner::pop`] takes them.
const QUEUE_LEN: usize = 32;

/// K28.7 in both columns. It is the one code group after which a comma can also appear at a wrong
/// offset: its last five bits and the first two of the next group form `1100000` (or `0011111`) when the
/// next group starts `00` (or `11`), e.g. another K28.7, K28.x, D3.x or D12.x.
const K28_7: [u16; 2] = match tables::control_code_rd_minus(control::EIE) {
    Some(code) => [code, !code & CODE_MASK],
    None => [0, 0],
};

/// A lane's receiver front end: finds the comma in a raw, unaligned serial bit stream, aligns code-group
/// boundaries to it and hands out aligned 10-bit code groups (bit `a` as bit 0).
///
/// Like a receiver with comma alignment enabled, it aligns to the first comma it sees, stays there while
/// commas keep arriving at the same phase, and re-aligns (counted in [`CommaAligner::realignments`]) when
/// a comma arrives at another phase, as long as no second comma has confirmed the alignment. Once
/// confirmed, it re-aligns only when two commas in a row arrive at the same other phase:
/// one comma elsewhere is most likely a bit error, and following it would garble every group up to the
/// next comma. One exception keeps it locked through runs of K28.7 (the EIE symbols
/// of a 5 GT/s EIEOS): once a second comma has confirmed the alignment, a comma five bits into a K28.7 is
/// the known false comma of that code group and is ignored. (Two K28.7 seen from an unconfirmed, wrong
/// alignment are ambiguous by nature; the next comma outside a K28.7 settles it.)
///
/// Both commas (`0011111` and `1100000`) are searched, so a lane with swapped polarity aligns too: the
/// groups it yields are then the complements of what was sent, for the caller to invert. Buffering is fixed:
/// if [`CommaAligner::pop`] falls more than 32 code groups behind, the oldest are dropped and counted in
/// [`CommaAligner::dropped`]. The groups produced do not depend on how the stream is cut into pushes.
#[derive(Clone, Debug)]
pub struct CommaAligner {
    /// Received bits not yet consumed, the oldest in bit 0. At most 11 are kept between pushes.
    window: u128,
    /// Bits held in `window`.
    len: u32,
    /// The first position in `window` not yet examined as the start of a comma.
    scan: u32,
    /// Where the next code group starts in `window`, once aligned.
    boundary: Option<u32>,
    /// Whether a comma has been seen at the current alignment after the one that set it.
    confirmed: bool,
    /// Once confirmed: the phase (1 to 9 bits after a boundary) of a comma seen at another phase since
    /// the last comma at the current one. A second comma there moves the alignment.
    candidate: Option<u32>,
    queue: [u16; QUEUE_LEN],
    head: usize,
    queued: usize,
    realignments: u32,
    dropped: u32,
}

impl Default for CommaAligner {
    fn default() -> Self {
        Self::new()
    }
}

impl CommaAligner {
    /// An aligner that has seen nothing yet.
    pub const fn new() -> Self {
        CommaAligner {
            window: 0,
            len: 0,
            scan: 0,
            boundary: None,
            confirmed: false,
            candidate: None,
            queue: [0; QUEUE_LEN],
            head: 0,
            queued: 0,
            realignments: 0,
            dropped: 0,
        }
    }

    /// Take the next `count` (at most 64; more are ignored) serial bits, the first on the wire in bit 0.
    pub fn push_bits(&mut self, bits: u64, count: u32) {
        let count = count.min(64);
        if count == 0 {
            return;
        }
        let bits = if count == 64 {
            bits
        } else {
            bits & ((1 << count) - 1)
        };
        self.window |= u128::from(bits) << self.len;
        self.len += count;
        self.process();
        self.discard_consumed();
    }

    /// The next aligned code group, oldest first.
    pub fn pop(&mut self) -> Option<u16> {
        if self.queued == 0 {
            return None;
        }
        let code = self.queue[self.head];
        self.head = (self.head + 1) % QUEUE_LEN;
        self.queued -= 1;
        Some(code)
    }

    /// Whether a comma has been found, so that code groups are being produced.
    pub const fn is_aligned(&self) -> bool {
        self.boundary.is_some()
    }

    /// How often the alignment moved to a comma at a different phase (the first alignment is not counted).
    pub const fn realignments(&self) -> u32 {
        self.realignments
    }

    /// Code groups dropped because [`CommaAligner::pop`] was not called often enough.
    pub const fn dropped(&self) -> u32 {
        self.dropped
    }

    /// Forget the alignment, the buffered bits and groups, and the counters.
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// Emit code groups and act on commas in stream order: a group is complete when its tenth bit has
    /// arrived, a comma is seen when its seventh has; a group completing together with a comma goes first.
    fn process(&mut self) {
        if self.len < COMMA_BITS {
            return;
        }
        let last_start = self.len - COMMA_BITS;
        let mut commas = comma_starts(self.window) & positions(self.scan, last_start);
        loop {
            let next_comma = (commas != 0).then(|| commas.trailing_zeros());
            if let Some(start) = self.boundary {
                let end = start + CODE_BITS;
                if end <= self.len && next_comma.is_none_or(|p| end <= p + COMMA_BITS) {
                    self.emit((self.window >> start) as u16 & CODE_MASK);
                    self.boundary = Some(end);
                    continue;
                }
            }
            let Some(p) = next_comma else { break };
            commas &= commas - 1;
            self.comma_at(p);
        }
        self.scan = self.scan.max(last_start + 1);
    }

    fn comma_at(&mut self, p: u32) {
        let Some(boundary) = self.boundary else {
            self.boundary = Some(p);
            self.confirmed = false;
            self.candidate = None;
            return;
        };
        let phase = (i64::from(p) - i64::from(boundary)).rem_euclid(i64::from(CODE_BITS)) as u32;
        if phase == 0 {
            self.confirmed = true;
            self.candidate = None;
        } else if phase == 5 && self.confirmed && self.inside_k28_7(p) {
            // The known false comma of K28.7: not a reason to move.
        } else if self.confirmed && self.candidate != Some(phase) {
            // One comma at another phase of a confirmed alignment is most likely a bit error (following
            // it would garble every group up to the next comma); a second one there means a real slip.
            self.candidate = Some(phase);
        } else {
            // Unconfirmed, any comma moves the alignment; confirmed, this is the second comma at the new
            // phase, which confirms it there.
            self.boundary = Some(p);
            self.candidate = None;
            self.realignments = self.realignments.saturating_add(1);
        }
    }

    /// Whether the comma at `p` starts at bit 5 of a K28.7 at the current alignment.
    fn inside_k28_7(&self, p: u32) -> bool {
        p >= 5 && K28_7.contains(&((self.window >> (p - 5)) as u16 & CODE_MASK))
    }

    fn emit(&mut self, code: u16) {
        if self.queued == QUEUE_LEN {
            self.head = (self.head + 1) % QUEUE_LEN;
            self.queued -= 1;
            self.dropped = self.dropped.saturating_add(1);
        }
        self.queue[(self.head + self.queued) % QUEUE_LEN] = code;
        self.queued += 1;
    }

    /// Drop the bits no later decision needs: everything before the next code group and before the five
    /// bits of history that the K28.7 check of the next comma may look at.
    fn discard_consumed(&mut self) {
        let keep_from = self
            .scan
            .saturating_sub(5)
            .min(self.boundary.unwrap_or(u32::MAX))
            .min(self.len);
        self.window >>= keep_from;
        self.len -= keep_from;
        self.scan -= keep_from;
        if let Some(b) = self.boundary.as_mut() {
            *b -= keep_from;
        }
    }
}

/// Bit `p` set where `bits[p..p + 7]` is a comma of either polarity.
fn comma_starts(bits: u128) -> u128 {
    let mut minus = !0;
    let mut plus = !0;
    for i in 0..COMMA_BITS {
        let shifted = bits >> i;
        if COMMA_RD_MINUS >> i & 1 == 1 {
            minus &= shifted;
            plus &= !shifted;
        } else {
            minus &= !shifted;
            plus &= shifted;
        }
    }
    minus | plus
}

/// Bits `first..=last` set (none if `first > last`); both below 128.
fn positions(first: u32, last: u32) -> u128 {
    if first > last {
        0
    } else {
        (!0u128 << first) & (!0u128 >> (127 - last))
    }
}
