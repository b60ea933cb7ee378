//! `poll_units` and `receive_units` (whole bursts, as the fabric simulator moves them) behave exactly as
//! `poll_unit` and `receive_unit` called once per unit: the same units on the wire, the same packets
//! delivered, the same counters, whatever the traffic, the burst sizes and the bit errors.

use link_dl::flit::{Flit, FLIT_LEN, MAX_PAYLOAD_FLITS};
use link_dl::link::{DataLink, DlConfig};
use link_dl::Vc;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};
use proptest::prelude::*;

type Link = DataLink<16, 64>;

/// Two data links joined back to back: `[a, b]`, and the units each has received so far.
struct Pair {
    ends: [Link; 2],
    received: [u64; 2],
}

impl Pair {
    fn new(fec: bool) -> Pair {
        let config = DlConfig {
            fec,
            ..DlConfig::default()
        };
        let mut ends = [Link::new(config), Link::new(config)];
        for end in &mut ends {
            end.phy_up(Instant::ZERO, LinkWidth::X8, Rate::Gen5);
        }
        Pair {
            ends,
            received: [0; 2],
        }
    }

    /// Up to `n` units from end `from` to the other, one call per unit; the units sent.
    fn move_one_by_one(&mut self, now: Instant, from: usize, n: usize) -> Vec<Flit> {
        self.ends[from].handle_timeout(now);
        let mut units = Vec::new();
        while units.len() < n && self.ends[from].has_pending_output(now) {
            let mut unit = [0u8; FLIT_LEN];
            self.ends[from].poll_unit(now, &mut unit);
            units.push(unit);
        }
        units
    }

    /// Up to `n` units from end `from` to the other as one burst; the units sent. The slots after them
    /// are left as they were.
    fn move_burst(&mut self, now: Instant, from: usize, n: usize) -> Vec<Flit> {
        let mut units = vec![[0xA5u8; FLIT_LEN]; n];
        let sent = self.ends[from].poll_units(now, &mut units);
        assert!(
            units[sent..].iter().all(|u| *u == [0xA5; FLIT_LEN]),
            "written past the units sent"
        );
        units.truncate(sent);
        units
    }

    fn deliver_one_by_one(&mut self, now: Instant, to: usize, units: &[Flit]) {
        for unit in units {
            self.ends[to].receive_unit(now, unit, self.received[to]);
            self.received[to] += 1;
        }
    }

    /// Deliver `units` in two calls split at `split`, so that runs of a packet straddle calls.
    fn deliver_burst(&mut self, now: Instant, to: usize, units: &[Flit], split: usize) {
        let (first, second) = units.split_at(split.min(units.len()));
        self.ends[to].receive_units(now, first, self.received[to]);
        self.ends[to].receive_units(now, second, self.received[to] + first.len() as u64);
        self.received[to] += units.len() as u64;
    }
}

#[derive(Clone, Debug)]
enum Step {
    Send {
        vc: u8,
        flits: usize,
        fill: u8,
    },
    Move {
        from: usize,
        units: usize,
        split: usize,
        flip: Option<u16>,
    },
    Wait {
        ns: u64,
    },
    Recv,
    /// Receive on one channel: unit by unit with `recv_on`, in bursts into a reused packet (as `Recv`
    /// does with `recv` and `recv_into`).
    RecvOn {
        vc: u8,
    },
    /// End `end`'s physical layer leaves L0 for Recovery (`up` false) or is back in L0: a retraining
    /// link holds its timers and does not count waiting packets as output to send.
    Phy {
        end: usize,
        up: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..3, 0..=MAX_PAYLOAD_FLITS, any::<u8>()).prop_map(|(vc, flits, fill)| Step::Send {
            vc,
            flits,
            fill
        }),
        (
            0usize..2,
            0usize..40,
            0usize..40,
            prop::option::weighted(0.1, 0u16..128 * 40)
        )
            .prop_map(|(from, units, split, flip)| Step::Move {
                from,
                units,
                split,
                flip
            }),
        (0u64..3000).prop_map(|ns| Step::Wait { ns }),
        Just(Step::Recv),
        (0u8..3).prop_map(|vc| Step::RecvOn { vc }),
        (0usize..2, any::<bool>()).prop_map(|(end, up)| Step::Phy { end, up }),
    ]
}

/// Run `steps` on both pairs, checking that they agree after every step; the packets delivered.
fn run(steps: &[Step], fec: bool) -> usize {
    let mut unit_by_unit = Pair::new(fec);
    let mut bursts = Pair::new(fec);
    let mut now = Instant::ZERO;
    let mut delivered = 0;
    // Received into again and again: what it held before must not show through.
    let mut reused = link_dl::Received {
        vc: Vc::Posted,
        tl: u64::MAX,
        payload: core::iter::repeat_n([0xEE; FLIT_LEN], MAX_PAYLOAD_FLITS).collect(),
    };
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Send { vc, flits, fill } => {
                let payload = vec![[fill; FLIT_LEN]; flits];
                let vc = Vc::ALL[usize::from(vc)];
                let a = unit_by_unit.ends[0].send(vc, u64::from(fill), &payload);
                let b = bursts.ends[0].send(vc, u64::from(fill), &payload);
                assert_eq!(a, b, "step {i}: send");
            }
            Step::Move {
                from,
                units,
                split,
                flip,
            } => {
                let mut a = unit_by_unit.move_one_by_one(now, from, units);
                let mut b = bursts.move_burst(now, from, units);
                assert_eq!(a, b, "step {i}: units sent");
                if let Some(bit) = flip.map(usize::from).filter(|&bit| bit / 128 < a.len()) {
                    a[bit / 128][bit % 128 / 8] ^= 1 << (bit % 8);
                    b[bit / 128][bit % 128 / 8] ^= 1 << (bit % 8);
                }
                unit_by_unit.deliver_one_by_one(now, 1 - from, &a);
                bursts.deliver_burst(now, 1 - from, &b, split);
            }
            Step::Wait { ns } => now += Duration::from_ns(ns),
            Step::Phy { end, up } => {
                for pair in [&mut unit_by_unit, &mut bursts] {
                    if up {
                        pair.ends[end].phy_up(now, LinkWidth::X8, Rate::Gen5);
                    } else {
                        pair.ends[end].phy_retraining(now);
                    }
                }
            }
            Step::Recv => loop {
                let a = unit_by_unit.ends[1].recv();
                let b = bursts.ends[1].recv_into(&mut reused).then(|| reused.clone());
                assert_eq!(a, b, "step {i}: received");
                if a.is_none() {
                    break;
                }
                delivered += 1;
            },
            Step::RecvOn { vc } => loop {
                let vc = Vc::ALL[usize::from(vc)];
                let a = unit_by_unit.ends[1].recv_on(vc);
                let b = bursts.ends[1]
                    .recv_on_into(vc, &mut reused)
                    .then(|| reused.clone());
                assert_eq!(a, b, "step {i}: received on {vc:?}");
                if a.is_none() {
                    break;
                }
                delivered += 1;
            },
        }
        for end in 0..2 {
            assert_eq!(
                unit_by_unit.ends[end].counters(),
                bursts.ends[end].counters(),
                "step {i}: counters of end {end}"
            );
        }
    }
    delivered
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn bursts_are_the_same_as_units_one_by_one(steps in prop::collection::vec(step(), 1..200), fec: bool) {
        run(&steps, fec);
    }
}

/// A fixed sequence that certainly delivers packets in both modes (the property above may draw runs that
/// never bring the link up).
#[test]
fn a_busy_link_delivers_the_same_in_bursts() {
    let mut steps = Vec::new();
    for k in 0..200u8 {
        steps.push(Step::Move {
            from: usize::from(k % 2),
            units: 7 + usize::from(k % 23),
            split: usize::from(k % 5),
            flip: (k % 37 == 0).then_some(u16::from(k) * 7),
        });
        if k >= 4 {
            steps.push(Step::Send {
                vc: k % 3,
                flits: usize::from(k) % (MAX_PAYLOAD_FLITS + 1),
                fill: k,
            });
        }
        steps.push(Step::Wait { ns: 5 });
        if k % 3 == 0 {
            steps.push(Step::Recv);
        }
    }
    for fec in [false, true] {
        let delivered = run(&steps, fec);
        // With FEC a packet waits for the rest of its 16-unit block, so fewer get through in this time.
        let least = if fec { 20 } else { 150 };
        assert!(
            delivered >= least,
            "fec {fec}: only {delivered} packets delivered"
        );
    }
}

/// A packet sent without credit (the sender was told of a larger buffer) is refused by `receive_units`
/// exactly as by `receive_unit`: counted as a credit overrun and not delivered, also when its payload
/// arrives in the burst of its header and the receiver frames and completes it at once.
#[test]
fn a_packet_sent_without_credit_is_refused_the_same_in_bursts() {
    // The sender learned of 1024 flits per channel from its partner; the receivers have 64.
    let mut big = link_dl::fuzz::BackToBack::<16, 1024>::active(DlConfig::default()).unwrap();
    let small = link_dl::fuzz::BackToBack::<16, 64>::active(DlConfig::default()).unwrap();
    let (mut one_by_one, mut in_bursts) = (small.b.clone(), small.b.clone());
    for k in 0..10u8 {
        let payload = vec![[k; FLIT_LEN]; MAX_PAYLOAD_FLITS];
        big.a.send(Vc::Posted, u64::from(k), &payload).unwrap();
    }
    let now = small.now.max(big.now);
    let mut units = vec![[0u8; FLIT_LEN]; 200];
    let sent = big.a.poll_units(now, &mut units);
    units.truncate(sent);
    for (i, unit) in units.iter().enumerate() {
        one_by_one.receive_unit(now, unit, small.units + i as u64);
    }
    in_bursts.receive_units(now, &units, small.units);
    assert!(
        one_by_one.counters().credit_overruns > 0,
        "no packet overran the buffer"
    );
    assert_eq!(one_by_one.counters(), in_bursts.counters());
    loop {
        let (a, b) = (one_by_one.recv(), in_bursts.recv());
        assert_eq!(a, b);
        if a.is_none() {
            break;
        }
    }
}
