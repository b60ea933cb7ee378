//! The data link over the channel model: every packet delivered exactly once, in order, uncorrupted,
//! whatever the faults, and the wire efficiency the format promises.

use link_dl::sim::{self, FlitFaults, Report, Traffic};
use link_dl::{DlConfig, Vc};
use link_phy::channel::{ChannelConfig, Fault, FaultKind, LaneHealth};
use link_phy::ltssm::{PortConfig, Role, Timing};
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

#[derive(Clone)]
struct Setup {
    lanes: usize,
    rate: Rate,
    ber: f64,
    fec: bool,
    faults: FlitFaults,
    channel_faults: Vec<Fault>,
    seed: u64,
}

impl Setup {
    fn new(lanes: usize, rate: Rate, seed: u64) -> Self {
        Setup { lanes, rate, ber: 0.0, fec: false, faults: FlitFaults::default(), channel_faults: vec![], seed }
    }

    fn run(&self, traffic: &Traffic) -> Report {
        let port = |role| {
            let mut p = PortConfig::new(self.lanes, role);
            p.max_rate = self.rate;
            p.timing = Timing::fast();
            p
        };
        let channel = |salt: u64| {
            let mut c = ChannelConfig::clean(self.lanes);
            c.ber = self.ber;
            c.seed = self.seed * 2 + salt;
            c.skew = ChannelConfig::random_skew(self.lanes, Duration::from_ns(20), self.seed + salt);
            c.faults = self.channel_faults.clone();
            c
        };
        let dl = DlConfig { fec: self.fec, ..DlConfig::default() };
        let pair = sim::pair([port(Role::Downstream), port(Role::Upstream)], dl, channel(0), channel(1), self.faults, self.seed)
            .unwrap();
        sim::run(pair, traffic)
    }
}

fn assert_exact(r: &Report, what: &str) {
    assert!(r.complete, "{what}: incomplete: {r:#?}");
    assert_eq!((r.duplicates, r.corrupted, r.out_of_order), (0, 0, 0), "{what}: {r:#?}");
    assert_eq!(r.packets_delivered, r.packets_sent, "{what}");
}

#[test]
fn a_clean_link_delivers_everything_at_the_format_efficiency() {
    let traffic = Traffic { packets: 20_000, ..Traffic::default() };
    let r = Setup::new(8, Rate::Gen3, 1).run(&traffic);
    assert_exact(&r, "clean x8");
    assert_eq!(r.bytes_verified, 20_000 * 128);
    assert_eq!(r.dl[1].crc_errors, 0);
    assert_eq!(r.dl[0].replays, 0);
    // 128 payload bytes per 144 on the wire is 88.9%; SKP ordered sets and control flits take a little.
    assert!(r.efficiency >= 0.88, "efficiency {:.4} {:#?}", r.efficiency, r);
    assert!(r.efficiency <= 128.0 / 144.0 + 1e-9, "efficiency {:.4} beats the format", r.efficiency);
}

#[test]
fn report_numbers() {
    let traffic = Traffic { packets: 20_000, ..Traffic::default() };
    for (ber, fec) in [(0.0, false), (1e-6, false), (1e-5, false), (1e-5, true), (1e-4, true)] {
        let mut s = Setup::new(8, Rate::Gen3, 1);
        s.ber = ber;
        s.fec = fec;
        let r = s.run(&traffic);
        eprintln!("ber {ber:e} fec {fec}: complete {} eff {:.4} replays {} naks {} crc {} fec_corr {} retrains {}", r.complete, r.efficiency, r.dl[0].replays, r.dl[0].naks_received, r.dl[1].crc_errors, r.dl[1].fec_corrections, r.retrains);
        eprintln!("   A phy {:?}\n   B phy {:?}\n   A dl {:?}", r.phy[0], r.phy[1], r.dl[0]);
    }
    eprintln!("size of Endpoint: {}, DataLink: {}, Port: {}", std::mem::size_of::<link_dl::Endpoint>(), std::mem::size_of::<link_dl::DataLink>(), std::mem::size_of::<link_phy::ltssm::Port>());
}
