//! `linkctl bench tl` end to end: it runs, checks its own round trips, and reports every path.

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
}

#[test]
fn bad_sizes_are_a_one_line_error() {
    let out = run(&["--bytes", "1000"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--bytes"));
}
