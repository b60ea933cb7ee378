//! The 128b/130b block code of 8 GT/s and up (PCIe 4.2.2), bit-exact with PCI Express:
//!
//! - [`block`]: sync headers and blocks, and their 130 bits on the wire.
//! - [`ordered_set`]: EIEOS, EIOS, SKP, SDS, FTS and TS1/TS2 ordered-set blocks, parsed and emitted.
//! - [`LaneEncoder`] / [`LaneDecoder`]: one lane's scrambling rules, SKP LFSR symbols, training-set DC
//!   balance, block alignment ([`BlockAlignment`]), and fast paths for streams of data blocks.
//! - [`token`]: the framing tokens of the data stream (IDL, SDP, STP, EDB, EDS).

mod align;
pub mod block;
mod lane;
pub mod ordered_set;
pub mod token;

pub use align::BlockAlignment;
pub use block::{Block, SyncHeader, BLOCK_BITS, BLOCK_SYMBOLS};
pub use lane::{DecoderCounters, LaneDecoder, LaneEncoder};
pub use ordered_set::OrderedSetBlock;
pub use token::FramingToken;
