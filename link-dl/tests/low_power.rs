//! The data link across the physical layer's low-power state (L1): the endpoint holds the data link's
//! timers there, as through a retrain, and the link resumes when woken.

use link_dl::sim::{self, FlitFaults};
use link_dl::{DlConfig, Vc};
use link_phy::channel::ChannelConfig;
use link_phy::ltssm::{LtssmState, PortConfig, Role, Timing};
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

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
    let mut pair = sim::pair::<64>(
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
