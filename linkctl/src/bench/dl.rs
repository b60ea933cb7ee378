//! The data link layer's packet path: two data links wired back to back (no physical layer), moving a
//! buffer as posted packets of 128 payload bytes.
//!
//! Per packet, the timed loop does everything both ends do for it on a real link: `send` on A (header,
//! sequence number, credit, replay entry), A's units for it (fresh acknowledgement and credit, CRC),
//! B receiving them (framing, CRC check, sequence and credit checks, receive queue), `recv` on B and
//! copying the payload out, and every unit B sends back meanwhile (idle, acknowledgements, credit
//! updates), which A receives and acts on (acknowledged packets leave its replay buffer). Each step moves
//! one unit each way, as a full-duplex link does; time advances by the unit time of x8 at 8 GT/s, so the
//! timers (acknowledgement coalescing, periodic updates) fire as they would.

use std::hint::black_box;

use anyhow::{bail, ensure};
use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::fuzz::BackToBack;
use link_dl::{DlConfig, DlError, Vc};

use super::measure::{row, Row};
use super::Plan;

/// Payload bytes per packet: eight data flits.
const PACKET_PAYLOAD: usize = 128;
const PACKET_FLITS: usize = PACKET_PAYLOAD / FLIT_LEN;
/// Steps to wait for credit, replay room or delivery before calling the link stuck.
const STUCK: usize = 10_000;

/// `n` bytes of [`crate::noise::noise`] as whole flits.
fn payload(n: usize) -> Vec<Flit> {
    let bytes = crate::noise::noise(0, n);
    (0..n / FLIT_LEN)
        .map(|k| core::array::from_fn(|i| bytes[k * FLIT_LEN + i]))
        .collect()
}

/// Send `src` from A to B as packets of 128 bytes and copy what B receives into `dst`.
fn transfer(pair: &mut BackToBack, src: &[Flit], dst: &mut [u8]) -> anyhow::Result<()> {
    for (k, (packet, out)) in src
        .chunks_exact(PACKET_FLITS)
        .zip(dst.chunks_exact_mut(PACKET_PAYLOAD))
        .enumerate()
    {
        let mut waited = 0;
        loop {
            match pair.a.send(Vc::Posted, k as u64, packet) {
                Ok(_) => break,
                Err(DlError::NoCredit { .. } | DlError::ReplayFull) if waited < STUCK => {
                    pair.step();
                    waited += 1;
                }
                Err(e) => bail!("send refused: {e}"),
            }
        }
        while !pair.b.received_waiting() {
            ensure!(waited < STUCK, "packet {k} was not delivered");
            pair.step();
            waited += 1;
        }
        let Some(received) = pair.b.recv() else {
            bail!("packet {k} vanished from the receive queue");
        };
        for (to, flit) in out.chunks_exact_mut(FLIT_LEN).zip(&received.payload) {
            to.copy_from_slice(flit);
        }
    }
    Ok(())
}

pub fn rows(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let n = plan.bytes;
    let src = payload(n);
    let mut rows = Vec::new();
    for (name, fec) in [
        ("packet path, 128 B payloads", false),
        ("packet path, 128 B payloads, FEC", true),
    ] {
        let config = DlConfig {
            fec,
            ..DlConfig::default()
        };
        let Some(mut pair) = BackToBack::active(config) else {
            bail!("the data links did not come up");
        };
        // Check the path once before timing it: every byte arrives, nothing is replayed.
        let mut dst = vec![0u8; n];
        transfer(&mut pair, &src, &mut dst)?;
        ensure!(
            dst == src.concat(),
            "{name}: the received bytes differ from the sent ones"
        );
        let (a, b) = (pair.a.counters(), pair.b.counters());
        ensure!(
            a.replays == 0 && b.crc_errors == 0 && b.packets_received == (n / PACKET_PAYLOAD) as u64,
            "{name}: unexpected replays or errors: {a:?} {b:?}"
        );
        let mut failed = None;
        rows.push(row(name, n, plan.samples, || {
            if let Err(e) = transfer(&mut pair, black_box(&src), &mut dst) {
                failed.get_or_insert(e);
            }
            black_box(&dst);
        }));
        if let Some(e) = failed {
            return Err(e.context(name));
        }
    }
    Ok(rows)
}
