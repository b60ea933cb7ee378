//! One lane's 128b/130b transmitter and receiver: the scrambling rules of PCIe 4.2.2.4, the SKP ordered
//! set's LFSR and parity symbols (4.2.8.2), DC balance of training sets (4.2.5.1) and block alignment.

use super::align::{BitQueue, BlockAlignment, HISTORY_BITS};
use super::block::{from_wire, to_wire, Block, SyncHeader, BLOCK_BITS, BLOCK_SYMBOLS};
use super::ordered_set::{
    skp_lfsr, skp_tail, OrderedSetKind, DC_FEWER_ONES_14, DC_FEWER_ONES_15, DC_FEWER_ZEROS_14,
    DC_FEWER_ZEROS_15, EIEOS, SKP_END, SKP_END_POSITION, SKP_SYMBOL, TS1_ID,
};
use crate::error::Error;
use crate::ordered_set::{TS1_IDENTIFIER, TS2_IDENTIFIER};
use crate::scrambler::Gen3Scrambler;

/// Symbols 1-13 of a training set: the ones always scrambled.
const TS_SCRAMBLED: u128 = ((1u128 << 104) - 1) << 8;
/// Symbols 0-11: the running DC balance is judged after them.
const TS_FIRST_12: u128 = (1u128 << 96) - 1;
/// The running DC balance saturates here (PCIe asks for at least +-511).
const DC_LIMIT: i32 = 511;
/// Most symbols in a received SKP ordered set: 20 SKP, SKP_END and three more.
const SKP_MAX_SYMBOLS: u32 = 24;

/// Ones minus zeros in the low `bits` bits of `value`.
fn dc_of(value: u128, bits: u32) -> i32 {
    2 * value.count_ones() as i32 - bits as i32
}

/// The identifier symbol (4Ah or 45h) of a training set with symbol 0 `id`.
const fn ts_identifier(id: u8) -> u8 {
    if id == TS1_ID {
        TS1_IDENTIFIER
    } else {
        TS2_IDENTIFIER
    }
}

/// One lane's 128b/130b transmitter: owns the lane's scrambler and applies the block rules to each block.
///
/// - Data blocks: all 16 symbols scrambled.
/// - Ordered sets: unscrambled, except TS1/TS2 symbols 1-13, and 14-15 unless they carry DC balance.
/// - The LFSR advances over every symbol except those of a SKP ordered set, and is reset to the lane's seed
///   after an EIEOS. Sync headers are never scrambled and do not advance it.
/// - A SKP ordered set's last three symbols are filled in with the data parity (or ~LFSR\[22\]) and the
///   current LFSR.
#[derive(Clone, Debug)]
pub struct LaneEncoder {
    scrambler: Gen3Scrambler,
    /// XOR of every scrambled data-block payload since the last SDS or SKP (its parity is the data parity).
    parity: u128,
    last_was_data: bool,
    /// Ones minus zeros sent in training sets.
    dc_balance: i32,
}

impl LaneEncoder {
    /// The transmitter of `lane` (its scrambler seeded by `lane % 8`), as on exit from electrical idle.
    pub const fn new(lane: usize) -> Self {
        LaneEncoder {
            scrambler: Gen3Scrambler::new(lane),
            parity: 0,
            last_was_data: false,
            dc_balance: 0,
        }
    }

    /// The lane number.
    pub const fn lane(&self) -> usize {
        self.scrambler.lane()
    }

    /// The lane's scrambler, as it stands.
    pub const fn scrambler(&self) -> &Gen3Scrambler {
        &self.scrambler
    }

    /// The running DC balance of the training sets sent (ones minus zeros).
    pub const fn dc_balance(&self) -> i32 {
        self.dc_balance
    }

    /// One block as its 130 wire bits: (the first 128, H0 in bit 0; the last 2).
    pub fn encode_block(&mut self, block: &Block) -> (u128, u8) {
        let plain = u128::from_le_bytes(block.payload);
        let wire = match block.header {
            SyncHeader::Data => {
                let wire = plain ^ self.scrambler.next_block();
                self.parity ^= wire;
                self.last_was_data = true;
                wire
            }
            SyncHeader::OrderedSet => {
                let wire = self.ordered_set(&block.payload, plain);
                self.last_was_data = false;
                wire
            }
        };
        to_wire(block.header.bits(), wire)
    }

    fn ordered_set(&mut self, payload: &[u8; BLOCK_SYMBOLS], plain: u128) -> u128 {
        match OrderedSetKind::of(payload[0]) {
            OrderedSetKind::Eieos => {
                if self.last_was_data {
                    self.dc_balance = 0;
                }
                self.scrambler.reset();
                plain
            }
            OrderedSetKind::Skp => {
                let mut wire = *payload;
                if wire[SKP_END_POSITION] == SKP_END {
                    let state = self.scrambler.state();
                    let bit7 = if self.last_was_data {
                        self.parity.count_ones() & 1 == 1
                    } else {
                        state >> 22 == 0
                    };
                    wire[SKP_END_POSITION + 1..].copy_from_slice(&skp_tail(state, bit7));
                }
                self.parity = 0;
                u128::from_le_bytes(wire)
            }
            OrderedSetKind::Sds => {
                self.parity = 0;
                self.scrambler.advance(BLOCK_SYMBOLS);
                plain
            }
            OrderedSetKind::Training => self.training_set(payload, plain),
            OrderedSetKind::Other => {
                self.scrambler.advance(BLOCK_SYMBOLS);
                plain
            }
        }
    }

    fn training_set(&mut self, payload: &[u8; BLOCK_SYMBOLS], plain: u128) -> u128 {
        let keystream = self.scrambler.next_block();
        let mut wire = (plain ^ (keystream & TS_SCRAMBLED)).to_le_bytes();
        self.add_dc(dc_of(u128::from_le_bytes(wire) & TS_FIRST_12, 96));
        // PCIe 4.2.5.1: judge the balance after symbol 11; DC balance symbols bypass scrambling.
        let more_ones = self.dc_balance > 0;
        let magnitude = self.dc_balance.abs();
        let ks = keystream.to_le_bytes();
        wire[14] = if magnitude > 31 {
            if more_ones {
                DC_FEWER_ONES_14
            } else {
                DC_FEWER_ZEROS_14
            }
        } else {
            payload[14] ^ ks[14]
        };
        wire[15] = if magnitude > 15 {
            if more_ones {
                DC_FEWER_ONES_15
            } else {
                DC_FEWER_ZEROS_15
            }
        } else {
            payload[15] ^ ks[15]
        };
        let wire = u128::from_le_bytes(wire);
        self.add_dc(dc_of(wire >> 96, 32));
        wire
    }

    fn add_dc(&mut self, delta: i32) {
        self.dc_balance = (self.dc_balance + delta).clamp(-DC_LIMIT, DC_LIMIT);
    }

    /// Blocks packed into `out` as on the wire (bit 0 of `out[0]` first). Returns the bits written.
    pub fn encode_blocks(&mut self, blocks: &[Block], out: &mut [u8]) -> Result<usize, Error> {
        let bits = blocks.len() * BLOCK_BITS as usize;
        check_room(out.len(), bits.div_ceil(8))?;
        let mut packer = Packer::new(out);
        for block in blocks {
            let (first, last) = self.encode_block(block);
            packer.push(first, last);
        }
        packer.finish();
        Ok(bits)
    }

    /// The fast path: `payload` (a multiple of 16 bytes) as consecutive data blocks, packed into `out` as on
    /// the wire (bit 0 of `out[0]` first; each block starts 2 bits later in its byte than the one before).
    /// Returns the bits written, 130 per block; `out` must hold at least that many bits rounded up to bytes.
    pub fn encode_data(&mut self, payload: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        if payload.len() % BLOCK_SYMBOLS != 0 {
            return Err(Error::LengthNotMultiple {
                len: payload.len(),
                unit: BLOCK_SYMBOLS,
            });
        }
        let blocks = payload.len() / BLOCK_SYMBOLS;
        let bits = blocks * BLOCK_BITS as usize;
        check_room(out.len(), bits.div_ceil(8))?;
        let mut parity = 0u128;
        // Four blocks are 520 bits, exactly 65 bytes: within such a group block j starts at byte 16j, bit
        // 2j, so every shift is a constant.
        let groups = blocks / GROUP_BLOCKS;
        let (group_out, rest_out) = out.split_at_mut(groups * GROUP_BYTES);
        let (group_in, rest_in) = payload.split_at(groups * GROUP_BLOCKS * BLOCK_SYMBOLS);
        for (src, dst) in group_in
            .chunks_exact(GROUP_BLOCKS * BLOCK_SYMBOLS)
            .zip(group_out.chunks_exact_mut(GROUP_BYTES))
        {
            let mut carry = 0u128;
            for j in 0..GROUP_BLOCKS {
                let wire = load_u128(&src[16 * j..16 * j + 16]) ^ self.scrambler.next_block();
                parity ^= wire;
                let (first, last) = to_wire(SyncHeader::Data.bits(), wire);
                let shift = 2 * j as u32;
                dst[16 * j..16 * j + 16].copy_from_slice(&((first << shift) | carry).to_le_bytes());
                let spill = if j == 0 { 0 } else { first >> (128 - shift) };
                carry = spill | (last as u128) << shift;
            }
            dst[GROUP_BYTES - 1] = carry as u8;
        }
        let mut packer = Packer::new(rest_out);
        for chunk in rest_in.chunks_exact(BLOCK_SYMBOLS) {
            let wire = load_u128(chunk) ^ self.scrambler.next_block();
            parity ^= wire;
            let (first, last) = to_wire(SyncHeader::Data.bits(), wire);
            packer.push(first, last);
        }
        packer.finish();
        if blocks > 0 {
            self.parity ^= parity;
            self.last_was_data = true;
        }
        Ok(bits)
    }
}

/// Blocks in a group that ends on a byte boundary (4 x 130 bits = 65 bytes).
const GROUP_BLOCKS: usize = 4;
const GROUP_BYTES: usize = 65;

/// 16 bytes as a little-endian u128 (symbol 0 in the low byte).
#[inline(always)]
fn load_u128(bytes: &[u8]) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&bytes[..16]);
    u128::from_le_bytes(a)
}

fn check_room(available: usize, needed: usize) -> Result<(), Error> {
    if available < needed {
        Err(Error::BufferTooSmall { needed, available })
    } else {
        Ok(())
    }
}

/// Packs 130-bit blocks into bytes: whole 128-bit stores, with the odd bits carried in a word.
struct Packer<'a> {
    out: &'a mut [u8],
    at: usize,
    carry: u64,
    carry_bits: u32,
}

impl<'a> Packer<'a> {
    fn new(out: &'a mut [u8]) -> Self {
        Packer {
            out,
            at: 0,
            carry: 0,
            carry_bits: 0,
        }
    }

    #[inline(always)]
    fn store(&mut self, bytes: &[u8]) {
        // The caller checked the room for every bit, so this never falls short.
        if let Some(dst) = self.out.get_mut(self.at..self.at + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        self.at += bytes.len();
    }

    #[inline(always)]
    fn push(&mut self, first: u128, last: u8) {
        let n = self.carry_bits;
        let word = (first << n) | self.carry as u128;
        self.store(&word.to_le_bytes());
        let spill = if n == 0 { 0 } else { (first >> (128 - n)) as u64 };
        self.carry = spill | (last as u64 & 0b11) << n;
        self.carry_bits = n + 2;
        if self.carry_bits == 64 {
            self.store(&self.carry.to_le_bytes());
            self.carry = 0;
            self.carry_bits = 0;
        }
    }

    fn finish(&mut self) {
        let bytes = self.carry_bits.div_ceil(8) as usize;
        let carry = self.carry.to_le_bytes();
        self.store(&carry[..bytes]);
    }
}

/// What a lane's receiver has seen, for someone debugging a link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderCounters {
    /// Blocks delivered (including those reported as errors).
    pub blocks: u64,
    /// Blocks with sync header 00b or 11b.
    pub invalid_sync_headers: u64,
    /// Times block alignment was found or moved by an EIEOS.
    pub alignments: u64,
    /// SKP ordered sets whose LFSR symbols disagree with the receiver's LFSR.
    pub skp_lfsr_mismatches: u64,
    /// SKP ordered sets after a data block whose data parity bit disagrees.
    pub data_parity_errors: u64,
    /// Bits discarded because they were pushed into a full buffer.
    pub dropped_bits: u64,
}

/// One lane's 128b/130b receiver: block alignment, descrambling, and variable-length SKP ordered sets.
///
/// Feed it raw serial bits with [`LaneDecoder::push_bits`] and take blocks with [`LaneDecoder::pop`] until
/// it returns `None`. It buffers a bounded number of bits (1024): push at most a few blocks' worth between
/// pops; bits pushed into a full buffer are dropped, counted, and alignment is lost.
///
/// Alignment (PCIe 4.2.2.2.1): Unaligned, it searches every bit position for an EIEOS and then becomes
/// Aligned. Aligned, it decodes blocks and also watches for an EIEOS at another bit position, moving its
/// boundaries there; an SDS makes it Locked. Locked, the boundaries stay put; an EIEOS ends the data stream
/// (back to Aligned). An undefined sync header (00b, 11b) is reported and sends it back to Unaligned,
/// except when Locked: there it is counted in [`DecoderCounters::invalid_sync_headers`] and the block is
/// taken as a data block, keeping alignment (a single bit error must not silence the lane until the next
/// retrain; the data's own checks catch a wrong guess), unless it is recognisably a SKP ordered set (its
/// first four symbols SKP) or an EIEOS, which are taken as those so that the LFSR stays in step.
#[derive(Clone, Debug)]
pub struct LaneDecoder {
    bits: BitQueue,
    alignment: BlockAlignment,
    scrambler: Gen3Scrambler,
    parity: u128,
    last_was_data: bool,
    last_skp_symbols: u8,
    skp_mismatches_in_a_row: u8,
    /// A SKP ordered set since [`LaneDecoder::take_descrambler_out_of_step`] last looked was the second or
    /// a later one in a row to disagree.
    descrambler_out_of_step: bool,
    counters: DecoderCounters,
}

impl LaneDecoder {
    /// The receiver of `lane` (its descrambler seeded by `lane % 8`), unaligned.
    pub const fn new(lane: usize) -> Self {
        LaneDecoder {
            bits: BitQueue::new(),
            alignment: BlockAlignment::Unaligned,
            scrambler: Gen3Scrambler::new(lane),
            parity: 0,
            last_was_data: false,
            last_skp_symbols: 0,
            skp_mismatches_in_a_row: 0,
            descrambler_out_of_step: false,
            counters: DecoderCounters {
                blocks: 0,
                invalid_sync_headers: 0,
                alignments: 0,
                skp_lfsr_mismatches: 0,
                data_parity_errors: 0,
                dropped_bits: 0,
            },
        }
    }

    /// The receiver of `lane` with its block boundaries already known, as right after an EIEOS (the
    /// descrambler at the lane's seed): for a capture, or a stream of blocks, that starts at a block
    /// boundary without an EIEOS to find it by.
    pub const fn aligned(lane: usize) -> Self {
        let mut decoder = LaneDecoder::new(lane);
        decoder.alignment = BlockAlignment::Aligned;
        decoder
    }

    /// Forget everything but the lane and the counters, as after electrical idle.
    pub fn reset(&mut self) {
        let counters = self.counters;
        *self = LaneDecoder::new(self.scrambler.lane());
        self.counters = counters;
    }

    /// Drop block alignment and search for an EIEOS again (the buffered bits are kept).
    pub fn realign(&mut self) {
        self.alignment = BlockAlignment::Unaligned;
    }

    /// The alignment phase.
    pub const fn alignment(&self) -> BlockAlignment {
        self.alignment
    }

    /// The counters.
    pub const fn counters(&self) -> &DecoderCounters {
        &self.counters
    }

    /// The lane's descrambler, as it stands.
    pub const fn scrambler(&self) -> &Gen3Scrambler {
        &self.scrambler
    }

    /// Symbols in the last SKP ordered set received (8 to 24; it is delivered in a 16-symbol form).
    pub const fn last_skp_symbols(&self) -> u8 {
        self.last_skp_symbols
    }

    /// Whether a SKP ordered set received since the last call was the second or a later one in a row whose
    /// LFSR symbols disagreed with this receiver's descrambler: it is out of step. One alone may be a SKP
    /// hit by a bit error.
    pub fn take_descrambler_out_of_step(&mut self) -> bool {
        core::mem::take(&mut self.descrambler_out_of_step)
    }

    /// Append `count` (at most 64) raw serial bits, the first on the wire in bit 0.
    pub fn push_bits(&mut self, bits: u64, count: u32) {
        if !self.bits.push(bits, count) {
            self.counters.dropped_bits += u64::from(count.min(64));
            self.alignment = BlockAlignment::Unaligned;
        }
    }

    /// The next block, descrambled, or an error for a malformed one; `None` until more bits arrive.
    pub fn pop(&mut self) -> Option<Result<Block, Error>> {
        match self.alignment {
            BlockAlignment::Unaligned => self.search(),
            BlockAlignment::Aligned | BlockAlignment::Locked => self.next_block(),
        }
    }

    fn deliver(&mut self, consumed: u32, block: Result<Block, Error>) -> Option<Result<Block, Error>> {
        self.bits.consume(consumed);
        self.counters.blocks += 1;
        Some(block)
    }

    fn eieos(&mut self, consumed: u32) -> Option<Result<Block, Error>> {
        self.scrambler.reset();
        self.last_was_data = false;
        self.counters.alignments += 1;
        self.deliver(consumed, Ok(Block::ordered_set(EIEOS)))
    }

    /// Unaligned: look for an EIEOS at every bit position.
    fn search(&mut self) -> Option<Result<Block, Error>> {
        let head = self.bits.head();
        if self.bits.available() < BLOCK_BITS {
            return None;
        }
        let last = self.bits.len() - BLOCK_BITS;
        match (head..=last).find(|&at| self.bits.eieos_at(at)) {
            Some(at) => {
                self.alignment = BlockAlignment::Aligned;
                self.eieos(at - head + BLOCK_BITS)
            }
            None => {
                self.bits.consume(last + 1 - head);
                None
            }
        }
    }

    /// An EIEOS whose start lies in the `HISTORY_BITS` before the current boundary (so not on it).
    fn misaligned_eieos(&self) -> Option<u32> {
        let head = self.bits.head();
        (head.saturating_sub(HISTORY_BITS)..head)
            .find(|&at| at + BLOCK_BITS <= self.bits.len() && self.bits.eieos_at(at))
    }

    fn next_block(&mut self) -> Option<Result<Block, Error>> {
        let head = self.bits.head();
        let available = self.bits.available();
        if available < 2 {
            return None;
        }
        // Aligned: an EIEOS that straddles the current boundary moves it (PCIe 4.2.2.2.1).
        if self.alignment == BlockAlignment::Aligned {
            if let Some(at) = self.misaligned_eieos() {
                return self.eieos(at + BLOCK_BITS - head);
            }
        }
        let position = self.counters.blocks as usize;
        let header = self.bits.get(head, 2) as u8;
        let Some(kind) = SyncHeader::from_bits(header) else {
            // Aligned, a bad header may be the start of an EIEOS at a new position: wait until it would
            // be complete before calling it an error.
            if available < BLOCK_BITS {
                return None;
            }
            if self.alignment == BlockAlignment::Locked {
                // In a data stream one flipped header bit must not cost the lane its alignment (nothing
                // would restore it before the next retrain): the block is taken by its content and the
                // error counted for the receiver. A SKP ordered set (four SKP symbols: scrambled data
                // starts so once in 2^32 blocks) or an EIEOS (128 fixed bits) is taken as such, since
                // taken as data it would move the LFSR as neither does and garble every later data block
                // of the stream; anything else is most likely data, which the layer above checks.
                let (first, last) = self.bits.block_at(head);
                let block = if (0..4).all(|i| self.bits.symbol(head, i) == SKP_SYMBOL) {
                    self.skp()
                } else if from_wire(first, last).1 == u128::from_le_bytes(EIEOS) {
                    self.ordered_set_block(head)
                } else {
                    self.data_block(head)
                };
                if block.is_some() {
                    self.counters.invalid_sync_headers += 1;
                }
                return block;
            }
            self.counters.invalid_sync_headers += 1;
            self.alignment = BlockAlignment::Unaligned;
            self.counters.blocks += 1;
            return Some(Err(Error::InvalidSyncHeader { position, header }));
        };
        if kind == SyncHeader::OrderedSet && available >= 10 && self.bits.symbol(head, 0) == SKP_SYMBOL {
            return self.skp();
        }
        if available < BLOCK_BITS {
            return None;
        }
        if kind == SyncHeader::Data {
            return self.data_block(head);
        }
        self.ordered_set_block(head)
    }

    /// The (fixed-length) ordered-set block at `head`, its LFSR rules applied.
    fn ordered_set_block(&mut self, head: u32) -> Option<Result<Block, Error>> {
        let (first, last) = self.bits.block_at(head);
        let (_, wire) = from_wire(first, last);
        let payload = self.ordered_set(wire);
        self.last_was_data = false;
        self.deliver(BLOCK_BITS, Ok(Block::ordered_set(payload)))
    }

    /// The data block at `head`, descrambled.
    fn data_block(&mut self, head: u32) -> Option<Result<Block, Error>> {
        let (first, last) = self.bits.block_at(head);
        let (_, wire) = from_wire(first, last);
        self.parity ^= wire;
        self.last_was_data = true;
        let block = Block::data((wire ^ self.scrambler.next_block()).to_le_bytes());
        self.deliver(BLOCK_BITS, Ok(block))
    }

    /// The unscrambled payload of an ordered-set block, applying its LFSR rules.
    fn ordered_set(&mut self, wire: u128) -> [u8; BLOCK_SYMBOLS] {
        let raw = wire.to_le_bytes();
        match OrderedSetKind::of(raw[0]) {
            OrderedSetKind::Eieos => {
                self.scrambler.reset();
                if self.alignment == BlockAlignment::Locked {
                    self.alignment = BlockAlignment::Aligned;
                }
                raw
            }
            OrderedSetKind::Sds => {
                self.scrambler.advance(BLOCK_SYMBOLS);
                self.parity = 0;
                self.alignment = BlockAlignment::Locked;
                raw
            }
            OrderedSetKind::Training => {
                let keystream = self.scrambler.next_block();
                let mut plain = (wire ^ (keystream & TS_SCRAMBLED)).to_le_bytes();
                let ks = keystream.to_le_bytes();
                let identifier = ts_identifier(raw[0]);
                // Symbols 14-15 are the identifier scrambled, or a DC balance symbol sent as is.
                for (i, balance) in [
                    (14, [DC_FEWER_ONES_14, DC_FEWER_ZEROS_14]),
                    (15, [DC_FEWER_ONES_15, DC_FEWER_ZEROS_15]),
                ] {
                    let descrambled = raw[i] ^ ks[i];
                    plain[i] = if descrambled != identifier && balance.contains(&raw[i]) {
                        raw[i]
                    } else {
                        descrambled
                    };
                }
                plain
            }
            // SKP is handled before; EIOS, FTS and unknown sets bypass scrambling but advance the LFSR.
            OrderedSetKind::Skp | OrderedSetKind::Other => {
                self.scrambler.advance(BLOCK_SYMBOLS);
                raw
            }
        }
    }

    /// A SKP ordered set of 4 to 20 SKP symbols at the head: delivered in the 16-symbol form.
    fn skp(&mut self) -> Option<Result<Block, Error>> {
        let head = self.bits.head();
        let available = self.bits.available();
        let mut symbols = 0;
        for group in 1..=5u32 {
            let end = 4 * group;
            if available < 2 + 8 * (end + 1) {
                return None;
            }
            let malformed = |i: u32| {
                let found = self.bits.symbol(head, i);
                Error::MalformedOrderedSet {
                    position: i as usize,
                    found,
                }
            };
            let bad = match (end - 3..end).find(|&i| self.bits.symbol(head, i) != SKP_SYMBOL) {
                Some(i) => Some(i),
                None => match self.bits.symbol(head, end) {
                    SKP_END => {
                        symbols = end + 4;
                        break;
                    }
                    SKP_SYMBOL if group < 5 => None,
                    _ => Some(end),
                },
            };
            if let Some(i) = bad {
                // Reported as a 130-bit block, once all of it has arrived.
                if available < BLOCK_BITS {
                    return None;
                }
                let error = malformed(i);
                return self.deliver(BLOCK_BITS, Err(error));
            }
        }
        let bits = 2 + 8 * symbols;
        if symbols == 0 || symbols > SKP_MAX_SYMBOLS || available < bits {
            return None;
        }
        let tail = [
            self.bits.symbol(head, symbols - 3),
            self.bits.symbol(head, symbols - 2),
            self.bits.symbol(head, symbols - 1),
        ];
        self.check_skp(tail);
        self.last_skp_symbols = symbols as u8;
        let mut payload = [SKP_SYMBOL; BLOCK_SYMBOLS];
        payload[SKP_END_POSITION] = SKP_END;
        payload[SKP_END_POSITION + 1..].copy_from_slice(&tail);
        self.deliver(bits, Ok(Block::ordered_set(payload)))
    }

    /// Compare a SKP ordered set's LFSR and parity symbols with what this receiver computed.
    fn check_skp(&mut self, tail: [u8; 3]) {
        let state = self.scrambler.state();
        let mut mismatches = u64::from(skp_lfsr(tail) != state);
        let bit7 = tail[0] >> 7 == 1;
        if self.last_was_data {
            if bit7 != (self.parity.count_ones() & 1 == 1) {
                self.counters.data_parity_errors += 1;
            }
        } else if bit7 != (state >> 22 == 0) {
            mismatches += 1;
        }
        self.counters.skp_lfsr_mismatches += mismatches;
        self.parity = 0;
        self.last_was_data = false;
        self.skp_mismatches_in_a_row = match mismatches {
            0 => 0,
            _ => self.skp_mismatches_in_a_row.saturating_add(1),
        };
        self.descrambler_out_of_step |= self.skp_mismatches_in_a_row >= 2;
    }

    /// The fast path for a block-aligned stream of data blocks: `nblocks` blocks packed in `bits` (bit 0 of
    /// `bits[0]` is H0 of the first block) are descrambled into `out` (16 bytes each) with this receiver's
    /// LFSR. It does not touch the alignment or the bits given to [`LaneDecoder::push_bits`].
    ///
    /// A block that is not a data block stops the decode with [`Error::InvalidSyncHeader`] (00b, 11b) or
    /// [`Error::UnexpectedOrderedSetBlock`], `position` counting blocks from the start of `bits`; the blocks
    /// before it are in `out` and the LFSR has advanced over them.
    pub fn decode_data(&mut self, bits: &[u8], nblocks: usize, out: &mut [u8]) -> Result<(), Error> {
        // A count too large for its bits or bytes to be counted needs more than any buffer holds.
        let needed_bits = nblocks.checked_mul(BLOCK_BITS as usize);
        check_room(bits.len(), needed_bits.map_or(usize::MAX, |b| b.div_ceil(8)))?;
        check_room(out.len(), nblocks.saturating_mul(BLOCK_SYMBOLS))?;
        let mut parity = 0u128;
        let mut result = Ok(());
        let mut done = 0;
        // Whole groups of four blocks first (constant shifts), while their sync headers are all data.
        let data_headers =
            (0..GROUP_BLOCKS).fold(0u32, |h, j| h | u32::from(SyncHeader::Data.bits()) << (2 * j));
        for (src, dst) in bits
            .chunks_exact(GROUP_BYTES)
            .zip(out.chunks_exact_mut(GROUP_BLOCKS * BLOCK_SYMBOLS))
            .take(nblocks / GROUP_BLOCKS)
        {
            let mut headers = 0u32;
            let mut words = [0u128; GROUP_BLOCKS];
            for (j, word) in words.iter_mut().enumerate() {
                let lo = load_u128(&src[16 * j..16 * j + 16]);
                let hi = src[16 * j + 16] as u128;
                let shift = 2 * j as u32;
                headers |= (((lo >> shift) & 0b11) as u32) << shift;
                *word = (lo >> (shift + 2)) | (hi << (126 - shift));
            }
            if headers != data_headers {
                break;
            }
            for (j, wire) in words.into_iter().enumerate() {
                parity ^= wire;
                dst[16 * j..16 * j + 16].copy_from_slice(&(wire ^ self.scrambler.next_block()).to_le_bytes());
            }
            done += GROUP_BLOCKS;
        }
        // The rest (and a group with a bad header, to find which block) one block at a time.
        for (position, dst) in out
            .chunks_exact_mut(BLOCK_SYMBOLS)
            .enumerate()
            .take(nblocks)
            .skip(done)
        {
            let bit = position * BLOCK_BITS as usize;
            let (byte, phase) = (bit / 8, (bit % 8) as u32);
            // Every block's 130 bits lie within the 17 bytes from its first (phase is 0, 2, 4 or 6).
            let Some(src) = bits.get(byte..byte + 17) else {
                break;
            };
            let lo = load_u128(src);
            let hi = src[16] as u128;
            let header = ((lo >> phase) & 0b11) as u8;
            if header != SyncHeader::Data.bits() {
                result = Err(match SyncHeader::from_bits(header) {
                    None => Error::InvalidSyncHeader { position, header },
                    Some(_) => Error::UnexpectedOrderedSetBlock { position },
                });
                break;
            }
            let wire = (lo >> (phase + 2)) | (hi << (126 - phase));
            parity ^= wire;
            dst.copy_from_slice(&(wire ^ self.scrambler.next_block()).to_le_bytes());
            done += 1;
        }
        if done > 0 {
            self.parity ^= parity;
            self.last_was_data = true;
        }
        result
    }
}
