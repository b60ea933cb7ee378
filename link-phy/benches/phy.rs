//! Criterion benchmarks of the physical layer's hot paths, each beside `memcpy` of the same payload.
//! `linkctl bench phy` prints the same comparison as one table; this is for statistics and history.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use link_phy::code128b130b::{LaneDecoder, LaneEncoder};
use link_phy::code8b10b::{Decoder, Encoder};
use link_phy::Disparity;

const BYTES: usize = 64 * 1024;

fn payload() -> Vec<u8> {
    (0..BYTES)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect()
}

fn phy(c: &mut Criterion) {
    let data = payload();
    let mut g = c.benchmark_group("phy");
    g.throughput(Throughput::Bytes(BYTES as u64));

    let mut copy = vec![0u8; BYTES];
    g.bench_function("memcpy", |b| b.iter(|| copy.copy_from_slice(black_box(&data))));

    let mut codes = vec![0u16; BYTES];
    g.bench_function("8b10b_encode", |b| {
        b.iter(|| Encoder::new().encode_data(black_box(&data), &mut codes))
    });
    let mut out = vec![0u8; BYTES];
    g.bench_function("8b10b_decode", |b| {
        b.iter(|| Decoder::new(Disparity::Negative).decode_data(black_box(&codes), &mut out))
    });

    let blocks = BYTES / 16;
    let mut wire = vec![0u8; (blocks * 130).div_ceil(8)];
    g.bench_function("128b130b_encode", |b| {
        b.iter(|| LaneEncoder::new(0).encode_data(black_box(&data), &mut wire))
    });
    g.bench_function("128b130b_decode", |b| {
        b.iter(|| LaneDecoder::new(0).decode_data(black_box(&wire), blocks, &mut out))
    });
    g.finish();
}

criterion_group!(benches, phy);
criterion_main!(benches);
