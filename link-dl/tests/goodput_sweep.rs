//! Goodput against bit error rate and replay-buffer size, with and without FEC: a seeded sweep whose
//! table is kept as a snapshot (`tests/snapshots/goodput.txt`), so that any change in the link's behaviour
//! shows up as a diff to review. Regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p link-dl --test
//! goodput_sweep` after a deliberate change, and explain the new numbers in the commit.

use std::fmt::Write;

use link_dl::sim::{self, FlitFaults, Report, Traffic};
use link_dl::DlConfig;
use link_phy::channel::ChannelConfig;
use link_phy::ltssm::{PortConfig, Role, Timing};
use link_phy::rate::Rate;
use link_phy::time::Duration;

const LANES: usize = 8;
const PACKETS: u64 = 4_000;
const BERS: [f64; 5] = [0.0, 1e-7, 1e-6, 1e-5, 1e-4];

fn run<const REPLAY: usize>(ber: f64, fec: bool) -> Report {
    let port = |role| {
        let mut p = PortConfig::new(LANES, role);
        p.max_rate = Rate::Gen3;
        p.timing = Timing::fast();
        p
    };
    let channel = |salt: u64| {
        let mut c = ChannelConfig::clean(LANES);
        c.ber = ber;
        c.seed = 100 + salt;
        c.skew = ChannelConfig::random_skew(LANES, Duration::from_ns(8), 7 + salt);
        c
    };
    let dl = DlConfig {
        fec,
        ..DlConfig::default()
    };
    let mut pair = sim::pair::<REPLAY, 64>(
        [port(Role::Downstream), port(Role::Upstream)],
        dl,
        channel(0),
        channel(1),
        FlitFaults::default(),
        1,
    )
    .unwrap();
    sim::run(
        &mut pair,
        &Traffic {
            packets: PACKETS,
            ..Traffic::default()
        },
    )
}

fn table() -> String {
    let mut out = String::new();
    writeln!(out, "# Goodput of 128-byte posted writes over x{LANES} at 8 GT/s (128b/130b), {PACKETS} packets per cell,").unwrap();
    writeln!(
        out,
        "# as a fraction of the post-encoding line rate (the format's ceiling is 128/144 = 0.889),"
    )
    .unwrap();
    writeln!(
        out,
        "# against the random bit error rate and the replay buffer size (packets), without and with FEC."
    )
    .unwrap();
    writeln!(out, "# Receive buffers are 64 flits per channel, so more than 7 packets in flight need no more replay room.").unwrap();
    writeln!(
        out,
        "# Produced by link-dl/tests/goodput_sweep.rs; every cell delivered every packet exactly once."
    )
    .unwrap();
    writeln!(
        out,
        "{:<8} {:>7} {:>9} {:>9} {:>8} {:>8}",
        "BER", "replay", "no FEC", "FEC", "NAKs", "FEC fix"
    )
    .unwrap();
    for ber in BERS {
        for replay in [2usize, 4, 8, 64] {
            let (plain, fec) = match replay {
                2 => (run::<2>(ber, false), run::<2>(ber, true)),
                4 => (run::<4>(ber, false), run::<4>(ber, true)),
                8 => (run::<8>(ber, false), run::<8>(ber, true)),
                _ => (run::<64>(ber, false), run::<64>(ber, true)),
            };
            for r in [&plain, &fec] {
                assert!(
                    r.complete && r.duplicates == 0 && r.corrupted == 0 && r.out_of_order == 0,
                    "BER {ber:e} replay {replay}: {r:#?}"
                );
            }
            writeln!(
                out,
                "{:<8} {:>7} {:>9.4} {:>9.4} {:>8} {:>8}",
                if ber == 0.0 {
                    "0".to_string()
                } else {
                    format!("{ber:e}")
                },
                replay,
                plain.efficiency,
                fec.efficiency,
                plain.dl[0].naks_received,
                fec.dl[1].fec_corrections,
            )
            .unwrap();
        }
    }
    out
}

#[test]
fn goodput_table_matches_the_snapshot() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/goodput.txt");
    let table = table();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &table).unwrap();
    }
    let snapshot = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        table, snapshot,
        "the goodput table changed; rerun with UPDATE_SNAPSHOTS=1 if that is intended"
    );
}
