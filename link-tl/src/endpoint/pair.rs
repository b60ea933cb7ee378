//! Two endpoints joined by a pair of data links, with bit errors on the wire: the harness behind
//! `linkctl tl copy` and the endpoint tests.
//!
//! The data links are wired back to back without a physical layer ([`link_dl::fuzz::BackToBack`]: one
//! unit each way per step, time advancing by the unit time of x8 at 8 GT/s). Each unit on the wire has
//! its bits flipped at the configured bit error rate; the data links' CRC catches that and they replay, so
//! the endpoints see every packet exactly once, and the copy must still come out exact.

use link_dl::flit::FLIT_LEN;
use link_dl::fuzz::BackToBack;
use link_dl::DlConfig;
use link_phy::time::{Duration, Instant};

use crate::address::AddressMap;
use crate::endpoint::{Endpoint, Event, Memory};

/// The endpoint type of a pair: 2 windows, 256 tags, 4 transfers, 64 waiting requests, 64 packets of
/// transmit queue per channel, 16 events.
pub type PairEndpoint<'m, M> = Endpoint<'m, M, 2, 256, 4, 64, 64, 16>;

/// Which end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Endpoint A.
    A,
    /// Endpoint B.
    B,
}

/// Where on the wire a tap sees a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TapPoint {
    /// As its sender put it on the wire, before any error.
    Sent,
    /// As its receiver took it: after the wire's bit errors; a lost unit is not there and a repeated one
    /// is there twice.
    Received,
}

/// Random bit errors on a wire: each unit has one bit flipped with probability `ber` x 128 (at most 1).
#[derive(Clone, Debug)]
pub struct BitErrors {
    unit_error: f64,
    rng: u64,
    /// Units that crossed the wire.
    pub units: u64,
    /// Bits flipped.
    pub bits_flipped: u64,
}

impl BitErrors {
    /// The bit error rate at which every unit has a bit flipped: higher rates flip no more bits than it.
    pub const MAX_BER: f64 = 1.0 / (FLIT_LEN * 8) as f64;

    /// Errors at bit error rate `ber`, drawn from `seed`.
    pub fn new(ber: f64, seed: u64) -> Self {
        BitErrors {
            unit_error: (ber * (FLIT_LEN * 8) as f64).clamp(0.0, 1.0),
            // Not `seed | 1`, which gave seeds 2k and 2k + 1 the same errors (and the coherence stress's
            // agents 2k and 2k + 1, seeded `31 * seed + agent`, the same errors on their links).
            rng: crate::xorshift::state(seed),
            units: 0,
            bits_flipped: 0,
        }
    }

    /// A uniform draw in [0, 1) (xorshift64*).
    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Pass one unit over the wire.
    pub fn apply(&mut self, unit: &mut [u8; FLIT_LEN]) {
        self.units += 1;
        if self.unit_error > 0.0 && self.uniform() < self.unit_error {
            let bit = (self.uniform() * (FLIT_LEN * 8) as f64) as usize % (FLIT_LEN * 8);
            unit[bit / 8] ^= 1 << (bit % 8);
            self.bits_flipped += 1;
        }
    }
}

/// Two endpoints and the data links between them.
pub struct Pair<'m, A: Memory, B: Memory> {
    /// Endpoint A, on data link `link.a`.
    pub a: PairEndpoint<'m, A>,
    /// Endpoint B, on data link `link.b`.
    pub b: PairEndpoint<'m, B>,
    /// The data links.
    pub link: BackToBack,
    /// The wire between them, both ways.
    pub wire: BitErrors,
    /// Units lost and repeated on the wire (as `link_dl::sim`'s flit injector does them).
    pub losses: UnitLosses,
}

/// Units the wire loses or delivers twice, each with a probability per unit, and how many it did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnitLosses {
    /// Probability that a unit vanishes.
    pub drop: f64,
    /// Probability that a unit arrives twice.
    pub duplicate: f64,
    /// Units dropped.
    pub dropped: u64,
    /// Units delivered twice.
    pub duplicated: u64,
}

impl<A: Memory, B: Memory> core::fmt::Debug for Pair<'_, A, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pair")
            .field("wire", &self.wire)
            .finish_non_exhaustive()
    }
}

impl<'m, A: Memory, B: Memory> Pair<'m, A, B> {
    /// Endpoint 0 over `a` and endpoint 1 over `b`, both reaching each other through `map`, on data links
    /// that are up; `ber` is the bit error rate of the wire, `seed` picks the errors. `None` if the data
    /// links do not come up (a bug).
    pub fn new(a: A, b: B, map: &'m AddressMap<2>, ber: f64, seed: u64) -> Option<Self> {
        Self::new_tapped(a, b, map, ber, seed, &mut |_, _, _, _| {})
    }

    /// [`Pair::new`], each unit the data links exchange while they come up handed to `tap` as for
    /// [`Pair::step_tapped`] (sent and received alike: the wire's errors start with the pair).
    pub fn new_tapped(
        a: A,
        b: B,
        map: &'m AddressMap<2>,
        ber: f64,
        seed: u64,
        tap: &mut impl FnMut(Side, Instant, &[u8; FLIT_LEN], TapPoint),
    ) -> Option<Self> {
        let timeout = Duration::from_ms(1);
        let link = BackToBack::active_tapped(DlConfig::default(), |now, unit, from_a| {
            let sender = if from_a { Side::A } else { Side::B };
            tap(sender, now, unit, TapPoint::Sent);
            tap(sender, now, unit, TapPoint::Received);
        })?;
        Some(Pair {
            a: Endpoint::new(0, a, map, timeout),
            b: Endpoint::new(1, b, map, timeout),
            link,
            wire: BitErrors::new(ber, seed),
            losses: UnitLosses::default(),
        })
    }

    /// [`BackToBack::step_with`] plus lost and repeated units; the wire's generator draws them too.
    fn step_wire_with_losses(&mut self, tap: &mut impl FnMut(Side, Instant, &[u8; FLIT_LEN], TapPoint)) {
        let link = &mut self.link;
        let (mut ab, mut ba) = ([0u8; FLIT_LEN], [0u8; FLIT_LEN]);
        link.a.poll_unit(link.now, &mut ab);
        link.b.poll_unit(link.now, &mut ba);
        for (unit, to_b) in [(&mut ab, true), (&mut ba, false)] {
            let sender = if to_b { Side::A } else { Side::B };
            tap(sender, link.now, unit, TapPoint::Sent);
            self.wire.apply(unit);
            let copies = if self.wire.uniform() < self.losses.drop {
                self.losses.dropped += 1;
                0
            } else if self.wire.uniform() < self.losses.duplicate {
                self.losses.duplicated += 1;
                2
            } else {
                1
            };
            let receiver = if to_b { &mut link.b } else { &mut link.a };
            for _ in 0..copies {
                tap(sender, link.now, unit, TapPoint::Received);
                receiver.receive_unit(link.now, unit, link.units);
            }
        }
        link.units += 1;
        link.now += link.unit;
    }

    /// One unit time: both endpoints send what they can, one unit crosses each way, received packets go
    /// up to the endpoints while they can take them, timeouts fire, and each event is handed to `event`.
    pub fn step(&mut self, event: &mut impl FnMut(Side, Event)) {
        self.step_tapped(event, &mut |_, _, _, _| {});
    }

    /// [`Pair::step`], with each unit handed to `tap` as its sender put it on the wire and as its receiver
    /// took it ([`TapPoint`]), with the sender and the time: for a trace of the link.
    pub fn step_tapped(
        &mut self,
        event: &mut impl FnMut(Side, Event),
        tap: &mut impl FnMut(Side, Instant, &[u8; FLIT_LEN], TapPoint),
    ) {
        let now = self.link.now;
        self.a.poll_transmit(now, &mut self.link.a);
        self.b.poll_transmit(now, &mut self.link.b);
        if self.losses.drop > 0.0 || self.losses.duplicate > 0.0 {
            self.step_wire_with_losses(tap);
        } else {
            let wire = &mut self.wire;
            self.link.step_each(|unit, from_a| {
                let sender = if from_a { Side::A } else { Side::B };
                tap(sender, now, unit, TapPoint::Sent);
                wire.apply(unit);
                tap(sender, now, unit, TapPoint::Received);
            });
        }
        while self.a.can_receive() {
            let Some(packet) = self.link.a.recv() else { break };
            let _ = self.a.receive_packet(now, &packet);
        }
        while self.b.can_receive() {
            let Some(packet) = self.link.b.recv() else { break };
            let _ = self.b.receive_packet(now, &packet);
        }
        if self.a.poll_timeout().is_some_and(|t| t <= now) {
            self.a.handle_timeout(now);
        }
        if self.b.poll_timeout().is_some_and(|t| t <= now) {
            self.b.handle_timeout(now);
        }
        while let Some(e) = self.a.poll_event() {
            event(Side::A, e);
        }
        while let Some(e) = self.b.poll_event() {
            event(Side::B, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BitErrors;

    /// Neighbouring seeds draw different errors (`seed | 1` as the state gave seeds 2 and 3 the same).
    #[test]
    fn neighbouring_seeds_flip_different_bits() {
        let flips = |seed| {
            // At the highest rate every unit has a bit flipped: which one is the stream.
            let mut errors = BitErrors::new(BitErrors::MAX_BER, seed);
            core::array::from_fn::<_, 64, _>(|_| {
                let mut unit = [0u8; 16];
                errors.apply(&mut unit);
                unit
            })
        };
        for seed in [0, 2, 62] {
            assert!(flips(seed) != flips(seed + 1), "seeds {seed} and {}", seed + 1);
        }
        assert!(flips(7) == flips(7));
    }
}
