//! `linkctl phy encode` and `decode` with `--code 128b130b`: one lane's blocks (a sync header and 16
//! symbols), scrambled with the lane's LFSR as docs/spec.md section 1.3 says, for checking a transmitter
//! or a capture against the specification.
//!
//! Blocks are written one per line as text (the header H1H0 in binary, then the 16 symbols on the wire in
//! hex, symbol 0 first) or, with `--packed`, as the raw wire bits packed as in spec 1.3.1: what a capture
//! of the serial lane holds.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufWriter, Read, Write};

use anyhow::{bail, Context};
use link_phy::code128b130b::block::{from_wire, to_wire};
use link_phy::code128b130b::ordered_set::skp_lfsr;
use link_phy::code128b130b::{Block, LaneDecoder, LaneEncoder, OrderedSetBlock, SyncHeader, BLOCK_SYMBOLS};

use super::bits::{packed_stdin, words, BitWriter};
use super::code::read_some;
use super::training_set;

/// Bytes read from stdin at a time: whole blocks of data, and whole 8-byte words of packed bits.
const CHUNK: usize = 64 * 1024;

/// The longest line a block may be written on (its text is 35 characters), so that what is held of a line
/// stays small whatever the input.
const LONGEST_LINE: usize = 1024;

/// What `--code 128b130b` takes beyond the line code.
pub struct BlockOptions {
    /// The lane whose scrambler seed (lane mod 8) is used.
    pub lane: usize,
    /// Raw wire bits instead of a block per line.
    pub packed: bool,
}

/// Encode stdin's bytes as data blocks, 16 bytes each, after an EIEOS and an SDS if `stream_start`.
pub fn encode(options: &BlockOptions, stream_start: bool) -> anyhow::Result<()> {
    let mut encoder = LaneEncoder::new(options.lane);
    let mut out = BlockWriter::new(BufWriter::new(io::stdout().lock()), options.packed);
    if stream_start {
        for set in [OrderedSetBlock::Eieos, OrderedSetBlock::Sds] {
            out.block(encoder.encode_block(&set.to_block()))?;
        }
    }
    let mut input = io::stdin().lock();
    let mut bytes = vec![0u8; CHUNK];
    let mut offset = 0usize;
    loop {
        let n = read_some(&mut input, &mut bytes).context("reading stdin")?;
        let whole = n - n % BLOCK_SYMBOLS;
        for payload in bytes[..whole].chunks_exact(BLOCK_SYMBOLS) {
            let payload: [u8; BLOCK_SYMBOLS] = payload.try_into().unwrap_or_default();
            out.block(encoder.encode_block(&Block::data(payload)))?;
        }
        offset += n;
        // A short read is the end of the input.
        if n < CHUNK {
            out.finish()?;
            if whole < n {
                bail!(
                    "the input is {offset} bytes, which is not a whole number of 16-byte data blocks: the \
                     {} bytes after the last whole block were not encoded",
                    n - whole
                );
            }
            return Ok(());
        }
    }
}

/// Decode blocks from stdin, written as `output` says. A packed capture that is not `aligned` is
/// searched for an EIEOS first, as a receiver does; one that is `invert`ed has every bit inverted first.
/// Decode blocks from stdin; whether any had an undefined sync header or was a SKP ordered set that
/// disagrees with the receiver.
pub fn decode(options: &BlockOptions, output: Output, aligned: bool, invert: bool) -> anyhow::Result<bool> {
    let mut decoder = if aligned || !options.packed {
        LaneDecoder::aligned(options.lane)
    } else {
        LaneDecoder::new(options.lane)
    };
    let mut report = Report {
        out: BufWriter::new(io::stdout().lock()),
        output,
        delivered: 0,
        errors: false,
    };
    let outcome = if options.packed {
        decode_packed(&mut packed_stdin(invert), &mut decoder, &mut report)
    } else {
        decode_text(&mut io::stdin().lock(), &mut decoder, &mut report)
    };
    report.out.flush().context("writing stdout")?;
    outcome.map(|()| report.errors)
}

/// Raw wire bits, bit 0 of the first byte first.
fn decode_packed(
    input: &mut impl Read,
    decoder: &mut LaneDecoder,
    report: &mut Report<impl Write>,
) -> anyhow::Result<()> {
    let mut bytes = vec![0u8; CHUNK];
    let mut bits_read = 0u64;
    loop {
        let n = read_some(input, &mut bytes).context("reading stdin")?;
        for (word, count) in words(&bytes[..n]) {
            // Taken at once: the receiver holds only a few blocks' worth of bits.
            decoder.push_bits(word, count);
            bits_read += u64::from(count);
            report.take(decoder)?;
        }
        if n < CHUNK {
            break;
        }
    }
    if report.delivered == 0 && bits_read >= u64::from(link_phy::code128b130b::BLOCK_BITS) {
        bail!(
            "no EIEOS in the {bits_read} bits read, so no block boundary was found (give --aligned if the \
             capture starts at one)"
        );
    }
    Ok(())
}

/// A block per line: the header H1H0 in binary, then 32 hex digits. Blank lines and lines starting with
/// `#` are skipped.
fn decode_text(
    input: &mut impl BufRead,
    decoder: &mut LaneDecoder,
    report: &mut Report<impl Write>,
) -> anyhow::Result<()> {
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        let n = input
            .by_ref()
            .take(LONGEST_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .context("reading stdin")?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        if line.len() > LONGEST_LINE {
            bail!("line {number}: longer than {LONGEST_LINE} characters");
        }
        let Some((header, payload)) = parse_block_line(&line).with_context(|| format!("line {number}"))?
        else {
            continue;
        };
        let (first, last) = to_wire(header, payload);
        decoder.push_bits(first as u64, 64);
        decoder.push_bits((first >> 64) as u64, 64);
        decoder.push_bits(u64::from(last), 2);
        report.take(decoder)?;
    }
}

/// The header bits (H0 in bit 0) and the scrambled payload (symbol 0 in the low byte) of a block's line,
/// or `None` for a blank line or a comment.
fn parse_block_line(line: &[u8]) -> anyhow::Result<Option<(u8, u128)>> {
    let Ok(text) = std::str::from_utf8(line) else {
        bail!("not text (expected a sync header and 32 hex digits)");
    };
    let mut tokens = text.split_whitespace();
    let header = match tokens.next() {
        None => return Ok(None),
        Some(t) if t.starts_with('#') => return Ok(None),
        Some(t) => t,
    };
    // Written H1H0, so read as a binary number it is the header with H0 in bit 0.
    let header = match header {
        "00" | "01" | "10" | "11" => u8::from_str_radix(header, 2).unwrap_or_default(),
        other => bail!("{other:?} is not a sync header: two binary digits H1H0 (10 data, 01 ordered set)"),
    };
    let Some(symbols) = tokens.next() else {
        bail!("a sync header without its 16 symbols");
    };
    if symbols.len() != 2 * BLOCK_SYMBOLS || !symbols.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("{symbols:?} is not 16 symbols: 32 hex digits, symbol 0 first");
    }
    if let Some(extra) = tokens.next() {
        bail!("{extra:?} after the block's 16 symbols");
    }
    let mut payload = [0u8; BLOCK_SYMBOLS];
    for (k, symbol) in payload.iter_mut().enumerate() {
        *symbol = u8::from_str_radix(&symbols[2 * k..2 * k + 2], 16).unwrap_or_default();
    }
    Ok(Some((header, u128::from_le_bytes(payload))))
}

/// How decoded blocks are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The data blocks' bytes, raw.
    Bytes,
    /// A line of text per block.
    Lines,
    /// A JSON object per block, a line each.
    Json,
}

/// Where decoded blocks go.
struct Report<W: Write> {
    out: W,
    output: Output,
    /// Blocks delivered so far.
    delivered: u64,
    /// Whether a block had an undefined sync header or a SKP ordered set disagreed with the receiver.
    errors: bool,
}

impl<W: Write> Report<W> {
    /// Every block the decoder has ready; its first error ends the decoding.
    fn take(&mut self, decoder: &mut LaneDecoder) -> anyhow::Result<()> {
        loop {
            let before = *decoder.counters();
            let Some(block) = decoder.pop() else {
                return Ok(());
            };
            let block = block?;
            let after = *decoder.counters();
            let decoded = Decoded {
                number: self.delivered,
                block,
                undefined_header: after.invalid_sync_headers > before.invalid_sync_headers,
                skp: SkpCheck {
                    symbols: decoder.last_skp_symbols(),
                    lfsr_agrees: after.skp_lfsr_mismatches == before.skp_lfsr_mismatches,
                    parity_agrees: after.data_parity_errors == before.data_parity_errors,
                },
            };
            self.errors |= decoded.undefined_header || !decoded.skp.lfsr_agrees || !decoded.skp.parity_agrees;
            match self.output {
                Output::Bytes if block.header == SyncHeader::Data => self.out.write_all(&block.payload),
                Output::Bytes => Ok(()),
                Output::Lines => writeln!(self.out, "{}", decoded.line()),
                Output::Json => writeln!(self.out, "{}", decoded.json()),
            }
            .context("writing stdout")?;
            self.delivered += 1;
        }
    }
}

/// One block as the receiver decoded it, for `--blocks` and `--json`.
struct Decoded {
    /// Blocks delivered before it.
    number: u64,
    /// Descrambled.
    block: Block,
    /// Its sync header was undefined (00b, 11b): in a data stream the receiver takes the block by its content.
    undefined_header: bool,
    /// What the receiver made of it if it is a SKP ordered set.
    skp: SkpCheck,
}

/// A SKP ordered set against the receiver.
struct SkpCheck {
    /// Its length on the wire.
    symbols: u8,
    /// Its LFSR symbols equal the receiver's LFSR.
    lfsr_agrees: bool,
    /// Its data parity bit (after a data block) equals the receiver's.
    parity_agrees: bool,
}

impl Decoded {
    fn kind(&self) -> &'static str {
        match self.block.header {
            SyncHeader::Data => "data",
            SyncHeader::OrderedSet => "ordered-set",
        }
    }

    fn symbols(&self) -> String {
        self.block.payload.iter().map(|s| format!("{s:02x}")).collect()
    }

    /// What an ordered set is, `None` for a data block.
    fn ordered_set(&self) -> Option<Result<OrderedSetBlock, link_phy::Error>> {
        (self.block.header == SyncHeader::OrderedSet).then(|| OrderedSetBlock::parse(&self.block.payload))
    }

    /// `3 ordered-set 1e04... TS1 link 4 lane 0 N_FTS 45 rates 2.5/5/8 GT/s SPEED_CHANGE`.
    fn line(&self) -> String {
        let mut line = format!("{} {} {}", self.number, self.kind(), self.symbols());
        if self.undefined_header {
            line.push_str(" (undefined sync header, taken by its content)");
        }
        let _ = match self.ordered_set() {
            None => Ok(()),
            Some(Ok(OrderedSetBlock::Skp { tail })) => {
                let skp = &self.skp;
                let _ = write!(
                    line,
                    " SKP of {} symbols on the wire, LFSR {:06x}",
                    skp.symbols,
                    skp_lfsr(tail)
                );
                if !skp.lfsr_agrees {
                    line.push_str(", which disagrees with the receiver's");
                }
                if !skp.parity_agrees {
                    line.push_str(", data parity wrong");
                }
                Ok(())
            }
            Some(Ok(OrderedSetBlock::Training(ts))) => write!(line, " {}", training_set::text(&ts)),
            Some(Ok(other)) => write!(line, " {}", simple_name(&other)),
            Some(Err(e)) => write!(line, " unrecognised ({e})"),
        };
        line
    }

    /// The same as a JSON object: `block`, `kind`, `symbols`, `undefined_sync_header`, and for an ordered
    /// set `ordered_set` with its fields.
    fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "block": self.number,
            "kind": self.kind(),
            "symbols": self.symbols(),
            "undefined_sync_header": self.undefined_header,
        });
        let set = match self.ordered_set() {
            None => return v,
            Some(Ok(OrderedSetBlock::Skp { tail })) => serde_json::json!({
                "name": "SKP",
                "symbols_on_the_wire": self.skp.symbols,
                "lfsr": format!("{:06x}", skp_lfsr(tail)),
                "lfsr_agrees": self.skp.lfsr_agrees,
                "data_parity_agrees": self.skp.parity_agrees,
            }),
            Some(Ok(OrderedSetBlock::Training(ts))) => training_set::json(&ts),
            Some(Ok(other)) => serde_json::json!({ "name": simple_name(&other) }),
            Some(Err(e)) => serde_json::json!({ "name": null, "unrecognised": e.to_string() }),
        };
        v["ordered_set"] = set;
        v
    }
}

/// The name of an ordered set without fields to show.
fn simple_name(set: &OrderedSetBlock) -> &'static str {
    match set {
        OrderedSetBlock::Eieos => "EIEOS",
        OrderedSetBlock::Eios => "EIOS",
        OrderedSetBlock::Sds => "SDS",
        OrderedSetBlock::Fts => "FTS",
        OrderedSetBlock::Skp { .. } => "SKP",
        OrderedSetBlock::Training(ts) => training_set::name(ts),
    }
}

/// Blocks as text lines or packed wire bits.
struct BlockWriter<W: Write> {
    out: BitWriter<W>,
    packed: bool,
    text: String,
}

impl<W: Write> BlockWriter<W> {
    fn new(out: W, packed: bool) -> Self {
        BlockWriter {
            out: BitWriter::new(out),
            packed,
            text: String::with_capacity(40),
        }
    }

    /// One block's 130 wire bits: (the first 128, H0 in bit 0; the last 2).
    fn block(&mut self, (first, last): (u128, u8)) -> anyhow::Result<()> {
        if self.packed {
            self.out.push(first as u64, 64)?;
            self.out.push((first >> 64) as u64, 64)?;
            return self.out.push(u64::from(last), 2);
        }
        let (header, payload) = from_wire(first, last);
        self.text.clear();
        // H1H0, as PCI Express writes a sync header.
        let _ = write!(self.text, "{}{} ", header >> 1, header & 1);
        for symbol in payload.to_le_bytes() {
            let _ = write!(self.text, "{symbol:02x}");
        }
        self.text.push('\n');
        self.out
            .inner()
            .write_all(self.text.as_bytes())
            .context("writing stdout")
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::xorshift;

    #[test]
    fn packed_blocks_are_the_bits_back_to_back() {
        // Three blocks of known bits: the packed bytes, read bit by bit, give each block's 130 bits in turn.
        let blocks = [
            (0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210u128, 0b10u8),
            (u128::MAX, 0b01),
            (0xDEAD_BEEF << 40, 0b11),
        ];
        let mut w = BlockWriter::new(Vec::new(), true);
        for b in blocks {
            w.block(b).unwrap();
        }
        w.finish().unwrap();
        let out = w.out.inner();
        assert_eq!(out.len(), (3 * 130usize).div_ceil(8));
        let bit = |i: usize| out[i / 8] >> (i % 8) & 1;
        for (k, (first, last)) in blocks.iter().enumerate() {
            for i in 0..130 {
                let want = if i < 128 {
                    (first >> i) as u8 & 1
                } else {
                    last >> (i - 128) & 1
                };
                assert_eq!(bit(130 * k + i), want, "block {k} bit {i}");
            }
        }
        // The padding after the last block is zero.
        assert_eq!(out[out.len() - 1] >> (390 % 8), 0);
    }

    #[test]
    fn damaged_captures_decode_without_panicking_and_clean_ones_exactly() {
        for case in 0..300u64 {
            let mut next = xorshift(case + 1);
            let lane = (next() % 32) as usize;
            let data: Vec<u8> = (0..16 * (next() % 40)).map(|_| next() as u8).collect();
            let mut blocks = vec![OrderedSetBlock::Eieos.to_block(), OrderedSetBlock::Sds.to_block()];
            for (k, chunk) in data.chunks(16).enumerate() {
                if k % 7 == 3 {
                    blocks.push(OrderedSetBlock::skp().to_block());
                }
                blocks.push(Block::data(chunk.try_into().unwrap()));
            }
            // Noise before the stream, so that the receiver must find its EIEOS.
            let mut capture = BitWriter::new(Vec::new());
            let junk = (next() % 300) as u32;
            for _ in 0..junk / 64 {
                capture.push(next(), 64).unwrap();
            }
            capture.push(next(), junk % 64).unwrap();
            let mut encoder = LaneEncoder::new(lane);
            for block in &blocks {
                let (first, last) = encoder.encode_block(block);
                capture.push(first as u64, 64).unwrap();
                capture.push((first >> 64) as u64, 64).unwrap();
                capture.push(u64::from(last), 2).unwrap();
            }
            capture.finish().unwrap();
            let mut capture = capture.inner().clone();
            let damaged = case % 2 == 1;
            if damaged {
                for _ in 0..1 + next() % 20 {
                    let at = (next() as usize) % (8 * capture.len());
                    capture[at / 8] ^= 1 << (at % 8);
                }
                capture.truncate(capture.len() - (next() as usize % (capture.len() / 2 + 1)));
            }
            for output in [Output::Bytes, Output::Lines, Output::Json] {
                let mut report = Report {
                    out: Vec::new(),
                    output,
                    delivered: 0,
                    errors: false,
                };
                let outcome = decode_packed(&mut &capture[..], &mut LaneDecoder::new(lane), &mut report);
                if !damaged {
                    assert!(outcome.is_ok(), "case {case}: {outcome:?}");
                    assert_eq!(report.delivered, blocks.len() as u64, "case {case}");
                    assert!(!report.errors, "case {case}: a clean capture reports no error");
                    if output == Output::Bytes {
                        assert_eq!(report.out, data, "case {case}");
                    }
                }
            }
        }
        // Text that is mostly not blocks at all.
        for case in 0..300u64 {
            let mut next = xorshift(case + 1000);
            let alphabet = b"0123456789abcdefg #\n\t\xff";
            let text: Vec<u8> = (0..next() % 400)
                .map(|_| alphabet[next() as usize % alphabet.len()])
                .collect();
            let mut report = Report {
                out: Vec::new(),
                output: Output::Json,
                delivered: 0,
                errors: false,
            };
            let _ = decode_text(&mut &text[..], &mut LaneDecoder::aligned(0), &mut report);
        }
    }

    #[test]
    fn a_block_line_is_parsed_as_written() {
        let mut w = BlockWriter::new(Vec::new(), false);
        let wire = to_wire(SyncHeader::Data.bits(), 0x0706_0504_0302_0100u128 | 0xFF << 120);
        w.block(wire).unwrap();
        let text = String::from_utf8(w.out.inner().clone()).unwrap();
        assert_eq!(text, "10 000102030405060700000000000000ff\n");
        let (header, payload) = parse_block_line(text.as_bytes()).unwrap().unwrap();
        assert_eq!(to_wire(header, payload), wire);
        assert_eq!(parse_block_line(b"  \n").unwrap(), None);
        assert_eq!(parse_block_line(b"# a comment\n").unwrap(), None);
        for (bad, says) in [
            (&b"2 00"[..], "not a sync header"),
            (b"10", "without its 16 symbols"),
            (b"10 0001", "not 16 symbols"),
            (b"10 000102030405060700000000000000fg", "not 16 symbols"),
            (b"10 000102030405060700000000000000ff x", "after the block"),
            (b"10 \xff", "not text"),
        ] {
            let e = parse_block_line(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
