//! Edge cases of acknowledgement and initialisation that a well-behaved partner never produces but a
//! corrupted flit, a reset or a stale packet can: the data link must neither lose nor invent packets.

mod common;

use common::Joined;
use link_dl::flit::{ControlFlit, ControlKind, FLIT_LEN};
use link_dl::seq::Seq;
use link_dl::Vc;

/// An acknowledgement of sequence numbers that were accepted by `send` but never put on the wire cannot
/// have come from the partner: it must not free them from the replay buffer, or they are never sent.
#[test]
fn an_ack_for_packets_never_transmitted_frees_nothing() {
    let mut j = Joined::active();
    j.wire(50);
    for i in 0..3u64 {
        j.a.send(Vc::Posted, 0x100 + i, &[[i as u8; FLIT_LEN]]).unwrap();
    }
    // Before A has transmitted any of them, an Update claims that seq 0 to 2 arrived.
    let bogus = ControlFlit {
        kind: ControlKind::Update,
        ack: Seq::new(2),
        credits: [0; 4],
    }
    .emit();
    j.a.receive_unit(j.now, &bogus, j.units[1]);
    j.units[1] += 1;
    assert_eq!(
        j.a.unacknowledged(),
        3,
        "nothing was transmitted, so nothing is acknowledged"
    );
    j.wire(200);
    let mut got = Vec::new();
    while let Some(p) = j.b.recv() {
        got.push(p.tl);
    }
    assert_eq!(got, [0x100, 0x101, 0x102]);
}
