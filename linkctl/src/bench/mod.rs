//! `linkctl bench`: per-core throughput against memcpy.

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {}
}
