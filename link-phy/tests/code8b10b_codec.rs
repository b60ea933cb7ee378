//! Property tests of the 8b/10b encoder and decoder: round trips, the fast paths against the scalar
//! reference, the code's disparity and run-length rules, and error reporting.

use link_phy::code8b10b::{decode_code_group, encode_symbol, Decoder, Encoder};
use link_phy::symbol::control;
use link_phy::{Disparity, Error, Symbol};
use proptest::prelude::*;

fn any_disparity() -> impl Strategy<Value = Disparity> {
    prop_oneof![Just(Disparity::Negative), Just(Disparity::Positive)]
}

/// Data bytes and the twelve valid control symbols.
fn any_symbol() -> impl Strategy<Value = Symbol> {
    prop_oneof![
        4 => any::<u8>().prop_map(Symbol::Data),
        1 => prop::sample::select(control::ALL.to_vec()).prop_map(Symbol::Control),
    ]
}

fn encode_all(rd: Disparity, symbols: &[Symbol]) -> (Vec<u16>, Disparity) {
    let mut encoder = Encoder::with_disparity(rd);
    let mut codes = vec![0; symbols.len()];
    encoder.encode_symbols(symbols, &mut codes).unwrap();
    (codes, encoder.disparity())
}

/// The serial bits of a code-group stream, first on the wire first.
fn serial_bits(codes: &[u16]) -> Vec<bool> {
    codes
        .iter()
        .flat_map(|&c| (0..10).map(move |i| c >> i & 1 == 1))
        .collect()
}

/// The obviously correct reference for `decode_data`: one code group at a time.
fn decode_data_scalar(rd: Disparity, codes: &[u16]) -> (Result<(), Error>, Vec<u8>, Disparity) {
    let mut decoder = Decoder::new(rd);
    let mut out = Vec::new();
    for (position, &code) in codes.iter().enumerate() {
        let outcome = decoder.decode(code).map_err(|e| match e {
            Error::InvalidCodeGroup { code, .. } => Error::InvalidCodeGroup { position, code },
            Error::DisparityError { code, expected, .. } => Error::DisparityError {
                position,
                code,
                expected,
            },
            other => other,
        });
        match outcome {
            Ok(Symbol::Data(b)) => out.push(b),
            Ok(Symbol::Control(byte)) => {
                return (
                    Err(Error::UnexpectedControl { position, byte }),
                    out,
                    decoder.disparity(),
                )
            }
            Err(e) => return (Err(e), out, decoder.disparity()),
        }
    }
    (Ok(()), out, decoder.disparity())
}

/// Replacement values for corrupting a stream: anything, any 10-bit value, or a K code group.
fn corruption() -> impl Strategy<Value = u16> {
    prop_oneof![
        any::<u16>(),
        0..1024u16,
        (prop::sample::select(control::ALL.to_vec()), any_disparity()).prop_map(|(b, rd)| encode_symbol(
            rd,
            Symbol::Control(b)
        )
        .unwrap()
        .0),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn symbol_streams_round_trip(rd in any_disparity(), symbols in prop::collection::vec(any_symbol(), 0..400)) {
        let (codes, rd_after) = encode_all(rd, &symbols);
        let mut decoder = Decoder::new(rd);
        let mut back = vec![Symbol::Data(0); codes.len()];
        prop_assert_eq!(decoder.decode_symbols(&codes, &mut back), Ok(codes.len()));
        prop_assert_eq!(back, symbols);
        prop_assert_eq!(decoder.disparity(), rd_after);
    }

    #[test]
    fn byte_streams_round_trip_on_the_fast_paths(rd in any_disparity(), bytes in prop::collection::vec(any::<u8>(), 0..1000)) {
        let mut encoder = Encoder::with_disparity(rd);
        let mut codes = vec![0; bytes.len()];
        encoder.encode_data(&bytes, &mut codes).unwrap();
        let mut decoder = Decoder::new(rd);
        let mut back = vec![0; bytes.len()];
        prop_assert_eq!(decoder.decode_data(&codes, &mut back), Ok(()));
        prop_assert_eq!(back, bytes);
        prop_assert_eq!(decoder.disparity(), encoder.disparity());
    }

    #[test]
    fn encode_data_matches_the_scalar_encoder(rd in any_disparity(), bytes in prop::collection::vec(any::<u8>(), 0..1000)) {
        let mut fast = Encoder::with_disparity(rd);
        let mut codes = vec![0; bytes.len()];
        fast.encode_data(&bytes, &mut codes).unwrap();
        let mut scalar_rd = rd;
        for (i, &b) in bytes.iter().enumerate() {
            let (code, after) = encode_symbol(scalar_rd, Symbol::Data(b)).unwrap();
            prop_assert_eq!(codes[i], code, "byte {}", i);
            scalar_rd = after;
        }
        prop_assert_eq!(fast.disparity(), scalar_rd);
    }

    #[test]
    fn decode_data_matches_the_scalar_decoder_on_any_input(
        rd in any_disparity(),
        sent_from in any_disparity(),
        bytes in prop::collection::vec(any::<u8>(), 0..700),
        corruptions in prop::collection::vec((any::<prop::sample::Index>(), corruption()), 0..4),
    ) {
        let mut codes = vec![0; bytes.len()];
        Encoder::with_disparity(sent_from).encode_data(&bytes, &mut codes).unwrap();
        let len = codes.len();
        if len > 0 {
            for (at, value) in corruptions {
                codes[at.index(len)] = value;
            }
        }
        let (expected, expected_out, expected_rd) = decode_data_scalar(rd, &codes);
        let mut decoder = Decoder::new(rd);
        let mut out = vec![0; codes.len()];
        let outcome = decoder.decode_data(&codes, &mut out);
        prop_assert_eq!(outcome, expected);
        prop_assert_eq!(&out[..expected_out.len()], &expected_out[..]);
        prop_assert_eq!(decoder.disparity(), expected_rd);
    }

    #[test]
    fn arbitrary_code_groups_decode_the_same_on_both_paths(rd in any_disparity(), codes in prop::collection::vec(0..1100u16, 0..300)) {
        let (expected, expected_out, expected_rd) = decode_data_scalar(rd, &codes);
        let mut decoder = Decoder::new(rd);
        let mut out = vec![0; codes.len()];
        prop_assert_eq!(decoder.decode_data(&codes, &mut out), expected);
        prop_assert_eq!(&out[..expected_out.len()], &expected_out[..]);
        prop_assert_eq!(decoder.disparity(), expected_rd);
    }

    #[test]
    fn running_disparity_stays_within_one_at_code_group_boundaries(
        rd in any_disparity(),
        symbols in prop::collection::vec(any_symbol(), 1..300),
    ) {
        // The running digital sum (ones minus zeros) starts at -1 for RD- and +1 for RD+. The code keeps it
        // at +-1 after every code group (and after every 6b sub-block), and within +-3 at every bit.
        let mut sum: i32 = if rd == Disparity::Negative { -1 } else { 1 };
        let mut encoder = Encoder::with_disparity(rd);
        for s in &symbols {
            let code = encoder.encode(*s).unwrap();
            for i in 0..10 {
                sum += if code >> i & 1 == 1 { 1 } else { -1 };
                prop_assert!(sum.abs() <= 3, "{:?}: running sum {}", s, sum);
                if i == 5 {
                    prop_assert_eq!(sum.abs(), 1, "after the 6b sub-block of {:?}", s);
                }
            }
            prop_assert_eq!(sum.abs(), 1);
            let expected = if sum < 0 { Disparity::Negative } else { Disparity::Positive };
            prop_assert_eq!(encoder.disparity(), expected);
        }
    }

    #[test]
    fn no_run_of_more_than_five_equal_bits(rd in any_disparity(), symbols in prop::collection::vec(any_symbol(), 1..300)) {
        let (codes, _) = encode_all(rd, &symbols);
        let bits = serial_bits(&codes);
        let mut run = 1;
        for pair in bits.windows(2) {
            run = if pair[0] == pair[1] { run + 1 } else { 1 };
            prop_assert!(run <= 5);
        }
    }

    #[test]
    fn a_wrong_starting_disparity_is_reported_once_at_the_first_unbalanced_group(
        bytes in prop::collection::vec(any::<u8>(), 1..400),
    ) {
        // Sent from RD+, received by a decoder expecting RD-: the first code group whose two columns
        // differ is a disparity error, after which the decoder follows the sender and nothing else fails.
        let mut codes = vec![0; bytes.len()];
        Encoder::with_disparity(Disparity::Positive).encode_data(&bytes, &mut codes).unwrap();
        let mut decoder = Decoder::new(Disparity::Negative);
        let mut out = vec![0; bytes.len()];
        let first_differing = codes.iter().position(|&c| decode_code_group(Disparity::Negative, c).is_err());
        match (decoder.decode_data(&codes, &mut out), first_differing) {
            (Ok(()), None) => prop_assert_eq!(&out, &bytes),
            (Err(Error::DisparityError { position, code, expected }), Some(at)) => {
                prop_assert_eq!((position, code, expected), (at, codes[at], Disparity::Negative));
                prop_assert_eq!(&out[..at], &bytes[..at]);
                prop_assert_eq!(decoder.decode_data(&codes[at + 1..], &mut out[at + 1..]), Ok(()));
                prop_assert_eq!(&out[at + 1..], &bytes[at + 1..]);
            }
            (outcome, at) => prop_assert!(false, "{:?} with the first RD+-only group at {:?}", outcome, at),
        }
    }

    #[test]
    fn a_code_group_from_the_wrong_column_is_found_at_its_position(
        symbols in prop::collection::vec(any_symbol(), 1..300),
        at in any::<prop::sample::Index>(),
    ) {
        let mut encoder = Encoder::new();
        let mut codes = Vec::new();
        let mut rds = Vec::new();
        for s in &symbols {
            rds.push(encoder.disparity());
            codes.push(encoder.encode(*s).unwrap());
        }
        let i = at.index(symbols.len());
        let (other, _) = encode_symbol(rds[i].flipped(), symbols[i]).unwrap();
        prop_assume!(other != codes[i]);
        codes[i] = other;
        let mut decoder = Decoder::new(Disparity::Negative);
        let mut out = vec![Symbol::Data(0); codes.len()];
        prop_assert_eq!(
            decoder.decode_symbols(&codes, &mut out),
            Err(Error::DisparityError { position: i, code: other, expected: rds[i] })
        );
        prop_assert_eq!(&out[..i], &symbols[..i]);
    }

    #[test]
    fn an_invalid_code_group_keeps_the_running_disparity(
        bytes in prop::collection::vec(any::<u8>(), 2..300),
        at in any::<prop::sample::Index>(),
        value in prop_oneof![0..1024u16, 1024..=u16::MAX],
    ) {
        prop_assume!(decode_code_group(Disparity::Negative, value).is_err()
            && decode_code_group(Disparity::Positive, value).is_err());
        let mut codes = vec![0; bytes.len()];
        Encoder::new().encode_data(&bytes, &mut codes).unwrap();
        let i = at.index(bytes.len());
        codes.insert(i, value);
        let mut decoder = Decoder::new(Disparity::Negative);
        let mut out = vec![0; codes.len()];
        prop_assert_eq!(decoder.decode_data(&codes, &mut out), Err(Error::InvalidCodeGroup { position: i, code: value }));
        prop_assert_eq!(&out[..i], &bytes[..i]);
        // Skipping the bad group, the rest decodes: the running disparity was kept.
        prop_assert_eq!(decoder.decode_data(&codes[i + 1..], &mut out[i..bytes.len()]), Ok(()));
        prop_assert_eq!(&out[..bytes.len()], &bytes[..]);
    }
}

#[test]
fn decode_data_refuses_a_control_symbol_at_its_position() {
    let symbols = [Symbol::Data(1), Symbol::Data(2), Symbol::SKP, Symbol::Data(3)];
    let (codes, _) = encode_all(Disparity::Negative, &symbols);
    let mut decoder = Decoder::new(Disparity::Negative);
    let mut out = [0; 4];
    assert_eq!(
        decoder.decode_data(&codes, &mut out),
        Err(Error::UnexpectedControl {
            position: 2,
            byte: control::SKP
        })
    );
    assert_eq!(out[..2], [1, 2]);
    // The K code group was valid, so the running disparity followed it and the rest decodes.
    assert_eq!(decoder.decode_data(&codes[3..], &mut out[3..]), Ok(()));
    assert_eq!(out[3], 3);
}

#[test]
fn values_wider_than_ten_bits_are_invalid_even_if_their_low_bits_are_valid() {
    let (com, _) = encode_symbol(Disparity::Negative, Symbol::COM).unwrap();
    for extra in [0x400, 0x8000, 0xFC00] {
        let code = com | extra;
        assert_eq!(
            decode_code_group(Disparity::Negative, code),
            Err(Error::InvalidCodeGroup { position: 0, code })
        );
        let (d, _) = encode_symbol(Disparity::Negative, Symbol::Data(0x4A)).unwrap();
        let codes = [d, d | extra];
        let mut out = [0; 2];
        assert_eq!(
            Decoder::new(Disparity::Negative).decode_data(&codes, &mut out),
            Err(Error::InvalidCodeGroup {
                position: 1,
                code: d | extra
            })
        );
    }
}

#[test]
fn encode_symbols_is_all_or_nothing() {
    let mut encoder = Encoder::with_disparity(Disparity::Positive);
    let mut out = [0xFFFF; 3];
    let bad = [Symbol::Data(1), Symbol::Control(0x00), Symbol::COM];
    assert_eq!(
        encoder.encode_symbols(&bad, &mut out),
        Err(Error::NotAControlSymbol { byte: 0x00 })
    );
    assert_eq!(out, [0xFFFF; 3]);
    assert_eq!(encoder.disparity(), Disparity::Positive);
    assert_eq!(
        encoder.encode(Symbol::Control(0x4A)),
        Err(Error::NotAControlSymbol { byte: 0x4A })
    );
    assert_eq!(encoder.disparity(), Disparity::Positive);
}

#[test]
fn short_output_buffers_are_refused_before_anything_is_done() {
    let too_small = Err(Error::BufferTooSmall {
        needed: 3,
        available: 2,
    });
    let mut encoder = Encoder::new();
    assert_eq!(encoder.encode_symbols(&[Symbol::COM; 3], &mut [0; 2]), too_small);
    assert_eq!(encoder.encode_data(&[0; 3], &mut [0; 2]), too_small);
    assert_eq!(encoder.disparity(), Disparity::Negative);
    let mut decoder = Decoder::new(Disparity::Positive);
    assert_eq!(
        decoder.decode_symbols(&[0x17C; 3], &mut [Symbol::COM; 2]),
        too_small.map(|()| 0)
    );
    assert_eq!(decoder.decode_data(&[0x17C; 3], &mut [0; 2]), too_small);
    assert_eq!(decoder.disparity(), Disparity::Positive);
    // A longer output is fine; only the first codes.len() elements are written.
    let mut out = [7u8; 4];
    let mut codes = [0; 2];
    Encoder::new().encode_data(&[0x4A, 0x4A], &mut codes).unwrap();
    Decoder::new(Disparity::Negative)
        .decode_data(&codes, &mut out)
        .unwrap();
    assert_eq!(out, [0x4A, 0x4A, 7, 7]);
}

#[test]
fn set_disparity_and_accessors() {
    let mut decoder = Decoder::default();
    assert_eq!(decoder.disparity(), Disparity::Negative);
    decoder.set_disparity(Disparity::Positive);
    assert_eq!(decoder.decode(0x283), Ok(Symbol::COM));
    assert_eq!(decoder.disparity(), Disparity::Negative);
    assert_eq!(
        decoder.decode(0x283),
        Err(Error::DisparityError {
            position: 0,
            code: 0x283,
            expected: Disparity::Negative
        })
    );
    // The sender was at RD+ after all: K28.5 took it to RD-, and the decoder followed.
    assert_eq!(decoder.disparity(), Disparity::Negative);
    assert_eq!(Encoder::default(), Encoder::new());
    assert_eq!(Encoder::new().disparity(), Disparity::Negative);
}
