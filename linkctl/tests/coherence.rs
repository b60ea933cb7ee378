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
    ] {
        common::assert_refused(&["coherence"], args);
    }
}
