//! Round trips of every header and packet kind over arbitrary fields, and typed errors for malformed input.

use link_dl::flit::Flit;
use link_dl::Vc;
use link_tl::header::{CompletionHeader, Extension, Header, MessageCode, Opcode, Status, COHERENCE_OPCODES};
use link_tl::packet::{
    error_completion, unsupported_request_reply, Atomic, AtomicOp, Completion, Message, Packet, PostedWrite,
    Read, RequestId, RxCounters, Write,
};
use link_tl::{TlError, Tlp};
use proptest::prelude::*;

const LOCAL_MAX: u64 = 1 << 47;

fn endpoint() -> impl Strategy<Value = u16> {
    0u16..1024
}

fn id() -> impl Strategy<Value = RequestId> {
    (endpoint(), 0u16..1024).prop_map(|(requester, tag)| RequestId { requester, tag })
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Success),
        Just(Status::UnsupportedRequest),
        Just(Status::CompleterAbort),
        Just(Status::Poisoned)
    ]
}

fn round_trip(tlp: Tlp<'_>) {
    let mut packet = Packet::new();
    tlp.emit(&mut packet).unwrap();
    assert_eq!(packet.vc(), tlp.opcode().vc());
    assert!(packet.tl() < 1 << 58);
    assert_eq!(packet.dest(), tlp.dest());
    assert_eq!(packet.parse(), Ok(tlp));
    // Parsing and emitting again gives the same packet, bit for bit.
    let mut again = Packet::new();
    packet.parse().unwrap().emit(&mut again).unwrap();
    assert_eq!(again, packet);
}

proptest! {
    #[test]
    fn request_and_message_headers_round_trip(
        dest in endpoint(),
        addr in (0..LOCAL_MAX).prop_map(|a| a & !15),
        opcode in prop::sample::select(vec![
            Opcode::PostedWrite, Opcode::PostedWritePartial, Opcode::Read, Opcode::Write,
            Opcode::FetchAdd, Opcode::Swap, Opcode::CompareSwap,
        ]),
        code in prop::sample::select(vec![MessageCode::Doorbell, MessageCode::Interrupt, MessageCode::VendorDefined]),
        index in any::<u16>(),
    ) {
        let request = Header::Request { opcode, dest, addr };
        let tl = request.emit().unwrap();
        prop_assert_eq!(tl >> 58, 0);
        prop_assert_eq!(Header::parse(tl), Ok(request));
        let message = Header::Message { dest, code, index };
        prop_assert_eq!(Header::parse(message.emit().unwrap()), Ok(message));
        prop_assert_eq!(link_tl::header::destination(tl), dest);
    }

    #[test]
    fn completion_headers_round_trip(
        requester in endpoint(), completer in endpoint(), tag in 0u16..1024, status in status(),
        offset in 0u16..4096, len in 0u8..=128,
    ) {
        // Only a successful completion has data; one without data has offset 0; data ends within 4096 bytes.
        let len = if status == Status::Success { len } else { 0 };
        let offset = if len == 0 { 0 } else { offset.min(4096 - u16::from(len)) };
        let c = CompletionHeader { requester, completer, tag, status, offset, len };
        let tl = Header::Completion(c).emit().unwrap();
        prop_assert_eq!(tl >> 58, 0);
        prop_assert_eq!(Header::parse(tl), Ok(Header::Completion(c)));
        prop_assert_eq!(CompletionHeader::parse(tl), Ok(c));
    }

    #[test]
    fn extension_flits_round_trip(
        requester in endpoint(), tag in 0u16..1024, first_byte in 0u8..16, len in 0u16..=4096, value in any::<u64>(),
    ) {
        let ext = Extension { requester, tag, first_byte, len, value };
        prop_assert_eq!(Extension::parse(&ext.emit().unwrap()), Ok(ext));
    }

    #[test]
    fn posted_writes_round_trip(
        dest in endpoint(), block in 0..LOCAL_MAX / 128, first in 0u64..8, flits in 1usize..=8,
        data in prop::collection::vec(any::<u8>(), 128), mask in any::<u128>(), partial in any::<bool>(),
    ) {
        let flits = flits.min(8 - first as usize);
        let data = &data[..16 * flits];
        let room = if flits == 8 { u128::MAX } else { (1u128 << (16 * flits)) - 1 };
        let enables = (partial && mask & room != 0).then_some(mask & room);
        round_trip(Tlp::PostedWrite(PostedWrite { dest, addr: block * 128 + first * 16, enables, data }));
    }

    #[test]
    fn reads_writes_and_messages_round_trip(
        dest in endpoint(), id in id(), addr in 0..LOCAL_MAX - 4096, len in 1usize..=4096,
        data in prop::collection::vec(any::<u8>(), 1..=128), value in any::<u64>(), index in any::<u16>(),
    ) {
        let read_len = len.min(4096 - (addr % 4096) as usize) as u16;
        round_trip(Tlp::Read(Read { dest, addr, len: read_len, id }));
        let write_len = data.len().min(128 - (addr % 128) as usize);
        round_trip(Tlp::Write(Write { dest, addr, id, data: &data[..write_len] }));
        let source = id.requester;
        round_trip(Tlp::Message(Message { dest, code: MessageCode::VendorDefined, index, source, value, data: &data }));
        round_trip(Tlp::Message(Message { dest, code: MessageCode::Doorbell, index, source, value, data: &[] }));
    }

    #[test]
    fn atomics_round_trip(
        dest in endpoint(), id in id(), addr in 0..LOCAL_MAX / 8, wide in any::<bool>(),
        op in prop::sample::select(vec![AtomicOp::FetchAdd, AtomicOp::Swap, AtomicOp::CompareSwap]),
        operand in any::<u64>(), compare in any::<u64>(),
    ) {
        let size: u8 = if wide { 8 } else { 4 };
        let keep = |v: u64| if wide { v } else { v & 0xFFFF_FFFF };
        let compare = if op == AtomicOp::CompareSwap { keep(compare) } else { 0 };
        let atomic = Atomic { dest, op, addr: addr * 8, size, id, operand: keep(operand), compare };
        round_trip(Tlp::Atomic(atomic));
    }

    #[test]
    fn completions_round_trip(
        requester in endpoint(), completer in endpoint(), tag in 0u16..1024, offset in 0u16..4096,
        data in prop::collection::vec(any::<u8>(), 0..=128), status in status(),
    ) {
        let data: &[u8] = if status == Status::Success { &data } else { &[] };
        // A piece ends within the 4096 bytes of the largest request.
        let offset = if data.is_empty() { 0 } else { offset.min(4096 - data.len() as u16) };
        let header = CompletionHeader { requester, completer, tag, status, offset, len: data.len() as u8 };
        round_trip(Tlp::Completion(Completion { header, data }));
    }

    /// Any header and payload either parses into something that emits back to the same header, or is a
    /// typed error; never a panic.
    #[test]
    fn arbitrary_packets_parse_or_fail_cleanly(
        vc in 0u8..4, tl in 0u64..1 << 58, payload in prop::collection::vec(any::<[u8; 16]>(), 0..=9),
    ) {
        let vc = Vc::from_bits(vc);
        if let Ok(tlp) = Tlp::parse(vc, tl, &payload) {
            let mut packet = Packet::new();
            tlp.emit(&mut packet).unwrap();
            prop_assert_eq!(packet.tl(), tl);
            prop_assert_eq!(packet.payload().len(), payload.len());
        }
    }
}

fn tl_of(header: Header) -> u64 {
    header.emit().unwrap()
}

fn ext(len: u16, first_byte: u8) -> Flit {
    Extension {
        requester: 5,
        tag: 9,
        first_byte,
        len,
        value: 0,
    }
    .emit()
    .unwrap()
}

#[test]
fn unknown_and_reserved_opcodes_are_typed_errors() {
    for opcode in 0u8..32 {
        let tl = u64::from(opcode) << 53;
        let known = Opcode::from_bits(opcode).is_ok();
        assert_eq!(known, Opcode::ALL.iter().any(|o| o.bits() == opcode));
        if !known {
            assert_eq!(Header::parse(tl), Err(TlError::UnknownOpcode { opcode }));
            assert_eq!(
                Tlp::parse(Vc::Request, tl, &[]),
                Err(TlError::UnknownOpcode { opcode })
            );
        }
    }
    for opcode in COHERENCE_OPCODES {
        assert!(
            Opcode::from_bits(opcode).is_err(),
            "coherence opcode {opcode:#x} is taken"
        );
    }
}

#[test]
fn packets_on_the_wrong_channel_are_refused() {
    let tl = tl_of(Header::Request {
        opcode: Opcode::Read,
        dest: 1,
        addr: 0,
    });
    assert_eq!(
        Tlp::parse(Vc::Posted, tl, &[ext(4, 0)]),
        Err(TlError::WrongChannel {
            opcode: Opcode::Read.bits(),
            vc: Vc::Posted
        })
    );
    let cpl = tl_of(Header::Completion(CompletionHeader {
        requester: 1,
        completer: 2,
        tag: 3,
        status: Status::Success,
        offset: 0,
        len: 0,
    }));
    assert_eq!(
        Tlp::parse(Vc::Request, cpl, &[]),
        Err(TlError::WrongChannel {
            opcode: Opcode::Completion.bits(),
            vc: Vc::Request
        })
    );
}

#[test]
fn lengths_that_overrun_the_packet_are_typed_errors() {
    let write = tl_of(Header::Request {
        opcode: Opcode::Write,
        dest: 1,
        addr: 0x1000,
    });
    // 20 bytes from byte 4 need two data flits; one is given.
    assert_eq!(
        Tlp::parse(Vc::Request, write, &[ext(20, 4), [0; 16]]),
        Err(TlError::LengthOverrun { needed: 24, room: 16 })
    );
    // Too many flits for the length.
    assert_eq!(
        Tlp::parse(Vc::Request, write, &[ext(4, 0), [0; 16], [0; 16]]),
        Err(TlError::FlitCount {
            opcode: Opcode::Write.bits(),
            flits: 3
        })
    );
    assert_eq!(
        Tlp::parse(Vc::Request, write, &[ext(0, 0)]),
        Err(TlError::BadLength { len: 0 })
    );
    // A write crossing a 128-byte boundary.
    let near_end = tl_of(Header::Request {
        opcode: Opcode::Write,
        dest: 1,
        addr: 0x1070,
    });
    assert_eq!(
        Tlp::parse(Vc::Request, near_end, &[ext(17, 0), [0; 16], [0; 16]]),
        Err(TlError::CrossesBoundary {
            addr: 0x1070,
            len: 17
        })
    );
    // Byte enables beyond the data flits, and none at all.
    let partial = tl_of(Header::Request {
        opcode: Opcode::PostedWritePartial,
        dest: 1,
        addr: 0,
    });
    let mut be = [0u8; 16];
    be[2] = 1; // byte 16
    assert_eq!(
        Tlp::parse(Vc::Posted, partial, &[be, [0; 16]]),
        Err(TlError::LengthOverrun { needed: 17, room: 16 })
    );
    assert_eq!(
        Tlp::parse(Vc::Posted, partial, &[[0; 16], [0; 16]]),
        Err(TlError::NoBytesEnabled)
    );
    // Nine data flits in a posted write, and posted writes crossing a boundary.
    let posted = tl_of(Header::Request {
        opcode: Opcode::PostedWrite,
        dest: 1,
        addr: 0x40,
    });
    assert_eq!(
        Tlp::parse(Vc::Posted, posted, &[[0; 16]; 9]),
        Err(TlError::FlitCount {
            opcode: Opcode::PostedWrite.bits(),
            flits: 9
        })
    );
    assert_eq!(
        Tlp::parse(Vc::Posted, posted, &[[0; 16]; 5]),
        Err(TlError::CrossesBoundary { addr: 0x40, len: 80 })
    );
    // A read of more than 4096 bytes, and one crossing a 4096-byte boundary.
    let read = tl_of(Header::Request {
        opcode: Opcode::Read,
        dest: 1,
        addr: 0x1FF0,
    });
    let mut long = ext(4096, 0);
    long[4] |= 0x08; // bit 91: the length field says 4097
    assert!(matches!(
        Tlp::parse(Vc::Request, read, &[long]),
        Err(TlError::BadLength { .. })
    ));
    assert_eq!(
        Tlp::parse(Vc::Request, read, &[ext(32, 0)]),
        Err(TlError::CrossesBoundary {
            addr: 0x1FF0,
            len: 32
        })
    );
    // A completion whose length needs more flits than it has.
    let cpl = CompletionHeader {
        requester: 1,
        completer: 2,
        tag: 3,
        status: Status::Success,
        offset: 0,
        len: 17,
    };
    assert_eq!(
        Tlp::parse(Vc::Response, tl_of(Header::Completion(cpl)), &[[0; 16]]),
        Err(TlError::FlitCount {
            opcode: Opcode::Completion.bits(),
            flits: 1
        })
    );
}

#[test]
fn malformed_atomics_and_reserved_bits_are_typed_errors() {
    let fetch_add = tl_of(Header::Request {
        opcode: Opcode::FetchAdd,
        dest: 1,
        addr: 0x100,
    });
    assert_eq!(
        Tlp::parse(Vc::Request, fetch_add, &[ext(8, 4), [0; 16]]),
        Err(TlError::MisalignedAtomic { addr: 0x104, size: 8 })
    );
    assert_eq!(
        Tlp::parse(Vc::Request, fetch_add, &[ext(2, 0), [0; 16]]),
        Err(TlError::BadLength { len: 2 })
    );
    assert_eq!(
        Tlp::parse(Vc::Request, fetch_add, &[ext(8, 0)]),
        Err(TlError::FlitCount {
            opcode: Opcode::FetchAdd.bits(),
            flits: 1
        })
    );
    let mut reserved = ext(8, 0);
    reserved[5] = 1; // bit 80, reserved
    assert_eq!(
        Tlp::parse(Vc::Request, fetch_add, &[reserved, [0; 16]]),
        Err(TlError::ReservedBits)
    );
    // The extension's value is a message's: 0 in every request.
    let read = tl_of(Header::Request {
        opcode: Opcode::Read,
        dest: 1,
        addr: 0x100,
    });
    let mut valued = ext(8, 0);
    valued[15] = 0xff;
    for (tl, payload) in [(fetch_add, &[valued, [0; 16]][..]), (read, &[valued][..])] {
        assert_eq!(Tlp::parse(Vc::Request, tl, payload), Err(TlError::ReservedBits));
    }
    // A completion without data must have no length and offset 0; its reserved bit must be 0.
    let cpl = CompletionHeader {
        requester: 1,
        completer: 2,
        tag: 3,
        status: Status::Success,
        offset: 0,
        len: 0,
    };
    let tl = tl_of(Header::Completion(cpl));
    assert_eq!(Header::parse(tl | 1 << 1), Err(TlError::ReservedBits));
    assert_eq!(Header::parse(tl | 1 << 9), Err(TlError::ReservedBits));
    assert_eq!(Header::parse(tl | 1), Err(TlError::ReservedBits));
    // Data on a completion that failed.
    let failed = CompletionHeader {
        status: Status::Poisoned,
        ..cpl
    };
    let with_data = Header::Completion(failed).emit().unwrap() | 1 << 8 | 3 << 1;
    let data_on_failure = TlError::DataOnFailure {
        status: Status::Poisoned,
    };
    assert_eq!(Header::parse(with_data), Err(data_on_failure));
    assert_eq!(
        Header::Completion(CompletionHeader { len: 4, ..failed }).emit(),
        Err(data_on_failure)
    );
    // A piece of data that would end beyond the largest request (4096 bytes): refused both ways.
    let last = CompletionHeader {
        offset: 4095 - 127,
        len: 128,
        ..cpl
    };
    let tl = tl_of(Header::Completion(last));
    assert_eq!(Header::parse(tl), Ok(Header::Completion(last)));
    let past_end = tl + (1 << 9); // offset 3969 with 128 bytes ends at 4097
    assert_eq!(Header::parse(past_end), Err(TlError::BadLength { len: 4097 }));
    assert_eq!(
        Header::Completion(CompletionHeader {
            offset: 4095,
            len: 2,
            ..cpl
        })
        .emit(),
        Err(TlError::BadLength { len: 4097 })
    );
    // Messages: unknown code, reserved bits.
    let msg = tl_of(Header::Message {
        dest: 1,
        code: MessageCode::Doorbell,
        index: 0,
    });
    assert_eq!(Header::parse(msg | 1), Err(TlError::ReservedBits));
    assert_eq!(
        Header::parse(msg ^ 0x04 << 35),
        Err(TlError::UnknownMessage { code: 0x05 })
    );
}

#[test]
fn fields_out_of_range_are_refused_on_emit() {
    let mut out = Packet::new();
    let id = RequestId {
        requester: 1024,
        tag: 0,
    };
    assert_eq!(
        Tlp::Read(Read {
            dest: 1,
            addr: 0,
            len: 4,
            id
        })
        .emit(&mut out),
        Err(TlError::EndpointOutOfRange { endpoint: 1024 })
    );
    let id = RequestId {
        requester: 1,
        tag: 1024,
    };
    assert_eq!(
        Tlp::Read(Read {
            dest: 1,
            addr: 0,
            len: 4,
            id
        })
        .emit(&mut out),
        Err(TlError::TagOutOfRange { tag: 1024 })
    );
    assert_eq!(
        out.posted_write(1, LOCAL_MAX, &[1]),
        Err(TlError::AddressTooWide { addr: LOCAL_MAX })
    );
    assert_eq!(
        out.posted_write(1, 0x7F, &[1, 2]),
        Err(TlError::CrossesBoundary { addr: 0x7F, len: 2 })
    );
    assert_eq!(out.posted_write(1, 0, &[]), Err(TlError::BadLength { len: 0 }));
}

#[test]
fn requests_that_cannot_be_served_are_answered_unsupported() {
    // A coherence opcode on the request channel, with the request extension every request carries.
    let tl = u64::from(*COHERENCE_OPCODES.start()) << 53 | 3 << 43;
    let payload = [ext(64, 0)];
    assert!(Tlp::parse(Vc::Request, tl, &payload).is_err());
    let mut reply = Packet::new();
    assert!(unsupported_request_reply(Vc::Request, &payload, 3, &mut reply));
    let Ok(Tlp::Completion(c)) = reply.parse() else {
        panic!("the reply is not a completion")
    };
    assert_eq!(
        c.header,
        CompletionHeader {
            requester: 5,
            completer: 3,
            tag: 9,
            status: Status::UnsupportedRequest,
            offset: 0,
            len: 0
        }
    );
    // Posted packets get no reply.
    assert!(!unsupported_request_reply(Vc::Posted, &payload, 3, &mut reply));
    // A request whose extension is malformed (reserved bits set) is answered to its requester and tag.
    let mut bad = ext(64, 0);
    bad[6] = 0xFF;
    assert!(Extension::parse(&bad).is_err());
    let mut answer = Packet::new();
    assert!(unsupported_request_reply(Vc::Request, &[bad], 3, &mut answer));
    assert_eq!(answer, reply);
    // One without an extension flit says nobody to answer.
    assert!(!unsupported_request_reply(Vc::Request, &[], 3, &mut answer));
    // A completer abort.
    error_completion(
        RequestId { requester: 5, tag: 9 },
        3,
        Status::CompleterAbort,
        &mut reply,
    )
    .unwrap();
    assert!(matches!(reply.parse(), Ok(Tlp::Completion(c)) if c.header.status == Status::CompleterAbort));
}

#[test]
fn received_packets_are_counted_by_outcome() {
    let mut counters = RxCounters::default();
    let read = tl_of(Header::Request {
        opcode: Opcode::Read,
        dest: 1,
        addr: 0,
    });
    let payload = [ext(4, 0)];
    counters.record(&Tlp::parse(Vc::Request, read, &payload));
    counters.record(&Tlp::parse(Vc::Posted, read, &payload));
    counters.record(&Tlp::parse(Vc::Request, 0x1F << 53, &payload));
    counters.record(&Tlp::parse(Vc::Request, read, &[]));
    counters.record(&Tlp::parse(Vc::Request, read, &[ext(0, 0)]));
    assert_eq!(
        counters,
        RxCounters {
            parsed: 1,
            unknown_opcode: 1,
            wrong_channel: 1,
            malformed: 2
        }
    );
}
