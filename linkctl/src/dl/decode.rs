//! `linkctl dl decode`: what a receiver makes of a stream of 16-byte units (`docs/spec.md` section 2):
//! packets with their header fields and CRC check, control flits, identity flits, idle, anything
//! malformed, and what a receiver discards after an error until it finds a packet boundary again, as text
//! or JSON.

use std::io::{self, Read, Write};
use std::process::ExitCode;

use anyhow::{bail, ensure, Context};
use link_dl::flit::{check_packet_crc, Flit, PacketHeader, FLIT_LEN};
use link_dl::framing::{Control, Framed, Framing};
use link_dl::Vc;
use link_tl::coherence::message::Message;
use link_tl::coherence::wire::{self as coherence_wire, Envelope};
use link_tl::header::{Extension, Header};
use link_tl::packet::Tlp;
use serde_json::{json, Value};

use super::summary::Summary;

#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// The units in hex (spaces, colons and commas between digits are ignored, and a 0x before a byte);
    /// stdin when none are given
    hex: Vec<String>,
    /// Read raw bytes from stdin instead of hex
    #[arg(long, conflicts_with = "hex")]
    binary: bool,
    /// One JSON object per line per packet, control flit, run of idle units, malformed unit or run of
    /// units discarded after an error
    #[arg(long)]
    json: bool,
    /// Read packets' transaction-layer headers as the simulator's GPUs write them (opcode, destination,
    /// source, offset: docs/spec.md section 7.1) instead of as section 3's transactions: `--tl sim`
    #[arg(long, conflicts_with = "tl")]
    sim_header: bool,
    /// How to read packets' transaction-layer field: `transaction` (section 3), `sim` (the simulator's,
    /// section 7.1) or `raw` (a number: `link run` numbers its packets there)
    #[arg(long, value_enum)]
    tl: Option<TlReading>,
    /// Read a trace (docs/spec.md section 7: `sim`, `tl copy`, `coherence` or `link decode` with `--pcap`)
    /// instead: each record as its own stream, read as its pseudo-header's layout says, with its time and
    /// hop; `at` is then the record's number
    #[arg(long, value_name = "FILE", conflicts_with_all = ["hex", "binary", "sim_header", "tl"])]
    pcap: Option<std::path::PathBuf>,
    /// The units are in FEC blocks (docs/spec.md 2.7): where the blocks start is found from the first 256
    /// units (the input may start inside a block); each block's 15 flits are decoded once it is whole and
    /// corrected where the code can (`at` then counts flits), and the blocks are summed up at the end
    #[arg(long, conflicts_with = "pcap")]
    fec: bool,
    /// Print what the input holds counted instead of item by item: per link direction (with `--pcap`)
    /// and in all, packets (with a bad CRC, cut short, refused by the transaction layer, replayed),
    /// control flits by type, identity flits, malformed, discarded and idle units, the first and last
    /// record's times, and whether everything checked
    #[arg(long)]
    summary: bool,
}

/// Decode the units as they are read, in memory bounded by a packet's units whatever the length of the
/// input; exit status 2 if any does not check (malformed, a CRC that does not match, a packet cut short,
/// a transaction-layer header a receiver would refuse). Input that is not hex, or not whole units, is an
/// error when it is reached: the units before it are decoded and printed first, as a stream that ends
/// there.
pub fn decode(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.pcap {
        return decode_trace(path, args.json, args.summary);
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut decoder = Decoder {
        tl: match args.tl {
            Some(tl) => tl,
            None if args.sim_header => TlReading::Sim,
            None => TlReading::Transaction,
        },
        ..Decoder::default()
    };
    let mut bad = false;
    let mut summary = args.summary.then(Summary::default);
    let mut print = |item: Value| -> anyhow::Result<()> {
        bad |= item["ok"] == false;
        // FEC's blocks are summed up apart, at the end.
        if let Some(summary) = summary.as_mut().filter(|_| item["kind"] != "fec") {
            summary.add(None, &item);
            return Ok(());
        }
        if args.json {
            writeln!(out, "{item}")
        } else {
            writeln!(out, "{}", text(&item))
        }
        .context("writing stdout")
    };
    let mut units = Units::default();
    let mut fec = args.fec.then(FecStream::default);
    let mut take = |bytes: &[u8]| -> anyhow::Result<()> {
        for unit in units.add(bytes) {
            match fec.as_mut() {
                None => decoder.push(unit, &mut print)?,
                Some(fec) => fec.push(unit, &mut |flit| decoder.push(flit, &mut print))?,
            }
        }
        Ok(())
    };
    let read = if args.binary {
        read_chunks(&mut io::stdin().lock(), take)
    } else {
        let (mut hex, mut bytes) = (Hex::default(), Vec::new());
        let mut take_hex = |text: &[u8]| -> anyhow::Result<()> {
            bytes.clear();
            let converted = hex.bytes(text, &mut bytes);
            // The bytes before a character that is not hex are decoded all the same.
            take(&bytes)?;
            converted
        };
        if args.hex.is_empty() {
            read_chunks(&mut io::stdin().lock(), take_hex)
        } else {
            // Words are joined (a byte's two digits may be split between two), each a word of its own for
            // its `0x` prefix.
            args.hex
                .iter()
                .try_for_each(|word| take_hex(word.as_bytes()).and_then(|()| take_hex(b" ")))
        }
        .and_then(|()| hex.finish())
    };
    let read = read.and_then(|()| units.finish());
    // Bad input ends the stream where it is: a run or a packet still going on there is reported too.
    if let Some(fec) = fec.as_mut() {
        fec.finish(&mut |flit| decoder.push(flit, &mut print))?;
    }
    decoder.finish(&mut print)?;
    if let Some(fec) = &fec {
        // A block the input ended in is left out: the input cut it, not the link.
        let blocks = &fec.blocks;
        let mut v = blocks.summary();
        v["kind"] = json!("fec");
        v["units_before_first_block"] = json!(fec.offset.unwrap_or(0));
        v["realignments"] = json!(fec.realignments);
        v["units_skipped_realigning"] = json!(fec.units_skipped_realigning);
        v["ok"] = json!(blocks.uncorrectable == 0 && blocks.out_of_step == 0);
        print(v)?;
    }
    if let Some(summary) = &summary {
        print_summary(&mut out, summary, args.json)?;
    }
    out.flush().context("writing stdout")?;
    read?;
    Ok(if bad { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

/// `--pcap`: each record of the trace at `path` decoded as a stream of its own, with its time and hop, a
/// record at a time; exit status 2 if any does not check. A file that is not a trace is an error when it is
/// reached, after the records before it.
fn decode_trace(path: &std::path::Path, json: bool, summarise: bool) -> anyhow::Result<ExitCode> {
    use fabric_sim::trace::{Hop, Reader, RECORD_DISCARDED};
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = Reader::new(io::BufReader::new(file))
        .with_context(|| format!("{} is not a trace (docs/spec.md section 7)", path.display()))?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut bad = false;
    let mut number = 0u64;
    let mut replays = Replays::default();
    let mut summary = summarise.then(Summary::default);
    let result = loop {
        let record = match reader.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => break Ok(()),
            Err(e) => break Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
        };
        // A byte that names no layout is read as a number.
        let tl = record.layout().map_or(TlReading::Raw, TlReading::of_layout);
        let Hop { trunk, from, to } = record.hop();
        let hop = json!({
            "time_ns": record.ns, "trunk": trunk, "from_node": from.0, "from_port": from.1,
            "to_node": to.0, "to_port": to.1,
        });
        let direction = (trunk, from.0, from.1);
        let hop_key = (trunk, from.0, from.1, to.0, to.1).into();
        let mut print = |mut item: Value| -> anyhow::Result<()> {
            bad |= item["ok"] == false;
            replays.mark(direction, &mut item);
            item["at"] = json!(number);
            for (key, value) in hop.as_object().into_iter().flatten() {
                item[key] = value.clone();
            }
            if let Some(summary) = summary.as_mut() {
                summary.add(Some(hop_key), &item);
                return Ok(());
            }
            if json {
                writeln!(out, "{item}")
            } else {
                writeln!(
                    out,
                    "{}{}  ({} ns, trunk {}, node {} port {} -> node {} port {})",
                    text(&item),
                    if item["replay"] == true { "  [replay]" } else { "" },
                    item["time_ns"],
                    item["trunk"],
                    item["from_node"],
                    item["from_port"],
                    item["to_node"],
                    item["to_port"]
                )
            }
            .context("writing stdout")
        };
        let whole_units = !record.bytes.is_empty() && record.bytes.len() % FLIT_LEN == 0;
        if record.pseudo_header[1] == RECORD_DISCARDED && whole_units {
            // What a receiver threw away while it looked for a packet boundary: not a stream to read.
            print(json!({"kind": "discarded", "units": record.bytes.len() / FLIT_LEN, "ok": false}))?;
            number += 1;
            continue;
        }
        let mut decoder = Decoder::new(tl);
        let mut units = Units::default();
        for unit in units.add(&record.bytes) {
            decoder.push(unit, &mut print)?;
        }
        decoder.finish(&mut print)?;
        if let Err(e) = units.finish() {
            let item = json!({"kind": "malformed", "ok": false, "error": format!("{e:#}")});
            print(item)?;
        }
        number += 1;
    };
    if let Some(summary) = &summary {
        print_summary(&mut out, summary, json)?;
    }
    out.flush().context("writing stdout")?;
    result?;
    Ok(if bad { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

/// Write `summary`'s items, as JSON lines or text.
fn print_summary(out: &mut impl Write, summary: &Summary, json: bool) -> anyhow::Result<()> {
    if json {
        summary
            .items()
            .iter()
            .try_for_each(|item| writeln!(out, "{item}"))
    } else {
        writeln!(out, "{}", summary.text())
    }
    .context("writing stdout")
}

/// The most link directions whose replays a trace's reading follows (a hostile trace could name millions).
const MAX_REPLAY_DIRECTIONS: usize = 1 << 16;

/// Which packets of a trace are replays (docs/spec.md section 7, as the dissector marks them): per
/// direction, the newest sequence number among packets whose CRC checks; a packet whose CRC checks and
/// whose number is not ahead of it (within half the 1024 numbers) was sent before. An InitFc1 starts the
/// direction's numbering over.
#[derive(Default)]
struct Replays {
    newest: std::collections::HashMap<(u16, u16, u8), u16>,
}

impl Replays {
    /// Mark a packet `item` of `direction` with `replay`, and start the numbering over at an InitFc1.
    fn mark(&mut self, direction: (u16, u16, u8), item: &mut Value) {
        if item["kind"] == "control" && item["type"] == "InitFc1" {
            self.newest.remove(&direction);
            return;
        }
        if item["kind"] != "packet" {
            return;
        }
        let seq = item["seq"]
            .as_u64()
            .map(|s| s as u16)
            .filter(|_| item["crc_ok"] == true);
        // How far the number is ahead of the newest, modulo 1024: none or more than half is behind.
        let behind = |seq: u16, newest: u16| matches!(seq.wrapping_sub(newest) % 1024, 0 | 512..);
        let replay = match (seq, self.newest.get(&direction)) {
            (None, _) => false,
            (Some(seq), Some(&newest)) if behind(seq, newest) => true,
            (Some(seq), _) => {
                if self.newest.len() < MAX_REPLAY_DIRECTIONS || self.newest.contains_key(&direction) {
                    self.newest.insert(direction, seq);
                }
                false
            }
        };
        item["replay"] = json!(replay);
    }
}

/// Feed `each` what `input` holds, a chunk at a time.
fn read_chunks(
    input: &mut impl Read,
    mut each: impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow::Error::new(e).context("reading stdin")),
        };
        each(&buf[..n])?;
    }
}

/// Hex text to bytes, a piece at a time: whitespace (any Unicode whitespace), colons and commas between
/// digits are ignored, and so is a `0x` prefix at the start of a word that starts a byte.
#[derive(Default)]
struct Hex {
    /// The first digit of a byte whose second is still to come.
    high: Option<u8>,
    /// The first bytes of a character beyond ASCII whose last are still to come.
    wide: Vec<u8>,
    /// Whether the last character was part of a word (not a separator).
    in_word: bool,
    /// A `0` that starts a word and a byte, kept until the next character says whether it starts `0x`.
    zero: bool,
    /// A `0x` prefix read, which a digit must follow.
    prefix: bool,
}

impl Hex {
    /// Append the bytes of `text` to `bytes`; on an error, those before it are there.
    fn bytes(&mut self, text: &[u8], bytes: &mut Vec<u8>) -> anyhow::Result<()> {
        for &c in text {
            if self.zero {
                self.zero = false;
                if matches!(c, b'x' | b'X') {
                    self.prefix = true;
                    continue;
                }
                self.high = Some(0);
            }
            if !self.wide.is_empty() || !c.is_ascii() {
                self.in_word = false;
                self.wide.push(c);
                match std::str::from_utf8(&self.wide) {
                    Ok(wide) => {
                        let ch = wide.chars().next().unwrap_or_default();
                        ensure!(ch.is_whitespace(), "{ch:?} is not a hex digit");
                        ensure!(!self.prefix, "0x with no hex digit after it");
                        self.wide.clear();
                    }
                    // A character is at most four bytes long.
                    Err(e) if e.error_len().is_none() && self.wide.len() < 4 => {}
                    Err(_) => bail!("the input is not text (a byte {:#04x})", self.wide[0]),
                }
                continue;
            }
            if char::from(c).is_whitespace() || matches!(c, b':' | b',') {
                ensure!(!self.prefix, "0x with no hex digit after it");
                self.in_word = false;
                continue;
            }
            if c == b'0' && !self.in_word && self.high.is_none() {
                self.in_word = true;
                self.zero = true;
                continue;
            }
            self.in_word = true;
            let Some(digit) = char::from(c).to_digit(16) else {
                bail!("{:?} is not a hex digit", char::from(c));
            };
            self.prefix = false;
            match self.high.take() {
                Some(high) => bytes.push(high << 4 | digit as u8),
                None => self.high = Some(digit as u8),
            }
        }
        Ok(())
    }

    fn finish(&self) -> anyhow::Result<()> {
        ensure!(self.wide.is_empty(), "the input ends within a character");
        ensure!(!self.prefix, "0x with no hex digit after it");
        ensure!(self.high.is_none() && !self.zero, "an odd number of hex digits");
        Ok(())
    }
}

/// A stream's FEC blocks (docs/spec.md 2.7) put together from its units, as a receiving data link does: 16
/// units a block, a unit's place in its block being its index (from the stream's start or its last ordered
/// set) modulo 16; each whole block is checked and corrected, and its 15 flits go on (the check unit does
/// not).
pub(crate) struct FecBlocks {
    block: link_dl::fec::Block,
    have: usize,
    /// Blocks read whole.
    pub(crate) blocks: u64,
    /// Bytes the code corrected.
    pub(crate) corrected: u64,
    /// Blocks it could not correct (left as received: their packets' CRC tells).
    pub(crate) uncorrectable: u64,
    /// Units dropped out of step with the blocks (a block's units came in out of order, or a block was
    /// left unfinished where the stream went on).
    pub(crate) out_of_step: u64,
}

/// The flits of a FEC block.
pub(crate) const FEC_FLITS: usize = link_dl::fec::DATA_LEN / FLIT_LEN;

impl Default for FecBlocks {
    fn default() -> Self {
        Self::new()
    }
}

impl FecBlocks {
    pub(crate) fn new() -> Self {
        FecBlocks {
            block: [0; link_dl::fec::BLOCK_LEN],
            have: 0,
            blocks: 0,
            corrected: 0,
            uncorrectable: 0,
            out_of_step: 0,
        }
    }

    /// The unit at `index`: once it completes a block, the block's flits, corrected where the code could,
    /// and whether it could.
    pub(crate) fn push(&mut self, index: u64, unit: &Flit) -> Option<([Flit; FEC_FLITS], bool)> {
        let position = (index % (link_dl::fec::BLOCK_LEN / FLIT_LEN) as u64) as usize;
        if position != self.have {
            self.out_of_step += self.have as u64;
            self.have = 0;
            if position != 0 {
                self.out_of_step += 1;
                return None;
            }
        }
        self.block[position * FLIT_LEN..][..FLIT_LEN].copy_from_slice(unit);
        self.have += 1;
        if self.have * FLIT_LEN < link_dl::fec::BLOCK_LEN {
            return None;
        }
        self.have = 0;
        self.blocks += 1;
        let corrected = match link_dl::fec::decode(&mut self.block) {
            Ok(c) => {
                self.corrected += u64::from(c.symbols);
                true
            }
            Err(_) => {
                self.uncorrectable += 1;
                false
            }
        };
        let mut flits = [[0u8; FLIT_LEN]; FEC_FLITS];
        for (flit, bytes) in flits.iter_mut().zip(self.block.chunks_exact(FLIT_LEN)) {
            flit.copy_from_slice(bytes);
        }
        Some((flits, corrected))
    }

    /// The link left L0: a block begun is dropped, as the data link drops it (no damage: it replays).
    pub(crate) fn restart(&mut self) {
        self.have = 0;
    }

    /// Ordered sets came inside the stream: a block begun is dropped and its units counted out of step
    /// (a transmitter keeps ordered sets between blocks); whether one was.
    pub(crate) fn cut(&mut self) -> bool {
        let have = std::mem::take(&mut self.have);
        self.out_of_step += have as u64;
        have > 0
    }

    /// What the blocks came to, as JSON.
    pub(crate) fn summary(&self) -> Value {
        json!({"blocks": self.blocks, "corrected_bytes": self.corrected,
               "uncorrectable_blocks": self.uncorrectable, "units_out_of_step": self.out_of_step})
    }
}

/// Units before `dl decode --fec` finds where the blocks start: 16 blocks' worth.
const ALIGN_UNITS: usize = 16 * 16;

/// Uncorrectable blocks in a row after which `dl decode --fec` takes the blocks to be out of step (a unit
/// lost or repeated in a dump) and looks for their start again. Fewer may be a burst of errors.
const REALIGN_AFTER_BAD_BLOCKS: u32 = 3;

/// `dl decode --fec`'s stream, which may start anywhere in a block (a board's dump): the first
/// [`ALIGN_UNITS`] units are held until the blocks' start is found, then every block is read. After
/// [`REALIGN_AFTER_BAD_BLOCKS`] uncorrectable blocks in a row the start is looked for again in the next
/// units, as at first: a unit lost or repeated in the dump puts every block after it out of step, which a
/// data link would mend at the next ordered set, which a dump of units does not hold.
struct FecStream {
    blocks: FecBlocks,
    /// Whether the blocks' start is being looked for (at first, and after blocks out of step): the units
    /// are held meanwhile.
    searching: bool,
    held: Vec<Flit>,
    /// Units before the first whole block, once found.
    offset: Option<usize>,
    /// The index of the next unit since the blocks' start was last found.
    index: u64,
    /// Uncorrectable blocks in a row.
    bad_in_row: u32,
    /// Times the start was looked for again, and the units left out before it each time.
    realignments: u64,
    units_skipped_realigning: u64,
}

impl Default for FecStream {
    fn default() -> Self {
        FecStream {
            blocks: FecBlocks::new(),
            searching: true,
            held: Vec::new(),
            offset: None,
            index: 0,
            bad_in_row: 0,
            realignments: 0,
            units_skipped_realigning: 0,
        }
    }
}

impl FecStream {
    /// The next unit; the flits of each block it completes go to `flit`.
    fn push(&mut self, unit: Flit, flit: &mut impl FnMut(Flit) -> anyhow::Result<()>) -> anyhow::Result<()> {
        if !self.searching {
            return self.feed(unit, flit);
        }
        self.held.push(unit);
        if self.held.len() < ALIGN_UNITS {
            return Ok(());
        }
        self.align(flit)
    }

    /// The end of the input: if it was too short to hold the units the search takes, search what came.
    fn finish(&mut self, flit: &mut impl FnMut(Flit) -> anyhow::Result<()>) -> anyhow::Result<()> {
        if !self.searching {
            return Ok(());
        }
        self.align(flit)
    }

    /// Find where the blocks start in the units held, and read them from there.
    fn align(&mut self, flit: &mut impl FnMut(Flit) -> anyhow::Result<()>) -> anyhow::Result<()> {
        let offset = block_start(&self.held);
        if self.offset.is_none() {
            self.offset = Some(offset);
        } else {
            self.realignments += 1;
            self.units_skipped_realigning += offset as u64;
        }
        self.searching = false;
        self.index = 0;
        self.blocks.restart();
        for unit in std::mem::take(&mut self.held).into_iter().skip(offset) {
            self.feed(unit, flit)?;
        }
        Ok(())
    }

    fn feed(&mut self, unit: Flit, flit: &mut impl FnMut(Flit) -> anyhow::Result<()>) -> anyhow::Result<()> {
        if self.searching {
            // Out of step: the rest of the held units wait for the search.
            self.held.push(unit);
            return Ok(());
        }
        self.index += 1;
        let Some((flits, corrected)) = self.blocks.push(self.index - 1, &unit) else {
            return Ok(());
        };
        self.bad_in_row = if corrected { 0 } else { self.bad_in_row + 1 };
        if self.bad_in_row >= REALIGN_AFTER_BAD_BLOCKS {
            self.bad_in_row = 0;
            self.searching = true;
        }
        flits.into_iter().try_for_each(flit)
    }
}

/// Where FEC blocks start in `units`: the offset, 0 to 15, at which the most blocks check with nothing to
/// correct, leaving out blocks of all zeros (idle, a codeword at any offset); the first such offset, and
/// 0 when none checks.
fn block_start(units: &[Flit]) -> usize {
    let per_block = link_dl::fec::BLOCK_LEN / FLIT_LEN;
    let clean = |offset: usize| {
        (units.get(offset..).unwrap_or_default().chunks_exact(per_block))
            .filter(|block| {
                let mut bytes: link_dl::fec::Block = [0; link_dl::fec::BLOCK_LEN];
                bytes.copy_from_slice(block.as_flattened());
                bytes.iter().any(|&b| b != 0)
                    && link_dl::fec::decode(&mut bytes).is_ok_and(|c| c.symbols == 0)
            })
            .count()
    };
    (0..per_block)
        .max_by_key(|&offset| (clean(offset), std::cmp::Reverse(offset)))
        .unwrap_or(0)
}

/// Bytes to 16-byte units, a piece at a time.
#[derive(Default)]
struct Units {
    partial: Vec<u8>,
    bytes: u64,
}

impl Units {
    fn add(&mut self, bytes: &[u8]) -> Vec<Flit> {
        self.bytes += bytes.len() as u64;
        self.partial.extend_from_slice(bytes);
        let whole = self.partial.len() / FLIT_LEN * FLIT_LEN;
        let units = self.partial[..whole]
            .chunks_exact(FLIT_LEN)
            .map(|c| c.try_into().expect("chunks of 16"))
            .collect();
        self.partial.drain(..whole);
        units
    }

    fn finish(&self) -> anyhow::Result<()> {
        // An empty capture (or an empty argument from a script) is a mistake, not a stream that checks.
        ensure!(self.bytes > 0, "the input is empty: no 16-byte unit to decode");
        ensure!(
            self.partial.is_empty(),
            "{} bytes are not a whole number of 16-byte units",
            self.bytes
        );
        Ok(())
    }
}

/// A receiver's reading of a stream of units, one unit at a time: an item (a JSON object) per packet,
/// control or identity flit, run of idle units, unit that does not parse, or run of units discarded
/// after one, in order, `at` the index of its first unit. The first unit is taken to start a packet, a
/// control flit or idle (a capture starts on a boundary). As a receiver does (`docs/spec.md` section
/// 2.4), after a unit that does not parse or a CRC that does not check, which leave it not knowing where
/// the next packet starts, the units up to the next control flit whose CRC checks are discarded (idle
/// ones aside). It holds at most one packet's units.
#[derive(Default)]
pub(crate) struct Decoder {
    /// The index of the next unit.
    at: usize,
    /// A run of idle (or, with `true`, discarded) units still going on: its first unit and length.
    run: Option<(bool, usize, usize)>,
    /// A packet whose units are still coming: its first unit, and its units so far (its header is the
    /// framing's).
    packet: Option<(usize, Vec<Flit>)>,
    /// Where the receiver is in the units (docs/spec.md 2.4).
    framing: Framing,
    /// How packets' transaction-layer field is read.
    tl: TlReading,
}

/// How a packet's transaction-layer field is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TlReading {
    /// As section 3's transactions and coherence messages.
    #[default]
    Transaction,
    /// As the simulator's GPUs write it (section 7.1).
    Sim,
    /// Not read: the field as a number (`link run` numbers its packets there).
    Raw,
}

impl TlReading {
    /// How a trace's pseudo-header names this reading, for the dissector (docs/spec.md section 7).
    pub(crate) fn layout(self) -> fabric_sim::trace::TlLayout {
        use fabric_sim::trace::TlLayout;
        match self {
            TlReading::Transaction => TlLayout::Transaction,
            TlReading::Sim => TlLayout::Simulator,
            TlReading::Raw => TlLayout::Raw,
        }
    }

    /// The reading a trace's layout byte asks for: the inverse of [`TlReading::layout`].
    pub(crate) fn of_layout(layout: fabric_sim::trace::TlLayout) -> Self {
        use fabric_sim::trace::TlLayout;
        match layout {
            TlLayout::Transaction => TlReading::Transaction,
            TlLayout::Simulator => TlReading::Sim,
            TlLayout::Raw => TlReading::Raw,
        }
    }
}

impl Decoder {
    /// A decoder reading packets' transaction-layer field as `tl` says.
    pub(crate) fn new(tl: TlReading) -> Self {
        Decoder {
            tl,
            ..Decoder::default()
        }
    }

    /// The next unit; what it completes goes to `emit`.
    pub(crate) fn push<E>(
        &mut self,
        unit: Flit,
        emit: &mut impl FnMut(Value) -> Result<(), E>,
    ) -> Result<(), E> {
        let at = self.at;
        self.at += 1;
        let framed = self.framing.push(&unit);
        if let Some((_, units)) = &mut self.packet {
            units.push(unit);
            if let Framed::Last(header) = framed {
                if let Some((first, units)) = self.packet.take() {
                    return self.item(packet(first, &units, header, self.tl).0, emit);
                }
            }
            return Ok(());
        }
        // Idle and discarded units are counted in runs.
        let discarding = match framed {
            Framed::Idle => Some(false),
            Framed::Discarded => Some(true),
            _ => None,
        };
        if let Some((run_discarding, first, units)) = self.run {
            if discarding == Some(run_discarding) {
                self.run = Some((run_discarding, first, units + 1));
                return Ok(());
            }
            self.end_run(emit)?;
        }
        if let Some(discarding) = discarding {
            self.run = Some((discarding, at, 1));
            return Ok(());
        }
        let item = match framed {
            Framed::Control(Control::Ident(ident)) => {
                json!({"at": at, "kind": "ident", "node": format!("{:016x}", ident.node),
                       "port": ident.port, "ok": true})
            }
            Framed::Control(Control::Flow(c)) => {
                json!({"at": at, "kind": "control", "type": format!("{:?}", c.kind),
                       "ack": c.ack.get(), "credits": c.credits, "ok": true})
            }
            Framed::Header(header) if header.payload_flits > 0 => {
                let mut units = Vec::with_capacity(1 + usize::from(header.payload_flits));
                units.push(unit);
                self.packet = Some((at, units));
                return Ok(());
            }
            Framed::Header(header) => packet(at, &[unit], header, self.tl).0,
            Framed::Lost(e) => malformed(at, &e),
            // Runs are counted above, and payload flits go to their packet.
            Framed::Idle | Framed::Discarded | Framed::Payload | Framed::Last(_) => return Ok(()),
        };
        self.item(item, emit)
    }

    /// The end of the input: a run ends, and a packet still coming was cut short.
    pub(crate) fn finish<E>(&mut self, emit: &mut impl FnMut(Value) -> Result<(), E>) -> Result<(), E> {
        self.end_run(emit)?;
        match (self.packet.take(), self.framing) {
            (Some((first, units)), Framing::Packet { header, .. }) => {
                self.item(packet(first, &units, header, self.tl).0, emit)
            }
            _ => Ok(()),
        }
    }

    /// The stream starts over (the link retrained, and the data link with it): as [`Decoder::finish`],
    /// and the next unit starts a packet, a control flit or idle, whatever came before. Units are still
    /// numbered on from here.
    pub(crate) fn restart<E>(&mut self, emit: &mut impl FnMut(Value) -> Result<(), E>) -> Result<(), E> {
        self.finish(emit)?;
        self.framing = Framing::Header;
        Ok(())
    }

    fn end_run<E>(&mut self, emit: &mut impl FnMut(Value) -> Result<(), E>) -> Result<(), E> {
        match self.run.take() {
            Some((true, at, units)) => {
                emit(json!({"at": at, "kind": "discarded", "units": units, "ok": false}))
            }
            Some((false, at, units)) => emit(json!({"at": at, "kind": "idle", "units": units, "ok": true})),
            None => Ok(()),
        }
    }

    /// Emit `item`. A packet whose CRC does not check, or a unit that does not parse, loses the framing;
    /// a transaction-layer header the receiver refuses does not (the data link took the packet).
    fn item<E>(&mut self, item: Value, emit: &mut impl FnMut(Value) -> Result<(), E>) -> Result<(), E> {
        if item["crc_ok"] == false {
            self.framing.lose();
        }
        emit(item)
    }
}

fn malformed(at: usize, error: &dyn std::fmt::Display) -> Value {
    json!({"at": at, "kind": "malformed", "error": error.to_string(), "ok": false})
}

/// The packet whose header flit is `units[0]`, parsed as `header` (cut short if `units` are fewer than it
/// announces), its transaction-layer header read as `tl` says, and the units it takes.
fn packet(at: usize, units: &[Flit], header: PacketHeader, tl: TlReading) -> (Value, usize) {
    let len = 1 + usize::from(header.payload_flits);
    let mut item = json!({
        "at": at,
        "kind": "packet",
        "flits": len,
        "vc": header.vc.name(),
        "seq": header.seq.get(),
        "ack": header.ack.get(),
        "credit_vc": header.credit_vc.name(),
        "credit": header.credit,
        "tl": format!("{:015x}", header.tl),
    });
    if units.len() < len {
        item["error"] = json!(format!("cut short: {} of its {len} flits", units.len()));
        item["ok"] = json!(false);
        return (item, units.len());
    }
    let packet = &units[..len];
    let crc = u32::from_le_bytes(packet[0][12..].try_into().expect("4 bytes"));
    item["crc"] = json!(format!("{crc:08x}"));
    let crc_ok = check_packet_crc(packet.as_flattened()).is_ok();
    item["crc_ok"] = json!(crc_ok);
    // The transaction layer's reading: its header, and whether a receiver would take the packet.
    let tl_error = if tl == TlReading::Raw {
        None
    } else if tl == TlReading::Sim {
        let (simulated, error) = simulated(header.tl);
        item["simulated"] = simulated;
        error
    } else if coherence_wire::is_coherence(header.tl) {
        match coherence_wire::decode::<{ coherence_wire::LINE_BYTES }>(header.vc, header.tl, &packet[1..]) {
            Ok(envelope) => {
                item["coherence"] = coherence(&envelope);
                None
            }
            Err(e) => Some(e.to_string()),
        }
    } else {
        if let Ok(h) = Header::parse(header.tl) {
            item["transaction"] = transaction(&h, packet.get(1));
        }
        let parsed = Tlp::parse(header.vc, header.tl, &packet[1..]);
        match &parsed {
            // What the flits after the header say: a partial write's enabled bytes, an atomic's operands.
            Ok(Tlp::PostedWrite(w)) => {
                if let Some(mask) = w.enables {
                    item["transaction"]["enabled_bytes"] = json!(mask.count_ones());
                    item["transaction"]["first_enabled"] = json!(mask.trailing_zeros());
                }
            }
            Ok(Tlp::Atomic(a)) => {
                let digits = usize::from(a.size) * 2;
                item["transaction"]["size"] = json!(a.size);
                item["transaction"]["operand"] = json!(format!("{:0digits$x}", a.operand));
                if a.op == link_tl::packet::AtomicOp::CompareSwap {
                    item["transaction"]["compare"] = json!(format!("{:0digits$x}", a.compare));
                }
            }
            _ => {}
        }
        parsed.err().map(|e| e.to_string())
    };
    if let Some(e) = &tl_error {
        item["tl_error"] = json!(e);
    }
    item["ok"] = json!(crc_ok && tl_error.is_none());
    (item, len)
}

/// The simulator's transaction-layer header (`docs/spec.md` section 7.1): the opcode and its name, the
/// destination endpoint (or the multicast group), the source, the offset, and what a returned packet
/// or a tree's credit carries in it; and what is wrong with it, if the simulator sends no such header.
fn simulated(tl: u64) -> (Value, Option<String>) {
    use fabric_sim::collective::tree::{Credit, OP_CREDIT};
    use fabric_sim::wire;
    let (op, offset) = (wire::opcode(tl), wire::offset(tl));
    let (dest, source, group) = wire::route_fields(tl);
    let mut fields = json!({
        "opcode": format!("{op:02x}"),
        "name": wire::opcode_name(op),
        "source": source,
        "offset": format!("{offset:08x}"),
    });
    match group {
        Some(group) => fields["group"] = json!(group),
        None => fields["dest"] = json!(dest),
    }
    let mut error = None;
    if op == wire::OP_BOUNCE {
        let original = wire::unbounce(tl);
        let returned = wire::opcode(original);
        fields["returned"] = json!({
            "opcode": format!("{returned:02x}"),
            "name": wire::opcode_name(returned),
            "offset": format!("{:08x}", wire::offset(original)),
        });
        if group.is_some() {
            error = Some(
                "a returned packet with the multicast bit set, which the simulator does not send".into(),
            );
        } else if wire::opcode_name(returned).is_none() || returned == wire::OP_BOUNCE {
            error = Some(format!(
                "a returned packet of opcode {returned:02X}h, which the simulator does not send"
            ));
        }
    } else if op == OP_CREDIT {
        let credit = Credit::of(offset);
        if credit.offset() != offset {
            error = Some(format!(
                "a tree credit's offset {offset:08X}h has bits above its fields set"
            ));
        }
        fields["credit"] = json!({
            "tree": credit.tree,
            "direction": if credit.direction == 0 { "up" } else { "down" },
            "count": credit.count,
        });
    }
    if wire::opcode_name(op).is_none() {
        error = Some(format!("opcode {op:02X}h is not one the simulator sends"));
    }
    (fields, error)
}

/// A transaction-layer header's fields (`docs/spec.md` section 3.2): the opcode's name and the
/// destination (for a completion, the requester), then a request's address, in hex as the other hex
/// fields are (lower case, the field's full width: 47 bits), a message's code and index, or a
/// completion's completer, tag, status, and the offset and length of its data.
fn transaction(header: &Header, extension: Option<&Flit>) -> Value {
    match *header {
        // A non-posted request's extension flit gives address bits 3:0, its requester, tag and length.
        Header::Request { opcode, dest, addr } => {
            let extension = extension
                .filter(|_| opcode.vc() == Vc::Request)
                .and_then(|flit| Extension::parse(flit).ok());
            let first_byte = extension.map_or(0, |x| u64::from(x.first_byte));
            let mut fields = json!({
                "opcode": format!("{opcode:?}"),
                "dest": dest,
                "address": format!("{:012x}", addr | first_byte),
            });
            if let Some(x) = extension {
                fields["requester"] = json!(x.requester);
                fields["tag"] = json!(x.tag);
                fields["length"] = json!(x.len);
            }
            fields
        }
        // Its extension flit gives its source, its value and the length of any data after it.
        Header::Message { dest, code, index } => {
            let mut fields = json!({
                "opcode": "Message",
                "dest": dest,
                "code": format!("{code:?}"),
                "index": index,
            });
            if let Some(x) = extension.and_then(|flit| Extension::parse(flit).ok()) {
                fields["source"] = json!(x.requester);
                fields["value"] = json!(format!("{:016x}", x.value));
                fields["length"] = json!(x.len);
            }
            fields
        }
        Header::Completion(c) => json!({
            "opcode": "Completion",
            "dest": c.requester,
            "completer": c.completer,
            "tag": c.tag,
            "status": format!("{:?}", c.status),
            "offset": c.offset,
            "length": c.len,
        }),
    }
}

/// A coherence message's fields (`docs/spec.md` section 3.9): its name (a request's, snoop's or
/// response's kind, `GO-S` for a GO granting Shared), whether it carries the line's data, its endpoints,
/// its line in hex (the field's 29 bits) and a snoop's phase.
fn coherence(envelope: &Envelope<{ coherence_wire::LINE_BYTES }>) -> Value {
    let message = envelope.message;
    let (name, data) = match message {
        Message::Request { kind, .. } => (format!("{kind:?}"), false),
        Message::Snoop { kind, .. } => (format!("{kind:?}"), false),
        Message::SnoopResponse { kind, .. } => (format!("{kind:?}"), false),
        Message::SnoopResponseData { kind, .. } => (format!("{kind:?}"), true),
        Message::Go { state, .. } => (format!("GO-{}", state.letter()), false),
        Message::GoData { state, .. } => (format!("GO-{}", state.letter()), true),
        Message::GoWritePull { .. } => ("GO_WritePull".to_owned(), false),
        Message::WriteBack { .. } => ("WriteBack".to_owned(), true),
    };
    let mut fields = json!({
        "opcode": format!("{:02x}", message.opcode()),
        "message": name,
        "data": data,
        "source": envelope.source,
        "dest": envelope.dest,
        "line": format!("{:08x}", message.line()),
    });
    if let Message::Snoop { phase, .. } = message {
        fields["phase"] = json!(u8::from(phase));
    }
    fields
}

/// A coherence message in words: `RdOwn from endpoint 3 to endpoint 1, line 2Ah`.
fn coherence_text(c: &Value) -> String {
    let s = |key: &str| c[key].as_str().unwrap_or_default().to_owned();
    let line = u32::from_str_radix(&s("line"), 16).unwrap_or_default();
    let mut text = format!(
        "{}{} from endpoint {} to endpoint {}, line {line:X}h",
        s("message"),
        if c["data"] == true { " with data" } else { "" },
        c["source"],
        c["dest"]
    );
    if let Some(phase) = c.get("phase") {
        text += &format!(", phase {phase}");
    }
    text
}

/// A transaction in words, addresses in hex as the spec writes them (`12345680h`).
fn transaction_text(t: &Value) -> String {
    let s = |key: &str| t[key].as_str().unwrap_or_default().to_owned();
    match t["opcode"].as_str() {
        Some("Message") => {
            let mut line = format!("Message {} {} to endpoint {}", s("code"), t["index"], t["dest"]);
            if t.get("source").is_some() {
                line += &format!(
                    ", from endpoint {}, value {}h",
                    t["source"],
                    s("value").to_uppercase()
                );
                if t["length"] != 0 {
                    line += &format!(", {} bytes", t["length"]);
                }
            }
            line
        }
        Some("Completion") => {
            let mut line = format!(
                "Completion to endpoint {} from endpoint {}, tag {}, {}",
                t["dest"],
                t["completer"],
                t["tag"],
                s("status")
            );
            if t["length"] != 0 {
                line += &format!(", {} bytes at offset {}", t["length"], t["offset"]);
            }
            line
        }
        _ => {
            let address = s("address");
            let digits = address.trim_start_matches('0');
            let mut line = format!(
                "{} to endpoint {}, address {}h",
                s("opcode"),
                t["dest"],
                if digits.is_empty() { "0" } else { digits }
            );
            if t.get("length").is_some() {
                line += &format!(
                    ", {} bytes for endpoint {}, tag {}",
                    t["length"], t["requester"], t["tag"]
                );
            }
            if t.get("enabled_bytes").is_some() {
                line += &format!(
                    ", {} bytes enabled from byte {}",
                    t["enabled_bytes"], t["first_enabled"]
                );
            }
            if t.get("operand").is_some() {
                line += &format!(", operand {}h", s("operand").to_uppercase());
            }
            if t.get("compare").is_some() {
                line += &format!(", expected {}h", s("compare").to_uppercase());
            }
            line
        }
    }
}

/// A simulator's header in words: `partial sum from endpoint 1 to endpoint 0, offset 1h`.
fn simulated_text(h: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let name = |v: &Value| match v["name"].as_str() {
        Some(name) => name.to_owned(),
        None => format!("opcode {}h", s(&v["opcode"]).to_uppercase()),
    };
    let hex = |v: &Value| format!("{:X}h", u32::from_str_radix(&s(v), 16).unwrap_or_default());
    let to = match h.get("group") {
        Some(group) => format!("group {group}"),
        None => format!("endpoint {}", h["dest"]),
    };
    // A returned packet is told by what it was, with its original offset.
    let (what, offset) = match h.get("returned") {
        Some(returned) => (format!("returned {}", name(returned)), &returned["offset"]),
        None => (name(h), &h["offset"]),
    };
    let line = format!("{what} from endpoint {} to {to}", h["source"]);
    match h.get("credit") {
        Some(c) => format!(
            "{line}: tree {}, {}, {} chunks freed",
            c["tree"],
            s(&c["direction"]),
            c["count"]
        ),
        None => format!("{line}, offset {}", hex(offset)),
    }
}

/// One line of text for an item.
/// An item as a line of text (also `link decode`'s).
pub(crate) fn text(item: &Value) -> String {
    let at = item["at"].as_u64().unwrap_or_default();
    let s = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
    match item["kind"].as_str() {
        Some("idle") => format!("{at:>6}  idle x{}", item["units"]),
        Some("discarded") => format!(
            "{at:>6}  discarded x{} (finding a packet boundary again after the error)",
            item["units"]
        ),
        Some("ident") => format!("{at:>6}  Ident   node {} port {}", s("node"), item["port"]),
        Some("control") => format!(
            "{at:>6}  {:<7} ack {} credits {}",
            s("type"),
            item["ack"],
            item["credits"]
        ),
        Some("packet") => {
            let mut line = format!(
                "{at:>6}  packet  {} flits, {} seq {} ack {}, credit {} {}, TL {}",
                item["flits"],
                s("vc"),
                item["seq"],
                item["ack"],
                s("credit_vc"),
                item["credit"],
                s("tl")
            );
            if item.get("crc").is_some() {
                let verdict = if item["crc_ok"] == true { "ok" } else { "MISMATCH" };
                line += &format!(", CRC {} {verdict}", s("crc"));
            }
            if let Some(transaction) = item.get("transaction") {
                line += &format!(": {}", transaction_text(transaction));
            }
            if let Some(coherence) = item.get("coherence") {
                line += &format!(": {}", coherence_text(coherence));
            }
            if let Some(simulated) = item.get("simulated") {
                line += &format!(": {}", simulated_text(simulated));
            }
            for key in ["tl_error", "error"] {
                if item.get(key).is_some() {
                    line += &format!(" [{}]", s(key));
                }
            }
            line
        }
        Some("fec") => format!(
            "fec: {} blocks, {} bytes corrected, {} uncorrectable, {} units out of step{}",
            item["blocks"],
            item["corrected_bytes"],
            item["uncorrectable_blocks"],
            item["units_out_of_step"],
            match item["realignments"].as_u64() {
                Some(n) if n > 0 => format!(
                    "; blocks' start found again {n} times, {} units left out",
                    item["units_skipped_realigning"]
                ),
                _ => String::new(),
            }
        ),
        _ => format!("{at:>6}  malformed: {}", s("error")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_dl::flit::{seal_packet, ControlFlit, ControlKind};
    use link_dl::seq::Seq;
    use link_dl::Vc;

    /// A stream of packets (some corrupted, some cut), control flits, idle runs and random units, from
    /// `seed`.
    fn stream(seed: u64, units: usize) -> Vec<u8> {
        let mut next = crate::test_rng::xorshift(seed);
        let mut bytes = Vec::new();
        while bytes.len() < units * FLIT_LEN {
            match next() % 6 {
                0 | 1 => {
                    let payload = (next() % 9) as u8;
                    let mut packet = vec![0u8; (1 + usize::from(payload)) * FLIT_LEN];
                    let header = PacketHeader {
                        payload_flits: payload,
                        vc: Vc::Posted,
                        seq: Seq::new((next() % 4096) as u16),
                        ack: Seq::new(0),
                        credit_vc: Vc::Request,
                        credit: 1,
                        tl: next() >> 6,
                    };
                    let (head, rest) = packet.split_at_mut(FLIT_LEN);
                    header.emit(head.try_into().unwrap()).unwrap();
                    rest.iter_mut().for_each(|b| *b = next() as u8);
                    seal_packet(&mut packet);
                    if next() % 4 == 0 {
                        let at = (next() as usize) % packet.len();
                        packet[at] ^= 1 << (next() % 8);
                    }
                    bytes.extend_from_slice(&packet);
                }
                2 => bytes.extend_from_slice(
                    &ControlFlit {
                        kind: ControlKind::Update,
                        ack: Seq::new(5),
                        credits: [64; 4],
                    }
                    .emit(),
                ),
                3 => bytes.extend(std::iter::repeat_n(0, FLIT_LEN * (1 + (next() % 5) as usize))),
                _ => bytes.extend((0..FLIT_LEN).map(|_| next() as u8)),
            }
        }
        bytes
    }

    /// The items `bytes` decode to, fed `piece` bytes at a time.
    fn decode_in_pieces(bytes: &[u8], piece: usize) -> Vec<Value> {
        decode_with(bytes, piece, false)
    }

    /// [`decode_in_pieces`], reading headers as the simulator's if `sim_header`.
    fn decode_with(bytes: &[u8], piece: usize, sim_header: bool) -> Vec<Value> {
        let mut decoder = Decoder::new(if sim_header {
            TlReading::Sim
        } else {
            TlReading::Transaction
        });
        let (mut units, mut items) = (Units::default(), Vec::new());
        let mut keep = |item: Value| -> Result<(), ()> {
            items.push(item);
            Ok(())
        };
        for chunk in bytes.chunks(piece) {
            for unit in units.add(chunk) {
                decoder.push(unit, &mut keep).unwrap();
            }
        }
        units.finish().unwrap();
        decoder.finish(&mut keep).unwrap();
        items
    }

    #[test]
    fn every_unit_is_in_exactly_one_item_however_the_input_is_cut() {
        let mut kinds = std::collections::BTreeSet::new();
        for seed in 1..40 {
            let mut bytes = stream(seed, 300);
            if seed % 2 == 0 {
                // A packet cut short by the end of the input.
                let whole = stream(seed, 1);
                bytes.extend_from_slice(&whole[..FLIT_LEN]);
            }
            let whole = decode_in_pieces(&bytes, bytes.len());
            kinds.extend(whole.iter().map(|i| {
                let cut = i["error"].as_str().is_some_and(|e| e.starts_with("cut short"));
                format!(
                    "{}{}",
                    i["kind"].as_str().unwrap(),
                    if cut { " cut short" } else { "" }
                )
            }));
            // Items follow each other with no gap and no overlap, to the last unit.
            let mut at = 0;
            for item in &whole {
                assert_eq!(item["at"], at, "seed {seed}: {item}");
                let used = match item["kind"].as_str().unwrap() {
                    "idle" | "discarded" => item["units"].as_u64().unwrap(),
                    "packet" if item.get("error").is_some() => (bytes.len() / FLIT_LEN) as u64 - at,
                    "packet" => item["flits"].as_u64().unwrap(),
                    _ => 1,
                };
                at += used;
            }
            assert_eq!(at, (bytes.len() / FLIT_LEN) as u64, "seed {seed}");
            for piece in [1, 7, 16, 100] {
                assert_eq!(
                    decode_in_pieces(&bytes, piece),
                    whole,
                    "seed {seed} in pieces of {piece}"
                );
            }
        }
        // The streams reach every kind of item, a packet cut short by the end included.
        let expected = [
            "control",
            "discarded",
            "idle",
            "malformed",
            "packet",
            "packet cut short",
        ];
        assert_eq!(kinds, expected.map(String::from).into(), "{kinds:?}");
    }

    /// The bytes of `text` after what `hex` has taken before, and the error that stopped it.
    fn converted(hex: &mut Hex, text: &[u8]) -> (Vec<u8>, Result<(), String>) {
        let mut bytes = Vec::new();
        let outcome = hex.bytes(text, &mut bytes).map_err(|e| e.to_string());
        (bytes, outcome)
    }

    #[test]
    fn hex_digits_pair_up_across_pieces_and_anything_else_is_refused() {
        let mut hex = Hex::default();
        assert_eq!(converted(&mut hex, b"0a:b"), (vec![0x0a], Ok(())));
        assert_eq!(converted(&mut hex, b"C, 1"), (vec![0xbc], Ok(())));
        assert!(hex.finish().is_err(), "one digit left over");
        assert_eq!(converted(&mut hex, b"f\n"), (vec![0x1f], Ok(())));
        hex.finish().unwrap();
        // What comes before a character that is not hex is kept.
        let (bytes, e) = converted(&mut Hex::default(), b"01 23 4g 56");
        assert_eq!(
            (bytes, e.unwrap_err()),
            (vec![0x01, 0x23], "'g' is not a hex digit".into())
        );
        let e = converted(&mut Hex::default(), "0\u{e9}".as_bytes())
            .1
            .unwrap_err();
        assert!(e.contains("'\u{e9}' is not a hex digit"), "{e}");
        assert!(converted(&mut Hex::default(), b"0\xff").1.is_err());
        // Any whitespace separates, also beyond ASCII and split between pieces (a no-break space, U+00A0,
        // is two bytes).
        let mut hex = Hex::default();
        assert_eq!(converted(&mut hex, b"0a\xc2"), (vec![0x0a], Ok(())));
        assert_eq!(
            converted(&mut hex, b"\xa0\x0b0b\xe2\x80\xa8"),
            (vec![0x0b], Ok(()))
        );
        hex.finish().unwrap();
        // A 0x prefix starts a word and a byte; a 0 that is not one is a digit.
        let mut hex = Hex::default();
        assert_eq!(converted(&mut hex, b"0x85 0X1 1 0"), (vec![0x85, 0x11], Ok(())));
        assert_eq!(converted(&mut hex, b"0 00,0x"), (vec![0x00, 0x00], Ok(())));
        assert_eq!(converted(&mut hex, b"ff"), (vec![0xff], Ok(())));
        hex.finish().unwrap();
        assert!(
            converted(&mut Hex::default(), b"10x1").1.is_err(),
            "a prefix only starts a word"
        );
        assert!(converted(&mut Hex::default(), b"1 0x1").1.is_err(), "or a byte");
        assert!(
            converted(&mut Hex::default(), b"0x 12").1.is_err(),
            "a digit follows"
        );
        let mut hex = Hex::default();
        assert_eq!(converted(&mut hex, b"0x"), (vec![], Ok(())));
        assert!(hex.finish().is_err(), "0x alone is not a byte");
        let mut hex = Hex::default();
        assert_eq!(converted(&mut hex, b"0"), (vec![], Ok(())));
        assert!(hex.finish().is_err(), "a lone 0 is one digit");
        let mut units = Units::default();
        assert_eq!(units.add(&[1; 20]).len(), 1);
        assert!(units.finish().unwrap_err().to_string().contains("20 bytes"));
    }

    /// A sealed packet on `vc` with transaction-layer header `tl` and one flit after it, `flit`.
    fn packet_with(vc: Vc, tl: u64, flit: Flit) -> Vec<u8> {
        sealed(vc, tl, &[flit])
    }

    /// A sealed packet on `vc` with transaction-layer header `tl` and `flits` after it.
    fn sealed(vc: Vc, tl: u64, flits: &[Flit]) -> Vec<u8> {
        let mut packet = vec![0u8; (1 + flits.len()) * FLIT_LEN];
        let header = PacketHeader {
            payload_flits: flits.len() as u8,
            vc,
            seq: Seq::new(7),
            ack: Seq::new(6),
            credit_vc: Vc::Request,
            credit: 0,
            tl,
        };
        header
            .emit((&mut packet[..FLIT_LEN]).try_into().unwrap())
            .unwrap();
        packet[FLIT_LEN..].copy_from_slice(flits.as_flattened());
        seal_packet(&mut packet);
        packet
    }

    /// The worked example of spec section 2.2 reads as the spec says.
    #[test]
    fn the_packet_of_spec_section_2_2_reads_as_the_spec_says() {
        let spec = include_str!("../../../docs/spec.md");
        let (flit, words) = (
            "61 01 40 38 48 20 10 00 00 00 12 30 e0 82 6a c8",
            "PostedWrite to endpoint 2, address 12300h",
        );
        assert!(spec.contains(flit) && spec.contains(&format!("`{words}`")));
        let mut bytes = Vec::new();
        Hex::default().bytes(flit.as_bytes(), &mut bytes).unwrap();
        bytes.extend(0u8..128);
        let items = decode_in_pieces(&bytes, 16);
        assert_eq!((items.len(), &items[0]["ok"]), (1, &json!(true)), "{items:?}");
        assert!(
            text(&items[0]).ends_with(&format!("ok: {words}")),
            "{}",
            text(&items[0])
        );
    }

    /// Coherence messages are named as spec section 3.9 names them, with their endpoints, line and a
    /// snoop's phase; one on the wrong channel is refused.
    #[test]
    fn coherence_messages_are_read_as_section_3_9_writes_them() {
        use link_tl::coherence::{encode, CacheState, RequestKind, SnoopKind};
        let envelope = |source, dest, message| Envelope::<{ coherence_wire::LINE_BYTES }> {
            source,
            dest,
            message,
        };
        let cases = [
            (
                envelope(
                    3,
                    1,
                    Message::Request {
                        line: 0x2a,
                        kind: RequestKind::RdOwn,
                    },
                ),
                "RdOwn from endpoint 3 to endpoint 1, line 2Ah",
            ),
            (
                envelope(
                    1,
                    3,
                    Message::Snoop {
                        line: 0x2a,
                        kind: SnoopKind::SnpInv,
                        phase: true,
                    },
                ),
                "SnpInv from endpoint 1 to endpoint 3, line 2Ah, phase 1",
            ),
            (
                envelope(
                    1,
                    3,
                    Message::GoData {
                        line: 0x1fff_ffff,
                        state: CacheState::Modified,
                        data: [7; 64],
                    },
                ),
                "GO-M with data from endpoint 1 to endpoint 3, line 1FFFFFFFh",
            ),
            (
                envelope(1, 2, Message::GoWritePull { line: 5 }),
                "GO_WritePull from endpoint 1 to endpoint 2, line 5h",
            ),
        ];
        for (envelope, words) in cases {
            let packet = encode(&envelope).unwrap();
            let items = decode_in_pieces(&sealed(packet.vc(), packet.tl(), packet.payload()), 16);
            assert_eq!(items.len(), 1, "{items:?}");
            let line = text(&items[0]);
            assert!(line.ends_with(&format!(": {words}")), "{line}");
            assert_eq!(items[0]["ok"], true, "{line}");
        }
        // The spec's worked example: H = 0300_0B00_0000_002Ah.
        let items = decode_in_pieces(
            &sealed(
                Vc::Request,
                0x0300_0B00_0000_002A,
                &[encode(&cases[0].0).unwrap().payload()[0]],
            ),
            16,
        );
        assert_eq!(items[0]["coherence"]["message"], "RdOwn");
        assert_eq!(items[0]["coherence"]["line"], "0000002a");
        // A request on the snoop channel is refused, as a receiver would.
        let request = encode(&cases[0].0).unwrap();
        let items = decode_in_pieces(&sealed(Vc::Snoop, request.tl(), request.payload()), 16);
        assert_eq!(items[0]["ok"], false);
        assert!(
            items[0]["tl_error"].as_str().unwrap().contains("snoop channel"),
            "{:?}",
            items[0]
        );
    }

    #[test]
    fn sim_headers_read_as_the_simulator_writes_them() {
        use fabric_sim::collective::tree::{Credit, OP_CREDIT};
        use fabric_sim::collective::OP_PARTIAL;
        use fabric_sim::wire::{bounce, header, NVLS_ENGINE, OP_REDUCE_READ, OP_WRITE};
        let data = header(OP_WRITE, 5, 3, false, 0x1234);
        let credit = Credit {
            tree: 1,
            direction: 0,
            count: 2,
        };
        let cases = [
            (data, "data from endpoint 3 to endpoint 5, offset 1234h", true),
            (
                bounce(data).unwrap(),
                "returned data from endpoint 5 to endpoint 3, offset 1234h",
                true,
            ),
            (
                header(OP_PARTIAL, 0, 1, false, 4),
                "partial sum from endpoint 1 to endpoint 0, offset 4h",
                true,
            ),
            (
                header(OP_REDUCE_READ, NVLS_ENGINE, 2, true, 9),
                "ld_reduce from endpoint 2 to group 63, offset 9h",
                true,
            ),
            (
                header(OP_CREDIT, 2, 1, false, credit.offset()),
                "tree credit from endpoint 1 to endpoint 2: tree 1, up, 2 chunks freed",
                true,
            ),
            (
                header(0x1F, 2, 1, false, 0),
                "opcode 1Fh from endpoint 1 to endpoint 2, offset 0h [opcode 1Fh is not one the simulator sends]",
                false,
            ),
            (
                header(OP_CREDIT, 2, 1, false, credit.offset() | 1 << 30),
                "tree credit from endpoint 1 to endpoint 2: tree 1, up, 2 chunks freed [a tree credit's offset \
                 44000002h has bits above its fields set]",
                false,
            ),
            (
                header(fabric_sim::wire::OP_BOUNCE, 3, 5, true, 0x1000_0000),
                "returned data from endpoint 5 to group 3, offset 0h [a returned packet with the multicast bit \
                 set, which the simulator does not send]",
                false,
            ),
        ];
        for (tl, words, ok) in cases {
            let items = decode_with(&packet_with(Vc::Posted, tl, [0; FLIT_LEN]), 5, true);
            assert_eq!(items.len(), 1, "{items:?}");
            let line = text(&items[0]);
            assert!(line.ends_with(&format!(": {words}")), "{line}");
            assert_eq!(items[0]["ok"], ok, "{line}");
            assert_eq!(
                items[0]["simulated"]["source"],
                u64::from(fabric_sim::wire::route_fields(tl).1)
            );
        }
        // Whatever the header, nothing panics and every unit is decoded.
        for seed in 1..20 {
            let bytes = stream(seed, 300);
            assert_eq!(
                decode_with(&bytes, 7, true).len(),
                decode_with(&bytes, 7, false).len()
            );
        }
    }

    /// A non-posted request's address includes bits 3:0 from its extension flit, and the text gives its
    /// length, requester and tag (the header alone gave 1070h for a read at 1075h).
    #[test]
    fn a_requests_address_takes_its_low_bits_from_the_extension() {
        use link_tl::header::Opcode;
        let tl = Header::Request {
            opcode: Opcode::Read,
            dest: 2,
            addr: 0x1070,
        }
        .emit()
        .unwrap();
        let extension = Extension {
            requester: 9,
            tag: 4,
            first_byte: 5,
            len: 8,
            value: 0,
        }
        .emit()
        .unwrap();
        let items = decode_in_pieces(&packet_with(Vc::Request, tl, extension), 16);
        assert_eq!(
            items[0]["transaction"]["address"], "000000001075",
            "{:?}",
            items[0]
        );
        assert!(
            text(&items[0]).ends_with(": Read to endpoint 2, address 1075h, 8 bytes for endpoint 9, tag 4"),
            "{}",
            text(&items[0])
        );
    }
}
