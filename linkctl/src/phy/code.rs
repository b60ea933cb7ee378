//! `linkctl phy encode` and `decode`: the line codes on raw data, for checking against other
//! implementations, waveform captures and published tables. 8b/10b is here; 128b/130b, which works on
//! blocks, is in [`super::blocks`].

use std::io::{self, BufWriter, Read, Write};
use std::process::ExitCode;

use anyhow::{bail, Context};
use link_phy::code8b10b::{CommaAligner, Decoder, Encoder, SymbolName};
use link_phy::symbol::control;
use link_phy::{Disparity, Symbol};

use super::bits::{packed_stdin, words, BitWriter};

/// The line codes, as `--code` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code {
    Code8b10b,
    Code128b130b,
}

/// Bytes read from stdin at a time when encoding.
const CHUNK: usize = 64 * 1024;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartingDisparity {
    /// RD-, where every transmitter starts
    Neg,
    /// RD+
    Pos,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Output at 8b10b: one code group per line, three lowercase hex digits with bit `a` (the first bit on the \
wire) as the least significant bit, so K28.5 at RD- is 17c. The running disparity carries over from byte \
to byte, starting from --rd. With --packed, the serial bits instead: each group bit `a` first, every group \
straight after the one before, packed from bit 0 of the first byte (four groups fill 5 bytes; the last \
byte is padded with alternating bits, the first unlike the last bit sent, so that they form no comma).

At 128b130b: every 16 bytes of input are a data block, scrambled with the lane's LFSR from its seed (as \
after an EIEOS); the input must be a whole number of blocks. One block per line: the sync header H1H0 in \
binary (10 data, 01 ordered set), a space, then the 16 symbols as sent (scrambled) in hex, symbol 0 first, \
so sixteen zero bytes on lane 0 are `10 6cbd949853c6d8ce506a75c1044fc307`. With --packed, the raw wire \
bits instead: H0 first, each symbol bit 0 first, every block straight after the one before, packed from \
bit 0 of the first byte (four blocks fill 65 bytes; the last byte is padded with zeros).")]
pub struct EncodeArgs {
    /// Line code: 8b10b or 128b130b
    #[arg(long, value_name = "CODE")]
    code: String,
    /// Running disparity to start in (8b10b)
    #[arg(long, value_enum)]
    rd: Option<StartingDisparity>,
    /// Send every byte as a control (K) symbol; input must be K bytes only
    /// (1c 3c 5c 7c 9c bc dc fc = K28.0-K28.7, f7 fb fd fe = K23.7 K27.7 K29.7 K30.7) (8b10b)
    #[arg(long)]
    control: bool,
    /// Lane number 0-31, whose seed (lane mod 8) the scrambler starts from (128b130b; default 0)
    #[arg(long)]
    lane: Option<u32>,
    /// Write the serial bits packed into bytes (bit `a` or H0 first, from bit 0 of the first byte) instead
    /// of a code group or block per line
    #[arg(long)]
    packed: bool,
    /// Send an EIEOS and an SDS ordered set before the data, as a transmitter starts a data stream: a
    /// receiver finds the block boundaries at the EIEOS (128b130b)
    #[arg(long)]
    stream_start: bool,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Input at 8b10b: code groups as hexadecimal numbers (an optional 0x prefix is allowed) separated by whitespace, \
bit `a` as the least significant bit, exactly as `linkctl phy encode` prints them.

With --packed, serial bits as a capture of the lane holds them (bit `a` first, from bit 0 of the first \
byte), aligned at the first comma (K28.1, K28.5, K28.7) as a receiver aligns, the bits before it skipped, \
unless --aligned says the capture starts at a code-group boundary.

The starting running disparity is taken from the stream: the first code group that belongs to only one \
column decides it (groups valid in both, like D10.2, are decoded the same either way).

Output: the decoded bytes, raw. Control symbols are written as their byte values too (K28.5 as bc), so \
`encode --control | decode` gives back the input; use --symbols to tell data from control.

Errors: an invalid code group, or a valid one from the wrong running disparity, is reported with its \
position (0 is the first group); the bytes before it are still written, and the exit status is non-zero. \
A token that is not a hex code group ends decoding the same way: the groups before it are decoded and \
written, then the error is reported. The input is decoded as it is read, in memory that does not grow \
with it.

At 128b130b: blocks one per line as `linkctl phy encode --code 128b130b` writes them (blank lines and \
lines starting with # are skipped), starting at a block boundary; or with --packed, raw wire bits as a \
capture of the lane holds them, searched for an EIEOS to find the block boundaries as a receiver does \
(the bits before it are skipped), unless --aligned says the capture starts at a boundary. Blocks are \
descrambled with the lane's LFSR by the rules of the specification (an EIEOS resets it, a SKP ordered set \
does not advance it). Output: the data blocks' bytes, raw, or with --blocks one line per block: its \
number, `data` or `ordered-set`, its 16 symbols descrambled, and what an ordered set is (EIEOS, SDS, a \
training set's fields, a SKP ordered set's LFSR and whether it agrees with the receiver's), or with \
--json the same as one JSON object per line per block. A block with \
an undefined sync header (00, 11) is an error, except in a data stream (after an SDS), where the \
receiver counts it and takes the block by its content.")]
pub struct DecodeArgs {
    /// Line code: 8b10b or 128b130b
    #[arg(long, value_name = "CODE")]
    code: String,
    /// Print one symbol name per line (D10.2, K28.5) instead of raw bytes (8b10b)
    #[arg(long)]
    symbols: bool,
    /// Lane number 0-31, whose seed (lane mod 8) the descrambler starts from (128b130b; default 0)
    #[arg(long)]
    lane: Option<u32>,
    /// Read serial bits packed into bytes, as a capture of the lane holds them, instead of a code group or
    /// block per line; the receiver finds the boundaries at a comma (8b10b) or an EIEOS (128b130b)
    #[arg(long)]
    packed: bool,
    /// The packed bits start at a code group or block boundary: do not search for a comma or an EIEOS
    #[arg(long, requires = "packed")]
    aligned: bool,
    /// Invert every packed bit first: a capture of a lane whose differential pair is swapped (polarity
    /// inverted), which a receiver corrects for
    #[arg(long, requires = "packed")]
    invert: bool,
    /// Print one line per block (number, type, symbols, what it is) instead of the data's bytes (128b130b)
    #[arg(long, conflicts_with = "json")]
    blocks: bool,
    /// Print one JSON object per line per block instead of the data's bytes: `block`, `kind`, `symbols`,
    /// `undefined_sync_header`, and for an ordered set `ordered_set` with its fields (128b130b); or per
    /// receiver event (8b10b, with --packed, as --events)
    #[arg(long)]
    json: bool,
    /// Read the capture as a port's lane receiver does and print what it saw, a line each: training sets
    /// with their fields, SKP and electrical idle ordered sets (a run of the same one counted), the data
    /// stream descrambled (16 bytes a line), polarity inversion and receiver errors, which do not stop it
    /// (8b10b, with --packed)
    #[arg(long, requires = "packed", conflicts_with = "symbols")]
    events: bool,
}

fn parse_code(code: &str) -> anyhow::Result<Code> {
    match code {
        "8b10b" => Ok(Code::Code8b10b),
        "128b130b" => Ok(Code::Code128b130b),
        _ => bail!("unsupported line code {code:?}: use --code 8b10b or --code 128b130b"),
    }
}

/// Refuse the options given (named, and whether each was) that do not apply to `code`.
fn refuse_options_of_the_other_code(code: &str, options: &[(&str, bool)]) -> anyhow::Result<()> {
    if let Some((name, _)) = options.iter().find(|(_, given)| *given) {
        bail!("{name} does not apply to --code {code}");
    }
    Ok(())
}

/// The options of `--code 128b130b`, checked.
fn block_options(lane: Option<u32>, packed: bool) -> anyhow::Result<super::blocks::BlockOptions> {
    let lane = lane.unwrap_or(0);
    if lane > 31 {
        bail!("--lane {lane} is out of range: lanes are numbered 0 to 31");
    }
    Ok(super::blocks::BlockOptions {
        lane: lane as usize,
        packed,
    })
}

fn disparity(rd: StartingDisparity) -> Disparity {
    match rd {
        StartingDisparity::Neg => Disparity::Negative,
        StartingDisparity::Pos => Disparity::Positive,
    }
}

pub fn encode(args: EncodeArgs) -> anyhow::Result<()> {
    if parse_code(&args.code)? == Code::Code128b130b {
        refuse_options_of_the_other_code(
            &args.code,
            &[("--rd", args.rd.is_some()), ("--control", args.control)],
        )?;
        return super::blocks::encode(&block_options(args.lane, args.packed)?, args.stream_start);
    }
    refuse_options_of_the_other_code(
        &args.code,
        &[
            ("--lane", args.lane.is_some()),
            ("--stream-start", args.stream_start),
        ],
    )?;
    let mut encoder = Encoder::with_disparity(disparity(args.rd.unwrap_or(StartingDisparity::Neg)));
    let mut input = io::stdin().lock();
    let mut out = BitWriter::new(BufWriter::new(io::stdout().lock()));
    let mut bytes = vec![0u8; CHUNK];
    let mut codes = vec![0u16; CHUNK];
    let mut symbols = Vec::with_capacity(if args.control { CHUNK } else { 0 });
    let mut offset = 0usize;
    loop {
        let n = read_some(&mut input, &mut bytes).context("reading stdin")?;
        if n == 0 {
            break;
        }
        let bytes = &bytes[..n];
        if args.control {
            if let Some(i) = bytes.iter().position(|&b| !control::is_control(b)) {
                bail!(
                    "byte {:#04x} at offset {} is not a control symbol: --control accepts only the K bytes \
                     1c 3c 5c 7c 9c bc dc fc f7 fb fd fe",
                    bytes[i],
                    offset + i
                );
            }
            symbols.clear();
            symbols.extend(bytes.iter().map(|&b| Symbol::Control(b)));
            encoder.encode_symbols(&symbols, &mut codes[..n])?;
        } else {
            encoder.encode_data(bytes, &mut codes[..n])?;
        }
        if args.packed {
            for &code in &codes[..n] {
                out.push(u64::from(code), 10)?;
            }
        } else {
            write_code_groups(out.inner(), &codes[..n]).context("writing stdout")?;
        }
        offset += n;
    }
    // Zeros after the last group could form a comma with its last bits, at which a receiver that has seen
    // a single comma would realign.
    out.pad_alternating()?;
    out.finish()
}

/// Decode as `args` say; exit status 2 if a receiver reading a capture reported an error (`--events`,
/// or a 128b/130b block with an undefined sync header or a SKP ordered set that disagrees with it).
pub fn decode(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    if parse_code(&args.code)? == Code::Code128b130b {
        refuse_options_of_the_other_code(
            &args.code,
            &[("--symbols", args.symbols), ("--events", args.events)],
        )?;
        let options = block_options(args.lane, args.packed)?;
        let output = match (args.blocks, args.json) {
            (true, _) => super::blocks::Output::Lines,
            (false, true) => super::blocks::Output::Json,
            (false, false) => super::blocks::Output::Bytes,
        };
        return super::blocks::decode(&options, output, args.aligned, args.invert).map(exit_status);
    }
    refuse_options_of_the_other_code(
        &args.code,
        &[("--lane", args.lane.is_some()), ("--blocks", args.blocks)],
    )?;
    if args.json && !args.packed {
        bail!("--json applies to --code 8b10b only with --packed (the receiver's events)");
    }
    if args.events || args.json {
        if args.aligned {
            bail!(
                "--aligned does not apply to the receiver's events: a lane receiver aligns at commas itself"
            );
        }
        return super::events::decode(packed_stdin(args.invert), args.json).map(exit_status);
    }
    if args.packed {
        return decode_packed(packed_stdin(args.invert), args.symbols, args.aligned)
            .map(|()| ExitCode::SUCCESS);
    }
    let mut input = io::stdin().lock();
    let mut out = BufWriter::new(io::stdout().lock());
    let mut text = vec![0u8; CHUNK];
    let mut decoding = TextDecoder::default();
    loop {
        let n = read_some(&mut input, &mut text).context("reading stdin")?;
        let (symbols, outcome) = decoding.decode(&text[..n], n == 0);
        write_symbols(&mut out, symbols, args.symbols)?;
        if outcome.is_err() || n == 0 {
            out.flush().context("writing stdout")?;
            return outcome.map(|()| ExitCode::SUCCESS);
        }
    }
}

/// Exit status 2 if the receiver reported errors: `dl decode`'s and `link decode`'s for damage.
fn exit_status(errors: bool) -> ExitCode {
    if errors {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// Decode packed serial bits: a capture of a lane, aligned at its first comma (or from its first bit if
/// `aligned`), as a receiver aligns.
fn decode_packed(mut input: impl Read, names: bool, aligned: bool) -> anyhow::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    let mut bytes = vec![0u8; CHUNK];
    let mut groups = PackedGroups::new(aligned);
    let mut decoding = BothDisparities::default();
    let mut codes = Vec::new();
    let mut bits_read = 0u64;
    loop {
        let n = read_some(&mut input, &mut bytes).context("reading stdin")?;
        bits_read += 8 * n as u64;
        codes.clear();
        groups.push(&bytes[..n], &mut codes);
        let (symbols, outcome) = decoding.decode(&codes);
        write_symbols(&mut out, symbols, names)?;
        if outcome.is_err() || n < CHUNK {
            out.flush().context("writing stdout")?;
            if outcome.is_ok() && !groups.found_alignment() && bits_read >= 10 {
                bail!(
                    "no comma (K28.1, K28.5 or K28.7) in the {bits_read} bits read, so no code-group \
                     boundary was found (give --aligned if the capture starts at one)"
                );
            }
            return outcome.map_err(Into::into);
        }
    }
}

/// Code groups from packed serial bits.
enum PackedGroups {
    /// Aligned by the receiver's comma search.
    Searching(CommaAligner),
    /// Every ten bits from the first: the bits of a group not yet complete, and how many.
    Aligned { carry: u64, bits: u32 },
}

impl PackedGroups {
    fn new(aligned: bool) -> Self {
        if aligned {
            PackedGroups::Aligned { carry: 0, bits: 0 }
        } else {
            PackedGroups::Searching(CommaAligner::new())
        }
    }

    /// The code groups `bytes` complete, onto `codes`.
    fn push(&mut self, bytes: &[u8], codes: &mut Vec<u16>) {
        match self {
            PackedGroups::Searching(aligner) => {
                for (word, count) in words(bytes) {
                    // Taken at once: the aligner holds only a few dozen groups.
                    aligner.push_bits(word, count);
                    codes.extend(std::iter::from_fn(|| aligner.pop()));
                }
            }
            PackedGroups::Aligned { carry, bits } => {
                for &byte in bytes {
                    *carry |= u64::from(byte) << *bits;
                    *bits += 8;
                    if *bits >= 10 {
                        codes.push((*carry & 0x3FF) as u16);
                        *carry >>= 10;
                        *bits -= 10;
                    }
                }
            }
        }
    }

    fn found_alignment(&self) -> bool {
        match self {
            PackedGroups::Searching(aligner) => aligner.is_aligned(),
            PackedGroups::Aligned { .. } => true,
        }
    }
}

/// Decoded symbols as raw bytes, or with `names` one name per line.
fn write_symbols(out: &mut impl Write, symbols: &[Symbol], names: bool) -> anyhow::Result<()> {
    if names {
        for s in symbols {
            writeln!(out, "{}", SymbolName(*s)).context("writing stdout")?;
        }
    } else {
        let bytes: Vec<u8> = symbols.iter().map(|s| s.byte()).collect();
        out.write_all(&bytes).context("writing stdout")?;
    }
    Ok(())
}

/// Hex text to symbols, a piece at a time.
#[derive(Default)]
struct TextDecoder {
    groups: Groups,
    /// The groups of the last piece.
    codes: Vec<u16>,
    decoding: BothDisparities,
}

impl TextDecoder {
    /// The symbols of the next piece of `text` (`end`: the input ends with it) up to its first error,
    /// and that error. The groups before a token that is not a code group are decoded all the same, so
    /// what is written does not depend on where the input was cut into pieces.
    fn decode(&mut self, text: &[u8], end: bool) -> (&[Symbol], anyhow::Result<()>) {
        self.codes.clear();
        let parsed = self.groups.parse(text, end, &mut self.codes);
        let (symbols, decoded) = self.decoding.decode(&self.codes);
        // A group that does not decode comes before the token that ended the parsing.
        let outcome = match decoded {
            Err(e) => Err(e.into()),
            Ok(()) => parsed,
        };
        (symbols, outcome)
    }
}

/// The most characters a code group may be written with (leading zeros allowed), so that what is held
/// of one split between pieces stays small.
const LONGEST_GROUP: usize = 4096;

/// Whitespace-separated hex code groups, each at most 10 bits, parsed a piece of text at a time.
#[derive(Default)]
struct Groups {
    /// The start of a group the piece ended in.
    partial: Vec<u8>,
    /// Groups parsed so far.
    parsed: usize,
}

impl Groups {
    /// Parse the groups of `text` into `codes`; `end` says the input ends with it. On an error, `codes`
    /// holds the groups before it.
    fn parse(&mut self, text: &[u8], end: bool, codes: &mut Vec<u16>) -> anyhow::Result<()> {
        let mut rest = text;
        while !rest.is_empty() || (end && !self.partial.is_empty()) {
            // The next group's characters in this piece, and whether it ends here.
            let (piece, ends) = match rest.iter().position(u8::is_ascii_whitespace) {
                Some(i) => {
                    let piece = &rest[..i];
                    rest = &rest[i + 1..];
                    (piece, true)
                }
                None => (std::mem::take(&mut rest), end),
            };
            self.partial.extend_from_slice(piece);
            if self.partial.len() > LONGEST_GROUP {
                bail!(
                    "code group {}: longer than {LONGEST_GROUP} characters",
                    self.parsed
                );
            }
            if !ends {
                // It goes on in the next piece.
                return Ok(());
            }
            if self.partial.is_empty() {
                continue;
            }
            codes.push(code_group(self.parsed, &self.partial)?);
            self.parsed += 1;
            self.partial.clear();
        }
        Ok(())
    }
}

/// Code group number `position`, written `token`: hex (an optional 0x prefix), at most 10 bits.
fn code_group(position: usize, token: &[u8]) -> anyhow::Result<u16> {
    // Named by its group, as every other bad group is: the UTF-8 error's index is within the group.
    let Ok(token) = std::str::from_utf8(token) else {
        bail!("code group {position}: not text (expected hex code groups)");
    };
    let digits = token
        .strip_prefix("0x")
        .or_else(|| token.strip_prefix("0X"))
        .unwrap_or(token);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("code group {position}: {token:?} is not a hexadecimal number");
    }
    let significant = digits.trim_start_matches('0');
    let value = match significant.len() {
        0 => 0,
        1..=3 => u16::from_str_radix(significant, 16).unwrap_or(u16::MAX),
        _ => u16::MAX,
    };
    if value > 0x3FF {
        bail!("code group {position}: {token} is wider than 10 bits (at most 3ff)");
    }
    Ok(value)
}

/// Decoding from both starting disparities at once, keeping the one that gets further: until the first
/// group that belongs to one column only, both read the same symbols, and that group ends the other.
struct BothDisparities {
    /// The decoders still going, from RD- and from RD+, and what each decoded of the last piece.
    decoders: [Option<Decoder>; 2],
    symbols: [Vec<Symbol>; 2],
    /// Groups decoded before the last piece.
    decoded: usize,
}

impl Default for BothDisparities {
    fn default() -> Self {
        BothDisparities {
            decoders: [Disparity::Negative, Disparity::Positive].map(|rd| Some(Decoder::new(rd))),
            symbols: [Vec::new(), Vec::new()],
            decoded: 0,
        }
    }
}

impl BothDisparities {
    /// Decode the next `codes`: the symbols of the decoder kept, up to its error if it has one (its
    /// position counted from the first group of the input).
    fn decode(&mut self, codes: &[u16]) -> (&[Symbol], Result<(), link_phy::Error>) {
        let mut reached = [None; 2];
        let mut errors = [None, None];
        for (k, decoder) in self.decoders.iter_mut().enumerate() {
            let Some(d) = decoder else { continue };
            self.symbols[k].clear();
            self.symbols[k].resize(codes.len(), Symbol::Data(0));
            match d.decode_symbols(codes, &mut self.symbols[k]) {
                Ok(n) => reached[k] = Some(n),
                Err(e) => {
                    reached[k] = Some(error_position(&e));
                    errors[k] = Some(e);
                }
            }
        }
        // The one that got further (RD- on a tie); the other ends where it failed.
        let kept = match reached {
            [Some(neg), Some(pos)] if pos > neg => 1,
            [None, _] => 1,
            _ => 0,
        };
        if errors[1 - kept].is_some() || reached[1 - kept].is_none() {
            self.decoders[1 - kept] = None;
        }
        let good = reached[kept].unwrap_or(0);
        let offset = self.decoded;
        self.decoded += codes.len();
        let outcome = match errors[kept].take() {
            Some(e) => Err(shifted(e, offset)),
            None => Ok(()),
        };
        (&self.symbols[kept][..good], outcome)
    }
}

/// `e` with its position moved on by `by` groups.
fn shifted(e: link_phy::Error, by: usize) -> link_phy::Error {
    match e {
        link_phy::Error::InvalidCodeGroup { position, code } => link_phy::Error::InvalidCodeGroup {
            position: position + by,
            code,
        },
        link_phy::Error::DisparityError {
            position,
            code,
            expected,
        } => link_phy::Error::DisparityError {
            position: position + by,
            code,
            expected,
        },
        other => other,
    }
}

/// Where decoding stopped, for the errors `decode_symbols` returns.
fn error_position(e: &link_phy::Error) -> usize {
    match *e {
        link_phy::Error::InvalidCodeGroup { position, .. }
        | link_phy::Error::DisparityError { position, .. } => position,
        _ => 0,
    }
}

/// Read until `buf` is full or the input ends, so chunks are whole unless at the end.
pub(crate) fn read_some(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Three lowercase hex digits and a newline per code group.
fn write_code_groups(out: &mut impl Write, codes: &[u16]) -> io::Result<()> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = Vec::with_capacity(4 * codes.len());
    for &c in codes {
        let digit = |shift: u16| HEX[usize::from(c >> shift & 0xF)];
        text.extend_from_slice(&[digit(8), digit(4), digit(0), b'\n']);
    }
    out.write_all(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The symbols and the outcome of decoding `text`, read `piece` bytes at a time.
    fn decode_in_pieces(text: &[u8], piece: usize) -> (Vec<Symbol>, Result<(), String>) {
        let (mut decoding, mut symbols) = (TextDecoder::default(), Vec::new());
        let mut pieces: Vec<&[u8]> = text.chunks(piece).collect();
        pieces.push(&[]);
        for (i, piece) in pieces.iter().enumerate() {
            let (decoded, outcome) = decoding.decode(piece, i + 1 == pieces.len());
            symbols.extend_from_slice(decoded);
            if let Err(e) = outcome {
                return (symbols, Err(e.to_string()));
            }
        }
        (symbols, Ok(()))
    }

    #[test]
    fn packed_captures_align_at_their_comma_whatever_the_pieces() {
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1D);
        for case in 0..100 {
            // Noise, then COM and data: the groups from the comma on, however the bytes arrive.
            let mut symbols = vec![Symbol::Control(control::COM)];
            symbols.extend((0..next() % 200).map(|_| Symbol::Data(next() as u8)));
            let mut codes = vec![0u16; symbols.len()];
            Encoder::new().encode_symbols(&symbols, &mut codes).unwrap();
            let mut capture = BitWriter::new(Vec::new());
            // Bits that hold no comma (alternating ones and zeros), so the first comma is the COM.
            let junk = (next() % 40) as u32;
            capture.push(0x5555_5555_5555_5555 >> (next() % 2), junk).unwrap();
            for &c in &codes {
                capture.push(u64::from(c), 10).unwrap();
            }
            capture.pad_alternating().unwrap();
            capture.finish().unwrap();
            let capture = capture.inner().clone();
            let piece = 1 + (next() % 20) as usize;
            let mut groups = PackedGroups::new(false);
            let mut found = Vec::new();
            for bytes in capture.chunks(piece) {
                groups.push(bytes, &mut found);
            }
            assert_eq!(
                found, codes,
                "case {case}: {junk} bits of noise, pieces of {piece}"
            );
            let mut decoding = BothDisparities::default();
            let (decoded, outcome) = decoding.decode(&found);
            assert_eq!((decoded, outcome), (&symbols[..], Ok(())), "case {case}");
        }
    }

    #[test]
    fn decoding_in_pieces_gives_what_decoding_whole_gives() {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15);
        for case in 0..60 {
            let rd = if case % 2 == 0 {
                Disparity::Negative
            } else {
                Disparity::Positive
            };
            // Neutral groups first (D10.2 reads the same from either disparity), then random data.
            let mut bytes = vec![0x4A; (next() % 5) as usize];
            bytes.extend((0..200 + next() % 300).map(|_| next() as u8));
            let mut codes = vec![0u16; bytes.len()];
            Encoder::with_disparity(rd)
                .encode_data(&bytes, &mut codes)
                .unwrap();
            if case % 3 == 0 {
                // A flipped bit: an invalid group, or one from the wrong column, somewhere.
                let at = (next() as usize) % codes.len();
                codes[at] ^= 1 << (next() % 10);
            }
            let mut text = Vec::new();
            write_code_groups(&mut text, &codes).unwrap();
            let whole = decode_in_pieces(&text, text.len());
            if case % 3 != 0 {
                let decoded: Vec<u8> = whole.0.iter().map(|s| s.byte()).collect();
                assert_eq!((decoded, &whole.1), (bytes, &Ok(())), "case {case}");
            }
            for piece in [1, 3, 4, 5, 64] {
                assert_eq!(
                    decode_in_pieces(&text, piece),
                    whole,
                    "case {case} in pieces of {piece}"
                );
            }
        }
        let error = decode_in_pieces(b"17c 2aa 000 2aa", 2).1.unwrap_err();
        assert!(error.contains("code group 2"), "{error}");
        // A token that is not a code group ends decoding where it is, whatever the pieces: the groups
        // before it are decoded, and one of them that does not decode is the error reported.
        for piece in [1, 4, 5, 100] {
            let (symbols, outcome) = decode_in_pieces(b"17c 2aa zz 2aa", piece);
            assert_eq!(
                symbols,
                [Symbol::Control(0xBC), Symbol::Data(0x4A)],
                "pieces of {piece}"
            );
            let error = outcome.unwrap_err();
            assert!(error.contains("code group 2: \"zz\""), "{error}");
            let error = decode_in_pieces(b"17c 17c zz", piece).1.unwrap_err();
            assert!(
                error.contains("code group 1") && error.contains("disparity"),
                "{error}"
            );
        }
        // Leading zeros are allowed, but not without end: what is held of a group stays small.
        let mut long = vec![b'0'; LONGEST_GROUP - 3];
        long.extend_from_slice(b"17c 2aa");
        assert_eq!(
            decode_in_pieces(&long, 1000).0,
            [Symbol::Control(0xBC), Symbol::Data(0x4A)]
        );
        let error = decode_in_pieces(&vec![b'0'; LONGEST_GROUP + 1], 1000)
            .1
            .unwrap_err();
        assert!(error.contains("code group 0: longer than"), "{error}");
    }
}
