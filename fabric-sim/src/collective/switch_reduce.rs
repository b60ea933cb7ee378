//! All-reduce in the switches (NVLink SHARP, as NCCL's NVLS algorithm): each packet is summed by the
//! collective engine of one switch plane and multicast back to every GPU.

use std::collections::VecDeque;

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::{Received, Vc};
use link_phy::time::Instant;

use super::{carries, payload_of, sums_of, Check, Packets, OP_RESULT, PER_PACKET};
use crate::net::{App, Offer, Outgoing};
use crate::wire;

/// All-reduce in the switches (NVLink SHARP, as NCCL's NVLS algorithm): GPU `g` owns the `g`-th slice;
/// for every packet of it, it asks a switch for the sum (`ld_reduce`: the switch reads the packet from
/// every GPU and sums the answers), then stores the sum to the multicast group of all GPUs (`multimem.st`),
/// which the switch copies to every other GPU.
///
/// **Failures.** A switch that loses a port to a GPU can no longer sum for anyone: it takes its engine
/// offline, and the GPUs learn it from their offers ([`Offer::engines_offline`]): the one on the failed
/// link at once, the others when the fabric manager replans. Each GPU then retires
/// that plane: everything it ever asked of it, and everything it still would have, is asked again of
/// the planes left, in their weighted round robin; sums the dead plane returned are kept but not
/// multicast (the redo multicasts them). A GPU may so receive a sum twice: it keeps a bitmap of the
/// packets it has, and the collective ends when every GPU has every packet and no request is
/// outstanding on a live plane (so that no live switch is left reading from GPUs that stopped). A plane
/// retired stays so to the end: a repair brings its engine back only between sizes, for the next
/// collective.
#[derive(Debug)]
pub struct SwitchReduce {
    n: usize,
    seed: u64,
    extension: bool,
    /// How the buffer is cut into packets.
    packets: Packets,
    gpus: Vec<Member>,
    /// A GPU that has lost every plane, with work left: the collective cannot finish.
    stranded: Option<usize>,
    check: Check,
}

/// One GPU's part of a switch reduction.
#[derive(Debug)]
struct Member {
    /// Links per port towards a switch with a collective engine (0: none).
    links: Vec<u32>,
    /// Packet `k` belongs to the switch plane behind port `planes[k % planes.len()]`.
    planes: Vec<usize>,
    /// The GPU's own packets: `[own_start, own_end)`.
    own_start: u64,
    own_end: u64,
    /// Per port: the next own packet whose plane is that port (`u64::MAX` when there is none).
    own_next: Vec<u64>,
    /// Answers to the switches' reads, which must leave on the port the read came in on, per port.
    answers: Vec<VecDeque<Outgoing>>,
    /// Sums to multicast, on the plane (port) that reduced them, per port.
    results: Vec<VecDeque<Outgoing>>,
    /// Bit `p`: port `p`'s plane is retired.
    retired: u64,
    /// Per port: own packets to ask of this plane again after another plane was retired, and those
    /// already asked (to ask again if this plane too is retired).
    redo: Vec<VecDeque<u64>>,
    redone: Vec<Vec<u64>>,
    /// Per port: sums asked of the plane and not yet returned.
    outstanding: Vec<u64>,
    /// Bit `k`: the GPU has the final value of packet `k`; `finals` of them.
    have: Vec<u64>,
    finals: u64,
}

/// Ports in a smooth weighted round robin, one entry per link: weights 5, 4, 4, 5 give a period of 18
/// in which port 0 appears 5 times, spread out.
fn weighted_round_robin(weights: &[u32]) -> Vec<usize> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut current = vec![0i64; weights.len()];
    (0..total)
        .map(|_| {
            for (c, &w) in current.iter_mut().zip(weights) {
                *c += i64::from(w);
            }
            let best = (0..weights.len())
                .max_by_key(|&p| (current[p], std::cmp::Reverse(p)))
                .unwrap_or(0);
            current[best] -= total;
            best
        })
        .collect()
}

impl Member {
    /// The first packet at or after `from` whose plane is `port` (`u64::MAX` if none).
    fn next_on_plane(&self, port: usize, from: u64) -> u64 {
        let planes = &self.planes;
        if planes.is_empty() {
            return u64::MAX;
        }
        (from..from + planes.len() as u64)
            .find(|&k| planes[(k % planes.len() as u64) as usize] == port)
            .filter(|&k| k < self.own_end)
            .unwrap_or(u64::MAX)
    }

    /// Record that the GPU has packet `k`; whether it is new.
    fn got(&mut self, k: u64) -> bool {
        let (word, bit) = ((k / 64) as usize, 1u64 << (k % 64));
        let new = self.have[word] & bit == 0;
        self.have[word] |= bit;
        self.finals += u64::from(new);
        new
    }

    fn is_retired(&self, port: usize) -> bool {
        port < 64 && self.retired & (1 << port) != 0
    }

    /// Retire the planes of `ports` (a bit mask): ask every packet they had or would have had of the
    /// planes left. Returns false if no plane is left for work that remains.
    fn retire(&mut self, ports: u64) -> bool {
        self.retired |= ports;
        let mut work = Vec::new();
        for port in (0..self.links.len()).filter(|&p| p < 64 && ports & (1 << p) != 0) {
            self.answers[port].clear();
            self.results[port].clear();
            self.outstanding[port] = 0;
            let mut k = self.next_on_plane(port, self.own_start);
            while k != u64::MAX {
                work.push(k);
                k = self.next_on_plane(port, k + 1);
            }
            self.own_next[port] = u64::MAX;
            work.extend(self.redo[port].drain(..));
            work.append(&mut self.redone[port]);
        }
        work.sort_unstable();
        let weights: Vec<u32> = (0..self.links.len())
            .map(|p| if self.is_retired(p) { 0 } else { self.links[p] })
            .collect();
        let order = weighted_round_robin(&weights);
        if order.is_empty() {
            return work.is_empty();
        }
        for (i, k) in work.into_iter().enumerate() {
            self.redo[order[i % order.len()]].push_back(k);
        }
        true
    }
}

impl SwitchReduce {
    /// An all-reduce of `bytes` over `n` GPUs; `links_to_switch[g][p]` is how many links port `p` of GPU
    /// `g` gangs towards a switch with its collective engine configured
    /// ([`crate::net::Net::configure_nvls`]), 0 if it does not lead to one.
    ///
    /// As NVLink interleaves addresses over the switch planes, packet `k` is reduced and multicast by
    /// one plane, chosen by `k` in a weighted round robin over the ports (a port with 5 links gets 5
    /// packets in 18 on DGX H100), so each plane carries its share of the traffic.
    pub fn new(bytes: u64, links_to_switch: Vec<Vec<u32>>, extension: bool, seed: u64) -> SwitchReduce {
        let n = links_to_switch.len();
        let elements = (bytes / 4).max(1);
        let split = Packets::of(elements);
        let packets = split.count;
        let gpus = links_to_switch
            .into_iter()
            .enumerate()
            .map(|(g, links)| {
                let ports = links.len();
                let mut member = Member {
                    planes: weighted_round_robin(&links),
                    links,
                    own_start: packets * g as u64 / n as u64,
                    own_end: packets * (g as u64 + 1) / n as u64,
                    own_next: Vec::new(),
                    answers: (0..ports).map(|_| VecDeque::new()).collect(),
                    results: (0..ports).map(|_| VecDeque::new()).collect(),
                    retired: 0,
                    redo: (0..ports).map(|_| VecDeque::new()).collect(),
                    redone: vec![Vec::new(); ports],
                    outstanding: vec![0; ports],
                    have: vec![0; packets.div_ceil(64) as usize],
                    finals: 0,
                };
                member.own_next = (0..ports)
                    .map(|p| member.next_on_plane(p, member.own_start))
                    .collect();
                member
            })
            .collect();
        SwitchReduce {
            n,
            seed,
            extension,
            packets: split,
            gpus,
            stranded: None,
            check: Check::default(),
        }
    }

    /// The most memory a switch reduction of `bytes` over `n` GPUs keeps that grows with the message:
    /// per GPU, a bit per packet for the final values it has (its queues are bounded by the engines'
    /// reads and the links' credits).
    pub fn most_bytes(bytes: u64, n: usize) -> u64 {
        n as u64 * Packets::of(bytes / 4).count.div_ceil(64) * 8
    }

    /// The verdict so far.
    pub fn check(&self) -> Check {
        self.check
    }

    /// Why the collective cannot finish, if it cannot: a GPU lost every switch plane.
    pub fn failure(&self) -> Option<String> {
        self.stranded.map(|g| {
            format!(
                "switch-reduce cannot finish: every switch that GPU {g} reaches has lost a GPU and taken \
                 its collective engine offline"
            )
        })
    }

    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        self.gpus
            .iter()
            .enumerate()
            .map(|(g, m)| {
                format!(
                    "gpu {g}: own {:?}/{} redo {:?} outstanding {:?} answers {:?} results {:?} retired \
                     {:#x} finals {}\n",
                    m.own_next,
                    m.own_end,
                    m.redo.iter().map(VecDeque::len).collect::<Vec<_>>(),
                    m.outstanding,
                    m.answers.iter().map(VecDeque::len).collect::<Vec<_>>(),
                    m.results.iter().map(VecDeque::len).collect::<Vec<_>>(),
                    m.retired,
                    m.finals
                )
            })
            .collect()
    }

    fn total_weight(&self) -> u32 {
        (1..=self.n as u32).fold(0u32, u32::wrapping_add)
    }

    fn verify_sum(&mut self, p: &Received, packet: u64) -> bool {
        let (seed, w, count) = (self.seed, self.total_weight(), self.n as u32);
        let first = packet * PER_PACKET as u64;
        let ok = packet < self.packets.count
            && carries(
                p,
                self.extension,
                self.packets.elements(packet),
                &sums_of(seed, first, w, count),
            );
        if ok {
            self.check.packets_verified += 1;
        } else {
            self.check.wrong += 1;
        }
        ok
    }

    /// The `ld_reduce` of `packet` by `gpu`.
    fn request(&self, gpu: usize, packet: u64) -> Outgoing {
        let payload: heapless::Vec<Flit, 9> = if self.extension {
            core::iter::once([0; FLIT_LEN]).collect()
        } else {
            heapless::Vec::new()
        };
        Outgoing {
            dest: wire::NVLS_ENGINE,
            vc: Vc::Request,
            tl: wire::header(
                wire::OP_REDUCE_READ,
                wire::NVLS_ENGINE,
                gpu as u16,
                true,
                packet as u32,
            ),
            payload,
            multicast: Some(wire::NVLS_ENGINE),
        }
    }
}

impl App for SwitchReduce {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        let port = offer.port;
        let m = &mut self.gpus[gpu];
        if m.links.get(port).is_none_or(|&l| l == 0) {
            return false;
        }
        let newly_offline = offer.engines_offline & !m.retired;
        if newly_offline != 0 && !m.retire(newly_offline) && self.stranded.is_none() {
            self.stranded = Some(gpu);
        }
        if m.is_retired(port) {
            return false;
        }
        // Finished sums first: each one completes work (and frees the switch's state for it), while the
        // switches' reads can wait; answering reads first lets a backlog of them hold every sum back.
        for queue in [&mut m.results[port], &mut m.answers[port]] {
            if let Some(front) = queue.front() {
                if offer.fits(front.vc, front.payload.len()) && offer.send(front) {
                    queue.pop_front();
                    self.check.packets_sent += 1;
                    return true;
                }
                return false;
            }
        }
        let redo = m.redo[port].front().copied();
        let packet = redo.unwrap_or(m.own_next[port]);
        if packet >= m.own_end {
            return false;
        }
        let request = self.request(gpu, packet);
        if !offer.fits(request.vc, request.payload.len()) || !offer.send(&request) {
            return false;
        }
        let m = &mut self.gpus[gpu];
        if redo.is_some() {
            m.redo[port].pop_front();
            m.redone[port].push(packet);
        } else {
            m.own_next[port] = m.next_on_plane(port, packet + 1);
        }
        m.outstanding[port] += 1;
        self.check.packets_sent += 1;
        true
    }

    fn receive(&mut self, _now: Instant, gpu: usize, port: usize, p: &Received) {
        let packet = u64::from(wire::offset(p.tl));
        let seed = self.seed;
        match wire::opcode(p.tl) {
            wire::OP_READ => {
                // The switch reads this GPU's input for a packet someone asked the sum of (a retired
                // plane's engine has abandoned its reads).
                if self.gpus[gpu].is_retired(port) {
                    return;
                }
                let (_, requester, _) = wire::route_fields(p.tl);
                if packet >= self.packets.count {
                    self.check.wrong += 1;
                    return;
                }
                let first = packet * PER_PACKET as u64;
                let g = gpu as u32 + 1;
                let answer = Outgoing {
                    dest: wire::NVLS_ENGINE,
                    vc: Vc::Response,
                    tl: wire::header(
                        wire::OP_READ_DATA,
                        wire::NVLS_ENGINE,
                        requester,
                        true,
                        packet as u32,
                    ),
                    payload: {
                        let own = sums_of(seed, first, g, 1);
                        payload_of(&own, self.packets.elements(packet), self.extension)
                    },
                    multicast: Some(wire::NVLS_ENGINE),
                };
                if let Some(q) = self.gpus[gpu].answers.get_mut(port) {
                    q.push_back(answer);
                }
            }
            wire::OP_REDUCE_DATA => {
                if !self.verify_sum(p, packet) {
                    return;
                }
                let m = &mut self.gpus[gpu];
                m.got(packet);
                if m.is_retired(port) {
                    // Summed before the plane was retired: the redo multicasts it.
                    return;
                }
                if let Some(o) = m.outstanding.get_mut(port) {
                    *o = o.saturating_sub(1);
                }
                let result = Outgoing {
                    dest: wire::NVLS_ALL,
                    vc: Vc::Posted,
                    tl: wire::header(OP_RESULT, wire::NVLS_ALL, gpu as u16, true, packet as u32),
                    payload: p.payload.clone(),
                    multicast: Some(wire::NVLS_ALL),
                };
                if let Some(q) = m.results.get_mut(port) {
                    q.push_back(result);
                }
            }
            OP_RESULT => {
                if self.verify_sum(p, packet) {
                    self.gpus[gpu].got(packet);
                }
            }
            _ => self.check.wrong += 1,
        }
    }

    /// Its GPUs wait only on their own links and arrivals.
    fn take_woken(&mut self) -> Option<usize> {
        None
    }

    fn done(&self) -> bool {
        self.check.wrong > 0
            || self.stranded.is_some()
            || self
                .gpus
                .iter()
                .all(|m| m.finals >= self.packets.count && m.outstanding.iter().all(|&o| o == 0))
    }
}

#[cfg(test)]
mod tests {
    use super::weighted_round_robin;

    #[test]
    fn planes_get_packets_in_proportion_to_their_links_spread_out() {
        let order = weighted_round_robin(&[5, 4, 4, 5]);
        assert_eq!(order.len(), 18);
        let count = |p| order.iter().filter(|&&x| x == p).count();
        assert_eq!([count(0), count(1), count(2), count(3)], [5, 4, 4, 5]);
        // Never the same plane twice in a row, so consecutive packets spread over the switches.
        assert!(order.windows(2).all(|w| w[0] != w[1]), "{order:?}");
        // Ports that lead to no switch get nothing.
        assert_eq!(weighted_round_robin(&[0, 2, 0, 1]), [1, 3, 1]);
    }
}
