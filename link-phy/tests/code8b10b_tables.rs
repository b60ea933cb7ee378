//! Known-answer tests of the 8b/10b code tables against an independent published listing, and the code's
//! published properties (PCI Express facts from /work/shared/REFERENCE.md).

use link_phy::code8b10b::{contains_comma, decode_code_group, encode_symbol, SymbolName};
use link_phy::symbol::control;
use link_phy::{Disparity, Error, Symbol};

/// IEEE 802.3-2015 clause 36, tables 36-1a..36-1e (valid data code-groups) and 36-2 (valid special
/// code-groups), as transcribed in oxidecomputer/wfm-to-pcap, `src/main.rs` at commit ca56447 ("Table from
/// 802.3-2015 Section 3"). Columns: name, octet (hex), HGF, EDCBA, RD- `abcdei fghj`, RD+ `abcdei fghj`.
/// The twelve special code-groups agree with the table of US patent 4486739 (Franaszek and Widmer) as
/// reprinted in the Teledyne LeCroy "Serial Data Debug Solutions" operator's manual, table 3-4.
const IEEE_802_3_TABLES_36_1_AND_36_2: &str = "
D0.0 00 000 00000 100111 0100 011000 1011
D1.0 01 000 00001 011101 0100 100010 1011
D2.0 02 000 00010 101101 0100 010010 1011
D3.0 03 000 00011 110001 1011 110001 0100
D4.0 04 000 00100 110101 0100 001010 1011
D5.0 05 000 00101 101001 1011 101001 0100
D6.0 06 000 00110 011001 1011 011001 0100
D7.0 07 000 00111 111000 1011 000111 0100
D8.0 08 000 01000 111001 0100 000110 1011
D9.0 09 000 01001 100101 1011 100101 0100
D10.0 0A 000 01010 010101 1011 010101 0100
D11.0 0B 000 01011 110100 1011 110100 0100
D12.0 0C 000 01100 001101 1011 001101 0100
D13.0 0D 000 01101 101100 1011 101100 0100
D14.0 0E 000 01110 011100 1011 011100 0100
D15.0 0F 000 01111 010111 0100 101000 1011
D16.0 10 000 10000 011011 0100 100100 1011
D17.0 11 000 10001 100011 1011 100011 0100
D18.0 12 000 10010 010011 1011 010011 0100
D19.0 13 000 10011 110010 1011 110010 0100
D20.0 14 000 10100 001011 1011 001011 0100
D21.0 15 000 10101 101010 1011 101010 0100
D22.0 16 000 10110 011010 1011 011010 0100
D23.0 17 000 10111 111010 0100 000101 1011
D24.0 18 000 11000 110011 0100 001100 1011
D25.0 19 000 11001 100110 1011 100110 0100
D26.0 1A 000 11010 010110 1011 010110 0100
D27.0 1B 000 11011 110110 0100 001001 1011
D28.0 1C 000 11100 001110 1011 001110 0100
D29.0 1D 000 11101 101110 0100 010001 1011
D30.0 1E 000 11110 011110 0100 100001 1011
D31.0 1F 000 11111 101011 0100 010100 1011
D0.1 20 001 00000 100111 1001 011000 1001
D1.1 21 001 00001 011101 1001 100010 1001
D2.1 22 001 00010 101101 1001 010010 1001
D3.1 23 001 00011 110001 1001 110001 1001
D4.1 24 001 00100 110101 1001 001010 1001
D5.1 25 001 00101 101001 1001 101001 1001
D6.1 26 001 00110 011001 1001 011001 1001
D7.1 27 001 00111 111000 1001 000111 1001
D8.1 28 001 01000 111001 1001 000110 1001
D9.1 29 001 01001 100101 1001 100101 1001
D10.1 2A 001 01010 010101 1001 010101 1001
D11.1 2B 001 01011 110100 1001 110100 1001
D12.1 2C 001 01100 001101 1001 001101 1001
D13.1 2D 001 01101 101100 1001 101100 1001
D14.1 2E 001 01110 011100 1001 011100 1001
D15.1 2F 001 01111 010111 1001 101000 1001
D16.1 30 001 10000 011011 1001 100100 1001
D17.1 31 001 10001 100011 1001 100011 1001
D18.1 32 001 10010 010011 1001 010011 1001
D19.1 33 001 10011 110010 1001 110010 1001
D20.1 34 001 10100 001011 1001 001011 1001
D21.1 35 001 10101 101010 1001 101010 1001
D22.1 36 001 10110 011010 1001 011010 1001
D23.1 37 001 10111 111010 1001 000101 1001
D24.1 38 001 11000 110011 1001 001100 1001
D25.1 39 001 11001 100110 1001 100110 1001
D26.1 3A 001 11010 010110 1001 010110 1001
D27.1 3B 001 11011 110110 1001 001001 1001
D28.1 3C 001 11100 001110 1001 001110 1001
D29.1 3D 001 11101 101110 1001 010001 1001
D30.1 3E 001 11110 011110 1001 100001 1001
D31.1 3F 001 11111 101011 1001 010100 1001
D0.2 40 010 00000 100111 0101 011000 0101
D1.2 41 010 00001 011101 0101 100010 0101
D2.2 42 010 00010 101101 0101 010010 0101
D3.2 43 010 00011 110001 0101 110001 0101
D4.2 44 010 00100 110101 0101 001010 0101
D5.2 45 010 00101 101001 0101 101001 0101
D6.2 46 010 00110 011001 0101 011001 0101
D7.2 47 010 00111 111000 0101 000111 0101
D8.2 48 010 01000 111001 0101 000110 0101
D9.2 49 010 01001 100101 0101 100101 0101
D10.2 4A 010 01010 010101 0101 010101 0101
D11.2 4B 010 01011 110100 0101 110100 0101
D12.2 4C 010 01100 001101 0101 001101 0101
D13.2 4D 010 01101 101100 0101 101100 0101
D14.2 4E 010 01110 011100 0101 011100 0101
D15.2 4F 010 01111 010111 0101 101000 0101
D16.2 50 010 10000 011011 0101 100100 0101
D17.2 51 010 10001 100011 0101 100011 0101
D18.2 52 010 10010 010011 0101 010011 0101
D19.2 53 010 10011 110010 0101 110010 0101
D20.2 54 010 10100 001011 0101 001011 0101
D21.2 55 010 10101 101010 0101 101010 0101
D22.2 56 010 10110 011010 0101 011010 0101
D23.2 57 010 10111 111010 0101 000101 0101
D24.2 58 010 11000 110011 0101 001100 0101
D25.2 59 010 11001 100110 0101 100110 0101
D26.2 5A 010 11010 010110 0101 010110 0101
D27.2 5B 010 11011 110110 0101 001001 0101
D28.2 5C 010 11100 001110 0101 001110 0101
D29.2 5D 010 11101 101110 0101 010001 0101
D30.2 5E 010 11110 011110 0101 100001 0101
D31.2 5F 010 11111 101011 0101 010100 0101
D0.3 60 011 00000 100111 0011 011000 1100
D1.3 61 011 00001 011101 0011 100010 1100
D2.3 62 011 00010 101101 0011 010010 1100
D3.3 63 011 00011 110001 1100 110001 0011
D4.3 64 011 00100 110101 0011 001010 1100
D5.3 65 011 00101 101001 1100 101001 0011
D6.3 66 011 00110 011001 1100 011001 0011
D7.3 67 011 00111 111000 1100 000111 0011
D8.3 68 011 01000 111001 0011 000110 1100
D9.3 69 011 01001 100101 1100 100101 0011
D10.3 6A 011 01010 010101 1100 010101 0011
D11.3 6B 011 01011 110100 1100 110100 0011
D12.3 6C 011 01100 001101 1100 001101 0011
D13.3 6D 011 01101 101100 1100 101100 0011
D14.3 6E 011 01110 011100 1100 011100 0011
D15.3 6F 011 01111 010111 0011 101000 1100
D16.3 70 011 10000 011011 0011 100100 1100
D17.3 71 011 10001 100011 1100 100011 0011
D18.3 72 011 10010 010011 1100 010011 0011
D19.3 73 011 10011 110010 1100 110010 0011
D20.3 74 011 10100 001011 1100 001011 0011
D21.3 75 011 10101 101010 1100 101010 0011
D22.3 76 011 10110 011010 1100 011010 0011
D23.3 77 011 10111 111010 0011 000101 1100
D24.3 78 011 11000 110011 0011 001100 1100
D25.3 79 011 11001 100110 1100 100110 0011
D26.3 7A 011 11010 010110 1100 010110 0011
D27.3 7B 011 11011 110110 0011 001001 1100
D28.3 7C 011 11100 001110 1100 001110 0011
D29.3 7D 011 11101 101110 0011 010001 1100
D30.3 7E 011 11110 011110 0011 100001 1100
D31.3 7F 011 11111 101011 0011 010100 1100
D0.4 80 100 00000 100111 0010 011000 1101
D1.4 81 100 00001 011101 0010 100010 1101
D2.4 82 100 00010 101101 0010 010010 1101
D3.4 83 100 00011 110001 1101 110001 0010
D4.4 84 100 00100 110101 0010 001010 1101
D5.4 85 100 00101 101001 1101 101001 0010
D6.4 86 100 00110 011001 1101 011001 0010
D7.4 87 100 00111 111000 1101 000111 0010
D8.4 88 100 01000 111001 0010 000110 1101
D9.4 89 100 01001 100101 1101 100101 0010
D10.4 8A 100 01010 010101 1101 010101 0010
D11.4 8B 100 01011 110100 1101 110100 0010
D12.4 8C 100 01100 001101 1101 001101 0010
D13.4 8D 100 01101 101100 1101 101100 0010
D14.4 8E 100 01110 011100 1101 011100 0010
D15.4 8F 100 01111 010111 0010 101000 1101
D16.4 90 100 10000 011011 0010 100100 1101
D17.4 91 100 10001 100011 1101 100011 0010
D18.4 92 100 10010 010011 1101 010011 0010
D19.4 93 100 10011 110010 1101 110010 0010
D20.4 94 100 10100 001011 1101 001011 0010
D21.4 95 100 10101 101010 1101 101010 0010
D22.4 96 100 10110 011010 1101 011010 0010
D23.4 97 100 10111 111010 0010 000101 1101
D24.4 98 100 11000 110011 0010 001100 1101
D25.4 99 100 11001 100110 1101 100110 0010
D26.4 9A 100 11010 010110 1101 010110 0010
D27.4 9B 100 11011 110110 0010 001001 1101
D28.4 9C 100 11100 001110 1101 001110 0010
D29.4 9D 100 11101 101110 0010 010001 1101
D30.4 9E 100 11110 011110 0010 100001 1101
D31.4 9F 100 11111 101011 0010 010100 1101
D0.5 A0 101 00000 100111 1010 011000 1010
D1.5 A1 101 00001 011101 1010 100010 1010
D2.5 A2 101 00010 101101 1010 010010 1010
D3.5 A3 101 00011 110001 1010 110001 1010
D4.5 A4 101 00100 110101 1010 001010 1010
D5.5 A5 101 00101 101001 1010 101001 1010
D6.5 A6 101 00110 011001 1010 011001 1010
D7.5 A7 101 00111 111000 1010 000111 1010
D8.5 A8 101 01000 111001 1010 000110 1010
D9.5 A9 101 01001 100101 1010 100101 1010
D10.5 AA 101 01010 010101 1010 010101 1010
D11.5 AB 101 01011 110100 1010 110100 1010
D12.5 AC 101 01100 001101 1010 001101 1010
D13.5 AD 101 01101 101100 1010 101100 1010
D14.5 AE 101 01110 011100 1010 011100 1010
D15.5 AF 101 01111 010111 1010 101000 1010
D16.5 B0 101 10000 011011 1010 100100 1010
D17.5 B1 101 10001 100011 1010 100011 1010
D18.5 B2 101 10010 010011 1010 010011 1010
D19.5 B3 101 10011 110010 1010 110010 1010
D20.5 B4 101 10100 001011 1010 001011 1010
D21.5 B5 101 10101 101010 1010 101010 1010
D22.5 B6 101 10110 011010 1010 011010 1010
D23.5 B7 101 10111 111010 1010 000101 1010
D24.5 B8 101 11000 110011 1010 001100 1010
D25.5 B9 101 11001 100110 1010 100110 1010
D26.5 BA 101 11010 010110 1010 010110 1010
D27.5 BB 101 11011 110110 1010 001001 1010
D28.5 BC 101 11100 001110 1010 001110 1010
D29.5 BD 101 11101 101110 1010 010001 1010
D30.5 BE 101 11110 011110 1010 100001 1010
D31.5 BF 101 11111 101011 1010 010100 1010
D0.6 C0 110 00000 100111 0110 011000 0110
D1.6 C1 110 00001 011101 0110 100010 0110
D2.6 C2 110 00010 101101 0110 010010 0110
D3.6 C3 110 00011 110001 0110 110001 0110
D4.6 C4 110 00100 110101 0110 001010 0110
D5.6 C5 110 00101 101001 0110 101001 0110
D6.6 C6 110 00110 011001 0110 011001 0110
D7.6 C7 110 00111 111000 0110 000111 0110
D8.6 C8 110 01000 111001 0110 000110 0110
D9.6 C9 110 01001 100101 0110 100101 0110
D10.6 CA 110 01010 010101 0110 010101 0110
D11.6 CB 110 01011 110100 0110 110100 0110
D12.6 CC 110 01100 001101 0110 001101 0110
D13.6 CD 110 01101 101100 0110 101100 0110
D14.6 CE 110 01110 011100 0110 011100 0110
D15.6 CF 110 01111 010111 0110 101000 0110
D16.6 D0 110 10000 011011 0110 100100 0110
D17.6 D1 110 10001 100011 0110 100011 0110
D18.6 D2 110 10010 010011 0110 010011 0110
D19.6 D3 110 10011 110010 0110 110010 0110
D20.6 D4 110 10100 001011 0110 001011 0110
D21.6 D5 110 10101 101010 0110 101010 0110
D22.6 D6 110 10110 011010 0110 011010 0110
D23.6 D7 110 10111 111010 0110 000101 0110
D24.6 D8 110 11000 110011 0110 001100 0110
D25.6 D9 110 11001 100110 0110 100110 0110
D26.6 DA 110 11010 010110 0110 010110 0110
D27.6 DB 110 11011 110110 0110 001001 0110
D28.6 DC 110 11100 001110 0110 001110 0110
D29.6 DD 110 11101 101110 0110 010001 0110
D30.6 DE 110 11110 011110 0110 100001 0110
D31.6 DF 110 11111 101011 0110 010100 0110
D0.7 E0 111 00000 100111 0001 011000 1110
D1.7 E1 111 00001 011101 0001 100010 1110
D2.7 E2 111 00010 101101 0001 010010 1110
D3.7 E3 111 00011 110001 1110 110001 0001
D4.7 E4 111 00100 110101 0001 001010 1110
D5.7 E5 111 00101 101001 1110 101001 0001
D6.7 E6 111 00110 011001 1110 011001 0001
D7.7 E7 111 00111 111000 1110 000111 0001
D8.7 E8 111 01000 111001 0001 000110 1110
D9.7 E9 111 01001 100101 1110 100101 0001
D10.7 EA 111 01010 010101 1110 010101 0001
D11.7 EB 111 01011 110100 1110 110100 1000
D12.7 EC 111 01100 001101 1110 001101 0001
D13.7 ED 111 01101 101100 1110 101100 1000
D14.7 EE 111 01110 011100 1110 011100 1000
D15.7 EF 111 01111 010111 0001 101000 1110
D16.7 F0 111 10000 011011 0001 100100 1110
D17.7 F1 111 10001 100011 0111 100011 0001
D18.7 F2 111 10010 010011 0111 010011 0001
D19.7 F3 111 10011 110010 1110 110010 0001
D20.7 F4 111 10100 001011 0111 001011 0001
D21.7 F5 111 10101 101010 1110 101010 0001
D22.7 F6 111 10110 011010 1110 011010 0001
D23.7 F7 111 10111 111010 0001 000101 1110
D24.7 F8 111 11000 110011 0001 001100 1110
D25.7 F9 111 11001 100110 1110 100110 0001
D26.7 FA 111 11010 010110 1110 010110 0001
D27.7 FB 111 11011 110110 0001 001001 1110
D28.7 FC 111 11100 001110 1110 001110 0001
D29.7 FD 111 11101 101110 0001 010001 1110
D30.7 FE 111 11110 011110 0001 100001 1110
D31.7 FF 111 11111 101011 0001 010100 1110
K28.0 1C 000 11100 001111 0100 110000 1011
K28.1 3C 001 11100 001111 1001 110000 0110
K28.2 5C 010 11100 001111 0101 110000 1010
K28.3 7C 011 11100 001111 0011 110000 1100
K28.4 9C 100 11100 001111 0010 110000 1101
K28.5 BC 101 11100 001111 1010 110000 0101
K28.6 DC 110 11100 001111 0110 110000 1001
K28.7 FC 111 11100 001111 1000 110000 0111
K23.7 F7 111 10111 111010 1000 000101 0111
K27.7 FB 111 11011 110110 1000 001001 0111
K29.7 FD 111 11101 101110 1000 010001 0111
K30.7 FE 111 11110 011110 1000 100001 0111
";

struct Row {
    symbol: Symbol,
    name: String,
    /// `[RD- code group, RD+ code group]`, bit `a` as bit 0.
    codes: [u16; 2],
}

/// A code group written `abcdei` + `fghj`, first bit on the wire first, as a value with `a` as bit 0.
fn written_to_wire(six: &str, four: &str) -> u16 {
    assert_eq!((six.len(), four.len()), (6, 4));
    six.chars()
        .chain(four.chars())
        .enumerate()
        .map(|(i, c)| match c {
            '0' => 0,
            '1' => 1 << i,
            _ => panic!("bad digit in {six} {four}"),
        })
        .sum()
}

fn published_rows() -> Vec<Row> {
    IEEE_802_3_TABLES_36_1_AND_36_2
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 8, "{line}");
            let byte = u8::from_str_radix(f[1], 16).unwrap();
            assert_eq!(format!("{}{}", f[2], f[3]), format!("{byte:08b}"), "{line}");
            let symbol = match &f[0][..1] {
                "D" => Symbol::Data(byte),
                "K" => Symbol::Control(byte),
                _ => panic!("{line}"),
            };
            Row {
                symbol,
                name: f[0].to_string(),
                codes: [written_to_wire(f[4], f[5]), written_to_wire(f[6], f[7])],
            }
        })
        .collect()
}

fn rd(column: usize) -> Disparity {
    [Disparity::Negative, Disparity::Positive][column]
}

fn ones_minus_zeros(code: u16) -> i32 {
    2 * code.count_ones() as i32 - 10
}

#[test]
fn the_transcription_lists_every_data_byte_and_every_control_byte_once() {
    let rows = published_rows();
    let mut data: Vec<u8> = rows
        .iter()
        .filter_map(|r| match r.symbol {
            Symbol::Data(b) => Some(b),
            Symbol::Control(_) => None,
        })
        .collect();
    data.sort_unstable();
    assert_eq!(data, (0..=255).collect::<Vec<u8>>());
    let mut k: Vec<u8> = rows
        .iter()
        .filter(|r| r.symbol.is_control())
        .map(|r| r.symbol.byte())
        .collect();
    let mut all = control::ALL.to_vec();
    k.sort_unstable();
    all.sort_unstable();
    assert_eq!(k, all);
}

#[test]
fn every_code_group_is_encoded_as_published() {
    for row in published_rows() {
        for column in 0..2 {
            let (code, after) = encode_symbol(rd(column), row.symbol).unwrap();
            assert_eq!(code, row.codes[column], "{} in column {column}", row.name);
            // The running disparity after a code group is the sign of the ones minus zeros sent so far,
            // which starts at -1 (RD-) or +1 (RD+).
            let sum = [-1, 1][column] + ones_minus_zeros(code);
            let expected = if sum < 0 {
                Disparity::Negative
            } else {
                Disparity::Positive
            };
            assert_eq!(sum.abs(), 1, "{}", row.name);
            assert_eq!(after, expected, "{}", row.name);
        }
    }
}

#[test]
fn every_published_code_group_decodes_to_its_symbol() {
    for row in published_rows() {
        for column in 0..2 {
            let (symbol, _) = decode_code_group(rd(column), row.codes[column]).unwrap();
            assert_eq!(symbol, row.symbol, "{}", row.name);
        }
    }
}

#[test]
fn the_decoder_accepts_exactly_the_published_code_groups() {
    let rows = published_rows();
    for value in 0..=u16::MAX {
        for column in 0..2 {
            let here = rows.iter().find(|r| r.codes[column] == value);
            let there = rows.iter().find(|r| r.codes[1 - column] == value);
            match (decode_code_group(rd(column), value), here, there) {
                (Ok((symbol, _)), Some(row), _) => assert_eq!(symbol, row.symbol),
                (
                    Err(Error::DisparityError {
                        position: 0,
                        code,
                        expected,
                    }),
                    None,
                    Some(_),
                ) => {
                    assert_eq!((code, expected), (value, rd(column)))
                }
                (Err(Error::InvalidCodeGroup { position: 0, code }), None, None) => assert_eq!(code, value),
                (outcome, ..) => panic!("{value:#05x} in column {column}: {outcome:?}"),
            }
        }
    }
}

#[test]
fn no_value_means_different_symbols_in_the_two_columns() {
    // Checked by the decoder over every 10-bit value, and independently in the published table.
    let mut in_both = 0;
    for value in 0..1024u16 {
        if let (Ok((a, _)), Ok((b, _))) = (
            decode_code_group(Disparity::Negative, value),
            decode_code_group(Disparity::Positive, value),
        ) {
            assert_eq!(a, b, "{value:#05x}");
            in_both += 1;
        }
    }
    let rows = published_rows();
    for r in &rows {
        for s in &rows {
            if r.codes[0] == s.codes[1] {
                assert_eq!(r.symbol, s.symbol, "{} / {}", r.name, s.name);
            }
        }
    }
    // The neutral code groups (balanced sub-blocks that do not alternate) are the same in both columns.
    let neutral = rows.iter().filter(|r| r.codes[0] == r.codes[1]).count();
    assert_eq!(in_both, neutral);
    assert!(neutral > 0);
}

/// Bits `a..=f` are `0011111` or `1100000`: the comma, checked here without the library.
fn starts_with_comma(code: u16) -> bool {
    matches!(code & 0x7F, 0b111_1100 | 0b000_0011)
}

#[test]
fn only_k28_1_k28_5_and_k28_7_contain_the_comma() {
    // REFERENCE.md (PCIe base specification, chapter 4): only K28.1, K28.5 and K28.7 contain the comma.
    let with_comma = [control::FTS, control::COM, control::EIE];
    for row in published_rows() {
        let expected = matches!(row.symbol, Symbol::Control(b) if with_comma.contains(&b));
        for code in row.codes {
            assert_eq!(starts_with_comma(code), expected, "{}", row.name);
            assert_eq!(contains_comma(code), expected, "{}", row.name);
            // ... and nowhere else inside any code group.
            for offset in 1..=3 {
                assert!(
                    !starts_with_comma(code >> offset),
                    "{} at offset {offset}",
                    row.name
                );
            }
        }
    }
}

#[test]
fn inverted_ts1_and_ts2_identifiers_read_as_d21_5_and_d26_5() {
    // REFERENCE.md: a receiver seeing D21.5 or D26.5 instead of D10.2 (TS1) or D5.2 (TS2) knows the lane's
    // polarity is inverted. Complementing every bit of the code group must give those symbols.
    for (sent, seen_inverted) in [(0x4A, 0xB5), (0x45, 0xBA)] {
        for column in 0..2 {
            let (code, _) = encode_symbol(rd(column), Symbol::Data(sent)).unwrap();
            let inverted = !code & 0x3FF;
            let decoded = [Disparity::Negative, Disparity::Positive]
                .iter()
                .filter_map(|&d| decode_code_group(d, inverted).ok())
                .map(|(s, _)| s)
                .next();
            assert_eq!(decoded, Some(Symbol::Data(seen_inverted)));
        }
    }
}

#[test]
fn pcie_control_symbols_have_the_published_names_and_bytes() {
    // REFERENCE.md: COM K28.5 (BCh), STP K27.7 (FBh), SDP K28.2 (5Ch), END K29.7 (FDh), EDB K30.7 (FEh),
    // PAD K23.7 (F7h), SKP K28.0 (1Ch), FTS K28.1 (3Ch), IDL K28.3 (7Ch), EIE K28.7 (FCh).
    let published = [
        ("K28.5", 0xBC, control::COM),
        ("K27.7", 0xFB, control::STP),
        ("K28.2", 0x5C, control::SDP),
        ("K29.7", 0xFD, control::END),
        ("K30.7", 0xFE, control::EDB),
        ("K23.7", 0xF7, control::PAD),
        ("K28.0", 0x1C, control::SKP),
        ("K28.1", 0x3C, control::FTS),
        ("K28.3", 0x7C, control::IDL),
        ("K28.7", 0xFC, control::EIE),
    ];
    let rows = published_rows();
    for (name, byte, constant) in published {
        assert_eq!(byte, constant, "{name}");
        assert_eq!(SymbolName(Symbol::Control(byte)).to_string(), name);
        assert!(rows
            .iter()
            .any(|r| r.name == name && r.symbol == Symbol::Control(byte)));
    }
    assert_eq!(SymbolName(Symbol::Data(0x4A)).to_string(), "D10.2");
    assert_eq!(SymbolName(Symbol::Data(0xFF)).to_string(), "D31.7");
}

#[test]
fn k28_5_is_0x17c_and_0x283_in_our_bit_order() {
    // lib.rs and docs/spec.md section 0: abcdei fghj = 001111 1010 is 0x17C.
    assert_eq!(encode_symbol(Disparity::Negative, Symbol::COM).unwrap().0, 0x17C);
    assert_eq!(encode_symbol(Disparity::Positive, Symbol::COM).unwrap().0, 0x283);
}

#[test]
fn bytes_without_a_k_code_group_are_refused() {
    for byte in 0..=255u8 {
        let result = encode_symbol(Disparity::Negative, Symbol::Control(byte));
        if control::is_control(byte) {
            assert!(result.is_ok());
        } else {
            assert_eq!(result, Err(Error::NotAControlSymbol { byte }));
        }
    }
}

/// The rows of the markdown tables in section 1.1 of docs/spec.md, as trimmed cells without backticks.
fn spec_section_1_1_rows() -> Vec<Vec<String>> {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec.md")).unwrap();
    let start = spec.find("### 1.1 ").unwrap();
    let end = start + spec[start..].find("\n### 1.2 ").unwrap();
    spec[start..end]
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect()
}

/// `abcdei fghj` as written in the spec, checked against the hex form given beside it.
fn spec_code_group(bits: &str, hex: &str) -> u16 {
    let (six, four) = bits.split_once(' ').unwrap();
    let code = written_to_wire(six, four);
    assert_eq!(u16::from_str_radix(hex, 16).unwrap(), code, "{bits} vs {hex}");
    code
}

fn published_row(rows: &[Row], symbol: Symbol) -> &Row {
    rows.iter().find(|r| r.symbol == symbol).unwrap()
}

#[test]
fn control_symbol_table_of_section_1_1() {
    let published = published_rows();
    let table: Vec<Vec<String>> = spec_section_1_1_rows()
        .into_iter()
        .filter(|r| r.len() == 8 && r[1].starts_with('K'))
        .collect();
    let names = [
        ("COM", control::COM),
        ("STP", control::STP),
        ("SDP", control::SDP),
        ("END", control::END),
        ("EDB", control::EDB),
        ("PAD", control::PAD),
        ("SKP", control::SKP),
        ("FTS", control::FTS),
        ("IDL", control::IDL),
        ("EIE", control::EIE),
        ("(reserved)", control::K28_4),
        ("(reserved)", control::K28_6),
    ];
    assert_eq!(table.len(), names.len());
    for (row, (name, byte)) in table.iter().zip(names) {
        let symbol = Symbol::Control(byte);
        assert_eq!(row[0], name);
        assert_eq!(row[1], SymbolName(symbol).to_string());
        assert_eq!(row[2], format!("{byte:02X}h"));
        let codes = [
            spec_code_group(&row[3], &row[4]),
            spec_code_group(&row[5], &row[6]),
        ];
        assert_eq!(codes, published_row(&published, symbol).codes, "{name}");
        for (column, code) in codes.into_iter().enumerate() {
            assert_eq!(encode_symbol(rd(column), symbol).unwrap().0, code);
            assert_eq!(row[7] == "yes", starts_with_comma(code), "{name}");
        }
    }
}

#[test]
fn worked_example_of_section_1_1() {
    let published = published_rows();
    let example: Vec<Vec<String>> = spec_section_1_1_rows()
        .into_iter()
        .filter(|r| r.len() == 6 && (r[2] == "-" || r[2] == "+"))
        .collect();
    assert_eq!(example.len(), 8);
    let sign = |s: &str| match s {
        "-" => Disparity::Negative,
        "+" => Disparity::Positive,
        _ => panic!("{s}"),
    };
    let mut encoder = link_phy::code8b10b::Encoder::new();
    let mut column = 0;
    for row in &example {
        let byte = u8::from_str_radix(row[1].trim_end_matches('h'), 16).unwrap();
        let symbol = if row[0].starts_with('K') {
            Symbol::Control(byte)
        } else {
            Symbol::Data(byte)
        };
        assert_eq!(row[0], SymbolName(symbol).to_string());
        let code = spec_code_group(&row[3], &row[4]);
        // The published table, following the running disparity by hand ...
        assert_eq!(sign(&row[2]), rd(column), "{}", row[0]);
        assert_eq!(
            code,
            published_row(&published, symbol).codes[column],
            "{}",
            row[0]
        );
        let sum = [-1, 1][column] + ones_minus_zeros(code);
        column = usize::from(sum > 0);
        assert_eq!(sign(&row[5]), rd(column), "{}", row[0]);
        // ... and the encoder agree with the spec.
        assert_eq!(encoder.disparity(), sign(&row[2]));
        assert_eq!(encoder.encode(symbol), Ok(code), "{}", row[0]);
        assert_eq!(encoder.disparity(), sign(&row[5]));
    }
}
