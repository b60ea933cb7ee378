//! `linkctl phy decode --code 8b10b --packed --events`: a capture of a lane at 2.5 or 5 GT/s read by a
//! port's lane receiver on its own (`link_phy::ltssm::LaneMonitor`): training sets, SKP and electrical
//! idle ordered sets, the data stream descrambled, and receiver errors, in the order they came.

use std::io::{self, BufWriter, Read, Write};

use anyhow::Context;
use link_phy::ltssm::{LaneMonitor, MonitorEvent};
use serde_json::{json, Value};

use super::bits::words;
use super::code::read_some;
use super::training_set;

/// Bytes read from stdin at a time.
const CHUNK: usize = 64 * 1024;
/// Data bytes on one line of text or in one JSON object.
const DATA_PER_LINE: usize = 16;

/// Read packed bits from `input` and write what the receiver saw, as text or JSON lines; whether it
/// reported a receiver error.
pub fn decode(mut input: impl Read, json: bool) -> anyhow::Result<bool> {
    let mut monitor = LaneMonitor::new();
    let mut report = Report {
        out: BufWriter::new(io::stdout().lock()),
        json,
        data: Vec::with_capacity(DATA_PER_LINE),
        data_first: false,
        repeated: Run::default(),
        errors: false,
    };
    let mut bytes = vec![0u8; CHUNK];
    let mut events = Vec::new();
    loop {
        let n = read_some(&mut input, &mut bytes).context("reading stdin")?;
        for (word, count) in words(&bytes[..n]) {
            monitor.push_bits(word, count, &mut |e| events.push(e));
        }
        for event in events.drain(..) {
            report.event(event)?;
        }
        if n < CHUNK {
            report.flush()?;
            report.out.flush().context("writing stdout")?;
            return Ok(report.errors);
        }
    }
}

/// Events on their way out: a run of data bytes is written as one line, and a run of the same ordered
/// set as one line with its count.
struct Report<W: Write> {
    out: W,
    json: bool,
    data: Vec<u8>,
    /// Whether the run of data started right after an ordered set.
    data_first: bool,
    /// The run of the same event other than data still going on.
    repeated: Run,
    /// Whether a receiver error came.
    errors: bool,
}

impl<W: Write> Report<W> {
    fn event(&mut self, event: MonitorEvent) -> anyhow::Result<()> {
        self.errors |= event.is_error();
        if let MonitorEvent::Data { byte, first } = event {
            self.flush_repeated()?;
            if first || self.data.len() == DATA_PER_LINE {
                self.flush_data()?;
            }
            if self.data.is_empty() {
                self.data_first = first;
            }
            self.data.push(byte);
            return Ok(());
        }
        self.flush_data()?;
        match self.repeated.add(event) {
            Some(ended) => self.print_run(ended),
            None => Ok(()),
        }
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        self.flush_data()?;
        self.flush_repeated()
    }

    fn flush_data(&mut self) -> anyhow::Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let hex: String = self.data.iter().map(|b| format!("{b:02x}")).collect();
        let first = std::mem::take(&mut self.data_first);
        self.data.clear();
        if self.json {
            self.line(&json!({ "event": "data", "bytes": hex, "first": first }).to_string())
        } else {
            self.line(&format!("data {hex}"))
        }
    }

    fn flush_repeated(&mut self) -> anyhow::Result<()> {
        match self.repeated.take() {
            Some(run) => self.print_run(run),
            None => Ok(()),
        }
    }

    fn print_run(&mut self, (event, count): (MonitorEvent, u64)) -> anyhow::Result<()> {
        if self.json {
            self.line(&run_json(&event, count).to_string())
        } else {
            self.line(&run_text(&event, count))
        }
    }

    fn line(&mut self, text: &str) -> anyhow::Result<()> {
        writeln!(self.out, "{text}").context("writing stdout")
    }
}

/// A run of the same receiver event: an ordered set a lane sends many times in a row is one line.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Run(Option<(MonitorEvent, u64)>);

impl Run {
    /// Count `event` in; the run it ends (another event's, and how many times it came), if any.
    pub(crate) fn add(&mut self, event: MonitorEvent) -> Option<(MonitorEvent, u64)> {
        match &mut self.0 {
            Some((last, count)) if *last == event => {
                *count += 1;
                None
            }
            run => run.replace((event, 1)),
        }
    }

    /// The run going on, ended.
    pub(crate) fn take(&mut self) -> Option<(MonitorEvent, u64)> {
        self.0.take()
    }
}

/// A run of `count` of `event` as a line of text: the event, and the count when more than one.
pub(crate) fn run_text(event: &MonitorEvent, count: u64) -> String {
    let text = event_text(event);
    if count > 1 {
        format!("{text} (x{count})")
    } else {
        text
    }
}

/// A run of `count` of `event` as JSON: the event's, with `count`.
pub(crate) fn run_json(event: &MonitorEvent, count: u64) -> Value {
    let mut v = event_json(event);
    v["count"] = json!(count);
    v
}

/// A lane receiver's event as a line of text (also `link decode`'s).
pub(crate) fn event_text(event: &MonitorEvent) -> String {
    match event {
        MonitorEvent::Training(ts) => training_set::text(ts),
        MonitorEvent::PolarityInverted => {
            "polarity inverted: the lane is taken inverted from here".to_owned()
        }
        MonitorEvent::ElectricalIdle => "EIOS".to_owned(),
        MonitorEvent::Skip => "SKP".to_owned(),
        MonitorEvent::CodeError => "error: a code group that does not decode".to_owned(),
        MonitorEvent::MalformedOrderedSet => "error: a malformed ordered set".to_owned(),
        MonitorEvent::UnexpectedSymbol => "error: a control symbol where none belongs".to_owned(),
        MonitorEvent::StartOfData => "SDS".to_owned(),
        MonitorEvent::BlockError => "error: a block with an undefined sync header".to_owned(),
        MonitorEvent::DescramblerOutOfStep => {
            "error: the descrambler is out of step (a second SKP whose LFSR disagrees)".to_owned()
        }
        MonitorEvent::Data { .. } => "data".to_owned(),
    }
}

/// A lane receiver's event as JSON.
fn event_json(event: &MonitorEvent) -> Value {
    match event {
        MonitorEvent::Training(ts) => {
            json!({ "event": "training_set", "training_set": training_set::json(ts) })
        }
        MonitorEvent::PolarityInverted => json!({ "event": "polarity_inverted" }),
        MonitorEvent::ElectricalIdle => json!({ "event": "eios" }),
        MonitorEvent::Skip => json!({ "event": "skp" }),
        MonitorEvent::CodeError => json!({ "event": "error", "error": "code_group" }),
        MonitorEvent::MalformedOrderedSet => json!({ "event": "error", "error": "malformed_ordered_set" }),
        MonitorEvent::UnexpectedSymbol => json!({ "event": "error", "error": "unexpected_symbol" }),
        MonitorEvent::StartOfData => json!({ "event": "sds" }),
        MonitorEvent::BlockError => json!({ "event": "error", "error": "sync_header" }),
        MonitorEvent::DescramblerOutOfStep => json!({ "event": "error", "error": "descrambler_out_of_step" }),
        MonitorEvent::Data { byte, first } => {
            json!({ "event": "data", "bytes": format!("{byte:02x}"), "first": first })
        }
    }
}
