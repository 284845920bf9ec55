//! Shape churn on many threads (issue 12, "compile storm"): `THREADS` threads share
//! one module of a model and each runs `RUNS` batches drawn uniformly from `1..=MAX`
//! (seeded per thread), with the default options (JIT tier, background compiles).
//! Prints the compiles, the kernel hits (family and exact) and the interpreted region
//! executions, per module and for the busiest slot.
//!
//! `cargo run --release -p shapejit --example thread_churn -- [MODEL] [THREADS] [MAX] [RUNS]`
//! (defaults: `builtin:mlp 8 200 100`).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shapejit::{Module, Options, Tensor};
use std::time::Instant;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> Result<T, String> {
    match args.get(i) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| format!("argument {i} ('{s}') is not a number")),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args
        .first()
        .cloned()
        .unwrap_or_else(|| "builtin:mlp".to_string());
    let threads: usize = arg(&args, 1, 8)?;
    let max: usize = arg(&args, 2, 200)?;
    let runs: usize = arg(&args, 3, 100)?;
    if threads == 0 || max == 0 {
        return Err("threads and the largest batch must be at least 1".into());
    }
    let module = Module::load(&model, Options::default())?;
    let spec = &module.inputs()[0];
    // The first input's dims after the batch (symbolic dims other than the batch
    // are not supported here).
    let row = spec.ty.shape.dims()[1..]
        .iter()
        .map(|d| d.as_known().and_then(|n| usize::try_from(n).ok()))
        .collect::<Option<Vec<usize>>>()
        .ok_or("the first input has a symbolic dim after the batch")?;
    let start = Instant::now();
    std::thread::scope(|scope| -> Result<(), String> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let module = module.clone();
                let row = &row;
                scope.spawn(move || -> Result<(), String> {
                    let mut rng = SmallRng::seed_from_u64(t as u64);
                    let mut rt = module.runtime();
                    for _ in 0..runs {
                        let batch = rng.random_range(1..=max);
                        let shape: Vec<usize> = [batch].iter().chain(row).copied().collect();
                        let n = shape.iter().product();
                        let x =
                            Tensor::from_vec(vec![0.5f32; n], &shape).map_err(|e| e.to_string())?;
                        rt.run(&[x]).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| "a worker panicked".to_string())??;
        }
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    let stats = module.stats();
    let regions: Vec<_> = stats
        .slots
        .iter()
        .filter(|s| s.kind.starts_with("region"))
        .collect();
    let sum = |f: fn(&shapejit::SlotStats) -> u64| regions.iter().map(|s| f(s)).sum::<u64>();
    let compiles = sum(|s| s.compiles);
    let hits = sum(|s| s.kernel_hits);
    let interpreted = sum(|s| s.executions) - hits;
    let busiest = regions.iter().map(|s| s.compiles).max().unwrap_or(0);
    println!(
        "{model}: {threads} threads x {runs} runs, batches 1..={max}, {secs:.1} s: {compiles} \
         compiles (at most {busiest} in one slot) for {hits} kernel hits ({} family, {} exact) \
         and {interpreted} interpreted region executions over {} region slots",
        sum(|s| s.family_hits),
        sum(|s| s.exact_hits),
        regions.len()
    );
    Ok(())
}
