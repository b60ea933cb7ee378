//! Entry points for fuzzing the data link layer's decoders with hostile input.
//!
//! Each function takes arbitrary bytes, drives one decoder with them and checks the properties that must
//! hold for any input (no panic, typed errors, round trips). The cargo-fuzz targets in `fuzz/` call these,
//! and `tests/fuzz_replay.rs` replays the committed corpora and seeded random inputs through the same
//! functions, so CI needs no nightly toolchain.
//!
//! A property that does not hold is reported by panicking: that is what a fuzzer looks for.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use crate::fec::{self, Block, Corrections, BLOCK_LEN, CODEWORDS};

/// A fuzz entry point and the name of its cargo-fuzz target.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz entry point, by the name of its cargo-fuzz target.
pub const TARGETS: &[Target] = &[("fec_decode", fec_decode)];

/// Decodes the first 256 bytes of `data` (zero-padded) as a received FEC block, then checks that encoding
/// those bytes and corrupting one byte per codeword (chosen by the 6 bytes after the block, if present) is
/// corrected exactly.
pub fn fec_decode(data: &[u8]) {
    let mut received: Block = [0; BLOCK_LEN];
    let len = data.len().min(BLOCK_LEN);
    received[..len].copy_from_slice(&data[..len]);

    let mut block = received;
    match fec::decode(&mut block) {
        Ok(corrections) => {
            let mut changed = [0u8; CODEWORDS];
            let mut bits = 0;
            for (p, (&before, &after)) in received.iter().zip(&block).enumerate() {
                if before != after {
                    changed[p % CODEWORDS] += 1;
                    bits += (before ^ after).count_ones();
                }
            }
            assert!(
                changed.iter().all(|&n| n <= 1),
                "more than one byte changed in a codeword"
            );
            assert_eq!(
                u32::from(corrections.symbols),
                changed.iter().map(|&n| u32::from(n)).sum()
            );
            assert_eq!(u32::from(corrections.bits), bits);
            let mut again = block;
            assert_eq!(
                fec::decode(&mut again),
                Ok(Corrections::default()),
                "output is not a codeword"
            );
            let mut reencoded = block;
            fec::encode(&mut reencoded);
            assert_eq!(
                reencoded, block,
                "a codeword's check bytes are not what encode computes"
            );
        }
        Err(_) => assert_eq!(block, received, "a failed decode changed the block"),
    }

    let mut sent = received;
    fec::encode(&mut sent);
    let mut clean = sent;
    assert_eq!(fec::decode(&mut clean), Ok(Corrections::default()));
    assert_eq!(clean, sent);
    if let Some(errors) = data.get(BLOCK_LEN..BLOCK_LEN + 2 * CODEWORDS) {
        let mut corrupted = sent;
        let mut symbols = 0;
        for (codeword, error) in errors.chunks_exact(2).enumerate() {
            let bytes_in_codeword = (BLOCK_LEN - codeword).div_ceil(CODEWORDS);
            let at = codeword + CODEWORDS * (usize::from(error[0]) % bytes_in_codeword);
            corrupted[at] ^= error[1];
            symbols += u8::from(error[1] != 0);
        }
        let corrections = fec::decode(&mut corrupted).expect("one error per codeword is correctable");
        assert_eq!(corrections.symbols, symbols);
        assert_eq!(corrupted, sent);
    }
}
