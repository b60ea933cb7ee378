//! Checks of command-line values that several commands make.

use anyhow::ensure;
use link_tl::endpoint::pair::BitErrors;

/// The value of an option that takes a number (its `value_parser`): a number as Rust reads one, `-0` read
/// as 0, so that the reports that print the options back say 0, not "-0" (and the range checks took -0).
pub fn float(s: &str) -> Result<f64, std::num::ParseFloatError> {
    // -0.0 + 0.0 is +0.0; every other value is unchanged.
    s.parse::<f64>().map(|x| x + 0.0)
}

/// Refuses `item`, given to `flag`, if `seen` holds it already, and keeps it: given twice, it would change
/// nothing the first did not, so the user meant something else. `name` says it in the message.
pub fn ensure_once<T: PartialEq>(
    seen: &mut Vec<T>,
    item: T,
    flag: &str,
    name: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    ensure!(!seen.contains(&item), "{flag} names {} twice", name());
    seen.push(item);
    Ok(())
}

/// Refuses `value` for `flag` unless it is at least 0 and below `bound` (a probability or a rate).
pub fn ensure_below(flag: &str, value: f64, bound: f64) -> anyhow::Result<()> {
    ensure!(
        (0.0..bound).contains(&value),
        "{flag} must be at least 0 and below {bound}, not {value:?}"
    );
    Ok(())
}

/// Refuses `value` for `flag` unless it is from 0 to `most`, both included.
pub fn ensure_within(flag: &str, value: f64, most: f64) -> anyhow::Result<()> {
    ensure!(
        (0.0..=most).contains(&value),
        "{flag} must be from 0 to {most}, not {value:?}"
    );
    Ok(())
}

/// Refuses a `--ber` that the wire between two data links back to back (`tl copy`, the coherence stress)
/// does not model: it flips at most one bit per unit, so from 1/128 up every unit is hit and nothing gets
/// through.
pub fn ensure_unit_wire_ber(ber: f64) -> anyhow::Result<()> {
    ensure!(
        (0.0..BitErrors::MAX_BER).contains(&ber),
        "--ber must be at least 0 and below 1/128 = {}, not {ber:?}: the wire model flips at most one bit \
         per 128-bit unit",
        BitErrors::MAX_BER
    );
    Ok(())
}
