//! `DataLink::has_packet_to_transmit`, which a driver reads to tell a wire that is idle because nothing
//! was given to it from one that is busy: a packet taken and not yet wholly on the wire, or one to send
//! again.

mod common;

use link_dl::flit::FLIT_LEN;
use link_dl::Vc;

#[test]
fn a_packet_is_to_transmit_until_its_last_flit_leaves_and_again_once_it_must_be_replayed() {
    let mut link = common::Joined::active();
    assert!(!link.a.has_packet_to_transmit(), "nothing taken yet");
    link.a.send(Vc::Posted, 1, &[[7; FLIT_LEN]; 8]).unwrap();
    assert!(link.a.has_packet_to_transmit());
    // Out on the wire with a bit flipped in every unit: it leaves whole, then no packet is left to send.
    let mut units = 0;
    while link.a.has_packet_to_transmit() {
        link.wire_changing(1, |unit| unit[5] ^= 1);
        units += 1;
        assert!(units < 64, "a 9-flit packet leaves within 64 unit times");
    }
    assert!(units >= 9, "its header and 8 payload flits, {units} units");
    assert!(link.b.recv().is_none(), "every flit was hit: nothing delivered");
    // A second packet, clean: the partner, whose one NAK (for the hit unit ahead of the first packet)
    // came before any packet had gone out, so that there was nothing to replay, and which sends no second
    // until a good packet arrives (spec 2.4), discards it too, still looking for its framing. The replay
    // timer, started when the first packet had gone, brings both back to be sent again.
    link.a.send(Vc::Posted, 2, &[[8; FLIT_LEN]; 8]).unwrap();
    while link.a.has_packet_to_transmit() {
        link.wire(1);
    }
    assert!(link.b.recv().is_none(), "the second is discarded too");
    let c = link.a.counters();
    assert_eq!(
        (c.naks_received, c.replays),
        (1, 0),
        "the NAK came too early to replay anything"
    );
    let mut waited = 0;
    while !link.a.has_packet_to_transmit() {
        link.wire(1);
        waited += 1;
        // 10 us of replay timer at 640 ps a unit.
        assert!(waited < 20_000, "the replay timer runs out");
    }
    assert!(link.a.counters().replays > 0);
    while link.a.has_packet_to_transmit() {
        link.wire(1);
    }
    link.wire(4);
    for tl in [1, 2] {
        let p = link.b.recv().expect("the replays arrive");
        assert_eq!((p.tl, p.payload.len()), (tl, 8));
    }
    assert!(link.b.recv().is_none() && !link.a.has_packet_to_transmit());
}
