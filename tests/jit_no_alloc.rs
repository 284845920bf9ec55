//! The JIT tier's steady state allocates nothing but the returned tensors: after
//! warm-up (sync compiles), runs of the built-in transformer (matmul epilogues on
//! packed weights, tiled elementwise epilogues, fused attention, row kernels) and
//! elementwise chain, on kernels, are counted with a per-thread counting global
//! allocator. (Products too large for the packed kernel call the `gemm` crate, which
//! allocates its own packing buffers on every call: the MLP's is measured in the VM's
//! `no_alloc` test.)

use shapejit::{CompileMode, Module, Options, Tier};
use shapejit_tests::inputs::seeded;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; counting touches only a thread-local `Cell`.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCS.with(Cell::get);
    let out = f();
    (out, ALLOCS.with(Cell::get) - before)
}

#[test]
fn jit_steady_state_runs_allocate_only_the_outputs() {
    for name in ["transformer", "elementwise"] {
        let module = Module::load(
            &format!("builtin:{name}"),
            Options {
                tier: Tier::Jit,
                compile: CompileMode::Sync,
                promote_threshold: 1,
                threads: 1,
                ..Options::default()
            },
        )
        .unwrap();
        let mut rt = module.runtime();
        let x = seeded(&module, 3, 1);
        for _ in 0..3 {
            rt.run(&x).unwrap();
        }
        let hits_before: u64 = module.stats().slots.iter().map(|s| s.kernel_hits).sum();
        let (out, n) = allocations_during(|| rt.run(&x).unwrap());
        let hits: u64 = module.stats().slots.iter().map(|s| s.kernel_hits).sum();
        assert!(hits > hits_before, "{name}: no kernel ran");
        // the result Vec, and per output its element and shape Vecs
        assert_eq!(n, 1 + 2 * out.len(), "{name}: {n} allocations");
    }
}
