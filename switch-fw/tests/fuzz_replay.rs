//! Replays every fuzz target's committed corpus, and a bounded number of seeded random inputs, through the
//! same entry points the cargo-fuzz targets use (see the `fuzz-replay` crate). This is how CI fuzzes on
//! stable without a nightly toolchain.

use switch_fw::fuzz::TARGETS;

/// Random inputs per target, and their largest size: a switch takes many operations to fill its queues,
/// and each costs little (20,000 inputs take half a second here).
const RANDOM_INPUTS: usize = 20_000;
const MAX_RANDOM_LEN: usize = 1_500;

fuzz_replay::replay_tests!(TARGETS, seed: 0x5e_17c4_0000, inputs: RANDOM_INPUTS, max_len: MAX_RANDOM_LEN);
