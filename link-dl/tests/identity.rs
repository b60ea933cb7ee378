//! Each end of a link learns who is at the other end (node ID and port) from the identity flits sent
//! while the link initialises (`docs/spec.md` section 2.8), before it becomes active.

mod common;

use common::Joined;
use link_dl::flit::{is_ident, IdentFlit, FLIT_LEN};
use link_dl::link::DlState;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::Instant;

const A: IdentFlit = IdentFlit {
    node: 0x0123_4567_89AB_CDEF,
    port: 17,
};
const B: IdentFlit = IdentFlit {
    node: 0xFEDC_BA98_7654_3210,
    port: 2,
};

/// Two ends with identities A and B, their physical layers just up.
fn initialising() -> Joined {
    let mut j = Joined::initialising();
    j.a.set_ident(A);
    j.b.set_ident(B);
    j
}

#[test]
fn each_end_knows_the_other_before_it_is_active() {
    let mut j = initialising();
    assert_eq!((j.a.partner(), j.b.partner()), (None, None));
    for _ in 0..100 {
        j.wire(1);
        for (link, other) in [(&j.a, B), (&j.b, A)] {
            if link.state() != DlState::InitFc1 {
                assert_eq!(
                    link.partner(),
                    Some(other),
                    "past InitFc1 only with the partner known"
                );
            }
        }
    }
    assert!(j.a.is_active() && j.b.is_active());
    assert_eq!((j.a.ident(), j.b.ident()), (A, B));
}

#[test]
fn a_link_whose_identity_was_never_set_says_node_0_port_0() {
    let j = Joined::active();
    assert_eq!(
        (j.a.partner(), j.b.partner()),
        (Some(IdentFlit::default()), Some(IdentFlit::default()))
    );
}

#[test]
fn a_link_waits_in_init_fc1_until_an_identity_flit_gets_through() {
    let mut j = initialising();
    // Every identity flit from A is corrupted for the first 200 unit times: B hears A's sizes but not
    // who A is, so B stays in InitFc1 (and A, without B's InitFc2, in InitFc2).
    j.wire_changing(200, |unit| {
        if is_ident(unit) {
            unit[9] ^= 0x40;
        }
    });
    assert_eq!(j.b.state(), DlState::InitFc1);
    assert_eq!(j.b.partner(), None);
    assert_eq!(j.a.state(), DlState::InitFc2);
    assert!(j.b.counters().crc_errors > 0);
    j.wire(40);
    assert!(j.a.is_active() && j.b.is_active());
    assert_eq!((j.a.partner(), j.b.partner()), (Some(B), Some(A)));
}

#[test]
fn the_partner_is_forgotten_when_the_link_goes_down_and_relearned_after_a_reset() {
    let mut j = initialising();
    j.wire(20);
    assert_eq!(j.b.partner(), Some(A));
    // A is replaced by another node's port: B learns the new identity when A starts over.
    let other = IdentFlit { node: 7, port: 63 };
    j.a.phy_down();
    assert_eq!(j.a.partner(), None);
    j.a.set_ident(other);
    j.a.phy_up(j.now, LinkWidth::X8, Rate::Gen5);
    j.wire(40);
    assert!(j.a.is_active() && j.b.is_active());
    assert_eq!((j.a.partner(), j.b.partner()), (Some(B), Some(other)));
    j.b.phy_down();
    assert_eq!(j.b.partner(), None);
}

#[test]
fn bursts_send_the_same_initialisation_flits_as_single_units() {
    let mut single = initialising().a;
    let mut bursts = initialising().a;
    let now = Instant::ZERO;
    let mut expected = Vec::new();
    for _ in 0..40 {
        let mut unit = [0u8; FLIT_LEN];
        single.poll_unit(now, &mut unit);
        expected.push(unit);
    }
    let mut got = Vec::new();
    for len in [1, 2, 3, 1, 5, 4, 7, 1, 16] {
        let mut out = vec![[0u8; FLIT_LEN]; len];
        assert_eq!(bursts.poll_units(now, &mut out), len);
        got.extend(out);
    }
    assert_eq!(got, expected);
    assert_eq!(
        expected.iter().filter(|u| is_ident(u)).count(),
        20,
        "every other flit"
    );
    assert_eq!(single.counters(), bursts.counters());
}
