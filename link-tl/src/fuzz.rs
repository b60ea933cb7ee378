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
];

/// A packet as [`packet_of`] reads it, decoded as a coherence message: one that decodes must encode to
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

/// A packet as [`packet_of`] reads it. A packet that parses must emit again, and the emitted packet must
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
