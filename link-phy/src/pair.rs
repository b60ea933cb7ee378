//! Two ports joined by a channel in each direction, driven by a small discrete-event loop: the harness
//! that tests, `linkctl link train` and the simulator use to bring a link up.

use std::vec::Vec;

use crate::channel::{Channel, ChannelConfig};
use crate::ltssm::{LtssmState, PhyEvent, Port, PortConfig};
use crate::time::Instant;

/// Which port of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Port A (usually the downstream port).
    A,
    /// Port B.
    B,
}

/// One state change of one port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// When.
    pub at: Instant,
    /// Which port.
    pub side: Side,
    /// The state it left.
    pub from: LtssmState,
    /// The state it entered.
    pub to: LtssmState,
}

/// Two ports and the channels between them.
#[derive(Debug)]
pub struct LinkPair {
    /// Port A.
    pub a: Port,
    /// Port B.
    pub b: Port,
    /// The channel from A to B.
    pub ab: Channel,
    /// The channel from B to A.
    pub ba: Channel,
    now: Instant,
    transitions: Vec<Transition>,
    events: Vec<(Side, PhyEvent)>,
}

impl LinkPair {
    /// Two ports at time zero, in Detect.Quiet.
    pub fn new(
        a: PortConfig,
        b: PortConfig,
        ab: ChannelConfig,
        ba: ChannelConfig,
    ) -> Result<Self, crate::Error> {
        Ok(LinkPair {
            a: Port::new(a, Instant::ZERO)?,
            b: Port::new(b, Instant::ZERO)?,
            ab: Channel::new(ab),
            ba: Channel::new(ba),
            now: Instant::ZERO,
            transitions: Vec::new(),
            events: Vec::new(),
        })
    }

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Every state change so far, in order.
    pub fn transitions(&self) -> &[Transition] {
        &self.transitions
    }

    /// Every event so far (link up and down, retraining), in order.
    pub fn events(&self) -> &[(Side, PhyEvent)] {
        &self.events
    }

    /// A port by side.
    pub fn port(&self, side: Side) -> &Port {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    /// A port by side, mutably.
    pub fn port_mut(&mut self, side: Side) -> &mut Port {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Advance to the next thing that happens, sending logical idle in L0. Returns false when nothing will
    /// ever happen again (both ports quiet with no timer).
    pub fn step(&mut self) -> bool {
        self.step_with(&mut |_, buf| buf.fill(0), &mut |_, _, _| {})
    }

    /// Advance to the next thing that happens. In L0, `fill(side, buf)` supplies the data port `side`
    /// sends and `deliver(side, data, index)` receives what port `side` got (see [`Port::receive`]).
    pub fn step_with(
        &mut self,
        fill: &mut dyn FnMut(Side, &mut [u8]),
        deliver: &mut dyn FnMut(Side, &[u8], u64),
    ) -> bool {
        if self.a.wants_receiver_detection() {
            self.a.receivers_detected(self.now, self.ab.receivers_present());
        }
        if self.b.wants_receiver_detection() {
            self.b.receivers_detected(self.now, self.ba.receivers_present());
        }
        let next = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else {
            self.collect_events();
            return false;
        };
        self.now = self.now.max(next);
        let now = self.now;
        if !self.a.is_quiet() && self.a.next_transmit() <= now {
            let slot = self.a.poll_transmit(now, &mut |buf| fill(Side::A, buf));
            let arrived = self.ab.carry(now, &slot);
            self.b
                .receive(now, &arrived, &mut |data, index| deliver(Side::B, data, index));
        }
        if !self.b.is_quiet() && self.b.next_transmit() <= now {
            let slot = self.b.poll_transmit(now, &mut |buf| fill(Side::B, buf));
            let arrived = self.ba.carry(now, &slot);
            self.a
                .receive(now, &arrived, &mut |data, index| deliver(Side::A, data, index));
        }
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
        self.collect_events();
        true
    }

    fn collect_events(&mut self) {
        for (side, port) in [(Side::A, &mut self.a), (Side::B, &mut self.b)] {
            while let Some(event) = port.poll_event() {
                if let PhyEvent::StateChanged { at, from, to } = event {
                    self.transitions.push(Transition { at, side, from, to });
                } else {
                    self.events.push((side, event));
                }
            }
        }
    }

    /// Step until `done` holds or simulated time passes `limit`. Returns whether `done` held.
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&LinkPair) -> bool) -> bool {
        while !done(self) {
            if self.now > limit || !self.step() {
                return done(self);
            }
        }
        true
    }

    /// Train until both ports are in L0 at the highest rate they can agree on and have stayed there for a
    /// while, or one of them fails, or `limit` passes. Returns whether the link is up.
    pub fn train(&mut self, limit: Instant) -> bool {
        let settle = crate::time::Duration::from_us(20);
        let stable = |p: &LinkPair| {
            let last = p.transitions.last().map_or(Instant::ZERO, |t| t.at);
            (p.a.is_up() && p.b.is_up() && p.now.saturating_since(last) >= settle)
                || p.a.state() == LtssmState::Failed
                || p.b.state() == LtssmState::Failed
        };
        self.run_until(limit, stable);
        self.a.is_up() && self.b.is_up()
    }
}
