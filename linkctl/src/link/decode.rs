//! `linkctl link decode DIR`: a capture of a link's lanes (`link train --capture`, `link run --capture`,
//! or a board's, in the same files) read back as the partner's port reads it: each lane's receiver, the
//! lanes deskewed and unstriped (`link_phy::ltssm::LinkMonitor`), and the data stream read by the data
//! link's decoder (`dl decode`): packets, control flits, idle, and anything damaged.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, ensure, Context};
use link_phy::lanes::MAX_LANES;
use link_phy::ltssm::{LaneMonitor, LaneNumbers, LinkEvent, LinkMonitor, MonitorEvent};
use link_phy::rate::LineCode;
use serde_json::{json, Value};

use crate::dl::decode::{text as item_text, Decoder, FecBlocks, TlReading};
use crate::dl::summary::Counts;
use crate::phy::bits::words;
use crate::phy::events::{event_text, run_json, run_text, Run};
use crate::trace::{summary_json, summary_text, LinkTrace, PcapArgs};
use link_phy::time::Instant;

/// The largest `capture.json` read: a capture has a few files per lane and rate change.
const MAX_INDEX_BYTES: u64 = 16 << 20;
/// Bytes read from a lane's file at a time.
const CHUNK: usize = 64 * 1024;

#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// The capture's directory, with its `capture.json` (docs/spec.md 1.6)
    dir: PathBuf,
    /// Only this port's transmitter: `a` or `b`
    #[arg(long)]
    port: Option<String>,
    /// Only this stretch (numbered as the output numbers them, over both ports)
    #[arg(long)]
    stretch: Option<usize>,
    /// How to read packets' transaction-layer field: `raw` (a number: link run numbers its packets there),
    /// `transaction` (docs/spec.md section 3) or `sim` (the simulator's, section 7.1)
    #[arg(long, value_enum, default_value = "raw")]
    tl: TlReading,
    /// Print the data stream's 16-byte units in hex, one per line (what `linkctl dl decode` reads), instead
    /// of decoding them; the rest goes to stderr. A stream starts afresh in each stretch: pick one with
    /// `--stretch`
    #[arg(long, conflicts_with = "json")]
    units: bool,
    /// Print each lane's ordered sets and errors as they come (a run of the same one as one line, with its
    /// count), not only their counts
    #[arg(long)]
    lane_events: bool,
    /// Print the data stream's items counted instead of one by one (as `dl decode --summary` counts them),
    /// a line per stretch after its lane summaries: packets (with a bad CRC, cut short, refused by the
    /// transaction layer), control flits by type, identity flits, malformed, discarded and idle units
    #[arg(long, conflicts_with = "units")]
    summary: bool,
    /// Read the data stream in FEC blocks (docs/spec.md 2.7: 15 flits and a check unit, corrected where
    /// the code can), as `capture.json`'s `fec` says for `link run --fec`'s captures: give it for a board's
    /// capture of a link running FEC
    #[arg(long)]
    fec: bool,
    /// One JSON object per line: each stretch, lane numbering, data-link item (as `dl decode --json`
    /// prints it, with `tx_port` and `stretch`), stream error and lane summary
    #[arg(long)]
    json: bool,
    /// With `--pcap FILE`, the packets and control flits read, as a trace for Wireshark (section 7): port A
    /// is node 0, port B node 1; each record at the time its first unit started on its lanes, as the
    /// receiver's bit count places it
    #[command(flatten)]
    trace: PcapArgs,
}

/// One file of the capture, as `capture.json` lists it.
#[derive(Clone, Debug)]
struct Segment {
    file: String,
    port: char,
    lane: usize,
    lane_number: Option<u8>,
    rate_gts: f64,
    code: LineCode,
    start_us: f64,
    end_us: f64,
    bits: u64,
}

/// Read the capture and print what the receivers make of it; exit status 2 if anything did not check
/// (a receiver error, lanes that could not be deskewed, a unit cut short, a packet that does not check).
pub fn decode(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    let port = match args.port.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None => None,
        Some("A") => Some('A'),
        Some("B") => Some('B'),
        Some(other) => bail!("--port must be a or b, not {other:?}"),
    };
    let (segments, index_fec) = read_index(&args.dir)?;
    let fec = args.fec || index_fec;
    let stretches = stretches(segments)?;
    if let Some(n) = args.stretch {
        ensure!(
            n < stretches.len(),
            "--stretch {n}: the capture has {} stretches",
            stretches.len()
        );
    }
    let chosen: Vec<(usize, &Vec<Segment>)> = (stretches.iter().enumerate())
        .filter(|(i, s)| port.is_none_or(|p| s[0].port == p) && args.stretch.is_none_or(|n| n == *i))
        .collect();
    ensure!(
        !chosen.is_empty(),
        "the capture has no files for that port and stretch"
    );
    let mut out = Output {
        out: BufWriter::new(io::stdout().lock()),
        json: args.json,
        units: args.units,
        lane_events: args.lane_events,
        bad: false,
        data_summary: args.summary.then(Counts::default),
        trace: args.trace.open(args.tl.layout())?,
    };
    for (index, stretch) in chosen {
        decode_stretch(&args.dir, index, stretch, args.tl, fec, &mut out)?;
    }
    if let Some(trace) = out.trace.take() {
        let summary = trace.finish()?;
        let mut v = summary_json(&summary);
        v["event"] = json!("trace");
        out.item(&v, || format!("trace: {}", summary_text(&summary)))?;
    }
    out.out.flush().context("writing stdout")?;
    Ok(if out.bad {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// `capture.json`, checked: every segment's fields, a file name without a directory in it; and whether it
/// says the data link ran FEC (false when it does not say).
fn read_index(dir: &Path) -> anyhow::Result<(Vec<Segment>, bool)> {
    let path = dir.join("capture.json");
    let mut text = String::new();
    File::open(&path)
        .with_context(|| format!("opening {}", path.display()))?
        .take(MAX_INDEX_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("reading {}", path.display()))?;
    ensure!(
        text.len() as u64 <= MAX_INDEX_BYTES,
        "{} is over {} MiB: not a capture index",
        path.display(),
        MAX_INDEX_BYTES >> 20
    );
    let index: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let Some(list) = index["segments"].as_array() else {
        bail!("{} has no \"segments\" list", path.display());
    };
    let fec = match &index["fec"] {
        Value::Null => false,
        Value::Bool(fec) => *fec,
        other => bail!("{}: \"fec\" must be true or false, not {other}", path.display()),
    };
    let segments = list
        .iter()
        .enumerate()
        .map(|(i, s)| segment(s).with_context(|| format!("{}: segment {i}", path.display())))
        .collect::<anyhow::Result<_>>()?;
    Ok((segments, fec))
}

fn segment(s: &Value) -> anyhow::Result<Segment> {
    let str_field = |key: &str| {
        s[key]
            .as_str()
            .with_context(|| format!("\"{key}\" is not a string"))
    };
    let num = |key: &str| {
        s[key]
            .as_f64()
            .with_context(|| format!("\"{key}\" is not a number"))
    };
    let file = str_field("file")?.to_owned();
    ensure!(
        !file.is_empty() && !file.contains(['/', '\\']) && file != "." && file != "..",
        "\"file\" must name a file in the capture's directory, not {file:?}"
    );
    let port = match str_field("port")? {
        "A" => 'A',
        "B" => 'B',
        other => bail!("\"port\" must be \"A\" or \"B\", not {other:?}"),
    };
    let lane = s["lane"].as_u64().filter(|&l| l < MAX_LANES as u64);
    let Some(lane) = lane else {
        bail!(
            "\"lane\" must be a lane number below {MAX_LANES}, not {}",
            s["lane"]
        );
    };
    let lane_number = match &s["lane_number"] {
        Value::Null => None,
        n => Some(n.as_u64().filter(|&n| n < MAX_LANES as u64).with_context(|| {
            format!("\"lane_number\" must be null or a lane number below {MAX_LANES}, not {n}")
        })? as u8),
    };
    let code = match str_field("code")? {
        "8b10b" => LineCode::Code8b10b,
        "128b130b" => LineCode::Code128b130b,
        other => bail!("\"code\" must be \"8b10b\" or \"128b130b\", not {other:?}"),
    };
    let Some(bits) = s["bits"].as_u64() else {
        bail!("\"bits\" must be a count of bits, not {}", s["bits"]);
    };
    Ok(Segment {
        file,
        port,
        lane: lane as usize,
        lane_number,
        rate_gts: num("rate_gts")?,
        code,
        start_us: num("start_us")?,
        end_us: num("end_us")?,
        bits,
    })
}

/// The segments grouped into stretches: a port's lanes at the same rate and line code whose files overlap
/// in time (a board's capture may start its lanes' files a little apart), which a receiver reads together;
/// in order of port, then time.
fn stretches(mut segments: Vec<Segment>) -> anyhow::Result<Vec<Vec<Segment>>> {
    segments.sort_by(|x, y| {
        (x.port, x.start_us, x.lane)
            .partial_cmp(&(y.port, y.start_us, y.lane))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut stretches: Vec<Vec<Segment>> = Vec::new();
    for s in segments {
        match stretches.last_mut() {
            Some(last)
                if last[0].port == s.port
                    && (last[0].start_us == s.start_us
                        || s.start_us < last.iter().map(|l| l.end_us).fold(f64::MIN, f64::max))
                    && last[0].rate_gts == s.rate_gts
                    && last[0].code == s.code =>
            {
                if let Some(other) = last.iter().find(|l| l.lane == s.lane) {
                    bail!(
                        "port {} lane {} has two files at once: {} from {} us and {} from {} us",
                        s.port,
                        s.lane,
                        other.file,
                        other.start_us,
                        s.file,
                        s.start_us
                    );
                }
                last.push(s);
            }
            _ => stretches.push(vec![s]),
        }
    }
    Ok(stretches)
}

/// When a stretch is read from: its latest lane's start. A receiver can put the stream together only
/// from when every lane has begun.
fn read_from_us(stretch: &[Segment]) -> f64 {
    stretch.iter().map(|s| s.start_us).fold(f64::MIN, f64::max)
}

/// The bits of `segment`'s file before `from_us`, at its rate (all of them at most).
fn skipped_bits(segment: &Segment, from_us: f64) -> u64 {
    let bits = ((from_us - segment.start_us) * segment.rate_gts * 1e3).round();
    if bits > 0.0 {
        (bits as u64).min(segment.bits)
    } else {
        0
    }
}

/// One lane's file, read a word at a time up to its bit count.
struct LaneFile {
    lane: usize,
    name: String,
    input: File,
    buf: Vec<u8>,
    filled: usize,
    at: usize,
    bits_left: u64,
    /// Bits at the start not to read: the lane's file began before the stretch is read from.
    skip: u64,
    /// Bits read so far, after those skipped.
    read: u64,
}

impl LaneFile {
    /// The next up to 64 bits after those skipped, the first on the wire in bit 0, and how many.
    fn next_word(&mut self) -> anyhow::Result<Option<(u64, u32)>> {
        loop {
            let Some((word, count)) = self.next_file_word()? else {
                return Ok(None);
            };
            let skipped = self.skip.min(u64::from(count)) as u32;
            self.skip -= u64::from(skipped);
            if skipped < count {
                self.read += u64::from(count - skipped);
                return Ok(Some((word.checked_shr(skipped).unwrap_or(0), count - skipped)));
            }
        }
    }

    /// The file's next up to 64 bits.
    fn next_file_word(&mut self) -> anyhow::Result<Option<(u64, u32)>> {
        if self.bits_left == 0 {
            return Ok(None);
        }
        if self.at >= self.filled {
            self.filled = crate::phy::code::read_some(&mut self.input, &mut self.buf)
                .with_context(|| format!("reading {}", self.name))?;
            self.at = 0;
            ensure!(
                self.filled > 0,
                "{} ends {} bits short of what capture.json says",
                self.name,
                self.bits_left
            );
        }
        let end = (self.at + 8).min(self.filled);
        let (word, count) = words(&self.buf[self.at..end]).next().unwrap_or((0, 0));
        self.at = end;
        let count = u64::from(count).min(self.bits_left) as u32;
        self.bits_left -= u64::from(count);
        Ok(Some((word, count)))
    }
}

/// What is printed, and whether anything did not check.
struct Output<W: Write> {
    out: W,
    json: bool,
    units: bool,
    lane_events: bool,
    bad: bool,
    /// With `--summary`, the data items of the stretch being read, counted instead of printed.
    data_summary: Option<Counts>,
    /// `--pcap`'s trace.
    trace: Option<LinkTrace>,
}

impl<W: Write> Output<W> {
    fn line(&mut self, text: &str) -> anyhow::Result<()> {
        writeln!(self.out, "{text}").context("writing stdout")
    }

    /// A JSON object, or its text; on stderr when the units are printed.
    fn item(&mut self, value: &Value, text: impl FnOnce() -> String) -> anyhow::Result<()> {
        if self.units {
            eprintln!("{}", text());
            Ok(())
        } else if self.json {
            self.line(&value.to_string())
        } else {
            self.line(&text())
        }
    }
}

/// Per lane, how many of each kind of event its receiver reported.
#[derive(Default)]
struct LaneTally {
    training_sets: u64,
    skp: u64,
    eios: u64,
    sds: u64,
    polarity_inversions: u64,
    errors: u64,
}

fn decode_stretch<W: Write>(
    dir: &Path,
    index: usize,
    stretch: &[Segment],
    tl: TlReading,
    fec: bool,
    out: &mut Output<W>,
) -> anyhow::Result<()> {
    let first = &stretch[0];
    let port = first.port;
    let lanes: Vec<usize> = stretch.iter().map(|s| s.lane).collect();
    let start_us = read_from_us(stretch);
    let end_us = stretch.iter().map(|s| s.end_us).fold(start_us, f64::max);
    let head = json!({
        "event": "stretch", "tx_port": port.to_string(), "stretch": index, "rate_gts": first.rate_gts,
        "code": first.code.name(), "start_us": start_us, "end_us": end_us, "lanes": lanes,
        "files": stretch.iter().map(|s| s.file.as_str()).collect::<Vec<_>>(),
    });
    out.item(&head, || {
        format!(
            "port {port}, stretch {index}: {} GT/s {}, {:.3} to {:.3} us, lanes {}",
            first.rate_gts,
            first.code.name(),
            start_us,
            end_us,
            list(&lanes)
        )
    })?;
    let skipped: Vec<Value> = (stretch.iter())
        .map(|s| (s.lane, skipped_bits(s, start_us)))
        .filter(|&(_, bits)| bits > 0)
        .map(|(lane, bits)| json!({"lane": lane, "bits": bits}))
        .collect();
    if !skipped.is_empty() {
        let note = format!(
            "the lanes' files start at different times: each is read from {start_us:.6} us, the latest \
             start, the bits before it left out ({})",
            (skipped.iter())
                .map(|v| format!("lane {}: {} bits", v["lane"], v["bits"]))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let v = json!({"event": "note", "tx_port": port.to_string(), "stretch": index, "note": note,
                       "skipped_bits": skipped});
        out.item(&v, || format!("note: {note}"))?;
    }
    let mut numbers = LaneNumbers::default();
    for s in stretch {
        numbers.0[s.lane] = s.lane_number;
    }
    if first.code == LineCode::Code128b130b && numbers.width().is_none() {
        // A lane's number seeds its descrambler, so it must be known before its data: a first reading
        // finds it in the training sets (as Configuration or Recovery gave it), the second reads the
        // stream with it.
        numbers = numbers_from_training_sets(dir, stretch, numbers)?;
        let problem = if numbers.width().is_some() {
            "lane numbers read from the training sets (capture.json gives none)"
        } else {
            out.bad = true;
            "at 128b/130b every lane of the stream needs its lane number (its descrambler's seed): neither capture.json nor the training sets give them as a link's, so ordered sets only"
        };
        let v = json!({"event": "note", "tx_port": port.to_string(), "stretch": index, "note": problem});
        out.item(&v, || format!("note: {problem}"))?;
    }
    let mut monitor = LinkMonitor::new(first.code, numbers).context("building the monitor")?;
    let mut reader = StreamReader {
        clock: UnitClock {
            start_ps: start_us * 1e6,
            ps_per_bit: 1e3 / first.rate_gts,
            bits_per_byte: if first.code == LineCode::Code8b10b {
                10.0
            } else {
                8.0 * 130.0 / 128.0
            },
            width: monitor.width().map_or(1, |w| w.lanes()),
        },
        decoder: Decoder::new(tl),
        fec: fec.then(FecBlocks::new),
        units_since_os: 0,
        fec_times: [Instant::ZERO; 16],
        port,
        stretch: index,
        tally: (0..MAX_LANES).map(|_| LaneTally::default()).collect(),
        deskew_lost: 0,
        stream_units: 0,
        numbers: None,
        in_stream: false,
        repeated: vec![Run::default(); MAX_LANES],
    };
    if monitor.width().is_some() {
        reader.numbers = Some(monitor.numbers());
    }
    let early_end = read_lanes(dir, stretch, &mut monitor, &mut |event, read| {
        reader.event(event, read, out)
    })?;
    if let Some(end) = early_end {
        let note = format!(
            "lane {}'s file ends after {} bits, while the stream's other lanes go on ({} bits more on the \
             longest): the stream is read to there, as it cannot be put together without the lane",
            end.lane, end.bits, end.unread
        );
        let v = json!({"event": "note", "tx_port": port.to_string(), "stretch": index, "note": note,
                       "lane": end.lane, "lane_bits": end.bits, "unread_bits": end.unread});
        out.item(&v, || format!("note: {note}"))?;
    }
    reader.finish(&lanes, out)
}

/// Where a stretch's reading stopped because one of its stream's lanes ended before the others.
struct EarlyEnd {
    lane: usize,
    /// The bits of the lane that ended.
    bits: u64,
    /// The most bits left unread on another lane.
    unread: u64,
}

/// Feed `monitor` the stretch's files, a word from each lane in turn (the lanes stay within a few symbols
/// of each other, far less than the deskew buffer holds), and `handle` what it reports, with the bits read
/// on the lane whose word it came after. A board's capture may end its lanes' files at different times:
/// once a lane the stream is numbered on has ended and another has not, the stream stalls (its deskew
/// buffer would overflow on the other lanes), so the reading stops there and says where.
fn read_lanes(
    dir: &Path,
    stretch: &[Segment],
    monitor: &mut LinkMonitor,
    handle: &mut dyn FnMut(Event, u64) -> anyhow::Result<()>,
) -> anyhow::Result<Option<EarlyEnd>> {
    let from_us = read_from_us(stretch);
    let mut files = stretch
        .iter()
        .map(|s| {
            let path = dir.join(&s.file);
            Ok(LaneFile {
                lane: s.lane,
                name: path.display().to_string(),
                input: File::open(&path).with_context(|| format!("opening {}", path.display()))?,
                buf: vec![0; CHUNK],
                filled: 0,
                at: 0,
                bits_left: s.bits,
                skip: skipped_bits(s, from_us),
                read: 0,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut events = Vec::new();
    let mut ended = 0u32;
    loop {
        let mut any = false;
        for file in &mut files {
            if let Some((word, count)) = file.next_word()? {
                any = true;
                let read = file.read;
                monitor.push_bits(file.lane, word, count, &mut |e| events.push((owned(e), read)));
            } else {
                ended |= 1 << file.lane;
            }
        }
        for (event, read) in events.drain(..) {
            handle(event, read)?;
        }
        if !any {
            return Ok(None);
        }
        // Lanes read a word at a time end up to a word apart: less is not an early end.
        let unread = files.iter().map(|f| f.bits_left).max().unwrap_or(0);
        if ended != 0 && unread > 64 && monitor.width().is_some() {
            let numbers = monitor.numbers();
            let stalled = files
                .iter()
                .find(|f| ended & 1 << f.lane != 0 && numbers.0[f.lane].is_some());
            if let Some(stalled) = stalled {
                return Ok(Some(EarlyEnd {
                    lane: stalled.lane,
                    bits: stalled.read,
                    unread,
                }));
            }
        }
    }
}

/// The most bytes of a lane's file read to find its lane number.
const NUMBER_SEARCH_BYTES: usize = 16 * 1024;

/// `known` with each lane it does not number given the number its training sets say, if any. At
/// 128b/130b a training set's symbols 1 to 13 are scrambled with the lane's own seed, so a receiver with
/// the wrong one cannot read them: each number is tried on the start of the lane's file until one reads a
/// training set that carries it.
fn numbers_from_training_sets(
    dir: &Path,
    stretch: &[Segment],
    known: LaneNumbers,
) -> anyhow::Result<LaneNumbers> {
    let mut numbers = known;
    for s in stretch.iter().filter(|s| known.0[s.lane].is_none()) {
        let path = dir.join(&s.file);
        let mut start = vec![0u8; NUMBER_SEARCH_BYTES.min(s.bits.div_ceil(8) as usize)];
        let n = crate::phy::code::read_some(
            &mut File::open(&path).with_context(|| format!("opening {}", path.display()))?,
            &mut start,
        )
        .with_context(|| format!("reading {}", path.display()))?;
        numbers.0[s.lane] = (0..MAX_LANES as u8).find(|&candidate| {
            let mut monitor = LaneMonitor::new_128b130b(usize::from(candidate));
            let mut found = false;
            for (word, count) in words(&start[..n]) {
                monitor.push_bits(word, count, &mut |e| {
                    found |= matches!(e, MonitorEvent::Training(ts) if ts.lane == Some(candidate));
                });
                if found {
                    break;
                }
            }
            found
        });
    }
    Ok(numbers)
}

/// A [`LinkEvent`] with its units copied, to be handled after the monitor's call.
enum Event {
    Lane(usize, MonitorEvent),
    Lanes(LaneNumbers),
    Units(Vec<u8>),
    StreamStopped(usize),
    DeskewLost,
}

fn owned(event: LinkEvent) -> Event {
    match event {
        LinkEvent::Lane { lane, event } => Event::Lane(lane, event),
        LinkEvent::Lanes(numbers) => Event::Lanes(numbers),
        LinkEvent::Units(units) => Event::Units(units.to_vec()),
        LinkEvent::StreamStopped { dropped } => Event::StreamStopped(dropped),
        LinkEvent::DeskewLost => Event::DeskewLost,
    }
}

/// Where a stretch's units sat on its lanes' wire.
struct UnitClock {
    /// The stretch's start.
    start_ps: f64,
    ps_per_bit: f64,
    /// Bits on a lane per byte of the stream (the line code's).
    bits_per_byte: f64,
    /// Lanes the stream is striped over.
    width: usize,
}

impl UnitClock {
    /// When the `k`th of `n` units that came out together started on the wire, if the last of them ended
    /// `read` bits into each lane: the lanes carry a unit in `16 / width` bytes each. An estimate, to within
    /// the word and the ordered sets between units.
    fn unit_start(&self, read: u64, k: usize, n: usize) -> Instant {
        let unit_bits = 16.0 / self.width as f64 * self.bits_per_byte;
        let start_bits = (read as f64 - (n - k) as f64 * unit_bits).max(0.0);
        Instant((self.start_ps + start_bits * self.ps_per_bit).round() as u64)
    }
}

/// One stretch's stream on its way out.
struct StreamReader {
    clock: UnitClock,
    decoder: Decoder,
    /// With FEC, the blocks being put together.
    fec: Option<FecBlocks>,
    /// Units since the stream started or ordered sets last came: a unit's place in its FEC block.
    units_since_os: u64,
    /// When each unit of the FEC block being put together started on the wire.
    fec_times: [Instant; 16],
    port: char,
    stretch: usize,
    tally: Vec<LaneTally>,
    deskew_lost: u64,
    stream_units: u64,
    /// Lane numbers learnt and not yet printed: a change comes a lane at a time, and only the numbering
    /// the stream is read with is printed (before its units, or at the end).
    numbers: Option<LaneNumbers>,
    /// With `--lane-events`, each lane's last event and how many times in a row it came.
    repeated: Vec<Run>,
    /// Whether units came since the stream last started: training sets or an EIOS after them mean the
    /// link left L0, and the data link starts its framing over when it is back.
    in_stream: bool,
}

impl StreamReader {
    fn event<W: Write>(&mut self, event: Event, read: u64, out: &mut Output<W>) -> anyhow::Result<()> {
        match event {
            Event::Lane(lane, e) => {
                if matches!(e, MonitorEvent::Training(_) | MonitorEvent::ElectricalIdle) {
                    self.restart(out)?;
                }
                let t = &mut self.tally[lane];
                match e {
                    MonitorEvent::Training(_) => t.training_sets += 1,
                    MonitorEvent::Skip => t.skp += 1,
                    MonitorEvent::ElectricalIdle => t.eios += 1,
                    MonitorEvent::StartOfData => t.sds += 1,
                    MonitorEvent::PolarityInverted => t.polarity_inversions += 1,
                    MonitorEvent::Data { .. } => {}
                    _ => {
                        t.errors += 1;
                        out.bad = true;
                        if !out.lane_events {
                            let v = json!({"event": "lane_error", "tx_port": self.port.to_string(),
                                           "stretch": self.stretch, "lane": lane, "error": event_text(&e)});
                            out.item(&v, || format!("lane {lane}: {}", event_text(&e)))?;
                        }
                    }
                }
                if out.lane_events {
                    if let Some(ended) = self.repeated[lane].add(e) {
                        self.print_lane_run(lane, ended, out)?;
                    }
                }
            }
            Event::Lanes(numbers) => {
                if let Some(width) = numbers.width() {
                    self.clock.width = width.lanes();
                }
                self.numbers = Some(numbers);
            }
            Event::Units(units) => {
                self.print_numbers(out)?;
                self.in_stream = true;
                let n = units.len() / 16;
                for (k, unit) in units.chunks_exact(16).enumerate() {
                    self.stream_units += 1;
                    let at = self.clock.unit_start(read, k, n);
                    let unit: [u8; 16] = unit.try_into().context("a 16-byte unit")?;
                    if out.units {
                        let hex: String = unit.iter().map(|b| format!("{b:02x}")).collect();
                        out.line(&hex)?;
                    }
                    let index = self.units_since_os;
                    self.units_since_os += 1;
                    let Some(fec) = self.fec.as_mut() else {
                        self.flit(unit, at, out)?;
                        continue;
                    };
                    self.fec_times[(index % 16) as usize] = at;
                    let out_of_step = fec.out_of_step;
                    let block = fec.push(index, &unit);
                    if fec.out_of_step > out_of_step {
                        self.fec_error("units out of step with the FEC blocks: dropped", out)?;
                    }
                    if let Some((flits, corrected)) = block {
                        if !corrected {
                            self.fec_error("a FEC block the code could not correct: left as received", out)?;
                        }
                        let times = self.fec_times;
                        for (flit, at) in flits.into_iter().zip(times) {
                            self.flit(flit, at, out)?;
                        }
                    }
                }
            }
            Event::StreamStopped(dropped) => {
                self.units_since_os = 0;
                if self.fec.as_mut().is_some_and(FecBlocks::cut) {
                    self.fec_error("ordered sets inside a FEC block: the block is dropped", out)?;
                }
                if dropped == 0 {
                    return Ok(());
                }
                out.bad = true;
                let v = json!({"event": "unit_cut_short", "tx_port": self.port.to_string(),
                               "stretch": self.stretch, "bytes": dropped});
                out.item(&v, || {
                    format!("error: ordered sets {dropped} bytes into a unit: the unit is dropped")
                })?;
            }
            Event::DeskewLost => {
                self.deskew_lost += 1;
                out.bad = true;
                let v = json!({"event": "deskew_lost", "tx_port": self.port.to_string(), "stretch": self.stretch});
                out.item(&v, || {
                    "error: the lanes could not be lined up (further apart than the deskew buffer holds)"
                        .to_owned()
                })?;
            }
        }
        Ok(())
    }

    /// Print lane `lane`'s run of the same event, if it has one.
    fn flush_lane<W: Write>(&mut self, lane: usize, out: &mut Output<W>) -> anyhow::Result<()> {
        match self.repeated[lane].take() {
            Some(run) => self.print_lane_run(lane, run, out),
            None => Ok(()),
        }
    }

    fn print_lane_run<W: Write>(
        &self,
        lane: usize,
        (event, count): (MonitorEvent, u64),
        out: &mut Output<W>,
    ) -> anyhow::Result<()> {
        let mut v = run_json(&event, count);
        v["lane_event"] = v["event"].take();
        v["event"] = json!("lane");
        v["tx_port"] = json!(self.port.to_string());
        v["stretch"] = json!(self.stretch);
        v["lane"] = json!(lane);
        out.item(&v, || format!("lane {lane}: {}", run_text(&event, count)))
    }

    /// The trace's node for the stretch's port.
    fn node(&self) -> u16 {
        u16::from(self.port == 'B')
    }

    /// A flit of the data stream (with FEC, of a block read whole), which started on the wire at `at`:
    /// into the trace, and read by the data link's decoder unless the units are printed instead.
    fn flit<W: Write>(&mut self, flit: [u8; 16], at: Instant, out: &mut Output<W>) -> anyhow::Result<()> {
        if let Some(trace) = &mut out.trace {
            trace.unit(self.node(), at, &flit);
            trace.check()?;
        }
        if out.units {
            return Ok(());
        }
        self.decoder.push(flit, &mut items(out, self.port, self.stretch))
    }

    /// Something about the FEC blocks did not check.
    fn fec_error<W: Write>(&self, error: &str, out: &mut Output<W>) -> anyhow::Result<()> {
        out.bad = true;
        let v = json!({"event": "fec_error", "tx_port": self.port.to_string(), "stretch": self.stretch,
                       "error": error});
        out.item(&v, || format!("error: {error}"))
    }

    /// The link left L0: a packet still coming was cut short, and the stream starts over.
    fn restart<W: Write>(&mut self, out: &mut Output<W>) -> anyhow::Result<()> {
        if !std::mem::take(&mut self.in_stream) {
            return Ok(());
        }
        if let Some(trace) = &mut out.trace {
            trace.cut(self.node());
        }
        self.units_since_os = 0;
        if let Some(fec) = self.fec.as_mut() {
            fec.restart();
        }
        // A packet the link's leaving L0 cut short is no damage (the data link replays it), but it is
        // shown.
        let (port, stretch) = (self.port.to_string(), self.stretch);
        self.decoder.restart(&mut |mut item: Value| {
            item["tx_port"] = json!(port);
            item["stretch"] = json!(stretch);
            if item.get("error").is_some() && item["kind"] == "packet" {
                item["left_l0"] = json!(true);
            } else {
                out.bad |= item["ok"] == false;
            }
            if let Some(counts) = out.data_summary.as_mut() {
                counts.add(&item);
                return Ok(());
            }
            out.item(&item, || {
                let text = item_text(&item);
                if item["left_l0"] == true {
                    format!("{text} (the link left L0: the data link replays it)")
                } else {
                    text
                }
            })
        })
    }

    fn print_numbers<W: Write>(&mut self, out: &mut Output<W>) -> anyhow::Result<()> {
        match self.numbers.take() {
            Some(numbers) => self.numbering(&numbers, out),
            None => Ok(()),
        }
    }

    /// The lanes' numbers changed.
    fn numbering<W: Write>(&mut self, numbers: &LaneNumbers, out: &mut Output<W>) -> anyhow::Result<()> {
        let pairs: Vec<(usize, u8)> = (numbers.0.iter().enumerate())
            .filter_map(|(p, n)| n.map(|n| (p, n)))
            .collect();
        let width = numbers.width().map(|w| w.lanes());
        let v = json!({"event": "lanes", "tx_port": self.port.to_string(), "stretch": self.stretch,
                       "lane_numbers": pairs.iter().map(|&(p, n)| json!({"lane": p, "number": n})).collect::<Vec<_>>(),
                       "width": width});
        out.item(&v, || {
            let list: Vec<String> = pairs.iter().map(|(p, n)| format!("{p}->{n}")).collect();
            match width {
                Some(w) => format!(
                    "lanes numbered {} (physical->logical): a x{w} stream",
                    list.join(" ")
                ),
                None if list.is_empty() => "lanes unnumbered: no stream".to_owned(),
                None => format!(
                    "lanes numbered {}: no stream (not 0 to w-1 for a width w)",
                    list.join(" ")
                ),
            }
        })
    }

    /// The end of the stretch: a packet cut short, and each lane's tally.
    fn finish<W: Write>(mut self, lanes: &[usize], out: &mut Output<W>) -> anyhow::Result<()> {
        for &lane in lanes {
            self.flush_lane(lane, out)?;
        }
        self.print_numbers(out)?;
        if let Some(trace) = &mut out.trace {
            trace.cut(self.node());
        }
        self.decoder.finish(&mut items(out, self.port, self.stretch))?;
        if let Some(fec) = &self.fec {
            // A block begun when the capture ended is not counted: the capture cut it, not the link.
            let mut v = fec.summary();
            v["event"] = json!("fec");
            v["tx_port"] = json!(self.port.to_string());
            v["stretch"] = json!(self.stretch);
            out.item(&v, || {
                format!(
                    "fec: {} blocks, {} bytes corrected, {} uncorrectable, {} units out of step",
                    fec.blocks, fec.corrected, fec.uncorrectable, fec.out_of_step
                )
            })?;
        }
        let (port, stretch) = (self.port.to_string(), self.stretch);
        for &lane in lanes {
            let t = &self.tally[lane];
            let v = json!({"event": "lane_summary", "tx_port": port, "stretch": stretch, "lane": lane,
                           "training_sets": t.training_sets, "skp": t.skp, "eios": t.eios, "sds": t.sds,
                           "polarity_inversions": t.polarity_inversions, "errors": t.errors});
            out.item(&v, || {
                format!(
                    "lane {lane}: {} training sets, {} SKP, {} SDS, {} EIOS, {} polarity inversions, {} errors",
                    t.training_sets, t.skp, t.sds, t.eios, t.polarity_inversions, t.errors
                )
            })?;
        }
        if let Some(counts) = out.data_summary.as_mut().map(std::mem::take) {
            let mut v = Value::Object(counts.json());
            v["event"] = json!("data_summary");
            v["tx_port"] = json!(port);
            v["stretch"] = json!(stretch);
            out.item(&v, || format!("data: {}", counts.text()))?;
        }
        let v = json!({"event": "stream", "tx_port": port, "stretch": stretch, "units": self.stream_units,
                       "deskew_lost": self.deskew_lost});
        out.item(&v, || {
            format!(
                "stream: {} units, deskew lost {} times",
                self.stream_units, self.deskew_lost
            )
        })
    }
}

/// Where the data link decoder's items go: to `out`, marked with the stretch's port and number.
fn items<W: Write>(
    out: &mut Output<W>,
    port: char,
    stretch: usize,
) -> impl FnMut(Value) -> anyhow::Result<()> + '_ {
    move |mut item| {
        out.bad |= item["ok"] == false;
        if let Some(counts) = out.data_summary.as_mut() {
            counts.add(&item);
            return Ok(());
        }
        item["tx_port"] = json!(port.to_string());
        item["stretch"] = json!(stretch);
        out.item(&item, || item_text(&item))
    }
}

/// Lanes as `0,1,2`.
fn list(lanes: &[usize]) -> String {
    lanes.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(",")
}
