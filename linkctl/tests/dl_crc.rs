//! `linkctl dl crc` end to end.

use std::process::Output;

mod common;

fn run(args: &[&str], input: &[u8]) -> Output {
    common::linkctl_with_input(&["dl", "crc"], args, input)
}

#[test]
fn check_value_of_the_crc_catalogue() {
    // reveng CRC catalogue, CRC-32/ISCSI: check = 0xe3069283.
    let out = run(&[], b"123456789");
    assert!(out.status.success());
    assert_eq!(out.stdout, b"e3069283\n");
}

#[test]
fn rfc3720_vectors_and_the_empty_input() {
    // RFC 3720 appendix B.4: 32 zero bytes give the CRC bytes aa 36 91 8a, least significant first.
    assert_eq!(run(&[], &[0; 32]).stdout, b"8a9136aa\n");
    assert_eq!(run(&[], &[0xFF; 32]).stdout, b"62a8ab43\n");
    // init ^ xorout with nothing in between.
    assert_eq!(run(&[], b"").stdout, b"00000000\n");
}

#[test]
fn long_input_is_streamed_to_the_same_crc() {
    let input: Vec<u8> = (0..300_000u32).map(|i| (i * 131 % 251) as u8).collect();
    let out = run(&[], &input);
    assert!(out.status.success());
    let want = format!("{:08x}\n", link_dl::crc::checksum_portable(&input));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

#[test]
fn describe_prints_the_parameters_as_json() {
    let out = run(&["--describe"], b"");
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(json["width"], 32);
    assert_eq!(json["polynomial"], "0x1edc6f41");
    assert_eq!(json["init"], "0xffffffff");
    assert_eq!(json["refin"], true);
    assert_eq!(json["refout"], true);
    assert_eq!(json["xorout"], "0xffffffff");
    assert_eq!(json["check"], "0xe3069283");
    assert_eq!(json["residue"], "0xb798b438");
    assert_eq!(json["hamming_distance"]["distance"], 6);
    assert_eq!(json["hamming_distance"]["holds_up_to_data_bits"], 5243);
    assert_eq!(json["hamming_distance"]["longest_packet_data_bits"], 1248);
}

#[test]
fn an_unknown_flag_is_an_error() {
    let out = run(&["--bogus"], b"");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
}
