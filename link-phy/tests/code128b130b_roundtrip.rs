//! 128b/130b round trips: lane encoder -> serial bits (with an arbitrary bit offset in front) -> lane
//! decoder, the data fast paths, ordered-set blocks and framing tokens; and the receiver's alignment and
//! error behaviour.

use link_phy::code128b130b::ordered_set::{skp_tail, EIEOS, SKP_END, SKP_SYMBOL};
use link_phy::code128b130b::{
    Block, BlockAlignment, FramingToken, LaneDecoder, LaneEncoder, OrderedSetBlock, SyncHeader,
};
use link_phy::ordered_set::{DataRates, TrainingControl, TrainingSet, TsKind};
use link_phy::scrambler::lane_seed;
use link_phy::Error;
use proptest::prelude::*;

/// Serial bits, first on the wire first.
#[derive(Default)]
struct Bits(Vec<bool>);

impl Bits {
    fn push(&mut self, value: u128, count: u32) {
        self.0.extend((0..count).map(|i| value >> i & 1 == 1));
    }

    fn block(&mut self, wire: (u128, u8)) {
        self.push(wire.0, 128);
        self.push(wire.1.into(), 2);
    }

    /// Feed a decoder in chunks of the given sizes (cycled), popping after each; returns what it popped.
    fn feed(&self, decoder: &mut LaneDecoder, chunks: &[u32]) -> Vec<Result<Block, Error>> {
        let mut out = Vec::new();
        let mut at = 0;
        for &n in chunks.iter().cycle() {
            if at >= self.0.len() {
                break;
            }
            let n = (n as usize).min(self.0.len() - at);
            let word = self.0[at..at + n]
                .iter()
                .enumerate()
                .fold(0u64, |w, (i, &b)| w | (b as u64) << i);
            decoder.push_bits(word, n as u32);
            at += n;
            while let Some(item) = decoder.pop() {
                out.push(item);
            }
        }
        out
    }
}

fn training_set() -> impl Strategy<Value = TrainingSet> {
    (
        any::<bool>(),
        prop::option::of(any::<u8>().prop_filter("F7h is PAD", |&l| l != 0xF7)),
        prop::option::of(0u8..32),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(ts2, link, lane, n_fts, rates, control)| TrainingSet {
            kind: if ts2 { TsKind::Ts2 } else { TsKind::Ts1 },
            link,
            lane,
            n_fts,
            rates: DataRates::from_bits_retain(rates),
            control: TrainingControl::from_bits_retain(control),
        })
}

fn block_after_sds() -> impl Strategy<Value = Block> {
    prop_oneof![
        6 => any::<[u8; 16]>().prop_map(Block::data),
        1 => Just(OrderedSetBlock::skp().to_block()),
        1 => training_set().prop_map(|ts| OrderedSetBlock::Training(ts).to_block()),
        1 => Just(OrderedSetBlock::Eios.to_block()),
        1 => Just(OrderedSetBlock::Fts.to_block()),
        1 => Just(OrderedSetBlock::Eieos.to_block()),
    ]
}

/// What the receiver should make of a block the transmitter was given.
fn same_block(sent: &Block, got: &Block) -> bool {
    if sent.header != got.header {
        return false;
    }
    match sent.header {
        SyncHeader::Data => sent.payload == got.payload,
        SyncHeader::OrderedSet => match (
            OrderedSetBlock::parse(&sent.payload),
            OrderedSetBlock::parse(&got.payload),
        ) {
            // The transmitter fills in the SKP tail; its content is checked by the receiver's counters.
            (Ok(OrderedSetBlock::Skp { .. }), Ok(OrderedSetBlock::Skp { .. })) => true,
            (a, b) => a == b,
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn blocks_survive_the_wire_after_any_bit_offset(
        lane in 0usize..32,
        garbage in prop::collection::vec(any::<bool>(), 0..300),
        training in prop::collection::vec(training_set(), 1..4),
        blocks in prop::collection::vec(block_after_sds(), 0..40),
        chunks in prop::collection::vec(1u32..=64, 1..8),
    ) {
        let mut encoder = LaneEncoder::new(lane);
        let mut sent = vec![OrderedSetBlock::Eieos.to_block()];
        sent.extend(training.iter().map(|&ts| OrderedSetBlock::Training(ts).to_block()));
        sent.push(OrderedSetBlock::Sds.to_block());
        sent.extend(blocks);
        let mut bits = Bits(garbage);
        for block in &sent {
            bits.block(encoder.encode_block(block));
        }
        let mut decoder = LaneDecoder::new(lane);
        let got = bits.feed(&mut decoder, &chunks);
        prop_assert_eq!(got.len(), sent.len());
        for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
            let g = g.as_ref().map_err(|e| TestCaseError::fail(format!("block {i}: {e}")))?;
            prop_assert!(same_block(s, g), "block {}: sent {:02x?}, got {:02x?}", i, s, g);
        }
        let counters = decoder.counters();
        prop_assert_eq!(counters.skp_lfsr_mismatches, 0);
        prop_assert_eq!(counters.data_parity_errors, 0);
        prop_assert_eq!(counters.invalid_sync_headers, 0);
        prop_assert_eq!(counters.alignments, 1);
        let ends_in_stream = !sent[1..].iter().any(|b| b.header == SyncHeader::OrderedSet && b.payload == EIEOS);
        prop_assert_eq!(decoder.alignment(), if ends_in_stream { BlockAlignment::Locked } else { BlockAlignment::Aligned });
    }

    #[test]
    fn data_fast_paths_equal_the_block_path(lane in 0usize..32, payload in prop::collection::vec(any::<u8>(), 0..41).prop_map(|v| v.repeat(16))) {
        let blocks: Vec<Block> = payload.chunks(16).map(|c| Block::data(c.try_into().unwrap())).collect();
        let mut fast = vec![0u8; payload.len() / 16 * 17 + 1];
        let mut slow = fast.clone();
        let n = LaneEncoder::new(lane).encode_data(&payload, &mut fast).unwrap();
        prop_assert_eq!(LaneEncoder::new(lane).encode_blocks(&blocks, &mut slow).unwrap(), n);
        prop_assert_eq!(n, 130 * blocks.len());
        prop_assert_eq!(&fast, &slow);
        let mut back = vec![0u8; payload.len()];
        LaneDecoder::new(lane).decode_data(&fast, blocks.len(), &mut back).unwrap();
        prop_assert_eq!(back, payload);
    }

    #[test]
    fn ordered_sets_parse_back(ts in training_set(), tail in any::<[u8; 3]>()) {
        for os in [OrderedSetBlock::Training(ts), OrderedSetBlock::Skp { tail }, OrderedSetBlock::Eieos,
                   OrderedSetBlock::Eios, OrderedSetBlock::Sds, OrderedSetBlock::Fts] {
            prop_assert_eq!(OrderedSetBlock::parse(&os.to_payload()), Ok(os));
        }
    }

    #[test]
    fn framing_tokens_round_trip(length_dw in 0u16..2048, seq in 0u16..4096, which in 0usize..5) {
        prop_assume!(length_dw != 1);
        let token = [FramingToken::Idl, FramingToken::Sdp, FramingToken::Edb, FramingToken::Eds,
                     FramingToken::Stp { length_dw, seq }][which];
        let mut bytes = [0u8; 4];
        let len = token.emit(&mut bytes).unwrap();
        prop_assert_eq!(FramingToken::parse(&bytes[..len]), Ok((token, len)));
    }

    #[test]
    fn stp_length_errors_of_up_to_three_bits_are_detected(length_dw in 0u16..2048, seq in 0u16..4096) {
        prop_assume!(length_dw != 1);
        let mut token = [0u8; 4];
        FramingToken::Stp { length_dw, seq }.emit(&mut token).unwrap();
        // The protected bits: length[3:0] (+0 [7:4]), length[10:4] and parity (+1), frame CRC (+2 [7:4]).
        let protected: Vec<(usize, u8)> = (4..8).map(|b| (0, b)).chain((0..8).map(|b| (1, b))).chain((4..8).map(|b| (2, b))).collect();
        for a in 0..protected.len() {
            for b in a..protected.len() {
                for c in b..protected.len() {
                    let mut bad = token;
                    for i in [a, b, c].into_iter().collect::<std::collections::BTreeSet<_>>() {
                        let (byte, bit) = protected[i];
                        bad[byte] ^= 1 << bit;
                    }
                    prop_assert!(FramingToken::parse(&bad).is_err(), "{:02x?} -> {:02x?} accepted", token, bad);
                }
            }
        }
    }
}

/// An aligned, locked decoder and the matching encoder.
fn locked_pair(lane: usize) -> (LaneEncoder, LaneDecoder, Bits) {
    let mut encoder = LaneEncoder::new(lane);
    let mut bits = Bits::default();
    bits.block(encoder.encode_block(&OrderedSetBlock::Eieos.to_block()));
    bits.block(encoder.encode_block(&OrderedSetBlock::Sds.to_block()));
    let mut decoder = LaneDecoder::new(lane);
    let got = bits.feed(&mut decoder, &[64]);
    assert_eq!(got.len(), 2);
    assert_eq!(decoder.alignment(), BlockAlignment::Locked);
    (encoder, decoder, Bits::default())
}

#[test]
fn skp_ordered_sets_of_every_length_are_accepted() {
    // Receivers accept 4 to 20 SKP symbols before SKP_END (PCIe 4.2.8.2; retimers add or remove 4).
    for skps in [4u32, 8, 12, 16, 20] {
        let (mut encoder, mut decoder, mut bits) = locked_pair(3);
        bits.block(encoder.encode_block(&Block::data([7; 16])));
        let state = encoder.scrambler().state();
        let parity = {
            // The parity of the scrambled payload of the one data block sent since the SDS.
            let mut probe = LaneEncoder::new(3);
            probe.encode_block(&OrderedSetBlock::Eieos.to_block());
            probe.encode_block(&OrderedSetBlock::Sds.to_block());
            let (first, last) = probe.encode_block(&Block::data([7; 16]));
            ((first >> 2).count_ones() + (last as u32).count_ones()) & 1 == 1
        };
        bits.push(0b01, 2);
        for _ in 0..skps {
            bits.push(SKP_SYMBOL.into(), 8);
        }
        bits.push(SKP_END.into(), 8);
        for t in skp_tail(state, parity) {
            bits.push(t.into(), 8);
        }
        bits.block(encoder.encode_block(&Block::data([9; 16])));
        let got = bits.feed(&mut decoder, &[13]);
        assert_eq!(got.len(), 3, "{skps} SKP symbols");
        assert_eq!(got[0], Ok(Block::data([7; 16])));
        assert!(matches!(
            OrderedSetBlock::parse(&got[1].unwrap().payload),
            Ok(OrderedSetBlock::Skp { .. })
        ));
        assert_eq!(decoder.last_skp_symbols() as u32, skps + 4);
        assert_eq!(got[2], Ok(Block::data([9; 16])));
        assert_eq!(decoder.counters().skp_lfsr_mismatches, 0);
        assert_eq!(decoder.counters().data_parity_errors, 0);
    }
}

#[test]
fn a_wrong_data_parity_bit_is_counted() {
    let (mut encoder, mut decoder, mut bits) = locked_pair(0);
    bits.block(encoder.encode_block(&Block::data([1; 16])));
    let (first, last) = encoder.encode_block(&OrderedSetBlock::skp().to_block());
    // Symbol 13 bit 7 is wire bit 2 + 13 * 8 + 7.
    bits.block((first ^ 1 << (2 + 13 * 8 + 7), last));
    bits.feed(&mut decoder, &[64]);
    assert_eq!(decoder.counters().data_parity_errors, 1);
    assert_eq!(decoder.counters().skp_lfsr_mismatches, 0);
}

#[test]
fn an_undefined_sync_header_in_a_data_stream_is_counted_and_taken_as_data() {
    for header in [0b00u8, 0b11] {
        let (mut encoder, mut decoder, mut bits) = locked_pair(1);
        bits.block(encoder.encode_block(&Block::data([0; 16])));
        let (first, last) = encoder.encode_block(&Block::data([5; 16]));
        bits.block(((first & !0b11) | u128::from(header), last));
        bits.block(encoder.encode_block(&Block::data([6; 16])));
        let got = bits.feed(&mut decoder, &[64]);
        assert_eq!(
            got,
            [
                Ok(Block::data([0; 16])),
                Ok(Block::data([5; 16])),
                Ok(Block::data([6; 16]))
            ]
        );
        assert_eq!(decoder.alignment(), BlockAlignment::Locked);
        assert_eq!(decoder.counters().invalid_sync_headers, 1);
    }
}

/// A flipped sync header bit on a SKP ordered set (of any length) or an EIEOS in a data stream: the
/// block is still taken as what its content unmistakably is. Taken as data (as it had been), a SKP
/// advanced the descrambler by 128 bits it never advances, and every later data block of the lane came
/// out as garbage for the rest of the data stream; an EIEOS did not reset it.
#[test]
fn a_skp_or_eieos_with_an_undefined_sync_header_in_a_data_stream_keeps_the_lfsr_in_step() {
    for header in [0b00u8, 0b11] {
        for skps in [4u32, 12, 20] {
            let (mut encoder, mut decoder, mut bits) = locked_pair(2);
            bits.block(encoder.encode_block(&Block::data([1; 16])));
            let state = encoder.scrambler().state();
            bits.push(u128::from(header), 2);
            for _ in 0..skps {
                bits.push(SKP_SYMBOL.into(), 8);
            }
            bits.push(SKP_END.into(), 8);
            // The tail as the encoder fills it in: the parity of the one data block since the SDS.
            let parity = {
                let mut probe = LaneEncoder::new(2);
                probe.encode_block(&OrderedSetBlock::Eieos.to_block());
                probe.encode_block(&OrderedSetBlock::Sds.to_block());
                let (first, last) = probe.encode_block(&Block::data([1; 16]));
                ((first >> 2).count_ones() + (last as u32).count_ones()) & 1 == 1
            };
            let tail = skp_tail(state, parity);
            for t in tail {
                bits.push(t.into(), 8);
            }
            bits.block(encoder.encode_block(&Block::data([2; 16])));
            bits.block(encoder.encode_block(&Block::data([3; 16])));
            let got = bits.feed(&mut decoder, &[64]);
            let skp = OrderedSetBlock::Skp { tail }.to_block();
            assert_eq!(
                got,
                [
                    Ok(Block::data([1; 16])),
                    Ok(skp),
                    Ok(Block::data([2; 16])),
                    Ok(Block::data([3; 16]))
                ],
                "header {header:02b}, {skps} SKP symbols"
            );
            assert_eq!(decoder.alignment(), BlockAlignment::Locked);
            assert_eq!(decoder.counters().invalid_sync_headers, 1);
            assert_eq!(decoder.counters().skp_lfsr_mismatches, 0);
            assert_eq!(decoder.counters().data_parity_errors, 0);
            assert_eq!(decoder.last_skp_symbols() as u32, skps + 4);
        }
        // An EIEOS ends the data stream and resets the LFSR for the training sets after it.
        let (mut encoder, mut decoder, mut bits) = locked_pair(2);
        bits.block(encoder.encode_block(&Block::data([1; 16])));
        let (first, last) = encoder.encode_block(&OrderedSetBlock::Eieos.to_block());
        bits.block(((first & !0b11) | u128::from(header), last));
        let ts = TrainingSet::polling(DataRates::GEN1 | DataRates::GEN3, 7);
        bits.block(encoder.encode_block(&OrderedSetBlock::Training(ts).to_block()));
        let got = bits.feed(&mut decoder, &[64]);
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], Ok(OrderedSetBlock::Eieos.to_block()));
        assert_eq!(
            OrderedSetBlock::parse(&got[2].unwrap().payload),
            Ok(OrderedSetBlock::Training(ts))
        );
        assert_eq!(decoder.alignment(), BlockAlignment::Aligned);
        assert_eq!(decoder.counters().invalid_sync_headers, 1);
    }
}

#[test]
fn an_undefined_sync_header_while_training_is_reported_and_unaligns() {
    for header in [0b00u8, 0b11] {
        let mut encoder = LaneEncoder::new(1);
        let mut decoder = LaneDecoder::new(1);
        let mut bits = Bits::default();
        bits.block(encoder.encode_block(&OrderedSetBlock::Eieos.to_block()));
        let (first, last) = encoder.encode_block(&Block::data([0; 16]));
        bits.block(((first & !0b11) | u128::from(header), last));
        let got = bits.feed(&mut decoder, &[64]);
        assert_eq!(got[1], Err(Error::InvalidSyncHeader { position: 1, header }));
        assert_eq!(decoder.alignment(), BlockAlignment::Unaligned);
        assert_eq!(decoder.counters().invalid_sync_headers, 1);
    }
}

#[test]
fn an_eieos_at_another_bit_position_moves_the_alignment() {
    let ts = OrderedSetBlock::Training(TrainingSet::polling(DataRates::GEN1 | DataRates::GEN3, 4)).to_block();
    let mut encoder = LaneEncoder::new(2);
    let mut bits = Bits::default();
    for block in [OrderedSetBlock::Eieos.to_block(), ts] {
        bits.block(encoder.encode_block(&block));
    }
    // 37 stray bits (whose first two read as a data sync header), then EIEOS and a TS1 again.
    bits.push(0x1234_5678_9ABE, 37);
    let mut encoder = LaneEncoder::new(2);
    for block in [OrderedSetBlock::Eieos.to_block(), ts] {
        bits.block(encoder.encode_block(&block));
    }
    let mut decoder = LaneDecoder::new(2);
    let got = bits.feed(&mut decoder, &[64]);
    // EIEOS, TS1, a data block read across the stray bits, then the moved EIEOS and the TS1: no errors,
    // because the EIEOS was found at its new position without waiting for a bad sync header.
    assert_eq!(got.len(), 5, "{got:02x?}");
    assert!(got.iter().all(|g| g.is_ok()));
    assert_eq!(decoder.counters().alignments, 2);
    assert_eq!(decoder.alignment(), BlockAlignment::Aligned);
    let last_two: Vec<_> = got.iter().rev().take(2).rev().cloned().collect();
    assert_eq!(last_two, vec![Ok(OrderedSetBlock::Eieos.to_block()), Ok(ts)]);
}

#[test]
fn an_eieos_ends_the_data_stream() {
    let (mut encoder, mut decoder, mut bits) = locked_pair(5);
    bits.block(encoder.encode_block(&OrderedSetBlock::Eieos.to_block()));
    bits.feed(&mut decoder, &[64]);
    assert_eq!(decoder.alignment(), BlockAlignment::Aligned);
    assert_eq!(decoder.scrambler().state(), lane_seed(5));
}

#[test]
fn training_sets_carry_dc_balance_symbols_when_needed() {
    // The same TS1 over and over: the transmitter must keep the running DC balance in check with the DC
    // balance symbols of PCIe 4.2.5.1, and the receiver must still read the training set.
    let ts = TrainingSet {
        kind: TsKind::Ts1,
        link: Some(0),
        lane: Some(0),
        n_fts: 0xFF,
        rates: DataRates::all(),
        control: TrainingControl::empty(),
    };
    let block = OrderedSetBlock::Training(ts).to_block();
    let mut encoder = LaneEncoder::new(0);
    let mut decoder = LaneDecoder::new(0);
    let mut bits = Bits::default();
    bits.block(encoder.encode_block(&OrderedSetBlock::Eieos.to_block()));
    let mut balance_symbols = 0;
    let mut max_balance = 0;
    for _ in 0..2000 {
        let (first, last) = encoder.encode_block(&block);
        // Symbol 14 is wire bits 114-121, symbol 15 wire bits 122-129.
        let symbol_14 = (first >> 114) as u8;
        let symbol_15 = ((first >> 122) as u8 & 0x3F) | last << 6;
        if [0x20, 0xDF].contains(&symbol_14) || [0x08, 0xF7].contains(&symbol_15) {
            balance_symbols += 1;
        }
        max_balance = max_balance.max(encoder.dc_balance().abs());
        bits.block((first, last));
    }
    assert!(balance_symbols > 0);
    println!("largest running DC balance {max_balance}");
    assert!(max_balance <= 80, "running DC balance reached {max_balance}");
    let got = bits.feed(&mut decoder, &[64]);
    assert_eq!(got.len(), 2001);
    for item in &got[1..] {
        assert_eq!(
            OrderedSetBlock::parse(&item.unwrap().payload),
            Ok(OrderedSetBlock::Training(ts))
        );
    }
}

#[test]
fn decode_data_reports_the_block_that_is_not_data() {
    let payload = [0x5Au8; 16 * 9];
    let mut wire = [0u8; 9 * 17];
    LaneEncoder::new(0).encode_data(&payload, &mut wire).unwrap();
    // Block 6's header starts at bit 780 = byte 97 bit 4.
    let mut bad = wire;
    bad[97] ^= 0b11 << 4;
    let mut out = [0u8; 16 * 9];
    assert_eq!(
        LaneDecoder::new(0).decode_data(&bad, 9, &mut out),
        Err(Error::UnexpectedOrderedSetBlock { position: 6 })
    );
    assert_eq!(out[..16 * 6], payload[..16 * 6]);
    let mut bad = wire;
    bad[97] ^= 0b01 << 4;
    assert_eq!(
        LaneDecoder::new(0).decode_data(&bad, 9, &mut out),
        Err(Error::InvalidSyncHeader {
            position: 6,
            header: 0b11
        })
    );
    assert_eq!(
        LaneDecoder::new(0).decode_data(&wire[..10], 1, &mut out),
        Err(Error::BufferTooSmall {
            needed: 17,
            available: 10
        })
    );
    assert_eq!(
        LaneEncoder::new(0).encode_data(&payload[..20], &mut wire),
        Err(Error::LengthNotMultiple { len: 20, unit: 16 })
    );
}

/// A block count whose bits or bytes do not fit a `usize` is refused like any other count the buffers
/// cannot hold: it had overflowed (a panic in debug builds; in release 2^63 blocks wrapped to 0 bits
/// and 0 bytes and "decoded" with `Ok`).
#[test]
fn decode_data_refuses_block_counts_beyond_any_buffer() {
    let bits = [0u8; 17];
    let mut out = [0u8; 16];
    for nblocks in [
        1usize << 63,
        usize::MAX,
        usize::MAX / 130 + 1,
        usize::MAX / 16 + 1,
    ] {
        let got = LaneDecoder::new(0).decode_data(&bits, nblocks, &mut out);
        assert!(
            matches!(got, Err(Error::BufferTooSmall { available: 17, .. })),
            "{nblocks} blocks: {got:?}"
        );
    }
    assert_eq!(LaneDecoder::new(0).decode_data(&bits, 0, &mut out), Ok(()));
}

#[test]
fn bits_pushed_into_a_full_buffer_are_dropped_and_counted() {
    let mut decoder = LaneDecoder::new(0);
    for _ in 0..20 {
        decoder.push_bits(u64::MAX, 64);
    }
    assert_eq!(decoder.counters().dropped_bits, 4 * 64);
    assert_eq!(decoder.pop(), None);
}

#[test]
fn a_malformed_skp_ordered_set_is_one_bad_block() {
    let (mut encoder, mut decoder, mut bits) = locked_pair(6);
    let (first, last) = encoder.encode_block(&OrderedSetBlock::skp().to_block());
    // Symbol 2 (wire bits 18-25) becomes 00h: not a SKP symbol.
    bits.block((first & !(0xFF << 18), last));
    bits.block(encoder.encode_block(&Block::data([3; 16])));
    let got = bits.feed(&mut decoder, &[5]);
    assert_eq!(
        got,
        vec![
            Err(Error::MalformedOrderedSet {
                position: 2,
                found: 0
            }),
            Ok(Block::data([3; 16]))
        ]
    );
}
