//! `recv` hands packets up in the order they arrived, whichever channels they came on.

use link_dl::flit::FLIT_LEN;
use link_dl::link::{DataLink, DlConfig};
use link_dl::Vc;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

type Link = DataLink<64, 256>;

/// Move one unit each way between `a` and `b`, one unit time apart.
fn step(a: &mut Link, b: &mut Link, now: &mut Instant, sent: &mut [u64; 2]) {
    let mut unit = [0u8; FLIT_LEN];
    a.poll_unit(*now, &mut unit);
    b.receive_unit(*now, &unit, sent[0]);
    sent[0] += 1;
    b.poll_unit(*now, &mut unit);
    a.receive_unit(*now, &unit, sent[1]);
    sent[1] += 1;
    *now += Duration::from_ps(640);
}

#[test]
fn packets_come_up_in_arrival_order_across_channels() {
    // Channel patterns: one channel only, two alternating, and a pseudo-random mix of all four.
    let mut x = 0x9E37_79B9u32;
    let mixed: Vec<usize> = (0..40)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 4) as usize
        })
        .collect();
    for pattern in [vec![1; 40], (0..40).map(|k| k % 2 * 2).collect(), mixed] {
        let mut a = Link::new(DlConfig::default());
        let mut b = Link::new(DlConfig::default());
        let mut now = Instant::ZERO;
        a.phy_up(now, LinkWidth::X8, Rate::Gen5);
        b.phy_up(now, LinkWidth::X8, Rate::Gen5);
        let mut units = [0u64; 2];
        while !(a.is_active() && b.is_active()) {
            step(&mut a, &mut b, &mut now, &mut units);
        }
        let mut sent = Vec::new();
        for (k, &vc) in pattern.iter().enumerate() {
            let payload = vec![[k as u8; FLIT_LEN]; k % 3];
            if a.send(Vc::ALL[vc], k as u64, &payload).is_ok() {
                sent.push((k as u64, Vc::ALL[vc]));
            }
        }
        assert!(sent.len() >= 20, "room for a few packets");
        for _ in 0..2000 {
            step(&mut a, &mut b, &mut now, &mut units);
        }
        let mut got = Vec::new();
        while let Some(p) = b.recv() {
            got.push((p.tl, p.vc));
        }
        assert_eq!(got, sent, "channels {pattern:?}");
    }
}
