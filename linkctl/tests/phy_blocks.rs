//! `linkctl phy encode` / `decode` with `--code 128b130b` as a user runs them: the worked example of
//! docs/spec.md 1.3.7, round trips in text and packed form, a capture of a lane decoded as a receiver
//! decodes it, and refusals.

use std::process::Output;

use link_phy::code128b130b::{Block, LaneEncoder, OrderedSetBlock};
use link_phy::ordered_set::{DataRates, TrainingControl, TrainingSet, TsKind};

mod common;

fn linkctl(args: &[&str], stdin: &[u8]) -> Output {
    common::linkctl_with_input(&["phy"], args, stdin)
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Runs a command that must succeed, and gives what it wrote.
fn ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let o = linkctl(args, stdin);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o.stdout
}

/// Runs a command that must find a receiver error (exit status 2), and gives what it wrote.
fn found_errors(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let o = linkctl(args, stdin);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    o.stdout
}

/// The 17 bytes of spec 1.3.7: sixteen 00h in a data block on lane 0, packed.
const WORKED_EXAMPLE: [u8; 17] = [
    0xB2, 0xF5, 0x52, 0x62, 0x4E, 0x19, 0x63, 0x3B, 0x43, 0xA9, 0xD5, 0x05, 0x13, 0x3C, 0x0D, 0x1F, 0x00,
];

#[test]
fn the_specs_worked_example_in_text_and_packed() {
    let text = ok(&["encode", "--code", "128b130b"], &[0; 16]);
    assert_eq!(
        String::from_utf8(text.clone()).unwrap(),
        "10 6cbd949853c6d8ce506a75c1044fc307\n"
    );
    let packed = ok(&["encode", "--code", "128b130b", "--packed"], &[0; 16]);
    assert_eq!(packed, WORKED_EXAMPLE);
    assert_eq!(ok(&["decode", "--code", "128b130b"], &text), [0; 16]);
    let aligned = ["decode", "--code", "128b130b", "--packed", "--aligned"];
    assert_eq!(ok(&aligned, &WORKED_EXAMPLE), [0; 16]);
    // The keystream itself, as `phy scramble` gives it.
    let keystream = ok(&["scramble", "--gen", "3", "--lane", "0"], &[0; 16]);
    let symbols: String = keystream.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(symbols, "6cbd949853c6d8ce506a75c1044fc307");
}

/// Some bytes from a seed.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn decode_gives_back_what_encode_was_given_on_any_lane() {
    // Sizes around the packed form's four-block groups and the commands' 64 KiB reads.
    for (case, (blocks, lane)) in [(0, 0), (1, 3), (3, 7), (4, 12), (5, 31), (4097, 9), (9000, 1)]
        .into_iter()
        .enumerate()
    {
        let data = bytes(case as u64 + 11, 16 * blocks);
        let lane = lane.to_string();
        for form in [&[][..], &["--packed"]] {
            let encode = [&["encode", "--code", "128b130b", "--lane", &lane][..], form].concat();
            let plain = ok(&encode, &data);
            let started = ok(&[&encode[..], &["--stream-start"]].concat(), &data);
            let decode = [&["decode", "--code", "128b130b", "--lane", &lane][..], form].concat();
            // A stream with its start is found by its EIEOS; a packed one without must be said aligned.
            assert_eq!(
                ok(&decode, &started),
                data,
                "{blocks} blocks on lane {lane} {form:?}"
            );
            let aligned = if form.is_empty() { &[][..] } else { &["--aligned"] };
            assert_eq!(
                ok(&[&decode[..], aligned].concat(), &plain),
                data,
                "{blocks} blocks {form:?}"
            );
        }
    }
}

/// What a lane carries as a link trains and starts its data stream: TS1s, TS2s, an EIEOS, an SDS, data,
/// a SKP ordered set and more data, encoded by the library's transmitter.
fn training_then_data(lane: usize, data: &[u8]) -> Vec<Block> {
    let ts = |kind| {
        OrderedSetBlock::Training(TrainingSet {
            kind,
            link: Some(4),
            lane: Some(lane as u8),
            n_fts: 45,
            rates: DataRates::GEN1 | DataRates::GEN2 | DataRates::GEN3 | DataRates::SPEED_CHANGE,
            control: TrainingControl::empty(),
        })
        .to_block()
    };
    let mut blocks = vec![
        OrderedSetBlock::Eieos.to_block(),
        ts(TsKind::Ts1),
        ts(TsKind::Ts1),
    ];
    blocks.extend([ts(TsKind::Ts2), ts(TsKind::Ts2), OrderedSetBlock::Sds.to_block()]);
    let data_blocks: Vec<Block> = data
        .chunks(16)
        .map(|c| Block::data(c.try_into().unwrap()))
        .collect();
    blocks.extend_from_slice(&data_blocks[..2]);
    blocks.push(OrderedSetBlock::skp().to_block());
    blocks.extend_from_slice(&data_blocks[2..]);
    blocks
}

/// `blocks` packed as a capture that starts `junk` bits (of noise) before the first block.
fn capture(lane: usize, blocks: &[Block], junk: u32) -> Vec<u8> {
    let mut wire = vec![0u8; (blocks.len() * 130).div_ceil(8)];
    LaneEncoder::new(lane).encode_blocks(blocks, &mut wire).unwrap();
    let noise = bytes(u64::from(junk) + 5, 8);
    let mut out = vec![0u8; wire.len() + 9];
    for i in 0..8 * wire.len() + junk as usize {
        let bit = match i.checked_sub(junk as usize) {
            None => noise[i / 8] >> (i % 8) & 1,
            Some(j) => wire[j / 8] >> (j % 8) & 1,
        };
        out[i / 8] |= bit << (i % 8);
    }
    out
}

#[test]
fn a_capture_of_a_lane_is_decoded_as_a_receiver_decodes_it() {
    let data = bytes(3, 64);
    for (lane, junk) in [(0, 0), (2, 5), (7, 63)] {
        let blocks = training_then_data(lane, &data);
        let wire = capture(lane, &blocks, junk);
        let lane = lane.to_string();
        let decode = ["decode", "--code", "128b130b", "--packed", "--lane", &lane];
        assert_eq!(
            ok(&decode, &wire),
            data,
            "lane {lane}, {junk} bits before the EIEOS"
        );
        // The same capture from a lane whose pair is swapped.
        let inverted: Vec<u8> = wire.iter().map(|b| !b).collect();
        assert_eq!(ok(&[&decode[..], &["--invert"]].concat(), &inverted), data);
        assert!(
            !linkctl(&decode, &inverted).status.success(),
            "found an EIEOS in inverted bits"
        );
        let lines = String::from_utf8(ok(&[&decode[..], &["--blocks"]].concat(), &wire)).unwrap();
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(lines.len(), blocks.len(), "{lines:#?}");
        assert_eq!(lines[0], "0 ordered-set 00ff00ff00ff00ff00ff00ff00ff00ff EIEOS");
        let ts1 = format!("TS1 link 4 lane {lane} N_FTS 45 rates 2.5/5/8 GT/s SPEED_CHANGE");
        assert!(
            lines[1].starts_with("1 ordered-set 1e04") && lines[1].ends_with(&ts1),
            "{}",
            lines[1]
        );
        assert!(lines[3].ends_with(&ts1.replace("TS1", "TS2")), "{}", lines[3]);
        assert_eq!(lines[5], "5 ordered-set e1555555555555555555555555555555 SDS");
        let symbols: String = data[..16].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lines[6], format!("6 data {symbols}"));
        assert!(
            lines[8].starts_with("8 ordered-set aaaaaaaa")
                && lines[8].contains("SKP of 16 symbols on the wire, LFSR ")
        );
        assert!(
            !lines[8].contains("disagrees") && !lines[8].contains("parity"),
            "{}",
            lines[8]
        );
        assert!(lines[9].starts_with("9 data "), "{}", lines[9]);
        // The same blocks as JSON, a line each.
        let json = String::from_utf8(ok(&[&decode[..], &["--json"]].concat(), &wire)).unwrap();
        let objects: Vec<serde_json::Value> =
            json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(objects.len(), blocks.len());
        for (k, (v, line)) in objects.iter().zip(&lines).enumerate() {
            assert_eq!(v["block"], k);
            assert_eq!(v["undefined_sync_header"], false);
            let words: Vec<&str> = line.split(' ').collect();
            assert_eq!(
                (v["kind"].as_str(), v["symbols"].as_str()),
                (Some(words[1]), Some(words[2]))
            );
        }
        let ts1 = &objects[1]["ordered_set"];
        assert_eq!(ts1["name"], "TS1");
        assert_eq!(ts1["link"].as_u64(), Some(4));
        assert_eq!(ts1["lane"].as_u64(), Some(lane.parse().unwrap()));
        assert_eq!(
            (ts1["n_fts"].as_u64(), &ts1["rates_gts"]),
            (Some(45), &serde_json::json!([2.5, 5.0, 8.0]))
        );
        assert_eq!(ts1["flags"], serde_json::json!(["SPEED_CHANGE"]));
        assert_eq!(objects[5]["ordered_set"]["name"], "SDS");
        assert_eq!(objects[6].get("ordered_set"), None);
        let skp = &objects[8]["ordered_set"];
        assert_eq!(
            (skp["name"].as_str(), skp["symbols_on_the_wire"].as_u64()),
            (Some("SKP"), Some(16))
        );
        assert_eq!(
            (&skp["lfsr_agrees"], &skp["data_parity_agrees"]),
            (&true.into(), &true.into())
        );
    }
}

#[test]
fn a_skp_ordered_set_that_disagrees_with_the_receiver_is_shown() {
    let data = bytes(9, 64);
    let blocks = training_then_data(1, &data);
    let mut wire = capture(1, &blocks, 0);
    // The SKP ordered set is block 8; its last symbol, LFSR[7:0], starts 2 + 15 * 8 bits in.
    let bit = 8 * 130 + 2 + 15 * 8;
    wire[bit / 8] ^= 1 << (bit % 8);
    let lines = found_errors(
        &[
            "decode", "--code", "128b130b", "--packed", "--lane", "1", "--blocks",
        ],
        &wire,
    );
    let lines = String::from_utf8(lines).unwrap();
    let skp = lines.lines().nth(8).unwrap();
    assert!(skp.ends_with("which disagrees with the receiver's"), "{skp}");
    let json = found_errors(
        &[
            "decode", "--code", "128b130b", "--packed", "--lane", "1", "--json",
        ],
        &wire,
    );
    let json = String::from_utf8(json).unwrap();
    let skp: serde_json::Value = serde_json::from_str(json.lines().nth(8).unwrap()).unwrap();
    let set = &skp["ordered_set"];
    assert_eq!(
        (&set["lfsr_agrees"], &set["data_parity_agrees"]),
        (&false.into(), &true.into())
    );
    // Its parity bit instead (bit 7 of the symbol after SKP_END).
    let mut wire = capture(1, &blocks, 0);
    let bit = 8 * 130 + 2 + 13 * 8 + 7;
    wire[bit / 8] ^= 1 << (bit % 8);
    let lines = found_errors(
        &[
            "decode", "--code", "128b130b", "--packed", "--lane", "1", "--blocks",
        ],
        &wire,
    );
    let skp = String::from_utf8(lines)
        .unwrap()
        .lines()
        .nth(8)
        .unwrap()
        .to_owned();
    assert!(skp.ends_with("data parity wrong"), "{skp}");
}

#[test]
fn decode_stops_at_an_undefined_sync_header_outside_a_data_stream() {
    let text = ok(&["encode", "--code", "128b130b"], &bytes(4, 48));
    let mut lines: Vec<String> = String::from_utf8(text)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines[2].replace_range(0..2, "11");
    let o = linkctl(&["decode", "--code", "128b130b"], lines.join("\n").as_bytes());
    assert!(!o.status.success());
    assert_eq!(o.stdout, bytes(4, 48)[..32]);
    assert!(stderr(&o).contains("block 2: sync header 11"), "{}", stderr(&o));
    // In a data stream (after an SDS) the receiver counts it and takes the block as data: a receiver
    // error, and exit status 2.
    let text = ok(&["encode", "--code", "128b130b", "--stream-start"], &bytes(4, 48));
    let mut lines: Vec<String> = String::from_utf8(text)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines[3].replace_range(0..2, "00");
    let o = linkctl(
        &["decode", "--code", "128b130b", "--blocks"],
        lines.join("\n").as_bytes(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let line = stdout(&o).lines().nth(3).unwrap().to_owned();
    assert!(
        line.starts_with("3 data") && line.ends_with("(undefined sync header, taken by its content)"),
        "{line}"
    );
}

#[test]
fn bad_input_and_options_are_refused_clearly() {
    for (args, input, says) in [
        (
            &["encode", "--code", "128b130b"][..],
            &b"0123456789abcdefXYZ"[..],
            "3 bytes after the last whole block",
        ),
        (
            &["encode", "--code", "128b130b", "--lane", "32"],
            b"",
            "lanes are numbered 0 to 31",
        ),
        (
            &["encode", "--code", "128b130b", "--rd", "pos"],
            b"",
            "--rd does not apply to --code 128b130b",
        ),
        (
            &["encode", "--code", "128b130b", "--control"],
            b"",
            "--control does not apply",
        ),
        (
            &["encode", "--code", "8b10b", "--stream-start"],
            b"",
            "--stream-start does not apply",
        ),
        (
            &["decode", "--code", "8b10b", "--blocks"],
            b"",
            "--blocks does not apply",
        ),
        (
            &["decode", "--code", "8b10b", "--json"],
            b"",
            "--json applies to --code 8b10b only with --packed",
        ),
        (
            &["decode", "--code", "128b130b", "--json", "--blocks"],
            b"",
            "cannot be used with",
        ),
        (
            &["decode", "--code", "8b10b", "--lane", "1"],
            b"",
            "--lane does not apply",
        ),
        (
            &["decode", "--code", "128b130b", "--symbols"],
            b"",
            "--symbols does not apply",
        ),
        (
            &["decode", "--code", "128b130b"],
            b"10 00\n",
            "line 1: \"00\" is not 16 symbols",
        ),
        (
            &["decode", "--code", "128b130b"],
            b"# c\n\nab 00\n",
            "line 3: \"ab\" is not a sync header",
        ),
        (
            &["decode", "--code", "128b130b", "--packed"],
            &[0x55; 100],
            "no EIEOS in the 800 bits read",
        ),
    ] {
        let o = linkctl(args, input);
        assert!(!o.status.success(), "{args:?} was accepted");
        let err = stderr(&o);
        assert!(err.contains(says) && !err.contains("panicked"), "{args:?}: {err}");
    }
    // A line without end is refused without holding it all.
    let o = linkctl(&["decode", "--code", "128b130b"], &vec![b'1'; 1 << 20]);
    assert!(
        stderr(&o).contains("line 1: longer than 1024 characters"),
        "{}",
        stderr(&o)
    );
    // The first lines are decoded before a bad one.
    let mut text = ok(&["encode", "--code", "128b130b"], &[7; 32]);
    text.extend_from_slice(b"10 xyz\n");
    let o = linkctl(&["decode", "--code", "128b130b"], &text);
    assert!(!o.status.success());
    assert_eq!(o.stdout, [7; 32]);
    assert!(stderr(&o).contains("line 3"), "{}", stderr(&o));
}

#[test]
fn short_packed_input_decodes_to_nothing() {
    // Fewer bits than a block: nothing to find, nothing to say.
    for input in [&[][..], &[0xFF; 16]] {
        assert_eq!(ok(&["decode", "--code", "128b130b", "--packed"], input), b"");
    }
    assert_eq!(ok(&["encode", "--code", "128b130b", "--packed"], b""), b"");
}
