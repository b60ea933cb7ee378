//! The code tables, generated at compile time from the 5b/6b and 3b/4b sub-block tables of IEEE 802.3
//! clause 36 (tables 36-1a..e, 36-2), which are the code of ANSI X3.230 and of PCI Express at 2.5/5 GT/s.
//!
//! Only the sub-block tables below are typed in; every full code group, both columns, the decode table and
//! the disparity flips are derived from them by the `const fn`s of this file. `tests/code8b10b_tables.rs`
//! checks the result against an independent transcription of the full published tables.

use crate::symbol::control;

/// 5b/6b sub-blocks for `EDCBA` = 0..=31, RD- column, written `abcdei` as in the standard (so `a` is the
/// leftmost, most significant digit of the literal; [`wire_order`] turns it around).
const FIVE_SIX: [u16; 32] = [
    0b100111, 0b011101, 0b101101, 0b110001, 0b110101, 0b101001, 0b011001, 0b111000, //
    0b111001, 0b100101, 0b010101, 0b110100, 0b001101, 0b101100, 0b011100, 0b010111, //
    0b011011, 0b100011, 0b010011, 0b110010, 0b001011, 0b101010, 0b011010, 0b111010, //
    0b110011, 0b100110, 0b010110, 0b110110, 0b001110, 0b101110, 0b011110, 0b101011,
];

/// The 6b sub-block of K28.y, RD- column (`abcdei`). It is what carries the comma.
const K28_SIX: u16 = 0b001111;

/// 3b/4b sub-blocks for `HGF` = 0..=7, RD- column, written `fghj` (D.x.P7 for 7).
const THREE_FOUR: [u16; 8] = [0b1011, 0b1001, 0b0101, 0b1100, 0b1101, 0b1010, 0b0110, 0b1110];

/// The alternate D.x.A7 / K.x.7 sub-block, RD- column (`fghj`).
const ALTERNATE_SEVEN: u16 = 0b0111;

/// `x` of the D.x.A7 code groups sent at RD- (after the 6b sub-block) and at RD+. Without the alternate
/// these would end in a run of five equal bits (`...11 1110`), or form a comma with what follows.
const A7_AT_NEGATIVE: [u8; 3] = [17, 18, 20];
const A7_AT_POSITIVE: [u8; 3] = [11, 13, 14];

/// Bits in one code group.
pub(crate) const CODE_BITS: u32 = 10;
/// Every 10-bit value.
pub(crate) const CODE_MASK: u16 = (1 << CODE_BITS) - 1;

/// Reverse the `n` digits of a sub-block written as in the standard, so that its first bit on the wire
/// (`a` or `f`) becomes bit 0.
const fn wire_order(written: u16, n: u32) -> u16 {
    let mut out = 0;
    let mut i = 0;
    while i < n {
        out |= ((written >> (n - 1 - i)) & 1) << i;
        i += 1;
    }
    out
}

const fn is_balanced(sub_block: u16, n: u32) -> bool {
    sub_block.count_ones() * 2 == n
}

const fn contains(list: &[u8], x: u8) -> bool {
    let mut i = 0;
    while i < list.len() {
        if list[i] == x {
            return true;
        }
        i += 1;
    }
    false
}

/// One sub-block sent at running disparity `positive`: the RD- form, complemented at RD+ when it is
/// unbalanced or one of the two balanced sub-blocks that alternate (D.7 = 111000/000111, D.x.3 =
/// 1100/0011). Returns the sub-block (written order) and the running disparity after it.
const fn sub_block(rd_minus: u16, n: u32, alternates: bool, positive: bool) -> (u16, bool) {
    let balanced = is_balanced(rd_minus, n);
    let sent = if positive && (!balanced || alternates) {
        !rd_minus & ((1 << n) - 1)
    } else {
        rd_minus
    };
    // An unbalanced sub-block always leans against the running disparity, so it flips it.
    (sent, if balanced { positive } else { !positive })
}

/// The data code group `Dx.y` at the given running disparity, bit `a` as bit 0, and whether the code group
/// flips the running disparity.
const fn data_code(byte: u8, positive: bool) -> (u16, bool) {
    let x = byte & 0x1F;
    let y = byte >> 5;
    let (six, rd6) = sub_block(FIVE_SIX[x as usize], 6, x == 7, positive);
    let alternate =
        y == 7 && ((!rd6 && contains(&A7_AT_NEGATIVE, x)) || (rd6 && contains(&A7_AT_POSITIVE, x)));
    let four_minus = if alternate {
        ALTERNATE_SEVEN
    } else {
        THREE_FOUR[y as usize]
    };
    let (four, rd4) = sub_block(four_minus, 4, y == 3, rd6);
    (wire_order(six, 6) | wire_order(four, 4) << 6, rd4 != positive)
}

/// The RD- code group of a control byte, or `None` if the byte has no K code group. K28.y is `001111`
/// followed by the 4b sub-block the data rules give after it (at RD+), with the alternate for y = 7; the
/// other four are `Kx.7` = the 6b sub-block of `Dx` followed by the alternate. The RD+ form of every K
/// code group is the complement of its RD- form.
pub(crate) const fn control_code_rd_minus(byte: u8) -> Option<u16> {
    if !control::is_control(byte) {
        return None;
    }
    let x = byte & 0x1F;
    let y = byte >> 5;
    let six_minus = if x == 28 { K28_SIX } else { FIVE_SIX[x as usize] };
    let (six, rd6) = sub_block(six_minus, 6, false, false);
    let four_minus = if y == 7 {
        ALTERNATE_SEVEN
    } else {
        THREE_FOUR[y as usize]
    };
    let (four, _) = sub_block(four_minus, 4, y == 3, rd6);
    Some(wire_order(six, 6) | wire_order(four, 4) << 6)
}

const fn complement(code: u16) -> u16 {
    !code & CODE_MASK
}

/// `[RD- code, RD+ code]` of every data byte.
pub(crate) static DATA_CODES: [[u16; 2]; 256] = {
    let mut table = [[0; 2]; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = [data_code(b as u8, false).0, data_code(b as u8, true).0];
        b += 1;
    }
    table
};

/// 1 where sending the data byte flips the running disparity. The same in both columns (each sub-block is
/// balanced or unbalanced in both), which is what lets the fast paths compute every RD of a stream up
/// front.
pub(crate) static DATA_FLIPS: [u8; 256] = {
    let mut table = [0; 256];
    let mut b = 0;
    while b < 256 {
        let (_, flip_at_minus) = data_code(b as u8, false);
        let (_, flip_at_plus) = data_code(b as u8, true);
        assert!(flip_at_minus == flip_at_plus);
        table[b] = flip_at_minus as u8;
        b += 1;
    }
    table
};

/// The RD- code group of each control byte, 0 for bytes without one (0 is no code group).
pub(crate) static CONTROL_CODES: [u16; 256] = {
    let mut table = [0; 256];
    let mut b = 0;
    while b < 256 {
        if let Some(code) = control_code_rd_minus(b as u8) {
            table[b] = code;
        }
        b += 1;
    }
    table
};

/// `[RD- code, RD+ code]` of a control byte.
pub(crate) fn control_codes(byte: u8) -> Option<[u16; 2]> {
    match CONTROL_CODES[usize::from(byte)] {
        0 => None,
        code => Some([code, complement(code)]),
    }
}

/// One entry of [`DECODE`], per 10-bit value. The layout serves both the scalar decoder and the
/// branch-free data fast path, which keeps the running disparity one-hot in bits 8..=9
/// (`NOT_DATA_AT_NEGATIVE << rd`) and XORs it with `entry >> 16` to apply the flip.
pub(crate) mod entry {
    /// Bits 0..=7: the byte.
    pub(crate) const BYTE: u32 = 0xFF;
    /// Not a data code group valid at RD- (invalid, a K code group, or RD+ only).
    pub(crate) const NOT_DATA_AT_NEGATIVE: u32 = 1 << 8;
    /// Not a data code group valid at RD+.
    pub(crate) const NOT_DATA_AT_POSITIVE: u32 = 1 << 9;
    /// A control (K) code group.
    pub(crate) const CONTROL: u32 = 1 << 10;
    /// A code group of the RD- column.
    pub(crate) const VALID_AT_NEGATIVE: u32 = 1 << 11;
    /// A code group of the RD+ column.
    pub(crate) const VALID_AT_POSITIVE: u32 = 1 << 12;
    /// Unbalanced: flips the running disparity (both one-hot bits, shifted up by 16).
    pub(crate) const FLIP: u32 = 0b11 << 24;
}

const fn add_to_decode_table(table: &mut [u32; 1024], code: u16, byte: u8, control: bool, positive: bool) {
    use entry::*;
    let e = &mut table[code as usize];
    let valid = if positive {
        VALID_AT_POSITIVE
    } else {
        VALID_AT_NEGATIVE
    };
    if *e & (VALID_AT_NEGATIVE | VALID_AT_POSITIVE) != 0 {
        // Already in the other column: it must mean the same symbol there (checked at compile time).
        assert!(*e & BYTE == byte as u32 && (*e & CONTROL != 0) == control);
    }
    *e = (*e & !BYTE) | byte as u32 | valid;
    if control {
        *e |= CONTROL;
    } else {
        *e &= !(if positive {
            NOT_DATA_AT_POSITIVE
        } else {
            NOT_DATA_AT_NEGATIVE
        });
    }
    if code.count_ones() != CODE_BITS / 2 {
        *e |= FLIP;
    }
}

/// Decoding information for every 10-bit value, see [`entry`].
pub(crate) static DECODE: [u32; 1024] = {
    let mut table = [entry::NOT_DATA_AT_NEGATIVE | entry::NOT_DATA_AT_POSITIVE; 1024];
    let mut b = 0;
    while b < 256 {
        let codes = DATA_CODES[b];
        add_to_decode_table(&mut table, codes[0], b as u8, false, false);
        add_to_decode_table(&mut table, codes[1], b as u8, false, true);
        if let Some(minus) = control_code_rd_minus(b as u8) {
            add_to_decode_table(&mut table, minus, b as u8, true, false);
            add_to_decode_table(&mut table, complement(minus), b as u8, true, true);
        }
        b += 1;
    }
    table
};

/// The decode entry of any `u16`; values wider than 10 bits are invalid.
pub(crate) fn decode_entry(code: u16) -> u32 {
    if code > CODE_MASK {
        entry::NOT_DATA_AT_NEGATIVE | entry::NOT_DATA_AT_POSITIVE
    } else {
        DECODE[usize::from(code)]
    }
}
