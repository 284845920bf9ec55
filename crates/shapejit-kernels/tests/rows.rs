//! Row kernels (softmax, log-softmax, layer norm) at every CPU level this
//! machine has, against naive f64 loops: row lengths 1..=33 and column blocks
//! across the 64-column stack block, unaligned starts. Levels the CPU lacks
//! print SKIP.

mod support;

use shapejit_kernels::{Level, cpu, rows};

fn data(n: usize, seed: u32) -> Vec<f32> {
    support::data(n, seed, -8.0, 8.0)
}

fn levels() -> impl Iterator<Item = Level> {
    Level::ALL.into_iter().filter(|&l| {
        let ok = cpu::supported(l);
        if !ok {
            println!("SKIP: row kernels at {l}: this CPU lacks it");
        }
        ok
    })
}

/// Softmax of `x` as `[outer, n, inner]` along `n`, in f64.
fn softmax64(x: &[f32], [outer, n, inner]: [usize; 3], log: bool) -> Vec<f64> {
    let mut out = vec![0f64; x.len()];
    for o in 0..outer {
        for j in 0..inner {
            let at = |i: usize| (o * n + i) * inner + j;
            let m = (0..n).map(|i| x[at(i)] as f64).fold(f64::MIN, f64::max);
            let sum: f64 = (0..n).map(|i| (x[at(i)] as f64 - m).exp()).sum();
            for i in 0..n {
                let v = x[at(i)] as f64 - m;
                out[at(i)] = if log { v - sum.ln() } else { v.exp() / sum };
            }
        }
    }
    out
}

fn check_softmax(level: Level, dims: [usize; 3], log: bool, off: usize) {
    let total = dims.iter().product::<usize>();
    let buf = data(total + off, (total * 31 + off) as u32);
    let x = &buf[off..];
    let mut out = vec![0f32; total + off];
    rows::softmax_at(level, x, &mut out[off..], dims, log).unwrap();
    for (i, (&g, w)) in out[off..].iter().zip(softmax64(x, dims, log)).enumerate() {
        // a few roundings of the result (log: absolute, as its values cancel)
        let tol = if log {
            2e-6 * (1.0 + w.abs())
        } else {
            2e-6 * w + 1e-30
        };
        assert!(
            (g as f64 - w).abs() <= tol,
            "softmax{} {dims:?} at {level}, off {off}: [{i}] = {g}, want {w}",
            if log { " (log)" } else { "" }
        );
    }
}

#[test]
fn softmax_rows_at_every_level() {
    for level in levels() {
        for n in 1..=33 {
            for log in [false, true] {
                check_softmax(level, [3, n, 1], log, n % 3);
            }
        }
    }
}

/// Rows by blocks (up to 64 rows, 2048 elements): many short rows, a partial last
/// block, and long rows a few to a block.
#[test]
fn softmax_rows_across_blocks() {
    for level in levels() {
        for dims in [[200, 32, 1], [70, 1, 1], [5, 1000, 1], [3, 2049, 1]] {
            for log in [false, true] {
                check_softmax(level, dims, log, 1);
            }
        }
    }
}

#[test]
fn softmax_columns_at_every_level() {
    for level in levels() {
        for inner in [2, 3, 17, 63, 64, 65, 130] {
            for log in [false, true] {
                check_softmax(level, [2, 5, inner], log, inner % 3);
            }
        }
    }
}

#[test]
fn softmax_nan_and_bad_lengths() {
    for level in levels() {
        let mut x = data(24, 3);
        x[5] = f32::NAN;
        let mut out = vec![0f32; 24];
        rows::softmax_at(level, &x, &mut out, [3, 8, 1], false).unwrap();
        assert!(
            out[..8].iter().all(|v| v.is_nan()),
            "row with NaN at {level}"
        );
        assert!(out[8..].iter().all(|v| v.is_finite()));
        rows::softmax_at(level, &x, &mut out, [2, 4, 3], false).unwrap();
        // column (0, j=2) holds x[5]: NaN; others finite
        assert!(out[2].is_nan() && out[5].is_nan() && out[0].is_finite());
        assert!(rows::softmax_at(level, &x, &mut out, [5, 5, 1], false).is_err());
    }
}

#[test]
fn layer_norm_at_every_level() {
    for level in levels() {
        for n in 1..=33 {
            let rows_n = 3;
            let off = n % 4;
            let buf = data(rows_n * n + off, n as u32);
            let x = &buf[off..];
            let scale = data(n, 99);
            let bias = data(n, 98);
            let mut out = vec![0f32; rows_n * n];
            rows::layer_norm_at(level, x, &mut out, n, &scale, Some(&bias), 1e-5).unwrap();
            for r in 0..rows_n {
                let row = &x[r * n..(r + 1) * n];
                let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
                let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
                for c in 0..n {
                    let z = (row[c] as f64 - mean) / (var + 1e-5).sqrt();
                    let w = z * scale[c] as f64 + bias[c] as f64;
                    let tol = 4e-6 * (1.0 + (z * scale[c] as f64).abs() + (bias[c] as f64).abs());
                    let g = out[r * n + c] as f64;
                    assert!(
                        (g - w).abs() <= tol,
                        "layer_norm n={n} at {level}: [{r},{c}] = {g}, want {w}"
                    );
                }
            }
        }
    }
}
