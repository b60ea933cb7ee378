//! What each trunk carried, direction by direction: the packets and flits its sending data link put on
//! the wire. A fabric's hot links (the uplinks a collective crowds, the trunk a hot spot saturates) show
//! here; the counters are the data links' own, so reading them costs the event loop nothing.

use link_phy::time::Instant;

use super::Net;

/// What one direction of a trunk carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionLoad {
    /// The sending node and port.
    pub from: (usize, usize),
    /// Packet transmissions, replays included.
    pub packets: u64,
    /// The flits of those packets (header flits included).
    pub packet_flits: u64,
    /// Control flits: acknowledgements, credit Updates, link initialisation.
    pub control_flits: u64,
    /// Replays of everything unacknowledged.
    pub replays: u64,
    /// Units (flits) the wire had time for, at the rate it had at each instant: a degrade lowers it.
    pub room: u64,
}

/// What one trunk carried, each way.
#[derive(Clone, Debug, PartialEq)]
pub struct TrunkLoad {
    /// The trunk's index in [`crate::manager::Fabric::trunks`].
    pub trunk: usize,
    /// Links ganged in it.
    pub links: usize,
    /// Its rate each way, GB/s, as built (a link lost to a degrade does not lower it; the utilization is
    /// of the rate it had: [`DirectionLoad::room`]).
    pub gbps: f64,
    /// Whether it is up now.
    pub up: bool,
    /// From its end `a` to `b`, and back.
    pub directions: [DirectionLoad; 2],
}

impl TrunkLoad {
    /// What the trunk carried after `earlier` (the same trunk's load, read before): each count less
    /// `earlier`'s.
    pub fn since(&self, earlier: &TrunkLoad) -> TrunkLoad {
        let mut load = self.clone();
        for (d, e) in load.directions.iter_mut().zip(&earlier.directions) {
            d.packets -= e.packets;
            d.packet_flits -= e.packet_flits;
            d.control_flits -= e.control_flits;
            d.replays -= e.replays;
            d.room -= e.room;
        }
        load
    }

    /// The share of direction `d`'s wire its packets' flits took (0 over no time): of the units it had
    /// time for at the rate it had ([`DirectionLoad::room`]), so that a trunk a degrade slowed is not shown
    /// less busy than it is.
    pub fn utilization(&self, d: usize) -> f64 {
        let d = &self.directions[d];
        if d.room == 0 {
            return 0.0;
        }
        d.packet_flits as f64 / d.room as f64
    }

    /// The higher of the two directions' utilizations.
    pub fn busier(&self) -> f64 {
        self.utilization(0).max(self.utilization(1))
    }
}

/// The units a wire direction had time for before its last change of rate, and when that was.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WireRoom {
    before: u64,
    since: Instant,
}

impl WireRoom {
    /// Units the wire had time for up to `now`, `unit_ps` being its unit time since the last change.
    pub(super) fn at(&self, now: Instant, unit_ps: u64) -> u64 {
        self.before + now.saturating_since(self.since).as_ps() / unit_ps.max(1)
    }

    /// The wire, whose unit time was `unit_ps`, takes another rate at `now`.
    pub(super) fn rate_changes(&mut self, now: Instant, unit_ps: u64) {
        (self.before, self.since) = (self.at(now, unit_ps), now);
    }
}

/// What each trunk carried between `start` and `end`, two readings of [`Net::trunk_loads`].
pub fn loads_between(start: &[TrunkLoad], end: &[TrunkLoad]) -> Vec<TrunkLoad> {
    end.iter().zip(start).map(|(e, s)| e.since(s)).collect()
}

impl Net {
    /// What every trunk carried so far, in the order of [`crate::manager::Fabric::trunks`].
    pub fn trunk_loads(&self) -> Vec<TrunkLoad> {
        self.trunk_loads_at(self.now)
    }

    /// What every trunk had carried at `at`, now or later: what it carried so far, over the units its
    /// wire had time for until `at` (a run that ended before `at` sends nothing more).
    pub fn trunk_loads_at(&self, at: Instant) -> Vec<TrunkLoad> {
        let at = at.max(self.now);
        self.fabric
            .trunks
            .iter()
            .zip(&self.dirs)
            .enumerate()
            .map(|(t, (trunk, dirs))| TrunkLoad {
                trunk: t,
                links: trunk.links,
                gbps: trunk.gbps,
                up: dirs[0].up,
                directions: [0, 1].map(|d| {
                    let dir = &dirs[d];
                    let c = self.links[dir.from.0][dir.from.1].counters();
                    DirectionLoad {
                        from: dir.from,
                        packets: c.packets_transmitted,
                        // Initialisation flits are no packet's: a link training in the window is not busy.
                        packet_flits: c.flits_transmitted - c.control_sent - c.init_sent,
                        control_flits: c.control_sent + c.init_sent,
                        replays: c.replays,
                        room: self.wire_room[t][d].at(at, dir.unit_ps),
                    }
                }),
            })
            .collect()
    }
}
