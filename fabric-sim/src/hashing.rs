//! The hasher of the simulator's own hash sets: their keys (packet headers, sequence numbers) are made
//! by the simulation, already well mixed in their low bits, and only need spreading. One multiply
//! instead of SipHash's defence against chosen keys, which simulated traffic cannot mount.

/// Build hashers of [`MixHasher`], for `HashSet<u64, MixHash>` and `HashMap<u64, _, MixHash>`.
pub(crate) type MixHash = std::hash::BuildHasherDefault<MixHasher>;

#[derive(Debug, Default)]
pub(crate) struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
}
