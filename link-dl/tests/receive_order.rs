//! `recv` hands packets up in the order they arrived, whichever channels they came on.

mod common;

use link_dl::flit::FLIT_LEN;
use link_dl::Vc;

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
        let mut link = common::Joined::active();
        let mut sent = Vec::new();
        for (k, &vc) in pattern.iter().enumerate() {
            let payload = vec![[k as u8; FLIT_LEN]; k % 3];
            if link.a.send(Vc::ALL[vc], k as u64, &payload).is_ok() {
                sent.push((k as u64, Vc::ALL[vc]));
            }
        }
        assert!(sent.len() >= 20, "room for a few packets");
        link.wire(2000);
        let mut got = Vec::new();
        while let Some(p) = link.b.recv() {
            got.push((p.tl, p.vc));
        }
        assert_eq!(got, sent, "channels {pattern:?}");
    }
}
