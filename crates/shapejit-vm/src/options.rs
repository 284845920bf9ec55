//! Run-time options of a [`crate::Module`]: which tier runs, how compilation is
//! scheduled, and the profiling/tiering parameters.
//!
//! **Invariant:** [`Options::with_env_overrides`] is applied once, when a module is
//! created; `SHAPEJIT_JIT=0` in the environment forces [`Tier::Interp`].
//! `SHAPEJIT_THREADS=N` is the default of [`Options::threads`] (an explicit value
//! wins).

/// Which execution tier serves region heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Tier {
    /// Interpreter only: every `shape_guard` falls through.
    Interp,
    /// Compiled kernels for hot shape keys (when a region executor is installed).
    Jit,
}

/// When compilation happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum CompileMode {
    /// On the background compiler thread; runs never wait.
    Background,
    /// On the calling thread at promotion time (deterministic; for tests).
    Sync,
    /// Never compile (profiling still runs).
    Off,
}

/// Which guard a compiled kernel may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum GuardPolicy {
    /// The compiler decides per kernel: weak (rank, element count, dtype,
    /// contiguity) when the code does not depend on the exact dims, else strong.
    Auto,
    /// Always strong guards (dims, dtype, strides).
    Strong,
}

/// Module options. `Options::default()` is the JIT tier with background compiles.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Options {
    /// execution tier
    pub tier: Tier,
    /// compilation scheduling
    pub compile: CompileMode,
    /// a shape key seen this many times in a slot's window is a promotion candidate
    pub promote_threshold: u32,
    /// sliding-window length (executions) of each slot's shape-key profile
    pub window: usize,
    /// compiled kernels kept per slot (LRU)
    pub cache_capacity: usize,
    /// guard selection
    pub guard: GuardPolicy,
    /// allow shape-family kernels (one symbolic dim kept as a runtime argument)
    pub families: bool,
    /// record per-slot shape keys, counts and times for every `op` (region
    /// heads are always profiled when a JIT executor is installed)
    pub profile: bool,
    /// let matmul kernels keep their constant weights packed (faster small-batch
    /// products; costs about one more copy of those weights, see the
    /// `packed_weight_bytes` stat)
    pub pack_weights: bool,
    /// threads of the module's intra-op pool, the calling thread included (default:
    /// [`default_threads`]; `1` runs every op on the calling thread; `0` counts as
    /// 1). Results do not depend on it.
    pub threads: usize,
}

/// The default thread count: `SHAPEJIT_THREADS` when it is a positive integer, else
/// the machine's available parallelism (as onnxruntime does), else 1.
pub fn default_threads() -> usize {
    std::env::var("SHAPEJIT_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

impl Default for Options {
    fn default() -> Options {
        Options {
            tier: Tier::Jit,
            compile: CompileMode::Background,
            promote_threshold: 8,
            window: 64,
            cache_capacity: 8,
            guard: GuardPolicy::Auto,
            families: true,
            profile: true,
            pack_weights: true,
            threads: default_threads(),
        }
    }
}

impl Options {
    /// Interpreter-only options (profiling on).
    pub fn interp() -> Options {
        Options {
            tier: Tier::Interp,
            ..Options::default()
        }
    }

    /// Applies environment overrides: `SHAPEJIT_JIT=0` forces the interpreter.
    pub fn with_env_overrides(mut self) -> Options {
        if std::env::var("SHAPEJIT_JIT").is_ok_and(|v| v.trim() == "0") {
            self.tier = Tier::Interp;
        }
        self
    }
}
