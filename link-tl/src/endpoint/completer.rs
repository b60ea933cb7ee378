//! The completer: executes the requests that arrive for an endpoint's [`Memory`] and answers them.
//!
//! Posted writes and messages are executed the moment they arrive (posted traffic always progresses).
//! Requests (the request channel) wait in a queue of `Q` packets until the response channel's transmit
//! queue has room for every completion the largest request can need (32, a 4096-byte read), then run in
//! arrival order; a posted write that arrives after a waiting request may therefore take effect before it,
//! which the ordering rules allow (spec 3.6, rule 4: posted writes may pass requests).
//!
//! What it answers (spec section 3.7):
//!
//! | request | answer |
//! |---|---|
//! | malformed, unknown or reserved opcode, wrong channel, misaligned atomic, not addressed to this endpoint | Unsupported Request (status 1) to the extension's requester and tag; dropped and counted if the extension flit does not parse |
//! | well formed, but a byte outside the exposed memory, or not permitted ([`Memory::check`]) | Completer Abort (status 2); memory untouched |
//! | a read the memory cannot read intact | Poisoned (status 3) |
//! | a read | one completion per 128-byte block it touches ([`ReadCompletions`]) |
//! | a non-posted write | a completion without data, success |
//! | an atomic | a completion with the old value (4 or 8 bytes) |
//! | a posted write or message that is bad in any of these ways | dropped and counted (posted packets have no completion) |
//!
//! Every check of a request's whole range happens before its first byte is written, so a refused request
//! never changes memory.

use heapless::{Deque, Vec};
use link_dl::flit::Flit;
use link_dl::Vc;

use super::memory::{Access, Memory, MemoryError};
use crate::error::TlError;
use crate::header::{CompletionHeader, EndpointId, MessageCode, Status, MAX_DATA, MAX_READ};
use crate::ordering::Egress;
use crate::packet::{
    error_completion, unsupported_request_reply, Atomic, AtomicOp, Completion, Message, Packet, PostedWrite,
    RequestId, RxCounters, Tlp,
};
use crate::packetize::ReadCompletions;

/// Most completions one request needs: a 4096-byte read, aligned (a read never crosses a 4096-byte
/// boundary, so it touches at most 32 blocks of 128 bytes).
pub const MAX_COMPLETIONS: usize = MAX_READ / MAX_DATA;

/// A message that arrived: a doorbell, an interrupt or a vendor-defined message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageEvent {
    /// What kind.
    pub code: MessageCode,
    /// The sender.
    pub source: EndpointId,
    /// Doorbell number, interrupt vector or vendor ID.
    pub index: u16,
    /// The 64-bit value (doorbell value, interrupt data, vendor's).
    pub value: u64,
    /// The data flits' bytes, 0 to 128.
    pub data: Vec<u8, MAX_DATA>,
}

/// Counters of the completer: requests served by kind, bad requests by kind, answers by status. They
/// only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CompleterCounters {
    /// Parse outcomes of every packet received on the posted, request and snoop channels.
    pub rx: RxCounters,
    /// Posted writes executed.
    pub posted_writes: u64,
    /// Reads answered with data.
    pub reads: u64,
    /// Non-posted writes executed.
    pub writes: u64,
    /// Atomics executed.
    pub atomics: u64,
    /// Messages delivered as events.
    pub messages: u64,
    /// Bytes written into memory by peers (posted and non-posted writes, atomics).
    pub bytes_written: u64,
    /// Bytes read from memory for peers (reads, atomics).
    pub bytes_read: u64,
    /// Completions queued, any status.
    pub completions: u64,
    /// Bad requests: atomics whose address is not aligned to their size.
    pub misaligned_atomics: u64,
    /// Bad requests: packets whose destination is another endpoint.
    pub misrouted: u64,
    /// Bad requests: a byte outside the exposed memory.
    pub out_of_range: u64,
    /// Bad requests: an access the memory does not permit.
    pub denied: u64,
    /// Reads (or atomics) the memory could not read intact.
    pub poisoned: u64,
    /// Answers with status 1, Unsupported Request.
    pub unsupported_sent: u64,
    /// Answers with status 2, Completer Abort.
    pub aborts_sent: u64,
    /// Answers with status 3, Poisoned.
    pub poisoned_sent: u64,
    /// Request-channel packets without the extension flit that says who to answer: dropped.
    pub unanswerable: u64,
    /// Posted-channel (and snoop-channel) packets dropped: malformed, misrouted, out of range, denied.
    pub posted_dropped: u64,
}

/// Executes requests against a [`Memory`], with `Q` requests waiting at most.
#[derive(Clone, Debug)]
pub struct Completer<const Q: usize> {
    id: EndpointId,
    waiting: Deque<Packet, Q>,
    /// A read's bytes, taken in one go so that its completions are one consistent snapshot.
    scratch: [u8; MAX_READ],
    counters: CompleterCounters,
}

impl<const Q: usize> Completer<Q> {
    const VALID: () = assert!(Q >= 1, "the completer needs room for at least one request");

    /// A completer for endpoint `id`.
    pub fn new(id: EndpointId) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        Completer {
            id,
            waiting: Deque::new(),
            scratch: [0; MAX_READ],
            counters: CompleterCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &CompleterCounters {
        &self.counters
    }

    /// Whether another request-channel packet can be taken.
    pub fn has_room(&self) -> bool {
        !self.waiting.is_full()
    }

    /// Requests waiting for room in the response queue.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Take a packet from the request channel; it runs in [`Completer::service`]. Refused with
    /// [`TlError::QueueFull`] (nothing taken) when `Q` requests already wait.
    pub fn push_request(&mut self, tl: u64, payload: &[Flit]) -> Result<(), TlError> {
        if self.waiting.is_full() {
            return Err(TlError::QueueFull { vc: Vc::Request });
        }
        let mut packet = Packet::new();
        packet_from(&mut packet, Vc::Request, tl, payload);
        let _ = self.waiting.push_back(packet);
        Ok(())
    }

    /// Execute a packet from the posted channel (or the snoop channel, which this layer does not serve)
    /// now; a message becomes an event through `emit`.
    pub fn posted<M: Memory + ?Sized>(
        &mut self,
        vc: Vc,
        tl: u64,
        payload: &[Flit],
        memory: &mut M,
        emit: &mut impl FnMut(MessageEvent),
    ) {
        let parsed = Tlp::parse(vc, tl, payload);
        self.counters.rx.record(&parsed);
        let ok = match parsed {
            Ok(tlp) if tlp.dest() != self.id => {
                self.counters.misrouted += 1;
                false
            }
            Ok(Tlp::PostedWrite(w)) => self.posted_write(&w, memory),
            Ok(Tlp::Message(m)) => {
                self.message(&m, emit);
                true
            }
            // Parsing puts every other opcode on another channel.
            Ok(_) => false,
            Err(e) => {
                if matches!(e, TlError::MisalignedAtomic { .. }) {
                    self.counters.misaligned_atomics += 1;
                }
                false
            }
        };
        if !ok {
            self.counters.posted_dropped += 1;
        }
    }

    /// Run waiting requests, oldest first, while the response queue has room for the largest answer.
    /// Returns how many ran.
    pub fn service<M: Memory + ?Sized, const DEPTH: usize>(
        &mut self,
        memory: &mut M,
        egress: &mut Egress<DEPTH>,
    ) -> usize {
        let mut ran = 0;
        while DEPTH - egress.queued(Vc::Response) >= MAX_COMPLETIONS {
            let Some(packet) = self.waiting.pop_front() else {
                break;
            };
            self.request(&packet, memory, egress);
            ran += 1;
        }
        ran
    }

    fn request<M: Memory + ?Sized, const DEPTH: usize>(
        &mut self,
        packet: &Packet,
        memory: &mut M,
        egress: &mut Egress<DEPTH>,
    ) {
        let parsed = packet.parse();
        self.counters.rx.record(&parsed);
        let tlp = match parsed {
            Ok(tlp) => tlp,
            Err(e) => {
                if matches!(e, TlError::MisalignedAtomic { .. }) {
                    self.counters.misaligned_atomics += 1;
                }
                let mut reply = Packet::new();
                if unsupported_request_reply(packet.vc(), packet.payload(), self.id, &mut reply) {
                    self.counters.unsupported_sent += 1;
                    self.send(reply, egress);
                } else {
                    self.counters.unanswerable += 1;
                }
                return;
            }
        };
        // Parsing only accepts requests on the request channel.
        let Some(id) = tlp.request_id() else {
            self.counters.unanswerable += 1;
            return;
        };
        if tlp.dest() != self.id {
            self.counters.misrouted += 1;
            self.status(id, Status::UnsupportedRequest, egress);
            return;
        }
        match tlp {
            Tlp::Read(read) => {
                let len = usize::from(read.len);
                let bytes = &mut self.scratch[..len];
                let result = memory
                    .check(read.addr, len, Access::Read)
                    .and_then(|()| memory.read(read.addr, bytes));
                if let Err(e) = result {
                    self.refuse(id, e, egress);
                    return;
                }
                self.counters.reads += 1;
                self.counters.bytes_read += len as u64;
                let Ok(mut answer) = ReadCompletions::new(read, self.id, &self.scratch[..len]) else {
                    return;
                };
                loop {
                    let mut reply = Packet::new();
                    match answer.next_into(&mut reply) {
                        Some(Ok(())) => {
                            self.counters.completions += 1;
                            let _ = egress.push(reply);
                        }
                        _ => break,
                    }
                }
            }
            Tlp::Write(w) => {
                let result = memory
                    .check(w.addr, w.data.len(), Access::Write)
                    .and_then(|()| memory.write(w.addr, w.data));
                match result {
                    Ok(()) => {
                        self.counters.writes += 1;
                        self.counters.bytes_written += w.data.len() as u64;
                        self.status(id, Status::Success, egress);
                    }
                    Err(e) => self.refuse(id, e, egress),
                }
            }
            Tlp::Atomic(a) => match atomic(&a, memory) {
                Ok(old) => {
                    self.counters.atomics += 1;
                    self.counters.bytes_read += u64::from(a.size);
                    self.counters.bytes_written += u64::from(a.size);
                    let header = CompletionHeader {
                        requester: id.requester,
                        completer: self.id,
                        tag: id.tag,
                        status: Status::Success,
                        offset: 0,
                        len: a.size,
                    };
                    let data = &old.to_le_bytes()[..usize::from(a.size)];
                    let mut reply = Packet::new();
                    if Tlp::Completion(Completion { header, data })
                        .emit(&mut reply)
                        .is_ok()
                    {
                        self.send(reply, egress);
                    }
                }
                Err(e) => self.refuse(id, e, egress),
            },
            // `request_id` is only `Some` for the three above.
            _ => {}
        }
    }

    fn posted_write<M: Memory + ?Sized>(&mut self, w: &PostedWrite<'_>, memory: &mut M) -> bool {
        let mask = w.enables.unwrap_or(u128::MAX);
        // Every run of enabled bytes is checked before the first is written.
        for (start, end) in runs(mask, w.data.len()) {
            if let Err(e) = memory.check(w.addr + start as u64, end - start, Access::Write) {
                self.count_refusal(e);
                return false;
            }
        }
        for (start, end) in runs(mask, w.data.len()) {
            if let Err(e) = memory.write(w.addr + start as u64, &w.data[start..end]) {
                self.count_refusal(e);
                return false;
            }
            self.counters.bytes_written += (end - start) as u64;
        }
        self.counters.posted_writes += 1;
        true
    }

    fn message(&mut self, m: &Message<'_>, emit: &mut impl FnMut(MessageEvent)) {
        self.counters.messages += 1;
        let mut data = Vec::new();
        // Parsing bounds message data to 128 bytes.
        let _ = data.extend_from_slice(m.data);
        emit(MessageEvent {
            code: m.code,
            source: m.source,
            index: m.index,
            value: m.value,
            data,
        });
    }

    fn count_refusal(&mut self, e: MemoryError) {
        match e {
            MemoryError::OutOfRange { .. } => self.counters.out_of_range += 1,
            MemoryError::Denied { .. } => self.counters.denied += 1,
            MemoryError::Poisoned { .. } => self.counters.poisoned += 1,
        }
    }

    /// Answer a request the memory refused: Completer Abort, or Poisoned for a failed read.
    fn refuse<const DEPTH: usize>(&mut self, id: RequestId, e: MemoryError, egress: &mut Egress<DEPTH>) {
        self.count_refusal(e);
        let status = match e {
            MemoryError::Poisoned { .. } => Status::Poisoned,
            MemoryError::OutOfRange { .. } | MemoryError::Denied { .. } => Status::CompleterAbort,
        };
        self.status(id, status, egress);
    }

    /// A completion without data.
    fn status<const DEPTH: usize>(&mut self, id: RequestId, status: Status, egress: &mut Egress<DEPTH>) {
        match status {
            Status::Success => {}
            Status::UnsupportedRequest => self.counters.unsupported_sent += 1,
            Status::CompleterAbort => self.counters.aborts_sent += 1,
            Status::Poisoned => self.counters.poisoned_sent += 1,
        }
        let mut reply = Packet::new();
        if error_completion(id, self.id, status, &mut reply).is_ok() {
            self.send(reply, egress);
        }
    }

    fn send<const DEPTH: usize>(&mut self, reply: Packet, egress: &mut Egress<DEPTH>) {
        self.counters.completions += 1;
        // `service` only runs a request when the response queue has room for its whole answer.
        let _ = egress.push(reply);
    }
}

/// Copy a received packet into `out` (a `Packet` is built from the data link's `Received`, or from parts).
fn packet_from(out: &mut Packet, vc: Vc, tl: u64, payload: &[Flit]) {
    let mut received = link_dl::Received {
        vc,
        tl,
        payload: heapless::Vec::new(),
    };
    for flit in payload.iter().take(link_dl::flit::MAX_PAYLOAD_FLITS) {
        let _ = received.payload.push(*flit);
    }
    *out = Packet::from_received(&received);
}

/// Execute an atomic: check, read the old value, write the new one. Returns the old value.
fn atomic<M: Memory + ?Sized>(a: &Atomic, memory: &mut M) -> Result<u64, MemoryError> {
    let size = usize::from(a.size);
    memory.check(a.addr, size, Access::Atomic)?;
    let mut old = [0u8; 8];
    memory.read(a.addr, &mut old[..size])?;
    let old = u64::from_le_bytes(old);
    let new = match a.op {
        AtomicOp::FetchAdd => old.wrapping_add(a.operand),
        AtomicOp::Swap => a.operand,
        AtomicOp::CompareSwap if old == a.compare => a.operand,
        AtomicOp::CompareSwap => return Ok(old),
    };
    // The low `size` bytes: a 4-byte add wraps at 32 bits.
    memory.write(a.addr, &new.to_le_bytes()[..size])?;
    Ok(old)
}

/// The runs of set bits of `mask` among its low `len` bits, as `(start, end)` byte ranges.
fn runs(mask: u128, len: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut rest = if len >= 128 {
        mask
    } else {
        mask & ((1u128 << len) - 1)
    };
    core::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let start = rest.trailing_zeros() as usize;
        let ones = (rest >> start).trailing_ones() as usize;
        let end = start + ones;
        rest &= if end >= 128 { 0 } else { u128::MAX << end };
        Some((start, end))
    })
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_of_enabled_bytes() {
        let collect = |mask: u128, len| runs(mask, len).collect::<heapless::Vec<_, 8>>();
        assert_eq!(collect(0b1110_0000, 16), [(5, 8)]);
        assert_eq!(collect(0b1011_0001, 16), [(0, 1), (4, 6), (7, 8)]);
        assert_eq!(collect(u128::MAX, 128), [(0, 128)]);
        assert_eq!(collect(u128::MAX, 32), [(0, 32)]);
        assert_eq!(collect(1 << 127 | 1, 128), [(0, 1), (127, 128)]);
        assert!(collect(0, 128).is_empty());
    }
}
