//! ONNX `Attention` models built in Rust against a naive reference written
//! out here from the spec: per (batch, head, query) loops in f64 over the
//! keys, the bias built cell by cell from the mask and the causal, window
//! and padding rules.

mod common;

use common::reference::*;
use common::*;
use shapejit_ir::Tensor;
use shapejit_onnx::proto::{AttributeProto, ModelProto, data_type};

/// A dense 4-D array `[b, h, s, d]`.
#[derive(Clone)]
struct A4 {
    dims: [usize; 4],
    data: Vec<f64>,
}

impl A4 {
    fn random(rng: &mut rand::rngs::SmallRng, dims: [usize; 4]) -> A4 {
        A4 {
            dims,
            data: random(rng, &dims, -1.5, 1.5).data,
        }
    }
    fn at(&self, b: usize, h: usize, s: usize, d: usize) -> f64 {
        let [_, nh, ns, nd] = self.dims;
        self.data[((b * nh + h) * ns + s) * nd + d]
    }
    /// Concatenated with `other` along the sequence.
    fn concat_seq(&self, other: &A4) -> A4 {
        let [nb, nh, s1, nd] = self.dims;
        let s2 = other.dims[2];
        let mut data = Vec::new();
        for b in 0..nb {
            for h in 0..nh {
                for s in 0..s1 + s2 {
                    for d in 0..nd {
                        data.push(if s < s1 {
                            self.at(b, h, s, d)
                        } else {
                            other.at(b, h, s - s1, d)
                        });
                    }
                }
            }
        }
        A4 {
            dims: [nb, nh, s1 + s2, nd],
            data,
        }
    }
    /// `[b, h, s, d]` as the 3-D layout `[b, s, h * d]`.
    fn to_3d(&self) -> Vec<f64> {
        let [nb, nh, ns, nd] = self.dims;
        let mut out = Vec::new();
        for b in 0..nb {
            for s in 0..ns {
                for h in 0..nh {
                    for d in 0..nd {
                        out.push(self.at(b, h, s, d));
                    }
                }
            }
        }
        out
    }
    fn tensor(&self) -> Tensor {
        tensor(&self.data, &self.dims)
    }
}

fn tensor(data: &[f64], dims: &[usize]) -> Tensor {
    Tensor::from_vec(data.iter().map(|&v| v as f32).collect(), dims).unwrap()
}

/// The reference's four results, flattened in `[b, h, q, ·]` order.
struct Want {
    y: Vec<f64>,
    logits: Vec<f64>,
    biased: Vec<f64>,
    probs: Vec<f64>,
}

/// Attention over 4-D `q`, `k`, `v` (k, v already including the past);
/// `bias(b, h, i, j)` is the additive bias of query `i` and key `j`.
fn reference(
    q: &A4,
    k: &A4,
    v: &A4,
    scale: f64,
    softcap: f64,
    bias: &dyn Fn(usize, usize, usize, usize) -> f64,
) -> Want {
    let [nb, nh, nq, nd] = q.dims;
    let (kvh, nk, dv) = (k.dims[1], k.dims[2], v.dims[3]);
    let reps = nh / kvh;
    let mut w = Want {
        y: vec![],
        logits: vec![],
        biased: vec![],
        probs: vec![],
    };
    for b in 0..nb {
        for h in 0..nh {
            let kh = h / reps;
            for i in 0..nq {
                let mut row = Vec::new();
                let mut all_masked = true;
                for j in 0..nk {
                    let mut s: f64 = (0..nd).map(|d| q.at(b, h, i, d) * k.at(b, kh, j, d)).sum();
                    s *= scale;
                    if softcap > 0.0 {
                        s = (s / softcap).tanh() * softcap;
                    }
                    w.logits.push(s);
                    let bj = bias(b, h, i, j);
                    all_masked &= bj == f64::NEG_INFINITY;
                    row.push(s + bj);
                }
                w.biased.extend(&row);
                let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = row.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                let p: Vec<f64> = if all_masked {
                    vec![0.0; nk]
                } else {
                    e.iter().map(|x| x / sum).collect()
                };
                for d in 0..dv {
                    w.y.push((0..nk).map(|j| p[j] * v.at(b, kh, j, d)).sum());
                }
                w.probs.extend(p);
            }
        }
    }
    w
}

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
    module.runtime().run(inputs).unwrap()
}

fn close(what: &str, got: &Tensor, want: &[f64]) {
    let got = got.to_f64_vec();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g - w).abs() <= 1e-5 + 1e-4 * w.abs();
        assert!(ok, "{what}[{i}]: {g} vs {w}");
    }
}

fn attention_model(
    opset: i64,
    inputs: &[(&str, i32, Vec<usize>)],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> ModelProto {
    let dims = |d: &[usize]| d.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    // an empty name is an omitted optional input or output
    let ins = inputs
        .iter()
        .filter(|(n, ..)| !n.is_empty())
        .map(|(n, t, d)| {
            let d = dims(d);
            vi(n, *t, &d.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    let names: Vec<&str> = inputs.iter().map(|(n, ..)| *n).collect();
    let outs = outputs
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| vi(n, data_type::FLOAT, &[]))
        .collect();
    let n = node("Attention", &names, outputs, attrs);
    model(opset, graph(vec![n], ins, outs, vec![]))
}

#[test]
fn gqa_with_past_causal_padded_mask_and_softcap() {
    let mut r = rng(11);
    let (nb, hq, hkv, nq, nnew, npast, nd, dv) = (2, 4, 2, 4, 3, 1, 5, 3);
    let q = A4::random(&mut r, [nb, hq, nq, nd]);
    let k = A4::random(&mut r, [nb, hkv, nnew, nd]);
    let v = A4::random(&mut r, [nb, hkv, nnew, dv]);
    let pk = A4::random(&mut r, [nb, hkv, npast, nd]);
    let pv = A4::random(&mut r, [nb, hkv, npast, dv]);
    let nk = npast + nnew;
    // a float mask one key short: the missing keys are masked out
    let mask = random(&mut r, &[nq, nk - 1], -1.0, 1.0);
    let (scale, softcap) = (0.7f64, 2.0f64);
    let kk = pk.concat_seq(&k);
    let vv = pv.concat_seq(&v);
    let bias = |_b: usize, _h: usize, i: usize, j: usize| {
        let m = if j < nk - 1 {
            mask.data[i * (nk - 1) + j]
        } else {
            f64::NEG_INFINITY
        };
        // causal, bottom-right aligned: query i sits at npast + i
        m + if j <= i + npast {
            0.0
        } else {
            f64::NEG_INFINITY
        }
    };
    // the model squares the f32 square root of the scale
    let s = (scale.sqrt() as f32 as f64).powi(2);
    let want = reference(&q, &kk, &vv, s, softcap, &bias);
    let f = data_type::FLOAT;
    let m = attention_model(
        23,
        &[
            ("q", f, vec![nb, hq, nq, nd]),
            ("k", f, vec![nb, hkv, nnew, nd]),
            ("v", f, vec![nb, hkv, nnew, dv]),
            ("mask", f, vec![nq, nk - 1]),
            ("pk", f, vec![nb, hkv, npast, nd]),
            ("pv", f, vec![nb, hkv, npast, dv]),
        ],
        &["y", "present_k", "present_v", "qk"],
        vec![
            a_int("is_causal", 1),
            a_float("scale", scale as f32),
            a_float("softcap", softcap as f32),
            a_int("qk_matmul_output_mode", 2),
        ],
    );
    let out = run(
        &m,
        &[
            q.tensor(),
            k.tensor(),
            v.tensor(),
            mask.f32_tensor(),
            pk.tensor(),
            pv.tensor(),
        ],
    );
    close("y", &out[0], &want.y);
    close("present_k", &out[1], &kk.data);
    close("present_v", &out[2], &vv.data);
    close("qk (biased)", &out[3], &want.biased);
}

#[test]
fn three_d_inputs_bool_mask_and_a_fully_masked_row() {
    let mut r = rng(12);
    let (nb, heads, nq, nk, nd) = (2, 3, 3, 4, 2);
    let q = A4::random(&mut r, [nb, heads, nq, nd]);
    let k = A4::random(&mut r, [nb, heads, nk, nd]);
    let v = A4::random(&mut r, [nb, heads, nk, nd]);
    // query 1 may attend no key
    let allowed = |i: usize, j: usize| i != 1 && !(i + j).is_multiple_of(3);
    let mask: Vec<bool> = (0..nq * nk).map(|c| allowed(c / nk, c % nk)).collect();
    let bias = |_b: usize, _h: usize, i: usize, j: usize| {
        if allowed(i, j) {
            0.0
        } else {
            f64::NEG_INFINITY
        }
    };
    let scale = 1.0 / (nd as f64).sqrt();
    let s = (scale.sqrt() as f32 as f64).powi(2);
    let want = reference(&q, &k, &v, s, 0.0, &bias);
    let f = data_type::FLOAT;
    let m = attention_model(
        23,
        &[
            ("q", f, vec![nb, nq, heads * nd]),
            ("k", f, vec![nb, nk, heads * nd]),
            ("v", f, vec![nb, nk, heads * nd]),
            ("mask", data_type::BOOL, vec![nq, nk]),
        ],
        &["y", "", "", "qk"],
        vec![
            a_int("q_num_heads", heads as i64),
            a_int("kv_num_heads", heads as i64),
            a_int("qk_matmul_output_mode", 3),
        ],
    );
    let out = run(
        &m,
        &[
            tensor(&q.to_3d(), &[nb, nq, heads * nd]),
            tensor(&k.to_3d(), &[nb, nk, heads * nd]),
            tensor(&v.to_3d(), &[nb, nk, heads * nd]),
            Tensor::from_vec(mask, &[nq, nk]).unwrap(),
        ],
    );
    // the reference's y is [b, h, q, d]: as 3-D, [b, q, h * d]
    let y = A4 {
        dims: [nb, heads, nq, nd],
        data: want.y,
    };
    close("y", &out[0], &y.to_3d());
    close("qk (probabilities)", &out[1], &want.probs);
    // the fully masked query's outputs are zero, not NaN
    let got = out[0].to_f64_vec();
    assert!(got[heads * nd..2 * heads * nd].iter().all(|&x| x == 0.0));
}

#[test]
fn padded_keys_with_a_causal_sliding_window() {
    let mut r = rng(13);
    let (nb, heads, nq, nk, nd) = (3, 2, 2, 6, 4);
    let q = A4::random(&mut r, [nb, heads, nq, nd]);
    let k = A4::random(&mut r, [nb, heads, nk, nd]);
    let v = A4::random(&mut r, [nb, heads, nk, nd]);
    let nonpad = [6i64, 3, 1];
    let left = 2usize;
    let bias = |b: usize, _h: usize, i: usize, j: usize| {
        // query i sits at nonpad[b] - q_len + i (the last valid keys)
        let pos = nonpad[b] - nq as i64 + i as i64;
        let j = j as i64;
        let ok = j <= pos && pos - j <= left as i64 && j < nonpad[b];
        if ok { 0.0 } else { f64::NEG_INFINITY }
    };
    let scale = 1.0 / (nd as f64).sqrt();
    let s = (scale.sqrt() as f32 as f64).powi(2);
    let want = reference(&q, &k, &v, s, 0.0, &bias);
    let f = data_type::FLOAT;
    let m = attention_model(
        25,
        &[
            ("q", f, vec![nb, heads, nq, nd]),
            ("k", f, vec![nb, heads, nk, nd]),
            ("v", f, vec![nb, heads, nk, nd]),
            ("", f, vec![]),
            ("", f, vec![]),
            ("", f, vec![]),
            ("nonpad", data_type::INT64, vec![nb]),
        ],
        &["y"],
        vec![
            a_int("is_causal", 1),
            a_int("left_window_size", left as i64),
        ],
    );
    let out = run(
        &m,
        &[
            q.tensor(),
            k.tensor(),
            v.tensor(),
            Tensor::from_vec(nonpad.to_vec(), &[nb]).unwrap(),
        ],
    );
    close("y", &out[0], &want.y);
}

#[test]
fn bad_attention_nodes_are_errors_naming_the_node() {
    let f = data_type::FLOAT;
    let m = attention_model(
        23,
        &[
            ("q", f, vec![1, 2, 6]),
            ("k", f, vec![1, 2, 6]),
            ("v", f, vec![1, 2, 6]),
        ],
        &["y"],
        vec![a_int("q_num_heads", 4), a_int("kv_num_heads", 4)],
    );
    let err = import(&m).unwrap_err().to_string();
    assert!(
        err.contains("Attention") && err.contains("not a multiple of 4 heads"),
        "{err}"
    );
    let m = attention_model(
        23,
        &[
            ("q", f, vec![1, 2, 6]),
            ("k", f, vec![1, 2, 6]),
            ("v", f, vec![1, 2, 6]),
        ],
        &["y"],
        vec![],
    );
    let err = import(&m).unwrap_err().to_string();
    assert!(err.contains("q_num_heads"), "{err}");
}

/// The naive rotation of one head's features `x[0..d]` at angles `(cos, sin)`
/// per pair: pairs `(i, i + half)`, or `(2i, 2i + 1)` when interleaved.
fn rotate(x: &[f64], cos: &[f64], sin: &[f64], rot: usize, interleaved: bool) -> Vec<f64> {
    let mut out = x.to_vec();
    for i in 0..rot / 2 {
        let (a, b) = if interleaved {
            (2 * i, 2 * i + 1)
        } else {
            (i, i + rot / 2)
        };
        out[a] = cos[i] * x[a] - sin[i] * x[b];
        out[b] = sin[i] * x[a] + cos[i] * x[b];
    }
    out
}

#[test]
fn rotary_embedding_rotates_pairs_by_position() {
    let mut r = rng(14);
    let (nb, heads, ns, nd, npos) = (2, 3, 4, 6, 10);
    let x = A4::random(&mut r, [nb, heads, ns, nd]);
    let pos: Vec<i64> = (0..nb * ns).map(|i| (i as i64 * 3) % npos as i64).collect();
    for (interleaved, rot) in [(false, nd), (true, nd), (false, 4), (true, 2)] {
        let half = rot / 2;
        let cos = random(&mut r, &[npos, half], -1.0, 1.0);
        let sin = random(&mut r, &[npos, half], -1.0, 1.0);
        let f = data_type::FLOAT;
        let m = model(
            23,
            graph(
                vec![node(
                    "RotaryEmbedding",
                    &["x", "cos", "sin", "pos"],
                    &["y"],
                    vec![
                        a_int("interleaved", i64::from(interleaved)),
                        a_int("rotary_embedding_dim", rot as i64),
                    ],
                )],
                vec![
                    vi("x", f, &["2", "3", "4", "6"]),
                    vi("cos", f, &["10", &half.to_string()]),
                    vi("sin", f, &["10", &half.to_string()]),
                    vi("pos", data_type::INT64, &["2", "4"]),
                ],
                vec![vi("y", f, &[])],
                vec![],
            ),
        );
        let out = run(
            &m,
            &[
                x.tensor(),
                cos.f32_tensor(),
                sin.f32_tensor(),
                Tensor::from_vec(pos.clone(), &[nb, ns]).unwrap(),
            ],
        );
        let mut want = Vec::new();
        for b in 0..nb {
            for h in 0..heads {
                for s in 0..ns {
                    let p = pos[b * ns + s] as usize;
                    let feats: Vec<f64> = (0..nd).map(|d| x.at(b, h, s, d)).collect();
                    want.extend(rotate(
                        &feats,
                        &cos.data[p * half..(p + 1) * half],
                        &sin.data[p * half..(p + 1) * half],
                        rot,
                        interleaved,
                    ));
                }
            }
        }
        close(&format!("rotary {interleaved} {rot}"), &out[0], &want);
    }
}
