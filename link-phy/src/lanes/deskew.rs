//! Lane-to-lane deskew.
//!
//! Every lane of a link sends each ordered set in the same symbol (or block) time, but the lanes reach the
//! receiver with different delays. The deskew buffer holds each lane's items in a FIFO and releases them a
//! column at a time (one item per lane) once every lane has the same *marker* at the head of its FIFO.
//!
//! The marker must be rarer than the largest skew to be absorbed, or two lanes could line up on different
//! instances of it: training sets repeat every 16 symbols, so at 8b/10b the marker is the SKP ordered set
//! (one every 1180 symbols), which lets the buffer absorb up to `DEPTH` symbols of skew. At 128b/130b the
//! marker is the SKP or SDS ordered-set block.
//!
//! Markers are of kinds (a SKP; the start of the data stream, an SDS or the first data symbol after an
//! ordered set), and lanes line up only on markers of one kind. A data stream's start may follow a SKP by
//! fewer items than the buffer holds: after an overflow empties the buffer, a late lane's next marker is the
//! SKP the early lanes have already passed, and the early lanes' next is the stream's start. The two are
//! different instances, and lining them up would shift the lanes by the distance between them.
//!
//! Markers come in runs (a SKP ordered set's three SKP symbols and the first data symbol after them), and
//! before alignment a lane's FIFO starts only at the first marker of a run: the buffer may start, or empty
//! after a slip, in the middle of a run, when the early lanes have received more of it than the late ones,
//! and the next marker each lane then has is not the same one.
//!
//! After alignment, a column in which some lanes show a marker and others do not is most likely a bit
//! error on one lane's marker: it is counted and passed on, and alignment kept. Two such columns in a row
//! mean a lane slipped: the buffer empties and aligns afresh on the next marker (counted as a loss).

use heapless::Deque;

use crate::error::Error;
use crate::lanes::MAX_LANES;

/// Two columns with markers on some lanes only, this close together, mean a lane slipped (a bit error
/// spoils one column; a slip spoils both edges of an ordered set).
const SLIP_WINDOW: u32 = 8;

/// Overflows with no alignment between them for [`Deskew::late_at_overflow`] to name the late lanes.
pub const OVERFLOWS_TO_BLAME: u32 = 3;

/// A deskew buffer for up to `MAX_LANES` lanes, each absorbing up to `DEPTH` items of skew.
#[derive(Clone, Debug)]
pub struct Deskew<T, const DEPTH: usize> {
    fifos: [Deque<T, DEPTH>; MAX_LANES],
    lanes: usize,
    /// The kind of marker an item is, if it is one.
    marker: fn(&T) -> Option<u8>,
    /// Whether each lane's last item was a marker: one more marker then continues a run of them (a SKP
    /// ordered set's SKP symbols and the first data symbol after them) and does not start one.
    in_run: [bool; MAX_LANES],
    aligned: bool,
    /// Counters in 64 bits: a link that loses alignment every few hundred symbols (a lane with a
    /// marginal skew) passed 2^32 in hours of simulated time, a debug-build panic and a silent wrap
    /// otherwise, which the port's difference of two readings then turned into billions of errors.
    alignments: u64,
    losses: u64,
    /// Columns popped, and the last of them with a mismatch of markers.
    columns: u32,
    last_mismatch: Option<u32>,
    mismatched_columns: u64,
    /// The lanes (a mask of logical lanes) whose FIFO held the fewest items the last time one overflowed,
    /// the last to reach their marker, the late side of a skew the buffer cannot absorb. And how many
    /// overflows there have been since the buffer last aligned (or was made or reset).
    late_at_overflow: u32,
    overflows_unaligned: u32,
}

impl<T: Copy, const DEPTH: usize> Deskew<T, DEPTH> {
    /// A buffer over `lanes` lanes (logical lanes `0..lanes`) aligning on items that `marker` gives a kind
    /// of marker, lanes lining up only on markers of one kind.
    pub fn new(lanes: usize, marker: fn(&T) -> Option<u8>) -> Result<Self, Error> {
        if lanes == 0 || lanes > MAX_LANES {
            return Err(Error::UnsupportedWidth { lanes });
        }
        Ok(Deskew {
            fifos: core::array::from_fn(|_| Deque::new()),
            lanes,
            marker,
            in_run: [false; MAX_LANES],
            aligned: false,
            alignments: 0,
            losses: 0,
            columns: 0,
            last_mismatch: None,
            mismatched_columns: 0,
            late_at_overflow: 0,
            overflows_unaligned: 0,
        })
    }

    /// Forget everything buffered and align afresh, over `lanes` lanes.
    pub fn reset(&mut self, lanes: usize) -> Result<(), Error> {
        if lanes == 0 || lanes > MAX_LANES {
            return Err(Error::UnsupportedWidth { lanes });
        }
        self.fifos.iter_mut().for_each(Deque::clear);
        self.in_run = [false; MAX_LANES];
        self.lanes = lanes;
        self.aligned = false;
        self.last_mismatch = None;
        self.late_at_overflow = 0;
        self.overflows_unaligned = 0;
        Ok(())
    }

    /// Forget the alignment but not what each lane has received: every FIFO keeps what follows its first
    /// marker that starts a run (or nothing), so that the lanes line up afresh on the next marker each
    /// receives, wherever each is in its stream. [`Deskew::reset`] empties the FIFOs instead, which in
    /// the middle of a skewed stream drops items the early lanes have received and the late ones have yet
    /// to: those then line up on a marker the early lanes lost. Call it after a column without markers,
    /// so that the item before each FIFO's head was none.
    pub fn realign(&mut self) {
        let marker = self.marker;
        for fifo in &mut self.fifos[..self.lanes] {
            let mut after_marker = false;
            while let Some(item) = fifo.front() {
                let is_marker = marker(item).is_some();
                if is_marker && !after_marker {
                    break;
                }
                after_marker = is_marker;
                fifo.pop_front();
            }
        }
        self.aligned = false;
        self.last_mismatch = None;
        self.late_at_overflow = 0;
        self.overflows_unaligned = 0;
    }

    /// Whether the lanes are lined up.
    pub fn is_aligned(&self) -> bool {
        self.aligned
    }

    /// Times alignment was achieved.
    pub fn alignments(&self) -> u64 {
        self.alignments
    }

    /// Times alignment was lost after being achieved, or a FIFO overflowed.
    pub fn losses(&self) -> u64 {
        self.losses
    }

    /// Columns in which some lanes showed a marker and others did not.
    pub fn mismatched_columns(&self) -> u64 {
        self.mismatched_columns
    }

    /// The lanes (bit `l` for logical lane `l`) that had the fewest items buffered (none, mostly: the
    /// latest to reach their marker) when a lane's FIFO last overflowed, once [`OVERFLOWS_TO_BLAME`]
    /// overflows have come without the buffer aligning between them; otherwise 0. A skew the buffer
    /// cannot absorb overflows it at every marker and it never aligns; a bit error that hides one lane's
    /// marker overflows it once, and the next markers align it. Where the lanes lie in more than two
    /// groups, which of them are late differs from one overflow to the next (each empties the buffer,
    /// and the next lanes to see a marker start it again), but the late lanes of any one lag the others
    /// by more than the buffer holds.
    pub fn late_at_overflow(&self) -> u32 {
        if self.overflows_unaligned >= OVERFLOWS_TO_BLAME {
            self.late_at_overflow
        } else {
            0
        }
    }

    /// Lanes in use.
    pub fn lanes(&self) -> usize {
        self.lanes
    }

    /// The next item received on logical lane `lane`. A lane whose FIFO is full means the skew exceeds
    /// `DEPTH`: alignment is dropped and [`Error::SkewTooLarge`] returned; the item is discarded.
    // Always inlined: a port pushes every symbol of every lane through a thin wrapper (ltssm::Columns),
    // which otherwise left it a call (callgrind, 2,000 packets of `link run` at 8b/10b).
    #[inline(always)]
    pub fn push(&mut self, lane: usize, item: T) -> Result<(), Error> {
        let fifo = self.fifos[..self.lanes]
            .get_mut(lane)
            .ok_or(Error::NoSuchLane { lane })?;
        let marker = (self.marker)(&item).is_some();
        let starts_run = !core::mem::replace(&mut self.in_run[lane], marker) && marker;
        if !self.aligned && fifo.is_empty() && !starts_run {
            // Before alignment nothing ahead of a lane's first marker is useful. Markers come in runs, and
            // the buffer may start or empty inside one (after a slip), when the early lanes are further
            // into it than the late ones: only the first marker of a run is the same one on every lane.
            return Ok(());
        }
        if fifo.push_back(item).is_err() {
            let symbols = fifo.len();
            // The fewest, not only none: a late lane pushed earlier in the same column has its marker
            // in already when a skew one item too large overflows an early lane.
            let fewest = self.fifos[..self.lanes].iter().map(Deque::len).min().unwrap_or(0);
            let late = self.fifos[..self.lanes]
                .iter()
                .enumerate()
                .filter(|(_, f)| f.len() == fewest)
                .fold(0, |mask, (l, _)| mask | 1 << l);
            self.late_at_overflow = late;
            self.overflows_unaligned = self.overflows_unaligned.saturating_add(1);
            if self.aligned {
                self.losses = self.losses.saturating_add(1);
            }
            self.fifos.iter_mut().for_each(Deque::clear);
            self.aligned = false;
            return Err(Error::SkewTooLarge { symbols });
        }
        Ok(())
    }

    /// The next column of deskewed items, one per lane, into `out[..lanes]`. `None` until every lane has
    /// an item (and, before alignment, until every lane has a marker at its head).
    #[inline]
    pub fn pop(&mut self, out: &mut [T]) -> Option<()> {
        let lanes = self.lanes;
        let out = out.get_mut(..lanes)?;
        if self.fifos[..lanes].iter().any(Deque::is_empty) {
            return None;
        }
        let markers = self.fifos[..lanes]
            .iter()
            .filter(|f| f.front().is_some_and(|x| (self.marker)(x).is_some()))
            .count();
        if !self.aligned {
            if markers < lanes {
                return None;
            }
            if self.drop_older_markers() {
                return None;
            }
            self.aligned = true;
            // Whatever overflowed before, these lanes line up now.
            self.late_at_overflow = 0;
            self.overflows_unaligned = 0;
            self.alignments = self.alignments.saturating_add(1);
        } else if markers != 0 && markers != lanes {
            self.mismatched_columns = self.mismatched_columns.saturating_add(1);
            let columns = self.columns;
            if self
                .last_mismatch
                .is_some_and(|last| columns.wrapping_sub(last) <= SLIP_WINDOW)
            {
                // A lane slipped. Markers are further apart than the FIFOs are deep, so no FIFO holds
                // the next one yet: empty them all and line up on the next marker.
                self.losses = self.losses.saturating_add(1);
                self.aligned = false;
                self.last_mismatch = None;
                self.fifos.iter_mut().for_each(Deque::clear);
                return None;
            }
            // Most likely a bit error hit one lane's marker: keep the alignment, and let the caller see
            // the column as it is (not all markers, so not data either).
            self.last_mismatch = Some(columns);
        }
        self.columns = self.columns.wrapping_add(1);
        for (slot, fifo) in out.iter_mut().zip(&mut self.fifos[..lanes]) {
            if let Some(x) = fifo.pop_front() {
                *slot = x;
            }
        }
        Some(())
    }

    /// With a marker at the head of every lane's FIFO but not all of one kind, the lanes are at different
    /// instances of them: empty the FIFOs whose marker differs from that of the lane that reached its
    /// marker last (the fewest items buffered), which hold an older instance, so that they wait for
    /// their next. Whether any were emptied.
    fn drop_older_markers(&mut self) -> bool {
        let (lanes, marker) = (self.lanes, self.marker);
        let kind = |f: &Deque<T, DEPTH>| f.front().and_then(marker);
        let Some(newest) = (self.fifos[..lanes].iter())
            .min_by_key(|f| f.len())
            .and_then(kind)
        else {
            return false;
        };
        let mut dropped = false;
        for fifo in &mut self.fifos[..lanes] {
            if kind(fifo) != Some(newest) {
                fifo.clear();
                dropped = true;
            }
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARK: u16 = 0xFFFF;

    fn marker(x: &u16) -> Option<u8> {
        (*x == MARK).then_some(0)
    }

    /// Lane streams of counting items with a marker every `period`, lane `l` delayed by `skew[l]` items.
    fn run(skew: &[usize], period: usize, total: usize) -> (usize, Deskew<u16, 64>) {
        let mut d: Deskew<u16, 64> = Deskew::new(skew.len(), marker).unwrap();
        let item = |t: usize| if t % period == 0 { MARK } else { t as u16 };
        let mut col = [0u16; MAX_LANES];
        let mut columns = 0;
        let mut last = None;
        for now in 0..total {
            for (lane, &s) in skew.iter().enumerate() {
                if now >= s {
                    d.push(lane, item(now - s)).unwrap();
                }
            }
            while d.pop(&mut col).is_some() {
                assert!(
                    col[..skew.len()].iter().all(|&x| x == col[0]),
                    "column not aligned: {col:?}"
                );
                if col[0] != MARK {
                    if let Some(prev) = last {
                        assert!(col[0] > prev || prev % period as u16 > col[0]);
                    }
                    last = Some(col[0]);
                }
                columns += 1;
            }
        }
        (columns, d)
    }

    #[test]
    fn twenty_symbols_of_skew_are_absorbed() {
        let (columns, d) = run(&[0, 20, 7, 13, 1, 19, 3, 11], 1180, 5000);
        assert!(d.is_aligned());
        assert_eq!(d.alignments(), 1);
        assert!(columns >= 5000 - 1180 - 21, "{columns}");
    }

    #[test]
    fn skew_beyond_depth_is_an_error() {
        let mut d: Deskew<u16, 4> = Deskew::new(2, marker).unwrap();
        d.push(0, MARK).unwrap();
        for i in 0..3 {
            d.push(0, i).unwrap();
        }
        assert_eq!(d.late_at_overflow(), 0, "no overflow yet");
        let error = d.push(0, 9).unwrap_err();
        assert_eq!(error, Error::SkewTooLarge { symbols: 4 });
        assert!(!d.is_aligned());
        // Lane 1 had nothing buffered: it is the late side, once the buffer has overflowed this many
        // times without aligning (one overflow could be a bit error on a marker).
        for overflows in 2..=OVERFLOWS_TO_BLAME {
            assert_eq!(d.late_at_overflow(), 0, "after {} overflows", overflows - 1);
            d.push(0, MARK).unwrap();
            for i in 0..3 {
                d.push(0, i).unwrap();
            }
            assert!(d.push(0, 9).is_err());
        }
        assert_eq!(d.late_at_overflow(), 0b10);
        let mut reset = d.clone();
        reset.reset(2).unwrap();
        assert_eq!(reset.late_at_overflow(), 0, "forgotten on reset");
        // Lined up at last: nothing is to blame any more.
        d.push(0, MARK).unwrap();
        d.push(1, MARK).unwrap();
        assert!(d.pop(&mut [0; 2]).is_some() && d.is_aligned());
        assert_eq!(d.late_at_overflow(), 0, "kept after aligning");
        // The FIFO's depth is all the buffer knows: lane 1 may be any number of symbols later still. The
        // message said the skew was 4 symbols.
        assert_eq!(
            std::format!("{error}"),
            "lane-to-lane skew of at least 4 symbols (blocks at 128b/130b) is too large"
        );
    }

    #[test]
    fn a_hit_marker_keeps_alignment_but_a_slipped_lane_realigns() {
        let mut d: Deskew<u16, 64> = Deskew::new(2, marker).unwrap();
        let mut col = [0u16; 2];
        // One lane's marker corrupted: the column passes as it is and alignment stays.
        for (a, b) in [(MARK, MARK), (1, 1), (MARK, 99), (2, 2)] {
            d.push(0, a).unwrap();
            d.push(1, b).unwrap();
        }
        for expect in [[MARK, MARK], [1, 1], [MARK, 99], [2, 2]] {
            d.pop(&mut col).unwrap();
            assert_eq!(col, expect);
        }
        assert_eq!((d.losses(), d.mismatched_columns()), (0, 1));
        for x in 10..20 {
            d.push(0, x).unwrap();
            d.push(1, x).unwrap();
            d.pop(&mut col).unwrap();
        }
        // Lane 1 loses a symbol: both edges of its next ordered set are off by a column.
        for (a, b) in [(3, MARK), (MARK, MARK), (MARK, 4), (4, 5)] {
            d.push(0, a).unwrap();
            d.push(1, b).unwrap();
        }
        for _ in 0..2 {
            d.pop(&mut col).unwrap();
        }
        assert_eq!(d.pop(&mut col), None);
        assert_eq!(d.losses(), 1);
        assert!(!d.is_aligned());
        // The next marker lines the lanes up again.
        for (a, b) in [(6, 7), (MARK, 8), (7, MARK), (8, 9)] {
            d.push(0, a).unwrap();
            d.push(1, b).unwrap();
        }
        d.pop(&mut col).unwrap();
        assert_eq!(col, [MARK, MARK]);
        d.pop(&mut col).unwrap();
        assert_eq!(col, [7, 9]);
        assert_eq!(d.alignments(), 2);
    }

    /// A data stream's start follows a SKP by fewer items than the buffer holds, and lane 1 lags lane 0
    /// by more than it absorbs. After each overflow lane 1's next marker is the SKP lane 0 has passed, and
    /// lane 0's is the stream's start: the buffer lined the two up, shifting the lanes by the distance
    /// between them. Markers of different kinds never line up: the buffer overflows at every marker
    /// instead, as for any skew it cannot absorb.
    #[test]
    fn markers_of_different_kinds_never_line_up() {
        const START: u16 = 0xFFFE;
        let kind = |x: &u16| match *x {
            MARK => Some(0),
            START => Some(1),
            _ => None,
        };
        // A SKP every 100 items, the stream's start 30 after each; lane 1 is 20 items late.
        let item = |t: usize| match t % 100 {
            0 => MARK,
            30 => START,
            _ => t as u16,
        };
        let mut d: Deskew<u16, 16> = Deskew::new(2, kind).unwrap();
        let mut col = [0u16; 2];
        for now in 0..1000 {
            let _ = d.push(0, item(now));
            if now >= 20 {
                let _ = d.push(1, item(now - 20));
            }
            assert!(d.pop(&mut col).is_none(), "lined up at {now}: {col:?}");
        }
        assert_eq!(d.alignments(), 0);
        assert_ne!(d.late_at_overflow(), 0, "overflows without aligning between");
    }

    /// A SKP ordered set is a run of markers (its SKP symbols, then the first data symbol). Two bit errors
    /// on one lane at the start of a run look like a slip, and the buffer empties there, in the middle of
    /// the run, when the early lane has received more of it than the late one. The buffer took each lane's
    /// next marker as the one to line up on: one apart, it paired lane 0's data with lane 1's previous item
    /// until the next run (and the next slip).
    #[test]
    fn lanes_line_up_on_the_first_marker_of_a_run() {
        const PERIOD: usize = 40;
        const HIT: u16 = 0x1234;
        let item = |t: usize| match t % PERIOD {
            0..=3 => MARK,
            _ => t as u16,
        };
        // Lane 1 is one item late, and the item before the run at 120 and its first marker are hit.
        let lane1 = |t: usize| match t {
            119 => MARK,
            120 => HIT,
            _ => item(t),
        };
        let mut d: Deskew<u16, 16> = Deskew::new(2, marker).unwrap();
        let mut col = [0u16; 2];
        let mut shifted = 0;
        for now in 10..300 {
            // A lane left alone in a run it entered overflows its FIFO: an error, and no shifted data.
            let _ = d.push(0, item(now));
            let _ = d.push(1, lane1(now - 1));
            while d.pop(&mut col).is_some() {
                shifted += usize::from(d.losses() > 0 && col[0] != col[1]);
            }
        }
        assert!(d.losses() >= 1 && d.is_aligned());
        assert_eq!(shifted, 0);
    }

    /// A reset starts every lane's stream afresh (a new rate, or a new lane map that gives a logical lane
    /// another physical one): a marker received before it does not make the first marker after it the
    /// middle of a run. It did, and the lane skipped the whole run it began, so that the lanes did not line
    /// up on it: the other lane's FIFO filled, and alignment waited for the next run.
    #[test]
    fn a_reset_forgets_the_marker_before_it() {
        let mut d: Deskew<u16, 16> = Deskew::new(2, marker).unwrap();
        d.push(0, MARK).unwrap();
        d.reset(2).unwrap();
        let mut col = [0u16; 2];
        let mut columns = 0;
        for item in [MARK, MARK].into_iter().chain(1..=12) {
            for lane in 0..2 {
                d.push(lane, item).unwrap();
            }
            while d.pop(&mut col).is_some() {
                assert_eq!(col, [item; 2]);
                columns += 1;
            }
        }
        assert_eq!((columns, d.losses()), (14, 0));
    }

    /// Realigning keeps what each lane has received: lane 1, 6 items late, has yet to receive the 6 items
    /// lane 0 holds past the column just popped, and the lanes line up again on the next marker, each
    /// FIFO keeping its own from it. A reset there drops lane 0's next marker and not lane 1's, and the
    /// lanes never line up on it.
    #[test]
    fn realigning_in_a_skewed_stream_lines_up_on_the_next_marker() {
        let period = 40;
        let item = |t: usize| if t % period == 0 { MARK } else { t as u16 };
        for realign in [true, false] {
            let mut d: Deskew<u16, 16> = Deskew::new(2, marker).unwrap();
            let mut col = [0u16; 2];
            let (mut marker_columns, mut forgotten, mut overflows) = (0, false, 0);
            for now in 0..3 * period {
                overflows += usize::from(d.push(0, item(now)).is_err());
                if now >= 6 {
                    overflows += usize::from(d.push(1, item(now - 6)).is_err());
                }
                while d.pop(&mut col).is_some() {
                    assert_eq!(col[0], col[1], "column not aligned");
                    marker_columns += usize::from(col[0] == MARK);
                    // Lane 0 has the next marker in its FIFO; lane 1 has yet to receive it.
                    if col[0] == (period - 2) as u16 && !forgotten {
                        if realign {
                            d.realign();
                        } else {
                            d.reset(2).unwrap();
                        }
                        forgotten = true;
                    }
                }
            }
            // Reset, lane 1 overflows waiting for lane 0 at the marker lane 0 dropped.
            let expected = if realign { (3, 0) } else { (2, 1) };
            assert_eq!((marker_columns, overflows), expected, "realign {realign}");
            assert!(d.is_aligned());
        }
    }

    /// Losses, alignments and mismatched columns count on past 2^32: they were `u32`s added to with
    /// `+= 1`, a debug-build panic there and a silent wrap in release.
    #[test]
    fn counters_count_past_four_billion() {
        let mut d: Deskew<u16, 4> = Deskew::new(2, marker).unwrap();
        d.alignments = u32::MAX.into();
        d.losses = u32::MAX.into();
        d.mismatched_columns = u32::MAX.into();
        let mut col = [0u16; 2];
        for (a, b) in [(MARK, MARK), (MARK, 1)] {
            d.push(0, a).unwrap();
            d.push(1, b).unwrap();
            d.pop(&mut col).unwrap();
        }
        // Lane 0 runs a FIFO's depth ahead of lane 1: alignment is lost.
        let overflow = (0..5).map(|x| d.push(0, x)).find(Result::is_err);
        assert_eq!(overflow, Some(Err(Error::SkewTooLarge { symbols: 4 })));
        let past = u64::from(u32::MAX) + 1;
        assert_eq!(
            (d.alignments(), d.mismatched_columns(), d.losses()),
            (past, past, past)
        );
    }

    #[test]
    fn unknown_lanes_are_refused() {
        let mut d: Deskew<u16, 4> = Deskew::new(2, marker).unwrap();
        assert_eq!(d.push(2, 0), Err(Error::NoSuchLane { lane: 2 }));
        assert!(Deskew::<u16, 4>::new(17, |_| Some(0)).is_err());
    }
}
