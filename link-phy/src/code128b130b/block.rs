//! Blocks: a 2-bit sync header and 16 symbols (PCIe 4.2.2.1).
//!
//! On the wire a block is H0, H1, then symbol 0 bit 0 .. symbol 15 bit 7. We hold the 130 bits of a block
//! as `(u128, u8)`: the first 128 bits on the wire (H0 in bit 0) and the last two (symbol 15 bits 6 and 7).

/// The payload of a block: 16 symbols, symbol 0 first on the wire.
pub const BLOCK_SYMBOLS: usize = 16;
/// Bits of a block on the wire.
pub const BLOCK_BITS: u32 = 130;

/// The block type, from the sync header. PCIe writes the header H1H0: 10b for data (H0 = 0 is sent first,
/// then H1 = 1) and 01b for an ordered set (H0 = 1, then H1 = 0). 00b and 11b are undefined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SyncHeader {
    /// H1H0 = 10b: a data block, payload scrambled.
    Data,
    /// H1H0 = 01b: an ordered-set block.
    OrderedSet,
}

impl SyncHeader {
    /// The two header bits with H0 (first on the wire) in bit 0.
    pub const fn bits(self) -> u8 {
        match self {
            SyncHeader::Data => 0b10,
            SyncHeader::OrderedSet => 0b01,
        }
    }

    /// The block type for two received header bits (H0 in bit 0), `None` for 00b and 11b.
    pub const fn from_bits(bits: u8) -> Option<SyncHeader> {
        match bits & 0b11 {
            0b10 => Some(SyncHeader::Data),
            0b01 => Some(SyncHeader::OrderedSet),
            _ => None,
        }
    }
}

/// One block, as the layers above see it: unscrambled payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// Data or ordered set.
    pub header: SyncHeader,
    /// The 16 symbols, symbol 0 first.
    pub payload: [u8; BLOCK_SYMBOLS],
}

impl Block {
    /// A data block.
    pub const fn data(payload: [u8; BLOCK_SYMBOLS]) -> Block {
        Block {
            header: SyncHeader::Data,
            payload,
        }
    }

    /// An ordered-set block.
    pub const fn ordered_set(payload: [u8; BLOCK_SYMBOLS]) -> Block {
        Block {
            header: SyncHeader::OrderedSet,
            payload,
        }
    }
}

/// The 130 wire bits of a header and an (already scrambled) payload, as `(first 128 bits, last 2 bits)`.
#[inline(always)]
pub const fn to_wire(header: u8, payload: u128) -> (u128, u8) {
    ((payload << 2) | (header & 0b11) as u128, (payload >> 126) as u8)
}

/// The header bits and the (still scrambled) payload of 130 wire bits.
#[inline(always)]
pub const fn from_wire(first: u128, last: u8) -> (u8, u128) {
    (
        (first & 0b11) as u8,
        (first >> 2) | ((last as u128 & 0b11) << 126),
    )
}
