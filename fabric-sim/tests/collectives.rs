//! Collectives on the built-in systems: every result checked, and the bandwidth the model gives.

use fabric_sim::collective::{Kind, Ring};
use fabric_sim::net::Net;
use fabric_sim::topology::{LinkFormat, Topology};
use link_dl::DlConfig;
use link_phy::time::Instant;

fn ring_on(net: &Net, kind: Kind, bytes: u64, extension: bool) -> Ring {
    let f = net.fabric();
    let n = f.gpus.len();
    let order: Vec<usize> = (0..n).collect();
    let ports = (0..n)
        .map(|g| {
            (0..f.port_count(f.gpus[g]))
                .map(|p| f.routes[f.gpus[g]][(g + 1) % n].contains(p))
                .collect()
        })
        .collect();
    // The whole buffer: part 0 of 1.
    Ring::part(kind, bytes, order, ports, extension, 42, 0, 1)
}

#[test]
fn ring_collectives_check_out() {
    for topo in ["mesh4", "dgx-h100"] {
        let t = Topology::builtin(topo).unwrap();
        let ext = t.links[0].format == LinkFormat::NvlinkAe;
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        for kind in [
            Kind::AllReduce,
            Kind::AllGather,
            Kind::ReduceScatter,
            Kind::Broadcast,
        ] {
            for bytes in [4u64, 1000, 128 * 1024, 1 << 22] {
                let start = net.now();
                let mut app = ring_on(&net, kind, bytes, ext);
                let done = net.run(&mut app, Instant(net.now().as_ps() + 10_000_000_000));
                let c = app.check();
                assert!(done && c.wrong == 0, "{topo} {kind:?} {bytes}: {c:?}");
                let us = (net.now().as_ps() - start.as_ps()) as f64 / 1e6;
                let algbw = bytes as f64 / us / 1e3;
                eprintln!(
                    "{topo} {kind:?} {bytes}: {us:.2} us algbw {algbw:.1} busbw {:.1}",
                    algbw * kind.bus_factor(8)
                );
            }
        }
    }
}

#[test]
fn switch_reduction_checks_out() {
    use fabric_sim::collective::SwitchReduce;
    for topo in ["dgx-a100", "dgx-h100"] {
        let t = Topology::builtin(topo).unwrap();
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        net.configure_nvls(true).unwrap();
        for bytes in [4u64, 1000, 128 * 1024, 1 << 22] {
            let links = net.fabric().gpu_port_links();
            let start = net.now();
            let mut app = SwitchReduce::new(bytes, links, true, 7);
            let done = net.run(&mut app, Instant(net.now().as_ps() + 10_000_000_000));
            let c = app.check();
            assert!(done && c.wrong == 0, "{topo} {bytes}: {c:?}");
            let us = (net.now().as_ps() - start.as_ps()) as f64 / 1e6;
            let algbw = bytes as f64 / us / 1e3;
            eprintln!(
                "{topo} switch-reduce {bytes}: {us:.2} us algbw {algbw:.1} busbw {:.1}",
                algbw * 1.75
            );
        }
    }
}
