//! `linkctl link train`: two ports train over the channel model; report what happened.

use std::process::ExitCode;

use anyhow::{bail, Context};
use link_phy::channel::{ChannelConfig, LaneHealth};
use link_phy::lanes::{LaneMap, LinkWidth};
use link_phy::ltssm::Port;
use link_phy::ltssm::{LtssmState, PhyCounters, PortConfig, Role, Timing};
use link_phy::pair::{LinkPair, Node, Side, Transition};
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};
use serde_json::{json, Value};

use super::capture::{capturing, CaptureArgs};
use crate::check::ensure_below;

/// Exit status when the link did not come up: distinct from usage errors.
pub const EXIT_NO_LINK: u8 = 3;

#[derive(clap::Args, Debug, Clone)]
pub struct ChannelArgs {
    /// Physical lanes on each port: 1, 2, 4, 8 or 16
    #[arg(long, default_value_t = 8)]
    pub lanes: usize,
    /// Largest lane-to-lane skew, in symbol times at 2.5 GT/s (4 ns each), 0 to 1000; lanes get seeded
    /// skews up to it. Skew is a time: a receiver absorbs 64 at 2.5 GT/s and 8 GT/s, 32 at 5, 62 at 16 and
    /// 31 at 32 GT/s. More at 2.5 GT/s, where training starts: the port leaves the lanes it cannot line up
    /// out, and the link comes up narrower at the next attempt; more at a higher rate fails that speed
    /// change (the link comes up slower). A lane whose answer in Configuration lags the first by over 2 us
    /// (500, both directions' skew counted) is left out too, unless the lanes that answered form no link
    #[arg(long, default_value_t = 0.0, value_parser = crate::check::float)]
    pub skew: f64,
    /// Random bit error rate on every lane, e.g. 1e-6: at least 0 and below 1
    #[arg(long, default_value_t = 0.0, value_parser = crate::check::float)]
    pub ber: f64,
    /// A lane with a broken wire (no receiver detected), numbered at port A (the downstream port), both
    /// directions of it; may be repeated
    #[arg(long = "dead-lane", value_name = "LANE")]
    pub dead_lanes: Vec<usize>,
    /// A lane stuck at a constant level (detected, but carries nothing), numbered at port A, both
    /// directions; may be repeated
    #[arg(long = "stuck-lane", value_name = "LANE")]
    pub stuck_lanes: Vec<usize>,
    /// A lane whose differential pairs are swapped (polarity inverted), numbered at port A, both
    /// directions; may be repeated
    #[arg(long = "invert-lane", value_name = "LANE")]
    pub inverted_lanes: Vec<usize>,
    /// Wire the lanes reversed (lane 0 of one port to the last lane of the other)
    #[arg(long)]
    pub reversed: bool,
    /// Highest rate both ports support, in GT/s: 2.5, 5, 8, 16 or 32
    #[arg(long, default_value = "8")]
    pub max_rate: String,
    /// Seed of every random choice (skews, bit errors)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Training timeouts: `pcie` (the specification's) or `fast` (divided by 100)
    #[arg(long, default_value = "pcie")]
    pub timing: String,
}

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub channel: ChannelArgs,
    /// Give up after this much simulated time, in milliseconds
    #[arg(long, default_value_t = 500.0, value_parser = crate::check::float)]
    pub limit_ms: f64,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub capture: CaptureArgs,
}

pub fn parse_rate(s: &str) -> anyhow::Result<Rate> {
    Ok(match s.trim().trim_end_matches("GT/s").trim() {
        "2.5" | "gen1" => Rate::Gen1,
        "5" | "5.0" | "gen2" => Rate::Gen2,
        "8" | "8.0" | "gen3" => Rate::Gen3,
        "16" | "16.0" | "gen4" => Rate::Gen4,
        "32" | "32.0" | "gen5" => Rate::Gen5,
        other => bail!("unknown rate {other:?}: expected 2.5, 5, 8, 16 or 32 (GT/s)"),
    })
}

impl ChannelArgs {
    /// The pair of ports and channels these arguments describe.
    pub fn build(&self) -> anyhow::Result<LinkPair> {
        self.build_with(|port, _| port)
    }

    /// [`ChannelArgs::build`], each port made a node by `node`, which is given its side.
    pub fn build_with<N: Node>(&self, mut node: impl FnMut(Port, Side) -> N) -> anyhow::Result<LinkPair<N>> {
        let ([down, up], [ab, ba]) = self.configs()?;
        let port = |config| Port::new(config, Instant::ZERO).context("cannot build the ports");
        let (a, b) = (node(port(down)?, Side::A), node(port(up)?, Side::B));
        Ok(LinkPair::with_nodes(a, b, ab, ba))
    }

    /// Lane `lane`, numbered at port A, as the transmitter at `from` numbers it on its channel. A
    /// channel's lanes are its transmitter's: A's for the channel from A, B's for the other, where A's lane
    /// l arrives on B's lane lanes - 1 - l when the wiring is reversed. A lane named at A is one pair of
    /// wires, so the channel from B has it at B's number for it.
    pub fn lane_at_transmitter(&self, lane: usize, from: Side) -> usize {
        if from == Side::B && self.reversed {
            self.lanes - 1 - lane
        } else {
            lane
        }
    }

    /// The two ports' configurations (downstream, upstream) and the two directions' channels (A to B,
    /// B to A) these arguments describe.
    pub fn configs(&self) -> anyhow::Result<([PortConfig; 2], [ChannelConfig; 2])> {
        LinkWidth::from_lanes(self.lanes)
            .map_err(|_| anyhow::anyhow!("--lanes must be 1, 2, 4, 8 or 16, not {}", self.lanes))?;
        // A rate of 1 flips every bit: a channel with every lane inverted, which trains (the receivers
        // invert polarity) and reports a link up at "BER 1". --invert-lane models that.
        ensure_below("--ber", self.ber, 1.0)?;
        if !(0.0..=1000.0).contains(&self.skew) {
            bail!(
                "--skew must be between 0 and 1000 symbol times, not {:?}",
                self.skew
            );
        }
        for (flag, lanes) in [
            ("--dead-lane", &self.dead_lanes),
            ("--stuck-lane", &self.stuck_lanes),
            ("--invert-lane", &self.inverted_lanes),
        ] {
            if let Some(bad) = lanes.iter().find(|&&l| l >= self.lanes) {
                bail!("{flag} {bad}: the ports have lanes 0 to {}", self.lanes - 1);
            }
            // A second mention would be taken silently and change nothing.
            if let Some(l) = lanes
                .iter()
                .enumerate()
                .find_map(|(i, l)| lanes[..i].contains(l).then_some(l))
            {
                bail!("{flag} {l} is given twice");
            }
        }
        // A lane is broken one way: the later option had silently overridden the other.
        if let Some(l) = self.dead_lanes.iter().find(|l| self.stuck_lanes.contains(l)) {
            bail!("lane {l} is given as both --dead-lane and --stuck-lane: it is one or the other");
        }
        // Nor is a lane that carries nothing inverted: the option would be taken and change nothing.
        for (flag, lanes, what) in [
            ("--dead-lane", &self.dead_lanes, "a dead lane"),
            ("--stuck-lane", &self.stuck_lanes, "a stuck lane"),
        ] {
            if let Some(l) = lanes.iter().find(|l| self.inverted_lanes.contains(l)) {
                bail!("lane {l} is given as both {flag} and --invert-lane: {what} carries nothing to invert");
            }
        }
        let timing = match self.timing.as_str() {
            "pcie" => Timing::pcie(),
            "fast" => Timing::fast(),
            other => bail!("--timing must be `pcie` or `fast`, not {other:?}"),
        };
        let max_rate = parse_rate(&self.max_rate)?;
        let mut health = vec![LaneHealth::Good; self.lanes];
        for &l in &self.stuck_lanes {
            health[l] = LaneHealth::Stuck(false);
        }
        for &l in &self.dead_lanes {
            health[l] = LaneHealth::Dead;
        }
        let max_skew = Duration::from_ps((self.skew * Rate::Gen1.slot_time().as_ps() as f64).round() as u64);
        // Each direction's channel draws from its own seed.
        let channel = |from: Side| {
            let salt = u64::from(from == Side::B);
            let seed = self.seed.wrapping_mul(2).wrapping_add(salt);
            let mut c = ChannelConfig::clean(self.lanes);
            c.skew = ChannelConfig::random_skew(self.lanes, max_skew, seed);
            c.ber = self.ber;
            c.health = vec![LaneHealth::Good; self.lanes];
            for (l, &h) in health.iter().enumerate() {
                c.health[self.lane_at_transmitter(l, from)] = h;
            }
            c.inverted = self
                .inverted_lanes
                .iter()
                .map(|&l| self.lane_at_transmitter(l, from))
                .collect();
            c.reversed = self.reversed;
            c.seed = seed;
            c
        };
        let port = |role| {
            let mut p = PortConfig::new(self.lanes, role);
            p.max_rate = max_rate;
            p.timing = timing;
            p
        };
        Ok((
            [port(Role::Downstream), port(Role::Upstream)],
            [channel(Side::A), channel(Side::B)],
        ))
    }
}

fn us(t: Instant) -> f64 {
    t.as_ps() as f64 / 1e6
}

fn counters_json(c: &PhyCounters) -> Value {
    json!({
        "receiver_errors": c.receiver_errors(),
        "code_violations": c.code_violations,
        "disparity_errors": c.disparity_errors,
        "block_errors": c.block_errors,
        "malformed_ordered_sets": c.malformed_ordered_sets,
        // Part of receiver_errors too: without it the parts did not add up to the total.
        "unexpected_symbols": c.unexpected_symbols,
        "lost_signal": c.lost_signal,
        "deskew_errors": c.deskew_errors,
        "polarity_inversions": c.polarity_inversions,
        "ts_sent": c.ts_sent,
        "ts_received": c.ts_received,
        "skp_sent": c.skp_sent,
        "skp_received": c.skp_received,
        "retrains": c.retrains,
        "retrain_requests": c.retrain_requests,
        "error_retrains": c.error_retrains,
        "speed_changes": c.speed_changes,
        "speed_change_failures": c.speed_change_failures,
        "training_attempts": c.training_attempts,
        "link_ups": c.link_ups,
    })
}

/// The lanes set in a mask of physical lanes, in increasing order.
fn lane_list(mask: u32) -> Vec<u32> {
    (0..u32::BITS).filter(|l| mask >> l & 1 == 1).collect()
}

/// The one state a pair of ports (by name) is reported in: Failed if either failed, else A's unless A is
/// in L0 (then B's).
pub fn reported_state(states: [&'static str; 2]) -> &'static str {
    let failed = LtssmState::Failed.name();
    if states.contains(&failed) {
        failed
    } else if states[0] == LtssmState::L0.name() {
        states[1]
    } else {
        states[0]
    }
}

/// Whether training was stopped by the time limit, not ended: the link is not up, time reached the limit
/// and no port failed (one that failed ended training, even at the limit itself).
pub fn stopped_at_limit(up: bool, state: &str, limit_came: bool) -> bool {
    !up && limit_came && state != LtssmState::Failed.name()
}

/// The report of a trained (or failed) pair, as JSON.
pub fn report<N: Node>(pair: &LinkPair<N>) -> Value {
    let (a, b) = (pair.a.port(), pair.b.port());
    let up = a.is_up() && b.is_up();
    let state = if up {
        LtssmState::L0.name()
    } else {
        reported_state([a.state().name(), b.state().name()])
    };
    let last_l0 = pair
        .transitions()
        .iter()
        .filter(|t| t.to == LtssmState::L0)
        .map(|t| t.at)
        .max()
        .filter(|_| up);
    let first_l0 = match (a.first_l0(), b.first_l0()) {
        (Some(x), Some(y)) => Some(x.max(y)),
        _ => None,
    };
    let history: Vec<Value> = pair
        .transitions()
        .iter()
        .map(|t| {
            json!({
                "t_us": us(t.at),
                "port": match t.side { Side::A => "A", Side::B => "B" },
                "state": t.to.name(),
            })
        })
        .collect();
    let map = a.lane_map();
    json!({
        "state": state,
        "up": up,
        "width": map.filter(|_| up).map(|m| m.width.lanes()),
        "reversed": map.filter(|_| up).map(|m| m.reversed),
        "code": a.line_code().name(),
        "rate_gts": a.rate().gts(),
        "time_to_l0_us": last_l0.map(us),
        "time_to_first_l0_us": first_l0.map(us),
        // Each port's physical lane for logical lane 0, 1, ...: which wires the link came up on, in the
        // port's own numbering (`reversed` above is A's alone).
        "lanes": { "A": lanes_json(a.lane_map().filter(|_| up)), "B": lanes_json(b.lane_map().filter(|_| up)) },
        // Lane numbers, as --invert-lane takes them (each port's own physical numbering), not the mask.
        "inverted_lanes": { "A": lane_list(a.inverted_lanes()), "B": lane_list(b.inverted_lanes()) },
        // Lanes a port's receiver could not deskew with the rest, left out of the link (spec 1.5).
        "lanes_left_out_for_deskew": {
            "A": lane_list(a.lanes_left_out_for_deskew()),
            "B": lane_list(b.lanes_left_out_for_deskew()),
        },
        "history": history,
        "counters": { "A": counters_json(a.counters()), "B": counters_json(b.counters()) },
        "channel": {
            "bits": pair.ab.stats().bits + pair.ba.stats().bits,
            "flipped": pair.ab.stats().flipped + pair.ba.stats().flipped,
        },
        "simulated_us": us(pair.now()),
    })
}

/// A port's lanes in use, logical lane 0 first, and whether it numbers them reversed; null when down.
fn lanes_json(map: Option<LaneMap>) -> Value {
    map.map_or(Value::Null, |m| {
        let physical: Vec<usize> = (0..m.width.lanes()).filter_map(|l| m.physical(l)).collect();
        json!({"reversed": m.reversed, "physical": physical})
    })
}

/// Lanes listed in order as text: a run of three or more that counts up or down by one as `first-last`.
fn lane_list_text(lanes: &Value) -> String {
    let lanes: Vec<i64> = lanes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .collect();
    let run = |step: i64| lanes.windows(2).all(|w| w[1] - w[0] == step);
    match (lanes.first(), lanes.last()) {
        (Some(first), Some(last)) if lanes.len() > 2 && (run(1) || run(-1)) => format!("{first}-{last}"),
        _ => lanes.iter().map(i64::to_string).collect::<Vec<_>>().join(","),
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<ExitCode> {
    if !(args.limit_ms > 0.0 && args.limit_ms <= 60_000.0) {
        bail!(
            "--limit-ms must be above 0 and at most 60000, not {:?}",
            args.limit_ms
        );
    }
    let limit = Instant((args.limit_ms * 1e9) as u64);
    let Some(to) = args.capture.prepare()? else {
        let mut pair = args.channel.build()?;
        let up = pair.train(limit);
        return print(&args, &pair, up, &trained_report(&pair, up, limit));
    };
    let mut pair = (args.channel).build_with(|port, side| capturing(port, side, Some(to)))?;
    let up = pair.train(limit);
    let mut report = trained_report(&pair, up, limit);
    let LinkPair { a, b, .. } = &mut pair;
    report["capture"] = super::capture::write_index(to.0, [a, b], false)?;
    print(&args, &pair, up, &report)
}

/// Print `report` of `pair` as `args` ask, and the exit status: whether the link came `up`.
fn print<N: Node>(
    args: &TrainArgs,
    pair: &LinkPair<N>,
    up: bool,
    report: &Value,
) -> anyhow::Result<ExitCode> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print_text(&args.channel, pair.transitions(), report);
    }
    Ok(if up {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NO_LINK)
    })
}

/// [`report`] of a pair that trained (`up`) or stopped at `limit`.
fn trained_report<N: Node>(pair: &LinkPair<N>, up: bool, limit: Instant) -> Value {
    let mut report = report(pair);
    // Training stops at the limit in whatever state the ports are in, which need not be a final one.
    let state = report["state"].as_str().unwrap_or_default();
    report["limit_reached"] = json!(stopped_at_limit(up, state, pair.now() >= limit));
    report
}

fn print_text(c: &ChannelArgs, transitions: &[Transition], report: &Value) {
    println!(
        "two x{} ports, max {} GT/s, skew up to {} symbol times, BER {}, dead lanes {:?}, stuck {:?}, inverted {:?}{}, seed {}",
        c.lanes,
        // The rate as a number, whichever spelling --max-rate took (`gen4`, `8GT/s`).
        parse_rate(&c.max_rate).map_or(f64::NAN, Rate::gts),
        c.skew,
        // 0, not 0e0; others as 1e-6.
        fabric_sim::topology::number_text(c.ber),
        c.dead_lanes,
        c.stuck_lanes,
        c.inverted_lanes,
        if c.reversed { ", wired reversed" } else { "" },
        c.seed
    );
    println!();
    println!("{:>12}  {:<4} state", "time (us)", "port");
    for t in transitions {
        println!(
            "{:>12.3}  {:<4} {}",
            us(t.at),
            match t.side {
                Side::A => "A",
                Side::B => "B",
            },
            t.to.name()
        );
    }
    println!();
    match (report["up"].as_bool(), report["width"].as_u64()) {
        (Some(true), Some(width)) => {
            let reversed = report["reversed"].as_bool().unwrap_or(false);
            println!(
                "link up: x{width}{}, {} GT/s, {}",
                if reversed { " (lanes reversed)" } else { "" },
                report["rate_gts"],
                report["code"].as_str().unwrap_or("?")
            );
            println!(
                "time to L0: {:.3} us (both ports first in L0: {:.3} us)",
                report["time_to_l0_us"].as_f64().unwrap_or(f64::NAN),
                report["time_to_first_l0_us"].as_f64().unwrap_or(f64::NAN)
            );
        }
        _ if report["limit_reached"] == json!(true) => println!(
            "link DOWN: still training ({}) when --limit-ms ran out at {:.3} us",
            report["state"].as_str().unwrap_or("?"),
            report["simulated_us"].as_f64().unwrap_or(f64::NAN)
        ),
        _ => println!(
            "link DOWN: training ended in {}",
            report["state"].as_str().unwrap_or("?")
        ),
    }
    if report["up"] == json!(true) {
        let physical = |side: &str| lane_list_text(&report["lanes"][side]["physical"]);
        println!(
            "lanes (logical 0 first, each port's own numbering): A {}, B {}",
            physical("A"),
            physical("B")
        );
    }
    for side in ["A", "B"] {
        let lanes = &report["lanes_left_out_for_deskew"][side];
        if lanes.as_array().is_some_and(|l| !l.is_empty()) {
            println!(
                "port {side} left out lanes {lanes}: its deskew buffer could not line them up with the rest"
            );
        }
    }
    for side in ["A", "B"] {
        let k = &report["counters"][side];
        println!(
            "port {side}: {} receiver errors, {} polarity inversions, {} retrains, {} speed changes ({} failed), {} training attempts",
            k["receiver_errors"], k["polarity_inversions"], k["retrains"], k["speed_changes"], k["speed_change_failures"], k["training_attempts"]
        );
    }
    super::capture::print_summary(&report["capture"]);
}
