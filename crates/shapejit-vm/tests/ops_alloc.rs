//! After warm-up, `execute` makes no heap allocation (counting allocator), for
//! every op family the reference transformer runs and the convolutions' and
//! pools' paths. The one exception is inside
//! the `gemm` crate, which allocates its packing buffers per call: that is
//! asserted here too, so a change in either direction is noticed.

mod ops_support;
use ops_support::*;
use shapejit_ir::{Activation, BinaryOp, Op, ReduceOp, UnaryOp, Window2d};
use shapejit_vm::ops::{self, Scratch};
use shapejit_vm::tensor::TensorRef;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;
thread_local! {
    // Per thread: the test harness runs tests on parallel threads, and only the
    // calling thread's allocations belong to the op under test.
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by the second and third `execute` of `op` (the first warms up).
fn steady_allocs(op: &Op, inputs: &[&Host]) -> usize {
    let refs: Vec<TensorRef> = inputs.iter().map(|h| h.as_ref()).collect();
    let types = ops::output_types(op, &refs).unwrap();
    let mut bufs = out_bufs(&types);
    let mut scratch = Scratch::new();
    let mut count = 0;
    for round in 0..3 {
        let mut outs = out_tensors(&mut bufs, &types);
        let before = allocs();
        ops::execute(op, &refs, &mut outs, &mut scratch).unwrap();
        if round > 0 {
            count += allocs() - before;
        }
    }
    count
}

#[test]
fn steady_state_execute_does_not_allocate() {
    let mut rng = Rng::new(60);
    let x = Host::f32(&mut rng, &[4, 32, 64], Kind::Strided);
    let bias = Host::f32(&mut rng, &[64], Kind::Contiguous);
    let xc = Host::f32(&mut rng, &[4, 32, 64], Kind::Contiguous);
    let idx = Host::random(&mut rng, &[4, 32], Kind::Contiguous, |r| {
        r.range(0, 64) as i64
    });
    let table = Host::f32(&mut rng, &[64, 64], Kind::Contiguous);
    let cases: Vec<(Op, Vec<&Host>)> = vec![
        (Op::Binary(BinaryOp::Add), vec![&x, &bias]),
        (Op::Unary(UnaryOp::Gelu { tanh_approx: false }), vec![&x]),
        (Op::Softmax { axis: -1 }, vec![&x]),
        (
            Op::LayerNorm {
                axis: -1,
                epsilon: 1e-5,
            },
            vec![&x, &bias, &bias],
        ),
        (
            Op::Reduce {
                op: ReduceOp::Mean,
                axes: vec![-1],
                keepdims: true,
            },
            vec![&x],
        ),
        (
            Op::Transpose {
                perm: vec![0, 2, 1],
            },
            vec![&x],
        ),
        (Op::Concat { axis: 1 }, vec![&x, &xc]),
        (Op::Gather { axis: 0 }, vec![&table, &idx]),
    ];
    let img = Host::f32(&mut rng, &[2, 8, 9, 9], Kind::Strided);
    let w_dense = Host::f32(&mut rng, &[16, 8, 3, 3], Kind::Contiguous);
    let w_depthwise = Host::f32(&mut rng, &[8, 1, 3, 3], Kind::Contiguous);
    let w_1x1 = Host::f32(&mut rng, &[16, 8, 1, 1], Kind::Contiguous);
    let b16 = Host::f32(&mut rng, &[16], Kind::Contiguous);
    let b8 = Host::f32(&mut rng, &[8], Kind::Contiguous);
    let window = |k: usize, s: usize, p: usize| Window2d {
        kernel: [k, k],
        strides: [s, s],
        pads: [p; 4],
        dilations: [1, 1],
    };
    let conv = |win: Window2d, groups: usize| Op::Conv2d {
        window: win,
        groups,
        activation: Some(Activation::Relu),
    };
    let cases_nchw: Vec<(Op, Vec<&Host>)> = vec![
        // im2col + packed kernel, the 1×1 in-place path, the direct path
        (conv(window(3, 1, 1), 1), vec![&img, &w_dense, &b16]),
        (conv(window(1, 1, 0), 1), vec![&img, &w_1x1]),
        (conv(window(3, 2, 1), 8), vec![&img, &w_depthwise, &b8]),
        (
            Op::MaxPool2d {
                window: window(3, 2, 1),
                ceil_mode: true,
            },
            vec![&img],
        ),
        (
            Op::AvgPool2d {
                window: window(3, 2, 1),
                ceil_mode: false,
                count_include_pad: false,
            },
            vec![&img],
        ),
    ];
    let cases: Vec<(Op, Vec<&Host>)> = cases.into_iter().chain(cases_nchw).collect();
    for (op, inputs) in &cases {
        assert_eq!(steady_allocs(op, inputs), 0, "{} allocates", op.name());
    }
}

#[test]
fn gemm_crate_allocates_its_packing_buffers() {
    // documents the exception: the gemm crate (0.19) allocates packing memory per call
    // for matrices large enough to pack; the ops layer itself adds nothing. This
    // product runs as 8 pieces of 16 rows (`ops/split.rs`), each one gemm call.
    let mut rng = Rng::new(61);
    let a = Host::f32(&mut rng, &[128, 256], Kind::Contiguous);
    let b = Host::f32(&mut rng, &[256, 256], Kind::Contiguous);
    let n = steady_allocs(&Op::MatMul, &[&a, &b]);
    assert!(n > 0 && n <= 8 * 8, "gemm allocations per two calls: {n}");
}
