//! Two ports joined by a channel in each direction, driven by a small discrete-event loop: the harness
//! that tests, `linkctl link train` and the simulator use to bring a link up.

use std::vec::Vec;

use crate::channel::{Channel, ChannelConfig};
use crate::lanes::MAX_LANES;
use crate::ltssm::{LaneNumbers, LinkEvent, LinkMonitor, LtssmState, PhyEvent, Port, PortConfig};
use crate::rate::Rate;
use crate::serial::{LaneSignal, Slot};
use crate::time::Instant;

/// One end of a pair: a physical layer, alone or with layers above it.
pub trait Node {
    /// Its physical layer.
    fn port(&self) -> &Port;
    /// Its physical layer, mutably.
    fn port_mut(&mut self) -> &mut Port;
    /// The next slot. A bare port sends what `fill` gives it in L0; a node with layers above ignores it.
    fn transmit(&mut self, now: Instant, fill: &mut dyn FnMut(&mut [u8])) -> Slot;
    /// A slot received. A bare port hands L0 data to `deliver`; a node with layers above keeps it.
    fn receive(&mut self, now: Instant, slot: &Slot, deliver: &mut dyn FnMut(&[u8], u64));
    /// When the node next needs attention.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Let timers fire.
    fn handle_timeout(&mut self, now: Instant);
    /// The next physical-layer event, for the pair's history.
    fn poll_phy_event(&mut self) -> Option<PhyEvent>;
}

impl Node for Port {
    fn port(&self) -> &Port {
        self
    }
    fn port_mut(&mut self) -> &mut Port {
        self
    }
    fn transmit(&mut self, now: Instant, fill: &mut dyn FnMut(&mut [u8])) -> Slot {
        self.poll_transmit(now, fill)
    }
    fn receive(&mut self, now: Instant, slot: &Slot, deliver: &mut dyn FnMut(&[u8], u64)) {
        Port::receive(self, now, slot, deliver)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Port::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Port::handle_timeout(self, now)
    }
    fn poll_phy_event(&mut self) -> Option<PhyEvent> {
        self.poll_event()
    }
}

/// What watches the slots a node sends: a recording in memory ([`LaneRecorder`]), or `linkctl`'s capture
/// to files.
pub trait Tap {
    /// `port` sent `slot` at `now`.
    fn sent(&mut self, now: Instant, slot: &Slot, port: &Port);
}

/// A node whose transmitter a [`Tap`] watches; otherwise it is the node.
#[derive(Debug)]
pub struct Tapped<N, T> {
    /// The node.
    pub node: N,
    /// What watches it.
    pub tap: T,
}

impl<N: Node, T: Tap> Node for Tapped<N, T> {
    fn port(&self) -> &Port {
        self.node.port()
    }
    fn port_mut(&mut self) -> &mut Port {
        self.node.port_mut()
    }
    fn transmit(&mut self, now: Instant, fill: &mut dyn FnMut(&mut [u8])) -> Slot {
        let slot = self.node.transmit(now, fill);
        self.tap.sent(now, &slot, self.node.port());
        slot
    }
    fn receive(&mut self, now: Instant, slot: &Slot, deliver: &mut dyn FnMut(&[u8], u64)) {
        self.node.receive(now, slot, deliver)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.node.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.node.handle_timeout(now)
    }
    fn poll_phy_event(&mut self) -> Option<PhyEvent> {
        self.node.poll_phy_event()
    }
}

/// A node whose transmitter's lanes are recorded in memory: what a capture of them holds, for a
/// [`crate::ltssm::LinkMonitor`] to read (tests and fuzzing).
pub type Recording<N = Port> = Tapped<N, LaneRecorder>;

impl<N: Node> Recording<N> {
    /// Record what `node` sends at `rate`.
    pub fn new(node: N, rate: Rate) -> Self {
        Tapped {
            node,
            tap: LaneRecorder {
                rate,
                lanes: Default::default(),
                numbers: None,
            },
        }
    }
}

/// A transmitter's lanes, recorded from the first slot at `rate` on.
#[derive(Debug)]
pub struct LaneRecorder {
    /// The rate recorded at.
    pub rate: Rate,
    /// Each physical lane's bits, as the slots gave them: words of up to 64 bits, the first on the wire
    /// in bit 0, and how many each holds.
    pub lanes: [Vec<(u64, u32)>; MAX_LANES],
    /// The lane numbers the link had given the lanes when recording began.
    pub numbers: Option<LaneNumbers>,
}

impl Tap for LaneRecorder {
    fn sent(&mut self, _now: Instant, slot: &Slot, port: &Port) {
        if slot.rate != self.rate {
            return;
        }
        let map = port.lane_map();
        self.numbers.get_or_insert_with(|| {
            LaneNumbers(core::array::from_fn(|p| {
                map.and_then(|m| m.logical(p)).map(|l| l as u8)
            }))
        });
        for (lane, signal) in self.lanes.iter_mut().zip(&slot.lanes) {
            if let LaneSignal::Bits(bits) = signal {
                lane.extend(bits.chunks());
            }
        }
    }
}

/// Feed recorded lanes (as [`LaneRecorder::lanes`] holds them) into `monitor`, a word from each lane in turn,
/// lane `l` delayed by `delay_bits[l]` zero bits first (captured that much later than the others; lanes
/// without an entry are not delayed).
pub fn replay_lanes(
    monitor: &mut LinkMonitor,
    lanes: &[Vec<(u64, u32)>],
    delay_bits: &[u32],
    emit: &mut impl FnMut(LinkEvent),
) {
    let delay = |l: usize| delay_bits.get(l).copied().unwrap_or(0);
    let words = |l: usize| delay(l).div_ceil(64) as usize + lanes[l].len();
    let longest = (0..lanes.len()).map(words).max().unwrap_or(0);
    for i in 0..longest {
        for (lane, recorded) in lanes.iter().enumerate() {
            let zeros = delay(lane);
            let zero_words = zeros.div_ceil(64) as usize;
            if i < zero_words {
                let count = if i + 1 == zero_words && zeros % 64 != 0 {
                    zeros % 64
                } else {
                    64
                };
                monitor.push_bits(lane, 0, count, emit);
            } else if let Some(&(bits, count)) = recorded.get(i - zero_words) {
                monitor.push_bits(lane, bits, count, emit);
            }
        }
    }
}

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

/// Two nodes (bare ports by default) and the channels between them.
#[derive(Debug)]
pub struct LinkPair<N: Node = Port> {
    /// Node A.
    pub a: N,
    /// Node B.
    pub b: N,
    /// The channel from A to B.
    pub ab: Channel,
    /// The channel from B to A.
    pub ba: Channel,
    now: Instant,
    transitions: Vec<Transition>,
    events: Vec<(Side, PhyEvent)>,
    /// Per direction (A to B, B to A), the next slot time at which electrical idle is carried through
    /// the channel of a port gone quiet for a rate change, while what it sent before is still on its way
    /// or its partner waits for the quiet ([`drain_due`]): a quiet port sends no slots, and the channel
    /// delivers only as it carries them, so
    /// with a long lane delay its last training sets and EIOS had waited in the delay line until it sent
    /// again, and the rate change then dropped them. Its partner in Recovery.RcvrCfg never saw them and
    /// missed the speed change, which failed after Recovery.RcvrLock's 24 ms at the new rate.
    drain_at: [Option<Instant>; 2],
}

impl LinkPair<Port> {
    /// Two ports at time zero, in Detect.Quiet.
    pub fn new(
        a: PortConfig,
        b: PortConfig,
        ab: ChannelConfig,
        ba: ChannelConfig,
    ) -> Result<Self, crate::Error> {
        Ok(LinkPair::with_nodes(
            Port::new(a, Instant::ZERO)?,
            Port::new(b, Instant::ZERO)?,
            ab,
            ba,
        ))
    }
}

impl<N: Node> LinkPair<N> {
    /// Two nodes, starting at time zero.
    pub fn with_nodes(a: N, b: N, ab: ChannelConfig, ba: ChannelConfig) -> Self {
        LinkPair {
            a,
            b,
            ab: Channel::new(ab),
            ba: Channel::new(ba),
            now: Instant::ZERO,
            transitions: Vec::new(),
            events: Vec::new(),
            drain_at: [None; 2],
        }
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

    /// A node by side.
    pub fn node(&self, side: Side) -> &N {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    /// A node by side, mutably.
    pub fn node_mut(&mut self, side: Side) -> &mut N {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// The channel the transmitter at `side` sends into: [`LinkPair::ab`] for A.
    pub fn channel_from(&self, side: Side) -> &Channel {
        match side {
            Side::A => &self.ab,
            Side::B => &self.ba,
        }
    }

    /// [`LinkPair::channel_from`], mutably.
    pub fn channel_from_mut(&mut self, side: Side) -> &mut Channel {
        match side {
            Side::A => &mut self.ab,
            Side::B => &mut self.ba,
        }
    }

    /// Advance to the next thing that happens, sending logical idle in L0. Returns false when nothing will
    /// ever happen again (both ports quiet with no timer).
    pub fn step(&mut self) -> bool {
        self.step_idle_within(Instant(u64::MAX))
    }

    /// Advance to the next thing that happens, or to `limit` if nothing happens before it: time then
    /// stops at `limit` even when nothing is due at all (both ports quiet in L1, say). Returns whether
    /// something happened.
    pub fn step_until(&mut self, limit: Instant) -> bool {
        let stepped = self.step_idle_within(limit);
        if !stepped {
            self.now = self.now.max(limit);
        }
        stepped
    }

    /// [`LinkPair::step`], but no further than `limit` (see [`LinkPair::step_within`]).
    fn step_idle_within(&mut self, limit: Instant) -> bool {
        self.step_within(limit, &mut |_, buf| buf.fill(0), &mut |_, _, _| {})
    }

    /// Advance to the next thing that happens. In L0, `fill(side, buf)` supplies the data port `side`
    /// sends and `deliver(side, data, index)` receives what port `side` got (see [`Port::receive`]).
    pub fn step_with(
        &mut self,
        fill: &mut dyn FnMut(Side, &mut [u8]),
        deliver: &mut dyn FnMut(Side, &[u8], u64),
    ) -> bool {
        self.step_within(Instant(u64::MAX), fill, deliver)
    }

    /// [`LinkPair::step_with`], but if the next thing happens after `limit`, only advance time to
    /// `limit` and return false.
    fn step_within(
        &mut self,
        limit: Instant,
        fill: &mut dyn FnMut(Side, &mut [u8]),
        deliver: &mut dyn FnMut(Side, &[u8], u64),
    ) -> bool {
        let now = self.now;
        let detecting = self.a.port().wants_receiver_detection() || self.b.port().wants_receiver_detection();
        if self.a.port().wants_receiver_detection() {
            let present = self.ab.receivers_present();
            self.a.port_mut().receivers_detected(now, present);
        }
        if self.b.port().wants_receiver_detection() {
            let present = self.ba.receivers_present();
            self.b.port_mut().receivers_detected(now, present);
        }
        if detecting {
            // What detection changed happened now: collected before the next step's changes, the history
            // stays in time order (and `train` sees its latest change).
            self.collect_events();
        }
        let drain = [
            drain_due(self.a.port(), self.b.port(), &self.ab, self.drain_at[0]),
            drain_due(self.b.port(), self.a.port(), &self.ba, self.drain_at[1]),
        ];
        self.drain_at = drain;
        let next = [self.a.poll_timeout(), self.b.poll_timeout(), drain[0], drain[1]]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next.filter(|&next| next <= limit) else {
            if next.is_some() {
                self.now = self.now.max(limit);
            }
            self.collect_events();
            return false;
        };
        self.now = self.now.max(next);
        let now = self.now;
        if !self.a.port().is_quiet() && self.a.port().next_transmit() <= now {
            let slot = self.a.transmit(now, &mut |buf| fill(Side::A, buf));
            let arrived = self.ab.carry(now, &slot);
            self.b
                .receive(now, &arrived, &mut |data, index| deliver(Side::B, data, index));
        } else if let Some(arrived) = drain_slot(&mut self.ab, &mut self.drain_at[0], now) {
            self.b
                .receive(now, &arrived, &mut |data, index| deliver(Side::B, data, index));
        }
        if !self.b.port().is_quiet() && self.b.port().next_transmit() <= now {
            let slot = self.b.transmit(now, &mut |buf| fill(Side::B, buf));
            let arrived = self.ba.carry(now, &slot);
            self.a
                .receive(now, &arrived, &mut |data, index| deliver(Side::A, data, index));
        } else if let Some(arrived) = drain_slot(&mut self.ba, &mut self.drain_at[1], now) {
            self.a
                .receive(now, &arrived, &mut |data, index| deliver(Side::A, data, index));
        }
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
        self.collect_events();
        true
    }

    fn collect_events(&mut self) {
        for (side, node) in [(Side::A, &mut self.a), (Side::B, &mut self.b)] {
            while let Some(event) = node.poll_phy_event() {
                if let PhyEvent::StateChanged { at, from, to } = event {
                    self.transitions.push(Transition { at, side, from, to });
                } else {
                    self.events.push((side, event));
                }
            }
        }
    }

    /// Step until `done` holds or the next thing would happen after `limit` (time then stops at `limit`).
    /// Returns whether `done` held.
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&LinkPair<N>) -> bool) -> bool {
        while !done(self) {
            if !self.step_idle_within(limit) {
                return done(self);
            }
        }
        true
    }

    /// Train until both ports are in L0 at the rate they settle on (no speed change under way or still
    /// to try) and have stayed there for a while, or one of them fails, or `limit` passes. Returns
    /// whether the link is up. A link whose bit errors have already made it retrain from L0 is up as
    /// soon as both ports are back in L0 at that rate: at a high bit error rate it goes back through
    /// Recovery every few microseconds and would never stay in L0 for the while, yet it trained.
    pub fn train(&mut self, limit: Instant) -> bool {
        let settle = crate::time::Duration::from_us(20);
        let stable = |p: &LinkPair<N>| {
            let (a, b) = (p.a.port(), p.b.port());
            let last = p.transitions.last().map_or(Instant::ZERO, |t| t.at);
            let noisy = a.counters().error_retrains + b.counters().error_retrains > 0;
            (a.is_up()
                && b.is_up()
                && a.rate_settled()
                && b.rate_settled()
                && (noisy || p.now.saturating_since(last) >= settle))
                || a.state() == LtssmState::Failed
                || b.state() == LtssmState::Failed
        };
        self.run_until(limit, stable);
        self.a.port().is_up() && self.b.port().is_up()
    }
}

/// When to carry electrical idle through `channel` next, for a port gone quiet in Recovery.Speed while
/// what it sent before is still in the channel's delay line, or for any quiet port while its partner in
/// Recovery.Speed waits for the quiet to arrive: at the port's next slot time, then slot after slot
/// (`last` is the previous such time, moved on); `None` when the port sends, or neither holds. Not in
/// L1: there the partner listens for the EIOS alone and wakes on any signal after it, so the rest of the
/// slot that carried the EIOS, arriving after it, would wake it; a driver need not carry a quiet port's
/// slots, and the ports' L1 rules expect the last bits before the quiet to stay unsent.
fn drain_due(port: &Port, partner: &Port, channel: &Channel, last: Option<Instant>) -> Option<Instant> {
    let in_flight = port.state() == LtssmState::RecoverySpeed && channel.signal_in_flight();
    // The partner in Recovery.Speed waits for its receivers to go quiet: the quiet itself must arrive
    // (its EIOS may have been lost to a bit error).
    (port.is_quiet() && (in_flight || partner.listens_for_quiet()))
        .then(|| last.unwrap_or(port.next_transmit()))
}

/// If a drain of `channel` is due at `now`, carry a slot of electrical idle through it at its rate and
/// return what arrives, with the next drain time one slot on.
fn drain_slot(channel: &mut Channel, due: &mut Option<Instant>, now: Instant) -> Option<Slot> {
    let at = due.filter(|&at| at <= now)?;
    let rate = channel.rate()?;
    *due = Some(at + rate.slot_time());
    Some(channel.carry(now, &Slot::idle(rate)))
}
