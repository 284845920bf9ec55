//! Packed-weight products against two independent references: a naive f64 product
//! (tolerance 1e-5·(1 + Σ|a||b|)) and the documented fma sequence computed by a naive
//! loop (bit-identical: the kernel's contract is that exact sum order).
//!
//! Shapes cover every register-block height (1..=20 rows, MC blocks), panel edges
//! (n not a multiple of 16), several k passes (k > 256), transposed and strided views.

use shapejit_kernels::packed::Activation;
use shapejit_kernels::packed::{
    Bias, Epilogue, KC, PackedB, matmul_packed, matmul_packed_epilogue, matmul_packed_step,
};
use shapejit_kernels::{KernelError, StridedShape, View};

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2001) as f32 - 1000.0) / 1000.0)
        .collect()
}

/// `[rows, cols]` view of `data` whose element `[r, c]` sits at `r·rs + c·cs + off`.
fn view(data: &[f32], rows: usize, cols: usize, rs: isize, cs: isize, off: usize) -> View<'_, f32> {
    View::new(
        data,
        StridedShape::new(&[rows, cols], &[rs, cs], off).unwrap(),
    )
    .unwrap()
}

fn at(v: &View<f32>, r: usize, c: usize) -> f32 {
    let g = v.geom();
    v.data()
        [(g.offset() as isize + r as isize * g.strides()[0] + c as isize * g.strides()[1]) as usize]
}

fn check(m: usize, k: usize, n: usize, transposed: bool, alpha: f32) {
    let a_data = values(m * k + 3, m + k);
    let b_data = values(k * n, n + 1);
    // a: contiguous with an offset, or a transposed [k, m] buffer read as [m, k]
    let a = if transposed {
        view(&a_data, m, k, 1, m as isize, 3)
    } else {
        view(&a_data, m, k, k as isize, 1, 3)
    };
    // b: the transpose of an [n, k] buffer for odd n, contiguous otherwise
    let b = if n % 2 == 1 {
        view(&b_data, k, n, 1, k as isize, 0)
    } else {
        view(&b_data, k, n, n as isize, 1, 0)
    };
    let packed = PackedB::pack(&b).unwrap();
    assert_eq!((packed.k(), packed.n()), (k, n));
    let mut out = vec![f32::NAN; m * n + 5];
    matmul_packed(&mut out, &a, &packed, alpha).unwrap();
    for i in 0..m {
        for j in 0..n {
            let (mut dot, mut mag, mut fma) = (0f64, 0f64, 0f32);
            for l in 0..k {
                let (x, y) = (at(&a, i, l), at(&b, l, j));
                dot += x as f64 * y as f64;
                mag += (x as f64 * y as f64).abs();
                fma = x.mul_add(y, fma);
            }
            let got = out[i * n + j];
            let want = alpha as f64 * dot;
            assert!(
                (got as f64 - want).abs() <= 1e-5 * (1.0 + mag),
                "{m}x{k}x{n} [{i},{j}]: got {got}, f64 {want}"
            );
            let exact = if alpha == 1.0 { fma } else { fma * alpha };
            assert_eq!(got.to_bits(), exact.to_bits(), "{m}x{k}x{n} [{i},{j}]");
        }
    }
    assert!(out[m * n..].iter().all(|x| x.is_nan()), "wrote past m·n");
}

#[test]
fn every_block_height_and_panel_edge() {
    for m in 1..=20 {
        for n in [1, 15, 16, 17, 40] {
            check(m, 9, n, false, 1.0);
        }
    }
}

#[test]
fn several_k_passes_and_cache_blocks() {
    for (m, k, n) in [
        (7, 256, 16),
        (13, 257, 33),
        (100, 600, 20),
        (3, 1, 5),
        (150, 300, 70),
        // one register block of rows: the whole depth in one pass
        (1, 600, 50),
        (12, 513, 40),
    ] {
        check(m, k, n, false, 1.0);
        check(m, k, n, true, 0.125);
    }
}

#[test]
fn zero_sizes_and_bad_shapes() {
    // k = 0: the product is all zeros
    let empty: Vec<f32> = Vec::new();
    let packed = PackedB::pack(&view(&empty, 0, 4, 4, 1, 0)).unwrap();
    let a = [1.0f32; 0];
    let mut out = vec![f32::NAN; 8];
    matmul_packed(&mut out, &view(&a, 2, 0, 0, 1, 0), &packed, 1.0).unwrap();
    assert_eq!(out, vec![0.0; 8]);
    // a's k must match, out must hold m·n
    let b = values(12, 0);
    let packed = PackedB::pack(&view(&b, 3, 4, 4, 1, 0)).unwrap();
    let a = values(8, 1);
    let err = matmul_packed(&mut out, &view(&a, 2, 4, 4, 1, 0), &packed, 1.0).unwrap_err();
    assert!(matches!(err, KernelError::ShapeMismatch { .. }), "{err}");
    let mut short = vec![0.0; 7];
    let err = matmul_packed(&mut short, &view(&a, 2, 3, 3, 1, 0), &packed, 1.0).unwrap_err();
    assert!(matches!(err, KernelError::ShapeMismatch { .. }), "{err}");
    let rank3 = View::contiguous(&b, &[1, 3, 4]).unwrap();
    assert!(PackedB::pack(&rank3).is_err());
}

/// `act(alpha · a @ b + bias)` through the kernel's epilogue is bit-identical to
/// the product followed by a separate add (row or column bias) and activation, at
/// every block height, panel edge and k pass count; a bias of the wrong length is
/// an error.
#[test]
fn bias_epilogue_rounds_as_a_separate_add() {
    for (m, k, n) in [
        (1, 3, 1),
        (5, 9, 17),
        (13, 257, 40),
        (20, 31, 33),
        (4, 0, 5),
    ] {
        let a_data = values(m * k, 3);
        let b_data = values(k * n, 4);
        let a = view(&a_data, m, k, k as isize, 1, 0);
        let packed = PackedB::pack(&view(&b_data, k, n, n as isize, 1, 0)).unwrap();
        let (rows, cols) = (values(m, 5), values(n, 6));
        for alpha in [1.0, 0.5] {
            let mut plain = vec![0f32; m * n];
            matmul_packed(&mut plain, &a, &packed, alpha).unwrap();
            for (bias, pick) in [
                (Bias::PerRow(&rows), (|i, _| i) as fn(usize, usize) -> usize),
                (Bias::PerColumn(&cols), |_, j| j),
            ] {
                for activation in [
                    None,
                    Some(Activation::Relu),
                    Some(Activation::LeakyRelu(0.5)),
                    Some(Activation::Clip {
                        min: -0.25,
                        max: 0.5,
                    }),
                ] {
                    let mut fused = vec![f32::NAN; m * n];
                    let epilogue = Epilogue { bias, activation };
                    matmul_packed_epilogue(&mut fused, &a, packed.borrowed(), alpha, epilogue)
                        .unwrap();
                    let values = match bias {
                        Bias::PerRow(v) | Bias::PerColumn(v) => v,
                        Bias::None => unreachable!(),
                    };
                    for i in 0..m {
                        for j in 0..n {
                            let sum = plain[i * n + j] + values[pick(i, j)];
                            let want = activation.map_or(sum, |act| act.apply(sum));
                            let got = fused[i * n + j];
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{m}x{k}x{n} [{i},{j}] {bias:?} {activation:?}"
                            );
                        }
                    }
                }
            }
        }
        let mut out = vec![0f32; m * n];
        let short = values(m + 1, 7);
        let epilogue = Epilogue {
            bias: Bias::PerRow(&short),
            activation: None,
        };
        let err = matmul_packed_epilogue(&mut out, &a, packed.borrowed(), 1.0, epilogue);
        assert!(matches!(err, Err(KernelError::ShapeMismatch { .. })));
    }
}

/// A product over `k` in chunks of a multiple of `KC`, continued with
/// `accumulate` and the epilogue on the last chunk only, is bit-identical to the
/// one product (the convolution's chunked im2col relies on it), whether the
/// product runs in `KC` passes (13 rows) or in one (5 rows).
#[test]
fn chunked_products_continue_bit_for_bit() {
    for m in [13, 5] {
        chunked_product_matches(m, 2 * KC + 37, 41);
    }
}

fn chunked_product_matches(m: usize, k: usize, n: usize) {
    let a_data = values(m * k, 8);
    let b_data = values(k * n, 9);
    let rows = values(m, 10);
    let epilogue = Epilogue {
        bias: Bias::PerRow(&rows),
        activation: Some(Activation::Relu),
    };
    let a = view(&a_data, m, k, k as isize, 1, 0);
    let packed = PackedB::pack(&view(&b_data, k, n, n as isize, 1, 0)).unwrap();
    let mut whole = vec![0f32; m * n];
    matmul_packed_epilogue(&mut whole, &a, packed.borrowed(), 0.5, epilogue).unwrap();
    let mut chunked = vec![f32::NAN; m * n];
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        let a_chunk = view(&a_data, m, kc, k as isize, 1, k0);
        let b_chunk = PackedB::pack(&view(&b_data, kc, n, n as isize, 1, k0 * n)).unwrap();
        let last = k0 + kc == k;
        let (alpha, epi) = if last {
            (0.5, epilogue)
        } else {
            (1.0, Epilogue::default())
        };
        matmul_packed_step(
            &mut chunked,
            &a_chunk,
            b_chunk.borrowed(),
            alpha,
            epi,
            k0 > 0,
        )
        .unwrap();
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&chunked), bits(&whole));
}
