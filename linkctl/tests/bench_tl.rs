//! `linkctl bench tl` end to end: it runs, checks its own round trips, and reports every path; and the
//! sizes every `linkctl bench` takes.

mod common;

fn run(args: &[&str]) -> std::process::Output {
    common::linkctl(&["bench", "tl"], args)
}

#[test]
fn reports_every_path_as_json() {
    let out = run(&["--bytes", "8192", "--samples", "1", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["component"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "packetize posted writes, +0",
            "packetize posted writes, +3",
            "packetize read completions",
            "reassemble read completions"
        ]
    );
    assert!(rows
        .iter()
        .all(|r| r["gbps"].as_f64().unwrap() > 0.0 && r["ratio_to_memcpy"].as_f64().unwrap() > 0.0));
    // Every path moves the bytes asked for, the reads (which start 3 bytes in) too.
    assert!(rows.iter().all(|r| r["payload_bytes"] == 8192), "{rows:?}");
}

#[test]
fn bad_sizes_are_a_one_line_error() {
    for bytes in ["1000", "0", "65M", "1G", "64Q"] {
        let out = run(&["--bytes", bytes]);
        assert!(!out.status.success(), "{bytes}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{bytes}: {err}");
        assert!(err.contains("--bytes"), "{bytes}: {err}");
    }
}

#[test]
fn every_bench_takes_sizes_as_every_other_size_option_does() {
    for bench in ["phy", "dl", "tl"] {
        for (bytes, expected) in [("1K", 1024), ("2k", 2048), ("3072", 3072)] {
            let args = ["--bytes", bytes, "--samples", "1"];
            let report = common::json(&["bench", bench], &args);
            assert_eq!(
                report["rows"][0]["payload_bytes"], expected,
                "bench {bench} --bytes {bytes}: {report}"
            );
        }
    }
}
