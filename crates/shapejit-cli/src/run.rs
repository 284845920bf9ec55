//! `shapejit run MODEL`: run on `.npy` or seeded random inputs, summarize (and
//! optionally save) the outputs, print per-slot statistics or a time profile.
//!
//! **Invariant:** the printed and saved outputs are those of the last iteration.

use crate::bindings::{self, Bindings};
use crate::model::{CompileArg, TierArg};
use crate::{npy, profile};
use anyhow::{Context, Result, bail};
use serde_json::json;
use shapejit::{Stats, Tensor};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `shapejit run`.
#[derive(clap::Args)]
pub struct Args {
    /// the model: a .onnx, .sjir or .sjb file, or builtin:NAME
    model: String,
    /// an input from a .npy file (repeatable); missing inputs are random
    #[arg(long = "input", value_name = "NAME=FILE.npy", value_parser = parse_input)]
    inputs: Vec<(String, PathBuf)>,
    /// a value for a symbolic dim of random inputs (repeatable)
    #[arg(long = "dim", value_name = "SYMBOL=N", value_parser = bindings::parse_binding)]
    dims: Vec<(String, usize)>,
    /// run this many times (the outputs of the last run are kept)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    iters: u64,
    /// write each output to DIR/<output name>.npy
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// print the per-slot statistics table
    #[arg(long)]
    stats: bool,
    /// print time per op type and per slot, setup and first-iteration time
    #[arg(long)]
    profile: bool,
    /// print one JSON document (outputs, timings, and --stats / --profile data)
    #[arg(long)]
    json: bool,
    /// execution tier
    #[arg(long, value_enum, default_value = "jit")]
    tier: TierArg,
    /// when compiled kernels are built
    #[arg(long, value_enum, default_value = "background")]
    compile: CompileArg,
    /// seed of the random inputs
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// intra-op threads, the calling thread included (default: all cores)
    #[arg(long, value_name = "N", value_parser = crate::model::parse_threads)]
    threads: Option<usize>,
    /// fail a run that takes longer than this (seconds; a runaway loop stops)
    #[arg(long, value_name = "SECONDS", value_parser = bindings::parse_timeout)]
    timeout: Option<std::time::Duration>,
}

fn parse_input(text: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not NAME=FILE.npy"))?;
    if name.is_empty() || path.is_empty() {
        return Err(format!("'{text}' is not NAME=FILE.npy"));
    }
    Ok((name.to_string(), PathBuf::from(path)))
}

/// Builds the input list in the module's order: files where given, else random.
fn make_inputs(module: &shapejit::Module, args: &Args) -> Result<Vec<Tensor>> {
    let specs = module.inputs();
    let mut budget = bindings::InputBudget::new(module.vm().options().max_memory);
    let mut from_files: Vec<Option<Tensor>> = vec![None; specs.len()];
    for (name, path) in &args.inputs {
        let Some(idx) = specs.iter().position(|s| &s.name == name) else {
            let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "the model has no input '{name}' (its inputs: {})",
                known.join(", ")
            );
        };
        if from_files[idx].is_some() {
            bail!("input '{name}' is given twice");
        }
        from_files[idx] =
            Some(npy::read(path, name, &mut budget).with_context(|| format!("input '{name}'"))?);
    }
    // Symbols not given by --dim are taken from the file inputs' actual dims.
    let mut binds: Bindings = bindings::collect(&args.dims)?;
    for (spec, tensor) in specs.iter().zip(&from_files) {
        let Some(t) = tensor else { continue };
        for (dim, &actual) in spec.ty.shape.dims().iter().zip(t.shape()) {
            if let Some(sym) = dim.as_symbol() {
                binds.entry(sym.name().to_string()).or_insert(actual);
            }
        }
    }
    let mut rng = bindings::rng(args.seed);
    specs
        .iter()
        .zip(from_files)
        .map(|(spec, tensor)| match tensor {
            Some(t) => Ok(t),
            None => {
                let shape = bindings::concrete_shape(&spec.name, &spec.ty, &binds)?;
                budget.admit(&spec.name, spec.ty.dtype, &shape)?;
                bindings::random_tensor(spec.ty.dtype, &shape, &mut rng)
            }
        })
        .collect()
}

/// `name: f32[1, 10]  min .. max .. mean ..`
fn summary(name: &str, t: &Tensor) -> (String, serde_json::Value) {
    let values = t.to_f64_vec();
    let (min, max) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    let text = if values.is_empty() {
        format!("{name}: {}{:?}  (empty)", t.dtype(), t.shape())
    } else {
        format!(
            "{name}: {}{:?}  min {min:.6} max {max:.6} mean {mean:.6}",
            t.dtype(),
            t.shape()
        )
    };
    let doc = json!({ "name": name, "dtype": t.dtype().name(), "shape": t.shape(), "min": min, "max": max, "mean": mean });
    (text, doc)
}

fn stats_table(stats: &Stats) -> String {
    let mut out = format!(
        "{:>5}  {:<22}{:<28}{:>8}{:>11}{:>7}{:>7}{:>6}{:>6}  keys\n",
        "slot", "kind", "node", "execs", "interp ms", "hits", "miss", "comp", "evict"
    );
    for s in &stats.slots {
        let keys: Vec<String> = s
            .keys
            .iter()
            .map(|k| format!("{} x{}", k.key, k.total))
            .collect();
        out.push_str(&format!(
            "{:>5}  {:<22}{:<28}{:>8}{:>11.3}{:>7}{:>7}{:>6}{:>6}  {}\n",
            s.slot,
            s.kind,
            s.node,
            s.executions,
            s.interp_ns as f64 / 1e6,
            s.kernel_hits,
            s.guard_misses,
            s.compiles,
            s.evictions,
            keys.join("; ")
        ));
    }
    for s in stats.slots.iter().filter(|s| s.compile_errors > 0) {
        out.push_str(&format!(
            "slot {}: {} failed compilation(s), stays interpreted for them; last: {}\n",
            s.slot,
            s.compile_errors,
            s.last_compile_error.as_deref().unwrap_or("?")
        ));
    }
    let g = &stats.global;
    out.push_str(&format!("{}\n", cpu_line()));
    out.push_str(&format!(
        "compile queue {}, dropped requests {}, live code {} bytes, packed weights {} bytes\n\
         {} thread(s), {} op(s) run in pieces\n",
        g.queue_depth,
        g.dropped_requests,
        g.live_code_bytes,
        g.packed_weight_bytes,
        g.threads,
        g.split_ops
    ));
    out
}

/// `cpu level avx2 (detected avx2)`: the kernels' level and the CPU's.
pub fn cpu_line() -> String {
    use shapejit::cpu;
    format!("cpu level {} (detected {})", cpu::level(), cpu::detected())
}

/// Runs the command.
pub fn main(args: Args) -> Result<()> {
    let (module, setup) = crate::model::load(
        &args.model,
        crate::model::options(args.tier, args.compile, args.threads),
    )?;
    let inputs = make_inputs(&module, &args)?;
    let alloc_before = profile::arena_alloc_us();
    let mut rt = module.runtime();
    let mut outputs = Vec::new();
    let mut first_us = 0.0;
    let wall = Instant::now();
    for i in 0..args.iters {
        let start = Instant::now();
        outputs = rt
            .run_with(&inputs, &bindings::run_limits(args.timeout))
            .context("the run failed")?;
        if i == 0 {
            first_us = start.elapsed().as_secs_f64() * 1e6;
        }
    }
    let wall_us = wall.elapsed().as_secs_f64() * 1e6;
    let mut lines = Vec::new();
    let mut docs = Vec::new();
    for (spec, t) in module.outputs().iter().zip(&outputs) {
        let (mut text, mut doc) = summary(&spec.name, t);
        if let Some(dir) = &args.output_dir {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create '{}'", dir.display()))?;
            let path = dir.join(format!("{}.npy", npy::sanitize(&spec.name)));
            npy::write(&path, t)?;
            text.push_str(&format!("  -> {}", path.display()));
            doc["file"] = json!(path.display().to_string());
        }
        lines.push(text);
        docs.push(doc);
    }
    let stats = (args.stats || args.profile).then(|| module.stats());
    let prof = match (&stats, args.profile) {
        (Some(stats), true) => {
            let measured = profile::Measured {
                setup_ms: setup.as_secs_f64() * 1e3,
                first_iteration_us: first_us,
                runs: args.iters as usize,
                wall_us,
                arena_bytes: rt.vm().arena_bytes(),
                arena_alloc_us: profile::arena_alloc_us() - alloc_before,
            };
            Some(profile::build(stats, &measured))
        }
        _ => None,
    };
    if args.json {
        let mut doc = json!({
            "model": args.model,
            "iters": args.iters,
            "setup_ms": setup.as_secs_f64() * 1e3,
            "first_iteration_us": first_us,
            "mean_us": wall_us / args.iters as f64,
            "threads": module.vm().options().threads,
            "outputs": docs,
        });
        if args.stats {
            doc["stats"] = serde_json::to_value(&stats)?;
            doc["cpu_level"] = json!(shapejit::cpu::level().name());
        }
        if let Some(p) = &prof {
            doc["profile"] = serde_json::to_value(p)?;
        }
        return crate::output::emit(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
    }
    let mut text = lines.join("\n");
    text.push_str(&format!(
        "\n{} run(s): first {:.1} µs, mean {:.1} µs (setup {:.2} ms, {} thread(s))\n",
        args.iters,
        first_us,
        wall_us / args.iters as f64,
        setup.as_secs_f64() * 1e3,
        module.vm().options().threads
    ));
    if let (true, Some(stats)) = (args.stats, &stats) {
        text.push_str(&format!("\n{}", stats_table(stats)));
    }
    if let Some(p) = &prof {
        text.push_str(&format!("\n{}", profile::render(p, 20)));
    }
    crate::output::emit(&text)
}
