//! With FEC, a packet's flits reach the partner only in a whole block: a driver that moves units while
//! the link has output pending must not leave a block half sent.

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
