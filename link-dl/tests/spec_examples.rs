//! The worked examples of docs/spec.md section 2, byte for byte.

use link_dl::flit::{check_packet_crc, ControlFlit, ControlKind, IdentFlit, PacketHeader};
use link_dl::seq::Seq;
use link_dl::Vc;

fn bytes(hex: &str) -> Vec<u8> {
    hex.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

fn spec() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec.md")).unwrap()
}

#[test]
fn packet_header_of_section_2_2() {
    let header = "61 01 40 38 48 20 10 00 00 00 12 30 e0 82 6a c8";
    assert!(spec().contains(header), "the spec no longer shows this example");
    let mut packet = bytes(header);
    packet.extend(0u8..128);
    let flit: [u8; 16] = packet[..16].try_into().unwrap();
    assert_eq!(
        PacketHeader::parse(&flit),
        Ok(PacketHeader {
            payload_flits: 8,
            vc: Vc::Posted,
            seq: Seq::new(5),
            ack: Seq::new(3),
            credit_vc: Vc::Response,
            credit: 0x12,
            tl: 0x20_1000_0000_1230,
        })
    );
    assert_eq!(check_packet_crc(&packet), Ok(()));
    assert_eq!(
        u32::from_le_bytes(packet[12..16].try_into().unwrap()),
        0xC86A_82E0
    );
    // Emitting the parsed header gives the same bytes back (CRC field aside).
    let mut again = [0u8; 16];
    PacketHeader::parse(&flit).unwrap().emit(&mut again).unwrap();
    assert_eq!(again[..12], flit[..12]);
}

#[test]
fn control_flit_of_section_2_3() {
    let example = "81 00 3f f0 00 40 00 80 12 34 00 00 ae 23 54 d8";
    assert!(spec().contains(example), "the spec no longer shows this example");
    let flit: [u8; 16] = bytes(example).try_into().unwrap();
    let control = ControlFlit {
        kind: ControlKind::Update,
        ack: Seq::new(1023),
        credits: [64, 128, 0x1234, 0],
    };
    assert_eq!(ControlFlit::parse(&flit), Ok(control));
    assert_eq!(control.emit(), flit);
}

#[test]
fn identity_flit_of_section_2_3() {
    let example = "85 11 00 00 01 23 45 67 89 ab cd ef 37 06 23 7f";
    assert!(spec().contains(example), "the spec no longer shows this example");
    let flit: [u8; 16] = bytes(example).try_into().unwrap();
    let ident = IdentFlit {
        node: 0x0123_4567_89AB_CDEF,
        port: 17,
    };
    assert_eq!(IdentFlit::parse(&flit), Ok(ident));
    assert_eq!(ident.emit(), flit);
    assert_eq!(u32::from_le_bytes(flit[12..].try_into().unwrap()), 0x7F23_0637);
}

#[test]
fn low_power_request_of_section_2_9() {
    let example = "86 00 00 50 00 40 00 40 00 40 00 40 86 d7 3b 2a";
    assert!(spec().contains(example), "the spec no longer shows this example");
    let flit: [u8; 16] = bytes(example).try_into().unwrap();
    let control = ControlFlit {
        kind: ControlKind::PmEnterL1,
        ack: Seq::new(5),
        credits: [64; 4],
    };
    assert_eq!(ControlFlit::parse(&flit), Ok(control));
    assert_eq!(control.emit(), flit);
    assert_eq!(u32::from_le_bytes(flit[12..].try_into().unwrap()), 0x2A3B_D786);
    // The grant differs in its type field only (and so its CRC).
    let mut grant = flit;
    grant[0] = 0x87;
    let crc = link_dl::crc::checksum(&grant[..12]);
    grant[12..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        ControlFlit::parse(&grant).map(|c| c.kind),
        Ok(ControlKind::PmRequestAck)
    );
}
