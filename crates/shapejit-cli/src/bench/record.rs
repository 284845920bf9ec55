//! The bench JSON schema: per-iteration records and per-tier summaries.
//!
//! The same schema is written by `benches/peers/ort_bench.py`, so `--compare` can read
//! another engine's results. Required summary fields: `tier`, `per_batch` (shape label →
//! `median_us`, `p90_us`, `p99_us`, `count`), `mean_us`, `compile_count`,
//! `compile_ms_total`, `cache_hit_rate`, `first_call_after_new_shape_us`; the rest
//! default when absent.
//!
//! **Invariant:** a shape label is the batch size in decimal (`"16"`) for a batch step,
//! or `sym=N,...` (symbols sorted) for a trace step with named bindings.

use crate::workload::Step;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which code served an iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServedBy {
    /// every instruction ran in the interpreter
    Interp,
    /// compiled kernels specialized on the exact shapes served it
    Exact,
    /// a shape-family kernel (batch as a runtime argument) served part of it
    Family,
    /// another engine ran it (peer results read by `--compare`)
    Engine,
}

/// One timed iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterRecord {
    /// 0-based iteration, warm-up included
    pub iter: usize,
    /// the batch size, for batch steps
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// named symbol bindings, for trace steps that name them
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dims: Option<BTreeMap<String, usize>>,
    /// wall-clock latency of the run call
    pub latency_us: f64,
    /// the tier that ran it
    pub tier: String,
    /// what served it
    pub served_by: ServedBy,
}

impl IterRecord {
    /// The record's shape label (see the module invariant).
    pub fn label(&self) -> String {
        match (&self.dims, self.batch) {
            (Some(dims), _) => named_label(dims),
            (None, Some(b)) => b.to_string(),
            (None, None) => "-".to_string(),
        }
    }
}

/// The label of a workload step.
pub fn step_label(step: &Step) -> String {
    match step {
        Step::Batch(b) => b.to_string(),
        Step::Named(dims) => named_label(dims),
    }
}

fn named_label(dims: &BTreeMap<String, usize>) -> String {
    dims.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Latency statistics of one shape label within a tier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchSummary {
    /// median over the measured (post-warm-up) iterations
    pub median_us: f64,
    /// 90th percentile
    pub p90_us: f64,
    /// 99th percentile
    pub p99_us: f64,
    /// measured iterations
    pub count: usize,
    /// latency of the first call with this shape (warm-up included)
    #[serde(default)]
    pub first_call_us: f64,
    /// median over the last half of the measured iterations
    #[serde(default)]
    pub steady_median_us: f64,
}

/// One tier's (or one peer engine's) results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierSummary {
    /// tier or engine name (`interp`, `jit`, `ort1`, ...)
    pub tier: String,
    /// per shape label, sorted by label
    pub per_batch: BTreeMap<String, BatchSummary>,
    /// mean latency over the measured iterations
    pub mean_us: f64,
    /// kernels compiled during the run
    pub compile_count: u64,
    /// total compile time
    pub compile_ms_total: f64,
    /// compiled-kernel cache hits / lookups (0 when nothing was looked up)
    pub cache_hit_rate: f64,
    /// median over shapes of the first call's latency
    pub first_call_after_new_shape_us: f64,
    /// guard misses that fell back to the interpreter
    #[serde(default)]
    pub deopt_count: u64,
    /// module load / session creation time
    #[serde(default)]
    pub setup_ms: f64,
    /// iterations after which the compile count had grown (for the plot)
    #[serde(default)]
    pub compile_events: Vec<usize>,
    /// where the time went (engine-specific; shapejit: per op type and slot)
    #[serde(default)]
    pub profile: serde_json::Value,
}

/// A whole bench report (`--json FILE`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// engine name (`shapejit`, `onnxruntime`)
    pub engine: String,
    /// the model spec or path
    pub model: String,
    /// the workload
    pub workload: WorkloadInfo,
    /// one summary per tier
    pub tiers: Vec<TierSummary>,
    /// every iteration of every tier
    pub iterations: Vec<IterRecord>,
}

/// How the workload was generated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// the `--workload` spec
    pub spec: String,
    /// the `--seed`
    pub seed: u64,
    /// iterations per tier, warm-up included
    pub iters: usize,
    /// warm-up iterations (not in the statistics)
    pub warmup: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The minimal document `benches/peers/ort_bench.py` writes reads back.
    #[test]
    fn reads_a_peer_report_with_only_the_required_fields() {
        let text = r#"{"engine": "onnxruntime", "model": "m.onnx",
            "workload": {"spec": "fixed:4", "seed": 7, "iters": 2, "warmup": 1},
            "tiers": [{"tier": "ort1", "mean_us": 10.0, "compile_count": 0, "compile_ms_total": 0.0,
                       "cache_hit_rate": 0.0, "first_call_after_new_shape_us": 12.0,
                       "per_batch": {"4": {"median_us": 10.0, "p90_us": 11.0, "p99_us": 12.0, "count": 1}}}],
            "iterations": [{"iter": 0, "batch": 4, "latency_us": 12.0, "tier": "ort1", "served_by": "engine"},
                           {"iter": 1, "dims": {"batch": 4, "seq": 2}, "latency_us": 10.0, "tier": "ort1", "served_by": "engine"}]}"#;
        let report: Report = serde_json::from_str(text).unwrap();
        assert_eq!(report.tiers[0].per_batch["4"].p99_us, 12.0);
        assert_eq!(report.tiers[0].deopt_count, 0);
        assert_eq!(report.iterations[0].label(), "4");
        assert_eq!(report.iterations[1].label(), "batch=4,seq=2");
        assert_eq!(report.iterations[1].served_by, ServedBy::Engine);
    }
}
