//! The fields the fabric needs from a transaction-layer header: where a packet goes and where it came
//! from. The simulator's collectives build their headers with [`header`].
//!
//! Layout of the 58-bit header (bit 57 first): opcode (5 bits), destination endpoint or multicast group
//! (10), source endpoint (10), multicast flag (1), and 32 bits of operation-specific offset.

/// Opcode of synthetic traffic's posted writes ([`crate::traffic`]), so that they are told apart from
/// a collective's beside them.
pub const OP_TRAFFIC: u64 = 0x01;
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
/// A packet a switch could not deliver after a failure, on its way back to its source, which sends it
/// again by another path. Its header swaps destination and source and keeps the original opcode in offset
/// bits 31:27 (so offsets of packets that may bounce stay below 2^27).
pub const OP_BOUNCE: u64 = 0x0F;
/// Offsets at or above this cannot be carried by a bounce.
pub const BOUNCE_OFFSET_LIMIT: u32 = 1 << 27;
/// The multicast group of every switch's collective engine: packets for it stop at the first switch.
pub const NVLS_ENGINE: u16 = 63;
/// The multicast group that reaches every GPU behind a switch.
pub const NVLS_ALL: u16 = 62;

/// What a packet of `opcode` is, in a word or two (as `docs/spec.md` section 7.1 lists them), or `None`
/// for an opcode the simulator does not send.
pub const fn opcode_name(opcode: u64) -> Option<&'static str> {
    Some(match opcode {
        OP_TRAFFIC => "traffic write",
        OP_WRITE => "data",
        crate::collective::OP_PARTIAL => "partial sum",
        crate::collective::OP_RESULT => "result",
        crate::collective::tree::OP_CREDIT => "tree credit",
        OP_REDUCE_READ => "ld_reduce",
        OP_READ => "engine read",
        OP_READ_DATA => "read answer",
        OP_REDUCE_DATA => "sum",
        OP_BOUNCE => "returned",
        _ => return None,
    })
}

/// Whether a packet belongs to the switches' collective engines: a multicast, or an `ld_reduce`, a read
/// of the engine, its answer, or a sum. After a failure such packets are not sent again by another path
/// or returned (a reduction cannot move to another switch halfway); the collective does the work again.
pub const fn is_engine_traffic(tl: u64) -> bool {
    let op = opcode(tl);
    (tl >> 32) & 1 == 1 || (op >= OP_REDUCE_READ && op <= OP_REDUCE_DATA)
}

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

/// The header that returns a packet to its source, or `None` if it cannot bounce (multicast, a bounce
/// already, or an offset too large).
pub const fn bounce(tl: u64) -> Option<u64> {
    let (dest, source, multicast) = route_fields(tl);
    if multicast.is_some() || opcode(tl) == OP_BOUNCE || offset(tl) >= BOUNCE_OFFSET_LIMIT {
        return None;
    }
    Some(header(
        OP_BOUNCE,
        source,
        dest,
        false,
        (opcode(tl) as u32) << 27 | offset(tl),
    ))
}

/// The header a packet was sent with: a returned packet's original one, any other's own.
pub const fn original(tl: u64) -> u64 {
    if opcode(tl) == OP_BOUNCE {
        unbounce(tl)
    } else {
        tl
    }
}

/// The original header of a bounced packet.
pub const fn unbounce(tl: u64) -> u64 {
    let (source, dest, _) = route_fields(tl);
    let offset = offset(tl);
    header(
        (offset >> 27) as u64,
        dest,
        source,
        false,
        offset % BOUNCE_OFFSET_LIMIT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_example_of_section_7_1() {
        let h = header(OP_WRITE, 5, 3, false, 0x1234);
        assert_eq!(h, 0x0040_2806_0000_1234);
        assert_eq!(h.to_be_bytes(), [0x00, 0x40, 0x28, 0x06, 0x00, 0x00, 0x12, 0x34]);
        assert_eq!(bounce(h), Some(0x01E0_180A_1000_1234));
        // The spec's text says the same.
        let spec = include_str!("../../docs/spec.md");
        let section = &spec[spec.find("### 7.1").unwrap()..spec.find("## 8.").unwrap()];
        let words = section.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains("`H = 40280600001234h`, bytes `00 40 28 06 00 00 12 34`"),
            "{words}"
        );
        assert!(words.contains("`H = 1E0180A10001234h`"), "{words}");
    }

    #[test]
    fn fields_round_trip() {
        let h = header(OP_WRITE, 1023, 5, false, 0xDEAD_BEEF);
        assert!(h < 1 << 58);
        assert_eq!(route_fields(h), (1023, 5, None));
        assert_eq!((opcode(h), offset(h)), (OP_WRITE, 0xDEAD_BEEF));
        assert_eq!(route_fields(header(OP_WRITE, 7, 1, true, 0)), (7, 1, Some(7)));
    }

    #[test]
    fn engine_traffic_is_multicast_or_the_reduction_opcodes() {
        assert!(is_engine_traffic(header(0x04, NVLS_ALL, 3, true, 9)));
        for op in [OP_REDUCE_READ, OP_READ, OP_READ_DATA, OP_REDUCE_DATA] {
            assert!(is_engine_traffic(header(op, 2, 3, false, 9)), "{op:#x}");
        }
        for op in [OP_WRITE, 0x03, 0x05, OP_BOUNCE] {
            assert!(!is_engine_traffic(header(op, 2, 3, false, 9)), "{op:#x}");
        }
    }

    #[test]
    fn a_bounce_returns_to_the_source_and_restores_the_header() {
        let h = header(0x04, 7, 3, false, BOUNCE_OFFSET_LIMIT - 1);
        let b = bounce(h).unwrap();
        assert_eq!((opcode(b), route_fields(b)), (OP_BOUNCE, (3, 7, None)));
        assert_eq!(unbounce(b), h);
        assert_eq!(bounce(b), None, "a bounce never bounces");
        assert_eq!(bounce(header(0x04, 7, 3, true, 0)), None);
        assert_eq!(bounce(header(0x04, 7, 3, false, BOUNCE_OFFSET_LIMIT)), None);
    }
}
