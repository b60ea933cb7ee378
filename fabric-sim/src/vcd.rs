//! Waveforms of link states as a Value Change Dump (IEEE 1364 VCD), for GTKWave.
//!
//! The signals are `docs/spec.md` section 8: for every direction of every link, the transmitting data
//! link's state, whether the direction is serializing units, and how many packets wait in its replay
//! buffer for an acknowledgement. Time is simulated time in picoseconds. Only changes are written; a
//! limit on the number of changes bounds the file (the rest are counted).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use link_dl::DlState;
use link_phy::time::Instant;

/// Signals per link direction: state, busy, replay.
pub const SIGNALS_PER_DIRECTION: usize = 3;
/// Width of the replay-buffer occupancy signal.
pub const REPLAY_BITS: usize = 16;

/// The 2-bit code of a data link state: 0 Down, 1 InitFC1, 2 InitFC2, 3 Active.
pub fn state_code(state: DlState) -> u64 {
    match state {
        DlState::Down => 0,
        DlState::InitFc1 => 1,
        DlState::InitFc2 => 2,
        DlState::Active => 3,
    }
}

/// The short identifier VCD uses for signal `index`: base 94 over the printable characters `!` to `~`.
pub fn identifier(mut index: usize) -> String {
    let mut id = String::new();
    loop {
        id.push(char::from(b'!' + (index % 94) as u8));
        index /= 94;
        if index == 0 {
            return id;
        }
        index -= 1;
    }
}

/// One direction of a link, as the waveform names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectionName {
    /// The transmitting node's name (a scope).
    pub node: String,
    /// The transmitting port.
    pub port: usize,
    /// The receiving node's name.
    pub peer: String,
}

/// Writes the waveforms of every link direction.
pub struct Waves<W: Write> {
    out: W,
    /// Current value of every signal (`u64::MAX`: not written yet).
    values: Vec<u64>,
    /// Per direction, when its current burst of units ends.
    busy_until: Vec<Instant>,
    /// Ends of bursts still to be written, earliest first.
    falls: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Time of the last `#` line written.
    written_at: Option<Instant>,
    limit: u64,
    /// Per direction, whether its signals are kept (declared and written).
    kept: Vec<bool>,
    /// Value changes written.
    pub changes: u64,
    /// Value changes the limit left out.
    pub dropped: u64,
}

impl<W: Write> std::fmt::Debug for Waves<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waves")
            .field("signals", &self.values.len())
            .field("changes", &self.changes)
            .field("dropped", &self.dropped)
            .finish()
    }
}

impl<W: Write> Waves<W> {
    /// Write the header declaring the signals of `directions` (in the order the simulator numbers them)
    /// and their values at time 0: every link Down, idle, nothing to replay.
    pub fn new(out: W, directions: &[DirectionName], limit: u64) -> io::Result<Self> {
        Self::new_kept(out, directions, &vec![true; directions.len()], limit)
    }

    /// [`Waves::new`] for the directions `kept` marks only: the others are neither declared nor written.
    pub fn new_kept(mut out: W, directions: &[DirectionName], kept: &[bool], limit: u64) -> io::Result<Self> {
        let kept: Vec<bool> = (0..directions.len())
            .map(|i| kept.get(i).copied().unwrap_or(false))
            .collect();
        writeln!(
            out,
            "$version openlink fabric-sim {} $end",
            env!("CARGO_PKG_VERSION")
        )?;
        writeln!(out, "$timescale 1ps $end")?;
        writeln!(out, "$scope module fabric $end")?;
        // Group the directions by transmitting node, in order of first appearance.
        let mut nodes: Vec<&str> = Vec::new();
        for (d, _) in directions.iter().zip(&kept).filter(|(_, &k)| k) {
            if !nodes.contains(&d.node.as_str()) {
                nodes.push(&d.node);
            }
        }
        for node in nodes {
            writeln!(out, "$scope module {node} $end")?;
            for (i, d) in (directions.iter().enumerate()).filter(|&(i, d)| kept[i] && d.node == node) {
                let base = i * SIGNALS_PER_DIRECTION;
                writeln!(out, "$scope module p{}_to_{} $end", d.port, d.peer)?;
                writeln!(out, "$var wire 2 {} state $end", identifier(base))?;
                writeln!(out, "$var wire 1 {} busy $end", identifier(base + 1))?;
                writeln!(
                    out,
                    "$var wire {REPLAY_BITS} {} replay $end",
                    identifier(base + 2)
                )?;
                writeln!(out, "$upscope $end")?;
            }
            writeln!(out, "$upscope $end")?;
        }
        writeln!(out, "$upscope $end")?;
        writeln!(out, "$enddefinitions $end")?;
        let mut waves = Waves {
            out,
            values: vec![u64::MAX; directions.len() * SIGNALS_PER_DIRECTION],
            busy_until: vec![Instant::ZERO; directions.len()],
            falls: BinaryHeap::new(),
            written_at: None,
            limit,
            kept,
            changes: 0,
            dropped: 0,
        };
        writeln!(waves.out, "#0")?;
        writeln!(waves.out, "$dumpvars")?;
        waves.written_at = Some(Instant::ZERO);
        for i in 0..directions.len() {
            if !waves.kept[i] {
                continue;
            }
            let base = i * SIGNALS_PER_DIRECTION;
            waves.write(base, 0)?;
            waves.write(base + 1, 0)?;
            waves.write(base + 2, 0)?;
        }
        writeln!(waves.out, "$end")?;
        Ok(waves)
    }

    /// Direction `dir`'s transmitter is in `state` with `replay` packets unacknowledged at `at`.
    pub fn link(&mut self, at: Instant, dir: usize, state: DlState, replay: usize) -> io::Result<()> {
        if !self.kept.get(dir).copied().unwrap_or(false) {
            return Ok(());
        }
        let base = dir * SIGNALS_PER_DIRECTION;
        self.change(at, base, state_code(state))?;
        let replay = (replay as u64).min((1 << REPLAY_BITS) - 1);
        self.change(at, base + 2, replay)
    }

    /// Direction `dir` serializes units from `at` until `until`.
    pub fn burst(&mut self, at: Instant, dir: usize, until: Instant) -> io::Result<()> {
        if !self.kept.get(dir).copied().unwrap_or(false) {
            return Ok(());
        }
        self.change(at, dir * SIGNALS_PER_DIRECTION + 1, 1)?;
        self.busy_until[dir] = until;
        self.falls.push(Reverse((until, dir)));
        Ok(())
    }

    /// Write the ends of bursts still pending and flush.
    pub fn finish(&mut self) -> io::Result<()> {
        self.write_falls_before(None)?;
        self.out.flush()
    }

    /// Set `signal` to `value` at `at` (not earlier than any change before it), writing it if it changed.
    fn change(&mut self, at: Instant, signal: usize, value: u64) -> io::Result<()> {
        self.write_falls_before(Some(at))?;
        self.set(at, signal, value)
    }

    fn set(&mut self, at: Instant, signal: usize, value: u64) -> io::Result<()> {
        if self.values[signal] == value {
            return Ok(());
        }
        // The value is kept past the limit too, so that only changes are counted as left out.
        self.values[signal] = value;
        if self.changes >= self.limit {
            self.dropped += 1;
            return Ok(());
        }
        if self.written_at != Some(at) {
            writeln!(self.out, "#{}", at.as_ps())?;
            self.written_at = Some(at);
        }
        self.changes += 1;
        self.write(signal, value)
    }

    /// The ends of bursts before `at` (all, for `None`) that no later burst extended.
    fn write_falls_before(&mut self, at: Option<Instant>) -> io::Result<()> {
        while let Some(&Reverse((until, dir))) = self.falls.peek() {
            if at.is_some_and(|at| until >= at) {
                break;
            }
            self.falls.pop();
            if self.busy_until[dir] == until {
                self.set(until, dir * SIGNALS_PER_DIRECTION + 1, 0)?;
            }
        }
        Ok(())
    }

    fn write(&mut self, signal: usize, value: u64) -> io::Result<()> {
        self.values[signal] = value;
        let id = identifier(signal);
        match signal % SIGNALS_PER_DIRECTION {
            1 => writeln!(self.out, "{value}{id}"),
            2 => writeln!(self.out, "b{value:b} {id}"),
            _ => writeln!(self.out, "b{value:02b} {id}"),
        }
    }
}

impl<W: Write> Drop for Waves<W> {
    /// The ends of bursts still pending are written, and what is buffered flushed, even when a run stops
    /// with another error before [`Waves::finish`] (whose errors are for it to report).
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_phy::time::Duration;

    #[test]
    fn identifiers_are_distinct_and_printable() {
        let ids: Vec<String> = (0..20_000).map(identifier).collect();
        assert_eq!(ids[0], "!");
        assert_eq!(ids[93], "~");
        assert_eq!(ids[94], "!!");
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        assert!(ids
            .iter()
            .all(|id| id.bytes().all(|b| (b'!'..=b'~').contains(&b))));
    }

    /// One direction, gpu0's port 0 to gpu1.
    fn gpu0_to_gpu1() -> [DirectionName; 1] {
        [DirectionName {
            node: "gpu0".into(),
            port: 0,
            peer: "gpu1".into(),
        }]
    }

    #[test]
    fn a_burst_that_another_continues_stays_high() {
        let names = gpu0_to_gpu1();
        let mut out = Vec::new();
        let mut w = Waves::new(&mut out, &names, u64::MAX).unwrap();
        let t = |ps| Instant::ZERO + Duration::from_ps(ps);
        w.link(t(0), 0, DlState::Active, 1).unwrap();
        w.burst(t(10), 0, t(20)).unwrap();
        w.burst(t(20), 0, t(30)).unwrap();
        w.link(t(40), 0, DlState::Active, 0).unwrap();
        w.finish().unwrap();
        drop(w);
        let text = String::from_utf8(out).unwrap();
        let body = &text[text.find("$end\n#0").unwrap()..];
        assert!(body.ends_with("#10\n1\"\n#30\n0\"\n#40\nb0 #\n"), "{body}");
    }

    /// Waveforms dropped without `finish` (a run that stops with another error) still write the ends of
    /// the bursts they hold: before, the file ended with those directions busy for ever.
    #[test]
    fn dropped_waveforms_write_the_bursts_they_hold() {
        let names = gpu0_to_gpu1();
        let mut out = Vec::new();
        let mut w = Waves::new(&mut out, &names, u64::MAX).unwrap();
        let t = |ps| Instant::ZERO + Duration::from_ps(ps);
        w.burst(t(10), 0, t(20)).unwrap();
        drop(w);
        let text = String::from_utf8(out).unwrap();
        let body = &text[text.find("$end\n#0").unwrap()..];
        assert!(body.ends_with("#10\n1\"\n#20\n0\"\n"), "{body}");
    }
}
