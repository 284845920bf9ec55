//! Latency statistics: percentiles and per-tier summaries from iteration records.
//!
//! Percentiles interpolate linearly between closest ranks (NumPy's default), so the
//! peer script's `numpy.percentile` gives the same numbers on the same samples.
//!
//! **Invariant:** statistics use measured iterations only (`iter >= warmup`), except
//! `first_call_us`, which is the very first call with a shape, warm-up included.

use super::record::{BatchSummary, IterRecord, TierSummary};
use std::collections::BTreeMap;

/// The `q`-th percentile (0..=100) of sorted samples; NaN when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = (q / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
        }
    }
}

/// The median of unsorted samples; NaN when empty.
pub fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 50.0)
}

/// Counters a tier reports besides latencies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TierCounters {
    /// kernels compiled
    pub compile_count: u64,
    /// total compile time
    pub compile_ms_total: f64,
    /// compiled-kernel cache hits / lookups
    pub cache_hit_rate: f64,
    /// guard misses that fell back to the interpreter
    pub deopt_count: u64,
    /// module load time
    pub setup_ms: f64,
}

/// Summarizes one tier's records (all of one tier, in iteration order).
pub fn summarize(
    tier: &str,
    records: &[IterRecord],
    warmup: usize,
    counters: TierCounters,
    compile_events: Vec<usize>,
    profile: serde_json::Value,
) -> TierSummary {
    let mut first_call: BTreeMap<String, f64> = BTreeMap::new();
    let mut measured: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut all = Vec::new();
    for rec in records {
        let label = rec.label();
        first_call.entry(label.clone()).or_insert(rec.latency_us);
        if rec.iter >= warmup {
            measured.entry(label).or_default().push(rec.latency_us);
            all.push(rec.latency_us);
        }
    }
    let per_batch = measured
        .into_iter()
        .map(|(label, samples)| {
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            let steady = median(&samples[samples.len() / 2..]);
            let summary = BatchSummary {
                median_us: percentile(&sorted, 50.0),
                p90_us: percentile(&sorted, 90.0),
                p99_us: percentile(&sorted, 99.0),
                count: samples.len(),
                first_call_us: first_call.get(&label).copied().unwrap_or(f64::NAN),
                steady_median_us: steady,
            };
            (label, summary)
        })
        .collect();
    let mean_us = if all.is_empty() {
        f64::NAN
    } else {
        all.iter().sum::<f64>() / all.len() as f64
    };
    let firsts: Vec<f64> = first_call.values().copied().collect();
    TierSummary {
        tier: tier.to_string(),
        per_batch,
        mean_us,
        compile_count: counters.compile_count,
        compile_ms_total: counters.compile_ms_total,
        cache_hit_rate: counters.cache_hit_rate,
        first_call_after_new_shape_us: median(&firsts),
        deopt_count: counters.deopt_count,
        setup_ms: counters.setup_ms,
        compile_events,
        profile,
    }
}

/// Orders shape labels numerically when they are batch sizes, else as text.
pub fn label_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::ServedBy;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let s = [1.0, 2.0, 3.0, 4.0];
        // numpy.percentile([1,2,3,4], [0, 50, 90, 99, 100]) = 1, 2.5, 3.7, 3.97, 4
        for (q, want) in [
            (0.0, 1.0),
            (50.0, 2.5),
            (90.0, 3.7),
            (99.0, 3.97),
            (100.0, 4.0),
        ] {
            assert!((percentile(&s, q) - want).abs() < 1e-12, "q={q}");
        }
        assert!(percentile(&[], 50.0).is_nan());
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
    }

    fn rec(iter: usize, batch: usize, latency_us: f64) -> IterRecord {
        IterRecord {
            iter,
            batch: Some(batch),
            dims: None,
            latency_us,
            tier: "interp".into(),
            served_by: ServedBy::Interp,
        }
    }

    #[test]
    fn summary_skips_warmup_but_keeps_first_calls() {
        let records = [
            rec(0, 1, 100.0),
            rec(1, 4, 400.0),
            rec(2, 1, 10.0),
            rec(3, 1, 20.0),
            rec(4, 4, 40.0),
            rec(5, 1, 30.0),
        ];
        let s = summarize(
            "interp",
            &records,
            2,
            TierCounters::default(),
            vec![],
            serde_json::Value::Null,
        );
        let b1 = &s.per_batch["1"];
        assert_eq!((b1.count, b1.median_us, b1.first_call_us), (3, 20.0, 100.0));
        assert_eq!(b1.steady_median_us, 25.0); // last half of [10, 20, 30] is [20, 30]
        assert_eq!(s.per_batch["4"].first_call_us, 400.0);
        assert_eq!(s.mean_us, 25.0);
        assert_eq!(s.first_call_after_new_shape_us, 250.0);
    }

    #[test]
    fn labels_sort_numerically() {
        let mut labels = vec!["64", "batch=2,seq=3", "4", "16", "1"];
        labels.sort_by(|a, b| label_order(a, b));
        assert_eq!(labels, ["1", "4", "16", "64", "batch=2,seq=3"]);
    }
}
