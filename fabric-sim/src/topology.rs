//! Fabric topologies: GPUs, switches and the links between them, with the parameters of the systems they
//! model. Built-in topologies carry their published figures; others come from a TOML file.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// An accelerator: an endpoint that sends and receives, never forwards.
    Gpu,
    /// A switch (NVSwitch, a PCIe switch, a network switch, a CPU's root complex): forwards.
    Switch,
}

impl NodeKind {
    /// The kind as a topology file spells it: `gpu` or `switch`.
    pub const fn name(self) -> &'static str {
        match self {
            NodeKind::Gpu => "gpu",
            NodeKind::Switch => "switch",
        }
    }
}

/// How 128-byte writes are framed on a link: how many 16-byte flits carry one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkFormat {
    /// This stack's format: one header flit and eight data flits (88.9% of the line rate).
    Openlink,
    /// NVLink 1.0-4.0 as published: a header flit, an address-extension flit and eight data flits (80%):
    /// "128-byte loads/stores 80% (header + extension flit)", NVIDIA Pascal whitepaper appendix A.
    NvlinkAe,
}

impl LinkFormat {
    /// Flits on the wire per 128-byte write.
    pub const fn flits_per_write(self) -> u64 {
        match self {
            LinkFormat::Openlink => 9,
            LinkFormat::NvlinkAe => 10,
        }
    }

    /// Name, as in TOML files.
    pub const fn name(self) -> &'static str {
        match self {
            LinkFormat::Openlink => "openlink",
            LinkFormat::NvlinkAe => "nvlink-ae",
        }
    }
}

/// A node of the fabric.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// What it is.
    pub kind: NodeKind,
    /// A GPU's partition (0 to 255; all start in 0): switches drop and count a packet between GPUs of
    /// different partitions. Always 0 for a switch.
    pub partition: u8,
}

/// One link (both directions) between two nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// One end: node index.
    pub a: usize,
    /// The other end.
    pub b: usize,
    /// Data rate of each direction, in GB/s (1e9 bytes), after line coding: what flits can use.
    pub gbps: f64,
    /// Propagation and pipeline latency of each direction, in nanoseconds.
    pub latency_ns: f64,
    /// Random bit error rate.
    pub ber: f64,
    /// How writes are framed.
    pub format: LinkFormat,
}

/// A fabric: nodes and links. A node's ports are numbered in the order of the links that attach to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// Name, for reports.
    pub name: String,
    /// One line on where the parameters come from.
    pub source: String,
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Links.
    pub links: Vec<Link>,
}

/// Where a link attaches: node and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct End {
    /// Node index.
    pub node: usize,
    /// Port of the node.
    pub port: usize,
}

/// A node name must be one the command line can take back: `--fail-link A:B@TIME`, `--gpus A,B` and
/// `--gpus A..B` split names at `:`, `@`, `,` and `..`; one the reports can print on their lines (no
/// control character: a line break, an escape); and one a VCD trace can hold as a scope name, a token that
/// does not start with `$` (its keywords, `$end` among them, do). The command line checks the names its
/// options give with it too.
pub fn check_node_name(name: &str) -> Result<(), String> {
    // A '.' at either end would make a run ambiguous: `a...b` is `a.`..`b` or `a`..`.b`.
    let bad = name.is_empty()
        || name.contains("..")
        || name.starts_with('.')
        || name.ends_with('.')
        || name
            .chars()
            .any(|c| matches!(c, ':' | '@' | ',') || c.is_whitespace() || c.is_control());
    if bad {
        return Err(format!(
            "node name {name:?}: a name is not empty, does not start or end with '.', and has no ':', '@', \
             ',', '..', white space (the command line splits names at those) or control character"
        ));
    }
    if name.starts_with('$') {
        return Err(format!(
            "node name {name:?}: a name does not start with '$' (a VCD trace of the links would read it as \
             one of its keywords, such as $end)"
        ));
    }
    // `--gpus 4` is a count and `--background-gpus rest` the GPUs not in the job: neither names a node.
    if name.parse::<usize>().is_ok() || name == "rest" {
        return Err(format!(
            "node name {name:?}: a name is not a number or \"rest\" (the command line reads those as a count \
             of GPUs and as the GPUs left over)"
        ));
    }
    Ok(())
}

impl Topology {
    /// The name of node `x`, for messages ("?" if there is none).
    pub fn node_name(&self, x: usize) -> &str {
        self.nodes.get(x).map_or("?", |n| n.name.as_str())
    }

    /// The index of the node called `name`.
    pub fn node_named(&self, name: &str) -> Result<usize, String> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| format!("{} has no node {name:?}", self.name))
    }

    /// The index of the switch called `name`: an error if there is no such node, or it is a GPU.
    pub fn switch_named(&self, name: &str) -> Result<usize, String> {
        let x = self.node_named(name)?;
        if self.nodes[x].kind != NodeKind::Switch {
            return Err(format!("{name} is not a switch"));
        }
        Ok(x)
    }

    /// Put GPU `name` in partition `partition`.
    pub fn set_partition(&mut self, name: &str, partition: u8) -> Result<(), String> {
        let x = self.node_named(name)?;
        let node = &mut self.nodes[x];
        if node.kind != NodeKind::Gpu {
            return Err(format!("{}: {name} is a switch; partitions are GPUs'", self.name));
        }
        node.partition = partition;
        Ok(())
    }

    /// Whether packets on its links carry NVLink's address-extension flit after the header (any link
    /// of that format makes every packet carry one).
    pub fn address_extension(&self) -> bool {
        self.links.iter().any(|l| l.format == LinkFormat::NvlinkAe)
    }

    /// Flits a write of `payload_bytes` takes on its links: the header, the address-extension flit if
    /// packets carry one, and the data.
    pub fn flits_per_packet(&self, payload_bytes: usize) -> usize {
        1 + usize::from(self.address_extension()) + payload_bytes.div_ceil(link_dl::flit::FLIT_LEN)
    }

    /// How many partitions its GPUs are in.
    pub fn partition_count(&self) -> usize {
        self.partitions_of(0..self.gpus().len())
    }

    /// How many partitions the GPUs numbered `gpus` (of [`Topology::gpus`]) are in.
    pub fn partitions_of(&self, gpus: impl IntoIterator<Item = usize>) -> usize {
        let nodes = self.gpus();
        let mut seen = [false; 256];
        for x in gpus.into_iter().filter_map(|g| nodes.get(g)) {
            seen[usize::from(self.nodes[*x].partition)] = true;
        }
        seen.iter().filter(|&&s| s).count()
    }

    /// The GPUs (numbered as in [`Topology::gpus`]: endpoint IDs) of each partition that has any.
    pub fn partition_groups(&self) -> Vec<(u8, Vec<usize>)> {
        let nodes = self.gpus();
        (0..=u8::MAX)
            .map(|p| {
                (
                    p,
                    (0..nodes.len())
                        .filter(|&g| self.nodes[nodes[g]].partition == p)
                        .collect(),
                )
            })
            .filter(|(_, gpus): &(u8, Vec<usize>)| !gpus.is_empty())
            .collect()
    }

    /// Indices of the GPUs, in order: GPU `i` of a collective is `gpus()[i]`.
    pub fn gpus(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&n| self.nodes[n].kind == NodeKind::Gpu)
            .collect()
    }

    /// For every link, its two ends (node, port).
    pub fn ends(&self) -> Vec<(End, End)> {
        let mut next_port = vec![0usize; self.nodes.len()];
        self.links
            .iter()
            .map(|l| {
                let a = End {
                    node: l.a,
                    port: next_port[l.a],
                };
                next_port[l.a] += 1;
                let b = End {
                    node: l.b,
                    port: next_port[l.b],
                };
                next_port[l.b] += 1;
                (a, b)
            })
            .collect()
    }

    /// Links ending at every node (its physical ports: 18 on an H100, 40 or 32 on a DGX H100 NVSwitch).
    pub fn ports(&self) -> Vec<usize> {
        let mut n = vec![0usize; self.nodes.len()];
        for l in &self.links {
            n[l.a] += 1;
            n[l.b] += 1;
        }
        n
    }

    /// Logical ports of every node: one per node it links to, as the links between two nodes are ganged
    /// into one trunk (a DGX H100 NVSwitch has 8, one to each GPU).
    pub fn trunk_ports(&self) -> Vec<usize> {
        let mut peers: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); self.nodes.len()];
        for l in &self.links {
            peers[l.a].insert(l.b);
            peers[l.b].insert(l.a);
        }
        peers.iter().map(BTreeSet::len).collect()
    }

    /// Two copies of the fabric that no link joins, the second's names prefixed `b-` (for tests of
    /// fabrics in parts).
    #[cfg(test)]
    pub(crate) fn twice(&self) -> Topology {
        let mut two = self.clone();
        let offset = self.nodes.len();
        two.nodes.extend(self.nodes.iter().map(|n| Node {
            name: format!("b-{}", n.name),
            ..n.clone()
        }));
        two.links.extend(self.links.iter().map(|l| Link {
            a: l.a + offset,
            b: l.b + offset,
            ..l.clone()
        }));
        two
    }

    /// The fabric with only the GPUs in `keep` (node indices), as a job sees it that runs on some GPUs of
    /// a system (CUDA_VISIBLE_DEVICES): the other GPUs and their links are left out, and so are switches
    /// left with no link. GPUs never forward, so what is left carries the same traffic as the whole
    /// fabric would with the others idle; only the endpoint IDs (and so the flow hash's choice among
    /// parallel paths) are numbered afresh. Names and partitions are kept.
    pub fn with_gpus(&self, keep: &[usize]) -> Result<Topology, String> {
        let all = self.gpus();
        if let Some(&x) = keep.iter().find(|&&x| !all.contains(&x)) {
            return Err(format!(
                "{}: {} (node {x}) is not a GPU",
                self.name,
                self.node_name(x)
            ));
        }
        // Every GPU is the fabric itself, not a part of it to be named as one.
        if all.iter().all(|g| keep.contains(g)) {
            return Ok(self.clone());
        }
        let mut kept: Vec<bool> = (0..self.nodes.len())
            .map(|x| self.nodes[x].kind == NodeKind::Switch || keep.contains(&x))
            .collect();
        let link_kept = |l: &Link, kept: &[bool]| kept[l.a] && kept[l.b];
        // Switches with no link left.
        let mut linked = vec![false; self.nodes.len()];
        for l in self.links.iter().filter(|l| link_kept(l, &kept)) {
            linked[l.a] = true;
            linked[l.b] = true;
        }
        for x in 0..self.nodes.len() {
            kept[x] &= self.nodes[x].kind == NodeKind::Gpu || linked[x];
        }
        let mut index = vec![usize::MAX; self.nodes.len()];
        let mut nodes = Vec::new();
        for (x, node) in self.nodes.iter().enumerate().filter(|&(x, _)| kept[x]) {
            index[x] = nodes.len();
            nodes.push(node.clone());
        }
        let links = self
            .links
            .iter()
            .filter(|l| link_kept(l, &kept))
            .map(|l| Link {
                a: index[l.a],
                b: index[l.b],
                ..l.clone()
            })
            .collect();
        // Named after what it keeps: `dgx-h100[gpu0,gpu1]`, or `fat-tree-256[32 of 256]` when long.
        let which = if keep.len() <= 8 {
            let mut sorted = keep.to_vec();
            sorted.sort_unstable();
            let names: Vec<&str> = sorted.iter().map(|&x| self.nodes[x].name.as_str()).collect();
            names.join(",")
        } else {
            format!("{} of {}", keep.len(), all.len())
        };
        let sub = Topology {
            name: format!("{}[{which}]", self.name),
            source: self.source.clone(),
            nodes,
            links,
        };
        sub.validate()?;
        Ok(sub)
    }

    /// The fabric two jobs share: the GPUs of `first` and of `second` (node indices; the two may overlap)
    /// and what links them (as [`Topology::with_gpus`] leaves it, or the whole fabric when they are all
    /// its GPUs), with its GPUs numbered so that `first`'s are GPUs `0..first.len()`, since a collective
    /// numbers its GPUs from 0. Every GPU keeps its links and its ports' order; only the endpoint IDs
    /// change. Returns the fabric and the GPU numbers of `second`'s GPUs in it, in `second`'s order.
    pub fn with_jobs(&self, first: &[usize], second: &[usize]) -> Result<(Topology, Vec<u16>), String> {
        let all = self.gpus();
        if let Some(&x) = first.iter().chain(second).find(|&&x| !all.contains(&x)) {
            return Err(format!(
                "{}: {} (node {x}) is not a GPU",
                self.name,
                self.node_name(x)
            ));
        }
        // The GPUs' places in the node list, in order, taken by `first`'s GPUs and then the others.
        let order = all
            .iter()
            .filter(|x| first.contains(x))
            .chain(all.iter().filter(|x| !first.contains(x)));
        let mut moved = self.clone();
        let mut new_index: Vec<usize> = (0..self.nodes.len()).collect();
        for (&place, &old) in all.iter().zip(order) {
            moved.nodes[place] = self.nodes[old].clone();
            new_index[old] = place;
        }
        for link in &mut moved.links {
            link.a = new_index[link.a];
            link.b = new_index[link.b];
        }
        let mut keep: Vec<usize> = first.iter().chain(second).map(|&x| new_index[x]).collect();
        keep.sort_unstable();
        keep.dedup();
        let shared = if keep.len() == all.len() {
            moved.validate()?;
            moved
        } else {
            moved.with_gpus(&keep)?
        };
        let numbers = shared.gpus();
        let second_numbers: Vec<u16> = second
            .iter()
            .filter_map(|&x| {
                let name = &self.nodes[x].name;
                numbers.iter().position(|&g| shared.nodes[g].name == *name)
            })
            .map(|g| g as u16)
            .collect();
        Ok((shared, second_numbers))
    }

    /// Check that the topology is something the simulator can run.
    pub fn validate(&self) -> Result<(), String> {
        // The manager's plan holds a route per node and GPU, and its discovery visits no more nodes.
        if self.nodes.len() > crate::discover::MAX_NODES {
            return Err(format!(
                "{}: {} nodes, more than the {} the fabric manager discovers",
                self.name,
                self.nodes.len(),
                crate::discover::MAX_NODES
            ));
        }
        if self.gpus().len() < 2 {
            return Err(format!("{}: a fabric needs at least two GPUs", self.name));
        }
        for l in &self.links {
            let link = format!(
                "{}: link {} - {}",
                self.name,
                self.node_name(l.a),
                self.node_name(l.b)
            );
            if l.a >= self.nodes.len() || l.b >= self.nodes.len() {
                return Err(format!("{link} joins a node that does not exist"));
            }
            if l.a == l.b {
                return Err(format!("{link} joins a node to itself"));
            }
            if !(MIN_GBPS..=MAX_TRUNK_GBPS).contains(&l.gbps) {
                return Err(format!(
                    "{link}: rate {} GB/s, not {MIN_GBPS} to {MAX_TRUNK_GBPS}",
                    number_text(l.gbps)
                ));
            }
            if !(0.0..=MAX_LATENCY_NS).contains(&l.latency_ns) {
                return Err(format!(
                    "{link}: latency {} ns, not 0 to {}",
                    number_text(l.latency_ns),
                    number_text(MAX_LATENCY_NS)
                ));
            }
            if !(0.0..=MAX_BER).contains(&l.ber) {
                return Err(format!(
                    "{link}: bit error rate {}, not 0 to {}",
                    number_text(l.ber),
                    number_text(MAX_BER)
                ));
            }
        }
        // Parallel links are ganged into one trunk, which frames packets one way and moves a 16-byte unit
        // in at least one picosecond.
        let mut trunks: BTreeMap<(usize, usize), (f64, usize)> = BTreeMap::new();
        let mut formats: BTreeMap<(usize, usize), LinkFormat> = BTreeMap::new();
        for l in &self.links {
            let ends = (l.a.min(l.b), l.a.max(l.b));
            let trunk = trunks.entry(ends).or_default();
            *trunk = (trunk.0 + l.gbps, trunk.1 + 1);
            if *formats.entry(ends).or_insert(l.format) != l.format {
                return Err(format!(
                    "{}: the links between {} and {} differ in format: the links of a trunk share one",
                    self.name, self.nodes[ends.0].name, self.nodes[ends.1].name
                ));
            }
        }
        if let Some((&(a, b), &(_, links))) = trunks.iter().find(|(_, &(_, links))| links > MAX_TRUNK_LINKS) {
            return Err(format!(
                "{}: {links} links between {} and {} (a trunk gangs 1 to {MAX_TRUNK_LINKS})",
                self.name, self.nodes[a].name, self.nodes[b].name
            ));
        }
        if let Some(((a, b), (gbps, _))) = trunks.into_iter().find(|&(_, (gbps, _))| gbps > MAX_TRUNK_GBPS) {
            return Err(format!(
                "{}: the links between {} and {} carry {gbps} GB/s together, above the {MAX_TRUNK_GBPS} GB/s \
                 the simulator can time (a 16-byte unit per picosecond)",
                self.name, self.nodes[a].name, self.nodes[b].name
            ));
        }
        for (n, &p) in self.trunk_ports().iter().enumerate() {
            if p > switch_fw::MAX_PORTS {
                return Err(format!(
                    "{}: node {} links to {p} nodes: a port (a trunk) each, and a node has at most {} ports",
                    self.name,
                    self.nodes[n].name,
                    switch_fw::MAX_PORTS
                ));
            }
        }
        if self.gpus().len() > switch_fw::MAX_ENDPOINTS {
            return Err(format!("{}: more than 1024 GPUs", self.name));
        }
        Ok(())
    }

    /// A built-in topology by name.
    pub fn builtin(name: &str) -> Option<Topology> {
        Some(match name {
            "mesh2" => mesh(2, 4),
            "mesh4" => mesh(4, 2),
            "dgx1-hcm" => dgx1_hcm(),
            "dgx-a100" => nvswitch("dgx-a100", 6, &[2, 2, 2, 2, 2, 2], DGX_A100_SOURCE),
            "dgx-h100" => nvswitch("dgx-h100", 4, &[5, 4, 4, 5], DGX_H100_SOURCE),
            "pcie8" => pcie8(),
            _ => {
                let digits = name.strip_prefix("fat-tree-")?;
                let gpus: usize = digits.parse().ok()?;
                // Spelled as the tree names itself: no sign, no leading zeros.
                if gpus.to_string() != digits {
                    return None;
                }
                fat_tree(gpus)?
            }
        })
    }

    /// The names of the built-in topologies.
    pub const BUILTINS: [&'static str; 7] = [
        "mesh2",
        "mesh4",
        "dgx1-hcm",
        "dgx-a100",
        "dgx-h100",
        "pcie8",
        "fat-tree-256",
    ];

    /// Parse a TOML description (see `docs/spec.md` section 6).
    pub fn from_toml(text: &str) -> Result<Topology, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            name: Option<String>,
            node: Vec<NodeEntry>,
            link: Vec<LinkEntry>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct NodeEntry {
            name: String,
            kind: NodeKind,
            partition: Option<u8>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct LinkEntry {
            a: String,
            b: String,
            count: Option<usize>,
            gbps: f64,
            latency_ns: Option<f64>,
            ber: Option<f64>,
            format: Option<LinkFormat>,
        }
        let file: File = toml::from_str(text).map_err(|e| {
            // On one line, as every error the tool prints: where, then what (the parser's own message
            // draws the line with a caret under it).
            let at = e.span().map(|span| {
                let before = text.get(..span.start).unwrap_or(text);
                let line = before.matches('\n').count() + 1;
                let column = before.chars().rev().take_while(|&c| c != '\n').count() + 1;
                format!("line {line}, column {column}: ")
            });
            format!(
                "bad topology file: {}{}",
                at.unwrap_or_default(),
                e.message().trim_end().replace('\n', "; ")
            )
        })?;
        // The name heads every report, one line each.
        if let Some(name) = &file.name {
            if name.trim().is_empty() || name.chars().any(char::is_control) {
                return Err(format!(
                    "topology name {name:?}: a name is not empty and has no control characters (such as a \
                     line break)"
                ));
            }
        }
        let mut index = BTreeMap::new();
        let mut nodes = Vec::new();
        for n in file.node {
            check_node_name(&n.name)?;
            if index.insert(n.name.clone(), nodes.len()).is_some() {
                return Err(format!("node {:?} is defined twice", n.name));
            }
            if n.kind == NodeKind::Switch && n.partition.is_some() {
                return Err(format!(
                    "node {:?}: a partition is a GPU's, not a switch's",
                    n.name
                ));
            }
            nodes.push(Node {
                name: n.name,
                kind: n.kind,
                partition: n.partition.unwrap_or(0),
            });
        }
        let mut links = Vec::new();
        for l in file.link {
            let find = |name: &str| {
                index
                    .get(name)
                    .copied()
                    .ok_or_else(|| format!("link to unknown node {name:?}"))
            };
            let (a, b) = (find(&l.a)?, find(&l.b)?);
            let count = l.count.unwrap_or(1);
            // Checked before the links are made: a trunk gangs at most this many anyway.
            if !(1..=MAX_TRUNK_LINKS).contains(&count) {
                return Err(format!(
                    "link {} - {}: count {count} (1 to {MAX_TRUNK_LINKS} parallel links)",
                    l.a, l.b
                ));
            }
            for _ in 0..count {
                links.push(Link {
                    a,
                    b,
                    gbps: l.gbps,
                    // `-0.0` is 0 (adding 0.0 makes it +0.0): the reports print it back, and a latency
                    // of -0 made a trunk window-limited ("at most -inf GB/s a channel").
                    latency_ns: l.latency_ns.unwrap_or(DEFAULT_LATENCY_NS) + 0.0,
                    ber: l.ber.unwrap_or(0.0) + 0.0,
                    format: l.format.unwrap_or(LinkFormat::Openlink),
                });
            }
        }
        let t = Topology {
            name: file.name.unwrap_or_else(|| "custom".into()),
            source: "a TOML file".into(),
            nodes,
            links,
        };
        t.validate()?;
        Ok(t)
    }
}

/// Longest topology file read, bytes (64 MiB): the largest fabric ([`crate::discover::MAX_NODES`] nodes,
/// each linked to 64 others) takes about a quarter of it, one entry per line.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Slowest link rate, GB/s (a unit every 16 microseconds).
pub const MIN_GBPS: f64 = 1e-3;
/// Most links a trunk gangs (the links between two nodes, however many entries of a file give them).
pub const MAX_TRUNK_LINKS: usize = 64;

/// Fastest trunk (parallel links together), GB/s: a 16-byte unit per picosecond, the simulator's tick.
pub const MAX_TRUNK_GBPS: f64 = 16_000.0;
/// Longest link latency, ns (one second).
pub const MAX_LATENCY_NS: f64 = 1e9;

/// A number as messages print it: as usual from 0.001 to 10^6, in scientific notation beyond (1e300, not
/// a 301-digit number; 1e-9, not 0.000000001), and 0 as 0.
pub fn number_text(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-3..1e6).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// Highest random bit error rate of a link. Above it most packets are hit (a 144-byte packet gets through
/// a link at 1e-3 one time in three) and go-back-N replays make a run's time grow exponentially with it: a
/// 64 KiB all-gather on DGX H100 took 0.4 s of wall time at 1e-3, 2.4 s at 2e-3 and 11 s at 3e-3.
pub const MAX_BER: f64 = 1e-3;

/// Latency of a link when none is given: a short board trace plus SerDes and link-layer pipelines.
pub const DEFAULT_LATENCY_NS: f64 = 100.0;
/// NVLink 2-4 data rate per link and direction, GB/s (REFERENCE.md: 25 GB/s per link per direction).
const NVLINK_GBPS: f64 = 25.0;

const DGX_A100_SOURCE: &str =
    "DGX A100: 8 A100, 6 NVSwitches, 12 NVLink3 links x 25 GB/s per GPU, 2 to each switch; \
    NVLink's published framing (header + address-extension flit per 128 B: 80%)";
const DGX_H100_SOURCE: &str =
    "DGX H100: 8 H100, 4 NVSwitches, 18 NVLink4 links x 25 GB/s per GPU, split 5/4/4/5; \
    NVLink's published framing (header + address-extension flit per 128 B: 80%)";

fn gpu(i: usize) -> Node {
    Node {
        name: format!("gpu{i}"),
        kind: NodeKind::Gpu,
        partition: 0,
    }
}

fn switch(name: String) -> Node {
    Node {
        name,
        kind: NodeKind::Switch,
        partition: 0,
    }
}

fn nvlink(a: usize, b: usize, format: LinkFormat) -> Link {
    Link {
        a,
        b,
        gbps: NVLINK_GBPS,
        latency_ns: DEFAULT_LATENCY_NS,
        ber: 0.0,
        format,
    }
}

/// `n` GPUs, every pair joined by `per_pair` links.
fn mesh(n: usize, per_pair: usize) -> Topology {
    let mut links = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            for _ in 0..per_pair {
                links.push(nvlink(a, b, LinkFormat::Openlink));
            }
        }
    }
    Topology {
        name: format!("mesh{n}"),
        source: format!("{n} GPUs directly connected, {per_pair} links x 25 GB/s between every pair (this stack's framing)"),
        nodes: (0..n).map(gpu).collect(),
        links,
    }
}

/// DGX-1 with V100: 8 GPUs in a hybrid cube-mesh of NVLink2 links, 6 per GPU, as `nvidia-smi topo -m`
/// shows it (NV1/NV2 = one or two links); pairs without NVLink talk through PCIe switches and the CPUs.
fn dgx1_hcm() -> Topology {
    const NV: [[u8; 8]; 8] = [
        [0, 1, 1, 2, 2, 0, 0, 0],
        [1, 0, 2, 1, 0, 2, 0, 0],
        [1, 2, 0, 2, 0, 0, 1, 0],
        [2, 1, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 1, 1, 2],
        [0, 2, 0, 0, 1, 0, 2, 1],
        [0, 0, 1, 0, 1, 2, 0, 2],
        [0, 0, 0, 1, 2, 1, 2, 0],
    ];
    let mut nodes: Vec<Node> = (0..8).map(gpu).collect();
    let mut links = Vec::new();
    for (a, row) in NV.iter().enumerate() {
        for (b, &count) in row.iter().enumerate().skip(a + 1) {
            for _ in 0..count {
                links.push(nvlink(a, b, LinkFormat::NvlinkAe));
            }
        }
    }
    // PCIe Gen3 x16 (about 12 GB/s usable each way): two GPUs per PCIe switch, two switches per CPU, the
    // two CPUs joined by QPI (modelled as one 19 GB/s link).
    let pcie = |a, b| Link {
        a,
        b,
        gbps: 12.0,
        latency_ns: 500.0,
        ber: 0.0,
        format: LinkFormat::NvlinkAe,
    };
    for s in 0..4 {
        nodes.push(switch(format!("pcie{s}")));
    }
    nodes.push(switch("cpu0".into()));
    nodes.push(switch("cpu1".into()));
    for g in 0..8 {
        links.push(pcie(g, 8 + g / 2));
    }
    for s in 0..4 {
        links.push(pcie(8 + s, 12 + s / 2));
    }
    links.push(Link {
        a: 12,
        b: 13,
        gbps: 19.2,
        latency_ns: 500.0,
        ber: 0.0,
        format: LinkFormat::NvlinkAe,
    });
    Topology {
        name: "dgx1-hcm".into(),
        source: "DGX-1 (V100): 8 GPUs, hybrid cube-mesh of 6 NVLink2 links x 25 GB/s each; PCIe Gen3 and QPI between the rest; NVLink's published framing (80%)".into(),
        nodes,
        links,
    }
}

/// 8 GPUs through `switches` NVSwitches, GPU links split `split` over them.
fn nvswitch(name: &str, switches: usize, split: &[usize], source: &str) -> Topology {
    let mut nodes: Vec<Node> = (0..8).map(gpu).collect();
    for s in 0..switches {
        nodes.push(switch(format!("nvswitch{s}")));
    }
    let mut links = Vec::new();
    for g in 0..8 {
        for (s, &n) in split.iter().enumerate() {
            for _ in 0..n {
                links.push(nvlink(g, 8 + s, LinkFormat::NvlinkAe));
            }
        }
    }
    Topology {
        name: name.into(),
        source: source.into(),
        nodes,
        links,
    }
}

/// 8 GPUs on PCIe Gen4 x16 (about 25 GB/s usable each way): four per PCIe switch, two switches under one
/// root complex.
fn pcie8() -> Topology {
    let mut nodes: Vec<Node> = (0..8).map(gpu).collect();
    nodes.push(switch("pcie0".into()));
    nodes.push(switch("pcie1".into()));
    nodes.push(switch("root".into()));
    let link = |a, b| Link {
        a,
        b,
        gbps: 25.0,
        latency_ns: 300.0,
        ber: 0.0,
        format: LinkFormat::NvlinkAe,
    };
    let mut links: Vec<Link> = (0..8).map(|g| link(g, 8 + g / 4)).collect();
    links.push(link(8, 10));
    links.push(link(9, 10));
    Topology {
        name: "pcie8".into(),
        source: "8 GPUs on PCIe Gen4 x16 (about 25 GB/s each way after 128b/130b and TLP overheads), two switches under one root".into(),
        nodes,
        links,
    }
}

/// GPUs a fat tree can have: whole leaves of 16, at least two, and at most 64 leaves, the ports of a
/// spine switch.
pub const FAT_TREE_GPUS: core::ops::RangeInclusive<usize> = 32..=1024;

/// `gpus / 8` DGX H100-like nodes (8 GPUs and 4 NVSwitches each) joined by a two-level fat tree of
/// 400 Gb/s (50 GB/s) ports: every GPU has one network port to a leaf switch of 16 GPUs (two nodes), and
/// every leaf one port to each of 16 spines, as many up as down, so the tree is non-blocking at any size:
/// `fat-tree-256` is 32 nodes, 16 leaves and 16 spines. `None` unless `gpus` is a multiple of 16 in
/// [`FAT_TREE_GPUS`].
fn fat_tree(gpus: usize) -> Option<Topology> {
    const PER_LEAF: usize = 16;
    const SPINES: usize = 16;
    if !FAT_TREE_GPUS.contains(&gpus) || gpus % PER_LEAF != 0 {
        return None;
    }
    let mut t = Topology {
        name: format!("fat-tree-{gpus}"),
        source: String::new(),
        nodes: Vec::new(),
        links: Vec::new(),
    };
    t.nodes.extend((0..gpus).map(gpu));
    for node in 0..gpus / 8 {
        let first_switch = t.nodes.len();
        for s in 0..4 {
            t.nodes.push(switch(format!("node{node}-nvswitch{s}")));
        }
        for g in 0..8 {
            for (s, &n) in [5usize, 4, 4, 5].iter().enumerate() {
                for _ in 0..n {
                    t.links
                        .push(nvlink(node * 8 + g, first_switch + s, LinkFormat::NvlinkAe));
                }
            }
        }
    }
    let leaf_count = gpus / PER_LEAF;
    let leaves = t.nodes.len();
    for l in 0..leaf_count {
        t.nodes.push(switch(format!("leaf{l}")));
    }
    let spines = t.nodes.len();
    for s in 0..SPINES {
        t.nodes.push(switch(format!("spine{s}")));
    }
    let net = |a, b| Link {
        a,
        b,
        gbps: 50.0,
        latency_ns: 500.0,
        ber: 0.0,
        format: LinkFormat::NvlinkAe,
    };
    for g in 0..gpus {
        t.links.push(net(g, leaves + g / PER_LEAF));
    }
    for l in 0..leaf_count {
        for s in 0..SPINES {
            t.links.push(net(leaves + l, spines + s));
        }
    }
    t.source = format!(
        "{} nodes of 8 H100-like GPUs (18 NVLink4 links to 4 NVSwitches each), one 400 Gb/s port per GPU into a {leaf_count}-leaf, {SPINES}-spine fat tree",
        gpus / 8
    );
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_have_their_published_shape() {
        for name in Topology::BUILTINS {
            let t = Topology::builtin(name).unwrap();
            t.validate().unwrap();
        }
        let h100 = Topology::builtin("dgx-h100").unwrap();
        assert_eq!(h100.gpus().len(), 8);
        assert!(h100.ports()[..8].iter().all(|&p| p == 18));
        assert_eq!(h100.ports()[8..], [40, 32, 32, 40]);
        let a100 = Topology::builtin("dgx-a100").unwrap();
        assert!(a100.ports()[..8].iter().all(|&p| p == 12));
        let dgx1 = Topology::builtin("dgx1-hcm").unwrap();
        assert!(
            dgx1.ports()[..8].iter().all(|&p| p == 7),
            "6 NVLink + 1 PCIe: {:?}",
            dgx1.ports()
        );
        let ft = Topology::builtin("fat-tree-256").unwrap();
        assert_eq!(ft.gpus().len(), 256);
        assert_eq!(ft.nodes.len(), 256 + 32 * 4 + 16 + 16);
    }

    #[test]
    fn some_gpus_keep_their_links_and_switches_left_with_none_go() {
        let h100 = Topology::builtin("dgx-h100").unwrap();
        let sub = h100.with_gpus(&[6, 0, 2, 4]).unwrap();
        assert_eq!(sub.name, "dgx-h100[gpu0,gpu2,gpu4,gpu6]");
        let names: Vec<&str> = sub.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names[..5], ["gpu0", "gpu2", "gpu4", "gpu6", "nvswitch0"]);
        assert!(sub.ports()[..4].iter().all(|&p| p == 18));
        assert_eq!(sub.ports()[4..], [20, 16, 16, 20]);
        assert!(h100.with_gpus(&[0, 8]).is_err(), "node 8 is a switch");
        assert!(h100.with_gpus(&[0]).is_err(), "one GPU is no fabric");
        // sw1 leads only to g2: without g2 it goes.
        let mut t = Topology::builtin("mesh2").unwrap();
        t.nodes = vec![gpu(0), gpu(1), gpu(2), switch("sw0".into()), switch("sw1".into())];
        let link = t.links[0].clone();
        t.links = [(0, 3), (1, 3), (2, 3), (2, 4)]
            .map(|(a, b)| Link { a, b, ..link.clone() })
            .to_vec();
        let sub = t.with_gpus(&[0, 1]).unwrap();
        assert_eq!(sub.nodes.len(), 3);
        assert_eq!((sub.links.len(), sub.links[1].a, sub.links[1].b), (2, 1, 2));
        assert_eq!(sub.name, format!("{}[gpu0,gpu1]", t.name));
        let many = Topology::builtin("fat-tree-256").unwrap();
        let first: Vec<usize> = many.gpus()[..32].to_vec();
        assert_eq!(many.with_gpus(&first).unwrap().name, "fat-tree-256[32 of 256]");
    }

    #[test]
    fn two_jobs_share_a_fabric_with_the_first_jobs_gpus_numbered_first() {
        let h100 = Topology::builtin("dgx-h100").unwrap();
        let (shared, second) = h100.with_jobs(&[4, 6, 5, 7], &[0, 1, 2, 3]).unwrap();
        assert_eq!(shared.name, "dgx-h100", "all its GPUs: the whole fabric");
        let names: Vec<&str> = shared
            .gpus()
            .iter()
            .map(|&g| shared.nodes[g].name.as_str())
            .collect();
        assert_eq!(
            names,
            ["gpu4", "gpu5", "gpu6", "gpu7", "gpu0", "gpu1", "gpu2", "gpu3"]
        );
        assert_eq!(second, [4, 5, 6, 7]);
        // Every GPU keeps its links, in its ports' order: the same switch behind each port.
        let peers = |t: &Topology, name: &str| -> Vec<String> {
            let x = t.node_named(name).unwrap();
            let mut peers = Vec::new();
            for l in &t.links {
                if l.a == x {
                    peers.push(t.nodes[l.b].name.clone());
                } else if l.b == x {
                    peers.push(t.nodes[l.a].name.clone());
                }
            }
            peers
        };
        for g in 0..8 {
            let name = format!("gpu{g}");
            assert_eq!(peers(&shared, &name), peers(&h100, &name), "{name}");
        }
        assert_eq!(shared.ports(), h100.ports());
        // Overlapping jobs on some GPUs: the rest is left out.
        let (shared, second) = h100.with_jobs(&[2, 3], &[3, 1]).unwrap();
        assert_eq!(shared.name, "dgx-h100[gpu2,gpu3,gpu1]");
        let names: Vec<&str> = shared
            .gpus()
            .iter()
            .map(|&g| shared.nodes[g].name.as_str())
            .collect();
        assert_eq!(names, ["gpu2", "gpu3", "gpu1"]);
        assert_eq!(second, [1, 2], "gpu3, then gpu1");
        assert!(h100.with_jobs(&[0, 1], &[8]).is_err(), "node 8 is a switch");
    }

    #[test]
    fn fat_trees_come_in_whole_leaves_up_to_a_spine_of_ports() {
        for gpus in (FAT_TREE_GPUS).step_by(16) {
            let t = Topology::builtin(&format!("fat-tree-{gpus}")).unwrap();
            t.validate().unwrap();
            assert_eq!(t.gpus().len(), gpus);
            let ports = t.ports();
            // Leaves: 16 GPUs down, one link to each of 16 spines up; spines: one link per leaf.
            let leaves = gpus + gpus / 8 * 4;
            assert!(ports[leaves..leaves + gpus / 16].iter().all(|&p| p == 32));
            assert!(ports[leaves + gpus / 16..].iter().all(|&p| p == gpus / 16));
        }
        for bad in [
            "fat-tree-16",
            "fat-tree-40",
            "fat-tree-1040",
            "fat-tree-",
            "fat-tree-x",
            "fat-tree-+256",
            "fat-tree-0256",
        ] {
            assert!(Topology::builtin(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn toml_round_trip_and_errors() {
        let t = Topology::from_toml(
            r#"
            name = "pair"
            node = [{ name = "a", kind = "gpu" }, { name = "b", kind = "gpu" }]
            link = [{ a = "a", b = "b", count = 2, gbps = 50.0, ber = 1e-9 }]
            "#,
        )
        .unwrap();
        assert_eq!((t.nodes.len(), t.links.len(), t.links[1].gbps), (2, 2, 50.0));
        assert!(Topology::from_toml("node = []\nlink = []").is_err());
        assert!(Topology::from_toml("name = 3").is_err());
        let unknown =
            "node = [{ name = \"a\", kind = \"gpu\" }]\nlink = [{ a = \"a\", b = \"z\", gbps = 1.0 }]";
        assert!(Topology::from_toml(unknown).unwrap_err().contains("unknown node"));
    }

    /// A link that is wrong is named by its ends, with what is wrong with it and the range it must be in.
    #[test]
    fn a_bad_link_is_named_with_what_is_wrong() {
        let pair = |link: &str| {
            format!(
                "[[node]]\nname = \"a\"\nkind = \"gpu\"\n[[node]]\nname = \"b\"\nkind = \"gpu\"\n[[link]]\n{link}\n"
            )
        };
        for (link, expected) in [
            (
                "a = \"a\"\nb = \"b\"\ngbps = 0",
                "custom: link a - b: rate 0 GB/s, not 0.001 to 16000",
            ),
            (
                "a = \"a\"\nb = \"b\"\ngbps = nan",
                "custom: link a - b: rate NaN GB/s",
            ),
            (
                "a = \"a\"\nb = \"b\"\ngbps = 1\nlatency_ns = -1",
                "custom: link a - b: latency -1 ns, not 0 to",
            ),
            (
                "a = \"a\"\nb = \"b\"\ngbps = 1\nber = 0.5",
                "custom: link a - b: bit error rate 0.5, not 0 to 0.001",
            ),
            (
                "a = \"a\"\nb = \"a\"\ngbps = 1",
                "custom: link a - a joins a node to itself",
            ),
        ] {
            let err = Topology::from_toml(&pair(link)).unwrap_err();
            assert!(err.starts_with(expected), "{link}: {err}");
        }
        // GPU b renamed: each name refused, and why.
        let renamed =
            |name: &str| pair("a = \"a\"\nb = \"b\"\ngbps = 1").replace("\"b\"", &format!("{name:?}"));
        for (names, why) in [
            // `--gpus a...b` would not say which of these it runs between.
            (&["a.", ".b"][..], "a name is not empty, does not start or end"),
            (&["9", "+4", "rest"], "a name is not a number or"),
            (&["$end", "$var"], "a name does not start with '$'"),
        ] {
            for name in names {
                let err = Topology::from_toml(&renamed(name)).unwrap_err();
                assert!(err.contains(&format!("node name {name:?}: {why}")), "{err}");
            }
        }
        // Elsewhere in a name, '$' is no keyword.
        assert!(Topology::from_toml(&renamed("b$end")).is_ok());
        // The topology's own name heads the reports.
        for name in ["", " ", "two\nlines"] {
            let err = Topology::from_toml(&format!(
                "name = {name:?}\n{}",
                pair("a = \"a\"\nb = \"b\"\ngbps = 1")
            ))
            .unwrap_err();
            assert!(
                err.starts_with(&format!("topology name {name:?}: a name is not empty")),
                "{err}"
            );
        }
    }

    /// A star of `gpus` GPUs on one switch, each joined to it by `entries` entries of `count` links.
    fn star(gpus: usize, count: usize, entries: usize) -> String {
        let mut text = String::from("[[node]]\nname = \"sw\"\nkind = \"switch\"\n");
        for g in 0..gpus {
            text += &format!("[[node]]\nname = \"g{g}\"\nkind = \"gpu\"\n");
        }
        for g in 0..gpus {
            for _ in 0..entries {
                text += &format!("[[link]]\na = \"g{g}\"\nb = \"sw\"\ncount = {count}\ngbps = 25.0\n");
            }
        }
        text
    }

    /// Nodes without a link still cost the plan a route to every GPU each: 200,000 switches alone in a
    /// 7.5 MB file had the manager allocate gigabytes (and abort) where the file deserved an error.
    #[test]
    fn more_nodes_than_discovery_visits_are_refused() {
        let most = crate::discover::MAX_NODES;
        let text = |switches: usize| {
            star(2, 1, 1)
                + &(0..switches)
                    .map(|s| format!("[[node]]\nname = \"x{s}\"\nkind = \"switch\"\n"))
                    .collect::<String>()
        };
        assert!(Topology::from_toml(&text(most - 3)).is_ok());
        let err = Topology::from_toml(&text(most - 2)).unwrap_err();
        assert!(
            err.contains(&format!("{} nodes, more than the {most}", most + 1)),
            "{err}"
        );
    }

    #[test]
    fn the_port_limit_counts_trunks_not_the_links_they_gang() {
        // 17 GPUs of 4 links each: 68 links but 17 ports at the switch (had been refused as 68 ports).
        let t = Topology::from_toml(&star(17, 4, 1)).unwrap();
        assert_eq!((t.ports()[0], t.trunk_ports()[0]), (68, 17));
        assert!(Topology::from_toml(&star(64, 1, 1)).is_ok());
        let err = Topology::from_toml(&star(65, 1, 1)).unwrap_err();
        assert!(err.contains("links to 65 nodes"), "{err}");
        // Two entries of 32 make one trunk of 64; of 33, one of 66, more than a trunk gangs.
        assert!(Topology::from_toml(&star(2, 32, 2)).is_ok());
        let err = Topology::from_toml(&star(2, 33, 2)).unwrap_err();
        assert!(err.contains("66 links between sw and g0"), "{err}");
    }

    /// A latency or bit error rate of -0 in a file is 0: it was kept as -0, which the reports printed as
    /// "-0", and a latency of -0 made the trunk window-limited (a channel "at most -inf GB/s").
    #[test]
    fn minus_zero_in_a_file_is_zero() {
        let text = star(2, 1, 1).replace("gbps = 25.0\n", "gbps = 25.0\nlatency_ns = -0.0\nber = -0.0\n");
        assert!(text.contains("latency_ns = -0.0"), "{text}");
        let t = Topology::from_toml(&text).unwrap();
        for l in &t.links {
            assert!(l.latency_ns == 0.0 && l.latency_ns.is_sign_positive(), "{l:?}");
            assert!(l.ber == 0.0 && l.ber.is_sign_positive(), "{l:?}");
        }
        let (trunks, _) = crate::manager::gang(&t);
        assert!(trunks.iter().all(|t| t.latency_ns.is_sign_positive()));
    }

    /// Entries between two nodes make one trunk whatever their rates and latencies (its rate their sum,
    /// its latency the largest), and must share a format: two formats had made two trunks between the
    /// same nodes, where every other rule counts one.
    #[test]
    fn entries_between_two_nodes_make_one_trunk_of_one_format() {
        let uneven =
            star(2, 2, 1) + "[[link]]\na = \"sw\"\nb = \"g0\"\ncount = 3\ngbps = 50.0\nlatency_ns = 1000\n";
        let t = Topology::from_toml(&uneven).unwrap();
        let (trunks, ports) = crate::manager::gang(&t);
        assert_eq!(ports[0].len(), 2, "the switch has a port per GPU");
        let g0 = &trunks[ports[0][0].0];
        assert_eq!((g0.links, g0.gbps, g0.latency_ns), (5, 200.0, 1000.0));
        let err = Topology::from_toml(&(uneven + "format = \"nvlink-ae\"\n")).unwrap_err();
        assert!(
            err.contains("the links between sw and g0 differ in format"),
            "{err}"
        );
    }
}
