//! The 8 GT/s-and-up scrambler: G(X) = X^23 + X^21 + X^16 + X^8 + X^5 + X^2 + 1, one per lane, seeded by
//! lane number (PCIe 4.2.2.4).

use super::lfsr::{ByteTables, Galois, StepTables};

/// The LFSR of Figure 4-18: D22 is the output; D0, D2, D5, D8, D16 and D21 take the output in.
const LFSR: Galois = Galois {
    width: 23,
    taps: 1 | 1 << 2 | 1 << 5 | 1 << 8 | 1 << 16 | 1 << 21,
};
const BYTE: ByteTables<3> = ByteTables::new(LFSR);
const BLOCK: StepTables<3> = StepTables::new(LFSR, 128);

/// The seed of each lane, by lane number modulo 8 (PCIe 4.2.2.4, D0 in bit 0).
pub const LANE_SEEDS: [u32; 8] = [
    0x1D_BFBC, 0x06_07BB, 0x1E_C760, 0x18_C0DB, 0x01_0F12, 0x19_CFC9, 0x02_77CE, 0x1B_B807,
];

/// The seed for `lane`.
pub const fn lane_seed(lane: usize) -> u32 {
    LANE_SEEDS[lane % 8]
}

/// One lane's 128b/130b scrambler (or descrambler). This type only produces keystream; which symbols are
/// scrambled, which advance it and when it is reset is the block code's business
/// ([`crate::code128b130b::LaneEncoder`]). Bit 0 of a symbol (first on the wire) meets the first output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gen3Scrambler {
    state: u32,
    lane: usize,
}

impl Gen3Scrambler {
    /// The scrambler of `lane`, at its seed.
    pub const fn new(lane: usize) -> Self {
        Gen3Scrambler {
            state: lane_seed(lane),
            lane,
        }
    }

    /// The scrambler of `lane` with its LFSR at `state` (23 bits, D0 in bit 0; higher bits are ignored).
    pub const fn with_state(lane: usize, state: u32) -> Self {
        Gen3Scrambler {
            state: state & 0x7F_FFFF,
            lane,
        }
    }

    /// Back to the lane's seed, as after an EIEOS.
    pub fn reset(&mut self) {
        self.state = lane_seed(self.lane);
    }

    /// The lane number this scrambler was made for.
    pub const fn lane(&self) -> usize {
        self.lane
    }

    /// The LFSR, D0 in bit 0 (the value SKP ordered sets carry as LFSR\[22:0\]).
    pub const fn state(&self) -> u32 {
        self.state
    }

    /// The keystream for the next 16 symbols (symbol 0 in the low byte, bit 0 first), advancing 128 shifts.
    #[inline(always)]
    pub fn next_block(&mut self) -> u128 {
        let (keystream, next) = BLOCK.lookup(self.state);
        self.state = next;
        keystream
    }

    /// The keystream byte for the next symbol, advancing eight shifts.
    pub fn next_byte(&mut self) -> u8 {
        let (byte, next) = BYTE.lookup(self.state);
        self.state = next;
        byte
    }

    /// XOR the keystream into `data`, every byte a scrambled symbol.
    pub fn apply(&mut self, data: &mut [u8]) {
        let mut blocks = data.chunks_exact_mut(16);
        for block in &mut blocks {
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(block);
            block.copy_from_slice(&(u128::from_le_bytes(bytes) ^ self.next_block()).to_le_bytes());
        }
        for byte in blocks.into_remainder() {
            *byte ^= self.next_byte();
        }
    }

    /// Advance over `bytes` symbols that bypass scrambling.
    pub fn advance(&mut self, bytes: usize) {
        for _ in 0..bytes / 16 {
            self.state = BLOCK.next_state(self.state);
        }
        for _ in 0..bytes % 16 {
            self.next_byte();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_and_byte_steps_agree() {
        let mut a = Gen3Scrambler::new(3);
        let mut b = a;
        let block = a.next_block().to_le_bytes();
        let bytes: [u8; 16] = core::array::from_fn(|_| b.next_byte());
        assert_eq!(block, bytes);
        assert_eq!(a.state(), b.state());
        b.advance(37);
        a.advance(16);
        a.advance(21);
        assert_eq!(a, b);
    }
}
