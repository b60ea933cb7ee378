//! A reachability probe: every GPU sends one packet to every other GPU through the fabric as the fabric
//! manager programmed it, and the report sets what arrived against the GPUs' partitions. It shows the
//! switches' isolation at work (as NVLink partitions): a packet between partitions is dropped and counted
//! at the first switch it reaches, so only GPUs joined directly, with no switch between them, reach
//! across. A pair that no route joins (no path of live links through switches joins them) is not sent.

use link_dl::{DlConfig, Received, Vc};
use link_phy::time::{Duration, Instant};

use crate::net::{App, Net, Offer, Outgoing};
use crate::topology::Topology;
use crate::wire;

/// Simulated time a probe may take: far more than a packet per GPU pair needs on any built-in fabric.
pub const PROBE_TIME: Duration = Duration::from_ms(100);

/// Pairs named in [`ProbeReport::leaks`] at most.
const LEAKS_LISTED: usize = 16;

/// What a probe found. Pairs are ordered (source, destination) pairs of different GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// GPUs.
    pub gpus: usize,
    /// Partitions the GPUs are in.
    pub partitions: usize,
    /// Packets sent: one per pair that a route joins.
    pub sent: u64,
    /// Pairs within a partition.
    pub same_pairs: u64,
    /// Of those, pairs that no route joins (the partition is split): nothing is sent.
    pub same_unrouted: u64,
    /// Of those, pairs whose packet arrived.
    pub same_delivered: u64,
    /// Pairs across partitions.
    pub cross_pairs: u64,
    /// Of those, pairs that no route joins (their parts of the fabric are not joined): nothing is sent.
    pub cross_unrouted: u64,
    /// Of those, pairs whose packet arrived all the same (GPUs joined without a switch between them).
    pub cross_delivered: u64,
    /// Packets the switches dropped for crossing a partition.
    pub partition_drops: u64,
    /// Packets that arrived wrong: at a GPU they were not addressed to, or a second time.
    pub wrong: u64,
    /// The first pairs across partitions whose packet arrived, as (source, destination) GPU indices.
    pub leaks: Vec<(usize, usize)>,
    /// Whether every packet was sent and the fabric then went quiet (all delivered or dropped) in time.
    pub finished: bool,
}

impl ProbeReport {
    /// Whether every pair within a partition that a route joins reached each other, nothing arrived
    /// wrong, and every packet across partitions was dropped by a switch, once. (A partition that no route
    /// joins whole is split, not leaking: [`crate::manager::Fabric::unreachable`] tells.)
    pub fn isolated(&self) -> bool {
        self.finished
            && self.same_delivered == self.same_pairs - self.same_unrouted
            && self.wrong == 0
            && self.cross_delivered == 0
            && self.partition_drops == self.cross_pairs - self.cross_unrouted
    }
}

/// Send a packet from every GPU of `topology` to every other, with the trunks `failed` (indices into the
/// fabric manager's plan) left out of the routes, and report what arrived within `limit` of simulated
/// time ([`PROBE_TIME`] is plenty for the built-in fabrics).
pub fn probe(
    topology: &Topology,
    failed: &[usize],
    seed: u64,
    limit: Duration,
) -> Result<ProbeReport, String> {
    let mut net = Net::new(topology, failed, DlConfig::default(), seed)?;
    let gpus = net.fabric().gpus.len();
    let partition: Vec<u8> = net
        .fabric()
        .gpus
        .iter()
        .map(|&node| topology.nodes[node].partition)
        .collect();
    let fabric = net.fabric();
    let routed: Vec<Vec<bool>> = (0..gpus)
        .map(|s| {
            (0..gpus)
                .map(|d| !fabric.routes[fabric.gpus[s]][d].is_empty())
                .collect()
        })
        .collect();
    let mut app = Probe::new(&routed);
    let finished = net.run_until_quiet(&mut app, Instant::ZERO + limit);
    let mut report = ProbeReport {
        gpus,
        partitions: topology.partition_count(),
        sent: app.sent_count,
        same_pairs: 0,
        same_unrouted: 0,
        same_delivered: 0,
        cross_pairs: 0,
        cross_unrouted: 0,
        cross_delivered: 0,
        partition_drops: net.switch_totals().partition_drops,
        wrong: app.wrong,
        leaks: Vec::new(),
        finished,
    };
    for source in 0..gpus {
        for dest in (0..gpus).filter(|&d| d != source) {
            let arrived = app.got[dest][source];
            if partition[source] == partition[dest] {
                report.same_pairs += 1;
                report.same_unrouted += u64::from(!routed[source][dest]);
                report.same_delivered += u64::from(arrived);
            } else {
                report.cross_pairs += 1;
                report.cross_unrouted += u64::from(!routed[source][dest]);
                report.cross_delivered += u64::from(arrived);
                if arrived && report.leaks.len() < LEAKS_LISTED {
                    report.leaks.push((source, dest));
                }
            }
        }
    }
    Ok(report)
}

/// The probe's traffic: a header-only posted write from every GPU to every other that a route joins.
#[derive(Debug)]
struct Probe {
    n: usize,
    /// Per GPU and port, worked out when the port is first offered.
    ports: Vec<Vec<Option<PortTurn>>>,
    /// `sent[source][dest]`, `got[dest][source]`.
    sent: Vec<Vec<bool>>,
    got: Vec<Vec<bool>>,
    sent_count: u64,
    /// Packets to send: one per pair a route joins.
    routed_pairs: u64,
    wrong: u64,
}

/// The GPUs a port leads to, and how many of them it has dealt with.
#[derive(Clone, Debug)]
struct PortTurn {
    dests: Vec<u16>,
    done: usize,
}

impl Probe {
    /// A probe of the pairs of GPUs; `routed[source][dest]`: a route joins them.
    fn new(routed: &[Vec<bool>]) -> Probe {
        let n = routed.len();
        Probe {
            n,
            ports: vec![Vec::new(); n],
            sent: vec![vec![false; n]; n],
            got: vec![vec![false; n]; n],
            sent_count: 0,
            routed_pairs: routed
                .iter()
                .enumerate()
                .map(|(s, dests)| dests.iter().enumerate().filter(|&(d, &r)| r && d != s).count() as u64)
                .sum(),
            wrong: 0,
        }
    }
}

impl App for Probe {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        let n = self.n;
        let Some(ports) = self.ports.get_mut(gpu) else {
            return false;
        };
        if ports.len() <= offer.port {
            ports.resize(offer.port + 1, None);
        }
        // Starting after the GPU itself, so that no two GPUs start on the same destination.
        let PortTurn { dests, done } = ports[offer.port].get_or_insert_with(|| PortTurn {
            dests: (1..n)
                .map(|k| ((gpu + k) % n) as u16)
                .filter(|&d| offer.reaches(d))
                .collect(),
            done: 0,
        });
        let sent = &mut self.sent[gpu];
        while let Some(&dest) = dests.get(*done) {
            if sent[usize::from(dest)] {
                // Sent by another port.
                *done += 1;
                continue;
            }
            if !offer.fits(Vc::Posted, 0) {
                return false;
            }
            let packet = Outgoing {
                dest,
                vc: Vc::Posted,
                tl: wire::header(wire::OP_WRITE, dest, gpu as u16, false, 0),
                payload: heapless::Vec::new(),
                multicast: None,
            };
            if !offer.send(&packet) {
                return false;
            }
            sent[usize::from(dest)] = true;
            *done += 1;
            self.sent_count += 1;
            return true;
        }
        false
    }

    fn receive(&mut self, _now: Instant, gpu: usize, _port: usize, packet: &Received) {
        let (dest, source, multicast) = wire::route_fields(packet.tl);
        let source = usize::from(source);
        let fits = usize::from(dest) == gpu && multicast.is_none() && source < self.n && source != gpu;
        if !fits || self.got[gpu][source] {
            self.wrong += 1;
            return;
        }
        self.got[gpu][source] = true;
    }

    fn take_woken(&mut self) -> Option<usize> {
        None
    }

    fn done(&self) -> bool {
        self.sent_count == self.routed_pairs
    }
}
