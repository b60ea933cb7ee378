//! Transfers through two data links connected directly: posted writes of a buffer, read back through
//! out-of-order completions, a read that must see the write queued before it, atomics, and the wire
//! efficiency target (one header flit per 128 bytes of aligned posted writes).

use link_dl::flit::FLIT_LEN;
use link_dl::link::unit_time;
use link_dl::{DataLink, DlConfig, Received, Vc};
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};
use link_tl::header::{CompletionHeader, Status};
use link_tl::packet::{
    error_completion, unsupported_request_reply, Atomic, AtomicOp, Completion, Packet, RequestId,
};
use link_tl::packetize::Requests;
use link_tl::tags::{Outstanding, Request, RequestKind};
use link_tl::{AddressMap, Egress, PostedWrites, ReadCompletions, Reassembler, Tlp, Window};

const A: u16 = 1;
const B: u16 = 2;
const B_MEMORY: usize = 256 * 1024;

/// Two data links wired back to back, and the transaction layer's queues on each side.
struct Pair {
    a: DataLink,
    b: DataLink,
    a_out: Egress<16>,
    b_out: Egress<16>,
    now: Instant,
    unit: Duration,
    index: u64,
}

impl Pair {
    fn new() -> Pair {
        let mut pair = Pair {
            a: DataLink::new(DlConfig::default()),
            b: DataLink::new(DlConfig::default()),
            a_out: Egress::new(),
            b_out: Egress::new(),
            now: Instant::ZERO,
            unit: unit_time(LinkWidth::X8, Rate::Gen3),
            index: 0,
        };
        pair.a.phy_up(pair.now, LinkWidth::X8, Rate::Gen3);
        pair.b.phy_up(pair.now, LinkWidth::X8, Rate::Gen3);
        for _ in 0..1000 {
            if pair.a.is_active() && pair.b.is_active() {
                return pair;
            }
            pair.step();
        }
        panic!("the links did not come up");
    }

    /// One unit each way.
    fn step(&mut self) {
        let (mut ab, mut ba) = ([0u8; FLIT_LEN], [0u8; FLIT_LEN]);
        self.a.poll_unit(self.now, &mut ab);
        self.b.poll_unit(self.now, &mut ba);
        self.b.receive_unit(self.now, &ab, self.index);
        self.a.receive_unit(self.now, &ba, self.index);
        self.index += 1;
        self.now += self.unit;
    }

    fn pump(&mut self) {
        self.a_out.pump(&mut self.a);
        self.b_out.pump(&mut self.b);
        self.step();
    }
}

/// Endpoint B: a memory that serves posted writes, reads (answering each read's completions in reverse,
/// so they arrive out of order), atomics, and refuses what is outside it.
struct Target {
    memory: Vec<u8>,
    /// Received packets: (flits after the header) per packet, by channel.
    posted_payloads: Vec<usize>,
    pending: Vec<Packet>,
}

impl Target {
    fn serve(&mut self, r: &Received) {
        let mut reply = Packet::new();
        let tlp = match Tlp::parse(r.vc, r.tl, &r.payload) {
            Ok(tlp) => tlp,
            Err(_) => {
                if unsupported_request_reply(r.vc, &r.payload, B, &mut reply) {
                    self.pending.push(reply);
                }
                return;
            }
        };
        match tlp {
            Tlp::PostedWrite(w) => {
                self.posted_payloads.push(r.payload.len());
                for (i, &byte) in w.data.iter().enumerate() {
                    if w.enables.is_none_or(|m| m >> i & 1 == 1) {
                        self.memory[w.addr as usize + i] = byte;
                    }
                }
            }
            Tlp::Read(read) => {
                let (at, len) = (read.addr as usize, usize::from(read.len));
                let Some(bytes) = self.memory.get(at..at + len) else {
                    error_completion(read.id, B, Status::CompleterAbort, &mut reply).unwrap();
                    self.pending.push(reply);
                    return;
                };
                let mut answer: Vec<Packet> = ReadCompletions::new(read, B, bytes)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                answer.reverse();
                self.pending.extend(answer);
            }
            Tlp::Atomic(a) => {
                let at = a.addr as usize;
                let size = usize::from(a.size);
                let mut old = [0u8; 8];
                old[..size].copy_from_slice(&self.memory[at..at + size]);
                let old_value = u64::from_le_bytes(old);
                let new = match a.op {
                    AtomicOp::FetchAdd => old_value.wrapping_add(a.operand),
                    AtomicOp::Swap => a.operand,
                    AtomicOp::CompareSwap if old_value == a.compare => a.operand,
                    AtomicOp::CompareSwap => old_value,
                };
                self.memory[at..at + size].copy_from_slice(&new.to_le_bytes()[..size]);
                let header = CompletionHeader {
                    requester: a.id.requester,
                    completer: B,
                    tag: a.id.tag,
                    status: Status::Success,
                    offset: 0,
                    len: a.size,
                };
                Tlp::Completion(Completion {
                    header,
                    data: &old[..size],
                })
                .emit(&mut reply)
                .unwrap();
                self.pending.push(reply);
            }
            other => panic!("the target does not expect {other:?}"),
        }
    }
}

fn map() -> AddressMap<2> {
    let mut map = AddressMap::new();
    map.insert(Window::flat(B, B_MEMORY as u64 * 2)).unwrap();
    map
}

fn source(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(11) as u8)
        .collect()
}

/// Run until `finished` holds and every queue is empty, moving packets both ways: A's from `a_next`
/// (false when it has nothing more to queue now), B's from the target; A's receptions go to `on_a`.
fn run<S>(
    pair: &mut Pair,
    target: &mut Target,
    state: &mut S,
    mut a_next: impl FnMut(&mut Pair, &mut S) -> bool,
    mut on_a: impl FnMut(&mut Pair, &mut S, Received),
    finished: impl Fn(&Target, &S) -> bool,
) {
    for _ in 0..2_000_000 {
        while a_next(pair, state) {}
        while let Some(p) = target.pending.first() {
            if !pair.b_out.has_room(p.vc()) {
                break;
            }
            pair.b_out.push(target.pending.remove(0)).unwrap();
        }
        pair.pump();
        while let Some(r) = pair.b.recv() {
            target.serve(&r);
        }
        while let Some(r) = pair.a.recv() {
            on_a(pair, state, r);
        }
        let idle = pair.a_out.is_empty() && pair.b_out.is_empty() && target.pending.is_empty();
        if idle && finished(target, state) {
            return;
        }
    }
    panic!("the transfer did not finish");
}

/// Queue posted writes of `data` at `global` from A, and run until B has them all.
fn post(pair: &mut Pair, target: &mut Target, map: &AddressMap<2>, global: u64, data: &[u8]) {
    let mut writes = PostedWrites::new(map, global, data);
    let mut next: Option<Packet> = None;
    let expected =
        target.posted_payloads.len() + link_tl::Pieces::data(map, global, data.len() as u64).count();
    run(
        pair,
        target,
        &mut (),
        |pair, ()| {
            if next.is_none() {
                next = writes.next().map(Result::unwrap);
            }
            match next.take() {
                Some(p) if pair.a_out.has_room(Vc::Posted) => pair.a_out.push(p).is_ok(),
                other => {
                    next = other;
                    false
                }
            }
        },
        |_, (), _| panic!("A expects nothing back"),
        |target, ()| target.posted_payloads.len() == expected,
    );
}

/// A's side of a read: its requests, its tag table and where the bytes go.
struct Reader<'m, 'd> {
    requests: Requests<'static, 'm, 2>,
    table: Outstanding<16>,
    reassembler: Reassembler<'d>,
    issued: usize,
    finished: usize,
    statuses: Vec<Status>,
}

fn read_into(
    pair: &mut Pair,
    target: &mut Target,
    map: &AddressMap<2>,
    global: u64,
    dst: &mut [u8],
) -> (usize, Vec<Status>) {
    let mut reader = Reader {
        requests: Requests::reads(map, global, dst.len() as u64, A),
        table: Outstanding::new(Duration::from_ms(1)),
        reassembler: Reassembler::new(dst),
        issued: 0,
        finished: 0,
        statuses: Vec::new(),
    };
    let mut request = Packet::new();
    run(
        pair,
        target,
        &mut reader,
        |pair, r| {
            if !pair.a_out.has_room(Vc::Request) {
                return false;
            }
            match r.requests.next_into(&mut r.table, pair.now, &mut request) {
                Some(Ok(())) => {
                    r.issued += 1;
                    pair.a_out.push(request.clone()).is_ok()
                }
                _ => false,
            }
        },
        |pair, r, received| {
            let Ok(Tlp::Completion(c)) = Tlp::parse(received.vc, received.tl, &received.payload) else {
                panic!("A expects only completions")
            };
            let d = r.reassembler.accept(&mut r.table, pair.now, &c).unwrap();
            if let Some(status) = d.finished {
                r.finished += 1;
                r.statuses.push(status);
            }
        },
        |_, r| r.requests.is_done() && r.finished == r.issued,
    );
    assert_eq!(reader.table.outstanding(), 0);
    (reader.issued, reader.statuses)
}

fn target() -> Target {
    Target {
        memory: vec![0; B_MEMORY],
        posted_payloads: Vec::new(),
        pending: Vec::new(),
    }
}

#[test]
fn a_buffer_written_with_posted_writes_reads_back_through_out_of_order_completions() {
    let map = map();
    let mut pair = Pair::new();
    let mut target = target();
    let data = source(64 * 1024);
    let base = u64::from(B) << 47;

    let packets_before = pair.a.counters().packets_sent;
    post(&mut pair, &mut target, &map, base + 0x1000, &data);
    assert_eq!(&target.memory[0x1000..0x1000 + data.len()], &data[..]);
    // The wire-efficiency target: one header flit per 128 bytes of aligned posted writes, and nothing but
    // data after it (no extension, no byte enables).
    let packets = data.len() / 128;
    assert_eq!(pair.a.counters().packets_sent - packets_before, packets as u64);
    assert_eq!(target.posted_payloads.len(), packets);
    assert!(target
        .posted_payloads
        .iter()
        .all(|&flits| flits == 128 / FLIT_LEN));

    // Read it back from an unaligned address: 4 KiB per request, each answered in 33 or 32 completions,
    // last first.
    let mut dst = vec![0u8; data.len() - 3];
    let (issued, statuses) = read_into(&mut pair, &mut target, &map, base + 0x1003, &mut dst);
    assert_eq!(issued, dst.len().div_ceil(4096));
    assert!(statuses.iter().all(|&s| s == Status::Success));
    assert_eq!(dst, data[3..]);
}

#[test]
fn unaligned_writes_of_any_length_land_exactly() {
    let map = map();
    let mut pair = Pair::new();
    let mut target = target();
    let base = u64::from(B) << 47;
    for (i, (offset, len)) in [
        (0x2005u64, 1usize),
        (0x3011, 15),
        (0x4070, 17),
        (0x50F3, 1000),
        (0x8000, 129),
    ]
    .into_iter()
    .enumerate()
    {
        let data: Vec<u8> = source(len).into_iter().map(|b| b ^ i as u8 ^ 0x5A).collect();
        post(&mut pair, &mut target, &map, base + offset, &data);
        let at = offset as usize;
        assert_eq!(&target.memory[at..at + len], &data[..]);
        assert_eq!(target.memory[at - 1], 0, "byte before the write touched");
        assert_eq!(target.memory[at + len], 0, "byte after the write touched");
        let mut back = vec![0u8; len];
        read_into(&mut pair, &mut target, &map, base + offset, &mut back);
        assert_eq!(back, data);
    }
}

#[test]
fn a_read_sees_the_posted_write_queued_before_it() {
    let map = map();
    let mut pair = Pair::new();
    let mut target = target();
    let base = u64::from(B) << 47;
    // A burst of posted writes that outlasts the posted channel's credit, then a write and a read of the
    // same bytes queued at once: the read has credit of its own, but must wait behind the write.
    let burst = source(15 * 128);
    for p in PostedWrites::new(&map, base + 0x10000, &burst) {
        pair.a_out.push(p.unwrap()).unwrap();
    }
    let mut write = Packet::new();
    write.posted_write(B, 0x100, &[0xC3; 64]).unwrap();
    pair.a_out.push(write).unwrap();
    let mut table = Outstanding::<4>::new(Duration::from_ms(1));
    let mut requests = Requests::reads(&map, base + 0x100, 64, A);
    let mut request = Packet::new();
    requests
        .next_into(&mut table, pair.now, &mut request)
        .unwrap()
        .unwrap();
    pair.a_out.push(request).unwrap();
    let mut dst = [0u8; 64];
    let mut reassembler = Reassembler::new(&mut dst);
    let mut done = false;
    run(
        &mut pair,
        &mut target,
        &mut done,
        |_, _| false,
        |pair, done, r| {
            let Ok(Tlp::Completion(c)) = Tlp::parse(r.vc, r.tl, &r.payload) else {
                panic!()
            };
            *done |= reassembler
                .accept(&mut table, pair.now, &c)
                .unwrap()
                .finished
                .is_some();
        },
        |_, done| *done,
    );
    assert!(
        pair.a_out.counters().held_for_order > 0,
        "the read was never held: the test proves nothing"
    );
    assert_eq!(dst, [0xC3; 64], "the read passed the write");
    assert_eq!(&target.memory[0x10000..0x10000 + burst.len()], &burst[..]);
}

#[test]
fn atomics_and_refused_requests_complete_with_their_status() {
    let mut pair = Pair::new();
    let mut target = target();
    target.memory[0x40..0x48].copy_from_slice(&100u64.to_le_bytes());
    let mut table = Outstanding::<8>::new(Duration::from_ms(1));
    let ops = [
        (AtomicOp::FetchAdd, 8u8, 5u64, 0u64, 100u64),
        (AtomicOp::CompareSwap, 8, 7, 105, 105),
        (AtomicOp::CompareSwap, 8, 9, 1, 7),
        (AtomicOp::Swap, 4, 0xAABB_CCDD, 0, 7),
    ];
    let mut results = Vec::new();
    for (op, size, operand, compare, _) in ops {
        let request = Request {
            dest: B,
            addr: 0x40,
            kind: RequestKind::Atomic { size },
            cookie: 0,
        };
        let tag = table.allocate(pair.now, request).unwrap();
        let id = RequestId { requester: A, tag };
        let mut p = Packet::new();
        Tlp::Atomic(Atomic {
            dest: B,
            op,
            addr: 0x40,
            size,
            id,
            operand,
            compare,
        })
        .emit(&mut p)
        .unwrap();
        pair.a_out.push(p).unwrap();
        let before = results.len();
        run(
            &mut pair,
            &mut target,
            &mut results,
            |_, _| false,
            |pair, results, r| {
                let Ok(Tlp::Completion(c)) = Tlp::parse(r.vc, r.tl, &r.payload) else {
                    panic!()
                };
                let d = table.complete(pair.now, &c.header).unwrap();
                assert_eq!(d.finished, Some(Status::Success));
                let mut old = [0u8; 8];
                old[..c.data.len()].copy_from_slice(c.data);
                results.push(u64::from_le_bytes(old));
            },
            |_, results| results.len() > before,
        );
    }
    assert_eq!(results, ops.map(|o| o.4));
    assert_eq!(
        u64::from_le_bytes(target.memory[0x40..0x48].try_into().unwrap()),
        0xAABB_CCDD
    );

    // A read beyond B's memory is refused with completer abort.
    let mut map = AddressMap::<2>::new();
    map.insert(Window::flat(B, 1 << 40)).unwrap();
    let mut dst = vec![0u8; 256];
    let (_, statuses) = read_into(
        &mut pair,
        &mut target,
        &map,
        (u64::from(B) << 47) + B_MEMORY as u64,
        &mut dst,
    );
    assert_eq!(statuses, [Status::CompleterAbort]);
    assert!(dst.iter().all(|&b| b == 0));
}
