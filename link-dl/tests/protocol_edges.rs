//! Edge cases of acknowledgement and initialisation that a well-behaved partner never produces but a
//! corrupted flit, a reset or a stale packet can: the data link must neither lose nor invent packets.

mod common;

use common::{Joined, Link};
use link_dl::flit::{seal_packet, ControlFlit, ControlKind, Flit, PacketHeader, FLIT_LEN};
use link_dl::link::DlConfig;
use link_dl::seq::Seq;
use link_dl::Vc;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::Instant;

/// A sends packets 0x100, 0x101 and 0x102 (their TL words), one payload flit each.
fn send_three(j: &mut Joined) {
    for i in 0..3u64 {
        j.a.send(Vc::Posted, 0x100 + i, &[[i as u8; FLIT_LEN]]).unwrap();
    }
}

/// The TL words of the packets B has delivered, in order.
fn received(j: &mut Joined) -> Vec<u64> {
    core::iter::from_fn(|| j.b.recv().map(|p| p.tl)).collect()
}

/// An Update acknowledging everything up to `ack`, with no credits.
fn update_acking(ack: u16) -> Flit {
    ControlFlit {
        kind: ControlKind::Update,
        ack: Seq::new(ack),
        credits: [0; 4],
    }
    .emit()
}

/// Two ends initialising, A with `config`.
fn with_config_at_a(config: DlConfig) -> Joined {
    let mut j = Joined::initialising();
    j.a = Link::new(config);
    j.a.phy_up(j.now, LinkWidth::X8, Rate::Gen5);
    j
}

/// An acknowledgement of sequence numbers that were accepted by `send` but never put on the wire cannot
/// have come from the partner: it must not free them from the replay buffer, or they are never sent.
#[test]
fn an_ack_for_packets_never_transmitted_frees_nothing() {
    let mut j = Joined::active();
    j.wire(50);
    send_three(&mut j);
    // Before A has transmitted any of them, an Update claims that seq 0 to 2 arrived.
    let bogus = update_acking(2);
    j.a.receive_unit(j.now, &bogus, j.units[1]);
    j.units[1] += 1;
    assert_eq!(
        j.a.unacknowledged(),
        3,
        "nothing was transmitted, so nothing is acknowledged"
    );
    j.wire(200);
    assert_eq!(received(&mut j), [0x100, 0x101, 0x102]);
}

/// The header flit and payload of a packet as a partner would send it, sealed.
fn packet(seq: u16, tl: u64, payload: &[Flit]) -> Vec<Flit> {
    let mut head = [0u8; FLIT_LEN];
    PacketHeader {
        payload_flits: payload.len() as u8,
        vc: Vc::Posted,
        seq: Seq::new(seq),
        ack: Seq::new(1023),
        credit_vc: Vc::Request,
        credit: 0,
        tl,
    }
    .emit(&mut head)
    .unwrap();
    let mut flits = vec![head];
    flits.extend_from_slice(payload);
    let mut bytes = flits.concat();
    seal_packet(&mut bytes);
    bytes
        .chunks_exact(FLIT_LEN)
        .map(|c| c.try_into().unwrap())
        .collect()
}

/// A partner sends packets only once it is Active, which it becomes on this end's InitFc2: a packet that
/// arrives while this end is in InitFc1 is the partner's from before this end was reset (its sequence
/// number happens to be the one expected after a reset, as a replay of the first packet is). Taking it
/// would deliver a packet of the old session in the new one (perhaps a second time), and the credit it
/// returns when the layer above takes it was never consumed in the new session.
#[test]
fn a_packet_received_before_the_sizes_are_exchanged_is_not_delivered() {
    let mut link = Link::new(DlConfig::default());
    link.phy_up(Instant::ZERO, LinkWidth::X8, Rate::Gen5);
    // A control flit first, so that the receiver has its framing.
    let update = update_acking(7);
    link.receive_unit(Instant::ZERO, &update, 0);
    for (i, flit) in packet(0, 0x42, &[[0x5A; FLIT_LEN]]).iter().enumerate() {
        link.receive_unit(Instant::ZERO, flit, 1 + i as u64);
    }
    assert!(
        !link.received_waiting(),
        "a packet delivered before the link initialised"
    );
    assert_eq!(link.counters().packets_received, 0);
    assert_eq!(link.expected(), Seq::new(0));
}

/// A NAK while every packet queued is still unsent asks for nothing the partner can have missed: it is
/// no replay, and NAKs like it do not add up to a retrain request.
#[test]
fn a_nak_with_only_unsent_packets_queued_is_no_replay() {
    let mut j = Joined::active();
    j.wire(50);
    let before = *j.a.counters();
    send_three(&mut j);
    // The last acknowledgement A had, again, as NAKs: nothing after it was transmitted yet.
    for _ in 0..20 {
        let nak = ControlFlit {
            kind: ControlKind::Nak,
            ack: Seq::new(0).prev(),
            credits: [0; 4],
        }
        .emit();
        j.a.receive_unit(j.now, &nak, j.units[1]);
        j.units[1] += 1;
    }
    let c = j.a.counters();
    assert_eq!(c.naks_received - before.naks_received, 20);
    assert_eq!(
        (
            c.replays - before.replays,
            c.retrain_requests - before.retrain_requests
        ),
        (0, 0),
        "{c:?}"
    );
    j.wire(200);
    assert_eq!(received(&mut j), [0x100, 0x101, 0x102]);
}

/// The replay timer runs while a transmitted packet awaits its acknowledgement: one acknowledged with
/// the rest still waiting for the wire leaves nothing to time out (it starts again when they go).
#[test]
fn the_replay_timer_waits_for_a_packet_to_go_out() {
    let mut j = Joined::active();
    j.wire(50);
    let before = *j.a.counters();
    j.a.send(Vc::Posted, 0x100, &[[1; FLIT_LEN]]).unwrap();
    // A puts it on the wire (the partner never hears it: this test plays the partner).
    let mut unit = [0u8; FLIT_LEN];
    while j.a.counters().packets_transmitted == before.packets_transmitted {
        j.a.poll_unit(j.now, &mut unit);
        j.now += link_phy::time::Duration::from_ps(640);
    }
    for i in 1..3u64 {
        j.a.send(Vc::Posted, 0x100 + i, &[[1; FLIT_LEN]]).unwrap();
    }
    let ack = update_acking(0);
    j.a.receive_unit(j.now, &ack, j.units[1]);
    assert_eq!(j.a.unacknowledged(), 2);
    j.a.handle_timeout(j.now + link_phy::time::Duration::from_ms(1));
    let c = j.a.counters();
    assert_eq!(
        (
            c.replay_timeouts - before.replay_timeouts,
            c.replays - before.replays
        ),
        (0, 0),
        "{c:?}"
    );
}

/// An `ack_coalesce` of 0 would have a link owe an acknowledgement with nothing received and send
/// nothing but Updates: it is taken as 1, and packets get through.
#[test]
fn an_ack_coalesce_of_zero_is_taken_as_one() {
    let config = DlConfig {
        ack_coalesce: 0,
        ..DlConfig::default()
    };
    let mut j = with_config_at_a(config);
    assert_eq!(j.a.config().ack_coalesce, 1);
    j.wire(50);
    send_three(&mut j);
    j.wire(100);
    assert_eq!(received(&mut j), [0x100, 0x101, 0x102]);
}

/// An `update_interval` shorter than a unit time would have an Update due in every slot, and Updates go
/// before packets: at least two unit times are taken, and packets get through.
#[test]
fn an_update_interval_of_zero_leaves_room_for_packets() {
    let config = DlConfig {
        update_interval: link_phy::time::Duration::ZERO,
        ..DlConfig::default()
    };
    let mut j = with_config_at_a(config);
    j.wire(50);
    send_three(&mut j);
    j.wire(100);
    assert_eq!(received(&mut j), [0x100, 0x101, 0x102]);
}

/// A receiver cannot have freed flits it was never sent: an Update whose freed-flits counter runs ahead of
/// what this end has sent (a forged or corrupted one whose CRC checks) is a flow-control protocol error. It
/// is counted and changes nothing, so the credit stays the partner's buffer size, and packets still cross.
#[test]
fn an_update_claiming_more_credit_than_was_sent_is_refused_and_counted() {
    let mut j = Joined::active();
    j.wire(50);
    let sizes = Vc::ALL.map(|vc| j.a.credit(vc));
    for claim in [1, 100, 0x7fff] {
        let forged = ControlFlit {
            kind: ControlKind::Update,
            ack: Seq::new(0).prev(),
            credits: [claim; 4],
        }
        .emit();
        j.a.receive_unit(j.now, &forged, j.units[1]);
        j.units[1] += 1;
    }
    assert_eq!(
        Vc::ALL.map(|vc| j.a.credit(vc)),
        sizes,
        "credit beyond the buffer"
    );
    assert_eq!(j.a.counters().credit_protocol_errors, 3 * 4, "per channel");
    send_three(&mut j);
    j.wire(200);
    assert_eq!(received(&mut j), [0x100, 0x101, 0x102]);
    // Their credit comes back with B's next Update (at least every microsecond).
    j.wire(2_000);
    assert_eq!(Vc::ALL.map(|vc| j.a.credit(vc)), sizes);
    assert_eq!(j.a.counters().credit_protocol_errors, 3 * 4);
}

/// `replays_before_retrain` may be any `u8`: with 255, a partner that NAKs without ever acknowledging gets
/// 255 replays and then a retrain request on the 256th, as with any other setting (the count of replays
/// without progress overflowed its `u8` there).
#[test]
fn a_retrain_after_255_replays_is_asked_for_on_the_256th() {
    let mut j = with_config_at_a(DlConfig {
        replays_before_retrain: 255,
        ..DlConfig::default()
    });
    while !(j.a.is_active() && j.b.is_active()) {
        j.wire(1);
    }
    j.wire(50);
    j.a.send(Vc::Posted, 0x100, &[[1; FLIT_LEN]]).unwrap();
    // A puts it on the wire; this test plays the partner, which never acknowledges it.
    let before = *j.a.counters();
    let mut unit = [0u8; FLIT_LEN];
    while j.a.counters().packets_transmitted == before.packets_transmitted {
        j.a.poll_unit(j.now, &mut unit);
    }
    let nak = ControlFlit {
        kind: ControlKind::Nak,
        ack: Seq::new(0).prev(),
        credits: [0; 4],
    }
    .emit();
    let mut retrains = Vec::new();
    for n in 1..=300u32 {
        j.a.receive_unit(j.now, &nak, j.units[1]);
        j.units[1] += 1;
        if j.a.counters().retrain_requests > before.retrain_requests + retrains.len() as u64 {
            retrains.push(n);
        }
    }
    assert_eq!(j.a.counters().replays - before.replays, 300);
    assert_eq!(retrains, [256], "retrain requests after these NAKs");
}

/// Skipping more idle update periods than time can hold leaves the next Update at the end of time and the
/// counters at their largest (the product of the periods and the interval overflowed).
#[test]
fn skipping_more_idle_periods_than_time_holds_saturates() {
    let mut j = Joined::active();
    while j.a.poll_event().is_some() {}
    for _ in 0..20_000 {
        if j.a.idle_update().is_some() {
            break;
        }
        j.wire(1);
    }
    assert!(j.a.idle_update().is_some(), "A has settled in idle");
    j.a.skip_idle_updates(u64::MAX / 2);
    assert_eq!(j.a.poll_timeout(), Some(Instant(u64::MAX)));
    j.a.skip_idle_updates(u64::MAX / 2 + 2);
    let c = j.a.counters();
    assert_eq!((c.control_sent, c.flits_transmitted), (u64::MAX, u64::MAX));
    assert_eq!(j.a.poll_timeout(), Some(Instant(u64::MAX)));
}
