//! Entry points for fuzzing the switch core with hostile input.
//!
//! A switch's firmware takes register writes from a fabric manager and packets from its links: both may be
//! wrong. Each function takes arbitrary bytes, drives the core with them and checks the properties that
//! must hold for any input. The cargo-fuzz targets in `fuzz/` call these, and `tests/fuzz_replay.rs`
//! replays the committed corpora and seeded random inputs through the same functions, so CI needs no
//! nightly toolchain.
//!
//! A property that does not hold is reported by panicking: that is what a fuzzer looks for.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use heapless::Vec;

use crate::regs::{MULTICAST, PARTITIONS, PORT_COUNT, REDUCTION, ROUTES};
use crate::switch::{Arrival, Destination, Forward, Switch};
use crate::{SwitchError, MAX_ENDPOINTS};

/// A fuzz entry point and the name of its cargo-fuzz target.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz entry point, by the name of its cargo-fuzz target.
pub const TARGETS: &[Target] = &[("switch_core", switch_core)];

/// Ports of the fuzzed switch: fewer than 64, so that masks can name ports it does not have.
const PORTS: usize = 8;
/// The most packets one input makes (each gets its own handle).
const PACKETS: usize = 256;

type Core = Switch<PORTS, 144, 4>;

/// The input, read a field at a time; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let (taken, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        taken
    }
}

/// What the harness knows the switch holds: the copies of each packet still queued, where each may
/// leave, and the outputs sending.
struct Ledger {
    copies: [u8; PACKETS],
    /// Each packet's input, virtual channel and flits, and the outputs its copies may still leave by
    /// (a unicast's route, a multicast's group less its input and failed ports): a copy is no more
    /// than its count.
    packet: [(usize, u8, u8, u64); PACKETS],
    packets: usize,
    busy: u64,
}

impl Ledger {
    fn queued(&self) -> usize {
        self.copies.iter().map(|&c| usize::from(c)).sum()
    }

    /// The switch queued `copies` of `packet`, taken at `input`, for some of `outputs`.
    fn queue(&mut self, copies: usize, input: usize, packet: &Arrival, outputs: u64) {
        self.copies[self.packets] = copies as u8;
        self.packet[self.packets] = (input, packet.vc, packet.flits, outputs);
        self.packets += 1;
    }

    /// A copy came out (forwarded or evicted): it must be one the switch holds, as it was taken, and
    /// by an output it may leave by that no other copy of it took.
    fn out(&mut self, f: &Forward) {
        let copies = self
            .copies
            .get_mut(f.handle as usize)
            .unwrap_or_else(|| panic!("a handle the switch was never given: {f:?}"));
        assert!(*copies > 0, "a copy out twice, or never queued: {f:?}");
        *copies -= 1;
        assert!(f.output < PORTS && f.input <= PORTS, "{f:?}");
        let (input, vc, flits, outputs) = &mut self.packet[f.handle as usize];
        assert_eq!(
            (f.input, f.vc, f.flits),
            (*input, *vc, *flits),
            "not as taken: {f:?}"
        );
        assert!(
            *outputs & (1 << f.output) != 0,
            "an output not its own, or twice: {f:?}"
        );
        *outputs &= !(1 << f.output);
    }
}

/// The outputs a packet offered at `input` may leave by, as the switch's tables stand: a unicast's
/// route (any of it: failover may pick another of its ports), a multicast group's ports less the input
/// and those failed (all of them: one copy each).
fn outputs(s: &Core, input: usize, packet: &Arrival) -> u64 {
    let all_ports = (1u64 << PORTS) - 1;
    match packet.destination {
        Destination::Unicast(e) => s.routes.get(e).0 & all_ports,
        Destination::Multicast(g) => {
            let group = s.multicast.get(g).map_or(0, |p| p.0);
            let back = if input < PORTS { 1 << input } else { 0 };
            group & all_ports & !s.ports_down().0 & !back
        }
    }
}

fn total_queued(s: &Core) -> usize {
    (0..=PORTS).map(|input| s.queued(input)).sum()
}

/// A packet from the input, with the next handle.
fn arrival(input: &mut Input, handle: u32) -> Arrival {
    let kind = input.u8();
    let vc = input.u8() % 5;
    let flits = input.u8();
    let to = input.u16();
    let destination = if kind & 1 == 0 {
        Destination::Unicast(to % (MAX_ENDPOINTS as u16 + 64))
    } else {
        Destination::Multicast(to % 80)
    };
    let source = (kind & 2 != 0).then(|| input.u16() % (MAX_ENDPOINTS as u16 + 64));
    Arrival {
        handle,
        vc,
        flits,
        destination,
        source,
    }
}

/// Drives a switch of 8 ports with operations read from `data`: register writes and reads anywhere (most
/// in the tables), packets in at any port (some it does not have) for any destination, from the ports
/// and from its engine, reduction contributions, arbitration under any credits, outputs freed, failed and
/// evicted. Checks that a register written reads back as written, that no table the registers accept
/// names a port the switch does not have, that a packet taken is queued (a unicast once) and one refused
/// leaves nothing queued, that the counters count every packet offered at a port once, that a multicast
/// packet is copied to every port of its group but its input and the failed ones, that every copy queued
/// comes out exactly once (forwarded or evicted), as it was taken (input, channel, flits), by an output
/// its route or group has and no other copy of it took, only while that output is free, and that the
/// switch, given every credit, empties.
pub fn switch_core(data: &[u8]) {
    let mut input = Input(data);
    let mut s = Core::new();
    let mut ledger = Ledger {
        copies: [0; PACKETS],
        packet: [(0, 0, 0, 0); PACKETS],
        packets: 0,
        busy: 0,
    };
    let all_ports = (1u64 << PORTS) - 1;
    while !input.0.is_empty() {
        match input.u8() % 9 {
            0 => {
                let which = input.u8();
                let base = [ROUTES, PARTITIONS, MULTICAST, REDUCTION, PORT_COUNT, 0][usize::from(which % 6)];
                let offset = u32::from(input.u16()) * 4 + u32::from(which >> 7);
                let address = if which % 6 == 5 {
                    input.u32()
                } else {
                    base + offset
                };
                // Mostly masks of the ports there are, or the first bits of a reduction's control word.
                let value = match which & 0x60 {
                    0 => input.u32(),
                    0x20 => input.u32() & 0x3_003F,
                    _ => input.u32() & 0xFF,
                };
                if s.write_register(address, value).is_ok() {
                    let table = address < PARTITIONS || (MULTICAST..REDUCTION).contains(&address);
                    if table {
                        assert_eq!(s.read_register(address), Ok(value), "{address:#x}");
                    }
                }
                for e in 0..MAX_ENDPOINTS as u16 {
                    assert_eq!(s.routes.get(e).0 & !all_ports, 0, "a route to a port not there");
                }
                for g in 0..crate::multicast::GROUPS as u16 {
                    let ports = s.multicast.get(g).unwrap_or_default();
                    assert_eq!(ports.0 & !all_ports, 0, "a multicast group with a port not there");
                }
                for g in 0..crate::reduce::REDUCTION_GROUPS as u16 {
                    if let Some(group) = s.reducer.get(g) {
                        assert_eq!(group.contributors.0 & !all_ports, 0, "a contributor not there");
                    }
                }
            }
            1 => {
                let _ = s.read_register(input.u32());
            }
            op @ (2 | 3) => {
                if ledger.packets == PACKETS {
                    continue;
                }
                let port = usize::from(input.u8() % (PORTS as u8 + 2));
                let packet = arrival(&mut input, ledger.packets as u32);
                let (before, arrived) = (total_queued(&s), s.counters().arrived);
                let dropped = |s: &Core| s.counters().partition_drops + s.counters().route_drops;
                let drops = dropped(&s);
                let from = if op == 2 { port } else { PORTS };
                let may = outputs(&s, from, &packet);
                let result = if op == 2 {
                    s.ingress(port, packet)
                } else {
                    s.inject(packet)
                };
                match result {
                    Ok(copies) => {
                        if matches!(packet.destination, Destination::Unicast(_)) {
                            assert_eq!(copies, 1, "{packet:?}");
                        }
                        assert!(copies <= PORTS);
                        // A multicast copy for each port of its group it may leave by, no fewer.
                        if matches!(packet.destination, Destination::Multicast(_)) {
                            assert_eq!(copies, may.count_ones() as usize, "{packet:?}");
                        }
                        ledger.queue(copies, from, &packet, may);
                        assert_eq!(total_queued(&s), before + copies);
                    }
                    Err(_) => assert_eq!(total_queued(&s), before, "{result:?} left copies queued"),
                }
                // Offered at a port and on a channel there are (the engine's input always is), and not
                // refused for room: the packet was taken, counted as arrived if it came in at a port.
                let taken = (op == 3 || port < PORTS)
                    && packet.vc < 4
                    && !matches!(result, Err(SwitchError::BufferFull { .. }));
                assert_eq!(
                    s.counters().arrived,
                    arrived + u64::from(op == 2 && taken),
                    "{result:?}"
                );
                // A packet taken and not queued is dropped, and counted so, unless the caller keeps it.
                let kept = matches!(result, Err(SwitchError::PortDown { .. }));
                let lost = taken && result.is_err() && !kept;
                assert_eq!(dropped(&s), drops + u64::from(lost), "{result:?}");
            }
            4 => {
                let credits = input.u32();
                let forwarded = s.counters().forwarded;
                let mut out: Vec<Forward, PORTS> = Vec::new();
                s.arbitrate(|o, vc| credits & (1 << ((o * 4 + vc) % 32)) != 0, &mut out);
                assert_eq!(s.counters().forwarded, forwarded + out.len() as u64);
                for f in &out {
                    assert_eq!(
                        ledger.busy & (1 << f.output),
                        0,
                        "granted an output still sending: {f:?}"
                    );
                    assert!(
                        credits & (1 << ((f.output * 4 + usize::from(f.vc)) % 32)) != 0,
                        "{f:?}"
                    );
                    ledger.busy |= 1 << f.output;
                    ledger.out(f);
                }
            }
            5 => {
                let output = usize::from(input.u8() % (PORTS as u8 + 2));
                s.output_done(output);
                ledger.busy &= !(1u64.checked_shl(output as u32).unwrap_or(0));
            }
            6 => {
                let port = usize::from(input.u8() % (PORTS as u8 + 2));
                let down = input.u8() & 1 == 1;
                s.set_port_down(port, down);
            }
            7 => {
                let output = usize::from(input.u8() % (PORTS as u8 + 2));
                s.evict_output(output, |f| {
                    assert_eq!(f.output, output);
                    ledger.out(&f);
                });
                ledger.busy &= !(1u64.checked_shl(output as u32).unwrap_or(0));
            }
            _ => {
                let port = usize::from(input.u8() % (PORTS as u8 + 2));
                let group = input.u16() % 40;
                let chunk = u32::from(input.u8());
                let len = usize::from(input.u8() % 140);
                let data = input.bytes(len);
                if let Ok(Some(reduced)) = s.reducer.contribute(port, group, chunk, data) {
                    assert_eq!(usize::from(reduced.len), data.len());
                    if ledger.packets < PACKETS {
                        let before = total_queued(&s);
                        let handle = ledger.packets as u32;
                        let packet = Arrival {
                            handle,
                            vc: 0,
                            flits: 9,
                            destination: Destination::Multicast(reduced.result_group),
                            source: None,
                        };
                        let may = outputs(&s, PORTS, &packet);
                        if let Ok(copies) = s.inject_reduced(&reduced, handle, 0, 9) {
                            assert_eq!(copies, may.count_ones() as usize, "{reduced:?}");
                            ledger.queue(copies, PORTS, &packet, may);
                            assert_eq!(total_queued(&s), before + copies);
                        }
                    }
                }
            }
        }
        assert_eq!(total_queued(&s), ledger.queued());
        assert_eq!(s.is_idle(), ledger.queued() == 0);
    }
    // Every output freed, every credit: everything queued leaves.
    for output in 0..PORTS {
        s.output_done(output);
    }
    for _ in 0..=PACKETS * PORTS {
        if s.is_idle() {
            break;
        }
        let mut out: Vec<Forward, PORTS> = Vec::new();
        s.arbitrate(|_, _| true, &mut out);
        for f in &out {
            ledger.out(f);
            s.output_done(f.output);
        }
    }
    assert!(s.is_idle() && ledger.queued() == 0, "copies stuck in the queues");
}
