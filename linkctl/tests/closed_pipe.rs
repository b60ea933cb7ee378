//! `linkctl ... | head`: a reader that goes away ends linkctl quietly, as it does any command-line tool.

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn a_closed_stdout_is_not_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_linkctl"))
        .args([
            "coherence",
            "--explore",
            "--agents",
            "2",
            "--lines",
            "1",
            "--no-agent-symmetry",
            "--no-value-symmetry",
            "--no-phase-symmetry",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before the search (a second or so) has printed anything.
    drop(child.stdout.take());
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!status.success(), "its output went nowhere: {status}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(13), "ended by SIGPIPE: {status}");
    }
}

/// Standard output that refuses what is written to it (a full disk; `/dev/full` on Linux) is an error that
/// linkctl reports in its one line, exit status 1, as it does everywhere else: not a panic, whichever
/// command prints.
#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    for command in [
        &["sim", "allreduce", "--max", "4K"][..],
        &["sim", "allreduce", "--max", "4K", "--json"],
        &["sim", "traffic", "--load", "0.1", "--measure", "1us"],
        &["fabric"],
        &["link", "train", "--lanes", "1", "--timing", "fast"],
        &[
            "link",
            "run",
            "--lanes",
            "1",
            "--timing",
            "fast",
            "--packets",
            "10",
        ],
        &["tl", "copy", "--size", "1K"],
        &["coherence", "--ops", "10"],
        &["coherence", "--explore"],
        &["bench", "tl", "--bytes", "1K", "--samples", "1"],
        &["dl", "decode", "00000000000000000000000000000000"],
        &["dl", "decode", "--json", "00000000000000000000000000000000"],
        &["dl", "crc", "--describe"],
        &["--help"],
        &["sim", "--help"],
        &["--version"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_linkctl"))
            .args(command)
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            (out.status.code(), stderr.trim_end()),
            (
                Some(1),
                "linkctl: error: writing stdout: No space left on device (os error 28)"
            ),
            "{command:?}"
        );
    }
}

/// Standard error that refuses what is written to it (`2>/dev/full`) is no panic either: a command that
/// fails, or a command line clap cannot take, still exits with status 1 (a panic is 101), and a command
/// whose only output to standard error is its error message fails the same way.
#[cfg(target_os = "linux")]
#[test]
fn a_full_stderr_is_not_a_panic() {
    for (command, stdout) in [
        (
            &["sim", "allreduce", "--max", "4K", "--gpus", "99"][..],
            "/dev/null",
        ),
        (&["sim", "traffic", "--load", "2"], "/dev/null"),
        (&["dl", "decode", "zz"], "/dev/null"),
        (&["--no-such-option"], "/dev/null"),
        (&["sim", "allreduce", "--max", "4K"], "/dev/full"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_linkctl"))
            .args(command)
            .stdout(std::fs::File::create(stdout).unwrap())
            .stderr(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{command:?} > {stdout}");
    }
}
