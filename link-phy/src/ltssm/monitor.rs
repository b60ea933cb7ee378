//! A lane receiver on its own, for reading a capture of a lane: the alignment, decoding, polarity
//! correction, descrambling and ordered-set recognition a port's lane receiver does, reported as events
//! instead of acted on.

use super::lane_rx::{BlockItem, LaneEvent, LaneRx, RxError, SymbolItem};
use crate::ordered_set::TrainingSet;
use crate::rate::LineCode;
use crate::serial::SlotBits;

/// What a [`LaneMonitor`] saw, in the order it was received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MonitorEvent {
    /// A training set (TS1 or TS2), its polarity corrected.
    Training(TrainingSet),
    /// Training sets arrived inverted: the monitor inverts the lane's bits from here on, as a receiver
    /// does in Polling.
    PolarityInverted,
    /// An electrical idle ordered set.
    ElectricalIdle,
    /// A SKP ordered set.
    Skip,
    /// A data symbol outside ordered sets, descrambled; `first` after an ordered set (the data stream
    /// starts or resumes).
    Data {
        /// The byte.
        byte: u8,
        /// The first data symbol after an ordered set.
        first: bool,
    },
    /// A code group that did not decode, or one from the wrong running disparity.
    CodeError,
    /// An ordered set that was not one the receiver knows, or was spoilt.
    MalformedOrderedSet,
    /// A control symbol where none belongs.
    UnexpectedSymbol,
    /// A start-of-data-stream ordered set (128b/130b).
    StartOfData,
    /// A block whose sync header is neither a data block's nor an ordered set's (128b/130b).
    BlockError,
    /// A second SKP ordered set in a row whose LFSR disagrees with the lane's descrambler (128b/130b): the
    /// data blocks after it are not descrambled right until the next EIEOS.
    DescramblerOutOfStep,
}

impl MonitorEvent {
    /// What a lane receiver's event says, if it says anything of its own: ordered-set symbols are
    /// reported whole, 128b/130b data blocks are left to the stream ([`super::LinkMonitor`]).
    pub(super) fn from_lane(event: LaneEvent) -> Option<MonitorEvent> {
        Some(match event {
            LaneEvent::Training(ts) => MonitorEvent::Training(ts),
            LaneEvent::PolarityInverted => MonitorEvent::PolarityInverted,
            LaneEvent::ElectricalIdleOs => MonitorEvent::ElectricalIdle,
            LaneEvent::Skip => MonitorEvent::Skip,
            LaneEvent::Sds => MonitorEvent::StartOfData,
            LaneEvent::Symbol(SymbolItem::Data(byte)) => MonitorEvent::Data { byte, first: false },
            LaneEvent::Symbol(SymbolItem::FirstData(byte)) => MonitorEvent::Data { byte, first: true },
            LaneEvent::Error(RxError::CodeViolation | RxError::Disparity) => MonitorEvent::CodeError,
            LaneEvent::Error(RxError::MalformedOrderedSet) => MonitorEvent::MalformedOrderedSet,
            LaneEvent::Error(RxError::Block) => MonitorEvent::BlockError,
            LaneEvent::Error(RxError::UnexpectedSymbol) => MonitorEvent::UnexpectedSymbol,
            LaneEvent::DescramblerOutOfStep => MonitorEvent::DescramblerOutOfStep,
            LaneEvent::Symbol(SymbolItem::OrderedSet | SymbolItem::Marker)
            | LaneEvent::Block(
                BlockItem::Data(_) | BlockItem::OrderedSet | BlockItem::Skp | BlockItem::Sds,
            ) => return None,
        })
    }

    /// Whether this is a receiver error.
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            MonitorEvent::CodeError
                | MonitorEvent::MalformedOrderedSet
                | MonitorEvent::UnexpectedSymbol
                | MonitorEvent::BlockError
                | MonitorEvent::DescramblerOutOfStep
        )
    }
}

/// One lane's receiver, on its own: push the lane's serial bits, get what a port's receiver would make
/// of them.
#[derive(Clone, Debug)]
pub struct LaneMonitor {
    rx: LaneRx,
    code: LineCode,
}

impl Default for LaneMonitor {
    fn default() -> Self {
        Self::new()
    }
}

impl LaneMonitor {
    /// A receiver at 8b/10b that has seen nothing: it aligns at the first comma.
    pub fn new() -> Self {
        // The lane number seeds only the 128b/130b descrambler.
        Self::with_code(LineCode::Code8b10b, 0)
    }

    /// A receiver at 128b/130b that has seen nothing, for the lane numbered `lane_number` (its
    /// descrambler's seed, which training sets' symbols 1 to 13 are scrambled with too): it aligns at the
    /// first EIEOS.
    pub fn new_128b130b(lane_number: usize) -> Self {
        Self::with_code(LineCode::Code128b130b, lane_number)
    }

    /// A receiver in `code` that has seen nothing, for the lane numbered `lane_number` (at 128b/130b its
    /// descrambler's seed; it aligns at the first EIEOS).
    pub(super) fn with_code(code: LineCode, lane_number: usize) -> Self {
        LaneMonitor {
            rx: LaneRx::new(lane_number),
            code,
        }
    }

    /// Take the next `count` (at most 64) serial bits, the first on the wire in bit 0, and report what
    /// they complete.
    pub fn push_bits(&mut self, bits: u64, count: u32, emit: &mut impl FnMut(MonitorEvent)) {
        self.push_lane(bits, count, &mut |event| {
            if let Some(event) = MonitorEvent::from_lane(event) {
                emit(event);
            }
        });
    }

    /// [`LaneMonitor::push_bits`], with the lane receiver's own events.
    pub(super) fn push_lane(&mut self, bits: u64, count: u32, emit: &mut impl FnMut(LaneEvent)) {
        let (mut bits, mut left) = (bits, count.min(64));
        if self.code == LineCode::Code128b130b {
            let mut slot = SlotBits::EMPTY;
            slot.push(bits, left);
            self.rx.receive_128b130b(&slot, emit);
            return;
        }
        // A code group at a time, so that bits after a training set that turns out inverted are taken
        // inverted, as a port's are slot by slot.
        while left > 0 {
            let n = left.min(10);
            // The group's bits are the low `n`; `SlotBits::push` takes no more.
            self.push_group(bits, n, emit);
            bits >>= n;
            left -= n;
        }
    }

    fn push_group(&mut self, bits: u64, count: u32, emit: &mut impl FnMut(LaneEvent)) {
        let mut slot = SlotBits::EMPTY;
        slot.push(bits, count);
        let mut inverted = false;
        self.rx.receive_8b10b(&slot, &mut |event| {
            inverted |= event == LaneEvent::PolarityInverted;
            emit(event);
        });
        if inverted {
            // As a port does in Polling: the lane starts over with its bits inverted.
            self.rx.inverted = !self.rx.inverted;
            self.rx.reset(0);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::code8b10b::Encoder;
    use crate::ordered_set::DataRates;
    use crate::scrambler::Gen1Scrambler;
    use crate::symbol::Symbol;

    /// What the monitor reports for `symbols` sent as a transmitter sends them (ordered sets unscrambled,
    /// data scrambled), with every bit inverted if `inverted`.
    fn monitored(symbols: &[(Symbol, bool)], inverted: bool) -> Vec<MonitorEvent> {
        let (mut encoder, mut scrambler) = (Encoder::new(), Gen1Scrambler::new());
        let (mut monitor, mut events) = (LaneMonitor::new(), Vec::new());
        for &(s, in_ordered_set) in symbols {
            let s = if in_ordered_set {
                scrambler.pass(s)
            } else {
                scrambler.scramble(s)
            };
            let code = u64::from(encoder.encode(s).unwrap());
            let code = if inverted { !code & 0x3FF } else { code };
            monitor.push_bits(code, 10, &mut |e| events.push(e));
        }
        events
    }

    #[test]
    fn a_lane_is_read_as_a_port_reads_it() {
        let ts = TrainingSet::polling(DataRates::GEN1 | DataRates::GEN2, 32);
        let mut symbols: Vec<(Symbol, bool)> = Vec::new();
        for _ in 0..3 {
            symbols.extend(ts.to_symbols().iter().map(|&s| (s, true)));
        }
        symbols.extend([Symbol::COM, Symbol::SKP, Symbol::SKP, Symbol::SKP].map(|s| (s, true)));
        symbols.extend([0u8, 0x5A, 0xFF].map(|b| (Symbol::Data(b), false)));
        symbols.extend([Symbol::COM, Symbol::IDL, Symbol::IDL, Symbol::IDL].map(|s| (s, true)));
        let data = |byte, first| MonitorEvent::Data { byte, first };
        let expected = [
            MonitorEvent::Training(ts),
            MonitorEvent::Training(ts),
            MonitorEvent::Training(ts),
            MonitorEvent::Skip,
            data(0, true),
            data(0x5A, false),
            data(0xFF, false),
            MonitorEvent::ElectricalIdle,
        ];
        assert_eq!(monitored(&symbols, false), expected);
        // Inverted, the first training set shows it; the lane is taken inverted from the next one on.
        let events = monitored(&symbols, true);
        assert_eq!(events[0], MonitorEvent::PolarityInverted);
        assert_eq!(events[1..], expected[1..]);
    }

    #[test]
    fn noise_gives_no_more_events_than_code_groups() {
        // Random bits in pieces of every length up to 64: no panic, and at most an event or two per
        // code group (a symbol and the error it raised).
        let mut x = 0x853C_49E6_748F_EA9Bu64;
        let mut monitor = LaneMonitor::new();
        let (mut bits, mut events) = (0u64, 0u64);
        for round in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let count = round % 65;
            monitor.push_bits(x, count, &mut |_| events += 1);
            bits += u64::from(count);
        }
        assert!(events <= 2 * (bits / 10 + 1), "{events} events from {bits} bits");
    }
}
