//! The home agent: it owns the memory of `LINES` lines and keeps, per line, a directory of which of its
//! `AGENTS` caching agents hold it.
//!
//! It is sans-IO. Messages from agent `a` come in through [`HomeAgent::receive`]; messages for agent `a`
//! wait, per channel, until the driver takes them ([`HomeAgent::peek_transmit`], then
//! [`HomeAgent::pop_transmit`] once the link accepted them).
//!
//! The home is the serialization point. It handles one transaction per line at a time: a request starts
//! one, snoops go to the agents that must give up or share the line, and when every snoop response is in
//! (and, for a dirty eviction, the data) the GO goes to the requester and the line is free. Requests for a
//! busy line are parked (one per agent per line, which is all a correct agent can have) and served in the
//! order they arrived when it frees up (a policy that names no agent, so agents are interchangeable). So the home consumes everything it receives, on every channel, at once: its
//! request channel never backs up into the snoop or response channels.

use heapless::Vec;
use link_dl::Vc;

use super::agent::{pop_front, unexpected};
use super::message::{CacheState, LeftIn, Message, RequestKind, SnoopKind};
use crate::error::TlError;

/// Which agents hold a line, as the home knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Directory {
    /// No cache holds it: memory is current.
    Invalid,
    /// The agents in the bitmap (bit `a` for agent `a`) may hold it Shared: memory is current.
    Shared(u64),
    /// One agent holds it Exclusive or Modified (the home cannot tell which: E becomes M silently).
    Owned(u8),
}

impl Directory {
    /// Whether `agent` is listed (never an agent from 64 up, which a sharer bitmap cannot name).
    pub const fn holds(self, agent: usize) -> bool {
        match self {
            Directory::Invalid => false,
            Directory::Shared(s) => agent < 64 && s >> agent & 1 == 1,
            Directory::Owned(o) => o as usize == agent,
        }
    }

    /// The directory without `agent` (unchanged for an agent from 64 up, which is in no entry).
    pub const fn without(self, agent: usize) -> Directory {
        match self {
            Directory::Owned(o) if o as usize == agent => Directory::Invalid,
            Directory::Shared(_) if agent >= 64 => self,
            Directory::Shared(s) if s & !(1 << agent) == 0 => Directory::Invalid,
            Directory::Shared(s) => Directory::Shared(s & !(1 << agent)),
            d => d,
        }
    }

    /// The directory with `agent` added as a sharer (an owner that is not `agent` stays listed too).
    const fn with_sharer(self, agent: usize) -> Directory {
        match self {
            Directory::Invalid => Directory::Shared(1 << agent),
            Directory::Shared(s) => Directory::Shared(s | 1 << agent),
            Directory::Owned(o) => Directory::Shared(1 << o | 1 << agent),
        }
    }
}

/// Counters a person debugging coherence looks at first. They only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HomeCounters {
    /// Requests received.
    pub requests: u64,
    /// Requests that found their line busy and were parked.
    pub parked: u64,
    /// Snoops sent.
    pub snoops: u64,
    /// GOs sent (with or without data, GO_WritePull included).
    pub gos: u64,
    /// Dirty data written to memory (write-backs and forwarding snoop responses).
    pub write_backs: u64,
    /// Messages refused because they broke the protocol.
    pub protocol_errors: u64,
}

/// The line's transaction in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Transaction {
    requester: u8,
    kind: RequestKind,
    /// Agents whose snoop response is still to come (bitmap).
    awaiting: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Line<const B: usize, const AGENTS: usize> {
    dir: Directory,
    memory: [u8; B],
    /// Parity of the GOs sent for this line, bit `a` for agent `a`.
    phase: u64,
    busy: Option<Transaction>,
    /// Requests parked while the line is busy, by agent, each with its place in the queue (0: served
    /// next).
    parked: [Option<(u8, RequestKind)>; AGENTS],
}

/// Bugs the model checker's own tests plant, to show that it catches them.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum HomeBug {
    /// RdOwn leaves the highest-numbered other sharer out of its invalidations.
    SkipLastSharer,
    /// Forwarded dirty data is not written to memory.
    KeepStaleMemory,
    /// A dirty eviction from the owner is never answered.
    ForgetWritePull,
}

/// A home agent for `LINES` lines of `B` bytes, serving `AGENTS` caching agents (at most 64).
///
/// Two homes compare equal, and hash equal, when their protocol state is the same: counters are not part
/// of it.
#[derive(Clone, Debug)]
pub struct HomeAgent<const LINES: usize, const AGENTS: usize, const B: usize = 64> {
    lines: [Line<B, AGENTS>; LINES],
    /// Snoop channel to each agent, oldest first: at most one per line (the line stays busy until the
    /// agent answers).
    snoops: [Vec<Message<B>, LINES>; AGENTS],
    /// Response channel to each agent, oldest first: at most one GO per line (an agent does not ask again
    /// for a line before its GO has arrived, and the home refuses a request that would).
    responses: [Vec<Message<B>, LINES>; AGENTS],
    counters: HomeCounters,
    #[cfg(test)]
    pub(crate) bug: Option<HomeBug>,
}

impl<const LINES: usize, const AGENTS: usize, const B: usize> PartialEq for HomeAgent<LINES, AGENTS, B> {
    fn eq(&self, other: &Self) -> bool {
        self.lines == other.lines && self.snoops == other.snoops && self.responses == other.responses
    }
}

impl<const LINES: usize, const AGENTS: usize, const B: usize> Eq for HomeAgent<LINES, AGENTS, B> {}

impl<const LINES: usize, const AGENTS: usize, const B: usize> core::hash::Hash
    for HomeAgent<LINES, AGENTS, B>
{
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.lines.hash(h);
        self.snoops.hash(h);
        self.responses.hash(h);
    }
}

impl<const LINES: usize, const AGENTS: usize, const B: usize> Default for HomeAgent<LINES, AGENTS, B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const LINES: usize, const AGENTS: usize, const B: usize> HomeAgent<LINES, AGENTS, B> {
    const VALID: () = assert!(
        LINES > 0 && LINES <= u32::MAX as usize && AGENTS > 0 && AGENTS <= 64,
        "a home needs lines and 1 to 64 agents"
    );

    /// A home whose memory is all zeros and whose lines are in no cache.
    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        HomeAgent {
            lines: [Line {
                dir: Directory::Invalid,
                memory: [0; B],
                phase: 0,
                busy: None,
                parked: [None; AGENTS],
            }; LINES],
            snoops: core::array::from_fn(|_| Vec::new()),
            responses: core::array::from_fn(|_| Vec::new()),
            counters: HomeCounters::default(),
            #[cfg(test)]
            bug: None,
        }
    }

    /// Counters.
    pub fn counters(&self) -> &HomeCounters {
        &self.counters
    }

    /// The directory entry of `line`.
    pub fn directory(&self, line: u32) -> Option<Directory> {
        self.lines.get(line as usize).map(|l| l.dir)
    }

    /// The memory contents of `line` (stale while an agent holds it Modified).
    pub fn memory(&self, line: u32) -> Option<&[u8; B]> {
        self.lines.get(line as usize).map(|l| &l.memory)
    }

    /// Whether `line` has a transaction in progress.
    pub fn is_busy(&self, line: u32) -> bool {
        self.lines.get(line as usize).is_some_and(|l| l.busy.is_some())
    }

    /// Whether nothing is under way: no transaction, no parked request, no message waiting to go.
    pub fn is_idle(&self) -> bool {
        self.lines
            .iter()
            .all(|l| l.busy.is_none() && l.parked.iter().all(Option::is_none))
            && self
                .snoops
                .iter()
                .chain(self.responses.iter())
                .all(|q| q.is_empty())
    }

    /// Whether any message waits to go to `agent`.
    pub fn has_output(&self, agent: usize) -> bool {
        self.snoops.get(agent).is_some_and(|q| !q.is_empty())
            || self.responses.get(agent).is_some_and(|q| !q.is_empty())
    }

    /// The oldest message waiting to go to `agent` on `vc` (snoops and responses only).
    pub fn peek_transmit(&self, agent: usize, vc: Vc) -> Option<&Message<B>> {
        match vc {
            Vc::Snoop => self.snoops.get(agent)?.first(),
            Vc::Response => self.responses.get(agent)?.first(),
            Vc::Request | Vc::Posted => None,
        }
    }

    /// Every data byte it holds (memory, messages waiting), in a fixed order: the model checker renames
    /// stored values through it.
    #[cfg(feature = "std")]
    pub(crate) fn visit_data(&mut self, f: &mut impl FnMut(&mut u8)) {
        for line in &mut self.lines {
            line.memory.iter_mut().for_each(&mut *f);
        }
        for queue in self.snoops.iter_mut().chain(self.responses.iter_mut()) {
            for msg in queue.iter_mut() {
                msg.visit_data(f);
            }
        }
    }

    /// Rename agent `a` to `to[a]` everywhere (a permutation; the model checker's agent symmetry: the
    /// home treats agents alike, so renaming them maps every run to an equivalent one).
    #[cfg(feature = "std")]
    pub(crate) fn rename_agents(&mut self, to: &[usize; AGENTS]) {
        let rename = |a: usize| to.get(a).copied().unwrap_or(a);
        let bits = |mask: u64| {
            (0..AGENTS)
                .filter(|&a| mask >> a & 1 == 1)
                .fold(0u64, |acc, a| acc | 1 << rename(a))
        };
        for line in &mut self.lines {
            line.dir = match line.dir {
                Directory::Invalid => Directory::Invalid,
                Directory::Shared(mask) => Directory::Shared(bits(mask)),
                Directory::Owned(a) => Directory::Owned(rename(usize::from(a)) as u8),
            };
            line.phase = bits(line.phase);
            if let Some(t) = &mut line.busy {
                t.requester = rename(usize::from(t.requester)) as u8;
                t.awaiting = bits(t.awaiting);
            }
            line.parked = super::permuted(line.parked, to);
        }
        let (snoops, responses) = (self.snoops.clone(), self.responses.clone());
        for (a, (s, r)) in snoops.into_iter().zip(responses).enumerate() {
            self.snoops[rename(a)] = s;
            self.responses[rename(a)] = r;
        }
    }

    /// Flip the parity of the GOs sent to `agent` for `line`, and the phase of that line's snoops on their
    /// way to `agent` (the model checker's phase symmetry: the engines only compare phases with each
    /// other, so flipping both ends of one agent's and line's maps every run to an equivalent one).
    #[cfg(feature = "std")]
    pub(crate) fn flip_phase(&mut self, agent: usize, line: usize) {
        if let Some(l) = self.lines.get_mut(line) {
            l.phase ^= 1 << agent;
        }
        for msg in self.snoops.get_mut(agent).into_iter().flatten() {
            if let Message::Snoop { line: n, phase, .. } = msg {
                if *n as usize == line {
                    *phase = !*phase;
                }
            }
        }
    }

    /// Rename line `n` to `to[n]` everywhere (a permutation; the model checker's line symmetry: the home
    /// treats lines alike).
    #[cfg(feature = "std")]
    pub(crate) fn rename_lines(&mut self, to: &[usize; LINES]) {
        let rename = |n: u32| to.get(n as usize).map_or(n, |&m| m as u32);
        self.lines = super::permuted(self.lines, to);
        for queue in self.snoops.iter_mut().chain(self.responses.iter_mut()) {
            for msg in queue.iter_mut() {
                msg.rename_line(rename);
            }
        }
    }

    /// Feed what the home knows of `line`, whichever agents it concerns, stored values aside, to `h`.
    #[cfg(feature = "std")]
    pub(crate) fn hash_line_view<H: core::hash::Hasher>(&self, line: usize, h: &mut H) {
        use core::hash::Hash;
        if let Some(l) = self.lines.get(line) {
            let holders = match l.dir {
                Directory::Invalid => 0,
                Directory::Shared(mask) => 1 + mask.count_ones(),
                Directory::Owned(_) => 100,
            };
            (holders, l.busy.map(|t| (t.kind, t.awaiting.count_ones()))).hash(h);
            l.parked.iter().flatten().count().hash(h);
        }
    }

    /// Feed what the home knows of `agent` (directory, phases, transaction, parked request, messages
    /// waiting for it) to `h`: agents whose views differ are told apart by it.
    #[cfg(feature = "std")]
    pub(crate) fn hash_agent_view<H: core::hash::Hasher>(&self, agent: usize, h: &mut H) {
        use core::hash::Hash;
        for line in &self.lines {
            line.dir.holds(agent).hash(h);
            (line.dir == Directory::Owned(agent as u8)).hash(h);
            (line.phase >> agent & 1).hash(h);
            line.busy
                .map(|t| (usize::from(t.requester) == agent, t.kind, t.awaiting >> agent & 1))
                .hash(h);
            line.parked.get(agent).hash(h);
        }
        self.snoops.get(agent).hash(h);
        self.responses.get(agent).hash(h);
    }

    /// How many messages wait to go to `agent` on `vc`.
    pub fn transmit_len(&self, agent: usize, vc: Vc) -> usize {
        match vc {
            Vc::Snoop => self.snoops.get(agent).map_or(0, |q| q.len()),
            Vc::Response => self.responses.get(agent).map_or(0, |q| q.len()),
            Vc::Request | Vc::Posted => 0,
        }
    }

    /// Take the oldest message waiting to go to `agent` on `vc`, once the link has accepted it.
    pub fn pop_transmit(&mut self, agent: usize, vc: Vc) -> Option<Message<B>> {
        match vc {
            Vc::Snoop => pop_front(self.snoops.get_mut(agent)?),
            Vc::Response => pop_front(self.responses.get_mut(agent)?),
            Vc::Request | Vc::Posted => None,
        }
    }

    /// A message from agent `agent`. One that breaks the protocol is refused with
    /// [`TlError::UnexpectedCoherence`] and changes nothing.
    pub fn receive(&mut self, agent: usize, msg: Message<B>) -> Result<(), TlError> {
        if agent >= AGENTS {
            return Err(TlError::AgentOutOfRange { agent });
        }
        let index = msg.line() as usize;
        let Some(line) = self.lines.get_mut(index) else {
            return Err(TlError::LineOutOfRange { line: msg.line() });
        };
        let result = match msg {
            Message::Request { kind, .. } => {
                self.counters.requests += 1;
                // The requester of a dirty eviction is done with it once GO_WritePull arrives, so its next
                // request may overtake the write-back data: that one is parked like any other.
                let again = line
                    .busy
                    .is_some_and(|t| usize::from(t.requester) == agent && t.kind != RequestKind::DirtyEvict)
                    || line.parked.get(agent).is_some_and(Option::is_some)
                    || self
                        .responses
                        .get(agent)
                        .is_some_and(|q| q.iter().any(|m| m.line() == msg.line()));
                if again {
                    // A second request before the GO of the first: a correct agent never sends one.
                    Err(unexpected(&msg))
                } else if line.busy.is_some() {
                    let place = line.parked.iter().flatten().count() as u8;
                    if let Some(slot) = line.parked.get_mut(agent) {
                        *slot = Some((place, kind));
                    }
                    self.counters.parked += 1;
                    Ok(())
                } else {
                    self.start(index, agent, kind);
                    self.serve_parked(index);
                    Ok(())
                }
            }
            Message::SnoopResponse { kind, .. } => self.snooped(index, agent, kind.left_in(), None, &msg),
            Message::SnoopResponseData { kind, data, .. } => {
                self.snooped(index, agent, kind.left_in(), Some(data), &msg)
            }
            Message::WriteBack { data, .. } => {
                let expected = line
                    .busy
                    .is_some_and(|t| usize::from(t.requester) == agent && t.kind == RequestKind::DirtyEvict);
                if expected {
                    line.memory = data;
                    line.dir = line.dir.without(agent);
                    line.busy = None;
                    self.counters.write_backs += 1;
                    self.serve_parked(index);
                    Ok(())
                } else {
                    Err(unexpected(&msg))
                }
            }
            _ => Err(unexpected(&msg)),
        };
        if matches!(result, Err(TlError::UnexpectedCoherence { .. })) {
            self.counters.protocol_errors += 1;
        }
        result
    }

    /// Start agent `x`'s request on the free line `index`.
    fn start(&mut self, index: usize, x: usize, kind: RequestKind) {
        let Some(line) = self.lines.get_mut(index) else {
            return;
        };
        let n = index as u32;
        match kind {
            RequestKind::CleanEvict => {
                line.dir = line.dir.without(x);
                self.go(
                    x,
                    Message::Go {
                        line: n,
                        state: CacheState::Invalid,
                    },
                );
            }
            RequestKind::DirtyEvict if line.dir == Directory::Owned(x as u8) => {
                line.busy = Some(Transaction {
                    requester: x as u8,
                    kind,
                    awaiting: 0,
                });
                #[cfg(test)]
                if self.bug == Some(HomeBug::ForgetWritePull) {
                    return;
                }
                self.go(x, Message::GoWritePull { line: n });
            }
            // A snoop took the line while the eviction was on its way: there is nothing to pull.
            RequestKind::DirtyEvict => {
                line.dir = line.dir.without(x);
                self.go(
                    x,
                    Message::Go {
                        line: n,
                        state: CacheState::Invalid,
                    },
                );
            }
            RequestKind::RdCurr | RequestKind::RdShared | RequestKind::RdAny | RequestKind::RdOwn => {
                let (snoop, targets) = match (kind, line.dir) {
                    (RequestKind::RdOwn, Directory::Shared(s)) => (SnoopKind::SnpInv, s & !(1 << x)),
                    (_, Directory::Owned(o)) if usize::from(o) != x => (snoop_for(kind), 1 << o),
                    _ => (snoop_for(kind), 0),
                };
                #[cfg(test)]
                let targets = match self.bug {
                    Some(HomeBug::SkipLastSharer)
                        if snoop == SnoopKind::SnpInv && targets.count_ones() >= 1 =>
                    {
                        targets & !(1u64 << (63 - targets.leading_zeros()))
                    }
                    _ => targets,
                };
                if targets == 0 {
                    self.finish(index, x, kind);
                    return;
                }
                line.busy = Some(Transaction {
                    requester: x as u8,
                    kind,
                    awaiting: targets,
                });
                let phase = line.phase;
                for y in 0..AGENTS {
                    if targets >> y & 1 == 1 {
                        self.counters.snoops += 1;
                        if let Some(q) = self.snoops.get_mut(y) {
                            // One snoop per line per agent at most: there is room.
                            let _ = q.push(Message::Snoop {
                                line: n,
                                kind: snoop,
                                phase: phase >> y & 1 == 1,
                            });
                        }
                    }
                }
            }
        }
    }

    /// A snoop response from agent `y` for line `index`: `left_in` is what it kept, `data` its dirty data.
    fn snooped(
        &mut self,
        index: usize,
        y: usize,
        left_in: LeftIn,
        data: Option<[u8; B]>,
        msg: &Message<B>,
    ) -> Result<(), TlError> {
        let Some(line) = self.lines.get_mut(index) else {
            return Err(unexpected(msg));
        };
        let Some(mut t) = line.busy.filter(|t| t.awaiting >> y & 1 == 1) else {
            return Err(unexpected(msg));
        };
        // An agent asked to share or give up the line must have done so, or the grant would break
        // single-writer: refuse the response (the line waits, as it would for an agent that never answers).
        let allowed = match snoop_for(t.kind) {
            SnoopKind::SnpInv => left_in == LeftIn::Invalid,
            SnoopKind::SnpData => left_in != LeftIn::Unchanged,
            SnoopKind::SnpCur => true,
        };
        if !allowed {
            return Err(unexpected(msg));
        }
        if let Some(data) = data {
            #[cfg(test)]
            let data = if self.bug == Some(HomeBug::KeepStaleMemory) {
                line.memory
            } else {
                data
            };
            line.memory = data;
            self.counters.write_backs += 1;
        }
        line.dir = match left_in {
            LeftIn::Invalid => line.dir.without(y),
            LeftIn::Shared if line.dir == Directory::Owned(y as u8) => Directory::Shared(1 << y),
            _ => line.dir,
        };
        t.awaiting &= !(1 << y);
        if t.awaiting != 0 {
            line.busy = Some(t);
            return Ok(());
        }
        line.busy = None;
        self.finish(index, usize::from(t.requester), t.kind);
        self.serve_parked(index);
        Ok(())
    }

    /// Grant agent `x`'s read request on line `index`: every snoop it needed has been answered.
    fn finish(&mut self, index: usize, x: usize, kind: RequestKind) {
        let Some(line) = self.lines.get_mut(index) else {
            return;
        };
        let n = index as u32;
        let data = line.memory;
        let msg = match kind {
            RequestKind::RdCurr => Message::GoData {
                line: n,
                state: CacheState::Invalid,
                data,
            },
            RequestKind::RdAny if line.dir.without(x) == Directory::Invalid => {
                line.dir = Directory::Owned(x as u8);
                Message::GoData {
                    line: n,
                    state: CacheState::Exclusive,
                    data,
                }
            }
            RequestKind::RdOwn => {
                let upgrade = matches!(line.dir, Directory::Shared(_)) && line.dir.holds(x);
                line.dir = Directory::Owned(x as u8);
                if upgrade {
                    Message::Go {
                        line: n,
                        state: CacheState::Exclusive,
                    }
                } else {
                    Message::GoData {
                        line: n,
                        state: CacheState::Exclusive,
                        data,
                    }
                }
            }
            _ => {
                line.dir = line.dir.with_sharer(x);
                Message::GoData {
                    line: n,
                    state: CacheState::Shared,
                    data,
                }
            }
        };
        self.go(x, msg);
    }

    /// Queue a GO of any kind for agent `x`, and count it in the line's phase.
    fn go(&mut self, x: usize, msg: Message<B>) {
        if let Some(line) = self.lines.get_mut(msg.line() as usize) {
            line.phase ^= 1 << x;
        }
        self.counters.gos += 1;
        if let Some(q) = self.responses.get_mut(x) {
            // One GO per line per agent at most (`receive` refuses a request that would make two): there
            // is room.
            let _ = q.push(msg);
        }
    }

    /// Start parked requests on line `index`, oldest first, until one keeps the line busy.
    fn serve_parked(&mut self, index: usize) {
        loop {
            let Some(line) = self.lines.get_mut(index) else {
                return;
            };
            if line.busy.is_some() {
                return;
            }
            let Some(x) = line.parked.iter().position(|p| matches!(p, Some((0, _)))) else {
                return;
            };
            let Some((_, kind)) = line.parked[x].take() else {
                return;
            };
            for (place, _) in line.parked.iter_mut().flatten() {
                *place = place.saturating_sub(1);
            }
            self.start(index, x, kind);
        }
    }
}

/// The snoop a read request sends to an owner (RdOwn also invalidates sharers).
const fn snoop_for(kind: RequestKind) -> SnoopKind {
    match kind {
        RequestKind::RdCurr => SnoopKind::SnpCur,
        RequestKind::RdOwn => SnoopKind::SnpInv,
        _ => SnoopKind::SnpData,
    }
}

#[cfg(test)]
mod tests {
    use super::Directory;

    /// Agents are numbered below 64 (one bit each in a sharer bitmap): an agent beyond is in no entry
    /// and taking it out changes nothing. Shifting by it overflowed: a panic in a debug build, and in a
    /// release build agent 64 read as agent 0.
    #[test]
    fn an_agent_beyond_the_bitmap_is_in_no_directory_entry() {
        for dir in [
            Directory::Invalid,
            Directory::Shared(1),
            Directory::Shared(u64::MAX),
            Directory::Owned(0),
        ] {
            for agent in [64, 65, 128, usize::MAX] {
                assert!(!dir.holds(agent), "{dir:?} holds {agent}");
                assert_eq!(dir.without(agent), dir, "{dir:?} without {agent}");
            }
        }
        assert!(Directory::Shared(1 << 63).holds(63));
        assert_eq!(Directory::Shared(1 << 63 | 1).without(63), Directory::Shared(1));
    }
}
