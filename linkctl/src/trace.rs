//! `--pcap FILE` for the commands that carry or read links outside the fabric simulator (`tl copy`, `link
//! decode`, `coherence`): a trace of their packets and control flits in the simulator's format
//! (docs/spec.md section 7), for Wireshark with `tools/wireshark/openlink.lua`. One link is trunk 0
//! between node 0 (endpoint 0, port A) and node 1 (endpoint 1, port B), port 0 at each end.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use fabric_sim::trace::{Hop, TlLayout, TraceSummary, Tracer};
use link_dl::flit::FLIT_LEN;
use link_phy::time::Instant;
use serde_json::{json, Value};

/// `--pcap` and `--pcap-limit`, as `sim` takes them.
#[derive(Args, Debug)]
pub struct PcapArgs {
    /// Write a pcap trace of every packet and control flit the link carries (link type 147, decoded by
    /// tools/wireshark/openlink.lua; format in docs/spec.md section 7)
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Most records the trace holds; the rest are counted, not written
    #[arg(long, default_value_t = 1_000_000, requires = "pcap")]
    pub pcap_limit: u64,
}

impl PcapArgs {
    /// The trace asked for, of one link, its file made, its packets' transaction-layer headers laid out as
    /// `layout`.
    pub fn open(&self, layout: TlLayout) -> anyhow::Result<Option<LinkTrace>> {
        self.open_links(layout, 1)
    }

    /// [`PcapArgs::open`] for `links` links.
    pub fn open_links(&self, layout: TlLayout, links: usize) -> anyhow::Result<Option<LinkTrace>> {
        let Some(path) = &self.pcap else {
            return Ok(None);
        };
        if let Some(stream) = crate::sim::standard_stream(path)? {
            bail!("--pcap names {stream}: give it a file of its own");
        }
        let file = File::create(path).with_context(|| format!("cannot create --pcap file {path:?}"))?;
        let tracer = Tracer::new(BufWriter::new(file), 2 * links, self.pcap_limit)
            .with_context(|| format!("writing --pcap file {path:?}"))?;
        Ok(Some(LinkTrace {
            tracer: tracer.with_tl_layout(layout),
            path: path.clone(),
            error: None,
        }))
    }
}

/// A trace of links being written. Units come from taps inside a run, which cannot stop it: the first
/// error writing the file is kept, what comes after it is passed over, and [`LinkTrace::check`] or
/// [`LinkTrace::finish`] gives the error.
pub struct LinkTrace {
    tracer: Tracer<BufWriter<File>>,
    path: PathBuf,
    error: Option<std::io::Error>,
}

impl LinkTrace {
    /// The link's direction from endpoint `from` (0 or 1).
    fn hop(from: u16) -> Hop {
        Hop {
            trunk: 0,
            from: (from, 0),
            to: (1 - from, 0),
        }
    }

    /// A unit endpoint `from` (0 or 1) of a one-link trace sent at `at`.
    pub fn unit(&mut self, from: u16, at: Instant, unit: &[u8; FLIT_LEN]) {
        self.unit_on(usize::from(from), Self::hop(from), at, unit)
    }

    /// A unit sent at `at` across `hop`, direction `direction` of the trace (`2 * link + 0 or 1`).
    pub fn unit_on(&mut self, direction: usize, hop: Hop, at: Instant, unit: &[u8; FLIT_LEN]) {
        if self.error.is_none() {
            self.error = self.tracer.unit(direction, hop, at, unit).err();
        }
    }

    /// Nothing is sent before `now` any more: what came before may be written.
    pub fn advance(&mut self, now: Instant) {
        if self.error.is_none() {
            self.error = self.tracer.advance(now).err();
        }
    }

    /// The first error writing the file, if there was one.
    pub fn check(&mut self) -> anyhow::Result<()> {
        match self.error.take() {
            Some(e) => Err(anyhow::Error::new(e).context(format!("writing --pcap file {:?}", self.path))),
            None => Ok(()),
        }
    }

    /// The receiver of endpoint `from`'s direction started its framing over, as a data link does when its
    /// physical layer comes up ([`Tracer::restart_framing`]).
    pub fn restart_framing(&mut self, from: u16) {
        self.tracer.restart_framing(usize::from(from));
    }

    /// Endpoint `from`'s direction stopped carrying data (the link left L0): a packet it had started is
    /// not recorded.
    pub fn cut(&mut self, from: u16) {
        self.tracer.cut(usize::from(from));
    }

    /// Write what is held; what the trace holds, or the first error writing it.
    pub fn finish(mut self) -> anyhow::Result<TraceSummary> {
        self.check()?;
        (self.tracer.flush()).with_context(|| format!("writing --pcap file {:?}", self.path))?;
        Ok(self.tracer.summary)
    }
}

/// What a trace holds, as text.
pub fn summary_text(summary: &TraceSummary) -> String {
    format!(
        "{} records written, {} left out by --pcap-limit; {} repeated initialisation flits counted, \
         not recorded",
        summary.records, summary.dropped, summary.init_repeats
    )
}

/// What a trace holds, as JSON.
pub fn summary_json(summary: &TraceSummary) -> Value {
    json!({"records": summary.records, "dropped": summary.dropped, "init_repeats": summary.init_repeats})
}
