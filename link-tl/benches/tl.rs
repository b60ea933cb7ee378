//! Criterion benchmarks of the packetizer and the reassembler over 64 KiB, beside `memcpy` of the same
//! bytes (`linkctl bench tl` reports the same paths with the ratio).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use link_phy::time::{Duration, Instant};
use link_tl::packet::Packet;
use link_tl::{AddressMap, Outstanding, PostedWrites, ReadCompletions, Reassembler, Requests, Tlp, Window};

const BYTES: usize = 64 * 1024;
const BASE: u64 = 7 << 47;

fn payload() -> Vec<u8> {
    (0..BYTES)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect()
}

fn packetize(c: &mut Criterion) {
    let data = payload();
    let mut map = AddressMap::<1>::new();
    map.insert(Window::flat(7, 1 << 40)).unwrap();
    let mut g = c.benchmark_group("tl");
    g.throughput(Throughput::Bytes(BYTES as u64));
    let mut copy = vec![0u8; BYTES];
    g.bench_function("memcpy", |b| b.iter(|| copy.copy_from_slice(black_box(&data))));
    for offset in [0u64, 3] {
        g.bench_function(format!("posted_writes_offset_{offset}"), |b| {
            let mut packet = Packet::new();
            b.iter(|| {
                let mut writes = PostedWrites::new(&map, BASE + offset, black_box(&data));
                let mut flits = 0;
                while let Some(Ok(())) = writes.next_into(&mut packet) {
                    flits += black_box(&packet).flits();
                }
                flits
            })
        });
    }

    // Every completion of 4 KiB reads of the buffer, answered last block first.
    let mut table = Outstanding::<16>::new(Duration::from_ms(1));
    let mut requests = Requests::reads(&map, BASE + 3, BYTES as u64 - 3, 1);
    let mut completions = Vec::new();
    let mut packet = Packet::new();
    while let Some(Ok(())) = requests.next_into(&mut table, Instant::ZERO, &mut packet) {
        let Ok(Tlp::Read(read)) = packet.parse() else {
            unreachable!()
        };
        let at = (read.addr - 3) as usize;
        let mut pieces: Vec<Packet> =
            ReadCompletions::new(read, 7, &data[at + 3..at + 3 + usize::from(read.len)])
                .unwrap()
                .map(Result::unwrap)
                .collect();
        pieces.reverse();
        completions.push((read, pieces));
    }
    let mut dst = vec![0u8; BYTES];
    g.bench_function("reassemble_reads_out_of_order", |b| {
        b.iter(|| {
            let mut table = Outstanding::<16>::new(Duration::from_ms(1));
            let mut requests = Requests::reads(&map, BASE + 3, BYTES as u64 - 3, 1);
            let mut reassembler = Reassembler::new(&mut dst);
            for (_, pieces) in &completions {
                let _ = requests.next_into(&mut table, Instant::ZERO, &mut packet);
                for p in pieces {
                    if let Ok(Tlp::Completion(c)) = p.parse() {
                        let _ = reassembler.accept(&mut table, Instant::ZERO, &c);
                    }
                }
            }
        })
    });
    g.finish();
}

criterion_group!(benches, packetize);
criterion_main!(benches);
