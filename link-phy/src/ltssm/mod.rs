//! Link training: a sans-IO state machine in the spirit of the PCI Express LTSSM (Base Specification 4.2.6).
//!
//! A [`Port`] owns everything between the lanes and the data link layer: per-lane encoders, scramblers,
//! symbol and block aligners, the deskew buffer, and the training state machine. It is driven from outside
//! with slots of serial bits and the time:
//!
//! ```text
//!   poll_transmit(now, fill)  -> Slot            bits for every lane for the next slot time
//!   receive(now, &Slot, deliver)                 bits that arrived on every lane during a slot
//!   receivers_detected(now, mask)                answer to wants_receiver_detection()
//!   poll_timeout() / handle_timeout(now)         timers
//!   poll_event()                                 state changes, link up and down
//! ```
//!
//! It trains in 8b/10b at 2.5 GT/s (Detect, Polling, Configuration), reaches L0, then moves to the highest
//! rate both ports advertise through Recovery (speed change), switching to 128b/130b at 8 GT/s and up. It
//! negotiates the widest link its working lanes can form (with lane reversal), corrects lane polarity,
//! retrains on request or on too many receiver errors, and falls back to a narrower link when lanes fail.
//! A channel that cannot carry a link ends in [`LtssmState::Failed`] after a bounded number of attempts.
//!
//! In L0 the port carries a byte stream in 16-byte *units* for the layer above: `fill` is asked for whole
//! units to send, and `deliver` is handed whole units received, with their position counted from the
//! last ordered set. All-zero units are logical idle.

mod columns;
mod lane_rx;
mod lane_tx;
mod link_monitor;
mod monitor;
mod port;

pub use link_monitor::{LaneNumbers, LinkEvent, LinkMonitor};
pub use monitor::{LaneMonitor, MonitorEvent};
pub use port::Port;

use crate::lanes::LinkWidth;
use crate::rate::Rate;
use crate::time::{Duration, Instant};

/// Bytes in the unit the physical layer carries for the layer above.
pub const UNIT_BYTES: usize = 16;

/// Which end of the link leads configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Role {
    /// The downstream port (a switch or root port): proposes link and lane numbers, directs speed changes.
    Downstream,
    /// The upstream port (an endpoint): echoes what the downstream port proposes.
    Upstream,
}

/// The training states, named as in PCI Express.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LtssmState {
    /// Electrical idle, waiting before looking for a receiver.
    DetectQuiet,
    /// Looking for receivers on the lanes.
    DetectActive,
    /// Sending TS1 with PAD link and lane numbers; bit and symbol lock, polarity.
    PollingActive,
    /// Sending TS2: both ends have lock.
    PollingConfiguration,
    /// Proposing (downstream) or waiting for (upstream) a link number.
    ConfigLinkwidthStart,
    /// The link number is agreed; the width is being settled.
    ConfigLinkwidthAccept,
    /// Lane numbers proposed, waiting for them to be echoed.
    ConfigLanenumWait,
    /// Lane numbers echoed.
    ConfigLanenumAccept,
    /// Exchanging TS2 with the final link and lane numbers.
    ConfigComplete,
    /// Sending logical idle before L0.
    ConfigIdle,
    /// The link is up and carries data.
    L0,
    /// Re-establishing bit, symbol or block lock (retrain or speed change).
    RecoveryRcvrLock,
    /// Exchanging TS2 to agree on what Recovery does next.
    RecoveryRcvrCfg,
    /// Electrical idle while both ends change rate.
    RecoverySpeed,
    /// Sending logical idle before L0.
    RecoveryIdle,
    /// Electrical idle in low power (L1) until woken.
    ElectricalIdle,
    /// Training gave up: the channel cannot carry a link. Only [`Port::reset`] leaves this state.
    Failed,
}

impl LtssmState {
    /// The name PCI Express uses, e.g. `Polling.Active`.
    pub const fn name(self) -> &'static str {
        match self {
            LtssmState::DetectQuiet => "Detect.Quiet",
            LtssmState::DetectActive => "Detect.Active",
            LtssmState::PollingActive => "Polling.Active",
            LtssmState::PollingConfiguration => "Polling.Configuration",
            LtssmState::ConfigLinkwidthStart => "Configuration.Linkwidth.Start",
            LtssmState::ConfigLinkwidthAccept => "Configuration.Linkwidth.Accept",
            LtssmState::ConfigLanenumWait => "Configuration.Lanenum.Wait",
            LtssmState::ConfigLanenumAccept => "Configuration.Lanenum.Accept",
            LtssmState::ConfigComplete => "Configuration.Complete",
            LtssmState::ConfigIdle => "Configuration.Idle",
            LtssmState::L0 => "L0",
            LtssmState::RecoveryRcvrLock => "Recovery.RcvrLock",
            LtssmState::RecoveryRcvrCfg => "Recovery.RcvrCfg",
            LtssmState::RecoverySpeed => "Recovery.Speed",
            LtssmState::RecoveryIdle => "Recovery.Idle",
            LtssmState::ElectricalIdle => "L1",
            LtssmState::Failed => "Failed",
        }
    }

    /// The top-level state: Detect, Polling, Configuration, L0, Recovery, L1 or Failed.
    pub const fn major(self) -> &'static str {
        match self {
            LtssmState::DetectQuiet | LtssmState::DetectActive => "Detect",
            LtssmState::PollingActive | LtssmState::PollingConfiguration => "Polling",
            LtssmState::ConfigLinkwidthStart
            | LtssmState::ConfigLinkwidthAccept
            | LtssmState::ConfigLanenumWait
            | LtssmState::ConfigLanenumAccept
            | LtssmState::ConfigComplete
            | LtssmState::ConfigIdle => "Configuration",
            LtssmState::L0 => "L0",
            LtssmState::RecoveryRcvrLock
            | LtssmState::RecoveryRcvrCfg
            | LtssmState::RecoverySpeed
            | LtssmState::RecoveryIdle => "Recovery",
            LtssmState::ElectricalIdle => "L1",
            LtssmState::Failed => "Failed",
        }
    }
}

/// The timeouts and counts of training. [`Timing::pcie`] holds the values of the PCI Express
/// specification; [`Timing::fast`] divides the timeouts of milliseconds by 100 for simulations that sweep
/// failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Detect.Quiet: 12 ms.
    pub detect_quiet: Duration,
    /// Detect.Active, waiting for an answer to receiver detection before assuming every lane: 1 us.
    pub detect_active: Duration,
    /// Polling.Active: 24 ms.
    pub polling_active: Duration,
    /// Polling.Configuration: 48 ms.
    pub polling_configuration: Duration,
    /// Configuration.Linkwidth.Start: 24 ms.
    pub config_linkwidth: Duration,
    /// The other Configuration substates: 2 ms.
    pub config_short: Duration,
    /// Recovery.RcvrLock: 24 ms.
    pub recovery_rcvr_lock: Duration,
    /// Recovery.RcvrCfg: 48 ms.
    pub recovery_rcvr_cfg: Duration,
    /// Recovery.Idle: 2 ms.
    pub recovery_idle: Duration,
    /// Electrical idle in Recovery.Speed before switching rate, once the receivers are quiet too: 800 ns.
    pub speed_change_idle: Duration,
    /// How long Recovery.Speed, entered from Recovery.RcvrCfg, waits for the receivers to go quiet before
    /// switching rate without it: 20 us, a model choice (PCI Express gives no limit). It covers the
    /// longest lane delays the channel model makes (4 us each way) and the partner's last TS2s; a
    /// partner that missed the speed change keeps sending, and the rate on trial then fails as before.
    pub speed_change_quiet_wait: Duration,
    /// After the first lane answers in Configuration, how long to wait for the lanes that lag by skew.
    pub lane_settle: Duration,
    /// TS1 ordered sets to send in Polling.Active before leaving it: 1024.
    pub polling_min_ts1: u32,
}

impl Timing {
    /// The PCI Express values.
    pub const fn pcie() -> Self {
        Timing {
            detect_quiet: Duration::from_ms(12),
            detect_active: Duration::from_us(1),
            polling_active: Duration::from_ms(24),
            polling_configuration: Duration::from_ms(48),
            config_linkwidth: Duration::from_ms(24),
            config_short: Duration::from_ms(2),
            recovery_rcvr_lock: Duration::from_ms(24),
            recovery_rcvr_cfg: Duration::from_ms(48),
            recovery_idle: Duration::from_ms(2),
            speed_change_idle: Duration::from_ns(800),
            speed_change_quiet_wait: Duration::from_us(20),
            lane_settle: Duration::from_us(2),
            polling_min_ts1: 1024,
        }
    }

    /// Every timeout of milliseconds divided by 100 (Polling still sends 1024 TS1, and Detect.Active's 1 us,
    /// the 2 us lane settle, the 800 ns speed-change idle and its 20 us wait for the receivers' quiet
    /// stay): for sweeps that exercise failures.
    pub const fn fast() -> Self {
        let p = Timing::pcie();
        Timing {
            detect_quiet: Duration(p.detect_quiet.0 / 100),
            polling_active: Duration(p.polling_active.0 / 100),
            polling_configuration: Duration(p.polling_configuration.0 / 100),
            config_linkwidth: Duration(p.config_linkwidth.0 / 100),
            config_short: Duration(p.config_short.0 / 100),
            recovery_rcvr_lock: Duration(p.recovery_rcvr_lock.0 / 100),
            recovery_rcvr_cfg: Duration(p.recovery_rcvr_cfg.0 / 100),
            recovery_idle: Duration(p.recovery_idle.0 / 100),
            ..p
        }
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing::pcie()
    }
}

/// How a port is built and how it trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Physical lanes, 1 to 16.
    pub lanes: usize,
    /// Which end leads configuration.
    pub role: Role,
    /// The highest rate this port supports (it supports every rate below it too).
    pub max_rate: Rate,
    /// Link number the downstream port proposes.
    pub link_number: u8,
    /// Fast training sequences this port needs to leave L0s.
    pub n_fts: u8,
    /// Timeouts.
    pub timing: Timing,
    /// Consecutive trainings that fail to reach L0 before the port gives up in [`LtssmState::Failed`].
    pub max_attempts: u32,
    /// Receiver errors within [`PortConfig::error_window`] that make L0 retrain.
    pub error_threshold: u32,
    /// The window over which receiver errors are counted.
    pub error_window: Duration,
    /// Whether the downstream port moves to the highest common rate as soon as the link is up.
    pub auto_speed_change: bool,
    /// Ordered sets interrupt the data stream only every this many units, and L0's data starts at such a
    /// boundary, so that the layer above can keep blocks of units (forward error correction) aligned.
    pub unit_alignment: u16,
}

impl PortConfig {
    /// A port of `lanes` lanes in `role`, supporting up to 8 GT/s, with PCI Express timing.
    pub const fn new(lanes: usize, role: Role) -> Self {
        PortConfig {
            lanes,
            role,
            max_rate: Rate::Gen3,
            link_number: 0,
            n_fts: 32,
            timing: Timing::pcie(),
            max_attempts: 4,
            error_threshold: 16,
            error_window: Duration::from_us(10),
            auto_speed_change: true,
            unit_alignment: 1,
        }
    }
}

/// Counters a person debugging a board looks at first. They only grow, until [`Port::reset`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PhyCounters {
    /// 8b/10b code groups that are not in the code.
    pub code_violations: u64,
    /// 8b/10b code groups of the wrong running disparity.
    pub disparity_errors: u64,
    /// 128b/130b blocks with an invalid sync header, or undecodable.
    pub block_errors: u64,
    /// Ordered sets that did not parse.
    pub malformed_ordered_sets: u64,
    /// Control symbols where data was expected.
    pub unexpected_symbols: u64,
    /// Times an active lane fell silent (electrical idle) while it should be carrying a signal.
    pub lost_signal: u64,
    /// Times lane-to-lane deskew was lost, or could not absorb the skew.
    pub deskew_errors: u64,
    /// Lanes whose polarity was found inverted and corrected.
    pub polarity_inversions: u64,
    /// Training sets sent and received.
    pub ts_sent: u64,
    /// Training sets received and parsed.
    pub ts_received: u64,
    /// SKP ordered sets sent.
    pub skp_sent: u64,
    /// SKP ordered sets received.
    pub skp_received: u64,
    /// Entries into Recovery from L0 (retrains).
    pub retrains: u64,
    /// Retrains asked for by the layer above.
    pub retrain_requests: u64,
    /// Retrains caused by too many receiver errors.
    pub error_retrains: u64,
    /// Successful rate changes.
    pub speed_changes: u64,
    /// Rate changes that failed and fell back.
    pub speed_change_failures: u64,
    /// Trainings started from Detect.
    pub training_attempts: u64,
    /// Times the link came up (entered L0 from Configuration or Recovery).
    pub link_ups: u64,
    /// Units delivered to the layer above.
    pub units_received: u64,
    /// Units taken from the layer above.
    pub units_sent: u64,
}

impl PhyCounters {
    /// Every receiver error counted.
    pub fn receiver_errors(&self) -> u64 {
        self.code_violations
            + self.disparity_errors
            + self.block_errors
            + self.malformed_ordered_sets
            + self.unexpected_symbols
            + self.lost_signal
            + self.deskew_errors
    }
}

/// What the port tells the layer above and whoever watches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PhyEvent {
    /// The training state changed.
    StateChanged {
        /// When.
        at: Instant,
        /// From.
        from: LtssmState,
        /// To.
        to: LtssmState,
    },
    /// The link entered L0.
    LinkUp {
        /// When.
        at: Instant,
        /// Negotiated width.
        width: LinkWidth,
        /// Current rate.
        rate: Rate,
    },
    /// The link left L0 for Recovery: it stays configured and comes back up unless Recovery fails.
    /// A data link layer holds its replay timer meanwhile.
    Retraining {
        /// When.
        at: Instant,
    },
    /// The link is gone: training starts over from Detect (or has given up).
    LinkDown {
        /// When.
        at: Instant,
    },
}
