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
