//! `linkctl dl`: data link layer tools.

use std::process::ExitCode;

use clap::Subcommand;

mod crc;
pub(crate) mod decode;
pub(crate) mod summary;

#[derive(Subcommand, Debug)]
pub enum DlCommand {
    /// Print the packet CRC (CRC-32C) of the bytes on stdin as 8 hex digits, or describe the CRC with
    /// --describe. A packet's CRC covers all of it but the CRC field: give it without bytes 12 to 15 of
    /// its header flit
    Crc(crc::CrcArgs),
    /// Decode a stream of 16-byte units as a receiver reads them (packets, control and identity flits,
    /// idle, and what it discards after an error until a control flit checks) from hex arguments or
    /// stdin, as it is read (any length, in little memory: input that is not hex or not whole units ends
    /// it where it is found; empty input is an error); exit status 2 if any does not check
    Decode(decode::DecodeArgs),
}

pub fn run(cmd: DlCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DlCommand::Crc(args) => crc::crc(args).map(|()| ExitCode::SUCCESS),
        DlCommand::Decode(args) => decode::decode(args),
    }
}
