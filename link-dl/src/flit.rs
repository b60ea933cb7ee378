//! The wire format: 16-byte flits, packets of a header flit and up to nine more, and control flits.
//!
//! The first 12 bytes of a header or control flit form a 96-bit big-endian word `W` (byte 0 holds
//! `W[95:88]`); bytes 12-15 hold a CRC-32C, least significant byte first. `docs/spec.md` section 2 is the
//! normative description; the field table below ([`field`]) is the one place offsets live in code.
//!
//! | bits of `W` | packet header | control flit |
//! |---|---|---|
//! | 95:94 | kind `01` | kind `10` |
//! | 93:90 | flits after the header (0-9) | control kind (93:88) |
//! | 89:88 | virtual channel | |
//! | 87:78 | sequence number | reserved, 0 |
//! | 77:68 | acknowledged sequence number | acknowledged sequence number |
//! | 67:66 | credit-return channel | reserved, 0 (67:64) |
//! | 65:58 | credit-return counter (mod 256) | |
//! | 57:0 | transaction-layer header | credit counters, 16 bits per channel (63:0) |
//!
//! The identity flit ([`IdentFlit`], control kind 5), which each end sends while the link initialises,
//! lays out the control flit's bits 87:0 its own way: the sender's port (87:80), reserved zero (79:64)
//! and its 64-bit node ID (63:0).
//!
//! An all-zero flit is logical idle. A packet's CRC covers every byte of the packet except the CRC field;
//! a control flit's covers its bytes 0-11.

use crate::crc;
use crate::error::DlError;
use crate::seq::Seq;
use crate::vc::{Vc, VC_COUNT};

/// Bytes in a flit.
pub const FLIT_LEN: usize = 16;
/// A flit.
pub type Flit = [u8; FLIT_LEN];
/// Flits after the header flit in the longest packet (an optional byte-enable or extension flit and
/// eight data flits).
pub const MAX_PAYLOAD_FLITS: usize = 9;
/// Flits in the longest packet.
pub const MAX_PACKET_FLITS: usize = 1 + MAX_PAYLOAD_FLITS;
/// Bytes in the longest packet.
pub const MAX_PACKET_LEN: usize = MAX_PACKET_FLITS * FLIT_LEN;
/// Width of the transaction-layer header carried in the header flit.
pub const TL_HEADER_BITS: u32 = 58;

const _: () = assert!(MAX_PACKET_LEN == crc::MAX_PACKET_LEN);

/// Bit positions of the fields in the 96-bit word `W` (shift of the field's least significant bit, width).
pub mod field {
    /// Flit kind.
    pub const KIND: (u32, u32) = (94, 2);
    /// Packet: flits after the header.
    pub const FLITS: (u32, u32) = (90, 4);
    /// Packet: virtual channel.
    pub const VC: (u32, u32) = (88, 2);
    /// Packet: sequence number.
    pub const SEQ: (u32, u32) = (78, 10);
    /// Packet and control: acknowledged sequence number.
    pub const ACK: (u32, u32) = (68, 10);
    /// Packet: channel of the credit return.
    pub const CREDIT_VC: (u32, u32) = (66, 2);
    /// Packet: credit-return counter, modulo 256.
    pub const CREDIT: (u32, u32) = (58, 8);
    /// Packet: transaction-layer header.
    pub const TL: (u32, u32) = (0, 58);
    /// Control: control kind.
    pub const CONTROL_KIND: (u32, u32) = (88, 6);
    /// Control: reserved bits, zero.
    pub const CONTROL_RESERVED: [(u32, u32); 2] = [(78, 10), (64, 4)];
    /// Control: credit counters, channel 0 highest.
    pub const CONTROL_CREDITS: (u32, u32) = (0, 64);
    /// Identity: the sender's port.
    pub const IDENT_PORT: (u32, u32) = (80, 8);
    /// Identity: reserved bits, zero.
    pub const IDENT_RESERVED: (u32, u32) = (64, 16);
    /// Identity: the sender's node ID.
    pub const IDENT_NODE: (u32, u32) = (0, 64);
    /// Bytes of the word; the CRC follows.
    pub const WORD_BYTES: usize = 12;
}

const fn get(w: u128, (shift, width): (u32, u32)) -> u64 {
    ((w >> shift) & ((1u128 << width) - 1)) as u64
}

const fn put(w: &mut u128, (shift, width): (u32, u32), value: u64) {
    *w |= (value as u128 & ((1u128 << width) - 1)) << shift;
}

fn word(flit: &Flit) -> u128 {
    // The whole flit in one load, its CRC field shifted out: copying the 12 bytes into a zeroed array
    // first made the load wait for the copy's stores.
    u128::from_be_bytes(*flit) >> 32
}

fn store_word(w: u128, flit: &mut Flit) {
    flit[..field::WORD_BYTES].copy_from_slice(&w.to_be_bytes()[4..]);
}

fn crc_field(flit: &Flit) -> u32 {
    u32::from_le_bytes([flit[12], flit[13], flit[14], flit[15]])
}

/// What a flit is, from its first two bits (and, for idle, its whole content).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FlitKind {
    /// All zero: logical idle.
    Idle,
    /// The header flit of a packet.
    Packet,
    /// A control flit.
    Control,
}

/// The kind of a flit, or an error for a reserved kind or a non-zero flit of idle kind.
pub fn kind(flit: &Flit) -> Result<FlitKind, DlError> {
    match flit[0] >> 6 {
        0b01 => Ok(FlitKind::Packet),
        0b10 => Ok(FlitKind::Control),
        0b00 if flit.iter().all(|&b| b == 0) => Ok(FlitKind::Idle),
        _ => Err(DlError::BadFlitKind { first: flit[0] }),
    }
}

/// The parsed header flit of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PacketHeader {
    /// Flits after the header flit, 0 to 9.
    pub payload_flits: u8,
    /// The virtual channel.
    pub vc: Vc,
    /// The packet's sequence number.
    pub seq: Seq,
    /// The last sequence number the sender received in order from us.
    pub ack: Seq,
    /// Which channel's credit counter `credit` is.
    pub credit_vc: Vc,
    /// The sender's count of receive-buffer flits it has freed on `credit_vc`, modulo 256.
    pub credit: u8,
    /// The transaction-layer header, 58 bits.
    pub tl: u64,
}

impl PacketHeader {
    /// Parse a header flit (the CRC is checked over the whole packet, by [`check_packet_crc`]).
    pub fn parse(flit: &Flit) -> Result<PacketHeader, DlError> {
        if kind(flit)? != FlitKind::Packet {
            return Err(DlError::BadFlitKind { first: flit[0] });
        }
        let w = word(flit);
        let payload_flits = get(w, field::FLITS) as u8;
        if usize::from(payload_flits) > MAX_PAYLOAD_FLITS {
            return Err(DlError::TooManyFlits { flits: payload_flits });
        }
        Ok(PacketHeader {
            payload_flits,
            vc: Vc::from_bits(get(w, field::VC) as u8),
            seq: Seq::new(get(w, field::SEQ) as u16),
            ack: Seq::new(get(w, field::ACK) as u16),
            credit_vc: Vc::from_bits(get(w, field::CREDIT_VC) as u8),
            credit: get(w, field::CREDIT) as u8,
            tl: get(w, field::TL),
        })
    }

    /// The flits after the header and the transaction-layer header of a header flit that has already
    /// parsed (one waiting in a receive queue): the two fields a receiver reads to take a packet out,
    /// without checking the rest again.
    pub fn payload_flits_and_tl(flit: &Flit) -> (u8, u64) {
        let w = word(flit);
        (get(w, field::FLITS) as u8, get(w, field::TL))
    }

    /// Rewrite the link-local fields of an emitted header in place (acknowledgement and credit return,
    /// which every transmission refreshes), leaving the others and the CRC field as they are: the same
    /// bits as parsing, changing those fields and emitting again.
    pub fn restamp(flit: &mut Flit, ack: Seq, credit_vc: Vc, credit: u8) {
        let mask = |(shift, width): (u32, u32)| ((1u128 << width) - 1) << shift;
        let mut w = word(flit) & !(mask(field::ACK) | mask(field::CREDIT_VC) | mask(field::CREDIT));
        put(&mut w, field::ACK, u64::from(ack.get()));
        put(&mut w, field::CREDIT_VC, credit_vc.index() as u64);
        put(&mut w, field::CREDIT, u64::from(credit));
        store_word(w, flit);
    }

    /// Write the header into `flit`, CRC field zero (see [`seal_packet`]).
    pub fn emit(&self, flit: &mut Flit) -> Result<(), DlError> {
        if self.tl >> TL_HEADER_BITS != 0 {
            return Err(DlError::HeaderTooWide);
        }
        if usize::from(self.payload_flits) > MAX_PAYLOAD_FLITS {
            return Err(DlError::TooManyFlits {
                flits: self.payload_flits,
            });
        }
        let mut w = 0u128;
        put(&mut w, field::KIND, 0b01);
        put(&mut w, field::FLITS, u64::from(self.payload_flits));
        put(&mut w, field::VC, self.vc.index() as u64);
        put(&mut w, field::SEQ, u64::from(self.seq.get()));
        put(&mut w, field::ACK, u64::from(self.ack.get()));
        put(&mut w, field::CREDIT_VC, self.credit_vc.index() as u64);
        put(&mut w, field::CREDIT, u64::from(self.credit));
        put(&mut w, field::TL, self.tl);
        *flit = [0; FLIT_LEN];
        store_word(w, flit);
        Ok(())
    }
}

/// The packet CRC of `packet` (header flit first): every byte except the CRC field, bytes 12-15.
pub fn packet_crc(packet: &[u8]) -> u32 {
    crc::checksum_of_parts(
        packet.get(..field::WORD_BYTES).unwrap_or(packet),
        packet.get(FLIT_LEN..).unwrap_or(&[]),
    )
}

/// Fill in the CRC field of a packet whose flits are `packet` (a whole number of flits).
pub fn seal_packet(packet: &mut [u8]) {
    let crc = packet_crc(packet);
    if let Some(field) = packet.get_mut(field::WORD_BYTES..FLIT_LEN) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
}

/// Check the CRC field of a received packet.
pub fn check_packet_crc(packet: &[u8]) -> Result<(), DlError> {
    let Some((head, rest)) = packet.split_first_chunk::<FLIT_LEN>() else {
        return Err(DlError::Truncated {
            needed: FLIT_LEN,
            got: packet.len(),
        });
    };
    check_packet_crc_parts(head, rest)
}

/// [`check_packet_crc`] of a packet whose header flit `head` and the bytes after it (`rest`) are not
/// side by side: a receiver checks a packet where its flits arrived instead of gathering them first.
pub fn check_packet_crc_parts(head: &Flit, rest: &[u8]) -> Result<(), DlError> {
    let computed = crc::checksum_of_parts(&head[..field::WORD_BYTES], rest);
    let received = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
    if computed == received {
        Ok(())
    } else {
        Err(DlError::CrcMismatch { computed, received })
    }
}

/// Kinds of control flit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ControlKind {
    /// Acknowledgement and credit counters.
    Update = 1,
    /// Negative acknowledgement: replay everything after `ack`.
    Nak = 2,
    /// First phase of credit initialisation: the credits carry the receive-buffer sizes.
    InitFc1 = 3,
    /// Second phase: the sender has received the partner's sizes.
    InitFc2 = 4,
    /// An Update that also asks the partner to go to low power (L1): the sender has everything it sent
    /// acknowledged and sends no new packets (`docs/spec.md` section 2.9).
    PmEnterL1 = 6,
    /// An Update that also grants the partner's PmEnterL1: everything this end sent is acknowledged too,
    /// and it takes the partner's electrical idle ordered set for L1.
    PmRequestAck = 7,
}

/// A parsed control flit. Control flits are link-local: never sequenced, never replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ControlFlit {
    /// What it is.
    pub kind: ControlKind,
    /// The last sequence number received in order.
    pub ack: Seq,
    /// Per channel: receive-buffer size in flits (InitFc), or flits freed so far modulo 65536.
    pub credits: [u16; VC_COUNT],
}

impl ControlFlit {
    /// Parse and check a flow-control flit (kinds 1 to 4, 6 and 7; an identity flit, kind 5, is
    /// [`IdentFlit::parse`]'s).
    pub fn parse(flit: &Flit) -> Result<ControlFlit, DlError> {
        let w = checked_control_word(flit)?;
        let kind = match get(w, field::CONTROL_KIND) as u8 {
            1 => ControlKind::Update,
            2 => ControlKind::Nak,
            3 => ControlKind::InitFc1,
            4 => ControlKind::InitFc2,
            6 => ControlKind::PmEnterL1,
            7 => ControlKind::PmRequestAck,
            kind => return Err(DlError::UnknownControl { kind }),
        };
        if field::CONTROL_RESERVED.iter().any(|&f| get(w, f) != 0) {
            return Err(DlError::ReservedBits);
        }
        let c = get(w, field::CONTROL_CREDITS);
        Ok(ControlFlit {
            kind,
            ack: Seq::new(get(w, field::ACK) as u16),
            credits: [(c >> 48) as u16, (c >> 32) as u16, (c >> 16) as u16, c as u16],
        })
    }

    /// The flit, CRC included.
    pub fn emit(&self) -> Flit {
        let mut w = 0u128;
        put(&mut w, field::KIND, 0b10);
        put(&mut w, field::CONTROL_KIND, self.kind as u64);
        put(&mut w, field::ACK, u64::from(self.ack.get()));
        let c = self.credits.iter().fold(0u64, |acc, &x| acc << 16 | u64::from(x));
        put(&mut w, field::CONTROL_CREDITS, c);
        sealed_control(w)
    }
}

/// Control kind of the identity flit.
pub const IDENT_KIND: u8 = 5;

/// An identity flit: who sends it, as a node ID and the port it leaves through. Each end of a link sends
/// its own while the link initialises, so that both know what they are joined to before it is up (the
/// identity registers a fabric manager reads: `docs/spec.md` sections 2.8 and 5). Like every control
/// flit it is link-local and absolute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IdentFlit {
    /// The sender's node ID (unique in the fabric, like a GUID).
    pub node: u64,
    /// The sender's port.
    pub port: u8,
}

impl IdentFlit {
    /// Parse and check an identity flit.
    pub fn parse(flit: &Flit) -> Result<IdentFlit, DlError> {
        let w = checked_control_word(flit)?;
        let kind = get(w, field::CONTROL_KIND) as u8;
        if kind != IDENT_KIND {
            return Err(DlError::UnknownControl { kind });
        }
        if get(w, field::IDENT_RESERVED) != 0 {
            return Err(DlError::ReservedBits);
        }
        Ok(IdentFlit {
            node: get(w, field::IDENT_NODE),
            port: get(w, field::IDENT_PORT) as u8,
        })
    }

    /// The flit, CRC included.
    pub fn emit(&self) -> Flit {
        let mut w = 0u128;
        put(&mut w, field::KIND, 0b10);
        put(&mut w, field::CONTROL_KIND, u64::from(IDENT_KIND));
        put(&mut w, field::IDENT_PORT, u64::from(self.port));
        put(&mut w, field::IDENT_NODE, self.node);
        sealed_control(w)
    }
}

/// Whether a control flit (of kind `10`, CRC checked) is an identity flit rather than a flow-control one.
pub fn is_ident(flit: &Flit) -> bool {
    flit[0] == 0b1000_0000 | IDENT_KIND
}

/// The word of a control flit whose kind and CRC check.
fn checked_control_word(flit: &Flit) -> Result<u128, DlError> {
    if kind(flit)? != FlitKind::Control {
        return Err(DlError::BadFlitKind { first: flit[0] });
    }
    let computed = crc::checksum(&flit[..field::WORD_BYTES]);
    let received = crc_field(flit);
    if computed != received {
        return Err(DlError::CrcMismatch { computed, received });
    }
    Ok(word(flit))
}

/// A control flit of word `w`, its CRC added.
fn sealed_control(w: u128) -> Flit {
    let mut flit = [0; FLIT_LEN];
    store_word(w, &mut flit);
    let crc = crc::checksum(&flit[..field::WORD_BYTES]);
    flit[field::WORD_BYTES..].copy_from_slice(&crc.to_le_bytes());
    flit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> PacketHeader {
        PacketHeader {
            payload_flits: 8,
            vc: Vc::Posted,
            seq: Seq::new(0x2A5),
            ack: Seq::new(0x15A),
            credit_vc: Vc::Snoop,
            credit: 0xC3,
            tl: 0x2AB_CDEF_0123_4567,
        }
    }

    #[test]
    fn header_round_trips_and_checks() {
        let h = header();
        let mut packet = [0u8; 9 * FLIT_LEN];
        let mut flit = [0u8; FLIT_LEN];
        h.emit(&mut flit).unwrap();
        packet[..16].copy_from_slice(&flit);
        for (i, b) in packet[16..].iter_mut().enumerate() {
            *b = i as u8;
        }
        seal_packet(&mut packet);
        assert_eq!(check_packet_crc(&packet), Ok(()));
        let mut head = [0u8; 16];
        head.copy_from_slice(&packet[..16]);
        assert_eq!(PacketHeader::parse(&head), Ok(h));
        // A receive queue overwrites the CRC field: the two fields read again must not depend on it.
        head[12..].copy_from_slice(&[0xFF; 4]);
        assert_eq!(PacketHeader::payload_flits_and_tl(&head), (h.payload_flits, h.tl));
        packet[100] ^= 4;
        assert!(matches!(
            check_packet_crc(&packet),
            Err(DlError::CrcMismatch { .. })
        ));
    }

    /// A packet checked as its header flit and the bytes after it, held apart (as a receiver checks one
    /// where it arrived), gives what checking it whole gives, sealed or with any one bit flipped.
    #[test]
    fn checking_a_packet_in_parts_equals_checking_it_whole() {
        for payload_flits in [0usize, 1, 8, 9] {
            let mut packet = [0u8; 10 * FLIT_LEN];
            let packet = &mut packet[..(1 + payload_flits) * FLIT_LEN];
            let h = PacketHeader {
                payload_flits: payload_flits as u8,
                ..header()
            };
            h.emit((&mut packet[..FLIT_LEN]).try_into().unwrap()).unwrap();
            for (i, b) in packet[FLIT_LEN..].iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(37);
            }
            seal_packet(packet);
            for bit in [None].into_iter().chain((0..packet.len() * 8).map(Some)) {
                let mut bad = packet.to_vec();
                if let Some(bit) = bit {
                    bad[bit / 8] ^= 1 << (bit % 8);
                }
                let (head, rest) = bad.split_first_chunk::<FLIT_LEN>().unwrap();
                let parts = check_packet_crc_parts(head, rest);
                assert_eq!(
                    parts,
                    check_packet_crc(&bad),
                    "{payload_flits} flits, bit {bit:?}"
                );
                // A CRC catches any one bit flipped, in its own field too.
                assert_eq!(parts.is_ok(), bit.is_none());
            }
        }
    }

    #[test]
    fn restamping_a_header_equals_emitting_it_again() {
        let mut stamped = [0xEEu8; FLIT_LEN];
        header().emit(&mut stamped).unwrap();
        stamped[12..].copy_from_slice(&[1, 2, 3, 4]);
        for (ack, credit_vc, credit) in [
            (0u16, Vc::Request, 0u8),
            (0x3FF, Vc::Response, 0xFF),
            (0x15A, Vc::Snoop, 7),
        ] {
            let mut expected = header();
            (expected.ack, expected.credit_vc, expected.credit) = (Seq::new(ack), credit_vc, credit);
            let mut emitted = [0u8; FLIT_LEN];
            expected.emit(&mut emitted).unwrap();
            PacketHeader::restamp(&mut stamped, Seq::new(ack), credit_vc, credit);
            assert_eq!(stamped[..12], emitted[..12]);
            assert_eq!(stamped[12..], [1, 2, 3, 4], "the CRC field is left alone");
            assert_eq!(PacketHeader::parse(&stamped), Ok(expected));
        }
    }

    #[test]
    fn malformed_flits_are_typed_errors() {
        let mut f = [0u8; 16];
        assert_eq!(kind(&f), Ok(FlitKind::Idle));
        f[5] = 1;
        assert_eq!(kind(&f), Err(DlError::BadFlitKind { first: 0 }));
        f[0] = 0xC0;
        assert_eq!(kind(&f), Err(DlError::BadFlitKind { first: 0xC0 }));
        f[0] = 0b0110_1000; // packet, 10 flits
        assert_eq!(PacketHeader::parse(&f), Err(DlError::TooManyFlits { flits: 10 }));
        let mut too_wide = header();
        too_wide.tl = 1 << 58;
        assert_eq!(too_wide.emit(&mut f), Err(DlError::HeaderTooWide));
    }

    #[test]
    fn control_round_trips_and_rejects_corruption() {
        let c = ControlFlit {
            kind: ControlKind::Nak,
            ack: Seq::new(1023),
            credits: [1, 0xFFFF, 0x1234, 0],
        };
        let mut f = c.emit();
        assert_eq!(ControlFlit::parse(&f), Ok(c));
        f[3] ^= 0x10;
        assert!(matches!(ControlFlit::parse(&f), Err(DlError::CrcMismatch { .. })));
    }

    #[test]
    fn ident_round_trips_and_is_not_a_flow_control_flit() {
        let ident = IdentFlit {
            node: 0xFEDC_BA98_7654_3210,
            port: 63,
        };
        let f = ident.emit();
        assert!(is_ident(&f));
        assert_eq!(IdentFlit::parse(&f), Ok(ident));
        assert_eq!(
            ControlFlit::parse(&f),
            Err(DlError::UnknownControl { kind: IDENT_KIND })
        );
        let update = ControlFlit {
            kind: ControlKind::Update,
            ack: Seq::new(1),
            credits: [0; VC_COUNT],
        }
        .emit();
        assert!(!is_ident(&update));
        assert_eq!(
            IdentFlit::parse(&update),
            Err(DlError::UnknownControl { kind: 1 })
        );
        // A reserved bit set, CRC made good again.
        let mut w = word(&f);
        w |= 1 << 64;
        assert_eq!(IdentFlit::parse(&sealed_control(w)), Err(DlError::ReservedBits));
    }
}
