//! `linkctl link`: simulated links.

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum LinkCommand {}

pub fn run(cmd: LinkCommand) -> anyhow::Result<()> {
    match cmd {}
}
