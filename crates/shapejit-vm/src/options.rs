//! Run-time options of a [`crate::Module`]: which tier runs, how compilation is
//! scheduled, and the profiling/tiering parameters.
//!
//! **Invariant:** [`Options::with_env_overrides`] is applied once, when a module is
//! created; `SHAPEJIT_JIT=0` in the environment forces [`Tier::Interp`].
//! `SHAPEJIT_THREADS=N` is the default of [`Options::threads`] (an explicit value
//! wins).
//!
//! **Invariant:** a module only runs with options that passed [`Options::validate`]:
//! every count that sizes an allocation (the profile window, the cache capacity, the
//! memory limit) is inside the bounds named there.

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
    /// the most memory, in bytes, a run may hold at once: a [`crate::Runtime`]'s
    /// arena plus the outputs it returns (and, through `shapejit::Module::load`,
    /// what a loader copies). A run that would need more fails with
    /// `RunError::MemoryLimit`. Default: the machine's physical memory.
    pub max_memory: usize,
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

/// The longest profile window [`Options::validate`] accepts (each slot keeps a
/// ring of this many entries).
pub const MAX_WINDOW: usize = 1 << 16;
/// The largest per-slot kernel cache [`Options::validate`] accepts.
pub const MAX_CACHE_CAPACITY: usize = 1 << 12;
/// The most intra-op threads [`Options::validate`] accepts (each is a spawned
/// worker with its own stack).
pub const MAX_THREADS: usize = 1 << 10;

/// Options that cannot work, with the field and the accepted range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("option `{field}` = {value} is out of range: {expected}")]
pub struct OptionsError {
    /// the field of [`Options`]
    pub field: &'static str,
    /// its value, as text
    pub value: String,
    /// what is accepted
    pub expected: String,
}

/// The machine's physical memory in bytes (`MemTotal` of `/proc/meminfo`), read
/// once; `usize::MAX` where it cannot be read.
pub fn physical_memory() -> usize {
    static TOTAL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<usize>().ok())
            .and_then(|kb| kb.checked_mul(1024))
            .unwrap_or(usize::MAX)
    })
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
            max_memory: physical_memory(),
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

    /// Checks every field against its bounds: `promote_threshold` ≥ 1, `window` in
    /// 1..=[`MAX_WINDOW`], `cache_capacity` ≤ [`MAX_CACHE_CAPACITY`], `threads` ≤
    /// [`MAX_THREADS`], `max_memory` ≥ 1.
    pub fn validate(&self) -> Result<(), OptionsError> {
        let check = |ok: bool, field: &'static str, value: String, expected: String| {
            if ok {
                Ok(())
            } else {
                Err(OptionsError {
                    field,
                    value,
                    expected,
                })
            }
        };
        check(
            self.promote_threshold >= 1,
            "promote_threshold",
            self.promote_threshold.to_string(),
            "at least 1".into(),
        )?;
        check(
            (1..=MAX_WINDOW).contains(&self.window),
            "window",
            self.window.to_string(),
            format!("1..={MAX_WINDOW} executions"),
        )?;
        check(
            self.cache_capacity <= MAX_CACHE_CAPACITY,
            "cache_capacity",
            self.cache_capacity.to_string(),
            format!("at most {MAX_CACHE_CAPACITY} kernels per slot"),
        )?;
        check(
            self.threads <= MAX_THREADS,
            "threads",
            self.threads.to_string(),
            format!("at most {MAX_THREADS} threads"),
        )?;
        check(
            self.max_memory >= 1,
            "max_memory",
            self.max_memory.to_string(),
            "at least 1 byte".into(),
        )
    }

    /// Applies environment overrides: `SHAPEJIT_JIT=0` forces the interpreter.
    pub fn with_env_overrides(mut self) -> Options {
        if std::env::var("SHAPEJIT_JIT").is_ok_and(|v| v.trim() == "0") {
            self.tier = Tier::Interp;
        }
        self
    }
}
