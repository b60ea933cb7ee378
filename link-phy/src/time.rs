//! Time as the sans-IO layers see it: a count of picoseconds handed in by whoever drives them.
//!
//! Picoseconds because a unit interval is 400 ps at 2.5 GT/s and 125 ps at 8 GT/s; a `u64` of them lasts
//! over 200 days of simulated time.

use core::ops::{Add, AddAssign, Sub};

/// A point in time, in picoseconds since an arbitrary origin chosen by the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant(pub u64);

/// A span of time in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Duration(pub u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);

    /// Picoseconds since the origin.
    pub const fn as_ps(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// No time.
    pub const ZERO: Duration = Duration(0);

    /// From picoseconds.
    pub const fn from_ps(ps: u64) -> Self {
        Duration(ps)
    }
    /// From nanoseconds (saturating, as the rest of time's arithmetic: past the end of the range is the
    /// end, not a short span after a wrap).
    pub const fn from_ns(ns: u64) -> Self {
        Duration(ns.saturating_mul(1_000))
    }
    /// From microseconds.
    pub const fn from_us(us: u64) -> Self {
        Duration(us.saturating_mul(1_000_000))
    }
    /// From milliseconds.
    pub const fn from_ms(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000_000))
    }
    /// Picoseconds in this span.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// This span in (fractional) nanoseconds, for reports.
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / 1_000.0
    }
    /// Multiply by an integer, saturating.
    pub const fn saturating_mul(self, n: u64) -> Duration {
        Duration(self.0.saturating_mul(n))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d.0);
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::hint::black_box;

    /// Spans too long for a `u64` of picoseconds are the longest there is, as sums of times are.
    #[test]
    fn spans_past_the_range_saturate() {
        let most = Duration(u64::MAX);
        assert_eq!(Duration::from_ns(black_box(u64::MAX / 999)), most);
        assert_eq!(Duration::from_us(black_box(u64::MAX / 999_999)), most);
        assert_eq!(Duration::from_ms(black_box(u64::MAX / 999_999_999)), most);
        assert_eq!(Duration::from_ms(black_box(7)), Duration(7_000_000_000));
        assert_eq!(
            Instant(u64::MAX - 1) + Duration::from_ns(black_box(u64::MAX)),
            Instant(u64::MAX)
        );
    }
}
