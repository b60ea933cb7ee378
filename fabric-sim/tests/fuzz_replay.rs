//! Replays every fuzz target's committed corpus, and a bounded number of seeded mutations of it, through
//! the same entry points the cargo-fuzz targets use (see the `fuzz-replay` crate). This is how CI fuzzes
//! on stable without a nightly toolchain. Random bytes almost never parse as TOML, so the topology
//! target's random inputs are the corpus files with characters that matter to a topology file
//! overwritten, inserted or deleted at random; the discovery target takes any bytes, so it also gets
//! random ones.

use fabric_sim::fuzz::TARGETS;
use rand_core::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Mutated inputs per target, and edits per input at most.
const MUTATIONS: usize = 1_500;
const MAX_EDITS: u32 = 3;

/// What an edit writes: digits, signs and exponents for the numbers, quotes, brackets and separators for
/// the structure, a few letters and the keys' own words.
const ALPHABET: &[&[u8]] = &[
    b"0",
    b"1",
    b"9",
    b"-",
    b".",
    b"e",
    b"e308",
    b"1e-300",
    b"\"",
    b"[",
    b"]",
    b"{",
    b"}",
    b"=",
    b",",
    b"\n",
    b" ",
    b"g",
    b"count = 64",
    b"count = 0",
    b"gbps = 1e300",
    b"latency_ns = 1e300",
    b"nan",
    b"inf",
    b"kind = \"gpu\"",
    b"kind = \"switch\"",
    b"[[link]]",
    b"[[node]]",
    b"partition = 1",
    b"partition = 255",
];

fuzz_replay::replay_tests!(TARGETS);

/// One seeded mutation of `input`: a number replaced by an awkward one (most often), a name by another,
/// or a character sequence that matters to the format written over, inserted or deleted.
fn mutate(input: &mut Vec<u8>, rng: &mut Xoshiro256PlusPlus) {
    let pick = |rng: &mut Xoshiro256PlusPlus, n: usize| rng.next_u32() as usize % n.max(1);
    let numbers: Vec<(usize, usize)> = spans(input, |b| b.is_ascii_digit() || b == b'.' || b == b'-');
    let names: Vec<(usize, usize)> = spans(input, |b| b.is_ascii_alphanumeric() || b == b'_');
    match rng.next_u32() % 4 {
        0 | 1 if !numbers.is_empty() => {
            let (from, to) = numbers[pick(rng, numbers.len())];
            let value = NUMBERS[pick(rng, NUMBERS.len())];
            input.splice(from..to, value.iter().copied());
        }
        2 if !names.is_empty() => {
            let (from, to) = names[pick(rng, names.len())];
            let (other_from, other_to) = names[pick(rng, names.len())];
            let other = input[other_from..other_to].to_vec();
            input.splice(from..to, other);
        }
        _ => {
            let at = pick(rng, input.len() + 1);
            let word = ALPHABET[pick(rng, ALPHABET.len())];
            match rng.next_u32() % 3 {
                0 => {
                    let end = (at + word.len()).min(input.len());
                    input.splice(at..end, word.iter().copied());
                }
                1 => {
                    input.splice(at..at, word.iter().copied());
                }
                _ => {
                    let end = (at + 1 + pick(rng, 8)).min(input.len());
                    input.drain(at..end);
                }
            }
        }
    }
}

/// Awkward numbers for a topology file.
const NUMBERS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1",
    b"2",
    b"63",
    b"64",
    b"65",
    b"1e300",
    b"1e-300",
    b"0.0001",
    b"0.001",
    b"16000",
    b"16001",
    b"1e9",
    b"1000000001",
    b"99999999999",
    b"0.5",
    b"-0.0",
    b"nan",
    b"inf",
];

/// The maximal runs of bytes for which `keep` holds, as (start, end).
fn spans(input: &[u8], keep: impl Fn(u8) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in input.iter().chain(std::iter::once(&b' ')).enumerate() {
        match (keep(b), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Random inputs for the targets that take any bytes (the discovery target's hostile registers).
#[test]
fn random_inputs_replay_without_failures() {
    let binary: Vec<_> = TARGETS
        .iter()
        .copied()
        .filter(|&(name, _)| name != "topology_toml")
        .collect();
    assert!(!binary.is_empty());
    fuzz_replay::replay_random(&binary, 0xd15c_0000, 3_000, 600);
}

#[test]
fn mutated_corpora_replay_without_failures() {
    fuzz_replay::replay_mutations(TARGETS, 0xfab_5eed_0000, MUTATIONS, |input, rng| {
        for _ in 0..1 + rng.next_u32() % MAX_EDITS {
            mutate(input, rng);
        }
    });
}
