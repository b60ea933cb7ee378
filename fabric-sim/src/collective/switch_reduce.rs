//! All-reduce in the switches (NVLink SHARP, as NCCL's NVLS algorithm): each packet is summed by the
//! collective engine of one switch plane and multicast back to every GPU.

use std::collections::VecDeque;

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::{Received, Vc};
use link_phy::time::Instant;

use super::{elements_of, payload_of, sum_of, Check, Packets, OP_RESULT, PER_PACKET};
use crate::net::{App, Offer, Outgoing};
use crate::wire;

/// All-reduce in the switches (NVLink SHARP, as NCCL's NVLS algorithm): GPU `g` owns the `g`-th slice;
/// for every packet of it, it asks a switch for the sum (`ld_reduce`: the switch reads the packet from
/// every GPU and sums the answers), then stores the sum to the multicast group of all GPUs (`multimem.st`),
/// which the switch copies to every other GPU.
#[derive(Debug)]
pub struct SwitchReduce {
    n: usize,
    seed: u64,
    extension: bool,
    /// How the buffer is cut into packets.
    packets: Packets,
    /// Per GPU and port: the next of the GPU's own packets whose plane is that port.
    own_next: Vec<Vec<u64>>,
    own_end: Vec<u64>,
    /// Answers to the switches' reads, which must leave on the port the read came in on: [gpu][port].
    answers: Vec<Vec<VecDeque<Outgoing>>>,
    /// Sums to multicast, on the plane (port) that reduced them: [gpu][port].
    results: Vec<Vec<VecDeque<Outgoing>>>,
    /// Ports of each GPU that lead to a switch: [gpu][port].
    to_switch: Vec<Vec<bool>>,
    /// Per GPU: packet `k` belongs to the switch plane behind port `planes[gpu][k % planes[gpu].len()]`.
    planes: Vec<Vec<usize>>,

    finals: Vec<u64>,
    check: Check,
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
        let slice = |g: usize| (packets * g as u64 / n as u64, packets * (g as u64 + 1) / n as u64);
        let planes: Vec<Vec<usize>> = links_to_switch
            .iter()
            .map(|ports| weighted_round_robin(ports))
            .collect();
        let mut app = SwitchReduce {
            n,
            seed,
            extension,
            packets: split,
            own_next: links_to_switch.iter().map(|ports| vec![0; ports.len()]).collect(),
            own_end: (0..n).map(|g| slice(g).1).collect(),
            answers: links_to_switch
                .iter()
                .map(|ports| ports.iter().map(|_| VecDeque::new()).collect())
                .collect(),
            results: links_to_switch
                .iter()
                .map(|ports| ports.iter().map(|_| VecDeque::new()).collect())
                .collect(),
            to_switch: links_to_switch
                .iter()
                .map(|ports| ports.iter().map(|&l| l > 0).collect())
                .collect(),
            planes,
            finals: vec![0; n],
            check: Check::default(),
        };
        for g in 0..n {
            for port in 0..app.own_next[g].len() {
                app.own_next[g][port] = app.next_on_plane(g, port, slice(g).0);
            }
        }
        app
    }

    /// The first packet at or after `from` whose plane is `port` (`u64::MAX` if none).
    fn next_on_plane(&self, gpu: usize, port: usize, from: u64) -> u64 {
        let planes = &self.planes[gpu];
        if planes.is_empty() {
            return u64::MAX;
        }
        (from..from + planes.len() as u64)
            .find(|&k| planes[(k % planes.len() as u64) as usize] == port)
            .unwrap_or(u64::MAX)
    }

    /// The verdict so far.
    pub fn check(&self) -> Check {
        self.check
    }

    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        (0..self.n)
            .map(|g| {
                format!(
                    "gpu {g}: own {:?}/{} answers {:?} results {:?} finals {}\n",
                    self.own_next[g],
                    self.own_end[g],
                    self.answers[g].iter().map(VecDeque::len).collect::<Vec<_>>(),
                    self.results[g].iter().map(VecDeque::len).collect::<Vec<_>>(),
                    self.finals[g]
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
            && elements_of(p, self.extension, self.packets.elements(packet))
                .enumerate()
                .all(|(e, v)| v == sum_of(seed, first + e as u64, w, count));
        if ok {
            self.check.packets_verified += 1;
        } else {
            self.check.wrong += 1;
        }
        ok
    }
}

impl App for SwitchReduce {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &Offer) -> Option<Outgoing> {
        let port = offer.port;
        if !self.to_switch[gpu].get(port).copied().unwrap_or(false) {
            return None;
        }
        // Finished sums first: each one completes work (and frees the switch's state for it), while the
        // switches' reads can wait; answering reads first lets a backlog of them hold every sum back.
        for queue in [&mut self.results[gpu][port], &mut self.answers[gpu][port]] {
            if let Some(front) = queue.front() {
                if offer.fits(front.vc, front.payload.len()) {
                    self.check.packets_sent += 1;
                    return queue.pop_front();
                }
                return None;
            }
        }
        if self.own_next[gpu][port] < self.own_end[gpu] {
            let packet = self.own_next[gpu][port];
            let payload: heapless::Vec<Flit, 9> = if self.extension {
                core::iter::once([0; FLIT_LEN]).collect()
            } else {
                heapless::Vec::new()
            };
            let request = Outgoing {
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
            };
            if offer.fits(request.vc, request.payload.len()) {
                self.own_next[gpu][port] = self.next_on_plane(gpu, port, packet + 1);
                self.check.packets_sent += 1;
                return Some(request);
            }
        }
        None
    }

    fn receive(&mut self, _now: Instant, gpu: usize, port: usize, p: Received) {
        let packet = u64::from(wire::offset(p.tl));
        let seed = self.seed;
        match wire::opcode(p.tl) {
            wire::OP_READ => {
                // The switch reads this GPU's input for a packet someone asked the sum of.
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
                    payload: payload_of(first, self.packets.elements(packet), self.extension, |i| {
                        sum_of(seed, i, g, 1)
                    }),
                    multicast: Some(wire::NVLS_ENGINE),
                };
                if let Some(q) = self.answers[gpu].get_mut(port) {
                    q.push_back(answer);
                }
            }
            wire::OP_REDUCE_DATA => {
                if !self.verify_sum(&p, packet) {
                    return;
                }
                self.finals[gpu] += 1;
                let result = Outgoing {
                    dest: wire::NVLS_ALL,
                    vc: Vc::Posted,
                    tl: wire::header(OP_RESULT, wire::NVLS_ALL, gpu as u16, true, packet as u32),
                    payload: p.payload,
                    multicast: Some(wire::NVLS_ALL),
                };
                if let Some(q) = self.results[gpu].get_mut(port) {
                    q.push_back(result);
                }
            }
            OP_RESULT => {
                if self.verify_sum(&p, packet) {
                    self.finals[gpu] += 1;
                }
            }
            _ => self.check.wrong += 1,
        }
    }

    fn done(&self) -> bool {
        self.check.wrong > 0 || self.finals.iter().all(|&f| f >= self.packets.count)
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
