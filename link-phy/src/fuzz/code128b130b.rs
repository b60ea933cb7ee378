//! Fuzz entry points for the 128b/130b decoders.

use crate::code128b130b::{
    BlockAlignment, FramingToken, LaneDecoder, LaneEncoder, OrderedSetBlock, SyncHeader, BLOCK_BITS,
    BLOCK_SYMBOLS,
};
use crate::error::Error;

/// The lane decoder over an arbitrary bit stream. Byte 0 picks the lane and byte 1 the chunk size; the rest
/// is serial bits pushed in chunks, popping after each. Checks: no panic; errors are the typed block errors;
/// alignment moves only as documented. Then the fast data path over the same bytes: if they decode, encoding
/// the result again reproduces them bit for bit.
pub fn decode_128b130b(data: &[u8]) {
    let [lane, chunk, stream @ ..] = data else {
        return;
    };
    let lane = usize::from(*lane % 32);
    let chunk = u32::from(*chunk % 64) + 1;
    let mut decoder = LaneDecoder::new(lane);
    let mut pending = 0u128;
    let mut pending_bits = 0u32;
    let mut delivered = 0u64;
    let mut push = |decoder: &mut LaneDecoder, bits: u64, count: u32| {
        decoder.push_bits(bits, count);
        while let Some(item) = decoder.pop() {
            delivered += 1;
            match item {
                Ok(block) => {
                    assert_ne!(decoder.alignment(), BlockAlignment::Unaligned);
                    if block.header == SyncHeader::OrderedSet {
                        // Parsing a received ordered set must never panic either.
                        let _ = OrderedSetBlock::parse(&block.payload);
                    }
                }
                Err(Error::InvalidSyncHeader { header, .. }) => {
                    assert!(header == 0b00 || header == 0b11);
                    assert_eq!(decoder.alignment(), BlockAlignment::Unaligned);
                }
                Err(Error::MalformedOrderedSet { position, .. }) => assert!(position < 24),
                Err(e) => panic!("unexpected error {e:?}"),
            }
            assert!(delivered <= 2 + 2 * 8 * stream.len() as u64 / 66);
        }
    };
    for &byte in stream {
        pending |= u128::from(byte) << pending_bits;
        pending_bits += 8;
        while pending_bits >= chunk {
            push(&mut decoder, pending as u64, chunk);
            pending >>= chunk;
            pending_bits -= chunk;
        }
    }
    push(&mut decoder, pending as u64, pending_bits);
    assert_eq!(decoder.counters().dropped_bits, 0);

    let nblocks = stream.len() * 8 / BLOCK_BITS as usize;
    let mut out = [0u8; 64 * BLOCK_SYMBOLS];
    let nblocks = nblocks.min(64);
    let mut decoder = LaneDecoder::new(lane);
    match decoder.decode_data(stream, nblocks, &mut out) {
        Ok(()) => {
            let mut again = [0u8; 64 * 17];
            let bits = LaneEncoder::new(lane)
                .encode_data(&out[..nblocks * BLOCK_SYMBOLS], &mut again)
                .unwrap();
            let whole = bits / 8;
            assert_eq!(again[..whole], stream[..whole]);
            let rest = (bits % 8) as u32;
            if rest > 0 {
                let mask = (1u8 << rest) - 1;
                assert_eq!(again[whole] & mask, stream[whole] & mask);
            }
        }
        Err(Error::InvalidSyncHeader { position, .. } | Error::UnexpectedOrderedSetBlock { position }) => {
            assert!(position < nblocks)
        }
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

/// Ordered-set block parsing over arbitrary 16 bytes: no panic, and what parses re-emits to a payload that
/// parses to the same set.
pub fn parse_ordered_set_block(data: &[u8]) {
    let mut payload = [0u8; BLOCK_SYMBOLS];
    let n = data.len().min(BLOCK_SYMBOLS);
    payload[..n].copy_from_slice(&data[..n]);
    match OrderedSetBlock::parse(&payload) {
        Ok(os) => assert_eq!(OrderedSetBlock::parse(&os.to_payload()), Ok(os)),
        Err(Error::MalformedOrderedSet { position, found }) => {
            assert!(position < BLOCK_SYMBOLS);
            assert_eq!(found, payload[position]);
        }
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

/// Framing-token parsing over arbitrary bytes: no panic, typed errors, and a parsed token emits back to
/// exactly the bytes it was parsed from.
pub fn parse_framing_token(data: &[u8]) {
    match FramingToken::parse(data) {
        Ok((token, len)) => {
            assert_eq!(len, token.len());
            let mut out = [0u8; 4];
            assert_eq!(token.emit(&mut out), Ok(len));
            assert_eq!(out[..len], data[..len]);
        }
        Err(Error::BufferTooSmall { needed, available }) => {
            assert!(available < needed && needed <= 4 && available == data.len())
        }
        Err(Error::InvalidFramingToken { first }) => assert_eq!(first, data[0]),
        Err(Error::FramingTokenCheck { token }) => assert_eq!(token[..], data[..4]),
        Err(e) => panic!("unexpected error {e:?}"),
    }
}
