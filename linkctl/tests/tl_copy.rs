//! `linkctl tl copy` end to end.

mod common;

use std::process::Output;

fn tl_copy(args: &[&str]) -> Output {
    common::linkctl(&["tl", "copy"], args)
}

fn json(args: &[&str]) -> serde_json::Value {
    common::json(&["tl", "copy"], args)
}

#[test]
fn a_copy_with_bit_errors_arrives_verified_at_the_format_rate() {
    for args in [
        &["--size", "256K", "--ber", "1e-5"][..],
        &["--size", "100000", "--offset", "5", "--pull"],
    ] {
        let v = json(args);
        assert_eq!(v["verified"], true, "{v}");
        assert_eq!(v["bytes_moved"], v["bytes"]);
        // x8 at 8 GT/s carries 7.88 GB/s after 128b/130b; one header flit per 128 bytes leaves 8/9 of it.
        let gbps = v["bandwidth_gbps"].as_f64().unwrap();
        assert!((5.0..7.01).contains(&gbps), "{gbps}");
    }
    let noisy = tl_copy(&["--size", "256K", "--ber", "1e-5", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&noisy.stdout).unwrap();
    assert!(
        v["replays"].as_u64().unwrap() > 0,
        "bit errors made the data links replay: {v}"
    );
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for args in [
        &["--size", "0"][..],
        &["--size", "8G"],
        &["--size", "12Q"],
        &["--ber", "1"],
        &["--offset", "4294967296"],
        &["--drop", "0.5"],
        &["--duplicate", "-0.1"],
        &["--drop", "lots"],
    ] {
        common::assert_refused(&["tl", "copy"], args);
    }
}

#[test]
fn a_copy_survives_lost_and_repeated_units() {
    let out = tl_copy(&[
        "--size",
        "64K",
        "--offset",
        "7",
        "--drop",
        "1e-3",
        "--duplicate",
        "1e-3",
        "--seed",
        "3",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], true, "{v}");
    assert!(v["units_dropped"].as_u64().unwrap() > 0, "{v}");
    assert!(v["units_duplicated"].as_u64().unwrap() > 0, "{v}");
    assert!(v["replays"].as_u64().unwrap() > 0, "{v}");
}
