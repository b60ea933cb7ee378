//! The unit tests' source of random numbers: seeded, so that a failure repeats.

/// Xorshift64 from `seed` (made odd, so never the all-zero state that stays zero).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
