//! Arithmetic in GF(2^8) built on the primitive polynomial x^8 + x^4 + x^3 + x^2 + 1 (`0x11D`), with
//! generator α = x (the byte `0x02`): the field of PCIe 6.0's flit FEC, of QR codes and of many
//! Reed-Solomon codes. Addition is XOR; multiplication goes through log/antilog tables built at compile time.

/// The field polynomial, x^8 as bit 8.
pub const POLY: u16 = 0x11D;

/// α^i for i in 0..512: the table repeats after 255 entries so that `EXP[LOG[a] + LOG[b]]` needs no
/// reduction modulo 255 (sums of two logs stay below 510; the power-of-two size lets a mask replace the
/// bounds check).
static EXP: [u8; 512] = build_exp();

/// `LOG[a]` is i with α^i = a, for a != 0 (`LOG[0]` is a placeholder, never read for a product).
static LOG: [u8; 256] = build_log();

const fn build_exp() -> [u8; 512] {
    let mut table = [0u8; 512];
    let mut value: u16 = 1;
    let mut i = 0;
    while i < 512 {
        table[i] = value as u8;
        value <<= 1;
        if value & 0x100 != 0 {
            value ^= POLY;
        }
        i += 1;
    }
    table
}

const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        table[exp[i] as usize] = i as u8;
        i += 1;
    }
    table
}

/// α^power.
pub fn exp(power: usize) -> u8 {
    EXP[power % 255]
}

/// α raised to a sum of at most two logarithms and 255 (anything below 512).
fn exp_of_sum(power: usize) -> u8 {
    EXP[power & (EXP.len() - 1)]
}

/// The discrete logarithm: i in 0..255 with α^i = a, or `None` for 0.
pub fn log(a: u8) -> Option<u8> {
    (a != 0).then(|| LOG[usize::from(a)])
}

/// The product a·b.
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        exp_of_sum(usize::from(LOG[usize::from(a)]) + usize::from(LOG[usize::from(b)]))
    }
}

/// a·α^power, for power in 0..255.
pub(crate) fn mul_exp(a: u8, power: u8) -> u8 {
    if a == 0 {
        0
    } else {
        exp_of_sum(usize::from(LOG[usize::from(a)]) + usize::from(power))
    }
}

/// The quotient a / b, or `None` when b is 0.
pub fn div(a: u8, b: u8) -> Option<u8> {
    match (a, b) {
        (_, 0) => None,
        (0, _) => Some(0),
        _ => Some(exp_of_sum(
            usize::from(LOG[usize::from(a)]) + 255 - usize::from(LOG[usize::from(b)]),
        )),
    }
}

/// Multiplies each of the four bytes of `x` by α: shift left, and add `0x1D` where a bit fell off.
pub(crate) fn mul_alpha_lanes(x: u32) -> u32 {
    ((x & 0x7F7F_7F7F) << 1) ^ (((x >> 7) & 0x0101_0101) * 0x1D)
}

/// Multiplies each of the eight bytes of `x` by α^8 (= `0x1D`) at once, with shifts and masks only.
///
/// The carry-less product x·(x^4 + x^3 + x^2 + 1) reaches bit 11; its bits 8..11 (`h`, from x's top four
/// bits) fold back as h·`0x1D`, which fits in a byte. By linearity the result is the low byte of
/// z·(x^4 + x^3 + x^2 + 1) with z = x ^ h.
pub(crate) fn mul_alpha8_lanes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let top = (x >> 4) & (0x0F * ONES);
    let h = top ^ ((top >> 1) & (0x07 * ONES)) ^ ((top >> 2) & (0x03 * ONES));
    let z = x ^ h;
    z ^ ((z << 2) & (0xFC * ONES)) ^ ((z << 3) & (0xF8 * ONES)) ^ ((z << 4) & (0xF0 * ONES))
}

/// Multiplies each of the eight bytes of `x` by α^40 = α^(8·HALF_CHUNKS), bit by bit: bit b of every byte,
/// isolated as 0 or 1, times the byte α^(40+b) cannot carry into the next byte, so an integer multiply does
/// eight lanes at once. Short dependency chains, unlike eight repeated multiplications by α^8.
pub(crate) fn mul_alpha40_lanes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const FACTORS: [u64; 8] = {
        let exp = build_exp();
        let mut factors = [0u64; 8];
        let mut bit = 0;
        while bit < 8 {
            factors[bit] = exp[40 + bit] as u64;
            bit += 1;
        }
        factors
    };
    let mut product = 0;
    for (bit, factor) in FACTORS.iter().enumerate() {
        product ^= ((x >> bit) & ONES) * factor;
    }
    product
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Multiplication by repeated shift-and-reduce, the textbook definition, to check the tables.
    fn mul_slow(mut a: u8, mut b: u8) -> u8 {
        let mut product = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                product ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= (POLY & 0xFF) as u8;
            }
            b >>= 1;
        }
        product
    }

    #[test]
    fn table_product_is_the_polynomial_product() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul_slow(a, b), "{a} * {b}");
            }
        }
    }

    #[test]
    fn every_nonzero_element_has_an_inverse() {
        for a in 1..=255u8 {
            let inverse = div(1, a).unwrap();
            assert_eq!(mul(a, inverse), 1);
            assert_eq!(div(mul(a, 0x53), a), Some(0x53));
        }
        assert_eq!(div(7, 0), None);
    }

    #[test]
    fn lane_multiply_by_alpha_matches_the_table_in_every_lane() {
        for value in 0..=255u8 {
            for lane in 0..4 {
                let x = (u32::from(value) << (8 * lane)) | (0x8F3C_E1A7 & !(0xFF << (8 * lane)));
                let product = mul_alpha_lanes(x).to_le_bytes();
                for (i, &byte) in x.to_le_bytes().iter().enumerate() {
                    assert_eq!(product[i], mul(byte, 2), "lane {i} of {x:08x}");
                }
            }
        }
    }

    #[test]
    fn lane_multiply_by_alpha40_matches_the_table_in_every_lane() {
        for value in 0..=255u8 {
            for lane in 0..8 {
                let background = 0x0F1E_2D3C_4B5A_6978u64 & !(0xFF << (8 * lane));
                let x = (u64::from(value) << (8 * lane)) | background;
                let product = mul_alpha40_lanes(x).to_le_bytes();
                for (i, &byte) in x.to_le_bytes().iter().enumerate() {
                    assert_eq!(product[i], mul(byte, exp(40)), "lane {i} of {x:016x}");
                }
            }
        }
    }

    #[test]
    fn lane_multiply_by_alpha8_matches_the_table_in_every_lane() {
        for value in 0..=255u8 {
            for lane in 0..8 {
                let background = 0xF1E2_D3C4_B5A6_9788u64 & !(0xFF << (8 * lane));
                let x = (u64::from(value) << (8 * lane)) | background;
                let product = mul_alpha8_lanes(x).to_le_bytes();
                for (i, &byte) in x.to_le_bytes().iter().enumerate() {
                    assert_eq!(product[i], mul(byte, exp(8)), "lane {i} of {x:016x}");
                }
            }
        }
    }
}
