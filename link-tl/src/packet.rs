//! Whole transaction-layer packets: [`Packet`] holds one as the data link sends it (channel, 58-bit
//! header, flits after the header), and [`Tlp`] is its parsed, validated form, which borrows the data
//! flits in place instead of copying them.
//!
//! Data placement (spec section 3.4): write data sits in its data flits where it sits in memory (byte `a`
//! of the local address space in byte `a % 16` of its flit), so a partial write's byte enables are one bit
//! per flit byte. Completion and message data start at byte 0 of the first data flit.

use link_dl::flit::{Flit, FLIT_LEN, MAX_PAYLOAD_FLITS};
use link_dl::{Received, Vc};

use crate::error::TlError;
use crate::header::{
    CompletionHeader, EndpointId, Extension, Header, MessageCode, Opcode, Status, Tag, LOCAL_ADDRESS_BITS,
    MAX_DATA, MAX_DATA_FLITS, MAX_READ,
};

/// One packet as the data link carries it: its channel, its 58-bit header and the flits after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    vc: Vc,
    tl: u64,
    len: u8,
    flits: [Flit; MAX_PAYLOAD_FLITS],
}

impl Default for Packet {
    fn default() -> Self {
        Packet::new()
    }
}

impl Packet {
    /// An empty packet (fill it with [`Tlp::emit`] or [`Packet::posted_write`]).
    pub const fn new() -> Packet {
        Packet {
            vc: Vc::Posted,
            tl: 0,
            len: 0,
            flits: [[0; FLIT_LEN]; MAX_PAYLOAD_FLITS],
        }
    }

    /// A packet as received from the data link (not yet validated: parse it with [`Tlp::parse`]).
    pub fn from_received(r: &Received) -> Packet {
        let mut p = Packet {
            vc: r.vc,
            tl: r.tl,
            len: r.payload.len() as u8,
            flits: [[0; FLIT_LEN]; MAX_PAYLOAD_FLITS],
        };
        p.flits[..r.payload.len()].copy_from_slice(&r.payload);
        p
    }

    /// The virtual channel.
    #[inline]
    pub fn vc(&self) -> Vc {
        self.vc
    }

    /// The 58-bit transaction-layer header.
    #[inline]
    pub fn tl(&self) -> u64 {
        self.tl
    }

    /// The flits after the header flit.
    #[inline]
    pub fn payload(&self) -> &[Flit] {
        &self.flits[..usize::from(self.len)]
    }

    /// Flits on the wire, the header flit included.
    #[inline]
    pub fn flits(&self) -> usize {
        1 + usize::from(self.len)
    }

    /// The destination endpoint (from the header's fixed routing field).
    #[inline]
    pub fn dest(&self) -> EndpointId {
        crate::header::destination(self.tl)
    }

    /// Parse this packet.
    #[inline(always)]
    pub fn parse(&self) -> Result<Tlp<'_>, TlError> {
        Tlp::parse(self.vc, self.tl, self.payload())
    }

    /// Fill `self` with a posted write of `bytes` to local address `addr` of `dest`: whole flits when the
    /// data is 16-byte aligned at both ends (header + data only), otherwise with a byte-enable flit. The
    /// data must not cross a 128-byte boundary. This is the packetizer's hot path.
    pub fn posted_write(&mut self, dest: EndpointId, addr: u64, bytes: &[u8]) -> Result<(), TlError> {
        let len = bytes.len();
        check_piece(addr, len, MAX_DATA)?;
        let first = (addr % FLIT_LEN as u64) as usize;
        let aligned = addr - first as u64;
        if first == 0 && len % FLIT_LEN == 0 {
            self.tl = Header::Request {
                opcode: Opcode::PostedWrite,
                dest,
                addr: aligned,
            }
            .emit()?;
            let n = len / FLIT_LEN;
            self.flits.as_flattened_mut()[..len].copy_from_slice(bytes);
            self.len = n as u8;
        } else {
            self.tl = Header::Request {
                opcode: Opcode::PostedWritePartial,
                dest,
                addr: aligned,
            }
            .emit()?;
            let n = (first + len).div_ceil(FLIT_LEN);
            // first + len <= 128 and len < 128 here, so the shift is in range.
            let mask = ((1u128 << len) - 1) << first;
            self.flits[0] = mask.to_le_bytes();
            let data = &mut self.flits[1..=n];
            data[0] = [0; FLIT_LEN];
            data[n - 1] = [0; FLIT_LEN];
            data.as_flattened_mut()[first..first + len].copy_from_slice(bytes);
            self.len = 1 + n as u8;
        }
        self.vc = Vc::Posted;
        Ok(())
    }
}

/// Check that `len` bytes at local `addr` are a legal piece: 1 to `boundary` bytes, not crossing a
/// multiple of `boundary`, inside the 47-bit local address space.
pub(crate) fn check_piece(addr: u64, len: usize, boundary: usize) -> Result<(), TlError> {
    if len == 0 || len > boundary {
        return Err(TlError::BadLength { len });
    }
    if (addr % boundary as u64) as usize + len > boundary {
        return Err(TlError::CrossesBoundary { addr, len });
    }
    if addr >> LOCAL_ADDRESS_BITS != 0 {
        return Err(TlError::AddressTooWide { addr });
    }
    Ok(())
}

/// Who asked, and under which tag: where a request's completion goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RequestId {
    /// The requester's endpoint.
    pub requester: EndpointId,
    /// The requester's tag.
    pub tag: Tag,
}

/// A posted write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostedWrite<'a> {
    /// The destination endpoint.
    pub dest: EndpointId,
    /// The local address of the first data flit (16-byte aligned).
    pub addr: u64,
    /// One bit per data byte (bit `i` for byte `i` of `data`), or `None`: every byte is written.
    pub enables: Option<u128>,
    /// The data flits' bytes, 16 to 128 (a whole number of flits).
    pub data: &'a [u8],
}

/// A memory read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read {
    /// The destination endpoint.
    pub dest: EndpointId,
    /// The local address of the first byte.
    pub addr: u64,
    /// Bytes, 1 to 4096, not crossing a 4096-byte boundary.
    pub len: u16,
    /// Where the completions go.
    pub id: RequestId,
}

/// A non-posted write (its completion says it is done).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write<'a> {
    /// The destination endpoint.
    pub dest: EndpointId,
    /// The local address of the first byte.
    pub addr: u64,
    /// Where the completion goes.
    pub id: RequestId,
    /// The bytes, 1 to 128, not crossing a 128-byte boundary.
    pub data: &'a [u8],
}

/// Which atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AtomicOp {
    /// Add the operand; return the old value.
    FetchAdd,
    /// Store the operand; return the old value.
    Swap,
    /// Store the operand if the old value equals `compare`; return the old value.
    CompareSwap,
}

impl AtomicOp {
    const fn opcode(self) -> Opcode {
        match self {
            AtomicOp::FetchAdd => Opcode::FetchAdd,
            AtomicOp::Swap => Opcode::Swap,
            AtomicOp::CompareSwap => Opcode::CompareSwap,
        }
    }
}

/// An atomic read-modify-write of 4 or 8 bytes, little-endian in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Atomic {
    /// The destination endpoint.
    pub dest: EndpointId,
    /// Which operation.
    pub op: AtomicOp,
    /// The local address, aligned to `size`.
    pub addr: u64,
    /// Operand size in bytes, 4 or 8.
    pub size: u8,
    /// Where the completion (with the old value) goes.
    pub id: RequestId,
    /// The addend or the new value (the low `size` bytes count).
    pub operand: u64,
    /// Compare-and-swap's expected value (zero for the others).
    pub compare: u64,
}

/// A message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The destination endpoint.
    pub dest: EndpointId,
    /// What kind.
    pub code: MessageCode,
    /// Doorbell number, interrupt vector or vendor ID.
    pub index: u16,
    /// The sender.
    pub source: EndpointId,
    /// The 64-bit value (doorbell value, interrupt data, vendor's).
    pub value: u64,
    /// Data bytes, 0 to 128.
    pub data: &'a [u8],
}

/// A completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion<'a> {
    /// Its header (`header.len` is `data.len()`).
    pub header: CompletionHeader,
    /// The data bytes, 0 to 128.
    pub data: &'a [u8],
}

/// A parsed, validated transaction-layer packet, borrowing its data from the flits it was parsed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tlp<'a> {
    /// A posted write.
    PostedWrite(PostedWrite<'a>),
    /// A read.
    Read(Read),
    /// A non-posted write.
    Write(Write<'a>),
    /// An atomic.
    Atomic(Atomic),
    /// A message.
    Message(Message<'a>),
    /// A completion.
    Completion(Completion<'a>),
}

fn flit_count_error(opcode: Opcode, flits: usize) -> TlError {
    TlError::FlitCount {
        opcode: opcode.bits(),
        flits,
    }
}

fn le_value(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(b)
}

impl<'a> Completion<'a> {
    /// Parse a completion (received on the response channel); any other opcode is an error. This is the
    /// requester's hot path, so it is apart from [`Tlp::parse`], which calls it.
    #[inline]
    pub fn parse(tl: u64, payload: &'a [Flit]) -> Result<Completion<'a>, TlError> {
        Self::with_header(CompletionHeader::parse(tl)?, payload)
    }

    #[inline]
    fn with_header(header: CompletionHeader, payload: &'a [Flit]) -> Result<Completion<'a>, TlError> {
        let len = usize::from(header.len);
        if payload.len() != len.div_ceil(FLIT_LEN) {
            return Err(flit_count_error(Opcode::Completion, payload.len()));
        }
        Ok(Completion {
            header,
            data: &payload.as_flattened()[..len],
        })
    }
}

impl<'a> Tlp<'a> {
    /// Parse a packet received on `vc` with header `tl` and `payload` after the header flit. Every
    /// malformed input is a typed error; nothing here panics or reads out of bounds.
    #[inline(always)]
    pub fn parse(vc: Vc, tl: u64, payload: &'a [Flit]) -> Result<Tlp<'a>, TlError> {
        // Completions are the requester's hot path: straight to their parser.
        if vc == Vc::Response && crate::header::opcode_bits(tl) == Opcode::Completion.bits() {
            return Completion::parse(tl, payload).map(Tlp::Completion);
        }
        Self::parse_other(vc, tl, payload)
    }

    #[inline(never)]
    fn parse_other(vc: Vc, tl: u64, payload: &'a [Flit]) -> Result<Tlp<'a>, TlError> {
        let header = Header::parse(tl)?;
        let opcode = header.opcode();
        if opcode.vc() != vc {
            return Err(TlError::WrongChannel {
                opcode: opcode.bits(),
                vc,
            });
        }
        let flits = payload.len();
        match header {
            Header::Completion(header) => Completion::with_header(header, payload).map(Tlp::Completion),
            Header::Message { dest, code, index } => {
                let (ext, rest) = split_extension(opcode, payload)?;
                if ext.tag != 0 || ext.first_byte != 0 {
                    return Err(TlError::ReservedBits);
                }
                let len = usize::from(ext.len);
                if len > MAX_DATA {
                    return Err(TlError::BadLength { len });
                }
                if rest.len() != len.div_ceil(FLIT_LEN) {
                    return Err(flit_count_error(opcode, flits));
                }
                let data = &rest.as_flattened()[..len];
                Ok(Tlp::Message(Message {
                    dest,
                    code,
                    index,
                    source: ext.requester,
                    value: ext.value,
                    data,
                }))
            }
            Header::Request {
                opcode: Opcode::PostedWrite,
                dest,
                addr,
            } => {
                if flits == 0 || flits > MAX_DATA_FLITS {
                    return Err(flit_count_error(opcode, flits));
                }
                let data = payload.as_flattened();
                check_piece(addr, data.len(), MAX_DATA)?;
                Ok(Tlp::PostedWrite(PostedWrite {
                    dest,
                    addr,
                    enables: None,
                    data,
                }))
            }
            Header::Request {
                opcode: Opcode::PostedWritePartial,
                dest,
                addr,
            } => {
                let Some((be, data)) = payload.split_first() else {
                    return Err(flit_count_error(opcode, flits));
                };
                if data.is_empty() || data.len() > MAX_DATA_FLITS {
                    return Err(flit_count_error(opcode, flits));
                }
                let data = data.as_flattened();
                let mask = u128::from_le_bytes(*be);
                check_enables(mask, data.len())?;
                check_piece(addr, data.len(), MAX_DATA)?;
                Ok(Tlp::PostedWrite(PostedWrite {
                    dest,
                    addr,
                    enables: Some(mask),
                    data,
                }))
            }
            Header::Request {
                opcode: Opcode::Read,
                dest,
                addr,
            } => {
                let (ext, rest) = split_extension(opcode, payload)?;
                if !rest.is_empty() {
                    return Err(flit_count_error(opcode, flits));
                }
                let addr = addr | u64::from(ext.first_byte);
                check_piece(addr, usize::from(ext.len), MAX_READ)?;
                Ok(Tlp::Read(Read {
                    dest,
                    addr,
                    len: ext.len,
                    id: request_id(&ext),
                }))
            }
            Header::Request {
                opcode: Opcode::Write,
                dest,
                addr,
            } => {
                let (ext, rest) = split_extension(opcode, payload)?;
                let len = usize::from(ext.len);
                let first = usize::from(ext.first_byte);
                let addr = addr | first as u64;
                check_piece(addr, len, MAX_DATA)?;
                let room = rest.len() * FLIT_LEN;
                if first + len > room {
                    return Err(TlError::LengthOverrun {
                        needed: first + len,
                        room,
                    });
                }
                if rest.len() != (first + len).div_ceil(FLIT_LEN) {
                    return Err(flit_count_error(opcode, flits));
                }
                let data = &rest.as_flattened()[first..first + len];
                Ok(Tlp::Write(Write {
                    dest,
                    addr,
                    id: request_id(&ext),
                    data,
                }))
            }
            Header::Request { opcode, dest, addr } => {
                let op = match opcode {
                    Opcode::FetchAdd => AtomicOp::FetchAdd,
                    Opcode::Swap => AtomicOp::Swap,
                    Opcode::CompareSwap => AtomicOp::CompareSwap,
                    // Header::parse only returns memory-request opcodes here.
                    _ => {
                        return Err(TlError::UnknownOpcode {
                            opcode: opcode.bits(),
                        })
                    }
                };
                let (ext, rest) = split_extension(opcode, payload)?;
                let [operands] = rest else {
                    return Err(flit_count_error(opcode, flits));
                };
                let size = ext.len;
                if size != 4 && size != 8 {
                    return Err(TlError::BadLength {
                        len: usize::from(size),
                    });
                }
                let size = size as u8;
                let addr = addr | u64::from(ext.first_byte);
                if addr % u64::from(size) != 0 {
                    return Err(TlError::MisalignedAtomic { addr, size });
                }
                let s = usize::from(size);
                let compare = if op == AtomicOp::CompareSwap {
                    le_value(&operands[8..8 + s])
                } else {
                    0
                };
                Ok(Tlp::Atomic(Atomic {
                    dest,
                    op,
                    addr,
                    size,
                    id: request_id(&ext),
                    operand: le_value(&operands[..s]),
                    compare,
                }))
            }
        }
    }

    /// Write this packet into `out`, validating every field (the same rules [`Tlp::parse`] checks).
    pub fn emit(&self, out: &mut Packet) -> Result<(), TlError> {
        out.flits = [[0; FLIT_LEN]; MAX_PAYLOAD_FLITS];
        match *self {
            Tlp::PostedWrite(w) => {
                let n = w.data.len() / FLIT_LEN;
                if w.data.len() % FLIT_LEN != 0 || n == 0 || n > MAX_DATA_FLITS {
                    return Err(TlError::BadLength { len: w.data.len() });
                }
                check_piece(w.addr, w.data.len(), MAX_DATA)?;
                let opcode = if w.enables.is_some() {
                    Opcode::PostedWritePartial
                } else {
                    Opcode::PostedWrite
                };
                out.tl = Header::Request {
                    opcode,
                    dest: w.dest,
                    addr: w.addr,
                }
                .emit()?;
                let mut at = 0;
                if let Some(mask) = w.enables {
                    check_enables(mask, w.data.len())?;
                    out.flits[0] = mask.to_le_bytes();
                    at = 1;
                }
                out.flits[at..at + n].as_flattened_mut().copy_from_slice(w.data);
                out.len = (at + n) as u8;
            }
            Tlp::Read(r) => {
                check_piece(r.addr, usize::from(r.len), MAX_READ)?;
                out.tl = request_header(Opcode::Read, r.dest, r.addr)?;
                out.flits[0] = request_extension(r.id, r.addr, r.len)?;
                out.len = 1;
            }
            Tlp::Write(w) => {
                let len = w.data.len();
                check_piece(w.addr, len, MAX_DATA)?;
                out.tl = request_header(Opcode::Write, w.dest, w.addr)?;
                out.flits[0] = request_extension(w.id, w.addr, len as u16)?;
                let first = (w.addr % FLIT_LEN as u64) as usize;
                let n = (first + len).div_ceil(FLIT_LEN);
                out.flits[1..=n].as_flattened_mut()[first..first + len].copy_from_slice(w.data);
                out.len = 1 + n as u8;
            }
            Tlp::Atomic(a) => {
                if a.size != 4 && a.size != 8 {
                    return Err(TlError::BadLength {
                        len: usize::from(a.size),
                    });
                }
                if a.addr % u64::from(a.size) != 0 {
                    return Err(TlError::MisalignedAtomic {
                        addr: a.addr,
                        size: a.size,
                    });
                }
                out.tl = request_header(a.op.opcode(), a.dest, a.addr)?;
                out.flits[0] = request_extension(a.id, a.addr, u16::from(a.size))?;
                let s = usize::from(a.size);
                out.flits[1][..s].copy_from_slice(&a.operand.to_le_bytes()[..s]);
                if a.op == AtomicOp::CompareSwap {
                    out.flits[1][8..8 + s].copy_from_slice(&a.compare.to_le_bytes()[..s]);
                }
                out.len = 2;
            }
            Tlp::Message(m) => {
                let len = m.data.len();
                if len > MAX_DATA {
                    return Err(TlError::BadLength { len });
                }
                out.tl = Header::Message {
                    dest: m.dest,
                    code: m.code,
                    index: m.index,
                }
                .emit()?;
                out.flits[0] = Extension {
                    requester: m.source,
                    tag: 0,
                    first_byte: 0,
                    len: len as u16,
                    value: m.value,
                }
                .emit()?;
                let n = len.div_ceil(FLIT_LEN);
                out.flits[1..=n].as_flattened_mut()[..len].copy_from_slice(m.data);
                out.len = 1 + n as u8;
            }
            Tlp::Completion(c) => {
                let len = c.data.len();
                if len != usize::from(c.header.len) {
                    return Err(TlError::LengthOverrun {
                        needed: usize::from(c.header.len),
                        room: len,
                    });
                }
                out.tl = Header::Completion(c.header).emit()?;
                let n = len.div_ceil(FLIT_LEN);
                out.flits[..n].as_flattened_mut()[..len].copy_from_slice(c.data);
                out.len = n as u8;
            }
        }
        out.vc = self.opcode().vc();
        Ok(())
    }

    /// The opcode it is sent with.
    pub fn opcode(&self) -> Opcode {
        match self {
            Tlp::PostedWrite(w) if w.enables.is_some() => Opcode::PostedWritePartial,
            Tlp::PostedWrite(_) => Opcode::PostedWrite,
            Tlp::Read(_) => Opcode::Read,
            Tlp::Write(_) => Opcode::Write,
            Tlp::Atomic(a) => a.op.opcode(),
            Tlp::Message(_) => Opcode::Message,
            Tlp::Completion(_) => Opcode::Completion,
        }
    }

    /// The destination endpoint.
    pub fn dest(&self) -> EndpointId {
        match self {
            Tlp::PostedWrite(w) => w.dest,
            Tlp::Read(r) => r.dest,
            Tlp::Write(w) => w.dest,
            Tlp::Atomic(a) => a.dest,
            Tlp::Message(m) => m.dest,
            Tlp::Completion(c) => c.header.requester,
        }
    }

    /// The requester and tag of a non-posted request.
    pub fn request_id(&self) -> Option<RequestId> {
        match self {
            Tlp::Read(r) => Some(r.id),
            Tlp::Write(w) => Some(w.id),
            Tlp::Atomic(a) => Some(a.id),
            _ => None,
        }
    }
}

fn request_id(ext: &Extension) -> RequestId {
    RequestId {
        requester: ext.requester,
        tag: ext.tag,
    }
}

fn request_header(opcode: Opcode, dest: EndpointId, addr: u64) -> Result<u64, TlError> {
    Header::Request {
        opcode,
        dest,
        addr: addr & !(FLIT_LEN as u64 - 1),
    }
    .emit()
}

fn request_extension(id: RequestId, addr: u64, len: u16) -> Result<Flit, TlError> {
    Extension {
        requester: id.requester,
        tag: id.tag,
        first_byte: (addr % FLIT_LEN as u64) as u8,
        len,
        value: 0,
    }
    .emit()
}

fn split_extension(opcode: Opcode, payload: &[Flit]) -> Result<(Extension, &[Flit]), TlError> {
    let Some((ext, rest)) = payload.split_first() else {
        return Err(flit_count_error(opcode, 0));
    };
    let ext = Extension::parse(ext)?;
    // The value is a message's; in a request it is 0.
    if opcode != Opcode::Message && ext.value != 0 {
        return Err(TlError::ReservedBits);
    }
    Ok((ext, rest))
}

fn check_enables(mask: u128, room: usize) -> Result<(), TlError> {
    if mask == 0 {
        return Err(TlError::NoBytesEnabled);
    }
    let needed = 128 - mask.leading_zeros() as usize;
    if needed > room {
        return Err(TlError::LengthOverrun { needed, room });
    }
    Ok(())
}

/// The Unsupported Request completion for a packet that arrived on the request channel and could not be
/// served (unknown or reserved opcode, malformed fields), if it has the extension flit that says who to
/// answer: every packet on the request channel, whatever its opcode, starts its payload with the request
/// extension. Its requester and tag fields are read even when the extension's other fields are malformed.
pub fn unsupported_request_reply(vc: Vc, payload: &[Flit], completer: EndpointId, out: &mut Packet) -> bool {
    if vc != Vc::Request {
        return false;
    }
    let Some(ext) = payload.first() else {
        return false;
    };
    let (requester, tag) = Extension::requester_and_tag(ext);
    let id = RequestId { requester, tag };
    error_completion(id, completer, Status::UnsupportedRequest, out).is_ok()
}

/// Fill `out` with a completion without data that ends request `id` with `status` (any status: a
/// non-posted write's success is one too).
pub fn error_completion(
    id: RequestId,
    completer: EndpointId,
    status: Status,
    out: &mut Packet,
) -> Result<(), TlError> {
    let header = CompletionHeader {
        requester: id.requester,
        completer,
        tag: id.tag,
        status,
        offset: 0,
        len: 0,
    };
    Tlp::Completion(Completion { header, data: &[] }).emit(out)
}

/// Counts of received packets by what parsing made of them: what a person debugging a receiver looks at
/// first. They only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxCounters {
    /// Packets that parsed.
    pub parsed: u64,
    /// Packets with an opcode this layer does not implement (reserved or coherence).
    pub unknown_opcode: u64,
    /// Packets on a channel their opcode does not travel on.
    pub wrong_channel: u64,
    /// Other malformed packets (reserved bits, lengths, flit counts, boundaries, alignment).
    pub malformed: u64,
}

impl RxCounters {
    /// Count the outcome of [`Tlp::parse`].
    pub fn record(&mut self, parsed: &Result<Tlp<'_>, TlError>) {
        match parsed {
            Ok(_) => self.parsed += 1,
            Err(TlError::UnknownOpcode { .. }) => self.unknown_opcode += 1,
            Err(TlError::WrongChannel { .. }) => self.wrong_channel += 1,
            Err(_) => self.malformed += 1,
        }
    }
}
