//! Seeded bytes that look like traffic rather than zeros: `tl copy`'s source memory and the benchmarks'
//! payloads.

/// `n` bytes from a xorshift generator seeded by `seed` (the same seed gives the same bytes).
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
