//! Ordering rules, enforced where the transaction layer queues packets for the data link.
//!
//! The data link delivers each virtual channel in order, and the channels are flow controlled apart, so
//! a packet on one channel can overtake an older one on another that is waiting for credit. These are the
//! rules (spec section 3.6; they follow PCI Express's ordering table, strict where PCIe allows relaxation):
//!
//! 1. Packets of one channel leave in the order they were queued: posted writes stay in order, and so do
//!    requests, completions and snoops.
//! 2. A non-posted request does not pass an earlier posted write (or message) to the same destination,
//!    so a read sees the writes queued before it.
//! 3. A completion does not pass an earlier posted write to the same destination (the producer-consumer
//!    pattern: data written, then a read of the flag answered, must arrive in that order).
//! 4. A posted write may pass requests and completions that wait for credit: posted traffic must always be
//!    able to progress, or a request waiting on its completer could deadlock the fabric.
//!
//! Among the packets the rules and the link's credit allow, the oldest goes first. On the receiving side
//! the data link hands packets up in arrival order across channels, and the receiver acts on them in that
//! order, so what the sender ordered stays ordered on a link. A switch that queues channels apart must keep
//! rules 1-3 per output too.

use heapless::Deque;
use link_dl::flit::Flit;
use link_dl::vc::VC_COUNT;
use link_dl::{DataLink, DlError, Vc};

use crate::error::TlError;
use crate::packet::Packet;

/// What the ordering queue needs of the data link below: whether a packet fits now, and to send it.
pub trait LinkTx {
    /// Whether a packet of `payload_flits` after its header could be sent on `vc` now.
    fn can_send(&self, vc: Vc, payload_flits: usize) -> bool;
    /// Send it (refused without credit or replay room, with nothing sent).
    fn send(&mut self, vc: Vc, tl: u64, payload: &[Flit]) -> Result<(), DlError>;
}

impl<const REPLAY: usize, const RX_FLITS: usize> LinkTx for DataLink<REPLAY, RX_FLITS> {
    fn can_send(&self, vc: Vc, payload_flits: usize) -> bool {
        DataLink::can_send(self, vc, payload_flits)
    }

    fn send(&mut self, vc: Vc, tl: u64, payload: &[Flit]) -> Result<(), DlError> {
        DataLink::send(self, vc, tl, payload).map(|_| ())
    }
}

/// Counters of the ordering queue. They only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EgressCounters {
    /// Packets queued.
    pub queued: u64,
    /// Packets handed to the data link.
    pub sent: u64,
    /// Pushes refused because the channel's queue was full.
    pub queue_full: u64,
    /// Times a packet the link had credit for was held back by rule 2 or 3: once per channel per
    /// [`Egress::pump`], however many packets of other channels went ahead of it in that call.
    pub held_for_order: u64,
}

#[derive(Clone, Debug)]
struct Queued {
    order: u64,
    packet: Packet,
}

/// The transaction layer's transmit queue: `DEPTH` packets per virtual channel, sent under the rules.
#[derive(Clone, Debug)]
pub struct Egress<const DEPTH: usize> {
    queues: [Deque<Queued, DEPTH>; VC_COUNT],
    next_order: u64,
    counters: EgressCounters,
}

impl<const DEPTH: usize> Default for Egress<DEPTH> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const DEPTH: usize> Egress<DEPTH> {
    /// Empty queues.
    pub fn new() -> Self {
        Egress {
            queues: core::array::from_fn(|_| Deque::new()),
            next_order: 0,
            counters: EgressCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &EgressCounters {
        &self.counters
    }

    /// Queue a packet on its channel; [`TlError::QueueFull`] (nothing queued) is back-pressure.
    pub fn push(&mut self, packet: Packet) -> Result<(), TlError> {
        let vc = packet.vc();
        let queued = Queued {
            order: self.next_order,
            packet,
        };
        if self.queues[vc.index()].push_back(queued).is_err() {
            self.counters.queue_full += 1;
            return Err(TlError::QueueFull { vc });
        }
        self.next_order += 1;
        self.counters.queued += 1;
        Ok(())
    }

    /// Whether `vc`'s queue has room for another packet.
    pub fn has_room(&self, vc: Vc) -> bool {
        !self.queues[vc.index()].is_full()
    }

    /// Packets queued on `vc`.
    pub fn queued(&self, vc: Vc) -> usize {
        self.queues[vc.index()].len()
    }

    /// Whether every queue is empty.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(|q| q.is_empty())
    }

    /// Whether the rules let the packet at the head of `vc` go now (credit aside).
    pub fn may_send(&self, vc: Vc) -> bool {
        let Some(head) = self.queues[vc.index()].front() else {
            return false;
        };
        match vc {
            // Rule 4: posted traffic passes anything; rule 1 holds by the queue being a FIFO.
            Vc::Posted | Vc::Snoop => true,
            // Rules 2 and 3.
            Vc::Request | Vc::Response => {
                let dest = head.packet.dest();
                !self.queues[Vc::Posted.index()]
                    .iter()
                    .take_while(|p| p.order < head.order)
                    .any(|p| p.packet.dest() == dest)
            }
        }
    }

    /// Hand the link every packet the rules and its credit allow, oldest first; returns how many.
    pub fn pump<L: LinkTx>(&mut self, link: &mut L) -> usize {
        let mut held = 0u8;
        let sent = self.pump_noting_held(link, &mut held);
        self.counters.held_for_order += u64::from(held.count_ones());
        sent
    }

    /// [`Egress::pump`], setting bit `vc` of `held` for each channel whose head was held for order.
    fn pump_noting_held<L: LinkTx>(&mut self, link: &mut L, held: &mut u8) -> usize {
        let mut sent = 0;
        loop {
            let mut pick: Option<(u64, Vc)> = None;
            for vc in Vc::ALL {
                let Some(head) = self.queues[vc.index()].front() else {
                    continue;
                };
                if !link.can_send(vc, head.packet.payload().len()) {
                    continue;
                }
                if !self.may_send(vc) {
                    *held |= 1 << vc.index();
                    continue;
                }
                if pick.is_none_or(|(order, _)| head.order < order) {
                    pick = Some((head.order, vc));
                }
            }
            let Some((_, vc)) = pick else { return sent };
            let queue = &mut self.queues[vc.index()];
            let Some(head) = queue.front() else { return sent };
            if link.send(vc, head.packet.tl(), head.packet.payload()).is_err() {
                return sent;
            }
            queue.pop_front();
            self.counters.sent += 1;
            sent += 1;
        }
    }
}
