//! Measures the `math` functions against f64 references over wide ranges and
//! checks the documented error bounds.

use shapejit_kernels::math;

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

/// Max ulp error of `f` vs `reference` on a dense grid of `lo..hi`, skipping
/// points whose reference is below `f32::MIN_POSITIVE` in magnitude (denormal).
fn max_ulps(
    lo: f32,
    hi: f32,
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f64) -> f64,
) -> (f64, f32) {
    let n = 400_000;
    let mut worst = (0.0, lo);
    let mut probe = |x: f32| {
        let r = reference(x as f64);
        if r.abs() >= f32::MIN_POSITIVE as f64 {
            let e = ulps(f(x), r);
            if e > worst.0 {
                worst = (e, x);
            }
        }
    };
    for i in 0..=n {
        probe(lo + (hi - lo) * (i as f32 / n as f32));
    }
    // random points between the grid's
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..400_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        probe(lo + (hi - lo) * ((state >> 40) as f32 / (1u64 << 24) as f32));
    }
    // also the neighbourhood of 0 on a log grid (1e-30 .. 1)
    for i in 0..1760 {
        let x = 1e-30f32 * 1.04f32.powi(i);
        for x in [x, -x] {
            if x >= lo && x <= hi {
                let e = ulps(f(x), reference(x as f64));
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        }
    }
    worst
}

#[test]
fn exp_error() {
    let (e, at) = max_ulps(-87.3, 88.7, math::exp, f64::exp);
    println!("exp: {e:.2} ulp at {at}");
    assert!(e <= 1.0, "exp error {e} ulp at {at}");
    assert_eq!(math::exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(math::exp(f32::NEG_INFINITY), 0.0);
    assert_eq!(math::exp(100.0), f32::INFINITY);
    assert!(math::exp(f32::NAN).is_nan());
    assert!(math::exp(-100.0) > 0.0 && math::exp(-100.0) < 1e-43);
}

#[test]
fn expm1_error() {
    let (e, at) = max_ulps(-20.0, 20.0, math::expm1, f64::exp_m1);
    println!("expm1: {e:.2} ulp at {at}");
    assert!(e <= 1.7, "expm1 error {e} ulp at {at}");
}

#[test]
fn sigmoid_error() {
    let (e, at) = max_ulps(-100.0, 100.0, math::sigmoid, |x| 1.0 / (1.0 + (-x).exp()));
    println!("sigmoid: {e:.2} ulp at {at}");
    assert!(e <= 2.5, "sigmoid error {e} ulp at {at}");
    assert_eq!(math::sigmoid(f32::NEG_INFINITY), 0.0);
    assert_eq!(math::sigmoid(f32::INFINITY), 1.0);
}

#[test]
fn tanh_error() {
    let (e, at) = max_ulps(-20.0, 20.0, math::tanh, f64::tanh);
    println!("tanh: {e:.2} ulp at {at}");
    assert!(e <= 1.3, "tanh error {e} ulp at {at}");
    assert_eq!(math::tanh(f32::INFINITY), 1.0);
    assert_eq!(math::tanh(f32::NEG_INFINITY), -1.0);
    assert!(math::tanh(f32::NAN).is_nan());
}

#[test]
fn erf_error() {
    let (e, at) = max_ulps(-10.0, 10.0, math::erf, erf64);
    println!("erf: {e:.2} ulp at {at}");
    assert!(e <= 3.6, "erf error {e} ulp at {at}");
    assert_eq!(math::erf(f32::INFINITY), 1.0);
    assert!(math::erf(f32::NAN).is_nan());
}

#[test]
fn gelu_erf_error() {
    let (e, at) = max_ulps(-13.0, 20.0, math::gelu_erf, gelu_erf64);
    println!("gelu_erf: {e:.2} ulp at {at}");
    let (e_mid, at_mid) = max_ulps(-5.0, 20.0, math::gelu_erf, gelu_erf64);
    println!("gelu_erf on -5..20: {e_mid:.2} ulp at {at_mid}");
    assert!(e <= 7.9, "gelu_erf error {e} ulp at {at}");
    assert_eq!(math::gelu_erf(f32::NEG_INFINITY), 0.0);
    assert_eq!(math::gelu_erf(f32::INFINITY), f32::INFINITY);
}

#[test]
fn gelu_tanh_error() {
    let (e, at) = max_ulps(-9.0, 20.0, math::gelu_tanh, gelu_tanh64);
    println!("gelu_tanh: {e:.2} ulp at {at}");
    assert!(e <= 3.9, "gelu_tanh error {e} ulp at {at}");
    assert_eq!(math::gelu_tanh(f32::NEG_INFINITY), 0.0);
}
