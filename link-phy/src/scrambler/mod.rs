//! The two PCI Express scramblers, bit-exact with the Base Specification:
//!
//! - [`Gen1Scrambler`]: 2.5 and 5 GT/s (8b/10b), G(X) = X^16 + X^5 + X^4 + X^3 + 1, seed FFFFh, with the
//!   per-symbol rules (COM resets, SKP holds, K symbols and ordered sets unscrambled).
//! - [`Gen3Scrambler`]: 8 GT/s and up (128b/130b), G(X) = X^23 + X^21 + X^16 + X^8 + X^5 + X^2 + 1, one per
//!   lane with the lane's seed. The block rules live in [`crate::code128b130b`].
//!
//! Both step many bits per table lookup (see `lfsr`), so that bulk data is scrambled word by word.

mod gen1;
mod gen3;
mod lfsr;

pub use gen1::{Gen1Scrambler, GEN1_SEED};
pub use gen3::{lane_seed, Gen3Scrambler, LANE_SEEDS};
