//! The crossbar arbiter: iSLIP (N. McKeown, "The iSLIP scheduling algorithm for input-queued switches",
//! IEEE/ACM Trans. Networking 7(2), 1999), over requesters that are (input, virtual channel) pairs.
//!
//! Each cycle, in up to `iterations` rounds: every free output *grants* the first requester at or after
//! its round-robin grant pointer; every input *accepts* the first granting output at or after its accept
//! pointer. Pointers move one past the accepted match, and only in the first round, which is what makes
//! iSLIP starvation-free: a requester that keeps requesting is granted within `requesters` cycles.

use crate::{MAX_PORTS, VCS};

/// Inputs: the ports, and one more for the switch's reduction engine.
pub const INPUTS: usize = MAX_PORTS + 1;
/// Words of a set of inputs (bit `input % 64` of word `input / 64`).
const INPUT_WORDS: usize = INPUTS.div_ceil(64);
/// Words of a requester bit set: (input, channel) pairs.
pub const WORDS: usize = (INPUTS * VCS).div_ceil(64);
/// A set of requesters; requester `input * VCS + vc` is bit `r % 64` of word `r / 64`.
pub type Requesters = [u64; WORDS];

/// For each virtual channel, the set of every requester on it (bit `input * VCS + vc`).
pub const VCS_OF: [Requesters; VCS] = {
    let mut sets = [[0u64; WORDS]; VCS];
    let mut vc = 0;
    while vc < VCS {
        let mut input = 0;
        while input < INPUTS {
            let r = input * VCS + vc;
            sets[vc][r / 64] |= 1 << (r % 64);
            input += 1;
        }
        vc += 1;
    }
    sets
};

/// The requester number of (`input`, `vc`).
pub const fn requester(input: usize, vc: usize) -> usize {
    input * VCS + vc
}

/// A match: a requester and the output it may send to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Match {
    /// The input.
    pub input: usize,
    /// The virtual channel at that input.
    pub vc: usize,
    /// The output.
    pub output: usize,
}

/// iSLIP pointers for a switch of `PORTS` outputs.
#[derive(Clone, Debug)]
pub struct Islip<const PORTS: usize> {
    grant: [u16; PORTS],
    accept: [u8; INPUTS],
    /// Scratch of one arbitration, kept between calls so that it is not cleared each time (a kilobyte):
    /// per output, the requester it granted (only entries written in the same round are read); per input,
    /// the outputs that granted it, zero outside a round (the accept step takes what the grants set).
    granted_to: [u16; PORTS],
    grants_of_input: [u64; INPUTS],
}

impl<const PORTS: usize> Default for Islip<PORTS> {
    fn default() -> Self {
        Islip {
            grant: [0; PORTS],
            accept: [0; INPUTS],
            granted_to: [0; PORTS],
            grants_of_input: [0; INPUTS],
        }
    }
}

/// The first set bit of `set` at or after `from`, wrapping around. Called for every output on every
/// arbitration, so written without divisions (`WORDS` is not a power of two).
fn first_from(set: &Requesters, from: usize) -> Option<usize> {
    const TOTAL: usize = WORDS * 64;
    let from = if from < TOTAL { from } else { from % TOTAL };
    let (w, b) = (from / 64, from % 64);
    let word_bits = |word: usize, bits: u64| word * 64 + bits.trailing_zeros() as usize;
    let head = set[w] & (u64::MAX << b);
    if head != 0 {
        return Some(word_bits(w, head));
    }
    if let Some(word) = (w + 1..WORDS).chain(0..w).find(|&word| set[word] != 0) {
        return Some(word_bits(word, set[word]));
    }
    let tail = set[w] & !(u64::MAX << b);
    (tail != 0).then(|| word_bits(w, tail))
}

/// The first set bit of a 64-bit `set` at or after `from`, wrapping around.
fn first_from_u64(set: u64, from: usize) -> Option<usize> {
    let from = from % 64;
    let rotated = set.rotate_right(from as u32);
    (rotated != 0).then(|| (rotated.trailing_zeros() as usize + from) % 64)
}

impl<const PORTS: usize> Islip<PORTS> {
    /// Match requesters to free outputs. `requests[o]` holds the requesters with a packet for output `o`
    /// that may go now (credit permitting); `free` the outputs that can take a packet. `out` receives the
    /// matches (at most one per output and one per input).
    pub fn arbitrate(
        &mut self,
        requests: &[Requesters; PORTS],
        free: u64,
        iterations: usize,
        out: &mut heapless::Vec<Match, PORTS>,
    ) {
        let mut inputs_matched: Requesters = [0; WORDS];
        let mut outputs_matched = 0u64;
        // Only the entries of outputs in `granting` are read, written first in the same round; each input's
        // grants are zero until granted and taken back to zero when read: nothing needs clearing.
        let Islip {
            grant,
            accept,
            granted_to,
            grants_of_input,
        } = self;
        for round in 0..iterations.max(1) {
            // Grant: each unmatched free output offers itself to one requester.
            let mut granting = 0u64;
            // Two words rather than a u128, whose shift by a variable is several instructions.
            let mut inputs_granted = [0u64; INPUT_WORDS];
            let mut candidates = free & !outputs_matched;
            while candidates != 0 {
                let o = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                let Some(request) = requests.get(o) else { continue };
                let mut eligible = *request;
                for (e, m) in eligible.iter_mut().zip(&inputs_matched) {
                    *e &= !m;
                }
                if let Some(r) = first_from(&eligible, usize::from(grant[o])) {
                    let input = r / VCS;
                    granted_to[o] = r as u16;
                    inputs_granted[input / 64] |= 1 << (input % 64);
                    grants_of_input[input] |= 1 << o;
                    granting |= 1 << o;
                }
            }
            if granting == 0 {
                break;
            }
            // Accept: each input takes one of the outputs that granted it.
            for (word, mut bits) in inputs_granted.into_iter().enumerate() {
                while bits != 0 {
                    let input = word * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let grants = core::mem::take(&mut grants_of_input[input]);
                    let Some(o) = first_from_u64(grants, usize::from(accept[input])) else {
                        continue;
                    };
                    let r = usize::from(granted_to[o]);
                    let _ = out.push(Match {
                        input,
                        vc: r % VCS,
                        output: o,
                    });
                    outputs_matched |= 1 << o;
                    for vc in 0..VCS {
                        let q = requester(input, vc);
                        inputs_matched[q / 64] |= 1 << (q % 64);
                    }
                    if round == 0 {
                        grant[o] = ((r + 1) % (INPUTS * VCS)) as u16;
                        accept[input] = ((o + 1) % PORTS.max(1)) as u8;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::vec::Vec;

    fn set(rs: &[usize]) -> Requesters {
        let mut s = [0; WORDS];
        for &r in rs {
            s[r / 64] |= 1 << (r % 64);
        }
        s
    }

    /// Against the definition: the first set bit met going up from `from`, round the whole set.
    #[test]
    fn first_from_is_the_next_set_bit_going_round() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x2545_F491_4F6C_DD1D);
        let mut next = move || rng.next_u64();
        for _ in 0..2000 {
            let mut s: Requesters = [0; WORDS];
            // Sparse and dense sets, and empty words.
            for word in &mut s {
                *word = match next() % 4 {
                    0 => 0,
                    1 => 1 << (next() % 64),
                    2 => next() & next(),
                    _ => next(),
                };
            }
            let from = (next() % (WORDS as u64 * 64 + 10)) as usize;
            let total = WORDS * 64;
            let expected = (0..total)
                .map(|k| (from % total + k) % total)
                .find(|&r| s[r / 64] & (1 << (r % 64)) != 0);
            assert_eq!(first_from(&s, from), expected, "{s:x?} from {from}");
        }
        assert_eq!(first_from(&[0; WORDS], 3), None);
    }

    #[test]
    fn a_match_is_a_matching() {
        let mut a: Islip<4> = Islip::default();
        // Every input wants every output.
        let all: Vec<usize> = (0..4).map(|i| requester(i, 0)).collect();
        let requests = [set(&all), set(&all), set(&all), set(&all)];
        let mut out = heapless::Vec::new();
        a.arbitrate(&requests, 0b1111, 4, &mut out);
        assert_eq!(out.len(), 4, "{out:?}");
        let inputs: std::collections::BTreeSet<_> = out.iter().map(|m| m.input).collect();
        assert_eq!(inputs.len(), 4);
    }

    #[test]
    fn no_requester_starves() {
        // Three inputs (two channels each) all want output 0: each is served within 6 cycles.
        let mut a: Islip<2> = Islip::default();
        let rs: Vec<usize> = (0..3).flat_map(|i| [requester(i, 0), requester(i, 3)]).collect();
        let requests = [set(&rs), [0; WORDS]];
        let mut served = std::collections::BTreeMap::new();
        for cycle in 0..60 {
            let mut out = heapless::Vec::new();
            a.arbitrate(&requests, 0b01, 1, &mut out);
            let m = out[0];
            served.entry((m.input, m.vc)).or_insert_with(Vec::new).push(cycle);
        }
        assert_eq!(served.len(), 6);
        for cycles in served.values() {
            assert!(cycles.windows(2).all(|w| w[1] - w[0] == 6), "{served:?}");
        }
    }

    /// iSLIP as its definition reads, with nothing kept between calls but the pointers: the arbiter,
    /// whose scratch lives across calls and rounds, matches exactly the same over many random cycles.
    #[test]
    fn kept_scratch_matches_a_fresh_arbitration() {
        const P: usize = 6;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        let mut next = move || rng.next_u64();
        let mut a: Islip<P> = Islip::default();
        let (mut grant, mut accept) = ([0usize; P], [0usize; INPUTS]);
        for cycle in 0..3000 {
            // A few inputs (ports and the engine's), each channel wanting a few outputs.
            let mut requests = [[0; WORDS]; P];
            for _ in 0..next() % 12 {
                let input = [0, 1, 2, 3, 4, 5, INPUTS - 1][(next() % 7) as usize];
                let r = requester(input, (next() % VCS as u64) as usize);
                requests[(next() % P as u64) as usize][r / 64] |= 1 << (r % 64);
            }
            let free = next() & ((1 << P) - 1);
            let iterations = (next() % 3) as usize;
            let mut out = heapless::Vec::new();
            a.arbitrate(&requests, free, iterations, &mut out);

            let mut expected = Vec::new();
            let (mut inputs_matched, mut outputs_matched) = ([false; INPUTS], [false; P]);
            for round in 0..iterations.max(1) {
                let mut granted: Vec<(usize, usize)> = Vec::new(); // (output, requester)
                for o in (0..P).filter(|&o| free & (1 << o) != 0 && !outputs_matched[o]) {
                    let total = WORDS * 64;
                    let wants =
                        |r: usize| requests[o][r / 64] & (1 << (r % 64)) != 0 && !inputs_matched[r / VCS];
                    if let Some(r) = (0..total).map(|k| (grant[o] + k) % total).find(|&r| wants(r)) {
                        granted.push((o, r));
                    }
                }
                if granted.is_empty() {
                    break;
                }
                for input in 0..INPUTS {
                    let Some(&(o, r)) = (0..P)
                        .map(|k| (accept[input] + k) % P)
                        .find_map(|o| granted.iter().find(|&&(g, r)| g == o && r / VCS == input))
                    else {
                        continue;
                    };
                    expected.push(Match {
                        input,
                        vc: r % VCS,
                        output: o,
                    });
                    inputs_matched[input] = true;
                    outputs_matched[o] = true;
                    if round == 0 {
                        grant[o] = (r + 1) % (INPUTS * VCS);
                        accept[input] = (o + 1) % P;
                    }
                }
            }
            assert_eq!(out.as_slice(), expected.as_slice(), "cycle {cycle}");
        }
    }

    #[test]
    fn wrapping_search() {
        let s = set(&[3, 200]);
        assert_eq!(first_from(&s, 4), Some(200));
        assert_eq!(first_from(&s, 201), Some(3));
        assert_eq!(first_from(&[0; WORDS], 0), None);
        assert_eq!(first_from_u64(0b1001, 1), Some(3));
        assert_eq!(first_from_u64(0b1001, 4), Some(0));
    }
}
