//! `linkctl link`: simulated links.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

mod capture;
mod decode;
mod run;
mod train;

#[derive(Subcommand, Debug)]
pub enum LinkCommand {
    /// Two ports train over a channel model; print the states they went through, the negotiated width,
    /// rate and line code, and the time to L0 (exit status 3 if the link does not come up)
    Train(train::TrainArgs),
    /// Traffic across a trained link (physical layer, data link, faults), every packet checked by the
    /// receiver: packets delivered, duplicates and corruptions (must be 0), replays, NAKs, retrains,
    /// goodput (exit status 3 if the link did not come up, or anything was lost, duplicated or corrupted)
    // Boxed: its options make it several times the size of the other commands.
    Run(Box<run::RunArgs>),
    /// Read a capture of a link's lanes (`--capture`'s directory) as the partner's port reads it: each
    /// lane's ordered sets and errors, the lanes deskewed and unstriped, and the data stream's packets,
    /// control flits and idle, as `dl decode` prints them (exit status 2 if anything does not check)
    Decode(decode::DecodeArgs),
}

pub fn run(cmd: LinkCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LinkCommand::Train(args) => train::run(args),
        LinkCommand::Run(args) => run::run(*args),
        LinkCommand::Decode(args) => decode::decode(args),
    }
}

/// A data link's counters as JSON (one link's, or several added up).
pub(crate) fn dl_counters_json(c: &link_dl::DlCounters) -> Value {
    json!({
        "packets_sent": c.packets_sent,
        "packets_transmitted": c.packets_transmitted,
        "packets_received": c.packets_received,
        "flits_transmitted": c.flits_transmitted,
        "control_sent": c.control_sent,
        "init_sent": c.init_sent,
        "crc_errors": c.crc_errors,
        "malformed": c.malformed,
        "resync_discards": c.resync_discards,
        "naks_sent": c.naks_sent,
        "naks_received": c.naks_received,
        "replays": c.replays,
        "replay_timeouts": c.replay_timeouts,
        "retrain_requests": c.retrain_requests,
        "duplicates_discarded": c.duplicates,
        "out_of_sequence": c.out_of_sequence,
        "credit_stalls": c.credit_stalls,
        "replay_stalls": c.replay_stalls,
        "credit_overruns": c.credit_overruns,
        "credit_protocol_errors": c.credit_protocol_errors,
        "fec_blocks": c.fec_blocks,
        "fec_corrections": c.fec_corrections,
        "fec_uncorrectable": c.fec_uncorrectable,
    })
}
