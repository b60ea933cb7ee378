//! The data link across the physical layer's low-power state (L1): the power-management handshake that
//! takes both ends there (PmEnterL1, PmRequestAck), the endpoint holding the data link's timers there, as
//! through a retrain, and the link resuming when woken, by a packet sent or by the caller.

use link_dl::sim::{self, FlitFaults, SimEndpoint};
use link_dl::{DlConfig, DlError, DlEvent, PowerState, Vc};
use link_phy::channel::ChannelConfig;
use link_phy::ltssm::{LtssmState, PortConfig, Role, Timing};
use link_phy::pair::LinkPair;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

type Pair = LinkPair<SimEndpoint<64>>;

/// A x2 link with fast timers, up to `max_rate` (a downstream port changes up to it once trained), and
/// `ber` on both directions, trained and with both data links active.
fn active_pair(max_rate: Rate, ber: f64) -> Pair {
    let port = |role| {
        let mut p = PortConfig::new(2, role);
        p.max_rate = max_rate;
        p.timing = Timing::fast();
        p
    };
    let channel = || {
        let mut c = ChannelConfig::clean(2);
        c.ber = ber;
        c
    };
    let mut pair = sim::pair::<64, 64>(
        [port(Role::Downstream), port(Role::Upstream)],
        DlConfig::default(),
        channel(),
        channel(),
        FlitFaults::default(),
        7,
    )
    .unwrap();
    let limit = Instant::ZERO + Duration::from_ms(50);
    assert!(pair.run_until(limit, |p| {
        p.a.ep.dl.is_active() && p.b.ep.dl.is_active() && p.a.ep.phy.rate() == max_rate && p.a.ep.phy.is_up()
    }));
    pair
}

fn asleep(pair: &Pair) -> bool {
    pair.a.ep.phy.state() == LtssmState::ElectricalIdle
        && pair.b.ep.phy.state() == LtssmState::ElectricalIdle
        && pair.a.ep.dl.power_state() == PowerState::Asleep
        && pair.b.ep.dl.power_state() == PowerState::Asleep
}

/// Every packet each end received, by its transaction-layer header, in order.
fn drain(pair: &mut Pair, got: &mut [Vec<u64>; 2]) {
    while let Some(p) = pair.b.ep.dl.recv() {
        got[0].push(p.tl);
    }
    while let Some(p) = pair.a.ep.dl.recv() {
        got[1].push(p.tl);
    }
}

/// Step until `done` holds or `limit` passes, taking every packet received into `got` as it comes (the
/// receive queues are as small as the replay buffer).
fn run_draining(
    pair: &mut Pair,
    limit: Instant,
    got: &mut [Vec<u64>; 2],
    done: impl Fn(&Pair) -> bool,
) -> bool {
    loop {
        drain(pair, got);
        if done(pair) {
            return true;
        }
        if pair.now() >= limit || !pair.step() {
            return false;
        }
    }
}

/// Send `n` packets from A (headers `base..`) and, if `both`, from B, as fast as the links take them.
fn send_some(pair: &mut Pair, base: u64, n: u64, both: bool) {
    for k in base..base + n {
        pair.a.ep.dl.send(Vc::Posted, k, &[[k as u8; 16]]).unwrap();
        if both {
            pair.b.ep.dl.send(Vc::Posted, k, &[[!(k as u8); 16]]).unwrap();
        }
    }
}

/// The handshake with packets in flight both ways: A asks for L1 while its and B's packets are still
/// unacknowledged. Neither end takes a new packet from then on, both finish what they had (every packet
/// arrives once, in order), and only then does the link go to L1, both ends' data links reporting it.
#[test]
fn the_handshake_takes_the_link_to_l1_after_everything_in_flight_arrives() {
    let mut pair = active_pair(Rate::Gen1, 0.0);
    send_some(&mut pair, 0, 20, true);
    pair.a.ep.dl.request_low_power().unwrap();
    assert_eq!(pair.a.ep.dl.power_state(), PowerState::Requesting);
    assert_eq!(
        pair.a.ep.dl.send(Vc::Posted, 99, &[]),
        Err(DlError::EnteringLowPower)
    );
    let mut got = [Vec::new(), Vec::new()];
    let limit = pair.now() + Duration::from_ms(1);
    let mut b_refused = false;
    while pair.now() < limit && !asleep(&pair) {
        drain(&mut pair, &mut got);
        if pair.b.ep.dl.power_state() == PowerState::Acknowledging {
            b_refused |= pair.b.ep.dl.send(Vc::Posted, 99, &[]) == Err(DlError::EnteringLowPower);
        }
        assert!(pair.step());
    }
    assert!(asleep(&pair));
    drain(&mut pair, &mut got);
    let sent: Vec<u64> = (0..20).collect();
    assert_eq!(got, [sent.clone(), sent]);
    assert!(b_refused, "B took packets while acknowledging");
    for ep in [&pair.a.ep, &pair.b.ep] {
        assert_eq!(ep.dl.unacknowledged(), 0);
        assert_eq!(ep.dl.counters().low_power_entries, 1);
        assert_eq!(ep.phy.counters().retrains, 0);
    }
    let mut events = Vec::new();
    while let Some(e) = pair.b.ep.dl.poll_event() {
        events.push(e);
    }
    assert_eq!(events.last(), Some(&DlEvent::LowPower));
}

/// A packet sent in L1 wakes the link: the data link asks its physical layer to, both ports go back to L0
/// through Recovery, and the packet arrives. The link is then in use again (`PowerState::On`).
#[test]
fn a_packet_sent_in_l1_wakes_the_link_and_arrives() {
    let mut pair = active_pair(Rate::Gen1, 0.0);
    pair.b.ep.dl.request_low_power().unwrap();
    let limit = pair.now() + Duration::from_ms(1);
    assert!(pair.run_until(limit, asleep));
    // Asleep, the link stays there: nothing is due.
    let until = pair.now() + Duration::from_us(200);
    pair.run_until(until, |_| false);
    assert!(asleep(&pair));
    let asleep_at = pair.transitions().len();
    pair.a.ep.dl.send(Vc::Posted, 0x77, &[[7; 16]; 2]).unwrap();
    let limit = pair.now() + Duration::from_ms(1);
    let mut got = [Vec::new(), Vec::new()];
    assert!(run_draining(&mut pair, limit, &mut got, |p| p
        .a
        .ep
        .dl
        .unacknowledged()
        == 0));
    assert_eq!(got[0], [0x77]);
    assert_eq!(pair.a.ep.dl.power_state(), PowerState::On);
    assert_eq!(pair.b.ep.dl.power_state(), PowerState::On);
    assert!(pair.a.ep.phy.is_up() && pair.b.ep.phy.is_up());
    assert_eq!(pair.a.ep.dl.counters().replay_timeouts, 0);
    // Back through Recovery, never Detect (a full retrain): both ports woke.
    let woke = &pair.transitions()[asleep_at..];
    assert!(woke.iter().all(|t| t.to != LtssmState::DetectQuiet), "{woke:?}");
    assert!(woke.iter().any(|t| t.to == LtssmState::RecoveryRcvrLock));
}

/// At a rate the downstream port changed up to, an electrical idle ordered set received unasked is
/// taken for the partner falling back from a failed speed change. In the handshake the port that granted
/// the request knows better: it follows its partner to L1 (before, asked only by the partner's set, it
/// went to Recovery.Speed, and the link retrained instead of sleeping).
#[test]
fn the_handshake_reaches_l1_at_a_rate_changed_up_to() {
    let mut pair = active_pair(Rate::Gen2, 0.0);
    assert_eq!(pair.a.ep.phy.counters().speed_changes, 1);
    let retrains = [
        pair.a.ep.phy.counters().retrains,
        pair.b.ep.phy.counters().retrains,
    ];
    pair.a.ep.dl.request_low_power().unwrap();
    let limit = pair.now() + Duration::from_ms(1);
    assert!(
        pair.run_until(limit, asleep),
        "{:?} / {:?}",
        pair.a.ep.phy.state(),
        pair.b.ep.phy.state()
    );
    assert_eq!(
        retrains,
        [
            pair.a.ep.phy.counters().retrains,
            pair.b.ep.phy.counters().retrains
        ]
    );
    assert_eq!(pair.a.ep.phy.rate(), Rate::Gen2);
}

/// Both ends ask at the same instant: each grants the other's request and goes on asking, and each goes
/// to L1 on the other's grant.
#[test]
fn both_ends_asking_at_once_reach_l1() {
    let mut pair = active_pair(Rate::Gen2, 0.0);
    pair.a.ep.dl.request_low_power().unwrap();
    pair.b.ep.dl.request_low_power().unwrap();
    let limit = pair.now() + Duration::from_ms(1);
    assert!(pair.run_until(limit, asleep));
}

/// With bit errors, handshake flits are lost now and then: the requests and grants repeat every update
/// interval until they get through, and nothing in flight is lost. Sleep and wake, ten times over.
#[test]
fn the_handshake_survives_bit_errors_and_repeats() {
    let mut pair = active_pair(Rate::Gen1, 1e-5);
    let mut got = [Vec::new(), Vec::new()];
    for round in 0..10u64 {
        send_some(&mut pair, round * 10, 10, true);
        pair.a.ep.dl.request_low_power().unwrap();
        let limit = pair.now() + Duration::from_ms(5);
        assert!(
            run_draining(&mut pair, limit, &mut got, asleep),
            "round {round}: {:?} / {:?}",
            pair.a.ep.dl.power_state(),
            pair.b.ep.dl.power_state()
        );
        // Woken by the caller this time.
        pair.b.ep.phy.wake();
        let limit = pair.now() + Duration::from_ms(5);
        assert!(pair.run_until(limit, |p| p.a.ep.phy.is_up()
            && p.b.ep.phy.is_up()
            && p.a.ep.dl.power_state() == PowerState::On
            && p.b.ep.dl.power_state() == PowerState::On));
    }
    drain(&mut pair, &mut got);
    let sent: Vec<u64> = (0..100).collect();
    assert_eq!(got, [sent.clone(), sent]);
    assert!(pair.ab.stats().flipped + pair.ba.stats().flipped > 0);
    assert_eq!(pair.a.ep.dl.counters().low_power_entries, 10);
}

/// A packet sent but not yet acknowledged when both ports go to L1 stays in the replay buffer without
/// its replay timer firing, however long the link sleeps (here 100 times the timeout), and arrives once
/// after the wake. Before, the data link did not know the link had left L0: its timer ran out in L1 and
/// counted replays of a packet that could not be on any wire.
#[test]
fn a_packet_unacknowledged_as_the_link_goes_to_l1_waits_for_the_wake() {
    let port = |role| {
        let mut p = PortConfig::new(2, role);
        p.max_rate = Rate::Gen1;
        p.timing = Timing::fast();
        p
    };
    let mut pair = sim::pair::<64, 64>(
        [port(Role::Downstream), port(Role::Upstream)],
        DlConfig::default(),
        ChannelConfig::clean(2),
        ChannelConfig::clean(2),
        FlitFaults::default(),
        1,
    )
    .unwrap();
    let limit = Instant::ZERO + Duration::from_ms(50);
    assert!(pair.run_until(limit, |p| p.a.ep.dl.is_active() && p.b.ep.dl.is_active()));
    pair.a.ep.dl.send(Vc::Posted, 0x1234, &[[0x5a; 16]; 8]).unwrap();
    let limit = pair.now() + Duration::from_ms(1);
    assert!(pair.run_until(limit, |p| p.a.ep.dl.counters().packets_transmitted == 1));
    assert_eq!(pair.a.ep.dl.unacknowledged(), 1);
    pair.a.ep.phy.request_low_power();
    pair.b.ep.phy.request_low_power();
    let sleep = pair.a.ep.dl.replay_timeout().saturating_mul(100);
    let until = pair.now() + sleep;
    pair.run_until(until, |_| false);
    assert_eq!(
        (pair.a.ep.phy.state(), pair.b.ep.phy.state()),
        (LtssmState::ElectricalIdle, LtssmState::ElectricalIdle)
    );
    assert_eq!(pair.a.ep.dl.counters().replay_timeouts, 0);
    pair.a.ep.phy.wake();
    let limit = pair.now() + Duration::from_ms(5);
    let mut received = Vec::new();
    pair.run_until(limit, |p| {
        p.a.ep.dl.unacknowledged() == 0 && p.b.ep.dl.received_waiting()
    });
    while let Some(packet) = pair.b.ep.dl.recv() {
        received.push(packet.tl);
    }
    assert_eq!(received, [0x1234]);
    assert_eq!(pair.a.ep.dl.unacknowledged(), 0);
    assert!(pair.a.ep.phy.is_up() && pair.b.ep.phy.is_up());
}

/// A PmEnterL1 the partner never sent (a corrupted flit that passed the CRC, here put on the wire by
/// hand) makes B hold its packets back, but only until A's next plain Update shows A is not asking:
/// then B takes packets again, and they arrive. Before, B refused every packet for ever.
#[test]
fn a_forged_low_power_request_holds_packets_back_only_until_the_next_update() {
    use link_dl::flit::{ControlFlit, ControlKind};
    use link_dl::fuzz::BackToBack;
    use link_dl::seq::Seq;
    let mut pair = BackToBack::<64, 64>::active(DlConfig::default()).unwrap();
    let forged = ControlFlit {
        kind: ControlKind::PmEnterL1,
        ack: Seq::new(0).prev(),
        credits: [0; 4],
    }
    .emit();
    pair.b.receive_unit(pair.now, &forged, pair.units);
    assert_eq!(pair.b.power_state(), PowerState::Acknowledging);
    assert_eq!(pair.b.send(Vc::Posted, 1, &[]), Err(DlError::EnteringLowPower));
    let mut sent = 0;
    let mut received = 0;
    for _ in 0..100_000 {
        if sent < 10 && pair.b.send(Vc::Posted, sent, &[]).is_ok() {
            sent += 1;
        }
        pair.step();
        while let Some(p) = pair.a.recv() {
            assert_eq!(p.tl, received);
            received += 1;
        }
        if received == 10 {
            break;
        }
    }
    assert_eq!(received, 10);
    assert_eq!(pair.b.power_state(), PowerState::On);
    assert!(!pair.b.grants_low_power());
}

/// A PmRequestAck that A never asked for yet (forged: A still has packets unacknowledged, so it has not
/// sent PmEnterL1) does not take the link to L1 holding them; A waits for them to be acknowledged, as its
/// handshake says.
#[test]
fn a_forged_low_power_answer_does_not_take_unacknowledged_packets_to_sleep() {
    use link_dl::flit::{ControlFlit, ControlKind};
    use link_dl::fuzz::BackToBack;
    use link_dl::seq::Seq;
    let mut pair = BackToBack::<64, 64>::active(DlConfig::default()).unwrap();
    for tl in 0..4 {
        pair.a.send(Vc::Posted, tl, &[]).unwrap();
    }
    pair.a.request_low_power().unwrap();
    assert_eq!(pair.a.power_state(), PowerState::Requesting);
    let forged = ControlFlit {
        kind: ControlKind::PmRequestAck,
        ack: Seq::new(0).prev(),
        credits: [0; 4],
    }
    .emit();
    pair.a.receive_unit(pair.now, &forged, pair.units);
    assert_eq!(
        pair.a.take_power_request(),
        None,
        "a forged answer took 4 unacknowledged packets to L1"
    );
    assert_eq!(pair.a.unacknowledged(), 4);
}
