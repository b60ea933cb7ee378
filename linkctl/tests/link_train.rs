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
}

#[test]
fn a_limit_out_of_range_is_refused() {
    for limit in ["0", "-1", "60001", "NaN"] {
        assert_refused(&["link", "train"], &["--limit-ms", limit]);
    }
}
