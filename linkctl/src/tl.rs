//! `linkctl tl`: the transaction layer between two endpoints.

use std::process::ExitCode;
use std::time::Instant as WallClock;

use anyhow::{bail, ensure, Context};
use clap::Subcommand;
use link_tl::endpoint::pair::{Pair, Side};
use link_tl::endpoint::{Direction, Done, Event};
use link_tl::{AddressMap, Window};
use serde_json::json;

use crate::check::{ensure_below, ensure_unit_wire_ber};
use crate::sim::parse_bytes;

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
    #[arg(long, default_value_t = 1e-7)]
    pub ber: f64,
    /// Probability per unit that the wire loses it (below 0.5)
    #[arg(long, default_value_t = 0.0)]
    pub drop: f64,
    /// Probability per unit that the wire delivers it twice (below 0.5)
    #[arg(long, default_value_t = 0.0)]
    pub duplicate: f64,
    /// Seed of the data and of the errors
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
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
    // Memories rounded up to the address map's window granule.
    let granule = link_tl::address::WINDOW_ALIGN;
    let len = (offset + size).div_ceil(granule) * granule;
    let mut source = crate::noise::noise(args.seed, len as usize);
    let mut target = vec![0u8; len as usize];
    let mut map = AddressMap::<2>::new();
    map.insert(Window::flat(0, len)).context("address map")?;
    map.insert(Window::flat(1, len)).context("address map")?;
    let Some(mut pair) = Pair::new(&mut source[..], &mut target[..], &map, args.ber, args.seed) else {
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
        pair.step(&mut |side, event| {
            if let Event::Done(Done::Transfer {
                handle: h, result: r, ..
            }) = event
            {
                if h == handle && side == if args.pull { Side::B } else { Side::A } {
                    result = Some(r);
                }
            }
        });
        if result.is_some() {
            break;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let elapsed_ps = (pair.link.now.as_ps() - start.as_ps()) as f64;
    // A copy that failed or did not finish is reported as the run it was, not as bad input.
    let (moved, failure) = match result {
        Some(Ok(bytes)) => (bytes, None),
        Some(Err(failure)) => (0, Some(failure.to_string())),
        None => (0, Some(format!("it did not finish in {limit} unit times"))),
    };
    let range = offset as usize..(offset + size) as usize;
    let (a, b) = (pair.a.memory(), pair.b.memory());
    let verified = failure.is_none() && a[range.clone()] == b[range.clone()];
    let untouched = b[..range.start].iter().chain(&b[range.end..]).all(|&v| v == 0);
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
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let how = if args.pull { "reads" } else { "posted writes" };
        match &failure {
            Some(failure) => println!("copy FAILED ({how}, endpoint 0 to endpoint 1): {failure}"),
            None => println!(
                "copied {moved} bytes ({how}) from endpoint 0 to endpoint 1: {}",
                if verified && untouched {
                    "verified byte for byte"
                } else {
                    "WRONG"
                }
            ),
        }
        println!(
            "{} packets; on the wire {} bits flipped, {} units dropped, {} duplicated; {} CRC errors, {} replays",
            value["packets"],
            value["bits_flipped"],
            value["units_dropped"],
            value["units_duplicated"],
            value["crc_errors"],
            value["replays"]
        );
        println!(
            "{:.1} us of simulated time over x8 at 8 GT/s: {gbps:.2} GB/s; {wall:.2} s of wall time",
            elapsed_ps / 1e6
        );
    }
    Ok(if verified && untouched {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
