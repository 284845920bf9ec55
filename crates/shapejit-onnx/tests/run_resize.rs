//! `Resize` with constant or run-time scales and sizes, against naive references written
//! out here per output element: nearest by flooring or rounding the source
//! coordinate, linear as a clamped two-point lerp, cubic with the Keys kernel
//! over four clamped neighbours.

mod common;

use common::reference::{self as r, Arr};
use common::*;
use shapejit_ir::Tensor;
use shapejit_onnx::proto::{AttributeProto, ModelProto, TensorProto};

/// One output element along an axis: `(read input index (clamped), n_in, n_out, output index)`.
type Along<'a> = &'a dyn Fn(&dyn Fn(i64) -> f64, usize, usize, usize) -> f64;

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
    module.runtime().run(inputs).unwrap()
}

/// `Resize(x, "", scales)` or `Resize(x, "", "", sizes)` on `x [1, 1, h, w]`.
fn resize_model(
    h: usize,
    w: usize,
    scales: Option<[f32; 4]>,
    sizes: Option<[i64; 4]>,
    attrs: Vec<AttributeProto>,
) -> ModelProto {
    let mut inits: Vec<TensorProto> = Vec::new();
    let mut inputs = vec!["x", ""];
    match (scales, sizes) {
        (Some(s), _) => {
            inits.push(tf32("scales", &[4], &s));
            inputs.push("scales");
        }
        (None, Some(s)) => {
            inits.push(ti64("sizes", &[4], &s));
            inputs.extend(["", "sizes"]);
        }
        _ => unreachable!(),
    }
    let n = node("Resize", &inputs, &["y"], attrs);
    let (h, w) = (h.to_string(), w.to_string());
    model(
        19,
        graph(
            vec![n],
            vec![vf("x", &["1", "1", &h, &w])],
            vec![vf("y", &[])],
            inits,
        ),
    )
}

/// A separable resize of `x [h, w]` by per-axis functions of the output index.
fn separable(x: &Arr, oh: usize, ow: usize, along: Along) -> Vec<f64> {
    let (h, w) = (x.shape[0], x.shape[1]);
    // rows first, then columns (the order the axes come in)
    let mut tmp = vec![0.0; oh * w];
    for c in 0..w {
        for o in 0..oh {
            tmp[o * w + c] = along(
                &|i| x.data[i.clamp(0, h as i64 - 1) as usize * w + c],
                h,
                oh,
                o,
            );
        }
    }
    let mut out = vec![0.0; oh * ow];
    for rr in 0..oh {
        for o in 0..ow {
            out[rr * ow + o] = along(
                &|i| tmp[rr * w + i.clamp(0, w as i64 - 1) as usize],
                w,
                ow,
                o,
            );
        }
    }
    out
}

fn close(got: &Tensor, want: &[f64]) {
    let got = got.to_f64_vec();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "[{i}] {g} vs {w}");
    }
}

#[test]
fn nearest_linear_and_cubic_against_per_element_references() {
    let mut rng = r::rng(31);
    let (h, w) = (4, 5);
    let x = r::random(&mut rng, &[h, w], -2.0, 2.0);
    let input = x.f32_tensor().reshaped(&[1, 1, h, w]).unwrap();

    // nearest, asymmetric, floor: source floor(o / scale)
    let (sh, sw) = (2.0f32, 1.5f32);
    let (oh, ow) = ((h as f32 * sh) as usize, (w as f32 * sw) as usize);
    let m = resize_model(
        h,
        w,
        Some([1.0, 1.0, sh, sw]),
        None,
        vec![
            a_str("mode", "nearest"),
            a_str("coordinate_transformation_mode", "asymmetric"),
            a_str("nearest_mode", "floor"),
        ],
    );
    let out = run(&m, std::slice::from_ref(&input));
    assert_eq!(out[0].shape(), &[1, 1, oh, ow]);
    let want = separable(&x, oh, ow, &|at, n_in, _n_out, o| {
        let scale = if n_in == h {
            f64::from(sh)
        } else {
            f64::from(sw)
        };
        at((o as f64 / scale).floor() as i64)
    });
    close(&out[0], &want);

    // linear, half_pixel, downscale to sizes: a clamped lerp
    let (oh, ow) = (3usize, 2usize);
    let m = resize_model(
        h,
        w,
        None,
        Some([1, 1, oh as i64, ow as i64]),
        vec![a_str("mode", "linear")],
    );
    let out = run(&m, std::slice::from_ref(&input));
    let want = separable(&x, oh, ow, &|at, n_in, n_out, o| {
        let scale = n_out as f64 / n_in as f64;
        let src = ((o as f64 + 0.5) / scale - 0.5).clamp(0.0, n_in as f64 - 1.0);
        let i0 = src.floor();
        let t = src - i0;
        at(i0 as i64) * (1.0 - t) + at(i0 as i64 + 1) * t
    });
    close(&out[0], &want);

    // cubic, align_corners, upscale by sizes: Keys kernel with a = -0.5
    let (oh, ow) = (7usize, 6usize);
    let m = resize_model(
        h,
        w,
        None,
        Some([1, 1, oh as i64, ow as i64]),
        vec![
            a_str("mode", "cubic"),
            a_str("coordinate_transformation_mode", "align_corners"),
            a_float("cubic_coeff_a", -0.5),
        ],
    );
    let out = run(&m, std::slice::from_ref(&input));
    let keys = |d: f64| {
        let (a, d) = (-0.5, d.abs());
        if d <= 1.0 {
            (a + 2.0) * d.powi(3) - (a + 3.0) * d * d + 1.0
        } else if d < 2.0 {
            a * d.powi(3) - 5.0 * a * d * d + 8.0 * a * d - 4.0 * a
        } else {
            0.0
        }
    };
    let want = separable(&x, oh, ow, &|at, n_in, n_out, o| {
        let src = o as f64 * (n_in as f64 - 1.0) / (n_out as f64 - 1.0);
        let i0 = src.floor() as i64;
        (i0 - 1..=i0 + 2)
            .map(|i| keys(src - i as f64) * at(i))
            .sum()
    });
    close(&out[0], &want);
}

#[test]
fn resize_errors_name_the_node() {
    let m = resize_model(
        4,
        5,
        Some([1.0, 1.0, 2.0, 2.0]),
        None,
        vec![a_str("mode", "bicubic")],
    );
    let err = import(&m).unwrap_err().to_string();
    assert!(err.contains("Resize") && err.contains("bicubic"), "{err}");
    let m = resize_model(
        4,
        5,
        Some([1.0, 1.0, 0.5, 0.5]),
        None,
        vec![a_str("mode", "linear"), a_int("antialias", 1)],
    );
    let err = import(&m).unwrap_err().to_string();
    assert!(err.contains("Resize") && err.contains("antialias"), "{err}");
}

#[test]
fn scales_given_at_run_time_resize_each_call_to_its_own_shape() {
    // nearest, half_pixel, round_prefer_ceil: source (o + 0.5) / scale - 0.5,
    // ties (x.5) up, clamped
    let n = node(
        "Resize",
        &["x", "", "scales"],
        &["y"],
        vec![
            a_str("mode", "nearest"),
            a_str("nearest_mode", "round_prefer_ceil"),
        ],
    );
    let m = model(
        19,
        graph(
            vec![n],
            vec![vf("x", &["1", "1", "3", "4"]), vf("scales", &["4"])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let g = import(&m).unwrap();
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
    let mut rng = r::rng(32);
    let x = r::random(&mut rng, &[3, 4], -1.0, 1.0);
    let input = x.f32_tensor().reshaped(&[1, 1, 3, 4]).unwrap();
    for (sh, sw) in [(2.0f32, 0.5f32), (1.5, 3.0), (0.6, 1.0)] {
        let scales = Tensor::from_vec(vec![1.0f32, 1.0, sh, sw], &[4]).unwrap();
        let out = module.runtime().run(&[input.clone(), scales]).unwrap();
        let (oh, ow) = ((3.0 * sh) as usize, (4.0 * sw) as usize);
        assert_eq!(out[0].shape(), &[1, 1, oh, ow], "{sh} x {sw}");
        let want = separable(&x, oh, ow, &|at, n_in, _n_out, o| {
            let scale = f64::from(if n_in == 3 { sh } else { sw });
            let src = (o as f64 + 0.5) / scale - 0.5;
            let i = if src - src.floor() >= 0.5 {
                src.floor() + 1.0
            } else {
                src.floor()
            };
            at(i as i64)
        });
        close(&out[0], &want);
    }
}
