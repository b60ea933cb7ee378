//! A seeded random stress of the coherence protocol over real data links with bit errors.
//!
//! Each caching agent has its own pair of data links to the home ([`BackToBack`], one unit each way per
//! step), whose units cross a wire with random bit errors ([`BitErrors`]): the data links replay what the
//! errors corrupt, so the protocol sees every message once, in order per channel, with the channels
//! interleaving as the link schedules them. Messages travel as [`super::wire`] packets on the request,
//! snoop and response channels. Every agent keeps submitting random operations (loads, shared loads,
//! current reads, stores of unique values, evictions) on random lines.
//!
//! Checked on every operation that completes, for its line: single writer / multiple readers over all
//! agents' states, every copy with permission holding the latest stored value, and the value a read
//! returns being the latest store (or, for a current read, a store no older than the last one the reading
//! agent had seen). Stores are ordered by their completion, which the home's serialisation makes a total
//! order per line. A run also fails if it stops making progress (a deadlock) or an engine refuses a
//! message. A run whose links stop getting packets through (a bit error rate near 1/128, where nearly
//! every unit is hit) stops too, and says so, without counting it as a violation.

use std::format;
use std::string::String;
use std::vec::Vec;

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::fuzz::BackToBack;
use link_dl::{DlConfig, Vc};
use link_phy::time::Instant;

use super::agent::{CachingAgent, CoreOp};
use super::home::HomeAgent;
use super::message::CacheState;
use super::wire::{decode, encode, Envelope, LINE_BYTES};
use crate::endpoint::pair::{BitErrors, TapPoint};

/// Most agents a stress runs.
pub const MAX_AGENTS: usize = 8;
/// Most lines a stress runs.
pub const MAX_LINES: usize = 256;

type Agent = CachingAgent<MAX_LINES, LINE_BYTES, 8>;
type Home = HomeAgent<MAX_LINES, MAX_AGENTS, LINE_BYTES>;

/// The home's endpoint ID; agent `i` is endpoint `i + 1`.
const HOME: u16 = 0;
/// Steps without any operation completing after which the system is taken to be stuck.
const STUCK_STEPS: u64 = 200_000;

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StressConfig {
    /// Caching agents, 1 to [`MAX_AGENTS`].
    pub agents: usize,
    /// Lines, 1 to [`MAX_LINES`].
    pub lines: usize,
    /// Operations to complete in all.
    pub ops: u64,
    /// Seed of the operations and of the bit errors.
    pub seed: u64,
    /// Bit error rate on every wire.
    pub ber: f64,
}

/// What happened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StressReport {
    /// Operations completed.
    pub ops: u64,
    /// Reads completed (loads, shared loads, current reads).
    pub reads: u64,
    /// Stores completed.
    pub writes: u64,
    /// Evictions completed.
    pub evictions: u64,
    /// Operations served from the cache without asking the home.
    pub hits: u64,
    /// Requests the agents sent to the home.
    pub requests: u64,
    /// Snoops the home sent.
    pub snoops: u64,
    /// Copies invalidated by snoops.
    pub invalidations: u64,
    /// Dirty lines written back to memory.
    pub write_backs: u64,
    /// Requests the home parked because their line was busy.
    pub parked: u64,
    /// Invariant violations (must be 0): the first is described in `first_violation`.
    pub violations: u64,
    /// The first violation.
    pub first_violation: Option<String>,
    /// Data-link replays, all links.
    pub replays: u64,
    /// Data-link CRC errors, all links.
    pub crc_errors: u64,
    /// Bits flipped on the wires.
    pub bits_flipped: u64,
    /// Steps (unit times) run.
    pub steps: u64,
    /// Whether every operation completed and the system came back to rest.
    pub complete: bool,
    /// Why the run stopped short when its links, not the protocol, stopped it: no operation completed
    /// for a long time while the links still held packets they had sent and not had acknowledged.
    pub links_stalled: Option<String>,
}

/// The value a store writes: unique per store.
fn stored_value(store: u64) -> [u8; LINE_BYTES] {
    let mut v = [0u8; LINE_BYTES];
    for (i, chunk) in v.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&(store ^ (i as u64) << 56).to_le_bytes());
    }
    v
}

/// Which store wrote `value` (0: the initial memory, all zero).
fn store_of(value: &[u8; LINE_BYTES]) -> Option<u64> {
    if value.iter().all(|&b| b == 0) {
        return Some(0);
    }
    let store = u64::from_le_bytes(value[..8].try_into().ok()?);
    (stored_value(store) == *value).then_some(store)
}

struct Checker {
    /// Per line: the stores in completion order (store numbers; 0 first, the initial value).
    order: Vec<Vec<u64>>,
    /// Per agent and line: the position in `order` of the newest value the agent has seen.
    seen: Vec<Vec<usize>>,
    report: StressReport,
}

impl Checker {
    fn violation(&mut self, what: String) {
        self.report.violations += 1;
        self.report.first_violation.get_or_insert(what);
    }

    fn position(&self, line: usize, value: &[u8; LINE_BYTES]) -> Option<usize> {
        let store = store_of(value)?;
        self.order[line].iter().rposition(|&s| s == store)
    }

    /// Single writer / multiple readers, and every copy with permission holding the latest value.
    fn check_line(&mut self, agents: &[Agent], line: usize) {
        let (mut writers, mut readers) = (0, 0);
        let latest = self.order[line].len() - 1;
        for (i, agent) in agents.iter().enumerate() {
            if agent.is_evicting(line as u32) {
                continue;
            }
            let state = agent.state(line as u32).unwrap_or(CacheState::Invalid);
            match state {
                CacheState::Invalid => continue,
                CacheState::Shared => readers += 1,
                CacheState::Exclusive | CacheState::Modified => writers += 1,
            }
            let held = agent.data(line as u32).map(|d| self.position(line, d));
            if held != Some(Some(latest)) {
                let value = agent.data(line as u32).and_then(store_of);
                self.violation(format!(
                    "agent {i} holds line {line} {state:?} with the value of store {value:?} (position \
                     {held:?}); the latest is store {} (position {latest})",
                    self.order[line][latest]
                ));
            }
        }
        if writers > 1 || (writers == 1 && readers > 0) {
            self.violation(format!(
                "line {line}: {writers} writers and {readers} readers at once"
            ));
        }
    }
}

/// Run the stress.
///
/// # Panics
///
/// Only on an invalid configuration: `agents` not 1 to [`MAX_AGENTS`], or `lines` not 1 to [`MAX_LINES`]
/// (`linkctl coherence` refuses both by name first).
pub fn run(config: &StressConfig) -> StressReport {
    run_with(config, |_, _| {})
}

/// [`run`], with every unit put on a wire handed to `tap` as its sender sent it and as its receiver took
/// it, after the wire's bit errors ([`TapPoint`]): the agent's index (link `i` joins agent `i` to the
/// home), whether the agent sent it (or the home), and the time. Every link steps at the same times, one
/// unit time at a time.
pub fn run_tapped(
    config: &StressConfig,
    tap: impl FnMut(usize, bool, Instant, &[u8; FLIT_LEN], TapPoint),
) -> StressReport {
    run_inner(config, |_, _| {}, tap)
}

/// [`run`] with the home and agents prepared by `prepare` (tests plant bugs in them).
fn run_with(config: &StressConfig, prepare: impl FnOnce(&mut Home, &mut [Agent])) -> StressReport {
    run_inner(config, prepare, |_, _, _, _, _| {})
}

fn run_inner(
    config: &StressConfig,
    prepare: impl FnOnce(&mut Home, &mut [Agent]),
    mut tap: impl FnMut(usize, bool, Instant, &[u8; FLIT_LEN], TapPoint),
) -> StressReport {
    assert!((1..=MAX_AGENTS).contains(&config.agents) && (1..=MAX_LINES).contains(&config.lines));
    let n = config.agents;
    let mut agents: Vec<Agent> = (0..n).map(|_| Agent::new()).collect();
    let mut home = Home::new();
    prepare(&mut home, &mut agents);
    // The links come up on clean wires, side by side so that their units are traced in time order (as
    // sent and received alike).
    let mut links: Vec<BackToBack> = (0..n)
        .map(|_| BackToBack::initialising(DlConfig::default()))
        .collect();
    let up = BackToBack::bring_up_together(&mut links, |i, now, unit, from_agent| {
        tap(i, from_agent, now, unit, TapPoint::Sent);
        tap(i, from_agent, now, unit, TapPoint::Received);
    });
    if !up {
        return StressReport {
            violations: 1,
            first_violation: Some("the data links did not come up".into()),
            ..StressReport::default()
        };
    }
    let mut wires: Vec<BitErrors> = (0..n)
        .map(|i| BitErrors::new(config.ber, config.seed.wrapping_mul(31).wrapping_add(i as u64)))
        .collect();
    let mut checker = Checker {
        order: (0..config.lines).map(|_| Vec::from([0])).collect(),
        seen: (0..n).map(|_| std::vec![0; config.lines]).collect(),
        report: StressReport::default(),
    };
    let mut rng = crate::xorshift::Xorshift::seeded(config.seed);
    let mut next = move || rng.next_u64();
    let (mut submitted, mut stores) = (0u64, 0u64);
    // Steps since an operation last completed, and the packets the links delivered in them.
    let (mut idle_steps, mut delivered) = (0u64, 0u64);
    loop {
        // New operations (a hit completes at once).
        for i in 0..n {
            let agent = &mut agents[i];
            if submitted < config.ops && agent.can_submit() {
                let line = (next() % config.lines as u64) as u32;
                let op = match next() % 20 {
                    0..=6 => CoreOp::Load,
                    7..=8 => CoreOp::LoadShared,
                    9 => CoreOp::ReadCurrent,
                    10..=16 => {
                        stores += 1;
                        CoreOp::Store(stored_value(stores))
                    }
                    _ => CoreOp::Evict,
                };
                if agent.submit(line, op).is_ok() {
                    submitted += 1;
                }
            }
            collect(&mut checker, &mut agents, i);
        }
        // Messages onto the links, as far as credit allows.
        for (i, (agent, link)) in agents.iter_mut().zip(links.iter_mut()).enumerate() {
            let id = i as u16 + 1;
            for vc in [Vc::Request, Vc::Response] {
                while let Some(msg) = agent.peek_transmit(vc) {
                    let envelope = Envelope {
                        source: id,
                        dest: HOME,
                        message: *msg,
                    };
                    if !send(&mut link.a, &envelope, &mut checker) {
                        break;
                    }
                    agent.pop_transmit(vc);
                }
            }
            for vc in [Vc::Snoop, Vc::Response] {
                while let Some(msg) = home.peek_transmit(i, vc) {
                    let envelope = Envelope {
                        source: HOME,
                        dest: id,
                        message: *msg,
                    };
                    if !send(&mut link.b, &envelope, &mut checker) {
                        break;
                    }
                    home.pop_transmit(i, vc);
                }
            }
        }
        // One unit time on every link; what arrives goes to the engines.
        let mut progress = false;
        for (i, (link, wire)) in links.iter_mut().zip(wires.iter_mut()).enumerate() {
            let now = link.now;
            link.step_each(|unit, from_agent| {
                tap(i, from_agent, now, unit, TapPoint::Sent);
                wire.apply(unit);
                tap(i, from_agent, now, unit, TapPoint::Received);
            });
            while let Some(p) = link.b.recv() {
                delivered += 1;
                match decode::<LINE_BYTES>(p.vc, p.tl, &p.payload) {
                    Ok(e) if e.source == i as u16 + 1 && e.dest == HOME => {
                        if let Err(err) = home.receive(i, e.message) {
                            checker
                                .violation(format!("the home refused {:?} from agent {i}: {err}", e.message));
                        }
                    }
                    other => checker.violation(format!("bad packet to the home from agent {i}: {other:?}")),
                }
            }
            while let Some(p) = link.a.recv() {
                delivered += 1;
                match decode::<LINE_BYTES>(p.vc, p.tl, &p.payload) {
                    Ok(e) if e.source == HOME && e.dest == i as u16 + 1 => {
                        if let Err(err) = agents[i].receive(e.message) {
                            checker.violation(format!("agent {i} refused {:?}: {err}", e.message));
                        }
                    }
                    other => checker.violation(format!("bad packet to agent {i}: {other:?}")),
                }
                // Completions, checked in the order they happen.
                progress |= collect(&mut checker, &mut agents, i);
            }
            progress |= collect(&mut checker, &mut agents, i);
        }
        checker.report.steps += 1;
        if progress {
            (idle_steps, delivered) = (0, 0);
        } else {
            idle_steps += 1;
        }
        let at_rest = submitted >= config.ops && home.is_idle() && agents.iter().all(Agent::is_idle);
        if at_rest {
            checker.report.complete = true;
            break;
        }
        if idle_steps > STUCK_STEPS {
            // A protocol that deadlocked leaves its links quiet; links still holding packets they sent
            // this long ago are failing to get them through.
            let unacknowledged: usize = links
                .iter()
                .map(|l| l.a.unacknowledged() + l.b.unacknowledged())
                .sum();
            let (ops, stuck) = (checker.report.ops, STUCK_STEPS);
            if unacknowledged > 0 {
                checker.report.links_stalled = Some(format!(
                    "no operation completed in {stuck} steps, in which the links delivered {delivered} \
                     packets and still hold {unacknowledged} unacknowledged: the bit errors leave too few \
                     units whole ({ops} of {submitted} operations completed)"
                ));
            } else {
                checker.violation(format!(
                    "no operation completed in {stuck} steps: deadlock ({ops} of {submitted} submitted)"
                ));
            }
            break;
        }
        if checker.report.violations > 0 {
            break;
        }
    }
    for line in 0..config.lines {
        checker.check_line(&agents, line);
    }
    let mut report = checker.report;
    let h = home.counters();
    report.snoops = h.snoops;
    report.write_backs = h.write_backs;
    report.parked = h.parked;
    for agent in &agents {
        let c = agent.counters();
        report.hits += c.hits;
        report.requests += c.requests;
        report.invalidations += c.invalidations;
    }
    for (link, wire) in links.iter().zip(&wires) {
        for dl in [link.a.counters(), link.b.counters()] {
            report.replays += dl.replays;
            report.crc_errors += dl.crc_errors;
        }
        report.bits_flipped += wire.bits_flipped;
    }
    report
}

/// Send a message on a data link; false if it has no credit or replay room yet.
fn send(link: &mut link_dl::DataLink, envelope: &Envelope<LINE_BYTES>, checker: &mut Checker) -> bool {
    let packet = match encode(envelope) {
        Ok(p) => p,
        Err(e) => {
            checker.violation(format!("cannot encode {:?}: {e}", envelope.message));
            return false;
        }
    };
    let payload: &[Flit] = packet.payload();
    link.can_send(packet.vc(), payload.len()) && link.send(packet.vc(), packet.tl(), payload).is_ok()
}

/// Check the operations agent `agent` finished, in order; then the lines they touched (one message can
/// finish several operations, so the agent's copies are checked once all of them are accounted for).
fn collect(checker: &mut Checker, agents: &mut [Agent], agent: usize) -> bool {
    let mut lines: heapless::Vec<usize, 8> = heapless::Vec::new();
    while let Some(c) = agents[agent].poll_completion() {
        let line = c.line as usize;
        complete(checker, agent, c);
        if !lines.contains(&line) {
            let _ = lines.push(line);
        }
    }
    for &line in &lines {
        checker.check_line(agents, line);
    }
    !lines.is_empty()
}

fn complete(checker: &mut Checker, agent: usize, c: super::agent::Completion<LINE_BYTES>) {
    let line = c.line as usize;
    checker.report.ops += 1;
    match c.op {
        CoreOp::Store(value) => {
            checker.report.writes += 1;
            if let Some(store) = store_of(&value) {
                checker.order[line].push(store);
            }
            checker.seen[agent][line] = checker.order[line].len() - 1;
        }
        CoreOp::Evict => checker.report.evictions += 1,
        CoreOp::Load | CoreOp::LoadShared | CoreOp::ReadCurrent => {
            checker.report.reads += 1;
            let latest = checker.order[line].len() - 1;
            let got = c.data.as_ref().and_then(|d| checker.position(line, d));
            let fresh_enough = match (c.op, got) {
                // A current read returns a value the line held at some moment after it was asked for:
                // no older than what this agent had already seen.
                (CoreOp::ReadCurrent, Some(p)) => p >= checker.seen[agent][line],
                (_, Some(p)) => p == latest,
                (_, None) => false,
            };
            if fresh_enough {
                if let Some(p) = got {
                    checker.seen[agent][line] = checker.seen[agent][line].max(p);
                }
            } else {
                checker.violation(format!(
                    "agent {agent} read line {line} ({:?}) and got store position {got:?}; latest is {latest}",
                    c.op
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coherence::agent::AgentBug;
    use crate::coherence::home::HomeBug;

    fn config(agents: usize, lines: usize, ber: f64) -> StressConfig {
        StressConfig {
            agents,
            lines,
            ops: 4_000,
            seed: 7,
            ber,
        }
    }

    #[test]
    fn the_protocol_keeps_its_invariants_over_noisy_links() {
        for (agents, lines, ber) in [(2, 1, 0.0), (4, 4, 1e-5), (8, 16, 1e-5)] {
            let r = run(&config(agents, lines, ber));
            assert!(r.complete && r.violations == 0, "{r:?}");
            assert_eq!(r.ops, 4_000);
            assert!(r.snoops > 0 && r.invalidations > 0 && r.write_backs > 0, "{r:?}");
            if ber > 0.0 {
                assert!(r.replays > 0, "the bit errors made the links replay: {r:?}");
            }
        }
    }

    #[test]
    fn every_seed_stores_and_evicts() {
        // This seed is the constant the stress mixes into seeds: it would make the generator's state 0.
        let r = run(&StressConfig {
            seed: 0x9E37_79B9_7F4A_7C15,
            ..config(4, 64, 0.0)
        });
        assert!(r.complete && r.violations == 0, "{r:?}");
        assert!(r.writes > 0 && r.evictions > 0 && r.reads < r.ops, "{r:?}");
    }

    #[test]
    fn links_that_deliver_nothing_are_told_from_a_deadlock() {
        // Just below 1/128 nearly every unit has a bit flipped: hardly a packet gets through whole.
        let r = run(&config(4, 64, BitErrors::MAX_BER * 0.999));
        assert!(!r.complete && r.violations == 0, "{r:?}");
        let why = r.links_stalled.unwrap();
        assert!(
            why.contains("unacknowledged") && !why.contains("deadlock"),
            "{why}"
        );
    }

    #[test]
    fn planted_bugs_are_caught() {
        for bug in [
            HomeBug::SkipLastSharer,
            HomeBug::KeepStaleMemory,
            HomeBug::ForgetWritePull,
        ] {
            let r = run_with(&config(4, 2, 0.0), |home, _| home.bug = Some(bug));
            assert!(r.violations > 0, "{bug:?} went unnoticed: {r:?}");
        }
        // An eviction never answered stops the protocol, and not the links: a deadlock, also over noise.
        for ber in [0.0, 1e-5] {
            let r = run_with(&config(4, 2, ber), |home, _| {
                home.bug = Some(HomeBug::ForgetWritePull)
            });
            let first = r.first_violation.as_deref().unwrap_or_default();
            assert!(first.contains("deadlock") && r.links_stalled.is_none(), "{r:?}");
        }
        let r = run_with(&config(4, 2, 0.0), |_, agents| {
            agents
                .iter_mut()
                .for_each(|a| a.bug = Some(AgentBug::IgnorePhase))
        });
        assert!(r.violations > 0, "IgnorePhase went unnoticed: {r:?}");
    }
}
