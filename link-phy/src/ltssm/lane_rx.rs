//! One lane's receiver: polarity, symbol or block alignment, decoding, descrambling, and recognising
//! ordered sets. It reports what it saw as [`LaneEvent`]s; the port decides what they mean.

use crate::code128b130b::{Block, LaneDecoder, OrderedSetBlock, SyncHeader};
use crate::code8b10b::{encode_symbol, CommaAligner, Decoder};
use crate::error::Error;
use crate::ordered_set::{Polarity, TrainingSet, TS_LEN};
use crate::scrambler::Gen1Scrambler;
use crate::serial::SlotBits;
use crate::symbol::{control, Disparity, Symbol};

/// An item of the deskew buffer at 8b/10b: one symbol time of one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SymbolItem {
    /// A descrambled data byte.
    Data(u8),
    /// The first data byte after an ordered set: the data stream (re)starts here on every lane at once,
    /// so it lines lanes up as a SKP does (in Configuration.Idle, before any SKP may have passed).
    FirstData(u8),
    /// A symbol of an ordered set.
    OrderedSet,
    /// A SKP symbol: the deskew marker.
    Marker,
}

/// An item of the deskew buffer at 128b/130b: one block time of one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BlockItem {
    /// A descrambled data block.
    Data([u8; 16]),
    /// An ordered-set block.
    OrderedSet,
    /// A SKP ordered-set block: a deskew marker.
    Skp,
    /// An SDS ordered-set block, the start of the data stream: a deskew marker of another kind.
    Sds,
}

impl SymbolItem {
    /// The kind of deskew marker this is, if it is one ([`crate::lanes::Deskew`]): a SKP, or the start of
    /// the data stream.
    pub(super) fn marker(&self) -> Option<u8> {
        match self {
            SymbolItem::Marker => Some(0),
            SymbolItem::FirstData(_) => Some(1),
            SymbolItem::Data(_) | SymbolItem::OrderedSet => None,
        }
    }
}

impl BlockItem {
    /// The kind of deskew marker this is, if it is one ([`crate::lanes::Deskew`]): a SKP, or the start of
    /// the data stream.
    pub(super) fn marker(&self) -> Option<u8> {
        match self {
            BlockItem::Skp => Some(0),
            BlockItem::Sds => Some(1),
            BlockItem::Data(_) | BlockItem::OrderedSet => None,
        }
    }
}

/// What a lane's receiver reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LaneEvent {
    /// A training set, polarity already corrected.
    Training(TrainingSet),
    /// Training sets arrive inverted: the lane's polarity must be flipped.
    PolarityInverted,
    /// An electrical idle ordered set.
    ElectricalIdleOs,
    /// A SKP ordered set.
    Skip,
    /// A start-of-data-stream ordered set (128b/130b).
    Sds,
    /// The next symbol for the deskew buffer (8b/10b).
    Symbol(SymbolItem),
    /// The next block for the deskew buffer (128b/130b).
    Block(BlockItem),
    /// A receiver error.
    Error(RxError),
    /// The second (or a later) SKP ordered set in a row whose LFSR symbols disagree with this lane's
    /// descrambler (128b/130b): it is out of step (a block taken for the wrong kind moved it wrongly). One
    /// alone could be a SKP hit by a bit error.
    DescramblerOutOfStep,
}

/// Kinds of receiver errors, counted by the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RxError {
    CodeViolation,
    Disparity,
    Block,
    MalformedOrderedSet,
    UnexpectedSymbol,
}

/// SKP symbols in the SKP ordered sets a transmitter sends (COM, then three SKP).
const SKP_SENT: u8 = 3;
/// The most SKP symbols a receiver accepts in one SKP ordered set (spec 1.4).
const SKP_ACCEPTED: u8 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Collecting {
    Nothing,
    /// COM seen; the next symbol says which ordered set this is.
    AfterCom,
    Training,
    /// A SKP ordered set, after this many SKP symbols.
    Skip {
        skps: u8,
    },
    /// A SKP after a symbol lost to an error, far from any COM, not yet passed on: the next symbol shows
    /// what it was. A SKP ordered set whose COM was lost still has another SKP (or a symbol hit where one
    /// belongs) to come, since a transmitter sends three; data after it makes it a data symbol hit into SKP.
    LoneSkip,
    /// EIOS, FTS or EIEOS: fixed bodies; only EIOS matters to the port.
    Fixed {
        eios: bool,
        len: usize,
        total: usize,
    },
}

#[derive(Clone, Debug)]
pub(super) struct LaneRx {
    /// Whether this lane's bits are complemented before decoding.
    pub(super) inverted: bool,
    aligner: CommaAligner,
    decoder: Decoder,
    descrambler: Gen1Scrambler,
    collecting: Collecting,
    ts: [Symbol; TS_LEN],
    ts_len: usize,
    blocks: LaneDecoder,
    /// Whether the last symbol was part of an ordered set (or a receiver error).
    after_ordered_set: bool,
    /// Whether the last code group could not be decoded (or was a control symbol taken for a data symbol
    /// hit into it, which is handled as one that could not be).
    last_unreadable: bool,
    /// Code groups received since the last COM (saturating), while the ordered set it began is not over: a
    /// SKP up to [`SKP_ACCEPTED`] after one belongs to its SKP ordered set, whatever was lost in between.
    /// `u8::MAX` once the ordered set is over (a SKP ordered set ended by the symbol after it, or a fixed one
    /// whole): a SKP after that is not its.
    since_com: u8,
    /// Whether a code group has been taken since the lane started over: the first, a COM after electrical
    /// idle, sets the running disparity expected.
    disparity_known: bool,
}

impl LaneRx {
    pub(super) fn new(lane: usize) -> Self {
        LaneRx {
            inverted: false,
            aligner: CommaAligner::new(),
            decoder: Decoder::new(Disparity::Negative),
            descrambler: Gen1Scrambler::new(),
            collecting: Collecting::Nothing,
            ts: [Symbol::COM; TS_LEN],
            ts_len: 0,
            blocks: LaneDecoder::new(lane),
            after_ordered_set: false,
            last_unreadable: false,
            since_com: u8::MAX,
            disparity_known: false,
        }
    }

    /// Drop all lock, as after a rate change, and receive as lane number `lane` (see
    /// [`super::lane_tx::LaneTx::reset`]); polarity is kept (it is a property of the wiring).
    pub(super) fn reset(&mut self, lane: usize) {
        let inverted = self.inverted;
        *self = LaneRx::new(lane);
        self.inverted = inverted;
    }

    /// Bits received during one 8b/10b slot.
    pub(super) fn receive_8b10b(&mut self, bits: &SlotBits, emit: &mut impl FnMut(LaneEvent)) {
        for (chunk, n) in bits.chunks() {
            let chunk = if self.inverted {
                crate::lanes::invert_polarity(chunk, n)
            } else {
                chunk
            };
            self.aligner.push_bits(chunk, n);
        }
        while let Some(code) = self.aligner.pop() {
            self.since_com = self.since_com.saturating_add(1);
            let mut saw_ordered_set = false;
            let mut emit = |e: LaneEvent| {
                if let LaneEvent::Symbol(SymbolItem::OrderedSet | SymbolItem::Marker) = e {
                    saw_ordered_set = true;
                }
                emit(e)
            };
            let emit = &mut emit;
            if !self.disparity_known {
                self.take_disparity_from(code);
            }
            match self.decoder.decode(code) {
                Ok(s) => {
                    let after_unreadable = core::mem::replace(&mut self.last_unreadable, false);
                    self.symbol(s, after_unreadable, emit);
                }
                Err(e) => {
                    emit(LaneEvent::Error(match e {
                        Error::DisparityError { .. } => RxError::Disparity,
                        _ => RxError::CodeViolation,
                    }));
                    self.unreadable_symbol(emit);
                    self.last_unreadable = true;
                }
            }
            if saw_ordered_set {
                self.after_ordered_set = true;
            }
        }
    }

    /// The first code group since the lane started over: the transmitter's running disparity is not known
    /// after electrical idle, and the COM the lane locked on has a form for each, which gives it.
    #[cold]
    fn take_disparity_from(&mut self, code: u16) {
        self.disparity_known = true;
        for rd in [Disparity::Negative, Disparity::Positive] {
            if encode_symbol(rd, Symbol::COM).is_ok_and(|(com, _)| com == code) {
                self.decoder.set_disparity(rd);
            }
        }
    }

    /// A symbol time whose code could not be decoded. It still occupies its slot, so it is passed on in
    /// the role it most likely had: between ordered sets it is a data byte (zero; the data link's CRC
    /// rejects the flit), inside a training set it spoils that set. Either way the lane keeps its symbol
    /// phase and does not invent a deskew marker, which would pull good lanes out of alignment.
    fn unreadable_symbol(&mut self, emit: &mut impl FnMut(LaneEvent)) {
        match self.collecting {
            Collecting::Nothing => {
                self.descrambler.advance();
                emit(LaneEvent::Symbol(if self.after_ordered_set {
                    SymbolItem::FirstData(0)
                } else {
                    SymbolItem::Data(0)
                }));
                self.after_ordered_set = false;
            }
            Collecting::Training => {
                self.descrambler.advance();
                // A COM after position 0 never validates, so the set is reported malformed.
                if let Some(slot) = self.ts.get_mut(self.ts_len) {
                    *slot = Symbol::COM;
                }
                self.ts_len += 1;
                if self.ts_len == TS_LEN {
                    self.collecting = Collecting::Nothing;
                    emit(LaneEvent::Error(RxError::MalformedOrderedSet));
                }
                emit(LaneEvent::Symbol(SymbolItem::OrderedSet));
            }
            Collecting::Skip { skps } if skps < SKP_SENT => {
                // Fewer SKP symbols than every transmitter sends: this was one more (it holds the LFSR).
                self.collecting = Collecting::Skip { skps: skps + 1 };
                emit(LaneEvent::Symbol(SymbolItem::Marker));
            }
            Collecting::Skip { .. } => {
                // After all the SKP symbols a transmitter sends: the first data symbol after them, as a
                // readable one ends the ordered set in `symbol`.
                emit(LaneEvent::Skip);
                self.ordered_set_over();
                self.unreadable_symbol(emit);
            }
            Collecting::LoneSkip => {
                // Lost symbols on both sides of it: more likely a SKP ordered set hit twice than three data
                // symbols hit, one of them into SKP.
                self.skip_after_lost_symbols(emit);
                self.unreadable_symbol(emit);
            }
            Collecting::AfterCom | Collecting::Fixed { .. } => {
                // Which short ordered set this was is unknown; drop it and resynchronise at the next COM.
                self.collecting = Collecting::Nothing;
                emit(LaneEvent::Symbol(SymbolItem::OrderedSet));
            }
        }
    }

    /// A symbol decoded; `after_unreadable` if the code group before it could not be.
    fn symbol(&mut self, s: Symbol, after_unreadable: bool, emit: &mut impl FnMut(LaneEvent)) {
        match self.collecting {
            Collecting::Nothing => self.outside_ordered_set(s, after_unreadable, emit),
            Collecting::AfterCom => {
                self.descrambler.pass(s);
                match s {
                    Symbol::Control(control::SKP) => {
                        self.collecting = Collecting::Skip { skps: 1 };
                        emit(LaneEvent::Symbol(SymbolItem::Marker));
                        return;
                    }
                    Symbol::Control(control::IDL) => {
                        self.collecting = Collecting::Fixed {
                            eios: true,
                            len: 2,
                            total: 4,
                        };
                    }
                    Symbol::Control(control::FTS) => {
                        self.collecting = Collecting::Fixed {
                            eios: false,
                            len: 2,
                            total: 4,
                        };
                    }
                    Symbol::Control(control::EIE) => {
                        self.collecting = Collecting::Fixed {
                            eios: false,
                            len: 2,
                            total: 16,
                        };
                    }
                    Symbol::Data(_) | Symbol::Control(control::PAD) => {
                        self.ts[1] = s;
                        self.ts_len = 2;
                        self.collecting = Collecting::Training;
                    }
                    Symbol::Control(control::COM) => {
                        self.start_ordered_set(emit);
                        return;
                    }
                    Symbol::Control(_) => {
                        self.collecting = Collecting::Nothing;
                        emit(LaneEvent::Error(RxError::MalformedOrderedSet));
                    }
                }
                emit(LaneEvent::Symbol(SymbolItem::OrderedSet));
            }
            Collecting::LoneSkip => {
                if s.is_control() && s != Symbol::COM {
                    // Another SKP, or a K code where one belongs: the SKP ordered set it seemed to start.
                    self.skip_after_lost_symbols(emit);
                    self.symbol(s, after_unreadable, emit);
                } else {
                    // Data (or a COM) after it: it was a data symbol hit into SKP.
                    self.collecting = Collecting::Nothing;
                    self.data_symbol_hit(emit);
                    let after_unreadable = core::mem::replace(&mut self.last_unreadable, false);
                    self.outside_ordered_set(s, after_unreadable, emit);
                }
            }
            Collecting::Skip { skps } => {
                if s == Symbol::SKP {
                    self.collecting = Collecting::Skip {
                        skps: skps.saturating_add(1),
                    };
                    emit(LaneEvent::Symbol(SymbolItem::Marker));
                } else if skps < SKP_SENT && s.is_control() && s != Symbol::COM {
                    // Another K symbol where a SKP belongs: a SKP hit into another K code (K28.0 and K28.6
                    // differ in one bit, and both are balanced, so nothing else shows it). Taken as the SKP
                    // it was: a marker that holds the LFSR.
                    emit(LaneEvent::Error(RxError::UnexpectedSymbol));
                    self.collecting = Collecting::Skip { skps: skps + 1 };
                    emit(LaneEvent::Symbol(SymbolItem::Marker));
                } else {
                    // A data symbol ends it, however few SKP symbols came: receivers accept 1 to 5 (spec
                    // 1.4; clock compensation adds or removes them), so a SKP hit into a data code group
                    // cannot be told from the first data symbol after a shorter ordered set.
                    emit(LaneEvent::Skip);
                    self.ordered_set_over();
                    self.outside_ordered_set(s, after_unreadable, emit);
                }
            }
            Collecting::Fixed { eios, len, total } => {
                self.descrambler.pass(s);
                if eios && s != Symbol::IDL {
                    self.collecting = Collecting::Nothing;
                    emit(LaneEvent::Error(RxError::MalformedOrderedSet));
                } else if len + 1 == total {
                    self.ordered_set_over();
                    if eios {
                        emit(LaneEvent::ElectricalIdleOs);
                    }
                } else {
                    self.collecting = Collecting::Fixed {
                        eios,
                        len: len + 1,
                        total,
                    };
                }
                emit(LaneEvent::Symbol(SymbolItem::OrderedSet));
            }
            Collecting::Training => {
                self.descrambler.pass(s);
                if s == Symbol::COM {
                    emit(LaneEvent::Error(RxError::MalformedOrderedSet));
                    self.start_ordered_set(emit);
                    return;
                }
                if let Some(slot) = self.ts.get_mut(self.ts_len) {
                    *slot = s;
                }
                self.ts_len += 1;
                if self.ts_len == TS_LEN {
                    self.collecting = Collecting::Nothing;
                    match TrainingSet::from_symbols(&self.ts) {
                        Ok((ts, Polarity::Normal)) => emit(LaneEvent::Training(ts)),
                        Ok((_, Polarity::Inverted)) => emit(LaneEvent::PolarityInverted),
                        Err(_) => emit(LaneEvent::Error(RxError::MalformedOrderedSet)),
                    }
                }
                emit(LaneEvent::Symbol(SymbolItem::OrderedSet));
            }
        }
    }

    fn outside_ordered_set(&mut self, s: Symbol, after_unreadable: bool, emit: &mut impl FnMut(LaneEvent)) {
        match s {
            Symbol::Control(control::COM) => self.start_ordered_set(emit),
            Symbol::Control(control::SKP) if after_unreadable && self.since_com <= SKP_ACCEPTED => {
                // A SKP ordered set whose COM came but whose first SKP symbols were lost to errors.
                self.skip_after_lost_symbols(emit);
            }
            Symbol::Control(control::SKP) if after_unreadable => {
                // A SKP ordered set whose COM or an earlier SKP was lost to an error (and its running
                // disparity with it, so possibly the next symbol too), or a second data symbol hit: held
                // back until the next symbol tells (`Collecting::LoneSkip`).
                self.collecting = Collecting::LoneSkip;
            }
            Symbol::Data(_) => {
                let d = self.descrambler.descramble(s);
                emit(LaneEvent::Symbol(if self.after_ordered_set {
                    SymbolItem::FirstData(d.byte())
                } else {
                    SymbolItem::Data(d.byte())
                }));
                self.after_ordered_set = false;
            }
            Symbol::Control(_) => {
                // Only COM starts an ordered set: another control symbol here is a data symbol hit into
                // it (a data and a control code group can be a bit apart). It takes a data symbol's slot,
                // as an unreadable one does. Taken for an ordered-set symbol, it had restarted the unit
                // count in mid-stream (every unit up to the next ordered set a column off), or, as a SKP,
                // held the LFSR (every byte of the lane wrong up to the next COM). A SKP right after it
                // starts a SKP ordered set whose COM was hit into this symbol, as after an unreadable one.
                self.data_symbol_hit(emit);
            }
        }
    }

    /// The ordered set the last COM began is over: nothing is being collected, and a SKP after it is not
    /// that COM's (`since_com`).
    fn ordered_set_over(&mut self) {
        self.collecting = Collecting::Nothing;
        self.since_com = u8::MAX;
    }

    /// A control symbol in the data stream that cannot be there: a data symbol hit into it. It is counted
    /// and takes a data symbol's slot, as an unreadable symbol does.
    fn data_symbol_hit(&mut self, emit: &mut impl FnMut(LaneEvent)) {
        emit(LaneEvent::Error(RxError::UnexpectedSymbol));
        self.unreadable_symbol(emit);
        self.last_unreadable = true;
    }

    /// The first SKP symbol received of a SKP ordered set whose COM, or the symbols after it, were lost to
    /// errors: the SKP symbols are still the deskew markers, and the LFSR is reset, as the COM left it, since
    /// SKP holds it (lost symbols taken for data advanced it).
    fn skip_after_lost_symbols(&mut self, emit: &mut impl FnMut(LaneEvent)) {
        self.descrambler.reset();
        self.collecting = Collecting::Skip { skps: 1 };
        emit(LaneEvent::Symbol(SymbolItem::Marker));
    }

    fn start_ordered_set(&mut self, emit: &mut impl FnMut(LaneEvent)) {
        self.since_com = 0;
        self.descrambler.descramble(Symbol::COM);
        self.ts[0] = Symbol::COM;
        self.ts_len = 1;
        self.collecting = Collecting::AfterCom;
        emit(LaneEvent::Symbol(SymbolItem::OrderedSet));
    }

    /// Bits received during one 128b/130b slot.
    pub(super) fn receive_128b130b(&mut self, bits: &SlotBits, emit: &mut impl FnMut(LaneEvent)) {
        for (chunk, n) in bits.chunks() {
            let chunk = if self.inverted {
                crate::lanes::invert_polarity(chunk, n)
            } else {
                chunk
            };
            self.blocks.push_bits(chunk, n);
        }
        loop {
            let headers_before = self.blocks.counters().invalid_sync_headers;
            let Some(block) = self.blocks.pop() else { break };
            if self.blocks.counters().invalid_sync_headers != headers_before && block.is_ok() {
                // Taken as data by the locked decoder, but still a receiver error.
                emit(LaneEvent::Error(RxError::Block));
            }
            if self.blocks.take_descrambler_out_of_step() {
                emit(LaneEvent::DescramblerOutOfStep);
            }
            match block {
                Ok(block) => block_events(&block, emit),
                Err(_) => {
                    emit(LaneEvent::Error(RxError::Block));
                    emit(LaneEvent::Block(BlockItem::OrderedSet));
                }
            }
        }
    }
}

fn block_events(block: &Block, emit: &mut impl FnMut(LaneEvent)) {
    if block.header == SyncHeader::Data {
        emit(LaneEvent::Block(BlockItem::Data(block.payload)));
        return;
    }
    let item = match OrderedSetBlock::parse(&block.payload) {
        Ok(OrderedSetBlock::Training(ts)) => {
            emit(LaneEvent::Training(ts));
            BlockItem::OrderedSet
        }
        Ok(OrderedSetBlock::Skp { .. }) => {
            emit(LaneEvent::Skip);
            BlockItem::Skp
        }
        Ok(OrderedSetBlock::Sds) => {
            emit(LaneEvent::Sds);
            BlockItem::Sds
        }
        Ok(OrderedSetBlock::Eios) => {
            emit(LaneEvent::ElectricalIdleOs);
            BlockItem::OrderedSet
        }
        Ok(_) => BlockItem::OrderedSet,
        Err(_) => {
            emit(LaneEvent::Error(RxError::MalformedOrderedSet));
            BlockItem::OrderedSet
        }
    };
    emit(LaneEvent::Block(item));
}

#[cfg(test)]
mod tests {
    use super::super::lane_tx::LaneTx;
    use super::*;
    use crate::ordered_set::{EIOS_8B10B, SKP_8B10B};
    use std::vec::Vec;

    /// A code group in neither column (`abcdei fghj` = `010010 0100`), with no run longer than two, so
    /// that it makes no comma with its neighbours.
    const INVALID: u16 = 0x092;

    /// `data` bytes, a SKP ordered set, then `after` data bytes, sent by a lane transmitter behind two
    /// EIOS (for symbol lock), with code group `hit` from the SKP ordered set on (0 = COM) made invalid. Returns
    /// the deskew items received from the first data byte on.
    fn receive_with_hit(data: &[u8], after: &[u8], hit: usize) -> Vec<SymbolItem> {
        receive_with(data, &SKP_8B10B, after, hit, None)
    }

    /// The deskew items of data bytes `bytes` after the first of a stream.
    fn data_items(bytes: &[u8]) -> impl Iterator<Item = SymbolItem> + '_ {
        bytes.iter().map(|&b| SymbolItem::Data(b))
    }

    /// [`receive_with_hit`] with `skp` for the SKP ordered set, and the bits of the hit code group set in
    /// `flip` flipped instead (if given; no code group is hit if `hit` is past the end).
    fn receive_with(
        data: &[u8],
        skp: &[Symbol],
        after: &[u8],
        hit: usize,
        flip: Option<u32>,
    ) -> Vec<SymbolItem> {
        let mut tx = LaneTx::new(0);
        let mut sent = symbol_lock(&mut tx);
        for &b in data {
            sent.push(tx.symbol(Symbol::Data(b), false));
        }
        let skp = skp.iter().map(|&s| (s, true));
        for (i, (s, in_ordered_set)) in skp
            .chain(after.iter().map(|&b| (Symbol::Data(b), false)))
            .enumerate()
        {
            let mut bits = tx.symbol(s, in_ordered_set);
            if i == hit {
                let code = match flip {
                    Some(mask) => bits.get(0, 10) ^ u64::from(mask),
                    None => u64::from(INVALID),
                };
                bits = SlotBits::EMPTY;
                bits.push(code, 10);
            }
            sent.push(bits);
        }
        // The invalid group makes no comma with its neighbours, so symbol lock is not at stake here.
        let stream: Vec<bool> = sent
            .iter()
            .flat_map(|b| (0..10).map(move |i| b.get(i, 1) == 1))
            .collect();
        for start in 0..stream.len().saturating_sub(7) {
            let seven = &stream[start..start + 7];
            let comma = seven == [false, false, true, true, true, true, true]
                || seven == [true, true, false, false, false, false, false];
            assert!(!comma || start % 10 == 0, "a comma at bit {start}");
        }
        received_items(&sent)
    }

    /// Two EIOS from `tx`, for symbol lock.
    fn symbol_lock(tx: &mut LaneTx) -> Vec<SlotBits> {
        (0..2)
            .flat_map(|_| EIOS_8B10B)
            .map(|s| tx.symbol(s, true))
            .collect()
    }

    /// The deskew items a lane receiver makes of `sent`, which starts with [`symbol_lock`], from the
    /// first symbol after that on.
    fn received_items(sent: &[SlotBits]) -> Vec<SymbolItem> {
        let mut rx = LaneRx::new(0);
        let mut items = Vec::new();
        for bits in sent {
            rx.receive_8b10b(bits, &mut |e| {
                if let LaneEvent::Symbol(item) = e {
                    items.push(item);
                }
            });
        }
        // The EIOS symbols (8) come first.
        items.split_off(8)
    }

    /// `data_len` data bytes sent by a lane transmitter after [`symbol_lock`], those at `skp_hits` received as SKP
    /// and those at `invalid_hits` as [`INVALID`]: data symbols hit by errors. A symbol hit into SKP is sent
    /// as D20.1, which keeps the running disparity as SKP does, and received as the SKP of that disparity (an
    /// invalid one is sent as D20.1 too, so that the receiver's running disparity stays right). Returns the
    /// deskew items received, and the data bytes sent.
    fn receive_with_data_hits(
        data_len: usize,
        skp_hits: &[usize],
        invalid_hits: &[usize],
    ) -> (Vec<SymbolItem>, Vec<u8>) {
        const D20_1: u8 = 0x34;
        let mut tx = LaneTx::new(0);
        let mut sent = symbol_lock(&mut tx);
        let locked = sent.len();
        let mut keystream = Gen1Scrambler::new();
        EIOS_8B10B.iter().for_each(|&s| {
            keystream.pass(s);
        });
        let mut rd = Decoder::new(Disparity::Negative);
        let mut data = Vec::new();
        for i in 0..data_len {
            let ks = keystream.next_byte();
            let hit = skp_hits.contains(&i) || invalid_hits.contains(&i);
            let byte = if hit { ks ^ D20_1 } else { i as u8 };
            data.push(byte);
            sent.push(tx.symbol(Symbol::Data(byte), false));
        }
        for (i, bits) in sent.iter_mut().enumerate() {
            let code = bits.get(0, 10) as u16;
            let hit = if skp_hits.contains(&i.wrapping_sub(locked)) {
                crate::code8b10b::encode_symbol(rd.disparity(), Symbol::SKP)
                    .ok()
                    .map(|(code, _)| code)
            } else if invalid_hits.contains(&i.wrapping_sub(locked)) {
                Some(INVALID)
            } else {
                None
            };
            if let Some(hit) = hit {
                *bits = SlotBits::EMPTY;
                bits.push(u64::from(hit), 10);
            }
            let _ = rd.decode(code);
        }
        (received_items(&sent), data)
    }

    /// One bit error in a SKP ordered set costs its own symbol only: the other SKP symbols are still deskew
    /// markers and the data after it is descrambled right. A hit COM had left the descrambler unreset (every
    /// data byte after it wrong up to the next COM, a whole SKP interval); a hit first SKP made the other
    /// two unexpected symbols instead of markers, so that the deskew buffer saw markers missing on this lane
    /// in three columns, took it for a slipped lane and realigned, one column off, on the next markers.
    /// One bit error on the first data symbol after a SKP ordered set costs that symbol only. It had been
    /// taken for part of the ordered set: the descrambler was not advanced (every byte after it on the lane
    /// wrong up to the next COM), and the lane's first data came a column after the other lanes', two
    /// columns with markers missing, which the deskew buffer took for a slipped lane: it emptied its FIFOs
    /// and dropped everything up to the next SKP ordered set.
    #[test]
    fn the_invalid_code_group_is_invalid() {
        for rd in [Disparity::Negative, Disparity::Positive] {
            assert!(matches!(
                crate::code8b10b::decode_code_group(rd, INVALID),
                Err(Error::InvalidCodeGroup { .. })
            ));
        }
    }

    #[test]
    fn a_hit_first_data_symbol_after_a_skp_ordered_set_is_data() {
        let after: Vec<u8> = (0..40).collect();
        let items = receive_with_hit(&[0x11], &after, 4);
        assert_eq!(items.len(), 1 + 4 + 40, "{items:?}");
        assert_eq!(
            items[1..5],
            [
                SymbolItem::OrderedSet,
                SymbolItem::Marker,
                SymbolItem::Marker,
                SymbolItem::Marker
            ]
        );
        // The hit byte reads as 0 (which here it was), then the rest as sent.
        assert_eq!(items[5], SymbolItem::FirstData(0));
        let expected: Vec<SymbolItem> = data_items(&after[1..]).collect();
        assert_eq!(items[6..], expected[..]);
    }

    /// K28.0 (SKP) and K28.6 differ in bit `h` only, and both are balanced, so a SKP hit there decodes
    /// cleanly as a reserved K symbol. Inside the SKP ordered set it is taken as the SKP it most likely was:
    /// a marker that holds the LFSR. It had ended the ordered set as an unexpected symbol that advanced the
    /// LFSR by 8 shifts, and every data byte of the lane after it was wrong up to the next COM (a whole
    /// SKP interval).
    #[test]
    fn a_skp_hit_into_another_k_code_still_holds_the_lfsr() {
        let after: Vec<u8> = (0..40).collect();
        // The second and third SKP (the first, right after COM, is not yet known to be a SKP).
        for hit in 2..4 {
            let items = receive_with(&[0x11], &SKP_8B10B, &after, hit, Some(1 << 8));
            assert_eq!(items.len(), 1 + 4 + 40, "hit {hit}: {items:?}");
            assert_eq!(items[1], SymbolItem::OrderedSet);
            assert_eq!(items[2..5], [SymbolItem::Marker; 3], "hit {hit}");
            assert_eq!(items[5], SymbolItem::FirstData(0), "hit {hit}");
            let expected: Vec<SymbolItem> = data_items(&after[1..]).collect();
            assert_eq!(items[6..], expected[..], "hit {hit}");
        }
    }

    /// A COM hit into a readable symbol (FTS, K28.6, or a data symbol with the COM's running disparity):
    /// the SKP symbols after it still open the SKP ordered set and reset the LFSR.
    #[test]
    fn a_com_hit_into_a_readable_symbol_still_resets_the_lfsr() {
        let data = [0x11, 0x22, 0x33];
        let after: Vec<u8> = (0..40).collect();
        for (mask, markers) in [(0b11 << 8, 3), (0b11 << 6, 3), (0b1001, 2)] {
            let items = receive_with(&data, &SKP_8B10B, &after, 0, Some(mask));
            assert_eq!(items.len(), 3 + 4 + 40, "mask {mask:#x}: {items:?}");
            let skps = items[4..7].iter().filter(|&&i| i == SymbolItem::Marker).count();
            assert_eq!(skps, markers, "mask {mask:#x}: {items:?}");
            assert_eq!(items[7], SymbolItem::FirstData(0), "mask {mask:#x}: {items:?}");
            let expected: Vec<SymbolItem> = data_items(&after[1..]).collect();
            assert_eq!(items[8..], expected[..], "mask {mask:#x}");
        }
    }

    #[test]
    fn a_hit_skp_ordered_set_keeps_its_markers_and_the_descrambler_in_step() {
        let data = [0x11, 0x22, 0x33];
        let after: Vec<u8> = (0..40).collect();
        for hit in 0..4 {
            let items = receive_with_hit(&data, &after, hit);
            assert_eq!(items.len(), 3 + 4 + 40, "hit {hit}: {items:?}");
            assert_eq!(
                items[..3],
                [
                    SymbolItem::FirstData(0x11),
                    SymbolItem::Data(0x22),
                    SymbolItem::Data(0x33)
                ]
            );
            // At least two of the three SKP symbols' slots are markers (a hit COM can take the first SKP
            // with it: the running disparity it would have flipped is lost), and so is the last.
            let markers = items[4..7].iter().filter(|&&i| i == SymbolItem::Marker).count();
            assert!(markers >= 2, "hit {hit}: {:?}", &items[3..7]);
            assert_eq!(
                items[if hit == 3 { 5 } else { 6 }],
                SymbolItem::Marker,
                "hit {hit}"
            );
            assert_eq!(items[7], SymbolItem::FirstData(0), "hit {hit}");
            let received: Vec<SymbolItem> = items[8..].to_vec();
            let expected: Vec<SymbolItem> = data_items(&after[1..]).collect();
            assert_eq!(received, expected, "hit {hit}");
        }
    }

    /// Two data symbols in a row hit into SKP, or an unreadable one then one hit into SKP: a lone SKP after
    /// a symbol lost to an error, with a data symbol after it. It was taken for a SKP ordered set whose COM
    /// was lost: a deskew marker in a data symbol's slot, and the LFSR reset, so every data byte of the lane
    /// after it was wrong up to the next COM. A SKP ordered set has at least two SKP symbols left when its
    /// COM is lost (a transmitter sends three), so the lone one is a data symbol hit, costing its own byte.
    #[test]
    fn a_lone_skp_after_a_lost_symbol_is_a_hit_data_symbol() {
        for (skp_hits, invalid_hits) in [(&[10, 11][..], &[][..]), (&[11], &[10])] {
            let (items, data) = receive_with_data_hits(40, skp_hits, invalid_hits);
            let mut expected = std::vec![SymbolItem::FirstData(data[0])];
            expected.extend(data_items(&data[1..]));
            for &hit in skp_hits.iter().chain(invalid_hits) {
                expected[hit] = SymbolItem::Data(0);
            }
            assert_eq!(
                items, expected,
                "SKP at {skp_hits:?}, invalid at {invalid_hits:?}"
            );
        }
    }

    /// The same hits on the first two data symbols after an ordered set, within 5 symbols of its COM: the
    /// ordered set was over, so the SKP is not its but a data symbol hit too. A SKP within 5 symbols of any
    /// COM had been taken for that COM's SKP ordered set's even after the ordered set had ended (here an
    /// EIOS; the same after a SKP ordered set's three SKP, where data follows): a marker and the LFSR reset,
    /// every later data byte of the lane wrong up to the next COM.
    #[test]
    fn a_lone_skp_right_after_an_ordered_set_is_a_hit_data_symbol() {
        let (items, data) = receive_with_data_hits(40, &[1], &[0]);
        let mut expected = std::vec![SymbolItem::FirstData(0), SymbolItem::Data(0)];
        expected.extend(data_items(&data[2..]));
        assert_eq!(items, expected);
    }

    /// A receiver accepts a SKP ordered set of 1 to 5 SKP symbols (spec 1.4, as PCI Express: clock
    /// compensation adds or removes them on the way): the data after one of 1 or 2 is descrambled right.
    /// The receiver took the first data symbols after them for the SKP symbols every transmitter sends,
    /// hit: it held the LFSR there, and every data byte after them came out wrong.
    #[test]
    fn a_skp_ordered_set_of_one_to_five_skp_symbols_is_accepted() {
        let after: Vec<u8> = (0..40).collect();
        for skps in 1..=5 {
            let mut skp = std::vec![Symbol::COM];
            skp.extend([Symbol::SKP].repeat(skps));
            let items = receive_with(&[0x11], &skp, &after, usize::MAX, None);
            let mut expected = std::vec![SymbolItem::FirstData(0x11), SymbolItem::OrderedSet];
            expected.extend([SymbolItem::Marker].repeat(skps));
            expected.push(SymbolItem::FirstData(0));
            expected.extend(data_items(&after[1..]));
            assert_eq!(items, expected, "{skps} SKP symbols");
        }
    }

    /// Two bit errors can turn a SKP ordered set's COM into another K code that decodes cleanly, with the
    /// same running disparity. It is taken for a data symbol hit into a control one, as an unreadable code
    /// group is, and so is its SKP symbols' start: they are still markers, and the LFSR is reset as the COM
    /// would have. The SKP symbols had been taken for three more hit data symbols, the LFSR not reset, and
    /// every data byte of the lane after them came out wrong up to the next COM.
    #[test]
    fn a_com_hit_into_another_k_code_keeps_the_skp_markers_and_the_descrambler_in_step() {
        let after: Vec<u8> = (0..40).collect();
        // The code group's bits (as `SlotBits` holds them) that make K28.5 another K code with them.
        for mask in [0b0011000000, 0b1001000000, 0b1100000000] {
            let items = receive_with(&[0x11], &SKP_8B10B, &after, 0, Some(mask));
            let mut expected = std::vec![SymbolItem::FirstData(0x11), SymbolItem::Data(0)];
            expected.extend([SymbolItem::Marker; 3]);
            expected.push(SymbolItem::FirstData(0));
            expected.extend(data_items(&after[1..]));
            assert_eq!(items, expected, "{mask:010b}");
        }
    }
}
