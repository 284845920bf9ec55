//! Reductions, softmax/log_softmax, layer_norm, batch_norm and global_avg_pool
//! against naive f64 loops on random shapes and strided inputs.

mod ops_support;
use ops_support::*;
use shapejit_ir::{DType, Op, ReduceOp};
use shapejit_vm::ops::OpError;

/// op.rs: sum/mean/prod 1e-5 relative; max/min exact.
const REDUCE_REL: f64 = 1e-5;
/// op.rs: softmax 1e-6 absolute, log_softmax 1e-5 absolute.
const SOFTMAX_ABS: f64 = 1e-6;
const LOG_SOFTMAX_ABS: f64 = 1e-5;
/// op.rs: layer_norm 1e-5 relative (plus the same absolute floor for results near 0).
const LAYER_NORM_REL: f64 = 1e-5;

/// Naive reduction: for every output index, fold the input elements that map to it.
fn reduce_ref(x: &Host, flags: &[bool], keepdims: bool, r: ReduceOp) -> (Vec<usize>, Vec<f64>) {
    let shape = x.shape();
    let kept: Vec<usize> = shape
        .iter()
        .zip(flags)
        .filter(|(_, f)| !**f)
        .map(|(&d, _)| d)
        .collect();
    let n_out: usize = kept.iter().product();
    let mut acc: Vec<Vec<f64>> = vec![Vec::new(); n_out];
    for (i, &v) in x.vals.iter().enumerate() {
        let idx = unravel(i, shape);
        let o = idx
            .iter()
            .zip(flags)
            .zip(shape)
            .filter(|((_, f), _)| !**f)
            .fold(0, |a, ((&v, _), &n)| a * n + v);
        acc[o].push(v);
    }
    let vals = acc
        .iter()
        .map(|v| match r {
            ReduceOp::Sum => v.iter().sum(),
            ReduceOp::Mean => v.iter().sum::<f64>() / v.len() as f64,
            ReduceOp::Prod => v.iter().product(),
            ReduceOp::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ReduceOp::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
        })
        .collect();
    let out_shape = if keepdims {
        shape
            .iter()
            .zip(flags)
            .map(|(&d, &f)| if f { 1 } else { d })
            .collect()
    } else {
        kept
    };
    (out_shape, vals)
}

#[test]
fn reductions_over_random_axes() {
    let mut rng = Rng::new(30);
    for r in [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
    ] {
        for case in 0..24 {
            let rank = rng.range(1, 5);
            let zero_ok = case % 8 == 0 && !matches!(r, ReduceOp::Mean);
            let shape = rng.shape(rank, 5, zero_ok);
            let int = case % 4 == 3;
            let x = if int {
                Host::random(&mut rng, &shape, KINDS[case % 3], |r| {
                    r.range(0, 7) as i64 - 3
                })
            } else {
                Host::random(&mut rng, &shape, KINDS[case % 3], |r| {
                    r.f32(0.5, 1.5) * if r.bool() { 1.0 } else { -1.0 }
                })
            };
            let axes: Vec<i64> = if case % 5 == 0 {
                vec![]
            } else {
                let picked: Vec<i64> = (0..rank as i64).filter(|_| rng.bool()).collect();
                picked
                    .into_iter()
                    .map(|a| if rng.bool() { a - rank as i64 } else { a })
                    .collect()
            };
            let flags: Vec<bool> = (0..rank)
                .map(|d| {
                    axes.is_empty() || axes.iter().any(|&a| (a + rank as i64) as usize % rank == d)
                })
                .collect();
            let keepdims = case % 2 == 0;
            let op = Op::Reduce {
                op: r,
                axes: axes.clone(),
                keepdims,
            };
            let out = run(&op, &[&x]).unwrap();
            let (shape_want, mut want) = reduce_ref(&x, &flags, keepdims, r);
            if int && r == ReduceOp::Mean {
                want = want.iter().map(|v| v.trunc()).collect();
            }
            assert_eq!(
                out[0].ty.shape.as_slice(),
                shape_want.as_slice(),
                "{op:?} on {shape:?}"
            );
            assert_eq!(out[0].ty.dtype, if int { DType::I64 } else { DType::F32 });
            let rel = if matches!(r, ReduceOp::Max | ReduceOp::Min) || int {
                0.0
            } else {
                REDUCE_REL
            };
            assert_close(
                &format!("{op:?} on {shape:?}"),
                &out[0].vals,
                &want,
                0.0,
                rel,
            );
            // the same reduction with the axes as a run-time input
            let axes_t = Host::from_vals(&axes, &[axes.len()]);
            let dyn_op = Op::DynReduce {
                op: r,
                keepdims,
                noop_with_empty_axes: false,
            };
            let dyn_out = run(&dyn_op, &[&x, &axes_t]).unwrap();
            assert_eq!(dyn_out[0].ty, out[0].ty, "{dyn_op:?} on {shape:?}");
            assert_close(&format!("{dyn_op:?}"), &dyn_out[0].vals, &want, 0.0, rel);
            if axes.is_empty() {
                let noop = Op::DynReduce {
                    op: r,
                    keepdims,
                    noop_with_empty_axes: true,
                };
                let same = run(&noop, &[&x, &axes_t]).unwrap();
                assert_eq!(same[0].ty.shape.as_slice(), shape.as_slice());
                assert_close("noop", &same[0].vals, &x.vals, 0.0, 0.0);
            }
        }
    }
    let x = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let dup = Op::Reduce {
        op: ReduceOp::Sum,
        axes: vec![1, -1],
        keepdims: false,
    };
    assert!(matches!(run(&dup, &[&x]), Err(OpError::Shape { .. })));
    let far = Op::Reduce {
        op: ReduceOp::Sum,
        axes: vec![2],
        keepdims: false,
    };
    assert!(matches!(run(&far, &[&x]), Err(OpError::Shape { .. })));
    let b = Host::random(&mut rng, &[2], Kind::Contiguous, |r| r.bool());
    assert!(matches!(run(&far, &[&b]), Err(OpError::DType { .. })));
}

#[test]
fn softmax_and_log_softmax_on_any_axis() {
    let mut rng = Rng::new(31);
    for case in 0..40 {
        let rank = rng.range(1, 4);
        let shape = rng.shape(rank, 7, case % 10 == 0);
        let x = Host::random(&mut rng, &shape, KINDS[case % 3], |r| r.f32(-20.0, 20.0));
        let axis = rng.range(0, rank) as i64 - if case % 2 == 0 { rank as i64 } else { 0 };
        let a = (axis + rank as i64) as usize % rank;
        for log in [false, true] {
            let op = if log {
                Op::LogSoftmax { axis }
            } else {
                Op::Softmax { axis }
            };
            let out = run(&op, &[&x]).unwrap();
            let want: Vec<f64> = (0..x.vals.len())
                .map(|f| {
                    let idx = unravel(f, &shape);
                    let row: Vec<f64> = (0..shape[a])
                        .map(|j| {
                            let mut k = idx.clone();
                            k[a] = j;
                            x.vals[k.iter().zip(&shape).fold(0, |acc, (&v, &n)| acc * n + v)]
                        })
                        .collect();
                    let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let lse = row.iter().map(|v| (v - m).exp()).sum::<f64>().ln() + m;
                    if log {
                        x.vals[f] - lse
                    } else {
                        (x.vals[f] - lse).exp()
                    }
                })
                .collect();
            let abs = if log { LOG_SOFTMAX_ABS } else { SOFTMAX_ABS };
            assert_close(
                &format!("{op:?} on {shape:?}"),
                &out[0].vals,
                &want,
                abs,
                0.0,
            );
        }
    }
    let x = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    assert!(matches!(
        run(&Op::Softmax { axis: 2 }, &[&x]),
        Err(OpError::Shape { op: "softmax", .. })
    ));
}

#[test]
fn layer_norm_matches_reference() {
    let mut rng = Rng::new(32);
    for case in 0..30 {
        let rank = rng.range(1, 4);
        let shape = rng.shape(rank, 6, case % 10 == 0);
        let x = Host::random(&mut rng, &shape, KINDS[case % 3], |r| r.f32(-3.0, 5.0));
        let a = rng.range(0, rank);
        let normalized = &shape[a..];
        // scale/bias: the normalized shape, with leading dims dropped or set to 1
        let pshape: Vec<usize> = normalized[rng.range(0, normalized.len() + 1)..]
            .iter()
            .map(|&d| if rng.range(0, 3) == 0 { 1 } else { d })
            .collect();
        let scale = Host::f32(&mut rng, &pshape, KINDS[(case + 1) % 3]);
        let bias = Host::f32(&mut rng, &pshape, KINDS[(case + 2) % 3]);
        let eps = 1e-5f32;
        let op = Op::LayerNorm {
            axis: a as i64 - if case % 2 == 0 { rank as i64 } else { 0 },
            epsilon: eps,
        };
        let with_bias = case % 3 != 0;
        let inputs: Vec<&Host> = if with_bias {
            vec![&x, &scale, &bias]
        } else {
            vec![&x, &scale]
        };
        let out = run(&op, &inputs).unwrap();
        let n: usize = normalized.iter().product();
        let want: Vec<f64> = (0..x.vals.len())
            .map(|f| {
                let row = f / n.max(1) * n;
                let vals = &x.vals[row..row + n];
                let mean = vals.iter().sum::<f64>() / n as f64;
                let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
                let idx = unravel(f % n, normalized);
                let s = scale.vals[ravel_broadcast(&idx, &pshape)];
                let b = if with_bias {
                    bias.vals[ravel_broadcast(&idx, &pshape)]
                } else {
                    0.0
                };
                (x.vals[f] - mean) / (var + eps as f64).sqrt() * s + b
            })
            .collect();
        assert_close(
            &format!("{op:?} {shape:?} {pshape:?}"),
            &out[0].vals,
            &want,
            LAYER_NORM_REL,
            LAYER_NORM_REL,
        );
    }
    let x = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let bad = Host::f32(&mut rng, &[2], Kind::Contiguous);
    let op = Op::LayerNorm {
        axis: -1,
        epsilon: 1e-5,
    };
    assert!(matches!(
        run(&op, &[&x, &bad]),
        Err(OpError::Shape {
            op: "layer_norm",
            ..
        })
    ));
}
