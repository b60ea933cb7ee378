//! `linkctl coherence` end to end: the stress and the exhaustive exploration.

mod common;

fn json(args: &[&str]) -> serde_json::Value {
    common::json(&["coherence"], args)
}

#[test]
fn the_stress_completes_every_operation_without_violations() {
    let v = json(&[
        "--agents", "4", "--lines", "8", "--ops", "20000", "--seed", "3", "--ber", "1e-5",
    ]);
    assert_eq!(v["ops"], 20000);
    assert_eq!(v["violations"], 0);
    assert_eq!(v["complete"], true);
    for field in [
        "reads",
        "writes",
        "snoops",
        "invalidations",
        "writebacks",
        "replays",
    ] {
        assert!(v[field].as_u64().unwrap() > 0, "{field}: {v}");
    }
}

#[test]
fn the_exploration_of_two_agents_is_complete_and_clean() {
    let v = json(&["--explore", "--agents", "2", "--lines", "1"]);
    assert_eq!(v["complete"], true);
    assert_eq!(v["violations"], 0);
    assert!(v["states"].as_u64().unwrap() > 2_000);
    let bounded = json(&[
        "--explore",
        "--agents",
        "3",
        "--lines",
        "2",
        "--max-states",
        "20000",
    ]);
    assert_eq!(bounded["complete"], false, "a bounded search says it was bounded");
    assert_eq!(bounded["states"], 20000);
}

#[test]
fn the_reordering_bound_is_reported() {
    let v = json(&["--explore", "--agents", "2", "--lines", "1", "--reorder", "1"]);
    assert_eq!(v["reorder"], 1);
    assert_eq!(v["complete"], true);
    assert_eq!(v["violations"], 0);
    let named = json(&[
        "--explore",
        "--agents",
        "2",
        "--lines",
        "1",
        "--no-value-symmetry",
        "--no-agent-symmetry",
        "--no-line-symmetry",
        "--no-phase-symmetry",
    ]);
    assert_eq!(named["value_symmetry"], false);
    assert_eq!(named["agent_symmetry"], false);
    assert_eq!(named["line_symmetry"], false);
    assert_eq!(named["phase_symmetry"], false);
    assert_eq!(named["complete"], true);
    let renamed = json(&["--explore", "--agents", "2", "--lines", "1"]);
    assert!(
        named["states"].as_u64() > renamed["states"].as_u64(),
        "{named} {renamed}"
    );
    let any = json(&["--explore", "--agents", "1", "--lines", "1", "--reorder", "any"]);
    assert_eq!(any["reorder"], serde_json::Value::Null);
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for args in [
        &["--agents", "0"][..],
        &["--agents", "9"],
        &["--lines", "257"],
        &["--ops", "0"],
        &["--ber", "1"],
        &["--explore", "--agents", "4"],
        &["--explore", "--lines", "3", "--agents", "2"],
        &["--explore", "--values", "8", "--agents", "2", "--lines", "1"],
        &["--explore", "--reorder", "33"],
        &["--explore", "--reorder", "some"],
        &["--pcap-limit", "4"],
    ] {
        common::assert_refused(&["coherence"], args);
    }
    assert!(refusal(&["--explore", "--pcap", "x.pcap"]).contains("--pcap is an option of the stress"));
}

/// The one-line error `args` are refused with.
fn refusal(args: &[&str]) -> String {
    let out = common::linkctl(&["coherence"], args);
    assert!(!out.status.success(), "{args:?} was accepted");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    stderr
}

#[test]
fn a_bit_error_rate_the_wire_does_not_model_is_refused() {
    // From 1/128 on, every 128-bit unit has its one bit flipped: higher rates would all run the same.
    for ber in ["0.0078125", "0.01", "0.5", "0.999"] {
        let e = refusal(&["--ber", ber]);
        assert!(
            e.contains("--ber must be at least 0 and below 1/128") && e.contains(&format!("not {ber}")),
            "{e}"
        );
    }
}

#[test]
fn links_that_deliver_nothing_are_not_called_a_deadlock() {
    let out = common::linkctl(&["coherence"], &["--ber", "0.0078", "--ops", "100", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["complete"].as_bool(), v["violations"].as_u64()),
        (Some(false), Some(0)),
        "{v}"
    );
    let why = v["links_stalled"].as_str().unwrap();
    assert!(
        why.contains("unacknowledged") && !why.contains("deadlock"),
        "{why}"
    );
    let text = common::linkctl(&["coherence"], &["--ber", "0.0078", "--ops", "100"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("did not complete: no operation completed"),
        "{text}"
    );
}

#[test]
fn an_option_of_the_other_mode_is_refused() {
    for option in [
        &["--values", "5"][..],
        &["--outstanding", "2"],
        &["--reorder", "0"],
        &["--max-states", "1"],
        &["--no-value-symmetry"],
        &["--no-agent-symmetry"],
        &["--no-line-symmetry"],
        &["--no-phase-symmetry"],
    ] {
        let e = refusal(option);
        let expected = format!("{} is an option of the exploration: give --explore", option[0]);
        assert!(e.contains(&expected), "{option:?}: {e}");
    }
    for option in [&["--ops", "5"][..], &["--seed", "9"], &["--ber", "0.9"]] {
        let e = refusal(&[&["--explore"], option].concat());
        let expected = format!("{} is an option of the stress", option[0]);
        assert!(e.contains(&expected), "{option:?}: {e}");
    }
}

#[test]
fn one_agent_and_one_line_are_said_in_the_singular() {
    let out = common::linkctl(&["coherence"], &["--agents", "1", "--lines", "1", "--ops", "100"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("1 agent, 1 line, "), "{text}");
}

#[test]
fn the_exploration_has_defaults_of_its_own() {
    let v = json(&["--explore"]);
    assert_eq!(
        (v["agents"].as_u64(), v["lines"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    assert_eq!(
        (v["complete"].as_bool(), v["violations"].as_u64()),
        (Some(true), Some(0))
    );
    // Either one given, the other keeps the exploration's default.
    let v = json(&["--explore", "--agents", "1"]);
    assert_eq!(
        (v["agents"].as_u64(), v["lines"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
    let v = json(&["--explore", "--lines", "2", "--agents", "1"]);
    assert_eq!(v["lines"], 2);
    // The stress keeps its own.
    let v = json(&["--ops", "1000"]);
    assert_eq!(
        (v["agents"].as_u64(), v["lines"].as_u64()),
        (Some(4), Some(64)),
        "{v}"
    );
}

/// Words counted by a number in `text` that say "1 requests" or "1 states": a count of one takes the
/// singular.
fn plurals_after_one(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| {
            w[0].trim_start_matches('(') == "1" && w[1].trim_end_matches([',', ';', ')']).ends_with('s')
        })
        .map(|w| w.join(" "))
        .collect()
}

#[test]
fn a_count_of_one_is_singular_in_every_summary() {
    for args in [
        // One request, no snoop.
        &["--agents", "1", "--lines", "1", "--ops", "1", "--ber", "0"][..],
        // This seed flips one bit, which one CRC error and one replay follow.
        &[
            "--agents", "1", "--lines", "1", "--ops", "2000", "--seed", "1", "--ber", "1e-6",
        ],
        // One state examined.
        &["--explore", "--max-states", "1"],
    ] {
        let out = common::linkctl(&["coherence"], args);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("1 "), "{args:?}: {text}");
        assert_eq!(plurals_after_one(&text), Vec::<String>::new(), "{args:?}: {text}");
    }
}

/// `--pcap` traces every agent's link to the home (section 7.2): a request record per request the home
/// received and a snoop record per snoop it sent, agent `i` as node `i + 1` on trunk `i - 1`, the home as
/// node 0; tshark with the dissector reads each coherence message's fields as the header's bits say.
#[test]
fn the_stress_is_traced_for_wireshark() {
    use link_dl::flit::{check_packet_crc, PacketHeader};
    let pcap = std::env::temp_dir().join(format!("linkctl-coherence-{}.pcap", std::process::id()));
    let v = json(&["--agents", "3", "--lines", "4", "--ops", "300", "--ber", "0"]);
    let traced = json(&[
        "--agents",
        "3",
        "--lines",
        "4",
        "--ops",
        "300",
        "--ber",
        "0",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert_eq!(traced["violations"], 0, "{traced}");
    assert_eq!(traced["requests"], v["requests"], "the trace changes nothing");
    let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
    assert_eq!(traced["trace"]["records"], records.len());
    assert!(records.windows(2).all(|w| w[0].ns <= w[1].ns), "time order");
    let headers: Vec<(u16, u64)> = (records.iter())
        .filter(|r| r.pseudo_header[1] == fabric_sim::trace::RECORD_PACKET)
        .map(|r| {
            check_packet_crc(&r.bytes).unwrap();
            let h = PacketHeader::parse(r.bytes[..16].try_into().unwrap()).unwrap();
            let (trunk, from) = (r.hop().trunk, r.from_node());
            // The agent's end is node trunk + 1; the home is node 0 at port `trunk`.
            assert!(from == trunk + 1 || (from == 0 && u16::from(r.pseudo_header[8]) == trunk));
            (from, h.tl)
        })
        .collect();
    let count = |opcode: u64| headers.iter().filter(|(_, tl)| tl >> 53 == opcode).count();
    assert_eq!(count(0x18), v["requests"].as_u64().unwrap() as usize);
    assert_eq!(count(0x19), v["snoops"].as_u64().unwrap() as usize);
    assert!(headers
        .iter()
        .all(|&(from, tl)| (0x18..=0x1E).contains(&(tl >> 53))
            && (from == 0) == matches!(tl >> 53, 0x19 | 0x1C | 0x1D)));
    if common::tshark_available() {
        let rows = common::tshark_fields(
            &pcap,
            &[
                "openlink.record",
                "openlink.txn.opcode",
                "openlink.txn.dest",
                "openlink.txn.coh.code",
                "openlink.txn.coh.line",
            ],
        );
        let read: Vec<(u64, u64, u64, u64)> = (rows.iter())
            .filter(|r| r[0] == "1")
            .map(|r| {
                let hex = |f: &str| u64::from_str_radix(f.trim_start_matches("0x"), 16).unwrap();
                (
                    hex(&r[1]),
                    r[2].parse().unwrap(),
                    r[3].parse().unwrap(),
                    hex(&r[4]),
                )
            })
            .collect();
        let expected: Vec<(u64, u64, u64, u64)> = (headers.iter())
            .map(|&(_, tl)| (tl >> 53, (tl >> 43) & 0x3FF, (tl >> 40) & 7, tl & 0x1FFF_FFFF))
            .collect();
        assert_eq!(read, expected);
    }
    std::fs::remove_file(&pcap).unwrap();
}

/// `--pcap-received`: on clean wires the trace as received is the trace as sent; it is an option of the
/// stress and of a trace.
#[test]
fn the_stress_traced_as_received_is_as_sent_on_clean_wires() {
    let trace = |received: bool| {
        let pcap = std::env::temp_dir().join(format!(
            "linkctl-coherence-rx-{received}-{}.pcap",
            std::process::id()
        ));
        let rx: &[&str] = if received { &["--pcap-received"] } else { &[] };
        let args = [
            "--agents",
            "2",
            "--lines",
            "4",
            "--ops",
            "200",
            "--ber",
            "0",
            "--pcap",
            pcap.to_str().unwrap(),
        ];
        let v = json(&[&args[..], rx].concat());
        assert_eq!(v["violations"], 0, "{v}");
        let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
        std::fs::remove_file(&pcap).unwrap();
        records
    };
    assert_eq!(trace(true), trace(false));
    assert!(refusal(&["--pcap-received"]).contains("--pcap"));
    assert!(refusal(&["--explore", "--pcap", "x.pcap", "--pcap-received"]).contains("option of the stress"));
}

/// The stress's trace starts with every link's initialisation, at time 0 on each trunk, the links coming
/// up side by side so that the records stay in time order.
#[test]
fn the_stress_trace_starts_with_each_links_initialisation() {
    use link_dl::flit::{ControlFlit, ControlKind};
    let pcap = std::env::temp_dir().join(format!("linkctl-coherence-init-{}.pcap", std::process::id()));
    let args = [
        "--agents",
        "3",
        "--lines",
        "8",
        "--ops",
        "300",
        "--pcap",
        pcap.to_str().unwrap(),
    ];
    json(&args);
    let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
    std::fs::remove_file(&pcap).unwrap();
    assert!(records.windows(2).all(|w| w[0].ns <= w[1].ns), "time order");
    for trunk in 0..3u16 {
        let first = records.iter().find(|r| r.hop().trunk == trunk).unwrap();
        let kind = ControlFlit::parse(first.bytes[..].try_into().unwrap()).map(|c| c.kind);
        assert_eq!((first.ns, kind), (0, Ok(ControlKind::InitFc1)), "trunk {trunk}");
    }
}
