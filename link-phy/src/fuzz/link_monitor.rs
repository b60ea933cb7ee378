//! Fuzz entry point for the link monitor: a recorded x4 link's lanes, captured out of step and with bits
//! flipped, read back.

use std::sync::OnceLock;
use std::vec::Vec;

use crate::channel::ChannelConfig;
use crate::lanes::MAX_LANES;
use crate::ltssm::{LaneNumbers, LinkEvent, LinkMonitor, Port, PortConfig, Role, Timing, UNIT_BYTES};
use crate::pair::{replay_lanes, LinkPair, Node, Recording, Side};
use crate::rate::{LineCode, Rate};
use crate::time::{Duration, Instant};

/// Lanes of the recorded link.
const LANES: usize = 4;

/// A recording of port B's transmitter and the stream a monitor reads from it with the lanes in step.
struct Recorded {
    code: LineCode,
    numbers: LaneNumbers,
    lanes: [Vec<(u64, u32)>; MAX_LANES],
    stream: Vec<u8>,
}

/// Port B of a x4 link sending data for 2 us after it is up: at 2.5 GT/s from 600 symbol times before
/// (the end of Configuration, where the lanes get their numbers: the thousand training sets of Polling
/// before it would make each input take ten times as long), and at 8 GT/s from the speed change.
fn recordings() -> &'static [Recorded; 2] {
    static RECORDINGS: OnceLock<[Recorded; 2]> = OnceLock::new();
    RECORDINGS.get_or_init(|| {
        [
            (Rate::Gen1, LineCode::Code8b10b),
            (Rate::Gen3, LineCode::Code128b130b),
        ]
        .map(|(rate, code)| {
            let port = |role| {
                let mut config = PortConfig::new(LANES, role);
                config.max_rate = rate;
                config.timing = Timing::fast();
                Recording::new(Port::new(config, Instant::ZERO).expect("a valid port"), rate)
            };
            let clean = ChannelConfig::clean(LANES);
            let mut pair =
                LinkPair::with_nodes(port(Role::Downstream), port(Role::Upstream), clean.clone(), clean);
            let up = |p: &LinkPair<Recording>| p.a.port().is_up() && p.b.port().is_up();
            let limit = Instant(Duration::from_ms(50).as_ps());
            assert!(pair.run_until(limit, up), "recorded link did not train");
            let keep_from = pair.b.tap.lanes[0].len().saturating_sub(600);
            for lane in &mut pair.b.tap.lanes {
                lane.drain(..keep_from.min(lane.len()));
            }
            let until = pair.now() + Duration::from_us(2);
            let mut sent = 0u64;
            while pair.now() < until {
                pair.step_with(
                    &mut |side, buf| {
                        for byte in buf {
                            *byte = if side == Side::B {
                                (sent % 251) as u8 + 1
                            } else {
                                0
                            };
                            sent += 1;
                        }
                    },
                    &mut |_, _, _| {},
                );
            }
            let b = pair.b;
            let numbers = match code {
                LineCode::Code8b10b => LaneNumbers::default(),
                LineCode::Code128b130b => b.tap.numbers.expect("recorded at 8 GT/s"),
            };
            let mut stream = Vec::new();
            let mut monitor = LinkMonitor::new(code, numbers).expect("a monitor");
            replay_lanes(&mut monitor, &b.tap.lanes, &[], &mut |e| {
                if let LinkEvent::Units(u) = e {
                    stream.extend_from_slice(u);
                }
            });
            assert!(stream.iter().any(|&byte| byte != 0), "the recording carries data");
            Recorded {
                code,
                numbers,
                lanes: b.tap.lanes,
                stream,
            }
        })
    })
}

/// The stream from its first unit of data: the idle before it depends on when the lanes lined up.
fn from_data(stream: &[u8]) -> &[u8] {
    let first = stream.chunks(UNIT_BYTES).position(|u| u.iter().any(|&b| b != 0));
    &stream[first.map_or(stream.len(), |f| f * UNIT_BYTES)..]
}

/// A recorded x4 link's lanes read by a link monitor. Byte 0, bit 0: the recording (8b/10b with lane
/// numbers learnt, or 128b/130b with them given). Bytes 1 to 4: each lane captured late by twice that many
/// bits. Then three bytes per bit flipped: the lane (low two bits) and the bit's place (a little-endian
/// `u16`, scaled over the lane's bits). Checks: never panics; only whole units come out, and no more
/// bytes than the bits pushed carry; with no bit flipped, the stream from its first data is the one read
/// with the lanes in step.
pub fn link_monitor(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let recorded = &recordings()[usize::from(pick & 1)];
    let delays: Vec<u32> = (0..LANES)
        .map(|l| 2 * u32::from(rest.get(l).copied().unwrap_or(0)))
        .collect();
    let mut lanes = recorded.lanes.clone();
    let flips = rest.get(LANES..).unwrap_or(&[]).chunks_exact(3);
    let flipped = flips.len() > 0;
    for flip in flips {
        let lane = &mut lanes[usize::from(flip[0]) % LANES];
        let bits: u64 = lane.iter().map(|&(_, n)| u64::from(n)).sum();
        let mut at = u64::from(u16::from_le_bytes([flip[1], flip[2]])) * bits / 65536;
        for (word, n) in lane.iter_mut() {
            if at < u64::from(*n) {
                *word ^= 1 << at;
                break;
            }
            at -= u64::from(*n);
        }
    }
    let mut monitor = LinkMonitor::new(recorded.code, recorded.numbers).expect("a monitor");
    let mut stream = Vec::new();
    replay_lanes(&mut monitor, &lanes, &delays, &mut |e| {
        if let LinkEvent::Units(u) = e {
            assert_eq!(u.len() % UNIT_BYTES, 0, "a partial unit");
            stream.extend_from_slice(u);
        }
    });
    let pushed: u64 = lanes
        .iter()
        .flatten()
        .map(|&(_, n)| u64::from(n))
        .chain(delays.iter().map(|&d| u64::from(d)))
        .sum();
    assert!(
        stream.len() as u64 * 8 <= pushed,
        "{} bytes out of {pushed} bits",
        stream.len()
    );
    if !flipped {
        assert_eq!(
            from_data(&stream),
            from_data(&recorded.stream),
            "delays {delays:?}"
        );
    }
}
