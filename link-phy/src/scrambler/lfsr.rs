//! The Galois LFSR both PCIe scramblers are drawn as, and the lookup tables that step it many bits at once.
//!
//! PCIe draws each scrambler as flip-flops D0..D(n-1) with XOR gates between them (Figures 4-10 and 4-18 of
//! the Base Specification): the output is D(n-1); on every shift each flip-flop takes its neighbour below,
//! D0 takes the output, and the flip-flops at the polynomial's middle terms also XOR the output in. We hold
//! that register in an integer with Di as bit i, so a seed such as 1DBFBCh is loaded as is.
//!
//! The register is linear over GF(2): the keystream of the next k bits and the state after them are XORs of
//! the contributions of each state bit. So a table per state byte, built at compile time, gives k keystream
//! bits and the next state with one lookup per state byte.

/// An n-bit Galois LFSR: `width` flip-flops, `taps` the flip-flops that XOR the output in (bit 0 included).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Galois {
    pub width: u32,
    pub taps: u32,
}

impl Galois {
    const fn mask(self) -> u32 {
        (1 << self.width) - 1
    }

    /// One shift: the output bit, then the next state.
    pub const fn step(self, state: u32) -> (u32, u32) {
        let out = (state >> (self.width - 1)) & 1;
        let next = ((state << 1) & self.mask()) ^ (self.taps & out.wrapping_neg());
        (out, next)
    }

    /// `bits` (at most 128) shifts: the keystream, first output in bit 0, and the state after.
    pub const fn run(self, mut state: u32, bits: u32) -> (u128, u32) {
        let mut keystream = 0u128;
        let mut i = 0;
        while i < bits {
            let (out, next) = self.step(state);
            keystream |= (out as u128) << i;
            state = next;
            i += 1;
        }
        (keystream, state)
    }
}

/// Step tables: for each byte of the state, the keystream of the next `BITS` shifts and the state after
/// them that this byte contributes. Index `[chunk][value]` with `value` the state's byte `chunk`.
#[derive(Debug)]
pub(crate) struct StepTables<const CHUNKS: usize> {
    pub keystream: [[u128; 256]; CHUNKS],
    pub next: [[u32; 256]; CHUNKS],
}

impl<const CHUNKS: usize> StepTables<CHUNKS> {
    /// Tables for `bits` (at most 128) shifts of `lfsr`.
    pub const fn new(lfsr: Galois, bits: u32) -> Self {
        let mut tables = StepTables {
            keystream: [[0; 256]; CHUNKS],
            next: [[0; 256]; CHUNKS],
        };
        let mut chunk = 0;
        while chunk < CHUNKS {
            let mut value = 0;
            while value < 256 {
                let state = ((value as u32) << (8 * chunk)) & lfsr.mask();
                let (keystream, next) = lfsr.run(state, bits);
                tables.keystream[chunk][value] = keystream;
                tables.next[chunk][value] = next;
                value += 1;
            }
            chunk += 1;
        }
        tables
    }

    /// The keystream and next state for `state`: XOR of each state byte's contribution.
    #[inline(always)]
    pub fn lookup(&self, state: u32) -> (u128, u32) {
        let mut keystream = 0;
        let mut next = 0;
        for chunk in 0..CHUNKS {
            let value = ((state >> (8 * chunk)) & 0xFF) as usize;
            keystream ^= self.keystream[chunk][value];
            next ^= self.next[chunk][value];
        }
        (keystream, next)
    }

    /// Only the state after the shifts.
    #[inline(always)]
    pub fn next_state(&self, state: u32) -> u32 {
        let mut next = 0;
        for chunk in 0..CHUNKS {
            next ^= self.next[chunk][((state >> (8 * chunk)) & 0xFF) as usize];
        }
        next
    }
}

/// Like [`StepTables`] for a single symbol (8 shifts), with byte-sized keystream entries.
#[derive(Debug)]
pub(crate) struct ByteTables<const CHUNKS: usize> {
    pub keystream: [[u8; 256]; CHUNKS],
    pub next: [[u32; 256]; CHUNKS],
}

impl<const CHUNKS: usize> ByteTables<CHUNKS> {
    /// Tables for 8 shifts of `lfsr`.
    pub const fn new(lfsr: Galois) -> Self {
        let wide = StepTables::<CHUNKS>::new(lfsr, 8);
        let mut tables = ByteTables {
            keystream: [[0; 256]; CHUNKS],
            next: wide.next,
        };
        let mut chunk = 0;
        while chunk < CHUNKS {
            let mut value = 0;
            while value < 256 {
                tables.keystream[chunk][value] = wide.keystream[chunk][value] as u8;
                value += 1;
            }
            chunk += 1;
        }
        tables
    }

    /// The keystream byte and next state for `state`.
    #[inline(always)]
    pub fn lookup(&self, state: u32) -> (u8, u32) {
        let mut keystream = 0;
        let mut next = 0;
        for chunk in 0..CHUNKS {
            let value = ((state >> (8 * chunk)) & 0xFF) as usize;
            keystream ^= self.keystream[chunk][value];
            next ^= self.next[chunk][value];
        }
        (keystream, next)
    }
}
