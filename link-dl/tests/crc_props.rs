//! Property tests of the CRC API: incremental digests equal one-shot checksums, and (with `fast-crc`) the
//! CPU instruction path equals the portable table on arbitrary input.

use link_dl::crc::{checksum, checksum_portable, Digest};
use proptest::prelude::*;

proptest! {
    #[test]
    fn a_digest_fed_in_pieces_equals_the_checksum(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut digest = Digest::new();
        let mut start = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            digest.update(&bytes[start..cut]);
            start = cut;
        }
        prop_assert_eq!(digest.finalize(), checksum(&bytes));
        prop_assert_eq!(checksum(&bytes), checksum_portable(&bytes));
    }
}
