//! The transaction layer's hot paths: the packetizer (a buffer into posted-write packets, read data into
//! completions) and the reassembler (read completions, out of order, back into a buffer).

use std::hint::black_box;

use anyhow::Context;
use link_phy::time::{Duration, Instant};
use link_tl::packet::{Packet, Read};
use link_tl::{AddressMap, Outstanding, PostedWrites, ReadCompletions, Reassembler, Requests, Tlp, Window};

use super::measure::{row, Row};
use super::BenchArgs;

const ENDPOINT: u16 = 7;
const BASE: u64 = (ENDPOINT as u64) << 47;

fn payload(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect()
}

pub fn rows(args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let n = args.bytes;
    let s = args.samples;
    let data = payload(n);
    let mut map = AddressMap::<1>::new();
    map.insert(Window::flat(ENDPOINT, 1 << 40))
        .context("address map")?;
    let mut rows = Vec::new();
    let mut packet = Packet::new();

    for offset in [0u64, 3] {
        let mut flits = 0;
        let mut writes = PostedWrites::new(&map, BASE + offset, &data);
        while let Some(r) = writes.next_into(&mut packet) {
            r.context("posted write")?;
            flits += packet.flits();
        }
        if offset == 0 {
            anyhow::ensure!(
                flits == n / 128 * 9,
                "aligned writes took {flits} flits, not 9 per 128 bytes"
            );
        }
        let name = format!("packetize posted writes, +{offset}");
        rows.push(row(&name, n, s, || {
            let mut writes = PostedWrites::new(&map, BASE + offset, black_box(&data));
            while let Some(Ok(())) = writes.next_into(&mut packet) {
                black_box(&packet);
            }
        }));
    }

    // Reads of the buffer at an unaligned address, 4 KiB per request.
    let len = n as u64 - 3;
    let mut table = Outstanding::<64>::new(Duration::from_ms(1));
    let mut requests = Requests::reads(&map, BASE + 3, len, 1);
    let mut reads: Vec<Read> = Vec::new();
    while let Some(r) = requests.next_into(&mut table, Instant::ZERO, &mut packet) {
        r.context("read request")?;
        match packet.parse() {
            Ok(Tlp::Read(read)) => reads.push(read),
            other => anyhow::bail!("a read request parsed as {other:?}"),
        }
    }
    let bytes_of = |read: &Read| {
        let at = (read.addr - 3) as usize;
        &data[at + 3..at + 3 + usize::from(read.len)]
    };
    rows.push(row("packetize read completions", len as usize, s, || {
        for read in &reads {
            if let Ok(mut completions) = ReadCompletions::new(*read, ENDPOINT, bytes_of(read)) {
                while let Some(Ok(())) = completions.next_into(&mut packet) {
                    black_box(&packet);
                }
            }
        }
    }));

    // Every request's completions, last block first.
    let mut completions: Vec<Packet> = Vec::new();
    for read in &reads {
        let mut answer: Vec<Packet> =
            ReadCompletions::new(*read, ENDPOINT, bytes_of(read))?.collect::<Result<_, _>>()?;
        answer.reverse();
        completions.extend(answer);
    }
    let mut dst = vec![0u8; len as usize];
    let mut reassemble = |dst: &mut [u8]| -> anyhow::Result<()> {
        let mut table = Outstanding::<64>::new(Duration::from_ms(1));
        let mut requests = Requests::reads(&map, BASE + 3, len, 1);
        while let Some(r) = requests.next_into(&mut table, Instant::ZERO, &mut packet) {
            r?;
        }
        let mut reassembler = Reassembler::new(dst);
        for p in &completions {
            match p.parse() {
                Ok(Tlp::Completion(c)) => reassembler.accept(&mut table, Instant::ZERO, &c).map(|_| ())?,
                other => anyhow::bail!("a completion parsed as {other:?}"),
            }
        }
        Ok(())
    };
    reassemble(&mut dst).context("reassembly")?;
    anyhow::ensure!(dst == data[3..], "reassembled data differs from the source");
    rows.push(row("reassemble read completions", len as usize, s, || {
        let _ = reassemble(black_box(&mut dst));
    }));
    Ok(rows)
}
