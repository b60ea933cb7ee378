//! The running fabric: every trunk is a pair of real `link-dl` data links joined by a timed channel, every
//! switch runs `switch-fw`, and GPUs exchange packets for an [`App`] (a collective), all driven by one
//! deterministic discrete-event loop.
//!
//! **Links.** Each direction of a trunk carries 16-byte units at the trunk's rate, one unit every
//! `16 / rate` ns, and delivers them `latency` later, with random bit errors at the trunk's BER. The
//! physical layer below the data link is abstracted into this timed channel (it is simulated bit for bit
//! and tested on its own in `link-phy`); the data link's CRC, replay, ACK/NAK and credits are the real
//! ones. A direction only runs while its sending data link has something other than idle to send, and
//! units move in bursts of up to one longest packet per event.
//!
//! **Determinism.** Events are ordered by time and then by the order they were scheduled; every random
//! choice comes from the seed.

use std::collections::VecDeque;

use link_dl::flit::{Flit, IdentFlit, FLIT_LEN, MAX_PACKET_FLITS, MAX_PAYLOAD_FLITS};
use link_dl::link::{DataLink, DlConfig, DlEvent};
use link_dl::{Received, Vc};
use link_phy::channel::geometric;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use switch_fw::identity::Identity;
use switch_fw::switch::{Arrival, Destination, Forward, Switch};

mod failover;
mod idle;
mod load;
mod nvls;

use failover::{send_again, Failover};
pub use failover::{FailoverStats, Fault};
use load::WireRoom;
pub use load::{loads_between, DirectionLoad, TrunkLoad};
use nvls::Nvls;

use crate::discover::{follow, identity_of, node_id, Management};
use crate::events::EventQueue;
use crate::manager::Fabric;
use crate::topology::{NodeKind, Topology};
use crate::trace::{Hop, TraceSummary, Tracer};
use crate::vcd::{DirectionName, Waves};
use crate::wire;

/// Replay buffer of every simulated data link (packets).
pub const REPLAY: usize = 511;
/// Receive buffer of every simulated data link, per virtual channel (flits): enough for a round trip on
/// the fastest trunks.
pub const RX_FLITS: usize = 4096;
/// Most memory the fabric's data links, switches and wires may take (the replay and receive buffers are
/// fixed per link; a wire holds the bursts its latency has in flight: `Direction::wire_bytes`): a topology
/// that needs more is refused rather than left to exhaust the machine.
pub const MAX_STATE_BYTES: u64 = 16 << 30;
/// Packets a switch input can hold.
pub const SWITCH_SLOTS: usize = 8192;
/// Chunks a switch's reduction engine holds in progress: enough to cover a round trip of reads at the
/// rate of all its links.
pub const REDUCTIONS: usize = 512;
/// Units moved per link event: as many as the wire carries in this time, at least one longest packet and
/// at most [`BURST_MAX`]. A burst's units are all decided when it starts, so this bounds how long a control
/// flit (an ACK, a credit) can wait behind data, beyond what the wire itself imposes.
const BURST_TIME: Duration = Duration::from_ps(16_000);
const BURST_MAX: usize = 64;

/// The data link every port runs.
pub type PortLink = DataLink<REPLAY, RX_FLITS>;

/// Tell a port's data link that its physical layer, which the simulator models as a timed channel, has
/// come up: at the start or after a repair. The width and rate only bound the link's timers from below
/// (two unit times at x16 and 32 GT/s), far under the update interval and replay timeout it is given.
fn phy_up(link: &mut PortLink, now: Instant) {
    link.phy_up(now, LinkWidth::X16, Rate::Gen5);
}

/// A packet a GPU sends: where to, on which channel, its transaction-layer header and payload flits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// Destination endpoint (GPU index).
    pub dest: u16,
    /// Virtual channel.
    pub vc: Vc,
    /// Transaction-layer header.
    pub tl: u64,
    /// Flits after the header.
    pub payload: heapless::Vec<Flit, MAX_PAYLOAD_FLITS>,
    /// Whether the switch should treat it as a multicast to this group instead of `dest`.
    pub multicast: Option<u16>,
}

impl Outgoing {
    /// The packet as its destination receives it (header and payload; the route is spent).
    pub fn to_received(&self) -> Received {
        Received {
            vc: self.vc,
            tl: self.tl,
            payload: self.payload.clone(),
        }
    }
}

/// A GPU port offered to the app: what it can take now, and [`Offer::send`] to hand it a packet.
#[derive(Debug)]
pub struct Offer<'a> {
    /// The port.
    pub port: usize,
    link: &'a mut PortLink,
    routes: &'a [switch_fw::PortSet],
    /// Which of the fabric manager's plans the routes are (the [`Fabric`]'s `plan`): it changes whenever
    /// the routes are recomputed.
    pub routes_plan: usize,
    /// Bit `p`: this GPU's port `p` no longer leads to a working collective engine (the port's trunk
    /// failed, or its switch lost a GPU and took its engine offline, which the GPU learns when the
    /// fabric manager replans). Switch reductions must avoid it. A repair that brings the engine back
    /// clears the bit between sizes, never while a collective runs.
    pub engines_offline: u64,
    /// Once faults are scheduled: where a unicast goes that the routes, changed by a failure since the
    /// app chose this port, no longer send out of it, to be sent again the right way.
    misrouted: Option<&'a mut VecDeque<Received>>,
    /// Packets the app handed over (sent, or kept to send again), and whether the link took any.
    sent: u64,
    to_link: bool,
}

impl Offer<'_> {
    /// Whether the port's data link can take a packet of `payload_flits` flits on `vc` now.
    pub fn fits(&self, vc: Vc, payload_flits: usize) -> bool {
        self.link.can_send(vc, payload_flits)
    }

    /// Whether the fabric's routes (as they are now, after any failure) send packets for GPU `dest` out
    /// of this port.
    pub fn reaches(&self, dest: u16) -> bool {
        self.routes_through(dest, self.port)
    }

    /// The port of this GPU that a flow from `source` to `dest` on `vc` takes when several lead to `dest`:
    /// chosen by the switches' flow hash (`docs/spec.md` section 4), so that the flow keeps one path and
    /// stays in order; `None` if no port leads there.
    pub fn flow_port(&self, source: u16, dest: u16, vc: Vc) -> Option<usize> {
        let flow = switch_fw::route::Flow {
            source,
            destination: dest,
            vc: vc.index() as u8,
        };
        flow.pick(*self.routes.get(usize::from(dest))?)
    }

    /// Whether the fabric's routes (as they are now) send packets for GPU `dest` out of this GPU's port
    /// `port`.
    pub fn routes_through(&self, dest: u16, port: usize) -> bool {
        self.routes
            .get(usize::from(dest))
            .is_some_and(|r| r.contains(port))
    }

    /// Send `packet` out of this port, having checked that it [fits](Offer::fits): the link copies it
    /// from where the app keeps it into its replay buffer (handing it over by value would copy it
    /// twice more). False, and nothing sent, if the link refuses it; the app keeps it then.
    pub fn send(&mut self, packet: &Outgoing) -> bool {
        // Asked only once faults are scheduled: until then the app's routes are the fabric's.
        let misrouted = self.misrouted.is_some() && packet.multicast.is_none() && !self.reaches(packet.dest);
        if let (true, Some(resend)) = (misrouted, self.misrouted.as_mut()) {
            // The app's idea of this port predates a failure: send it the right way.
            resend.push_back(packet.to_received());
            self.sent += 1;
            return true;
        }
        if self.link.send(packet.vc, packet.tl, &packet.payload).is_err() {
            return false;
        }
        self.sent += 1;
        self.to_link = true;
        true
    }
}

/// What runs on the GPUs: a collective, or any traffic pattern.
pub trait App {
    /// Offer GPU `gpu` the port `offer`: if it has a packet to send out of it that the offer says the
    /// port can take now (and, for a unicast, that the port leads to the destination), send it with
    /// [`Offer::send`]. Returns whether it sent one; the port is offered again until it does not.
    fn next(&mut self, now: Instant, gpu: usize, offer: &mut Offer) -> bool;
    /// GPU `gpu` received `packet` on its port `port`. What a GPU receives may give it more to send,
    /// never another GPU: the fabric offers the receiving GPU's ports again after every arrival.
    fn receive(&mut self, now: Instant, gpu: usize, port: usize, packet: &Received);
    /// A GPU that may have something to send because of what another GPU did (it was refused room at a
    /// receiver that has since freed some), or `None`: the fabric offers its ports, and asks again until
    /// there is none. An app whose GPUs only ever wait on their own links and arrivals has none.
    fn take_woken(&mut self) -> Option<usize>;
    /// A time at which GPU `gpu` wants its ports offered again whatever happens meanwhile (traffic
    /// generated on a clock), or `None`: the fabric asks again until there is none, after offering a
    /// GPU's ports. An app that only reacts to its links and arrivals has none.
    fn take_alarm(&mut self) -> Option<(Instant, usize)> {
        None
    }
    /// Whether the work is finished.
    fn done(&self) -> bool;
    /// Whether the app still takes what arrives once it is done, while the fabric lets a finished
    /// collective's stragglers arrive after a failure (traffic beside the collective does; a collective
    /// that is done has everything it needs).
    fn takes_stragglers(&self) -> bool {
        false
    }
    /// The fabric lost a packet of the app's, whose original header is `tl`: a switch held it where
    /// failures cut it off from both its ends (NVLink has no end-to-end retry). Returns whether the app
    /// goes on without it; if not, the run stops, saying where the packet was lost. By default it does
    /// not: a collective cannot complete without its data.
    fn lost(&mut self, _tl: u64) -> bool {
        false
    }
    /// Failures took every link of GPU `gpu`: none of its ports is offered any more. An app that
    /// generates on a clock may count what it queued as lost, and what it would generate now as having
    /// no route; it asks for alarms as it did ([`App::take_alarm`]), and is told again at each.
    fn isolated(&mut self, _now: Instant, _gpu: usize) {}
    /// Packets delivered so far to another job the app runs beside (traffic beside a collective), which
    /// a report of the app's own progress leaves out.
    fn others_delivered(&self) -> u64 {
        0
    }
}

/// An application that sends nothing and ignores what arrives: with `done: true`, what runs after the
/// work is done (anything still arriving is surplus); with `done: false`, a fabric left to run until its
/// events run out (faults, timers).
#[derive(Clone, Copy, Debug)]
pub struct NoTraffic {
    /// What [`App::done`] answers.
    pub done: bool,
}

impl App for NoTraffic {
    fn next(&mut self, _now: Instant, _gpu: usize, _offer: &mut Offer) -> bool {
        false
    }
    fn receive(&mut self, _now: Instant, _gpu: usize, _port: usize, _packet: &Received) {}
    fn take_woken(&mut self) -> Option<usize> {
        None
    }
    fn done(&self) -> bool {
        self.done
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Direction `dir` of trunk `trunk` may send its next burst.
    Transmit { trunk: u32, dir: u8 },
    /// The oldest burst in flight on that direction arrives.
    Arrive { trunk: u32, dir: u8 },
    /// Fault number `index` of the schedule happens.
    Fault { index: u32 },
    /// The app asked for GPU `gpu`'s ports to be offered now.
    Alarm { gpu: u32 },
    /// The fabric manager's delay after a failure is over: it may replan.
    Replan,
    /// Note what every trunk has carried so far ([`Net::mark_trunks_at`]).
    Mark,
}

/// Bit errors at a rate, drawn from the seed.
#[derive(Clone, Debug)]
struct Errors {
    ber: f64,
    rng: Xoshiro256PlusPlus,
    next: u64,
    position: u64,
}

impl Errors {
    fn new(ber: f64, seed: u64) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let next = geometric(&mut rng, ber);
        Errors {
            ber,
            rng,
            next,
            position: 0,
        }
    }

    /// Flip the bits of `units` (sent in this order) that errors hit; returns how many.
    fn apply(&mut self, units: &mut [Flit]) -> u32 {
        let end = self.position + 128 * units.len() as u64;
        let mut flipped = 0;
        while self.next < end {
            let bit = (self.next - self.position) as usize;
            units[bit / 128][bit % 128 / 8] ^= 1 << (bit % 8);
            flipped += 1;
            self.next += 1 + geometric(&mut self.rng, self.ber);
        }
        self.position = end;
        flipped
    }
}

/// One direction of a trunk.
#[derive(Debug)]
struct Direction {
    from: (usize, usize),
    to: (usize, usize),
    /// Picoseconds per unit.
    unit_ps: u64,
    /// Units per burst.
    burst: usize,
    latency: Duration,
    /// When the pending Transmit event fires (an earlier kick replaces a later one; the later event
    /// then finds itself stale and does nothing).
    scheduled: Option<Instant>,
    /// Time until which the wire is busy.
    busy_until: Instant,
    /// The bursts on the wire, oldest first. A burst is delivered whole when its last unit arrives.
    bursts: VecDeque<Burst>,
    units_sent: u64,
    units_received: u64,
    errors: Errors,
    up: bool,
}

impl Direction {
    /// How a trace names this direction of trunk `t`.
    fn hop(&self, t: usize) -> Hop {
        Hop {
            trunk: t as u16,
            from: (self.from.0 as u16, self.from.1 as u8),
            to: (self.to.0 as u16, self.to.1 as u8),
        }
    }

    /// Carry `gbps`: a unit every `16 / gbps` ns, in bursts of [`BURST_TIME`].
    fn set_rate(&mut self, gbps: f64) {
        (self.unit_ps, self.burst) = Direction::timing(gbps);
    }

    /// Picoseconds per unit and units per burst at `gbps`.
    fn timing(gbps: f64) -> (u64, usize) {
        let unit_ps = ((FLIT_LEN as f64) * 1000.0 / gbps).round().max(1.0) as u64;
        let burst = ((BURST_TIME.as_ps() / unit_ps) as usize).clamp(MAX_PACKET_FLITS, BURST_MAX);
        (unit_ps, burst)
    }

    /// The most memory a direction's wire takes at `gbps` and `latency_ns`: the bursts in flight, each in a
    /// buffer of [`BURST_MAX`] units however many it carries. Loaded, a burst goes out every burst time
    /// (below 64 GB/s a burst carries fewer than 64 units, so a wire takes more than its rate times its
    /// latency: 6.4 times as much at 1 GB/s); idle, a link sends an Update alone every `update_interval`,
    /// or every unit time if that is longer, which on very slow links is the more often of the two.
    fn wire_bytes(gbps: f64, latency_ns: f64, update_interval: Duration) -> f64 {
        let (unit_ps, burst) = Direction::timing(gbps);
        let loaded = burst as u64 * unit_ps;
        let idle = unit_ps.max(update_interval.as_ps());
        let in_flight = (latency_ns * 1000.0 / loaded.min(idle) as f64).ceil() + 1.0;
        in_flight * (std::mem::size_of::<[Flit; BURST_MAX]>() + std::mem::size_of::<Burst>()) as f64
    }
}

/// What in a data link decides what its node can send: whether it is active, what it has received (a
/// packet the app answers), what is unacknowledged and its credits. Receiving only ever adds packets and
/// credits and takes acknowledged packets away, so one sum moves whenever any of them does.
fn sending_state(link: &PortLink) -> (bool, u64) {
    let credits: u64 = Vc::ALL.iter().map(|&vc| u64::from(link.credit(vc))).sum();
    (
        link.is_active(),
        (link.counters().packets_received + credits).wrapping_sub(link.unacknowledged() as u64),
    )
}

/// A trace being written, and which side of the wires it records.
#[derive(Debug)]
struct NetTrace {
    tracer: Tracer<Box<dyn std::io::Write>>,
    /// The units as the receiving data links take them, not as the transmitters send them.
    received: bool,
}

/// Record in `tracer` the `units` of a burst that direction `d` of trunk `t` hands `link` now, as the link
/// takes them (a receiver's trace), starting the trace's framing over where the link started its own.
#[allow(clippy::too_many_arguments)]
fn record_received(
    tracer: &mut Tracer<Box<dyn std::io::Write>>,
    error: &mut Option<String>,
    link: &mut PortLink,
    t: usize,
    d: usize,
    dir: &Direction,
    now: Instant,
    units: &[Flit],
) {
    if let Err(e) = tracer.advance(now) {
        error.get_or_insert(e.to_string());
    }
    // A link that is down takes nothing: neither does its trace.
    if link.state() == link_dl::DlState::Down {
        return;
    }
    if link.take_framing_restarted() {
        tracer.restart_framing(t * 2 + d);
    }
    let hop = dir.hop(t);
    for unit in units {
        if let Err(e) = tracer.unit(t * 2 + d, hop, now, unit) {
            error.get_or_insert(e.to_string());
        }
    }
}

/// Units sent in one go, on a wire.
#[derive(Clone, Copy, Debug)]
struct Burst {
    /// When its last unit arrives.
    arrival: Instant,
    /// How many units it has, at the start of its buffer.
    units: usize,
    /// Its buffer in the [`BurstPool`].
    buffer: u32,
}

/// The buffers of the bursts on every wire, shared: the buffer a delivered burst frees is the next one
/// a transmitter fills, while it is still in the cache, where a queue per wire would write each burst
/// at its far end, in lines last touched a whole queue ago.
#[derive(Debug, Default)]
struct BurstPool {
    buffers: Vec<[Flit; BURST_MAX]>,
    free: Vec<u32>,
}

impl BurstPool {
    /// A buffer to fill: the one freed last, or a new one.
    fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.buffers.push([[0; FLIT_LEN]; BURST_MAX]);
            (self.buffers.len() - 1) as u32
        })
    }

    /// Give back the buffer of a burst delivered or lost.
    fn give(&mut self, buffer: u32) {
        self.free.push(buffer);
    }

    /// The units of `burst`.
    fn units(&self, burst: &Burst) -> &[Flit] {
        &self.buffers[burst.buffer as usize][..burst.units]
    }
}

/// Start loading the `lines` cache lines from `at` (a hint: nothing is read, and nothing happens on
/// processors without the instruction).
fn prefetch_lines(at: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in 0..lines {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // Sound: SSE is part of every x86_64 processor, and a prefetch reads nothing into the program
        // and never faults, whatever the address.
        #[allow(unsafe_code)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(64 * line).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, lines);
}

/// A switch's table of held packets, by the handle the switch core queues for each.
#[derive(Debug, Default)]
struct HeldPackets {
    slots: Vec<Option<Held>>,
    /// Handles of empty slots, the last freed first.
    free: Vec<u32>,
}

impl HeldPackets {
    /// The handle of an empty slot.
    fn take_handle(&mut self) -> u32 {
        match self.free.pop() {
            Some(h) => h,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Put `held` in slot `handle` (from [`HeldPackets::take_handle`]).
    fn put(&mut self, handle: u32, held: Held) -> &mut Held {
        self.slots[handle as usize].insert(held)
    }

    fn get(&self, handle: u32) -> Option<&Held> {
        self.slots[handle as usize].as_ref()
    }

    fn get_mut(&mut self, handle: u32) -> Option<&mut Held> {
        self.slots[handle as usize].as_mut()
    }

    /// Empty slot `handle` and give the handle back; what it held.
    fn release(&mut self, handle: u32) -> Option<Held> {
        self.free.push(handle);
        self.slots[handle as usize].take()
    }

    /// One copy of packet `handle` has left (forwarded, or taken off a failed port): the last frees it.
    fn copy_gone(&mut self, handle: u32) {
        let slot = &mut self.slots[handle as usize];
        if let Some(h) = slot {
            h.copies -= 1;
            if h.copies == 0 {
                *slot = None;
                self.free.push(handle);
            }
        }
    }

    /// Slots in use.
    fn in_use(&self) -> usize {
        self.slots.iter().filter(|h| h.is_some()).count()
    }
}

/// The switch core's way to queue a packet it originates: [`Switch::inject`], or
/// [`Switch::inject_reduced_to`] for a reduction's result, which it also counts.
type Injection =
    fn(&mut Switch<64, SWITCH_SLOTS, REDUCTIONS>, Arrival) -> Result<usize, switch_fw::SwitchError>;

/// Queue a packet the switch originates, the core's way.
fn inject(
    core: &mut Switch<64, SWITCH_SLOTS, REDUCTIONS>,
    held: &mut HeldPackets,
    packet: Received,
    destination: Destination,
    queue: Injection,
) {
    let handle = held.take_handle();
    let flits = 1 + packet.payload.len() as u8;
    let arrival = Arrival {
        handle,
        vc: packet.vc.index() as u8,
        flits,
        destination,
        source: None,
    };
    match queue(core, arrival) {
        Ok(copies) => {
            held.put(handle, Held { packet, copies });
        }
        Err(_) => {
            held.release(handle);
        }
    }
}

/// What a switch holds for a packet from arrival until its last copy leaves: the packet as its input's
/// data link received it, in place (a packet the switch cannot take yet waits here too, with no copies).
#[derive(Clone, Debug)]
struct Held {
    packet: Received,
    copies: usize,
}

#[derive(Debug)]
enum NodeState {
    Gpu,
    Switch {
        core: Box<Switch<64, SWITCH_SLOTS, REDUCTIONS>>,
        held: HeldPackets,
        nvls: Nvls,
        /// Per port and channel, the handle in `held` of a packet the switch could not take yet.
        staged: Vec<[Option<u32>; 4]>,
        /// Bit `p`: port `p` has a packet staged. Only such a port can have received packets left
        /// waiting, since the switch takes every other packet as it arrives.
        staged_ports: u64,
    },
}

/// Write the fabric manager's `program` (node, address, value) into the switches among `nodes`, in its
/// order, in one pass over it. The first write a switch refuses stops it: that switch's node and error.
fn write_program(
    nodes: &mut [NodeState],
    program: &[(usize, u32, u32)],
) -> Result<(), (usize, switch_fw::SwitchError)> {
    for &(node, address, value) in program {
        if let NodeState::Switch { core, .. } = &mut nodes[node] {
            core.write_register(address, value).map_err(|e| (node, e))?;
        }
    }
    Ok(())
}

/// Counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Packets delivered to GPUs (end to end).
    pub packets_delivered: u64,
    /// Packets sent by GPUs.
    pub packets_sent: u64,
    /// Packets forwarded by switches (per hop).
    pub packets_switched: u64,
    /// Units that crossed links (every hop, both directions).
    pub units: u64,
    /// Bits flipped by link errors.
    pub bits_flipped: u64,
    /// Events processed.
    pub events: u64,
}

/// What every data link of the fabric did, added up: how much crossed the wires, what the channel
/// corrupted, and how the data links recovered (CRC errors, NAKs, replays) and paced themselves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkTotals {
    /// Units that crossed links (every hop, both directions).
    pub units: u64,
    /// Bits the channels flipped.
    pub bits_flipped: u64,
    /// Every data link's counters, added up.
    pub dl: link_dl::DlCounters,
}

/// Events between two calls of [`Net::run_ticking`]'s `tick` (about a tenth of a second of wall time).
pub const TICK_EVENTS: u64 = 1 << 18;

/// GPUs that talk among themselves, so that the routes must join them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// What to call them in a message: "the collective's GPUs".
    pub name: String,
    /// Their endpoint IDs.
    pub gpus: Vec<usize>,
    /// Whether the job goes on when a failure splits its GPUs, rather than stopping the run: synthetic
    /// traffic does, losing its packets between the parts; a collective cannot.
    pub goes_on_split: bool,
    /// The pairs of its GPUs (from, to: endpoint IDs) that send to each other, where that is not every
    /// pair: a ring's neighbours, a tree's parents and children. Only these need routes, so that a
    /// failure of a link the job does not use (a 4-GPU mesh's diagonal under a ring) does not stop it.
    pub talks: Option<Vec<(usize, usize)>>,
}

impl Job {
    /// A pair of its GPUs that send to each other and that no route of `fabric` joins (endpoint IDs).
    pub fn unjoined(&self, fabric: &Fabric) -> Option<(usize, usize)> {
        match &self.talks {
            Some(pairs) => fabric.unrouted(pairs),
            None => fabric.unreachable(&self.gpus),
        }
    }
}

/// The fabric, running.
#[derive(Debug)]
pub struct Net {
    topology: Topology,
    fabric: Fabric,
    now: Instant,
    queue: EventQueue<Event>,
    dirs: Vec<[Direction; 2]>,
    /// Per node, per port: its data link.
    links: Vec<Vec<PortLink>>,
    nodes: Vec<NodeState>,
    gpu_of_node: Vec<Option<usize>>,
    /// Per node: the port whose turn the last packet a GPU sent was in, and how many packets of that turn
    /// were taken; the next offer carries on from there. Were every offer to start at port 0, a GPU with
    /// less to send than one turn of all its ports (a packet or two as data arrives, the usual case)
    /// would send it all on its first ports.
    offer_turn: Vec<(u8, u32)>,
    /// Per GPU, who it is and who is at each of its ports (what a fabric manager discovers it by; kept
    /// apart from `nodes`, which the event loop reads on every arrival).
    gpu_identity: Vec<Identity<64>>,
    stats: NetStats,
    failover: Option<Box<Failover>>,
    completed: Instant,
    trace: Option<Box<NetTrace>>,
    /// The buffers of the bursts on the wires.
    pool: BurstPool,
    /// Where a GPU's link puts the packet its app reads next.
    gpu_rx: Received,
    trace_error: Option<String>,
    waves: Option<Box<Waves<Box<dyn std::io::Write>>>>,
    waves_error: Option<String>,
    /// Most memory the fabric's buffers and wires can take ([`MAX_STATE_BYTES`] at most).
    state_bytes: u64,
    /// The jobs, whose GPUs talk among themselves, so that the routes must join them; parts of the
    /// fabric no live trunk joins may each hold jobs of their own. Every partition's GPUs until
    /// [`Net::set_jobs`] says otherwise.
    jobs: Vec<Job>,
    /// The links' update interval: an idle link sends an Update this often.
    links_interval: Duration,
    /// Whether idle stretches are skipped ([`Net::set_skip_idle`]).
    skip_idle_enabled: bool,
    /// Simulated time let pass at once while the fabric was idle.
    idle_skipped: Duration,
    /// What every trunk had carried at each instant [`Net::mark_trunks_at`] asked for.
    trunk_marks: Vec<(Instant, Vec<TrunkLoad>)>,
    /// Per trunk direction, the units its wire had time for before its last change of rate: beside
    /// `dirs`, not in them, as only a degrade writes it and only [`Net::trunk_loads`] reads it.
    wire_room: Vec<[WireRoom; 2]>,
}

impl Net {
    /// Build the fabric of `topology` (without the trunks in `failed`), links up, switches programmed.
    pub fn new(topology: &Topology, failed: &[usize], dl: DlConfig, seed: u64) -> Result<Net, String> {
        let fabric = Fabric::plan(topology, failed)?;
        let n = topology.nodes.len();
        let switches = topology
            .nodes
            .iter()
            .filter(|x| x.kind == NodeKind::Switch)
            .count();
        let on_wires: f64 = fabric
            .trunks
            .iter()
            .map(|t| 2.0 * Direction::wire_bytes(t.gbps, t.latency_ns, dl.update_interval))
            .sum();
        let link_bytes = PortLink::MEMORY_BYTES;
        // A switch holds each packet in its slots for as long as a copy of it waits to leave, and one
        // per port and channel that it cannot take yet.
        let switch_bytes = std::mem::size_of::<Switch<64, SWITCH_SLOTS, REDUCTIONS>>()
            + (SWITCH_SLOTS + 64 * Vc::ALL.len()) * std::mem::size_of::<Option<Held>>();
        let state_bytes =
            (2 * fabric.trunks.len() * link_bytes + switches * switch_bytes) as u64 + on_wires as u64;
        if state_bytes > MAX_STATE_BYTES {
            return Err(format!(
                "{}: {} trunk(s) and {switches} switch(es) would need {:.1} GiB for their buffers and \
                 what is on their wires, more than the {} GiB this simulator allows itself",
                topology.name,
                fabric.trunks.len(),
                state_bytes as f64 / f64::from(1 << 30),
                MAX_STATE_BYTES >> 30
            ));
        }
        let mut links: Vec<Vec<PortLink>> = Vec::with_capacity(n);
        for x in 0..n {
            let mut ports = Vec::with_capacity(fabric.port_count(x));
            let node = node_id(&topology.nodes[x].name);
            for (p, &(t, _)) in fabric.ports[x].iter().enumerate() {
                let trunk = &fabric.trunks[t];
                let packet_ps = (MAX_PACKET_FLITS * FLIT_LEN) as f64 * 1000.0 / trunk.gbps;
                let timeout = Duration::from_us(2)
                    + Duration::from_ps((20.0 * packet_ps) as u64)
                    + Duration::from_ps((2.0 * trunk.latency_ns * 1000.0) as u64);
                let mut link = PortLink::new(DlConfig {
                    replay_timeout: Some(timeout),
                    ..dl
                });
                // Ports number at most 64 (checked with the identities below).
                link.set_ident(IdentFlit { node, port: p as u8 });
                if !failed.contains(&t) {
                    phy_up(&mut link, Instant::ZERO);
                }
                ports.push(link);
            }
            links.push(ports);
        }
        let mut dirs = Vec::with_capacity(fabric.trunks.len());
        for (t, trunk) in fabric.trunks.iter().enumerate() {
            let latency = Duration::from_ps((trunk.latency_ns * 1000.0) as u64);
            let up = !failed.contains(&t);
            let dir = |from, to, salt: u64| {
                let mut dir = Direction {
                    from,
                    to,
                    unit_ps: 0,
                    burst: 0,
                    latency,
                    scheduled: None,
                    busy_until: Instant::ZERO,
                    bursts: VecDeque::new(),
                    units_sent: 0,
                    units_received: 0,
                    errors: Errors::new(trunk.ber, seed ^ (t as u64) << 8 ^ salt),
                    up,
                };
                dir.set_rate(trunk.gbps);
                dir
            };
            dirs.push([dir(trunk.a, trunk.b, 1), dir(trunk.b, trunk.a, 2)]);
        }
        let mut nodes = Vec::with_capacity(n);
        for x in 0..n {
            nodes.push(match topology.nodes[x].kind {
                NodeKind::Gpu => NodeState::Gpu,
                NodeKind::Switch => {
                    let mut core: Box<Switch<64, SWITCH_SLOTS, REDUCTIONS>> = Box::default();
                    core.identity = identity_of(topology, x, fabric.port_count(x))?;
                    let staged = (0..fabric.port_count(x)).map(|_| Default::default()).collect();
                    NodeState::Switch {
                        core,
                        held: HeldPackets::default(),
                        nvls: Nvls::default(),
                        staged,
                        staged_ports: 0,
                    }
                }
            });
        }
        write_program(&mut nodes, &fabric.program).map_err(|(_, e)| e.to_string())?;
        let mut gpu_of_node = vec![None; n];
        for (i, &g) in fabric.gpus.iter().enumerate() {
            gpu_of_node[g] = Some(i);
        }
        let gpu_identity = fabric
            .gpus
            .iter()
            .map(|&x| identity_of(topology, x, fabric.port_count(x)))
            .collect::<Result<_, _>>()?;
        let mut net = Net {
            topology: topology.clone(),
            fabric,
            now: Instant::ZERO,
            queue: EventQueue::default(),
            dirs,
            links,
            nodes,
            gpu_of_node,
            offer_turn: vec![(0, 0); n],
            gpu_identity,
            stats: NetStats::default(),
            failover: None,
            completed: Instant::ZERO,
            trace: None,
            pool: BurstPool::default(),
            gpu_rx: Received::empty(Vc::Posted),
            trace_error: None,
            waves: None,
            waves_error: None,
            state_bytes,
            jobs: Vec::new(),
            links_interval: dl.update_interval,
            skip_idle_enabled: true,
            idle_skipped: Duration::ZERO,
            trunk_marks: Vec::new(),
            wire_room: Vec::new(),
        };
        net.wire_room = vec![[WireRoom::default(); 2]; net.dirs.len()];
        net.jobs = (topology.partition_groups().into_iter())
            .map(|(p, gpus)| Job {
                name: format!("partition {p}"),
                gpus,
                goes_on_split: false,
                talks: None,
            })
            .collect();
        for t in 0..net.dirs.len() {
            for d in 0..2 {
                net.kick(t, d);
            }
        }
        Ok(net)
    }

    /// The jobs running on the fabric: the routes must join each job's GPUs, now and after every failure
    /// (a failure that splits a job stops the run, unless the job [goes on split](Job::goes_on_split)),
    /// and need not join GPUs of different jobs. An error if the routes do not join a job's GPUs now.
    pub fn set_jobs(&mut self, jobs: Vec<Job>) -> Result<(), String> {
        self.jobs = jobs;
        match self.split_jobs(&self.fabric).next() {
            Some((_, job, pair)) => Err(self.split_message(&self.fabric, job, pair)),
            None => Ok(()),
        }
    }

    /// The jobs whose GPUs the routes of `fabric` do not all join (those that send to each other), each
    /// with its index in `jobs` and a pair that no route joins (endpoint IDs).
    fn split_jobs<'a>(
        &'a self,
        fabric: &'a Fabric,
    ) -> impl Iterator<Item = (usize, &'a Job, (usize, usize))> {
        (self.jobs.iter().enumerate()).filter_map(|(i, job)| job.unjoined(fabric).map(|pair| (i, job, pair)))
    }

    /// Why `job` is split under `fabric`: no route joins its GPUs `a` and `b`.
    fn split_message(&self, fabric: &Fabric, job: &Job, (a, b): (usize, usize)) -> String {
        format!(
            "{}: no route from {} to {}: no path of live links through switches joins them (GPUs do not \
             forward)",
            job.name,
            fabric.gpu_name(&self.topology, a),
            fabric.gpu_name(&self.topology, b)
        )
    }

    /// Most memory the fabric's data links, switches and wires can take, all buffers counted whole.
    pub fn state_bytes(&self) -> u64 {
        self.state_bytes
    }

    /// The fabric plan (routes, trunks).
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// Simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Counters.
    pub fn stats(&self) -> NetStats {
        self.stats
    }

    /// Note what every trunk has carried at `at` (in [`Net::trunk_marks`]), to tell what they carried
    /// between two instants. Nothing else changes: the same events happen in the same order.
    pub fn mark_trunks_at(&mut self, at: Instant) {
        self.schedule(at.max(self.now), Event::Mark);
    }

    /// What every trunk had carried at each instant [`Net::mark_trunks_at`] asked for that has passed.
    pub fn trunk_marks(&self) -> &[(Instant, Vec<TrunkLoad>)] {
        &self.trunk_marks
    }

    /// Whether the fabric manager has a replan to come (its delay after a failure not yet over).
    pub(crate) fn replan_pending(&self) -> bool {
        self.queue.iter().any(|(_, e)| matches!(e, Event::Replan))
    }

    /// What the links did so far, added up over all of them.
    pub fn link_totals(&self) -> LinkTotals {
        let mut dl = link_dl::DlCounters::default();
        for link in self.links.iter().flatten() {
            dl += link.counters();
        }
        LinkTotals {
            units: self.stats.units,
            bits_flipped: self.stats.bits_flipped,
            dl,
        }
    }

    /// The data link of `node`'s `port`.
    pub fn link(&self, node: usize, port: usize) -> &PortLink {
        &self.links[node][port]
    }

    #[doc(hidden)]
    pub fn debug_dirs(&self) -> std::string::String {
        let mut out = std::string::String::new();
        for (t, d) in self.dirs.iter().enumerate() {
            for (i, x) in d.iter().enumerate() {
                out += &format!(
                    "trunk {t} dir {i}: {:?}->{:?} units {} busy_until {:?} inflight {}\n",
                    x.from,
                    x.to,
                    x.units_sent,
                    x.busy_until,
                    x.bursts.iter().map(|b| b.units).sum::<usize>()
                );
            }
        }
        out
    }

    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        let mut out = String::new();
        for (x, n) in self.nodes.iter().enumerate() {
            if let NodeState::Switch { core, nvls, held, .. } = n {
                out += &format!(
                    "switch {x}: pending {} active {} free {} reducing {} held {} idle {}\n",
                    nvls.pending.len(),
                    nvls.active,
                    core.free_slots(),
                    core.reducer.in_progress(),
                    held.in_use(),
                    core.is_idle()
                );
            }
            for (p, l) in self.links[x].iter().enumerate() {
                if x == 8 || x < 2 {
                    out += &format!(
                        "  node {x} port {p}: credit {:?} unacked {} waiting {}\n",
                        Vc::ALL.map(|v| l.credit(v)),
                        l.unacknowledged(),
                        l.received_waiting()
                    );
                }
            }
        }
        out
    }

    /// Program a switch's multicast group (by node index).
    pub fn set_multicast(
        &mut self,
        node: usize,
        group: u16,
        ports: switch_fw::PortSet,
    ) -> Result<(), String> {
        match &mut self.nodes[node] {
            NodeState::Switch { core, .. } => core.multicast.set(group, ports).map_err(|e| e.to_string()),
            NodeState::Gpu => Err("not a switch".into()),
        }
    }

    fn schedule(&mut self, at: Instant, event: Event) {
        self.queue.push(at, event);
    }

    /// Make sure direction `d` of trunk `t` runs if its sender has something to send.
    #[inline]
    fn kick(&mut self, t: usize, d: usize) {
        let dir = &self.dirs[t][d];
        if !dir.up {
            return;
        }
        // Already due as early as the wire allows: whatever the link has, it sends then (and the
        // link's state, often a cache miss away, need not be read). Most kicks end here, in the caller,
        // without a call.
        if dir.scheduled.is_some_and(|s| s <= self.now.max(dir.busy_until)) {
            return;
        }
        self.kick_link(t, d);
    }

    /// [`Net::kick`] once the direction may need scheduling: ask its sender's link.
    #[inline(never)]
    fn kick_link(&mut self, t: usize, d: usize) {
        let dir = &self.dirs[t][d];
        let (node, port) = dir.from;
        let link = &self.links[node][port];
        let at = if link.has_pending_output(self.now) {
            self.now.max(dir.busy_until)
        } else if let Some(wake) = link.poll_timeout() {
            wake.max(self.now).max(dir.busy_until)
        } else {
            return;
        };
        if self.dirs[t][d].scheduled.is_some_and(|s| s <= at) {
            return;
        }
        self.dirs[t][d].scheduled = Some(at);
        self.schedule(
            at,
            Event::Transmit {
                trunk: t as u32,
                dir: d as u8,
            },
        );
    }

    /// Whether to let idle stretches pass at once (the default): the run is the same either way, only
    /// faster (the switch is for the tests that check so).
    pub fn set_skip_idle(&mut self, skip: bool) {
        self.skip_idle_enabled = skip;
    }

    /// Simulated time let pass at once while the fabric was idle.
    pub fn idle_skipped(&self) -> Duration {
        self.idle_skipped
    }

    /// Whether nothing is left to happen: no event is scheduled.
    pub fn idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Run until `app` is done, nothing can happen any more, or `limit` passes. Returns whether the app
    /// finished.
    pub fn run(&mut self, app: &mut dyn App, limit: Instant) -> bool {
        self.run_ticking(app, limit, &mut |_| {})
    }

    /// [`Net::run`], calling `tick` with the app's packets delivered so far (as
    /// [`NetStats::packets_delivered`], less [`App::others_delivered`]) every [`TICK_EVENTS`] events:
    /// often enough for a progress bar, too seldom to cost anything.
    pub fn run_ticking(&mut self, app: &mut dyn App, limit: Instant, tick: &mut dyn FnMut(u64)) -> bool {
        self.fill_all(app);
        while !app.done() {
            if !self.step(app, limit) {
                break;
            }
            if self.stats.events % TICK_EVENTS == 0 {
                tick(
                    self.stats
                        .packets_delivered
                        .saturating_sub(app.others_delivered()),
                );
            }
            // Not once the app is done: the run ends here, and the time let pass would be its end.
            if self.stats.events % idle::IDLE_CHECK_EVENTS == 0 && !app.done() {
                self.skip_idle(limit);
            }
        }
        self.completed = self.now;
        let done = app.done();
        if done {
            self.drain_stragglers(app, limit);
        }
        done
    }

    /// Run until the links of every working trunk are active (they train when the fabric starts), or
    /// `limit` passes, with nothing to send; returns whether they are. A collective's sizes then start on
    /// a fabric that is up, as nccl-tests times its runs after warm-up ones.
    pub fn bring_up(&mut self, limit: Instant) -> bool {
        let mut idle = NoTraffic { done: false };
        loop {
            let up = self.fabric.ports.iter().enumerate().all(|(x, ports)| {
                ports
                    .iter()
                    .enumerate()
                    .all(|(p, &(t, _))| !self.dirs[t][0].up || self.links[x][p].is_active())
            });
            if up {
                return true;
            }
            // Checking every link costs more than an event: look again after the events of an instant
            // (so that the sizes start at the instant the last link came up, whatever else the fabric
            // has). The queue is not asked for a later instant: what is scheduled now must stay now.
            if !self.step(&mut idle, limit) {
                return false;
            }
            while self.queue.peek_now().is_some() {
                if !self.step(&mut idle, limit) {
                    return false;
                }
            }
        }
    }

    /// [`Net::run`], and once the app is done, on until nothing is left in the fabric (every packet
    /// delivered to the app or dropped, and acknowledged) or `limit` passes. Returns whether both
    /// happened.
    pub fn run_until_quiet(&mut self, app: &mut dyn App, limit: Instant) -> bool {
        self.run(app, limit) && (self.step_until_quiet(app, limit) || self.quiescent())
    }

    /// Process events until nothing is left in the fabric ([`Net::quiescent`]); false if the events
    /// stop first (none before `limit`, or the fabric cannot go on).
    fn step_until_quiet(&mut self, app: &mut dyn App, limit: Instant) -> bool {
        while !self.quiescent() {
            // Checking every link costs more than an event: look again after a batch.
            for _ in 0..64 {
                if !self.step(app, limit) {
                    return false;
                }
            }
        }
        true
    }

    /// The node at the other end of node `x`'s port `p`, if the port's trunk is up.
    fn across(&self, x: usize, p: usize) -> Option<usize> {
        let (t, _) = *self.fabric.ports.get(x)?.get(p)?;
        self.dirs[t][0].up.then(|| self.fabric.peer(x, p).0)
    }

    /// Read a register of switch `x` (`None` if `x` is a GPU): its tables as the manager programmed
    /// them, and its identity registers as its links came up and went down.
    pub fn switch_register(&self, x: usize, address: u32) -> Option<Result<u32, switch_fw::SwitchError>> {
        match &self.nodes[x] {
            NodeState::Switch { core, .. } => Some(core.read_register(address)),
            NodeState::Gpu => None,
        }
    }

    /// What the switches counted, added up over all of them.
    pub fn switch_totals(&self) -> switch_fw::switch::SwitchCounters {
        let mut sum = switch_fw::switch::SwitchCounters::default();
        for node in &self.nodes {
            if let NodeState::Switch { core, .. } = node {
                sum += core.counters();
            }
        }
        sum
    }

    /// Record every packet and control flit the transmitters send into `tracer` (see [`crate::trace`]).
    /// Errors writing it are reported as its writer gives them, so they should name the file.
    pub fn set_trace(&mut self, tracer: Tracer<Box<dyn std::io::Write>>) {
        self.trace = Some(Box::new(NetTrace {
            tracer,
            received: false,
        }));
    }

    /// [`Net::set_trace`], recording the units as each receiving data link takes them instead: after the
    /// wire's bit errors, at the time the simulator hands it their burst (the burst's end: a record's
    /// time is that of the burst its first unit came in), framed as the data link frames them.
    pub fn set_trace_received(&mut self, tracer: Tracer<Box<dyn std::io::Write>>) {
        self.trace = Some(Box::new(NetTrace {
            tracer,
            received: true,
        }));
    }

    /// Flush the trace and say what it holds and what it left out.
    pub fn finish_trace(&mut self) -> Result<Option<TraceSummary>, String> {
        // Write errors name the file themselves (`run::Recording`).
        if let Some(e) = self.trace_error.take() {
            return Err(e);
        }
        let Some(tracer) = self.trace.as_mut() else {
            return Ok(None);
        };
        tracer.tracer.flush().map_err(|e| e.to_string())?;
        Ok(Some(tracer.tracer.summary))
    }

    /// Record the state, activity and replay-buffer occupancy of every link direction into `waves` (see
    /// [`crate::vcd`]). Errors writing them are reported as their writer gives them, so they should name
    /// the file.
    pub fn set_waves(&mut self, waves: Waves<Box<dyn std::io::Write>>) {
        self.waves = Some(Box::new(waves));
    }

    /// Finish the waveforms and say how many value changes they have and how many the limit left out.
    pub fn finish_waves(&mut self) -> Result<Option<(u64, u64)>, String> {
        if let Some(e) = self.waves_error.take() {
            return Err(e);
        }
        let Some(waves) = self.waves.as_mut() else {
            return Ok(None);
        };
        waves.finish().map_err(|e| e.to_string())?;
        Ok(Some((waves.changes, waves.dropped)))
    }

    /// Every link direction (numbered as [`Net::directions`] counts them), named by its ends.
    pub fn direction_names(&self, topology: &Topology) -> Vec<DirectionName> {
        self.dirs
            .iter()
            .flatten()
            .map(|dir| DirectionName {
                node: topology.nodes[dir.from.0].name.clone(),
                port: dir.from.1,
                peer: topology.nodes[dir.to.0].name.clone(),
            })
            .collect()
    }

    /// Record the transmitter of direction `d` of trunk `t` in the waveforms, if they are kept.
    fn record_link(&mut self, t: usize, d: usize) {
        let Some(waves) = self.waves.as_mut() else { return };
        let (node, port) = self.dirs[t][d].from;
        let link = &self.links[node][port];
        if let Err(e) = waves.link(self.now, t * 2 + d, link.state(), link.unacknowledged()) {
            self.waves_error.get_or_insert(e.to_string());
        }
    }

    /// Link directions the fabric has (a trace keeps state per direction).
    pub fn directions(&self) -> usize {
        self.dirs.len() * 2
    }

    /// When the last [`Net::run`] ended: for a finished collective, when its last packet arrived.
    pub fn completed_at(&self) -> Instant {
        self.completed
    }

    /// Process the next event; false if there is none before `limit`, or the fabric cannot go on.
    fn step(&mut self, app: &mut dyn App, limit: Instant) -> bool {
        if self.queue.peek_time().is_none_or(|at| at > limit) {
            return false;
        }
        let Some((at, event)) = self.queue.pop() else {
            return false;
        };
        self.now = at;
        self.stats.events += 1;
        self.prefetch_next();
        match event {
            Event::Transmit { trunk, dir } => self.transmit(trunk as usize, dir as usize),
            Event::Arrive { trunk, dir } => self.arrive(trunk as usize, dir as usize, app),
            Event::Fault { index } => self.fault(index as usize, app),
            Event::Replan => self.replan_when_up(app),
            Event::Mark => {
                // Not one of the fabric's events: counted, it would move the idle checks (every so many
                // events) and so what is let pass.
                self.stats.events -= 1;
                let loads = self.trunk_loads();
                self.trunk_marks.push((self.now, loads));
            }
            Event::Alarm { gpu } => {
                if let Some(&node) = self.fabric.gpus.get(gpu as usize) {
                    self.fill_gpu(node, app);
                }
            }
        }
        let Some(f) = self.failover.as_mut() else {
            return true;
        };
        if !f.lost.is_empty() {
            Self::tell_lost(f, app);
        }
        // A drained switch is taken out of service once the event that emptied it has happened.
        if f.drains.iter().any(|d| d.routed) {
            self.finish_drains(app);
        }
        self.failover.as_ref().is_none_or(|f| f.fatal.is_none())
    }

    /// Tell `app` of the packets the fabric lost: the first it cannot go on without stops the run.
    #[inline(never)]
    fn tell_lost(f: &mut Failover, app: &mut dyn App) {
        for (tl, message) in f.lost.drain(..) {
            if !app.lost(tl) && f.fatal.is_none() {
                f.fatal = Some(message);
            }
        }
    }

    /// Ask the processor to start loading what the next event works on, if it is due at the same
    /// time (nearly always: links of one rate keep in step), so that its cache misses overlap this
    /// event's work: the state of the data link it polls or delivers to, and an arriving burst's units.
    fn prefetch_next(&self) {
        let (trunk, dir, arriving) = match self.queue.peek_now() {
            Some(&Event::Transmit { trunk, dir }) => (trunk, dir, false),
            Some(&Event::Arrive { trunk, dir }) => (trunk, dir, true),
            _ => return,
        };
        let Some(d) = self
            .dirs
            .get(trunk as usize)
            .and_then(|t| t.get(usize::from(dir)))
        else {
            return;
        };
        let (node, port) = if arriving { d.to } else { d.from };
        if let Some(link) = self.links.get(node).and_then(|ports| ports.get(port)) {
            // A data link keeps the state every call looks at in its first lines.
            prefetch_lines(std::ptr::from_ref(link).cast(), 5);
        }
        if arriving {
            // All of the burst's units: written a wire's latency ago, they are rarely still cached.
            if let Some(burst) = d.bursts.front() {
                let units = self.pool.units(burst);
                prefetch_lines(units.as_ptr().cast(), (units.len() * FLIT_LEN).div_ceil(64));
            }
        }
    }

    /// Whether no packet is anywhere in the fabric: in a data link (a packet on a wire is unacknowledged
    /// at its sender; wires always carry idle and credit units), queued in a switch, or waiting to be sent
    /// again.
    fn quiescent(&self) -> bool {
        let links_empty = self
            .links
            .iter()
            .flatten()
            .all(|l| l.unacknowledged() == 0 && !l.received_waiting());
        let switches_empty = self.nodes.iter().all(|n| match n {
            NodeState::Gpu => true,
            NodeState::Switch {
                core, staged_ports, ..
            } => core.is_idle() && *staged_ports == 0,
        });
        let resend_empty = self.failover.as_ref().is_none_or(|f| {
            f.resend.iter().all(VecDeque::is_empty) && f.parked.iter().all(VecDeque::is_empty)
        });
        links_empty && switches_empty && resend_empty
    }

    fn transmit(&mut self, t: usize, d: usize) {
        if self.dirs[t][d].scheduled != Some(self.now) {
            return;
        }
        self.dirs[t][d].scheduled = None;
        let now = self.now;
        let (node, port) = self.dirs[t][d].from;
        let link = &mut self.links[node][port];
        let unit_ps = self.dirs[t][d].unit_ps;
        let latency = self.dirs[t][d].latency;
        let burst = self.dirs[t][d].burst;
        let buffer = self.pool.take();
        let units = &mut self.pool.buffers[buffer as usize];
        let sent = link.poll_units(now, &mut units[..burst]);
        // The wires here are timed channels with no training to redo: a request to retrain (after
        // replays that got nothing through) is counted by the link and goes no further. Left standing,
        // it would keep the link from ever counting as idle again.
        link.take_retrain_request();
        let units = &mut units[..sent];
        let dir = &mut self.dirs[t][d];
        if let Some(NetTrace {
            tracer,
            received: false,
        }) = self.trace.as_deref_mut()
        {
            // Nothing sent from now on is earlier than now: what other directions sent before is written.
            if let Err(e) = tracer.advance(now) {
                self.trace_error.get_or_insert(e.to_string());
            }
            let hop = dir.hop(t);
            for (k, unit) in units.iter().enumerate() {
                let at = now + Duration::from_ps(unit_ps * k as u64);
                if let Err(e) = tracer.unit(t * 2 + d, hop, at, unit) {
                    self.trace_error.get_or_insert(e.to_string());
                }
            }
        }
        self.stats.bits_flipped += u64::from(dir.errors.apply(units));
        dir.units_sent += sent as u64;
        if sent == 0 {
            self.pool.give(buffer);
        } else {
            self.stats.units += sent as u64;
            let dir = &mut self.dirs[t][d];
            dir.busy_until = now + Duration::from_ps(unit_ps * sent as u64);
            if let Some(waves) = self.waves.as_mut() {
                if let Err(e) = waves.burst(now, t * 2 + d, dir.busy_until) {
                    self.waves_error.get_or_insert(e.to_string());
                }
            }
            let arrival = dir.busy_until + latency;
            dir.bursts.push_back(Burst {
                arrival,
                units: sent,
                buffer,
            });
            self.schedule(
                arrival,
                Event::Arrive {
                    trunk: t as u32,
                    dir: d as u8,
                },
            );
        }
        self.kick(t, d);
        self.record_link(t, d);
    }

    fn arrive(&mut self, t: usize, d: usize, app: &mut dyn App) {
        let now = self.now;
        let (node, port) = self.dirs[t][d].to;
        let before = self.gpu_of_node[node]
            .is_some()
            .then(|| sending_state(&self.links[node][port]));
        let dir = &mut self.dirs[t][d];
        while let Some(burst) = dir.bursts.front() {
            if burst.arrival > now {
                break;
            }
            let units = self.pool.units(burst);
            if let Some(NetTrace {
                tracer,
                received: true,
            }) = self.trace.as_deref_mut()
            {
                record_received(
                    tracer,
                    &mut self.trace_error,
                    &mut self.links[node][port],
                    t,
                    d,
                    dir,
                    now,
                    units,
                );
            }
            self.links[node][port].receive_units(now, units, dir.units_received);
            dir.units_received += units.len() as u64;
            self.pool.give(burst.buffer);
            dir.bursts.pop_front();
        }
        while let Some(event) = self.links[node][port].poll_event() {
            if matches!(event, DlEvent::Up | DlEvent::Down) {
                // The node's firmware fills (or clears) the port's identity registers from what its link
                // learned; a fabric manager waiting for the links to come up may replan now.
                self.learn_peer(node, port);
                if event == DlEvent::Up {
                    self.replan_when_up(app);
                }
            }
        }
        match self.nodes[node] {
            NodeState::Gpu => self.gpu_received(node, port, app),
            NodeState::Switch { .. } => self.switch_received(node, port),
        }
        match before {
            // A GPU's offer can only go otherwise than its last if the units changed what its link lets
            // it send or brought it a packet: control flits that repeat the last acknowledgement and
            // credits (an idle link's periodic updates) change nothing.
            Some(before) if before == sending_state(&self.links[node][port]) => {}
            Some(_) => self.fill_gpu(node, app),
            None => self.switch_forward(node),
        }
        // Only now, with the received packets taken and their buffers freed, does the receiver know all the
        // acknowledgements and credits it owes back.
        self.kick(t, 1 - d);
        self.record_link(t, 1 - d);
    }

    fn gpu_received(&mut self, node: usize, port: usize, app: &mut dyn App) {
        let Some(gpu) = self.gpu_of_node[node] else { return };
        // The app reads each packet where the link puts it: one copy out of the receive queue.
        let p = &mut self.gpu_rx;
        let mut bounced = false;
        while self.links[node][port].recv_into(p) {
            if let Some(f) = self.failover.as_mut() {
                if wire::opcode(p.tl) == wire::OP_BOUNCE {
                    // One of ours, returned: send it again by a path that still works (after the new
                    // routes, if they are still to come; none, if they split its job).
                    f.resend[node].push_back(Received {
                        tl: wire::unbounce(p.tl),
                        ..p.clone()
                    });
                    bounced = true;
                    continue;
                }
                // The engines' packets repeat headers on purpose and are not tracked: the collective tells
                // their copies apart. The tree's credits repeat a header when they repeat a count: they
                // are noted (a copy a failure strands is then known for one), but a repeat is delivered
                // all the same, as without failures (the receiver keeps the largest count).
                let copy = !wire::is_engine_traffic(p.tl) && !f.seen[gpu].first_time(p.tl);
                if copy && wire::opcode(p.tl) != crate::collective::tree::OP_CREDIT {
                    f.stats.duplicates_dropped += 1;
                    continue;
                }
            }
            self.stats.packets_delivered += 1;
            app.receive(self.now, gpu, port, p);
        }
        if bounced
            && (self.failover.as_ref()).is_some_and(|f| f.unplanned.is_empty() && f.stats.jobs_split > 0)
        {
            self.strand_unroutable_at(node);
        }
    }

    /// Offer every GPU port to the app.
    fn fill_all(&mut self, app: &mut dyn App) {
        for node in 0..self.nodes.len() {
            if self.gpu_of_node[node].is_some() {
                self.fill_gpu(node, app);
            }
        }
    }

    /// Offer GPU `node`'s ports to the app, then those of any GPU the app wakes meanwhile.
    fn fill_gpu(&mut self, node: usize, app: &mut dyn App) {
        self.offer_ports(node, app);
        while let Some(gpu) = app.take_woken() {
            if let Some(&woken) = self.fabric.gpus.get(gpu) {
                self.offer_ports(woken, app);
            }
        }
    }

    fn offer_ports(&mut self, node: usize, app: &mut dyn App) {
        let Some(gpu) = self.gpu_of_node[node] else { return };
        let engines_offline = self.failover.as_ref().map_or(0, |f| f.engines_offline[node]);
        // The ports take turns, each as many packets per turn as its trunk has links, until none takes
        // more, as NVLink interleaves a GPU's traffic over all its links. Offered one after another, each
        // until it refused, the first port would queue all its credit allows before the next was asked,
        // and an app that may send on any port (all-to-all) would load it with nearly everything.
        let ports = self.links[node].len();
        // The ports that took every packet of their last turn (bit per port; there are at most 64).
        let mut open: u64 = if ports >= 64 {
            u64::MAX
        } else {
            (1u64 << ports) - 1
        };
        // An offer carries on the turn the GPU's last packet was sent in: the ports take turns across
        // offers as within one.
        let (start, mut used) = self.offer_turn[node];
        let start = usize::from(start) % ports.max(1);
        // The port and turn of the last packet taken: where the next offer carries on.
        let mut last = None;
        while open != 0 {
            for port in (start..ports).chain(0..start) {
                if open & (1 << port) == 0 {
                    continue;
                }
                // Packets to send again first, those an offer of an earlier turn handed back included.
                let resent = self.resend_from_gpu(node, port);
                // The last port open has no one to take turns with. A trunk that lost some of its links
                // keeps its turn, as NVLink's interleaving of addresses over the links does (its data
                // link, slower, refuses sooner).
                let links = self.fabric.trunk_at(node, port).links.max(1);
                // What an earlier offer took of this turn (the first port only).
                let already = core::mem::take(&mut used) as usize;
                let turn = if open & (open - 1) == 0 {
                    usize::MAX
                } else {
                    links.saturating_sub(already)
                };
                let mut offer = Offer {
                    port,
                    link: &mut self.links[node][port],
                    routes: &self.fabric.routes[node],
                    routes_plan: self.fabric.plan,
                    engines_offline,
                    misrouted: self.failover.as_mut().map(|f| &mut f.resend[node]),
                    sent: 0,
                    to_link: false,
                };
                let mut taken = 0;
                while taken < turn && offer.link.is_active() && app.next(self.now, gpu, &mut offer) {
                    taken += 1;
                }
                if taken > 0 {
                    last = Some((port, already + taken, links));
                }
                if taken < turn {
                    open &= !(1 << port);
                }
                self.stats.packets_sent += offer.sent;
                if resent || offer.to_link {
                    let (t, end) = self.fabric.ports[node][port];
                    self.kick(t, end);
                }
            }
        }
        if let Some((port, taken, links)) = last {
            self.offer_turn[node] = if taken >= links {
                (((port + 1) % ports) as u8, 0)
            } else {
                (port as u8, taken as u32)
            };
        }
        // Only failures take links for good (they are down a while as the fabric comes up).
        if self.failover.is_some() && self.fabric.ports[node].iter().all(|&(t, _)| !self.dirs[t][0].up) {
            app.isolated(self.now, gpu);
        }
        while let Some((at, gpu)) = app.take_alarm() {
            self.schedule(at.max(self.now), Event::Alarm { gpu: gpu as u32 });
        }
    }

    /// Whether a packet staged at a switch's `port` would find room in the switch now. If none would,
    /// offering the port again changes nothing: its other channels have no packet waiting, as every
    /// arrival at a switch is taken in (or staged) at once. Under congestion most ports stay full, and
    /// offering each of them after every packet forwarded was a fifth of a tree all-reduce's work.
    fn staged_fits(&self, node: usize, port: usize) -> bool {
        let NodeState::Switch { core, staged, .. } = &self.nodes[node] else {
            return false;
        };
        staged.get(port).is_some_and(|slots| {
            slots
                .iter()
                .enumerate()
                .any(|(vc, slot)| slot.is_some() && core.has_room(port, vc))
        })
    }

    /// The other half of what [`Net::staged_fits`] relies on: every channel of `port` whose staging
    /// slot is empty has nothing waiting in the data link.
    fn nothing_waits_behind_empty_slots(&self, node: usize, port: usize) -> bool {
        let NodeState::Switch { staged, .. } = &self.nodes[node] else {
            return true;
        };
        Vc::ALL
            .iter()
            .all(|&vc| staged[port][vc.index()].is_some() || !self.links[node][port].received_waiting_on(vc))
    }

    fn switch_received(&mut self, node: usize, port: usize) {
        let NodeState::Switch {
            core,
            held,
            nvls,
            staged,
            staged_ports,
        } = &mut self.nodes[node]
        else {
            return;
        };
        // Per channel, so that a channel whose buffer share is full never holds up another.
        for vc in Vc::ALL {
            loop {
                // A packet is received straight into a slot of the switch's table of held packets, and
                // stays there until its last copy leaves; while the switch cannot take it yet, its channel's
                // staging slot keeps its handle.
                let slot = &mut staged[port][vc.index()];
                let handle = match *slot {
                    Some(handle) => handle,
                    None => {
                        let link = &mut self.links[node][port];
                        if !link.received_waiting_on(vc) {
                            break;
                        }
                        let handle = held.take_handle();
                        let entry = held.put(
                            handle,
                            Held {
                                packet: Received::empty(vc),
                                copies: 0,
                            },
                        );
                        if !link.recv_on_into(vc, &mut entry.packet) {
                            held.release(handle);
                            break;
                        }
                        *slot = Some(handle);
                        handle
                    }
                };
                let Some(entry) = held.get(handle) else { break };
                let p = &entry.packet;
                let (dest, source, multicast) = wire::route_fields(p.tl);
                if multicast == Some(wire::NVLS_ENGINE) {
                    *slot = None;
                    let taken = held
                        .release(handle)
                        .is_some_and(|e| nvls.receive(core, held, port, e.packet));
                    if !taken {
                        if let Some(f) = self.failover.as_mut() {
                            f.stats.engine_packets_dropped += 1;
                        }
                    }
                    continue;
                }
                if !core.has_room(port, vc.index()) {
                    // Not now: it stays staged and is offered again when packets have left. Checked
                    // before routing, which a packet offered again on every unit that arrives would
                    // otherwise repeat while the switch is congested.
                    break;
                }
                let destination = match multicast {
                    Some(group) => Destination::Multicast(group),
                    None => Destination::Unicast(dest),
                };
                let arrival = Arrival {
                    handle,
                    vc: vc.index() as u8,
                    flits: 1 + p.payload.len() as u8,
                    destination,
                    source: Some(source),
                };
                match core.ingress(port, arrival) {
                    Ok(copies) => {
                        if let Some(entry) = held.get_mut(handle) {
                            entry.copies = copies;
                        }
                        *slot = None;
                    }
                    Err(e) => {
                        if e == (switch_fw::SwitchError::BufferFull { port }) {
                            // Not now: it stays staged and is offered again when packets have left.
                            break;
                        }
                        *slot = None;
                        let Some(entry) = held.release(handle) else { break };
                        match (e, self.failover.as_mut()) {
                            // Routed here before a failure took the way on: return it to its source.
                            (switch_fw::SwitchError::NoRoute { .. }, Some(f)) => {
                                let kept = send_again(&mut f.resend[node], &mut f.stats, entry.packet);
                                // An engine's packet is not sent again: dropped for want of a route.
                                core.counters_mut().route_drops += u64::from(!kept);
                            }
                            // Every port its route has is down: held until the new routes.
                            (switch_fw::SwitchError::PortDown { .. }, Some(f)) => f.park(node, entry.packet),
                            _ => {}
                        }
                    }
                }
            }
        }
        if staged[port].iter().any(Option::is_some) {
            *staged_ports |= 1 << port;
        } else {
            *staged_ports &= !(1 << port);
        }
        self.pump_nvls(node);
        self.pump_resend(node);
    }

    fn switch_forward(&mut self, node: usize) {
        self.pump_resend(node);
        loop {
            let NodeState::Switch { core, held, .. } = &mut self.nodes[node] else {
                return;
            };
            let links = &mut self.links[node];
            let mut out: heapless::Vec<Forward, 64> = heapless::Vec::new();
            core.arbitrate(
                |o, vc| {
                    links
                        .get(o)
                        .is_some_and(|l| l.can_send(Vc::from_bits(vc as u8), MAX_PAYLOAD_FLITS))
                },
                &mut out,
            );
            if out.is_empty() {
                return;
            }
            let mut kicked = heapless::Vec::<usize, 64>::new();
            for f in &out {
                core.output_done(f.output);
                let Some(h) = held.get(f.handle) else {
                    continue;
                };
                let p = &h.packet;
                if links[f.output].send(p.vc, p.tl, &p.payload).is_ok() {
                    self.stats.packets_switched += 1;
                    if !kicked.contains(&f.output) {
                        let _ = kicked.push(f.output);
                    }
                }
                held.copy_gone(f.handle);
            }
            // By reference: iterating the vector by value would first copy all its 64 slots.
            for &port in &kicked {
                let (t, end) = self.fabric.ports[node][port];
                self.kick(t, end);
            }
            // Room freed at the inputs lets waiting and staged packets in; more may then be forwardable.
            let mut staged = match &self.nodes[node] {
                NodeState::Switch { staged_ports, .. } => *staged_ports,
                NodeState::Gpu => 0,
            };
            while staged != 0 {
                let port = staged.trailing_zeros() as usize;
                staged &= staged - 1;
                if self.staged_fits(node, port) {
                    self.switch_received(node, port);
                } else {
                    debug_assert!(
                        self.nothing_waits_behind_empty_slots(node, port),
                        "switch {node} port {port}: a packet waits with its channel's slot empty"
                    );
                    // What offering the port again would have done: nothing but these two.
                    self.pump_nvls(node);
                    self.pump_resend(node);
                }
            }
            self.pump_nvls(node);
            self.pump_resend(node);
        }
    }
}

/// The fabric manager reads the running fabric's registers by directed route from a GPU, over trunks that
/// are up: a switch's (its tables and identity) and a GPU's identity.
impl Management for Net {
    fn homes(&self) -> usize {
        self.fabric.gpus.len()
    }

    fn read(&mut self, home: usize, route: &[u8], address: u32) -> Result<u32, String> {
        let home = *self.fabric.gpus.get(home).ok_or("no such home")?;
        let x = follow(home, route, |x, p| self.across(x, p))?;
        match &self.nodes[x] {
            NodeState::Switch { core, .. } => core.read_register(address),
            NodeState::Gpu => {
                self.gpu_identity[self.gpu_of_node[x].unwrap_or_default()].read_register(address)
            }
        }
        .map_err(|e| e.to_string())
    }
}
