//! `linkctl fabric`: what the fabric manager makes of a topology: what its discovery of the (simulated)
//! hardware finds and how that differs from the topology, trunks, endpoint IDs, up*/down* levels, route
//! tables, partitions, the register writes that program the switches, a check that its routes cannot
//! deadlock, and optionally a probe of what the switches let through.

use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use fabric_sim::collective::PACKET_BYTES;
use fabric_sim::discover::{
    check, discover, node_id, Check, Discovery, FoundNode, NodeType, Wiring, MAX_HOPS,
};
use fabric_sim::manager::{gang, sets_partition, Dependencies, DrainCut, Fabric, Trunk};
use fabric_sim::probe::{probe, ProbeReport, PROBE_TIME};
use fabric_sim::run::{collective_talks, ring_orders, Algo};
use fabric_sim::topology::{check_node_name, NodeKind, Topology};
use serde_json::json;

use crate::check::ensure_once;
use crate::sim::{load_topology, named_gpus, TopologyArg};

/// Exit status when discovery finds the fabric wired otherwise than the topology says, no route joins
/// two GPUs of a partition, the routes could deadlock, the probe finds the partitions not kept or
/// does not finish, or the manager refuses a drain.
const EXIT_WRONG: u8 = 3;

#[derive(Args, Debug)]
pub struct FabricArgs {
    #[command(flatten)]
    pub topology: TopologyArg,
    /// Put GPUs in a partition (0 to 255; all start in 0), e.g. `1:gpu4,gpu5,gpu6,gpu7` or `1:gpu4..gpu7`:
    /// the switches drop packets between partitions (repeatable)
    #[arg(long, value_name = "P:GPU,GPU,...")]
    pub partition: Vec<String>,
    /// What is really cabled, if not what --topology says (a name or TOML file, as --topology): the
    /// manager discovers it and reports every difference, and programs nothing if there is any (its
    /// partitions, if it has any, must be the topology's: the manager programs those)
    #[arg(long, value_name = "TOPOLOGY")]
    pub hardware: Option<String>,
    /// Take the link (all ganged links) between two nodes of the hardware down, e.g. `gpu0:nvswitch1`:
    /// discovery finds it down and the routes avoid it (repeatable)
    #[arg(long, value_name = "A:B")]
    pub fail_link: Vec<String>,
    /// Take one of the links ganged between two nodes of the hardware down, e.g. `gpu0:nvswitch0` (as often
    /// as given; the last link takes the trunk down): discovery reports the trunk degraded and the routes
    /// still use it (repeatable)
    #[arg(long, value_name = "A:B")]
    pub degrade_link: Vec<String>,
    /// Drain a switch, as for maintenance, e.g. `nvswitch1`: the manager routes around its live links, or
    /// refuses if it is the only path left between two GPUs of a partition (exit status 3); in the order
    /// given, each after those before it (repeatable)
    #[arg(long, value_name = "SWITCH")]
    pub drain_switch: Vec<String>,
    /// Print every node discovery found: its ID, the topology's name for it, its type, its ports and the
    /// directed route (the ports to leave through, from the first GPU, or from the first of its part of
    /// the fabric when no live link joins that to the first GPU's) that reaches it
    #[arg(long)]
    pub discovery: bool,
    /// Print every switch's route table, and every GPU's: the ports it sends on towards each other GPU (of
    /// those on a shortest path, the ones whose wire latency is under twice the least: a fat tree's GPU
    /// reaches the GPUs of its node through its NVSwitches, not its leaf switch)
    #[arg(long)]
    pub routes: bool,
    /// Print the register writes that program the switches, in order (the register map is in
    /// docs/spec.md section 5)
    #[arg(long)]
    pub registers: bool,
    /// Send a packet from every GPU to every other that a route joins, through the simulated fabric, and
    /// report what arrived, within and across partitions
    #[arg(long)]
    pub probe: bool,
    /// Seed of the probe's simulation (default 1; only with --probe)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print one JSON object instead of the tables
    #[arg(long)]
    pub json: bool,
}

/// `P:GPU,GPU,...` as (partition, the list of GPUs).
fn parse_partition(s: &str) -> anyhow::Result<(u8, &str)> {
    let usage = || {
        format!("bad --partition {s:?}: expected P:GPU,GPU,... with P from 0 to 255, e.g. 1:gpu4,gpu5 or 1:gpu4..gpu7")
    };
    let (p, names) = s.split_once(':').with_context(usage)?;
    let p: u8 = p.trim().parse().ok().with_context(usage)?;
    if names.split(',').any(|n| n.trim().is_empty()) {
        bail!(usage());
    }
    Ok((p, names))
}

pub fn run(args: FabricArgs) -> anyhow::Result<ExitCode> {
    // Nothing else is random: a seed without the probe would be ignored.
    if args.seed.is_some() && !args.probe {
        bail!("--seed is the probe's: give --probe too");
    }
    let mut topology = args.topology.load()?;
    let hardware = match &args.hardware {
        Some(file) => {
            let hardware = load_topology("--hardware", file)?;
            check_no_partitions(&hardware, &topology, file)?;
            hardware
        }
        None => topology.clone(),
    };
    // A GPU put in two partitions (or twice in one) is a mistake, not a case for the last to win.
    let mut placed: std::collections::BTreeMap<usize, u8> = std::collections::BTreeMap::new();
    for spec in &args.partition {
        let (p, list) = parse_partition(spec)?;
        for x in named_gpus(&topology, list, "--partition")? {
            let name = topology.nodes[x].name.clone();
            match placed.insert(x, p) {
                Some(before) if before == p => bail!("--partition names {name} twice in partition {p}"),
                Some(before) => bail!("--partition names {name} in partitions {before} and {p}"),
                None => {}
            }
            topology.set_partition(&name, p).map_err(anyhow::Error::msg)?;
        }
    }
    let (down, lost) = hardware_faults(&hardware, &args)?;
    // What the manager finds, and what it makes of it: it plans only a fabric wired as the topology says,
    // leaving out the trunks it found down.
    let mut wiring = Wiring::new(&hardware, &down, &lost).map_err(anyhow::Error::msg)?;
    let discovery = discover(&mut wiring).map_err(anyhow::Error::msg)?;
    let found = check(&discovery, &topology);
    let (expected_trunks, _) = gang(&topology);
    let home = &hardware.nodes[hardware.gpus()[0]].name;
    let discovered = Discovered {
        topology: &topology,
        home,
        discovery: &discovery,
        check: &found,
        list: args.discovery,
        trunks: &expected_trunks,
    };
    if !found.matches() {
        if args.json {
            let out = json!({ "topology": topology.name, "discovery": discovered.json() });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            discovered.print();
            println!("# the fabric is not as the topology says: nothing programmed");
        }
        return Ok(ExitCode::from(EXIT_WRONG));
    }
    let failed = found.left_out();
    let mut fabric = Fabric::plan(&topology, &failed).map_err(anyhow::Error::msg)?;
    let drains = plan_drains(&topology, &fabric, &failed, &args.drain_switch)?;
    let drained: Vec<usize> = drains.iter().flat_map(|d| d.trunks.iter().copied()).collect();
    // What the routes leave out: the trunks found down, and those of the switches drained.
    let mut left_out = failed.clone();
    if !drained.is_empty() {
        left_out.extend(&drained);
        left_out.sort_unstable();
        fabric = Fabric::plan(&topology, &left_out).map_err(anyhow::Error::msg)?;
    }
    // Partitions with GPUs that no route joins: a failure, or the cabling, split them.
    let split: Vec<(u8, (usize, usize))> = (topology.partition_groups().into_iter())
        .filter_map(|(p, gpus)| fabric.unreachable(&gpus).map(|pair| (p, pair)))
        .collect();
    // A ring collective on every GPU sends only between each ring's neighbours, so it runs on a fabric
    // split for other traffic (GPUs cabled in a loop), as `linkctl sim` does.
    let ring_joined = {
        let n = fabric.gpus.len();
        collective_talks(Algo::Ring, &ring_orders(&fabric, n), n)
            .is_some_and(|pairs| fabric.unrouted(&pairs).is_none())
    };
    let dependencies = fabric.dependencies();
    let report = if args.probe {
        Some(probe(&topology, &left_out, args.seed.unwrap_or(1), PROBE_TIME).map_err(anyhow::Error::msg)?)
    } else {
        None
    };
    let view = View {
        discovered,
        topology: &topology,
        fabric: &fabric,
        failed: &failed,
        drains: &drains,
        split: &split,
        ring_joined,
        dependencies: &dependencies,
        probe: report.as_ref(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view.json(&args))?);
    } else {
        view.print(&args);
    }
    let wrong = dependencies.cycle.is_some()
        || !split.is_empty()
        || report.as_ref().is_some_and(|r| !r.isolated())
        || drains.iter().any(|d| d.refused.is_some());
    Ok(if wrong {
        ExitCode::from(EXIT_WRONG)
    } else {
        ExitCode::SUCCESS
    })
}

/// A `--drain-switch` as the fabric manager took it.
struct DrainOutcome {
    switch: usize,
    /// The live trunks at the switch's ports, which the routes now leave out: none if the drain was
    /// refused, or the switch had no live trunk (its links down, or drained).
    trunks: Vec<usize>,
    /// Why the manager refused the drain, if it did: the switch stays in service.
    refused: Option<String>,
}

/// The drains `switches` (names) in order, each with the trunks found down (`failed`, by index into
/// `fabric`'s trunks) and those of the drains before it left out, refused as the simulator's manager
/// refuses one ([`Fabric::drain_cut`]) if it would cut a partition.
fn plan_drains(
    topology: &Topology,
    fabric: &Fabric,
    failed: &[usize],
    switches: &[String],
) -> anyhow::Result<Vec<DrainOutcome>> {
    let groups = topology.partition_groups();
    let gpu_sets: Vec<&[usize]> = groups.iter().map(|(_, gpus)| gpus.as_slice()).collect();
    let mut left_out = failed.to_vec();
    let (mut named, mut drains) = (Vec::new(), Vec::new());
    for name in switches {
        check_node_name(name).map_err(|e| anyhow::anyhow!("bad --drain-switch {name:?}: {e}"))?;
        let x = topology
            .switch_named(name)
            .map_err(|e| anyhow::anyhow!("--drain-switch: {e}"))?;
        ensure_once(&mut named, x, "--drain-switch", || name.clone())?;
        let mut trunks: Vec<usize> = (fabric.ports[x].iter().map(|&(t, _)| t))
            .filter(|t| !left_out.contains(t))
            .collect();
        trunks.sort_unstable();
        trunks.dedup();
        let cut = fabric.drain_cut(topology, &left_out, &trunks, &gpu_sets, |gpus, f| {
            f.unreachable(gpus)
        });
        let refused = cut.map(|cut| match cut {
            DrainCut::Splits {
                group: g,
                pair: (a, b),
            } => format!(
                "partition {}: no route from {} to {} without it: it is the only path left between them",
                groups[g].0,
                fabric.gpu_name(topology, a),
                fabric.gpu_name(topology, b)
            ),
            DrainCut::Unplanned(why) => why,
        });
        if refused.is_some() {
            trunks.clear();
        }
        left_out.extend(&trunks);
        drains.push(DrainOutcome {
            switch: x,
            trunks,
            refused,
        });
    }
    Ok(drains)
}

/// The manager programs the partitions of the topology and `--partition`: a hardware file's would be
/// ignored, so they must be the topology's (as they are when one file is given for both).
fn check_no_partitions(hardware: &Topology, topology: &Topology, file: &str) -> anyhow::Result<()> {
    for n in hardware.nodes.iter().filter(|n| n.kind == NodeKind::Gpu) {
        let expected = topology
            .node_named(&n.name)
            .map_or(0, |x| topology.nodes[x].partition);
        if n.partition != expected {
            bail!(
                "--hardware {file:?}: {} is in partition {} there and in {expected} in the topology; \
                 partitions are not cabling but what the manager programs, from --topology and \
                 --partition only (leave node.partition out of the hardware's file)",
                n.name,
                n.partition
            );
        }
    }
    Ok(())
}

/// Pairs of nodes, each joined by a trunk.
type Pairs = Vec<(usize, usize)>;

/// The hardware's trunks that `--fail-link` takes down, and those that `--degrade-link` takes a link of
/// (once per time given), each as the pair of nodes it joins. A fault that would change nothing (given
/// twice, on a trunk already down, or more often than it has links) is refused: the user meant something.
fn hardware_faults(hardware: &Topology, args: &FabricArgs) -> anyhow::Result<(Pairs, Pairs)> {
    let (trunks, _) = gang(hardware);
    let ends = |t: &Trunk| (t.a.0, t.b.0);
    let names = |t: &Trunk| format!("{}:{}", hardware.node_name(t.a.0), hardware.node_name(t.b.0));
    let trunk = |spec: &str, flag: &str| -> anyhow::Result<usize> {
        let usage = || format!("bad {flag} {spec:?}: expected NODE:NODE, e.g. gpu0:nvswitch1");
        let (a, b) = spec.split_once(':').with_context(usage)?;
        if b.contains('@') {
            bail!("bad {flag} {spec:?}: this is the state from the start, so give no time (NODE:NODE)");
        }
        // As `sim`'s faults: a name no topology can have is refused before a message prints it.
        for name in [a, b].into_iter().filter(|name| !name.is_empty()) {
            check_node_name(name).map_err(|e| anyhow::anyhow!("bad {flag} {spec:?}: {e}"))?;
        }
        let node = |name: &str| {
            hardware
                .node_named(name)
                .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
        };
        let (x, y) = (node(a)?, node(b)?);
        trunks
            .iter()
            .position(|t| ends(t) == (x.min(y), x.max(y)))
            .with_context(|| format!("{flag}: {} has no link between {a} and {b}", hardware.name))
    };
    let mut down = Vec::new();
    for spec in &args.fail_link {
        let t = trunk(spec, "--fail-link")?;
        ensure_once(&mut down, t, "--fail-link", || names(&trunks[t]))?;
    }
    let mut lost = Vec::new();
    for spec in &args.degrade_link {
        let t = trunk(spec, "--degrade-link")?;
        if down.contains(&t) {
            bail!(
                "--degrade-link {spec}: --fail-link takes all the links of {} down already",
                names(&trunks[t])
            );
        }
        lost.push(t);
        let times = lost.iter().filter(|&&l| l == t).count();
        if times > trunks[t].links {
            bail!(
                "--degrade-link names {} {times} times, and {} links join them (the last taking the trunk down)",
                names(&trunks[t]),
                trunks[t].links
            );
        }
    }
    let pairs = |list: Vec<usize>| list.into_iter().map(|t| ends(&trunks[t])).collect();
    Ok((pairs(down), pairs(lost)))
}

/// What discovery found, with the names to report it by.
struct Discovered<'a> {
    topology: &'a Topology,
    /// Name of the node the manager runs beside.
    home: &'a str,
    discovery: &'a Discovery,
    check: &'a Check,
    /// List every node found.
    list: bool,
    /// The topology's trunks, for naming them.
    trunks: &'a [Trunk],
}

impl Discovered<'_> {
    /// The topology's name for the node with ID `id`, if it has one.
    fn name_of(&self, id: u64) -> Option<&str> {
        self.topology
            .nodes
            .iter()
            .find(|n| node_id(&n.name) == id)
            .map(|n| n.name.as_str())
    }

    /// `a:p - b:q` for trunk `t` of the topology.
    fn trunk_name(&self, t: usize) -> String {
        let trunk = &self.trunks[t];
        let end = |(x, p): (usize, usize)| format!("{}:{p}", self.topology.nodes[x].name);
        format!("{} - {}", end(trunk.a), end(trunk.b))
    }

    /// The GPUs after the first that discovery walked from: each the first of a part of the fabric that no
    /// live trunk joins to the parts found before.
    fn also_from(&self) -> Vec<String> {
        self.discovery
            .nodes
            .iter()
            .filter(|n| n.home > 0 && n.route.is_empty())
            .map(|n| self.called(n.id))
            .collect()
    }

    /// The GPU a found node's directed route starts from, by name.
    fn home_of(&self, node: &FoundNode) -> String {
        self.discovery
            .home(node.home)
            .map_or_else(|| "?".to_string(), |n| self.called(n.id))
    }

    /// The topology's name for the node with ID `id`, or the ID when the topology lacks it (the hardware
    /// has a node the topology does not).
    fn called(&self, id: u64) -> String {
        self.name_of(id)
            .map_or_else(|| format!("{id:016x}"), str::to_string)
    }

    fn kind(node: &FoundNode) -> &'static str {
        match node.kind {
            NodeType::Switch => "switch",
            NodeType::Endpoint => "gpu",
        }
    }

    fn print(&self) {
        let (d, c) = (self.discovery, self.check);
        let also = self.also_from();
        println!(
            "# discovery from {}{}: {} nodes and {} trunks up, in {} register reads; {} trunk(s) of the \
             topology down{}, {} node(s) not reached; {}",
            self.home,
            if also.is_empty() {
                String::new()
            } else {
                format!(
                    " and from {} (parts no live trunk joins to those found before, or past the last hop of \
                     their routes)",
                    also.join(", ")
                )
            },
            d.nodes.len(),
            d.trunks.len(),
            d.reads,
            c.down.len(),
            match c.unseen.len() {
                0 => String::new(),
                n => format!(" and {n} unreachable (an end not reached: left out)"),
            },
            c.unreached.len(),
            if c.matches() {
                "otherwise as the topology says"
            } else {
                "WIRED OTHERWISE THAN THE TOPOLOGY SAYS"
            }
        );
        for difference in &c.differences {
            println!("  differs: {difference}");
        }
        for &x in &c.unreached {
            println!("  not reached: {}", self.topology.nodes[x].name);
        }
        // A degraded trunk is routed over only when the fabric is otherwise as the topology says: if not,
        // nothing is programmed.
        let routed = if c.matches() { ", routed over" } else { "" };
        for d in &c.degraded {
            println!(
                "  degraded: trunk {} ({}): {} links up at {} MB/s{routed}",
                d.trunk,
                self.trunk_name(d.trunk),
                d.links,
                d.mbps
            );
        }
        if self.list {
            println!(
                "#\n# {:<16} {:<22} {:<6} {:>5} route",
                "node ID", "name", "kind", "ports"
            );
            for n in &d.nodes {
                let route: Vec<String> = n.route.iter().map(u8::to_string).collect();
                let from = if n.home > 0 {
                    format!(" from {}", self.home_of(n))
                } else {
                    String::new()
                };
                println!(
                    "  {:016x} {:<22} {:<6} {:>5} [{}]{from}",
                    n.id,
                    self.name_of(n.id).unwrap_or("?"),
                    Self::kind(n),
                    n.ports,
                    route.join(" ")
                );
            }
        }
    }

    fn json(&self) -> serde_json::Value {
        let (d, c) = (self.discovery, self.check);
        json!({
            "from": self.home,
            "also_from": self.also_from(),
            "nodes": d.nodes.len(),
            "trunks": d.trunks.len(),
            "reads": d.reads,
            "down": c.down,
            "unreachable": c.unseen,
            "degraded": c
                .degraded
                .iter()
                .map(|d| json!({ "trunk": d.trunk, "links": d.links, "mbps": d.mbps }))
                .collect::<Vec<_>>(),
            "unreached": c.unreached.iter().map(|&x| &self.topology.nodes[x].name).collect::<Vec<_>>(),
            "differences": c.differences,
            "matches": c.matches(),
            "found": self.list.then(|| {
                d.nodes
                    .iter()
                    .map(|n| {
                        json!({
                            "id": format!("{:016x}", n.id),
                            "name": self.name_of(n.id),
                            "kind": Self::kind(n),
                            "ports": n.ports,
                            "route": n.route,
                            "from": self.home_of(n),
                        })
                    })
                    .collect::<Vec<_>>()
            }),
        })
    }
}

/// What is reported, with the names to report it by.
struct View<'a> {
    discovered: Discovered<'a>,
    topology: &'a Topology,
    fabric: &'a Fabric,
    failed: &'a [usize],
    drains: &'a [DrainOutcome],
    /// Each partition whose GPUs no route joins, and its first such pair (endpoint IDs).
    split: &'a [(u8, (usize, usize))],
    /// Whether a ring collective on every GPU has a route between each ring's neighbours.
    ring_joined: bool,
    dependencies: &'a Dependencies,
    probe: Option<&'a ProbeReport>,
}

impl View<'_> {
    fn name(&self, x: usize) -> &str {
        &self.topology.nodes[x].name
    }

    /// The links trunk `i` has up and their GB/s, if discovery found it degraded.
    fn degraded(&self, i: usize) -> Option<(u8, f64)> {
        (self.discovered.check.degraded.iter())
            .find(|d| d.trunk == i)
            .map(|d| (d.links, d.mbps as f64 / 1000.0))
    }

    /// The most a channel of trunk `i` carries, if its credits hold it below its rate: at the rate of the
    /// links it has up (a degraded trunk's lower rate may be below its window's), and none for a trunk
    /// that carries nothing (failed, or unreachable).
    fn window_limit(&self, i: usize, packet_flits: usize) -> Option<f64> {
        let trunk = &self.fabric.trunks[i];
        match self.degraded(i) {
            _ if self.failed.contains(&i) || self.drained(i) => None,
            Some((links, _)) => trunk
                .with_links(usize::from(links))
                .window_limit_gbps(packet_flits),
            None => trunk.window_limit_gbps(packet_flits),
        }
    }

    /// Whether a drain took trunk `i` out of the routes.
    fn drained(&self, i: usize) -> bool {
        self.drains.iter().any(|d| d.trunks.contains(&i))
    }

    /// `node:port`.
    fn end(&self, (x, p): (usize, usize)) -> String {
        format!("{}:{p}", self.name(x))
    }

    fn endpoint(&self, x: usize) -> Option<usize> {
        self.fabric.gpus.iter().position(|&g| g == x)
    }

    fn switches(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.topology.nodes.len()).filter(|&x| self.topology.nodes[x].kind == NodeKind::Switch)
    }

    /// Whether trunk `i` was left out of the routes because discovery did not reach both ends.
    fn unseen(&self, i: usize) -> bool {
        self.discovered.check.unseen.contains(&i)
    }

    /// The register writes the manager can send: those to switches discovery reached (it has no directed
    /// route to the others).
    fn sent(&self) -> impl Iterator<Item = &(usize, u32, u32)> + '_ {
        let unreached = &self.discovered.check.unreached;
        self.fabric
            .program
            .iter()
            .filter(|(x, _, _)| !unreached.contains(x))
    }

    /// Register writes it sends, of them those that set partitions, and the writes the plan has for
    /// switches it cannot reach (not sent).
    fn writes(&self) -> (usize, usize, usize) {
        let sent = self.sent().count();
        let partition_writes = (self.sent())
            .filter(|&&(_, address, _)| sets_partition(address))
            .count();
        (sent, partition_writes, self.fabric.program.len() - sent)
    }

    /// A node's routes: (destination endpoint, ports); a GPU's to every GPU but itself.
    fn routes_of(&self, x: usize) -> impl Iterator<Item = (usize, Vec<usize>)> + '_ {
        self.fabric.routes[x]
            .iter()
            .enumerate()
            .filter(move |&(id, _)| self.fabric.gpus[id] != x)
            .map(|(id, set)| (id, set.iter().collect()))
    }

    /// The nodes whose route tables `--routes` shows: the switches, then the GPUs.
    fn routing_nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.switches().chain(self.fabric.gpus.iter().copied())
    }

    fn print(&self, args: &FabricArgs) {
        let (t, f, d) = (self.topology, self.fabric, self.dependencies);
        let switches = self.switches().count();
        let links: usize = f.trunks.iter().map(|t| t.links).sum();
        let (writes, partition_writes, unsent) = self.writes();
        println!(
            "# fabric {}: {} nodes, {} GPUs (endpoints 0 to {}) in {} partition(s), {switches} switch(es)",
            t.name,
            t.nodes.len(),
            f.gpus.len(),
            f.gpus.len() - 1,
            t.partition_count()
        );
        self.discovered.print();
        println!(
            "# {} trunks ganging {links} links{}; {}",
            f.trunks.len(),
            match (self.failed.len(), self.discovered.check.unseen.len()) {
                (0, _) => String::new(),
                (n, 0) => format!(" ({n} found down and left out)"),
                (n, unseen) => format!(" ({} found down and {unseen} unreachable, left out)", n - unseen),
            },
            match f.roots.as_slice() {
                [] => "no switch, so no up*/down* root".to_string(),
                [root] => format!("up*/down* root {}", self.name(*root)),
                roots => format!(
                    "{} up*/down* roots, one per part of the fabric that switch-to-switch trunks join: {}",
                    roots.len(),
                    roots.iter().map(|&x| self.name(x)).collect::<Vec<_>>().join(", ")
                ),
            }
        );
        println!(
            "# switch programming: {writes} register writes ({} for routes, {partition_writes} for \
             partitions){}",
            writes - partition_writes,
            if unsent > 0 {
                format!(
                    "; not the {unsent} for switches discovery did not reach, which no directed route \
                     leads to"
                )
            } else {
                String::new()
            }
        );
        // A path may exist, through switches the manager cannot program.
        let unreached = match self.discovered.check.unreached.len() {
            0 => String::new(),
            n => format!(
                " that discovery reached ({n} not reached: cut off by trunks down, or more than {MAX_HOPS} \
                 hops from every GPU)"
            ),
        };
        for &(p, (a, b)) in self.split {
            println!(
                "# PARTITION {p} SPLIT: no route from {} to {}: no path of live links through switches{unreached} \
                 joins them (GPUs do not forward)",
                self.name(f.gpus[a]),
                self.name(f.gpus[b])
            );
        }
        for d in self.drains {
            match (&d.refused, d.trunks.len()) {
                (Some(why), _) => println!(
                    "# DRAIN OF {} REFUSED, it stays in service: {why}",
                    self.name(d.switch)
                ),
                (None, 0) => println!(
                    "# drain of {}: nothing to do, every link at its ports is down or drained already",
                    self.name(d.switch)
                ),
                (None, n) => println!(
                    "# drain of {}: the routes go around its {n} trunk(s), which stay up",
                    self.name(d.switch)
                ),
            }
        }
        if !self.split.is_empty() && self.ring_joined && t.partition_count() == 1 {
            println!(
                "# ring collectives on all {} GPUs still run: routes join each ring's neighbours, the only \
                 GPUs a ring sends between (`linkctl sim --algo ring`)",
                f.gpus.len()
            );
        }
        match &d.cycle {
            None => println!(
                "# channel dependency graph: {} channels, {} dependencies, no cycle: the routes cannot \
                 deadlock",
                d.channels, d.dependencies
            ),
            Some(cycle) => {
                println!(
                "# channel dependency graph: {} channels, {} dependencies, CYCLE through {}: the routes can \
                 deadlock",
                d.channels,
                d.dependencies,
                cycle.iter().map(|&e| self.end(e)).collect::<Vec<_>>().join(" -> ")
            )
            }
        }
        println!(
            "#\n# {:<22} {:<6} {:>8} {:>9} {:>5} {:>5}",
            "node", "kind", "endpoint", "partition", "level", "ports"
        );
        for (x, node) in t.nodes.iter().enumerate() {
            let dash = || "-".to_string();
            let (endpoint, partition) = match node.kind {
                NodeKind::Gpu => (
                    self.endpoint(x).map_or_else(dash, |e| e.to_string()),
                    node.partition.to_string(),
                ),
                NodeKind::Switch => (dash(), dash()),
            };
            let kind = node.kind.name();
            let level = match f.level[x] {
                usize::MAX => dash(),
                l => l.to_string(),
            };
            println!(
                "  {:<22} {kind:<6} {endpoint:>8} {partition:>9} {level:>5} {:>5}",
                node.name,
                f.port_count(x)
            );
        }
        println!(
            "#\n# {:>5} {:<26} {:<26} {:>5} {:>8} {:>10} {:>8} format",
            "trunk", "end a", "end b", "links", "GB/s", "latency_ns", "BER"
        );
        let write_flits = t.flits_per_packet(PACKET_BYTES);
        for (i, trunk) in f.trunks.iter().enumerate() {
            let mut state = match self.degraded(i) {
                _ if self.unseen(i) => "  (unreachable: an end not reached, left out)".to_string(),
                _ if self.failed.contains(&i) => "  (failed)".to_string(),
                _ if self.drained(i) => "  (drained: up, left out of the routes)".to_string(),
                Some((links, gbps)) => format!("  (degraded: {links} links up, {gbps:.1} GB/s)"),
                None => String::new(),
            };
            if let Some(most) = self.window_limit(i, write_flits) {
                state += &format!("  (paced by its credits: at most {most:.1} GB/s a channel)");
            }
            println!(
                "  {i:>5} {:<26} {:<26} {:>5} {:>8.1} {:>10} {:>8} {}{state}",
                self.end(trunk.a),
                self.end(trunk.b),
                trunk.links,
                trunk.gbps,
                trunk.latency_ns,
                trunk.ber,
                trunk.format.name()
            );
        }
        if args.registers {
            println!("#\n# register writes: switch, address, value");
            for &(x, address, value) in self.sent() {
                println!("  {:<22} {address:#010x} {value:#010x}", self.name(x));
            }
        }
        if args.routes {
            for x in self.routing_nodes() {
                println!(
                    "#\n# routes of {} (destination: ports, and the node each leads to)",
                    self.name(x)
                );
                for (id, ports) in self.routes_of(x) {
                    let hops: Vec<String> = ports
                        .iter()
                        .map(|&p| format!("{p}->{}", self.name(f.peer(x, p).0)))
                        .collect();
                    println!("  {:<10} {}", self.name(f.gpus[id]), hops.join(" "));
                }
            }
        }
        if let Some(r) = self.probe {
            let unrouted = |pairs: u64| {
                if pairs > 0 {
                    format!(" ({pairs} joined by no route)")
                } else {
                    String::new()
                }
            };
            println!(
                "#\n# probe: {} packets; within partitions {} of {} pairs reached{}; across partitions {} of \
                 {} reached{}, {} dropped by switches; {} arrived wrong: {}",
                r.sent,
                r.same_delivered,
                r.same_pairs,
                unrouted(r.same_unrouted),
                r.cross_delivered,
                r.cross_pairs,
                unrouted(r.cross_unrouted),
                r.partition_drops,
                r.wrong,
                if !r.finished {
                    format!(
                        "DID NOT FINISH within {} us of simulated time: inconclusive",
                        PROBE_TIME.as_ps() / 1_000_000
                    )
                } else if r.isolated() {
                    "partitions kept".to_string()
                } else {
                    "PARTITIONS NOT KEPT".to_string()
                }
            );
            for &(s, d) in &r.leaks {
                println!(
                    "  leak: {} -> {} (no switch between them drops it)",
                    self.name(f.gpus[s]),
                    self.name(f.gpus[d])
                );
            }
        }
    }

    fn json(&self, args: &FabricArgs) -> serde_json::Value {
        let (t, f, d) = (self.topology, self.fabric, self.dependencies);
        let (writes, partition_writes, unsent) = self.writes();
        let nodes: Vec<_> = t
            .nodes
            .iter()
            .enumerate()
            .map(|(x, node)| {
                let gpu = node.kind == NodeKind::Gpu;
                json!({
                    "name": node.name,
                    "kind": node.kind.name(),
                    "endpoint": self.endpoint(x),
                    "partition": gpu.then_some(node.partition),
                    "level": (f.level[x] != usize::MAX).then_some(f.level[x]),
                    "ports": f.port_count(x),
                })
            })
            .collect();
        let end = |(x, p): (usize, usize)| json!({ "node": self.name(x), "port": p });
        let write_flits = t.flits_per_packet(PACKET_BYTES);
        let trunks: Vec<_> = f
            .trunks
            .iter()
            .enumerate()
            .map(|(i, trunk)| {
                // Unknown for a trunk discovery did not see.
                let links_up = match self.degraded(i) {
                    _ if self.unseen(i) => None,
                    _ if self.failed.contains(&i) => Some(0),
                    Some((links, _)) => Some(usize::from(links)),
                    None => Some(trunk.links),
                };
                json!({
                    "index": i,
                    "a": end(trunk.a),
                    "b": end(trunk.b),
                    "links": trunk.links,
                    "gbps": trunk.gbps,
                    "latency_ns": trunk.latency_ns,
                    "ber": trunk.ber,
                    "format": trunk.format.name(),
                    "failed": self.failed.contains(&i) && !self.unseen(i),
                    "drained": self.drained(i),
                    "unreachable": self.unseen(i),
                    "links_up": links_up,
                    "window_limit_gbps": self.window_limit(i, write_flits),
                })
            })
            .collect();
        let mut out = json!({
            "topology": t.name,
            "discovery": self.discovered.json(),
            "gpus": f.gpus.len(),
            "partitions": t.partition_count(),
            "root": f.roots.first().map(|&x| self.name(x)),
            "roots": f.roots.iter().map(|&x| self.name(x)).collect::<Vec<_>>(),
            "nodes": nodes,
            "trunks": trunks,
            "register_writes": writes,
            "partition_writes": partition_writes,
            "unsent_writes": unsent,
            "split": self.split.iter().map(|&(p, (a, b))| json!({
                "partition": p,
                "from": self.name(f.gpus[a]),
                "to": self.name(f.gpus[b]),
            })).collect::<Vec<_>>(),
            "ring_joined": self.ring_joined,
            "drains": self.drains.iter().map(|d| json!({
                "switch": self.name(d.switch),
                "trunks": d.trunks.len(),
                "refused": d.refused,
            })).collect::<Vec<_>>(),
            "dependencies": {
                "channels": d.channels,
                "dependencies": d.dependencies,
                "deadlock_free": d.cycle.is_none(),
                "cycle": d.cycle.as_ref().map(|c| c.iter().map(|&e| end(e)).collect::<Vec<_>>()),
            },
        });
        if args.registers {
            out["registers"] = self
                .sent()
                .map(|&(x, address, value)| {
                    json!({ "switch": self.name(x), "address": address, "value": value })
                })
                .collect::<Vec<_>>()
                .into();
        }
        if args.routes {
            out["routes"] = self
                .routing_nodes()
                .map(|x| {
                    let table: Vec<_> = self
                        .routes_of(x)
                        .map(|(id, ports)| {
                            let next: Vec<&str> = ports.iter().map(|&p| self.name(f.peer(x, p).0)).collect();
                            json!({ "destination": self.name(f.gpus[id]), "ports": ports, "next": next })
                        })
                        .collect();
                    // Keyed by what the node is: "switch" or "gpu".
                    let mut routes = json!({ "table": table });
                    routes[self.topology.nodes[x].kind.name()] = self.name(x).into();
                    routes
                })
                .collect::<Vec<_>>()
                .into();
        }
        if let Some(r) = self.probe {
            let pair = |&(s, d): &(usize, usize)| json!([self.name(f.gpus[s]), self.name(f.gpus[d])]);
            out["probe"] = json!({
                "sent": r.sent,
                "same_partition_pairs": r.same_pairs,
                "same_partition_delivered": r.same_delivered,
                "same_partition_unrouted": r.same_unrouted,
                "cross_partition_pairs": r.cross_pairs,
                "cross_partition_delivered": r.cross_delivered,
                "cross_partition_unrouted": r.cross_unrouted,
                "partition_drops": r.partition_drops,
                "wrong": r.wrong,
                "leaks": r.leaks.iter().map(pair).collect::<Vec<_>>(),
                "finished": r.finished,
                "isolated": r.isolated(),
            });
        }
        out
    }
}
