//! A packet is sent from its replay slot, sealed in place. When a replay of it is under way and the
//! acknowledgement of its first transmission arrives, the slot is freed and may be written by the next
//! `send` at once: the rest of the replayed packet must still be the packet it started as.

mod common;

use common::Joined;
use link_dl::flit::{kind, ControlFlit, ControlKind, Flit, FlitKind, FLIT_LEN};
use link_dl::Vc;
use link_phy::time::Duration;

/// One unit from `a`, delivered to `b`.
fn a_to_b(j: &mut Joined) -> Flit {
    let mut unit = [0u8; FLIT_LEN];
    j.a.poll_unit(j.now, &mut unit);
    j.b.receive_unit(j.now, &unit, j.units[0]);
    j.units[0] += 1;
    j.now += Duration::from_ps(640);
    unit
}

/// The next control flit `b` sends of `wanted` kind, held back from `a`.
fn b_control(j: &mut Joined, wanted: ControlKind) -> ControlFlit {
    for _ in 0..100_000 {
        let mut unit = [0u8; FLIT_LEN];
        j.b.poll_unit(j.now, &mut unit);
        j.now += Duration::from_ps(640);
        if let Ok(control) = ControlFlit::parse(&unit) {
            if control.kind == wanted {
                return control;
            }
        }
    }
    panic!("b never sent a {wanted:?} flit");
}

fn payload(fill: u8) -> [Flit; 8] {
    core::array::from_fn(|i| [fill ^ i as u8; FLIT_LEN])
}

#[test]
fn a_replayed_packet_keeps_its_flits_when_its_slot_is_freed_mid_packet() {
    let mut j = Joined::active();
    j.wire(200);
    // What `b` says before the first packet arrives, turned into a NAK: "replay everything".
    let before = b_control(&mut j, ControlKind::Update);
    let nak = ControlFlit {
        kind: ControlKind::Nak,
        ..before
    }
    .emit();

    let first = payload(0x11);
    j.a.send(Vc::Posted, 0x1234, &first).unwrap();
    // The first transmission, all of it, to `b`.
    let mut packet_flits = 0;
    while packet_flits < 1 + first.len() {
        let unit = a_to_b(&mut j);
        if packet_flits > 0 || kind(&unit) == Ok(FlitKind::Packet) {
            packet_flits += 1;
        }
    }
    let ack = b_control(&mut j, ControlKind::Update);

    // The replay starts, and three of its flits go out...
    j.a.receive_unit(j.now, &nak, j.units[1]);
    j.units[1] += 1;
    let mut replayed = 0;
    while replayed < 3 {
        let unit = a_to_b(&mut j);
        if replayed > 0 || kind(&unit) == Ok(FlitKind::Packet) {
            replayed += 1;
        }
    }
    // ...when the first transmission's acknowledgement frees the slot, and the next packet takes it.
    j.a.receive_unit(j.now, &ack.emit(), j.units[1]);
    j.units[1] += 1;
    assert_eq!(j.a.unacknowledged(), 0);
    let second = payload(0xA0);
    j.a.send(Vc::Posted, 0x5678, &second).unwrap();
    for _ in 0..100 {
        a_to_b(&mut j);
    }

    // The replay's rest checked out (a duplicate, not a CRC error), and both packets arrived once.
    assert_eq!(j.b.counters().crc_errors, 0, "{:?}", j.b.counters());
    assert_eq!(j.b.counters().duplicates, 1, "{:?}", j.b.counters());
    let got = j.b.recv().unwrap();
    assert_eq!((got.tl, got.payload.as_slice()), (0x1234, &first[..]));
    let got = j.b.recv().unwrap();
    assert_eq!((got.tl, got.payload.as_slice()), (0x5678, &second[..]));
    assert!(j.b.recv().is_none());
}
