//! Discovery against the running fabric: the simulated switches' identity registers, filled from what
//! their data links learned from the identity flits as they came up, say what the manager's discovery
//! reads, and follow their links going down and losing links; after a failure the manager discovers the
//! running fabric again and routes around what it finds down.

use fabric_sim::discover::{check, discover, node_id, Wiring};
use fabric_sim::net::{Fault, Net, NoTraffic};
use fabric_sim::topology::{NodeKind, Topology};
use link_dl::link::DlConfig;
use link_phy::time::{Duration, Instant};
use switch_fw::identity::{PortPeer, NODE_ID, PEERS};

/// The fabric of `t`, run until its links are up.
fn initialised(t: &Topology) -> Net {
    let mut net = Net::new(t, &[], DlConfig::default(), 1).unwrap();
    let all_up = |net: &Net| {
        (0..t.nodes.len()).all(|x| (0..net.fabric().port_count(x)).all(|p| net.link(x, p).is_active()))
    };
    for us in 1..=20 {
        if all_up(&net) {
            return net;
        }
        net.run(
            &mut NoTraffic { done: false },
            Instant::ZERO + Duration::from_us(us),
        );
    }
    panic!("{}: links still down after 20 us", t.name);
}

/// Port `p` of switch `x` as its registers report it.
fn peer(net: &Net, x: usize, p: usize) -> Option<PortPeer> {
    let r = [0, 4, 8, 12].map(|w| {
        net.switch_register(x, PEERS + 16 * p as u32 + w)
            .unwrap()
            .unwrap()
    });
    PortPeer::from_registers(r)
}

#[test]
fn the_running_switches_report_what_discovery_reads() {
    for name in ["dgx-h100", "fat-tree-256"] {
        let t = Topology::builtin(name).unwrap();
        // Before the links come up, no port knows its peer.
        let net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        let sw = t.nodes.iter().position(|n| n.kind == NodeKind::Switch).unwrap();
        assert!((0..net.fabric().port_count(sw)).all(|p| peer(&net, sw, p).is_none()));
        let net = initialised(&t);
        let found = discover(&mut Wiring::new(&t, &[], &[]).unwrap()).unwrap();
        let mut ports = 0;
        for (x, node) in t.nodes.iter().enumerate() {
            if node.kind == NodeKind::Gpu {
                assert!(net.switch_register(x, NODE_ID).is_none());
                continue;
            }
            let id = node_id(&node.name);
            let read = |a| net.switch_register(x, a).unwrap().unwrap();
            assert_eq!(u64::from(read(NODE_ID)) | u64::from(read(NODE_ID + 4)) << 32, id);
            let f = &found.nodes[found.node(id).unwrap()];
            for p in 0..net.fabric().port_count(x) {
                assert_eq!(peer(&net, x, p), f.peers[p], "{name}: {}:{p}", node.name);
                ports += 1;
            }
        }
        assert!(ports > 0);
    }
}

#[test]
fn a_trunk_that_fails_clears_its_switch_port_and_one_that_loses_a_link_reports_it() {
    let t = Topology::builtin("dgx-h100").unwrap();
    let mut net = initialised(&t);
    let sw0 = t.node_named("nvswitch0").unwrap();
    // nvswitch0's ports 0 and 1 lead to gpu0 and gpu1, 5 links of 25 GB/s each (the first 5 of the 18).
    let (down, thinned) = (net.fabric().ports[sw0][0].0, net.fabric().ports[sw0][1].0);
    let before = peer(&net, sw0, 1).unwrap();
    assert_eq!((before.links, before.mbps), (5, 125_000));
    let at = Instant::ZERO + Duration::from_us(2);
    net.schedule_faults(
        &[
            Fault::LinkDown { trunk: down, at },
            Fault::LinkLost { trunk: thinned, at },
        ],
        Duration::ZERO,
    )
    .unwrap();
    net.run(
        &mut NoTraffic { done: false },
        Instant::ZERO + Duration::from_us(50),
    );
    assert!(net.now() >= at, "the faults happened");
    assert_eq!(peer(&net, sw0, 0), None);
    let after = peer(&net, sw0, 1).unwrap();
    assert_eq!((after.node, after.port), (before.node, before.port));
    assert_eq!((after.links, after.mbps), (4, 100_000));
    // What the fabric manager found when it discovered the running fabric again after the failure, and
    // finds now: the failed trunk down, the other degraded, the routes around the first.
    let c = check(&discover(&mut net).unwrap(), &t);
    assert_eq!(c.down, vec![down]);
    assert_eq!(
        c.degraded.iter().map(|d| d.trunk).collect::<Vec<_>>(),
        vec![thinned]
    );
    assert!(c.matches() && c.unreached.is_empty());
    assert_eq!(
        net.fabric().failed,
        1,
        "the routes were planned without the failed trunk"
    );
    assert!(
        net.fabric().routes[sw0][0].is_empty(),
        "nvswitch0 has no way down to gpu0"
    );
}

#[test]
fn a_failure_while_the_links_are_still_training_is_routed_around_once_they_are_up() {
    use fabric_sim::collective::Kind;
    use fabric_sim::run::{run, Algo, FaultSpec, Sweep};
    // Links take a few hundred nanoseconds to initialise: until they are up they have not reported their
    // peers, and a manager that rediscovered at once would find every trunk down.
    for at_ns in [0, 100, 200] {
        let topology = Topology::builtin("dgx-h100").unwrap();
        let sweep = Sweep {
            limit_per_size: Duration::from_ms(10),
            faults: vec![FaultSpec::Link {
                a: "gpu0".into(),
                b: "nvswitch1".into(),
                at: Duration::from_ns(at_ns),
            }],
            ..Sweep::new(topology, Kind::AllReduce, Algo::Ring, 64 << 10, 64 << 10)
        };
        let report = run(&sweep, &mut |_| {}).unwrap();
        assert!(report.verified, "a failure at {at_ns} ns: {:?}", report.failure);
        assert_eq!(report.failover.links_failed, 1);
    }
}

#[test]
fn a_fabric_built_with_a_trunk_down_replans_after_a_later_failure() {
    let t = Topology::builtin("dgx-h100").unwrap();
    let probe = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
    let sw0 = t.node_named("nvswitch0").unwrap();
    let (built_down, fails) = (probe.fabric().ports[sw0][0].0, probe.fabric().ports[sw0][1].0);
    let mut net = Net::new(&t, &[built_down], DlConfig::default(), 1).unwrap();
    assert_eq!(net.fabric().failed, 1);
    let at = Instant::ZERO + Duration::from_us(2);
    net.schedule_faults(&[Fault::LinkDown { trunk: fails, at }], Duration::ZERO)
        .unwrap();
    net.run(
        &mut NoTraffic { done: false },
        Instant::ZERO + Duration::from_us(20),
    );
    // The trunk built down never comes up; the manager must not wait for it before routing around both.
    assert_eq!(net.fabric().failed, 2, "{:?}", net.fatal());
    assert!(net.fatal().is_none());
}

#[test]
fn the_manager_replans_once_its_delay_is_over() {
    let t = Topology::builtin("dgx-h100").unwrap();
    let mut net = initialised(&t);
    let sw0 = t.node_named("nvswitch0").unwrap();
    let trunk = net.fabric().ports[sw0][0].0;
    let at = net.now() + Duration::from_us(1);
    net.schedule_faults(&[Fault::LinkDown { trunk, at }], Duration::from_us(5))
        .unwrap();
    let mut idle = NoTraffic { done: false };
    net.run(&mut idle, at + Duration::from_ns(4_990));
    assert_eq!(peer(&net, sw0, 0), None, "the switch knows at once");
    assert_eq!(net.fabric().failed, 0, "the routes are the old ones for 5 us");
    net.run(&mut idle, at + Duration::from_us(5));
    assert_eq!(net.fabric().failed, 1, "then the manager routes around the trunk");
    assert!(net.fatal().is_none());
}

/// A ring of 6 switches, listed last first, with 40 GPUs on `s0` (its ports past 31 among them: the
/// high halves of its routes) and one on each other switch, in partitions 0 to 2. `s0`'s trunk to `s5`
/// is its port 0, to `s1` its port 41.
fn ring_with_a_wide_switch() -> Topology {
    let mut toml = String::new();
    for s in (0..6).rev() {
        toml += &format!("[[node]]\nname = \"s{s}\"\nkind = \"switch\"\n");
    }
    for g in 0..45 {
        toml += &format!(
            "[[node]]\nname = \"g{g}\"\nkind = \"gpu\"\npartition = {}\n",
            g % 3
        );
    }
    let link = |a: String, b: String| format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\ngbps = 25\n");
    for s in 1..6 {
        toml += &link(format!("s{s}"), format!("s{}", (s + 1) % 6));
    }
    for g in 0..45usize {
        toml += &link(format!("g{g}"), format!("s{}", g.saturating_sub(39)));
    }
    toml += &link("s0".into(), "s1".into());
    Topology::from_toml(&toml).unwrap()
}

/// Every switch of `net` holds in its registers the routes and partitions of the manager's plan.
fn assert_programmed_as_planned(net: &Net, t: &Topology) {
    use switch_fw::regs::{PARTITIONS, ROUTES};
    let f = net.fabric();
    for x in (0..t.nodes.len()).filter(|&x| t.nodes[x].kind == NodeKind::Switch) {
        let read = |a| net.switch_register(x, a).unwrap().unwrap();
        for (id, &gpu) in f.gpus.iter().enumerate() {
            let (name, e) = (&t.nodes[x].name, id as u32);
            assert!(!f.routes[x][id].is_empty(), "{name} has a route to endpoint {id}");
            let route = u64::from(read(ROUTES + 8 * e)) | u64::from(read(ROUTES + 8 * e + 4)) << 32;
            assert_eq!(route, f.routes[x][id].0, "{name}: route to endpoint {id}");
            let partition = read(PARTITIONS + 4 * e);
            assert_eq!(
                partition,
                u32::from(t.nodes[gpu].partition),
                "{name}: partition of {id}"
            );
        }
    }
}

#[test]
fn the_switches_hold_the_routes_and_partitions_the_manager_planned_before_and_after_a_replan() {
    let t = ring_with_a_wide_switch();
    let mut net = initialised(&t);
    let s0 = t.node_named("s0").unwrap();
    assert!(net.fabric().port_count(s0) > 32);
    assert_programmed_as_planned(&net, &t);
    let trunk = net.fabric().ports[s0][41].0;
    assert_eq!(net.fabric().peer(s0, 41).0, t.node_named("s1").unwrap());
    let before = net.fabric().clone();
    let at = net.now() + Duration::from_us(1);
    net.schedule_faults(&[Fault::LinkDown { trunk, at }], Duration::ZERO)
        .unwrap();
    net.run(&mut NoTraffic { done: false }, at + Duration::from_us(20));
    assert!(net.fatal().is_none(), "{:?}", net.fatal());
    assert_eq!(net.fabric().failed, 1, "the manager routed around the trunk");
    assert_ne!(net.fabric().routes, before.routes);
    assert_programmed_as_planned(&net, &t);
    // It wrote the new routes over the old ones, each removing ports before it adds any.
    let over_the_old = before.replan(&t, &[trunk]).unwrap();
    assert!(
        net.fabric().program == over_the_old.program,
        "the manager wrote a program for empty switches"
    );
}
