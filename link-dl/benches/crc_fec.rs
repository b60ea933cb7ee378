//! Criterion benchmarks of the packet CRC and the FEC over 64 KiB, beside `memcpy` of the same bytes:
//! the CRC per longest packet (156 covered bytes) and per 128-byte payload, the FEC per 256-byte block.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use link_dl::{crc, fec};

const BYTES: usize = 64 * 1024;

fn payload() -> Vec<u8> {
    (0..BYTES)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect()
}

fn crc_paths(c: &mut Criterion) {
    let data = payload();
    let mut g = c.benchmark_group("dl_crc");
    g.throughput(Throughput::Bytes(BYTES as u64));
    let mut copy = vec![0u8; BYTES];
    g.bench_function("memcpy", |b| b.iter(|| copy.copy_from_slice(black_box(&data))));
    for packet in [128, 156] {
        let whole = BYTES / packet * packet;
        g.throughput(Throughput::Bytes(whole as u64));
        g.bench_function(format!("portable_{packet}B"), |b| {
            b.iter(|| {
                data[..whole]
                    .chunks_exact(packet)
                    .fold(0, |x, p| x ^ crc::checksum_portable(p))
            })
        });
        g.bench_function(format!("checksum_{packet}B"), |b| {
            b.iter(|| {
                data[..whole]
                    .chunks_exact(packet)
                    .fold(0, |x, p| x ^ crc::checksum(p))
            })
        });
    }
    g.finish();
}

fn fec_paths(c: &mut Criterion) {
    let mut blocks = payload();
    for block in blocks.chunks_exact_mut(fec::BLOCK_LEN) {
        fec::encode(block.try_into().unwrap());
    }
    let mut g = c.benchmark_group("dl_fec");
    g.throughput(Throughput::Bytes(BYTES as u64));
    let mut work = blocks.clone();
    g.bench_function("encode", |b| {
        b.iter(|| {
            work.chunks_exact_mut(fec::BLOCK_LEN)
                .for_each(|x| fec::encode(x.try_into().unwrap()))
        })
    });
    g.bench_function("decode_clean", |b| {
        b.iter(|| {
            work.copy_from_slice(&blocks);
            let mut corrected = 0;
            for block in work.chunks_exact_mut(fec::BLOCK_LEN) {
                corrected += fec::decode(block.try_into().unwrap()).map_or(0, |c| c.symbols);
            }
            corrected
        })
    });
    g.finish();
}

criterion_group!(benches, crc_paths, fec_paths);
criterion_main!(benches);
