//! The `fast-crc` path (the SSE 4.2 `crc32` instruction where the CPU has it, three lanes at once with
//! PCLMULQDQ from 120 bytes) against the portable table.
#![cfg(feature = "fast-crc")]

use link_dl::crc::{checksum, checksum_of_parts, checksum_portable, hardware_accelerated, Digest};
use proptest::prelude::*;

#[test]
fn x86_64_hosts_use_the_instruction() {
    // Every x86_64 CPU since 2008 has SSE 4.2; if this fails, the other tests here compare the table to itself.
    if cfg!(target_arch = "x86_64") {
        assert!(hardware_accelerated());
    }
}

#[test]
fn every_length_and_alignment_up_to_400_bytes_matches() {
    let data: Vec<u8> = (0..420u32).map(|i| (i.wrapping_mul(167) ^ 0x5A) as u8).collect();
    for start in 0..8 {
        for len in 0..=400 {
            let bytes = &data[start..start + len];
            assert_eq!(
                checksum(bytes),
                checksum_portable(bytes),
                "start {start}, len {len}"
            );
        }
    }
}

#[test]
fn a_checksum_of_two_parts_is_that_of_them_joined() {
    let data: Vec<u8> = (0..400u32).map(|i| (i.wrapping_mul(73) ^ 0xC3) as u8).collect();
    // Around the packet shape (a 12-byte header word, then 144 bytes), and other splits.
    for first in 0..=40 {
        for rest in (0..=200).chain([288, 300]) {
            let (a, b) = data[..first + rest].split_at(first);
            assert_eq!(
                checksum_of_parts(a, b),
                checksum_portable(&data[..first + rest]),
                "first {first}, rest {rest}"
            );
        }
    }
}

proptest! {
    #[test]
    fn the_instruction_equals_the_table(bytes in proptest::collection::vec(any::<u8>(), 0..2048), split in any::<prop::sample::Index>()) {
        prop_assert_eq!(checksum(&bytes), checksum_portable(&bytes));
        let split = split.index(bytes.len() + 1);
        let mut digest = Digest::new();
        digest.update(&bytes[..split]);
        digest.update(&bytes[split..]);
        prop_assert_eq!(digest.finalize(), checksum_portable(&bytes));
    }
}
