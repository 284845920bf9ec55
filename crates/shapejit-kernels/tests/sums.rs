//! `reduce::sum_f32` against an f64 loop over every axis set of a 3-D input, in
//! contiguous and transposed layouts: within f64 rounding of the exact sum, and
//! bit-identical whatever the layout (the partial sums follow the elements' row-major
//! number, not memory). Run at every CPU level (`SHAPEJIT_CPU`).

mod support;

use shapejit_kernels::reduce::sum_f32;
use shapejit_kernels::{StridedShape, View};
use support::data;

/// Sums of `x` (`[a, b, c]` row-major) over the dims flagged in `reduced`, in f64.
fn naive(x: &[f32], [a, b, c]: [usize; 3], reduced: [bool; 3], mean: bool) -> Vec<f64> {
    let keep = |d: usize, n: usize| if reduced[d] { 1 } else { n };
    let (ka, kb, kc) = (keep(0, a), keep(1, b), keep(2, c));
    let mut out = vec![0f64; ka * kb * kc];
    for i in 0..a {
        for j in 0..b {
            for k in 0..c {
                let o = ((if reduced[0] { 0 } else { i }) * kb + if reduced[1] { 0 } else { j })
                    * kc
                    + if reduced[2] { 0 } else { k };
                out[o] += x[(i * b + j) * c + k] as f64;
            }
        }
    }
    let count = [a, b, c]
        .iter()
        .zip(reduced)
        .filter(|(_, r)| *r)
        .map(|(n, _)| n)
        .product::<usize>();
    if mean {
        out.iter_mut().for_each(|v| *v /= count as f64);
    }
    out
}

#[test]
fn sums_match_f64_in_any_layout() {
    for shape in [[2, 3, 5], [3, 17, 40], [1, 1, 1], [4, 33, 2], [2, 1, 70]] {
        let [a, b, c] = shape;
        let x = data(a * b * c, 5, -2.0, 3.0);
        // the same values stored as [c, b, a] and viewed through transposed strides
        let mut t = vec![0f32; x.len()];
        for i in 0..a {
            for j in 0..b {
                for k in 0..c {
                    t[(k * b + j) * a + i] = x[(i * b + j) * c + k];
                }
            }
        }
        let row_major = View::contiguous(&x, &shape).unwrap();
        let strides = [1, a as isize, (a * b) as isize];
        let transposed = View::new(&t, StridedShape::new(&shape, &strides, 0).unwrap()).unwrap();
        for mask in 1..8u32 {
            let reduced = [0, 1, 2].map(|d| mask & (1 << d) != 0);
            for mean in [false, true] {
                let want = naive(&x, shape, reduced, mean);
                let mut got = vec![f32::NAN; want.len()];
                sum_f32(&mut got, &row_major, &reduced, mean).unwrap();
                let mut got_t = vec![f32::NAN; want.len()];
                sum_f32(&mut got_t, &transposed, &reduced, mean).unwrap();
                for (o, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    // one f32 rounding of a sum of at most a few thousand terms
                    assert!(
                        (g as f64 - w).abs() <= 1e-6 * (1.0 + w.abs()),
                        "{shape:?} {reduced:?} mean {mean}: [{o}] = {g}, want {w}"
                    );
                    assert_eq!(
                        g.to_bits(),
                        got_t[o].to_bits(),
                        "{shape:?} {reduced:?}: layouts differ at [{o}]"
                    );
                }
            }
        }
    }
}

#[test]
fn empty_sums_are_zero_and_means_nan() {
    let x: [f32; 0] = [];
    let v = View::contiguous(&x, &[3, 0]).unwrap();
    let mut out = [f32::NAN; 3];
    sum_f32(&mut out, &v, &[false, true], false).unwrap();
    assert_eq!(out, [0.0; 3]);
    sum_f32(&mut out, &v, &[false, true], true).unwrap();
    assert!(out.iter().all(|v| v.is_nan()));
}

#[test]
fn nan_and_inf_propagate() {
    let x = [1.0, f32::NAN, 2.0, f32::INFINITY, 1.0, 0.5];
    let v = View::contiguous(&x, &[2, 3]).unwrap();
    let mut out = [0f32; 2];
    sum_f32(&mut out, &v, &[false, true], false).unwrap();
    assert!(out[0].is_nan());
    assert_eq!(out[1], f32::INFINITY);
}
