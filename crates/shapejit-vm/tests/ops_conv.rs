//! conv2d, max/avg pooling, global_avg_pool and batch_norm against naive f64
//! loops over random geometries (groups, strides, pads, dilations, ceil_mode)
//! and strided inputs.

mod ops_support;
use ops_support::*;
use shapejit_ir::{Activation, Op, Window2d};
use shapejit_vm::ops::OpError;

/// op.rs: conv2d 1e-5 relative (to Σ|w·x| as for matmul).
const CONV_REL: f64 = 1e-5;
/// Pool and normalization tolerance: a few f32 roundings.
const POOL_REL: f64 = 1e-6;

fn out_size(
    input: usize,
    k: usize,
    s: usize,
    pads: (usize, usize),
    dil: usize,
    ceil: bool,
) -> usize {
    let num = (input + pads.0 + pads.1) as f64 - (dil * (k - 1) + 1) as f64;
    let n = if ceil {
        (num / s as f64).ceil()
    } else {
        (num / s as f64).floor()
    } as usize
        + 1;
    // ONNX/PyTorch: the last window must start inside the input or the begin padding
    if ceil && (n - 1) * s >= input + pads.0 {
        n - 1
    } else {
        n
    }
}

fn x_at(x: &Host, n: usize, c: usize, y: isize, xx: isize) -> Option<f64> {
    let s = x.shape();
    if y < 0 || xx < 0 || y >= s[2] as isize || xx >= s[3] as isize {
        return None;
    }
    Some(x.vals[((n * s[1] + c) * s[2] + y as usize) * s[3] + xx as usize])
}

#[test]
fn conv2d_matches_naive_loops() {
    let mut rng = Rng::new(50);
    for case in 0..60 {
        let groups = rng.range(1, 4);
        let (cg, mg) = (rng.range(1, 4), rng.range(1, 4));
        let (kh, kw) = (rng.range(1, 4), rng.range(1, 4));
        let strides = [rng.range(1, 3), rng.range(1, 3)];
        let dil = [rng.range(1, 3), rng.range(1, 3)];
        let pads = if case % 4 == 0 {
            [0; 4]
        } else {
            [0, 1, 2, 1].map(|m| rng.range(0, m + 1))
        };
        let (h, w) = (
            rng.range(dil[0] * (kh - 1) + 1, 9),
            rng.range(dil[1] * (kw - 1) + 1, 9),
        );
        let n = rng.range(1, 3);
        let (c_in, c_out) = (cg * groups, mg * groups);
        let x = Host::f32(&mut rng, &[n, c_in, h, w], KINDS[case % 3]);
        let wt = Host::f32(&mut rng, &[c_out, cg, kh, kw], KINDS[(case / 3) % 3]);
        let b = Host::f32(&mut rng, &[c_out], KINDS[(case + 1) % 3]);
        let window = Window2d {
            kernel: [kh, kw],
            strides,
            pads,
            dilations: dil,
        };
        let op = Op::Conv2d {
            window: window.clone(),
            groups,
            activation: None,
        };
        let with_bias = case % 2 == 0;
        let inputs: Vec<&Host> = if with_bias {
            vec![&x, &wt, &b]
        } else {
            vec![&x, &wt]
        };
        let out = run(&op, &inputs).unwrap();
        let oh = out_size(h, kh, strides[0], (pads[0], pads[2]), dil[0], false);
        let ow = out_size(w, kw, strides[1], (pads[1], pads[3]), dil[1], false);
        assert_eq!(
            out[0].ty.shape.as_slice(),
            &[n, c_out, oh, ow],
            "case {case}"
        );
        let mut k = 0;
        for img in 0..n {
            for m in 0..c_out {
                let g = m / mg;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let (mut s, mut mag) = (if with_bias { b.vals[m] } else { 0.0 }, 0.0);
                        mag += s.abs();
                        for c in 0..cg {
                            for i in 0..kh {
                                for j in 0..kw {
                                    let y =
                                        (oy * strides[0] + i * dil[0]) as isize - pads[0] as isize;
                                    let xx =
                                        (ox * strides[1] + j * dil[1]) as isize - pads[1] as isize;
                                    if let Some(v) = x_at(&x, img, g * cg + c, y, xx) {
                                        let wv = wt.vals[((m * cg + c) * kh + i) * kw + j];
                                        s += v * wv;
                                        mag += (v * wv).abs();
                                    }
                                }
                            }
                        }
                        let got = out[0].vals[k];
                        assert!(
                            (got - s).abs() <= CONV_REL * mag + 1e-30,
                            "case {case} at {k}: got {got}, want {s}"
                        );
                        k += 1;
                    }
                }
            }
        }
        fused_activations_match_the_ops(&op, &inputs, &out[0], case);
    }
}

/// `conv2d {activation = a}` is bit-identical to the unary op `a` after the
/// unfused conv (`plain`), for relu, leaky relu and clip, NaN included.
fn fused_activations_match_the_ops(op: &Op, inputs: &[&Host], plain: &Out, case: usize) {
    let Op::Conv2d { window, groups, .. } = op else {
        unreachable!()
    };
    let conv_out: Vec<f32> = plain.vals.iter().map(|&v| v as f32).collect();
    let conv_out = Host::from_vals(&conv_out, &plain.ty.shape);
    for act in [
        Activation::Relu,
        Activation::LeakyRelu { alpha: 0.1 },
        Activation::Clip {
            min: -0.5,
            max: 0.5,
        },
    ] {
        let fused = Op::Conv2d {
            window: window.clone(),
            groups: *groups,
            activation: Some(act),
        };
        let got = run(&fused, inputs).unwrap();
        let want = run(&Op::Unary(act.as_unary()), &[&conv_out]).unwrap();
        let bits = |o: &Out| -> Vec<u32> { o.vals.iter().map(|&v| (v as f32).to_bits()).collect() };
        assert_eq!(bits(&got[0]), bits(&want[0]), "case {case}: {act:?}");
    }
}

/// Transposed conv by its definition, scattering every input cell over its
/// taps in f64: returns the output shape, values and per-element Σ|w·x|.
#[allow(clippy::too_many_arguments)]
fn conv_transpose_ref(
    x: &Host,
    w: &Host,
    b: Option<&Host>,
    groups: usize,
    strides: [usize; 2],
    pads: [usize; 4],
    dil: [usize; 2],
    out_pad: [usize; 2],
) -> (Vec<usize>, Vec<f64>, Vec<f64>) {
    let [n, c_in, h, wd] = <[usize; 4]>::try_from(x.shape()).unwrap();
    let [_, mg, kh, kw] = <[usize; 4]>::try_from(w.shape()).unwrap();
    let (cg, c_out) = (c_in / groups, mg * groups);
    let size = |input: usize, k: usize, a: usize| {
        strides[a] * (input - 1) + out_pad[a] + dil[a] * (k - 1) + 1 - pads[a] - pads[a + 2]
    };
    let (oh, ow) = (size(h, kh, 0), size(wd, kw, 1));
    let mut vals = vec![0.0; n * c_out * oh * ow];
    let mut mag = vec![0.0; vals.len()];
    for img in 0..n {
        for m in 0..c_out {
            let bias = b.map_or(0.0, |b| b.vals[m]);
            for k in 0..oh * ow {
                vals[(img * c_out + m) * oh * ow + k] = bias;
                mag[(img * c_out + m) * oh * ow + k] = bias.abs();
            }
        }
        for c in 0..c_in {
            let g = c / cg;
            for y in 0..h {
                for xx in 0..wd {
                    let v = x.vals[((img * c_in + c) * h + y) * wd + xx];
                    for m in 0..mg {
                        for i in 0..kh {
                            for j in 0..kw {
                                let oy = (y * strides[0] + i * dil[0]) as isize - pads[0] as isize;
                                let ox = (xx * strides[1] + j * dil[1]) as isize - pads[1] as isize;
                                if oy < 0 || ox < 0 || oy >= oh as isize || ox >= ow as isize {
                                    continue;
                                }
                                let wv = w.vals[((c * mg + m) * kh + i) * kw + j];
                                let at = ((img * c_out + g * mg + m) * oh + oy as usize) * ow
                                    + ox as usize;
                                vals[at] += v * wv;
                                mag[at] += (v * wv).abs();
                            }
                        }
                    }
                }
            }
        }
    }
    (vec![n, c_out, oh, ow], vals, mag)
}

#[test]
fn conv_transpose2d_matches_naive_loops() {
    let mut rng = Rng::new(52);
    for case in 0..60 {
        let groups = rng.range(1, 4);
        let (cg, mg) = (rng.range(1, 4), rng.range(1, 4));
        let (kh, kw) = (rng.range(1, 4), rng.range(1, 4));
        let strides = [rng.range(1, 4), rng.range(1, 4)];
        let dil = [rng.range(1, 3), rng.range(1, 3)];
        let out_pad = [0, 1].map(|a| rng.range(0, strides[a].max(dil[a])));
        let (h, w) = (rng.range(1, 7), rng.range(1, 7));
        let mut pads = if case % 4 == 0 {
            [0; 4]
        } else {
            [kh, kw, kh, kw].map(|k| rng.range(0, k))
        };
        // the pads must leave at least one row and column of the full output
        for (a, (input, k)) in [(h, kh), (w, kw)].into_iter().enumerate() {
            let full = strides[a] * (input - 1) + out_pad[a] + dil[a] * (k - 1) + 1;
            if pads[a] + pads[a + 2] >= full {
                (pads[a], pads[a + 2]) = (0, 0);
            }
        }
        let n = rng.range(1, 3);
        let (c_in, c_out) = (cg * groups, mg * groups);
        let x = Host::f32(&mut rng, &[n, c_in, h, w], KINDS[case % 3]);
        let wt = Host::f32(&mut rng, &[c_in, mg, kh, kw], KINDS[(case / 3) % 3]);
        let b = Host::f32(&mut rng, &[c_out], KINDS[(case + 1) % 3]);
        let window = Window2d {
            kernel: [kh, kw],
            strides,
            pads,
            dilations: dil,
        };
        let op = Op::ConvTranspose2d {
            window,
            groups,
            output_padding: out_pad,
        };
        let with_bias = case % 2 == 0;
        let inputs: Vec<&Host> = if with_bias {
            vec![&x, &wt, &b]
        } else {
            vec![&x, &wt]
        };
        let out = run(&op, &inputs).unwrap();
        let bias = with_bias.then_some(&b);
        let (shape, want, mag) =
            conv_transpose_ref(&x, &wt, bias, groups, strides, pads, dil, out_pad);
        assert_eq!(out[0].ty.shape.as_slice(), shape.as_slice(), "case {case}");
        for (k, (&got, (&s, &m))) in out[0].vals.iter().zip(want.iter().zip(&mag)).enumerate() {
            assert!(
                (got - s).abs() <= CONV_REL * m + 1e-30,
                "case {case} at {k}: got {got}, want {s}"
            );
        }
    }
}

#[test]
fn conv_transpose2d_rejects_bad_operands() {
    let mut rng = Rng::new(53);
    let x = Host::f32(&mut rng, &[1, 4, 3, 3], Kind::Contiguous);
    let window = Window2d {
        kernel: [3, 3],
        strides: [2, 2],
        pads: [0; 4],
        dilations: [1, 1],
    };
    let op = |groups, pads: [usize; 4]| Op::ConvTranspose2d {
        window: Window2d {
            pads,
            ..window.clone()
        },
        groups,
        output_padding: [0, 0],
    };
    // weight dim 0 must be the input's channels
    let w3 = Host::f32(&mut rng, &[3, 2, 3, 3], Kind::Contiguous);
    let e = run(&op(1, [0; 4]), &[&x, &w3]).err().unwrap();
    assert!(
        matches!(
            e,
            OpError::Shape {
                op: "conv_transpose2d",
                ..
            }
        ),
        "{e}"
    );
    // 4 channels in 3 groups
    let w = Host::f32(&mut rng, &[4, 2, 3, 3], Kind::Contiguous);
    assert!(matches!(
        run(&op(3, [0; 4]), &[&x, &w]),
        Err(OpError::Shape { .. })
    ));
    // the bias has C_out/groups·groups = 2 elements
    let b = Host::f32(&mut rng, &[4], Kind::Contiguous);
    assert!(matches!(
        run(&op(1, [0; 4]), &[&x, &w, &b]),
        Err(OpError::Shape { .. })
    ));
    // full output 2·2 + 3 = 7: pads of 8 in all leave nothing
    let e = run(&op(1, [4, 0, 4, 0]), &[&x, &w]).err().unwrap();
    assert!(
        e.to_string().contains("exceed the full output size 7"),
        "{e}"
    );
    // groups of 2: w [4, 2, ..] gives 4 output channels
    let out = run(&op(2, [0; 4]), &[&x, &w]).unwrap();
    assert_eq!(out[0].ty.shape.as_slice(), &[1, 4, 7, 7]);
}

#[test]
fn pools_match_naive_loops() {
    let mut rng = Rng::new(51);
    for case in 0..60 {
        let (kh, kw) = (rng.range(1, 4), rng.range(1, 4));
        let strides = [rng.range(1, 3), rng.range(1, 3)];
        let dil = if case % 3 == 0 {
            [rng.range(1, 3), rng.range(1, 3)]
        } else {
            [1, 1]
        };
        let pads = [kh, kw, kh, kw].map(|k| rng.range(0, k));
        let (h, w) = (
            rng.range(dil[0] * (kh - 1) + 1, 8),
            rng.range(dil[1] * (kw - 1) + 1, 8),
        );
        let x = Host::f32(&mut rng, &[2, 2, h, w], KINDS[case % 3]);
        let window = Window2d {
            kernel: [kh, kw],
            strides,
            pads,
            dilations: dil,
        };
        let ceil_mode = case % 2 == 1;
        let count_include_pad = (case / 2) % 2 == 1;
        let oh = out_size(h, kh, strides[0], (pads[0], pads[2]), dil[0], ceil_mode);
        let ow = out_size(w, kw, strides[1], (pads[1], pads[3]), dil[1], ceil_mode);
        for is_max in [true, false] {
            let op = if is_max {
                Op::MaxPool2d {
                    window: window.clone(),
                    ceil_mode,
                }
            } else {
                Op::AvgPool2d {
                    window: window.clone(),
                    ceil_mode,
                    count_include_pad,
                }
            };
            let out = run(&op, &[&x]).unwrap();
            assert_eq!(
                out[0].ty.shape.as_slice(),
                &[2, 2, oh, ow],
                "{op:?} on {h}x{w}"
            );
            let mut k = 0;
            for img in 0..2 {
                for c in 0..2 {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let (mut vals, mut padded) = (Vec::new(), 0);
                            for i in 0..kh {
                                for j in 0..kw {
                                    let y =
                                        (oy * strides[0] + i * dil[0]) as isize - pads[0] as isize;
                                    let xx =
                                        (ox * strides[1] + j * dil[1]) as isize - pads[1] as isize;
                                    if y < (h + pads[2]) as isize && xx < (w + pads[3]) as isize {
                                        padded += 1;
                                    }
                                    vals.extend(x_at(&x, img, c, y, xx));
                                }
                            }
                            let want = if is_max {
                                vals.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                            } else {
                                let div = if count_include_pad {
                                    padded
                                } else {
                                    vals.len()
                                };
                                vals.iter().sum::<f64>() / div as f64
                            };
                            let got = out[0].vals[k];
                            assert!(
                                (got - want).abs() <= POOL_REL * want.abs() + 1e-7,
                                "{op:?} at {k}: {got} vs {want}"
                            );
                            k += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn global_avg_pool_and_batch_norm() {
    let mut rng = Rng::new(52);
    for case in 0..12 {
        let shape = [
            rng.range(1, 3),
            rng.range(1, 4),
            rng.range(1, 5),
            rng.range(1, 5),
        ];
        let x = Host::f32(&mut rng, &shape, KINDS[case % 3]);
        let out = run(&Op::GlobalAvgPool, &[&x]).unwrap();
        assert_eq!(out[0].ty.shape.as_slice(), &[shape[0], shape[1], 1, 1]);
        let hw = shape[2] * shape[3];
        let want: Vec<f64> = x
            .vals
            .chunks(hw)
            .map(|c| c.iter().sum::<f64>() / hw as f64)
            .collect();
        assert_close("global_avg_pool", &out[0].vals, &want, 1e-7, POOL_REL);

        let c = shape[1];
        let params: Vec<Host> = (0..4)
            .map(|i| {
                if i == 3 {
                    Host::random(&mut rng, &[c], KINDS[case % 3], |r| r.f32(0.1, 2.0))
                } else {
                    Host::f32(&mut rng, &[c], KINDS[(case + i) % 3])
                }
            })
            .collect();
        let eps = 1e-3f32;
        let out = run(
            &Op::BatchNorm {
                epsilon: eps,
                activation: None,
            },
            &[&x, &params[0], &params[1], &params[2], &params[3]],
        )
        .unwrap();
        let want: Vec<f64> = (0..x.vals.len())
            .map(|f| {
                let ch = (f / hw) % c;
                let (s, b, m, v) = (
                    params[0].vals[ch],
                    params[1].vals[ch],
                    params[2].vals[ch],
                    params[3].vals[ch],
                );
                (x.vals[f] - m) / (v + eps as f64).sqrt() * s + b
            })
            .collect();
        assert_close("batch_norm", &out[0].vals, &want, 1e-6, 1e-5);
    }
}

/// A batch norm's fused activation is exact on the normalized value: the
/// unfused batch norm's result put through the ONNX formula of the activation,
/// bit for bit, at every layout (NaN propagates, −0 stays −0 through relu).
#[test]
fn batch_norm_with_a_fused_activation() {
    let mut rng = Rng::new(54);
    let shape = [2, 3, 2, 5];
    let special = [f32::NAN, -0.0, 0.0, -1e-30, 3.5, -7.25, f32::INFINITY];
    let vals: Vec<f32> = (0..60)
        .map(|i| special.get(i % 11).copied().unwrap_or(rng.f32(-2.0, 2.0)))
        .collect();
    // per channel: scale, bias, mean, var
    let params = [
        [1.5f32, 1.0, -0.5],
        [0.25, 0.0, 1.0],
        [0.5, 0.0, -1.0],
        [2.0, 0.999, 0.5],
    ];
    let params: Vec<Host> = params.iter().map(|p| Host::from_vals(p, &[3])).collect();
    let eps = 1e-3f32;
    let acts = [
        Activation::Relu,
        Activation::LeakyRelu { alpha: 0.25 },
        Activation::Clip {
            min: -0.5,
            max: 0.75,
        },
    ];
    for (case, kind) in KINDS.into_iter().enumerate() {
        let x = Host::f32_with(&mut rng, &vals, &shape, kind);
        let inputs = [&x, &params[0], &params[1], &params[2], &params[3]];
        let bn = |activation| Op::BatchNorm {
            epsilon: eps,
            activation,
        };
        let plain = run(&bn(None), &inputs).unwrap();
        for act in acts {
            let fused = run(&bn(Some(act)), &inputs).unwrap();
            for (i, (&got, &y)) in fused[0].vals.iter().zip(&plain[0].vals).enumerate() {
                let y = y as f32;
                let want = match act {
                    Activation::Relu => {
                        if y < 0.0 {
                            0.0
                        } else {
                            y
                        }
                    }
                    Activation::LeakyRelu { alpha } => {
                        if y < 0.0 {
                            alpha * y
                        } else {
                            y
                        }
                    }
                    Activation::Clip { min, max } => {
                        let y = if y < min { min } else { y };
                        if y > max { max } else { y }
                    }
                };
                let got = got as f32;
                let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
                assert!(
                    same,
                    "case {case}, {act:?}, element {i}: got {got}, want {want}"
                );
            }
        }
    }
}

#[test]
fn conv_and_pool_errors() {
    let mut rng = Rng::new(53);
    let x = Host::f32(&mut rng, &[1, 4, 5, 5], Kind::Contiguous);
    let w = Host::f32(&mut rng, &[2, 3, 3, 3], Kind::Contiguous);
    let window = Window2d {
        kernel: [3, 3],
        strides: [1, 1],
        pads: [0; 4],
        dilations: [1, 1],
    };
    let e = run(
        &Op::Conv2d {
            window: window.clone(),
            groups: 1,
            activation: None,
        },
        &[&x, &w],
    )
    .err()
    .unwrap();
    assert!(matches!(e, OpError::Shape { op: "conv2d", .. }), "{e}");
    let w = Host::f32(&mut rng, &[2, 2, 7, 7], Kind::Contiguous);
    assert!(matches!(
        run(
            &Op::Conv2d {
                window: window.clone(),
                groups: 2,
                activation: None,
            },
            &[&x, &w]
        ),
        Err(OpError::Shape { .. })
    ));
    let x3 = Host::f32(&mut rng, &[4, 5, 5], Kind::Contiguous);
    assert!(matches!(
        run(
            &Op::MaxPool2d {
                window: window.clone(),
                ceil_mode: false
            },
            &[&x3]
        ),
        Err(OpError::Shape { .. })
    ));
    let zero = Window2d {
        kernel: [3, 3],
        strides: [0, 1],
        pads: [0; 4],
        dilations: [1, 1],
    };
    assert!(matches!(
        run(
            &Op::MaxPool2d {
                window: zero,
                ceil_mode: false
            },
            &[&x]
        ),
        Err(OpError::Value { .. })
    ));
    let c = Host::f32(&mut rng, &[3], Kind::Contiguous);
    assert!(matches!(
        run(
            &Op::BatchNorm {
                epsilon: 1e-5,
                activation: None,
            },
            &[&x, &c, &c, &c, &c]
        ),
        Err(OpError::Shape { .. })
    ));
}
