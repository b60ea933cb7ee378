//! `linkctl link train --capture DIR` and `link run --capture DIR`: what each port's transmitter sent on
//! each lane, as serial bits
//! packed into files the way a capture of the lane holds them (docs/spec.md 1.1 and 1.3.1), so that a
//! board's transmitter can be compared with the model's bit for bit, and `linkctl phy decode --packed`
//! reads them.
//!
//! A lane's bits are cut into segments wherever its rate changes or it falls into electrical idle, one
//! file each, since a capture across either cannot be decoded as one stream; `capture.json` lists them.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::Context;
use link_phy::lanes::{LaneMap, MAX_LANES};
use link_phy::ltssm::Port;
use link_phy::pair::{Node, Side, Tap, Tapped};
use link_phy::rate::Rate;
use link_phy::serial::{LaneSignal, Slot};
use link_phy::time::Instant;
use serde_json::{json, Value};

use crate::phy::bits::BitWriter;

/// The most bytes a capture writes over all its files: a link that keeps failing to train at 2.5 GT/s
/// sends 300 MB a second on each of 32 lanes.
pub const CAPTURE_LIMIT_BYTES: u64 = 256 << 20;

/// Where to capture a link's lanes, if anywhere.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CaptureArgs {
    /// Write what each port's transmitter sends on each lane into this directory (created if missing):
    /// serial bits packed as `linkctl phy decode --packed` reads them, a file per stretch of signal at one
    /// rate, listed with their rates and times in `capture.json` (at most 256 MiB in all)
    #[arg(long, value_name = "DIR")]
    pub capture: Option<PathBuf>,
}

impl CaptureArgs {
    /// The directory, created, and each port's share of the limit, if a capture was asked for.
    pub fn prepare(&self) -> anyhow::Result<Option<(&Path, u64)>> {
        let Some(dir) = &self.capture else { return Ok(None) };
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Some((dir, CAPTURE_LIMIT_BYTES / 2)))
    }
}

/// A node (a bare port, or an endpoint with its data link) whose transmitter's lanes are written to files
/// as it sends, if it was given somewhere to write them.
pub type Capturing<N> = Tapped<N, Capture>;

/// The files of one port's capture, if it has one.
pub struct Capture(Option<Recorder>);

impl Tap for Capture {
    fn sent(&mut self, now: Instant, slot: &Slot, port: &Port) {
        if let Some(recorder) = &mut self.0 {
            recorder.record(now, slot, port.lane_map());
        }
    }
}

/// The files of one port's capture.
pub struct Recorder {
    side: Side,
    dir: PathBuf,
    lanes: Vec<LaneCapture>,
    /// Bits written by this port's lanes, and the most bytes it may write.
    bits: u64,
    limit: u64,
    truncated: bool,
    /// The first error writing a file; capturing stops there.
    error: Option<String>,
}

/// One lane's segments.
#[derive(Default)]
struct LaneCapture {
    done: Vec<Segment>,
    /// The segment being written, while the lane carries a signal.
    open: Option<(Segment, BitWriter<BufWriter<File>>)>,
}

/// A stretch of one lane's signal at one rate.
struct Segment {
    file: String,
    rate: Rate,
    /// The lane number the link agreed for the lane when the segment began (at 128b/130b, its
    /// scrambler's seed), if it had one.
    lane_number: Option<usize>,
    start: Instant,
    end: Instant,
    bits: u64,
}

/// Capture what `node`, at `side` of the pair, sends into files in `to`'s directory (which must exist),
/// at most `to`'s bytes; or, without `to`, only pass it on.
pub fn capturing<N: Node>(node: N, side: Side, to: Option<(&Path, u64)>) -> Capturing<N> {
    Tapped {
        node,
        tap: Capture(to.map(|(dir, limit)| Recorder::new(side, dir, limit))),
    }
}

impl Recorder {
    /// A capture of what the port at `side` sends, into files in `dir`, at most `limit` bytes.
    pub fn new(side: Side, dir: &Path, limit: u64) -> Self {
        Recorder {
            side,
            dir: dir.to_owned(),
            lanes: (0..MAX_LANES).map(|_| LaneCapture::default()).collect(),
            bits: 0,
            limit,
            truncated: false,
            error: None,
        }
    }

    fn name(&self) -> &'static str {
        match self.side {
            Side::A => "a",
            Side::B => "b",
        }
    }

    /// The port sent `slot` at `now`, with the lane map `map`.
    fn record(&mut self, now: Instant, slot: &Slot, map: Option<LaneMap>) {
        if self.error.is_some() || self.truncated {
            return;
        }
        if let Err(e) = self.try_record(now, slot, map) {
            self.error = Some(format!("{e:#}"));
        }
    }

    fn try_record(&mut self, now: Instant, slot: &Slot, map: Option<LaneMap>) -> anyhow::Result<()> {
        let end = now + slot.rate.slot_time();
        for lane in 0..MAX_LANES {
            let LaneSignal::Bits(bits) = &slot.lanes[lane] else {
                self.close(lane)?;
                continue;
            };
            if self.lanes[lane]
                .open
                .as_ref()
                .is_some_and(|(s, _)| s.rate != slot.rate)
            {
                self.close(lane)?;
            }
            if self.lanes[lane].open.is_none() {
                let file = format!("{}-lane{lane}-{}.bin", self.name(), self.lanes[lane].done.len());
                let path = self.dir.join(&file);
                let out = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
                let segment = Segment {
                    file,
                    rate: slot.rate,
                    lane_number: map.and_then(|m| m.logical(lane)),
                    start: now,
                    end,
                    bits: 0,
                };
                self.lanes[lane].open = Some((segment, BitWriter::new(BufWriter::new(out))));
            }
            if let Some((segment, out)) = &mut self.lanes[lane].open {
                for (word, count) in bits.chunks() {
                    out.push(word, count)?;
                }
                segment.bits += u64::from(bits.len());
                segment.end = end;
                self.bits += u64::from(bits.len());
            }
        }
        if self.bits >= 8 * self.limit {
            self.truncated = true;
            self.finish()?;
        }
        Ok(())
    }

    /// End lane `lane`'s open segment, if any, its last byte padded as `phy encode --packed` pads: with
    /// alternating bits at 8b/10b (zeros could form a comma with the last bits), zeros at 128b/130b.
    fn close(&mut self, lane: usize) -> anyhow::Result<()> {
        if let Some((segment, mut out)) = self.lanes[lane].open.take() {
            if segment.rate.line_code() == link_phy::rate::LineCode::Code8b10b {
                out.pad_alternating()?;
            }
            out.finish()?;
            self.lanes[lane].done.push(segment);
        }
        Ok(())
    }

    /// End every open segment.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        for lane in 0..MAX_LANES {
            self.close(lane)?;
        }
        Ok(())
    }

    /// The segments written, for `capture.json`, and whether the capture stopped at its limit; or the
    /// error that stopped it.
    pub fn segments(&self) -> anyhow::Result<(Vec<Value>, bool)> {
        if let Some(e) = &self.error {
            anyhow::bail!("capturing port {}'s lanes: {e}", self.name().to_uppercase());
        }
        let port = self.name().to_uppercase();
        let segments = self
            .lanes
            .iter()
            .enumerate()
            .flat_map(|(lane, c)| c.done.iter().map(move |s| (lane, s)))
            .map(|(lane, s)| {
                json!({
                    "file": s.file,
                    "port": port,
                    "lane": lane,
                    "lane_number": s.lane_number,
                    "rate_gts": s.rate.gts(),
                    "code": s.rate.line_code().name(),
                    "start_us": s.start.0 as f64 / 1e6,
                    "end_us": s.end.0 as f64 / 1e6,
                    "bits": s.bits,
                })
            })
            .collect();
        Ok((segments, self.truncated))
    }
}

/// Finish both ports' captures and write `capture.json` into `dir`: the index of the segments, each
/// with its file, port, physical lane, the lane number the link gave it (what `phy decode --lane` takes
/// at 128b/130b), rate and line code, start and end and bits; whether the data link ran FEC (its units are
/// then in blocks of docs/spec.md 2.7); what it says for the report.
pub fn write_index<N: Node>(dir: &Path, ports: [&mut Capturing<N>; 2], fec: bool) -> anyhow::Result<Value> {
    let mut segments = Vec::new();
    let mut truncated = false;
    for port in ports.into_iter().filter_map(|c| c.tap.0.as_mut()) {
        port.finish()
            .with_context(|| format!("finishing the capture in {}", dir.display()))?;
        let (s, t) = port.segments()?;
        segments.extend(s);
        truncated |= t;
    }
    let bytes: u64 = segments
        .iter()
        .map(|s| s["bits"].as_u64().unwrap_or(0).div_ceil(8))
        .sum();
    let index = json!({
        "fec": fec,
        "segments": segments,
        "bytes": bytes,
        "truncated": truncated,
        "limit_bytes": CAPTURE_LIMIT_BYTES,
    });
    let path = dir.join("capture.json");
    std::fs::write(&path, serde_json::to_string_pretty(&index)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(json!({
        "dir": dir.display().to_string(),
        "files": index["segments"].as_array().map_or(0, Vec::len),
        "bytes": bytes,
        "truncated": truncated,
    }))
}

/// The text line for a report's `capture` key, if it has one.
pub fn print_summary(capture: &Value) {
    if let Some(dir) = capture["dir"].as_str() {
        println!(
            "capture: {} files, {} bytes, in {dir} (listed in capture.json){}",
            capture["files"],
            capture["bytes"],
            if capture["truncated"] == json!(true) {
                "; stopped at its limit before the end"
            } else {
                ""
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_phy::serial::SlotBits;

    fn slot(rate: Rate, lanes: &[Option<u64>]) -> Slot {
        let mut slot = Slot::idle(rate);
        for (lane, bits) in lanes.iter().enumerate() {
            if let Some(bits) = bits {
                let mut b = SlotBits::EMPTY;
                b.push(*bits, 10);
                slot.lanes[lane] = LaneSignal::Bits(b);
            }
        }
        slot
    }

    #[test]
    fn a_lane_is_cut_where_its_rate_changes_or_it_falls_idle_and_the_limit_ends_it() {
        let dir = std::env::temp_dir().join(format!("linkctl-capture-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Recorder::new(Side::B, &dir, 9);
        let t = |ns| Instant::ZERO + link_phy::time::Duration::from_ns(ns);
        // Lane 0: two slots, idle, one more (a new segment), idle, one at another rate; lane 1 from the
        // second slot, idle, then at the other rate. 10 bits a slot: the 72nd bit ends the capture.
        c.record(t(0), &slot(Rate::Gen1, &[Some(0x17C), None]), None);
        c.record(t(4), &slot(Rate::Gen1, &[Some(0x283), Some(1)]), None);
        c.record(t(8), &slot(Rate::Gen1, &[None, Some(2)]), None);
        c.record(t(12), &slot(Rate::Gen1, &[Some(3), None]), None);
        c.record(t(14), &slot(Rate::Gen2, &[None, Some(4)]), None);
        assert!(!c.truncated);
        c.record(t(16), &slot(Rate::Gen2, &[Some(5), Some(6)]), None);
        assert!(c.truncated);
        c.record(t(18), &slot(Rate::Gen2, &[Some(5), Some(6)]), None);
        let (segments, truncated) = c.segments().unwrap();
        assert!(truncated);
        let summary: Vec<(u64, String, u64)> = segments
            .iter()
            .map(|s| {
                (
                    s["lane"].as_u64().unwrap(),
                    s["file"].as_str().unwrap().to_owned(),
                    s["bits"].as_u64().unwrap(),
                )
            })
            .collect();
        let expected = [
            (0, "b-lane0-0.bin", 20),
            (0, "b-lane0-1.bin", 10),
            (0, "b-lane0-2.bin", 10),
            (1, "b-lane1-0.bin", 20),
            (1, "b-lane1-1.bin", 20),
        ];
        let expected: Vec<(u64, String, u64)> =
            expected.iter().map(|&(l, f, b)| (l, f.to_owned(), b)).collect();
        assert_eq!(summary, expected);
        // K28.5 from RD- then RD+, packed: the first file.
        assert_eq!(
            std::fs::read(dir.join("b-lane0-0.bin")).unwrap(),
            [0x7C, 0x0D, 0xAA]
        );
        assert_eq!(
            segments
                .iter()
                .map(|s| s["rate_gts"].as_f64().unwrap())
                .collect::<Vec<_>>(),
            [2.5, 2.5, 5.0, 2.5, 5.0]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
