//! Symbols as the 8b/10b layer sees them: a data byte (D) or a control byte (K), and running disparity.

/// One 8b/10b symbol before encoding or after decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Symbol {
    /// A data symbol, `Dx.y`, carrying the byte `HGFEDCBA` = `y << 5 | x`.
    Data(u8),
    /// A control symbol, `Kx.y`. Only the twelve bytes of [`control::ALL`] are valid control symbols.
    Control(u8),
}

/// The control symbols PCI Express names (Base Specification, table 4-1), as bytes.
pub mod control {
    /// COM, K28.5: starts every ordered set; carries the comma used for symbol alignment.
    pub const COM: u8 = 0xBC;
    /// STP, K27.7: start of a transaction-layer packet.
    pub const STP: u8 = 0xFB;
    /// SDP, K28.2: start of a data-link-layer packet.
    pub const SDP: u8 = 0x5C;
    /// END, K29.7: end of a packet.
    pub const END: u8 = 0xFD;
    /// EDB, K30.7: end of a nullified packet.
    pub const EDB: u8 = 0xFE;
    /// PAD, K23.7: framing filler and the "no link/lane number" value in training sets.
    pub const PAD: u8 = 0xF7;
    /// SKP, K28.0: clock tolerance compensation.
    pub const SKP: u8 = 0x1C;
    /// FTS, K28.1: fast training sequence.
    pub const FTS: u8 = 0x3C;
    /// IDL, K28.3: electrical idle ordered set body.
    pub const IDL: u8 = 0x7C;
    /// EIE, K28.7: electrical idle exit ordered set body (5 GT/s).
    pub const EIE: u8 = 0xFC;
    /// K28.4, reserved by PCIe.
    pub const K28_4: u8 = 0x9C;
    /// K28.6, reserved by PCIe.
    pub const K28_6: u8 = 0xDC;

    /// Every byte that has a K code group in IEEE 802.3 clause 36: K28.0-K28.7, K23.7, K27.7, K29.7, K30.7.
    pub const ALL: [u8; 12] = [SKP, FTS, SDP, IDL, K28_4, COM, K28_6, EIE, PAD, STP, END, EDB];

    /// Whether `byte` has a K code group.
    pub const fn is_control(byte: u8) -> bool {
        matches!(
            byte,
            0x1C | 0x3C | 0x5C | 0x7C | 0x9C | 0xBC | 0xDC | 0xFC | 0xF7 | 0xFB | 0xFD | 0xFE
        )
    }
}

impl Symbol {
    /// COM, the start of every 8b/10b ordered set.
    pub const COM: Symbol = Symbol::Control(control::COM);
    /// SKP.
    pub const SKP: Symbol = Symbol::Control(control::SKP);
    /// PAD.
    pub const PAD: Symbol = Symbol::Control(control::PAD);
    /// IDL.
    pub const IDL: Symbol = Symbol::Control(control::IDL);
    /// FTS.
    pub const FTS: Symbol = Symbol::Control(control::FTS);
    /// EIE.
    pub const EIE: Symbol = Symbol::Control(control::EIE);
    /// STP.
    pub const STP: Symbol = Symbol::Control(control::STP);
    /// SDP.
    pub const SDP: Symbol = Symbol::Control(control::SDP);
    /// END.
    pub const END: Symbol = Symbol::Control(control::END);
    /// EDB.
    pub const EDB: Symbol = Symbol::Control(control::EDB);

    /// The byte carried, whether data or control.
    pub const fn byte(self) -> u8 {
        match self {
            Symbol::Data(b) | Symbol::Control(b) => b,
        }
    }

    /// Whether this is a control (K) symbol.
    pub const fn is_control(self) -> bool {
        matches!(self, Symbol::Control(_))
    }
}

/// Running disparity: the sign of (ones - zeros) sent so far, which the 8b/10b code keeps within +-1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Disparity {
    /// RD-, the state a transmitter starts in.
    #[default]
    Negative,
    /// RD+.
    Positive,
}

impl Disparity {
    /// The other disparity.
    pub const fn flipped(self) -> Disparity {
        match self {
            Disparity::Negative => Disparity::Positive,
            Disparity::Positive => Disparity::Negative,
        }
    }
}
