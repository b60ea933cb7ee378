//! The physical layer of the link stack.
//!
//! Everything here is bit-exact with the PCI Express logical physical layer (Base Specification, chapter 4)
//! so that transceivers configured for PCIe, published code tables and other implementations agree with us:
//!
//! - [`code8b10b`]: the 8b/10b line code of 2.5 and 5 GT/s, with running disparity and comma alignment.
//! - [`scrambler`]: the 16-bit (2.5/5 GT/s) and per-lane 23-bit (8 GT/s and up) scramblers.
//! - [`code128b130b`]: the 128b/130b block code, ordered-set blocks, block alignment and framing tokens.
//! - [`ordered_set`]: TS1/TS2 training sets and the other ordered sets, as a parsed [`ordered_set::TrainingSet`].
//! - [`lanes`]: striping over x1..x16, lane-to-lane deskew, lane reversal and polarity inversion.
//! - [`ltssm`]: link training, a sans-IO state machine in the spirit of the PCIe LTSSM.
//! - `channel` (feature `std`): a seeded model of N lanes with skew, bit errors, bursts and dead lanes.
//!
//! The crate is `no_std` and never allocates: every buffer is a caller's slice or a fixed-size array.
//! Bit order, stated once: a 10-bit code group is held in a `u16` with bit `a` (first on the wire) as bit 0,
//! and serial bit streams are packed least-significant bit first (bit 0 of byte 0 is the first bit on the wire).
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

mod error;
pub mod symbol;
pub mod time;

pub mod code128b130b;
pub mod code8b10b;
pub mod lanes;
pub mod ltssm;
pub mod ordered_set;
pub mod rate;
pub mod scrambler;
pub mod serial;

#[cfg(feature = "std")]
pub mod channel;
#[cfg(feature = "std")]
pub mod pair;

#[cfg(feature = "std")]
pub mod fuzz;

pub use error::Error;
pub use symbol::{Disparity, Symbol};
pub use time::{Duration, Instant};
