//! Entry points for fuzzing the data link layer's decoders with hostile input.
//!
//! Each function takes arbitrary bytes, drives one decoder with them and checks the properties that must
//! hold for any input (no panic, typed errors, round trips). The cargo-fuzz targets in `fuzz/` call these,
//! and `tests/fuzz_replay.rs` replays the committed corpora and seeded random inputs through the same
//! functions, so CI needs no nightly toolchain.
//!
//! A property that does not hold is reported by panicking: that is what a fuzzer looks for.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

use crate::fec::{self, Block, Corrections, BLOCK_LEN, CODEWORDS};
use crate::flit::{
    check_packet_crc, field, kind, seal_packet, ControlFlit, Flit, FlitKind, IdentFlit, PacketHeader,
    FLIT_LEN, MAX_PACKET_LEN,
};
use crate::link::{unit_time, DataLink, DlConfig, PowerRequest, PowerState};
use crate::vc::Vc;

/// A fuzz entry point and the name of its cargo-fuzz target.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz entry point, by the name of its cargo-fuzz target.
pub const TARGETS: &[Target] = &[
    ("fec_decode", fec_decode),
    ("initialise", initialise),
    ("low_power", low_power),
    ("parse_flit", parse_flit),
    ("receive_bursts", receive_bursts),
    ("receive_stream", receive_stream),
];

/// Parses every 16 bytes of `data` (the last zero-padded) as a flit, and checks what parses: a packet
/// header re-emits to the same 96 bits, a control flit re-emits to the same 16 bytes, and a packet made
/// of a header and the flits after it either fails its CRC check or, once sealed, passes it and fails it
/// again with any one bit flipped.
pub fn parse_flit(data: &[u8]) {
    // Flit `i` of the input, the last one zero-padded.
    let flit_at = |i: usize| -> Option<Flit> {
        let chunk = data.chunks(FLIT_LEN).nth(i)?;
        let mut flit = [0u8; FLIT_LEN];
        flit[..chunk.len()].copy_from_slice(chunk);
        Some(flit)
    };
    for i in 0..data.len().div_ceil(FLIT_LEN) {
        let Some(flit) = flit_at(i) else {
            break;
        };
        let flit = &flit;
        match kind(flit) {
            Ok(FlitKind::Idle) => assert!(flit.iter().all(|&b| b == 0)),
            Ok(FlitKind::Packet) => {
                let Ok(header) = PacketHeader::parse(flit) else {
                    continue;
                };
                let mut again = [0u8; FLIT_LEN];
                header.emit(&mut again).unwrap();
                assert_eq!(again[..field::WORD_BYTES], flit[..field::WORD_BYTES]);
                let flits = 1 + usize::from(header.payload_flits);
                let mut bytes = [0u8; MAX_PACKET_LEN];
                let bytes = &mut bytes[..flits * FLIT_LEN];
                let mut whole = true;
                for (k, to) in bytes.chunks_exact_mut(FLIT_LEN).enumerate() {
                    match flit_at(i + k) {
                        Some(f) => to.copy_from_slice(&f),
                        None => whole = false,
                    }
                }
                if !whole {
                    continue;
                }
                let _ = check_packet_crc(bytes);
                seal_packet(bytes);
                assert_eq!(check_packet_crc(bytes), Ok(()));
                let bit = usize::from(flit[0]) * 7 % (bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
                assert!(check_packet_crc(bytes).is_err(), "a one-bit error passed the CRC");
            }
            Ok(FlitKind::Control) => {
                if let Ok(control) = ControlFlit::parse(flit) {
                    assert_eq!(&control.emit(), flit);
                }
                if let Ok(ident) = IdentFlit::parse(flit) {
                    assert!(ControlFlit::parse(flit).is_err());
                    assert_eq!(&ident.emit(), flit);
                }
            }
            Err(_) => assert!(
                PacketHeader::parse(flit).is_err()
                    && ControlFlit::parse(flit).is_err()
                    && IdentFlit::parse(flit).is_err()
            ),
        }
    }
}

/// Feeds `data` after its first byte, as hostile units, to two identical active data links: to one a unit
/// at a time, to the other in bursts of 1 to 16 units (the first byte picks the length), and checks that
/// the burst calls do exactly what the unit-by-unit ones do, on any input: after every burst, the same
/// counters, the same packets delivered, and the same units sent back.
pub fn receive_bursts(data: &[u8]) {
    const MOST: usize = 16;
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let burst = 1 + usize::from(first) % MOST;
    let Some(mut one) = BackToBack::<8, 64>::active(DlConfig::default()) else {
        panic!("the data links did not come up");
    };
    let mut runs = one.clone();
    for group in data.chunks(burst * FLIT_LEN) {
        let mut units = [[0u8; FLIT_LEN]; MOST];
        let n = group.len().div_ceil(FLIT_LEN);
        for (unit, chunk) in units.iter_mut().zip(group.chunks(FLIT_LEN)) {
            unit[..chunk.len()].copy_from_slice(chunk);
        }
        let (now, index) = (one.now, one.units);
        for (i, unit) in units[..n].iter().enumerate() {
            one.b.receive_unit(now, unit, index + i as u64);
        }
        runs.b.receive_units(now, &units[..n], index);
        assert_eq!(one.b.counters(), runs.b.counters(), "counters after a burst");
        loop {
            let (x, y) = (one.b.recv(), runs.b.recv());
            assert_eq!(x, y, "packets delivered");
            if x.is_none() {
                break;
            }
        }
        let mut sent = [[0u8; FLIT_LEN]; MOST];
        one.b.handle_timeout(now);
        let mut k = 0;
        while k < n && one.b.has_pending_output(now) {
            one.b.poll_unit(now, &mut sent[k]);
            k += 1;
        }
        let mut polled = [[0u8; FLIT_LEN]; MOST];
        let m = runs.b.poll_units(now, &mut polled[..n]);
        assert_eq!(sent[..k], polled[..m], "units sent back");
        for pair in [&mut one, &mut runs] {
            pair.units += n as u64;
            pair.now += pair.unit.saturating_mul(n as u64);
        }
    }
}

/// Feeds `data`, 16 bytes at a time, to an active data link in place of its partner's units, then lets
/// the pair run cleanly and sends packets across. Hostile units must never panic the receiver or grow its
/// queues past their bounds; and unless the hostile units included a packet that passed the CRC (a
/// forgery no data link can tell from the real thing), the packets sent afterwards arrive exactly once,
/// in order, intact.
pub fn receive_stream(data: &[u8]) {
    let Some(mut pair) = BackToBack::<8, 64>::active(DlConfig::default()) else {
        panic!("the data links did not come up");
    };
    let received_before = pair.b.counters().packets_received;
    for chunk in data.chunks(FLIT_LEN) {
        let mut hostile = [0u8; FLIT_LEN];
        hostile[..chunk.len()].copy_from_slice(chunk);
        let mut from_b = [0u8; FLIT_LEN];
        let mut from_a = [0u8; FLIT_LEN];
        pair.a.poll_unit(pair.now, &mut from_a);
        pair.b.poll_unit(pair.now, &mut from_b);
        pair.b.receive_unit(pair.now, &hostile, pair.units);
        pair.a.receive_unit(pair.now, &from_b, pair.units);
        pair.units += 1;
        pair.now += pair.unit;
    }
    // Let NAKs, replays and resynchronisation settle.
    for _ in 0..2_000 {
        pair.step();
    }
    // A has sent no packet yet, so whatever B accepted was forged (a hostile packet can also be completed
    // by A's idle units after the hostile ones end).
    let forged = pair.b.counters().packets_received != received_before;
    while pair.b.recv().is_some() {}
    if forged || !(pair.a.is_active() && pair.b.is_active()) {
        return;
    }
    packets_cross(&mut pair, "after the hostile units", BackToBack::step);
}

/// Starts an active pair in the low-power handshake or in L1, as the first byte picks (0: B has asked
/// for L1; 1: A has, and B is granting it; 2: both are asleep in L1), then feeds the rest to B, 16 bytes
/// at a time, in place of A's units (as [`receive_stream`]), and lets the pair run on a clean wire. A
/// stand-in physical layer takes both ends to L1 when either asks, and wakes both when either asks.
/// Hostile units must never panic either end; and unless they included a packet that passed the CRC,
/// the handshake ends (both ends in L1, or both in use) and packets sent afterwards wake the link if it
/// sleeps and arrive exactly once, in order, intact.
pub fn low_power(data: &[u8]) {
    let Some((&pick, data)) = data.split_first() else {
        return;
    };
    let Some(mut pair) = BackToBack::<8, 64>::active(DlConfig::default()) else {
        panic!("the data links did not come up");
    };
    let settled = |pair: &BackToBack<8, 64>, a: PowerState, b: PowerState| {
        (pair.a.power_state(), pair.b.power_state()) == (a, b)
    };
    let (asker, a, b) = match pick % 3 {
        0 => (&mut pair.b, PowerState::On, PowerState::Requesting),
        1 => (&mut pair.a, PowerState::Requesting, PowerState::Acknowledging),
        _ => (&mut pair.a, PowerState::Asleep, PowerState::Asleep),
    };
    asker.request_low_power().unwrap();
    for _ in 0..1000 {
        if settled(&pair, a, b) {
            break;
        }
        low_power_step(&mut pair);
    }
    assert!(
        settled(&pair, a, b),
        "the handshake did not start: {:?} / {:?}",
        pair.a.power_state(),
        pair.b.power_state()
    );
    let received_before = pair.b.counters().packets_received;
    for chunk in data.chunks(FLIT_LEN) {
        let mut hostile = [0u8; FLIT_LEN];
        hostile[..chunk.len()].copy_from_slice(chunk);
        pair.step_each(|unit, from_a| {
            if from_a {
                *unit = hostile;
            }
        });
        low_power_power(&mut pair);
    }
    for _ in 0..2_000 {
        low_power_step(&mut pair);
    }
    let forged = pair.b.counters().packets_received != received_before;
    while pair.b.recv().is_some() {}
    if forged || !(pair.a.is_active() && pair.b.is_active()) {
        return;
    }
    let (a, b) = (pair.a.power_state(), pair.b.power_state());
    assert!(
        a == b && matches!(a, PowerState::On | PowerState::Asleep),
        "the handshake did not end: {a:?} / {b:?}"
    );
    packets_cross(&mut pair, "after hostile units in low power", low_power_step);
}

/// [`BackToBack::step`], then what the stand-in physical layer of [`low_power`] does.
fn low_power_step(pair: &mut BackToBack<8, 64>) {
    pair.step();
    low_power_power(pair);
}

/// The stand-in physical layer of [`low_power`]: when either end asks, both go to L1, or both wake
/// (through Recovery, as a retrain, back to L0 at once).
fn low_power_power(pair: &mut BackToBack<8, 64>) {
    let asked = [pair.a.take_power_request(), pair.b.take_power_request()];
    let now = pair.now;
    if asked.contains(&Some(PowerRequest::Wake)) {
        for end in [&mut pair.a, &mut pair.b] {
            end.phy_retraining(now);
            end.phy_up(now, LinkWidth::X8, Rate::Gen3);
        }
    } else if asked.contains(&Some(PowerRequest::EnterL1)) {
        pair.a.phy_low_power(now);
        pair.b.phy_low_power(now);
    }
}

/// Sends 20 packets from A to B over a clean wire, moving the pair with `step`, and checks that they
/// arrive exactly once, in order, intact, within a bounded time.
fn packets_cross<const REPLAY: usize, const RX_FLITS: usize>(
    pair: &mut BackToBack<REPLAY, RX_FLITS>,
    after: &str,
    step: fn(&mut BackToBack<REPLAY, RX_FLITS>),
) {
    const PACKETS: u64 = 20;
    let payload = |k: u64| -> [Flit; 2] { [[k as u8; FLIT_LEN], [!(k as u8); FLIT_LEN]] };
    let mut sent = 0u64;
    let mut next = 0u64;
    for _ in 0..20_000 {
        if sent < PACKETS && pair.a.send(Vc::Posted, 0x1000 + sent, &payload(sent)).is_ok() {
            sent += 1;
        }
        step(pair);
        while let Some(r) = pair.b.recv() {
            assert_eq!(r.tl, 0x1000 + next, "a packet lost, duplicated or reordered");
            assert_eq!(r.payload.as_slice(), &payload(next)[..]);
            next += 1;
        }
        if next == PACKETS {
            return;
        }
    }
    panic!("only {next} of {PACKETS} packets arrived {after}");
}

/// Brings up a link whose units from A to B pass through a hostile wire while it initialises: the bytes
/// of `data`, in turn, say what happens to each unit (deliver it, flip the bit of it the next byte names,
/// lose it, or put the next 16 bytes of `data` in its place). Then the wire is clean. The ends must never panic; both
/// must become active within a bounded time, each knowing the other's identity, and packets must then
/// cross exactly once, unless the hostile wire forged a flit that checks (which no data link can tell
/// from the real thing).
pub fn initialise(data: &[u8]) {
    const A: IdentFlit = IdentFlit {
        node: 0xA0A0_0000_0000_000A,
        port: 1,
    };
    const B: IdentFlit = IdentFlit {
        node: 0xB0B0_0000_0000_000B,
        port: 2,
    };
    let mut pair = BackToBack::<8, 64>::initialising(DlConfig::default());
    pair.a.set_ident(A);
    pair.b.set_ident(B);
    let mut forged = false;
    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let mut altered = true;
        let mut hostile = None;
        let mut flip = None;
        match op % 4 {
            0 => altered = false,
            1 => {
                // Bit `b % 8` of byte `b / 16`: any bit of the unit.
                let (&b, tail) = rest.split_first().unwrap_or((&op, &[]));
                rest = tail;
                flip = Some((usize::from(b >> 4), b & 7));
            }
            2 => hostile = Some([0u8; FLIT_LEN]),
            _ => {
                let mut unit = [0u8; FLIT_LEN];
                let n = rest.len().min(FLIT_LEN);
                unit[..n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
                hostile = Some(unit);
            }
        }
        pair.step_each(|unit, from_a| {
            if !from_a {
                return;
            }
            match (hostile, flip) {
                (Some(h), _) => *unit = h,
                (None, Some((byte, bit))) => unit[byte] ^= 1 << bit,
                (None, None) => {}
            }
            // A unit changed on the wire that still checks is a forgery: a control or identity flit.
            if altered && *unit != [0; FLIT_LEN] {
                forged |= ControlFlit::parse(unit).is_ok() || IdentFlit::parse(unit).is_ok();
            }
        });
    }
    for _ in 0..2_000 {
        if pair.a.is_active() && pair.b.is_active() {
            break;
        }
        pair.step();
    }
    // So is a packet whose CRC checks: A sends none while initialising, so any packet B took was hostile.
    // (One that fails its CRC, or arrives in InitFc1, changes nothing; taking every unit that parsed as a
    // header for a forgery skipped the checks below for four random inputs in five.)
    let c = pair.b.counters();
    forged |= c.packets_received + c.duplicates + c.out_of_sequence + c.credit_overruns != 0;
    if forged {
        return;
    }
    assert!(
        pair.a.is_active() && pair.b.is_active(),
        "the link did not come up once the wire was clean"
    );
    assert_eq!((pair.a.partner(), pair.b.partner()), (Some(B), Some(A)));
    packets_cross(&mut pair, "after a hostile initialisation", BackToBack::step);
}

/// Decodes the first 256 bytes of `data` (zero-padded) as a received FEC block, then checks that encoding
/// those bytes and corrupting one byte per codeword (chosen by the 6 bytes after the block, if present) is
/// corrected exactly.
pub fn fec_decode(data: &[u8]) {
    let mut received: Block = [0; BLOCK_LEN];
    let len = data.len().min(BLOCK_LEN);
    received[..len].copy_from_slice(&data[..len]);

    let mut block = received;
    match fec::decode(&mut block) {
        Ok(corrections) => {
            let mut changed = [0u8; CODEWORDS];
            let mut bits = 0;
            for (p, (&before, &after)) in received.iter().zip(&block).enumerate() {
                if before != after {
                    changed[p % CODEWORDS] += 1;
                    bits += (before ^ after).count_ones();
                }
            }
            assert!(
                changed.iter().all(|&n| n <= 1),
                "more than one byte changed in a codeword"
            );
            assert_eq!(
                u32::from(corrections.symbols),
                changed.iter().map(|&n| u32::from(n)).sum()
            );
            assert_eq!(u32::from(corrections.bits), bits);
            let mut again = block;
            assert_eq!(
                fec::decode(&mut again),
                Ok(Corrections::default()),
                "output is not a codeword"
            );
            let mut reencoded = block;
            fec::encode(&mut reencoded);
            assert_eq!(
                reencoded, block,
                "a codeword's check bytes are not what encode computes"
            );
        }
        Err(_) => assert_eq!(block, received, "a failed decode changed the block"),
    }

    let mut sent = received;
    fec::encode(&mut sent);
    let mut clean = sent;
    assert_eq!(fec::decode(&mut clean), Ok(Corrections::default()));
    assert_eq!(clean, sent);
    if let Some(errors) = data.get(BLOCK_LEN..BLOCK_LEN + 2 * CODEWORDS) {
        let mut corrupted = sent;
        let mut symbols = 0;
        for (codeword, error) in errors.chunks_exact(2).enumerate() {
            let bytes_in_codeword = (BLOCK_LEN - codeword).div_ceil(CODEWORDS);
            let at = codeword + CODEWORDS * (usize::from(error[0]) % bytes_in_codeword);
            corrupted[at] ^= error[1];
            symbols += u8::from(error[1] != 0);
        }
        let corrections = fec::decode(&mut corrupted).expect("one error per codeword is correctable");
        assert_eq!(corrections.symbols, symbols);
        assert_eq!(corrupted, sent);
    }
}

/// Two data links wired back to back without a physical layer, as the fuzz targets and the packet-path
/// benchmarks drive them: each [`BackToBack::step`] moves one unit each way, and time advances by the unit
/// time of an x8 link at 8 GT/s, so the timers behave as on that link.
#[derive(Clone, Debug)]
pub struct BackToBack<const REPLAY: usize = 64, const RX_FLITS: usize = 64> {
    /// One end.
    pub a: DataLink<REPLAY, RX_FLITS>,
    /// The other end.
    pub b: DataLink<REPLAY, RX_FLITS>,
    /// The time of the next step.
    pub now: Instant,
    /// Time per unit.
    pub unit: Duration,
    /// Units moved in each direction so far (the physical layer's unit index).
    pub units: u64,
}

impl<const REPLAY: usize, const RX_FLITS: usize> BackToBack<REPLAY, RX_FLITS> {
    /// Both ends configured alike, the physical layer up on both, and units exchanged until both are
    /// active; `None` if they are not within a thousand units (a bug).
    pub fn active(config: DlConfig) -> Option<Self> {
        Self::active_tapped(config, |_, _, _| {})
    }

    /// [`BackToBack::active`], each unit exchanged handed to `tap` with its time and whether it is A's
    /// (true) or B's: for a trace that starts with the links' initialisation.
    pub fn active_tapped(
        config: DlConfig,
        mut tap: impl FnMut(Instant, &[u8; FLIT_LEN], bool),
    ) -> Option<Self> {
        let mut links = [Self::initialising(config)];
        if !Self::bring_up_together(&mut links, |_, now, unit, from_a| tap(now, unit, from_a)) {
            return None;
        }
        let [pair] = links;
        Some(pair)
    }

    /// Whether both ends are active.
    pub fn is_up(&self) -> bool {
        self.a.is_active() && self.b.is_active()
    }

    /// Bring `links` (each as [`BackToBack::initialising`] made it) up side by side, a step of each that
    /// is not yet up in turn, each unit exchanged handed to `tap` with the link's index, its time and
    /// whether it is A's (true) or B's: for a trace of several links in time order. Whether all came up
    /// within 1,000 steps.
    pub fn bring_up_together(
        links: &mut [Self],
        mut tap: impl FnMut(usize, Instant, &[u8; FLIT_LEN], bool),
    ) -> bool {
        for _ in 0..1000 {
            if links.iter().all(Self::is_up) {
                return true;
            }
            for (i, link) in links.iter_mut().enumerate().filter(|(_, link)| !link.is_up()) {
                let now = link.now;
                link.step_each(|unit, from_a| tap(i, now, unit, from_a));
            }
        }
        links.iter().all(Self::is_up)
    }

    /// Both ends configured alike, the physical layer just up on both: the data links start initialising.
    pub fn initialising(config: DlConfig) -> Self {
        let (width, rate) = (LinkWidth::X8, Rate::Gen3);
        let mut pair = BackToBack {
            a: DataLink::new(config),
            b: DataLink::new(config),
            now: Instant::ZERO,
            unit: unit_time(width, rate),
            units: 0,
        };
        pair.a.phy_up(pair.now, width, rate);
        pair.b.phy_up(pair.now, width, rate);
        pair
    }

    /// One unit from A to B and one from B to A.
    #[inline]
    pub fn step(&mut self) {
        self.step_with(|_| {});
    }

    /// [`BackToBack::step`] with each unit passing through `wire` (which may corrupt it) on its way.
    #[inline]
    pub fn step_with(&mut self, mut wire: impl FnMut(&mut [u8; FLIT_LEN])) {
        self.step_each(|unit, _| wire(unit));
    }

    /// [`BackToBack::step_with`], `wire` told whether the unit is A's (true) or B's.
    #[inline]
    pub fn step_each(&mut self, mut wire: impl FnMut(&mut [u8; FLIT_LEN], bool)) {
        let (mut ab, mut ba) = ([0u8; FLIT_LEN], [0u8; FLIT_LEN]);
        self.a.poll_unit(self.now, &mut ab);
        self.b.poll_unit(self.now, &mut ba);
        wire(&mut ab, true);
        wire(&mut ba, false);
        self.b.receive_unit(self.now, &ab, self.units);
        self.a.receive_unit(self.now, &ba, self.units);
        self.units += 1;
        self.now += self.unit;
    }
}
