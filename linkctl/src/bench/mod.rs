//! `linkctl bench`: per-core throughput of each layer's hot paths, against `memcpy` in the same run.

use anyhow::{ensure, Context};
use clap::Subcommand;

use crate::sim::parse_size;

mod dl;
mod measure;
mod phy;
mod tl;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Payload bytes per call: a multiple of 1K from 1K to 64M (K, M, G: powers of 1024)
    #[arg(long, default_value = "64K")]
    pub bytes: String,
    /// Timed batches per component; the median is reported
    #[arg(long, default_value_t = 11)]
    pub samples: usize,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The physical layer: 8b/10b, scramblers, 128b/130b, striping
    Phy(BenchArgs),
    /// The data link layer: the packet path of 128-byte payloads between two data links (frame, CRC,
    /// replay bookkeeping, receive checks, acknowledgements and credits flowing back)
    Dl(BenchArgs),
    /// The transaction layer: packetizer and reassembler
    Tl(BenchArgs),
}

/// What a bench measures, its arguments checked.
pub struct Plan {
    /// Payload bytes per call.
    pub bytes: usize,
    /// Timed batches per component.
    pub samples: usize,
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Phy(args) => measure::print("bench phy", &phy::rows(&plan(&args)?)?, args.json),
        BenchCommand::Dl(args) => measure::print("bench dl", &dl::rows(&plan(&args)?)?, args.json),
        BenchCommand::Tl(args) => measure::print("bench tl", &tl::rows(&plan(&args)?)?, args.json),
    }
}

fn plan(args: &BenchArgs) -> anyhow::Result<Plan> {
    let bytes = parse_size(&args.bytes).context("--bytes")?;
    ensure!(
        (1 << 10..=64 << 20).contains(&bytes) && bytes % 1024 == 0,
        "--bytes must be a multiple of 1K between 1K and 64M, not {}",
        args.bytes.trim()
    );
    ensure!(
        (1..=1000).contains(&args.samples),
        "--samples must be between 1 and 1000, not {}",
        args.samples
    );
    Ok(Plan {
        bytes: bytes as usize,
        samples: args.samples,
    })
}
