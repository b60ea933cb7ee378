//! The packet CRC: CRC-32C (Castagnoli), which has Hamming distance 6 over the longest packet.
//!
//! **What it covers.** Every byte of the packet except the 4 bytes of the CRC field, in wire order (the
//! field sits in the header flit; see `docs/spec.md` section 2.6). A receiver computes the CRC over the same
//! bytes and compares it with the field. The CRC value is carried least significant byte first.
//!
//! **Why this polynomial.** The longest packet is 10 flits = 160 bytes, so the CRC protects
//! `(160 - 4) * 8 = 1248` data bits, a codeword of 1280 bits. CRC-32C's generator `0x1EDC6F41` has
//! Hamming distance 6 for data words of up to 5243 bits: every error of 1 to 5 bits anywhere in the packet is
//! detected. Sources: G. Castagnoli, S. Bräuer, M. Herrmann, "Optimization of cyclic redundancy-check codes
//! with 24 and 32 parity bits", IEEE Trans. Commun. 41(6), 1993; P. Koopman, "32-bit cyclic redundancy codes
//! for Internet applications", DSN 2002, and Koopman's CRC zoo entry for `0x8f6e37a0` (his notation for the
//! same polynomial): HD=6 up to 5243 bits, HD=8 up to 177 bits. CRC-32/IEEE (`0x04C11DB7`, Koopman
//! `0x82608edb`) has HD=6 only up to 268 bits and HD=5 at our length, which is why it is not used. The
//! test `tests/crc_hamming.rs` proves the claim for our packet length exhaustively.
//!
//! **Implementations.** [`checksum_portable`] is the `crc` crate's slice-by-16 table (no_std, 16 KiB of
//! tables). With the `fast-crc` feature on x86_64 hosts, [`checksum`] and [`Digest`] use the SSE 4.2 `crc32`
//! instruction (which computes exactly CRC-32C) when the CPU has it, and fall back to the table otherwise.

use crc::{Crc, Table};

/// The CRC's parameters in the Rocksoft/reveng model: CRC-32/ISCSI, better known as CRC-32C.
pub const ALGORITHM: &crc::Algorithm<u32> = &crc::CRC_32_ISCSI;

/// Bytes of the CRC field.
pub const CRC_LEN: usize = 4;

/// The longest packet the Hamming-distance guarantee is stated for, in bytes, CRC field included
/// (a header flit, a byte-enable flit and 8 data flits of 16 bytes).
pub const MAX_PACKET_LEN: usize = 160;

/// The Hamming distance of the CRC over packets of up to [`MAX_PACKET_LEN`] bytes: every error of up to
/// `HAMMING_DISTANCE - 1` bits is detected.
pub const HAMMING_DISTANCE: u32 = 6;

/// The longest data word, in bits, for which CRC-32C keeps [`HAMMING_DISTANCE`] (Koopman's CRC zoo,
/// polynomial `0x8f6e37a0`). Ours is `(MAX_PACKET_LEN - CRC_LEN) * 8 = 1248`.
pub const HAMMING_DISTANCE_MAX_DATA_BITS: usize = 5243;

const _: () = assert!((MAX_PACKET_LEN - CRC_LEN) * 8 <= HAMMING_DISTANCE_MAX_DATA_BITS);

/// Slice-by-16 is the crc crate's fastest table variant; it stays no_std (the table is built at compile
/// time and lives in flash on a soft core).
static TABLE: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(ALGORITHM);

/// The CRC-32C of `bytes`, by the fastest implementation this build and CPU have.
pub fn checksum(bytes: &[u8]) -> u32 {
    let mut digest = Digest::new();
    digest.update(bytes);
    digest.finalize()
}

/// The CRC-32C of `bytes` by the portable table implementation, whatever the build's features.
pub fn checksum_portable(bytes: &[u8]) -> u32 {
    TABLE.checksum(bytes)
}

/// Whether [`checksum`] and [`Digest`] use a CPU instruction on this machine rather than the table.
pub fn hardware_accelerated() -> bool {
    #[cfg(all(feature = "fast-crc", target_arch = "x86_64"))]
    {
        hw::available()
    }
    #[cfg(not(all(feature = "fast-crc", target_arch = "x86_64")))]
    {
        false
    }
}

/// An incremental CRC-32C, so a packet can be checked flit by flit, or around its CRC field.
///
/// ```
/// use link_dl::crc::{checksum, Digest};
/// let mut digest = Digest::new();
/// digest.update(b"1234");
/// digest.update(b"56789");
/// assert_eq!(digest.finalize(), checksum(b"123456789"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digest {
    /// The reflected shift register, as the SSE 4.2 instruction and the table both keep it (before the final
    /// XOR).
    register: u32,
}

impl Digest {
    /// A digest over no bytes yet.
    pub const fn new() -> Self {
        Self {
            register: ALGORITHM.init,
        }
    }

    /// Feeds `bytes`, which follow everything fed so far.
    pub fn update(&mut self, bytes: &[u8]) {
        #[cfg(all(feature = "fast-crc", target_arch = "x86_64"))]
        if let Some(register) = hw::update(self.register, bytes) {
            self.register = register;
            return;
        }
        self.register = update_portable(self.register, bytes);
    }

    /// The CRC of every byte fed.
    pub fn finalize(self) -> u32 {
        self.register ^ ALGORITHM.xorout
    }
}

impl Default for Digest {
    fn default() -> Self {
        Self::new()
    }
}

/// Continues the table CRC from a raw register value.
fn update_portable(register: u32, bytes: &[u8]) -> u32 {
    // The crc crate reflects a custom initial value for a reflected algorithm, and applies xorout at the end.
    let mut digest = TABLE.digest_with_initial(register.reverse_bits());
    digest.update(bytes);
    digest.finalize() ^ ALGORITHM.xorout
}

/// The SSE 4.2 `crc32` instruction, which computes CRC-32C on the reflected register directly.
///
/// `unsafe` is allowed here and nowhere else in the crate: calling a `#[target_feature]` function needs it,
/// and it is sound because the call happens only after `is_x86_feature_detected!` confirmed the feature.
#[cfg(all(feature = "fast-crc", target_arch = "x86_64"))]
#[allow(unsafe_code)]
mod hw {
    use core::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    pub(super) fn available() -> bool {
        std::is_x86_feature_detected!("sse4.2")
    }

    /// The updated register, or `None` when the CPU lacks SSE 4.2.
    pub(super) fn update(register: u32, bytes: &[u8]) -> Option<u32> {
        if available() {
            // SAFETY: the CPU supports SSE 4.2, checked just above.
            Some(unsafe { update_sse42(register, bytes) })
        } else {
            None
        }
    }

    #[target_feature(enable = "sse4.2")]
    unsafe fn update_sse42(register: u32, bytes: &[u8]) -> u32 {
        let mut register = u64::from(register);
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            register = _mm_crc32_u64(register, u64::from_le_bytes(le));
        }
        // The instruction leaves the upper half zero, so the truncation loses nothing.
        let mut register = register as u32;
        for &byte in words.remainder() {
            register = _mm_crc32_u8(register, byte);
        }
        register
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Check value of CRC-32/ISCSI from the reveng CRC catalogue ("123456789" -> 0xE3069283).
    #[test]
    fn check_value_matches_the_crc_catalogue() {
        assert_eq!(checksum(b"123456789"), 0xE306_9283);
        assert_eq!(checksum_portable(b"123456789"), 0xE306_9283);
    }

    /// RFC 3720 (iSCSI) appendix B.4 test vectors: 32 bytes of zeros, of ones, incrementing and decrementing.
    #[test]
    fn rfc3720_b4_vectors() {
        let zeros = [0u8; 32];
        let ones = [0xFFu8; 32];
        let incrementing: [u8; 32] = core::array::from_fn(|i| i as u8);
        let decrementing: [u8; 32] = core::array::from_fn(|i| 31 - i as u8);
        // The RFC lists the CRC bytes in transmission order, least significant first.
        assert_eq!(checksum(&zeros).to_le_bytes(), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(checksum(&ones).to_le_bytes(), [0x43, 0xab, 0xa8, 0x62]);
        assert_eq!(checksum(&incrementing).to_le_bytes(), [0x4e, 0x79, 0xdd, 0x46]);
        assert_eq!(checksum(&decrementing).to_le_bytes(), [0x5c, 0xdb, 0x3f, 0x11]);
    }

    #[test]
    fn digest_resumes_the_table_from_its_register() {
        let data: [u8; 37] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        for split in 0..=data.len() {
            let mut register = ALGORITHM.init;
            register = update_portable(register, &data[..split]);
            register = update_portable(register, &data[split..]);
            assert_eq!(register ^ ALGORITHM.xorout, checksum_portable(&data));
        }
    }
}
