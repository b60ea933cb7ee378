//! `linkctl sim`: collectives on a simulated fabric, reported as nccl-tests reports them.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

use anyhow::{bail, ensure, Context};
use clap::{Args, Subcommand};
use fabric_sim::collective::{Kind, CHANNEL_BUFFER_BYTES, PACKET_BYTES};
use fabric_sim::run::{self, Algo, FaultSpec, Report, Sweep};
use fabric_sim::topology::{check_node_name, NodeKind, Topology, MAX_FILE_BYTES};
use fabric_sim::traffic::{Background, BackgroundReport, Pattern, Spread, HOTSPOT_SHARE, PAYLOAD_BYTES};
use link_phy::time::Duration;
use serde_json::json;
use switch_fw::switch::SwitchCounters;

use crate::check::{ensure_once, ensure_within};

mod plot;
mod traffic;
mod trunks;

use trunks::{trunk_lines, trunks_json};

/// Exit status when a result did not check out.
const EXIT_WRONG: u8 = 3;

#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// All-reduce (sum) of every GPU's buffer
    Allreduce(SimArgs),
    /// All-gather: every GPU's slice on every GPU (size is the gathered total)
    Allgather(SimArgs),
    /// Reduce-scatter: the sum, a slice on each GPU (size is each GPU's input)
    Reducescatter(SimArgs),
    /// Broadcast from GPU 0
    Broadcast(SimArgs),
    /// All-to-all: every GPU sends a distinct block to every GPU (size is each GPU's send buffer, one
    /// block per GPU)
    Alltoall(SimArgs),
    /// Synthetic traffic (uniform, permutation, neighbor, hot spot) at offered loads: the throughput the
    /// fabric accepts and the packets' latency at each load
    Traffic(traffic::TrafficArgs),
}

/// `--topology`, as `sim` and `fabric` take it.
#[derive(Args, Debug)]
pub struct TopologyArg {
    /// Fabric: mesh2, mesh4, dgx1-hcm, dgx-a100, dgx-h100, pcie8, fat-tree-256 (or fat-tree-N: N GPUs, a
    /// multiple of 16 from 32 to 1024), or a TOML file
    #[arg(long, default_value = "dgx-h100")]
    pub topology: String,
}

impl TopologyArg {
    /// The topology named, built in or from its file.
    pub fn load(&self) -> anyhow::Result<Topology> {
        load_topology("--topology", &self.topology)
    }
}

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub topology: TopologyArg,
    /// Smallest message (bytes; K, M, G suffixes are powers of 1024)
    #[arg(long, default_value = "1K")]
    pub min: String,
    /// Largest message (up to 512G)
    #[arg(long, default_value = "64M")]
    pub max: String,
    /// Algorithm: ring (the default), tree (all-reduce: NCCL's double binary tree), switch-reduce
    /// (all-reduce on NVSwitch systems), p2p (all-to-all, its only and default algorithm)
    #[arg(long)]
    pub algo: Option<String>,
    /// What a GPU holds of each connection of the ring and the tree, as NCCL_BUFFSIZE (K, M, G suffixes;
    /// 1K to 64M): a sender sends only into room there, and the tree's chunks are an eighth of it at most
    /// [default: 4M]
    #[arg(long)]
    pub buffsize: Option<String>,
    /// Run on some of the fabric's GPUs only, as CUDA_VISIBLE_DEVICES does: a count (the first N) or
    /// names and runs, e.g. `gpu0,gpu2,gpu4,gpu6` or `gpu0..gpu7,gpu16..gpu23`; the other GPUs and
    /// their links are left out
    #[arg(long, value_name = "N|GPU,GPU,...")]
    pub gpus: Option<String>,
    /// Seed of the data and of the errors
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub faults: FaultArgs,
    /// Synthetic traffic from every GPU beside the collective for the whole sweep, as `sim traffic` makes
    /// it: PATTERN:LOAD, e.g. `uniform:0.3` (patterns uniform, permutation, neighbor, hotspot; the load a
    /// fraction of each GPU's injection bandwidth); 128-byte writes
    #[arg(long, value_name = "PATTERN:LOAD")]
    pub background: Option<String>,
    /// How the background traffic spreads over a GPU's ports: links or flow (as `sim traffic --spread`)
    #[arg(long, default_value = "links", requires = "background")]
    pub background_spread: String,
    /// Run the background traffic on these GPUs instead of the collective's, as another job on the same
    /// fabric: a count (the first N), names and runs as `--gpus` takes them (in the order named: the
    /// first is the hot spot), or `rest` (every GPU the collective, as `--gpus` gives it, does not use);
    /// the two may overlap, and only GPUs of neither are left out
    #[arg(long, value_name = "N|GPU,GPU,...|rest", requires = "background")]
    pub background_gpus: Option<String>,
    /// Print one JSON object instead of the table
    #[arg(long)]
    pub json: bool,
    /// Show the N busiest trunks, each way: the share of its rate that packets took from the first
    /// size's start to the end, and replays (JSON `trunks`; each size's in its row)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub trunks: usize,
    /// Write a plot of bus bandwidth against message size (SVG)
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub traces: TraceArgs,
}

/// Traces of the links, as `sim` and `sim traffic` take them.
#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(flatten)]
    pub pcap: crate::trace::PcapArgs,
    /// Trace the units as each receiving data link takes them instead (after the wires' bit errors, framed
    /// as the data link frames them): corrupted ones show with a bad CRC. A record's time is that of the
    /// burst of units its first came in
    #[arg(long, requires = "pcap")]
    pub pcap_received: bool,
    /// Write waveforms of every link direction's state, activity and replay-buffer occupancy (VCD, for
    /// GTKWave; signals in docs/spec.md section 8)
    #[arg(long, value_name = "FILE")]
    pub vcd: Option<std::path::PathBuf>,
    /// Most value changes the waveforms hold; the rest are counted, not written
    #[arg(long, default_value_t = 10_000_000, requires = "vcd")]
    pub vcd_limit: u64,
    /// Keep the trace and the waveforms to the links with an end at one of these nodes (names,
    /// comma-separated, as the topology and the report's `# Trace nodes` line name them)
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub trace_nodes: Vec<String>,
}

/// Whether writing `x` and `y` would write one file. Two that exist are one if they are the same regular
/// file, pipe or socket (through links, hard or symbolic, and by any name, `/proc/<pid>/fd/1` or
/// `/dev/../dev/stdout`; `/dev/null`, terminals and other devices take any number of writers); a file yet
/// to be made is named the same way if its folder and name are.
fn same_file(x: &std::path::Path, y: &std::path::Path) -> std::io::Result<bool> {
    if let (Ok(a), Ok(b)) = (std::fs::metadata(x), std::fs::metadata(y)) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::{FileTypeExt, MetadataExt};
            let device =
                |m: &std::fs::Metadata| m.file_type().is_char_device() || m.file_type().is_block_device();
            return Ok(!device(&a) && (a.dev(), a.ino()) == (b.dev(), b.ino()));
        }
        #[cfg(not(unix))]
        return Ok(a.is_file() && b.is_file() && x.canonicalize()? == y.canonicalize()?);
    }
    // Where a path leads: absolute, its folder's links and `..` resolved when the folder exists.
    let resolved = |path: &std::path::Path| -> std::io::Result<std::path::PathBuf> {
        let path = std::path::absolute(path)?;
        Ok(match (path.parent(), path.file_name()) {
            (Some(folder), Some(name)) => folder.canonicalize().map_or(path.clone(), |f| f.join(name)),
            _ => path,
        })
    };
    Ok(resolved(x)? == resolved(y)?)
}

/// The standard stream writing `path` would write to, as an error message names it: standard output, where
/// the report goes, or standard error, where errors and progress go. A name of one (`/dev/stdout`,
/// `/dev/fd/1`, `/proc/self/fd/1`; `/dev/stderr`, `/dev/fd/2`, `/proc/self/fd/2`), or by any name the file,
/// pipe or socket it was sent to ([`same_file`]'s rule, so that a trace may go to `/dev/null` with the
/// report).
pub(crate) fn standard_stream(path: &std::path::Path) -> std::io::Result<Option<&'static str>> {
    let streams = [
        (
            "standard output, where the report goes",
            ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"],
        ),
        (
            "standard error, where errors and progress go",
            ["/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"],
        ),
    ];
    for (stream, names) in streams {
        let named = names
            .iter()
            .any(|name| std::path::absolute(path).is_ok_and(|p| p == std::path::Path::new(name)));
        if named || same_file(path, std::path::Path::new(names[1]))? {
            return Ok(Some(stream));
        }
    }
    Ok(None)
}

impl TraceArgs {
    /// `--pcap` with its limit.
    pub fn pcap(&self) -> Option<run::Recording> {
        self.pcap.pcap.clone().map(|path| run::Recording {
            path,
            limit: self.pcap.pcap_limit,
            name: "--pcap".into(),
            only_nodes: self.trace_nodes.clone(),
            received: self.pcap_received,
        })
    }

    /// `--vcd` with its limit.
    pub fn vcd(&self) -> Option<run::Recording> {
        self.vcd.clone().map(|path| run::Recording {
            path,
            limit: self.vcd_limit,
            name: "--vcd".into(),
            only_nodes: self.trace_nodes.clone(),
            received: false,
        })
    }

    /// An error if two of the files asked for (the trace, the waveforms and `plot`) are one, or one is
    /// standard output, where the report goes, or standard error, where errors and progress go: each would
    /// overwrite the other's bytes.
    pub fn check_files(&self, plot: Option<&std::path::Path>) -> anyhow::Result<()> {
        ensure!(
            self.trace_nodes.is_empty() || self.any(),
            "--trace-nodes keeps the trace (--pcap) or the waveforms (--vcd) to some nodes' links: give one"
        );
        let files = [
            ("--pcap", self.pcap.pcap.as_deref()),
            ("--vcd", self.vcd.as_deref()),
            ("--plot", plot),
        ];
        for &(a, path) in &files {
            if let Some(x) = path {
                if let Some(stream) = standard_stream(x)? {
                    bail!("{a} names {stream}: give it a file of its own");
                }
            }
        }
        for (i, &(a, path_a)) in files.iter().enumerate() {
            for &(b, path_b) in &files[i + 1..] {
                if let (Some(x), Some(y)) = (path_a, path_b) {
                    if same_file(x, y)? {
                        bail!("{a} and {b} name the same file, {x:?}");
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether a trace or waveforms are asked for.
    pub fn any(&self) -> bool {
        self.pcap.pcap.is_some() || self.vcd.is_some()
    }
}

/// What a trace and waveforms hold, as lines of the tables of `sim` and `sim traffic`. A trace's
/// pseudo-headers number the nodes of `topology`, the fabric the run simulated (which `--gpus` and
/// `--background-gpus` make anew, numbering what they keep afresh), so the lines list them.
pub fn trace_lines(
    trace: Option<fabric_sim::trace::TraceSummary>,
    waves: Option<(u64, u64)>,
    topology: &Topology,
) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(t) = trace {
        lines.push(format!("# Trace: {}", crate::trace::summary_text(&t)));
        let nodes: Vec<String> = (topology.nodes.iter().enumerate())
            .map(|(x, n)| format!("{x} {}", n.name))
            .collect();
        lines.push(format!("# Trace nodes: {}", nodes.join(", ")));
    }
    if let Some((changes, dropped)) = waves {
        lines.push(format!(
            "# Waveforms: {changes} value changes written, {dropped} left out by --vcd-limit"
        ));
    }
    lines
}

/// What a trace and waveforms hold, as the JSON of `sim` and `sim traffic` reports it: with the names
/// of the nodes the trace's pseudo-headers number (see [`trace_lines`]).
pub fn trace_json(
    trace: Option<fabric_sim::trace::TraceSummary>,
    waves: Option<(u64, u64)>,
    topology: &Topology,
) -> (serde_json::Value, serde_json::Value) {
    let nodes: Vec<&str> = topology.nodes.iter().map(|n| n.name.as_str()).collect();
    (
        json!(trace.map(|t| {
            let mut v = crate::trace::summary_json(&t);
            v["nodes"] = json!(nodes);
            v
        })),
        json!(waves.map(|(changes, dropped)| json!({"changes": changes, "dropped": dropped}))),
    )
}

/// A file a plot goes to, opened before the run so that a path that cannot be written is said at once,
/// not after the run. A file it made and never wrote (the run stopped with an error) is removed, and one
/// that was there is left as it was until the plot replaces it.
struct PlotFile {
    path: std::path::PathBuf,
    file: std::fs::File,
    /// Whether the file is this run's: it did not exist before.
    made: bool,
    written: bool,
}

impl PlotFile {
    fn create(path: Option<&std::path::Path>) -> anyhow::Result<Option<PlotFile>> {
        let Some(path) = path else { return Ok(None) };
        // Made here only if nothing, not even a symbolic link, was at the path: created exclusively, so
        // that what is removed on an error is only ever this run's own file.
        let made = std::fs::symlink_metadata(path).is_err();
        let mut open = std::fs::OpenOptions::new();
        open.write(true);
        if made {
            open.create_new(true);
        } else {
            open.create(true).truncate(false);
        }
        let file = open
            .open(path)
            .with_context(|| format!("cannot create --plot file {path:?}"))?;
        Ok(Some(PlotFile {
            path: path.to_path_buf(),
            file,
            made,
            written: false,
        }))
    }

    fn write(mut self, svg: &str) -> anyhow::Result<()> {
        self.written = true;
        let what = || format!("cannot write --plot file {:?}", self.path);
        // A regular file is cut to the plot; a device (`/dev/null`) cannot be, nor needs to be.
        if self.file.metadata().is_ok_and(|m| m.is_file()) {
            self.file.set_len(0).with_context(what)?;
        }
        self.file.write_all(svg.as_bytes()).with_context(what)
    }
}

impl Drop for PlotFile {
    fn drop(&mut self) {
        if self.made && !self.written {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The trunks of `topology` whose latency holds more in a round trip than a data link may have in flight
/// on a channel, with packets of `payload_bytes` (128 for collectives), as the JSON of `sim` and `sim
/// traffic` lists them (`window_limited`): their ends, rate, latency and the most they can carry.
pub fn window_limited(topology: &Topology, payload_bytes: usize) -> serde_json::Value {
    let (trunks, _) = fabric_sim::manager::gang(topology);
    let name = |x: usize| topology.nodes[x].name.as_str();
    let flits = topology.flits_per_packet(payload_bytes);
    (trunks.iter())
        .filter_map(|t| {
            let most = t.window_limit_gbps(flits)?;
            Some(json!({
                "a": name(t.a.0),
                "b": name(t.b.0),
                "gbps": t.gbps,
                "latency_ns": t.latency_ns,
                "most_gbps": most,
            }))
        })
        .collect()
}

/// Notes for the table on the trunks [`window_limited`] lists: the first four, and how many more.
pub fn window_notes(limited: &serde_json::Value) -> Vec<String> {
    let all = limited.as_array().map_or(&[][..], Vec::as_slice);
    let mut notes: Vec<String> = (all.iter().take(4))
        .map(|t| {
            format!(
                "# Note: trunk {} - {} ({:.1} GB/s, {:.0} ns): a round trip holds more than a channel's credits \
                 and replay buffer allow in flight, so it carries at most about {:.1} GB/s",
                t["a"].as_str().unwrap_or_default(),
                t["b"].as_str().unwrap_or_default(),
                t["gbps"].as_f64().unwrap_or_default(),
                t["latency_ns"].as_f64().unwrap_or_default(),
                t["most_gbps"].as_f64().unwrap_or_default()
            )
        })
        .collect();
    if all.len() > 4 {
        notes.push(format!("# Note: and {} more trunks like them", all.len() - 4));
    }
    notes
}

/// That `count` faults were due after `run` had ended, `simulated` after its start, and did not happen.
pub fn late_faults(run: &str, simulated: Duration, count: usize) -> String {
    format!(
        "{run} ended {:.3} us after its start (links training included): {count} of the faults {} due after \
         that and did not happen",
        simulated.as_ps() as f64 / 1e6,
        if count == 1 { "was" } else { "were" }
    )
}

/// The note for a run (`run`: "the sweep", "the run") that ended before the fabric manager's new routes,
/// which its delay held back or, `links`, links still training (a repaired one, say): the manager routes
/// once every live link is up.
pub fn replan_pending(run: &str, links: bool) -> String {
    let why = if links {
        "links still training: it routes once every live link is up"
    } else {
        "--replan-delay"
    };
    format!(
        "{run} ended before the fabric manager's new routes after its last failure or repair ({why}): the \
         switches' old routes, less their failed ports, carried it to the end, and what the new routes \
         would have found (a cut, say) did not come into it"
    )
}

/// What held the fabric manager's new routes back, as the JSON's `replan_waits_for` says it.
pub fn replan_waits_for(links: bool) -> &'static str {
    if links {
        "links_training"
    } else {
        "replan_delay"
    }
}

/// What failover did, as the JSON of `sim` and `sim traffic` reports it.
/// `refusals`: why the fabric manager refused the drains it refused, as the report gives them.
pub fn failover_json(f: &fabric_sim::net::FailoverStats, refusals: &[String]) -> serde_json::Value {
    let mut json = json!({
        "links_failed": f.links_failed,
        "links_degraded": f.links_degraded,
        "units_lost": f.units_lost,
        "packets_taken_back": f.packets_taken_back,
        "packets_evicted": f.packets_evicted,
        "packets_rerouted": f.packets_rerouted,
        "packets_bounced": f.packets_bounced,
        "packets_parked": f.packets_parked,
        "duplicates_dropped": f.duplicates_dropped,
        "engines_offline": f.engines_offline,
        "engine_packets_dropped": f.engine_packets_dropped,
        "packets_lost": f.packets_lost,
        "jobs_split": f.jobs_split,
        "faults_without_effect": f.faults_without_effect,
        "links_repaired": f.links_repaired,
        "repairs_without_effect": f.repairs_without_effect,
    });
    // Only runs with repairs have it, and with drains these: the JSON of every other run stays as it was.
    if f.links_repaired > 0 {
        json["engines_online_again"] = json!(f.engines_online_again);
    }
    if f.drains > 0 {
        json["switches_drained"] = json!(f.switches_drained);
        json["switches_draining"] = json!(f.switches_draining);
        json["drains_already_draining"] = json!(f.drains_already_draining);
        json["drains_already_down"] = json!(f.drains_already_down);
        json["drains_refused"] = json!(f.drains_refused);
        json["drain_refusals"] = json!(refusals);
    }
    json
}

/// What failover did, as a line of the tables of `sim` and `sim traffic`.
pub fn failover_line(f: &fabric_sim::net::FailoverStats) -> String {
    format!(
        "# Failover: {} link(s) failed, {} ganged link(s) lost{}; {} units lost on the wire; {} packets taken back \
         from data links, {} from switch queues; {} sent again by another path, {} returned to their source; \
         {} held by switches until the new routes; {} duplicates dropped; {} lost (no way on); {} job(s) \
         split that went on{}{}{}{}",
        f.links_failed,
        f.links_degraded,
        match f.links_repaired {
            0 => String::new(),
            n => format!(", {n} repaired"),
        },
        f.units_lost,
        f.packets_taken_back,
        f.packets_evicted,
        f.packets_rerouted,
        f.packets_bounced,
        f.packets_parked,
        f.duplicates_dropped,
        f.packets_lost,
        f.jobs_split,
        match f.faults_without_effect {
            0 => String::new(),
            n => format!("; {n} fault(s) without effect, their link already down"),
        },
        match f.repairs_without_effect {
            0 => String::new(),
            n => format!("; {n} repair(s) without effect, their link already whole"),
        },
        match (f.drains, f.switches_draining) {
            (0, _) => String::new(),
            (_, 0) => format!("; {} switch(es) drained", f.switches_drained),
            (_, n) => format!(
                "; {} switch(es) drained, {n} still draining at the end",
                f.switches_drained
            ),
        },
        drains_without_effect(f)
    )
}

/// The drains of `f` that found their switch draining or out of service, or that the fabric manager
/// refused, for the footer.
fn drains_without_effect(f: &fabric_sim::net::FailoverStats) -> String {
    let mut said = String::new();
    if f.drains_already_draining > 0 {
        said += &format!(
            "; {} drain(s) without effect, their switch already draining",
            f.drains_already_draining
        );
    }
    if f.drains_already_down > 0 {
        said += &format!(
            "; {} drain(s) without effect, their switch already out of service (drained, or its links down)",
            f.drains_already_down
        );
    }
    if f.drains_refused > 0 {
        said += &format!(
            "; {} drain(s) refused, their switch the only path between GPUs of a job (kept in service)",
            f.drains_refused
        );
    }
    said
}

/// Bit errors and failures, as `sim` and `sim traffic` take them.
#[derive(Args, Debug)]
pub struct FaultArgs {
    /// Random bit error rate on every link, 0 to 1e-3 (the data links replay what it corrupts)
    #[arg(long, value_parser = crate::check::float)]
    pub ber: Option<f64>,
    /// Fail the link (all ganged links) between two nodes at a simulated time, e.g.
    /// `gpu0:nvswitch1@20us`; the fabric manager routes around it (repeatable)
    #[arg(long, value_name = "A:B@TIME")]
    pub fail_link: Vec<String>,
    /// Fail one of the links ganged between two nodes at a simulated time, e.g. `gpu0:nvswitch0@20us`: the
    /// trunk carries on with the others, at less bandwidth; the last one fails it (repeatable)
    #[arg(long, value_name = "A:B@TIME")]
    pub degrade_link: Vec<String>,
    /// Fail the port of a switch that leads to a node, e.g. `nvswitch2:gpu5@30us` (repeatable)
    #[arg(long, value_name = "SWITCH:PEER@TIME")]
    pub fail_port: Vec<String>,
    /// Fail a whole switch at a simulated time, e.g. `nvswitch1@20us`: every one of its ports, as
    /// `--fail-port` fails one (repeatable)
    #[arg(long, value_name = "SWITCH@TIME")]
    pub fail_switch: Vec<String>,
    /// Drain a switch at a simulated time, e.g. `nvswitch1@20us`: the fabric manager routes around it
    /// (after `--replan-delay`) while its links stay up, and once it and its links hold no packet takes
    /// its ports down, as `--fail-switch` would, losing nothing; refused, the switch left in service, if
    /// it is the only path left between GPUs of a job (repeatable)
    #[arg(long, value_name = "SWITCH@TIME")]
    pub drain_switch: Vec<String>,
    /// Repair the link between two nodes at a simulated time, e.g. `gpu0:nvswitch1@60us`, after
    /// `--fail-link`, `--fail-port` or `--degrade-link` took it or some of its links: all its links come
    /// back and initialise again, and the fabric manager routes over it again (repeatable)
    #[arg(long, value_name = "A:B@TIME")]
    pub repair_link: Vec<String>,
    /// Repair every link of a switch at a simulated time, e.g. `nvswitch1@60us`, as `--repair-link`
    /// repairs one (repeatable)
    #[arg(long, value_name = "SWITCH@TIME")]
    pub repair_switch: Vec<String>,
    /// How long the fabric manager takes from a failure to its new routes, e.g. `50us` (default: at
    /// once); meanwhile switches move flows off the failed port to the other ports of their routes and
    /// hold what has none
    #[arg(long, value_name = "TIME")]
    pub replan_delay: Option<String>,
}

impl FaultArgs {
    /// `--ber`, checked.
    pub fn ber(&self) -> anyhow::Result<Option<f64>> {
        if let Some(ber) = self.ber {
            ensure_within("--ber", ber, fabric_sim::topology::MAX_BER).map_err(|e| {
                anyhow::anyhow!(
                    "{e}: above it most packets are hit and replays make a run's time grow exponentially"
                )
            })?;
        }
        Ok(self.ber)
    }

    /// The failures, in the order of the flags.
    pub fn faults(&self) -> anyhow::Result<Vec<FaultSpec>> {
        let mut faults = Vec::new();
        for f in &self.fail_link {
            let (a, b, at) = parse_fault(f, "--fail-link", "A:B@TIME, e.g. gpu0:nvswitch1@20us")?;
            faults.push(FaultSpec::Link { a, b, at });
        }
        for f in &self.degrade_link {
            let (a, b, at) = parse_fault(f, "--degrade-link", "A:B@TIME, e.g. gpu0:nvswitch0@20us")?;
            faults.push(FaultSpec::OneLink { a, b, at });
        }
        for f in &self.fail_port {
            let (switch, peer, at) =
                parse_fault(f, "--fail-port", "SWITCH:PEER@TIME, e.g. nvswitch2:gpu5@30us")?;
            faults.push(FaultSpec::Port { switch, peer, at });
        }
        for f in &self.fail_switch {
            let (switch, at) = parse_node_at(f, "--fail-switch", "SWITCH@TIME, e.g. nvswitch1@20us")?;
            faults.push(FaultSpec::Switch { switch, at });
        }
        for f in &self.drain_switch {
            let (switch, at) = parse_node_at(f, "--drain-switch", "SWITCH@TIME, e.g. nvswitch1@20us")?;
            faults.push(FaultSpec::Drain { switch, at });
        }
        for f in &self.repair_link {
            let (a, b, at) = parse_fault(f, "--repair-link", "A:B@TIME, e.g. gpu0:nvswitch1@60us")?;
            faults.push(FaultSpec::Repair { a, b, at });
        }
        for f in &self.repair_switch {
            let (switch, at) = parse_node_at(f, "--repair-switch", "SWITCH@TIME, e.g. nvswitch1@60us")?;
            faults.push(FaultSpec::SwitchRepair { switch, at });
        }
        // The same fault twice at the same time is refused as `fabric` refuses a link failed twice (a
        // link lost twice is two of the trunk's links: that one may be repeated).
        let mut seen = Vec::new();
        for fault in faults.iter().filter(|f| !matches!(f, FaultSpec::OneLink { .. })) {
            ensure_once(&mut seen, same_fault(fault), fault.option(), || {
                fault_value(fault)
            })?;
        }
        ensure!(
            (self.repair_link.is_empty() && self.repair_switch.is_empty()) || self.fails_any(),
            "--repair-link and --repair-switch need a failure to repair (--fail-link, --degrade-link, --fail-port, \
             --fail-switch or --drain-switch)"
        );
        Ok(faults)
    }

    /// Whether any failure is asked for.
    fn fails_any(&self) -> bool {
        !(self.fail_link.is_empty()
            && self.degrade_link.is_empty()
            && self.fail_port.is_empty()
            && self.fail_switch.is_empty()
            && self.drain_switch.is_empty())
    }

    /// `--replan-delay`, checked.
    pub fn replan_delay(&self) -> anyhow::Result<Duration> {
        match &self.replan_delay {
            None => Ok(Duration::ZERO),
            Some(_) if !self.fails_any() => {
                bail!(
                    "--replan-delay needs a failure to replan after (--fail-link, --degrade-link, --fail-port, \
                     --fail-switch or --drain-switch)"
                )
            }
            Some(time) => parse_time(time).context("--replan-delay"),
        }
    }
}

/// Whether `algo` keeps a buffer per connection (`--buffsize`): the ring and the tree do; switch
/// reductions and all-to-all do not.
fn keeps_connection_buffers(algo: Algo) -> bool {
    matches!(algo, Algo::Ring | Algo::Tree)
}

/// `1024`, `64K`, `8M`, `1G` (powers of 1024): a size of at least one byte.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let bytes = parse_bytes(s)?;
    ensure!(bytes > 0, "bad size {:?}: must be at least 1 byte", s.trim());
    Ok(bytes)
}

/// `0`, `1024`, `64K`, `8M`, `1G` (powers of 1024): a number of bytes, as `parse_size` reads it.
pub fn parse_bytes(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("bad size {s:?}: expected e.g. 4096, 64K, 8M or 1G"))?;
    n.checked_mul(1 << shift)
        .with_context(|| format!("bad size {s:?}: more than 2^64 bytes"))
}

/// `20us`, `1.5us`, `800ns`, `2ms`, `1s`: up to 1000 s of simulated time, whatever the unit.
fn parse_time(s: &str) -> anyhow::Result<Duration> {
    const MOST_PS: f64 = 1e15;
    let s = s.trim();
    let usage = || format!("bad time {s:?}: a number and a unit (ns, us, ms or s), e.g. 800ns, 20us or 2ms");
    let (number, ps_per_unit) = [("ns", 1e3), ("us", 1e6), ("ms", 1e9), ("s", 1e12)]
        .into_iter()
        .find_map(|(unit, ps)| s.strip_suffix(unit).map(|n| (n, ps)))
        .with_context(usage)?;
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .with_context(usage)?;
    let ps = value * ps_per_unit;
    if !(0.0..=MOST_PS).contains(&ps) {
        bail!("bad time {s:?}: from 0 to 1000 s");
    }
    Ok(Duration::from_ps(ps.round() as u64))
}

/// The names of the fabric's GPUs numbered `numbers`.
fn gpu_names(topology: &Topology, numbers: &[u16]) -> Vec<String> {
    let gpus = topology.gpus();
    numbers
        .iter()
        .filter_map(|&g| gpus.get(usize::from(g)))
        .map(|&x| topology.nodes[x].name.clone())
        .collect()
}

/// The names of the GPUs numbered `numbers`, joined for a line of the table, if there are eight at most.
fn few_gpu_names(topology: &Topology, numbers: &[u16]) -> Option<String> {
    (numbers.len() <= 8).then(|| gpu_names(topology, numbers).join(","))
}

/// What the background traffic measured, as a line of the table.
fn background_line(b: &BackgroundReport, topology: &Topology) -> String {
    let l = &b.measured.latency;
    let on = match &b.background.gpus {
        None => String::new(),
        Some(numbers) => {
            let names = few_gpu_names(topology, numbers);
            format!(
                " on {}",
                names.unwrap_or_else(|| format!("{} GPUs", numbers.len()))
            )
        }
    };
    let latency = if l.packets > 0 {
        format!(
            "latency of {} packets: mean {:.1} ns, p50 {}, p99 {}, max {}",
            l.packets, l.mean_ns, l.p50_ns, l.p99_ns, l.max_ns
        )
    } else {
        "no packet's latency measured".to_owned()
    };
    format!(
        "# Background: {} traffic at a load of {} ({} spread){on} beside the collective: {:.1} of {:.1} GB/s \
         per GPU accepted; {latency}; {} not generated for full source queues; {}",
        b.background.pattern.name(),
        traffic::load_text(b.background.load),
        b.background.spread.name(),
        b.measured.accepted_gbps,
        b.measured.offered_gbps,
        b.measured.source_full,
        match (&b.measured.problem, b.measured.loss(), b.measured.undrained()) {
            (Some(problem), None, _) => format!("WRONG: {problem}"),
            (Some(problem), Some(loss), _) => format!("WRONG: {problem}; LOST: {loss}"),
            (None, Some(loss), None) =>
                format!("LOST: {loss}; every other packet delivered once, with its data"),
            (None, Some(loss), Some(undrained)) => format!(
                "LOST: {loss}; UNDRAINED: {undrained}; every other packet delivered once, with its data"
            ),
            (None, None, Some(undrained)) =>
                format!("UNDRAINED: {undrained}; every other packet delivered once, with its data"),
            (None, None, None) => "every packet delivered once, with its data".to_string(),
        }
    )
}

/// What the background traffic measured, as the JSON's `background`.
fn background_json(b: &BackgroundReport, sweep: &Sweep) -> serde_json::Value {
    let gpus = b.background.members(collective_gpus(sweep).len());
    traffic::measured_json(
        &b.measured,
        json!({
            "pattern": b.background.pattern.name(),
            "spread": b.background.spread.name(),
            "load": b.background.load,
            "payload_bytes": b.background.payload_bytes,
            "gpus": gpu_names(&sweep.topology, &gpus),
        }),
    )
}

/// `--background PATTERN:LOAD` with its spread.
fn background(args: &SimArgs) -> anyhow::Result<Option<Background>> {
    let Some(spec) = &args.background else {
        return Ok(None);
    };
    let usage = || format!("bad --background {spec:?}: expected PATTERN:LOAD, e.g. uniform:0.3");
    let (pattern, load) = spec.split_once(':').with_context(usage)?;
    let load: f64 = load.parse().ok().with_context(usage)?;
    // Each error names its option: the simulator's say only "unknown pattern", "the offered load".
    if !(load > 0.0 && load <= 1.0) {
        bail!(
            "--background {spec:?}: the load is a fraction of the GPUs' injection bandwidth, above 0 and at \
             most 1, not {load}"
        );
    }
    Ok(Some(Background {
        pattern: Pattern::parse(pattern, HOTSPOT_SHARE).map_err(|e| anyhow::anyhow!("--background: {e}"))?,
        spread: Spread::parse(&args.background_spread)
            .map_err(|e| anyhow::anyhow!("--background-spread: {e}"))?,
        load,
        payload_bytes: PAYLOAD_BYTES,
        // Given with the fabric the two jobs share (`jobs`).
        gpus: None,
    }))
}

/// `fault` with the ends of a link in one order: the same fault whichever end was named first.
fn same_fault(fault: &FaultSpec) -> FaultSpec {
    let mut fault = fault.clone();
    if let FaultSpec::Link { a, b, .. } | FaultSpec::OneLink { a, b, .. } | FaultSpec::Repair { a, b, .. } =
        &mut fault
    {
        if a > b {
            std::mem::swap(a, b);
        }
    }
    fault
}

/// `fault` as its option's value, e.g. `gpu0:nvswitch1@5us` (the time in microseconds), for messages.
fn fault_value(fault: &FaultSpec) -> String {
    let us = fault.at().as_ps() as f64 / 1e6;
    match fault {
        FaultSpec::Link { a, b, .. } | FaultSpec::OneLink { a, b, .. } | FaultSpec::Repair { a, b, .. } => {
            format!("{a}:{b}@{us}us")
        }
        FaultSpec::Port { switch, peer, .. } => format!("{switch}:{peer}@{us}us"),
        FaultSpec::Switch { switch, .. }
        | FaultSpec::Drain { switch, .. }
        | FaultSpec::SwitchRepair { switch, .. } => format!("{switch}@{us}us"),
    }
}

/// `A:B@TIME` as (A, B, time); `form` is what `flag` expects, with an example it takes (as its help has
/// them: `--fail-port` names a switch first).
fn parse_fault(s: &str, flag: &str, form: &str) -> anyhow::Result<(String, String, Duration)> {
    let usage = || format!("bad {flag} {s:?}: expected {form}");
    let (nodes, at) = parse_node_at(s, flag, form)?;
    let (a, b) = nodes.split_once(':').with_context(usage)?;
    if a.is_empty() || b.is_empty() {
        bail!(usage());
    }
    Ok((a.to_string(), b.to_string(), at))
}

/// `NODE@TIME`, the value of `flag` (of the form `form`, for the message). A name no topology can have (a
/// line break or an escape in it, say) is refused here, before any message prints it.
fn parse_node_at(s: &str, flag: &str, form: &str) -> anyhow::Result<(String, Duration)> {
    let usage = || format!("bad {flag} {s:?}: expected {form}");
    let (node, time) = s.rsplit_once('@').with_context(usage)?;
    if node.is_empty() {
        bail!(usage());
    }
    // `A:B` for the faults on links and ports: each name is checked.
    for name in node.split(':').filter(|name| !name.is_empty()) {
        check_node_name(name).map_err(|e| anyhow::anyhow!("bad {flag} {s:?}: {e}"))?;
    }
    Ok((node.to_string(), parse_time(time).context(flag.to_string())?))
}

/// `topology` with only the GPUs `list` names: a count (the first N) or names separated by commas.
fn some_gpus(topology: &Topology, list: &str) -> anyhow::Result<Topology> {
    let keep = gpu_list(topology, list, "--gpus")?;
    topology.with_gpus(&keep).map_err(anyhow::Error::msg)
}

/// The GPUs (node indices) that `list`, the value of `flag`, names: a count (the first N), or names and
/// runs (`gpu8..gpu15`: those two and the GPUs numbered between them) separated by commas, in the order
/// named; at least two.
fn gpu_list(topology: &Topology, list: &str, flag: &str) -> anyhow::Result<Vec<usize>> {
    let gpus = topology.gpus();
    match list.trim().parse::<usize>() {
        Ok(n) if (2..=gpus.len()).contains(&n) => Ok(gpus[..n].to_vec()),
        Ok(n) if gpus.len() == 2 => bail!("{flag} {n}: expected 2 ({} has 2 GPUs)", topology.name),
        Ok(n) => bail!(
            "{flag} {n}: expected 2 to {} ({} has {} GPUs)",
            gpus.len(),
            topology.name,
            gpus.len()
        ),
        Err(_) => {
            let keep = named_gpus(topology, list, flag)?;
            if keep.len() < 2 {
                bail!("{flag} {list:?}: at least 2 GPUs are needed");
            }
            Ok(keep)
        }
    }
}

/// The GPUs (node indices) that `list`, the value of `flag`, names: names and runs (`gpu8..gpu15`: those
/// two and the GPUs numbered between them) separated by commas, in the order named, each once.
pub(crate) fn named_gpus(topology: &Topology, list: &str, flag: &str) -> anyhow::Result<Vec<usize>> {
    let gpus = topology.gpus();
    let number = |name: &str| -> anyhow::Result<usize> {
        let x = topology
            .node_named(name)
            .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
        gpus.iter()
            .position(|&g| g == x)
            .with_context(|| format!("{flag}: {name} is not a GPU"))
    };
    let mut keep = Vec::new();
    for item in list.split(',').map(str::trim) {
        let (first, last) = match item.split_once("..") {
            Some((a, b)) => (number(a.trim())?, number(b.trim())?),
            None => (number(item)?, number(item)?),
        };
        if first > last {
            bail!("{flag}: {item} runs backwards");
        }
        for &x in &gpus[first..=last] {
            if keep.contains(&x) {
                bail!("{flag}: {} is named twice", topology.nodes[x].name);
            }
            keep.push(x);
        }
    }
    Ok(keep)
}

/// Refuses a fault that names a node of `whole`, the topology, that `part`, the fabric the run keeps of
/// it, leaves out (`by`: the options that made it): the simulator sees only `part`, and would say it has
/// no such node, as if the name were misspelt (one `whole` lacks is refused as `whole` lacks it).
fn check_faults_kept(
    faults: &[FaultSpec],
    whole: &Topology,
    part: &Topology,
    by: &str,
) -> anyhow::Result<()> {
    for fault in faults {
        let names = match fault {
            FaultSpec::Link { a, b, .. }
            | FaultSpec::OneLink { a, b, .. }
            | FaultSpec::Repair { a, b, .. } => {
                vec![a, b]
            }
            FaultSpec::Port { switch, peer, .. } => vec![switch, peer],
            FaultSpec::Switch { switch, .. }
            | FaultSpec::Drain { switch, .. }
            | FaultSpec::SwitchRepair { switch, .. } => vec![switch],
        };
        for name in names {
            if part.node_named(name).is_ok() {
                continue;
            }
            let x = whole
                .node_named(name)
                .map_err(|e| anyhow::anyhow!("{}: {e}", fault.option()))?;
            // `with_gpus` leaves out the GPUs not named and the switches that only they link to.
            let (why, fix) = if whole.nodes[x].kind == NodeKind::Gpu {
                ("", format!("add it to {by}"))
            } else {
                (
                    " (it links only GPUs left out)",
                    format!("add a GPU it links to {by}"),
                )
            };
            bail!(
                "{}: {name} is in {} but {by} leaves it out of the run{why}: {fix}, or name a node the run \
                 keeps",
                fault.option(),
                whole.name
            );
        }
    }
    Ok(())
}

/// The fabric a sweep runs on and who runs on it.
struct Jobs {
    topology: Topology,
    /// With `--background-gpus`: the collective's GPUs (the fabric's first ones) and the background
    /// traffic's GPU numbers.
    apart: Option<(usize, Vec<u16>)>,
}

/// The fabric `--gpus` and `--background-gpus` give: with the latter, two jobs that share it.
fn jobs(whole: Topology, args: &SimArgs) -> anyhow::Result<Jobs> {
    let Some(list) = &args.background_gpus else {
        let topology = match &args.gpus {
            Some(list) => some_gpus(&whole, list)?,
            None => whole,
        };
        return Ok(Jobs {
            topology,
            apart: None,
        });
    };
    let collective = match &args.gpus {
        Some(list) => gpu_list(&whole, list, "--gpus")?,
        None => whole.gpus(),
    };
    let background = if list.trim() == "rest" {
        let rest: Vec<usize> = whole
            .gpus()
            .into_iter()
            .filter(|g| !collective.contains(g))
            .collect();
        if rest.len() < 2 {
            bail!(
                "--background-gpus rest: the collective leaves {} of {}'s GPUs, and traffic needs at least 2",
                rest.len(),
                whole.name
            );
        }
        rest
    } else {
        gpu_list(&whole, list, "--background-gpus")?
    };
    let (topology, numbers) = whole
        .with_jobs(&collective, &background)
        .map_err(anyhow::Error::msg)?;
    Ok(Jobs {
        topology,
        apart: Some((collective.len(), numbers)),
    })
}

/// The topology named (by option `flag`, which errors name): built in, or read from a TOML file.
pub fn load_topology(flag: &str, name: &str) -> anyhow::Result<Topology> {
    if let Some(t) = Topology::builtin(name) {
        return Ok(t);
    }
    if name.ends_with(".toml") || std::path::Path::new(name).exists() {
        // Errors quote the path: a newline in it would break the one-line error. Read no more than a
        // topology can take: `/dev/zero` or a large file by mistake is an error, not
        // all the memory there is.
        let mut text = String::new();
        std::fs::File::open(name)
            .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text))
            .with_context(|| format!("cannot read {flag} file {name:?}"))?;
        ensure!(
            text.len() as u64 <= MAX_FILE_BYTES,
            "{flag} file {name:?}: longer than {} MiB, more than any topology file takes",
            MAX_FILE_BYTES >> 20
        );
        // Named, as `fabric --topology A --hardware B` reads two files and either may be the bad one.
        return Topology::from_toml(&text).map_err(|e| anyhow::anyhow!("{flag} file {name:?}: {e}"));
    }
    bail!(
        "{flag}: unknown topology {name:?}: built-in ones are {} (or fat-tree-N for N GPUs, a multiple of 16 from \
         {} to {}), or give a TOML file",
        Topology::BUILTINS.join(", "),
        fabric_sim::topology::FAT_TREE_GPUS.start(),
        fabric_sim::topology::FAT_TREE_GPUS.end()
    )
}

pub fn run(cmd: SimCommand) -> anyhow::Result<ExitCode> {
    let (kind, args) = match cmd {
        SimCommand::Allreduce(a) => (Kind::AllReduce, a),
        SimCommand::Allgather(a) => (Kind::AllGather, a),
        SimCommand::Reducescatter(a) => (Kind::ReduceScatter, a),
        SimCommand::Broadcast(a) => (Kind::Broadcast, a),
        SimCommand::Alltoall(a) => (Kind::AllToAll, a),
        SimCommand::Traffic(a) => return traffic::run(a),
    };
    let whole = args.topology.load()?;
    let Jobs { topology, apart } = jobs(whole.clone(), &args)?;
    let default = if kind == Kind::AllToAll { "p2p" } else { "ring" };
    let algo = match args.algo.as_deref().unwrap_or(default) {
        "ring" => Algo::Ring,
        "switch-reduce" => Algo::SwitchReduce,
        "tree" => Algo::Tree,
        "p2p" => Algo::P2p,
        other => bail!("unknown --algo {other:?}: expected ring, tree, switch-reduce or p2p"),
    };
    if let Err(why) = algo.supports(kind) {
        bail!("--algo {} cannot run {}: {why}", algo.name(), kind_name(kind));
    }
    let (min, max) = (parse_size(&args.min)?, parse_size(&args.max)?);
    if min > max {
        bail!("--min ({min} B) is larger than --max ({max} B)");
    }
    // A size given an algorithm that keeps no buffer per connection would do nothing.
    if args.buffsize.is_some() && !keeps_connection_buffers(algo) {
        bail!(
            "--buffsize is the ring's and the tree's; --algo {} keeps no buffer per connection",
            algo.name()
        );
    }
    let buffer_bytes = match &args.buffsize {
        Some(size) => parse_size(size)?,
        None => CHANNEL_BUFFER_BYTES,
    };
    // The tree holds every slot of a chunk in full: 64M makes 8 MiB chunks, and about 1 GB in all.
    if !(1 << 10..=64 << 20).contains(&buffer_bytes) {
        bail!("--buffsize must be from 1K to 64M, not {buffer_bytes} B");
    }
    let (ber, faults) = (args.faults.ber()?, args.faults.faults()?);
    let left_out_by = match &args.background_gpus {
        Some(_) => "--gpus with --background-gpus",
        None => "--gpus",
    };
    check_faults_kept(&faults, &whole, &topology, left_out_by)?;
    let sweep = Sweep {
        seed: args.seed,
        ber,
        faults,
        replan_delay: args.faults.replan_delay()?,
        pcap: args.traces.pcap(),
        vcd: args.traces.vcd(),
        buffer_bytes,
        background: background(&args)?.map(|b| Background {
            gpus: apart.as_ref().map(|(_, numbers)| numbers.clone()),
            ..b
        }),
        collective_gpus: apart.as_ref().map(|&(gpus, _)| gpus),
        ..Sweep::new(topology, kind, algo, min, max)
    };
    // A size cut apart until the new routes could never finish.
    if sweep.replan_delay >= sweep.limit_per_size {
        bail!(
            "--replan-delay must be below {} s, the simulated time each size is given",
            sweep.limit_per_size.as_ps() as f64 / 1e12
        );
    }
    args.traces.check_files(args.plot.as_deref())?;
    let plot_file = PlotFile::create(args.plot.as_deref())?;
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    let mut shown = None;
    let started = std::time::Instant::now();
    let mut progress = |p: run::Progress| {
        // Drawn again only when what it shows changes.
        let permille = (p.fraction * 1000.0) as u32;
        if !show_progress || shown == Some((permille, p.sizes_done, p.sizes)) {
            return;
        }
        shown = Some((permille, p.sizes_done, p.sizes));
        let width = 30;
        let filled = (p.fraction * width as f64) as usize;
        // What is left at the rate so far: packets cost about the same whatever the size.
        let elapsed = started.elapsed().as_secs_f64();
        let left = if p.fraction > 0.0 && elapsed >= 1.0 && p.sizes_done < p.sizes {
            let seconds = (elapsed * (1.0 - p.fraction) / p.fraction).round() as u64;
            format!(", about {}m {:02}s left", seconds / 60, seconds % 60)
        } else {
            String::new()
        };
        eprint!(
            "\r[{}{}] {:5.1}%  {}/{} sizes{left}\x1b[K",
            "#".repeat(filled.min(width)),
            " ".repeat(width - filled.min(width)),
            f64::from(permille) / 10.0,
            p.sizes_done,
            p.sizes
        );
        if p.sizes_done == p.sizes {
            eprintln!();
        }
        let _ = std::io::stderr().flush();
    };
    let report = run::run(&sweep, &mut progress);
    // A run that stopped early leaves the bar's line open: end it before the table.
    if shown.is_some_and(|(_, done, sizes)| done < sizes) {
        eprintln!();
    }
    let report = report.map_err(anyhow::Error::msg)?;
    if args.json {
        print_json(&sweep, &report, args.trunks)?;
    } else {
        print_table(&sweep, &report, args.trunks);
    }
    if let Some(file) = plot_file {
        file.write(&plot::svg(&sweep, &report))?;
    }
    Ok(if report.verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_WRONG)
    })
}

pub(crate) fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::AllReduce => "all_reduce",
        Kind::AllGather => "all_gather",
        Kind::ReduceScatter => "reduce_scatter",
        Kind::Broadcast => "broadcast",
        Kind::AllToAll => "alltoall",
    }
}

/// The collective's GPU numbers: the fabric's first ones when it runs beside another job on GPUs of
/// its own, else all of them.
fn collective_gpus(sweep: &Sweep) -> Vec<u16> {
    let n = sweep.collective_gpus.unwrap_or(sweep.topology.gpus().len());
    (0..n as u16).collect()
}

fn print_table(sweep: &Sweep, r: &Report, trunks: usize) {
    // Named when the collective runs on some of the fabric's GPUs beside another job: the fabric's name
    // does not say which.
    let fabric_gpus = sweep.topology.gpus().len();
    let gpus = match few_gpu_names(&sweep.topology, &collective_gpus(sweep)) {
        _ if r.gpus >= fabric_gpus => format!("{} GPUs", r.gpus),
        Some(names) => format!("{} GPUs: {names}", r.gpus),
        None => format!("{} of its {fabric_gpus} GPUs", r.gpus),
    };
    println!(
        "# {} on {} ({gpus}), algorithm {}, seed {}",
        kind_name(sweep.kind),
        sweep.topology.name,
        sweep.algo.name(),
        sweep.seed
    );
    if sweep.buffer_bytes != CHANNEL_BUFFER_BYTES {
        println!(
            "# buffer per connection (NCCL_BUFFSIZE): {} B",
            sweep.buffer_bytes
        );
    }
    println!("# {}", sweep.topology.source);
    for note in window_notes(&window_limited(&sweep.topology, PACKET_BYTES)) {
        println!("{note}");
    }
    println!("#");
    println!(
        "# {:>12} {:>12} {:>7} {:>6} {:>6} {:>10} {:>8} {:>8} {:>6}",
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"
    );
    println!(
        "# {:>12} {:>12} {:>7} {:>6} {:>6} {:>10} {:>8} {:>8} {:>6}",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""
    );
    let (redop, root) = redop_and_root(sweep.kind);
    for row in &r.rows {
        println!(
            "  {:>12} {:>12} {:>7} {:>6} {:>6} {:>10.2} {:>8.2} {:>8.2} {:>6}",
            row.bytes, row.count, "int32", redop, root, row.time_us, row.algbw, row.busbw, row.wrong
        );
    }
    // The collective's verdict, as nccl-tests gives it; the background traffic's is on its own line.
    println!(
        "# Out of bounds values : {} {}",
        r.rows.iter().map(|x| x.wrong).sum::<u64>(),
        if collective_verified(r) { "OK" } else { "FAILED" }
    );
    println!("# Avg bus bandwidth    : {:.3}", r.avg_busbw);
    if let Some(b) = &r.background {
        println!("{}", background_line(b, &sweep.topology));
    }
    if !sweep.faults.is_empty() {
        let f = r.failover;
        println!("{}", failover_line(&f));
        for why in &r.drain_refusals {
            println!("# {why}");
        }
        if f.engines_offline > 0 {
            println!(
                "# Switch collective engines taken offline: {} (each lost a GPU{}); {} of their packets dropped, \
                 their work done again on the other switches{}",
                f.engines_offline,
                if f.drains > 0 { " or was drained" } else { "" },
                f.engine_packets_dropped,
                match f.engines_online_again {
                    0 => String::new(),
                    n => format!("; {n} brought back online after repairs, used from the next size on"),
                }
            );
        }
        if r.faults_after_end > 0 {
            println!(
                "# Note: {}",
                late_faults("the sweep", r.simulated, r.faults_after_end)
            );
        }
        if r.replan_pending {
            println!(
                "# Note: {}",
                replan_pending("the sweep", r.replan_waits_for_links)
            );
        }
    }
    let (links, dl) = (r.links, r.links.dl);
    println!(
        "# Data links: {} packet transmissions ({} packets taken from above), {} control flits; {} bits \
         flipped on the wires, {} CRC errors caught, {} NAKs, {} replays ({} on timeout), {} duplicates \
         discarded",
        dl.packets_transmitted,
        dl.packets_sent,
        dl.control_sent,
        links.bits_flipped,
        dl.crc_errors,
        dl.naks_sent,
        dl.replays,
        dl.replay_timeouts,
        dl.duplicates
    );
    let s = r.switches;
    if s.forwarded > 0 {
        println!(
            "# Switches: {} packets arrived, {} forwarded, {} of them cut-through ({:.1}%), {} multicast \
             copies, {} reductions; {} dropped between partitions, {} without a route, {} taken off failed \
             ports, {} handed back by failed links to be forwarded again; {} offers refused for room and made \
             again",
            s.arrived,
            s.forwarded,
            s.cut_through,
            100.0 * s.cut_through as f64 / s.forwarded as f64,
            s.multicast_copies,
            s.reductions,
            s.partition_drops,
            s.route_drops,
            s.evicted,
            s.taken_back,
            s.refused_full
        );
    }
    for line in trace_lines(r.trace, r.waves, &sweep.topology) {
        println!("{line}");
    }
    let period = "from the first size's start to the end";
    for line in trunk_lines(&r.trunks, r.trunks_over, period, trunks, &sweep.topology) {
        println!("{line}");
    }
    if let Some(why) = &r.failure {
        println!("# Stopped: {why}");
    }
    // Setting up takes milliseconds on the built-in fabrics, and can take most of the run on slow ones.
    let setup = if r.setup_wall_seconds >= 0.1 {
        format!(
            " (after {:.2} s building the fabric and bringing its links up)",
            r.setup_wall_seconds
        )
    } else {
        String::new()
    };
    if r.idle_skipped > Duration::ZERO {
        println!(
            "# {:.1} us of simulated time the fabric sat idle (links only repeating their Updates), let \
             pass at once",
            r.idle_skipped.as_ps() as f64 / 1e6
        );
    }
    println!(
        "# {} packets simulated in {:.2} s of wall time{setup}: {:.2} M packets/s on one core; results {}",
        r.packets,
        r.wall_seconds,
        r.packets_per_s / 1e6,
        results(r)
    );
}

/// The run's verdict, for its last line.
fn results(r: &Report) -> &'static str {
    // What the other job's traffic did not deliver, if nothing of it arrived wrong.
    let short = r
        .background
        .as_ref()
        .map(|b| &b.measured)
        .filter(|m| m.problem.is_none())
        .and_then(|m| match (m.loss().is_some(), m.undrained().is_some()) {
            (true, false) => Some("verified but for the background traffic's losses to failures"),
            (false, true) => Some("verified but for the background traffic's packets still undelivered"),
            (true, true) => Some(
                "verified but for the background traffic's losses to failures and packets still undelivered",
            ),
            (false, false) => None,
        });
    match short {
        _ if r.verified => "verified",
        // The collective's results checked out; the other job's packets did not all arrive.
        Some(short) if r.failure.is_none() && collective_verified(r) => short,
        _ => "WRONG",
    }
}

/// Whether the collective's own results all checked out, whatever became of traffic beside it (a size
/// that did not complete counts as wrong in its row).
fn collective_verified(r: &Report) -> bool {
    !r.rows.is_empty() && r.rows.iter().all(|row| row.wrong == 0)
}

/// The redop and root columns of nccl-tests' table for `kind` (root -1: none).
fn redop_and_root(kind: Kind) -> (&'static str, i32) {
    match kind {
        Kind::AllReduce | Kind::ReduceScatter => ("sum", -1),
        Kind::AllGather | Kind::AllToAll => ("none", -1),
        Kind::Broadcast => ("none", 0),
    }
}

fn print_json(sweep: &Sweep, r: &Report, trunks: usize) -> anyhow::Result<()> {
    // Every column of the table: the redop and root too (a broadcast's root had been in the text only).
    let (redop, root) = redop_and_root(sweep.kind);
    let rows: Vec<_> = r
        .rows
        .iter()
        .map(|x| {
            json!({
                "size": x.bytes, "count": x.count, "type": "int32", "redop": redop, "root": root,
                "time_us": x.time_us, "algbw": x.algbw, "busbw": x.busbw, "wrong": x.wrong,
                "packets": x.packets,
                "trunks": (trunks > 0).then(|| trunks_json(&x.trunks, x.trunks_over, trunks, &sweep.topology)),
            })
        })
        .collect();
    let (trace, waves) = trace_json(r.trace, r.waves, &sweep.topology);
    let mut out = json!({
        "collective": kind_name(sweep.kind),
        "topology": sweep.topology.name,
        "window_limited": window_limited(&sweep.topology, PACKET_BYTES),
        "gpus": r.gpus,
        "collective_gpus": gpu_names(&sweep.topology, &collective_gpus(sweep)),
        "algorithm": sweep.algo.name(),
        "seed": sweep.seed,
        "buffsize": keeps_connection_buffers(sweep.algo).then_some(sweep.buffer_bytes),
        "replan_delay_ns": sweep.replan_delay.as_ps() as f64 / 1e3,
        "rows": rows,
        "avg_busbw": r.avg_busbw,
        "packets": r.packets,
        "wall_seconds": r.wall_seconds,
        "setup_wall_seconds": r.setup_wall_seconds,
        "packets_per_s": r.packets_per_s,
        "idle_skipped_us": r.idle_skipped.as_ps() as f64 / 1e6,
        "verified": r.verified,
        "collective_verified": collective_verified(r),
        "trace": trace,
        "waves": waves,
        "failover": failover_json(&r.failover, &r.drain_refusals),
        "faults_after_end": r.faults_after_end,
        "replan_pending": r.replan_pending,
        "background": r.background.as_ref().map(|b| background_json(b, sweep)),
        "links": links_json(r),
        "switches": switches_json(&r.switches),
        "trunks": (trunks > 0).then(|| trunks_json(&r.trunks, r.trunks_over, trunks, &sweep.topology)),
        "failure": r.failure,
    });
    // Only a run with new routes to come says what held them: every other run's JSON stays as it was.
    if r.replan_pending {
        out["replan_waits_for"] = json!(replan_waits_for(r.replan_waits_for_links));
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// What the switches did, added up over all of them.
pub fn switches_json(s: &SwitchCounters) -> serde_json::Value {
    json!({
        "arrived": s.arrived,
        "forwarded": s.forwarded,
        "cut_through": s.cut_through,
        "multicast_copies": s.multicast_copies,
        "reductions": s.reductions,
        "partition_drops": s.partition_drops,
        "route_drops": s.route_drops,
        "evicted": s.evicted,
        "taken_back": s.taken_back,
        "refused_full": s.refused_full,
    })
}

/// What the fabric's data links did, added up over all of them.
fn links_json(r: &Report) -> serde_json::Value {
    let mut links = crate::link::dl_counters_json(&r.links.dl);
    links["units"] = json!(r.links.units);
    links["bits_flipped"] = json!(r.links.bits_flipped);
    links
}
