//! Entry points for fuzzing the transaction layer's decoders with hostile input.
//!
//! Each function takes arbitrary bytes, drives one decoder with them and checks the properties that must
//! hold for any input (no panic, typed errors, round trips, no state corrupted). The cargo-fuzz targets in
//! `fuzz/` call these, and `tests/fuzz_replay.rs` replays the committed corpora and seeded random inputs
//! through the same functions, so CI needs no nightly toolchain.
//!
//! A property that does not hold is reported by panicking: that is what a fuzzer looks for.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::vec::Vec;

use link_dl::flit::{Flit, FLIT_LEN, MAX_PAYLOAD_FLITS};
use link_dl::Vc;
use link_phy::time::{Duration, Instant};

use crate::address::{AddressMap, Window};
use crate::header::{CompletionHeader, Status};
use crate::packet::{unsupported_request_reply, Completion, Packet, Read, RequestId, Tlp};
use crate::packetize::{ReadCompletions, Reassembler, Requests};
use crate::tags::Outstanding;

/// A fuzz entry point and the name of its cargo-fuzz target.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz entry point, by the name of its cargo-fuzz target.
pub const TARGETS: &[Target] = &[
    ("tl_parse", tl_parse),
    ("tl_reassemble", tl_reassemble),
    ("coherence_decode", coherence_decode),
    ("endpoint_receive", endpoint_receive),
    ("coherence_receive", coherence_receive),
];

/// A packet as `packet_of` reads it, decoded as a coherence message: one that decodes must encode to
/// the same channel, header and flits.
pub fn coherence_decode(data: &[u8]) {
    use crate::coherence::{decode, encode};
    let (vc, tl, payload) = packet_of(data);
    let Ok(envelope) = decode::<64>(vc, tl, &payload) else {
        return;
    };
    let packet =
        encode(&envelope).unwrap_or_else(|e| panic!("{envelope:?} decoded but does not encode: {e}"));
    assert_eq!(
        (packet.vc(), packet.tl()),
        (vc, tl),
        "{envelope:?}: the header does not round-trip"
    );
    assert_eq!(
        packet.payload(),
        &payload[..],
        "{envelope:?}: the flits do not round-trip"
    );
}

/// Byte 0 picks the channel (bits 1:0), bytes 1-8 the 58-bit header (big-endian, top bits dropped), and
/// the rest, in 16-byte flits (the last zero-padded, at most 9), the flits after the header.
fn packet_of(data: &[u8]) -> (Vc, u64, Vec<Flit>) {
    let vc = Vc::from_bits(data.first().copied().unwrap_or(0));
    let mut head = [0u8; 8];
    let n = data.len().saturating_sub(1).min(8);
    head[..n].copy_from_slice(data.get(1..1 + n).unwrap_or(&[]));
    let tl = u64::from_be_bytes(head) & ((1 << 58) - 1);
    let mut payload: Vec<Flit> = Vec::new();
    for chunk in data
        .get(9..)
        .unwrap_or(&[])
        .chunks(FLIT_LEN)
        .take(MAX_PAYLOAD_FLITS)
    {
        let mut flit = [0u8; FLIT_LEN];
        flit[..chunk.len()].copy_from_slice(chunk);
        payload.push(flit);
    }
    (vc, tl, payload)
}

/// A packet as `packet_of` reads it. A packet that parses must emit again, and the emitted packet must
/// parse to the same thing with the same header.
pub fn tl_parse(data: &[u8]) {
    let (vc, tl, payload) = packet_of(data);
    let mut reply = Packet::new();
    if unsupported_request_reply(vc, &payload, 1, &mut reply) {
        assert!(
            matches!(reply.parse(), Ok(Tlp::Completion(c)) if c.header.status == Status::UnsupportedRequest)
        );
    }
    let Ok(tlp) = Tlp::parse(vc, tl, &payload) else {
        return;
    };
    let mut out = Packet::new();
    tlp.emit(&mut out)
        .unwrap_or_else(|e| panic!("{tlp:?} parsed but does not emit: {e}"));
    assert_eq!(out.vc(), vc);
    assert_eq!(out.tl(), tl, "the header does not round-trip");
    assert_eq!(
        out.payload().len(),
        payload.len(),
        "the flit count does not round-trip"
    );
    assert_eq!(out.parse(), Ok(tlp), "the emitted packet parses differently");
}

/// Issues reads of a range under an 8-entry tag table, then plays bytes as events: genuine completions
/// (in any order, duplicated), forged ones (any tag, offset, length, status, completer), and time passing.
/// Whatever happens, nothing is written outside the range, every byte delivered is the source's byte,
/// every request ends once, and the table's counters add up.
pub fn tl_reassemble(data: &[u8]) {
    let mut input = data.iter().copied();
    let mut byte = move || input.next();
    let mut map = AddressMap::<1>::new();
    map.insert(Window::flat(3, 1 << 20)).unwrap();
    let start = u64::from(byte().unwrap_or(0)) * 37 + u64::from(byte().unwrap_or(0));
    let len = 1 + (usize::from(byte().unwrap_or(0)) << 5 | usize::from(byte().unwrap_or(0)) & 31);
    let source: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(7))
        .collect();
    let mut table = Outstanding::<8>::new(Duration::from_us(1));
    let mut now = Instant::ZERO;
    let mut requests = Requests::reads(&map, 3 << 47 | start, len as u64, 9);
    let mut dst = std::vec![0u8; len + 64];
    let mut issued: Vec<(Read, bool)> = Vec::new();
    let mut packet = Packet::new();

    loop {
        // Issue what the table has tags for.
        while let Some(Ok(())) = requests.next_into(&mut table, now, &mut packet) {
            let Ok(Tlp::Read(read)) = packet.parse() else {
                panic!("a read request did not parse")
            };
            issued.push((read, false));
        }
        let Some(event) = byte() else { break };
        let pick = usize::from(byte().unwrap_or(0));
        let mut reassembler = Reassembler::new(&mut dst[..len]);
        match event % 4 {
            0 | 1 if !issued.is_empty() => {
                // A genuine completion piece of one of the requests, possibly again.
                let (read, _) = issued[pick % issued.len()];
                let at = usize::try_from(read.addr - start).unwrap();
                let mut pieces =
                    ReadCompletions::new(read, 3, &source[at..at + usize::from(read.len)]).unwrap();
                let nth = usize::from(byte().unwrap_or(0)) % usize::from(read.len).div_ceil(128);
                let piece = pieces.nth(nth).unwrap().unwrap();
                let Ok(Tlp::Completion(c)) = piece.parse() else {
                    panic!("a completion did not parse")
                };
                note(
                    &mut issued,
                    read.id,
                    reassembler.accept(&mut table, now, &c).map(|d| d.finished),
                );
            }
            2 => {
                // A forged completion.
                let mut b = [0u8; 6];
                b.iter_mut().for_each(|x| *x = byte().unwrap_or(0));
                let header = CompletionHeader {
                    requester: 9,
                    completer: u16::from(b[0] & 3) + 2,
                    tag: u16::from_le_bytes([b[1], b[2]]) & 0x3FF,
                    status: Status::from_bits(b[3]),
                    offset: u16::from(b[4]) * 8,
                    len: b[5] % 129,
                };
                let data = &[0xEE; 128][..usize::from(header.len)];
                let forged = Completion { header, data };
                let id = RequestId {
                    requester: 9,
                    tag: header.tag,
                };
                note(
                    &mut issued,
                    id,
                    reassembler.accept(&mut table, now, &forged).map(|d| d.finished),
                );
            }
            _ => {
                now += Duration::from_ns(pick as u64 * 20);
                while let Some(expired) = table.expire(now) {
                    let id = RequestId {
                        requester: 9,
                        tag: expired.tag,
                    };
                    note(&mut issued, id, Ok(Some(Status::CompleterAbort)));
                }
            }
        }
    }

    let c = table.counters();
    assert_eq!(
        c.issued,
        c.completed + c.timeouts + table.outstanding() as u64,
        "counters do not add up"
    );
    assert!(dst[len..].iter().all(|&b| b == 0), "bytes written past the range");
    for (i, (&got, &want)) in dst[..len].iter().zip(&source).enumerate() {
        assert!(
            got == 0 || got == want || got == 0xEE,
            "byte {i} is {got:#x}, neither the source nor forged"
        );
    }
}

/// A sink for an endpoint's packets: it takes them while `open`, and keeps what it took.
struct Sink {
    open: bool,
    sent: Vec<Packet>,
}

impl crate::ordering::LinkTx for Sink {
    fn can_send(&self, _: Vc, _: usize) -> bool {
        self.open
    }

    fn send(&mut self, vc: Vc, tl: u64, payload: &[Flit]) -> Result<(), link_dl::DlError> {
        if !self.open {
            return Err(link_dl::DlError::LinkNotActive);
        }
        let mut received = link_dl::Received::empty(vc);
        received.tl = tl;
        received.payload.extend_from_slice(payload).unwrap();
        self.sent.push(Packet::from_received(&received));
        Ok(())
    }
}

/// Endpoint 1, with 4 KiB of memory and a window onto endpoint 2's, starts a copy from endpoint 2, a copy
/// to it and an atomic, then plays bytes as events: any packet on any channel (as `packet_of` reads a
/// run of the bytes), a genuine answer to a request it sent (in any order, again), a completion forged
/// for one (any offset, length, status and completer), transmitting (the link open or not), time
/// passing, events taken. Whatever arrives, nothing panics,
/// every transfer and atomic ends at most once, and the tag table's counters add up.
pub fn endpoint_receive(data: &[u8]) {
    use crate::endpoint::{Done, Endpoint, Event};
    use crate::header::Opcode;
    use crate::packet::AtomicOp;

    let mut input = data.iter().copied();
    let mut byte = move || input.next();
    let mut map = AddressMap::<1>::new();
    map.insert(Window::flat(2, 1 << 20)).unwrap();
    let mut memory = [0u8; 4096];
    let timeout = Duration::from_us(2);
    let mut ep: Endpoint<'_, &mut [u8; 4096], 1, 8, 2, 4, 32, 4> =
        Endpoint::new(1, &mut memory, &map, timeout);
    let peer = 2u64 << 47;
    let (from, to) = (
        ep.copy_from(peer | 100, 0, 600).unwrap(),
        ep.copy_to(1000, peer | 5000, 300).unwrap(),
    );
    let mut now = Instant::ZERO;
    let atomic = ep.atomic(now, AtomicOp::FetchAdd, peer | 64, 8, 5, 0).unwrap();
    let mut link = Sink {
        open: true,
        sent: Vec::new(),
    };
    let mut ended: Vec<crate::endpoint::Handle> = Vec::new();
    let mut take_events = |ep: &mut Endpoint<'_, _, 1, 8, 2, 4, 32, 4>| {
        while let Some(event) = ep.poll_event() {
            if let Event::Done(Done::Transfer { handle, .. } | Done::Atomic { handle, .. }) = event {
                assert!(
                    [from, to, atomic].contains(&handle),
                    "{handle:?} was never started"
                );
                assert!(!ended.contains(&handle), "{handle:?} ended twice");
                ended.push(handle);
            }
        }
    };
    ep.poll_transmit(now, &mut link);

    while let Some(event) = byte() {
        match event % 6 {
            0 => {
                // Any packet: a run of up to 160 bytes.
                let n = usize::from(byte().unwrap_or(0)) % 161;
                let bytes: Vec<u8> = (0..n).map_while(|_| byte()).collect();
                let (vc, tl, payload) = packet_of(&bytes);
                let _ = ep.receive(now, vc, tl, &payload);
            }
            1 if !link.sent.is_empty() => {
                // A genuine answer to one of the requests it sent, perhaps again: a piece of a read's
                // completions, or an atomic's old value.
                let pick = usize::from(byte().unwrap_or(0)) % link.sent.len();
                let nth = usize::from(byte().unwrap_or(0));
                let mut reply = Packet::new();
                match link.sent[pick].parse() {
                    Ok(Tlp::Read(read)) => {
                        let data = [0x5Au8; 4096];
                        let pieces: Vec<Packet> =
                            ReadCompletions::new(read, 2, &data[..usize::from(read.len)])
                                .unwrap()
                                .map(Result::unwrap)
                                .collect();
                        reply = pieces[nth % pieces.len()].clone();
                    }
                    Ok(Tlp::Atomic(a)) => {
                        let header = CompletionHeader {
                            requester: a.id.requester,
                            completer: 2,
                            tag: a.id.tag,
                            status: Status::Success,
                            offset: 0,
                            len: a.size,
                        };
                        let data = [7u8; 8];
                        let answer = Completion {
                            header,
                            data: &data[..usize::from(a.size)],
                        };
                        Tlp::Completion(answer).emit(&mut reply).unwrap();
                    }
                    _ => continue,
                }
                let _ = ep.receive(now, reply.vc(), reply.tl(), reply.payload());
            }
            2 if !link.sent.is_empty() => {
                // A completion forged for one of the requests it sent: any status, offset and length,
                // perhaps from another completer.
                let pick = usize::from(byte().unwrap_or(0)) % link.sent.len();
                let Some(id) = link.sent[pick].parse().ok().and_then(|t| t.request_id()) else {
                    continue;
                };
                let b: Vec<u8> = (0..4).map(|_| byte().unwrap_or(0)).collect();
                let status = Status::from_bits(b[0]);
                let len = if status == Status::Success { b[3] % 129 } else { 0 };
                let header = CompletionHeader {
                    requester: id.requester,
                    completer: if b[0] & 0x80 == 0 { 2 } else { 3 },
                    tag: id.tag,
                    status,
                    offset: if len == 0 {
                        0
                    } else {
                        u16::from_le_bytes([b[1], b[2] & 0x0F])
                    },
                    len,
                };
                let data = [0xA5u8; 128];
                let forged = Completion {
                    header,
                    data: &data[..usize::from(len)],
                };
                let mut packet = Packet::new();
                if Tlp::Completion(forged).emit(&mut packet).is_ok() {
                    let _ = ep.receive(now, packet.vc(), packet.tl(), packet.payload());
                }
            }
            3 => {
                link.open = byte().unwrap_or(0) & 1 == 0;
                ep.poll_transmit(now, &mut link);
            }
            4 => {
                now += Duration::from_ns(u64::from(byte().unwrap_or(0)) * 20);
                ep.handle_timeout(now);
            }
            _ => take_events(&mut ep),
        }
    }
    take_events(&mut ep);
    let t = ep.counters().tags;
    assert_eq!(
        t.issued,
        t.completed + t.timeouts + ep.requester().outstanding() as u64,
        "tag counters do not add up: {t:?}"
    );
    // Every request on the wire is one the endpoint or its completer made.
    for p in &link.sent {
        let op = crate::header::opcode_bits(p.tl());
        assert!(Opcode::from_bits(op).is_ok(), "sent an unknown opcode {op:#x}");
    }
}

/// A coherence message of any kind from four bytes: kind (bits 2:0) and phase (bit 3), line (0-4, or a
/// line far out of range when bit 7 is set), code, data.
fn coherence_message(b: [u8; 4]) -> Option<crate::coherence::Message<64>> {
    use crate::coherence::{CacheState, ForwardKind, Message, RequestKind, SnoopKind, SnoopResponseKind};
    let line = if b[1] & 0x80 != 0 {
        u32::from(b[1]) << 20
    } else {
        u32::from(b[1] % 5)
    };
    let (code, data) = (b[2] % 8, [b[3]; 64]);
    Some(match b[0] % 8 {
        0 => Message::Request {
            line,
            kind: RequestKind::from_code(code)?,
        },
        1 => Message::Snoop {
            line,
            kind: SnoopKind::from_code(code)?,
            phase: b[0] & 8 != 0,
        },
        2 => Message::SnoopResponse {
            line,
            kind: SnoopResponseKind::from_code(code)?,
        },
        3 => Message::SnoopResponseData {
            line,
            kind: ForwardKind::from_code(code)?,
            data,
        },
        4 => Message::Go {
            line,
            state: CacheState::from_bits(code),
        },
        5 => Message::GoData {
            line,
            state: CacheState::from_bits(code),
            data,
        },
        6 => Message::GoWritePull { line },
        _ => Message::WriteBack { line, data },
    })
}

/// A home of four lines and its three caching agents, played by bytes (each event's low four bits say
/// what, its high four which agent, 3 being none): any message to the home from any
/// agent (one that does not exist too) or to any agent, core operations submitted, and the home's and the
/// agents' own messages delivered as the links would. Whatever arrives, nothing panics, and a message
/// refused leaves the home or agent exactly as it was (its documented contract); and until the first
/// message from the bytes, when every message is one the engines sent, none is refused (however long a
/// channel is held up: an agent's response queue has room for one message per line, all a conforming home
/// ever makes it hold).
pub fn coherence_receive(data: &[u8]) {
    use crate::coherence::{CachingAgent, CoreOp, HomeAgent};

    let mut input = data.iter().copied();
    let mut byte = move || input.next();
    let mut home: HomeAgent<4, 3> = HomeAgent::new();
    let mut agents: [CachingAgent<4>; 3] = core::array::from_fn(|_| CachingAgent::new());
    // Whether a message from the bytes has been delivered: after one, refusals are expected.
    let mut forged = false;
    while let Some(event) = byte() {
        let a = usize::from(event >> 4) % 4;
        let mut four = || [0; 4].map(|_: u8| byte().unwrap_or(0));
        match (event & 0x0F) % 6 {
            0 => {
                let Some(m) = coherence_message(four()) else {
                    continue;
                };
                forged = true;
                let before = home.clone();
                if let Err(e) = home.receive(a, m) {
                    assert!(
                        home == before,
                        "the home refused {m:?} from {a} ({e}) but changed"
                    );
                }
            }
            1 => {
                let (Some(m), Some(agent)) = (coherence_message(four()), agents.get_mut(a)) else {
                    continue;
                };
                forged = true;
                let before = agent.clone();
                if let Err(e) = agent.receive(m) {
                    assert!(*agent == before, "agent {a} refused {m:?} ({e}) but changed");
                }
            }
            2 => {
                let b = four();
                let op = match b[0] % 5 {
                    0 => CoreOp::Load,
                    1 => CoreOp::LoadShared,
                    2 => CoreOp::ReadCurrent,
                    3 => CoreOp::Store([b[2]; 64]),
                    _ => CoreOp::Evict,
                };
                if let Some(agent) = agents.get_mut(a) {
                    let _ = agent.submit(u32::from(b[1] % 6), op);
                }
            }
            3 => {
                // The home's next messages to agent `a`, delivered (only the snoop for event 9, so that
                // snoops can run ahead of GOs).
                let vcs: &[Vc] = if event & 0x0F == 9 {
                    &[Vc::Snoop]
                } else {
                    &[Vc::Snoop, Vc::Response]
                };
                for &vc in vcs {
                    if let (Some(m), Some(agent)) = (home.pop_transmit(a, vc), agents.get_mut(a)) {
                        let outcome = agent.receive(m);
                        assert!(forged || outcome.is_ok(), "agent {a} refused {m:?} ({outcome:?})");
                    }
                }
            }
            4 => {
                // Agent `a`'s next messages to the home, delivered (only the request for event 10, so that
                // the agent's response channel can be held up).
                let vcs: &[Vc] = if event & 0x0F == 10 {
                    &[Vc::Request]
                } else {
                    &[Vc::Request, Vc::Response]
                };
                if let Some(agent) = agents.get_mut(a) {
                    for &vc in vcs {
                        if let Some(m) = agent.pop_transmit(vc) {
                            let outcome = home.receive(a, m);
                            assert!(
                                forged || outcome.is_ok(),
                                "the home refused {m:?} from {a} ({outcome:?})"
                            );
                        }
                    }
                }
            }
            _ => {
                if let Some(agent) = agents.get_mut(a) {
                    while agent.poll_completion().is_some() {}
                }
            }
        }
    }
}

/// Record that request `id` finished; a request must not finish twice.
fn note(issued: &mut [(Read, bool)], id: RequestId, outcome: Result<Option<Status>, crate::TlError>) {
    if let Ok(Some(_)) = outcome {
        // The newest request under this tag is the one that finished (older ones ended before it was
        // reissued).
        if let Some((_, done)) = issued.iter_mut().rev().find(|(r, _)| r.id == id) {
            assert!(!*done, "request {id:?} finished twice");
            *done = true;
        }
    }
}
