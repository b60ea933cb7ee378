//! The scramblers against published values and against bit-serial formulations written straight from the
//! specification's figures, independent of the table-driven code under test.

use link_phy::code128b130b::ordered_set::{skp_tail, SKP_END};
use link_phy::code128b130b::{LaneEncoder, OrderedSetBlock};
use link_phy::scrambler::{lane_seed, Gen1Scrambler, Gen3Scrambler, LANE_SEEDS};
use link_phy::Symbol;
use proptest::prelude::*;

/// PCI Express Base Specification 2.1, Appendix C (p. 700, second table): 00h scrambled repeatedly after a
/// reset, i.e. the 2.5 GT/s keystream. Also quoted (first 32 bytes) in hamsternz/FPGA_DisplayPort
/// src/scrambler.vhd, which was verified against that table.
const APPENDIX_C_KEYSTREAM: [u8; 64] = [
    0xFF, 0x17, 0xC0, 0x14, 0xB2, 0xE7, 0x02, 0x82, 0x72, 0x6E, 0x28, 0xA6, 0xBE, 0x6D, 0xBF, 0x8D, //
    0xBE, 0x40, 0xA7, 0xE6, 0x2C, 0xD3, 0xE2, 0xB2, 0x07, 0x02, 0x77, 0x2A, 0xCD, 0x34, 0xBE, 0xE0, //
    0xA7, 0x5D, 0x24, 0xB1, 0x9B, 0xA1, 0xBD, 0x22, 0xD4, 0x45, 0x1D, 0xD3, 0xD7, 0xEA, 0x76, 0xEE, //
    0x2C, 0xDA, 0x1A, 0xFA, 0x28, 0x2D, 0x36, 0x3B, 0x3A, 0x0E, 0x6F, 0x67, 0xCF, 0x06, 0x4C, 0x26,
];

/// PCI Express Base Specification 2.1, Appendix C (p. 700, first table): the LFSR (D15..D0) before each of
/// the first 32 symbols after a reset.
const APPENDIX_C_STATES: [u16; 32] = [
    0xFFFF, 0xE817, 0x0328, 0x284B, 0x4DE8, 0xE755, 0x404F, 0x4140, 0x4E79, 0x761E, 0x1466, 0x6574, 0x7DBD,
    0xB6E5, 0xFDA6, 0xB165, 0x7D09, 0x02E5, 0xE572, 0x673D, 0x34CF, 0xCB54, 0x4743, 0x4DEF, 0xE055, 0x40E0,
    0xEE40, 0x54BE, 0xB334, 0x2C7B, 0x7D0C, 0x07E5,
];

/// The LFSR of figure 4-10 (or 4-18), one flip-flop per array element: each shift, D0 takes the output
/// D(n-1), a flip-flop at one of the polynomial's middle terms takes its neighbour XOR the output, the rest
/// take their neighbour. Returns the keystream bits, first first.
fn serial_keystream<const N: usize>(d: &mut [bool; N], xor_into: &[usize], bits: usize) -> Vec<bool> {
    (0..bits)
        .map(|_| {
            let out = d[N - 1];
            for i in (1..N).rev() {
                d[i] = d[i - 1] ^ (out && xor_into.contains(&i));
            }
            d[0] = out;
            out
        })
        .collect()
}

fn to_flops<const N: usize>(state: u32) -> [bool; N] {
    core::array::from_fn(|i| state >> i & 1 == 1)
}

fn from_flops<const N: usize>(d: &[bool; N]) -> u32 {
    d.iter().enumerate().fold(0, |v, (i, &b)| v | (b as u32) << i)
}

fn bytes_of(bits: &[bool]) -> Vec<u8> {
    bits.chunks(8)
        .map(|c| c.iter().enumerate().fold(0u8, |v, (i, &b)| v | (b as u8) << i))
        .collect()
}

/// x^16 + x^5 + x^4 + x^3 + 1: the output enters D0 and is XORed into D3, D4 and D5.
fn gen1_serial(state: u16, bytes: usize) -> (Vec<u8>, u16) {
    let mut d = to_flops::<16>(state.into());
    let ks = serial_keystream(&mut d, &[3, 4, 5], 8 * bytes);
    (bytes_of(&ks), from_flops(&d) as u16)
}

/// x^23 + x^21 + x^16 + x^8 + x^5 + x^2 + 1.
fn gen3_serial(state: u32, bytes: usize) -> (Vec<u8>, u32) {
    let mut d = to_flops::<23>(state);
    let ks = serial_keystream(&mut d, &[2, 5, 8, 16, 21], 8 * bytes);
    (bytes_of(&ks), from_flops(&d))
}

#[test]
fn gen1_keystream_matches_appendix_c() {
    let mut s = Gen1Scrambler::new();
    let got: Vec<u8> = (0..64).map(|_| s.next_byte()).collect();
    assert_eq!(got, APPENDIX_C_KEYSTREAM);
    let mut zeros = [0u8; 64];
    Gen1Scrambler::new().apply(&mut zeros);
    assert_eq!(zeros, APPENDIX_C_KEYSTREAM);
    assert_eq!(gen1_serial(0xFFFF, 64).0, APPENDIX_C_KEYSTREAM);
}

#[test]
fn gen1_lfsr_states_match_appendix_c() {
    let mut s = Gen1Scrambler::new();
    for (i, &want) in APPENDIX_C_STATES.iter().enumerate() {
        assert_eq!(s.state(), want, "state before symbol {i}");
        s.advance();
    }
}

#[test]
fn gen1_symbol_rules() {
    // PCIe 4.2.1.3: COM initialises, SKP does not advance, K symbols and ordered-set symbols pass.
    let k = &APPENDIX_C_KEYSTREAM;
    let mut s = Gen1Scrambler::new();
    let sent = [
        Symbol::COM,
        Symbol::Data(0),
        Symbol::SKP,
        Symbol::Data(0),
        Symbol::STP,
        Symbol::Data(0x55),
        Symbol::COM,
        Symbol::Data(0),
    ];
    let got: Vec<Symbol> = sent.iter().map(|&x| s.scramble(x)).collect();
    let want = [
        Symbol::COM,
        Symbol::Data(k[0]),
        Symbol::SKP,
        Symbol::Data(k[1]),
        Symbol::STP,
        Symbol::Data(0x55 ^ k[3]),
        Symbol::COM,
        Symbol::Data(k[0]),
    ];
    assert_eq!(got, want);
    let mut d = Gen1Scrambler::new();
    let back: Vec<Symbol> = got.iter().map(|&x| d.descramble(x)).collect();
    assert_eq!(back, sent);
    // A TS1's data symbols are sent as is but still advance the LFSR.
    let mut s = Gen1Scrambler::new();
    assert_eq!(s.pass(Symbol::Data(0x4A)), Symbol::Data(0x4A));
    assert_eq!(s.scramble(Symbol::Data(0)), Symbol::Data(k[1]));
}

#[test]
fn gen3_seeds_are_the_published_ones() {
    // PCIe Base Specification 4.2.2.4 (seed values for Lane number modulo 8).
    assert_eq!(
        LANE_SEEDS,
        [0x1DBFBC, 0x0607BB, 0x1EC760, 0x18C0DB, 0x010F12, 0x19CFC9, 0x0277CE, 0x1BB807]
    );
    for lane in 0..32 {
        assert_eq!(Gen3Scrambler::new(lane).state(), LANE_SEEDS[lane % 8]);
    }
}

#[test]
fn gen3_lanes_combine_as_the_shared_lfsr_note_says() {
    // PCIe 4.2.2.4, implementation note on a shared LFSR (figure 4-19): lane 0's taps are the XOR of lanes
    // 1 and 7, lane 2 of 1 and 3, lane 4 of 3 and 5, lane 6 of 5 and 7.
    let keystream = |lane: usize| {
        let mut d = [0u8; 256];
        Gen3Scrambler::new(lane).apply(&mut d);
        d
    };
    for (lane, a, b) in [(0, 1, 7), (2, 1, 3), (4, 3, 5), (6, 5, 7)] {
        let (x, y) = (keystream(a), keystream(b));
        let xor: Vec<u8> = x.iter().zip(&y).map(|(p, q)| p ^ q).collect();
        assert_eq!(keystream(lane).to_vec(), xor, "lane {lane}");
    }
}

#[test]
fn keystreams_satisfy_the_polynomial_recurrences() {
    // Any sequence an LFSR with characteristic polynomial G produces satisfies G's recurrence; checked here
    // on the output bits alone, whatever the register's internal form.
    let bits = |bytes: Vec<u8>| -> Vec<u32> {
        bytes
            .iter()
            .flat_map(|&b| (0..8).map(move |i| u32::from(b >> i & 1)))
            .collect()
    };
    let mut g1 = vec![0u8; 64];
    Gen1Scrambler::new().apply(&mut g1);
    let s = bits(g1);
    for n in 0..s.len() - 16 {
        assert_eq!(s[n + 16], s[n + 5] ^ s[n + 4] ^ s[n + 3] ^ s[n], "gen1 bit {n}");
    }
    for lane in 0..8 {
        let mut g3 = vec![0u8; 64];
        Gen3Scrambler::new(lane).apply(&mut g3);
        let s = bits(g3);
        for n in 0..s.len() - 23 {
            let want = s[n + 21] ^ s[n + 16] ^ s[n + 8] ^ s[n + 5] ^ s[n + 2] ^ s[n];
            assert_eq!(s[n + 23], want, "lane {lane} bit {n}");
        }
    }
}

#[test]
fn skp_tail_at_the_lane_0_seed() {
    // The standard SKP ordered set ends SKP_END, {~LFSR[22], LFSR[22:16]}, LFSR[15:8], LFSR[7:0] when the
    // previous block was not a data block (PCIe 4.2.8.2). At the lane 0 seed 1DBFBCh that is
    // E1 9D BF BC, the value an open-source PCIe gen3 transmitter documents for its Recovery SKP.
    let seed = lane_seed(0);
    let tail = skp_tail(seed, seed >> 22 == 0);
    assert_eq!([SKP_END, tail[0], tail[1], tail[2]], [0xE1, 0x9D, 0xBF, 0xBC]);
    // The same from lane 0's encoder, a SKP ordered set right after an EIEOS (spec section 1.3.3).
    let mut encoder = LaneEncoder::new(0);
    encoder.encode_block(&OrderedSetBlock::Eieos.to_block());
    let (first, last) = encoder.encode_block(&OrderedSetBlock::skp().to_block());
    // The wire's first 2 bits are the sync header; the 16 symbols follow, least significant bit first.
    let symbols = ((first >> 2) | u128::from(last) << 126).to_le_bytes();
    assert_eq!(symbols[12..], [0xE1, 0x9D, 0xBF, 0xBC]);
}

proptest! {
    #[test]
    fn gen1_tables_equal_the_serial_lfsr(state in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..100)) {
        let (ks, end) = gen1_serial(state, data.len());
        let mut got = data.clone();
        let mut s = Gen1Scrambler::with_state(state);
        s.apply(&mut got);
        let want: Vec<u8> = data.iter().zip(&ks).map(|(d, k)| d ^ k).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(s.state(), end);
        let mut b = Gen1Scrambler::with_state(state);
        let bytes: Vec<u8> = (0..data.len()).map(|_| b.next_byte()).collect();
        prop_assert_eq!(bytes, ks);
    }

    #[test]
    fn gen3_tables_equal_the_serial_lfsr(state in 0u32..1 << 23, data in proptest::collection::vec(any::<u8>(), 0..100), skip in 0usize..70) {
        let (ks, end) = gen3_serial(state, data.len());
        let mut got = data.clone();
        let mut s = Gen3Scrambler::with_state(0, state);
        s.apply(&mut got);
        let want: Vec<u8> = data.iter().zip(&ks).map(|(d, k)| d ^ k).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(s.state(), end);
        let mut a = Gen3Scrambler::with_state(0, state);
        a.advance(skip);
        prop_assert_eq!(a.state(), gen3_serial(state, skip).1);
    }

    #[test]
    fn gen1_scramble_then_descramble_is_identity(bytes in proptest::collection::vec((any::<u8>(), 0u8..4), 0..200)) {
        let symbols: Vec<Symbol> = bytes.iter().map(|&(b, k)| match k {
            0 => Symbol::COM,
            1 => Symbol::SKP,
            _ => Symbol::Data(b),
        }).collect();
        let mut tx = Gen1Scrambler::new();
        let mut rx = Gen1Scrambler::new();
        for &s in &symbols {
            prop_assert_eq!(rx.descramble(tx.scramble(s)), s);
        }
        prop_assert_eq!(tx, rx);
    }
}
