//! Exhaustive exploration of every interleaving of a small coherent system: `A` caching agents, `L`
//! lines of one byte, stores of the values 1 to `values` (memory starts at 0).
//!
//! A state is the home, every agent (with its queued operations and its outgoing channels) and two ghost
//! variables. Each channel between an agent and the home (request and response to the home; snoop and
//! response to the agent) is a FIFO, as the data link delivers it. From each state the checker takes
//! every enabled step: an agent submits any operation on any line (while it has fewer than `outstanding`
//! in progress; there is no bound on how many in all: states repeat, and are recognised), or the head of
//! a non-empty channel is delivered. Breadth first, so a counterexample is a shortest one.
//!
//! Which heads may be delivered is the reordering bound ([`Config::reorder`]). Without one the channels
//! interleave arbitrarily. With a bound `k` the state also records the channel of every message in
//! flight, oldest first, and a head may be delivered only if at most `k` messages sent before it are
//! still in flight: it overtakes at most `k` of them. Of the messages one step sends, responses count as
//! sent before requests and snoops, as the engines send them (a home finishes a transaction with its GO,
//! then starts the next with snoops). `k = 0` is a network that delivers in send order; `k = 1` already
//! lets a snoop pass the GO it follows, the race the phase bit exists for. The order is part of the
//! state, so a bound can make more states than no bound (send order makes fewer, one overtaking already
//! more): it models a network with limited reordering; it is not a shortcut.
//!
//! States are recognised by a 128-bit fingerprint of a representative: by default every agent's parity
//! of GOs for every line is made even (flipping the home's parity and the snoops' phases with it), the
//! lines, then the agents, are renumbered in the order of what they hold (ties keep their order), and
//! the stored values renamed in order of first appearance ([`Config::phase_symmetry`],
//! [`Config::line_symmetry`], [`Config::agent_symmetry`], [`Config::value_symmetry`]). The engines never
//! name a line or an agent in a decision, only compare phases, and never look at the values they move,
//! so a state and its representative have equivalent futures, and a violation reachable from one is
//! reachable, renamed, from the other. Any representative in the same orbit is sound; a better one only
//! saves more states.
//!
//! Checked on every state:
//! - single writer, multiple readers: per line, at most one agent has write permission (E or M), and
//!   then none has read permission (S). An agent whose eviction is in flight has no permission;
//! - data value: every copy with permission holds the value of the most recent store to its line (the
//!   ghost `latest`, set when a store takes effect, in the order the home's grants allow), and every read
//!   returns it (a ReadCurrent, which does not cache, returns a value the line held at some moment
//!   between its submission and its completion);
//! - no deadlock: a state with work under way has a message in some channel; and (`check_drain`) from
//!   every state, delivering messages without new operations reaches quiescence, where the home's
//!   directory matches the caches exactly and memory holds the latest value of every line not Modified.
//!
//! The engines refusing any message (a protocol error) is a violation too.

use std::boxed::Box;
use std::collections::VecDeque;
use std::format;
use std::hash::{Hash, Hasher};
use std::string::String;
use std::time::Instant;
use std::vec::Vec;

use link_dl::Vc;

use super::agent::{CachingAgent, CoreOp};
use super::home::{Directory, HomeAgent};
use super::message::{CacheState, Message};
use super::permuted;

mod fingerprint;

use fingerprint::{fingerprint, FingerprintSet, Fingerprinter};

/// Core operations an agent of the model may have in progress at once.
pub const MAX_OUTSTANDING: usize = 2;

/// Messages in flight the reordering bound can track (the model's channels hold at most `4 · A · L`).
pub const MAX_IN_FLIGHT: usize = 64;

/// The agent of the model: one-byte lines.
pub type ModelAgent<const L: usize> = CachingAgent<L, 1, MAX_OUTSTANDING>;
/// The home of the model.
pub type ModelHome<const L: usize, const A: usize> = HomeAgent<L, A, 1>;

/// What to explore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Stores write 1 to `values` (memory starts at 0); at most 7.
    pub values: u8,
    /// Operations each agent may have in progress at once, 1 to [`MAX_OUTSTANDING`].
    pub outstanding: usize,
    /// Check that every state drains to quiescence without new operations (costs about twice the time).
    pub check_drain: bool,
    /// Stop after this many states (the report then says the search was not complete).
    pub max_states: u64,
    /// How many older messages in flight a delivered message may overtake; `None`: any number (the
    /// channels interleave arbitrarily).
    pub reorder: Option<u8>,
    /// Count states that differ only in the names of the stored values once (value symmetry): the
    /// protocol moves values but never looks at them, so renaming them maps every run to an equivalent
    /// one, and a violation to a violation.
    pub value_symmetry: bool,
    /// Count states that differ only in the numbering of the agents once (agent symmetry): the home
    /// treats agents alike and every agent may take every step, so renumbering them maps every run to an
    /// equivalent one.
    pub agent_symmetry: bool,
    /// Count states that differ only in the numbering of the lines once (line symmetry): agents and home
    /// treat lines alike and every operation may go to every line.
    pub line_symmetry: bool,
    /// Count states that differ only in the parities of the GOs an agent received for a line (and the
    /// home sent it) once (phase symmetry): the engines compare phases but never read them as numbers.
    pub phase_symmetry: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            values: 2,
            outstanding: 1,
            check_drain: true,
            max_states: u64::MAX,
            reorder: None,
            value_symmetry: true,
            agent_symmetry: true,
            line_symmetry: true,
            phase_symmetry: true,
        }
    }
}

/// One step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The core of `agent` submits `op` on `line`.
    Submit {
        /// The agent.
        agent: u8,
        /// The line.
        line: u8,
        /// The operation.
        op: CoreOp<1>,
    },
    /// The head of `agent`'s channel `vc` to the home is delivered.
    ToHome {
        /// The agent.
        agent: u8,
        /// The channel.
        vc: Vc,
    },
    /// The head of the home's channel `vc` to `agent` is delivered.
    ToAgent {
        /// The agent.
        agent: u8,
        /// The channel.
        vc: Vc,
    },
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    /// Two agents with write permission, or a writer and a reader, on one line.
    SingleWriter,
    /// A copy with permission, or a read, that is not the most recent store.
    DataValue,
    /// Work under way and no message in any channel.
    Deadlock,
    /// Delivering messages does not lead back to quiescence, or quiescence is inconsistent.
    NoQuiescence,
    /// An engine refused a message.
    ProtocolError,
}

/// A violation and the shortest way to it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    /// Which property failed.
    pub kind: ViolationKind,
    /// How.
    pub detail: String,
    /// The steps from the initial state, each with the message it delivered.
    pub trace: Vec<String>,
}

/// The result of an exploration.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Distinct states reached.
    pub states: u64,
    /// Steps taken (edges of the state graph).
    pub transitions: u64,
    /// Length of the longest shortest path to a state.
    pub depth: usize,
    /// Quiescent states among those reached.
    pub quiescent: u64,
    /// Whether every reachable state was explored (false if `max_states` stopped it).
    pub complete: bool,
    /// The first violation found, if any.
    pub violation: Option<Counterexample>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// A state of the model: the engines and the ghost variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World<const A: usize, const L: usize> {
    pub(crate) agents: [ModelAgent<L>; A],
    pub(crate) home: ModelHome<L, A>,
    /// The value of the most recent store to each line.
    latest: [u8; L],
    /// For each agent and line, the values its ReadCurrent in progress may return (bit `v` for value
    /// `v`); 0 when none is in progress. One ReadCurrent per agent and line at a time.
    window: [[u8; L]; A],
    /// Under a reordering bound, the channel ([`channel`]) of every message in flight, oldest first;
    /// empty without a bound.
    order: heapless::Vec<u8, MAX_IN_FLIGHT>,
}

impl<const A: usize, const L: usize> Default for World<A, L> {
    fn default() -> Self {
        Self::new()
    }
}

struct Failure {
    kind: ViolationKind,
    detail: String,
}

fn fail(kind: ViolationKind, detail: String) -> Failure {
    Failure { kind, detail }
}

impl<const A: usize, const L: usize> World<A, L> {
    /// Every cache empty, memory zero.
    pub fn new() -> Self {
        World {
            agents: core::array::from_fn(|_| ModelAgent::new()),
            home: ModelHome::new(),
            latest: [0; L],
            window: [[0; L]; A],
            order: heapless::Vec::new(),
        }
    }

    /// The same state with the stored values renamed 1, 2, ... in the order they first appear (memory's 0
    /// stays 0): one representative for all the states that differ only in which values were stored.
    fn with_values_renamed(&self) -> Self {
        let mut world = self.clone();
        let mut rename = [0u8; 256];
        let mut next = 0u8;
        let mut see = |v: u8| {
            if v != 0 && rename[usize::from(v)] == 0 {
                next += 1;
                rename[usize::from(v)] = next;
            }
        };
        world.visit_values(&mut |v| see(*v));
        for windows in &world.window {
            for &bits in windows {
                (1..8u8).filter(|v| bits >> v & 1 == 1).for_each(&mut see);
            }
        }
        world.visit_values(&mut |v| *v = rename[usize::from(*v)]);
        for windows in &mut world.window {
            for bits in windows.iter_mut() {
                // Bit 0 (memory's initial value) keeps its place.
                *bits = (0..8u8)
                    .filter(|v| *bits >> v & 1 == 1)
                    .fold(0, |acc, v| acc | 1 << rename[usize::from(v)]);
            }
        }
        world
    }

    /// The same state with every agent's count of GOs for every line made even, the home's count and
    /// the phases of the snoops on their way flipped with it.
    fn with_phases_even(&self) -> Self {
        let mut world = self.clone();
        for (a, agent) in world.agents.iter_mut().enumerate() {
            for n in 0..L {
                if agent.phase(n) {
                    agent.flip_phase(n);
                    world.home.flip_phase(a, n);
                }
            }
        }
        world
    }

    /// The same state with the lines renumbered in the order of what the home and the agents hold for
    /// them, whichever agent holds it and values aside (ties keep their order).
    fn with_lines_sorted(&self) -> Self {
        let view = |n: usize| {
            let mut home = Fingerprinter::default();
            self.home.hash_line_view(n, &mut home);
            // Summed, so that the numbering of the agents does not matter.
            let agents = self.agents.iter().fold(0u64, |sum, agent| {
                let mut h = Fingerprinter::default();
                agent.hash_line_view(n, &mut h);
                sum.wrapping_add(h.finish())
            });
            home.finish() ^ agents.rotate_left(17)
        };
        let views: [u64; L] = core::array::from_fn(view);
        let mut by_view: [usize; L] = core::array::from_fn(|n| n);
        by_view.sort_by_key(|&n| (views[n], n));
        let mut to = [0usize; L];
        for (place, &n) in by_view.iter().enumerate() {
            to[n] = place;
        }
        let mut world = self.clone();
        world.home.rename_lines(&to);
        for agent in &mut world.agents {
            agent.rename_lines(&to);
        }
        world.latest = permuted(self.latest, &to);
        for window in &mut world.window {
            *window = permuted(*window, &to);
        }
        world
    }

    /// The same state with the agents renumbered in the order of what they hold and what the home and
    /// the channels hold for them, values aside (ties keep their order): one representative for many
    /// states that differ only in the numbering of the agents.
    fn with_agents_sorted(&self) -> Self {
        let mut blind = self.clone();
        blind.visit_values(&mut |v| *v = 0);
        let view = |a: usize| {
            let mut h = Fingerprinter::default();
            blind.agents[a].hash(&mut h);
            blind.home.hash_agent_view(a, &mut h);
            for bits in &self.window[a] {
                bits.count_ones().hash(&mut h);
            }
            h.finish()
        };
        let views: [u64; A] = core::array::from_fn(view);
        let mut by_view: [usize; A] = core::array::from_fn(|a| a);
        by_view.sort_by_key(|&a| (views[a], a));
        let mut to = [0usize; A];
        for (place, &a) in by_view.iter().enumerate() {
            to[a] = place;
        }
        let mut world = self.clone();
        world.home.rename_agents(&to);
        for (a, agent) in self.agents.iter().enumerate() {
            world.agents[to[a]] = agent.clone();
        }
        world.window = permuted(self.window, &to);
        for channel in world.order.iter_mut() {
            let (agent, kind) = (usize::from(*channel / 4), *channel % 4);
            *channel = 4 * to[agent] as u8 + kind;
        }
        world
    }

    /// Every stored value in the state but the ReadCurrent windows, in a fixed order.
    fn visit_values(&mut self, f: &mut impl FnMut(&mut u8)) {
        self.latest.iter_mut().for_each(&mut *f);
        self.home.visit_data(f);
        for agent in &mut self.agents {
            agent.visit_data(f);
        }
    }

    /// Messages waiting on `channel`.
    fn channel_len(&self, channel: u8) -> usize {
        match delivery(channel) {
            Step::ToHome { agent, vc } => self.agents[usize::from(agent)].transmit_len(vc),
            Step::ToAgent { agent, vc } => self.home.transmit_len(usize::from(agent), vc),
            Step::Submit { .. } => 0,
        }
    }

    /// Whether the head of `channel` may be delivered under `reorder`.
    fn may_deliver(&self, channel: u8, reorder: Option<u8>) -> bool {
        match reorder {
            None => true,
            Some(k) => self.order.iter().position(|&c| c == channel) <= Some(usize::from(k)),
        }
    }

    fn steps(&self, config: &Config, out: &mut Vec<Step>) {
        out.clear();
        for (a, agent) in self.agents.iter().enumerate() {
            let agent_id = a as u8;
            for vc in [Vc::Request, Vc::Response] {
                let step = Step::ToHome { agent: agent_id, vc };
                if agent.peek_transmit(vc).is_some() && self.may_deliver(channel(step), config.reorder) {
                    out.push(step);
                }
            }
            for vc in [Vc::Snoop, Vc::Response] {
                let step = Step::ToAgent { agent: agent_id, vc };
                if self.home.peek_transmit(a, vc).is_some() && self.may_deliver(channel(step), config.reorder)
                {
                    out.push(step);
                }
            }
        }
        for (a, agent) in self.agents.iter().enumerate() {
            if agent.operations() >= config.outstanding {
                continue;
            }
            for line in 0..L {
                let mut ops = Vec::from([CoreOp::Load, CoreOp::LoadShared, CoreOp::Evict]);
                if self.window[a][line] == 0 {
                    ops.push(CoreOp::ReadCurrent);
                }
                ops.extend((1..=config.values).map(|v| CoreOp::Store([v])));
                for op in ops {
                    out.push(Step::Submit {
                        agent: a as u8,
                        line: line as u8,
                        op,
                    });
                }
            }
        }
    }

    /// The message a delivery step would deliver.
    fn message(&self, step: Step) -> Option<Message<1>> {
        match step {
            Step::Submit { .. } => None,
            Step::ToHome { agent, vc } => self.agents.get(usize::from(agent))?.peek_transmit(vc).copied(),
            Step::ToAgent { agent, vc } => self.home.peek_transmit(usize::from(agent), vc).copied(),
        }
    }

    /// Take `step`, keeping the order of the messages in flight when `tracked` (under a reordering
    /// bound).
    fn advance(&mut self, step: Step, tracked: bool) -> Result<(), Failure> {
        if !tracked {
            return self.apply(step);
        }
        if let Some(at) = self.order.iter().position(|&c| c == channel(step)) {
            self.order.remove(at);
        }
        self.apply(step)?;
        // Responses first (channels 4a + 1 and 4a + 3), then requests and snoops.
        let responses = (0..A as u8).flat_map(|a| [4 * a + 1, 4 * a + 3]);
        let others = (0..A as u8).flat_map(|a| [4 * a, 4 * a + 2]);
        for c in responses.chain(others) {
            let known = self.order.iter().filter(|&&x| x == c).count();
            for _ in known..self.channel_len(c) {
                self.order.push(c).map_err(|_| {
                    fail(
                        ViolationKind::ProtocolError,
                        format!("more than {MAX_IN_FLIGHT} messages in flight, beyond what the model tracks"),
                    )
                })?;
            }
        }
        Ok(())
    }

    fn apply(&mut self, step: Step) -> Result<(), Failure> {
        let protocol = |e| fail(ViolationKind::ProtocolError, format!("{step:?} refused: {e}"));
        let a = match step {
            Step::Submit { agent, line, op } => {
                let a = usize::from(agent);
                if op == CoreOp::ReadCurrent {
                    self.window[a][usize::from(line)] = 1 << self.latest[usize::from(line)];
                }
                self.agents[a].submit(u32::from(line), op).map_err(protocol)?;
                a
            }
            Step::ToHome { agent, vc } => {
                let a = usize::from(agent);
                if let Some(msg) = self.agents[a].pop_transmit(vc) {
                    self.home.receive(a, msg).map_err(protocol)?;
                }
                return self.check();
            }
            Step::ToAgent { agent, vc } => {
                let a = usize::from(agent);
                if let Some(msg) = self.home.pop_transmit(a, vc) {
                    self.agents[a].receive(msg).map_err(protocol)?;
                }
                a
            }
        };
        while let Some(done) = self.agents[a].poll_completion() {
            let line = done.line as usize;
            let read = done.data.map(|d| d[0]);
            match (done.op, read) {
                (CoreOp::Store([v]), _) => {
                    self.latest[line] = v;
                    for w in self.window.iter_mut() {
                        if w[line] != 0 {
                            w[line] |= 1 << v;
                        }
                    }
                }
                (CoreOp::ReadCurrent, Some(v)) => {
                    let window = core::mem::take(&mut self.window[a][line]);
                    if window >> v & 1 == 0 {
                        return Err(fail(
                            ViolationKind::DataValue,
                            format!("agent {a} ReadCurrent of line {line} returned {v}, never current while it ran (values {window:#b})"),
                        ));
                    }
                }
                (_, Some(v)) if v != self.latest[line] => {
                    return Err(fail(
                        ViolationKind::DataValue,
                        format!(
                            "agent {a} {:?} of line {line} returned {v}; the latest store wrote {}",
                            done.op, self.latest[line]
                        ),
                    ));
                }
                _ => {}
            }
        }
        self.check()
    }

    /// The state `agent` may use `line` in: its state, unless an eviction is in flight.
    fn permission(&self, agent: usize, line: u32) -> CacheState {
        let a = &self.agents[agent];
        match a.state(line) {
            Some(state) if !a.is_evicting(line) => state,
            _ => CacheState::Invalid,
        }
    }

    fn check(&self) -> Result<(), Failure> {
        for line in 0..L {
            let n = line as u32;
            let (mut writers, mut readers) = (0, 0);
            for a in 0..A {
                let state = self.permission(a, n);
                match state {
                    CacheState::Invalid => continue,
                    CacheState::Shared => readers += 1,
                    _ => writers += 1,
                }
                let data = self.agents[a].data(n).map_or(0, |d| d[0]);
                if data != self.latest[line] {
                    return Err(fail(
                        ViolationKind::DataValue,
                        format!(
                            "agent {a} holds line {line} {} with {data}; the latest store wrote {}",
                            state.letter(),
                            self.latest[line]
                        ),
                    ));
                }
            }
            if writers > 1 || (writers == 1 && readers > 0) {
                return Err(fail(
                    ViolationKind::SingleWriter,
                    format!("line {line} has {writers} writer(s) and {readers} reader(s)"),
                ));
            }
        }
        Ok(())
    }

    fn is_quiescent(&self) -> bool {
        self.home.is_idle() && self.agents.iter().all(|a| a.is_idle())
    }

    /// At quiescence the directory is exact and memory is current wherever no cache is dirty.
    fn check_quiescent(&self) -> Result<(), Failure> {
        for line in 0..L {
            let n = line as u32;
            let dir = self.home.directory(n).unwrap_or(Directory::Invalid);
            let mut dirty = false;
            for a in 0..A {
                let state = self.permission(a, n);
                let listed = match dir {
                    Directory::Invalid => false,
                    Directory::Shared(_) => dir.holds(a) && state == CacheState::Shared,
                    Directory::Owned(_) => dir.holds(a) && state.is_owned(),
                };
                if listed != state.is_valid() || dir.holds(a) != state.is_valid() {
                    return Err(fail(
                        ViolationKind::NoQuiescence,
                        format!(
                            "at quiescence line {line} is {} in agent {a} but the directory says {dir:?}",
                            state.letter()
                        ),
                    ));
                }
                dirty |= state == CacheState::Modified;
            }
            let memory = self.home.memory(n).map_or(0, |m| m[0]);
            if !dirty && memory != self.latest[line] {
                return Err(fail(
                    ViolationKind::DataValue,
                    format!("at quiescence memory holds {memory} for line {line}, no cache is dirty, and the latest store wrote {}", self.latest[line]),
                ));
            }
        }
        Ok(())
    }

    /// The delivery a drain takes: the oldest message under a reordering bound (always allowed), else
    /// the first non-empty channel.
    fn drain_delivery(&self) -> Option<Step> {
        match self.order.first() {
            Some(&oldest) => Some(delivery(oldest)),
            None => self.first_delivery(),
        }
    }

    /// A work-conserving delivery order: the first non-empty channel.
    fn first_delivery(&self) -> Option<Step> {
        for (a, agent) in self.agents.iter().enumerate() {
            let agent_id = a as u8;
            for vc in [Vc::Response, Vc::Request] {
                if agent.peek_transmit(vc).is_some() {
                    return Some(Step::ToHome { agent: agent_id, vc });
                }
            }
            for vc in [Vc::Response, Vc::Snoop] {
                if self.home.peek_transmit(a, vc).is_some() {
                    return Some(Step::ToAgent { agent: agent_id, vc });
                }
            }
        }
        None
    }
}

/// A delivery step's channel: `4 · agent` plus 0 (request to the home), 1 (response to the home), 2
/// (snoop to the agent) or 3 (response to the agent). Submissions have none (`u8::MAX`).
fn channel(step: Step) -> u8 {
    match step {
        Step::ToHome { agent, vc } => 4 * agent + u8::from(vc != Vc::Request),
        Step::ToAgent { agent, vc } => 4 * agent + 2 + u8::from(vc != Vc::Snoop),
        Step::Submit { .. } => u8::MAX,
    }
}

/// The delivery step of `channel`.
fn delivery(channel: u8) -> Step {
    let agent = channel / 4;
    match channel % 4 {
        0 => Step::ToHome {
            agent,
            vc: Vc::Request,
        },
        1 => Step::ToHome {
            agent,
            vc: Vc::Response,
        },
        2 => Step::ToAgent { agent, vc: Vc::Snoop },
        _ => Step::ToAgent {
            agent,
            vc: Vc::Response,
        },
    }
}

/// Deliver messages in a fixed order without new operations until the system is quiescent; states
/// already known to drain end the walk early.
fn drains<const A: usize, const L: usize>(
    world: &World<A, L>,
    tracked: bool,
    draining: &mut FingerprintSet,
) -> Result<(), Failure> {
    let mut w = world.clone();
    let mut path = Vec::new();
    // Every message is consumed and every request gets one GO, so a correct system drains in a bounded
    // number of deliveries; this bound is far above it.
    for _ in 0..100_000 {
        let key = fingerprint(&w);
        if draining.contains(&key) {
            break;
        }
        path.push(key);
        if w.is_quiescent() {
            w.check_quiescent()?;
            break;
        }
        let Some(step) = w.drain_delivery() else {
            return Err(fail(
                ViolationKind::Deadlock,
                String::from(
                    "delivering messages leads to a state with work under way and no message in any channel",
                ),
            ));
        };
        w.advance(step, tracked)?;
    }
    if !draining.contains(&fingerprint(&w)) && !w.is_quiescent() {
        return Err(fail(
            ViolationKind::NoQuiescence,
            String::from("delivering messages never reaches quiescence"),
        ));
    }
    draining.extend(path);
    Ok(())
}

/// Frontier states held whole; beyond this many the frontier keeps only a state's number and the state
/// is rebuilt from its path when its turn comes, so that a large search costs about a hundred bytes per
/// state (fingerprints and the path) rather than a whole state (about a kilobyte).
const RESIDENT: usize = 1 << 20;

/// The steps from the initial state to state `id`.
fn path_to(parents: &[(u32, Option<Step>)], id: u32) -> Vec<Step> {
    let mut path = Vec::new();
    let mut at = id;
    while let Some(&(parent, Some(step))) = parents.get(at as usize) {
        path.push(step);
        at = parent;
    }
    path.reverse();
    path
}

/// State `id`, rebuilt by replaying its path (which was taken without failure when it was found).
fn rebuild<const A: usize, const L: usize>(
    initial: &World<A, L>,
    parents: &[(u32, Option<Step>)],
    id: u32,
    tracked: bool,
) -> World<A, L> {
    let mut world = initial.clone();
    for step in path_to(parents, id) {
        let _ = world.advance(step, tracked);
    }
    world
}

/// Explore every state of `A` agents and `L` lines reachable from the initial one.
///
/// # Panics
///
/// If `A` is 64 or more: the explorer numbers channels in a byte.
pub fn explore<const A: usize, const L: usize>(config: &Config) -> Report {
    explore_from(World::<A, L>::new(), config)
}

/// Explore every state reachable from `initial`.
///
/// # Panics
///
/// If `A` is 64 or more: the explorer numbers channels in a byte.
pub fn explore_from<const A: usize, const L: usize>(initial: World<A, L>, config: &Config) -> Report {
    explore_observed(initial, config, &mut |_| {})
}

/// States between two calls of an exploration's observer.
pub const OBSERVE_EVERY: u64 = 1 << 20;

/// [`explore_from`], showing `observe` the report so far every [`OBSERVE_EVERY`] states (a long search's
/// progress).
///
/// # Panics
///
/// If `A` is 64 or more: the explorer numbers channels in a byte.
pub fn explore_observed<const A: usize, const L: usize>(
    initial: World<A, L>,
    config: &Config,
    observe: &mut dyn FnMut(&Report),
) -> Report {
    let started = Instant::now();
    let config = Config {
        values: config.values.clamp(1, 7),
        outstanding: config.outstanding.clamp(1, MAX_OUTSTANDING),
        ..*config
    };
    // Channel numbers must fit a byte.
    assert!(A < 64, "the explorer models at most 63 agents");
    let tracked = config.reorder.is_some();
    let mut report = Report {
        states: 0,
        transitions: 0,
        depth: 0,
        quiescent: 0,
        complete: false,
        violation: None,
        seconds: 0.0,
    };
    // State number -> (parent, step that reached it): the way to every state, for counterexamples and
    // to rebuild the states the frontier does not hold.
    let mut parents: Vec<(u32, Option<Step>)> = Vec::new();
    let mut seen = FingerprintSet::default();
    let mut draining = FingerprintSet::default();
    let mut frontier: VecDeque<(u32, u32, Option<Box<World<A, L>>>)> = VecDeque::new();
    let key = |world: &World<A, L>| {
        // Each renaming yields a state equivalent to the one before; the last is fingerprinted.
        let mut canonical = None;
        if config.phase_symmetry {
            canonical = Some(world.with_phases_even());
        }
        if config.line_symmetry {
            canonical = Some(canonical.as_ref().unwrap_or(world).with_lines_sorted());
        }
        if config.agent_symmetry {
            canonical = Some(canonical.as_ref().unwrap_or(world).with_agents_sorted());
        }
        if config.value_symmetry {
            canonical = Some(canonical.as_ref().unwrap_or(world).with_values_renamed());
        }
        fingerprint(canonical.as_ref().unwrap_or(world))
    };
    seen.insert(key(&initial));
    parents.push((0, None));
    frontier.push_back((0, 0, Some(Box::new(initial.clone()))));
    let mut steps = Vec::new();
    let mut found: Option<(u32, Option<Step>, Failure)> = None;
    let mut bounded = false;
    'search: while let Some((id, depth, held)) = frontier.pop_front() {
        let world = match held {
            Some(world) => *world,
            None => rebuild(&initial, &parents, id, tracked),
        };
        let depth = depth as usize;
        if report.states >= config.max_states {
            // This state is not examined (nor counted in the depth): the search is not complete, even
            // when it was the last state left.
            bounded = true;
            break;
        }
        report.states += 1;
        report.depth = report.depth.max(depth);
        if report.states % OBSERVE_EVERY == 0 {
            report.seconds = started.elapsed().as_secs_f64();
            observe(&report);
        }
        if world.is_quiescent() {
            report.quiescent += 1;
        }
        if config.check_drain {
            if let Err(f) = drains(&world, tracked, &mut draining) {
                found = Some((id, None, f));
                break;
            }
        }
        world.steps(&config, &mut steps);
        if world.first_delivery().is_none() && !world.is_quiescent() {
            found = Some((
                id,
                None,
                fail(
                    ViolationKind::Deadlock,
                    String::from("work under way and no message in any channel"),
                ),
            ));
            break;
        }
        for &step in &steps {
            report.transitions += 1;
            let mut next = world.clone();
            if let Err(f) = next.advance(step, tracked) {
                found = Some((id, Some(step), f));
                break 'search;
            }
            if seen.insert(key(&next)) {
                let next_id = parents.len() as u32;
                parents.push((id, Some(step)));
                let held = (frontier.len() < RESIDENT).then(|| Box::new(next));
                frontier.push_back((next_id, depth as u32 + 1, held));
            }
        }
    }
    report.complete = found.is_none() && !bounded && frontier.is_empty();
    if let Some((id, last, failure)) = found {
        let mut path = path_to(&parents, id);
        path.extend(last);
        report.violation = Some(Counterexample {
            kind: failure.kind,
            detail: failure.detail,
            trace: render(&initial, &path, tracked),
        });
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// The steps as text, each with the message it delivered and the line states after it.
fn render<const A: usize, const L: usize>(
    initial: &World<A, L>,
    path: &[Step],
    tracked: bool,
) -> Vec<String> {
    let mut world = initial.clone();
    let mut lines = Vec::new();
    for &step in path {
        let what = match (step, world.message(step)) {
            (Step::Submit { agent, line, op }, _) => format!("agent {agent} submits {op:?} on line {line}"),
            (Step::ToHome { agent, .. }, Some(msg)) => format!("agent {agent} -> home: {msg:?}"),
            (Step::ToAgent { agent, .. }, Some(msg)) => format!("home -> agent {agent}: {msg:?}"),
            (step, None) => format!("{step:?}"),
        };
        let _ = world.advance(step, tracked);
        let mut states = String::new();
        for line in 0..L {
            states.push_str(&format!(" | line {line}:"));
            for a in 0..A {
                let s = world.agents[a].state(line as u32).unwrap_or(CacheState::Invalid);
                let d = world.agents[a].data(line as u32).map_or(0, |d| d[0]);
                states.push_str(&format!(" {}{d}", s.letter()));
            }
            states.push_str(&format!(
                " mem {} latest {}",
                world.home.memory(line as u32).map_or(0, |m| m[0]),
                world.latest[line]
            ));
        }
        lines.push(format!("{what}{states}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coherence::agent::AgentBug;
    use crate::coherence::home::HomeBug;

    #[test]
    fn every_interleaving_of_two_agents_on_a_line_is_correct() {
        let r = explore::<2, 1>(&Config::default());
        assert!(r.complete, "{r:?}");
        assert_eq!(r.violation, None);
        assert!(r.states > 2_000 && r.quiescent > 0, "{r:?}");
    }

    #[test]
    fn three_agents_on_two_lines_show_no_violation_in_the_states_searched() {
        let r = explore::<3, 2>(&Config {
            max_states: 150_000,
            ..Config::default()
        });
        assert_eq!(r.violation, None);
        assert_eq!(r.states, 150_000);
    }

    /// A bound that stops the search before its last state leaves that state unexamined: not complete
    /// (it used to say complete, having only never found more states to queue), and a state not examined
    /// does not count in the depth.
    #[test]
    fn a_search_stopped_one_state_short_is_not_complete() {
        let all = explore::<2, 1>(&Config::default());
        assert!(all.complete, "{all:?}");
        let bounded = |max_states| {
            explore::<2, 1>(&Config {
                max_states,
                ..Config::default()
            })
        };
        let exact = bounded(all.states);
        assert!(exact.complete && exact.states == all.states, "{exact:?}");
        let short = bounded(all.states - 1);
        assert!(!short.complete && short.states == all.states - 1, "{short:?}");
        let first = bounded(1);
        assert_eq!((first.complete, first.states, first.depth), (false, 1, 0));
    }

    #[test]
    fn a_reordering_bound_offers_only_the_heads_it_allows() {
        let config = Config {
            reorder: Some(0),
            ..Config::default()
        };
        let mut world = World::<2, 1>::new();
        for agent in [1, 0] {
            let submit = Step::Submit {
                agent,
                line: 0,
                op: CoreOp::Load,
            };
            assert!(world.advance(submit, true).is_ok());
        }
        // Agent 1's request went first: in send order only it may be delivered; one overtaking allowed,
        // either may.
        let request = |agent| Step::ToHome {
            agent,
            vc: Vc::Request,
        };
        let deliveries = |config: &Config| {
            let mut steps = Vec::new();
            world.steps(config, &mut steps);
            steps.retain(|s| !matches!(s, Step::Submit { .. }));
            steps
        };
        assert_eq!(deliveries(&config), [request(1)]);
        let one = Config {
            reorder: Some(1),
            ..config
        };
        assert_eq!(deliveries(&one), [request(0), request(1)]);
        assert_eq!(world.drain_delivery(), Some(request(1)));
    }

    #[test]
    fn bounded_reordering_explorations_are_complete_and_clean() {
        for k in [0, 1, 2] {
            let r = explore::<2, 1>(&Config {
                reorder: Some(k),
                ..Config::default()
            });
            assert!(r.complete && r.violation.is_none(), "reorder {k}: {r:?}");
            assert!(r.states > 1_000, "reorder {k}: {r:?}");
        }
    }

    #[test]
    fn a_snoop_passing_its_go_needs_one_overtaking() {
        // The phase bit exists for a snoop that overtakes the GO before it; in send order that never
        // happens, so the planted bug survives a search without reordering and is caught with one.
        let with = |reorder| {
            let mut world = World::<2, 1>::new();
            world.agents[0].bug = Some(AgentBug::IgnorePhase);
            explore_from(
                world,
                &Config {
                    reorder: Some(reorder),
                    ..Config::default()
                },
            )
        };
        let in_order = with(0);
        assert!(in_order.complete && in_order.violation.is_none(), "{in_order:?}");
        let reordered = with(1);
        assert_eq!(
            reordered.violation.map(|v| v.kind),
            Some(ViolationKind::SingleWriter)
        );
    }

    /// A symmetry on (`with`) against off (`without`): the same clean, complete result in at least
    /// `factor` times fewer states, none deeper (a representative may be reached sooner than a state it
    /// stands for: evening the phases maps a state to one with fewer GOs behind it).
    fn assert_shrinks<const A: usize, const L: usize>(with: Config, without: Config, factor: f64) {
        let (reduced, all) = (explore::<A, L>(&with), explore::<A, L>(&without));
        assert!(reduced.complete && all.complete);
        assert_eq!((reduced.violation, all.violation), (None, None));
        assert!(reduced.depth <= all.depth);
        let shrunk = all.states as f64 / reduced.states as f64;
        assert!(shrunk >= factor, "{} -> {} states", all.states, reduced.states);
    }

    #[test]
    fn renaming_values_counts_each_state_once_per_naming() {
        // Two values can be named two ways, three values up to six (fewer for the many states that hold
        // only one or two of them).
        for (values, factor) in [(2u8, 1.9), (3, 4.5)] {
            let with = Config {
                values,
                ..Config::default()
            };
            let without = Config {
                value_symmetry: false,
                ..with
            };
            assert_shrinks::<2, 1>(with, without, factor);
        }
    }

    #[test]
    fn renumbering_agents_counts_each_state_once_per_numbering() {
        let without = Config {
            agent_symmetry: false,
            ..Config::default()
        };
        assert_shrinks::<2, 1>(Config::default(), without, 1.9);
    }

    #[test]
    fn renumbering_lines_counts_each_state_once_per_numbering() {
        let without = Config {
            line_symmetry: false,
            ..Config::default()
        };
        assert_shrinks::<1, 2>(Config::default(), without, 1.9);
    }

    #[test]
    fn evening_phases_counts_each_state_once_per_parity() {
        let without = Config {
            phase_symmetry: false,
            ..Config::default()
        };
        assert_shrinks::<2, 1>(Config::default(), without, 3.0);
    }

    #[test]
    fn three_agents_on_a_line_are_exhausted() {
        let r = explore::<3, 1>(&Config::default());
        assert!(r.complete && r.violation.is_none(), "{r:?}");
        assert!(r.states > 50_000, "{r:?}");
    }

    #[test]
    fn planted_bugs_are_found() {
        let config = Config {
            max_states: 3_000_000,
            ..Config::default()
        };
        for bug in [
            HomeBug::SkipLastSharer,
            HomeBug::KeepStaleMemory,
            HomeBug::ForgetWritePull,
        ] {
            let mut world = World::<3, 1>::new();
            world.home.bug = Some(bug);
            let r = explore_from(world, &config);
            assert!(
                r.violation.is_some(),
                "{bug:?} went unnoticed in {} states",
                r.states
            );
        }
        let mut world = World::<2, 1>::new();
        world.agents[0].bug = Some(AgentBug::IgnorePhase);
        let r = explore_from(world, &config);
        assert!(
            r.violation.is_some(),
            "IgnorePhase went unnoticed in {} states",
            r.states
        );
    }
}
