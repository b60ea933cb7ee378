//! `linkctl fabric` as a user runs it: the fabric manager's plan, its deadlock check, partitions and the
//! probe, in JSON and as tables, and refusals.

mod common;

use common::{assert_refused, gpu_loop, json, linkctl, topology_file, two_stars};

#[test]
fn dgx_h100_is_planned_deadlock_free_and_its_tables_are_complete() {
    let v = json(&["fabric"], &["--topology", "dgx-h100", "--routes"]);
    assert_eq!(v["gpus"], 8);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 12);
    assert_eq!(v["trunks"].as_array().unwrap().len(), 32);
    assert_eq!(v["trunks"][0]["links"], 5);
    assert_eq!(v["dependencies"]["deadlock_free"], true);
    assert!(v["dependencies"]["cycle"].is_null());
    // Two route registers per destination on each of the 4 switches, no partitions.
    assert_eq!(
        (v["register_writes"].as_u64(), v["partition_writes"].as_u64()),
        (Some(64), Some(0))
    );
    let routes = v["routes"].as_array().unwrap();
    // The 4 switches' tables, then the 8 GPUs': each GPU sends to another through all 4 NVSwitches.
    assert_eq!(routes.len(), 12);
    for (table, gpu) in routes[4..].iter().zip(0..) {
        assert_eq!(table["gpu"], format!("gpu{gpu}"));
        let entries = table["table"].as_array().unwrap();
        assert_eq!(entries.len(), 7, "gpu{gpu}: every GPU but itself");
        for entry in entries {
            assert_eq!(
                entry["ports"],
                serde_json::json!([0, 1, 2, 3]),
                "gpu{gpu}: {entry}"
            );
        }
    }
    // Each NVSwitch reaches GPU 5 straight through its port 5.
    for table in &routes[..4] {
        assert!(table["switch"].as_str().unwrap().starts_with("nvswitch"));
        let entry = &table["table"][5];
        assert_eq!(entry["destination"], "gpu5");
        assert_eq!(entry["ports"], serde_json::json!([5]));
        assert_eq!(entry["next"], serde_json::json!(["gpu5"]));
    }
    assert!(v.get("probe").is_none(), "only with --probe");
}

#[test]
fn partitions_are_programmed_and_the_probe_sees_them_kept() {
    let v = json(
        &["fabric"],
        &[
            "--partition",
            "1:gpu4,gpu5,gpu6,gpu7",
            "--partition",
            "2:gpu0",
            "--probe",
        ],
    );
    assert_eq!(v["partitions"], 3);
    assert_eq!(v["nodes"][4]["partition"], 1);
    assert_eq!(v["nodes"][0]["partition"], 2);
    assert!(v["nodes"][8]["partition"].is_null(), "a switch has none");
    // 5 GPUs not in partition 0, on each of 4 switches.
    assert_eq!(v["partition_writes"], 20);
    let p = &v["probe"];
    assert_eq!(p["sent"], 56);
    assert_eq!(
        (
            p["same_partition_pairs"].as_u64(),
            p["same_partition_delivered"].as_u64()
        ),
        (Some(18), Some(18))
    );
    assert_eq!(p["cross_partition_pairs"], 38);
    assert_eq!(p["cross_partition_delivered"], 0);
    assert_eq!(p["partition_drops"], 38);
    assert_eq!(p["isolated"], true);
}

#[test]
fn the_register_writes_are_listed_in_order() {
    let v = json(&["fabric"], &["--partition", "1:gpu7", "--registers"]);
    let writes = v["registers"].as_array().unwrap();
    assert_eq!(writes.len(), 4 * (16 + 1));
    // Per switch: the routes (two words per endpoint), then gpu7's partition (docs/spec.md section 5).
    assert_eq!(writes[0]["switch"], "nvswitch0");
    assert_eq!(
        (writes[0]["address"].as_u64(), writes[0]["value"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(writes[16]["address"], 0x0001_0000 + 4 * 7);
    assert_eq!(writes[16]["value"], 1);
    assert_eq!(writes[17]["switch"], "nvswitch1");
}

#[test]
fn a_mesh_cannot_keep_partitions_and_the_exit_status_says_so() {
    let out = linkctl(
        &["fabric"],
        &["--topology", "mesh4", "--partition", "1:gpu0,gpu1", "--probe"],
    );
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("across partitions 8 of 8 reached"), "{text}");
    assert!(text.contains("PARTITIONS NOT KEPT"), "{text}");
    assert!(text.contains("leak: gpu0 -> gpu2"), "{text}");
}

#[test]
fn a_failed_link_is_planned_around() {
    let v = json(
        &["fabric"],
        &["--fail-link", "gpu0:nvswitch0", "--routes", "--probe"],
    );
    let failed: Vec<_> = v["trunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["failed"] == true)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["a"]["node"], "gpu0");
    // Found down by discovery, not told: the trunk the routes leave out is the one discovery reports.
    assert_eq!(v["discovery"]["down"], serde_json::json!([failed[0]["index"]]));
    assert_eq!(v["discovery"]["trunks"], 31);
    // nvswitch0 no longer reaches GPU 0 directly: it has no way down to it at all (GPUs never forward).
    assert_eq!(v["routes"][0]["table"][0]["ports"], serde_json::json!([]));
    assert_eq!(v["probe"]["same_partition_delivered"], 56);
}

/// `--drain-switch` asks what a maintenance drain would do: the routes go around a drained switch's
/// links, which stay up, and the manager refuses (exit status 3) a drain whose switch is the only path
/// left between GPUs of a partition, as the simulator's manager does.
#[test]
fn drained_switches_are_routed_around_and_the_only_path_left_is_refused() {
    let v = json(
        &["fabric"],
        &["--drain-switch", "nvswitch1", "--routes", "--probe"],
    );
    assert_eq!(
        v["drains"],
        serde_json::json!([{"switch": "nvswitch1", "trunks": 8, "refused": null}])
    );
    let trunks = v["trunks"].as_array().unwrap();
    let drained: Vec<_> = trunks.iter().filter(|t| t["drained"] == true).collect();
    assert_eq!(drained.len(), 8);
    assert!(drained
        .iter()
        .all(|t| t["b"]["node"] == "nvswitch1" && t["failed"] == false));
    // Every GPU sends on its three other ports, and the probe still reaches every pair.
    for table in &v["routes"].as_array().unwrap()[4..] {
        for entry in table["table"].as_array().unwrap() {
            assert_eq!(entry["ports"], serde_json::json!([0, 2, 3]), "{table}");
        }
    }
    assert_eq!(v["probe"]["same_partition_delivered"], 56);
    // All four planes: three drained, the last refused and still routed over.
    let mut args = vec!["fabric"];
    for switch in ["nvswitch0", "nvswitch1", "nvswitch2", "nvswitch3"] {
        args.extend(["--drain-switch", switch]);
    }
    let out = linkctl(&args, &["--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let drains = v["drains"].as_array().unwrap();
    assert_eq!(drains.iter().filter(|d| d["refused"].is_null()).count(), 3, "{v}");
    let why = drains[3]["refused"].as_str().unwrap();
    assert!(why.starts_with("partition 0: no route from gpu0 to gpu"), "{why}");
    assert_eq!(
        v["split"],
        serde_json::json!([]),
        "the refused switch keeps the GPUs joined"
    );
    let text = String::from_utf8(linkctl(&args, &[]).stdout).unwrap();
    assert!(
        text.contains("# DRAIN OF nvswitch3 REFUSED, it stays in service: partition 0: no route from gpu0"),
        "{text}"
    );
    assert!(text.contains("# drain of nvswitch2: the routes go around its 8 trunk(s), which stay up"));
    // A drain counts the links found down: with gpu0's link to nvswitch3 down, nvswitch0 is all that
    // joins gpu0 once the other two planes are drained.
    let mut args = vec!["fabric", "--fail-link", "gpu0:nvswitch3"];
    for (switch, status) in [("nvswitch1", 0), ("nvswitch2", 0), ("nvswitch0", 3)] {
        args.extend(["--drain-switch", switch]);
        let out = linkctl(&args, &[]);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(status), "{switch}: {text}");
        assert_eq!(
            text.contains("# DRAIN OF nvswitch0 REFUSED"),
            status == 3,
            "{text}"
        );
    }
}

/// On a fat tree a GPU reaches the GPUs of its node in two hops through its NVSwitches or through its
/// leaf switch; its routes, as `--routes` shows them, take the NVSwitches, and the leaf only out of the
/// node.
#[test]
fn a_fat_tree_gpus_routes_stay_in_its_node_through_the_nvswitches() {
    let v = json(&["fabric"], &["--topology", "fat-tree-64", "--routes"]);
    let routes = v["routes"].as_array().unwrap();
    let gpu0 = routes.iter().find(|r| r["gpu"] == "gpu0").unwrap();
    let next = |dest: &str| {
        let entry = gpu0["table"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["destination"] == dest)
            .unwrap();
        let next: Vec<&str> = entry["next"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        next
    };
    assert_eq!(
        next("gpu1"),
        [
            "node0-nvswitch0",
            "node0-nvswitch1",
            "node0-nvswitch2",
            "node0-nvswitch3"
        ]
    );
    assert_eq!(next("gpu8"), ["leaf0"]);
    let out = linkctl(&["fabric"], &["--topology", "fat-tree-64", "--routes"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let gpu0 = text
        .split("# routes of gpu0 ")
        .nth(1)
        .expect("gpu0's table is printed");
    let to_gpu8 = gpu0
        .lines()
        .find(|l| l.trim_start().starts_with("gpu8 "))
        .unwrap();
    assert_eq!(
        to_gpu8.split_whitespace().collect::<Vec<_>>(),
        ["gpu8", "4->leaf0"]
    );
}

/// What is wrong with a --partition is said in words that fit it.
#[test]
fn partition_errors_say_what_is_wrong() {
    for (args, says) in [
        (
            &["--partition", "1:gpu4", "--partition", "1:gpu4"][..],
            "--partition names gpu4 twice in partition 1",
        ),
        (
            &["--partition", "1:gpu4", "--partition", "2:gpu4"],
            "--partition names gpu4 in partitions 1 and 2",
        ),
        (
            &["--partition", "1:gpu4,gpu4"],
            "--partition: gpu4 is named twice",
        ),
        (
            &["--partition", "1:gpu6..gpu4"],
            "--partition: gpu6..gpu4 runs backwards",
        ),
    ] {
        let out = common::linkctl(&["fabric"], args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A bad node names the option it came from; faults that would change nothing, a seed without the
/// probe that alone takes it, and a hardware file's partitions, which the manager would not read, are
/// refused rather than ignored.
#[test]
fn what_would_be_ignored_is_refused_and_errors_name_their_option() {
    let twice = |flag: &'static str, times: usize| {
        std::iter::repeat_n([flag, "gpu0:nvswitch1"], times)
            .flatten()
            .collect::<Vec<_>>()
    };
    let expected = two_stars("stars-unpartitioned.toml", 2, 1, 0);
    let partitioned = two_stars("stars-partitioned.toml", 2, 1, 1);
    for (args, says) in [
        (
            vec!["--fail-link", "gpu0:gpu9"],
            "--fail-link: dgx-h100 has no node \"gpu9\"",
        ),
        (
            vec!["--degrade-link", "gpu9:gpu0"],
            "--degrade-link: dgx-h100 has no node \"gpu9\"",
        ),
        (
            vec!["--degrade-link", "gpu0:gpu1"],
            "--degrade-link: dgx-h100 has no link between gpu0 and gpu1",
        ),
        (
            vec!["--partition", "1:gpu9"],
            "--partition: dgx-h100 has no node \"gpu9\"",
        ),
        (
            vec!["--fail-link", "gpu0:nvswitch1", "--fail-link", "nvswitch1:gpu0"],
            "--fail-link names gpu0:nvswitch1 twice",
        ),
        (
            [twice("--fail-link", 1), twice("--degrade-link", 1)].concat(),
            "--fail-link takes all the links of gpu0:nvswitch1 down already",
        ),
        (
            twice("--degrade-link", 5),
            "--degrade-link names gpu0:nvswitch1 5 times, and 4 links join them",
        ),
        (vec!["--seed", "2"], "--seed is the probe's: give --probe too"),
        (
            vec!["--topology", &expected, "--hardware", &partitioned],
            "b0 is in partition 1 there and in 0 in the topology",
        ),
    ] {
        let out = common::linkctl(&["fabric"], &args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // What is not ignored is taken: a trunk degraded as often as it has links goes down, the probe takes
    // a seed, and a hardware file may have the topology's partitions.
    let v = json(&["fabric"], &twice("--degrade-link", 4));
    assert_eq!(
        v["discovery"]["down"].as_array().map(Vec::len),
        Some(1),
        "{}",
        v["discovery"]
    );
    let v = json(&["fabric"], &["--probe", "--seed", "2"]);
    assert_eq!(v["probe"]["isolated"], true);
    let v = json(
        &["fabric"],
        &["--topology", &partitioned, "--hardware", &partitioned],
    );
    assert_eq!(v["discovery"]["matches"], true);
}

/// A node that answers as another kind than the topology says is told in words, not register names.
#[test]
fn a_node_of_another_kind_is_a_difference_in_words() {
    let expected = star("star-with-switch.toml", ["gpu0", "gpu1", "gpu2"]);
    let all_gpus = std::fs::read_to_string(&expected)
        .unwrap()
        .replace("kind = \"switch\"", "kind = \"gpu\"");
    let cabled = topology_file("star-of-gpus.toml", &all_gpus);
    let out = linkctl(&["fabric"], &["--topology", &expected, "--hardware", &cabled]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("differs: sw is a GPU, the topology says a switch"),
        "{text}"
    );
}

/// A partition takes runs of GPUs as `--gpus` does.
#[test]
fn a_partition_takes_runs_of_gpus() {
    let run = json(&["fabric"], &["--partition", "1:gpu4..gpu6,gpu1"]);
    let listed = json(&["fabric"], &["--partition", "1:gpu4,gpu5,gpu6,gpu1"]);
    assert_eq!(run, listed);
    let partitions: Vec<_> = (0..8)
        .map(|g| run["nodes"][g]["partition"].as_u64().unwrap())
        .collect();
    assert_eq!(partitions, [0, 1, 0, 0, 1, 1, 1, 0]);
}

#[test]
fn bad_input_is_refused() {
    for args in [
        &["--partition", "1gpu0"][..],
        &["--partition", "256:gpu0"],
        &["--partition", "1:nvswitch0"],
        &["--partition", "1:gpu99"],
        // One GPU in two partitions, or named twice in one: neither is a case for the last to win.
        &["--partition", "1:gpu4", "--partition", "2:gpu4"],
        &["--partition", "1:gpu4,gpu4"],
        &["--partition", "1:gpu4", "--partition", "1:gpu4"],
        &["--partition", "1:gpu6..gpu4"],
        &["--partition", "1:gpu4,"],
        &["--fail-link", "gpu0"],
        &["--fail-link", "gpu0:gpu1"],
        &["--fail-link", "gpu0:nvswitch1@20us"],
        &["--topology", "no-such-fabric"],
        &["--hardware", "no-such-fabric"],
        &["--degrade-link", "gpu0:gpu1"],
        &["--degrade-link", "gpu0:nvswitch0@1us"],
        &["--drain-switch", "gpu0"],
        &["--drain-switch", "nvswitch9"],
        &["--drain-switch", "nvswitch1@1us"],
        &["--drain-switch", "nvswitch1", "--drain-switch", "nvswitch1"],
    ] {
        assert_refused(&["fabric"], args);
    }
}

/// A topology file is read only as far as a topology can take: one longer (here a sparse file of zero
/// bytes, as `/dev/zero` would go on) is refused for its length, not read whole into memory.
#[test]
fn a_file_longer_than_any_topology_is_refused_unread() {
    let path = topology_file("long.toml", "");
    let most = fabric_sim::topology::MAX_FILE_BYTES;
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|file| file.set_len(most + 1))
        .unwrap();
    for option in ["--topology", "--hardware"] {
        let out = linkctl(&["fabric"], &[option, &path]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{option}: {stderr}");
        assert!(
            stderr.contains(&format!("long.toml\": longer than {} MiB", most >> 20)),
            "{option}: {stderr}"
        );
    }
}

/// `--topology` and `--hardware` read a file each: an error in either names the file it is in, whether the
/// TOML does not parse or what it describes is wrong (it had said only "bad topology file: line 5", not
/// which of the two).
#[test]
fn an_error_in_a_topology_file_names_the_file() {
    let unknown_key = topology_file(
        "unknown-key.toml",
        "[[node]]\nname = \"gpu0\"\nkind = \"gpu\"\ncolour = \"red\"\n",
    );
    let self_link = topology_file(
        "self-link.toml",
        "[[node]]\nname = \"gpu0\"\nkind = \"gpu\"\n[[node]]\nname = \"gpu1\"\nkind = \"gpu\"\n\
         [[link]]\na = \"gpu0\"\nb = \"gpu0\"\ngbps = 25.0\n",
    );
    for path in [&unknown_key, &self_link] {
        for (option, args) in [
            ("--topology", ["--topology", path, "--hardware", "dgx-h100"]),
            ("--hardware", ["--topology", "dgx-h100", "--hardware", path]),
        ] {
            let out = linkctl(&["fabric"], &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("{option} file {path:?}: ")),
                "{args:?}: {stderr}"
            );
        }
    }
    let out = linkctl(&["sim", "allreduce"], &["--topology", &unknown_key]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("--topology file {unknown_key:?}: ")),
        "{stderr}"
    );
    assert!(stderr.contains("unknown field `colour`"), "{stderr}");
}

#[test]
fn discovery_finds_the_fabric_as_the_topology_says() {
    let v = json(&["fabric"], &[]);
    let d = &v["discovery"];
    assert_eq!((d["nodes"].as_u64(), d["trunks"].as_u64()), (Some(12), Some(32)));
    // Each node once: its ID (two registers), type and port count, then four registers per port; 8 GPUs
    // of 4 ports and 4 switches of 8.
    assert_eq!(d["reads"], 8 * (4 + 4 * 4) + 4 * (4 + 4 * 8));
    assert_eq!(d["matches"], true);
    assert_eq!(d["from"], "gpu0");
    assert_eq!(d["down"], serde_json::json!([]));
    assert!(d["found"].is_null(), "only with --discovery");
    // With --discovery, every node found and the directed route that reaches it: gpu0 is the manager's
    // own node, its port p leads to nvswitch p, whose port g leads to gpu g.
    let v = json(&["fabric"], &["--discovery"]);
    let found = v["discovery"]["found"].as_array().unwrap();
    assert_eq!(found.len(), 12);
    let at = |name: &str| found.iter().find(|n| n["name"] == name).unwrap()["route"].clone();
    assert_eq!(at("gpu0"), serde_json::json!([]));
    assert_eq!(at("nvswitch2"), serde_json::json!([2]));
    assert_eq!(at("gpu5"), serde_json::json!([0, 5]));
    assert_eq!(found[1]["kind"], "switch");
    assert_eq!(found[1]["ports"], 8);
}

#[test]
fn a_gpu_cut_off_splits_its_partition_and_the_exit_status_says_so() {
    let every_link: Vec<String> = (0..4).map(|k| format!("gpu0:nvswitch{k}")).collect();
    let mut args: Vec<&str> = every_link
        .iter()
        .flat_map(|l| ["--fail-link", l.as_str()])
        .collect();
    args.extend(["--probe", "--json"]);
    let out = linkctl(&["fabric"], &args);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // gpu0's walk finds gpu0 alone; the rest is found from gpu1.
    assert_eq!(v["discovery"]["also_from"], serde_json::json!(["gpu1"]));
    assert_eq!(v["discovery"]["nodes"], 12);
    assert_eq!(
        v["split"],
        serde_json::json!([{ "partition": 0, "from": "gpu0", "to": "gpu1" }])
    );
    // The pairs with gpu0 are not sent: the partition is split, not leaking.
    let probe = &v["probe"];
    assert_eq!(
        (
            probe["same_partition_delivered"].as_u64(),
            probe["same_partition_unrouted"].as_u64()
        ),
        (Some(42), Some(14))
    );
    assert_eq!(probe["isolated"], true);
    // gpu0 is some ring's neighbour: rings do not run either.
    assert_eq!(v["ring_joined"], false);
    let text = String::from_utf8(linkctl(&["fabric"], &args[..8]).stdout).unwrap();
    assert!(
        text.contains("PARTITION 0 SPLIT: no route from gpu0 to gpu1") && !text.contains("ring collectives"),
        "{text}"
    );
}

#[test]
fn gpus_cabled_in_a_loop_are_split_for_traffic_but_joined_for_a_ring() {
    let loop6 = gpu_loop("fabric-loop6.toml", 6);
    let out = linkctl(&["fabric"], &["--topology", &loop6, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["split"],
        serde_json::json!([{ "partition": 0, "from": "fpga0", "to": "fpga2" }])
    );
    assert_eq!(v["ring_joined"], true);
    let out = linkctl(&["fabric"], &["--topology", &loop6]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.code() == Some(3)
            && text.contains("PARTITION 0 SPLIT: no route from fpga0 to fpga2")
            && text.contains("# ring collectives on all 6 GPUs still run"),
        "{text}"
    );
    // A switched fabric joins every pair, rings' neighbours among them: no split, and nothing to say.
    let v = json(&["fabric"], &["--topology", "dgx-h100"]);
    assert_eq!(
        (v["split"].clone(), v["ring_joined"].clone()),
        (serde_json::json!([]), serde_json::json!(true))
    );
}

#[test]
fn parts_no_link_joins_are_planned_each_on_its_own() {
    // One partition per part: the partitions are kept, the pairs between them joined by no route.
    let apart = two_stars("two-stars-apart.toml", 3, 1, 1);
    let v = json(&["fabric"], &["--topology", &apart, "--probe"]);
    assert_eq!(v["discovery"]["also_from"], serde_json::json!(["b0"]));
    assert_eq!(v["discovery"]["unreached"], serde_json::json!([]));
    assert_eq!(v["split"], serde_json::json!([]));
    let probe = &v["probe"];
    assert_eq!(
        (probe["sent"].as_u64(), probe["same_partition_delivered"].as_u64()),
        (Some(12), Some(12))
    );
    assert_eq!(probe["cross_partition_unrouted"], 18);
    assert_eq!(probe["isolated"], true);
    // One partition over both parts: split.
    let together = two_stars("two-stars-together.toml", 3, 1, 0);
    let out = linkctl(&["fabric"], &["--topology", &together]);
    assert_eq!(out.status.code(), Some(3));
    // A GPU of each part cut off: both partitions split, each reported.
    let cut = [
        "--topology",
        &apart,
        "--fail-link",
        "a0:asw0",
        "--fail-link",
        "b2:bsw0",
    ];
    let out = linkctl(&["fabric"], &cut);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("PARTITION 0 SPLIT: no route from a0 to a1")
            && text.contains("PARTITION 1 SPLIT: no route from b0 to b2"),
        "{text}"
    );
    let out = linkctl(&["fabric"], &[&cut[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["split"],
        serde_json::json!([
            { "partition": 0, "from": "a0", "to": "a1" },
            { "partition": 1, "from": "b0", "to": "b2" },
        ])
    );
}

#[test]
fn parts_of_several_switches_get_a_root_each_and_are_found_each_from_its_first_gpu() {
    let pods = two_stars("two-pods.toml", 4, 2, 1);
    let v = json(&["fabric"], &["--topology", &pods, "--discovery"]);
    assert_eq!(v["roots"], serde_json::json!(["asw0", "bsw0"]));
    assert_eq!(v["root"], "asw0");
    assert_eq!(v["discovery"]["also_from"], serde_json::json!(["b0"]));
    let found = v["discovery"]["found"].as_array().unwrap();
    assert_eq!(found.len(), 12, "every node found");
    let at = |name: &str| {
        let n = found.iter().find(|n| n["name"] == name).unwrap();
        (n["from"].clone(), n["route"].clone())
    };
    assert_eq!(at("a3"), ("a0".into(), serde_json::json!([0, 0, 2])));
    assert_eq!(at("b0"), ("b0".into(), serde_json::json!([])));
    assert_eq!(at("bsw1"), ("b0".into(), serde_json::json!([0, 0])));
    let text = String::from_utf8(linkctl(&["fabric"], &["--topology", &pods, "--discovery"]).stdout).unwrap();
    assert!(
        text.contains(
            "2 up*/down* roots, one per part of the fabric that switch-to-switch trunks join: asw0, bsw0"
        ) && text.contains("discovery from a0 and from b0")
            && text.contains("[0 0] from b0"),
        "{text}"
    );
}

#[test]
fn a_gpu_the_hardware_lacks_is_a_difference() {
    let expected = two_stars("stars-of-three.toml", 3, 1, 1);
    let cabled = two_stars("stars-of-two.toml", 2, 1, 1);
    let out = linkctl(
        &["fabric"],
        &["--topology", &expected, "--hardware", &cabled, "--json"],
    );
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let differences = v["discovery"]["differences"].to_string();
    assert!(
        differences.contains("a2 is not there") && differences.contains("b2 is not there"),
        "{differences}"
    );
}

#[test]
fn trunks_and_switches_discovery_cannot_reach_are_not_called_failed_nor_programmed() {
    // sw1 and sw2 hang from sw0, with no GPU: cut from sw0, no directed route reaches them.
    let island = topology_file(
        "island.toml",
        "name = \"island\"\n\
         node = [{ name = \"gpu0\", kind = \"gpu\" }, { name = \"gpu1\", kind = \"gpu\" },\n\
         { name = \"sw0\", kind = \"switch\" }, { name = \"sw1\", kind = \"switch\" },\n\
         { name = \"sw2\", kind = \"switch\" }]\n\
         link = [{ a = \"gpu0\", b = \"sw0\", gbps = 25.0 }, { a = \"gpu1\", b = \"sw0\", gbps = 25.0 },\n\
         { a = \"sw0\", b = \"sw1\", gbps = 25.0 }, { a = \"sw1\", b = \"sw2\", gbps = 25.0 }]\n",
    );
    let args = ["--topology", &island, "--fail-link", "sw0:sw1", "--registers"];
    let v = json(&["fabric"], &args);
    let d = &v["discovery"];
    assert_eq!(d["unreached"], serde_json::json!(["sw1", "sw2"]));
    // sw0 reports its trunk to sw1 down; nothing reports on sw1 - sw2, which had been called failed.
    assert_eq!(
        (&d["down"], &d["unreachable"]),
        (&serde_json::json!([2]), &serde_json::json!([3]))
    );
    let trunk = |i: usize| {
        let t = &v["trunks"][i];
        (
            t["failed"].as_bool(),
            t["unreachable"].as_bool(),
            t["links_up"].as_u64(),
        )
    };
    assert_eq!(trunk(2), (Some(true), Some(false), Some(0)));
    assert_eq!(trunk(3), (Some(false), Some(true), None));
    // Two route registers per GPU to sw0 only: the 8 for sw1 and sw2 had been counted as written.
    assert_eq!(
        (&v["register_writes"], &v["unsent_writes"]),
        (&4.into(), &8.into())
    );
    let registers = v["registers"].as_array().unwrap();
    assert!(
        registers.len() == 4 && registers.iter().all(|r| r["switch"] == "sw0"),
        "{registers:?}"
    );
    let text = String::from_utf8(linkctl(&["fabric"], &args).stdout).unwrap();
    let row = |trunk: &str| text.lines().find(|l| l.starts_with(trunk)).unwrap_or_default();
    assert!(
        text.contains("1 trunk(s) of the topology down and 1 unreachable")
            && text.contains("(1 found down and 1 unreachable, left out)")
            && text.contains("4 register writes (4 for routes, 0 for partitions); not the 8 for switches")
            && row("      2 sw0:2").ends_with("  (failed)")
            && row("      3 sw1:1").ends_with("  (unreachable: an end not reached, left out)"),
        "{text}"
    );
    let (_, registers) = text.split_once("# register writes").unwrap();
    assert_eq!(registers.matches("\n  sw0 ").count(), 4, "{registers}");
    assert!(
        !registers.contains("sw1") && !registers.contains("sw2"),
        "{registers}"
    );
}

/// A star of three GPUs on one switch, its cables in the order given.
fn star(file: &str, order: [&str; 3]) -> String {
    let mut text = String::from("name = \"star\"\n");
    for n in ["gpu0", "gpu1", "gpu2"] {
        text += &format!("[[node]]\nname = \"{n}\"\nkind = \"gpu\"\n");
    }
    text += "[[node]]\nname = \"sw\"\nkind = \"switch\"\n";
    for g in order {
        text += &format!("[[link]]\na = \"{g}\"\nb = \"sw\"\ngbps = 25.0\n");
    }
    topology_file(file, &text)
}

#[test]
fn cables_on_the_wrong_ports_are_found_and_nothing_is_programmed() {
    let expected = star("star-expected.toml", ["gpu0", "gpu1", "gpu2"]);
    let cabled = star("star-swapped.toml", ["gpu0", "gpu2", "gpu1"]);
    let out = linkctl(&["fabric"], &["--topology", &expected, "--hardware", &cabled]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("WIRED OTHERWISE THAN THE TOPOLOGY SAYS"), "{text}");
    assert!(
        text.contains("differs: sw:1 leads to gpu2:0, the topology says gpu1:0"),
        "{text}"
    );
    assert!(text.contains("nothing programmed"), "{text}");
    assert!(!text.contains("route"), "no routes are planned: {text}");

    let out = linkctl(
        &["fabric"],
        &["--topology", &expected, "--hardware", &cabled, "--json"],
    );
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["discovery"]["matches"], false);
    assert_eq!(v["discovery"]["differences"].as_array().unwrap().len(), 4);
    assert!(v.get("trunks").is_none());

    // Cabled as expected, it is planned.
    let v = json(&["fabric"], &["--topology", &expected, "--hardware", &expected]);
    assert_eq!(v["discovery"]["matches"], true);
}

#[test]
fn a_trunk_that_lost_links_is_reported_degraded_and_still_routed() {
    let v = json(
        &["fabric"],
        &[
            "--degrade-link",
            "gpu0:nvswitch0",
            "--degrade-link",
            "nvswitch0:gpu0",
            "--probe",
        ],
    );
    let d = &v["discovery"];
    assert_eq!(d["matches"], true);
    assert_eq!(d["down"], serde_json::json!([]));
    assert_eq!(
        d["degraded"],
        serde_json::json!([{ "trunk": 0, "links": 3, "mbps": 75000 }])
    );
    assert_eq!(v["probe"]["same_partition_delivered"], 56);
    // The trunk table says so too (it had shown the trunk as cabled).
    assert_eq!(
        (
            v["trunks"][0]["links"].as_u64(),
            v["trunks"][0]["links_up"].as_u64()
        ),
        (Some(5), Some(3))
    );
    let text = linkctl(&["fabric"], &["--degrade-link", "gpu0:nvswitch0"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("(degraded: 4 links up, 100.0 GB/s)"), "{text}");
    // All five links of the trunk lost: it is down, and left out of the routes.
    let mut args = Vec::new();
    for _ in 0..5 {
        args.extend(["--degrade-link", "gpu0:nvswitch0"]);
    }
    let v = json(&["fabric"], &args);
    assert_eq!(v["discovery"]["down"], serde_json::json!([0]));
    assert_eq!(v["trunks"][0]["failed"], true);
}

/// A degraded trunk is said to be routed over only when the manager programs routes: not when the
/// fabric is wired otherwise than the topology says, and nothing is programmed.
#[test]
fn a_degraded_trunk_of_a_miswired_fabric_is_not_said_to_be_routed_over() {
    let dir = std::env::temp_dir();
    let file = |name: &str, gpu3_on: &str| {
        let path = dir.join(format!("linkctl-fabric-{}-{name}.toml", std::process::id()));
        let mut text = String::from("name = \"pair of switches\"\n");
        for n in ["gpu0", "gpu1", "gpu2", "gpu3"] {
            text += &format!("[[node]]\nname = \"{n}\"\nkind = \"gpu\"\n");
        }
        text += "[[node]]\nname = \"sw0\"\nkind = \"switch\"\n[[node]]\nname = \"sw1\"\nkind = \"switch\"\n";
        for (a, b) in [
            ("gpu0", "sw0"),
            ("gpu1", "sw0"),
            ("gpu2", "sw1"),
            ("gpu3", gpu3_on),
            ("sw0", "sw1"),
        ] {
            text += &format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\ncount = 2\ngbps = 25.0\n");
        }
        std::fs::write(&path, text).unwrap();
        path
    };
    let (topology, miswired) = (file("topology", "sw1"), file("miswired", "sw0"));
    let degrade = ["--degrade-link", "gpu0:sw0"];
    let run = |hardware: &std::path::Path| {
        let args = [
            &["--topology", topology.to_str().unwrap(), "--hardware"][..],
            &[hardware.to_str().unwrap()],
            &degrade,
        ]
        .concat();
        let out = common::linkctl(&["fabric"], &args);
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (status, text) = run(&topology);
    assert_eq!(status, Some(0), "{text}");
    assert!(
        text.contains("degraded: trunk 0 (gpu0:0 - sw0:0): 1 links up at 25000 MB/s, routed over\n"),
        "{text}"
    );
    let (status, text) = run(&miswired);
    assert_eq!(status, Some(3), "{text}");
    assert!(
        text.contains("degraded: trunk 0 (gpu0:0 - sw0:0): 1 links up at 25000 MB/s\n"),
        "{text}"
    );
    assert!(text.contains("nothing programmed"), "{text}");
    for path in [topology, miswired] {
        std::fs::remove_file(path).unwrap();
    }
}

/// The trunk table marks a trunk paced by its credits (its round trip holds more than 64 KiB), with the
/// most a channel carries; the JSON gives it, null for the others.
#[test]
fn a_trunk_paced_by_its_credits_is_marked() {
    let path = std::env::temp_dir().join(format!("linkctl-fabric-slow-{}.toml", std::process::id()));
    let mut text =
        String::from("node = [{ name = \"g0\", kind = \"gpu\" }, { name = \"g1\", kind = \"gpu\" }]\n");
    text += "link = [{ a = \"g0\", b = \"g1\", count = 4, gbps = 25.0, latency_ns = 2000 }]\n";
    std::fs::write(&path, text).unwrap();
    let out = common::linkctl(&["fabric"], &["--topology", path.to_str().unwrap()]);
    let v = json(&["fabric"], &["--topology", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("(paced by its credits: at most 16.4 GB/s a channel)"),
        "{text}"
    );
    assert!((v["trunks"][0]["window_limit_gbps"].as_f64().unwrap() - 16.384).abs() < 1e-9);
    let dgx = json(&["fabric"], &[]);
    assert!(dgx["trunks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["window_limit_gbps"].is_null()));
}

/// A trunk that lost links is paced by its credits only if its window holds less than the links it has
/// left carry: 2 x 25 GB/s at 1 us, 32.8 GB/s a channel, is paced; with one link left it is not (it had
/// been marked paced at 32.8 GB/s on its 25).
#[test]
fn a_degraded_trunk_is_paced_by_what_its_links_left_carry() {
    let path = topology_file(
        "slow-pair.toml",
        "node = [{ name = \"g0\", kind = \"gpu\" }, { name = \"g1\", kind = \"gpu\" }]\n\
         link = [{ a = \"g0\", b = \"g1\", count = 2, gbps = 25.0, latency_ns = 1000 }]\n",
    );
    let whole = json(&["fabric"], &["--topology", &path]);
    assert!((whole["trunks"][0]["window_limit_gbps"].as_f64().unwrap() - 32.768).abs() < 1e-9);
    let args = ["--topology", &path, "--degrade-link", "g0:g1"];
    let v = json(&["fabric"], &args);
    assert_eq!(v["trunks"][0]["links_up"], 1);
    assert!(
        v["trunks"][0]["window_limit_gbps"].is_null(),
        "{}",
        v["trunks"][0]
    );
    let text = String::from_utf8(linkctl(&["fabric"], &args).stdout).unwrap();
    assert!(
        text.contains("(degraded: 1 links up, 25.0 GB/s)") && !text.contains("paced"),
        "{text}"
    );
    std::fs::remove_file(path).unwrap();
}

/// A path that exists, through switches discovery cannot reach (more than 64 hops from every GPU): the
/// split names them instead of saying that no live links join the GPUs.
#[test]
fn a_split_behind_switches_discovery_did_not_reach_says_so() {
    // gpu0 - s0 - s1 - ... - s139 - gpu1: s64 to s75 lie more than 64 hops from both GPUs.
    let mut text = String::from("name = \"chain\"\n");
    let mut links = vec!["{ a = \"gpu0\", b = \"s0\", gbps = 25.0 }".to_string()];
    for s in 0..139 {
        links.push(format!("{{ a = \"s{s}\", b = \"s{}\", gbps = 25.0 }}", s + 1));
    }
    links.push("{ a = \"s139\", b = \"gpu1\", gbps = 25.0 }".into());
    text += &format!("link = [{}]\n", links.join(", "));
    text += "[[node]]\nname = \"gpu0\"\nkind = \"gpu\"\n[[node]]\nname = \"gpu1\"\nkind = \"gpu\"\n";
    for s in 0..140 {
        text += &format!("[[node]]\nname = \"s{s}\"\nkind = \"switch\"\n");
    }
    let path = common::topology_file("chain-past-the-hop-limit.toml", &text);
    let out = common::linkctl(&["fabric"], &["--topology", &path]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "PARTITION 0 SPLIT: no route from gpu0 to gpu1: no path of live links through switches that \
             discovery reached (12 not reached: cut off by trunks down, or more than 64 hops from every GPU)"
        ),
        "{text}"
    );
}
