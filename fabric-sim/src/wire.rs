//! The fields the fabric needs from a transaction-layer header: where a packet goes and where it came
//! from. The simulator's collectives build their headers with [`header`].
//!
//! Layout of the 58-bit header (bit 57 first): opcode (5 bits), destination endpoint or multicast group
//! (10), source endpoint (10), multicast flag (1), and 32 bits of operation-specific offset.

/// Opcode of a posted write of collective data.
pub const OP_WRITE: u64 = 0x02;
/// A GPU asks a switch's collective engine for the sum of a packet over all GPUs (`ld_reduce`).
pub const OP_REDUCE_READ: u64 = 0x08;
/// The switch's engine reads a packet from a GPU (source field: the GPU that asked for the sum).
pub const OP_READ: u64 = 0x09;
/// A GPU's answer to [`OP_READ`], to the switch's engine (source field: who asked for the sum).
pub const OP_READ_DATA: u64 = 0x0A;
/// The switch's sum, to the GPU that asked.
pub const OP_REDUCE_DATA: u64 = 0x0B;
/// The multicast group of every switch's collective engine: packets for it stop at the first switch.
pub const NVLS_ENGINE: u16 = 63;
/// The multicast group that reaches every GPU behind a switch.
pub const NVLS_ALL: u16 = 62;

/// A header: `opcode`, destination (endpoint, or group when `multicast`), source, and a 32-bit offset.
pub const fn header(opcode: u64, dest: u16, source: u16, multicast: bool, offset: u32) -> u64 {
    (opcode & 0x1F) << 53
        | ((dest as u64) & 0x3FF) << 43
        | ((source as u64) & 0x3FF) << 33
        | (multicast as u64) << 32
        | offset as u64
}

/// Destination, source and multicast group of a header.
pub const fn route_fields(tl: u64) -> (u16, u16, Option<u16>) {
    let dest = ((tl >> 43) & 0x3FF) as u16;
    let source = ((tl >> 33) & 0x3FF) as u16;
    if (tl >> 32) & 1 == 1 {
        (dest, source, Some(dest))
    } else {
        (dest, source, None)
    }
}

/// The opcode of a header.
pub const fn opcode(tl: u64) -> u64 {
    tl >> 53
}

/// The offset of a header.
pub const fn offset(tl: u64) -> u32 {
    tl as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let h = header(OP_WRITE, 1023, 5, false, 0xDEAD_BEEF);
        assert!(h < 1 << 58);
        assert_eq!(route_fields(h), (1023, 5, None));
        assert_eq!((opcode(h), offset(h)), (OP_WRITE, 0xDEAD_BEEF));
        assert_eq!(route_fields(header(OP_WRITE, 7, 1, true, 0)), (7, 1, Some(7)));
    }
}
