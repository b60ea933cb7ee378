//! Proves that the packet CRC detects every error of up to 5 bits in the longest packet (Hamming distance 6),
//! and that the same proof fails for CRC-32/IEEE, as Koopman's tables predict (HD 6 only up to 268 data
//! bits, HD 5 up to 2974: P. Koopman, "32-bit cyclic redundancy codes for Internet applications", DSN 2002,
//! and his CRC zoo entries for 0x8f6e37a0 = CRC-32C and 0x82608edb = CRC-32/IEEE).
//!
//! The method: a CRC check is linear, so an error pattern goes undetected exactly when the XOR of the
//! syndromes of its single-bit errors is zero. Weights 1 to 4 are searched exhaustively with sorted syndrome
//! tables. Weight 5 is searched exhaustively too, by the cyclic-code argument: the check is a shortened
//! cyclic code (verified below), so an undetected pattern shifted towards the end of the codeword stays
//! undetected, and every weight-5 pattern can be taken to include the codeword's last bit. Then a million
//! random 4-bit and a million random 5-bit errors go through the real packet check.

use std::collections::HashSet;

use link_dl::crc::{self, Digest, CRC_LEN, MAX_PACKET_LEN};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const COVERED_LEN: usize = MAX_PACKET_LEN - CRC_LEN;
const DATA_BITS: usize = COVERED_LEN * 8;
const CODEWORD_BITS: usize = DATA_BITS + 32;

/// Where these tests put the CRC field: the last 4 bytes of the header flit. The field's place and byte
/// order permute the codeword's bits, which changes no pattern's weight, so the proof holds for any place.
const FIELD_AT: usize = 12;

/// The syndrome of each single-bit error, in codeword order: the covered bits in wire order (least
/// significant bit of each byte first), then the 32 bits of the CRC value from bit 0. `crc_of` is the
/// check's CRC over the covered bytes.
fn single_bit_syndromes(crc_of: impl Fn(&[u8]) -> u32) -> Vec<u32> {
    let mut covered = vec![0u8; COVERED_LEN];
    let base = crc_of(&covered);
    let mut syndromes = Vec::with_capacity(CODEWORD_BITS);
    for bit in 0..DATA_BITS {
        covered[bit / 8] ^= 1 << (bit % 8);
        syndromes.push(crc_of(&covered) ^ base);
        covered[bit / 8] ^= 1 << (bit % 8);
    }
    syndromes.extend((0..32).map(|bit| 1u32 << bit));
    syndromes
}

/// Checks that the syndromes are those of a shortened cyclic code in this bit order: position i stands for
/// x^(n-1-i) mod G, so each syndrome is the next one times x (in the reflected representation, where bit 0
/// is the coefficient of x^31). This is what lets weight-5 patterns be shifted to the codeword's end.
fn assert_cyclic(syndromes: &[u32], reflected_poly: u32) {
    let times_x = |s: u32| (s >> 1) ^ if s & 1 != 0 { reflected_poly } else { 0 };
    assert_eq!(syndromes[CODEWORD_BITS - 1], 1 << 31, "the last bit is x^0");
    for i in 1..CODEWORD_BITS {
        assert_eq!(syndromes[i - 1], times_x(syndromes[i]), "bit {i}");
    }
}

/// An undetected error pattern of 1 to 5 bits (codeword positions), if there is one.
fn undetected_pattern_up_to_5_bits(syndromes: &[u32]) -> Option<Vec<usize>> {
    let n = syndromes.len();
    // Weight 1 and 2: a zero syndrome, or two equal ones.
    if let Some(i) = syndromes.iter().position(|&s| s == 0) {
        return Some(vec![i]);
    }
    let mut singles = syndromes.to_vec();
    singles.sort_unstable();
    if let Some(w) = singles.windows(2).find(|w| w[0] == w[1]) {
        return Some(bits_with_syndrome(syndromes, w[0], 2));
    }
    // Weight 3: a pair whose syndromes XOR to a single's (a set lookup per pair).
    let single_set: HashSet<u32> = syndromes.iter().copied().collect();
    let mut pairs: Vec<u32> = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let s = syndromes[i] ^ syndromes[j];
            if single_set.contains(&s) {
                return Some(vec![i, j, bits_with_syndrome(syndromes, s, 1)[0]]);
            }
            pairs.push(s);
        }
    }
    // Weight 4: two different pairs with equal syndromes (sharing a bit would mean weight 2, excluded).
    pairs.sort_unstable();
    if let Some(w) = pairs.windows(2).find(|w| w[0] == w[1]) {
        return Some(bits_with_syndrome(syndromes, w[0], 2));
    }
    // Weight 5, shifted to include the last bit: last ^ i ^ j equal to a pair's syndrome. Overlaps would mean
    // weight 3 or 1, both excluded above, so any match is a weight-5 pattern.
    let last = n - 1;
    for i in 0..last {
        for j in i + 1..last {
            let s = syndromes[last] ^ syndromes[i] ^ syndromes[j];
            if pairs.binary_search(&s).is_ok() {
                let mut pattern = vec![i, j, last];
                pattern.extend(bits_with_syndrome(syndromes, s, 2));
                pattern.sort_unstable();
                return Some(pattern);
            }
        }
    }
    None
}

/// Every set of `weight` (1 or 2) codeword bits whose syndromes XOR to `target`, concatenated: used only to
/// name the bits of a pattern already found.
fn bits_with_syndrome(syndromes: &[u32], target: u32, weight: usize) -> Vec<usize> {
    let n = syndromes.len();
    let mut found = Vec::new();
    for i in 0..n {
        if weight == 1 && syndromes[i] == target {
            found.push(i);
        }
        for j in i + 1..n {
            if weight == 2 && syndromes[i] ^ syndromes[j] == target {
                found.extend([i, j]);
            }
        }
    }
    found
}

/// The syndromes of a shortened cyclic code of `n` bits by their definition, x^(n-1-i) mod G for bit i.
fn cyclic_syndromes(n: usize, reflected_poly: u32) -> Vec<u32> {
    let mut syndromes = vec![1u32 << 31; n];
    for i in (0..n - 1).rev() {
        let s = syndromes[i + 1];
        syndromes[i] = (s >> 1) ^ if s & 1 != 0 { reflected_poly } else { 0 };
    }
    syndromes
}

/// Flips codeword bit `position` in a packet whose CRC field is at [`FIELD_AT`], little-endian.
fn flip(packet: &mut [u8], position: usize) {
    let byte = if position < DATA_BITS {
        let covered = position / 8;
        if covered < FIELD_AT {
            covered
        } else {
            covered + CRC_LEN
        }
    } else {
        FIELD_AT + (position - DATA_BITS) / 8
    };
    packet[byte] ^= 1 << (position % 8);
}

/// Whether a packet's CRC field matches `crc_of` over every other byte, as a receiver checks it.
fn passes(packet: &[u8], crc_of: impl Fn(&[&[u8]]) -> u32) -> bool {
    let field = u32::from_le_bytes(packet[FIELD_AT..FIELD_AT + CRC_LEN].try_into().unwrap());
    crc_of(&[&packet[..FIELD_AT], &packet[FIELD_AT + CRC_LEN..]]) == field
}

fn crc32c_over(parts: &[&[u8]]) -> u32 {
    let mut digest = Digest::new();
    for part in parts {
        digest.update(part);
    }
    digest.finalize()
}

fn random_packet(rng: &mut Xoshiro256PlusPlus, crc_of: impl Fn(&[&[u8]]) -> u32) -> Vec<u8> {
    let mut packet = vec![0u8; MAX_PACKET_LEN];
    rng.fill_bytes(&mut packet);
    let value = crc_of(&[&packet[..FIELD_AT], &packet[FIELD_AT + CRC_LEN..]]);
    packet[FIELD_AT..FIELD_AT + CRC_LEN].copy_from_slice(&value.to_le_bytes());
    assert!(passes(&packet, &crc_of));
    packet
}

#[test]
fn crc32c_detects_every_error_of_up_to_5_bits_in_the_longest_packet() {
    let syndromes = single_bit_syndromes(crc::checksum);
    assert_cyclic(&syndromes, crc::ALGORITHM.poly.reverse_bits());
    assert_eq!(undetected_pattern_up_to_5_bits(&syndromes), None);
}

#[test]
fn crc32_ieee_misses_a_pattern_of_at_most_5_bits_at_this_length() {
    let ieee = ::crc::Crc::<u32>::new(&::crc::CRC_32_ISO_HDLC);
    let syndromes = single_bit_syndromes(|bytes| ieee.checksum(bytes));
    assert_cyclic(&syndromes, ::crc::CRC_32_ISO_HDLC.poly.reverse_bits());
    let pattern = undetected_pattern_up_to_5_bits(&syndromes).expect("Koopman: HD 5 at 1248 data bits");
    println!("CRC-32/IEEE misses the {}-bit error {pattern:?}", pattern.len());
    assert_eq!(pattern.len(), 5, "Koopman: HD 5, not less, up to 2974 data bits");

    // The pattern really slips through a receiver's check of a real packet.
    let ieee_over = |parts: &[&[u8]]| {
        let mut digest = ieee.digest();
        parts.iter().for_each(|part| digest.update(part));
        digest.finalize()
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x1EEE);
    let mut packet = random_packet(&mut rng, ieee_over);
    let sent = packet.clone();
    pattern.iter().for_each(|&p| flip(&mut packet, p));
    assert_ne!(packet, sent);
    assert!(
        passes(&packet, ieee_over),
        "the IEEE CRC should not notice this error"
    );
    // ... while CRC-32C catches the same error.
    let mut packet = random_packet(&mut rng, crc32c_over);
    pattern.iter().for_each(|&p| flip(&mut packet, p));
    assert!(!passes(&packet, crc32c_over));
}

/// The search reproduces Koopman's published limits exactly: CRC-32C keeps HD 6 up to 5243 data bits and
/// not one bit more; CRC-32/IEEE up to 268. This is what shows the search finds what exists.
#[test]
fn the_search_finds_koopmans_published_hd6_limits() {
    for (poly, limit) in [(crc::ALGORITHM.poly, 5243), (::crc::CRC_32_ISO_HDLC.poly, 268)] {
        let reflected = poly.reverse_bits();
        assert_eq!(
            undetected_pattern_up_to_5_bits(&cyclic_syndromes(limit + 32, reflected)),
            None
        );
        let beyond = undetected_pattern_up_to_5_bits(&cyclic_syndromes(limit + 1 + 32, reflected));
        assert!(
            beyond.is_some(),
            "{poly:#010x} should lose HD 6 at {} data bits",
            limit + 1
        );
    }
}

fn random_errors_are_detected(bits: usize, trials: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut packet = random_packet(&mut rng, crc32c_over);
    for trial in 0..trials {
        if trial % 4096 == 0 {
            packet = random_packet(&mut rng, crc32c_over);
        }
        let mut positions = [0usize; 5];
        let mut chosen = 0;
        while chosen < bits {
            let p = (rng.next_u32() as usize) % CODEWORD_BITS;
            if !positions[..chosen].contains(&p) {
                positions[chosen] = p;
                chosen += 1;
            }
        }
        positions[..bits].iter().for_each(|&p| flip(&mut packet, p));
        assert!(
            !passes(&packet, crc32c_over),
            "undetected: bits {:?}",
            &positions[..bits]
        );
        positions[..bits].iter().for_each(|&p| flip(&mut packet, p));
    }
}

#[test]
fn a_million_random_4_bit_errors_are_detected() {
    random_errors_are_detected(4, 1_000_000, 0xC4C_0004);
}

#[test]
fn a_million_random_5_bit_errors_are_detected() {
    random_errors_are_detected(5, 1_000_000, 0xC4C_0005);
}

#[test]
fn flip_covers_every_packet_bit_exactly_once() {
    let mut seen = [0u8; MAX_PACKET_LEN];
    for p in 0..CODEWORD_BITS {
        let mut packet = vec![0u8; MAX_PACKET_LEN];
        flip(&mut packet, p);
        for (s, b) in seen.iter_mut().zip(&packet) {
            assert_eq!(*s & b, 0, "bit {p} flipped twice");
            *s |= b;
        }
    }
    assert!(seen.iter().all(|&b| b == 0xFF));
}

/// CRC-32C's generator has an even number of terms, so G(1) = 0 and x + 1 divides it: every codeword has
/// even weight, and every error of an odd number of bits is detected, whatever its size.
#[test]
fn every_odd_number_of_bit_errors_is_detected() {
    let terms = crc::ALGORITHM.poly.count_ones() + 1; // x^32 is implicit
    assert_eq!(terms % 2, 0);
    for (bits, seed) in [(7, 7), (9, 9), (33, 33), (101, 101)] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        for _ in 0..20_000 {
            let mut packet = random_packet(&mut rng, crc32c_over);
            let mut flipped = vec![false; CODEWORD_BITS];
            let mut chosen = 0;
            while chosen < bits {
                let p = (rng.next_u32() as usize) % CODEWORD_BITS;
                if !flipped[p] {
                    flipped[p] = true;
                    flip(&mut packet, p);
                    chosen += 1;
                }
            }
            assert!(!passes(&packet, crc32c_over), "{bits}-bit error undetected");
        }
    }
}
