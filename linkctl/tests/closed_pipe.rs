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
