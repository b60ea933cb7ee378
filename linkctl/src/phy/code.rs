//! `linkctl phy encode` and `decode`: the 8b/10b line code on raw data, for checking against other
//! implementations, waveform captures and published tables.

use std::io::{self, BufWriter, Read, Write};

use anyhow::{bail, Context};
use link_phy::code8b10b::{Decoder, Encoder, SymbolName};
use link_phy::symbol::control;
use link_phy::{Disparity, Symbol};

/// The only line code these commands handle; 128b/130b works on blocks, not bytes.
const SUPPORTED_CODE: &str = "8b10b";

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
Output: one code group per line, three lowercase hex digits with bit `a` (the first bit on the wire) \
as the least significant bit, so K28.5 at RD- is 17c. The running disparity carries over from byte to \
byte, starting from --rd.")]
pub struct EncodeArgs {
    /// Line code (only 8b10b)
    #[arg(long, value_name = "CODE")]
    code: String,
    /// Running disparity to start in
    #[arg(long, value_enum, default_value = "neg")]
    rd: StartingDisparity,
    /// Send every byte as a control (K) symbol; input must be K bytes only
    /// (1c 3c 5c 7c 9c bc dc fc = K28.0-K28.7, f7 fb fd fe = K23.7 K27.7 K29.7 K30.7)
    #[arg(long)]
    control: bool,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Input: code groups as hexadecimal numbers (an optional 0x prefix is allowed) separated by whitespace, \
bit `a` as the least significant bit, exactly as `linkctl phy encode` prints them.

The starting running disparity is taken from the stream: the first code group that belongs to only one \
column decides it (groups valid in both, like D10.2, are decoded the same either way).

Output: the decoded bytes, raw. Control symbols are written as their byte values too (K28.5 as bc), so \
`encode --control | decode` gives back the input; use --symbols to tell data from control.

Errors: an invalid code group, or a valid one from the wrong running disparity, is reported with its \
position (0 is the first group); the bytes before it are still written, and the exit status is non-zero.")]
pub struct DecodeArgs {
    /// Line code (only 8b10b)
    #[arg(long, value_name = "CODE")]
    code: String,
    /// Print one symbol name per line (D10.2, K28.5) instead of raw bytes
    #[arg(long)]
    symbols: bool,
}

fn check_code(code: &str) -> anyhow::Result<()> {
    if code != SUPPORTED_CODE {
        bail!("unsupported line code {code:?}: these commands handle only --code {SUPPORTED_CODE}");
    }
    Ok(())
}

fn disparity(rd: StartingDisparity) -> Disparity {
    match rd {
        StartingDisparity::Neg => Disparity::Negative,
        StartingDisparity::Pos => Disparity::Positive,
    }
}

pub fn encode(args: EncodeArgs) -> anyhow::Result<()> {
    check_code(&args.code)?;
    let mut encoder = Encoder::with_disparity(disparity(args.rd));
    let mut input = io::stdin().lock();
    let mut out = BufWriter::new(io::stdout().lock());
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
        write_code_groups(&mut out, &codes[..n]).context("writing stdout")?;
        offset += n;
    }
    out.flush().context("writing stdout")?;
    Ok(())
}

pub fn decode(args: DecodeArgs) -> anyhow::Result<()> {
    check_code(&args.code)?;
    let mut text = Vec::new();
    io::stdin().read_to_end(&mut text).context("reading stdin")?;
    let codes = parse_code_groups(&text)?;

    // Decode from both starting disparities and keep the one that gets further: before the first group
    // that belongs to one column only, both read the same symbols.
    let attempts = [Disparity::Negative, Disparity::Positive].map(|rd| {
        let mut decoder = Decoder::new(rd);
        let mut symbols = vec![Symbol::Data(0); codes.len()];
        let outcome = decoder.decode_symbols(&codes, &mut symbols);
        (outcome, symbols)
    });
    let reached = |outcome: &Result<usize, link_phy::Error>| match outcome {
        Ok(n) => *n,
        Err(e) => error_position(e),
    };
    let [from_negative, from_positive] = attempts;
    let (outcome, symbols) = if reached(&from_positive.0) > reached(&from_negative.0) {
        from_positive
    } else {
        from_negative
    };
    let good = reached(&outcome);

    let mut out = BufWriter::new(io::stdout().lock());
    if args.symbols {
        for s in &symbols[..good] {
            writeln!(out, "{}", SymbolName(*s)).context("writing stdout")?;
        }
    } else {
        let bytes: Vec<u8> = symbols[..good].iter().map(|s| s.byte()).collect();
        out.write_all(&bytes).context("writing stdout")?;
    }
    out.flush().context("writing stdout")?;
    outcome?;
    Ok(())
}

/// Where decoding stopped, for the errors `decode_symbols` returns.
fn error_position(e: &link_phy::Error) -> usize {
    match *e {
        link_phy::Error::InvalidCodeGroup { position, .. }
        | link_phy::Error::DisparityError { position, .. } => position,
        _ => 0,
    }
}

/// Whitespace-separated hex code groups, each at most 10 bits.
fn parse_code_groups(text: &[u8]) -> anyhow::Result<Vec<u16>> {
    let text = std::str::from_utf8(text).context("input is not text (expected hex code groups)")?;
    text.split_ascii_whitespace()
        .enumerate()
        .map(|(position, token)| {
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
        })
        .collect()
}

/// Read until `buf` is full or the input ends, so chunks are whole unless at the end.
fn read_some(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
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
