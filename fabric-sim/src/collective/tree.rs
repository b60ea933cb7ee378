//! Tree all-reduce: NCCL's double binary tree, reduce up and broadcast down, pipelined in chunks.
//!
//! **Trees.** Two binary trees over the ranks (rank `r` is GPU `r`). The first is NCCL's `ncclGetBtree`:
//! rooted at 0, a rank's level is its lowest set bit, its parent clears that bit and sets the next one up
//! (or only clears it when that is out of range), its children are the rank minus and plus half that bit.
//! Odd ranks are its leaves. The second is the first mirrored (`r -> n - 1 - r`) when `n` is even, or
//! shifted by one (`r -> r + 1 mod n`) when it is odd, so that a rank that is a leaf in one tree is
//! interior in the other: every rank sends and receives at close to the same rate, which one binary
//! tree alone would not do (its leaves only send up and receive down). Each tree carries half the data:
//! tree 0 the first half of the buffer's packets, tree 1 the second. Sources: NVIDIA's blog post
//! "Massively Scale Your Deep Learning Training with NCCL 2.4" (2019), which introduced double binary
//! trees, and NCCL's `src/graph/trees.cc` (`ncclGetBtree`, `ncclGetDtree`), read for the construction;
//! this is a fresh implementation, not a copy.
//!
//! **Chunks.** Each tree's half is cut into chunks. A rank sends its partial sum of a chunk up once it
//! has the chunk whole from all its children, and passes a chunk of the result down once it has it whole
//! from its parent (the root: once it has reduced it), as NCCL's Simple protocol does: the receiver
//! learns of data a step at a time, when the sender posts the step. Chunks stream through the tree one
//! behind the other, so the time is about `(chunks + 2 * depth) * chunk time` and the fill latency is a
//! small share at large sizes. The chunk size is NCCL's for the tree with the Simple protocol
//! (`enqueue.cc`, "Optimize chunkSize / nSteps"): one step of the 4 MiB buffer split in `NCCL_STEPS` = 8,
//! 512 KiB, halved while the message gives fewer than `8 * depth` chunks per channel (down to 128 KiB),
//! fewer than `4 * depth` (down to 64 KiB) and fewer than `depth` (down to 32 KiB), with one channel per
//! tree and `depth` = ⌊log2 n⌋ (NCCL's `nRanks/nNodes - 1 + log2i(nNodes)` with one rank per tree node).
//!
//! **Flow control.** As in NCCL, every connection has [`STEPS`] chunk slots at the receiver: a rank may
//! send chunk `k` only when the receiver has freed the slot of chunk `k - STEPS`. The receiver tells the
//! sender with a small write (NCCL's `head` counter), [`OP_CREDIT`], carrying how many chunks it has
//! freed. A reduction slot is freed when the partial sum has gone up (the root: when the result has gone
//! down to every child), a result slot when the chunk has gone down to every child (a leaf: at once).
//! Unlike NCCL, whose counters carry over to the next operation, a receiver stops telling once its sender
//! may send its last chunk: each size starts afresh, so a later credit would serve nothing and would
//! still be on its way when the size ends (the next size's tree would take it for its own).
//!
//! **Data.** Every rank checks every packet it receives against the closed form: a child's partial sum
//! against the sum over the child's subtree, a result against the sum over all ranks, and adds the
//! children's packets and its own input into the chunk it sends up. The root checks each reduced chunk.

use std::collections::VecDeque;

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::{Received, Vc};
use link_phy::time::Instant;

use super::{carries, payload_of, sums_of, Check, Packets, OP_PARTIAL, OP_RESULT, PACKET_BYTES, PER_PACKET};
use crate::net::{App, Offer, Outgoing};
use crate::wire;

/// Chunk slots per connection (NCCL's `NCCL_STEPS`).
pub const STEPS: u64 = 8;
/// The largest chunk: one step of NCCL's 4 MiB Simple-protocol buffer.
pub const STEP_BYTES: u64 = super::CHANNEL_BUFFER_BYTES / STEPS;
/// A receiver's credit: it has freed the slots of a number of chunks of one connection. Offset: tree
/// (bit 26), direction (bit 25: 0 for partial sums going up, 1 for results going down), chunks freed
/// (bits 24:0); one data flit repeats the count.
pub const OP_CREDIT: u64 = 0x05;

const FREE: u64 = u64::MAX;
const COUNT_BITS: u32 = 25;
const UP: u64 = 0;
const DOWN: u64 = 1;

/// The fields of a credit's offset ([`OP_CREDIT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credit {
    /// Which of the two trees.
    pub tree: usize,
    /// 0 for partial sums going up, 1 for results going down.
    pub direction: u64,
    /// Chunks whose slots were freed.
    pub count: u64,
}

impl Credit {
    /// The credit an offset carries.
    pub const fn of(offset: u32) -> Credit {
        Credit {
            tree: ((offset >> (COUNT_BITS + 1)) & 1) as usize,
            direction: ((offset >> COUNT_BITS) & 1) as u64,
            count: (offset & ((1 << COUNT_BITS) - 1)) as u64,
        }
    }

    /// The offset that carries it.
    pub const fn offset(self) -> u32 {
        (self.tree as u32) << (COUNT_BITS + 1) | (self.direction as u32) << COUNT_BITS | self.count as u32
    }
}

/// Parent and children of `rank` in NCCL's binary tree over `n` ranks, rooted at 0 (`ncclGetBtree`).
pub fn btree(n: usize, rank: usize) -> (Option<usize>, Vec<usize>) {
    let mut bit = 1;
    while bit < n && bit & rank == 0 {
        bit <<= 1;
    }
    if rank == 0 {
        return (None, if n > 1 { vec![bit >> 1] } else { Vec::new() });
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= n {
        up = rank ^ bit;
    }
    let low = bit >> 1;
    let mut children = Vec::new();
    if low > 0 {
        children.push(rank - low);
        // The second child is the rank plus the largest power of two up to `low` that stays in range.
        let mut second = low;
        while second > 0 && rank + second >= n {
            second >>= 1;
        }
        if second > 0 {
            children.push(rank + second);
        }
    }
    (Some(up), children)
}

/// Parent and children of every rank in each of the two trees (`ncclGetDtree`): the binary tree, and its
/// mirror image (even `n`) or its shift by one rank (odd `n`).
pub fn double_tree(n: usize) -> [Vec<(Option<usize>, Vec<usize>)>; 2] {
    let first = (0..n).map(|r| btree(n, r)).collect();
    let second = (0..n)
        .map(|r| {
            let (from, to): (usize, Box<dyn Fn(usize) -> usize>) = if n % 2 == 1 {
                ((r + n - 1) % n, Box::new(move |x| (x + 1) % n))
            } else {
                (n - 1 - r, Box::new(move |x| n - 1 - x))
            };
            let (parent, children) = btree(n, from);
            (parent.map(&to), children.into_iter().map(&to).collect())
        })
        .collect();
    [first, second]
}

/// The tree depth NCCL sizes chunks by: ⌊log2 n⌋.
pub fn depth(n: usize) -> u64 {
    u64::from(usize::BITS - 1 - n.max(1).leading_zeros())
}

/// NCCL's tree chunk size for an all-reduce of `bytes` over `n` ranks with a buffer of `buffer` bytes
/// per connection (see the module notes; NCCL's default buffer makes the largest chunk [`STEP_BYTES`]).
pub fn chunk_bytes(bytes: u64, n: usize, buffer: u64) -> u64 {
    const CHANNELS: u64 = 2;
    let depth = depth(n);
    let mut chunk = (buffer / STEPS).max(PACKET_BYTES as u64);
    let per_channel = |chunk: u64| bytes / (CHANNELS * chunk);
    while per_channel(chunk) < depth * 8 && chunk > 128 * 1024 {
        chunk /= 2;
    }
    while per_channel(chunk) < depth * 4 && chunk > 64 * 1024 {
        chunk /= 2;
    }
    while per_channel(chunk) < depth && chunk > 32 * 1024 {
        chunk /= 2;
    }
    chunk
}

/// A receive slot: the chunk it holds, packets received, contributions per packet, and the data (empty
/// where the rank only counts).
#[derive(Clone, Debug)]
struct Slot {
    chunk: u64,
    got: u64,
    seen: Vec<u8>,
    data: Vec<u32>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            chunk: FREE,
            got: 0,
            seen: Vec::new(),
            data: Vec::new(),
        }
    }

    fn holds_whole(&self, chunk: u64, needed: u64) -> bool {
        self.chunk == chunk && self.got == needed
    }
}

/// One rank's place in one tree and its progress.
#[derive(Clone, Debug)]
struct Role {
    parent: Option<usize>,
    children: Vec<usize>,
    /// Σ (g + 1) and size of each child's subtree.
    child_weight: Vec<(u32, u32)>,
    /// Up: the chunk being sent to the parent, its next packet, and chunks the parent has freed.
    up_chunk: u64,
    up_next: u64,
    up_credit: u64,
    /// Partial sums from the children (and, at the root, the result).
    reduce: Vec<Slot>,
    /// The result from the parent.
    result: Vec<Slot>,
    /// Chunks of the result this rank has whole, in order.
    have: u64,
    /// Down, per child: the chunk being sent, its next packet, and chunks the child has freed.
    down_chunk: Vec<u64>,
    down_next: Vec<u64>,
    down_credit: Vec<u64>,
    /// Chunks of the result sent to every child (their slots freed).
    down_freed: u64,
}

/// All-reduce over NCCL's double binary tree (see the module notes).
#[derive(Debug)]
pub struct Tree {
    n: usize,
    seed: u64,
    extension: bool,
    /// How the buffer is cut into packets.
    packets: Packets,
    chunk_packets: u64,
    /// Per tree: its packets `[start, end)`.
    range: [(u64, u64); 2],
    /// Per tree: its chunks (asked on every offer, so not divided out each time).
    chunk_count: [u64; 2],
    /// Per tree, per GPU.
    roles: [Vec<Role>; 2],
    /// Credits waiting to be sent, per GPU.
    credits: Vec<VecDeque<Outgoing>>,
    /// Per GPU and port, the stream to offer first (round robin over up and down streams of both trees).
    turn: Vec<Vec<usize>>,
    /// Packets of the final result each GPU has checked.
    finals: Vec<u64>,
    total_weight: u32,
    check: Check,
}

/// Streams per GPU: per tree, up to the parent and down to each of two children.
const STREAMS: usize = 6;

impl Tree {
    /// An all-reduce of `bytes` over GPUs `0..n` (at least two), with chunks of [`chunk_bytes`] for a
    /// buffer of `buffer` bytes per connection.
    pub fn new(bytes: u64, n: usize, buffer: u64, extension: bool, seed: u64) -> Tree {
        Tree::with_chunk(bytes, chunk_bytes(bytes, n, buffer), n, extension, seed)
    }

    /// The most memory the chunk slots of `n` ranks can take with chunks of `chunk` bytes: per rank and
    /// tree, [`STEPS`] slots for the sums from its children and as many for the result from its parent.
    pub fn most_slot_bytes(n: usize, chunk: u64) -> u64 {
        n as u64 * 2 * 2 * STEPS * chunk
    }

    /// Whether an all-reduce of `bytes` over `n` ranks with a buffer of `buffer` bytes per connection
    /// has few enough chunks for its credits, which count a tree's chunks in `COUNT_BITS` bits; if not,
    /// why (a larger buffer makes larger chunks).
    pub fn fits(bytes: u64, n: usize, buffer: u64) -> Result<(), String> {
        let (packets, chunk_packets) = Tree::cut(bytes, chunk_bytes(bytes, n, buffer));
        let most = (1u64 << COUNT_BITS) - 1;
        match Tree::chunks_per_tree(packets.count, chunk_packets)
            .into_iter()
            .max()
        {
            Some(chunks) if chunks > most => Err(format!(
                "the tree all-reduce of {bytes} B with --buffsize {buffer} B cuts each tree into {chunks} \
                 chunks, more than the {most} its credits count: give a larger --buffsize"
            )),
            _ => Ok(()),
        }
    }

    /// How a message of `bytes` is cut: into packets, and packets per chunk of `chunk_bytes` (rounded up
    /// to whole packets).
    fn cut(bytes: u64, chunk_bytes: u64) -> (Packets, u64) {
        (
            Packets::of((bytes / 4).max(1)),
            chunk_bytes.div_ceil(PACKET_BYTES as u64).max(1),
        )
    }

    /// The first tree's packets (the second has the rest).
    fn first_half(packets: u64) -> u64 {
        packets.div_ceil(2)
    }

    /// Chunks of each tree.
    fn chunks_per_tree(packets: u64, chunk_packets: u64) -> [u64; 2] {
        let half = Tree::first_half(packets);
        [half, packets - half].map(|p| p.div_ceil(chunk_packets))
    }

    /// The same with a chosen chunk size (rounded up to whole packets).
    pub fn with_chunk(bytes: u64, chunk_bytes: u64, n: usize, extension: bool, seed: u64) -> Tree {
        let (split, chunk_packets) = Tree::cut(bytes, chunk_bytes);
        let packets = split.count;
        let half = Tree::first_half(packets);
        let trees = double_tree(n);
        let roles = trees.map(|tree| {
            let mut weight = vec![(0u32, 0u32); n];
            // Subtree weights, leaves first: a rank's subtree is itself and its children's subtrees.
            fn fill(tree: &[(Option<usize>, Vec<usize>)], r: usize, weight: &mut [(u32, u32)]) -> (u32, u32) {
                let mut w = (r as u32 + 1, 1u32);
                for &c in &tree[r].1 {
                    let (cw, cn) = fill(tree, c, weight);
                    w = (w.0.wrapping_add(cw), w.1 + cn);
                }
                weight[r] = w;
                w
            }
            if let Some(root) = (0..n).find(|&r| tree[r].0.is_none()) {
                fill(&tree, root, &mut weight);
            }
            tree.iter()
                .map(|(parent, children)| Role {
                    parent: *parent,
                    children: children.clone(),
                    child_weight: children.iter().map(|&c| weight[c]).collect(),
                    up_chunk: 0,
                    up_next: 0,
                    up_credit: 0,
                    reduce: if children.is_empty() {
                        Vec::new()
                    } else {
                        vec![Slot::new(); STEPS as usize]
                    },
                    result: if parent.is_some() {
                        vec![Slot::new(); STEPS as usize]
                    } else {
                        Vec::new()
                    },
                    have: 0,
                    down_chunk: vec![0; children.len()],
                    down_next: vec![0; children.len()],
                    down_credit: vec![0; children.len()],
                    down_freed: 0,
                })
                .collect::<Vec<_>>()
        });
        let mut tree = Tree {
            n,
            seed,
            extension,
            packets: split,
            chunk_packets,
            range: [(0, half), (half, packets)],
            chunk_count: Tree::chunks_per_tree(packets, chunk_packets),
            roles,
            credits: (0..n).map(|_| VecDeque::new()).collect(),
            turn: vec![Vec::new(); n],
            finals: vec![0; n],
            total_weight: (1..=n as u32).fold(0u32, u32::wrapping_add),
            check: Check::default(),
        };
        for t in 0..2 {
            let start = tree.range[t].0;
            for role in &mut tree.roles[t] {
                role.up_next = start;
                role.down_next.iter_mut().for_each(|p| *p = start);
            }
        }
        tree
    }

    /// The verdict so far.
    pub fn check(&self) -> Check {
        self.check
    }

    /// Packets per chunk.
    pub fn chunk_packets(&self) -> u64 {
        self.chunk_packets
    }

    fn chunks(&self, t: usize) -> u64 {
        self.chunk_count[t]
    }

    /// Whether a connection of tree `t` whose sender has been told of `told` freed chunks needs to hear
    /// of more: with `told` at `chunks - STEPS` it may send its last chunk. A credit past that would
    /// still be on its way when the all-reduce ends, and the next size's tree would take it for its own.
    fn credit_wanted(&self, t: usize, told: u64) -> bool {
        told < self.chunks(t).saturating_sub(STEPS)
    }

    /// Packets `[start, end)` of chunk `k` of tree `t`.
    fn chunk_range(&self, t: usize, k: u64) -> (u64, u64) {
        let (start, end) = self.range[t];
        let first = start + k * self.chunk_packets;
        (first, (first + self.chunk_packets).min(end))
    }

    fn tree_of(&self, packet: u64) -> usize {
        usize::from(packet >= self.range[1].0)
    }

    /// What GPU `g` sends next on stream `s`, if anything is ready: (destination, packet).
    fn ready(&self, g: usize, s: usize) -> Option<(usize, u64)> {
        let (t, k) = (s / 3, s % 3);
        let role = &self.roles[t][g];
        if k == 0 {
            let parent = role.parent?;
            let chunk = role.up_chunk;
            if chunk >= self.chunks(t) || chunk >= role.up_credit + STEPS {
                return None;
            }
            if !role.children.is_empty() {
                let (first, end) = self.chunk_range(t, chunk);
                let needed = role.children.len() as u64 * (end - first);
                if !role.reduce[(chunk % STEPS) as usize].holds_whole(chunk, needed) {
                    return None;
                }
            }
            Some((parent, role.up_next))
        } else {
            let c = k - 1;
            let child = *role.children.get(c)?;
            let chunk = role.down_chunk[c];
            if chunk >= role.have || chunk >= role.down_credit[c] + STEPS {
                return None;
            }
            Some((child, role.down_next[c]))
        }
    }

    /// Packet `packet` from GPU `from` to GPU `to`, carrying its elements from `words`.
    fn packet(&self, opcode: u64, from: usize, to: usize, packet: u64, words: &[u32]) -> Outgoing {
        Outgoing {
            dest: to as u16,
            vc: Vc::Posted,
            tl: wire::header(opcode, to as u16, from as u16, false, packet as u32),
            payload: payload_of(words, self.packets.elements(packet), self.extension),
            multicast: None,
        }
    }

    /// Packet `packet` of stream `s` of GPU `g`, from its input or the slot that holds the data.
    fn build(&self, g: usize, s: usize, to: usize, packet: u64) -> Outgoing {
        let (t, k) = (s / 3, s % 3);
        let role = &self.roles[t][g];
        let (chunk, opcode, slots) = if k == 0 {
            (role.up_chunk, OP_PARTIAL, &role.reduce)
        } else if role.parent.is_none() {
            (role.down_chunk[k - 1], OP_RESULT, &role.reduce)
        } else {
            (role.down_chunk[k - 1], OP_RESULT, &role.result)
        };
        if slots.is_empty() {
            // A leaf sends its own input up.
            let own = sums_of(self.seed, packet * PER_PACKET as u64, g as u32 + 1, 1);
            return self.packet(opcode, g, to, packet, &own);
        }
        let data = &slots[(chunk % STEPS) as usize].data;
        let at = ((packet - self.chunk_range(t, chunk).0) as usize) * PER_PACKET;
        // A slot holds its chunk whole before any of it is sent, so the words are there.
        let words = data.get(at..).unwrap_or(&[]);
        self.packet(opcode, g, to, packet, words)
    }

    fn credit(&self, from: usize, to: usize, t: usize, direction: u64, count: u64) -> Outgoing {
        let mut payload: heapless::Vec<Flit, 9> = heapless::Vec::new();
        if self.extension {
            let _ = payload.push([0; FLIT_LEN]);
        }
        let mut flit = [0; FLIT_LEN];
        flit[..8].copy_from_slice(&count.to_le_bytes());
        let _ = payload.push(flit);
        let offset = Credit {
            tree: t,
            direction,
            count,
        }
        .offset();
        Outgoing {
            dest: to as u16,
            vc: Vc::Posted,
            tl: wire::header(OP_CREDIT, to as u16, from as u16, false, offset),
            payload,
            multicast: None,
        }
    }

    /// Stream `s` of GPU `g` has sent a packet: move on, and free slots and tell the senders when a
    /// chunk has gone everywhere it goes.
    fn advance(&mut self, g: usize, s: usize) {
        let (t, k) = (s / 3, s % 3);
        if k == 0 {
            let chunk = self.roles[t][g].up_chunk;
            let end = self.chunk_range(t, chunk).1;
            let role = &mut self.roles[t][g];
            role.up_next += 1;
            if role.up_next < end {
                return;
            }
            role.up_chunk += 1;
            if role.children.is_empty() {
                return;
            }
            role.reduce[(chunk % STEPS) as usize].chunk = FREE;
            if !self.credit_wanted(t, chunk) {
                return;
            }
            let children = self.roles[t][g].children.clone();
            for c in children {
                let credit = self.credit(g, c, t, UP, chunk + 1);
                self.credits[g].push_back(credit);
            }
            return;
        }
        let c = k - 1;
        let chunk = self.roles[t][g].down_chunk[c];
        let end = self.chunk_range(t, chunk).1;
        let role = &mut self.roles[t][g];
        role.down_next[c] += 1;
        if role.down_next[c] < end {
            return;
        }
        role.down_chunk[c] += 1;
        let all = role.down_chunk.iter().copied().min().unwrap_or(0);
        if all <= role.down_freed {
            return;
        }
        let root = role.parent.is_none();
        let slots = if root { &mut role.reduce } else { &mut role.result };
        for freed in role.down_freed..all {
            slots[(freed % STEPS) as usize].chunk = FREE;
        }
        let told = std::mem::replace(&mut role.down_freed, all);
        if !self.credit_wanted(t, told) {
            return;
        }
        let role = &self.roles[t][g];
        // The root's reduction slots hold the result, so its children learn they can send more partial
        // sums; any other rank tells its parent it can send more of the result.
        let (targets, direction) = if root {
            (role.children.clone(), UP)
        } else {
            (role.parent.into_iter().collect(), DOWN)
        };
        for to in targets {
            let credit = self.credit(g, to, t, direction, all);
            self.credits[g].push_back(credit);
        }
    }

    /// Take slot `chunk % STEPS` of `slots` for `chunk` if it is free; whether it holds that chunk.
    fn claim(slot: &mut Slot, chunk: u64, packets: u64, elements: usize, store: bool) -> bool {
        if slot.chunk == FREE {
            slot.chunk = chunk;
            slot.got = 0;
            slot.seen.clear();
            slot.seen.resize(packets as usize, 0);
            slot.data.clear();
            if store {
                slot.data.resize(elements, 0);
            }
        }
        slot.chunk == chunk
    }

    fn wrong(&mut self) {
        self.check.wrong += 1;
    }

    /// The packet index and sending GPU of a data packet (a partial sum or a result), if the index is in
    /// range and the payload has that packet's length.
    fn data_packet(&self, p: &Received) -> Option<(u64, u16)> {
        let packet = u64::from(wire::offset(p.tl));
        let (_, source, _) = wire::route_fields(p.tl);
        (packet < self.packets.count && p.payload.len() == self.packets.payload_flits(packet, self.extension))
            .then_some((packet, source))
    }

    /// Elements in chunk `k` of tree `t`.
    fn chunk_elements(&self, t: usize, k: u64) -> usize {
        let (first, end) = self.chunk_range(t, k);
        ((end - first - 1) as usize) * PER_PACKET + self.packets.elements(end - 1)
    }

    /// A child's partial sum: check it against the child's subtree and add it (and, for the first
    /// contribution to a packet, this GPU's input) into the chunk's reduction slot.
    fn partial(&mut self, g: usize, p: &Received) {
        let Some((packet, source)) = self.data_packet(p) else {
            return self.wrong();
        };
        let t = self.tree_of(packet);
        let Some(c) = self.roles[t][g]
            .children
            .iter()
            .position(|&x| x == usize::from(source))
        else {
            return self.wrong();
        };
        let chunk = (packet - self.range[t].0) / self.chunk_packets;
        let (first, end) = self.chunk_range(t, chunk);
        let elements = self.chunk_elements(t, chunk);
        let (extension, own) = (self.extension, g as u32 + 1);
        let first_element = packet * PER_PACKET as u64;
        let count = self.packets.elements(packet);
        let role = &mut self.roles[t][g];
        let contributors = role.children.len();
        let (w, members) = role.child_weight[c];
        let expected = sums_of(self.seed, first_element, w, members);
        let slot = &mut role.reduce[(chunk % STEPS) as usize];
        let q = (packet - first) as usize;
        let ok = Tree::claim(slot, chunk, end - first, elements, true)
            && usize::from(slot.seen[q]) < contributors
            && carries(p, extension, count, &expected);
        if !ok {
            return self.wrong();
        }
        // Checked equal to `expected`, which is what is added: the same words, in whole lanes.
        let sums = &mut slot.data[q * PER_PACKET..q * PER_PACKET + count];
        if slot.seen[q] == 0 {
            let mine = sums_of(self.seed, first_element, own, 1);
            for ((sum, &v), &m) in sums.iter_mut().zip(&expected).zip(&mine) {
                *sum = v.wrapping_add(m);
            }
        } else {
            for (sum, &v) in sums.iter_mut().zip(&expected) {
                *sum = sum.wrapping_add(v);
            }
        }
        slot.seen[q] += 1;
        slot.got += 1;
        let whole = slot.got == contributors as u64 * (end - first);
        self.check.packets_verified += 1;
        if whole && self.roles[t][g].parent.is_none() {
            self.reduced(g, t);
        }
    }

    /// At the root: check every chunk reduced whole, in order, as a final result.
    fn reduced(&mut self, g: usize, t: usize) {
        let (seed, w, n) = (self.seed, self.total_weight, self.n as u32);
        loop {
            let chunk = self.roles[t][g].have;
            if chunk >= self.chunks(t) {
                return;
            }
            let (first, end) = self.chunk_range(t, chunk);
            let role = &self.roles[t][g];
            let needed = role.children.len() as u64 * (end - first);
            let slot = &role.reduce[(chunk % STEPS) as usize];
            if !slot.holds_whole(chunk, needed) {
                return;
            }
            let mut right = 0;
            for packet in first..end {
                let base = ((packet - first) as usize) * PER_PACKET;
                let expected = sums_of(seed, packet * PER_PACKET as u64, w, n);
                let elements = self.packets.elements(packet);
                let ok = slot.data[base..base + elements] == expected[..elements];
                right += u64::from(ok);
            }
            self.check.packets_verified += right;
            self.check.wrong += (end - first) - right;
            self.finals[g] += right;
            self.roles[t][g].have += 1;
        }
    }

    /// A packet of the result from the parent: check it, keep it if it goes further down.
    fn result(&mut self, g: usize, p: &Received) {
        let Some((packet, source)) = self.data_packet(p) else {
            return self.wrong();
        };
        let t = self.tree_of(packet);
        if self.roles[t][g].parent != Some(usize::from(source)) {
            return self.wrong();
        }
        let chunk = (packet - self.range[t].0) / self.chunk_packets;
        let (first, end) = self.chunk_range(t, chunk);
        let elements = self.chunk_elements(t, chunk);
        let expected = sums_of(
            self.seed,
            packet * PER_PACKET as u64,
            self.total_weight,
            self.n as u32,
        );
        let count = self.packets.elements(packet);
        let extension = self.extension;
        let role = &mut self.roles[t][g];
        let store = !role.children.is_empty();
        let slot = &mut role.result[(chunk % STEPS) as usize];
        let q = (packet - first) as usize;
        let ok = Tree::claim(slot, chunk, end - first, elements, store)
            && slot.seen[q] == 0
            && carries(p, extension, count, &expected);
        if !ok {
            return self.wrong();
        }
        if store {
            slot.data[q * PER_PACKET..q * PER_PACKET + count].copy_from_slice(&expected[..count]);
        }
        slot.seen[q] = 1;
        slot.got += 1;
        let whole = slot.got == end - first;
        self.check.packets_verified += 1;
        self.finals[g] += 1;
        if !whole {
            return;
        }
        // A chunk is whole: the result moves on in order.
        loop {
            let chunk = self.roles[t][g].have;
            if chunk >= self.chunks(t) {
                break;
            }
            let (first, end) = self.chunk_range(t, chunk);
            if !self.roles[t][g].result[(chunk % STEPS) as usize].holds_whole(chunk, end - first) {
                break;
            }
            self.roles[t][g].have += 1;
        }
        let role = &mut self.roles[t][g];
        if store || role.have <= role.down_freed {
            return;
        }
        // A leaf is done with a chunk once it has it: free the slots and tell the parent.
        for freed in role.down_freed..role.have {
            role.result[(freed % STEPS) as usize].chunk = FREE;
        }
        let told = std::mem::replace(&mut role.down_freed, role.have);
        if let Some(parent) = role.parent.filter(|_| self.credit_wanted(t, told)) {
            let credit = self.credit(g, parent, t, DOWN, self.roles[t][g].have);
            self.credits[g].push_back(credit);
        }
    }

    /// A receiver freed slots.
    fn credited(&mut self, g: usize, p: &Received) {
        let offset = wire::offset(p.tl);
        let (_, source, _) = wire::route_fields(p.tl);
        let Credit {
            tree: t,
            direction,
            count,
        } = Credit::of(offset);
        let skip = usize::from(self.extension);
        let echoed = p
            .payload
            .get(skip)
            .map(|f| u64::from_le_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]]));
        if Credit::of(offset).offset() != offset
            || p.payload.len() != skip + 1
            || echoed != Some(count)
            || count > self.chunks(t)
        {
            return self.wrong();
        }
        let source = usize::from(source);
        let role = &mut self.roles[t][g];
        if direction == UP && role.parent == Some(source) {
            role.up_credit = role.up_credit.max(count);
        } else if let Some(c) = role.children.iter().position(|&x| x == source) {
            role.down_credit[c] = role.down_credit[c].max(count);
        } else {
            self.wrong();
        }
    }

    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        let mut out = String::new();
        for t in 0..2 {
            for (g, r) in self.roles[t].iter().enumerate() {
                out += &format!(
                    "tree {t} gpu {g}: up {}/{} credit {} have {} down {:?} credit {:?} freed {} finals {} credits queued {}\n",
                    r.up_chunk,
                    self.chunks(t),
                    r.up_credit,
                    r.have,
                    r.down_chunk,
                    r.down_credit,
                    r.down_freed,
                    self.finals[g],
                    self.credits[g].len()
                );
            }
        }
        out
    }
}

impl App for Tree {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        let Some(credits) = self.credits.get(gpu) else {
            return false;
        };
        if let Some(i) = credits.iter().position(|o| offer.reaches(o.dest)) {
            let credit = &credits[i];
            if !offer.fits(Vc::Posted, credit.payload.len()) || !offer.send(credit) {
                return false;
            }
            self.credits[gpu].remove(i);
            self.check.packets_sent += 1;
            return true;
        }
        let port = offer.port;
        if self.turn[gpu].len() <= port {
            self.turn[gpu].resize(port + 1, 0);
        }
        for i in 0..STREAMS {
            let s = (self.turn[gpu][port] + i) % STREAMS;
            let Some((to, packet)) = self.ready(gpu, s) else {
                continue;
            };
            if !offer.reaches(to as u16) {
                continue;
            }
            // Ask before computing the payload: most offers are refused while the link is busy.
            if !offer.fits(Vc::Posted, self.packets.payload_flits(packet, self.extension)) {
                return false;
            }
            let out = self.build(gpu, s, to, packet);
            if !offer.send(&out) {
                return false;
            }
            self.advance(gpu, s);
            self.turn[gpu][port] = (s + 1) % STREAMS;
            self.check.packets_sent += 1;
            return true;
        }
        false
    }

    fn receive(&mut self, _now: Instant, gpu: usize, _port: usize, p: &Received) {
        match wire::opcode(p.tl) {
            OP_PARTIAL => self.partial(gpu, p),
            OP_RESULT => self.result(gpu, p),
            OP_CREDIT => self.credited(gpu, p),
            _ => self.wrong(),
        }
    }

    /// Its GPUs wait only on their own links and arrivals.
    fn take_woken(&mut self) -> Option<usize> {
        None
    }

    fn done(&self) -> bool {
        self.check.wrong > 0 || self.finals.iter().all(|&f| f >= self.packets.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank but the root has one parent that lists it as a child, and the tree reaches every rank.
    fn assert_tree(n: usize, tree: &[(Option<usize>, Vec<usize>)]) {
        let roots: Vec<usize> = (0..n).filter(|&r| tree[r].0.is_none()).collect();
        assert_eq!(roots.len(), 1, "n {n}: roots {roots:?}");
        for r in 0..n {
            assert!(tree[r].1.len() <= 2);
            for &c in &tree[r].1 {
                assert_eq!(tree[c].0, Some(r), "n {n}: {c} is a child of {r}");
            }
            if let Some(p) = tree[r].0 {
                assert!(tree[p].1.contains(&r), "n {n}: {p} is the parent of {r}");
            }
        }
        let mut reached = vec![false; n];
        let mut stack = vec![roots[0]];
        while let Some(r) = stack.pop() {
            assert!(!reached[r]);
            reached[r] = true;
            stack.extend(&tree[r].1);
        }
        assert!(reached.iter().all(|&x| x), "n {n}");
    }

    #[test]
    fn nccl_btree_of_14_ranks() {
        // The illustration in NCCL's trees.cc.
        let t: Vec<_> = (0..14).map(|r| btree(14, r)).collect();
        assert_eq!(t[0], (None, vec![8]));
        assert_eq!(t[8], (Some(0), vec![4, 12]));
        assert_eq!(t[12], (Some(8), vec![10, 13]));
        assert_eq!(t[13], (Some(12), vec![]));
        assert_eq!(t[6], (Some(4), vec![5, 7]));
        assert_eq!(t[1], (Some(2), vec![]));
    }

    #[test]
    fn eight_ranks() {
        let [a, b] = double_tree(8);
        assert_eq!(a[0], (None, vec![4]));
        assert_eq!(a[4], (Some(0), vec![2, 6]));
        assert_eq!(a[2], (Some(4), vec![1, 3]));
        assert_eq!(b[7], (None, vec![3]));
        assert_eq!(b[3], (Some(7), vec![5, 1]));
        assert_eq!(b[1], (Some(3), vec![2, 0]));
        assert_eq!(depth(8), 3);
    }

    #[test]
    fn two_complementary_trees() {
        for n in 2..=70 {
            let trees = double_tree(n);
            for tree in &trees {
                assert_tree(n, tree);
            }
            for (r, (in_first, in_second)) in trees[0].iter().zip(&trees[1]).enumerate() {
                let (leaf0, leaf1) = (in_first.1.is_empty(), in_second.1.is_empty());
                assert!(!(leaf0 && leaf1), "n {n}: rank {r} is a leaf in both trees");
                if n % 2 == 0 {
                    assert!(leaf0 != leaf1, "n {n}: rank {r} is a leaf in exactly one tree");
                }
            }
        }
    }

    #[test]
    fn chunk_sizes_follow_nccl() {
        // 8 ranks: depth 3, two channels.
        let nccl = super::super::CHANNEL_BUFFER_BYTES;
        assert_eq!(chunk_bytes(1 << 30, 8, nccl), 512 * 1024);
        assert_eq!(chunk_bytes(24 << 20, 8, nccl), 512 * 1024);
        assert_eq!(chunk_bytes(16 << 20, 8, nccl), 256 * 1024);
        assert_eq!(chunk_bytes(1 << 20, 8, nccl), 64 * 1024);
        assert_eq!(chunk_bytes(128 * 1024, 8, nccl), 32 * 1024);
        assert_eq!(chunk_bytes(4, 8, nccl), 32 * 1024);
        // A smaller buffer (NCCL_BUFFSIZE) bounds the chunk at an eighth of it, down to a packet.
        assert_eq!(chunk_bytes(1 << 30, 8, 1 << 20), 128 * 1024);
        assert_eq!(chunk_bytes(1 << 30, 8, 1024), 128);
    }

    /// Give rank `at` the packet `good` with one bit flipped (flit, byte, mask), then as it is: the
    /// (wrong, verified) counts after each.
    fn flipped_then_good(
        tree: &mut Tree,
        at: usize,
        good: &Received,
        (flit, byte, mask): (usize, usize, u8),
    ) -> [(u64, u64); 2] {
        let mut bad = good.clone();
        bad.payload[flit][byte] ^= mask;
        tree.receive(Instant::ZERO, at, 0, &bad);
        let after_bad = (tree.check().wrong, tree.check().packets_verified);
        tree.receive(Instant::ZERO, at, 0, good);
        [after_bad, (tree.check().wrong, tree.check().packets_verified)]
    }

    #[test]
    fn partial_sums_and_results_are_checked_and_kept() {
        let mut tree = Tree::new(64 * 1024, 8, STEP_BYTES * STEPS, false, 3);
        let packet = tree.range[0].0;
        let first = packet * PER_PACKET as u64;
        let (leaf, parent) = (1, 2);
        assert!(tree.roles[0][leaf].children.is_empty() && tree.roles[0][leaf].parent == Some(parent));
        // A leaf's input going up, then the same with one bit flipped: the flip is caught.
        let good = tree.build(leaf, 0, parent, packet).to_received();
        assert_eq!(
            flipped_then_good(&mut tree, parent, &good, (3, 9, 0x10)),
            [(1, 0), (1, 1)]
        );
        // The first contribution is kept with the parent's own input added.
        let both = sums_of(3, first, (leaf + 1 + parent + 1) as u32, 2);
        assert_eq!(tree.roles[0][parent].reduce[0].data[..PER_PACKET], both);

        // The result coming down to an interior rank: checked against the sum over all ranks, kept to
        // pass on to its children.
        let total = sums_of(3, first, (1..=8).sum(), 8);
        let above = tree.roles[0][parent].parent.unwrap();
        let result = tree
            .packet(OP_RESULT, above, parent, packet, &total)
            .to_received();
        assert_eq!(
            flipped_then_good(&mut tree, parent, &result, (0, 0, 1)),
            [(2, 1), (2, 2)]
        );
        assert_eq!(tree.roles[0][parent].result[0].data[..PER_PACKET], total);
    }
}
