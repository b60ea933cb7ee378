//! A link endpoint: the physical layer and the data link layer of one port, wired together.
//!
//! This is what firmware runs per port and what the simulator instantiates: slots of serial bits and time
//! in and out below, packets above. The physical layer's events (link up, retraining, link down) drive the
//! data link's, and the data link's retrain requests go to the physical layer. A physical link that drops
//! back to Detect and retrains (narrower, after a lane failed) is a long retrain to the data link: nothing
//! queued is lost; so is low power (L1), from which a wake brings the link back. Only a physical layer that
//! gives up (`Failed`) takes the data link down. The data link's low-power handshake
//! ([`DataLink::request_low_power`]) tells the physical layer when to go to L1, and a packet sent in L1
//! wakes it.

use heapless::Deque;
use link_phy::ltssm::{LtssmState, PhyEvent, Port, PortConfig};
use link_phy::serial::Slot;
use link_phy::time::Instant;

use crate::fec;
use crate::flit::{Flit, FLIT_LEN};
use crate::link::{DataLink, DlConfig, PowerRequest};

/// Physical-layer events kept for observers (state history), oldest dropped first.
const PHY_EVENTS: usize = 64;

/// One port: its physical layer and its data link.
#[derive(Clone, Debug)]
pub struct Endpoint<const REPLAY: usize = 64, const RX_FLITS: usize = 64> {
    /// The physical layer.
    pub phy: Port,
    /// The data link.
    pub dl: DataLink<REPLAY, RX_FLITS>,
    phy_events: Deque<PhyEvent, PHY_EVENTS>,
}

impl<const REPLAY: usize, const RX_FLITS: usize> Endpoint<REPLAY, RX_FLITS> {
    /// An endpoint at `now`. With FEC, the physical layer keeps its ordered sets between FEC blocks.
    pub fn new(mut phy: PortConfig, dl: DlConfig, now: Instant) -> Result<Self, link_phy::Error> {
        if dl.fec {
            phy.unit_alignment = (fec::BLOCK_LEN / FLIT_LEN) as u16;
        }
        Ok(Endpoint {
            phy: Port::new(phy, now)?,
            dl: DataLink::new(dl),
            phy_events: Deque::new(),
        })
    }

    /// The bits of the next slot, with the data link's units in it.
    pub fn poll_transmit(&mut self, now: Instant) -> Slot {
        self.poll_transmit_tapped(now, |_| {})
    }

    /// [`Endpoint::poll_transmit`], each flit the data link puts in the slot handed to `tap` as well (not a
    /// FEC block's check unit).
    #[inline]
    pub fn poll_transmit_tapped(&mut self, now: Instant, mut tap: impl FnMut(&[u8])) -> Slot {
        let dl = &mut self.dl;
        let slot = self.phy.poll_transmit(now, &mut |buf| {
            for unit in buf.chunks_mut(FLIT_LEN) {
                dl.poll_unit(now, unit);
                if !dl.sent_check_unit() {
                    tap(unit);
                }
            }
        });
        self.sync(now);
        slot
    }

    /// The bits that arrived during a slot.
    pub fn receive(&mut self, now: Instant, slot: &Slot) {
        self.receive_tapped(now, slot, |_, _| {})
    }

    /// [`Endpoint::receive`], each flit handed to `tap` as well as the data link frames it into packets
    /// (before it checks the CRC; with FEC, a block's flits as corrected, not its check unit), and
    /// whether the data link started its framing over before it ([`DataLink::receive_unit_tapped`]).
    #[inline]
    pub fn receive_tapped(&mut self, now: Instant, slot: &Slot, mut tap: impl FnMut(&Flit, bool)) {
        let dl = &mut self.dl;
        self.phy.receive(now, slot, &mut |data, index| {
            for (i, unit) in data.chunks(FLIT_LEN).enumerate() {
                dl.receive_unit_tapped(now, unit, index + i as u64, &mut tap);
            }
        });
        self.sync(now);
    }

    /// When the endpoint next needs attention.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.phy.poll_timeout(), self.dl.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Let timers fire.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.phy.handle_timeout(now);
        self.dl.handle_timeout(now);
        self.sync(now);
    }

    /// The next physical-layer event (state changes, link up and down), for observers.
    pub fn poll_phy_event(&mut self) -> Option<PhyEvent> {
        self.phy_events.pop_front()
    }

    /// Pass the physical layer's events to the data link, and its retrain requests back down.
    pub(crate) fn sync(&mut self, now: Instant) {
        while let Some(event) = self.phy.poll_event() {
            match event {
                PhyEvent::LinkUp { width, rate, .. } => self.dl.phy_up(now, width, rate),
                PhyEvent::Retraining { .. } => self.dl.phy_retraining(now),
                // A link that went back to Detect (a lane failed, Recovery could not lock) comes back
                // narrower: the data link holds everything, as through a retrain. Only a physical layer
                // that gave up takes the data link down.
                PhyEvent::LinkDown { .. } if self.phy.state() != LtssmState::Failed => {
                    self.dl.phy_retraining(now)
                }
                PhyEvent::LinkDown { .. } => self.dl.phy_down(),
                // Low power (L1) is the link out of L0 until a wake brings it back through Recovery: the
                // data link holds its timers there too, and replays what was in flight when it resumes.
                PhyEvent::StateChanged {
                    to: LtssmState::ElectricalIdle,
                    ..
                } => self.dl.phy_low_power(now),
                PhyEvent::StateChanged { .. } => {}
            }
            if self.phy_events.is_full() {
                self.phy_events.pop_front();
            }
            let _ = self.phy_events.push_back(event);
        }
        if self.dl.take_retrain_request() {
            self.phy.request_retrain();
        }
        match self.dl.take_power_request() {
            Some(PowerRequest::EnterL1) => self.phy.request_low_power(),
            Some(PowerRequest::Wake) => self.phy.wake(),
            None => {}
        }
        self.phy.expect_low_power(self.dl.grants_low_power());
    }
}
