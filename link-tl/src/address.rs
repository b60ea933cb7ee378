//! The global address map: a 64-bit fabric-wide address turns into (destination endpoint, 47-bit local
//! address) through windows, each mapping a 4096-byte-aligned range of global addresses onto a range of one
//! endpoint's local addresses (like PCIe BARs, or UALink's address translation).
//!
//! The default layout, [`Window::flat`], puts the endpoint in the global address's top bits:
//! `global = endpoint << 47 | local` (bits 63:57 zero). Any other layout is a set of windows.
//! Windows are 4096-byte aligned so that a read request (which never crosses a 4096-byte boundary) and
//! a write piece (never a 128-byte one) always fall inside one window.

use heapless::Vec;

use crate::error::TlError;
use crate::header::{EndpointId, LOCAL_ADDRESS_BITS, MAX_ENDPOINTS, MAX_READ};

/// Granule of windows: bases, lengths and local bases are multiples of it.
pub const WINDOW_ALIGN: u64 = MAX_READ as u64;

/// A range of global addresses mapped onto one endpoint's local addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Window {
    /// First global address.
    pub base: u64,
    /// Bytes.
    pub len: u64,
    /// The endpoint that holds them.
    pub endpoint: EndpointId,
    /// The local address of `base` at that endpoint.
    pub local_base: u64,
}

impl Window {
    /// The window of the flat layout: all `len` bytes of `endpoint`'s local space from 0, at global
    /// addresses `endpoint << 47`.
    pub const fn flat(endpoint: EndpointId, len: u64) -> Window {
        Window {
            base: (endpoint as u64) << LOCAL_ADDRESS_BITS,
            len,
            endpoint,
            local_base: 0,
        }
    }

    fn end(&self) -> u64 {
        self.base + self.len
    }

    fn check(&self) -> Result<(), TlError> {
        let bad = TlError::BadWindow { base: self.base };
        if usize::from(self.endpoint) >= MAX_ENDPOINTS {
            return Err(TlError::EndpointOutOfRange {
                endpoint: self.endpoint,
            });
        }
        if self.len == 0 || (self.base | self.len | self.local_base) % WINDOW_ALIGN != 0 {
            return Err(bad);
        }
        let global_fits = self.base.checked_add(self.len).is_some();
        let local_fits = self
            .local_base
            .checked_add(self.len)
            .is_some_and(|end| end <= 1 << LOCAL_ADDRESS_BITS);
        if !global_fits || !local_fits {
            return Err(bad);
        }
        Ok(())
    }
}

/// Where a run of global addresses lives: `len` bytes from `local` at `endpoint` (the rest of the
/// window from the address asked about).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Span {
    /// The endpoint.
    pub endpoint: EndpointId,
    /// The local address.
    pub local: u64,
    /// Bytes to the end of the window.
    pub len: u64,
}

/// Up to `N` non-overlapping windows, kept sorted by base.
#[derive(Clone, Debug, Default)]
pub struct AddressMap<const N: usize> {
    windows: Vec<Window, N>,
}

impl<const N: usize> AddressMap<N> {
    /// An empty map.
    pub const fn new() -> Self {
        AddressMap { windows: Vec::new() }
    }

    /// Add a window; refused if it is malformed, overlaps one already in the map, or the map is full.
    pub fn insert(&mut self, window: Window) -> Result<(), TlError> {
        window.check()?;
        let at = self.windows.partition_point(|w| w.base < window.base);
        let overlaps_before = at > 0 && self.windows[at - 1].end() > window.base;
        let overlaps_after = self.windows.get(at).is_some_and(|w| w.base < window.end());
        if overlaps_before || overlaps_after {
            return Err(TlError::OverlappingWindow { base: window.base });
        }
        self.windows.insert(at, window).map_err(|_| TlError::MapFull)
    }

    /// The windows, by base.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// The endpoint and local address of `global`, and how far its window goes from there.
    pub fn resolve(&self, global: u64) -> Result<Span, TlError> {
        let at = self.windows.partition_point(|w| w.base <= global);
        let window = at.checked_sub(1).and_then(|i| self.windows.get(i));
        match window {
            Some(w) if global < w.end() => {
                let offset = global - w.base;
                Ok(Span {
                    endpoint: w.endpoint,
                    local: w.local_base + offset,
                    len: w.len - offset,
                })
            }
            _ => Err(TlError::Unmapped { global }),
        }
    }

    /// The endpoint and local address of `global`.
    pub fn translate(&self, global: u64) -> Result<(EndpointId, u64), TlError> {
        self.resolve(global).map(|s| (s.endpoint, s.local))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_layout_puts_the_endpoint_in_the_top_bits() {
        let mut map = AddressMap::<4>::new();
        map.insert(Window::flat(5, 1 << 30)).unwrap();
        map.insert(Window::flat(1023, 1 << 47)).unwrap();
        assert_eq!(map.translate(5 << 47 | 0x1234), Ok((5, 0x1234)));
        assert_eq!(
            map.translate(1023 << 47 | ((1 << 47) - 1)),
            Ok((1023, (1 << 47) - 1))
        );
        assert_eq!(
            map.translate(5 << 47 | 1 << 30),
            Err(TlError::Unmapped {
                global: 5 << 47 | 1 << 30
            })
        );
        assert_eq!(map.translate(0), Err(TlError::Unmapped { global: 0 }));
        assert_eq!(
            map.resolve(5 << 47 | 0x1000),
            Ok(Span {
                endpoint: 5,
                local: 0x1000,
                len: (1 << 30) - 0x1000
            })
        );
    }

    #[test]
    fn windows_translate_with_their_local_base() {
        let mut map = AddressMap::<4>::new();
        let w = Window {
            base: 0x10_0000,
            len: 0x2000,
            endpoint: 7,
            local_base: 0x8000_0000,
        };
        map.insert(w).unwrap();
        map.insert(Window {
            base: 0x10_2000,
            len: 0x1000,
            endpoint: 8,
            local_base: 0,
        })
        .unwrap();
        assert_eq!(map.translate(0x10_1FFF), Ok((7, 0x8000_1FFF)));
        assert_eq!(map.translate(0x10_2000), Ok((8, 0)));
        assert_eq!(
            map.translate(0x10_3000),
            Err(TlError::Unmapped { global: 0x10_3000 })
        );
        assert_eq!(
            map.translate(0x0F_FFFF),
            Err(TlError::Unmapped { global: 0x0F_FFFF })
        );
    }

    #[test]
    fn bad_windows_are_refused() {
        let mut map = AddressMap::<2>::new();
        let ok = Window {
            base: 0x4000,
            len: 0x2000,
            endpoint: 1,
            local_base: 0,
        };
        map.insert(ok).unwrap();
        let overlapping = Window { base: 0x5000, ..ok };
        assert_eq!(
            map.insert(overlapping),
            Err(TlError::OverlappingWindow { base: 0x5000 })
        );
        let below = Window {
            base: 0x3000,
            len: 0x2000,
            ..ok
        };
        assert_eq!(
            map.insert(below),
            Err(TlError::OverlappingWindow { base: 0x3000 })
        );
        assert_eq!(
            map.insert(Window { base: 0x4100, ..ok }),
            Err(TlError::BadWindow { base: 0x4100 })
        );
        assert_eq!(
            map.insert(Window {
                len: 0,
                base: 0x9000,
                ..ok
            }),
            Err(TlError::BadWindow { base: 0x9000 })
        );
        let too_far = Window {
            base: 0x9000,
            local_base: 1 << 47,
            ..ok
        };
        assert_eq!(map.insert(too_far), Err(TlError::BadWindow { base: 0x9000 }));
        let wraps = Window {
            base: u64::MAX - 0xFFF,
            len: 0x2000,
            ..ok
        };
        assert_eq!(map.insert(wraps), Err(TlError::BadWindow { base: wraps.base }));
        assert_eq!(
            map.insert(Window {
                endpoint: 1024,
                base: 0x9000,
                ..ok
            }),
            Err(TlError::EndpointOutOfRange { endpoint: 1024 })
        );
        map.insert(Window { base: 0x8000, ..ok }).unwrap();
        assert_eq!(map.insert(Window { base: 0x10000, ..ok }), Err(TlError::MapFull));
    }
}
