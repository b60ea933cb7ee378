//! `--trunks N`: the fabric's busiest trunks, each way: how much of its rate its packets took, and what
//! held them up (replays). Where a collective's bandwidth goes, or which link a hot spot
//! saturates, shows here.

use fabric_sim::net::{DirectionLoad, TrunkLoad};
use fabric_sim::topology::Topology;
use link_phy::time::Duration;
use serde_json::{json, Value};

/// The `n` trunks of `loads` whose busier direction was busier, busiest first (ties in the fabric's
/// order).
fn busiest(loads: &[TrunkLoad], n: usize) -> Vec<&TrunkLoad> {
    let mut order: Vec<&TrunkLoad> = loads.iter().collect();
    order.sort_by(|x, y| y.busier().total_cmp(&x.busier()));
    order.truncate(n);
    order
}

/// The text's lines for the `n` busiest trunks (none for `n` 0) over `over`, which `period` names
/// ("from the first size's start to the end").
pub fn trunk_lines(
    loads: &[TrunkLoad],
    over: Duration,
    period: &str,
    n: usize,
    topology: &Topology,
) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "# Trunks, the busiest {} of {} (each way: the share of its rate that packets took over the {:.2} us \
         {period}; packets, replays):",
        n.min(loads.len()),
        loads.len(),
        over.as_ps() as f64 / 1e6
    )];
    for t in busiest(loads, n) {
        let way = |d: usize| {
            let l = &t.directions[d];
            format!(
                "{} {:.1}% ({} packets, {} replays)",
                direction_name(t, d, topology),
                100.0 * t.utilization(d),
                l.packets,
                l.replays
            )
        };
        lines.push(format!(
            "#   {}; {}; {} x {:.1} GB/s{}",
            way(0),
            way(1),
            t.links,
            t.gbps / t.links as f64,
            if t.up { "" } else { ", down" },
        ));
    }
    lines
}

/// `a->b`, the direction `d` of trunk `t` by its nodes' names.
fn direction_name(t: &TrunkLoad, d: usize, topology: &Topology) -> String {
    let name = |l: &DirectionLoad| topology.node_name(l.from.0).to_owned();
    format!("{}->{}", name(&t.directions[d]), name(&t.directions[1 - d]))
}

/// The JSON's `trunks`: the `n` busiest, each way.
pub fn trunks_json(loads: &[TrunkLoad], over: Duration, n: usize, topology: &Topology) -> Value {
    let way = |t: &TrunkLoad, d: usize| {
        let l = &t.directions[d];
        json!({
            "from": topology.node_name(l.from.0),
            "to": topology.node_name(t.directions[1 - d].from.0),
            "utilization": t.utilization(d),
            "packets": l.packets,
            "packet_flits": l.packet_flits,
            "control_flits": l.control_flits,
            "replays": l.replays,
        })
    };
    json!({
        "over_us": over.as_ps() as f64 / 1e6,
        "of": loads.len(),
        "busiest": busiest(loads, n)
            .into_iter()
            .map(|t| json!({
                "links": t.links,
                "gbps": t.gbps,
                "up": t.up,
                "directions": [way(t, 0), way(t, 1)],
            }))
            .collect::<Vec<_>>(),
    })
}
