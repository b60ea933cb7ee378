//! The data link layer of the link stack: it turns a lossy lane bundle into a link that delivers every
//! packet exactly once, in order, uncorrupted.
//!
//! - [`crc`]: the packet CRC (CRC-32C, Hamming distance 6 over the longest packet), portable and fast.
//! - [`fec`]: optional forward error correction, three interleaved single-symbol-correcting codes over
//!   GF(2^8), which corrects any burst of up to 16 bits on one lane per block.
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod crc;
pub mod fec;

pub mod fuzz;
