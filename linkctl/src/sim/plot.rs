//! A small SVG plot of bus bandwidth against message size (log scale), with no plotting dependency.

use fabric_sim::run::{Report, Sweep};

pub fn svg(sweep: &Sweep, r: &Report) -> String {
    let (w, h, left, bottom, top, right) = (720.0, 420.0, 70.0, 50.0, 40.0, 20.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let xs: Vec<f64> = r.rows.iter().map(|x| (x.bytes as f64).log2()).collect();
    let (x0, x1) = (
        xs.first().copied().unwrap_or(0.0),
        xs.last()
            .copied()
            .unwrap_or(1.0)
            .max(xs.first().copied().unwrap_or(0.0) + 1.0),
    );
    let ymax = r.rows.iter().map(|x| x.busbw).fold(1.0f64, f64::max) * 1.1;
    let px = |x: f64| left + (x - x0) / (x1 - x0) * pw;
    let py = |y: f64| top + ph - y / ymax * ph;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{:?} on {} ({}), bus bandwidth</text>\n",
        w / 2.0, sweep.kind, sweep.topology.name, sweep.algo.name()
    );
    s += &format!(
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        top + ph,
        left + pw,
        top + ph
    );
    s += &format!(
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>\n",
        top + ph
    );
    for k in 0..=5 {
        let y = ymax * f64::from(k) / 5.0;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{y:.0}</text><line x1=\"{left}\" y1=\"{2}\" x2=\"{}\" y2=\"{2}\" stroke=\"#ddd\"/>\n",
            left - 6.0, py(y) + 4.0, left + pw
        );
    }
    for (x, row) in xs.iter().zip(&r.rows).step_by((r.rows.len() / 10).max(1)) {
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            px(*x),
            top + ph + 18.0,
            human(row.bytes)
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">message size (bytes)</text>\n",
        left + pw / 2.0,
        h - 8.0
    );
    s += &format!("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">busbw (GB/s)</text>\n", top + ph / 2.0);
    let points: Vec<String> = xs
        .iter()
        .zip(&r.rows)
        .map(|(x, row)| format!("{:.1},{:.1}", px(*x), py(row.busbw)))
        .collect();
    s += &format!(
        "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>\n",
        points.join(" ")
    );
    for p in &points {
        let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
        s += &format!("<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"#1f77b4\"/>\n");
    }
    s += "</svg>\n";
    s
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{}G", b >> 30),
        b if b >= 1 << 20 => format!("{}M", b >> 20),
        b if b >= 1 << 10 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}
