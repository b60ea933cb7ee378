//! Known answers for the FEC's arithmetic and code from published QR-code material, which uses the same
//! field (GF(2^8) on 0x11D, α = 2) and the same kind of Reed-Solomon generator (roots α^0, α^1, ...).

use link_dl::fec::{self, gf256, Block, BLOCK_LEN, CODEWORDS, DATA_LEN};

/// α^i for i = 0..=77, transcribed from the log/antilog table of the Thonky QR code tutorial
/// (thonky.com/qr-code-tutorial/log-antilog-table), column "Exponent of α -> Integer".
const ANTILOG_0_TO_77: [u8; 78] = [
    1, 2, 4, 8, 16, 32, 64, 128, 29, 58, 116, 232, 205, 135, 19, 38, 76, 152, 45, 90, 180, 117, 234, 201,
    143, 3, 6, 12, 24, 48, 96, 192, 157, 39, 78, 156, 37, 74, 148, 53, 106, 212, 181, 119, 238, 193, 159, 35,
    70, 140, 5, 10, 20, 40, 80, 160, 93, 186, 105, 210, 185, 111, 222, 161, 95, 190, 97, 194, 153, 47, 94,
    188, 101, 202, 137, 15, 30, 60,
];

/// log(a) for a = 1..=77, from the same table's "Integer -> Exponent of α" column.
const LOG_1_TO_77: [u8; 77] = [
    0, 1, 25, 2, 50, 26, 198, 3, 223, 51, 238, 27, 104, 199, 75, 4, 100, 224, 14, 52, 141, 239, 129, 28, 193,
    105, 248, 200, 8, 76, 113, 5, 138, 101, 47, 225, 36, 15, 33, 53, 147, 142, 218, 240, 18, 130, 69, 29,
    181, 194, 125, 106, 39, 249, 185, 201, 154, 9, 120, 77, 228, 114, 166, 6, 191, 139, 98, 102, 221, 48,
    253, 226, 152, 37, 179, 16, 145,
];

#[test]
fn antilog_table_matches_the_published_one() {
    for (power, &value) in ANTILOG_0_TO_77.iter().enumerate() {
        assert_eq!(gf256::exp(power), value, "α^{power}");
    }
    assert_eq!(gf256::exp(255), 1, "α has order 255");
}

#[test]
fn log_table_matches_the_published_one() {
    for (i, &power) in LOG_1_TO_77.iter().enumerate() {
        let a = i as u8 + 1;
        assert_eq!(gf256::log(a), Some(power), "log {a}");
    }
    assert_eq!(gf256::log(0), None);
}

#[test]
fn products_agree_with_the_published_logs() {
    // a·b = α^(log a + log b): 3·7 = α^(25+198) = α^223, and 2·128 = α^8 = 29 (the first reduction by 0x11D).
    assert_eq!(gf256::mul(3, 7), gf256::exp(25 + 198));
    assert_eq!(gf256::mul(2, 128), 29);
    assert_eq!(gf256::mul(12, 77), gf256::exp(27 + 145));
}

/// The Reed-Solomon generator with roots α^0..α^(n-1), coefficients highest degree first, by multiplying
/// out (x - α^i) with the library's field arithmetic.
fn generator(check_symbols: usize) -> Vec<u8> {
    let mut g = vec![1u8];
    for i in 0..check_symbols {
        let root = gf256::exp(i);
        let mut next = vec![0u8; g.len() + 1];
        for (j, &c) in g.iter().enumerate() {
            next[j] ^= c;
            next[j + 1] ^= gf256::mul(c, root);
        }
        g = next;
    }
    g
}

/// The check symbols of `message` by textbook long division: the remainder of m(x)·x^n by g(x).
fn remainder(message: &[u8], check_symbols: usize) -> Vec<u8> {
    let g = generator(check_symbols);
    let mut work: Vec<u8> = message.to_vec();
    work.resize(message.len() + check_symbols, 0);
    for i in 0..message.len() {
        let lead = work[i];
        for (j, &c) in g.iter().enumerate() {
            work[i + j] ^= gf256::mul(lead, c);
        }
    }
    work[message.len()..].to_vec()
}

#[test]
fn long_division_reproduces_the_published_qr_codewords() {
    // The 10-symbol generator as Thonky's division-steps pages print it: α^0, α^251, α^67, ...
    let published_exponents = [0, 251, 67, 46, 61, 118, 70, 64, 94, 32, 45];
    let g10: Vec<u8> = published_exponents.iter().map(|&e| gf256::exp(e)).collect();
    assert_eq!(generator(10), g10);
    // ISO/IEC 18004 annex I, "01234567" at version 1-M.
    let data = [
        16, 32, 12, 86, 97, 128, 236, 17, 236, 17, 236, 17, 236, 17, 236, 17,
    ];
    assert_eq!(
        remainder(&data, 10),
        [165, 36, 212, 193, 237, 54, 199, 135, 44, 85]
    );
    // "HELLO WORLD" at version 1-M (Thonky QR code tutorial, error correction coding).
    let data = [
        32, 91, 11, 120, 209, 114, 220, 77, 67, 64, 236, 17, 236, 17, 236, 17,
    ];
    assert_eq!(
        remainder(&data, 10),
        [196, 35, 39, 119, 235, 215, 231, 226, 93, 23]
    );
}

#[test]
fn every_codeword_is_the_rs_code_with_generator_x_minus_1_times_x_minus_alpha() {
    // (x - 1)(x - α) = x^2 + α^25·x + α, since 1 + α = 3 = α^25.
    assert_eq!(generator(2), [1, gf256::exp(25), gf256::exp(1)]);
    for seed in 0..32u32 {
        let mut block: Block = [0; BLOCK_LEN];
        for (i, byte) in block[..DATA_LEN].iter_mut().enumerate() {
            *byte = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed * 977)
                .rotate_right(seed) as u8;
        }
        fec::encode(&mut block);
        for codeword in 0..CODEWORDS {
            let bytes: Vec<u8> = block.iter().skip(codeword).step_by(CODEWORDS).copied().collect();
            let (message, check) = bytes.split_at(bytes.len() - 2);
            assert_eq!(remainder(message, 2), check, "codeword {codeword}, seed {seed}");
        }
    }
}

/// docs/spec.md section 2.7, worked example: the data bytes "openlink" then 242 zeros.
#[test]
fn spec_2_7_worked_example() {
    let mut block: Block = [0; BLOCK_LEN];
    block[..8].copy_from_slice(b"openlink");
    fec::encode(&mut block);
    assert_eq!(block[DATA_LEN..], [0x50, 0xA0, 0x40, 0x27, 0xAC, 0x2F]);
    for codeword in 0..CODEWORDS {
        let bytes: Vec<u8> = block.iter().skip(codeword).step_by(CODEWORDS).copied().collect();
        let (message, check) = bytes.split_at(bytes.len() - 2);
        assert_eq!(remainder(message, 2), check);
    }
    // A burst on lane 1 of an x4 link hitting stream bytes 1, 5 and 9 is three corrections.
    let sent = block;
    block[1] ^= 0xC0;
    block[5] ^= 0xFF;
    block[9] ^= 0x3F;
    let corrections = fec::decode(&mut block).unwrap();
    assert_eq!((corrections.symbols, corrections.bits), (3, 16));
    assert_eq!(block, sent);
}
