//! Synthetic traffic beside a collective: both are delivered and checked, each slows the other, and a
//! failure in the middle loses neither's packets (the stragglers drained after each size included).

use fabric_sim::collective::Kind;
use fabric_sim::run::{run, Algo, FaultSpec, Report, Sweep};
use fabric_sim::topology::Topology;
use fabric_sim::traffic::{Background, Pattern, Spread, PAYLOAD_BYTES};
use link_phy::time::Duration;

fn sweep(algo: Algo, background: Option<Background>) -> Sweep {
    let topology = Topology::builtin("dgx-h100").unwrap();
    Sweep {
        seed: 5,
        limit_per_size: Duration::from_ms(10),
        background,
        ..Sweep::new(topology, Kind::AllReduce, algo, 256 << 10, 4 << 20)
    }
}

fn uniform(load: f64, spread: Spread) -> Option<Background> {
    Some(Background {
        pattern: Pattern::Uniform,
        spread,
        load,
        payload_bytes: PAYLOAD_BYTES,
        gpus: None,
    })
}

/// Every pattern, for the random tests to pick from.
const PATTERNS: [Pattern; 4] = [
    Pattern::Uniform,
    Pattern::Permutation,
    Pattern::Neighbor,
    Pattern::Hotspot(0.2),
];

fn run_ok(s: &Sweep) -> Report {
    let r = run(s, &mut |_| {}).unwrap();
    assert!(r.verified, "{:?} {:?} {:?}", r.failure, r.background, r.rows);
    r
}

/// The collective completed every size with its data verified, whatever became of the traffic beside it.
fn assert_collective_ok(r: &Report) {
    assert_eq!(r.failure, None);
    assert!(
        r.rows.iter().all(|row| row.wrong == 0 && row.busbw > 0.0),
        "{:?}",
        r.rows
    );
}

#[test]
fn traffic_beside_a_collective_is_all_delivered_and_slows_it() {
    for algo in [Algo::Ring, Algo::SwitchReduce] {
        let alone = run_ok(&sweep(algo, None));
        let beside = run_ok(&sweep(algo, uniform(0.3, Spread::Links)));
        let b = beside.background.clone().expect("a background report");
        assert!(b.measured.verified && b.measured.problem.is_none());
        assert!(
            b.measured.generated > 10_000 && b.measured.delivered == b.measured.generated,
            "{b:?}"
        );
        // At 0.3 of the links the fabric takes all of it, beside the collective.
        assert!(
            (b.measured.accepted_gbps - b.measured.offered_gbps).abs() < 0.05 * b.measured.offered_gbps,
            "{b:?}"
        );
        assert!(b.measured.latency.packets > 0 && b.measured.latency.p99_ns >= b.measured.latency.p50_ns);
        // The rows count the collective's own packets, the same as alone; the total adds the traffic's.
        for (a, x) in alone.rows.iter().zip(&beside.rows) {
            assert_eq!(a.packets, x.packets, "{algo:?} at {} B", a.bytes);
        }
        let rows: u64 = beside.rows.iter().map(|r| r.packets).sum();
        assert_eq!(beside.packets, rows + b.measured.delivered);
        // Sharing the links costs the collective bandwidth at the largest size.
        let (slow, fast) = (
            beside.rows.last().unwrap().busbw,
            alone.rows.last().unwrap().busbw,
        );
        assert!(
            slow < 0.9 * fast,
            "{algo:?}: {slow} beside traffic against {fast} alone"
        );
    }
}

#[test]
fn traffic_and_collective_lose_nothing_to_a_failure_mid_sweep() {
    for spread in [Spread::Links, Spread::Flow] {
        let mut s = sweep(Algo::Ring, uniform(0.2, spread));
        s.faults = vec![FaultSpec::Link {
            a: "gpu0".into(),
            b: "nvswitch1".into(),
            at: Duration::from_us(15),
        }];
        s.replan_delay = Duration::from_us(2);
        let r = run_ok(&s);
        let b = r.background.unwrap();
        assert_eq!(b.measured.delivered, b.measured.generated);
        assert_eq!(r.failover.links_failed, 1);
    }
}

#[test]
fn a_background_load_out_of_range_is_refused() {
    for load in [0.0, 1.5, f64::NAN] {
        let e = run(&sweep(Algo::Ring, uniform(load, Spread::Links)), &mut |_| {}).unwrap_err();
        assert!(e.contains("offered load"), "{e}");
    }
}

#[test]
fn a_failure_just_after_a_size_ends_duplicates_no_traffic_packet() {
    // The size boundary forgets the collective's headers, not the traffic's: a traffic packet
    // delivered before the failure and handed back by it is still caught (found by review: "repeated").
    let mut s = sweep(Algo::Ring, uniform(0.3, Spread::Links));
    s.min = 64 << 10;
    s.max = 1 << 20;
    s.seed = 1;
    s.faults = vec![FaultSpec::Link {
        a: "gpu3".into(),
        b: "nvswitch1".into(),
        at: Duration::from_ns(3_443),
    }];
    let r = run_ok(&s);
    assert!(r.failover.duplicates_dropped > 0, "{:?}", r.failover);
}

#[test]
fn traffic_beside_collectives_survives_failures_at_random_times_with_random_replan_delays() {
    use rand_core::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(26);
    let algos = [
        (Kind::AllReduce, Algo::Ring),
        (Kind::AllReduce, Algo::Tree),
        (Kind::AllReduce, Algo::SwitchReduce),
        (Kind::AllToAll, Algo::P2p),
        (Kind::AllGather, Algo::Ring),
    ];
    for _ in 0..8 {
        let (kind, algo) = algos[rng.next_u64() as usize % algos.len()];
        let mut s = sweep(
            algo,
            uniform(0.05 + 0.05 * (rng.next_u64() % 6) as f64, Spread::Links),
        );
        s.kind = kind;
        s.min = 64 << 10;
        s.max = 512 << 10;
        if let Some(b) = s.background.as_mut() {
            b.pattern = PATTERNS[rng.next_u64() as usize % PATTERNS.len()];
        }
        let (gpu, switch) = (rng.next_u64() % 8, rng.next_u64() % 4);
        let at = Duration::from_ns(1_000 + rng.next_u64() % 15_000);
        s.faults = vec![if rng.next_u64() % 3 == 0 {
            FaultSpec::Port {
                switch: format!("nvswitch{switch}"),
                peer: format!("gpu{gpu}"),
                at,
            }
        } else {
            FaultSpec::Link {
                a: format!("gpu{gpu}"),
                b: format!("nvswitch{switch}"),
                at,
            }
        }];
        s.replan_delay = Duration::from_ns([0, 500, 5_000, 20_000][rng.next_u64() as usize % 4]);
        let r = run_ok(&s);
        let b = r.background.unwrap();
        assert_eq!(
            b.measured.delivered, b.measured.generated,
            "{:?} {:?}",
            s.faults, s.replan_delay
        );
    }
}

/// `algo` on the GPUs `collective` of `topology` beside uniform traffic at `load` on the GPUs `traffic`
/// (node indices), as two jobs sharing the fabric; and the collective alone on its GPUs.
fn two_jobs(
    topology: &str,
    algo: Algo,
    collective: &[usize],
    traffic: &[usize],
    load: f64,
) -> (Sweep, Sweep) {
    let whole = Topology::builtin(topology).unwrap();
    let mut alone = sweep(algo, None);
    alone.topology = whole.with_gpus(collective).unwrap();
    alone.min = 128 << 10;
    alone.max = 512 << 10;
    if algo == Algo::P2p {
        alone.kind = Kind::AllToAll;
    }
    let (shared, numbers) = whole.with_jobs(collective, traffic).unwrap();
    let mut beside = alone.clone();
    beside.topology = shared;
    beside.collective_gpus = Some(collective.len());
    beside.background = uniform(load, Spread::Links).map(|b| Background {
        gpus: Some(numbers),
        ..b
    });
    (beside, alone)
}

fn times(r: &Report) -> Vec<f64> {
    r.rows.iter().map(|row| row.time_us).collect()
}

#[test]
fn two_jobs_on_separate_gpus_of_a_crossbar_do_not_slow_each_other() {
    // Through non-blocking NVSwitches two jobs on disjoint GPUs share no link: the collective runs
    // exactly as it does alone, and the traffic gets all it offers.
    for algo in [Algo::Ring, Algo::Tree, Algo::P2p] {
        let (beside, alone) = two_jobs("dgx-h100", algo, &[0, 1, 2, 3], &[4, 5, 6, 7], 0.5);
        let (with, without) = (run_ok(&beside), run_ok(&alone));
        assert_eq!(times(&with), times(&without), "{algo:?}");
        assert_eq!(with.gpus, 4);
        let b = with.background.unwrap();
        assert_eq!(b.measured.delivered, b.measured.generated);
        assert!(b.measured.generated > 10_000, "{b:?}");
        // Accepted counts from the sweep's start, link bring-up included: a short sweep loses a little.
        assert!(
            (b.measured.accepted_gbps - b.measured.offered_gbps).abs() < 0.1 * b.measured.offered_gbps,
            "{b:?}"
        );
    }
}

/// fat-tree-32's GPUs (node indices) in two jobs that share every leaf: one node of each leaf, and the
/// other.
fn a_node_of_each_leaf() -> (Vec<usize>, Vec<usize>) {
    ((0..8).chain(16..24).collect(), (8..16).chain(24..32).collect())
}

#[test]
fn two_jobs_on_a_fat_tree_meet_where_their_placement_shares_links() {
    // fat-tree-32: two leaves of two 8-GPU nodes. Each job on a leaf of its own shares no link with
    // the other; each job on one node of each leaf shares the leaves' links to the spines.
    let (leaf0, leaf1): (Vec<usize>, Vec<usize>) = ((0..16).collect(), (16..32).collect());
    let (beside, alone) = two_jobs("fat-tree-32", Algo::Ring, &leaf0, &leaf1, 0.1);
    let (with, without) = (run_ok(&beside), run_ok(&alone));
    assert_eq!(times(&with), times(&without));
    let (node_of_each, other_nodes) = a_node_of_each_leaf();
    let (beside, alone) = two_jobs("fat-tree-32", Algo::Ring, &node_of_each, &other_nodes, 0.1);
    let (with, without) = (run_ok(&beside), run_ok(&alone));
    let (slow, fast) = (
        with.rows.last().unwrap().busbw,
        without.rows.last().unwrap().busbw,
    );
    assert!(
        slow < 0.8 * fast,
        "{slow} beside the other job against {fast} alone"
    );
    let b = with.background.unwrap();
    assert_eq!(b.measured.delivered, b.measured.generated);
}

#[test]
fn two_jobs_lose_nothing_to_a_shared_link_failing() {
    let (node_of_each, other_nodes) = a_node_of_each_leaf();
    for algo in [Algo::Ring, Algo::Tree] {
        let (mut s, _) = two_jobs("fat-tree-32", algo, &node_of_each, &other_nodes, 0.1);
        s.faults = vec![FaultSpec::Link {
            a: "leaf0".into(),
            b: "spine0".into(),
            at: Duration::from_us(4),
        }];
        s.replan_delay = Duration::from_us(1);
        let r = run_ok(&s);
        assert_eq!(r.failover.links_failed, 1, "{algo:?}");
        let b = r.background.unwrap();
        assert_eq!(b.measured.delivered, b.measured.generated, "{algo:?}");
    }
}

/// Every trunk between fat-tree-32's leaf0 and its 16 spines, failing at `at`: the GPUs of the first
/// leaf's two nodes (gpu0 to gpu15) are cut from the others.
fn cut_leaf0(at: Duration) -> Vec<FaultSpec> {
    (0..16)
        .map(|k| FaultSpec::Link {
            a: "leaf0".into(),
            b: format!("spine{k}"),
            at,
        })
        .collect()
}

#[test]
fn a_failure_that_cuts_the_fabric_between_two_jobs_stops_neither() {
    let (leaf0, leaf1): (Vec<usize>, Vec<usize>) = ((0..16).collect(), (16..32).collect());
    for algo in [Algo::Ring, Algo::Tree] {
        let (mut s, _) = two_jobs("fat-tree-32", algo, &leaf0, &leaf1, 0.1);
        s.faults = cut_leaf0(Duration::from_us(4));
        s.replan_delay = Duration::from_us(1);
        let r = run_ok(&s);
        assert_eq!(r.failover.links_failed, 16, "{algo:?}");
        let b = r.background.unwrap();
        assert_eq!(b.measured.delivered, b.measured.generated, "{algo:?}");
    }
    // A job across the cut cannot go on: the run stops, and says why.
    let (node_of_each, other_nodes) = a_node_of_each_leaf();
    let (mut s, _) = two_jobs("fat-tree-32", Algo::Ring, &node_of_each, &other_nodes, 0.1);
    s.faults = cut_leaf0(Duration::from_us(4));
    let r = run(&s, &mut |_| {}).unwrap();
    let why = r.failure.unwrap_or_default();
    assert!(!r.verified && why.contains("no route from gpu"), "{why}");
}

#[test]
fn a_failure_that_cuts_the_background_traffic_in_two_fails_only_the_traffic() {
    // The collective on a node of leaf1, the traffic on a node of each leaf: the cut splits the traffic.
    let collective: Vec<usize> = (16..24).collect();
    let traffic: Vec<usize> = (0..8).chain(24..32).collect();
    let (mut s, _) = two_jobs("fat-tree-32", Algo::Ring, &collective, &traffic, 0.1);
    s.faults = cut_leaf0(Duration::from_us(4));
    s.replan_delay = Duration::from_us(1);
    let r = run(&s, &mut |_| {}).unwrap();
    assert_collective_ok(&r);
    assert_eq!(r.failover.jobs_split, 1);
    // The traffic went on between the GPUs still joined: what it sent across the cut is lost, and
    // what it would have sent there afterwards not generated. Each packet counted once.
    let m = r.background.unwrap().measured;
    assert!(!r.verified && m.problem.is_none(), "{m:?}");
    assert!(
        m.lost > 0 && m.unroutable > 0 && m.delivered + m.lost == m.generated,
        "{m:?}"
    );
    assert!(m
        .loss()
        .is_some_and(|l| l.contains("not generated: failures split the GPUs")));
}

#[test]
fn a_gpu_a_failure_cuts_off_loses_what_it_queued_and_generates_nothing_more() {
    // a0's only link fails, or L0's port to it: the traffic goes on among a1-a3; what a0 had queued is
    // lost, and all it is born to send afterwards, and all the others are born to send it, has no route.
    let at = Duration::from_us(3);
    let (link, port) = (
        FaultSpec::Link {
            a: "a0".into(),
            b: "L0".into(),
            at,
        },
        FaultSpec::Port {
            switch: "L0".into(),
            peer: "a0".into(),
            at,
        },
    );
    for fault in [link, port] {
        let (_, mut cut) = stranding(&[4, 5], &[0, 1, 2, 3]);
        cut.faults = vec![fault.clone()];
        let r = run(&cut, &mut |_| {}).unwrap();
        assert_collective_ok(&r);
        assert_eq!(r.failover.jobs_split, 1, "{fault:?}");
        let m = r.background.unwrap().measured;
        assert!(
            m.problem.is_none() && m.lost > 0 && m.unroutable > 0,
            "{fault:?}: {m:?}"
        );
        assert_eq!(m.delivered + m.lost, m.generated, "{fault:?}");
    }
}

/// Leaves L0 (a0, a1) and L1 (a2, a3) joined through spines S0 and S1; leaf L2 (b0) only through S0,
/// which b1 hangs from: the root, which carries packets between the leaves, its trunk to L1 slow (a file
/// `linkctl`'s tests use too).
const STRANDED: &str = include_str!("topologies/strand.toml");

/// A 1 MiB ring all-reduce on the GPUs `collective` of [`STRANDED`], with uniform traffic at 0.3 on
/// the GPUs `traffic`, and the sweep with S0 cut from L0 and L1 at 2 us: S0 is left in b0 and b1's part,
/// holding packets between a0-a3 that it can neither deliver nor return. Of those its partners had not
/// had acknowledged, they send a copy again another way: only the others are lost.
fn stranding(collective: &[usize], traffic: &[usize]) -> (Sweep, Sweep) {
    stranding_on(STRANDED, collective, traffic)
}

/// [`stranding`] on the topology `toml`.
fn stranding_on(toml: &str, collective: &[usize], traffic: &[usize]) -> (Sweep, Sweep) {
    let topology = Topology::from_toml(toml).unwrap();
    let (shared, numbers) = topology.with_jobs(collective, traffic).unwrap();
    let mut s = sweep(Algo::Ring, uniform(0.3, Spread::Links));
    s.topology = shared;
    s.collective_gpus = Some(collective.len());
    s.min = 1 << 20;
    s.max = 1 << 20;
    if let Some(b) = s.background.as_mut() {
        b.gpus = Some(numbers);
    }
    let mut cut = s.clone();
    cut.faults = ["L0", "L1"]
        .map(|leaf| FaultSpec::Link {
            a: leaf.into(),
            b: "S0".into(),
            at: Duration::from_us(2),
        })
        .to_vec();
    (s, cut)
}

#[test]
fn packets_a_failure_strands_in_the_other_jobs_part_stop_the_run_and_it_says_where() {
    // The collective's packets: it cannot complete without them.
    let (alone, cut) = stranding(&[0, 1, 2, 3], &[4, 5]);
    assert_eq!(run_ok(&alone).failure, None);
    let r = run(&cut, &mut |_| {}).unwrap();
    let why = r.failure.unwrap_or_default();
    assert!(
        !r.verified
            && r.failover.packets_lost > 0
            && why.starts_with("S0 holds a packet from a")
            && why.contains("neither deliver nor return"),
        "{why}"
    );
}

#[test]
fn the_other_jobs_traffic_goes_on_without_the_packets_a_failure_strands() {
    // The traffic's packets: the collective completes, verified, and the traffic counts its losses,
    // each packet delivered or lost exactly once.
    let (alone, cut) = stranding(&[4, 5], &[0, 1, 2, 3]);
    assert_eq!(run_ok(&alone).failure, None);
    let r = run(&cut, &mut |_| {}).unwrap();
    assert_collective_ok(&r);
    let m = r.background.unwrap().measured;
    assert!(!r.verified && !m.verified && m.problem.is_none(), "{m:?}");
    assert!(
        m.lost > 0 && m.lost == r.failover.packets_lost,
        "{m:?} {:?}",
        r.failover
    );
    assert_eq!(m.delivered + m.lost, m.generated);
    assert!(m
        .loss()
        .is_some_and(|l| l.starts_with(&format!("{} of {} packets lost", m.lost, m.generated))));
}

#[test]
fn a_stranded_packet_whose_copy_goes_another_way_is_not_lost() {
    // With S0's trunk to L1 as fast as the others, S0 holds only packets that its partners had not had
    // acknowledged when the trunks failed: they send their copies another way, and nothing is lost.
    let fast = STRANDED.replace("gbps = 5.0", "gbps = 25.0");
    let (_, cut) = stranding_on(&fast, &[4, 5], &[0, 1, 2, 3]);
    let r = run_ok(&cut);
    let m = r.background.unwrap().measured;
    assert_eq!((m.lost, m.delivered), (0, m.generated));
    // The copies S0 could not send on are dropped as duplicates.
    assert!(
        r.failover.duplicates_dropped > 0 && r.failover.packets_lost == 0,
        "{:?}",
        r.failover
    );
}

#[test]
fn the_other_jobs_load_counts_only_links_its_traffic_can_use() {
    // On mesh4 every GPU links to every other: gpu2's links to gpu0 and gpu1 carry none of the traffic
    // between gpu2 and gpu3, so its load is a share of the links between those two, as on them alone.
    let (beside, _) = two_jobs("mesh4", Algo::Ring, &[0, 1], &[2, 3], 0.3);
    let b = run_ok(&beside).background.unwrap();
    let t = Topology::builtin("mesh4").unwrap();
    let (g2, g3) = (t.node_named("gpu2").unwrap(), t.node_named("gpu3").unwrap());
    let between: f64 = t
        .links
        .iter()
        .filter(|l| (l.a, l.b) == (g2, g3) || (l.a, l.b) == (g3, g2))
        .map(|l| l.gbps)
        .sum();
    // 128 bytes of data in a header and eight data flits (mesh4 has no address-extension flit).
    let expected = 0.3 * between * 128.0 / 144.0;
    assert!(
        (b.measured.offered_gbps - expected).abs() < 1e-9,
        "{} against {expected}",
        b.measured.offered_gbps
    );
}

#[test]
fn a_collective_on_some_gpus_needs_traffic_on_the_others_and_no_switch_engines() {
    let (mut s, _) = two_jobs("dgx-h100", Algo::Ring, &[0, 1, 2, 3], &[4, 5, 6, 7], 0.1);
    s.algo = Algo::SwitchReduce;
    let e = run(&s, &mut |_| {}).unwrap_err();
    assert!(e.contains("switch-reduce runs on every GPU"), "{e}");
    s.algo = Algo::Ring;
    s.background = None;
    let e = run(&s, &mut |_| {}).unwrap_err();
    assert!(e.contains("background traffic on GPUs of its own"), "{e}");
    let (mut s, _) = two_jobs("dgx-h100", Algo::Ring, &[0, 1, 2, 3], &[4, 5, 6, 7], 0.1);
    if let Some(b) = s.background.as_mut() {
        b.gpus = Some(vec![5, 4, 5]);
    }
    let e = run(&s, &mut |_| {}).unwrap_err();
    assert!(e.contains("each named once"), "{e}");
    // More GPUs than the fabric has.
    s.collective_gpus = Some(9);
    let e = run(&s, &mut |_| {}).unwrap_err();
    assert!(e.contains("2 to the fabric's 8 GPUs"), "{e}");
}

#[test]
fn two_jobs_placed_at_random_with_failures_lose_nothing() {
    use rand_core::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(27);
    for case in 0..8 {
        let (topology, gpus) = if case % 2 == 0 {
            ("dgx-h100", 8)
        } else {
            ("fat-tree-32", 32)
        };
        // Two random sets of GPUs (node indices: GPUs come first in both), overlapping or not.
        let pick = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| -> Vec<usize> {
            let mut set: Vec<usize> = (0..gpus).filter(|_| rng.next_u64() % 3 == 0).collect();
            while set.len() < 2 {
                let g = (rng.next_u64() % gpus as u64) as usize;
                if !set.contains(&g) {
                    set.push(g);
                }
            }
            set.sort_unstable();
            set
        };
        let (collective, traffic) = (pick(&mut rng), pick(&mut rng));
        let algo = [Algo::Ring, Algo::Tree, Algo::P2p][rng.next_u64() as usize % 3];
        let load = 0.05 + 0.05 * (rng.next_u64() % 4) as f64;
        let (mut s, _) = two_jobs(topology, algo, &collective, &traffic, load);
        s.min = 64 << 10;
        s.max = 128 << 10;
        if let Some(b) = s.background.as_mut() {
            b.pattern = PATTERNS[rng.next_u64() as usize % PATTERNS.len()];
        }
        let at = Duration::from_ns(500 + rng.next_u64() % 5_000);
        s.faults = vec![if topology == "dgx-h100" {
            let gpu = collective[rng.next_u64() as usize % collective.len()];
            FaultSpec::Link {
                a: format!("gpu{gpu}"),
                b: format!("nvswitch{}", rng.next_u64() % 4),
                at,
            }
        } else {
            FaultSpec::Link {
                a: format!("leaf{}", rng.next_u64() % 2),
                b: format!("spine{}", rng.next_u64() % 16),
                at,
            }
        }];
        s.replan_delay = Duration::from_ns([0, 500, 3_000][rng.next_u64() as usize % 3]);
        let r = run_ok(&s);
        let b = r.background.unwrap();
        assert_eq!(
            b.measured.delivered, b.measured.generated,
            "{topology} {collective:?} {traffic:?} {:?}",
            s.faults
        );
    }
}

#[test]
fn the_progress_counts_the_collectives_packets_not_the_backgrounds() {
    // One size, with background traffic at most of the links' rate: its packets had moved the bar as
    // the collective's, near the end of the size as soon as it started.
    let s = Sweep {
        background: uniform(0.9, Spread::Links),
        ..Sweep::new(
            Topology::builtin("mesh4").unwrap(),
            Kind::AllReduce,
            Algo::Ring,
            8 << 20,
            8 << 20,
        )
    };
    let mut fractions = Vec::new();
    let r = run(&s, &mut |p| {
        if p.sizes_done == 0 {
            fractions.push(p.fraction);
        }
    })
    .unwrap();
    assert!(r.verified);
    assert!(fractions.len() >= 3, "{fractions:?}");
    // The collective's packets arrive at a steady pace: halfway through the ticks, about half done.
    let middle = fractions[fractions.len() / 2];
    assert!((0.25..0.75).contains(&middle), "{fractions:?}");
}
