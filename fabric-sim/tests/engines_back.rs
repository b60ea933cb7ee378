//! A repair brings a switch's collective engine back: once the fabric manager's routes are in with every
//! port of the switch to a GPU up again, the engine that a failure or a drain took offline sums again,
//! and `switch-reduce` runs on every plane from the next size on, at the whole fabric's bandwidth.

use fabric_sim::collective::Kind;
use fabric_sim::run::{run, Algo, FaultSpec, Report, Sweep};
use fabric_sim::topology::Topology;
use link_phy::time::Duration;

fn sweep(min: u64, max: u64, faults: Vec<FaultSpec>) -> Sweep {
    Sweep {
        seed: 5,
        limit_per_size: Duration::from_ms(10),
        faults,
        ..Sweep::new(
            Topology::builtin("dgx-h100").unwrap(),
            Kind::AllReduce,
            Algo::SwitchReduce,
            min,
            max,
        )
    }
}

fn fail_link(at_ns: u64) -> FaultSpec {
    FaultSpec::Link {
        a: "gpu0".into(),
        b: "nvswitch1".into(),
        at: Duration::from_ns(at_ns),
    }
}

fn repair_link(at_ns: u64) -> FaultSpec {
    FaultSpec::Repair {
        a: "gpu0".into(),
        b: "nvswitch1".into(),
        at: Duration::from_ns(at_ns),
    }
}

fn run_ok(s: &Sweep) -> Report {
    let r = run(s, &mut |_| {}).unwrap();
    assert!(
        r.verified && r.failure.is_none() && r.rows.iter().all(|row| row.wrong == 0),
        "{:?}: {:?} {:?} {:?}",
        s.faults,
        r.failure,
        r.failover,
        r.rows
    );
    r
}

fn busbw(r: &Report) -> Vec<f64> {
    r.rows.iter().map(|row| row.busbw).collect()
}

/// Whether size `k` of `r` ran at the bus bandwidth of the healthy fabric's (within 2%: without a plane it
/// has 14 of 18 links' worth, 22% less).
fn at_full_rate(r: &Report, healthy: &Report, k: usize) -> bool {
    (r.rows[k].busbw - healthy.rows[k].busbw).abs() < 0.02 * healthy.rows[k].busbw
}

#[test]
fn a_repaired_link_brings_the_engine_back_and_later_sizes_run_on_every_plane() {
    let healthy = run_ok(&sweep(1 << 20, 4 << 20, Vec::new()));
    // gpu0 loses its 4-link plane during the 1 MiB size; repaired at once, the link trains again and the
    // manager routes over it before that size ends.
    let failed = run_ok(&sweep(1 << 20, 4 << 20, vec![fail_link(2_000)]));
    let r = run_ok(&sweep(
        1 << 20,
        4 << 20,
        vec![fail_link(2_000), repair_link(3_000)],
    ));
    let f = r.failover;
    assert_eq!(
        (f.engines_offline, f.engines_online_again, f.links_repaired),
        (1, 1, 1),
        "{f:?}"
    );
    // Without the plane, 14 of 18 links' worth of bandwidth; with it back, the whole fabric's.
    assert!(
        failed.rows[2].busbw < 0.85 * healthy.rows[2].busbw,
        "{:?} against {:?}",
        busbw(&failed),
        busbw(&healthy)
    );
    for k in 1..r.rows.len() {
        assert!(
            at_full_rate(&r, &healthy, k),
            "size {k}: {:?} against {:?} healthy",
            busbw(&r),
            busbw(&healthy)
        );
    }
}

#[test]
fn a_drain_called_off_by_a_repair_brings_the_engine_back() {
    let healthy = run_ok(&sweep(1 << 20, 4 << 20, Vec::new()));
    // The drain's routes are in at 5 us (no replan delay): the engine goes offline; the repair comes
    // before the switch has emptied, so its ports never go down.
    let s = sweep(
        1 << 20,
        4 << 20,
        vec![
            FaultSpec::Drain {
                switch: "nvswitch1".into(),
                at: Duration::from_ns(5_000),
            },
            FaultSpec::SwitchRepair {
                switch: "nvswitch1".into(),
                at: Duration::from_ns(5_500),
            },
        ],
    );
    let r = run_ok(&s);
    let f = r.failover;
    assert_eq!(
        (
            f.switches_drained,
            f.switches_draining,
            f.links_failed,
            f.links_repaired
        ),
        (0, 0, 0, 8),
        "{f:?}"
    );
    assert_eq!((f.engines_offline, f.engines_online_again), (1, 1), "{f:?}");
    // The 2 MiB size lost the plane for a while; the 4 MiB one has it all along.
    assert!(
        r.rows[1].busbw < 0.9 * healthy.rows[1].busbw,
        "{:?} against {:?}",
        busbw(&r),
        busbw(&healthy)
    );
    assert!(
        at_full_rate(&r, &healthy, 2),
        "{:?} against {:?}",
        busbw(&r),
        busbw(&healthy)
    );
}

#[test]
fn a_repair_while_a_size_runs_lets_it_finish_without_the_plane_and_the_next_with_it() {
    let healthy = run_ok(&sweep(1 << 20, 8 << 20, Vec::new()));
    let failed = run_ok(&sweep(1 << 20, 8 << 20, vec![fail_link(2_000)]));
    // Without the plane the 4 MiB size runs from about 15 to 34 us: the repair at 20 us comes in the
    // middle of it, and it finishes on the planes left (as slowly as without the repair); the 8 MiB size
    // has every plane.
    let r = run_ok(&sweep(
        1 << 20,
        8 << 20,
        vec![fail_link(2_000), repair_link(20_000)],
    ));
    assert_eq!(
        (r.failover.engines_offline, r.failover.engines_online_again),
        (1, 1),
        "{:?}",
        r.failover
    );
    assert!(
        (r.rows[2].busbw - failed.rows[2].busbw).abs() < 0.01 * failed.rows[2].busbw
            && failed.rows[2].busbw < 0.85 * healthy.rows[2].busbw,
        "{:?} against {:?} failed, {:?} healthy",
        busbw(&r),
        busbw(&failed),
        busbw(&healthy)
    );
    assert!(
        at_full_rate(&r, &healthy, 3),
        "{:?} against {:?} healthy",
        busbw(&r),
        busbw(&healthy)
    );
}

#[test]
fn a_switch_failed_whole_and_repaired_sums_again() {
    let healthy = run_ok(&sweep(1 << 20, 4 << 20, Vec::new()));
    // Failed at 0 us it holds nothing and is routed around; repaired at 5 us, during the 2 MiB size.
    let s = sweep(
        1 << 20,
        4 << 20,
        vec![
            FaultSpec::Switch {
                switch: "nvswitch1".into(),
                at: Duration::ZERO,
            },
            FaultSpec::SwitchRepair {
                switch: "nvswitch1".into(),
                at: Duration::from_ns(5_000),
            },
        ],
    );
    let r = run_ok(&s);
    assert_eq!(
        (r.failover.engines_offline, r.failover.engines_online_again),
        (1, 1),
        "{:?}",
        r.failover
    );
    assert!(
        r.rows[0].busbw < 0.85 * healthy.rows[0].busbw && at_full_rate(&r, &healthy, 2),
        "{:?} against {:?} healthy",
        busbw(&r),
        busbw(&healthy)
    );
}

#[test]
fn without_a_repair_the_engine_stays_offline() {
    let r = run_ok(&sweep(1 << 20, 2 << 20, vec![fail_link(2_000)]));
    assert_eq!(
        (r.failover.engines_offline, r.failover.engines_online_again),
        (1, 0),
        "{:?}",
        r.failover
    );
}
