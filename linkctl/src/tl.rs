//! `linkctl tl`: the transaction layer between two endpoints.

use std::ops::Range;
use std::process::ExitCode;
use std::time::Instant as WallClock;

use anyhow::{bail, ensure, Context};
use clap::Subcommand;
use link_tl::endpoint::pair::{Pair, Side, TapPoint};
use link_tl::endpoint::{in_range, Memory, MemoryError};
use link_tl::endpoint::{Direction, Done, Event};
use link_tl::{AddressMap, Window};
use serde_json::json;

use crate::words::plural;

use crate::check::{ensure_below, ensure_unit_wire_ber};
use crate::sim::parse_bytes;
use crate::trace::{summary_json, summary_text, LinkTrace, PcapArgs};
use fabric_sim::trace::TlLayout;

#[derive(Subcommand, Debug)]
pub enum TlCommand {
    /// Copy a buffer from endpoint 0's memory into endpoint 1's (posted writes, or reads with
    /// `--pull`) over data links with bit errors, and check the copy byte for byte.
    ///
    /// The channel is flit-level, without a physical layer: the two data links are wired back to back,
    /// one 128-bit unit each way per unit time of x8 at 8 GT/s. Its faults are those of `linkctl link
    /// run`'s flit injector: bit flips at `--ber`, units dropped (`--drop`) and delivered twice
    /// (`--duplicate`); the data links' CRC and sequence numbers catch them and they replay. PHY-level
    /// faults (bursts, skew, dead lanes) are exercised by `linkctl link run`, not here.
    Copy(CopyArgs),
}

#[derive(clap::Args, Debug)]
pub struct CopyArgs {
    /// Bytes to copy, 1 to 4G (K, M, G: powers of 1024)
    #[arg(long, default_value = "64M")]
    pub size: String,
    /// Offset of the copy in both memories, in bytes, below 1G (any alignment; K, M, G as for --size)
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// Endpoint 1 reads the buffer from endpoint 0 (read requests and completions) instead of endpoint 0
    /// writing it
    #[arg(long)]
    pub pull: bool,
    /// Bit error rate on the wire, both ways, at least 0 and below 1/128 (the data links replay what it
    /// corrupts; the wire flips at most one bit per 128-bit unit)
    #[arg(long, default_value_t = 1e-7, value_parser = crate::check::float)]
    pub ber: f64,
    /// Probability per unit that the wire loses it (below 0.5)
    #[arg(long, default_value_t = 0.0, value_parser = crate::check::float)]
    pub drop: f64,
    /// Probability per unit that the wire delivers it twice (below 0.5)
    #[arg(long, default_value_t = 0.0, value_parser = crate::check::float)]
    pub duplicate: f64,
    /// Seed of the data and of the errors
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub trace: PcapArgs,
    /// Trace the units as each endpoint's data link takes them instead (after the wire's bit errors, lost
    /// and repeated units): corrupted ones show with a bad CRC
    #[arg(long, requires = "pcap")]
    pub pcap_received: bool,
}

/// Record in `trace` the `unit` that endpoint `side` sent, at `at`, if it was `seen` at the `point` the
/// trace records (endpoint 0 is node 0).
fn trace_unit(
    trace: &mut LinkTrace,
    point: TapPoint,
    side: Side,
    at: link_phy::time::Instant,
    unit: &[u8; 16],
    seen: TapPoint,
) {
    if seen == point {
        trace.unit(u16::from(side == Side::B), at, unit);
    }
}

pub fn run(cmd: TlCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        TlCommand::Copy(args) => copy(args),
    }
}

/// Largest copy: both memories are held.
const MAX_COPY: u64 = 4 << 30;

fn copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let size = parse_bytes(&args.size).context("--size")?;
    ensure!(
        (1..=MAX_COPY).contains(&size),
        "--size must be from 1 byte to 4G (both memories are held in RAM), not {size}"
    );
    let offset = parse_bytes(&args.offset).context("--offset")?;
    ensure!(offset < 1 << 30, "--offset must be below 1G, not {offset}");
    ensure_unit_wire_ber(args.ber)?;
    ensure_below("--drop", args.drop, 0.5)?;
    ensure_below("--duplicate", args.duplicate, 0.5)?;
    let (len, held) = layout(offset, size);
    let source = Span::new(
        len,
        held.clone(),
        crate::noise::noise(args.seed, held.clone().count()),
    );
    let target = Span::new(len, held.clone(), vec![0; held.clone().count()]);
    let mut map = AddressMap::<2>::new();
    map.insert(Window::flat(0, len)).context("address map")?;
    map.insert(Window::flat(1, len)).context("address map")?;
    let mut trace = args.trace.open(TlLayout::Transaction)?;
    let point = if args.pcap_received {
        TapPoint::Received
    } else {
        TapPoint::Sent
    };
    // The links' initialisation is traced too, from time 0.
    let mut init_tap = |side, at, unit: &[u8; 16], seen| {
        if let Some(trace) = trace.as_mut() {
            trace_unit(trace, point, side, at, unit, seen);
        }
    };
    let Some(mut pair) = Pair::new_tapped(source, target, &map, args.ber, args.seed, &mut init_tap) else {
        bail!("the data links did not come up");
    };
    pair.losses.drop = args.drop;
    pair.losses.duplicate = args.duplicate;
    let start = pair.link.now;
    let handle = if args.pull {
        pair.b.copy_from(Window::flat(0, len).base + offset, offset, size)
    } else {
        pair.a.copy_to(offset, Window::flat(1, len).base + offset, size)
    }
    .context("cannot start the copy")?;
    let started = WallClock::now();
    let mut result = None;
    // Far more unit times than the copy needs even at a high error rate.
    let limit = 64 + 4 * size / 16 + 10_000_000;
    for _ in 0..limit {
        let mut on_event = |side, event| {
            if let Event::Done(Done::Transfer {
                handle: h, result: r, ..
            }) = event
            {
                if h == handle && side == if args.pull { Side::B } else { Side::A } {
                    result = Some(r);
                }
            }
        };
        match trace.as_mut() {
            None => pair.step(&mut on_event),
            Some(trace) => {
                pair.step_tapped(&mut on_event, &mut |side, at, unit, seen| {
                    trace_unit(trace, point, side, at, unit, seen)
                });
                trace.advance(pair.link.now);
                trace.check()?;
            }
        }
        if result.is_some() {
            break;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let trace = trace.map(LinkTrace::finish).transpose()?;
    let elapsed_ps = (pair.link.now.as_ps() - start.as_ps()) as f64;
    // A copy that failed or did not finish is reported as the run it was, not as bad input.
    let (moved, failure) = match result {
        Some(Ok(bytes)) => (bytes, None),
        Some(Err(failure)) => (0, Some(failure.to_string())),
        None => (0, Some(format!("it did not finish in {limit} unit times"))),
    };
    let range = (offset - held.start) as usize..(offset + size - held.start) as usize;
    let (a, b) = (&pair.a.memory().bytes, pair.b.memory());
    let verified = failure.is_none() && a[range.clone()] == b.bytes[range.clone()];
    let untouched = b.stray_write.is_none()
        && b.bytes[..range.start]
            .iter()
            .chain(&b.bytes[range.end..])
            .all(|&v| v == 0);
    let (ca, cb) = (pair.a.counters(), pair.b.counters());
    let (la, lb) = (pair.link.a.counters(), pair.link.b.counters());
    let gbps = moved as f64 / elapsed_ps * 1e3;
    let direction = if args.pull {
        Direction::FromPeer
    } else {
        Direction::ToPeer
    };
    let value = json!({
        "bytes": size,
        "bytes_moved": moved,
        "verified": verified && untouched,
        "failure": failure,
        "direction": format!("{direction:?}"),
        "offset": offset,
        "packets": la.packets_sent + lb.packets_sent,
        "posted_writes": ca.requester.posted_writes + cb.requester.posted_writes,
        "reads": ca.requester.reads + cb.requester.reads,
        "replays": la.replays + lb.replays,
        "crc_errors": la.crc_errors + lb.crc_errors,
        "bits_flipped": pair.wire.bits_flipped,
        "units_dropped": pair.losses.dropped,
        "units_duplicated": pair.losses.duplicated,
        "simulated_us": elapsed_ps / 1e6,
        "bandwidth_gbps": gbps,
        "wall_seconds": wall,
        "trace": trace.as_ref().map(summary_json),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let how = if args.pull { "reads" } else { "posted writes" };
        match &failure {
            Some(failure) => println!("copy FAILED ({how}, endpoint 0 to endpoint 1): {failure}"),
            None => println!(
                "copied {} ({how}) from endpoint 0 to endpoint 1: {}",
                plural(moved, "byte"),
                if verified && untouched {
                    "verified byte for byte"
                } else {
                    "WRONG"
                }
            ),
        }
        println!(
            "{}; on the wire {} flipped, {} dropped, {} duplicated; {}, {}",
            plural(la.packets_sent + lb.packets_sent, "packet"),
            plural(pair.wire.bits_flipped, "bit"),
            plural(pair.losses.dropped, "unit"),
            pair.losses.duplicated,
            plural(la.crc_errors + lb.crc_errors, "CRC error"),
            plural(la.replays + lb.replays, "replay")
        );
        println!(
            "{:.1} us of simulated time over x8 at 8 GT/s: {gbps:.2} GB/s; {wall:.2} s of wall time",
            elapsed_ps / 1e6
        );
        if let Some(t) = &trace {
            println!("trace: {}", summary_text(t));
        }
    }
    Ok(if verified && untouched {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

/// The size of each memory for a copy of `size` bytes at `offset`, and the part of it held (`Span`): the
/// copy's range and the address map's window granule (4 KiB) either side of it (from address 0 at
/// least), in whole granules, so that a write just beyond the range lands in memory that is checked.
fn layout(offset: u64, size: u64) -> (u64, Range<u64>) {
    let granule = link_tl::address::WINDOW_ALIGN;
    let held = offset.saturating_sub(granule)..offset + size + granule;
    (held.end.div_ceil(granule) * granule, held)
}

/// A memory of `size` bytes of which only `held` is kept (so that a small copy at a large offset does not
/// take memory for every byte below it): the rest reads as 0, and the first write to it is recorded, as a
/// copy must not write outside its range.
struct Span {
    size: u64,
    held: Range<u64>,
    bytes: Vec<u8>,
    /// The local address of the first write outside `held`.
    stray_write: Option<u64>,
}

impl Span {
    fn new(size: u64, held: Range<u64>, bytes: Vec<u8>) -> Span {
        debug_assert_eq!(held.clone().count(), bytes.len());
        Span {
            size,
            held,
            bytes,
            stray_write: None,
        }
    }

    /// Where `len` bytes at `addr` are in `bytes`, if they are all held.
    fn held(&self, addr: u64, len: usize) -> Option<Range<usize>> {
        let end = addr + len as u64;
        (self.held.start <= addr && end <= self.held.end)
            .then(|| (addr - self.held.start) as usize..(end - self.held.start) as usize)
    }
}

impl Memory for Span {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        in_range(self.size, addr, out.len())?;
        match self.held(addr, out.len()) {
            Some(at) => out.copy_from_slice(&self.bytes[at]),
            None => {
                for (a, byte) in (addr..).zip(out.iter_mut()) {
                    *byte = self.held(a, 1).map_or(0, |at| self.bytes[at.start]);
                }
            }
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        in_range(self.size, addr, data.len())?;
        match self.held(addr, data.len()) {
            Some(at) => self.bytes[at].copy_from_slice(data),
            None => {
                for (a, &byte) in (addr..).zip(data) {
                    match self.held(a, 1) {
                        Some(at) => self.bytes[at.start] = byte,
                        None => {
                            self.stray_write.get_or_insert(a);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each memory holds the copy's range and 4 KiB either side, whatever its alignment: a copy ending on a
    /// 4 KiB boundary had held nothing after it, its memory ending there, so that a write beyond the range
    /// was refused by the memory, not recorded.
    #[test]
    fn each_memory_holds_4_kib_either_side_of_the_copy() {
        for (offset, size) in [(0, 64 << 20), (0, 1), (4096, 4096), (3, 4093), (5000, 1 << 20)] {
            let (len, held) = layout(offset, size);
            assert_eq!(
                held,
                offset.saturating_sub(4096)..offset + size + 4096,
                "{offset} {size}"
            );
            assert!(held.end <= len && len % 4096 == 0, "{offset} {size}: {len}");
        }
    }

    /// Only the held range takes memory: the rest reads as 0 and a write to it is recorded, whether the
    /// access lies wholly outside or straddles the edge; accesses beyond the size are refused.
    #[test]
    fn a_span_holds_its_range_and_records_writes_outside_it() {
        let mut span = Span::new(1 << 30, 4096..8192, vec![7; 4096]);
        let mut out = [1u8; 8];
        span.read(4092, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 0, 7, 7, 7, 7]);
        span.write(4096, &[9; 16]).unwrap();
        assert_eq!(
            (span.bytes[..17].to_vec(), span.stray_write),
            ([[9; 16].as_slice(), &[7]].concat(), None)
        );
        span.write(8190, &[5; 4]).unwrap();
        assert_eq!((&span.bytes[4094..], span.stray_write), (&[5, 5][..], Some(8192)));
        span.write(100, &[5]).unwrap();
        assert_eq!(span.stray_write, Some(8192), "the first is kept");
        assert!(span.read((1 << 30) - 4, &mut out).is_err());
        assert!(span.write(u64::MAX, &[1]).is_err());
    }
}
