//! What the end-to-end tests of `linkctl` share: running a subcommand (with or without input), reading its
//! JSON, and checking that
//! bad input is refused cleanly.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code, unused_imports)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `linkctl <command...> <args...>` to completion.
pub fn linkctl(command: &[&str], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linkctl"))
        .args(command)
        .args(args)
        .output()
        .unwrap()
}

/// Runs `linkctl <command...> <args...>` to completion with `input` on its standard input.
pub fn linkctl_with_input(command: &[&str], args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_linkctl"))
        .args(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Written beside the reading of its output, so that a command that writes much before it has read
    // all its input does not wait on a full pipe for ever. A command that fails early may close its input
    // before reading it all.
    let mut stdin = child.stdin.take().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = stdin.write_all(input);
        });
        child.wait_with_output().unwrap()
    })
}

/// Runs the subcommand with `--json`, requires success, and parses what it printed.
pub fn json(command: &[&str], args: &[&str]) -> serde_json::Value {
    let out = linkctl(command, &[args, &["--json"]].concat());
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The subcommand must refuse `args` with an error message and a failing exit, not a panic.
pub fn assert_refused(command: &[&str], args: &[&str]) {
    assert_refused_saying(command, args, "error");
}

/// [`assert_refused`], the message saying `says`.
pub fn assert_refused_saying(command: &[&str], args: &[&str], says: &str) {
    let out = linkctl(command, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was accepted");
    assert!(stderr.contains("error"), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// A topology file of GPUs a0-a3 on leaves joined through spines S0 and S1, b0 on a leaf joined only
/// through S0, and b1 on S0, the up*/down* root: [`CUT_S0`] leaves S0 holding packets between a0-a3 that it can neither deliver nor
/// return.
pub const STRAND: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fabric-sim/tests/topologies/strand.toml"
);
/// The failures that cut S0 of [`STRAND`] from a0-a3's leaves, at 2 us.
pub const CUT_S0: [&str; 4] = ["--fail-link", "L0:S0@2us", "--fail-link", "L1:S0@2us"];

/// Two stars that no link joins, each of `gpus` GPUs (`a0`, `a1`... and `b0`, `b1`...) on `switches`
/// switches in a chain (`asw0`, `asw1`... and `bsw0`...; GPU g on switch g mod `switches`), the second
/// star's GPUs in `partition`.
pub fn two_stars(file: &str, gpus: usize, switches: usize, partition: u8) -> String {
    let mut text = String::from("name = \"two-stars\"\n");
    for (star, p) in [("a", 0), ("b", partition)] {
        for g in 0..gpus {
            text += &format!("[[node]]\nname = \"{star}{g}\"\nkind = \"gpu\"\npartition = {p}\n");
        }
        for k in 0..switches {
            text += &format!("[[node]]\nname = \"{star}sw{k}\"\nkind = \"switch\"\n");
            if k > 0 {
                text += &format!(
                    "[[link]]\na = \"{star}sw{}\"\nb = \"{star}sw{k}\"\ngbps = 50.0\n",
                    k - 1
                );
            }
        }
        for g in 0..gpus {
            text += &format!(
                "[[link]]\na = \"{star}{g}\"\nb = \"{star}sw{}\"\ngbps = 25.0\n",
                g % switches
            );
        }
    }
    topology_file(file, &text)
}

/// `gpus` GPUs (`fpga0`, `fpga1`...) cabled in a loop, each to the next by one 12.5 GB/s link, as FPGA
/// boards often are: no switch, so only neighbours have a route.
pub fn gpu_loop(file: &str, gpus: usize) -> String {
    let mut text = format!("name = \"loop{gpus}\"\n");
    for g in 0..gpus {
        text += &format!("[[node]]\nname = \"fpga{g}\"\nkind = \"gpu\"\n");
    }
    for g in 0..gpus {
        text += &format!(
            "[[link]]\na = \"fpga{g}\"\nb = \"fpga{}\"\ngbps = 12.5\n",
            (g + 1) % gpus
        );
    }
    topology_file(file, &text)
}

/// Write the topology `text` to `file` in the tests' scratch folder; returns its path.
pub fn topology_file(file: &str, text: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(file);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[path = "../../../fabric-sim/tests/support/tshark.rs"]
mod tshark_support;
pub use tshark_support::{tshark, tshark_available};

/// `fields` of every record of the trace at `pcap`, as tshark reads them with our dissector (an empty
/// string for a field a record does not have).
pub fn tshark_fields(pcap: &std::path::Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut args = vec!["-T", "fields", "-E", "separator=,", "-E", "occurrence=f"];
    args.extend(fields.iter().flat_map(|f| ["-e", f]));
    tshark(pcap, &args)
        .lines()
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}
