//! Replays every fuzz target's committed corpus, and a bounded number of seeded random inputs, through the
//! same entry points the cargo-fuzz targets use (see the `fuzz-replay` crate). This is how CI fuzzes on
//! stable without a nightly toolchain.

use link_phy::fuzz::TARGETS;

/// Random inputs per target, and their largest size. Kept small enough for CI's two cores.
const RANDOM_INPUTS: usize = 3_000;
const MAX_RANDOM_LEN: usize = 600;

fuzz_replay::replay_tests!(TARGETS, seed: 0x5eed_0000, inputs: RANDOM_INPUTS, max_len: MAX_RANDOM_LEN);
