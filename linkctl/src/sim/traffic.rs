//! `linkctl sim traffic`: synthetic traffic at offered loads, with the throughput the fabric accepts and
//! the packets' latency at each.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant as WallClock;

use anyhow::{bail, Context};
use clap::Args;
use fabric_sim::topology::Topology;
use fabric_sim::traffic::{
    run_traffic, Measured, Pattern, Spread, TrafficReport, TrafficSpec, HOTSPOT_SHARE, MIN_PAYLOAD_BYTES,
    PAYLOAD_BYTES,
};
use link_phy::time::Duration;
use serde_json::{json, Value};

use super::{
    check_faults_kept, failover_json, failover_line, late_faults, parse_time, plot, replan_pending,
    replan_waits_for, some_gpus, switches_json, trace_json, trace_lines, trunk_lines, trunks_json,
    window_limited, window_notes, FaultArgs, PlotFile, TopologyArg, TraceArgs, EXIT_WRONG,
};

#[derive(Args, Debug)]
pub struct TrafficArgs {
    #[command(flatten)]
    pub topology: TopologyArg,
    /// Where each GPU's packets go: uniform (a random other GPU per packet), permutation (one other GPU,
    /// fixed), neighbor (the next GPU) or hotspot (--hotspot of them to GPU 0, the rest uniform)
    #[arg(long, default_value = "uniform")]
    pub pattern: String,
    /// Share of packets the hot spot gets, with --pattern hotspot [default: 0.2]
    #[arg(long, value_parser = crate::check::float)]
    pub hotspot: Option<f64>,
    /// How a GPU spreads its packets over its ports that lead to the destination: links (packet by packet
    /// over its links in turn, as NVLink interleaves addresses: a flow uses them all, out of order) or
    /// flow (each flow on the port the switches' flow hash picks: one path, in order)
    #[arg(long, default_value = "links")]
    pub spread: String,
    /// Offered loads, as fractions of each GPU's injection bandwidth (the sum of its links' rates,
    /// packet headers included), comma-separated; each is a run of its own
    #[arg(
        long,
        default_value = "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0",
        value_delimiter = ',',
        value_parser = crate::check::float
    )]
    pub load: Vec<f64>,
    /// Data bytes per packet: a multiple of 16 from 16 to 128 (small writes pay the same header flits)
    #[arg(long, default_value_t = PAYLOAD_BYTES)]
    pub bytes: usize,
    /// Simulated time before measuring; by default 1 us plus four times the wire latency of the
    /// fabric's longest route
    #[arg(long)]
    pub warmup: Option<String>,
    /// Measurement window: latencies of the packets generated in it, throughput of what arrives in it
    #[arg(long, default_value = "10us")]
    pub measure: String,
    /// Run on some of the fabric's GPUs only: a count (the first N) or names and runs, e.g. `gpu0,gpu2` or
    /// `gpu0..gpu7,gpu16..gpu23`
    #[arg(long, value_name = "N|GPU,GPU,...")]
    pub gpus: Option<String>,
    /// Seed of the arrivals, destinations, data and bit errors
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Bit errors and failures, at times from the start of each load's run
    #[command(flatten)]
    pub faults: FaultArgs,
    /// Print one JSON object instead of the table
    #[arg(long)]
    pub json: bool,
    /// Show, for each load, the N busiest trunks over the measurement window, each way: the share of its
    /// rate that packets took, and replays (JSON `trunks` in each point)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub trunks: usize,
    /// Write a plot of latency (mean and 99th percentile) against offered load (SVG)
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    /// Traces of one run (give one --load)
    #[command(flatten)]
    pub traces: TraceArgs,
}

pub fn run(args: TrafficArgs) -> anyhow::Result<ExitCode> {
    let whole = args.topology.load()?;
    let topology = match &args.gpus {
        Some(list) => some_gpus(&whole, list)?,
        None => whole.clone(),
    };
    // Each error names its option: the simulator's say only "the hot spot's share", "unknown pattern".
    if let Some(share) = args.hotspot {
        crate::check::ensure_within("--hotspot", share, 1.0)?;
    }
    let pattern = Pattern::parse(&args.pattern, args.hotspot.unwrap_or(HOTSPOT_SHARE))
        .map_err(|e| anyhow::anyhow!("--pattern: {e}"))?;
    if args.hotspot.is_some() && !matches!(pattern, Pattern::Hotspot(_)) {
        bail!("--hotspot is the hot spot's share of the packets: it needs --pattern hotspot");
    }
    let spread = Spread::parse(&args.spread).map_err(|e| anyhow::anyhow!("--spread: {e}"))?;
    if let Some(&bad) = args.load.iter().find(|&&l| !(l > 0.0 && l <= 1.0)) {
        bail!("--load {bad}: loads are fractions of the injection bandwidth, more than 0 and at most 1");
    }
    let (ber, faults) = (args.faults.ber()?, args.faults.faults()?);
    check_faults_kept(&faults, &whole, &topology, "--gpus")?;
    let replan_delay = args.faults.replan_delay()?;
    if args.traces.any() && args.load.len() != 1 {
        bail!(
            "--pcap and --vcd record one run: give one --load, not {}",
            args.load.len()
        );
    }
    let warmup = match &args.warmup {
        Some(w) => Some(parse_time(w).context("--warmup")?),
        None => None,
    };
    let measure = parse_time(&args.measure).context("--measure")?;
    if measure == Duration::ZERO {
        bail!("--measure must be longer than 0");
    }
    // Whole flits, from one to a full packet's (the simulator's check, with the option named).
    let bytes = args.bytes;
    if !(MIN_PAYLOAD_BYTES..=PAYLOAD_BYTES).contains(&bytes) || bytes % MIN_PAYLOAD_BYTES != 0 {
        bail!(
            "--bytes must be a multiple of {MIN_PAYLOAD_BYTES} from {MIN_PAYLOAD_BYTES} to {PAYLOAD_BYTES}, \
             not {bytes}"
        );
    }
    args.traces.check_files(args.plot.as_deref())?;
    let plot_file = PlotFile::create(args.plot.as_deref())?;
    let started = WallClock::now();
    let mut reports = Vec::new();
    // On a terminal, which load is running (a fat tree's take seconds each).
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    for (k, &load) in args.load.iter().enumerate() {
        if show_progress {
            eprint!(
                "\r# load {}: run {} of {}\x1b[K",
                load_text(load),
                k + 1,
                args.load.len()
            );
            let _ = std::io::stderr().flush();
        }
        let spec = TrafficSpec {
            pattern,
            spread,
            load,
            warmup,
            measure,
            seed: args.seed,
            ber,
            faults: faults.clone(),
            replan_delay,
            payload_bytes: args.bytes,
            pcap: args.traces.pcap(),
            vcd: args.traces.vcd(),
            skip_idle: true,
            trunks: args.trunks > 0,
        };
        let report = run_traffic(&topology, &spec);
        if show_progress {
            eprint!("\r\x1b[K");
        }
        reports.push(report.map_err(anyhow::Error::msg)?);
    }
    let wall = started.elapsed().as_secs_f64();
    let packets: u64 = reports.iter().map(|r| r.measured.delivered).sum();
    let verified = reports.iter().all(|r| r.measured.verified);
    let gpus = topology.gpus().len();
    let windows: Vec<Window> = (reports.iter())
        .map(|r| Window::of(r, gpus, args.bytes, measure))
        .collect();
    let summary = json!({
        "topology": topology.name,
        "window_limited": window_limited(&topology, args.bytes),
        "pattern": pattern.name(),
        "spread": spread.name(),
        "hotspot": match pattern {
            Pattern::Hotspot(share) => Some(share),
            _ => None,
        },
        "gpus": gpus,
        "payload_bytes": args.bytes,
        "warmup_us": reports.first().map(|r| r.warmup.as_ps() as f64 / 1e6),
        "default_warmup_us": reports.first().map(|r| r.default_warmup.as_ps() as f64 / 1e6),
        "measure_us": measure.as_ps() as f64 / 1e6,
        "seed": args.seed,
        "ber": ber,
        "replan_delay_ns": replan_delay.as_ps() as f64 / 1e3,
        "points": reports
            .iter()
            .zip(&windows)
            .map(|(r, w)| point(r, w.saturated, &topology, measure, args.trunks))
            .collect::<Vec<_>>(),
        "packets": packets,
        "wall_seconds": wall,
        "packets_per_s": packets as f64 / wall.max(1e-9),
        "verified": verified,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_table(
            &summary,
            spread,
            &reports,
            &windows,
            &topology,
            (args.trunks, measure),
        );
    }
    if let Some(file) = plot_file {
        let title = format!(
            "{} traffic on {} ({}), latency",
            pattern.name(),
            topology.name,
            spread.words()
        );
        // A load with no packet measured has no latency to plot.
        let points: Vec<_> = reports
            .iter()
            .filter(|r| r.measured.latency.packets > 0)
            .map(|r| {
                (
                    r.measured.offered_gbps,
                    r.measured.latency.mean_ns,
                    r.measured.latency.p99_ns as f64,
                )
            })
            .collect();
        file.write(&plot::latency_svg(title, &points))?;
    }
    Ok(if verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_WRONG)
    })
}

/// An offered load as the tables print it: two decimals, or in scientific notation below 0.01, which
/// two decimals would show as 0.
pub fn load_text(load: f64) -> String {
    if load >= 0.01 {
        format!("{load:.2}")
    } else {
        format!("{load:.2e}")
    }
}

/// What synthetic traffic measured, with the fields of `rest`: the JSON of a `sim traffic` point and of
/// `sim --background`.
pub fn measured_json(m: &Measured, rest: Value) -> Value {
    let l = &m.latency;
    let mut v = json!({
        "offered_gbps": m.offered_gbps,
        "accepted_gbps": m.accepted_gbps,
        // No packet measured has no latency (not one of 0 ns).
        "latency_ns": {
            "packets": l.packets,
            "mean": (l.packets > 0).then_some(l.mean_ns),
            "p50": (l.packets > 0).then_some(l.p50_ns),
            "p99": (l.packets > 0).then_some(l.p99_ns),
            "max": (l.packets > 0).then_some(l.max_ns),
        },
        "generated": m.generated,
        "delivered": m.delivered,
        "lost": m.lost,
        "unroutable": m.unroutable,
        "source_full": m.source_full,
        "undelivered": m.undelivered,
        "verified": m.verified,
        "problem": m.problem,
    });
    if let (Value::Object(v), Value::Object(rest)) = (&mut v, rest) {
        v.extend(rest);
    }
    v
}

/// What a load's measurement window holds, and what that says of its throughput.
struct Window {
    /// The packets the offered load puts in it on average, over all GPUs.
    packets: f64,
    /// Whether the fabric accepted less than was offered by more than chance explains. The packets born
    /// in the window are a Poisson count, so a light load or a short window can fall short of the
    /// offered load by luck alone: saturation is a shortfall of more than three standard deviations of
    /// that count, and of at least 5%. Packets that failures lost or left without a route are said
    /// apart, not as saturation.
    saturated: bool,
}

impl Window {
    fn of(r: &TrafficReport, gpus: usize, payload_bytes: usize, measure: Duration) -> Window {
        let m = &r.measured;
        let packets = m.offered_gbps * (measure.as_ps() as f64 / 1e3) * gpus as f64 / payload_bytes as f64;
        let shortfall = (3.0 / packets.sqrt()).max(0.05);
        Window {
            packets,
            saturated: packets > 0.0
                && m.accepted_gbps < (1.0 - shortfall) * m.offered_gbps
                && m.loss().is_none(),
        }
    }
}

fn point(r: &TrafficReport, saturated: bool, topology: &Topology, measure: Duration, trunks: usize) -> Value {
    let (trace, waves) = trace_json(r.trace, r.waves, topology);
    let mut point = measured_json(
        &r.measured,
        json!({
            "load": r.load,
            "faults_after_end": r.faults_after_end,
            "replan_pending": r.replan_pending,
            "saturated": saturated,
            "replays": r.links.dl.replays,
            "failover": failover_json(&r.failover, &r.drain_refusals),
            "bits_flipped": r.links.bits_flipped,
            "switches": switches_json(&r.switches),
            "simulated_us": r.simulated.as_ps() as f64 / 1e6,
            "idle_skipped_us": r.idle_skipped.as_ps() as f64 / 1e6,
            "trace": trace,
            "waves": waves,
            "trunks": r.trunks.as_ref().map(|loads| trunks_json(loads, measure, trunks, topology)),
        }),
    );
    // As `sim`'s: only a run with new routes to come says what held them.
    if r.replan_pending {
        point["replan_waits_for"] = json!(replan_waits_for(r.replan_waits_for_links));
    }
    point
}

fn print_table(
    s: &Value,
    spread: Spread,
    reports: &[TrafficReport],
    windows: &[Window],
    topology: &Topology,
    (trunks, measure): (usize, Duration),
) {
    println!(
        "# {} traffic on {}, {}: {} GPUs, {}-byte posted writes; warm-up {} us, measured over {} us",
        s["pattern"].as_str().unwrap_or_default(),
        s["topology"].as_str().unwrap_or_default(),
        spread.words(),
        s["gpus"],
        s["payload_bytes"],
        s["warmup_us"],
        s["measure_us"]
    );
    for note in window_notes(&s["window_limited"]) {
        println!("{note}");
    }
    println!(
        "# load: share of each GPU's injection bandwidth offered; GB/s: payload per GPU; measured: packets \
         born in the window, whose latency is given; delivered: all the run's"
    );
    println!(
        "#{:>6} {:>10} {:>10}  {:>9} {:>7} {:>7} {:>7} {:>9} {:>10} {:>9}",
        "load", "offered", "accepted", "mean ns", "p50", "p99", "max", "measured", "delivered", "src full"
    );
    for r in reports {
        let l = &r.measured.latency;
        // No packet measured has no latency: dashes, not zeros.
        let ns = |x: String| if l.packets > 0 { x } else { "-".to_owned() };
        println!(
            " {:>6} {:>10.1} {:>10.1}  {:>9} {:>7} {:>7} {:>7} {:>9} {:>10} {:>9}{}",
            load_text(r.load),
            r.measured.offered_gbps,
            r.measured.accepted_gbps,
            ns(format!("{:.1}", l.mean_ns)),
            ns(l.p50_ns.to_string()),
            ns(l.p99_ns.to_string()),
            ns(l.max_ns.to_string()),
            l.packets,
            r.measured.delivered,
            r.measured.source_full,
            verdict_mark(&r.measured)
        );
        let m = &r.measured;
        for what in m.problem.iter().cloned().chain(m.loss()).chain(m.undrained()) {
            println!("#   {what}");
        }
        if r.failover.links_failed + r.failover.links_degraded + r.failover.drains > 0 {
            println!("#   {}", failover_line(&r.failover).trim_start_matches("# "));
            for why in &r.drain_refusals {
                println!("#   {why}");
            }
        }
        if r.faults_after_end > 0 {
            println!("#   {}", late_faults("the run", r.simulated, r.faults_after_end));
        }
        if r.replan_pending {
            println!("#   {}", replan_pending("the run", r.replan_waits_for_links));
        }
        for line in trace_lines(r.trace, r.waves, topology) {
            println!("#   {}", line.trim_start_matches("# "));
        }
        if let Some(loads) = &r.trunks {
            for line in trunk_lines(loads, measure, "of the measurement window", trunks, topology) {
                println!("#   {}", line.trim_start_matches("# "));
            }
        }
        if r.idle_skipped > Duration::ZERO {
            println!(
                "#   {:.1} us of the {:.1} simulated the fabric sat idle (links only repeating their Updates), \
                 let pass at once",
                r.idle_skipped.as_ps() as f64 / 1e6,
                r.simulated.as_ps() as f64 / 1e6
            );
        }
    }
    // A load whose packets failures lost, or left without a route, says so on its own lines.
    let mut loads = reports.iter().zip(windows);
    if let Some((r, w)) = loads.clone().find(|(_, w)| w.packets < 100.0) {
        println!(
            "# at load {} the window holds {:.1} packets on average: too few for its throughput to mean \
             much (a longer --measure)",
            load_text(r.load),
            w.packets
        );
    }
    if let Some(r) = reports.first().filter(|r| r.warmup < r.default_warmup) {
        println!(
            "# the warm-up, {} us, is shorter than this fabric's default, {} us: the window may open before \
             the first packets have arrived and the queues filled, and read a load as saturated that is not",
            r.warmup.as_ps() as f64 / 1e6,
            r.default_warmup.as_ps() as f64 / 1e6
        );
    }
    if let Some((r, _)) = loads.find(|(_, w)| w.saturated) {
        println!(
            "# saturated from load {}: the fabric accepts {:.1} GB/s per GPU of the {:.1} offered",
            load_text(r.load),
            r.measured.accepted_gbps,
            r.measured.offered_gbps
        );
    }
    println!(
        "# {} packets simulated in {:.2} s of wall time: {:.2} M packets/s on one core; {}",
        s["packets"],
        s["wall_seconds"].as_f64().unwrap_or_default(),
        s["packets_per_s"].as_f64().unwrap_or_default() / 1e6,
        if s["verified"] == true {
            "every packet delivered once, with its data"
        } else if reports.iter().all(|r| r.measured.problem.is_none()) {
            let lost = reports
                .iter()
                .any(|r| r.measured.lost + r.measured.unroutable > 0);
            let undrained = reports.iter().any(|r| r.measured.undelivered > 0);
            match (lost, undrained) {
                (true, false) => {
                    "every packet delivered once, with its data, but failures LOST some or left some without \
                     a route"
                }
                (false, true) => {
                    "every packet delivered once, with its data, but some were still UNDELIVERED when the \
                     run ended"
                }
                _ => {
                    "every packet delivered once, with its data, but failures LOST some or left some without \
                     a route, and some were still UNDELIVERED when the run ended"
                }
            }
        } else {
            "SOME PACKETS WRONG"
        }
    );
}

/// The mark at the end of a load's row when not everything checked out: `WRONG` if something arrived
/// wrong (or the run stopped), `LOST` if failures lost packets or left some without a route, and
/// `UNDRAINED` if all that could arrive did, right, but some were still on their way at the end.
fn verdict_mark(m: &Measured) -> &'static str {
    if m.verified {
        ""
    } else if m.problem.is_some() {
        "  WRONG"
    } else if m.lost + m.unroutable > 0 {
        "  LOST"
    } else {
        "  UNDRAINED"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(undelivered: u64, lost: u64, problem: Option<&str>) -> Measured {
        Measured {
            offered_gbps: 1.0,
            accepted_gbps: 1.0,
            latency: Default::default(),
            generated: 100,
            delivered: 100 - undelivered - lost,
            lost,
            unroutable: 0,
            source_full: 0,
            undelivered,
            drained_for: Duration::from_us(1010),
            verified: undelivered + lost == 0 && problem.is_none(),
            problem: problem.map(str::to_owned),
        }
    }

    #[test]
    fn packets_still_on_their_way_are_marked_undrained_not_wrong() {
        let m = measured(7, 0, None);
        assert_eq!(verdict_mark(&m), "  UNDRAINED");
        assert_eq!(
            m.undrained().as_deref(),
            Some("7 of 100 packets still undelivered 1010 us after generation stopped")
        );
        assert_eq!(verdict_mark(&measured(7, 3, None)), "  LOST");
        assert_eq!(verdict_mark(&measured(0, 0, Some("repeated"))), "  WRONG");
        assert_eq!(verdict_mark(&measured(0, 0, None)), "");
        assert_eq!(measured(0, 0, None).undrained(), None);
    }
}
