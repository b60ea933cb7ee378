//! Sweeps of a collective over message sizes, as nccl-tests runs them: one fabric, one collective after
//! another, every result checked, times and bandwidths reported.

use std::time::Instant as WallClock;

use link_dl::DlConfig;
use link_phy::time::Instant;

use crate::collective::{
    tree, AllToAll, Check, Kind, Rings, SwitchReduce, Tree, MAX_MESSAGE_BYTES, OP_PARTIAL, OP_RESULT,
    PACKET_BYTES,
};
use crate::manager::Fabric;
use crate::net::{App, FailoverStats, Fault, Job, LinkTotals, Net, MAX_STATE_BYTES};
use crate::topology::{NodeKind, Topology};
use crate::traffic::{Background, BackgroundReport, RunningBackground};

/// How a collective is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    /// A pipelined ring (NCCL's ring).
    Ring,
    /// All-reduce in the switches (NVLink SHARP, NCCL's NVLS).
    SwitchReduce,
    /// All-reduce over NCCL's double binary tree, pipelined in chunks ([`crate::collective::tree`]).
    Tree,
    /// Point-to-point sends between every pair at once: all-to-all, as NCCL runs it.
    P2p,
}

impl Algo {
    /// Name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring",
            Algo::SwitchReduce => "switch-reduce",
            Algo::Tree => "tree",
            Algo::P2p => "p2p",
        }
    }

    /// Whether this algorithm carries out `kind`, and if not, why.
    pub fn supports(self, kind: Kind) -> Result<(), String> {
        match (self, kind) {
            (Algo::Ring | Algo::SwitchReduce | Algo::Tree, Kind::AllToAll) => Err(format!(
                "all-to-all runs as point-to-point sends (p2p), not {}",
                self.name()
            )),
            (Algo::Ring, _) => Ok(()),
            (Algo::SwitchReduce, Kind::AllReduce) | (Algo::Tree, Kind::AllReduce) => Ok(()),
            (Algo::SwitchReduce, _) => Err("switch-reduce is an all-reduce algorithm".into()),
            (Algo::Tree, _) => {
                Err("tree (NCCL's double binary tree) is an all-reduce algorithm; use ring".into())
            }
            (Algo::P2p, Kind::AllToAll) => Ok(()),
            (Algo::P2p, _) => Err("p2p is the all-to-all algorithm; use ring".into()),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The fabric.
    pub topology: Topology,
    /// The collective.
    pub kind: Kind,
    /// The algorithm.
    pub algo: Algo,
    /// Smallest and largest message, bytes; sizes double from one to the other.
    pub min: u64,
    /// Largest message.
    pub max: u64,
    /// Seed of data and errors.
    pub seed: u64,
    /// If set, the bit error rate of every link.
    pub ber: Option<f64>,
    /// Give up on one size after this much simulated time.
    pub limit_per_size: link_phy::time::Duration,
    /// Faults to inject, at simulated times from the start of the sweep.
    pub faults: Vec<FaultSpec>,
    /// How long the fabric manager takes from a failure to its new routes
    /// ([`crate::net::Net::schedule_faults`]).
    pub replan_delay: link_phy::time::Duration,
    /// Write a pcap trace of the link traffic (its records: packets and control flits).
    pub pcap: Option<Recording>,
    /// Write waveforms of the link states (VCD; its records: value changes).
    pub vcd: Option<Recording>,
    /// What a GPU holds of each connection of the ring and the tree (NCCL's `NCCL_BUFFSIZE`; default
    /// [`crate::collective::CHANNEL_BUFFER_BYTES`]): senders send only into room there.
    pub buffer_bytes: u64,
    /// Synthetic traffic beside the collective, for the whole sweep: from the collective's GPUs, or
    /// from those [`Background::gpus`] names.
    pub background: Option<Background>,
    /// If set, the collective runs on the fabric's first this many GPUs only, and the others carry
    /// only the background traffic (another job's GPUs; [`Topology::with_jobs`] numbers a fabric so).
    pub collective_gpus: Option<usize>,
    /// Let idle stretches pass at once ([`Net::set_skip_idle`]; the default): the run is the same
    /// either way, only faster. Off only for the tests that check so.
    pub skip_idle: bool,
}

impl Sweep {
    /// `kind` by `algo` on every GPU of `topology`, for every size from `min` to `max` bytes, as `linkctl
    /// sim` runs it unless told otherwise: seed 1, no bit errors, faults or background traffic, NCCL's
    /// buffer per connection, and at most 10 s of simulated time per size.
    pub fn new(topology: Topology, kind: Kind, algo: Algo, min: u64, max: u64) -> Sweep {
        Sweep {
            topology,
            kind,
            algo,
            min,
            max,
            seed: 1,
            ber: None,
            limit_per_size: link_phy::time::Duration::from_ms(10_000),
            faults: Vec::new(),
            replan_delay: link_phy::time::Duration::ZERO,
            pcap: None,
            vcd: None,
            buffer_bytes: crate::collective::CHANNEL_BUFFER_BYTES,
            background: None,
            collective_gpus: None,
            skip_idle: true,
        }
    }
}

/// A fault of a sweep, naming nodes as the topology does.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultSpec {
    /// The trunk between nodes `a` and `b` fails at `at` (all its links).
    Link {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// When, from the start of the sweep.
        at: link_phy::time::Duration,
    },
    /// One of the links ganged between nodes `a` and `b` fails at `at`; the trunk carries on with the
    /// others ([`Fault::LinkLost`]).
    OneLink {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// When, from the start of the sweep.
        at: link_phy::time::Duration,
    },
    /// The trunk between nodes `a` and `b` is repaired at `at`: it comes back with all its links
    /// ([`Fault::LinkRepaired`]).
    Repair {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// When, from the start of the sweep.
        at: link_phy::time::Duration,
    },
    /// The port of switch `switch` that leads to `peer` fails at `at`.
    Port {
        /// The switch.
        switch: String,
        /// The node at the other end of the port.
        peer: String,
        /// When, from the start of the sweep.
        at: link_phy::time::Duration,
    },
    /// The whole switch `switch` fails at `at`: every one of its ports, as [`FaultSpec::Port`] fails one
    /// (each trunk counts as a failed link).
    Switch {
        /// The switch.
        switch: String,
        /// When, from the start of the sweep.
        at: link_phy::time::Duration,
    },
    /// Switch `switch` is drained from `at` and then taken out of service, losing nothing
    /// ([`Fault::SwitchDrain`]).
    Drain {
        /// The switch.
        switch: String,
        /// When, from the start of the sweep.
        at: link_phy::time::Duration,
    },
    /// Every trunk of switch `switch` is repaired at `at`, as [`FaultSpec::Repair`] repairs one.
    SwitchRepair {
        /// The switch.
        switch: String,
        /// When, from the start of the sweep.
        at: link_phy::time::Duration,
    },
}

/// The simulator's faults for `faults`, with names resolved on `net`'s fabric (a switch's failure or
/// repair is one per port); an error names the option.
pub(crate) fn resolve_faults(
    faults: &[FaultSpec],
    topology: &Topology,
    net: &Net,
) -> Result<Vec<Fault>, String> {
    let mut resolved = Vec::new();
    for fault in faults {
        resolved.extend(
            fault
                .resolve_names(topology, net)
                .map_err(|e| format!("{}: {e}", fault.option()))?,
        );
    }
    Ok(resolved)
}

/// How many of `faults` are due after `end`: they did not happen in a run that ended then.
pub(crate) fn faults_due_after(faults: &[FaultSpec], end: Instant) -> usize {
    faults.iter().filter(|f| Instant(f.at().as_ps()) > end).count()
}

impl FaultSpec {
    /// When it happens, from the start of the sweep.
    pub fn at(&self) -> link_phy::time::Duration {
        match self {
            FaultSpec::Link { at, .. }
            | FaultSpec::OneLink { at, .. }
            | FaultSpec::Repair { at, .. }
            | FaultSpec::Port { at, .. }
            | FaultSpec::Switch { at, .. }
            | FaultSpec::Drain { at, .. }
            | FaultSpec::SwitchRepair { at, .. } => *at,
        }
    }

    /// The `linkctl sim` option that gives it, for messages.
    pub const fn option(&self) -> &'static str {
        match self {
            FaultSpec::Link { .. } => "--fail-link",
            FaultSpec::OneLink { .. } => "--degrade-link",
            FaultSpec::Repair { .. } => "--repair-link",
            FaultSpec::Port { .. } => "--fail-port",
            FaultSpec::Switch { .. } => "--fail-switch",
            FaultSpec::Drain { .. } => "--drain-switch",
            FaultSpec::SwitchRepair { .. } => "--repair-switch",
        }
    }

    fn resolve_names(&self, topology: &Topology, net: &Net) -> Result<Vec<Fault>, String> {
        let node = |name: &str| topology.node_named(name);
        let fabric = net.fabric();
        let port_towards = |x: usize, y: usize| fabric.port_towards(topology, x, y);
        let switch_named = |name: &str| topology.switch_named(name);
        match self {
            FaultSpec::Link { a, b, at }
            | FaultSpec::OneLink { a, b, at }
            | FaultSpec::Repair { a, b, at } => {
                let (x, y) = (node(a)?, node(b)?);
                let trunk = fabric.ports[x][port_towards(x, y)?].0;
                let at = Instant(at.as_ps());
                Ok(vec![match self {
                    FaultSpec::OneLink { .. } => Fault::LinkLost { trunk, at },
                    FaultSpec::Repair { .. } => Fault::LinkRepaired { trunk, at },
                    _ => Fault::LinkDown { trunk, at },
                }])
            }
            FaultSpec::Port { switch, peer, at } => {
                let (x, y) = (switch_named(switch)?, node(peer)?);
                Ok(vec![Fault::PortDown {
                    node: x,
                    port: port_towards(x, y)?,
                    at: Instant(at.as_ps()),
                }])
            }
            FaultSpec::Switch { switch, at } => {
                let x = switch_named(switch)?;
                let at = Instant(at.as_ps());
                Ok((0..fabric.port_count(x))
                    .map(|port| Fault::PortDown { node: x, port, at })
                    .collect())
            }
            FaultSpec::Drain { switch, at } => Ok(vec![Fault::SwitchDrain {
                node: switch_named(switch)?,
                at: Instant(at.as_ps()),
            }]),
            FaultSpec::SwitchRepair { switch, at } => {
                let x = switch_named(switch)?;
                let at = Instant(at.as_ps());
                Ok(fabric.ports[x]
                    .iter()
                    .map(|&(trunk, _)| Fault::LinkRepaired { trunk, at })
                    .collect())
            }
        }
    }
}

/// One size's result, as a row of nccl-tests' table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Message size, bytes.
    pub bytes: u64,
    /// Elements (4-byte integers) as nccl-tests counts them: per rank for all-gather, reduce-scatter and
    /// all-to-all ([`Kind::size_and_count`]).
    pub count: u64,
    /// Simulated time, microseconds.
    pub time_us: f64,
    /// Algorithm bandwidth: bytes / time, GB/s.
    pub algbw: f64,
    /// Bus bandwidth: algbw times the collective's factor, GB/s.
    pub busbw: f64,
    /// Packets whose data was wrong, plus one if the collective did not finish.
    pub wrong: u64,
    /// Packets delivered to GPUs while it ran.
    pub packets: u64,
    /// What each trunk carried from the size's start to the end of its run (background traffic's
    /// packets included).
    pub trunks: Vec<crate::net::TrunkLoad>,
    /// That span of simulated time.
    pub trunks_over: link_phy::time::Duration,
}

impl Row {
    /// Whether the size finished: one that did not (it stopped the sweep) has no bandwidth.
    pub fn finished(&self) -> bool {
        self.algbw > 0.0
    }
}

/// A whole sweep's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Rows, smallest size first.
    pub rows: Vec<Row>,
    /// GPUs.
    pub gpus: usize,
    /// Packets delivered to GPUs, all sizes, background traffic's included.
    pub packets: u64,
    /// Wall-clock seconds the simulation of the sizes took.
    pub wall_seconds: f64,
    /// Wall-clock seconds before it: building the fabric and bringing its links up (long on links of
    /// long latency, which take many round trips to initialise).
    pub setup_wall_seconds: f64,
    /// Packets simulated per wall-clock second.
    pub packets_per_s: f64,
    /// Whether every result buffer checked out.
    pub verified: bool,
    /// Mean of the bus bandwidths of the sizes that completed (as nccl-tests' "Avg bus bandwidth"); a size
    /// that stopped the sweep has no bandwidth and is left out.
    pub avg_busbw: f64,
    /// What failover did, if faults were injected.
    pub failover: FailoverStats,
    /// Why the fabric manager refused the drains it refused ([`FailoverStats::drains_refused`]), in order.
    pub drain_refusals: Vec<String>,
    /// What the data links did over the whole sweep: errors they caught, replays, flow control.
    pub links: LinkTotals,
    /// What the switches did over the whole sweep, added up.
    pub switches: switch_fw::switch::SwitchCounters,
    /// What the pcap trace holds and left out.
    pub trace: Option<crate::trace::TraceSummary>,
    /// Value changes written to the waveforms, and changes the limit left out.
    pub waves: Option<(u64, u64)>,
    /// Why the sweep stopped early, if it did.
    pub failure: Option<String>,
    /// What the background traffic measured, if there was any.
    pub background: Option<BackgroundReport>,
    /// The faults scheduled after the sweep had ended, which did not happen.
    pub faults_after_end: usize,
    /// Whether the sweep ended before the fabric manager's new routes after a failure or repair
    /// ([`Net::replan_owed`]): what they would have found (a cut, say) did not come into it.
    pub replan_pending: bool,
    /// With [`Report::replan_pending`]: whether links still training held the new routes back, not the
    /// fabric manager's delay ([`Net::replan_waits_for_links`]).
    pub replan_waits_for_links: bool,
    /// Simulated time from the start of the sweep (links training included) to its end.
    pub simulated: link_phy::time::Duration,
    /// Of that, the idle stretches let pass at once ([`Net::set_skip_idle`]).
    pub idle_skipped: link_phy::time::Duration,
    /// What each trunk carried from the start of the first size (the links up) to the end of the sweep.
    pub trunks: Vec<crate::net::TrunkLoad>,
    /// The simulated time that covers.
    pub trunks_over: link_phy::time::Duration,
}

/// The sizes of a sweep of `kind` on `gpus` GPUs: `min`, doubling, up to `max`, each rounded down to what
/// the collective moves, as nccl-tests prints it: whole 32-bit elements, and for the collectives that
/// give each GPU a block (all-gather, reduce-scatter, all-to-all) the same whole number of them per GPU.
/// A size with no element per GPU is left out, and so is a size rounded down onto the one before.
pub fn sizes(kind: Kind, gpus: usize, min: u64, max: u64) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for s in tried_sizes(min, max) {
        let (moved, _) = kind.size_and_count(s, gpus);
        if moved > 0 && v.last() != Some(&moved) {
            v.push(moved);
        }
    }
    v
}

/// The sizes a sweep tries before rounding: `min` (at least 1), doubling, up to `max`.
fn tried_sizes(min: u64, max: u64) -> impl Iterator<Item = u64> {
    std::iter::successors(Some(min.max(1)), |s| s.checked_mul(2)).take_while(move |&s| s <= max)
}

/// A file a run records the links into: a pcap trace or VCD waveforms.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// Where.
    pub path: std::path::PathBuf,
    /// The most records it holds; the rest are counted, not written.
    pub limit: u64,
    /// What its errors call it, before its path: the option that asked for it (`linkctl`'s `--pcap`).
    pub name: String,
    /// Only the links with an end at one of these nodes (by name), all when empty.
    pub only_nodes: Vec<String>,
    /// A trace of the units as the receiving data links take them (after the wires' bit errors), not as
    /// the transmitters send them; waveforms do not take it.
    pub received: bool,
}

/// Have `net` write a pcap trace of its links to `pcap` and waveforms of their states to `vcd`, if
/// given.
pub(crate) fn record_links(
    net: &mut Net,
    topology: &Topology,
    pcap: &Option<Recording>,
    vcd: &Option<Recording>,
) -> Result<(), String> {
    // Which directions each keeps, checked before any file is made.
    let pcap_kept = pcap
        .as_ref()
        .map(|r| kept_directions(net, topology, r))
        .transpose()?;
    let vcd_kept = vcd
        .as_ref()
        .map(|r| kept_directions(net, topology, r))
        .transpose()?;
    // Errors writing come from the file, which names itself in them (`NamedFile`).
    if let (Some(pcap), Some(kept)) = (pcap, pcap_kept) {
        let out = create_output(pcap)?;
        let mut tracer =
            crate::trace::Tracer::new(out, net.directions(), pcap.limit).map_err(|e| e.to_string())?;
        // Without names every direction is kept, and the tracer need not look each unit's up.
        if !pcap.only_nodes.is_empty() {
            tracer = tracer.keep_only(kept);
        }
        if pcap.received {
            net.set_trace_received(tracer);
        } else {
            net.set_trace(tracer);
        }
    }
    if let (Some(vcd), Some(kept)) = (vcd, vcd_kept) {
        let out = create_output(vcd)?;
        let waves = crate::vcd::Waves::new_kept(out, &net.direction_names(topology), &kept, vcd.limit)
            .map_err(|e| e.to_string())?;
        net.set_waves(waves);
    }
    Ok(())
}

/// Per direction of `net` (as it numbers them), whether `recording` keeps it: every one, or with
/// `only_nodes` those with an end at one of them; an error for a name the fabric does not have.
fn kept_directions(net: &Net, topology: &Topology, recording: &Recording) -> Result<Vec<bool>, String> {
    let only = &recording.only_nodes;
    if let Some(unknown) = only
        .iter()
        .find(|n| !topology.nodes.iter().any(|x| &x.name == *n))
    {
        let names: Vec<&str> = topology.nodes.iter().map(|n| n.name.as_str()).collect();
        return Err(format!(
            "{}: it is to keep node {unknown:?}'s links, but the simulated fabric has no such node (it has {})",
            recording.name,
            names.join(", ")
        ));
    }
    Ok((net.direction_names(topology).iter())
        .map(|d| only.is_empty() || only.iter().any(|n| *n == d.node || *n == d.peer))
        .collect())
}

/// A buffered file for a trace or waveforms, whose write errors name it, or the error naming it.
fn create_output(recording: &Recording) -> Result<Box<dyn std::io::Write>, String> {
    let Recording { path, name, .. } = recording;
    let file = std::fs::File::create(path).map_err(|e| format!("cannot create {name} file {path:?}: {e}"))?;
    Ok(Box::new(std::io::BufWriter::new(NamedFile {
        file,
        // Quoted: a name with a newline or other control character would break the one-line error.
        what: format!("{name} file {path:?}"),
    })))
}

/// A file whose write errors say which file (a run may write a trace and waveforms at once).
struct NamedFile {
    file: std::fs::File,
    /// What the errors call it: its name and path.
    what: String,
}

impl NamedFile {
    fn named(&self, e: std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), format!("cannot write {}: {e}", self.what))
    }
}

impl std::io::Write for NamedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf).map_err(|e| self.named(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().map_err(|e| self.named(e))
    }
}

/// A ring order for the fabric's first `gpus` GPUs: a cycle over direct GPU-to-GPU links when there is
/// one (as NCCL builds its rings on NVLink meshes), else the GPUs in order (through switches every order
/// is as good).
pub fn ring_order(f: &Fabric, gpus: usize) -> Vec<usize> {
    let n = gpus.min(f.gpus.len());
    // Bandwidth of the direct trunks between two GPUs (0: none).
    let bandwidth =
        |a: usize, b: usize| -> f64 { f.trunks_between(f.gpus[a], f.gpus[b]).map(|t| t.gbps).sum() };
    fn extend(
        path: &mut Vec<usize>,
        used: &mut [bool],
        n: usize,
        direct: &dyn Fn(usize, usize) -> bool,
    ) -> bool {
        if path.len() == n {
            return direct(path[n - 1], path[0]);
        }
        let last = path[path.len() - 1];
        for next in 0..n {
            if !used[next] && direct(last, next) {
                used[next] = true;
                path.push(next);
                if extend(path, used, n, direct) {
                    return true;
                }
                path.pop();
                used[next] = false;
            }
        }
        false
    }
    if n <= 16 {
        // The ring whose slowest hop is fastest: try the bandwidths GPUs are joined by, best first (on
        // DGX-1 that keeps the ring on NVLink, off the PCIe and QPI paths).
        let mut levels: Vec<f64> = (0..n)
            .flat_map(|a| (0..n).map(move |b| (a, b)))
            .map(|(a, b)| bandwidth(a, b))
            .filter(|&bw| bw > 0.0)
            .collect();
        levels.sort_by(|x, y| y.total_cmp(x));
        levels.dedup();
        for level in levels {
            let mut path = vec![0usize];
            let mut used = vec![false; n];
            used[0] = true;
            if extend(&mut path, &mut used, n, &|a, b| bandwidth(a, b) >= level) {
                return path;
            }
        }
    }
    (0..n).collect()
}

/// The rings a ring collective on the fabric's first `gpus` GPUs runs on. On a direct mesh of 3 to 16
/// GPUs: as many cycles over the direct links as the links allow with each link taken by one cycle (a
/// pair joined by two links can carry two), each run in both directions, as NCCL builds one ring per
/// channel over NVLink; the rings then use every link, both ways. Elsewhere (or when the links form no
/// cycle): the one ring of [`ring_order`] (through switches one ring already loads every link of every
/// GPU).
pub fn ring_orders(f: &Fabric, gpus: usize) -> Vec<Vec<usize>> {
    let n = gpus.min(f.gpus.len());
    if !(3..=16).contains(&n) {
        return vec![ring_order(f, n)];
    }
    // Links between GPU pairs, counting only the fastest kind of direct link.
    let direct: Vec<(usize, usize, usize, f64)> = (0..n)
        .flat_map(|a| (0..n).map(move |b| (a, b)))
        .flat_map(|(a, b)| {
            f.trunks_between(f.gpus[a], f.gpus[b])
                .map(move |t| (a, b, t.links, t.gbps / t.links.max(1) as f64))
        })
        .collect();
    let fastest = direct.iter().map(|d| d.3).fold(0.0, f64::max);
    let mut units = vec![vec![0u32; n]; n];
    for &(a, b, links, rate) in &direct {
        if rate >= fastest {
            units[a][b] += links as u32;
        }
    }
    let cycles = disjoint_cycles(&mut units);
    if cycles.is_empty() {
        return vec![ring_order(f, n)];
    }
    cycles
        .into_iter()
        .flat_map(|forward| {
            let mut backward = forward.clone();
            backward[1..].reverse();
            [forward, backward]
        })
        .collect()
}

/// The pairs of the collective's GPUs (from, to) that send to each other under `algo`, where that is
/// not every pair: each ring's neighbours (over `orders`), each tree's parents and children. Switch
/// reduction and all-to-all talk between every pair (`None`).
pub fn collective_talks(algo: Algo, orders: &[Vec<usize>], gpus: usize) -> Option<Vec<(usize, usize)>> {
    let mut pairs: Vec<(usize, usize)> = match algo {
        Algo::Ring => (orders.iter())
            .flat_map(|order| (0..order.len()).map(|i| (order[i], order[(i + 1) % order.len()])))
            .filter(|(from, to)| from != to)
            .collect(),
        Algo::Tree => (tree::double_tree(gpus).iter())
            .flat_map(|roles| roles.iter().enumerate())
            .flat_map(|(g, (_, children))| children.iter().flat_map(move |&c| [(g, c), (c, g)]))
            .collect(),
        Algo::SwitchReduce | Algo::P2p => return None,
    };
    pairs.sort_unstable();
    pairs.dedup();
    Some(pairs)
}

/// The largest set of Hamiltonian cycles (a cycle may repeat) that together use no pair of GPUs more
/// often than `units[a][b]` links join them, by a bounded exhaustive search.
fn disjoint_cycles(units: &mut [Vec<u32>]) -> Vec<Vec<usize>> {
    let n = units.len();
    // Every Hamiltonian cycle from GPU 0, each once (second GPU below the last).
    fn cycles_from(path: &mut Vec<usize>, units: &[Vec<u32>], out: &mut Vec<Vec<usize>>, cap: usize) {
        let n = units.len();
        if out.len() >= cap {
            return;
        }
        let last = path[path.len() - 1];
        if path.len() == n {
            if units[last][0] > 0 && path[1] < path[n - 1] {
                out.push(path.clone());
            }
            return;
        }
        for next in 1..n {
            if units[last][next] > 0 && !path.contains(&next) {
                path.push(next);
                cycles_from(path, units, out, cap);
                path.pop();
            }
        }
    }
    fn hops(cycle: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..cycle.len()).map(|i| (cycle[i], cycle[(i + 1) % cycle.len()]))
    }
    fn search(
        units: &mut [Vec<u32>],
        cycles: &[Vec<usize>],
        from: usize,
        chosen: &mut Vec<usize>,
        best: &mut Vec<usize>,
        bound: usize,
        budget: &mut u32,
    ) {
        if chosen.len() > best.len() {
            *best = chosen.clone();
        }
        if best.len() >= bound || *budget == 0 {
            return;
        }
        *budget -= 1;
        for (i, cycle) in cycles.iter().enumerate().skip(from) {
            if hops(cycle).all(|(a, b)| units[a][b] > 0) {
                hops(cycle).for_each(|(a, b)| {
                    units[a][b] -= 1;
                    units[b][a] -= 1;
                });
                chosen.push(i);
                search(units, cycles, i, chosen, best, bound, budget);
                chosen.pop();
                hops(cycle).for_each(|(a, b)| {
                    units[a][b] += 1;
                    units[b][a] += 1;
                });
            }
        }
    }
    let mut cycles = Vec::new();
    cycles_from(&mut vec![0], units, &mut cycles, 20_000);
    // Each cycle takes two links at every GPU.
    let bound = (0..n)
        .map(|a| units[a].iter().sum::<u32>() as usize / 2)
        .min()
        .unwrap_or(0);
    let (mut chosen, mut best) = (Vec::new(), Vec::new());
    search(units, &cycles, 0, &mut chosen, &mut best, bound, &mut 20_000);
    best.into_iter().map(|i| cycles[i].clone()).collect()
}

/// How far a sweep has got, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Sizes finished.
    pub sizes_done: usize,
    /// Sizes in the sweep.
    pub sizes: usize,
    /// The part of the sweep's work done, from 0 to 1: the packets delivered so far against what every
    /// size delivers without faults ([`deliveries`]), so that a long size moves the bar as it runs.
    pub fraction: f64,
}

/// The packets the GPUs receive in a `kind` of `bytes` on `gpus` GPUs by `algo`, without faults: exact
/// for the ring, switch-reduce and all-to-all (a test checks it); the tree also sends its credits as
/// packets, a few percent more. Faults add packets sent again.
pub fn deliveries(kind: Kind, algo: Algo, bytes: u64, gpus: usize) -> u64 {
    let n = gpus as u64;
    let packets = bytes.div_ceil(PACKET_BYTES as u64);
    match (algo, kind) {
        // Each GPU's contributions to the engines' reads, then every result multicast to every GPU.
        (Algo::SwitchReduce, _) => 2 * n * packets,
        (Algo::P2p, _) => {
            let block = crate::collective::alltoall::block_elements(bytes, gpus) * 4;
            n * n.saturating_sub(1) * block.div_ceil(PACKET_BYTES as u64)
        }
        // Up and down both trees, each with half of the data.
        (Algo::Tree, _) | (Algo::Ring, Kind::AllReduce) => 2 * n.saturating_sub(1) * packets,
        // Every packet once round the ring, to each GPU but the one it starts from.
        (Algo::Ring, _) => n.saturating_sub(1) * packets_numbered(kind, algo, bytes, gpus),
    }
}

/// The packets a `kind` of `bytes` on `gpus` GPUs by `algo` numbers, the headers' offsets `0 ..` this:
/// the buffer's packets, or for the ring's all-gather and reduce-scatter, which cut it block by block,
/// up to a packet more per GPU.
pub fn packets_numbered(kind: Kind, algo: Algo, bytes: u64, gpus: usize) -> u64 {
    match (algo, crate::collective::block_packets(kind, bytes / 4, gpus)) {
        (Algo::Ring, Some(block)) => gpus as u64 * block.count,
        _ => bytes.div_ceil(PACKET_BYTES as u64).max(1),
    }
}

/// Run the sweep. `progress` is called as it goes (about ten times a second) and after each size.
pub fn run(sweep: &Sweep, progress: &mut dyn FnMut(Progress)) -> Result<Report, String> {
    run_with(sweep, progress, None)
}

/// A corruption for tests that show wrong data is caught: at every size, the first data byte of the
/// `nth` data packet (counting from 0) that GPU `gpu` receives is flipped after its data link accepted
/// it, as a memory error past the link's CRC would.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Corruption {
    /// The GPU whose packet is corrupted.
    pub gpu: usize,
    /// Which of its data packets.
    pub nth: u64,
}

/// [`run`] with a [`Corruption`].
#[doc(hidden)]
pub fn run_corrupted(
    sweep: &Sweep,
    progress: &mut dyn FnMut(Progress),
    corruption: Corruption,
) -> Result<Report, String> {
    run_with(sweep, progress, Some(corruption))
}

/// An app whose `corruption` flips a byte of one received data packet.
struct Corrupting<'a> {
    app: &'a mut dyn App,
    corruption: Corruption,
    extension: bool,
    seen: u64,
}

impl App for Corrupting<'_> {
    fn next(&mut self, now: Instant, gpu: usize, offer: &mut crate::net::Offer) -> bool {
        self.app.next(now, gpu, offer)
    }

    fn receive(&mut self, now: Instant, gpu: usize, port: usize, packet: &link_dl::Received) {
        let data = matches!(
            crate::wire::opcode(packet.tl),
            OP_PARTIAL | OP_RESULT | crate::wire::OP_WRITE | crate::wire::OP_REDUCE_DATA
        );
        let skip = usize::from(self.extension);
        if gpu == self.corruption.gpu && data && packet.payload.len() > skip {
            let nth = self.seen;
            self.seen += 1;
            if nth == self.corruption.nth {
                let mut corrupted = packet.clone();
                corrupted.payload[skip][0] ^= 0x01;
                return self.app.receive(now, gpu, port, &corrupted);
            }
        }
        self.app.receive(now, gpu, port, packet)
    }

    fn take_woken(&mut self) -> Option<usize> {
        self.app.take_woken()
    }

    fn take_alarm(&mut self) -> Option<(Instant, usize)> {
        self.app.take_alarm()
    }

    fn done(&self) -> bool {
        self.app.done()
    }

    fn others_delivered(&self) -> u64 {
        self.app.others_delivered()
    }

    fn takes_stragglers(&self) -> bool {
        self.app.takes_stragglers()
    }

    fn lost(&mut self, tl: u64) -> bool {
        self.app.lost(tl)
    }

    fn isolated(&mut self, now: Instant, gpu: usize) {
        self.app.isolated(now, gpu);
    }
}

/// Whether every GPU link ends at a switch that links to every GPU: only such a switch's engine can sum
/// a packet over all of them (a switch under a tree or a leaf of a fat tree would sum its own GPUs only).
fn switch_planes_reach_every_gpu(topology: &Topology) -> bool {
    let gpus = topology.gpus();
    let linked = |x: usize, y: usize| {
        topology
            .links
            .iter()
            .any(|l| (l.a, l.b) == (x, y) || (l.a, l.b) == (y, x))
    };
    gpus.iter().all(|&g| {
        topology.links.iter().all(|l| {
            let peer = match (l.a == g, l.b == g) {
                (true, _) => l.b,
                (_, true) => l.a,
                _ => return true,
            };
            topology.nodes[peer].kind == NodeKind::Switch && gpus.iter().all(|&h| linked(peer, h))
        })
    })
}

fn run_with(
    sweep: &Sweep,
    progress: &mut dyn FnMut(Progress),
    corruption: Option<Corruption>,
) -> Result<Report, String> {
    let mut topology = sweep.topology.clone();
    if let Some(ber) = sweep.ber {
        for l in &mut topology.links {
            l.ber = ber;
        }
    }
    sweep.algo.supports(sweep.kind)?;
    let gpus = sweep.collective_gpus.unwrap_or(topology.gpus().len());
    let sizes = sizes(sweep.kind, gpus, sweep.min, sweep.max);
    let largest = sizes.last().copied().unwrap_or(0);
    if sizes.is_empty() {
        let largest_try = tried_sizes(sweep.min, sweep.max).last().unwrap_or(sweep.min);
        let least = match sweep.kind.bytes_per_count(gpus) {
            4 => "4 bytes, one 32-bit element".to_string(),
            unit => format!("{unit} bytes, a block of whole 32-bit elements for each of its {gpus} GPUs"),
        };
        return Err(format!(
            "no message size from {} to {} bytes: the sweep doubles from --min, and its largest size, \
             {largest_try} bytes, is below the least this collective moves, {least}",
            sweep.min, sweep.max
        ));
    }
    let numbered = packets_numbered(sweep.kind, sweep.algo, largest, gpus);
    if largest > MAX_MESSAGE_BYTES || numbered > MAX_MESSAGE_BYTES / PACKET_BYTES as u64 {
        return Err(format!(
            "messages go up to {} GiB (2^32 packets of {PACKET_BYTES} B: a packet's number within a GPU's \
             buffer is the 32-bit offset of its header), and the sweep's largest is {largest} B",
            MAX_MESSAGE_BYTES >> 30
        ));
    }
    if sweep.algo == Algo::SwitchReduce && !switch_planes_reach_every_gpu(&topology) {
        return Err(format!(
            "switch-reduce needs every GPU link to end at a switch that every GPU links to directly (one \
             level of NVSwitches, as dgx-a100 and dgx-h100), which {} does not have",
            topology.name
        ));
    }
    // Each switch sums for a GPU in the reduction group numbered as the GPU (the group says where the
    // sum goes), and a switch has 32 (spec 4).
    let reduction_groups = switch_fw::reduce::REDUCTION_GROUPS;
    if sweep.algo == Algo::SwitchReduce && topology.gpus().len() > reduction_groups {
        return Err(format!(
            "switch-reduce runs on fabrics of at most {reduction_groups} GPUs (a switch sums for each GPU in \
             a reduction group of its own, and has {reduction_groups}), and {} has {}",
            topology.name,
            topology.gpus().len()
        ));
    }
    // Each job runs within a partition: the switches would drop every packet between two, and the
    // collective would never finish. Two jobs may be in two partitions, isolated from each other.
    let partitions = topology.partitions_of(0..sweep.collective_gpus.unwrap_or(topology.gpus().len()));
    if partitions > 1 {
        return Err(format!(
            "{}: its GPUs are in {partitions} partitions, and a collective runs within one (run it on one \
             partition's GPUs, `linkctl sim --gpus`; `linkctl fabric --probe` shows what the partitions let \
             through)",
            topology.name
        ));
    }
    if let Some(gpus) = sweep.background.as_ref().and_then(|b| b.gpus.as_ref()) {
        let partitions = topology.partitions_of(gpus.iter().map(|&g| usize::from(g)));
        if partitions > 1 {
            return Err(format!(
                "{}: the background traffic's GPUs are in {partitions} partitions, and it runs within one",
                topology.name
            ));
        }
    }
    let setup_started = WallClock::now();
    let mut net = Net::new(&topology, &[], DlConfig::default(), sweep.seed)?;
    net.set_skip_idle(sweep.skip_idle);
    let extension = topology.address_extension();
    let fabric_gpus = net.fabric().gpus.len();
    let gpus = sweep.collective_gpus.unwrap_or(fabric_gpus);
    if !(2..=fabric_gpus).contains(&gpus) {
        return Err(format!(
            "a collective runs on 2 to the fabric's {fabric_gpus} GPUs, not {gpus}"
        ));
    }
    if gpus < fabric_gpus {
        if sweep.background.as_ref().is_none_or(|b| b.gpus.is_none()) {
            return Err(format!(
                "the collective runs on {gpus} of the fabric's {fabric_gpus} GPUs: the others are for \
                 background traffic on GPUs of its own (run on some GPUs only with a fabric of those, \
                 `Topology::with_gpus`)"
            ));
        }
        if sweep.algo == Algo::SwitchReduce {
            // The switches' engines and their multicast reach every GPU on the switches.
            return Err(
                "switch-reduce runs on every GPU of the fabric: with background traffic on \
                        other GPUs, run ring or tree"
                    .into(),
            );
        }
    }
    let orders = ring_orders(net.fabric(), gpus);
    // The routes must join each job's GPUs that send to each other (and need not join the two jobs').
    let mut jobs = vec![Job {
        name: "the collective's GPUs".into(),
        gpus: (0..gpus).collect(),
        goes_on_split: false,
        talks: collective_talks(sweep.algo, &orders, gpus),
    }];
    if let Some(b) = &sweep.background {
        jobs.push(Job {
            name: "the background traffic's GPUs".into(),
            gpus: b.members(gpus).into_iter().map(usize::from).collect(),
            goes_on_split: true,
            talks: None,
        });
    }
    // Where the rings' neighbours are joined and another algorithm's pairs are not (GPUs cabled in a
    // loop), the ring is the way to run: say so.
    let by_ring = Job {
        talks: collective_talks(Algo::Ring, &orders, gpus),
        ..jobs[0].clone()
    };
    let ring_runs = sweep.algo != Algo::Ring
        && sweep.kind != Kind::AllToAll
        && jobs[0].unjoined(net.fabric()).is_some()
        && by_ring.unjoined(net.fabric()).is_none();
    net.set_jobs(jobs).map_err(|e| {
        let ring = if ring_runs {
            "; the rings' neighbours are joined: `--algo ring` runs here"
        } else {
            ""
        };
        format!(
            "{e} (place each job on GPUs that switches join: `linkctl sim --gpus`, and `--background-gpus` \
             for a second job{ring})"
        )
    })?;
    if sweep.algo == Algo::SwitchReduce {
        net.configure_nvls(extension)?;
    }
    if !sweep.faults.is_empty() {
        let limit = u64::from(crate::wire::BOUNCE_OFFSET_LIMIT);
        if largest / PACKET_BYTES as u64 >= limit || numbered > limit {
            // Below, not up to: 16 GiB itself is refused, as the README says.
            return Err(format!(
                "with faults, a message must be below 16 GiB, fewer than 2^27 packets (a packet returned to \
                 its source carries its number in 27 bits), and the sweep's largest, {largest} B, takes {}",
                (largest / PACKET_BYTES as u64).max(numbered)
            ));
        }
        let faults = resolve_faults(&sweep.faults, &topology, &net)?;
        net.schedule_faults(&faults, sweep.replan_delay)?;
    }
    let mut background = sweep
        .background
        .clone()
        .map(|b| RunningBackground::new(&net, &topology, b, gpus, sweep.seed, !sweep.faults.is_empty()))
        .transpose()?;
    // What the collective's buffers can come to, counted whole as the fabric's are.
    let buffer_packets = sweep.buffer_bytes / PACKET_BYTES as u64;
    if sweep.algo == Algo::Tree {
        Tree::fits(largest, gpus, sweep.buffer_bytes)?;
    }
    let collective_bytes = match sweep.algo {
        Algo::Ring => Rings::most_queue_bytes(orders.len(), gpus, buffer_packets),
        Algo::Tree => Tree::most_slot_bytes(gpus, tree::chunk_bytes(largest, gpus, sweep.buffer_bytes)),
        Algo::SwitchReduce => SwitchReduce::most_bytes(largest, gpus),
        Algo::P2p => AllToAll::most_bytes(largest, gpus),
    };
    if net.state_bytes() + collective_bytes > MAX_STATE_BYTES {
        // Only the ring's queues and the tree's slots grow with the buffer; the others' bookkeeping
        // grows with the message.
        let (buffer, hint) = match sweep.algo {
            Algo::Ring | Algo::Tree => (
                format!(" with a buffer of {} B per connection", sweep.buffer_bytes),
                "a smaller --buffsize or message",
            ),
            Algo::SwitchReduce | Algo::P2p => (String::new(), "a smaller message"),
        };
        return Err(format!(
            "{}: the fabric's buffers ({:.1} GiB) and the {} algorithm's{buffer} ({:.1} GiB) could take \
             more than the {} GiB this simulator allows itself: try {hint}",
            topology.name,
            net.state_bytes() as f64 / f64::from(1 << 30),
            sweep.algo.name(),
            collective_bytes as f64 / f64::from(1 << 30),
            MAX_STATE_BYTES >> 30
        ));
    }
    // Made once nothing can refuse the sweep, so that a refused one leaves the files that were at their
    // paths as they were; nothing has happened on the links yet (they come up next).
    record_links(&mut net, &topology, &sweep.pcap, &sweep.vcd)?;
    // A fault during bring-up that stops the fabric is reported as the first size's failure, as it would
    // be a moment later.
    if !net.bring_up(Instant::ZERO + sweep.limit_per_size) && net.fatal().is_none() {
        return Err(format!(
            "{}: the links did not come up within {} ms",
            topology.name,
            sweep.limit_per_size.as_ps() / 1_000_000_000
        ));
    }
    if let Some(background) = background.as_mut() {
        background.start_at(net.now());
    }
    // What the trunks had carried when the first size started, then each later one: sizes follow one
    // another at once, so one size's end is the next one's start.
    let (trunks_at_start, sizes_start) = (net.trunk_loads(), net.now());
    let mut trunks_before = trunks_at_start.clone();
    let started = WallClock::now();
    let setup_wall_seconds = started.duration_since(setup_started).as_secs_f64();
    let mut rows = Vec::new();
    let mut app_failure = None;
    // The size that ran out of simulated time, if one did.
    let mut timed_out = None;
    let work: Vec<u64> = sizes
        .iter()
        .map(|&bytes| deliveries(sweep.kind, sweep.algo, bytes, gpus).max(1))
        .collect();
    let all_work = work.iter().sum::<u64>() as f64;
    for (k, &bytes) in sizes.iter().enumerate() {
        let f = net.fabric();
        let mut app: Box<dyn Collective> = match sweep.algo {
            Algo::Ring => {
                let rings = orders
                    .iter()
                    .map(|order| {
                        let mut next = vec![0; gpus];
                        for (i, &g) in order.iter().enumerate() {
                            next[g] = order[(i + 1) % gpus];
                        }
                        let ports = (0..gpus).map(|g| f.route_ports(f.gpus[g], next[g])).collect();
                        (order.clone(), ports)
                    })
                    .collect();
                let mut rings = Rings::new(sweep.kind, bytes, rings, extension, sweep.seed ^ bytes);
                rings.set_buffer_packets(buffer_packets);
                Box::new(rings)
            }
            Algo::SwitchReduce => Box::new(SwitchReduce::new(
                bytes,
                f.gpu_port_links(),
                extension,
                sweep.seed ^ bytes,
            )),
            Algo::Tree => Box::new(Tree::new(
                bytes,
                gpus,
                sweep.buffer_bytes,
                extension,
                sweep.seed ^ bytes,
            )),
            Algo::P2p => Box::new(AllToAll::new(bytes, gpus, extension, sweep.seed ^ bytes)),
        };
        let (size, count) = sweep.kind.size_and_count(bytes, gpus);
        let start = net.now();
        let delivered_before = net.stats().packets_delivered;
        let background_delivered =
            |b: &Option<RunningBackground>| b.as_ref().map_or(0, RunningBackground::delivered);
        let background_before = background_delivered(&background);
        // The collective's own deliveries, as the ticks count them (the background's left out).
        let progress_before = delivered_before.saturating_sub(background_before);
        let limit = Instant(start.as_ps() + sweep.limit_per_size.as_ps());
        let work_before = work[..k].iter().sum::<u64>();
        let mut tick = |delivered: u64| {
            let this_size = delivered.saturating_sub(progress_before).min(work[k] - 1);
            progress(Progress {
                sizes_done: k,
                sizes: sizes.len(),
                fraction: (work_before + this_size) as f64 / all_work,
            });
        };
        let done = {
            let mut beside;
            let app: &mut dyn App = match background.as_mut() {
                Some(background) => {
                    beside = background.beside(app.as_app(), gpus);
                    &mut beside
                }
                None => app.as_app(),
            };
            match corruption {
                Some(corruption) => net.run_ticking(
                    &mut Corrupting {
                        app,
                        corruption,
                        extension,
                        seen: 0,
                    },
                    limit,
                    &mut tick,
                ),
                None => net.run_ticking(app, limit, &mut tick),
            }
        };
        let check = app.check();
        app_failure = app.failure();
        let failed = net.fatal().is_some() || app_failure.is_some();
        if !done && !failed {
            // Out of time, or out of events before it (nothing left to happen: a stall).
            let stalled = net.idle().then(|| net.now().saturating_since(start));
            timed_out = Some((size, stalled));
        }
        let done = done && !failed;
        let time_us = (net.completed_at().as_ps() - start.as_ps()) as f64 / 1e6;
        // A size that did not finish has no bandwidth.
        let algbw = if done && time_us > 0.0 {
            size as f64 / time_us / 1e3
        } else {
            0.0
        };
        let trunks_after = net.trunk_loads();
        rows.push(Row {
            bytes: size,
            count,
            time_us,
            algbw,
            busbw: algbw * sweep.kind.bus_factor(gpus),
            wrong: check.wrong + u64::from(!done),
            packets: net.stats().packets_delivered
                - delivered_before
                - (background_delivered(&background) - background_before),
            trunks: crate::net::loads_between(&trunks_before, &trunks_after),
            trunks_over: net.now().saturating_since(start),
        });
        trunks_before = trunks_after;
        progress(Progress {
            sizes_done: k + 1,
            sizes: sizes.len(),
            fraction: (work_before + work[k]) as f64 / all_work,
        });
        if !done {
            break;
        }
    }
    let background = background.map(|b| b.finish(&mut net));
    let wall_seconds = started.elapsed().as_secs_f64();
    let packets =
        rows.iter().map(|r| r.packets).sum::<u64>() + background.as_ref().map_or(0, |b| b.measured.delivered);
    let verified = rows.len() == sizes.len()
        && rows.iter().all(|r| r.wrong == 0)
        && background.as_ref().is_none_or(|b| b.measured.verified);
    let (sum, finished) =
        (rows.iter().filter(|r| r.finished())).fold((0.0, 0), |(sum, n), r| (sum + r.busbw, n + 1));
    let avg_busbw = if finished == 0 {
        0.0
    } else {
        sum / f64::from(finished)
    };
    let failure = net
        .fatal()
        .map(str::to_owned)
        .or(app_failure)
        .or_else(|| match timed_out {
            Some((size, None)) => Some(format!(
                "the {size} B size did not complete within {} s of simulated time, the most a size is given",
                sweep.limit_per_size.as_ps() as f64 / 1e12
            )),
            Some((size, Some(after))) => Some(format!(
                "the {size} B size stalled: nothing was left to happen {:.3} us after it started, with its \
                 results incomplete",
                after.as_ps() as f64 / 1e6
            )),
            None => rows.iter().find(|r| r.wrong > 0).map(|r| {
                format!(
                    "{} result packets of the {} B size failed verification",
                    r.wrong, r.bytes
                )
            }),
        });
    let failure = failure.or_else(|| {
        let problem = background.as_ref()?.measured.problem.as_ref()?;
        Some(format!("background traffic: {problem}"))
    });
    Ok(Report {
        rows,
        gpus,
        packets,
        wall_seconds,
        setup_wall_seconds,
        packets_per_s: packets as f64 / wall_seconds.max(1e-9),
        verified,
        avg_busbw,
        failover: net.failover_stats(),
        drain_refusals: net.drain_refusals().to_vec(),
        links: net.link_totals(),
        switches: net.switch_totals(),
        trace: net.finish_trace()?,
        waves: net.finish_waves()?,
        failure,
        background,
        faults_after_end: faults_due_after(&sweep.faults, net.now()),
        replan_pending: net.replan_owed(),
        replan_waits_for_links: net.replan_waits_for_links(),
        simulated: net.now().saturating_since(Instant::ZERO),
        idle_skipped: net.idle_skipped(),
        trunks: crate::net::loads_between(&trunks_at_start, &net.trunk_loads()),
        trunks_over: net.now().saturating_since(sizes_start),
    })
}

/// A collective as the runner sees it.
trait Collective {
    fn as_app(&mut self) -> &mut dyn App;
    fn check(&self) -> Check;
    /// Why it cannot finish, if it knows.
    fn failure(&self) -> Option<String> {
        None
    }
}

impl Collective for Rings {
    fn as_app(&mut self) -> &mut dyn App {
        self
    }
    fn check(&self) -> Check {
        Rings::check(self)
    }
}

impl Collective for SwitchReduce {
    fn as_app(&mut self) -> &mut dyn App {
        self
    }
    fn check(&self) -> Check {
        SwitchReduce::check(self)
    }
    fn failure(&self) -> Option<String> {
        SwitchReduce::failure(self)
    }
}

impl Collective for Tree {
    fn as_app(&mut self) -> &mut dyn App {
        self
    }
    fn check(&self) -> Check {
        Tree::check(self)
    }
}

impl Collective for AllToAll {
    fn as_app(&mut self) -> &mut dyn App {
        self
    }
    fn check(&self) -> Check {
        AllToAll::check(self)
    }
}
