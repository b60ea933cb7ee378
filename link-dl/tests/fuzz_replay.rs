//! Replays every fuzz target's committed corpus, and a bounded number of seeded random inputs, through the
//! same entry points the cargo-fuzz targets use (see the `fuzz-replay` crate). This is how CI fuzzes on
//! stable without a nightly toolchain.

use link_dl::fuzz::TARGETS;

/// Random inputs per target, and their largest size. Kept small enough for CI's two cores.
const RANDOM_INPUTS: usize = 3_000;
const MAX_RANDOM_LEN: usize = 600;

#[test]
fn every_target_has_a_cargo_fuzz_wrapper_and_a_corpus() {
    fuzz_replay::check_wrappers_and_corpora(TARGETS);
}

#[test]
fn corpora_replay_without_failures() {
    fuzz_replay::replay_corpora(TARGETS);
}

#[test]
fn random_inputs_replay_without_failures() {
    fuzz_replay::replay_random(TARGETS, 0xd1_5eed_0000, RANDOM_INPUTS, MAX_RANDOM_LEN);
}
