//! The switch core under traffic: no head-of-line blocking, order per flow, partitions, multicast,
//! reduction, credits, and a randomised check that every packet leaves exactly once, in order.

use std::collections::{BTreeMap, VecDeque};

use heapless::Vec as HVec;
use proptest::prelude::*;
use switch_fw::reduce::{Element, ReductionGroup};
use switch_fw::switch::{Arrival, Destination, Forward, Switch};
use switch_fw::{PortSet, SwitchError};

type S = Switch<8, 512>;

fn switch() -> S {
    let mut s = S::new();
    // Endpoint e sits behind port e.
    for e in 0..8u16 {
        s.routes.set(e, PortSet::single(usize::from(e))).unwrap();
    }
    s
}

fn unicast(handle: u32, vc: u8, to: u16) -> Arrival {
    Arrival {
        handle,
        vc,
        flits: 9,
        destination: Destination::Unicast(to),
        source: None,
    }
}

fn step(s: &mut S, credit: impl FnMut(usize, usize) -> bool) -> Vec<Forward> {
    let mut out: HVec<Forward, 8> = HVec::new();
    s.arbitrate(credit, &mut out);
    let v: Vec<Forward> = out.into_iter().collect();
    for f in &v {
        s.output_done(f.output);
    }
    v
}

#[test]
fn a_busy_output_does_not_block_packets_for_others() {
    let mut s = switch();
    s.ingress(0, unicast(1, 0, 5)).unwrap();
    s.ingress(0, unicast(2, 0, 6)).unwrap();
    // Output 5 has no credit: the packet for 6, queued behind it, still goes.
    let f = step(&mut s, |o, _| o != 5);
    assert_eq!(
        f.iter().map(|f| (f.handle, f.output)).collect::<Vec<_>>(),
        [(2, 6)]
    );
    assert!(f[0].cut_through);
    let f = step(&mut s, |_, _| true);
    assert_eq!(
        f.iter()
            .map(|f| (f.handle, f.output, f.cut_through))
            .collect::<Vec<_>>(),
        [(1, 5, false)]
    );
    assert!(s.is_idle());
}

#[test]
fn an_output_is_idle_once_nothing_is_queued_for_it() {
    let mut s = switch();
    s.ingress(0, unicast(1, 0, 5)).unwrap();
    s.ingress(1, unicast(2, 0, 5)).unwrap();
    s.ingress(2, unicast(3, 0, 6)).unwrap();
    assert!(!s.output_idle(5) && !s.output_idle(6) && s.output_idle(7));
    // One of the two for 5 leaves, with the one for 6: 5 still has the other.
    step(&mut s, |_, _| true);
    assert!(!s.output_idle(5) && s.output_idle(6));
    step(&mut s, |_, _| true);
    assert!(s.output_idle(5) && s.is_idle());
    // A port the switch does not have has nothing queued.
    assert!(s.output_idle(64));
}

#[test]
fn a_failed_output_gives_back_what_was_queued_for_it() {
    let mut s = switch();
    for (handle, input, vc, to) in [
        (1, 0, 0, 5),
        (2, 1, 1, 5),
        (3, 0, 0, 6),
        (4, 0, 0, 5),
        (5, 2, 3, 5),
    ] {
        s.ingress(input, unicast(handle, vc, to)).unwrap();
    }
    let free_before = s.free_slots();
    let mut evicted = Vec::new();
    s.evict_output(5, |f| evicted.push((f.handle, f.input, f.vc)));
    // Every copy bound for 5, oldest first per (input, channel); the one for 6 stays.
    assert_eq!(evicted, [(1, 0, 0), (4, 0, 0), (2, 1, 1), (5, 2, 3)]);
    assert_eq!(s.counters().evicted, 4);
    assert_eq!(s.free_slots(), free_before + 4);
    // Routed around the port, the evicted packets can come back in and leave elsewhere.
    s.routes.set(5, PortSet::single(7)).unwrap();
    s.ingress(0, unicast(1, 0, 5)).unwrap();
    let mut out: Vec<(u32, usize)> = Vec::new();
    for _ in 0..2 {
        out.extend(step(&mut s, |_, _| true).iter().map(|f| (f.handle, f.output)));
    }
    out.sort();
    assert_eq!(out, [(1, 7), (3, 6)]);
    assert!(s.is_idle());
}

#[test]
fn flows_on_a_failed_port_move_to_the_others_of_their_route_and_the_rest_stay() {
    use switch_fw::route::Flow;
    let mut s = switch();
    let route = PortSet((1 << 4) | (1 << 5) | (1 << 6));
    s.routes.set(7, route).unwrap();
    let flow = |source: u16| Flow {
        source,
        destination: 7,
        vc: 0,
    };
    let port_of = |s: &mut S, source: u16| -> usize {
        let arrival = Arrival {
            source: Some(source),
            ..unicast(u32::from(source), 0, 7)
        };
        s.ingress(0, arrival).unwrap();
        let f = step(&mut s.clone(), |_, _| true);
        s.evict_output(f[0].output, |_| {});
        f[0].output
    };
    let before: Vec<usize> = (0..64).map(|source| port_of(&mut s, source)).collect();
    assert!(before.contains(&5), "some flow hashes onto port 5");
    s.set_port_down(5, true);
    assert_eq!(s.ports_down(), PortSet::single(5));
    let live = PortSet((1 << 4) | (1 << 6));
    for source in 0..64u16 {
        let now = port_of(&mut s, source);
        if before[usize::from(source)] == 5 {
            // The same hash, over the ports still up.
            assert_eq!(Some(now), flow(source).pick(live), "flow from {source}");
        } else {
            assert_eq!(
                now,
                before[usize::from(source)],
                "flow from {source} keeps its port"
            );
        }
    }
    // With every port of the route down the packet is refused, not dropped: nothing counted.
    s.set_port_down(4, true);
    s.set_port_down(6, true);
    let drops = s.counters().route_drops;
    assert_eq!(
        s.ingress(0, unicast(99, 0, 7)),
        Err(SwitchError::PortDown {
            port: flow(0).pick(route).unwrap()
        })
    );
    assert_eq!(s.counters().route_drops, drops);
    assert!(s.is_idle());
    // Nor is a multicast copy queued for a failed port.
    s.multicast
        .set(3, PortSet((1 << 2) | (1 << 5) | (1 << 6)))
        .unwrap();
    let copy = Arrival {
        destination: Destination::Multicast(3),
        ..unicast(100, 0, 0)
    };
    assert_eq!(s.ingress(0, copy), Ok(1));
    assert_eq!(
        step(&mut s, |_, _| true)
            .iter()
            .map(|f| f.output)
            .collect::<Vec<_>>(),
        [2]
    );
    // Ports back up take their flows back.
    for port in [4, 5, 6] {
        s.set_port_down(port, false);
    }
    assert_eq!(s.ports_down(), PortSet::EMPTY);
    for source in 0..64u16 {
        assert_eq!(port_of(&mut s, source), before[usize::from(source)]);
    }
}
#[test]
fn partitions_isolate_endpoints() {
    let mut s = switch();
    s.partitions.assign(1, 7).unwrap();
    let p = Arrival {
        source: Some(0),
        ..unicast(1, 0, 1)
    };
    assert_eq!(
        s.ingress(0, p),
        Err(SwitchError::CrossPartition { from: 0, to: 7 })
    );
    assert_eq!(s.counters().partition_drops, 1);
    s.partitions.assign(0, 7).unwrap();
    assert_eq!(s.ingress(0, p), Ok(1));
}

#[test]
fn unroutable_packets_are_dropped_and_counted() {
    let mut s = switch();
    assert_eq!(
        s.ingress(0, unicast(1, 0, 300)),
        Err(SwitchError::NoRoute { endpoint: 300 })
    );
    assert_eq!(
        s.ingress(9, unicast(1, 0, 1)),
        Err(SwitchError::NoSuchPort { port: 9 })
    );
    assert_eq!(s.counters().route_drops, 1);
    // A switch whose caller returns such packets to their source refuses them alike, undropped.
    s.keeps_unroutable = true;
    assert_eq!(
        s.ingress(0, unicast(2, 0, 300)),
        Err(SwitchError::NoRoute { endpoint: 300 })
    );
    assert_eq!((s.counters().route_drops, s.counters().arrived), (1, 2));
    assert!(s.is_idle());
}

#[test]
fn multicast_copies_skip_the_ingress_port() {
    let mut s = switch();
    s.multicast.set(3, PortSet(0b1111)).unwrap();
    let p = Arrival {
        destination: Destination::Multicast(3),
        ..unicast(7, 1, 0)
    };
    assert_eq!(s.ingress(2, p), Ok(3));
    let mut outputs = Vec::new();
    for _ in 0..3 {
        outputs.extend(step(&mut s, |_, _| true).into_iter().map(|f| f.output));
    }
    outputs.sort();
    assert_eq!(outputs, [0, 1, 3]);
}

#[test]
fn reductions_are_summed_and_multicast() {
    let mut s = switch();
    s.multicast.set(1, PortSet(0b1111)).unwrap();
    s.reducer
        .set(
            0,
            Some(ReductionGroup {
                contributors: PortSet(0b1111),
                result_group: 1,
                element: Element::U32,
            }),
        )
        .unwrap();
    let mut done = None;
    for port in 0..4 {
        let data: Vec<u8> = (0..32u32)
            .flat_map(|i| (i * 10 + port as u32).to_le_bytes())
            .collect();
        done = s.reducer.contribute(port, 0, 77, &data).unwrap();
    }
    let done = done.unwrap();
    assert_eq!(
        u32::from_le_bytes(done.data[4..8].try_into().unwrap()),
        4 * 10 + 6
    );
    assert_eq!(s.inject_reduced(&done, 99, 2, 9), Ok(4));
    let mut n = 0;
    for _ in 0..4 {
        n += step(&mut s, |_, _| true)
            .iter()
            .filter(|f| f.handle == 99 && f.input == 8)
            .count();
    }
    assert_eq!(n, 4);
    assert_eq!(s.counters().reductions, 1);
    // The answer to an ld_reduce goes to the one endpoint that asked, from the engine's input, and is
    // counted as a reduction too.
    assert_eq!(s.inject_reduced_to(unicast(100, 3, 5)), Ok(1));
    let out = step(&mut s, |_, _| true);
    assert!(
        out.iter().any(|f| (f.handle, f.input, f.output) == (100, 8, 5)),
        "{out:?}"
    );
    assert_eq!(s.counters().reductions, 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random arrivals, random credit, random output completion: every packet leaves exactly once, in
    /// the order it arrived per (input, channel, output); an output carries one packet at a time; an
    /// input sends at most one packet per cycle.
    #[test]
    fn every_packet_leaves_once_in_order(
        arrivals in prop::collection::vec((0usize..8, 0u8..4, 0u16..8, 0u8..3), 1..300),
        credit_pattern in any::<u64>(),
    ) {
        let mut s = switch();
        let mut expected: BTreeMap<(usize, u8, usize), VecDeque<u32>> = BTreeMap::new();
        let mut pending = arrivals.iter().enumerate().collect::<VecDeque<_>>();
        let mut busy: BTreeMap<usize, u32> = BTreeMap::new();
        let mut left = 0usize;
        let mut cycle = 0u64;
        while !pending.is_empty() || !s.is_idle() || !busy.is_empty() {
            cycle += 1;
            prop_assert!(cycle < 100_000, "stuck");
            // A few arrivals per cycle.
            for _ in 0..3 {
                if let Some((h, &(port, vc, to, _))) = pending.pop_front() {
                    if s.ingress(port, unicast(h as u32, vc, to)).is_ok() {
                        expected.entry((port, vc, usize::from(to))).or_default().push_back(h as u32);
                    }
                }
            }
            // Outputs finish after a packet-dependent number of cycles.
            let finished: Vec<usize> = busy.iter().filter(|(_, &t)| t == 0).map(|(&o, _)| o).collect();
            for o in finished {
                busy.remove(&o);
                s.output_done(o);
            }
            for t in busy.values_mut() {
                *t = t.saturating_sub(1);
            }
            let mut out: HVec<Forward, 8> = HVec::new();
            let c = credit_pattern.rotate_left(cycle as u32);
            s.arbitrate(|o, vc| (c >> (o * 4 + vc)) & 1 == 1 || cycle % 7 == 0, &mut out);
            let mut inputs = std::collections::BTreeSet::new();
            for f in out {
                prop_assert!(!busy.contains_key(&f.output), "output {} double-booked", f.output);
                prop_assert!(inputs.insert(f.input), "input {} sent twice in a cycle", f.input);
                let q = expected.get_mut(&(f.input, f.vc, f.output)).unwrap();
                prop_assert_eq!(q.pop_front(), Some(f.handle));
                busy.insert(f.output, u32::from(arrivals[f.handle as usize].3));
                left += 1;
            }
        }
        prop_assert!(expected.values().all(VecDeque::is_empty));
        prop_assert_eq!(left as u64, s.counters().forwarded);
    }

    /// Ports fail at random cycles, as the switch's firmware sees its links go down: it marks the port
    /// and takes back what was queued for it. Every packet taken in then leaves once, by a port of its
    /// route that has not failed, or is given back once; one refused was refused because every port of
    /// its route had failed; and a flow whose port never failed keeps it.
    #[test]
    fn with_ports_failing_every_packet_leaves_once_by_a_live_port_or_is_given_back(
        routes in prop::collection::vec(1u64..256, 8),
        arrivals in prop::collection::vec((0usize..8, 0u8..4, 0u16..8, 0u16..16), 1..300),
        failures in prop::collection::vec((0u64..150, 0usize..8), 0..5),
        credit_pattern in any::<u64>(),
    ) {
        use switch_fw::route::Flow;
        let mut s = switch();
        for (e, &ports) in routes.iter().enumerate() {
            s.routes.set(e as u16, PortSet(ports)).unwrap();
        }
        let mut down = 0u64;
        let mut taken: BTreeMap<u32, (u16, Flow)> = BTreeMap::new();
        let mut done: BTreeMap<u32, &str> = BTreeMap::new();
        let mut pending = arrivals.iter().enumerate().collect::<VecDeque<_>>();
        let mut cycle = 0u64;
        while !pending.is_empty() || !s.is_idle() {
            cycle += 1;
            prop_assert!(cycle < 100_000, "stuck");
            for &(at, port) in &failures {
                if at == cycle && down & (1 << port) == 0 {
                    down |= 1 << port;
                    s.set_port_down(port, true);
                    let mut back = Vec::new();
                    s.evict_output(port, |f| back.push(f.handle));
                    for h in back {
                        prop_assert!(done.insert(h, "given back").is_none(), "packet {} twice", h);
                    }
                }
            }
            for _ in 0..3 {
                let Some((h, &(input, vc, to, source))) = pending.pop_front() else { break };
                let arrival = Arrival { source: Some(source), ..unicast(h as u32, vc, to) };
                match s.ingress(input, arrival) {
                    Ok(copies) => {
                        prop_assert_eq!(copies, 1);
                        let flow = Flow { source, destination: to, vc };
                        taken.insert(h as u32, (to, flow));
                    }
                    Err(SwitchError::PortDown { .. }) => {
                        prop_assert_eq!(routes[usize::from(to)] & !down, 0, "refused with a live port")
                    }
                    Err(e) => prop_assert!(false, "refused: {:?}", e),
                }
            }
            let mut out: HVec<Forward, 8> = HVec::new();
            let c = credit_pattern.rotate_left(cycle as u32);
            s.arbitrate(|o, vc| (c >> (o * 4 + vc)) & 1 == 1 || cycle % 5 == 0, &mut out);
            for f in out {
                s.output_done(f.output);
                let (to, flow) = taken[&f.handle];
                let route = routes[usize::from(to)];
                prop_assert!(route & (1 << f.output) != 0, "left by port {} off its route", f.output);
                prop_assert!(down & (1 << f.output) == 0, "left by failed port {}", f.output);
                let hashed = flow.pick(PortSet(route)).unwrap();
                if down & (1 << hashed) == 0 {
                    prop_assert_eq!(f.output, hashed, "a flow on a live port keeps it");
                }
                prop_assert!(done.insert(f.handle, "left").is_none(), "packet {} twice", f.handle);
            }
        }
        let accounted: Vec<u32> = done.keys().copied().collect();
        prop_assert_eq!(accounted, taken.keys().copied().collect::<Vec<_>>());
    }
}

#[test]
fn a_multicast_refused_for_room_is_counted_as_refused_and_arrives_once_taken() {
    let mut s = switch();
    s.multicast.set(3, PortSet(0xFF)).unwrap();
    let share = 512 / (9 * 4);
    for h in 0..share as u32 - 4 {
        s.ingress(0, unicast(h, 0, 5)).unwrap();
    }
    let multicast = Arrival {
        destination: Destination::Multicast(3),
        ..unicast(100, 0, 0)
    };
    // Four slots left on (input 0, channel 0), seven copies wanted (none back out of port 0): refused,
    // nothing queued.
    assert_eq!(s.ingress(0, multicast), Err(SwitchError::BufferFull { port: 0 }));
    let c = *s.counters();
    assert_eq!((c.arrived, c.refused_full), (share as u64 - 4, 1));
    // Once the unicasts have left, the same offer is taken, and arrives once.
    while s.queued(0) > 0 {
        step(&mut s, |_, _| true);
    }
    assert_eq!(s.ingress(0, multicast), Ok(7));
    let c = *s.counters();
    assert_eq!((c.arrived, c.refused_full), (share as u64 - 3, 1));
}

#[test]
fn a_route_to_a_port_the_switch_lacks_is_refused_not_a_packet_queued_nowhere() {
    use switch_fw::regs::{MULTICAST, REDUCTION, ROUTES};
    let mut s = switch();
    // The registers refuse it, and nothing changes.
    let bad = |address| Err(SwitchError::BadRegister { address });
    assert_eq!(s.write_register(ROUTES + 8 * 5, 1 << 20), bad(ROUTES + 8 * 5));
    assert_eq!(s.write_register(ROUTES + 8 * 5 + 4, 1), bad(ROUTES + 8 * 5 + 4));
    assert_eq!(s.routes.get(5), PortSet::single(5));
    assert_eq!(s.write_register(MULTICAST + 8, 0x1_0001), bad(MULTICAST + 8));
    assert_eq!(s.write_register(REDUCTION + 4, 1), bad(REDUCTION + 4));
    assert_eq!(s.read_register(REDUCTION + 4), Ok(0));
    // Set directly, it drops the packet, counted: it does not take it and queue no copy.
    s.routes.set(5, PortSet::single(20)).unwrap();
    assert_eq!(
        s.ingress(0, unicast(1, 0, 5)),
        Err(SwitchError::RouteToNoPort {
            endpoint: 5,
            port: 20
        })
    );
    assert_eq!((s.counters().arrived, s.counters().route_drops), (1, 1));
    assert!(s.is_idle());
    // So does a multicast group naming such a port, even beside ports the switch has.
    s.multicast.set(1, PortSet(1 << 2 | 1 << 20 | 1 << 30)).unwrap();
    let mut copy = unicast(4, 0, 5);
    copy.destination = Destination::Multicast(1);
    assert_eq!(
        s.ingress(0, copy),
        Err(SwitchError::GroupToNoPort { group: 1, port: 20 })
    );
    assert_eq!((s.counters().arrived, s.counters().route_drops), (2, 2));
    assert!(s.is_idle());
    // A packet on a channel there is not is refused before it is taken, as one at a port there is not.
    assert_eq!(
        s.ingress(0, unicast(2, 4, 1)),
        Err(SwitchError::NoSuchVc { vc: 4 })
    );
    assert_eq!(
        s.ingress(9, unicast(3, 0, 1)),
        Err(SwitchError::NoSuchPort { port: 9 })
    );
    assert_eq!((s.counters().arrived, s.counters().route_drops), (2, 2));
}

/// A switch core sized for more ports than its board wires (as the simulator's are: 64, with the
/// identity's port count the node's) has the ports its port-count register reads, no more: the
/// registers refuse a mask that names a port beyond them, and a packet whose table names one set
/// directly is dropped, as on a core sized to fit.
#[test]
fn masks_are_held_to_the_port_count_the_registers_read() {
    use switch_fw::identity::{Identity, NodeType, PORT_COUNT};
    use switch_fw::regs::{MULTICAST, REDUCTION, ROUTES};
    let mut s: Switch<64, 512> = Switch::new();
    s.identity = Identity::new(1, NodeType::Switch).with_ports(8).unwrap();
    assert_eq!(s.read_register(PORT_COUNT), Ok(8));
    let bad = |address| Err(SwitchError::BadRegister { address });
    assert_eq!(s.write_register(ROUTES + 8 * 5, 1 << 20), bad(ROUTES + 8 * 5));
    assert_eq!(s.write_register(ROUTES + 8 * 5 + 4, 1), bad(ROUTES + 8 * 5 + 4));
    assert_eq!(s.write_register(MULTICAST + 8, 1 << 8), bad(MULTICAST + 8));
    assert_eq!(s.write_register(REDUCTION, 1 << 9), bad(REDUCTION));
    assert_eq!(s.routes.get(5), PortSet::EMPTY);
    assert_eq!(s.write_register(ROUTES + 8 * 5, 1 << 7), Ok(()));
    // Set directly: dropped and counted, not queued for a port that is not there.
    s.routes.set(5, PortSet::single(20)).unwrap();
    assert_eq!(
        s.ingress(0, unicast(1, 0, 5)),
        Err(SwitchError::RouteToNoPort {
            endpoint: 5,
            port: 20
        })
    );
    s.multicast.set(1, PortSet(1 << 2 | 1 << 9)).unwrap();
    let mut copy = unicast(2, 0, 5);
    copy.destination = Destination::Multicast(1);
    assert_eq!(
        s.ingress(0, copy),
        Err(SwitchError::GroupToNoPort { group: 1, port: 9 })
    );
    assert_eq!(s.counters().route_drops, 2);
    assert!(s.is_idle());
}

/// A reduction group's third register with a reserved bit (31:18) set is refused and changes nothing:
/// 0004_0001h had read as element 0 and removed the group.
#[test]
fn a_reduction_group_write_with_a_reserved_bit_is_refused() {
    use switch_fw::regs::REDUCTION;
    let mut s = switch();
    assert_eq!(s.write_register(REDUCTION, 0b11), Ok(()));
    assert_eq!(s.write_register(REDUCTION + 8, 1 << 16 | 1), Ok(()));
    for bit in 18..32 {
        for element in [0, 1 << 16] {
            assert_eq!(
                s.write_register(REDUCTION + 8, 1 << bit | element | 1),
                Err(SwitchError::BadRegister {
                    address: REDUCTION + 8
                }),
                "bit {bit}"
            );
        }
    }
    assert_eq!(s.read_register(REDUCTION + 8), Ok(1 << 16 | 1));
    assert_eq!(s.read_register(REDUCTION), Ok(0b11));
}

/// A reduction's result refused for want of room is offered again, as any packet refused so: it is
/// one reduction, counted once, when it is taken.
#[test]
fn a_reduction_result_refused_for_room_is_counted_once() {
    let mut s: Switch<8, 64> = Switch::new();
    for e in 0..8u16 {
        s.routes.set(e, PortSet::single(usize::from(e))).unwrap();
    }
    s.multicast.set(1, PortSet(0b110)).unwrap();
    s.reducer
        .set(
            0,
            Some(ReductionGroup {
                contributors: PortSet(0b1),
                result_group: 1,
                element: Element::U32,
            }),
        )
        .unwrap();
    let done = s.reducer.contribute(0, 0, 3, &[1; 8]).unwrap().unwrap();
    // The engine fills the buffer.
    let mut h = 0;
    while s.free_slots() > 0 {
        s.inject(unicast(h, 0, 5)).unwrap();
        h += 1;
    }
    assert_eq!(
        s.inject_reduced(&done, 100, 0, 9),
        Err(SwitchError::BufferFull { port: 8 })
    );
    assert_eq!(
        s.inject_reduced_to(unicast(101, 0, 6)),
        Err(SwitchError::BufferFull { port: 8 })
    );
    assert_eq!(s.counters().reductions, 0, "nothing taken yet");
    while !s.is_idle() {
        let mut out: HVec<Forward, 8> = HVec::new();
        s.arbitrate(|_, _| true, &mut out);
        for f in &out {
            s.output_done(f.output);
        }
    }
    assert_eq!(s.inject_reduced(&done, 100, 0, 9), Ok(2));
    assert_eq!(s.inject_reduced_to(unicast(101, 0, 6)), Ok(1));
    assert_eq!(s.counters().reductions, 2);
}

/// Spec 5: a packet whose route (set directly, bypassing the registers) names a port the switch does not
/// have is dropped and counted, as a multicast group's is, even when its flow hashes onto a port of the
/// route that the switch has, and whichever port failover would pick.
#[test]
fn a_route_naming_a_port_the_switch_lacks_beside_its_own_drops_every_flow() {
    use switch_fw::route::Flow;
    let mut s = switch();
    let route = PortSet(1 << 2 | 1 << 3 | 1 << 20);
    s.routes.set(5, route).unwrap();
    for source in 0..16u16 {
        let flow = Flow {
            source,
            destination: 5,
            vc: 0,
        };
        let arrival = Arrival {
            source: Some(source),
            ..unicast(u32::from(source), 0, 5)
        };
        assert_eq!(
            s.ingress(0, arrival),
            Err(SwitchError::RouteToNoPort {
                endpoint: 5,
                port: 20
            }),
            "flow from {source}, hashed onto port {:?}",
            flow.pick(route)
        );
    }
    assert_eq!((s.counters().arrived, s.counters().route_drops), (16, 16));
    assert!(s.is_idle());
}

/// `arbitrate` appends to `out`: a decision that does not fit in it (the caller kept earlier ones there)
/// is not taken, and its packet stays queued, rather than leaving the queue unreported, counted as
/// forwarded and its output busy for ever.
#[test]
fn a_decision_that_does_not_fit_in_out_is_not_taken() {
    let mut s = switch();
    s.ingress(0, unicast(1, 0, 5)).unwrap();
    s.ingress(1, unicast(2, 0, 6)).unwrap();
    let mut out: HVec<Forward, 8> = HVec::new();
    let earlier = Forward {
        input: 3,
        vc: 0,
        output: 3,
        handle: 0,
        flits: 9,
        cut_through: false,
    };
    while out.len() < 7 {
        out.push(earlier).unwrap();
    }
    s.arbitrate(|_, _| true, &mut out);
    assert_eq!(out.len(), 8);
    let sent = out[7];
    assert_eq!(s.counters().forwarded, 1);
    assert_eq!(s.queued(0) + s.queued(1), 1, "the other packet is still queued");
    s.output_done(sent.output);
    let left = step(&mut s, |_, _| true);
    assert_eq!(left.len(), 1);
    assert_ne!(left[0].handle, sent.handle);
    assert!(s.is_idle());
}

/// A packet offered at a port beyond the port count the registers read (a core sized for more ports
/// than its board wires) is refused as at a port the core lacks: not taken, not counted.
#[test]
fn a_packet_at_a_port_beyond_the_port_count_is_refused() {
    use switch_fw::identity::{Identity, NodeType};
    let mut s: Switch<64, 512> = Switch::new();
    s.identity = Identity::new(1, NodeType::Switch).with_ports(8).unwrap();
    s.routes.set(5, PortSet::single(1)).unwrap();
    assert_eq!(
        s.ingress(20, unicast(1, 0, 5)),
        Err(SwitchError::NoSuchPort { port: 20 })
    );
    assert_eq!(s.counters().arrived, 0);
    assert!(s.is_idle());
    assert!(!s.has_room(20, 0), "no link there to deliver anything");
    assert!(s.has_room(7, 0) && s.has_room(64, 0), "a port, and the engine");
    assert_eq!(s.ingress(7, unicast(2, 0, 5)), Ok(1));
}
