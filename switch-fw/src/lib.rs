//! The switch routing core: what a switch's firmware (or its datapath) decides for every packet.
//!
//! - [`route`]: destination endpoint to a set of output ports, and a deterministic hash over the flow that
//!   picks one of them, so packets of one (source, destination, channel) flow stay in order on multipath.
//! - [`partition`]: endpoints assigned to partitions; packets that would cross one are dropped and counted.
//! - [`multicast`] and [`reduce`]: multicast groups, and in-switch reduction (the switch sums the
//!   contributions of a reduction group and multicasts the result, like NVLink SHARP).
//! - [`voq`]: virtual output queues per (input, virtual channel, output) over a per-input descriptor pool.
//! - [`arbiter`]: the two-dimensional iSLIP arbiter: each output grants one (input, channel), each input
//!   accepts one grant, with round-robin pointers that make it starvation-free.
//! - [`switch`]: the core that ties them together, sans-IO: packets in, forwarding decisions out.
//! - [`regs`]: the register interface through which a fabric manager programs the tables.
//! - [`identity`]: the read-only registers through which it discovers the fabric: who a node is and who
//!   is at the other end of each port.
//!
//! Everything is `no_std` and sized by const generics; nothing allocates.
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod arbiter;
mod error;
pub mod fuzz;
pub mod identity;
pub mod multicast;
pub mod partition;
pub mod portset;
pub mod reduce;
pub mod regs;
pub mod route;
pub mod switch;
pub mod voq;

pub use error::SwitchError;
pub use portset::PortSet;

/// Most ports a switch may have.
pub const MAX_PORTS: usize = 64;
/// Virtual channels (as link-dl's).
pub const VCS: usize = 4;
/// Endpoint IDs are 10 bits: up to 1024 endpoints in a fabric.
pub const MAX_ENDPOINTS: usize = 1024;

/// An endpoint's fabric-wide ID (10 bits).
pub type EndpointId = u16;
