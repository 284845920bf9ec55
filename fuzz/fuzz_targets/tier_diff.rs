//! Fuzz target: differential, interpreter against JIT tier. The bytes choose a small
//! graph over `x: [n, c]` (and maybe `y: [n, c]`) and its inputs, drawn from NaN (two
//! payloads), ±inf, ±0, subnormals, ±f32::MAX, ordinary values and raw bit patterns.
//! Both tiers run it (the JIT in sync compile mode, every key compiled on first sight,
//! then run from its kernel; every region must have run a kernel) and must agree:
//!
//! - The graph is an *exact* prefix — ops whose every result is determined by IEEE
//!   (neg, abs, relu, leaky relu, clip, max, min, where over a comparison, add, sub,
//!   mul, div, sqrt, reciprocal) against `y`, a constant row or a scalar — then at most
//!   one *inexact* tail op.
//! - Prefix results: the same bits; a NaN matches any NaN unless every op passes an
//!   operand through (neg … where), which fixes the payload too.
//! - Tail results: within the op's stated tolerance of the interpreter's, given the
//!   prefix values (the interpreter's; the prefix being exact, both tiers feed the tail
//!   the same ones): each transcendental within the sum of the two tiers' stated ulp
//!   bounds (see `unary_tolerance`; ulps count through zero and up to ±inf, so an
//!   overflow or underflow threshold is one ulp), pow within 1e-4 relative (as many
//!   ulp); softmax within 1e-6 absolute or 1e-4 relative,
//!   log-softmax within 1e-5 absolute + 1e-6 relative; reduce max the same value; sum and
//!   mean within 1e-5 of the row's Σ|x| (over c for the mean), a matmul (+ bias and
//!   relu or clip, which are 1-Lipschitz) within 1e-5 of Σₖ|aᵢₖ||wₖⱼ|, plus an ulp of the
//!   result each (Σ over finite terms; an infinite one decides the result in any
//!   order). A row holding a NaN gives NaN on both; a matmul row whose Σ reaches
//!   f32::MAX/4 is not compared (f32 partial sums may overflow in one order and not the
//!   other; sums and means run in f64 on both tiers, where they cannot). Layer norm is
//!   left out: on ill-conditioned rows (huge equal values) no fixed tolerance holds;
//!   `crates/shapejit-jit/tests/special_values.rs` covers it.
//!
//! Fast by construction: rows of ≤ 19 values, ≤ 4 of them, ≤ 6 prefix ops (one or two
//! regions, so one or two compiles), one intra-op thread (no pool thread per module),
//! no family kernels; the prefix alone is run only for the tails whose tolerance needs
//! it. Cranelift's compile is most of an execution, so the modules of the last 256
//! graphs are kept: an input that differs from a recent one only in its values (most
//! mutations) reuses them, kernels included (a kernel depends only on its shape key,
//! so a crash still reproduces from its input alone). The process grows by up to ~256 MB
//! over a run: AddressSanitizer's quarantine of freed memory, not a leak (modules free
//! their code, threads and memory: `crates/shapejit-jit/tests/module_memory.rs`; with
//! `ASAN_OPTIONS=quarantine_size_mb=1` the growth is libFuzzer's corpus).
#![no_main]

use libfuzzer_sys::arbitrary::{Result as ArbResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use shapejit_bytecode::{Program, lower};
use shapejit_ir::{BinaryOp, DType, GraphBuilder, ReduceOp, Tensor, UnaryOp, ValueId, shape};
use shapejit_jit::jit_module;
use shapejit_vm::{CompileMode, Module, Options};
use std::cell::RefCell;
use std::collections::HashMap;

/// Input values: index 0 is what an exhausted byte string gives, an ordinary value.
const PALETTE: [f32; 26] = [
    1.0,
    -1.0,
    0.5,
    -2.5,
    3.0,
    0.25,
    -0.75,
    7.0,
    0.0,
    -0.0,
    f32::NAN,
    -f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::from_bits(1),
    -f32::from_bits(1),
    1e-40,
    -1e-40,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    f32::MAX,
    -f32::MAX,
    89.0,
    -104.5,
    1e30,
    -1e-30,
];

/// Weights and biases of a matmul tail: finite, small.
const WEIGHTS: [f32; 8] = [0.5, -1.0, 0.0, -0.0, 1.5, -0.25, 2.0, 0.75];

/// The second operand of a prefix binary op.
#[derive(Clone, Copy, Debug)]
enum Operand {
    /// the input `y: [n, c]`
    Y,
    /// a constant `[c]`
    Row,
    /// a scalar constant
    Scalar,
}

/// One exact prefix op.
#[derive(Clone, Copy, Debug)]
enum Exact {
    Unary(UnaryOp),
    Binary(BinaryOp, Operand),
    /// `where(cur <cmp> operand, cur, operand)`
    Select(BinaryOp, Operand),
}

impl Exact {
    /// Whether the op's result is one of its operands (NaN payload included).
    fn passes_through(self) -> bool {
        match self {
            Exact::Unary(op) => !matches!(op, UnaryOp::Sqrt | UnaryOp::Reciprocal),
            Exact::Binary(op, _) => matches!(op, BinaryOp::Max | BinaryOp::Min),
            Exact::Select(..) => true,
        }
    }
}

/// The inexact op ending the graph.
#[derive(Clone, Copy, Debug)]
enum Tail {
    Unary(UnaryOp),
    Pow(Operand),
    Softmax,
    LogSoftmax,
    Reduce(ReduceOp, bool),
    /// `act(x @ w + b)`, `w: [c, m]`; act 0 none, 1 relu, 2 clip
    MatMul {
        m: usize,
        act: u8,
    },
}

#[derive(Debug)]
struct Case {
    n: usize,
    c: usize,
    prefix: Vec<Exact>,
    tail: Option<Tail>,
    /// the prefix value is also a graph output (an elementwise region with two
    /// outputs)
    expose: bool,
    x: Vec<f32>,
    y: Vec<f32>,
    row: Vec<f32>,
    scalar: f32,
    w: Vec<f32>,
    bias: Vec<f32>,
}

fn value(u: &mut Unstructured) -> ArbResult<f32> {
    let i = u.int_in_range(0..=PALETTE.len())?;
    Ok(match PALETTE.get(i) {
        Some(&v) => v,
        None => f32::from_bits(u.arbitrary()?),
    })
}

fn values(u: &mut Unstructured, n: usize) -> ArbResult<Vec<f32>> {
    (0..n).map(|_| value(u)).collect()
}

fn operand(u: &mut Unstructured) -> ArbResult<Operand> {
    Ok(*u.choose(&[Operand::Y, Operand::Row, Operand::Scalar])?)
}

fn exact(u: &mut Unstructured) -> ArbResult<Exact> {
    let unary = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Relu,
        UnaryOp::LeakyRelu { alpha: 0.1 },
        UnaryOp::Clip {
            min: -1.0,
            max: 2.0,
        },
        UnaryOp::Clip {
            min: 0.0,
            max: f32::INFINITY,
        },
        UnaryOp::Clip {
            min: -3.5,
            max: -0.25,
        },
        UnaryOp::Sqrt,
        UnaryOp::Reciprocal,
    ];
    let binary = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
    ];
    let compare = [
        BinaryOp::Eq,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ];
    Ok(match u.int_in_range(0..=2)? {
        0 => Exact::Unary(*u.choose(&unary)?),
        1 => Exact::Binary(*u.choose(&binary)?, operand(u)?),
        _ => Exact::Select(*u.choose(&compare)?, operand(u)?),
    })
}

fn tail(u: &mut Unstructured) -> ArbResult<Option<Tail>> {
    let transcendental = [
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Silu,
        UnaryOp::Erf,
        UnaryOp::Gelu { tanh_approx: false },
        UnaryOp::Gelu { tanh_approx: true },
        UnaryOp::Elu { alpha: 1.5 },
    ];
    let reduce = [ReduceOp::Max, ReduceOp::Sum, ReduceOp::Mean];
    Ok(match u.int_in_range(0..=6)? {
        0 => None,
        1 => Some(Tail::Unary(*u.choose(&transcendental)?)),
        2 => Some(Tail::Pow(operand(u)?)),
        3 => Some(Tail::Softmax),
        4 => Some(Tail::LogSoftmax),
        5 => Some(Tail::Reduce(*u.choose(&reduce)?, u.arbitrary()?)),
        _ => Some(Tail::MatMul {
            m: u.int_in_range(1..=9)?,
            act: u.int_in_range(0..=2)?,
        }),
    })
}

impl Case {
    fn generate(u: &mut Unstructured) -> ArbResult<Case> {
        let n = u.int_in_range(1..=4)?;
        let c = u.int_in_range(1..=19)?;
        let n_ops = u.int_in_range(0..=6)?;
        let prefix = (0..n_ops).map(|_| exact(u)).collect::<ArbResult<_>>()?;
        let tail = tail(u)?;
        // A row or matmul region compiles one output: exposing the prefix fused into
        // it would leave it interpreted.
        let expose = u.arbitrary::<bool>()? && matches!(tail, Some(Tail::Unary(_) | Tail::Pow(_)));
        let m = match tail {
            Some(Tail::MatMul { m, .. }) => m,
            _ => 0,
        };
        let pick = |u: &mut Unstructured, k: usize| -> ArbResult<Vec<f32>> {
            (0..k).map(|_| Ok(*u.choose(&WEIGHTS)?)).collect()
        };
        let w = pick(u, c * m)?;
        let bias = pick(u, m)?;
        let row = values(u, c)?;
        let scalar = value(u)?;
        let x = values(u, n * c)?;
        let y = values(u, n * c)?;
        Ok(Case {
            n,
            c,
            prefix,
            tail,
            expose,
            x,
            y,
            row,
            scalar,
            w,
            bias,
        })
    }

    fn uses_y(&self) -> bool {
        let y = |o: &Operand| matches!(o, Operand::Y);
        self.prefix.iter().any(|op| match op {
            Exact::Unary(_) => false,
            Exact::Binary(_, o) | Exact::Select(_, o) => y(o),
        }) || matches!(self.tail, Some(Tail::Pow(Operand::Y)))
    }

    /// The prefix alone (`with_tail` false) or the whole graph.
    fn program(&self, with_tail: bool) -> Program {
        // Invariant: the case's shapes and ops are valid by construction, so the
        // builder accepts them; a failure is a bug of this generator.
        self.build(with_tail).expect("generated graphs are valid")
    }

    fn build(&self, with_tail: bool) -> Result<Program, Box<dyn std::error::Error>> {
        let c = self.c;
        let mut g = GraphBuilder::new("tier_diff");
        let x = g.input("x", DType::F32, shape!["n", c]);
        let y = self
            .uses_y()
            .then(|| g.input("y", DType::F32, shape!["n", c]));
        let row = g.constant("row", Tensor::from_vec(self.row.clone(), &[c])?);
        let scalar = g.constant("s", Tensor::scalar(self.scalar));
        let pick = |o: Operand| match o {
            // Invariant: `y` is an input whenever an operand names it (`uses_y`).
            Operand::Y => y.expect("y is an input"),
            Operand::Row => row,
            Operand::Scalar => scalar,
        };
        let mut cur: ValueId = x;
        for &op in &self.prefix {
            cur = match op {
                Exact::Unary(op) => g.unary(op, cur)?,
                Exact::Binary(op, o) => g.binary(op, cur, pick(o))?,
                Exact::Select(cmp, o) => {
                    let cond = g.binary(cmp, cur, pick(o))?;
                    g.where_(cond, cur, pick(o))?
                }
            };
        }
        let pre = cur;
        if with_tail && let Some(tail) = self.tail {
            let out = match tail {
                Tail::Unary(op) => g.unary(op, pre)?,
                Tail::Pow(o) => g.binary(BinaryOp::Pow, pre, pick(o))?,
                Tail::Softmax => g.softmax(pre, -1)?,
                Tail::LogSoftmax => g.log_softmax(pre, -1)?,
                Tail::Reduce(op, keep) => g.reduce(op, pre, &[-1], keep)?,
                Tail::MatMul { m, act } => {
                    let w = g.constant("w", Tensor::from_vec(self.w.clone(), &[c, m])?);
                    let b = g.constant("b", Tensor::from_vec(self.bias.clone(), &[m])?);
                    let h = g.matmul(pre, w)?;
                    let h = g.add(h, b)?;
                    match act {
                        0 => h,
                        1 => g.relu(h)?,
                        _ => g.clip(h, -1.0, 2.0)?,
                    }
                }
            };
            g.output("out", out)?;
            if self.expose {
                g.output("pre", pre)?;
            }
        } else {
            g.output("pre", pre)?;
        }
        Ok(lower(&g.finish()?)?)
    }

    fn inputs(&self) -> Vec<Tensor> {
        let shape = [self.n, self.c];
        // Invariant: `generate` made n·c values of each.
        let tensor = |v: &[f32]| Tensor::from_vec(v.to_vec(), &shape).expect("n·c values");
        let mut inputs = vec![tensor(&self.x)];
        if self.uses_y() {
            inputs.push(tensor(&self.y));
        }
        inputs
    }
}

/// `x`'s position in the ordered line of floats: adjacent floats differ by one, ±0
/// both sit at 0, ±inf just past ±f32::MAX.
fn ordinal(x: f32) -> i64 {
    let bits = i64::from(x.to_bits() & 0x7fff_ffff);
    if x.is_sign_negative() { -bits } else { bits }
}

fn ulps(a: f32, b: f32) -> u64 {
    ordinal(a).abs_diff(ordinal(b))
}

/// The prefix rule: same bits; a NaN matches any NaN unless `payload` holds.
fn same(got: f32, want: f32, payload: bool) -> bool {
    got.to_bits() == want.to_bits() || (!payload && got.is_nan() && want.is_nan())
}

/// Within `tol` absolutely, or `ulp` ulp (NaN only matches NaN).
fn close(got: f32, want: f32, tol: f64, ulp: u64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    got.to_bits() == want.to_bits()
        || ulps(got, want) <= ulp
        || (got.is_finite() && want.is_finite() && (f64::from(got) - f64::from(want)).abs() <= tol)
}

/// A transcendental's tolerance between the tiers: the sum of the two tiers' stated
/// maximum errors in ulp (`shapejit_kernels::math` for the interpreter, the JIT's
/// `codegen/math.rs`), rounded up, and an absolute one on gelu's negative tail below −5,
/// where results are under 3e-7 and the JIT states 1e-9 (erf form) or an error that
/// grows with |x| as any f32 evaluation of the tanh form's does.
fn unary_tolerance(op: UnaryOp) -> (u64, f64) {
    match op {
        UnaryOp::Exp | UnaryOp::Log => (3, 0.0),
        UnaryOp::Tanh => (4, 0.0),
        UnaryOp::Sigmoid | UnaryOp::Erf | UnaryOp::Elu { .. } => (6, 0.0),
        // sigmoid's and one product's rounding; below -87 the sigmoids are denormal
        // (fewer bits, computed differently by the tiers) and `x·σ(x)` under 1e-35
        UnaryOp::Silu => (7, 1e-35),
        UnaryOp::Gelu { tanh_approx: false } => (12, 1e-9),
        UnaryOp::Gelu { tanh_approx: true } => (52, 1e-9),
        // Not generated as a tail: every other op is exact.
        _ => (0, 0.0),
    }
}

/// ulp of a relative tolerance `rel` (at the coarsest point of a binade).
fn rel_ulps(rel: f64) -> u64 {
    (2.0 * rel / f64::from(f32::EPSILON)).ceil() as u64
}

fn fail(case: &Case, what: &str, i: usize, got: f32, want: f32) -> ! {
    panic!(
        "{what}[{i}]: jit {got:e} ({:#010x}) interp {want:e} ({:#010x})\n{case:#?}",
        got.to_bits(),
        want.to_bits()
    );
}

/// A row of a row-wise tail: the scale its tolerance is relative to (over its finite
/// terms) and whether it holds a NaN.
fn row_scale(row: &[f32], weights: impl Fn(usize) -> f64) -> (f64, bool) {
    let nan = row.iter().any(|v| v.is_nan());
    let scale = row
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(k, &v)| f64::from(v).abs() * weights(k))
        .sum();
    (scale, nan)
}

/// A row-wise result against its scale: a NaN in the row gives NaN on both; else
/// within `rel · scale` or an ulp, infinities included (an infinite term decides the
/// result whatever the order, unless finite partial sums can overflow: `f32` ones
/// (`overflows`) at a scale of f32::MAX/4 are not compared).
fn row_close(got: f32, want: f32, (scale, nan): (f64, bool), rel: f64, overflows: bool) -> bool {
    if nan {
        return got.is_nan() && want.is_nan();
    }
    if overflows && scale >= f64::from(f32::MAX) / 4.0 {
        return true;
    }
    close(got, want, rel * scale, 1)
}

fn check_tail(case: &Case, tail: Tail, pre: &[f32], got: &[f32], want: &[f32]) {
    let (n, c) = (case.n, case.c);
    assert_eq!(got.len(), want.len(), "output sizes");
    for i in 0..want.len() {
        let (g, w) = (got[i], want[i]);
        let ok = match tail {
            Tail::Unary(op) => {
                let (ulp, tol) = unary_tolerance(op);
                close(g, w, tol, ulp)
            }
            Tail::Pow(_) => close(g, w, 0.0, rel_ulps(1e-4)),
            Tail::Softmax => close(g, w, 1e-6, rel_ulps(1e-4)),
            Tail::LogSoftmax => close(g, w, 1e-5 + 1e-6 * f64::from(w).abs(), 1),
            Tail::Reduce(ReduceOp::Max, _) => same(g, w, false),
            Tail::Reduce(op, _) => {
                // Both tiers sum in f64, which no sum of f32 values overflows.
                let (scale, nan) = row_scale(&pre[i * c..(i + 1) * c], |_| 1.0);
                let per = if op == ReduceOp::Mean { c as f64 } else { 1.0 };
                row_close(g, w, (scale / per, nan), 1e-5, false)
            }
            Tail::MatMul { m, .. } => {
                let (r, j) = (i / m, i % m);
                let a = &pre[r * c..(r + 1) * c];
                let scale = row_scale(a, |k| f64::from(case.w[k * m + j]).abs());
                row_close(g, w, scale, 1e-5, true)
            }
        };
        if !ok {
            fail(case, &format!("{tail:?} of {n}×{c}"), i, g, w);
        }
    }
}

fn options() -> Options {
    Options {
        compile: CompileMode::Sync,
        promote_threshold: 1,
        families: false,
        threads: 1,
        ..Options::default()
    }
}

/// The modules of one graph: built (and its kernels compiled) once, reused by every
/// execution whose bytes differ only in the input values.
#[derive(Clone)]
struct Modules {
    /// the whole graph on the interpreter
    interp: Module,
    /// the prefix alone on the interpreter (for the tails whose tolerance needs it)
    prefix: Option<Module>,
    /// the whole graph on the JIT tier
    jit: Module,
    /// whether the JIT tier is installed (a host with AVX+FMA)
    compiles: bool,
}

/// Graphs seen recently, by [`Case::graph_key`]; cleared when full.
const CACHED_GRAPHS: usize = 256;

thread_local! {
    static GRAPHS: RefCell<HashMap<String, Modules>> = RefCell::new(HashMap::new());
}

impl Case {
    /// Everything that decides the program: all but the input values and `n` (the
    /// batch is symbolic; the JIT compiles each new `n` on first sight).
    fn graph_key(&self) -> String {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        format!(
            "{} {:?} {:?} {} {:?} {} {:?} {:?}",
            self.c,
            self.prefix,
            self.tail,
            self.expose,
            bits(&self.row),
            self.scalar.to_bits(),
            bits(&self.w),
            bits(&self.bias)
        )
    }

    fn modules(&self) -> Modules {
        let key = self.graph_key();
        if let Some(m) = GRAPHS.with(|g| g.borrow().get(&key).cloned()) {
            return m;
        }
        let program = self.program(true);
        let needs_prefix = !self.expose
            && matches!(
                self.tail,
                Some(Tail::Reduce(ReduceOp::Sum | ReduceOp::Mean, _) | Tail::MatMul { .. })
            );
        let interp =
            |p: Program| Module::new(p, Options::interp()).expect("lowered programs verify");
        let (jit, handle) =
            jit_module(program.clone(), options()).expect("lowered programs verify");
        let m = Modules {
            interp: interp(program),
            prefix: needs_prefix.then(|| interp(self.program(false))),
            jit,
            compiles: handle.is_some(),
        };
        GRAPHS.with(|g| {
            let mut g = g.borrow_mut();
            if g.len() >= CACHED_GRAPHS {
                g.clear();
            }
            g.insert(key, m.clone());
        });
        m
    }
}

/// Kernel hits per region slot so far.
fn region_hits(module: &Module) -> Vec<(u64, String)> {
    module
        .stats()
        .slots
        .iter()
        .filter(|s| s.kind.starts_with("region"))
        .map(|s| {
            let what = format!(
                "{} at node '{}' ({:?})",
                s.kind, s.node, s.last_compile_error
            );
            (s.kernel_hits, what)
        })
        .collect()
}

fn outputs(module: &Module, inputs: &[Tensor], what: &str) -> Result<Vec<Vec<f32>>, String> {
    let out = module
        .runtime()
        .run(inputs)
        .map_err(|e| format!("{what} fails: {e}"))?;
    Ok(out
        .iter()
        .map(|t| t.as_slice::<f32>().expect("f32 outputs").to_vec())
        .collect())
}

fuzz_target!(|data: &[u8]| {
    let Ok(case) = Case::generate(&mut Unstructured::new(data)) else {
        return;
    };
    let inputs = case.inputs();
    let modules = case.modules();
    let run = |module: &Module, what: &str| {
        outputs(module, &inputs, what).unwrap_or_else(|e| panic!("{e}\n{case:#?}"))
    };
    let want = run(&modules.interp, "the interpreter");
    // The prefix values: an output of the whole graph, or, for the tails whose
    // tolerance needs them, the interpreter's on the prefix alone.
    let pre = match (&case.tail, &modules.prefix) {
        (None, _) => want[0].clone(),
        (Some(_), _) if case.expose => want[1].clone(),
        (Some(_), Some(prefix)) => run(prefix, "the prefix").remove(0),
        (Some(_), None) => Vec::new(),
    };
    let payload = case.prefix.iter().all(|op| op.passes_through());
    let check_pre = |got: &[f32], what: &str| {
        for (i, (&g, &w)) in got.iter().zip(&pre).enumerate() {
            if !same(g, w, payload) {
                fail(&case, what, i, g, w);
            }
        }
    };
    // The first run compiles what this `n` needs (if the graph is new to it), the
    // second runs from kernels only.
    let mut hits = Vec::new();
    for attempt in 0..2 {
        hits = region_hits(&modules.jit);
        let got = run(&modules.jit, &format!("run {attempt} on the JIT tier"));
        assert_eq!(got.len(), want.len(), "output counts");
        match case.tail {
            None => check_pre(&got[0], "prefix"),
            Some(tail) => {
                check_tail(&case, tail, &pre, &got[0], &want[0]);
                if case.expose {
                    check_pre(&got[1], "exposed prefix");
                }
            }
        }
    }
    // Every region ran a kernel in the second run (on a host with AVX+FMA): else the
    // comparison would be the interpreter against itself.
    if modules.compiles {
        for ((before, what), (after, _)) in hits.iter().zip(region_hits(&modules.jit)) {
            assert!(after > *before, "{what} ran no kernel\n{case:#?}");
        }
    }
});
