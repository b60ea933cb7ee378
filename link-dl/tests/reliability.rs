//! The data link over the channel model: every packet delivered exactly once, in order, uncorrupted,
//! whatever the faults, and the efficiency the format promises.

use link_dl::sim::{self, FlitFaults, Report, Traffic};
use link_dl::{DlConfig, Vc};
use link_phy::channel::{ChannelConfig, Fault, FaultKind, LaneHealth};
use link_phy::ltssm::{PortConfig, Role, Timing};
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};
use proptest::prelude::*;

#[derive(Clone)]
struct Setup {
    lanes: usize,
    rate: Rate,
    ber: f64,
    fec: bool,
    faults: FlitFaults,
    channel_faults: Vec<Fault>,
    /// The most lane-to-lane skew.
    skew: Duration,
    /// Lanes whose wires are broken, numbered at the downstream port (both directions of them).
    dead: Vec<usize>,
    /// Lane 0 wired to the far end's last lane.
    reversed: bool,
    seed: u64,
}

impl Setup {
    fn new(lanes: usize, rate: Rate, seed: u64) -> Self {
        Setup {
            lanes,
            rate,
            ber: 0.0,
            fec: false,
            faults: FlitFaults::default(),
            channel_faults: vec![],
            skew: Duration::from_ns(20),
            dead: vec![],
            reversed: false,
            seed,
        }
    }

    fn run(&self, traffic: &Traffic) -> Report {
        self.run_with::<64>(traffic)
    }

    fn run_with<const REPLAY: usize>(&self, traffic: &Traffic) -> Report {
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
            c.skew = ChannelConfig::random_skew(self.lanes, self.skew, self.seed + salt);
            c.faults = self.channel_faults.clone();
            // A channel's lanes are its transmitter's: the downstream port's lane l is the upstream
            // port's lanes - 1 - l on reversed wiring.
            c.health.resize(self.lanes, LaneHealth::Good);
            for &l in &self.dead {
                let l = if salt == 1 && self.reversed {
                    self.lanes - 1 - l
                } else {
                    l
                };
                c.health[l] = LaneHealth::Dead;
            }
            c.reversed = self.reversed;
            c
        };
        let dl = DlConfig {
            fec: self.fec,
            ..DlConfig::default()
        };
        let mut pair = sim::pair::<REPLAY, 64>(
            [port(Role::Downstream), port(Role::Upstream)],
            dl,
            channel(0),
            channel(1),
            self.faults,
            self.seed,
        )
        .unwrap();
        sim::run(&mut pair, traffic)
    }
}

fn assert_exact(r: &Report, what: &str) {
    assert!(r.complete, "{what}: incomplete: {r:#?}");
    assert_eq!(
        (r.duplicates, r.corrupted, r.out_of_order),
        (0, 0, 0),
        "{what}: {r:#?}"
    );
    assert_eq!(r.packets_delivered, r.packets_sent, "{what}");
}

fn all_vcs_both_ways(packets: u64, seed: u64) -> Traffic {
    Traffic {
        packets,
        vcs: Vc::ALL.to_vec(),
        both_ways: true,
        seed,
        ..Traffic::default()
    }
}

#[test]
fn a_clean_link_delivers_everything_at_the_format_efficiency() {
    let traffic = Traffic {
        packets: 20_000,
        ..Traffic::default()
    };
    let r = Setup::new(8, Rate::Gen3, 1).run(&traffic);
    assert_exact(&r, "clean x8");
    assert_eq!(r.bytes_verified, 20_000 * 128);
    assert_eq!((r.dl[1].crc_errors, r.dl[0].replays), (0, 0));
    // 128 payload bytes per 144 on the wire is 88.9%; SKP ordered sets and control flits take a little.
    assert!(r.efficiency >= 0.88, "efficiency {:.4}", r.efficiency);
    assert!(
        r.efficiency <= 128.0 / 144.0,
        "efficiency {:.4} beats the format",
        r.efficiency
    );
}

/// A packet count no run could reach, both ways: the run stops at its time limit, incomplete, having
/// delivered what it sent (the total of both senders' packets overflowed).
#[test]
fn a_packet_count_past_the_range_stops_at_the_limit() {
    let traffic = Traffic {
        packets: u64::MAX,
        both_ways: true,
        limit: Duration::from_us(200),
        ..Traffic::default()
    };
    let r = Setup::new(4, Rate::Gen3, 1).run(&traffic);
    assert!(r.active && r.limit_reached && !r.complete, "{r:#?}");
    assert!(r.packets_delivered > 0, "{r:#?}");
    assert_eq!((r.duplicates, r.corrupted, r.out_of_order), (0, 0, 0));
}

#[test]
fn goodput_targets_under_errors() {
    let traffic = Traffic {
        packets: 20_000,
        ..Traffic::default()
    };
    let mut s = Setup::new(8, Rate::Gen3, 2);
    s.ber = 1e-6;
    let r = s.run(&traffic);
    assert_exact(&r, "BER 1e-6");
    assert!(r.dl[1].crc_errors > 0, "the errors must really happen");
    assert!(
        r.efficiency >= 0.85,
        "BER 1e-6 without FEC: efficiency {:.4}",
        r.efficiency
    );
    s.ber = 1e-5;
    s.fec = true;
    let r = s.run(&traffic);
    assert_exact(&r, "BER 1e-5 with FEC");
    assert!(r.dl[1].fec_corrections > 0);
    assert!(
        r.efficiency >= 0.80,
        "BER 1e-5 with FEC: efficiency {:.4}",
        r.efficiency
    );
}

#[test]
fn every_bit_error_rate_delivers_exactly_once() {
    for ber in [0.0, 1e-6, 1e-5, 1e-4] {
        for fec in [false, true] {
            let mut s = Setup::new(4, Rate::Gen3, 3);
            s.ber = ber;
            s.fec = fec;
            let r = s.run(&all_vcs_both_ways(1_500, 3));
            assert_exact(&r, &format!("BER {ber:e}, FEC {fec}"));
        }
    }
}

#[test]
fn dropped_duplicated_and_corrupted_flits_are_recovered() {
    let mut s = Setup::new(8, Rate::Gen3, 4);
    s.faults = FlitFaults {
        drop: 2e-3,
        duplicate: 2e-3,
        corrupt: 2e-3,
    };
    let r = s.run(&all_vcs_both_ways(3_000, 4));
    assert_exact(&r, "flit faults");
    assert!(r.flit_faults.iter().all(|&n| n > 10), "{:?}", r.flit_faults);
    assert!(r.dl.iter().map(|c| c.naks_sent + c.replay_timeouts).sum::<u64>() > 0);
}

#[test]
fn at_8b10b_too() {
    let mut s = Setup::new(4, Rate::Gen2, 5);
    s.ber = 1e-5;
    let r = s.run(&all_vcs_both_ways(1_500, 5));
    assert_exact(&r, "5 GT/s");
    assert_eq!(r.code, "8b10b");
}

/// 20,000 packets over x8 at 8 GT/s (up after about 200 us with fast timing) whose lane 5 dies at `at_us`
/// from the start: the link retrains at x4.
fn lane_dies_at(at_us: u64, what: &str) -> Report {
    let mut s = Setup::new(8, Rate::Gen3, 6);
    s.channel_faults = vec![Fault {
        at: Instant(Duration::from_us(at_us).as_ps()),
        kind: FaultKind::SetHealth {
            lane: 5,
            health: LaneHealth::Dead,
        },
    }];
    let r = s.run(&Traffic {
        packets: 20_000,
        ..Traffic::default()
    });
    assert_exact(&r, what);
    assert_eq!(r.width, 4, "{what}: the link should have dropped to x4");
    r
}

#[test]
fn a_lane_failing_mid_transfer_retrains_narrower_and_loses_nothing() {
    // Well into the transfer.
    let r = lane_dies_at(260, "lane failure");
    assert!(r.retrains >= 3);
}

/// Efficiency is goodput over the line rate the link had at the time: a lane that dies near the end of
/// a transfer leaves the link at x4 for its last packets, and what it carried at x8 is measured against
/// x8. Measured against the width at the end (as before), this run gave 77%, twice its 41%: a link that
/// fell back later still would have shown more than 100%.
#[test]
fn efficiency_counts_the_width_the_link_had_at_the_time() {
    // Most of the packets have crossed at x8 by then.
    let r = lane_dies_at(520, "late lane failure");
    // Goodput over the line rate of x8 throughout, and of x4 throughout: the truth lies between.
    let against = |lanes: f64| r.goodput_gbps / (lanes * r.rate_gts / 8.0 * 128.0 / 130.0);
    let (x8, x4) = (against(8.0), against(4.0));
    assert!(
        x8 < r.efficiency && r.efficiency < 0.9 * x4,
        "efficiency {:.4}: x8 throughout {x8:.4}, x4 throughout {x4:.4}",
        r.efficiency
    );
}

#[test]
fn retrains_in_the_middle_of_traffic_lose_nothing() {
    let s = Setup::new(8, Rate::Gen3, 7);
    let traffic = Traffic {
        retrain_at: vec![
            Duration::from_us(10),
            Duration::from_us(25),
            Duration::from_us(40),
        ],
        ..all_vcs_both_ways(4_000, 7)
    };
    let r = s.run(&traffic);
    assert_exact(&r, "retrains");
    assert!(r.retrains >= 2 + 3, "retrains: {}", r.retrains);
}

#[test]
fn every_retrain_asked_for_is_done_or_counted_as_not_done() {
    // Two requests at one time, and one while the link is still in Recovery from them: each is a
    // retrain of its own (both ports enter Recovery), none is lost in the one before it.
    let s = Setup::new(8, Rate::Gen3, 7);
    let traffic = Traffic {
        retrain_at: vec![
            Duration::from_us(10),
            Duration::from_us(10),
            Duration::from_ns(10_100),
        ],
        ..all_vcs_both_ways(4_000, 7)
    };
    let r = s.run(&traffic);
    assert_exact(&r, "retrains asked for together");
    assert_eq!(r.retrains_not_done, 0);
    // Two Recovery entries at bring-up (the speed change), two per retrain.
    assert_eq!(r.retrains, 2 + 2 * 3, "{r:#?}");
}

#[test]
fn small_replay_buffers_still_deliver_exactly_once() {
    let mut s = Setup::new(2, Rate::Gen3, 8);
    s.ber = 1e-5;
    let r = s.run_with::<2>(&all_vcs_both_ways(1_000, 8));
    assert_exact(&r, "replay buffer of 2");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_traffic_and_faults_deliver_exactly_once(
        seed in 0u64..1_000,
        lanes in prop::sample::select(vec![1usize, 2, 4, 8]),
        ber in prop::sample::select(vec![0.0, 1e-6, 1e-5]),
        fec in any::<bool>(),
        drop in prop::sample::select(vec![0.0, 1e-3]),
        duplicate in prop::sample::select(vec![0.0, 1e-3]),
        corrupt in prop::sample::select(vec![0.0, 1e-3]),
        payload in 0usize..=144,
        retrain in prop::option::of(5u64..60),
        vcs in prop::sample::subsequence(Vc::ALL.to_vec(), 1..=4),
    ) {
        let mut s = Setup::new(lanes, Rate::Gen3, seed);
        s.ber = ber;
        s.fec = fec;
        s.faults = FlitFaults { drop, duplicate, corrupt };
        let traffic = Traffic {
            packets: 600,
            payload,
            vcs,
            both_ways: seed % 2 == 0,
            seed,
            retrain_at: retrain.map(Duration::from_us).into_iter().collect(),
            ..Traffic::default()
        };
        let r = s.run(&traffic);
        prop_assert!(r.complete, "{:#?}", r);
        prop_assert_eq!((r.duplicates, r.corrupted, r.out_of_order), (0, 0, 0));
    }
}

proptest! {
    // Shrinking a failure for two minutes at most: a case can take seconds.
    #![proptest_config(ProptestConfig { cases: 16, max_shrink_time: 120_000, ..ProptestConfig::default() })]

    /// The data link over random channels: any width, skew past what the deskew buffers absorb (the link
    /// narrows, or stays at a lower rate), a dead lane, reversed wiring, any top rate, bit errors. Where
    /// the live lanes can form a link, every packet is delivered exactly once, in order, intact.
    #[test]
    fn random_channels_deliver_exactly_once(
        seed in 0u64..10_000,
        lanes in prop::sample::select(vec![1usize, 2, 4, 8, 16]),
        skew_symbols in prop_oneof![0u64..=30, 31u64..=100],
        dead in prop::option::of(0usize..16),
        reversed in any::<bool>(),
        rate in prop::sample::select(vec![Rate::Gen1, Rate::Gen2, Rate::Gen3, Rate::Gen4, Rate::Gen5]),
        ber in prop::sample::select(vec![0.0, 1e-6]),
    ) {
        let r = random_channel(lanes, rate, skew_symbols, dead, reversed, ber, seed);
        prop_assert!(r.complete, "{:#?}", r);
        prop_assert_eq!((r.duplicates, r.corrupted, r.out_of_order), (0, 0, 0));
        prop_assert_eq!(r.packets_delivered, r.packets_sent);
    }
}

/// 400 packets each way on every virtual channel over one of [`random_channels_deliver_exactly_once`]'s
/// channels.
fn random_channel(
    lanes: usize,
    rate: Rate,
    skew_symbols: u64,
    dead: Option<usize>,
    reversed: bool,
    ber: f64,
    seed: u64,
) -> Report {
    let mut s = Setup::new(lanes, rate, seed);
    s.skew = Rate::Gen1.slot_time().saturating_mul(skew_symbols);
    s.dead = dead
        .map(|l| l % lanes)
        .filter(|_| lanes > 1)
        .into_iter()
        .collect();
    s.reversed = reversed;
    s.ber = ber;
    let traffic = Traffic {
        packets: 400,
        vcs: Vc::ALL.to_vec(),
        both_ways: true,
        seed,
        // A case that never completes fails in seconds instead of simulating 500 ms (a x16 link at 32 GT/s
        // simulates about a millisecond a second). In 4,000 local cases the traffic took at most 263 us
        // once the links were active, and training over random channels takes up to about 2 ms.
        limit: Duration::from_ms(20),
        ..Traffic::default()
    };
    s.run(&traffic)
}

/// The case of [`random_channels_deliver_exactly_once`] that ran until CI's 90-minute limit: x16 at up to
/// 32 GT/s, reversed, 39 symbol times of skew (156 ns, more than the deskew buffer holds at 32 GT/s). The
/// ports parted while giving the rate up, and every retry from Detect tried it again, until the time
/// limit (the physical layer's test `both_ports_give_up_a_rate_on_trial_when_one_follows_the_others_ts1`).
#[test]
fn regression_seed_6085_x16_skew_39_reversed_at_32gts() {
    let r = random_channel(16, Rate::Gen5, 39, None, true, 0.0, 6085);
    assert_exact(&r, "seed 6085");
    assert_eq!((r.width, r.rate_gts), (16, 16.0));
}

/// A case the property test above found: 600 empty packets one way over x2 at BER 1e-5, seeded `seed`.
fn two_lanes_ber_1e5(seed: u64) -> Report {
    let mut s = Setup::new(2, Rate::Gen3, seed);
    s.ber = 1e-5;
    let traffic = Traffic {
        packets: 600,
        payload: 0,
        vcs: vec![Vc::Snoop],
        both_ways: false,
        seed,
        ..Traffic::default()
    };
    s.run(&traffic)
}

#[test]
fn regression_seed_647_two_lanes_ber_1e5() {
    assert_exact(&two_lanes_ber_1e5(647), "seed 647");
}

/// At 8 GT/s one port missed its partner's idle data in Recovery.Idle (a bit error) while the partner went
/// on to L0. Timing out, it went back to the old rate through Recovery.Speed, whose electrical idle
/// ordered set the partner in L0 took for low power: one port ended in Failed, the other asleep in L1.
/// Recovery.Idle's first timeout now goes back to Recovery.RcvrLock, whose training sets bring the
/// partner back into Recovery with it, at 8 GT/s still (one bit error does not cost the rate); and a
/// port in L0 takes an ordered set it was not asked to expect for its partner leaving L0.
#[test]
fn regression_seed_791_two_lanes_ber_1e5() {
    let r = two_lanes_ber_1e5(791);
    assert_exact(&r, "seed 791");
    assert_eq!((r.width, r.rate_gts), (2, 8.0));
}
