//! Packetization: a transfer of any length and alignment becomes packets whose data never crosses a
//! 128-byte boundary (read requests: a 4096-byte one), and read completions are reassembled per tag.
//!
//! - [`Pieces`]: the geometry alone. A global range is cut at address-map windows and at every multiple
//!   of the boundary; the pieces tile the range exactly, in order.
//! - [`PostedWrites`]: pieces of a buffer as posted-write packets (header + data flits for aligned 128-byte
//!   pieces, a byte-enable flit only for partial first and last pieces).
//! - [`Requests`]: reads or non-posted writes, each under a tag from the [`Outstanding`] table.
//! - [`ReadCompletions`]: the completer's side, one completion per 128-byte block of a read.
//! - [`Reassembler`]: the requester's side, placing completion data where its request's cookie says.

use link_dl::flit::FLIT_LEN;

use crate::address::{AddressMap, Span};
use crate::error::TlError;
use crate::header::{check_endpoint, CompletionHeader, EndpointId, Status, MAX_DATA, MAX_READ};
use crate::packet::{Completion, Packet, Read, RequestId, Tlp, Write};
use crate::tags::{Delivery, Outstanding, Request, RequestKind};
use link_phy::time::Instant;

/// A piece of a transfer: `len` bytes at `local` of `endpoint`, `offset` bytes into the transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Piece {
    /// The endpoint.
    pub endpoint: EndpointId,
    /// The local address of its first byte.
    pub local: u64,
    /// Where it starts in the transfer.
    pub offset: u64,
    /// Bytes, 1 to the boundary.
    pub len: usize,
}

/// The pieces of `len` bytes at a global address: cut at window ends and at multiples of `boundary`.
/// An unmapped address ends the iteration with [`TlError::Unmapped`].
#[derive(Clone, Debug)]
pub struct Pieces<'m, const W: usize> {
    map: &'m AddressMap<W>,
    global: u64,
    len: u64,
    done: u64,
    span: Span,
    boundary: u64,
    failed: bool,
}

impl<'m, const W: usize> Pieces<'m, W> {
    /// Pieces of at most 128 bytes, for data packets.
    pub fn data(map: &'m AddressMap<W>, global: u64, len: u64) -> Self {
        Self::with_boundary(map, global, len, MAX_DATA as u64)
    }

    /// Pieces of at most 4096 bytes, for read requests.
    pub fn reads(map: &'m AddressMap<W>, global: u64, len: u64) -> Self {
        Self::with_boundary(map, global, len, MAX_READ as u64)
    }

    fn with_boundary(map: &'m AddressMap<W>, global: u64, len: u64, boundary: u64) -> Self {
        let span = Span {
            endpoint: 0,
            local: 0,
            len: 0,
        };
        Pieces {
            map,
            global,
            len,
            done: 0,
            span,
            boundary,
            failed: false,
        }
    }

    /// Bytes not yet cut into pieces.
    pub fn remaining(&self) -> u64 {
        self.len - self.done
    }
}

impl<const W: usize> Iterator for Pieces<'_, W> {
    type Item = Result<Piece, TlError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done == self.len || self.failed {
            return None;
        }
        if self.span.len == 0 {
            let global = self
                .global
                .checked_add(self.done)
                .ok_or(TlError::Unmapped { global: u64::MAX });
            match global.and_then(|g| self.map.resolve(g)) {
                Ok(span) => self.span = span,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let to_boundary = self.boundary - self.span.local % self.boundary;
        let len = to_boundary.min(self.span.len).min(self.len - self.done);
        let piece = Piece {
            endpoint: self.span.endpoint,
            local: self.span.local,
            offset: self.done,
            len: len as usize,
        };
        self.span.local += len;
        self.span.len -= len;
        self.done += len;
        Some(Ok(piece))
    }
}

/// A buffer written to a global address as posted writes.
#[derive(Clone, Debug)]
pub struct PostedWrites<'a, 'm, const W: usize> {
    pieces: Pieces<'m, W>,
    data: &'a [u8],
}

impl<'a, 'm, const W: usize> PostedWrites<'a, 'm, W> {
    /// Posted writes of `data` to global address `global`.
    pub fn new(map: &'m AddressMap<W>, global: u64, data: &'a [u8]) -> Self {
        PostedWrites {
            pieces: Pieces::data(map, global, data.len() as u64),
            data,
        }
    }

    /// The next packet, written into `out`; `None` when every byte is in a packet.
    #[inline]
    pub fn next_into(&mut self, out: &mut Packet) -> Option<Result<(), TlError>> {
        let piece = match self.pieces.next()? {
            Ok(piece) => piece,
            Err(e) => return Some(Err(e)),
        };
        let at = piece.offset as usize;
        let bytes = &self.data[at..at + piece.len];
        Some(out.posted_write(piece.endpoint, piece.local, bytes))
    }
}

impl<const W: usize> Iterator for PostedWrites<'_, '_, W> {
    type Item = Result<Packet, TlError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut packet = Packet::new();
        self.next_into(&mut packet).map(|r| r.map(|()| packet))
    }
}

/// Reads of a global range, or non-posted writes of a buffer to one, each under its own tag. The cookie
/// of each request is its offset in the transfer, which is where [`Reassembler`] puts a read's bytes.
#[derive(Clone, Debug)]
pub struct Requests<'a, 'm, const W: usize> {
    pieces: Pieces<'m, W>,
    /// `None` for reads.
    data: Option<&'a [u8]>,
    requester: EndpointId,
    /// A piece whose request could not be issued yet (no free tag).
    held: Option<Piece>,
    /// Added to each piece's offset to make its cookie.
    cookie_base: u64,
}

impl<'a, 'm, const W: usize> Requests<'a, 'm, W> {
    /// Reads of `len` bytes at `global`, asked by `requester`: up to 4096 bytes per request.
    pub fn reads(map: &'m AddressMap<W>, global: u64, len: u64, requester: EndpointId) -> Self {
        Requests {
            pieces: Pieces::reads(map, global, len),
            data: None,
            requester,
            held: None,
            cookie_base: 0,
        }
    }

    /// The same requests with cookies counted from `offset` (the range's offset in a larger transfer).
    pub fn with_cookies_from(self, offset: u64) -> Self {
        Requests {
            cookie_base: offset,
            ..self
        }
    }

    /// Non-posted writes of `data` to `global`, by `requester`: up to 128 bytes per request.
    pub fn writes(map: &'m AddressMap<W>, global: u64, data: &'a [u8], requester: EndpointId) -> Self {
        let pieces = Pieces::data(map, global, data.len() as u64);
        Requests {
            pieces,
            data: Some(data),
            requester,
            held: None,
            cookie_base: 0,
        }
    }

    /// The next request, under a tag from `table`, written into `out`; `None` when all are issued.
    /// [`TlError::NoFreeTag`] leaves the piece for the next call; a requester ID no header can carry
    /// ([`TlError::EndpointOutOfRange`]) refuses every call, taking neither a piece nor a tag.
    pub fn next_into<const N: usize>(
        &mut self,
        table: &mut Outstanding<N>,
        now: Instant,
        out: &mut Packet,
    ) -> Option<Result<(), TlError>> {
        // A request its header cannot carry is refused whole: it must not drop its piece, nor take a
        // tag it would hold until it timed out.
        if let Err(e) = check_endpoint(self.requester) {
            return Some(Err(e));
        }
        let piece = match self.held.take() {
            Some(piece) => piece,
            None => match self.pieces.next()? {
                Ok(piece) => piece,
                Err(e) => return Some(Err(e)),
            },
        };
        let kind = match self.data {
            None => RequestKind::Read {
                len: piece.len as u16,
            },
            Some(_) => RequestKind::Write,
        };
        let request = Request {
            dest: piece.endpoint,
            addr: piece.local,
            kind,
            cookie: self.cookie_base + piece.offset,
        };
        let tag = match table.allocate(now, request) {
            Ok(tag) => tag,
            Err(e) => {
                self.held = Some(piece);
                return Some(Err(e));
            }
        };
        let id = RequestId {
            requester: self.requester,
            tag,
        };
        let tlp = match self.data {
            None => Tlp::Read(Read {
                dest: piece.endpoint,
                addr: piece.local,
                len: piece.len as u16,
                id,
            }),
            Some(data) => {
                let at = piece.offset as usize;
                Tlp::Write(Write {
                    dest: piece.endpoint,
                    addr: piece.local,
                    id,
                    data: &data[at..at + piece.len],
                })
            }
        };
        Some(tlp.emit(out))
    }

    /// Whether every request has been issued.
    pub fn is_done(&self) -> bool {
        self.held.is_none() && self.pieces.remaining() == 0
    }
}

/// The completer's answer to a read: one completion per 128-byte block the read touches, each with that
/// block's part of `data` (the bytes read, `read.len` of them).
#[derive(Clone, Debug)]
pub struct ReadCompletions<'a> {
    read: Read,
    completer: EndpointId,
    data: &'a [u8],
    offset: usize,
}

impl<'a> ReadCompletions<'a> {
    /// Completions of `read`, by `completer`, carrying `data`; [`TlError::BufferTooSmall`] unless `data`
    /// holds exactly the bytes asked for.
    pub fn new(read: Read, completer: EndpointId, data: &'a [u8]) -> Result<Self, TlError> {
        if data.len() != usize::from(read.len) {
            return Err(TlError::BufferTooSmall {
                needed: usize::from(read.len),
                got: data.len(),
            });
        }
        Ok(ReadCompletions {
            read,
            completer,
            data,
            offset: 0,
        })
    }

    /// The next completion, written into `out`; `None` after the last.
    #[inline]
    pub fn next_into(&mut self, out: &mut Packet) -> Option<Result<(), TlError>> {
        if self.offset >= self.data.len() {
            return None;
        }
        let addr = self.read.addr + self.offset as u64;
        let len = (MAX_DATA - (addr % MAX_DATA as u64) as usize).min(self.data.len() - self.offset);
        let header = CompletionHeader {
            requester: self.read.id.requester,
            completer: self.completer,
            tag: self.read.id.tag,
            status: Status::Success,
            offset: self.offset as u16,
            len: len as u8,
        };
        let data = &self.data[self.offset..self.offset + len];
        self.offset += len;
        Some(Tlp::Completion(Completion { header, data }).emit(out))
    }
}

impl Iterator for ReadCompletions<'_> {
    type Item = Result<Packet, TlError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut packet = Packet::new();
        self.next_into(&mut packet).map(|r| r.map(|()| packet))
    }
}

/// Reassembly of read completions into the caller's buffer, per tag, in whatever order they arrive.
#[derive(Debug)]
pub struct Reassembler<'d> {
    dst: &'d mut [u8],
}

impl<'d> Reassembler<'d> {
    /// Completions of requests whose cookie is an offset into `dst` (as [`Requests::reads`] issues
    /// them) land there.
    pub fn new(dst: &'d mut [u8]) -> Self {
        Reassembler { dst }
    }

    /// Match `completion` to its request in `table` and copy its data into place. A completion the table
    /// refuses (unknown or late tag, wrong completer, duplicate or misplaced piece) changes nothing.
    /// `dst` must be as long as the transfer; a completion that lands past its end is refused with
    /// [`TlError::BufferTooSmall`] (after the table counted it).
    #[inline]
    pub fn accept<const N: usize>(
        &mut self,
        table: &mut Outstanding<N>,
        now: Instant,
        completion: &Completion<'_>,
    ) -> Result<Delivery, TlError> {
        let delivery = table.complete(now, &completion.header)?;
        // A cookie from `Requests` and an offset the table accepted always land inside a buffer as long
        // as the transfer; a shorter buffer is the caller's mistake, reported rather than written past.
        let len = completion.data.len();
        let got = self.dst.len();
        let end = delivery
            .cookie
            .saturating_add(u64::from(delivery.offset) + len as u64);
        if end > got as u64 {
            return Err(TlError::BufferTooSmall {
                needed: usize::try_from(end).unwrap_or(usize::MAX),
                got,
            });
        }
        let end = end as usize;
        self.dst[end - len..end].copy_from_slice(completion.data);
        Ok(delivery)
    }

    /// The buffer.
    pub fn buffer(&self) -> &[u8] {
        self.dst
    }
}

/// Data flits a piece of `len` bytes at local `addr` takes in a posted write (the byte-enable flit aside).
pub const fn data_flits(addr: u64, len: usize) -> usize {
    ((addr % FLIT_LEN as u64) as usize + len).div_ceil(FLIT_LEN)
}
