//! 128b/130b against the PCI Express Base Specification's tables and figures (transcribed from the
//! specification text, chapter 4), and the worked examples of docs/spec.md section 1.3.

use link_phy::code128b130b::ordered_set::{EIEOS, EIOS, FTS, SDS, TS1_ID, TS2_ID};
use link_phy::code128b130b::token::{frame_crc, frame_parity, EDB, EDS, SDP};
use link_phy::code128b130b::{Block, FramingToken, LaneDecoder, LaneEncoder, OrderedSetBlock, SyncHeader};
use link_phy::ordered_set::{DataRates, TrainingSet};
use link_phy::Error;

#[test]
fn sync_headers_go_on_the_wire_h0_first() {
    // 4.2.2.1: "A Sync Header of 10b indicates a Data Block", "01b indicates an Ordered Set Block", and a
    // header written H1H0 is placed on the lane starting with H0.
    let mut enc = LaneEncoder::new(0);
    let (data, _) = enc.encode_block(&Block::data([0; 16]));
    assert_eq!((data & 1, data >> 1 & 1), (0, 1));
    let (os, _) = enc.encode_block(&OrderedSetBlock::Eios.to_block());
    assert_eq!((os & 1, os >> 1 & 1), (1, 0));
    assert_eq!(SyncHeader::from_bits(0b00), None);
    assert_eq!(SyncHeader::from_bits(0b11), None);
}

#[test]
fn ordered_set_tables() {
    // Table 4-44: EIEOS at 8.0 GT/s, 00h in even symbols and FFh in odd ones.
    assert_eq!(EIEOS, [0x00, 0xFF].repeat(8)[..]);
    // Table 4-41: EIOS, 66h in every symbol.
    assert_eq!(EIOS, [0x66; 16]);
    // Table 4-50: SDS at 8.0 and 16.0 GT/s, E1h then fifteen 55h.
    assert_eq!(SDS[0], 0xE1);
    assert!(SDS[1..].iter().all(|&b| b == 0x55));
    // Table 4-49: FTS at 8.0 GT/s and above.
    assert_eq!(
        FTS,
        [0x55, 0x47, 0x4E, 0xC7, 0xCC, 0xC6, 0xC9, 0x25, 0x6E, 0xEC, 0x88, 0x7F, 0x80, 0x8D, 0x8B, 0x8E]
    );
    // Tables 4-34 and 4-35: symbol 0 is 1Eh (TS1) or 2Dh (TS2); identifiers 4Ah / 45h in 10-15.
    assert_eq!((TS1_ID, TS2_ID), (0x1E, 0x2D));
    let ts = TrainingSet::polling(DataRates::GEN1, 0);
    let p = OrderedSetBlock::Training(ts).to_payload();
    assert_eq!(p[0], 0x1E);
    assert_eq!((p[1], p[2]), (0xF7, 0xF7), "PAD is F7h at 8.0 GT/s");
    assert!(p[10..].iter().all(|&b| b == 0x4A));
}

#[test]
fn eieos_is_eight_zeros_then_eight_ones_on_the_wire() {
    // 4.2.5.3: "A low frequency pattern that alternates between eight 0s and eight 1s."
    let (first, last) = LaneEncoder::new(4).encode_block(&OrderedSetBlock::Eieos.to_block());
    let bits: Vec<u8> = (0..128)
        .map(|i| (first >> i & 1) as u8)
        .chain([last & 1, last >> 1 & 1])
        .collect();
    assert_eq!(bits[..2], [1, 0]);
    for (i, chunk) in bits[2..].chunks(8).enumerate() {
        assert!(chunk.iter().all(|&b| b == (i % 2) as u8), "run {i}");
    }
}

#[test]
fn framing_token_layouts() {
    // Figure 4-13.
    assert_eq!(SDP, [0xF0, 0xAC]);
    assert_eq!(EDB, [0xC0; 4]);
    assert_eq!(EDS, [0x1F, 0x80, 0x90, 0x00]);
    assert_eq!(FramingToken::parse(&[0x00]), Ok((FramingToken::Idl, 1)));
    assert_eq!(FramingToken::parse(&EDS), Ok((FramingToken::Eds, 4)));
    assert_eq!(
        FramingToken::parse(&[0xF0]),
        Err(Error::BufferTooSmall {
            needed: 2,
            available: 1
        })
    );
    assert_eq!(
        FramingToken::parse(&[0x12]),
        Err(Error::InvalidFramingToken { first: 0x12 })
    );
    assert_eq!(
        FramingToken::Stp { length_dw: 1, seq: 0 }.emit(&mut [0; 4]),
        Err(Error::ValueOutOfRange {
            field: "STP TLP length",
            value: 1
        })
    );
}

#[test]
fn eds_is_an_stp_shape_with_length_1_and_a_valid_frame_crc() {
    // Figure 4-13 gives EDS field by field: length[3:0] 0001b, 1111b; parity 1b, length[10:4] 0; frame CRC
    // 1001b. 4.2.2.3.1 says an STP-shaped token with length 1 is checked against EDS, so its CRC and
    // parity are those of length 1: an independent check of the frame CRC equations.
    assert_eq!(frame_crc(1), 0b1001);
    assert_eq!(frame_parity(1), 1);
    assert_eq!(EDS[2] >> 4, frame_crc(1));
    assert_eq!(EDS[1] >> 7, frame_parity(1));
}

#[test]
fn frame_crc_equations_equal_the_polynomial_definition() {
    // 4.2.2.3.1 implementation note: C = (L[0]x^14 + L[1]x^13 + ... + L[10]x^4) mod (x^4 + x + 1), and the
    // frame parity reduces to L[10]^L[9]^L[8]^L[6]^L[5]^L[2]^L[0].
    for length in 0u16..2048 {
        let mut rem = 0u32;
        for i in 0..11 {
            // Polynomial long division, most significant term (L[0] x^14) first.
            rem = rem << 1 | u32::from(length >> i & 1);
            if rem & 0x10 != 0 {
                rem ^= 0x13;
            }
        }
        for _ in 0..4 {
            rem <<= 1;
            if rem & 0x10 != 0 {
                rem ^= 0x13;
            }
        }
        let crc = (0..4).fold(0u8, |c, i| c | ((rem >> i & 1) as u8) << i);
        assert_eq!(frame_crc(length), crc, "length {length}");
        let reduced = [10, 9, 8, 6, 5, 2, 0]
            .iter()
            .fold(0u8, |p, &i| p ^ (length >> i & 1) as u8);
        assert_eq!(frame_parity(length), reduced, "length {length}");
    }
}

#[test]
fn spec_worked_example_stp() {
    // docs/spec.md 1.3.6: STP for a 6 DW TLP with sequence number 123h.
    let mut out = [0u8; 4];
    FramingToken::Stp {
        length_dw: 6,
        seq: 0x123,
    }
    .emit(&mut out)
    .unwrap();
    assert_eq!(out, [0x6F, 0x80, 0x21, 0x23]);
}

#[test]
fn spec_worked_example_lane0_data_block() {
    // docs/spec.md 1.3.7: a data block of sixteen 00h (IDL tokens) on lane 0, straight after an EIEOS (or
    // from reset), is header 0, 1 then lane 0's keystream; packed LSB first into 17 bytes.
    let mut out = [0u8; 17];
    assert_eq!(LaneEncoder::new(0).encode_data(&[0; 16], &mut out), Ok(130));
    assert_eq!(
        out,
        [
            0xB2, 0xF5, 0x52, 0x62, 0x4E, 0x19, 0x63, 0x3B, 0x43, 0xA9, 0xD5, 0x05, 0x13, 0x3C, 0x0D, 0x1F,
            0x00
        ]
    );
    let mut ks = [0u8; 16];
    link_phy::scrambler::Gen3Scrambler::new(0).apply(&mut ks);
    assert_eq!(
        ks,
        [0x6C, 0xBD, 0x94, 0x98, 0x53, 0xC6, 0xD8, 0xCE, 0x50, 0x6A, 0x75, 0xC1, 0x04, 0x4F, 0xC3, 0x07]
    );
    // A receiver that knows where the block starts takes it back without an EIEOS to align on; one that
    // must search for an EIEOS delivers nothing.
    let (mut aligned, mut searching) = (LaneDecoder::aligned(0), LaneDecoder::new(0));
    for decoder in [&mut aligned, &mut searching] {
        for (k, chunk) in out.chunks(8).enumerate() {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            decoder.push_bits(u64::from_le_bytes(word), (130 - 64 * k as u32).min(64));
        }
    }
    assert_eq!(aligned.pop(), Some(Ok(Block::data([0; 16]))));
    assert_eq!((aligned.pop(), searching.pop()), (None, None));
}
