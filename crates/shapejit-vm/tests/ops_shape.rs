//! Shape ops (reshape, flatten, transpose, squeeze, unsqueeze, slice, expand,
//! identity, shape, size, constant_of_shape) against naive index mappings, on
//! strided inputs; `run` also checks each `view` layout reads the same values.

mod ops_support;
use ops_support::*;
use shapejit_ir::{DType, Op, Tensor};
use shapejit_vm::ops::OpError;

fn ints(v: &[i64]) -> Host {
    Host::from_vals(v, &[v.len()])
}

#[test]
fn reshape_and_flatten_keep_row_major_order() {
    let mut rng = Rng::new(20);
    for case in 0..30 {
        let x = Host::f32(&mut rng, &[2, 3, 4], KINDS[case % 3]);
        let (target, want): (Vec<i64>, Vec<usize>) = match case % 5 {
            0 => (vec![6, 4], vec![6, 4]),
            1 => (vec![-1, 2], vec![12, 2]),
            2 => (vec![0, -1], vec![2, 12]),
            3 => (vec![24], vec![24]),
            _ => (vec![1, 2, 1, 12], vec![1, 2, 1, 12]),
        };
        let out = run(&Op::Reshape { allowzero: false }, &[&x, &ints(&target)]).unwrap();
        assert_eq!(out[0].ty.shape.as_slice(), want.as_slice());
        assert_exact("reshape", &out[0].vals, &x.vals);
        let axis = (case % 4) as i64 - 1;
        let out = run(&Op::Flatten { axis }, &[&x]).unwrap();
        let a = if axis < 0 { 2 } else { axis as usize };
        let s = [2usize, 3, 4];
        assert_eq!(
            out[0].ty.shape.as_slice(),
            &[s[..a].iter().product::<usize>(), s[a..].iter().product()]
        );
        assert_exact("flatten", &out[0].vals, &x.vals);
    }
    let x = Host::f32(&mut rng, &[0, 3], Kind::Contiguous);
    let out = run(&Op::Reshape { allowzero: true }, &[&x, &ints(&[3, 0])]).unwrap();
    assert_eq!(out[0].ty.shape.as_slice(), &[3, 0]);
}

#[test]
fn contiguous_reshape_is_a_view() {
    let mut rng = Rng::new(21);
    let x = Host::f32(&mut rng, &[2, 6], Kind::Contiguous);
    let target = ints(&[3, 4]);
    let refs = [x.as_ref(), target.as_ref()];
    let l = shapejit_vm::ops::view(&Op::Reshape { allowzero: false }, &refs)
        .unwrap()
        .unwrap();
    assert_eq!(l.shape.as_slice(), &[3, 4]);
    let t = Host::f32(&mut rng, &[2, 6], Kind::Strided);
    let refs = [t.as_ref(), target.as_ref()];
    if !t.layout.is_contiguous() {
        assert!(shapejit_vm::ops::view(&Op::Reshape { allowzero: false }, &refs).is_none());
    }
}

#[test]
fn transpose_squeeze_unsqueeze_identity() {
    let mut rng = Rng::new(22);
    for case in 0..30 {
        let shape = rng.shape(4, 4, case % 6 == 0);
        let x = Host::f32(&mut rng, &shape, KINDS[case % 3]);
        let mut perm: Vec<usize> = (0..4).collect();
        for i in (1..4).rev() {
            perm.swap(i, rng.range(0, i + 1));
        }
        let out = run(&Op::Transpose { perm: perm.clone() }, &[&x]).unwrap();
        let oshape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        assert_eq!(out[0].ty.shape.as_slice(), oshape.as_slice());
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| {
                let o = unravel(f, &oshape);
                let mut i = [0; 4];
                for d in 0..4 {
                    i[perm[d]] = o[d];
                }
                x.vals[i.iter().zip(&shape).fold(0, |acc, (&v, &n)| acc * n + v)]
            })
            .collect();
        assert_exact("transpose", &out[0].vals, &want);
        let out = run(&Op::Identity, &[&x]).unwrap();
        assert_exact("identity", &out[0].vals, &x.vals);
    }
    let x = Host::f32(&mut rng, &[1, 3, 1, 2], Kind::Strided);
    let out = run(&Op::Squeeze { axes: vec![] }, &[&x]).unwrap();
    assert_eq!(out[0].ty.shape.as_slice(), &[3, 2]);
    assert_exact("squeeze", &out[0].vals, &x.vals);
    let out = run(&Op::Squeeze { axes: vec![-2] }, &[&x]).unwrap();
    assert_eq!(out[0].ty.shape.as_slice(), &[1, 3, 2]);
    let out = run(
        &Op::Unsqueeze {
            axes: vec![0, -1, 3],
        },
        &[&x],
    )
    .unwrap();
    assert_eq!(out[0].ty.shape.as_slice(), &[1, 1, 3, 1, 1, 2, 1]);
    assert_exact("unsqueeze", &out[0].vals, &x.vals);
    assert!(matches!(
        run(&Op::Squeeze { axes: vec![1] }, &[&x]),
        Err(OpError::Shape { op: "squeeze", .. })
    ));
    assert!(matches!(
        run(
            &Op::Transpose {
                perm: vec![0, 0, 1, 2]
            },
            &[&x]
        ),
        Err(OpError::Shape { .. })
    ));
    assert!(matches!(
        run(&Op::Unsqueeze { axes: vec![9] }, &[&x]),
        Err(OpError::Shape { .. })
    ));
}

/// ONNX slice indices of one axis, by stepping (independent of the clamping math).
fn slice_indices(d: usize, start: i64, end: i64, step: i64) -> Vec<usize> {
    if d == 0 {
        return Vec::new();
    }
    let d = d as i64;
    let fix = |v: i64| if v < 0 { v + d } else { v };
    let (mut s, mut e) = (fix(start), fix(end));
    if step > 0 {
        s = s.clamp(0, d);
        e = e.clamp(0, d);
    } else {
        // ONNX: start clamps to [0, d-1] for negative steps (NumPy would give empty)
        s = s.clamp(0, d - 1);
        e = e.clamp(-1, d - 1);
    }
    let mut res = Vec::new();
    let mut v = s;
    while (step > 0 && v < e) || (step < 0 && v > e) {
        if (0..d).contains(&v) {
            res.push(v as usize);
        }
        v += step;
    }
    res
}

#[test]
fn slice_with_negative_and_clamped_bounds() {
    let mut rng = Rng::new(23);
    for case in 0..80 {
        let shape = rng.shape(3, 6, case % 9 == 0);
        let x = Host::f32(&mut rng, &shape, KINDS[case % 3]);
        let n_axes = rng.range(1, 4);
        let mut axes: Vec<i64> = vec![0, 1, 2];
        for i in (1..3).rev() {
            axes.swap(i, rng.range(0, i + 1));
        }
        axes.truncate(n_axes);
        let pick = |r: &mut Rng| match r.range(0, 6) {
            0 => i64::MAX,
            1 => i64::MIN,
            _ => r.range(0, 17) as i64 - 8,
        };
        let starts: Vec<i64> = (0..n_axes).map(|_| pick(&mut rng)).collect();
        let ends: Vec<i64> = (0..n_axes).map(|_| pick(&mut rng)).collect();
        let steps: Vec<i64> = (0..n_axes)
            .map(|_| [-3, -2, -1, 1, 2, 3][rng.range(0, 6)])
            .collect();
        let axes_signed: Vec<i64> = axes
            .iter()
            .map(|&a| if rng.bool() { a - 3 } else { a })
            .collect();
        let op = Op::Slice {
            starts: starts.clone(),
            ends: ends.clone(),
            axes: axes_signed,
            steps: steps.clone(),
        };
        let out = run(&op, &[&x]).unwrap();
        let mut per_axis: Vec<Vec<usize>> = shape.iter().map(|&d| (0..d).collect()).collect();
        for i in 0..n_axes {
            per_axis[axes[i] as usize] =
                slice_indices(shape[axes[i] as usize], starts[i], ends[i], steps[i]);
        }
        let oshape: Vec<usize> = per_axis.iter().map(|v| v.len()).collect();
        assert_eq!(
            out[0].ty.shape.as_slice(),
            oshape.as_slice(),
            "{op:?} on {shape:?}"
        );
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| {
                let o = unravel(f, &oshape);
                let idx: Vec<usize> = (0..3).map(|d| per_axis[d][o[d]]).collect();
                x.vals[(idx[0] * shape[1] + idx[1]) * shape[2] + idx[2]]
            })
            .collect();
        assert_exact("slice", &out[0].vals, &want);
    }
    let x = Host::f32(&mut rng, &[3], Kind::Contiguous);
    let zero_step = Op::Slice {
        starts: vec![0],
        ends: vec![3],
        axes: vec![0],
        steps: vec![0],
    };
    assert!(matches!(
        run(&zero_step, &[&x]),
        Err(OpError::Value { op: "slice", .. })
    ));
}

#[test]
fn expand_broadcasts_both_ways() {
    let mut rng = Rng::new(24);
    for case in 0..20 {
        let (out_shape, shapes) = broadcast_shapes(&mut rng, 2);
        let x = Host::f32(&mut rng, &shapes[0], KINDS[case % 3]);
        let target: Vec<i64> = shapes[1].iter().map(|&d| d as i64).collect();
        let out = run(&Op::Expand, &[&x, &ints(&target)]).unwrap();
        assert_eq!(out[0].ty.shape.as_slice(), out_shape.as_slice());
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| x.vals[ravel_broadcast(&unravel(f, &out_shape), x.shape())])
            .collect();
        assert_exact("expand", &out[0].vals, &want);
    }
    let x = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    assert!(matches!(
        run(&Op::Expand, &[&x, &ints(&[4, 3])]),
        Err(OpError::Shape { op: "expand", .. })
    ));
}

#[test]
fn shape_size_constant_of_shape() {
    let mut rng = Rng::new(25);
    let x = Host::f32(&mut rng, &[2, 0, 5, 7], Kind::Strided);
    let out = run(
        &Op::Shape {
            start: 0,
            end: None,
        },
        &[&x],
    )
    .unwrap();
    assert_eq!(out[0].ty.dtype, DType::I64);
    assert_exact("shape", &out[0].vals, &[2.0, 0.0, 5.0, 7.0]);
    let out = run(
        &Op::Shape {
            start: -3,
            end: Some(-1),
        },
        &[&x],
    )
    .unwrap();
    assert_exact("shape -3..-1", &out[0].vals, &[0.0, 5.0]);
    let out = run(
        &Op::Shape {
            start: 3,
            end: Some(1),
        },
        &[&x],
    )
    .unwrap();
    assert_eq!(out[0].ty.shape.as_slice(), &[0]);
    let out = run(&Op::Size, &[&x]).unwrap();
    assert!(out[0].ty.shape.is_empty());
    assert_exact("size", &out[0].vals, &[0.0]);
    let y = Host::f32(&mut rng, &[3, 4], Kind::Strided);
    assert_exact("size", &run(&Op::Size, &[&y]).unwrap()[0].vals, &[12.0]);
    for (value, want) in [
        (Tensor::scalar(2.5f32), 2.5),
        (Tensor::scalar(-3i64), -3.0),
        (Tensor::scalar(true), 1.0),
    ] {
        let dtype = value.dtype();
        let op = Op::ConstantOfShape { value };
        let out = run(&op, &[&ints(&[2, 3])]).unwrap();
        assert_eq!(out[0].ty.dtype, dtype);
        assert_exact("constant_of_shape", &out[0].vals, &[want; 6]);
    }
    let op = Op::ConstantOfShape {
        value: Tensor::scalar(1f32),
    };
    assert!(matches!(
        run(&op, &[&ints(&[2, -1])]),
        Err(OpError::Value { .. })
    ));
    let e = run(&op, &[&y]).err().unwrap();
    assert!(matches!(e, OpError::DType { .. }), "{e}");
}

#[test]
fn reshape_errors() {
    let mut rng = Rng::new(26);
    let x = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let op = Op::Reshape { allowzero: false };
    assert!(matches!(
        run(&op, &[&x, &ints(&[4, 2])]),
        Err(OpError::Value { op: "reshape", .. })
    ));
    assert!(matches!(
        run(&op, &[&x, &ints(&[-1, -1])]),
        Err(OpError::Value { .. })
    ));
    assert!(matches!(
        run(&op, &[&x, &ints(&[5, -1])]),
        Err(OpError::Value { .. })
    ));
    assert!(matches!(
        run(&op, &[&x, &ints(&[0, 0, 0])]),
        Err(OpError::Value { .. })
    ));
    assert!(matches!(run(&op, &[&x, &x]), Err(OpError::DType { .. })));
    assert!(matches!(run(&op, &[&x]), Err(OpError::Arity { .. })));
}
