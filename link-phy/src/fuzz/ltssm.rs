//! Fuzz entry points for what the training state machine receives: training sets, and whole slots of
//! arbitrary bits on every lane of a port in any phase of training or in L0.

use std::sync::OnceLock;

use crate::channel::ChannelConfig;
use crate::ltssm::{LtssmState, Port, PortConfig, Role, Timing, UNIT_BYTES};
use crate::ordered_set::{Polarity, TrainingSet, TS_LEN};
use crate::pair::LinkPair;
use crate::rate::Rate;
use crate::serial::{LaneSignal, Slot, SlotBits};
use crate::symbol::{control, Symbol};
use crate::time::{Duration, Instant};

/// Sixteen symbols from the input (each a byte, and a bit saying control or data) parsed as a training
/// set: never panics, and a set that parses with normal polarity is re-emitted as exactly the input.
pub fn parse_training_set(data: &[u8]) {
    let mut symbols = [Symbol::COM; TS_LEN];
    for (i, s) in symbols.iter_mut().enumerate() {
        let byte = data.get(2 * i).copied().unwrap_or(0);
        let is_control = data.get(2 * i + 1).is_some_and(|f| f & 1 == 1);
        *s = if is_control && control::is_control(byte) {
            Symbol::Control(byte)
        } else {
            Symbol::Data(byte)
        };
    }
    if let Ok((ts, polarity)) = TrainingSet::from_symbols(&symbols) {
        if polarity == Polarity::Normal {
            assert_eq!(
                ts.to_symbols(),
                symbols,
                "training set does not re-emit as received"
            );
        }
    }
}

/// Ports to start from: in Polling at 2.5 GT/s; in L0 at 2.5 GT/s and at 8 GT/s, each trained once; and
/// in L1 at each rate, both just gone there (listening for the partner's EIOS) and asleep with the
/// partner quiet (any signal wakes it).
fn snapshots() -> &'static [Port; 7] {
    static SNAPSHOTS: OnceLock<[Port; 7]> = OnceLock::new();
    SNAPSHOTS.get_or_init(|| {
        let trained = |max_rate: Rate| {
            let mut a = PortConfig::new(4, Role::Downstream);
            let mut b = PortConfig::new(4, Role::Upstream);
            a.max_rate = max_rate;
            b.max_rate = max_rate;
            a.timing = Timing::fast();
            b.timing = Timing::fast();
            let mut pair =
                LinkPair::new(a, b, ChannelConfig::clean(4), ChannelConfig::clean(4)).expect("a valid pair");
            assert!(
                pair.train(Instant(Duration::from_ms(50).as_ps())),
                "snapshot link did not train"
            );
            pair
        };
        // Port A as it goes to L1 alone (its partner's EIOS yet to come), and port B once both ports, asked
        // together (at a rate changed up to, an EIOS unasked is a fallback), have been quiet a while.
        let asleep = |max_rate: Rate| {
            let mut pair = trained(max_rate);
            pair.a.request_low_power();
            let until = pair.now() + Duration::from_us(20);
            let in_l1 = |p: &LinkPair| p.a.state() == LtssmState::ElectricalIdle;
            assert!(pair.run_until(until, in_l1), "snapshot port did not go to L1");
            let entering = pair.a;
            let mut pair = trained(max_rate);
            pair.a.request_low_power();
            pair.b.request_low_power();
            let until = pair.now() + Duration::from_us(20);
            pair.run_until(until, |_| false);
            assert_eq!(pair.b.state(), LtssmState::ElectricalIdle);
            [entering, pair.b]
        };
        let mut polling = Port::new(PortConfig::new(4, Role::Upstream), Instant::ZERO).expect("a valid port");
        polling.handle_timeout(Instant(Duration::from_ms(13).as_ps()));
        polling.receivers_detected(Instant(Duration::from_ms(13).as_ps()), 0b1111);
        assert_eq!(polling.state(), LtssmState::PollingActive);
        let ([gen1_entering, gen1_asleep], [gen3_entering, gen3_asleep]) =
            (asleep(Rate::Gen1), asleep(Rate::Gen3));
        [
            polling,
            trained(Rate::Gen1).b,
            trained(Rate::Gen3).b,
            gen1_entering,
            gen1_asleep,
            gen3_entering,
            gen3_asleep,
        ]
    })
}

/// Arbitrary bits on every lane, slot after slot, into a port in Polling, in L0 or in L1 at either line
/// code.
/// The first byte picks the starting port; the rest are the bits, lane after lane, slot after slot, with
/// a 0xFF byte in a lane's first position standing for electrical idle. Never panics; data is delivered
/// only in whole units; the port's state stays one the state machine defines.
pub fn port_receive(data: &[u8]) {
    let Some((&pick, bits)) = data.split_first() else {
        return;
    };
    let mut port = snapshots()[usize::from(pick) % 7].clone();
    let lanes = port.config().lanes;
    let slot_bytes = (port.rate().slot_bits() as usize).div_ceil(8);
    let mut now = port.next_transmit();
    for chunk in bits.chunks(lanes * slot_bytes).take(64) {
        let mut slot = Slot::idle(port.rate());
        for (lane, raw) in chunk.chunks(slot_bytes).enumerate() {
            if raw.first() == Some(&0xFF) {
                continue;
            }
            let mut lane_bits = SlotBits::EMPTY;
            let mut left = port.rate().slot_bits();
            for byte in raw {
                let n = left.min(8);
                lane_bits.push(u64::from(*byte), n);
                left -= n;
            }
            slot.lanes[lane] = LaneSignal::Bits(lane_bits);
        }
        let _ = port.poll_transmit(now, &mut |buf| buf.fill(0));
        port.receive(now, &slot, &mut |d, _| {
            assert_eq!(d.len() % UNIT_BYTES, 0, "partial unit delivered")
        });
        now = port.next_transmit();
    }
    while port.poll_event().is_some() {}
    let _ = port.state().name();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The L1 snapshots are what `port_receive` says: a signal that is not an EIOS leaves a port that has
    /// just gone to L1 listening for its partner's EIOS, and wakes a port whose partner has gone quiet.
    #[test]
    fn the_l1_snapshots_listen_for_an_eios_or_wake_on_any_signal() {
        for (pick, wakes) in [(3, false), (4, true), (5, false), (6, true)] {
            let mut port = snapshots()[pick].clone();
            assert_eq!(port.state(), LtssmState::ElectricalIdle, "snapshot {pick}");
            let mut bits = SlotBits::EMPTY;
            let mut left = port.rate().slot_bits();
            while left > 0 {
                let n = left.min(8);
                bits.push(0x55, n);
                left -= n;
            }
            let mut slot = Slot::idle(port.rate());
            for lane in &mut slot.lanes[..port.config().lanes] {
                *lane = LaneSignal::Bits(bits);
            }
            let now = port.next_transmit();
            port.receive(now, &slot, &mut |_, _| {});
            assert_eq!(
                port.state() != LtssmState::ElectricalIdle,
                wakes,
                "snapshot {pick}: {:?}",
                port.state()
            );
        }
    }
}
