//! The 2.5 and 5 GT/s scrambler: G(X) = X^16 + X^5 + X^4 + X^3 + 1, seed FFFFh (PCIe 4.2.1.3).

use super::lfsr::{ByteTables, Galois, StepTables};
use crate::symbol::{control, Symbol};

/// The LFSR of Figure 4-10: D15 is the output; D0, D3, D4 and D5 take the output in.
const LFSR: Galois = Galois {
    width: 16,
    taps: 1 | 1 << 3 | 1 << 4 | 1 << 5,
};
const BYTE: ByteTables<2> = ByteTables::new(LFSR);
const WORD: StepTables<2> = StepTables::new(LFSR, 64);

/// The value the LFSR is initialised to, and re-initialised to by every COM.
pub const GEN1_SEED: u16 = 0xFFFF;

/// One lane's scrambler (or descrambler: scrambling is an XOR, so both are the same) at 8b/10b.
///
/// Rules (PCIe 4.2.1.3): COM re-initialises the LFSR (the COM itself passes unscrambled); SKP neither is
/// scrambled nor advances the LFSR; every other symbol advances it by eight shifts; only data symbols
/// outside ordered sets are scrambled. Bit 0 of a symbol (first on the wire) meets the first output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gen1Scrambler {
    state: u32,
}

impl Default for Gen1Scrambler {
    fn default() -> Self {
        Self::new()
    }
}

impl Gen1Scrambler {
    /// A scrambler at the seed FFFFh.
    pub const fn new() -> Self {
        Gen1Scrambler {
            state: GEN1_SEED as u32,
        }
    }

    /// A scrambler whose LFSR holds `state` (D0 in bit 0), e.g. to resume or to test.
    pub const fn with_state(state: u16) -> Self {
        Gen1Scrambler { state: state as u32 }
    }

    /// Back to the seed, as a COM does.
    pub fn reset(&mut self) {
        self.state = GEN1_SEED as u32;
    }

    /// The LFSR, D0 in bit 0.
    pub const fn state(&self) -> u16 {
        self.state as u16
    }

    /// The keystream byte for the next symbol (bit 0 first), advancing eight shifts.
    pub fn next_byte(&mut self) -> u8 {
        let (byte, next) = BYTE.lookup(self.state);
        self.state = next;
        byte
    }

    /// Advance eight shifts without using the keystream (a symbol that bypasses scrambling).
    pub fn advance(&mut self) {
        self.next_byte();
    }

    /// XOR the keystream into `data`, every byte treated as a scrambled data symbol.
    pub fn apply(&mut self, data: &mut [u8]) {
        let mut words = data.chunks_exact_mut(8);
        for word in &mut words {
            let (keystream, next) = WORD.lookup(self.state);
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            word.copy_from_slice(&(u64::from_le_bytes(bytes) ^ keystream as u64).to_le_bytes());
            self.state = next;
        }
        for byte in words.into_remainder() {
            *byte ^= self.next_byte();
        }
    }

    /// Scramble one symbol outside an ordered set: data is XORed with the keystream, control symbols pass.
    pub fn scramble(&mut self, s: Symbol) -> Symbol {
        match s {
            Symbol::Data(byte) => Symbol::Data(byte ^ self.next_byte()),
            Symbol::Control(_) => self.pass(s),
        }
    }

    /// Descramble one received symbol; the same operation as [`Gen1Scrambler::scramble`].
    pub fn descramble(&mut self, s: Symbol) -> Symbol {
        self.scramble(s)
    }

    /// A symbol that is not scrambled (a control symbol, or any symbol of an ordered set such as a TS1/TS2
    /// data symbol): returned unchanged, but COM still resets the LFSR, SKP holds it, and anything else
    /// advances it.
    pub fn pass(&mut self, s: Symbol) -> Symbol {
        match s {
            Symbol::Control(control::COM) => self.reset(),
            Symbol::Control(control::SKP) => {}
            _ => self.advance(),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_keystream_bytes_after_reset() {
        // PCI Express Base Specification 2.1, Appendix C (scrambled 00h after reset).
        let mut s = Gen1Scrambler::new();
        let got: [u8; 8] = core::array::from_fn(|_| s.next_byte());
        assert_eq!(got, [0xFF, 0x17, 0xC0, 0x14, 0xB2, 0xE7, 0x02, 0x82]);
    }

    #[test]
    fn com_resets_skp_holds_k_passes() {
        let mut s = Gen1Scrambler::new();
        assert_eq!(s.scramble(Symbol::Data(0)), Symbol::Data(0xFF));
        assert_eq!(s.scramble(Symbol::SKP), Symbol::SKP);
        assert_eq!(s.scramble(Symbol::Data(0)), Symbol::Data(0x17));
        assert_eq!(s.scramble(Symbol::END), Symbol::END);
        assert_eq!(s.scramble(Symbol::Data(0)), Symbol::Data(0x14));
        assert_eq!(s.scramble(Symbol::COM), Symbol::COM);
        assert_eq!(s.scramble(Symbol::Data(0)), Symbol::Data(0xFF));
        assert_eq!(s.pass(Symbol::Data(0x4A)), Symbol::Data(0x4A));
        assert_eq!(s.scramble(Symbol::Data(0)), Symbol::Data(0xC0));
    }
}
