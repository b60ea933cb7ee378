//! Sweeps of a collective over message sizes, as nccl-tests runs them: one fabric, one collective after
//! another, every result checked, times and bandwidths reported.

use std::time::Instant as WallClock;

use link_dl::DlConfig;
use link_phy::time::Instant;

use crate::collective::{Check, Kind, Ring, SwitchReduce};
use crate::net::{App, Net};
use crate::topology::{LinkFormat, NodeKind, Topology};

/// How a collective is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    /// A pipelined ring (NCCL's ring).
    Ring,
    /// All-reduce in the switches (NVLink SHARP, NCCL's NVLS).
    SwitchReduce,
}

impl Algo {
    /// Name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring",
            Algo::SwitchReduce => "switch-reduce",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The fabric.
    pub topology: Topology,
    /// The collective.
    pub kind: Kind,
    /// The algorithm.
    pub algo: Algo,
    /// Smallest and largest message, bytes; sizes double from one to the other.
    pub min: u64,
    /// Largest message.
    pub max: u64,
    /// Seed of data and errors.
    pub seed: u64,
    /// If set, the bit error rate of every link.
    pub ber: Option<f64>,
    /// Give up on one size after this much simulated time.
    pub limit_per_size: link_phy::time::Duration,
}

/// One size's result, as a row of nccl-tests' table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Message size, bytes.
    pub bytes: u64,
    /// Elements (4-byte integers).
    pub count: u64,
    /// Simulated time, microseconds.
    pub time_us: f64,
    /// Algorithm bandwidth: bytes / time, GB/s.
    pub algbw: f64,
    /// Bus bandwidth: algbw times the collective's factor, GB/s.
    pub busbw: f64,
    /// Packets whose data was wrong, plus one if the collective did not finish.
    pub wrong: u64,
    /// Packets delivered to GPUs while it ran.
    pub packets: u64,
}

/// A whole sweep's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Rows, smallest size first.
    pub rows: Vec<Row>,
    /// GPUs.
    pub gpus: usize,
    /// Packets delivered to GPUs, all sizes.
    pub packets: u64,
    /// Wall-clock seconds the simulation took.
    pub wall_seconds: f64,
    /// Packets simulated per wall-clock second.
    pub packets_per_s: f64,
    /// Whether every result buffer checked out.
    pub verified: bool,
    /// Mean of the rows' bus bandwidths (as nccl-tests' "Avg bus bandwidth").
    pub avg_busbw: f64,
}

/// The sizes of a sweep: `min`, doubling, up to `max`.
pub fn sizes(min: u64, max: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = min.max(4);
    while s <= max {
        v.push(s);
        s = s.saturating_mul(2);
    }
    v
}

/// A ring order for the GPUs: a cycle over direct GPU-to-GPU links when there is one (as NCCL builds its
/// rings on NVLink meshes), else the GPUs in order (through switches every order is as good).
pub fn ring_order(net: &Net) -> Vec<usize> {
    let f = net.fabric();
    let n = f.gpus.len();
    let direct =
        |a: usize, b: usize| (0..f.port_count(f.gpus[a])).any(|p| f.peer(f.gpus[a], p).0 == f.gpus[b]);
    let mut path = vec![0usize];
    let mut used = vec![false; n];
    used[0] = true;
    fn extend(
        path: &mut Vec<usize>,
        used: &mut [bool],
        n: usize,
        direct: &dyn Fn(usize, usize) -> bool,
    ) -> bool {
        if path.len() == n {
            return direct(path[n - 1], path[0]);
        }
        let last = path[path.len() - 1];
        for next in 0..n {
            if !used[next] && direct(last, next) {
                used[next] = true;
                path.push(next);
                if extend(path, used, n, direct) {
                    return true;
                }
                path.pop();
                used[next] = false;
            }
        }
        false
    }
    if n <= 16 && extend(&mut path, &mut used, n, &direct) {
        path
    } else {
        (0..n).collect()
    }
}

/// Run the sweep. `progress(done, total)` is called after each size.
pub fn run(sweep: &Sweep, progress: &mut dyn FnMut(usize, usize)) -> Result<Report, String> {
    let mut topology = sweep.topology.clone();
    if let Some(ber) = sweep.ber {
        for l in &mut topology.links {
            l.ber = ber;
        }
    }
    if sweep.algo == Algo::SwitchReduce && sweep.kind != Kind::AllReduce {
        return Err("switch-reduce is an all-reduce algorithm".into());
    }
    let mut net = Net::new(&topology, &[], DlConfig::default(), sweep.seed)?;
    let extension = topology.links.iter().any(|l| l.format == LinkFormat::NvlinkAe);
    let gpus = net.fabric().gpus.len();
    if sweep.algo == Algo::SwitchReduce {
        let switches_behind_every_gpu = net.fabric().gpus.iter().all(|&g| {
            (0..net.fabric().port_count(g))
                .all(|p| topology.nodes[net.fabric().peer(g, p).0].kind == NodeKind::Switch)
        });
        if !switches_behind_every_gpu {
            return Err(format!(
                "switch-reduce needs every GPU link to end at a switch, which {} does not have",
                topology.name
            ));
        }
        net.configure_nvls(extension)?;
    }
    let order = ring_order(&net);
    let sizes = sizes(sweep.min, sweep.max);
    let started = WallClock::now();
    let mut rows = Vec::new();
    for (k, &bytes) in sizes.iter().enumerate() {
        let f = net.fabric();
        let position: Vec<usize> = {
            let mut p = vec![0; gpus];
            for (i, &g) in order.iter().enumerate() {
                p[g] = i;
            }
            p
        };
        let next_of = |g: usize| order[(position[g] + 1) % gpus];
        let mut app: Box<dyn Collective> = match sweep.algo {
            Algo::Ring => {
                let ports = (0..gpus)
                    .map(|g| {
                        (0..f.port_count(f.gpus[g]))
                            .map(|p| f.routes[f.gpus[g]][next_of(g)].contains(p))
                            .collect()
                    })
                    .collect();
                Box::new(Ring::new(
                    sweep.kind,
                    bytes,
                    order.clone(),
                    ports,
                    extension,
                    sweep.seed ^ bytes,
                ))
            }
            Algo::SwitchReduce => {
                let ports = (0..gpus).map(|g| vec![true; f.port_count(f.gpus[g])]).collect();
                Box::new(SwitchReduce::new(bytes, ports, extension, sweep.seed ^ bytes))
            }
        };
        let start = net.now();
        let delivered_before = net.stats().packets_delivered;
        let done = net.run(
            app.as_app(),
            Instant(start.as_ps() + sweep.limit_per_size.as_ps()),
        );
        let check = app.check();
        let time_us = (net.now().as_ps() - start.as_ps()) as f64 / 1e6;
        let algbw = if time_us > 0.0 {
            bytes as f64 / time_us / 1e3
        } else {
            0.0
        };
        rows.push(Row {
            bytes,
            count: bytes / 4,
            time_us,
            algbw,
            busbw: algbw * sweep.kind.bus_factor(gpus),
            wrong: check.wrong + u64::from(!done),
            packets: net.stats().packets_delivered - delivered_before,
        });
        progress(k + 1, sizes.len());
        if !done {
            break;
        }
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let packets = rows.iter().map(|r| r.packets).sum();
    let verified = rows.len() == sizes.len() && rows.iter().all(|r| r.wrong == 0);
    let avg_busbw = if rows.is_empty() {
        0.0
    } else {
        rows.iter().map(|r| r.busbw).sum::<f64>() / rows.len() as f64
    };
    Ok(Report {
        rows,
        gpus,
        packets,
        wall_seconds,
        packets_per_s: packets as f64 / wall_seconds.max(1e-9),
        verified,
        avg_busbw,
    })
}

/// A collective as the runner sees it.
trait Collective {
    fn as_app(&mut self) -> &mut dyn App;
    fn check(&self) -> Check;
}

impl Collective for Ring {
    fn as_app(&mut self) -> &mut dyn App {
        self
    }
    fn check(&self) -> Check {
        Ring::check(self)
    }
}

impl Collective for SwitchReduce {
    fn as_app(&mut self) -> &mut dyn App {
        self
    }
    fn check(&self) -> Check {
        SwitchReduce::check(self)
    }
}
