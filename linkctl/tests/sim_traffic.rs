//! `linkctl sim traffic` end to end: the JSON a script reads, the table, and bad input refused.

mod common;

const CMD: &[&str] = &["sim", "traffic"];

#[test]
fn json_reports_each_load_with_throughput_latency_and_verification() {
    let v = common::json(
        CMD,
        &["--topology", "mesh4", "--load", "0.1,0.9", "--measure", "2us"],
    );
    assert_eq!(v["topology"], "mesh4");
    assert_eq!(
        (v["pattern"].as_str(), v["spread"].as_str()),
        (Some("uniform"), Some("links"))
    );
    assert_eq!(v["gpus"], 4);
    assert_eq!(v["verified"], true);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let delivered: u64 = points.iter().map(|p| p["delivered"].as_u64().unwrap()).sum();
    assert_eq!(v["packets"].as_u64(), Some(delivered));
    for p in points {
        assert_eq!(p["verified"], true);
        assert_eq!(p["generated"], p["delivered"]);
        let l = &p["latency_ns"];
        assert!(l["p50"].as_u64().unwrap() <= l["p99"].as_u64().unwrap());
        assert!(l["p99"].as_u64().unwrap() <= l["max"].as_u64().unwrap());
        assert!(p["accepted_gbps"].as_f64().unwrap() > 0.0);
    }
    // More offered, more accepted; and latency does not fall.
    let (lo, hi) = (&points[0], &points[1]);
    assert!(hi["offered_gbps"].as_f64() > lo["offered_gbps"].as_f64());
    assert!(hi["accepted_gbps"].as_f64() > lo["accepted_gbps"].as_f64());
    assert!(hi["latency_ns"]["p99"].as_u64() >= lo["latency_ns"]["p99"].as_u64());
    assert!(v["packets_per_s"].as_f64().unwrap() > 0.0);
    let small = common::json(
        CMD,
        &[
            "--topology",
            "mesh4",
            "--load",
            "0.5",
            "--measure",
            "1us",
            "--bytes",
            "64",
        ],
    );
    assert_eq!(small["payload_bytes"], 64);
    assert_eq!(small["verified"], true);
}

#[test]
fn a_shortfall_that_chance_explains_is_not_saturation() {
    // 0.01 of DGX H100 over 200 ns is about 45 packets: seed 3 accepts 2.7 GB/s of the 3.6 offered, a
    // Poisson count's luck, which had been reported as saturation. A load of 1e-9 offers nothing at all.
    for args in [
        &["--load", "0.01", "--measure", "200ns", "--seed", "3"][..],
        &["--topology", "mesh4", "--load", "1e-9"],
    ] {
        let out = common::linkctl(CMD, args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !text.contains("saturated"),
            "{args:?}: {text}"
        );
        // Both windows hold too few packets to measure throughput by, and the table says so.
        assert!(text.contains("packets on average: too few"), "{args:?}: {text}");
        let v = common::json(CMD, args);
        assert_eq!(v["points"][0]["saturated"], false, "{args:?}");
    }
    // Far past saturation, one port per flow: flagged, in the table and in the JSON.
    let v = common::json(CMD, &["--spread", "flow", "--load", "0.9", "--measure", "2us"]);
    assert_eq!(v["points"][0]["saturated"], true, "{v}");
}

#[test]
fn the_table_names_the_run_and_marks_saturation() {
    let out = common::linkctl(
        CMD,
        &[
            "--pattern",
            "hotspot",
            "--hotspot",
            "0.6",
            "--load",
            "0.05,0.8",
            "--measure",
            "2us",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("# hotspot traffic on dgx-h100, spread over the links: 8 GPUs"),
        "{text}"
    );
    assert!(text.contains("# saturated from load 0.80"), "{text}");
    assert!(
        !text.contains("warm-up, "),
        "the default warm-up is not noted: {text}"
    );
    assert!(
        text.contains("every packet delivered once, with its data"),
        "{text}"
    );
}

#[test]
fn a_failure_is_routed_around_and_reported() {
    let args = [
        "--load",
        "0.4",
        "--measure",
        "3us",
        "--fail-link",
        "gpu0:nvswitch1@3us",
    ];
    let out = common::linkctl(CMD, &args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("#   Failover: 1 link(s) failed"), "{text}");
    let v = common::json(CMD, &args);
    assert_eq!(v["points"][0]["failover"]["links_failed"], 1);
    assert_eq!(v["verified"], true);
    common::assert_refused(CMD, &["--fail-link", "gpu0:gpu1@3us"]);
    let out = common::linkctl(CMD, &["--fail-port", "nvswitch1:gpu0"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("expected SWITCH:PEER@TIME, e.g. nvswitch2:gpu5@30us"),
        "{stderr}"
    );
}

#[test]
fn packets_a_failure_strands_are_counted_lost_and_the_rest_delivered() {
    let args = [
        &["--topology", common::STRAND, "--gpus", "a0..a3", "--load", "0.3"][..],
        &common::CUT_S0,
    ]
    .concat();
    let out = common::linkctl(CMD, &args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("  LOST\n#   ") && text.contains("packets lost: failures cut off"),
        "{text}"
    );
    assert!(text.ends_with(
        "every packet delivered once, with its data, but failures LOST some or left some without a route\n"
    ));
    let out = common::linkctl(CMD, &[&args[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["points"][0];
    let (lost, delivered) = (p["lost"].as_u64().unwrap(), p["delivered"].as_u64().unwrap());
    assert!(lost > 0 && p["failover"]["packets_lost"] == lost, "{p}");
    assert_eq!(delivered + lost, p["generated"].as_u64().unwrap());
    assert_eq!(
        (&p["verified"], &p["problem"], &v["verified"]),
        (&false.into(), &serde_json::Value::Null, &false.into())
    );
}

#[test]
fn traffic_a_failure_cuts_in_two_goes_on_between_the_gpus_still_joined() {
    // Every trunk from fat-tree-32's leaf0 to the spines: its nodes are cut from leaf1's.
    let cut: Vec<String> = (0..16).map(|k| format!("leaf0:spine{k}@3us")).collect();
    // At once, and with the fabric manager's new routes 5 us after the cut.
    for delay in ["0us", "5us"] {
        let mut args = vec!["--topology", "fat-tree-32", "--load", "0.1", "--measure", "2us"];
        args.extend(["--json", "--replan-delay", delay]);
        args.extend(cut.iter().flat_map(|l| ["--fail-link", l.as_str()]));
        let out = common::linkctl(CMD, &args);
        assert_eq!(out.status.code(), Some(3), "{delay}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let p = &v["points"][0];
        let count = |field: &str| p[field].as_u64().unwrap();
        assert!(
            count("lost") > 0 && count("unroutable") > 0 && count("delivered") > 0,
            "{p}"
        );
        assert_eq!(count("delivered") + count("lost"), count("generated"), "{delay}");
        assert_eq!(
            (&p["failover"]["jobs_split"], &p["problem"]),
            (&1.into(), &serde_json::Value::Null)
        );
    }
}

#[test]
fn one_run_can_be_traced() {
    let dir = std::env::temp_dir();
    let (pcap, vcd) = (
        dir.join(format!("linkctl-traffic-{}.pcap", std::process::id())),
        dir.join(format!("linkctl-traffic-{}.vcd", std::process::id())),
    );
    let (p, w) = (pcap.to_str().unwrap(), vcd.to_str().unwrap());
    let v = common::json(
        CMD,
        &[
            "--topology",
            "mesh4",
            "--load",
            "0.2",
            "--measure",
            "1us",
            "--pcap",
            p,
            "--vcd",
            w,
        ],
    );
    let (pcap_len, vcd_text) = (
        std::fs::metadata(&pcap).unwrap().len(),
        std::fs::read_to_string(&vcd).unwrap(),
    );
    std::fs::remove_file(&pcap).unwrap();
    std::fs::remove_file(&vcd).unwrap();
    let point = &v["points"][0];
    let records = point["trace"]["records"].as_u64().unwrap();
    // Every packet crossed one link of the mesh: at least one record each, and 16 bytes of record header,
    // 12 of pseudo-header and a flit at least per record after the 24-byte file header.
    assert!(records >= point["delivered"].as_u64().unwrap(), "{point}");
    assert!(pcap_len >= 24 + records * (16 + 12 + 16));
    assert!(point["waves"]["changes"].as_u64().unwrap() > 0);
    assert!(vcd_text.starts_with("$date") || vcd_text.contains("$enddefinitions"));
    common::assert_refused(CMD, &["--load", "0.2,0.4", "--pcap", p]);
}

#[test]
fn bad_input_is_refused() {
    for args in [
        &["--load", "0"][..],
        &["--load", "1.5"],
        &["--load", "x"],
        &["--pattern", "tornado"],
        &["--pattern", "hotspot", "--hotspot", "2"],
        // Without the hot-spot pattern, a share would be silently ignored.
        &["--hotspot", "0.5"],
        &["--load", "0.1", "--pcap", "same.out", "--plot", "same.out"],
        &["--spread", "random"],
        &["--bytes", "24"],
        &["--bytes", "256"],
        &["--measure", "10"],
        &["--warmup", "-1us"],
        &["--ber", "0.5"],
        &["--topology", "nowhere"],
        &["--gpus", "1"],
    ] {
        common::assert_refused(CMD, args);
    }
}

/// An error in a traffic option names the option: the simulator's own had said only "unknown pattern",
/// "the hot spot's share must be from 0 to 1", "the measurement window must be longer than 0" or "the
/// offered load is a fraction ...", leaving the user to guess which option (`sim --background` takes a
/// pattern, a load and a spread too).
#[test]
fn an_error_in_a_traffic_option_names_it() {
    for (command, args, says) in [
        (
            CMD,
            &["--load", "0.1", "--pattern", ""][..],
            "--pattern: unknown pattern \"\"",
        ),
        (
            CMD,
            &["--load", "0.1", "--pattern", "hotspot", "--hotspot", "NaN"],
            "--hotspot must be from 0 to 1, not NaN",
        ),
        (
            CMD,
            &["--load", "0.1", "--pattern", "hotspot", "--hotspot", "-0.5"],
            "--hotspot must be from 0 to 1, not -0.5",
        ),
        (
            CMD,
            &["--load", "0.1", "--spread", "all"],
            "--spread: unknown spread \"all\"",
        ),
        (
            CMD,
            &["--load", "0.1", "--measure", "0us"],
            "--measure must be longer than 0",
        ),
        (
            CMD,
            &["--load", "0.1", "--bytes", "18446744073709551615"],
            "--bytes must be a multiple of 16 from 16 to 128, not 18446744073709551615",
        ),
        (
            &["sim", "allreduce"],
            &["--background", "tornado:0.3"],
            "--background: unknown pattern \"tornado\"",
        ),
        (
            &["sim", "allreduce"],
            &["--background", "uniform:NaN"],
            "--background \"uniform:NaN\": the load is a fraction",
        ),
        (
            &["sim", "allreduce"],
            &["--background", "uniform:inf"],
            "above 0 and at most 1, not inf",
        ),
        (
            &["sim", "allreduce"],
            &["--background", "uniform:0.3", "--background-spread", ""],
            "--background-spread: unknown spread \"\"",
        ),
    ] {
        let out = common::linkctl(command, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// Every y coordinate (`y`, `y1`, `y2`, `cy`) and polyline point in `svg` is on the 420-pixel canvas.
fn assert_on_canvas(svg: &str) {
    let mut seen = 0;
    for attr in [" y=\"", " y1=\"", " y2=\"", " cy=\""] {
        for part in svg.split(attr).skip(1) {
            let value: f64 = part[..part.find('"').unwrap()].parse().unwrap();
            assert!((0.0..=420.0).contains(&value), "{attr}{value} off the canvas");
            seen += 1;
        }
    }
    for part in svg.split("points=\"").skip(1) {
        for point in part[..part.find('"').unwrap()].split_whitespace() {
            let (_, y) = point.split_once(',').unwrap();
            assert!(
                (0.0..=420.0).contains(&y.parse::<f64>().unwrap()),
                "point {point}"
            );
        }
    }
    assert!(seen > 20, "{svg}");
}

#[test]
fn plots_of_latency_and_of_bus_bandwidth_stay_on_their_canvas() {
    let dir = std::env::temp_dir();
    let latency = dir.join(format!("linkctl-traffic-plot-{}.svg", std::process::id()));
    let out = common::linkctl(
        CMD,
        &[
            "--topology",
            "mesh4",
            "--load",
            "0.2,0.6,1.0",
            "--measure",
            "1us",
            "--plot",
            latency.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(&latency).unwrap();
    std::fs::remove_file(&latency).unwrap();
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert_eq!(svg.matches("<polyline").count(), 2, "mean and 99th percentile");
    assert!(svg.contains("99th percentile") && svg.contains("offered load"));
    assert_eq!(svg.matches("<circle").count(), 6);
    assert_on_canvas(&svg);

    let busbw = dir.join(format!("linkctl-busbw-plot-{}.svg", std::process::id()));
    let out = common::linkctl(
        &["sim", "allreduce"],
        &["--max", "64K", "--plot", busbw.to_str().unwrap()],
    );
    assert!(out.status.success());
    let svg = std::fs::read_to_string(&busbw).unwrap();
    std::fs::remove_file(&busbw).unwrap();
    assert_on_canvas(&svg);
    common::assert_refused(CMD, &["--plot", "/nonexistent-dir/x.svg"]);
}

/// A fault due after a load's run has ended is said not to have happened.
#[test]
fn faults_due_after_a_run_are_said_not_to_have_happened() {
    let args = [
        "--load",
        "0.1",
        "--measure",
        "1us",
        "--fail-link",
        "gpu0:nvswitch1@1s",
    ];
    let out = common::linkctl(CMD, &args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(": 1 of the faults was due after that and did not happen\n"),
        "{text}"
    );
    let v = common::json(CMD, &args);
    assert_eq!(v["points"][0]["faults_after_end"], 1);
    assert_eq!(v["points"][0]["failover"]["links_failed"], 0);
}

/// A warm-up shorter than the fabric's default is noted: the window opens before the fabric has filled
/// (at 0 ns, a load of 0.1 reads as saturated).
#[test]
fn a_short_warm_up_is_noted() {
    let out = common::linkctl(CMD, &["--load", "0.1", "--warmup", "0ns", "--measure", "1us"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("# the warm-up, 0 us, is shorter than this fabric's default, 2.6 us"),
        "{text}"
    );
    let v = common::json(CMD, &["--load", "0.1", "--warmup", "0ns", "--measure", "1us"]);
    assert_eq!(
        (v["warmup_us"].as_f64(), v["default_warmup_us"].as_f64()),
        (Some(0.0), Some(2.6))
    );
}

#[test]
fn json_says_what_the_switches_did_and_how_much_idle_time_passed_at_once() {
    // Through DGX H100's NVSwitches every packet crosses one switch; births far enough apart
    // (tens of microseconds) leave the fabric idle between them.
    let v = common::json(
        CMD,
        &[
            "--topology",
            "dgx-h100",
            "--load",
            "1e-6,0.05",
            "--measure",
            "1ms",
        ],
    );
    let points = v["points"].as_array().unwrap();
    for p in points {
        let s = &p["switches"];
        assert!(p["delivered"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(s["arrived"], p["delivered"], "{p}");
        assert_eq!(s["forwarded"], p["delivered"], "{p}");
        assert_eq!(s["route_drops"], 0);
    }
    let idle = |p: &serde_json::Value| p["idle_skipped_us"].as_f64().unwrap();
    assert!(idle(&points[0]) > 100.0, "{}", points[0]);
    assert!(idle(&points[0]) < points[0]["simulated_us"].as_f64().unwrap());
    assert_eq!(idle(&points[1]), 0.0);
}

#[test]
fn trunks_shows_each_loads_busiest_over_the_window() {
    let args = [
        "--pattern",
        "hotspot",
        "--load",
        "0.1,0.5",
        "--measure",
        "3us",
        "--trunks",
        "2",
    ];
    let out = common::linkctl(CMD, &args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    let headers: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("#   Trunks, the busiest 2 of 32")
                && l.contains("3.00 us of the measurement window")
        })
        .collect();
    assert_eq!(headers.len(), 2, "{text}");
    // At half load the hot spot saturates the trunks into gpu0: they are the busiest.
    let last = text.lines().rev().find(|l| l.starts_with("#     ")).unwrap();
    assert!(last.contains("->gpu0 9") || last.contains("->gpu0 100"), "{text}");
    let v = common::json(CMD, &args);
    for p in v["points"].as_array().unwrap() {
        assert_eq!(p["trunks"]["busiest"].as_array().map(Vec::len), Some(2), "{p}");
        assert_eq!(p["trunks"]["over_us"], 3.0);
    }
    let plain = common::json(CMD, &["--load", "0.1", "--measure", "1us"]);
    assert_eq!(plain["points"][0]["trunks"], serde_json::Value::Null);
}
