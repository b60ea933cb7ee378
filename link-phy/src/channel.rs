//! A seeded model of the lanes between two ports, for tests and the simulator.
//!
//! One [`Channel`] carries one direction of a link: N lanes, each with its own delay (skew), random bit
//! errors at a chosen bit error rate, burst errors, polarity inversion, and lanes that are dead (no
//! receiver detected, no signal) or stuck at a level. Faults can also be scheduled to strike at a given
//! time, such as a lane dying in the middle of traffic. Everything random comes from the seed, so a run is
//! reproducible bit for bit.

use std::collections::VecDeque;
use std::vec::Vec;

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::lanes::MAX_LANES;
use crate::rate::Rate;
use crate::serial::{LaneSignal, Slot, SlotBits};
use crate::time::{Duration, Instant};

/// The health of one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneHealth {
    /// Works.
    Good,
    /// Broken wire: the far receiver is not detected and nothing arrives.
    Dead,
    /// Detected, but the receiver sees a constant level.
    Stuck(bool),
}

/// A fault that strikes at a given time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultKind {
    /// Corrupt `bits` consecutive bits of `lane` (each flipped with probability 1/2, the first always).
    Burst {
        /// The physical lane hit.
        lane: usize,
        /// Length of the burst in bits.
        bits: u32,
    },
    /// Change a lane's health from now on.
    SetHealth {
        /// The physical lane.
        lane: usize,
        /// Its new health.
        health: LaneHealth,
    },
    /// Change the random bit error rate of every lane from now on.
    SetBer(f64),
}

/// A fault and when it strikes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fault {
    /// When.
    pub at: Instant,
    /// What.
    pub kind: FaultKind,
}

/// How a channel misbehaves.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelConfig {
    /// Lanes carried.
    pub lanes: usize,
    /// Extra delay of each lane (skew), at any rate. Missing entries are zero.
    pub skew: Vec<Duration>,
    /// Probability that any one bit is flipped.
    pub ber: f64,
    /// Probability per bit that a burst of `burst_bits` starts there.
    pub burst_rate: f64,
    /// Length of random bursts.
    pub burst_bits: u32,
    /// Lanes whose differential pair is swapped.
    pub inverted: Vec<usize>,
    /// Per-lane health; missing entries are good.
    pub health: Vec<LaneHealth>,
    /// Whether the wiring is reversed (transmitter lane `i` arrives on receiver lane `lanes - 1 - i`).
    pub reversed: bool,
    /// Faults that strike at set times, in any order.
    pub faults: Vec<Fault>,
    /// The fastest rate the channel can carry; bits sent faster arrive as noise (too much loss).
    pub max_rate: Option<Rate>,
    /// Seed of every random choice.
    pub seed: u64,
}

impl ChannelConfig {
    /// A perfect channel of `lanes` lanes.
    pub fn clean(lanes: usize) -> Self {
        ChannelConfig {
            lanes,
            skew: Vec::new(),
            ber: 0.0,
            burst_rate: 0.0,
            burst_bits: 0,
            inverted: Vec::new(),
            health: Vec::new(),
            reversed: false,
            faults: Vec::new(),
            max_rate: None,
            seed: 0,
        }
    }

    /// Skews for `lanes` lanes drawn from the seed, between zero and `max`, with at least one lane at each
    /// extreme so that `max` is the skew the receiver really has to absorb.
    pub fn random_skew(lanes: usize, max: Duration, seed: u64) -> Vec<Duration> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5ce3_5ce3);
        let mut skew: Vec<Duration> = (0..lanes)
            .map(|_| {
                // Every value is in range when `max` is the longest span (its + 1 overflowed).
                let r = rng.next_u64();
                Duration(max.as_ps().checked_add(1).map_or(r, |n| r % n))
            })
            .collect();
        if lanes > 1 {
            let hi = (rng.next_u64() % lanes as u64) as usize;
            let lo = (hi + 1 + (rng.next_u64() % (lanes as u64 - 1)) as usize) % lanes;
            skew[hi] = max;
            skew[lo] = Duration::ZERO;
        } else if lanes == 1 {
            skew[0] = Duration::ZERO;
        }
        skew
    }
}

/// Counters of what the channel did to the bits it carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Bits carried (signal, not idle), all lanes.
    pub bits: u64,
    /// Bits flipped by random errors and bursts.
    pub flipped: u64,
    /// Bursts injected.
    pub bursts: u64,
}

#[derive(Debug)]
struct Lane {
    /// Bits in flight: the delay line. `idle` is in step with `bits`.
    line: BitQueue,
    health: LaneHealth,
    inverted: bool,
    delay: Duration,
    rng: Xoshiro256PlusPlus,
    /// Bits carried on this lane so far, and where the next random error and burst fall.
    position: u64,
    next_error: u64,
    next_burst: u64,
    /// Bits of a burst still to corrupt, and the burst's length.
    burst_left: u32,
    burst_len: u32,
}

/// One direction of a link. Feed it each slot a port transmits; it returns what the far port receives
/// during that slot.
#[derive(Debug)]
pub struct Channel {
    config: ChannelConfig,
    lanes: Vec<Lane>,
    rate: Option<Rate>,
    faults: VecDeque<Fault>,
    stats: ChannelStats,
}

impl Channel {
    /// A channel behaving as `config` says.
    pub fn new(config: ChannelConfig) -> Self {
        let lanes = (0..config.lanes.min(MAX_LANES))
            .map(|l| {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                    config
                        .seed
                        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        .wrapping_add(l as u64 + 1),
                );
                let next_error = geometric(&mut rng, config.ber);
                let next_burst = geometric(&mut rng, config.burst_rate);
                Lane {
                    line: BitQueue::default(),
                    health: config.health.get(l).copied().unwrap_or(LaneHealth::Good),
                    inverted: config.inverted.contains(&l),
                    delay: config.skew.get(l).copied().unwrap_or(Duration::ZERO),
                    rng,
                    position: 0,
                    next_error,
                    next_burst,
                    burst_left: 0,
                    burst_len: 0,
                }
            })
            .collect();
        let mut faults: Vec<Fault> = config.faults.clone();
        faults.sort_by_key(|f| f.at);
        Channel {
            lanes,
            rate: None,
            faults: faults.into(),
            stats: ChannelStats::default(),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ChannelConfig {
        &self.config
    }

    /// Add a fault to strike at its time (in addition to those configured).
    pub fn schedule(&mut self, fault: Fault) {
        let at = self.faults.partition_point(|f| f.at <= fault.at);
        self.faults.insert(at, fault);
    }

    /// Whether `fault` is still to strike: it was configured or scheduled, and its time has not come.
    pub fn is_pending(&self, fault: &Fault) -> bool {
        self.faults.contains(fault)
    }

    /// What the channel has done so far.
    pub fn stats(&self) -> ChannelStats {
        self.stats
    }

    /// Whether a transmitter on physical lane `lane` would detect a receiver at the far end.
    pub fn receiver_present(&self, lane: usize) -> bool {
        self.lanes.get(lane).is_some_and(|l| l.health != LaneHealth::Dead)
    }

    /// A mask of the transmitter lanes that detect a receiver.
    pub fn receivers_present(&self) -> u32 {
        (0..self.lanes.len())
            .filter(|&l| self.receiver_present(l))
            .fold(0, |m, l| m | 1 << l)
    }

    /// The rate of the last slot carried (`None` before the first).
    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// Whether any lane's delay line still holds bits sent as signal (not electrical idle): what a port
    /// sent before it went quiet, still on its way to the far end.
    pub fn signal_in_flight(&self) -> bool {
        self.lanes.iter().any(|lane| lane.line.holds_signal())
    }

    /// Carry one slot sent at `now`; returns what arrives during the same slot at the far end.
    pub fn carry(&mut self, now: Instant, slot: &Slot) -> Slot {
        self.apply_faults(now);
        if self.rate != Some(slot.rate) {
            // A rate change happens during electrical idle: the delay lines refill at the new bit time.
            self.rate = Some(slot.rate);
            for lane in &mut self.lanes {
                // In 128 bits: at 32 GT/s a skew above 0.58 ms overflowed 64 (a panic in debug builds).
                let delay_bits = u128::from(lane.delay.as_ps())
                    * u128::from(slot.rate.transfers_per_second())
                    / 1_000_000_000_000;
                lane.line.clear();
                lane.line.push_idle(u64::try_from(delay_bits).unwrap_or(u64::MAX));
            }
        }
        let n = self.lanes.len();
        let mut out = Slot::idle(slot.rate);
        for tx in 0..n {
            let rx = if self.config.reversed { n - 1 - tx } else { tx };
            let lane = &mut self.lanes[tx];
            let (count, idle) = match &slot.lanes[tx] {
                LaneSignal::Idle => (slot.rate.slot_bits(), true),
                LaneSignal::Bits(bits) => {
                    let mut bits = *bits;
                    if self.config.max_rate.is_some_and(|max| slot.rate > max) {
                        bits = noise(&mut lane.rng, bits.len());
                    }
                    if lane.health == LaneHealth::Good {
                        corrupt(lane, &mut bits, &mut self.stats, &self.config);
                    }
                    for (chunk, k) in bits.chunks() {
                        lane.line.push(chunk, k, false);
                    }
                    (bits.len(), false)
                }
            };
            if idle {
                lane.line.push_idle(count as u64);
            }
            out.lanes[rx] = lane.receive(count);
        }
        out
    }

    fn apply_faults(&mut self, now: Instant) {
        while self.faults.front().is_some_and(|f| f.at <= now) {
            let Some(fault) = self.faults.pop_front() else {
                break;
            };
            match fault.kind {
                FaultKind::Burst { lane, bits } => {
                    if let Some(l) = self.lanes.get_mut(lane) {
                        l.burst_left = bits;
                        l.burst_len = bits;
                        self.stats.bursts += 1;
                    }
                }
                FaultKind::SetHealth { lane, health } => {
                    if let Some(l) = self.lanes.get_mut(lane) {
                        l.health = health;
                    }
                }
                FaultKind::SetBer(ber) => {
                    self.config.ber = ber;
                    for l in &mut self.lanes {
                        l.next_error = l.position + geometric(&mut l.rng, ber);
                    }
                }
            }
        }
    }
}

/// Flip the bits that random errors and bursts hit in this slot.
fn corrupt(lane: &mut Lane, bits: &mut SlotBits, stats: &mut ChannelStats, config: &ChannelConfig) {
    let start = lane.position;
    let end = start + bits.len() as u64;
    stats.bits += bits.len() as u64;
    while lane.next_error < end {
        bits.flip((lane.next_error - start) as u32);
        stats.flipped += 1;
        lane.next_error += 1 + geometric(&mut lane.rng, config.ber);
    }
    // A burst still going on continues at the start of this slot; random ones start where drawn.
    let mut p = start;
    loop {
        if lane.burst_left == 0 {
            if config.burst_rate <= 0.0 || lane.next_burst >= end {
                break;
            }
            p = p.max(lane.next_burst);
            lane.burst_left = config.burst_bits;
            lane.burst_len = config.burst_bits;
            stats.bursts += 1;
            lane.next_burst += 1 + geometric(&mut lane.rng, config.burst_rate);
        }
        while lane.burst_left > 0 && p < end {
            // The first and last bits of a burst are in error by definition; those between at random.
            if lane.burst_left == lane.burst_len || lane.burst_left == 1 || lane.rng.next_u32() & 1 == 1 {
                bits.flip((p - start) as u32);
                stats.flipped += 1;
            }
            lane.burst_left -= 1;
            p += 1;
        }
        if p >= end {
            break;
        }
    }
    lane.position = end;
}

impl Lane {
    fn receive(&mut self, count: u32) -> LaneSignal {
        let mut bits = SlotBits::default();
        let mut any_signal = false;
        let mut left = count;
        while left > 0 {
            let k = left.min(64);
            let (chunk, idle) = self.line.pop(k);
            any_signal |= idle != (if k == 64 { u64::MAX } else { (1u64 << k) - 1 });
            bits.push(chunk, k);
            left -= k;
        }
        match self.health {
            LaneHealth::Dead => LaneSignal::Idle,
            LaneHealth::Stuck(level) => {
                let mut stuck = SlotBits::default();
                for _ in 0..count.div_ceil(64) {
                    stuck.push(if level { u64::MAX } else { 0 }, 64);
                }
                let mut exact = SlotBits::default();
                for (c, k) in stuck.chunks() {
                    exact.push(c, k.min(count - exact.len()));
                    if exact.len() == count {
                        break;
                    }
                }
                LaneSignal::Bits(exact)
            }
            LaneHealth::Good if !any_signal => LaneSignal::Idle,
            LaneHealth::Good => {
                if self.inverted {
                    bits.invert();
                }
                LaneSignal::Bits(bits)
            }
        }
    }
}

/// `len` random bits.
fn noise(rng: &mut Xoshiro256PlusPlus, len: u32) -> SlotBits {
    let mut bits = SlotBits::EMPTY;
    while bits.len() < len {
        bits.push(rng.next_u64(), (len - bits.len()).min(64));
    }
    bits
}

/// The number of good bits before the next error when each bit fails with probability `p` (at most
/// `u64::MAX / 4`; `u64::MAX / 2` for `p` 0): a geometric draw, exact however small `p` is.
pub fn geometric(rng: &mut Xoshiro256PlusPlus, p: f64) -> u64 {
    if p <= 0.0 {
        return u64::MAX / 2;
    }
    if p >= 1.0 {
        return 0;
    }
    // U in (0, 1]: 53 random bits, never zero.
    let u = ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
    // ln(1 - p) as ln_1p(-p): 1 - p rounds to 1 below p = 2^-54, which made every gap 0.
    let gap = (u.ln() / (-p).ln_1p()).floor();
    if gap >= (u64::MAX / 4) as f64 {
        u64::MAX / 4
    } else {
        gap as u64
    }
}

/// A FIFO of bits with a parallel electrical-idle flag per bit. Chunks hold up to 64 bits, except a run of
/// idle (a lane's delay, an idle slot), which is one chunk however long: a skew of a second is billions of
/// bits of delay line, which as 64-bit chunks would be gigabytes.
#[derive(Debug, Default)]
struct BitQueue {
    /// (bits, idle flags, count); a chunk of more than 64 bits is all idle.
    bits: VecDeque<(u64, u64, u64)>,
    /// Bits already consumed from the front chunk.
    front_used: u64,
}

impl BitQueue {
    fn clear(&mut self) {
        self.bits.clear();
        self.front_used = 0;
    }

    fn push(&mut self, bits: u64, count: u32, idle: bool) {
        if count > 0 {
            self.bits
                .push_back((bits, if idle { u64::MAX } else { 0 }, u64::from(count.min(64))));
        }
    }

    /// Whether any bit queued is not electrical idle.
    fn holds_signal(&self) -> bool {
        self.bits.iter().enumerate().any(|(k, &(_, idle, n))| {
            // A chunk of more than 64 bits is all idle; in a shorter one, the bits not yet consumed.
            let used = if k == 0 { self.front_used } else { 0 };
            let unread = if n > 64 {
                0
            } else {
                let past_end = u64::MAX.checked_shl(n as u32).unwrap_or(0);
                !past_end & u64::MAX.checked_shl(used as u32).unwrap_or(0)
            };
            !idle & unread != 0
        })
    }

    fn push_idle(&mut self, count: u64) {
        if count > 0 {
            self.bits.push_back((0, u64::MAX, count));
        }
    }

    /// Pop `count` (at most 64) bits and their idle flags; missing bits read as idle.
    fn pop(&mut self, count: u32) -> (u64, u64) {
        let (mut bits, mut idle, mut got) = (0u64, 0u64, 0u32);
        while got < count {
            let Some(&(b, i, n)) = self.bits.front() else {
                idle |= u64::MAX.checked_shl(got).unwrap_or(0);
                break;
            };
            let avail = n - self.front_used;
            let take = avail.min(u64::from(count - got)) as u32;
            let mask = if take == 64 { u64::MAX } else { (1u64 << take) - 1 };
            // A long idle run is the same all along; only a chunk of at most 64 bits is shifted.
            let (b, i) = if n > 64 {
                (0, u64::MAX)
            } else {
                (b >> self.front_used, i >> self.front_used)
            };
            bits |= (b & mask) << got;
            idle |= (i & mask) << got;
            got += take;
            self.front_used += u64::from(take);
            if self.front_used == n {
                self.bits.pop_front();
                self.front_used = 0;
            }
        }
        let keep = if count == 64 {
            u64::MAX
        } else {
            (1u64 << count) - 1
        };
        (bits & keep, idle & keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    fn slot_of(rate: Rate, lanes: usize, f: impl Fn(usize) -> u64) -> Slot {
        let mut s = Slot::idle(rate);
        for l in 0..lanes {
            let mut b = SlotBits::default();
            b.push(f(l), rate.slot_bits());
            s.lanes[l] = LaneSignal::Bits(b);
        }
        s
    }

    fn bits_of(s: &LaneSignal) -> Option<u64> {
        match s {
            LaneSignal::Bits(b) => Some(b.get(0, 64)),
            LaneSignal::Idle => None,
        }
    }

    /// Gaps between errors average 1/p - 1 bits, also below p = 2^-54, where 1 - p rounds to 1 and every
    /// gap had been 0 (every bit an error); where 1/p passes the cap, gaps are the cap.
    #[test]
    fn error_gaps_are_geometric_for_every_rate() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for p in [1e-3, 1e-9, 1e-16, 1e-17, 1e-18] {
            let draws = 20_000;
            let mean = (0..draws).map(|_| geometric(&mut rng, p) as f64).sum::<f64>() / draws as f64;
            let expected = 1.0 / p - 1.0;
            assert!(
                (mean / expected - 1.0).abs() < 0.05,
                "p {p}: mean {mean}, expected {expected}"
            );
        }
        for p in [1e-30, 1e-300] {
            assert!((0..100).all(|_| geometric(&mut rng, p) == u64::MAX / 4), "p {p}");
        }
        assert_eq!(
            (geometric(&mut rng, 0.0), geometric(&mut rng, 1.0)),
            (u64::MAX / 2, 0)
        );
    }

    #[test]
    fn a_clean_channel_delays_each_lane_by_its_skew() {
        let mut cfg = ChannelConfig::clean(2);
        cfg.skew = vec![Duration::ZERO, Rate::Gen1.bits_time(13)];
        let mut ch = Channel::new(cfg);
        let mut rx = [Vec::new(), Vec::new()];
        for t in 0..10u64 {
            let out = ch.carry(Instant(t), &slot_of(Rate::Gen1, 2, |_| 0x200 | t));
            for (l, r) in rx.iter_mut().enumerate() {
                r.push(bits_of(&out.lanes[l]));
            }
        }
        assert_eq!(rx[0][3], Some(0x203));
        // 13 bits of delay: the first slot on lane 1 is idle, the second is mostly idle bits (zeros)
        // followed by the start of slot 0; later slots straddle two transmitted code groups.
        assert_eq!(rx[1][0], None);
        let expect = |t: u64| (((0x200 | t) << 3) | ((0x200 | (t - 1)) >> 7)) & 0x3FF;
        assert_eq!(rx[1][5], Some(expect(4)));
    }

    #[test]
    fn bit_errors_match_the_ber() {
        let mut cfg = ChannelConfig::clean(4);
        cfg.ber = 1e-3;
        cfg.seed = 7;
        let mut ch = Channel::new(cfg);
        for t in 0..100_000u64 {
            ch.carry(Instant(t), &slot_of(Rate::Gen3, 4, |_| 0));
        }
        let s = ch.stats();
        let expected = s.bits as f64 * 1e-3;
        assert!(
            (s.flipped as f64 - expected).abs() < 5.0 * expected.sqrt(),
            "{s:?}"
        );
    }

    #[test]
    fn dead_stuck_inverted_and_reversed_lanes() {
        let mut cfg = ChannelConfig::clean(4);
        cfg.health = vec![
            LaneHealth::Good,
            LaneHealth::Dead,
            LaneHealth::Stuck(true),
            LaneHealth::Good,
        ];
        cfg.inverted = vec![3];
        cfg.reversed = true;
        let mut ch = Channel::new(cfg);
        assert_eq!(ch.receivers_present(), 0b1101);
        let out = ch.carry(Instant(0), &slot_of(Rate::Gen1, 4, |l| l as u64));
        // Transmit lane l arrives on receive lane 3 - l.
        assert_eq!(bits_of(&out.lanes[3]), Some(0));
        assert_eq!(bits_of(&out.lanes[2]), None);
        assert_eq!(bits_of(&out.lanes[1]), Some(0x3FF));
        assert_eq!(bits_of(&out.lanes[0]), Some(!3 & 0x3FF));
    }

    #[test]
    fn scheduled_faults_strike_on_time() {
        let mut cfg = ChannelConfig::clean(1);
        cfg.faults = vec![
            Fault {
                at: Instant(5),
                kind: FaultKind::Burst { lane: 0, bits: 16 },
            },
            Fault {
                at: Instant(9),
                kind: FaultKind::SetHealth {
                    lane: 0,
                    health: LaneHealth::Dead,
                },
            },
        ];
        let mut ch = Channel::new(cfg);
        let mut seen = Vec::new();
        for t in 0..12u64 {
            seen.push(bits_of(
                &ch.carry(Instant(t), &slot_of(Rate::Gen1, 1, |_| 0)).lanes[0],
            ));
        }
        assert!(seen[..5].iter().all(|s| *s == Some(0)));
        assert_ne!(seen[5], Some(0), "burst starts with an error");
        assert_ne!(seen[6], Some(0), "burst ends with an error");
        assert!(seen[7..9].iter().all(|s| *s == Some(0)));
        assert!(seen[9..].iter().all(|s| s.is_none()));
        assert_eq!(ch.stats().bursts, 1);
    }

    /// Random bursts start at the burst rate, each where its draw puts it, and flip its first and last
    /// bit (and no bit outside it). A burst used to be applied at the draw of the burst after it, which
    /// pushed it into the next slot and rescheduled the following one to that slot's start: from then
    /// on a burst started every other slot whatever the rate.
    #[test]
    fn random_bursts_follow_the_burst_rate() {
        let mut cfg = ChannelConfig::clean(1);
        cfg.burst_rate = 1e-4;
        cfg.burst_bits = 4;
        cfg.seed = 11;
        let mut ch = Channel::new(cfg);
        let mut errors = Vec::new();
        for t in 0..100_000u64 {
            let got = bits_of(&ch.carry(Instant(t), &slot_of(Rate::Gen1, 1, |_| 0)).lanes[0]).unwrap();
            errors.extend((0..10).filter(|i| got >> i & 1 == 1).map(|i| t * 10 + i));
        }
        let s = ch.stats();
        let expected = s.bits as f64 * 1e-4;
        assert!(
            (s.bursts as f64 - expected).abs() < 5.0 * expected.sqrt(),
            "{s:?}, expected about {expected} bursts"
        );
        // Every burst of 4 bits shows as a first and last error 3 bits apart (bursts this rare never
        // overlap here), with at most two more errors between them.
        let mut i = 0;
        let mut seen = 0;
        while i < errors.len() {
            let first = errors[i];
            let last = first + 3;
            assert!(
                errors[i..].contains(&last),
                "burst at bit {first} does not end at {last}"
            );
            while i < errors.len() && errors[i] <= last {
                i += 1;
            }
            seen += 1;
        }
        assert_eq!(seen, s.bursts);
    }

    #[test]
    fn the_same_seed_gives_the_same_errors() {
        let run = |seed| {
            let mut cfg = ChannelConfig::clean(2);
            cfg.ber = 1e-2;
            cfg.seed = seed;
            let mut ch = Channel::new(cfg);
            (0..200u64)
                .map(|t| bits_of(&ch.carry(Instant(t), &slot_of(Rate::Gen1, 2, |_| 0)).lanes[1]))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }

    #[test]
    fn rates_above_the_channel_limit_arrive_as_noise() {
        let mut cfg = ChannelConfig::clean(1);
        cfg.max_rate = Some(Rate::Gen2);
        let mut ch = Channel::new(cfg);
        assert_eq!(
            bits_of(&ch.carry(Instant(0), &slot_of(Rate::Gen1, 1, |_| 0)).lanes[0]),
            Some(0)
        );
        let noisy = (0..8u64)
            .filter(|&t| bits_of(&ch.carry(Instant(t), &slot_of(Rate::Gen3, 1, |_| 0)).lanes[0]) != Some(0))
            .count();
        assert!(noisy >= 7);
    }

    /// The bits one lane receives over `slots` slots of `rate`, idle as zeros, each lane sending its
    /// own nonzero pattern.
    fn streams(ch: &mut Channel, rate: Rate, slots: u64) -> Vec<Vec<bool>> {
        let mut rx = vec![Vec::new(); ch.config().lanes];
        for t in 0..slots {
            let mut sent = Slot::idle(rate);
            for (l, lane) in sent.lanes[..rx.len()].iter_mut().enumerate() {
                let word = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (l as u64 + 1);
                let mut b = SlotBits::default();
                while b.len() < rate.slot_bits() {
                    b.push(word.rotate_left(b.len()), rate.slot_bits() - b.len());
                }
                *lane = LaneSignal::Bits(b);
            }
            let out = ch.carry(Instant(t), &sent);
            for (l, r) in rx.iter_mut().enumerate() {
                let b = match &out.lanes[l] {
                    LaneSignal::Bits(b) => *b,
                    LaneSignal::Idle => SlotBits::default(),
                };
                r.extend((0..rate.slot_bits()).map(|i| i < b.len() && b.get(i, 1) == 1));
            }
        }
        rx
    }

    /// A delay line longer than a chunk is exact to the bit: a lane 1000 bits late at 32 GT/s receives
    /// what an undelayed lane sending the same bits receives, 1000 bits later.
    #[test]
    fn a_long_delay_is_exact_to_the_bit() {
        let mut skewed = ChannelConfig::clean(2);
        skewed.skew = vec![Duration::ZERO, Rate::Gen5.bits_time(1000)];
        let rx = streams(&mut Channel::new(skewed), Rate::Gen5, 40);
        let sent = streams(&mut Channel::new(ChannelConfig::clean(2)), Rate::Gen5, 40);
        assert_eq!(rx[0], sent[0]);
        assert!(rx[1][..1000].iter().all(|&b| !b));
        assert_eq!(rx[1][1000..], sent[1][..sent[1].len() - 1000]);
    }

    /// A skew past 0.58 ms overflowed 64 bits at 32 GT/s (a debug-build panic), and a delay line of 64-bit
    /// chunks would have held half a billion of them for a second of skew. Now the delay is one idle run
    /// and the late lane is simply silent.
    #[test]
    fn a_skew_of_a_second_is_carried_in_constant_memory() {
        let mut cfg = ChannelConfig::clean(2);
        cfg.skew = vec![Duration::ZERO, Duration::from_ms(1_000)];
        let mut ch = Channel::new(cfg);
        for t in 0..20u64 {
            let out = ch.carry(Instant(t), &slot_of(Rate::Gen5, 2, |_| 0x5555));
            assert!(matches!(out.lanes[0], LaneSignal::Bits(_)));
            assert_eq!(out.lanes[1], LaneSignal::Idle);
        }
        assert!(
            ch.lanes[1].line.bits.len() <= 64,
            "{}",
            ch.lanes[1].line.bits.len()
        );
        // Seeded skews up to the longest span there is stay in range (`max + 1` overflowed).
        let s = ChannelConfig::random_skew(4, Duration(u64::MAX), 1);
        assert!(s.contains(&Duration(u64::MAX)) && s.contains(&Duration::ZERO));
    }

    #[test]
    fn random_skew_spans_the_range() {
        let s = ChannelConfig::random_skew(8, Duration::from_ns(48), 1);
        assert_eq!(s.iter().max(), Some(&Duration::from_ns(48)));
        assert_eq!(s.iter().min(), Some(&Duration::ZERO));
    }
}
