//! Ordered-set blocks at 8 GT/s (PCIe 4.2.5 and 4.2.8.2, tables 4-34, 4-35, 4-41, 4-44, 4-49, 4-50 and the
//! standard SKP ordered set). The first symbol names the ordered set.
//!
//! Payloads here are unscrambled: the symbols as the tables list them. Which of them are scrambled on the
//! wire is decided by [`super::LaneEncoder`] and undone by [`super::LaneDecoder`].

use super::block::{Block, BLOCK_SYMBOLS};
use crate::error::Error;
use crate::ordered_set::{DataRates, TrainingControl, TrainingSet, TsKind, TS1_IDENTIFIER, TS2_IDENTIFIER};

/// Symbol 0 of a TS1 ordered set at 128b/130b.
pub const TS1_ID: u8 = 0x1E;
/// Symbol 0 of a TS2 ordered set at 128b/130b.
pub const TS2_ID: u8 = 0x2D;
/// Symbol 0 of an EIEOS.
pub const EIEOS_ID: u8 = 0x00;
/// Every symbol of an EIOS.
pub const EIOS_ID: u8 = 0x66;
/// Symbol 0 of an SDS ordered set.
pub const SDS_ID: u8 = 0xE1;
/// Symbols 1-15 of an SDS ordered set at 8 and 16 GT/s.
pub const SDS_BODY: u8 = 0x55;
/// Symbol 0 of an FTS ordered set.
pub const FTS_ID: u8 = 0x55;
/// A SKP symbol (8 and 16 GT/s); symbol 0 of a SKP ordered set.
pub const SKP_SYMBOL: u8 = 0xAA;
/// SKP_END: three more symbols follow it, then the SKP ordered set ends.
pub const SKP_END: u8 = 0xE1;
/// PAD in the link and lane number symbols of a training set at 128b/130b.
pub const PAD: u8 = 0xF7;

/// DC balance symbol 14 that lowers the count of ones (sent unscrambled).
pub const DC_FEWER_ONES_14: u8 = 0x20;
/// DC balance symbol 15 that lowers the count of ones.
pub const DC_FEWER_ONES_15: u8 = 0x08;
/// DC balance symbol 14 that lowers the count of zeros.
pub const DC_FEWER_ZEROS_14: u8 = 0xDF;
/// DC balance symbol 15 that lowers the count of zeros.
pub const DC_FEWER_ZEROS_15: u8 = 0xF7;

/// The EIEOS at 8 GT/s (table 4-44): 00h and FFh alternating, eight 0 bits then eight 1 bits on the wire.
pub const EIEOS: [u8; BLOCK_SYMBOLS] = {
    let mut p = [0u8; BLOCK_SYMBOLS];
    let mut i = 1;
    while i < BLOCK_SYMBOLS {
        p[i] = 0xFF;
        i += 2;
    }
    p
};
/// The EIOS (table 4-41).
pub const EIOS: [u8; BLOCK_SYMBOLS] = [EIOS_ID; BLOCK_SYMBOLS];
/// The SDS ordered set at 8 and 16 GT/s (table 4-50).
pub const SDS: [u8; BLOCK_SYMBOLS] = {
    let mut p = [SDS_BODY; BLOCK_SYMBOLS];
    p[0] = SDS_ID;
    p
};
/// The FTS ordered set at 8 GT/s and up (table 4-49).
pub const FTS: [u8; BLOCK_SYMBOLS] = [
    0x55, 0x47, 0x4E, 0xC7, 0xCC, 0xC6, 0xC9, 0x25, 0x6E, 0xEC, 0x88, 0x7F, 0x80, 0x8D, 0x8B, 0x8E,
];
/// Where SKP_END sits in a 16-symbol SKP ordered set (twelve SKP symbols precede it).
pub const SKP_END_POSITION: usize = 12;

/// An ordered-set block, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderedSetBlock {
    /// Electrical idle exit: block alignment pattern; resets the scrambler.
    Eieos,
    /// Electrical idle.
    Eios,
    /// SKP ordered set (clock compensation). `tail` holds the three symbols after SKP_END: bit 7 of the
    /// first is the data parity (after a data block) or ~LFSR\[22\], then LFSR\[22:16\], LFSR\[15:8\], LFSR\[7:0\].
    /// The transmitter fills them in ([`super::LaneEncoder`]); what is given here is ignored on transmit.
    Skp {
        /// Symbols 4N+1 .. 4N+3.
        tail: [u8; 3],
    },
    /// Start of data stream: data blocks follow.
    Sds,
    /// Fast training sequence.
    Fts,
    /// TS1 or TS2.
    Training(TrainingSet),
}

/// How the block code treats an ordered set, known from its first symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OrderedSetKind {
    Eieos,
    Skp,
    Sds,
    Training,
    /// EIOS, FTS and anything unknown: unscrambled, advancing the LFSR.
    Other,
}

impl OrderedSetKind {
    pub(crate) const fn of(symbol0: u8) -> OrderedSetKind {
        match symbol0 {
            EIEOS_ID => OrderedSetKind::Eieos,
            SKP_SYMBOL => OrderedSetKind::Skp,
            SDS_ID => OrderedSetKind::Sds,
            TS1_ID | TS2_ID => OrderedSetKind::Training,
            _ => OrderedSetKind::Other,
        }
    }
}

/// The LFSR value a SKP ordered set's tail carries (23 bits, D0 in bit 0).
pub const fn skp_lfsr(tail: [u8; 3]) -> u32 {
    ((tail[0] as u32 & 0x7F) << 16) | (tail[1] as u32) << 8 | tail[2] as u32
}

/// The SKP tail for LFSR `state` with `bit7` in bit 7 of its first symbol.
pub const fn skp_tail(state: u32, bit7: bool) -> [u8; 3] {
    [
        ((bit7 as u8) << 7) | ((state >> 16) as u8 & 0x7F),
        (state >> 8) as u8,
        state as u8,
    ]
}

/// Even parity of TS1 symbols 6-8 and bits 6:0 of symbol 9 (table 4-34, symbol 9 bit 7).
const fn equalization_parity(p: &[u8; BLOCK_SYMBOLS]) -> u8 {
    ((p[6] ^ p[7] ^ p[8] ^ (p[9] & 0x7F)).count_ones() & 1) as u8
}

impl OrderedSetBlock {
    /// A SKP ordered set with 12 SKP symbols; the encoder fills in the tail.
    pub const fn skp() -> OrderedSetBlock {
        OrderedSetBlock::Skp { tail: [0; 3] }
    }

    /// The 16 unscrambled symbols.
    ///
    /// Training sets: symbol 0 is 1Eh/2Dh; PAD link or lane numbers are F7h (so link number F7h cannot be
    /// told from PAD); symbols 6-9 carry no equalization request: a TS1 sends 00h in all four (EC = 00b, no
    /// preset, zero coefficients, parity 0), a TS2 sends 00h then 45h in 7-9; symbols 10-15 are the
    /// identifier (4Ah or 45h). The encoder may replace symbols 14-15 with DC balance symbols.
    pub fn to_payload(&self) -> [u8; BLOCK_SYMBOLS] {
        match self {
            OrderedSetBlock::Eieos => EIEOS,
            OrderedSetBlock::Eios => EIOS,
            OrderedSetBlock::Sds => SDS,
            OrderedSetBlock::Fts => FTS,
            OrderedSetBlock::Skp { tail } => {
                let mut p = [SKP_SYMBOL; BLOCK_SYMBOLS];
                p[SKP_END_POSITION] = SKP_END;
                p[SKP_END_POSITION + 1..].copy_from_slice(tail);
                p
            }
            OrderedSetBlock::Training(ts) => {
                let identifier = ts.kind.identifier();
                let mut p = [identifier; BLOCK_SYMBOLS];
                p[0] = match ts.kind {
                    TsKind::Ts1 => TS1_ID,
                    TsKind::Ts2 => TS2_ID,
                };
                p[1] = ts.link.unwrap_or(PAD);
                p[2] = ts.lane.unwrap_or(PAD);
                p[3] = ts.n_fts;
                p[4] = ts.rates.bits();
                p[5] = ts.control.bits();
                p[6] = 0;
                if ts.kind == TsKind::Ts1 {
                    p[7..10].fill(0);
                }
                p
            }
        }
    }

    /// This ordered set as a block.
    pub fn to_block(&self) -> Block {
        Block::ordered_set(self.to_payload())
    }

    /// Parse 16 unscrambled symbols (a received ordered-set block after [`super::LaneDecoder`]). A SKP
    /// ordered set must be in the 16-symbol form the decoder delivers (12 SKP, SKP_END, tail).
    pub fn parse(p: &[u8; BLOCK_SYMBOLS]) -> Result<OrderedSetBlock, Error> {
        let bad = |position: usize| Error::MalformedOrderedSet {
            position,
            found: p[position],
        };
        let expect = |fixed: &[u8; BLOCK_SYMBOLS]| match (0..BLOCK_SYMBOLS).find(|&i| p[i] != fixed[i]) {
            Some(i) => Err(bad(i)),
            None => Ok(()),
        };
        match p[0] {
            EIEOS_ID => expect(&EIEOS).map(|()| OrderedSetBlock::Eieos),
            EIOS_ID => expect(&EIOS).map(|()| OrderedSetBlock::Eios),
            SDS_ID => expect(&SDS).map(|()| OrderedSetBlock::Sds),
            FTS_ID => expect(&FTS).map(|()| OrderedSetBlock::Fts),
            SKP_SYMBOL => {
                if let Some(i) = (1..SKP_END_POSITION).find(|&i| p[i] != SKP_SYMBOL) {
                    return Err(bad(i));
                }
                if p[SKP_END_POSITION] != SKP_END {
                    return Err(bad(SKP_END_POSITION));
                }
                Ok(OrderedSetBlock::Skp {
                    tail: [p[13], p[14], p[15]],
                })
            }
            TS1_ID | TS2_ID => Self::parse_training(p).map(OrderedSetBlock::Training),
            _ => Err(bad(0)),
        }
    }

    fn parse_training(p: &[u8; BLOCK_SYMBOLS]) -> Result<TrainingSet, Error> {
        let bad = |position: usize| Error::MalformedOrderedSet {
            position,
            found: p[position],
        };
        let (kind, identifier) = if p[0] == TS1_ID {
            (TsKind::Ts1, TS1_IDENTIFIER)
        } else {
            (TsKind::Ts2, TS2_IDENTIFIER)
        };
        match kind {
            // Symbols 6-9 carry equalization settings we do not model; only their parity must hold.
            TsKind::Ts1 if p[9] >> 7 != equalization_parity(p) => return Err(bad(9)),
            // Symbol 7 is an identifier, or (bit 7 set) a 128b/130b EQ TS2's preset.
            TsKind::Ts2 if p[7] != identifier && p[7] & 0x80 == 0 => return Err(bad(7)),
            TsKind::Ts2 if p[8] != identifier => return Err(bad(8)),
            TsKind::Ts2 if p[9] != identifier => return Err(bad(9)),
            _ => {}
        }
        if let Some(i) = (10..14).find(|&i| p[i] != identifier) {
            return Err(bad(i));
        }
        if ![identifier, DC_FEWER_ONES_14, DC_FEWER_ZEROS_14].contains(&p[14]) {
            return Err(bad(14));
        }
        if ![identifier, DC_FEWER_ONES_15, DC_FEWER_ZEROS_15].contains(&p[15]) {
            return Err(bad(15));
        }
        let number = |b: u8| if b == PAD { None } else { Some(b) };
        let lane = number(p[2]);
        if matches!(lane, Some(l) if l > 31) {
            return Err(bad(2));
        }
        Ok(TrainingSet {
            kind,
            link: number(p[1]),
            lane,
            n_fts: p[3],
            rates: DataRates::from_bits_retain(p[4]),
            control: TrainingControl::from_bits_retain(p[5]),
        })
    }
}

impl From<OrderedSetBlock> for Block {
    fn from(os: OrderedSetBlock) -> Block {
        os.to_block()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_sets_round_trip() {
        for os in [
            OrderedSetBlock::Eieos,
            OrderedSetBlock::Eios,
            OrderedSetBlock::Sds,
            OrderedSetBlock::Fts,
            OrderedSetBlock::Skp {
                tail: [0x9D, 0xBF, 0xBC],
            },
        ] {
            assert_eq!(OrderedSetBlock::parse(&os.to_payload()), Ok(os));
        }
    }

    #[test]
    fn ts1_parity_is_checked() {
        let ts = TrainingSet::polling(DataRates::GEN1 | DataRates::GEN3, 12);
        let mut p = OrderedSetBlock::Training(ts).to_payload();
        assert_eq!(OrderedSetBlock::parse(&p), Ok(OrderedSetBlock::Training(ts)));
        p[7] = 0x01;
        assert_eq!(
            OrderedSetBlock::parse(&p),
            Err(Error::MalformedOrderedSet {
                position: 9,
                found: 0
            })
        );
        p[9] = 0x80;
        assert_eq!(OrderedSetBlock::parse(&p), Ok(OrderedSetBlock::Training(ts)));
    }
}
