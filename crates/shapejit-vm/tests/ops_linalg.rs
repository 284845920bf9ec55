//! matmul, matmul_bias and gemm against naive f64 loops, over random shapes (rank-1
//! promotion, broadcast batch dims, size-1 and zero-size dims) and strided
//! operands (transposed, sliced, reversed, broadcast).

mod ops_support;
use ops_support::*;
use shapejit_ir::Op;
use shapejit_vm::ops::OpError;

/// op.rs: matmul/gemm tolerance is 1e-5 relative to `sum |a||b|`.
const MATMUL_REL: f64 = 1e-5;

/// Naive NumPy matmul in f64: returns (shape, values, Σ|a||b| per element).
fn matmul_ref(a: &Host, b: &Host) -> (Vec<usize>, Vec<f64>, Vec<f64>) {
    let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
    let a2 = if sa.len() == 1 {
        vec![1, sa[0]]
    } else {
        sa.clone()
    };
    let b2 = if sb.len() == 1 {
        vec![sb[0], 1]
    } else {
        sb.clone()
    };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let rank = ba.len().max(bb.len());
    let batch: Vec<usize> = (0..rank)
        .map(|i| {
            let da = if i + ba.len() >= rank {
                ba[i + ba.len() - rank]
            } else {
                1
            };
            let db = if i + bb.len() >= rank {
                bb[i + bb.len() - rank]
            } else {
                1
            };
            da.max(db)
        })
        .collect();
    let nb: usize = batch.iter().product();
    let (mut vals, mut mags) = (Vec::new(), Vec::new());
    for bi in 0..nb {
        let bidx = unravel(bi, &batch);
        let ia = ravel_broadcast(&bidx, ba);
        let ib = ravel_broadcast(&bidx, bb);
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0.0, 0.0);
                for p in 0..k {
                    let x = a.vals[(ia * m + i) * k + p];
                    let y = b.vals[(ib * k + p) * n + j];
                    s += x * y;
                    mag += (x * y).abs();
                }
                vals.push(s);
                mags.push(mag);
            }
        }
    }
    let mut shape = batch;
    if sa.len() > 1 {
        shape.push(m);
    }
    if sb.len() > 1 {
        shape.push(n);
    }
    (shape, vals, mags)
}

fn assert_matmul_close(what: &str, got: &[f64], want: &[f64], mags: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..got.len() {
        let tol = MATMUL_REL * mags[i] + 1e-30;
        assert!(
            (got[i] - want[i]).abs() <= tol,
            "{what}: element {i}: got {}, want {}",
            got[i],
            want[i]
        );
    }
}

#[test]
fn matmul_matches_naive_loops() {
    let mut rng = Rng::new(10);
    for case in 0..120 {
        let (m, k, n) = (
            rng.range(1, 9),
            rng.range(if case % 10 == 0 { 0 } else { 1 }, 9),
            rng.range(1, 9),
        );
        let batch_rank = rng.range(0, 3);
        let batch: Vec<usize> = (0..batch_rank).map(|_| rng.range(1, 4)).collect();
        let mut sa: Vec<usize> = batch
            .iter()
            .map(|&d| if rng.bool() { 1 } else { d })
            .collect();
        let mut sb: Vec<usize> = batch[rng.range(0, batch_rank + 1)..].to_vec();
        sa.extend([m, k]);
        sb.extend([k, n]);
        if case % 7 == 0 {
            sa = vec![k];
        }
        if case % 11 == 0 {
            sb = vec![k];
        }
        let a = Host::f32(&mut rng, &sa, KINDS[case % 3]);
        let b = Host::f32(&mut rng, &sb, KINDS[(case / 3) % 3]);
        let out = run(&Op::MatMul, &[&a, &b]).unwrap();
        let (shape, want, mags) = matmul_ref(&a, &b);
        assert_eq!(
            out[0].ty.shape.as_slice(),
            shape.as_slice(),
            "{sa:?} @ {sb:?}"
        );
        assert_matmul_close(
            &format!("matmul {sa:?} @ {sb:?}"),
            &out[0].vals,
            &want,
            &mags,
        );
    }
}

#[test]
fn large_matmul_uses_real_strides() {
    // a transposed weight view, as a transformer's x @ W^T
    let mut rng = Rng::new(11);
    let a = Host::f32(&mut rng, &[3, 37, 64], Kind::Strided);
    let b = Host::f32(&mut rng, &[64, 50], Kind::Strided);
    let out = run(&Op::MatMul, &[&a, &b]).unwrap();
    let (_, want, mags) = matmul_ref(&a, &b);
    assert_matmul_close("large matmul", &out[0].vals, &want, &mags);
}

#[test]
fn matmul_bias_matches_naive_loops() {
    let mut rng = Rng::new(12);
    for case in 0..60 {
        let (m, k, n) = (rng.range(1, 9), rng.range(1, 9), rng.range(1, 9));
        let mut sa: Vec<usize> = (0..rng.range(0, 3)).map(|_| rng.range(1, 4)).collect();
        sa.extend([m, k]);
        if case % 7 == 0 {
            sa = vec![k];
        }
        let a = Host::f32(&mut rng, &sa, KINDS[case % 3]);
        let b = Host::f32(&mut rng, &[k, n], KINDS[(case / 3) % 3]);
        let bias = Host::f32(&mut rng, &[n], KINDS[(case / 9) % 3]);
        let out = run(&Op::MatMulBias, &[&a, &b, &bias]).unwrap();
        let (shape, product, mags) = matmul_ref(&a, &b);
        let want: Vec<f64> = product
            .iter()
            .enumerate()
            .map(|(i, p)| p + bias.vals[i % n])
            .collect();
        // the tolerance (op.rs) counts the bias's magnitude with the products'
        let mags: Vec<f64> = mags
            .iter()
            .enumerate()
            .map(|(i, m)| m + bias.vals[i % n].abs())
            .collect();
        assert_eq!(out[0].ty.shape.as_slice(), shape.as_slice(), "{sa:?}");
        let what = format!("matmul_bias {sa:?} @ [{k}, {n}]");
        assert_matmul_close(&what, &out[0].vals, &want, &mags);
    }
}

#[test]
fn matmul_bias_errors_name_the_bias() {
    let mut rng = Rng::new(13);
    let a = Host::f32(&mut rng, &[3, 4], Kind::Contiguous);
    let b = Host::f32(&mut rng, &[4, 5], Kind::Contiguous);
    for bad in [vec![4], vec![1, 5], vec![]] {
        let bias = Host::f32(&mut rng, &bad, Kind::Contiguous);
        let Err(err) = run(&Op::MatMulBias, &[&a, &b, &bias]) else {
            panic!("bias {bad:?} accepted");
        };
        assert!(
            matches!(&err, OpError::Shape { op: "matmul_bias", message } if message.contains("bias")),
            "{bad:?}: {err}"
        );
    }
    let vector = Host::f32(&mut rng, &[4], Kind::Contiguous);
    let bias = Host::f32(&mut rng, &[5], Kind::Contiguous);
    assert!(matches!(
        run(&Op::MatMulBias, &[&a, &vector, &bias]),
        Err(OpError::Shape {
            op: "matmul_bias",
            ..
        })
    ));
    assert!(matches!(
        run(&Op::MatMulBias, &[&a, &b]),
        Err(OpError::Arity { .. })
    ));
}

#[test]
fn gemm_with_transposes_and_bias() {
    let mut rng = Rng::new(12);
    for case in 0..48 {
        let (m, k, n) = (rng.range(1, 8), rng.range(1, 8), rng.range(1, 8));
        let (ta, tb) = (case % 2 == 1, (case / 2) % 2 == 1);
        let a = Host::f32(&mut rng, &if ta { [k, m] } else { [m, k] }, KINDS[case % 3]);
        let b = Host::f32(
            &mut rng,
            &if tb { [n, k] } else { [k, n] },
            KINDS[(case / 4) % 3],
        );
        let c_shape: Vec<usize> = match case % 4 {
            0 => vec![m, n],
            1 => vec![n],
            2 => vec![m, 1],
            _ => vec![],
        };
        let c = Host::f32(&mut rng, &c_shape, KINDS[(case / 3) % 3]);
        let (alpha, beta) = (
            0.5 + case as f32 / 10.0,
            if case % 5 == 0 { 0.0 } else { -1.5 },
        );
        let op = Op::Gemm {
            alpha,
            beta,
            trans_a: ta,
            trans_b: tb,
        };
        let with_c = case % 6 != 0;
        let inputs: Vec<&Host> = if with_c {
            vec![&a, &b, &c]
        } else {
            vec![&a, &b]
        };
        let out = run(&op, &inputs).unwrap();
        let (mut want, mut mags) = (Vec::new(), Vec::new());
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0.0, 0.0);
                for p in 0..k {
                    let x = if ta {
                        a.vals[p * m + i]
                    } else {
                        a.vals[i * k + p]
                    };
                    let y = if tb {
                        b.vals[j * k + p]
                    } else {
                        b.vals[p * n + j]
                    };
                    s += x * y;
                    mag += (x * y).abs();
                }
                let cv = if with_c {
                    c.vals[ravel_broadcast(&[i, j], &c_shape)]
                } else {
                    0.0
                };
                want.push(alpha as f64 * s + beta as f64 * cv);
                mags.push(alpha.abs() as f64 * mag + (beta as f64 * cv).abs());
            }
        }
        assert_matmul_close(&format!("gemm case {case}"), &out[0].vals, &want, &mags);
    }
}

#[test]
fn matmul_errors() {
    let mut rng = Rng::new(13);
    let a = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    let b = Host::f32(&mut rng, &[4, 5], Kind::Contiguous);
    let i = Host::random(&mut rng, &[3, 2], Kind::Contiguous, |r| {
        r.range(0, 4) as i64
    });
    let s = Host::from_vals(&[1.0f32], &[]);
    let c = Host::f32(&mut rng, &[3, 3], Kind::Contiguous);
    let e = run(&Op::MatMul, &[&a, &b]).err().unwrap();
    assert!(matches!(e, OpError::Shape { op: "matmul", .. }), "{e}");
    assert!(
        e.to_string().contains("[2, 3]") && e.to_string().contains("[4, 5]"),
        "{e}"
    );
    assert!(matches!(
        run(&Op::MatMul, &[&a, &i]),
        Err(OpError::DType {
            op: "matmul",
            input: 1,
            ..
        })
    ));
    assert!(matches!(
        run(&Op::MatMul, &[&a, &s]),
        Err(OpError::Shape { .. })
    ));
    let gemm = Op::Gemm {
        alpha: 1.0,
        beta: 1.0,
        trans_a: false,
        trans_b: true,
    };
    assert!(matches!(
        run(&gemm, &[&a, &b]),
        Err(OpError::Shape { op: "gemm", .. })
    ));
    let ok_b = Host::f32(&mut rng, &[2, 3], Kind::Contiguous);
    assert!(matches!(
        run(&gemm, &[&a, &ok_b, &c]),
        Err(OpError::Shape { op: "gemm", .. })
    ));
}
