//! ONNX models built in Rust whose attributes arrive as run-time inputs
//! (reduction axes, Clip bounds, Trilu's k, Split's sizes, Pad's pads and axes) and the composed ops BitShift,
//! LayerNormalization's statistics outputs and the two losses, against naive
//! float64 references.

mod common;

use common::reference::{self as r, Arr, assert_close, unravel};
use common::*;
use shapejit_ir::Tensor;
use shapejit_onnx::proto::{ModelProto, data_type};

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
    module.runtime().run(inputs).unwrap()
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

#[test]
fn reductions_over_axes_given_at_run_time() {
    let mut rng = r::rng(71);
    let x = r::random(&mut rng, &[2, 3, 4], -2.0, 2.0);
    for (op, init, f) in [
        (
            "ReduceSum",
            0.0,
            (|a: f64, b: f64| a + b) as fn(f64, f64) -> f64,
        ),
        ("ReduceMax", f64::NEG_INFINITY, f64::max),
        ("ReduceProd", 1.0, |a, b| a * b),
    ] {
        for keepdims in [0, 1] {
            // the axes' count is known at load, their values only at run time
            let model_for = |k: usize| {
                let n = node(
                    op,
                    &["x", "axes"],
                    &["y"],
                    vec![a_int("keepdims", keepdims)],
                );
                let len = k.to_string();
                model(
                    18,
                    graph(
                        vec![n],
                        vec![
                            vf("x", &["b", "3", "4"]),
                            vi("axes", data_type::INT64, &[len.as_str()]),
                        ],
                        vec![vf("y", &[])],
                        vec![],
                    ),
                )
            };
            for axes in [vec![1i64], vec![-1, 0], vec![0, 1, 2], vec![]] {
                let norm: Vec<usize> = if axes.is_empty() {
                    vec![0, 1, 2]
                } else {
                    axes.iter().map(|&a| a.rem_euclid(3) as usize).collect()
                };
                let want = r::reduce(&x, &norm, keepdims == 1, init, f);
                let out = run(&model_for(axes.len()), &[x.f32_tensor(), i64s(&axes)]);
                assert_close(
                    &out[0],
                    &want,
                    1e-6,
                    1e-5,
                    &format!("{op} {axes:?} {keepdims}"),
                );
            }
            let g = import(&model_for(2)).unwrap();
            let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
            let mut rt = module.runtime();
            // a repeated axis is an error naming the node, not a panic
            let err = rt.run(&[x.f32_tensor(), i64s(&[1, 1])]).unwrap_err();
            assert!(err.to_string().contains("listed twice"), "{err}");
        }
    }
    // noop_with_empty_axes: empty axes give the input (ReduceL2: |x|)
    let n = node(
        "ReduceL2",
        &["x", "axes"],
        &["y"],
        vec![a_int("noop_with_empty_axes", 1), a_int("keepdims", 0)],
    );
    let m = model(
        18,
        graph(
            vec![n],
            vec![
                vf("x", &["2", "3", "4"]),
                vi("axes", data_type::INT64, &["0"]),
            ],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let out = run(&m, &[x.f32_tensor(), i64s(&[])]);
    assert_close(&out[0], &x.map(f64::abs), 1e-6, 1e-5, "ReduceL2 noop");
    let mut m = m;
    let g = m.graph.as_mut().unwrap();
    g.input[1] = vi("axes", data_type::INT64, &["1"]);
    let out = run(&m, &[x.f32_tensor(), i64s(&[2])]);
    let want = r::reduce(&x, &[2], false, 0.0, |a, b| a + b * b).map(f64::sqrt);
    assert_close(&out[0], &want, 1e-6, 1e-5, "ReduceL2 axis 2");
    // ReduceLogSumExp without keepdims over run-time axes
    let n = node(
        "ReduceLogSumExp",
        &["x", "axes"],
        &["y"],
        vec![a_int("keepdims", 0)],
    );
    let m = model(
        18,
        graph(
            vec![n],
            vec![
                vf("x", &["2", "3", "4"]),
                vi("axes", data_type::INT64, &["2"]),
            ],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let out = run(&m, &[x.f32_tensor(), i64s(&[0, 2])]);
    let want = r::reduce(&x, &[0, 2], false, 0.0, |a, b| a + b.exp()).map(f64::ln);
    assert_close(&out[0], &want, 1e-6, 1e-5, "ReduceLogSumExp");
}

#[test]
fn clip_bounds_and_trilu_k_given_at_run_time() {
    let mut rng = r::rng(72);
    let x = r::random(&mut rng, &[3, 5], -3.0, 3.0);
    let n = node("Clip", &["x", "lo", "hi"], &["y"], vec![]);
    let m = model(
        13,
        graph(
            vec![n],
            vec![vf("x", &["3", "5"]), vf("lo", &[]), vf("hi", &[])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let out = run(
        &m,
        &[
            x.f32_tensor(),
            Tensor::scalar(-1.0f32),
            Tensor::scalar(0.5f32),
        ],
    );
    assert_close(&out[0], &x.map(|v| v.clamp(-1.0, 0.5)), 0.0, 0.0, "clip");
    // only a minimum
    let n = node("Clip", &["x", "lo"], &["y"], vec![]);
    let m = model(
        13,
        graph(
            vec![n],
            vec![vf("x", &["3", "5"]), vf("lo", &[])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let out = run(&m, &[x.f32_tensor(), Tensor::scalar(0.25f32)]);
    assert_close(&out[0], &x.map(|v| v.max(0.25)), 0.0, 0.0, "clip min");

    for upper in [0, 1] {
        let n = node("Trilu", &["x", "k"], &["y"], vec![a_int("upper", upper)]);
        let m = model(
            14,
            graph(
                vec![n],
                vec![vf("x", &["3", "5"]), vi("k", data_type::INT64, &[])],
                vec![vf("y", &[])],
                vec![],
            ),
        );
        for k in [-2i64, 0, 1, 7] {
            let out = run(&m, &[x.f32_tensor(), Tensor::scalar(k)]);
            let want = Arr::new(
                &[3, 5],
                (0..15)
                    .map(|f| {
                        let (i, j) = ((f / 5) as i64, (f % 5) as i64);
                        let keep = if upper == 1 { j - i >= k } else { j - i <= k };
                        if keep { x.data[f] } else { 0.0 }
                    })
                    .collect(),
            );
            assert_close(&out[0], &want, 0.0, 0.0, &format!("trilu {upper} {k}"));
        }
    }
}

#[test]
fn bit_shifts_wrap_in_their_type() {
    for (dir, f) in [
        (
            "LEFT",
            (|x: u8, s: u8| x.wrapping_shl(u32::from(s))) as fn(u8, u8) -> u8,
        ),
        ("RIGHT", |x, s| x >> s),
    ] {
        let n = node(
            "BitShift",
            &["x", "s"],
            &["y"],
            vec![a_str("direction", dir)],
        );
        let m = model(
            11,
            graph(
                vec![n],
                vec![
                    vi("x", data_type::UINT8, &["4"]),
                    vi("s", data_type::UINT8, &["4"]),
                ],
                vec![vi("y", data_type::UINT8, &["4"])],
                vec![],
            ),
        );
        let (x, s) = ([255u8, 16, 3, 128], [1u8, 2, 7, 0]);
        let out = run(
            &m,
            &[
                Tensor::from_vec(x.to_vec(), &[4]).unwrap(),
                Tensor::from_vec(s.to_vec(), &[4]).unwrap(),
            ],
        );
        let want: Vec<u8> = x.iter().zip(&s).map(|(&x, &s)| f(x, s)).collect();
        assert_eq!(out[0].as_slice::<u8>().unwrap(), want.as_slice(), "{dir}");
    }
}

#[test]
fn split_by_sizes_given_at_run_time() {
    // x [2, 7] split along axis 1 into three parts whose sizes come at run time
    let x: Vec<f32> = (0..14).map(|v| v as f32).collect();
    let n = node(
        "Split",
        &["x", "s"],
        &["a", "b", "c"],
        vec![a_int("axis", 1)],
    );
    let m = model(
        18,
        graph(
            vec![n],
            vec![vf("x", &["2", "7"]), vi("s", data_type::INT64, &["3"])],
            vec![vf("a", &[]), vf("b", &[]), vf("c", &[])],
            vec![],
        ),
    );
    for sizes in [[2i64, 0, 5], [3, 3, 1], [0, 7, 0]] {
        let out = run(
            &m,
            &[Tensor::from_vec(x.clone(), &[2, 7]).unwrap(), i64s(&sizes)],
        );
        let mut start = 0;
        for (k, &len) in sizes.iter().enumerate() {
            let want: Vec<f32> = (0..2)
                .flat_map(|r| (start..start + len).map(move |c| (r * 7 + c) as f32))
                .collect();
            assert_eq!(out[k].shape(), &[2, len as usize], "{sizes:?} part {k}");
            assert_eq!(
                out[k].as_slice::<f32>().unwrap(),
                want.as_slice(),
                "{sizes:?} part {k}"
            );
            start += len;
        }
    }
}

#[test]
fn pad_by_pads_and_axes_given_at_run_time() {
    // x [3, 4]; the source index of output index o along an axis of size n
    // padded by `begin`, or None for the constant
    let source = |mode: &str, o: i64, begin: i64, n: i64| -> Option<i64> {
        let i = o - begin;
        match mode {
            "constant" => (0..n).contains(&i).then_some(i),
            "edge" => Some(i.clamp(0, n - 1)),
            "wrap" => Some(i.rem_euclid(n)),
            // reflect: mirror without repeating the edge
            _ => {
                let p = 2 * (n - 1);
                let m = i.rem_euclid(p);
                Some(if m < n { m } else { p - m })
            }
        }
    };
    let x: Vec<f32> = (0..12).map(|v| v as f32 * 1.5 - 4.0).collect();
    let (h, w) = (3i64, 4i64);
    for mode in ["constant", "edge", "reflect", "wrap"] {
        for (pads, axes) in [
            (vec![1i64, 2, 2, 1], None),
            (vec![0, 3, 0, -2], None),
            (vec![2, 1], Some(vec![-1i64])),
        ] {
            if mode != "constant" && pads.iter().any(|&p| p < 0) {
                continue;
            }
            let mut ins = vec!["x", "pads", "value"];
            let mut vis = vec![
                vf("x", &["3", "4"]),
                vi("pads", data_type::INT64, &["?"]),
                vf("value", &[]),
            ];
            if axes.is_some() {
                ins.push("axes");
                vis.push(vi("axes", data_type::INT64, &["?"]));
            }
            let n = node("Pad", &ins, &["y"], vec![a_str("mode", mode)]);
            let m = model(25, graph(vec![n], vis, vec![vf("y", &[])], vec![]));
            let mut inputs = vec![
                Tensor::from_vec(x.clone(), &[3, 4]).unwrap(),
                i64s(&pads),
                Tensor::scalar(9.5f32),
            ];
            if let Some(a) = &axes {
                inputs.push(i64s(a));
            }
            let out = run(&m, &inputs);
            let full = match &axes {
                None => pads.clone(),
                Some(_) => vec![0, pads[0], 0, pads[1]],
            };
            let (oh, ow) = (h + full[0] + full[2], w + full[1] + full[3]);
            let mut want = Vec::new();
            for r in 0..oh {
                for c in 0..ow {
                    want.push(
                        match (source(mode, r, full[0], h), source(mode, c, full[1], w)) {
                            (Some(i), Some(j)) => x[(i * w + j) as usize],
                            _ => 9.5,
                        },
                    );
                }
            }
            let what = format!("{mode} {pads:?} {axes:?}");
            assert_eq!(out[0].shape(), &[oh as usize, ow as usize], "{what}");
            assert_eq!(out[0].as_slice::<f32>().unwrap(), want.as_slice(), "{what}");
        }
    }
}

#[test]
fn center_crop_pad_centers_each_axis() {
    // x [5, 4, 2]; axes 0 and 1 to sizes given at run time; an odd difference
    // puts the extra element (cropped or padded) at the end
    let x: Vec<f32> = (0..40).map(|v| v as f32 + 1.0).collect();
    let n = node(
        "CenterCropPad",
        &["x", "s"],
        &["y"],
        vec![a_ints("axes", &[0, 1])],
    );
    let m = model(
        18,
        graph(
            vec![n],
            vec![vf("x", &["5", "4", "2"]), vi("s", data_type::INT64, &["2"])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    // source index of output o along an axis of `dim` resized to `size`
    let source = |o: i64, dim: i64, size: i64| -> Option<i64> {
        let i = if size <= dim {
            o + (dim - size) / 2
        } else {
            o - (size - dim) / 2
        };
        (0..dim).contains(&i).then_some(i)
    };
    for size in [[3i64, 7], [6, 1], [5, 4], [2, 2]] {
        let out = run(
            &m,
            &[
                Tensor::from_vec(x.clone(), &[5, 4, 2]).unwrap(),
                i64s(&size),
            ],
        );
        let mut want = Vec::new();
        for a in 0..size[0] {
            for b in 0..size[1] {
                for c in 0..2 {
                    want.push(match (source(a, 5, size[0]), source(b, 4, size[1])) {
                        (Some(i), Some(j)) => x[(i * 8 + j * 2 + c) as usize],
                        _ => 0.0,
                    });
                }
            }
        }
        assert_eq!(
            out[0].shape(),
            &[size[0] as usize, size[1] as usize, 2],
            "{size:?}"
        );
        assert_eq!(
            out[0].as_slice::<f32>().unwrap(),
            want.as_slice(),
            "{size:?}"
        );
    }
}

#[test]
fn bit_shifts_out_of_range_give_zero_or_the_sign() {
    // i8: width 8; a shift < 0 or >= 8 gives 0, or -1 for a negative x shifted right
    let shift = |x: i8, s: i8, left: bool| -> i8 {
        if !(0..8).contains(&s) {
            return if !left && x < 0 { -1 } else { 0 };
        }
        if left {
            x.wrapping_shl(s as u32)
        } else {
            x >> s
        }
    };
    let (x, s) = ([-8i8, 4, -1, 100, -128, 5], [8i8, 9, 127, -1, 3, 7]);
    for (dir, left) in [("LEFT", true), ("RIGHT", false)] {
        let n = node(
            "BitShift",
            &["x", "s"],
            &["y"],
            vec![a_str("direction", dir)],
        );
        let m = model(
            25,
            graph(
                vec![n],
                vec![
                    vi("x", data_type::INT8, &["6"]),
                    vi("s", data_type::INT8, &["6"]),
                ],
                vec![vi("y", data_type::INT8, &["6"])],
                vec![],
            ),
        );
        let out = run(
            &m,
            &[
                Tensor::from_vec(x.to_vec(), &[6]).unwrap(),
                Tensor::from_vec(s.to_vec(), &[6]).unwrap(),
            ],
        );
        let want: Vec<i8> = x.iter().zip(&s).map(|(&x, &s)| shift(x, s, left)).collect();
        assert_eq!(out[0].as_slice::<i8>().unwrap(), want.as_slice(), "{dir}");
    }
}

#[test]
fn layer_norm_gives_its_mean_and_inverse_deviation() {
    let mut rng = r::rng(73);
    let x = r::random(&mut rng, &[2, 3, 4], -2.0, 2.0);
    let scale = r::random(&mut rng, &[3, 4], 0.5, 1.5);
    let n = node(
        "LayerNormalization",
        &["x", "s"],
        &["y", "mean", "inv"],
        vec![a_int("axis", 1), a_float("epsilon", 1e-3)],
    );
    let s: Vec<f32> = scale.data.iter().map(|&v| v as f32).collect();
    let m = model(
        17,
        graph(
            vec![n],
            vec![vf("x", &["2", "3", "4"])],
            vec![vf("y", &[]), vf("mean", &[]), vf("inv", &[])],
            vec![tf32("s", &[3, 4], &s)],
        ),
    );
    let out = run(&m, &[x.f32_tensor()]);
    let mean = r::mean(&x, &[1, 2], true);
    let d = r::binary(&x, &mean, |a, m| a - m);
    let var = r::mean(&d.map(|v| v * v), &[1, 2], true);
    let inv = var.map(|v| 1.0 / (v + 1e-3f32 as f64).sqrt());
    let y = r::binary(&r::binary(&d, &inv, |a, b| a * b), &scale, |a, b| a * b);
    assert_close(&out[0], &y, 1e-5, 1e-4, "y");
    assert_close(&out[1], &mean, 1e-6, 1e-5, "mean");
    assert_close(&out[2], &inv, 1e-6, 1e-4, "inv_std_dev");
}

#[test]
fn losses_match_their_definitions() {
    let mut rng = r::rng(74);
    let (n, c, d) = (3usize, 4usize, 2usize);
    let scores = r::random(&mut rng, &[n, c, d], -2.0, 2.0);
    let targets = [0i64, 3, -1, 2, 1, 3];
    let weights = [0.5f32, 1.0, 2.0, 0.25];
    let log_p = {
        let sm = r::softmax(&scores, 1);
        sm.map(f64::ln)
    };
    for reduction in ["none", "sum", "mean"] {
        for weighted in [false, true] {
            // the reference: per element −x[n, t, d]·w[t], 0 where t == −1
            let (mut loss, mut wsum) = (Vec::new(), 0.0);
            for (f, &t) in targets.iter().enumerate() {
                let idx = unravel(f, &[n, d]);
                if t == -1 {
                    loss.push(0.0);
                    continue;
                }
                let w = if weighted {
                    weights[t as usize] as f64
                } else {
                    1.0
                };
                wsum += w;
                loss.push(-log_p.at(&[idx[0], t as usize, idx[1]]) * w);
            }
            let want = match reduction {
                "none" => Arr::new(&[n, d], loss),
                "sum" => Arr::new(&[], vec![loss.iter().sum()]),
                _ => Arr::new(&[], vec![loss.iter().sum::<f64>() / wsum]),
            };
            let mut ins = vec!["x", "t"];
            let mut inits = vec![ti64("t", &[n as i64, d as i64], &targets)];
            if weighted {
                ins.push("w");
                inits.push(tf32("w", &[c as i64], &weights));
            }
            let attrs = || vec![a_str("reduction", reduction), a_int("ignore_index", -1)];
            // SoftmaxCrossEntropyLoss on the scores, with its log_prob output
            let sce = node("SoftmaxCrossEntropyLoss", &ins, &["y", "lp"], attrs());
            let m = model(
                13,
                graph(
                    vec![sce],
                    vec![vf("x", &["3", "4", "2"])],
                    vec![vf("y", &[]), vf("lp", &[])],
                    inits.clone(),
                ),
            );
            let out = run(&m, &[scores.f32_tensor()]);
            let what = format!("sce {reduction} weighted={weighted}");
            assert_close(&out[0], &want, 1e-6, 1e-5, &what);
            assert_close(&out[1], &log_p, 1e-6, 1e-5, "log_prob");
            // NegativeLogLikelihoodLoss on the log-probabilities
            let nll = node("NegativeLogLikelihoodLoss", &ins, &["y"], attrs());
            let m = model(
                13,
                graph(
                    vec![nll],
                    vec![vf("x", &["3", "4", "2"])],
                    vec![vf("y", &[])],
                    inits,
                ),
            );
            let out = run(&m, &[log_p.f32_tensor()]);
            assert_close(
                &out[0],
                &want,
                1e-6,
                1e-5,
                &format!("nll {reduction} {weighted}"),
            );
        }
    }
}

#[test]
fn pad_value_given_at_run_time() {
    let mut rng = r::rng(75);
    let x = r::random(&mut rng, &[2, 3], -1.0, 1.0);
    let n = node("Pad", &["x", "pads", "v"], &["y"], vec![]);
    let m = model(
        18,
        graph(
            vec![n],
            vec![vf("x", &["2", "3"]), vf("v", &[])],
            vec![vf("y", &[])],
            vec![ti64("pads", &[4], &[1, 0, 0, 2])],
        ),
    );
    let out = run(&m, &[x.f32_tensor(), Tensor::scalar(7.5f32)]);
    assert_close(&out[0], &r::pad(&x, &[1, 0, 0, 2], 7.5), 0.0, 0.0, "pad");
}

#[test]
fn float_mod_takes_the_divisors_sign() {
    let a = [5.5f32, -5.5, 5.5, -5.5, 3.0, -2.0, 0.0];
    let b = [2.0f32, 2.0, -2.0, -2.0, f32::INFINITY, f32::INFINITY, 3.0];
    let n = node("Mod", &["a", "b"], &["y"], vec![a_int("fmod", 0)]);
    let m = model(
        13,
        graph(
            vec![n],
            vec![vf("a", &["7"]), vf("b", &["7"])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(a.to_vec(), &[7]).unwrap(),
            Tensor::from_vec(b.to_vec(), &[7]).unwrap(),
        ],
    );
    // NumPy's mod: the remainder of floor division
    let want: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| {
            let (a, b) = (a as f64, b as f64);
            let r = a % b;
            if r != 0.0 && (r < 0.0) != (b < 0.0) {
                r + b
            } else {
                r
            }
        })
        .collect();
    // exact, infinities included
    assert_eq!(out[0].to_f64_vec(), want, "mod");
}

#[test]
fn cumulative_sums_and_products() {
    let mut rng = r::rng(76);
    let x = r::random(&mut rng, &[2, 3, 4], 0.5, 1.5);
    for (op, opset) in [("CumSum", 14), ("CumProd", 26)] {
        for (exclusive, reverse) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let n = node(
                op,
                &["x", "axis"],
                &["y"],
                vec![a_int("exclusive", exclusive), a_int("reverse", reverse)],
            );
            let m = model(
                opset,
                graph(
                    vec![n],
                    vec![vf("x", &["2", "3", "4"]), vi("axis", data_type::INT32, &[])],
                    vec![vf("y", &[])],
                    vec![],
                ),
            );
            for axis in [0i32, 1, -1] {
                let a = axis.rem_euclid(3) as usize;
                let want = Arr::new(
                    &[2, 3, 4],
                    (0..24)
                        .map(|f| {
                            let idx = unravel(f, &[2, 3, 4]);
                            let mut acc = if op == "CumSum" { 0.0 } else { 1.0 };
                            for k in 0..x.shape[a] {
                                let before = if reverse == 1 { k > idx[a] } else { k < idx[a] };
                                if before || (exclusive == 0 && k == idx[a]) {
                                    let mut j = idx.clone();
                                    j[a] = k;
                                    acc = if op == "CumSum" {
                                        acc + x.at(&j)
                                    } else {
                                        acc * x.at(&j)
                                    };
                                }
                            }
                            acc
                        })
                        .collect(),
                );
                let out = run(&m, &[x.f32_tensor(), Tensor::scalar(axis)]);
                let what = format!("{op} axis {axis} exclusive {exclusive} reverse {reverse}");
                assert_close(&out[0], &want, 1e-6, 1e-5, &what);
            }
        }
    }
    // integers wrap in their own type
    let n = node("CumSum", &["x", "axis"], &["y"], vec![]);
    let m = model(
        14,
        graph(
            vec![n],
            vec![
                vi("x", data_type::INT8, &["3"]),
                vi("axis", data_type::INT64, &["1"]),
            ],
            vec![vi("y", data_type::INT8, &["3"])],
            vec![],
        ),
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(vec![100i8, 100, -50], &[3]).unwrap(),
            i64s(&[0]),
        ],
    );
    assert_eq!(out[0].as_slice::<i8>().unwrap(), &[100, -56, -106]);
}

/// Naive NCDHW convolution (groups, strides, dilations, pads `[d0, h0, w0, d1, h1, w1]`)
/// or pool (`w` = `None`: max or mean over the window's in-bounds cells, or over all
/// cells, padding counted as 0, with `count_pad`).
fn naive3d(
    x: &Arr,
    w: Option<&Arr>,
    (kernel, strides, dil, pads): ([usize; 3], [usize; 3], [usize; 3], [usize; 6]),
    (groups, max, count_pad): (usize, bool, bool),
) -> Arr {
    let (n, c) = (x.shape[0], x.shape[1]);
    let c_out = w.map_or(c, |w| w.shape[0]);
    let osz: Vec<usize> = (0..3)
        .map(|i| {
            (x.shape[2 + i] + pads[i] + pads[i + 3] - (kernel[i] - 1) * dil[i] - 1) / strides[i] + 1
        })
        .collect();
    let shape = [n, c_out, osz[0], osz[1], osz[2]];
    let data = (0..shape.iter().product::<usize>())
        .map(|f| {
            let o = unravel(f, &shape);
            let (mut acc, mut count) = (if max { f64::NEG_INFINITY } else { 0.0 }, 0usize);
            let cin_g = c / groups;
            let chans: Vec<usize> = match w {
                Some(_) => {
                    let g = o[1] / (c_out / groups);
                    (g * cin_g..(g + 1) * cin_g).collect()
                }
                None => vec![o[1]],
            };
            for &ci in &chans {
                for a in 0..kernel[0] {
                    for b in 0..kernel[1] {
                        for e in 0..kernel[2] {
                            let k = [a, b, e];
                            let pos: Vec<i64> = (0..3)
                                .map(|i| {
                                    (o[2 + i] * strides[i] + k[i] * dil[i]) as i64 - pads[i] as i64
                                })
                                .collect();
                            let inside =
                                (0..3).all(|i| pos[i] >= 0 && pos[i] < x.shape[2 + i] as i64);
                            if !inside {
                                if count_pad {
                                    count += 1;
                                }
                                continue;
                            }
                            let v = x.at(&[
                                o[0],
                                ci,
                                pos[0] as usize,
                                pos[1] as usize,
                                pos[2] as usize,
                            ]);
                            count += 1;
                            acc = match w {
                                Some(w) => acc + v * w.at(&[o[1], ci - chans[0], a, b, e]),
                                None if max => acc.max(v),
                                None => acc + v,
                            };
                        }
                    }
                }
            }
            if w.is_none() && !max {
                acc / count as f64
            } else {
                acc
            }
        })
        .collect();
    Arr::new(&shape, data)
}

#[test]
fn three_d_convolutions_and_pools_fold_depth_into_the_batch() {
    let mut rng = r::rng(77);
    let x = r::random(&mut rng, &[2, 4, 5, 6, 5], -1.0, 1.0);
    let ints = |v: &[usize]| v.iter().map(|&u| u as i64).collect::<Vec<i64>>();
    let cases = [
        ([3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1, 1, 1, 1], 1),
        ([2, 3, 2], [2, 1, 2], [1, 2, 1], [0, 1, 0, 1, 0, 1], 2),
        ([3, 1, 2], [1, 2, 1], [2, 1, 1], [2, 0, 1, 0, 0, 1], 4),
    ];
    for (kernel, strides, dil, pads, groups) in cases {
        let geo = (kernel, strides, dil, pads);
        let attrs = || {
            vec![
                a_ints("kernel_shape", &ints(&kernel)),
                a_ints("strides", &ints(&strides)),
                a_ints("dilations", &ints(&dil)),
                a_ints("pads", &ints(&pads)),
            ]
        };
        // conv with bias
        let wshape = [8, 4 / groups, kernel[0], kernel[1], kernel[2]];
        let w = r::random(&mut rng, &wshape, -1.0, 1.0);
        let wf: Vec<f32> = w.data.iter().map(|&v| v as f32).collect();
        let mut conv_attrs = attrs();
        conv_attrs.push(a_int("group", groups as i64));
        let n = node("Conv", &["x", "w", "b"], &["y"], conv_attrs);
        let m = model(
            11,
            graph(
                vec![n],
                vec![vf("x", &["n", "4", "5", "6", "5"])],
                vec![vf("y", &[])],
                vec![
                    tf32("w", &ints(&wshape), &wf),
                    tf32("b", &[8], &[0.5, -0.5, 1.0, 0.0, 0.25, 2.0, -1.0, 0.75]),
                ],
            ),
        );
        let out = run(&m, &[x.f32_tensor()]);
        let want = naive3d(&x, Some(&w), geo, (groups, false, false));
        let bias = Arr::new(
            &[1, 8, 1, 1, 1],
            vec![0.5, -0.5, 1.0, 0.0, 0.25, 2.0, -1.0, 0.75],
        );
        let want = r::binary(&want, &bias, |a, b| a + b);
        assert_close(&out[0], &want, 1e-5, 1e-4, &format!("conv {kernel:?}"));
        // pools (average pools count the padding)
        for (op, max) in [("MaxPool", true), ("AveragePool", false)] {
            let mut pool_attrs = attrs();
            if !max {
                pool_attrs.retain(|a| a.name != "dilations");
                pool_attrs.push(a_int("count_include_pad", 1));
            }
            let n = node(op, &["x"], &["y"], pool_attrs);
            let m = model(
                19,
                graph(
                    vec![n],
                    vec![vf("x", &["n", "4", "5", "6", "5"])],
                    vec![vf("y", &[])],
                    vec![],
                ),
            );
            let out = run(&m, &[x.f32_tensor()]);
            let geo = if max {
                geo
            } else {
                (kernel, strides, [1; 3], pads)
            };
            let want = naive3d(&x, None, geo, (1, max, !max));
            assert_close(&out[0], &want, 1e-6, 1e-5, &format!("{op} {kernel:?}"));
        }
    }
}

#[test]
fn einsum_is_a_broadcast_product_and_a_sum() {
    let mut rng = r::rng(78);
    let a = r::random(&mut rng, &[2, 3, 4], -1.0, 1.0);
    let b = r::random(&mut rng, &[2, 4, 5], -1.0, 1.0);
    let run_eq = |eq: &str, xs: &[&Arr]| {
        let names = ["a", "b"];
        let ins: Vec<_> = xs
            .iter()
            .zip(names)
            .map(|(x, n)| {
                let dims: Vec<String> = x.shape.iter().map(usize::to_string).collect();
                let dims: Vec<&str> = dims.iter().map(String::as_str).collect();
                vf(n, &dims)
            })
            .collect();
        let n = node(
            "Einsum",
            &names[..xs.len()],
            &["y"],
            vec![a_str("equation", eq)],
        );
        let m = model(12, graph(vec![n], ins, vec![vf("y", &[])], vec![]));
        let inputs: Vec<Tensor> = xs.iter().map(|x| x.f32_tensor()).collect();
        run(&m, &inputs).remove(0)
    };
    // batch matmul
    let want = Arr::new(
        &[2, 3, 5],
        (0..30)
            .map(|f| {
                let i = unravel(f, &[2, 3, 5]);
                (0..4)
                    .map(|j| a.at(&[i[0], i[1], j]) * b.at(&[i[0], j, i[2]]))
                    .sum()
            })
            .collect(),
    );
    assert_close(
        &run_eq("bij, bjk -> bik", &[&a, &b]),
        &want,
        1e-6,
        1e-5,
        "bmm",
    );
    // transpose, sums (explicit and implicit output)
    let t = Arr::new(
        &[4, 2, 3],
        (0..24)
            .map(|f| {
                let i = unravel(f, &[4, 2, 3]);
                a.at(&[i[1], i[2], i[0]])
            })
            .collect(),
    );
    assert_close(&run_eq("abc->cab", &[&a]), &t, 0.0, 0.0, "transpose");
    let sum_b = r::reduce(&a, &[1], false, 0.0, |x, y| x + y);
    assert_close(&run_eq("abc->ac", &[&a]), &sum_b, 1e-6, 1e-5, "sum");
    assert_close(&run_eq("abc", &[&a]), &a, 0.0, 0.0, "implicit identity");
    let total = r::reduce(&a, &[0, 1, 2], false, 0.0, |x, y| x + y);
    assert_close(&run_eq("abc->", &[&a]), &total, 1e-6, 1e-5, "total");
}

#[test]
fn one_hot_depth_given_at_run_time() {
    let n = node("OneHot", &["i", "d", "v"], &["y"], vec![a_int("axis", 0)]);
    let m = model(
        11,
        graph(
            vec![n],
            vec![vi("i", data_type::INT64, &["3"]), vf("d", &["1"])],
            vec![vf("y", &[])],
            vec![tf32("v", &[2], &[-1.0, 5.0])],
        ),
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(vec![0i64, -1, 7], &[3]).unwrap(),
            Tensor::from_vec(vec![4.0f32], &[1]).unwrap(),
        ],
    );
    // axis 0: y[k, j] = on where indices[j] (wrapped) == k
    let want = Arr::new(
        &[4, 3],
        (0..12)
            .map(|f| {
                let (k, j) = (f / 3, f % 3);
                let idx = [0i64, 3, 7][j];
                if idx == k as i64 { 5.0 } else { -1.0 }
            })
            .collect(),
    );
    assert_close(&out[0], &want, 0.0, 0.0, "one_hot");
}

#[test]
fn unsqueeze_axes_given_at_run_time() {
    let mut rng = r::rng(79);
    let x = r::random(&mut rng, &[3, 4], -1.0, 1.0);
    for (axes, shape) in [
        (vec![0i64], vec![1usize, 3, 4]),
        (vec![1], vec![3, 1, 4]),
        (vec![-1], vec![3, 4, 1]),
        (vec![3, 0], vec![1, 3, 4, 1]),
        (vec![1, 2, 4], vec![3, 1, 1, 4, 1]),
    ] {
        let len = axes.len().to_string();
        let n = node("Unsqueeze", &["x", "axes"], &["y"], vec![]);
        let m = model(
            13,
            graph(
                vec![n],
                vec![
                    vf("x", &["3", "4"]),
                    vi("axes", data_type::INT64, &[len.as_str()]),
                ],
                vec![vf("y", &[])],
                vec![],
            ),
        );
        let out = run(&m, &[x.f32_tensor(), i64s(&axes)]);
        assert_close(
            &out[0],
            &x.reshape(&shape),
            0.0,
            0.0,
            &format!("unsqueeze {axes:?}"),
        );
    }
}

#[test]
fn top_k_with_k_given_at_run_time() {
    let x = Arr::new(&[2, 4], vec![3.0, 1.0, 3.0, 2.0, -1.0, 5.0, 0.0, 5.0]);
    let n = node("TopK", &["x", "k"], &["v", "i"], vec![a_int("largest", 1)]);
    let m = model(
        11,
        graph(
            vec![n],
            vec![vf("x", &["2", "4"]), vi("k", data_type::INT64, &["1"])],
            vec![vf("v", &[]), vi("i", data_type::INT64, &[])],
            vec![],
        ),
    );
    let out = run(&m, &[x.f32_tensor(), i64s(&[3])]);
    // worked by hand: ties keep the smaller index first
    assert_close(
        &out[0],
        &Arr::new(&[2, 3], vec![3.0, 3.0, 2.0, 5.0, 5.0, 0.0]),
        0.0,
        0.0,
        "values",
    );
    assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 2, 3, 1, 3, 2]);
}
