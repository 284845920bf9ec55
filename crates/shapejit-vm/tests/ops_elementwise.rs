//! unary, binary, where and cast against naive f64 references over random
//! shapes (broadcasting, size-1 and zero-size dims) and strided layouts.

mod ops_support;
use ops_support::*;
use shapejit_ir::{BinaryOp, DType, MathFn, Op, UnaryOp};
use shapejit_vm::ops::OpError;

/// Tolerance of IEEE-rounded float ops (`+ - * /`, sqrt, reciprocal): one f32 rounding.
const IEEE_REL: f64 = 1.2e-7;
/// Tolerance of the transcendental unary ops (op.rs: ≤ 4 ulp-ish, 1e-6 relative),
/// with an absolute floor for results below 1e-6 (the far tails of gelu/erf).
const TRANSCENDENTAL_REL: f64 = 1e-6;
const TRANSCENDENTAL_ABS: f64 = 1e-12;

fn unary_ref(u: UnaryOp, x: f64) -> f64 {
    match u {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::LeakyRelu { alpha } => {
            if x >= 0.0 {
                x
            } else {
                alpha as f64 * x
            }
        }
        UnaryOp::Elu { alpha } => {
            if x >= 0.0 {
                x
            } else {
                alpha as f64 * x.exp_m1()
            }
        }
        UnaryOp::Gelu { tanh_approx: false } => {
            let t = x / std::f64::consts::SQRT_2;
            if x < 0.0 {
                0.5 * x * erfc64(-t)
            } else {
                0.5 * x * (1.0 + erf64(t))
            }
        }
        UnaryOp::Gelu { tanh_approx: true } => {
            let y = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            x / (1.0 + (-2.0 * y).exp())
        }
        UnaryOp::Erf => erf64(x),
        UnaryOp::Clip { min, max } => x.clamp(min as f64, max as f64),
        UnaryOp::Not => (x == 0.0) as u8 as f64,
        UnaryOp::Math(f) => math_ref(f, x),
    }
}

fn math_ref(f: MathFn, x: f64) -> f64 {
    match f {
        MathFn::Floor => x.floor(),
        MathFn::Ceil => x.ceil(),
        MathFn::Round => x.round_ties_even(),
        MathFn::Sin => x.sin(),
        MathFn::Cos => x.cos(),
        MathFn::Tan => x.tan(),
        MathFn::Asin => x.asin(),
        MathFn::Acos => x.acos(),
        MathFn::Atan => x.atan(),
        MathFn::Sinh => x.sinh(),
        MathFn::Cosh => x.cosh(),
        MathFn::Asinh => x.asinh(),
        MathFn::Acosh => x.acosh(),
        MathFn::Atanh => x.atanh(),
    }
}

#[test]
fn math_functions_match_reference() {
    let mut rng = Rng::new(7);
    for f in MathFn::ALL {
        for kind in KINDS {
            let shape = rng.shape(2, 6, false);
            let (lo, hi) = match f {
                MathFn::Asin | MathFn::Acos | MathFn::Atanh => (-0.99, 0.99),
                MathFn::Acosh => (1.0, 8.0),
                MathFn::Floor | MathFn::Ceil | MathFn::Round => (-4.0, 4.0),
                _ => (-3.0, 3.0),
            };
            // halves exercise round-half-to-even
            let x = Host::random(&mut rng, &shape, kind, |r| {
                let v = r.f32(lo, hi);
                if matches!(f, MathFn::Round) {
                    (v * 2.0).round() / 2.0
                } else {
                    v
                }
            });
            let out = run(&Op::Unary(UnaryOp::Math(f)), &[&x]).unwrap();
            let want: Vec<f64> = x.vals.iter().map(|&v| math_ref(f, v)).collect();
            let exact = matches!(f, MathFn::Floor | MathFn::Ceil | MathFn::Round);
            let (abs, rel) = if exact {
                (0.0, 0.0)
            } else {
                (1e-7, TRANSCENDENTAL_REL)
            };
            assert_close(
                &format!("{} {kind:?} {shape:?}", f.name()),
                &out[0].vals,
                &want,
                abs,
                rel,
            );
        }
    }
}

const FLOAT_UNARY: [UnaryOp; 16] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Reciprocal,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Silu,
    UnaryOp::Relu,
    UnaryOp::LeakyRelu { alpha: 0.1 },
    UnaryOp::Elu { alpha: 0.7 },
    UnaryOp::Gelu { tanh_approx: false },
    UnaryOp::Gelu { tanh_approx: true },
    UnaryOp::Erf,
    UnaryOp::Clip {
        min: -0.5,
        max: 1.25,
    },
];

#[test]
fn float_unary_matches_reference() {
    let mut rng = Rng::new(1);
    for u in FLOAT_UNARY {
        for kind in KINDS {
            for _ in 0..6 {
                let rank = rng.range(0, 5);
                let zero_ok = rng.range(0, 5) == 0;
                let shape = rng.shape(rank, 6, zero_ok);
                let positive = matches!(u, UnaryOp::Log | UnaryOp::Sqrt);
                let x = Host::random(&mut rng, &shape, kind, |r| {
                    if positive {
                        r.f32(0.01, 8.0)
                    } else {
                        r.f32(-6.0, 6.0)
                    }
                });
                let out = run(&Op::Unary(u), &[&x]).unwrap();
                assert_eq!(out[0].ty.dtype, DType::F32);
                assert_eq!(out[0].ty.shape.as_slice(), shape.as_slice());
                let want: Vec<f64> = x.vals.iter().map(|&v| unary_ref(u, v)).collect();
                let exact = matches!(
                    u,
                    UnaryOp::Neg
                        | UnaryOp::Abs
                        | UnaryOp::Relu
                        | UnaryOp::Clip { .. }
                        | UnaryOp::LeakyRelu { .. }
                );
                let rel = if exact {
                    IEEE_REL / 2.0
                } else if matches!(u, UnaryOp::Sqrt | UnaryOp::Reciprocal) {
                    IEEE_REL
                } else {
                    TRANSCENDENTAL_REL
                };
                let abs = if rel == TRANSCENDENTAL_REL {
                    TRANSCENDENTAL_ABS
                } else {
                    0.0
                };
                assert_close(
                    &format!("{} {kind:?} {shape:?}", u.name()),
                    &out[0].vals,
                    &want,
                    abs,
                    rel,
                );
            }
        }
    }
}

#[test]
fn integer_and_bool_unary() {
    let mut rng = Rng::new(2);
    for kind in KINDS {
        let shape = rng.shape(3, 5, false);
        let x = Host::random(&mut rng, &shape, kind, |r| r.range(0, 41) as i64 - 20);
        for (u, f) in [
            (UnaryOp::Neg, (|v: f64| -v) as fn(f64) -> f64),
            (UnaryOp::Abs, f64::abs),
            (UnaryOp::Relu, |v| v.max(0.0)),
        ] {
            let out = run(&Op::Unary(u), &[&x]).unwrap();
            assert_eq!(out[0].ty.dtype, DType::I64);
            assert_exact(
                u.name(),
                &out[0].vals,
                &x.vals.iter().map(|&v| f(v)).collect::<Vec<_>>(),
            );
        }
        let xi = Host::random(&mut rng, &shape, kind, |r| r.range(0, 41) as i32 - 20);
        let out = run(&Op::Unary(UnaryOp::Neg), &[&xi]).unwrap();
        assert_exact(
            "neg i32",
            &out[0].vals,
            &xi.vals.iter().map(|&v| -v).collect::<Vec<_>>(),
        );
        let b = Host::random(&mut rng, &shape, kind, |r| r.bool());
        let out = run(&Op::Unary(UnaryOp::Not), &[&b]).unwrap();
        assert_exact(
            "not",
            &out[0].vals,
            &b.vals.iter().map(|&v| 1.0 - v).collect::<Vec<_>>(),
        );
    }
}

fn binary_ref(b: BinaryOp, x: f64, y: f64, int: bool) -> f64 {
    let bool_ = |c: bool| c as u8 as f64;
    match b {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div if int => (x / y).trunc(),
        BinaryOp::Div => x / y,
        BinaryOp::Pow if int => {
            if y < 0.0 {
                if x == 1.0 {
                    1.0
                } else if x == -1.0 {
                    if y % 2.0 == 0.0 { 1.0 } else { -1.0 }
                } else {
                    0.0
                }
            } else {
                x.powi(y as i32)
            }
        }
        BinaryOp::Pow => x.powf(y),
        BinaryOp::Max => x.max(y),
        BinaryOp::Min => x.min(y),
        BinaryOp::And => bool_(x != 0.0 && y != 0.0),
        BinaryOp::Or => bool_(x != 0.0 || y != 0.0),
        BinaryOp::Eq => bool_(x == y),
        BinaryOp::Lt => bool_(x < y),
        BinaryOp::Le => bool_(x <= y),
        BinaryOp::Gt => bool_(x > y),
        BinaryOp::Ge => bool_(x >= y),
        BinaryOp::BitAnd => ((x as i64) & (y as i64)) as f64,
        BinaryOp::BitOr => ((x as i64) | (y as i64)) as f64,
        BinaryOp::BitXor => ((x as i64) ^ (y as i64)) as f64,
    }
}

/// `0..40` onto `-20..=20` without 0.
fn nonzero(v: i64) -> i64 {
    if v < 20 { v - 20 } else { v - 19 }
}

fn operand(
    rng: &mut Rng,
    b: BinaryOp,
    dtype: DType,
    shape: &[usize],
    kind: Kind,
    second: bool,
) -> Host {
    match dtype {
        DType::F32 if b == BinaryOp::Pow && !second => {
            Host::random(rng, shape, kind, |r| r.f32(0.1, 3.0))
        }
        // a few exact ties so that eq/le/ge see equal values
        DType::F32 => Host::random(rng, shape, kind, |r| (r.f32(-3.0, 3.0) * 4.0).round() / 4.0),
        DType::I32 if b == BinaryOp::Pow => {
            Host::random(rng, shape, kind, |r| r.range(0, 9) as i32 - 3)
        }
        // integer divisors are never 0 here (see `integer_division_by_zero_is_an_error`)
        DType::I32 if b == BinaryOp::Div && second => {
            Host::random(rng, shape, kind, |r| nonzero(r.range(0, 40) as i64) as i32)
        }
        DType::I32 => Host::random(rng, shape, kind, |r| r.range(0, 41) as i32 - 20),
        DType::I64 if b == BinaryOp::Pow => {
            Host::random(rng, shape, kind, |r| r.range(0, 9) as i64 - 3)
        }
        DType::I64 if b == BinaryOp::Div && second => {
            Host::random(rng, shape, kind, |r| nonzero(r.range(0, 40) as i64))
        }
        DType::I64 => Host::random(rng, shape, kind, |r| r.range(0, 41) as i64 - 20),
        DType::Bool => Host::random(rng, shape, kind, |r| r.bool()),
        DType::F64 if b == BinaryOp::Pow && !second => {
            Host::random(rng, shape, kind, |r| r.f32(0.1, 3.0) as f64 * (1.0 + 1e-12))
        }
        // values no f32 holds, so that an f32 detour would show
        DType::F64 => Host::random(rng, shape, kind, |r| {
            ((r.f32(-3.0, 3.0) * 4.0).round() / 4.0) as f64 * 1e200
        }),
        // the other dtypes only compare: a few values, with ties
        other => {
            let source = |r: &mut Rng| shapejit_ir::Num::Float(r.range(0, 5) as f64 * 3.5 + 100.0);
            shapejit_ir::with_dtype!(other, T => Host::random(rng, shape, kind, |r| {
                <T as shapejit_ir::Scalar>::from_num(source(r))
            }))
        }
    }
}

#[test]
fn binary_broadcasts_over_strided_inputs() {
    let mut rng = Rng::new(3);
    for b in BinaryOp::ALL {
        let dtypes: &[DType] = if b.is_logical() {
            &[DType::Bool]
        } else if b.is_comparison() {
            &DType::ALL
        } else if b.is_bitwise() {
            &[DType::I32, DType::I64]
        } else {
            &[DType::F32, DType::F64, DType::I32, DType::I64]
        };
        for &dtype in dtypes {
            for i in 0..8 {
                let kind = KINDS[i % 3];
                let (out_shape, shapes) = broadcast_shapes(&mut rng, 2);
                let x = operand(&mut rng, b, dtype, &shapes[0], kind, false);
                let y = operand(&mut rng, b, dtype, &shapes[1], KINDS[(i + 1) % 3], true);
                let out = run(&Op::Binary(b), &[&x, &y]).unwrap();
                let want_dtype = if b.is_comparison() {
                    DType::Bool
                } else {
                    dtype
                };
                assert_eq!(out[0].ty.dtype, want_dtype);
                assert_eq!(
                    out[0].ty.shape.as_slice(),
                    out_shape.as_slice(),
                    "{shapes:?}"
                );
                let want: Vec<f64> = (0..out[0].vals.len())
                    .map(|f| {
                        let idx = unravel(f, &out_shape);
                        let (xv, yv) = (
                            x.vals[ravel_broadcast(&idx, x.shape())],
                            y.vals[ravel_broadcast(&idx, y.shape())],
                        );
                        binary_ref(b, xv, yv, dtype.is_int())
                    })
                    .collect();
                let rel = match (dtype, b) {
                    (DType::F32, BinaryOp::Pow) => 1e-6,
                    (DType::F32, _) => IEEE_REL / 2.0,
                    (DType::F64, BinaryOp::Pow) => 1e-15,
                    (DType::F64, _) => f64::EPSILON / 2.0,
                    _ => 0.0,
                };
                let what = format!("{} {dtype} {shapes:?}", b.name());
                assert_close(&what, &out[0].vals, &want, 0.0, rel);
            }
        }
    }
}

#[test]
fn where_selects_with_three_way_broadcast() {
    let mut rng = Rng::new(4);
    for i in 0..20 {
        let (out_shape, shapes) = broadcast_shapes(&mut rng, 3);
        let c = Host::random(&mut rng, &shapes[0], KINDS[i % 3], |r| r.bool());
        let x = Host::f32(&mut rng, &shapes[1], KINDS[(i + 1) % 3]);
        let y = Host::f32(&mut rng, &shapes[2], KINDS[(i + 2) % 3]);
        let out = run(&Op::Where, &[&c, &x, &y]).unwrap();
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| {
                let idx = unravel(f, &out_shape);
                let cv = c.vals[ravel_broadcast(&idx, c.shape())];
                if cv != 0.0 {
                    x.vals[ravel_broadcast(&idx, x.shape())]
                } else {
                    y.vals[ravel_broadcast(&idx, y.shape())]
                }
            })
            .collect();
        assert_exact("where", &out[0].vals, &want);
    }
}

/// The cast rule, written out: float → int truncates and saturates (NaN → 0),
/// int → int wraps, float and int → float round to nearest, → bool is `!= 0`.
fn cast_ref(v: f64, from: DType, to: DType) -> f64 {
    let int = |bits: u32, signed: bool| -> f64 {
        let (lo, hi) = if signed {
            (
                -(2f64.powi(bits as i32 - 1)),
                2f64.powi(bits as i32 - 1) - 1.0,
            )
        } else {
            (0.0, 2f64.powi(bits as i32) - 1.0)
        };
        if from.is_float() {
            if v.is_nan() {
                0.0
            } else {
                v.trunc().clamp(lo, hi)
            }
        } else {
            let m = (v as i128).rem_euclid(1i128 << bits);
            let w = if signed && m >= 1i128 << (bits - 1) {
                m - (1i128 << bits)
            } else {
                m
            };
            w as f64
        }
    };
    match to {
        DType::Bool => (v != 0.0) as u8 as f64,
        DType::F32 => v as f32 as f64,
        DType::F64 => v,
        DType::F16 => shapejit_ir::dtype::f16::from_f64(v).to_f64(),
        DType::Bf16 => shapejit_ir::dtype::bf16::from_f64(v).to_f64(),
        DType::I8 => int(8, true),
        DType::I16 => int(16, true),
        DType::I32 => int(32, true),
        DType::I64 => int(64, true),
        DType::U8 => int(8, false),
        DType::U16 => int(16, false),
        DType::U32 => int(32, false),
        DType::U64 => int(64, false),
        // the narrow types' element rule has its own naive-reference test
        // (shapejit-ir's `dtype::narrow`); this checks the op applies it
        narrow => {
            let n = if from.is_float() {
                shapejit_ir::Num::Float(v)
            } else {
                shapejit_ir::Num::Int(v as i128)
            };
            shapejit_ir::with_dtype!(narrow, T => shapejit_ir::Scalar::to_f64(<T as shapejit_ir::Scalar>::from_num(n)))
        }
    }
}

/// Values of `dtype` (as f64, exact in it): specials, out-of-range values for
/// the narrower types, and small ones.
fn cast_source(rng: &mut Rng, dtype: DType, shape: &[usize], kind: Kind) -> Host {
    let float = |r: &mut Rng| match r.range(0, 8) {
        0 => f64::NAN,
        1 => 3e9,
        2 => -3e4,
        3 => 0.0,
        4 => 70000.5,
        _ => r.f32(-300.0, 300.0) as f64,
    };
    use shapejit_ir::dtype::{bf16, f16};
    match dtype {
        DType::F32 => Host::random(rng, shape, kind, |r| float(r) as f32),
        DType::F64 => Host::random(rng, shape, kind, float),
        DType::F16 => Host::random(rng, shape, kind, |r| f16::from_f64(float(r))),
        DType::Bf16 => Host::random(rng, shape, kind, |r| bf16::from_f64(float(r))),
        DType::I8 => Host::random(rng, shape, kind, |r| r.next_u64() as i8),
        DType::I16 => Host::random(rng, shape, kind, |r| r.next_u64() as i16),
        DType::I32 => Host::random(rng, shape, kind, |r| r.next_u64() as i32 >> r.range(0, 31)),
        DType::I64 => Host::random(rng, shape, kind, |r| {
            (r.next_u64() as i64) >> r.range(12, 63)
        }),
        DType::U8 => Host::random(rng, shape, kind, |r| r.next_u64() as u8),
        DType::U16 => Host::random(rng, shape, kind, |r| r.next_u64() as u16),
        DType::U32 => Host::random(rng, shape, kind, |r| r.next_u64() as u32),
        DType::U64 => Host::random(rng, shape, kind, |r| r.next_u64() >> r.range(12, 63)),
        DType::Bool => Host::random(rng, shape, kind, |r| r.bool()),
        narrow => shapejit_ir::with_dtype!(narrow, T => Host::random(rng, shape, kind, |r| {
            let n = if narrow.is_float() {
                shapejit_ir::Num::Float(float(r))
            } else {
                shapejit_ir::Num::Int(i128::from(r.next_u64() as i8))
            };
            <T as shapejit_ir::Scalar>::from_num(n)
        })),
    }
}

#[test]
fn cast_between_all_pairs() {
    let mut rng = Rng::new(5);
    for from in DType::ALL {
        for to in DType::ALL {
            for kind in KINDS {
                let shape = rng.shape(2, 6, false);
                let x = cast_source(&mut rng, from, &shape, kind);
                let out = run(&Op::Cast { to }, &[&x]).unwrap();
                assert_eq!(out[0].ty.dtype, to);
                let want: Vec<f64> = x.vals.iter().map(|&v| cast_ref(v, from, to)).collect();
                assert_close(&format!("cast {from}->{to}"), &out[0].vals, &want, 0.0, 0.0);
            }
        }
    }
}

#[test]
fn bad_inputs_are_errors() {
    let mut rng = Rng::new(6);
    let f = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let g = Host::f32(&mut rng, &[4, 3], Kind::Contiguous);
    let i = Host::random(&mut rng, &[2, 3], Kind::Contiguous, |r| {
        r.range(0, 5) as i64
    });
    let b = Host::random(&mut rng, &[2, 3], Kind::Contiguous, |r| r.bool());
    assert!(matches!(
        run(&Op::Binary(BinaryOp::Add), &[&f, &i]),
        Err(OpError::DType {
            op: "add",
            input: 1,
            ..
        })
    ));
    assert!(matches!(
        run(&Op::Binary(BinaryOp::Add), &[&f, &g]),
        Err(OpError::Shape { op: "add", .. })
    ));
    assert!(matches!(
        run(&Op::Binary(BinaryOp::And), &[&f, &f]),
        Err(OpError::DType { op: "and", .. })
    ));
    assert!(matches!(
        run(&Op::Binary(BinaryOp::Add), &[&f]),
        Err(OpError::Arity { op: "add", .. })
    ));
    assert!(matches!(
        run(&Op::Unary(UnaryOp::Exp), &[&i]),
        Err(OpError::DType { op: "exp", .. })
    ));
    assert!(matches!(
        run(&Op::Unary(UnaryOp::Not), &[&f]),
        Err(OpError::DType { op: "not", .. })
    ));
    assert!(matches!(
        run(&Op::Where, &[&f, &f, &f]),
        Err(OpError::DType {
            op: "where",
            input: 0,
            ..
        })
    ));
    assert!(matches!(
        run(&Op::Where, &[&b, &f, &i]),
        Err(OpError::DType {
            op: "where",
            input: 2,
            ..
        })
    ));
    let msg = run(&Op::Binary(BinaryOp::Mul), &[&f, &g])
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("mul") && msg.contains("[2, 3]") && msg.contains("[4, 3]"),
        "{msg}"
    );
}
