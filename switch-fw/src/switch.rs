//! The switch core: packets in at input ports, forwarding decisions out, sans-IO.
//!
//! The caller owns packet bytes and links; the switch owns decisions. For each packet that arrives it calls
//! [`Switch::ingress`] with a handle for the bytes and where the packet goes; the switch routes it
//! (checking partitions), queues a descriptor per copy in its virtual output queues, and each
//! [`Switch::arbitrate`] returns which queued packets go to which outputs now, respecting per-output,
//! per-channel credits. The caller sends them and calls [`Switch::output_done`] when an output is free
//! again. A packet that arrives to an empty queue and is granted in the same cycle is forwarded
//! cut-through.

use heapless::Vec;

use crate::arbiter::{requester, Islip, Match, Requesters, INPUTS, VCS_OF, WORDS};
use crate::identity::{Identity, NodeType};
use crate::multicast::Multicast;
use crate::partition::Partitions;
use crate::portset::PortSet;
use crate::reduce::{Reduced, Reducer};
use crate::route::{Flow, RouteTable};
use crate::voq::{Descriptor, Voqs};
use crate::{EndpointId, SwitchError, VCS};

/// For each virtual channel, every requester (input, channel) of that channel.
const VC_REQUESTERS: [Requesters; VCS] = VCS_OF;

/// Where a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Destination {
    /// One endpoint.
    Unicast(EndpointId),
    /// Every port of a multicast group.
    Multicast(u16),
}

/// A packet arriving at an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Arrival {
    /// The caller's handle for its bytes.
    pub handle: u32,
    /// Virtual channel, 0 to 3.
    pub vc: u8,
    /// Flits (credits it needs downstream).
    pub flits: u8,
    /// Where it goes.
    pub destination: Destination,
    /// Its source endpoint, when the switch can know it (an edge port's endpoint); checked against
    /// partitions and used for the multipath hash. Otherwise the input port is hashed.
    pub source: Option<EndpointId>,
}

/// A forwarding decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Forward {
    /// The input it waited at (`PORTS` is the reduction engine).
    pub input: usize,
    /// Virtual channel.
    pub vc: u8,
    /// The output to send it on.
    pub output: usize,
    /// The caller's handle.
    pub handle: u32,
    /// Flits.
    pub flits: u8,
    /// Whether it arrived to an empty queue and leaves in the same cycle (cut-through).
    pub cut_through: bool,
}

/// What the switch has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SwitchCounters {
    /// Packets taken in at a port: queued, or dropped for a partition or a missing route. An offer
    /// refused for want of room is counted once it is taken (see `refused_full`); one at a port or on a
    /// virtual channel the switch does not have is refused, not taken.
    pub arrived: u64,
    /// Packets (copies) forwarded. Besides multicast copies and what the switch's engine originates, a
    /// copy that a failed link handed back is forwarded again (`taken_back`), so this can exceed
    /// `arrived`.
    pub forwarded: u64,
    /// Of those, forwarded cut-through.
    pub cut_through: u64,
    /// Extra copies made for multicast.
    pub multicast_copies: u64,
    /// Packets dropped because they would cross a partition.
    pub partition_drops: u64,
    /// Packets dropped for lack of a route or group. A packet the caller keeps to send another way
    /// ([`Switch::keeps_unroutable`]: returned to its source after a failure) is not dropped.
    pub route_drops: u64,
    /// Offers refused because the input had no room for every copy ([`SwitchError::BufferFull`]): nothing
    /// is dropped, the caller keeps the packet and offers it again (a multicast needs room for all its
    /// copies at once, which credits for one packet do not promise).
    pub refused_full: u64,
    /// Reductions completed: results the engine took to send (one refused for room counts once taken).
    pub reductions: u64,
    /// Packets (copies) taken out of the queues of a failed output.
    pub evicted: u64,
    /// Copies forwarded over a link that failed before the partner acknowledged them, which the link
    /// handed back for the switch to route again: each is forwarded twice. Counted by the caller, which
    /// owns the links ([`Switch::counters_mut`]).
    pub taken_back: u64,
}

/// Counters of several switches added up (a fabric's, say).
impl core::ops::AddAssign<&SwitchCounters> for SwitchCounters {
    fn add_assign(&mut self, other: &SwitchCounters) {
        // Taken apart whole, so that a counter added to the struct and not here does not compile.
        let SwitchCounters {
            arrived,
            forwarded,
            cut_through,
            multicast_copies,
            partition_drops,
            route_drops,
            refused_full,
            reductions,
            evicted,
            taken_back,
        } = *other;
        self.arrived += arrived;
        self.forwarded += forwarded;
        self.cut_through += cut_through;
        self.multicast_copies += multicast_copies;
        self.partition_drops += partition_drops;
        self.route_drops += route_drops;
        self.refused_full += refused_full;
        self.reductions += reductions;
        self.evicted += evicted;
        self.taken_back += taken_back;
    }
}

/// A switch of `PORTS` ports sharing a buffer of `SLOTS` packets, whose reduction engine holds `REDUCE`
/// chunks in progress.
#[derive(Clone, Debug)]
pub struct Switch<const PORTS: usize, const SLOTS: usize, const REDUCE: usize = 64> {
    /// Destination endpoint to output ports.
    pub routes: RouteTable,
    /// Endpoint partitions.
    pub partitions: Partitions,
    /// Multicast groups.
    pub multicast: Multicast,
    /// In-switch reduction.
    pub reducer: Reducer<REDUCE>,
    /// Reduction groups' contributor masks written through the registers since their last commit
    /// (`docs/spec.md` section 5): they take effect when the group's control word is written.
    pub(crate) staged_contributors: [Option<PortSet>; crate::reduce::REDUCTION_GROUPS],
    /// Virtual output queues; input `PORTS` is the reduction engine.
    queues: Voqs<PORTS, SLOTS>,
    /// Per output: requesters with a packet queued for it; and the outputs with any.
    waiting: [Requesters; PORTS],
    waiting_outputs: u64,
    /// Scratch for the arbiter's requests (only free outputs' entries are written and read).
    requests: [Requesters; PORTS],
    busy: u64,
    /// Ports whose link failed, as the switch's firmware learned from its data links: unicast flows
    /// hashed onto one move to the other ports of their route until the fabric manager's new routes.
    down: u64,
    arbiter: Islip<PORTS>,
    /// iSLIP rounds per cycle.
    pub iterations: usize,
    /// Whether a unicast packet with no route is the caller's to keep: refused
    /// ([`SwitchError::NoRoute`]) without counting a drop, as [`SwitchError::PortDown`] is. A fabric that
    /// fails over sends such a packet back to its source, and counts in `route_drops` (through
    /// [`Switch::counters_mut`]) only those it discards after all.
    pub keeps_unroutable: bool,
    cycle: u32,
    counters: SwitchCounters,
    /// Who the switch is and who is at each port: what its firmware learned as links came up.
    pub identity: Identity<PORTS>,
}

impl<const PORTS: usize, const SLOTS: usize, const REDUCE: usize> Default for Switch<PORTS, SLOTS, REDUCE> {
    fn default() -> Self {
        Switch::new()
    }
}

impl<const PORTS: usize, const SLOTS: usize, const REDUCE: usize> Switch<PORTS, SLOTS, REDUCE> {
    const VALID: () = assert!(PORTS > 0 && PORTS <= crate::MAX_PORTS, "1 to 64 ports");

    /// The ports the switch has, as a mask: as many as its port-count register reads (the identity's
    /// port count, which may be fewer than `PORTS` when the core is sized for more than its board wires).
    pub(crate) fn port_mask(&self) -> u64 {
        match self.identity.ports() {
            n if n >= 64 => u64::MAX,
            n => (1u64 << n) - 1,
        }
    }

    /// An empty switch: no routes, everything in partition 0, no groups.
    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        Switch {
            routes: RouteTable::default(),
            partitions: Partitions::default(),
            multicast: Multicast::default(),
            reducer: Reducer::default(),
            staged_contributors: [None; crate::reduce::REDUCTION_GROUPS],
            queues: Voqs::default(),
            waiting: [[0; WORDS]; PORTS],
            waiting_outputs: 0,
            requests: [[0; WORDS]; PORTS],
            busy: 0,
            down: 0,
            arbiter: Islip::default(),
            iterations: 2,
            keeps_unroutable: false,
            cycle: 0,
            counters: SwitchCounters::default(),
            identity: Identity::new(0, NodeType::Switch),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &SwitchCounters {
        &self.counters
    }

    /// Counters, for the caller to count what only it sees: packets a failed link handed back
    /// (`taken_back`), or dropped after the switch refused them ([`Switch::keeps_unroutable`]).
    pub fn counters_mut(&mut self) -> &mut SwitchCounters {
        &mut self.counters
    }

    /// Packets queued at `input` (`PORTS` for the reduction engine).
    pub fn queued(&self, input: usize) -> usize {
        self.queues.used(input)
    }

    /// Whether `input` (a port the switch has, or `PORTS`, its engine) has room for another packet on
    /// `vc`: what the input's link may deliver.
    pub fn has_room(&self, input: usize, vc: usize) -> bool {
        (input < self.identity.ports() || input == PORTS) && self.queues.has_room(input, vc)
    }

    /// Mark `port`'s link failed (or back). A unicast packet whose flow hashes onto a failed port leaves by
    /// another port of its route, picked by the same hash among the ports still up (flows on live ports
    /// keep theirs, and their order); with none left it is refused ([`SwitchError::PortDown`]). A
    /// multicast packet is not copied to a failed port. This is the switch's own fast failover, before the
    /// fabric manager routes around the failure. What is already queued for the port stays there: see
    /// [`Switch::evict_output`].
    pub fn set_port_down(&mut self, port: usize, down: bool) {
        if port < PORTS {
            let bit = 1u64 << port;
            self.down = if down { self.down | bit } else { self.down & !bit };
        }
    }

    /// The ports marked failed ([`Switch::set_port_down`]).
    pub fn ports_down(&self) -> PortSet {
        PortSet(self.down)
    }

    /// Buffer slots free (what the switch's engine may still inject).
    pub fn free_slots(&self) -> usize {
        self.queues.free_slots()
    }

    /// A packet arrived at `port`. Returns the number of copies queued (more than one for multicast), or
    /// why it was refused (counted); a refused packet left nothing queued. [`SwitchError::BufferFull`]
    /// means "not now": the caller keeps the packet and offers it again once packets have left.
    #[inline(always)]
    pub fn ingress(&mut self, port: usize, packet: Arrival) -> Result<usize, SwitchError> {
        // The ports the switch has: as many as its port-count register reads.
        if port >= self.identity.ports() {
            return Err(SwitchError::NoSuchPort { port });
        }
        let queued = self.enqueue(port, packet);
        // Counted once taken: not one refused for room (it is offered again), nor one on a channel there
        // is not (neither queued nor dropped).
        if !matches!(
            queued,
            Err(SwitchError::BufferFull { .. } | SwitchError::NoSuchVc { .. })
        ) {
            self.counters.arrived += 1;
        }
        queued
    }

    /// Queue the result of a reduction (from [`Reducer::contribute`]) for its group's result ports, as a
    /// packet from the reduction engine with the caller's `handle` for its bytes.
    pub fn inject_reduced(
        &mut self,
        reduced: &Reduced,
        handle: u32,
        vc: u8,
        flits: u8,
    ) -> Result<usize, SwitchError> {
        let packet = Arrival {
            handle,
            vc,
            flits,
            destination: Destination::Multicast(reduced.result_group),
            source: None,
        };
        self.inject_reduction(packet)
    }

    /// Queue the result of a reduction for one endpoint instead of its group's result ports (the answer
    /// to an `ld_reduce`, which returns the sum to the endpoint that asked), counted as a reduction.
    pub fn inject_reduced_to(&mut self, packet: Arrival) -> Result<usize, SwitchError> {
        self.inject_reduction(packet)
    }

    /// Queue a reduction's result, counted once taken: not when refused for room (the caller offers it
    /// again) nor on a channel there is not, as [`Switch::ingress`] counts arrivals.
    fn inject_reduction(&mut self, packet: Arrival) -> Result<usize, SwitchError> {
        let queued = self.enqueue(PORTS, packet);
        if !matches!(
            queued,
            Err(SwitchError::BufferFull { .. } | SwitchError::NoSuchVc { .. })
        ) {
            self.counters.reductions += 1;
        }
        queued
    }

    /// Queue a packet that the switch itself originates (its reduction or collective engine), from the
    /// engine's input `PORTS`.
    pub fn inject(&mut self, packet: Arrival) -> Result<usize, SwitchError> {
        self.enqueue(PORTS, packet)
    }

    #[inline(always)]
    fn enqueue(&mut self, input: usize, packet: Arrival) -> Result<usize, SwitchError> {
        let vc = usize::from(packet.vc);
        if vc >= VCS {
            return Err(SwitchError::NoSuchVc { vc });
        }
        let outputs = match self.outputs_for(input, packet) {
            Ok(o) => o,
            Err(e) => {
                match e {
                    SwitchError::CrossPartition { .. } => self.counters.partition_drops += 1,
                    // Not dropped: the caller holds it until the routes change.
                    SwitchError::PortDown { .. } => {}
                    // Not dropped: the caller sends it another way.
                    SwitchError::NoRoute { .. } if self.keeps_unroutable => {}
                    _ => self.counters.route_drops += 1,
                }
                return Err(e);
            }
        };
        let descriptor = Descriptor {
            handle: packet.handle,
            flits: packet.flits,
            arrived: self.cycle,
        };
        // `outputs_for` has refused any route or group naming a port the switch lacks.
        // All copies or none: a multicast half queued would leave the caller unsure what it still owns.
        if self.queues.room(input, vc) < outputs.len() as usize {
            self.counters.refused_full += 1;
            return Err(SwitchError::BufferFull { port: input });
        }
        let mut copies = 0usize;
        for output in outputs.iter() {
            if !self.queues.push(input, vc, output, descriptor) {
                self.counters.refused_full += 1;
                return Err(SwitchError::BufferFull { port: input });
            }
            let r = requester(input, vc);
            self.waiting[output][r / 64] |= 1 << (r % 64);
            self.waiting_outputs |= 1 << output;
            copies += 1;
        }
        self.counters.multicast_copies += copies.saturating_sub(1) as u64;
        Ok(copies)
    }

    fn outputs_for(&self, input: usize, packet: Arrival) -> Result<PortSet, SwitchError> {
        match packet.destination {
            Destination::Unicast(destination) => {
                if let Some(source) = packet.source {
                    self.partitions.check(source, destination)?;
                }
                let flow = Flow {
                    source: packet.source.unwrap_or(input as u16),
                    destination,
                    vc: packet.vc,
                };
                let route = self.routes.get(destination);
                // A route set through `routes` itself (the registers refuse it) may name a port the
                // switch does not have: a drop, counted, whichever port the flow hashes onto, as a
                // multicast group's (spec 5).
                let absent = route.0 & !self.port_mask();
                if absent != 0 {
                    return Err(SwitchError::RouteToNoPort {
                        endpoint: destination,
                        port: absent.trailing_zeros() as usize,
                    });
                }
                let mut port = flow.pick(route).ok_or(SwitchError::NoRoute {
                    endpoint: destination,
                })?;
                if self.down & (1 << port) != 0 {
                    port = self.fail_over(flow, port)?;
                }
                Ok(PortSet::single(port))
            }
            // A multicast copy never goes back out of the port it came in on, nor out of a failed one.
            Destination::Multicast(group) => {
                let group_ports = self.multicast.get(group)?;
                // As a unicast route naming a port the switch lacks: a drop, counted, not copies to
                // ports there are not left out unsaid.
                let absent = group_ports.0 & !self.port_mask();
                if absent != 0 {
                    return Err(SwitchError::GroupToNoPort {
                        group,
                        port: absent.trailing_zeros() as usize,
                    });
                }
                let ports = PortSet(group_ports.0 & !self.down);
                Ok(if input < PORTS {
                    PortSet(ports.0 & !PortSet::single(input).0)
                } else {
                    ports
                })
            }
        }
    }

    /// The port for `flow`, whose route's hash picked `port`, a failed one: the same hash over the ports
    /// of the route still up ([`Switch::set_port_down`]). Kept out of line: it runs only between a
    /// failure and the fabric manager's new routes.
    #[cold]
    #[inline(never)]
    fn fail_over(&self, flow: Flow, port: usize) -> Result<usize, SwitchError> {
        let live = PortSet(self.routes.get(flow.destination).0 & !self.down);
        flow.pick(live).ok_or(SwitchError::PortDown { port })
    }

    /// Decide what leaves now, appended to `out`. `credit(output, vc)` says whether the link at `output`
    /// can take a packet of the longest size on `vc` (its downstream credit). Busy outputs are skipped
    /// until [`Switch::output_done`]. Pass `out` empty: once it is full, no more packets are taken.
    pub fn arbitrate(&mut self, mut credit: impl FnMut(usize, usize) -> bool, out: &mut Vec<Forward, PORTS>) {
        let mut free = 0u64;
        let mut candidates = self.waiting_outputs & !self.busy;
        while candidates != 0 {
            let o = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            let mut vcs = [0u64; WORDS];
            let mut any = false;
            for (vc, mask) in VC_REQUESTERS.iter().enumerate() {
                if credit(o, vc) {
                    any = true;
                    for (v, m) in vcs.iter_mut().zip(mask) {
                        *v |= m;
                    }
                }
            }
            if !any {
                continue;
            }
            for ((q, w), v) in self.requests[o].iter_mut().zip(&self.waiting[o]).zip(&vcs) {
                *q = w & v;
            }
            free |= 1 << o;
        }
        let mut matches: Vec<Match, PORTS> = Vec::new();
        self.arbiter
            .arbitrate(&self.requests, free, self.iterations, &mut matches);
        for &m in matches.iter() {
            // A decision the caller could not be told of is not taken: the packet stays queued.
            if out.is_full() {
                break;
            }
            let cycle = self.cycle;
            let Some(d) = self.queues.pop(m.input, m.vc, m.output) else {
                continue;
            };
            if self.queues.is_empty(m.input, m.vc, m.output) {
                let r = requester(m.input, m.vc);
                self.waiting[m.output][r / 64] &= !(1 << (r % 64));
                if self.waiting[m.output].iter().all(|&w| w == 0) {
                    self.waiting_outputs &= !(1 << m.output);
                }
            }
            let cut_through = d.arrived == cycle;
            self.busy |= 1 << m.output;
            self.counters.forwarded += 1;
            self.counters.cut_through += u64::from(cut_through);
            let _ = out.push(Forward {
                input: m.input,
                vc: m.vc as u8,
                output: m.output,
                handle: d.handle,
                flits: d.flits,
                cut_through,
            });
        }
        self.cycle = self.cycle.wrapping_add(1);
    }

    /// The packet sent on `output` has left: it may take another.
    pub fn output_done(&mut self, output: usize) {
        if output < PORTS {
            self.busy &= !(1 << output);
        }
    }

    /// The port `output` has failed: take every copy queued for it out of the queues and hand it to
    /// `evicted` (as a [`Forward`] that will not happen), oldest first per (input, channel), so that the
    /// caller can send it another way once routes avoid the port. The port is left idle.
    pub fn evict_output(&mut self, output: usize, mut evicted: impl FnMut(Forward)) {
        if output >= PORTS {
            return;
        }
        for input in 0..INPUTS {
            for vc in 0..VCS {
                while let Some(d) = self.queues.pop(input, vc, output) {
                    self.counters.evicted += 1;
                    evicted(Forward {
                        input,
                        vc: vc as u8,
                        output,
                        handle: d.handle,
                        flits: d.flits,
                        cut_through: false,
                    });
                }
            }
        }
        self.waiting[output] = [0; WORDS];
        self.waiting_outputs &= !(1 << output);
        self.busy &= !(1 << output);
    }

    /// Whether no packet is queued for `output` (true for a port the switch does not have).
    pub fn output_idle(&self, output: usize) -> bool {
        output >= PORTS || self.waiting_outputs & (1 << output) == 0
    }

    /// Whether any packet is queued anywhere.
    pub fn is_idle(&self) -> bool {
        self.waiting_outputs == 0
    }
}
