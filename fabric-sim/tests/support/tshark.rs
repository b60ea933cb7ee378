//! Running tshark with the repository's dissector, for the dissector's tests in fabric-sim and linkctl
//! (test crates cannot share a module, so each includes this file).

use std::path::Path;
use std::process::Command;

/// Whether tshark is here to run the dissector's tests; with `OPENLINK_REQUIRE_TSHARK` set (as
/// scripts/test.sh sets it where it could install tshark) it must be.
pub fn tshark_available() -> bool {
    let found = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("OPENLINK_REQUIRE_TSHARK").is_none(),
            "OPENLINK_REQUIRE_TSHARK is set but tshark is not installed"
        );
        eprintln!("tshark is not installed: skipping the dissector test (scripts/test.sh installs it)");
    }
    found
}

/// What tshark prints reading the trace at `pcap` with our dissector and `args`; it must succeed.
pub fn tshark(pcap: &Path, args: &[&str]) -> String {
    let lua = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/wireshark/openlink.lua");
    let out = Command::new("tshark")
        .args(["-X", &format!("lua_script:{lua}")])
        .args(args)
        .arg("-r")
        .arg(pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
