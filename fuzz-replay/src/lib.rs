//! Replays fuzz targets' committed corpora, and a bounded number of seeded random inputs, through the same
//! entry points the cargo-fuzz targets in `fuzz/` use. This is how CI fuzzes on stable without a nightly
//! toolchain: every crate with fuzz targets calls it from its `tests/fuzz_replay.rs`.

use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A fuzz entry point and the name of its cargo-fuzz target (as each crate's `fuzz::TARGETS` lists them).
pub type Target = (&'static str, fn(&[u8]));

/// The workspace's `fuzz/` folder.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The committed corpus of cargo-fuzz target `target`: every file, by name, with its bytes.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|f| f.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, data)
        })
        .collect()
}

/// Check that every target has a cargo-fuzz wrapper and a committed corpus.
pub fn check_wrappers_and_corpora(targets: &[Target]) {
    for (name, _) in targets {
        let wrapper = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(wrapper.is_file(), "no cargo-fuzz wrapper {}", wrapper.display());
        assert!(
            !corpus(name).is_empty(),
            "fuzz target {name} has no committed corpus"
        );
    }
}

/// Run `entry` on `input`; a panic fails the test with `what` it was given.
fn survives(name: &str, entry: fn(&[u8]), input: &[u8], what: impl FnOnce() -> String) {
    let outcome = catch_unwind(|| entry(input));
    assert!(outcome.is_ok(), "fuzz target {name} failed on {}", what());
}

/// Replay every target's committed corpus.
pub fn replay_corpora(targets: &[Target]) {
    for &(name, entry) in targets {
        for (path, data) in corpus(name) {
            survives(name, entry, &data, || path.display().to_string());
        }
    }
}

/// Give every target `inputs` random inputs of up to `max_len` bytes, seeded by `seed` and the target's
/// place in the list, so that a failure names an input that can be made again.
pub fn replay_random(targets: &[Target], seed: u64, inputs: usize, max_len: usize) {
    for (i, &(name, entry)) in targets.iter().enumerate() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed + i as u64);
        let mut data = vec![0u8; max_len];
        for n in 0..inputs {
            let len = (rng.next_u32() as usize) % (max_len + 1);
            rng.fill_bytes(&mut data[..len]);
            let input = &data[..len];
            survives(name, entry, input, || format!("random input {n}: {input:02x?}"));
        }
    }
}

/// Give every target `inputs` inputs made by `mutate` from its corpus files in turn (for formats that
/// random bytes almost never get past), seeded as [`replay_random`]. `mutate` edits a copy of a file.
pub fn replay_mutations(
    targets: &[Target],
    seed: u64,
    inputs: usize,
    mutate: impl Fn(&mut Vec<u8>, &mut Xoshiro256PlusPlus),
) {
    for (i, &(name, entry)) in targets.iter().enumerate() {
        let seeds = corpus(name);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed + i as u64);
        for n in 0..inputs {
            let mut input = seeds[n % seeds.len()].1.clone();
            mutate(&mut input, &mut rng);
            survives(name, entry, &input, || {
                format!("mutation {n}: {:?}", String::from_utf8_lossy(&input))
            });
        }
    }
}

/// The tests every crate with fuzz targets runs, in its `tests/fuzz_replay.rs`: each target has a
/// cargo-fuzz wrapper and a corpus, the corpora replay without failures, and (given a seed, a count and
/// a largest length) so do that many seeded random inputs.
#[macro_export]
macro_rules! replay_tests {
    ($targets:expr) => {
        #[test]
        fn every_target_has_a_cargo_fuzz_wrapper_and_a_corpus() {
            $crate::check_wrappers_and_corpora($targets);
        }

        #[test]
        fn corpora_replay_without_failures() {
            $crate::replay_corpora($targets);
        }
    };
    ($targets:expr, seed: $seed:expr, inputs: $inputs:expr, max_len: $max_len:expr) => {
        $crate::replay_tests!($targets);

        #[test]
        fn random_inputs_replay_without_failures() {
            $crate::replay_random($targets, $seed, $inputs, $max_len);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replay fails, naming the input, when a target panics on one.
    #[test]
    #[should_panic(expected = "fuzz target short_only failed on random input")]
    fn a_target_that_panics_fails_the_replay() {
        let short_only: fn(&[u8]) = |data| assert!(data.len() < 40, "long input");
        replay_random(&[("short_only", short_only)], 1, 100, 64);
    }

    /// A target that accepts every input passes.
    #[test]
    fn a_target_that_accepts_everything_passes() {
        let any: fn(&[u8]) = |_| {};
        replay_random(&[("any", any)], 1, 100, 64);
    }
}
