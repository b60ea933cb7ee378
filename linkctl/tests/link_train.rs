//! `linkctl link train` end to end: where training ends, and the time limit.

mod common;

use common::{assert_refused, linkctl};

/// Runs `link train` with `--json`, returning its exit code and report.
fn train(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let out = linkctl(&["link", "train"], &[args, &["--json"]].concat());
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code(), report)
}

#[test]
fn training_stops_at_the_time_limit_and_says_so() {
    // Detect.Quiet alone lasts 12 ms: half a millisecond leaves the link down, at exactly the limit.
    let (code, r) = train(&["--lanes", "1", "--limit-ms", "0.5"]);
    assert_eq!(code, Some(3), "{r}");
    assert_eq!(
        (r["up"].as_bool(), r["limit_reached"].as_bool()),
        (Some(false), Some(true)),
        "{r}"
    );
    assert_eq!(r["simulated_us"].as_f64(), Some(500.0), "{r}");
    let text = linkctl(&["link", "train"], &["--lanes", "1", "--limit-ms", "0.5"]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("when --limit-ms ran out at 500.000 us"),
        "{stdout}"
    );
}

#[test]
fn a_link_that_trains_or_fails_in_time_did_not_reach_the_limit() {
    let (code, r) = train(&["--lanes", "4"]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(
        (r["up"].as_bool(), r["limit_reached"].as_bool()),
        (Some(true), Some(false)),
        "{r}"
    );
    let dead = [
        "--lanes",
        "4",
        "--dead-lane",
        "0",
        "--dead-lane",
        "1",
        "--dead-lane",
        "2",
    ];
    let (code, r) = train(&[&dead[..], &["--dead-lane", "3"]].concat());
    assert_eq!(code, Some(3), "{r}");
    assert_eq!(
        (r["state"].as_str(), r["limit_reached"].as_bool()),
        (Some("Failed"), Some(false)),
        "{r}"
    );
    // A single dead lane fails at 48 ms: a limit of exactly that still sees training end in Failed.
    let (code, r) = train(&["--lanes", "1", "--dead-lane", "0", "--limit-ms", "48"]);
    assert_eq!(code, Some(3), "{r}");
    assert_eq!(
        (r["state"].as_str(), r["limit_reached"].as_bool()),
        (Some("Failed"), Some(false)),
        "{r}"
    );
}

/// The times of the history lines of `link train`'s text.
fn text_history_times(args: &[&str]) -> Vec<f64> {
    let out = linkctl(&["link", "train"], args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .skip_while(|l| !l.contains("time (us)"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn the_history_is_in_time_order_ties_as_they_happened() {
    // A dead lane: each port goes back to Detect.Quiet when it finds no receiver, and the pair collects
    // that change with the port's next one, 12 ms later, so the other port's Detect.Quiet came after it.
    let dead = ["--lanes", "1", "--dead-lane", "0"];
    let (_, r) = train(&dead);
    let history: Vec<(f64, &str, &str)> = r["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["t_us"].as_f64().unwrap(),
                t["port"].as_str().unwrap(),
                t["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(history.windows(2).all(|w| w[0].0 <= w[1].0), "{history:?}");
    // Changes at the same time keep their order: each port's Detect.Active before its Detect.Quiet.
    assert_eq!(
        history[..4],
        [
            (12000.0, "A", "Detect.Active"),
            (12000.0, "B", "Detect.Active"),
            (12000.0, "A", "Detect.Quiet"),
            (12000.0, "B", "Detect.Quiet"),
        ],
        "{history:?}"
    );
    for args in [&dead[..], &["--lanes", "4", "--skew", "20", "--invert-lane", "2"]] {
        let times = text_history_times(args);
        assert!(times.len() > 4, "{args:?}: {times:?}");
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{args:?}: {times:?}");
    }
}

/// At 1e-4 an x8 link at 2.5 GT/s goes back through Recovery every few microseconds once up (each time
/// its receiver errors pass the threshold): that is a link that trained, reported up, not one still
/// training when the limit ran out.
#[test]
fn a_link_that_keeps_retraining_on_bit_errors_is_up() {
    let (code, r) = train(&["--max-rate", "2.5", "--ber", "1e-4", "--limit-ms", "20"]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(
        (
            r["up"].as_bool(),
            r["limit_reached"].as_bool(),
            r["rate_gts"].as_f64()
        ),
        (Some(true), Some(false), Some(2.5)),
        "state {}, simulated {} us",
        r["state"],
        r["simulated_us"]
    );
    assert!(
        r["counters"]["A"]["error_retrains"].as_u64() > Some(0),
        "{}",
        r["counters"]
    );
}

#[test]
fn a_limit_out_of_range_is_refused() {
    for limit in ["0", "-1", "60001", "NaN"] {
        assert_refused(&["link", "train"], &["--limit-ms", limit]);
    }
    // A huge value is named as it was given, not in its 301 digits.
    for (flag, expected) in [
        (
            "--skew",
            "--skew must be between 0 and 1000 symbol times, not 1e300",
        ),
        (
            "--limit-ms",
            "--limit-ms must be above 0 and at most 60000, not 1e300",
        ),
        ("--ber", "--ber must be at least 0 and below 1, not 1e300"),
    ] {
        let out = linkctl(&["link", "train"], &[flag, "1e300"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{stderr}");
    }
    let out = linkctl(&["link", "run"], &["--drop", "1e300"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--drop must be from 0 to 0.1, not 1e300"),
        "{stderr}"
    );
}

/// A bit error rate of 1 flips every bit: every lane inverted, which trains (the receivers invert
/// polarity), so `link train` reported a link up at "BER 1" where `link run` refused the rate. Both
/// refuse it, in the same words.
#[test]
fn a_ber_of_1_is_refused_by_train_and_run_alike() {
    for command in ["train", "run"] {
        for ber in ["1", "1.0", "-0.1", "NaN"] {
            let out = linkctl(&["link", command], &["--ber", ber, "--timing", "fast"]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{command} --ber {ber}: {stderr}");
            assert!(
                stderr.contains("--ber must be at least 0 and below 1, not "),
                "{command} --ber {ber}: {stderr}"
            );
        }
    }
    // Anything below is a rate the channel draws errors at: accepted.
    let (code, r) = train(&["--ber", "0.999999", "--timing", "fast", "--limit-ms", "1"]);
    assert!(matches!(code, Some(0 | 3)), "{r}");
}

/// A dead or stuck lane is one pair of wires, named at port A: with the wiring reversed the link falls
/// back to the same width as with it straight. Both channels had been given the lane at their own
/// transmitter's number, which under reversal broke two different lanes (x2 instead of x4, or no link).
#[test]
fn a_broken_lane_is_one_lane_however_the_wiring_runs() {
    for lanes in [["--lanes", "8"], ["--lanes", "4"], ["--lanes", "2"]] {
        let n: usize = lanes[1].parse().unwrap();
        for bad in ["--dead-lane", "--stuck-lane"] {
            for lane in [0, n / 2 - 1, n - 1] {
                let lane = lane.to_string();
                let base = [&lanes[..], &["--timing", "fast", bad, &lane]].concat();
                let (status, straight) = train(&base);
                let (reversed_status, reversed) = train(&[&base[..], &["--reversed"]].concat());
                assert_eq!((status, reversed_status), (Some(0), Some(0)), "{base:?}");
                assert_eq!(straight["width"], n / 2, "{base:?}");
                assert_eq!(reversed["width"], n / 2, "{base:?} --reversed");
            }
        }
    }
}

/// The lanes each port reports the link up on, logical lane 0 first, are wired to each other: A's
/// physical lane `p` meets B's `p`, or B's `n - 1 - p` when wired reversed. They are as many as the width,
/// none of them dead, and a port's `reversed` is whether it numbers them from its last lane.
#[test]
fn each_port_reports_the_lanes_it_came_up_on_and_they_are_wired_together() {
    let cases: [&[&str]; 6] = [
        &["--lanes", "4"],
        &["--lanes", "16", "--skew", "20", "--reversed"],
        &["--lanes", "8", "--dead-lane", "0"],
        &["--lanes", "8", "--dead-lane", "0", "--reversed"],
        &["--lanes", "16", "--skew", "1000", "--seed", "2"],
        &["--lanes", "16", "--skew", "65", "--seed", "2"],
    ];
    for args in cases {
        let (status, v) = train(&[args, &["--timing", "fast"]].concat());
        assert_eq!(status, Some(0), "{args:?}: {v}");
        let n: u64 = args[1].parse().unwrap();
        let wired_reversed = args.contains(&"--reversed");
        let lanes = |side: &str| -> Vec<u64> {
            let list = v["lanes"][side]["physical"]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"));
            list.iter().map(|l| l.as_u64().unwrap()).collect()
        };
        let (a, b) = (lanes("A"), lanes("B"));
        assert_eq!(a.len() as u64, v["width"].as_u64().unwrap(), "{args:?}: {v}");
        assert_eq!(a.len(), b.len(), "{args:?}: {v}");
        for (&pa, &pb) in a.iter().zip(&b) {
            assert_eq!(pb, if wired_reversed { n - 1 - pa } else { pa }, "{args:?}: {v}");
            assert!(
                !(args.contains(&"--dead-lane") && pa == 0),
                "{args:?}: a dead lane in use: {v}"
            );
        }
        for (side, list) in [("A", &a), ("B", &b)] {
            let from_last = list.len() > 1 && list[0] > list[1] || list.len() == 1 && list[0] == n - 1;
            assert_eq!(v["lanes"][side]["reversed"], from_last, "{args:?} {side}: {v}");
        }
        assert_eq!(v["reversed"], v["lanes"]["A"]["reversed"], "{args:?}: {v}");
    }
    let (_, down) = train(&["--lanes", "4", "--limit-ms", "0.01"]);
    assert_eq!(down["up"], false, "{down}");
    assert_eq!(down["lanes"], serde_json::json!({"A": null, "B": null}), "{down}");
}

/// A receiver absorbs 64 symbol times of lane-to-lane skew, as spec section 1.5 says, and not 65 (its
/// deskew FIFOs had held 64 symbols, a lane's marker among them, so 64 of skew had failed). At 65 a port
/// leaves out the lanes it cannot line up and the link comes up narrower at the next attempt, which the
/// report says; 65 had ended training in Failed.
#[test]
fn sixty_four_symbol_times_of_skew_are_absorbed() {
    for seed in ["1", "2"] {
        let (status, v) = train(&["--skew", "64", "--timing", "fast", "--seed", seed]);
        assert_eq!((status, v["width"].as_u64()), (Some(0), Some(8)), "{v}");
        assert_eq!(
            v["lanes_left_out_for_deskew"],
            serde_json::json!({"A": [], "B": []}),
            "{v}"
        );
        let (status, v) = train(&["--skew", "65", "--timing", "fast", "--seed", seed]);
        assert_eq!((status, v["state"].as_str()), (Some(0), Some("L0")), "{v}");
        let width = v["width"].as_u64().unwrap_or(0);
        assert!((1..8).contains(&width), "{v}");
        let left_out = |side: &str| {
            v["lanes_left_out_for_deskew"][side]
                .as_array()
                .map_or(0, Vec::len)
        };
        assert!(left_out("A") + left_out("B") > 0, "{v}");
        assert_eq!(
            (
                v["counters"]["A"]["training_attempts"].as_u64(),
                v["counters"]["B"]["training_attempts"].as_u64()
            ),
            (Some(2), Some(2)),
            "{v}"
        );
    }
}

/// Skew is a time: 64 symbol times at 2.5 GT/s (256 ns) are 128 at 5 GT/s, twice what the 8b/10b deskew
/// buffer holds. Every lane locks at 5 GT/s but the link cannot come up there, so the speed change fails
/// and the link comes back up at 2.5 GT/s. It had gone back to Detect instead, forgetting the failed
/// rate, and tried 5 GT/s again after every L0 at 2.5 GT/s: 5,337 trainings in the 500 ms limit, 14
/// minutes of wall time, and still down.
#[test]
fn skew_the_top_rate_cannot_absorb_falls_back_to_a_lower_rate() {
    let (status, v) = train(&[
        "--lanes",
        "16",
        "--skew",
        "64",
        "--max-rate",
        "5",
        "--timing",
        "fast",
        "--limit-ms",
        "1",
    ]);
    assert_eq!(status, Some(0), "{v}");
    assert_eq!(
        (
            v["width"].as_u64(),
            v["rate_gts"].as_f64(),
            v["limit_reached"].as_bool()
        ),
        (Some(16), Some(2.5), Some(false)),
        "{v}"
    );
    for side in ["A", "B"] {
        let c = &v["counters"][side];
        assert_eq!(
            (
                c["training_attempts"].as_u64(),
                c["speed_change_failures"].as_u64()
            ),
            (Some(1), Some(1)),
            "{v}"
        );
    }
    // The most skew each rate absorbs, as README and `--help` give it (in 2.5 GT/s symbol times, 4 ns),
    // and the rate a little more ends at: 8b/10b holds 64 symbols, 128b/130b 31 blocks.
    for (rate, most, more, falls_to) in [
        ("5", "32", "32.25", 2.5),
        ("16", "62", "63", 8.0),
        ("32", "31", "31.5", 16.0),
    ] {
        let args = |skew| {
            [
                "--lanes",
                "4",
                "--max-rate",
                rate,
                "--skew",
                skew,
                "--timing",
                "fast",
            ]
        };
        let (status, v) = train(&args(most));
        assert_eq!(
            (status, v["rate_gts"].as_f64()),
            (Some(0), rate.parse().ok()),
            "{v}"
        );
        let (status, v) = train(&args(more));
        assert_eq!((status, v["rate_gts"].as_f64()), (Some(0), Some(falls_to)), "{v}");
    }
}

/// A lane is dead or stuck, not both, and naming one twice says nothing more: both had been taken
/// silently, `--stuck-lane 0 --dead-lane 0` training as if only `--dead-lane 0` had been given.
#[test]
fn a_lane_given_twice_or_both_dead_and_stuck_is_refused() {
    for args in [
        &["--lanes", "2", "--stuck-lane", "0", "--dead-lane", "0"][..],
        &["--lanes", "2", "--dead-lane", "1", "--dead-lane", "1"],
        &["--lanes", "2", "--stuck-lane", "1", "--stuck-lane", "1"],
        &["--lanes", "4", "--invert-lane", "2", "--invert-lane", "2"],
    ] {
        let fast = ["--timing", "fast", "--limit-ms", "5"];
        assert_refused(&["link", "train"], &[args, &fast].concat());
        assert_refused(
            &["link", "run"],
            &[args, &fast[..2], &["--packets", "10"]].concat(),
        );
    }
}

/// A dead or stuck lane carries nothing, so inverting it means nothing: `--dead-lane 1 --invert-lane 1`
/// had been taken and trained as `--dead-lane 1` alone. Refused, by name, on either command, however the
/// lanes are wired.
#[test]
fn a_dead_or_stuck_lane_that_is_also_inverted_is_refused() {
    for (broken, what) in [("--dead-lane", "a dead lane"), ("--stuck-lane", "a stuck lane")] {
        for reversed in [&[][..], &["--reversed"]] {
            let args = [
                &[
                    "--lanes",
                    "4",
                    "--invert-lane",
                    "0",
                    broken,
                    "1",
                    "--invert-lane",
                    "1",
                ][..],
                reversed,
                &["--timing", "fast"],
            ]
            .concat();
            for command in ["train", "run"] {
                let out = linkctl(&["link", command], &args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(1), "{command} {args:?}: {stderr}");
                let expected = format!(
                    "lane 1 is given as both {broken} and --invert-lane: {what} carries nothing to invert"
                );
                assert!(stderr.contains(&expected), "{command} {args:?}: {stderr}");
            }
        }
    }
    // Other lanes of the same link may be inverted.
    let (code, r) = train(&[
        "--lanes",
        "4",
        "--dead-lane",
        "1",
        "--invert-lane",
        "0",
        "--timing",
        "fast",
    ]);
    assert_eq!((code, r["width"].as_u64()), (Some(0), Some(2)), "{r}");
}

#[test]
fn inverted_lanes_are_lane_numbers_and_receiver_errors_add_up() {
    // Lane 2 inverted at A arrives on B's lane 13 when the wiring is reversed; polarity detection costs
    // receiver errors, which the counters listed must account for.
    let (code, r) = train(&[
        "--lanes",
        "16",
        "--invert-lane",
        "2",
        "--reversed",
        "--timing",
        "fast",
    ]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(
        r["inverted_lanes"],
        serde_json::json!({ "A": [2], "B": [13] }),
        "{r}"
    );
    for side in ["A", "B"] {
        let c = &r["counters"][side];
        let parts: u64 = [
            "code_violations",
            "disparity_errors",
            "block_errors",
            "malformed_ordered_sets",
            "unexpected_symbols",
            "lost_signal",
            "deskew_errors",
        ]
        .iter()
        .map(|k| c[k].as_u64().unwrap_or_else(|| panic!("{side} {k}: {c}")))
        .sum();
        assert_eq!(c["receiver_errors"].as_u64(), Some(parts), "{side}: {c}");
    }
}

/// The report's first line gives the highest rate as a number of GT/s, however `--max-rate` spelled it: it
/// had echoed the option's text, `max gen4 GT/s` and `max 16GT/s GT/s`.
#[test]
fn the_highest_rate_is_reported_in_gt_s_however_it_was_given() {
    for (given, rate) in [
        ("gen4", "16"),
        ("16GT/s", "16"),
        ("2.5", "2.5"),
        ("gen2", "5"),
        ("8.0", "8"),
    ] {
        let out = linkctl(
            &["link", "train"],
            &["--lanes", "1", "--limit-ms", "0.5", "--max-rate", given],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let first = stdout.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("two x1 ports, max {rate} GT/s, ")),
            "{given}: {stdout}"
        );
    }
}

/// Skew far past what deskew absorbs does not always fail training: a lane whose echo in Configuration
/// comes over 2 us after the first lane's is left out as failed, and the link forms on the lanes that
/// answered. With seed 2's skews (up to 1000 symbol times each way) lane 0 is among the late ones and
/// lane 15 is not while lane 14 is, so the widest link is x1 on lane 15, reversed; one lane has nothing to
/// deskew, and data crosses it intact. README and `--help` say so; they had said more than 64 fails.
#[test]
fn lanes_too_late_for_configuration_are_left_out_and_the_link_trains_narrower() {
    let args = ["--lanes", "16", "--skew", "1000", "--seed", "2"];
    let (status, v) = train(&args);
    assert_eq!(status, Some(0), "{v}");
    assert_eq!(
        (
            v["width"].as_u64(),
            v["reversed"].as_bool(),
            v["rate_gts"].as_f64()
        ),
        (Some(1), Some(true), Some(8.0)),
        "{v}"
    );
    let run = common::json(&["link", "run"], &[&args[..], &["--packets", "200"]].concat());
    assert_eq!(run["lanes"], 1, "{run}");
    assert_eq!(
        (
            &run["packets_delivered"],
            &run["bytes_verified"],
            &run["corrupted"]
        ),
        (
            &serde_json::json!(200),
            &serde_json::json!(200 * 128),
            &serde_json::json!(0)
        ),
        "{run}"
    );
}

/// With seed 1's skews of up to 500 symbol times (2 us) both lane 0 and lane 15 answer in Configuration
/// more than 2 us after the first lane: the lanes heard in time form no link. The downstream port went
/// back to Detect each time, with the same outcome, and training ended in Failed after four attempts. A
/// link forms from "at least one group of lanes" that can make one: the port now waits for the late
/// lanes, until Configuration.Linkwidth.Start's own timeout.
#[test]
fn lanes_heard_in_time_that_form_no_link_wait_for_the_late_ones() {
    up_at_8gts_with_no_failed_speed_change(&["--skew", "500", "--timing", "fast", "--seed", "1"]);
}

/// Trains 16 lanes with `args` and checks the link came up at 8 GT/s with no speed change failed.
fn up_at_8gts_with_no_failed_speed_change(args: &[&str]) {
    let (status, v) = train(&[&["--lanes", "16"], args].concat());
    assert_eq!(status, Some(0), "{args:?}: {v}");
    assert_eq!(v["rate_gts"].as_f64(), Some(8.0), "{args:?}: {v}");
    for side in ["A", "B"] {
        assert_eq!(
            v["counters"][side]["speed_change_failures"], 0,
            "{args:?} {side}: {v}"
        );
    }
}

/// Recovery.Speed ends 800 ns after the receivers have gone quiet too (the partner's EIOS, or no signal),
/// not 800 ns after entering it. Seed 6's lanes carry up to 2 us of delay: a port that left after 800 ns
/// switched rate while its partner, still in Recovery.RcvrCfg, had yet to receive its last TS2s, and the
/// speed change failed twice; the link came up at 2.5 GT/s after 120 s of wall time simulating the
/// timeouts. Now it reaches 8 GT/s with no failed speed change.
#[test]
fn recovery_speed_waits_for_the_partners_quiet() {
    up_at_8gts_with_no_failed_speed_change(&["--skew", "500", "--timing", "fast", "--seed", "6"]);
}

/// With seed 2's skews of up to 300 symbol times, port B forms a link whose lanes its deskew buffer
/// cannot line up, so no data comes through in Configuration.Idle; its timeout goes on to Recovery
/// (not Detect), the speed change resets the buffer, and B left no lane out at its failures back to
/// Detect: training ended in Failed after four failed speed changes. The port now keeps the blame from
/// that timeout and leaves those lanes out at its next failure.
#[test]
fn an_idle_state_that_gets_no_data_blames_the_lanes_it_cannot_deskew() {
    up_at_8gts_with_no_failed_speed_change(&["--skew", "300", "--seed", "2"]);
}

/// `phy decode` of a capture file, which must succeed: what it printed.
fn decode_capture(path: &std::path::Path, args: &[&str]) -> Vec<u8> {
    let file = std::fs::read(path).unwrap();
    let out = common::linkctl_with_input(&["phy", "decode"], &[&["--packed"][..], args].concat(), &file);
    assert!(
        out.status.success(),
        "{path:?} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The capture is what each transmitter sent, a file per lane and stretch of signal at one rate, and
/// `phy decode` reads it as the partner's receiver did: training sets with the link's numbers, the
/// EIOS before the speed change, and at 8 GT/s a data stream of logical idle descrambled with the lane
/// number the link gave the lane (which a reversed wiring makes differ from the physical lane at B).
#[test]
fn a_capture_holds_what_each_transmitter_sent() {
    let dir = std::env::temp_dir().join(format!("linkctl-capture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args = [
        "--lanes",
        "2",
        "--max-rate",
        "8",
        "--timing",
        "fast",
        "--reversed",
    ];
    let (code, r) = train(&[&args[..], &["--capture", dir.to_str().unwrap()]].concat());
    assert_eq!(code, Some(0), "{r}");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("capture.json")).unwrap()).unwrap();
    let segments = index["segments"].as_array().unwrap();
    assert_eq!(
        (
            r["capture"]["files"].as_u64(),
            r["capture"]["truncated"].as_bool()
        ),
        (Some(segments.len() as u64), Some(false))
    );
    // Each port's two lanes: training at 2.5 GT/s, then after the speed change at 8 GT/s.
    assert_eq!(segments.len(), 8, "{index}");
    let mut bytes = 0;
    for s in segments {
        let path = dir.join(s["file"].as_str().unwrap());
        let bits = s["bits"].as_u64().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bits.div_ceil(8), "{s}");
        bytes += bits.div_ceil(8);
        let port = s["port"].as_str().unwrap();
        if s["code"] == "8b10b" {
            // TS1 with a PAD link number first; the EIOS that ends the 2.5 GT/s stretch last.
            let symbols = decode_capture(&path, &["--code", "8b10b", "--symbols"]);
            let symbols = String::from_utf8(symbols).unwrap();
            assert!(
                symbols.starts_with("K28.5\nK23.7\nK23.7\n"),
                "{s}: {}",
                &symbols[..40]
            );
            assert!(symbols.ends_with("K28.5\nK28.3\nK28.3\nK28.3\n"), "{s}");
            assert!(
                symbols.contains("K28.5\nD0.0\n"),
                "{s}: no training set with link number 0"
            );
            // Read as a receiver reads it: training sets with the numbers the link agreed (the lane
            // numbers need not be the physical ones), logical idle descrambled to zeros, the EIOS, and
            // no receiver error.
            let events = decode_capture(&path, &["--code", "8b10b", "--events"]);
            let events = String::from_utf8(events).unwrap();
            let lines: Vec<&str> = events.lines().collect();
            assert!(
                lines[0].starts_with("TS1 link PAD lane PAD N_FTS 32 rates 2.5/5/8 GT/s"),
                "{s}: {}",
                lines[0]
            );
            assert!(
                lines.iter().any(|l| l.starts_with("TS2 link 0 lane ")),
                "{s}: {events}"
            );
            let idle: Vec<&&str> = lines.iter().filter(|l| l.starts_with("data ")).collect();
            assert!(
                !idle.is_empty() && idle.iter().all(|l| l[5..].bytes().all(|b| b == b'0')),
                "{s}: {events}"
            );
            assert_eq!(lines.last(), Some(&"EIOS"), "{s}");
            assert!(!events.contains("error"), "{s}: {events}");
            // The same as JSON: each line an object, a run of the same training set counted.
            let json = String::from_utf8(decode_capture(&path, &["--code", "8b10b", "--json"])).unwrap();
            let objects: Vec<serde_json::Value> =
                json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(objects.len(), lines.len());
            assert_eq!(objects[0]["training_set"]["name"], "TS1");
            let count = lines[0]
                .rsplit_once("(x")
                .map_or(1, |(_, n)| n.trim_end_matches(')').parse().unwrap());
            assert_eq!(objects[0]["count"].as_u64(), Some(count));
            continue;
        }
        assert_eq!(s["rate_gts"], 8.0);
        let lane = s["lane_number"].as_u64().unwrap();
        let physical = s["lane"].as_u64().unwrap();
        // Port A numbers its lanes as they are; the reversed wiring makes B's the other way round.
        assert_eq!(lane, if port == "A" { physical } else { 1 - physical }, "{s}");
        let blocks = decode_capture(
            &path,
            &["--code", "128b130b", "--lane", &lane.to_string(), "--blocks"],
        );
        let blocks = String::from_utf8(blocks).unwrap();
        let blocks: Vec<&str> = blocks.lines().collect();
        assert!(blocks[0].ends_with("EIEOS"), "{s}: {}", blocks[0]);
        assert!(
            blocks[1].contains(&format!("TS1 link 0 lane {lane} N_FTS")),
            "{s}: {}",
            blocks[1]
        );
        let sds = blocks.iter().position(|b| b.ends_with(" SDS")).unwrap();
        let data: Vec<&&str> = blocks[sds..].iter().filter(|b| b.contains(" data ")).collect();
        assert!(data.len() > 100, "{s}");
        assert!(
            data.iter().all(|b| b.ends_with(&"0".repeat(32))),
            "{s}: logical idle"
        );
        // With another lane's seed the same blocks are not idle, and the SKP ordered sets' data parity
        // disagrees with the receiver's: a receiver error, exit status 2.
        let wrong = (lane + 1).to_string();
        let file = std::fs::read(&path).unwrap();
        let garbled = common::linkctl_with_input(
            &["phy", "decode"],
            &["--packed", "--code", "128b130b", "--lane", &wrong],
            &file,
        );
        assert_eq!(garbled.status.code(), Some(2), "{s}");
        assert!(garbled.stdout.iter().any(|&b| b != 0), "{s}");
    }
    assert_eq!(index["bytes"].as_u64(), Some(bytes));
    // Text says where it went.
    let out = linkctl(
        &["link", "train"],
        &[&args[..], &["--capture", dir.to_str().unwrap()]].concat(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("capture: 8 files, {bytes} bytes, in {}", dir.display())),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_capture_directory_that_cannot_be_made_is_refused() {
    let file = std::env::temp_dir().join(format!("linkctl-capture-file-{}", std::process::id()));
    std::fs::write(&file, b"not a directory").unwrap();
    common::assert_refused_saying(
        &["link", "train"],
        &[
            "--lanes",
            "1",
            "--timing",
            "fast",
            "--capture",
            file.to_str().unwrap(),
        ],
        "creating",
    );
    std::fs::remove_file(&file).unwrap();
}
