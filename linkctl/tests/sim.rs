//! `linkctl sim` end to end: the table, the JSON, faults, the plot, and bad input.

mod common;

use std::process::Output;

use serde_json::{json, Value};

fn sim(args: &[&str]) -> Output {
    common::linkctl(&["sim"], args)
}

fn json(args: &[&str]) -> serde_json::Value {
    common::json(&["sim"], args)
}

/// Run `args`, check that it verified and that its `failover` JSON holds `expected` under `keys`, and
/// give its text output (the same run without `--json`).
fn failover_counted(args: &[&str], keys: [&str; 3], expected: [u64; 3]) -> String {
    let v = json(args);
    let f = &v["failover"];
    assert_eq!(keys.map(|k| f[k].as_u64()), expected.map(Some), "{f}");
    assert_eq!(v["verified"], true);
    String::from_utf8(sim(args).stdout).unwrap()
}

/// The background traffic of a run's JSON verified, every packet it generated delivered.
fn assert_delivered(b: &serde_json::Value) {
    assert_eq!(
        (b["verified"].as_bool(), &b["generated"]),
        (Some(true), &b["delivered"])
    );
}

#[test]
fn sizes_are_what_the_collective_moves_with_no_repeats_and_none_empty() {
    // (collective, topology, --min, --max, the sizes expected): rounded down as nccl-tests prints them.
    let dgx = "dgx-h100";
    for (collective, topology, min, max, expected) in [
        // 4, 8 and 16 B hold no 32-bit element per GPU of 8: they had been four rows of 32 B.
        ("alltoall", dgx, "4", "64", &[32, 64][..]),
        // They had been rows of 0 elements that still took time.
        ("allgather", dgx, "4", "64", &[32, 64]),
        ("reducescatter", dgx, "8", "128", &[32, 64, 128]),
        ("allreduce", "mesh4", "6", "24", &[4, 12, 24]),
    ] {
        let v = json(&[collective, "--topology", topology, "--min", min, "--max", max]);
        let gpus = v["gpus"].as_u64().unwrap();
        let rows = v["rows"].as_array().unwrap();
        let sizes: Vec<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
        assert_eq!(sizes, expected, "{collective} {min} to {max}");
        for row in rows {
            let per_size = if collective == "allreduce" { 4 } else { 4 * gpus };
            assert_eq!(
                row["size"].as_u64(),
                row["count"].as_u64().map(|c| c * per_size),
                "{row}"
            );
        }
    }
    common::assert_refused(&["sim"], &["allgather", "--min", "4", "--max", "16"]);
}

#[test]
fn two_outputs_in_one_file_are_refused_through_links_but_not_a_device() {
    let folder = std::env::temp_dir().join(format!("linkctl-same-file-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("trace");
    std::fs::write(&file, b"").unwrap();
    let hard = folder.join("hard");
    let _ = std::fs::remove_file(&hard);
    std::fs::hard_link(&file, &hard).unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let args = |pcap: &str, vcd: &str| {
        [
            "allreduce",
            "--topology",
            "mesh4",
            "--max",
            "1K",
            "--pcap",
            pcap,
            "--vcd",
            vcd,
        ]
        .map(String::from)
    };
    // A hard link is the same file by another name.
    let refused = args(&path(&file), &path(&hard));
    common::assert_refused(&["sim"], &refused.each_ref().map(String::as_str));
    #[cfg(unix)]
    {
        let soft = folder.join("soft");
        let _ = std::fs::remove_file(&soft);
        std::os::unix::fs::symlink(&file, &soft).unwrap();
        let refused = args(&path(&soft), &path(&file));
        common::assert_refused(&["sim"], &refused.each_ref().map(String::as_str));
        // Any number of outputs may go to /dev/null.
        let out = sim(&args("/dev/null", "/dev/null").each_ref().map(String::as_str));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn a_time_is_the_same_moment_in_any_unit() {
    // 10^6 of a unit had been refused ("bad time"), and seconds were not a unit. A failure at 20 us lands
    // in the sweep: every spelling of it gives the same run.
    let run = |at: &str| {
        let v = json(&[
            "allreduce",
            "--max",
            "1M",
            "--fail-link",
            &format!("gpu0:nvswitch1@{at}"),
        ]);
        assert_eq!(v["verified"], true, "{at}");
        (v["rows"].clone(), v["failover"].clone())
    };
    let first = run("20us");
    assert_eq!(first.1["links_failed"], 1);
    for at in ["20000ns", "0.02ms", "0.00002s"] {
        assert_eq!(run(at), first, "{at}");
    }
    // And 10^6 of a unit is taken: 1 ms, after this sweep has ended.
    assert_eq!(run("1000000ns").1["links_failed"], 0);
}

#[test]
fn all_reduce_json_has_a_verified_row_per_size() {
    let v = json(&["allreduce", "--topology", "mesh4", "--min", "1K", "--max", "64K"]);
    assert_eq!(v["verified"], true);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 7, "1K to 64K doubling");
    for row in rows {
        assert_eq!(row["wrong"], 0);
        let (algbw, busbw) = (row["algbw"].as_f64().unwrap(), row["busbw"].as_f64().unwrap());
        // busbw = algbw x 2(n-1)/n with n = 4.
        assert!((busbw - algbw * 1.5).abs() < 1e-9 * busbw.max(1.0), "{row}");
    }
    assert!(v["packets_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_switches_counters_are_in_the_json_and_the_table() {
    // mesh4 has no switch; DGX H100's ring sends each packet through one NVSwitch, some cut-through.
    let mesh = json(&["allreduce", "--topology", "mesh4", "--min", "64K", "--max", "64K"]);
    assert_eq!(mesh["switches"]["forwarded"], 0);
    let v = json(&["allreduce", "--min", "64K", "--max", "64K"]);
    let s = &v["switches"];
    let (forwarded, cut_through) = (
        s["forwarded"].as_u64().unwrap(),
        s["cut_through"].as_u64().unwrap(),
    );
    assert_eq!(
        forwarded,
        v["packets"].as_u64().unwrap(),
        "one switch hop per packet"
    );
    assert!(cut_through > 0 && cut_through < forwarded, "{s}");
    // Unicast: every packet taken in is forwarded once; credits leave no offer refused.
    assert_eq!(s["arrived"].as_u64(), Some(forwarded));
    assert_eq!(s["refused_full"], 0);
    assert_eq!(
        (s["partition_drops"].as_u64(), s["route_drops"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(s["reductions"], 0);
    // A switch reduction sums each of the 512 packets once, in one of the four switches, and multicasts
    // the sums.
    let v = json(&[
        "allreduce",
        "--algo",
        "switch-reduce",
        "--min",
        "64K",
        "--max",
        "64K",
    ]);
    assert_eq!(v["switches"]["reductions"], 512);
    assert!(v["switches"]["multicast_copies"].as_u64().unwrap() > 0);
    let out = sim(&["allreduce", "--min", "64K", "--max", "64K"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "# Switches: {forwarded} packets arrived, {forwarded} forwarded, {cut_through} of them \
             cut-through"
        )),
        "{text}"
    );
}

/// Of a unicast run's switch counters, what went out against what came in: every packet taken in is
/// forwarded once or dropped, and one that a failed link handed back (`taken_back`) once more.
fn assert_switches_balance(s: &Value) {
    let n = |key: &str| s[key].as_u64().unwrap();
    assert_eq!(n("multicast_copies") + n("reductions"), 0, "unicast only: {s}");
    assert_eq!(
        n("forwarded") + n("partition_drops") + n("route_drops"),
        n("arrived") + n("taken_back"),
        "{s}"
    );
}

#[test]
fn a_packet_returned_to_its_source_is_forwarded_not_dropped() {
    // After gpu0:nvswitch1 fails, nvswitch1 has no route to gpu0 and returns what it gets for it. It
    // had been counted in route_drops (16 here), and forwarded besides.
    let v = json(&[
        "allreduce",
        "--min",
        "1M",
        "--max",
        "4M",
        "--fail-link",
        "gpu0:nvswitch1@20us",
    ]);
    assert_eq!(v["verified"], true);
    let (s, failover) = (&v["switches"], &v["failover"]);
    assert!(failover["packets_bounced"].as_u64().unwrap() > 0, "{failover}");
    assert_eq!(s["route_drops"], 0, "{s}");
    // nvswitch1's link had forwarded some that gpu0 never acknowledged: forwarded again.
    assert!(s["taken_back"].as_u64().unwrap() > 0, "{s}");
    assert_switches_balance(s);
}

#[test]
fn bit_errors_show_in_the_link_totals_of_the_json_and_the_table() {
    let args = [
        "allreduce",
        "--topology",
        "mesh4",
        "--min",
        "64K",
        "--max",
        "256K",
        "--ber",
        "1e-6",
    ];
    let v = json(&args);
    assert_eq!(v["verified"], true);
    let links = &v["links"];
    let count = |key: &str| {
        links[key]
            .as_u64()
            .unwrap_or_else(|| panic!("links.{key}: {links}"))
    };
    assert!(
        count("bits_flipped") > 0 && count("crc_errors") > 0 && count("replays") > 0,
        "{links}"
    );
    assert!(count("packets_transmitted") > count("packets_sent"), "{links}");
    assert_eq!(count("packets_received"), count("packets_sent"), "{links}");
    let out = sim(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("# Data links:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(&format!("{} CRC errors caught", count("crc_errors"))),
        "{line}"
    );
}

#[test]
fn every_collective_and_algorithm_verifies() {
    for args in [
        &["allreduce", "--algo", "tree"][..],
        &["allreduce", "--algo", "switch-reduce"],
        &["allgather"],
        &["reducescatter"],
        &["broadcast"],
        &["alltoall"],
    ] {
        let v = json(&[args, &["--topology", "dgx-h100", "--min", "4K", "--max", "32K"]].concat());
        assert_eq!(v["verified"], true, "{args:?}");
    }
}

#[test]
fn nothing_is_left_on_the_links_when_a_clean_sweep_ends() {
    // The tree once sent credits after its senders' last chunks, still on the links at the end (and taken
    // by the next size's tree for its own); with a 4 KiB buffer its chunks are single packets and need
    // credits, with the default they need none.
    for args in [
        &["allreduce", "--algo", "tree"][..],
        &["allreduce", "--algo", "tree", "--buffsize", "4K"],
        &["allreduce", "--algo", "tree", "--topology", "mesh4"],
        &["allreduce"],
        &["allreduce", "--buffsize", "1K"],
        &["allreduce", "--algo", "switch-reduce"],
        &["allgather"],
        &["alltoall"],
    ] {
        let v = json(&[args, &["--min", "1K", "--max", "1M"]].concat());
        let links = &v["links"];
        assert_eq!(v["verified"], true, "{args:?}");
        assert_eq!(
            (&links["packets_transmitted"], &links["packets_received"]),
            (&links["packets_sent"], &links["packets_sent"]),
            "{args:?}: {links}"
        );
    }
}

#[test]
fn a_failed_link_is_reported_and_the_data_still_verifies() {
    let v = json(&[
        "allreduce",
        "--min",
        "1M",
        "--max",
        "2M",
        "--fail-link",
        "gpu0:nvswitch1@4us",
        "--degrade-link",
        "gpu1:nvswitch0@3us",
        "--ber",
        "1e-7",
    ]);
    assert_eq!(v["verified"], true);
    assert_eq!(v["failover"]["links_failed"], 1);
    assert_eq!(v["failover"]["links_degraded"], 1);
    assert!(v["failover"]["packets_taken_back"].as_u64().unwrap() > 0);
    assert_eq!(v["failure"], serde_json::Value::Null);
}

/// A fault that finds its link already down is counted, not silently ignored: a second failure of the
/// same link, and more lost links than a trunk has (gpu0 has 4 to nvswitch1: three lose one each, the
/// fourth takes the trunk down, the fifth finds it down).
#[test]
fn faults_that_find_their_link_down_are_counted() {
    let mut args = vec!["allreduce", "--min", "1M", "--max", "1M"];
    args.extend(["--degrade-link", "gpu0:nvswitch1@2us"].repeat(5));
    args.extend(["--fail-link", "gpu0:nvswitch1@3us"]);
    let keys = ["links_degraded", "links_failed", "faults_without_effect"];
    let text = failover_counted(&args, keys, [3, 1, 2]);
    assert!(
        text.contains("; 2 fault(s) without effect, their link already down"),
        "{text}"
    );
}

/// A drained switch is counted in the JSON and the footer, which a run without drains leaves as it was.
#[test]
fn a_drained_switch_is_counted_and_a_run_without_drains_has_no_such_key() {
    let args = [
        "allreduce",
        "--min",
        "1M",
        "--max",
        "1M",
        "--drain-switch",
        "nvswitch1@1us",
    ];
    let keys = ["switches_drained", "drains_refused", "links_failed"];
    let text = failover_counted(&args, keys, [1, 0, 0]);
    // Nothing refused: the footer ends there, and no line says why a drain was refused.
    assert!(text.contains("; 1 switch(es) drained\n"), "{text}");
    assert!(!text.contains("refused to drain"), "{text}");
    let v = json(&args[..5]);
    assert!(v["failover"].get("switches_drained").is_none(), "{v}");
    // A drain alone is what --replan-delay and --repair-switch need.
    let repaired = [
        &args[..],
        &["--repair-switch", "nvswitch1@5us", "--replan-delay", "1us"],
    ]
    .concat();
    failover_counted(
        &repaired,
        ["switches_drained", "links_repaired", "links_failed"],
        [1, 8, 0],
    );
}

/// A sweep that ends before the fabric manager's new routes says so: what they would have found did not
/// come into it. Here the failed trunk (a leaf's to a spine) carries none of a one-node job's packets, so
/// nothing waits for the new routes; without a delay the manager replans at once, and there is no note.
#[test]
fn a_sweep_that_ends_before_the_new_routes_says_so() {
    let args = [
        "allreduce",
        "--topology",
        "fat-tree-64",
        "--gpus",
        "gpu0..gpu7",
        "--min",
        "64K",
        "--max",
        "64K",
        "--fail-link",
        "leaf0:spine0@1us",
    ];
    let late = [&args[..], &["--replan-delay", "1ms"]].concat();
    let v = json(&late);
    assert_eq!(
        (
            &v["replan_pending"],
            &v["verified"],
            &v["failover"]["links_failed"]
        ),
        (&json!(true), &json!(true), &json!(1)),
        "{v}"
    );
    assert_eq!(v["replan_waits_for"], "replan_delay", "{v}");
    let text = String::from_utf8(sim(&late).stdout).unwrap();
    assert!(
        text.contains(
            "# Note: the sweep ended before the fabric manager's new routes after its last failure or repair \
             (--replan-delay): "
        ),
        "{text}"
    );
    let v = json(&args);
    assert_eq!(v["replan_pending"], false);
    assert!(v.get("replan_waits_for").is_none(), "{v}");
    assert!(!String::from_utf8(sim(&args).stdout)
        .unwrap()
        .contains("new routes after"));
}

/// New routes still to come because a repaired link was still training when the sweep ended, with no
/// --replan-delay: the note gives that reason (it named --replan-delay, which the run had not been given).
#[test]
fn a_sweep_that_ends_with_a_repaired_link_training_says_so() {
    let args = [
        "allreduce",
        "--min",
        "1M",
        "--max",
        "1M",
        "--fail-link",
        "gpu0:nvswitch1@2us",
        "--repair-link",
        "gpu0:nvswitch1@7us",
    ];
    let v = json(&args);
    assert_eq!(
        (&v["replan_pending"], &v["replan_waits_for"], &v["verified"]),
        (&json!(true), &json!("links_training"), &json!(true)),
        "{v}"
    );
    let text = String::from_utf8(sim(&args).stdout).unwrap();
    assert!(
        text.contains(
            "# Note: the sweep ended before the fabric manager's new routes after its last failure or repair \
             (links still training: it routes once every live link is up): "
        ),
        "{text}"
    );
    assert!(!text.contains("--replan-delay"), "{text}");
}

/// A repaired link is counted in the JSON and the footer, and so is a repair that finds its link whole.
#[test]
fn repairs_are_counted() {
    let args = [
        "allreduce",
        "--min",
        "1M",
        "--max",
        "2M",
        "--fail-link",
        "gpu0:nvswitch1@1us",
        "--repair-link",
        "nvswitch1:gpu0@3us",
        "--repair-link",
        "gpu1:nvswitch1@3us",
    ];
    let keys = ["links_failed", "links_repaired", "repairs_without_effect"];
    let text = failover_counted(&args, keys, [1, 1, 1]);
    assert!(
        text.contains("# Failover: 1 link(s) failed, 0 ganged link(s) lost, 1 repaired;")
            && text.contains("; 1 repair(s) without effect, their link already whole"),
        "{text}"
    );
}

#[test]
fn traffic_beside_a_collective_is_reported_in_the_json_and_the_table() {
    let args = [
        "allreduce",
        "--min",
        "1M",
        "--max",
        "1M",
        "--background",
        "uniform:0.25",
        "--background-spread",
        "flow",
    ];
    let v = json(&args);
    assert_eq!(v["verified"], true);
    let b = &v["background"];
    assert_eq!(
        (b["pattern"].as_str(), b["spread"].as_str()),
        (Some("uniform"), Some("flow"))
    );
    assert_eq!(b["verified"], true);
    assert_eq!(b["generated"], b["delivered"]);
    assert!(b["latency_ns"]["p99"].as_u64().unwrap() > 0, "{b}");
    let out = sim(&args);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("# Background: uniform traffic at a load of 0.25 (flow spread)")
            && text.contains("every packet delivered once, with its data"),
        "{text}"
    );
    // Without it, the JSON says so.
    assert_eq!(
        json(&["allreduce", "--min", "64K", "--max", "64K"])["background"],
        serde_json::Value::Null
    );
}

#[test]
fn the_fabric_manager_can_take_time_to_replan() {
    let v = json(&[
        "allreduce",
        "--min",
        "1M",
        "--max",
        "1M",
        "--fail-link",
        "gpu0:nvswitch1@2us",
        "--replan-delay",
        "20us",
    ]);
    assert_eq!(v["verified"], true);
    assert_eq!(v["replan_delay_ns"], 20_000.0);
    // Meanwhile nvswitch1 held what the other GPUs sent it for gpu0.
    assert!(
        v["failover"]["packets_parked"].as_u64().unwrap() > 0,
        "{}",
        v["failover"]
    );
}

#[test]
fn the_switch_reduction_goes_on_without_a_switch_that_lost_a_gpu() {
    let args = [
        "allreduce",
        "--algo",
        "switch-reduce",
        "--min",
        "1M",
        "--max",
        "2M",
        "--fail-link",
        "gpu0:nvswitch1@2us",
    ];
    let v = json(&args);
    assert_eq!(v["verified"], true);
    assert_eq!(v["failover"]["engines_offline"], 1);
    assert!(v["failover"]["engine_packets_dropped"].as_u64().unwrap() > 0);
    // Only a run with a repair says how many came back.
    assert!(
        v["failover"].get("engines_online_again").is_none(),
        "{}",
        v["failover"]
    );
    let out = sim(&args);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Switch collective engines taken offline: 1"),
        "{stdout}"
    );
    assert!(!stdout.contains("brought back online"), "{stdout}");
}

#[test]
fn a_repair_brings_the_switch_reduction_engine_back_for_the_next_size() {
    let args = [
        "allreduce",
        "--algo",
        "switch-reduce",
        "--min",
        "1M",
        "--max",
        "2M",
        "--fail-link",
        "gpu0:nvswitch1@2us",
        "--repair-link",
        "gpu0:nvswitch1@3us",
    ];
    let v = json(&args);
    assert_eq!(v["verified"], true);
    assert_eq!(v["failover"]["engines_offline"], 1);
    assert_eq!(v["failover"]["engines_online_again"], 1);
    // The 2 MiB size has every plane again: 472 GB/s of bus bandwidth, as without the failure (375
    // without the plane).
    let busbw = v["rows"][1]["busbw"].as_f64().unwrap();
    assert!((busbw - 472.0).abs() < 5.0, "{busbw}");
    let out = sim(&args);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("; 1 brought back online after repairs, used from the next size on"),
        "{stdout}"
    );
}

#[test]
fn a_fabric_cut_in_two_exits_non_zero_with_the_reason() {
    // At 1 us the collective is running; at 100 ns the links are still training: the same report.
    for at in ["gpu0:gpu1@1us", "gpu0:gpu1@100ns"] {
        let out = sim(&[
            "allreduce",
            "--topology",
            "mesh2",
            "--min",
            "1M",
            "--max",
            "1M",
            "--fail-link",
            at,
        ]);
        assert_eq!(out.status.code(), Some(3), "{at}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("Stopped: the fabric cannot go on"),
            "{at}: {stdout}"
        );
    }
}

#[test]
fn a_job_runs_on_a_part_of_the_fabric_that_no_link_joins_to_the_rest() {
    let stars = common::two_stars("sim-two-stars.toml", 3, 1, 0);
    let out = sim(&["allreduce", "--topology", &stars, "--max", "4K"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The pair named is one the collective's ring sends between: a GPU of the first part and b0.
    assert!(
        stderr.contains("the collective's GPUs: no route from a")
            && stderr.contains(" to b0: no path of live links through switches joins them"),
        "{stderr}"
    );
    // A job on each part.
    let v = json(&[
        "allreduce",
        "--topology",
        &stars,
        "--gpus",
        "a0,a1,a2",
        "--background",
        "uniform:0.2",
        "--background-gpus",
        "b0,b1,b2",
        "--max",
        "64K",
    ]);
    assert_eq!(v["verified"], true);
    let b = &v["background"];
    assert_delivered(b);
    assert!(b["generated"].as_u64() > Some(0), "{b}");
}

#[test]
fn the_other_jobs_lost_packets_fail_that_job_only() {
    // The background traffic's packets stranded in S0: the collective completes and checks out; the
    // traffic counts its losses.
    let args = [
        &[
            "allreduce",
            "--topology",
            common::STRAND,
            "--gpus",
            "b0,b1",
            "--background",
            "uniform:0.3",
            "--background-gpus",
            "a0..a3",
            "--min",
            "1M",
            "--max",
            "1M",
        ][..],
        &common::CUT_S0,
    ]
    .concat();
    let out = sim(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("# Out of bounds values : 0 OK") && text.contains("; LOST: "),
        "{text}"
    );
    assert!(
        text.ends_with("results verified but for the background traffic's losses to failures\n"),
        "{text}"
    );
    let out = sim(&[&args[..], &["--json"]].concat());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let b = &v["background"];
    let lost = b["lost"].as_u64().unwrap();
    assert!(lost > 0 && v["failover"]["packets_lost"] == lost, "{b}");
    // S0 drops what it can neither deliver nor return: the lost, and copies of packets sent again.
    assert!(
        v["switches"]["route_drops"].as_u64().unwrap() >= lost,
        "{}",
        v["switches"]
    );
    assert_switches_balance(&v["switches"]);
    assert_eq!(
        b["delivered"].as_u64().unwrap() + lost,
        b["generated"].as_u64().unwrap()
    );
    assert_eq!(
        (&v["verified"], &v["failure"], &b["problem"]),
        (&false.into(), &Value::Null, &Value::Null)
    );
    assert!(v["rows"].as_array().unwrap().iter().all(|row| row["wrong"] == 0));
    assert_eq!(v["collective_verified"], true);
    // The collective's packets stranded: it cannot complete, and the run stops saying where.
    let out = sim(&[&args[..4], &["a0..a3"], &args[5..8], &["b0,b1"], &args[9..]].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("# Stopped: S0 holds a packet from a"), "{text}");
}

#[test]
fn the_plot_is_an_svg() {
    let path = std::env::temp_dir().join(format!("linkctl-sim-plot-{}.svg", std::process::id()));
    let out = sim(&[
        "allreduce",
        "--topology",
        "mesh4",
        "--max",
        "16K",
        "--plot",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let svg = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..svg.len().min(80)]
    );
    assert!(svg.contains("</svg>"));
    // Titled with the collective's name as the table's header gives it (nccl-tests').
    assert!(svg.contains("all_reduce on mesh4 (ring)"), "{svg}");
    // A path that cannot be written is refused before the run: nothing on standard output.
    let bad = sim(&["allreduce", "--plot", "/nonexistent-dir/x.svg"]);
    assert!(!bad.status.success() && bad.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("cannot create --plot file \"/nonexistent-dir/x.svg\"")
    );
    // A run that stops with an error (here: no size of all-to-all from 1 to 3 B on 8 GPUs) leaves no plot
    // file of its own, and one that was there as it was.
    let failing = |path: &std::path::Path| {
        let out = sim(&[
            "alltoall",
            "--min",
            "1",
            "--max",
            "3",
            "--plot",
            path.to_str().unwrap(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    failing(&path);
    assert!(!path.exists(), "an empty plot was left at {}", path.display());
    std::fs::write(&path, "an older plot").unwrap();
    failing(&path);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "an older plot");
    std::fs::remove_file(&path).unwrap();
    // Nor does it remove a symbolic link that was there, even one to nothing yet.
    let target = path.with_extension("target.svg");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    failing(&path);
    assert!(std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()));
    std::fs::remove_file(&path).unwrap();
    let _ = std::fs::remove_file(&target);
}

#[test]
fn waveforms_are_written_and_counted() {
    let path = std::env::temp_dir().join(format!("linkctl-sim-waves-{}.vcd", std::process::id()));
    let run = [
        "allreduce",
        "--topology",
        "mesh2",
        "--max",
        "16K",
        "--vcd",
        path.to_str().unwrap(),
    ];
    let v = json(&run);
    let vcd = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(vcd.contains("$enddefinitions $end"));
    let changes = v["waves"]["changes"].as_u64().unwrap();
    assert!(changes > 10, "{v}");
    assert_eq!(v["waves"]["dropped"], 0);
    // A limit writes that many and counts the rest: the changes left out, not every sample after it.
    for limit in [0, 5, changes - 1] {
        let limited = json(&[&run[..], &["--vcd-limit", &limit.to_string()]].concat());
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            (
                limited["waves"]["changes"].as_u64(),
                limited["waves"]["dropped"].as_u64()
            ),
            (Some(limit), Some(changes - limit)),
            "--vcd-limit {limit}"
        );
    }
    let bad = sim(&[
        "allreduce",
        "--topology",
        "mesh2",
        "--vcd",
        "/nonexistent-dir/x.vcd",
    ]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("cannot create --vcd file \"/nonexistent-dir/x.vcd\"")
    );
}

/// An error with a file names the option that named it and its path, each once, on one line: the
/// output files' had named the path alone (`cannot create /x/t.pcap`; `cannot write /dev/full: /dev/full`
/// for waveforms, `cannot write the trace: /dev/full` for a trace), and so had the input files'
/// (`cannot read topology`), where `fabric --topology A --hardware B` reads two.
#[cfg(target_os = "linux")]
#[test]
fn an_error_with_a_file_names_its_option_and_path() {
    let folder = env!("CARGO_TARGET_TMPDIR");
    for command in [
        &["allreduce", "--topology", "mesh2", "--min", "1K", "--max", "1K"][..],
        &["traffic", "--topology", "mesh2", "--load", "0.1"],
    ] {
        for option in ["--pcap", "--vcd", "--plot"] {
            for (path, says) in [
                ("/nonexistent-dir/x", "cannot create"),
                (folder, "cannot create"),
                ("/dev/full", "cannot write"),
            ] {
                let args = [command, &[option, path]].concat();
                let out = sim(&args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
                assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
                let expected = format!("linkctl: error: {says} {option} file {path:?}: ");
                assert!(stderr.starts_with(&expected), "{args:?}: {stderr}");
                assert_eq!(stderr.matches(path).count(), 1, "{args:?}: {stderr}");
            }
        }
    }
    let missing = "/nonexistent-dir/t.toml";
    for (command, args, says) in [
        (
            "sim",
            &["allreduce", "--topology", missing][..],
            "cannot read --topology file",
        ),
        ("fabric", &["--topology", missing], "cannot read --topology file"),
        ("fabric", &["--hardware", missing], "cannot read --hardware file"),
        ("fabric", &["--hardware", folder], "cannot read --hardware file"),
    ] {
        let out = common::linkctl(&[command], args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        let path = args[args.len() - 1];
        assert!(
            stderr.contains(&format!("{says} {path:?}: ")),
            "{args:?}: {stderr}"
        );
    }
}

/// A path with a newline or another control character in it is quoted in an error, which stays on one
/// line: output files', input files' and two outputs named as one file had all been printed as they are.
#[cfg(unix)]
#[test]
fn an_error_quotes_a_path_with_control_characters() {
    let folder = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("control\ncharacters\x1b[31m");
    std::fs::create_dir_all(&folder).unwrap();
    let missing = folder.join("no-such-dir").join("x.toml");
    let missing = missing.to_str().unwrap();
    let both = folder.join("both").to_str().unwrap().to_owned();
    // A topology file whose contents are bad, at a path with a newline.
    let bad_toml = folder.join("bad.toml");
    std::fs::write(&bad_toml, "[[node]]\nname = \"gpu0\"\ncolour = \"red\"\n").unwrap();
    let bad_toml = bad_toml.to_str().unwrap();
    let mesh2 = ["allreduce", "--topology", "mesh2", "--min", "1K", "--max", "1K"];
    for (command, args, says) in [
        (
            &["sim"][..],
            [&mesh2[..], &["--plot", missing]].concat(),
            "--plot file",
        ),
        (
            &["sim"],
            [&mesh2[..], &["--pcap", missing]].concat(),
            "--pcap file",
        ),
        (&["sim"], [&mesh2[..], &["--vcd", missing]].concat(), "--vcd file"),
        (
            &["sim"],
            [&mesh2[..], &["--pcap", &both, "--vcd", &both]].concat(),
            "--pcap and --vcd name the same file,",
        ),
        (
            &["sim"],
            vec!["allreduce", "--topology", missing],
            "--topology file",
        ),
        (
            &["sim"],
            vec!["allreduce", "--topology", bad_toml],
            "--topology file",
        ),
        (&["fabric"], vec!["--hardware", missing], "--hardware file"),
        (&["fabric"], vec!["--hardware", bad_toml], "--hardware file"),
    ] {
        let out = common::linkctl(command, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        let path = args.last().unwrap();
        assert!(!stderr.contains('\x1b'), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("{says} {path:?}")), "{args:?}: {stderr}");
    }
}

/// A run that ends with an error (here: a trace that cannot be written) still writes its waveforms whole:
/// the same as the run's without the trace, the ends of the bursts still held included (before, the
/// directions busy at the end stayed busy for ever in the file).
#[cfg(target_os = "linux")]
#[test]
fn waveforms_of_a_run_that_fails_are_written_whole() {
    let vcd =
        |name: &str| std::env::temp_dir().join(format!("linkctl-sim-{name}-{}.vcd", std::process::id()));
    let run = |vcd: &std::path::Path, trace: &[&str]| {
        let args = [
            &[
                "allreduce",
                "--topology",
                common::STRAND,
                "--gpus",
                "a0..a3",
                "--background",
                "uniform:0.3",
                "--background-gpus",
                "b0,b1",
                "--min",
                "1M",
                "--max",
                "1M",
                "--vcd",
                vcd.to_str().unwrap(),
            ][..],
            &common::CUT_S0,
            trace,
        ]
        .concat();
        let out = sim(&args);
        let waves = std::fs::read_to_string(vcd).unwrap();
        std::fs::remove_file(vcd).unwrap();
        (out, waves)
    };
    // The collective stops (exit status 3), its waveforms finished.
    let (out, whole) = run(&vcd("whole"), &[]);
    assert_eq!(out.status.code(), Some(3));
    let (out, waves) = run(&vcd("no-trace"), &["--pcap", "/dev/full"]);
    assert_eq!(out.status.code(), Some(1));
    // The error names the file that could not be written (the run writes waveforms too).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot write --pcap file \"/dev/full\": "),
        "{stderr}"
    );
    assert!(
        waves == whole,
        "the waveforms differ from the run's without the trace"
    );
}

/// A trace, waveforms or plot written to standard output would mix with the report there (`--json`'s
/// object or the table): refused before the run, nothing written. Before, `--pcap /dev/stdout --json` ran
/// and wrote the capture and the JSON into one stream.
#[cfg(target_os = "linux")]
#[test]
fn an_output_to_standard_output_is_refused() {
    let run = ["allreduce", "--topology", "mesh2", "--max", "1K"];
    for (option, path) in [
        ("--pcap", "/dev/stdout"),
        ("--vcd", "/dev/fd/1"),
        ("--plot", "/proc/self/fd/1"),
        // Another name of it, standard output being a pipe here.
        ("--pcap", "/dev/../dev/stdout"),
    ] {
        for json in [&["--json"][..], &[]] {
            let out = sim(&[&run[..], &[option, path], json].concat());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{option} {path} {json:?}: {stderr}");
            assert!(
                out.stdout.is_empty(),
                "{option} {path} {json:?} wrote standard output"
            );
            assert!(
                stderr.contains(&format!("{option} names standard output")),
                "{stderr}"
            );
        }
    }
    // Standard output sent to the very file a trace names.
    let file = std::env::temp_dir().join(format!("linkctl-sim-stdout-{}.pcap", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_linkctl"))
        .args(["sim"])
        .args(run)
        .args(["--json", "--pcap", file.to_str().unwrap()])
        .stdout(std::fs::File::create(&file).unwrap())
        .output()
        .unwrap();
    let written = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(written.is_empty(), "{} bytes written", written.len());
    // Devices take any number of writers: a trace may go to /dev/null with the report.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_linkctl"))
        .args(["sim"])
        .args(run)
        .args(["--pcap", "/dev/null"])
        .stdout(std::fs::File::create("/dev/null").unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Standard error takes the errors and the progress line: a trace, waveforms or plot written there would
/// mix with them (a run that fails writes its error over the trace's first bytes when standard error is a
/// file), as with standard output: refused before the run. Before, `--pcap /dev/stderr` ran and wrote the
/// capture into standard error.
#[cfg(target_os = "linux")]
#[test]
fn an_output_to_standard_error_is_refused() {
    let run = ["allreduce", "--topology", "mesh2", "--max", "1K"];
    for (option, path) in [
        ("--pcap", "/dev/stderr"),
        ("--vcd", "/dev/fd/2"),
        ("--plot", "/proc/self/fd/2"),
        ("--vcd", "/dev/../dev/stderr"),
    ] {
        let out = sim(&[&run[..], &[option, path]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{option} {path}: {stderr}");
        assert!(out.stdout.is_empty(), "{option} {path} wrote standard output");
        assert!(
            stderr.starts_with(&format!(
                "linkctl: error: {option} names standard error, where errors and progress go"
            )),
            "{stderr}"
        );
    }
    // Standard error sent to the very file the waveforms name.
    let file = std::env::temp_dir().join(format!("linkctl-sim-stderr-{}.vcd", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_linkctl"))
        .args(["sim"])
        .args(run)
        .args(["--vcd", file.to_str().unwrap()])
        .stderr(std::fs::File::create(&file).unwrap())
        .output()
        .unwrap();
    let written = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        written.starts_with("linkctl: error: --vcd names standard error"),
        "{written}"
    );
}

#[test]
fn fat_trees_of_any_size_in_whole_leaves_verify() {
    for gpus in [32, 48] {
        let topology = format!("fat-tree-{gpus}");
        let v = json(&[
            "allreduce",
            "--topology",
            &topology,
            "--min",
            "64K",
            "--max",
            "64K",
        ]);
        assert_eq!(v["verified"], true, "{topology}");
        assert_eq!(v["gpus"], gpus, "{topology}");
    }
}

/// Errors in the words that fit them: a count of GPUs on a fabric of two, a load of 0.
#[test]
fn errors_say_what_is_allowed() {
    for (args, says) in [
        (
            &["allreduce", "--topology", "mesh2", "--gpus", "3"][..],
            "--gpus 3: expected 2 (mesh2 has 2 GPUs)",
        ),
        (
            &["allreduce", "--background", "uniform:0"],
            "above 0 and at most 1, not 0",
        ),
        // A bad time's error names the option it came from.
        (
            &["allreduce", "--fail-switch", "nvswitch1@soon"],
            "--fail-switch: bad time \"soon\"",
        ),
        (
            &["allreduce", "--drain-switch", "nvswitch1@soon"],
            "--drain-switch: bad time \"soon\"",
        ),
        (
            &["allreduce", "--drain-switch", "gpu0@1us"],
            "--drain-switch: gpu0 is not a switch",
        ),
        (
            &["allreduce", "--fail-link", "gpu0:nvswitch1@x"],
            "--fail-link: bad time \"x\"",
        ),
        // A bad node's error names the option it came from.
        (
            &["allreduce", "--gpus", "gpu0,gpu9"],
            "--gpus: dgx-h100 has no node \"gpu9\"",
        ),
        (
            &[
                "allreduce",
                "--background",
                "uniform:0.1",
                "--background-gpus",
                "gpu9,gpu0",
            ],
            "--background-gpus: dgx-h100 has no node \"gpu9\"",
        ),
        (
            &["allreduce", "--fail-link", "gpu9:nvswitch0@1us"],
            "--fail-link: dgx-h100 has no node \"gpu9\"",
        ),
        (
            &["allreduce", "--degrade-link", "gpu0:gpu1@1us"],
            "--degrade-link: dgx-h100 has no link between gpu0 and gpu1",
        ),
        (
            &["allreduce", "--fail-port", "gpu0:nvswitch0@1us"],
            "--fail-port: gpu0 is not a switch",
        ),
        (
            &["traffic", "--fail-link", "gpu0:nvswitch9@1us"],
            "--fail-link: dgx-h100 has no node \"nvswitch9\"",
        ),
    ] {
        let out = sim(args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A fault on a node of the topology that `--gpus` leaves out of the run is refused saying so, and what
/// to do: the simulator, which sees only the fabric the run keeps, had said "dgx-h100[gpu0,gpu1,gpu2,gpu3]
/// has no node "gpu7"", as if the name were misspelt. A GPU left out, and a switch only such GPUs link
/// to, by every fault option, in `sim` and `sim traffic`; a name the topology lacks is said as before.
#[test]
fn a_fault_on_a_node_gpus_leaves_out_says_so() {
    let stars = common::two_stars("left-out.toml", 2, 1, 0);
    let gpu7 = "gpu7 is in dgx-h100 but --gpus leaves it out of the run: add it to --gpus, or name a node \
                the run keeps";
    let bsw0 = "bsw0 is in two-stars but --gpus leaves it out of the run (it links only GPUs left out): add \
                a GPU it links to --gpus, or name a node the run keeps";
    let cases: [(&[&str], &str, &str); 8] = [
        (&["--fail-link", "gpu7:nvswitch0@1us"], "--fail-link", gpu7),
        (&["--drain-switch", "bsw0@1us"], "--drain-switch", bsw0),
        (&["--degrade-link", "nvswitch0:gpu7@1us"], "--degrade-link", gpu7),
        (&["--fail-port", "nvswitch0:gpu7@1us"], "--fail-port", gpu7),
        (
            &[
                "--fail-link",
                "gpu0:nvswitch0@1us",
                "--repair-link",
                "gpu7:nvswitch0@2us",
            ],
            "--repair-link",
            gpu7,
        ),
        (&["--fail-switch", "bsw0@1us"], "--fail-switch", bsw0),
        (
            &["--fail-switch", "asw0@1us", "--repair-switch", "bsw0@2us"],
            "--repair-switch",
            bsw0,
        ),
        (
            &["--fail-link", "gpu9:nvswitch0@1us"],
            "--fail-link",
            "dgx-h100 has no node \"gpu9\"",
        ),
    ];
    for (faults, option, says) in cases {
        let gpus: &[&str] = if says.contains("bsw0") {
            &["--topology", &stars, "--gpus", "a0,a1"]
        } else {
            &["--gpus", "gpu0..gpu3"]
        };
        for command in [&["allreduce", "--max", "1M"][..], &["traffic", "--load", "0.1"]] {
            let args = [command, gpus, faults].concat();
            let out = sim(&args);
            let err = String::from_utf8(out.stderr).unwrap();
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(
                err.contains(&format!("error: {option}: {says}")),
                "{args:?}: {err}"
            );
        }
    }
}

/// A fault due after the sweep has ended is said not to have happened, not left to look as if it had.
#[test]
fn faults_due_after_the_sweep_are_said_not_to_have_happened() {
    let args = [
        "alltoall",
        "--max",
        "4K",
        "--fail-link",
        "gpu0:nvswitch1@1s",
        "--degrade-link",
    ];
    let out = sim(&[&args[..], &["gpu0:nvswitch0@100ns"]].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 ganged link(s) lost"), "{text}");
    assert!(
        text.contains("): 1 of the faults was due after that and did not happen"),
        "{text}"
    );
    let v = json(&[&args[..], &["gpu0:nvswitch0@100ns"]].concat());
    assert_eq!(
        (
            v["faults_after_end"].as_u64(),
            v["failover"]["links_failed"].as_u64()
        ),
        (Some(1), Some(0))
    );
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for args in [
        &["allreduce", "--topology", "no-such-fabric"][..],
        &["allreduce", "--min", "1Q"],
        &["allreduce", "--min", "64K", "--max", "1K"],
        &["allreduce", "--min", "3", "--max", "3"],
        &["allreduce", "--algo", "bogus"],
        &["allreduce", "--fail-link", "gpu0:gpu9@1us"],
        &["allreduce", "--fail-link", "gpu0:nvswitch1"],
        &["allreduce", "--fail-port", "gpu0:nvswitch1@1us"],
        &["allreduce", "--degrade-link", "gpu0:nvswitch1"],
        &["allreduce", "--degrade-link", "gpu0:gpu1@1us"],
        &["allreduce", "--replan-delay", "10us"],
        &["allreduce", "--repair-link", "gpu0:nvswitch1@1us"],
        &["allreduce", "--repair-switch", "nvswitch1@1us"],
        &["allreduce", "--fail-switch", "nvswitch1"],
        &["allreduce", "--fail-switch", "@1us"],
        &["allreduce", "--fail-switch", "gpu0@1us"],
        &["allreduce", "--fail-switch", "nvswitch9@1us"],
        &["allreduce", "--drain-switch", "nvswitch1"],
        &["allreduce", "--drain-switch", "gpu0@1us"],
        &["allreduce", "--drain-switch", "nvswitch9@1us"],
        &[
            "allreduce",
            "--fail-link",
            "gpu0:nvswitch1@1us",
            "--repair-link",
            "gpu0:nvswitch1",
        ],
        &[
            "allreduce",
            "--fail-link",
            "gpu0:nvswitch1@1us",
            "--repair-link",
            "gpu0:gpu1@2us",
        ],
        &["allreduce", "--background", "bogus:0.3"],
        &["allreduce", "--background", "uniform"],
        &["allreduce", "--background", "uniform:1.5"],
        &["allreduce", "--background-spread", "flow"],
        &[
            "allreduce",
            "--background",
            "uniform:0.2",
            "--background-spread",
            "sideways",
        ],
        &[
            "allreduce",
            "--fail-link",
            "gpu0:nvswitch1@1us",
            "--replan-delay",
            "10",
        ],
        &[
            "allreduce",
            "--fail-link",
            "gpu0:nvswitch1@1us",
            "--replan-delay",
            "10s",
        ],
        &["allgather", "--algo", "tree"],
        &["allreduce", "--algo", "switch-reduce", "--topology", "pcie8"],
        &["allreduce", "--ber", "2"],
        &["allreduce", "--topology", "fat-tree-40"],
        &["allreduce", "--topology", "fat-tree-2048"],
        &["allreduce", "--gpus", "1"],
        &["allreduce", "--gpus", "9"],
        &["allreduce", "--gpus", "gpu0"],
        &["allreduce", "--gpus", "gpu0,gpu0"],
        &["allreduce", "--gpus", "gpu0,nvswitch0"],
        &["allreduce", "--gpus", "gpu0,gpu99"],
        &[
            "allreduce",
            "--gpus",
            "gpu0,gpu1",
            "--fail-link",
            "gpu5:nvswitch0@1us",
        ],
        &["allreduce", "--gpus", "gpu3..gpu1"],
        &["allreduce", "--gpus", "gpu0..nvswitch0"],
        &["allreduce", "--background-gpus", "rest"],
        &[
            "allreduce",
            "--gpus",
            "8",
            "--background",
            "uniform:0.1",
            "--background-gpus",
            "rest",
        ],
        &[
            "allreduce",
            "--gpus",
            "4",
            "--background",
            "uniform:0.1",
            "--background-gpus",
            "gpu7",
        ],
        &[
            "allreduce",
            "--algo",
            "switch-reduce",
            "--gpus",
            "4",
            "--background",
            "uniform:0.1",
            "--background-gpus",
            "rest",
        ],
        &["allreduce", "--fail-link", "gpu0:nvswitch1@1001s"],
        &["allreduce", "--fail-link", "gpu0:nvswitch1@-1us"],
        &["allreduce", "--buffsize", "3"],
        &["allreduce", "--buffsize", "128M"],
        // A limit without its file would be silently ignored; two outputs in one file overwrite each other.
        &["allreduce", "--max", "4K", "--pcap-limit", "5"],
        &["allreduce", "--max", "4K", "--vcd-limit", "5"],
        &["allreduce", "--max", "4K", "--trace-nodes", "gpu0"],
        &[
            "allreduce",
            "--max",
            "4K",
            "--pcap",
            "same.out",
            "--vcd",
            "same.out",
        ],
        &[
            "allreduce",
            "--max",
            "4K",
            "--vcd",
            "same.out",
            "--plot",
            "./same.out",
        ],
        &["allreduce", "--min", "600G", "--max", "600G"],
        &[
            "allreduce",
            "--algo=tree",
            "--buffsize=1K",
            "--min=16G",
            "--max=16G",
        ],
    ] {
        common::assert_refused(&["sim"], args);
    }
}

#[test]
fn a_bad_fault_is_refused_with_an_example_that_is_taken() {
    for (flag, form) in [
        ("--fail-link", "A:B@TIME"),
        ("--degrade-link", "A:B@TIME"),
        ("--fail-port", "SWITCH:PEER@TIME"),
    ] {
        // No time: the error says what the flag expects, with an example.
        let out = sim(&["allreduce", "--max", "1K", flag, "nvswitch1:gpu0"]);
        assert!(!out.status.success(), "{flag}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains(&format!("expected {form}, e.g. ")),
            "{flag}: {stderr}"
        );
        let example = stderr.trim_end().rsplit("e.g. ").next().unwrap();
        let out = sim(&["allreduce", "--max", "1K", flag, example]);
        assert!(
            out.status.success(),
            "{flag} {example}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn refusals_name_the_range_without_contradicting_it() {
    for (args, expected) in [
        (
            &["allreduce", "--ber", "0.002"][..],
            "--ber must be from 0 to 0.001, not 0.002",
        ),
        (
            &["allreduce", "--min", "0"],
            "bad size \"0\": must be at least 1 byte",
        ),
        // 32 lies between the two, but the sweep tries 31 only (it had said sizes start at 32).
        (
            &["allgather", "--min", "31", "--max", "33"],
            "its largest size, 31 bytes, is below the least this collective moves, 32 bytes",
        ),
        // 16 GiB itself is refused with faults (it had said messages "are limited to 16 GiB").
        (
            &[
                "allreduce",
                "--min",
                "16G",
                "--max",
                "16G",
                "--fail-link",
                "gpu0:nvswitch1@20us",
            ],
            "with faults, a message must be below 16 GiB, fewer than 2^27 packets (a packet returned to its \
             source carries its number in 27 bits), and the sweep's largest, 17179869184 B, takes 134217728",
        ),
    ] {
        let out = sim(args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_fabric_that_would_need_more_than_16_gib_is_refused() {
    // 16 TB/s for a second of latency: each direction's wire would hold 16 TB. At 8 GB/s, a second holds
    // 8 GB, but in bursts of 10 units in buffers of 64: about 100 GB (its rate times its latency had let
    // it through).
    let path = std::env::temp_dir().join(format!("linkctl-sim-huge-{}.toml", std::process::id()));
    for (gbps, needs) in [("16000.0", "30500.8 GiB"), ("8.0", "97.6 GiB")] {
        std::fs::write(
            &path,
            format!(
                "[[node]]\nname = \"a\"\nkind = \"gpu\"\n[[node]]\nname = \"b\"\nkind = \"gpu\"\n\
                 [[link]]\na = \"a\"\nb = \"b\"\ngbps = {gbps}\nlatency_ns = 1e9\n"
            ),
        )
        .unwrap();
        let topology = path.to_str().unwrap();
        common::assert_refused(&["sim"], &["allreduce", "--topology", topology]);
        let out = sim(&["allreduce", "--topology", topology]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("would need {needs}")) && stderr.contains("16 GiB"),
            "{stderr}"
        );
    }
    // Slower still, an idle link's Updates go out one to a burst, a microsecond apart: nine links of
    // 0.016 GB/s and a second take 17.6 GiB (counted by the burst, 1.8 GiB had let them through).
    let mut star = String::from("[[node]]\nname = \"sw\"\nkind = \"switch\"\n");
    for g in 0..9 {
        star += &format!("[[node]]\nname = \"g{g}\"\nkind = \"gpu\"\n");
    }
    for g in 0..9 {
        star += &format!("[[link]]\na = \"g{g}\"\nb = \"sw\"\ngbps = 0.016\nlatency_ns = 1e9\n");
    }
    std::fs::write(&path, star).unwrap();
    let out = sim(&["allreduce", "--topology", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("would need 17.6 GiB"), "{stderr}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn the_buffer_per_connection_can_be_set_as_nccl_buffsize() {
    for algo in ["ring", "tree"] {
        let mut busbw = Vec::new();
        for buffsize in ["1K", "4M"] {
            let args = [
                "allreduce",
                "--algo",
                algo,
                "--min",
                "1M",
                "--max",
                "1M",
                "--buffsize",
                buffsize,
            ];
            let out = json(&args);
            assert_eq!(out["verified"], true, "{algo} {buffsize}");
            let expected = if buffsize == "1K" { 1024 } else { 4 << 20 };
            assert_eq!(out["buffsize"], expected, "{algo} {buffsize}");
            busbw.push(out["rows"][0]["busbw"].as_f64().unwrap());
        }
        // A buffer of a few packets holds every sender back to what a round trip of room allows.
        assert!(busbw[0] < busbw[1] * 0.9, "{algo}: {busbw:?}");
    }
    // 256 GPUs whose ring queues could each hold 64 MiB: 22 GiB with the fabric, refused before running.
    let args = [
        "allreduce",
        "--topology",
        "fat-tree-256",
        "--min",
        "1K",
        "--max",
        "1K",
        "--buffsize",
        "64M",
    ];
    common::assert_refused_saying(&["sim"], &args, "smaller --buffsize");
    // The algorithms that keep no buffer per connection refuse a size for it, which would do nothing.
    common::assert_refused(
        &["sim"],
        &["allreduce", "--algo", "switch-reduce", "--buffsize", "1K"],
    );
    common::assert_refused(&["sim"], &["alltoall", "--buffsize", "1K"]);
    let v = json(&["alltoall", "--max", "1K"]);
    assert!(v["buffsize"].is_null(), "{v}");
    let table = sim(&["allreduce", "--min", "1K", "--max", "1K", "--buffsize", "64K"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("NCCL_BUFFSIZE): 65536 B"));
}

#[test]
fn a_collective_runs_on_some_of_the_gpus_as_cuda_visible_devices_would_have_it() {
    let v = json(&["allreduce", "--gpus", "4", "--min", "1M", "--max", "1M"]);
    assert_eq!(
        (v["gpus"].as_u64(), v["verified"].as_bool()),
        (Some(4), Some(true))
    );
    assert_eq!(v["topology"], "dgx-h100[gpu0,gpu1,gpu2,gpu3]");
    // Each GPU sends 2(n-1)/n of the buffer: 3/2 MiB in 128-byte packets, one switch hop each.
    assert_eq!(v["packets"], 4 * 3 * 4096);
    let named = json(&[
        "allreduce",
        "--gpus",
        "gpu6, gpu0,gpu2,gpu4",
        "--min",
        "1M",
        "--max",
        "1M",
    ]);
    assert_eq!(named["topology"], "dgx-h100[gpu0,gpu2,gpu4,gpu6]");
    assert_eq!(named["verified"], true);
    // Every GPU, in any order, is the fabric itself (it had been named as a part of itself).
    for all in ["8", "gpu7,gpu0..gpu6"] {
        let v = json(&["allreduce", "--gpus", all, "--max", "1K"]);
        assert_eq!(v["topology"], "dgx-h100", "{all}");
    }
    // A fabric in two partitions runs a collective on one partition's GPUs, not on all of them.
    let partitioned = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/corpus/topology_toml/partitions.toml"
    );
    common::assert_refused(&["sim"], &["allreduce", "--topology", partitioned, "--max", "4K"]);
    let v = json(&[
        "allreduce",
        "--topology",
        partitioned,
        "--gpus",
        "g1,g2",
        "--max",
        "4K",
    ]);
    assert_eq!(v["verified"], true);
}

#[test]
fn traffic_can_run_on_other_gpus_than_the_collective_as_another_job() {
    let alone = json(&["allreduce", "--gpus", "gpu0..gpu3", "--min", "1M", "--max", "1M"]);
    let args = [
        "allreduce",
        "--gpus",
        "gpu0..gpu3",
        "--background",
        "uniform:0.3",
        "--background-gpus",
        "rest",
        "--min",
        "1M",
        "--max",
        "1M",
    ];
    let v = json(&args);
    assert_eq!(
        (v["gpus"].as_u64(), v["verified"].as_bool()),
        (Some(4), Some(true))
    );
    assert_eq!(
        v["topology"], "dgx-h100",
        "the whole fabric, shared by the two jobs"
    );
    assert_eq!(
        v["collective_gpus"],
        serde_json::json!(["gpu0", "gpu1", "gpu2", "gpu3"])
    );
    let b = &v["background"];
    assert_eq!(b["gpus"], serde_json::json!(["gpu4", "gpu5", "gpu6", "gpu7"]));
    assert_delivered(b);
    // On disjoint GPUs of NVSwitches the jobs share no link: the collective's time is its own.
    assert_eq!(v["rows"][0]["time_us"], alone["rows"][0]["time_us"]);
    let text = String::from_utf8(sim(&args).stdout).unwrap();
    assert!(
        text.contains("on gpu4,gpu5,gpu6,gpu7 beside the collective")
            && text.contains("(4 GPUs: gpu0,gpu1,gpu2,gpu3)"),
        "{text}"
    );
    // The other job's GPUs in the order named: the first is the hot spot.
    let named = json(&[
        "allreduce",
        "--gpus",
        "4",
        "--background",
        "hotspot:0.2",
        "--background-gpus",
        "gpu7,gpu4..gpu6",
        "--max",
        "4K",
    ]);
    assert_eq!(
        named["background"]["gpus"],
        serde_json::json!(["gpu7", "gpu4", "gpu5", "gpu6"])
    );
    // Two jobs in two partitions, each within its own: isolated by the switches, both verified.
    let partitioned = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/corpus/topology_toml/partitions.toml"
    );
    let mut two = vec![
        "allreduce",
        "--topology",
        partitioned,
        "--gpus",
        "g1,g2",
        "--max",
        "4K",
        "--background",
        "uniform:0.3",
        "--background-gpus",
        "rest",
    ];
    let v = json(&two);
    assert_eq!(
        (v["verified"].as_bool(), &v["background"]["gpus"]),
        (Some(true), &serde_json::json!(["g0", "g3"]))
    );
    assert_eq!(v["switches"]["partition_drops"], 0, "{}", v["switches"]);
    // Traffic across the two partitions would be dropped: refused.
    *two.last_mut().unwrap() = "g0,g1";
    common::assert_refused(&["sim"], &two);
}

/// Background traffic too light to send a packet in the run has no latency, not one of 0 ns, and its
/// load is shown, not rounded to 0.00.
#[test]
fn the_jobs_gpus_are_always_listed_by_name() {
    let four = ["gpu0", "gpu1", "gpu2", "gpu3"];
    let eight = ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"];
    // A script need not know the fabric to learn whose GPUs ran: the lists are never null.
    for (args, collective, traffic) in [
        (&["--gpus", "gpu0..gpu3"][..], &four[..], Some(&four[..])),
        (&["--background-gpus", "gpu0..gpu3"], &eight, Some(&four)),
        (
            &["--gpus", "4", "--background-gpus", "gpu0..gpu3"],
            &four,
            Some(&four),
        ),
        (&[], &eight, None),
    ] {
        let background = [&["--background", "uniform:0.1"][..], args].concat();
        let v = json(
            &[
                &["allreduce", "--max", "4K"][..],
                if traffic.is_some() { &background } else { args },
            ]
            .concat(),
        );
        assert_eq!(v["collective_gpus"], json!(collective), "{args:?}");
        if let Some(traffic) = traffic {
            assert_eq!(v["background"]["gpus"], json!(traffic), "{args:?}");
        }
    }
    // The table names the collective's GPUs only when they are some of the fabric's, and counts them
    // past eight.
    let header = |args: &[&str]| {
        let out = sim(&[
            &["allreduce", "--max", "4K", "--background", "uniform:0.01"][..],
            args,
        ]
        .concat());
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines().next().unwrap_or_default().to_string()
    };
    let all = header(&["--background-gpus", "gpu0..gpu3"]);
    assert!(all.contains("(8 GPUs)"), "{all}");
    let many = header(&[
        "--topology",
        "fat-tree-32",
        "--gpus",
        "9",
        "--background-gpus",
        "rest",
    ]);
    assert!(many.contains("(9 of its 32 GPUs)"), "{many}");
}

#[test]
fn background_traffic_that_sends_nothing_has_no_latency() {
    let args = ["allreduce", "--max", "4K", "--background", "uniform:1e-9"];
    let text = String::from_utf8(sim(&args).stdout).unwrap();
    assert!(
        text.contains("at a load of 1.00e-9 (links spread) beside the collective: 0.0 of 0.0 GB/s per GPU accepted; no packet's latency measured;"),
        "{text}"
    );
    let latency = &json(&args)["background"]["latency_ns"];
    assert_eq!(latency["packets"], 0);
    assert!(
        ["mean", "p50", "p99", "max"].iter().all(|k| latency[k].is_null()),
        "{latency}"
    );
}

/// A trunk whose round trip holds more than its credits let a channel have in flight is named, with the
/// most it can carry (64 KiB per 2 us round trip at 1 us of latency: 32.8 GB/s), and what it carries
/// stays under that; the built-in fabrics have none.
#[test]
fn trunks_paced_by_their_credits_are_named() {
    let path = std::env::temp_dir().join(format!("linkctl-sim-slow-{}.toml", std::process::id()));
    let mut text =
        String::from("node = [{ name = \"g0\", kind = \"gpu\" }, { name = \"g1\", kind = \"gpu\" }, ");
    text += "{ name = \"sw\", kind = \"switch\" }]\nlink = [";
    text += "{ a = \"g0\", b = \"sw\", count = 4, gbps = 25.0, latency_ns = 1000 }, ";
    text += "{ a = \"g1\", b = \"sw\", count = 4, gbps = 25.0, latency_ns = 100 }]\n";
    std::fs::write(&path, text).unwrap();
    let args = [
        "alltoall",
        "--topology",
        path.to_str().unwrap(),
        "--min",
        "1M",
        "--max",
        "1M",
    ];
    let out = String::from_utf8(sim(&args).stdout).unwrap();
    assert!(
        out.contains("# Note: trunk g0 - sw (100.0 GB/s, 1000 ns): a round trip holds more than a channel's credits and replay buffer allow in flight, so it carries at most about 32.8 GB/s\n"),
        "{out}"
    );
    assert_eq!(out.matches("# Note: trunk").count(), 1, "{out}");
    let v = json(&args);
    std::fs::remove_file(&path).unwrap();
    let limited = v["window_limited"].as_array().unwrap();
    assert_eq!(
        (limited.len(), &limited[0]["a"], &limited[0]["b"]),
        (1, &json!("g0"), &json!("sw"))
    );
    let most = limited[0]["most_gbps"].as_f64().unwrap();
    assert!((most - 32.768).abs() < 1e-9, "{most}");
    // Each GPU sends half its buffer to the other: what crosses the slow trunk a direction, per second.
    assert!(v["rows"][0]["busbw"].as_f64().unwrap() < most, "{v}");
    // Credit that runs short shows as that pace, not as sends refused: the simulator asks a link first
    // (README, `credit_stalls`).
    assert_eq!(v["links"]["credit_stalls"], 0, "{v}");
    for topology in ["dgx-h100", "fat-tree-32", "pcie8"] {
        let v = json(&["allreduce", "--topology", topology, "--max", "1K"]);
        assert_eq!(v["window_limited"], json!([]), "{topology}");
    }
}

/// A trace's pseudo-headers number the nodes of the fabric the run simulates, which `--gpus` makes anew
/// (gpu4 and gpu6 of DGX H100 become nodes 0 and 1): the report names them in that order, so that the
/// indices can be read (spec section 7). Nothing had said which node an index was.
#[test]
fn a_trace_names_the_nodes_its_pseudo_headers_number() {
    let path = std::env::temp_dir().join(format!("linkctl-trace-nodes-{}.pcap", std::process::id()));
    let file = path.to_str().unwrap();
    let args = [
        "allgather",
        "--gpus",
        "gpu4,gpu6",
        "--min",
        "1K",
        "--max",
        "1K",
        "--pcap",
        file,
    ];
    let v = json(&args);
    let expected = ["gpu4", "gpu6", "nvswitch0", "nvswitch1", "nvswitch2", "nvswitch3"];
    assert_eq!(v["trace"]["nodes"], json!(expected));
    // Each Ident flit comes from the node its pseudo-header names as the sender.
    let data = std::fs::read(&path).unwrap();
    let mut at = 24;
    let mut idents = 0;
    while at < data.len() {
        let len = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        let record = &data[at + 16..at + 16 + len];
        let flit: [u8; 16] = record[12..].try_into().unwrap_or([0; 16]);
        if let Ok(ident) = link_dl::flit::IdentFlit::parse(&flit) {
            let sender = usize::from(u16::from_be_bytes([record[4], record[5]]));
            assert_eq!(ident.node, fabric_sim::discover::node_id(expected[sender]));
            idents += 1;
        }
        at += 16 + len;
    }
    assert_eq!(idents, 2 * 8, "one per direction of 8 trunks");
    let text = String::from_utf8(sim(&args).stdout).unwrap();
    assert!(
        text.contains(
            "\n# Trace nodes: 0 gpu4, 1 gpu6, 2 nvswitch0, 3 nvswitch1, 4 nvswitch2, 5 nvswitch3\n"
        ),
        "{text}"
    );
    std::fs::remove_file(&path).unwrap();
}

/// The JSON's rows have every column of the table: a broadcast's root and each collective's reduction
/// had been in the text only.
#[test]
fn json_rows_have_the_tables_redop_and_root() {
    for (collective, redop, root) in [
        ("allreduce", "sum", -1),
        ("reducescatter", "sum", -1),
        ("allgather", "none", -1),
        ("alltoall", "none", -1),
        ("broadcast", "none", 0),
    ] {
        let args = [collective, "--topology", "mesh4", "--min", "1K", "--max", "2K"];
        let v = json(&args);
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{collective}");
        for row in rows {
            assert_eq!(
                (&row["redop"], &row["root"]),
                (&json!(redop), &json!(root)),
                "{collective}"
            );
        }
        let text = String::from_utf8(sim(&args).stdout).unwrap();
        let first = text.lines().find(|l| !l.starts_with('#')).unwrap();
        let columns: Vec<&str> = first.split_whitespace().collect();
        assert_eq!(
            columns[3..5],
            [redop, &root.to_string()[..]],
            "{collective}: {first}"
        );
    }
}

#[test]
fn trunks_shows_the_busiest_each_way_and_a_failed_one_down() {
    let args = ["allreduce", "--min", "1M", "--max", "1M", "--trunks", "3"];
    let out = sim(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    let header = text
        .lines()
        .position(|l| l.starts_with("# Trunks, the busiest 3 of 32 (each way"))
        .unwrap_or_else(|| panic!("{text}"));
    let rows: Vec<&str> = text
        .lines()
        .skip(header + 1)
        .take_while(|l| l.starts_with("#   "))
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(
        rows.iter().all(|r| r.contains("->nvswitch") && r.contains("% (")),
        "{rows:?}"
    );

    let v = json(&args);
    let busiest = v["trunks"]["busiest"].as_array().unwrap();
    assert_eq!((busiest.len(), v["trunks"]["of"].as_u64()), (3, Some(32)));
    let busier = |t: &Value| {
        let d = t["directions"].as_array().unwrap();
        d[0]["utilization"]
            .as_f64()
            .unwrap()
            .max(d[1]["utilization"].as_f64().unwrap())
    };
    assert!(
        busiest.windows(2).all(|w| busier(&w[0]) >= busier(&w[1])),
        "{busiest:?}"
    );
    assert!(
        busiest.iter().all(|t| busier(t) > 0.0 && busier(t) <= 1.0),
        "{busiest:?}"
    );
    assert_eq!(json(&["allreduce", "--max", "64K"])["trunks"], Value::Null);
    // One size: its row's trunks are the sweep's; without --trunks, a row has none.
    assert_eq!(v["rows"][0]["trunks"], v["trunks"]);
    assert_eq!(
        json(&["allreduce", "--max", "64K"])["rows"][0]["trunks"],
        Value::Null
    );

    // A trunk that failed is shown down, and a failed trunk carries less than a live one.
    let failed = sim(&[
        "allreduce",
        "--min",
        "1M",
        "--max",
        "1M",
        "--trunks",
        "32",
        "--fail-link",
        "gpu0:nvswitch1@2us",
    ]);
    let text = String::from_utf8(failed.stdout).unwrap();
    let down: Vec<&str> = text.lines().filter(|l| l.ends_with(", down")).collect();
    assert_eq!(down.len(), 1, "{text}");
    assert!(
        down[0].contains("gpu0->nvswitch1") && down[0].contains("nvswitch1->gpu0"),
        "{text}"
    );
    common::assert_refused(&["sim", "allreduce"], &["--trunks", "-1"]);
}

/// `s` with every number (digits, with a decimal point) as `N`, without the spaces it ends in: a line's
/// words.
fn words(s: &str) -> String {
    let mut out = String::new();
    for c in s.trim_end().chars() {
        if c.is_ascii_digit() || (c == '.' && out.ends_with('N')) {
            if !out.ends_with('N') {
                out.push('N');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The README's example of the main job's output has the comment lines `sim allreduce` prints, in their
/// order and words (its numbers are a 64 MiB sweep's; they are not checked here).
#[test]
fn the_readme_shows_the_lines_sim_prints() {
    let readme = include_str!("../../README.md");
    let example = readme
        .split("```text\n# all_reduce on dgx-h100")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README's example output");
    let shown: Vec<String> = format!("# all_reduce on dgx-h100{example}")
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(words)
        .collect();
    let out = sim(&["allreduce", "--max", "4K"]);
    assert!(out.status.success());
    let printed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(words)
        .collect();
    assert_eq!(shown, printed);
}

/// A size that stopped the run has no bus bandwidth (its row says 0, `#wrong` 1, and the average leaves
/// it out): the plot draws the sizes that completed, not a fall to 0 GB/s at the size that stopped.
#[test]
fn the_plot_leaves_out_a_size_that_stopped_the_run() {
    let path = std::env::temp_dir().join(format!("linkctl-sim-stopped-{}.svg", std::process::id()));
    let out = sim(&[
        "allreduce",
        "--topology",
        "mesh2",
        "--max",
        "64K",
        "--fail-link",
        "gpu0:gpu1@1us",
        "--plot",
        path.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    // 1, 2 and 4 KiB completed; 8 KiB was cut off by the failure, which left the GPUs no way to each other.
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert!(
        rows[3].trim_start().starts_with("8192") && rows[3].ends_with(" 1"),
        "{text}"
    );
    let svg = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let line = svg.split("<polyline").nth(1).unwrap();
    let points = line.split("points=\"").nth(1).unwrap();
    let points = &points[..points.find('"').unwrap()];
    assert_eq!(points.split_whitespace().count(), 3, "{points}");
    assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
}

/// The same fault twice at the same time is refused, in `sim` and `sim traffic`, as `fabric` refuses a link
/// failed twice (it was taken, the second counted as a fault without effect), whichever end of a link is
/// named first and however the time is written. A link lost twice is two links of the trunk, and a link
/// failed at two times is two faults: both are still taken (they reach the check of --replan-delay).
#[test]
fn the_same_fault_twice_at_the_same_time_is_refused() {
    for (args, says) in [
        (
            &[
                "allreduce",
                "--fail-link",
                "gpu0:nvswitch1@5us",
                "--fail-link",
                "nvswitch1:gpu0@5000ns",
            ][..],
            "--fail-link names nvswitch1:gpu0@5us twice",
        ),
        (
            &[
                "traffic",
                "--drain-switch",
                "nvswitch1@1us",
                "--drain-switch",
                "nvswitch1@1us",
            ],
            "--drain-switch names nvswitch1@1us twice",
        ),
        (
            &[
                "traffic",
                "--fail-port",
                "nvswitch2:gpu5@3us",
                "--fail-port",
                "nvswitch2:gpu5@3us",
            ],
            "--fail-port names nvswitch2:gpu5@3us twice",
        ),
        (
            &[
                "allreduce",
                "--fail-switch",
                "nvswitch1@2us",
                "--repair-switch",
                "nvswitch1@0.5ms",
                "--repair-switch",
                "nvswitch1@500us",
            ],
            "--repair-switch names nvswitch1@500us twice",
        ),
        (
            &[
                "allreduce",
                "--degrade-link",
                "gpu0:nvswitch0@1us",
                "--degrade-link",
                "gpu0:nvswitch0@1us",
                "--fail-link",
                "gpu1:nvswitch0@1us",
                "--fail-link",
                "gpu1:nvswitch0@2us",
                "--replan-delay",
                "soon",
            ],
            "--replan-delay: bad time \"soon\"",
        ),
    ] {
        let out = sim(args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("linkctl: error: {says}")),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// A switch drained twice: the footer and the JSON say the second drain found it draining, or out of
/// service once it was drained (both were counted as faults "without effect, their link already down").
#[test]
fn a_switch_drained_twice_is_said_to_be_draining_or_drained() {
    for (second, words, keys) in [
        (
            "nvswitch1@1.5us",
            "1 drain(s) without effect, their switch already draining",
            (1, 0),
        ),
        (
            "nvswitch1@4us",
            "1 drain(s) without effect, their switch already out of service (drained, or its links down)",
            (0, 1),
        ),
    ] {
        let args = [
            "allreduce",
            "--min",
            "1M",
            "--max",
            "1M",
            "--drain-switch",
            "nvswitch1@1us",
            "--drain-switch",
            second,
        ];
        let out = sim(&args);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{second}: {text}");
        let footer = text.lines().find(|l| l.starts_with("# Failover:")).unwrap();
        assert!(
            footer.ends_with(&format!("; 1 switch(es) drained; {words}")),
            "{footer}"
        );
        assert!(!footer.contains("already down"), "{footer}");
        let f = &json(&args)["failover"];
        assert_eq!(
            (
                &f["drains_already_draining"],
                &f["drains_already_down"],
                &f["faults_without_effect"]
            ),
            (&keys.0.into(), &keys.1.into(), &0.into()),
            "{second}: {f}"
        );
    }
}

/// Draining every switch plane of DGX H100: the fabric manager drains three and refuses the last (the
/// only path left), which the footer, a line of its own and the JSON say; the collective completes.
#[test]
fn a_drain_that_would_cut_the_fabric_is_refused_and_the_run_goes_on() {
    let mut args = vec!["allreduce", "--min", "1M", "--max", "1M"];
    for switch in ["nvswitch0@1us", "nvswitch1@1us", "nvswitch2@1us", "nvswitch3@1us"] {
        args.extend(["--drain-switch", switch]);
    }
    let out = sim(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    let footer = text.lines().find(|l| l.starts_with("# Failover:")).unwrap();
    assert!(
        footer.ends_with(
            "; 3 switch(es) drained; 1 drain(s) refused, their switch the only path between GPUs of a job \
             (kept in service)"
        ),
        "{footer}"
    );
    let refusal =
        "# the fabric manager refused to drain nvswitch3 at 1.000 us (it stays in service): routed \
                   around it, the collective's GPUs: no route from gpu";
    assert!(text.lines().any(|l| l.starts_with(refusal)), "{text}");
    let v = json(&args);
    assert_eq!(v["verified"], true, "{v}");
    let f = &v["failover"];
    assert_eq!(
        (&f["switches_drained"], &f["drains_refused"]),
        (&3.into(), &1.into()),
        "{f}"
    );
    let why = f["drain_refusals"][0].as_str().unwrap_or_default();
    assert!(why.starts_with(&refusal[2..]), "{f}");
}

#[test]
fn gpus_cabled_in_a_loop_run_a_ring_and_a_tree_is_told_to() {
    let ring6 = common::gpu_loop("sim-loop6.toml", 6);
    for collective in ["allreduce", "allgather", "reducescatter", "broadcast"] {
        let v = json(&[collective, "--topology", &ring6, "--min", "4K", "--max", "64K"]);
        assert_eq!(v["verified"], true, "{collective}: {v}");
    }
    let out = sim(&["allreduce", "--topology", &ring6, "--max", "4K", "--algo", "tree"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no route from fpga") && stderr.contains("`--algo ring` runs here"),
        "{stderr}"
    );
    // All-to-all sends between every pair: refused, with no word of the ring.
    let out = sim(&["alltoall", "--topology", &ring6, "--max", "4K"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1) && !stderr.contains("--algo ring"),
        "{stderr}"
    );
}

/// `--trace-nodes` keeps the trace and the waveforms to some nodes' links: a name the simulated fabric does
/// not have is refused before the run, with the names it has, and no file is made.
#[test]
fn a_trace_kept_to_unknown_nodes_is_refused() {
    let pcap = std::env::temp_dir().join(format!("linkctl-sim-nodes-{}.pcap", std::process::id()));
    let mesh2 = ["allreduce", "--topology", "mesh2", "--min", "1K", "--max", "1K"];
    common::assert_refused_saying(
        &["sim"],
        &[
            &mesh2[..],
            &[
                "--pcap",
                pcap.to_str().unwrap(),
                "--trace-nodes",
                "gpu0,nvswitch9",
            ],
        ]
        .concat(),
        "it is to keep node \"nvswitch9\"'s links, but the simulated fabric has no such node (it has \
         gpu0, gpu1)",
    );
    assert!(!pcap.exists());
}

/// `--pcap-received` traces the units as the receiving data links take them: on clean wires each
/// direction's packets are the ones sent, in order; with bit errors the trace frames them as the data
/// links do, a packet or control record with a bad CRC for each CRC error the links count, and the units
/// they discard to find a packet boundary again as records of their own (as many as they count).
#[test]
fn a_trace_as_received_frames_what_the_data_links_took() {
    use fabric_sim::trace::{read, Record, RECORD_DISCARDED, RECORD_PACKET};
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let run = |name: &str, extra: &[&str]| -> (Value, Vec<Record>) {
        let pcap = dir.join(format!("linkctl-sim-rx-{name}-{pid}.pcap"));
        let base = [
            "allreduce",
            "--topology",
            "dgx-h100",
            "--min",
            "64K",
            "--max",
            "64K",
        ];
        let v = json(&[&base[..], extra, &["--pcap", pcap.to_str().unwrap()]].concat());
        assert_eq!(v["verified"], true);
        let records = read(&std::fs::read(&pcap).unwrap()).unwrap();
        std::fs::remove_file(&pcap).unwrap();
        (v, records)
    };
    let packets = |records: &[Record], direction: (u16, u16, u16)| -> Vec<Vec<u8>> {
        (records.iter())
            .filter(|r| {
                let h = r.hop();
                r.pseudo_header[1] == RECORD_PACKET && (h.trunk, h.from.0, h.to.0) == direction
            })
            .map(|r| r.bytes.clone())
            .collect()
    };
    let (_, sent) = run("sent", &[]);
    let (_, received) = run("received", &["--pcap-received"]);
    let directions: std::collections::BTreeSet<(u16, u16, u16)> = (sent.iter())
        .map(|r| (r.hop().trunk, r.hop().from.0, r.hop().to.0))
        .collect();
    assert!(directions.len() >= 64, "{}", directions.len());
    for &direction in &directions {
        assert_eq!(
            packets(&received, direction),
            packets(&sent, direction),
            "{direction:?}"
        );
    }
    assert!(received.iter().all(|r| r.pseudo_header[1] != RECORD_DISCARDED));
    let (v, noisy) = run("noisy", &["--ber", "1e-6", "--pcap-received"]);
    let bad = (noisy.iter())
        .filter(|r| r.pseudo_header[1] != RECORD_DISCARDED)
        .filter(|r| link_dl::flit::check_packet_crc(&r.bytes).is_err())
        .count() as u64;
    let links = &v["links"];
    assert!(bad > 0, "{links}");
    assert_eq!(bad, links["crc_errors"].as_u64().unwrap(), "{links}");
    let discarded: u64 = (noisy.iter())
        .filter(|r| r.pseudo_header[1] == RECORD_DISCARDED)
        .map(|r| r.bytes.len() as u64 / 16)
        .sum();
    let (resync, malformed) = (
        links["resync_discards"].as_u64().unwrap(),
        links["malformed"].as_u64().unwrap(),
    );
    assert!(
        (resync..=resync + malformed).contains(&discarded),
        "{discarded}: {links}"
    );
    common::assert_refused_saying(&["sim"], &["allreduce", "--pcap-received"], "--pcap");
}
