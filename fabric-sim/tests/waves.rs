//! VCD waveforms of link states: the file is what docs/spec.md section 8 says, its times only grow, every
//! link trains to Active and carries bursts, a failed link is seen going Down, and the limit holds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use fabric_sim::collective::Kind;
use fabric_sim::run::{run, Algo, FaultSpec, Recording, Report, Sweep};
use fabric_sim::topology::Topology;
use link_phy::time::Duration;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("openlink-{}-{name}", std::process::id()))
}

fn sweep(topology: &str, path: &Path, limit: u64, faults: Vec<FaultSpec>) -> Report {
    let topology = Topology::builtin(topology).unwrap();
    let sweep = Sweep {
        limit_per_size: Duration::from_ms(10),
        faults,
        vcd: Some(Recording {
            path: path.to_path_buf(),
            limit,
            name: "the waveforms".into(),
            only_nodes: Vec::new(),
            received: false,
        }),
        ..Sweep::new(topology, Kind::AllReduce, Algo::Ring, 1024, 64 * 1024)
    };
    let report = run(&sweep, &mut |_| {}).unwrap();
    assert!(report.verified);
    report
}

/// What a VCD file declares and how its signals change.
#[derive(Debug, Default)]
struct Dump {
    /// Identifier -> (scope path, name, width).
    vars: HashMap<String, (String, String, usize)>,
    /// Identifier -> every (time, value) after the initial dump, in file order.
    changes: HashMap<String, Vec<(u64, u64)>>,
    /// Identifier -> initial value.
    initial: HashMap<String, u64>,
    /// Value changes after the initial dump.
    count: u64,
}

fn parse(path: &Path) -> Dump {
    let text = std::fs::read_to_string(path).unwrap();
    let mut dump = Dump::default();
    let mut scopes: Vec<String> = Vec::new();
    let mut lines = text.lines();
    for line in lines.by_ref() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["$scope", "module", name, "$end"] => scopes.push(name.to_string()),
            ["$upscope", "$end"] => {
                scopes.pop();
            }
            ["$var", "wire", width, id, name, "$end"] => {
                let old = dump.vars.insert(
                    id.to_string(),
                    (scopes.join("."), name.to_string(), width.parse().unwrap()),
                );
                assert!(old.is_none(), "{id} declared twice");
            }
            ["$enddefinitions", "$end"] => break,
            ["$version", ..] | ["$timescale", "1ps", "$end"] => {}
            other => panic!("unexpected header line {other:?}"),
        }
    }
    assert!(scopes.is_empty());
    let mut time = None;
    let mut initial = false;
    for line in lines {
        if let Some(t) = line.strip_prefix('#') {
            let t: u64 = t.parse().unwrap();
            assert!(time.is_none_or(|before| t > before), "time {t} after {time:?}");
            time = Some(t);
            continue;
        }
        match line {
            "$dumpvars" => initial = true,
            "$end" => initial = false,
            _ => {
                let (id, value) = match line.strip_prefix('b') {
                    Some(rest) => {
                        let (bits, id) = rest.split_once(' ').unwrap();
                        let (_, _, width) = &dump.vars[id];
                        assert!(bits.len() <= *width, "{line}");
                        (id, u64::from_str_radix(bits, 2).unwrap())
                    }
                    None => {
                        let (bit, id) = line.split_at(1);
                        assert_eq!(dump.vars[id].2, 1, "{line}");
                        (id, bit.parse().unwrap())
                    }
                };
                if initial {
                    dump.initial.insert(id.to_string(), value);
                } else {
                    dump.changes
                        .entry(id.to_string())
                        .or_default()
                        .push((time.unwrap(), value));
                    dump.count += 1;
                }
            }
        }
    }
    dump
}

/// The identifiers of every variable called `name`, by scope.
fn signals<'a>(dump: &'a Dump, name: &str) -> Vec<(&'a String, &'a String)> {
    dump.vars
        .iter()
        .filter(|(_, (_, n, _))| n == name)
        .map(|(id, (scope, _, _))| (scope, id))
        .collect()
}

#[test]
fn every_link_trains_carries_bursts_and_ends_idle() {
    let path = temp("mesh4.vcd");
    let report = sweep("mesh4", &path, u64::MAX, Vec::new());
    let dump = parse(&path);
    // mesh4: 6 links, 12 directions, 3 signals each, all starting Down, idle and empty.
    assert_eq!(dump.vars.len(), 36);
    assert!(dump.initial.values().all(|&v| v == 0) && dump.initial.len() == 36);
    assert_eq!(report.waves, Some((dump.count, 0)));
    for (scope, id) in signals(&dump, "state") {
        let states: Vec<u64> = dump.changes[id].iter().map(|&(_, v)| v).collect();
        assert_eq!(
            states,
            [1, 2, 3],
            "{scope}: Down -> InitFC1 -> InitFC2 -> Active, once"
        );
    }
    for (scope, id) in signals(&dump, "busy") {
        let edges = &dump.changes[id];
        assert!(edges.len() >= 4, "{scope}: {edges:?}");
        assert!(edges.windows(2).all(|w| w[0].1 != w[1].1), "{scope} toggles");
        assert_eq!(edges.last().unwrap().1, 0, "{scope} ends idle");
    }
    // The ring sends data one way round (4 hops); the other directions carry only acknowledgements
    // and credits, which are not replayed.
    let mut carried = 0;
    for (scope, id) in signals(&dump, "replay") {
        let Some(values) = dump.changes.get(id) else {
            continue;
        };
        carried += 1;
        assert!(values.iter().any(|&(_, v)| v > 0), "{scope}");
        // The run ends when the last data arrives, with acknowledgements still on the way: the buffer
        // need not be empty then, but it empties as they arrive.
        assert!(
            values.windows(2).any(|w| w[1].1 < w[0].1),
            "{scope}: acknowledgements free the replay buffer"
        );
    }
    assert!(carried >= 4, "{carried} directions held packets for replay");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_failed_link_goes_down_in_the_waveforms() {
    let path = temp("failed.vcd");
    let fault = FaultSpec::Link {
        a: "gpu2".into(),
        b: "nvswitch1".into(),
        at: Duration::from_us(2),
    };
    let report = sweep("dgx-h100", &path, u64::MAX, vec![fault]);
    assert_eq!(report.failover.links_failed, 1);
    let dump = parse(&path);
    let failed: Vec<_> = signals(&dump, "state")
        .into_iter()
        .filter(|(scope, _)| {
            (scope.starts_with("fabric.gpu2.") && scope.ends_with("_to_nvswitch1"))
                || (scope.starts_with("fabric.nvswitch1.") && scope.ends_with("_to_gpu2"))
        })
        .collect();
    assert_eq!(failed.len(), 2, "{:?}", dump.vars);
    for (scope, id) in failed {
        let last = dump.changes[id].last().unwrap();
        assert_eq!(last.1, 0, "{scope} ends Down");
        assert!(last.0 >= 2_000_000, "{scope} went down at the fault, not before");
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn the_limit_bounds_the_changes_written() {
    let path = temp("limited.vcd");
    let report = sweep("mesh2", &path, 5, Vec::new());
    let dump = parse(&path);
    assert_eq!(dump.count, 5);
    let (written, dropped) = report.waves.unwrap();
    assert_eq!(written, 5);
    assert!(dropped > 0);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn the_worked_example_of_section_8() {
    use fabric_sim::vcd::{DirectionName, Waves};
    use link_dl::DlState;
    use link_phy::time::Instant;
    let names = [
        DirectionName {
            node: "gpu0".into(),
            port: 0,
            peer: "gpu1".into(),
        },
        DirectionName {
            node: "gpu1".into(),
            port: 0,
            peer: "gpu0".into(),
        },
    ];
    let at = |ns| Instant::ZERO + Duration::from_ns(ns);
    let mut out = Vec::new();
    let mut waves = Waves::new(&mut out, &names, u64::MAX).unwrap();
    waves.link(at(0), 0, DlState::InitFc1, 0).unwrap();
    waves.link(at(0), 1, DlState::InitFc1, 0).unwrap();
    waves.burst(at(0), 0, at(2)).unwrap();
    waves.link(at(5), 0, DlState::Active, 0).unwrap();
    waves.burst(at(6), 0, at(8)).unwrap();
    waves.link(at(6), 0, DlState::Active, 1).unwrap();
    waves.link(at(9), 1, DlState::Active, 0).unwrap();
    waves.link(at(12), 0, DlState::Active, 0).unwrap();
    waves.finish().unwrap();
    drop(waves);
    let text = String::from_utf8(out).unwrap();
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec.md")).unwrap();
    let example = text.replace(env!("CARGO_PKG_VERSION"), "<version>");
    assert!(
        spec.contains(&example),
        "the spec no longer shows the file:\n{example}"
    );
}

/// Waveforms kept to some nodes' links declare exactly the whole file's signals of the directions with an
/// end at one of them, under the same identifiers and scopes, and each changes as it does in the whole
/// file.
#[test]
fn waveforms_of_some_nodes_are_the_whole_files_signals_on_their_links() {
    let (whole, some) = (temp("whole.vcd"), temp("some.vcd"));
    sweep("mesh4", &whole, u64::MAX, Vec::new());
    let sweep = Sweep {
        limit_per_size: Duration::from_ms(10),
        vcd: Some(Recording {
            path: some.clone(),
            limit: u64::MAX,
            name: "the waveforms".into(),
            only_nodes: vec!["gpu1".into()],
            received: false,
        }),
        ..Sweep::new(
            Topology::builtin("mesh4").unwrap(),
            Kind::AllReduce,
            Algo::Ring,
            1024,
            64 * 1024,
        )
    };
    assert!(run(&sweep, &mut |_| {}).unwrap().verified);
    let (whole_dump, some_dump) = (parse(&whole), parse(&some));
    // A direction's scope is fabric.<node>.p<port>_to_<peer>.
    let touches = |scope: &str| scope.starts_with("fabric.gpu1.") || scope.ends_with("_to_gpu1");
    let expected: HashMap<&String, &(String, String, usize)> = whole_dump
        .vars
        .iter()
        .filter(|(_, (scope, _, _))| touches(scope))
        .collect();
    assert!(!expected.is_empty() && expected.len() < whole_dump.vars.len());
    assert_eq!(some_dump.vars.iter().collect::<HashMap<_, _>>(), expected);
    for id in some_dump.vars.keys() {
        assert_eq!(some_dump.initial.get(id), whole_dump.initial.get(id), "{id}");
        assert_eq!(some_dump.changes.get(id), whole_dump.changes.get(id), "{id}");
    }
    std::fs::remove_file(&whole).unwrap();
    std::fs::remove_file(&some).unwrap();
}
