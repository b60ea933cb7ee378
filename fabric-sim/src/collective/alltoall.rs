//! All-to-all: every GPU sends a distinct block of its buffer to every other GPU, as nccl-tests'
//! `alltoall_perf` does with one group of `ncclSend`/`ncclRecv` per peer.
//!
//! **Sizes.** As in nccl-tests, the size is each GPU's whole send buffer, `n` blocks of `count` elements
//! (`count` = size / 4 / n, at least one here), and block `d` goes to GPU `d`; a GPU's own block is a
//! local copy that never reaches the fabric. Bus bandwidth is algorithm bandwidth times `(n - 1) / n`.
//!
//! **Order.** Every pair at once: each port of a GPU takes one packet for each peer it leads to in turn,
//! starting after the GPU itself (NCCL's point-to-point schedule pairs rank `r` with `r + 1`, `r + 2`, ...),
//! so every destination is fed at the same rate and no two sources start on the same one.
//!
//! **Data.** GPU `s`'s element `j` is `a(j) * (s + 1) + b(j)`, so element `i` of the block from `s` to `d`
//! is its element `d * count + i`: distinct for every (source, destination, index), and checked in closed
//! form where it lands, with every packet of every block received exactly once.

use link_dl::{Received, Vc};
use link_phy::time::Instant;

use super::{carries, payload_of, sums_of, Check, Packets, PER_PACKET};
use crate::net::{App, Offer, Outgoing};
use crate::wire;

/// Elements each GPU sends each peer for an all-to-all of `bytes` over `n` GPUs (nccl-tests' `count`).
pub fn block_elements(bytes: u64, n: usize) -> u64 {
    (bytes / 4 / n.max(1) as u64).max(1)
}

/// All-to-all over GPUs `0..n` (see the module notes).
#[derive(Debug)]
pub struct AllToAll {
    n: usize,
    seed: u64,
    extension: bool,
    /// Elements per block, packets per block, and elements in a block's last packet.
    block: u64,
    /// How the buffer is cut into packets.
    packets: Packets,
    /// Packets sent: [source][dest].
    sent: Vec<Vec<u64>>,
    /// Packets received, one bit each: [dest][source][packet / 64].
    got: Vec<Vec<Vec<u64>>>,
    received: Vec<u64>,
    /// Per GPU and port, whom it sends to next.
    ports: Vec<Vec<PortTurn>>,
    check: Check,
}

/// Where a GPU port is in its round of peers.
#[derive(Clone, Debug)]
struct PortTurn {
    /// The peer to offer first.
    turn: usize,
    /// The peers the GPU still has packets for that this port leads to, in ascending order, and the
    /// routes they were worked out for ([`Offer::routes_plan`]): an offer takes the first at or after
    /// `turn`, instead of going round all the GPUs past those done or reached by other ports.
    peers: Vec<u16>,
    routes: usize,
}

impl AllToAll {
    /// An all-to-all of `bytes` per GPU (the send buffer: one block per GPU) over GPUs `0..n`.
    pub fn new(bytes: u64, n: usize, extension: bool, seed: u64) -> AllToAll {
        let block = block_elements(bytes, n);
        let split = Packets::of(block);
        let packets = split.count;
        AllToAll {
            n,
            seed,
            extension,
            block,
            packets: split,
            sent: vec![vec![0; n]; n],
            got: vec![vec![vec![0; packets.div_ceil(64) as usize]; n]; n],
            received: vec![0; n],
            ports: vec![Vec::new(); n],
            check: Check::default(),
        }
    }

    /// The most memory an all-to-all of `bytes` per GPU over `n` GPUs keeps: a bit per packet of every
    /// (destination, source) block, to see each received exactly once.
    pub fn most_bytes(bytes: u64, n: usize) -> u64 {
        let words = Packets::of(block_elements(bytes, n)).count.div_ceil(64);
        let blocks = n as u64 * n as u64;
        blocks * (words * 8 + core::mem::size_of::<Vec<u64>>() as u64)
    }

    /// The verdict so far.
    pub fn check(&self) -> Check {
        self.check
    }

    /// The size nccl-tests reports: each GPU's send buffer, `n` whole blocks.
    pub fn bytes(&self) -> u64 {
        self.block * 4 * self.n as u64
    }

    /// Elements per block (nccl-tests' count).
    pub fn block(&self) -> u64 {
        self.block
    }

    fn wrong(&mut self) {
        self.check.wrong += 1;
    }
}

impl App for AllToAll {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        let (n, port) = (self.n, offer.port);
        let Some(ports) = self.ports.get_mut(gpu) else {
            return false;
        };
        if ports.len() <= port {
            let first = PortTurn {
                turn: (gpu + 1) % n,
                peers: Vec::new(),
                routes: usize::MAX,
            };
            ports.resize(port + 1, first);
        }
        let this = &mut ports[port];
        if this.routes != offer.routes_plan {
            let (sent, count) = (&self.sent[gpu], self.packets.count);
            this.routes = offer.routes_plan;
            this.peers = (0..n as u16)
                .filter(|&d| usize::from(d) != gpu && sent[usize::from(d)] < count && offer.reaches(d))
                .collect();
        }
        // The first peer in turn: going round from the port's turn, the first this port still feeds.
        let after = this.peers.partition_point(|&d| usize::from(d) < this.turn);
        let Some(&dest) = this.peers.get(after).or(this.peers.first()) else {
            return false;
        };
        let dest = usize::from(dest);
        let packet = self.sent[gpu][dest];
        // Ask before computing the payload: most offers are refused while the link is busy.
        if !offer.fits(Vc::Posted, self.packets.payload_flits(packet, self.extension)) {
            return false;
        }
        let (seed, weight) = (self.seed, gpu as u32 + 1);
        let out = Outgoing {
            dest: dest as u16,
            vc: Vc::Posted,
            tl: wire::header(wire::OP_WRITE, dest as u16, gpu as u16, false, packet as u32),
            payload: {
                let first = dest as u64 * self.block + packet * PER_PACKET as u64;
                let own = sums_of(seed, first, weight, 1);
                payload_of(&own, self.packets.elements(packet), self.extension)
            },
            multicast: None,
        };
        if !offer.send(&out) {
            return false;
        }
        self.sent[gpu][dest] += 1;
        if self.sent[gpu][dest] == self.packets.count {
            // Done with this peer: no port offers it again.
            for other in &mut self.ports[gpu] {
                if let Ok(k) = other.peers.binary_search(&(dest as u16)) {
                    other.peers.remove(k);
                }
            }
        }
        self.ports[gpu][port].turn = (dest + 1) % self.n;
        self.check.packets_sent += 1;
        true
    }

    fn receive(&mut self, _now: Instant, gpu: usize, _port: usize, p: &Received) {
        let packet = u64::from(wire::offset(p.tl));
        let source = usize::from(wire::route_fields(p.tl).1);
        if wire::opcode(p.tl) != wire::OP_WRITE
            || source >= self.n
            || source == gpu
            || packet >= self.packets.count
            || p.payload.len() != self.packets.payload_flits(packet, self.extension)
        {
            return self.wrong();
        }
        let (word, bit) = ((packet / 64) as usize, 1u64 << (packet % 64));
        if self.got[gpu][source][word] & bit != 0 {
            return self.wrong();
        }
        let (seed, weight) = (self.seed, source as u32 + 1);
        let first = gpu as u64 * self.block + packet * PER_PACKET as u64;
        let ok = carries(
            p,
            self.extension,
            self.packets.elements(packet),
            &sums_of(seed, first, weight, 1),
        );
        if !ok {
            return self.wrong();
        }
        self.got[gpu][source][word] |= bit;
        self.received[gpu] += 1;
        self.check.packets_verified += 1;
    }

    /// Its GPUs wait only on their own links and arrivals.
    fn take_woken(&mut self) -> Option<usize> {
        None
    }

    fn done(&self) -> bool {
        let needed = (self.n as u64 - 1) * self.packets.count;
        self.check.wrong > 0 || self.received.iter().all(|&r| r >= needed)
    }
}
