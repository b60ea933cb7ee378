//! The topology file of docs/spec.md section 6 parses as the section says, and a collective runs on it.

use fabric_sim::collective::Kind;
use fabric_sim::run::{run, Algo, Sweep};
use fabric_sim::topology::{LinkFormat, NodeKind, Topology};
use link_phy::time::Duration;

fn example() -> String {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec.md")).unwrap();
    let section = &spec[spec.find("## 6. Topology files").unwrap()..];
    let start = section.find("```toml\n").unwrap() + "```toml\n".len();
    section[start..start + section[start..].find("```").unwrap()].to_string()
}

#[test]
fn the_example_file_parses_as_specified() {
    let t = Topology::from_toml(&example()).unwrap();
    assert_eq!(t.name, "two-gpus-one-switch");
    let kinds: Vec<NodeKind> = t.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, [NodeKind::Gpu, NodeKind::Gpu, NodeKind::Switch]);
    assert_eq!(t.links.len(), 8, "count = 4, twice");
    let first = &t.links[0];
    assert_eq!(
        (first.a, first.b, first.gbps, first.latency_ns),
        (0, 2, 25.0, 150.0)
    );
    assert_eq!((first.ber, first.format), (0.0, LinkFormat::NvlinkAe));
    let last = &t.links[7];
    assert_eq!(
        (last.latency_ns, last.ber, last.format),
        (100.0, 1e-9, LinkFormat::Openlink)
    );
}

#[test]
fn a_collective_runs_on_it() {
    let topology = Topology::from_toml(&example()).unwrap();
    let sweep = Sweep {
        limit_per_size: Duration::from_ms(10),
        ..Sweep::new(topology, Kind::AllReduce, Algo::Ring, 1024, 64 * 1024)
    };
    let report = run(&sweep, &mut |_| {}).unwrap();
    assert!(report.verified, "{report:?}");
}

#[test]
fn mistakes_are_named() {
    let base = example();
    for (bad, says) in [
        (base.replace("kind = \"switch\"", "kind = \"router\""), "router"),
        (
            base.replace(
                "b = \"sw0\"\ncount = 4\ngbps = 25.0\nber",
                "b = \"sw9\"\ncount = 4\ngbps = 25.0\nber",
            ),
            "sw9",
        ),
        (
            base.replace("gbps = 25.0\nlatency_ns", "gbps = -1.0\nlatency_ns"),
            "rate -1 GB/s, not 0.001 to 16000",
        ),
        (
            base.replace("name = \"gpu1\"", "name = \"gpu0\""),
            "defined twice",
        ),
        // Names the command line could not take back (`--fail-link A:B@T`, `--gpus A,B`, `--gpus A..B`).
        (
            base.replace("name = \"gpu1\"", "name = \"\"")
                .replace("a = \"gpu1\"", "a = \"\""),
            "node name \"\"",
        ),
        (base.replace("\"gpu1\"", "\"gpu:1\""), "node name \"gpu:1\""),
        (base.replace("\"gpu1\"", "\"gpu@1\""), "node name \"gpu@1\""),
        (base.replace("\"gpu1\"", "\"gpu,1\""), "node name \"gpu,1\""),
        (base.replace("\"gpu1\"", "\"gpu..1\""), "node name \"gpu..1\""),
        (base.replace("\"gpu1\"", "\"gpu 1\""), "node name \"gpu 1\""),
        // Nor one the reports could not print on their lines (an escape would colour them).
        (
            base.replace("\"gpu1\"", "\"gpu\\u001b1\""),
            "node name \"gpu\\u{1b}1\"",
        ),
        (base.replace("count = 4\ngbps", "colour = 4\ngbps"), "colour"),
        // Checked before anything is built from them: a count of 10^8 once allocated gigabytes, a
        // latency of 10^300 ns never let a run end.
        (
            base.replace("count = 4\ngbps", "count = 100000000\ngbps"),
            "1 to 64 parallel links",
        ),
        (
            base.replace("count = 4\ngbps", "count = 0\ngbps"),
            "1 to 64 parallel links",
        ),
        (
            base.replace("latency_ns = 150.0", "latency_ns = 1e300"),
            "latency 1e300 ns, not 0 to 1e9",
        ),
        (
            base.replace("gbps = 25.0\nlatency_ns", "gbps = 1e-9\nlatency_ns"),
            "rate 1e-9 GB/s, not 0.001 to",
        ),
        (
            base.replace("gbps = 25.0\nlatency_ns", "gbps = nan\nlatency_ns"),
            "rate NaN GB/s",
        ),
        (
            base.replace(
                "count = 4\ngbps = 25.0\nlatency_ns",
                "count = 4\ngbps = 5000.0\nlatency_ns",
            ),
            "above the 16000 GB/s",
        ),
    ] {
        let err = Topology::from_toml(&bad).unwrap_err();
        assert!(err.contains(says), "{says}: {err}");
        // The command line prints it as its one-line error.
        assert!(!err.contains('\n'), "{err}");
    }
    // A parse error says where, on the same line.
    let err = Topology::from_toml(&base.replace("count = 4\ngbps", "count = -1\ngbps")).unwrap_err();
    assert!(
        err.starts_with("bad topology file: line ") && err.contains(", column "),
        "{err}"
    );
    // Columns count characters, as the parser's own message does, not bytes.
    let err = Topology::from_toml("name = \"\u{e9}\u{e9}\u{e9}\"  x").unwrap_err();
    assert!(err.contains("line 1, column 15:"), "{err}");
}

#[test]
fn a_fabric_too_large_for_memory_is_refused_before_it_is_built() {
    // A 1 s wire at 100 GB/s would hold 100 GB of units each way.
    let t = Topology::from_toml(&example().replace("latency_ns = 150.0", "latency_ns = 1e9")).unwrap();
    let err = fabric_sim::net::Net::new(&t, &[], link_dl::link::DlConfig::default(), 1).unwrap_err();
    assert!(err.contains("GiB"), "{err}");
}
