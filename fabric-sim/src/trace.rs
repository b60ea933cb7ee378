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
//!
//! Given what a receiver took instead (bit errors and all), the tracer frames it as a data link does: after
//! a packet whose CRC does not check, or a unit that does not parse, the units up to a control flit that
//! checks are recorded as discarded ([`RECORD_DISCARDED`]), so that the packets after them are those the
//! data link took. A transmitter's units never lose the framing.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::io::{self, Write};

use link_dl::flit::{check_packet_crc, kind, ControlKind, Flit, FlitKind, FLIT_LEN, MAX_PACKET_LEN};
use link_dl::framing::{Control, Framed, Framing};
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
/// Units a receiver threw away while it found a packet boundary again after an error (only in a trace
/// of what a data link received): a run of them, up to a longest packet's worth a record.
pub const RECORD_DISCARDED: u8 = 3;

/// How a record's packets lay out their transaction-layer header (pseudo-header byte 10), so that a reader
/// such as the Wireshark dissector knows which fields to show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum TlLayout {
    /// The simulator's own header (docs/spec.md section 7.1): every trace of `linkctl sim`.
    #[default]
    Simulator = 0,
    /// The transaction layer's header and flits (section 3), as `linkctl tl copy` sends them.
    Transaction = 1,
    /// No layout: the field is a number (`linkctl link run` numbers its packets there).
    Raw = 2,
}

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
pub fn pseudo_header(record: u8, hop: Hop, layout: TlLayout) -> [u8; PSEUDO_HEADER_LEN] {
    let mut h = [0u8; PSEUDO_HEADER_LEN];
    h[0] = VERSION;
    h[1] = record;
    h[2..4].copy_from_slice(&hop.trunk.to_be_bytes());
    h[4..6].copy_from_slice(&hop.from.0.to_be_bytes());
    h[6..8].copy_from_slice(&hop.to.0.to_be_bytes());
    h[8] = hop.from.1;
    h[9] = hop.to.1;
    h[10] = layout as u8;
    h
}

/// A packet being collected from its units, or a run of discarded units, per direction.
#[derive(Clone, Debug)]
struct Pending {
    /// [`RECORD_PACKET`] or [`RECORD_DISCARDED`].
    record: u8,
    bytes: [u8; MAX_PACKET_LEN],
    len: usize,
    at: Instant,
    hop: Hop,
}

impl Pending {
    fn new(record: u8, unit: &Flit, at: Instant, hop: Hop) -> Self {
        let mut bytes = [0u8; MAX_PACKET_LEN];
        bytes[..FLIT_LEN].copy_from_slice(unit);
        Pending {
            record,
            bytes,
            len: FLIT_LEN,
            at,
            hop,
        }
    }
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
    /// Per direction (trunk * 2 + direction): the packet, or run of discarded units, being collected.
    pending: Vec<Option<Pending>>,
    /// Per direction: where a receiver is in the units, framed as a data link frames them (docs/spec.md
    /// 2.4): after a packet whose CRC does not check or a unit that does not parse, it discards units
    /// until a packet boundary. A transmitter's units never lose the framing.
    framing: Vec<Framing>,
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
    layout: TlLayout,
    /// Per direction, whether its units are recorded (all, when `None`).
    kept: Option<Vec<bool>>,
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
            framing: vec![Framing::Header; directions],
            pending_starts: BTreeSet::new(),
            last_init: vec![[None; 2]; directions],
            held: BinaryHeap::new(),
            summary: TraceSummary::default(),
            limit,
            layout: TlLayout::Simulator,
            kept: None,
        })
    }

    /// Record only the directions `kept` marks (by index, as [`Tracer::unit`] numbers them); the others'
    /// units are passed over, neither recorded nor counted.
    pub fn keep_only(mut self, kept: Vec<bool>) -> Self {
        self.kept = Some(kept);
        self
    }

    /// The trace's packets carry transaction-layer headers laid out as `layout` (the simulator's unless
    /// told).
    pub fn with_tl_layout(mut self, layout: TlLayout) -> Self {
        self.layout = layout;
        self
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
        if (self.kept.as_ref()).is_some_and(|kept| !kept.get(direction).copied().unwrap_or(false)) {
            return Ok(());
        }
        let Some(framing) = self.framing.get_mut(direction) else {
            return Ok(());
        };
        let framed = framing.push(unit);
        if framed == Framed::Discarded {
            // A run of discarded units goes on while the receiver discards, a longest packet's worth a
            // record.
            if let Some(Some(p)) = self.pending.get_mut(direction) {
                if p.record == RECORD_DISCARDED && p.len < MAX_PACKET_LEN {
                    p.bytes[p.len..p.len + FLIT_LEN].copy_from_slice(unit);
                    p.len += FLIT_LEN;
                    return Ok(());
                }
            }
            self.end_discarded(direction);
            self.start(direction, Pending::new(RECORD_DISCARDED, unit, at, hop));
            return Ok(());
        }
        self.end_discarded(direction);
        match framed {
            Framed::Payload | Framed::Last(_) => {
                let last = matches!(framed, Framed::Last(_));
                let Some(slot) = self.pending.get_mut(direction) else {
                    return Ok(());
                };
                let Some(p) = slot.as_mut() else {
                    return Ok(());
                };
                p.bytes[p.len..p.len + FLIT_LEN].copy_from_slice(unit);
                p.len += FLIT_LEN;
                if last {
                    let (bytes, len, at) = (p.bytes, p.len, p.at);
                    *slot = None;
                    self.pending_starts.remove(&(at.as_ps(), direction));
                    self.record_packet(direction, hop, at, &bytes[..len]);
                }
                return Ok(());
            }
            Framed::Idle => return Ok(()),
            _ => {}
        }
        let Some(last_init) = self.last_init.get_mut(direction) else {
            return Ok(());
        };
        let is_init = match framed {
            Framed::Control(Control::Ident(_)) => true,
            Framed::Control(Control::Flow(c)) => {
                matches!(c.kind, ControlKind::InitFc1 | ControlKind::InitFc2)
            }
            _ => false,
        };
        if is_init {
            let repeat = last_init.contains(&Some(*unit));
            *last_init = [last_init[1], Some(*unit)];
            if repeat {
                self.summary.init_repeats += 1;
                return Ok(());
            }
        } else {
            *last_init = [None; 2];
        }
        match framed {
            Framed::Header(header) if header.payload_flits == 0 => {
                self.record_packet(direction, hop, at, unit)
            }
            Framed::Header(_) => self.start(direction, Pending::new(RECORD_PACKET, unit, at, hop)),
            // A control flit whose CRC does not check is still recorded as one (the dissector shows it).
            Framed::Control(_) | Framed::Lost(_) if kind(unit) == Ok(FlitKind::Control) => {
                self.record(RECORD_CONTROL, hop, at, unit)
            }
            // Not a header a receiver can frame a packet by: the first of the units it discards.
            _ => self.start(direction, Pending::new(RECORD_DISCARDED, unit, at, hop)),
        }
        Ok(())
    }

    /// Record a whole packet; its receiver loses the framing if its CRC does not check.
    fn record_packet(&mut self, direction: usize, hop: Hop, at: Instant, bytes: &[u8]) {
        if check_packet_crc(bytes).is_err() {
            if let Some(framing) = self.framing.get_mut(direction) {
                framing.lose();
            }
        }
        self.record(RECORD_PACKET, hop, at, bytes);
    }

    /// The units of the packet being collected on `direction`, if one is (none when the units are a run
    /// of discarded ones): what a restart or the end leaves out.
    pub(crate) fn packet_units_begun(&self, direction: usize) -> usize {
        match self.pending.get(direction) {
            Some(Some(p)) if p.record == RECORD_PACKET => p.len / FLIT_LEN,
            _ => 0,
        }
    }

    /// Collect `pending` on `direction`, holding back later records until it is recorded.
    fn start(&mut self, direction: usize, pending: Pending) {
        self.pending_starts.insert((pending.at.as_ps(), direction));
        self.pending[direction] = Some(pending);
    }

    /// Record the run of discarded units being collected on `direction`, if one is.
    fn end_discarded(&mut self, direction: usize) {
        let Some(slot) = self.pending.get_mut(direction) else {
            return;
        };
        if slot.as_ref().is_some_and(|p| p.record == RECORD_DISCARDED) {
            if let Some(p) = slot.take() {
                self.pending_starts.remove(&(p.at.as_ps(), direction));
                self.record(RECORD_DISCARDED, p.hop, p.at, &p.bytes[..p.len]);
            }
        }
    }

    /// Direction `direction`'s receiver started its framing over as a data link does when its physical
    /// layer comes up: a packet begun is not recorded, a run of discarded units is, and the units up to a
    /// control flit that checks are discarded.
    pub fn restart_framing(&mut self, direction: usize) {
        self.cut(direction);
        if let Some(framing) = self.framing.get_mut(direction) {
            framing.lose();
        }
    }

    /// Direction `direction` failed: a packet it had started will never be whole, and is not recorded; a
    /// run of discarded units it was collecting is. The next unit starts a packet, a control flit or idle.
    pub fn cut(&mut self, direction: usize) {
        self.end_discarded(direction);
        if let Some(p) = self.pending.get_mut(direction).and_then(Option::take) {
            self.pending_starts.remove(&(p.at.as_ps(), direction));
        }
        if let Some(framing) = self.framing.get_mut(direction) {
            *framing = Framing::Header;
        }
    }

    /// Hold a record to be written in time order (or count it dropped past the limit).
    fn record(&mut self, record: u8, hop: Hop, at: Instant, bytes: &[u8]) {
        if self.summary.records >= self.limit {
            self.summary.dropped += 1;
            return;
        }
        self.held.push(Reverse(Held {
            at: at.as_ps(),
            made: self.summary.records,
            pseudo_header: pseudo_header(record, hop, self.layout),
            bytes: bytes.to_vec(),
        }));
        self.summary.records += 1;
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
        for direction in 0..self.pending.len() {
            self.end_discarded(direction);
        }
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

/// One record of a trace, as [`read`] gives it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its time, in nanoseconds.
    pub ns: u64,
    /// Its pseudo-header.
    pub pseudo_header: [u8; PSEUDO_HEADER_LEN],
    /// The data-link bytes after it: a packet or a control flit.
    pub bytes: Vec<u8>,
}

impl Record {
    /// The link and direction its pseudo-header names (as [`pseudo_header`] wrote them).
    pub fn hop(&self) -> Hop {
        let h = &self.pseudo_header;
        Hop {
            trunk: u16::from_be_bytes([h[2], h[3]]),
            from: (u16::from_be_bytes([h[4], h[5]]), h[8]),
            to: (u16::from_be_bytes([h[6], h[7]]), h[9]),
        }
    }

    /// The node that sent it.
    pub fn from_node(&self) -> u16 {
        self.hop().from.0
    }

    /// How its transaction-layer header is laid out (pseudo-header byte 10), if the byte names a layout.
    pub fn layout(&self) -> Option<TlLayout> {
        [TlLayout::Simulator, TlLayout::Transaction, TlLayout::Raw]
            .into_iter()
            .find(|&layout| layout as u8 == self.pseudo_header[10])
    }
}

/// Why bytes are not a trace of section 7.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// Shorter than the 24-byte file header.
    NoHeader,
    /// Not pcap with nanosecond timestamps (magic `A1B23C4Dh`, little-endian).
    Magic(u32),
    /// Not link type 147.
    LinkType(u32),
    /// The record at this byte offset is cut short.
    Truncated(usize),
    /// The record at this byte offset is shorter than its pseudo-header or longer than the longest packet
    /// after it, or says it was cut (captured length below its length), which a trace never is.
    BadLength(usize),
    /// The input could not be read.
    Io(io::ErrorKind),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NoHeader => write!(f, "shorter than a pcap file header"),
            ReadError::Magic(m) => write!(f, "magic {m:08X}h is not pcap with nanosecond timestamps"),
            ReadError::LinkType(t) => write!(f, "link type {t}, not {LINKTYPE}"),
            ReadError::Truncated(at) => write!(f, "the record at byte {at} is cut short"),
            ReadError::BadLength(at) => write!(
                f,
                "the record at byte {at} has a bad length (a record is a pseudo-header and up to {MAX_PACKET_LEN} \
                 bytes, never cut)"
            ),
            ReadError::Io(kind) => write!(f, "{kind}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads a trace's records one at a time, in memory for one record whatever the trace's length.
#[derive(Debug)]
pub struct Reader<R: io::Read> {
    input: R,
    /// Bytes read so far: where the next record starts.
    at: usize,
}

/// Fill `buf`; `short` if the input ends first.
fn read_exact(input: &mut impl io::Read, buf: &mut [u8], short: ReadError) -> Result<(), ReadError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => short,
        kind => ReadError::Io(kind),
    })
}

impl<R: io::Read> Reader<R> {
    /// A reader of the trace `input`, its file header read and checked.
    pub fn new(mut input: R) -> Result<Self, ReadError> {
        let mut header = [0u8; 24];
        read_exact(&mut input, &mut header, ReadError::NoHeader)?;
        let field =
            |at: usize| u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
        if field(0) != MAGIC_NS {
            return Err(ReadError::Magic(field(0)));
        }
        if field(20) != LINKTYPE {
            return Err(ReadError::LinkType(field(20)));
        }
        Ok(Reader { input, at: 24 })
    }

    /// The next record, or `None` at the end of the trace.
    pub fn next_record(&mut self) -> Result<Option<Record>, ReadError> {
        let at = self.at;
        // The trace may end before a record, not inside one.
        let mut head = [0u8; 16];
        loop {
            match self.input.read(&mut head[..1]) {
                Ok(0) => return Ok(None),
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e.kind())),
            }
        }
        read_exact(&mut self.input, &mut head[1..], ReadError::Truncated(at))?;
        let field = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (sec, nsec, captured, len) = (field(0), field(4), field(8) as usize, field(12) as usize);
        if captured != len || !(PSEUDO_HEADER_LEN..=PSEUDO_HEADER_LEN + MAX_PACKET_LEN).contains(&captured) {
            return Err(ReadError::BadLength(at));
        }
        let mut body = [0u8; PSEUDO_HEADER_LEN + MAX_PACKET_LEN];
        read_exact(&mut self.input, &mut body[..captured], ReadError::Truncated(at))?;
        let mut pseudo_header = [0u8; PSEUDO_HEADER_LEN];
        pseudo_header.copy_from_slice(&body[..PSEUDO_HEADER_LEN]);
        self.at += 16 + captured;
        Ok(Some(Record {
            ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
            pseudo_header,
            bytes: body[PSEUDO_HEADER_LEN..captured].to_vec(),
        }))
    }
}

/// The records of a trace (section 7), in file order; a typed error for anything else.
pub fn read(bytes: &[u8]) -> Result<Vec<Record>, ReadError> {
    let mut reader = Reader::new(bytes)?;
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_dl::flit::{ControlFlit, IdentFlit, PacketHeader};
    use proptest::prelude::*;

    /// A trace of an Update flit and a one-flit packet, as the tracer writes it.
    fn small_trace() -> Vec<u8> {
        let mut out = Vec::new();
        let hop = Hop {
            trunk: 0,
            from: (0, 0),
            to: (1, 0),
        };
        let mut tracer = Tracer::new(&mut out, 2, 10)
            .unwrap()
            .with_tl_layout(TlLayout::Raw);
        let update = ControlFlit {
            kind: ControlKind::Update,
            ack: link_dl::seq::Seq::new(5),
            credits: [1, 2, 3, 4],
        }
        .emit();
        tracer.unit(0, hop, Instant(10_000), &update).unwrap();
        tracer.flush().unwrap();
        drop(tracer);
        out
    }

    /// A sealed packet of a header and `payload` flits of `fill`, sequence number `seq`.
    fn packet(seq: u16, payload: u8, fill: u8) -> Vec<u8> {
        let mut bytes = vec![fill; FLIT_LEN * (1 + usize::from(payload))];
        let header = PacketHeader {
            payload_flits: payload,
            vc: link_dl::vc::Vc::Posted,
            seq: link_dl::seq::Seq::new(seq),
            ack: link_dl::seq::Seq::new(0),
            credit_vc: link_dl::vc::Vc::Request,
            credit: 0,
            tl: 0x1234,
        };
        header.emit((&mut bytes[..FLIT_LEN]).try_into().unwrap()).unwrap();
        link_dl::flit::seal_packet(&mut bytes);
        bytes
    }

    /// The records a tracer makes of `units`, all on one direction, as (record kind, units).
    fn records_of(units: &[Vec<u8>]) -> Vec<(u8, usize)> {
        let mut out = Vec::new();
        let hop = Hop {
            trunk: 0,
            from: (0, 0),
            to: (1, 0),
        };
        let mut tracer = Tracer::new(&mut out, 2, 1000).unwrap();
        for (i, unit) in units.iter().flat_map(|u| u.chunks_exact(FLIT_LEN)).enumerate() {
            let at = Instant(1_000 * i as u64);
            tracer.unit(0, hop, at, unit.try_into().unwrap()).unwrap();
        }
        tracer.flush().unwrap();
        drop(tracer);
        let records = read(&out).unwrap();
        records
            .iter()
            .map(|r| (r.pseudo_header[1], r.bytes.len() / FLIT_LEN))
            .collect()
    }

    /// A received trace frames packets as the data link does (docs/spec.md 2.4): after a packet whose CRC
    /// does not check, the units up to a control flit whose CRC checks are one record of discarded units
    /// (a run at most a longest packet long, idle between them ending one), and the control flit and the
    /// packets after it are recorded as before. A transmitter's units never lose the framing.
    #[test]
    fn after_a_bad_crc_units_are_discarded_to_a_control_flit() {
        let update = ControlFlit {
            kind: ControlKind::Update,
            ack: link_dl::seq::Seq::new(5),
            credits: [1, 2, 3, 4],
        }
        .emit()
        .to_vec();
        let mut damaged = packet(1, 2, 0x11);
        damaged[20] ^= 1;
        // A damaged length: the header says 9 flits where 2 came, so the packet takes in what follows.
        let mut long = packet(3, 2, 0x33);
        long[0] = long[0] & !0b0011_1100 | 9 << 2;
        let junk = vec![0x5a; FLIT_LEN * 12];
        let idle = vec![0; FLIT_LEN];
        let sent = [
            packet(0, 8, 0x22),
            update.clone(),
            packet(1, 0, 0),
            update.clone(),
        ];
        let expected_sent = vec![
            (RECORD_PACKET, 9),
            (RECORD_CONTROL, 1),
            (RECORD_PACKET, 1),
            (RECORD_CONTROL, 1),
        ];
        assert_eq!(records_of(&sent), expected_sent);
        let received = [
            packet(0, 1, 0x22),
            damaged,
            junk.clone(),
            idle.clone(),
            packet(2, 1, 0x44),
            update.clone(),
            packet(3, 1, 0x44),
            long,
            packet(4, 9, 0x55),
            update.clone(),
        ];
        assert_eq!(
            records_of(&received),
            vec![
                (RECORD_PACKET, 2),
                (RECORD_PACKET, 3),
                (RECORD_DISCARDED, 10),
                (RECORD_DISCARDED, 2),
                (RECORD_DISCARDED, 2),
                (RECORD_CONTROL, 1),
                (RECORD_PACKET, 2),
                // 3 of its own and 7 of the next packet's, then the rest of that packet.
                (RECORD_PACKET, 10),
                (RECORD_DISCARDED, 3),
                (RECORD_CONTROL, 1),
            ]
        );
        // A unit of no kind, or a header that cannot be (15 flits), loses the framing where it is.
        let mut no_kind = vec![0u8; FLIT_LEN];
        no_kind[0] = 0b1100_0000;
        let mut too_long = packet(1, 1, 0x66);
        too_long[0] |= 0b0011_1100;
        let records = records_of(&[
            packet(0, 1, 0x22),
            no_kind,
            junk,
            update.clone(),
            too_long,
            update.clone(),
            packet(1, 1, 0),
        ]);
        assert_eq!(
            records,
            vec![
                (RECORD_PACKET, 2),
                (RECORD_DISCARDED, 10),
                (RECORD_DISCARDED, 3),
                (RECORD_CONTROL, 1),
                (RECORD_DISCARDED, 2),
                (RECORD_CONTROL, 1),
                (RECORD_PACKET, 2)
            ]
        );
    }

    #[test]
    fn what_the_tracer_writes_reads_back() {
        let records = read(&small_trace()).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].ns, 10);
        assert_eq!(records[0].from_node(), 0);
        assert_eq!(records[0].pseudo_header[10], TlLayout::Raw as u8);
        assert_eq!(records[0].bytes.len(), FLIT_LEN);
    }

    #[test]
    fn a_cut_trace_is_refused_with_where() {
        let trace = small_trace();
        assert_eq!(read(&trace[..20]), Err(ReadError::NoHeader));
        assert_eq!(read(&trace[..24]).map(|r| r.len()), Ok(0));
        for end in 25..trace.len() {
            assert_eq!(read(&trace[..end]), Err(ReadError::Truncated(24)), "cut at {end}");
        }
        let mut other = trace.clone();
        other[20] = 1;
        assert_eq!(read(&other), Err(ReadError::LinkType(1)));
        let mut short = trace;
        short[24 + 8..24 + 12].copy_from_slice(&11u32.to_le_bytes());
        short[24 + 12..24 + 16].copy_from_slice(&11u32.to_le_bytes());
        assert_eq!(read(&short), Err(ReadError::BadLength(24)));
        // Longer than a pseudo-header and the longest packet: refused before anything is allocated for it.
        let mut long = small_trace();
        let len = (PSEUDO_HEADER_LEN + MAX_PACKET_LEN + 1) as u32;
        long[24 + 8..24 + 12].copy_from_slice(&len.to_le_bytes());
        long[24 + 12..24 + 16].copy_from_slice(&len.to_le_bytes());
        long.resize(24 + 16 + len as usize, 0);
        assert_eq!(read(&long), Err(ReadError::BadLength(24)));
    }

    /// A unit of the kinds a receiver may be given: a sealed packet's flits, control and identity flits
    /// (InitFC among them), idle, bytes at random, and packets with a bit flipped. Packets are filled with
    /// bytes other than 0, so that a unit of zeros is idle.
    fn received_units() -> impl Strategy<Value = Vec<[u8; FLIT_LEN]>> {
        let control = (0u8..4, any::<u16>()).prop_map(|(k, ack)| {
            let kind = [
                ControlKind::Update,
                ControlKind::Nak,
                ControlKind::InitFc1,
                ControlKind::InitFc2,
            ];
            let flit = ControlFlit {
                kind: kind[usize::from(k)],
                ack: link_dl::seq::Seq::new(ack % 1024),
                credits: [64; 4],
            };
            vec![flit.emit()]
        });
        let ident = any::<u8>().prop_map(|port| {
            vec![IdentFlit {
                node: 9,
                port: port % 64,
            }
            .emit()]
        });
        let unit = |bytes: &[u8]| -> [u8; FLIT_LEN] { bytes.try_into().unwrap() };
        let good = (0u8..10, any::<u8>())
            .prop_map(move |(n, fill)| packet(1, n, fill).chunks(FLIT_LEN).map(unit).collect());
        let flipped = (0u8..10, 1u8..=255, any::<u16>()).prop_map(move |(n, fill, bit)| {
            let mut bytes = packet(2, n, fill);
            let bit = usize::from(bit) % (bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            bytes.chunks(FLIT_LEN).map(unit).collect()
        });
        let junk = any::<[u8; FLIT_LEN]>().prop_map(|u| vec![u]);
        let idle = Just(vec![[0u8; FLIT_LEN]]);
        let piece = prop_oneof![3 => good, 2 => control, 1 => ident, 2 => flipped, 1 => junk, 1 => idle];
        proptest::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        /// Whatever a receiver is given, the tracer loses and repeats nothing: its records hold every unit
        /// but idle, in order, less the initialisation flits it counts as repeats; a packet record is a
        /// header and the flits it announces, a record of discarded units holds no idle and no packet
        /// boundary, and no record is longer than a longest packet. (A packet the end cuts short is the
        /// one thing left out.)
        #[test]
        fn a_receivers_units_are_recorded_once_each(units in received_units(), restart_at in 0u8..80) {
            let mut data = vec![restart_at];
            data.extend(units.iter().flatten());
            crate::fuzz::trace_write(&data);
        }

        /// Hostile bytes after a valid file header end in records or a typed error, never a panic.
        #[test]
        fn any_bytes_read_without_panic(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = small_trace()[..24].to_vec();
            bytes.extend_from_slice(&tail);
            let _ = read(&bytes);
        }
    }
}
