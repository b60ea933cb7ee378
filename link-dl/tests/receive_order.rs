//! `recv` hands packets up in the order they arrived, whichever channels they came on.

mod common;

use link_dl::flit::FLIT_LEN;
use link_dl::Vc;
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[test]
fn packets_come_up_in_arrival_order_across_channels() {
    // Channel patterns: one channel only, two alternating, and a pseudo-random mix of all four.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x9E37_79B9);
    let mixed: Vec<usize> = (0..40).map(|_| (rng.next_u64() % 4) as usize).collect();
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
