//! The caching agent: a cache of `LINES` lines kept coherent with one home agent.
//!
//! It is sans-IO. The core submits operations ([`CachingAgent::submit`]); messages from the home come in
//! through [`CachingAgent::receive`]; messages for the home wait, per channel, until the driver takes them
//! ([`CachingAgent::peek_transmit`], then [`CachingAgent::pop_transmit`] once the link accepted them);
//! finished operations come out of [`CachingAgent::poll_completion`].
//!
//! Operations on one line complete in the order submitted; operations on different lines are independent
//! (a miss on one line does not hold up hits on another). Each line has at most one request in flight.
//!
//! Everything the home sends is always consumed: a snoop is answered at once, or, when it overtook the GO
//! it follows (its phase differs from the parity of GOs received for the line), held in the line until
//! that GO arrives. So the snoop and response channels always drain, whatever the core does.

use heapless::Vec;
use link_dl::Vc;

use super::message::{CacheState, ForwardKind, Message, RequestKind, SnoopKind, SnoopResponseKind};
use crate::error::TlError;

/// What the core asks of the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CoreOp<const B: usize> {
    /// Read the line, caching it (RdAny on a miss: Exclusive if nobody else holds it).
    Load,
    /// Read the line, caching it Shared (RdShared on a miss).
    LoadShared,
    /// Read the line's current value without caching it (RdCurr on a miss).
    ReadCurrent,
    /// Write the whole line (RdOwn unless the line is Exclusive or Modified).
    Store([u8; B]),
    /// Drop the line from the cache (CleanEvict or DirtyEvict; nothing if it is not cached).
    Evict,
}

impl<const B: usize> CoreOp<B> {
    /// Whether it reads the line.
    pub const fn is_read(&self) -> bool {
        matches!(self, CoreOp::Load | CoreOp::LoadShared | CoreOp::ReadCurrent)
    }

    /// The bytes a store writes, in order.
    #[cfg(feature = "std")]
    pub(crate) fn visit_data(&mut self, f: &mut impl FnMut(&mut u8)) {
        if let CoreOp::Store(data) = self {
            data.iter_mut().for_each(f);
        }
    }
}

/// A finished core operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Completion<const B: usize> {
    /// The line.
    pub line: u32,
    /// The operation.
    pub op: CoreOp<B>,
    /// What a read returned (`None` for stores and evictions).
    pub data: Option<[u8; B]>,
    /// Whether it finished without asking the home.
    pub hit: bool,
}

/// Counters a person debugging coherence looks at first. They only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AgentCounters {
    /// Reads finished (Load, LoadShared, ReadCurrent).
    pub reads: u64,
    /// Stores finished.
    pub writes: u64,
    /// Evictions finished.
    pub evicts: u64,
    /// Operations finished without a request.
    pub hits: u64,
    /// Requests sent to the home.
    pub requests: u64,
    /// Snoops answered.
    pub snoops: u64,
    /// Snoops that took away a valid copy.
    pub invalidations: u64,
    /// Dirty data sent home (write-backs and forwarding snoop responses).
    pub write_backs: u64,
    /// Snoops that arrived ahead of the GO they follow and waited for it.
    pub deferred_snoops: u64,
    /// Messages refused because they broke the protocol.
    pub protocol_errors: u64,
}

/// A line's request in flight, and the core operation it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Pending<const B: usize> {
    kind: RequestKind,
    op: CoreOp<B>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Line<const B: usize> {
    /// The stable state. While an eviction is in flight the line keeps its state and data, so that it can
    /// still answer a snoop that crosses the eviction.
    state: CacheState,
    data: [u8; B],
    pending: Option<Pending<B>>,
    /// Parity of the GOs received for this line.
    phase: bool,
    /// A snoop that overtook the GO it follows.
    deferred: Option<SnoopKind>,
}

impl<const B: usize> Line<B> {
    /// Enter `state`. An Invalid line forgets its data: nothing reads it (a fill or a store replaces it
    /// before the line is valid again), and a stale copy would only make states that differ in junk.
    fn set_state(&mut self, state: CacheState) {
        self.state = state;
        if state == CacheState::Invalid {
            self.data = [0; B];
        }
    }
}

/// Bugs the model checker's own tests plant, to show that it catches them.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum AgentBug {
    /// Answer a snoop at once even when it overtook the GO it follows.
    IgnorePhase,
}

/// A caching agent with `LINES` lines of `B` bytes and room for `OPS` core operations (queued, in flight
/// or finished but not yet collected).
///
/// Two agents compare equal, and hash equal, when their protocol state is the same: counters are not
/// part of it.
#[derive(Clone, Debug)]
pub struct CachingAgent<const LINES: usize, const B: usize = 64, const OPS: usize = 8> {
    lines: [Line<B>; LINES],
    /// Operations not yet started, oldest first.
    waiting: Vec<(u32, CoreOp<B>), OPS>,
    /// Operations whose request is in flight.
    in_flight: usize,
    done: Vec<Completion<B>, OPS>,
    /// Request channel, oldest first: at most one per line.
    requests: Vec<Message<B>, LINES>,
    /// Response channel, oldest first: at most one per line (a snoop response or a write-back), so
    /// `LINES` slots never run out under a conforming home, however long the link holds the channel up.
    /// What a line queues belongs to a transaction that the home ends only once it has received it (every
    /// snoop response is awaited; a dirty eviction's transaction ends with its write-back), and the home
    /// sends nothing more for the line to this agent that needs a slot before its next transaction starts.
    /// So a GoWritePull never releases a held snoop, although both need a slot: a snoop that follows it
    /// comes from the home's next transaction on the line, which waits for the write-back it pulls. A held
    /// snoop is released by a GO ending a read or a GO-I, which queue nothing. The room checks in `answer`
    /// and `granted` only refuse a home that breaks these rules.
    responses: Vec<Message<B>, LINES>,
    counters: AgentCounters,
    #[cfg(test)]
    pub(crate) bug: Option<AgentBug>,
}

impl<const LINES: usize, const B: usize, const OPS: usize> PartialEq for CachingAgent<LINES, B, OPS> {
    fn eq(&self, other: &Self) -> bool {
        self.lines == other.lines
            && self.waiting == other.waiting
            && self.in_flight == other.in_flight
            && self.done == other.done
            && self.requests == other.requests
            && self.responses == other.responses
    }
}

impl<const LINES: usize, const B: usize, const OPS: usize> Eq for CachingAgent<LINES, B, OPS> {}

impl<const LINES: usize, const B: usize, const OPS: usize> core::hash::Hash for CachingAgent<LINES, B, OPS> {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.lines.hash(h);
        self.waiting.hash(h);
        self.in_flight.hash(h);
        self.done.hash(h);
        self.requests.hash(h);
        self.responses.hash(h);
    }
}

impl<const LINES: usize, const B: usize, const OPS: usize> Default for CachingAgent<LINES, B, OPS> {
    fn default() -> Self {
        Self::new()
    }
}

/// The error for a message that the receiver's state does not allow.
pub(super) fn unexpected<const B: usize>(msg: &Message<B>) -> TlError {
    TlError::UnexpectedCoherence {
        opcode: msg.opcode(),
        line: msg.line(),
    }
}

impl<const LINES: usize, const B: usize, const OPS: usize> CachingAgent<LINES, B, OPS> {
    const VALID: () = assert!(
        LINES > 0 && LINES <= u32::MAX as usize && OPS > 0,
        "an agent needs lines and room for operations"
    );

    /// An empty cache: every line Invalid.
    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        CachingAgent {
            lines: [Line {
                state: CacheState::Invalid,
                data: [0; B],
                pending: None,
                phase: false,
                deferred: None,
            }; LINES],
            waiting: Vec::new(),
            in_flight: 0,
            done: Vec::new(),
            requests: Vec::new(),
            responses: Vec::new(),
            counters: AgentCounters::default(),
            #[cfg(test)]
            bug: None,
        }
    }

    /// Counters.
    pub fn counters(&self) -> &AgentCounters {
        &self.counters
    }

    /// The state of `line` (`None` beyond the cache).
    pub fn state(&self, line: u32) -> Option<CacheState> {
        self.lines.get(line as usize).map(|l| l.state)
    }

    /// The data of `line`, meaningful while its state is valid.
    pub fn data(&self, line: u32) -> Option<&[u8; B]> {
        self.lines.get(line as usize).map(|l| &l.data)
    }

    /// Whether `line` has a request in flight.
    pub fn is_pending(&self, line: u32) -> bool {
        self.lines.get(line as usize).is_some_and(|l| l.pending.is_some())
    }

    /// Whether `line` has an eviction in flight: it keeps its state and data only to answer a snoop that
    /// crosses the eviction, and may not be used.
    pub fn is_evicting(&self, line: u32) -> bool {
        self.lines
            .get(line as usize)
            .is_some_and(|l| l.pending.is_some_and(|p| p.kind.is_evict()))
    }

    /// Core operations submitted and not yet collected with [`CachingAgent::poll_completion`].
    pub fn operations(&self) -> usize {
        self.waiting.len() + self.in_flight + self.done.len()
    }

    /// Whether another core operation fits.
    pub fn can_submit(&self) -> bool {
        self.operations() < OPS
    }

    /// Whether nothing is under way: no operation queued or in flight, no message waiting to go.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty()
            && self.in_flight == 0
            && self.requests.is_empty()
            && self.responses.is_empty()
    }

    /// Queue a core operation on `line`. Hits finish at once (collect them with `poll_completion`).
    pub fn submit(&mut self, line: u32, op: CoreOp<B>) -> Result<(), TlError> {
        if line as usize >= LINES {
            return Err(TlError::LineOutOfRange { line });
        }
        if !self.can_submit() || self.waiting.push((line, op)).is_err() {
            return Err(TlError::CoreOpsFull);
        }
        self.advance();
        Ok(())
    }

    /// The next finished operation.
    pub fn poll_completion(&mut self) -> Option<Completion<B>> {
        pop_front(&mut self.done)
    }

    /// The oldest message waiting to go to the home on `vc` (requests and responses only).
    pub fn peek_transmit(&self, vc: Vc) -> Option<&Message<B>> {
        match vc {
            Vc::Request => self.requests.first(),
            Vc::Response => self.responses.first(),
            Vc::Posted | Vc::Snoop => None,
        }
    }

    /// Every data byte it holds (lines, operations, completions, messages waiting), in a fixed order: the
    /// model checker renames stored values through it.
    #[cfg(feature = "std")]
    pub(crate) fn visit_data(&mut self, f: &mut impl FnMut(&mut u8)) {
        for line in &mut self.lines {
            line.data.iter_mut().for_each(&mut *f);
            if let Some(pending) = &mut line.pending {
                pending.op.visit_data(f);
            }
        }
        for (_, op) in &mut self.waiting {
            op.visit_data(f);
        }
        for done in &mut self.done {
            done.op.visit_data(f);
            if let Some(data) = &mut done.data {
                data.iter_mut().for_each(&mut *f);
            }
        }
        for msg in self.requests.iter_mut().chain(self.responses.iter_mut()) {
            msg.visit_data(f);
        }
    }

    /// Rename line `n` to `to[n]` everywhere (a permutation; the model checker's line symmetry: the agent
    /// treats lines alike).
    #[cfg(feature = "std")]
    pub(crate) fn rename_lines(&mut self, to: &[usize; LINES]) {
        let rename = |n: u32| to.get(n as usize).map_or(n, |&m| m as u32);
        self.lines = super::permuted(self.lines, to);
        for (line, _) in &mut self.waiting {
            *line = rename(*line);
        }
        for done in &mut self.done {
            done.line = rename(done.line);
        }
        for msg in self.requests.iter_mut().chain(self.responses.iter_mut()) {
            msg.rename_line(rename);
        }
    }

    /// Feed the agent's view of `line`, stored values aside, to `h`.
    #[cfg(feature = "std")]
    pub(crate) fn hash_line_view<H: core::hash::Hasher>(&self, line: usize, h: &mut H) {
        use core::hash::Hash;
        if let Some(l) = self.lines.get(line) {
            (l.state, l.pending.map(|p| p.kind), l.phase, l.deferred).hash(h);
        }
    }

    /// The parity of the GOs received for `line`.
    #[cfg(feature = "std")]
    pub(crate) fn phase(&self, line: usize) -> bool {
        self.lines.get(line).is_some_and(|l| l.phase)
    }

    /// Flip the parity of the GOs received for `line` (the model checker's phase symmetry, with
    /// [`HomeAgent::flip_phase`](super::HomeAgent) at the other end).
    #[cfg(feature = "std")]
    pub(crate) fn flip_phase(&mut self, line: usize) {
        if let Some(l) = self.lines.get_mut(line) {
            l.phase = !l.phase;
        }
    }

    /// How many messages wait to go to the home on `vc`.
    pub fn transmit_len(&self, vc: Vc) -> usize {
        match vc {
            Vc::Request => self.requests.len(),
            Vc::Response => self.responses.len(),
            Vc::Posted | Vc::Snoop => 0,
        }
    }

    /// Take the oldest message waiting on `vc`, once the link has accepted it.
    pub fn pop_transmit(&mut self, vc: Vc) -> Option<Message<B>> {
        match vc {
            Vc::Request => pop_front(&mut self.requests),
            Vc::Response => pop_front(&mut self.responses),
            Vc::Posted | Vc::Snoop => None,
        }
    }

    /// A message from the home. One that breaks the protocol is refused with
    /// [`TlError::UnexpectedCoherence`] and changes nothing.
    pub fn receive(&mut self, msg: Message<B>) -> Result<(), TlError> {
        let result = self.handle(msg);
        if matches!(result, Err(TlError::UnexpectedCoherence { .. })) {
            self.counters.protocol_errors += 1;
        }
        result
    }

    fn handle(&mut self, msg: Message<B>) -> Result<(), TlError> {
        let index = msg.line() as usize;
        let Some(line) = self.lines.get_mut(index) else {
            return Err(TlError::LineOutOfRange { line: msg.line() });
        };
        match msg {
            Message::Snoop { kind, phase, .. } => {
                #[cfg(test)]
                let phase = if self.bug == Some(AgentBug::IgnorePhase) {
                    line.phase
                } else {
                    phase
                };
                if phase == line.phase {
                    return self.answer(index, kind);
                }
                // It follows a GO still on its way: hold it until that GO arrives.
                if line.pending.is_none() || line.deferred.is_some() {
                    return Err(unexpected(&msg));
                }
                line.deferred = Some(kind);
                self.counters.deferred_snoops += 1;
                Ok(())
            }
            Message::Go { .. } | Message::GoData { .. } | Message::GoWritePull { .. } => {
                self.granted(index, msg)
            }
            _ => Err(unexpected(&msg)),
        }
    }

    /// Answer a snoop on line `index` from its current state. A line being evicted is given up whatever
    /// the snoop (its eviction then finds it gone and gets a plain GO-I).
    fn answer(&mut self, index: usize, kind: SnoopKind) -> Result<(), TlError> {
        if self.responses.is_full() {
            return Err(TlError::QueueFull { vc: Vc::Response });
        }
        let Some(line) = self.lines.get_mut(index) else {
            return Err(TlError::LineOutOfRange { line: index as u32 });
        };
        let evicting = line.pending.is_some_and(|p| p.kind.is_evict());
        let n = index as u32;
        let data = line.data;
        use CacheState::*;
        use SnoopResponseKind::*;
        let (next, response) = match (line.state, kind) {
            (Invalid, _) => (
                Invalid,
                Message::SnoopResponse {
                    line: n,
                    kind: RspIHitI,
                },
            ),
            (Shared | Exclusive, SnoopKind::SnpData) if !evicting => (
                Shared,
                Message::SnoopResponse {
                    line: n,
                    kind: RspSHitSE,
                },
            ),
            (Shared | Exclusive, SnoopKind::SnpCur) if !evicting => (
                line.state,
                Message::SnoopResponse {
                    line: n,
                    kind: RspVHitV,
                },
            ),
            (Shared | Exclusive, _) => (
                Invalid,
                Message::SnoopResponse {
                    line: n,
                    kind: RspIHitSE,
                },
            ),
            (Modified, SnoopKind::SnpData) if !evicting => (
                Shared,
                Message::SnoopResponseData {
                    line: n,
                    kind: ForwardKind::RspSFwdM,
                    data,
                },
            ),
            (Modified, SnoopKind::SnpCur) if !evicting => (
                Modified,
                Message::SnoopResponseData {
                    line: n,
                    kind: ForwardKind::RspVFwdV,
                    data,
                },
            ),
            (Modified, _) => (
                Invalid,
                Message::SnoopResponseData {
                    line: n,
                    kind: ForwardKind::RspIFwdM,
                    data,
                },
            ),
        };
        let invalidated = line.state.is_valid() && next == Invalid;
        line.set_state(next);
        self.counters.snoops += 1;
        if invalidated {
            self.counters.invalidations += 1;
        }
        if matches!(response, Message::SnoopResponseData { .. }) {
            self.counters.write_backs += 1;
        }
        // Room was checked above.
        let _ = self.responses.push(response);
        Ok(())
    }

    /// A GO (of any kind) for line `index`: it ends the line's request.
    fn granted(&mut self, index: usize, msg: Message<B>) -> Result<(), TlError> {
        let write_back = matches!(msg, Message::GoWritePull { .. });
        let Some(line) = self.lines.get_mut(index) else {
            return Err(TlError::LineOutOfRange { line: msg.line() });
        };
        // A GO for a line with nothing in flight breaks the protocol, whatever room there is: refused as
        // such (and counted), not as a full queue.
        let Some(pending) = line.pending else {
            return Err(unexpected(&msg));
        };
        // Room for the write-back a GoWritePull pulls and the answer to a snoop held for this GO, checked
        // before anything changes: a GO refused for want of room must leave the line as it was.
        let room = self.responses.capacity() - self.responses.len();
        if usize::from(write_back) + usize::from(line.deferred.is_some()) > room {
            return Err(TlError::QueueFull { vc: Vc::Response });
        }
        use CacheState::*;
        use RequestKind::*;
        // Work out the line's new state and data, and what the operation returns, before changing anything.
        let (state, data, read) = match (pending.kind, pending.op, msg) {
            (
                RdCurr,
                _,
                Message::GoData {
                    state: Invalid, data, ..
                },
            ) => (line.state, line.data, Some(data)),
            (RdShared | RdAny, _, Message::GoData { state, data, .. }) if state.is_valid() => {
                (state, data, Some(data))
            }
            (
                RdOwn,
                CoreOp::Store(value),
                Message::GoData {
                    state: Exclusive | Modified,
                    ..
                },
            ) => (Modified, value, None),
            // An upgrade: the requester still held the line Shared, so the GO carries no data.
            (
                RdOwn,
                CoreOp::Store(value),
                Message::Go {
                    state: Exclusive | Modified,
                    ..
                },
            ) if line.state == Shared => (Modified, value, None),
            (CleanEvict | DirtyEvict, _, Message::Go { state: Invalid, .. }) => (Invalid, line.data, None),
            (DirtyEvict, _, Message::GoWritePull { .. }) if line.state == Modified => {
                (Invalid, line.data, None)
            }
            _ => return Err(unexpected(&msg)),
        };
        let dirty = line.data;
        line.data = data;
        line.set_state(state);
        line.phase = !line.phase;
        line.pending = None;
        let deferred = line.deferred.take();
        self.in_flight -= 1;
        if write_back {
            // Room was checked above.
            let _ = self.responses.push(Message::WriteBack {
                line: index as u32,
                data: dirty,
            });
            self.counters.write_backs += 1;
        }
        self.complete(index as u32, pending.op, read, false);
        if let Some(snoop) = deferred {
            // Room was checked above, so this cannot fail after the line has changed.
            self.answer(index, snoop)?;
        }
        self.advance();
        Ok(())
    }

    fn complete(&mut self, line: u32, op: CoreOp<B>, data: Option<[u8; B]>, hit: bool) {
        match op {
            CoreOp::Load | CoreOp::LoadShared | CoreOp::ReadCurrent => self.counters.reads += 1,
            CoreOp::Store(_) => self.counters.writes += 1,
            CoreOp::Evict => self.counters.evicts += 1,
        }
        if hit {
            self.counters.hits += 1;
        }
        // Room is guaranteed: `submit` admits at most OPS operations in all.
        let _ = self.done.push(Completion { line, op, data, hit });
    }

    /// Start every waiting operation whose line is free, in order per line.
    fn advance(&mut self) {
        let mut i = 0;
        while let Some(&(line, op)) = self.waiting.get(i) {
            let busy = self.lines.get(line as usize).is_none_or(|l| l.pending.is_some())
                || self.waiting[..i].iter().any(|&(earlier, _)| earlier == line);
            if busy {
                i += 1;
                continue;
            }
            self.waiting.remove(i);
            self.start(line, op);
        }
    }

    fn start(&mut self, n: u32, op: CoreOp<B>) {
        let Some(line) = self.lines.get_mut(n as usize) else {
            return;
        };
        use CacheState::*;
        let request = match (op, line.state) {
            (CoreOp::Load | CoreOp::LoadShared | CoreOp::ReadCurrent, state) if state.is_valid() => {
                let data = line.data;
                return self.complete(n, op, Some(data), true);
            }
            (CoreOp::Load, _) => RequestKind::RdAny,
            (CoreOp::LoadShared, _) => RequestKind::RdShared,
            (CoreOp::ReadCurrent, _) => RequestKind::RdCurr,
            (CoreOp::Store(value), Exclusive | Modified) => {
                line.state = Modified;
                line.data = value;
                return self.complete(n, op, None, true);
            }
            (CoreOp::Store(_), _) => RequestKind::RdOwn,
            (CoreOp::Evict, Invalid) => return self.complete(n, op, None, true),
            (CoreOp::Evict, Modified) => RequestKind::DirtyEvict,
            (CoreOp::Evict, _) => RequestKind::CleanEvict,
        };
        line.pending = Some(Pending { kind: request, op });
        self.in_flight += 1;
        self.counters.requests += 1;
        // At most one request per line is in flight, so there is room.
        let _ = self.requests.push(Message::Request {
            line: n,
            kind: request,
        });
    }
}

/// Take the first element of a short FIFO.
pub(crate) fn pop_front<T, const N: usize>(v: &mut Vec<T, N>) -> Option<T> {
    if v.is_empty() {
        None
    } else {
        Some(v.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coherence::home::{Directory, HomeAgent};
    use crate::xorshift::Xorshift;

    /// A GO that releases a snoop held for it, with the response queue full, is refused and changes
    /// nothing (what the fuzz target coherence_receive found). It had ended the request, taken the snoop
    /// and then failed to queue the snoop's answer: refused, yet the line had changed and the snoop was
    /// lost.
    #[test]
    fn a_go_whose_held_snoop_has_no_room_to_answer_is_refused_unchanged() {
        let mut agent = CachingAgent::<2, 4>::new();
        agent.submit(0, CoreOp::Load).unwrap();
        assert_eq!(
            agent.pop_transmit(Vc::Request),
            Some(Message::Request {
                line: 0,
                kind: RequestKind::RdAny
            })
        );
        // A snoop of the next phase overtook the GO: held until the GO arrives.
        let snoop = Message::Snoop {
            line: 0,
            kind: SnoopKind::SnpInv,
            phase: true,
        };
        agent.receive(snoop).unwrap();
        // Line 1's snoops fill the response queue.
        for _ in 0..2 {
            let snoop = Message::Snoop {
                line: 1,
                kind: SnoopKind::SnpInv,
                phase: false,
            };
            agent.receive(snoop).unwrap();
        }
        let before = agent.clone();
        let go = Message::GoData {
            line: 0,
            state: CacheState::Exclusive,
            data: [9; 4],
        };
        assert_eq!(agent.receive(go), Err(TlError::QueueFull { vc: Vc::Response }));
        assert!(agent == before, "the refused GO changed the agent");
        // Once there is room, the same GO ends the request and the held snoop is answered.
        agent.pop_transmit(Vc::Response).unwrap();
        agent.receive(go).unwrap();
        assert!(!agent.is_pending(0));
        assert_eq!(agent.transmit_len(Vc::Response), 2);
        assert_eq!(agent.state(0), Some(CacheState::Invalid));
    }

    const L: usize = 6;

    /// Two agents (agent 0 under test, agent 1 its peer) with room for an operation on every line, and
    /// their home.
    struct System {
        agents: [CachingAgent<L, 1, L>; 2],
        home: HomeAgent<L, 2, 1>,
    }

    impl System {
        fn new() -> Self {
            System {
                agents: [CachingAgent::new(), CachingAgent::new()],
                home: HomeAgent::new(),
            }
        }

        /// Deliver the head of agent `a`'s channel `vc` to the home, which must accept it.
        fn deliver_home(&mut self, a: usize, vc: Vc) {
            let msg = self.agents[a].pop_transmit(vc).expect("a message to deliver");
            assert_eq!(
                self.home.receive(a, msg),
                Ok(()),
                "the home refused {msg:?} from {a}"
            );
        }

        /// Deliver the head of the home's channel `vc` to agent `a`, which must accept it.
        fn deliver_agent(&mut self, a: usize, vc: Vc) {
            let msg = self.home.pop_transmit(a, vc).expect("a message to deliver");
            assert_eq!(self.agents[a].receive(msg), Ok(()), "agent {a} refused {msg:?}");
        }

        /// Deliver everything, channel by channel, until nothing is left.
        fn settle(&mut self) {
            loop {
                let mut moved = false;
                for a in 0..2 {
                    for vc in [Vc::Request, Vc::Response] {
                        while self.agents[a].peek_transmit(vc).is_some() {
                            self.deliver_home(a, vc);
                            moved = true;
                        }
                    }
                    for vc in [Vc::Snoop, Vc::Response] {
                        while self.home.peek_transmit(a, vc).is_some() {
                            self.deliver_agent(a, vc);
                            moved = true;
                        }
                    }
                }
                if !moved {
                    return;
                }
            }
        }
    }

    /// The worst a conforming home can do to an agent whose response channel the link holds up: one
    /// message on every line, the last slot taken by the write-back a GoWritePull pulls, and every message
    /// accepted. Lines 0 and 1 have a dirty eviction pulled (and a peer's request for them parked: the home
    /// snoops nobody until the write-back is in, so no snoop can be held for the GoWritePull), lines 2 and 3
    /// a snoop held until the GO it overtook, lines 4 and 5 a snoop answered at once.
    #[test]
    fn a_held_up_response_channel_fills_one_slot_per_line_and_nothing_is_refused() {
        let mut sys = System::new();
        for n in [0, 1, 4, 5] {
            sys.agents[0].submit(n, CoreOp::Store([n as u8 + 1])).unwrap();
        }
        sys.settle();
        for _ in 0..4 {
            sys.agents[0].poll_completion().unwrap();
        }
        // From here on agent 0's response channel is not delivered.
        for n in [4, 5] {
            sys.agents[1].submit(n, CoreOp::Load).unwrap();
            sys.deliver_home(1, Vc::Request);
            sys.deliver_agent(0, Vc::Snoop);
        }
        for n in [2, 3] {
            sys.agents[0].submit(n, CoreOp::Load).unwrap();
            sys.deliver_home(0, Vc::Request);
            sys.agents[1].submit(n, CoreOp::Store([9])).unwrap();
            sys.deliver_home(1, Vc::Request);
            // The snoop overtakes the GO it follows and is held.
            sys.deliver_agent(0, Vc::Snoop);
            assert!(sys.agents[0].is_pending(n));
            sys.deliver_agent(0, Vc::Response);
        }
        assert_eq!(sys.agents[0].counters().deferred_snoops, 2);
        for n in [0, 1] {
            sys.agents[0].submit(n, CoreOp::Evict).unwrap();
            sys.deliver_home(0, Vc::Request);
            sys.agents[1].submit(n, CoreOp::Store([9])).unwrap();
            sys.deliver_home(1, Vc::Request);
            assert_eq!(
                sys.home.transmit_len(0, Vc::Snoop),
                0,
                "a snoop for line {n} before its write-back"
            );
            assert_eq!(
                sys.home.peek_transmit(0, Vc::Response),
                Some(&Message::GoWritePull { line: n })
            );
            sys.deliver_agent(0, Vc::Response);
        }
        assert_eq!(sys.agents[0].transmit_len(Vc::Response), L);
        for n in 0..L as u32 {
            let queued = sys.agents[0].responses.iter().filter(|m| m.line() == n).count();
            assert_eq!(queued, 1, "line {n}");
        }
        // With the queue full, a forged GO for a line with nothing in flight is refused as what it is, a
        // message that breaks the protocol (and counted), not for want of room; and it changes nothing.
        assert!(!sys.agents[0].is_pending(4));
        assert_eq!(
            sys.agents[0].receive(Message::GoWritePull { line: 4 }),
            Err(TlError::UnexpectedCoherence {
                opcode: Message::<1>::GoWritePull { line: 4 }.opcode(),
                line: 4
            })
        );
        assert_eq!(sys.agents[0].counters().protocol_errors, 1);
        assert_eq!(sys.agents[0].transmit_len(Vc::Response), L);
        sys.settle();
        assert!(sys.agents.iter().all(CachingAgent::is_idle) && sys.home.is_idle());
        assert_eq!(
            sys.agents[0].counters().protocol_errors + sys.home.counters().protocol_errors,
            1
        );
        for n in [0, 1] {
            // The write-back reached memory before the peer's store was granted.
            assert_eq!(sys.home.memory(n), Some(&[n as u8 + 1]));
            assert_eq!(sys.home.directory(n), Some(Directory::Owned(1)));
        }
    }

    /// A seeded random walk in which agent 0's response channel is delivered only when nothing else can
    /// move (or now and then): it fills up, with write-backs pulled and held snoops released among its
    /// messages, and holds at most one message per line; nothing is ever refused.
    #[test]
    fn random_traffic_with_a_held_up_response_channel_never_needs_a_second_slot_for_a_line() {
        let mut rng = Xorshift::seeded(3);
        let mut sys = System::new();
        let mut fullest = 0;
        let mut value = 0u8;
        for _ in 0..100_000 {
            let mut ready = std::vec::Vec::new();
            for a in 0..2 {
                for vc in [Vc::Request, Vc::Response] {
                    if sys.agents[a].peek_transmit(vc).is_some() && (a, vc) != (0, Vc::Response) {
                        ready.push((true, a, vc));
                    }
                }
                for vc in [Vc::Snoop, Vc::Response] {
                    if sys.home.peek_transmit(a, vc).is_some() {
                        ready.push((false, a, vc));
                    }
                }
            }
            let a = rng.next_u64() as usize % 2;
            let line = (rng.next_u64() % L as u64) as u32;
            // The cores leave alone lines the home is busy with, so that the lines still free get traffic.
            if sys.agents[a].can_submit() && !sys.home.is_busy(line) && rng.next_u64() % 4 == 0 {
                value = value.wrapping_add(1);
                let op = match rng.next_u64() % 4 {
                    0 => CoreOp::Load,
                    1 => CoreOp::LoadShared,
                    2 => CoreOp::Store([value]),
                    _ => CoreOp::Evict,
                };
                sys.agents[a].submit(line, op).unwrap();
            } else if ready.is_empty() || rng.next_u64() % 512 == 0 {
                // Seldom even when nothing else moves, so that the cores' next operations come first.
                if sys.agents[0].peek_transmit(Vc::Response).is_some() && rng.next_u64() % 16 == 0 {
                    sys.deliver_home(0, Vc::Response);
                }
            } else {
                match ready[rng.next_u64() as usize % ready.len()] {
                    (true, a, vc) => sys.deliver_home(a, vc),
                    (false, a, vc) => sys.deliver_agent(a, vc),
                }
            }
            for agent in &mut sys.agents {
                while agent.poll_completion().is_some() {}
            }
            let queue = &sys.agents[0].responses;
            fullest = fullest.max(queue.len());
            for (i, m) in queue.iter().enumerate() {
                assert!(
                    queue[..i].iter().all(|o| o.line() != m.line()),
                    "two messages for a line: {queue:?}"
                );
            }
        }
        let counters = sys.agents[0].counters();
        assert_eq!(fullest, L, "the response channel never filled");
        assert!(
            counters.deferred_snoops > 0 && counters.write_backs > 0,
            "{counters:?}"
        );
        assert_eq!(counters.protocol_errors + sys.home.counters().protocol_errors, 0);
    }
}
