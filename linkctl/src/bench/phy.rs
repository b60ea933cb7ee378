//! The physical layer's hot paths.

use std::hint::black_box;

use anyhow::Context;
use link_phy::code128b130b::{LaneDecoder, LaneEncoder};
use link_phy::code8b10b::{Decoder, Encoder};
use link_phy::lanes::{stripe, LinkWidth};
use link_phy::scrambler::{Gen1Scrambler, Gen3Scrambler};
use link_phy::Disparity;

use super::measure::{row, Row};
use super::Plan;

pub fn rows(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let n = plan.bytes;
    let s = plan.samples;
    let data = crate::noise::noise(0, n);
    let mut rows = Vec::new();

    // 8b/10b: bytes to code groups and back.
    let mut codes = vec![0u16; n];
    Encoder::new()
        .encode_data(&data, &mut codes)
        .context("8b/10b encode")?;
    rows.push(row("8b/10b encode", n, s, || {
        let mut enc = Encoder::new();
        let _ = enc.encode_data(black_box(&data), &mut codes);
        black_box(&codes);
    }));
    let mut decoded = vec![0u8; n];
    Decoder::new(Disparity::Negative)
        .decode_data(&codes, &mut decoded)
        .context("8b/10b decode")?;
    anyhow::ensure!(decoded == data, "8b/10b round trip failed");
    rows.push(row("8b/10b decode", n, s, || {
        let mut dec = Decoder::new(Disparity::Negative);
        let _ = dec.decode_data(black_box(&codes), &mut decoded);
        black_box(&decoded);
    }));

    // Scramblers alone.
    let mut buf = data.clone();
    rows.push(row("scrambler 2.5 GT/s (x^16)", n, s, || {
        Gen1Scrambler::new().apply(black_box(&mut buf));
    }));
    rows.push(row("scrambler 8 GT/s (x^23, lane 0)", n, s, || {
        Gen3Scrambler::new(0).apply(black_box(&mut buf));
    }));

    // 128b/130b with scrambling: data blocks to packed wire bits and back.
    let blocks = n / 16;
    let mut wire = vec![0u8; (blocks * 130).div_ceil(8)];
    LaneEncoder::new(0)
        .encode_data(&data, &mut wire)
        .context("128b/130b encode")?;
    rows.push(row("128b/130b + scramble encode", n, s, || {
        let mut enc = LaneEncoder::new(0);
        let _ = enc.encode_data(black_box(&data), &mut wire);
        black_box(&wire);
    }));
    LaneDecoder::new(0)
        .decode_data(&wire, blocks, &mut decoded)
        .context("128b/130b decode")?;
    anyhow::ensure!(decoded == data, "128b/130b round trip failed");
    rows.push(row("128b/130b + descramble decode", n, s, || {
        let mut dec = LaneDecoder::new(0);
        let _ = dec.decode_data(black_box(&wire), blocks, &mut decoded);
        black_box(&decoded);
    }));

    // Striping over 16 lanes and back.
    let mut lanes = vec![0u8; n];
    rows.push(row("stripe x16", n, s, || {
        let _ = stripe::stripe(black_box(&data), LinkWidth::X16, &mut lanes);
        black_box(&lanes);
    }));
    rows.push(row("unstripe x16", n, s, || {
        let _ = stripe::unstripe(black_box(&lanes), LinkWidth::X16, &mut decoded);
        black_box(&decoded);
    }));
    Ok(rows)
}
