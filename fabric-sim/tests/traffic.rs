//! Synthetic traffic: what the fabric accepts and how long packets take at offered loads, checked against
//! what the links, the load and the spreading over ports allow; every run also checks that every packet
//! generated arrived once with its data (`verified`).

use fabric_sim::net::Net;
use fabric_sim::topology::Topology;
use fabric_sim::traffic::{
    injection, run_traffic, Pattern, Spread, TrafficReport, TrafficSpec, PAYLOAD_BYTES,
};
use link_dl::DlConfig;
use link_phy::time::Duration;

fn spec(pattern: Pattern, spread: Spread, load: f64) -> TrafficSpec {
    TrafficSpec::new(pattern, spread, load)
}

fn run(topology: &str, spec: &TrafficSpec) -> TrafficReport {
    let t = Topology::builtin(topology).unwrap();
    let r = run_traffic(&t, spec).unwrap();
    assert!(
        r.measured.verified,
        "{topology} {spec:?}: {:?}",
        r.measured.problem
    );
    assert_eq!(r.measured.generated, r.measured.delivered);
    assert!(r.measured.latency.packets > 0);
    r
}

/// Payload GB/s each GPU of `topology` could inject at most, on average.
fn payload_capacity(topology: &str) -> f64 {
    let t = Topology::builtin(topology).unwrap();
    let net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
    let all: Vec<u16> = (0..t.gpus().len() as u16).collect();
    let (bandwidth, wire_bytes) = injection(&net, &t, &all, PAYLOAD_BYTES);
    bandwidth.iter().sum::<f64>() / bandwidth.len() as f64 * PAYLOAD_BYTES as f64 / wire_bytes as f64
}

#[test]
fn a_lightly_loaded_fabric_accepts_what_is_offered_at_a_steady_latency() {
    let r = run("dgx-h100", &spec(Pattern::Uniform, Spread::Links, 0.2));
    // 450 GB/s of links per GPU, 160-byte packets for 128 bytes: 360 GB/s of payload at most.
    assert!((payload_capacity("dgx-h100") - 360.0).abs() < 1e-9);
    assert!((r.measured.offered_gbps - 72.0).abs() < 1e-9);
    assert!(
        (r.measured.accepted_gbps / r.measured.offered_gbps - 1.0).abs() < 0.03,
        "{r:?}"
    );
    // Two hops through an NVSwitch: the tail stays within a few packet times of the median.
    let l = r.measured.latency;
    assert!(l.p50_ns >= 100 && l.p50_ns < 400, "{l:?}");
    assert!(l.p99_ns < l.p50_ns + 50, "{l:?}");
    assert!(l.p50_ns as f64 <= l.mean_ns + 1.0 && l.max_ns >= l.p99_ns);
    assert_eq!(r.measured.source_full, 0);
}

#[test]
fn a_flow_on_one_port_is_capped_by_that_trunk_and_interleaving_uses_them_all() {
    // A permutation: each GPU sends to one other. By the flow hash the pair keeps one of the GPU's four
    // trunks to the NVSwitches (4 or 5 links of 25 GB/s: at most 100 GB/s of payload); interleaved over
    // the 18 links it gets nearly all 360.
    let flow = run("dgx-h100", &spec(Pattern::Permutation, Spread::Flow, 1.0));
    assert!(flow.measured.accepted_gbps <= 100.0 + 1.0, "{flow:?}");
    assert!(flow.measured.accepted_gbps > 70.0, "{flow:?}");
    assert!(flow.measured.source_full > 0, "the source queues overflow");
    let links = run("dgx-h100", &spec(Pattern::Permutation, Spread::Links, 1.0));
    assert!(
        links.measured.accepted_gbps > 0.95 * links.measured.offered_gbps,
        "{links:?}"
    );
    // The flow's packets wait in a full source queue (1,024 packets, 1.6 us at 100 GB/s).
    assert!(
        flow.measured.latency.p50_ns > links.measured.latency.p50_ns + 1_000,
        "queueing at the source: {:?} {:?}",
        flow.measured.latency,
        links.measured.latency
    );
}

#[test]
fn a_hot_spot_saturates_its_links_and_latency_grows_with_the_load() {
    // Half of every other GPU's packets go to GPU 0: at 0.5 load, 7 GPUs send it 0.25 of their injection
    // bandwidth each, 1.75 times what its links can take.
    let light = run("dgx-h100", &spec(Pattern::Hotspot(0.5), Spread::Links, 0.1));
    let heavy = run("dgx-h100", &spec(Pattern::Hotspot(0.5), Spread::Links, 0.5));
    assert!(
        light.measured.accepted_gbps > 0.97 * light.measured.offered_gbps,
        "{light:?}"
    );
    assert!(
        heavy.measured.accepted_gbps < 0.9 * heavy.measured.offered_gbps,
        "{heavy:?}"
    );
    assert!(
        heavy.measured.latency.p99_ns > 4 * light.measured.latency.p99_ns,
        "{light:?} {heavy:?}"
    );
}

#[test]
fn a_run_repeats_exactly_for_its_seed() {
    let s = spec(Pattern::Uniform, Spread::Links, 0.6);
    let (a, b) = (run("dgx-a100", &s), run("dgx-a100", &s));
    assert_eq!(
        (a.measured.delivered, a.measured.latency, a.measured.accepted_gbps),
        (b.measured.delivered, b.measured.latency, b.measured.accepted_gbps)
    );
    let other = run("dgx-a100", &TrafficSpec { seed: 2, ..s });
    assert_ne!(a.measured.latency, other.measured.latency);
}

#[test]
fn bit_errors_are_replayed_and_every_packet_still_arrives() {
    let s = TrafficSpec {
        ber: Some(1e-6),
        ..spec(Pattern::Neighbor, Spread::Flow, 0.2)
    };
    let r = run("mesh4", &s);
    assert!(
        r.links.bits_flipped > 0 && r.links.dl.replays > 0,
        "{:?}",
        r.links
    );
    assert!(
        r.measured.latency.max_ns > 2 * r.measured.latency.p50_ns,
        "replays show in the tail: {:?}",
        r.measured.latency
    );
}

#[test]
fn a_fat_tree_is_limited_by_each_gpus_network_port() {
    // Four nodes of 8 GPUs: each GPU has 450 GB/s of NVLink inside its node and one 50 GB/s port into
    // the fat tree, through which 24 of every 31 uniform packets leave. A load of 0.05 (25 GB/s of
    // links, 15.5 of it for the network) fits; at 0.2 (62 GB/s for the network) the port saturates and
    // the source queues overflow.
    let fits = run("fat-tree-32", &spec(Pattern::Uniform, Spread::Links, 0.05));
    assert!(
        (fits.measured.accepted_gbps / fits.measured.offered_gbps - 1.0).abs() < 0.05,
        "{fits:?}"
    );
    let over = run("fat-tree-32", &spec(Pattern::Uniform, Spread::Links, 0.2));
    assert!(
        over.measured.accepted_gbps < 0.75 * over.measured.offered_gbps,
        "{over:?}"
    );
    assert!(over.measured.source_full > 0, "{over:?}");
    // Packets wait in the port's full source queue: a microsecond and more.
    assert!(
        over.measured.latency.p50_ns > fits.measured.latency.p50_ns + 1_000,
        "{fits:?} {over:?}"
    );
}

#[test]
fn packets_caught_by_a_failure_go_another_way_and_show_in_the_tail() {
    use fabric_sim::run::FaultSpec;
    for spread in [Spread::Links, Spread::Flow] {
        let s = TrafficSpec {
            faults: vec![FaultSpec::Link {
                a: "gpu0".into(),
                b: "nvswitch1".into(),
                at: Duration::from_us(3),
            }],
            ..spec(Pattern::Uniform, spread, 0.5)
        };
        let r = run("dgx-h100", &s);
        assert_eq!(r.failover.links_failed, 1);
        assert!(r.failover.packets_taken_back > 0, "{spread:?} {:?}", r.failover);
        // The rest of the fabric carries what gpu0's 14 remaining links can.
        assert!(
            r.measured.accepted_gbps > 0.9 * r.measured.offered_gbps,
            "{spread:?} {r:?}"
        );
        assert!(
            r.measured.latency.max_ns > 2 * r.measured.latency.p50_ns,
            "{spread:?} {:?}",
            r.measured.latency
        );
    }
}

#[test]
fn traffic_split_by_failures_and_joined_by_repairs_goes_on_between_the_parts() {
    use fabric_sim::run::FaultSpec;
    // gpu0 loses its four switch planes at 3 us: cut off, as long as they stay down.
    let planes = |f: fn(String, String, Duration) -> FaultSpec, at| {
        (0..4).map(move |k| f("gpu0".into(), format!("nvswitch{k}"), Duration::from_us(at)))
    };
    let fail = |a, b, at| FaultSpec::Link { a, b, at };
    let repair = |a, b, at| FaultSpec::Repair { a, b, at };
    let t = Topology::builtin("dgx-h100").unwrap();
    let mut s = TrafficSpec {
        faults: planes(fail, 3).collect(),
        measure: Duration::from_us(10),
        ..spec(Pattern::Uniform, Spread::Links, 0.3)
    };
    let cut = run_traffic(&t, &s).unwrap();
    s.faults.extend(planes(repair, 5));
    let joined = run_traffic(&t, &s).unwrap();
    let (f, m) = (joined.failover, &joined.measured);
    assert_eq!((f.links_failed, f.links_repaired), (4, 4), "{f:?}");
    // Split for 2 us of the 10: it says so, and lost less than the run that stays split.
    assert_eq!((cut.failover.jobs_split, f.jobs_split), (1, 1), "{f:?}");
    assert!(
        m.unroutable > 0 && 3 * m.unroutable < cut.measured.unroutable,
        "{} unroutable, {} staying split",
        m.unroutable,
        cut.measured.unroutable
    );
    assert_eq!(m.generated, m.delivered + m.lost, "{m:?}");
    assert!(m.problem.is_none(), "{m:?}");
}

#[test]
fn small_writes_carry_less_payload_for_the_same_header_flits() {
    // A 32-byte write takes a header flit, the address-extension flit and two data flits on DGX H100's
    // links: half of 450 GB/s is payload.
    let s = TrafficSpec {
        payload_bytes: 32,
        ..spec(Pattern::Uniform, Spread::Links, 0.5)
    };
    let r = run("dgx-h100", &s);
    assert!((r.measured.offered_gbps - 112.5).abs() < 1e-9, "{r:?}");
    assert!(
        (r.measured.accepted_gbps / r.measured.offered_gbps - 1.0).abs() < 0.03,
        "{r:?}"
    );
    let full = run("dgx-h100", &spec(Pattern::Uniform, Spread::Links, 0.5));
    // 64 bytes on the wire a packet against 160: two and a half times the packets for the same load.
    let ratio = r.measured.generated as f64 / full.measured.generated as f64;
    assert!((ratio - 2.5).abs() < 0.1, "{ratio}");
}

#[test]
fn bad_specs_are_refused() {
    let t = Topology::builtin("mesh4").unwrap();
    for load in [0.0, -0.5, 1.5, f64::NAN] {
        assert!(
            run_traffic(&t, &spec(Pattern::Uniform, Spread::Links, load)).is_err(),
            "{load}"
        );
    }
    let no_window = TrafficSpec {
        measure: Duration::ZERO,
        ..spec(Pattern::Uniform, Spread::Links, 0.5)
    };
    assert!(run_traffic(&t, &no_window).is_err());
    for payload_bytes in [0, 8, 20, 144] {
        let odd = TrafficSpec {
            payload_bytes,
            ..spec(Pattern::Uniform, Spread::Links, 0.5)
        };
        assert!(run_traffic(&t, &odd).is_err(), "{payload_bytes}");
    }
    assert!(Pattern::parse("hotspot", 1.5).is_err() && Pattern::parse("tornado", 0.0).is_err());
    assert!(Spread::parse("random").is_err());
}

#[test]
fn a_copy_held_while_the_manager_replans_is_still_caught_as_a_duplicate() {
    use fabric_sim::run::FaultSpec;
    // The manager takes 60 us: packets taken back from the failed link wait for the new routes in
    // nvswitch1 while gpu0 receives more packets than its window of recent headers holds.
    let s = TrafficSpec {
        faults: vec![FaultSpec::Link {
            a: "gpu0".into(),
            b: "nvswitch1".into(),
            at: Duration::from_us(3),
        }],
        replan_delay: Duration::from_us(60),
        measure: Duration::from_us(100),
        ..spec(Pattern::Uniform, Spread::Links, 0.5)
    };
    let r = run("dgx-h100", &s);
    assert!(r.measured.verified, "{:?}", r.measured.problem);
    assert!(
        r.failover.packets_parked > 10_000 && r.failover.duplicates_dropped > 0,
        "{:?}",
        r.failover
    );
}

#[test]
fn light_traffic_lets_its_idle_waits_pass_at_once_and_changes_nothing() {
    use fabric_sim::run::FaultSpec;
    // Births tens of microseconds apart leave the fabric idle between them: with bit errors, a link
    // failing and the manager's replan after it, a hot spot, and a fat tree.
    let dgx = TrafficSpec {
        measure: Duration::from_us(400),
        ber: Some(1e-7),
        faults: vec![FaultSpec::Link {
            a: "gpu0".into(),
            b: "nvswitch1".into(),
            at: Duration::from_us(150),
        }],
        replan_delay: Duration::from_us(60),
        ..spec(Pattern::Uniform, Spread::Links, 2e-6)
    };
    let mesh = TrafficSpec {
        measure: Duration::from_us(2000),
        ..spec(Pattern::Hotspot(0.5), Spread::Flow, 1e-6)
    };
    let tree = TrafficSpec {
        measure: Duration::from_us(1000),
        ..spec(Pattern::Permutation, Spread::Links, 1e-8)
    };
    for (topology, s) in [("dgx-h100", dgx), ("mesh4", mesh), ("fat-tree-256", tree)] {
        let skipped = run(topology, &s);
        let mut every = run(
            topology,
            &TrafficSpec {
                skip_idle: false,
                trunks: false,
                ..s
            },
        );
        assert!(
            skipped.idle_skipped > Duration::from_us(20),
            "{topology}: {:?}",
            skipped.idle_skipped
        );
        assert_eq!(every.idle_skipped, Duration::ZERO);
        every.idle_skipped = skipped.idle_skipped;
        assert_eq!(format!("{skipped:?}"), format!("{every:?}"), "{topology}");
    }
}

#[test]
fn slow_wires_drain_before_the_verdict() {
    // A wire of 20 ms, more than the 10 ms the fabric was given to drain: its packets are late, not lost.
    let t = Topology::from_toml(
        r#"
        node = [{ name = "g0", kind = "gpu" }, { name = "g1", kind = "gpu" }]
        link = [{ a = "g0", b = "g1", gbps = 1.0, latency_ns = 20e6 }]
        "#,
    )
    .unwrap();
    let s = TrafficSpec {
        warmup: Some(Duration::from_us(1)),
        measure: Duration::from_us(10),
        ..spec(Pattern::Uniform, Spread::Links, 1.0)
    };
    let r = run_traffic(&t, &s).unwrap();
    assert!(r.measured.verified, "{:?}", r.measured.problem);
    assert!(r.measured.generated > 0);
    assert_eq!(r.measured.generated, r.measured.delivered);
}

#[test]
fn a_slow_links_backlog_drains_for_as_long_as_it_keeps_delivering() {
    // 1 MB/s into g1: a packet takes about 160 us to cross, and the 10 ms drain ends with most of the
    // window's packets still queued for that link, on their way and not lost.
    let t = Topology::from_toml(
        r#"
        node = [{ name = "g0", kind = "gpu" }, { name = "g1", kind = "gpu" }, { name = "s", kind = "switch" }]
        link = [{ a = "g0", b = "s", gbps = 25.0 }, { a = "g1", b = "s", gbps = 0.001 }]
        "#,
    )
    .unwrap();
    let s = TrafficSpec {
        measure: Duration::from_us(3),
        ..spec(Pattern::Uniform, Spread::Links, 0.1)
    };
    let r = run_traffic(&t, &s).unwrap();
    assert!(r.measured.verified, "{:?}", r.measured);
    assert_eq!(r.measured.generated, r.measured.delivered);
    assert!(r.simulated > Duration::from_ms(12), "{:?}", r.simulated);
}

#[test]
fn packets_held_for_a_replan_longer_than_the_drain_are_waited_for() {
    use fabric_sim::run::FaultSpec;
    let s = TrafficSpec {
        faults: vec![FaultSpec::Link {
            a: "gpu0".into(),
            b: "nvswitch1".into(),
            at: Duration::from_us(2),
        }],
        replan_delay: Duration::from_ms(30),
        measure: Duration::from_us(2),
        ..spec(Pattern::Uniform, Spread::Links, 0.3)
    };
    let r = run("dgx-h100", &s);
    assert!(r.failover.packets_parked > 0, "{:?}", r.failover);
    assert!(r.simulated > Duration::from_ms(30), "{:?}", r.simulated);
}

#[test]
fn trunk_loads_are_reported_when_the_run_ends_before_the_window_does() {
    // At a light load the last packet can arrive before the window ends, with no other born in it: the
    // run ends there, before the window's closing mark (seed 1 at 0.003 on mesh2 does).
    let light = TrafficSpec {
        trunks: true,
        ..spec(Pattern::Uniform, Spread::Links, 0.003)
    };
    let r = run("mesh2", &light);
    assert!(r.simulated < r.warmup + light.measure, "{:?}", r.simulated);
    let loads = r.trunks.expect("trunk loads over the window");
    let packets: u64 = loads.iter().flat_map(|t| t.directions).map(|d| d.packets).sum();
    assert!(packets > 0);
    for t in &loads {
        for d in 0..2 {
            assert!(t.directions[d].room > 0, "{t:?}");
            assert!(t.utilization(d) < 0.05, "{t:?}");
        }
    }
    // So light a load that no packet is born in the window: the run ends at once, the trunks idle.
    let idle = TrafficSpec { load: 1e-6, ..light };
    let r = run_traffic(&Topology::builtin("mesh2").unwrap(), &idle).unwrap();
    assert_eq!(r.measured.generated, 0);
    let loads = r.trunks.expect("trunk loads over the window");
    assert!(loads
        .iter()
        .all(|t| t.directions.iter().all(|d| d.packets == 0 && d.room > 0)));
}

#[test]
fn trunk_loads_over_the_window_match_the_offered_load_and_change_nothing_else() {
    // Uniform traffic at half the injection bandwidth keeps every trunk about half busy each way.
    let plain = spec(Pattern::Uniform, Spread::Links, 0.5);
    let marked = TrafficSpec {
        trunks: true,
        ..plain.clone()
    };
    let (without, mut with) = (run("dgx-h100", &plain), run("dgx-h100", &marked));
    assert!(without.trunks.is_none());
    let loads = with.trunks.take().unwrap();
    assert_eq!(
        format!("{with:?}"),
        format!("{without:?}"),
        "marking the window changed the run"
    );
    assert_eq!(loads.len(), 32);
    for t in &loads {
        for d in 0..2 {
            let u = t.utilization(d);
            assert!((u - 0.5).abs() < 0.1, "{t:?}: {u}");
        }
    }
    // A hot spot saturates the trunks into GPU 0, and only those.
    let hot = TrafficSpec {
        trunks: true,
        ..spec(Pattern::Hotspot(0.5), Spread::Links, 0.5)
    };
    let r = run_traffic(&Topology::builtin("dgx-h100").unwrap(), &hot).unwrap();
    for t in r.trunks.unwrap() {
        // Direction 1 is from the switch to the GPU.
        let into = t.utilization(1);
        if t.directions[1].from.0 != 0 && t.directions[0].from.0 == 0 {
            assert!(into > 0.95, "{t:?}: {into}");
        } else {
            assert!(into < 0.8, "{t:?}: {into}");
        }
    }
}

#[test]
fn a_trunk_a_degrade_slowed_shows_as_busy_as_it_is() {
    use fabric_sim::run::FaultSpec;
    // A hot spot saturates the trunks into GPU 0; one of them lost a link of its 5 before the window, so
    // it carries 4/5 of its rate as built, and is still saturated at that.
    let hot = TrafficSpec {
        trunks: true,
        faults: vec![FaultSpec::OneLink {
            a: "gpu0".into(),
            b: "nvswitch0".into(),
            at: Duration::ZERO,
        }],
        ..spec(Pattern::Hotspot(0.5), Spread::Links, 0.5)
    };
    let r = run_traffic(&Topology::builtin("dgx-h100").unwrap(), &hot).unwrap();
    assert_eq!(r.failover.links_degraded, 1, "{:?}", r.failover);
    let loads = r.trunks.unwrap();
    let degraded = loads
        .iter()
        .find(|t| t.directions[0].from.0 == 0 && t.links == 5)
        .unwrap();
    let into = degraded.utilization(1);
    assert!(into > 0.95 && into <= 1.0, "{degraded:?}: {into}");
}

#[test]
fn links_training_in_the_window_do_not_show_as_busy_with_packets() {
    // A window from the start holds the links' initialisation: those flits are no packet's.
    let light = TrafficSpec {
        trunks: true,
        warmup: Some(Duration::ZERO),
        ..spec(Pattern::Uniform, Spread::Links, 0.001)
    };
    let loads = run("dgx-h100", &light).trunks.unwrap();
    assert!(
        loads
            .iter()
            .flat_map(|t| &t.directions)
            .all(|d| d.packet_flits == 10 * d.packets),
        "{loads:?}"
    );
    assert!(loads.iter().all(|t| t.busier() < 0.01), "{loads:?}");
}
