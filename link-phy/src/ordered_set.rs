//! Ordered sets: the fixed symbol patterns that train, pace and idle a link (PCIe Base Specification 4.2.4).
//!
//! This module holds the training sets' parsed form, [`TrainingSet`], and their 8b/10b encoding
//! (16 symbols starting with COM). The 128b/130b encoding of the same sets lives in
//! [`crate::code128b130b::ordered_set`].

use crate::error::Error;
use crate::symbol::{control, Symbol};

/// Which training set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TsKind {
    /// TS1: "I am training; here is what I propose".
    Ts1,
    /// TS2: "I agree; ready to move on".
    Ts2,
}

impl TsKind {
    /// The identifier byte filling symbols 6-15 at 8b/10b: D10.2 for TS1, D5.2 for TS2.
    pub const fn identifier(self) -> u8 {
        match self {
            TsKind::Ts1 => TS1_IDENTIFIER,
            TsKind::Ts2 => TS2_IDENTIFIER,
        }
    }
}

/// D10.2, the TS1 identifier symbol.
pub const TS1_IDENTIFIER: u8 = 0x4A;
/// D5.2, the TS2 identifier symbol.
pub const TS2_IDENTIFIER: u8 = 0x45;
/// D21.5: what a TS1 identifier decodes to on a lane whose polarity is inverted.
pub const TS1_IDENTIFIER_INVERTED: u8 = 0xB5;
/// D26.5: what a TS2 identifier decodes to on a lane whose polarity is inverted.
pub const TS2_IDENTIFIER_INVERTED: u8 = 0xBA;

bitflags::bitflags! {
    /// The data rate identifier, symbol 4 of a training set.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct DataRates: u8 {
        /// 2.5 GT/s (8b/10b), which every port supports.
        const GEN1 = 1 << 1;
        /// 5.0 GT/s (8b/10b).
        const GEN2 = 1 << 2;
        /// 8.0 GT/s (128b/130b).
        const GEN3 = 1 << 3;
        /// 16.0 GT/s (128b/130b).
        const GEN4 = 1 << 4;
        /// 32.0 GT/s (128b/130b).
        const GEN5 = 1 << 5;
        /// The speed change is autonomous (not for reliability).
        const AUTONOMOUS_CHANGE = 1 << 6;
        /// The sender asks to change speed (Recovery.Speed follows).
        const SPEED_CHANGE = 1 << 7;
    }
}

bitflags::bitflags! {
    /// The training control field, symbol 5 of a training set.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct TrainingControl: u8 {
        /// Hot reset.
        const HOT_RESET = 1 << 0;
        /// Disable the link.
        const DISABLE_LINK = 1 << 1;
        /// Enter loopback.
        const LOOPBACK = 1 << 2;
        /// Turn scrambling off (8b/10b only).
        const DISABLE_SCRAMBLING = 1 << 3;
        /// Compliance receive.
        const COMPLIANCE_RECEIVE = 1 << 4;
    }
}

/// A parsed TS1 or TS2 ordered set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrainingSet {
    /// TS1 or TS2.
    pub kind: TsKind,
    /// Link number, or `None` for PAD.
    pub link: Option<u8>,
    /// Lane number (0-31), or `None` for PAD.
    pub lane: Option<u8>,
    /// Fast training sequences the sender needs to leave L0s.
    pub n_fts: u8,
    /// Data rates the sender supports, and the speed-change request.
    pub rates: DataRates,
    /// Training control bits.
    pub control: TrainingControl,
}

/// Symbols in a training set.
pub const TS_LEN: usize = 16;

/// What a received training set's identifier says about the lane it came on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polarity {
    /// The identifiers decoded as sent.
    Normal,
    /// The identifiers decoded as D21.5 / D26.5: the lane's differential pair is swapped.
    Inverted,
}

impl TrainingSet {
    /// A TS1 with PAD link and lane numbers, as sent in Polling.
    pub const fn polling(rates: DataRates, n_fts: u8) -> Self {
        TrainingSet {
            kind: TsKind::Ts1,
            link: None,
            lane: None,
            n_fts,
            rates,
            control: TrainingControl::empty(),
        }
    }

    /// This set as 16 8b/10b symbols: COM, link, lane, N_FTS, rate, control, then ten identifiers.
    pub fn to_symbols(&self) -> [Symbol; TS_LEN] {
        let mut s = [Symbol::Data(self.kind.identifier()); TS_LEN];
        s[0] = Symbol::COM;
        s[1] = self.link.map_or(Symbol::PAD, Symbol::Data);
        s[2] = self.lane.map_or(Symbol::PAD, Symbol::Data);
        s[3] = Symbol::Data(self.n_fts);
        s[4] = Symbol::Data(self.rates.bits());
        s[5] = Symbol::Data(self.control.bits());
        s
    }

    /// Parse 16 8b/10b symbols. Besides the set, says whether the identifiers arrived inverted, which
    /// a receiver uses to correct the lane's polarity (PCIe 4.2.4.4).
    pub fn from_symbols(s: &[Symbol; TS_LEN]) -> Result<(TrainingSet, Polarity), Error> {
        let bad = |position: usize| Error::MalformedOrderedSet {
            position,
            found: s[position].byte(),
        };
        if s[0] != Symbol::COM {
            return Err(bad(0));
        }
        let (kind, polarity) = match s[6] {
            Symbol::Data(TS1_IDENTIFIER) => (TsKind::Ts1, Polarity::Normal),
            Symbol::Data(TS2_IDENTIFIER) => (TsKind::Ts2, Polarity::Normal),
            Symbol::Data(TS1_IDENTIFIER_INVERTED) => (TsKind::Ts1, Polarity::Inverted),
            Symbol::Data(TS2_IDENTIFIER_INVERTED) => (TsKind::Ts2, Polarity::Inverted),
            _ => return Err(bad(6)),
        };
        if let Some(i) = (7..TS_LEN).find(|&i| s[i] != s[6]) {
            return Err(bad(i));
        }
        let number = |i: usize| match s[i] {
            Symbol::Data(b) => Ok(Some(b)),
            Symbol::Control(control::PAD) => Ok(None),
            Symbol::Control(_) => Err(bad(i)),
        };
        let data = |i: usize| match s[i] {
            Symbol::Data(b) => Ok(b),
            Symbol::Control(_) => Err(bad(i)),
        };
        let link = number(1)?;
        let lane = number(2)?;
        if matches!(lane, Some(l) if l > 31) {
            return Err(bad(2));
        }
        let set = TrainingSet {
            kind,
            link,
            lane,
            n_fts: data(3)?,
            rates: DataRates::from_bits_retain(data(4)?),
            control: TrainingControl::from_bits_retain(data(5)?),
        };
        Ok((set, polarity))
    }
}

/// The electrical idle ordered set at 8b/10b: COM then three IDL.
pub const EIOS_8B10B: [Symbol; 4] = [Symbol::COM, Symbol::IDL, Symbol::IDL, Symbol::IDL];
/// The SKP ordered set as transmitted at 8b/10b: COM then three SKP (receivers accept one to five).
pub const SKP_8B10B: [Symbol; 4] = [Symbol::COM, Symbol::SKP, Symbol::SKP, Symbol::SKP];
/// The fast training sequence at 8b/10b: COM then three FTS.
pub const FTS_8B10B: [Symbol; 4] = [Symbol::COM, Symbol::FTS, Symbol::FTS, Symbol::FTS];
/// The electrical idle exit ordered set at 5 GT/s: COM, fourteen EIE, then D10.2.
pub const EIEOS_8B10B: [Symbol; 16] = {
    let mut s = [Symbol::EIE; 16];
    s[0] = Symbol::COM;
    s[15] = Symbol::Data(TS1_IDENTIFIER);
    s
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts1_layout_matches_pcie_table_4_5() {
        let ts = TrainingSet {
            kind: TsKind::Ts1,
            link: Some(0),
            lane: None,
            n_fts: 0x20,
            rates: DataRates::GEN1 | DataRates::GEN3,
            control: TrainingControl::empty(),
        };
        let s = ts.to_symbols();
        assert_eq!(s[0], Symbol::Control(0xBC));
        assert_eq!(s[1], Symbol::Data(0));
        assert_eq!(s[2], Symbol::Control(0xF7));
        assert_eq!(s[3], Symbol::Data(0x20));
        assert_eq!(s[4], Symbol::Data(0b0000_1010));
        assert!(s[6..].iter().all(|&x| x == Symbol::Data(0x4A)));
        assert_eq!(TrainingSet::from_symbols(&s), Ok((ts, Polarity::Normal)));
    }

    #[test]
    fn inverted_identifiers_are_recognised() {
        let mut s = TrainingSet::polling(DataRates::GEN1, 0).to_symbols();
        for x in &mut s[6..] {
            *x = Symbol::Data(TS1_IDENTIFIER_INVERTED);
        }
        let (ts, pol) = TrainingSet::from_symbols(&s).unwrap();
        assert_eq!((ts.kind, pol), (TsKind::Ts1, Polarity::Inverted));
    }

    #[test]
    fn mixed_identifiers_are_rejected() {
        let mut s = TrainingSet::polling(DataRates::GEN1, 0).to_symbols();
        s[11] = Symbol::Data(TS2_IDENTIFIER);
        assert_eq!(
            TrainingSet::from_symbols(&s),
            Err(Error::MalformedOrderedSet {
                position: 11,
                found: TS2_IDENTIFIER
            })
        );
    }
}
