//! `linkctl dl`: data link layer tools.

use clap::Subcommand;

mod crc;

#[derive(Subcommand, Debug)]
pub enum DlCommand {
    /// Print the packet CRC (CRC-32C) of stdin as 8 hex digits, or describe the CRC with --describe
    Crc(crc::CrcArgs),
}

pub fn run(cmd: DlCommand) -> anyhow::Result<()> {
    match cmd {
        DlCommand::Crc(args) => crc::crc(args),
    }
}
