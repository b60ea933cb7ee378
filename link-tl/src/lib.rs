//! The transaction layer of the link stack: reads, writes, atomics, completions and messages over the data
//! link's reliable packets.
//!
//! - [`header`]: the 58-bit header in the data link's header flit, and the extension flit.
//! - [`packet`]: whole packets ([`Packet`]) and their parsed, zero-copy form ([`Tlp`]).
//! - [`address`]: the global address map, from a 64-bit fabric address to (endpoint, local address).
//! - [`packetize`]: transfers of any length and alignment as packets of at most 128 bytes that never cross
//!   a 128-byte boundary, and reassembly of read completions per tag.
//! - [`tags`]: the outstanding-request table, with completion timeouts.
//! - [`ordering`]: the ordering rules, enforced in the transmit queue.
//! - [`endpoint`]: a whole endpoint: the memory it exposes, the completer that serves peers' requests
//!   against it, and the requester that copies to and from peers' memory (DMA) and runs atomics.
//!
//! `docs/spec.md` section 3 is the normative description of the formats. The crate is `no_std` and never
//! allocates: table sizes and queue depths are const generics.
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod address;
pub mod coherence;
pub mod endpoint;
mod error;
pub mod header;
pub mod ordering;
pub mod packet;
pub mod packetize;
pub mod tags;
pub mod xorshift;

#[cfg(feature = "std")]
pub mod fuzz;

pub use address::{AddressMap, Window};
pub use endpoint::{Endpoint, Event, Memory};
pub use error::TlError;
pub use header::{EndpointId, Opcode, Status, Tag};
pub use ordering::Egress;
pub use packet::{Packet, Tlp};
pub use packetize::{Pieces, PostedWrites, ReadCompletions, Reassembler, Requests};
pub use tags::Outstanding;
