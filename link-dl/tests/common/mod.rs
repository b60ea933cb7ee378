//! What the data link's integration tests share: two ends of a link joined unit by unit.

use link_dl::flit::FLIT_LEN;
use link_dl::link::{DataLink, DlConfig};
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

pub type Link = DataLink<64, 256>;

/// Two ends joined by a wire, the time, and the units sent each way so far.
pub struct Joined {
    pub a: Link,
    pub b: Link,
    pub now: Instant,
    pub units: [u64; 2],
}

impl Joined {
    /// Both ends up (x8 at 32 GT/s) and initialised, ready to send.
    pub fn active() -> Joined {
        let mut j = Joined::initialising();
        while !(j.a.is_active() && j.b.is_active()) {
            j.wire(1);
        }
        j
    }

    /// Both ends' physical layers just up (x8 at 32 GT/s): the data links start initialising.
    pub fn initialising() -> Joined {
        let mut j = Joined {
            a: Link::new(DlConfig::default()),
            b: Link::new(DlConfig::default()),
            now: Instant::ZERO,
            units: [0; 2],
        };
        j.a.phy_up(j.now, LinkWidth::X8, Rate::Gen5);
        j.b.phy_up(j.now, LinkWidth::X8, Rate::Gen5);
        j
    }

    /// Move `units` units each way, one unit time apart.
    pub fn wire(&mut self, units: usize) {
        self.wire_changing(units, |_| {});
    }

    /// [`Joined::wire`], with `change` applied to each unit from A to B on the way.
    pub fn wire_changing(&mut self, units: usize, mut change: impl FnMut(&mut [u8; FLIT_LEN])) {
        for _ in 0..units {
            let mut unit = [0u8; FLIT_LEN];
            self.a.poll_unit(self.now, &mut unit);
            change(&mut unit);
            self.b.receive_unit(self.now, &unit, self.units[0]);
            self.units[0] += 1;
            self.b.poll_unit(self.now, &mut unit);
            self.a.receive_unit(self.now, &unit, self.units[1]);
            self.units[1] += 1;
            self.now += Duration::from_ps(640);
        }
    }
}
