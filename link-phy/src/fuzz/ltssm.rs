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

/// Ports to start from: in Polling at 2.5 GT/s, in L0 at 2.5 GT/s and in L0 at 8 GT/s, each trained once.
fn snapshots() -> &'static [Port; 3] {
    static SNAPSHOTS: OnceLock<[Port; 3]> = OnceLock::new();
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
            pair.b
        };
        let mut polling = Port::new(PortConfig::new(4, Role::Upstream), Instant::ZERO).expect("a valid port");
        polling.handle_timeout(Instant(Duration::from_ms(13).as_ps()));
        polling.receivers_detected(Instant(Duration::from_ms(13).as_ps()), 0b1111);
        assert_eq!(polling.state(), LtssmState::PollingActive);
        [polling, trained(Rate::Gen1), trained(Rate::Gen3)]
    })
}

/// Arbitrary bits on every lane, slot after slot, into a port in Polling or in L0 at either line code.
/// The first byte picks the starting port; the rest are the bits, lane after lane, slot after slot, with
/// a 0xFF byte in a lane's first position standing for electrical idle. Never panics; data is delivered
/// only in whole units; the port's state stays one the state machine defines.
pub fn port_receive(data: &[u8]) {
    let Some((&pick, bits)) = data.split_first() else {
        return;
    };
    let mut port = snapshots()[usize::from(pick) % 3].clone();
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
