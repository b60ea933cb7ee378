//! Synthetic traffic beside a collective: the interference a job sees from other traffic on the same
//! fabric. Every GPU of the collective (or of another set of GPUs, another job's) generates traffic as a
//! [`TrafficSpec`] run does, from the start of the collective sweep to its end, sharing its ports with
//! the collective packet by packet where the two share GPUs, and the fabric's links and switches
//! wherever their paths meet; then generation stops, the fabric drains, and every packet is checked as
//! in a traffic run. The collective's rows show what the traffic cost it; the [`BackgroundReport`], what
//! the collective cost the traffic.

use link_phy::time::{Duration, Instant};

use super::{check_load_and_bytes, injection, offered_gbps, Measured, Pattern, Spread, Traffic, TrafficSpec};
use super::{drain_limit, run_draining};
use crate::net::{App, Net, NoTraffic, Offer};
use crate::topology::Topology;
use crate::wire;
use link_dl::Received;

/// Traffic to run beside a collective.
#[derive(Clone, Debug, PartialEq)]
pub struct Background {
    /// Where each GPU's packets go.
    pub pattern: Pattern,
    /// How each GPU spreads them over its ports.
    pub spread: Spread,
    /// Offered load: the fraction of each GPU's injection bandwidth its packets would fill on their own.
    pub load: f64,
    /// Data bytes per packet: a multiple of 16 from 16 to 128.
    pub payload_bytes: usize,
    /// The GPUs (numbers of the fabric's GPUs) that send and receive the traffic, if not the
    /// collective's: another job's, on GPUs the collective may not use at all
    /// ([`crate::topology::Topology::with_jobs`] makes such a fabric). Their order is the patterns' (the
    /// first is the hot spot; the neighbour pattern goes from each to the next).
    pub gpus: Option<Vec<u16>>,
}

impl Background {
    /// The GPUs that send and receive the traffic beside a collective on the fabric's first
    /// `collective_gpus` GPUs: [`Background::gpus`], or the collective's.
    pub fn members(&self, collective_gpus: usize) -> Vec<u16> {
        match &self.gpus {
            Some(gpus) => gpus.clone(),
            None => (0..collective_gpus as u16).collect(),
        }
    }
}

/// What the background traffic measured, over the whole sweep: its window is the sweep, from the first
/// size's start (once the links are up) to the last size's end.
#[derive(Clone, Debug, PartialEq)]
pub struct BackgroundReport {
    /// What it was.
    pub background: Background,
    /// Throughput, latency and delivery.
    pub measured: Measured,
}

/// Background traffic on a fabric, generating until [`Running::finish`].
#[derive(Debug)]
pub(crate) struct Running {
    traffic: Traffic,
    background: Background,
    offered_gbps: f64,
}

impl Running {
    /// Background traffic for `net` (the fabric of `topology`, whose first `collective_gpus` GPUs run
    /// the collective), seeded with `seed`; `faults` says whether failures are scheduled (flows are then
    /// not checked for order: packets caught by a failure go another way).
    pub(crate) fn new(
        net: &Net,
        topology: &Topology,
        background: Background,
        collective_gpus: usize,
        seed: u64,
        faults: bool,
    ) -> Result<Running, String> {
        check_load_and_bytes(background.load, background.payload_bytes)?;
        let members = background.members(collective_gpus);
        let fabric_gpus = net.fabric().gpus.len();
        let mut sorted = members.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() < 2
            || sorted.len() < members.len()
            || sorted.last().is_some_and(|&g| usize::from(g) >= fabric_gpus)
        {
            return Err(format!(
                "background traffic runs on two or more of the fabric's {fabric_gpus} GPUs, each named \
                 once, not {members:?}"
            ));
        }
        let (bandwidth, wire_bytes) = injection(net, topology, &members, background.payload_bytes);
        let member_bandwidth: Vec<f64> = members.iter().map(|&g| bandwidth[usize::from(g)]).collect();
        let spec = TrafficSpec {
            pattern: background.pattern,
            spread: background.spread,
            load: background.load,
            warmup: Some(Duration::ZERO),
            // Generation runs until `finish` stops it.
            measure: Duration::from_ps(u64::MAX / 4),
            seed,
            ber: None,
            faults: Vec::new(),
            replan_delay: Duration::ZERO,
            payload_bytes: background.payload_bytes,
            pcap: None,
            vcd: None,
            // The collective's run decides that.
            skip_idle: true,
            trunks: false,
        };
        let mut traffic = Traffic::new(
            &spec,
            Duration::ZERO,
            &bandwidth,
            net.fabric().gpu_port_links(),
            members,
            wire_bytes,
            topology.address_extension(),
        );
        traffic.ordered &= !faults;
        let offered_gbps = offered_gbps(
            &member_bandwidth,
            background.load,
            background.payload_bytes,
            wire_bytes,
        );
        Ok(Running {
            traffic,
            background,
            offered_gbps,
        })
    }

    /// `collective`, on the fabric's first `collective_gpus` GPUs, with this traffic beside it, as one
    /// app for the fabric.
    pub(crate) fn beside<'a>(
        &'a mut self,
        collective: &'a mut dyn App,
        collective_gpus: usize,
    ) -> Beside<'a> {
        Beside::new(collective, collective_gpus, &mut self.traffic, false)
    }

    /// Start generating at `at` (when the collective's first size starts), measuring from then.
    pub(crate) fn start_at(&mut self, at: Instant) {
        self.traffic.start_at(at);
    }

    /// Packets of the background traffic delivered so far.
    pub(crate) fn delivered(&self) -> u64 {
        self.traffic.delivered
    }

    /// Stop generating now, let the fabric deliver what was generated (for [`drain_limit`] of simulated
    /// time, and longer while it keeps delivering: [`run_draining`]), and say what the traffic measured.
    pub(crate) fn finish(mut self, net: &mut Net) -> BackgroundReport {
        let fatal = net.fatal().is_some();
        let t = &mut self.traffic;
        let elapsed = net.now().saturating_since(t.start);
        t.stop = net.now();
        // Beside a finished collective: anything of its still arriving is ignored.
        let drain = drain_limit(net);
        let drained = !fatal && {
            let end = t.stop + drain;
            run_draining(
                net,
                &mut Beside::new(&mut NoTraffic { done: true }, 0, t, true),
                end,
                drain,
            )
        };
        let drained_for = net.now().saturating_since(t.stop);
        BackgroundReport {
            background: self.background,
            measured: t.measured(self.offered_gbps, elapsed, drained, drained_for, net.fatal()),
        }
    }
}

/// A collective and background traffic as one app: they take turns at each port the fabric offers,
/// packet by packet, and each gets its own packets (told apart by opcode).
pub(crate) struct Beside<'a> {
    collective: &'a mut dyn App,
    /// The collective runs on the fabric's GPUs `0..collective_gpus`.
    collective_gpus: usize,
    traffic: &'a mut Traffic,
    /// Who is asked first at the next offer.
    traffic_first: bool,
    /// Whether the app is done when the traffic is (its generation stopped and all of it delivered),
    /// rather than when the collective is.
    until_traffic_done: bool,
}

impl<'a> Beside<'a> {
    /// The two as one app, done when the collective is, or with `until_traffic_done` when the traffic
    /// is.
    fn new(
        collective: &'a mut dyn App,
        collective_gpus: usize,
        traffic: &'a mut Traffic,
        until_traffic_done: bool,
    ) -> Self {
        Beside {
            collective,
            collective_gpus,
            traffic,
            traffic_first: false,
            until_traffic_done,
        }
    }
}

impl App for Beside<'_> {
    fn next(&mut self, now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        if gpu >= self.collective_gpus {
            return self.traffic.next(now, gpu, offer);
        }
        self.traffic_first = !self.traffic_first;
        let (first, second): (&mut dyn App, &mut dyn App) = if self.traffic_first {
            (&mut *self.traffic, &mut *self.collective)
        } else {
            (&mut *self.collective, &mut *self.traffic)
        };
        first.next(now, gpu, offer) || second.next(now, gpu, offer)
    }

    fn receive(&mut self, now: Instant, gpu: usize, port: usize, packet: &Received) {
        if wire::opcode(packet.tl) == wire::OP_TRAFFIC {
            self.traffic.receive(now, gpu, port, packet);
        } else if gpu < self.collective_gpus && !self.collective.done() {
            self.collective.receive(now, gpu, port, packet);
        }
    }

    fn take_woken(&mut self) -> Option<usize> {
        self.collective.take_woken()
    }

    fn take_alarm(&mut self) -> Option<(Instant, usize)> {
        self.traffic.take_alarm()
    }

    fn others_delivered(&self) -> u64 {
        self.traffic.delivered
    }

    fn done(&self) -> bool {
        if self.until_traffic_done {
            self.traffic.done()
        } else {
            self.collective.done()
        }
    }

    fn takes_stragglers(&self) -> bool {
        true
    }

    fn isolated(&mut self, now: Instant, gpu: usize) {
        self.traffic.isolated(now, gpu);
    }

    fn lost(&mut self, tl: u64) -> bool {
        // The two jobs fail apart: traffic goes on without a packet, and a finished collective has all
        // it needs.
        if wire::opcode(tl) == wire::OP_TRAFFIC {
            self.traffic.lost(tl)
        } else {
            self.collective.done() || self.collective.lost(tl)
        }
    }
}
