//! The requester: DMA copies to and from peers' memory, and atomics, as packets under the ordering rules.
//!
//! A **copy to a peer** reads the local [`Memory`] a piece at a time ([`Pieces::data`]: never crossing a
//! 128-byte boundary or a window end) and sends each piece as a posted write ([`Packet::posted_write`]).
//! After the last piece it reads back the last byte it wrote to each window (a one-byte read *fence*): the
//! ordering rules keep that read behind the writes to the same completer, so its completion says that
//! peer has executed them all, or its error status says why not. A copy whose windows lead to several
//! endpoints fences each: one fence orders nothing at another completer.
//!
//! A **copy from a peer** is a run of reads of up to 4096 bytes ([`Requests::reads`]), each under a tag from
//! the outstanding-request table ([`Outstanding`]), which bounds the requests in flight and times them out.
//! Completions are matched by tag, in any order, and their data written into local memory at the place
//! their request's cookie and offset say.
//!
//! A transfer ends when everything is issued and every request it issued has ended; it then fails with the
//! first failure it met (an error status, a timeout, an unmapped address, local memory refusing), and
//! stops issuing at that failure.

use link_dl::Vc;
use link_phy::time::Instant;

use super::memory::{Access, Memory, MemoryError};
use crate::address::AddressMap;
use crate::error::TlError;
use crate::header::{check_endpoint, EndpointId, Extension, MessageCode, Status, Tag, MAX_DATA, MAX_TAGS};
use crate::ordering::Egress;
use crate::packet::{Atomic, AtomicOp, Completion, Message, Packet, RequestId, Tlp};
use crate::packetize::{Pieces, Requests};
use crate::tags::{Outstanding, Request, RequestKind, TagCounters};

/// Names a transfer or an atomic, in the event that reports its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Handle(pub u32);

/// Why a transfer or an atomic failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Failure {
    /// The completer answered with an error status.
    Status {
        /// The status (never success).
        status: Status,
        /// The byte offset, in the transfer, of the request it answered.
        offset: u64,
    },
    /// No completion came within the completion timeout.
    Timeout {
        /// The byte offset, in the transfer, of the request that timed out.
        offset: u64,
    },
    /// The transfer reached a global address outside every window; the pieces before it were sent.
    Unmapped {
        /// The global address.
        global: u64,
    },
    /// The local memory refused the data (a copy's source or destination).
    Local(MemoryError),
    /// A packet could not be built.
    Packet(TlError),
}

impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Failure::Status { status, offset } => {
                write!(
                    f,
                    "completer answered {status:?} for the request at offset {offset}"
                )
            }
            Failure::Timeout { offset } => write!(f, "completion timeout for the request at offset {offset}"),
            Failure::Unmapped { global } => write!(f, "global address {global:#x} is not mapped"),
            Failure::Local(e) => write!(f, "local memory: {e}"),
            Failure::Packet(e) => write!(f, "{e}"),
        }
    }
}

/// Which way a transfer moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Direction {
    /// Local memory to a peer (posted writes, then a fence read).
    ToPeer,
    /// A peer to local memory (reads).
    FromPeer,
}

/// What ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Done {
    /// A transfer: its bytes, or why it failed.
    Transfer {
        /// Which.
        handle: Handle,
        /// Which way.
        direction: Direction,
        /// Bytes copied (the whole length), or the first failure.
        result: Result<u64, Failure>,
    },
    /// An atomic: the old value, or why it failed.
    Atomic {
        /// Which.
        handle: Handle,
        /// The value before the operation (zero-extended from 4 bytes), or the failure.
        result: Result<u64, Failure>,
    },
}

/// Counters of the requester. They only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RequesterCounters {
    /// Transfers started.
    pub transfers: u64,
    /// Transfers that ended with a failure.
    pub transfers_failed: u64,
    /// Posted writes queued.
    pub posted_writes: u64,
    /// Read requests queued (fences included).
    pub reads: u64,
    /// Atomics queued.
    pub atomics: u64,
    /// Messages queued.
    pub messages: u64,
    /// Payload bytes queued in posted writes.
    pub bytes_written: u64,
    /// Read data bytes received and placed in local memory.
    pub bytes_read: u64,
    /// Completions received.
    pub completions: u64,
    /// Requests that ended with an error status.
    pub completion_errors: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Response-channel packets that did not parse as completions: dropped.
    pub malformed: u64,
    /// Completions addressed to another endpoint: dropped.
    pub misrouted: u64,
    /// Completions the outstanding-request table refused (unknown tag, late, wrong completer, duplicate
    /// or misplaced piece; [`TagCounters`] says which): dropped.
    pub refused: u64,
}

#[derive(Clone, Debug)]
enum Stage<'m, const W: usize> {
    /// Posted writes of the pieces.
    Writing(Pieces<'m, W>),
    /// Reads: of the range, or the one-byte fence after a copy to a peer.
    Reading {
        /// The requests.
        requests: Requests<'static, 'm, W>,
        /// Whether this is the fence.
        fence: bool,
    },
    /// Nothing more to issue; waiting for what is in flight.
    Draining,
}

#[derive(Clone, Debug)]
struct Transfer<'m, const W: usize> {
    handle: Handle,
    direction: Direction,
    local: u64,
    global: u64,
    len: u64,
    /// Bytes sent in posted writes (copies to a peer).
    written: u64,
    /// Bytes of those behind a fence issued (copies to a peer): a window's fence covers what was written
    /// to it.
    fenced: u64,
    stage: Stage<'m, W>,
    in_flight: u32,
    failure: Option<Failure>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    None,
    Transfer(u8),
    Atomic(Handle),
}

/// Transfers and atomics of one endpoint: `N` requests outstanding at most (the tag table), `T`
/// transfers at once, addresses through an address map of `W` windows.
#[derive(Clone, Debug)]
pub struct Requester<'m, const W: usize, const N: usize, const T: usize> {
    id: EndpointId,
    map: &'m AddressMap<W>,
    table: Outstanding<N>,
    owner: [Owner; N],
    transfers: [Option<Transfer<'m, W>>; T],
    next_handle: u32,
    counters: RequesterCounters,
}

impl<'m, const W: usize, const N: usize, const T: usize> Requester<'m, W, N, T> {
    const VALID: () = assert!(T >= 1 && T <= 256, "a requester runs 1 to 256 transfers at once");

    /// The requester of endpoint `id`, with `table` (its size and completion timeout) and `map`.
    pub fn new(id: EndpointId, map: &'m AddressMap<W>, table: Outstanding<N>) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        Requester {
            id,
            map,
            table,
            owner: [Owner::None; N],
            transfers: core::array::from_fn(|_| None),
            next_handle: 0,
            counters: RequesterCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &RequesterCounters {
        &self.counters
    }

    /// The outstanding-request table's counters.
    pub fn tag_counters(&self) -> &TagCounters {
        self.table.counters()
    }

    /// Requests in flight.
    pub fn outstanding(&self) -> usize {
        self.table.outstanding()
    }

    /// Transfers not yet ended.
    pub fn active_transfers(&self) -> usize {
        self.transfers.iter().flatten().count()
    }

    /// When [`Requester::handle_timeout`] next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.table.next_deadline()
    }

    fn handle(&mut self) -> Handle {
        let h = Handle(self.next_handle);
        self.next_handle = self.next_handle.wrapping_add(1);
        h
    }

    /// Start a transfer of `len` bytes between local address `local` and global address `global`.
    pub fn start<M: Memory + ?Sized>(
        &mut self,
        direction: Direction,
        local: u64,
        global: u64,
        len: u64,
        memory: &M,
    ) -> Result<Handle, TlError> {
        if len == 0 {
            return Err(TlError::BadLength { len: 0 });
        }
        // Its reads, or the fences that confirm its writes, need a header that can carry the requester.
        check_endpoint(self.id)?;
        let access = match direction {
            Direction::ToPeer => Access::Read,
            Direction::FromPeer => Access::Write,
        };
        let too_small = || TlError::BufferTooSmall {
            needed: usize::try_from(local.saturating_add(len)).unwrap_or(usize::MAX),
            got: usize::try_from(memory.size()).unwrap_or(usize::MAX),
        };
        let len_usize = usize::try_from(len).map_err(|_| too_small())?;
        memory.check(local, len_usize, access).map_err(|_| too_small())?;
        let Some(slot) = self.transfers.iter().position(Option::is_none) else {
            return Err(TlError::TransfersFull);
        };
        let stage = match direction {
            Direction::ToPeer => Stage::Writing(Pieces::data(self.map, global, len)),
            Direction::FromPeer => Stage::Reading {
                requests: Requests::reads(self.map, global, len, self.id),
                fence: false,
            },
        };
        let handle = self.handle();
        self.transfers[slot] = Some(Transfer {
            handle,
            direction,
            local,
            global,
            len,
            written: 0,
            fenced: 0,
            stage,
            in_flight: 0,
            failure: None,
        });
        self.counters.transfers += 1;
        Ok(handle)
    }

    /// Queue an atomic on `size` bytes (4 or 8, aligned to `size`) at global address `global`.
    #[allow(clippy::too_many_arguments)]
    pub fn atomic<const DEPTH: usize>(
        &mut self,
        now: Instant,
        op: AtomicOp,
        global: u64,
        size: u8,
        operand: u64,
        compare: u64,
        egress: &mut Egress<DEPTH>,
    ) -> Result<Handle, TlError> {
        if size != 4 && size != 8 {
            return Err(TlError::BadLength {
                len: usize::from(size),
            });
        }
        let (dest, addr) = self.map.translate(global)?;
        if addr % u64::from(size) != 0 {
            return Err(TlError::MisalignedAtomic { addr, size });
        }
        if !egress.has_room(Vc::Request) {
            return Err(TlError::QueueFull { vc: Vc::Request });
        }
        let request = Request {
            dest,
            addr,
            kind: RequestKind::Atomic { size },
            cookie: 0,
        };
        // A request its header cannot carry must not take a tag it would hold until it timed out.
        check_endpoint(self.id)?;
        let tag = self.table.allocate(now, request)?;
        let handle = self.handle();
        let mut packet = Packet::new();
        Tlp::Atomic(Atomic {
            dest,
            op,
            addr,
            size,
            id: RequestId {
                requester: self.id,
                tag,
            },
            operand,
            compare,
        })
        .emit(&mut packet)?;
        self.owner[usize::from(tag) % N] = Owner::Atomic(handle);
        self.counters.atomics += 1;
        // Room was checked above.
        let _ = egress.push(packet);
        Ok(handle)
    }

    /// Queue a message (doorbell, interrupt, vendor-defined) to `dest`.
    pub fn message<const DEPTH: usize>(
        &mut self,
        dest: EndpointId,
        code: MessageCode,
        index: u16,
        value: u64,
        data: &[u8],
        egress: &mut Egress<DEPTH>,
    ) -> Result<(), TlError> {
        if !egress.has_room(Vc::Posted) {
            return Err(TlError::QueueFull { vc: Vc::Posted });
        }
        let mut packet = Packet::new();
        Tlp::Message(Message {
            dest,
            code,
            index,
            source: self.id,
            value,
            data,
        })
        .emit(&mut packet)?;
        self.counters.messages += 1;
        egress.push(packet)
    }

    /// Issue what the transfers can issue now: as many packets as the transmit queues and the tag table
    /// take. Returns how many were queued.
    pub fn service<M: Memory + ?Sized, const DEPTH: usize>(
        &mut self,
        now: Instant,
        memory: &mut M,
        egress: &mut Egress<DEPTH>,
    ) -> usize {
        let mut queued = 0;
        for i in 0..T {
            queued += self.issue(i, now, memory, egress);
        }
        queued
    }

    fn issue<M: Memory + ?Sized, const DEPTH: usize>(
        &mut self,
        i: usize,
        now: Instant,
        memory: &mut M,
        egress: &mut Egress<DEPTH>,
    ) -> usize {
        let mut queued = 0;
        let Some(t) = self.transfers[i].as_mut() else {
            return 0;
        };
        let mut packet = Packet::new();
        let mut buf = [0u8; MAX_DATA];
        loop {
            if t.failure.is_some() {
                match t.stage {
                    // The pieces before the failure were sent: fence them all the same.
                    Stage::Writing(_) => t.stage = fence(self.map, t, self.id),
                    Stage::Reading { fence: false, .. } => t.stage = Stage::Draining,
                    _ => {}
                }
            }
            match &mut t.stage {
                Stage::Draining => return queued,
                Stage::Writing(pieces) => {
                    if !egress.has_room(Vc::Posted) {
                        return queued;
                    }
                    match pieces.next() {
                        None => t.stage = fence(self.map, t, self.id),
                        Some(Err(e)) => t.failure = Some(unmapped(e)),
                        Some(Ok(piece)) => {
                            let bytes = &mut buf[..piece.len];
                            if let Err(e) = memory.read(t.local + piece.offset, bytes) {
                                t.failure = Some(Failure::Local(e));
                                continue;
                            }
                            if let Err(e) = packet.posted_write(piece.endpoint, piece.local, bytes) {
                                t.failure = Some(Failure::Packet(e));
                                continue;
                            }
                            t.written += piece.len as u64;
                            self.counters.posted_writes += 1;
                            self.counters.bytes_written += piece.len as u64;
                            let _ = egress.push(packet.clone());
                            queued += 1;
                        }
                    }
                }
                Stage::Reading {
                    requests,
                    fence: is_fence,
                } => {
                    if !egress.has_room(Vc::Request) || self.table.available() == 0 {
                        return queued;
                    }
                    let is_fence = *is_fence;
                    match requests.next_into(&mut self.table, now, &mut packet) {
                        // A fence issued: the next window's, if the copy wrote to another.
                        None if is_fence => t.stage = fence(self.map, t, self.id),
                        None => t.stage = Stage::Draining,
                        Some(Err(TlError::NoFreeTag)) => return queued,
                        Some(Err(e)) => t.failure = Some(unmapped(e)),
                        Some(Ok(())) => {
                            let tag = issued_tag(&packet);
                            self.owner[usize::from(tag) % N] = Owner::Transfer(i as u8);
                            t.in_flight += 1;
                            self.counters.reads += 1;
                            let _ = egress.push(packet.clone());
                            queued += 1;
                        }
                    }
                }
            }
        }
    }

    /// A packet from the response channel: match it to its request and place its data. Every completion
    /// that does not fit a request is counted and dropped; `done` hears of an atomic that ended.
    pub fn completion<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        tl: u64,
        payload: &[link_dl::flit::Flit],
        memory: &mut M,
        done: &mut impl FnMut(Done),
    ) {
        let c = match Completion::parse(tl, payload) {
            Ok(c) => c,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        if c.header.requester != self.id {
            self.counters.misrouted += 1;
            return;
        }
        self.counters.completions += 1;
        let delivery = match self.table.complete(now, &c.header) {
            Ok(d) => d,
            Err(_) => {
                self.counters.refused += 1;
                return;
            }
        };
        let slot = usize::from(delivery.tag) % N;
        if delivery.finished.is_some_and(|s| s != Status::Success) {
            self.counters.completion_errors += 1;
        }
        match self.owner[slot] {
            Owner::Transfer(i) => {
                let Some(t) = self.transfers.get_mut(usize::from(i)).and_then(Option::as_mut) else {
                    return;
                };
                if t.direction == Direction::FromPeer && !c.data.is_empty() {
                    let at = t.local + delivery.cookie + u64::from(delivery.offset);
                    match memory.write(at, c.data) {
                        Ok(()) => self.counters.bytes_read += c.data.len() as u64,
                        Err(e) => {
                            t.failure.get_or_insert(Failure::Local(e));
                        }
                    }
                }
                if let Some(status) = delivery.finished {
                    self.owner[slot] = Owner::None;
                    t.in_flight = t.in_flight.saturating_sub(1);
                    if status != Status::Success {
                        // A read's offset in the transfer, or the byte a fence read.
                        let offset = delivery.cookie;
                        t.failure.get_or_insert(Failure::Status { status, offset });
                    }
                }
            }
            Owner::Atomic(handle) => {
                if let Some(status) = delivery.finished {
                    self.owner[slot] = Owner::None;
                    let result = if status == Status::Success {
                        let mut old = [0u8; 8];
                        let n = c.data.len().min(8);
                        old[..n].copy_from_slice(&c.data[..n]);
                        Ok(u64::from_le_bytes(old))
                    } else {
                        Err(Failure::Status { status, offset: 0 })
                    };
                    done(Done::Atomic { handle, result });
                }
            }
            Owner::None => {}
        }
    }

    /// Time out requests whose completion timeout has passed, while `room` says another report fits;
    /// `done` hears of each atomic that timed out (a transfer fails when it ends).
    pub fn handle_timeout(
        &mut self,
        now: Instant,
        mut room: impl FnMut() -> bool,
        done: &mut impl FnMut(Done),
    ) {
        while room() {
            let Some(expired) = self.table.expire(now) else {
                return;
            };
            self.counters.timeouts += 1;
            let slot = usize::from(expired.tag) % N;
            match core::mem::replace(&mut self.owner[slot], Owner::None) {
                Owner::Transfer(i) => {
                    if let Some(t) = self.transfers.get_mut(usize::from(i)).and_then(Option::as_mut) {
                        t.in_flight = t.in_flight.saturating_sub(1);
                        let offset = expired.request.cookie;
                        t.failure.get_or_insert(Failure::Timeout { offset });
                    }
                }
                Owner::Atomic(handle) => done(Done::Atomic {
                    handle,
                    result: Err(Failure::Timeout { offset: 0 }),
                }),
                Owner::None => {}
            }
        }
    }

    /// Report transfers that have ended, while `room` says another report fits.
    pub fn reap(&mut self, mut room: impl FnMut() -> bool, done: &mut impl FnMut(Done)) {
        for slot in self.transfers.iter_mut() {
            let ended = slot
                .as_ref()
                .is_some_and(|t| matches!(t.stage, Stage::Draining) && t.in_flight == 0);
            if !ended || !room() {
                continue;
            }
            let Some(t) = slot.take() else { continue };
            let result = match t.failure {
                Some(f) => {
                    self.counters.transfers_failed += 1;
                    Err(f)
                }
                None => Ok(t.len),
            };
            done(Done::Transfer {
                handle: t.handle,
                direction: t.direction,
                result,
            });
        }
    }
}

/// After the posted writes of a copy to a peer: a one-byte read of the last byte written to the first
/// window not yet fenced (its cookie that byte's offset in the transfer), or nothing once every byte
/// written is behind a fence.
fn fence<'m, const W: usize>(
    map: &'m AddressMap<W>,
    t: &mut Transfer<'m, W>,
    id: EndpointId,
) -> Stage<'m, W> {
    if t.fenced >= t.written {
        return Stage::Draining;
    }
    // Those bytes went out through the map, so it resolves them; were it to fail, one fence of the last.
    let end = map
        .resolve(t.global + t.fenced)
        .map_or(t.written, |span| t.written.min(t.fenced.saturating_add(span.len)));
    t.fenced = end;
    Stage::Reading {
        requests: Requests::reads(map, t.global + end - 1, 1, id).with_cookies_from(end - 1),
        fence: true,
    }
}

fn unmapped(e: TlError) -> Failure {
    match e {
        TlError::Unmapped { global } => Failure::Unmapped { global },
        e => Failure::Packet(e),
    }
}

/// The tag of a request just written by [`Requests::next_into`] (its extension flit says).
fn issued_tag(packet: &Packet) -> Tag {
    packet
        .payload()
        .first()
        .and_then(|x| Extension::parse(x).ok())
        .map_or(MAX_TAGS as Tag, |x| x.tag)
}

#[cfg(test)]
mod tests {
    use std::vec::Vec as StdVec;

    use link_dl::flit::Flit;
    use link_phy::time::Duration;

    use super::*;
    use crate::address::Window;
    use crate::header::CompletionHeader;
    use crate::ordering::LinkTx;
    use crate::packet::Read;

    /// A data link that takes everything, and keeps it.
    #[derive(Default)]
    struct Sent(StdVec<(Vc, u64, StdVec<Flit>)>);

    impl LinkTx for Sent {
        fn can_send(&self, _: Vc, _: usize) -> bool {
            true
        }

        fn send(&mut self, vc: Vc, tl: u64, payload: &[Flit]) -> Result<(), link_dl::DlError> {
            self.0.push((vc, tl, payload.to_vec()));
            Ok(())
        }
    }

    fn answer<const W: usize, const N: usize, const T: usize>(
        r: &mut Requester<'_, W, N, T>,
        read: &Read,
        status: Status,
        memory: &mut [u8],
    ) {
        let header = CompletionHeader {
            requester: 0,
            completer: read.dest,
            tag: read.id.tag,
            status,
            offset: 0,
            len: if status == Status::Success { 1 } else { 0 },
        };
        let data: &[u8] = if status == Status::Success { &[7] } else { &[] };
        let mut packet = Packet::new();
        Tlp::Completion(Completion { header, data })
            .emit(&mut packet)
            .unwrap();
        r.completion(Instant::ZERO, packet.tl(), packet.payload(), memory, &mut |d| {
            panic!("{d:?} reported for a transfer's completion")
        });
    }

    /// A copy whose windows lead to two endpoints reads back a fence from each (a read orders only the
    /// writes to its own completer), ends only when both have answered, and a fence refused reports the
    /// byte it read. One fence, of the last byte, had let the copy end before the first endpoint had
    /// executed its writes.
    #[test]
    fn a_copy_to_two_endpoints_fences_each_and_waits_for_both() {
        let mut map: AddressMap<2> = AddressMap::new();
        for (base, endpoint, local_base) in [(0x1_0000, 1, 0x1000), (0x1_1000, 2, 0x2000)] {
            map.insert(Window {
                base,
                len: 0x1000,
                endpoint,
                local_base,
            })
            .unwrap();
        }
        for first_answer in [Status::Success, Status::CompleterAbort] {
            let mut r: Requester<'_, 2, 8, 1> =
                Requester::new(0, &map, Outstanding::new(Duration::from_us(10)));
            let mut memory = [7u8; 512];
            // 128 bytes to endpoint 1 (0x1_0F80 to 0x1_0FFF), 172 to endpoint 2.
            let handle = r.start(Direction::ToPeer, 0, 0x1_0F80, 300, &memory[..]).unwrap();
            let mut egress: Egress<64> = Egress::new();
            r.service(Instant::ZERO, &mut memory[..], &mut egress);
            let mut link = Sent::default();
            egress.pump(&mut link);
            let fences: StdVec<Read> = link
                .0
                .iter()
                .filter_map(|(vc, tl, payload)| match Tlp::parse(*vc, *tl, payload) {
                    Ok(Tlp::Read(read)) => Some(read),
                    _ => None,
                })
                .collect();
            let asked: StdVec<_> = fences.iter().map(|f| (f.dest, f.addr, f.len)).collect();
            assert_eq!(asked, [(1, 0x1FFF, 1), (2, 0x20AB, 1)]);
            let mut ended = StdVec::new();
            answer(&mut r, &fences[1], Status::Success, &mut memory);
            r.reap(|| true, &mut |d| ended.push(d));
            assert_eq!(ended, [], "ended with endpoint 1's writes unconfirmed");
            answer(&mut r, &fences[0], first_answer, &mut memory);
            r.reap(|| true, &mut |d| ended.push(d));
            let result = match first_answer {
                Status::Success => Ok(300),
                status => Err(Failure::Status { status, offset: 127 }),
            };
            let transfer = Done::Transfer {
                handle,
                direction: Direction::ToPeer,
                result,
            };
            assert_eq!(ended, [transfer]);
        }
    }

    /// A copy by a requester whose own ID no header can carry (1024 and up) is refused whole, as an atomic
    /// is: its reads, or the fences that confirm its writes, could never be issued. Since
    /// `Requests::next_into` refuses such a request on every call, a copy to a peer that was let start
    /// spun for ever trying to issue its fence.
    #[test]
    fn a_copy_by_a_requester_id_beyond_1023_is_refused() {
        let mut map: AddressMap<1> = AddressMap::new();
        map.insert(Window {
            base: 0x1_0000,
            len: 0x1000,
            endpoint: 1,
            local_base: 0,
        })
        .unwrap();
        let mut r: Requester<'_, 1, 8, 1> =
            Requester::new(1024, &map, Outstanding::new(Duration::from_us(10)));
        let memory = [7u8; 512];
        for direction in [Direction::ToPeer, Direction::FromPeer] {
            assert_eq!(
                r.start(direction, 0, 0x1_0000, 64, &memory[..]),
                Err(TlError::EndpointOutOfRange { endpoint: 1024 })
            );
        }
        assert_eq!(r.counters.transfers, 0);
    }
}
