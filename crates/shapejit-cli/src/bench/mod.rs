//! `shapejit bench [MODEL]`: the tier comparison on a dynamic-shape workload.
//!
//! Each tier gets a fresh module (its load time is the tier's `setup_ms`) and runs
//! the same step sequence on the same prebuilt inputs (one input set per distinct
//! shape, generated once from `--seed`). Tiers:
//! - `interp` — interpreter only;
//! - `jit` — compiled kernels built on the background thread, as in production;
//! - `jit-sync` — compiles on the calling thread; after the warm-up every shape of the
//!   measured part is run (untimed) until compiling stops, so the measured iterations
//!   are the fully warmed bound;
//! - `jit-fixed` — `jit` with every step replaced by the workload's most common shape
//!   (the static best case).
//!
//! **Invariant:** a timed iteration is exactly one `Runtime::run` call; counters are
//! read between calls, outside the timed span.

pub mod record;
pub mod summary;
pub mod svg;
pub mod table;

use crate::bindings::{self, Bindings};
use crate::model::{self, CompileArg, TierArg};
use crate::profile;
use crate::workload::{self, Step, Workload};
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use record::{IterRecord, Report, ServedBy, TierSummary, WorkloadInfo, step_label};
use shapejit::{Module, Tensor};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;
use summary::TierCounters;

/// A tier of `--tiers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchTier {
    /// interpreter only
    Interp,
    /// JIT with background compiles
    Jit,
    /// JIT with synchronous compiles, fully warmed before the measured part
    JitSync,
    /// JIT at one fixed batch (the workload's most common)
    JitFixed,
}

impl BenchTier {
    fn name(self) -> &'static str {
        match self {
            BenchTier::Interp => "interp",
            BenchTier::Jit => "jit",
            BenchTier::JitSync => "jit-sync",
            BenchTier::JitFixed => "jit-fixed",
        }
    }
}

/// Arguments of `shapejit bench`.
#[derive(clap::Args)]
pub struct Args {
    /// the model: a .onnx, .sjir or .sjb file, or builtin:NAME
    #[arg(default_value = "builtin:transformer")]
    model: String,
    /// random-walk:V,..  fixed:N  cycle:V,..  jitter:LO..HI  trace:FILE
    #[arg(long, default_value = workload::DEFAULT_SPEC)]
    workload: String,
    /// iterations per tier, warm-up included
    #[arg(long, default_value_t = 500)]
    iters: usize,
    /// leading iterations left out of the statistics
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// a value for another symbolic dim (repeatable)
    #[arg(long = "dim", value_name = "SYMBOL=N", value_parser = bindings::parse_binding)]
    dims: Vec<(String, usize)>,
    /// seed of the workload generator and the inputs
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// tiers to compare, comma-separated
    #[arg(long, value_enum, value_delimiter = ',', default_value = "interp,jit")]
    tiers: Vec<BenchTier>,
    /// write every iteration and the summaries as JSON
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// write a latency-over-iteration plot
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// add another engine's results (same JSON schema) as extra columns
    #[arg(long, value_name = "FILE.json")]
    compare: Option<PathBuf>,
    /// intra-op threads, the calling thread included (default: all cores)
    #[arg(long, value_name = "N", value_parser = model::parse_threads)]
    threads: Option<usize>,
    /// fail a run (one iteration) that takes longer than this (seconds)
    #[arg(long, value_name = "SECONDS", value_parser = bindings::parse_timeout)]
    timeout: Option<std::time::Duration>,
}

/// One tier's raw results.
struct TierRun {
    records: Vec<IterRecord>,
    summary: TierSummary,
}

/// Sums of the counters that classify an iteration.
#[derive(Clone, Copy, Default, PartialEq)]
struct Totals {
    compiles: u64,
    exact_hits: u64,
    family_hits: u64,
}

fn totals(module: &Module) -> Totals {
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    module
        .vm()
        .counters()
        .slots
        .iter()
        .fold(Totals::default(), |t, c| Totals {
            compiles: t.compiles + load(&c.compiles),
            exact_hits: t.exact_hits + load(&c.exact_hits),
            family_hits: t.family_hits + load(&c.family_hits),
        })
}

/// The shape bindings and prebuilt inputs of every distinct step.
struct Inputs {
    by_label: HashMap<String, Vec<Tensor>>,
}

impl Inputs {
    fn build(module: &Module, steps: &[Step], dims: &Bindings, seed: u64) -> Result<Inputs> {
        let symbols: Vec<String> = module
            .inputs()
            .iter()
            .flat_map(|s| s.ty.shape.dims().iter().flat_map(|d| d.symbols()))
            .map(|s| s.name().to_string())
            .collect();
        let primary = symbols
            .iter()
            .find(|s| *s == "batch")
            .or(symbols.first())
            .cloned();
        // Every distinct step's shapes first: the whole set is admitted by the
        // memory budget before any input is generated.
        let mut budget = bindings::InputBudget::new(module.vm().options().max_memory);
        let mut planned: Vec<(String, Vec<Vec<usize>>)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for step in steps {
            let label = step_label(step);
            if !seen.insert(label.clone()) {
                continue;
            }
            let mut binds = dims.clone();
            match step {
                Step::Batch(b) => {
                    let Some(primary) = &primary else {
                        bail!(
                            "the model's inputs have no symbolic dim for the workload to vary (they are all fixed)"
                        );
                    };
                    binds.insert(primary.clone(), *b);
                }
                Step::Named(named) => binds.extend(named.iter().map(|(k, v)| (k.clone(), *v))),
            }
            let shapes = module
                .inputs()
                .iter()
                .map(|spec| {
                    let shape = bindings::concrete_shape(&spec.name, &spec.ty, &binds)?;
                    budget.admit(&spec.name, spec.ty.dtype, &shape)?;
                    Ok(shape)
                })
                .collect::<Result<Vec<_>>>()
                .with_context(|| {
                    format!(
                        "workload step '{label}' (the inputs of all {} distinct steps are built before the run)",
                        seen.len()
                    )
                })?;
            planned.push((label, shapes));
        }
        let mut rng = bindings::rng(seed);
        let mut by_label = HashMap::new();
        for (label, shapes) in planned {
            let tensors = module
                .inputs()
                .iter()
                .zip(&shapes)
                .map(|(spec, shape)| bindings::random_tensor(spec.ty.dtype, shape, &mut rng))
                .collect::<Result<Vec<_>>>()
                .with_context(|| format!("workload step '{label}'"))?;
            by_label.insert(label, tensors);
        }
        Ok(Inputs { by_label })
    }

    fn get(&self, step: &Step) -> &[Tensor] {
        // Invariant: `build` made an entry for every step of the sequence.
        self.by_label
            .get(&step_label(step))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

/// The most common step (ties: the one seen first).
fn most_common(steps: &[Step]) -> Option<Step> {
    let mut counts: Vec<(String, usize, &Step)> = Vec::new();
    for step in steps {
        let label = step_label(step);
        match counts.iter_mut().find(|(l, _, _)| *l == label) {
            Some(entry) => entry.1 += 1,
            None => counts.push((label, 1, step)),
        }
    }
    let best = counts.iter().map(|c| c.1).max()?;
    counts
        .into_iter()
        .find(|c| c.1 == best)
        .map(|c| c.2.clone())
}

fn run_tier(
    tier: BenchTier,
    args: &Args,
    steps: &[Step],
    inputs: &Inputs,
    bar: &ProgressBar,
) -> Result<TierRun> {
    let (tier_arg, compile) = match tier {
        BenchTier::Interp => (TierArg::Interp, CompileArg::Off),
        BenchTier::Jit | BenchTier::JitFixed => (TierArg::Jit, CompileArg::Background),
        BenchTier::JitSync => (TierArg::Jit, CompileArg::Sync),
    };
    let options = model::options(tier_arg, compile, args.threads);
    let promote = options.promote_threshold as usize;
    let (module, setup) = model::load(&args.model, options)?;
    let alloc_before = profile::arena_alloc_us();
    let mut rt = module.runtime();
    let fixed = (tier == BenchTier::JitFixed)
        .then(|| most_common(steps))
        .flatten();
    let mut records = Vec::with_capacity(steps.len());
    let mut compile_events = Vec::new();
    let mut first_us = f64::NAN;
    let wall = Instant::now();
    bar.set_message(tier.name());
    for (iter, step) in steps.iter().enumerate() {
        let step = fixed.as_ref().unwrap_or(step);
        if tier == BenchTier::JitSync && iter == args.warmup {
            prewarm(&module, &mut rt, &steps[args.warmup..], inputs, promote)?;
        }
        let before = totals(&module);
        let limits = bindings::run_limits(args.timeout);
        let start = Instant::now();
        rt.run_with(inputs.get(step), &limits)
            .with_context(|| format!("tier {}, iteration {iter}", tier.name()))?;
        let latency_us = start.elapsed().as_secs_f64() * 1e6;
        let after = totals(&module);
        if iter == 0 {
            first_us = latency_us;
        }
        if after.compiles > before.compiles {
            compile_events.push(iter);
        }
        let served_by = if after.family_hits > before.family_hits {
            ServedBy::Family
        } else if after.exact_hits > before.exact_hits {
            ServedBy::Exact
        } else {
            ServedBy::Interp
        };
        let (batch, dims) = match step {
            Step::Batch(b) => (Some(*b), None),
            Step::Named(named) => (None, Some(named.clone())),
        };
        records.push(IterRecord {
            iter,
            batch,
            dims,
            latency_us,
            tier: tier.name().to_string(),
            served_by,
        });
        bar.inc(1);
    }
    let wall_us = wall.elapsed().as_secs_f64() * 1e6;
    let stats = module.stats();
    let sum = |f: fn(&shapejit::SlotStats) -> u64| stats.slots.iter().map(f).sum::<u64>();
    let (hits, misses) = (sum(|s| s.kernel_hits), sum(|s| s.guard_misses));
    let counters = TierCounters {
        compile_count: sum(|s| s.compiles),
        compile_ms_total: sum(|s| s.compile_us) as f64 / 1e3,
        cache_hit_rate: if hits + misses == 0 {
            0.0
        } else {
            hits as f64 / (hits + misses) as f64
        },
        deopt_count: misses,
        setup_ms: setup.as_secs_f64() * 1e3,
    };
    let measured = profile::Measured {
        setup_ms: counters.setup_ms,
        first_iteration_us: first_us,
        runs: steps.len(),
        wall_us,
        arena_bytes: rt.vm().arena_bytes(),
        arena_alloc_us: profile::arena_alloc_us() - alloc_before,
    };
    let prof = serde_json::to_value(profile::build(&stats, &measured))?;
    let summary = summary::summarize(
        tier.name(),
        &records,
        args.warmup,
        counters,
        compile_events,
        prof,
    );
    Ok(TierRun { records, summary })
}

/// `jit-sync`: runs every shape of `rest` (untimed) at least `promote + 1` times and
/// until a run compiles nothing more (at most 4 extra runs per shape).
fn prewarm(
    module: &Module,
    rt: &mut shapejit::Runtime,
    rest: &[Step],
    inputs: &Inputs,
    promote: usize,
) -> Result<()> {
    let mut seen = Vec::new();
    for step in rest {
        let label = step_label(step);
        if seen.contains(&label) {
            continue;
        }
        seen.push(label.clone());
        for _ in 0..=promote {
            rt.run(inputs.get(step))
                .with_context(|| format!("jit-sync warm-up at {label}"))?;
        }
        for _ in 0..4 {
            let before = totals(module).compiles;
            rt.run(inputs.get(step))
                .with_context(|| format!("jit-sync warm-up at {label}"))?;
            if totals(module).compiles == before {
                break;
            }
        }
    }
    Ok(())
}

fn read_compare(path: &PathBuf) -> Result<Vec<TierSummary>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    let report: Report = serde_json::from_str(&text).with_context(|| {
        format!(
            "'{}' is not a bench JSON report (shapejit bench --json or ort_bench.py)",
            path.display()
        )
    })?;
    Ok(report.tiers)
}

/// Runs the command.
pub fn main(args: Args) -> Result<()> {
    if args.iters == 0 {
        bail!("--iters must be at least 1");
    }
    if args.warmup >= args.iters {
        bail!(
            "--warmup ({}) must be less than --iters ({}), or nothing is measured",
            args.warmup,
            args.iters
        );
    }
    if args.tiers.is_empty() {
        bail!("--tiers lists no tier");
    }
    let workload = Workload::parse(&args.workload)?;
    let steps = workload.steps(args.iters, args.seed);
    let compare = args
        .compare
        .as_ref()
        .map(read_compare)
        .transpose()?
        .unwrap_or_default();
    let dims = bindings::collect(&args.dims)?;
    let (probe, _) = model::load(
        &args.model,
        model::options(TierArg::Interp, CompileArg::Off, args.threads),
    )?;
    let threads = probe.vm().options().threads;
    let mut all_steps = steps.clone();
    all_steps.extend(most_common(&steps));
    let inputs = Inputs::build(&probe, &all_steps, &dims, args.seed)?;
    drop(probe);

    let total = (args.iters * args.tiers.len()) as u64;
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>9} [{bar:40}] {pos}/{len} iterations, {elapsed} elapsed, eta {eta}",
        )
        // Invariant: the template above is a valid indicatif template.
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let mut runs = Vec::new();
    let mut seen = Vec::new();
    for &tier in &args.tiers {
        if seen.contains(&tier) {
            continue;
        }
        seen.push(tier);
        runs.push(run_tier(tier, &args, &steps, &inputs, &bar)?);
    }
    bar.finish_and_clear();

    let summaries: Vec<TierSummary> = runs.iter().map(|r| r.summary.clone()).collect();
    let mut text = format!(
        "shapejit bench {}: workload {} (seed {}), {} iterations per tier ({} warm-up), {}, {} thread(s)\n\n",
        args.model,
        args.workload,
        args.seed,
        args.iters,
        args.warmup,
        crate::run::cpu_line(),
        threads
    );
    text.push_str(&table::render(&summaries, &compare));
    let report = Report {
        engine: "shapejit".to_string(),
        model: args.model.clone(),
        workload: WorkloadInfo {
            spec: args.workload.clone(),
            seed: args.seed,
            iters: args.iters,
            warmup: args.warmup,
        },
        tiers: summaries,
        iterations: runs
            .iter()
            .flat_map(|r| r.records.iter().cloned())
            .collect(),
    };
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).with_context(|| format!("cannot write '{}'", path.display()))?;
        text.push_str(&format!("\nwrote {}\n", path.display()));
    }
    if let Some(path) = &args.svg {
        let series: Vec<svg::Series<'_>> = runs
            .iter()
            .map(|r| svg::Series {
                tier: &r.summary.tier,
                records: &r.records,
                compile_events: &r.summary.compile_events,
            })
            .collect();
        let title = format!("{} — {} (seed {})", args.model, args.workload, args.seed);
        std::fs::write(path, svg::render(&title, &series, args.warmup))
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        text.push_str(&format!("wrote {}\n", path.display()));
    }
    crate::output::emit(&text)
}
