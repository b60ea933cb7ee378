//! A command line `linkctl` cannot parse: one line on standard error and exit status 1, as every other
//! bad input (2 and 3 say what a command found: damaged units, a failed run).

mod common;

use common::linkctl;

#[test]
fn a_command_line_it_cannot_parse_is_one_line_and_exit_1() {
    for args in [
        &["dl", "decode", "--bogus"][..],
        &["sim", "allreduce", "--seed", "x"],
        &["sim", "allreduce", "--gpus", "-1"],
        &["phy", "nonsense"],
        // The missing argument is named on the same line.
        &["phy", "encode"],
        &["sim"],
        &[],
    ] {
        let out = linkctl(args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        // With no subcommand, the help is what says what to give; otherwise one line.
        if !args.is_empty() && args != ["sim"] {
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.starts_with("linkctl: error: "), "{args:?}: {stderr}");
        }
    }
    for help in [&["--help"][..], &["sim", "allreduce", "--help"], &["--version"]] {
        let out = linkctl(help, &[]);
        assert!(out.status.success() && !out.stdout.is_empty(), "{help:?}");
    }
}

/// A negative number given to an option is that option's value, refused by the option's own check with its
/// name and the number as given: clap had taken it for an unknown flag, `--ber -0.1` as `-0`
/// ("unexpected argument '-0' found").
#[test]
fn a_negative_number_is_refused_by_the_option_it_was_given_to() {
    for (args, says) in [
        (
            &["link", "train", "--skew", "-1"][..],
            "--skew must be between 0 and 1000 symbol times, not -1.0",
        ),
        (
            &["link", "train", "--ber", "-0.1"],
            "--ber must be at least 0 and below 1, not -0.1",
        ),
        (
            &["link", "run", "--retrain-at", "-5"],
            "--retrain-at must be a time in microseconds from 0 to 1000000000, not -5",
        ),
        (
            &["sim", "allreduce", "--ber", "-0.001"],
            "--ber must be from 0 to 0.001, not -0.001",
        ),
        (&["tl", "copy", "--size", "-1"], "bad size \"-1\""),
        (
            &["phy", "scramble", "--gen", "-1"],
            "invalid value '-1' for '--gen <GEN>'",
        ),
        (
            &["coherence", "--explore", "--reorder", "-1"],
            "invalid value '-1' for '--reorder <REORDER>'",
        ),
    ] {
        let out = linkctl(args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A negative number clap still reads as flags, one with an exponent (`-1e-6`, where it sees `-1`), is
/// refused with the form that takes it, which the option's own check then answers.
#[test]
fn a_negative_number_clap_reads_as_a_flag_is_refused_with_the_form_that_takes_it() {
    let out = linkctl(&["sim", "allreduce", "--ber", "-1e-6"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("unexpected argument '-1' found; give a negative number as --OPTION=NUMBER"),
        "{stderr}"
    );
    let out = linkctl(&["sim", "allreduce", "--ber=-1e-6"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--ber must be from 0 to 0.001, not -1e-6"),
        "{stderr}"
    );
    // An unknown flag is not a number: no such advice.
    let out = linkctl(&["sim", "allreduce", "-x"], &[]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("negative"));
}

/// `-0` given to an option that takes a number is 0: the reports that print the options back said "-0"
/// (`link train`'s "skew up to -0 symbol times, BER -0", `coherence`'s "bit error rate -0", JSON -0.0).
#[test]
fn minus_zero_is_taken_and_printed_back_as_zero() {
    let out = linkctl(&["link", "train", "--skew", "-0", "--ber", "-0"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.contains("skew up to 0 symbol times, BER 0,"), "{first}");
    let out = linkctl(&["coherence", "--ops", "100", "--ber", "-0"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bit error rate 0 on every link"), "{stdout}");
    let json = common::json(&["coherence"], &["--ops", "100", "--ber", "-0"]);
    let ber = json["ber"].as_f64().unwrap();
    assert!(ber == 0.0 && ber.is_sign_positive(), "{json}");
    let json = common::json(
        &["sim", "traffic"],
        &[
            "--topology",
            "mesh2",
            "--pattern",
            "hotspot",
            "--hotspot",
            "-0",
            "--load",
            "0.1",
            "--measure",
            "1us",
        ],
    );
    let share = json["hotspot"].as_f64().unwrap();
    assert!(share == 0.0 && share.is_sign_positive(), "{}", json["hotspot"]);
}

/// A fault's node name no topology can have (a line break, an escape) is refused when the option is read,
/// naming the option: `--fail-link` given twice printed the line break as it was, in `sim`'s "names ...
/// twice" message, which then took two lines.
#[test]
fn a_fault_on_a_name_with_a_control_character_is_refused_on_one_line() {
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "sim",
                "allreduce",
                "--fail-link",
                "a\nb:c@1us",
                "--fail-link",
                "a\nb:c@1us",
            ],
            "bad --fail-link \"a\\nb:c@1us\": node name \"a\\nb\"",
        ),
        (
            &["sim", "traffic", "--drain-switch", "nv\u{1b}[31mswitch1@1us"],
            "bad --drain-switch \"nv\\u{1b}[31mswitch1@1us\": node name \"nv\\u{1b}[31mswitch1\"",
        ),
        (
            &["sim", "allreduce", "--fail-port", "nvswitch0:gpu\r1@1us"],
            "bad --fail-port \"nvswitch0:gpu\\r1@1us\": node name \"gpu\\r1\"",
        ),
        (
            &["fabric", "--fail-link", "gpu0:nv\nswitch1"],
            "bad --fail-link \"gpu0:nv\\nswitch1\": node name \"nv\\nswitch1\"",
        ),
    ];
    for (args, says) in cases {
        let out = common::linkctl(args, &[]);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("linkctl: error: {says}")),
            "{args:?}: {err}"
        );
        assert!(err.contains("control character"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
