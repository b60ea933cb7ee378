//! `linkctl tl copy` end to end.

mod common;

use std::process::Output;

fn tl_copy(args: &[&str]) -> Output {
    common::linkctl(&["tl", "copy"], args)
}

fn json(args: &[&str]) -> serde_json::Value {
    common::json(&["tl", "copy"], args)
}

#[test]
fn a_copy_with_bit_errors_arrives_verified_at_the_format_rate() {
    for args in [
        &["--size", "256K", "--ber", "1e-5"][..],
        &["--size", "100000", "--offset", "5", "--pull"],
    ] {
        let v = json(args);
        assert_eq!(v["verified"], true, "{v}");
        assert_eq!(v["bytes_moved"], v["bytes"]);
        // x8 at 8 GT/s carries 7.88 GB/s after 128b/130b; one header flit per 128 bytes leaves 8/9 of it.
        let gbps = v["bandwidth_gbps"].as_f64().unwrap();
        assert!((5.0..7.01).contains(&gbps), "{gbps}");
    }
    let noisy = tl_copy(&["--size", "256K", "--ber", "1e-5", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&noisy.stdout).unwrap();
    assert!(
        v["replays"].as_u64().unwrap() > 0,
        "bit errors made the data links replay: {v}"
    );
}

#[test]
fn the_text_report_counts_bytes_in_words() {
    for (size, copied) in [
        ("1", "copied 1 byte (posted writes)"),
        ("2", "copied 2 bytes (posted writes)"),
    ] {
        let out = String::from_utf8(tl_copy(&["--size", size]).stdout).unwrap();
        assert!(out.starts_with(copied), "{out}");
    }
}

/// This seed flips one bit on the wire, which one CRC error and one replay follow: each is counted in
/// the singular ("1 bits flipped ... 1 CRC errors, 1 replays" before).
#[test]
fn the_text_report_counts_wire_errors_in_words() {
    let out = String::from_utf8(tl_copy(&["--size", "64K", "--ber", "1e-6", "--seed", "5"]).stdout).unwrap();
    let wire = out.lines().nth(1).unwrap_or_default();
    assert_eq!(
        wire, "514 packets; on the wire 1 bit flipped, 0 units dropped, 0 duplicated; 1 CRC error, 1 replay",
        "{out}"
    );
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for args in [
        &["--size", "0"][..],
        &["--size", "8G"],
        &["--size", "12Q"],
        &["--ber", "1"],
        &["--offset", "4294967296"],
        &["--drop", "0.5"],
        &["--duplicate", "-0.1"],
        &["--drop", "lots"],
        &["--pcap-limit", "5"],
    ] {
        common::assert_refused(&["tl", "copy"], args);
    }
    let copy = ["tl", "copy"];
    common::assert_refused_saying(&copy, &["--pcap", "/dev/stdout"], "--pcap names standard output");
    common::assert_refused_saying(
        &copy,
        &["--pcap", "/no/such/dir/t.pcap"],
        "cannot create --pcap file",
    );
}

#[test]
fn a_copy_survives_lost_and_repeated_units() {
    let out = tl_copy(&[
        "--size",
        "64K",
        "--offset",
        "7",
        "--drop",
        "1e-3",
        "--duplicate",
        "1e-3",
        "--seed",
        "3",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], true, "{v}");
    assert!(v["units_dropped"].as_u64().unwrap() > 0, "{v}");
    assert!(v["units_duplicated"].as_u64().unwrap() > 0, "{v}");
    assert!(v["replays"].as_u64().unwrap() > 0, "{v}");
}

/// The one-line error `args` end in.
fn error(args: &[&str]) -> String {
    let out = tl_copy(args);
    assert!(!out.status.success(), "{args:?} was accepted");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    stderr
}

/// A copy that fails is reported as a run that did not succeed (exit status 3, as `link run` and
/// `coherence` give), says why in words, and with `--json` still prints its object, `verified` false.
#[test]
fn a_failed_copy_says_why_in_words() {
    // Half the units hit: the completion of the fence read never comes.
    let args = ["--size", "1K", "--ber", "0.005"];
    let out = tl_copy(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.starts_with("copy FAILED (posted writes, endpoint 0 to endpoint 1): completion timeout for the request at offset"),
        "{text}"
    );
    let out = tl_copy(&[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["verified"].as_bool(), v["bytes_moved"].as_u64()),
        (Some(false), Some(0))
    );
    assert!(
        v["failure"].as_str().unwrap().starts_with("completion timeout"),
        "{v}"
    );
    assert!(json(&["--size", "1K"])["failure"].is_null());
}

#[test]
fn the_offset_takes_the_suffixes_of_the_size() {
    let v = json(&["--size", "1K", "--offset", "3K"]);
    assert_eq!(
        (v["offset"].as_u64(), v["verified"].as_bool()),
        (Some(3072), Some(true)),
        "{v}"
    );
    // Near the top, a small copy holds only its own range (it had held a gigabyte twice over), read back
    // too.
    let near_the_top = ["--size", "1K", "--offset", "1023M"];
    for pull in [&[][..], &["--pull"]] {
        let v = json(&[&near_the_top[..], pull].concat());
        assert_eq!(v["verified"], true, "{v}");
    }
    for (args, expected) in [
        (
            &["--offset", "1G"][..],
            "--offset must be below 1G, not 1073741824",
        ),
        (&["--offset", "18446744073709551615"], "--offset must be below 1G"),
        (&["--offset", "1Q"], "--offset: bad size \"1Q\""),
        (&["--offset", "99999999999999G"], "more than 2^64 bytes"),
    ] {
        let e = error(args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
}

#[test]
fn sizes_and_rates_out_of_range_are_refused_with_the_range() {
    for (args, expected) in [
        (&["--size", "0"][..], "--size must be from 1 byte to 4G"),
        (&["--size", "8G"], "--size must be from 1 byte to 4G"),
        // The wire flips at most one bit per 128-bit unit: higher rates are not modelled.
        (&["--ber", "0.01"], "below 1/128"),
        (
            &["--drop", "0.5"],
            "--drop must be at least 0 and below 0.5, not 0.5",
        ),
    ] {
        let e = error(args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
}

/// `--pcap` traces the copy's link (section 7, the transaction layer's layout) and tshark with the
/// dissector reads every packet's transaction as `dl decode` reads it: posted writes, reads with their
/// extension flits, completions, and the read that flushes posted writes.
#[test]
fn the_trace_of_a_copy_reads_in_wireshark_as_dl_decode_reads_it() {
    for (name, args) in [
        ("push", &["--size", "5000", "--offset", "7"][..]),
        ("pull", &["--size", "5000", "--offset", "7", "--pull"]),
    ] {
        let pcap = std::env::temp_dir().join(format!("linkctl-tl-{name}-{}.pcap", std::process::id()));
        let v = json(&[args, &["--pcap", pcap.to_str().unwrap()]].concat());
        assert_eq!(v["verified"], true, "{v}");
        let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
        assert_eq!(v["trace"]["records"], records.len(), "{v}");
        assert!(records.windows(2).all(|w| w[0].ns <= w[1].ns), "time order");
        let packets: Vec<&fabric_sim::trace::Record> = (records.iter())
            .filter(|r| r.pseudo_header[1] == fabric_sim::trace::RECORD_PACKET)
            .collect();
        assert_eq!(v["packets"], packets.len(), "every packet is recorded once: {v}");
        assert!(records
            .iter()
            .all(|r| r.pseudo_header[10] == fabric_sim::trace::TlLayout::Transaction as u8));
        // dl decode's reading of each packet record.
        let hex: String = (packets.iter())
            .flat_map(|r| r.bytes.iter().map(|b| format!("{b:02x}")))
            .collect();
        let out = common::linkctl_with_input(&["dl", "decode"], &["--json"], hex.as_bytes());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let decoded: Vec<serde_json::Value> = (String::from_utf8(out.stdout).unwrap().lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(decoded.len(), packets.len());
        let opcodes: std::collections::BTreeSet<String> = (decoded.iter())
            .map(|d| d["transaction"]["opcode"].as_str().unwrap().to_owned())
            .collect();
        let expected: &[&str] = if name == "pull" {
            &["Completion", "Read"]
        } else {
            &["Completion", "PostedWrite", "PostedWritePartial", "Read"]
        };
        assert_eq!(opcodes, expected.iter().map(|s| s.to_string()).collect());
        if !common::tshark_available() {
            std::fs::remove_file(&pcap).unwrap();
            continue;
        }
        let fields = [
            "openlink.record",
            "openlink.txn.opcode",
            "openlink.txn.dest",
            "openlink.txn.address",
            "openlink.txn.ext.requester",
            "openlink.txn.ext.tag",
            "openlink.txn.ext.first_byte",
            "openlink.txn.ext.length",
            "openlink.txn.completer",
            "openlink.txn.tag",
            "openlink.txn.status",
            "openlink.txn.offset",
            "openlink.txn.length",
        ];
        let rows = common::tshark_fields(&pcap, &fields);
        assert_eq!(rows.len(), records.len());
        let read: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == "1").collect();
        for (row, d) in read.iter().zip(&decoded) {
            let t = &d["transaction"];
            let num = |i: usize| -> u64 {
                let f = row[i].as_str();
                f.strip_prefix("0x")
                    .map_or_else(|| f.parse().unwrap(), |h| u64::from_str_radix(h, 16).unwrap())
            };
            let names = [
                (0x01, "PostedWrite"),
                (0x02, "PostedWritePartial"),
                (0x08, "Read"),
                (0x10, "Completion"),
            ];
            let opcode = names.iter().find(|n| n.1 == t["opcode"]).unwrap().0;
            assert_eq!(num(1), opcode, "{row:?} {d}");
            assert_eq!(num(2), t["dest"], "{row:?} {d}");
            if opcode == 0x10 {
                assert_eq!(num(8), t["completer"], "{row:?} {d}");
                assert_eq!(num(9), t["tag"], "{row:?} {d}");
                assert_eq!(t["status"], "Success");
                assert_eq!(num(10), 0, "{row:?} {d}");
                assert_eq!(num(11), t["offset"], "{row:?} {d}");
                assert_eq!(num(12), t["length"], "{row:?} {d}");
                continue;
            }
            let address = u64::from_str_radix(t["address"].as_str().unwrap(), 16).unwrap();
            if opcode == 0x08 {
                assert_eq!(num(3) | num(6), address, "{row:?} {d}");
                assert_eq!(num(4), t["requester"], "{row:?} {d}");
                assert_eq!(num(5), t["tag"], "{row:?} {d}");
                assert_eq!(num(7), t["length"], "{row:?} {d}");
            } else {
                assert_eq!(num(3), address, "{row:?} {d}");
                assert_eq!(row[4], "", "no extension flit on the posted channel: {row:?}");
            }
        }
        // The dissector's CRC check agrees with the data link's: every packet was sent whole.
        let crc = common::tshark_fields(&pcap, &["openlink.crc.status"]);
        assert!(crc.iter().all(|r| r[0] == "1"), "{crc:?}");
        // The README's display filters select what they say: the reads endpoint 1 sent, and no record
        // with a bad CRC.
        let reads = (decoded.iter().zip(&packets))
            .filter(|(d, r)| d["transaction"]["opcode"] == "Read" && r.from_node() == 1)
            .count();
        let filtered = |filter: &str| common::tshark(&pcap, &["-Y", filter]).lines().count();
        assert_eq!(
            filtered("openlink.from_node == 1 && openlink.txn.opcode == 0x08"),
            reads
        );
        assert_eq!(filtered("openlink.crc.status == 0"), 0);
        assert!((name == "pull") == (reads > 0));
        std::fs::remove_file(&pcap).unwrap();
    }
}

/// `--pcap-received` traces the units as the endpoints' data links take them: on a clean wire the same
/// records as sent; with bit errors, records with a bad CRC. It needs `--pcap`.
#[test]
fn a_copys_trace_as_received_shows_the_wires_errors() {
    use link_dl::flit::check_packet_crc;
    let trace = |ber: &str, received: bool| {
        let pcap = std::env::temp_dir().join(format!(
            "linkctl-tl-rx-{ber}-{received}-{}.pcap",
            std::process::id()
        ));
        let rx: &[&str] = if received { &["--pcap-received"] } else { &[] };
        let v = json(
            &[
                &["--size", "64K", "--ber", ber, "--pcap", pcap.to_str().unwrap()][..],
                rx,
            ]
            .concat(),
        );
        assert_eq!(v["verified"], true, "{v}");
        let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
        std::fs::remove_file(&pcap).unwrap();
        (v, records)
    };
    assert_eq!(trace("0", true).1, trace("0", false).1);
    let (v, noisy) = trace("1e-5", true);
    assert!(v["crc_errors"].as_u64().unwrap() > 0, "{v}");
    assert!(noisy.iter().any(|r| check_packet_crc(&r.bytes).is_err()));
    common::assert_refused(&["tl", "copy"], &["--pcap-received"]);
}

/// The trace of a copy starts with the links' initialisation, at time 0: each endpoint's InitFc1 first,
/// and its InitFc2 before any packet, as sent and as received alike (the links come up on a clean wire).
#[test]
fn a_copys_trace_starts_with_the_links_initialisation() {
    use fabric_sim::trace::{read, RECORD_PACKET};
    use link_dl::flit::{ControlFlit, ControlKind};
    for received in [false, true] {
        let pcap = std::env::temp_dir().join(format!(
            "linkctl-copy-init-{received}-{}.pcap",
            std::process::id()
        ));
        let mut args = vec!["--size", "4K", "--pcap", pcap.to_str().unwrap()];
        if received {
            args.push("--pcap-received");
        }
        assert_eq!(json(&args)["verified"], true);
        let records = read(&std::fs::read(&pcap).unwrap()).unwrap();
        std::fs::remove_file(&pcap).unwrap();
        let control = |bytes: &[u8]| ControlFlit::parse(bytes.try_into().ok()?).ok().map(|c| c.kind);
        for node in [0u16, 1] {
            let of_node: Vec<_> = records.iter().filter(|r| r.from_node() == node).collect();
            assert_eq!(
                (of_node[0].ns, control(&of_node[0].bytes)),
                (0, Some(ControlKind::InitFc1))
            );
            let init_fc2 = of_node
                .iter()
                .position(|r| control(&r.bytes) == Some(ControlKind::InitFc2));
            let first_packet = of_node.iter().position(|r| r.pseudo_header[1] == RECORD_PACKET);
            assert!(init_fc2.is_some() && init_fc2 < first_packet, "node {node}");
        }
    }
}
