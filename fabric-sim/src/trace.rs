//! Traces of link traffic as pcap files, for Wireshark (with `tools/wireshark/openlink.lua`) and tshark.
//!
//! The format is `docs/spec.md` section 7: classic pcap with nanosecond timestamps (simulated time) and
//! link type 147 (`LINKTYPE_USER0`); each record is one data-link packet or control flit exactly as its
//! transmitter sent it (before any bit error on the wire), after a 12-byte pseudo-header that says which
//! link and direction carried it. Idle units are not recorded; a replayed packet is recorded each time it
//! is sent. A link initialising sends InitFC and identity flits in turn until its partner answers
//! (hundreds per direction, most of a short trace): one identical to either of the two units before it on
//! its direction is counted, not recorded. Records are written in time order across all directions
//! (each direction sends a burst of units ahead, so they are held until no earlier one can come).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::io::{self, Write};

use link_dl::flit::{
    kind, ControlFlit, ControlKind, Flit, FlitKind, IdentFlit, PacketHeader, FLIT_LEN, MAX_PACKET_LEN,
};
use link_phy::time::Instant;

/// pcap's magic number for nanosecond timestamps.
pub const MAGIC_NS: u32 = 0xA1B2_3C4D;
/// `LINKTYPE_USER0`: reserved for private use, as this format is.
pub const LINKTYPE: u32 = 147;
/// Version of the pseudo-header.
pub const VERSION: u8 = 1;
/// Bytes of the pseudo-header.
pub const PSEUDO_HEADER_LEN: usize = 12;
/// Record kinds (pseudo-header byte 1).
pub const RECORD_PACKET: u8 = 1;
/// A control flit.
pub const RECORD_CONTROL: u8 = 2;

/// Which link and direction a unit crossed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The trunk (link) index.
    pub trunk: u16,
    /// Sending node and its port.
    pub from: (u16, u8),
    /// Receiving node and its port.
    pub to: (u16, u8),
}

/// The 12-byte pseudo-header of a record.
pub fn pseudo_header(record: u8, hop: Hop) -> [u8; PSEUDO_HEADER_LEN] {
    let mut h = [0u8; PSEUDO_HEADER_LEN];
    h[0] = VERSION;
    h[1] = record;
    h[2..4].copy_from_slice(&hop.trunk.to_be_bytes());
    h[4..6].copy_from_slice(&hop.from.0.to_be_bytes());
    h[6..8].copy_from_slice(&hop.to.0.to_be_bytes());
    h[8] = hop.from.1;
    h[9] = hop.to.1;
    h
}

/// A packet being collected from its units, per direction.
#[derive(Clone, Debug)]
struct Pending {
    bytes: [u8; MAX_PACKET_LEN],
    len: usize,
    need: usize,
    at: Instant,
}

/// A record held until it can be written in time order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    /// Its time (ps), then the order records were made in, for records of one instant.
    at: u64,
    made: u64,
    pseudo_header: [u8; PSEUDO_HEADER_LEN],
    bytes: Vec<u8>,
}

/// What a trace holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceSummary {
    /// Records written.
    pub records: u64,
    /// Records not written because the limit was reached.
    pub dropped: u64,
    /// Initialisation flits (InitFC and identity) not recorded because they repeat one of the two units
    /// before them on their direction.
    pub init_repeats: u64,
}

/// Writes a pcap trace of the units the transmitters send, packet by packet.
pub struct Tracer<W: Write> {
    out: W,
    /// Per direction (trunk * 2 + direction): the packet being collected.
    pending: Vec<Option<Pending>>,
    /// When each packet being collected started (ps), with its direction: a packet can straddle two
    /// bursts, and nothing later than its start may be written before it is whole.
    pending_starts: BTreeSet<(u64, usize)>,
    /// Per direction: the last two initialisation flits sent (the older first), while nothing else has
    /// been sent since (a link initialising sends two in turn).
    last_init: Vec<[Option<Flit>; 2]>,
    /// Records not yet written, earliest first: a burst's units are sent ahead of the bursts other
    /// directions start meanwhile.
    held: BinaryHeap<Reverse<Held>>,
    /// What was written and left out so far.
    pub summary: TraceSummary,
    limit: u64,
}

impl<W: Write> std::fmt::Debug for Tracer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

impl<W: Write> Tracer<W> {
    /// A trace of at most `limit` records for `directions` link directions, its file header written.
    pub fn new(mut out: W, directions: usize, limit: u64) -> io::Result<Self> {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        // Time zone and accuracy 0; snapshot length: every record fits whole.
        header[16..20].copy_from_slice(&65_535u32.to_le_bytes());
        header[20..24].copy_from_slice(&LINKTYPE.to_le_bytes());
        out.write_all(&header)?;
        Ok(Tracer {
            out,
            pending: vec![None; directions],
            pending_starts: BTreeSet::new(),
            last_init: vec![[None; 2]; directions],
            held: BinaryHeap::new(),
            summary: TraceSummary::default(),
            limit,
        })
    }

    /// Every unit from now on is sent at `now` or later: write what was sent before, except what is later
    /// than the start of a packet still being collected (its record will carry that start).
    pub fn advance(&mut self, now: Instant) -> io::Result<()> {
        let mut until = now.as_ps();
        if let Some(&(start, _)) = self.pending_starts.first() {
            until = until.min(start);
        }
        while self.held.peek().is_some_and(|h| h.0.at <= until) {
            if let Some(Reverse(h)) = self.held.pop() {
                self.write(&h)?;
            }
        }
        Ok(())
    }

    /// A unit a transmitter sent at `at` on direction `direction` (trunk * 2 + d) of `hop`: recorded once
    /// its packet is whole, and written once [`Tracer::advance`] passes its time (or at
    /// [`Tracer::flush`]).
    pub fn unit(&mut self, direction: usize, hop: Hop, at: Instant, unit: &[u8; FLIT_LEN]) -> io::Result<()> {
        let Some(slot) = self.pending.get_mut(direction) else {
            return Ok(());
        };
        if let Some(p) = slot.as_mut() {
            p.bytes[p.len..p.len + FLIT_LEN].copy_from_slice(unit);
            p.len += FLIT_LEN;
            p.need -= 1;
            if p.need == 0 {
                let (bytes, len, at) = (p.bytes, p.len, p.at);
                *slot = None;
                self.pending_starts.remove(&(at.as_ps(), direction));
                return self.record(RECORD_PACKET, hop, at, &bytes[..len]);
            }
            return Ok(());
        }
        let Some(last_init) = self.last_init.get_mut(direction) else {
            return Ok(());
        };
        let unit_kind = kind(unit);
        let is_init = matches!(unit_kind, Ok(FlitKind::Control))
            && (IdentFlit::parse(unit).is_ok()
                || ControlFlit::parse(unit)
                    .is_ok_and(|c| matches!(c.kind, ControlKind::InitFc1 | ControlKind::InitFc2)));
        if is_init {
            let repeat = last_init.contains(&Some(*unit));
            *last_init = [last_init[1], Some(*unit)];
            if repeat {
                self.summary.init_repeats += 1;
                return Ok(());
            }
        } else if !matches!(unit_kind, Ok(FlitKind::Idle)) {
            *last_init = [None; 2];
        }
        match unit_kind {
            Ok(FlitKind::Packet) => {
                let need = PacketHeader::parse(unit).map_or(0, |h| usize::from(h.payload_flits));
                if need == 0 {
                    return self.record(RECORD_PACKET, hop, at, unit);
                }
                let mut bytes = [0u8; MAX_PACKET_LEN];
                bytes[..FLIT_LEN].copy_from_slice(unit);
                *slot = Some(Pending {
                    bytes,
                    len: FLIT_LEN,
                    need,
                    at,
                });
                self.pending_starts.insert((at.as_ps(), direction));
                Ok(())
            }
            Ok(FlitKind::Control) => self.record(RECORD_CONTROL, hop, at, unit),
            Ok(FlitKind::Idle) | Err(_) => Ok(()),
        }
    }

    /// Direction `direction` failed: a packet it had started will never be whole, and is not recorded.
    pub fn cut(&mut self, direction: usize) {
        if let Some(p) = self.pending.get_mut(direction).and_then(Option::take) {
            self.pending_starts.remove(&(p.at.as_ps(), direction));
        }
    }

    fn record(&mut self, record: u8, hop: Hop, at: Instant, bytes: &[u8]) -> io::Result<()> {
        if self.summary.records >= self.limit {
            self.summary.dropped += 1;
            return Ok(());
        }
        self.held.push(Reverse(Held {
            at: at.as_ps(),
            made: self.summary.records,
            pseudo_header: pseudo_header(record, hop),
            bytes: bytes.to_vec(),
        }));
        self.summary.records += 1;
        Ok(())
    }

    fn write(&mut self, h: &Held) -> io::Result<()> {
        let ns = h.at / 1000;
        let len = (PSEUDO_HEADER_LEN + h.bytes.len()) as u32;
        let mut head = [0u8; 16];
        head[0..4].copy_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
        head[4..8].copy_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        head[8..12].copy_from_slice(&len.to_le_bytes());
        head[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&head)?;
        self.out.write_all(&h.pseudo_header)?;
        self.out.write_all(&h.bytes)
    }

    /// Write every record held, and flush what is buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        while let Some(Reverse(h)) = self.held.pop() {
            self.write(&h)?;
        }
        self.out.flush()
    }
}

impl<W: Write> Drop for Tracer<W> {
    /// Whatever is held is written (errors are for [`Tracer::flush`] to report).
    fn drop(&mut self) {
        let _ = self.flush();
    }
}
