//! One lane's transmitter: scrambling and line coding at whatever rate the port runs.

use crate::code128b130b::{Block, LaneEncoder};
use crate::code8b10b::Encoder;
use crate::scrambler::Gen1Scrambler;
use crate::serial::SlotBits;
use crate::symbol::Symbol;

#[derive(Clone, Debug)]
pub(super) struct LaneTx {
    encoder: Encoder,
    scrambler: Gen1Scrambler,
    blocks: LaneEncoder,
}

impl LaneTx {
    pub(super) fn new(lane: usize) -> Self {
        LaneTx {
            encoder: Encoder::new(),
            scrambler: Gen1Scrambler::new(),
            blocks: LaneEncoder::new(lane),
        }
    }

    /// Start afresh as lane number `lane`, as after a rate change. At 128b/130b the scrambler seed is
    /// chosen by the lane number agreed in Configuration, not the physical lane, so that a reversed link
    /// seeds both ends of each wire alike.
    pub(super) fn reset(&mut self, lane: usize) {
        *self = LaneTx::new(lane);
    }

    /// One 8b/10b symbol. Data symbols outside ordered sets are scrambled; ordered sets are not.
    pub(super) fn symbol(&mut self, s: Symbol, in_ordered_set: bool) -> SlotBits {
        let s = if in_ordered_set {
            self.scrambler.pass(s)
        } else {
            self.scrambler.scramble(s)
        };
        // Only valid K bytes are ever sent, so encoding cannot fail; D0.0 would be sent otherwise.
        let code = self.encoder.encode(s).unwrap_or_default();
        let mut bits = SlotBits::EMPTY;
        bits.push(u64::from(code), 10);
        bits
    }

    /// One 128b/130b block, scrambled as its type requires.
    pub(super) fn block(&mut self, block: &Block) -> SlotBits {
        let mut bits = SlotBits::EMPTY;
        let (lo, hi) = self.blocks.encode_block(block);
        bits.push(lo as u64, 64);
        bits.push((lo >> 64) as u64, 64);
        bits.push(u64::from(hi), 2);
        bits
    }
}
