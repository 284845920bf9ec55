//! The `--svg` plot: latency over iterations, one panel per tier, log-scale y axis
//! shared by all panels, points coloured by shape label (legend), warm-up shaded,
//! compile events marked by red ticks on the top edge of the panel.
//!
//! **Invariant:** the output is self-contained SVG 1.1 — no script, no external
//! resource — and every text node is XML-escaped.

use super::record::IterRecord;
use super::summary::label_order;
use std::fmt::Write;

/// One tier's data for the plot.
pub struct Series<'a> {
    /// tier name (panel title)
    pub tier: &'a str,
    /// the tier's iterations, in order
    pub records: &'a [IterRecord],
    /// iterations after which the compile count grew
    pub compile_events: &'a [usize],
}

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 240.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 30.0;
const GAP: f64 = 52.0;
const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Escapes text for XML content and attribute values.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Formats a latency for an axis label.
fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{} ms", trim(us / 1000.0))
    } else {
        format!("{} µs", trim(us))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A 1/2/5×10ᵏ step giving at most ~10 ticks over `n` iterations.
fn tick_step(n: usize) -> usize {
    let mut base = 1;
    loop {
        for m in [1, 2, 5] {
            if n / (base * m) <= 10 {
                return base * m;
            }
        }
        base *= 10;
    }
}

/// Renders the plot.
pub fn render(title: &str, series: &[Series<'_>], warmup: usize) -> String {
    let positive = |r: &&IterRecord| r.latency_us.is_finite() && r.latency_us > 0.0;
    let lat = series
        .iter()
        .flat_map(|s| s.records.iter().filter(positive).map(|r| r.latency_us));
    let (lo, hi) = lat.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (lo, hi) = if lo.is_finite() {
        (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        )
    } else {
        (0.0, 1.0)
    };
    let n_iter = series
        .iter()
        .map(|s| s.records.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let mut labels: Vec<String> = series
        .iter()
        .flat_map(|s| s.records.iter().map(IterRecord::label))
        .collect();
    labels.sort_by(|a, b| label_order(a, b));
    labels.dedup();
    let colour =
        |label: &str| PALETTE[labels.iter().position(|l| l == label).unwrap_or(0) % PALETTE.len()];
    let plot_w = WIDTH - LEFT - RIGHT;
    let x_of = |iter: usize| LEFT + plot_w * iter as f64 / n_iter as f64;
    let height = TOP + series.len().max(1) as f64 * (PANEL_HEIGHT + GAP) + 10.0;

    let mut svg = String::new();
    // `write!` to a String cannot fail; the results are ignored throughout.
    let _ = writeln!(
        svg,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (i, s) in series.iter().enumerate() {
        let top = TOP + i as f64 * (PANEL_HEIGHT + GAP) + 16.0;
        let bottom = top + PANEL_HEIGHT - 16.0;
        let y_of = |us: f64| bottom - (bottom - top) * (us.log10() - lo) / (hi - lo);
        let _ = writeln!(
            svg,
            r#"<g class="tier"><text x="{LEFT}" y="{}" font-weight="bold">{}</text>"#,
            top - 4.0,
            escape(s.tier)
        );
        if warmup > 0 {
            let _ = writeln!(
                svg,
                r##"<rect x="{LEFT}" y="{top}" width="{:.1}" height="{:.1}" fill="#eeeeee"><title>warm-up</title></rect>"##,
                x_of(warmup.min(n_iter)) - LEFT,
                bottom - top
            );
        }
        let _ = writeln!(
            svg,
            r#"<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{:.1}" fill="none" stroke="black"/>"#,
            bottom - top
        );
        for decade in (lo as i32)..=(hi as i32) {
            for m in [1.0, 2.0, 5.0] {
                let us = m * 10f64.powi(decade);
                if us.log10() > hi + 1e-9 {
                    continue;
                }
                let y = y_of(us);
                let stroke = if m == 1.0 { "#bbbbbb" } else { "#e4e4e4" };
                let _ = writeln!(
                    svg,
                    r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{stroke}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                    LEFT + plot_w,
                    LEFT - 4.0,
                    y + 4.0,
                    escape(&fmt_us(us))
                );
            }
        }
        for &ev in s.compile_events {
            let x = x_of(ev);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#d00000" stroke-width="1.5"><title>compile after iteration {ev}</title></line>"##,
                top + 8.0
            );
        }
        for rec in s.records.iter().filter(positive) {
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="1.8" fill="{}"><title>iter {} {} {:.1} µs ({:?})</title></circle>"#,
                x_of(rec.iter),
                y_of(rec.latency_us),
                colour(&rec.label()),
                rec.iter,
                escape(&rec.label()),
                rec.latency_us,
                rec.served_by
            );
        }
        let step = tick_step(n_iter);
        for tick in (0..=n_iter).step_by(step) {
            let x = x_of(tick);
            let _ = writeln!(
                svg,
                r#"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="black"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{tick}</text>"#,
                bottom + 4.0,
                bottom + 14.0
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">iteration</text></g>"#,
            LEFT + plot_w / 2.0,
            bottom + 27.0
        );
    }
    let legend_x = WIDTH - RIGHT + 12.0;
    let _ = writeln!(
        svg,
        r#"<g class="legend"><text x="{legend_x}" y="{}" font-weight="bold">batch</text>"#,
        TOP + 16.0
    );
    for (i, label) in labels.iter().enumerate() {
        let y = TOP + 32.0 + i as f64 * 16.0;
        let _ = writeln!(
            svg,
            r#"<circle cx="{}" cy="{}" r="4" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            legend_x + 4.0,
            y - 4.0,
            colour(label),
            legend_x + 14.0,
            y,
            escape(label)
        );
    }
    let y = TOP + 40.0 + labels.len() as f64 * 16.0;
    let _ = writeln!(
        svg,
        r##"<line x1="{legend_x}" y1="{}" x2="{legend_x}" y2="{y}" stroke="#d00000" stroke-width="1.5"/><text x="{}" y="{y}">compile</text>
<rect x="{legend_x}" y="{}" width="10" height="10" fill="#eeeeee" stroke="#999999"/><text x="{}" y="{}">warm-up</text></g>
</svg>"##,
        y - 8.0,
        legend_x + 14.0,
        y + 8.0,
        legend_x + 14.0,
        y + 17.0
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::ServedBy;

    #[test]
    fn escapes_markup_in_titles() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
        assert_eq!(fmt_us(1500.0), "1.5 ms");
        assert_eq!(fmt_us(20.0), "20 µs");
        assert_eq!((tick_step(12), tick_step(500), tick_step(7)), (2, 50, 1));
    }

    #[test]
    fn renders_every_point() {
        let records: Vec<IterRecord> = (0..10)
            .map(|i| IterRecord {
                iter: i,
                batch: Some(1 + i % 2),
                dims: None,
                latency_us: 10.0 * (i + 1) as f64,
                tier: "interp".into(),
                served_by: ServedBy::Interp,
            })
            .collect();
        let svg = render(
            "t",
            &[Series {
                tier: "interp",
                records: &records,
                compile_events: &[3],
            }],
            2,
        );
        assert_eq!(
            svg.matches("<circle cx").count(),
            10 + 2,
            "10 points and 2 legend entries"
        );
        assert!(svg.contains("compile after iteration 3"));
        assert!(!svg.contains("<script"));
    }
}
