//! One end of a busy link is reset (its data link goes down and its physical layer trains again, the
//! partner's retraining with it) while the other end still holds packets of the old session: once both
//! are up again, each delivers exactly the packets sent in the new session, in order, and nothing of
//! the old one.

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::fuzz::BackToBack;
use link_dl::{DlConfig, DlEvent, Vc};
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// A transaction-layer header: the session (bits 20 up) and the packet's number in it.
fn tl(session: u64, k: u64) -> u64 {
    session << 20 | k
}

fn run(fec: bool, seed: u64) {
    let config = DlConfig {
        fec,
        ..DlConfig::default()
    };
    let mut rnd = xorshift(seed);
    let mut pair = BackToBack::<8, 64>::active(config).expect("the links come up");
    let payload = |k: u64| -> [Flit; 1] { [[k as u8; FLIT_LEN]] };
    let mut session = 0u64;
    let (mut sent, mut next) = ([0u64; 2], [0u64; 2]);
    // Whether each end is up in the current session (it said Up since the reset), and may send.
    let mut ready = [true; 2];
    let mut resets = 0;
    for _ in 0..100_000 {
        for (end, i) in [(&mut pair.a, 0), (&mut pair.b, 1)] {
            while let Some(event) = end.poll_event() {
                match event {
                    DlEvent::Up => ready[i] = true,
                    DlEvent::Down => ready[i] = false,
                    _ => {}
                }
            }
        }
        if ready[0]
            && pair
                .a
                .send(Vc::Posted, tl(session, sent[0]), &payload(sent[0]))
                .is_ok()
        {
            sent[0] += 1;
        }
        if ready[1]
            && pair
                .b
                .send(Vc::Posted, tl(session, sent[1]), &payload(sent[1]))
                .is_ok()
        {
            sent[1] += 1;
        }
        if resets < 3 && rnd() % 700 == 0 {
            resets += 1;
            let (reset, partner) = if rnd() % 2 == 0 {
                (&mut pair.a, &mut pair.b)
            } else {
                (&mut pair.b, &mut pair.a)
            };
            reset.phy_down();
            partner.phy_retraining(pair.now);
            // Unit positions start over from the ordered sets of training.
            pair.units = 0;
            reset.phy_up(pair.now, LinkWidth::X8, Rate::Gen5);
            partner.phy_up(pair.now, LinkWidth::X8, Rate::Gen5);
            for end in [&mut pair.a, &mut pair.b] {
                while end.recv().is_some() {}
                while end.poll_event().is_some() {}
            }
            session += 1;
            (sent, next, ready) = ([0; 2], [0; 2], [false; 2]);
        }
        pair.step();
        for (end, i) in [(&mut pair.b, 0), (&mut pair.a, 1)] {
            while let Some(r) = end.recv() {
                assert_eq!(
                    r.tl >> 20,
                    session,
                    "fec {fec} seed {seed}: a packet of an old session delivered ({:x})",
                    r.tl
                );
                assert_eq!(r.tl, tl(session, next[i]), "fec {fec} seed {seed}: end {i}");
                next[i] += 1;
            }
        }
    }
    assert!(
        next[0] > 100 && next[1] > 100,
        "fec {fec} seed {seed}: {next:?} delivered since the last reset"
    );
}

#[test]
fn after_a_reset_only_packets_of_the_new_session_are_delivered() {
    for fec in [false, true] {
        for seed in 0..12 {
            run(fec, seed);
        }
    }
}
