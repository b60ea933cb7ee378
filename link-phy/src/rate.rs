//! Data rates and the line code each one uses.

use crate::ordered_set::DataRates;
use crate::time::Duration;

/// A PCI Express data rate. The link trains at [`Rate::Gen1`] and moves up to the highest rate both ports
/// advertise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Rate {
    /// 2.5 GT/s, 8b/10b.
    Gen1,
    /// 5.0 GT/s, 8b/10b.
    Gen2,
    /// 8.0 GT/s, 128b/130b.
    Gen3,
    /// 16.0 GT/s, 128b/130b.
    Gen4,
    /// 32.0 GT/s, 128b/130b.
    Gen5,
}

/// The line code used at a rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LineCode {
    /// 8b/10b, 2.5 and 5 GT/s.
    Code8b10b,
    /// 128b/130b, 8 GT/s and up.
    Code128b130b,
}

impl LineCode {
    /// The name used on the command line and in reports: `8b10b` or `128b130b`.
    pub const fn name(self) -> &'static str {
        match self {
            LineCode::Code8b10b => "8b10b",
            LineCode::Code128b130b => "128b130b",
        }
    }

    /// Payload bits per line bits: 0.8 or 128/130.
    pub fn efficiency(self) -> f64 {
        match self {
            LineCode::Code8b10b => 0.8,
            LineCode::Code128b130b => 128.0 / 130.0,
        }
    }
}

impl Rate {
    /// Every rate, slowest first.
    pub const ALL: [Rate; 5] = [Rate::Gen1, Rate::Gen2, Rate::Gen3, Rate::Gen4, Rate::Gen5];

    /// Transfers per second per lane.
    pub const fn transfers_per_second(self) -> u64 {
        match self {
            Rate::Gen1 => 2_500_000_000,
            Rate::Gen2 => 5_000_000_000,
            Rate::Gen3 => 8_000_000_000,
            Rate::Gen4 => 16_000_000_000,
            Rate::Gen5 => 32_000_000_000,
        }
    }

    /// One unit interval (bit time), in picoseconds. Exact for every rate: 400, 200, 125, 62.5 -> see
    /// [`Rate::bits_time`] for spans of bits, which stays exact at 16 and 32 GT/s.
    pub const fn bits_time(self, bits: u64) -> Duration {
        // ps = bits * 1e12 / rate. A product past 64 bits (from 1.8e13 bits) is worked in 128, and a span
        // past the range saturates, as time does; slot times, on the simulator's hot path, stay in 64.
        let per_mtps = self.transfers_per_second() / 1_000_000;
        match bits.checked_mul(1_000_000) {
            Some(product) => Duration(product / per_mtps),
            None => {
                let ps = bits as u128 * 1_000_000 / per_mtps as u128;
                Duration(if ps > u64::MAX as u128 {
                    u64::MAX
                } else {
                    ps as u64
                })
            }
        }
    }

    /// The line code at this rate.
    pub const fn line_code(self) -> LineCode {
        match self {
            Rate::Gen1 | Rate::Gen2 => LineCode::Code8b10b,
            _ => LineCode::Code128b130b,
        }
    }

    /// Bits a lane sends per transmit slot: one 10-bit code group, or one 130-bit block.
    pub const fn slot_bits(self) -> u32 {
        match self.line_code() {
            LineCode::Code8b10b => 10,
            LineCode::Code128b130b => 130,
        }
    }

    /// Payload bytes a lane carries per slot: one symbol, or a block of sixteen.
    pub const fn slot_bytes(self) -> usize {
        match self.line_code() {
            LineCode::Code8b10b => 1,
            LineCode::Code128b130b => 16,
        }
    }

    /// Duration of one transmit slot.
    pub const fn slot_time(self) -> Duration {
        self.bits_time(self.slot_bits() as u64)
    }

    /// The bit naming this rate in a training set's rate identifier.
    pub const fn advertised_bit(self) -> DataRates {
        match self {
            Rate::Gen1 => DataRates::GEN1,
            Rate::Gen2 => DataRates::GEN2,
            Rate::Gen3 => DataRates::GEN3,
            Rate::Gen4 => DataRates::GEN4,
            Rate::Gen5 => DataRates::GEN5,
        }
    }

    /// The rate identifier advertising every rate up to and including this one.
    pub fn advertise_up_to(self) -> DataRates {
        Rate::ALL
            .iter()
            .filter(|r| **r <= self)
            .fold(DataRates::empty(), |acc, r| acc | r.advertised_bit())
    }

    /// The highest rate named in `rates` such that every lower rate is named too (PCIe requires a port to
    /// support every rate below its highest).
    pub fn highest_in(rates: DataRates) -> Option<Rate> {
        let mut best = None;
        for r in Rate::ALL {
            if rates.contains(r.advertised_bit()) {
                best = Some(r);
            } else {
                break;
            }
        }
        best
    }

    /// Giga-transfers per second, for reports.
    pub fn gts(self) -> f64 {
        self.transfers_per_second() as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_times() {
        assert_eq!(Rate::Gen1.slot_time(), Duration::from_ns(4));
        assert_eq!(Rate::Gen2.slot_time(), Duration::from_ns(2));
        assert_eq!(Rate::Gen3.slot_time(), Duration::from_ps(16_250));
        assert_eq!(Rate::Gen5.slot_time(), Duration::from_ps(4_062));
    }

    /// Spans of bits of any count: exact while the time fits (bits times 10^6 overflowed a u64 from 1.8e13
    /// bits on), the longest there is past that.
    #[test]
    fn bit_spans_of_any_length() {
        let bits = core::hint::black_box(1u64 << 45);
        assert_eq!(
            Rate::Gen5.bits_time(bits),
            Duration::from_ps(1_099_511_627_776_000)
        );
        assert_eq!(Rate::Gen1.bits_time(bits), Duration::from_ps(bits * 400));
        assert_eq!(Rate::Gen1.bits_time(u64::MAX), Duration::from_ps(u64::MAX));
        assert_eq!(Rate::Gen3.bits_time(130), Duration::from_ps(16_250));
    }

    #[test]
    fn highest_common_rate() {
        let a = Rate::Gen3.advertise_up_to();
        let b = Rate::Gen2.advertise_up_to();
        assert_eq!(Rate::highest_in(a & b), Some(Rate::Gen2));
        assert_eq!(Rate::highest_in(DataRates::GEN3), None);
    }
}
