//! Packetizer properties: for arbitrary (address, length) the pieces tile the range exactly, none crosses a
//! 128-byte boundary, byte enables are exact, and data read back through out-of-order completions (several
//! per read) equals the source.

use std::collections::HashMap;

use link_phy::time::{Duration, Instant};
use link_tl::header::{Status, MAX_DATA};
use link_tl::packet::{Packet, Read, RequestId};
use link_tl::packetize::{Piece, Pieces, Requests};
use link_tl::tags::Outstanding;
use link_tl::{AddressMap, PostedWrites, ReadCompletions, Reassembler, TlError, Tlp, Window};
use proptest::prelude::*;
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Global [0x10_0000, 0x10_5000): 12 KiB of endpoint 1 from local 0x5000, then 8 KiB of endpoint 2 from 0.
const START: u64 = 0x10_0000;
const SPAN: u64 = 0x5000;

fn map() -> AddressMap<4> {
    let mut map = AddressMap::new();
    map.insert(Window {
        base: START,
        len: 0x3000,
        endpoint: 1,
        local_base: 0x5000,
    })
    .unwrap();
    map.insert(Window {
        base: START + 0x3000,
        len: 0x2000,
        endpoint: 2,
        local_base: 0,
    })
    .unwrap();
    map
}

fn source(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Memory of the two endpoints, with a sentinel so that bytes nobody wrote are visible.
struct Memory(HashMap<u16, Vec<u8>>);

impl Memory {
    fn new() -> Self {
        Memory(HashMap::from([(1, vec![0xA5; 0x8000]), (2, vec![0xA5; 0x8000])]))
    }

    fn read(&self, map: &AddressMap<4>, global: u64, len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|i| {
                let (ep, local) = map.translate(global + i).unwrap();
                self.0[&ep][local as usize]
            })
            .collect()
    }

    /// Apply a posted write as an endpoint would: each enabled byte at its address.
    fn apply(&mut self, packet: &Packet) -> usize {
        let Ok(Tlp::PostedWrite(w)) = packet.parse() else {
            panic!("not a posted write: {packet:?}")
        };
        let mem = self.0.get_mut(&w.dest).unwrap();
        let mut written = 0;
        for (i, &b) in w.data.iter().enumerate() {
            if w.enables.is_none_or(|m| m >> i & 1 == 1) {
                mem[w.addr as usize + i] = b;
                written += 1;
            }
        }
        written
    }
}

fn check_tiling(pieces: &[Piece], map: &AddressMap<4>, global: u64, len: u64, boundary: u64) {
    let mut next = 0;
    for p in pieces {
        assert_eq!(p.offset, next, "pieces are not contiguous");
        assert!(p.len >= 1 && p.len as u64 <= boundary);
        assert!(
            p.local % boundary + p.len as u64 <= boundary,
            "{p:?} crosses a {boundary}-byte boundary"
        );
        assert_eq!(map.translate(global + p.offset), Ok((p.endpoint, p.local)));
        // The whole piece is in one window.
        assert_eq!(
            map.translate(global + p.offset + p.len as u64 - 1),
            Ok((p.endpoint, p.local + p.len as u64 - 1))
        );
        next += p.len as u64;
    }
    assert_eq!(next, len, "pieces do not cover the range");
}

proptest! {
    #[test]
    fn pieces_tile_the_range_without_crossing_a_boundary(offset in 0..SPAN, len in 1..SPAN) {
        let map = map();
        let len = len.min(SPAN - offset);
        let global = START + offset;
        let data: Vec<Piece> = Pieces::data(&map, global, len).map(Result::unwrap).collect();
        check_tiling(&data, &map, global, len, 128);
        // Every piece but the first and last is a whole aligned 128 bytes.
        for p in data.iter().skip(1).rev().skip(1) {
            prop_assert!(p.len == 128 && p.local % 128 == 0);
        }
        let reads: Vec<Piece> = Pieces::reads(&map, global, len).map(Result::unwrap).collect();
        check_tiling(&reads, &map, global, len, 4096);
    }

    #[test]
    fn posted_writes_carry_exactly_the_bytes_with_exact_enables(offset in 0..SPAN, len in 1usize..3000) {
        let map = map();
        let len = len.min((SPAN - offset) as usize);
        let global = START + offset;
        let data = source(len, offset as u8);
        let mut memory = Memory::new();
        let mut written = 0;
        for packet in PostedWrites::new(&map, global, &data) {
            let packet = packet.unwrap();
            let Ok(Tlp::PostedWrite(w)) = packet.parse() else { panic!() };
            let flits = w.data.len() / 16;
            match w.enables {
                // Whole flits: header + data flits only.
                None => prop_assert_eq!(packet.flits(), 1 + flits),
                Some(mask) => {
                    // Enables are one contiguous run, and the flits hold nothing but it.
                    prop_assert_eq!(packet.flits(), 2 + flits);
                    let first = mask.trailing_zeros() as usize;
                    let count = mask.count_ones() as usize;
                    prop_assert_eq!(mask >> first, if count == 128 { u128::MAX } else { (1u128 << count) - 1 });
                    prop_assert!(first < 16 && 128 - (mask.leading_zeros() as usize) > 16 * (flits - 1));
                    prop_assert!(first != 0 || count % 16 != 0, "an aligned piece was sent partial");
                }
            }
            written += memory.apply(&packet);
        }
        prop_assert_eq!(written, len, "bytes written more or less than once");
        prop_assert_eq!(memory.read(&map, global, len), data);
        // Nothing either side of the range was touched.
        if offset > 0 {
            prop_assert_eq!(memory.read(&map, global - 1, 1), vec![0xA5]);
        }
        if offset + (len as u64) < SPAN {
            prop_assert_eq!(memory.read(&map, global + len as u64, 1), vec![0xA5]);
        }
    }

    #[test]
    fn reads_reassemble_from_out_of_order_completions(offset in 0..SPAN, len in 1u64..SPAN, seed in any::<u64>()) {
        let map = map();
        let len = len.min(SPAN - offset);
        let global = START + offset;
        let mut memory = Memory::new();
        for (ep, seed) in [(1u16, 3u8), (2, 7)] {
            memory.0.insert(ep, source(0x8000, seed));
        }
        let expected = memory.read(&map, global, len as usize);
        let mut table = Outstanding::<8>::new(Duration::from_us(100));
        let mut requests = Requests::reads(&map, global, len, 9);
        let mut dst = vec![0u8; len as usize];
        let mut reassembler = Reassembler::new(&mut dst);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut packet = Packet::new();
        let (mut finished, mut completions) = (0, 0);
        loop {
            // Issue as many reads as there are tags, then answer them all, shuffled together.
            let mut in_flight: Vec<Packet> = Vec::new();
            loop {
                match requests.next_into(&mut table, Instant::ZERO, &mut packet) {
                    Some(Ok(())) => {}
                    Some(Err(TlError::NoFreeTag)) | None => break,
                    Some(Err(e)) => panic!("{e}"),
                }
                let Ok(Tlp::Read(read)) = packet.parse() else { panic!() };
                let bytes = &memory.0[&read.dest][read.addr as usize..][..usize::from(read.len)];
                let answer = ReadCompletions::new(read, read.dest, bytes).unwrap();
                let pieces: Vec<Packet> = answer.map(Result::unwrap).collect();
                prop_assert_eq!(pieces.len() as u32, (read.addr % 128 + u64::from(read.len)).div_ceil(128) as u32);
                in_flight.extend(pieces);
            }
            if in_flight.is_empty() {
                break;
            }
            for i in (1..in_flight.len()).rev() {
                in_flight.swap(i, rng.next_u32() as usize % (i + 1));
            }
            for p in &in_flight {
                let Ok(Tlp::Completion(c)) = p.parse() else { panic!() };
                prop_assert!(c.data.len() <= MAX_DATA);
                let d = reassembler.accept(&mut table, Instant::ZERO, &c).unwrap();
                completions += 1;
                finished += usize::from(d.finished == Some(Status::Success));
            }
        }
        prop_assert!(requests.is_done());
        // Every read request finished, once.
        prop_assert_eq!(finished, Pieces::reads(&map, global, len).count());
        prop_assert_eq!(table.outstanding(), 0);
        prop_assert_eq!(table.counters().completed as usize, finished);
        prop_assert!(completions >= len.div_ceil(128) as usize);
        prop_assert_eq!(dst, expected);
    }
}

#[test]
fn non_posted_writes_are_pieces_under_tags() {
    let map = map();
    let data = source(1000, 1);
    let mut table = Outstanding::<16>::new(Duration::from_us(1));
    let mut requests = Requests::writes(&map, START + 0x2F80, &data, 4);
    let mut memory = Memory::new();
    let mut packet = Packet::new();
    let mut ids: Vec<RequestId> = Vec::new();
    while let Some(r) = requests.next_into(&mut table, Instant::ZERO, &mut packet) {
        r.unwrap();
        let Ok(Tlp::Write(w)) = packet.parse() else {
            panic!()
        };
        assert!(w.data.len() <= 128 && w.addr % 128 + w.data.len() as u64 <= 128);
        memory.0.get_mut(&w.dest).unwrap()[w.addr as usize..][..w.data.len()].copy_from_slice(w.data);
        ids.push(w.id);
    }
    // 0x80 bytes to the end of endpoint 1's window, then 872 bytes at endpoint 2: 1 + 7 pieces.
    assert_eq!(ids.len(), 8);
    assert_eq!(memory.read(&map, START + 0x2F80, 1000), data);
    for id in ids {
        let ep = table.get(id.tag).unwrap().dest;
        let header = link_tl::header::CompletionHeader {
            requester: 4,
            completer: ep,
            tag: id.tag,
            status: Status::Success,
            offset: 0,
            len: 0,
        };
        assert_eq!(
            table.complete(Instant::ZERO, &header).unwrap().finished,
            Some(Status::Success)
        );
    }
    assert_eq!(table.outstanding(), 0);
}

#[test]
fn a_gigabyte_dma_is_tiled_by_whole_128_byte_pieces() {
    let mut map = AddressMap::<1>::new();
    map.insert(Window::flat(3, 1 << 40)).unwrap();
    let len = 1u64 << 30;
    let (mut count, mut total, mut next) = (0u64, 0u64, 0u64);
    for p in Pieces::data(&map, 3 << 47, len) {
        let p = p.unwrap();
        assert!(p.len == 128 && p.local % 128 == 0 && p.offset == next);
        next += 128;
        count += 1;
        total += p.len as u64;
    }
    assert_eq!((count, total), (len / 128, len));
}

#[test]
fn one_byte_and_unmapped_transfers() {
    let map = map();
    let mut writes = PostedWrites::new(&map, START + 0x1235, &[0x42]);
    let packet = writes.next().unwrap().unwrap();
    assert!(writes.next().is_none());
    // Header, byte-enable flit, one data flit.
    assert_eq!(packet.flits(), 3);
    let Ok(Tlp::PostedWrite(w)) = packet.parse() else {
        panic!()
    };
    assert_eq!(
        (w.dest, w.addr, w.enables, w.data[5]),
        (1, 0x5000 + 0x1230, Some(1 << 5), 0x42)
    );
    // A range that runs off the map ends with a typed error after the mapped part.
    let pieces: Vec<_> = Pieces::data(&map, START + SPAN - 100, 200).collect();
    assert_eq!(pieces.len(), 2);
    assert!(pieces[0].is_ok());
    assert_eq!(pieces[1], Err(TlError::Unmapped { global: START + SPAN }));
    // A range past the end of the 64-bit space.
    let mut end = PostedWrites::new(&map, u64::MAX, &[1, 2]);
    assert_eq!(end.next(), Some(Err(TlError::Unmapped { global: u64::MAX })));
    assert_eq!(end.next(), None);
    // Completions for a read must carry exactly the bytes asked for.
    let read = Read {
        dest: 1,
        addr: 0,
        len: 10,
        id: RequestId::default(),
    };
    assert_eq!(
        ReadCompletions::new(read, 1, &[0; 9]).err(),
        Some(TlError::BufferTooSmall { needed: 10, got: 9 })
    );
}

/// A requester whose own ID no header can carry (1024 and up) gets a typed error for each request, and
/// the request takes no tag: one taken would be held until the completion timeout.
#[test]
fn a_requester_id_beyond_1023_takes_no_tag() {
    let map = map();
    let mut table = Outstanding::<4>::new(Duration::from_ms(1));
    let mut requests = Requests::reads(&map, START, 64, 1024);
    let mut out = Packet::new();
    assert_eq!(
        requests.next_into(&mut table, Instant::ZERO, &mut out),
        Some(Err(TlError::EndpointOutOfRange { endpoint: 1024 }))
    );
    assert_eq!(table.outstanding(), 0);
    assert_eq!(table.available(), 4);
}

/// A request refused for its requester's ID is refused whole: no piece of the transfer is dropped, so
/// the refusal repeats on every call and the transfer never looks issued (before, each refusal threw a
/// piece away, and a one-piece read then ended as if every request had gone out).
#[test]
fn a_request_refused_for_its_requester_loses_no_piece() {
    let map = map();
    let mut table = Outstanding::<4>::new(Duration::from_ms(1));
    let mut out = Packet::new();
    let refused = Some(Err(TlError::EndpointOutOfRange { endpoint: 1024 }));
    let mut reads = Requests::reads(&map, START, 64, 1024);
    let data = source(300, 7);
    let mut writes = Requests::writes(&map, START, &data, 1024);
    for _ in 0..4 {
        assert_eq!(reads.next_into(&mut table, Instant::ZERO, &mut out), refused);
        assert!(!reads.is_done());
        assert_eq!(writes.next_into(&mut table, Instant::ZERO, &mut out), refused);
        assert!(!writes.is_done());
    }
    assert_eq!(table.outstanding(), 0);
}
