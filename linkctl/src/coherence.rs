//! `linkctl coherence`: the MESI protocol under a random stress over noisy data links, or explored
//! exhaustively.

use std::fmt::Display;
use std::io::IsTerminal;
use std::ops::RangeInclusive;
use std::process::ExitCode;
use std::time::Instant as WallClock;

use anyhow::{bail, ensure};
use link_tl::coherence::explore::{explore_observed, Config, Report, World, MAX_OUTSTANDING, OBSERVE_EVERY};
use link_tl::coherence::stress::{self, StressConfig, MAX_AGENTS, MAX_LINES};
use serde_json::json;

use crate::trace::{summary_json, summary_text, LinkTrace, PcapArgs};
use fabric_sim::trace::{Hop, TlLayout};
use link_phy::time::Instant;
use link_tl::endpoint::pair::TapPoint;

use crate::check::ensure_unit_wire_ber;
use crate::words::plural;

/// Exit status when an invariant was violated or the search found a counterexample.
const EXIT_VIOLATION: u8 = 3;

/// Help headings of the options of each mode.
const STRESS: &str = "Stress options (without --explore)";
const EXPLORATION: &str = "Exploration options (with --explore)";

/// The largest reordering bound taken (more than the model's channels can hold in flight is `any`).
const MAX_REORDER: u8 = 32;

/// The stress's system when --agents or --lines is not given: a busy one.
const STRESS_AGENTS: usize = 4;
const STRESS_LINES: usize = 64;
/// The exploration's: complete in a fraction of a second.
const EXPLORE_AGENTS: usize = 2;
const EXPLORE_LINES: usize = 1;

/// The defaults of the options of one mode, which are `None` when not given so that giving one in the
/// other mode can be refused.
const DEFAULT_OPS: u64 = 1_000_000;
const DEFAULT_SEED: u64 = 1;
const DEFAULT_BER: f64 = 1e-6;
const DEFAULT_VALUES: u8 = 2;
const DEFAULT_OUTSTANDING: usize = 1;
const DEFAULT_MAX_STATES: u64 = 40_000_000;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Each mode takes only its own options: giving one of the other mode is an error.")]
pub struct CoherenceArgs {
    /// Caching agents (stress: 1 to 8, default 4; exploration: 1 to 3, default 2)
    #[arg(long)]
    pub agents: Option<usize>,
    /// Cache lines (stress: 1 to 256, default 64; exploration: 1 or 2, default 1)
    #[arg(long)]
    pub lines: Option<usize>,
    /// Explore every interleaving of a small system instead of running the stress (with neither --agents
    /// nor --lines: 2 agents on 1 line, a complete search in well under a second)
    #[arg(long)]
    pub explore: bool,
    /// Operations the stress completes (default 1000000)
    #[arg(long, help_heading = STRESS)]
    pub ops: Option<u64>,
    /// Seed of the stress's operations and bit errors (default 1)
    #[arg(long, help_heading = STRESS)]
    pub seed: Option<u64>,
    /// Bit error rate on every link of the stress, at least 0 and below 1/128 (default 1e-6; the data
    /// links replay what it corrupts; the wire flips at most one bit per 128-bit unit)
    #[arg(long, help_heading = STRESS, value_parser = crate::check::float)]
    pub ber: Option<f64>,
    /// Stores write the values 1 to this (1 to 7, default 2)
    #[arg(long, help_heading = EXPLORATION)]
    pub values: Option<u8>,
    /// Operations each agent may have in progress at once (1 or 2, default 1)
    #[arg(long, help_heading = EXPLORATION)]
    pub outstanding: Option<usize>,
    /// How many older messages in flight a delivered message may overtake, or `any` (the default: the
    /// channels interleave arbitrarily)
    #[arg(long, value_parser = parse_reorder, help_heading = EXPLORATION)]
    pub reorder: Option<Reorder>,
    /// Count states that differ only in which values were stored separately (by default they are one
    /// state: the protocol never looks at the values it moves)
    #[arg(long, help_heading = EXPLORATION)]
    pub no_value_symmetry: bool,
    /// Count states that differ only in the numbering of the agents separately (by default they are one
    /// state: the home treats agents alike)
    #[arg(long, help_heading = EXPLORATION)]
    pub no_agent_symmetry: bool,
    /// Count states that differ only in the numbering of the lines separately (by default they are one
    /// state: agents and home treat lines alike)
    #[arg(long, help_heading = EXPLORATION)]
    pub no_line_symmetry: bool,
    /// Count states that differ only in the parities of the GOs an agent received for a line separately
    /// (by default they are one state: the engines only compare phases)
    #[arg(long, help_heading = EXPLORATION)]
    pub no_phase_symmetry: bool,
    /// Stop after this many states (default 40000000; the report then says the search was not
    /// complete; a large search takes 110 to 160 bytes per state: the default bounds it near 7 GB, and is
    /// enough for every search of up to 3 agents and 2 lines with 2 values)
    #[arg(long, help_heading = EXPLORATION)]
    pub max_states: Option<u64>,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// The stress's links, as a trace for Wireshark (docs/spec.md 7.2)
    #[command(flatten)]
    pub trace: PcapArgs,
    /// Trace the units as each end's data link takes them instead (after the wire's bit errors):
    /// corrupted ones show with a bad CRC
    #[arg(long, requires = "pcap")]
    pub pcap_received: bool,
}

/// A reordering bound as given on the command line (`None`: any).
#[derive(Clone, Copy, Debug)]
pub struct Reorder(Option<u8>);

fn parse_reorder(s: &str) -> Result<Reorder, String> {
    if s == "any" {
        return Ok(Reorder(None));
    }
    match s.parse::<u8>() {
        Ok(k) if k <= MAX_REORDER => Ok(Reorder(Some(k))),
        _ => Err(format!("expected 0 to {MAX_REORDER} or `any`")),
    }
}

pub fn run(args: CoherenceArgs) -> anyhow::Result<ExitCode> {
    let stress_options = [
        ("--ops", args.ops.is_some()),
        ("--seed", args.seed.is_some()),
        ("--ber", args.ber.is_some()),
        ("--pcap", args.trace.pcap.is_some()),
        ("--pcap-received", args.pcap_received),
    ];
    let exploration_options = [
        ("--values", args.values.is_some()),
        ("--outstanding", args.outstanding.is_some()),
        ("--reorder", args.reorder.is_some()),
        ("--no-value-symmetry", args.no_value_symmetry),
        ("--no-agent-symmetry", args.no_agent_symmetry),
        ("--no-line-symmetry", args.no_line_symmetry),
        ("--no-phase-symmetry", args.no_phase_symmetry),
        ("--max-states", args.max_states.is_some()),
    ];
    let given = |options: &[(&'static str, bool)]| options.iter().find(|(_, given)| *given).map(|o| o.0);
    if args.explore {
        if let Some(flag) = given(&stress_options) {
            bail!("{flag} is an option of the stress, which --explore does not run");
        }
        run_explore(&args)
    } else {
        if let Some(flag) = given(&exploration_options) {
            bail!("{flag} is an option of the exploration: give --explore to run it");
        }
        run_stress(&args)
    }
}

/// Refuses `value` for `flag` unless it lies in `range`.
fn ensure_within<T: PartialOrd + Display>(
    flag: &str,
    value: T,
    range: RangeInclusive<T>,
) -> anyhow::Result<()> {
    ensure!(
        range.contains(&value),
        "{flag} must be {} to {}, not {value}",
        range.start(),
        range.end()
    );
    Ok(())
}

fn run_stress(args: &CoherenceArgs) -> anyhow::Result<ExitCode> {
    let (agents, lines) = (
        args.agents.unwrap_or(STRESS_AGENTS),
        args.lines.unwrap_or(STRESS_LINES),
    );
    ensure_within("--agents", agents, 1..=MAX_AGENTS)?;
    ensure_within("--lines", lines, 1..=MAX_LINES)?;
    let (ops, seed, ber) = (
        args.ops.unwrap_or(DEFAULT_OPS),
        args.seed.unwrap_or(DEFAULT_SEED),
        args.ber.unwrap_or(DEFAULT_BER),
    );
    ensure!(ops > 0, "--ops must be at least 1");
    ensure_unit_wire_ber(ber)?;
    let config = StressConfig {
        agents,
        lines,
        ops,
        seed,
        ber,
    };
    let mut trace = args.trace.open_links(TlLayout::Transaction, agents)?;
    let started = WallClock::now();
    let r = match trace.as_mut() {
        None => stress::run(&config),
        Some(trace) => {
            // Link i joins agent i (node i + 1, port 0) to the home (node 0, port i); every link steps at
            // the same times, so a unit at a later time means the earlier ones are all in.
            let mut last = Instant::ZERO;
            let point = if args.pcap_received {
                TapPoint::Received
            } else {
                TapPoint::Sent
            };
            stress::run_tapped(&config, |link, from_agent, at, unit, seen| {
                if seen != point {
                    return;
                }
                let (agent, home) = ((link as u16 + 1, 0), (0, link as u8));
                let hop = if from_agent {
                    Hop {
                        trunk: link as u16,
                        from: agent,
                        to: home,
                    }
                } else {
                    Hop {
                        trunk: link as u16,
                        from: home,
                        to: agent,
                    }
                };
                if at > last {
                    trace.advance(at);
                    last = at;
                }
                trace.unit_on(2 * link + usize::from(!from_agent), hop, at, unit);
            })
        }
    };
    let wall = started.elapsed().as_secs_f64();
    let trace = trace.map(LinkTrace::finish).transpose()?;
    let value = json!({
        "agents": agents,
        "lines": lines,
        "seed": seed,
        "ber": ber,
        "ops": r.ops,
        "reads": r.reads,
        "writes": r.writes,
        "evictions": r.evictions,
        "hits": r.hits,
        "requests": r.requests,
        "snoops": r.snoops,
        "invalidations": r.invalidations,
        "writebacks": r.write_backs,
        "parked": r.parked,
        "violations": r.violations,
        "first_violation": r.first_violation,
        "replays": r.replays,
        "crc_errors": r.crc_errors,
        "bits_flipped": r.bits_flipped,
        "unit_times": r.steps,
        "complete": r.complete,
        "links_stalled": r.links_stalled,
        "wall_seconds": wall,
        "trace": trace.as_ref().map(summary_json),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "{}, {}, seed {}, bit error rate {} on every link: {} ({}, {}, {}; {})",
            plural(agents as u64, "agent"),
            plural(lines as u64, "line"),
            seed,
            fabric_sim::topology::number_text(ber),
            plural(r.ops as u64, "operation"),
            plural(r.reads as u64, "read"),
            plural(r.writes as u64, "write"),
            plural(r.evictions as u64, "eviction"),
            plural(r.hits as u64, "hit")
        );
        println!(
            "home: {}, {}, {}, {}, {} parked on busy lines",
            plural(r.requests, "request"),
            plural(r.snoops, "snoop"),
            plural(r.invalidations, "invalidation"),
            plural(r.write_backs, "write-back"),
            plural(r.parked, "request")
        );
        println!(
            "links: {} flipped, {}, {}; {}; {wall:.2} s of wall time",
            plural(r.bits_flipped, "bit"),
            plural(r.crc_errors, "CRC error"),
            plural(r.replays, "replay"),
            plural(r.steps, "unit time")
        );
        if let Some(t) = &trace {
            println!("trace: {}", summary_text(t));
        }
        match (&r.first_violation, &r.links_stalled) {
            (None, _) if r.complete => println!("invariant violations: 0"),
            (None, Some(why)) => println!("did not complete: {why}"),
            (None, None) => println!("did not complete"),
            (Some(v), _) => println!("invariant violations: {} (first: {v})", r.violations),
        }
    }
    Ok(if r.violations == 0 && r.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_VIOLATION)
    })
}

fn run_explore(args: &CoherenceArgs) -> anyhow::Result<ExitCode> {
    let (agents, lines) = (
        args.agents.unwrap_or(EXPLORE_AGENTS),
        args.lines.unwrap_or(EXPLORE_LINES),
    );
    let values = args.values.unwrap_or(DEFAULT_VALUES);
    let outstanding = args.outstanding.unwrap_or(DEFAULT_OUTSTANDING);
    let max_states = args.max_states.unwrap_or(DEFAULT_MAX_STATES);
    let reorder = args.reorder.and_then(|r| r.0);
    ensure_within("--values", values, 1..=7)?;
    ensure_within("--outstanding", outstanding, 1..=MAX_OUTSTANDING)?;
    ensure!(max_states > 0, "--max-states must be at least 1");
    let config = Config {
        values,
        outstanding,
        check_drain: true,
        max_states,
        reorder,
        value_symmetry: !args.no_value_symmetry,
        agent_symmetry: !args.no_agent_symmetry,
        line_symmetry: !args.no_line_symmetry,
        phase_symmetry: !args.no_phase_symmetry,
    };
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    let mut progress = |r: &Report| {
        if show_progress {
            eprint!(
                "\r{} M states, depth {}, {:.0} s, {:.0} k states/s ",
                r.states >> 20,
                r.depth,
                r.seconds,
                r.states as f64 / r.seconds.max(1e-9) / 1e3
            );
        }
    };
    let r: Report = match (agents, lines) {
        (1, 1) => explore_observed(World::<1, 1>::new(), &config, &mut progress),
        (1, 2) => explore_observed(World::<1, 2>::new(), &config, &mut progress),
        (2, 1) => explore_observed(World::<2, 1>::new(), &config, &mut progress),
        (2, 2) => explore_observed(World::<2, 2>::new(), &config, &mut progress),
        (3, 1) => explore_observed(World::<3, 1>::new(), &config, &mut progress),
        (3, 2) => explore_observed(World::<3, 2>::new(), &config, &mut progress),
        (a, l) => bail!(
            "exploration runs 1 to 3 agents on 1 or 2 lines, not {} on {}",
            plural(a as u64, "agent"),
            plural(l as u64, "line")
        ),
    };
    if show_progress && r.states >= OBSERVE_EVERY {
        eprintln!();
    }
    let violation = r.violation.as_ref().map(|c| {
        json!({
            "kind": format!("{:?}", c.kind),
            "detail": c.detail,
            "trace": c.trace,
        })
    });
    let value = json!({
        "agents": agents,
        "lines": lines,
        "values": values,
        "outstanding": outstanding,
        "reorder": reorder,
        "value_symmetry": !args.no_value_symmetry,
        "agent_symmetry": !args.no_agent_symmetry,
        "line_symmetry": !args.no_line_symmetry,
        "phase_symmetry": !args.no_phase_symmetry,
        "states": r.states,
        "transitions": r.transitions,
        "depth": r.depth,
        "quiescent": r.quiescent,
        "complete": r.complete,
        "violations": u64::from(r.violation.is_some()),
        "violation": violation,
        "wall_seconds": r.seconds,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "{}, {}, values 1 to {}, {} in progress per agent, {}: {}, {}, depth {}, {} quiescent; \
             {:.1} s",
            plural(agents as u64, "agent"),
            plural(lines as u64, "line"),
            values,
            plural(outstanding as u64, "operation"),
            match reorder {
                None => String::from("channels interleaved arbitrarily"),
                Some(k) => format!("each message overtaking at most {k} older"),
            },
            plural(r.states, "state"),
            plural(r.transitions, "transition"),
            r.depth,
            r.quiescent,
            r.seconds
        );
        match &r.violation {
            Some(c) => {
                println!("VIOLATION ({:?}): {}", c.kind, c.detail);
                for step in &c.trace {
                    println!("  {step}");
                }
            }
            None if r.complete => println!(
                "every reachable state explored: single writer, data value, no deadlock and drain to \
                 quiescence hold in all of them"
            ),
            None => println!(
                "no violation in the {} explored; the search stopped at --max-states before reaching \
                 every state",
                plural(r.states, "state")
            ),
        }
    }
    Ok(if r.violation.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_VIOLATION)
    })
}
