//! The fabric manager's plan: it gangs parallel links, assigns endpoint IDs, computes routes that cannot
//! deadlock, and programs every switch through its register interface. What it plans for is what
//! [`crate::discover`] found: the topology, less the trunks found down.
//!
//! - **Link ganging.** Parallel links between the same two nodes form one *trunk* (NVLink's link ganging):
//!   one logical port whose rate is the sum of its links'. The simulator runs one data link per trunk.
//! - **Endpoint IDs.** GPU `i` (in topology order) is endpoint `i`.
//! - **Partitions.** Every switch learns the partition of every GPU not in partition 0, and drops a
//!   packet whose source and destination GPUs are in different ones (NVLink partitions); GPUs joined
//!   directly, without a switch between them, are not isolated.
//! - **Routes: up*/down*.** Levels come from a breadth-first search from a root switch (of those with
//!   GPUs, the one with the most trunks to other switches: a leaf of a fat tree, never a spine, which
//!   would put the other spines below the leaves) over switch-to-switch trunks, and a part of the fabric those trunks
//!   do not join to it gets a root of its own if it has several switches. A trunk is *up* in the
//!   direction of the node nearer the root (lower level, then lower index). A packet may climb and then
//!   descend, never climb after descending; with routes restricted so, the channel dependency graph has
//!   no cycle and the fabric cannot deadlock (Schroeder et al., "Autonet", 1991). A node forwards down
//!   whenever a down-only path to the destination exists, and up only otherwise, so a packet that arrived
//!   descending always keeps descending. GPUs never forward.

use std::collections::VecDeque;

use switch_fw::regs;
use switch_fw::PortSet;

use crate::topology::{LinkFormat, NodeKind, Topology};

/// One trunk: parallel links ganged into one logical link.
#[derive(Clone, Debug, PartialEq)]
pub struct Trunk {
    /// Node and logical port at one end.
    pub a: (usize, usize),
    /// Node and logical port at the other end.
    pub b: (usize, usize),
    /// Links ganged.
    pub links: usize,
    /// Data rate of each direction, GB/s (the sum of the links').
    pub gbps: f64,
    /// Latency of each direction, ns.
    pub latency_ns: f64,
    /// Bit error rate.
    pub ber: f64,
    /// Framing.
    pub format: LinkFormat,
}

impl Trunk {
    /// The most a channel of this trunk can carry, GB/s, when its packets take `packet_flits` flits, if
    /// its round trip holds more than the data link may have in flight on one channel, and `None` if it
    /// can run at its rate. In flight are at most the receive buffer its credits advertise and the
    /// packets its replay buffer holds, whichever is less: for 128-byte writes the receive buffer, 64
    /// KiB; for small writes the replay buffer's packets. A trunk of long latency is paced by them: at
    /// 1 us, 64 KiB per 2 us round trip is about 33 GB/s, whatever its links carry.
    ///
    /// A trunk that lost links has less rate, not fewer credits: ask [`Trunk::with_links`]'s trunk.
    pub fn window_limit_gbps(&self, packet_flits: usize) -> Option<f64> {
        let flits = crate::net::RX_FLITS.min(crate::net::REPLAY * packet_flits);
        let most = (flits * link_dl::flit::FLIT_LEN) as f64 / (2.0 * self.latency_ns);
        (most < self.gbps).then_some(most)
    }

    /// This trunk with only `links` of its links up, at their share of its rate.
    pub fn with_links(&self, links: usize) -> Trunk {
        Trunk {
            links,
            gbps: self.gbps / self.links as f64 * links as f64,
            ..self.clone()
        }
    }
}

/// The channel dependency graph of a fabric's routes ([`Fabric::dependencies`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependencies {
    /// Channels (trunk directions) that some packet takes.
    pub channels: usize,
    /// Dependencies between them.
    pub dependencies: usize,
    /// A cycle, if there is one, as the (node, port) each of its channels leaves from; `None` means the
    /// routes cannot deadlock.
    pub cycle: Option<Vec<(usize, usize)>>,
}

/// A cycle in the directed graph `edges` (vertex to successors), by iterative depth-first search.
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; edges.len()];
    for start in 0..edges.len() {
        if state[start] != NEW {
            continue;
        }
        // The path from `start`, each vertex with the index of the next successor to look at.
        let mut path = vec![(start, 0usize)];
        state[start] = ON_PATH;
        while let Some(&mut (v, ref mut next)) = path.last_mut() {
            match edges[v].get(*next) {
                Some(&w) => {
                    *next += 1;
                    match state[w] {
                        NEW => {
                            state[w] = ON_PATH;
                            path.push((w, 0));
                        }
                        ON_PATH => {
                            let from = path.iter().position(|&(u, _)| u == w).unwrap_or(0);
                            return Some(path[from..].iter().map(|&(u, _)| u).collect());
                        }
                        _ => {}
                    }
                }
                None => {
                    state[v] = DONE;
                    path.pop();
                }
            }
        }
    }
    None
}

/// Parallel links between the same two nodes (of one format: [`Topology::validate`]) ganged into trunks,
/// and every node's
/// logical ports: (trunk, which end: 0 = a, 1 = b), numbered in the order of the first link of each trunk.
pub fn gang(topology: &Topology) -> (Vec<Trunk>, Vec<Vec<(usize, usize)>>) {
    let n = topology.nodes.len();
    let mut trunks: Vec<Trunk> = Vec::new();
    let mut ports: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for l in &topology.links {
        let (x, y) = (l.a.min(l.b), l.a.max(l.b));
        match trunks.iter_mut().find(|t| t.a.0 == x && t.b.0 == y) {
            Some(t) => {
                t.links += 1;
                t.gbps += l.gbps;
                t.latency_ns = t.latency_ns.max(l.latency_ns);
                t.ber = t.ber.max(l.ber);
            }
            None => {
                let index = trunks.len();
                let t = Trunk {
                    a: (x, ports[x].len()),
                    b: (y, ports[y].len()),
                    links: 1,
                    gbps: l.gbps,
                    latency_ns: l.latency_ns,
                    ber: l.ber,
                    format: l.format,
                };
                ports[x].push((index, 0));
                ports[y].push((index, 1));
                trunks.push(t);
            }
        }
    }
    (trunks, ports)
}

/// What the manager worked out.
#[derive(Clone, Debug)]
pub struct Fabric {
    /// Trunks, by index.
    pub trunks: Vec<Trunk>,
    /// For every node, its logical ports: (trunk, which end: 0 = a, 1 = b).
    pub ports: Vec<Vec<(usize, usize)>>,
    /// For every node and every GPU destination (by endpoint ID), the logical ports towards it.
    pub routes: Vec<Vec<PortSet>>,
    /// Node index of each endpoint ID.
    pub gpus: Vec<usize>,
    /// The up*/down* roots: first, of the switches with a GPU (all, when none has one), the one with the
    /// most trunks to other switches (the first on a tie), then one for each other part of several switches that switch-to-switch trunks
    /// join (chosen by the same rule within it); none without switches. A lone switch needs no root: it
    /// only ever takes packets up from a GPU and down to another.
    pub roots: Vec<usize>,
    /// Level of every switch from its part's root over switch-to-switch trunks (`usize::MAX` for GPUs and
    /// for switches without a live trunk to another switch, except the first root, at 0 whatever it has).
    pub level: Vec<usize>,
    /// Register writes that program each switch (node index, address, value), in order.
    pub program: Vec<(usize, u32, u32)>,
    /// Failed trunks the routes avoid.
    pub failed: usize,
    /// Which plan this is: 0 for the first, one more at each [`Fabric::replan`]. It numbers the routes,
    /// which `failed` does not once repairs bring trunks back (a repair and a failure in one replan).
    pub plan: usize,
}

/// Why the fabric manager refuses a drain ([`Fabric::drain_cut`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrainCut {
    /// Without the switch, no route would join two GPUs of a group.
    Splits {
        /// The group's index among those asked about.
        group: usize,
        /// The two GPUs (endpoint IDs).
        pair: (usize, usize),
    },
    /// The fabric could not be planned without the switch: why, in words.
    Unplanned(String),
}

impl Fabric {
    /// Work out the fabric of `topology`, optionally without some failed trunks (by index into a first
    /// plan's `trunks`): the routes avoid them. Two GPUs that no path of live trunks through switches
    /// joins get no route between them ([`Fabric::unreachable`] finds them).
    pub fn plan(topology: &Topology, failed: &[usize]) -> Result<Fabric, String> {
        Fabric::plan_over(topology, failed, None, 0)
    }

    /// Whether the fabric manager refuses to take `trunks` out of the routes (a drain: the live trunks of
    /// a switch) while `left_out` are out already (trunks down, and those of switches draining): the
    /// plan without them leaves two GPUs of one of `groups` with no route that joins them, which the plan
    /// with them joins: the first such group and that pair, or why the fabric could not be planned
    /// without them. A maintenance drain must not cut a group; what `left_out` cuts
    /// already is not the drain's doing, so a group split with the trunks does not refuse it.
    /// `unjoined` finds a pair of a group that a plan does not join, as [`Fabric::unreachable`] does.
    pub fn drain_cut<G>(
        &self,
        topology: &Topology,
        left_out: &[usize],
        trunks: &[usize],
        groups: &[G],
        unjoined: impl Fn(&G, &Fabric) -> Option<(usize, usize)>,
    ) -> Option<DrainCut> {
        let mut out = left_out.to_vec();
        out.sort_unstable();
        out.dedup();
        // Could the fabric not be planned even with the trunks, the drain would not be what cuts it.
        let with = self.replan(topology, &out).ok()?;
        out.extend(trunks);
        out.sort_unstable();
        out.dedup();
        let without = match self.replan(topology, &out) {
            Ok(fabric) => fabric,
            Err(e) => {
                let why = format!("the fabric manager could not route the fabric without it: {e}");
                return Some(DrainCut::Unplanned(why));
            }
        };
        groups.iter().enumerate().find_map(|(i, group)| {
            let pair = unjoined(group, &without)?;
            unjoined(group, &with)
                .is_none()
                .then_some(DrainCut::Splits { group: i, pair })
        })
    }

    /// Plan again, as [`Fabric::plan`], for switches that hold this plan's routes: a route that changes
    /// is written half that removes ports first (`docs/spec.md` section 5).
    pub fn replan(&self, topology: &Topology, failed: &[usize]) -> Result<Fabric, String> {
        Fabric::plan_over(topology, failed, Some(&self.routes), self.plan + 1)
    }

    /// Plan number `plan`, with a program for switches that hold the routes `held` (none: empty
    /// switches).
    fn plan_over(
        topology: &Topology,
        failed: &[usize],
        held: Option<&[Vec<PortSet>]>,
        plan: usize,
    ) -> Result<Fabric, String> {
        topology.validate()?;
        let n = topology.nodes.len();
        let (trunks, ports) = gang(topology);
        let alive = |t: usize| !failed.contains(&t);
        // Neighbours through live trunks: (neighbour, own port).
        let neighbours: Vec<Vec<(usize, usize)>> = (0..n)
            .map(|x| {
                ports[x]
                    .iter()
                    .enumerate()
                    .filter(|(_, &(t, _))| alive(t))
                    .map(|(p, &(t, end))| (if end == 0 { trunks[t].b.0 } else { trunks[t].a.0 }, p))
                    .collect()
            })
            .collect();
        let is_switch = |x: usize| topology.nodes[x].kind == NodeKind::Switch;
        let switch_neighbours = |x: usize| neighbours[x].iter().filter(|&&(y, _)| is_switch(y)).count();
        let has_gpus = |x: usize| neighbours[x].iter().any(|&(y, _)| !is_switch(y));
        // Levels: breadth-first from a root over switch-to-switch trunks. GPUs are leaves below every
        // switch: a trunk from a GPU always climbs, one into a GPU always descends. A part of the fabric
        // that no switch-to-switch trunk joins to the root's (a failure cut it off, or it never was) gets a
        // root of its own, chosen by the same rule, so that every switch of it can climb to one.
        let mut level = vec![usize::MAX; n];
        let mut roots = Vec::new();
        while let Some(root) = (0..n)
            .filter(|&x| {
                is_switch(x) && level[x] == usize::MAX && (roots.is_empty() || switch_neighbours(x) > 0)
            })
            .max_by_key(|&x| (has_gpus(x), switch_neighbours(x), usize::MAX - x))
        {
            roots.push(root);
            level[root] = 0;
            let mut queue = VecDeque::from([root]);
            while let Some(x) = queue.pop_front() {
                for &(y, _) in &neighbours[x] {
                    if is_switch(y) && level[y] == usize::MAX {
                        level[y] = level[x] + 1;
                        queue.push_back(y);
                    }
                }
            }
        }
        let gpus = topology.gpus();
        let rank = |x: usize| {
            if is_switch(x) {
                (level[x], x)
            } else {
                (usize::MAX, usize::MAX)
            }
        };
        let up = |from: usize, to: usize| rank(to) < rank(from);
        // Routes, per destination.
        let mut routes = vec![vec![PortSet::EMPTY; gpus.len()]; n];
        for (id, &dest) in gpus.iter().enumerate() {
            let down = distances(n, dest, &neighbours, |x, y| !up(x, y), &is_switch);
            let any = distances_any(n, dest, &neighbours, &down, &up, &is_switch);
            for x in 0..n {
                if x == dest {
                    continue;
                }
                let mut set = PortSet::EMPTY;
                for &(y, p) in &neighbours[x] {
                    let step_ok = y == dest
                        || if down[x] != usize::MAX {
                            !up(x, y) && down[y] != usize::MAX && down[y] + 1 == down[x]
                        } else {
                            up(x, y) && any[y] != usize::MAX && any[y] + 1 == any[x]
                        };
                    let direct = neighbours[x].iter().any(|&(z, _)| z == dest);
                    if step_ok && (y == dest || !direct) && (y == dest || is_switch(y)) {
                        set = set.with(p);
                    }
                }
                routes[x][id] = set;
            }
            keep_soonest_gpu_ports(dest, &mut routes, id, &trunks, &ports, &is_switch, |x| {
                if down[x] != usize::MAX {
                    down[x]
                } else {
                    any[x]
                }
            });
        }
        // Program every switch through its registers: routes, then the partitions of the GPUs not in
        // partition 0 (where a switch starts every endpoint). A switch takes a route's halves as they
        // are written: the half that removes ports goes first, so that in between the route names no
        // port it leaves (unless both halves remove ports, which no order avoids).
        let mut program = Vec::new();
        for x in (0..n).filter(|&x| is_switch(x)) {
            for (id, set) in routes[x].iter().enumerate() {
                let base = regs::ROUTES + 8 * id as u32;
                let mut halves = [(base, set.0 as u32), (base + 4, (set.0 >> 32) as u32)];
                let removed = held.map_or(0, |held| held[x][id].0 & !set.0);
                if removed as u32 == 0 && removed >> 32 != 0 {
                    halves.swap(0, 1);
                }
                program.extend(halves.map(|(address, value)| (x, address, value)));
            }
            for (id, &gpu) in gpus.iter().enumerate() {
                let partition = topology.nodes[gpu].partition;
                if partition != 0 {
                    program.push((x, regs::PARTITIONS + 4 * id as u32, u32::from(partition)));
                }
            }
        }
        Ok(Fabric {
            trunks,
            ports,
            routes,
            gpus,
            roots,
            level,
            program,
            failed: failed.len(),
            plan,
        })
    }

    /// The name in `topology` of GPU `id` (an endpoint ID), for messages ("?" if there is none).
    pub fn gpu_name<'a>(&self, topology: &'a Topology, id: usize) -> &'a str {
        topology.node_name(self.gpus.get(id).copied().unwrap_or(usize::MAX))
    }

    /// Logical ports of node `x`.
    pub fn port_count(&self, x: usize) -> usize {
        self.ports[x].len()
    }

    /// The trunk (ganged links) behind node `x`'s port `p`.
    pub fn trunk_at(&self, x: usize, p: usize) -> &Trunk {
        &self.trunks[self.ports[x][p].0]
    }

    /// Links behind each port of every GPU, in GPU order (how in-switch reduction spreads its traffic).
    pub fn gpu_port_links(&self) -> Vec<Vec<u32>> {
        self.gpus
            .iter()
            .map(|&node| {
                (0..self.port_count(node))
                    .map(|p| self.trunk_at(node, p).links as u32)
                    .collect()
            })
            .collect()
    }

    /// Which of node `x`'s ports its routes to GPU `gpu` take (a GPU's, those that reach it soonest).
    pub fn route_ports(&self, x: usize, gpu: usize) -> Vec<bool> {
        (0..self.port_count(x))
            .map(|p| self.routes[x][gpu].contains(p))
            .collect()
    }

    /// The trunks joining node `x` directly to node `y`.
    pub fn trunks_between(&self, x: usize, y: usize) -> impl Iterator<Item = &Trunk> + '_ {
        (0..self.port_count(x))
            .filter(move |&p| self.peer(x, p).0 == y)
            .map(move |p| self.trunk_at(x, p))
    }

    /// Node `x`'s port towards node `y` (the first, if several trunks join them), or why there is none
    /// (names from `topology`).
    pub fn port_towards(&self, topology: &Topology, x: usize, y: usize) -> Result<usize, String> {
        (0..self.port_count(x))
            .find(|&p| self.peer(x, p).0 == y)
            .ok_or_else(|| {
                format!(
                    "{} has no link between {} and {}",
                    topology.name, topology.nodes[x].name, topology.nodes[y].name
                )
            })
    }

    /// The node and port at the other end of `x`'s port `p`.
    pub fn peer(&self, x: usize, p: usize) -> (usize, usize) {
        let (t, end) = self.ports[x][p];
        if end == 0 {
            self.trunks[t].b
        } else {
            self.trunks[t].a
        }
    }

    /// The channel dependency graph of the routes (Dally and Seitz): a channel is one direction of a
    /// trunk, and channel `a` depends on `b` when a packet that some GPU sends along the routes can
    /// arrive over `a` at a switch whose route sends it on over `b`. The fabric cannot deadlock if the
    /// graph has no cycle; this checks that from the route tables alone, whatever rule made them.
    pub fn dependencies(&self) -> Dependencies {
        let n = self.routes.len();
        // Channel of node x's port p: 2 * trunk + (the end x is at).
        let channel = |x: usize, p: usize| {
            let (t, end) = self.ports[x][p];
            2 * t + end
        };
        let channels = 2 * self.trunks.len();
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); channels];
        let mut used = vec![false; channels];
        let is_gpu = {
            let mut g = vec![false; n];
            self.gpus.iter().for_each(|&x| g[x] = true);
            g
        };
        for (id, &dest) in self.gpus.iter().enumerate() {
            // The nodes a packet for `dest` can reach from any GPU, and the channels it takes.
            let mut seen = vec![false; n];
            let mut queue: VecDeque<usize> = self.gpus.iter().copied().filter(|&g| g != dest).collect();
            queue.iter().for_each(|&g| seen[g] = true);
            while let Some(x) = queue.pop_front() {
                for p in self.routes[x][id].iter() {
                    let (y, _) = self.peer(x, p);
                    let a = channel(x, p);
                    used[a] = true;
                    if y == dest || is_gpu[y] {
                        continue;
                    }
                    for q in self.routes[y][id].iter() {
                        let b = channel(y, q);
                        if !edges[a].contains(&b) {
                            edges[a].push(b);
                        }
                    }
                    if !seen[y] {
                        seen[y] = true;
                        queue.push_back(y);
                    }
                }
            }
        }
        let cycle = find_cycle(&edges);
        // Name a channel by its sending node and port.
        let ends = |c: usize| {
            let t = &self.trunks[c / 2];
            if c % 2 == 0 {
                t.a
            } else {
                t.b
            }
        };
        Dependencies {
            channels: used.iter().filter(|&&u| u).count(),
            dependencies: edges.iter().map(Vec::len).sum(),
            cycle: cycle.map(|c| c.into_iter().map(ends).collect()),
        }
    }

    /// The first pair of `gpus` (endpoint IDs) that have no route between them, as (from, to): a failure
    /// cut them apart, or no live trunk ever joined them.
    pub fn unreachable(&self, gpus: &[usize]) -> Option<(usize, usize)> {
        gpus.iter().find_map(|&from| {
            gpus.iter()
                .find(|&&to| to != from && !self.routed(from, to))
                .map(|&to| (from, to))
        })
    }

    /// The first of `pairs` (endpoint IDs, as (from, to)) that has no route: [`Fabric::unreachable`] for
    /// GPUs that do not all send to each other.
    pub fn unrouted(&self, pairs: &[(usize, usize)]) -> Option<(usize, usize)> {
        pairs.iter().copied().find(|&(from, to)| !self.routed(from, to))
    }

    /// Whether GPU `from` has a route to GPU `to` (endpoint IDs).
    fn routed(&self, from: usize, to: usize) -> bool {
        (self.gpus.get(from).and_then(|&node| self.routes.get(node)))
            .and_then(|routes| routes.get(to))
            .is_some_and(|ports| !ports.is_empty())
    }

    /// The nodes a packet from GPU `from` to GPU `to` visits, following the first port of every route set
    /// (for checks and reports).
    pub fn path(&self, from: usize, to: usize) -> Option<Vec<usize>> {
        let dest = self.gpus[to];
        let mut x = self.gpus[from];
        let mut path = vec![x];
        while x != dest {
            let p = self.routes[x][to].iter().next()?;
            x = self.peer(x, p).0;
            path.push(x);
            if path.len() > self.routes.len() {
                return None;
            }
        }
        Some(path)
    }
}

/// Whether a register write to `address` sets an endpoint's partition (else a route).
pub fn sets_partition(address: u32) -> bool {
    (regs::PARTITIONS..regs::MULTICAST).contains(&address)
}

/// Hops from every node to `dest` over steps allowed by `ok(from, to)`, through switches only.
fn distances(
    n: usize,
    dest: usize,
    neighbours: &[Vec<(usize, usize)>],
    ok: impl Fn(usize, usize) -> bool,
    is_switch: &impl Fn(usize) -> bool,
) -> Vec<usize> {
    let mut d = vec![usize::MAX; n];
    d[dest] = 0;
    let mut queue = VecDeque::from([dest]);
    while let Some(y) = queue.pop_front() {
        if y != dest && !is_switch(y) {
            continue;
        }
        for &(x, _) in &neighbours[y] {
            if d[x] == usize::MAX && ok(x, y) {
                d[x] = d[y] + 1;
                queue.push_back(x);
            }
        }
    }
    d
}

/// Keep, of every GPU's ports towards GPU `id` (node `dest`), those by which a packet reaches it soonest:
/// less than twice the least wire latency along the routes, or within a picosecond of it (paths of no
/// latency). NCCL sends between the GPUs of a node over NVLink, not out into the network and back, though
/// on a fat tree both are two hops (200 against 1,000 ns). Paths of one kind differ by their cables only:
/// a route that kept only the switch planes a few nanoseconds nearer would lose the others' links.
/// `hops` is a node's distance to `dest` along the routes, which every step lowers by one.
fn keep_soonest_gpu_ports(
    dest: usize,
    routes: &mut [Vec<PortSet>],
    id: usize,
    trunks: &[Trunk],
    ports: &[Vec<(usize, usize)>],
    is_switch: &impl Fn(usize) -> bool,
    hops: impl Fn(usize) -> usize,
) {
    let peer = |x: usize, p: usize| {
        let (t, end) = ports[x][p];
        let far = if end == 0 { trunks[t].b.0 } else { trunks[t].a.0 };
        (far, trunks[t].latency_ns)
    };
    // Least latency to `dest` from every switch, nearest first: each step leads to a node one hop nearer.
    let mut by_hops: Vec<usize> = (0..routes.len())
        .filter(|&x| is_switch(x) && hops(x) != usize::MAX)
        .collect();
    by_hops.sort_by_key(|&x| hops(x));
    let mut latency = vec![f64::INFINITY; routes.len()];
    latency[dest] = 0.0;
    let via = |latency: &[f64], x: usize, p: usize| {
        let (y, wire) = peer(x, p);
        wire + latency[y]
    };
    for x in by_hops {
        latency[x] = (0..ports[x].len())
            .filter(|&p| routes[x][id].contains(p))
            .map(|p| via(&latency, x, p))
            .fold(f64::INFINITY, f64::min);
    }
    for x in (0..routes.len()).filter(|&x| x != dest && !is_switch(x)) {
        let set = routes[x][id];
        let through = |p: usize| set.contains(p).then(|| via(&latency, x, p));
        let least = (0..ports[x].len())
            .filter_map(through)
            .fold(f64::INFINITY, f64::min);
        if least.is_finite() {
            routes[x][id] = (0..ports[x].len())
                .filter(|&p| through(p).is_some_and(|l| l < 2.0 * least || l <= least + 1e-3))
                .fold(PortSet::EMPTY, PortSet::with);
        }
    }
}

/// Hops of the shortest legal (up*, then down*) path from every node to `dest`, given the down-only
/// distances `down`.
fn distances_any(
    n: usize,
    dest: usize,
    neighbours: &[Vec<(usize, usize)>],
    down: &[usize],
    up: &impl Fn(usize, usize) -> bool,
    is_switch: &impl Fn(usize) -> bool,
) -> Vec<usize> {
    let mut any = down.to_vec();
    // Relax climbing steps until nothing changes (at most as many rounds as levels).
    for _ in 0..n {
        let mut changed = false;
        for x in 0..n {
            if x == dest || down[x] != usize::MAX {
                continue;
            }
            for &(y, _) in &neighbours[x] {
                if up(x, y) && is_switch(y) && any[y] != usize::MAX && any[y] + 1 < any[x] {
                    any[x] = any[y] + 1;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a channel may have in flight is the lesser of the receive buffer (64 KiB) and the replay
    /// buffer's 511 packets: for 128-byte writes the first, for small ones the second.
    #[test]
    fn long_or_fast_trunks_are_paced_by_credits_or_the_replay_buffer() {
        let t = Topology::builtin("dgx-h100").unwrap();
        let f = Fabric::plan(&t, &[]).unwrap();
        let trunk = &f.trunks[0];
        assert_eq!((trunk.gbps, trunk.latency_ns), (125.0, 100.0));
        // 128-byte writes, 10 flits: 64 KiB per 200 ns is 327.68 GB/s, above the rate.
        assert_eq!(trunk.window_limit_gbps(10), None);
        // 16-byte writes, 3 flits: 511 x 48 B per 200 ns.
        assert!((trunk.window_limit_gbps(3).unwrap() - 511.0 * 48.0 / 200.0).abs() < 1e-9);
        let slow = Trunk {
            latency_ns: 1000.0,
            ..trunk.clone()
        };
        assert!((slow.window_limit_gbps(10).unwrap() - 65536.0 / 2000.0).abs() < 1e-9);
        // With 1 of its 5 links up, 25 GB/s: its 32.8 GB/s window no longer holds it back.
        assert_eq!(slow.with_links(1).gbps, 25.0);
        assert_eq!(slow.with_links(1).window_limit_gbps(10), None);
        assert!((slow.with_links(2).window_limit_gbps(10).unwrap() - 65536.0 / 2000.0).abs() < 1e-9);
    }

    #[test]
    fn nvswitch_systems_gang_links_and_route_through_every_switch() {
        let t = Topology::builtin("dgx-h100").unwrap();
        let f = Fabric::plan(&t, &[]).unwrap();
        assert_eq!(f.trunks.len(), 32);
        assert_eq!(f.port_count(0), 4, "one trunk per NVSwitch");
        assert_eq!(f.trunks[0].links, 5);
        assert!((f.trunks[0].gbps - 125.0).abs() < 1e-9);
        // GPU 0 reaches GPU 3 through any of the four switches, each switch straight to GPU 3.
        assert_eq!(f.routes[0][3].len(), 4);
        for s in 8..12 {
            assert_eq!(f.routes[s][3].len(), 1);
        }
        assert_eq!(f.path(0, 3).unwrap().len(), 3);
    }

    #[test]
    fn direct_links_win_and_others_go_through_pcie() {
        let t = Topology::builtin("dgx1-hcm").unwrap();
        let f = Fabric::plan(&t, &[]).unwrap();
        assert_eq!(f.path(0, 3).unwrap(), [0, 3]);
        let p = f.path(0, 5).unwrap();
        assert!(p.len() > 2 && p[1..p.len() - 1].iter().all(|&x| x >= 8), "{p:?}");
    }

    #[test]
    fn routes_are_up_then_down_and_reach_every_gpu() {
        let t = Topology::builtin("fat-tree-256").unwrap();
        let f = Fabric::plan(&t, &[]).unwrap();
        let rank = |x: usize| {
            if x < 256 {
                (usize::MAX, usize::MAX)
            } else {
                (f.level[x], x)
            }
        };
        for (from, to) in [(0, 255), (3, 4), (17, 200), (100, 101), (255, 0)] {
            let p = f.path(from, to).unwrap();
            let mut descending = false;
            for w in p.windows(2) {
                let going_up = rank(w[1]) < rank(w[0]);
                assert!(
                    !(descending && going_up),
                    "{from}->{to} climbs after descending: {p:?}"
                );
                descending |= !going_up;
            }
        }
        // Intra-node traffic stays on NVLink.
        assert_eq!(f.path(0, 7).unwrap().len(), 3);
    }

    #[test]
    fn every_spine_of_a_fat_tree_carries_traffic_between_leaves() {
        // From 272 GPUs a spine has more trunks to switches than a leaf. Were it the root, every other
        // spine would sit below the leaves, and a climb to it a descent from the root: all traffic
        // between leaves would cross the root spine.
        for gpus in [256, 272, 1024] {
            let t = Topology::builtin(&format!("fat-tree-{gpus}")).unwrap();
            let f = Fabric::plan(&t, &[]).unwrap();
            let node = |name: &str| t.nodes.iter().position(|n| n.name == name).unwrap();
            assert!(t.nodes[f.roots[0]].name.starts_with("leaf"), "{gpus}");
            // GPU 32 hangs from leaf2, and leaf1 reaches it through each of the 16 spines.
            assert_eq!(f.routes[node("leaf1")][32].len(), 16, "{gpus}");
        }
    }

    #[test]
    fn a_failed_trunk_is_routed_around() {
        let t = Topology::builtin("dgx-h100").unwrap();
        let f = Fabric::plan(&t, &[]).unwrap();
        let (trunk, _) = f.ports[0][0];
        let g = Fabric::plan(&t, &[trunk]).unwrap();
        assert_eq!(g.routes[0][3].len(), 3);
        assert!(!g.routes[0][3].contains(0));
    }

    /// A fabric in parts that no trunk joins gets a root in each part of several switches, routes
    /// within each part, none between them, and still cannot deadlock; so does one that a failure cuts.
    #[test]
    fn each_part_of_a_fabric_is_routed_on_its_own() {
        let t = Topology::builtin("fat-tree-32").unwrap();
        let alone = Fabric::plan(&t, &[]).unwrap();
        let two = Fabric::plan(&t.twice(), &[]).unwrap();
        let offset = t.nodes.len();
        assert_eq!(two.roots, vec![alone.roots[0], alone.roots[0] + offset]);
        let (first, second): (Vec<usize>, Vec<usize>) = (0..64).partition(|&id| id < 32);
        assert_eq!((two.unreachable(&first), two.unreachable(&second)), (None, None));
        assert_eq!(two.unreachable(&[3, 40, 5]), Some((3, 40)));
        for (id, x) in (0..32).map(|id| (id, alone.gpus[id])) {
            assert_eq!(
                two.routes[x][id], alone.routes[x][id],
                "the first part routes as alone"
            );
        }
        assert_eq!(two.dependencies().cycle, None);

        // Every trunk between leaf 0 and the spines failed: the leaf and its GPUs are a part on their own.
        let leaf = t.node_named("leaf0").unwrap();
        let up: Vec<usize> = (0..alone.port_count(leaf))
            .filter(|&p| t.nodes[alone.peer(leaf, p).0].kind == NodeKind::Switch)
            .map(|p| alone.ports[leaf][p].0)
            .collect();
        let cut = Fabric::plan(&t, &up).unwrap();
        let (below, others): (Vec<usize>, Vec<usize>) =
            (0..32).partition(|&id| alone.trunks_between(alone.gpus[id], leaf).next().is_some());
        assert!(below.len() > 1 && below.len() < 32, "{below:?}");
        assert_eq!((cut.unreachable(&below), cut.unreachable(&others)), (None, None));
        assert!(cut.unreachable(&[below[0], others[0]]).is_some());
        assert_eq!(cut.dependencies().cycle, None);
    }

    #[test]
    fn a_cycle_is_found_exactly_when_there_is_one() {
        // 0 -> 1 -> 2 -> 0, with a tail 3 -> 0 and a branch 1 -> 4.
        let cyclic = vec![vec![1], vec![4, 2], vec![0], vec![0], vec![]];
        let cycle = find_cycle(&cyclic).unwrap();
        assert_eq!(cycle.len(), 3);
        for (k, &v) in cycle.iter().enumerate() {
            assert!(cyclic[v].contains(&cycle[(k + 1) % 3]), "{cycle:?}");
        }
        // The same without 2 -> 0, and a diamond: no cycle.
        assert_eq!(find_cycle(&[vec![1], vec![4, 2], vec![], vec![0], vec![]]), None);
        assert_eq!(find_cycle(&[vec![1, 2], vec![3], vec![3], vec![]]), None);
        assert_eq!(find_cycle(&[vec![0]]), Some(vec![0]));
    }

    #[test]
    fn the_routes_of_every_builtin_fabric_cannot_deadlock() {
        for name in Topology::BUILTINS {
            let f = Fabric::plan(&Topology::builtin(name).unwrap(), &[]).unwrap();
            let d = f.dependencies();
            assert_eq!(d.cycle, None, "{name}");
            assert!(
                d.channels > 0 && d.dependencies > 0 || name.starts_with("mesh"),
                "{name}: {d:?}"
            );
        }
        // Nor after a failure between the root (a leaf) and a spine.
        let t = Topology::builtin("fat-tree-256").unwrap();
        let f = Fabric::plan(&t, &[]).unwrap();
        let root = f.roots[0];
        let to_spine = (0..f.port_count(root))
            .find(|&p| t.nodes[f.peer(root, p).0].kind == NodeKind::Switch)
            .unwrap();
        let spine_trunk = f.ports[root][to_spine].0;
        assert_eq!(
            Fabric::plan(&t, &[spine_trunk]).unwrap().dependencies().cycle,
            None
        );
    }

    #[test]
    fn routes_round_a_ring_of_switches_one_way_are_caught() {
        // Four switches in a ring, a GPU on each. Routed the short way round clockwise only (not
        // up*/down*), packets for the GPU two switches on wait on each other's channels in a cycle.
        let mut text = String::new();
        for k in 0..4 {
            text += &format!("[[node]]\nname = \"gpu{k}\"\nkind = \"gpu\"\n");
        }
        for k in 0..4 {
            text += &format!("[[node]]\nname = \"sw{k}\"\nkind = \"switch\"\n");
        }
        for k in 0..4 {
            text += &format!("[[link]]\na = \"gpu{k}\"\nb = \"sw{k}\"\ngbps = 25.0\n");
            text += &format!(
                "[[link]]\na = \"sw{k}\"\nb = \"sw{}\"\ngbps = 25.0\n",
                (k + 1) % 4
            );
        }
        let t = Topology::from_toml(&text).unwrap();
        let mut f = Fabric::plan(&t, &[]).unwrap();
        assert_eq!(f.dependencies().cycle, None, "up*/down* breaks the ring");
        let switch = |k: usize| 4 + k % 4;
        let port_to =
            |f: &Fabric, x: usize, y: usize| (0..f.port_count(x)).find(|&p| f.peer(x, p).0 == y).unwrap();
        for dest in 0..4 {
            for k in 0..4 {
                let x = switch(k);
                let next = if k == dest { dest } else { switch(k + 1) };
                f.routes[x][dest] = PortSet::single(port_to(&f, x, next));
            }
        }
        let cycle = f.dependencies().cycle.expect("a cycle round the ring");
        assert_eq!(cycle.len(), 4, "{cycle:?}");
        assert!(
            cycle.iter().all(|&(x, _)| x >= 4),
            "switch-to-switch channels: {cycle:?}"
        );
    }

    /// A replan reprograms live switches: after each single write of its program, no route names a port
    /// that the new plan takes out of it (`docs/spec.md` section 5: the half that removes ports first).
    #[test]
    fn a_replan_never_leaves_a_route_naming_a_port_it_removes() {
        use switch_fw::switch::Switch;
        // Six switches in a ring. sw0 has its trunk to sw5 on port 0, 40 GPUs on ports 1 to 40 and its
        // trunk to sw1 on port 41; sw1 to sw5 have a GPU each. sw0, the root, reaches gpu40 on sw1 over
        // port 41, and with that trunk failed round the ring over port 0: a route from the high half to
        // the low one.
        let mut text = String::new();
        for k in 0..6 {
            text += &format!("[[node]]\nname = \"sw{k}\"\nkind = \"switch\"\n");
        }
        for g in 0..45 {
            text += &format!("[[node]]\nname = \"gpu{g}\"\nkind = \"gpu\"\n");
        }
        let mut link =
            |a: String, b: String| text += &format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\ngbps = 25.0\n");
        link("sw5".into(), "sw0".into());
        for g in 0..40 {
            link(format!("gpu{g}"), "sw0".into());
        }
        for k in 0..5 {
            link(format!("sw{k}"), format!("sw{}", k + 1));
        }
        for g in 40..45 {
            link(format!("gpu{g}"), format!("sw{}", g - 39));
        }
        let t = Topology::from_toml(&text).unwrap();
        let f = Fabric::plan(&t, &[]).unwrap();
        let (sw0, sw1) = (t.node_named("sw0").unwrap(), t.node_named("sw1").unwrap());
        assert_eq!(f.peer(sw0, 41).0, sw1);
        let g = f.replan(&t, &[f.ports[sw0][41].0]).unwrap();
        assert_eq!(
            (f.routes[sw0][40], g.routes[sw0][40]),
            (PortSet::single(41), PortSet::single(0))
        );
        // Every switch, programmed with the first plan, takes the second's writes one by one.
        let mut switches: Vec<Option<Box<Switch<64, 16, 1>>>> = (0..t.nodes.len())
            .map(|x| {
                (t.nodes[x].kind == NodeKind::Switch).then(|| {
                    let mut core = Box::<Switch<64, 16, 1>>::default();
                    core.identity = crate::discover::identity_of(&t, x, f.port_count(x)).unwrap();
                    core
                })
            })
            .collect();
        for &(x, address, value) in &f.program {
            switches[x]
                .as_mut()
                .unwrap()
                .write_register(address, value)
                .unwrap();
        }
        let mut moved = 0;
        for &(x, address, value) in &g.program {
            let core = switches[x].as_mut().unwrap();
            core.write_register(address, value).unwrap();
            if address < regs::PARTITIONS {
                let id = (address / 8) as usize;
                let leaving = f.routes[x][id].0 & !g.routes[x][id].0;
                let route = core.routes.get(id as u16);
                assert_eq!(
                    route.0 & leaving,
                    0,
                    "after writing {address:#x}, {}'s route to {id} is {route:?}, leaving {leaving:#x}",
                    t.nodes[x].name
                );
                moved += usize::from(leaving != 0 && address % 8 == 0);
            }
        }
        assert!(moved > 0, "routes changed");
        for (x, core) in switches.iter().enumerate() {
            if let Some(core) = core {
                for id in 0..g.gpus.len() {
                    assert_eq!(core.routes.get(id as u16), g.routes[x][id], "{}", t.nodes[x].name);
                }
            }
        }
    }
}
