//! `RNN`, `GRU` and `LSTM` models built in Rust against a naive per-step
//! reference written out here from the ONNX spec's equations (f64, explicit
//! loops over batch and hidden units).

mod common;

use common::reference::{self as r, Arr};
use common::*;
use shapejit_ir::Tensor;
use shapejit_onnx::proto::{AttributeProto, ModelProto, data_type};

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
    module.runtime().run(inputs).unwrap()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// `v · Mᵀ` for `v [n]`, `M` rows `rows` of a `[G·h, n]` matrix.
fn dot_rows(m: &[f64], n: usize, rows: std::ops::Range<usize>, v: &[f64]) -> Vec<f64> {
    rows.map(|row| (0..n).map(|k| m[row * n + k] * v[k]).sum())
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Rnn,
    Gru { linear_before_reset: bool },
    Lstm,
}

/// One direction over `xs[t][b][i]`: returns `Y[t][b][h]` and the final `h`, `c`.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn reference(
    kind: Kind,
    xs: &[Vec<Vec<f64>>],
    w: &[f64],
    rr: &[f64],
    bias: &[f64],
    peep: &[f64],
    hidden: usize,
    backward: bool,
    lens: Option<&[usize]>,
) -> (Vec<Vec<Vec<f64>>>, Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let (seq, batch, input) = (xs.len(), xs[0].len(), xs[0][0].len());
    let g = match kind {
        Kind::Rnn => 1,
        Kind::Gru { .. } => 3,
        Kind::Lstm => 4,
    };
    let (wb, rb) = bias.split_at(g * hidden);
    let mut y = vec![vec![vec![0.0; hidden]; batch]; seq];
    let mut hs = vec![vec![0.0; hidden]; batch];
    let mut cs = vec![vec![0.0; hidden]; batch];
    for b in 0..batch {
        let (mut h, mut c) = (vec![0.0; hidden], vec![0.0; hidden]);
        for step in 0..seq {
            let t = if backward { seq - 1 - step } else { step };
            if lens.is_some_and(|l| t >= l[b]) {
                continue;
            }
            let gate = |k: usize, hv: &[f64]| -> Vec<f64> {
                let xw = dot_rows(w, input, k * hidden..(k + 1) * hidden, &xs[t][b]);
                let hr = dot_rows(rr, hidden, k * hidden..(k + 1) * hidden, hv);
                (0..hidden)
                    .map(|j| xw[j] + hr[j] + wb[k * hidden + j] + rb[k * hidden + j])
                    .collect()
            };
            match kind {
                Kind::Rnn => h = gate(0, &h).iter().map(|v| v.tanh()).collect(),
                Kind::Gru {
                    linear_before_reset,
                } => {
                    let z: Vec<f64> = gate(0, &h).iter().map(|&v| sigmoid(v)).collect();
                    let rg: Vec<f64> = gate(1, &h).iter().map(|&v| sigmoid(v)).collect();
                    let xw = dot_rows(w, input, 2 * hidden..3 * hidden, &xs[t][b]);
                    let hh: Vec<f64> = if linear_before_reset {
                        let m = dot_rows(rr, hidden, 2 * hidden..3 * hidden, &h);
                        (0..hidden)
                            .map(|j| rg[j] * (m[j] + rb[2 * hidden + j]))
                            .collect()
                    } else {
                        let rh: Vec<f64> = (0..hidden).map(|j| rg[j] * h[j]).collect();
                        let m = dot_rows(rr, hidden, 2 * hidden..3 * hidden, &rh);
                        (0..hidden).map(|j| m[j] + rb[2 * hidden + j]).collect()
                    };
                    let cand: Vec<f64> = (0..hidden)
                        .map(|j| (xw[j] + wb[2 * hidden + j] + hh[j]).tanh())
                        .collect();
                    h = (0..hidden)
                        .map(|j| (1.0 - z[j]) * cand[j] + z[j] * h[j])
                        .collect();
                }
                Kind::Lstm => {
                    let (gi, go, gf, gc) = (gate(0, &h), gate(1, &h), gate(2, &h), gate(3, &h));
                    let i: Vec<f64> = (0..hidden)
                        .map(|j| sigmoid(gi[j] + peep[j] * c[j]))
                        .collect();
                    let f: Vec<f64> = (0..hidden)
                        .map(|j| sigmoid(gf[j] + peep[2 * hidden + j] * c[j]))
                        .collect();
                    c = (0..hidden)
                        .map(|j| f[j] * c[j] + i[j] * gc[j].tanh())
                        .collect();
                    let o: Vec<f64> = (0..hidden)
                        .map(|j| sigmoid(go[j] + peep[hidden + j] * c[j]))
                        .collect();
                    h = (0..hidden).map(|j| o[j] * c[j].tanh()).collect();
                }
            }
            y[t][b] = h.clone();
        }
        hs[b] = h;
        cs[b] = c;
    }
    (y, hs, cs)
}

fn close(what: &str, got: &Tensor, want: &[f64]) {
    let got = got.to_f64_vec();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

fn check(
    kind: Kind,
    op: &str,
    direction: &str,
    layout: i64,
    with_lens: bool,
    seed: u64,
    attrs: Vec<AttributeProto>,
) {
    let mut rng = r::rng(seed);
    let (seq, batch, input, hidden) = (4usize, 3usize, 2usize, 3usize);
    let dirs = if direction == "bidirectional" { 2 } else { 1 };
    let g = match kind {
        Kind::Rnn => 1,
        Kind::Gru { .. } => 3,
        Kind::Lstm => 4,
    };
    let x: Arr = r::random(&mut rng, &[seq, batch, input], -1.0, 1.0);
    let w = r::random(&mut rng, &[dirs, g * hidden, input], -0.8, 0.8);
    let rr = r::random(&mut rng, &[dirs, g * hidden, hidden], -0.8, 0.8);
    let b = r::random(&mut rng, &[dirs, 2 * g * hidden], -0.5, 0.5);
    let p = r::random(&mut rng, &[dirs, 3 * hidden], -0.5, 0.5);
    let lens = [4usize, 2, 3];
    let xs: Vec<Vec<Vec<f64>>> = (0..seq)
        .map(|t| {
            (0..batch)
                .map(|bb| (0..input).map(|i| x.at(&[t, bb, i])).collect())
                .collect()
        })
        .collect();
    let (mut y, mut yh, mut yc) = (vec![], vec![], vec![]);
    for d in 0..dirs {
        let sl = |a: &Arr, n: usize| a.data[d * n..(d + 1) * n].to_vec();
        let (yd, hd, cd) = reference(
            kind,
            &xs,
            &sl(&w, g * hidden * input),
            &sl(&rr, g * hidden * hidden),
            &sl(&b, 2 * g * hidden),
            &sl(&p, 3 * hidden),
            hidden,
            direction == "reverse" || d == 1,
            with_lens.then_some(&lens[..]),
        );
        y.push(yd);
        yh.push(hd);
        yc.push(cd);
    }
    // X in the model's layout
    let x_in = if layout == 1 {
        r::transpose(&x, &[1, 0, 2])
    } else {
        x.clone()
    };
    let x_dims: Vec<String> = x_in.shape.iter().map(|n| n.to_string()).collect();
    let dims = |v: &[usize]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let (wd, rd, bd) = (dims(&w.shape), dims(&rr.shape), dims(&b.shape));
    let f = data_type::FLOAT;
    let mut ins = vec![
        vi(
            "x",
            f,
            &x_dims.iter().map(String::as_str).collect::<Vec<_>>(),
        ),
        vi("w", f, &wd.iter().map(String::as_str).collect::<Vec<_>>()),
        vi("r", f, &rd.iter().map(String::as_str).collect::<Vec<_>>()),
        vi("b", f, &bd.iter().map(String::as_str).collect::<Vec<_>>()),
    ];
    let mut names = vec!["x", "w", "r", "b"];
    let mut inputs = vec![
        x_in.f32_tensor(),
        w.f32_tensor(),
        rr.f32_tensor(),
        b.f32_tensor(),
    ];
    if with_lens {
        ins.push(vi("lens", data_type::INT32, &["3"]));
        names.push("lens");
        inputs.push(
            Tensor::from_vec(lens.iter().map(|&l| l as i32).collect::<Vec<_>>(), &[3]).unwrap(),
        );
    }
    if kind == Kind::Lstm {
        if !with_lens {
            names.push("");
        }
        names.extend(["", "", "p"]);
        let pd = dims(&p.shape);
        ins.push(vi(
            "p",
            f,
            &pd.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        inputs.push(p.f32_tensor());
    }
    let mut outs = vec!["y", "yh"];
    if kind == Kind::Lstm {
        outs.push("yc");
    }
    let mut attrs = attrs;
    attrs.extend([
        a_int("hidden_size", hidden as i64),
        a_str("direction", direction),
        a_int("layout", layout),
    ]);
    let n = node(op, &names, &outs, attrs);
    let m = model(
        22,
        graph(
            vec![n],
            ins,
            outs.iter().map(|o| vf(o, &[])).collect(),
            vec![],
        ),
    );
    let out = run(&m, &inputs);
    // Y [seq, dirs, batch, hidden]; states [dirs, batch, hidden] (layout 0)
    let mut want_y = Vec::new();
    for t in 0..seq {
        for yd in &y {
            for row in &yd[t] {
                want_y.extend(row);
            }
        }
    }
    let flat = |s: &[Vec<Vec<f64>>]| s.iter().flatten().flatten().copied().collect::<Vec<f64>>();
    let (mut want_y, mut want_h, mut want_c) = (
        Arr::new(&[seq, dirs, batch, hidden], want_y),
        Arr::new(&[dirs, batch, hidden], flat(&yh)),
        Arr::new(&[dirs, batch, hidden], flat(&yc)),
    );
    if layout == 1 {
        want_y = r::transpose(&want_y, &[2, 0, 1, 3]);
        want_h = r::transpose(&want_h, &[1, 0, 2]);
        want_c = r::transpose(&want_c, &[1, 0, 2]);
    }
    let what = format!("{op} {direction} layout {layout} lens {with_lens}");
    close(&format!("{what} Y"), &out[0], &want_y.data);
    close(&format!("{what} Y_h"), &out[1], &want_h.data);
    if kind == Kind::Lstm {
        close(&format!("{what} Y_c"), &out[2], &want_c.data);
    }
}

#[test]
fn rnn_gru_and_lstm_match_the_spec_equations() {
    check(Kind::Rnn, "RNN", "reverse", 0, false, 1, vec![]);
    check(Kind::Rnn, "RNN", "forward", 1, true, 2, vec![]);
    check(
        Kind::Gru {
            linear_before_reset: false,
        },
        "GRU",
        "bidirectional",
        0,
        false,
        3,
        vec![],
    );
    check(
        Kind::Gru {
            linear_before_reset: true,
        },
        "GRU",
        "forward",
        0,
        true,
        4,
        vec![a_int("linear_before_reset", 1)],
    );
    check(Kind::Lstm, "LSTM", "bidirectional", 1, false, 5, vec![]);
    check(Kind::Lstm, "LSTM", "forward", 0, true, 6, vec![]);
}
