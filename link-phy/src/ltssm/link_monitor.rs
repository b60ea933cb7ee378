//! A link's receiver on its own, for reading a capture of all of a transmitter's lanes: each lane read as
//! a [`LaneMonitor`] reads it, the lanes lined up again by the ordered sets every lane sends at once
//! (deskew), and the columns across them put back into the stream the data link above receives, in
//! 16-byte units, as a port's receiver does (docs/spec.md 1.5 and 1.6).

use super::columns::{Column, Columns, COLUMN_BYTES};
use super::lane_rx::LaneEvent;
use super::monitor::{LaneMonitor, MonitorEvent};
use super::UNIT_BYTES;
use crate::error::Error;
use crate::lanes::{LinkWidth, MAX_LANES};
use crate::rate::LineCode;

/// What a [`LinkMonitor`] saw, in the order it was received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkEvent<'a> {
    /// What physical lane `lane`'s receiver saw, but its data (which is in [`LinkEvent::Units`]).
    Lane {
        /// The physical lane.
        lane: usize,
        /// What it saw.
        event: MonitorEvent,
    },
    /// The lanes' numbers changed (at 8b/10b, read from training sets): the deskew starts over.
    Lanes(LaneNumbers),
    /// Whole units of the data stream, in order.
    Units(&'a [u8]),
    /// A column of ordered sets after data: the data stream stops, `dropped` bytes short of a whole
    /// unit (a transmitter sends ordered sets between units, so anything else is damage).
    StreamStopped {
        /// Bytes of an unfinished unit dropped.
        dropped: usize,
    },
    /// The deskew buffer overflowed (lanes further apart than it holds, or a lane that lost or gained
    /// symbols): it lines the lanes up afresh at the next marker on all of them.
    DeskewLost,
}

/// Which logical lane each physical lane carries, if any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneNumbers(pub [Option<u8>; MAX_LANES]);

impl LaneNumbers {
    /// The width of the data stream these lanes carry: numbered 0 to w - 1, each once, for a width w.
    pub fn width(&self) -> Option<LinkWidth> {
        let mut seen = 0u32;
        for &n in self.0.iter().flatten() {
            if n as usize >= MAX_LANES || seen & 1 << n != 0 {
                return None;
            }
            seen |= 1 << n;
        }
        let width = LinkWidth::from_lanes(seen.count_ones() as usize).ok()?;
        (seen == (1 << width.lanes()) - 1).then_some(width)
    }
}

/// A link's receiver on its own: push each physical lane's serial bits, a little at a time from each in
/// turn (no lane more than the deskew buffer's depth ahead of the others), and get what a port's
/// receiver makes of them.
///
/// At 128b/130b each lane's number must be given: it seeds the lane's descrambler, which scrambles the
/// training sets that carry it too (`linkctl link decode` finds it by trying each on the lane's
/// [`LaneMonitor`]). At 8b/10b numbers are also read from the training sets, as Configuration assigns them: a training set with a lane number
/// gives its lane that number, and one with PAD takes it away.
#[derive(Clone, Debug)]
pub struct LinkMonitor {
    code: LineCode,
    lanes: [LaneMonitor; MAX_LANES],
    numbers: LaneNumbers,
    width: Option<LinkWidth>,
    columns: Columns,
    /// The unit being put together from 8b/10b columns.
    unit: [u8; UNIT_BYTES],
    unit_len: usize,
    in_stream: bool,
}

impl LinkMonitor {
    /// A receiver for a capture in `code` whose lanes carry `numbers`.
    pub fn new(code: LineCode, numbers: LaneNumbers) -> Result<Self, Error> {
        let lanes =
            core::array::from_fn(|p| LaneMonitor::with_code(code, numbers.0[p].map_or(p, usize::from)));
        let mut monitor = LinkMonitor {
            code,
            lanes,
            numbers,
            width: None,
            columns: Columns::new()?,
            unit: [0; UNIT_BYTES],
            unit_len: 0,
            in_stream: false,
        };
        monitor.renumber(numbers);
        Ok(monitor)
    }

    /// The lanes' numbers now.
    pub fn numbers(&self) -> LaneNumbers {
        self.numbers
    }

    /// The width of the data stream now, if the lanes' numbers make one.
    pub fn width(&self) -> Option<LinkWidth> {
        self.width
    }

    /// Take physical lane `lane`'s next `count` (at most 64) serial bits, the first on the wire in bit 0,
    /// and report what they complete. Bits of a lane past the sixteenth are ignored.
    pub fn push_bits(&mut self, lane: usize, bits: u64, count: u32, emit: &mut impl FnMut(LinkEvent)) {
        let Some(monitor) = self.lanes.get_mut(lane) else {
            return;
        };
        let mut events: heapless::Vec<LaneEvent, 32> = heapless::Vec::new();
        // 64 bits are at most seven code groups or one block: a few events each, far fewer than room.
        monitor.push_lane(bits, count, &mut |e| {
            let _ = events.push(e);
        });
        for &event in &events {
            self.lane_event(lane, event, emit);
        }
        self.drain(emit);
    }

    fn lane_event(&mut self, lane: usize, event: LaneEvent, emit: &mut impl FnMut(LinkEvent)) {
        let logical = self.numbers.0[lane]
            .map(usize::from)
            .filter(|&l| self.width.is_some_and(|w| l < w.lanes()));
        let pushed = match event {
            LaneEvent::Symbol(item) => logical.map(|l| self.columns.push_symbol(l, item)),
            LaneEvent::Block(item) => logical.map(|l| self.columns.push_block(l, item)),
            _ => None,
        };
        if pushed.is_some_and(|r| r.is_err()) {
            emit(LinkEvent::DeskewLost);
        }
        if let LaneEvent::Training(ts) = event {
            if self.code == LineCode::Code8b10b && ts.lane != self.numbers.0[lane] {
                let mut numbers = self.numbers;
                numbers.0[lane] = ts.lane;
                self.renumber(numbers);
                emit(LinkEvent::Lanes(numbers));
            }
        }
        if let Some(event) = MonitorEvent::from_lane(event) {
            if !matches!(event, MonitorEvent::Data { .. }) {
                emit(LinkEvent::Lane { lane, event });
            }
        }
    }

    fn renumber(&mut self, numbers: LaneNumbers) {
        self.numbers = numbers;
        self.width = numbers.width();
        self.columns.reset(self.width.unwrap_or(LinkWidth::X1));
        self.unit_len = 0;
        self.in_stream = false;
    }

    /// Every column all the lanes have.
    fn drain(&mut self, emit: &mut impl FnMut(LinkEvent)) {
        let Some(width) = self.width else { return };
        let mut stream = [0u8; COLUMN_BYTES];
        // A monitor reads a column with data on most lanes as data, as a port in L0 does: it cannot tell
        // the idle of Configuration from that of L0, and errors matter only in the stream.
        while let Some(column) = self.columns.pop(self.code, width, true, &mut stream) {
            match column {
                Column::Data(len) => {
                    self.in_stream = true;
                    self.stream(&stream[..len], emit);
                }
                Column::OrderedSets { .. } => {
                    if core::mem::take(&mut self.in_stream) {
                        emit(LinkEvent::StreamStopped {
                            dropped: core::mem::take(&mut self.unit_len),
                        });
                    }
                }
            }
        }
    }

    /// The stream's next bytes, passed on in whole units.
    fn stream(&mut self, mut bytes: &[u8], emit: &mut impl FnMut(LinkEvent)) {
        if self.unit_len == 0 {
            let whole = bytes.len() - bytes.len() % UNIT_BYTES;
            if whole > 0 {
                emit(LinkEvent::Units(&bytes[..whole]));
            }
            bytes = &bytes[whole..];
        }
        for &b in bytes {
            if let Some(slot) = self.unit.get_mut(self.unit_len) {
                *slot = b;
            }
            self.unit_len += 1;
            if self.unit_len == UNIT_BYTES {
                self.unit_len = 0;
                emit(LinkEvent::Units(&self.unit));
            }
        }
    }
}
