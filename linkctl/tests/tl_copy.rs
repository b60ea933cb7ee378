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
fn the_text_report_counts_bytes_in_words() {
    for (size, copied) in [
        ("1", "copied 1 byte (posted writes)"),
        ("2", "copied 2 bytes (posted writes)"),
    ] {
        let out = String::from_utf8(tl_copy(&["--size", size]).stdout).unwrap();
        assert!(out.starts_with(copied), "{out}");
    }
}

/// This seed flips one bit on the wire, which one CRC error and one replay follow: each is counted in
/// the singular ("1 bits flipped ... 1 CRC errors, 1 replays" before).
#[test]
fn the_text_report_counts_wire_errors_in_words() {
    let out = String::from_utf8(tl_copy(&["--size", "64K", "--ber", "1e-6", "--seed", "5"]).stdout).unwrap();
    let wire = out.lines().nth(1).unwrap_or_default();
    assert_eq!(
        wire, "514 packets; on the wire 1 bit flipped, 0 units dropped, 0 duplicated; 1 CRC error, 1 replay",
        "{out}"
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

/// The one-line error `args` end in.
fn error(args: &[&str]) -> String {
    let out = tl_copy(args);
    assert!(!out.status.success(), "{args:?} was accepted");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    stderr
}

/// A copy that fails is reported as a run that did not succeed (exit status 3, as `link run` and
/// `coherence` give), says why in words, and with `--json` still prints its object, `verified` false.
#[test]
fn a_failed_copy_says_why_in_words() {
    // Half the units hit: the completion of the fence read never comes.
    let args = ["--size", "1K", "--ber", "0.005"];
    let out = tl_copy(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.starts_with("copy FAILED (posted writes, endpoint 0 to endpoint 1): completion timeout for the request at offset"),
        "{text}"
    );
    let out = tl_copy(&[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["verified"].as_bool(), v["bytes_moved"].as_u64()),
        (Some(false), Some(0))
    );
    assert!(
        v["failure"].as_str().unwrap().starts_with("completion timeout"),
        "{v}"
    );
    assert!(json(&["--size", "1K"])["failure"].is_null());
}

#[test]
fn the_offset_takes_the_suffixes_of_the_size() {
    let v = json(&["--size", "1K", "--offset", "3K"]);
    assert_eq!(
        (v["offset"].as_u64(), v["verified"].as_bool()),
        (Some(3072), Some(true)),
        "{v}"
    );
    // Near the top, a small copy holds only its own range (it had held a gigabyte twice over), read back
    // too.
    let near_the_top = ["--size", "1K", "--offset", "1023M"];
    for pull in [&[][..], &["--pull"]] {
        let v = json(&[&near_the_top[..], pull].concat());
        assert_eq!(v["verified"], true, "{v}");
    }
    for (args, expected) in [
        (
            &["--offset", "1G"][..],
            "--offset must be below 1G, not 1073741824",
        ),
        (&["--offset", "18446744073709551615"], "--offset must be below 1G"),
        (&["--offset", "1Q"], "--offset: bad size \"1Q\""),
        (&["--offset", "99999999999999G"], "more than 2^64 bytes"),
    ] {
        let e = error(args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
}

#[test]
fn sizes_and_rates_out_of_range_are_refused_with_the_range() {
    for (args, expected) in [
        (&["--size", "0"][..], "--size must be from 1 byte to 4G"),
        (&["--size", "8G"], "--size must be from 1 byte to 4G"),
        // The wire flips at most one bit per 128-bit unit: higher rates are not modelled.
        (&["--ber", "0.01"], "below 1/128"),
        (
            &["--drop", "0.5"],
            "--drop must be at least 0 and below 0.5, not 0.5",
        ),
    ] {
        let e = error(args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
}
