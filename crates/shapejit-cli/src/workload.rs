//! Benchmark workloads: the sequence of symbol bindings (batch sizes) a bench feeds
//! the model, one per iteration.
//!
//! Generators (`--workload`):
//! - `random-walk:V1,V2,...` — start at `V1`; after each step draw `r = next() % 3` and
//!   move the index by `r - 1` (left, stay, right); a move off either end stays.
//! - `fixed:N` — always `N`.
//! - `cycle:V1,V2,...` — `V[i % len]`.
//! - `jitter:LO..HI` — `LO + next() % (HI - LO + 1)` (uniform, inclusive; shape churn).
//! - `trace:FILE` — one step per non-empty line (`#` starts a comment): either a bare
//!   batch size `16` or `sym=N,sym=N` bindings; the trace repeats when it is shorter
//!   than the run.
//!
//! `next()` is SplitMix64 seeded with `--seed` (see [`SplitMix64`]): simple enough that
//! `benches/peers/ort_bench.py` implements it bit for bit, so both sides see the same
//! batch sequence for the same seed.
//!
//! **Invariant:** a workload is a pure function of its spec, seed and length.
//! **Invariant:** a random walk only moves to a neighbouring value or stays.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;

/// The SplitMix64 generator (Steele, Lea, Flood 2014), as in `java.util.SplittableRandom`:
/// `state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
/// z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31` (wrapping 64-bit arithmetic).
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output depends on `seed` only.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One iteration's symbol bindings. The primary symbol (the batch) is bound by bare
/// numbers; a trace may bind others by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// a value for the primary (batch) symbol
    Batch(usize),
    /// named bindings from a trace line
    Named(BTreeMap<String, usize>),
}

/// A parsed `--workload` spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    /// neighbour random walk over the values, in the given order
    RandomWalk(Vec<usize>),
    /// one value
    Fixed(usize),
    /// the values in turn
    Cycle(Vec<usize>),
    /// uniform over `lo..=hi`
    Jitter {
        /// lowest value
        lo: usize,
        /// highest value (inclusive)
        hi: usize,
    },
    /// recorded steps, repeated
    Trace(Vec<Step>),
}

/// The default workload spec.
pub const DEFAULT_SPEC: &str = "random-walk:1,4,16,64";

impl Workload {
    /// Parses a spec such as `random-walk:1,4,16,64` (a trace file is read now).
    pub fn parse(spec: &str) -> Result<Workload> {
        let (kind, arg) = spec.split_once(':').with_context(|| {
            format!("workload '{spec}' has no ':'; expected random-walk:1,4,16,64, fixed:N, cycle:..., jitter:LO..HI or trace:FILE")
        })?;
        match kind {
            "random-walk" => Ok(Workload::RandomWalk(parse_values(arg, spec)?)),
            "cycle" => Ok(Workload::Cycle(parse_values(arg, spec)?)),
            "fixed" => Ok(Workload::Fixed(
                parse_size(arg).with_context(|| format!("in workload '{spec}'"))?,
            )),
            "jitter" => {
                let (lo, hi) = arg
                    .split_once("..")
                    .with_context(|| format!("workload '{spec}': expected jitter:LO..HI"))?;
                let lo = parse_size(lo).with_context(|| format!("in workload '{spec}'"))?;
                let hi = parse_size(hi).with_context(|| format!("in workload '{spec}'"))?;
                if lo > hi {
                    bail!("workload '{spec}': LO ({lo}) is greater than HI ({hi})");
                }
                Ok(Workload::Jitter { lo, hi })
            }
            "trace" => {
                let text = shapejit::ir::file::read_to_string(Path::new(arg))
                    .with_context(|| format!("cannot read trace file '{arg}'"))?;
                Ok(Workload::Trace(
                    parse_trace(&text).with_context(|| format!("in trace file '{arg}'"))?,
                ))
            }
            other => bail!(
                "unknown workload kind '{other}'; expected random-walk, fixed, cycle, jitter or trace"
            ),
        }
    }

    /// The first `n` steps with this seed.
    pub fn steps(&self, n: usize, seed: u64) -> Vec<Step> {
        let mut rng = SplitMix64::new(seed);
        match self {
            Workload::RandomWalk(values) => {
                let mut idx = 0usize;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(Step::Batch(values[idx]));
                    let next = match rng.next_u64() % 3 {
                        0 => idx.checked_sub(1),
                        1 => Some(idx),
                        _ => Some(idx + 1).filter(|&j| j < values.len()),
                    };
                    idx = next.unwrap_or(idx);
                }
                out
            }
            Workload::Fixed(v) => vec![Step::Batch(*v); n],
            Workload::Cycle(values) => (0..n)
                .map(|i| Step::Batch(values[i % values.len()]))
                .collect(),
            Workload::Jitter { lo, hi } => {
                let width = (hi - lo) as u64 + 1;
                (0..n)
                    .map(|_| Step::Batch(lo + (rng.next_u64() % width) as usize))
                    .collect()
            }
            Workload::Trace(steps) => steps.iter().cycle().take(n).cloned().collect(),
        }
    }
}

fn parse_size(text: &str) -> Result<usize> {
    let t = text.trim();
    let v: usize = t
        .parse()
        .with_context(|| format!("'{t}' is not a non-negative integer"))?;
    if v == 0 {
        bail!("a size of 0 is not a useful workload step; use 1 or more");
    }
    Ok(v)
}

fn parse_values(arg: &str, spec: &str) -> Result<Vec<usize>> {
    let values = arg
        .split(',')
        .map(parse_size)
        .collect::<Result<Vec<_>>>()
        .with_context(|| format!("in workload '{spec}'"))?;
    if values.is_empty() {
        bail!("workload '{spec}' lists no values");
    }
    Ok(values)
}

/// Parses a trace: one step per line; errors name the 1-based line.
pub fn parse_trace(text: &str) -> Result<Vec<Step>> {
    let mut steps = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let step = parse_trace_line(line).with_context(|| format!("line {}: '{line}'", i + 1))?;
        steps.push(step);
    }
    if steps.is_empty() {
        bail!("the trace has no steps (one batch size or sym=N,... per line)");
    }
    Ok(steps)
}

fn parse_trace_line(line: &str) -> Result<Step> {
    if !line.contains('=') {
        return Ok(Step::Batch(parse_size(line)?));
    }
    let mut named = BTreeMap::new();
    for part in line.split(',') {
        let (sym, value) = part
            .split_once('=')
            .with_context(|| format!("'{}' is not sym=N", part.trim()))?;
        let sym = sym.trim();
        if sym.is_empty() {
            bail!("'{}' has no symbol name before '='", part.trim());
        }
        if named.insert(sym.to_string(), parse_size(value)?).is_some() {
            bail!("symbol '{sym}' is bound twice");
        }
    }
    Ok(Step::Named(named))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batches(steps: &[Step]) -> Vec<usize> {
        steps
            .iter()
            .map(|s| match s {
                Step::Batch(b) => *b,
                Step::Named(_) => panic!("unexpected named step"),
            })
            .collect()
    }

    #[test]
    fn splitmix_matches_published_vectors() {
        // Reference outputs of SplitMix64 seeded with 0 (e.g. the xoshiro authors' splitmix64.c).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn random_walk_moves_to_neighbours_only() {
        let values = vec![1, 4, 16, 64];
        for seed in 0..20 {
            let steps = batches(&Workload::RandomWalk(values.clone()).steps(2000, seed));
            assert_eq!(steps[0], 1, "the walk starts at the first value");
            for w in steps.windows(2) {
                let a = values.iter().position(|&v| v == w[0]).unwrap();
                let b = values.iter().position(|&v| v == w[1]).unwrap();
                assert!(a.abs_diff(b) <= 1, "seed {seed}: jump {} -> {}", w[0], w[1]);
            }
            for v in &values {
                assert!(steps.contains(v), "seed {seed}: the walk never reaches {v}");
            }
        }
    }

    #[test]
    fn workloads_are_reproducible_from_the_seed() {
        for w in [
            Workload::RandomWalk(vec![1, 4, 16, 64]),
            Workload::Jitter { lo: 1, hi: 64 },
        ] {
            assert_eq!(w.steps(300, 7), w.steps(300, 7));
            assert_ne!(w.steps(300, 7), w.steps(300, 8));
        }
    }

    /// Pins the default workload's first batches for the default seed (7), so the Python
    /// peer script can check its generator against the same list (`ort_bench.py --self-test`).
    #[test]
    fn default_walk_first_batches_are_pinned() {
        let w = Workload::parse(DEFAULT_SPEC).unwrap();
        assert_eq!(batches(&w.steps(24, 7)), PINNED_SEED7);
    }

    /// The first 24 batches of `random-walk:1,4,16,64` with seed 7 (also in `ort_bench.py`).
    const PINNED_SEED7: [usize; 24] = [
        1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 16, 16, 16, 4, 4, 1, 1, 1, 4, 16, 16, 16, 64, 64,
    ];

    /// The peer script (`benches/peers/ort_bench.py`) implements the generators
    /// independently; both must give the same steps for the same spec and seed.
    #[test]
    fn peer_script_generates_the_same_steps() {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../benches/peers/ort_bench.py"
        );
        for spec in [
            "random-walk:1,4,16,64",
            "random-walk:2,3",
            "jitter:1..100",
            "cycle:1,2,3",
        ] {
            for seed in [0u64, 7, u64::MAX - 3] {
                let out = std::process::Command::new("python3")
                    .args([
                        script,
                        "--print-workload",
                        spec,
                        "--iters",
                        "300",
                        "--seed",
                        &seed.to_string(),
                    ])
                    .output()
                    .expect("python3 runs the peer script's generator for this check");
                assert!(
                    out.status.success(),
                    "{spec}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let python: Vec<String> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(str::to_string)
                    .collect();
                let rust: Vec<String> = Workload::parse(spec)
                    .unwrap()
                    .steps(300, seed)
                    .iter()
                    .map(step_text)
                    .collect();
                assert_eq!(python, rust, "{spec} seed {seed}");
            }
        }
    }

    fn step_text(step: &Step) -> String {
        match step {
            Step::Batch(b) => b.to_string(),
            Step::Named(_) => panic!("generators make batch steps"),
        }
    }

    #[test]
    fn jitter_stays_in_range_and_covers_it() {
        let steps = batches(&Workload::parse("jitter:3..9").unwrap().steps(1000, 1));
        assert!(steps.iter().all(|b| (3..=9).contains(b)));
        for v in 3..=9 {
            assert!(steps.contains(&v));
        }
    }

    #[test]
    fn fixed_and_cycle() {
        assert_eq!(
            batches(&Workload::parse("fixed:16").unwrap().steps(3, 0)),
            [16, 16, 16]
        );
        assert_eq!(
            batches(&Workload::parse("cycle:1,4,16").unwrap().steps(5, 0)),
            [1, 4, 16, 1, 4]
        );
    }

    #[test]
    fn trace_parses_and_repeats() {
        let steps = parse_trace("# header\n4\n\nbatch=8, seq=3  # two symbols\n16\n").unwrap();
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0], Step::Batch(4));
        let named = BTreeMap::from([("batch".to_string(), 8), ("seq".to_string(), 3)]);
        assert_eq!(steps[1], Step::Named(named));
        let w = Workload::Trace(steps);
        assert_eq!(w.steps(5, 0)[3], Step::Batch(4));
    }

    #[test]
    fn trace_errors_name_the_line() {
        for (text, line) in [
            ("4\nfour\n", "line 2"),
            ("1\n2\n\n=3\n", "line 4"),
            ("a=1,a=2", "line 1"),
            ("0", "line 1"),
        ] {
            let err = format!("{:#}", parse_trace(text).unwrap_err());
            assert!(err.starts_with(line), "{text:?}: {err}");
        }
        assert!(parse_trace("# nothing\n").is_err());
    }

    #[test]
    fn bad_specs_are_errors() {
        for spec in [
            "random-walk",
            "random-walk:",
            "walk:1,2",
            "fixed:x",
            "jitter:9..3",
            "jitter:3",
            "cycle:1,,2",
            "trace:/nonexistent/file",
        ] {
            assert!(Workload::parse(spec).is_err(), "{spec}");
        }
    }
}
