//! concat, split, gather, pad, tile and range against naive index loops on
//! strided inputs, with size-1 and zero-size dims and the error cases.

mod ops_support;
use ops_support::*;
use shapejit_ir::{DType, Op};
use shapejit_vm::ops::OpError;

fn flat(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&v, &n)| acc * n + v)
}

#[test]
fn concat_and_split_round_trip() {
    let mut rng = Rng::new(40);
    for case in 0..30 {
        let rank = rng.range(1, 4);
        let base = rng.shape(rank, 4, false);
        let axis = rng.range(0, rank);
        let n_in = rng.range(1, 4);
        let parts: Vec<Host> = (0..n_in)
            .map(|i| {
                let mut s = base.clone();
                s[axis] = rng.range(if case % 5 == 0 { 0 } else { 1 }, 4);
                Host::f32(&mut rng, &s, KINDS[(case + i) % 3])
            })
            .collect();
        let refs: Vec<&Host> = parts.iter().collect();
        let signed = axis as i64 - if case % 2 == 0 { rank as i64 } else { 0 };
        let out = run(&Op::Concat { axis: signed }, &refs).unwrap();
        let mut oshape = base.clone();
        oshape[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
        assert_eq!(out[0].ty.shape.as_slice(), oshape.as_slice());
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| {
                let mut idx = unravel(f, &oshape);
                let mut k = 0;
                while idx[axis] >= parts[k].shape()[axis] {
                    idx[axis] -= parts[k].shape()[axis];
                    k += 1;
                }
                parts[k].vals[flat(&idx, parts[k].shape())]
            })
            .collect();
        assert_exact("concat", &out[0].vals, &want);
        // split the concatenation back (from a strided copy of it)
        let sizes: Vec<i64> = parts.iter().map(|p| p.shape()[axis] as i64).collect();
        let vals: Vec<f32> = out[0].vals.iter().map(|&v| v as f32).collect();
        let joined = Host::f32_with(&mut rng, &vals, &oshape, KINDS[case % 3]);
        let outs = run(
            &Op::Split {
                axis: signed,
                sizes,
            },
            &[&joined],
        )
        .unwrap();
        for (o, p) in outs.iter().zip(&parts) {
            assert_eq!(o.ty.shape.as_slice(), p.shape());
            assert_exact("split", &o.vals, &p.vals);
        }
    }
    let mut rng = Rng::new(41);
    let a = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let b = Host::f32(&mut rng, &[3, 3], Kind::Contiguous);
    let i = Host::random(&mut rng, &[2, 3], Kind::Contiguous, |r| {
        r.range(0, 3) as i64
    });
    assert!(matches!(
        run(&Op::Concat { axis: 1 }, &[&a, &b]),
        Err(OpError::Shape { op: "concat", .. })
    ));
    assert!(matches!(
        run(&Op::Concat { axis: 0 }, &[&a, &i]),
        Err(OpError::DType { op: "concat", .. })
    ));
    assert!(matches!(
        run(&Op::Concat { axis: 0 }, &[]),
        Err(OpError::Arity { .. })
    ));
    assert!(matches!(
        run(
            &Op::Split {
                axis: 1,
                sizes: vec![1, 1]
            },
            &[&a]
        ),
        Err(OpError::Value { op: "split", .. })
    ));
}

#[test]
fn gather_with_negative_indices() {
    let mut rng = Rng::new(42);
    for case in 0..40 {
        let rank = rng.range(1, 4);
        let shape = rng.shape(rank, 5, false);
        let data = Host::f32(&mut rng, &shape, KINDS[case % 3]);
        let axis = rng.range(0, rank);
        let d = shape[axis] as i64;
        let irank = rng.range(0, 3);
        let ishape = rng.shape(irank, 3, case % 7 == 0);
        let idx = if case % 2 == 0 {
            Host::random(&mut rng, &ishape, KINDS[(case + 1) % 3], |r| {
                r.range(0, 2 * d as usize) as i64 - d
            })
        } else {
            Host::random(&mut rng, &ishape, KINDS[(case + 1) % 3], |r| {
                (r.range(0, 2 * d as usize) as i64 - d) as i32
            })
        };
        let out = run(&Op::Gather { axis: axis as i64 }, &[&data, &idx]).unwrap();
        let oshape: Vec<usize> = shape[..axis]
            .iter()
            .chain(&ishape)
            .chain(&shape[axis + 1..])
            .copied()
            .collect();
        assert_eq!(out[0].ty.shape.as_slice(), oshape.as_slice());
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| {
                let o = unravel(f, &oshape);
                let j = flat(&o[axis..axis + irank], &ishape);
                let mut i = idx.vals[j] as i64;
                if i < 0 {
                    i += d;
                }
                let src: Vec<usize> = o[..axis]
                    .iter()
                    .copied()
                    .chain([i as usize])
                    .chain(o[axis + irank..].iter().copied())
                    .collect();
                data.vals[flat(&src, &shape)]
            })
            .collect();
        assert_exact("gather", &out[0].vals, &want);
    }
    let data = Host::f32(&mut rng, &[3, 2], Kind::Contiguous);
    let bad = Host::from_vals(&[0i64, 3], &[2]);
    let e = run(&Op::Gather { axis: 0 }, &[&data, &bad]).err().unwrap();
    assert!(
        matches!(e, OpError::Value { op: "gather", .. }) && e.to_string().contains('3'),
        "{e}"
    );
    let fidx = Host::from_vals(&[0f32], &[1]);
    assert!(matches!(
        run(&Op::Gather { axis: 0 }, &[&data, &fidx]),
        Err(OpError::DType { input: 1, .. })
    ));
}

#[test]
fn pad_with_positive_and_negative_pads() {
    let mut rng = Rng::new(43);
    for case in 0..40 {
        let rank = rng.range(1, 4);
        let shape = rng.shape(rank, 5, case % 8 == 0);
        let x = Host::random(&mut rng, &shape, KINDS[case % 3], |r| {
            r.range(1, 100) as i64
        });
        let pads: Vec<i64> = (0..2 * rank)
            .map(|i| {
                let d = shape[i % rank] as i64;
                (rng.range(0, 4) as i64 - 1).max(-d / 2)
            })
            .collect();
        let out = run(
            &Op::Pad {
                pads: pads.clone(),
                value: -7.0,
            },
            &[&x],
        )
        .unwrap();
        let oshape: Vec<usize> = (0..rank)
            .map(|i| (shape[i] as i64 + pads[i] + pads[rank + i]) as usize)
            .collect();
        assert_eq!(out[0].ty.shape.as_slice(), oshape.as_slice());
        assert_eq!(out[0].ty.dtype, DType::I64);
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| {
                let o = unravel(f, &oshape);
                let src: Option<Vec<usize>> = (0..rank)
                    .map(|i| {
                        let s = o[i] as i64 - pads[i];
                        (0..shape[i] as i64).contains(&s).then_some(s as usize)
                    })
                    .collect();
                src.map_or(-7.0, |s| x.vals[flat(&s, &shape)])
            })
            .collect();
        assert_exact(&format!("pad {pads:?} {shape:?}"), &out[0].vals, &want);
    }
    let x = Host::f32(&mut rng, &[2, 2], Kind::Contiguous);
    assert!(matches!(
        run(
            &Op::Pad {
                pads: vec![0, 0, -3, 0],
                value: 0.0
            },
            &[&x]
        ),
        Err(OpError::Value { .. })
    ));
    assert!(matches!(
        run(
            &Op::Pad {
                pads: vec![0, 0],
                value: 0.0
            },
            &[&x]
        ),
        Err(OpError::Shape { .. })
    ));
}

#[test]
fn tile_repeats_each_axis() {
    let mut rng = Rng::new(44);
    for case in 0..30 {
        let rank = rng.range(1, 4);
        let shape = rng.shape(rank, 4, case % 9 == 0);
        let x = Host::random(&mut rng, &shape, KINDS[case % 3], |r| r.bool());
        let reps: Vec<i64> = (0..rank)
            .map(|_| rng.range(if case % 6 == 0 { 0 } else { 1 }, 4) as i64)
            .collect();
        let out = run(&Op::Tile, &[&x, &Host::from_vals(&reps, &[rank])]).unwrap();
        let oshape: Vec<usize> = shape
            .iter()
            .zip(&reps)
            .map(|(&d, &r)| d * r as usize)
            .collect();
        assert_eq!(out[0].ty.shape.as_slice(), oshape.as_slice());
        let want: Vec<f64> = (0..out[0].vals.len())
            .map(|f| {
                let o = unravel(f, &oshape);
                let s: Vec<usize> = o.iter().zip(&shape).map(|(&v, &d)| v % d).collect();
                x.vals[flat(&s, &shape)]
            })
            .collect();
        assert_exact("tile", &out[0].vals, &want);
    }
    let x = Host::f32(&mut rng, &[2, 2], Kind::Contiguous);
    assert!(matches!(
        run(&Op::Tile, &[&x, &Host::from_vals(&[2i64], &[1])]),
        Err(OpError::Value { op: "tile", .. })
    ));
    assert!(matches!(
        run(&Op::Tile, &[&x, &Host::from_vals(&[2i64, -1], &[2])]),
        Err(OpError::Value { .. })
    ));
}

#[test]
fn range_in_every_dtype() {
    let scalar_f = |v: f32| Host::from_vals(&[v], &[]);
    let out = run(
        &Op::Range,
        &[&scalar_f(1.0), &scalar_f(2.0), &scalar_f(0.25)],
    )
    .unwrap();
    assert_exact("range f32", &out[0].vals, &[1.0, 1.25, 1.5, 1.75]);
    let out = run(
        &Op::Range,
        &[&scalar_f(1.0), &scalar_f(-1.0), &scalar_f(-0.75)],
    )
    .unwrap();
    assert_exact("range f32 down", &out[0].vals, &[1.0, 0.25, -0.5]);
    let scalar_i = |v: i64| Host::from_vals(&[v], &[]);
    for (s, l, d) in [
        (0i64, 7i64, 3i64),
        (10, 0, -4),
        (5, 5, 1),
        (5, 0, 1),
        (-3, 3, 2),
    ] {
        let out = run(&Op::Range, &[&scalar_i(s), &scalar_i(l), &scalar_i(d)]).unwrap();
        let mut want = Vec::new();
        let mut v = s;
        while (d > 0 && v < l) || (d < 0 && v > l) {
            want.push(v as f64);
            v += d;
        }
        assert_eq!(out[0].ty.dtype, DType::I64);
        assert_exact(&format!("range {s} {l} {d}"), &out[0].vals, &want);
    }
    let scalar_i32 = |v: i32| Host::from_vals(&[v], &[]);
    let out = run(
        &Op::Range,
        &[&scalar_i32(2), &scalar_i32(-4), &scalar_i32(-3)],
    )
    .unwrap();
    assert_exact("range i32", &out[0].vals, &[2.0, -1.0]);
    let e = run(&Op::Range, &[&scalar_i(0), &scalar_i(3), &scalar_i(0)])
        .err()
        .unwrap();
    assert!(matches!(e, OpError::Value { op: "range", .. }), "{e}");
    assert!(matches!(
        run(&Op::Range, &[&scalar_i(0), &scalar_f(3.0), &scalar_i(1)]),
        Err(OpError::DType { .. })
    ));
    assert!(matches!(
        run(
            &Op::Range,
            &[&scalar_i(0), &scalar_i(i64::MAX), &scalar_i(1)]
        ),
        Err(OpError::Value { .. })
    ));
}

#[test]
fn cumulative_runs_along_any_axis_of_strided_inputs() {
    let mut rng = Rng::new(61);
    for case in 0..12 {
        let rank = rng.range(1, 4);
        let shape = rng.shape(rank, 5, false);
        let x = Host::random(&mut rng, &shape, KINDS[case % 3], |r| {
            r.range(0, 7) as i64 - 3
        });
        let axis = rng.range(0, rank);
        let (product, exclusive, reverse) = (case % 2 == 1, case % 3 == 1, case % 4 >= 2);
        let op = Op::Cumulative {
            product,
            exclusive,
            reverse,
        };
        let a = Host::from_vals(&[axis as i64 - rank as i64], &[1]);
        let out = run(&op, &[&x, &a]).unwrap();
        let want: Vec<f64> = (0..x.vals.len())
            .map(|f| {
                let idx = unravel(f, &shape);
                let mut acc = if product { 1.0 } else { 0.0 };
                for k in 0..shape[axis] {
                    let before = if reverse {
                        k > idx[axis]
                    } else {
                        k < idx[axis]
                    };
                    if before || (!exclusive && k == idx[axis]) {
                        let mut j = idx.clone();
                        j[axis] = k;
                        let v = x.vals[j.iter().zip(&shape).fold(0, |o, (&i, &n)| o * n + i)];
                        acc = if product { acc * v } else { acc + v };
                    }
                }
                acc
            })
            .collect();
        assert_eq!(out[0].ty.shape.as_slice(), shape.as_slice());
        assert_exact(
            &format!("{op:?} axis {axis} on {shape:?}"),
            &out[0].vals,
            &want,
        );
    }
    let x = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let far = Host::from_vals(&[2i64], &[1]);
    let op = Op::Cumulative {
        product: false,
        exclusive: false,
        reverse: false,
    };
    assert!(matches!(run(&op, &[&x, &far]), Err(OpError::Shape { .. })));
}

#[test]
fn top_k_keeps_the_extremes_with_stable_ties() {
    let mut rng = Rng::new(62);
    for case in 0..12 {
        let rank = rng.range(1, 4);
        let shape = rng.shape(rank, 5, false);
        // few distinct values, so ties are common
        let x = Host::random(&mut rng, &shape, KINDS[case % 3], |r| r.range(0, 4) as f32);
        let axis = rng.range(0, rank);
        let k = rng.range(0, shape[axis] + 1);
        let largest = case % 2 == 0;
        let op = Op::TopK {
            axis: axis as i64 - if case % 3 == 0 { rank as i64 } else { 0 },
            largest,
        };
        let kt = Host::from_vals(&[k as i64], &[1]);
        let out = run(&op, &[&x, &kt]).unwrap();
        let mut want_shape = shape.clone();
        want_shape[axis] = k;
        assert_eq!(out[0].ty.shape.as_slice(), want_shape.as_slice());
        assert_eq!(out[1].ty.dtype, DType::I64);
        for f in 0..out[0].vals.len() {
            let idx = unravel(f, &want_shape);
            // the naive rank: the r-th of the line ordered by value, then index
            let mut line: Vec<(f64, usize)> = (0..shape[axis])
                .map(|j| {
                    let mut at = idx.clone();
                    at[axis] = j;
                    (x.vals[flat(&at, &shape)], j)
                })
                .collect();
            line.sort_by(|a, b| {
                let o = a.0.partial_cmp(&b.0).unwrap();
                (if largest { o.reverse() } else { o }).then(a.1.cmp(&b.1))
            });
            let (v, j) = line[idx[axis]];
            assert_eq!(
                (out[0].vals[f], out[1].vals[f]),
                (v, j as f64),
                "{op:?} {shape:?}"
            );
        }
    }
    let x = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let too_many = Host::from_vals(&[4i64], &[1]);
    let op = Op::TopK {
        axis: 1,
        largest: true,
    };
    assert!(matches!(
        run(&op, &[&x, &too_many]),
        Err(OpError::Value { .. })
    ));
}
