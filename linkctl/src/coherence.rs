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

/// Exit status when an invariant was violated or the search found a counterexample.
const EXIT_VIOLATION: u8 = 3;

/// The largest reordering bound taken (more than the model's channels can hold in flight is `any`).
const MAX_REORDER: u8 = 32;

#[derive(clap::Args, Debug)]
pub struct CoherenceArgs {
    /// Caching agents (stress: 1 to 8; exploration: 1 to 3)
    #[arg(long, default_value_t = 4)]
    pub agents: usize,
    /// Cache lines (stress: 1 to 256; exploration: 1 or 2)
    #[arg(long, default_value_t = 64)]
    pub lines: usize,
    /// Operations the stress completes
    #[arg(long, default_value_t = 1_000_000)]
    pub ops: u64,
    /// Seed of the stress's operations and bit errors
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Bit error rate on every link of the stress (the data links replay what it corrupts)
    #[arg(long, default_value_t = 1e-6)]
    pub ber: f64,
    /// Explore every interleaving of a small system instead of running the stress
    #[arg(long)]
    pub explore: bool,
    /// Exploration: stores write the values 1 to this (1 to 7)
    #[arg(long, default_value_t = 2)]
    pub values: u8,
    /// Exploration: operations each agent may have in progress at once (1 or 2)
    #[arg(long, default_value_t = 1)]
    pub outstanding: usize,
    /// Exploration: how many older messages in flight a delivered message may overtake, or `any` (the
    /// channels interleave arbitrarily)
    #[arg(long, default_value = "any", value_parser = parse_reorder)]
    pub reorder: Reorder,
    /// Exploration: count states that differ only in which values were stored separately (by default
    /// they are one state: the protocol never looks at the values it moves)
    #[arg(long)]
    pub no_value_symmetry: bool,
    /// Exploration: count states that differ only in the numbering of the agents separately (by default
    /// they are one state: the home treats agents alike)
    #[arg(long)]
    pub no_agent_symmetry: bool,
    /// Exploration: count states that differ only in the numbering of the lines separately (by default
    /// they are one state: agents and home treat lines alike)
    #[arg(long)]
    pub no_line_symmetry: bool,
    /// Exploration: count states that differ only in the parities of the GOs an agent received for a
    /// line separately (by default they are one state: the engines only compare phases)
    #[arg(long)]
    pub no_phase_symmetry: bool,
    /// Exploration: stop after this many states (the report then says the search was not complete;
    /// a large search takes 110 to 160 bytes per state: the default bounds it near 7 GB, and is enough
    /// for every search of up to 3 agents and 2 lines with 2 values)
    #[arg(long, default_value_t = 40_000_000)]
    pub max_states: u64,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
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
    if args.explore {
        run_explore(&args)
    } else {
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
    ensure_within("--agents", args.agents, 1..=MAX_AGENTS)?;
    ensure_within("--lines", args.lines, 1..=MAX_LINES)?;
    ensure!(args.ops > 0, "--ops must be at least 1");
    ensure!(
        (0.0..1.0).contains(&args.ber),
        "--ber must be at least 0 and below 1, not {}",
        args.ber
    );
    let started = WallClock::now();
    let r = stress::run(&StressConfig {
        agents: args.agents,
        lines: args.lines,
        ops: args.ops,
        seed: args.seed,
        ber: args.ber,
    });
    let wall = started.elapsed().as_secs_f64();
    let value = json!({
        "agents": args.agents,
        "lines": args.lines,
        "seed": args.seed,
        "ber": args.ber,
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
        "wall_seconds": wall,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "{} agents, {} lines, seed {}, bit error rate {:e} on every link: {} operations ({} reads, {} \
             writes, {} evictions; {} hits)",
            args.agents, args.lines, args.seed, args.ber, r.ops, r.reads, r.writes, r.evictions, r.hits
        );
        println!(
            "home: {} requests, {} snoops, {} invalidations, {} write-backs, {} requests parked on busy lines",
            r.requests, r.snoops, r.invalidations, r.write_backs, r.parked
        );
        println!(
            "links: {} bits flipped, {} CRC errors, {} replays; {} unit times; {wall:.2} s of wall time",
            r.bits_flipped, r.crc_errors, r.replays, r.steps
        );
        match &r.first_violation {
            None if r.complete => println!("invariant violations: 0"),
            None => println!("did not complete"),
            Some(v) => println!("invariant violations: {} (first: {v})", r.violations),
        }
    }
    Ok(if r.violations == 0 && r.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_VIOLATION)
    })
}

fn run_explore(args: &CoherenceArgs) -> anyhow::Result<ExitCode> {
    ensure_within("--values", args.values, 1..=7)?;
    ensure_within("--outstanding", args.outstanding, 1..=MAX_OUTSTANDING)?;
    ensure!(args.max_states > 0, "--max-states must be at least 1");
    let config = Config {
        values: args.values,
        outstanding: args.outstanding,
        check_drain: true,
        max_states: args.max_states,
        reorder: args.reorder.0,
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
    let r: Report = match (args.agents, args.lines) {
        (1, 1) => explore_observed(World::<1, 1>::new(), &config, &mut progress),
        (1, 2) => explore_observed(World::<1, 2>::new(), &config, &mut progress),
        (2, 1) => explore_observed(World::<2, 1>::new(), &config, &mut progress),
        (2, 2) => explore_observed(World::<2, 2>::new(), &config, &mut progress),
        (3, 1) => explore_observed(World::<3, 1>::new(), &config, &mut progress),
        (3, 2) => explore_observed(World::<3, 2>::new(), &config, &mut progress),
        (a, l) => bail!("exploration runs 1 to 3 agents on 1 or 2 lines, not {a} agents on {l} lines"),
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
        "agents": args.agents,
        "lines": args.lines,
        "values": args.values,
        "outstanding": args.outstanding,
        "reorder": args.reorder.0,
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
            "{} agents, {} lines, values 1 to {}, {} operation(s) in progress per agent, {}: {} states, {} \
             transitions, depth {}, {} quiescent; {:.1} s",
            args.agents,
            args.lines,
            args.values,
            args.outstanding,
            match args.reorder.0 {
                None => String::from("channels interleaved arbitrarily"),
                Some(k) => format!("each message overtaking at most {k} older"),
            },
            r.states,
            r.transitions,
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
                "no violation in the {} states explored; the search stopped at --max-states before \
                 reaching every state",
                r.states
            ),
        }
    }
    Ok(if r.violation.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_VIOLATION)
    })
}
