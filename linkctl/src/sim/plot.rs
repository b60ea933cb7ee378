//! Small SVG line charts, with no plotting dependency: bus bandwidth against message size (log scale) for
//! the collectives, latency against offered load for synthetic traffic.

use fabric_sim::run::{Report, Sweep};

/// One line of a chart.
struct Series {
    name: &'static str,
    color: &'static str,
    points: Vec<(f64, f64)>,
}

/// A chart: its title, axis labels, the ticks of its x axis (position, label) and its lines. The x range
/// is the ticks' and the points'; y runs from 0 to a tenth above the highest point.
struct Chart {
    title: String,
    x_label: &'static str,
    y_label: &'static str,
    x_ticks: Vec<(f64, String)>,
    series: Vec<Series>,
}

impl Chart {
    fn svg(&self) -> String {
        let (w, h, left, bottom, top, right) = (720.0, 420.0, 70.0, 50.0, 40.0, 20.0);
        let pw = w - left - right;
        let ph = h - top - bottom;
        let xs = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
                .chain(self.x_ticks.iter().map(|t| t.0))
        };
        let x0 = xs().fold(f64::INFINITY, f64::min);
        let x0 = if x0.is_finite() { x0 } else { 0.0 };
        let x1 = xs().fold(f64::NEG_INFINITY, f64::max);
        let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
        let highest = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0f64, f64::max);
        let y_axis = Axis::to(highest * 1.1);
        let ymax = y_axis.top();
        let px = |x: f64| left + (x - x0) / (x1 - x0) * pw;
        let py = |y: f64| top + ph - y / ymax * ph;
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
            w / 2.0,
            escape(&self.title)
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
        for (y, label) in y_axis.ticks() {
            // A label left of the axis and a grid line across the plot at height `y`.
            let (label_x, at, end) = (left - 6.0, py(y), left + pw);
            s += &format!(
                "<text x=\"{label_x}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text><line x1=\"{left}\" y1=\"{at:.1}\" x2=\"{end}\" y2=\"{at:.1}\" stroke=\"#ddd\"/>\n",
                at + 4.0
            );
        }
        for (x, label) in &self.x_ticks {
            s += &format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>\n",
                px(*x),
                top + ph + 18.0
            );
        }
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            left + pw / 2.0,
            h - 8.0,
            self.x_label
        );
        s += &format!(
            "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">{}</text>\n",
            top + ph / 2.0,
            self.y_label
        );
        for (i, line) in self.series.iter().enumerate() {
            let points: Vec<String> = line
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            s += &format!(
                "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                line.color,
                points.join(" ")
            );
            for &(x, y) in &line.points {
                s += &format!(
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"/>\n",
                    px(x),
                    py(y),
                    line.color
                );
            }
            if self.series.len() > 1 {
                let y = top + 14.0 + 16.0 * i as f64;
                s += &format!(
                    "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{}\" stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
                    left + 12.0,
                    left + 32.0,
                    line.color,
                    left + 38.0,
                    y + 4.0,
                    line.name
                );
            }
        }
        s += "</svg>\n";
        s
    }
}

/// Bus bandwidth against message size.
pub fn svg(sweep: &Sweep, r: &Report) -> String {
    let x = |bytes: u64| (bytes as f64).log2();
    Chart {
        title: format!(
            "{} on {} ({}), bus bandwidth",
            super::kind_name(sweep.kind),
            sweep.topology.name,
            sweep.algo.name()
        ),
        x_label: "message size (bytes)",
        y_label: "busbw (GB/s)",
        x_ticks: r
            .rows
            .iter()
            .step_by((r.rows.len() / 10).max(1))
            .map(|row| (x(row.bytes), human(row.bytes)))
            .collect(),
        series: vec![Series {
            name: "busbw",
            color: "#1f77b4",
            // A size that stopped the run has no bandwidth (the average leaves it out too): it keeps its
            // tick, but is not drawn as a fall to 0.
            points: (r.rows.iter())
                .filter(|row| row.finished())
                .map(|row| (x(row.bytes), row.busbw))
                .collect(),
        }],
    }
    .svg()
}

/// Latency (mean and 99th percentile) against offered load, one point per load: `(offered GB/s per GPU,
/// mean ns, p99 ns)`, in any order.
pub fn latency_svg(title: String, points: &[(f64, f64, f64)]) -> String {
    let mut points = points.to_vec();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let top = points.iter().map(|p| p.0).fold(0.0f64, f64::max);
    Chart {
        title,
        x_label: "offered load (GB/s of payload per GPU)",
        y_label: "latency (ns)",
        x_ticks: Axis::to(top).ticks().collect(),
        series: vec![
            Series {
                name: "mean",
                color: "#1f77b4",
                points: points.iter().map(|p| (p.0, p.1)).collect(),
            },
            Series {
                name: "99th percentile",
                color: "#d62728",
                points: points.iter().map(|p| (p.0, p.2)).collect(),
            },
        ],
    }
    .svg()
}

/// `text` with the characters XML gives a meaning escaped (a topology file names the fabric).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A size as a tick label: whole units as `4K`, other sizes (all-gather, reduce-scatter and all-to-all
/// round sizes down to a whole block per GPU, so 3 GPUs make 4092 of 4096) to three figures, `4.00K`:
/// cutting them down to whole units labelled 4092 bytes `3K`.
fn human(bytes: u64) -> String {
    const UNITS: [(u32, &str); 3] = [(30, "G"), (20, "M"), (10, "K")];
    if let Some((shift, unit)) = UNITS
        .iter()
        .find(|&&(shift, _)| bytes >= 1 << shift && bytes % (1 << shift) == 0)
    {
        return format!("{}{unit}", bytes >> shift);
    }
    if bytes < 1 << 10 {
        return bytes.to_string();
    }
    // The largest unit the size reads at least 1.00 of, rounded to two decimals.
    let (shift, unit) = UNITS
        .iter()
        .find(|&&(shift, _)| bytes as f64 / f64::from(1u32 << shift) >= 0.995)
        .unwrap_or(&UNITS[2]);
    format!("{:.2}{unit}", bytes as f64 / f64::from(1u32 << shift))
}

/// An axis from 0 to `steps` steps of `step`, a round number (1, 2 or 5 times a power of ten), so that
/// its labels are short and each one differs from the next.
struct Axis {
    step: f64,
    steps: u32,
}

impl Axis {
    /// The axis with about five steps that reaches `max`.
    fn to(max: f64) -> Axis {
        let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
        let rough = max / 5.0;
        let power = 10f64.powf(rough.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * power)
            .find(|&s| s >= rough)
            .unwrap_or(10.0 * power);
        Axis {
            step,
            steps: (max / step).ceil().max(1.0) as u32,
        }
    }

    fn top(&self) -> f64 {
        self.step * f64::from(self.steps)
    }

    /// Each tick's value and label, with as many decimals as the step needs.
    fn ticks(&self) -> impl Iterator<Item = (f64, String)> + '_ {
        let decimals = (-self.step.log10().floor()).max(0.0) as usize;
        (0..=self.steps).map(move |k| {
            let v = self.step * f64::from(k);
            (v, format!("{v:.decimals$}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels_are_round_and_distinct_at_any_scale() {
        for max in [0.003, 0.7, 1.0, 2.68, 3.6, 99.0, 123.4, 506.0, 14_313.0, 2.5e9] {
            let axis = Axis::to(max);
            let ticks: Vec<(f64, String)> = axis.ticks().collect();
            assert!(
                axis.top() >= max && axis.top() < 2.5 * max,
                "{max}: top {}",
                axis.top()
            );
            assert!((3..=11).contains(&ticks.len()), "{max}: {ticks:?}");
            let labels: std::collections::BTreeSet<&String> = ticks.iter().map(|t| &t.1).collect();
            assert_eq!(labels.len(), ticks.len(), "{max}: {ticks:?}");
            for (v, label) in &ticks {
                assert!(
                    (label.parse::<f64>().unwrap() - v).abs() <= 1e-9 * max.max(1.0),
                    "{label} {v}"
                );
            }
        }
        let labels = |max| Axis::to(max).ticks().map(|t| t.1).collect::<Vec<String>>();
        // 2.68 had been labelled 0, 1, 1, 2, 2, 3.
        assert_eq!(labels(2.68), ["0", "1", "2", "3"]);
        assert_eq!(labels(0.7), ["0.0", "0.2", "0.4", "0.6", "0.8"]);
        assert_eq!(labels(506.0), ["0", "200", "400", "600"]);
    }

    /// Sizes rounded down to whole blocks per GPU are labelled by their value, not cut down to whole
    /// units (4092 bytes, a 3-GPU all-gather's 4 KiB, had been labelled `3K`).
    #[test]
    fn size_labels_round_to_the_nearest_not_down() {
        let labels: Vec<String> = [1020, 1024, 1536, 2040, 4092, 8184, 1_048_572, 1 << 20, 3 << 30]
            .into_iter()
            .map(human)
            .collect();
        assert_eq!(
            labels,
            ["1020", "1K", "1.50K", "1.99K", "4.00K", "7.99K", "1.00M", "1M", "3G"]
        );
    }

    #[test]
    fn latency_points_are_drawn_in_order_of_load_and_the_title_is_escaped() {
        let svg = latency_svg(
            "a<b> & c".into(),
            &[(300.0, 9.0, 20.0), (100.0, 5.0, 6.0), (200.0, 7.0, 9.0)],
        );
        assert!(svg.contains(">a&lt;b&gt; &amp; c</text>"), "{svg}");
        let line = svg.split("points=\"").nth(1).unwrap();
        let xs: Vec<f64> = line[..line.find('"').unwrap()]
            .split_whitespace()
            .map(|p| p.split_once(',').unwrap().0.parse().unwrap())
            .collect();
        assert_eq!(xs.len(), 3);
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
    }
}
