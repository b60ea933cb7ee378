//! Synthetic traffic: every GPU sends posted writes (of 128 bytes, or as few as 16) at an offered load,
//! to destinations a pattern picks (uniform random, a fixed permutation, the next GPU, or a hot spot),
//! and the run measures what the fabric accepts and each packet's latency, the curves of throughput and
//! latency against offered load by which interconnects are compared (Dally and Towles, "Principles and
//! Practices of Interconnection Networks", chapter 23).
//!
//! Packets are generated open loop, as a Poisson process per GPU, into a source queue per port (so that
//! a packet waiting for one port does not hold up another). The port is one of those that lead to the
//! destination, chosen as [`Spread`] says: by the switches' flow hash, so that each flow keeps one path
//! and stays in order; or interleaved over the GPU's links, as NVLink GPUs spread their traffic to a
//! peer over all their links by address, so that one flow can use them all but its packets may
//! overtake each other. A packet's latency runs from its generation (source queueing included) to its
//! arrival. After a warm-up, packets generated
//! during the measurement window are timed, and the payload bytes arriving in it are the accepted
//! throughput. Generation then stops and the fabric drains: every packet generated must arrive, once,
//! with the data it was sent with (and with [`Spread::Flow`] and no faults, in order per source and
//! destination), or the run is not verified. Links and switch ports may fail during the run, as in
//! collective sweeps: packets caught by a failure are sent again another way, and their latency shows
//! it.

use std::collections::{HashSet, VecDeque};

use link_dl::flit::FLIT_LEN;
use link_dl::{DlConfig, Received, Vc};
use link_phy::time::{Duration, Instant};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::{SplitMix64, Xoshiro256PlusPlus};

use crate::collective::{carries, payload_of, words_of, PER_PACKET};
use crate::hashing::MixHash;
use crate::net::{App, FailoverStats, Job, LinkTotals, Net, Offer, Outgoing};
use crate::run::{record_links, resolve_faults, FaultSpec};
use crate::topology::Topology;
use crate::trace::TraceSummary;
use crate::wire;

mod background;
pub(crate) use background::Running as RunningBackground;
pub use background::{Background, BackgroundReport};

/// The hot spot's share of packets by default, with [`Pattern::Hotspot`].
pub const HOTSPOT_SHARE: f64 = 0.2;
/// Data bytes per packet at most (and by default).
pub const PAYLOAD_BYTES: usize = 128;
/// Data bytes per packet at least: the first 8 carry the packet's birth time, and data comes in flits.
pub const MIN_PAYLOAD_BYTES: usize = FLIT_LEN;
/// Packets each port's source queue holds; a packet generated for a full one is counted, not queued (the
/// offered load is then more than the port can take).
pub const SOURCE_QUEUE: usize = 1024;
/// Latencies below this many nanoseconds are counted in 1 ns bins; longer ones (a saturated fabric's)
/// are kept one by one.
const LATENCY_BINS: usize = 1 << 18;
/// Simulated time the fabric has to drain after generation stops, beyond its routes' wire latency
/// ([`drain_limit`]).
const DRAIN_LIMIT: Duration = Duration::from_ms(10);
/// Drains a fabric still delivering at the end of one gets after the first ([`run_draining`]).
const MORE_DRAINS: u32 = 100;
/// The birth time of a GPU that sends nothing.
const NEVER: Instant = Instant(u64::MAX);

/// Where each GPU's packets go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Each packet to a GPU drawn uniformly from the others.
    Uniform,
    /// Each GPU to one other, fixed for the run: a random permutation without fixed points.
    Permutation,
    /// GPU `i` to GPU `i + 1` (the last to the first).
    Neighbor,
    /// Each packet to GPU 0 with this probability, otherwise uniform (GPU 0's own uniform).
    Hotspot(f64),
}

impl Pattern {
    /// The pattern named `name` (`hotspot` sends `hot` of the packets to GPU 0).
    pub fn parse(name: &str, hot: f64) -> Result<Pattern, String> {
        match name {
            "uniform" => Ok(Pattern::Uniform),
            "permutation" => Ok(Pattern::Permutation),
            "neighbor" => Ok(Pattern::Neighbor),
            "hotspot" if (0.0..=1.0).contains(&hot) => Ok(Pattern::Hotspot(hot)),
            "hotspot" => Err(format!("the hot spot's share must be from 0 to 1, not {hot}")),
            _ => Err(format!(
                "unknown pattern {name:?}: uniform, permutation, neighbor or hotspot"
            )),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Uniform => "uniform",
            Pattern::Permutation => "permutation",
            Pattern::Neighbor => "neighbor",
            Pattern::Hotspot(_) => "hotspot",
        }
    }
}

/// How a GPU spreads its packets over its ports that lead to their destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Each flow (source, destination) on the port the switches' flow hash picks: one path, in order.
    Flow,
    /// Packet by packet over the GPU's links in turn (a port in proportion to the links ganged in it),
    /// as NVLink interleaves addresses over links: a flow uses every port, and may arrive out of order.
    Links,
}

impl Spread {
    /// The spread named `name`.
    pub fn parse(name: &str) -> Result<Spread, String> {
        match name {
            "flow" => Ok(Spread::Flow),
            "links" => Ok(Spread::Links),
            _ => Err(format!("unknown spread {name:?}: flow or links")),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Spread::Flow => "flow",
            Spread::Links => "links",
        }
    }

    /// What it does, in a few words for a title.
    pub fn words(self) -> &'static str {
        match self {
            Spread::Flow => "one path per flow",
            Spread::Links => "spread over the links",
        }
    }
}

/// One run of synthetic traffic.
#[derive(Clone, Debug)]
pub struct TrafficSpec {
    /// Where packets go.
    pub pattern: Pattern,
    /// How each GPU spreads them over its ports.
    pub spread: Spread,
    /// Offered load: the fraction of each GPU's injection bandwidth (the sum of its links' rates) that
    /// its packets would fill, headers included; more than 0, at most 1.
    pub load: f64,
    /// Simulated time before measuring, for the fabric to reach its steady state; `None` for
    /// [`auto_warmup`].
    pub warmup: Option<Duration>,
    /// The measurement window.
    pub measure: Duration,
    /// Seed of the arrivals, the destinations, the data and any bit errors.
    pub seed: u64,
    /// Random bit error rate on every link, instead of the topology's (the data links replay what it
    /// corrupts).
    pub ber: Option<f64>,
    /// Links and switch ports that fail, at times from the start of the run.
    pub faults: Vec<FaultSpec>,
    /// How long the fabric manager takes from a failure to its new routes
    /// ([`crate::net::Net::schedule_faults`]).
    pub replan_delay: Duration,
    /// Data bytes per packet: a multiple of 16 from 16 to 128.
    pub payload_bytes: usize,
    /// Write a pcap trace of the links.
    pub pcap: Option<crate::run::Recording>,
    /// Write waveforms of the links' states (records: value changes).
    pub vcd: Option<crate::run::Recording>,
    /// Let idle stretches pass at once ([`Net::set_skip_idle`]; the CLI always does): the run is the
    /// same either way, only faster at light loads.
    pub skip_idle: bool,
    /// Whether to note what every trunk carries over the measurement window ([`TrafficReport::trunks`]).
    pub trunks: bool,
}

impl TrafficSpec {
    /// Traffic of `pattern`, spread by `spread`, at `load`: warmed up as [`auto_warmup`] says, measured
    /// over 3 us, seed 1, full packets, the topology's bit error rate, no faults and no traces.
    pub fn new(pattern: Pattern, spread: Spread, load: f64) -> Self {
        TrafficSpec {
            pattern,
            spread,
            load,
            warmup: None,
            measure: Duration::from_us(3),
            seed: 1,
            ber: None,
            faults: Vec::new(),
            replan_delay: Duration::ZERO,
            payload_bytes: PAYLOAD_BYTES,
            pcap: None,
            vcd: None,
            skip_idle: true,
            trunks: false,
        }
    }
}

/// Latencies of the packets generated in the measurement window, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latency {
    /// Packets timed.
    pub packets: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median (to the nanosecond).
    pub p50_ns: u64,
    /// 99th percentile (to the nanosecond).
    pub p99_ns: u64,
    /// Longest.
    pub max_ns: u64,
}

/// What synthetic traffic measured, in a run of its own or beside a collective. Throughputs are payload
/// bytes per GPU, GB/s (1e9 B/s).
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Payload each GPU offered, on average.
    pub offered_gbps: f64,
    /// Payload arriving per GPU during the measurement window, on average.
    pub accepted_gbps: f64,
    /// Latencies of the packets generated in the window.
    pub latency: Latency,
    /// Packets generated, all GPUs and the whole run.
    pub generated: u64,
    /// Packets delivered, all GPUs and the whole run.
    pub delivered: u64,
    /// Packets lost to failures: switches held them where failures cut them off from both their ends
    /// ([`crate::net::FailoverStats::packets_lost`]), or failures split the GPUs and no route led to
    /// their destination any more.
    pub lost: u64,
    /// Packets not generated because no route led to their destination (failures split the GPUs).
    pub unroutable: u64,
    /// Packets not generated because the source queue of their port was full.
    pub source_full: u64,
    /// Packets still on their way when the run ended: the fabric did not drain ([`Measured::undrained`]).
    pub undelivered: u64,
    /// Simulated time from the end of generation to the end of the run.
    pub drained_for: Duration,
    /// Whether every packet generated arrived once, intact (in order per source and destination where
    /// flows keep one path), and the fabric drained in time: none lost, none undelivered.
    pub verified: bool,
    /// The first thing that was wrong, if any (a packet the fabric lost is not: see [`Measured::loss`];
    /// nor is one still on its way: [`Measured::undrained`]).
    pub problem: Option<String>,
}

impl Measured {
    /// What the fabric had not delivered when the run ended, in words, if anything.
    pub fn undrained(&self) -> Option<String> {
        (self.undelivered > 0).then(|| {
            format!(
                "{} of {} packets still undelivered {} us after generation stopped",
                self.undelivered,
                self.generated,
                self.drained_for.as_ps() / 1_000_000
            )
        })
    }

    /// What failures lost, in words, if anything.
    pub fn loss(&self) -> Option<String> {
        let lost = (self.lost > 0).then(|| {
            format!(
                "{} of {} packets lost: failures cut off the switches holding them from both their ends, \
                 or the GPUs from each other (NVLink has no end-to-end retry)",
                self.lost, self.generated
            )
        });
        let unroutable = (self.unroutable > 0).then(|| {
            format!(
                "{} not generated: failures split the GPUs, and no route led to their destination",
                self.unroutable
            )
        });
        match (lost, unroutable) {
            (Some(lost), Some(unroutable)) => Some(format!("{lost}; {unroutable}")),
            (lost, unroutable) => lost.or(unroutable),
        }
    }
}

/// What a run of synthetic traffic measured.
#[derive(Clone, Debug)]
pub struct TrafficReport {
    /// The offered load, as given.
    pub load: f64,
    /// The warm-up used.
    pub warmup: Duration,
    /// The warm-up the fabric gets unless told otherwise ([`auto_warmup`]): a shorter one may measure
    /// before the queues have filled.
    pub default_warmup: Duration,
    /// Throughput, latency and delivery.
    pub measured: Measured,
    /// Simulated time the run took, drain included.
    pub simulated: Duration,
    /// What the links did.
    pub links: LinkTotals,
    /// What the switches did, added up.
    pub switches: switch_fw::switch::SwitchCounters,
    /// Of the simulated time, the idle stretches let pass at once ([`Net::set_skip_idle`]): at light
    /// loads, the waits between births, and the drain's wait for the last Updates.
    pub idle_skipped: Duration,
    /// What failover did, if faults were scheduled.
    pub failover: FailoverStats,
    /// Why the fabric manager refused the drains it refused ([`FailoverStats::drains_refused`]), in order.
    pub drain_refusals: Vec<String>,
    /// The faults due after the run had ended, which did not happen.
    pub faults_after_end: usize,
    /// Whether the run ended before the fabric manager's new routes after a failure or repair.
    pub replan_pending: bool,
    /// With `replan_pending`: whether links still training held the new routes back, not the fabric
    /// manager's delay ([`Net::replan_waits_for_links`]).
    pub replan_waits_for_links: bool,
    /// What the pcap trace holds and left out, if one was written.
    pub trace: Option<TraceSummary>,
    /// Value changes written to the waveforms and left out, if they were written.
    pub waves: Option<(u64, u64)>,
    /// What every trunk carried over the measurement window, if [`TrafficSpec::trunks`] asked.
    pub trunks: Option<Vec<crate::net::TrunkLoad>>,
}

/// Each GPU's injection bandwidth for traffic among the GPUs `members` (the sum of the rates of its
/// links whose ports lead to another member, GB/s: GPUs do not forward, so a direct link to a GPU that
/// takes no part carries none of it), and the bytes a packet of `payload_bytes` takes on a link (header
/// flit, NVLink's address-extension flit if the format has one, data flits).
pub fn injection(net: &Net, topology: &Topology, members: &[u16], payload_bytes: usize) -> (Vec<f64>, usize) {
    let fabric = net.fabric();
    let bandwidth = fabric
        .gpus
        .iter()
        .enumerate()
        .map(|(g, &node)| {
            let leads = |port: usize| {
                members
                    .iter()
                    .any(|&m| usize::from(m) != g && fabric.routes[node][usize::from(m)].contains(port))
            };
            fabric.ports[node]
                .iter()
                .enumerate()
                .filter(|&(port, _)| leads(port))
                .map(|(_, &(t, _))| fabric.trunks[t].gbps)
                .sum()
        })
        .collect();
    (bandwidth, topology.flits_per_packet(payload_bytes) * FLIT_LEN)
}

/// The warm-up a fabric gets unless told otherwise: 1 us, plus four times the wire latency of the longest
/// route up*/down* routing allows (up to the highest switch level and down again, every trunk as slow as
/// the slowest), so that the first packets have long arrived and the queues filled to their steady
/// state before measuring starts.
pub fn auto_warmup(net: &Net) -> Duration {
    Duration::from_us(1) + route_wait(net)
}

/// How long the fabric has to deliver what was generated once generation stops: [`DRAIN_LIMIT`] plus
/// four times the longest route's wire latency, so that a fabric of slow wires (a topology file's link
/// may take up to a second) is not reported as losing the packets still on them.
pub(crate) fn drain_limit(net: &Net) -> Duration {
    DRAIN_LIMIT + route_wait(net)
}

/// Run `app` on `net` until it is done or `end` (the end of a drain of `drain`) passes; then, while it
/// is not done, for one more `drain` at a time (at most [`MORE_DRAINS`]) as long as the last delivered
/// a packet or the fabric manager has new routes to come: a slow wire's backlog, or packets held for a
/// replan delay longer than the drain, are on their way, not lost. Returns whether the app finished.
pub(crate) fn run_draining(net: &mut Net, app: &mut dyn App, end: Instant, drain: Duration) -> bool {
    let mut end = end;
    // The first drain's deliveries are not told apart from the run's before it: a fabric that
    // delivered nothing in it gets one more drain at most.
    let mut delivered = net.stats().packets_delivered;
    let mut finished = net.run(app, end);
    for _ in 0..MORE_DRAINS {
        let moved = net.stats().packets_delivered > delivered;
        if finished || net.fatal().is_some() || !(moved || net.replan_pending()) {
            break;
        }
        delivered = net.stats().packets_delivered;
        end += drain;
        finished = net.run(app, end);
    }
    finished
}

/// Four times the wire latency of the longest route up*/down* routing allows (up to the highest switch
/// level and down again, every trunk as slow as the slowest).
fn route_wait(net: &Net) -> Duration {
    let fabric = net.fabric();
    let top = fabric
        .level
        .iter()
        .filter(|&&l| l != usize::MAX)
        .max()
        .copied()
        .unwrap_or(0);
    let hops = 2 * (top as u64 + 2);
    let slowest = fabric.trunks.iter().map(|t| t.latency_ns).fold(0.0, f64::max);
    Duration::from_ps((4.0 * hops as f64 * slowest * 1000.0) as u64)
}

/// Run `spec` on `topology` (a fresh fabric, every link up).
pub fn run_traffic(topology: &Topology, spec: &TrafficSpec) -> Result<TrafficReport, String> {
    check_load_and_bytes(spec.load, spec.payload_bytes)?;
    if spec.measure == Duration::ZERO {
        return Err("the measurement window must be longer than 0".into());
    }
    let partitions = topology.partition_count();
    if partitions > 1 {
        return Err(format!(
            "{}: its GPUs are in {partitions} partitions, and the switches would drop every packet between \
             them (run on one partition's GPUs, `--gpus`)",
            topology.name
        ));
    }
    let mut topology = topology.clone();
    if let Some(ber) = spec.ber {
        for l in &mut topology.links {
            l.ber = ber;
        }
    }
    let topology = &topology;
    let mut net = Net::new(topology, &[], DlConfig::default(), spec.seed)?;
    net.set_skip_idle(spec.skip_idle);
    let gpus = net.fabric().gpus.len();
    if gpus < 2 {
        return Err(format!("{} has fewer than two GPUs", topology.name));
    }
    net.set_jobs(vec![Job {
        name: "the traffic's GPUs".into(),
        gpus: (0..gpus).collect(),
        goes_on_split: true,
        talks: None,
    }])
    .map_err(|e| format!("{e} (run on the GPUs of one part of the fabric: `linkctl sim traffic --gpus`)"))?;
    let faults = resolve_faults(&spec.faults, topology, &net)?;
    if !faults.is_empty() {
        net.schedule_faults(&faults, spec.replan_delay)?;
    }
    record_links(&mut net, topology, &spec.pcap, &spec.vcd)?;
    let members: Vec<u16> = (0..gpus as u16).collect();
    let (bandwidth, wire_bytes) = injection(&net, topology, &members, spec.payload_bytes);
    let extension = topology.address_extension();
    let default_warmup = auto_warmup(&net);
    let warmup = spec.warmup.unwrap_or(default_warmup);
    let stop = Instant::ZERO + warmup + spec.measure;
    let mut app = Traffic::new(
        spec,
        warmup,
        &bandwidth,
        net.fabric().gpu_port_links(),
        members,
        wire_bytes,
        extension,
    );
    if spec.trunks {
        net.mark_trunks_at(Instant::ZERO + warmup);
        net.mark_trunks_at(stop);
    }
    let drain = drain_limit(&net);
    let finished = run_draining(&mut net, &mut app, stop + drain, drain);
    // The run ends before the window does when the last packet arrives before it and no other is born
    // in it (at light loads): the trunks carry nothing more, and a reading not taken is what they had
    // carried by then, over the units their wires had time for until the window's mark.
    let trunks = spec.trunks.then(|| {
        let marks = net.trunk_marks();
        let reading = |k: usize, at: Instant| {
            marks
                .get(k)
                .map_or_else(|| net.trunk_loads_at(at), |(_, loads)| loads.clone())
        };
        crate::net::loads_between(&reading(0, Instant::ZERO + warmup), &reading(1, stop))
    });
    let offered = offered_gbps(&bandwidth, spec.load, spec.payload_bytes, wire_bytes);
    Ok(TrafficReport {
        load: spec.load,
        warmup,
        default_warmup,
        failover: net.failover_stats(),
        drain_refusals: net.drain_refusals().to_vec(),
        faults_after_end: crate::run::faults_due_after(&spec.faults, net.now()),
        replan_pending: net.replan_owed(),
        replan_waits_for_links: net.replan_waits_for_links(),
        measured: app.measured(
            offered,
            spec.measure,
            finished,
            net.now().saturating_since(stop),
            net.fatal(),
        ),
        simulated: net.now().saturating_since(Instant::ZERO),
        links: net.link_totals(),
        switches: net.switch_totals(),
        idle_skipped: net.idle_skipped(),
        trace: net.finish_trace()?,
        waves: net.finish_waves()?,
        trunks,
    })
}

/// That an offered load and a packet's data bytes are ones traffic can be made of.
fn check_load_and_bytes(load: f64, payload_bytes: usize) -> Result<(), String> {
    if !(load > 0.0 && load <= 1.0) {
        return Err(format!(
            "the offered load is a fraction of the GPUs' injection bandwidth, above 0 and at most 1, not {load}"
        ));
    }
    if !(MIN_PAYLOAD_BYTES..=PAYLOAD_BYTES).contains(&payload_bytes) || payload_bytes % FLIT_LEN != 0 {
        return Err(format!(
            "packets carry a multiple of {FLIT_LEN} bytes from {MIN_PAYLOAD_BYTES} to {PAYLOAD_BYTES}, \
             not {payload_bytes}"
        ));
    }
    Ok(())
}

/// The payload each GPU offers at `load`, on average, GB/s: `load` of its injection bandwidth, less
/// the headers.
fn offered_gbps(bandwidth: &[f64], load: f64, payload_bytes: usize, wire_bytes: usize) -> f64 {
    bandwidth
        .iter()
        .map(|b| load * b * payload_bytes as f64 / wire_bytes as f64)
        .sum::<f64>()
        / bandwidth.len() as f64
}

/// A packet waiting at its source.
#[derive(Clone, Copy, Debug)]
struct Pending {
    dest: u16,
    seq: u32,
    born: Instant,
}

/// The traffic app.
#[derive(Debug)]
struct Traffic {
    n: usize,
    /// The GPUs that send and receive the traffic (all of them for a traffic run; beside a collective,
    /// the ones it was given), and each GPU's place among them (`u16::MAX` if it takes no part).
    members: Vec<u16>,
    member_index: Vec<u16>,
    pattern: Pattern,
    spread: Spread,
    /// Whether each flow's packets must arrive in order: one path per flow, never rerouted.
    ordered: bool,
    /// Links behind each port of each GPU, and how many packets each GPU has interleaved over them.
    port_links: Vec<Vec<u32>>,
    interleaved: Vec<u64>,
    seed: u64,
    extension: bool,
    /// Data flits per packet.
    data_flits: usize,
    start: Instant,
    stop: Instant,
    /// Per GPU: mean time between packets (ps), its random numbers, when its next packet is generated,
    /// its source queue per port, and the alarm it asked for.
    gap_ps: Vec<f64>,
    rngs: Vec<Xoshiro256PlusPlus>,
    next_birth: Vec<Instant>,
    queues: Vec<Vec<VecDeque<Pending>>>,
    /// Per GPU: the plan of the routes its queues were filled under (see [`Offer::routes_plan`]).
    routes_seen: Vec<usize>,
    alarm: Vec<Option<Instant>>,
    alarms: Vec<(Instant, usize)>,
    /// The permutation's destination of each GPU.
    permutation: Vec<u16>,
    /// Per (source, destination): the next sequence number to send, and the first not yet received.
    sent: Vec<u32>,
    expected: Vec<u32>,
    /// Packets received ahead of `expected`, as (source * n + destination) << 32 | sequence number.
    ahead: HashSet<u64, MixHash>,
    generated: u64,
    delivered: u64,
    lost: u64,
    unroutable: u64,
    source_full: u64,
    window_bytes: u64,
    bins: Vec<u32>,
    /// Latencies of `LATENCY_BINS` ns or more, in ns.
    long_latencies: Vec<u64>,
    timed: u64,
    latency_sum_ps: u128,
    latency_max_ps: u64,
    problem: Option<String>,
}

impl Traffic {
    /// Traffic as `spec` says among the GPUs `members` (in the order the patterns take them) of a fabric
    /// whose GPUs have the injection `bandwidth` and the links behind each port of `port_links`.
    fn new(
        spec: &TrafficSpec,
        warmup: Duration,
        bandwidth: &[f64],
        port_links: Vec<Vec<u32>>,
        members: Vec<u16>,
        wire_bytes: usize,
        extension: bool,
    ) -> Traffic {
        let n = bandwidth.len();
        let mut member_index = vec![u16::MAX; n];
        for (i, &g) in members.iter().enumerate() {
            member_index[usize::from(g)] = i as u16;
        }
        let mut rngs: Vec<_> = (0..n)
            .map(|g| Xoshiro256PlusPlus::seed_from_u64(spec.seed ^ (g as u64 + 1) << 32))
            .collect();
        // bytes per ns = GB/s: the mean gap between packets that fill `load` of the links.
        let gap_ps: Vec<f64> = bandwidth
            .iter()
            .map(|&b| wire_bytes as f64 / (spec.load * b) * 1000.0)
            .collect();
        // A GPU that takes no part has no births.
        let next_birth = (0..n)
            .map(|g| match member_index[g] {
                u16::MAX => NEVER,
                _ => Instant::ZERO + exponential(&mut rngs[g], gap_ps[g]),
            })
            .collect();
        // The permutation runs among the members: each member's destination.
        let mut permutation = vec![0; n];
        for (i, &to) in derangement(members.len(), spec.seed).iter().enumerate() {
            permutation[usize::from(members[i])] = members[usize::from(to)];
        }
        Traffic {
            n,
            pattern: spec.pattern,
            spread: spec.spread,
            ordered: spec.spread == Spread::Flow && spec.faults.is_empty(),
            queues: port_links
                .iter()
                .map(|ports| vec![VecDeque::new(); ports.len()])
                .collect(),
            port_links,
            interleaved: vec![0; n],
            seed: spec.seed,
            extension,
            data_flits: spec.payload_bytes / FLIT_LEN,
            start: Instant::ZERO + warmup,
            stop: Instant::ZERO + warmup + spec.measure,
            gap_ps,
            rngs,
            next_birth,
            routes_seen: vec![0; n],
            alarm: vec![None; n],
            alarms: Vec::new(),
            permutation,
            members,
            member_index,
            sent: vec![0; n * n],
            expected: vec![0; n * n],
            ahead: HashSet::default(),
            generated: 0,
            delivered: 0,
            lost: 0,
            unroutable: 0,
            source_full: 0,
            window_bytes: 0,
            bins: vec![0; LATENCY_BINS],
            long_latencies: Vec::new(),
            timed: 0,
            latency_sum_ps: 0,
            latency_max_ps: 0,
            problem: None,
        }
    }

    /// Start at `at` rather than at time zero: births and the measurement window move with it.
    fn start_at(&mut self, at: Instant) {
        let shift = at.saturating_since(Instant::ZERO);
        for birth in self.next_birth.iter_mut().filter(|b| **b != NEVER) {
            *birth += shift;
        }
        self.start += shift;
        self.stop += shift;
    }

    /// Generate GPU `gpu`'s packets born up to `now` (and before generation stops) into the queues of
    /// the ports they take (`offer` knows the routes; without one, none leads anywhere), and ask for an
    /// alarm at the next birth, so that each packet is generated, and admitted or refused, at the time it
    /// is born.
    // Asked at every offer, nearly always to do nothing: that test is inlined, the work out of line.
    #[inline(always)]
    fn generate(&mut self, now: Instant, gpu: usize, offer: Option<&Offer>) {
        let next = self.next_birth[gpu];
        if next < self.stop && (next <= now || self.alarm[gpu] != Some(next)) {
            self.generate_born(now, gpu, offer);
        }
    }

    /// The work of [`Traffic::generate`], once a packet is due or the alarm is yet to be asked for.
    #[inline(never)]
    fn generate_born(&mut self, now: Instant, gpu: usize, offer: Option<&Offer>) {
        while self.next_birth[gpu] <= now && self.next_birth[gpu] < self.stop {
            let born = self.next_birth[gpu];
            let dest = self.destination(gpu);
            match offer.and_then(|offer| self.port_for(gpu, dest, offer)) {
                Some(port) if self.queues[gpu][port].len() < SOURCE_QUEUE => {
                    let pair = gpu * self.n + usize::from(dest);
                    let seq = self.sent[pair];
                    self.sent[pair] = seq.wrapping_add(1);
                    self.queues[gpu][port].push_back(Pending { dest, seq, born });
                    self.generated += 1;
                }
                Some(_) => self.source_full += 1,
                // Failures split the GPUs (routes join them all when the run starts).
                None => self.unroutable += 1,
            }
            self.next_birth[gpu] = born + exponential(&mut self.rngs[gpu], self.gap_ps[gpu]);
        }
        let next = self.next_birth[gpu];
        if next < self.stop && self.alarm[gpu] != Some(next) {
            self.alarm[gpu] = Some(next);
            self.alarms.push((next, gpu));
        }
    }

    /// The port GPU `gpu`'s next packet to `dest` leaves by, as the spread says; `None` if none leads
    /// there.
    fn port_for(&mut self, gpu: usize, dest: u16, offer: &Offer) -> Option<usize> {
        match self.spread {
            Spread::Flow => offer.flow_port(gpu as u16, dest, Vc::Posted),
            Spread::Links => self.next_link_port(gpu, dest, offer),
        }
    }

    /// After the routes changed (a failure), move GPU `gpu`'s queued packets whose port no longer leads
    /// to their destination onto one that does (in the order they were queued; the others stay where
    /// they are): a dead port is never offered again.
    #[cold]
    #[inline(never)]
    fn rehome(&mut self, gpu: usize, offer: &Offer) {
        self.routes_seen[gpu] = offer.routes_plan;
        let mut moved = Vec::new();
        for (port, queue) in self.queues[gpu].iter_mut().enumerate() {
            let (stay, go): (VecDeque<Pending>, VecDeque<Pending>) =
                queue.drain(..).partition(|p| offer.routes_through(p.dest, port));
            *queue = stay;
            moved.extend(go);
        }
        for p in moved {
            match self.port_for(gpu, p.dest, offer) {
                Some(port) => self.queues[gpu][port].push_back(p),
                // Failures split the GPUs: lost.
                None => self.lose(gpu, usize::from(p.dest), p.seq),
            }
        }
    }

    /// The port of GPU `gpu` that its next packet to `dest` leaves by, interleaving its packets over the
    /// links of the ports that lead there.
    fn next_link_port(&mut self, gpu: usize, dest: u16, offer: &Offer) -> Option<usize> {
        let links = self.port_links.get(gpu)?;
        let leads = |p: &usize| offer.routes_through(dest, *p);
        let total: u64 = (0..links.len()).filter(leads).map(|p| u64::from(links[p])).sum();
        if total == 0 {
            return None;
        }
        let mut k = self.interleaved[gpu] % total;
        self.interleaved[gpu] += 1;
        for p in (0..links.len()).filter(leads) {
            match k.checked_sub(u64::from(links[p])) {
                Some(rest) => k = rest,
                None => return Some(p),
            }
        }
        None
    }

    /// Where member `gpu`'s next packet goes: another member.
    fn destination(&mut self, gpu: usize) -> u16 {
        let members = &self.members;
        let m = members.len();
        let me = usize::from(self.member_index[gpu]);
        let uniform = |rng: &mut Xoshiro256PlusPlus| {
            // Another member: one of the m - 1, skipping `gpu`.
            let k = (rng.next_u64() % (m as u64 - 1)) as usize;
            members[if k >= me { k + 1 } else { k }]
        };
        match self.pattern {
            Pattern::Uniform => uniform(&mut self.rngs[gpu]),
            Pattern::Permutation => self.permutation[gpu],
            Pattern::Neighbor => members[(me + 1) % m],
            Pattern::Hotspot(hot) => {
                let rng = &mut self.rngs[gpu];
                if me != 0 && unit_interval(rng) < hot {
                    members[0]
                } else {
                    uniform(rng)
                }
            }
        }
    }

    /// Send `head`, the first packet of GPU `gpu`'s queue for the port `offer`, if the port has room.
    // Out of line: most offers find the queue empty, and need none of the registers it takes.
    #[inline(never)]
    fn send_head(&mut self, gpu: usize, head: Pending, offer: &mut Offer) -> bool {
        let flits = usize::from(self.extension) + self.data_flits;
        if !offer.fits(Vc::Posted, flits) || !offer.send(&self.outgoing(gpu, &head)) {
            return false;
        }
        self.queues[gpu][offer.port].pop_front();
        true
    }

    /// Data words per packet.
    fn elements(&self) -> usize {
        (self.data_flits * FLIT_LEN / 4).min(PER_PACKET)
    }

    fn outgoing(&self, gpu: usize, p: &Pending) -> Outgoing {
        Outgoing {
            dest: p.dest,
            vc: Vc::Posted,
            tl: wire::header(wire::OP_TRAFFIC, p.dest, gpu as u16, false, p.seq),
            payload: payload_of(&data_words(self.seed, gpu, p), self.elements(), self.extension),
            multicast: None,
        }
    }

    /// What the traffic measured, offering `offered_gbps` per GPU, over a window of `window`; `drained`
    /// says whether the fabric delivered everything in the `drained_for` since stopping, `fatal` why it
    /// could not go on.
    fn measured(
        &mut self,
        offered_gbps: f64,
        window: Duration,
        drained: bool,
        drained_for: Duration,
        fatal: Option<&str>,
    ) -> Measured {
        let problem = (self.problem.take()).or_else(|| fatal.map(|why| format!("the run stopped: {why}")));
        // A run that stopped has no undelivered packets to speak of: it says why it stopped.
        let undelivered = if drained || problem.is_some() {
            0
        } else {
            self.generated.saturating_sub(self.delivered + self.lost)
        };

        let window_ns = (window.as_ps() as f64 / 1000.0).max(1.0);
        Measured {
            offered_gbps,
            accepted_gbps: self.window_bytes as f64 / window_ns / self.members.len() as f64,
            latency: self.latency(),
            generated: self.generated,
            delivered: self.delivered,
            lost: self.lost,
            unroutable: self.unroutable,
            source_full: self.source_full,
            undelivered,
            drained_for,
            verified: problem.is_none() && self.lost + self.unroutable + undelivered == 0,
            problem,
        }
    }

    fn latency(&self) -> Latency {
        if self.timed == 0 {
            return Latency::default();
        }
        let mut long = self.long_latencies.clone();
        long.sort_unstable();
        // The latency of rank `q` of those timed, to the nanosecond.
        let quantile = |q: f64| {
            let rank = ((self.timed as f64 * q).ceil() as u64).max(1);
            let mut seen = 0u64;
            for (ns, &count) in self.bins.iter().enumerate() {
                seen += u64::from(count);
                if seen >= rank {
                    return ns as u64;
                }
            }
            // Past the bins: among the long ones (ranks never exceed the packets timed).
            let k = usize::try_from(rank - seen - 1).unwrap_or(usize::MAX);
            long.get(k).or(long.last()).copied().unwrap_or_default()
        };
        Latency {
            packets: self.timed,
            mean_ns: self.latency_sum_ps as f64 / self.timed as f64 / 1000.0,
            p50_ns: quantile(0.5),
            p99_ns: quantile(0.99),
            max_ns: self.latency_max_ps / 1000,
        }
    }

    /// Count a timed packet's latency, `ps` picoseconds.
    fn time(&mut self, ps: u64) {
        self.timed += 1;
        self.latency_sum_ps += u128::from(ps);
        self.latency_max_ps = self.latency_max_ps.max(ps);
        match self.bins.get_mut((ps / 1000) as usize) {
            Some(bin) => *bin += 1,
            None => self.long_latencies.push(ps / 1000),
        }
    }

    fn wrong(&mut self, what: String) {
        self.problem.get_or_insert(what);
    }

    /// Count packet `seq` from `source` to `dest` lost.
    fn lose(&mut self, source: usize, dest: usize, seq: u32) {
        if self.account(source, dest, seq).is_err() {
            self.wrong(format!(
                "packet {seq} from GPU {source} to {dest} lost, but GPU {dest} has it"
            ));
        } else {
            self.lost += 1;
        }
    }

    /// Count packet `seq` from `source` to `dest` as come (delivered or lost), unless it came before
    /// (or, where flows keep one path, is out of order): then the sequence number expected next.
    fn account(&mut self, source: usize, dest: usize, seq: u32) -> Result<(), u32> {
        let pair = source * self.n + dest;
        let expected = self.expected[pair];
        let ahead_key = |seq: u32| (pair as u64) << 32 | u64::from(seq);
        if seq == expected {
            let mut next = seq.wrapping_add(1);
            while self.ahead.remove(&ahead_key(next)) {
                next = next.wrapping_add(1);
            }
            self.expected[pair] = next;
            Ok(())
        } else if !self.ordered && seq.wrapping_sub(expected) < 1 << 31 && self.ahead.insert(ahead_key(seq)) {
            // Overtook packets sent before it by other links.
            Ok(())
        } else {
            Err(expected)
        }
    }
}

impl App for Traffic {
    fn next(&mut self, now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        if gpu >= self.n {
            return false;
        }
        if offer.routes_plan != self.routes_seen[gpu] {
            self.rehome(gpu, offer);
        }
        self.generate(now, gpu, Some(offer));
        let Some(&head) = self.queues[gpu].get(offer.port).and_then(VecDeque::front) else {
            return false;
        };
        self.send_head(gpu, head, offer)
    }

    fn receive(&mut self, now: Instant, gpu: usize, _port: usize, packet: &Received) {
        let (dest, source, multicast) = wire::route_fields(packet.tl);
        let source = usize::from(source);
        if wire::opcode(packet.tl) != wire::OP_TRAFFIC || multicast.is_some() || usize::from(dest) != gpu {
            return self.wrong(format!(
                "GPU {gpu} received a packet not addressed to it: {:#x}",
                packet.tl
            ));
        }
        if source >= self.n || source == gpu {
            return self.wrong(format!("GPU {gpu} received a packet from GPU {source}"));
        }
        let seq = wire::offset(packet.tl);
        if let Err(expected) = self.account(source, gpu, seq) {
            return self.wrong(format!(
                "GPU {gpu} received packet {seq} from GPU {source}, expecting {expected}: {}",
                if self.ordered {
                    "lost, repeated or out of order"
                } else {
                    "repeated"
                }
            ));
        }
        self.delivered += 1;
        let skip = usize::from(self.extension);
        let Some(first) = packet.payload.get(skip) else {
            return self.wrong(format!("packet {seq} from GPU {source} to {gpu} has no data"));
        };
        let born =
            Instant::ZERO + Duration::from_ps(u64::from_le_bytes(first[..8].try_into().unwrap_or_default()));
        let sent = Pending {
            dest: gpu as u16,
            seq,
            born,
        };
        if !carries(
            packet,
            self.extension,
            self.elements(),
            &data_words(self.seed, source, &sent),
        ) {
            return self.wrong(format!(
                "packet {seq} from GPU {source} to {gpu} arrived with other data"
            ));
        }
        if now >= self.start && now < self.stop {
            self.window_bytes += (self.data_flits * FLIT_LEN) as u64;
        }
        if born >= self.start && born < self.stop {
            self.time(now.saturating_since(born).as_ps());
        }
    }

    fn take_woken(&mut self) -> Option<usize> {
        None
    }

    fn take_alarm(&mut self) -> Option<(Instant, usize)> {
        self.alarms.pop()
    }

    fn isolated(&mut self, now: Instant, gpu: usize) {
        if gpu >= self.n {
            return;
        }
        // Nothing it queued can leave, and nothing born now has a way out.
        let queued: Vec<Pending> = self.queues[gpu].iter_mut().flat_map(|q| q.drain(..)).collect();
        for p in queued {
            self.lose(gpu, usize::from(p.dest), p.seq);
        }
        self.generate(now, gpu, None);
    }

    fn lost(&mut self, tl: u64) -> bool {
        let (dest, source, multicast) = wire::route_fields(tl);
        let (dest, source) = (usize::from(dest), usize::from(source));
        if wire::opcode(tl) != wire::OP_TRAFFIC || multicast.is_some() || source >= self.n || dest >= self.n {
            self.wrong(format!("the fabric lost a packet that is not traffic's: {tl:#x}"));
        } else {
            self.lose(source, dest, wire::offset(tl));
        }
        true
    }

    fn done(&self) -> bool {
        // The count first: it is asked after every event, and while packets are on their way it alone
        // answers.
        self.delivered + self.lost == self.generated && self.next_birth.iter().all(|&b| b >= self.stop)
    }
}

/// A packet's data: its birth time (ps) in the first two words, and words drawn from the seed, the
/// source, the destination, the sequence number and the birth time, so that the receiver can check every
/// byte.
fn data_words(seed: u64, source: usize, p: &Pending) -> [u32; PER_PACKET] {
    let born = p.born.saturating_since(Instant::ZERO).as_ps();
    let fields =
        seed ^ (source as u64) << 48 ^ u64::from(p.dest) << 32 ^ u64::from(p.seq) ^ born.rotate_left(17);
    // Mixed first: `words_of` takes its seed's halves into 32-bit lanes, where two seeds that differ in
    // a pattern of a few bits of each half give the same words. The birth time, read back from the
    // packet, is checked only through the words it gives: mixed, no change to it leaves them whole
    // but by chance (one in 2^64).
    let key = SplitMix64::seed_from_u64(fields).next_u64();
    let mut words = words_of(key);
    words[0] = born as u32;
    words[1] = (born >> 32) as u32;
    words
}

/// A number in (0, 1].
fn unit_interval(rng: &mut Xoshiro256PlusPlus) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// An exponentially distributed gap of mean `mean_ps`, at least 1 ps.
fn exponential(rng: &mut Xoshiro256PlusPlus, mean_ps: f64) -> Duration {
    Duration::from_ps((-unit_interval(rng).ln() * mean_ps).max(1.0) as u64)
}

/// A permutation of `0..n` without fixed points, drawn from `seed` (Sattolo's algorithm: one cycle).
fn derangement(n: usize, seed: u64) -> Vec<u16> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7065_726D);
    let mut p: Vec<u16> = (0..n as u16).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % i as u64) as usize;
        p.swap(i, j);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permutation_sends_no_gpu_to_itself_and_reaches_every_gpu_once() {
        for n in [2, 3, 8, 256] {
            let p = derangement(n, 5);
            let mut seen = vec![false; n];
            for (g, &d) in p.iter().enumerate() {
                assert_ne!(usize::from(d), g);
                assert!(!seen[usize::from(d)]);
                seen[usize::from(d)] = true;
            }
        }
    }

    /// Traffic of `pattern` at a load of 0.5 for 1 us, seeded with `seed`.
    fn spec(pattern: Pattern, spread: Spread, seed: u64) -> TrafficSpec {
        TrafficSpec {
            measure: Duration::from_us(1),
            seed,
            ..TrafficSpec::new(pattern, spread, 0.5)
        }
    }

    /// A two-GPU app and the first two packets GPU 1 would send GPU 0.
    fn app_and_packets(spread: Spread) -> (Traffic, [Received; 2]) {
        let spec = spec(Pattern::Neighbor, spread, 3);
        let app = Traffic::new(
            &spec,
            Duration::ZERO,
            &[100.0, 100.0],
            vec![vec![1], vec![1]],
            vec![0, 1],
            144,
            false,
        );
        let packet = |seq| {
            let p = Pending {
                dest: 0,
                seq,
                born: Instant::ZERO + Duration::from_ps(777),
            };
            app.outgoing(1, &p).to_received()
        };
        let packets = [packet(0), packet(1)];
        (app, packets)
    }

    #[test]
    fn packets_intact_and_once_pass_and_anything_else_is_caught() {
        let now = Instant::ZERO + Duration::from_ns(500);
        for spread in [Spread::Flow, Spread::Links] {
            let (mut app, [first, second]) = app_and_packets(spread);
            app.receive(now, 0, 0, &first);
            app.receive(now, 0, 0, &second);
            assert_eq!((app.problem.as_deref(), app.delivered), (None, 2));
            // The same packet again.
            app.receive(now, 0, 0, &second);
            assert!(app.problem.take().unwrap().contains("repeated"), "{spread:?}");

            let (mut app, [first, mut second]) = app_and_packets(spread);
            second.payload[3][5] ^= 1;
            app.receive(now, 0, 0, &first);
            app.receive(now, 0, 0, &second);
            assert!(app.problem.take().unwrap().contains("other data"), "{spread:?}");

            // The second before the first: allowed only when a flow's packets take several links.
            let (mut app, [first, second]) = app_and_packets(spread);
            app.receive(now, 0, 0, &second);
            app.receive(now, 0, 0, &first);
            assert_eq!(app.problem.take().is_some(), spread == Spread::Flow, "{spread:?}");
            // At the wrong GPU.
            app.receive(now, 1, 0, &first);
            assert!(
                app.problem.take().unwrap().contains("not addressed to it"),
                "{spread:?}"
            );
        }
    }

    /// A birth time changed so that, unmixed, the words' seed would have given the same words (each
    /// half of the seed changed so that every lane's input moves by 2^31, which the other half's change
    /// cancels) is caught.
    #[test]
    fn a_birth_time_that_would_give_the_same_unmixed_words_is_caught() {
        const C: u32 = 0x9E37_79B9;
        // C's inverse modulo 2^32, by Newton's iteration.
        let inverse = (0..5).fold(1u32, |x, _| x.wrapping_mul(2u32.wrapping_sub(C.wrapping_mul(x))));
        let now = Instant::ZERO + Duration::from_ns(500);
        let (mut app, [first, _]) = app_and_packets(Spread::Links);
        let born = 777u64;
        let fields = 3 ^ 1u64 << 48 ^ born.rotate_left(17);
        let (low, high) = (fields as u32, (fields >> 32) as u32);
        let twin_high = high ^ 0x8000;
        let step = 0x8000_0000u32
            .wrapping_sub(twin_high.wrapping_sub(high))
            .wrapping_mul(inverse);
        let twin = u64::from(twin_high) << 32 | u64::from((low & !31).wrapping_add(step) | (low & 31));
        assert_eq!(words_of(fields), words_of(twin), "the unmixed seeds are twins");
        let mut bad = first.clone();
        let twin_born = (twin ^ fields ^ born.rotate_left(17)).rotate_right(17);
        assert_ne!(twin_born, born);
        bad.payload[0][..8].copy_from_slice(&twin_born.to_le_bytes());
        app.receive(now, 0, 0, &bad);
        assert!(app.problem.take().unwrap().contains("other data"));
    }

    #[test]
    fn percentiles_are_exact_past_the_bins_too() {
        let (mut app, _) = app_and_packets(Spread::Links);
        // 100 packets timed: 98 at 5 ns, one at 400 us and one at 300 us (past the 1 ns bins).
        for _ in 0..98 {
            app.time(5_000);
        }
        app.time(400_000_000);
        app.time(300_000_000);
        let l = app.latency();
        assert_eq!((l.p50_ns, l.max_ns), (5, 400_000));
        assert_eq!(l.packets, 100);
        // Rank 99 of 100 is the shorter of the two long ones.
        assert_eq!(l.p99_ns, 300_000);
    }

    #[test]
    fn traffic_on_some_gpus_goes_between_them_only() {
        // In the order given: the first is the hot spot, the neighbour pattern goes round in that order.
        for members in [[1u16, 3, 4, 6], [6, 1, 4, 3]] {
            some_gpus_only(members);
        }
    }

    fn some_gpus_only(members: [u16; 4]) {
        for pattern in [
            Pattern::Uniform,
            Pattern::Permutation,
            Pattern::Neighbor,
            Pattern::Hotspot(0.5),
        ] {
            let mut app = Traffic::new(
                &spec(pattern, Spread::Links, 9),
                Duration::ZERO,
                &[100.0; 8],
                vec![vec![1]; 8],
                members.to_vec(),
                144,
                false,
            );
            for g in 0..8 {
                assert_eq!(app.next_birth[g] == NEVER, !members.contains(&(g as u16)), "{g}");
            }
            let mut reached = [0u32; 8];
            for &g in &members {
                for _ in 0..400 {
                    let dest = app.destination(usize::from(g));
                    assert!(dest != g && members.contains(&dest), "{pattern:?}: {g} to {dest}");
                    reached[usize::from(dest)] += 1;
                }
            }
            match pattern {
                Pattern::Permutation | Pattern::Neighbor => {
                    // Each member the destination of exactly one other.
                    assert!(
                        members.iter().all(|&g| reached[usize::from(g)] == 400),
                        "{pattern:?}"
                    );
                }
                // The first member is the hot one.
                Pattern::Hotspot(_) => {
                    let hot = usize::from(members[0]);
                    assert!(members[1..]
                        .iter()
                        .all(|&g| reached[hot] > 2 * reached[usize::from(g)]));
                }
                Pattern::Uniform => assert!(members.iter().all(|&g| reached[usize::from(g)] > 300)),
            }
            if pattern == Pattern::Neighbor {
                let next = members.map(|g| app.destination(usize::from(g)));
                assert_eq!(next, [members[1], members[2], members[3], members[0]]);
            }
        }
    }

    #[test]
    fn gaps_average_their_mean() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let total: u64 = (0..100_000).map(|_| exponential(&mut rng, 1000.0).as_ps()).sum();
        let mean = total as f64 / 100_000.0;
        assert!((mean - 1000.0).abs() < 10.0, "{mean}");
    }
}
