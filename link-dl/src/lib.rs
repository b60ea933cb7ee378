//! The data link layer of the link stack: it turns a lossy lane bundle into a link that delivers every
//! packet exactly once, in order, uncorrupted.
//!
//! - [`flit`]: the wire format: 16-byte flits, packets of up to ten, control flits.
//! - [`framing`]: how a receiver frames units into packets, and finds a boundary again after an error.
//! - [`link`]: the sans-IO state machine: sequence numbers, replay, ACK/NAK, credits, FEC blocks.
//! - [`endpoint`]: the physical layer and the data link of one port, wired together.
//! - [`credit`]: credit accounting per virtual channel ([`vc`]).
//! - [`crc`]: the packet CRC (CRC-32C, Hamming distance 6 over the longest packet), portable and fast.
//! - [`fec`]: optional forward error correction, three interleaved single-symbol-correcting codes over
//!   GF(2^8), which corrects any burst of up to 16 bits on one lane per block.
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod crc;
pub mod credit;
pub mod endpoint;
mod error;
pub mod fec;
pub mod flit;
pub mod framing;
pub mod link;
mod ring;
pub mod seq;
#[cfg(feature = "std")]
pub mod sim;
pub mod vc;

pub use endpoint::Endpoint;
pub use error::DlError;
pub use link::{DataLink, DlConfig, DlCounters, DlEvent, DlState, PowerRequest, PowerState, Received};
pub use vc::Vc;

pub mod fuzz;
