//! Idle stretches let pass at once ([`Net::set_skip_idle`]) end where simulating every Update would have
//! ended a run: when the app is done, or when nothing is left to happen before the limit.

use fabric_sim::net::{App, Net, Offer};
use fabric_sim::topology::Topology;
use link_dl::{DlConfig, Received};
use link_phy::time::{Duration, Instant};

/// Asks for `left` alarms, one nanosecond apart, and does nothing else; done (if `ends_done`) at the
/// last.
struct Alarms {
    left: u32,
    at: Instant,
    asked: bool,
    offers: u32,
    ends_done: bool,
    finished: bool,
}

impl App for Alarms {
    fn next(&mut self, _now: Instant, _gpu: usize, _offer: &mut Offer) -> bool {
        false
    }
    fn receive(&mut self, _now: Instant, _gpu: usize, _port: usize, _packet: &Received) {}
    fn take_woken(&mut self) -> Option<usize> {
        None
    }
    fn take_alarm(&mut self) -> Option<(Instant, usize)> {
        // One alarm per offer: the net asks until it gets none.
        self.asked = !self.asked;
        if !self.asked {
            return None;
        }
        // The run starts offering both GPUs: one chain of alarms, from the first.
        self.offers += 1;
        if self.offers == 2 {
            self.asked = false;
            return None;
        }
        if self.left == 0 {
            // Offered after the last alarm.
            self.finished = true;
            return None;
        }
        self.left -= 1;
        self.at += Duration::from_ns(1);
        Some((self.at, 0))
    }
    fn done(&self) -> bool {
        self.ends_done && self.finished
    }
}

/// Where a run of `alarms` alarms on mesh2 ends (its link up unless `down`): its time, when it
/// completed and its events.
fn run(alarms: u32, skip: bool, down: bool, ends_done: bool) -> (Instant, Instant, u64) {
    let t = Topology::builtin("mesh2").unwrap();
    let failed: &[usize] = if down { &[0] } else { &[] };
    let mut net = Net::new(&t, failed, DlConfig::default(), 1).unwrap();
    net.set_skip_idle(skip);
    assert!(net.bring_up(Instant::ZERO + Duration::from_ms(1)));
    let mut app = Alarms {
        left: alarms,
        at: net.now() + Duration::from_us(5),
        asked: false,
        offers: 0,
        ends_done,
        finished: false,
    };
    let limit = net.now() + Duration::from_ms(2);
    assert_eq!(net.run(&mut app, limit), ends_done);
    (net.now(), net.completed_at(), net.stats().events)
}

/// The run's last event is its alarm: the number of alarms for which that event is the idle check's
/// (a multiple of 4096), found simulating every Update.
fn alarms_ending_on_a_check(down: bool, ends_done: bool) -> u32 {
    let events = |n| run(n, false, down, ends_done).2;
    let (mut lo, mut hi) = (1u32, 16_384u32);
    let target = events(lo).div_ceil(4096).max(1) * 4096;
    while lo < hi {
        let mid = (lo + hi) / 2;
        if events(mid) < target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    assert_eq!(events(lo), target, "no run ends on the check");
    lo
}

#[test]
fn a_run_done_at_an_idle_check_ends_there() {
    let n = alarms_ending_on_a_check(false, true);
    assert_eq!(run(n, true, false, true), run(n, false, false, true));
}

#[test]
fn a_run_without_a_live_link_ends_at_its_last_event() {
    let n = alarms_ending_on_a_check(true, false);
    assert_eq!(run(n, true, true, false), run(n, false, true, false));
}
