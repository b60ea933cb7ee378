//! Credit-based flow control: a sender may only send a packet when the receiver has room for all of its
//! flits, so nothing is ever dropped for lack of buffer.
//!
//! Credits are counted in flits, per virtual channel. Both ends keep *absolute* counters modulo 2^16: the
//! receiver counts the flits it has freed, and reports that counter (whole in control flits, its low 8
//! bits in packet headers). Absolute counters make every report idempotent, so a lost or repeated report
//! can never create or destroy credit. A low-8-bit report is accepted only if it moves the counter forward
//! by less than 128; the receiver sends a whole counter before 64 unreported flits build up (or an eighth of
//! its buffer, if that is fewer), so a genuine report always passes and a stale one never does. A report
//! that frees more flits than the sender has sent and not yet seen freed cannot be genuine: it is refused
//! ([`DlError::ImpossibleCredit`]), so credit never exceeds the partner's buffer.

use crate::error::DlError;
use crate::vc::{Vc, VC_COUNT};

/// The sender's view of the partner's receive buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxCredits {
    capacity: [u16; VC_COUNT],
    freed: [u16; VC_COUNT],
    consumed: [u16; VC_COUNT],
}

impl TxCredits {
    /// Start over with the partner's buffer sizes, as advertised in InitFc.
    pub fn init(capacity: [u16; VC_COUNT]) -> Self {
        TxCredits {
            capacity,
            freed: [0; VC_COUNT],
            consumed: [0; VC_COUNT],
        }
    }

    /// Flits that may be sent on `vc` now.
    pub fn available(&self, vc: Vc) -> u16 {
        let i = vc.index();
        self.capacity[i]
            .wrapping_add(self.freed[i])
            .wrapping_sub(self.consumed[i])
    }

    /// Spend `flits` of credit on `vc`; false (and nothing spent) if there is not enough.
    pub fn take(&mut self, vc: Vc, flits: u16) -> bool {
        if self.available(vc) < flits {
            return false;
        }
        self.consumed[vc.index()] = self.consumed[vc.index()].wrapping_add(flits);
        true
    }

    /// The partner's whole freed-flits counter for `vc`, from a control flit. A stale one changes nothing;
    /// one that frees more than was sent is refused.
    pub fn report(&mut self, vc: Vc, freed: u16) -> Result<(), DlError> {
        let delta = freed.wrapping_sub(self.freed[vc.index()]);
        if delta < 0x8000 {
            self.advance(vc, delta)
        } else {
            Ok(())
        }
    }

    /// `delta` more flits of `vc` freed, unless more than were sent and not yet reported freed.
    fn advance(&mut self, vc: Vc, delta: u16) -> Result<(), DlError> {
        let i = vc.index();
        let outstanding = self.consumed[i].wrapping_sub(self.freed[i]);
        if delta > outstanding {
            return Err(DlError::ImpossibleCredit {
                vc,
                freed: delta,
                outstanding,
            });
        }
        self.freed[i] = self.freed[i].wrapping_add(delta);
        Ok(())
    }

    /// The partner's freed-flits counter for `vc` as last reported.
    pub fn freed(&self, vc: Vc) -> u16 {
        self.freed[vc.index()]
    }

    /// The low 8 bits of the partner's freed-flits counter for `vc`, from a packet header. A stale one
    /// changes nothing; one that frees more than was sent is refused.
    pub fn report_low(&mut self, vc: Vc, low: u8) -> Result<(), DlError> {
        let delta = low.wrapping_sub(self.freed[vc.index()] as u8);
        if delta < 128 {
            self.advance(vc, u16::from(delta))
        } else {
            Ok(())
        }
    }
}

/// The receiver's accounting of its own buffers: flits freed, and how much of that the partner knows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxCredits {
    freed: [u16; VC_COUNT],
    reported: [u16; VC_COUNT],
}

impl RxCredits {
    /// Before a report may build up this many unreported flits on a channel, a control flit reports it.
    pub const REPORT_BEFORE: u16 = 64;

    /// `flits` of `vc`'s buffer were freed (the layer above took a packet).
    pub fn free(&mut self, vc: Vc, flits: u16) {
        self.freed[vc.index()] = self.freed[vc.index()].wrapping_add(flits);
    }

    /// The freed-flits counter of every channel, and mark all as reported.
    pub fn report_all(&mut self) -> [u16; VC_COUNT] {
        self.reported = self.freed;
        self.freed
    }

    /// The channel with the most unreported credit, and the low 8 bits of its counter, marked reported.
    pub fn report_one(&mut self) -> (Vc, u8) {
        let vc = Vc::ALL
            .into_iter()
            .max_by_key(|&vc| self.unreported(vc))
            .unwrap_or(Vc::Request);
        self.reported[vc.index()] = self.freed[vc.index()];
        (vc, self.freed[vc.index()] as u8)
    }

    /// The freed-flits counter of every channel, as [`RxCredits::report_all`] would give it (unmarked).
    pub fn freed_all(&self) -> [u16; VC_COUNT] {
        self.freed
    }

    /// Flits freed on `vc` that the partner has not been told of.
    pub fn unreported(&self, vc: Vc) -> u16 {
        self.freed[vc.index()].wrapping_sub(self.reported[vc.index()])
    }

    /// Whether a channel's unreported credit must be reported by a control flit now.
    pub fn report_due(&self, threshold: u16) -> bool {
        Vc::ALL.into_iter().any(|vc| self.unreported(vc) >= threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credits_are_spent_and_returned_once() {
        let mut tx = TxCredits::init([16, 16, 16, 16]);
        assert!(tx.take(Vc::Posted, 10));
        assert!(!tx.take(Vc::Posted, 7));
        assert_eq!(tx.available(Vc::Posted), 6);
        tx.report_low(Vc::Posted, 10).unwrap();
        assert_eq!(tx.available(Vc::Posted), 16);
        // The same report again, or an older one, changes nothing.
        tx.report_low(Vc::Posted, 10).unwrap();
        tx.report_low(Vc::Posted, 3).unwrap();
        tx.report(Vc::Posted, 4).unwrap();
        assert_eq!(tx.available(Vc::Posted), 16);
        assert!(tx.take(Vc::Posted, 16));
        tx.report(Vc::Posted, 26).unwrap();
        assert_eq!(tx.available(Vc::Posted), 16);
    }

    /// The receiver cannot free flits it was never sent: a report beyond them is refused whole and
    /// changes nothing, whole or low 8 bits, so credit never exceeds the buffer advertised.
    #[test]
    fn a_report_freeing_more_than_was_sent_is_refused() {
        let mut tx = TxCredits::init([16, 16, 16, 16]);
        assert!(tx.take(Vc::Posted, 10));
        let refused = Err(DlError::ImpossibleCredit {
            vc: Vc::Posted,
            freed: 300,
            outstanding: 10,
        });
        assert_eq!(tx.report(Vc::Posted, 300), refused);
        assert_eq!(tx.available(Vc::Posted), 6);
        assert_eq!(
            tx.report_low(Vc::Posted, 11),
            Err(DlError::ImpossibleCredit {
                vc: Vc::Posted,
                freed: 11,
                outstanding: 10,
            })
        );
        assert_eq!(tx.report(Vc::Request, 1).map_err(|_| ()), Err(()));
        assert_eq!(tx.available(Vc::Posted), 6);
        assert_eq!(tx.available(Vc::Request), 16);
        // All that was sent, freed at once, is genuine.
        tx.report(Vc::Posted, 10).unwrap();
        assert_eq!(tx.available(Vc::Posted), 16);
    }

    #[test]
    fn counters_wrap() {
        let mut tx = TxCredits::init([8, 0, 0, 0]);
        for round in 0..20_000u32 {
            assert!(tx.take(Vc::Request, 8), "round {round}");
            tx.report_low(Vc::Request, (round.wrapping_add(1) * 8) as u8)
                .unwrap();
        }
        let mut rx = RxCredits::default();
        rx.free(Vc::Snoop, 70);
        assert!(rx.report_due(RxCredits::REPORT_BEFORE));
        assert_eq!(rx.report_one(), (Vc::Snoop, 70));
        assert!(!rx.report_due(1));
    }
}
