//! The worked examples of docs/spec.md section 3.8, byte for byte: each is decoded into the fields the
//! spec's text gives, and emitting those fields gives the same bytes back.

use link_dl::flit::{check_packet_crc, Flit, PacketHeader};
use link_dl::seq::Seq;
use link_dl::Vc;
use link_tl::header::{CompletionHeader, MessageCode, Status};
use link_tl::packet::{Atomic, AtomicOp, Completion, Message, Packet, PostedWrite, Read, RequestId};
use link_tl::{ReadCompletions, Tlp};

fn spec() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec.md")).unwrap()
}

/// Flits written in the spec as lines of 16 hex bytes; the spec must show them verbatim.
fn flits(text: &str) -> Vec<Flit> {
    assert!(spec().contains(text), "the spec no longer shows:\n{text}");
    text.lines()
        .map(|line| {
            let bytes: Vec<u8> = line
                .split_whitespace()
                .map(|b| u8::from_str_radix(b, 16).unwrap())
                .collect();
            bytes.try_into().unwrap()
        })
        .collect()
}

/// A header as the spec writes it, `0020_2800_0123_4568h`; the spec must show it.
fn header(text: &str) -> u64 {
    assert!(spec().contains(text), "the spec no longer shows {text}");
    u64::from_str_radix(&text.trim_end_matches('h').replace('_', ""), 16).unwrap()
}

fn emitted(tlp: Tlp<'_>) -> Packet {
    let mut p = Packet::new();
    tlp.emit(&mut p).unwrap();
    p
}

#[test]
fn posted_write_of_section_3_8() {
    let tl = header("0020_2800_0123_4568h");
    let data: Vec<u8> = (0..128).collect();
    let payload: Vec<Flit> = data.chunks(16).map(|c| c.try_into().unwrap()).collect();
    let expected = Tlp::PostedWrite(PostedWrite {
        dest: 5,
        addr: 0x1234_5680,
        enables: None,
        data: &data,
    });
    assert_eq!(Tlp::parse(Vc::Posted, tl, &payload), Ok(expected));
    let mut packet = Packet::new();
    packet.posted_write(5, 0x1234_5680, &data).unwrap();
    assert_eq!((packet.tl(), packet.payload()), (tl, &payload[..]));
    assert_eq!(packet.flits(), 9);

    // The data link's header flit for it, and the CRC over the whole packet.
    let head = flits("61 00 00 00 00 20 28 00 01 23 45 68 85 0d 2a a7")[0];
    let parsed = PacketHeader::parse(&head).unwrap();
    assert_eq!(
        (parsed.vc, parsed.payload_flits, parsed.seq, parsed.ack, parsed.tl),
        (Vc::Posted, 8, Seq::new(0), Seq::new(0), tl)
    );
    let mut wire = head.to_vec();
    wire.extend_from_slice(&data);
    assert_eq!(check_packet_crc(&wire), Ok(()));
}

#[test]
fn partial_write_of_section_3_8() {
    let tl = header("0040_1000_0000_0200h");
    let payload = flits(
        "e0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n00 00 00 00 00 aa bb cc 00 00 00 00 00 00 00 00",
    );
    let Ok(Tlp::PostedWrite(w)) = Tlp::parse(Vc::Posted, tl, &payload) else {
        panic!("not a posted write")
    };
    assert_eq!((w.dest, w.addr, w.enables), (2, 0x2000, Some(0b1110_0000)));
    assert_eq!(&w.data[5..8], &[0xAA, 0xBB, 0xCC]);
    let mut packet = Packet::new();
    packet.posted_write(2, 0x2005, &[0xAA, 0xBB, 0xCC]).unwrap();
    assert_eq!((packet.tl(), packet.payload()), (tl, &payload[..]));
}

#[test]
fn read_of_section_3_8() {
    let tl = header("011F_F800_0000_0107h");
    let ext = flits("00 42 a0 09 60 00 00 00 00 00 00 00 00 00 00 00");
    let read = Read {
        dest: 1023,
        addr: 0x1070,
        len: 300,
        id: RequestId {
            requester: 1,
            tag: 0x2A,
        },
    };
    assert_eq!(Tlp::parse(Vc::Request, tl, &ext), Ok(Tlp::Read(read)));
    let p = emitted(Tlp::Read(read));
    assert_eq!((p.tl(), p.payload()), (tl, &ext[..]));

    let rows = [
        ("0200_0FFE_1500_011Eh", 0u16, 16u8, 1usize),
        ("0200_0FFE_1500_21FEh", 16, 128, 8),
        ("0200_0FFE_1501_21FEh", 144, 128, 8),
        ("0200_0FFE_1502_2136h", 272, 28, 2),
    ];
    let bytes: Vec<u8> = (0..300).map(|i| i as u8).collect();
    let completions: Vec<Packet> = ReadCompletions::new(read, 1023, &bytes)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(completions.len(), rows.len());
    for ((text, offset, len, data_flits), packet) in rows.into_iter().zip(&completions) {
        let tl = header(text);
        let expected = CompletionHeader {
            requester: 1,
            completer: 1023,
            tag: 0x2A,
            status: Status::Success,
            offset,
            len,
        };
        let Ok(Tlp::Completion(c)) = Tlp::parse(Vc::Response, tl, packet.payload()) else {
            panic!("{text}")
        };
        assert_eq!(c.header, expected);
        assert_eq!(c.data, &bytes[usize::from(offset)..][..usize::from(len)]);
        assert_eq!((packet.tl(), packet.payload().len()), (tl, data_flits));
    }
}

#[test]
fn compare_swap_of_section_3_8() {
    let tl = header("0180_1000_0000_0004h");
    let payload = flits(
        "00 40 70 00 40 00 00 00 00 00 00 00 00 00 00 00\n07 00 00 00 00 00 00 00 64 00 00 00 00 00 00 00",
    );
    let cas = Atomic {
        dest: 2,
        op: AtomicOp::CompareSwap,
        addr: 0x40,
        size: 8,
        id: RequestId { requester: 1, tag: 7 },
        operand: 7,
        compare: 100,
    };
    assert_eq!(Tlp::parse(Vc::Request, tl, &payload), Ok(Tlp::Atomic(cas)));
    let p = emitted(Tlp::Atomic(cas));
    assert_eq!((p.tl(), p.payload()), (tl, &payload[..]));
}

#[test]
fn unsupported_request_of_section_3_8() {
    let tl = header("0200_0804_03A0_0000h");
    let header = CompletionHeader {
        requester: 1,
        completer: 2,
        tag: 7,
        status: Status::UnsupportedRequest,
        offset: 0,
        len: 0,
    };
    let completion = Tlp::Completion(Completion { header, data: &[] });
    assert_eq!(Tlp::parse(Vc::Response, tl, &[]), Ok(completion));
    assert_eq!(emitted(completion).tl(), tl);
}

#[test]
fn doorbell_of_section_3_8() {
    let tl = header("0060_4808_0018_0000h");
    let ext = flits("00 40 00 00 00 00 00 00 11 22 33 44 55 66 77 88");
    let doorbell = Message {
        dest: 9,
        code: MessageCode::Doorbell,
        index: 3,
        source: 1,
        value: 0x1122_3344_5566_7788,
        data: &[],
    };
    assert_eq!(Tlp::parse(Vc::Posted, tl, &ext), Ok(Tlp::Message(doorbell)));
    let p = emitted(Tlp::Message(doorbell));
    assert_eq!((p.tl(), p.payload()), (tl, &ext[..]));
}

#[test]
fn coherence_examples_of_section_3_9() {
    use link_tl::coherence::{decode, encode, Envelope, Message, RequestKind, SnoopKind};
    // Agent 3 asks home 1 for ownership of line 2Ah.
    let request = Envelope::<64> {
        source: 3,
        dest: 1,
        message: Message::Request {
            line: 0x2A,
            kind: RequestKind::RdOwn,
        },
    };
    let packet = encode(&request).unwrap();
    let tl = header("0300_0B00_0000_002Ah");
    let ext = flits("00 c0 00 02 00 00 00 00 00 00 00 00 00 00 00 00");
    assert_eq!(
        (packet.vc(), packet.tl(), packet.payload()),
        (Vc::Request, tl, &ext[..])
    );
    assert_eq!(decode::<64>(Vc::Request, tl, &ext), Ok(request));
    // Home 1 invalidates agent 3's copy of line 2Ah, phase 1.
    let tl = header("0320_1900_6000_002Ah");
    let snoop = Envelope::<64> {
        source: 1,
        dest: 3,
        message: Message::Snoop {
            line: 0x2A,
            kind: SnoopKind::SnpInv,
            phase: true,
        },
    };
    let packet = encode(&snoop).unwrap();
    assert_eq!(
        (packet.vc(), packet.tl(), packet.payload()),
        (Vc::Snoop, tl, &[][..])
    );
    assert_eq!(decode::<64>(Vc::Snoop, tl, &[]), Ok(snoop));
}
