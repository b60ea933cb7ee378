//! A link monitor reading a capture of a port's transmitter gives the data stream the partner's port
//! delivers: at 8b/10b learning the lane numbers from the training sets, at 128b/130b with them given,
//! with the lanes captured out of step by up to several symbols or blocks.
#![cfg(feature = "std")]

use link_phy::channel::ChannelConfig;
use link_phy::ltssm::{LaneNumbers, LinkEvent, LinkMonitor, MonitorEvent, Port, PortConfig, Role, Timing};
use link_phy::pair::{replay_lanes, LinkPair, Recording, Side};
use link_phy::rate::{LineCode, Rate};
use link_phy::time::Instant;

/// Train `lanes` lanes (wired `reversed`) up to `max_rate`, send `units` units of a counting pattern from
/// B in L0, and return what A's port delivered and B's tap recorded at `rate`.
fn run(lanes: usize, max_rate: Rate, rate: Rate, reversed: bool, units: usize) -> (Vec<u8>, Recording) {
    let port = |role| {
        let mut config = PortConfig::new(lanes, role);
        config.max_rate = max_rate;
        config.timing = Timing::fast();
        Port::new(config, Instant::ZERO).unwrap()
    };
    let tap = |role| Recording::new(port(role), rate);
    let mut channel = ChannelConfig::clean(lanes);
    channel.reversed = reversed;
    let mut pair = LinkPair::with_nodes(
        tap(Role::Downstream),
        tap(Role::Upstream),
        channel.clone(),
        channel,
    );
    assert!(pair.train(Instant(20_000_000_000)), "the link trains");
    let (mut sent, mut delivered) = (0u64, Vec::new());
    while delivered.len() < units * 16 {
        assert!(pair.now() < Instant(40_000_000_000), "the data arrives");
        pair.step_with(
            &mut |side, buf| {
                if side == Side::B {
                    for byte in buf {
                        *byte = (sent % 251) as u8 + 1;
                        sent += 1;
                    }
                } else {
                    buf.fill(0);
                }
            },
            &mut |side, units, _| {
                if side == Side::A {
                    delivered.extend_from_slice(units);
                }
            },
        );
    }
    let LinkPair { b, .. } = pair;
    (delivered, b)
}

/// What a monitor given `numbers` makes of the recorded lanes, each delayed by its entry of `delay_bits`:
/// its events (but training sets and SKP), and the units.
fn monitor(
    code: LineCode,
    numbers: LaneNumbers,
    lanes: &[Vec<(u64, u32)>],
    delay_bits: &[u32],
) -> (Vec<String>, Vec<u8>, LinkMonitor) {
    let mut m = LinkMonitor::new(code, numbers).unwrap();
    let (mut events, mut units) = (Vec::new(), Vec::new());
    replay_lanes(&mut m, lanes, delay_bits, &mut |e| match e {
        LinkEvent::Units(u) => units.extend_from_slice(u),
        LinkEvent::Lane {
            event: MonitorEvent::Training(_) | MonitorEvent::Skip,
            ..
        } => {}
        other => events.push(format!("{other:?}")),
    });
    (events, units, m)
}

/// The monitor's stream is the delivered one, from the first unit of data (after the idle of
/// Configuration.Idle, which a port delivers only from L0 on) to the units still on their way at the end.
fn assert_stream_is(units: &[u8], delivered: &[u8]) {
    let data = |s: &[u8]| {
        s.chunks(16)
            .position(|u| u.iter().any(|&b| b != 0))
            .expect("data")
            * 16
    };
    let (units, delivered) = (&units[data(units)..], &delivered[data(delivered)..]);
    assert!(
        units.len() >= delivered.len(),
        "{} bytes of stream, {} delivered",
        units.len(),
        delivered.len()
    );
    assert_eq!(&units[..delivered.len()], delivered);
}

#[test]
fn an_8b10b_capture_gives_the_delivered_stream_with_lane_numbers_read_from_training_sets() {
    for (lanes, reversed) in [(1, false), (4, false), (4, true), (8, true)] {
        let (delivered, tap) = run(lanes, Rate::Gen1, Rate::Gen1, reversed, 300);
        assert!(delivered.len() >= 300 * 16);
        // Lanes captured up to 30 symbols apart.
        let delays: Vec<u32> = (0..lanes as u32).map(|l| (l * 97) % 300).collect();
        let (events, units, m) = monitor(
            LineCode::Code8b10b,
            LaneNumbers::default(),
            &tap.tap.lanes,
            &delays,
        );
        assert_stream_is(&units, &delivered);
        assert_eq!(
            m.width().map(|w| w.lanes()),
            Some(lanes),
            "x{lanes} reversed {reversed}"
        );
        // B's lane numbers run backward on a reversed link.
        let expected: Vec<Option<u8>> = (0..lanes)
            .map(|p| Some(if reversed { lanes - 1 - p } else { p } as u8))
            .collect();
        assert_eq!(&m.numbers().0[..lanes], &expected[..]);
        assert!(
            !events
                .iter()
                .any(|e| e.contains("Error") || e.contains("DeskewLost")),
            "{events:?}"
        );
    }
}

#[test]
fn a_128b130b_capture_gives_the_delivered_stream_with_lane_numbers_given() {
    for (lanes, reversed) in [(1, false), (2, true), (4, false)] {
        let (delivered, tap) = run(lanes, Rate::Gen3, Rate::Gen3, reversed, 300);
        let numbers = tap.tap.numbers.expect("recorded at 8 GT/s");
        // Lanes captured up to three blocks apart.
        let delays: Vec<u32> = (0..lanes as u32).map(|l| (l * 131) % 400).collect();
        let (events, units, m) = monitor(LineCode::Code128b130b, numbers, &tap.tap.lanes, &delays);
        assert_stream_is(&units, &delivered);
        assert_eq!(m.width().map(|w| w.lanes()), Some(lanes));
        assert!(
            !events
                .iter()
                .any(|e| e.contains("Error") || e.contains("DeskewLost")),
            "{events:?}"
        );
        // With the lanes' numbers swapped, the descramblers are seeded wrong: the stream is not the same.
        if lanes > 1 {
            let mut wrong = numbers;
            wrong.0.swap(0, 1);
            let (_, units, _) = monitor(LineCode::Code128b130b, wrong, &tap.tap.lanes, &delays);
            assert!(!units
                .windows(delivered.len().min(64))
                .any(|w| w == &delivered[..delivered.len().min(64)]));
        }
    }
}

#[test]
fn lanes_numbered_other_than_0_to_w_minus_1_carry_no_stream() {
    let n = |v: &[Option<u8>]| {
        let mut a = [None; 16];
        a[..v.len()].copy_from_slice(v);
        LaneNumbers(a).width().map(|w| w.lanes())
    };
    assert_eq!(n(&[]), None);
    assert_eq!(n(&[Some(0)]), Some(1));
    assert_eq!(n(&[None, Some(1), Some(0)]), Some(2));
    assert_eq!(n(&[Some(0), Some(0)]), None);
    assert_eq!(n(&[Some(0), Some(2)]), None);
    assert_eq!(n(&[Some(0), Some(1), Some(2)]), None);
    assert_eq!(n(&[Some(200)]), None);
}

#[test]
fn noise_on_every_lane_ends_without_a_panic() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for code in [LineCode::Code8b10b, LineCode::Code128b130b] {
        let numbers = LaneNumbers(core::array::from_fn(|p| (p < 4).then_some(p as u8)));
        let mut m = LinkMonitor::new(code, numbers).unwrap();
        let mut units = 0usize;
        for round in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            m.push_bits((round % 17) as usize, x, round % 65, &mut |e| {
                if let LinkEvent::Units(u) = e {
                    assert_eq!(u.len() % 16, 0);
                    units += u.len();
                }
            });
        }
        // At most the bits pushed to the four lanes that carry the stream.
        assert!(units <= 20_000 * 64 / 8);
    }
}
