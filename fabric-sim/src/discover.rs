//! Discovery: how the fabric manager finds out what is actually wired, by reading registers, and checks
//! it against the topology it was given.
//!
//! The manager reaches a node by *directed route*, as InfiniBand's subnet manager does: a list of ports to
//! leave through, one per hop, starting from a node the manager has an agent beside (`[]` is that node
//! itself). It has one beside every GPU, as a host's driver reaches its own GPU, so that it reaches every
//! part of a fabric that no live trunk joins to the rest. Every node, switch or GPU, has the identity
//! registers of `switch_fw::identity`: its ID, its type, its port count, and for each port whose link is
//! up the ID and port of the node at the other end, the links ganged and their rate. [`discover`] walks the
//! fabric breadth-first from the first GPU reading only those, and from the next GPU not yet found while
//! there is one (or while a node lies past the last hop of the routes taken: from every GPU);
//! [`check`] sets what it found against a topology: trunks whose links are down, and anything wired
//! differently (a cable to the wrong port, a trunk with fewer links, a node the topology does not have).
//!
//! A port's peer is what its data link learned from the partner's identity flit as the link came up
//! (`link_dl::flit::IdentFlit`). [`Wiring`] is a model of the hardware the registers are read from without
//! running the links: built from a topology (what is really cabled, which may differ from what the
//! manager is told) with some trunks down, each end given what the other's identity flit would say. The
//! running simulator's nodes (`Net`) fill theirs from their links.

use std::collections::{HashMap, HashSet};

use link_dl::flit::IdentFlit;
use switch_fw::identity::{self, Identity};
pub use switch_fw::identity::{NodeType, PortPeer};

use crate::manager::{gang, Trunk};
use crate::topology::{NodeKind, Topology};

/// Most nodes a discovery will visit (a fabric's GPUs are at most 1024; this leaves room for switches).
pub const MAX_NODES: usize = 8192;
/// Most hops in a directed route (as InfiniBand's).
pub const MAX_HOPS: usize = 64;

/// Register reads through directed routes.
pub trait Management {
    /// The nodes the manager has an agent beside, each a directed route's start: the fabric's GPUs, in
    /// endpoint order. Only the first, unless the fabric says otherwise.
    fn homes(&self) -> usize {
        1
    }

    /// Read register `address` of the node reached from home `home` by leaving through the ports of
    /// `route` in turn.
    fn read(&mut self, home: usize, route: &[u8], address: u32) -> Result<u32, String>;
}

/// The ID a simulated node carries (its GUID): the FNV-1a hash of its name, so that a topology file's
/// names say which node is which.
pub fn node_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What a node of `kind` reports itself to be.
fn node_type(kind: NodeKind) -> NodeType {
    match kind {
        NodeKind::Gpu => NodeType::Endpoint,
        NodeKind::Switch => NodeType::Switch,
    }
}

/// A node of `kind` in words, for messages (the register's type names are not the user's).
fn a_kind(kind: NodeType) -> &'static str {
    match kind {
        NodeType::Endpoint => "a GPU",
        NodeType::Switch => "a switch",
    }
}

/// A trunk's rate as its port reports it: MB/s.
fn mbps(trunk: &Trunk) -> u32 {
    (trunk.gbps * 1000.0).round() as u32
}

/// Node `x` of `topology` with `ports` ports, every link down: the identity its firmware starts with.
pub fn identity_of(
    topology: &Topology,
    x: usize,
    ports: usize,
) -> Result<Identity<{ switch_fw::MAX_PORTS }>, String> {
    let node = &topology.nodes[x];
    Identity::new(node_id(&node.name), node_type(node.kind))
        .with_ports(ports)
        .ok_or_else(|| format!("{} has more than 64 ports", node.name))
}

/// The node reached from `home` by leaving through the ports of `route` in turn, where `across(x, p)` is
/// the node at the other end of node `x`'s port `p` if its link is up.
pub fn follow(
    home: usize,
    route: &[u8],
    across: impl Fn(usize, usize) -> Option<usize>,
) -> Result<usize, String> {
    route.iter().enumerate().try_fold(home, |x, (hop, &p)| {
        across(x, usize::from(p))
            .ok_or_else(|| format!("hop {hop} of route {route:?}: port {p} has no link up"))
    })
}

/// What each end of `trunk` learns of the other when its links come up: (node, port, peer) for end a,
/// then end b.
pub fn peers_of(topology: &Topology, trunk: &Trunk) -> [(usize, usize, PortPeer); 2] {
    [(trunk.a, trunk.b), (trunk.b, trunk.a)].map(|(here, there)| {
        let partner = IdentFlit {
            node: node_id(&topology.nodes[there.0].name),
            port: there.1 as u8,
        };
        (here.0, here.1, port_peer(partner, trunk))
    })
}

/// What a port's identity registers say of a link up to `partner` (as its identity flit said) in
/// `trunk`: the partner, and the trunk's links and rate.
pub fn port_peer(partner: IdentFlit, trunk: &Trunk) -> PortPeer {
    PortPeer {
        node: partner.node,
        port: partner.port,
        links: trunk.links as u8,
        mbps: mbps(trunk),
    }
}

/// The simulated hardware: every node's identity registers, as its firmware filled them when its links
/// came up, and the cabling that directed routes follow.
#[derive(Clone, Debug)]
pub struct Wiring {
    nodes: Vec<Identity<{ switch_fw::MAX_PORTS }>>,
    /// The node and port at the other end of each live port.
    cables: Vec<Vec<Option<(usize, usize)>>>,
    /// The nodes the manager has an agent beside: the GPUs.
    homes: Vec<usize>,
}

impl Wiring {
    /// The fabric cabled as `hardware` says, with the trunks between each pair of nodes in `down` (node
    /// indices of `hardware`) not up, and one link fewer up in the trunk between each pair in `lost` (as
    /// often as the pair is named; a trunk that loses its last link is down). A pair with no trunk
    /// between them is an error.
    pub fn new(
        hardware: &Topology,
        down: &[(usize, usize)],
        lost: &[(usize, usize)],
    ) -> Result<Wiring, String> {
        hardware.validate()?;
        let (mut trunks, ports) = gang(hardware);
        // The trunk between a pair of nodes, or why there is none.
        let between = |trunks: &[Trunk], (x, y): (usize, usize)| {
            trunks
                .iter()
                .position(|t| (t.a.0, t.b.0) == (x.min(y), x.max(y)))
                .ok_or_else(|| {
                    format!(
                        "{} has no link between {} and {}",
                        hardware.name,
                        hardware.node_name(x),
                        hardware.node_name(y)
                    )
                })
        };
        let down: Vec<usize> = down
            .iter()
            .map(|&pair| between(&trunks, pair))
            .collect::<Result<_, _>>()?;
        for &pair in lost {
            let i = between(&trunks, pair)?;
            let t = &mut trunks[i];
            if t.links > 0 {
                t.gbps -= t.gbps / t.links as f64;
                t.links -= 1;
            }
        }
        let mut nodes: Vec<_> = (0..hardware.nodes.len())
            .map(|x| identity_of(hardware, x, ports[x].len()))
            .collect::<Result<_, String>>()?;
        let mut cables: Vec<Vec<Option<(usize, usize)>>> =
            ports.iter().map(|p| vec![None; p.len()]).collect();
        for (_, t) in trunks
            .iter()
            .enumerate()
            .filter(|&(i, t)| !down.contains(&i) && t.links > 0)
        {
            for ((x, p, peer), there) in peers_of(hardware, t).into_iter().zip([t.b, t.a]) {
                nodes[x].set_peer(p, Some(peer)).map_err(|e| e.to_string())?;
                cables[x][p] = Some(there);
            }
        }
        Ok(Wiring {
            nodes,
            cables,
            homes: hardware.gpus(),
        })
    }
}

impl Management for Wiring {
    fn homes(&self) -> usize {
        self.homes.len()
    }

    fn read(&mut self, home: usize, route: &[u8], address: u32) -> Result<u32, String> {
        let home = *self.homes.get(home).ok_or("no such home")?;
        let x = follow(home, route, |x, p| Some(self.cables[x].get(p).copied()??.0))?;
        self.nodes[x].read_register(address).map_err(|e| e.to_string())
    }
}

/// A node discovery found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundNode {
    /// Its ID.
    pub id: u64,
    /// What it is.
    pub kind: NodeType,
    /// Its port count.
    pub ports: usize,
    /// The home (see [`Management::homes`]) its directed route starts from: 0 unless no live trunk joins
    /// it to the first GPU.
    pub home: usize,
    /// The directed route that reaches it.
    pub route: Vec<u8>,
    /// Per port, the peer it reports (if the link is up).
    pub peers: Vec<Option<PortPeer>>,
}

/// A trunk discovery found: both ends report each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundTrunk {
    /// One end: found node index and port.
    pub a: (usize, usize),
    /// The other end.
    pub b: (usize, usize),
    /// Links ganged.
    pub links: u8,
    /// Rate of each direction, MB/s.
    pub mbps: u32,
}

/// What discovery found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    /// Nodes, in the order found (the manager's own node first).
    pub nodes: Vec<FoundNode>,
    /// Trunks whose two ends agree, each once.
    pub trunks: Vec<FoundTrunk>,
    /// Ports whose report the other end does not confirm, as messages.
    pub faults: Vec<String>,
    /// Registers read.
    pub reads: usize,
}

impl Discovery {
    /// The index of the node with ID `id`.
    pub fn node(&self, id: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The node at home `home` (see [`Management::homes`]), if discovery started a walk there.
    pub fn home(&self, home: usize) -> Option<&FoundNode> {
        self.nodes.iter().find(|n| n.home == home && n.route.is_empty())
    }
}

/// A directed route as messages name it: `route [0, 4]`, and the home it starts from if not the first
/// (`from`: its name, or its number among the homes).
fn directed(home: usize, route: &[u8], from: impl FnOnce() -> String) -> String {
    if home == 0 {
        format!("route {route:?}")
    } else {
        format!("route {route:?} from {}", from())
    }
}

/// Walk the fabric from the manager's first home, breadth-first, reading identity registers only; then,
/// while fewer GPUs are found than the manager has homes, from the next home (a part of the fabric no live
/// trunk joins to what was found, unless the home was found already). While a port reported a node past
/// [`MAX_HOPS`] that is not found, every home is walked from, and a node found before by a longer route
/// is walked on from by the shorter one (and takes it as its own).
pub fn discover(m: &mut impl Management) -> Result<Discovery, String> {
    let homes = m.homes();
    let mut reads = 0usize;
    let mut read = |home: usize, route: &[u8], address: u32| {
        reads += 1;
        m.read(home, route, address)
    };
    let mut nodes: Vec<FoundNode> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    // IDs with a route queued, so that a node seen from several ports is visited once.
    let mut queued: HashSet<u64> = HashSet::new();
    // IDs a port reported past the last hop a directed route can take: not reached from there.
    let mut beyond: HashSet<u64> = HashSet::new();
    let mut faults = Vec::new();
    // Routes to visit from a home, each with the node ID the port before it reported (none for a home).
    let mut queue: Vec<(usize, Vec<u8>, Option<u64>)> = vec![(0, Vec::new(), None)];
    let mut next = 0;
    let mut next_home = 1;
    loop {
        // Nodes reported past the last hop of the routes taken so far, and not found since.
        let past_reach = |index: &HashMap<u64, usize>| beyond.iter().any(|id| !index.contains_key(id));
        if next == queue.len() {
            let gpus = nodes.iter().filter(|n| n.kind == NodeType::Endpoint).count();
            if gpus >= homes && !past_reach(&index) || next_home >= homes {
                break;
            }
            queue.push((next_home, Vec::new(), None));
            next_home += 1;
        }
        let (home, route, expected) = std::mem::take(&mut queue[next]);
        next += 1;
        let at = || directed(home, &route, || format!("home {home}"));
        let id = u64::from(read(home, &route, identity::NODE_ID)?)
            | u64::from(read(home, &route, identity::NODE_ID + 4)?) << 32;
        if expected.is_some_and(|e| e != id) {
            faults.push(format!(
                "{}: the port before says node {:016x} is there, the node says {id:016x}",
                at(),
                expected.unwrap_or_default()
            ));
        }
        queued.insert(id);
        // Whether the walk goes on to the node `peer` a port reports: one not queued yet, or, while some
        // node lies past the last hop of the routes taken, one found before by a longer route than this
        // one makes (from another home: the GPU at the end of a long route has an agent beside it).
        let reaching = past_reach(&index);
        let walks_on = |peer: u64, queued: &mut HashSet<u64>, nodes: &[FoundNode]| {
            queued.insert(peer)
                || reaching
                    && index
                        .get(&peer)
                        .is_some_and(|&j| nodes[j].route.len() > route.len() + 1)
        };
        if let Some(&i) = index.get(&id) {
            // Found before: by a longer route, the walk goes on from it by this one, as far as it now
            // reaches, through the ports it reported then.
            if reaching && route.len() < nodes[i].route.len() {
                for (p, peer) in nodes[i].peers.iter().enumerate() {
                    if peer.is_some_and(|peer| walks_on(peer.node, &mut queued, &nodes)) {
                        let mut onward = route.clone();
                        onward.push(p as u8);
                        queue.push((home, onward, peer.map(|peer| peer.node)));
                    }
                }
                (nodes[i].home, nodes[i].route) = (home, route);
            }
            continue;
        }
        let code = read(home, &route, identity::NODE_TYPE)?;
        let kind = NodeType::from_code(code).ok_or_else(|| format!("{}: node type {code}", at()))?;
        let ports = read(home, &route, identity::PORT_COUNT)? as usize;
        if ports > switch_fw::MAX_PORTS {
            return Err(format!("{}: node {id:016x} reports {ports} ports", at()));
        }
        let mut peers = Vec::with_capacity(ports);
        for p in 0..ports {
            let base = identity::PEERS + 16 * p as u32;
            let mut regs = [0u32; 4];
            for (w, r) in regs.iter_mut().enumerate() {
                *r = read(home, &route, base + 4 * w as u32)?;
            }
            let peer = PortPeer::from_registers(regs);
            if let Some(peer) = peer {
                if route.len() == MAX_HOPS {
                    beyond.insert(peer.node);
                } else if walks_on(peer.node, &mut queued, &nodes) {
                    let mut onward = route.clone();
                    onward.push(p as u8);
                    queue.push((home, onward, Some(peer.node)));
                }
            }
            peers.push(peer);
        }
        if nodes.len() == MAX_NODES {
            return Err(format!("more than {MAX_NODES} nodes"));
        }
        index.insert(id, nodes.len());
        nodes.push(FoundNode {
            id,
            kind,
            ports,
            home,
            route,
            peers,
        });
    }
    // A trunk is found when both its ends report each other, with the same links and rate.
    let mut trunks = Vec::new();
    for (x, node) in nodes.iter().enumerate() {
        for (p, peer) in node.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            let Some(&y) = index.get(&peer.node) else {
                // Out of directed routes' reach is not a fault: `check` leaves such a trunk out.
                if beyond.contains(&peer.node) {
                    continue;
                }
                faults.push(format!(
                    "{:016x}:{p} reports node {:016x}, never reached",
                    node.id, peer.node
                ));
                continue;
            };
            let q = usize::from(peer.port);
            let back = nodes[y].peers.get(q).copied().flatten();
            let confirmed = (y, q) != (x, p)
                && back.is_some_and(|b| {
                    (b.node, usize::from(b.port), b.links, b.mbps) == (node.id, p, peer.links, peer.mbps)
                });
            if !confirmed {
                faults.push(format!(
                    "{:016x}:{p} reports {:016x}:{q}, which reports {}",
                    node.id,
                    peer.node,
                    back.map_or("its link down".to_string(), |b| format!(
                        "{:016x}:{}",
                        b.node, b.port
                    ))
                ));
            } else if (x, p) < (y, q) {
                trunks.push(FoundTrunk {
                    a: (x, p),
                    b: (y, q),
                    links: peer.links,
                    mbps: peer.mbps,
                });
            }
        }
    }
    Ok(Discovery {
        nodes,
        trunks,
        faults,
        reads,
    })
}

/// What discovery found, set against a topology.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// The topology's trunks (indices into [`gang`]'s, which are [`crate::manager::Fabric::plan`]'s) that
    /// are down at both ends, as an end discovery reached reports: the routes must avoid them.
    pub down: Vec<usize>,
    /// The topology's trunks neither of whose ends discovery reached: nothing says whether they are up.
    /// Also a trunk one end of which reports the other as the topology says, a node past the
    /// [`MAX_HOPS`] of every directed route: the manager can program nothing there. The routes leave them
    /// out too ([`Check::left_out`]).
    pub unseen: Vec<usize>,
    /// The topology's nodes discovery did not reach: switches no GPU reaches through live trunks, and
    /// GPUs that are not there (each also a difference).
    pub unreached: Vec<usize>,
    /// The topology's trunks found up with fewer links than it says: the routes still use them.
    pub degraded: Vec<Degraded>,
    /// Everything wired otherwise than the topology says, as messages; the topology cannot be trusted to
    /// route while there is any.
    pub differences: Vec<String>,
}

/// A trunk found with fewer links than the topology gives it (some failed, or never trained).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Degraded {
    /// Index of the trunk (as in [`Check::down`]).
    pub trunk: usize,
    /// Links found up.
    pub links: u8,
    /// Their rate together, MB/s.
    pub mbps: u32,
}

impl Check {
    /// Whether the fabric is as the topology says, but for trunks that are down or have lost links.
    pub fn matches(&self) -> bool {
        self.differences.is_empty()
    }

    /// The trunks the routes leave out: those found down and those not seen, in index order.
    pub fn left_out(&self) -> Vec<usize> {
        let mut out = [&self.down[..], &self.unseen[..]].concat();
        out.sort_unstable();
        out
    }
}

/// Set `found` against `expected`: which of its trunks are down, and what is wired differently.
pub fn check(found: &Discovery, expected: &Topology) -> Check {
    let (trunks, _) = gang(expected);
    let name_of: HashMap<u64, &str> = expected
        .nodes
        .iter()
        .map(|n| (node_id(&n.name), n.name.as_str()))
        .collect();
    let name = |id: u64| {
        name_of
            .get(&id)
            .map_or_else(|| format!("unknown node {id:016x}"), |n| n.to_string())
    };
    let found_at: HashMap<u64, usize> = found.nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let at = |x: usize| found_at.get(&node_id(&expected.nodes[x].name)).copied();
    let mut out = Check::default();
    for f in &found.faults {
        out.differences.push(format!("inconsistent: {f}"));
    }
    for (x, n) in expected.nodes.iter().enumerate() {
        let want = node_type(n.kind);
        match at(x) {
            None => {
                out.unreached.push(x);
                // The manager has an agent beside every GPU, which finds it whatever its links do: a GPU
                // not found is not there.
                if n.kind == NodeKind::Gpu {
                    out.differences
                        .push(format!("{} is not there: no GPU answers as it", n.name));
                }
            }
            Some(i) if found.nodes[i].kind != want => out.differences.push(format!(
                "{} is {}, the topology says {}",
                n.name,
                a_kind(found.nodes[i].kind),
                a_kind(want)
            )),
            Some(_) => {}
        }
    }
    for n in &found.nodes {
        if !name_of.contains_key(&n.id) {
            let home = || {
                found
                    .home(n.home)
                    .map_or_else(|| format!("home {}", n.home), |h| name(h.id))
            };
            out.differences.push(format!(
                "{} ({}) is not in the topology",
                name(n.id),
                directed(n.home, &n.route, home)
            ));
        }
    }
    // Each expected trunk: up as expected, down, or its ends wired elsewhere.
    let mut matched = vec![false; found.trunks.len()];
    // Found ends (node, port) already reported as leading elsewhere.
    let mut misled: HashSet<(usize, usize)> = HashSet::new();
    let mut trunk_at: HashMap<(usize, usize), usize> = HashMap::new();
    for (i, f) in found.trunks.iter().enumerate() {
        trunk_at.insert(f.a, i);
        trunk_at.insert(f.b, i);
    }
    for (t, trunk) in trunks.iter().enumerate() {
        let ends = [trunk.a, trunk.b].map(|(x, p)| (x, p, at(x)));
        let peer_at = |(_, p, i): (usize, usize, Option<usize>)| {
            i.and_then(|i| found.nodes[i].peers.get(p).copied().flatten())
        };
        let found_trunk = match ends.map(|(_, p, i)| i.map(|i| (i, p))) {
            [Some(a), Some(b)] => trunk_at.get(&a).copied().filter(|&f| {
                let f = &found.trunks[f];
                (f.a, f.b) == (a, b) || (f.a, f.b) == (b, a)
            }),
            _ => None,
        };
        match found_trunk {
            Some(i) => {
                matched[i] = true;
                let f = found.trunks[i];
                // Fewer links at no more than their share of the rate (within rounding to MB/s): some of
                // the trunk's links are down.
                let share = trunk.gbps * 1000.0 * f64::from(f.links) / trunk.links as f64;
                if usize::from(f.links) < trunk.links && f64::from(f.mbps) <= share + 1.0 {
                    out.degraded.push(Degraded {
                        trunk: t,
                        links: f.links,
                        mbps: f.mbps,
                    });
                } else if (usize::from(f.links), f.mbps) != (trunk.links, mbps(trunk)) {
                    out.differences.push(format!(
                        "{}:{} - {}:{}: {} links at {} MB/s, the topology says {} at {}",
                        expected.nodes[trunk.a.0].name,
                        trunk.a.1,
                        expected.nodes[trunk.b.0].name,
                        trunk.b.1,
                        f.links,
                        f.mbps,
                        trunk.links,
                        mbps(trunk)
                    ));
                }
            }
            // Down is what an end discovery reached says; of a trunk with neither end reached, nothing.
            None if ends.iter().all(|&(_, _, i)| i.is_none()) => out.unseen.push(t),
            // One end reports the other as the topology says, but no directed route reaches that node (it
            // lies past their last hop): the manager cannot program it, so this trunk is left out too.
            None if [(ends[0], ends[1]), (ends[1], ends[0])]
                .into_iter()
                .any(|(e, other)| {
                    other.2.is_none()
                        && peer_at(e).is_some_and(|peer| {
                            (peer.node, usize::from(peer.port))
                                == (node_id(&expected.nodes[other.0].name), other.1)
                        })
                }) =>
            {
                out.unseen.push(t)
            }
            None if ends.iter().all(|&e| peer_at(e).is_none()) => out.down.push(t),
            None => {
                for (e, other) in [(ends[0], ends[1]), (ends[1], ends[0])] {
                    if let (Some(peer), Some(i)) = (peer_at(e), e.2) {
                        misled.insert((i, e.1));
                        out.differences.push(format!(
                            "{}:{} leads to {}:{}, the topology says {}:{}",
                            expected.nodes[e.0].name,
                            e.1,
                            name(peer.node),
                            peer.port,
                            expected.nodes[other.0].name,
                            other.1
                        ));
                    }
                }
            }
        }
    }
    // Found trunks the topology does not have, unless one of their ends was reported above already.
    for (f, _) in found.trunks.iter().zip(&matched).filter(|&(_, &m)| !m) {
        let end = |(x, p): (usize, usize)| format!("{}:{p}", name(found.nodes[x].id));
        if !misled.contains(&f.a) && !misled.contains(&f.b) {
            out.differences
                .push(format!("{} - {} is not in the topology", end(f.a), end(f.b)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toml(links: &str) -> Topology {
        Topology::from_toml(&format!(
            r#"
            name = "star"
            [[node]]
            name = "gpu0"
            kind = "gpu"
            [[node]]
            name = "gpu1"
            kind = "gpu"
            [[node]]
            name = "gpu2"
            kind = "gpu"
            [[node]]
            name = "sw"
            kind = "switch"
            {links}
            "#
        ))
        .unwrap()
    }

    const LINK: &str = "gbps = 25.0\nlatency_ns = 100.0\n";

    fn star(order: [&str; 3]) -> Topology {
        toml(
            &order
                .iter()
                .map(|g| format!("[[link]]\na = \"{g}\"\nb = \"sw\"\n{LINK}"))
                .collect::<String>(),
        )
    }

    #[test]
    fn a_fabric_as_cabled_is_found_whole_and_matches() {
        for name in ["mesh4", "dgx1-hcm", "dgx-h100", "pcie8", "fat-tree-256"] {
            let t = Topology::builtin(name).unwrap();
            let found = discover(&mut Wiring::new(&t, &[], &[]).unwrap()).unwrap();
            assert_eq!(found.nodes.len(), t.nodes.len(), "{name}");
            assert_eq!(found.trunks.len(), gang(&t).0.len(), "{name}");
            assert!(found.faults.is_empty(), "{name}: {:?}", found.faults);
            let c = check(&found, &t);
            assert_eq!(c, Check::default(), "{name}");
            assert!(c.matches());
        }
    }

    #[test]
    fn a_trunk_down_is_found_down_and_what_is_behind_it_found_from_another_gpu_or_unreached() {
        let t = Topology::builtin("dgx-h100").unwrap();
        let (gpu0, sw1) = (t.node_named("gpu0").unwrap(), t.node_named("nvswitch1").unwrap());
        let found = discover(&mut Wiring::new(&t, &[(gpu0, sw1)], &[]).unwrap()).unwrap();
        let c = check(&found, &t);
        let (trunks, ports) = gang(&t);
        let port = (0..ports[gpu0].len())
            .find(|&p| trunks[ports[gpu0][p].0].b.0 == sw1)
            .unwrap();
        assert_eq!(c.down, vec![ports[gpu0][port].0]);
        assert!(c.matches() && c.unreached.is_empty());

        // A GPU whose only link is down is found from itself, alone.
        let s = star(["gpu0", "gpu1", "gpu2"]);
        let (g2, sw) = (s.node_named("gpu2").unwrap(), s.node_named("sw").unwrap());
        let found = discover(&mut Wiring::new(&s, &[(g2, sw)], &[]).unwrap()).unwrap();
        let alone = &found.nodes[found.node(node_id("gpu2")).unwrap()];
        assert_eq!((alone.home, alone.route.as_slice()), (2, &[][..]));
        let c = check(&found, &s);
        assert!(c.matches());
        assert_eq!((c.down, c.unreached), (vec![2], vec![]));

        // A switch whose every link is down is reached from no GPU.
        let everyone = [
            (s.node_named("gpu0").unwrap(), sw),
            (s.node_named("gpu1").unwrap(), sw),
            (g2, sw),
        ];
        let c = check(
            &discover(&mut Wiring::new(&s, &everyone, &[]).unwrap()).unwrap(),
            &s,
        );
        assert_eq!((c.down, c.unreached), (vec![0, 1, 2], vec![sw]));

        // Two switches hanging from sw, cut off from it: their trunk to each other is not seen, not down.
        let chain = format!(
            "[[node]]\nname = \"sw1\"\nkind = \"switch\"\n[[node]]\nname = \"sw2\"\nkind = \"switch\"\n\
             [[link]]\na = \"gpu0\"\nb = \"sw\"\n{LINK}[[link]]\na = \"sw\"\nb = \"sw1\"\n{LINK}\
             [[link]]\na = \"sw1\"\nb = \"sw2\"\n{LINK}"
        );
        let t = toml(&chain);
        let (sw1, sw2) = (t.node_named("sw1").unwrap(), t.node_named("sw2").unwrap());
        let c = check(
            &discover(&mut Wiring::new(&t, &[(sw, sw1)], &[]).unwrap()).unwrap(),
            &t,
        );
        assert!(c.matches(), "{c:?}");
        assert_eq!((&c.down, &c.unseen), (&vec![1], &vec![2]));
        assert_eq!(c.left_out(), vec![1, 2]);
        assert_eq!(c.unreached, vec![sw1, sw2]);
    }

    /// Switches past the last hop of every directed route are not reached, and the trunks to them are left
    /// out; a fabric so cabled is as its topology says, not miswired.
    #[test]
    fn switches_past_the_hop_limit_are_unreached_not_miswired() {
        // gpu0 - sw - s0 - s1 - ... - s69: the last switches lie more than MAX_HOPS hops from any GPU.
        let mut links = format!("[[link]]\na = \"gpu0\"\nb = \"sw\"\n{LINK}");
        links += &format!("[[link]]\na = \"gpu1\"\nb = \"sw\"\n{LINK}");
        links += &format!("[[link]]\na = \"gpu2\"\nb = \"sw\"\n{LINK}");
        for k in 0..70 {
            links += &format!("[[node]]\nname = \"s{k}\"\nkind = \"switch\"\n");
        }
        for k in 0..70 {
            let before = if k == 0 {
                "sw".to_string()
            } else {
                format!("s{}", k - 1)
            };
            links += &format!("[[link]]\na = \"{before}\"\nb = \"s{k}\"\n{LINK}");
        }
        let t = toml(&links);
        let found = discover(&mut Wiring::new(&t, &[], &[]).unwrap()).unwrap();
        assert!(found.faults.is_empty(), "{:?}", found.faults);
        let c = check(&found, &t);
        assert!(c.matches(), "{c:?}");
        // sw is 1 hop from gpu0, s{k} k + 2: s62 is the last within 64.
        let names: Vec<&str> = c.unreached.iter().map(|&x| t.nodes[x].name.as_str()).collect();
        assert_eq!(names, (63..70).map(|k| format!("s{k}")).collect::<Vec<_>>());
        // The trunks s62 - s63 to s68 - s69 (trunks 3 + k for s{k-1} - s{k}).
        assert_eq!(c.unseen, (66..73).collect::<Vec<_>>());
        assert!(c.down.is_empty());
    }

    /// A switch past the last hop of the first GPU's routes is found from a GPU beside it, though that GPU
    /// was found already: gA and gB lie 64 hops from g0 down chains of switches, and only switch x
    /// joins them. Discovery had left x unreached ("more than 64 hops from every GPU") and the trunks
    /// to it out of the routes, so that gA and gB had no route to each other.
    #[test]
    fn a_switch_past_the_hop_limit_is_found_from_a_gpu_beside_it() {
        let mut text = String::from("[[node]]\nname = \"g0\"\nkind = \"gpu\"\n");
        text += "[[node]]\nname = \"gA\"\nkind = \"gpu\"\n[[node]]\nname = \"gB\"\nkind = \"gpu\"\n";
        text += "[[node]]\nname = \"x\"\nkind = \"switch\"\n";
        let link = |a: &str, b: &str| format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\n{LINK}");
        for chain in ["a", "b"] {
            let end = format!("g{}", chain.to_uppercase());
            for k in 0..MAX_HOPS - 1 {
                text += &format!("[[node]]\nname = \"{chain}{k}\"\nkind = \"switch\"\n");
                let before = if k == 0 {
                    "g0".to_string()
                } else {
                    format!("{chain}{}", k - 1)
                };
                text += &link(&before, &format!("{chain}{k}"));
            }
            text += &link(&format!("{chain}{}", MAX_HOPS - 2), &end);
            text += &link(&end, "x");
        }
        let t = Topology::from_toml(&text).unwrap();
        let found = discover(&mut Wiring::new(&t, &[], &[]).unwrap()).unwrap();
        assert!(found.faults.is_empty(), "{:?}", found.faults);
        let c = check(&found, &t);
        assert_eq!(c, Check::default());
        let x = &found.nodes[found.node(node_id("x")).unwrap()];
        assert_eq!((x.home, x.route.len()), (1, 1), "from gA, the second GPU");
        let f = crate::manager::Fabric::plan(&t, &c.left_out()).unwrap();
        assert_eq!(f.unreachable(&[0, 1, 2]), None);
        assert_eq!(f.path(1, 2).unwrap().len(), 3, "gA - x - gB");
    }

    /// Two fabrics that no trunk joins (or that a failure cut apart) are found whole: the second from its
    /// first GPU, each node once, with its route from there.
    #[test]
    fn parts_no_trunk_joins_are_found_from_a_gpu_of_each() {
        let t = Topology::builtin("dgx-h100").unwrap();
        let two = t.twice();
        let found = discover(&mut Wiring::new(&two, &[], &[]).unwrap()).unwrap();
        assert_eq!(found.nodes.len(), two.nodes.len());
        assert_eq!(found.trunks.len(), 2 * gang(&t).0.len());
        assert_eq!(check(&found, &two), Check::default());
        let homes: HashSet<usize> = found.nodes.iter().map(|n| n.home).collect();
        assert_eq!(
            homes,
            HashSet::from([0, 8]),
            "the second part from its first GPU, the ninth"
        );
        // Each part as it would be alone, and the ID (2 reads) of each of gpu1 to gpu7, tried as homes
        // before b-gpu0 and found already.
        let alone = discover(&mut Wiring::new(&t, &[], &[]).unwrap()).unwrap();
        assert_eq!(found.reads, 2 * alone.reads + 7 * 2);
    }

    #[test]
    fn cables_on_the_wrong_ports_are_reported() {
        let expected = star(["gpu0", "gpu1", "gpu2"]);
        let cabled = star(["gpu0", "gpu2", "gpu1"]);
        let c = check(
            &discover(&mut Wiring::new(&cabled, &[], &[]).unwrap()).unwrap(),
            &expected,
        );
        assert!(!c.matches());
        assert!(c.down.is_empty());
        assert!(
            c.differences
                .contains(&"sw:1 leads to gpu2:0, the topology says gpu1:0".to_string()),
            "{:?}",
            c.differences
        );
        assert!(c
            .differences
            .contains(&"gpu1:0 leads to sw:2, the topology says sw:1".to_string()));
    }

    #[test]
    fn a_node_the_topology_lacks_and_a_thinner_trunk_are_reported() {
        let expected = star(["gpu0", "gpu1", "gpu2"]);
        let mut cabled = expected.clone();
        cabled.nodes[2].name = "gpu9".into();
        cabled.links.push(cabled.links[0].clone());
        let c = check(
            &discover(&mut Wiring::new(&cabled, &[], &[]).unwrap()).unwrap(),
            &expected,
        );
        let text = c.differences.join("\n");
        assert!(
            text.contains("gpu0:0 - sw:0: 2 links at 50000 MB/s, the topology says 1 at 25000"),
            "{text}"
        );
        assert!(text.contains("(route [0, 2]) is not in the topology"), "{text}");
        assert_eq!(c.unreached, vec![2]);
    }

    #[test]
    fn a_trunk_that_lost_links_is_degraded_not_different_and_losing_all_takes_it_down() {
        let t = Topology::builtin("dgx-h100").unwrap();
        let (gpu0, sw0) = (t.node_named("gpu0").unwrap(), t.node_named("nvswitch0").unwrap());
        let c = check(
            &discover(&mut Wiring::new(&t, &[], &[(gpu0, sw0), (sw0, gpu0)]).unwrap()).unwrap(),
            &t,
        );
        assert!(c.matches() && c.down.is_empty(), "{c:?}");
        assert_eq!(
            c.degraded,
            vec![Degraded {
                trunk: 0,
                links: 3,
                mbps: 75_000
            }]
        );
        let all = [(gpu0, sw0); 6];
        let c = check(&discover(&mut Wiring::new(&t, &[], &all).unwrap()).unwrap(), &t);
        assert_eq!((c.down, c.degraded), (vec![0], vec![]));
        assert!(Wiring::new(&t, &[], &[(gpu0, t.node_named("gpu1").unwrap())]).is_err());
    }

    /// A node whose registers lie about its peer is caught by the other end.
    #[test]
    fn a_port_the_other_end_does_not_confirm_is_a_fault() {
        let t = star(["gpu0", "gpu1", "gpu2"]);
        let mut w = Wiring::new(&t, &[], &[]).unwrap();
        let sw = t.node_named("sw").unwrap();
        let mut peer = w.nodes[sw].peer(2).unwrap();
        peer.port = 7;
        w.nodes[sw].set_peer(2, Some(peer)).unwrap();
        let found = discover(&mut w).unwrap();
        assert_eq!(found.faults.len(), 2, "{:?}", found.faults);
        assert!(!check(&found, &t).matches());
    }

    #[test]
    fn reads_are_counted_and_a_route_over_a_down_link_is_refused() {
        let t = star(["gpu0", "gpu1", "gpu2"]);
        let mut w = Wiring::new(
            &t,
            &[(t.node_named("gpu1").unwrap(), t.node_named("sw").unwrap())],
            &[],
        )
        .unwrap();
        // Three nodes found from gpu0 (gpu1's only link is down): 4 identity reads each (ID twice, type,
        // ports) and 4 per port (gpu0 1, sw 3, gpu2 1); then gpu1 from itself, as only two GPUs of three
        // were found: 4 and 4 for its port.
        let found = discover(&mut w).unwrap();
        assert_eq!(found.nodes.len(), 4);
        assert_eq!(found.reads, 3 * 4 + 4 * (1 + 3 + 1) + (4 + 4));
        assert!(w
            .read(0, &[0, 1], identity::NODE_ID)
            .unwrap_err()
            .contains("port 1 has no link up"));
    }
}
