//! The memory an endpoint exposes to its peers: a [`Memory`] is anything that can check, read and write
//! byte ranges of a local address space `0..size`. `[u8]` is one (plain RAM); firmware implements the
//! trait over its registers (with side effects on read, read-only ranges, ...).
//!
//! The completer always calls [`Memory::check`] for a request's whole range before it touches a byte, so
//! a request that is refused never changes memory.

/// What a request wants to do with a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Access {
    /// Read it (a memory read, or the requester's own copy to a peer).
    Read,
    /// Write it (posted or non-posted writes, read data arriving at the requester).
    Write,
    /// Read it and write it back in one step (an atomic).
    Atomic,
}

/// Why a memory access cannot be done. The completer answers the first two with Completer Abort and the
/// last with Poisoned (spec section 3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MemoryError {
    /// Some byte of the range is outside the exposed memory.
    OutOfRange {
        /// The local address of the first byte.
        addr: u64,
        /// Bytes.
        len: usize,
    },
    /// The range exists but this access is not permitted (a read-only register, a protected range).
    Denied {
        /// The local address of the first byte.
        addr: u64,
    },
    /// The data could not be read intact (an uncorrectable memory error).
    Poisoned {
        /// The local address of the first byte.
        addr: u64,
    },
}

impl core::fmt::Display for MemoryError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            MemoryError::OutOfRange { addr, len } => {
                write!(f, "{len} bytes at {addr:#x} are outside the exposed memory")
            }
            MemoryError::Denied { addr } => write!(f, "access at {addr:#x} is not permitted"),
            MemoryError::Poisoned { addr } => write!(f, "uncorrectable error reading {addr:#x}"),
        }
    }
}

impl core::error::Error for MemoryError {}

/// Whether `len` bytes at `addr` lie in `0..size` (overflow-safe).
pub fn in_range(size: u64, addr: u64, len: usize) -> Result<(), MemoryError> {
    match addr.checked_add(len as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(MemoryError::OutOfRange { addr, len }),
    }
}

/// A local address space `0..size` that peers read, write and update atomically.
pub trait Memory {
    /// Bytes exposed: local addresses `0..size`.
    fn size(&self) -> u64;

    /// Whether `len` bytes at `addr` may be accessed so. Called for a request's whole range before any
    /// byte of it is read or written; the default allows every access inside `0..size`.
    fn check(&self, addr: u64, len: usize, access: Access) -> Result<(), MemoryError> {
        let _ = access;
        in_range(self.size(), addr, len)
    }

    /// Read `out.len()` bytes at `addr` (a range [`Memory::check`] allowed).
    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError>;

    /// Write `data` at `addr` (a range [`Memory::check`] allowed).
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError>;
}

/// Plain RAM: local address `a` is byte `a` of the slice.
impl Memory for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        in_range(self.size(), addr, out.len())?;
        let at = addr as usize;
        out.copy_from_slice(&self[at..at + out.len()]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        in_range(self.size(), addr, data.len())?;
        let at = addr as usize;
        self[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }
}

impl<T: Memory + ?Sized> Memory for &mut T {
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn check(&self, addr: u64, len: usize, access: Access) -> Result<(), MemoryError> {
        (**self).check(addr, len, access)
    }
    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        (**self).read(addr, out)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        (**self).write(addr, data)
    }
}

impl<const K: usize> Memory for [u8; K] {
    fn size(&self) -> u64 {
        K as u64
    }
    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.as_mut_slice().read(addr, out)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        self.as_mut_slice().write(addr, data)
    }
}
