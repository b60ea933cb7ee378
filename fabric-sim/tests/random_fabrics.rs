//! Whole sweeps on small fabrics read from generated topology files: GPUs and switches cabled at random,
//! with parallel links of different rates, latencies and framings, collectives of odd sizes, bit errors
//! and links, switch ports and whole switches failing, being drained and being repaired at random times (at
//! 0, while the links train, and after the end).
//! A drain never loses a packet: a run stops for one only after trunk failures.
//! Every run either verifies or says why it stopped, and a cut is reported exactly when the fabric left
//! by the failures no longer joins the GPUs that send to each other; the counters add up; a seed gives
//! the same report twice. Synthetic traffic runs on the same fabrics with the same faults: it delivers
//! every packet once, intact, or counts it lost, and only trunk failures lose any. On larger random
//! fabrics with trunks failed, the fabric manager's routes cannot deadlock and join exactly the GPUs that
//! live trunks join.

use std::collections::BTreeMap;

use fabric_sim::collective::Kind;
use fabric_sim::manager::Fabric;
use fabric_sim::run::{
    collective_talks, deliveries, ring_orders, run, sizes, Algo, FaultSpec, Report, Sweep,
};
use fabric_sim::topology::{NodeKind, Topology};
use fabric_sim::traffic::{run_traffic, Pattern, Spread, TrafficSpec};
use link_phy::time::Duration;
use proptest::prelude::*;
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A topology file of `gpus` GPUs and `switches` switches cabled as `seed` draws: GPUs each to one or
/// more switches (every switch, sometimes), switches in a tree with extra trunks, or without switches a
/// full mesh of GPUs. Returns the file and the pairs of nodes it links, by name.
fn fabric_file(gpus: usize, switches: usize, seed: u64) -> (String, Vec<(String, String)>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut draw = |n: usize| (rng.next_u64() % n as u64) as usize;
    let name = |x: usize| {
        if x < gpus {
            format!("g{x}")
        } else {
            format!("s{}", x - gpus)
        }
    };
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let mut add = |a: usize, b: usize| {
        if a != b && !pairs.contains(&(a, b)) && !pairs.contains(&(b, a)) {
            pairs.push((a, b));
        }
    };
    if switches == 0 {
        (0..gpus).for_each(|a| (a + 1..gpus).for_each(|b| add(a, b)));
    } else {
        for s in 1..switches {
            add(gpus + draw(s), gpus + s);
        }
        for _ in 0..draw(3) {
            add(gpus + draw(switches), gpus + draw(switches));
        }
        let every_switch = draw(3) == 0;
        for g in 0..gpus {
            let count = if every_switch {
                switches
            } else {
                1 + draw(switches)
            };
            for s in 0..count {
                add(g, gpus + if every_switch { s } else { draw(switches) });
            }
        }
        if draw(3) == 0 {
            add(draw(gpus), draw(gpus));
        }
    }
    let format = ["openlink", "nvlink-ae"][draw(2)];
    let mut toml = String::from("name = \"random\"\n");
    for x in 0..gpus + switches {
        let kind = if x < gpus { "gpu" } else { "switch" };
        toml += &format!("[[node]]\nname = \"{}\"\nkind = \"{kind}\"\n", name(x));
    }
    for &(a, b) in &pairs {
        // Sometimes two entries, ganged into one trunk of mixed rates and latencies.
        for _ in 0..1 + draw(2) {
            let count = [1, 1, 2, 3, 5][draw(5)];
            let gbps = [3.7, 12.5, 25.0, 50.0, 100.0][draw(5)];
            let latency = [0.0, 1.0, 37.5, 100.0, 150.0, 700.0][draw(6)];
            toml += &format!(
                "[[link]]\na = \"{}\"\nb = \"{}\"\ncount = {count}\ngbps = {gbps}\nlatency_ns = {latency}\n\
                 format = \"{format}\"\n",
                name(a),
                name(b)
            );
        }
    }
    let named = pairs.into_iter().map(|(a, b)| (name(a), name(b))).collect();
    (toml, named)
}

/// The pairs of GPUs (endpoint IDs) that the collective of `algo` sends between on `t`, as the run works
/// them out: every pair, but for a ring's neighbours and a tree's parents and children.
fn talking_pairs(t: &Topology, algo: Algo) -> Vec<(usize, usize)> {
    let n = t.gpus().len();
    let fabric = Fabric::plan(t, &[]).unwrap();
    collective_talks(algo, &ring_orders(&fabric, n), n).unwrap_or_else(|| {
        (0..n)
            .flat_map(|a| (0..n).map(move |b| (a, b)))
            .filter(|(a, b)| a != b)
            .collect()
    })
}

/// Whether each of `pairs` of GPUs (endpoint IDs) is joined, directly or through switches, by trunks with
/// a link up once the faults (and repairs) due by `end` have happened, in their order.
fn gpus_joined(t: &Topology, faults: &[FaultSpec], end: Duration, pairs: &[(usize, usize)]) -> bool {
    let pair = |a: &str, b: &str| {
        let (x, y) = (t.node_named(a).unwrap(), t.node_named(b).unwrap());
        (x.min(y), x.max(y))
    };
    let mut built: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for l in &t.links {
        *built.entry((l.a.min(l.b), l.a.max(l.b))).or_default() += 1;
    }
    let mut links = built.clone();
    let touching = |name: &str| {
        let x = t.node_named(name).unwrap();
        built.keys().filter(move |&&(a, b)| a == x || b == x).copied()
    };
    // Faults at the same instant happen in the order given (the simulator's events keep it).
    let mut due: Vec<&FaultSpec> = faults.iter().filter(|f| f.at() <= end).collect();
    due.sort_by_key(|f| f.at());
    for f in due {
        match f {
            FaultSpec::Link { a, b, .. } => {
                links.insert(pair(a, b), 0);
            }
            FaultSpec::Port { switch, peer, .. } => {
                links.insert(pair(switch, peer), 0);
            }
            FaultSpec::OneLink { a, b, .. } => {
                let up = links.get_mut(&pair(a, b)).unwrap();
                *up = up.saturating_sub(1);
            }
            FaultSpec::Repair { a, b, .. } => {
                links.insert(pair(a, b), built[&pair(a, b)]);
            }
            FaultSpec::Switch { switch, .. } => touching(switch).for_each(|k| {
                links.insert(k, 0);
            }),
            // The routes leave a drained switch out from the fabric manager's plan, before its ports go
            // down; unless that would cut GPUs that send to each other and are joined now: the manager
            // refuses the drain.
            FaultSpec::Drain { switch, .. } => {
                let mut drained = links.clone();
                touching(switch).for_each(|k| {
                    drained.insert(k, 0);
                });
                if joined(t, &drained, pairs) || !joined(t, &links, pairs) {
                    links = drained;
                }
            }
            FaultSpec::SwitchRepair { switch, .. } => touching(switch).for_each(|k| {
                links.insert(k, built[&k]);
            }),
        }
    }
    joined(t, &links, pairs)
}

/// Whether paths through switches over the trunks with links up in `links` join every pair of `pairs`.
fn joined(t: &Topology, links: &BTreeMap<(usize, usize), usize>, pairs: &[(usize, usize)]) -> bool {
    let gpus = t.gpus();
    pairs.iter().all(|&(from, to)| {
        let (from, to) = (gpus[from], gpus[to]);
        let mut seen = vec![false; t.nodes.len()];
        let mut stack = vec![from];
        seen[from] = true;
        while let Some(x) = stack.pop() {
            for (&(a, b), _) in links.iter().filter(|&(_, &up)| up > 0) {
                let y = match (a == x, b == x) {
                    (true, _) => b,
                    (_, true) => a,
                    _ => continue,
                };
                // GPUs do not forward: a path goes on only through switches.
                if !seen[y] {
                    seen[y] = true;
                    if t.nodes[y].kind == NodeKind::Switch {
                        stack.push(y);
                    }
                }
            }
        }
        seen[to]
    })
}

/// A fault drawn as (which of the linked `pairs`, what, when, jitter in ns), as a fault option gives it.
type FaultDraw = (prop::sample::Index, usize, u64, u64);

/// Draws of up to three faults.
fn fault_draws() -> impl Strategy<Value = Vec<FaultDraw>> {
    prop::collection::vec(
        (any::<prop::sample::Index>(), 0usize..7, 0u64..8, 0u64..1000),
        0..4,
    )
}

/// The faults `draws` give on a fabric linking `pairs`: links, ports and switches failing, repaired and
/// drained at 0, while the links train, as the run goes on, or long after it.
fn fault_specs(pairs: &[(String, String)], draws: Vec<FaultDraw>) -> Vec<FaultSpec> {
    let mut faults = Vec::new();
    for (which, how, when, jitter) in draws {
        let (a, b) = pairs[which.index(pairs.len())].clone();
        let at =
            Duration::from_ns([0, 1, 500, 900, 1_500, 3_000, 20_000, 10_000_000][when as usize] + jitter);
        faults.push(match how {
            0 => FaultSpec::Link { a, b, at },
            1 => FaultSpec::OneLink { a, b, at },
            2 if b.starts_with('s') => FaultSpec::Port {
                switch: b,
                peer: a,
                at,
            },
            3 => FaultSpec::Repair { a, b, at },
            4 if b.starts_with('s') => FaultSpec::Switch { switch: b, at },
            5 if b.starts_with('s') => FaultSpec::SwitchRepair { switch: b, at },
            5 => FaultSpec::Repair { a, b, at },
            6 if b.starts_with('s') => FaultSpec::Drain { switch: b, at },
            _ => FaultSpec::Link { a, b, at },
        });
    }
    faults
}

/// Trunk failures among `faults` due by `end`: a whole switch's are one per trunk it has.
fn trunk_failures(t: &Topology, faults: &[FaultSpec], end: Duration) -> usize {
    faults
        .iter()
        .filter(|f| f.at() <= end)
        .map(|f| match f {
            FaultSpec::Repair { .. } | FaultSpec::SwitchRepair { .. } | FaultSpec::Drain { .. } => 0,
            FaultSpec::Switch { switch, .. } => {
                let x = t.node_named(switch).unwrap();
                let peers: std::collections::BTreeSet<usize> = (t.links.iter())
                    .filter_map(|l| (l.a == x).then_some(l.b).or((l.b == x).then_some(l.a)))
                    .collect();
                peers.len()
            }
            _ => 1,
        })
        .sum()
}

fn without_wall_times(mut r: Report) -> Report {
    (r.wall_seconds, r.setup_wall_seconds, r.packets_per_s) = (0.0, 0.0, 0.0);
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_fabrics_verify_or_say_why(
        gpus in 2usize..9,
        switches in 0usize..4,
        cabling in any::<u64>(),
        collective in 0usize..7,
        min in prop::sample::select(vec![1u64, 4, 5, 129, 1000, 4097, 20_003]),
        doublings in 0u32..3,
        ber in prop::sample::select(vec![None, None, Some(1e-6)]),
        faults in fault_draws(),
        replan_ns in prop::sample::select(vec![0u64, 0, 1_000, 40_000]),
        seed in 0u64..1000,
    ) {
        let (toml, pairs) = fabric_file(gpus, switches, cabling);
        let t = Topology::from_toml(&toml).unwrap();
        let (kind, algo) = [
            (Kind::AllReduce, Algo::Ring),
            (Kind::AllReduce, Algo::Tree),
            (Kind::AllReduce, Algo::SwitchReduce),
            (Kind::AllGather, Algo::Ring),
            (Kind::ReduceScatter, Algo::Ring),
            (Kind::Broadcast, Algo::Ring),
            (Kind::AllToAll, Algo::P2p),
        ][collective];
        let mut s = Sweep::new(t, kind, algo, min, min << doublings);
        (s.seed, s.ber, s.limit_per_size) = (seed, ber, Duration::from_ms(5));
        s.faults = fault_specs(&pairs, faults);
        if !s.faults.is_empty() {
            s.replan_delay = Duration::from_ns(replan_ns);
        }
        // Refused up front (switch-reduce off a crossbar, no size with an element per GPU, GPUs no
        // switch joins): nothing ran.
        let Ok(r) = run(&s, &mut |_| {}) else {
            return Ok(());
        };
        let talking = talking_pairs(&s.topology, algo);
        let what = format!("{toml}\n{kind:?} {algo:?} {min} x{doublings} {:?} {:?}: {:?} {:?}", s.ber, s.faults, r.failure, r.rows);
        let end = r.simulated;
        let happened = s.faults.iter().filter(|f| f.at() <= end).count();
        let failures = trunk_failures(&s.topology, &s.faults, end);
        // Drains that happened: each takes its switch's engine offline, as a failure of a port to a GPU does.
        let drains = s.faults.iter().filter(|f| f.at() <= end && matches!(f, FaultSpec::Drain { .. })).count();
        prop_assert_eq!(happened + r.faults_after_end, s.faults.len(), "{}", what);
        if failures == 0 {
            // Drains and repairs alone lose nothing, not even a unit on a wire.
            let f = &r.failover;
            prop_assert_eq!((f.links_failed, f.units_lost, f.packets_lost, f.packets_taken_back), (0, 0, 0, 0), "{}", what);
        }
        match &r.failure {
            None => {
                prop_assert!(r.verified && r.rows.iter().all(|row| row.wrong == 0), "{}", what);
                let moved: Vec<u64> = r.rows.iter().map(|row| row.bytes).collect();
                prop_assert_eq!(moved, sizes(kind, r.gpus, s.min, s.max), "{}", what);
                // A cut that the manager has not replanned around by the end is not found, and the
                // report says the new routes were still to come.
                // A repaired trunk's links train again, and the manager waits for them too: a repair
                // can leave the new routes to come whatever the delay.
                let replanning = s.faults.iter().any(|f| {
                    f.at() <= end
                        && (f.at() + s.replan_delay > end
                            || matches!(f, FaultSpec::Repair { .. } | FaultSpec::SwitchRepair { .. }))
                });
                prop_assert!(r.replan_pending || gpus_joined(&s.topology, &s.faults, end, &talking), "{}", what);
                prop_assert!(!r.replan_pending || replanning, "{}", what);
            }
            Some(why) => {
                prop_assert!(!r.verified, "{}", what);
                // A run stops for a cut only when the GPUs are cut apart; else, after two trunk failures or
                // more, for a packet cut off from both its ends, or for every switch plane retired. One
                // failure can retire a GPU's last plane if a repair spared the cut it made: a repair does
                // not bring an engine back online.
                let repaired = s.faults.iter().any(|f| {
                    f.at() <= end && matches!(f, FaultSpec::Repair { .. } | FaultSpec::SwitchRepair { .. })
                });
                if why.contains("no route from") {
                    prop_assert!(!gpus_joined(&s.topology, &s.faults, end, &talking), "{}", what);
                } else if why.contains("collective engine offline") {
                    let retired = failures + drains;
                    prop_assert!(retired >= 2 || (retired == 1 && repaired), "{}", what);
                } else {
                    prop_assert!(failures >= 2 && why.contains("neither deliver nor return"), "{}", what);
                }
            }
        }
        if happened == 0 {
            let dl = &r.links.dl;
            if ber.is_none() {
                prop_assert!(dl.packets_transmitted == dl.packets_sent && dl.packets_received == dl.packets_sent, "{}", what);
            }
            let sw = &r.switches;
            if algo != Algo::SwitchReduce {
                prop_assert_eq!(sw.forwarded + sw.partition_drops + sw.route_drops, sw.arrived + sw.taken_back, "{}", what);
            }
            if algo != Algo::Tree {
                for row in &r.rows {
                    prop_assert_eq!(row.packets, deliveries(kind, algo, row.bytes, r.gpus), "{}", what);
                }
            }
        }
        let again = run(&s, &mut |_| {}).unwrap();
        prop_assert_eq!(without_wall_times(again), without_wall_times(r), "{}", what);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Synthetic traffic on the same random fabrics, with the same faults: every packet generated is
    /// delivered once, intact, or counted lost, and losses come only from trunk failures; with no fault
    /// and no loss the run verifies; a seed gives the same report twice.
    #[test]
    fn random_traffic_delivers_each_packet_once_or_counts_it_lost(
        gpus in 2usize..9,
        switches in 0usize..4,
        cabling in any::<u64>(),
        pattern in 0usize..4,
        links in any::<bool>(),
        load in prop::sample::select(vec![0.02, 0.3, 0.8, 1.0]),
        payload_bytes in prop::sample::select(vec![16usize, 48, 128]),
        warmup_ns in prop::sample::select(vec![None, Some(0u64), Some(700)]),
        measure_ns in prop::sample::select(vec![300u64, 2_000]),
        ber in prop::sample::select(vec![None, None, Some(1e-6)]),
        faults in fault_draws(),
        replan_ns in prop::sample::select(vec![0u64, 0, 1_000, 40_000]),
        seed in 0u64..1000,
    ) {
        let (toml, pairs) = fabric_file(gpus, switches, cabling);
        let t = Topology::from_toml(&toml).unwrap();
        let pattern = [Pattern::Uniform, Pattern::Permutation, Pattern::Neighbor, Pattern::Hotspot(0.5)][pattern];
        let spread = if links { Spread::Links } else { Spread::Flow };
        let mut spec = TrafficSpec::new(pattern, spread, load);
        spec.payload_bytes = payload_bytes;
        spec.warmup = warmup_ns.map(Duration::from_ns);
        spec.measure = Duration::from_ns(measure_ns);
        (spec.seed, spec.ber) = (seed, ber);
        spec.faults = fault_specs(&pairs, faults);
        if !spec.faults.is_empty() {
            spec.replan_delay = Duration::from_ns(replan_ns);
        }
        // Refused up front (GPUs no switch joins, say): nothing ran.
        let Ok(r) = run_traffic(&t, &spec) else {
            return Ok(());
        };
        let m = &r.measured;
        let what = format!(
            "{toml}\n{pattern:?} {spread:?} load {load} {payload_bytes} B warmup {warmup_ns:?} measure {measure_ns} \
             ns {ber:?} {:?} replan {replan_ns} ns seed {seed}: {m:?} {:?}",
            spec.faults, r.failover
        );
        // Nothing delivered twice, corrupted, out of order where flows keep one path, or lost while the
        // receiver has it; and no run stopped: traffic goes on where failures split the GPUs.
        prop_assert_eq!(&m.problem, &None, "{}", what);
        prop_assert!(m.delivered + m.lost + m.undelivered == m.generated, "{}", what);
        let happened = spec.faults.iter().filter(|f| f.at() <= r.simulated).count();
        prop_assert_eq!(happened + r.faults_after_end, spec.faults.len(), "{}", what);
        if trunk_failures(&t, &spec.faults, r.simulated) == 0 {
            // Drains and repairs alone lose nothing, and split no GPUs (the manager refuses a drain that
            // would).
            let f = &r.failover;
            prop_assert_eq!((m.lost, m.unroutable, f.packets_lost, f.jobs_split), (0, 0, 0, 0), "{}", what);
            prop_assert_eq!((f.links_failed, f.units_lost, f.packets_taken_back), (0, 0, 0), "{}", what);
        }
        if spec.faults.is_empty() {
            prop_assert!(m.verified, "{}", what);
            prop_assert!(m.generated > 0 || m.source_full > 0 || load < 0.1, "{}", what);
        }
        prop_assert_eq!(m.verified, m.lost + m.unroutable + m.undelivered == 0, "{}", what);
        let again = run_traffic(&t, &spec).unwrap();
        prop_assert_eq!(format!("{again:?}"), format!("{r:?}"), "{}", what);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The fabric manager's routes on larger random fabrics with trunks failed at random: they cannot
    /// deadlock (the channel dependency graph has no cycle), every pair of GPUs that live trunks through
    /// switches join has a route, one that reaches its GPU, and no other pair has one.
    #[test]
    fn random_fabrics_route_every_joined_pair_without_deadlock(
        gpus in 2usize..13,
        switches in 0usize..7,
        cabling in any::<u64>(),
        failed in prop::collection::vec(any::<prop::sample::Index>(), 0..5),
    ) {
        let (toml, _) = fabric_file(gpus, switches, cabling);
        let t = Topology::from_toml(&toml).unwrap();
        let whole = Fabric::plan(&t, &[]).unwrap();
        let mut failed: Vec<usize> = failed.iter().map(|i| i.index(whole.trunks.len())).collect();
        failed.sort_unstable();
        failed.dedup();
        let what = format!("{toml}\nfailed trunks {failed:?}");
        let fabric = whole.replan(&t, &failed).unwrap();
        prop_assert_eq!(fabric.dependencies().cycle, None, "{}", what);
        let mut live: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for trunk in (whole.trunks.iter().enumerate()).filter(|(i, _)| !failed.contains(i)).map(|(_, t)| t) {
            let (x, y) = (trunk.a.0, trunk.b.0);
            *live.entry((x.min(y), x.max(y))).or_default() += trunk.links;
        }
        for from in 0..gpus {
            for to in (0..gpus).filter(|&to| to != from) {
                let joined = joined(&t, &live, &[(from, to)]);
                let routed = fabric.unrouted(&[(from, to)]).is_none();
                prop_assert_eq!(routed, joined, "gpu {} to {}: {}", from, to, what);
                if routed {
                    let path = fabric.path(from, to);
                    prop_assert_eq!(path.and_then(|p| p.last().copied()), Some(fabric.gpus[to]), "{}", what);
                }
            }
        }
    }
}
