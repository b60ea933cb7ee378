//! `linkctl phy scramble` end to end.

use std::process::Output;

mod common;

fn run(args: &[&str], input: &[u8]) -> Output {
    common::linkctl_with_input(&["phy", "scramble"], args, input)
}

#[test]
fn gen1_zeros_give_the_appendix_c_keystream() {
    // PCI Express Base Specification 2.1, Appendix C: 00h scrambled from reset.
    let out = run(&["--gen", "1"], &[0; 16]);
    assert!(out.status.success());
    assert_eq!(
        out.stdout,
        [0xFF, 0x17, 0xC0, 0x14, 0xB2, 0xE7, 0x02, 0x82, 0x72, 0x6E, 0x28, 0xA6, 0xBE, 0x6D, 0xBF, 0x8D]
    );
    assert_eq!(run(&["--gen", "2"], &[0; 16]).stdout, out.stdout);
}

#[test]
fn gen3_lanes_use_their_seeds() {
    // Lane 0 from its seed 1DBFBCh (PCIe 4.2.2.4); the first bytes are docs/spec.md 1.3.7's example.
    // Lanes eight apart share a seed; generations 3 to 5 share the scrambler.
    let lane0 = run(&["--gen", "3", "--lane", "0"], &[0; 64]);
    assert!(lane0.status.success());
    let mut want = [0u8; 64];
    link_phy::scrambler::Gen3Scrambler::new(0).apply(&mut want);
    assert_eq!(lane0.stdout, want);
    assert_eq!(lane0.stdout[..2], [0x6C, 0xBD]);
    assert_eq!(run(&["--gen", "5", "--lane", "8"], &[0; 64]).stdout, lane0.stdout);
    assert_eq!(run(&["--gen", "4"], &[0; 64]).stdout, lane0.stdout);
    assert_ne!(run(&["--gen", "3", "--lane", "1"], &[0; 64]).stdout, lane0.stdout);
}

#[test]
fn scrambling_twice_gives_the_input_back() {
    let input: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
    for args in [&["--gen", "1"][..], &["--gen", "3", "--lane", "17"]] {
        let once = run(args, &input);
        assert!(once.status.success());
        assert_eq!(once.stdout.len(), input.len());
        assert_ne!(once.stdout, input);
        assert_eq!(run(args, &once.stdout).stdout, input);
    }
}

#[test]
fn bad_arguments_are_one_line_errors() {
    for (args, needle) in [
        (&["--gen", "6"][..], "--gen 6"),
        (&["--gen", "0"], "--gen 0"),
        (&["--gen", "3", "--lane", "32"], "--lane 32"),
        (&["--gen", "1", "--lane", "0"], "--lane applies only"),
    ] {
        let out = run(args, b"");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!err.contains("panicked"));
    }
    assert!(!run(&[], b"").status.success());
}
