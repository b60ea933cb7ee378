//! `linkctl link`: simulated links.

use std::process::ExitCode;

use clap::Subcommand;

mod train;

#[derive(Subcommand, Debug)]
pub enum LinkCommand {
    /// Two ports train over a channel model; print the states they went through, the negotiated width,
    /// rate and line code, and the time to L0 (exit status 3 if the link does not come up)
    Train(train::TrainArgs),
}

pub fn run(cmd: LinkCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LinkCommand::Train(args) => train::run(args),
    }
}
