//! The fused attention head against a naive f64 evaluation of the same graph
//! (`softmax(scale(q·k) + mask)·v`), over sizes around the register blocks
//! (1..=70 queries and keys, depths 1..=64), transposed and broadcast operands,
//! every scale mode, with and without a mask, at every CPU level — and AVX2 and
//! AVX-512 bit-identical to each other (the scalar level's exp rounds its
//! multiply-adds twice, as `vmath` states).

use shapejit_kernels::attention::{Dims, Head, Scale, Strided, head};
use shapejit_kernels::cpu::{self, Level};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn at(buf: &[f32], m: Strided, base: *const f32, r: usize, c: usize) -> f64 {
    let off = (m.ptr as isize - base as isize) / 4 + r as isize * m.row + c as isize * m.col;
    buf[off as usize] as f64
}

#[allow(clippy::too_many_arguments)]
fn reference(
    qb: &[f32],
    q: Strided,
    kb: &[f32],
    k: Strided,
    vb: &[f32],
    v: Strided,
    mask: Option<(&[f32], Strided)>,
    dims: Dims,
    scale: Scale,
) -> Vec<f64> {
    let Dims { s_q, s_k, d, d_v } = dims;
    let mut out = vec![0f64; s_q * d_v];
    for i in 0..s_q {
        let mut row: Vec<f64> = (0..s_k)
            .map(|j| {
                let mut s: f64 = (0..d)
                    .map(|t| at(qb, q, qb.as_ptr(), i, t) * at(kb, k, kb.as_ptr(), t, j))
                    .sum();
                s = match scale {
                    Scale::None => s,
                    Scale::Mul(x) => s * x as f64,
                    Scale::Div(x) => s / x as f64,
                };
                if let Some((mb, m)) = mask {
                    s += at(mb, m, mb.as_ptr(), i, j);
                }
                s
            })
            .collect();
        let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row
            .iter_mut()
            .map(|x| {
                *x = (*x - mx).exp();
                *x
            })
            .sum();
        for c in 0..d_v {
            out[i * d_v + c] = (0..s_k)
                .map(|j| row[j] / sum * at(vb, v, vb.as_ptr(), j, c))
                .sum();
        }
    }
    out
}

fn case(s_q: usize, s_k: usize, d: usize, d_v: usize, variant: usize) {
    let mut rng = Rng(0x9e37_79b9 ^ (s_q * 1_000_003 + s_k * 1009 + d * 31 + d_v + variant) as u64);
    let dims = Dims { s_q, s_k, d, d_v };
    // q row-major; k as the transpose of a row-major [s_k, d] (an exporter's Kᵀ view)
    // or a plain row-major [d, s_k]; v row-major with a padded row stride
    let qb = rng.vec(s_q * d);
    let kb = rng.vec(s_k * d);
    let vb = rng.vec(s_k * (d_v + 3));
    let q = Strided {
        ptr: qb.as_ptr(),
        row: d as isize,
        col: 1,
    };
    let k = if variant.is_multiple_of(2) {
        Strided {
            ptr: kb.as_ptr(),
            row: 1,
            col: d as isize,
        }
    } else {
        Strided {
            ptr: kb.as_ptr(),
            row: s_k as isize,
            col: 1,
        }
    };
    let v = Strided {
        ptr: vb.as_ptr(),
        row: (d_v + 3) as isize,
        col: 1,
    };
    // causal (-inf above the diagonal... large negative) as a full mask, or a
    // padding mask broadcast over the queries (row stride 0)
    let full: Vec<f32> = (0..s_q * s_k)
        .map(|x| if x % s_k > x / s_k { -1e9 } else { 0.0 })
        .collect();
    let pad: Vec<f32> = (0..s_k)
        .map(|j| if j + 1 == s_k && s_k > 1 { -1e9 } else { 0.0 })
        .collect();
    let mask = match variant % 3 {
        0 => None,
        1 => Some((
            &full[..],
            Strided {
                ptr: full.as_ptr(),
                row: s_k as isize,
                col: 1,
            },
        )),
        _ => Some((
            &pad[..],
            Strided {
                ptr: pad.as_ptr(),
                row: 0,
                col: 1,
            },
        )),
    };
    let scale = match variant % 4 {
        0 => Scale::Mul(1.0 / (d.max(1) as f32).sqrt()),
        1 => Scale::Div((d.max(1) as f32).sqrt()),
        2 => Scale::None,
        _ => Scale::Mul(0.7),
    };
    let want = reference(&qb, q, &kb, k, &vb, v, mask, dims, scale);
    let mut results: Vec<(Level, Vec<f32>)> = Vec::new();
    for level in Level::ALL.into_iter().filter(|&l| cpu::supported(l)) {
        let mut out = vec![f32::NAN; s_q * d_v];
        let mut scratch = vec![f32::NAN; dims.scratch_len()];
        let h = Head {
            q,
            k,
            v,
            mask: mask.map(|m| m.1),
            out: out.as_mut_ptr(),
            dims,
            scale,
        };
        // SAFETY: every operand covers its dims; `out` is its own buffer.
        unsafe { head(level, &h, &mut scratch) };
        for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-5 * (1.0 + d as f64).sqrt(),
                "{dims:?} variant {variant} at {level}: [{i}] = {g}, want {w}"
            );
        }
        results.push((level, out));
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let vector: Vec<_> = results.iter().filter(|r| r.0 != Level::Scalar).collect();
    for r in vector.iter().skip(1) {
        assert_eq!(
            bits(&r.1),
            bits(&vector[0].1),
            "{dims:?}: {} and {} differ",
            r.0,
            vector[0].0
        );
    }
}

#[test]
fn heads_match_the_f64_graph() {
    let mut variant = 0;
    for s_q in [1, 3, 4, 5, 17, 32, 33, 70] {
        for s_k in [1, 2, 15, 16, 17, 32, 70] {
            for (d, d_v) in [(8, 8), (32, 32), (64, 64), (5, 19), (1, 1)] {
                case(s_q, s_k, d, d_v, variant);
                variant += 1;
            }
        }
    }
}
