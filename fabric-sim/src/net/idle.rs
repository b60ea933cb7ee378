//! Skipping idle stretches. A fabric in which nothing moves (a collective waiting for the fabric
//! manager's new routes, say) still has every link send an Update every microsecond each way, two
//! events each: a replan delay of seconds on a fabric of hundreds of trunks is billions of events. Once
//! every link has settled into repeating an Update its partner already heard, the fabric's state one
//! update interval on is its state now with every time moved on by the interval and the links' counters
//! by one Update: so whole intervals can pass at once, up to the next event that is not a link's
//! (a fault, the manager's replan, an app's alarm) or the run's limit, and the run goes on exactly as it
//! would have (the tests compare every counter and result with and without skipping).

use link_phy::time::{Duration, Instant};

use super::{Event, Net, NodeState};

/// Events between two looks at whether the fabric is idle: looking costs a pass over the links, which
/// stops at the first busy one.
pub(super) const IDLE_CHECK_EVENTS: u64 = 4096;

/// Fewer update intervals than this are not worth rebuilding the event queue for.
const MIN_SKIP_PERIODS: u64 = 16;

impl Net {
    /// If the fabric is idle (every live link settled into its periodic Update, which its partner has
    /// heard; no packet anywhere but held for the new routes), let as many whole update intervals pass as
    /// fit before the next event that is not a link's and before `limit`.
    pub(super) fn skip_idle(&mut self, limit: Instant) {
        let Some(periods) = self.idle_periods() else {
            return;
        };
        // Links' transmissions and arrivals move on by the skip, the other events stay. A link's event
        // must not move onto or past another's: they would then come out in another order.
        let is_links = |e: &Event| matches!(e, Event::Transmit { .. } | Event::Arrive { .. });
        let (mut next_other, mut last_links) = (limit, self.now);
        for (at, event) in self.queue.iter() {
            if is_links(event) {
                last_links = last_links.max(at);
            } else {
                next_other = next_other.min(at);
            }
        }
        // A run without a limit nor anything else to come: nothing to skip to.
        if next_other.as_ps() >= u64::MAX / 2 {
            return;
        }
        let interval = self.links_interval.as_ps();
        let room = next_other.as_ps().saturating_sub(last_links.as_ps());
        let periods = periods.min(room.saturating_sub(1) / interval);
        if periods < MIN_SKIP_PERIODS {
            return;
        }
        let shift = Duration::from_ps(interval * periods);
        self.queue.shift(shift, is_links);
        self.now += shift;
        for dir in self.dirs.iter_mut().flatten().filter(|d| d.up) {
            dir.scheduled = dir.scheduled.map(|at| at + shift);
            dir.busy_until += shift;
            for burst in &mut dir.bursts {
                burst.arrival += shift;
            }
            dir.units_sent += periods;
            dir.units_received += periods;
            dir.errors.position += 128 * periods;
            let (node, port) = dir.from;
            self.links[node][port].skip_idle_updates(periods);
            self.stats.units += periods;
            self.stats.events += 2 * periods;
        }
        self.idle_skipped = Duration::from_ps(self.idle_skipped.as_ps() + shift.as_ps());
    }

    /// How many update intervals the fabric may let pass at once as far as its links and nodes go, or
    /// `None` if it is not idle.
    fn idle_periods(&self) -> Option<u64> {
        if !self.skip_idle_enabled || self.trace.is_some() || self.waves.is_some() {
            return None;
        }
        let interval = self.links_interval.as_ps();
        let mut periods = u64::MAX;
        let mut links_up = false;
        for dir in self.dirs.iter().flatten().filter(|d| d.up) {
            links_up = true;
            let (from, to) = (dir.from, dir.to);
            let update = self.links[from.0][from.1].idle_update()?;
            if !self.links[to.0][to.1].has_heard(&update) || dir.unit_ps >= interval {
                return None;
            }
            // What is on the wire must be that same Update, one per burst.
            let flit = update.emit();
            if !dir
                .bursts
                .iter()
                .all(|b| b.units == 1 && self.pool.units(b)[0] == flit)
            {
                return None;
            }
            // No bit error may fall in what the skipped Updates would have carried.
            if dir.errors.ber > 0.0 {
                periods = periods.min((dir.errors.next - dir.errors.position) / 128);
            }
        }
        let nodes_idle = self.nodes.iter().all(|n| match n {
            NodeState::Gpu => true,
            NodeState::Switch {
                core,
                staged_ports,
                nvls,
                ..
            } => core.is_idle() && *staged_ports == 0 && nvls.pending.is_empty(),
        });
        let nothing_to_resend = self
            .failover
            .as_ref()
            .is_none_or(|f| f.resend.iter().all(|q| q.is_empty()) && f.lost.is_empty());
        // Without a live link there are no Updates to let pass: the next event comes at once anyway,
        // and a run that ends for want of one must end where its last event left it.
        (links_up && nodes_idle && nothing_to_resend).then_some(periods)
    }
}

#[cfg(test)]
mod tests {
    use link_dl::{DlConfig, Vc};

    use super::*;
    use crate::net::NoTraffic;
    use crate::topology::Topology;

    #[test]
    fn a_link_that_asked_to_retrain_settles_again() {
        let t = Topology::builtin("mesh2").unwrap();
        let mut net = Net::new(&t, &[], DlConfig::default(), 1).unwrap();
        assert!(net.bring_up(Instant::ZERO + Duration::from_ms(1)));
        // A packet whose replays get nothing through, as under heavy bit errors: the data link asks the
        // physical layer to retrain, which the simulator's wires do not model.
        let now = net.now();
        let link = &mut net.links[0][0];
        link.send(Vc::Posted, 0, &[[0; 16]]).unwrap();
        let timeout = link.replay_timeout().as_ps();
        let mut lost = [[0; 16]; 64];
        for k in 0..=5 {
            link.poll_units(now + Duration::from_ps(k * timeout), &mut lost);
        }
        assert_eq!(link.counters().retrain_requests, 1);
        // The packet gets through at last, and the fabric settles into its Updates: idle.
        net.run(&mut NoTraffic { done: false }, now + Duration::from_ms(5));
        assert_eq!(net.links[1][0].counters().packets_received, 1);
        assert!(
            net.idle_skipped() > Duration::from_ms(3),
            "{:?}",
            net.idle_skipped()
        );
    }
}
