//! Traffic across a simulated link, checked byte for byte: the harness behind `linkctl link run`, the
//! reliability tests and the goodput sweep.
//!
//! Two [`Endpoint`]s train over the physical layer's channel model (bit errors, bursts, skew, dead lanes),
//! optionally with a flit-level fault injector between each physical layer and its data link (dropped,
//! duplicated and corrupted flits). Each side sends numbered packets whose contents are derived from the
//! seed, round-robin over the chosen virtual channels; the receiver checks that every channel delivers
//! exactly the sequence sent, in order, once, uncorrupted.

use std::vec::Vec;

use link_phy::channel::{ChannelConfig, Fault, FaultKind};
use link_phy::ltssm::{PhyEvent, Port, PortConfig};
use link_phy::pair::{LinkPair, Node, Side, Tap, Tapped};
use link_phy::rate::{LineCode, Rate};
use link_phy::serial::Slot;
use link_phy::time::{Duration, Instant};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::endpoint::Endpoint;
use crate::flit::{Flit, FLIT_LEN, MAX_PAYLOAD_FLITS};
use crate::link::PowerState;
use crate::link::{DlConfig, DlCounters};
use crate::vc::{Vc, VC_COUNT};

/// Faults a flit-level injector applies to received units, each with a probability per unit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlitFaults {
    /// A unit vanishes.
    pub drop: f64,
    /// A unit arrives twice.
    pub duplicate: f64,
    /// A unit arrives with one random bit flipped.
    pub corrupt: f64,
}

impl FlitFaults {
    fn any(&self) -> bool {
        self.drop > 0.0 || self.duplicate > 0.0 || self.corrupt > 0.0
    }
}

/// An endpoint (with a replay buffer of `REPLAY` packets and `RX_FLITS` flits of receive buffer per
/// channel) with a flit-level fault injector on its receive side.
#[derive(Debug)]
pub struct SimEndpoint<const REPLAY: usize = 64, const RX_FLITS: usize = 64> {
    /// The endpoint.
    pub ep: Endpoint<REPLAY, RX_FLITS>,
    faults: FlitFaults,
    rng: Xoshiro256PlusPlus,
    /// Units dropped, duplicated and corrupted by the injector.
    pub injected: [u64; 3],
    /// Given each unit the data link sends, with the start of the slot that carries it (a trace).
    unit_tap: Option<UnitTap>,
    /// Given each unit the data link receives, as it arrives (after the injector's faults).
    received_tap: Option<UnitTap>,
}

/// A watcher of the units an endpoint sends or receives.
type Watcher = std::boxed::Box<dyn FnMut(Instant, &[u8], bool)>;

/// What watches the units an endpoint sends or receives ([`SimEndpoint::set_unit_tap`],
/// [`SimEndpoint::set_received_tap`]).
pub struct UnitTap(Watcher);

impl UnitTap {
    /// `watch` is given each unit with the time of the slot that carries it, and for a unit received,
    /// whether the data link started its framing over before it (it came up, or was reset); false for a
    /// unit sent.
    pub fn new(watch: impl FnMut(Instant, &[u8], bool) + 'static) -> Self {
        UnitTap(std::boxed::Box::new(watch))
    }
}

impl core::fmt::Debug for UnitTap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("UnitTap")
    }
}

impl<const REPLAY: usize, const RX_FLITS: usize> SimEndpoint<REPLAY, RX_FLITS> {
    /// An endpoint at time zero with `faults` injected into what it receives (seeded).
    pub fn new(
        phy: PortConfig,
        dl: DlConfig,
        faults: FlitFaults,
        seed: u64,
    ) -> Result<Self, link_phy::Error> {
        Ok(SimEndpoint {
            ep: Endpoint::new(phy, dl, Instant::ZERO)?,
            faults,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xF11_7F11),
            injected: [0; 3],
            unit_tap: None,
            received_tap: None,
        })
    }

    /// Hand every unit the data link sends to `tap`, with the start of the slot that carries it.
    pub fn set_unit_tap(&mut self, tap: UnitTap) {
        self.unit_tap = Some(tap);
    }

    /// Hand every flit the data link receives to `tap` as it frames it into packets, with the time of the
    /// slot that brought it: after the channel's errors and the injector's faults (a dropped unit is not
    /// there, a duplicated one is there twice), before the data link checks the CRC. With FEC, a block's
    /// flits as corrected, once the block is whole, not its check unit. Nothing while the link is down.
    pub fn set_received_tap(&mut self, tap: UnitTap) {
        self.received_tap = Some(tap);
    }

    fn chance(rng: &mut Xoshiro256PlusPlus, p: f64) -> bool {
        p > 0.0 && ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

impl<const REPLAY: usize, const RX_FLITS: usize> Node for SimEndpoint<REPLAY, RX_FLITS> {
    fn port(&self) -> &Port {
        &self.ep.phy
    }
    fn port_mut(&mut self) -> &mut Port {
        &mut self.ep.phy
    }
    fn transmit(&mut self, now: Instant, _fill: &mut dyn FnMut(&mut [u8])) -> Slot {
        match self.unit_tap.as_mut() {
            None => self.ep.poll_transmit(now),
            Some(UnitTap(tap)) => self.ep.poll_transmit_tapped(now, |unit| tap(now, unit, false)),
        }
    }
    fn receive(&mut self, now: Instant, slot: &Slot, _deliver: &mut dyn FnMut(&[u8], u64)) {
        if !self.faults.any() {
            match self.received_tap.as_mut() {
                None => self.ep.receive(now, slot),
                Some(UnitTap(tap)) => self
                    .ep
                    .receive_tapped(now, slot, |unit, restarted| tap(now, unit, restarted)),
            }
            return;
        }
        let (faults, rng, injected) = (self.faults, &mut self.rng, &mut self.injected);
        let mut tap = self.received_tap.as_mut().map(|UnitTap(tap)| tap);
        let dl = &mut self.ep.dl;
        self.ep.phy.receive(now, slot, &mut |data, index| {
            for (i, unit) in data.chunks(FLIT_LEN).enumerate() {
                let index = index + i as u64;
                if Self::chance(rng, faults.drop) {
                    injected[0] += 1;
                    continue;
                }
                let mut unit_copy = [0u8; FLIT_LEN];
                unit_copy.copy_from_slice(unit);
                if Self::chance(rng, faults.corrupt) {
                    injected[2] += 1;
                    let bit = (rng.next_u32() % 128) as usize;
                    unit_copy[bit / 8] ^= 1 << (bit % 8);
                }
                let copies = if Self::chance(rng, faults.duplicate) {
                    injected[1] += 1;
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    match tap.as_mut() {
                        Some(tap) => {
                            dl.receive_unit_tapped(now, &unit_copy, index, &mut |flit, restarted| {
                                tap(now, flit, restarted)
                            })
                        }
                        None => dl.receive_unit(now, &unit_copy, index),
                    }
                }
            }
        });
        self.ep.sync(now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.ep.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.ep.handle_timeout(now)
    }
    fn poll_phy_event(&mut self) -> Option<PhyEvent> {
        self.ep.poll_phy_event()
    }
}

/// A node [`run`] can drive: a [`SimEndpoint`], or a node around one (one that records what its endpoint
/// sends, say), so that a caller can watch the link without the harness knowing.
pub trait SimNode<const REPLAY: usize, const RX_FLITS: usize>: Node {
    /// The endpoint inside.
    fn sim(&self) -> &SimEndpoint<REPLAY, RX_FLITS>;
    /// The endpoint inside, mutably.
    fn sim_mut(&mut self) -> &mut SimEndpoint<REPLAY, RX_FLITS>;
}

impl<const REPLAY: usize, const RX_FLITS: usize> SimNode<REPLAY, RX_FLITS> for SimEndpoint<REPLAY, RX_FLITS> {
    fn sim(&self) -> &SimEndpoint<REPLAY, RX_FLITS> {
        self
    }
    fn sim_mut(&mut self) -> &mut SimEndpoint<REPLAY, RX_FLITS> {
        self
    }
}

impl<const REPLAY: usize, const RX_FLITS: usize, N: SimNode<REPLAY, RX_FLITS>, T: Tap>
    SimNode<REPLAY, RX_FLITS> for Tapped<N, T>
{
    fn sim(&self) -> &SimEndpoint<REPLAY, RX_FLITS> {
        self.node.sim()
    }
    fn sim_mut(&mut self) -> &mut SimEndpoint<REPLAY, RX_FLITS> {
        self.node.sim_mut()
    }
}

/// What traffic to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Traffic {
    /// Packets each sending side sends.
    pub packets: u64,
    /// Payload bytes per packet, 0 to 144 (carried in whole flits).
    pub payload: usize,
    /// Channels to send on, round robin.
    pub vcs: Vec<Vc>,
    /// Whether B sends to A as well as A to B.
    pub both_ways: bool,
    /// Seed of the packet contents.
    pub seed: u64,
    /// Ask port A's physical layer to retrain at these times (after the link is first up); one that
    /// falls due while the port is not in L0 (retraining already) waits until it is.
    pub retrain_at: Vec<Duration>,
    /// Idle stretches: at each of these times (after the link is first up) the senders pause for
    /// [`Traffic::sleep_for`], and port A's data link asks for low power (L1) at once. The first packet
    /// sent after the pause wakes the link. One that falls due during another waits for its end.
    pub sleep_at: Vec<Duration>,
    /// How long the senders pause at each of [`Traffic::sleep_at`].
    pub sleep_for: Duration,
    /// Faults of the channels (a burst of bit errors, a lane breaking) at times after the link is first
    /// up, unlike a [`ChannelConfig`]'s, whose times count from the start of training.
    pub channel_faults: Vec<ChannelFault>,
    /// Give up after this much simulated time.
    pub limit: Duration,
}

/// A fault of one direction's channel, at a time after the link is first up ([`Traffic::channel_faults`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChannelFault {
    /// The transmitter whose channel it strikes: [`Side::A`] for the channel from A to B. Its lanes are
    /// numbered as that transmitter numbers them.
    pub from: Side,
    /// When, after the link is first up.
    pub after: Duration,
    /// What.
    pub kind: FaultKind,
}

/// One of [`Traffic::sleep_at`], as it went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sleep {
    /// When port A's data link asked for L1, from the link becoming active.
    pub asked_at: Duration,
    /// From the request to both data links in L1: the handshake, packets in flight included.
    pub entry: Duration,
    /// From both in L1 to the first packet sent after the pause (which asks for the wake).
    pub in_l1: Duration,
    /// From that packet to both ports back in L0 and both data links in use: the wake.
    pub exit: Duration,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            packets: 10_000,
            payload: 128,
            vcs: Vec::from([Vc::Posted]),
            both_ways: false,
            seed: 1,
            retrain_at: Vec::new(),
            sleep_at: Vec::new(),
            sleep_for: Duration::from_us(10),
            channel_faults: Vec::new(),
            limit: Duration::from_ms(500),
        }
    }
}

/// What happened, from the receivers' point of view (which checked everything) and the counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Packets handed to the sending data links.
    pub packets_sent: u64,
    /// Packets delivered to the receiving applications.
    pub packets_delivered: u64,
    /// Payload bytes delivered and checked against what was sent.
    pub bytes_verified: u64,
    /// Packets delivered a second time (must be 0).
    pub duplicates: u64,
    /// Packets delivered with wrong contents (must be 0).
    pub corrupted: u64,
    /// Packets delivered out of order, i.e. with an earlier one missing (must be 0).
    pub out_of_order: u64,
    /// Whether every packet sent was delivered before the time limit.
    pub complete: bool,
    /// Whether both data links became active before the time limit: if not, nothing was sent.
    pub active: bool,
    /// Each port's LTSSM state at the end (its name), A then B: where training ended if never active.
    pub phy_states: [&'static str; 2],
    /// Data link counters, A then B.
    pub dl: [DlCounters; 2],
    /// Retrains of the physical layer (both sides).
    pub retrains: u64,
    /// Physical layer counters, A then B.
    pub phy: [link_phy::ltssm::PhyCounters; 2],
    /// Bits flipped by the channel, both directions.
    pub bits_flipped: u64,
    /// Units dropped, duplicated and corrupted by the flit injector, both sides.
    pub flit_faults: [u64; 3],
    /// Simulated time from the link becoming active to the last delivery.
    pub elapsed: Duration,
    /// Simulated time to bring the link up (when not [`Report::active`], the time it stopped trying).
    pub time_to_active: Duration,
    /// Payload delivered per simulated second, in GB/s (1e9 bytes), all directions together.
    pub goodput_gbps: f64,
    /// Goodput as a fraction of the post-encoding line rate of the directions that carried traffic, at
    /// the width, rate and code the link had at each moment (while down, the ones it last had up).
    pub efficiency: f64,
    /// Goodput as a fraction of the raw signalling rate (lanes x GT/s) of those directions, likewise.
    pub raw_efficiency: f64,
    /// Width and rate of the link the packets crossed: at the end, or when the link was last up if it
    /// went down.
    pub width: usize,
    /// GT/s.
    pub rate_gts: f64,
    /// Line code name.
    pub code: &'static str,
    /// When the link went down, if it was down when the run ended (failed, or still retraining when
    /// the time ran out), from the start, training included: the last time both ports were seen in L0
    /// and both data links active.
    pub down_at: Option<Duration>,
    /// Whether the run stopped at its time limit with packets not delivered.
    pub limit_reached: bool,
    /// Retrains asked for ([`Traffic::retrain_at`]) that were not done: the run had ended first.
    pub retrains_not_done: usize,
    /// Whether each of [`Traffic::channel_faults`], in order, struck: not if the run had ended first.
    pub channel_faults_struck: Vec<bool>,
    /// Bursts of bit errors the channels injected, both directions.
    pub bursts: u64,
    /// The sleeps asked for ([`Traffic::sleep_at`]) that went all the way to L1 and back.
    pub sleeps: Vec<Sleep>,
    /// Sleeps not done, or not finished (the run ended first, or the data link refused: not active).
    pub sleeps_not_done: usize,
    /// Simulated time a sending data link had no packet on the wire, with the link up, because its
    /// sender, with packets left, was held back for want of credit (the partner's receive buffer full as
    /// far as it knew), summed over the senders: the share of the line rate a link loses when its credits
    /// come back later than the receive buffer takes to fill. Counted in flit slots that carried no packet
    /// flit, as a share of the sender's slots, of the time to its last delivery: with the packets' own
    /// share ([`Report::efficiency`]) it stays under the whole.
    pub idle_for_credit: Duration,
    /// Likewise, held back because the replay buffer was full (every packet in it sent, its
    /// acknowledgements not back yet).
    pub idle_for_replay: Duration,
}

/// A sleep under way: when it was asked for, when the senders resume, and when the link reached L1
/// and was asked to wake.
struct Sleeping {
    asked: Instant,
    resume: Instant,
    entered: Option<Instant>,
    woken: Option<Instant>,
}

/// The contents of payload flit `i` of packet `k` on `vc`.
fn payload_flit(seed: u64, vc: Vc, k: u64, i: usize) -> Flit {
    let mut x =
        seed ^ (k.wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ ((vc.index() as u64) << 56) ^ (i as u64) << 48;
    let mut flit = [0u8; FLIT_LEN];
    for chunk in flit.chunks_mut(8) {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    flit
}

/// The transaction-layer header of packet `k`: its number (the channel travels in the DL header).
fn tl_of(k: u64) -> u64 {
    k & ((1 << 48) - 1)
}

struct Sender {
    next: [u64; VC_COUNT],
    sent: u64,
    rr: usize,
    /// What held the sender back, when last looked at, and the wire's count then ([`Wire::now`]).
    held: Option<(Held, Wire)>,
    /// Flit slots on the wire that carried no packet flit while held, by reason ([`Held`] as index).
    held_units: [u64; 2],
    /// The wire's count when the traffic started, and at the last delivery of the sender's packets.
    wire_at_start: Wire,
    wire_at_last_delivery: Wire,
}

/// A sender's wire, counted in flit slots: those its port put on the link in L0 (packet, control and
/// idle flits alike) and those of them that carried packet flits (first sent or replayed). Looks at the
/// senders fall only between slots, and a slot of a wide link holds more than a packet, so time held back
/// is counted in the slots it left without packets, not in the time between looks.
#[derive(Clone, Copy, Default)]
struct Wire {
    units: u64,
    packet_flits: u64,
}

impl Wire {
    fn now<const REPLAY: usize, const RX_FLITS: usize>(ep: &Endpoint<REPLAY, RX_FLITS>) -> Wire {
        let dl = ep.dl.counters();
        Wire {
            units: ep.phy.counters().units_sent,
            packet_flits: dl.flits_transmitted - dl.control_sent - dl.init_sent,
        }
    }

    /// Slots since `earlier` that carried no packet flit.
    fn without_packets_since(self, earlier: Wire) -> u64 {
        let units = self.units.saturating_sub(earlier.units);
        units.saturating_sub(self.packet_flits.saturating_sub(earlier.packet_flits))
    }
}

/// Why a sender with packets left could not send the next.
#[derive(Clone, Copy)]
enum Held {
    Credit,
    Replay,
}

impl Held {
    /// What keeps `dl`, with its link up, from taking one of `flits` flits on `vc` now, if anything this
    /// report tells apart (one not active or going to low power is neither). A packet still going out
    /// fills its slots, which are not counted as held ([`Wire`]); the rest of the slot after it is.
    fn of<const REPLAY: usize, const RX_FLITS: usize>(
        dl: &crate::DataLink<REPLAY, RX_FLITS>,
        vc: Vc,
        flits: usize,
    ) -> Option<Held> {
        if !dl.is_active() || dl.power_state() != PowerState::On {
            None
        } else if dl.replay_full() {
            Some(Held::Replay)
        } else if usize::from(dl.credit(vc)) <= flits {
            Some(Held::Credit)
        } else {
            None
        }
    }
}

struct Receiver {
    next: [u64; VC_COUNT],
    delivered: u64,
    last_delivery: Instant,
}

/// Bring the pair up and run `traffic` over it.
pub fn run<const REPLAY: usize, const RX_FLITS: usize, N: SimNode<REPLAY, RX_FLITS>>(
    pair: &mut LinkPair<N>,
    traffic: &Traffic,
) -> Report {
    let flits = traffic.payload.div_ceil(FLIT_LEN).min(MAX_PAYLOAD_FLITS);
    let vcs: Vec<Vc> = if traffic.vcs.is_empty() {
        Vec::from([Vc::Posted])
    } else {
        traffic.vcs.clone()
    };
    let limit = Instant::ZERO + traffic.limit;
    let mut report = Report::default();
    let active = pair.run_until(limit, |p| {
        p.a.sim().ep.dl.is_active() && p.b.sim().ep.dl.is_active()
    });
    let start = pair.now();
    report.active = active;
    report.time_to_active = start.saturating_since(Instant::ZERO);
    let senders = if traffic.both_ways { 2 } else { 1 };
    let mut tx: Vec<Sender> = [&pair.a.sim().ep, &pair.b.sim().ep]
        .map(Wire::now)
        .into_iter()
        .map(|wire| Sender {
            next: [0; VC_COUNT],
            sent: 0,
            rr: 0,
            held: None,
            held_units: [0; 2],
            wire_at_start: wire,
            wire_at_last_delivery: wire,
        })
        .collect();
    let mut rx: Vec<Receiver> = (0..2)
        .map(|_| Receiver {
            next: [0; VC_COUNT],
            delivered: 0,
            last_delivery: start,
        })
        .collect();
    let channel_faults: Vec<(Side, Fault)> = (traffic.channel_faults.iter())
        .map(|f| {
            (
                f.from,
                Fault {
                    at: start + f.after,
                    kind: f.kind,
                },
            )
        })
        .collect();
    for &(from, fault) in &channel_faults {
        pair.channel_from_mut(from).schedule(fault);
    }
    let mut retrains: Vec<Instant> = traffic.retrain_at.iter().map(|&d| start + d).collect();
    retrains.sort();
    let mut sleeps: Vec<Instant> = traffic.sleep_at.iter().map(|&d| start + d).collect();
    sleeps.sort();
    let mut sleeping: Option<Sleeping> = None;
    let asleep = |pair: &LinkPair<N>| {
        pair.a.sim().ep.dl.power_state() == PowerState::Asleep
            && pair.b.sim().ep.dl.power_state() == PowerState::Asleep
    };
    let mut payload = [[0u8; FLIT_LEN]; MAX_PAYLOAD_FLITS];
    // Saturating: a count past the range runs to the time limit, as a count it cannot reach does.
    let total = traffic.packets.saturating_mul(senders as u64);
    // Up: both physical ports in L0 and both data links active (a data link stays active while its port
    // retrains, and a port that cannot retrain stays down).
    let up = |pair: &LinkPair<N>| {
        let (a, b) = (&pair.a.sim().ep, &pair.b.sim().ep);
        a.phy.is_up() && b.phy.is_up() && a.dl.is_active() && b.dl.is_active()
    };
    // The link as it was when last seen up: its width, rate and code, and when.
    let phy_now =
        |phy: &link_phy::ltssm::Port| (phy.width().map_or(0, |w| w.lanes()), phy.rate(), phy.line_code());
    let mut last_up = (pair.now(), phy_now(&pair.a.sim().ep.phy));
    // Each width, rate and code the link came up with, from when it was first seen up with it: goodput
    // is measured against the line rate of the time, so that a link that fell back to a lower rate late
    // in the run does not have what it carried at the higher one measured against the lower (which gave
    // an efficiency above 100%). Only changes are kept.
    let mut line_rates: Vec<(Instant, LinkShape)> = Vec::new();
    while active && pair.now() <= limit && rx.iter().map(|r| r.delivered).sum::<u64>() < total {
        if up(pair) {
            last_up = (pair.now(), phy_now(&pair.a.sim().ep.phy));
            if line_rates.last().is_none_or(|(_, shape)| *shape != last_up.1) {
                line_rates.push(last_up);
            }
        }
        // A port retrains only from L0 (it ignores a request elsewhere), so a request that falls due
        // while it is not there waits for it: else it would be neither done nor counted as not done.
        if pair.a.sim().ep.phy.is_up() && retrains.first().is_some_and(|&t| pair.now() >= t) {
            retrains.remove(0);
            pair.a.sim_mut().ep.phy.request_retrain();
        }
        if sleeping.is_none() && sleeps.first().is_some_and(|&t| pair.now() >= t) {
            let now = pair.now();
            sleeps.remove(0);
            if pair.a.sim_mut().ep.dl.request_low_power().is_ok() {
                sleeping = Some(Sleeping {
                    asked: now,
                    resume: now + traffic.sleep_for,
                    entered: None,
                    woken: None,
                });
            } else {
                report.sleeps_not_done += 1;
            }
        }
        if let Some(s) = &mut sleeping {
            if s.entered.is_none() && asleep(pair) {
                s.entered = Some(pair.now());
            }
            let back = |p: &LinkPair<N>| {
                up(p)
                    && p.a.sim().ep.dl.power_state() == PowerState::On
                    && p.b.sim().ep.dl.power_state() == PowerState::On
            };
            if let (Some(entered), Some(woken)) = (s.entered, s.woken) {
                if back(pair) {
                    report.sleeps.push(Sleep {
                        asked_at: s.asked.saturating_since(start),
                        entry: entered.saturating_since(s.asked),
                        in_l1: woken.saturating_since(entered),
                        exit: pair.now().saturating_since(woken),
                    });
                    sleeping = None;
                }
            }
        }
        // The pair's clock moves only when it steps, at the end of this pass.
        let pair_now = pair.now();
        let paused = sleeping.as_ref().is_some_and(|s| pair_now < s.resume);
        let link_up = up(pair);
        // Each port's wire now: the senders' turns below only queue packets, which puts nothing on it, so
        // the receivers' turn after them reads the same counts.
        let wires = [Wire::now(&pair.a.sim().ep), Wire::now(&pair.b.sim().ep)];
        for (s, sender) in tx.iter_mut().enumerate().take(senders) {
            let ep = if s == 0 {
                &mut pair.a.sim_mut().ep
            } else {
                &mut pair.b.sim_mut().ep
            };
            // The slots since the last look that left without packets count to what held the sender then.
            let wire = wires[s];
            if let Some((why, then)) = sender.held.take() {
                sender.held_units[why as usize] += wire.without_packets_since(then);
            }
            if paused {
                continue;
            }
            let was_asleep = ep.dl.power_state() == PowerState::Asleep;
            // Keep the data link's queue full, and let refusals (no credit, replay buffer full) push back.
            while sender.sent < traffic.packets {
                let vc = vcs[sender.rr % vcs.len()];
                if !ep.dl.can_send(vc, flits) {
                    sender.held = Held::of(&ep.dl, vc, flits)
                        .filter(|_| link_up)
                        .map(|why| (why, wire));
                    break;
                }
                let k = sender.next[vc.index()];
                for (i, f) in payload[..flits].iter_mut().enumerate() {
                    *f = payload_flit(traffic.seed, vc, k, i);
                }
                if ep.dl.send(vc, tl_of(k), &payload[..flits]).is_err() {
                    break;
                }
                sender.next[vc.index()] += 1;
                sender.sent += 1;
                sender.rr += 1;
                if was_asleep {
                    if let Some(s) = sleeping.as_mut().filter(|s| s.woken.is_none()) {
                        s.woken = Some(pair_now);
                    }
                }
            }
        }
        for (r, node) in [&mut pair.b, &mut pair.a].into_iter().enumerate().take(senders) {
            let receiver = &mut rx[r];
            while let Some(p) = node.sim_mut().ep.dl.recv() {
                let vc = p.vc.index();
                let k = receiver.next[vc];
                if p.tl < tl_of(k) {
                    report.duplicates += 1;
                    continue;
                }
                if p.tl > tl_of(k) {
                    report.out_of_order += 1;
                }
                let k = p.tl;
                let intact = p.payload.len() == flits
                    && p.payload
                        .iter()
                        .enumerate()
                        .all(|(i, f)| *f == payload_flit(traffic.seed, p.vc, k, i));
                if intact {
                    report.bytes_verified += traffic.payload as u64;
                } else {
                    report.corrupted += 1;
                }
                receiver.next[vc] = k + 1;
                receiver.delivered += 1;
                receiver.last_delivery = pair_now;
                tx[r].wire_at_last_delivery = wires[r];
            }
        }
        // Paused, with both ports quiet in L1, nothing may be due before the senders resume.
        let stepped = match &sleeping {
            Some(s) if pair.now() < s.resume => pair.step_until(s.resume) || pair.now() >= s.resume,
            _ => pair.step(),
        };
        if !stepped {
            break;
        }
    }
    report.sleeps_not_done += sleeps.len() + usize::from(sleeping.is_some());
    report.packets_sent = tx.iter().map(|s| s.sent).sum();
    report.packets_delivered = rx.iter().map(|r| r.delivered).sum();
    report.complete = report.packets_delivered == total
        && report.duplicates == 0
        && report.corrupted == 0
        && report.out_of_order == 0;
    let end = rx
        .iter()
        .take(senders)
        .map(|r| r.last_delivery)
        .max()
        .unwrap_or(start);
    report.elapsed = end.saturating_since(start);
    // Each sender's slots without packets while held, as a share of its slots up to its last delivery,
    // of the time to that delivery.
    for (sender, receiver) in tx.iter().zip(&rx).take(senders) {
        let units = sender
            .wire_at_last_delivery
            .units
            .saturating_sub(sender.wire_at_start.units);
        let window = receiver.last_delivery.saturating_since(start).as_ps() as u128;
        let share = |held: u64| match units {
            0 => Duration::ZERO,
            _ => Duration::from_ps((window * u128::from(held) / u128::from(units)) as u64),
        };
        report.idle_for_credit = report.idle_for_credit + share(sender.held_units[Held::Credit as usize]);
        report.idle_for_replay = report.idle_for_replay + share(sender.held_units[Held::Replay as usize]);
    }
    report.dl = [*pair.a.sim().ep.dl.counters(), *pair.b.sim().ep.dl.counters()];
    report.retrains = pair.a.sim().ep.phy.counters().retrains + pair.b.sim().ep.phy.counters().retrains;
    report.phy = [*pair.a.sim().ep.phy.counters(), *pair.b.sim().ep.phy.counters()];
    report.phy_states = [
        pair.a.sim().ep.phy.state().name(),
        pair.b.sim().ep.phy.state().name(),
    ];
    report.bits_flipped = pair.ab.stats().flipped + pair.ba.stats().flipped;
    report.bursts = pair.ab.stats().bursts + pair.ba.stats().bursts;
    report.channel_faults_struck = (channel_faults.iter())
        .map(|(from, fault)| !pair.channel_from(*from).is_pending(fault))
        .collect();
    for i in 0..3 {
        report.flit_faults[i] = pair.a.sim().injected[i] + pair.b.sim().injected[i];
    }
    let up_at_end = up(pair);
    let (width, rate, code) = if up_at_end {
        phy_now(&pair.a.sim().ep.phy)
    } else {
        last_up.1
    };
    if active && !up_at_end {
        report.down_at = Some(last_up.0.saturating_since(Instant::ZERO));
    }
    report.limit_reached = pair.now() > limit && report.packets_delivered < total;
    report.retrains_not_done = retrains.len();
    report.width = width;
    report.rate_gts = rate.gts();
    report.code = code.name();
    let seconds = report.elapsed.as_ps() as f64 * 1e-12;
    if seconds > 0.0 {
        let bytes = report.bytes_verified as f64;
        report.goodput_gbps = bytes / seconds / 1e9;
        let (raw, coded) = line_capacity(&line_rates, start, end);
        let senders = senders as f64;
        report.raw_efficiency = bytes / (senders * raw);
        report.efficiency = bytes / (senders * coded);
    }
    report
}

/// A link's width in lanes, rate and line code.
type LinkShape = (usize, Rate, LineCode);

/// The bytes one direction of the link could carry from `start` to `end`, raw (lanes x GT/s) and after
/// line coding, with the link's shape changing at the given times (each holds until the next; the first
/// holds from `start` whenever it was first seen).
fn line_capacity(shapes: &[(Instant, LinkShape)], start: Instant, end: Instant) -> (f64, f64) {
    let (mut raw, mut coded) = (0.0, 0.0);
    for (i, &(from, (lanes, rate, code))) in shapes.iter().enumerate() {
        let from = if i == 0 { start } else { from.max(start) };
        let until = shapes.get(i + 1).map_or(end, |&(next, _)| next.min(end));
        let seconds = until.saturating_since(from).as_ps() as f64 * 1e-12;
        let bytes = seconds * lanes as f64 * rate.gts() * 1e9 / 8.0;
        raw += bytes;
        coded += bytes * code.efficiency();
    }
    (raw, coded)
}

/// A pair of endpoints over `ab`/`ba`, A downstream, with the given configurations.
pub fn pair<const REPLAY: usize, const RX_FLITS: usize>(
    phy: [PortConfig; 2],
    dl: DlConfig,
    ab: ChannelConfig,
    ba: ChannelConfig,
    faults: FlitFaults,
    seed: u64,
) -> Result<LinkPair<SimEndpoint<REPLAY, RX_FLITS>>, link_phy::Error> {
    pair_with(phy, dl, [ab, ba], faults, seed, |endpoint, _| endpoint)
}

/// [`pair`], each endpoint made a node by `node`, which is given its side.
pub fn pair_with<const REPLAY: usize, const RX_FLITS: usize, N: SimNode<REPLAY, RX_FLITS>>(
    phy: [PortConfig; 2],
    dl: DlConfig,
    [ab, ba]: [ChannelConfig; 2],
    faults: FlitFaults,
    seed: u64,
    mut node: impl FnMut(SimEndpoint<REPLAY, RX_FLITS>, Side) -> N,
) -> Result<LinkPair<N>, link_phy::Error> {
    Ok(LinkPair::with_nodes(
        node(SimEndpoint::new(phy[0], dl, faults, seed)?, Side::A),
        node(
            SimEndpoint::new(phy[1], dl, faults, seed.wrapping_add(1))?,
            Side::B,
        ),
        ab,
        ba,
    ))
}

impl<const REPLAY: usize, const RX_FLITS: usize> Node for Endpoint<REPLAY, RX_FLITS> {
    fn port(&self) -> &Port {
        &self.phy
    }
    fn port_mut(&mut self) -> &mut Port {
        &mut self.phy
    }
    fn transmit(&mut self, now: Instant, _fill: &mut dyn FnMut(&mut [u8])) -> Slot {
        self.poll_transmit(now)
    }
    fn receive(&mut self, now: Instant, slot: &Slot, _deliver: &mut dyn FnMut(&[u8], u64)) {
        Endpoint::receive(self, now, slot)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Endpoint::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Endpoint::handle_timeout(self, now)
    }
    fn poll_phy_event(&mut self) -> Option<PhyEvent> {
        Endpoint::poll_phy_event(self)
    }
}
