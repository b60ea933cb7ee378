//! What a link's receiver does above its lanes' receivers: line the lanes up again (deskew) and read each
//! column across them as the stream's next bytes, in stream order, or as a column of ordered sets. A port
//! ([`super::Port`]) and a monitor of a capture ([`super::LinkMonitor`]) share it.

use super::lane_rx::{BlockItem, SymbolItem};
use super::UNIT_BYTES;
use crate::error::Error;
use crate::lanes::deskew::Deskew;
use crate::lanes::{stripe, LinkWidth, MAX_LANES};
use crate::rate::LineCode;

/// Symbol times of lane-to-lane skew a receiver absorbs at 8b/10b (docs/spec.md section 1.5).
pub(super) const DESKEW_SYMBOLS: usize = 64;

/// Most bytes one column holds: a 128b/130b block on each of sixteen lanes.
pub(super) const COLUMN_BYTES: usize = UNIT_BYTES * MAX_LANES;

/// The deskew buffers of both line codes, and how the last column was taken.
#[derive(Clone, Debug)]
pub(super) struct Columns {
    symbols: Deskew<SymbolItem, { DESKEW_SYMBOLS + 1 }>,
    blocks: Deskew<BlockItem, 32>,
    /// Whether the last 8b/10b column was taken as data.
    in_data: bool,
}

/// A column across the link's lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Column {
    /// This many bytes of the stream, in the buffer given to [`Columns::pop`].
    Data(usize),
    /// Ordered sets: the data stream stops here.
    OrderedSets {
        /// On every lane (not a data column some of whose lanes were hit).
        all: bool,
        /// Some lane's is not a deskew marker (a SKP, or the stream's start), which interrupts idle.
        interrupts_idle: bool,
    },
}

impl Columns {
    /// Empty buffers for a link of one lane.
    pub(super) fn new() -> Result<Self, Error> {
        Ok(Columns {
            symbols: Deskew::new(1, SymbolItem::marker)?,
            blocks: Deskew::new(1, BlockItem::marker)?,
            in_data: false,
        })
    }

    /// Empty the buffers, for a link of `width`: they line its lanes up afresh on the next marker that
    /// comes on all of them.
    pub(super) fn reset(&mut self, width: LinkWidth) {
        // Cannot fail: a link width is a number of lanes the buffers take.
        let _ = self.symbols.reset(width.lanes());
        let _ = self.blocks.reset(width.lanes());
        self.in_data = false;
    }

    /// Line up afresh at the next marker, keeping what the buffers hold ([`Deskew::realign`]).
    pub(super) fn realign(&mut self) {
        self.symbols.realign();
        self.blocks.realign();
    }

    /// Logical lane `lane`'s next symbol (8b/10b); an error if its buffer overflowed (the lanes are
    /// further apart than it holds, and it starts over).
    #[inline]
    pub(super) fn push_symbol(&mut self, lane: usize, item: SymbolItem) -> Result<(), Error> {
        self.symbols.push(lane, item)
    }

    /// Logical lane `lane`'s next block (128b/130b), as [`Columns::push_symbol`].
    #[inline]
    pub(super) fn push_block(&mut self, lane: usize, item: BlockItem) -> Result<(), Error> {
        self.blocks.push(lane, item)
    }

    /// Times the buffers lost their alignment.
    pub(super) fn losses(&self) -> u64 {
        self.symbols.losses() + self.blocks.losses()
    }

    /// The logical lanes that were late at the 8b/10b buffer's last overflow ([`Deskew::late_at_overflow`]).
    pub(super) fn late_at_overflow(&self) -> u32 {
        self.symbols.late_at_overflow()
    }

    /// The next column of a link of `width` in `code`, once every lane has it, its data into `stream`
    /// (which must hold a column: `width` bytes at 8b/10b, 16 for each lane at 128b/130b; a column it
    /// cannot hold is left in the buffers).
    ///
    /// At 8b/10b a column with data on most lanes is a data column whose other lanes were hit, when
    /// `lenient` (a bit error can make a COM of a data symbol, and that lane then reads the next symbols as
    /// an ordered set's): passed on with zeros there, as an unreadable symbol is, it keeps the units'
    /// framing, which an ordered set restarts. Taken for an ordered set, it had dropped a row and shifted
    /// every unit after it by a row, all of them corrupt, up to the next SKP ordered set. Half and half, it
    /// goes on as the column before it did. A port is lenient in L0 only: in Configuration.Idle and
    /// Recovery.Idle the logical idle that takes it to L0 must come on every lane.
    #[inline]
    pub(super) fn pop(
        &mut self,
        code: LineCode,
        width: LinkWidth,
        lenient: bool,
        stream: &mut [u8],
    ) -> Option<Column> {
        let lanes = width.lanes();
        let needed = match code {
            LineCode::Code8b10b => lanes,
            LineCode::Code128b130b => UNIT_BYTES * lanes,
        };
        if stream.len() < needed {
            return None;
        }
        match code {
            LineCode::Code8b10b => {
                let mut column = [SymbolItem::OrderedSet; MAX_LANES];
                self.symbols.pop(&mut column)?;
                let column = &column[..lanes];
                let mut data_lanes = 0;
                for (byte, item) in stream.iter_mut().zip(column) {
                    *byte = match *item {
                        SymbolItem::Data(b) | SymbolItem::FirstData(b) => {
                            data_lanes += 1;
                            b
                        }
                        SymbolItem::OrderedSet | SymbolItem::Marker => 0,
                    };
                }
                let mixed_data =
                    lenient && (2 * data_lanes > lanes || (2 * data_lanes == lanes && self.in_data));
                self.in_data = data_lanes == lanes || mixed_data;
                Some(if self.in_data {
                    Column::Data(lanes)
                } else {
                    Column::OrderedSets {
                        all: column.iter().all(|&i| i == SymbolItem::OrderedSet),
                        interrupts_idle: column.iter().any(|i| i.marker().is_none()),
                    }
                })
            }
            LineCode::Code128b130b => {
                let mut column = [BlockItem::OrderedSet; MAX_LANES];
                self.blocks.pop(&mut column)?;
                let column = &column[..lanes];
                let mut lanes_data = [0u8; COLUMN_BYTES];
                for (lane, item) in lanes_data.chunks_exact_mut(UNIT_BYTES).zip(column) {
                    match item {
                        BlockItem::Data(payload) => lane.copy_from_slice(payload),
                        _ => {
                            return Some(Column::OrderedSets {
                                all: column.iter().all(|&i| i == BlockItem::OrderedSet),
                                interrupts_idle: column.iter().any(|i| i.marker().is_none()),
                            })
                        }
                    }
                }
                let len = UNIT_BYTES * lanes;
                // Cannot fail: `len` is whole rows of `width` and fits the buffer.
                stripe::unstripe(&lanes_data[..len], width, stream).ok()?;
                Some(Column::Data(len))
            }
        }
    }
}
