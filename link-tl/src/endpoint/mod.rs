//! A transaction-layer endpoint: the memory it exposes, the completer that serves its peers' requests,
//! the requester that copies to and from their memory, and the one ordered transmit queue both share.
//!
//! ```text
//!              copy_to / copy_from / atomic / send_message          poll_event
//!                         |                                            ^
//!   +---------------------v--------------------------------------------|---------+
//!   |  Requester (requester.rs)              Completer (completer.rs)   events    |
//!   |   transfers -> Pieces / Requests        waiting requests ---+                |
//!   |   tag table (Outstanding<N>)            executes against    |                |
//!   |   completions -> local Memory  <------  the local Memory <--+                |
//!   |        |                                     |                               |
//!   |        +----------> Egress<DEPTH> <----------+   (ordering rules, spec 3.6)   |
//!   +-------------------------|-----------------------------------^---------------+
//!                  poll_transmit(link)                 receive(vc, tl, payload)
//!                             v                                   |
//!                       data link: send (refuses without credit) / recv
//! ```
//!
//! The endpoint is sans-IO: the caller hands it packets from the data link ([`Endpoint::receive`], only
//! while [`Endpoint::can_receive`]), lets it send ([`Endpoint::poll_transmit`], which offers packets to the
//! link under the ordering rules and keeps whatever the link refuses for later: nothing is ever dropped),
//! takes its events ([`Endpoint::poll_event`]) and wakes it at [`Endpoint::poll_timeout`].
//!
//! Packets are routed by channel: the posted channel to the completer at once, the request channel to the
//! completer's queue, the response channel to the requester; the snoop channel (coherence) is not served
//! here and its packets are counted and dropped.
//!
//! Sizes are const generics: `W` windows in the address map, `N` tags (requests in flight), `T` transfers
//! at once, `Q` requests waiting at the completer, `DEPTH` packets per channel in the transmit queue (at
//! least 32, the completions of one 4096-byte read), `E` events.

mod completer;
mod memory;
pub mod pair;
mod requester;

pub use completer::{Completer, CompleterCounters, MessageEvent, MAX_COMPLETIONS};
pub use memory::{in_range, Access, Memory, MemoryError};
pub use requester::{Direction, Done, Failure, Handle, Requester, RequesterCounters};

use heapless::Deque;
use link_dl::flit::Flit;
use link_dl::{Received, Vc};
use link_phy::time::{Duration, Instant};

use crate::address::AddressMap;
use crate::error::TlError;
use crate::header::{EndpointId, MessageCode};
use crate::ordering::{Egress, EgressCounters, LinkTx};
use crate::packet::AtomicOp;
use crate::tags::{Outstanding, TagCounters};

/// What an endpoint tells its user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A peer sent a message (doorbell, interrupt, vendor-defined).
    Message(MessageEvent),
    /// A transfer or an atomic of this endpoint ended.
    Done(Done),
}

/// Every counter of an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EndpointCounters {
    /// The completer: requests served, bad requests by kind, answers by status.
    pub completer: CompleterCounters,
    /// The requester: transfers, packets, completions, errors.
    pub requester: RequesterCounters,
    /// The outstanding-request table.
    pub tags: TagCounters,
    /// The transmit queue.
    pub egress: EgressCounters,
}

/// A transaction-layer endpoint over the memory `M` (see the module documentation for the sizes).
#[derive(Debug)]
pub struct Endpoint<
    'm,
    M: Memory,
    const W: usize = 4,
    const N: usize = 64,
    const T: usize = 4,
    const Q: usize = 64,
    const DEPTH: usize = 64,
    const E: usize = 16,
> {
    id: EndpointId,
    memory: M,
    completer: Completer<Q>,
    requester: Requester<'m, W, N, T>,
    egress: Egress<DEPTH>,
    events: Deque<Event, E>,
}

impl<
        'm,
        M: Memory,
        const W: usize,
        const N: usize,
        const T: usize,
        const Q: usize,
        const DEPTH: usize,
        const E: usize,
    > Endpoint<'m, M, W, N, T, Q, DEPTH, E>
{
    const VALID: () = {
        assert!(
            DEPTH >= MAX_COMPLETIONS,
            "the transmit queue must hold the 32 completions of a 4096-byte read"
        );
        assert!(E >= 1, "the endpoint needs room for an event");
    };

    /// Endpoint `id` exposing `memory`, reaching peers through `map`; its requests time out
    /// `completion_timeout` after they are issued.
    pub fn new(id: EndpointId, memory: M, map: &'m AddressMap<W>, completion_timeout: Duration) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        Endpoint {
            id,
            memory,
            completer: Completer::new(id),
            requester: Requester::new(id, map, Outstanding::new(completion_timeout)),
            egress: Egress::new(),
            events: Deque::new(),
        }
    }

    /// Its endpoint ID.
    pub fn id(&self) -> EndpointId {
        self.id
    }

    /// The memory it exposes.
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// The memory it exposes, to change it locally.
    pub fn memory_mut(&mut self) -> &mut M {
        &mut self.memory
    }

    /// Every counter.
    pub fn counters(&self) -> EndpointCounters {
        EndpointCounters {
            completer: *self.completer.counters(),
            requester: *self.requester.counters(),
            tags: *self.requester.tag_counters(),
            egress: *self.egress.counters(),
        }
    }

    /// Copy `len` bytes of local memory from `local` to global address `global` (posted writes, then a
    /// one-byte read fence of each window written). Ends with [`Done::Transfer`]. Refused if the local range is outside the
    /// memory ([`TlError::BufferTooSmall`]), `len` is 0, `T` transfers are running
    /// ([`TlError::TransfersFull`]), or the endpoint's own ID is beyond 1023 ([`TlError::EndpointOutOfRange`]).
    pub fn copy_to(&mut self, local: u64, global: u64, len: u64) -> Result<Handle, TlError> {
        self.requester
            .start(Direction::ToPeer, local, global, len, &self.memory)
    }

    /// Copy `len` bytes from global address `global` into local memory at `local` (reads, completions
    /// placed by tag). Ends with [`Done::Transfer`]; refused as [`Endpoint::copy_to`].
    pub fn copy_from(&mut self, global: u64, local: u64, len: u64) -> Result<Handle, TlError> {
        self.requester
            .start(Direction::FromPeer, local, global, len, &self.memory)
    }

    /// An atomic on `size` bytes (4 or 8) at global address `global`, aligned to `size`: fetch-add of
    /// `operand`, swap with `operand`, or compare-and-swap storing `operand` if the value is `compare`.
    /// Ends with [`Done::Atomic`] carrying the old value. Back-pressure: [`TlError::QueueFull`] or
    /// [`TlError::NoFreeTag`], nothing queued.
    pub fn atomic(
        &mut self,
        now: Instant,
        op: AtomicOp,
        global: u64,
        size: u8,
        operand: u64,
        compare: u64,
    ) -> Result<Handle, TlError> {
        self.requester
            .atomic(now, op, global, size, operand, compare, &mut self.egress)
    }

    /// Send a message to endpoint `dest`; [`TlError::QueueFull`] (nothing queued) is back-pressure.
    pub fn send_message(
        &mut self,
        dest: EndpointId,
        code: MessageCode,
        index: u16,
        value: u64,
        data: &[u8],
    ) -> Result<(), TlError> {
        self.requester
            .message(dest, code, index, value, data, &mut self.egress)
    }

    /// Whether [`Endpoint::receive`] takes another packet: the completer has room for a request and the
    /// event queue for an event. When it does not, stop taking packets from the data link (its credits
    /// then hold the peer back) until [`Endpoint::poll_transmit`] and [`Endpoint::poll_event`] made room.
    pub fn can_receive(&self) -> bool {
        self.completer.has_room() && !self.events.is_full()
    }

    /// A packet from the data link. Refused with [`TlError::QueueFull`], nothing taken, unless
    /// [`Endpoint::can_receive`]. Bad packets are not errors here: they are answered or dropped as spec
    /// section 3.7 says, and counted.
    pub fn receive(&mut self, now: Instant, vc: Vc, tl: u64, payload: &[Flit]) -> Result<(), TlError> {
        if !self.can_receive() {
            return Err(TlError::QueueFull { vc });
        }
        let events = &mut self.events;
        match vc {
            Vc::Request => self.completer.push_request(tl, payload)?,
            Vc::Posted | Vc::Snoop => self
                .completer
                .posted(vc, tl, payload, &mut self.memory, &mut |m| {
                    let _ = events.push_back(Event::Message(m));
                }),
            Vc::Response => self
                .requester
                .completion(now, tl, payload, &mut self.memory, &mut |d| {
                    let _ = events.push_back(Event::Done(d));
                }),
        }
        Ok(())
    }

    /// [`Endpoint::receive`] of a packet as the data link hands it up.
    pub fn receive_packet(&mut self, now: Instant, packet: &Received) -> Result<(), TlError> {
        self.receive(now, packet.vc, packet.tl, &packet.payload)
    }

    /// Run what can run (waiting requests, transfers' next packets), and offer the link every packet the
    /// ordering rules and its credit allow. Returns how many packets the link took.
    pub fn poll_transmit<L: LinkTx>(&mut self, now: Instant, link: &mut L) -> usize {
        let mut sent = 0;
        loop {
            self.completer.service(&mut self.memory, &mut self.egress);
            self.requester.service(now, &mut self.memory, &mut self.egress);
            self.reap();
            let n = self.egress.pump(link);
            sent += n;
            if n == 0 {
                return sent;
            }
        }
    }

    fn reap(&mut self) {
        let events = &mut self.events;
        let free = E - events.len();
        let mut budget = free;
        let mut reports: heapless::Vec<Done, E> = heapless::Vec::new();
        self.requester.reap(
            || {
                let ok = budget > 0;
                budget = budget.saturating_sub(1);
                ok
            },
            &mut |d| {
                let _ = reports.push(d);
            },
        );
        for &d in &reports {
            let _ = events.push_back(Event::Done(d));
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        let event = self.events.pop_front();
        if event.is_some() {
            // Transfers that ended while the queue was full can now be reported.
            self.reap();
        }
        event
    }

    /// When [`Endpoint::handle_timeout`] next has something to do (a completion timeout).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.requester.poll_timeout()
    }

    /// Let completion timeouts fire: the request fails its transfer, or ends its atomic with
    /// [`Failure::Timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        let events = &mut self.events;
        let mut free = E - events.len();
        let mut reports: heapless::Vec<Done, E> = heapless::Vec::new();
        self.requester.handle_timeout(
            now,
            || {
                let ok = free > 0;
                free = free.saturating_sub(1);
                ok
            },
            &mut |d| {
                let _ = reports.push(d);
            },
        );
        for &d in &reports {
            let _ = events.push_back(Event::Done(d));
        }
        self.reap();
    }

    /// Whether nothing is left to do: no transfer running, no request in flight or waiting, nothing
    /// queued to send.
    pub fn is_idle(&self) -> bool {
        self.requester.active_transfers() == 0
            && self.requester.outstanding() == 0
            && self.completer.waiting() == 0
            && self.egress.is_empty()
    }

    /// The requester (counters, transfers in flight).
    pub fn requester(&self) -> &Requester<'m, W, N, T> {
        &self.requester
    }

    /// The completer.
    pub fn completer(&self) -> &Completer<Q> {
        &self.completer
    }

    /// The transmit queue.
    pub fn egress(&self) -> &Egress<DEPTH> {
        &self.egress
    }
}
