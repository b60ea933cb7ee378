//! `linkctl phy`: line coding and scrambling of raw data, for checking against other implementations.

use std::process::ExitCode;

use clap::Subcommand;

pub(crate) mod bits;
mod blocks;
pub(crate) mod code;
pub(crate) mod events;
mod scramble;
mod training_set;

#[derive(Subcommand, Debug)]
pub enum PhyCommand {
    /// Encode raw bytes from stdin into line-code groups (8b/10b) or blocks (128b/130b), one per line
    Encode(code::EncodeArgs),
    /// Decode line-code groups (whitespace-separated hex) or blocks from stdin into raw bytes
    Decode(code::DecodeArgs),
    /// XOR stdin with the scrambler keystream from reset
    Scramble(scramble::ScrambleArgs),
}

pub fn run(cmd: PhyCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PhyCommand::Encode(args) => code::encode(args).map(|()| ExitCode::SUCCESS),
        PhyCommand::Decode(args) => code::decode(args),
        PhyCommand::Scramble(args) => scramble::scramble(args).map(|()| ExitCode::SUCCESS),
    }
}
