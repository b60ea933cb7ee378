//! With FEC, a packet's flits reach the partner only in a whole block, at the positions where the
//! partner's physical layer puts blocks: a driver that moves units while the link has output pending must
//! not leave a block half sent, and a partner that starts over must not move the blocks.

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::link::{DataLink, DlConfig};
use link_dl::Vc;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

type Link = DataLink<16, 64>;

#[test]
fn a_driver_that_sends_only_pending_output_gets_a_packet_through_with_fec() {
    let config = DlConfig {
        fec: true,
        ..DlConfig::default()
    };
    let mut ends = [Link::new(config), Link::new(config)];
    let mut received = [0u64; 2];
    let mut now = Instant::ZERO;
    for end in &mut ends {
        end.phy_up(now, LinkWidth::X8, Rate::Gen5);
    }
    let unit = Duration::from_ps(640);
    let mut sent_at = None;
    let mut delivered_at = None;
    for _ in 0..200_000 {
        if sent_at.is_none() && ends[0].is_active() && ends[1].is_active() {
            // Let the start-up traffic settle first.
            if now > Instant::ZERO + Duration::from_us(5) {
                let payload: [Flit; 8] = core::array::from_fn(|i| [i as u8; FLIT_LEN]);
                ends[0].send(Vc::Posted, 7, &payload).unwrap();
                sent_at = Some(now);
            }
        }
        for from in 0..2 {
            ends[from].handle_timeout(now);
            if ends[from].has_pending_output(now) {
                let mut u = [0u8; FLIT_LEN];
                ends[from].poll_unit(now, &mut u);
                let to = 1 - from;
                ends[to].receive_unit(now, &u, received[to]);
                received[to] += 1;
            }
        }
        if ends[1].recv().is_some() {
            delivered_at = Some(now);
            break;
        }
        now += unit;
    }
    let (sent_at, delivered_at) = (sent_at.unwrap(), delivered_at.expect("never delivered"));
    let took = delivered_at.saturating_since(sent_at);
    std::println!("delivered after {took:?}, replays {}", ends[0].counters().replays);
    assert_eq!(ends[0].counters().replays, 0);
    // Ten flits span at most two blocks: 32 units of 640 ps. Without the rest of its block the packet
    // waited for the next periodic Update (1 us) to push the block out.
    assert!(took < Duration::from_ns(32 * 640 / 1000 + 10), "took {took:?}");
}

/// Two FEC links joined unit by unit from the physical layer's last ordered set (`index`).
struct FecPair {
    ends: [Link; 2],
    index: [u64; 2],
    now: Instant,
}

impl FecPair {
    fn up() -> FecPair {
        let config = DlConfig {
            fec: true,
            ..DlConfig::default()
        };
        let mut pair = FecPair {
            ends: [Link::new(config), Link::new(config)],
            index: [0; 2],
            now: Instant::ZERO,
        };
        for end in &mut pair.ends {
            end.phy_up(pair.now, LinkWidth::X8, Rate::Gen5);
        }
        pair
    }

    fn wire(&mut self, units: usize) {
        for _ in 0..units {
            for from in 0..2 {
                let mut u = [0u8; FLIT_LEN];
                self.ends[from].poll_unit(self.now, &mut u);
                let to = 1 - from;
                self.ends[to].receive_unit(self.now, &u, self.index[to]);
                self.index[to] += 1;
            }
            self.now += Duration::from_ps(640);
        }
    }
}

/// An end that is reset starts over from InitFc1, which takes its active partner down to initialise
/// again while the partner's physical layer stays up: the partner's FEC blocks must stay where the
/// physical layer counts them (a block every 16 units from its last ordered set). Started again from
/// the unit the InitFc1 arrived in, every block after it was read across two of the partner's, and
/// nothing got through until the physical layer retrained.
#[test]
fn a_partner_starting_over_keeps_the_fec_blocks_aligned() {
    let mut pair = FecPair::up();
    pair.wire(100);
    assert!(pair.ends[0].is_active() && pair.ends[1].is_active());
    let packet = [[1; FLIT_LEN]; 3];
    pair.ends[1].send(Vc::Posted, 1, &packet).unwrap();
    // A is reset: its physical layer trains again, and B's retrains with it (unit positions start
    // over from the ordered sets of training); B's data link holds what it has and resumes.
    pair.ends[0].phy_down();
    pair.ends[1].phy_retraining(pair.now);
    pair.index = [0; 2];
    for end in &mut pair.ends {
        end.phy_up(pair.now, LinkWidth::X8, Rate::Gen5);
    }
    pair.wire(300);
    assert!(
        pair.ends[0].is_active() && pair.ends[1].is_active(),
        "{:?} {:?}",
        pair.ends[0].state(),
        pair.ends[1].state()
    );
    pair.ends[0].send(Vc::Posted, 9, &packet).unwrap();
    pair.ends[1].send(Vc::Posted, 10, &packet).unwrap();
    pair.wire(100);
    assert_eq!(pair.ends[1].recv().map(|p| p.tl), Some(9));
    assert_eq!(pair.ends[0].recv().map(|p| p.tl), Some(10));
    for end in &pair.ends {
        assert_eq!(end.counters().fec_uncorrectable, 0);
        assert_eq!(end.counters().malformed, 0);
    }
}

/// A unit's position is its index modulo 16, so the index may run past `u64::MAX` and wrap (2^64 is a
/// whole number of blocks): units received in runs across the wrap (`receive_units`) keep their blocks.
/// Adding a run's offset to its first index overflowed there.
#[test]
fn unit_indexes_that_wrap_keep_the_fec_blocks() {
    let mut pair = FecPair::up();
    pair.index = [u64::MAX - 15; 2];
    let run = |pair: &mut FecPair, units: usize| {
        for _ in 0..units {
            let mut out = [[0u8; FLIT_LEN]; 6];
            for from in 0..2 {
                for u in &mut out {
                    pair.ends[from].poll_unit(pair.now, u);
                }
                let to = 1 - from;
                pair.ends[to].receive_units(pair.now, &out, pair.index[to]);
                pair.index[to] = pair.index[to].wrapping_add(out.len() as u64);
            }
            pair.now += Duration::from_ps(6 * 640);
        }
    };
    run(&mut pair, 40);
    assert!(pair.ends[0].is_active() && pair.ends[1].is_active());
    assert!(pair.index[0] < 1000, "the index wrapped");
    pair.ends[0].send(Vc::Posted, 9, &[[1; FLIT_LEN]; 3]).unwrap();
    run(&mut pair, 40);
    assert_eq!(pair.ends[1].recv().map(|p| p.tl), Some(9));
    for end in &pair.ends {
        assert_eq!(end.counters().fec_uncorrectable, 0);
    }
}
