//! Collectives on the built-in systems: every result checked, and the bandwidth the model gives.

use fabric_sim::collective::{Kind, Ring, Rings};
use fabric_sim::net::Net;
use fabric_sim::topology::{LinkFormat, Topology};
use link_dl::DlConfig;
use link_phy::time::Instant;

/// GPUs in ring `order`, and per GPU and port whether the routes take that port to the next one.
fn ring_ports(net: &Net, order: Vec<usize>) -> (Vec<usize>, Vec<Vec<bool>>) {
    let f = net.fabric();
    let n = order.len();
    let mut next = vec![0; n];
    for (i, &g) in order.iter().enumerate() {
        next[g] = order[(i + 1) % n];
    }
    let ports = (0..n)
        .map(|g| {
            (0..f.port_count(f.gpus[g]))
                .map(|p| f.routes[f.gpus[g]][next[g]].contains(p))
                .collect()
        })
        .collect();
    (order, ports)
}

fn ring_on(net: &Net, kind: Kind, bytes: u64, extension: bool) -> Ring {
    let (order, ports) = ring_ports(net, (0..net.fabric().gpus.len()).collect());
    // The whole buffer: part 0 of 1.
    Ring::part(kind, bytes, order, ports, extension, 42, 0, 1)
}

#[test]
fn ring_collectives_check_out() {
    for topo in ["mesh4", "dgx-h100"] {
        let t = Topology::builtin(topo).unwrap();
        let ext = t.links[0].format == LinkFormat::NvlinkAe;
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        for kind in [
            Kind::AllReduce,
            Kind::AllGather,
            Kind::ReduceScatter,
            Kind::Broadcast,
        ] {
            for bytes in [4u64, 1000, 128 * 1024, 1 << 22] {
                let start = net.now();
                let mut app = ring_on(&net, kind, bytes, ext);
                let done = net.run(&mut app, Instant(net.now().as_ps() + 10_000_000_000));
                let c = app.check();
                assert!(done && c.wrong == 0, "{topo} {kind:?} {bytes}: {c:?}");
                let us = (net.now().as_ps() - start.as_ps()) as f64 / 1e6;
                let algbw = bytes as f64 / us / 1e3;
                eprintln!(
                    "{topo} {kind:?} {bytes}: {us:.2} us algbw {algbw:.1} busbw {:.1}",
                    algbw * kind.bus_factor(8)
                );
            }
        }
    }
}

#[test]
fn switch_reduction_checks_out() {
    use fabric_sim::collective::SwitchReduce;
    for topo in ["dgx-a100", "dgx-h100"] {
        let t = Topology::builtin(topo).unwrap();
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        net.configure_nvls(true).unwrap();
        for bytes in [4u64, 1000, 128 * 1024, 1 << 22] {
            let links = net.fabric().gpu_port_links();
            let start = net.now();
            let mut app = SwitchReduce::new(bytes, links, true, 7);
            let done = net.run(&mut app, Instant(net.now().as_ps() + 10_000_000_000));
            let c = app.check();
            assert!(done && c.wrong == 0, "{topo} {bytes}: {c:?}");
            let us = (net.now().as_ps() - start.as_ps()) as f64 / 1e6;
            let algbw = bytes as f64 / us / 1e3;
            eprintln!(
                "{topo} switch-reduce {bytes}: {us:.2} us algbw {algbw:.1} busbw {:.1}",
                algbw * 1.75
            );
        }
    }
}

/// Three GPUs in a ring whose hop from g1 to g2 is a tenth of the others' rate: g1 receives ten times
/// faster than it can pass on.
const SLOW_HOP: &str = r#"
name = "slow-hop"
[[node]]
name = "g0"
kind = "gpu"
[[node]]
name = "g1"
kind = "gpu"
[[node]]
name = "g2"
kind = "gpu"
[[link]]
a = "g0"
b = "g1"
gbps = 100.0
[[link]]
a = "g1"
b = "g2"
gbps = 10.0
[[link]]
a = "g2"
b = "g0"
gbps = 100.0
"#;

#[test]
fn a_ring_gpu_sends_only_into_room_at_the_next() {
    let t = Topology::from_toml(SLOW_HOP).unwrap();
    let bytes = 1 << 20;
    for kind in [
        Kind::AllReduce,
        Kind::AllGather,
        Kind::ReduceScatter,
        Kind::Broadcast,
    ] {
        let run = |room: Option<u64>| {
            let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
            // As `linkctl sim` runs a ring: through `Rings`, here of one.
            let ring = ring_ports(&net, vec![0, 1, 2]);
            let mut app = Rings::new(kind, bytes, vec![ring], false, 42);
            if let Some(room) = room {
                app.set_buffer_packets(room);
            }
            let done = net.run(&mut app, Instant(10_000_000_000));
            let c = app.check();
            assert!(
                done && c.wrong == 0 && c.packets_verified > 0,
                "{kind:?} room {room:?}: {c:?}"
            );
            (net.now().as_ps(), app.most_queued())
        };
        // With NCCL's 4 MiB of room, g1's queue grows with what g0 sends it faster than it leaves.
        let (roomy_ps, roomy_queue) = run(None);
        assert!(roomy_queue > 1000, "{kind:?}: {roomy_queue}");
        for room in [2, 3, 16, 64] {
            let (ps, queue) = run(Some(room));
            assert!(queue as u64 <= room, "{kind:?} room {room}: {queue} queued");
            if room == 64 {
                // The slow hop paces the ring either way: holding less up front costs no time.
                assert!(ps * 100 <= roomy_ps * 102, "{kind:?}: {ps} ps against {roomy_ps}");
            }
        }
    }
}

#[test]
fn rings_the_opposite_ways_round_share_gpus_with_little_room() {
    // An all-reduce over two rings the opposite ways round, each with the slow hop: a GPU waits for room
    // on one ring while the other goes on.
    let t = Topology::from_toml(SLOW_HOP).unwrap();
    let run = |room: Option<u64>| {
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        let rings = vec![ring_ports(&net, vec![0, 1, 2]), ring_ports(&net, vec![2, 1, 0])];
        let mut app = Rings::new(Kind::AllReduce, 1 << 20, rings, false, 9);
        if let Some(room) = room {
            app.set_buffer_packets(room);
        }
        let done = net.run(&mut app, Instant(10_000_000_000));
        let c = app.check();
        assert!(
            done && c.wrong == 0 && c.packets_verified > 0,
            "room {room:?}: {c:?}"
        );
        (net.now().as_ps(), app.most_queued())
    };
    let (roomy_ps, roomy_queue) = run(None);
    assert!(roomy_queue > 1000, "{roomy_queue}");
    for room in [2, 5, 64] {
        let (ps, queue) = run(Some(room));
        assert!(queue as u64 <= room, "room {room}: {queue} queued");
        if room == 64 {
            assert!(ps * 100 <= roomy_ps * 102, "{ps} ps against {roomy_ps}");
        }
    }
}
