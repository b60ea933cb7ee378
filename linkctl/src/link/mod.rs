//! `linkctl link`: simulated links.

use std::process::ExitCode;

use clap::Subcommand;

mod run;
mod train;

#[derive(Subcommand, Debug)]
pub enum LinkCommand {
    /// Two ports train over a channel model; print the states they went through, the negotiated width,
    /// rate and line code, and the time to L0 (exit status 3 if the link does not come up)
    Train(train::TrainArgs),
    /// Traffic across a trained link (physical layer, data link, faults), every packet checked by the
    /// receiver: packets delivered, duplicates and corruptions (must be 0), replays, NAKs, retrains,
    /// goodput (exit status 3 if anything was lost, duplicated or corrupted)
    Run(run::RunArgs),
}

pub fn run(cmd: LinkCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LinkCommand::Train(args) => train::run(args),
        LinkCommand::Run(args) => run::run(args),
    }
}
