//! The port: per-lane transmitters and receivers, deskew, and the training state machine.

use heapless::Deque;

use super::columns::{Column, Columns, COLUMN_BYTES};
use super::lane_rx::{LaneEvent, LaneRx, RxError};
use super::lane_tx::LaneTx;
use super::{LtssmState, PhyCounters, PhyEvent, PortConfig, Role, UNIT_BYTES};
use crate::code128b130b::{Block, OrderedSetBlock, SyncHeader};
use crate::lanes::{stripe, LaneMap, LinkWidth, MAX_LANES};
use crate::ordered_set::{DataRates, TrainingSet, TsKind, EIOS_8B10B, SKP_8B10B, TS_LEN};
use crate::rate::{LineCode, Rate};
use crate::serial::{LaneSignal, Slot};
use crate::symbol::Symbol;
use crate::time::Instant;

/// Symbol times between SKP ordered sets at 8b/10b (PCIe: 1180 to 1538).
const SKP_INTERVAL_SYMBOLS: u32 = 1180;
/// Blocks between SKP ordered sets at 128b/130b (PCIe: 370 to 375).
const SKP_INTERVAL_BLOCKS: u32 = 370;
/// Training sets between EIEOS at 128b/130b in Recovery.
const EIEOS_INTERVAL_TS: u32 = 32;
/// Consecutive identical training sets that prove a lane trained (PCIe: 8).
const TS_TO_LOCK: u32 = 8;
/// Consecutive identical training sets that show a lane answered in Configuration (PCIe: 2).
const TS_TO_ANSWER: u32 = 2;
/// Training sets to send after first hearing the partner's, before moving on (PCIe: 16).
const TS_AFTER_RX: u32 = 16;
/// Symbol times of logical idle to receive, and to send after receiving, before L0 (PCIe: 8 and 16).
const IDLE_TO_RECEIVE: u32 = 8;
const IDLE_TO_SEND: u32 = 16;
/// Events kept for `poll_event`; older ones are dropped (and counted) if nobody polls.
const EVENT_QUEUE: usize = 32;
/// Timeouts of Configuration.Idle or Recovery.Idle that may go back to Recovery.RcvrLock before one goes to
/// Detect (PCIe: idle_to_rlock_transitioned reaching FFh).
const IDLE_TO_RLOCK_MAX: u8 = 0xff;

/// What the transmitter is doing in an 8b/10b ordered set that spans several slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxOrderedSet {
    Training(TsKind),
    Skip,
    ElectricalIdle,
}

impl TxOrderedSet {
    const fn len(self) -> usize {
        match self {
            TxOrderedSet::Training(_) => TS_LEN,
            TxOrderedSet::Skip => SKP_8B10B.len(),
            TxOrderedSet::ElectricalIdle => EIOS_8B10B.len(),
        }
    }
}

/// What the state wants on the lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Quiet,
    Training(TsKind),
    IdleData,
    Data,
}

/// Per-lane memory of the training sets received.
#[derive(Clone, Copy, Debug, Default)]
struct LaneTrack {
    last: Option<TrainingSet>,
    consecutive: u32,
}

/// One end of a link: the physical layer of one port. See the [module documentation](super).
#[derive(Clone, Debug)]
pub struct Port {
    config: PortConfig,
    state: LtssmState,
    entered: Instant,
    deadline: Option<Instant>,
    rate: Rate,
    /// Lanes that detected a receiver.
    detected: u32,
    detection_pending: bool,
    /// The negotiated link, from Configuration on.
    map: Option<LaneMap>,
    /// The link number agreed (the downstream port's, echoed by the upstream port).
    link_number: Option<u8>,
    /// Lanes on which the upstream port heard a link number and echoes it.
    link_lanes: u32,
    first_answer: Option<Instant>,

    tx: [LaneTx; MAX_LANES],
    rx: [LaneRx; MAX_LANES],
    track: [LaneTrack; MAX_LANES],
    /// A lane's FIFO holds its marker and the symbols after it until the latest lane's marker comes: one
    /// more than the skew absorbed.
    columns: Columns,

    next_tx: Instant,
    tx_os: Option<(TxOrderedSet, usize)>,
    /// The training set each lane is sending, fixed when it starts.
    tx_ts: [[Symbol; TS_LEN]; MAX_LANES],
    /// Stream bytes sent since the last ordered set: ordered sets go only at multiples of a block of
    /// `unit_alignment` units, so the layer above can keep its own blocks (FEC) in step.
    tx_bytes_since_os: usize,
    /// Whether the current block of the stream carries data (L0) or logical idle; fixed at its start.
    tx_block_is_data: bool,
    tx_unit: [u8; UNIT_BYTES],
    slots_since_skp: u32,
    ts_since_eieos: u32,
    eieos_pending: bool,
    sds_pending: bool,
    eios_pending: bool,
    eios_sent: bool,

    rx_unit: [u8; UNIT_BYTES],
    rx_unit_len: usize,
    /// Units that took the port from Configuration.Idle or Recovery.Idle to L0, delivered at the next call
    /// to `receive`, and where they were in the stream.
    rx_held: [u8; UNIT_BYTES * MAX_LANES],
    rx_held_len: usize,
    rx_held_index: u64,
    /// Whole units received since the last ordered set (idle ones included).
    rx_units_since_os: u64,
    /// In Recovery.RcvrLock, line the deskew buffer up afresh at the first column of ordered sets on every
    /// lane. What took the link to Recovery (a burst, say) may have slipped a lane against the others, and
    /// a buffer still aligned a symbol out from L0 took the start of the partner's data stream in
    /// Recovery.Idle for a slip, emptied to wait for the next SKP ordered set, and missed the partner's
    /// logical idle: the port sat out Recovery.Idle's timeout. Not at once on entering Recovery: the
    /// partner's last data may still be in the buffer on the late lanes. By that column it has all
    /// passed, and the partner's data stream starts again only after this port has sent TS2s. Each lane
    /// keeps what it holds from its first marker on ([`Deskew::realign`]).
    realign_deskew: bool,
    idle_received: u32,
    /// Whether this state has seen logical idle (any, and enough in a row: PCIe conditions, latched).
    heard_idle: bool,
    idle_qualified: bool,
    idle_sent_after_rx: u32,
    ts_sent: u32,
    ts_sent_after_rx: u32,
    heard_partner: bool,
    /// Lanes that met this state's "N consecutive training sets" condition at some point in it (PCIe
    /// conditions hold once met, even after the partner moves on), and the set that qualified them.
    latched: u32,
    latched_ts: Option<TrainingSet>,
    eios_received: bool,
    partner_went_quiet: bool,

    partner_rates: DataRates,
    speed_change: bool,
    target_rate: Rate,
    previous_rate: Rate,
    /// A rate a speed change failed at, not tried again until Detect ([`Port::restart_from_detect`]).
    failed_rate: Option<Rate>,
    /// The link has been in L0 since `failed_rate` failed.
    l0_since_rate_failed: bool,
    at_new_rate: bool,
    /// PCI Express's idle_to_rlock_transitioned: timeouts of Configuration.Idle or Recovery.Idle that went
    /// back to Recovery.RcvrLock since the link was last in L0 (or the rate last changed, or training
    /// started over). At [`IDLE_TO_RLOCK_MAX`] the next timeout there is handled as any other.
    idle_to_rlock: u8,
    /// This Recovery.Idle was entered by Recovery.RcvrCfg's timeout: it leaves only for Recovery.RcvrLock
    /// (or Detect), never for L0, as PCI Express says at 128b/130b (the only code it happens in).
    idle_after_cfg_timeout: bool,
    retrain_requested: bool,
    /// In L0, a lane's descrambler was found out of step ([`LaneEvent::DescramblerOutOfStep`]); cleared on
    /// entering L0.
    descrambler_out_of_step: bool,
    low_power_requested: bool,
    /// The data link granted the partner's request for L1: its electrical idle ordered set is L1.
    low_power_expected: bool,
    wake_requested: bool,
    window_start: Instant,
    errors_in_window: u32,
    attempts: u32,
    /// Physical lanes left out of every later Configuration because the deskew buffer could not line
    /// them up with the others ([`Port::leave_out_unaligned_lanes`]); kept across Detect, cleared by a reset.
    left_out_for_deskew: u32,
    /// Physical lanes the deskew buffer could not line up when Configuration.Idle or Recovery.Idle timed
    /// out (no data came through), left out at the next failure back to Detect: by then a rate change
    /// may have reset the buffer, and lanes are left out only at 8b/10b.
    blamed_for_deskew: u32,
    /// Per physical lane, the 8b/10b symbols received and the receive errors (lost signal included) since
    /// the deskew buffer last overflowed (`[0]`) and between its last two overflows (`[1]`). A late lane
    /// delivers its symbols, late; one with at least as many errors as symbols does not work (its wire
    /// broke, or it is stuck at a level): a buffer that overflowed waiting for it blames no lane
    /// ([`Port::unaligned_lanes`]).
    lane_symbols: [[u32; MAX_LANES]; 2],
    lane_errors: [[u32; MAX_LANES]; 2],
    reached_l0: bool,
    first_l0: Option<Instant>,

    counters: PhyCounters,
    events: Deque<PhyEvent, EVENT_QUEUE>,
    events_dropped: u32,
}

impl Port {
    /// A port in Detect.Quiet at `now`. Returns an error if the lane count is not 1 to 16.
    pub fn new(config: PortConfig, now: Instant) -> Result<Port, crate::Error> {
        if config.lanes == 0 || config.lanes > MAX_LANES {
            return Err(crate::Error::UnsupportedWidth { lanes: config.lanes });
        }
        let mut port = Port {
            config,
            state: LtssmState::DetectQuiet,
            entered: now,
            deadline: None,
            rate: Rate::Gen1,
            detected: 0,
            detection_pending: false,
            map: None,
            link_number: None,
            link_lanes: 0,
            first_answer: None,
            tx: core::array::from_fn(LaneTx::new),
            rx: core::array::from_fn(LaneRx::new),
            track: [LaneTrack::default(); MAX_LANES],
            columns: Columns::new()?,
            next_tx: now,
            tx_os: None,
            tx_ts: [[Symbol::COM; TS_LEN]; MAX_LANES],
            tx_bytes_since_os: 0,
            tx_block_is_data: false,
            tx_unit: [0; UNIT_BYTES],
            slots_since_skp: 0,
            ts_since_eieos: 0,
            eieos_pending: false,
            sds_pending: false,
            eios_pending: false,
            eios_sent: false,
            rx_unit: [0; UNIT_BYTES],
            rx_unit_len: 0,
            rx_held: [0; UNIT_BYTES * MAX_LANES],
            rx_held_len: 0,
            rx_held_index: 0,
            rx_units_since_os: 0,
            realign_deskew: false,
            idle_received: 0,
            heard_idle: false,
            idle_qualified: false,
            idle_sent_after_rx: 0,
            ts_sent: 0,
            ts_sent_after_rx: 0,
            heard_partner: false,
            latched: 0,
            latched_ts: None,
            eios_received: false,
            partner_went_quiet: false,
            partner_rates: DataRates::empty(),
            speed_change: false,
            target_rate: Rate::Gen1,
            previous_rate: Rate::Gen1,
            failed_rate: None,
            l0_since_rate_failed: true,
            at_new_rate: false,
            idle_to_rlock: 0,
            idle_after_cfg_timeout: false,
            retrain_requested: false,
            descrambler_out_of_step: false,
            low_power_requested: false,
            low_power_expected: false,
            wake_requested: false,
            window_start: now,
            errors_in_window: 0,
            attempts: 0,
            left_out_for_deskew: 0,
            blamed_for_deskew: 0,
            lane_symbols: [[0; MAX_LANES]; 2],
            lane_errors: [[0; MAX_LANES]; 2],
            reached_l0: false,
            first_l0: None,
            counters: PhyCounters::default(),
            events: Deque::new(),
            events_dropped: 0,
        };
        port.enter(now, LtssmState::DetectQuiet);
        Ok(port)
    }

    /// Start over from Detect.Quiet with counters cleared, as after a fundamental reset.
    pub fn reset(&mut self, now: Instant) {
        let config = self.config;
        if let Ok(port) = Port::new(config, now) {
            *self = port;
        }
    }

    // ----- what the outside sees -----

    /// The current training state.
    pub fn state(&self) -> LtssmState {
        self.state
    }

    /// The configuration the port was built with.
    pub fn config(&self) -> &PortConfig {
        &self.config
    }

    /// The current rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The current line code.
    pub fn line_code(&self) -> LineCode {
        self.rate.line_code()
    }

    /// The negotiated width, once Configuration has settled it.
    pub fn width(&self) -> Option<LinkWidth> {
        self.map.map(|m| m.width)
    }

    /// The negotiated lane map (width, reversal), once Configuration has settled it.
    pub fn lane_map(&self) -> Option<LaneMap> {
        self.map
    }

    /// Physical lanes whose polarity the receiver inverts.
    pub fn inverted_lanes(&self) -> u32 {
        (0..self.config.lanes)
            .filter(|&l| self.rx[l].inverted)
            .fold(0, |m, l| m | 1 << l)
    }

    /// Physical lanes this port leaves out of the link because it could not deskew them with the others,
    /// until a reset: skew past what its deskew buffer absorbs, or, at a high bit error rate, markers
    /// lost so often that the buffer never aligned.
    pub fn lanes_left_out_for_deskew(&self) -> u32 {
        self.left_out_for_deskew
    }

    /// Physical lanes that detected a receiver.
    pub fn detected_lanes(&self) -> u32 {
        self.detected
    }

    /// Rates the partner advertised in its last training sets.
    pub fn partner_rates(&self) -> DataRates {
        self.partner_rates
    }

    /// When the link first reached L0.
    pub fn first_l0(&self) -> Option<Instant> {
        self.first_l0
    }

    /// Whether the link is up (L0).
    pub fn is_up(&self) -> bool {
        self.state == LtssmState::L0
    }

    /// Whether this port's rate is final: no speed change under way, and, if it is the port that
    /// directs them, no higher rate that both ports support and that has not failed here before.
    pub fn rate_settled(&self) -> bool {
        let directs = self.config.role == Role::Downstream && self.config.auto_speed_change;
        let higher_to_try = directs && self.highest_common_rate() > self.rate;
        !(self.speed_change || higher_to_try)
    }

    /// Error and traffic counters.
    pub fn counters(&self) -> &PhyCounters {
        &self.counters
    }

    /// Events dropped because nobody polled them.
    pub fn events_dropped(&self) -> u32 {
        self.events_dropped
    }

    /// The next event: state changes, link up, link down.
    pub fn poll_event(&mut self) -> Option<PhyEvent> {
        self.events.pop_front()
    }

    /// Ask for a retrain (Recovery) at the next opportunity, as the data link layer does after too many
    /// replays. Ignored unless the link is in L0.
    pub fn request_retrain(&mut self) {
        if self.state == LtssmState::L0 {
            self.retrain_requested = true;
        }
    }

    /// Ask the link to go to electrical idle (L1): send an electrical idle ordered set and go quiet.
    /// Ignored unless the link is in L0. The data link asks once its low-power handshake is done, and the
    /// partner's data link has directed its port to follow ([`Port::expect_low_power`]). A port in L0
    /// that receives its partner's electrical idle ordered set undirected follows the partner to L1 too,
    /// except at a rate it changed up to: there the set may be the partner falling back from a speed
    /// change that failed on its side, and the port follows it to Recovery.Speed instead.
    pub fn request_low_power(&mut self) {
        if self.state == LtssmState::L0 {
            self.low_power_requested = true;
        }
    }

    /// Whether to take the partner's electrical idle ordered set for L1, at any rate, until the port
    /// leaves L0: its data link layer has granted the partner's request for low power (PCI Express's
    /// PM_Request_Ack), so the set is the partner going to L1, not falling back from a speed change. The
    /// port then sends its own set and follows. `true` is ignored unless the link is in L0.
    pub fn expect_low_power(&mut self, expected: bool) {
        self.low_power_expected = expected && self.state == LtssmState::L0;
    }

    /// Wake the link from electrical idle (L1): the port goes to Recovery at its next evaluation, which
    /// [`Port::poll_timeout`] then gives as due.
    pub fn wake(&mut self) {
        if self.state == LtssmState::ElectricalIdle {
            self.wake_requested = true;
        }
    }

    /// Whether the port is waiting for [`Port::receivers_detected`].
    pub fn wants_receiver_detection(&self) -> bool {
        self.detection_pending
    }

    /// Whether the port is sending nothing (electrical idle on every lane) until a timer or a received
    /// signal wakes it; a driver may skip its transmit slots until [`Port::poll_timeout`].
    pub fn is_quiet(&self) -> bool {
        self.tx_os.is_none() && !self.eios_pending && self.plan() == Plan::Quiet
    }

    /// The answer to receiver detection: a mask of the physical lanes on which a receiver was found.
    pub fn receivers_detected(&mut self, now: Instant, mask: u32) {
        if self.state != LtssmState::DetectActive {
            return;
        }
        self.detection_pending = false;
        self.detected = mask & self.port_mask();
        if self.detected == 0 {
            self.restart_from_detect(now);
        } else {
            self.enter(now, LtssmState::PollingActive);
        }
    }

    /// Whether the port is in Recovery.Speed waiting for its receivers to go quiet (the partner's EIOS,
    /// or a slot without signal): a driver carries a quiet partner's slots to it until then.
    pub fn listens_for_quiet(&self) -> bool {
        self.state == LtssmState::RecoverySpeed && self.listening_for_eios()
    }

    /// Whether the receiver listens only for the partner's EIOS, which says it has gone quiet too (in L1,
    /// and in Recovery.Speed, which also takes a slot without signal as the quiet): a driver may skip a
    /// quiet transmitter's slots, so the quiet itself need never arrive in L1.
    fn listening_for_eios(&self) -> bool {
        matches!(self.state, LtssmState::ElectricalIdle | LtssmState::RecoverySpeed)
            && !self.partner_went_quiet
    }

    /// When the port next needs attention: its next transmit slot, or a timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // A quiet port has no slot to send; one woken in L1 is due at once (its next slot, which may have
        // passed while it was quiet), so that a driver sleeping until here gets to it.
        let tx = if self.is_quiet() && !self.wake_requested {
            None
        } else {
            Some(self.next_tx)
        };
        let settle = self.first_answer.map(|t| t + self.config.timing.lane_settle);
        [tx, self.deadline, settle].into_iter().flatten().min()
    }

    /// Let timers fire.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.evaluate(now);
    }

    /// The time of the next transmit slot.
    pub fn next_transmit(&self) -> Instant {
        self.next_tx
    }

    // ----- transmit -----

    /// The bits for every lane during the next slot, which starts at `now`. In L0, `fill` is asked for
    /// whole units of data to send (a multiple of [`UNIT_BYTES`]); it must fill the buffer, with all-zero
    /// units (logical idle) if it has nothing to send.
    pub fn poll_transmit(&mut self, now: Instant, fill: &mut dyn FnMut(&mut [u8])) -> Slot {
        self.evaluate(now);
        self.next_tx = now.max(self.next_tx) + self.rate.slot_time();
        match self.line_code() {
            LineCode::Code8b10b => self.transmit_8b10b(fill),
            LineCode::Code128b130b => self.transmit_128b130b(fill),
        }
    }

    fn plan(&self) -> Plan {
        match self.state {
            LtssmState::DetectQuiet
            | LtssmState::DetectActive
            | LtssmState::RecoverySpeed
            | LtssmState::ElectricalIdle
            | LtssmState::Failed => Plan::Quiet,
            LtssmState::PollingActive
            | LtssmState::ConfigLinkwidthStart
            | LtssmState::ConfigLinkwidthAccept
            | LtssmState::ConfigLanenumWait
            | LtssmState::ConfigLanenumAccept
            | LtssmState::RecoveryRcvrLock => Plan::Training(TsKind::Ts1),
            LtssmState::PollingConfiguration | LtssmState::ConfigComplete | LtssmState::RecoveryRcvrCfg => {
                Plan::Training(TsKind::Ts2)
            }
            LtssmState::ConfigIdle | LtssmState::RecoveryIdle => Plan::IdleData,
            LtssmState::L0 => Plan::Data,
        }
    }

    /// Lanes the transmitter drives in the current state.
    fn tx_lanes(&self) -> u32 {
        match (self.state, self.map) {
            (
                LtssmState::ConfigComplete
                | LtssmState::ConfigIdle
                | LtssmState::L0
                | LtssmState::RecoveryRcvrLock
                | LtssmState::RecoveryRcvrCfg
                | LtssmState::RecoverySpeed
                | LtssmState::RecoveryIdle
                | LtssmState::ElectricalIdle,
                Some(map),
            ) => map.physical_mask(),
            _ => self.detected,
        }
    }

    /// The training set physical lane `lane` sends now.
    fn training_set(&self, kind: TsKind, lane: usize) -> TrainingSet {
        let mut rates = self.rates_to_advertise();
        if self.speed_change {
            rates |= DataRates::SPEED_CHANGE;
        }
        let mut ts = TrainingSet::polling(rates, self.config.n_fts);
        ts.kind = kind;
        match self.state {
            LtssmState::PollingActive | LtssmState::PollingConfiguration => {}
            LtssmState::ConfigLinkwidthStart | LtssmState::ConfigLinkwidthAccept => {
                ts.link = match self.config.role {
                    Role::Downstream => Some(self.config.link_number),
                    Role::Upstream if self.link_lanes & (1 << lane) != 0 => self.link_number,
                    Role::Upstream => None,
                };
            }
            _ => {
                if let Some(logical) = self.map.and_then(|m| m.logical(lane)) {
                    ts.link = self.link_number;
                    ts.lane = Some(logical as u8);
                } else if self.config.role == Role::Downstream {
                    ts.link = Some(self.config.link_number);
                }
            }
        }
        ts
    }

    /// Bytes in one alignment block of the stream.
    fn block_bytes(&self) -> usize {
        UNIT_BYTES * usize::from(self.config.unit_alignment.max(1))
    }

    /// Whether the stream is inside a block, which must be finished before an ordered set or a change
    /// between data and idle.
    fn mid_block(&self) -> bool {
        self.tx_bytes_since_os % self.block_bytes() != 0
    }

    /// At the start of a block of the stream: does it carry data or idle?
    fn start_block_if_due(&mut self, plan: Plan) {
        if !self.mid_block() {
            self.tx_block_is_data = plan == Plan::Data;
        }
    }

    fn transmit_8b10b(&mut self, fill: &mut dyn FnMut(&mut [u8])) -> Slot {
        let mut slot = Slot::idle(self.rate);
        if self.tx_os.is_none() {
            let plan = self.plan();
            let mid_block = self.mid_block();
            let next = if mid_block {
                None
            } else if self.eios_pending {
                self.eios_pending = false;
                self.eios_sent = true;
                Some(TxOrderedSet::ElectricalIdle)
            } else if plan != Plan::Quiet && self.slots_since_skp >= SKP_INTERVAL_SYMBOLS {
                Some(TxOrderedSet::Skip)
            } else if let Plan::Training(kind) = plan {
                Some(TxOrderedSet::Training(kind))
            } else {
                None
            };
            if let Some(os) = next {
                if let TxOrderedSet::Training(kind) = os {
                    for lane in 0..self.config.lanes {
                        self.tx_ts[lane] = self.training_set(kind, lane).to_symbols();
                    }
                }
                self.tx_os = Some((os, 0));
                self.tx_bytes_since_os = 0;
                if os == TxOrderedSet::Skip {
                    self.slots_since_skp = 0;
                    self.counters.skp_sent += 1;
                }
            } else if plan == Plan::Quiet && !mid_block {
                return slot;
            }
        }
        self.slots_since_skp = self.slots_since_skp.saturating_add(1);
        let lanes = self.tx_lanes();
        if let Some((os, index)) = self.tx_os {
            for lane in (0..self.config.lanes).filter(|l| lanes & (1 << l) != 0) {
                let symbol = match os {
                    TxOrderedSet::Training(_) => self.tx_ts[lane][index],
                    TxOrderedSet::Skip => SKP_8B10B[index],
                    TxOrderedSet::ElectricalIdle => EIOS_8B10B[index],
                };
                slot.lanes[lane] = LaneSignal::Bits(self.tx[lane].symbol(symbol, true));
            }
            if index + 1 == os.len() {
                self.tx_os = None;
                if let TxOrderedSet::Training(_) = os {
                    self.ts_sent_one();
                }
            } else {
                self.tx_os = Some((os, index + 1));
            }
            return slot;
        }
        // A data slot: one byte per lane of the link, logical idle (zero) outside L0.
        let Some(map) = self.map else { return slot };
        let width = map.width.lanes();
        let start = self.tx_bytes_since_os % UNIT_BYTES;
        // What a block carries is decided at its start; a state change mid-block finishes the block.
        self.start_block_if_due(self.plan());
        if start == 0 {
            if self.tx_block_is_data {
                fill(&mut self.tx_unit);
                self.counters.units_sent += 1;
            } else {
                self.tx_unit = [0; UNIT_BYTES];
            }
        }
        if !self.tx_block_is_data && self.heard_idle {
            self.idle_sent_after_rx += 1;
        }
        for logical in 0..width {
            let Some(lane) = map.physical(logical) else {
                continue;
            };
            let byte = self.tx_unit.get(start + logical).copied().unwrap_or(0);
            slot.lanes[lane] = LaneSignal::Bits(self.tx[lane].symbol(Symbol::Data(byte), false));
        }
        self.tx_bytes_since_os += width;
        slot
    }

    fn transmit_128b130b(&mut self, fill: &mut dyn FnMut(&mut [u8])) -> Slot {
        let mut slot = Slot::idle(self.rate);
        let plan = self.plan();
        let os = if self.mid_block() {
            None
        } else if self.eios_pending {
            self.eios_pending = false;
            self.eios_sent = true;
            Some(OrderedSetBlock::Eios)
        } else if plan == Plan::Quiet {
            return slot;
        } else if self.eieos_pending {
            self.eieos_pending = false;
            self.ts_since_eieos = 0;
            Some(OrderedSetBlock::Eieos)
        } else if self.slots_since_skp >= SKP_INTERVAL_BLOCKS {
            self.slots_since_skp = 0;
            self.counters.skp_sent += 1;
            Some(OrderedSetBlock::skp())
        } else if self.sds_pending && matches!(plan, Plan::IdleData | Plan::Data) {
            self.sds_pending = false;
            Some(OrderedSetBlock::Sds)
        } else {
            None
        };
        self.slots_since_skp = self.slots_since_skp.saturating_add(1);
        let lanes = self.tx_lanes();
        if let Some(os) = os {
            self.tx_bytes_since_os = 0;
            let block = Block {
                header: SyncHeader::OrderedSet,
                payload: os.to_payload(),
            };
            for lane in (0..self.config.lanes).filter(|l| lanes & (1 << l) != 0) {
                slot.lanes[lane] = LaneSignal::Bits(self.tx[lane].block(&block));
            }
            return slot;
        }
        if let (Plan::Training(kind), false) = (plan, self.mid_block()) {
            self.tx_bytes_since_os = 0;
            for lane in (0..self.config.lanes).filter(|l| lanes & (1 << l) != 0) {
                let ts = self.training_set(kind, lane);
                let block = Block {
                    header: SyncHeader::OrderedSet,
                    payload: OrderedSetBlock::Training(ts).to_payload(),
                };
                slot.lanes[lane] = LaneSignal::Bits(self.tx[lane].block(&block));
            }
            self.ts_sent_one();
            self.ts_since_eieos += 1;
            if self.ts_since_eieos >= EIEOS_INTERVAL_TS {
                self.eieos_pending = true;
            }
            return slot;
        }
        let Some(map) = self.map else { return slot };
        let width = map.width.lanes();
        let mut stream = [0u8; UNIT_BYTES * MAX_LANES];
        let stream = &mut stream[..UNIT_BYTES * width];
        self.start_block_if_due(plan);
        if self.tx_block_is_data {
            fill(stream);
            self.counters.units_sent += width as u64;
        } else if self.heard_idle {
            self.idle_sent_after_rx += UNIT_BYTES as u32;
        }
        self.tx_bytes_since_os += stream.len();
        let mut lanes_data = [0u8; UNIT_BYTES * MAX_LANES];
        // The stream is a whole number of rows of `width` bytes, so striping cannot fail.
        if stripe::stripe(stream, map.width, &mut lanes_data).is_ok() {
            for logical in 0..width {
                let Some(lane) = map.physical(logical) else {
                    continue;
                };
                let mut payload = [0u8; 16];
                payload.copy_from_slice(&lanes_data[logical * 16..logical * 16 + 16]);
                let block = Block {
                    header: SyncHeader::Data,
                    payload,
                };
                slot.lanes[lane] = LaneSignal::Bits(self.tx[lane].block(&block));
            }
        }
        slot
    }

    fn ts_sent_one(&mut self) {
        self.ts_sent += 1;
        self.counters.ts_sent += 1;
        if self.heard_partner {
            self.ts_sent_after_rx += 1;
        }
    }

    // ----- receive -----

    /// The bits that arrived on every lane during one slot ending at `now`. In L0, whole units of the
    /// partner's data stream are handed to `deliver` (a multiple of [`UNIT_BYTES`] at a time), with the
    /// number of units the partner sent between its last ordered set and the first of these.
    pub fn receive(&mut self, now: Instant, slot: &Slot, deliver: &mut dyn FnMut(&[u8], u64)) {
        let lanes = &slot.lanes[..self.config.lanes];
        let signal = lanes.iter().any(|l| matches!(l, LaneSignal::Bits(_)));
        match self.state {
            LtssmState::DetectQuiet if signal => self.enter(now, LtssmState::DetectActive),
            // Leaving electrical idle: wake on the partner's signal, once it has been quiet.
            LtssmState::ElectricalIdle if !signal => self.partner_went_quiet = true,
            LtssmState::ElectricalIdle if self.partner_went_quiet => self.wake_requested = true,
            _ => {}
        }
        let listening_for_eios = self.listening_for_eios();
        if self.plan() != Plan::Quiet || listening_for_eios {
            let expected = self.map.map_or(self.detected, |m| m.physical_mask());
            for lane in (0..self.config.lanes).filter(|l| expected & (1 << l) != 0) {
                // Bits sent at another rate are noise to this receiver (the far end has not switched yet).
                let bits = match &slot.lanes[lane] {
                    LaneSignal::Bits(bits) if slot.rate == self.rate => bits,
                    _ => {
                        if self.expects_signal() {
                            self.counters.lost_signal += 1;
                            self.lane_errors[0][lane] = self.lane_errors[0][lane].saturating_add(1);
                            self.note_error(now);
                        }
                        continue;
                    }
                };
                let mut events: heapless::Vec<LaneEvent, 16> = heapless::Vec::new();
                let mut push = |e| {
                    // A slot holds at most two code groups or blocks: far fewer events than the capacity.
                    let _ = events.push(e);
                };
                match self.line_code() {
                    LineCode::Code8b10b => self.rx[lane].receive_8b10b(bits, &mut push),
                    LineCode::Code128b130b => self.rx[lane].receive_128b130b(bits, &mut push),
                }
                for &event in &events {
                    if listening_for_eios && event != LaneEvent::ElectricalIdleOs {
                        continue;
                    }
                    self.lane_event(now, lane, event);
                }
            }
            if listening_for_eios {
                let speed = self.state == LtssmState::RecoverySpeed;
                self.partner_went_quiet = core::mem::take(&mut self.eios_received) || (speed && !signal);
                if speed && self.partner_went_quiet {
                    self.deadline = Some(now + self.config.timing.speed_change_idle);
                }
            } else {
                self.drain_deskew(now, deliver);
            }
        }
        self.evaluate(now);
    }

    /// Whether every lane of the link should be carrying a signal now.
    fn expects_signal(&self) -> bool {
        matches!(
            self.state,
            LtssmState::L0 | LtssmState::ConfigIdle | LtssmState::RecoveryIdle
        ) && !self.eios_received
    }

    fn lane_event(&mut self, now: Instant, lane: usize, event: LaneEvent) {
        match event {
            LaneEvent::Training(ts) => {
                self.counters.ts_received += 1;
                let t = &mut self.track[lane];
                if t.last == Some(ts) {
                    t.consecutive = t.consecutive.saturating_add(1);
                } else {
                    t.last = Some(ts);
                    t.consecutive = 1;
                }
            }
            LaneEvent::PolarityInverted => {
                // Polarity is settled while training at 8b/10b (PCIe 4.2.4.4); later it would be noise.
                if matches!(
                    self.state,
                    LtssmState::PollingActive | LtssmState::PollingConfiguration
                ) {
                    self.rx[lane].inverted = !self.rx[lane].inverted;
                    self.rx[lane].reset(lane);
                    self.counters.polarity_inversions += 1;
                }
            }
            LaneEvent::ElectricalIdleOs => {
                if self.map.is_some_and(|m| m.logical(lane).is_some()) {
                    self.eios_received = true;
                }
            }
            LaneEvent::Skip => self.counters.skp_received += 1,
            LaneEvent::Sds => {}
            LaneEvent::Symbol(item) => {
                self.lane_symbols[0][lane] = self.lane_symbols[0][lane].saturating_add(1);
                if let Some(logical) = self.map.and_then(|m| m.logical(lane)) {
                    if self.columns.push_symbol(logical, item).is_err() {
                        self.lane_symbols = [[0; MAX_LANES], self.lane_symbols[0]];
                        self.lane_errors = [[0; MAX_LANES], self.lane_errors[0]];
                        self.counters.deskew_errors += 1;
                        self.note_error(now);
                    }
                }
            }
            LaneEvent::Block(item) => {
                if let Some(logical) = self.map.and_then(|m| m.logical(lane)) {
                    if self.columns.push_block(logical, item).is_err() {
                        self.counters.deskew_errors += 1;
                        self.note_error(now);
                    }
                }
            }
            LaneEvent::Error(e) => {
                self.lane_errors[0][lane] = self.lane_errors[0][lane].saturating_add(1);
                match e {
                    RxError::CodeViolation => self.counters.code_violations += 1,
                    RxError::Disparity => self.counters.disparity_errors += 1,
                    RxError::Block => self.counters.block_errors += 1,
                    RxError::MalformedOrderedSet => self.counters.malformed_ordered_sets += 1,
                    RxError::UnexpectedSymbol => self.counters.unexpected_symbols += 1,
                }
                self.note_error(now);
            }
            LaneEvent::DescramblerOutOfStep => {
                self.lane_errors[0][lane] = self.lane_errors[0][lane].saturating_add(1);
                self.counters.block_errors += 1;
                self.note_error(now);
                // Nothing but an EIEOS puts a lane's descrambler back in step, and in L0 none comes: every
                // later data block on the lane would be garbled. Recovery sends one.
                let on_link = self.map.is_some_and(|m| m.logical(lane).is_some());
                if self.state == LtssmState::L0 && on_link {
                    self.descrambler_out_of_step = true;
                }
            }
        }
    }

    fn note_error(&mut self, now: Instant) {
        if self.state != LtssmState::L0 {
            return;
        }
        if now.saturating_since(self.window_start) > self.config.error_window {
            self.window_start = now;
            self.errors_in_window = 0;
        }
        self.errors_in_window += 1;
    }

    fn drain_deskew(&mut self, now: Instant, deliver: &mut dyn FnMut(&[u8], u64)) {
        let Some(map) = self.map else { return };
        let losses_before = self.columns.losses();
        self.deliver_held(deliver);
        let lenient = self.state == LtssmState::L0;
        // A column of symbols is a row of bytes; of blocks, sixteen rows. No buffer for the larger is
        // made where the smaller is enough: this runs at every slot.
        let mut row = [0u8; MAX_LANES];
        let mut blocks;
        let stream: &mut [u8] = match self.line_code() {
            LineCode::Code8b10b => &mut row,
            LineCode::Code128b130b => {
                blocks = [0u8; COLUMN_BYTES];
                &mut blocks
            }
        };
        while let Some(column) = self.columns.pop(self.line_code(), map.width, lenient, stream) {
            match column {
                Column::Data(len) => {
                    if self.data_received(now, &stream[..len], deliver) {
                        break;
                    }
                }
                Column::OrderedSets { all, interrupts_idle } => {
                    // Ordered sets restart the unit count; SKP does not interrupt idle.
                    if interrupts_idle {
                        self.idle_received = 0;
                    }
                    self.rx_unit_len = 0;
                    self.rx_units_since_os = 0;
                    if all {
                        self.realign_deskew_in_recovery();
                    }
                }
            }
        }
        let losses = self.columns.losses();
        if losses > losses_before {
            self.counters.deskew_errors += losses - losses_before;
            self.note_error(now);
        }
    }

    /// Deskewed bytes of the partner's stream, in order: whole units are counted (idle ones too) and, in
    /// L0, delivered with the count of units since the last ordered set. Returns true if they took the
    /// port to L0 (see [`Port::partner_in_l0`]): the units are held, and the caller leaves the rest of the
    /// stream for the next call.
    fn data_received(&mut self, now: Instant, bytes: &[u8], deliver: &mut dyn FnMut(&[u8], u64)) -> bool {
        if bytes.iter().all(|&b| b == 0) {
            self.idle_received = self.idle_received.saturating_add(match self.line_code() {
                LineCode::Code8b10b => 1,
                LineCode::Code128b130b => UNIT_BYTES as u32,
            });
            self.heard_idle = true;
            self.idle_qualified |= self.idle_received >= IDLE_TO_RECEIVE && !self.idle_after_cfg_timeout;
        } else {
            self.idle_received = 0;
        }
        if self.rx_unit_len == 0 && bytes.len() % UNIT_BYTES == 0 {
            // Whole units at once (128b/130b columns).
            return self.units_received(now, bytes, deliver);
        }
        let mut held = false;
        for &b in bytes {
            if let Some(slot) = self.rx_unit.get_mut(self.rx_unit_len) {
                *slot = b;
            }
            self.rx_unit_len += 1;
            if self.rx_unit_len == UNIT_BYTES {
                self.rx_unit_len = 0;
                let unit = self.rx_unit;
                held |= self.units_received(now, &unit, deliver);
            }
        }
        held
    }

    /// Whole units of the partner's stream: counted, and delivered in L0, or held if they take the port
    /// there (returns true then).
    fn units_received(&mut self, now: Instant, units: &[u8], deliver: &mut dyn FnMut(&[u8], u64)) -> bool {
        let index = self.rx_units_since_os;
        let count = (units.len() / UNIT_BYTES) as u64;
        self.rx_units_since_os += count;
        if self.partner_in_l0(units) {
            self.enter(now, LtssmState::L0);
            // Held until the next call, so that the layer above sees the link come up (and starts over
            // its framing, as it does then) before the first data of it.
            let len = units.len().min(self.rx_held.len());
            self.rx_held[..len].copy_from_slice(&units[..len]);
            self.rx_held_len = len;
            self.rx_held_index = index;
            return true;
        }
        if self.state == LtssmState::L0 {
            deliver(units, index);
            self.counters.units_received += count;
        }
        false
    }

    /// Units received held back when they took the port to L0: delivered now, if it is still there.
    fn deliver_held(&mut self, deliver: &mut dyn FnMut(&[u8], u64)) {
        let len = core::mem::take(&mut self.rx_held_len);
        if len > 0 && self.state == LtssmState::L0 {
            deliver(&self.rx_held[..len], self.rx_held_index);
            self.counters.units_received += (len / UNIT_BYTES) as u64;
        }
    }

    /// Whether `units`, received in Configuration.Idle or Recovery.Idle, show the partner in L0: once its
    /// logical idle has met this port's condition for L0 on the receiving side (8 symbol times in a row), a
    /// unit that is not idle is its first data. It sends data only in L0, which it entered after receiving
    /// this port's idle, so the condition left here (16 symbols of idle sent after receiving one), which
    /// serves only the partner, is moot: the port goes to L0 with the units. It had dropped them: when the
    /// two ports reach L0 a block apart, the first block the faster one sends arrives in Recovery.Idle, and
    /// the data link above got it back only by a NAK and a replay.
    fn partner_in_l0(&self, units: &[u8]) -> bool {
        matches!(self.state, LtssmState::ConfigIdle | LtssmState::RecoveryIdle)
            && self.idle_qualified
            && units.iter().any(|&b| b != 0)
    }

    // ----- the state machine -----

    fn port_mask(&self) -> u32 {
        if self.config.lanes >= 32 {
            u32::MAX
        } else {
            (1 << self.config.lanes) - 1
        }
    }

    /// Lanes whose last `n` training sets were identical and satisfy `ok(physical lane, set)`.
    fn lanes_with(&self, n: u32, ok: impl Fn(usize, &TrainingSet) -> bool) -> u32 {
        (0..self.config.lanes)
            .filter(|&l| {
                let t = &self.track[l];
                t.consecutive >= n && t.last.as_ref().is_some_and(|ts| ok(l, ts))
            })
            .fold(0, |m, l| m | 1 << l)
    }

    /// Remember the lanes in `ok` as qualified for the rest of this state; returns every qualified lane.
    fn latch(&mut self, ok: u32) -> u32 {
        if self.latched_ts.is_none() {
            self.latched_ts = self.first_ts(ok);
        }
        self.latched |= ok;
        self.latched
    }

    /// Whether `ts` carries the agreed link number and this lane's logical number.
    fn numbered_for(&self, lane: usize, ts: &TrainingSet) -> bool {
        ts.link.is_some()
            && ts.link == self.link_number
            && self
                .map
                .and_then(|m| m.logical(lane))
                .is_some_and(|l| ts.lane == Some(l as u8))
    }

    fn past_deadline(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }

    fn settled(&mut self, now: Instant, answered: u32, expected: u32) -> bool {
        if answered == 0 {
            return false;
        }
        let first = *self.first_answer.get_or_insert(now);
        answered & expected == expected || now >= first + self.config.timing.lane_settle
    }

    /// The rates this port will go to: up to its top rate, and below one that failed. A partner whose
    /// speed change to a rate this port gave up would otherwise ask for it after every L0, and go round
    /// Recovery for ever while this port did not follow.
    fn rates_to_advertise(&self) -> DataRates {
        let below_failed = self.failed_rate.map_or(self.config.max_rate, |failed| {
            Rate::ALL[(failed as usize).saturating_sub(1)]
        });
        self.config.max_rate.min(below_failed).advertise_up_to()
    }

    fn highest_common_rate(&self) -> Rate {
        Rate::highest_in(self.rates_to_advertise() & self.partner_rates).unwrap_or(Rate::Gen1)
    }

    fn evaluate(&mut self, now: Instant) {
        // Each transition is judged once per call; chains (e.g. Accept -> Wait) take a call each.
        let timed_out = self.past_deadline(now);
        let t = self.config.timing;
        match self.state {
            LtssmState::DetectQuiet => {
                if timed_out {
                    self.enter(now, LtssmState::DetectActive);
                }
            }
            LtssmState::DetectActive => {
                if timed_out {
                    // Nobody answered the detection request: assume receivers on every lane.
                    self.detection_pending = false;
                    self.detected = self.port_mask();
                    self.enter(now, LtssmState::PollingActive);
                }
            }
            LtssmState::PollingActive => {
                let ok = self.lanes_with(TS_TO_LOCK, |_, ts| ts.link.is_none() && ts.lane.is_none());
                let ok = self.latch(ok);
                if self.ts_sent >= t.polling_min_ts1 && ok & self.detected == self.detected {
                    self.enter(now, LtssmState::PollingConfiguration);
                } else if timed_out {
                    if ok != 0 {
                        self.enter(now, LtssmState::PollingConfiguration);
                    } else {
                        self.restart_from_detect(now);
                    }
                }
            }
            LtssmState::PollingConfiguration => {
                let ok = self.lanes_with(TS_TO_LOCK, |_, ts| ts.kind == TsKind::Ts2 && ts.lane.is_none());
                let ok = self.latch(ok);
                self.heard_partner |= self.lanes_with(1, |_, ts| ts.kind == TsKind::Ts2) != 0;
                if ok != 0 && self.ts_sent_after_rx >= TS_AFTER_RX {
                    self.enter(now, LtssmState::ConfigLinkwidthStart);
                } else if timed_out {
                    self.restart_from_detect(now);
                }
            }
            LtssmState::ConfigLinkwidthStart => match self.config.role {
                Role::Downstream => {
                    let link = self.config.link_number;
                    let echoed = self.lanes_with(TS_TO_ANSWER, |_, ts| {
                        ts.kind == TsKind::Ts1 && ts.link == Some(link) && ts.lane.is_none()
                    }) & !self.left_out_for_deskew;
                    let expected = self.detected & !self.left_out_for_deskew;
                    if self.settled(now, echoed, expected) {
                        // PCIe forms the link from "at least one group of Lanes" that can make one.
                        match LaneMap::widest(self.config.lanes, echoed) {
                            Some(map) => {
                                self.link_number = Some(link);
                                self.set_map(map);
                                self.enter(now, LtssmState::ConfigLinkwidthAccept);
                            }
                            None if echoed & expected == expected || timed_out => {
                                self.restart_from_detect(now)
                            }
                            // Lanes still to be heard (late by more than the settle time) may complete
                            // one: settle again from now.
                            None => self.first_answer = Some(now),
                        }
                    } else if timed_out {
                        self.restart_from_detect(now);
                    }
                }
                Role::Upstream => {
                    // Lanes left out for deskew answer with PAD, so the partner forms the link without them.
                    let offered = self.lanes_with(TS_TO_ANSWER, |_, ts| {
                        ts.kind == TsKind::Ts1 && ts.link.is_some() && ts.lane.is_none()
                    }) & !self.left_out_for_deskew;
                    if let Some(lane) = (0..self.config.lanes).find(|l| offered & (1 << l) != 0) {
                        self.link_number = self.track[lane].last.and_then(|ts| ts.link);
                        self.link_lanes = offered;
                        self.enter(now, LtssmState::ConfigLinkwidthAccept);
                    } else if timed_out {
                        self.restart_from_detect(now);
                    }
                }
            },
            LtssmState::ConfigLinkwidthAccept => match self.config.role {
                Role::Downstream => self.enter(now, LtssmState::ConfigLanenumWait),
                Role::Upstream => {
                    let link = self.link_number;
                    self.link_lanes |= self.lanes_with(1, |_, ts| ts.link.is_some() && ts.link == link)
                        & !self.left_out_for_deskew;
                    let numbered = self.lanes_with(TS_TO_ANSWER, |_, ts| {
                        ts.kind == TsKind::Ts1 && ts.link.is_some() && ts.link == link && ts.lane.is_some()
                    });
                    if self.settled(now, numbered, self.link_lanes) {
                        match self.map_from_lane_numbers(numbered) {
                            Some(map) => {
                                self.set_map(map);
                                self.enter(now, LtssmState::ConfigLanenumWait);
                            }
                            None => self.restart_from_detect(now),
                        }
                    } else if timed_out {
                        self.restart_from_detect(now);
                    }
                }
            },
            LtssmState::ConfigLanenumWait => {
                let want = self.map.map_or(0, |m| m.physical_mask());
                let done = match self.config.role {
                    Role::Downstream => {
                        let echoed = self.lanes_with(TS_TO_ANSWER, |l, ts| self.numbered_for(l, ts));
                        echoed == want
                    }
                    Role::Upstream => {
                        self.lanes_with(TS_TO_ANSWER, |l, ts| {
                            ts.kind == TsKind::Ts2 && self.numbered_for(l, ts)
                        }) != 0
                    }
                };
                if done {
                    self.enter(now, LtssmState::ConfigLanenumAccept);
                } else if timed_out {
                    self.restart_from_detect(now);
                }
            }
            LtssmState::ConfigLanenumAccept => self.enter(now, LtssmState::ConfigComplete),
            LtssmState::ConfigComplete | LtssmState::RecoveryRcvrCfg => {
                let want = self.map.map_or(0, |m| m.physical_mask());
                let ok = self.lanes_with(TS_TO_LOCK, |l, ts| {
                    ts.kind == TsKind::Ts2 && self.numbered_for(l, ts)
                });
                let ok = self.latch(ok);
                if self.state == LtssmState::RecoveryRcvrCfg
                    && self.heard_partner
                    && !self.at_new_rate
                    && self.lanes_with(TS_TO_ANSWER, |l, ts| {
                        ts.kind == TsKind::Ts1 && self.numbered_for(l, ts)
                    }) == want
                {
                    // The partner, heard in Recovery.RcvrCfg, is back in Recovery.RcvrLock (its Recovery.Idle
                    // timed out): the 16 TS2 to send count from its next TS2, so that it gets enough of them.
                    self.heard_partner = false;
                    self.ts_sent_after_rx = 0;
                }
                self.heard_partner |=
                    self.lanes_with(1, |l, ts| ts.kind == TsKind::Ts2 && self.numbered_for(l, ts)) != 0;
                if self.state == LtssmState::RecoveryRcvrCfg {
                    self.follow_speed_change();
                }
                if ok == want && self.ts_sent_after_rx >= TS_AFTER_RX {
                    self.learn_partner_rates();
                    let partner_changes = self.partner_asks_speed_change();
                    let next = match self.state {
                        LtssmState::ConfigComplete => LtssmState::ConfigIdle,
                        _ if self.speed_change && partner_changes => LtssmState::RecoverySpeed,
                        _ => LtssmState::RecoveryIdle,
                    };
                    self.enter(now, next);
                } else if timed_out {
                    self.training_timed_out(now);
                }
            }
            LtssmState::ConfigIdle | LtssmState::RecoveryIdle => {
                let back_to_training = self.state == LtssmState::RecoveryIdle
                    && self.lanes_with(TS_TO_ANSWER, |l, ts| {
                        ts.kind == TsKind::Ts1 && self.numbered_for(l, ts)
                    }) != 0;
                if self.idle_qualified && self.idle_sent_after_rx >= IDLE_TO_SEND {
                    self.enter(now, LtssmState::L0);
                } else if back_to_training {
                    if self.idle_after_cfg_timeout || self.at_new_rate {
                        // Counted as a timeout would be: a partner that answers only with TS1 would
                        // otherwise keep this port going round Recovery for ever. At a rate on trial the
                        // partner's TS1 says its own Recovery.Idle timed out (it counted that): counted
                        // here too, the two ports give the rate up at the same next timeout, where
                        // otherwise one would go back to the old rate while the other stayed at the new.
                        self.count_idle_to_rlock();
                    }
                    self.enter(now, LtssmState::RecoveryRcvrLock);
                } else if timed_out {
                    self.training_timed_out(now);
                }
            }
            LtssmState::L0 => self.evaluate_l0(now),
            LtssmState::RecoveryRcvrLock => {
                let want = self.map.map_or(0, |m| m.physical_mask());
                let ok = self.lanes_with(TS_TO_LOCK, |l, ts| self.numbered_for(l, ts));
                let ok = self.latch(ok);
                self.follow_speed_change();
                if ok == want && want != 0 {
                    self.enter(now, LtssmState::RecoveryRcvrCfg);
                } else if timed_out {
                    self.training_timed_out(now);
                }
            }
            LtssmState::RecoverySpeed => {
                if timed_out {
                    self.switch_rate(now);
                }
            }
            LtssmState::ElectricalIdle => {
                if self.wake_requested {
                    self.wake_requested = false;
                    // Out of electrical idle every lane locks again from nothing, as after a rate change:
                    // bits left over from before the quiet would misframe the partner's first blocks.
                    self.reset_lanes();
                    self.enter(now, LtssmState::RecoveryRcvrLock);
                }
            }
            LtssmState::Failed => {}
        }
    }

    fn evaluate_l0(&mut self, now: Instant) {
        let map_mask = self.map.map_or(0, |m| m.physical_mask());
        // Any training set on the link's lanes: the partner is in Recovery, or started over from Detect.
        let partner_training = self.lanes_with(1, |_, _| true) & map_mask != 0;
        let target = self.highest_common_rate();
        if self.retrain_requested {
            self.counters.retrain_requests += 1;
            self.retrain(now);
        } else if self.errors_in_window > self.config.error_threshold || self.descrambler_out_of_step {
            self.counters.error_retrains += 1;
            self.retrain(now);
        } else if partner_training {
            self.retrain(now);
        } else if self.low_power_requested {
            self.low_power_requested = false;
            self.enter_low_power(now);
        } else if self.eios_received && self.low_power_expected {
            self.enter_low_power(now);
        } else if self.eios_received {
            // Kept for L1, where it says the partner is quiet already; Recovery.Speed clears it.
            self.follow_partner_out_of_l0(now);
        } else if self.config.role == Role::Downstream && self.config.auto_speed_change && target > self.rate
        {
            self.speed_change = true;
            self.target_rate = target;
            self.retrain(now);
        }
    }

    /// A training state timed out. In Recovery at a rate just changed to (before L0 at it), the new rate
    /// does not work on this channel: every lane may lock at it and yet the link not come up, as when
    /// the lanes' skew, which is a time, is more symbol times than the deskew buffer holds at the faster
    /// rate. Go back to the previous rate and do not try this one again. Anything else starts over from
    /// Detect, which forgets the failed rate once the link has been in L0 at the old one.
    ///
    /// A timeout of Configuration.Idle or Recovery.Idle goes back to Recovery.RcvrLock instead, up to 255
    /// times since L0 at 8 GT/s and above, once at 2.5 and 5 GT/s or at a rate on trial (PCI Express's
    /// idle_to_rlock_transitioned): the partner may have received this port's idle data
    /// and gone on to L0 while this port missed the partner's (a bit error), and only training sets bring
    /// it back. Gone to Recovery.Speed instead, the port would send an electrical idle ordered set, which a
    /// partner in L0 takes for low power; gone to Detect, it would leave the partner training alone until
    /// Recovery.RcvrLock's 24 ms ran out.
    ///
    /// Recovery.RcvrCfg's timeout at 8 GT/s and above goes to Recovery.Idle while idle_to_rlock_transitioned
    /// is below FFh (PCI Express 4.2.6.4.4), one that cannot go to L0 (this port never had the partner's
    /// TS2): its own timeout, or the partner's TS1, takes it back to Recovery.RcvrLock, counted, so a link
    /// whose partner never gets as far as TS2 reaches Detect after 255 tries. At a rate on trial it goes
    /// back to the old rate instead, as from Recovery.RcvrLock (a model choice: PCI Express reaches the
    /// old rate from Recovery.RcvrCfg only on electrical idle, which the model does not infer).
    fn training_timed_out(&mut self, now: Instant) {
        let in_idle = matches!(self.state, LtssmState::ConfigIdle | LtssmState::RecoveryIdle);
        if in_idle {
            self.blamed_for_deskew |= self.unaligned_lanes();
        }
        if in_idle && self.idle_to_rlock < IDLE_TO_RLOCK_MAX {
            self.count_idle_to_rlock();
            self.enter(now, LtssmState::RecoveryRcvrLock);
            return;
        }
        if self.state == LtssmState::RecoveryRcvrCfg
            && self.rate >= Rate::Gen3
            && !self.at_new_rate
            && self.idle_to_rlock < IDLE_TO_RLOCK_MAX
        {
            self.enter(now, LtssmState::RecoveryIdle);
            self.idle_after_cfg_timeout = true;
            return;
        }
        let in_recovery = matches!(
            self.state,
            LtssmState::RecoveryRcvrLock | LtssmState::RecoveryRcvrCfg | LtssmState::RecoveryIdle
        );
        if self.at_new_rate && in_recovery {
            self.fall_back_to_previous_rate(now);
        } else {
            self.restart_from_detect(now);
        }
    }

    /// One more go from Configuration.Idle or Recovery.Idle back to Recovery.RcvrLock.
    fn count_idle_to_rlock(&mut self) {
        // PCI Express counts these up to FFh at 8 GT/s and above, and allows one at 2.5 and 5 GT/s. At a rate
        // on trial one too: there a link that keeps timing out is one the rate does not carry (its skew,
        // say), and it goes back to the previous rate instead of trying 255 times.
        self.idle_to_rlock = if self.rate >= Rate::Gen3 && !self.at_new_rate {
            self.idle_to_rlock.saturating_add(1)
        } else {
            IDLE_TO_RLOCK_MAX
        };
    }

    /// The rate changed to does not work: back to the previous one through Recovery.Speed, never to try
    /// this one again.
    fn fall_back_to_previous_rate(&mut self, now: Instant) {
        self.counters.speed_change_failures += 1;
        self.failed_rate = Some(self.rate);
        self.l0_since_rate_failed = false;
        self.target_rate = self.previous_rate;
        self.speed_change = false;
        self.enter(now, LtssmState::RecoverySpeed);
    }

    /// An electrical idle ordered set this port was not directed to expect (its own layer directs it to
    /// L1, as PCI Express's data link layer directs both ports after its power-management handshake):
    /// the partner left L0 for Recovery.Speed, going back to the previous rate after a speed change that
    /// failed on its side (it timed out in Recovery while this port reached L0). Follow it there. At a
    /// rate this port did not change up to (the rate training started at, or one gone back to), the
    /// partner has no speed change to give up: it is going to L1 before this port's own layer has asked
    /// (the two need not be asked at the same instant), and the port follows it there.
    fn follow_partner_out_of_l0(&mut self, now: Instant) {
        if self.previous_rate < self.rate {
            self.fall_back_to_previous_rate(now);
        } else {
            self.enter_low_power(now);
        }
    }

    /// Go to L1: send an EIOS, which tells the partner this port is going quiet (its receiver wakes on
    /// a signal only after that), and go quiet.
    fn enter_low_power(&mut self, now: Instant) {
        self.eios_pending = true;
        self.enter(now, LtssmState::ElectricalIdle);
    }

    fn retrain(&mut self, now: Instant) {
        self.retrain_requested = false;
        self.counters.retrains += 1;
        self.enter(now, LtssmState::RecoveryRcvrLock);
    }

    /// The upstream port joins a speed change the downstream port asks for, if it can.
    fn follow_speed_change(&mut self) {
        if self.config.role == Role::Upstream && !self.speed_change && self.partner_asks_speed_change() {
            self.learn_partner_rates();
            let target = self.highest_common_rate();
            if target != self.rate {
                self.speed_change = true;
                self.target_rate = target;
            }
        }
    }

    fn first_ts(&self, lanes: u32) -> Option<TrainingSet> {
        (0..self.config.lanes)
            .find(|l| lanes & (1 << l) != 0)
            .and_then(|l| self.track[l].last)
    }

    /// Whether the training sets that qualified this state ask for a speed change.
    fn partner_asks_speed_change(&self) -> bool {
        self.latched_ts
            .is_some_and(|ts| ts.rates.contains(DataRates::SPEED_CHANGE))
    }

    fn learn_partner_rates(&mut self) {
        if let Some(ts) = self.latched_ts {
            self.partner_rates = ts.rates & !(DataRates::SPEED_CHANGE | DataRates::AUTONOMOUS_CHANGE);
        }
    }

    /// The upstream port's lane map, from the lane numbers the downstream port assigned: in order, or
    /// reversed (lane numbers counting down from the port's last lane).
    fn map_from_lane_numbers(&self, numbered: u32) -> Option<LaneMap> {
        let width = LinkWidth::from_lanes(numbered.count_ones() as usize).ok()?;
        [false, true].into_iter().find_map(|reversed| {
            let map = LaneMap::new(self.config.lanes, width, reversed).ok()?;
            let consistent = map.physical_mask() == numbered
                && (0..self.config.lanes)
                    .filter(|l| numbered & (1 << l) != 0)
                    .all(|l| self.track[l].last.and_then(|ts| ts.lane).map(usize::from) == map.logical(l));
            consistent.then_some(map)
        })
    }

    fn switch_rate(&mut self, now: Instant) {
        let reverting = !self.speed_change;
        self.previous_rate = self.rate;
        self.rate = self.target_rate;
        self.speed_change = false;
        self.at_new_rate = !reverting;
        self.idle_to_rlock = 0;
        self.reset_lanes();
        self.enter(now, LtssmState::RecoveryRcvrLock);
    }

    /// Adopt the negotiated lanes; the deskew buffers start over at the new width.
    fn set_map(&mut self, map: LaneMap) {
        self.map = Some(map);
        self.reset_deskew();
    }

    /// At a column of ordered sets on every lane, line the deskew buffer up afresh if Recovery.RcvrLock has
    /// yet to ([`Port::realign_deskew`]).
    fn realign_deskew_in_recovery(&mut self) {
        if self.realign_deskew && self.state == LtssmState::RecoveryRcvrLock {
            self.realign_deskew = false;
            self.columns.realign();
        }
    }

    /// Empty the deskew buffers, at the link's width: they line its lanes up afresh on the next marker that
    /// comes on all of them (a SKP ordered set, or the start of the data stream).
    fn reset_deskew(&mut self) {
        self.columns.reset(self.map.map_or(LinkWidth::X1, |m| m.width));
    }

    fn reset_lanes(&mut self) {
        for physical in 0..MAX_LANES {
            let lane = self.map.and_then(|m| m.logical(physical)).unwrap_or(physical);
            self.tx[physical].reset(lane);
            self.rx[physical].reset(lane);
        }
        self.tx_os = None;
        self.tx_bytes_since_os = 0;
        self.tx_block_is_data = false;
        self.slots_since_skp = 0;
        self.reset_deskew();
        self.lane_symbols = [[0; MAX_LANES]; 2];
        self.lane_errors = [[0; MAX_LANES]; 2];
        self.rx_unit_len = 0;
        self.rx_held_len = 0;
        self.rx_units_since_os = 0;
    }

    /// Training failed. If the deskew buffer kept overflowing at 8b/10b without aligning (where training
    /// starts: lanes too far apart for it), now or when an idle state last timed out
    /// ([`Port::blamed_for_deskew`]), leave out the lanes on the side of its last overflow that
    /// logical lane 0 is not on (the late lanes or the early ones), for the next attempts. Each port
    /// decides for its own receiver, without the other, so both keep the same wire (logical lane numbers
    /// are agreed; physical ones differ on a reversed cable), and a link of at least that lane forms on
    /// the lanes both keep. Kept lanes may still lie too far apart: a later failure splits them again,
    /// down to one lane at the most. Whether lanes were left out.
    fn leave_out_unaligned_lanes(&mut self) -> bool {
        let leave_out = self.unaligned_lanes() | core::mem::take(&mut self.blamed_for_deskew);
        if leave_out == 0 {
            return false;
        }
        self.left_out_for_deskew |= leave_out;
        true
    }

    /// The physical lanes [`Port::leave_out_unaligned_lanes`] would leave out now.
    fn unaligned_lanes(&self) -> u32 {
        let late_logical = self.columns.late_at_overflow();
        let Some(map) = self
            .map
            .filter(|_| self.line_code() == LineCode::Code8b10b && late_logical != 0)
        else {
            return 0;
        };
        let physical = |logical: u32| {
            (0..map.width.lanes())
                .filter(|&l| logical >> l & 1 == 1)
                .filter_map(|l| map.physical(l))
                .fold(0u32, |mask, p| mask | 1 << p)
        };
        // A late lane with as many receive errors as symbols does not work (its wire broke, or it is
        // stuck): that is why the buffer overflowed, not skew. Blaming it would leave out the other side,
        // the lanes that work, if it is logical lane 0. Detect, or Configuration, leaves it out instead.
        let late = physical(late_logical);
        let broken = |p: usize| {
            let symbols = self.lane_symbols[0][p].saturating_add(self.lane_symbols[1][p]);
            let errors = self.lane_errors[0][p].saturating_add(self.lane_errors[1][p]);
            errors.saturating_mul(2) >= symbols
        };
        if (0..self.config.lanes).any(|p| late >> p & 1 == 1 && broken(p)) {
            return 0;
        }
        // The logical lanes on the other side of the split from lane 0, as physical lanes.
        let lane_0_late = late_logical & 1 == 1;
        let lanes_mask = (1u32 << map.width.lanes()) - 1;
        physical(if lane_0_late {
            !late_logical & lanes_mask
        } else {
            late_logical
        })
    }

    /// Back to Detect after a failure; after too many in a row, give up.
    fn restart_from_detect(&mut self, now: Instant) {
        if self.reached_l0 {
            self.push_event(PhyEvent::LinkDown { at: now });
        }
        self.reached_l0 = false;
        // A failure that leaves lanes out is progress, not a failed attempt: each leaves out at least one
        // more lane, so there are at most as many of them as lanes.
        if !self.leave_out_unaligned_lanes() {
            self.attempts += 1;
        }
        self.map = None;
        self.link_number = None;
        self.link_lanes = 0;
        self.rate = Rate::Gen1;
        self.speed_change = false;
        // Detect forgets a failed rate (a narrower link may carry it), but not before L0 at the old rate:
        // ports that parted while giving the rate up meet again only in Detect, and each retry would reach
        // L0 at 2.5 GT/s and try the rate again, for ever.
        if self.l0_since_rate_failed {
            self.failed_rate = None;
        }
        self.at_new_rate = false;
        self.idle_to_rlock = 0;
        self.partner_rates = DataRates::empty();
        for rx in &mut self.rx {
            rx.inverted = false;
        }
        self.reset_lanes();
        if self.attempts >= self.config.max_attempts {
            self.enter(now, LtssmState::Failed);
        } else {
            self.enter(now, LtssmState::DetectQuiet);
        }
    }

    fn enter(&mut self, now: Instant, to: LtssmState) {
        let from = self.state;
        let t = self.config.timing;
        self.state = to;
        // Granted for one stay in L0.
        self.low_power_expected = false;
        self.entered = now;
        self.first_answer = None;
        self.ts_sent = 0;
        self.ts_sent_after_rx = 0;
        self.heard_partner = false;
        self.latched = 0;
        self.latched_ts = None;
        self.idle_received = 0;
        self.heard_idle = false;
        self.idle_qualified = false;
        self.idle_sent_after_rx = 0;
        self.idle_after_cfg_timeout = false;
        self.track = [LaneTrack::default(); MAX_LANES];
        let timeout = match to {
            LtssmState::DetectQuiet => Some(t.detect_quiet),
            LtssmState::DetectActive => Some(t.detect_active),
            LtssmState::PollingActive => Some(t.polling_active),
            LtssmState::PollingConfiguration => Some(t.polling_configuration),
            LtssmState::ConfigLinkwidthStart | LtssmState::ConfigLinkwidthAccept => Some(t.config_linkwidth),
            LtssmState::ConfigLanenumWait
            | LtssmState::ConfigLanenumAccept
            | LtssmState::ConfigComplete
            | LtssmState::ConfigIdle => Some(t.config_short),
            LtssmState::RecoveryRcvrLock => Some(t.recovery_rcvr_lock),
            LtssmState::RecoveryRcvrCfg => Some(t.recovery_rcvr_cfg),
            LtssmState::RecoveryIdle => Some(t.recovery_idle),
            LtssmState::RecoverySpeed => Some(t.speed_change_idle),
            LtssmState::L0 | LtssmState::ElectricalIdle | LtssmState::Failed => None,
        };
        self.deadline = timeout.map(|d| now + d);
        match to {
            LtssmState::DetectQuiet => self.detected = 0,
            LtssmState::DetectActive => {
                self.detection_pending = true;
                self.counters.training_attempts += 1;
            }
            LtssmState::ConfigIdle | LtssmState::RecoveryIdle => {
                self.sds_pending = self.line_code() == LineCode::Code128b130b;
            }
            LtssmState::RecoveryRcvrLock => {
                self.eieos_pending = self.line_code() == LineCode::Code128b130b;
                self.ts_since_eieos = 0;
                self.eios_received = false;
                self.realign_deskew = true;
                if from == LtssmState::L0 {
                    self.push_event(PhyEvent::Retraining { at: now });
                }
            }
            LtssmState::RecoverySpeed => {
                self.eios_pending = true;
                // PCIe 4.2.6.4.3: electrical idle until the receiver lanes have entered it too, then 800 ns.
                // From Recovery.RcvrCfg the partner may still be sending (with a long lane delay, it has
                // yet to receive this port's last TS2s, and leaving at once dropped them); its EIOS may
                // also have come first. Following the partner out of L0, or leaving a rate on trial, the
                // 800 ns start now.
                self.partner_went_quiet = from != LtssmState::RecoveryRcvrCfg || self.eios_received;
                if !self.partner_went_quiet {
                    self.deadline = Some(now + t.speed_change_quiet_wait);
                }
                self.eios_received = false;
            }
            LtssmState::L0 => {
                self.attempts = 0;
                self.reached_l0 = true;
                self.l0_since_rate_failed = true;
                self.descrambler_out_of_step = false;
                self.errors_in_window = 0;
                self.window_start = now;
                self.eios_received = false;
                self.idle_to_rlock = 0;
                self.counters.link_ups += 1;
                if self.at_new_rate {
                    self.at_new_rate = false;
                    self.counters.speed_changes += 1;
                }
                self.first_l0.get_or_insert(now);
                if let Some(map) = self.map {
                    self.push_event(PhyEvent::LinkUp {
                        at: now,
                        width: map.width,
                        rate: self.rate,
                    });
                }
            }
            // The partner's EIOS, received in L0 before this port went to L1 (it followed the partner), says
            // the partner is quiet already; else its EIOS is still to come.
            LtssmState::ElectricalIdle => self.partner_went_quiet = core::mem::take(&mut self.eios_received),
            LtssmState::Failed => {
                self.detected = 0;
            }
            _ => {}
        }
        if from != to {
            self.push_event(PhyEvent::StateChanged { at: now, from, to });
        }
    }

    fn push_event(&mut self, event: PhyEvent) {
        if self.events.is_full() {
            self.events.pop_front();
            self.events_dropped = self.events_dropped.saturating_add(1);
        }
        let _ = self.events.push_back(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port_giving_up(rate: Rate) -> Port {
        let mut config = PortConfig::new(4, Role::Downstream);
        config.max_rate = Rate::Gen5;
        let mut port = Port::new(config, Instant::ZERO).unwrap();
        port.previous_rate = Rate::Gen1;
        port.rate = rate;
        port.at_new_rate = true;
        port.fall_back_to_previous_rate(Instant::ZERO);
        port
    }

    #[test]
    fn a_rate_given_up_is_kept_across_detect_until_the_link_is_in_l0_at_the_old_one() {
        let mut port = port_giving_up(Rate::Gen5);
        port.restart_from_detect(Instant::ZERO);
        assert_eq!(port.failed_rate, Some(Rate::Gen5));
        port.enter(Instant::ZERO, LtssmState::L0);
        assert_eq!(
            port.failed_rate,
            Some(Rate::Gen5),
            "L0 below the failed rate keeps it"
        );
        port.restart_from_detect(Instant::ZERO);
        assert_eq!(port.failed_rate, None);
    }
}
