//! Measures kernel compile times and the throughput of compiled kernels against plain
//! Rust loops, against the interpreter's AVX2 math loops, and the staged elementwise
//! chain of `builtin:elementwise` against its two halves compiled separately
//! (`cargo run --release -p shapejit-jit --example throughput`).
//! Prints medians over repeated runs.

use std::time::Instant;

use shapejit_jit::{
    BinaryOp, ElementwiseSpec, InputLayout, Program, RowOp, RowSpec, ShapeMode, UnaryOp, ValueId,
    compile_elementwise, compile_row,
};
use shapejit_kernels::math;

const SHAPE: [usize; 3] = [64, 32, 256];

/// A plain Rust implementation of a kernel: `(x, bias, out)`.
type Baseline<'a> = &'a dyn Fn(&[f32], &[f32], &mut [f32]);

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn time<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect(),
    )
}

fn bias_act(act: Option<UnaryOp>, mode: ShapeMode) -> ElementwiseSpec {
    let mut p = Program::new();
    let (x, b) = (p.input(0), p.input(1));
    let s = p.binary(BinaryOp::Add, x, b);
    let y = match act {
        Some(op) => p.unary(op, s),
        None => s,
    };
    p.output(y);
    ElementwiseSpec {
        name: format!("{act:?}"),
        shape: SHAPE.to_vec(),
        mode,
        inputs: vec![
            InputLayout::contiguous(&SHAPE),
            InputLayout::broadcast(&[SHAPE[2]], &SHAPE).expect("broadcast"),
        ],
        program: p,
    }
}

fn main() {
    let n: usize = SHAPE.iter().product();
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0)
        .collect();
    let bias: Vec<f32> = (0..SHAPE[2]).map(|i| i as f32 / 512.0).collect();
    let mut out = vec![0f32; n];

    println!("== compile time (median of 30), code size");
    for (name, spec) in [
        (
            "add+relu exact",
            bias_act(Some(UnaryOp::Relu), ShapeMode::Exact),
        ),
        (
            "add+gelu_erf exact",
            bias_act(Some(UnaryOp::GeluErf), ShapeMode::Exact),
        ),
        (
            "add+gelu_erf family",
            bias_act(Some(UnaryOp::GeluErf), ShapeMode::Family),
        ),
    ] {
        let mut bytes = 0;
        let us = median(
            (0..30)
                .map(|_| {
                    let k = compile_elementwise(&spec).expect("compiles");
                    bytes = k.code().code_bytes();
                    k.code().compile_time().as_secs_f64() * 1e6
                })
                .collect(),
        );
        println!("{name:24} {us:8.1} µs  {bytes:6} B");
    }
    for (name, spec) in [
        (
            "softmax row 256",
            RowSpec {
                op: RowOp::Softmax,
                epilogue: None,
                ..RowSpec::layer_norm("sm", 2048, 256, 1e-5, ShapeMode::Exact)
            },
        ),
        (
            "layer_norm row 256",
            RowSpec::layer_norm("ln", 2048, 256, 1e-5, ShapeMode::Family),
        ),
    ] {
        let mut bytes = 0;
        let us = median(
            (0..30)
                .map(|_| {
                    let k = compile_row(&spec).expect("compiles");
                    bytes = k.code().code_bytes();
                    k.code().compile_time().as_secs_f64() * 1e6
                })
                .collect(),
        );
        println!("{name:24} {us:8.1} µs  {bytes:6} B");
    }

    println!("== throughput on f32{SHAPE:?} ({n} elements), median µs of 50 runs");
    let mut compare = |name: &str, act: Option<UnaryOp>, f: Baseline| {
        let k = compile_elementwise(&bias_act(act, ShapeMode::Exact)).expect("compiles");
        let jit = time(50, || {
            k.run(&[&x, &bias], &mut [&mut out], 0).expect("runs")
        });
        let rust = time(50, || {
            f(&x, &bias, &mut out);
            std::hint::black_box(&out);
        });
        println!(
            "{name:18} jit {jit:8.1} µs   rust loop {rust:8.1} µs   speedup {:5.2}x",
            rust / jit
        );
    };
    compare("x+b", None, &|x, b, o| rust_loop(x, b, o, |v| v));
    compare("relu(x+b)", Some(UnaryOp::Relu), &|x, b, o| {
        rust_loop(x, b, o, |v| v.max(0.0))
    });
    compare("exp(x+b)", Some(UnaryOp::Exp), &|x, b, o| {
        rust_loop(x, b, o, f32::exp)
    });
    compare("tanh(x+b)", Some(UnaryOp::Tanh), &|x, b, o| {
        rust_loop(x, b, o, f32::tanh)
    });
    compare("gelu_tanh(x+b)", Some(UnaryOp::GeluTanh), &|x, b, o| {
        rust_loop(x, b, o, |v| {
            0.5 * v * (1.0 + (0.797_884_6 * (v + 0.044_715 * v * v * v)).tanh())
        })
    });
    let ln = compile_row(&RowSpec::layer_norm(
        "ln",
        n / 256,
        256,
        1e-5,
        ShapeMode::Exact,
    ))
    .expect("compiles");
    let g = vec![1.0f32; 256];
    let jit = time(50, || ln.run(&[&x, &g, &bias], &mut out, 0).expect("runs"));
    let rust = time(50, || {
        for (o, xs) in out.chunks_mut(256).zip(x.chunks(256)) {
            let mean = xs.iter().sum::<f32>() / 256.0;
            let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 256.0;
            let r = 1.0 / (var + 1e-5).sqrt();
            for j in 0..256 {
                o[j] = (xs[j] - mean) * r * g[j] + bias[j];
            }
        }
        std::hint::black_box(&out);
    });
    println!(
        "{:18} jit {jit:8.1} µs   rust loop {rust:8.1} µs   speedup {:5.2}x",
        "layer_norm",
        rust / jit
    );
    against_interpreter_math(&x, &mut out);
    elementwise_chain(&x, &mut out);
}

/// `f` over a slice in an AVX2+FMA copy of the loop, as the interpreter runs it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn map_avx2(out: &mut [f32], x: &[f32], f: impl Fn(f32) -> f32) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

/// One transcendental per element: the kernel's inline f32x4 polynomial against the
/// interpreter's `shapejit_kernels::math` loop in 256-bit AVX2.
fn against_interpreter_math(x: &[f32], out: &mut [f32]) {
    println!("== one transcendental, jit f32x4 vs the interpreter's AVX2 loop, median µs");
    let mut compare = |name: &str, op: UnaryOp, f: &dyn Fn(&mut [f32], &[f32])| {
        let mut p = Program::new();
        let v = p.input(0);
        let y = p.unary(op, v);
        p.output(y);
        let spec = ElementwiseSpec {
            name: name.to_string(),
            shape: SHAPE.to_vec(),
            mode: ShapeMode::Exact,
            inputs: vec![InputLayout::contiguous(&SHAPE)],
            program: p,
        };
        let k = compile_elementwise(&spec).expect("compiles");
        let jit = time(50, || k.run(&[x], &mut [&mut *out], 0).expect("runs"));
        let interp = time(50, || {
            f(&mut *out, x);
            std::hint::black_box(&out);
        });
        println!(
            "{name:18} jit {jit:8.1} µs   interpreter {interp:8.1} µs   jit/interp {:5.2}x",
            jit / interp
        );
    };
    macro_rules! avx2 {
        ($f:path) => {
            &|o: &mut [f32], x: &[f32]| {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the JIT (and so this example) only runs on AVX2+FMA hosts;
                // `compile_elementwise` above would have failed otherwise.
                unsafe {
                    map_avx2(o, x, $f)
                }
            }
        };
    }
    compare("exp", UnaryOp::Exp, avx2!(math::exp));
    compare("tanh", UnaryOp::Tanh, avx2!(math::tanh));
    compare("sigmoid", UnaryOp::Sigmoid, avx2!(math::sigmoid));
    compare("gelu_erf", UnaryOp::GeluErf, avx2!(math::gelu_erf));
}

/// `builtin:elementwise`'s chain on `[64, 4096]`: fused (staged, two transcendentals)
/// against its halves `v = tanh(x·w + b)·(x·w + b) + x` and `sigmoid(v)·v − 0.25` as two
/// kernels with `v` going through memory.
fn elementwise_chain(x: &[f32], out: &mut [f32]) {
    const ROWS: usize = 64;
    const WIDTH: usize = 4096;
    let shape = [ROWS, WIDTH];
    let x = &x[..ROWS * WIDTH];
    let out = &mut out[..ROWS * WIDTH];
    let w: Vec<f32> = (0..WIDTH).map(|i| i as f32 / WIDTH as f32).collect();
    let b: Vec<f32> = (0..WIDTH).map(|i| 0.5 - i as f32 / WIDTH as f32).collect();
    let row = InputLayout::broadcast(&[WIDTH], &shape).expect("broadcast");
    let first_half = |p: &mut Program| -> (ValueId, ValueId) {
        let (x, w, b) = (p.input(0), p.input(1), p.input(2));
        let xw = p.binary(BinaryOp::Mul, x, w);
        let y = p.binary(BinaryOp::Add, xw, b);
        let t = p.unary(UnaryOp::Tanh, y);
        let u = p.binary(BinaryOp::Mul, t, y);
        (x, p.binary(BinaryOp::Add, u, x))
    };
    let second_half = |p: &mut Program, v: ValueId| {
        let s = p.unary(UnaryOp::Sigmoid, v);
        let o = p.binary(BinaryOp::Mul, s, v);
        let c = p.constant(0.25);
        let o = p.binary(BinaryOp::Sub, o, c);
        p.output(o);
    };
    let spec = |name: &str, program: Program, inputs: Vec<InputLayout>| ElementwiseSpec {
        name: name.to_string(),
        shape: shape.to_vec(),
        mode: ShapeMode::Exact,
        inputs,
        program,
    };
    let three = vec![InputLayout::contiguous(&shape), row.clone(), row];
    let mut fused = Program::new();
    let (_, v) = first_half(&mut fused);
    second_half(&mut fused, v);
    let fused = compile_elementwise(&spec("fused", fused, three.clone())).expect("compiles");
    let mut head = Program::new();
    let (_, v) = first_half(&mut head);
    head.output(v);
    let head = compile_elementwise(&spec("head", head, three)).expect("compiles");
    let mut tail = Program::new();
    let v = tail.input(0);
    second_half(&mut tail, v);
    let tail = compile_elementwise(&spec("tail", tail, vec![InputLayout::contiguous(&shape)]))
        .expect("compiles");
    let mut mid = vec![0f32; ROWS * WIDTH];
    let t_fused = time(50, || {
        fused.run(&[x, &w, &b], &mut [&mut *out], 0).expect("runs")
    });
    let t_split = time(50, || {
        head.run(&[x, &w, &b], &mut [&mut mid], 0).expect("runs");
        tail.run(&[&mid], &mut [&mut *out], 0).expect("runs");
    });
    println!("== builtin:elementwise chain on f32{shape:?}, median µs of 50 runs");
    println!("fused (staged)      {t_fused:8.1} µs   two kernels {t_split:8.1} µs");
}

/// The plain Rust loop a compiler would write: row by row, the bias broadcast, `f`
/// inlined (LLVM auto-vectorizes what it can).
fn rust_loop(x: &[f32], bias: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    let c = bias.len();
    for (o, xs) in out.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
        for ((o, &v), &b) in o.iter_mut().zip(xs).zip(bias) {
            *o = f(v + b);
        }
    }
}
