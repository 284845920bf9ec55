//! Kernel objects that own their machine code.
//!
//! Each compiled kernel lives in its own `JITModule`. [`CompiledCode`] keeps the module
//! behind a `Mutex` that is touched only on drop (the module is `Send` but not `Sync`;
//! the entry pointer is copied out, so calls never lock), and frees the code with
//! `JITModule::free_memory` when dropped — a plain drop of a `JITModule` leaks.
//!
//! **Invariant:** the code is freed only when the last owner drops it. Callers (the
//! VM's code cache) hold an `Arc` of the kernel for the duration of every call, so a
//! kernel that is running is never freed, even if it is evicted meanwhile.
//!
//! **Invariant:** [`live_code_bytes`] is the sum of [`CompiledCode::code_bytes`] over all
//! kernels alive in the process.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cranelift_jit::JITModule;
use shapejit_kernels::micro::Table;

static LIVE_CODE_BYTES: AtomicUsize = AtomicUsize::new(0);
static LIVE_KERNELS: AtomicUsize = AtomicUsize::new(0);

/// Bytes of machine code (plus constant pool) of all kernels alive in this process.
pub fn live_code_bytes() -> usize {
    LIVE_CODE_BYTES.load(Ordering::Relaxed)
}

/// Number of kernels alive in this process.
pub fn live_kernels() -> usize {
    LIVE_KERNELS.load(Ordering::Relaxed)
}

/// The machine-level entry point every kernel has:
/// `(inputs: *const *const f32, outputs: *const *mut f32, outer: u64, table: *const Table)`.
///
/// `outer` is the runtime outer dim of a family kernel (ignored by exact kernels);
/// `table` holds the micro-kernels tiled code calls.
pub(crate) type EntryFn =
    unsafe extern "C" fn(*const *const f32, *const *mut f32, u64, *const Table);

/// Finalized code of one kernel plus the module that owns it.
pub struct CompiledCode {
    name: String,
    entry: EntryFn,
    code_bytes: usize,
    compile_time: Duration,
    /// the micro-kernels of the CPU level at compile time
    table: &'static Table,
    /// Only touched in `Drop` (taken and freed).
    module: Mutex<Option<JITModule>>,
}

impl CompiledCode {
    /// Takes ownership of a finalized module whose function starts at `entry`.
    pub(crate) fn new(
        name: String,
        module: JITModule,
        entry: EntryFn,
        code_bytes: usize,
        compile_time: Duration,
    ) -> Self {
        LIVE_CODE_BYTES.fetch_add(code_bytes, Ordering::Relaxed);
        LIVE_KERNELS.fetch_add(1, Ordering::Relaxed);
        Self {
            name,
            entry,
            code_bytes,
            compile_time,
            table: Table::current(),
            module: Mutex::new(Some(module)),
        }
    }

    /// The kernel's name (for errors and stats).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size of the machine code and its constants, in bytes.
    pub fn code_bytes(&self) -> usize {
        self.code_bytes
    }

    /// Wall time spent building IR, compiling and finalizing this kernel.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Calls the code.
    ///
    /// # Safety
    /// `inputs`/`outputs` must point to arrays of as many pointers as the kernel's spec
    /// has inputs/outputs, each pointing to a buffer covering the extent the spec
    /// documents for `outer`; outputs must not overlap inputs except where the spec
    /// allows it.
    pub(crate) unsafe fn call(
        &self,
        inputs: *const *const f32,
        outputs: *const *mut f32,
        outer: u64,
    ) {
        // SAFETY: the code is alive (we are borrowed, and only Drop frees it) and its
        // signature is `EntryFn` (built by `codegen::function`); buffer validity is the
        // caller's obligation, forwarded from this function's contract.
        unsafe { (self.entry)(inputs, outputs, outer, self.table) }
    }
}

impl Drop for CompiledCode {
    fn drop(&mut self) {
        let module = match self.module.get_mut() {
            Ok(slot) => slot.take(),
            // A panic while the lock was held cannot happen (nothing locks it but this
            // drop), but a poisoned mutex still owns the module: free it anyway.
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: we are the last owner (Drop), so no caller holds a reference and no
            // call is running (callers hold an Arc while calling); the entry pointer
            // dies with `self`.
            unsafe { module.free_memory() };
            LIVE_CODE_BYTES.fetch_sub(self.code_bytes, Ordering::Relaxed);
            LIVE_KERNELS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for CompiledCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledCode")
            .field("name", &self.name)
            .field("code_bytes", &self.code_bytes)
            .field("compile_time", &self.compile_time)
            .finish()
    }
}
