//! shapejit's virtual machine: the interpreter tier (dispatch loop, per-Runtime
//! arena, per-slot profiling) and the hook the JIT tier plugs into. The JIT itself
//! lives in `shapejit-jit` (which depends on this crate); this crate builds and runs
//! without Cranelift.
//!
//! - [`Module`]: a verified [`shapejit_bytecode::Program`] shared by all threads
//!   (`Arc` inside), with per-slot profiles ([`profile::SlotProfile`]), counters
//!   ([`profile::SlotCounters`]) and an optional tier-1 [`RegionExecutor`];
//! - [`Runtime`]: one per thread — registers, the arena, op scratch;
//! - [`ops`]: what each op computes (the specification both tiers follow);
//! - [`shape_key`]: interned shape keys, the unit of specialization.
//!
//! ## Tier-1 hook
//! A JIT installs a [`RegionExecutor`] with [`Module::with_executor`]. At each
//! `shape_guard` the interpreter interns the region inputs' [`ShapeKey`] (per
//! slot, so equal keys are pointer-equal), calls [`RegionExecutor::lookup`], and
//! on a hit runs the returned [`RegionKernel`] and skips the region; on a miss
//! it interprets the region and then reports the key's window count and mean
//! time through [`RegionExecutor::observe`]. The JIT fills the compile and
//! eviction counters of [`Module::counters`]; the interpreter fills the rest.
//! See [`hook`] for the exact contract.
//!
//! **Invariant:** the interpreter is the specification: a compiled kernel that
//! disagrees with interpreting its region is a JIT bug.
#![deny(missing_docs)]

pub mod arena;
pub mod copy;
pub mod error;
pub mod hook;
pub mod limits;
pub mod module;
pub mod ops;
pub mod options;
pub mod pool;
pub mod profile;
pub mod runtime;
pub mod shape_key;
pub mod stats;
pub mod tensor;
pub mod weights;

pub use error::{InputError, ModuleError, RunError};
pub use hook::{GuardCtx, RegionExecutor, RegionKernel};
pub use limits::{CancelToken, RunOptions};
pub use module::{Counters, ExecutorEnv, Module};
pub use options::{CompileMode, GuardPolicy, Options, OptionsError, Tier};
pub use runtime::Runtime;
pub use shape_key::{KeyPart, ShapeKey};
pub use stats::{GlobalStats, KeyStat, SlotStats, Stats};
