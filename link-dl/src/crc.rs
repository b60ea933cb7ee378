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
//! From 120 bytes on they run three chains of the instruction side by side and join them with a
//! carry-less multiply (PCLMULQDQ), since one chain waits three cycles per word on itself.

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

/// The CRC-32C of `first` followed by `rest` (a packet around its CRC field): the same as [`checksum`]
/// of the two joined, with the parts computed side by side where the CPU allows, so the short first part
/// does not hold up the long one.
pub fn checksum_of_parts(first: &[u8], rest: &[u8]) -> u32 {
    #[cfg(all(feature = "fast-crc", target_arch = "x86_64"))]
    if let Some(register) = hw::update_parts(ALGORITHM.init, first, rest) {
        return register ^ ALGORITHM.xorout;
    }
    checksum_of_parts_by_digest(first, rest)
}

/// [`checksum_of_parts`] without the instruction. Out of line where the instruction may be used: inlined,
/// the registers it needs were saved and restored on every call, about 12 of the 100 or so instructions
/// a packet's CRC took.
#[cfg_attr(all(feature = "fast-crc", target_arch = "x86_64"), inline(never))]
fn checksum_of_parts_by_digest(first: &[u8], rest: &[u8]) -> u32 {
    let mut digest = Digest::new();
    digest.update(first);
    digest.update(rest);
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
    use core::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8, _mm_cvtsi128_si64,
        _mm_cvtsi64_si128,
    };
    use core::sync::atomic::{AtomicBool, Ordering};

    /// The polynomial, reflected (bit 31 is the coefficient of x^0), as the instruction and the table use it.
    const POLY_REFLECTED: u32 = super::ALGORITHM.poly.reverse_bits();

    /// `a * b mod P` for reflected polynomials (zlib's `multmodp`).
    const fn multiply_mod_p(a: u32, mut b: u32) -> u32 {
        let mut bit = 1u32 << 31;
        let mut product = 0;
        while bit != 0 {
            if a & bit != 0 {
                product ^= b;
            }
            bit >>= 1;
            b = if b & 1 != 0 {
                (b >> 1) ^ POLY_REFLECTED
            } else {
                b >> 1
            };
        }
        product
    }

    /// `x^k mod P`, reflected.
    const fn x_to_the(k: u32) -> u32 {
        let mut power = 1u32 << 31;
        let mut i = 0;
        while i < k {
            power = multiply_mod_p(power, 1 << 30);
            i += 1;
        }
        power
    }

    pub(super) fn available() -> bool {
        std::is_x86_feature_detected!("sse4.2")
    }

    /// The updated register, or `None` when the CPU lacks SSE 4.2.
    pub(super) fn update(register: u32, bytes: &[u8]) -> Option<u32> {
        if !available() {
            return None;
        }
        if bytes.len() >= 3 * SHORT_LANE && std::is_x86_feature_detected!("pclmulqdq") {
            // SAFETY: the CPU supports SSE 4.2 and PCLMULQDQ, checked just above.
            return Some(unsafe { update_three_lanes(register, bytes) });
        }
        // SAFETY: the CPU supports SSE 4.2, checked just above.
        Some(unsafe { update_sse42(register, bytes) })
    }

    /// The register after `first` and then `rest`, or `None` when the CPU lacks SSE 4.2. When `rest` is
    /// three lanes exactly (a packet with an address extension after its header word), `first` is a
    /// fourth chain beside them, shifted past them at the end.
    pub(super) fn update_parts(register: u32, first: &[u8], rest: &[u8]) -> Option<u32> {
        // Every packet's CRC: one load and test, where asking for the two features each time took about
        // seven instructions more.
        if rest.len() == 3 * LANE && BOTH_FOUND.load(Ordering::Relaxed) {
            // SAFETY: the CPU supports SSE 4.2 and PCLMULQDQ (`BOTH_FOUND` is set only once both were
            // detected).
            return Some(unsafe { update_beside_three_lanes(register, first, rest) });
        }
        update_parts_otherwise(register, first, rest)
    }

    /// [`update_parts`] but for a packet on a CPU known to have both instructions: out of line, so that
    /// the registers it needs are not saved and restored on every packet.
    #[inline(never)]
    fn update_parts_otherwise(register: u32, first: &[u8], rest: &[u8]) -> Option<u32> {
        if !available() {
            return None;
        }
        if rest.len() == 3 * LANE && std::is_x86_feature_detected!("pclmulqdq") {
            BOTH_FOUND.store(true, Ordering::Relaxed);
            // SAFETY: the CPU supports SSE 4.2 and PCLMULQDQ, checked just above.
            return Some(unsafe { update_beside_three_lanes(register, first, rest) });
        }
        update(register, first).and_then(|register| update(register, rest))
    }

    /// Whether the CPU was found to have both SSE 4.2 and PCLMULQDQ (false until asked).
    static BOTH_FOUND: AtomicBool = AtomicBool::new(false);

    /// [`update_parts`] for a `rest` of three lanes.
    #[target_feature(enable = "sse4.2,pclmulqdq")]
    unsafe fn update_beside_three_lanes(register: u32, first: &[u8], rest: &[u8]) -> u32 {
        let head = match <&[u8; 12]>::try_from(first) {
            // A packet's header word (nearly always): its 8 and 4 bytes, as `update_sse42` takes them,
            // without its loop and tests for what is left.
            Ok(header) => {
                let register = _mm_crc32_u64(u64::from(register), word(header, 0)) as u32;
                u64::from(_mm_crc32_u32(
                    register,
                    u32::from_le_bytes([header[8], header[9], header[10], header[11]]),
                ))
            }
            Err(_) => u64::from(update_sse42(register, first)),
        };
        let (a, b, c) = lanes::<LANE>(0, rest);
        // The header's chain and the first two lanes shifted past what follows them in one reduction.
        let products = times(head, const { shift_past(3 * LANE) })
            ^ times(a, const { shift_past(2 * LANE) })
            ^ times(b, const { shift_past(LANE) });
        (_mm_crc32_u64(0, products) ^ c) as u32
    }

    /// Bytes per lane of the interleaved loop: three lanes are the 144 bytes a packet's CRC covers after
    /// its header word (address extension and 128 bytes of data) with nothing left over for one chain.
    const LANE: usize = 48;
    /// Lanes for what is left, or for a packet without the extension (128 bytes: 120 in lanes, 8 left).
    const SHORT_LANE: usize = 40;

    /// Multiplying a register by `x^(8n - 33)` and reducing the 64-bit product with the instruction
    /// appends `n` zero bytes (the 33 is the instruction's own `x^32` and the one-bit offset of a
    /// carry-less product of reflected operands).
    const fn shift_past(bytes: usize) -> i64 {
        x_to_the(8 * bytes as u32 - 33) as i64
    }

    /// The carry-less product of a register and a [`shift_past`] factor, before its reduction by
    /// `_mm_crc32_u64(0, _)`. That reduction is linear, so products to be XORed together are reduced
    /// once (a 32 by 32-bit product fits in 63 bits).
    #[target_feature(enable = "sse4.2,pclmulqdq")]
    unsafe fn times(register: u64, factor: i64) -> u64 {
        let product = _mm_clmulepi64_si128(_mm_cvtsi64_si128(register as i64), _mm_cvtsi64_si128(factor), 0);
        _mm_cvtsi128_si64(product) as u64
    }

    /// The instruction has a latency of three cycles and a throughput of one: one chain over a packet
    /// waits on itself. Three lanes are computed side by side and combined by shifting the first two past
    /// the bytes after them (CRC is linear: the register of `A || B` is that of `A` shifted by `|B|`,
    /// XOR the register of `B` from zero).
    #[target_feature(enable = "sse4.2,pclmulqdq")]
    unsafe fn update_three_lanes(register: u32, bytes: &[u8]) -> u32 {
        let mut register = u64::from(register);
        let mut blocks = bytes.chunks_exact(3 * LANE);
        for block in &mut blocks {
            register = three_lanes::<LANE>(register, block);
        }
        let mut rest = blocks.remainder();
        if let Some((block, after)) = rest.split_at_checked(3 * SHORT_LANE) {
            register = three_lanes::<SHORT_LANE>(register, block);
            rest = after;
        }
        update_sse42(register as u32, rest)
    }

    /// `register` after the `3 * N` bytes of `block`, in three lanes of `N`.
    #[target_feature(enable = "sse4.2,pclmulqdq")]
    unsafe fn three_lanes<const N: usize>(register: u64, block: &[u8]) -> u64 {
        let (a, b, c) = lanes::<N>(register, block);
        _mm_crc32_u64(
            0,
            times(a, const { shift_past(2 * N) }) ^ times(b, const { shift_past(N) }),
        ) ^ c
    }

    /// The three lanes' registers over the `3 * N` bytes of `block`, the first starting from `register`
    /// and the others from zero, before they are combined.
    #[target_feature(enable = "sse4.2")]
    unsafe fn lanes<const N: usize>(register: u64, block: &[u8]) -> (u64, u64, u64) {
        let (mut a, mut b, mut c) = (register, 0, 0);
        for i in (0..N).step_by(8) {
            a = _mm_crc32_u64(a, word(block, i));
            b = _mm_crc32_u64(b, word(block, N + i));
            c = _mm_crc32_u64(c, word(block, 2 * N + i));
        }
        (a, b, c)
    }

    /// The little-endian word at `at` (the caller keeps `at + 8` within the slice).
    #[inline(always)]
    fn word(bytes: &[u8], at: usize) -> u64 {
        let mut le = [0u8; 8];
        le.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(le)
    }

    #[target_feature(enable = "sse4.2")]
    unsafe fn update_sse42(register: u32, bytes: &[u8]) -> u32 {
        let mut register = u64::from(register);
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            register = _mm_crc32_u64(register, word(w, 0));
        }
        // The instruction leaves the upper half zero, so the truncation loses nothing.
        let mut register = register as u32;
        let mut tail = words.remainder();
        if let Some((four, rest)) = tail.split_first_chunk::<4>() {
            register = _mm_crc32_u32(register, u32::from_le_bytes(*four));
            tail = rest;
        }
        if let Some((two, rest)) = tail.split_first_chunk::<2>() {
            register = _mm_crc32_u16(register, u16::from_le_bytes(*two));
            tail = rest;
        }
        for &byte in tail {
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
