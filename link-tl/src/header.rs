//! The transaction-layer header (58 bits in the data link's header flit) and the extension flit.
//!
//! `docs/spec.md` section 3 is the normative description; [`field`] is the one place bit positions live
//! in code. Every header starts with the opcode (bits 57:53) and the destination endpoint (52:43), so a
//! switch routes any packet, of any opcode, from the same two fields.
//!
//! | bits | memory request | message | completion |
//! |---|---|---|---|
//! | 57:53 | opcode | opcode | opcode |
//! | 52:43 | destination endpoint | destination endpoint | destination (the requester) |
//! | 42:0 | local address bits 46:4 | code (42:35), index (34:19), reserved (18:0) | completer (42:33), tag (32:23), status (22:21), byte offset in the request (20:9), data flag (8), length - 1 (7:1), reserved (0) |
//!
//! The extension flit (non-posted requests and messages) is a 128-bit big-endian word `X` (byte 0 holds
//! `X[127:120]`): requester or source (127:118), tag (117:108), first byte (107:104), length in bytes
//! (103:91), reserved (90:64), message value (63:0).

use link_dl::flit::{Flit, FLIT_LEN};
use link_dl::Vc;

use crate::error::TlError;

/// An endpoint's fabric-wide ID (10 bits).
pub type EndpointId = u16;
/// A request's tag, unique among its requester's outstanding requests (10 bits).
pub type Tag = u16;

/// Bits of an endpoint ID.
pub const ENDPOINT_BITS: u32 = 10;
/// Endpoints a fabric can address.
pub const MAX_ENDPOINTS: usize = 1 << ENDPOINT_BITS;
/// Bits of a tag.
pub const TAG_BITS: u32 = 10;
/// Tags a requester can have outstanding at most.
pub const MAX_TAGS: usize = 1 << TAG_BITS;
/// Bits of a local address (128 TiB per endpoint).
pub const LOCAL_ADDRESS_BITS: u32 = 47;
/// Most data bytes in one packet; no packet's data crosses a multiple of this.
pub const MAX_DATA: usize = 128;
/// Data flits in the longest packet.
pub const MAX_DATA_FLITS: usize = MAX_DATA / FLIT_LEN;
/// Most bytes one read request asks for; no read request crosses a multiple of this.
pub const MAX_READ: usize = 4096;

/// Bit positions (shift of the least significant bit, width) in the 58-bit header and the extension word.
pub mod field {
    /// Header: opcode.
    pub const OPCODE: (u32, u32) = (53, 5);
    /// Header: destination endpoint.
    pub const DEST: (u32, u32) = (43, 10);
    /// Memory request: local address bits 46:4.
    pub const ADDR: (u32, u32) = (0, 43);
    /// Message: message code.
    pub const MSG_CODE: (u32, u32) = (35, 8);
    /// Message: doorbell number, interrupt vector or vendor ID.
    pub const MSG_INDEX: (u32, u32) = (19, 16);
    /// Message: reserved, zero.
    pub const MSG_RESERVED: (u32, u32) = (0, 19);
    /// Completion: the endpoint that completes.
    pub const CPL_COMPLETER: (u32, u32) = (33, 10);
    /// Completion: the request's tag.
    pub const CPL_TAG: (u32, u32) = (23, 10);
    /// Completion: status.
    pub const CPL_STATUS: (u32, u32) = (21, 2);
    /// Completion: byte offset of the first data byte in the request.
    pub const CPL_OFFSET: (u32, u32) = (9, 12);
    /// Completion: data flag (data flits follow).
    pub const CPL_DATA: (u32, u32) = (8, 1);
    /// Completion: data length minus one (zero without data).
    pub const CPL_LEN: (u32, u32) = (1, 7);
    /// Completion: reserved, zero.
    pub const CPL_RESERVED: (u32, u32) = (0, 1);

    /// Extension: requester (requests) or source (messages) endpoint.
    pub const EXT_REQUESTER: (u32, u32) = (118, 10);
    /// Extension: tag (requests; zero in messages).
    pub const EXT_TAG: (u32, u32) = (108, 10);
    /// Extension: local address bits 3:0 (requests; zero in messages).
    pub const EXT_FIRST_BYTE: (u32, u32) = (104, 4);
    /// Extension: length in bytes.
    pub const EXT_LEN: (u32, u32) = (91, 13);
    /// Extension: reserved, zero.
    pub const EXT_RESERVED: (u32, u32) = (64, 27);
    /// Extension: message value (zero in requests).
    pub const EXT_VALUE: (u32, u32) = (0, 64);
}

#[inline]
const fn get(w: u64, (shift, width): (u32, u32)) -> u64 {
    (w >> shift) & ((1u64 << width) - 1)
}

#[inline]
const fn put(w: &mut u64, (shift, width): (u32, u32), value: u64) {
    *w |= (value & ((1u64 << width) - 1)) << shift;
}

const fn get128(w: u128, (shift, width): (u32, u32)) -> u64 {
    ((w >> shift) & ((1u128 << width) - 1)) as u64
}

const fn put128(w: &mut u128, (shift, width): (u32, u32), value: u64) {
    *w |= (value as u128 & ((1u128 << width) - 1)) << shift;
}

/// The destination endpoint of any header, for routing (the field is in the same place in every header).
#[inline]
pub const fn destination(tl: u64) -> EndpointId {
    get(tl, field::DEST) as EndpointId
}

/// The opcode bits of any header.
#[inline]
pub const fn opcode_bits(tl: u64) -> u8 {
    get(tl, field::OPCODE) as u8
}

/// Operations, 5 bits. Each travels on one virtual channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Opcode {
    /// Posted write of whole flits: header and 1 to 8 data flits.
    PostedWrite = 0x01,
    /// Posted write with byte enables: header, byte-enable flit, 1 to 8 data flits.
    PostedWritePartial = 0x02,
    /// Message (doorbell, interrupt, vendor-defined): header, extension, 0 to 8 data flits.
    Message = 0x03,
    /// Memory read of 1 to 4096 bytes: header and extension.
    Read = 0x08,
    /// Non-posted write of 1 to 128 bytes: header, extension, 1 to 8 data flits.
    Write = 0x09,
    /// Atomic fetch-and-add: header, extension, operand flit.
    FetchAdd = 0x0A,
    /// Atomic swap: header, extension, operand flit.
    Swap = 0x0B,
    /// Atomic compare-and-swap: header, extension, operand flit.
    CompareSwap = 0x0C,
    /// Completion, with data or status: header and 0 to 8 data flits.
    Completion = 0x10,
}

/// Opcodes kept for a coherence message set (CXL.cache-like requests, snoops and responses).
pub const COHERENCE_OPCODES: core::ops::RangeInclusive<u8> = 0x18..=0x1F;

impl Opcode {
    /// Every opcode, for tests and tables.
    pub const ALL: [Opcode; 9] = [
        Opcode::PostedWrite,
        Opcode::PostedWritePartial,
        Opcode::Message,
        Opcode::Read,
        Opcode::Write,
        Opcode::FetchAdd,
        Opcode::Swap,
        Opcode::CompareSwap,
        Opcode::Completion,
    ];

    /// The opcode numbered `bits`, or [`TlError::UnknownOpcode`].
    pub const fn from_bits(bits: u8) -> Result<Opcode, TlError> {
        Ok(match bits {
            0x01 => Opcode::PostedWrite,
            0x02 => Opcode::PostedWritePartial,
            0x03 => Opcode::Message,
            0x08 => Opcode::Read,
            0x09 => Opcode::Write,
            0x0A => Opcode::FetchAdd,
            0x0B => Opcode::Swap,
            0x0C => Opcode::CompareSwap,
            0x10 => Opcode::Completion,
            opcode => return Err(TlError::UnknownOpcode { opcode }),
        })
    }

    /// The opcode's number.
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// The virtual channel it travels on.
    pub const fn vc(self) -> Vc {
        match self {
            Opcode::PostedWrite | Opcode::PostedWritePartial | Opcode::Message => Vc::Posted,
            Opcode::Read | Opcode::Write | Opcode::FetchAdd | Opcode::Swap | Opcode::CompareSwap => {
                Vc::Request
            }
            Opcode::Completion => Vc::Response,
        }
    }

    /// Whether it is one of the atomics.
    pub const fn is_atomic(self) -> bool {
        matches!(self, Opcode::FetchAdd | Opcode::Swap | Opcode::CompareSwap)
    }

    /// Whether its header carries a local address (every memory request).
    pub const fn is_memory_request(self) -> bool {
        !matches!(self, Opcode::Message | Opcode::Completion)
    }
}

/// What a completion says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Status {
    /// Done; a read's or atomic's data follows.
    Success = 0,
    /// The request was malformed, or of a kind the completer does not support.
    UnsupportedRequest = 1,
    /// The request was well formed but refused: outside the exposed memory, or not permitted.
    CompleterAbort = 2,
    /// The data could not be read intact (an uncorrectable memory error).
    Poisoned = 3,
}

impl Status {
    /// The status numbered `bits` (two bits, so every value is one).
    pub const fn from_bits(bits: u8) -> Status {
        match bits & 3 {
            0 => Status::Success,
            1 => Status::UnsupportedRequest,
            2 => Status::CompleterAbort,
            _ => Status::Poisoned,
        }
    }
}

/// Kinds of message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MessageCode {
    /// Ring doorbell `index` with the 64-bit value.
    Doorbell = 0x01,
    /// Raise interrupt vector `index` with the 64-bit value as its data.
    Interrupt = 0x02,
    /// Vendor-defined: `index` is the vendor ID; the value and data flits are the vendor's.
    VendorDefined = 0x7F,
}

impl MessageCode {
    /// The code numbered `code`, or [`TlError::UnknownMessage`].
    pub const fn from_bits(code: u8) -> Result<MessageCode, TlError> {
        match code {
            0x01 => Ok(MessageCode::Doorbell),
            0x02 => Ok(MessageCode::Interrupt),
            0x7F => Ok(MessageCode::VendorDefined),
            code => Err(TlError::UnknownMessage { code }),
        }
    }
}

/// The parsed header of a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CompletionHeader {
    /// Where it goes: the requester.
    pub requester: EndpointId,
    /// Who completes: the request's destination.
    pub completer: EndpointId,
    /// The request's tag.
    pub tag: Tag,
    /// What happened.
    pub status: Status,
    /// Byte offset in the request of the first data byte (always 0 without data).
    pub offset: u16,
    /// Data bytes, 0 (no data) to 128.
    pub len: u8,
}

impl CompletionHeader {
    /// Parse a completion's header; any other opcode is [`TlError::UnknownOpcode`] here.
    #[inline]
    pub fn parse(tl: u64) -> Result<CompletionHeader, TlError> {
        let opcode = opcode_bits(tl);
        if opcode != Opcode::Completion.bits() {
            return Err(TlError::UnknownOpcode { opcode });
        }
        Self::fields(tl)
    }

    #[inline]
    fn fields(tl: u64) -> Result<CompletionHeader, TlError> {
        let has_data = get(tl, field::CPL_DATA) == 1;
        let len_field = get(tl, field::CPL_LEN) as u8;
        let offset = get(tl, field::CPL_OFFSET);
        if get(tl, field::CPL_RESERVED) != 0 || (!has_data && (len_field != 0 || offset != 0)) {
            return Err(TlError::ReservedBits);
        }
        // A piece of a request of at most 4096 bytes ends within it.
        if has_data && offset as usize + usize::from(len_field) + 1 > MAX_READ {
            return Err(TlError::BadLength {
                len: offset as usize + usize::from(len_field) + 1,
            });
        }
        let status = Status::from_bits(get(tl, field::CPL_STATUS) as u8);
        if has_data && status != Status::Success {
            return Err(TlError::DataOnFailure { status });
        }
        Ok(CompletionHeader {
            requester: destination(tl),
            completer: get(tl, field::CPL_COMPLETER) as EndpointId,
            tag: get(tl, field::CPL_TAG) as Tag,
            status,
            offset: offset as u16,
            len: if has_data { len_field + 1 } else { 0 },
        })
    }
}

/// A parsed 58-bit transaction-layer header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Header {
    /// A memory request (posted or non-posted write, read, atomic).
    Request {
        /// Which request ([`Opcode::is_memory_request`]).
        opcode: Opcode,
        /// The destination endpoint.
        dest: EndpointId,
        /// The local address of the first data flit (16-byte aligned; the extension adds bits 3:0).
        addr: u64,
    },
    /// A message.
    Message {
        /// The destination endpoint.
        dest: EndpointId,
        /// What kind.
        code: MessageCode,
        /// Doorbell number, interrupt vector or vendor ID.
        index: u16,
    },
    /// A completion.
    Completion(CompletionHeader),
}

/// `endpoint` as a header field, or [`TlError::EndpointOutOfRange`].
pub(crate) fn check_endpoint(endpoint: EndpointId) -> Result<u64, TlError> {
    if usize::from(endpoint) < MAX_ENDPOINTS {
        Ok(u64::from(endpoint))
    } else {
        Err(TlError::EndpointOutOfRange { endpoint })
    }
}

fn check_tag(tag: Tag) -> Result<u64, TlError> {
    if usize::from(tag) < MAX_TAGS {
        Ok(u64::from(tag))
    } else {
        Err(TlError::TagOutOfRange { tag })
    }
}

impl Header {
    /// Parse the 58-bit header (bits above 57 are ignored: the data link never delivers them).
    #[inline]
    pub fn parse(tl: u64) -> Result<Header, TlError> {
        let opcode = Opcode::from_bits(opcode_bits(tl))?;
        let dest = destination(tl);
        Ok(match opcode {
            Opcode::Message => {
                if get(tl, field::MSG_RESERVED) != 0 {
                    return Err(TlError::ReservedBits);
                }
                Header::Message {
                    dest,
                    code: MessageCode::from_bits(get(tl, field::MSG_CODE) as u8)?,
                    index: get(tl, field::MSG_INDEX) as u16,
                }
            }
            Opcode::Completion => Header::Completion(CompletionHeader::fields(tl)?),
            _ => Header::Request {
                opcode,
                dest,
                addr: get(tl, field::ADDR) << 4,
            },
        })
    }

    /// The 58-bit header, or an error for a field out of its range.
    pub fn emit(&self) -> Result<u64, TlError> {
        let mut tl = 0u64;
        match *self {
            Header::Request { opcode, dest, addr } => {
                if !opcode.is_memory_request() {
                    return Err(TlError::UnknownOpcode {
                        opcode: opcode.bits(),
                    });
                }
                if addr >> LOCAL_ADDRESS_BITS != 0 {
                    return Err(TlError::AddressTooWide { addr });
                }
                if addr % FLIT_LEN as u64 != 0 {
                    return Err(TlError::ReservedBits);
                }
                put(&mut tl, field::OPCODE, u64::from(opcode.bits()));
                put(&mut tl, field::DEST, check_endpoint(dest)?);
                put(&mut tl, field::ADDR, addr >> 4);
            }
            Header::Message { dest, code, index } => {
                put(&mut tl, field::OPCODE, u64::from(Opcode::Message.bits()));
                put(&mut tl, field::DEST, check_endpoint(dest)?);
                put(&mut tl, field::MSG_CODE, code as u64);
                put(&mut tl, field::MSG_INDEX, u64::from(index));
            }
            Header::Completion(c) => {
                if c.len > 0 && c.status != Status::Success {
                    return Err(TlError::DataOnFailure { status: c.status });
                }
                if usize::from(c.len) > MAX_DATA {
                    return Err(TlError::BadLength {
                        len: usize::from(c.len),
                    });
                }
                if usize::from(c.offset) + usize::from(c.len) > MAX_READ || (c.len == 0 && c.offset != 0) {
                    return Err(TlError::BadLength {
                        len: usize::from(c.offset) + usize::from(c.len),
                    });
                }
                put(&mut tl, field::OPCODE, u64::from(Opcode::Completion.bits()));
                put(&mut tl, field::DEST, check_endpoint(c.requester)?);
                put(&mut tl, field::CPL_COMPLETER, check_endpoint(c.completer)?);
                put(&mut tl, field::CPL_TAG, check_tag(c.tag)?);
                put(&mut tl, field::CPL_STATUS, c.status as u64);
                put(&mut tl, field::CPL_OFFSET, u64::from(c.offset));
                if c.len > 0 {
                    put(&mut tl, field::CPL_DATA, 1);
                    put(&mut tl, field::CPL_LEN, u64::from(c.len - 1));
                }
            }
        }
        Ok(tl)
    }

    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        match *self {
            Header::Request { opcode, .. } => opcode,
            Header::Message { .. } => Opcode::Message,
            Header::Completion(_) => Opcode::Completion,
        }
    }

    /// The destination endpoint.
    pub const fn dest(&self) -> EndpointId {
        match *self {
            Header::Request { dest, .. } | Header::Message { dest, .. } => dest,
            Header::Completion(c) => c.requester,
        }
    }
}

/// The parsed extension flit of a non-posted request or a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Extension {
    /// The requester (where the completion goes), or a message's source.
    pub requester: EndpointId,
    /// The request's tag (zero in messages).
    pub tag: Tag,
    /// Local address bits 3:0: where in the first 16 bytes the request starts (zero in messages).
    pub first_byte: u8,
    /// Length in bytes: read 1-4096, write 1-128, atomic 4 or 8, message data 0-128.
    pub len: u16,
    /// A message's value (zero in requests).
    pub value: u64,
}

impl Extension {
    /// Parse an extension flit.
    pub fn parse(flit: &Flit) -> Result<Extension, TlError> {
        let x = u128::from_be_bytes(*flit);
        if get128(x, field::EXT_RESERVED) != 0 {
            return Err(TlError::ReservedBits);
        }
        let len = get128(x, field::EXT_LEN) as u16;
        if usize::from(len) > MAX_READ {
            return Err(TlError::BadLength {
                len: usize::from(len),
            });
        }
        let (requester, tag) = Self::requester_and_tag(flit);
        Ok(Extension {
            requester,
            tag,
            first_byte: get128(x, field::EXT_FIRST_BYTE) as u8,
            len,
            value: get128(x, field::EXT_VALUE),
        })
    }

    /// The requester and tag fields of an extension flit, read whatever its other fields hold: who to
    /// answer about a request that cannot be served, even one whose extension is malformed.
    pub fn requester_and_tag(flit: &Flit) -> (EndpointId, Tag) {
        let x = u128::from_be_bytes(*flit);
        (
            get128(x, field::EXT_REQUESTER) as EndpointId,
            get128(x, field::EXT_TAG) as Tag,
        )
    }

    /// The flit, or an error for a field out of its range.
    pub fn emit(&self) -> Result<Flit, TlError> {
        if usize::from(self.len) > MAX_READ {
            return Err(TlError::BadLength {
                len: usize::from(self.len),
            });
        }
        if usize::from(self.first_byte) >= FLIT_LEN {
            return Err(TlError::ReservedBits);
        }
        let mut x = 0u128;
        put128(&mut x, field::EXT_REQUESTER, check_endpoint(self.requester)?);
        put128(&mut x, field::EXT_TAG, check_tag(self.tag)?);
        put128(&mut x, field::EXT_FIRST_BYTE, u64::from(self.first_byte));
        put128(&mut x, field::EXT_LEN, u64::from(self.len));
        put128(&mut x, field::EXT_VALUE, self.value);
        Ok(x.to_be_bytes())
    }
}
