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

/// Run `kind` of 1 MiB over rings `orders` on three GPUs whose link from g1 to g2 has a tenth of the
/// others' rate (g1 receives ten times faster than it can pass on), as `linkctl sim` runs rings (through
/// `Rings`), with `room` packets of room per ring and GPU (NCCL's 4 MiB if `None`); check that it
/// verified. Returns the simulated time and the longest any GPU's queue was.
fn on_slow_hop(kind: Kind, orders: &[&[usize]], room: Option<u64>) -> (u64, usize) {
    let t = full_mesh(3, &[100, 100, 10]);
    let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
    let rings = orders.iter().map(|o| ring_ports(&net, o.to_vec())).collect();
    let mut app = Rings::new(kind, 1 << 20, rings, false, 42);
    if let Some(room) = room {
        app.set_buffer_packets(room);
    }
    let done = net.run(&mut app, Instant(10_000_000_000));
    let c = app.check();
    assert!(
        done && c.wrong == 0 && c.packets_verified > 0,
        "{kind:?} {orders:?} room {room:?}: {c:?}"
    );
    (net.now().as_ps(), app.most_queued())
}

/// With NCCL's 4 MiB of room g1's queue grows with what it receives faster than it can pass on; with
/// `rooms` (the last of them enough to cover the slow hop's round trip) it never queues more, and with
/// the last it takes no longer: the slow hop paces the ring either way.
fn room_is_kept(kind: Kind, orders: &[&[usize]], rooms: &[u64]) {
    let (roomy_ps, roomy_queue) = on_slow_hop(kind, orders, None);
    assert!(roomy_queue > 1000, "{kind:?} {orders:?}: {roomy_queue}");
    for &room in rooms {
        let (ps, queue) = on_slow_hop(kind, orders, Some(room));
        assert!(
            queue as u64 <= room,
            "{kind:?} {orders:?} room {room}: {queue} queued"
        );
        if Some(&room) == rooms.last() {
            assert!(
                ps * 100 <= roomy_ps * 102,
                "{kind:?} {orders:?}: {ps} ps against {roomy_ps}"
            );
        }
    }
}

#[test]
fn a_ring_gpu_sends_only_into_room_at_the_next() {
    // A GPU the ring leaves waiting is set going again only by the next GPU freeing room: a broken wake
    // stalls it, or slows it with 64 packets of room.
    for kind in [
        Kind::AllReduce,
        Kind::AllGather,
        Kind::ReduceScatter,
        Kind::Broadcast,
    ] {
        room_is_kept(kind, &[&[0, 1, 2]], &[2, 3, 16, 64]);
    }
}

#[test]
fn rings_the_opposite_ways_round_share_gpus_with_little_room() {
    // Each ring has the slow hop: a GPU waits for room on one ring while the other goes on.
    room_is_kept(Kind::AllReduce, &[&[0, 1, 2], &[2, 1, 0]], &[2, 5, 64]);
}

/// `n` GPUs, each pair linked at the next rate of `gbps` (going round it).
fn full_mesh(n: usize, gbps: &[u32]) -> Topology {
    let mut toml = String::from("name = \"mesh\"\n");
    for g in 0..n {
        toml += &format!("[[node]]\nname = \"g{g}\"\nkind = \"gpu\"\n");
    }
    let mut rates = gbps.iter().cycle();
    for a in 0..n {
        for b in a + 1..n {
            let rate = rates.next().unwrap_or(&10);
            toml += &format!("[[link]]\na = \"g{a}\"\nb = \"g{b}\"\ngbps = {rate}.0\n");
        }
    }
    Topology::from_toml(&toml).unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Whatever the links' rates, the room and the collective, rings the one or both ways round a
    /// mesh finish, verify, and never hold more than their room: new packets leave the last place to
    /// packets passed on, so a ring cannot fill with packets none of which can move.
    #[test]
    fn rings_with_any_room_finish(
        n in 3usize..6,
        gbps in proptest::collection::vec(proptest::sample::select(vec![5u32, 10, 25, 50, 100]), 1..10),
        kind in proptest::sample::select(vec![
            Kind::AllReduce,
            Kind::AllGather,
            Kind::ReduceScatter,
            Kind::Broadcast,
        ]),
        room in 2u64..40,
        both_ways in proptest::bool::ANY,
        kib in 1u64..128,
    ) {
        let t = full_mesh(n, &gbps);
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        let mut orders = vec![(0..n).collect::<Vec<_>>()];
        if both_ways {
            orders.push((0..n).rev().collect());
        }
        let rings = orders.into_iter().map(|o| ring_ports(&net, o)).collect();
        let mut app = Rings::new(kind, kib * 1024, rings, false, 5);
        app.set_buffer_packets(room);
        let done = net.run(&mut app, Instant(10_000_000_000));
        let c = app.check();
        proptest::prop_assert!(done && c.wrong == 0 && c.packets_verified > 0, "{c:?}");
        proptest::prop_assert!(app.most_queued() as u64 <= room);
    }
}

/// A GPU that may send on any port (all-to-all) spreads its packets over its ports by their links, as
/// NVLink interleaves over all of them, instead of filling the first port up to its credit before the
/// next is asked. On DGX H100 (5/4/4/5 links) ports offered in order each until it refused had put 409 of
/// a GPU's 448 packets of a 64 KiB all-to-all on port 0.
#[test]
fn an_all_to_all_spreads_each_gpus_packets_over_its_ports_by_their_links() {
    use fabric_sim::collective::AllToAll;
    let t = Topology::builtin("dgx-h100").unwrap();
    let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
    assert!(net.bring_up(Instant(1_000_000_000)));
    let mut app = AllToAll::new(64 * 1024, 8, true, 3);
    assert!(net.run(&mut app, Instant(net.now().as_ps() + 1_000_000_000)));
    assert_eq!(app.check().wrong, 0, "{:?}", app.check());
    let f = net.fabric();
    for (gpu, &node) in f.gpus.iter().enumerate() {
        let ports = f.port_count(node);
        let sent: Vec<u64> = (0..ports)
            .map(|p| net.link(node, p).counters().packets_sent)
            .collect();
        let links: Vec<u64> = (0..ports).map(|p| f.trunk_at(node, p).links as u64).collect();
        let (all_sent, all_links) = (sent.iter().sum::<u64>(), links.iter().sum::<u64>());
        for p in 0..ports {
            // Each port's share of the packets is within a tenth of its share of the links.
            let share = sent[p] as f64 / all_sent as f64;
            let fair = links[p] as f64 / all_links as f64;
            assert!(
                (share / fair - 1.0).abs() < 0.1,
                "gpu{gpu}: {sent:?} over links {links:?}"
            );
        }
    }
}
