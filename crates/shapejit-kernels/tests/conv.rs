//! `conv2d` and `pool2d` against naive loops in f64: strides, pads, dilations,
//! groups (1, 2, depthwise with 1 and 2 channels per group, the direct path at
//! many plane sizes), 1×1 (the in-place path), batch 1 and 7, with and without
//! bias, each with fused activations (bit-identical to the activation after the
//! conv), inputs whose rows are strided; pools with NaN, padding and both average divisors. Run at every
//! `SHAPEJIT_CPU` level.

mod support;

use shapejit_kernels::View;
use shapejit_kernels::conv::{
    ConvParams, GEMM_MIN_CHANNELS, PackedChannels, PackedConvWeights, Pool, WINOGRAD_MIN_CHANNELS,
    WINOGRAD_MIN_OUTPUTS, Window, conv2d, conv2d_scratch_len, pool2d, pool2d_scratch_len,
    takes_gemm, takes_transposed, takes_winograd,
};
use shapejit_kernels::packed::Activation;
use shapejit_kernels::view::StridedShape;

fn data(n: usize, seed: u32) -> Vec<f32> {
    support::data(n, seed, -1.0, 1.0)
}

fn out_size(size: usize, k: usize, s: usize, pads: (usize, usize), d: usize) -> usize {
    (size + pads.0 + pads.1 - d * (k - 1) - 1) / s + 1
}

struct Case {
    n: usize,
    c_in: usize,
    c_out: usize,
    hw: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    pads: [usize; 4],
    dilations: [usize; 2],
    groups: usize,
    bias: bool,
}

impl Case {
    fn window(&self) -> Window {
        let out = [0, 1].map(|d| {
            out_size(
                self.hw[d],
                self.kernel[d],
                self.strides[d],
                (self.pads[d], self.pads[d + 2]),
                self.dilations[d],
            )
        });
        Window {
            kernel: self.kernel,
            strides: self.strides,
            pads: self.pads,
            dilations: self.dilations,
            out,
        }
    }
}

fn check_conv(case: &Case) {
    let Case {
        n,
        c_in,
        c_out,
        hw: [h, w],
        kernel: [kh, kw],
        groups,
        ..
    } = *case;
    let win = case.window();
    let [oh, ow] = win.out;
    let (cg, mg) = (c_in / groups, c_out / groups);
    let x = data(n * c_in * h * w, 1 + c_in as u32);
    let wt = data(c_out * cg * kh * kw, 2 + c_out as u32);
    let b = data(c_out, 3);
    let bias = case.bias.then_some(&b[..]);
    let mut out = vec![f32::NAN; n * c_out * oh * ow];
    let mut col = vec![0f32; conv2d_scratch_len(cg, mg, &win, [h, w])];
    let xv = View::contiguous(&x, &[n, c_in, h, w]).unwrap();
    let params = ConvParams {
        w: &wt,
        bias,
        groups,
        activation: None,
        packed: None,
    };
    conv2d(&mut out, &xv, &params, &win, &mut col).unwrap();
    let winograd = check_prepacked(&out, &xv, &params, &win, &mut col);
    // the same input with H and W swapped in memory (a strided view whose rows
    // are not contiguous): the same bits
    let mut xt = vec![0f32; x.len()];
    for (i, &v) in x.iter().enumerate() {
        let (plane, y, xx) = (i / (h * w), i / w % h, i % w);
        xt[(plane * w + xx) * h + y] = v;
    }
    let strides = [(c_in * h * w) as isize, (h * w) as isize, 1, h as isize];
    let geom = shapejit_kernels::StridedShape::new(&[n, c_in, h, w], &strides, 0).unwrap();
    let mut swapped = vec![f32::NAN; out.len()];
    conv2d(
        &mut swapped,
        &View::new(&xt, geom).unwrap(),
        &params,
        &win,
        &mut col,
    )
    .unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&swapped) == bits(&out), "strided input: {:?}", win);
    // a fused activation is the activation of the unfused result, bit for bit
    for act in [
        Activation::Relu,
        Activation::LeakyRelu(0.125),
        Activation::Clip {
            min: -0.25,
            max: 0.5,
        },
    ] {
        let mut fused = vec![f32::NAN; out.len()];
        let params = ConvParams {
            activation: Some(act),
            ..params
        };
        conv2d(&mut fused, &xv, &params, &win, &mut col).unwrap();
        let want: Vec<u32> = out.iter().map(|&v| act.apply(v).to_bits()).collect();
        let got: Vec<u32> = fused.iter().map(|v| v.to_bits()).collect();
        assert!(got == want, "{act:?} g{groups} k{kh}x{kw}");
        if let Some((packed, unfused)) = &winograd {
            let params = ConvParams {
                packed: Some(PackedChannels {
                    weights: packed,
                    first: 0,
                }),
                ..params
            };
            conv2d(&mut fused, &xv, &params, &win, &mut col).unwrap();
            let want: Vec<u32> = unfused.iter().map(|&v| act.apply(v).to_bits()).collect();
            let got: Vec<u32> = fused.iter().map(|v| v.to_bits()).collect();
            assert!(got == want, "winograd {act:?} g{groups}");
        }
    }
    for img in 0..n {
        for m in 0..c_out {
            let grp = m / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let (mut want, mut mag) = (bias.map_or(0.0, |b| b[m] as f64), 1.0f64);
                    for c in 0..cg {
                        for i in 0..kh {
                            for j in 0..kw {
                                let iy = (oy * win.strides[0] + i * win.dilations[0]) as isize
                                    - win.pads[0] as isize;
                                let ix = (ox * win.strides[1] + j * win.dilations[1]) as isize
                                    - win.pads[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xi = ((img * c_in + grp * cg + c) * h + iy as usize) * w
                                    + ix as usize;
                                let p = x[xi] as f64 * wt[((m * cg + c) * kh + i) * kw + j] as f64;
                                want += p;
                                mag += p.abs();
                            }
                        }
                    }
                    let at = ((img * c_out + m) * oh + oy) * ow + ox;
                    let got = out[at] as f64;
                    assert!(
                        (got - want).abs() <= 1e-6 * mag,
                        "n{n} c{c_in}->{c_out} g{groups} k{kh}x{kw} s{:?} p{:?} d{:?}: \
                         [{img},{m},{oy},{ox}] = {got}, want {want}",
                        win.strides,
                        win.pads,
                        win.dilations
                    );
                    // Winograd's transforms add a few roundings per term
                    if let Some((_, wino)) = &winograd {
                        let got = wino[at] as f64;
                        assert!(
                            (got - want).abs() <= WINOGRAD_TOLERANCE * mag,
                            "winograd n{n} c{c_in}->{c_out} g{groups} p{:?} {oh}x{ow}: \
                             [{img},{m},{oy},{ox}] = {got}, want {want}",
                            win.pads,
                        );
                    }
                }
            }
        }
    }
}

/// Winograd's error bound relative to `Σ |x·w|` (1e-6 for the other paths): the
/// transforms add and subtract up to 4 inputs, weights and products per term.
const WINOGRAD_TOLERANCE: f64 = 1e-5;

/// The weights packed ahead (`PackedConvWeights`): packed exactly where the GEMM
/// path (4 or more channels per group) or Winograd runs; on the GEMM path they
/// give `want`'s bits; for Winograd the weights and their output are returned.
fn check_prepacked(
    want: &[f32],
    x: &View<f32>,
    params: &ConvParams,
    win: &Window,
    col: &mut [f32],
) -> Option<(PackedConvWeights, Vec<f32>)> {
    let c_out = want.len() / (x.shape()[0] * win.out[0] * win.out[1]);
    let [kh, kw] = win.kernel;
    let cg = params.w.len() / (c_out * kh * kw);
    let shape = [c_out, cg, kh, kw];
    let packed =
        PackedConvWeights::pack(params.w, shape, params.groups, win.strides, win.dilations);
    let winograd = takes_winograd(cg, win) && c_out / params.groups >= WINOGRAD_MIN_OUTPUTS;
    assert_eq!(
        packed.is_some(),
        winograd || takes_gemm(c_out / params.groups, win.kernel)
    );
    let packed = packed?;
    assert_eq!(packed.is_winograd(), winograd);
    let mut got = vec![f32::NAN; want.len()];
    let with_packed = ConvParams {
        packed: Some(PackedChannels {
            weights: &packed,
            first: 0,
        }),
        ..*params
    };
    conv2d(&mut got, x, &with_packed, win, col).unwrap();
    if winograd {
        return Some((packed, got));
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&got) == bits(want), "prepacked weights differ");
    None
}

/// 1×1 weights of several `KC` column blocks and `MC` row blocks, read in place
/// and through a padded patch matrix: packed ahead, the same bits.
#[test]
fn prepacked_weights_cover_every_block() {
    for (c_in, c_out, hw, groups, pads) in [
        (300, 100, [6, 7], 1, [0; 4]),
        (300, 100, [6, 7], 1, [1, 0, 0, 1]),
        (40, 100, [5, 5], 2, [0; 4]),
    ] {
        let out = [hw[0] + pads[0] + pads[2], hw[1] + pads[1] + pads[3]];
        let win = Window {
            kernel: [1, 1],
            strides: [1, 1],
            pads,
            dilations: [1, 1],
            out,
        };
        let x = data(c_in * hw[0] * hw[1], 11);
        let w = data(c_out * c_in / groups, 12);
        let b = data(c_out, 13);
        let xv = View::contiguous(&x, &[1, c_in, hw[0], hw[1]]).unwrap();
        let params = ConvParams {
            w: &w,
            bias: Some(&b),
            groups,
            activation: Some(Activation::Relu),
            packed: None,
        };
        let mut col = vec![0f32; conv2d_scratch_len(c_in / groups, c_out / groups, &win, hw)];
        let p = out[0] * out[1];
        let mut whole = vec![f32::NAN; c_out * p];
        conv2d(&mut whole, &xv, &params, &win, &mut col).unwrap();
        check_prepacked(&whole, &xv, &params, &win, &mut col);
        if groups > 1 {
            continue;
        }
        // some of the channels (as a split across threads computes them): their
        // rows of the whole output, bit for bit, whether or not the range splits
        // a register or cache block
        let packed = PackedConvWeights::pack(&w, [c_out, c_in, 1, 1], 1, [1, 1], [1, 1]).unwrap();
        let k = c_in;
        for (lo, hi) in [(0, 4), (5, 17), (12, 100), (90, 99), (96, 100), (1, 5)] {
            let (lo, hi) = (lo.min(c_out), hi.min(c_out));
            if hi < lo + GEMM_MIN_CHANNELS {
                continue;
            }
            let part = ConvParams {
                w: &w[lo * k..hi * k],
                bias: Some(&b[lo..hi]),
                packed: Some(PackedChannels {
                    weights: &packed,
                    first: lo,
                }),
                ..params
            };
            let mut got = vec![f32::NAN; (hi - lo) * p];
            conv2d(&mut got, &xv, &part, &win, &mut col).unwrap();
            let want = &whole[lo * p..hi * p];
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(bits(&got) == bits(want), "channels {lo}..{hi} of {c_out}");
        }
    }
}

/// The direct path computes each output channel alone: any range of the
/// channels (as a split across threads computes them) gives the whole
/// output's bits, whether or not it splits a block of channels.
#[test]
fn direct_channel_ranges_are_identical() {
    let (c_in, c_out, hw) = (6, 23, [9, 13]);
    let win = same_3x3(hw);
    let x = data(c_in * hw[0] * hw[1], 21);
    let w = data(c_out * c_in * 9, 22);
    let b = data(c_out, 23);
    let xv = View::contiguous(&x, &[1, c_in, hw[0], hw[1]]).unwrap();
    let params = ConvParams {
        w: &w,
        bias: Some(&b),
        groups: 1,
        activation: None,
        packed: None,
    };
    let mut col = vec![0f32; conv2d_scratch_len(c_in, c_out, &win, hw)];
    let (k, p) = (c_in * 9, hw[0] * hw[1]);
    let mut whole = vec![f32::NAN; c_out * p];
    conv2d(&mut whole, &xv, &params, &win, &mut col).unwrap();
    for (lo, hi) in [(0, 1), (1, 4), (3, 10), (5, 23), (22, 23)] {
        let part = ConvParams {
            w: &w[lo * k..hi * k],
            bias: Some(&b[lo..hi]),
            ..params
        };
        let mut got = vec![f32::NAN; (hi - lo) * p];
        conv2d(&mut got, &xv, &part, &win, &mut col).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(&got) == bits(&whole[lo * p..hi * p]),
            "channels {lo}..{hi}"
        );
    }
}

#[test]
fn conv_matches_a_naive_loop() {
    let base = Case {
        n: 1,
        c_in: 4,
        c_out: 8,
        hw: [9, 11],
        kernel: [3, 3],
        strides: [1, 1],
        pads: [1, 1, 1, 1],
        dilations: [1, 1],
        groups: 1,
        bias: true,
    };
    let mut cases = vec![];
    for n in [1, 7] {
        for (c_in, c_out, groups) in [
            (4, 8, 1),
            (4, 8, 2),
            (6, 6, 6),
            (6, 12, 6),
            (3, 16, 1),
            (2, 3, 1),
            (2, 7, 1),
            (5, 6, 1),
            (7, 5, 1),
        ] {
            for (strides, pads, dilations) in [
                ([1, 1], [1, 1, 1, 1], [1, 1]),
                ([2, 2], [1, 0, 2, 1], [1, 1]),
                ([1, 2], [0, 0, 0, 0], [2, 1]),
                ([2, 1], [2, 2, 2, 2], [2, 2]),
            ] {
                for bias in [true, false] {
                    cases.push(Case {
                        n,
                        c_in,
                        c_out,
                        strides,
                        pads,
                        dilations,
                        groups,
                        bias,
                        ..base
                    });
                }
            }
            // 1×1: stride 1 unpadded reads the input in place
            for (strides, pads) in [([1, 1], [0; 4]), ([2, 2], [0; 4]), ([1, 1], [1, 0, 0, 1])] {
                cases.push(Case {
                    n,
                    c_in,
                    c_out,
                    kernel: [1, 1],
                    strides,
                    pads,
                    groups,
                    ..base
                });
            }
            // a kernel as wide as the padded input, and a 1-row input
            cases.push(Case {
                n,
                c_in,
                c_out,
                hw: [1, 5],
                kernel: [1, 7],
                pads: [0, 1, 0, 1],
                groups,
                ..base
            });
            // 1-wide inputs padded by 2: taps that see only padding in every row
            for (hw, kernel, strides) in [([1, 1], [1, 1], [1, 1]), ([3, 1], [1, 3], [1, 2])] {
                cases.push(Case {
                    n,
                    c_in,
                    c_out,
                    hw,
                    kernel,
                    strides,
                    pads: [0, 2, 0, 2],
                    groups,
                    ..base
                });
            }
        }
    }
    for case in &cases {
        check_conv(case);
    }
}

/// A large input (64 channels at 178², 8 MiB of phase planes) on the direct path.
#[test]
fn conv_on_a_large_input() {
    check_conv(&Case {
        n: 1,
        c_in: 64,
        c_out: 4,
        hw: [178, 178],
        kernel: [3, 3],
        strides: [1, 1],
        pads: [1, 1, 1, 1],
        dilations: [1, 1],
        groups: 1,
        bias: true,
    });
}

/// Winograd F(2×2, 3×3) (3×3, stride 1, packed weights with at least
/// `WINOGRAD_MIN_CHANNELS` input and `WINOGRAD_MIN_OUTPUTS` output channels per
/// group) at output sizes of either parity from 1×1 to 40×3, several pads, one
/// and two groups, against the naive loop.
#[test]
fn winograd_at_many_sizes() {
    for (h, w) in [
        (1, 1),
        (1, 2),
        (2, 1),
        (3, 5),
        (7, 7),
        (16, 16),
        (17, 33),
        (40, 3),
    ] {
        for pads in [[1, 1, 1, 1], [0; 4], [2, 0, 1, 2]] {
            if h + pads[0] + pads[2] < 3 || w + pads[1] + pads[3] < 3 {
                continue;
            }
            for (c_in, c_out, groups) in [
                (WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_OUTPUTS, 1),
                (37, 71, 1),
                (64, 130, 2),
            ] {
                check_conv(&Case {
                    n: 2,
                    c_in,
                    c_out,
                    hw: [h, w],
                    kernel: [3, 3],
                    strides: [1, 1],
                    pads,
                    dilations: [1, 1],
                    groups,
                    bias: c_out != 1,
                });
            }
        }
    }
}

/// Packed Winograd weights, the whole convolution, and the output of `w`'s
/// channels `lo..hi` (as a split across threads computes them).
fn winograd_run(
    x: &View<f32>,
    w: &[f32],
    b: &[f32],
    win: &Window,
    range: (usize, usize),
) -> Vec<f32> {
    let [_, c_in, h, wd] = x.shape().try_into().unwrap();
    let c_out = b.len();
    let k = c_in * 9;
    let packed = PackedConvWeights::pack(w, [c_out, c_in, 3, 3], 1, [1, 1], [1, 1]).unwrap();
    assert!(packed.is_winograd());
    let (lo, hi) = range;
    let params = ConvParams {
        w: &w[lo * k..hi * k],
        bias: Some(&b[lo..hi]),
        groups: 1,
        activation: None,
        packed: Some(PackedChannels {
            weights: &packed,
            first: lo,
        }),
    };
    let mut col = vec![0f32; conv2d_scratch_len(c_in, hi - lo, win, [h, wd])];
    let mut out = vec![f32::NAN; x.shape()[0] * (hi - lo) * win.out[0] * win.out[1]];
    conv2d(&mut out, x, &params, win, &mut col).unwrap();
    out
}

/// A 3×3 window at stride 1 padded by 1 (output size = input size `hw`).
fn same_3x3(hw: [usize; 2]) -> Window {
    Window {
        kernel: [3, 3],
        strides: [1, 1],
        pads: [1; 4],
        dilations: [1, 1],
        out: hw,
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Winograd computes each output channel alone: any range of the channels
/// gives the whole output's bits (over three chunks of tile rows).
#[test]
fn winograd_channel_ranges_are_identical() {
    let (c_in, c_out, hw) = (40, 70, [60, 41]);
    let win = same_3x3(hw);
    let x = data(c_in * hw[0] * hw[1], 31);
    let w = data(c_out * c_in * 9, 32);
    let b = data(c_out, 33);
    let xv = View::contiguous(&x, &[1, c_in, hw[0], hw[1]]).unwrap();
    let whole = winograd_run(&xv, &w, &b, &win, (0, c_out));
    let p = hw[0] * hw[1];
    for (lo, hi) in [(0, 1), (1, 13), (12, 70), (64, 70), (69, 70)] {
        let got = winograd_run(&xv, &w, &b, &win, (lo, hi));
        assert!(
            bits(&got) == bits(&whole[lo * p..hi * p]),
            "channels {lo}..{hi}"
        );
    }
}

/// An infinite input turns Winograd's products into NaN where the direct sum
/// is ±∞: that image is recomputed on the direct path (its bits, ONNX's
/// semantics), the other image keeps Winograd; weights that transform to a
/// value that is not finite are not packed.
#[test]
fn winograd_keeps_nonfinite_semantics() {
    let (c_in, c_out, hw) = (WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_OUTPUTS, [6, 7]);
    let win = same_3x3(hw);
    let p = hw[0] * hw[1];
    let mut x = data(2 * c_in * p, 41);
    x[5] = f32::INFINITY;
    x[2 * p + 20] = f32::NEG_INFINITY;
    x[3 * p + 30] = f32::NAN;
    let w = data(c_out * c_in * 9, 42);
    let b = data(c_out, 43);
    let xv = View::contiguous(&x, &[2, c_in, hw[0], hw[1]]).unwrap();
    let direct = ConvParams {
        w: &w,
        bias: Some(&b),
        groups: 1,
        activation: None,
        packed: None,
    };
    let mut col = vec![0f32; conv2d_scratch_len(c_in, c_out, &win, hw)];
    let mut want = vec![f32::NAN; 2 * c_out * p];
    conv2d(&mut want, &xv, &direct, &win, &mut col).unwrap();
    let got = winograd_run(&xv, &w, &b, &win, (0, c_out));
    let image = c_out * p;
    assert!(want[..image].iter().any(|v| v.is_infinite()));
    assert!(
        bits(&got[..image]) == bits(&want[..image]),
        "image 0: the direct path's bits"
    );
    for (g, d) in got[image..].iter().zip(&want[image..]) {
        assert!(
            g.is_finite() && (g - d).abs() <= 1e-4,
            "image 1: {g} vs {d}"
        );
    }
    assert_ne!(
        bits(&got[image..]),
        bits(&want[image..]),
        "image 1 runs on Winograd"
    );
    let mut bad = w.clone();
    bad[3] = f32::INFINITY;
    assert!(PackedConvWeights::pack(&bad, [c_out, c_in, 3, 3], 1, [1, 1], [1, 1]).is_none());
}

/// The direct path (1, 2, 3, 4, 5 and 7 output channels per group: with the
/// channel ranges test, every block height at each level) over planes of many
/// sizes: sums of one vector to many blocks of vectors, with every tail, at
/// strides 1 to 3, dilation 2 and uneven padding.
#[test]
fn direct_at_many_sizes() {
    for (h, w) in [
        (1, 1),
        (3, 7),
        (5, 16),
        (7, 7),
        (14, 14),
        (17, 33),
        (28, 28),
        (40, 9),
    ] {
        for (kernel, strides, pads, dilations) in [
            ([3, 3], [1, 1], [1, 1, 1, 1], [1, 1]),
            ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1]),
            ([5, 3], [3, 2], [2, 0, 1, 2], [1, 1]),
            ([3, 3], [1, 2], [2, 2, 2, 2], [2, 2]),
        ] {
            if h + pads[0] + pads[2] < dilations[0] * (kernel[0] - 1) + 1
                || w + pads[1] + pads[3] < dilations[1] * (kernel[1] - 1) + 1
            {
                continue;
            }
            for c_out in [5, 10, 15, 20, 25, 35] {
                check_conv(&Case {
                    n: 2,
                    c_in: 5,
                    c_out,
                    hw: [h, w],
                    kernel,
                    strides,
                    pads,
                    dilations,
                    groups: 5,
                    bias: c_out == 5,
                });
            }
        }
    }
}

/// Large maps and many channels, whose planes the direct path walks in
/// several passes over the input channels (the sums stored between them), on
/// the flat walk (56²) and the row walk (28² at stride 2, 14²): every output
/// is the documented chain — `fma(w, x, acc)` over the taps in `(c, i, j)`
/// order from the bias, padded cells read as 0 (separately rounded products
/// at `scalar`) — bit for bit, and within the naive loop's tolerance with the
/// fused activations (`check_conv`).
/// `case`'s output as the direct and depthwise paths document their
/// arithmetic: per output, from the bias, one `fma(w, x, acc)` per tap in
/// `(c, i, j)` order (separately rounded products at `scalar`), padded taps
/// read as 0.
fn tap_chain(case: &Case, x: &[f32], wt: &[f32], b: &[f32]) -> Vec<f32> {
    let fused = shapejit_kernels::cpu::level() != shapejit_kernels::Level::Scalar;
    let win = case.window();
    let ([h, w], [oh, ow], [kh, kw]) = (case.hw, win.out, case.kernel);
    let (cg, mg) = (case.c_in / case.groups, case.c_out / case.groups);
    let mut out = Vec::with_capacity(case.n * case.c_out * oh * ow);
    for (img, m) in (0..case.n).flat_map(|i| (0..case.c_out).map(move |m| (i, m))) {
        for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
            let mut acc = if case.bias { b[m] } else { 0.0 };
            for c in 0..cg {
                let plane = (img * case.c_in + m / mg * cg + c) * h * w;
                for (i, j) in (0..kh).flat_map(|i| (0..kw).map(move |j| (i, j))) {
                    let at = |d: usize, o: usize, k: usize| {
                        (o * win.strides[d] + k * win.dilations[d]) as isize - win.pads[d] as isize
                    };
                    let (iy, ix) = (at(0, oy, i), at(1, ox, j));
                    let inside = (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix);
                    let xv = match inside {
                        true => x[plane + iy as usize * w + ix as usize],
                        false => 0.0,
                    };
                    let wv = wt[((m * cg + c) * kh + i) * kw + j];
                    acc = if fused {
                        wv.mul_add(xv, acc)
                    } else {
                        acc + wv * xv
                    };
                }
            }
            out.push(acc);
        }
    }
    out
}

/// `case` run by `conv2d` (inputs from the seeds, output first NaN) and its
/// [`tap_chain`], bit for bit.
fn check_tap_chain(case: &Case, seed: u32) {
    let win = case.window();
    let ([h, w], [oh, ow], [kh, kw]) = (case.hw, win.out, case.kernel);
    let (cg, mg) = (case.c_in / case.groups, case.c_out / case.groups);
    let x = data(case.n * case.c_in * h * w, seed);
    let wt = data(case.c_out * cg * kh * kw, seed + 1);
    let b = data(case.c_out, seed + 2);
    let params = ConvParams {
        w: &wt,
        bias: case.bias.then_some(&b[..]),
        groups: case.groups,
        activation: None,
        packed: None,
    };
    let xv = View::contiguous(&x, &[case.n, case.c_in, h, w]).unwrap();
    let mut col = vec![0f32; conv2d_scratch_len(cg, mg, &win, case.hw)];
    let mut out = vec![f32::NAN; case.n * case.c_out * oh * ow];
    conv2d(&mut out, &xv, &params, &win, &mut col).unwrap();
    let want = tap_chain(case, &x, &wt, &b);
    for (at, (got, want)) in out.iter().zip(&want).enumerate() {
        assert!(
            got.to_bits() == want.to_bits(),
            "{}->{} g{} {:?} k{:?} s{:?} p{:?} d{:?}: output {at} = {got}, want {want}",
            case.c_in,
            case.c_out,
            case.groups,
            case.hw,
            case.kernel,
            case.strides,
            case.pads,
            case.dilations
        );
    }
}

/// The direct path's channel passes (planes past L2) sum the same chain.
#[test]
fn direct_passes_are_bit_exact() {
    for (c_in, c_out, hw, strides) in [
        (40, 7, [56, 56], [1, 1]),
        (150, 13, [28, 28], [2, 2]),
        (300, 14, [14, 14], [1, 1]),
    ] {
        let case = Case {
            n: 1,
            c_in,
            c_out,
            hw,
            kernel: [3, 3],
            strides,
            pads: [1; 4],
            dilations: [1, 1],
            groups: 1,
            bias: true,
        };
        check_conv(&case);
        check_tap_chain(&case, 41);
    }
}

/// Depthwise convolutions (one input and one output channel per group, their
/// own path) at every width from 1 to 33 (each vector tail of the fill, the
/// flat walk and the copy-out, odd widths split by stride 2), both strides,
/// pads of 0 to 2, dilation 2, 1×1 to 5×5 windows, two images: the same
/// chain bit for bit, and the naive f64 loop with activations (`check_conv`).
#[test]
fn depthwise_is_bit_exact() {
    let mut checked = 0;
    for wd in 1..=33 {
        for (kernel, strides, pads, dilations) in [
            ([3, 3], [1, 1], [1; 4], [1, 1]),
            ([3, 3], [2, 2], [1; 4], [1, 1]),
            ([3, 3], [2, 2], [0, 1, 2, 0], [1, 1]),
            ([5, 5], [1, 2], [2; 4], [1, 1]),
            ([3, 3], [1, 1], [2; 4], [2, 2]),
            ([1, 1], [1, 1], [0; 4], [1, 1]),
        ] {
            let hw = [5 + wd % 4, wd];
            let padded = |d: usize| hw[d] + pads[d] + pads[d + 2];
            if (0..2).any(|d| padded(d) < (kernel[d] - 1) * dilations[d] + 1) {
                continue;
            }
            let case = Case {
                n: 2,
                c_in: 5,
                c_out: 5,
                hw,
                kernel,
                strides,
                pads,
                dilations,
                groups: 5,
                bias: wd % 2 == 0,
            };
            check_tap_chain(&case, 7 + wd as u32);
            check_conv(&case);
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked} cases");
}

#[test]
fn conv_refuses_short_scratch() {
    let x = data(2 * 8 * 8, 1);
    let w = data(8 * 2 * 9, 2);
    let win = Window {
        kernel: [3, 3],
        strides: [1, 1],
        pads: [1; 4],
        dilations: [1, 1],
        out: [8, 8],
    };
    let mut out = vec![0f32; 8 * 64];
    let need = conv2d_scratch_len(2, 8, &win, [8, 8]);
    let mut col = vec![0f32; need - 1];
    let xv = View::contiguous(&x, &[1, 2, 8, 8]).unwrap();
    let params = ConvParams {
        w: &w,
        bias: None,
        groups: 1,
        activation: None,
        packed: None,
    };
    assert!(conv2d(&mut out, &xv, &params, &win, &mut col).is_err());
}

fn check_pool(hw: [usize; 2], win: Window, pool: Pool, nan_at: Option<usize>) {
    let [h, w] = hw;
    let (n, c) = (2, 3);
    let mut x = data(n * c * h * w, 9);
    if let Some(i) = nan_at {
        x[i] = f32::NAN;
    }
    let [oh, ow] = win.out;
    let mut out = vec![0f32; n * c * oh * ow];
    let mut scratch = vec![0f32; pool2d_scratch_len(&win, [h, w])];
    pool2d(
        &mut out,
        &View::contiguous(&x, &[n, c, h, w]).unwrap(),
        &win,
        pool,
        &mut scratch,
    )
    .unwrap();
    for plane in 0..n * c {
        for oy in 0..oh {
            for ox in 0..ow {
                let (mut vals, mut padded) = (vec![], 0usize);
                for i in 0..win.kernel[0] {
                    for j in 0..win.kernel[1] {
                        let iy = (oy * win.strides[0] + i * win.dilations[0]) as isize
                            - win.pads[0] as isize;
                        let ix = (ox * win.strides[1] + j * win.dilations[1]) as isize
                            - win.pads[1] as isize;
                        if iy < (h + win.pads[2]) as isize && ix < (w + win.pads[3]) as isize {
                            padded += 1;
                        }
                        if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize {
                            vals.push(x[(plane * h + iy as usize) * w + ix as usize] as f64);
                        }
                    }
                }
                let want = match pool {
                    Pool::Max if vals.iter().any(|v| v.is_nan()) => f64::NAN,
                    Pool::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    Pool::Avg { count_include_pad } => {
                        let d = if count_include_pad {
                            padded
                        } else {
                            vals.len()
                        };
                        vals.iter().sum::<f64>() / d as f64
                    }
                };
                let got = out[(plane * oh + oy) * ow + ox] as f64;
                let ok = (got.is_nan() && want.is_nan()) || (got - want).abs() <= 1e-6;
                assert!(
                    ok,
                    "{pool:?} {win:?}: [{plane},{oy},{ox}] = {got}, want {want}"
                );
            }
        }
    }
}

/// Output size of a ceil-mode pool (a last window starting past the input and
/// its begin padding is dropped).
fn ceil_out_size(size: usize, k: usize, s: usize, pads: (usize, usize), d: usize) -> usize {
    let n = (size + pads.0 + pads.1 - d * (k - 1) - 1).div_ceil(s) + 1;
    if (n - 1) * s >= size + pads.0 {
        n - 1
    } else {
        n
    }
}

#[test]
fn pools_match_a_naive_loop() {
    // widths 64 and 70: whole vectors of 2×2 outputs at every level, then a tail
    for hw in [
        [9, 10],
        [3, 3],
        [7, 7],
        [14, 15],
        [33, 17],
        [4, 64],
        [5, 70],
    ] {
        for ceil in [false, true] {
            pools_at(hw, ceil);
        }
    }
}

/// Column stride 2 on the row path (its ring rows split into even and odd
/// columns) at every width from 1 to 33: each vector tail of the split and of
/// the output row, both parities of the left padding.
#[test]
fn stride_two_pools_at_every_width() {
    for wd in 1..=33 {
        for ceil in [false, true] {
            pools_with(&STRIDE_TWO, [5, wd], ceil);
        }
    }
}

/// A pool's kernel, strides, pads and dilations.
type PoolWindow = ([usize; 2], [usize; 2], [usize; 4], [usize; 2]);

/// Stride-2 windows of the light CNNs (ResNet-50's padded 3×3, SqueezeNet's
/// unpadded one) and a dilated one with uneven padding.
const STRIDE_TWO: [PoolWindow; 3] = [
    ([3, 3], [2, 2], [1; 4], [1, 1]),
    ([3, 3], [2, 2], [0; 4], [1, 1]),
    ([3, 3], [2, 2], [0, 1, 1, 2], [1, 2]),
];

fn pools_at(hw: [usize; 2], ceil: bool) {
    pools_with(&STRIDE_TWO, hw, ceil);
    pools_with(
        &[
            ([2, 2], [2, 2], [0; 4], [1, 1]),
            // side-by-side windows that leave the last input column unread
            ([3, 3], [3, 3], [0; 4], [1, 1]),
            ([3, 3], [1, 1], [1, 1, 1, 1], [1, 1]),
            ([3, 2], [2, 1], [1, 0, 2, 1], [1, 2]),
            ([1, 1], [1, 1], [0; 4], [1, 1]),
        ],
        hw,
        ceil,
    );
}

/// Every pool over `hw` with each of `windows` (kernel, strides, pads,
/// dilations) that fits, with and without a NaN.
fn pools_with(windows: &[PoolWindow], hw: [usize; 2], ceil: bool) {
    for &(kernel, strides, pads, dilations) in windows {
        let padded = |d: usize| hw[d] + pads[d] + pads[d + 2];
        if (0..2).any(|d| padded(d) < (kernel[d] - 1) * dilations[d] + 1) {
            continue;
        }
        let size = if ceil { ceil_out_size } else { out_size };
        let out = [0, 1].map(|d| {
            size(
                hw[d],
                kernel[d],
                strides[d],
                (pads[d], pads[d + 2]),
                dilations[d],
            )
        });
        let win = Window {
            kernel,
            strides,
            pads,
            dilations,
            out,
        };
        for pool in [
            Pool::Max,
            Pool::Avg {
                count_include_pad: true,
            },
            Pool::Avg {
                count_include_pad: false,
            },
        ] {
            check_pool(hw, win, pool, None);
            check_pool(hw, win, pool, Some(23));
        }
    }
}

/// Pools a `[2, 3, h, w]` input given as a contiguous view (the row path, or
/// the halving path for 2×2 windows at stride 2) and as a view whose columns
/// are every other float of a wider buffer (the phase-plane path).
fn pool_both_layouts(x: &[f32], hw: [usize; 2], win: &Window, pool: Pool) -> [Vec<u32>; 2] {
    let [h, w] = hw;
    let [oh, ow] = win.out;
    let spread: Vec<f32> = x.iter().flat_map(|&v| [v, 7.0]).collect();
    let geom = StridedShape::new(
        &[2, 3, h, w],
        &[
            (6 * h * w) as isize,
            (2 * h * w) as isize,
            2 * w as isize,
            2,
        ],
        0,
    )
    .unwrap();
    let views = [
        View::contiguous(x, &[2, 3, h, w]).unwrap(),
        View::new(&spread, geom).unwrap(),
    ];
    views.map(|xv| {
        let mut out = vec![0f32; 6 * oh * ow];
        let mut scratch = vec![0f32; pool2d_scratch_len(win, hw)];
        pool2d(&mut out, &xv, win, pool, &mut scratch).unwrap();
        out.iter().map(|v| v.to_bits()).collect()
    })
}

/// Every pooling path gives the same bits — which of two NaNs (the maximum),
/// which of ±0 —
/// for windows of either column stride the row path takes, with padding,
/// dilation, ceil mode, rows of more than four vectors, 2×2 halving, and a
/// column stride of 3 (planes either way).
#[test]
fn pool_paths_give_the_same_bits() {
    let mut checked = 0;
    for hw in [[9, 10], [12, 111], [5, 150], [7, 7], [3, 33]] {
        let [h, w] = hw;
        let mut x = data(6 * h * w, 41);
        // ties between +0 and −0, two NaN payloads, −∞ and +∞
        for (i, v) in x.iter_mut().enumerate() {
            match i % 13 {
                0 => *v = 0.0,
                1 => *v = -0.0,
                _ => {}
            }
        }
        x[3] = f32::from_bits(0x7fc0_0001);
        x[5] = f32::from_bits(0xffc0_0002);
        x[w + 2] = f32::NEG_INFINITY;
        x[6 * h * w - 1] = f32::INFINITY;
        for (kernel, strides, pads, dilations, ceil) in [
            ([3, 3], [2, 2], [0; 4], [1, 1], false),
            ([3, 3], [2, 2], [1; 4], [1, 1], false),
            ([3, 3], [1, 1], [1; 4], [1, 1], false),
            ([2, 2], [2, 2], [0; 4], [1, 1], false),
            ([3, 2], [2, 1], [1, 0, 2, 1], [1, 2], true),
            ([2, 3], [1, 2], [0, 2, 1, 1], [2, 1], true),
            ([1, 1], [1, 2], [0; 4], [1, 1], false),
            ([3, 3], [1, 3], [1; 4], [1, 1], false),
        ] {
            let size = if ceil { ceil_out_size } else { out_size };
            let out = [0, 1].map(|d| {
                let reach = dilations[d] * (kernel[d] - 1) + 1;
                (hw[d] + pads[d] + pads[d + 2] >= reach).then(|| {
                    size(
                        hw[d],
                        kernel[d],
                        strides[d],
                        (pads[d], pads[d + 2]),
                        dilations[d],
                    )
                })
            });
            let [Some(oh), Some(ow)] = out else { continue };
            let win = Window {
                kernel,
                strides,
                pads,
                dilations,
                out: [oh, ow],
            };
            for pool in [
                Pool::Max,
                Pool::Avg {
                    count_include_pad: true,
                },
                Pool::Avg {
                    count_include_pad: false,
                },
            ] {
                let [rows, planes] = pool_both_layouts(&x, hw, &win, pool);
                // a sum's NaN payload depends on the order the compiler gives
                // an addition's operands: the average keeps NaN-ness only
                let same = |(&a, &b): (&u32, &u32)| {
                    let nan = |v: u32| f32::from_bits(v).is_nan();
                    a == b || (pool != Pool::Max && nan(a) && nan(b))
                };
                assert!(
                    rows.iter().zip(&planes).all(same),
                    "{pool:?} {hw:?} {win:?}:\n{rows:?}\n{planes:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 100, "{checked} cases");
}

/// Weights packed for the transposed product (small maps: `takes_transposed`)
/// give the bits of the path they replace — the GEMM path's for 1×1 windows,
/// the direct path's for k×k ones — at every window, K past one `KC` block,
/// groups, batch 2, with and without bias, fused activations, a NaN input and
/// an infinite weight; and a range of the channels (as a thread split computes
/// them) gives the whole output's bits, starting at a panel (transposed) or not
/// (the weights unused).
#[test]
fn transposed_gives_the_usual_bits() {
    let windows = [
        ([1, 1], [1, 1], [0; 4], [1, 1]),
        ([1, 1], [2, 2], [0; 4], [1, 1]),
        ([1, 1], [1, 1], [1, 0, 0, 1], [1, 1]),
        ([3, 3], [1, 1], [1; 4], [1, 1]),
        ([3, 3], [2, 2], [1; 4], [1, 1]),
        ([5, 3], [3, 2], [2, 0, 1, 2], [1, 1]),
        ([3, 3], [1, 1], [2; 4], [2, 2]),
    ];
    let mut transposed_runs = 0;
    for (kernel, strides, pads, dilations) in windows {
        for (hw, c_in, c_out, groups) in [
            ([7, 7], 20, 64, 1),
            ([7, 7], 300, 35, 1),
            ([13, 9], 6, 100, 2),
            ([1, 1], 3, 16, 1),
            ([5, 12], 8, 48, 1),
        ] {
            let case = Case {
                n: 2,
                c_in,
                c_out,
                hw,
                kernel,
                strides,
                pads,
                dilations,
                groups,
                bias: c_in != 6,
            };
            if hw[0] + pads[0] + pads[2] < dilations[0] * (kernel[0] - 1) + 1
                || hw[1] + pads[1] + pads[3] < dilations[1] * (kernel[1] - 1) + 1
            {
                continue;
            }
            let win = case.window();
            let (cg, mg) = (c_in / groups, c_out / groups);
            let mut x = data(2 * c_in * hw[0] * hw[1], 31);
            let mut w = data(c_out * cg * kernel[0] * kernel[1], 32);
            if c_in == 300 {
                x[5] = f32::NAN;
                w[7] = f32::INFINITY;
            }
            let b = data(c_out, 33);
            let xv = View::contiguous(&x, &[2, c_in, hw[0], hw[1]]).unwrap();
            let shape = [c_out, cg, kernel[0], kernel[1]];
            let packed = PackedConvWeights::pack_transposed(&w, shape, groups).unwrap();
            let mut col = vec![0f32; conv2d_scratch_len(cg, mg, &win, hw)];
            let p = win.out[0] * win.out[1];
            let what = format!("{c_in}->{c_out} g{groups} {hw:?} {win:?}");
            transposed_runs += usize::from(takes_transposed(mg, &win));
            for activation in [None, Some(Activation::Relu)] {
                let usual = ConvParams {
                    w: &w,
                    bias: case.bias.then_some(&b[..]),
                    groups,
                    activation,
                    packed: None,
                };
                let mut want = vec![f32::NAN; 2 * c_out * p];
                conv2d(&mut want, &xv, &usual, &win, &mut col).unwrap();
                let with_packed = ConvParams {
                    packed: Some(PackedChannels {
                        weights: &packed,
                        first: 0,
                    }),
                    ..usual
                };
                let mut got = vec![f32::NAN; want.len()];
                conv2d(&mut got, &xv, &with_packed, &win, &mut col).unwrap();
                assert!(bits(&got) == bits(&want), "{what} {activation:?}");
                if groups > 1 || activation.is_some() {
                    continue;
                }
                let k = cg * kernel[0] * kernel[1];
                for (lo, hi) in [(0, 16), (16, mg), (8, mg.min(40))] {
                    let part = ConvParams {
                        w: &w[lo * k..hi * k],
                        bias: with_packed.bias.map(|b| &b[lo..hi]),
                        packed: Some(PackedChannels {
                            weights: &packed,
                            first: lo,
                        }),
                        ..with_packed
                    };
                    let xv1 =
                        View::contiguous(&x[..c_in * hw[0] * hw[1]], &[1, c_in, hw[0], hw[1]])
                            .unwrap();
                    let mut got = vec![f32::NAN; (hi - lo) * p];
                    conv2d(&mut got, &xv1, &part, &win, &mut col).unwrap();
                    assert!(
                        bits(&got) == bits(&want[lo * p..hi * p]),
                        "{what} channels {lo}..{hi}"
                    );
                }
            }
        }
    }
    // the transposed path ran (for strided k×k windows only at AVX2, 1×1 ones
    // only at the scalar level)
    assert!(transposed_runs >= 5, "{transposed_runs}");
}
