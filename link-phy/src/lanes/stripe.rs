//! Byte striping: byte `i` of the stream travels on logical lane `i mod width`.
//!
//! The stream is cut into rows of `width` bytes, one byte per lane; striping is the transpose of that
//! matrix into lane-major order (all of lane 0's bytes, then lane 1's, ...), which is how each lane's encoder
//! wants them: sixteen consecutive bytes of one lane make one 128b/130b block.

use crate::error::Error;
use crate::lanes::LinkWidth;

/// Stripe `data` over `width` lanes into `out`, lane-major: lane `l`'s bytes are
/// `out[l * rows .. (l + 1) * rows]` with `rows = data.len() / width`.
///
/// `data.len()` must be a multiple of the width and `out` at least as long as `data`.
pub fn stripe(data: &[u8], width: LinkWidth, out: &mut [u8]) -> Result<(), Error> {
    let lanes = width.lanes();
    check(data.len(), lanes, out.len())?;
    let rows = data.len() / lanes;
    // Write each lane's bytes in order (strided reads are cheaper than strided writes).
    for (l, lane) in out[..data.len()].chunks_exact_mut(rows.max(1)).enumerate() {
        for (byte, src) in lane.iter_mut().zip(data[l..].iter().step_by(lanes)) {
            *byte = *src;
        }
    }
    Ok(())
}

/// The inverse of [`stripe`]: lane-major `lanes_data` back into stream order in `out`.
pub fn unstripe(lanes_data: &[u8], width: LinkWidth, out: &mut [u8]) -> Result<(), Error> {
    let lanes = width.lanes();
    check(lanes_data.len(), lanes, out.len())?;
    let rows = lanes_data.len() / lanes;
    for (l, lane) in lanes_data.chunks_exact(rows.max(1)).enumerate() {
        for (dst, &byte) in out[l..lanes_data.len()].iter_mut().step_by(lanes).zip(lane) {
            *dst = byte;
        }
    }
    Ok(())
}

fn check(len: usize, lanes: usize, out_len: usize) -> Result<(), Error> {
    if len % lanes != 0 {
        return Err(Error::UnsupportedWidth { lanes });
    }
    if out_len < len {
        return Err(Error::BufferTooSmall {
            needed: len,
            available: out_len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pcie_figure_4_9_order() {
        // PCIe Base Specification figure 4-9 (x4): bytes 0,4,8 on lane 0; 1,5,9 on lane 1; ...
        let data: [u8; 12] = core::array::from_fn(|i| i as u8);
        let mut out = [0u8; 12];
        stripe(&data, LinkWidth::X4, &mut out).unwrap();
        assert_eq!(out, [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    }

    #[test]
    fn ragged_input_is_refused() {
        let mut out = [0u8; 8];
        assert!(stripe(&[0u8; 7], LinkWidth::X2, &mut out).is_err());
        assert!(stripe(&[0u8; 8], LinkWidth::X2, &mut out[..4]).is_err());
    }

    proptest! {
        #[test]
        fn unstripe_inverts_stripe(w in 0usize..5, rows in 0usize..40, seed in any::<u64>()) {
            let width = LinkWidth::WIDEST_FIRST[w];
            let n = rows * width.lanes();
            let data: [u8; 640] = core::array::from_fn(|i| (seed.wrapping_mul(i as u64 + 1) >> 13) as u8);
            let mut lanes = [0u8; 640];
            let mut back = [0u8; 640];
            stripe(&data[..n], width, &mut lanes).unwrap();
            unstripe(&lanes[..n], width, &mut back).unwrap();
            prop_assert_eq!(&data[..n], &back[..n]);
        }
    }
}
