//! Seeded bytes that look like traffic rather than zeros: `tl copy`'s source memory and the benchmarks'
//! payloads.

/// `n` bytes from a xorshift generator seeded by `seed` (the same seed gives the same bytes).
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    // Never all zeros (`Xorshift::seeded`): a copy of them into zeroed memory would verify whether it
    // moved anything or not.
    let mut rng = link_tl::xorshift::Xorshift::seeded(seed);
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

#[cfg(test)]
mod tests {
    use super::noise;

    #[test]
    fn every_seed_gives_bytes_other_than_zeros() {
        // This seed is the constant mixed into seeds: it would make the generator's state 0.
        for seed in [0, 1, 0x9E37_79B9_7F4A_7C15, u64::MAX] {
            let bytes = noise(seed, 64);
            assert!(
                bytes.iter().filter(|&&b| b != 0).count() > 32,
                "{seed:#x}: {bytes:?}"
            );
        }
        assert_eq!(noise(7, 64), noise(7, 64));
    }
}
