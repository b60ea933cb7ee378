//! Two endpoints over data links with bit errors ([`link_tl::endpoint::pair`]): copies in both directions
//! at any offset and length, atomics, and bad requests answered as the spec says without touching memory.

use link_dl::Vc;
use link_tl::endpoint::pair::{Pair, Side, UnitLosses};
use link_tl::endpoint::{Done, Event, Failure};
use link_tl::header::CompletionHeader;
use link_tl::packet::{AtomicOp, Completion, Packet, Read, RequestId};
use link_tl::Tlp;
use link_tl::{AddressMap, Status, Window};
use proptest::prelude::*;

const MEMORY: u64 = 16 * 1024;

fn map(window_of_b: u64) -> AddressMap<2> {
    let mut map = AddressMap::new();
    map.insert(Window::flat(0, MEMORY)).unwrap();
    map.insert(Window::flat(1, window_of_b)).unwrap();
    map
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// Step until `side` reports a transfer or atomic done; its result.
fn run_until_done(pair: &mut Pair<'_, &mut [u8], &mut [u8]>, side: Side) -> Done {
    let mut done = None;
    for _ in 0..2_000_000 {
        pair.step(&mut |s, e| {
            if let (true, Event::Done(d)) = (s == side, e) {
                done = Some(d);
            }
        });
        if let Some(d) = done {
            // Let acknowledgements and late packets settle.
            for _ in 0..200 {
                pair.step(&mut |_, _| {});
            }
            return d;
        }
    }
    panic!("nothing finished");
}

fn transfer_result(done: Done) -> Result<u64, Failure> {
    match done {
        Done::Transfer { result, .. } => result,
        other => panic!("not a transfer: {other:?}"),
    }
}

fn copy(offset: u64, len: u64, pull: bool, ber: f64, seed: u64) {
    let mut a = pattern(MEMORY as usize, seed as u8);
    let mut b = vec![0u8; MEMORY as usize];
    let map = map(MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, ber, seed).unwrap();
    let result = if pull {
        pair.b
            .copy_from(Window::flat(0, MEMORY).base + offset, offset, len)
            .unwrap();
        transfer_result(run_until_done(&mut pair, Side::B))
    } else {
        pair.a
            .copy_to(offset, Window::flat(1, MEMORY).base + offset, len)
            .unwrap();
        transfer_result(run_until_done(&mut pair, Side::A))
    };
    assert_eq!(result, Ok(len));
    let range = offset as usize..(offset + len) as usize;
    let (src, dst) = (pair.a.memory(), pair.b.memory());
    assert_eq!(src[range.clone()], dst[range.clone()], "the copy differs");
    assert!(
        dst[..range.start].iter().all(|&v| v == 0),
        "bytes before the range were written"
    );
    assert!(
        dst[range.end..].iter().all(|&v| v == 0),
        "bytes after the range were written"
    );
    assert_eq!(
        src[..],
        pattern(MEMORY as usize, seed as u8)[..],
        "the source changed"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn copies_are_exact_at_any_offset_and_length(
        offset in 0u64..600,
        len in 1u64..6000,
        pull in any::<bool>(),
        noisy in any::<bool>(),
        seed in 1u64..1000,
    ) {
        copy(offset, len, pull, if noisy { 1e-5 } else { 0.0 }, seed);
    }
}

#[test]
fn one_byte_and_boundary_crossing_copies() {
    for (offset, len) in [
        (0, 1),
        (127, 1),
        (127, 2),
        (120, 16),
        (1, 4095),
        (0, 4096),
        (5, 8192),
    ] {
        copy(offset, len, false, 1e-6, 3);
        copy(offset, len, true, 1e-6, 4);
    }
}

#[test]
fn atomics_return_the_old_value_and_update_memory() {
    let mut a = vec![0u8; MEMORY as usize];
    let mut b = vec![0u8; MEMORY as usize];
    b[64..72].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
    b[128..132].copy_from_slice(&7u32.to_le_bytes());
    let map = map(MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 1e-6, 9).unwrap();
    let base = Window::flat(1, MEMORY).base;
    let atomic = |pair: &mut Pair<'_, &mut [u8], &mut [u8]>, op, addr, size, operand, compare| {
        let now = pair.link.now;
        pair.a
            .atomic(now, op, base + addr, size, operand, compare)
            .unwrap();
        match run_until_done(pair, Side::A) {
            Done::Atomic { result, .. } => result,
            other => panic!("not an atomic: {other:?}"),
        }
    };
    assert_eq!(
        atomic(&mut pair, AtomicOp::FetchAdd, 64, 8, 1, 0),
        Ok(0x1122_3344_5566_7788)
    );
    assert_eq!(
        atomic(&mut pair, AtomicOp::Swap, 64, 8, 42, 0),
        Ok(0x1122_3344_5566_7789)
    );
    assert_eq!(
        atomic(&mut pair, AtomicOp::CompareSwap, 64, 8, 9, 41),
        Ok(42),
        "CAS that fails"
    );
    assert_eq!(
        atomic(&mut pair, AtomicOp::CompareSwap, 64, 8, 9, 42),
        Ok(42),
        "CAS that succeeds"
    );
    assert_eq!(
        atomic(&mut pair, AtomicOp::FetchAdd, 128, 4, u64::from(u32::MAX), 0),
        Ok(7)
    );
    let memory = pair.b.memory();
    assert_eq!(u64::from_le_bytes(memory[64..72].try_into().unwrap()), 9);
    // 32-bit add wraps: 7 + (2^32 - 1) = 6.
    assert_eq!(u32::from_le_bytes(memory[128..132].try_into().unwrap()), 6);
    assert_eq!(pair.b.counters().completer.atomics, 5);
}

#[test]
fn requests_outside_the_exposed_memory_are_aborted_and_touch_nothing() {
    let mut a = pattern(MEMORY as usize, 1);
    let mut b = vec![0u8; MEMORY as usize];
    // The window says B has twice the memory it exposes.
    let map = map(2 * MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 0.0, 2).unwrap();
    let beyond = Window::flat(1, 2 * MEMORY).base + MEMORY;
    pair.a.copy_from(beyond, 0, 512).unwrap();
    match transfer_result(run_until_done(&mut pair, Side::A)) {
        Err(Failure::Status { status, .. }) => assert_eq!(status, Status::CompleterAbort),
        other => panic!("a read past the memory came back {other:?}"),
    }
    pair.a.copy_to(0, beyond - 64, 512).unwrap();
    assert!(transfer_result(run_until_done(&mut pair, Side::A)).is_err());
    let counters = pair.b.counters().completer;
    assert!(counters.out_of_range > 0, "{counters:?}");
    // Only the in-range part of the straddling write landed: the last 64 bytes of B.
    let memory = pair.b.memory();
    assert_eq!(memory[MEMORY as usize - 64..], pattern(MEMORY as usize, 1)[..64]);
    assert!(memory[..MEMORY as usize - 64].iter().all(|&v| v == 0));
}

#[test]
fn an_unknown_opcode_is_counted_and_answered_unsupported() {
    let mut a = vec![0u8; MEMORY as usize];
    let mut b = vec![0u8; MEMORY as usize];
    let map = map(MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 0.0, 5).unwrap();
    let mut packet = Packet::new();
    let read = Read {
        dest: 1,
        addr: 0,
        len: 64,
        id: RequestId { requester: 0, tag: 7 },
    };
    Tlp::Read(read).emit(&mut packet).unwrap();
    // Opcode 0x05 is not assigned (spec section 3.1); the extension flit still says who asked.
    let tl = packet.tl() & !(0x1F << 53) | 0x05 << 53;
    pair.link.a.send(Vc::Request, tl, packet.payload()).unwrap();
    for _ in 0..500 {
        pair.step(&mut |_, _| {});
    }
    let counters = pair.b.counters().completer;
    assert_eq!(counters.rx.unknown_opcode, 1, "{counters:?}");
    assert_eq!(
        counters.unsupported_sent, 1,
        "a request on the request channel is answered: {counters:?}"
    );
    assert!(
        pair.b.memory().iter().all(|&v| v == 0),
        "a bad request wrote memory"
    );
}

#[test]
fn thirty_two_bit_swap_and_compare_swap_touch_only_their_four_bytes() {
    let mut a = vec![0u8; MEMORY as usize];
    let mut b = pattern(MEMORY as usize, 3);
    b[256..260].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
    let before = b.clone();
    let map = map(MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 1e-6, 11).unwrap();
    let base = Window::flat(1, MEMORY).base;
    let mut atomic = |op, operand, compare| {
        let now = pair.link.now;
        pair.a.atomic(now, op, base + 256, 4, operand, compare).unwrap();
        match run_until_done(&mut pair, Side::A) {
            Done::Atomic { result, .. } => result,
            other => panic!("not an atomic: {other:?}"),
        }
    };
    // Only the low 4 bytes of the operand count.
    assert_eq!(atomic(AtomicOp::Swap, 0xFFFF_FFFF_0000_0005, 0), Ok(0xDEAD_BEEF));
    assert_eq!(atomic(AtomicOp::CompareSwap, 9, 4), Ok(5), "CAS that fails");
    assert_eq!(atomic(AtomicOp::CompareSwap, 9, 5), Ok(5), "CAS that succeeds");
    let memory = pair.b.memory();
    assert_eq!(u32::from_le_bytes(memory[256..260].try_into().unwrap()), 9);
    assert_eq!(memory[..256], before[..256]);
    assert_eq!(memory[260..], before[260..]);
}

/// Put a completion for (`requester`, `tag`) from endpoint 1 on B's data link, as if B's completer sent it.
/// A fetch-and-add by A at B's byte 64, run until its request has crossed the data links and taken off
/// B's, before B's endpoint sees it: its handle and the request.
fn atomic_taken_off_the_link(
    pair: &mut Pair<'_, &mut [u8], &mut [u8]>,
) -> (link_tl::endpoint::Handle, link_dl::Received) {
    let now = pair.link.now;
    let base = Window::flat(1, MEMORY).base;
    let handle = pair
        .a
        .atomic(now, AtomicOp::FetchAdd, base + 64, 8, 1, 0)
        .unwrap();
    let mut taken = None;
    for _ in 0..200 {
        let now = pair.link.now;
        pair.a.poll_transmit(now, &mut pair.link.a);
        pair.link.step();
        while let Some(p) = pair.link.b.recv() {
            taken = Some(p);
        }
    }
    (handle, taken.expect("the request crossed the link"))
}

fn inject_completion(pair: &mut Pair<'_, &mut [u8], &mut [u8]>, tag: u16, data: &[u8]) {
    let mut packet = Packet::new();
    let header = CompletionHeader {
        requester: 0,
        completer: 1,
        tag,
        status: Status::Success,
        offset: 0,
        len: data.len() as u8,
    };
    Tlp::Completion(Completion { header, data })
        .emit(&mut packet)
        .unwrap();
    pair.link
        .b
        .send(Vc::Response, packet.tl(), packet.payload())
        .unwrap();
    for _ in 0..500 {
        pair.step(&mut |side, event| panic!("{side:?} reported {event:?} for a stray completion"));
    }
}

#[test]
fn a_completion_for_an_unknown_tag_is_counted_and_dropped() {
    let mut a = pattern(MEMORY as usize, 7);
    let mut b = vec![0u8; MEMORY as usize];
    let map = map(MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 0.0, 8).unwrap();
    inject_completion(&mut pair, 99, &[0xAA; 64]);
    let counters = pair.a.counters();
    assert_eq!(counters.tags.unknown_tags, 1, "{counters:?}");
    assert_eq!(counters.requester.refused, 1, "{counters:?}");
    assert_eq!(pair.a.memory()[..], pattern(MEMORY as usize, 7)[..]);
    assert!(pair.a.is_idle());
}

#[test]
fn a_request_nobody_answers_times_out_and_its_late_completion_is_dropped() {
    let mut a = vec![0u8; MEMORY as usize];
    let mut b = pattern(MEMORY as usize, 5);
    let map = map(MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 0.0, 6).unwrap();
    // The request crosses the data links, but B's endpoint never sees it: nobody answers.
    let (handle, request) = atomic_taken_off_the_link(&mut pair);
    let tag = match Tlp::parse(request.vc, request.tl, &request.payload).unwrap() {
        Tlp::Atomic(atomic) => atomic.id.tag,
        other => panic!("sent {other:?}"),
    };
    let deadline = pair.a.poll_timeout().expect("a completion timeout is armed");
    assert!(deadline > pair.link.now, "the timeout is not early");
    pair.a.handle_timeout(deadline);
    match pair.a.poll_event() {
        Some(Event::Done(Done::Atomic { handle: h, result })) => {
            assert_eq!(h, handle);
            assert!(matches!(result, Err(Failure::Timeout { .. })), "{result:?}");
        }
        other => panic!("after the timeout: {other:?}"),
    }
    assert_eq!(pair.a.counters().requester.timeouts, 1);
    // The answer arrives after all: counted, dropped, and no event for anyone.
    inject_completion(&mut pair, tag, &7u64.to_le_bytes());
    let counters = pair.a.counters();
    // Within the tag's quarantine after the timeout: a late completion, not a stranger's.
    assert_eq!(counters.tags.late_completions, 1, "{counters:?}");
    assert_eq!(counters.requester.refused, 1, "{counters:?}");
    assert!(pair.a.memory().iter().all(|&v| v == 0));
    assert_eq!(pair.b.memory()[..], pattern(MEMORY as usize, 5)[..]);
}

#[test]
fn copies_survive_lost_and_repeated_units_on_the_wire() {
    for (pull, seed) in [(false, 21), (true, 22)] {
        let mut a = pattern(MEMORY as usize, seed as u8);
        let mut b = vec![0u8; MEMORY as usize];
        let map = map(MEMORY);
        let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 1e-5, seed).unwrap();
        pair.losses = UnitLosses {
            drop: 2e-3,
            duplicate: 2e-3,
            ..UnitLosses::default()
        };
        let (offset, len) = (3, 12_000);
        let side = if pull {
            pair.b
                .copy_from(Window::flat(0, MEMORY).base + offset, offset, len)
                .unwrap();
            Side::B
        } else {
            pair.a
                .copy_to(offset, Window::flat(1, MEMORY).base + offset, len)
                .unwrap();
            Side::A
        };
        assert_eq!(transfer_result(run_until_done(&mut pair, side)), Ok(len));
        assert!(
            pair.losses.dropped > 0 && pair.losses.duplicated > 0,
            "{:?}",
            pair.losses
        );
        let range = offset as usize..(offset + len) as usize;
        let (src, dst) = (pair.a.memory(), pair.b.memory());
        assert_eq!(src[range.clone()], dst[range.clone()], "the copy differs");
        assert!(dst[..range.start]
            .iter()
            .chain(&dst[range.end..])
            .all(|&v| v == 0));
    }
}

/// An endpoint whose own ID no header can carry (1024 and up) is refused each atomic with a typed error,
/// and the atomic takes no tag: one taken would be held until the completion timeout.
#[test]
fn an_atomic_from_an_endpoint_id_beyond_1023_takes_no_tag() {
    let map = map(MEMORY);
    let mut memory = [0u8; 64];
    let mut endpoint: link_tl::endpoint::pair::PairEndpoint<'_, &mut [u8]> =
        link_tl::endpoint::Endpoint::new(1024, &mut memory[..], &map, link_phy::time::Duration::from_ms(1));
    let base = Window::flat(1, MEMORY).base;
    assert_eq!(
        endpoint.atomic(link_phy::time::Instant::ZERO, AtomicOp::FetchAdd, base, 8, 1, 0),
        Err(link_tl::TlError::EndpointOutOfRange { endpoint: 1024 })
    );
    assert_eq!(endpoint.requester().outstanding(), 0);
    assert_eq!(endpoint.poll_timeout(), None);
}

/// A request whose extension flit is malformed (a reserved bit set) still says, in its requester and tag
/// fields, who to answer: the completer answers Unsupported Request, and the request fails at once instead
/// of waiting for its completion timeout (spec section 3.7). Before, it was dropped as unanswerable.
#[test]
fn a_request_with_a_malformed_extension_is_answered_unsupported() {
    let mut a = vec![0u8; MEMORY as usize];
    let mut b = pattern(MEMORY as usize, 5);
    let map = map(MEMORY);
    let mut pair = Pair::new(&mut a[..], &mut b[..], &map, 0.0, 6).unwrap();
    // Take the request off A's data link before B's endpoint sees it.
    let (handle, request) = atomic_taken_off_the_link(&mut pair);
    let deadline = pair.a.poll_timeout().expect("a completion timeout is armed");
    // Set a reserved bit of the extension flit (X[90:64], byte 5 holds X[87:80]) and send it again.
    let mut payload = request.payload.clone();
    payload[0][5] |= 0x01;
    assert!(Tlp::parse(Vc::Request, request.tl, &payload).is_err());
    pair.link.a.send(Vc::Request, request.tl, &payload).unwrap();
    let mut done = None;
    for _ in 0..500 {
        pair.step(&mut |side, event| {
            if let (Side::A, Event::Done(d)) = (side, event) {
                done = Some(d);
            }
        });
    }
    assert!(
        pair.link.now < deadline,
        "the test ran past the completion timeout"
    );
    let counters = pair.b.counters().completer;
    assert_eq!(counters.rx.malformed, 1, "{counters:?}");
    assert_eq!(counters.unsupported_sent, 1, "{counters:?}");
    assert_eq!(counters.unanswerable, 0, "{counters:?}");
    match done {
        Some(Done::Atomic { handle: h, result }) => {
            assert_eq!(h, handle);
            assert!(
                matches!(
                    result,
                    Err(Failure::Status {
                        status: Status::UnsupportedRequest,
                        ..
                    })
                ),
                "{result:?}"
            );
        }
        other => panic!("the atomic did not fail at once: {other:?}"),
    }
    assert_eq!(pair.b.memory()[..], pattern(MEMORY as usize, 5)[..]);
}
