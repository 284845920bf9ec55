//! [`Module`]: a verified program shared by every thread (`Arc` inside), with
//! its per-slot profiles, counters and the optional tier-1 [`RegionExecutor`].
//!
//! **Invariant:** the program inside a module has passed the bytecode verifier
//! and its options [`Options::validate`]; profiles and counters have exactly one
//! entry per slot.

use crate::error::ModuleError;
use crate::hook::RegionExecutor;
use crate::options::{Options, Tier};
use crate::pool::Pool;
use crate::profile::{GlobalCounters, SlotCounters, SlotProfile};
use crate::runtime::Runtime;
use crate::stats::{Stats, snapshot};
use crate::weights::PackedWeights;
use shapejit_bytecode::{GroupId, Instr, Program};
use std::sync::{Arc, OnceLock};

/// Every counter of a module: per slot and global.
#[derive(Debug, Default)]
pub struct Counters {
    /// per slot, indexed by slot id
    pub slots: Vec<SlotCounters>,
    /// module-wide
    pub global: GlobalCounters,
}

/// What a [`RegionExecutor`] factory gets to see when a module is built.
pub struct ExecutorEnv<'a> {
    /// the verified program
    pub program: &'a Arc<Program>,
    /// the effective options (environment overrides applied)
    pub options: &'a Options,
    /// the module's counters (the JIT fills compile and eviction counts)
    pub counters: &'a Arc<Counters>,
    /// the module's packed constant matrices (shared with the interpreter)
    pub packed: &'a Arc<PackedWeights>,
}

pub(crate) struct ModuleInner {
    pub program: Arc<Program>,
    pub options: Options,
    pub profiles: Vec<SlotProfile>,
    pub counters: Arc<Counters>,
    pub executor: Option<Arc<dyn RegionExecutor>>,
    /// per region, the storage group of each output register
    pub region_out_groups: Vec<Vec<GroupId>>,
    /// the intra-op pool, started by the first op that splits (`threads` > 1 only)
    pool: OnceLock<Pool>,
    /// constant matrices packed for both tiers' products
    pub packed: Arc<PackedWeights>,
}

impl ModuleInner {
    /// The intra-op pool (`None` with one thread: pieces run on the caller).
    pub(crate) fn pool(&self) -> Option<&Pool> {
        (self.options.threads > 1)
            .then(|| self.pool.get_or_init(|| Pool::new(self.options.threads)))
    }
}

/// A loaded program, cheap to clone and shared across threads.
#[derive(Clone)]
pub struct Module {
    pub(crate) inner: Arc<ModuleInner>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("program", &self.inner.program.name)
            .finish_non_exhaustive()
    }
}

/// The storage group that holds each region output (from the writing instruction).
fn region_out_groups(program: &Program) -> Vec<Vec<GroupId>> {
    program
        .regions
        .iter()
        .map(|r| {
            let body = program
                .instrs
                .iter()
                .skip(r.first_pc.index())
                .take(r.len as usize);
            let outs: Vec<_> = body.flat_map(Instr::outs).collect();
            // Invariant (verifier): every region output is written by an op in the region.
            r.outputs
                .iter()
                .map(|reg| {
                    outs.iter()
                        .rev()
                        .find(|o| o.reg == *reg)
                        .map(|o| o.group)
                        .unwrap_or(GroupId(u32::MAX))
                })
                .collect()
        })
        .collect()
}

impl Module {
    /// A module running `program` on the interpreter (no tier-1 executor).
    pub fn new(program: Program, options: Options) -> Result<Module, ModuleError> {
        Module::with_executor(program, options, |_| None)
    }

    /// A module whose region heads consult the executor `make` builds (only
    /// called when the effective tier is [`Tier::Jit`]). The options are
    /// validated and the program verified first.
    pub fn with_executor(
        program: Program,
        options: Options,
        make: impl FnOnce(&ExecutorEnv<'_>) -> Option<Arc<dyn RegionExecutor>>,
    ) -> Result<Module, ModuleError> {
        options.validate()?;
        shapejit_bytecode::verify(&program)?;
        let options = options.with_env_overrides();
        let n_slots = program.slots.len();
        let counters = Arc::new(Counters {
            slots: (0..n_slots).map(|_| SlotCounters::default()).collect(),
            global: GlobalCounters::default(),
        });
        let region_out_groups = region_out_groups(&program);
        let packed = Arc::new(PackedWeights::new(
            program.constants.len(),
            options.pack_weights,
        ));
        let program = Arc::new(program);
        let executor = match options.tier {
            Tier::Jit => make(&ExecutorEnv {
                program: &program,
                options: &options,
                counters: &counters,
                packed: &packed,
            }),
            Tier::Interp => None,
        };
        let profiles = (0..n_slots)
            .map(|_| SlotProfile::new(options.window))
            .collect();
        Ok(Module {
            inner: Arc::new(ModuleInner {
                program,
                options,
                profiles,
                counters,
                executor,
                region_out_groups,
                pool: OnceLock::new(),
                packed,
            }),
        })
    }

    /// The program.
    pub fn program(&self) -> &Arc<Program> {
        &self.inner.program
    }

    /// The effective options.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The counters (shared with the JIT tier).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.inner.counters
    }

    /// A slot's profile.
    pub fn profile(&self, slot: shapejit_bytecode::SlotId) -> Option<&SlotProfile> {
        self.inner.profiles.get(slot.index())
    }

    /// A new runtime (one per thread).
    pub fn runtime(&self) -> Runtime {
        Runtime::new(self.clone())
    }

    /// A snapshot of the per-slot and global statistics.
    pub fn stats(&self) -> Stats {
        snapshot(&self.inner)
    }
}
