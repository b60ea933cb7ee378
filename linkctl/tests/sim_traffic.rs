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
        text.starts_with("# hotspot traffic on dgx-h100, spread over links: 8 GPUs"),
        "{text}"
    );
    assert!(text.contains("# saturated from load 0.80"), "{text}");
    assert!(
        text.contains("every packet delivered once, with its data"),
        "{text}"
    );
}

#[test]
fn bad_input_is_refused() {
    for args in [
        &["--load", "0"][..],
        &["--load", "1.5"],
        &["--load", "x"],
        &["--pattern", "tornado"],
        &["--pattern", "hotspot", "--hotspot", "2"],
        &["--spread", "random"],
        &["--measure", "10"],
        &["--warmup", "-1us"],
        &["--ber", "1"],
        &["--topology", "nowhere"],
        &["--gpus", "1"],
    ] {
        common::assert_refused(CMD, args);
    }
}
