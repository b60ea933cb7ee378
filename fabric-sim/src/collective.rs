//! Collectives that move real data: every GPU's input is computed from the seed, every packet carries the
//! bytes it should, every partial and final result is checked against the closed-form expectation.
//!
//! **Data.** Elements are 32-bit integers summed with wrapping, so sums are exact in any order. GPU `g`'s
//! element `i` is `a(i) * (g + 1) + b(i)` with `a`, `b` hashes of `i` and the seed; the sum of it over any
//! set of GPUs is then `a(i) * Σ(g + 1) + |set| * b(i)`, so every received byte is checked in constant time
//! per element, without storing any buffer.
//!
//! **Algorithms.** Ring (reduce-scatter then all-gather, as NCCL's ring), tree (two complementary binary
//! trees, reduce then broadcast, as NCCL's double binary tree: [`tree`]), switch reduction (as NVLink
//! SHARP / NCCL NVLS: `ld_reduce` reads through the switch, then a multicast store), the plain
//! collectives, and all-to-all ([`alltoall`]). The ring pipelines every packet: a GPU forwards a packet
//! as soon as it has it; the tree pipelines chunks, as NCCL's Simple protocol does.
//!
//! **Room at the receiver.** As in NCCL, a GPU holds what it receives from a connection in a buffer of
//! [`CHANNEL_BUFFER_BYTES`] until it has passed it on, and its sender sends only into room there: a ring
//! GPU whose next GPU's buffer is full waits (where the links after it are slower than those before, as
//! between the nodes of a fat tree, this is what stops it running ahead and its queue growing with the
//! message). The ring's sender sees room the moment the receiver frees it, where NCCL's receiver tells
//! it with a write that takes a link's latency to arrive: a buffer is thousands of packets, so that this
//! makes no difference to the time; the tree sends those writes as packets ([`tree`]).

use std::collections::VecDeque;

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::{Received, Vc};
use link_phy::time::Instant;

use crate::net::{App, Offer, Outgoing};
use crate::wire;

pub mod alltoall;
pub mod switch_reduce;
pub mod tree;

pub use alltoall::AllToAll;
pub use switch_reduce::SwitchReduce;
pub use tree::Tree;

/// Bytes of data per packet.
pub const PACKET_BYTES: usize = 128;
/// The largest message: a packet's number within a GPU's buffer is the 32-bit offset of its header
/// ([`wire::header`]), so a buffer holds at most 2^32 packets (512 GiB).
pub const MAX_MESSAGE_BYTES: u64 = (1 << 32) * PACKET_BYTES as u64;
/// What a GPU can hold of one connection (one ring's, or one tree's, from one peer) that it has received
/// and not yet passed on: NCCL's buffer per channel and peer for its Simple protocol (`NCCL_BUFFSIZE`'s
/// default).
pub const CHANNEL_BUFFER_BYTES: u64 = 4 << 20;
/// The same in packets.
pub const CHANNEL_BUFFER_PACKETS: u64 = CHANNEL_BUFFER_BYTES / PACKET_BYTES as u64;
/// A ring position's room-taken count has this bit set while the GPU before it waits for room.
const WAITING: u64 = 1 << 63;

/// Elements per packet.
pub(crate) const PER_PACKET: usize = PACKET_BYTES / 4;

/// Reduce-scatter partial sum (ring).
pub const OP_PARTIAL: u64 = 0x03;
/// Final result being spread (ring all-gather, broadcast).
pub const OP_RESULT: u64 = 0x04;

/// Take a place in the buffer of the position after `pos` (of a ring of `taken.len()`), if fewer than
/// `limit` are taken, and return that position; or mark it waited on.
fn take_room(taken: &mut [u64], pos: usize, limit: u64) -> Option<usize> {
    let next = if pos + 1 == taken.len() { 0 } else { pos + 1 };
    let room = taken.get_mut(next)?;
    if *room & !WAITING >= limit {
        *room |= WAITING;
        return None;
    }
    *room += 1;
    Some(next)
}

/// The collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Sum of every GPU's buffer, on every GPU.
    AllReduce,
    /// Every GPU's buffer, on every GPU (the size is the total).
    AllGather,
    /// The sum of every GPU's buffer, a slice on each GPU (the size is each GPU's input).
    ReduceScatter,
    /// GPU 0's buffer on every GPU.
    Broadcast,
    /// A distinct block from every GPU to every GPU (the size is each GPU's send buffer, one block per
    /// GPU).
    AllToAll,
}

impl Kind {
    /// The nccl-tests bus-bandwidth factor for `n` GPUs (nccl-tests `doc/PERFORMANCE.md`).
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Kind::AllReduce => 2.0 * (n - 1.0) / n,
            Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll => (n - 1.0) / n,
            Kind::Broadcast => 1.0,
        }
    }

    /// Bytes of the larger buffer per element of the count each rank passes to NCCL over `n` GPUs: one
    /// 32-bit element, or one per GPU for the collectives that give each GPU a block of the buffer
    /// (all-gather, reduce-scatter, all-to-all).
    pub fn bytes_per_count(self, n: usize) -> u64 {
        match self {
            Kind::AllReduce | Kind::Broadcast => 4,
            Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll => 4 * n.max(1) as u64,
        }
    }

    /// The size and count columns of nccl-tests' table for a message of `bytes` over `n` GPUs: the count
    /// each rank passes to NCCL (per rank for all-gather, reduce-scatter and all-to-all), and the size of
    /// the larger buffer it makes, `bytes` rounded down to whole counts.
    pub fn size_and_count(self, bytes: u64, n: usize) -> (u64, u64) {
        let unit = self.bytes_per_count(n);
        (bytes / unit * unit, bytes / unit)
    }
}

/// How a buffer of some elements is cut into packets of [`PER_PACKET`] elements: all full but the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packets {
    /// Packets in the buffer.
    pub(crate) count: u64,
    /// Elements in the last one.
    last: usize,
}

impl Packets {
    /// The packets of a buffer of `elements` (at least one).
    pub(crate) fn of(elements: u64) -> Packets {
        let elements = elements.max(1);
        let count = elements.div_ceil(PER_PACKET as u64);
        Packets {
            count,
            last: (elements - (count - 1) * PER_PACKET as u64) as usize,
        }
    }

    /// Elements in packet `packet`.
    pub(crate) fn elements(self, packet: u64) -> usize {
        if packet + 1 == self.count {
            self.last
        } else {
            PER_PACKET
        }
    }

    /// Flits after the header of packet `packet`: its data, and the address extension if the format has one.
    pub(crate) fn payload_flits(self, packet: u64, extension: bool) -> usize {
        usize::from(extension) + (self.elements(packet) * 4).div_ceil(FLIT_LEN)
    }
}

/// GPU `g`'s input element `i`: `a(i) * (g + 1) + b(i)`, with `a(i)` odd so that different sets of
/// GPUs sum to different values. Both come from 32-bit multiplies (MurmurHash3's finaliser), which
/// vector units do eight or sixteen at a time; 64-bit ones are emulated on AVX2 and NEON.
#[inline]
fn coefficients(seed: u64, i: u64) -> (u32, u32) {
    let (k0, k1) = (seed as u32, (seed >> 32) as u32);
    let x = (i as u32 ^ k0)
        .wrapping_mul(0x9E37_79B9)
        .wrapping_add((i >> 32) as u32 ^ k1);
    (mix32(x) | 1, mix32(x ^ k1.rotate_left(16) ^ 0x85EB_CA6B))
}

/// MurmurHash3's 32-bit finaliser: every input bit reaches every output bit.
#[inline(always)]
fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// [`coefficients`] of a packet's elements, `first .. first + PER_PACKET`: `(a, b)`.
type Block = ([u32; PER_PACKET], [u32; PER_PACKET]);

#[inline(always)]
fn block_of(seed: u64, first: u64) -> Block {
    let (mut a, mut b) = ([0; PER_PACKET], [0; PER_PACKET]);
    for k in 0..PER_PACKET {
        (a[k], b[k]) = coefficients(seed, first + k as u64);
    }
    (a, b)
}

/// Defines `fn $name(args) -> T { body }` compiled three times, for AVX-512 (sixteen 32-bit lanes), for
/// AVX2 (eight) and for the baseline (SSE2, which has no 32-bit lane multiply), calling at run time the
/// widest this processor has. The body's helpers are `#[inline(always)]`, so that each copy compiles
/// them for its own instructions: the hashes that generate and check every element, and the sums made
/// from them, were about a sixth of a ring all-reduce's instructions on the baseline alone.
macro_rules! widest_lanes {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512dq")]
                fn avx512($($arg: $ty),*) -> $ret $body
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) -> $ret $body
                if std::is_x86_feature_detected!("avx512dq") {
                    // Sound: the processor has the features `avx512` is compiled for, as just checked.
                    #[allow(unsafe_code)]
                    return unsafe { avx512($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") {
                    // Sound: as above, for `avx2`.
                    #[allow(unsafe_code)]
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body
        }
    };
}

widest_lanes! {
    /// The sums over a set of GPUs of their elements `first .. first + PER_PACKET`, given `Σ (g + 1)`
    /// over the set and its size.
    fn sums_of(seed: u64, first: u64, weight: u32, count: u32) -> [u32; PER_PACKET] {
        let (a, b) = block_of(seed, first);
        core::array::from_fn(|k| a[k].wrapping_mul(weight).wrapping_add(b[k].wrapping_mul(count)))
    }
}

widest_lanes! {
    /// `PER_PACKET` words drawn from `seed` (the coefficients `b` of elements `0 ..`): synthetic
    /// traffic's data, generated and checked many lanes at a time as the collectives' is.
    pub(crate) fn words_of(seed: u64) -> [u32; PER_PACKET] {
        block_of(seed, 0).1
    }
}

/// One packet's payload: the first `elements` of `words` (at most 32), four to a flit, little-endian, the
/// last flit padded with zeros, after NVLink's address-extension flit if the format has one.
pub(crate) fn payload_of(words: &[u32], elements: usize, extension: bool) -> heapless::Vec<Flit, 9> {
    let mut flits: heapless::Vec<Flit, 9> = heapless::Vec::new();
    if extension {
        // NVLink's address-extension flit (the upper address bits); zero here.
        let _ = flits.push([0; FLIT_LEN]);
    }
    // Each flit built in a register: a byte array filled word by word compiled to library calls.
    let flit = |four: &[u32]| {
        four.iter()
            .rev()
            .fold(0u128, |flit, &w| flit << 32 | u128::from(w))
    };
    let mut whole = words[..elements.min(words.len())].chunks_exact(4);
    for four in &mut whole {
        let _ = flits.push(flit(four).to_le_bytes());
    }
    let last = whole.remainder();
    if !last.is_empty() {
        let _ = flits.push(flit(last).to_le_bytes());
    }
    flits
}

/// Whether payload `p` is exactly `elements` elements after the address-extension flit (zero) if the
/// format has one, equal to the first of `expected`: whole words compared over the flat payload, which
/// the compiler does many lanes at once.
pub(crate) fn carries(p: &Received, extension: bool, elements: usize, expected: &[u32; PER_PACKET]) -> bool {
    let skip = usize::from(extension);
    p.payload.len() == skip + (elements * 4).div_ceil(FLIT_LEN)
        && p.payload[..skip].iter().all(|f| *f == [0; FLIT_LEN])
        && p.payload[skip..].as_flattened()[..elements * 4]
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .zip(expected)
            .fold(true, |ok, (v, &want)| ok & (v == want))
}

/// Check that every word of a whole packet is the partial sum `a * w + b * count` of its coefficients
/// `(a, b)`, and add GPU `g`'s own element `a * g + b` to it in place: fixed-size loops without branches,
/// which the compiler vectorises.
#[inline(always)]
fn check_and_add(
    packet: &mut [u8; PACKET_BYTES],
    (a, b): (&[u32; PER_PACKET], &[u32; PER_PACKET]),
    (w, count): (u32, u32),
    g: u32,
) -> bool {
    let mut v = [0u32; PER_PACKET];
    for (k, x) in v.iter_mut().enumerate() {
        *x = u32::from_le_bytes([
            packet[4 * k],
            packet[4 * k + 1],
            packet[4 * k + 2],
            packet[4 * k + 3],
        ]);
    }
    let mut diff = 0;
    for k in 0..PER_PACKET {
        diff |= v[k] ^ a[k].wrapping_mul(w).wrapping_add(b[k].wrapping_mul(count));
        v[k] = v[k].wrapping_add(a[k].wrapping_mul(g)).wrapping_add(b[k]);
    }
    for (k, x) in v.iter().enumerate() {
        packet[4 * k..4 * k + 4].copy_from_slice(&x.to_le_bytes());
    }
    diff == 0
}

widest_lanes! {
    /// Check the partial sum of `elements` elements from element `first` on (weight `w` over `count`
    /// GPUs, `partial`) that `payload` carries and, if right, add GPU `g`'s own elements to it in place:
    /// one hash per element for both jobs. Whether it was right.
    fn verify_and_add(
        seed: u64,
        extension: bool,
        elements: usize,
        payload: &mut [Flit],
        first: u64,
        partial: (u32, u32),
        g: u32,
    ) -> bool {
        let (w, count) = partial;
        let (coef_a, coef_b) = block_of(seed, first);
        let skip = usize::from(extension);
        if payload.len() != skip + (elements * 4).div_ceil(FLIT_LEN) {
            return false;
        }
        let bytes = &mut payload[skip..].as_flattened_mut()[..elements * 4];
        let coefficients = (&coef_a, &coef_b);
        if let Ok(whole) = <&mut [u8; PACKET_BYTES]>::try_from(&mut *bytes) {
            return check_and_add(whole, coefficients, partial, g);
        }
        // A last packet of fewer elements: the same on a whole packet, whose lanes past the elements
        // hold the partial sums they would have, so that they check out.
        let mut padded = [0u8; PACKET_BYTES];
        for (k, lane) in padded.chunks_exact_mut(4).enumerate().skip(elements) {
            lane.copy_from_slice(
                &coef_a[k]
                    .wrapping_mul(w)
                    .wrapping_add(coef_b[k].wrapping_mul(count))
                    .to_le_bytes(),
            );
        }
        padded[..bytes.len()].copy_from_slice(bytes);
        let ok = check_and_add(&mut padded, coefficients, partial, g);
        bytes.copy_from_slice(&padded[..bytes.len()]);
        ok
    }
}

/// Counters of a collective, and the verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// Packets whose data was checked and right.
    pub packets_verified: u64,
    /// Packets whose data was wrong (must be 0).
    pub wrong: u64,
    /// Packets sent by GPUs.
    pub packets_sent: u64,
}

/// How a ring `kind` over `n` GPUs cuts each GPU's block of a buffer of `elements` into packets, if it
/// cuts the buffer block by block: all-gather and reduce-scatter do, their chunks being the GPUs' blocks
/// ([`Blocks`]).
pub(crate) fn block_packets(kind: Kind, elements: u64, n: usize) -> Option<Packets> {
    let whole_blocks = n > 0 && elements % n as u64 == 0;
    (matches!(kind, Kind::AllGather | Kind::ReduceScatter) && whole_blocks)
        .then(|| Packets::of(elements / n as u64))
}

/// The buffer of an all-gather or a reduce-scatter over `n` GPUs cut into packets block by block, as
/// each GPU's block (its input for all-gather, its output for reduce-scatter) is its own: packet `j` of
/// block `c` is packet number `c * per_block + j`, and a block's last packet may be short. A ring moves
/// packets `from .. to` of every block.
#[derive(Clone, Copy, Debug)]
struct Blocks {
    /// Elements per block.
    elements: u64,
    /// How a block is cut into packets.
    packets: Packets,
    /// The packets of each block this ring moves.
    from: u64,
    to: u64,
}

/// A ring collective (all-reduce, all-gather, reduce-scatter, broadcast) over GPUs `0..n` in `order`.
#[derive(Debug)]
pub struct Ring {
    kind: Kind,
    n: usize,
    seed: u64,
    extension: bool,
    /// How the buffer is cut into packets.
    packets: Packets,
    /// The packets this ring moves, `[first, end)` (all of them unless it is one of several rings).
    first: u64,
    end: u64,
    /// For all-gather and reduce-scatter, whose chunks are the GPUs' blocks: how the buffer is cut
    /// instead, block by block (`packets`, `first` and `end` then unused).
    blocks: Option<Blocks>,
    /// Ring order: position -> GPU, and GPU -> position.
    order: Vec<usize>,
    position: Vec<usize>,
    /// Per GPU (by position): packets still to inject from its own input, and queued forwards.
    own_next: Vec<u64>,
    own_end: Vec<u64>,
    queue: Vec<VecDeque<Outgoing>>,
    /// Per GPU (by position): the room taken in its buffer (of `buffer_packets`) by packets sent to it
    /// that it has not yet passed on (on their way, or in its queue), and [`WAITING`] if the GPU before
    /// it was refused a send for want of that room, to be woken when some frees.
    taken: Vec<u64>,
    buffer_packets: u64,
    /// GPUs woken since the fabric last asked ([`App::take_woken`]).
    woken: Vec<usize>,
    /// The longest any queue has been.
    most_queued: usize,
    /// Per GPU (by position): final packets checked, and how many it must end with; and how many
    /// positions have not all of theirs yet (asked after every event: counted, not searched).
    finals: Vec<u64>,
    finals_needed: Vec<u64>,
    unfinished: usize,
    /// Whether ports of a GPU lead to the next GPU: [gpu][port].
    ports_to_next: Vec<Vec<bool>>,
    /// Where each position's chunk starts ([`Ring::chunk`]).
    chunk_starts: Vec<u64>,
    /// `Σ (g + 1)` over positions `0 .. i` of the ring gone round twice, `i` in `0 ..= 2n`: the weight of
    /// any run of positions is a difference of two, where adding them up costs a pass over the ring
    /// per packet (512 additions on a 512-GPU ring).
    weight_prefix: Vec<u32>,
    check: Check,
}

impl Ring {
    /// Ring `part` of `parts` that share a collective of `bytes` (see [`Kind`] for what the size means)
    /// over GPUs in ring `order`: it moves the `part`-th of the buffer's packets (one range, the shares
    /// differing by at most a packet; part 0 of 1 moves them all; for all-gather and reduce-scatter, the
    /// `part`-th of every GPU's block, `Blocks`). `ports_to_next[g][p]` says whether GPU `g`'s port `p`
    /// reaches the next GPU in the ring.
    #[allow(clippy::too_many_arguments)]
    pub fn part(
        kind: Kind,
        bytes: u64,
        order: Vec<usize>,
        ports_to_next: Vec<Vec<bool>>,
        extension: bool,
        seed: u64,
        part: u64,
        parts: u64,
    ) -> Ring {
        let n = order.len();
        let elements = (bytes / 4).max(1);
        let split = Packets::of(elements);
        let parts = parts.max(1);
        let (first, end) = (split.count * part / parts, split.count * (part + 1) / parts);
        // All-gather and reduce-scatter: chunk `c` must be exactly position `c`'s block, however the
        // block falls on packets (cut by packets alone, a block smaller than a packet left some GPUs
        // sending or receiving nothing at all).
        let blocks = block_packets(kind, elements, n).map(|packets| Blocks {
            elements: elements / n as u64,
            packets,
            from: packets.count * part / parts,
            to: packets.count * (part + 1) / parts,
        });
        let packets = match blocks {
            Some(b) => n as u64 * (b.to - b.from),
            None => end - first,
        };
        let mut position = vec![0; n];
        for (p, &g) in order.iter().enumerate() {
            position[g] = p;
        }
        let mut ring = Ring {
            kind,
            n,
            seed,
            extension,
            packets: split,
            first,
            end,
            blocks,
            order,
            position,
            own_next: vec![0; n],
            own_end: vec![0; n],
            queue: (0..n).map(|_| VecDeque::new()).collect(),
            taken: vec![0; n],
            buffer_packets: CHANNEL_BUFFER_PACKETS,
            woken: Vec::new(),
            most_queued: 0,
            finals: vec![0; n],
            finals_needed: vec![0; n],
            unfinished: 0,
            ports_to_next,
            chunk_starts: Vec::new(),
            weight_prefix: Vec::new(),
            check: Check::default(),
        };
        ring.weight_prefix = core::iter::once(0)
            .chain((0..2 * n).scan(0u32, |sum, i| {
                *sum = sum.wrapping_add(ring.order[i % n] as u32 + 1);
                Some(*sum)
            }))
            .collect();
        ring.chunk_starts = (0..n).map(|c| ring.chunk(c).0).collect();
        for pos in 0..n {
            let (own_start, own_end) = match kind {
                // Reduce-scatter starts with the position's own chunk, all-gather with its own input,
                // broadcast with everything at the root.
                Kind::AllReduce | Kind::ReduceScatter | Kind::AllGather => ring.chunk(pos),
                Kind::Broadcast if pos == 0 => (first, end),
                // Not a ring collective: nothing moves and the ring never finishes (never a vacuous pass).
                Kind::Broadcast | Kind::AllToAll => (0, 0),
            };
            ring.own_next[pos] = own_start;
            ring.own_end[pos] = own_end;
            ring.finals_needed[pos] = match kind {
                Kind::AllReduce => packets,
                Kind::AllGather => packets - (own_end - own_start),
                Kind::ReduceScatter => {
                    let (s, e) = ring.chunk((pos + 1) % n);
                    e - s
                }
                Kind::Broadcast if pos == 0 => 0,
                Kind::Broadcast | Kind::AllToAll => packets,
            };
        }
        ring.unfinished = (0..n).filter(|&p| ring.finals_needed[p] > 0).count();
        ring
    }

    /// A final packet of position `pos` checked.
    fn count_final(&mut self, pos: usize) {
        self.finals[pos] += 1;
        if self.finals[pos] == self.finals_needed[pos] {
            self.unfinished -= 1;
        }
    }

    /// The verdict so far.
    pub fn check(&self) -> Check {
        self.check
    }

    /// Packets `[start, end)` of chunk `c` of the ring's range (positions own chunks).
    fn chunk(&self, c: usize) -> (u64, u64) {
        if let Some(b) = self.blocks {
            let start = c as u64 * b.packets.count;
            return (start + b.from, start + b.to);
        }
        let n = self.n as u64;
        let len = self.end - self.first;
        (
            self.first + len * c as u64 / n,
            self.first + len * (c as u64 + 1) / n,
        )
    }

    /// Whether GPU `gpu` sends this ring's packets out of its port `port` under the routes `offer` knows:
    /// a port the ring was given that still leads to the next GPU, or, once a failure has cut the ring
    /// off all of those, any port the recomputed routes take there.
    fn sends_through(&self, gpu: usize, port: usize, offer: &Offer) -> bool {
        let next = self.order[(self.position[gpu] + 1) % self.n] as u16;
        if !offer.routes_through(next, port) {
            return false;
        }
        let ports = &self.ports_to_next[gpu];
        let stranded = || !(0..ports.len()).any(|p| ports[p] && offer.routes_through(next, p));
        ports.get(port).copied().unwrap_or(false) || stranded()
    }

    /// Send GPU `gpu`'s next packet on this ring out of the port `offer`, which the caller has checked
    /// leads on ([`Ring::sends_through`]), if the port can take it now and the next GPU has room for it;
    /// whether it did.
    fn next_packet(&mut self, gpu: usize, offer: &mut Offer) -> bool {
        let pos = self.position[gpu];
        // Room at the next GPU is asked after the port: most offers are refused while the link is busy.
        if let Some(front) = self.queue[pos].front() {
            // Sent from the queue, where it was built when it arrived.
            if !offer.fits(front.vc, front.payload.len()) {
                return false;
            }
            let Some(next) = take_room(&mut self.taken, pos, self.buffer_packets) else {
                return false;
            };
            if !offer.send(front) {
                self.taken[next] -= 1;
                return false;
            }
            self.queue[pos].pop_front();
            self.room_freed(pos);
            self.check.packets_sent += 1;
            return true;
        }
        if self.own_next[pos] < self.own_end[pos] {
            let packet = self.own_next[pos];
            // Ask before computing the payload: most offers are refused while the link is busy.
            let payload_flits = self.payload_flits(packet);
            if !offer.fits(Vc::Posted, payload_flits) {
                return false;
            }
            // A new packet leaves the last place to one passed on: new packets alone then never fill
            // every buffer round the ring, where none could move on.
            let Some(next) = take_room(&mut self.taken, pos, self.buffer_packets - 1) else {
                return false;
            };
            let out = self.own_packet(pos, packet);
            debug_assert_eq!(out.payload.len(), payload_flits);
            if !offer.send(&out) {
                self.taken[next] -= 1;
                return false;
            }
            self.own_next[pos] += 1;
            self.check.packets_sent += 1;
            return true;
        }
        false
    }

    /// Position `pos` has passed on a packet or kept it for good: its room is free, and the GPU before
    /// it woken if it waits for room.
    fn room_freed(&mut self, pos: usize) {
        let taken = &mut self.taken[pos];
        if *taken & !WAITING == 0 {
            return;
        }
        *taken -= 1;
        if *taken & WAITING != 0 {
            *taken &= !WAITING;
            let before = if pos == 0 { self.n - 1 } else { pos - 1 };
            self.woken.push(self.order[before]);
        }
    }

    /// Hold what a GPU can take of this ring to `packets` (at least 2) instead of NCCL's buffer.
    pub fn set_buffer_packets(&mut self, packets: u64) {
        self.buffer_packets = packets.max(2);
    }

    /// The most packets any GPU has had waiting to be passed on, for tests of the room it is given.
    pub fn most_queued(&self) -> usize {
        self.most_queued
    }

    /// `Σ (g + 1)` and count over ring positions `from ..= to`, going round.
    fn weight_range(&self, from: usize, to: usize) -> (u32, u32) {
        let count = (to + self.n - from) % self.n + 1;
        let weight = self.weight_prefix[from + count].wrapping_sub(self.weight_prefix[from]);
        (weight, count as u32)
    }

    /// `Σ (g + 1)` over all GPUs of the ring.
    fn ring_weight(&self) -> u32 {
        self.weight_prefix[self.n]
    }

    /// Whether `packet` is one this ring moves.
    fn moves(&self, packet: u64) -> bool {
        match self.blocks {
            Some(b) => {
                packet / b.packets.count < self.n as u64
                    && (b.from..b.to).contains(&(packet % b.packets.count))
            }
            None => (self.first..self.end).contains(&packet),
        }
    }

    /// How the buffer is cut into packets where packet `packet` lies, and its number in that cut.
    fn cut(&self, packet: u64) -> (Packets, u64) {
        match self.blocks {
            Some(b) => (b.packets, packet % b.packets.count),
            None => (self.packets, packet),
        }
    }

    /// Elements in packet `packet`.
    fn elements(&self, packet: u64) -> usize {
        let (packets, j) = self.cut(packet);
        packets.elements(j)
    }

    /// The buffer's element that packet `packet` starts with.
    fn first_element(&self, packet: u64) -> u64 {
        match self.blocks {
            Some(b) => {
                let (c, j) = (packet / b.packets.count, packet % b.packets.count);
                c * b.elements + j * PER_PACKET as u64
            }
            None => packet * PER_PACKET as u64,
        }
    }

    /// Flits after the header of packet `packet` ([`Packets::payload_flits`]).
    fn payload_flits(&self, packet: u64) -> usize {
        let (packets, j) = self.cut(packet);
        packets.payload_flits(j, self.extension)
    }

    /// The chunk `packet` (one this ring moves) belongs to: the last one that starts at or before it.
    fn chunk_of(&self, packet: u64) -> usize {
        // Chunks start at `first + len * c / n`, increasing with `c`; searched rather than divided for,
        // since every packet received asks.
        if let Some(b) = self.blocks {
            return (packet / b.packets.count) as usize;
        }
        let c = self.chunk_starts.partition_point(|&start| start <= packet);
        c.saturating_sub(1)
    }

    /// Packet `packet` from position `from_pos` to the next, carrying its elements from `words`.
    fn outgoing(&self, from_pos: usize, opcode: u64, packet: u64, words: &[u32]) -> Outgoing {
        let to = self.order[(from_pos + 1) % self.n] as u16;
        let from = self.order[from_pos] as u16;
        Outgoing {
            dest: to,
            vc: Vc::Posted,
            tl: wire::header(opcode, to, from, false, packet as u32),
            payload: payload_of(words, self.elements(packet), self.extension),
            multicast: None,
        }
    }

    /// Queue a packet to the next position carrying `payload`, built where it waits so that the payload
    /// is copied once, and return it for changes in place.
    fn queue_forward(
        &mut self,
        from_pos: usize,
        opcode: u64,
        packet: u64,
        payload: &[Flit],
    ) -> &mut Outgoing {
        let to = self.order[(from_pos + 1) % self.n] as u16;
        let from = self.order[from_pos] as u16;
        let queue = &mut self.queue[from_pos];
        queue.push_back(Outgoing {
            dest: to,
            vc: Vc::Posted,
            tl: wire::header(opcode, to, from, false, packet as u32),
            payload: heapless::Vec::new(),
            multicast: None,
        });
        let last = queue.len() - 1;
        self.most_queued = self.most_queued.max(queue.len());
        let out = &mut queue[last];
        let _ = out.payload.extend_from_slice(payload);
        out
    }

    /// What position `pos` sends first from its own input: a partial sum (its own data) for reductions,
    /// its input as a final value for all-gather and broadcast.
    fn own_packet(&self, pos: usize, packet: u64) -> Outgoing {
        let first = self.first_element(packet);
        let own = sums_of(self.seed, first, self.order[pos] as u32 + 1, 1);
        let opcode = match self.kind {
            Kind::AllReduce | Kind::ReduceScatter => OP_PARTIAL,
            // All-gather: chunk c is position c's input, final as it is.
            Kind::AllGather | Kind::Broadcast | Kind::AllToAll => OP_RESULT,
        };
        self.outgoing(pos, opcode, packet, &own)
    }

    /// Count a packet checked: right or wrong, as `ok` says; returns `ok`.
    fn tally(&mut self, ok: bool) -> bool {
        if ok {
            self.check.packets_verified += 1;
        } else {
            self.check.wrong += 1;
        }
        ok
    }

    /// Check that packet `packet` carries `expected`, in exactly the flits it needs.
    fn verify(&mut self, p: &Received, packet: u64, expected: &[u32; PER_PACKET]) -> bool {
        let ok = carries(p, self.extension, self.elements(packet), expected);
        self.tally(ok)
    }
}

impl App for Ring {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        self.sends_through(gpu, offer.port, offer) && self.next_packet(gpu, offer)
    }

    fn receive(&mut self, _now: Instant, gpu: usize, _port: usize, p: &Received) {
        let pos = self.position[gpu];
        if !self.take_in(pos, p) {
            // Not passed on (a final value, or wrong): its room is free at once.
            self.room_freed(pos);
        }
    }

    fn take_woken(&mut self) -> Option<usize> {
        self.woken.pop()
    }

    fn done(&self) -> bool {
        self.check.wrong > 0 || self.unfinished == 0
    }
}

impl Ring {
    /// What position `pos` does with a packet it received: check it, and queue it to be passed on
    /// (added to, for a partial sum) unless it has gone all the way. Whether it queued it.
    fn take_in(&mut self, pos: usize, p: &Received) -> bool {
        let n = self.n;
        let packet = u64::from(wire::offset(p.tl));
        let seed = self.seed;
        if !self.moves(packet) {
            self.check.wrong += 1;
            return false;
        }
        let c = self.chunk_of(packet);
        match wire::opcode(p.tl) {
            OP_PARTIAL => {
                // Partial sum of chunk c over positions c .. pos - 1; add this GPU's own data.
                let partial = self.weight_range(c, (pos + n - 1) % n);
                let g = self.order[pos] as u32 + 1;
                let (extension, elements) = (self.extension, self.elements(packet));
                let first = self.first_element(packet);
                let owner = (c + n - 1) % n;
                let passed_on = if pos != owner {
                    Some(OP_PARTIAL)
                } else {
                    // Fully reduced here.
                    (self.kind == Kind::AllReduce).then_some(OP_RESULT)
                };
                let (ok, queued) = match passed_on {
                    Some(opcode) => {
                        // Checked and added to where it waits to be sent on; taken back if wrong.
                        let out = self.queue_forward(pos, opcode, packet, &p.payload);
                        let ok =
                            verify_and_add(seed, extension, elements, &mut out.payload, first, partial, g);
                        if !ok {
                            self.queue[pos].pop_back();
                        }
                        (ok, ok)
                    }
                    None => {
                        let mut sum = p.payload.clone();
                        let ok = verify_and_add(seed, extension, elements, &mut sum, first, partial, g);
                        (ok, false)
                    }
                };
                if self.tally(ok) && pos == owner {
                    self.count_final(pos);
                }
                queued
            }
            OP_RESULT => {
                // A final value of chunk c: the full sum, or the input of the position that started it.
                let (origin, w, count) = match self.kind {
                    Kind::AllReduce | Kind::ReduceScatter => ((c + n - 1) % n, self.ring_weight(), n as u32),
                    Kind::AllGather => (c, self.order[c] as u32 + 1, 1),
                    Kind::Broadcast | Kind::AllToAll => (0, self.order[0] as u32 + 1, 1),
                };
                let sums = sums_of(seed, self.first_element(packet), w, count);
                if !self.verify(p, packet, &sums) {
                    return false;
                }
                self.count_final(pos);
                let passed_on = (pos + 1) % n != origin;
                if passed_on {
                    // Checked equal to the final value: pass it on as it came.
                    self.queue_forward(pos, OP_RESULT, packet, &p.payload);
                }
                passed_on
            }
            _ => {
                self.check.wrong += 1;
                false
            }
        }
    }
}

/// Several rings over the same GPUs, each moving its share of the buffer over its own order, as NCCL
/// runs one ring per channel: on a direct mesh the rings take the links in both directions and every
/// link a ring can use, where one ring would leave most of them idle.
#[derive(Debug)]
pub struct Rings {
    rings: Vec<Ring>,
    /// Per GPU and port, the rings that send out of it ([`Ring::sends_through`]), worked out again when
    /// the routes change.
    users: Vec<Vec<Vec<usize>>>,
    /// Per GPU, the routes `users` was worked out for ([`Offer::routes_plan`]).
    users_for: Vec<usize>,
    /// Per GPU, the ring asked first for its next packet (turns rotate, so that rings sharing a port
    /// share it fairly).
    turn: Vec<usize>,
    /// Packets that belong to no ring.
    stray: u64,
}

impl Rings {
    /// The collective of `bytes` split evenly over rings with these `(order, ports_to_next)` (see
    /// [`Ring::part`]).
    pub fn new(
        kind: Kind,
        bytes: u64,
        rings: Vec<(Vec<usize>, Vec<Vec<bool>>)>,
        extension: bool,
        seed: u64,
    ) -> Rings {
        let parts = rings.len() as u64;
        let gpus = rings.first().map_or(0, |(order, _)| order.len());
        // A list per port, filled in on a GPU's first offer (as after every change of routes).
        let users = (0..gpus)
            .map(|g| {
                let ports = rings.iter().map(|(_, p)| p[g].len()).max().unwrap_or(0);
                vec![Vec::new(); ports]
            })
            .collect();
        let rings = rings
            .into_iter()
            .enumerate()
            .map(|(k, (order, ports))| {
                Ring::part(kind, bytes, order, ports, extension, seed, k as u64, parts)
            })
            .collect();
        Rings {
            rings,
            users,
            users_for: vec![usize::MAX; gpus],
            turn: vec![0; gpus],
            stray: 0,
        }
    }

    /// The most memory the queues of `rings` rings over `gpus` GPUs can take with `buffer_packets` of
    /// room per ring and GPU.
    pub fn most_queue_bytes(rings: usize, gpus: usize, buffer_packets: u64) -> u64 {
        (rings * gpus) as u64 * buffer_packets * core::mem::size_of::<Outgoing>() as u64
    }

    /// Hold what a GPU can take of each ring to `packets` (see [`Ring::set_buffer_packets`]).
    pub fn set_buffer_packets(&mut self, packets: u64) {
        for ring in &mut self.rings {
            ring.set_buffer_packets(packets);
        }
    }

    /// The most packets any GPU has had waiting to be passed on, over every ring.
    pub fn most_queued(&self) -> usize {
        self.rings.iter().map(Ring::most_queued).max().unwrap_or(0)
    }

    /// The verdict so far, over every ring.
    pub fn check(&self) -> Check {
        self.rings.iter().fold(
            Check {
                wrong: self.stray,
                ..Check::default()
            },
            |sum, r| Check {
                packets_verified: sum.packets_verified + r.check.packets_verified,
                wrong: sum.wrong + r.check.wrong,
                packets_sent: sum.packets_sent + r.check.packets_sent,
            },
        )
    }
}

impl App for Rings {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        if self.users_for.get(gpu) != Some(&offer.routes_plan) {
            // The routes changed: a ring a failure cut off its own ports now sends where they go.
            let rings = &self.rings;
            let Some(ports) = self.users.get_mut(gpu) else {
                return false;
            };
            for (port, users) in ports.iter_mut().enumerate() {
                *users = (0..rings.len())
                    .filter(|&r| rings[r].sends_through(gpu, port, offer))
                    .collect();
            }
            self.users_for[gpu] = offer.routes_plan;
        }
        let Some(users) = self.users.get(gpu).and_then(|u| u.get(offer.port)) else {
            return false;
        };
        let start = self.turn.get(gpu).copied().unwrap_or(0);
        // The ring whose turn it is, then the others going round: one division per offer at most (one
        // per ring asked was a tenth of this function's time).
        let len = users.len();
        let mut at = if len.is_power_of_two() {
            start & (len - 1)
        } else {
            start.checked_rem(len).unwrap_or(0)
        };
        for k in 0..len {
            if self.rings[users[at]].next_packet(gpu, offer) {
                if let Some(turn) = self.turn.get_mut(gpu) {
                    *turn = start.wrapping_add(k + 1);
                }
                return true;
            }
            at = if at + 1 == len { 0 } else { at + 1 };
        }
        false
    }

    fn receive(&mut self, now: Instant, gpu: usize, port: usize, p: &Received) {
        let packet = u64::from(wire::offset(p.tl));
        match self.rings.iter_mut().find(|r| r.moves(packet)) {
            Some(ring) => ring.receive(now, gpu, port, p),
            None => self.stray += 1,
        }
    }

    fn take_woken(&mut self) -> Option<usize> {
        self.rings.iter_mut().find_map(Ring::take_woken)
    }

    fn done(&self) -> bool {
        self.stray > 0 || self.rings.iter().all(Ring::done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-GPU ring all-reduce of 3 full packets (one per chunk).
    fn ring(extension: bool) -> Ring {
        let ports = vec![vec![true]; 3];
        Ring::part(Kind::AllReduce, 3 * 128, vec![0, 1, 2], ports, extension, 7, 0, 1)
    }

    #[test]
    fn vector_blocks_equal_the_element_hash() {
        // Whichever instruction set `sums_of` picks here, its hashes are `coefficients` exactly: with
        // weights (1, 0) and (0, 1) the sums are the two coefficients themselves.
        for (seed, first) in [(1, 0), (7, 32 * 12345), (u64::MAX, u64::MAX - 64)] {
            let (a, b) = (sums_of(seed, first, 1, 0), sums_of(seed, first, 0, 1));
            for k in 0..PER_PACKET {
                assert_eq!(
                    (a[k], b[k]),
                    coefficients(seed, first + k as u64),
                    "seed {seed} element {k}"
                );
            }
        }
    }

    /// A packet's chunk is the last chunk starting at or before it, including where chunks are empty
    /// (fewer packets than GPUs) and for rings that move a part of the buffer.
    #[test]
    fn every_packet_belongs_to_the_chunk_that_holds_it() {
        for n in 1..=9 {
            for packets in [1u64, 2, 5, 8, 9, 31, 100] {
                for (part, parts) in [(0, 1), (1, 3), (2, 3)] {
                    let ports = vec![vec![true]; n];
                    let bytes = packets * 128;
                    let r = Ring::part(
                        Kind::AllReduce,
                        bytes,
                        (0..n).collect(),
                        ports,
                        false,
                        1,
                        part,
                        parts,
                    );
                    for packet in r.first..r.end {
                        let c = r.chunk_of(packet);
                        let (start, end) = r.chunk(c);
                        assert!(
                            start <= packet && packet < end,
                            "n {n} packets {packets} part {part}"
                        );
                        assert!((c + 1..n).all(|later| r.chunk(later).0 > packet));
                    }
                }
            }
        }
    }

    /// All-gather's and reduce-scatter's chunks are the GPUs' blocks exactly, whatever the block's size
    /// against a packet's: every position has its own block to send (all-gather: its input) and a block
    /// to end with, and the packets of each cover its elements and no other's, over one ring or several.
    #[test]
    fn all_gather_and_reduce_scatter_chunks_are_the_gpus_blocks() {
        for kind in [Kind::AllGather, Kind::ReduceScatter] {
            for n in 2..=9usize {
                for block in [1u64, 3, 31, 32, 33, 64, 100] {
                    for parts in [1u64, 2, 3] {
                        let mut covered = vec![0u32; n * block as usize];
                        for part in 0..parts {
                            let r = Ring::part(
                                kind,
                                4 * block * n as u64,
                                (0..n).collect(),
                                vec![vec![true]; n],
                                false,
                                1,
                                part,
                                parts,
                            );
                            for c in 0..n {
                                let (start, end) = r.chunk(c);
                                for packet in start..end {
                                    assert!(r.moves(packet) && r.chunk_of(packet) == c);
                                    let first = r.first_element(packet);
                                    for e in first..first + r.elements(packet) as u64 {
                                        assert_eq!(e / block, c as u64, "{kind:?} n {n} block {block}");
                                        covered[e as usize] += 1;
                                    }
                                }
                            }
                            if parts == 1 {
                                assert!(
                                    (0..n).all(|pos| r.own_next[pos] < r.own_end[pos]),
                                    "{kind:?} n {n}"
                                );
                                assert!((0..n).all(|pos| r.finals_needed[pos] > 0), "{kind:?} n {n}");
                            }
                        }
                        assert!(
                            covered.iter().all(|&k| k == 1),
                            "{kind:?} n {n} block {block} parts {parts}"
                        );
                    }
                }
            }
        }
    }

    /// The weight of a run of positions, going round, is the sum over it.
    #[test]
    fn weights_of_position_runs_are_their_sums() {
        let order = vec![3, 0, 4, 1, 2];
        let r = Ring::part(
            Kind::AllReduce,
            4096,
            order.clone(),
            vec![vec![true]; 5],
            false,
            1,
            0,
            1,
        );
        assert_eq!(r.ring_weight(), 15);
        for from in 0..5 {
            for to in 0..5 {
                let count = (to + 5 - from) % 5 + 1;
                let sum = (0..count).map(|k| order[(from + k) % 5] as u32 + 1).sum();
                assert_eq!(r.weight_range(from, to), (sum, count as u32), "{from}..={to}");
            }
        }
    }

    /// `carries` (every collective's check of a payload) takes exactly the expected words, in exactly the
    /// flits they need, after the extension flit if there is one; last packets of a few elements too.
    #[test]
    fn a_payload_carries_exactly_the_expected_words() {
        let expected = sums_of(5, 64, 3, 2);
        for extension in [false, true] {
            for elements in [1, 3, 4, 5, 31, 32] {
                let payload = payload_of(&expected, elements, extension);
                let p = Received {
                    vc: Vc::Posted,
                    tl: 0,
                    payload,
                };
                assert!(carries(&p, extension, elements, &expected));
                let skip = usize::from(extension);
                for byte in 0..elements * 4 {
                    let mut bad = p.clone();
                    bad.payload[skip + byte / FLIT_LEN][byte % FLIT_LEN] ^= 0x80;
                    assert!(
                        !carries(&bad, extension, elements, &expected),
                        "{elements} {byte}"
                    );
                }
                let mut short = p.clone();
                short.payload.pop();
                assert!(!carries(&short, extension, elements, &expected));
                let mut long = p.clone();
                if long.payload.push([0; FLIT_LEN]).is_ok() {
                    assert!(!carries(&long, extension, elements, &expected));
                }
            }
        }
    }

    /// Every element is checked: a wrong value anywhere in a packet, a short packet or a long one is
    /// counted wrong and not passed on; right ones are.
    #[test]
    fn receiving_checks_every_element() {
        for extension in [false, true] {
            receiving_checks_every_element_of(ring(extension), usize::from(extension));
        }
    }

    fn receiving_checks_every_element_of(mut r: Ring, skip: usize) {
        // Position 0's own partial sum of chunk 0, for position 1.
        let partial = r.own_packet(0, 0);
        let full = r.ring_weight();
        let sums = sums_of(7, 0, full, 3);
        let result = r.outgoing(2, OP_RESULT, 0, &sums);
        for (packet, to) in [(partial, 1), (result, 0)] {
            let good = packet.to_received();
            r.receive(Instant(0), to, 0, &good);
            assert_eq!(
                r.check(),
                Check {
                    packets_verified: 1,
                    wrong: 0,
                    packets_sent: 0
                }
            );
            assert_eq!(r.queue[to].len(), 1, "passed on");
            r.queue[to].clear();
            r.check.packets_verified = 0;
            let mut bad = Vec::new();
            for byte in 0..128 {
                let mut p = good.clone();
                p.payload[skip + byte / FLIT_LEN][byte % FLIT_LEN] ^= 1 << (byte % 8);
                bad.push(p);
            }
            let mut short = good.clone();
            short.payload.pop();
            bad.push(short);
            let mut long = good.clone();
            if long.payload.push([0; FLIT_LEN]).is_ok() {
                bad.push(long);
            }
            for p in bad {
                let before = r.check().wrong;
                r.receive(Instant(0), to, 0, &p);
                assert_eq!(r.check().wrong, before + 1);
            }
            assert_eq!(r.check().packets_verified, 0);
            assert!(r.queue[to].is_empty(), "nothing wrong passed on");
            r.check.wrong = 0;
        }
    }
}
