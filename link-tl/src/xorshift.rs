//! A small seeded generator (xorshift64) for the stress tests and the tools' payloads: fast, no_std,
//! and the same numbers for the same seed everywhere.

/// Xorshift64, its seed mixed with a constant so that small seeds do not start it on few bits.
#[derive(Clone, Copy, Debug)]
pub struct Xorshift(u64);

impl Xorshift {
    /// The generator for `seed`. Xorshift stays at 0 once there: the one seed the mixing would start
    /// there (every number 0) starts from another state instead.
    pub fn seeded(seed: u64) -> Self {
        Xorshift(state(seed))
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// A non-zero starting state for `seed`, for any xorshift: the seed mixed with a constant (so that small
/// seeds do not start it on few bits), except the one seed the mixing would start at 0, where xorshift
/// would stay. Distinct seeds give distinct states (but for that one).
pub const fn state(seed: u64) -> u64 {
    match seed ^ 0x9E37_79B9_7F4A_7C15 {
        0 => 1,
        state => state,
    }
}
