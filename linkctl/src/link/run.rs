//! `linkctl link run`: traffic across a trained link, every packet checked by the receiver.

use std::process::ExitCode;
use std::time::Instant as WallClock;

use anyhow::{bail, Context};
use link_dl::sim::{self, ChannelFault, FlitFaults, Report, Traffic};
use link_dl::{DlConfig, Vc};
use link_phy::channel::{FaultKind, LaneHealth};
use link_phy::ltssm::LtssmState;
use link_phy::pair::{LinkPair, Side};
use link_phy::rate::{LineCode, Rate};
use link_phy::time::Duration;
use serde_json::{json, Value};

use super::capture::{capturing, CaptureArgs};
use super::train::{parse_rate, ChannelArgs};
use crate::check::ensure_within;

/// Exit status when the traffic did not all arrive intact: distinct from usage errors.
pub const EXIT_UNDELIVERED: u8 = 3;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub channel: ChannelArgs,
    /// Line code to run in: `8b10b` (caps the rate at 5 GT/s) or `128b130b` (8 GT/s or more); by
    /// default, the one `--max-rate` runs in
    #[arg(long)]
    pub code: Option<String>,
    /// Packets to send
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: u64,
    /// Payload bytes per packet, 0 to 128 (carried in whole 16-byte flits)
    #[arg(long, default_value_t = 128)]
    pub payload: usize,
    /// Turn on forward error correction
    #[arg(long)]
    pub fec: bool,
    /// Replay buffer, in packets: 8, 16, 32, 64, 128 or 256
    #[arg(long, default_value_t = 64)]
    pub replay: usize,
    /// Receive buffer per virtual channel, in 16-byte flits: 64, 256, 1024 or 4096. Each end advertises it
    /// in InitFc1/InitFc2 as the credit its partner may use on that channel, so a link whose credits
    /// return later than the buffer takes to fill (long lanes, skew) runs below its line rate unless it
    /// is larger: the report says how long the wire went without a packet for want of credit
    /// (`idle_for_credit_us`), or of acknowledgements with the replay buffer full (`idle_for_replay_us`)
    #[arg(long = "rx-flits", value_name = "FLITS", default_value_t = 64)]
    pub rx_flits: usize,
    /// Virtual channels to send on, round robin: comma-separated from posted, request, response, snoop. A
    /// channel named more than once gets as many turns of the round robin: posted,posted,request sends
    /// two posted packets to each request
    #[arg(long, default_value = "posted")]
    pub vcs: String,
    /// Traffic in both directions (B to A as well as A to B)
    #[arg(long)]
    pub both_ways: bool,
    /// Ask port A to retrain at these simulated times after the link is up, in microseconds (repeatable)
    #[arg(long = "retrain-at", value_name = "US", value_parser = crate::check::float)]
    pub retrain_at: Vec<f64>,
    /// A burst of bit errors on the channel from A to B, as `LANE:BITS@US`: BITS bits (1 to 1000000) of
    /// lane LANE (numbered at port A) from US microseconds after the link is up, each flipped with
    /// probability 1/2, the first always; `b:LANE:BITS@US` on the channel from B to A (repeatable)
    #[arg(long = "burst", value_name = "[b:]LANE:BITS@US")]
    pub bursts: Vec<String>,
    /// A lane breaking during the run, as `LANE@US`: lane LANE (numbered at port A) goes dead, both
    /// directions, US microseconds after the link is up, and the link retrains without it (repeatable)
    #[arg(long = "lane-dies", value_name = "LANE@US")]
    pub lane_dies: Vec<String>,
    /// Pause the traffic at these simulated times after the link is up, in microseconds (repeatable),
    /// while port A's data link takes the link to low power (L1) by the power-management handshake; the
    /// first packet after the pause wakes it
    #[arg(long = "sleep-at", value_name = "US", value_parser = crate::check::float)]
    pub sleep_at: Vec<f64>,
    /// How long each pause of `--sleep-at` lasts, in microseconds
    #[arg(long = "sleep-for", value_name = "US", default_value_t = 10.0, value_parser = crate::check::float)]
    pub sleep_for: f64,
    /// Probability per received unit that the flit injector drops it, at most 0.1
    #[arg(long, default_value_t = 0.0, value_parser = crate::check::float)]
    pub drop: f64,
    /// Probability per received unit that it arrives twice, at most 0.1
    #[arg(long, default_value_t = 0.0, value_parser = crate::check::float)]
    pub duplicate: f64,
    /// Probability per received unit that one of its bits is flipped past the physical layer, at most 0.1
    #[arg(long, default_value_t = 0.0, value_parser = crate::check::float)]
    pub corrupt: f64,
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// The data link's packets and control flits as each port sends them (before the physical layer and
    /// the channel), as a trace for Wireshark (docs/spec.md 7.2)
    #[command(flatten)]
    pub trace: crate::trace::PcapArgs,
    /// Trace the units as each port's data link receives them instead (after the channel's bit errors
    /// and the injected flit faults, before the data link checks them): corrupted ones show with a bad CRC
    #[arg(long, requires = "pcap")]
    pub pcap_received: bool,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

fn parse_vcs(list: &str) -> anyhow::Result<Vec<Vc>> {
    list.split(',')
        .map(|name| {
            Ok(match name.trim() {
                "posted" => Vc::Posted,
                "request" => Vc::Request,
                "response" => Vc::Response,
                "snoop" => Vc::Snoop,
                other => {
                    bail!("unknown virtual channel {other:?}: expected posted, request, response or snoop")
                }
            })
        })
        .collect()
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.payload > 128 {
        bail!("--payload must be 0 to 128 bytes, not {}", args.payload);
    }
    if args.packets == 0 {
        bail!("--packets must be at least 1");
    }
    // Each unit lost sends the data link back over its whole window, which is hit again in turn: the
    // time a run takes grows exponentially with the rate (1,000 packets: 0.45 s of wall time at 0.1,
    // 10 s at 0.3, hours near 1).
    for (flag, rate) in [
        ("--drop", args.drop),
        ("--duplicate", args.duplicate),
        ("--corrupt", args.corrupt),
    ] {
        ensure_within(flag, rate, MAX_UNIT_FAULT_RATE)?;
    }
    let mut channel = args.channel.clone();
    let max_rate = parse_rate(&channel.max_rate)?;
    let default_code = if max_rate < Rate::Gen3 {
        "8b10b"
    } else {
        "128b130b"
    };
    let code = match args.code.as_deref().unwrap_or(default_code) {
        "8b10b" => {
            if max_rate > Rate::Gen2 {
                channel.max_rate = "5".into();
            }
            LineCode::Code8b10b
        }
        "128b130b" => {
            if max_rate < Rate::Gen3 {
                bail!(
                    "128b/130b runs at 8 GT/s or more: --max-rate {} is too low",
                    channel.max_rate
                );
            }
            LineCode::Code128b130b
        }
        other => bail!("--code must be 8b10b or 128b130b, not {other:?}"),
    };
    let ([down, up], [ab, ba]) = channel.configs()?;
    let faults = FlitFaults {
        drop: args.drop,
        duplicate: args.duplicate,
        corrupt: args.corrupt,
    };
    let dl = DlConfig {
        fec: args.fec,
        ..DlConfig::default()
    };
    let times = |flag, list: &[f64]| -> anyhow::Result<Vec<Duration>> {
        list.iter().map(|&us| micros(flag, us)).collect()
    };
    let channel_faults = channel_faults(&args)?;
    let retrain_at = times("--retrain-at", &args.retrain_at)?;
    let sleep_at = times("--sleep-at", &args.sleep_at)?;
    let sleep_for = micros("--sleep-for", args.sleep_for)?;
    // Room for every packet at x1 and 2.5 GT/s many times over, plus training, plus the pauses.
    let limit = Duration::from_ms(200)
        + Duration::from_ps(args.packets.saturating_mul(50_000_000))
        + sleep_for.saturating_mul(sleep_at.len() as u64);
    let traffic = Traffic {
        packets: args.packets,
        payload: args.payload,
        vcs: parse_vcs(&args.vcs)?,
        both_ways: args.both_ways,
        seed: channel.seed,
        retrain_at,
        sleep_at,
        sleep_for,
        channel_faults,
        limit,
    };
    let capture = args.capture.prepare()?;
    // Both ports' taps write into one trace; the first error writing it is kept for after the run
    // (`LinkTrace::finish`).
    let trace = (args.trace.open(fabric_sim::trace::TlLayout::Raw)?)
        .map(|t| std::rc::Rc::new(std::cell::RefCell::new(t)));
    let started = WallClock::now();
    // Each size is its own build of the link (the buffers are const generics, as on the board), so the
    // choices are few: every replay size with every receive size. The nodes are always wrapped for a
    // capture, which costs a branch a slot when there is none, so as not to build each twice.
    macro_rules! go {
        ($replay:literal, $rx:literal) => {{
            let mut pair = sim::pair_with::<$replay, $rx, _>(
                [down, up],
                dl,
                [ab, ba],
                faults,
                channel.seed,
                |mut endpoint, side| {
                    if let Some(trace) = &trace {
                        // A unit port B receives was sent by port A: the trace names its sender.
                        let sender = match (args.pcap_received, side) {
                            (false, side) => side,
                            (true, link_phy::pair::Side::A) => link_phy::pair::Side::B,
                            (true, link_phy::pair::Side::B) => link_phy::pair::Side::A,
                        };
                        let tap = unit_tap(trace.clone(), sender);
                        if args.pcap_received {
                            endpoint.set_received_tap(tap);
                        } else {
                            endpoint.set_unit_tap(tap);
                        }
                    }
                    capturing(endpoint, side, capture)
                },
            )
            .context("cannot build the ports")?;
            let report = sim::run(&mut pair, &traffic);
            let written = match capture {
                Some((dir, _)) => {
                    let LinkPair { a, b, .. } = &mut pair;
                    Some(super::capture::write_index(dir, [a, b], args.fec)?)
                }
                None => None,
            };
            (report, written)
        }};
        ($replay:literal) => {
            match args.rx_flits {
                64 => go!($replay, 64),
                256 => go!($replay, 256),
                1024 => go!($replay, 1024),
                4096 => go!($replay, 4096),
                other => bail!("--rx-flits must be 64, 256, 1024 or 4096 flits, not {other}"),
            }
        };
    }
    let (report, written) = match args.replay {
        8 => go!(8),
        16 => go!(16),
        32 => go!(32),
        64 => go!(64),
        128 => go!(128),
        256 => go!(256),
        other => bail!("--replay must be 8, 16, 32, 64, 128 or 256 packets, not {other}"),
    };
    let wall = started.elapsed().as_secs_f64();
    let mut value = to_json(&report, &args, wall, code, limit);
    if let Some(written) = written {
        value["capture"] = written;
    }
    let mut traced = None;
    if let Some(trace) = trace {
        let trace = std::rc::Rc::try_unwrap(trace)
            .map_err(|_| anyhow::anyhow!("the trace is still held by a port"))?
            .into_inner();
        let summary = trace.finish()?;
        value["trace"] = crate::trace::summary_json(&summary);
        traced = Some(summary);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print_text(&report, &value);
        if let Some(t) = &traced {
            println!("trace: {}", crate::trace::summary_text(t));
        }
    }
    let intact =
        report.complete && report.duplicates == 0 && report.corrupted == 0 && report.out_of_order == 0;
    Ok(if intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_UNDELIVERED)
    })
}

/// The longest burst `--burst` takes, in bits.
const MAX_BURST_BITS: u32 = 1_000_000;

/// `--burst` and `--lane-dies` as faults of the channels.
fn channel_faults(args: &RunArgs) -> anyhow::Result<Vec<ChannelFault>> {
    let lanes = args.channel.lanes;
    // `LANE...@US` of `flag`: what comes before the `@`, and the time.
    let split = |flag: &str, spec: &str, form: &str| -> anyhow::Result<(String, Duration)> {
        let Some((what, us)) = spec.split_once('@') else {
            bail!("{flag} {spec:?}: expected {form}");
        };
        let us: f64 = us.trim().parse().map_err(|_| {
            anyhow::anyhow!("{flag} {spec:?}: the time after `@` must be a number of microseconds")
        })?;
        Ok((what.trim().to_owned(), micros(flag, us)?))
    };
    let lane = |flag: &str, spec: &str, text: &str| -> anyhow::Result<usize> {
        match text.parse::<usize>() {
            Ok(l) if l < lanes => Ok(l),
            Ok(l) => bail!(
                "{flag} {spec:?}: lane {l}, but the ports have lanes 0 to {}",
                lanes - 1
            ),
            Err(_) => bail!("{flag} {spec:?}: {text:?} is not a lane number"),
        }
    };
    let mut faults = Vec::new();
    for spec in &args.bursts {
        let form = "[b:]LANE:BITS@US, e.g. 1:33@5.5 or b:1:33@5.5";
        let (what, after) = split("--burst", spec, form)?;
        // `b:` first: the channel from B to A, its lane named at A as every lane option's is.
        let (from, what) = match what.strip_prefix("b:") {
            Some(rest) => (Side::B, rest),
            None => (Side::A, what.as_str()),
        };
        let Some((l, bits)) = what.split_once(':') else {
            bail!("--burst {spec:?}: expected {form}");
        };
        let lane = lane("--burst", spec, l.trim())?;
        let bits = match bits.trim().parse::<u32>() {
            Ok(b @ 1..=MAX_BURST_BITS) => b,
            _ => bail!("--burst {spec:?}: the bits must be a whole number from 1 to {MAX_BURST_BITS}"),
        };
        faults.push(ChannelFault {
            from,
            after,
            kind: FaultKind::Burst {
                lane: args.channel.lane_at_transmitter(lane, from),
                bits,
            },
        });
    }
    let mut dying = Vec::new();
    for spec in &args.lane_dies {
        let (what, after) = split("--lane-dies", spec, "LANE@US, e.g. 3@20")?;
        let lane = lane("--lane-dies", spec, &what)?;
        if args.channel.dead_lanes.contains(&lane) {
            bail!("--lane-dies {spec:?}: lane {lane} is a --dead-lane already");
        }
        // A second death would change nothing: as with --dead-lane, refused rather than taken silently.
        if dying.contains(&lane) {
            bail!("--lane-dies: lane {lane} is given twice");
        }
        dying.push(lane);
        for from in [Side::A, Side::B] {
            faults.push(ChannelFault {
                from,
                after,
                kind: FaultKind::SetHealth {
                    lane: args.channel.lane_at_transmitter(lane, from),
                    health: LaneHealth::Dead,
                },
            });
        }
    }
    Ok(faults)
}

/// The most `--drop`, `--duplicate` and `--corrupt` may be.
const MAX_UNIT_FAULT_RATE: f64 = 0.1;

/// The latest time an option of microseconds takes: 1,000 s of simulated time, past any run's limit.
const MAX_MICROS: f64 = 1e9;

/// `us` microseconds given to `flag`, refused unless from 0 to [`MAX_MICROS`].
fn micros(flag: &str, us: f64) -> anyhow::Result<Duration> {
    if !(0.0..=MAX_MICROS).contains(&us) {
        bail!("{flag} must be a time in microseconds from 0 to {MAX_MICROS}, not {us}");
    }
    Ok(Duration::from_ps((us * 1e6) as u64))
}

fn to_json(r: &Report, args: &RunArgs, wall_seconds: f64, code: LineCode, limit: Duration) -> Value {
    let sum = |f: fn(&link_dl::DlCounters) -> u64| f(&r.dl[0]) + f(&r.dl[1]);
    let state = super::train::reported_state(r.phy_states);
    let limit_reached = if r.active {
        r.limit_reached
    } else {
        super::train::stopped_at_limit(r.active, state, r.time_to_active >= limit)
    };
    let mut v = json!({
        "up": r.active,
        "state": state,
        "limit_reached": limit_reached,
        "packets_sent": r.packets_sent,
        "packets_delivered": r.packets_delivered,
        "bytes_verified": r.bytes_verified,
        "duplicates": r.duplicates,
        "corrupted": r.corrupted,
        "out_of_order": r.out_of_order,
        "complete": r.complete,
        "replays": sum(|c| c.replays),
        "naks": sum(|c| c.naks_sent),
        "replay_timeouts": sum(|c| c.replay_timeouts),
        "crc_errors": sum(|c| c.crc_errors),
        "retrains": r.retrains,
        "fec": args.fec,
        "fec_corrections": sum(|c| c.fec_corrections),
        "bits_flipped": r.bits_flipped,
        "flits_dropped": r.flit_faults[0],
        "flits_duplicated": r.flit_faults[1],
        "flits_corrupted": r.flit_faults[2],
        "lanes": r.active.then_some(r.width),
        "rate_gts": r.active.then_some(r.rate_gts),
        "code": r.active.then_some(r.code),
        "code_requested": code.name(),
        "payload": args.payload,
        "replay_buffer": args.replay,
        "time_to_active_us": r.active.then(|| r.time_to_active.as_ps() as f64 / 1e6),
        "down_at_us": r.down_at.map(|t| t.as_ps() as f64 / 1e6),
        "retrains_not_done": r.active.then_some(r.retrains_not_done),
        "sleeps": r.sleeps.iter().map(|s| json!({
            "asked_at_us": s.asked_at.as_ps() as f64 / 1e6,
            "entry_ns": s.entry.as_ps() as f64 / 1e3,
            "in_l1_ns": s.in_l1.as_ps() as f64 / 1e3,
            "exit_ns": s.exit.as_ps() as f64 / 1e3,
        })).collect::<Vec<_>>(),
        "sleeps_not_done": r.active.then_some(r.sleeps_not_done),
        "low_power_entries": sum(|c| c.low_power_entries),
        "elapsed_us": r.elapsed.as_ps() as f64 / 1e6,
        "goodput_gbps": r.goodput_gbps,
        "efficiency": r.efficiency,
        "raw_efficiency": r.raw_efficiency,
        "wall_seconds": wall_seconds,
        "counters": [super::dl_counters_json(&r.dl[0]), super::dl_counters_json(&r.dl[1])],
    });
    // Set apart: more keys in one `json!` overflow its recursion limit (the output's keys are sorted).
    v["rx_buffer_flits"] = json!(args.rx_flits);
    v["both_ways"] = json!(args.both_ways);
    v["idle_for_credit_us"] = json!(r.idle_for_credit.as_ps() as f64 / 1e6);
    v["idle_for_replay_us"] = json!(r.idle_for_replay.as_ps() as f64 / 1e6);
    let (bursts_not_done, deaths_not_done) = channel_faults_not_done(r, args);
    v["bursts"] = json!(r.bursts);
    v["bursts_not_done"] = json!(r.active.then_some(bursts_not_done));
    v["lanes_died"] = json!(args.lane_dies.len() - deaths_not_done);
    v["lane_deaths_not_done"] = json!(r.active.then_some(deaths_not_done));
    v
}

/// The `--burst` and `--lane-dies` faults that did not strike (the run ended first): the report has one
/// entry a burst, then two a lane death (one a direction, struck together but for the lanes' skew).
fn channel_faults_not_done(r: &Report, args: &RunArgs) -> (usize, usize) {
    let (bursts, deaths) = r
        .channel_faults_struck
        .split_at(args.bursts.len().min(r.channel_faults_struck.len()));
    let bursts_not_done = bursts.iter().filter(|&&struck| !struck).count();
    let deaths_not_done = deaths.chunks(2).filter(|both| !both.iter().any(|&s| s)).count();
    (bursts_not_done, deaths_not_done)
}

fn print_text(r: &Report, v: &Value) {
    print_report(r, v);
    super::capture::print_summary(&v["capture"]);
}

/// A tap into the shared trace of the direction `sender` sends on: each unit, at its slot's start, port A as
/// node 0.
fn unit_tap(
    trace: std::rc::Rc<std::cell::RefCell<crate::trace::LinkTrace>>,
    sender: link_phy::pair::Side,
) -> link_dl::sim::UnitTap {
    let node = u16::from(sender == link_phy::pair::Side::B);
    link_dl::sim::UnitTap::new(move |at, unit, framing_restarted| {
        let mut trace = trace.borrow_mut();
        if framing_restarted {
            trace.restart_framing(node);
        }
        if let Ok(unit) = <&[u8; 16]>::try_from(unit) {
            trace.unit(node, at, unit);
        }
    })
}

fn print_report(r: &Report, v: &Value) {
    if !r.active {
        print_down(r, v);
        return;
    }
    // A link that went down for good is told apart from one that ran out of time.
    let went_down = match r.down_at {
        Some(t) => format!(
            "; DOWN from {:.1} us to the end ({})",
            t.as_ps() as f64 / 1e6,
            v["state"].as_str().unwrap_or("?")
        ),
        None => String::new(),
    };
    println!(
        "link: x{} at {} GT/s, {} (requested {}), up after {:.1} us{went_down}",
        r.width,
        r.rate_gts,
        r.code,
        v["code_requested"].as_str().unwrap_or(""),
        v["time_to_active_us"].as_f64().unwrap_or(0.0)
    );
    println!(
        "packets: {} sent, {} delivered, {} bytes verified; duplicates {}, corrupted {}, out of order {}{}",
        r.packets_sent,
        r.packets_delivered,
        r.bytes_verified,
        r.duplicates,
        r.corrupted,
        r.out_of_order,
        match (r.complete, r.down_at, r.limit_reached) {
            (true, ..) => "",
            (false, Some(_), _) => " (NOT all delivered: the link went down)",
            (false, None, true) => " (NOT all delivered before the time limit)",
            (false, None, false) => " (NOT all delivered)",
        }
    );
    print_errors(r, v);
    if r.retrains_not_done > 0 {
        println!(
            "note: {} of the --retrain-at times came after the run had ended ({:.1} us after the link came up): not done",
            r.retrains_not_done,
            r.elapsed.as_ps() as f64 / 1e6
        );
    }
    let count = |key: &str| v[key].as_u64().unwrap_or(0);
    let (died, bursts_not_done, deaths_not_done) = (
        count("lanes_died"),
        count("bursts_not_done"),
        count("lane_deaths_not_done"),
    );
    if died > 0 {
        println!(
            "lanes died: {died} (--lane-dies), the link retraining on the lanes left: x{} at the end",
            r.width
        );
    }
    if bursts_not_done + deaths_not_done > 0 {
        println!(
            "note: {bursts_not_done} of the --burst and {deaths_not_done} of the --lane-dies times came after the run had ended ({:.1} us after the link came up): not done",
            r.elapsed.as_ps() as f64 / 1e6
        );
    }
    print_sleeps(r);
    print_idle(r, v);
    println!(
        "goodput: {:.3} GB/s of simulated link time, {:.1}% of the line rate after encoding ({:.1}% of the raw rate); {:.2} s of wall time",
        r.goodput_gbps,
        r.efficiency * 100.0,
        r.raw_efficiency * 100.0,
        v["wall_seconds"].as_f64().unwrap_or(0.0)
    );
}

/// The time the wire went without packets because the senders were held back, when it did, as a share
/// of the time they ran.
fn print_idle(r: &Report, v: &Value) {
    if r.idle_for_credit.as_ps() == 0 && r.idle_for_replay.as_ps() == 0 {
        return;
    }
    let senders = if v["both_ways"].as_bool().unwrap_or(false) {
        2.0
    } else {
        1.0
    };
    let share = |d: link_phy::time::Duration| {
        let ran = r.elapsed.as_ps() as f64 * senders;
        if ran > 0.0 {
            100.0 * d.as_ps() as f64 / ran
        } else {
            0.0
        }
    };
    println!(
        "no packet on the wire: {:.1}% of the time waiting for credit (the receiver's buffer, --rx-flits {}), {:.1}% for acknowledgements (a full replay buffer, --replay {})",
        share(r.idle_for_credit),
        v["rx_buffer_flits"],
        share(r.idle_for_replay),
        v["replay_buffer"]
    );
}

/// The median of `sorted` (not empty): of an even count, the mean of the two middle values.
fn median_of_sorted(sorted: &[f64]) -> f64 {
    let half = sorted.len() / 2;
    if sorted.len() % 2 == 0 {
        (sorted[half - 1] + sorted[half]) / 2.0
    } else {
        sorted[half]
    }
}

/// The `--sleep-at` pauses: how long the handshake took the link to L1 and the wake to bring it back,
/// the median and the longest of each.
fn print_sleeps(r: &Report) {
    if !r.sleeps.is_empty() {
        let stat = |f: fn(&sim::Sleep) -> Duration| {
            let mut ns: Vec<f64> = r.sleeps.iter().map(|s| f(s).as_ps() as f64 / 1e3).collect();
            ns.sort_by(f64::total_cmp);
            format!(
                "median {:.1} ns, longest {:.1} ns",
                median_of_sorted(&ns),
                ns[ns.len() - 1]
            )
        };
        println!(
            "low power: {} sleeps to L1 and back; into L1 (the handshake) {}; out of it (the wake) {}",
            r.sleeps.len(),
            stat(|s| s.entry),
            stat(|s| s.exit)
        );
    }
    if r.sleeps_not_done > 0 {
        println!(
            "note: {} of the --sleep-at pauses were not done or not finished (the run had ended first, {:.1} us after the link came up)",
            r.sleeps_not_done,
            r.elapsed.as_ps() as f64 / 1e6
        );
    }
}

/// A link that never came up: where training stopped and why, in `link train`'s words. Nothing was sent.
fn print_down(r: &Report, v: &Value) {
    let state = v["state"].as_str().unwrap_or("?");
    let stopped_us = r.time_to_active.as_ps() as f64 / 1e6;
    let why = if v["limit_reached"] == true {
        // Both physical ports in L0 but the data links not yet active.
        let stage = if state == LtssmState::L0.name() {
            "the data links still initialising over L0".to_owned()
        } else {
            format!("still training ({state})")
        };
        format!("{stage} when the time limit ran out at {stopped_us:.1} us")
    } else {
        format!("training ended in {state} at {stopped_us:.1} us")
    };
    println!("link DOWN: {why}; no packets sent");
    print_errors(r, v);
}

fn print_errors(r: &Report, v: &Value) {
    println!(
        "errors: {} bits flipped{}, {} CRC errors, {} NAKs, {} replays, {} replay timeouts, {} FEC corrections; {} entries to Recovery (both ports, counting the speed change at bring-up{})",
        r.bits_flipped,
        match r.bursts {
            0 => String::new(),
            1 => " (1 burst)".into(),
            n => format!(" ({n} bursts)"),
        },
        v["crc_errors"],
        v["naks"],
        v["replays"],
        v["replay_timeouts"],
        v["fec_corrections"],
        r.retrains,
        // A wake from L1 passes through Recovery too, but is not a retrain: the low-power line counts it.
        if r.sleeps.is_empty() { "" } else { ", not the wakes from L1" }
    );
}

#[cfg(test)]
mod tests {
    use super::median_of_sorted;

    /// Of two sleeps the median is their mean (it had been the longer, printed as both median and longest).
    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median_of_sorted(&[1.0, 3.0]), 2.0);
        assert_eq!(median_of_sorted(&[1.0, 2.0, 10.0]), 2.0);
        assert_eq!(median_of_sorted(&[5.0]), 5.0);
    }
}
