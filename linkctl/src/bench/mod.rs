//! `linkctl bench`: per-core throughput of each layer's hot paths, against `memcpy` in the same run.

use clap::Subcommand;

mod dl;
mod measure;
mod phy;
mod tl;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Payload bytes per call
    #[arg(long, default_value_t = 64 * 1024)]
    pub bytes: usize,
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

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Phy(args) => {
            check(&args)?;
            measure::print("bench phy", &phy::rows(&args)?, args.json)
        }
        BenchCommand::Dl(args) => {
            check(&args)?;
            measure::print("bench dl", &dl::rows(&args)?, args.json)
        }
        BenchCommand::Tl(args) => {
            check(&args)?;
            measure::print("bench tl", &tl::rows(&args)?, args.json)
        }
    }
}

fn check(args: &BenchArgs) -> anyhow::Result<()> {
    if args.bytes < 1024 || args.bytes > 64 << 20 || args.bytes % 1024 != 0 {
        anyhow::bail!(
            "--bytes must be a multiple of 1024 between 1 KiB and 64 MiB, not {}",
            args.bytes
        );
    }
    if args.samples == 0 || args.samples > 1000 {
        anyhow::bail!("--samples must be between 1 and 1000, not {}", args.samples);
    }
    Ok(())
}
