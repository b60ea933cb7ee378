//! Draining a switch (`--drain-switch`): the fabric manager routes around it while its links stay up,
//! waits until it and its links hold nothing, then takes its ports down, so that nothing is lost where a
//! failure of the same switch at the same time loses packets and stops the collective.

use fabric_sim::collective::Kind;
use fabric_sim::net::FailoverStats;
use fabric_sim::run::{run, Algo, FaultSpec, Report, Sweep};
use fabric_sim::topology::Topology;
use fabric_sim::traffic::{run_traffic, Pattern, Spread, TrafficSpec};
use link_phy::time::Duration;

fn sweep(topology: &str, algo: Algo, min: u64, max: u64) -> Sweep {
    Sweep {
        seed: 3,
        limit_per_size: Duration::from_ms(10),
        ..Sweep::new(
            Topology::builtin(topology).unwrap(),
            Kind::AllReduce,
            algo,
            min,
            max,
        )
    }
}

fn drain(switch: &str, at_ns: u64) -> FaultSpec {
    FaultSpec::Drain {
        switch: switch.into(),
        at: Duration::from_ns(at_ns),
    }
}

fn fail(switch: &str, at_ns: u64) -> FaultSpec {
    FaultSpec::Switch {
        switch: switch.into(),
        at: Duration::from_ns(at_ns),
    }
}

fn repair(switch: &str, at_ns: u64) -> FaultSpec {
    FaultSpec::SwitchRepair {
        switch: switch.into(),
        at: Duration::from_ns(at_ns),
    }
}

fn run_ok(s: &Sweep) -> Report {
    let r = run(s, &mut |_| {}).unwrap();
    assert!(
        r.verified && r.failure.is_none(),
        "{:?}: {:?} {:?} {:?}",
        s.faults,
        r.failure,
        r.failover,
        r.rows
    );
    r
}

/// Nothing lost, no trunk failed: what a drain leaves.
fn assert_lossless(f: &FailoverStats) {
    assert_eq!(
        (f.links_failed, f.units_lost, f.packets_taken_back, f.packets_lost),
        (0, 0, 0, 0),
        "{f:?}"
    );
}

/// One drain refused, that of `switch` at `at_us`, and said why.
fn assert_refused_once(f: &FailoverStats, refusals: &[String], switch: &str, at_us: &str) {
    assert_eq!(f.drains_refused, 1, "{f:?}");
    assert!(
        refusals.len() == 1
            && refusals[0].starts_with(&format!(
                "the fabric manager refused to drain {switch} at {at_us} us (it stays in service)"
            ))
            && refusals[0].contains("no route from"),
        "{refusals:?}"
    );
}

fn last_time_us(r: &Report) -> f64 {
    r.rows.last().map_or(f64::NAN, |row| row.time_us)
}

#[test]
fn a_drained_switch_lets_the_ring_complete_where_its_failure_stops_it() {
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 2 << 20);
    // A failure of nvswitch1 in the middle of the first size loses packets it had acknowledged.
    s.faults = vec![fail("nvswitch1", 1_000)];
    let failed = run(&s, &mut |_| {}).unwrap();
    assert!(
        !failed.verified && failed.failover.packets_lost > 0,
        "{:?}",
        failed.failover
    );
    // Drained at the same instant, it empties and goes down with nothing lost.
    s.faults = vec![drain("nvswitch1", 1_000)];
    let drained = run_ok(&s);
    let f = drained.failover;
    assert_lossless(&f);
    assert_eq!(
        (f.drains, f.switches_drained, f.switches_draining),
        (1, 1, 0),
        "{f:?}"
    );
    // The last size runs on three of the four switch planes, as when the switch is down from the start.
    s.faults = vec![fail("nvswitch1", 0)];
    let three_planes = last_time_us(&run_ok(&s));
    s.faults.clear();
    let healthy = last_time_us(&run_ok(&s));
    let drained = last_time_us(&drained);
    assert!(
        (drained - three_planes).abs() < 0.03 * three_planes && drained > 1.15 * healthy,
        "drained {drained} us, three planes {three_planes} us, healthy {healthy} us"
    );
}

#[test]
fn a_drain_while_the_links_train_and_with_bit_errors_loses_nothing() {
    for (at, ber) in [(0, None), (1_500, Some(1e-6))] {
        let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 1 << 20);
        s.ber = ber;
        s.faults = vec![drain("nvswitch2", at)];
        let f = run_ok(&s).failover;
        assert_lossless(&f);
        assert_eq!(f.switches_drained, 1, "{at} {ber:?}: {f:?}");
    }
}

#[test]
fn a_drain_and_a_failure_of_the_same_switch() {
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 1 << 20);
    // Failing once drained, it has nothing left to fail.
    s.faults = vec![drain("nvswitch1", 1_000), fail("nvswitch1", 4_000)];
    let f = run_ok(&s).failover;
    assert_lossless(&f);
    assert_eq!((f.switches_drained, f.faults_without_effect), (1, 8), "{f:?}");
    // Draining a failed switch does nothing.
    s.faults = vec![fail("nvswitch1", 0), drain("nvswitch1", 1_000)];
    let f = run_ok(&s).failover;
    assert_eq!(
        (f.links_failed, f.switches_drained, f.drains_already_down),
        (8, 0, 1),
        "{f:?}"
    );
    assert_eq!(f.faults_without_effect, 0, "{f:?}");
    // Failing before the routes around it are in, it loses what it holds, as any failure: the drain is
    // over, with nothing to take down.
    s.replan_delay = Duration::from_ns(3_000);
    s.faults = vec![drain("nvswitch1", 1_000), fail("nvswitch1", 2_000)];
    let r = run(&s, &mut |_| {}).unwrap();
    let why = r.failure.unwrap_or_default();
    assert!(why.contains("nvswitch1 holds a packet"), "{why}");
    assert_eq!(
        (r.failover.switches_drained, r.failover.switches_draining),
        (0, 0),
        "{:?}",
        r.failover
    );
}

#[test]
fn two_drains_go_on_and_the_drain_of_the_last_plane_is_refused() {
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 1 << 20);
    s.faults = vec![drain("nvswitch1", 1_000), drain("nvswitch3", 1_500)];
    let f = run_ok(&s).failover;
    assert_lossless(&f);
    assert_eq!(f.switches_drained, 2, "{f:?}");
    // Draining the same switch twice: the second finds it draining, or once it is out of service, down
    // (it was counted as a fault whose link was already down, either way).
    s.faults = vec![drain("nvswitch1", 1_000), drain("nvswitch1", 1_000)];
    let f = run_ok(&s).failover;
    assert_eq!(
        (
            f.switches_drained,
            f.drains_already_draining,
            f.drains_already_down
        ),
        (1, 1, 0),
        "{f:?}"
    );
    assert_eq!(f.faults_without_effect, 0, "{f:?}");
    s.faults = vec![drain("nvswitch1", 1_000), drain("nvswitch1", 4_000)];
    let f = run_ok(&s).failover;
    assert_eq!(
        (
            f.switches_drained,
            f.drains_already_draining,
            f.drains_already_down
        ),
        (1, 0, 1),
        "{f:?}"
    );
    assert_eq!(f.faults_without_effect, 0, "{f:?}");
    // The fabric manager cannot route around all four: it drains three and refuses the last, the only
    // path left between the GPUs, which stays in service and carries the collective to the end.
    s.faults = ["nvswitch0", "nvswitch1", "nvswitch2", "nvswitch3"]
        .map(|x| drain(x, 1_000))
        .to_vec();
    let r = run_ok(&s);
    assert_lossless(&r.failover);
    assert_eq!(r.failover.switches_drained, 3, "{:?}", r.failover);
    assert_refused_once(&r.failover, &r.drain_refusals, "nvswitch3", "1.000");
}

/// The manager refuses a drain that would cut a job with the links down as they are: whatever the job
/// (synthetic traffic could go on split, but a maintenance drain must not split it), and counting the
/// failures so far.
#[test]
fn a_drain_is_refused_where_with_the_failures_so_far_it_would_cut_a_job() {
    let t = Topology::builtin("dgx-h100").unwrap();
    let spec = |faults| TrafficSpec {
        faults,
        ..TrafficSpec::new(Pattern::Uniform, Spread::Links, 0.5)
    };
    let every_plane = ["nvswitch0", "nvswitch1", "nvswitch2", "nvswitch3"].map(|x| drain(x, 2_000));
    let r = run_traffic(&t, &spec(every_plane.to_vec())).unwrap();
    assert!(r.measured.verified, "{:?}", r.measured.problem);
    assert_eq!(r.measured.generated, r.measured.delivered);
    assert_lossless(&r.failover);
    assert_eq!(
        (r.failover.switches_drained, r.failover.jobs_split),
        (3, 0),
        "{:?}",
        r.failover
    );
    assert_refused_once(&r.failover, &r.drain_refusals, "nvswitch3", "2.000");
    // Three switches failed before the collective: the fourth is the only path, and stays in service.
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 1 << 20);
    s.faults = ["nvswitch0", "nvswitch1", "nvswitch2"]
        .map(|x| fail(x, 0))
        .to_vec();
    s.faults.push(drain("nvswitch3", 1_000));
    let r = run_ok(&s);
    assert_eq!(r.failover.switches_drained, 0, "{:?}", r.failover);
    assert_refused_once(&r.failover, &r.drain_refusals, "nvswitch3", "1.000");
}

#[test]
fn a_repair_brings_a_drained_switch_back_or_calls_its_drain_off() {
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 2 << 20);
    let healthy = last_time_us(&run_ok(&s));
    s.replan_delay = Duration::from_ns(500);
    s.faults = vec![drain("nvswitch1", 1_000), repair("nvswitch1", 5_000)];
    let r = run_ok(&s);
    let f = r.failover;
    assert_lossless(&f);
    assert_eq!((f.switches_drained, f.links_repaired), (1, 8), "{f:?}");
    let repaired = last_time_us(&r);
    assert!(
        (repaired - healthy).abs() < 0.02 * healthy,
        "{repaired} us against {healthy} us healthy"
    );
    // Repaired before the routes around it are in: it stays in service.
    s.faults = vec![drain("nvswitch1", 1_000), repair("nvswitch1", 1_200)];
    let f = run_ok(&s).failover;
    assert_lossless(&f);
    assert_eq!(
        (f.switches_drained, f.switches_draining, f.links_repaired),
        (0, 0, 8),
        "{f:?}"
    );
}

#[test]
fn a_drained_switch_takes_its_reduction_engine_offline() {
    let mut s = sweep("dgx-h100", Algo::SwitchReduce, 1 << 20, 1 << 20);
    s.faults = vec![drain("nvswitch1", 1_000)];
    let f = run_ok(&s).failover;
    assert_lossless(&f);
    assert_eq!((f.switches_drained, f.engines_offline), (1, 1), "{f:?}");
}

/// A drain takes the switch's engine offline while some of its sums are on their way; the GPUs have them
/// done again on the other planes, so the size completes before they all arrive. The next size waits for
/// them: it reuses their headers, and met there a sum of the size before fails its verification (as
/// the 512 KiB size here did).
#[test]
fn what_a_drained_engine_sent_arrives_before_the_next_size() {
    let mut s = sweep("dgx-h100", Algo::SwitchReduce, 256 << 10, 1 << 20);
    s.faults = vec![drain("nvswitch1", 2_000)];
    let f = run_ok(&s).failover;
    assert_lossless(&f);
    assert_eq!((f.switches_drained, f.engines_offline), (1, 1), "{f:?}");
}

#[test]
fn a_drained_spine_of_a_fat_tree() {
    let mut s = sweep("fat-tree-64", Algo::Ring, 256 << 10, 256 << 10);
    s.faults = vec![drain("spine0", 2_000)];
    let f = run_ok(&s).failover;
    assert_lossless(&f);
    assert_eq!(f.switches_drained, 1, "{f:?}");
}

#[test]
fn synthetic_traffic_through_a_drained_switch_is_all_delivered() {
    let spec = |faults| TrafficSpec {
        faults,
        ..TrafficSpec::new(Pattern::Uniform, Spread::Links, 0.5)
    };
    let t = Topology::builtin("dgx-h100").unwrap();
    let failed = run_traffic(&t, &spec(vec![fail("nvswitch1", 2_000)])).unwrap();
    assert!(failed.failover.packets_lost > 0, "{:?}", failed.failover);
    let r = run_traffic(&t, &spec(vec![drain("nvswitch1", 2_000)])).unwrap();
    assert!(r.measured.verified, "{:?}", r.measured.problem);
    assert_eq!(r.measured.generated, r.measured.delivered);
    assert_lossless(&r.failover);
    assert_eq!(r.failover.switches_drained, 1, "{:?}", r.failover);
}

#[test]
fn a_drain_of_what_is_not_a_switch_is_refused_naming_the_option() {
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 1 << 20);
    s.faults = vec![drain("gpu0", 0)];
    let e = run(&s, &mut |_| {}).unwrap_err();
    assert!(
        e.contains("--drain-switch") && e.contains("gpu0 is not a switch"),
        "{e}"
    );
}

#[test]
fn a_switch_drained_in_the_replan_for_its_failed_port_routes_around_that_port() {
    // The port fails while the links train; the drain comes before the fabric manager's routes for the
    // failure, so one replan is for both. The drained switch must not keep the routes through its dead
    // port: what it holds for gpu3 would wait there for routes that never come.
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 1 << 20);
    s.replan_delay = Duration::from_ns(1_000);
    s.faults = vec![
        FaultSpec::Port {
            switch: "nvswitch1".into(),
            peer: "gpu3".into(),
            at: Duration::ZERO,
        },
        drain("nvswitch1", 500),
    ];
    let f = run_ok(&s).failover;
    assert_eq!(
        (f.links_failed, f.switches_drained, f.packets_lost),
        (1, 1, 0),
        "{f:?}"
    );
}

#[test]
fn a_repair_during_a_drain_also_brings_back_the_links_its_trunk_lost() {
    // gpu0's trunk to nvswitch1 loses one of its 4 links, then the switch is drained, then repaired
    // before the routes around it are in: it stays in service, and gpu0's trunk has all 4 links again,
    // so that the last size runs as on the whole fabric.
    let mut s = sweep("dgx-h100", Algo::Ring, 1 << 20, 4 << 20);
    let healthy = last_time_us(&run_ok(&s));
    s.replan_delay = Duration::from_ns(1_000);
    s.faults = vec![FaultSpec::OneLink {
        a: "gpu0".into(),
        b: "nvswitch1".into(),
        at: Duration::from_ns(500),
    }];
    let degraded = last_time_us(&run_ok(&s));
    s.faults
        .extend([drain("nvswitch1", 1_000), repair("nvswitch1", 1_200)]);
    let r = run_ok(&s);
    let f = r.failover;
    assert_eq!(
        (
            f.links_degraded,
            f.links_repaired,
            f.switches_drained,
            f.switches_draining
        ),
        (1, 8, 0, 0),
        "{f:?}"
    );
    let repaired = last_time_us(&r);
    assert!(
        (repaired - healthy).abs() < 0.01 * healthy && degraded > 1.02 * healthy,
        "{repaired} us against {healthy} us healthy, {degraded} us degraded"
    );
}
