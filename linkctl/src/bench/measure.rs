//! Timing of one component against `memcpy` of the same buffer, in the same run.
//!
//! Each component processes a payload of known size; it is run in batches until a batch takes about
//! 20 ms, and the median of several batches is reported. `memcpy` of the same payload size is measured
//! the same way, so the ratio says how close the component comes to simply moving the bytes.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;

/// One row of a benchmark report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What was measured.
    pub component: String,
    /// Payload bytes per call.
    pub payload_bytes: usize,
    /// Median payload throughput, GB/s (1e9 bytes per second).
    pub gbps: f64,
    /// Median memcpy throughput for the same size, GB/s.
    pub memcpy_gbps: f64,
    /// `gbps / memcpy_gbps`.
    pub ratio_to_memcpy: f64,
}

/// Median seconds per call of `f`.
pub fn median_seconds(samples: usize, mut f: impl FnMut()) -> f64 {
    // Warm up, and find a batch size that takes about 20 ms.
    let mut batch = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        let elapsed = t.elapsed().as_secs_f64();
        if elapsed > 0.02 || batch >= 1 << 30 {
            break;
        }
        batch = (batch * 2).max((batch as f64 * 0.025 / elapsed.max(1e-9)) as u64);
    }
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_secs_f64() / batch as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// GB/s of `memcpy` for buffers of `bytes`.
pub fn memcpy_gbps(bytes: usize, samples: usize) -> f64 {
    let src: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    let mut dst = vec![0u8; bytes];
    let s = median_seconds(samples, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    });
    bytes as f64 / s / 1e9
}

/// Measure `f`, which processes `bytes` of payload per call, against memcpy of the same size.
pub fn row(component: &str, bytes: usize, samples: usize, f: impl FnMut()) -> Row {
    let memcpy = memcpy_gbps(bytes, samples);
    let s = median_seconds(samples, f);
    let gbps = bytes as f64 / s / 1e9;
    Row {
        component: component.to_string(),
        payload_bytes: bytes,
        gbps,
        memcpy_gbps: memcpy,
        ratio_to_memcpy: gbps / memcpy,
    }
}

/// Print rows as a table, or as JSON.
pub fn print(title: &str, rows: &[Row], json: bool) -> anyhow::Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "bench": title, "rows": rows }))?
        );
        return Ok(());
    }
    println!("{title}: one core, median of batches, payload GB/s (1e9 B/s)");
    println!(
        "{:<34} {:>10} {:>10} {:>12} {:>9}",
        "component", "bytes", "GB/s", "memcpy GB/s", "ratio"
    );
    for r in rows {
        println!(
            "{:<34} {:>10} {:>10.2} {:>12.2} {:>9.3}",
            r.component, r.payload_bytes, r.gbps, r.memcpy_gbps, r.ratio_to_memcpy
        );
    }
    Ok(())
}
