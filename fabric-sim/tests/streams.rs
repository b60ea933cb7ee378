//! Raw streams across the simulated fabrics: everything sent arrives once, intact, at the rate the links
//! and their framing allow.

use fabric_sim::net::{App, Net, Offer, Outgoing};
use fabric_sim::topology::Topology;
use fabric_sim::wire;
use link_dl::{DlConfig, Received, Vc};
use link_phy::time::Instant;

/// Every GPU sends `count` 128-byte writes to the next GPU, spread over its ports.
struct Ring {
    n: usize,
    count: u32,
    sent: Vec<u32>,
    got: Vec<Vec<bool>>,
    received: u64,
    bad: u64,
    ports_to_next: Vec<Vec<bool>>,
}

fn flit(from: usize, k: u32, i: usize) -> [u8; 16] {
    let mut f = [0u8; 16];
    f[..4].copy_from_slice(&k.to_le_bytes());
    f[4] = from as u8;
    f[5] = i as u8;
    f[8..12].copy_from_slice(&(k ^ 0xA5A5_5A5A).to_le_bytes());
    f
}

impl App for Ring {
    fn next(&mut self, _now: Instant, gpu: usize, offer: &mut Offer) -> bool {
        if self.sent[gpu] >= self.count || !self.ports_to_next[gpu][offer.port] || !offer.fits(Vc::Posted, 8)
        {
            return false;
        }
        let k = self.sent[gpu];
        let dest = ((gpu + 1) % self.n) as u16;
        let sent = offer.send(&Outgoing {
            dest,
            vc: Vc::Posted,
            tl: wire::header(wire::OP_WRITE, dest, gpu as u16, false, k),
            payload: (0..8).map(|i| flit(gpu, k, i)).collect(),
            multicast: None,
        });
        self.sent[gpu] += u32::from(sent);
        sent
    }

    fn receive(&mut self, _now: Instant, gpu: usize, _port: usize, p: &Received) {
        let (_, source, _) = wire::route_fields(p.tl);
        let k = wire::offset(p.tl);
        let from = (gpu + self.n - 1) % self.n;
        let ok = usize::from(source) == from
            && p.payload.len() == 8
            && p.payload.iter().enumerate().all(|(i, f)| *f == flit(from, k, i))
            && !self.got[gpu][k as usize];
        if ok {
            self.got[gpu][k as usize] = true;
            self.received += 1;
        } else {
            self.bad += 1;
        }
    }

    fn take_woken(&mut self) -> Option<usize> {
        None
    }

    fn done(&self) -> bool {
        self.received == self.n as u64 * u64::from(self.count) || self.bad > 0
    }
}

fn ring(net: &Net, count: u32) -> Ring {
    let f = net.fabric();
    let n = f.gpus.len();
    Ring {
        n,
        count,
        sent: vec![0; n],
        got: vec![vec![false; count as usize]; n],
        received: 0,
        bad: 0,
        ports_to_next: (0..n)
            .map(|g| {
                (0..f.port_count(f.gpus[g]))
                    .map(|p| f.routes[f.gpus[g]][(g + 1) % n].contains(p))
                    .collect()
            })
            .collect(),
    }
}

fn run(topology: &str, ber: f64, count: u32) -> (Ring, Net) {
    let mut t = Topology::builtin(topology).unwrap();
    for l in &mut t.links {
        l.ber = ber;
    }
    let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
    let mut app = ring(&net, count);
    let done = net.run(&mut app, Instant(50_000_000_000));
    assert!(
        done,
        "{topology}: {} of {} received, {} bad",
        app.received,
        app.n as u64 * count as u64,
        app.bad
    );
    (app, net)
}

#[test]
fn a_ring_of_writes_arrives_whole_on_every_topology() {
    for name in ["mesh2", "mesh4", "dgx-a100", "dgx-h100", "pcie8", "dgx1-hcm"] {
        let (app, net) = run(name, 0.0, 3_000);
        assert_eq!(app.bad, 0, "{name}");
        assert_eq!(net.stats().packets_delivered, app.received);
    }
}

#[test]
fn bit_errors_are_absorbed_by_the_data_links() {
    let (app, net) = run("dgx-h100", 1e-6, 2_000);
    assert_eq!(app.bad, 0);
    assert!(net.stats().bits_flipped > 0);
}

#[test]
fn ganged_trunks_run_at_their_line_rate_through_a_switch() {
    for links in [1usize, 2, 5, 8] {
        let toml = format!(
            "node = [{{ name = \"g0\", kind = \"gpu\" }}, {{ name = \"g1\", kind = \"gpu\" }}, {{ name = \"s\", kind = \"switch\" }}]\n\
             link = [{{ a = \"g0\", b = \"s\", count = {links}, gbps = 25.0 }}, {{ a = \"g1\", b = \"s\", count = {links}, gbps = 25.0 }}]"
        );
        let t = Topology::from_toml(&toml).unwrap();
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        let mut app = ring(&net, 40_000);
        assert!(net.run(&mut app, Instant(50_000_000_000)));
        let gbps = app.received as f64 * 128.0 / 2.0 / (net.now().as_ps() as f64 / 1000.0);
        // 128 payload bytes per 144 on the wire; start-up and the odd control flit cost a little more.
        let line = links as f64 * 25.0 * 128.0 / 144.0;
        assert!(
            gbps > 0.97 * line && gbps <= line,
            "{links} links: {gbps:.1} GB/s of {line:.1}"
        );
    }
}
