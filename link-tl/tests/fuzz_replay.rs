//! Replays every fuzz target's committed corpus, and a bounded number of seeded random inputs, through the
//! same entry points the cargo-fuzz targets use. This is how CI fuzzes on stable without a nightly toolchain.

use std::path::PathBuf;

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Random inputs per target, and their largest size. Kept small enough for CI's two cores.
const RANDOM_INPUTS: usize = 3_000;
const MAX_RANDOM_LEN: usize = 600;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

#[test]
fn every_target_has_a_cargo_fuzz_wrapper_and_a_corpus() {
    for (name, _) in link_tl::fuzz::TARGETS {
        let wrapper = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/fuzz_targets")
            .join(format!("{name}.rs"));
        assert!(wrapper.is_file(), "no cargo-fuzz wrapper {}", wrapper.display());
        let seeds = std::fs::read_dir(corpus_dir(name))
            .map(|d| d.count())
            .unwrap_or(0);
        assert!(seeds > 0, "fuzz target {name} has no committed corpus");
    }
}

#[test]
fn corpora_replay_without_failures() {
    for (name, entry) in link_tl::fuzz::TARGETS {
        let Ok(dir) = std::fs::read_dir(corpus_dir(name)) else {
            continue;
        };
        for file in dir {
            let path = file.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| entry(&data));
            assert!(outcome.is_ok(), "fuzz target {name} failed on {}", path.display());
        }
    }
}

#[test]
fn random_inputs_replay_without_failures() {
    for (i, (name, entry)) in link_tl::fuzz::TARGETS.iter().enumerate() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x0071_5eed_0000 + i as u64);
        let mut data = vec![0u8; MAX_RANDOM_LEN];
        for n in 0..RANDOM_INPUTS {
            let len = (rng.next_u32() as usize) % (MAX_RANDOM_LEN + 1);
            rng.fill_bytes(&mut data[..len]);
            let input = &data[..len];
            let outcome = std::panic::catch_unwind(|| entry(input));
            assert!(
                outcome.is_ok(),
                "fuzz target {name} failed on random input {n}: {input:02x?}"
            );
        }
    }
}
