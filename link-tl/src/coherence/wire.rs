//! Coherence messages as data-link packets: the transaction layer's coherence opcodes (`18h`-`1Eh`, spec
//! section 3.9), a 58-bit header and the flits after it.
//!
//! | bits of H | width | field |
//! |---|---|---|
//! | 57:53 | 5 | opcode |
//! | 52:43 | 10 | destination endpoint |
//! | 42:40 | 3 | code: which request, snoop, response or granted state |
//! | 39:30 | 10 | source endpoint (0 in requests: their extension flit names the requester) |
//! | 29 | 1 | phase (snoops; 0 otherwise) |
//! | 28:0 | 29 | line: local address bits 34:6 (64-byte lines, 32 GiB per home) |
//!
//! Requests carry the transaction layer's extension flit (section 3.3) like every request-channel packet,
//! so a completer without coherence answers them with Unsupported Request: requester = the agent, tag 0,
//! first byte 0, length = the line size, value 0. Data-carrying messages carry the line in `B / 16` data
//! flits, byte `i` of the line in byte `i % 16` of flit `i / 16`.

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::Vc;

use super::message::{CacheState, ForwardKind, Message, RequestKind, SnoopKind, SnoopResponseKind};
use crate::error::TlError;
use crate::header::{
    destination, field as header_field, opcode_bits, EndpointId, Extension, COHERENCE_OPCODES, MAX_DATA,
    MAX_ENDPOINTS,
};

/// The coherence opcodes.
pub mod opcode {
    /// A request (RdCurr, RdShared, RdAny, RdOwn, CleanEvict, DirtyEvict): request channel, extension flit.
    pub const REQUEST: u8 = 0x18;
    /// A snoop (SnpData, SnpInv, SnpCur): snoop channel, header only.
    pub const SNOOP: u8 = 0x19;
    /// A snoop response without data: response channel, header only.
    pub const SNOOP_RESPONSE: u8 = 0x1A;
    /// A snoop response forwarding dirty data: response channel, data flits.
    pub const SNOOP_RESPONSE_DATA: u8 = 0x1B;
    /// GO without data (GO-I, GO-S, GO-E, GO-M, GO_WritePull): response channel, header only.
    pub const GO: u8 = 0x1C;
    /// GO with the line's data: response channel, data flits.
    pub const GO_DATA: u8 = 0x1D;
    /// Write-back data after GO_WritePull: response channel, data flits.
    pub const WRITE_BACK: u8 = 0x1E;
}

/// Bit positions (shift, width) of the coherence header fields below the opcode and destination.
pub mod field {
    /// Which request, snoop, response or granted state.
    pub const CODE: (u32, u32) = (40, 3);
    /// The sending endpoint (0 in requests).
    pub const SOURCE: (u32, u32) = (30, 10);
    /// A snoop's phase.
    pub const PHASE: (u32, u32) = (29, 1);
    /// The line number.
    pub const LINE: (u32, u32) = (0, 29);
}

/// Bits of a line number.
pub const LINE_BITS: u32 = 29;
/// Bytes of a line on the wire.
pub const LINE_BYTES: usize = 64;
/// The GO code of GO_WritePull (codes 0 to 3 are GO granting I, S, E, M).
pub const GO_WRITE_PULL: u8 = 4;
/// Flits after the header in the longest coherence packet.
pub const MAX_FLITS: usize = MAX_DATA / FLIT_LEN;

const fn get(w: u64, (shift, width): (u32, u32)) -> u64 {
    (w >> shift) & ((1u64 << width) - 1)
}

const fn put(w: &mut u64, (shift, width): (u32, u32), value: u64) {
    *w |= (value & ((1u64 << width) - 1)) << shift;
}

/// Whether a header is a coherence message's (decode it with [`decode`]).
pub fn is_coherence(tl: u64) -> bool {
    COHERENCE_OPCODES.contains(&opcode_bits(tl))
}

/// A message with the endpoints it goes between.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Envelope<const B: usize> {
    /// The sending endpoint.
    pub source: EndpointId,
    /// The receiving endpoint.
    pub dest: EndpointId,
    /// The message.
    pub message: Message<B>,
}

/// A coherence message as the data link sends it: its channel, header and the flits after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoherencePacket {
    vc: Vc,
    tl: u64,
    len: u8,
    flits: [Flit; MAX_FLITS],
}

impl CoherencePacket {
    /// The virtual channel.
    pub fn vc(&self) -> Vc {
        self.vc
    }

    /// The 58-bit header.
    pub fn tl(&self) -> u64 {
        self.tl
    }

    /// The flits after the header.
    pub fn payload(&self) -> &[Flit] {
        &self.flits[..usize::from(self.len)]
    }
}

/// The flits a line of `B` bytes takes.
const fn data_flits<const B: usize>() -> usize {
    B.div_ceil(FLIT_LEN)
}

struct LineSize<const B: usize>;

impl<const B: usize> LineSize<B> {
    const VALID: () = assert!(B > 0 && B <= MAX_DATA, "a line is 1 to 128 bytes");
}

fn check_endpoint(endpoint: EndpointId) -> Result<u64, TlError> {
    if usize::from(endpoint) < MAX_ENDPOINTS {
        Ok(u64::from(endpoint))
    } else {
        Err(TlError::EndpointOutOfRange { endpoint })
    }
}

/// The packet for `envelope`, or an error for an endpoint or line out of range.
pub fn encode<const B: usize>(envelope: &Envelope<B>) -> Result<CoherencePacket, TlError> {
    #[allow(clippy::let_unit_value)]
    let () = LineSize::<B>::VALID;
    let msg = &envelope.message;
    let line = msg.line();
    if line >> LINE_BITS != 0 {
        return Err(TlError::LineOutOfRange { line });
    }
    let source = check_endpoint(envelope.source)?;
    let mut packet = CoherencePacket {
        vc: msg.vc(),
        tl: 0,
        len: 0,
        flits: [[0; FLIT_LEN]; MAX_FLITS],
    };
    let (code, data) = match *msg {
        Message::Request { kind, .. } => {
            let ext = Extension {
                requester: envelope.source,
                tag: 0,
                first_byte: 0,
                len: B as u16,
                value: 0,
            };
            packet.flits[0] = ext.emit()?;
            packet.len = 1;
            (kind as u8, None)
        }
        Message::Snoop { kind, phase, .. } => {
            put(&mut packet.tl, field::PHASE, u64::from(phase));
            (kind as u8, None)
        }
        Message::SnoopResponse { kind, .. } => (kind as u8, None),
        Message::SnoopResponseData { kind, data, .. } => (kind as u8, Some(data)),
        Message::Go { state, .. } => (state as u8, None),
        Message::GoWritePull { .. } => (GO_WRITE_PULL, None),
        Message::GoData { state, data, .. } => (state as u8, Some(data)),
        Message::WriteBack { data, .. } => (0, Some(data)),
    };
    put(&mut packet.tl, header_field::OPCODE, u64::from(msg.opcode()));
    put(&mut packet.tl, header_field::DEST, check_endpoint(envelope.dest)?);
    put(&mut packet.tl, field::CODE, u64::from(code));
    if !matches!(msg, Message::Request { .. }) {
        put(&mut packet.tl, field::SOURCE, source);
    }
    put(&mut packet.tl, field::LINE, u64::from(line));
    if let Some(data) = data {
        for (flit, chunk) in packet.flits.iter_mut().zip(data.chunks(FLIT_LEN)) {
            flit[..chunk.len()].copy_from_slice(chunk);
        }
        packet.len = data_flits::<B>() as u8;
    }
    Ok(packet)
}

/// The message a coherence packet carries, or a typed error for anything malformed: an opcode outside
/// `18h`-`1Eh`, the wrong channel, a reserved code, the wrong number of flits, non-zero reserved bits, an
/// extension flit that does not describe a line request.
pub fn decode<const B: usize>(vc: Vc, tl: u64, payload: &[Flit]) -> Result<Envelope<B>, TlError> {
    #[allow(clippy::let_unit_value)]
    let () = LineSize::<B>::VALID;
    let op = opcode_bits(tl);
    let channel = match op {
        opcode::REQUEST => Vc::Request,
        opcode::SNOOP => Vc::Snoop,
        opcode::SNOOP_RESPONSE..=opcode::WRITE_BACK => Vc::Response,
        opcode => return Err(TlError::UnknownOpcode { opcode }),
    };
    if vc != channel {
        return Err(TlError::WrongChannel { opcode: op, vc });
    }
    let flits = match op {
        opcode::REQUEST => 1,
        opcode::SNOOP_RESPONSE_DATA | opcode::GO_DATA | opcode::WRITE_BACK => data_flits::<B>(),
        _ => 0,
    };
    if payload.len() != flits {
        return Err(TlError::FlitCount {
            opcode: op,
            flits: payload.len(),
        });
    }
    let code = get(tl, field::CODE) as u8;
    let line = get(tl, field::LINE) as u32;
    let phase = get(tl, field::PHASE) == 1;
    let mut source = get(tl, field::SOURCE) as EndpointId;
    if phase && op != opcode::SNOOP {
        return Err(TlError::ReservedBits);
    }
    let reserved_code = TlError::UnknownCoherenceCode { opcode: op, code };
    let data = || line_data::<B>(payload);
    let message = match op {
        opcode::REQUEST => {
            if source != 0 {
                return Err(TlError::ReservedBits);
            }
            let kind = RequestKind::from_code(code).ok_or(reserved_code)?;
            let ext = Extension::parse(
                payload
                    .first()
                    .ok_or(TlError::FlitCount { opcode: op, flits: 0 })?,
            )?;
            if ext.tag != 0 || ext.first_byte != 0 || ext.value != 0 {
                return Err(TlError::ReservedBits);
            }
            if usize::from(ext.len) != B {
                return Err(TlError::BadLength {
                    len: usize::from(ext.len),
                });
            }
            source = ext.requester;
            Message::Request { line, kind }
        }
        opcode::SNOOP => Message::Snoop {
            line,
            kind: SnoopKind::from_code(code).ok_or(reserved_code)?,
            phase,
        },
        opcode::SNOOP_RESPONSE => Message::SnoopResponse {
            line,
            kind: SnoopResponseKind::from_code(code).ok_or(reserved_code)?,
        },
        opcode::SNOOP_RESPONSE_DATA => Message::SnoopResponseData {
            line,
            kind: ForwardKind::from_code(code).ok_or(reserved_code)?,
            data: data()?,
        },
        opcode::GO if code == GO_WRITE_PULL => Message::GoWritePull { line },
        opcode::GO if code < 4 => Message::Go {
            line,
            state: CacheState::from_bits(code),
        },
        opcode::GO_DATA if code < 4 => Message::GoData {
            line,
            state: CacheState::from_bits(code),
            data: data()?,
        },
        opcode::WRITE_BACK if code == 0 => Message::WriteBack { line, data: data()? },
        _ => return Err(reserved_code),
    };
    Ok(Envelope {
        source,
        dest: destination(tl),
        message,
    })
}

/// The line's bytes from its data flits; bytes past the line in the last flit must be zero.
fn line_data<const B: usize>(payload: &[Flit]) -> Result<[u8; B], TlError> {
    let mut data = [0u8; B];
    for (i, byte) in payload.iter().flatten().enumerate() {
        match data.get_mut(i) {
            Some(slot) => *slot = *byte,
            None if *byte != 0 => return Err(TlError::ReservedBits),
            None => {}
        }
    }
    Ok(data)
}
