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
use crate::discover::{check, discover, Wiring};
use crate::manager::{gang, Fabric};
use crate::probe::probe;
use crate::run::{run, Algo, Sweep};
use crate::topology::Topology;

/// A fuzz entry point and the name of its cargo-fuzz target.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz entry point, by the name of its cargo-fuzz target.
pub const TARGETS: &[Target] = &[("topology_toml", topology_toml)];

/// GPUs up to which a fabric is probed (a packet per pair).
const PROBED_GPUS: usize = 16;

/// Parses `data` as a topology file (`docs/spec.md` section 6). What parses validates; the fabric
/// manager plans it or says why not, and a plan routes every GPU to every other without a cycle in its
/// channel dependencies; discovery from the first GPU finds every node a GPU can reach, all of it as the
/// topology says; a small one is probed for 20 simulated microseconds and every packet is
/// accounted for (delivered within its partition, or across one only where no switch drops it); a 1 KiB
/// ring all-reduce
/// then runs on it for at most 20 simulated microseconds, or is refused for the memory the fabric would
/// take, without panicking, and a size it finishes checks out.
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
    for &node in &fabric.gpus {
        for (id, &other) in fabric.gpus.iter().enumerate() {
            assert!(
                other == node || !fabric.routes[node][id].is_empty(),
                "a planned fabric routes every GPU to every other"
            );
        }
    }
    assert_eq!(
        fabric.dependencies().cycle,
        None,
        "up*/down* routes cannot deadlock"
    );
    let found = discover(&mut Wiring::new(&topology, &[]).unwrap()).unwrap();
    let c = check(&found, &topology);
    assert!(c.matches(), "{:?}", c.differences);
    assert_eq!(found.nodes.len() + c.unreached.len(), topology.nodes.len());
    assert!(
        c.unreached.iter().all(|&x| !fabric.gpus.contains(&x)),
        "every GPU is routed to, so reached"
    );
    let (trunks, _) = gang(&topology);
    assert!(
        c.down.iter().all(|&t| c.unreached.contains(&trunks[t].a.0)),
        "only trunks of switches no GPU reaches are missed"
    );
    if fabric.gpus.len() <= PROBED_GPUS {
        if let Ok(r) = probe(&topology, &[], 1, Duration::from_us(20)) {
            // Every packet across partitions is delivered (no switch between) or dropped once.
            assert_eq!(r.wrong, 0, "no packet arrives at the wrong GPU or twice");
            assert!(r.cross_delivered + r.partition_drops <= r.cross_pairs, "{r:?}");
            if r.finished {
                assert_eq!(r.same_delivered, r.same_pairs, "{r:?}");
                assert_eq!(r.cross_delivered + r.partition_drops, r.cross_pairs, "{r:?}");
            }
        }
    }
    let sweep = Sweep {
        topology,
        kind: Kind::AllReduce,
        algo: Algo::Ring,
        min: 1024,
        max: 1024,
        seed: 1,
        ber: None,
        limit_per_size: Duration::from_us(20),
        faults: Vec::new(),
        pcap: None,
        vcd: None,
        buffer_bytes: crate::collective::CHANNEL_BUFFER_BYTES,
    };
    if let Ok(report) = run(&sweep, &mut |_| {}) {
        assert!(
            report.rows.iter().all(|r| r.wrong == 0 || r.busbw == 0.0),
            "a size that finished has the right data"
        );
    }
}
