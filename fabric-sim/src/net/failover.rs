//! Faults and failover: links and switch ports that fail while the fabric runs. A failed trunk's data
//! links hand back what they had not had acknowledged, switches give back what they queued for the dead
//! port, the fabric manager routes around it, packets with no way on return to their source to be sent
//! another way, destinations drop the copies they already have, and a switch that lost a GPU takes its
//! collective engine offline. A repaired trunk comes back, and the fabric manager routes over it again;
//! a switch whose every port to a GPU is back brings its collective engine back online between sizes.

use std::collections::VecDeque;

use link_dl::Received;
use link_phy::time::{Duration, Instant};
use switch_fw::switch::{Arrival, Destination};

use super::{phy_up, write_program, App, Event, Held, Net, NodeState, Offer};
use crate::discover::{check, discover, port_peer};
use crate::hashing::MixHash;
use crate::manager::{DrainCut, Trunk};
use crate::wire;

/// A fault to inject while the fabric runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Trunk `trunk` (all its links) fails for good at `at`: both ends lose it.
    LinkDown {
        /// Index into the fabric's trunks.
        trunk: usize,
        /// When.
        at: Instant,
    },
    /// One of the links ganged in trunk `trunk` fails for good at `at`: the trunk carries on with one
    /// link fewer, at that much less bandwidth. A trunk stripes its units over its links in turn, so the
    /// failed link took every `k`-th unit on the wire with it (`k` links before); the data links see
    /// packets cut short and replay them. The last link failing fails the trunk, as
    /// [`Fault::LinkDown`].
    LinkLost {
        /// Index into the fabric's trunks.
        trunk: usize,
        /// When.
        at: Instant,
    },
    /// Port `port` of switch `node` fails for good at `at`. Its partner sees the link go down, so the
    /// trunk is lost as with [`Fault::LinkDown`]; what is queued inside the switch for the port is not.
    PortDown {
        /// The switch (node index).
        node: usize,
        /// Its port.
        port: usize,
        /// When.
        at: Instant,
    },
    /// Trunk `trunk` is repaired at `at`: scheduled as a fault is, it undoes the faults before it. A
    /// failed trunk (by [`Fault::LinkDown`], [`Fault::PortDown`] or its last [`Fault::LinkLost`]) comes
    /// back with all its links: its data links initialise again from sequence number 0, a failed switch
    /// port is back in use, and once the links are up the fabric manager, after its delay, discovers the
    /// fabric and routes over the trunk again. A trunk still up with links lost retrains with all of
    /// them, at its full rate, without new routes (as losing them took none). A switch whose reduction
    /// engine went offline gets it back, and its ports their multicast and reduction groups, once the
    /// routes are in and every port to a GPU is up, at the end of the size then running
    /// ([`FailoverStats::engines_online_again`]).
    LinkRepaired {
        /// Index into the fabric's trunks.
        trunk: usize,
        /// When.
        at: Instant,
    },
    /// Switch `node` is taken out of service gracefully at `at`: the fabric manager routes around its
    /// trunks (after its delay) while they stay up, so that what the switch holds drains out, and once the
    /// switch and its links hold no packet it takes the ports down, as a failure of every port would,
    /// losing nothing. The switch's collective engine goes offline with the new routes. A repair of one of
    /// its trunks before then keeps that trunk in service; after, brings it back as after a failure.
    SwitchDrain {
        /// The switch (node index).
        node: usize,
        /// When.
        at: Instant,
    },
}

impl Fault {
    fn at(self) -> Instant {
        match self {
            Fault::LinkDown { at, .. }
            | Fault::LinkLost { at, .. }
            | Fault::PortDown { at, .. }
            | Fault::LinkRepaired { at, .. }
            | Fault::SwitchDrain { at, .. } => at,
        }
    }
}

/// What failover did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailoverStats {
    /// Trunks lost.
    pub links_failed: u64,
    /// Links lost from trunks that carried on with the links left.
    pub links_degraded: u64,
    /// Units that were on a wire when it failed.
    pub units_lost: u64,
    /// Unacknowledged packets handed back by the data links of failed trunks.
    pub packets_taken_back: u64,
    /// Copies taken out of switch queues for a failed port.
    pub packets_evicted: u64,
    /// Packets sent again by another path by the node that held them.
    pub packets_rerouted: u64,
    /// Packets returned to their source because the node holding them had no path left.
    pub packets_bounced: u64,
    /// Packets a switch held while the fabric manager replanned, because every port of their route was
    /// down; routed again (or returned to their source) under the new routes.
    pub packets_parked: u64,
    /// Copies a destination had already received, dropped there (or, for a finished collective's packets
    /// a failure handed back, where they were handed back).
    pub duplicates_dropped: u64,
    /// Switches whose collective engine went offline because a port to a GPU failed.
    pub engines_offline: u64,
    /// Collective engines brought back online after repairs: every port of the switch to a GPU up again
    /// under the fabric manager's routes, they sum again from the next size on.
    pub engines_online_again: u64,
    /// Packets of the collective engines (reads, answers, sums, multicasts) lost with a failed trunk or
    /// refused by an engine gone offline: not sent again; the collective does their work again.
    pub engine_packets_dropped: u64,
    /// Packets a switch held where failures cut it off from both their ends, so that it could neither
    /// deliver nor return them, and of which no other copy was on its way: lost (NVLink has no
    /// end-to-end retry). Traffic goes on without them; a collective cannot, and the run stops.
    pub packets_lost: u64,
    /// Faults that found nothing left to fail: their trunk (or the trunk at their port) had failed
    /// already, by an earlier fault or by as many lost links as it had. Drains count apart.
    pub faults_without_effect: u64,
    /// Repairs ([`Fault::LinkRepaired`]) that brought back a failed trunk or a trunk's lost links, or kept
    /// in service a trunk that a drain was taking out of it.
    pub links_repaired: u64,
    /// Repairs that found their trunk whole and up.
    pub repairs_without_effect: u64,
    /// Jobs that failures split (no route joins some of their GPUs any more) and that went on: synthetic
    /// traffic, whose packets between the parts are lost or not sent ([`super::Job::goes_on_split`]).
    /// A job a repair joined again counts: it was split for a while.
    pub jobs_split: u64,
    /// Drains ([`Fault::SwitchDrain`]) that happened, those without effect included.
    pub drains: u64,
    /// Switches a drain took out of service: routed around, emptied, then their ports taken down.
    pub switches_drained: u64,
    /// Switches still draining (routes not yet around them, or packets still in them or their links).
    pub switches_draining: u64,
    /// Drains without effect: their switch was draining already.
    pub drains_already_draining: u64,
    /// Drains without effect: every trunk at their switch's ports was down already (an earlier drain
    /// took the switch out of service, or failures took its links).
    pub drains_already_down: u64,
    /// Drains the fabric manager refused, the switch left in service: without it, no route would join
    /// two GPUs of a job that the routes join with it (the only path between them). Why: [`Net::drain_refusals`].
    pub drains_refused: u64,
}

impl FailoverStats {
    /// Events that can leave copies of a collective's packets on their way after it is done: trunk
    /// failures (packets sent again or bounced), and collective engines taken offline, by a failure or
    /// by a drain (the engine's sums in progress are done again on other planes, while what it had
    /// already sent still arrives).
    fn copy_makers(&self) -> u64 {
        self.links_failed + self.engines_offline
    }
}

/// Per GPU, the recent packets it received (by header), so that a packet sent again after a failure is
/// delivered once. A packet can only be duplicated if it was unacknowledged on a link when the link
/// failed although the partner had received it, and its copy sent again usually arrives soon after the
/// first: a window of recent headers covers it, as a transport's sequence window would. Soon is not
/// always: a copy may wait for the fabric manager's new routes in a switch, while the destination
/// receives more than the window holds. So the header of a packet taken back that the partner had is
/// *pinned* at its destination: remembered past the window until as many more copies as were made have
/// come (a handful per failed link: what its replay buffers held). A copy comes by arriving, or by being
/// lost ([`Seen::lose_copy`]).
#[derive(Debug, Default)]
pub(super) struct Seen {
    set: std::collections::HashSet<u64, MixHash>,
    order: VecDeque<u64>,
    /// Header to the copies of it still to come.
    pinned: std::collections::HashMap<u64, u32, MixHash>,
}

/// Headers each GPU remembers.
const SEEN_WINDOW: usize = 1 << 16;

impl Seen {
    /// Forget the headers of a finished collective, whose next size reuses them. Synthetic traffic's
    /// headers never repeat in a run, so they are kept: a copy of one may still come.
    fn forget_collective(&mut self) {
        let traffic = |tl: &u64| wire::opcode(*tl) == wire::OP_TRAFFIC;
        self.set.retain(traffic);
        self.order.retain(traffic);
        self.pinned.retain(|tl, _| traffic(tl));
    }

    /// Remember `tl` until one more copy of it comes: a packet taken back that its link's partner had.
    fn pin(&mut self, tl: u64) {
        *self.pinned.entry(tl).or_default() += 1;
    }

    /// A copy of `tl` can go no further (a switch can neither deliver nor return it): whether it was the
    /// packet's last, so that the packet is lost. It was not if the destination has the packet, or
    /// another copy is on its way; either way it counts as come, and a lost packet counts as received,
    /// so that nothing of it is counted twice.
    fn lose_copy(&mut self, tl: u64) -> bool {
        if !self.set.contains(&tl) && self.pinned.contains_key(&tl) {
            self.copy_came(tl);
            return false;
        }
        self.first_time(tl)
    }

    /// One of the copies still to come of `tl`, if it is pinned, has come.
    fn copy_came(&mut self, tl: u64) {
        if let Some(copies) = self.pinned.get_mut(&tl) {
            *copies -= 1;
            if *copies == 0 {
                self.pinned.remove(&tl);
            }
        }
    }

    /// Whether `tl` is new (and remember it).
    pub(super) fn first_time(&mut self, tl: u64) -> bool {
        if !self.set.insert(tl) {
            self.copy_came(tl);
            return false;
        }
        self.order.push_back(tl);
        if self.order.len() > SEEN_WINDOW {
            if let Some(old) = self.order.pop_front() {
                // A pinned header stays in the set, out of the window's order, until its copies come.
                if self.pinned.is_empty() || !self.pinned.contains_key(&old) {
                    self.set.remove(&old);
                }
            }
        }
        true
    }
}

/// An app while the fabric drains stragglers: it sends nothing and is done, and gets what arrives only
/// if it [takes stragglers](App::takes_stragglers).
struct Draining<'a> {
    app: &'a mut dyn App,
}

impl App for Draining<'_> {
    fn next(&mut self, _now: Instant, _gpu: usize, _offer: &mut Offer) -> bool {
        false
    }
    fn receive(&mut self, now: Instant, gpu: usize, port: usize, packet: &Received) {
        if self.app.takes_stragglers() {
            self.app.receive(now, gpu, port, packet);
        }
    }
    fn take_woken(&mut self) -> Option<usize> {
        None
    }
    fn done(&self) -> bool {
        true
    }
    fn lost(&mut self, tl: u64) -> bool {
        // An app that takes no stragglers has all it needs.
        !self.app.takes_stragglers() || self.app.lost(tl)
    }
}

/// Failover state, present once faults are scheduled.
#[derive(Debug)]
pub(super) struct Failover {
    pub(super) faults: Vec<Fault>,
    /// Trunks down now (a repair takes its trunk out).
    pub(super) failed: Vec<usize>,
    /// Of the events so far that can leave copies of a collective's packets on their way
    /// ([`FailoverStats::copy_makers`]), those whose stragglers have been let arrive
    /// ([`Net::drain_stragglers`]).
    pub(super) failures_drained: u64,
    /// Per node and port: the data link's packets sent before the collective now running started.
    pub(super) size_started: Vec<Vec<u64>>,
    /// Failed trunks the fabric manager has not yet routed around: it waits for links still training to
    /// come up before it discovers the fabric again (until then they have not reported their peers).
    pub(super) unplanned: Vec<usize>,
    /// How long the fabric manager takes from a failure to its new routes.
    pub(super) replan_delay: Duration,
    /// When the new routes can be ready: the latest failure since the last plan, plus the delay.
    pub(super) replan_at: Instant,
    pub(super) seen: Vec<Seen>,
    /// Per node: packets it must send again (GPUs) or route again (switches), original headers.
    pub(super) resend: Vec<VecDeque<Received>>,
    /// Per switch: packets taken back or arrived whose every route port is down, held until the new
    /// routes ([`FailoverStats::packets_parked`]).
    pub(super) parked: Vec<VecDeque<Received>>,
    pub(super) stats: FailoverStats,
    /// Why the fabric cannot go on (a failure cut in two a job that cannot go on so, or a job lost a packet
    /// it needs).
    pub(super) fatal: Option<String>,
    /// Packets lost since the app was last told (original header, and where and why), told after the
    /// event that lost them ([`App::lost`]).
    pub(super) lost: Vec<(u64, String)>,
    /// Why each refused drain was refused, in the order they came.
    pub(super) refusals: Vec<String>,
    /// Per trunk: links still working.
    pub(super) links_left: Vec<usize>,
    /// Per node (GPUs only): [`super::Offer::engines_offline`].
    pub(super) engines_offline: Vec<u64>,
    /// Per job ([`Net::set_jobs`]'s order): whether a replan found it split, now or earlier.
    pub(super) jobs_split: Vec<bool>,
    /// Switch ports failures took whose multicast and reduction groups the fabric manager has yet to
    /// reprogram (with its new routes), telling the GPUs of an engine gone offline.
    pub(super) ports_to_clear: Vec<(usize, usize)>,
    /// Switch ports the fabric manager took out of multicast groups (switch, port, a bit per group), to
    /// put back when the switch's engine comes back online.
    pub(super) groups_left: Vec<(usize, usize, u64)>,
    /// Switches being drained ([`Fault::SwitchDrain`]).
    pub(super) drains: Vec<Drain>,
}

/// A switch being drained.
#[derive(Debug)]
pub(super) struct Drain {
    pub(super) node: usize,
    /// Its trunks the drain takes out of service: those up when it began, less those failed or repaired
    /// since.
    pub(super) trunks: Vec<usize>,
    /// Whether the fabric manager's routes around it are in.
    pub(super) routed: bool,
}

/// Keep a packet taken back after a failure to send it again, unless it belongs to a collective engine
/// (dropped: the collective does that work again). Returns whether it was kept.
pub(super) fn send_again(resend: &mut VecDeque<Received>, stats: &mut FailoverStats, p: Received) -> bool {
    if wire::is_engine_traffic(p.tl) {
        stats.engine_packets_dropped += 1;
        false
    } else {
        resend.push_back(p);
        true
    }
}

impl Failover {
    /// Take back from `node`'s data `link` of a failed trunk what it sent without acknowledgement, to send
    /// again, but for a finished collective's packets (the link sent the first `size_started` before the
    /// collective now running started): delivered, and the next size reuses their headers.
    /// `partner_expected` is the partner's next expected sequence number: what was sent before it, the
    /// partner had. Returns how many it keeps to send again.
    fn take_back(
        &mut self,
        node: usize,
        link: &mut super::PortLink,
        size_started: u64,
        partner_expected: link_dl::seq::Seq,
    ) -> u64 {
        let (resend, stats, seen) = (&mut self.resend[node], &mut self.stats, &mut self.seen);
        // The first taken back, counted from the link's first packet.
        let mut index = link.counters().packets_sent - link.unacknowledged() as u64;
        let mut kept = 0;
        link.take_unacknowledged(|seq, p| {
            stats.packets_taken_back += 1;
            let earlier = index < size_started;
            index += 1;
            if earlier && !wire::is_engine_traffic(p.tl) && wire::opcode(p.tl) != wire::OP_TRAFFIC {
                stats.duplicates_dropped += 1;
                return;
            }
            // If the partner had it, there are two copies now: its destination must know the first when
            // the second comes. (A bounce that arrived made its source send the original again.)
            let original = wire::original(p.tl);
            if partner_expected.is_after(seq) && !wire::is_engine_traffic(original) {
                if let Some(seen) = seen.get_mut(usize::from(wire::route_fields(original).0)) {
                    seen.pin(original);
                }
            }
            kept += u64::from(send_again(resend, stats, p));
        });
        kept
    }

    /// A copy of the packet whose original header is `tl` can go no further, for the reason `why`: the
    /// packet is lost, unless its destination has it or another copy is on its way (then the copy is a
    /// duplicate).
    pub(super) fn strand(&mut self, tl: u64, why: String) {
        let last_copy =
            (self.seen.get_mut(usize::from(wire::route_fields(tl).0))).is_none_or(|seen| seen.lose_copy(tl));
        if last_copy {
            self.stats.packets_lost += 1;
            self.lost.push((tl, why));
        } else {
            self.stats.duplicates_dropped += 1;
        }
    }

    /// Hold a packet at switch `node` until the new routes: every port of its route is down.
    pub(super) fn park(&mut self, node: usize, p: Received) {
        self.stats.packets_parked += u64::from(!wire::is_engine_traffic(p.tl));
        send_again(&mut self.parked[node], &mut self.stats, p);
    }
}

impl Net {
    /// Inject `faults` as the fabric runs. From now on every GPU also drops copies of packets it has
    /// already received, and a switch that cannot route a packet returns it to its source: packets are
    /// identified by their header, so unicast traffic must keep headers unique per (source, destination)
    /// and offsets below [`wire::BOUNCE_OFFSET_LIMIT`]. The collective engines' traffic
    /// ([`wire::is_engine_traffic`]) is exempt: it is neither filtered nor sent again, and a switch that
    /// loses a port to a GPU takes its engine offline ([`super::Offer::engines_offline`]), so a switch
    /// reduction must do the lost work again elsewhere and tell copies apart itself.
    ///
    /// The fabric manager takes `replan_delay` from a failure to its new routes (its discovery, route
    /// computation and switch programming); meanwhile switches move flows off their failed ports to the
    /// other ports of their routes ([`switch_fw::switch::Switch::set_port_down`]) and hold what has no
    /// port left, a GPU's app sends nothing out of a failed port (its packets taken back go out of the
    /// GPU's other ports that lead to their destinations), and the app's own plan keeps the old routes.
    /// Zero: at once.
    pub fn schedule_faults(&mut self, faults: &[Fault], replan_delay: Duration) -> Result<(), String> {
        for &fault in faults {
            match fault {
                Fault::LinkDown { trunk, .. }
                | Fault::LinkLost { trunk, .. }
                | Fault::LinkRepaired { trunk, .. }
                    if trunk >= self.fabric.trunks.len() =>
                {
                    return Err(format!("there is no trunk {trunk}"));
                }
                Fault::PortDown { node, port, .. }
                    if !matches!(self.nodes.get(node), Some(NodeState::Switch { .. }))
                        || port >= self.fabric.port_count(node) =>
                {
                    return Err(format!("node {node} is not a switch with a port {port}"));
                }
                Fault::SwitchDrain { node, .. }
                    if !matches!(self.nodes.get(node), Some(NodeState::Switch { .. })) =>
                {
                    return Err(format!("node {node} is not a switch"));
                }
                _ => {}
            }
        }
        let n = self.nodes.len();
        let gpus = self.fabric.gpus.len();
        let f = self.failover.get_or_insert_with(|| {
            Box::new(Failover {
                faults: Vec::new(),
                failed: Vec::new(),
                failures_drained: 0,
                size_started: self.links.iter().map(|ports| vec![0; ports.len()]).collect(),
                unplanned: Vec::new(),
                replan_delay,
                replan_at: Instant(0),
                seen: (0..gpus).map(|_| Seen::default()).collect(),
                resend: (0..n).map(|_| VecDeque::new()).collect(),
                parked: (0..n).map(|_| VecDeque::new()).collect(),
                stats: FailoverStats::default(),
                fatal: None,
                lost: Vec::new(),
                refusals: Vec::new(),
                links_left: self.fabric.trunks.iter().map(|t| t.links).collect(),
                engines_offline: vec![0; n],
                jobs_split: Vec::new(),
                ports_to_clear: Vec::new(),
                groups_left: Vec::new(),
                drains: Vec::new(),
            })
        });
        f.replan_delay = replan_delay;
        // What a switch has no route for, it returns to its source (or routes on under new routes).
        for node in &mut self.nodes {
            if let NodeState::Switch { core, .. } = node {
                core.keeps_unroutable = true;
            }
        }
        let mut events = Vec::new();
        for &fault in faults {
            events.push((fault.at(), f.faults.len() as u32));
            f.faults.push(fault);
        }
        for (at, index) in events {
            self.schedule(at.max(self.now), Event::Fault { index });
        }
        Ok(())
    }

    /// What failover has done so far.
    pub fn failover_stats(&self) -> FailoverStats {
        self.failover
            .as_ref()
            .map(|f| FailoverStats {
                switches_draining: f.drains.len() as u64,
                ..f.stats
            })
            .unwrap_or_default()
    }

    /// Why the fabric manager refused the drains it refused ([`FailoverStats::drains_refused`]), in order.
    pub fn drain_refusals(&self) -> &[String] {
        self.failover.as_ref().map_or(&[], |f| &f.refusals)
    }

    /// Whether the fabric manager has yet to route for a failure or repair: its delay, or links still
    /// training, kept its new routes back.
    pub fn replan_owed(&self) -> bool {
        self.failover.as_ref().is_some_and(|f| !f.unplanned.is_empty())
    }

    /// Whether what keeps the fabric manager's new routes back ([`Net::replan_owed`]) is links still
    /// training (after a repair, say), its delay being over.
    pub fn replan_waits_for_links(&self) -> bool {
        self.replan_owed()
            && self.failover.as_ref().is_some_and(|f| self.now >= f.replan_at)
            && self.links_training()
    }

    /// Why the fabric could not go on after a fault, if it could not.
    pub fn fatal(&self) -> Option<&str> {
        self.failover.as_ref().and_then(|f| f.fatal.as_deref())
    }

    pub(super) fn fault(&mut self, index: usize, app: &mut dyn App) {
        let Some(fault) = self.failover.as_ref().map(|f| f.faults[index]) else {
            return;
        };
        let trunk = match fault {
            Fault::LinkDown { trunk, .. } | Fault::LinkLost { trunk, .. } => trunk,
            Fault::PortDown { node, port, .. } => self.fabric.ports[node][port].0,
            Fault::LinkRepaired { trunk, .. } => {
                self.repair_trunk(trunk, app);
                return;
            }
            Fault::SwitchDrain { node, .. } => {
                self.start_drain(node, app);
                return;
            }
        };
        if let Some(f) = self.failover.as_mut().filter(|f| f.failed.contains(&trunk)) {
            f.stats.faults_without_effect += 1;
            return;
        }
        if matches!(fault, Fault::LinkLost { .. }) && !self.lose_a_link(trunk) {
            return;
        }
        self.fail_trunk(trunk, app, false);
        self.record_link(trunk, 0);
        self.record_link(trunk, 1);
    }

    /// Begin draining switch `node` ([`Fault::SwitchDrain`]): the fabric manager is to route around its
    /// trunks that are up, as around failed ones.
    fn start_drain(&mut self, node: usize, app: &mut dyn App) {
        let Some(f) = self.failover.as_mut() else { return };
        f.stats.drains += 1;
        let trunks: Vec<usize> = (self.fabric.ports[node].iter())
            .map(|&(t, _)| t)
            .filter(|t| !f.failed.contains(t))
            .collect();
        if f.drains.iter().any(|d| d.node == node) {
            f.stats.drains_already_draining += 1;
            return;
        }
        if trunks.is_empty() {
            f.stats.drains_already_down += 1;
            return;
        }
        if let Some(why) = self.drain_would_cut(&trunks) {
            let Some(f) = self.failover.as_mut() else { return };
            f.stats.drains_refused += 1;
            let name = self.topology.node_name(node);
            // The time tells apart two refused drains of one switch.
            let at_us = self.now.as_ps() as f64 / 1e6;
            f.refusals.push(format!(
                "the fabric manager refused to drain {name} at {at_us:.3} us (it stays in service): routed \
                 around it, {why}"
            ));
            return;
        }
        let Some(f) = self.failover.as_mut() else { return };
        f.drains.push(Drain {
            node,
            trunks: trunks.clone(),
            routed: false,
        });
        for t in trunks {
            self.owe_replan(t);
        }
        self.replan_when_up(app);
    }

    /// Why the fabric manager would refuse to drain a switch whose live trunks are `trunks`, if it would
    /// ([`Fabric::drain_cut`], over the jobs, with the trunks down and those of switches already draining
    /// left out).
    fn drain_would_cut(&self, trunks: &[usize]) -> Option<String> {
        let f = self.failover.as_ref()?;
        let mut left_out = self.drained_trunks();
        left_out.extend(&f.failed);
        match self.fabric.drain_cut(
            &self.topology,
            &left_out,
            trunks,
            &self.jobs,
            super::Job::unjoined,
        )? {
            DrainCut::Splits { group, pair } => {
                Some(self.split_message(&self.fabric, &self.jobs[group], pair))
            }
            DrainCut::Unplanned(why) => Some(why),
        }
    }

    /// The trunks drains take out of the routes, in index order.
    fn drained_trunks(&self) -> Vec<usize> {
        let mut out: Vec<usize> = (self.failover.iter())
            .flat_map(|f| f.drains.iter().flat_map(|d| d.trunks.iter().copied()))
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether switch `node` and the links at its ports in `trunks` hold no packet: its queues, what it
    /// has to send again, what its data links and their partners have sent unacknowledged (on the wire
    /// or not) or received and not taken in, and what a neighbouring switch queued for the port to it.
    fn drained(&self, node: usize, trunks: &[usize]) -> bool {
        let Some(f) = self.failover.as_ref() else {
            return false;
        };
        let NodeState::Switch {
            core, staged_ports, ..
        } = &self.nodes[node]
        else {
            return false;
        };
        let link_empty = |x: usize, p: usize| {
            let l = &self.links[x][p];
            l.unacknowledged() == 0 && !l.received_waiting()
        };
        core.is_idle()
            && *staged_ports == 0
            && f.resend[node].is_empty()
            && f.parked[node].is_empty()
            && (self.fabric.ports[node].iter().enumerate())
                .filter(|(_, (t, _))| trunks.contains(t))
                .all(|(p, _)| {
                    let (y, q) = self.fabric.peer(node, p);
                    link_empty(node, p)
                        && link_empty(y, q)
                        && match &self.nodes[y] {
                            NodeState::Switch { core, .. } => core.output_idle(q),
                            NodeState::Gpu => true,
                        }
                })
    }

    /// Take out of service every drained switch whose routes are around it and that holds nothing now:
    /// its trunks go down as failed ones do (but count as drained, not failed). The routes avoid them
    /// already: the fabric manager only takes their ports out of the groups they were in.
    pub(super) fn finish_drains(&mut self, app: &mut dyn App) {
        let Some(f) = self.failover.as_ref() else { return };
        let Some(i) = (f.drains.iter()).position(|d| d.routed && self.drained(d.node, &d.trunks)) else {
            return;
        };
        let Some(f) = self.failover.as_mut() else { return };
        let drain = f.drains.remove(i);
        f.stats.switches_drained += 1;
        // Ports of earlier failures wait for their own replan.
        let waiting = f.ports_to_clear.len();
        for &t in &drain.trunks {
            self.fail_trunk(t, app, true);
            self.record_link(t, 0);
            self.record_link(t, 1);
        }
        let Some(f) = self.failover.as_mut() else { return };
        let ports: Vec<(usize, usize)> = f.ports_to_clear.drain(waiting..).collect();
        self.clear_ports(ports);
        // Another may have emptied meanwhile.
        self.finish_drains(app);
    }

    /// One of trunk `t`'s links, which has not failed, is gone (see [`Fault::LinkLost`]). Returns true if
    /// it was the last one, so the trunk itself fails.
    fn lose_a_link(&mut self, t: usize) -> bool {
        let Some(f) = self.failover.as_mut() else {
            return false;
        };
        let links = f.links_left[t];
        if links <= 1 {
            return true;
        }
        f.links_left[t] = links - 1;
        f.stats.links_degraded += 1;
        let gbps = self.trunk_now(t).gbps;
        let Some(f) = self.failover.as_mut() else {
            return false;
        };
        for (d, dir) in self.dirs[t].iter_mut().enumerate() {
            // Units went out over the links in turn: the failed one carried the `links`-th, the
            // `2 * links`-th, ... unit on the wire, counted from 1.
            let mut k = 0;
            for burst in dir.bursts.iter_mut() {
                let units = &mut self.pool.buffers[burst.buffer as usize];
                let mut kept = 0;
                for i in 0..burst.units {
                    k += 1;
                    if k % links != 0 {
                        units[kept] = units[i];
                        kept += 1;
                    }
                }
                f.stats.units_lost += (burst.units - kept) as u64;
                burst.units = kept;
            }
            self.wire_room[t][d].rate_changes(self.now, dir.unit_ps);
            dir.set_rate(gbps);
        }
        // The nodes at its ends see the trunk retrain with a link fewer.
        for (x, p) in [self.fabric.trunks[t].a, self.fabric.trunks[t].b] {
            self.learn_peer(x, p);
        }
        false
    }

    /// Trunk `t` is repaired ([`Fault::LinkRepaired`]).
    fn repair_trunk(&mut self, t: usize, app: &mut dyn App) {
        let Some(f) = self.failover.as_mut() else { return };
        let drained = f.drains.iter().position(|d| d.trunks.contains(&t));
        if let Some(i) = drained {
            // A drain was taking it out of service: it stays, and the fabric manager routes over it again
            // (the drain goes on with the switch's other trunks, if any).
            f.drains[i].trunks.retain(|&x| x != t);
            if f.drains[i].trunks.is_empty() {
                f.drains.remove(i);
            }
            self.owe_replan(t);
        }
        let Some(f) = self.failover.as_mut() else { return };
        let all = self.fabric.trunks[t].links;
        let failed = f.failed.iter().position(|&x| x == t);
        if failed.is_none() && f.links_left[t] == all {
            if drained.is_some() {
                f.stats.links_repaired += 1;
                self.replan_when_up(app);
            } else {
                f.stats.repairs_without_effect += 1;
            }
            return;
        }
        f.stats.links_repaired += 1;
        f.links_left[t] = all;
        let ends = [self.fabric.trunks[t].a, self.fabric.trunks[t].b];
        if let Some(i) = failed {
            f.failed.remove(i);
            // As after a failure, the fabric manager replans after its delay, once the links are up.
            self.owe_replan(t);
        }
        let gbps = self.trunk_now(t).gbps;
        for (d, dir) in self.dirs[t].iter_mut().enumerate() {
            self.wire_room[t][d].rate_changes(self.now, dir.unit_ps);
            dir.set_rate(gbps);
            dir.up = true;
        }
        for (node, port) in ends {
            if failed.is_some() {
                if let NodeState::Switch { core, .. } = &mut self.nodes[node] {
                    core.set_port_down(port, false);
                }
                // Down since the failure: it initialises as at the start, and reports `Up` when done.
                phy_up(&mut self.links[node][port], self.now);
            }
            self.learn_peer(node, port);
        }
        for d in 0..2 {
            self.kick(t, d);
            self.record_link(t, d);
        }
        self.replan_when_up(app);
    }

    /// Fill node `x`'s identity registers of port `p` from what its data link learned of the partner when
    /// it came up (cleared if it is down), with the links of the trunk still up and their rate: what the
    /// node's firmware does as the port's links come up, retrain or go down.
    pub(super) fn learn_peer(&mut self, x: usize, p: usize) {
        let link = &self.links[x][p];
        let peer = match link.partner() {
            Some(partner) if link.is_active() => {
                Some(port_peer(partner, &self.trunk_now(self.fabric.ports[x][p].0)))
            }
            _ => None,
        };
        let identity = match &mut self.nodes[x] {
            NodeState::Switch { core, .. } => &mut core.identity,
            NodeState::Gpu => match self.gpu_of_node[x] {
                Some(g) => &mut self.gpu_identity[g],
                None => return,
            },
        };
        // The port is one of the node's own, so always in range.
        let _ = identity.set_peer(p, peer);
    }

    /// Trunk `t` as it is now: with the links it has left and their rate.
    fn trunk_now(&self, t: usize) -> Trunk {
        let trunk = &self.fabric.trunks[t];
        trunk.with_links(self.failover.as_ref().map_or(trunk.links, |f| f.links_left[t]))
    }

    /// Trunk `t` is gone: drop what is on its wires, take in what its ends received, take back what they
    /// sent unacknowledged and what a switch queued for it, route around it, and send all that again.
    /// `drained`: a drain takes it out of service, empty ([`Net::finish_drains`]), and the routes avoid
    /// it already; else it failed.
    fn fail_trunk(&mut self, t: usize, app: &mut dyn App, drained: bool) {
        let Some(f) = self.failover.as_mut() else { return };
        if f.failed.contains(&t) {
            return;
        }
        f.failed.push(t);
        if !drained {
            f.stats.links_failed += 1;
            // A drain cannot take a failed trunk out of service; one with none left is over.
            for d in &mut f.drains {
                d.trunks.retain(|&x| x != t);
            }
            f.drains.retain(|d| !d.trunks.is_empty());
        }
        if let Some(tracer) = self.trace.as_mut() {
            // A packet whose first units went out before the failure will never be whole.
            tracer.tracer.cut(t * 2);
            tracer.tracer.cut(t * 2 + 1);
        }
        for dir in &mut self.dirs[t] {
            dir.up = false;
            dir.scheduled = None;
            for burst in dir.bursts.drain(..) {
                // A drained trunk's wires carry no packet's units, only idle and control ones.
                f.stats.units_lost += if drained { 0 } else { burst.units as u64 };
                self.pool.give(burst.buffer);
            }
        }
        let ends = [self.fabric.trunks[t].a, self.fabric.trunks[t].b];
        // What an end has wholly received is in its memory: it is taken in as usual.
        for (node, port) in ends {
            match self.nodes[node] {
                NodeState::Gpu => self.gpu_received(node, port, app),
                NodeState::Switch { .. } => self.switch_received(node, port),
            }
        }
        let Some(f) = self.failover.as_mut() else { return };
        // What an end sent without acknowledgement may or may not have arrived: it is taken back. What
        // each end had received is known before either goes down.
        let expected = ends.map(|(node, port)| self.links[node][port].expected());
        for (k, (node, port)) in ends.into_iter().enumerate() {
            let (resend, stats) = (&mut f.resend[node], &mut f.stats);
            // A switch whose buffer share was full left received (and acknowledged) packets in the
            // link's queues: they are the switch's to route, taken in now.
            let mut received = 0;
            while let Some(p) = self.links[node][port].recv() {
                send_again(resend, stats, p);
                received += 1;
            }
            let kept = f.take_back(
                node,
                &mut self.links[node][port],
                f.size_started[node][port],
                expected[1 - k],
            );
            if let NodeState::Switch { core, .. } = &mut self.nodes[node] {
                let counters = core.counters_mut();
                counters.arrived += received;
                // Forwarded once already: what it forwards of them again is counted apart.
                counters.taken_back += kept;
            }
            self.links[node][port].phy_down();
        }
        // A switch's firmware takes the port out of its routes' use and gives back what it had queued
        // for it, to route again (by its other ports, or under the new routes).
        for (node, port) in ends {
            if let NodeState::Switch { core, held, .. } = &mut self.nodes[node] {
                core.set_port_down(port, true);
                let (resend, stats) = (&mut f.resend[node], &mut f.stats);
                core.evict_output(port, |copy| {
                    if let Some(entry) = held.get(copy.handle) {
                        stats.packets_evicted += 1;
                        send_again(resend, stats, entry.packet.clone());
                        held.copy_gone(copy.handle);
                    }
                });
            }
        }
        for (node, port) in ends {
            self.learn_peer(node, port);
        }
        self.take_engines_offline(ends);
        // The fabric manager, told of the failure, discovers the fabric again, routes around every trunk
        // it finds down and reprograms every switch: after its delay, and once the links still training
        // are up.
        // A drained trunk is one the routes avoid already.
        if !drained {
            self.owe_replan(t);
            self.replan_when_up(app);
        }
        // Until the new routes the ends go on with what they have: a switch sends what it took back by
        // the other ports of its routes, a GPU what its app has for its other ports.
        if self.failover.as_ref().is_some_and(|f| !f.unplanned.is_empty()) {
            for (node, _) in ends {
                match self.nodes[node] {
                    NodeState::Gpu => self.fill_gpu(node, app),
                    NodeState::Switch { .. } => self.switch_forward(node),
                }
            }
        }
    }

    /// The fabric manager is to route for trunk `t`, failed or repaired now: after its delay from now (a
    /// later change extends the wait), once every live link is up ([`Net::replan_when_up`]). A trunk it
    /// has yet to route for is routed for once, whatever happened to it meanwhile.
    fn owe_replan(&mut self, t: usize) {
        let Some(f) = self.failover.as_mut() else { return };
        if !f.unplanned.contains(&t) {
            f.unplanned.push(t);
        }
        let ready = self.now + f.replan_delay;
        f.replan_at = f.replan_at.max(ready);
        if ready > self.now {
            self.schedule(ready, Event::Replan);
        }
    }

    /// Whether a link of a live trunk is not up yet (still initialising). A trunk that failed, during the
    /// run or before it (built down), has its wires down.
    fn links_training(&self) -> bool {
        self.fabric.trunks.iter().enumerate().any(|(t, trunk)| {
            self.dirs[t][0].up
                && [trunk.a, trunk.b]
                    .iter()
                    .any(|&(x, p)| !self.links[x][p].is_active())
        })
    }

    /// If the fabric manager waits to replan after a failure, its delay is over and every live link is
    /// up, discover the fabric, route around every trunk found down, reprogram the switches, and send
    /// again what the switches held for want of a live port.
    pub(super) fn replan_when_up(&mut self, app: &mut dyn App) {
        if self
            .failover
            .as_ref()
            .is_none_or(|f| f.unplanned.is_empty() || self.now < f.replan_at)
            || self.links_training()
        {
            return;
        }
        // Switches being drained: their trunks are left out though up, and each routes as if it were not
        // drained, so that what it holds, or still receives from neighbours on their old routes, goes on
        // its way (around trunks that failed meanwhile, as everything else).
        let drained = self.drained_trunks();
        let draining: Vec<usize> = (self.failover.iter())
            .flat_map(|f| f.drains.iter().map(|d| d.node))
            .collect();
        let replanned = discover(self).and_then(|found| {
            let c = check(&found, &self.topology);
            match c.differences.first() {
                None => {
                    let mut left_out = c.left_out();
                    left_out.extend(&drained);
                    left_out.sort_unstable();
                    left_out.dedup();
                    let mut fabric = self.fabric.replan(&self.topology, &left_out)?;
                    if !draining.is_empty() {
                        let undrained = self.fabric.replan(&self.topology, &c.left_out())?;
                        for &node in &draining {
                            fabric.routes[node] = undrained.routes[node].clone();
                        }
                        fabric.program.retain(|(node, ..)| !draining.contains(node));
                        (fabric.program).extend(
                            undrained
                                .program
                                .iter()
                                .filter(|(node, ..)| draining.contains(node)),
                        );
                    }
                    Ok(fabric)
                }
                Some(d) => Err(format!("discovery finds the fabric changed: {d}")),
            }
        });
        // The routes must still join each job's GPUs, but for a job that goes on split; GPUs of different
        // jobs may be cut apart.
        let replanned = replanned.and_then(|fabric| {
            let split: Vec<_> = self.split_jobs(&fabric).collect();
            let stops = split.iter().find(|(_, job, _)| !job.goes_on_split);
            match stops.map(|&(_, job, pair)| self.split_message(&fabric, job, pair)) {
                Some(why) => Err(why),
                None => Ok((split.iter().map(|&(i, ..)| i).collect::<Vec<_>>(), fabric)),
            }
        });
        let Some(f) = self.failover.as_mut() else { return };
        let planned: Vec<usize> = f.unplanned.drain(..).collect();
        let ends: Vec<(usize, usize)> = (planned.iter())
            .flat_map(|&t| [self.fabric.trunks[t].a, self.fabric.trunks[t].b])
            .collect();
        match replanned {
            Ok((split, fabric)) => {
                if let Err((node, e)) = write_program(&mut self.nodes, &fabric.program) {
                    f.fatal = Some(format!("reprogramming switch {node}: {e}"));
                }
                self.fabric = fabric;
                // A job a repair joins again was split all the same: what it lost meanwhile stays lost.
                for i in split {
                    if f.jobs_split.len() <= i {
                        f.jobs_split.resize(i + 1, false);
                    }
                    f.jobs_split[i] = true;
                }
                f.stats.jobs_split = f.jobs_split.iter().filter(|&&split| split).count() as u64;
                // The routes are around the drained switches: their collective engines go offline, and
                // the GPUs learn it with the new routes ([`Net::clear_failed_ports`]).
                let mut newly_routed = Vec::new();
                for d in f.drains.iter_mut().filter(|d| !d.routed) {
                    d.routed = true;
                    newly_routed.extend(
                        (self.fabric.ports[d.node].iter().enumerate())
                            .filter(|(_, (t, _))| d.trunks.contains(t))
                            .map(|(p, _)| (d.node, p)),
                    );
                }
                for end in newly_routed {
                    self.take_engine_offline(end);
                }
            }
            Err(e) => {
                // Every link that failed since the last plan and is still down (several, when they failed
                // while others were still coming up; a repaired one is not what the fabric cannot go on
                // without).
                let name = |x: usize| self.topology.node_name(x);
                let down: Vec<String> = (planned.iter())
                    .filter(|t| f.failed.contains(t))
                    .map(|&t| {
                        let trunk = &self.fabric.trunks[t];
                        format!("the link {} - {}", name(trunk.a.0), name(trunk.b.0))
                    })
                    // A drain that would cut the fabric is a cut too.
                    .chain(
                        draining
                            .iter()
                            .map(|&x| format!("the switch {} (drained)", name(x))),
                    )
                    .collect();
                f.fatal = Some(if down.is_empty() {
                    format!("the fabric manager cannot route the fabric: {e}")
                } else {
                    format!("the fabric cannot go on without {}: {e}", down.join(" and "))
                });
                return;
            }
        }
        // What the switches held for want of a live port goes on under the new routes.
        let Some(f) = self.failover.as_mut() else { return };
        let mut switches: Vec<usize> = ends.iter().map(|&(node, _)| node).collect();
        for (node, parked) in f.parked.iter_mut().enumerate() {
            if !parked.is_empty() {
                f.resend[node].extend(parked.drain(..));
                if !switches.contains(&node) {
                    switches.push(node);
                }
            }
        }
        for node in switches {
            if self.gpu_of_node[node].is_none() {
                self.switch_forward(node);
            }
        }
        self.clear_failed_ports();
        if self.failover.as_ref().is_some_and(|f| f.stats.jobs_split > 0) {
            for node in 0..self.nodes.len() {
                if self.gpu_of_node[node].is_some() {
                    self.strand_unroutable_at(node);
                }
            }
        }
        self.fill_all(app);
        for t in 0..self.dirs.len() {
            for d in 0..2 {
                self.kick(t, d);
            }
        }
        self.finish_drains(app);
    }

    /// A trunk failed between `ends`. A GPU end knows its port's switch plane is gone. A switch end
    /// that reduced for the GPU behind the port can no longer complete a sum: its engine abandons the
    /// sums in progress and refuses requests from now on. The fabric manager reprograms its groups
    /// and tells the engine's other GPUs with its new routes ([`Net::clear_failed_ports`]), so that
    /// until then they go on asking it.
    fn take_engines_offline(&mut self, ends: [(usize, usize); 2]) {
        for end in ends {
            self.take_engine_offline(end);
        }
    }

    /// One end of [`Net::take_engines_offline`]'s.
    fn take_engine_offline(&mut self, (node, port): (usize, usize)) {
        let Some(f) = self.failover.as_mut() else { return };
        if self.gpu_of_node[node].is_some() {
            f.engines_offline[node] |= 1 << port;
            return;
        }
        let NodeState::Switch { nvls, .. } = &mut self.nodes[node] else {
            return;
        };
        f.ports_to_clear.push((node, port));
        if !nvls.offline && nvls.gpu_ports.iter().any(|&(p, _)| p == port) {
            nvls.offline = true;
            nvls.pending.clear();
            nvls.active = 0;
            f.stats.engines_offline += 1;
        }
    }

    /// The fabric manager's new routes are in: it takes every failed port out of its switch's multicast
    /// groups and, where the switch's engine went offline, clears its reduction groups and tells the GPUs
    /// behind it, which then ask the planes left.
    fn clear_failed_ports(&mut self) {
        let Some(f) = self.failover.as_mut() else { return };
        let ports = std::mem::take(&mut f.ports_to_clear);
        self.clear_ports(ports);
    }

    /// [`Net::clear_failed_ports`] for `ports` (switch node, port).
    fn clear_ports(&mut self, ports: Vec<(usize, usize)>) {
        use switch_fw::regs::{MULTICAST, REDUCTION};
        let Some(f) = self.failover.as_mut() else { return };
        for (node, port) in ports {
            let NodeState::Switch { core, nvls, .. } = &mut self.nodes[node] else {
                continue;
            };
            let mut writes = Vec::new();
            let mut left = 0u64;
            for group in 0..switch_fw::multicast::GROUPS as u32 {
                if let Ok(ports) = core.multicast.get(group as u16) {
                    if ports.contains(port) {
                        let without = ports.0 & !(1u64 << port);
                        writes.push((MULTICAST + 8 * group, without as u32));
                        writes.push((MULTICAST + 8 * group + 4, (without >> 32) as u32));
                        left |= 1 << group;
                    }
                }
            }
            if left != 0 {
                f.groups_left.push((node, port, left));
            }
            if nvls.offline {
                for &(p, gpu) in &nvls.gpu_ports {
                    let base = REDUCTION + 16 * u32::from(gpu);
                    // Kept as programmed, to commit again (contributor masks first) when the engine is
                    // back; a group already removed reads 0 and is kept from before.
                    if let Ok(control @ 1..) = core.read_register(base + 8) {
                        let low = core.read_register(base).unwrap_or(0);
                        let high = core.read_register(base + 4).unwrap_or(0);
                        nvls.removed_groups
                            .extend([(base, low), (base + 4, high), (base + 8, control)]);
                    }
                    writes.push((base + 8, 0));
                    let (gpu_node, gpu_port) = self.fabric.peer(node, p);
                    f.engines_offline[gpu_node] |= 1 << gpu_port;
                }
            }
            for (address, value) in writes {
                if let Err(e) = core.write_register(address, value) {
                    f.fatal = Some(format!("reprogramming switch {node}: {e}"));
                }
            }
        }
    }

    /// Switches whose collective engine is offline and could come back: the fabric manager's routes are
    /// in and every port of the switch to a GPU is up under them (repaired, or a drain called off), with
    /// nothing of them left to reprogram. Without a repair there is none.
    fn engines_to_bring_back(&self) -> Vec<usize> {
        let Some(f) = self.failover.as_ref() else {
            return Vec::new();
        };
        (0..self.nodes.len())
            .filter(|&node| {
                let NodeState::Switch { nvls, .. } = &self.nodes[node] else {
                    return false;
                };
                nvls.offline
                    && !f.drains.iter().any(|d| d.node == node)
                    && !f.ports_to_clear.iter().any(|&(x, _)| x == node)
                    && nvls.gpu_ports.iter().all(|&(p, _)| {
                        let t = self.fabric.ports[node][p].0;
                        self.dirs[t][0].up && !f.failed.contains(&t) && !f.unplanned.contains(&t)
                    })
            })
            .collect()
    }

    /// Bring back online the collective engines [`Net::engines_to_bring_back`] names, between sizes and
    /// with nothing in the fabric (no request or answer sent to an engine before it went offline can reach
    /// it, to start a sum that no GPU answers or hold a chunk no sum claims): the fabric manager puts their
    /// ports back into the multicast groups it took them out of, commits their reduction groups again
    /// (empty: the engine starts with no sum in progress) and tells the GPUs, whose next collective
    /// uses the plane again.
    fn bring_engines_back(&mut self) {
        for node in self.engines_to_bring_back() {
            let Some(f) = self.failover.as_mut() else { return };
            let NodeState::Switch { core, nvls, .. } = &mut self.nodes[node] else {
                continue;
            };
            let mut writes = std::mem::take(&mut nvls.removed_groups);
            let mut groups = vec![0u64; switch_fw::multicast::GROUPS];
            f.groups_left.retain(|&(x, port, left)| {
                let back = x == node && !f.failed.contains(&self.fabric.ports[x][port].0);
                if back {
                    for (group, ports) in groups.iter_mut().enumerate() {
                        *ports |= ((left >> group) & 1) << port;
                    }
                }
                !back
            });
            for (group, ports) in (0u32..).zip(groups).filter(|&(_, ports)| ports != 0) {
                let with = core.multicast.get(group as u16).unwrap_or_default().0 | ports;
                let address = switch_fw::regs::MULTICAST + 8 * group;
                writes.push((address, with as u32));
                writes.push((address + 4, (with >> 32) as u32));
            }
            for (address, value) in writes {
                if let Err(e) = core.write_register(address, value) {
                    f.fatal = Some(format!("reprogramming switch {node}: {e}"));
                }
            }
            nvls.offline = false;
            nvls.pending.clear();
            nvls.active = 0;
            f.stats.engines_online_again += 1;
            for &(p, _) in &nvls.gpu_ports {
                let (gpu_node, gpu_port) = self.fabric.peer(node, p);
                f.engines_offline[gpu_node] &= !(1 << gpu_port);
            }
        }
    }

    /// Route again what a switch took back after a failure: on to its destination if the switch still
    /// has a path there, else back to its source.
    #[inline(always)]
    pub(super) fn pump_resend(&mut self, node: usize) {
        // As `pump_nvls`: nearly always nothing to send again, found without the set-up below.
        if self
            .failover
            .as_ref()
            .is_some_and(|f| f.resend.get(node).is_some_and(|q| !q.is_empty()))
        {
            self.resend_taken_back(node);
        }
    }

    #[inline(never)]
    fn resend_taken_back(&mut self, node: usize) {
        let Some(f) = self.failover.as_mut() else { return };
        let NodeState::Switch { core, held, .. } = &mut self.nodes[node] else {
            return;
        };
        while let Some(p) = f.resend[node].front() {
            let (dest, source, multicast) = wire::route_fields(p.tl);
            let (tl, to) = if multicast.is_none() && !core.routes.get(dest).is_empty() {
                (p.tl, dest)
            } else {
                match wire::bounce(p.tl) {
                    Some(bounced) if !core.routes.get(source).is_empty() => (bounced, source),
                    bounced => {
                        // Lost: NVLink has no end-to-end retry.
                        let gpu = |id: u16| self.fabric.gpu_name(&self.topology, usize::from(id));
                        let (from, to) = match multicast {
                            Some(group) => (gpu(source).to_string(), format!("multicast group {group}")),
                            // A returned packet's header has its ends swapped.
                            None if wire::opcode(p.tl) == wire::OP_BOUNCE => {
                                (gpu(dest).to_string(), gpu(source).to_string())
                            }
                            None => (gpu(source).to_string(), gpu(dest).to_string()),
                        };
                        let why = if bounced.is_some() {
                            "the failures cut it off from both ends"
                        } else if multicast.is_some() {
                            "a multicast packet is not returned"
                        } else if wire::opcode(p.tl) == wire::OP_BOUNCE {
                            "it is on its way back to its source already, which the failures cut it off from"
                        } else {
                            "its offset is too large for a returned packet's header"
                        };
                        let message = format!(
                            "{} holds a packet from {from} to {to} (header {:#x}) that it can neither \
                             deliver nor return ({why}): the packet is lost",
                            self.topology.node_name(node),
                            p.tl
                        );
                        f.strand(wire::original(p.tl), message);
                        f.resend[node].pop_front();
                        core.counters_mut().route_drops += 1;
                        continue;
                    }
                }
            };
            let handle = held.take_handle();
            let arrival = Arrival {
                handle,
                vc: p.vc.index() as u8,
                flits: 1 + p.payload.len() as u8,
                destination: Destination::Unicast(to),
                // Its own flow (a bounce's is the way back), as when it first arrived.
                source: Some(wire::route_fields(tl).1),
            };
            match core.inject(arrival) {
                Err(switch_fw::SwitchError::PortDown { .. }) => {
                    held.release(handle);
                    if let Some(p) = f.resend[node].pop_front() {
                        f.park(node, p);
                    }
                }
                Ok(copies) => {
                    let Some(p) = f.resend[node].pop_front() else {
                        break;
                    };
                    if tl == p.tl {
                        f.stats.packets_rerouted += 1;
                    } else {
                        f.stats.packets_bounced += 1;
                    }
                    held.put(
                        handle,
                        Held {
                            packet: Received { tl, ..p },
                            copies,
                        },
                    );
                }
                Err(_) => {
                    held.release(handle);
                    break;
                }
            }
        }
    }

    /// After a failover, copies of a finished collective's packets (sent again, or bounced) may still be
    /// on their way. The next collective's packets reuse the same headers, so it must not meet them: let
    /// them arrive (each is a duplicate, dropped and counted), then forget the headers seen. `app`, done,
    /// sends nothing meanwhile (traffic beside it pauses), and gets what arrives only if it takes
    /// stragglers. Without a failure since the last time, there are none: the headers are forgotten at
    /// once. Collective engines that can come back online come back then, the fabric empty.
    pub(super) fn drain_stragglers(&mut self, app: &mut dyn App, limit: Instant) {
        let Some(f) = self.failover.as_ref() else { return };
        // Only a failure makes copies: without one since the last drain there is nothing to wait for
        // (and a run with faults scheduled runs as one without until the first).
        // An engine brought back must find the fabric empty too (`bring_engines_back`).
        let quiet_first =
            f.stats.copy_makers() != f.failures_drained || !self.engines_to_bring_back().is_empty();
        if quiet_first && !self.step_until_quiet(&mut Draining { app }, limit) {
            return;
        }
        self.bring_engines_back();
        if let Some(f) = self.failover.as_mut() {
            f.seen.iter_mut().for_each(Seen::forget_collective);
            f.failures_drained = f.stats.copy_makers();
            for (started, links) in f.size_started.iter_mut().zip(&self.links) {
                for (started, link) in started.iter_mut().zip(links) {
                    *started = link.counters().packets_sent;
                }
            }
        }
    }

    /// What GPU `node` has to send again and no route leads to any more is lost. Only a job that went on
    /// split ([`FailoverStats::jobs_split`]) has such packets: a job's GPUs have routes to each other.
    pub(super) fn strand_unroutable_at(&mut self, node: usize) {
        let Some(f) = self.failover.as_mut() else { return };
        let (Some(routes), Some(resend)) = (self.fabric.routes.get(node), f.resend.get_mut(node)) else {
            return;
        };
        let mut stranded = Vec::new();
        resend.retain(|p| {
            let dest = wire::route_fields(p.tl).0;
            let routed = routes.get(usize::from(dest)).is_some_and(|r| !r.is_empty());
            if !routed {
                stranded.push(p.tl);
            }
            routed
        });
        for tl in stranded {
            let to = self
                .fabric
                .gpu_name(&self.topology, usize::from(wire::route_fields(tl).0));
            let why = format!(
                "{} has a packet to send again to {to} (header {tl:#x}) that no route leads to any more: the \
                 packet is lost",
                self.topology.node_name(node),
            );
            f.strand(tl, why);
        }
    }

    /// Send from GPU `node`'s port `port` what it has to send again after a failure and can send there.
    pub(super) fn resend_from_gpu(&mut self, node: usize, port: usize) -> bool {
        let Some(f) = self.failover.as_mut() else {
            return false;
        };
        let routes = &self.fabric.routes[node];
        let link = &mut self.links[node][port];
        let mut sent = false;
        while link.is_active() {
            let Some(i) = f.resend[node].iter().position(|p| {
                let dest = usize::from(wire::route_fields(p.tl).0);
                routes.get(dest).is_some_and(|r| r.contains(port))
            }) else {
                break;
            };
            let p = &f.resend[node][i];
            if !link.can_send(p.vc, p.payload.len()) || link.send(p.vc, p.tl, &p.payload).is_err() {
                break;
            }
            f.resend[node].remove(i);
            f.stats.packets_rerouted += 1;
            sent = true;
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::{Seen, SEEN_WINDOW};

    #[test]
    fn a_pinned_header_is_remembered_past_the_window_until_its_copy_comes() {
        let mut seen = Seen::default();
        let (pinned, plain) = (1u64 << 40, 2u64 << 40);
        seen.pin(pinned);
        assert!(seen.first_time(pinned) && seen.first_time(plain));
        for tl in 0..SEEN_WINDOW as u64 + 10 {
            assert!(seen.first_time(tl));
        }
        // The window forgot the plain one; the pinned one's copy is still caught, once.
        assert!(seen.first_time(plain), "forgotten past the window");
        assert!(
            !seen.first_time(pinned),
            "a copy sent again after a failure is dropped"
        );
        assert!(seen.pinned.is_empty());
    }

    #[test]
    fn a_header_taken_back_twice_is_caught_twice_and_only_traffic_outlives_a_size() {
        use crate::wire::{header, OP_TRAFFIC, OP_WRITE};
        let mut seen = Seen::default();
        let (twice, traffic) = (
            header(OP_WRITE, 1, 2, false, 7),
            header(OP_TRAFFIC, 1, 2, false, 7),
        );
        seen.pin(twice);
        seen.pin(twice);
        assert!(seen.first_time(twice));
        for tl in 0..SEEN_WINDOW as u64 + 10 {
            assert!(seen.first_time(tl));
        }
        assert!(
            !seen.first_time(twice) && !seen.first_time(twice),
            "both copies caught"
        );
        assert!(seen.pinned.is_empty());
        assert!(seen.first_time(traffic));
        // The next size reuses the collective's headers; traffic's never repeat, so a copy is caught.
        seen.forget_collective();
        assert!(seen.first_time(twice), "the next size's packet");
        assert!(!seen.first_time(traffic), "a copy of a traffic packet");
    }
}
