//! The transaction layer's hot paths: the packetizer (a buffer into posted-write packets, read data into
//! completions) and the reassembler (read completions, out of order, back into a buffer).

use std::hint::black_box;

use anyhow::Context;
use link_phy::time::{Duration, Instant};
use link_tl::packet::{Packet, Read, RequestId};
use link_tl::{
    AddressMap, Outstanding, Pieces, PostedWrites, ReadCompletions, Reassembler, Requests, TlError, Tlp,
    Window,
};

use super::measure::{row, Row};
use super::Plan;

const ENDPOINT: u16 = 7;
const BASE: u64 = (ENDPOINT as u64) << 47;
/// The local address the reads start at.
const BASE_LOCAL: u64 = 3;

pub fn rows(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let n = plan.bytes;
    let s = plan.samples;
    // The reads start BASE_LOCAL bytes in, and read `n` bytes as the writes do.
    let data = crate::noise::noise(0, n + BASE_LOCAL as usize);
    let writes_data = &data[..n];
    let mut map = AddressMap::<1>::new();
    map.insert(Window::flat(ENDPOINT, 1 << 40))
        .context("address map")?;
    let mut rows = Vec::new();
    let mut packet = Packet::new();

    for offset in [0u64, 3] {
        let mut flits = 0;
        let mut writes = PostedWrites::new(&map, BASE + offset, writes_data);
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
            let mut writes = PostedWrites::new(&map, BASE + offset, black_box(writes_data));
            while let Some(Ok(())) = writes.next_into(&mut packet) {
                black_box(&packet);
            }
        }));
    }

    // Reads of the buffer at an unaligned address, 4 KiB per request.
    let len = n as u64;
    let mut reads: Vec<Read> = Vec::new();
    for (i, piece) in Pieces::reads(&map, BASE + BASE_LOCAL, len).enumerate() {
        let piece = piece.context("read piece")?;
        let id = RequestId {
            requester: 1,
            tag: (i % 1024) as u16,
        };
        reads.push(Read {
            dest: piece.endpoint,
            addr: piece.local,
            len: piece.len as u16,
            id,
        });
    }
    let bytes_of = |read: &Read| &data[read.addr as usize..][..usize::from(read.len)];
    rows.push(row("packetize read completions", len as usize, s, || {
        for read in &reads {
            if let Ok(mut completions) = ReadCompletions::new(*read, ENDPOINT, bytes_of(read)) {
                while let Some(Ok(())) = completions.next_into(&mut packet) {
                    black_box(&packet);
                }
            }
        }
    }));

    // Read back as a requester with 64 tags: the answers of each round are recorded once, then replayed.
    let mut rounds = Vec::new();
    let mut dst = vec![0u8; len as usize];
    let source = &data[BASE_LOCAL as usize..];
    read_back(&map, len, &mut dst, &mut rounds, Some(source)).context("reassembly")?;
    anyhow::ensure!(dst == source, "reassembled data differs from the source");
    rows.push(row("reassemble read completions", len as usize, s, || {
        let _ = read_back(&map, len, black_box(&mut dst), &mut rounds, None);
    }));
    Ok(rows)
}

/// Read `len` bytes at `BASE + 3` into `dst` as a requester with 64 tags: issue reads until the tags run
/// out, then take every completion of the round (the last request's first, each request's last block
/// first). With `source`, the completions of each round are made from it and recorded in `rounds`;
/// without, the recorded ones are replayed (the tags come out the same, the table being deterministic).
fn read_back(
    map: &AddressMap<1>,
    len: u64,
    dst: &mut [u8],
    rounds: &mut Vec<Vec<Packet>>,
    source: Option<&[u8]>,
) -> anyhow::Result<()> {
    let mut table = Outstanding::<64>::new(Duration::from_ms(1));
    let mut requests = Requests::reads(map, BASE + BASE_LOCAL, len, 1);
    let mut reassembler = Reassembler::new(dst);
    let mut packet = Packet::new();
    let mut round = 0;
    while !requests.is_done() {
        let mut reads = Vec::new();
        loop {
            match requests.next_into(&mut table, Instant::ZERO, &mut packet) {
                Some(Ok(())) if source.is_some() => match packet.parse() {
                    Ok(Tlp::Read(read)) => reads.push(read),
                    other => anyhow::bail!("a read request parsed as {other:?}"),
                },
                Some(Ok(())) => {}
                Some(Err(TlError::NoFreeTag)) | None => break,
                Some(Err(e)) => return Err(e.into()),
            }
        }
        if let Some(source) = source {
            let mut answers = Vec::new();
            for read in reads.iter().rev() {
                let at = (read.addr - BASE_LOCAL) as usize;
                let bytes = &source[at..at + usize::from(read.len)];
                let mut answer: Vec<Packet> =
                    ReadCompletions::new(*read, ENDPOINT, bytes)?.collect::<Result<_, _>>()?;
                answer.reverse();
                answers.extend(answer);
            }
            rounds.push(answers);
        }
        let answers = rounds.get(round).context("fewer rounds than recorded")?;
        for p in answers {
            match p.parse() {
                Ok(Tlp::Completion(c)) => reassembler.accept(&mut table, Instant::ZERO, &c).map(|_| ())?,
                other => anyhow::bail!("a completion parsed as {other:?}"),
            }
        }
        round += 1;
    }
    Ok(())
}
