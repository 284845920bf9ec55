//! Measures the `math` functions against f64 references over wide ranges and
//! checks the documented error bounds at every CPU level this machine has
//! (through the `vmath` slice kernels; levels it lacks print SKIP), plus tails
//! and unaligned starts.

use shapejit_kernels::{Level, Unary, cpu, math};

/// Distance in f32 ulps between `got` and the f64 reference (measured at the reference).
fn ulps(got: f32, reference: f64) -> f64 {
    if got as f64 == reference || (got.is_nan() && reference.is_nan()) {
        return 0.0;
    }
    let r = reference as f32;
    let ulp = if r == 0.0 || !r.is_finite() {
        f32::from_bits(1) as f64
    } else {
        (f32::from_bits(r.abs().to_bits() + 1) - r.abs()) as f64
    };
    (got as f64 - reference).abs() / ulp
}

/// erf in f64: the all-positive series for |x| < 3, a continued fraction for erfc beyond.
fn erf64(x: f64) -> f64 {
    let t = x.abs();
    let v = if t < 3.0 {
        erf_series(t)
    } else {
        1.0 - erfc64(t)
    };
    v.copysign(x)
}

fn erf_series(t: f64) -> f64 {
    // erf t = 2/√π e^{-t²} Σ 2^k t^{2k+1} / (1·3·…·(2k+1))
    let mut term = t;
    let mut sum = t;
    for k in 1..200 {
        term *= 2.0 * t * t / (2 * k + 1) as f64;
        sum += term;
        if term < sum * 1e-18 {
            break;
        }
    }
    2.0 / std::f64::consts::PI.sqrt() * (-t * t).exp() * sum
}

/// erfc for t ≥ 0.
fn erfc64(t: f64) -> f64 {
    if t < 3.0 {
        return 1.0 - erf_series(t);
    }
    let mut k = t;
    for n in (1..300).rev() {
        k = t + (n as f64 / 2.0) / k;
    }
    (-t * t).exp() / (std::f64::consts::PI.sqrt() * k)
}

fn gelu_erf64(x: f64) -> f64 {
    let t = x / std::f64::consts::SQRT_2;
    if x < 0.0 {
        0.5 * x * erfc64(-t)
    } else {
        0.5 * x * (1.0 + erf64(t))
    }
}

fn gelu_tanh64(x: f64) -> f64 {
    let y = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    // = x/2 (1 + tanh y), written without the cancellation at x < 0
    x / (1.0 + (-2.0 * y).exp())
}

/// The grid every check probes on `lo..hi`: a dense uniform grid, random points
/// between its points, and a log grid around 0 (1e-30 .. 1, both signs).
fn probe_points(lo: f32, hi: f32) -> Vec<f32> {
    let n = 400_000;
    let mut xs: Vec<f32> = (0..=n)
        .map(|i| lo + (hi - lo) * (i as f32 / n as f32))
        .collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..400_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        xs.push(lo + (hi - lo) * ((state >> 40) as f32 / (1u64 << 24) as f32));
    }
    for i in 0..1760 {
        let x = 1e-30f32 * 1.04f32.powi(i);
        xs.extend([x, -x].into_iter().filter(|x| (lo..=hi).contains(x)));
    }
    xs
}

/// Max ulp error of kernel `k` at `level` vs `reference` over [`probe_points`],
/// skipping points whose reference is below `f32::MIN_POSITIVE` in magnitude
/// (denormal).
fn max_ulps(
    level: Level,
    lo: f32,
    hi: f32,
    k: Unary,
    reference: &impl Fn(f64) -> f64,
) -> (f64, f32) {
    let xs = probe_points(lo, hi);
    let mut got = vec![0f32; xs.len()];
    k.apply_at(level, &xs, &mut got).unwrap();
    let mut worst = (0.0, lo);
    for (&x, &g) in xs.iter().zip(&got) {
        let r = reference(x as f64);
        if r.abs() >= f32::MIN_POSITIVE as f64 || r == 0.0 {
            let e = ulps(g, r);
            if e > worst.0 {
                worst = (e, x);
            }
        }
    }
    worst
}

/// Asserts `k`'s error bound on `lo..hi` at every level the CPU has (SKIP for the others).
fn check(k: Unary, lo: f32, hi: f32, reference: impl Fn(f64) -> f64, bound: f64) -> f64 {
    let mut worst = 0f64;
    for level in Level::ALL {
        if !cpu::supported(level) {
            println!("SKIP: {k:?} at {level}: this CPU lacks it");
            continue;
        }
        let (e, at) = max_ulps(level, lo, hi, k, &reference);
        println!("{k:?} at {level} on {lo}..{hi}: {e:.2} ulp at {at}");
        assert!(e <= bound, "{k:?} at {level}: error {e} ulp at {at}");
        worst = worst.max(e);
    }
    worst
}

/// `k` on `xs` at every supported level.
fn at_levels(k: Unary, xs: &[f32]) -> Vec<(Level, Vec<f32>)> {
    Level::ALL
        .into_iter()
        .filter(|&l| cpu::supported(l))
        .map(|l| {
            let mut out = vec![0f32; xs.len()];
            k.apply_at(l, xs, &mut out).unwrap();
            (l, out)
        })
        .collect()
}

/// Special values through the scalar function and every level's slice kernel.
fn specials(k: Unary, cases: &[(f32, f32)]) {
    let xs: Vec<f32> = cases.iter().map(|c| c.0).collect();
    for (level, got) in at_levels(k, &xs) {
        for (&(x, want), &g) in cases.iter().zip(&got) {
            let ok = (want.is_nan() && g.is_nan()) || g == want;
            assert!(ok, "{k:?}({x}) at {level} = {g}, want {want}");
            let s = k.scalar()(x);
            assert!(
                (want.is_nan() && s.is_nan()) || s == want,
                "scalar {k:?}({x}) = {s}"
            );
        }
    }
}

const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;

#[test]
fn exp_error() {
    check(Unary::Exp, -87.3, 88.7, f64::exp, 1.0);
    specials(
        Unary::Exp,
        &[
            (INF, INF),
            (-INF, 0.0),
            (100.0, INF),
            (NAN, NAN),
            (0.0, 1.0),
        ],
    );
    assert!(math::exp(-100.0) > 0.0 && math::exp(-100.0) < 1e-43);
}

#[test]
fn expm1_error() {
    check(Unary::Expm1, -20.0, 20.0, f64::exp_m1, 1.8);
    specials(Unary::Expm1, &[(-INF, -1.0), (NAN, NAN), (0.0, 0.0)]);
}

#[test]
fn log_error() {
    check(Unary::Log, 1e-6, 1e6, f64::ln, 1.0);
    // every binade, denormals included: mantissa steps at each exponent
    let xs: Vec<f32> = (1..0x7f80_0000u32)
        .step_by(4099)
        .map(f32::from_bits)
        .collect();
    for (level, got) in at_levels(Unary::Log, &xs) {
        let worst = xs
            .iter()
            .zip(&got)
            .map(|(&x, &g)| (ulps(g, (x as f64).ln()), x))
            .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
        println!(
            "Log at {level} over every binade: {:.2} ulp at {:e}",
            worst.0, worst.1
        );
        assert!(
            worst.0 <= 1.0,
            "log at {level}: {} ulp at {:e}",
            worst.0,
            worst.1
        );
    }
    specials(
        Unary::Log,
        &[
            (0.0, -INF),
            (-0.0, -INF),
            (-1.0, NAN),
            (INF, INF),
            (-INF, NAN),
            (NAN, NAN),
            (1.0, 0.0),
        ],
    );
}

#[test]
fn sigmoid_error() {
    check(
        Unary::Sigmoid,
        -100.0,
        100.0,
        |x| 1.0 / (1.0 + (-x).exp()),
        2.4,
    );
    specials(Unary::Sigmoid, &[(-INF, 0.0), (INF, 1.0), (NAN, NAN)]);
    // The denormal tail (the ulp check above skips denormal results): once flushed
    // to 0 where e^-x overflows (x < -88.7), which the JIT did not do.
    let xs: Vec<f32> = (0..2000).map(|i| -87.4 - i as f32 * 0.0083).collect();
    let tiny = f32::from_bits(1) as f64;
    for (level, got) in at_levels(Unary::Sigmoid, &xs) {
        for (&x, &g) in xs.iter().zip(&got) {
            let r = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!(
                (g as f64 - r).abs() <= 3e-7 * r + 3.0 * tiny,
                "sigmoid({x}) at {level} = {g:e}, want {r:e}"
            );
        }
    }
}

#[test]
fn silu_error() {
    check(Unary::Silu, -87.0, 100.0, |x| x / (1.0 + (-x).exp()), 2.6);
    // `-inf · sigmoid(-inf)` is `-inf · 0`, as the unfused `Sigmoid` then `Mul` give
    specials(
        Unary::Silu,
        &[
            (-INF, NAN),
            (INF, INF),
            (NAN, NAN),
            (0.0, 0.0),
            (-0.0, -0.0),
        ],
    );
    // bit for bit `x · sigmoid(x)` at every level, the denormal tail included
    let xs: Vec<f32> = probe_points(-110.0, 110.0);
    let sigmoids = at_levels(Unary::Sigmoid, &xs);
    for ((level, got), (_, sig)) in at_levels(Unary::Silu, &xs).into_iter().zip(sigmoids) {
        for ((&x, &g), &s) in xs.iter().zip(&got).zip(&sig) {
            assert_eq!(g.to_bits(), (x * s).to_bits(), "silu({x}) at {level}");
        }
    }
}

#[test]
fn tanh_error() {
    check(Unary::Tanh, -20.0, 20.0, f64::tanh, 5.6);
    specials(
        Unary::Tanh,
        &[(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0)],
    );
}

#[test]
fn erf_error() {
    check(Unary::Erf, -10.0, 10.0, erf64, 2.2);
    specials(
        Unary::Erf,
        &[(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0)],
    );
}

#[test]
fn gelu_erf_error() {
    check(Unary::GeluErf, -13.0, -5.5, gelu_erf64, 6.4);
    check(Unary::GeluErf, -5.5, 20.0, gelu_erf64, 2.4);
    check(Unary::GeluErf, -0.5, 20.0, gelu_erf64, 1.8);
    specials(
        Unary::GeluErf,
        &[(-INF, 0.0), (INF, INF), (NAN, NAN), (0.0, 0.0)],
    );
}

#[test]
fn gelu_tanh_error() {
    check(Unary::GeluTanh, -9.0, -5.2, gelu_tanh64, 3.1);
    check(Unary::GeluTanh, -5.2, 20.0, gelu_tanh64, 2.6);
    specials(Unary::GeluTanh, &[(-INF, 0.0), (INF, INF), (NAN, NAN)]);
}

#[test]
fn sqrt_and_reciprocal_are_correctly_rounded() {
    check(Unary::Sqrt, 0.0, 1e6, f64::sqrt, 0.5);
    check(Unary::Reciprocal, 1e-3, 1e6, |x| 1.0 / x, 0.5);
    specials(Unary::Sqrt, &[(-1.0, NAN), (INF, INF), (-0.0, -0.0)]);
    specials(Unary::Reciprocal, &[(0.0, INF), (-0.0, -INF), (INF, 0.0)]);
}

/// Tails of every length 0..=33 from unaligned starts: each element equals the
/// same level's full-vector result bit for bit, and nothing outside the
/// destination range is written.
#[test]
fn tails_and_unaligned_starts() {
    let base: Vec<f32> = (0..40).map(|i| (i as f32 - 17.5) * 0.37).collect();
    for &k in Unary::ALL {
        for level in Level::ALL {
            if !cpu::supported(level) {
                println!("SKIP: {k:?} tails at {level}: this CPU lacks it");
                continue;
            }
            // full-vector reference: each value repeated over 64 lanes
            let want: Vec<f32> = base
                .iter()
                .map(|&x| {
                    let mut o = [0f32; 64];
                    k.apply_at(level, &[x; 64], &mut o).unwrap();
                    o[0]
                })
                .collect();
            for len in 0..=33 {
                for off in 0..4 {
                    let src = &base[off..off + len];
                    let mut dst = vec![-7.0f32; len + 8];
                    k.apply_at(level, src, &mut dst[off..off + len]).unwrap();
                    for (i, &d) in dst.iter().enumerate() {
                        if (off..off + len).contains(&i) {
                            let w = want[i];
                            assert!(
                                d.to_bits() == w.to_bits(),
                                "{k:?} at {level}, len {len} off {off}: [{i}] = {d}, want {w}"
                            );
                        } else {
                            assert_eq!(d, -7.0, "{k:?} at {level} wrote outside, len {len}");
                        }
                    }
                }
            }
        }
    }
}

/// Negation, `|x|` and ReLU are exact: bit for bit what Rust's `-x`, `f32::abs` and
/// `x < 0 ? 0 : x` give, at every level, on specials (signed zeros, NaN with either
/// sign, ±inf, subnormals, ±MAX) and a sweep of ordinary values.
#[test]
fn sign_ops_and_relu_are_bit_exact() {
    let mut xs = vec![
        0.0,
        -0.0,
        NAN,
        -NAN,
        INF,
        -INF,
        f32::MIN_POSITIVE / 8.0,
        -f32::MIN_POSITIVE / 8.0,
        f32::MAX,
        f32::MIN,
    ];
    xs.extend((0..200).map(|i| (i as f32 - 100.3) * 1.7e-3 * (i as f32).exp2().min(1e30)));
    let reference = |k: Unary, x: f32| match k {
        Unary::Neg => -x,
        Unary::Abs => x.abs(),
        _ => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
    };
    for k in [Unary::Neg, Unary::Abs, Unary::Relu] {
        for (level, got) in at_levels(k, &xs) {
            for (&x, &g) in xs.iter().zip(&got) {
                let want = reference(k, x);
                assert_eq!(g.to_bits(), want.to_bits(), "{k:?}({x}) at {level}");
            }
        }
    }
}
