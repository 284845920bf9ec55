//! After warm-up, a run with shapes seen before allocates nothing but the
//! returned tensors: counted with a per-thread counting global allocator.

use shapejit_bytecode::lower;
use shapejit_ir::{ConvAttrs, DType, GraphBuilder, Op, Tensor, shape};
use shapejit_vm::tensor::{self, TensorMut, TensorRef};
use shapejit_vm::{Module, Options, ops};
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

/// A transformer-like block without matmuls (their kernel's own allocations
/// are measured separately below): layer norm, head split (reshape +
/// transpose views), a scaled softmax, merge, GELU, residual adds, `shape_of`.
fn module() -> Module {
    module_with(Options::default())
}

fn module_with(options: Options) -> Module {
    let (s, h, heads) = (8i64, 16usize, 2i64);
    let mut b = GraphBuilder::new("block");
    let x = b.input("x", DType::F32, shape!["batch", s, h]);
    let scale = b.constant("scale", Tensor::from_vec(vec![1.5f32; h], &[h]).unwrap());
    let bias = b.constant("bias", Tensor::from_vec(vec![0.5f32; h], &[h]).unwrap());
    let n = b.layer_norm(x, scale, Some(bias), -1, 1e-5).unwrap();
    let q = b.reshape(n, &[0, s, heads, h as i64 / heads]).unwrap();
    let q = b.transpose(q, &[0, 2, 1, 3]).unwrap();
    let c = b.const_f32(0.25).unwrap();
    let att = b.mul(q, c).unwrap();
    let att = b.softmax(att, -1).unwrap();
    let ctx = b.transpose(att, &[0, 2, 1, 3]).unwrap();
    let ctx = b.reshape(ctx, &[0, s, h as i64]).unwrap();
    let r = b.add(x, ctx).unwrap();
    let f = b.gelu(r, false).unwrap();
    let y = b.add(r, f).unwrap();
    let sh = b.shape(y).unwrap();
    b.output("y", y).unwrap();
    b.output("shape", sh).unwrap();
    let program = lower(&b.finish().unwrap()).unwrap();
    Module::new(program, options).unwrap()
}

fn input(batch: usize) -> Tensor {
    Tensor::from_vec(
        (0..batch * 8 * 16).map(|i| (i % 7) as f32 / 7.0).collect(),
        &[batch, 8, 16],
    )
    .unwrap()
}

/// Allocations the caller's outputs need: the result `Vec`, and per output
/// tensor its (unshared) element `Vec` and its shape `Vec`.
const fn output_allocations(n_outputs: usize) -> usize {
    1 + 2 * n_outputs
}

#[test]
fn steady_state_runs_allocate_only_the_outputs() {
    let module = module();
    let mut rt = module.runtime();
    let (x4, x2) = (input(4), input(2));
    for x in [&x4, &x2] {
        rt.run(std::slice::from_ref(x)).unwrap();
    }
    // Alternating shapes remakes every op's plan; repeating one reuses them.
    for x in [&x2, &x4, &x2, &x4, &x4, &x2, &x2] {
        let (out, n) = allocations_during(|| rt.run(std::slice::from_ref(x)).unwrap());
        assert_eq!(out.len(), 2);
        assert_eq!(n, output_allocations(2), "run with shape {:?}", x.shape());
    }
}

/// The intra-op pool's path: ops large enough to run in pieces (batch 512: 64 K
/// elements per tensor) on two threads allocate nothing on the calling thread.
#[test]
fn steady_state_runs_on_two_threads_allocate_only_the_outputs() {
    let module = module_with(Options {
        threads: 2,
        ..Options::default()
    });
    let mut rt = module.runtime();
    let x = input(512);
    for _ in 0..2 {
        rt.run(std::slice::from_ref(&x)).unwrap();
    }
    assert!(module.stats().global.split_ops > 0, "no op ran in pieces");
    for _ in 0..4 {
        let (out, n) = allocations_during(|| rt.run(std::slice::from_ref(&x)).unwrap());
        assert_eq!(out.len(), 2);
        assert_eq!(n, output_allocations(2));
    }
}

fn matmul_module(options: Options) -> (Module, Tensor) {
    let w = Tensor::from_vec((0..16 * 16).map(|i| (i % 5) as f32).collect(), &[16, 16]).unwrap();
    let mut b = GraphBuilder::new("mm");
    let x = b.input("x", DType::F32, shape!["batch", 8, 16]);
    let wv = b.constant("w", w.clone());
    let y = b.matmul(x, wv).unwrap();
    let y = b.neg(y).unwrap();
    b.output("y", y).unwrap();
    let module = Module::new(lower(&b.finish().unwrap()).unwrap(), options).unwrap();
    (module, w)
}

/// A matmul on constant weights runs on the weights packed once per module: a
/// steady-state run allocates only the outputs (the packing happened in warm-up).
#[test]
fn matmul_runs_on_packed_weights_allocate_only_the_outputs() {
    let (module, _) = matmul_module(Options::default());
    let mut rt = module.runtime();
    let x4 = input(4);
    rt.run(std::slice::from_ref(&x4)).unwrap();
    assert_eq!(module.stats().global.packed_weight_bytes, 16 * 16 * 4);
    let (_, n) = allocations_during(|| rt.run(std::slice::from_ref(&x4)).unwrap());
    assert_eq!(n, output_allocations(1));
}

/// A batch-1 product on 2 MiB of packed weights runs split by columns on two
/// threads (each piece into its scratch, then copied): a steady-state run
/// allocates only the outputs.
#[test]
fn column_split_products_allocate_only_the_outputs() {
    let (k, n) = (512, 1024);
    let w = Tensor::from_vec((0..k * n).map(|i| (i % 5) as f32).collect(), &[k, n]).unwrap();
    let mut b = GraphBuilder::new("gemv");
    let x = b.input("x", DType::F32, shape![1, k as i64]);
    let wv = b.constant("w", w);
    let y = b.matmul(x, wv).unwrap();
    b.output("y", y).unwrap();
    let options = Options {
        threads: 2,
        ..Options::default()
    };
    let module = Module::new(lower(&b.finish().unwrap()).unwrap(), options).unwrap();
    let mut rt = module.runtime();
    let x = Tensor::from_vec(vec![0.5f32; k], &[1, k]).unwrap();
    // Warm-up grows each thread's kernel buffers on the first piece it runs; a
    // calling thread descheduled while the worker ran both pieces (other tests run
    // beside this one) grows its own later, so warm up more than once.
    for _ in 0..16 {
        rt.run(std::slice::from_ref(&x)).unwrap();
    }
    assert!(module.stats().global.split_ops > 0, "the product ran whole");
    for _ in 0..4 {
        let (_, count) = allocations_during(|| rt.run(std::slice::from_ref(&x)).unwrap());
        assert_eq!(count, output_allocations(1));
    }
}

/// Without packed weights, a run allocates the outputs plus exactly what the
/// matmul op allocates when called directly on the same operands: the VM adds
/// nothing. (The `gemm` kernel allocates on each call; when it stops, this bound
/// tightens by itself.)
#[test]
fn matmul_runs_allocate_only_the_outputs_and_the_kernels_own() {
    let (module, w) = matmul_module(Options {
        pack_weights: false,
        ..Options::default()
    });
    let mut rt = module.runtime();
    let x4 = input(4);
    rt.run(std::slice::from_ref(&x4)).unwrap();

    let (xl, wl) = (
        tensor::Layout::contiguous(x4.shape()),
        tensor::Layout::contiguous(w.shape()),
    );
    let refs = [
        TensorRef::new(DType::F32, &xl, x4.bytes()).unwrap(),
        TensorRef::new(DType::F32, &wl, w.bytes()).unwrap(),
    ];
    let mut out = vec![0u8; 4 * 8 * 16 * 4];
    let mut scratch = ops::Scratch::new();
    let mut direct = || {
        let mut outs = [TensorMut {
            dtype: DType::F32,
            shape: &[4, 8, 16],
            data: &mut out,
        }];
        ops::execute(&Op::MatMul, &refs, &mut outs, &mut scratch).unwrap();
    };
    direct();
    let ((), kernel_allocs) = allocations_during(&mut direct);

    let (_, n) = allocations_during(|| rt.run(std::slice::from_ref(&x4)).unwrap());
    assert_eq!(n, output_allocations(1) + kernel_allocs);
}

/// A 1×1 convolution on constant weights (two groups of 8 output channels) runs
/// on the weights packed once per module, a 3×3 one after it on the direct path
/// (the same bits as without packing), a 3×3 one of 32 → 64 channels after that
/// on Winograd (within rounding of the direct path); from the direct one's
/// output, a 3×3 stride-2 and a 1×1 convolution on a 5×5 map run transposed (the
/// same bits); a steady-state run allocates only the outputs.
#[test]
fn conv_runs_on_packed_weights_allocate_only_the_outputs() {
    let weights = |shape: &[usize]| {
        let n = shape.iter().product::<usize>();
        let v = (0..n).map(|i| ((i * 7) % 11) as f32 / 11.0 - 0.5).collect();
        Tensor::from_vec(v, shape).unwrap()
    };
    let build = |options: Options| {
        let mut b = GraphBuilder::new("conv");
        let x = b.input("x", DType::F32, shape!["batch", 8, 64]);
        let x = b.reshape(x, &[0, 8, 8, 8]).unwrap();
        let attrs = ConvAttrs {
            pads: [1; 4],
            groups: 2,
            ..ConvAttrs::default()
        };
        let w1 = b.constant("w1", weights(&[16, 4, 1, 1]));
        let y = b.conv2d(x, w1, None, attrs).unwrap();
        let w3 = b.constant("w3", weights(&[32, 8, 3, 3]));
        let y = b.conv2d(y, w3, None, attrs).unwrap();
        b.output("y", y).unwrap();
        let w4 = b.constant("w4", weights(&[64, 32, 3, 3]));
        let single = ConvAttrs { groups: 1, ..attrs };
        let z = b.conv2d(y, w4, None, single).unwrap();
        b.output("z", z).unwrap();
        let w5 = b.constant("w5", weights(&[32, 32, 3, 3]));
        let halving = ConvAttrs {
            strides: [2, 2],
            ..single
        };
        let t = b.conv2d(y, w5, None, halving).unwrap();
        let w6 = b.constant("w6", weights(&[16, 32, 1, 1]));
        let pointwise = ConvAttrs {
            pads: [0; 4],
            ..single
        };
        let u = b.conv2d(t, w6, None, pointwise).unwrap();
        b.output("u", u).unwrap();
        Module::new(lower(&b.finish().unwrap()).unwrap(), options).unwrap()
    };
    let x4 = Tensor::from_vec(
        (0..4 * 8 * 64).map(|i| (i % 7) as f32 / 7.0).collect(),
        &[4, 8, 64],
    )
    .unwrap();
    let unpacked = build(Options {
        pack_weights: false,
        ..Options::default()
    });
    let want = unpacked.runtime().run(std::slice::from_ref(&x4)).unwrap();
    assert_eq!(unpacked.stats().global.packed_weight_bytes, 0);
    let module = build(Options::default());
    let mut rt = module.runtime();
    let got = rt.run(std::slice::from_ref(&x4)).unwrap();
    // the 1×1 weights, the 16 transformed 64 × 32 matrices of the Winograd conv,
    // the transposed ones
    let transposed = 32 * 32 * 9 + 16 * 32;
    assert!(module.stats().global.packed_weight_bytes >= (16 * 4 + 16 * 64 * 32 + transposed) * 4);
    let bits = |t: &Tensor| -> Vec<u32> {
        let v: &[f32] = t.as_slice().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    };
    assert_eq!(bits(&got[0]), bits(&want[0]));
    assert_eq!(bits(&got[2]), bits(&want[2]));
    let (z, direct): (&[f32], &[f32]) = (got[1].as_slice().unwrap(), want[1].as_slice().unwrap());
    assert!(z != direct, "the last convolution ran on the direct path");
    let scale = direct.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (a, b) in z.iter().zip(direct) {
        assert!((a - b).abs() <= 1e-5 * scale, "Winograd {a} vs direct {b}");
    }
    let (_, n) = allocations_during(|| rt.run(std::slice::from_ref(&x4)).unwrap());
    assert_eq!(n, output_allocations(3));
}
