//! The data link state machine: sequence numbers, the replay buffer, ACK/NAK, credits and FEC blocks.
//!
//! It is sans-IO. The physical layer below asks it for each 16-byte unit to send ([`DataLink::poll_unit`])
//! and hands it each unit received ([`DataLink::receive_unit`]); the layer above calls
//! [`DataLink::send`] and [`DataLink::recv`]. Time comes in with every call. A driver that moves units in
//! bursts (a simulator's timed channel) uses [`DataLink::poll_units`] and [`DataLink::receive_units`],
//! which do the same as the unit-by-unit calls, copying the flits of a packet as one run.
//!
//! Reliability follows PCI Express's data link layer: every packet gets a sequence number and waits in the
//! replay buffer until acknowledged; acknowledgements are cumulative, piggy-backed on every packet header
//! and coalesced into control flits when there is no reverse traffic; a CRC error or a gap sends a NAK,
//! which replays everything unacknowledged at once; a replay timer covers lost acknowledgements; and four
//! replays without progress ask the physical layer to retrain. Duplicates are acknowledged and discarded.
//! Acknowledgements and credit counters are written fresh into every header as it is (re)transmitted, so
//! link-local state is never replayed stale.

use heapless::Deque;
use link_phy::lanes::LinkWidth;
use link_phy::rate::Rate;
use link_phy::time::{Duration, Instant};

use crate::credit::{RxCredits, TxCredits};
use crate::error::DlError;
use crate::fec;
use crate::flit::{
    check_packet_crc_parts, is_ident, seal_packet, ControlFlit, ControlKind, Flit, IdentFlit, PacketHeader,
    FLIT_LEN, MAX_PACKET_FLITS, MAX_PACKET_LEN, MAX_PAYLOAD_FLITS,
};
use crate::framing::{self, Control, Framed, Framing};
use crate::ring::{copy_run, Ring, Slots};
use crate::seq::{Seq, SEQ_SPACE};
use crate::vc::{Vc, VC_COUNT};

/// Flits of each FEC block that carry flits (the sixteenth carries the check bytes).
const FEC_FLITS: usize = fec::DATA_LEN / FLIT_LEN;
/// Units in a FEC block.
const FEC_UNITS: u8 = (fec::BLOCK_LEN / FLIT_LEN) as u8;

/// How a data link endpoint behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DlConfig {
    /// Forward error correction: every 16 units are a FEC block (both ends must agree).
    pub fec: bool,
    /// Packets received before an acknowledgement is sent on its own (when no packet carries one); 0 is
    /// taken as 1 (it would owe one with nothing received, and send nothing but Updates).
    pub ack_coalesce: u16,
    /// Longest an acknowledgement waits for a packet to carry it.
    pub ack_delay: Duration,
    /// A control flit with acknowledgement and credits goes out at least this often; at least two unit
    /// times of the link's speed are taken (Updates due in every slot would leave no slot for a packet).
    pub update_interval: Duration,
    /// The replay timer, or `None` to derive it from the link's speed when it comes up.
    pub replay_timeout: Option<Duration>,
    /// Consecutive replays without progress before asking the physical layer to retrain (PCIe: 4).
    pub replays_before_retrain: u8,
}

impl Default for DlConfig {
    fn default() -> Self {
        DlConfig {
            fec: false,
            ack_coalesce: 8,
            ack_delay: Duration::from_ns(100),
            update_interval: Duration::from_us(1),
            replay_timeout: None,
            replays_before_retrain: 4,
        }
    }
}

/// Where the link is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DlState {
    /// The physical link is down.
    Down,
    /// Advertising receive-buffer sizes (InitFc1).
    InitFc1,
    /// Sizes exchanged; confirming (InitFc2).
    InitFc2,
    /// Packets flow.
    Active,
}

/// What the link tells the layer above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DlEvent {
    /// The link is active: `send` works.
    Up,
    /// The link went down; everything queued in either direction is gone.
    Down,
    /// The physical layer is retraining: timers hold, nothing is lost.
    Retraining,
    /// Retraining finished, or the link woke from low power (L1); unacknowledged packets are replayed.
    Resumed,
    /// The physical layer is in low power (L1): timers hold, nothing is lost, and a packet sent wakes
    /// the link.
    LowPower,
}

/// Where the link is in going to low power (L1) and back (`docs/spec.md` section 2.9). Only an active
/// link leaves `On`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PowerState {
    /// In use.
    On,
    /// This end asked for L1 ([`DataLink::request_low_power`]): it takes no new packet, and once
    /// everything it sent is acknowledged it sends PmEnterL1 until the partner's PmRequestAck comes.
    /// Then it asks its physical layer for L1.
    Requesting,
    /// The partner asked for L1: this end takes no new packet, and once everything it sent is
    /// acknowledged it sends PmRequestAck until the physical layer follows the partner to L1.
    Acknowledging,
    /// The physical layer is in L1: timers hold, and a packet sent wakes the link.
    Asleep,
}

/// What the data link asks of the physical layer for low power, read with
/// [`DataLink::take_power_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PowerRequest {
    /// The handshake is done on this end's request: go to L1 (send an electrical idle ordered set).
    EnterL1,
    /// A packet is waiting in L1: wake the link.
    Wake,
}

/// Counters a person debugging a link looks at first. They only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DlCounters {
    /// Packets accepted from the layer above.
    pub packets_sent: u64,
    /// Packet transmissions, first and replayed.
    pub packets_transmitted: u64,
    /// Packets delivered to the layer above's queues, in order, once each.
    pub packets_received: u64,
    /// Flits put on the wire (packet and control flits; idle ones excluded).
    pub flits_transmitted: u64,
    /// Packets and control flits whose CRC did not check.
    pub crc_errors: u64,
    /// Flits that did not parse (reserved kinds, bad lengths).
    pub malformed: u64,
    /// Flits thrown away while resynchronising after an error.
    pub resync_discards: u64,
    /// NAKs sent.
    pub naks_sent: u64,
    /// NAKs received.
    pub naks_received: u64,
    /// Replays (of everything unacknowledged).
    pub replays: u64,
    /// Replays caused by the replay timer.
    pub replay_timeouts: u64,
    /// Retrains asked of the physical layer after repeated replays.
    pub retrain_requests: u64,
    /// Received packets that were already delivered, discarded.
    pub duplicates: u64,
    /// Received packets beyond a gap, discarded (a NAK follows).
    pub out_of_sequence: u64,
    /// `send` calls refused for lack of credit.
    pub credit_stalls: u64,
    /// `send` calls refused because the replay buffer was full.
    pub replay_stalls: u64,
    /// Received packets the partner sent without credit (a protocol violation; not delivered, replayed).
    pub credit_overruns: u64,
    /// Credit reports received, per channel, that freed more flits than were sent on it (a protocol
    /// violation, `DlError::ImpossibleCredit`; refused, the credit is unchanged).
    pub credit_protocol_errors: u64,
    /// Control flits sent.
    pub control_sent: u64,
    /// Initialisation flits sent (identity and InitFc), counted in `flits_transmitted` as the others.
    pub init_sent: u64,
    /// Times the link went to low power (L1).
    pub low_power_entries: u64,
    /// FEC blocks decoded.
    pub fec_blocks: u64,
    /// Bytes corrected by FEC.
    pub fec_corrections: u64,
    /// FEC blocks that could not be corrected (the CRC still guards them).
    pub fec_uncorrectable: u64,
}

/// Counters of several links added up (a fabric's, say).
impl core::ops::AddAssign<&DlCounters> for DlCounters {
    fn add_assign(&mut self, other: &DlCounters) {
        // Taken apart whole, so that a counter added to the struct and not here does not compile.
        let DlCounters {
            packets_sent,
            packets_transmitted,
            packets_received,
            flits_transmitted,
            crc_errors,
            malformed,
            resync_discards,
            naks_sent,
            naks_received,
            replays,
            replay_timeouts,
            retrain_requests,
            duplicates,
            out_of_sequence,
            credit_stalls,
            replay_stalls,
            credit_overruns,
            credit_protocol_errors,
            control_sent,
            init_sent,
            low_power_entries,
            fec_blocks,
            fec_corrections,
            fec_uncorrectable,
        } = *other;
        self.packets_sent += packets_sent;
        self.packets_transmitted += packets_transmitted;
        self.packets_received += packets_received;
        self.flits_transmitted += flits_transmitted;
        self.crc_errors += crc_errors;
        self.malformed += malformed;
        self.resync_discards += resync_discards;
        self.naks_sent += naks_sent;
        self.naks_received += naks_received;
        self.replays += replays;
        self.replay_timeouts += replay_timeouts;
        self.retrain_requests += retrain_requests;
        self.duplicates += duplicates;
        self.out_of_sequence += out_of_sequence;
        self.credit_stalls += credit_stalls;
        self.replay_stalls += replay_stalls;
        self.credit_overruns += credit_overruns;
        self.credit_protocol_errors += credit_protocol_errors;
        self.control_sent += control_sent;
        self.init_sent += init_sent;
        self.low_power_entries += low_power_entries;
        self.fec_blocks += fec_blocks;
        self.fec_corrections += fec_corrections;
        self.fec_uncorrectable += fec_uncorrectable;
    }
}

/// A packet received, as the layer above sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// Its channel.
    pub vc: Vc,
    /// Its transaction-layer header.
    pub tl: u64,
    /// The flits after the header.
    pub payload: heapless::Vec<Flit, MAX_PAYLOAD_FLITS>,
}

impl Received {
    /// Nothing yet: a place for [`DataLink::recv_into`] to fill.
    pub const fn empty(vc: Vc) -> Received {
        Received {
            vc,
            tl: 0,
            payload: heapless::Vec::new(),
        }
    }
}

/// A packet waiting in the replay buffer, as its flits. The header flit holds the sequence number and
/// transaction-layer header; acknowledgement, credit return and CRC are written at each transmission.
#[derive(Clone, Copy, Debug, Default)]
struct Stored {
    len: u8,
    flits: [Flit; MAX_PACKET_FLITS],
}

/// The slots of a link's buffer (its replay buffer, a receive queue): in place without the standard
/// library (firmware); with it, a vector whose capacity is allocated when the link is made but whose slots
/// are written only as the buffer first reaches them, so that a buffer that never fills never touches most
/// of its memory (a simulated fabric has thousands of links, and writing all their buffers when building
/// it took seconds). Off the link, the buffers also leave its own state small: a fabric's links are then
/// packed a few to a page instead of one per 80 KB, and reaching one's state rarely misses the TLB.
#[cfg(feature = "std")]
#[derive(Clone, Debug)]
struct Buffer<T, const N: usize>(std::vec::Vec<T>);

#[cfg(feature = "std")]
impl<T, const N: usize> Buffer<T, N> {
    /// Bytes the slots take outside the buffer itself.
    const HEAP_BYTES: usize = N * core::mem::size_of::<T>();

    fn new() -> Self {
        Buffer(std::vec::Vec::with_capacity(N))
    }
}

/// The slots of a link's buffer, in place.
#[cfg(not(feature = "std"))]
#[derive(Clone, Debug)]
struct Buffer<T, const N: usize>([T; N]);

#[cfg(not(feature = "std"))]
impl<T: Copy + Default, const N: usize> Buffer<T, N> {
    /// Bytes the slots take outside the buffer itself: none, they are in it.
    const HEAP_BYTES: usize = 0;

    fn new() -> Self {
        Buffer([T::default(); N])
    }
}

impl<T: Copy, const N: usize> Slots<T> for Buffer<T, N> {
    fn written(&self) -> &[T] {
        self.0.written()
    }

    fn written_mut(&mut self) -> &mut [T] {
        self.0.written_mut()
    }

    fn write(&mut self, at: usize, items: &[T]) {
        self.0.write(at, items);
    }
}

/// What an active link with no packet in flight starts sending ([`DataLink::start_next`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// The control flit that was due, written.
    Control,
    /// The next packet from the replay buffer, loaded (none of its flits written yet).
    Packet,
    /// Nothing to send.
    Nothing,
}

/// One end of a data link, with a replay buffer of `REPLAY` packets and `RX_FLITS` flits of receive
/// buffer per virtual channel.
///
/// The fields are laid out in this order (`repr(C)`): the state every call looks at comes first and
/// the buffers last, so that asking a link whether it can send touches one or two cache lines, not
/// lines hundreds of kilobytes apart (a fabric asks thousands of links that, all the time).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct DataLink<const REPLAY: usize = 64, const RX_FLITS: usize = 64> {
    config: DlConfig,
    state: DlState,
    retraining: bool,
    replay_timeout: Duration,

    // Transmit.
    next_seq: Seq,
    acked: Seq,
    /// Index in `replay` of the next packet to transmit.
    cursor: usize,
    /// Packets at the front of `replay` that have been put on the wire at least once: the partner can
    /// acknowledge no more of them (after a replay, `cursor` alone no longer says how far that is).
    transmitted: usize,
    /// The packet in flight: its flits, of which `tx_pos` have gone, are sealed in place in its replay
    /// slot at this index, or in `tx_buf` (`None`) once an acknowledgement freed that slot mid-packet.
    tx_slot: Option<usize>,
    tx_flits: u8,
    tx_pos: u8,
    replay_deadline: Option<Instant>,
    /// Time left on the replay timer while retraining holds it.
    replay_held: Option<Duration>,
    replay_num: u8,
    tx_credits: TxCredits,
    nak_pending: bool,
    update_pending: bool,
    next_update: Instant,
    /// `config.update_interval`, or two unit times at the link's speed if that is longer.
    update_interval: Duration,
    fec_tx_unit: u8,

    // Receive.
    expected: Seq,
    nak_scheduled: bool,
    acks_owed: u16,
    ack_deadline: Option<Instant>,
    framer: Framing,
    /// The framing was started over (the physical layer came up, or the link was reset) since a
    /// received flit was last tapped: for a trace that frames the flits as this link does.
    rx_framing_restarted: bool,
    /// Flits of the packet being received so far (all in `rx_buf` but a payload read where it arrived).
    rx_len: usize,
    /// Packets in `rx_queues`, per channel (fewer than `RX_FLITS`, which fits 16 bits): kept with the small
    /// state, so that asking whether a channel has one does not touch its queue (kilobytes away, and on
    /// another page per channel).
    rx_packets: [u16; VC_COUNT],
    arrivals: u32,
    rx_credits: RxCredits,
    fec_rx_have: u8,
    /// The last initialisation flit received, parsed: the partner repeats it back to back.
    init_heard: Option<(Flit, ControlFlit)>,
    /// The last identity flit received, parsed: the partner repeats it too.
    ident_heard: Option<(Flit, IdentFlit)>,
    /// Who is at the other end, since its identity flit arrived.
    partner: Option<IdentFlit>,
    /// This end's identity, sent in its identity flits.
    ident: IdentFlit,
    /// Whether the partner's receive-buffer sizes have arrived (in InitFc1).
    sizes_heard: bool,
    /// Whether the next initialisation flit sent is the identity flit (they alternate).
    ident_turn: bool,

    counters: DlCounters,
    events: Deque<DlEvent, 8>,
    retrain_request: bool,
    power: PowerState,
    /// A PmEnterL1 from the partner that this end has not yet answered.
    power_ack_owed: bool,
    /// This end has sent PmRequestAck: the partner's electrical idle ordered set is L1.
    power_granted: bool,
    power_request: Option<PowerRequest>,

    // Buffers.
    /// The rest of a packet whose replay slot was freed while it was being sent (a replay of a packet
    /// whose first transmission got through).
    tx_buf: [Flit; MAX_PACKET_FLITS],
    /// The packet being received, header flit first; a payload that arrives whole in one run of units
    /// (`receive_units`) is read where it arrived instead, and only the header is here.
    rx_buf: [Flit; MAX_PACKET_FLITS],
    fec_tx: fec::Block,
    fec_rx: fec::Block,
    replay: Ring<Stored, REPLAY, Buffer<Stored, REPLAY>>,
    rx_queues: [Ring<Flit, RX_FLITS, Buffer<Flit, RX_FLITS>>; VC_COUNT],
}

impl<const REPLAY: usize, const RX_FLITS: usize> DataLink<REPLAY, RX_FLITS> {
    const VALID: () = {
        assert!(
            REPLAY > 0 && REPLAY < SEQ_SPACE as usize / 2,
            "replay buffer must hold 1 to 511 packets"
        );
        assert!(RX_FLITS > MAX_PAYLOAD_FLITS && RX_FLITS <= u16::MAX as usize / 2);
    };

    /// Bytes a link takes with its buffers full, wherever they are kept: in the link, or (with the
    /// standard library) on the heap beside it.
    pub const MEMORY_BYTES: usize = core::mem::size_of::<Self>()
        + Buffer::<Stored, REPLAY>::HEAP_BYTES
        + VC_COUNT * Buffer::<Flit, RX_FLITS>::HEAP_BYTES;

    /// A link endpoint, down until the physical layer comes up.
    pub fn new(config: DlConfig) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        let config = DlConfig {
            ack_coalesce: config.ack_coalesce.max(1),
            ..config
        };
        DataLink {
            config,
            state: DlState::Down,
            retraining: false,
            replay_timeout: config.replay_timeout.unwrap_or(Duration::from_us(10)),
            next_seq: Seq::new(0),
            acked: Seq::new(0).prev(),
            replay: Ring::with_items(Buffer::new()),
            cursor: 0,
            transmitted: 0,
            tx_slot: None,
            tx_buf: [[0; FLIT_LEN]; MAX_PACKET_FLITS],
            tx_flits: 0,
            tx_pos: 0,
            replay_deadline: None,
            replay_held: None,
            replay_num: 0,
            tx_credits: TxCredits::default(),
            nak_pending: false,
            update_pending: false,
            next_update: Instant::ZERO,
            update_interval: config.update_interval,
            fec_tx: [0; fec::BLOCK_LEN],
            fec_tx_unit: 0,
            expected: Seq::new(0),
            nak_scheduled: false,
            acks_owed: 0,
            ack_deadline: None,
            framer: Framing::Resync,
            rx_framing_restarted: false,
            rx_buf: [[0; FLIT_LEN]; MAX_PACKET_FLITS],
            rx_len: 0,
            rx_packets: [0; VC_COUNT],
            rx_queues: core::array::from_fn(|_| Ring::with_items(Buffer::new())),
            arrivals: 0,
            rx_credits: RxCredits::default(),
            fec_rx: [0; fec::BLOCK_LEN],
            fec_rx_have: 0,
            init_heard: None,
            ident_heard: None,
            partner: None,
            ident: IdentFlit::default(),
            sizes_heard: false,
            ident_turn: false,
            counters: DlCounters::default(),
            events: Deque::new(),
            retrain_request: false,
            power: PowerState::On,
            power_ack_owed: false,
            power_granted: false,
            power_request: None,
        }
    }

    // ----- state -----

    /// Where the link is.
    pub fn state(&self) -> DlState {
        self.state
    }

    /// Who this end says it is in its identity flits (node ID 0, port 0 until set).
    pub fn ident(&self) -> IdentFlit {
        self.ident
    }

    /// Set who this end says it is: its node's ID and its port number. Every identity flit sent from now
    /// on carries it (they are sent while the link initialises).
    pub fn set_ident(&mut self, ident: IdentFlit) {
        self.ident = ident;
    }

    /// Who is at the other end, as its identity flit said: known before the link becomes active, and
    /// forgotten when it goes down.
    pub fn partner(&self) -> Option<IdentFlit> {
        self.partner
    }

    /// Whether `send` can work (the link is active and not retraining).
    pub fn is_active(&self) -> bool {
        self.state == DlState::Active
    }

    /// Whether the physical layer is retraining.
    pub fn is_retraining(&self) -> bool {
        self.retraining
    }

    /// The configuration.
    pub fn config(&self) -> &DlConfig {
        &self.config
    }

    /// Counters.
    pub fn counters(&self) -> &DlCounters {
        &self.counters
    }

    /// Packets sent but not yet acknowledged.
    pub fn unacknowledged(&self) -> usize {
        self.replay.len()
    }

    /// Whether the replay buffer holds `REPLAY` packets, none of them acknowledged: `send` refuses until
    /// an acknowledgement frees one.
    pub fn replay_full(&self) -> bool {
        self.replay.is_full()
    }

    /// Flits of credit available on `vc` now.
    pub fn credit(&self, vc: Vc) -> u16 {
        self.tx_credits.available(vc)
    }

    /// The replay timer in use.
    pub fn replay_timeout(&self) -> Duration {
        self.replay_timeout
    }

    /// The next event for the layer above.
    pub fn poll_event(&mut self) -> Option<DlEvent> {
        self.events.pop_front()
    }

    /// Whether the link asks the physical layer to retrain (after repeated replays); reading clears it.
    pub fn take_retrain_request(&mut self) -> bool {
        core::mem::take(&mut self.retrain_request)
    }

    /// Where the link is in going to low power (L1) and back.
    pub fn power_state(&self) -> PowerState {
        self.power
    }

    /// What the link asks of the physical layer for low power, if anything; reading clears it.
    pub fn take_power_request(&mut self) -> Option<PowerRequest> {
        self.power_request.take()
    }

    /// Ask for low power (L1), as PCI Express's data link layer does with PM_Enter_L1: new packets are
    /// held back, and once everything sent is acknowledged and the partner has granted the request,
    /// [`DataLink::take_power_request`] gives [`PowerRequest::EnterL1`]. Nothing is lost: packets still
    /// unacknowledged when it is asked go first. Refused unless the link is active; asking again while
    /// the handshake is under way, or in L1, changes nothing.
    pub fn request_low_power(&mut self) -> Result<(), DlError> {
        if self.state != DlState::Active {
            return Err(DlError::LinkNotActive);
        }
        if self.power == PowerState::On {
            self.power = PowerState::Requesting;
            self.update_pending = true;
        }
        Ok(())
    }

    /// Whether this end has granted the partner's request for L1 and the link is not there yet: the
    /// physical layer is to take the partner's electrical idle ordered set for L1
    /// (`link_phy::ltssm::Port::expect_low_power`).
    pub fn grants_low_power(&self) -> bool {
        self.power_granted
    }

    /// The handshake is over (the link is in L1, back in use, or down).
    fn end_handshake(&mut self, to: PowerState) {
        self.power = to;
        self.power_ack_owed = false;
        self.power_granted = false;
        self.power_request = None;
    }

    fn event(&mut self, e: DlEvent) {
        if self.events.is_full() {
            self.events.pop_front();
        }
        let _ = self.events.push_back(e);
    }

    // ----- the physical layer's events -----

    /// The physical layer reached L0 at `width` lanes and `rate`: either the first time (start credit
    /// initialisation) or after a retrain (resume and replay).
    pub fn phy_up(&mut self, now: Instant, width: LinkWidth, rate: Rate) {
        if self.config.replay_timeout.is_none() {
            self.replay_timeout = derived_replay_timeout(width, rate);
        }
        self.update_interval = self
            .config
            .update_interval
            .max(unit_time(width, rate).saturating_mul(2));
        self.fec_tx_unit = 0;
        self.fec_rx_have = 0;
        self.framer.lose();
        self.rx_framing_restarted = true;
        self.rx_len = 0;
        self.tx_pos = self.tx_flits;
        if self.state == DlState::Down {
            self.enter_init();
            return;
        }
        if self.retraining {
            self.retraining = false;
            if self.power == PowerState::Asleep {
                self.power = PowerState::On;
            }
            self.replay_deadline = self.replay_held.take().map(|left| now + left);
            // Whatever was in flight when the link stopped may be lost: replay all of it, after a control
            // flit that lets the receiver find a packet boundary.
            self.cursor = 0;
            self.update_pending = true;
            self.event(DlEvent::Resumed);
        }
    }

    /// The physical layer left L0 for Recovery: hold the timers.
    pub fn phy_retraining(&mut self, now: Instant) {
        if self.hold(now) {
            self.event(DlEvent::Retraining);
        }
    }

    /// The physical layer went to low power (L1): hold the timers, as through a retrain, until it is
    /// back in L0. A handshake under way is over (the partner may have gone first).
    pub fn phy_low_power(&mut self, now: Instant) {
        if self.state != DlState::Active || self.power == PowerState::Asleep {
            return;
        }
        self.end_handshake(PowerState::Asleep);
        self.counters.low_power_entries += 1;
        // A retrain that was under way is over: the port left L0 (or Recovery) for L1.
        self.hold(now);
        self.event(DlEvent::LowPower);
        if !self.replay.is_empty() && self.transmitted < self.replay.len() {
            // Packets sent while the handshake ran cannot be (it refuses them), but a caller that put
            // the physical layer in L1 itself may have some waiting: they wake the link.
            self.power_request = Some(PowerRequest::Wake);
        }
    }

    /// Stop the timers while the physical layer is out of L0; false if they were already stopped (or
    /// the link is down).
    fn hold(&mut self, now: Instant) -> bool {
        if self.state == DlState::Down || self.retraining {
            return false;
        }
        self.retraining = true;
        self.replay_held = self.replay_deadline.take().map(|d| d.saturating_since(now));
        true
    }

    /// Hand back every packet not yet acknowledged, oldest first (sent or still waiting to be), with the
    /// sequence number it was sent under: for a link that has failed for good, so that the layer above
    /// can send them another way (fabric failover). The partner may have received some of them (those
    /// before its [`DataLink::expected`]), so whoever resends those must expect duplicates further on.
    /// Packets already received stay in the receive queues for [`DataLink::recv`]; call
    /// [`DataLink::phy_down`] afterwards.
    pub fn take_unacknowledged(&mut self, mut packet: impl FnMut(Seq, Received)) {
        self.release_replay_front(self.replay.len());
        while let Some(stored) = self.replay.pop_front() {
            // Stored headers were built by `send`, so they parse; a failure would be a bug here, and
            // the packet is skipped rather than invented.
            let Ok(header) = PacketHeader::parse(&stored.flits[0]) else {
                continue;
            };
            let payload = stored.flits[1..usize::from(stored.len)].iter().copied().collect();
            packet(
                header.seq,
                Received {
                    vc: header.vc,
                    tl: header.tl,
                    payload,
                },
            );
        }
        self.cursor = 0;
        self.transmitted = 0;
    }

    /// The sequence number of the next packet expected from the partner: every packet sent before it was
    /// received whole and taken into the receive queues.
    pub fn expected(&self) -> Seq {
        self.expected
    }

    /// The physical link is gone: everything queued in either direction is discarded.
    pub fn phy_down(&mut self) {
        if self.state == DlState::Down {
            return;
        }
        // In place: a new DataLink built on the stack would be as large as the buffers (hundreds of KB
        // with big replay buffers), and its mere possibility makes every caller probe that much stack.
        self.state = DlState::Down;
        self.retraining = false;
        self.next_seq = Seq::new(0);
        self.acked = Seq::new(0).prev();
        self.replay.clear();
        self.cursor = 0;
        self.transmitted = 0;
        self.tx_slot = None;
        self.tx_flits = 0;
        self.tx_pos = 0;
        self.replay_deadline = None;
        self.replay_held = None;
        self.replay_num = 0;
        self.tx_credits = TxCredits::default();
        self.nak_pending = false;
        self.update_pending = false;
        self.next_update = Instant::ZERO;
        // The FEC block positions (`fec_tx_unit`, `fec_rx_have`) are the physical layer's, counted from
        // its last ordered set: `phy_up` starts them over. Left as they are, a reset partner's InitFc1
        // (which takes an active link down while the physical layer carries on) does not move this
        // end's blocks off the positions where the partner reads them.
        self.expected = Seq::new(0);
        self.nak_scheduled = false;
        self.acks_owed = 0;
        self.ack_deadline = None;
        self.framer.lose();
        self.rx_framing_restarted = true;
        self.rx_len = 0;
        self.rx_packets = [0; VC_COUNT];
        self.rx_queues.iter_mut().for_each(Ring::clear);
        self.arrivals = 0;
        self.rx_credits = RxCredits::default();
        self.retrain_request = false;
        self.end_handshake(PowerState::On);
        self.partner = None;
        self.event(DlEvent::Down);
    }

    /// Start credit initialisation: nothing heard from the partner yet.
    fn enter_init(&mut self) {
        self.state = DlState::InitFc1;
        self.sizes_heard = false;
        self.ident_turn = false;
    }

    // ----- the layer above -----

    /// Send a packet on `vc`: `tl` is the 58-bit transaction-layer header, `payload` the flits after the
    /// header (at most 9). Refused, with nothing sent, without credit or replay-buffer room.
    pub fn send(&mut self, vc: Vc, tl: u64, payload: &[Flit]) -> Result<Seq, DlError> {
        if self.state != DlState::Active {
            return Err(DlError::LinkNotActive);
        }
        if self.power != PowerState::On {
            self.send_in_low_power()?;
        }
        if payload.len() > MAX_PAYLOAD_FLITS {
            return Err(DlError::PayloadTooLong { flits: payload.len() });
        }
        let header = PacketHeader {
            payload_flits: payload.len() as u8,
            vc,
            seq: self.next_seq,
            ack: Seq::new(0),
            credit_vc: Vc::Request,
            credit: 0,
            tl,
        };
        let mut head = [0u8; FLIT_LEN];
        header.emit(&mut head)?;
        if self.replay_full() {
            self.counters.replay_stalls += 1;
            return Err(DlError::ReplayFull);
        }
        let len = 1 + payload.len();
        let needed = len as u16;
        if !self.tx_credits.take(vc, needed) {
            self.counters.credit_stalls += 1;
            return Err(DlError::NoCredit {
                vc,
                needed,
                available: self.tx_credits.available(vc),
            });
        }
        // Written in place: room was checked above.
        self.replay.push_back_with(|stored| {
            stored.len = len as u8;
            stored.flits[0] = head;
            copy_run(&mut stored.flits[1..len], payload);
        });
        self.next_seq = self.next_seq.next();
        self.counters.packets_sent += 1;
        Ok(header.seq)
    }

    /// `send` out of `PowerState::On`: refused while the handshake holds packets back; in L1, the link
    /// is asked to wake (whether or not the packet then finds credit and room: it is on its way). Kept
    /// out of `send`, whose every call is the simulator's hot path.
    #[cold]
    #[inline(never)]
    fn send_in_low_power(&mut self) -> Result<(), DlError> {
        match self.power {
            PowerState::Requesting | PowerState::Acknowledging => Err(DlError::EnteringLowPower),
            PowerState::Asleep => {
                self.power_request = Some(PowerRequest::Wake);
                Ok(())
            }
            PowerState::On => Ok(()),
        }
    }

    /// Whether a packet of `payload_flits` could be sent on `vc` now.
    pub fn can_send(&self, vc: Vc, payload_flits: usize) -> bool {
        self.state == DlState::Active
            && matches!(self.power, PowerState::On | PowerState::Asleep)
            && !self.replay_full()
            && payload_flits <= MAX_PAYLOAD_FLITS
            && usize::from(self.tx_credits.available(vc)) > payload_flits
    }

    /// The oldest packet received on any channel, which frees its receive buffer (and so returns credit).
    pub fn recv(&mut self) -> Option<Received> {
        let mut packet = Received::empty(Vc::Posted);
        self.recv_into(&mut packet).then_some(packet)
    }

    /// [`DataLink::recv`] into `packet`, whose previous contents are replaced; returns whether there was
    /// one. A receiver that reads packets where they land keeps one `Received` and moves none.
    pub fn recv_into(&mut self, packet: &mut Received) -> bool {
        let has_packets = |vc: &Vc| self.rx_packets[vc.index()] > 0;
        let mut waiting = Vc::ALL.into_iter().filter(has_packets);
        let Some(first) = waiting.next() else {
            return false;
        };
        let vc = if waiting.next().is_none() {
            // One channel has packets (most traffic uses one): no arrival order to compare.
            first
        } else {
            Vc::ALL
                .into_iter()
                .filter(has_packets)
                .filter_map(|vc| self.rx_queues[vc.index()].front().map(|h| (arrival_of(h), vc)))
                .min_by_key(|&(arrival, _)| arrival.wrapping_sub(self.arrivals.wrapping_sub(u32::MAX / 2)))
                .map_or(first, |(_, vc)| vc)
        };
        self.recv_on_into(vc, packet)
    }

    /// The oldest packet received on `vc`.
    pub fn recv_on(&mut self, vc: Vc) -> Option<Received> {
        let mut packet = Received::empty(vc);
        self.recv_on_into(vc, &mut packet).then_some(packet)
    }

    /// [`DataLink::recv_on`] into `packet`, whose previous contents are replaced; returns whether there
    /// was one. A switch receives into the place the packet waits in, without moving it again.
    pub fn recv_on_into(&mut self, vc: Vc, packet: &mut Received) -> bool {
        if self.rx_packets[vc.index()] == 0 {
            return false;
        }
        let queue = &mut self.rx_queues[vc.index()];
        let Some(front) = queue.front() else {
            return false;
        };
        // Headers were parsed on arrival, so only the two fields needed here are read again.
        let (payload_flits, tl) = PacketHeader::payload_flits_and_tl(front);
        let flits = 1 + usize::from(payload_flits);
        let (first, second) = queue.front_run(flits);
        packet.vc = vc;
        packet.tl = tl;
        packet.payload.clear();
        let _ = packet.payload.extend_from_slice(first.get(1..).unwrap_or(&[]));
        let _ = packet.payload.extend_from_slice(second);
        queue.drop_front(flits);
        self.rx_packets[vc.index()] = self.rx_packets[vc.index()].saturating_sub(1);
        self.rx_credits.free(vc, flits as u16);
        true
    }

    /// Packets waiting in the receive queues.
    pub fn received_waiting(&self) -> bool {
        self.rx_packets != [0; VC_COUNT]
    }

    /// Whether a packet received on `vc` waits to be taken out ([`DataLink::recv_on`]).
    pub fn received_waiting_on(&self, vc: Vc) -> bool {
        self.rx_packets[vc.index()] != 0
    }

    // ----- timers -----

    /// When the link next needs [`DataLink::handle_timeout`] (it also checks its timers on every unit):
    /// a replay or acknowledgement deadline, or the next periodic control flit; in low power (L1), a wake
    /// that a packet sent there asks for.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.retraining {
            // A packet sent in L1 asks for a wake, due at once: any past instant says so.
            return (self.power_request == Some(PowerRequest::Wake)).then_some(Instant::ZERO);
        }
        let update = (self.state == DlState::Active).then_some(self.next_update);
        // Compared in registers: an array of the three, for `min`, was stored in halves and loaded
        // whole, and such a load waits for the stores to finish (two thirds of the simulator's time
        // deciding when a link next sends, on a 256-GPU fabric).
        earliest(earliest(self.replay_deadline, self.ack_deadline), update)
    }

    /// Whether a packet this end has taken (new or to replay) is waiting to go on the wire, or is partly
    /// on it: while none is, the wire carries only control flits and idle, whatever is held back above.
    pub fn has_packet_to_transmit(&self) -> bool {
        self.tx_pos < self.tx_flits || (self.cursor < self.replay.len() && !self.retraining)
    }

    /// Whether the link has something other than idle to put on the wire now: initialisation flits, a
    /// packet in flight or waiting, a NAK, an acknowledgement or credit report that is due, or the rest of
    /// a FEC block already started (its flits reach the partner only with the block whole). A driver
    /// that only moves units while this holds (and wakes at [`DataLink::poll_timeout`]) sends no idle.
    pub fn has_pending_output(&self, now: Instant) -> bool {
        match self.state {
            DlState::Down => false,
            DlState::InitFc1 | DlState::InitFc2 => true,
            DlState::Active => {
                self.has_packet_to_transmit()
                    || self.nak_pending
                    || self.update_pending
                    || self.acks_owed >= self.config.ack_coalesce
                    || self.ack_deadline.is_some_and(|d| now >= d)
                    || now >= self.next_update
                    || self
                        .rx_credits
                        .report_due(RxCredits::REPORT_BEFORE.min(RX_FLITS as u16 / 8))
                    // The rest of a FEC block already started (idle flits, then its check bytes): the
                    // partner reads none of the flits in a block before it has all of it.
                    || (self.config.fec && self.fec_tx_unit != 0)
            }
        }
    }

    /// The Update this end sends every `update_interval` when it has settled into doing nothing else,
    /// or `None` if it has not: it is active and not retraining, has nothing to send, replay or
    /// report (every credit and acknowledgement it owes went out in its last Update), and nothing
    /// received waiting or half received. Settled, it only repeats this flit, and a partner that has
    /// heard it once ([`DataLink::has_heard`]) takes nothing from the repeats: a simulator may let
    /// whole periods of them pass at once ([`DataLink::skip_idle_updates`]).
    pub fn idle_update(&self) -> Option<ControlFlit> {
        let settled = self.state == DlState::Active
            && self.power == PowerState::On
            && !self.retraining
            && !self.retrain_request
            && !self.config.fec
            && self.tx_pos >= self.tx_flits
            && !self.nak_pending
            && !self.update_pending
            && self.acks_owed == 0
            && self.ack_deadline.is_none()
            && self.replay.is_empty()
            && self.replay_deadline.is_none()
            && Vc::ALL.into_iter().all(|vc| self.rx_credits.unreported(vc) == 0)
            && self.rx_packets == [0; VC_COUNT]
            && matches!(self.framer, Framing::Header)
            && self.events.is_empty();
        settled.then(|| ControlFlit {
            kind: ControlKind::Update,
            ack: self.expected.prev(),
            credits: self.rx_credits.freed_all(),
        })
    }

    /// Whether `update`, from the partner, would change nothing here: it acknowledges what is already
    /// acknowledged and reports the credit already known.
    pub fn has_heard(&self, update: &ControlFlit) -> bool {
        self.state == DlState::Active
            && update.kind == ControlKind::Update
            && update.ack == self.acked
            && Vc::ALL
                .into_iter()
                .all(|vc| self.tx_credits.freed(vc) == update.credits[vc.index()])
    }

    /// Let `periods` update intervals pass at once on a link settled in idle ([`DataLink::idle_update`]),
    /// as if it had sent its Update in each: its timer and its counters move on as they would have.
    pub fn skip_idle_updates(&mut self, periods: u64) {
        // Saturating: more periods than time holds leave the timer at the end of time, not wrapped round
        // to the past.
        self.next_update += self.update_interval.saturating_mul(periods);
        self.counters.control_sent = self.counters.control_sent.saturating_add(periods);
        self.counters.flits_transmitted = self.counters.flits_transmitted.saturating_add(periods);
    }

    /// Let timers fire.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.retraining || self.state == DlState::Down {
            return;
        }
        if self.replay_deadline.is_some_and(|d| now >= d) {
            self.counters.replay_timeouts += 1;
            self.start_replay(now);
        }
        if self.ack_deadline.is_some_and(|d| now >= d) {
            self.update_pending = true;
            self.ack_deadline = None;
        }
        if self.state == DlState::Active && now >= self.next_update {
            self.update_pending = true;
            self.next_update = now + self.update_interval;
        }
    }

    fn start_replay(&mut self, now: Instant) {
        if self.replay.is_empty() {
            self.replay_deadline = None;
            return;
        }
        // A control flit first, so that a receiver that lost its packet framing finds it again.
        self.update_pending = true;
        if self.transmitted == 0 {
            // Nothing the partner can have missed has gone out: no replay, and none toward a retrain; the
            // timer starts again when a packet goes.
            self.replay_deadline = None;
            return;
        }
        self.counters.replays += 1;
        // Compared before counting, so that a limit of 255 cannot overflow the count.
        if self.replay_num >= self.config.replays_before_retrain {
            // Replaying is not getting through: the link itself may be bad.
            self.replay_num = 0;
            self.retrain_request = true;
            self.counters.retrain_requests += 1;
        } else {
            self.replay_num += 1;
        }
        self.cursor = 0;
        self.replay_deadline = Some(now + self.replay_timeout);
    }

    // ----- transmit -----

    /// The next unit (flit, or FEC check unit) to send. Called for every unit the physical layer sends.
    pub fn poll_unit(&mut self, now: Instant, out: &mut [u8]) {
        self.handle_timeout(now);
        let mut flit = [0u8; FLIT_LEN];
        if !self.config.fec {
            self.next_flit(now, &mut flit);
        } else if self.fec_tx_unit < FEC_FLITS as u8 {
            self.next_flit(now, &mut flit);
            let at = usize::from(self.fec_tx_unit) * FLIT_LEN;
            self.fec_tx[at..at + FLIT_LEN].copy_from_slice(&flit);
            self.fec_tx_unit += 1;
        } else {
            // The sixteenth unit: a reserved (zero) trailer and the check bytes of the block.
            self.fec_tx[FEC_FLITS * FLIT_LEN..].fill(0);
            fec::encode(&mut self.fec_tx);
            flit.copy_from_slice(&self.fec_tx[FEC_FLITS * FLIT_LEN..]);
            self.fec_tx_unit = 0;
        }
        let n = out.len().min(FLIT_LEN);
        out[..n].copy_from_slice(&flit[..n]);
    }

    /// Whether the last unit [`DataLink::poll_unit`] gave was a FEC block's check unit (the block's
    /// sixteenth, not a flit): for a watcher that records flits.
    pub fn sent_check_unit(&self) -> bool {
        self.config.fec && self.fec_tx_unit == 0
    }

    /// Let timers fire, then fill `out` with the units the link sends now, up to the first that would be
    /// idle (or the end of `out`), and return how many: the same units as [`DataLink::handle_timeout`]
    /// and then [`DataLink::poll_unit`] while [`DataLink::has_pending_output`] holds, but the flits of a
    /// packet already started are copied as one run, so a driver that moves units in bursts pays the
    /// per-unit checks about once per packet.
    pub fn poll_units(&mut self, now: Instant, out: &mut [Flit]) -> usize {
        self.handle_timeout(now);
        let mut n = 0;
        if self.config.fec {
            while n < out.len() && self.has_pending_output(now) {
                self.poll_unit(now, &mut out[n]);
                n += 1;
            }
            return n;
        }
        if matches!(self.state, DlState::InitFc1 | DlState::InitFc2) {
            // Initialisation repeats two flits in turn (nothing changes them until a unit arrives):
            // built once, copied into every slot.
            let turn = [self.init_flit(self.ident_turn), self.init_flit(!self.ident_turn)];
            for (slot, flit) in out.iter_mut().zip(turn.iter().cycle()) {
                *slot = *flit;
            }
            self.ident_turn ^= out.len() % 2 == 1;
            self.counters.flits_transmitted += out.len() as u64;
            self.counters.init_sent += out.len() as u64;
            return out.len();
        }
        while n < out.len() {
            if self.tx_pos < self.tx_flits {
                let rest = self.in_flight_rest();
                let run = rest.len().min(out.len() - n);
                copy_run(&mut out[n..n + run], &rest[..run]);
                // A run short of the packet's end can only be an inconsistency here: end the packet.
                self.tx_pos = if run == 0 {
                    self.tx_flits
                } else {
                    self.tx_pos + run as u8
                };
                self.counters.flits_transmitted += run as u64;
                n += run;
            } else if self.state == DlState::Active && !self.retraining {
                // Tried first, and asked whether there is pending output only if there is nothing to
                // send: whatever `start_next` sends is pending output (its checks are that test's, less
                // the timers, which `handle_timeout` has just run), and asking first repeated every check.
                // Nothing is in flight here (the branch above).
                match self.start_next(now, &mut out[n]) {
                    Start::Control => self.counters.flits_transmitted += 1,
                    // Its flits, header first, go out on the next turn of the loop, as one run.
                    Start::Packet => continue,
                    // A timer that is due with nothing to send (as `next_flit` leaves it): idle.
                    Start::Nothing if self.has_pending_output(now) => out[n] = [0; FLIT_LEN],
                    Start::Nothing => break,
                }
                n += 1;
            } else if self.has_pending_output(now) {
                out[n] = [0; FLIT_LEN];
                self.next_flit(now, &mut out[n]);
                n += 1;
            } else {
                break;
            }
        }
        n
    }

    fn next_flit(&mut self, now: Instant, flit: &mut Flit) {
        match self.state {
            DlState::Down => return,
            DlState::InitFc1 | DlState::InitFc2 => {
                *flit = self.init_flit(self.ident_turn);
                self.ident_turn = !self.ident_turn;
                self.counters.init_sent += 1;
            }
            DlState::Active => {
                if !self.next_active_flit(now, flit) {
                    return;
                }
            }
        }
        self.counters.flits_transmitted += 1;
    }

    /// The flit an initialising link sends: its identity flit, or the InitFc flit of its state with its
    /// receive-buffer sizes.
    fn init_flit(&self, ident: bool) -> Flit {
        if ident {
            return self.ident.emit();
        }
        let kind = if self.state == DlState::InitFc1 {
            ControlKind::InitFc1
        } else {
            ControlKind::InitFc2
        };
        ControlFlit {
            kind,
            ack: self.expected.prev(),
            credits: [RX_FLITS as u16; VC_COUNT],
        }
        .emit()
    }

    /// Write the next flit of an active link into `flit`; false (and `flit` untouched) for idle.
    fn next_active_flit(&mut self, now: Instant, flit: &mut Flit) -> bool {
        // A packet in flight goes first; then NAK, then acknowledgement and credits, then packets.
        if self.tx_pos < self.tx_flits {
            return self.next_in_flight(flit);
        }
        match self.start_next(now, flit) {
            Start::Control => true,
            Start::Packet => self.next_in_flight(flit),
            Start::Nothing => false,
        }
    }

    /// With no packet in flight: write the control flit that is due into `flit`, or start the next packet
    /// (its flits, header first, then go from its replay slot), or neither.
    #[inline(always)]
    fn start_next(&mut self, now: Instant, flit: &mut Flit) -> Start {
        let control_due = self.update_pending
            || self.acks_owed >= self.config.ack_coalesce
            || self
                .rx_credits
                .report_due(RxCredits::REPORT_BEFORE.min(RX_FLITS as u16 / 8));
        if self.nak_pending || control_due {
            let kind = if self.nak_pending {
                ControlKind::Nak
            } else if self.power == PowerState::On {
                ControlKind::Update
            } else {
                self.low_power_update_kind()
            };
            if self.nak_pending {
                self.counters.naks_sent += 1;
            }
            *flit = ControlFlit {
                kind,
                ack: self.expected.prev(),
                credits: self.rx_credits.report_all(),
            }
            .emit();
            self.nak_pending = false;
            self.update_pending = false;
            self.acks_owed = 0;
            self.ack_deadline = None;
            self.next_update = now + self.update_interval;
            self.counters.control_sent += 1;
            return Start::Control;
        }
        if self.cursor < self.replay.len() {
            self.load_packet(self.cursor);
            self.cursor += 1;
            self.counters.packets_transmitted += 1;
            if self.replay_deadline.is_none() {
                self.replay_deadline = Some(now + self.replay_timeout);
            }
            return Start::Packet;
        }
        Start::Nothing
    }

    /// The kind of the Update to send out of `PowerState::On`: in the low-power handshake, once
    /// everything sent is acknowledged, a PmRequestAck (owed for a PmEnterL1 received, or repeated while
    /// acknowledging) or a PmEnterL1 (repeated while requesting). Each has the Update's acknowledgement
    /// and credits.
    #[cold]
    #[inline(never)]
    fn low_power_update_kind(&mut self) -> ControlKind {
        if !self.replay.is_empty() {
            return ControlKind::Update;
        }
        if core::mem::take(&mut self.power_ack_owed) || self.power == PowerState::Acknowledging {
            self.power_granted = true;
            return ControlKind::PmRequestAck;
        }
        if self.power == PowerState::Requesting {
            return ControlKind::PmEnterL1;
        }
        ControlKind::Update
    }

    /// Write the next flit of the packet in flight into `flit`; false (and the packet over) if none.
    fn next_in_flight(&mut self, flit: &mut Flit) -> bool {
        let Some(next) = self.in_flight_rest().first() else {
            self.tx_pos = self.tx_flits;
            return false;
        };
        *flit = *next;
        self.tx_pos += 1;
        true
    }

    /// Start sending the packet at `index` of the replay buffer: write a fresh acknowledgement and
    /// credit return into its header and seal it with its CRC, where it is (the stored header keeps
    /// only what `send` wrote; these fields are rewritten at every transmission).
    fn load_packet(&mut self, index: usize) {
        let Some(stored) = self.replay.get_mut(index) else {
            return;
        };
        let len = usize::from(stored.len);
        let (credit_vc, credit) = self.rx_credits.report_one();
        PacketHeader::restamp(&mut stored.flits[0], self.expected.prev(), credit_vc, credit);
        seal_packet(&mut stored.flits.as_flattened_mut()[..len * FLIT_LEN]);
        self.tx_slot = Some(index);
        self.transmitted = self.transmitted.max(index + 1);
        self.tx_flits = stored.len;
        self.tx_pos = 0;
        self.acks_owed = 0;
        self.ack_deadline = None;
    }

    /// The flits of the packet in flight not yet sent.
    fn in_flight_rest(&self) -> &[Flit] {
        let flits = match self.tx_slot {
            Some(index) => self.replay.get(index).map_or(&[][..], |stored| &stored.flits[..]),
            None => &self.tx_buf[..],
        };
        flits
            .get(usize::from(self.tx_pos)..usize::from(self.tx_flits))
            .unwrap_or(&[])
    }

    /// The first `popped` packets of the replay buffer are about to leave it: a packet in flight from
    /// one of their slots finishes from a copy (the slot may be reused at once), and a later one's index
    /// moves down with the rest.
    fn release_replay_front(&mut self, popped: usize) {
        match self.tx_slot {
            Some(index) if index >= popped => self.tx_slot = Some(index - popped),
            Some(index) => {
                if let Some(stored) = self.replay.get(index) {
                    self.tx_buf = stored.flits;
                }
                self.tx_slot = None;
            }
            None => {}
        }
    }

    // ----- receive -----

    /// Whether the link started its framing over (it came up, or was reset) since this was last asked or
    /// a received flit last tapped ([`DataLink::receive_unit_tapped`]): for a trace of the units it takes
    /// by [`DataLink::receive_units`], which has no tap.
    pub fn take_framing_restarted(&mut self) -> bool {
        core::mem::take(&mut self.rx_framing_restarted)
    }

    /// A unit received, with its position counted from the physical layer's last ordered set.
    pub fn receive_unit(&mut self, now: Instant, unit: &[u8], index: u64) {
        self.receive_unit_tapped(now, unit, index, &mut |_, _| {});
    }

    /// [`DataLink::receive_unit`], each flit handed to `tap` as the link frames it into packets: with FEC,
    /// a block's flits once it is whole and corrected, without its check unit; none while the link is down.
    /// `tap`'s second argument says that the link started its framing over before this flit (it came up
    /// or was reset: it looks for a control flit that checks, as after an error). For a trace of what the
    /// data link took.
    pub fn receive_unit_tapped(
        &mut self,
        now: Instant,
        unit: &[u8],
        index: u64,
        tap: &mut impl FnMut(&Flit, bool),
    ) {
        let Ok(unit) = <&Flit>::try_from(unit) else {
            self.counters.malformed += 1;
            return;
        };
        if self.state == DlState::Down {
            return;
        }
        if !self.config.fec {
            tap(unit, self.take_framing_restarted());
            self.receive_flit(now, unit);
            return;
        }
        let position = (index % u64::from(FEC_UNITS)) as u8;
        if position != self.fec_rx_have {
            // A block's units must arrive in order from its first: wait for the next block.
            self.fec_rx_have = 0;
            if position != 0 {
                return;
            }
        }
        let at = usize::from(position) * FLIT_LEN;
        self.fec_rx[at..at + FLIT_LEN].copy_from_slice(unit);
        self.fec_rx_have += 1;
        if self.fec_rx_have < FEC_UNITS {
            return;
        }
        self.fec_rx_have = 0;
        self.counters.fec_blocks += 1;
        match fec::decode(&mut self.fec_rx) {
            Ok(c) => self.counters.fec_corrections += u64::from(c.symbols),
            // The block is left as received; the CRC will catch what is wrong in it.
            Err(_) => self.counters.fec_uncorrectable += 1,
        }
        let block = self.fec_rx;
        for chunk in block[..FEC_FLITS * FLIT_LEN].chunks_exact(FLIT_LEN) {
            let mut flit = [0u8; FLIT_LEN];
            flit.copy_from_slice(chunk);
            tap(&flit, self.take_framing_restarted());
            self.receive_flit(now, &flit);
        }
    }

    /// Units received in a row, the first at position `index` (as [`DataLink::receive_unit`]): the same
    /// as receiving them one by one, but the rest of a packet already started is taken as one run.
    pub fn receive_units(&mut self, now: Instant, units: &[Flit], index: u64) {
        if self.config.fec || self.state == DlState::Down {
            // Wrapping: only the position modulo 16 counts, and 2^64 is a whole number of blocks.
            for (i, unit) in units.iter().enumerate() {
                self.receive_unit(now, unit, index.wrapping_add(i as u64));
            }
            return;
        }
        let mut rest = units;
        while let Some((first, tail)) = rest.split_first() {
            let Framing::Packet { need, header } = self.framer else {
                // A packet's header flit, framed here as `receive_flit` does and, with its payload all in
                // this burst, completed at once: its parsed header does not go through the framer.
                // (A flit that parses as a header is of the packet kind.)
                if let (Framing::Header, Ok(header)) = (self.framer, PacketHeader::parse(first)) {
                    self.rx_buf[0] = *first;
                    self.rx_len = 1;
                    let need = usize::from(header.payload_flits);
                    if need == 0 {
                        self.packet_complete(now, header, None);
                        rest = tail;
                    } else if let Some((payload, after)) = tail.split_at_checked(need) {
                        self.rx_len += need;
                        self.packet_complete(now, header, Some(payload));
                        rest = after;
                    } else {
                        self.framer = Framing::Packet {
                            need: header.payload_flits,
                            header,
                        };
                        rest = tail;
                    }
                    continue;
                }
                self.receive_flit(now, first);
                rest = tail;
                continue;
            };
            let run = usize::from(need).min(rest.len());
            if self.rx_len == 1 && run == usize::from(need) {
                // The whole payload is in this burst: checked and queued from here, not copied first.
                let (payload, after) = rest.split_at(run);
                self.rx_len += run;
                self.framer = Framing::Header;
                self.packet_complete(now, header, Some(payload));
                rest = after;
                continue;
            }
            let Some(slots) = self.rx_buf.get_mut(self.rx_len..self.rx_len + run) else {
                // Cannot happen (a header announces at most MAX_PAYLOAD_FLITS): the careful way then.
                self.receive_flit(now, first);
                rest = tail;
                continue;
            };
            slots.copy_from_slice(&rest[..run]);
            self.rx_len += run;
            rest = &rest[run..];
            if run == usize::from(need) {
                self.framer = Framing::Header;
                self.packet_complete(now, header, None);
            } else {
                self.framer = Framing::Packet {
                    need: need - run as u8,
                    header,
                };
            }
        }
    }

    /// [`framing::parse_control`], which depends on the bytes alone: an initialisation or identity flit
    /// the partner repeats is parsed (and its CRC checked) once, and the same bytes again give the same
    /// flit.
    fn parse_control(
        init_heard: &mut Option<(Flit, ControlFlit)>,
        ident_heard: &mut Option<(Flit, IdentFlit)>,
        flit: &Flit,
    ) -> Result<Control, DlError> {
        let heard = if is_ident(flit) {
            (ident_heard.as_ref())
                .filter(|(bytes, _)| bytes == flit)
                .map(|(_, i)| Control::Ident(*i))
        } else {
            (init_heard.as_ref())
                .filter(|(bytes, _)| bytes == flit)
                .map(|(_, c)| Control::Flow(*c))
        };
        if let Some(control) = heard {
            return Ok(control);
        }
        let control = framing::parse_control(flit)?;
        match control {
            Control::Ident(ident) => *ident_heard = Some((*flit, ident)),
            Control::Flow(c) if matches!(c.kind, ControlKind::InitFc1 | ControlKind::InitFc2) => {
                *init_heard = Some((*flit, c));
            }
            Control::Flow(_) => {}
        }
        Ok(control)
    }

    fn receive_flit(&mut self, now: Instant, flit: &Flit) {
        let (init_heard, ident_heard) = (&mut self.init_heard, &mut self.ident_heard);
        let framed = (self.framer).push_with(flit, |flit| Self::parse_control(init_heard, ident_heard, flit));
        match framed {
            Framed::Idle => {}
            Framed::Discarded => self.counters.resync_discards += 1,
            Framed::Control(control) => self.control(now, control),
            Framed::Lost(error) => {
                if matches!(error, DlError::CrcMismatch { .. }) {
                    self.counters.crc_errors += 1;
                } else {
                    self.counters.malformed += 1;
                }
                self.schedule_nak();
            }
            Framed::Header(header) => {
                self.rx_buf[0] = *flit;
                self.rx_len = 1;
                if header.payload_flits == 0 {
                    self.packet_complete(now, header, None);
                }
            }
            Framed::Payload | Framed::Last(_) => {
                if let Some(slot) = self.rx_buf.get_mut(self.rx_len) {
                    *slot = *flit;
                }
                self.rx_len += 1;
                if let Framed::Last(header) = framed {
                    self.packet_complete(now, header, None);
                }
            }
        }
    }

    /// An error left the receiver unsure where the next packet starts: NAK (once) and resynchronise.
    fn lose_framing(&mut self) {
        self.framer.lose();
        self.schedule_nak();
    }

    fn schedule_nak(&mut self) {
        if !self.nak_scheduled && self.state == DlState::Active {
            self.nak_scheduled = true;
            self.nak_pending = true;
        }
    }

    /// The packet in `rx_buf` is complete; `header` is its header flit, parsed. Its payload flits are
    /// `arrived`, where they arrived, if given, and the rest of `rx_buf` if not.
    fn packet_complete(&mut self, now: Instant, header: PacketHeader, arrived: Option<&[Flit]>) {
        let len = self.rx_len;
        fn payload<'a>(arrived: Option<&'a [Flit]>, rx_buf: &'a [Flit], len: usize) -> &'a [Flit] {
            arrived.unwrap_or_else(|| rx_buf.get(1..len).unwrap_or(&[]))
        }
        let flits = payload(arrived, &self.rx_buf, len).as_flattened();
        if let Err(e) = check_packet_crc_parts(&self.rx_buf[0], flits) {
            if let DlError::CrcMismatch { .. } = e {
                self.counters.crc_errors += 1;
            }
            // A corrupted length would have framed the wrong flits: find a boundary again.
            self.lose_framing();
            return;
        }
        let mut head = self.rx_buf[0];
        match self.state {
            // The partner sends packets only once Active, which it becomes on our InitFc2 or what
            // follows it: not sent in this session, this is one from before this end was reset. Taking
            // it would deliver it into the new session (a second time, perhaps) and return credit for
            // it that the partner never consumed; its acknowledgement and credit fields are stale too.
            DlState::InitFc1 | DlState::Down => return,
            DlState::InitFc2 => self.become_active(now),
            DlState::Active => {}
        }
        self.acknowledged(now, header.ack);
        let report = self.tx_credits.report_low(header.credit_vc, header.credit);
        self.count_credit_error(report);
        if header.seq == self.expected {
            let queue = &mut self.rx_queues[header.vc.index()];
            if queue.room() < len {
                // The partner sent without credit. Not delivering it keeps exactly-once intact: it is
                // replayed when the partner's timer fires.
                self.counters.credit_overruns += 1;
                return;
            }
            // The CRC field is no longer needed: it keeps the arrival order across channels instead.
            head[12..].copy_from_slice(&self.arrivals.to_le_bytes());
            self.arrivals = self.arrivals.wrapping_add(1);
            // Room was checked above.
            queue.push_back_and_extend(head, payload(arrived, &self.rx_buf, len));
            self.rx_packets[header.vc.index()] += 1;
            self.expected = self.expected.next();
            self.nak_scheduled = false;
            self.counters.packets_received += 1;
            self.acks_owed += 1;
            if self.ack_deadline.is_none() {
                self.ack_deadline = Some(now + self.config.ack_delay);
            }
        } else if self.expected.is_after(header.seq) {
            // Already delivered (its acknowledgement was lost): acknowledge again, discard.
            self.counters.duplicates += 1;
            self.update_pending = true;
        } else {
            // A packet went missing before this one.
            self.counters.out_of_sequence += 1;
            self.schedule_nak();
        }
    }

    fn control(&mut self, now: Instant, c: Control) {
        match c {
            Control::Flow(c) => self.flow_control(now, c),
            Control::Ident(ident) => {
                // Absolute: the latest wins (a partner that was reset may be another port or node).
                self.partner = Some(ident);
                if self.state == DlState::InitFc1 {
                    self.leave_init_fc1(now, false);
                }
            }
        }
    }

    /// InitFc1 ends once both the partner's buffer sizes and its identity have arrived. If the flit that
    /// completes the pair is an InitFc2 (`confirmed`: the partner already has ours), the link is active
    /// at once.
    fn leave_init_fc1(&mut self, now: Instant, confirmed: bool) {
        if !self.sizes_heard || self.partner.is_none() {
            return;
        }
        self.state = DlState::InitFc2;
        if confirmed {
            self.become_active(now);
        }
    }

    fn flow_control(&mut self, now: Instant, c: ControlFlit) {
        match c.kind {
            ControlKind::InitFc1 if self.state == DlState::Active => {
                // The partner started over (it was reset): so must we, or sequence numbers and credits
                // would disagree forever.
                self.phy_down();
                self.enter_init();
                self.flow_control(now, c);
            }
            ControlKind::InitFc1 | ControlKind::InitFc2 => {
                if self.state == DlState::InitFc1 {
                    self.tx_credits = TxCredits::init(c.credits);
                    self.sizes_heard = true;
                    self.leave_init_fc1(now, c.kind == ControlKind::InitFc2);
                } else if c.kind == ControlKind::InitFc2 && self.state == DlState::InitFc2 {
                    self.become_active(now);
                }
            }
            ControlKind::Update | ControlKind::Nak | ControlKind::PmEnterL1 | ControlKind::PmRequestAck => {
                if self.state == DlState::InitFc2 {
                    self.become_active(now);
                }
                if self.state != DlState::Active {
                    return;
                }
                self.acknowledged(now, c.ack);
                for vc in Vc::ALL {
                    let report = self.tx_credits.report(vc, c.credits[vc.index()]);
                    self.count_credit_error(report);
                }
                match c.kind {
                    ControlKind::Nak => {
                        self.counters.naks_received += 1;
                        self.start_replay(now);
                    }
                    ControlKind::PmEnterL1 => self.partner_asks_low_power(),
                    // The partner answers only a PmEnterL1, which goes once everything sent is
                    // acknowledged: an answer while packets are still out was forged (it passed the
                    // CRC), and taking the link to L1 would leave them there until the next send.
                    ControlKind::PmRequestAck
                        if self.power == PowerState::Requesting && self.replay.is_empty() =>
                    {
                        self.power_request = Some(PowerRequest::EnterL1);
                    }
                    // A partner that asked for L1 sends PmEnterL1 in place of every Update until the
                    // link is there: a plain Update means it is not asking (a forged PmEnterL1 passed
                    // the CRC), and holding packets back for it would hold them for ever.
                    ControlKind::Update if self.power == PowerState::Acknowledging => {
                        self.end_handshake(PowerState::On);
                    }
                    _ => {}
                }
            }
        }
    }

    /// The partner asked for L1 (it has everything it sent acknowledged): hold new packets back, and
    /// answer once everything this end sent is acknowledged too. An end that asked as well answers and
    /// goes on asking: each goes to L1 on the other's answer.
    fn partner_asks_low_power(&mut self) {
        match self.power {
            PowerState::On => self.power = PowerState::Acknowledging,
            PowerState::Requesting | PowerState::Acknowledging => {}
            // Repeats that crossed this end's electrical idle ordered set.
            PowerState::Asleep => return,
        }
        self.power_ack_owed = true;
        self.handshake_flit_once_acknowledged();
    }

    /// In the low-power handshake (a request received, or an acknowledgement): once nothing is left
    /// unacknowledged, the PmEnterL1 or PmRequestAck that waited for it goes. Kept out of `acknowledged`,
    /// the hot path.
    #[cold]
    #[inline(never)]
    fn handshake_flit_once_acknowledged(&mut self) {
        if self.replay.is_empty() {
            self.update_pending = true;
        }
    }

    fn become_active(&mut self, now: Instant) {
        self.state = DlState::Active;
        self.next_update = now;
        self.event(DlEvent::Up);
    }

    /// Count a credit report the sender's credits refused (`DlError::ImpossibleCredit`): a protocol
    /// violation that changes nothing else.
    fn count_credit_error(&mut self, report: Result<(), DlError>) {
        if report.is_err() {
            self.counters.credit_protocol_errors += 1;
        }
    }

    /// The partner has received everything up to and including `ack`.
    #[inline]
    fn acknowledged(&mut self, now: Instant, ack: Seq) {
        let progress = usize::from(ack.distance_from(self.acked));
        if progress == 0 || progress > self.transmitted {
            // Nothing new, stale (older than what we know), or beyond every packet transmitted: the
            // partner cannot have received those, and dropping them would lose them unsent. Most
            // packets and updates repeat the last acknowledgement: decided in the caller, without a call.
            return;
        }
        self.acknowledged_progress(now, ack, progress);
    }

    /// [`DataLink::acknowledged`] of `progress` more packets.
    #[inline(never)]
    fn acknowledged_progress(&mut self, now: Instant, ack: Seq, progress: usize) {
        self.release_replay_front(progress);
        self.replay.drop_front(progress);
        self.cursor = self.cursor.saturating_sub(progress);
        self.transmitted -= progress;
        self.acked = ack;
        self.replay_num = 0;
        if self.power != PowerState::On {
            self.handshake_flit_once_acknowledged();
        }
        // The timer runs while a packet the partner has not acknowledged is out (it starts again when
        // one that is waiting goes).
        self.replay_deadline = if self.transmitted == 0 {
            None
        } else {
            Some(now + self.replay_timeout)
        };
    }
}

/// The earlier of two optional times (either one if the other is absent).
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn arrival_of(header: &Flit) -> u32 {
    u32::from_le_bytes([header[12], header[13], header[14], header[15]])
}

/// A replay timer long enough for a round trip and the longest packets in both directions: 2 us plus the
/// time of 20 longest packets at the link's speed.
pub fn derived_replay_timeout(width: LinkWidth, rate: Rate) -> Duration {
    let unit = unit_time(width, rate);
    Duration::from_us(2) + unit.saturating_mul(20 * MAX_PACKET_LEN as u64 / FLIT_LEN as u64)
}

/// Time to send one 16-byte unit over `width` lanes at `rate`.
pub fn unit_time(width: LinkWidth, rate: Rate) -> Duration {
    let lanes = width.lanes() as u64;
    let bytes_per_slot = rate.slot_bytes() as u64 * lanes;
    Duration::from_ps(rate.slot_time().as_ps() * FLIT_LEN as u64 / bytes_per_slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the standard library a link's buffers are beside it on the heap, so that a fabric packs its
    /// links' states densely; MEMORY_BYTES still counts them whole.
    #[test]
    fn buffers_are_off_the_link_with_std() {
        type Big = DataLink<511, 4096>;
        let own = core::mem::size_of::<Big>();
        std::println!(
            "DataLink<511, 4096>: {own} bytes, {} with its buffers",
            Big::MEMORY_BYTES
        );
        assert!(own < 2048, "{own}");
        assert!(Big::MEMORY_BYTES >= own + 511 * MAX_PACKET_FLITS * FLIT_LEN + 4 * 4096 * FLIT_LEN);
    }

    #[test]
    fn earliest_is_the_least_time_present() {
        let times = [None, Some(Instant(0)), Some(Instant(5)), Some(Instant(9))];
        for a in times {
            for b in times {
                for c in times {
                    let expected = [a, b, c].into_iter().flatten().min();
                    assert_eq!(earliest(earliest(a, b), c), expected, "{a:?} {b:?} {c:?}");
                }
            }
        }
    }
}
