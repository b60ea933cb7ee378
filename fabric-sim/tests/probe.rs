//! The reachability probe: partitions programmed by the fabric manager isolate GPUs wherever a switch
//! stands between them.

use fabric_sim::probe::{self, ProbeReport, PROBE_TIME};
use fabric_sim::topology::Topology;

fn probe(topology: &Topology, failed: &[usize], seed: u64) -> Result<ProbeReport, String> {
    probe::probe(topology, failed, seed, PROBE_TIME)
}

fn split(name: &str, first: std::ops::Range<usize>, partition: u8) -> Topology {
    let mut t = Topology::builtin(name).unwrap();
    for g in first {
        t.set_partition(&format!("gpu{g}"), partition).unwrap();
    }
    t
}

#[test]
fn with_one_partition_every_gpu_reaches_every_other() {
    let r = probe(&Topology::builtin("dgx-h100").unwrap(), &[], 1).unwrap();
    assert_eq!((r.gpus, r.partitions, r.sent), (8, 1, 56));
    assert_eq!((r.same_pairs, r.same_delivered), (56, 56));
    assert_eq!((r.cross_pairs, r.partition_drops, r.wrong), (0, 0, 0));
    assert!(r.finished && r.isolated(), "{r:?}");
}

#[test]
fn nvswitches_drop_and_count_every_packet_between_partitions() {
    for topology in ["dgx-h100", "dgx-a100"] {
        let r = probe(&split(topology, 0..4, 1), &[], 1).unwrap();
        assert_eq!(r.partitions, 2);
        assert_eq!((r.same_pairs, r.same_delivered), (24, 24), "{topology}");
        assert_eq!((r.cross_pairs, r.cross_delivered), (32, 0), "{topology}");
        assert_eq!(
            r.partition_drops, 32,
            "{topology}: each dropped once, at the first switch"
        );
        assert!(r.isolated(), "{topology}: {r:?}");
    }
    // Three partitions, one of a single GPU, on a fabric with a trunk failed.
    let mut t = split("dgx-h100", 0..3, 1);
    t.set_partition("gpu7", 2).unwrap();
    let r = probe(&t, &[0], 2).unwrap();
    assert_eq!((r.partitions, r.same_pairs, r.cross_pairs), (3, 6 + 12, 56 - 18));
    assert!(r.isolated(), "{r:?}");
}

#[test]
fn partitions_hold_across_a_fat_tree() {
    // The two halves of a 32-GPU fat tree: packets between them would cross leaves and spines.
    let r = probe(&split("fat-tree-32", 0..16, 3), &[], 1).unwrap();
    assert_eq!(
        (r.cross_pairs, r.partition_drops, r.cross_delivered),
        (512, 512, 0)
    );
    assert_eq!(r.same_delivered, r.same_pairs);
    assert!(r.isolated(), "{r:?}");
}

#[test]
fn a_probe_cut_short_proves_nothing() {
    let t = split("dgx-h100", 0..4, 1);
    let r = probe::probe(&t, &[], 1, link_phy::time::Duration::from_ns(500)).unwrap();
    assert!(!r.finished && !r.isolated(), "{r:?}");
}

#[test]
fn gpus_joined_directly_are_not_isolated() {
    // No switch stands between the GPUs of a mesh: partitions there are a fabric manager's wish only,
    // and the probe says so.
    let r = probe(&split("mesh4", 0..2, 1), &[], 1).unwrap();
    assert_eq!((r.cross_pairs, r.cross_delivered, r.partition_drops), (8, 8, 0));
    assert_eq!(r.leaks.len(), 8);
    assert!(
        r.leaks.contains(&(0, 2)) && r.leaks.contains(&(3, 1)),
        "{:?}",
        r.leaks
    );
    assert!(!r.isolated());
}
