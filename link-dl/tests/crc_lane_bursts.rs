//! The packet CRC also detects every burst of up to 16 bits confined to one lane, at every link width, in
//! packets of every length (1 to 10 flits), wherever in the header flit the 4-byte CRC field sits (any
//! 4-byte-aligned offset). A single lane's bits are spread W bytes apart in the stream, so this does not
//! follow from the CRC's burst-detection guarantee and is checked exhaustively: every start, every length,
//! every pattern of the bits between the first and the last.

use link_dl::crc::{Digest, CRC_LEN};

const FLIT: usize = 16;
const MAX_BURST: usize = 16;

/// The syndrome of each wire bit of a `len`-byte packet whose CRC field is at `field`.
fn wire_syndromes(len: usize, field: usize) -> Vec<u32> {
    let check = |packet: &[u8]| {
        let mut digest = Digest::new();
        digest.update(&packet[..field]);
        digest.update(&packet[field + CRC_LEN..]);
        digest.finalize() ^ u32::from_le_bytes(packet[field..field + CRC_LEN].try_into().unwrap())
    };
    let mut packet = vec![0u8; len];
    let base = check(&packet);
    (0..len * 8)
        .map(|bit| {
            packet[bit / 8] ^= 1 << (bit % 8);
            let syndrome = check(&packet) ^ base;
            packet[bit / 8] ^= 1 << (bit % 8);
            syndrome
        })
        .collect()
}

/// Counts the single-lane bursts of up to [`MAX_BURST`] bits the check misses, and all it tried.
fn undetected_lane_bursts(syndromes: &[u32], width: usize) -> (u64, u64) {
    let (mut undetected, mut tried) = (0, 0);
    let lane_bits = syndromes.len() / width;
    for lane in 0..width {
        // Lane `lane` carries stream bytes lane, lane + W, ..., least significant bit first.
        let wire_bit = |i: usize| (lane + width * (i / 8)) * 8 + i % 8;
        for start in 0..lane_bits {
            for len in 1..=MAX_BURST.min(lane_bits - start) {
                let mut syndrome = syndromes[wire_bit(start)];
                if len > 1 {
                    syndrome ^= syndromes[wire_bit(start + len - 1)];
                }
                let middle: Vec<u32> = (1..len.saturating_sub(1))
                    .map(|i| syndromes[wire_bit(start + i)])
                    .collect();
                // Every pattern of the middle bits, one flip at a time (Gray code order).
                for k in 0..1u64 << middle.len() {
                    if k > 0 {
                        syndrome ^= middle[k.trailing_zeros() as usize];
                    }
                    tried += 1;
                    undetected += u64::from(syndrome == 0);
                }
            }
        }
    }
    (undetected, tried)
}

#[test]
fn every_single_lane_burst_of_up_to_16_bits_is_detected() {
    let mut tried = 0;
    for flits in 1..=10 {
        for field in (0..FLIT).step_by(CRC_LEN) {
            let syndromes = wire_syndromes(flits * FLIT, field);
            for width in [1, 2, 4, 8, 16] {
                let (undetected, n) = undetected_lane_bursts(&syndromes, width);
                assert_eq!(undetected, 0, "{flits} flits, field at {field}, x{width}");
                tried += n;
            }
        }
    }
    println!("{tried} single-lane bursts checked");
    assert!(tried > 1_000_000_000);
}

/// The same search does find what exists: a 32-bit CRC cannot detect every pattern of 33 bits or more, and
/// already misses some single-lane bursts of 26 bits in the longest packet (field at 12, x16).
#[test]
fn the_burst_search_finds_misses_where_they_exist() {
    let syndromes = wire_syndromes(10 * FLIT, 12);
    let lane_bits = syndromes.len() / 16;
    let wire_bit = |lane: usize, i: usize| (lane + 16 * (i / 8)) * 8 + i % 8;
    // A 26-bit window on each lane: look for a zero-syndrome pattern with first and last bits set.
    let mut found = false;
    'search: for lane in 0..16 {
        for start in 0..lane_bits - 26 {
            let ends = syndromes[wire_bit(lane, start)] ^ syndromes[wire_bit(lane, start + 25)];
            let middle: Vec<u32> = (1..25).map(|i| syndromes[wire_bit(lane, start + i)]).collect();
            let mut syndrome = ends;
            for k in 0..1u64 << middle.len() {
                if k > 0 {
                    syndrome ^= middle[k.trailing_zeros() as usize];
                }
                if syndrome == 0 {
                    found = true;
                    break 'search;
                }
            }
        }
    }
    assert!(found);
}
