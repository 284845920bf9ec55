//! The stdout tables of `shapejit bench`: one row per tier and shape, then one row
//! per tier of counters; `--compare` adds the other engine's medians and speed-ups.
//!
//! **Invariant:** a speed-up is `other median / this median` for the same shape, so
//! greater than 1 means this tier is faster; `-` when the other has no such shape.
//! The per-tier row compares on the tier's own shape mix (see [`mix_speedup`]).

use super::record::TierSummary;
use super::summary::label_order;
use std::fmt::Write;

fn ms(us: f64) -> String {
    if us.is_finite() {
        format!("{:.3}", us / 1e3)
    } else {
        "-".to_string()
    }
}

fn speedup(other: Option<f64>, this: f64) -> String {
    match other {
        Some(o) if o.is_finite() && this > 0.0 => format!("{:.2}x", o / this),
        _ => "-".to_string(),
    }
}

/// Speed-up of tier `t` over `base` on `t`'s own shape mix: both tiers' per-shape
/// medians weighted by how often `t` ran each shape, so a tier that ran other
/// shapes (`jit-fixed`) is compared on those shapes, not on `base`'s mean.
fn mix_speedup(base: Option<&TierSummary>, t: &TierSummary) -> String {
    let Some(base) = base else {
        return "-".to_string();
    };
    let mut base_us = 0.0;
    let mut this_us = 0.0;
    for (label, b) in &t.per_batch {
        let Some(o) = base.per_batch.get(label) else {
            return "-".to_string();
        };
        base_us += o.median_us * b.count as f64;
        this_us += b.median_us * b.count as f64;
    }
    speedup(Some(base_us), this_us)
}

/// Renders the tables.
pub fn render(tiers: &[TierSummary], compare: &[TierSummary]) -> String {
    let interp = tiers.iter().find(|t| t.tier == "interp");
    let mut out = String::new();
    // `write!` to a String cannot fail; the results are ignored throughout.
    let mut header = format!(
        "{:<10}{:>8}{:>7}{:>11}{:>10}{:>10}{:>11}{:>11}{:>11}",
        "tier",
        "batch",
        "count",
        "median ms",
        "p90 ms",
        "p99 ms",
        "first ms",
        "steady ms",
        "vs interp"
    );
    for c in compare {
        let _ = write!(
            header,
            "{:>12}{:>10}",
            format!("{} ms", c.tier),
            format!("vs {}", c.tier)
        );
    }
    let _ = writeln!(out, "{header}");
    for t in tiers {
        let mut labels: Vec<&String> = t.per_batch.keys().collect();
        labels.sort_by(|a, b| label_order(a, b));
        for label in labels {
            let b = &t.per_batch[label];
            let base = interp
                .and_then(|i| i.per_batch.get(label))
                .map(|x| x.median_us);
            let _ = write!(
                out,
                "{:<10}{:>8}{:>7}{:>11}{:>10}{:>10}{:>11}{:>11}{:>11}",
                t.tier,
                label,
                b.count,
                ms(b.median_us),
                ms(b.p90_us),
                ms(b.p99_us),
                ms(b.first_call_us),
                ms(b.steady_median_us),
                speedup(base, b.median_us)
            );
            for c in compare {
                let other = c.per_batch.get(label).map(|x| x.median_us);
                let _ = write!(
                    out,
                    "{:>12}{:>10}",
                    other.map(ms).unwrap_or_else(|| "-".into()),
                    speedup(other, b.median_us)
                );
            }
            let _ = writeln!(out);
        }
    }
    let _ = writeln!(
        out,
        "\n{:<10}{:>10}{:>10}{:>10}{:>12}{:>11}{:>8}{:>17}{:>11}",
        "tier",
        "mean ms",
        "setup ms",
        "compiles",
        "compile ms",
        "cache hit",
        "deopts",
        "first new shape",
        "vs interp"
    );
    for t in tiers.iter().chain(compare) {
        let _ = writeln!(
            out,
            "{:<10}{:>10}{:>10.1}{:>10}{:>12.1}{:>10.1}%{:>8}{:>14} ms{:>11}",
            t.tier,
            ms(t.mean_us),
            t.setup_ms,
            t.compile_count,
            t.compile_ms_total,
            t.cache_hit_rate * 100.0,
            t.deopt_count,
            ms(t.first_call_after_new_shape_us),
            mix_speedup(interp, t)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::BatchSummary;
    use std::collections::BTreeMap;

    fn tier(name: &str, medians: &[(&str, f64)]) -> TierSummary {
        let per_batch = medians
            .iter()
            .map(|&(l, m)| {
                let b = BatchSummary {
                    median_us: m,
                    p90_us: m,
                    p99_us: m,
                    count: 3,
                    first_call_us: m,
                    steady_median_us: m,
                };
                (l.to_string(), b)
            })
            .collect::<BTreeMap<_, _>>();
        TierSummary {
            tier: name.into(),
            per_batch,
            mean_us: 100.0,
            compile_count: 0,
            compile_ms_total: 0.0,
            cache_hit_rate: 0.0,
            first_call_after_new_shape_us: 1.0,
            deopt_count: 0,
            setup_ms: 0.0,
            compile_events: vec![],
            profile: serde_json::Value::Null,
        }
    }

    #[test]
    fn speedups_divide_the_other_median_by_this_one() {
        let tiers = [
            tier("interp", &[("16", 2000.0), ("4", 800.0)]),
            tier("jit", &[("16", 1000.0)]),
        ];
        let text = render(&tiers, &[tier("ort1", &[("16", 3000.0)])]);
        let jit16 = text
            .lines()
            .find(|l| l.starts_with("jit ") && l.contains(" 16 "))
            .unwrap();
        assert!(
            jit16.contains("2.00x") && jit16.contains("3.00x"),
            "{jit16}"
        );
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("interp ")).collect();
        assert!(
            rows[0].contains(" 4 ") && rows[1].contains(" 16 "),
            "batches sort numerically: {rows:?}"
        );
    }

    #[test]
    fn tier_row_compares_on_the_tiers_own_shape_mix() {
        // jit-fixed ran only batch 1: compared with interp's batch-1 median (2.00x),
        // not with interp's mean over a mix of batch sizes.
        let tiers = [
            tier("interp", &[("1", 100.0), ("64", 10000.0)]),
            tier("jit-fixed", &[("1", 50.0)]),
        ];
        assert_eq!(mix_speedup(Some(&tiers[0]), &tiers[1]), "2.00x");
        let text = render(&tiers, &[]);
        let row = text.lines().rfind(|l| l.starts_with("jit-fixed ")).unwrap();
        assert!(row.trim_end().ends_with("2.00x"), "{row}");
        let missing = tier("jit", &[("16", 1.0)]);
        assert_eq!(mix_speedup(Some(&tiers[0]), &missing), "-");
    }
}
