//! `linkctl link run` end to end: traffic over a trained link, checked by the receiver.

mod common;

fn json(args: &[&str]) -> serde_json::Value {
    common::json(&["link", "run"], args)
}

fn assert_intact(v: &serde_json::Value, packets: u64, payload: u64) {
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["packets_sent"], packets);
    assert_eq!(v["packets_delivered"], packets);
    assert_eq!(v["bytes_verified"], packets * payload);
    assert_eq!(v["duplicates"], 0);
    assert_eq!(v["corrupted"], 0);
    assert_eq!(v["out_of_order"], 0);
}

#[test]
fn a_clean_link_runs_near_the_format_ceiling() {
    let v = json(&[
        "--lanes",
        "8",
        "--code",
        "128b130b",
        "--packets",
        "5000",
        "--seed",
        "1",
    ]);
    assert_intact(&v, 5000, 128);
    assert_eq!(
        (
            v["up"].as_bool(),
            v["state"].as_str(),
            v["limit_reached"].as_bool()
        ),
        (Some(true), Some("L0"), Some(false)),
        "{v}"
    );
    assert!(v["time_to_active_us"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["lanes"], 8);
    assert_eq!(v["code"], "128b130b");
    assert_eq!(v["replays"], 0);
    // The default buffers keep the wire full on a short link: the sender waits for credit only for
    // about 0.2% of the time (the first credits coming back), and never for acknowledgements.
    assert_eq!(
        (v["rx_buffer_flits"].as_u64(), v["replay_buffer"].as_u64()),
        (Some(64), Some(64))
    );
    let share = |k: &str| v[k].as_f64().unwrap() / v["elapsed_us"].as_f64().unwrap();
    assert!(share("idle_for_credit_us") < 0.005, "{v}");
    assert_eq!(v["idle_for_replay_us"].as_f64(), Some(0.0), "{v}");
    // 128 payload bytes in 144 on the wire: at most 88.9% of the line rate after encoding.
    let efficiency = v["efficiency"].as_f64().unwrap();
    assert!((0.86..=0.889).contains(&efficiency), "{efficiency}");
    assert!(v["goodput_gbps"].as_f64().unwrap() > 6.0);
    // Every flit sent is a packet's, a control flit or an initialisation flit.
    for c in v["counters"].as_array().unwrap() {
        let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k} in {c}"));
        assert!(n("init_sent") > 0, "{c}");
        let packet_flits = if n("packets_transmitted") > 0 {
            9 * n("packets_transmitted")
        } else {
            0
        };
        assert_eq!(
            n("flits_transmitted"),
            packet_flits + n("control_sent") + n("init_sent"),
            "{c}"
        );
    }
}

#[test]
fn errors_and_flit_faults_are_recovered_without_loss() {
    let v = json(&[
        "--lanes",
        "4",
        "--ber",
        "1e-5",
        "--packets",
        "3000",
        "--payload",
        "77",
        "--drop",
        "1e-3",
        "--duplicate",
        "1e-3",
        "--corrupt",
        "1e-3",
        "--vcs",
        "posted,request,response,snoop",
        "--both-ways",
        "--retrain-at",
        "20",
    ]);
    // Both directions send 3000 packets each.
    assert_intact(&v, 6000, 77);
    assert!(v["replays"].as_u64().unwrap() > 0, "{v}");
    assert!(v["naks"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn fec_corrects_what_would_otherwise_be_replayed() {
    let v = json(&["--ber", "1e-5", "--packets", "5000", "--fec"]);
    assert_intact(&v, 5000, 128);
    assert!(v["fec_corrections"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn eight_b_ten_b_caps_the_rate() {
    let v = json(&["--code", "8b10b", "--packets", "1000", "--lanes", "2"]);
    assert_intact(&v, 1000, 128);
    assert_eq!(v["code"], "8b10b");
    assert!(v["rate_gts"].as_f64().unwrap() <= 5.0);
    // Without --code, a rate below 8 GT/s runs in the code it has: 8b/10b.
    for rate in ["2.5", "5"] {
        let v = json(&["--max-rate", rate, "--packets", "100", "--lanes", "1"]);
        assert_intact(&v, 100, 128);
        assert_eq!(
            (v["code"].as_str(), v["rate_gts"].as_f64()),
            (Some("8b10b"), rate.parse().ok())
        );
    }
}

#[test]
fn a_link_that_never_comes_up_says_where_training_ended() {
    // One lane, and it is dead: training ends in Failed at 48 ms, and nothing is sent.
    let args = [
        "--lanes",
        "1",
        "--dead-lane",
        "0",
        "--packets",
        "10",
        "--code",
        "128b130b",
    ];
    let out = common::linkctl(&["link", "run"], &[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            v["up"].as_bool(),
            v["state"].as_str(),
            v["limit_reached"].as_bool()
        ),
        (Some(false), Some("Failed"), Some(false)),
        "{v}"
    );
    // No width, rate or code: not those training stopped at (2.5 GT/s, 8b/10b), as if the link had run.
    for field in [
        "time_to_active_us",
        "lanes",
        "rate_gts",
        "code",
        "retrains_not_done",
    ] {
        assert!(v[field].is_null(), "{field}: {v}");
    }
    assert_eq!(v["code_requested"], "128b130b");
    assert_eq!(
        (v["packets_sent"].as_u64(), v["complete"].as_bool()),
        (Some(0), Some(false))
    );
    let out = common::linkctl(&["link", "run"], &args);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().next(),
        Some("link DOWN: training ended in Failed at 48000.0 us; no packets sent"),
        "{text}"
    );
    for claim in ["up after", "time limit", "delivered", "goodput"] {
        assert!(!text.contains(claim), "{claim:?} in {text}");
    }
}

/// A `--retrain-at` time after the last delivery is said not to have been done, not silently ignored.
#[test]
fn a_retrain_after_the_run_is_reported_not_done() {
    let args = ["--packets", "100", "--retrain-at", "1", "--retrain-at", "1000000"];
    let v = json(&args);
    assert_intact(&v, 100, 128);
    let early_only = json(&args[..4]);
    assert_eq!(
        (
            v["retrains_not_done"].as_u64(),
            early_only["retrains_not_done"].as_u64()
        ),
        (Some(1), Some(0)),
        "{v}"
    );
    assert_eq!(v["retrains"], early_only["retrains"]);
    let out = common::linkctl(&["link", "run"], &args);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("note: 1 of the --retrain-at times came after the run had ended"),
        "{text}"
    );
}

/// The channel-fault tests' link: x4 with the fast training timers, carrying 1,000 packets.
const FAST_X4: [&str; 6] = ["--lanes", "4", "--timing", "fast", "--packets", "1000"];

/// `--burst` and `--lane-dies`: a 64-bit burst on lane 1 at 2 us spoils a packet, which the data link
/// replays, and lane 3 breaking at 4 us sends the x4 link back through training to x2. Nothing is lost.
#[test]
fn a_burst_and_a_lane_dying_mid_run_lose_nothing() {
    let args = [&FAST_X4[..], &["--burst", "1:64@2", "--lane-dies", "3@4"]].concat();
    let v = json(&args);
    assert_intact(&v, 1000, 128);
    assert_eq!(
        (
            v["bursts"].as_u64(),
            v["lanes_died"].as_u64(),
            v["lanes"].as_u64()
        ),
        (Some(1), Some(1), Some(2)),
        "{v}"
    );
    assert_eq!(
        (v["bursts_not_done"].as_u64(), v["lane_deaths_not_done"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(v["bits_flipped"].as_u64() >= Some(1), "{v}");
    assert!(
        v["replays"].as_u64() >= Some(1),
        "the burst must spoil a packet: {v}"
    );
    let clean = json(&FAST_X4);
    assert_eq!(
        (clean["bits_flipped"].as_u64(), clean["lanes"].as_u64()),
        (Some(0), Some(4))
    );
    assert!(v["retrains"].as_u64() > clean["retrains"].as_u64(), "{v}");
    let text = String::from_utf8(common::linkctl(&["link", "run"], &args).stdout).unwrap();
    for line in [
        "(1 burst)",
        "lanes died: 1 (--lane-dies), the link retraining on the lanes left: x2 at the end",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
}

/// `--burst b:...` strikes the channel from B to A: with traffic both ways (and the wiring reversed, the
/// lane named at A), A finds the spoilt packet, NAKs it, and B replays it.
#[test]
fn a_burst_on_the_channel_from_b_spoils_what_b_sends() {
    let v = json(
        &[
            &FAST_X4[..],
            &["--both-ways", "--reversed", "--burst", "b:1:64@2"],
        ]
        .concat(),
    );
    assert_intact(&v, 2000, 128);
    assert_eq!(v["bursts"], 1, "{v}");
    let [a, b] = [&v["counters"][0], &v["counters"][1]];
    assert!(
        a["naks_sent"].as_u64() >= Some(1) && b["replays"].as_u64() >= Some(1),
        "{v}"
    );
    assert_eq!(
        (b["naks_sent"].as_u64(), a["replays"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
}

/// A `--burst` or `--lane-dies` time after the last delivery is said not to have been done.
#[test]
fn channel_faults_after_the_run_are_reported_not_done() {
    let args = [
        "--packets",
        "100",
        "--burst",
        "0:8@1000000",
        "--lane-dies",
        "1@1000000",
    ];
    let v = json(&args);
    assert_intact(&v, 100, 128);
    assert_eq!(
        (
            v["bursts"].as_u64(),
            v["bursts_not_done"].as_u64(),
            v["lanes_died"].as_u64(),
            v["lane_deaths_not_done"].as_u64()
        ),
        (Some(0), Some(1), Some(0), Some(1)),
        "{v}"
    );
    let out = common::linkctl(&["link", "run"], &args);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("note: 1 of the --burst and 1 of the --lane-dies times came after the run had ended"),
        "{text}"
    );
}

#[test]
fn malformed_channel_faults_are_refused() {
    let cases: [(&[&str], &str); 13] = [
        (&["--burst", "1:33"], "expected [b:]LANE:BITS@US"),
        (&["--burst", "1@5"], "expected [b:]LANE:BITS@US"),
        (&["--burst", "c:1:33@5"], "\"c\" is not a lane number"),
        (&["--burst", "8:33@5"], "lane 8, but the ports have lanes 0 to 7"),
        (&["--burst", "x:33@5"], "is not a lane number"),
        (
            &["--burst", "1:0@5"],
            "the bits must be a whole number from 1 to 1000000",
        ),
        (&["--burst", "1:33@-2"], "--burst must be a time in microseconds"),
        (&["--burst", "1:33@soon"], "must be a number of microseconds"),
        (&["--lane-dies", "3"], "expected LANE@US"),
        (&["--lane-dies", "9@3"], "lane 9, but the ports have lanes 0 to 7"),
        (
            &["--lane-dies", "2@nan"],
            "--lane-dies must be a time in microseconds",
        ),
        (
            &["--lane-dies", "2@3", "--lane-dies", "2@5"],
            "lane 2 is given twice",
        ),
        (
            &["--lane-dies", "2@3", "--dead-lane", "2"],
            "lane 2 is a --dead-lane already",
        ),
    ];
    for (args, says) in cases {
        common::assert_refused_saying(&["link", "run"], args, says);
    }
}

/// A link that comes up and then goes down for good (here its retraining fails at a high bit error rate)
/// is reported down, with when, and the packets not delivered put down to it: not to the time limit,
/// nor as a link of no lanes (it had said "x0 at 2.5 GT/s" and "inf%" of the line rate).
#[test]
fn a_link_that_goes_down_for_good_says_so() {
    // A seeded case found by trying bit error rates and seeds: the link comes up and a retraining under
    // the errors fails. A change to the physical layer's timing can move it; then find another (it was
    // BER 3e-4, seed 6 until a failed speed change went back to the previous rate instead of Detect, and
    // BER 4e-4, seed 13 until the 8b/10b comma aligner stopped following a lone comma at another phase, and
    // BER 4e-4, seed 16 until Recovery.Idle's first timeout went back to Recovery.RcvrLock, and BER 3e-4,
    // seed 1 until at 8 GT/s its timeouts went back there up to 255 times; here the speed change to 8 GT/s
    // fails too, and the link comes up at 5 GT/s, or 2.5 until Recovery.RcvrCfg started its count of TS2
    // to send over when its partner came back with TS1; and x8 at BER 1e-3, seed 4 until a port that
    // cannot deskew its lanes left some out: that link now comes back narrower, so one lane, which has
    // none to leave out, at a rate that fails it for good; and seed 1 until Recovery.Speed waited for
    // the partner's quiet, after which that link no longer came up at all).
    let args = [
        "--lanes",
        "1",
        "--timing",
        "fast",
        "--ber",
        "3e-3",
        "--packets",
        "2000",
        "--seed",
        "5",
        "--retrain-at",
        "5",
    ];
    let out = common::linkctl(&["link", "run"], &args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.starts_with("link: x1 at 5 GT/s, 8b10b"), "{text}");
    assert!(text.contains("us to the end (Failed)\n"), "{text}");
    assert!(text.contains("(NOT all delivered: the link went down)"), "{text}");
    assert!(!text.contains("inf%"), "{text}");
    let out = common::linkctl(&["link", "run"], &[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["up"].as_bool(), v["state"].as_str()),
        (Some(true), Some("Failed"))
    );
    assert_eq!(
        (v["limit_reached"].as_bool(), v["lanes"].as_u64()),
        (Some(false), Some(1))
    );
    let (up, down) = (
        v["time_to_active_us"].as_f64().unwrap(),
        v["down_at_us"].as_f64().unwrap(),
    );
    assert!(up < down, "{v}");
    assert!(v["efficiency"].as_f64().is_some_and(f64::is_finite), "{v}");
    // A link that stays up has none.
    assert!(json(&["--packets", "100"])["down_at_us"].is_null());
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for args in [
        &["--lanes", "3"][..],
        &["--code", "64b66b"],
        &["--code", "128b130b", "--max-rate", "5"],
        &["--payload", "129"],
        &["--packets", "0"],
        &["--ber", "1.5"],
        &["--drop", "-0.1"],
        // Near 1 a run would take hours: each unit lost sends the data link back over its window.
        &["--drop", "0.9"],
        &["--duplicate", "0.11"],
        &["--corrupt", "0.5"],
        &["--replay", "7"],
        &["--rx-flits", "100"],
        &["--rx-flits", "65536"],
        &["--vcs", "posted,bulk"],
        &["--retrain-at", "-3"],
    ] {
        common::assert_refused(&["link", "run"], args);
    }
}

/// `--sleep-at`: the traffic pauses, the data links take the link to L1 by their handshake, and the first
/// packet after the pause wakes it, through Recovery (a microsecond or two, where a retrain from Detect
/// takes 12 ms). Every packet still arrives once, and both ends count each sleep.
#[test]
fn sleeps_go_to_l1_and_back_and_lose_nothing() {
    let args = [
        "--packets",
        "2000",
        "--both-ways",
        "--sleep-at",
        "2",
        "--sleep-at",
        "20",
        "--sleep-for",
        "5",
    ];
    let v = json(&args);
    assert_intact(&v, 4000, 128);
    let sleeps = v["sleeps"].as_array().unwrap();
    assert_eq!(sleeps.len(), 2, "{v}");
    for s in sleeps {
        let ns = |k: &str| s[k].as_f64().unwrap();
        assert!((0.0..5_000.0).contains(&ns("entry_ns")), "{s}");
        assert!((1.0..10_000.0).contains(&ns("exit_ns")), "{s}");
        // The senders pause for 5 us from the request: the link sleeps the rest of it, and the first
        // packet after it asks for the wake.
        assert!(
            (5_000.0..5_100.0).contains(&(ns("entry_ns") + ns("in_l1_ns"))),
            "{s}"
        );
    }
    assert_eq!(v["sleeps_not_done"], 0);
    assert_eq!(v["low_power_entries"], 4);
    assert_eq!(v["replay_timeouts"], 0);
    let out = common::linkctl(&["link", "run"], &args);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("low power: 2 sleeps to L1 and back"), "{text}");
    assert!(
        text.contains("(both ports, counting the speed change at bring-up, not the wakes from L1)"),
        "{text}"
    );
}

/// A sleep due after the last delivery is said not to have been done.
#[test]
fn a_sleep_after_the_run_is_reported_not_done() {
    let v = json(&["--packets", "100", "--sleep-at", "1000000"]);
    assert_intact(&v, 100, 128);
    assert_eq!(v["sleeps_not_done"], 1, "{v}");
    assert_eq!(v["sleeps"].as_array().map(Vec::len), Some(0));
}

#[test]
fn sleep_times_out_of_range_are_refused() {
    for args in [
        ["--sleep-at", "-1"],
        ["--sleep-at", "nan"],
        ["--sleep-for", "inf"],
        ["--sleep-for", "1e10"],
        ["--retrain-at", "-0.5"],
    ] {
        common::assert_refused_saying(&["link", "run"], &args, args[0]);
    }
}

/// A channel named twice in `--vcs` is a weight of the round robin, not a mistake: taken, and said so in
/// `--help` (it was taken silently, the help saying nothing of it).
#[test]
fn a_channel_named_twice_in_vcs_is_a_weight_the_help_gives() {
    let v = json(&["--packets", "300", "--vcs", "posted,posted,request"]);
    assert_intact(&v, 300, 128);
    let help = common::linkctl(&["link", "run"], &["--help"]);
    let help = String::from_utf8(help.stdout)
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains(
            "A channel named more than once gets as many turns of the round robin: posted,posted,request \
             sends two posted packets to each request"
        ),
        "{help}"
    );
}

/// A link whose lane skew delays credit and acknowledgements by microseconds is bound first by the
/// receiver's buffer (`--rx-flits`: the credit the partner may use), then, with that larger, by the replay
/// buffer; the report says which kept packets off the wire, and with both large the link runs at the
/// format's ceiling.
#[test]
fn a_delayed_link_is_bound_by_its_buffers_and_the_report_says_which() {
    let run = |replay: &str, rx_flits: &str| {
        let v = json(&[
            "--lanes",
            "16",
            "--skew",
            "60",
            "--seed",
            "3",
            "--packets",
            "3000",
            "--replay",
            replay,
            "--rx-flits",
            rx_flits,
        ]);
        assert_intact(&v, 3000, 128);
        assert_eq!(v["lanes"], 16, "{v}");
        let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
        (
            v["rx_buffer_flits"].as_u64(),
            f("efficiency"),
            f("idle_for_credit_us") / f("elapsed_us"),
            f("idle_for_replay_us") / f("elapsed_us"),
        )
    };
    let (rx, efficiency, credit, replay) = run("8", "64");
    assert_eq!(rx, Some(64));
    // Counted in flit slots without a packet flit, the shares held back and the packets' own stay
    // under the whole (counted in time between looks at the senders, a slot of 16 lanes holding more
    // than a packet, they had come to 103%, and to 89% with the same wire timing shifted by 10 ns).
    assert!(
        efficiency + credit + replay <= 1.0,
        "{efficiency} {credit} {replay}"
    );
    assert!(
        efficiency < 0.2 && credit > 0.8 && replay == 0.0,
        "{efficiency} {credit} {replay}"
    );
    let (rx, efficiency, credit, replay) = run("8", "1024");
    assert_eq!(rx, Some(1024));
    assert!(
        efficiency < 0.2 && credit == 0.0 && replay > 0.8,
        "{efficiency} {credit} {replay}"
    );
    let (_, efficiency, credit, replay) = run("256", "4096");
    assert!(
        efficiency > 0.86 && credit == 0.0 && replay < 0.002,
        "{efficiency} {credit} {replay}"
    );
}

/// `--pcap` traces what each port's data link sends, before the physical layer: port A as node 0, port B
/// as node 1, in time order, every CRC good (as sent); each port's packet numbers all there, a NAK record
/// for each NAK the report counts, and the replays as packets sent again (section 7.2). With FEC, the
/// blocks' check units are left out, so packets that straddle two blocks are whole.
#[test]
fn a_run_is_traced_as_its_data_links_send() {
    use link_dl::flit::{check_packet_crc, ControlFlit, ControlKind, PacketHeader};
    for fec in [false, true] {
        let pcap = std::env::temp_dir().join(format!("linkctl-run-{fec}-{}.pcap", std::process::id()));
        let args = [
            "--lanes",
            "4",
            "--packets",
            "40",
            "--both-ways",
            "--ber",
            "1e-4",
            "--timing",
            "fast",
        ];
        let fec_arg: &[&str] = if fec { &["--fec"] } else { &[] };
        let v = json(&[&args[..], fec_arg, &["--pcap", pcap.to_str().unwrap()]].concat());
        assert_intact(&v, 80, 128);
        assert!(fec || v["replays"].as_u64().unwrap() > 0, "{v}");
        let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
        assert_eq!(v["trace"]["records"], records.len());
        assert!(records.windows(2).all(|w| w[0].ns <= w[1].ns), "time order");
        assert!(
            records.iter().all(|r| check_packet_crc(&r.bytes).is_ok()),
            "fec {fec}"
        );
        let naks = (records.iter())
            .filter_map(|r| ControlFlit::parse(r.bytes[..16].try_into().unwrap()).ok())
            .filter(|c| c.kind == ControlKind::Nak)
            .count();
        assert_eq!(naks as u64, v["naks"].as_u64().unwrap());
        let mut sent_again = 0;
        for node in [0u16, 1] {
            let numbers: Vec<u64> = (records.iter())
                .filter(|r| r.from_node() == node)
                .filter_map(|r| PacketHeader::parse(r.bytes[..16].try_into().unwrap()).ok())
                .map(|h| h.tl)
                .collect();
            let distinct: std::collections::BTreeSet<u64> = numbers.iter().copied().collect();
            assert_eq!(distinct, (0..40).collect(), "node {node}, fec {fec}");
            sent_again += numbers.len() - distinct.len();
        }
        assert_eq!(
            sent_again > 0,
            v["replays"].as_u64().unwrap() > 0,
            "the replays are in the trace"
        );
        std::fs::remove_file(&pcap).unwrap();
    }
}

/// `--pcap-received` traces the units as each port's data link receives them: on a clean run its packets
/// are the packets sent, record for record, none earlier than sent; with bit errors, records with a bad CRC
/// are there exactly when the data links counted CRC errors.
#[test]
fn a_run_is_traced_as_its_data_links_receive() {
    use link_dl::flit::check_packet_crc;
    let read = |ber: &str, received: bool| {
        let pcap = std::env::temp_dir().join(format!(
            "linkctl-run-rx-{ber}-{received}-{}.pcap",
            std::process::id()
        ));
        let args = [
            "--lanes",
            "2",
            "--packets",
            "30",
            "--both-ways",
            "--timing",
            "fast",
            "--ber",
            ber,
        ];
        let rx: &[&str] = if received { &["--pcap-received"] } else { &[] };
        let v = json(&[&args[..], rx, &["--pcap", pcap.to_str().unwrap()]].concat());
        assert_intact(&v, 60, 128);
        let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
        std::fs::remove_file(&pcap).unwrap();
        (v, records)
    };
    let (_, sent) = read("0", false);
    let (_, received) = read("0", true);
    for node in [0u16, 1] {
        // The packets (initialisation flits sent before the partner's receiver was up are not received).
        let packets = |records: &[fabric_sim::trace::Record]| -> Vec<(u64, Vec<u8>)> {
            (records.iter())
                .filter(|r| r.from_node() == node && r.pseudo_header[1] == fabric_sim::trace::RECORD_PACKET)
                .map(|r| (r.ns, r.bytes.clone()))
                .collect()
        };
        let (rx, tx) = (packets(&received), packets(&sent));
        assert_eq!(rx.len(), tx.len(), "node {node}");
        for ((rx_ns, rx_bytes), (tx_ns, tx_bytes)) in rx.iter().zip(&tx) {
            assert_eq!(rx_bytes, tx_bytes, "node {node}");
            assert!(
                rx_ns >= tx_ns,
                "node {node}: received at {rx_ns} ns, sent at {tx_ns} ns"
            );
        }
    }
    let (v, noisy) = read("1e-4", true);
    use fabric_sim::trace::RECORD_DISCARDED;
    let bad = (noisy.iter())
        .filter(|r| r.pseudo_header[1] != RECORD_DISCARDED && check_packet_crc(&r.bytes).is_err())
        .count();
    assert!(v["crc_errors"].as_u64().unwrap() > 0, "{v}");
    assert!(bad > 0, "the corrupted units are in the trace");
    // The trace frames the units as the data links do: a packet or control record whose CRC fails for
    // each CRC error they count, and the units they discard (after such an error, and when they come up,
    // to a control flit that checks) are records of their own: those they count as discarded, and any
    // unit they could not parse that started the discarding.
    assert_eq!(bad as u64, v["crc_errors"].as_u64().unwrap(), "{v}");
    let discarded = |records: &[fabric_sim::trace::Record]| -> u64 {
        (records.iter())
            .filter(|r| r.pseudo_header[1] == RECORD_DISCARDED)
            .map(|r| r.bytes.len() as u64 / 16)
            .sum()
    };
    let counted = |key: &str| -> u64 { (0..2).map(|p| v["counters"][p][key].as_u64().unwrap()).sum() };
    let (resync_discards, malformed) = (counted("resync_discards"), counted("malformed"));
    assert!(resync_discards > 0, "{v}");
    assert!(
        (resync_discards..=resync_discards + malformed).contains(&discarded(&noisy)),
        "{} discarded units in the trace: {v}",
        discarded(&noisy)
    );
    assert_eq!(discarded(&sent), 0, "none as sent");
}

/// With FEC, a received trace holds the flits as the code corrected them, as the data link frames them:
/// bit errors the code corrects leave every record's CRC good.
#[test]
fn a_fec_runs_received_trace_holds_the_corrected_flits() {
    use link_dl::flit::check_packet_crc;
    let pcap = std::env::temp_dir().join(format!("linkctl-run-rx-fec-{}.pcap", std::process::id()));
    let args = "--lanes 2 --packets 200 --timing fast --fec --ber 1e-5 --seed 3 --pcap-received --pcap";
    let args: Vec<&str> = args.split_whitespace().chain([pcap.to_str().unwrap()]).collect();
    let v = json(&args);
    assert_intact(&v, 200, 128);
    assert!(v["fec_corrections"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["crc_errors"], 0, "{v}");
    let records = fabric_sim::trace::read(&std::fs::read(&pcap).unwrap()).unwrap();
    std::fs::remove_file(&pcap).unwrap();
    assert!(records.len() > 200);
    for r in &records {
        assert!(check_packet_crc(&r.bytes).is_ok(), "{r:?}");
        assert_ne!(r.pseudo_header[1], fabric_sim::trace::RECORD_DISCARDED);
    }
}

/// `dl decode --pcap` and the dissector mark the packets a trace holds a second time as replays, per
/// direction, by their sequence numbers: as many as the data links transmitted beyond the packets they
/// were given, and none on a clean link; the two readers agree packet for packet.
#[test]
fn the_readers_mark_each_replay_in_a_trace() {
    for ber in ["1e-4", "0"] {
        let pcap =
            std::env::temp_dir().join(format!("linkctl-run-replays-{ber}-{}.pcap", std::process::id()));
        let args = [
            "--lanes",
            "2",
            "--packets",
            "200",
            "--both-ways",
            "--timing",
            "fast",
            "--ber",
            ber,
        ];
        let v = json(&[&args[..], &["--pcap", pcap.to_str().unwrap()]].concat());
        assert_intact(&v, 400, 128);
        let transmitted_again: u64 = (0..2)
            .map(|p| {
                let c = &v["counters"][p];
                c["packets_transmitted"].as_u64().unwrap() - c["packets_sent"].as_u64().unwrap()
            })
            .sum();
        let out = common::linkctl(&["dl", "decode"], &["--pcap", pcap.to_str().unwrap(), "--json"]);
        let marks: Vec<bool> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|i| i["kind"] == "packet")
            .map(|i| i["replay"] == true)
            .collect();
        let replays = marks.iter().filter(|&&m| m).count() as u64;
        assert_eq!(replays, transmitted_again, "--ber {ber}: {v}");
        assert_eq!(replays > 0, ber != "0");
        if common::tshark_available() {
            let rows = common::tshark_fields(&pcap, &["openlink.replay"]);
            let read: Vec<bool> = rows
                .iter()
                .filter(|r| !r[0].is_empty())
                .map(|r| r[0] == "1")
                .collect();
            assert_eq!(read, marks, "--ber {ber}");
        }
        std::fs::remove_file(&pcap).unwrap();
    }
}
