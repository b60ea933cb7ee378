//! `linkctl phy encode` / `decode` as a user runs them: known answers, refusals and error exits.
//!
//! Expected code groups come from IEEE 802.3-2015 tables 36-1 and 36-2 (the same transcription that
//! link-phy/tests/code8b10b_tables.rs checks the tables against), written bit `a` as the least significant
//! bit, with the running disparity followed by hand.

use std::process::Output;

mod common;

fn linkctl(args: &[&str], stdin: &[u8]) -> Output {
    common::linkctl_with_input(&[], args, stdin)
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// D10.2 D11.7 D17.7 D7.3 D0.0 D31.7: A7 at both disparities, the D.7 and D.x.3 alternations.
const DATA: [u8; 6] = [0x4A, 0xEB, 0xF1, 0x67, 0x00, 0xFF];

#[test]
fn encodes_data_from_either_starting_disparity() {
    let o = linkctl(&["phy", "encode", "--code", "8b10b"], &DATA);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2aa\n1cb\n231\n0c7\n0b9\n235\n");
    let o = linkctl(&["phy", "encode", "--code", "8b10b", "--rd", "pos"], &DATA);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "2aa\n04b\n3b1\n338\n346\n1ca\n");
}

#[test]
fn encodes_control_symbols() {
    // COM, SKP, STP, EIE from RD-.
    let o = linkctl(
        &["phy", "encode", "--code", "8b10b", "--control"],
        &[0xBC, 0x1C, 0xFB, 0xFC],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "17c\n343\n3a4\n383\n");
}

#[test]
fn control_refuses_a_byte_without_a_k_code_and_names_it() {
    let o = linkctl(
        &["phy", "encode", "--code", "8b10b", "--control"],
        &[0xBC, 0x1C, 0x4A, 0xBC],
    );
    assert!(!o.status.success());
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(err.contains("0x4a") && err.contains("offset 2"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn the_line_code_must_be_given_and_supported() {
    let o = linkctl(&["phy", "encode"], b"x");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--code"));
    for command in ["encode", "decode"] {
        let o = linkctl(&["phy", command, "--code", "64b66b"], b"");
        assert!(!o.status.success());
        let err = stderr(&o);
        assert!(
            err.contains("64b66b") && err.contains("8b10b") && err.contains("128b130b"),
            "{err}"
        );
    }
}

#[test]
fn decode_inverts_encode_whatever_the_starting_disparity() {
    let bytes: Vec<u8> = (0..=255).chain((0..=255).rev()).collect();
    for rd in ["neg", "pos"] {
        let encoded = linkctl(&["phy", "encode", "--code", "8b10b", "--rd", rd], &bytes);
        assert!(encoded.status.success());
        let decoded = linkctl(&["phy", "decode", "--code", "8b10b"], &encoded.stdout);
        assert!(decoded.status.success(), "{}", stderr(&decoded));
        assert_eq!(decoded.stdout, bytes);
    }
    let k = [0xBC, 0x1C, 0x1C, 0x1C, 0xF7, 0xFE];
    let encoded = linkctl(
        &["phy", "encode", "--code", "8b10b", "--control", "--rd", "pos"],
        &k,
    );
    let decoded = linkctl(&["phy", "decode", "--code", "8b10b"], &encoded.stdout);
    assert!(decoded.status.success());
    assert_eq!(decoded.stdout, k);
}

#[test]
fn decode_takes_the_disparity_from_the_stream_and_names_symbols() {
    // D10.2 is valid in both columns; K28.5 as 283 is RD+ only, so the stream started at RD+.
    let o = linkctl(
        &["phy", "decode", "--code", "8b10b", "--symbols"],
        b"2aa 0x283\n\t2aa  17c",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "D10.2\nK28.5\nD10.2\nK28.5\n");
    let o = linkctl(&["phy", "decode", "--code", "8b10b"], b"2aa 283 2aa 17c\n");
    assert_eq!(o.stdout, [0x4A, 0xBC, 0x4A, 0xBC]);
}

#[test]
fn decode_reports_the_position_of_a_bad_code_group() {
    // 000 is no code group at all.
    let o = linkctl(&["phy", "decode", "--code", "8b10b"], b"17c 2aa 000 2aa");
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("code group 2") && err.contains("000"), "{err}");
    assert_eq!(o.stdout, [0xBC, 0x4A], "the bytes before the error are written");
    // Two RD- K28.5 in a row: the second is from the wrong column.
    let o = linkctl(&["phy", "decode", "--code", "8b10b"], b"17c 17c");
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("code group 1") && err.contains("disparity"), "{err}");
}

#[test]
fn decode_writes_the_groups_before_a_token_that_is_not_one() {
    for (input, symbols, position) in [
        (&b"17c zz 2aa"[..], "K28.5\n", "code group 1"),
        (b"17c 2aa zz", "K28.5\nD10.2\n", "code group 2"),
        (b"17c 17c zz", "K28.5\n", "code group 1"),
    ] {
        let o = linkctl(&["phy", "decode", "--code", "8b10b", "--symbols"], input);
        assert!(!o.status.success(), "{input:?}");
        assert_eq!(stdout(&o), symbols, "{input:?}");
        let err = stderr(&o);
        assert!(err.contains(position), "{input:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // Many groups read at once before the bad token: all of them are decoded.
    let bytes: Vec<u8> = (0..=255).cycle().take(1000).collect();
    let mut text = linkctl(&["phy", "encode", "--code", "8b10b"], &bytes).stdout;
    text.extend_from_slice(b"0x 2aa");
    let o = linkctl(&["phy", "decode", "--code", "8b10b"], &text);
    assert!(!o.status.success());
    assert_eq!(o.stdout, bytes);
    assert!(stderr(&o).contains("code group 1000"), "{}", stderr(&o));
}

#[test]
fn decode_refuses_malformed_input_clearly() {
    for (input, expected) in [
        (&b"17c 2ag"[..], "code group 1"),
        (b"17c 0x", "code group 1"),
        (b"400", "wider than 10 bits"),
        (b"17c 12345", "wider than 10 bits"),
        (b"\xff\xfe", "not text"),
        // The group a byte that is not text is in, as for any other bad group: the message had said
        // only "invalid utf-8 sequence of 1 bytes from index 0", an index within the group.
        (b"17c \xff\xfe 2aa", "code group 1: not text"),
    ] {
        let o = linkctl(&["phy", "decode", "--code", "8b10b"], input);
        assert!(!o.status.success(), "{input:?}");
        let err = stderr(&o);
        assert!(err.contains(expected), "{input:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // Leading zeros are fine.
    let o = linkctl(&["phy", "decode", "--code", "8b10b"], b"0017c 0x02aa");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, [0xBC, 0x4A]);
}

#[test]
fn empty_input_gives_empty_output() {
    for command in ["encode", "decode"] {
        let o = linkctl(&["phy", command, "--code", "8b10b"], b"");
        assert!(o.status.success());
        assert!(o.stdout.is_empty());
    }
}

/// `codes` packed as a capture of the lane: `junk` bits of noise first, then each group bit `a` first,
/// padded as `phy encode --packed` pads.
fn packed(codes: &[u16], junk: u32) -> Vec<u8> {
    let mut bits: Vec<u8> = (0..junk).map(|i| (i * 7 % 3 == 0) as u8).collect();
    for &c in codes {
        bits.extend((0..10).map(|i| (c >> i & 1) as u8));
    }
    // The padding `phy encode --packed` gives the last byte: alternating, the first unlike the last bit.
    while bits.len() % 8 != 0 {
        bits.push(1 - bits[bits.len() - 1]);
    }
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, b) in bits.iter().enumerate() {
        out[i / 8] |= b << (i % 8);
    }
    out
}

#[test]
fn packed_encode_is_the_code_groups_back_to_back() {
    for args in [&["--control"][..], &[]] {
        let input: &[u8] = if args.is_empty() {
            &DATA
        } else {
            &[0xBC, 0x1C, 0xFB, 0xFC, 0xBC]
        };
        let text = linkctl(&[&["phy", "encode", "--code", "8b10b"][..], args].concat(), input);
        let codes: Vec<u16> = stdout(&text)
            .split_whitespace()
            .map(|g| u16::from_str_radix(g, 16).unwrap())
            .collect();
        let o = linkctl(
            &[&["phy", "encode", "--code", "8b10b", "--packed"][..], args].concat(),
            input,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(o.stdout, packed(&codes, 0), "{args:?}");
        // docs/spec.md 1.1: K28.5 from RD- then RD+.
        let com = linkctl(
            &["phy", "encode", "--code", "8b10b", "--control", "--packed"],
            &[0xBC; 2],
        );
        assert_eq!(com.stdout, [0x7C, 0x0D, 0xAA]);
        let aligned = ["phy", "decode", "--code", "8b10b", "--packed", "--aligned"];
        assert_eq!(linkctl(&aligned, &o.stdout).stdout, input);
    }
}

#[test]
fn a_packed_capture_is_aligned_at_its_first_comma() {
    // COM, then data, as a lane carries a training set: the receiver finds the boundary at the comma
    // wherever the capture started, and the bits before it are not decoded.
    let mut symbols = vec![link_phy::Symbol::Control(0xBC)];
    symbols.extend(DATA.iter().map(|&b| link_phy::Symbol::Data(b)));
    symbols.extend([link_phy::Symbol::Control(0xBC), link_phy::Symbol::Data(0x4A)]);
    let mut codes = vec![0u16; symbols.len()];
    link_phy::code8b10b::Encoder::new()
        .encode_symbols(&symbols, &mut codes)
        .unwrap();
    for junk in [0, 1, 5, 9, 13] {
        let capture = packed(&codes, junk);
        let o = linkctl(&["phy", "decode", "--code", "8b10b", "--packed"], &capture);
        assert!(o.status.success(), "{junk}: {}", stderr(&o));
        let bytes: Vec<u8> = symbols.iter().map(|s| s.byte()).collect();
        assert_eq!(o.stdout, bytes, "{junk} bits before the comma");
        let o = linkctl(
            &["phy", "decode", "--code", "8b10b", "--packed", "--symbols"],
            &capture,
        );
        assert!(stdout(&o).starts_with("K28.5\nD10.2\nD11.7\n"), "{}", stdout(&o));
    }
    // A lane whose pair is swapped: every bit inverted, which --invert undoes.
    let bytes: Vec<u8> = symbols.iter().map(|s| s.byte()).collect();
    let inverted: Vec<u8> = packed(&codes, 6).iter().map(|b| !b).collect();
    let o = linkctl(
        &["phy", "decode", "--code", "8b10b", "--packed", "--invert"],
        &inverted,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, bytes);
    let o = linkctl(&["phy", "decode", "--code", "8b10b", "--packed"], &inverted);
    assert_ne!(o.stdout, bytes);
    // A group that does not decode ends it, named by its place after the comma.
    let mut broken = codes.clone();
    broken[3] = 0x3FF;
    let o = linkctl(
        &["phy", "decode", "--code", "8b10b", "--packed"],
        &packed(&broken, 3),
    );
    assert!(!o.status.success());
    assert_eq!(o.stdout, [0xBC, 0x4A, 0xEB]);
    assert!(stderr(&o).contains("code group 3"), "{}", stderr(&o));
}

/// `--events` reports a receiver error as a finding, and the exit status says so: 2, as `dl decode` and
/// `link decode` exit on damage; 0 when the receiver saw none.
#[test]
fn receiver_errors_in_a_lane_give_exit_status_2() {
    let mut symbols = vec![link_phy::Symbol::Control(0xBC)];
    symbols.extend(DATA.iter().map(|&b| link_phy::Symbol::Data(b)));
    let mut codes = vec![0u16; symbols.len()];
    link_phy::code8b10b::Encoder::new()
        .encode_symbols(&symbols, &mut codes)
        .unwrap();
    let events = ["phy", "decode", "--code", "8b10b", "--packed", "--events"];
    let o = linkctl(&events, &packed(&codes, 0));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains("error"), "{}", stdout(&o));
    codes[3] = 0x3FF;
    let o = linkctl(&events, &packed(&codes, 0));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("error: a code group that does not decode"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn packed_options_are_refused_where_they_do_not_apply() {
    for (args, says) in [
        (&["phy", "decode", "--code", "8b10b", "--packed"][..], "no comma"),
        (&["phy", "decode", "--code", "8b10b", "--aligned"], "--packed"),
        (
            &["phy", "encode", "--code", "8b10b", "--stream-start"],
            "--stream-start does not apply",
        ),
        (
            &["phy", "decode", "--code", "8b10b", "--lane", "2"],
            "--lane does not apply",
        ),
        (&["phy", "decode", "--code", "8b10b", "--events"], "--packed"),
        (
            &[
                "phy",
                "decode",
                "--code",
                "8b10b",
                "--packed",
                "--aligned",
                "--json",
            ],
            "--aligned does not apply",
        ),
        (
            &["phy", "decode", "--code", "128b130b", "--packed", "--events"],
            "--events does not apply",
        ),
    ] {
        let o = linkctl(args, &[0x55; 40]);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(says) && !err.contains("panicked"), "{args:?}: {err}");
    }
}
