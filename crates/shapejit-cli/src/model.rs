//! Loading MODEL (a `.onnx`, `.sjir` or `.sjb` path, or `builtin:NAME`) with the
//! options the command line selects.
//!
//! **Invariant:** the options passed here are the ones the module runs with, apart
//! from the documented environment override `SHAPEJIT_JIT=0` (`SHAPEJIT_THREADS=N`
//! is only the default of `--threads`).

use anyhow::{Context, Result};
use shapejit::{CompileMode, Module, Options, Tier};
use std::time::{Duration, Instant};

/// `--tier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TierArg {
    /// interpreter only
    Interp,
    /// interpreter plus compiled kernels for hot shapes
    Jit,
}

/// `--compile`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompileArg {
    /// on the background compiler thread (runs never wait)
    Background,
    /// on the calling thread when a shape gets hot (deterministic)
    Sync,
    /// never
    Off,
}

/// Options for a tier, compile mode and `--threads` (everything else at its default).
pub fn options(tier: TierArg, compile: CompileArg, threads: Option<usize>) -> Options {
    let tier = match tier {
        TierArg::Interp => Tier::Interp,
        TierArg::Jit => Tier::Jit,
    };
    let compile = match compile {
        CompileArg::Background => CompileMode::Background,
        CompileArg::Sync => CompileMode::Sync,
        CompileArg::Off => CompileMode::Off,
    };
    let defaults = Options::default();
    Options {
        tier,
        compile,
        threads: threads.unwrap_or(defaults.threads),
        ..defaults
    }
}

/// `--threads N`: a positive thread count for the intra-op pool.
pub fn parse_threads(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("'{text}' is not a positive thread count")),
    }
}

/// Loads a model; returns it with the time loading took.
pub fn load(spec: &str, options: Options) -> Result<(Module, Duration)> {
    let start = Instant::now();
    let module = Module::load(spec, options).context("cannot load the model")?;
    Ok((module, start.elapsed()))
}
