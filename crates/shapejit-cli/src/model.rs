//! Loading MODEL (a `.onnx`, `.sjir` or `.sjb` path, or `builtin:NAME`) with the
//! options the command line selects.
//!
//! **Invariant:** the options passed here are the ones the module runs with, apart
//! from the documented environment override `SHAPEJIT_JIT=0`.

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

/// Options for a tier and compile mode (everything else at its default).
pub fn options(tier: TierArg, compile: CompileArg) -> Options {
    let tier = match tier {
        TierArg::Interp => Tier::Interp,
        TierArg::Jit => Tier::Jit,
    };
    let compile = match compile {
        CompileArg::Background => CompileMode::Background,
        CompileArg::Sync => CompileMode::Sync,
        CompileArg::Off => CompileMode::Off,
    };
    Options {
        tier,
        compile,
        ..Options::default()
    }
}

/// Loads a model; returns it with the time loading took.
pub fn load(spec: &str, options: Options) -> Result<(Module, Duration)> {
    let start = Instant::now();
    let module = Module::load(spec, options).context("cannot load the model")?;
    Ok((module, start.elapsed()))
}
