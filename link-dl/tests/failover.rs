//! A link that fails for good hands its unacknowledged packets back, so that a fabric can send them
//! another way: together with what the partner received, they cover everything sent, in order.

use link_dl::flit::FLIT_LEN;
use link_dl::link::{DataLink, DlConfig};
use link_dl::Vc;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

type Link = DataLink<64, 256>;

/// Move `units` units each way between `a` and `b`, one unit time apart.
fn wire(a: &mut Link, b: &mut Link, now: &mut Instant, units: usize, sent: &mut [u64; 2]) {
    for _ in 0..units {
        let mut unit = [0u8; FLIT_LEN];
        a.poll_unit(*now, &mut unit);
        b.receive_unit(*now, &unit, sent[0]);
        sent[0] += 1;
        b.poll_unit(*now, &mut unit);
        a.receive_unit(*now, &unit, sent[1]);
        sent[1] += 1;
        *now += Duration::from_ps(640);
    }
}

#[test]
fn unacknowledged_packets_and_received_ones_cover_everything_sent() {
    for cut in [0usize, 1, 7, 25, 60, 200] {
        let mut a = Link::new(DlConfig::default());
        let mut b = Link::new(DlConfig::default());
        let mut now = Instant::ZERO;
        a.phy_up(now, LinkWidth::X8, Rate::Gen5);
        b.phy_up(now, LinkWidth::X8, Rate::Gen5);
        let mut units = [0u64; 2];
        while !(a.is_active() && b.is_active()) {
            wire(&mut a, &mut b, &mut now, 1, &mut units);
        }
        let mut sent = Vec::new();
        for k in 0..40u64 {
            let payload = vec![[k as u8; FLIT_LEN]; (k % 9) as usize];
            if a.send(Vc::Posted, k, &payload).is_ok() {
                sent.push((k, payload));
            }
        }
        assert!(sent.len() >= 20, "credit and replay room for a few packets");
        // The link dies after `cut` unit times: some packets arrived, some acknowledgements did not.
        wire(&mut a, &mut b, &mut now, cut, &mut units);
        let mut seen: Vec<(u64, Vec<[u8; FLIT_LEN]>)> = Vec::new();
        while let Some(p) = b.recv() {
            seen.push((p.tl, p.payload.to_vec()));
        }
        let mut taken = Vec::new();
        a.take_unacknowledged(|p| taken.push((p.tl, p.payload.to_vec())));
        a.phy_down();
        assert_eq!(a.unacknowledged(), 0);
        // Received: a prefix of what was sent. Taken back: a suffix, overlapping only in packets whose
        // acknowledgement had not come back yet.
        assert_eq!(&sent[..seen.len()], &seen[..], "cut {cut}");
        let first_taken = sent.len() - taken.len();
        assert_eq!(&sent[first_taken..], &taken[..], "cut {cut}");
        assert!(
            first_taken <= seen.len(),
            "cut {cut}: nothing lost between the two"
        );
        if cut == 0 {
            assert_eq!((seen.len(), taken.len()), (0, sent.len()));
        }
        if cut == 200 {
            assert_eq!(
                (seen.len(), taken.len()),
                (sent.len(), 0),
                "all delivered and acknowledged"
            );
        }
    }
}
