//! Entry points for fuzzing the simulator's input formats with hostile input.
//!
//! Each function takes arbitrary bytes, drives one parser with them and checks what must hold for any
//! input: no panic, no hang, no allocation out of proportion, a typed error for what is wrong. The
//! cargo-fuzz targets in `fuzz/` call these, and `tests/fuzz_replay.rs` replays the committed corpora
//! and seeded mutations of them through the same functions, so CI needs no nightly toolchain.
//!
//! A property that does not hold is reported by panicking: that is what a fuzzer looks for.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use link_phy::time::Duration;

use crate::collective::Kind;
use crate::discover::{check, discover, Management, NodeType, Wiring, MAX_NODES};
use crate::manager::{gang, Fabric};
use crate::probe::probe;
use crate::run::{run, Algo, Sweep};
use crate::topology::{NodeKind, Topology};

/// A fuzz entry point and the name of its cargo-fuzz target.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz entry point, by the name of its cargo-fuzz target.
pub const TARGETS: &[Target] = &[
    ("topology_toml", topology_toml),
    ("discovery_registers", discovery_registers),
    ("trace_read", trace_read),
    ("trace_write", trace_write),
];

/// GPUs up to which a fabric is probed (a packet per pair).
const PROBED_GPUS: usize = 16;

/// Parses `data` as a topology file (`docs/spec.md` section 6). What parses validates; the fabric
/// manager plans it or says why not, and a plan (also with a quarter of its trunks failed) routes two
/// GPUs to each other exactly when a path through switches joins them, without a cycle in its channel
/// dependencies; discovery from the GPUs finds every node a GPU can reach, all of it as the topology
/// says; a small one is probed for 20 simulated microseconds and every packet is accounted for
/// (delivered within its partition, or across one only where no switch drops it); a 1 KiB ring
/// all-reduce then runs on the first GPU's part of the fabric for at most 20 simulated microseconds, or
/// is refused (for the memory the fabric would take, or for partitions) without panicking, and a size it
/// finishes checks out.
pub fn topology_toml(data: &[u8]) {
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    let Ok(topology) = Topology::from_toml(text) else {
        return;
    };
    assert_eq!(topology.validate(), Ok(()), "a parsed topology must validate");
    let Ok(fabric) = Fabric::plan(&topology, &[]) else {
        return;
    };
    // A route joins two GPUs exactly when a path of live trunks does whose inner nodes are all switches
    // (GPUs never forward): each part of the fabric is routed whole, and nothing joins the parts. So
    // too with some trunks failed (a quarter, chosen by the input), which may cut the fabric in parts.
    let joined = routes_join_exactly_through_switches(&topology, &fabric, &[]);
    let salt = data
        .iter()
        .fold(0usize, |sum, &b| sum.wrapping_add(usize::from(b)));
    let failed: Vec<usize> = (0..fabric.trunks.len()).filter(|t| (t + salt) % 4 == 0).collect();
    if let Ok(cut) = Fabric::plan(&topology, &failed) {
        routes_join_exactly_through_switches(&topology, &cut, &failed);
    }
    let found = discover(&mut Wiring::new(&topology, &[], &[]).unwrap()).unwrap();
    let c = check(&found, &topology);
    assert!(c.matches(), "{:?}", c.differences);
    assert_eq!(found.nodes.len() + c.unreached.len(), topology.nodes.len());
    assert!(
        c.unreached.iter().all(|&x| !fabric.gpus.contains(&x)),
        "every GPU is found, from itself if from no other"
    );
    let (trunks, _) = gang(&topology);
    assert!(
        c.down.is_empty() && c.unseen.iter().all(|&t| c.unreached.contains(&trunks[t].a.0)),
        "only trunks of switches no GPU reaches are missed"
    );
    if fabric.gpus.len() <= PROBED_GPUS {
        if let Ok(r) = probe(&topology, &[], 1, Duration::from_us(20)) {
            // Every packet across partitions is delivered (no switch between) or dropped once.
            assert_eq!(r.wrong, 0, "no packet arrives at the wrong GPU or twice");
            assert!(r.cross_delivered + r.partition_drops <= r.cross_pairs, "{r:?}");
            if r.finished {
                let partition = |id: usize| topology.nodes[fabric.gpus[id]].partition;
                let same_joined = (0..joined.len())
                    .flat_map(|a| (0..joined.len()).map(move |b| (a, b)))
                    .filter(|&(a, b)| joined[a][b] && partition(a) == partition(b))
                    .count() as u64;
                assert_eq!(r.same_delivered, same_joined, "{r:?}");
                assert_eq!(
                    r.cross_delivered + r.partition_drops,
                    r.cross_pairs - r.cross_unrouted,
                    "{r:?}"
                );
            }
        }
    }
    // On the first GPU's part of the fabric (all of it, unless it is in parts).
    let part: Vec<usize> = fabric
        .gpus
        .iter()
        .enumerate()
        .filter(|&(id, _)| id == 0 || joined[0][id])
        .map(|(_, &node)| node)
        .collect();
    let Ok(topology) = topology.with_gpus(&part) else {
        return;
    };
    let sweep = Sweep {
        limit_per_size: Duration::from_us(20),
        ..Sweep::new(topology, Kind::AllReduce, Algo::Ring, 1024, 1024)
    };
    if let Ok(report) = run(&sweep, &mut |_| {}) {
        assert!(
            report.rows.iter().all(|r| r.wrong == 0 || r.busbw == 0.0),
            "a size that finished has the right data"
        );
    }
}

/// Check that `fabric`, planned without the trunks `failed`, routes between two GPUs exactly when a path
/// of its live trunks joins them whose inner nodes are all switches, and cannot deadlock; return
/// `joined[a][b]` (endpoint IDs, `a != b`): such a path joins them. Worked out by search, apart from the
/// planner's up*/down* rule.
fn routes_join_exactly_through_switches(
    topology: &Topology,
    fabric: &Fabric,
    failed: &[usize],
) -> Vec<Vec<bool>> {
    let n = topology.nodes.len();
    let neighbours = |x: usize| {
        fabric.ports[x]
            .iter()
            .filter(|&&(t, _)| !failed.contains(&t))
            .map(|&(t, end)| {
                if end == 0 {
                    fabric.trunks[t].b.0
                } else {
                    fabric.trunks[t].a.0
                }
            })
    };
    let joined: Vec<Vec<bool>> = fabric
        .gpus
        .iter()
        .map(|&start| {
            let mut seen = vec![false; n];
            seen[start] = true;
            let mut stack = vec![start];
            while let Some(x) = stack.pop() {
                if x != start && topology.nodes[x].kind == NodeKind::Gpu {
                    continue;
                }
                for y in neighbours(x) {
                    if !seen[y] {
                        seen[y] = true;
                        stack.push(y);
                    }
                }
            }
            fabric.gpus.iter().map(|&g| g != start && seen[g]).collect()
        })
        .collect();
    for (from, &node) in fabric.gpus.iter().enumerate() {
        for (id, &other) in fabric.gpus.iter().enumerate() {
            if other != node {
                assert_eq!(
                    !fabric.routes[node][id].is_empty(),
                    joined[from][id],
                    "a route from GPU {from} to {id} exactly when a path through switches joins them \
                     (trunks {failed:?} failed)"
                );
            }
        }
    }
    assert_eq!(
        fabric.dependencies().cycle,
        None,
        "up*/down* routes cannot deadlock (trunks {failed:?} failed)"
    );
    joined
}

/// A fabric whose nodes answer register reads as hostile bytes say: what their registers claim (node ID,
/// type, ports, each port's peer) need not match how they are really cabled, which is what directed
/// routes follow, nor what the other end claims. The manager's homes are node 0 and every other node
/// whose type register claims an endpoint.
struct Liars {
    nodes: Vec<Liar>,
    homes: Vec<usize>,
}

struct Liar {
    /// Node ID, type code and port count, as read.
    id: u64,
    kind: u32,
    ports: u32,
    /// Per port: where its cable really goes (node, port), if anywhere, and its four peer registers.
    cables: Vec<(Option<usize>, [u32; 4])>,
}

impl Liars {
    /// Up to 16 nodes of up to 70 ports from `data`, read a byte at a time (0 once it runs out). IDs are
    /// small, so that nodes share them.
    fn from_bytes(data: &[u8]) -> Liars {
        let mut bytes = data.iter().copied().chain(core::iter::repeat(0));
        let mut next = move || bytes.next().unwrap_or(0);
        let n = 1 + usize::from(next() % 16);
        let nodes: Vec<Liar> = (0..n)
            .map(|_| {
                let id = u64::from(next() % 24);
                let kind = u32::from(next() % 4);
                let ports = u32::from(next() % 70);
                let cables = (0..ports.min(16))
                    .map(|_| {
                        let to = next();
                        let cable = (to < 0xC0).then_some(usize::from(to) % n);
                        let flags = next();
                        let regs = [
                            u32::from(next() % 24),
                            u32::from(flags & 1),
                            u32::from(flags & 0x80) << 24 | u32::from(next()) << 8 | u32::from(next() % 20),
                            u32::from(next()) * 1000,
                        ];
                        (cable, regs)
                    })
                    .collect();
                Liar {
                    id,
                    kind,
                    ports,
                    cables,
                }
            })
            .collect();
        let homes = (0..nodes.len())
            .filter(|&x| x == 0 || NodeType::from_code(nodes[x].kind) == Some(NodeType::Endpoint))
            .collect();
        Liars { nodes, homes }
    }
}

impl Management for Liars {
    fn homes(&self) -> usize {
        self.homes.len()
    }

    fn read(&mut self, home: usize, route: &[u8], address: u32) -> Result<u32, String> {
        let mut x = *self.homes.get(home).ok_or("no such home")?;
        for &p in route {
            x = self.nodes[x]
                .cables
                .get(usize::from(p))
                .and_then(|&(cable, _)| cable)
                .ok_or("no link")?;
        }
        let node = &self.nodes[x];
        use switch_fw::identity::{NODE_ID, NODE_TYPE, PEERS, PORT_COUNT};
        match address {
            NODE_ID => Ok(node.id as u32),
            a if a == NODE_ID + 4 => Ok(0),
            NODE_TYPE => Ok(node.kind),
            PORT_COUNT => Ok(node.ports),
            a if a >= PEERS => {
                let (port, word) = (((a - PEERS) / 16) as usize, ((a - PEERS) % 16 / 4) as usize);
                Ok(node.cables.get(port).map_or(0, |&(_, regs)| regs[word]))
            }
            _ => Err("no such register".into()),
        }
    }
}

/// Discovery over a fabric of nodes whose registers lie (see `Liars`): it ends, with an error or with
/// what it found, within a bounded number of reads; a node ID is found once; every trunk it reports joins
/// two found nodes' ports whose registers name each other; and setting the result against a topology
/// does not fail.
pub fn discovery_registers(data: &[u8]) {
    let mut liars = Liars::from_bytes(data);
    let Ok(found) = discover(&mut liars) else {
        return;
    };
    // Found nodes are real ones, one per ID. Each route queued is to an ID some register claimed (below
    // 24, or 2^32 more), besides the homes; a visit reads at most 4 + 4 * 64 registers, and a home
    // found already costs its ID's 2.
    assert!(found.nodes.len() <= liars.nodes.len().min(MAX_NODES));
    assert!(
        found.reads <= (1 + 2 * 24) * (4 + 4 * 64) + 2 * liars.homes.len(),
        "{} reads",
        found.reads
    );
    for (i, n) in found.nodes.iter().enumerate() {
        assert_eq!(found.node(n.id), Some(i), "a node ID is found once");
        assert_eq!(n.peers.len(), n.ports);
    }
    for t in &found.trunks {
        let (a, b) = (&found.nodes[t.a.0], &found.nodes[t.b.0]);
        let (pa, pb) = (a.peers[t.a.1].unwrap(), b.peers[t.b.1].unwrap());
        assert_eq!((pa.node, usize::from(pa.port)), (b.id, t.b.1));
        assert_eq!((pb.node, usize::from(pb.port)), (a.id, t.a.1));
    }
    // Against a fabric none of whose node IDs these small ones can be: every node found is unknown,
    // none of the topology's is reached and none of its trunks seen.
    let mesh = Topology::builtin("mesh4").unwrap();
    let c = check(&found, &mesh);
    assert!(c.differences.len() >= found.nodes.len(), "{:?}", c.differences);
    assert_eq!(c.unreached.len(), mesh.nodes.len());
    assert_eq!((c.down.len(), c.unseen.len()), (0, gang(&mesh).0.len()));
}

/// Reads `data` as a trace's records after a valid file header (`docs/spec.md` section 7), and `data` alone
/// as a whole file: a typed error or records, never a panic; records read account for every byte, each
/// exactly once (24 bytes of file header, then per record 16 of record header, the pseudo-header and its
/// bytes), and written again as the tracer writes records they are the input's bytes wherever its
/// nanoseconds field is below a second.
pub fn trace_read(data: &[u8]) {
    use crate::trace::{read, LINKTYPE, MAGIC_NS, PSEUDO_HEADER_LEN};
    let _ = read(data);
    let mut file = vec![0u8; 24];
    file[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
    file[20..24].copy_from_slice(&LINKTYPE.to_le_bytes());
    file.extend_from_slice(data);
    let Ok(records) = read(&file) else {
        return;
    };
    let mut again = file[..24].to_vec();
    for r in &records {
        let len = (PSEUDO_HEADER_LEN + r.bytes.len()) as u32;
        again.extend_from_slice(&((r.ns / 1_000_000_000) as u32).to_le_bytes());
        again.extend_from_slice(&((r.ns % 1_000_000_000) as u32).to_le_bytes());
        again.extend_from_slice(&len.to_le_bytes());
        again.extend_from_slice(&len.to_le_bytes());
        again.extend_from_slice(&r.pseudo_header);
        again.extend_from_slice(&r.bytes);
    }
    assert_eq!(again.len(), file.len(), "every byte read once");
    let mut at = 24;
    for r in &records {
        let nsec = u32::from_le_bytes(file[at + 4..at + 8].try_into().unwrap());
        let len = 16 + PSEUDO_HEADER_LEN + r.bytes.len();
        if nsec < 1_000_000_000 {
            assert_eq!(again[at..at + len], file[at..at + len], "the record at byte {at}");
        }
        at += len;
    }
}

/// Feeds a tracer `data[1..]` in 16-byte units as a receiver's (the framing restarted before unit
/// `data[0]`), and checks that it loses and repeats nothing: its records' units are the units given, in
/// order, less idle ones outside packets, the initialisation flits it counts as repeats, and the units of
/// a packet begun when the framing restarted or the units ended; a packet record is a header and the flits
/// it announces, a record of discarded units holds no idle unit and no packet boundary after its first, and
/// no record is longer than a longest packet.
pub fn trace_write(data: &[u8]) {
    use crate::trace::{read, Hop, Tracer, RECORD_CONTROL, RECORD_DISCARDED, RECORD_PACKET};
    use link_dl::flit::{ControlFlit, ControlKind, IdentFlit, PacketHeader, FLIT_LEN, MAX_PACKET_LEN};
    use link_dl::framing::discarded_while_resynchronising;
    use link_phy::time::Instant;
    let Some((&restart_at, units)) = data.split_first() else {
        return;
    };
    let units: Vec<&[u8; FLIT_LEN]> = units
        .chunks_exact(FLIT_LEN)
        .map(|u| u.try_into().unwrap())
        .collect();
    let mut out = Vec::new();
    let hop = Hop {
        trunk: 0,
        from: (0, 0),
        to: (1, 0),
    };
    let mut tracer = Tracer::new(&mut out, 2, 100_000).unwrap();
    // The last units before a restart or the end, as many as the packet begun holds, are left out.
    let mut left_out = std::collections::BTreeSet::new();
    for (i, unit) in units.iter().enumerate() {
        if i == usize::from(restart_at) {
            left_out.extend(i - tracer.packet_units_begun(0)..i);
            tracer.restart_framing(0);
        }
        tracer.unit(0, hop, Instant(1_000 * i as u64), unit).unwrap();
    }
    left_out.extend(units.len() - tracer.packet_units_begun(0)..units.len());
    tracer.flush().unwrap();
    let repeats = tracer.summary.init_repeats;
    drop(tracer);
    let records = read(&out).unwrap();
    let recorded: Vec<&[u8]> = records.iter().flat_map(|r| r.bytes.chunks(FLIT_LEN)).collect();
    let mut next = recorded.iter().peekable();
    let mut inits_left_out = 0;
    for (i, unit) in units.iter().enumerate().filter(|(i, _)| !left_out.contains(i)) {
        if next.peek().is_some_and(|r| **r == unit.as_slice()) {
            next.next();
        } else if **unit != [0; FLIT_LEN] {
            let init = IdentFlit::parse(unit).is_ok()
                || ControlFlit::parse(unit)
                    .is_ok_and(|c| matches!(c.kind, ControlKind::InitFc1 | ControlKind::InitFc2));
            assert!(init, "unit {i} left out: {unit:02x?}");
            inits_left_out += 1;
        }
    }
    assert!(
        next.next().is_none(),
        "a unit recorded that was not given, or out of order"
    );
    assert_eq!(inits_left_out, repeats, "initialisation flits left out");
    for r in &records {
        assert!(r.bytes.len() <= MAX_PACKET_LEN && r.bytes.len() % FLIT_LEN == 0);
        match r.pseudo_header[1] {
            RECORD_PACKET => {
                let header = PacketHeader::parse(r.bytes[..FLIT_LEN].try_into().unwrap()).unwrap();
                assert_eq!(r.bytes.len(), FLIT_LEN * (1 + usize::from(header.payload_flits)));
            }
            RECORD_CONTROL => assert_eq!(r.bytes.len(), FLIT_LEN),
            RECORD_DISCARDED => {
                // The first unit is the one that lost the framing, or one discarded after it.
                for u in r.bytes.chunks(FLIT_LEN).skip(1) {
                    assert!(discarded_while_resynchronising(u.try_into().unwrap()));
                }
            }
            other => panic!("record kind {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(file: &str) -> Vec<u8> {
        let path = format!(
            "{}/../fuzz/corpus/discovery_registers/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(path).unwrap()
    }

    /// The committed seeds say what their names say, so that the fuzzer starts from fabrics that matter.
    #[test]
    fn the_discovery_seeds_are_a_star_a_liar_and_an_odd_pair() {
        let star = discover(&mut Liars::from_bytes(&corpus("consistent_star.bin"))).unwrap();
        assert_eq!(
            (star.nodes.len(), star.trunks.len(), star.faults.len()),
            (4, 3, 0)
        );
        // The switch's port 1 claims gpu2 (whose link is down) but is cabled to gpu1.
        let liar = discover(&mut Liars::from_bytes(&corpus("lying_switch.bin"))).unwrap();
        assert_eq!(liar.trunks.len(), 1, "{liar:?}");
        assert!(!liar.faults.is_empty());
        // Node 1 shares node 0's ID (so is never visited); node 2's type code is 3.
        let odd = discover(&mut Liars::from_bytes(&corpus("shared_ids_bad_type.bin")));
        assert_eq!(odd, Err("route [1]: node type 3".to_string()));
    }
}
