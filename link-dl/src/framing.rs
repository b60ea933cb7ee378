//! How a receiver frames the units it takes into packets, control flits and idle, and finds a packet
//! boundary again after an error (docs/spec.md 2.4).
//!
//! One rule for every reader of units: the data link's receiver ([`crate::DataLink`]), the tracer that
//! records what a receiver took, and the decoder of captured units. [`Framing`] holds where a receiver
//! is (between packets, inside one, or looking for a boundary) and says what each unit is to it; the
//! reader keeps the packet's flits and checks its CRC, and tells the framing when the CRC fails.

use crate::error::DlError;
use crate::flit::{is_ident, kind, ControlFlit, Flit, FlitKind, IdentFlit, PacketHeader, FLIT_LEN};

/// A control flit, parsed and its CRC checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Acknowledgement, credits or initialisation.
    Flow(ControlFlit),
    /// Who the partner is.
    Ident(IdentFlit),
}

/// A control flit of either kind, parsed ([`IdentFlit::parse`] or [`ControlFlit::parse`]).
pub fn parse_control(flit: &Flit) -> Result<Control, DlError> {
    if is_ident(flit) {
        IdentFlit::parse(flit).map(Control::Ident)
    } else {
        ControlFlit::parse(flit).map(Control::Flow)
    }
}

/// Whether a receiver that lost its packet framing after an error finds a packet boundary at `flit`: a
/// control or identity flit that parses, its CRC checking. Transmitters send control flits only between
/// packets, so one marks where the next packet starts.
pub fn is_framing_boundary(flit: &Flit) -> bool {
    parse_control(flit).is_ok()
}

/// Whether a receiver that lost its packet framing discards `flit` while it looks for a boundary: anything
/// but idle (all zeros) and a packet boundary ([`is_framing_boundary`]).
pub fn discarded_while_resynchronising(flit: &Flit) -> bool {
    *flit != [0; FLIT_LEN] && !is_framing_boundary(flit)
}

/// Where a receiver is in the stream of units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Framing {
    /// The next unit starts a packet, or is a control or idle flit.
    #[default]
    Header,
    /// Collecting a packet whose header flit parsed as `header`: `need` more flits to come.
    Packet {
        /// Flits still to come (at least one).
        need: u8,
        /// The packet's header, parsed.
        header: PacketHeader,
    },
    /// After an error, or when the link comes up: discarding units until a control flit that checks.
    Resync,
}

/// What a unit is to a receiver, as [`Framing::push`] frames it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framed<C = Control> {
    /// Idle, outside a packet.
    Idle,
    /// Thrown away while looking for a packet boundary.
    Discarded,
    /// A control flit that parses: a packet boundary.
    Control(C),
    /// A unit that does not parse where a packet, control or idle flit should start: the framing is lost
    /// from the next unit on (the error says why; a control flit whose CRC fails gives
    /// [`DlError::CrcMismatch`]).
    Lost(DlError),
    /// A packet's header flit, parsed; the packet is whole when its `payload_flits` is 0.
    Header(PacketHeader),
    /// One of a packet's payload flits, not its last.
    Payload,
    /// A packet's last payload flit: the packet is whole. `PacketHeader` is its header, parsed.
    Last(PacketHeader),
}

impl Framing {
    /// Frame the next unit with [`parse_control`].
    pub fn push(&mut self, unit: &Flit) -> Framed {
        self.push_with(unit, parse_control)
    }

    /// Frame the next unit, parsing control flits with `parse` (which returns what
    /// [`parse_control`] would, or an error where it would fail; a data link remembers flits it parsed).
    /// A packet whose CRC fails loses the framing too: the reader checks it when the packet is whole,
    /// and calls [`Framing::lose`].
    #[inline(always)]
    pub fn push_with<C>(
        &mut self,
        unit: &Flit,
        parse: impl FnOnce(&Flit) -> Result<C, DlError>,
    ) -> Framed<C> {
        match *self {
            Framing::Packet { ref mut need, header } => {
                if *need > 1 {
                    *need -= 1;
                    return Framed::Payload;
                }
                *self = Framing::Header;
                Framed::Last(header)
            }
            Framing::Resync => match parse(unit) {
                Ok(control) => {
                    *self = Framing::Header;
                    Framed::Control(control)
                }
                Err(_) if *unit == [0; FLIT_LEN] => Framed::Idle,
                Err(_) => Framed::Discarded,
            },
            Framing::Header => match kind(unit) {
                Ok(FlitKind::Idle) => Framed::Idle,
                Ok(FlitKind::Control) => match parse(unit) {
                    Ok(control) => Framed::Control(control),
                    Err(e) => self.lost(e),
                },
                Ok(FlitKind::Packet) => match PacketHeader::parse(unit) {
                    Ok(header) => {
                        if header.payload_flits > 0 {
                            *self = Framing::Packet {
                                need: header.payload_flits,
                                header,
                            };
                        }
                        Framed::Header(header)
                    }
                    Err(e) => self.lost(e),
                },
                Err(e) => self.lost(e),
            },
        }
    }

    /// A unit that does not parse where one should start: look for a packet boundary from the next.
    fn lost<C>(&mut self, error: DlError) -> Framed<C> {
        *self = Framing::Resync;
        Framed::Lost(error)
    }

    /// A packet's CRC failed, or the link came up: discard units until a packet boundary.
    pub fn lose(&mut self) {
        *self = Framing::Resync;
    }

    /// Whether the receiver is looking for a packet boundary.
    pub fn is_lost(&self) -> bool {
        *self == Framing::Resync
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flit::{seal_packet, ControlKind};
    use crate::seq::Seq;
    use crate::vc::{Vc, VC_COUNT};

    fn update() -> Flit {
        ControlFlit {
            kind: ControlKind::Update,
            ack: Seq::new(3),
            credits: [5; VC_COUNT],
        }
        .emit()
    }

    fn header(payload_flits: u8) -> Flit {
        let mut flit = [0u8; FLIT_LEN];
        let h = PacketHeader {
            vc: Vc::Request,
            seq: Seq::new(1),
            ack: Seq::new(0),
            credit_vc: Vc::Request,
            credit: 0,
            payload_flits,
            tl: 7,
        };
        h.emit(&mut flit).unwrap();
        flit
    }

    /// A receiver that lost its framing finds it again at a control or identity flit that checks, and
    /// discards anything else but idle.
    #[test]
    fn the_framing_is_found_again_at_a_control_flit_that_checks() {
        let update = ControlFlit {
            kind: ControlKind::Update,
            ack: Seq::new(1),
            credits: [0; VC_COUNT],
        }
        .emit();
        let ident = IdentFlit { node: 7, port: 1 }.emit();
        let mut header = [0u8; FLIT_LEN];
        PacketHeader {
            payload_flits: 0,
            vc: Vc::Posted,
            seq: Seq::new(3),
            ack: Seq::new(2),
            credit_vc: Vc::Request,
            credit: 0,
            tl: 5,
        }
        .emit(&mut header)
        .unwrap();
        seal_packet(&mut header);
        let mut damaged = update;
        damaged[9] ^= 4;
        for (flit, boundary) in [(update, true), (ident, true), (header, false), (damaged, false)] {
            assert_eq!(is_framing_boundary(&flit), boundary, "{flit:02x?}");
            assert_eq!(discarded_while_resynchronising(&flit), !boundary, "{flit:02x?}");
        }
        assert!(!is_framing_boundary(&[0; FLIT_LEN]));
        assert!(!discarded_while_resynchronising(&[0; FLIT_LEN]));
    }

    #[test]
    fn a_packet_a_control_flit_and_idle_are_framed_in_turn() {
        let mut packet = [header(2), [1; FLIT_LEN], [2; FLIT_LEN]].concat();
        seal_packet(&mut packet);
        let mut framing = Framing::default();
        let framed: [Framed; 5] = [
            &packet[..16],
            &packet[16..32],
            &packet[32..],
            &update()[..],
            &[0; FLIT_LEN][..],
        ]
        .map(|u| framing.push(u.try_into().unwrap()));
        let Framed::Header(h) = framed[0] else {
            panic!("{framed:?}")
        };
        assert_eq!(h.payload_flits, 2);
        assert_eq!(framed[1], Framed::Payload);
        assert_eq!(framed[2], Framed::Last(h));
        assert!(matches!(framed[3], Framed::Control(Control::Flow(c)) if c.credits == [5; VC_COUNT]));
        assert_eq!(framed[4], Framed::Idle);
        assert_eq!(framing, Framing::Header);
    }

    #[test]
    fn after_an_error_units_are_discarded_up_to_a_control_flit_that_checks() {
        let mut framing = Framing::default();
        let mut bad = update();
        bad[3] ^= 1;
        assert!(matches!(
            framing.push(&bad),
            Framed::Lost(DlError::CrcMismatch { .. })
        ));
        assert!(framing.is_lost());
        // A header is discarded (it may be a payload flit that looks like one), idle is idle, and a
        // control flit whose CRC fails is discarded too.
        assert_eq!(framing.push(&header(1)), Framed::Discarded);
        assert_eq!(framing.push(&[0; FLIT_LEN]), Framed::Idle);
        assert_eq!(framing.push(&bad), Framed::Discarded);
        assert!(matches!(framing.push(&update()), Framed::Control(_)));
        assert_eq!(framing, Framing::Header);
        // A reserved kind loses it as well; a packet whose CRC fails is the reader's to report.
        assert!(matches!(
            framing.push(&[0xC0; FLIT_LEN]),
            Framed::Lost(DlError::BadFlitKind { .. })
        ));
        framing = Framing::Header;
        framing.lose();
        assert!(framing.is_lost());
    }
}
