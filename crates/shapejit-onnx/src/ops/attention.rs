//! `Attention` (versions 23–25) composed from IR ops as its ONNX function body
//! composes it: scaled `Q·Kᵀ` (the scale's square root on both operands),
//! optional softcap, an additive bias (the mask, causal and sliding-window
//! limits, padded keys), softmax, `·V`.
//!
//! The bias is 0 where a query may attend a key and -inf where it may not; a
//! query row whose bias is -inf everywhere gets zero probabilities (and a zero
//! output) instead of the softmax's NaN, as the spec says. Causal and window
//! limits are offset-aligned: with `past_key`, a query at `i` sits at position
//! `i + past`; with `nonpad_kv_seqlen` (no past), at `i + nonpad[b] - q_len`.
//! Grouped-query attention repeats each K/V head `q_heads / kv_heads` times,
//! interleaved (`h0, h0, h1, h1, ...`).
//!
//! Needs the head counts and head sizes and the query and key lengths known at
//! load (the batch may be symbolic); the masks' index patterns are constants.
//!
//! `RotaryEmbedding` (the rotation transformers apply to Q and K before
//! attention) is composed here too, from slices, products and concats.
//!
//! **Invariant:** every output is the reference's (`onnx.reference`'s
//! `Attention`, `RotaryEmbedding`) up to the rounding of the IR ops it is
//! made of.

use crate::node::{NodeCx, NodeResult};
use crate::tensor::dtype_of;
use shapejit_ir::{BinaryOp, DType, Op, ReduceOp, Tensor, UnaryOp, ValueId};

/// The known dim `i` of `x`, or an unsupported error.
fn dim(cx: &NodeCx, x: ValueId, i: usize, what: &str) -> NodeResult<i64> {
    let dims = cx.ty(x).shape.dims();
    dims.get(i)
        .and_then(|d| d.as_known())
        .ok_or_else(|| cx.unsupported(format!("{what} of symbolic size (shape {dims:?})")))
}

fn reshape(cx: &mut NodeCx, x: ValueId, shape: Vec<i64>) -> NodeResult<ValueId> {
    let s = cx.const_i64s(shape);
    cx.op(Op::Reshape { allowzero: false }, &[x, s])
}

/// `[b, s, heads * d]` → `[b, heads, s, d]`.
fn split_heads(cx: &mut NodeCx, x: ValueId, heads: i64) -> NodeResult<ValueId> {
    let hidden = dim(cx, x, 2, "a hidden size")?;
    if heads <= 0 || hidden % heads != 0 {
        return Err(cx.bad(format!(
            "hidden size {hidden} is not a multiple of {heads} heads"
        )));
    }
    let r = reshape(cx, x, vec![0, 0, heads, hidden / heads])?;
    cx.op(
        Op::Transpose {
            perm: vec![0, 2, 1, 3],
        },
        &[r],
    )
}

/// Repeats each head of `[b, kv_heads, s, d]` `reps` times, interleaved.
fn repeat_heads(cx: &mut NodeCx, x: ValueId, reps: i64) -> NodeResult<ValueId> {
    let (heads, d) = (dim(cx, x, 1, "heads")?, dim(cx, x, 3, "a head size")?);
    let u = cx.op(Op::Unsqueeze { axes: vec![2] }, &[x])?;
    let shape = cx.const_i64s(vec![1, 1, reps, 1, 1]);
    let e = cx.op(Op::Expand, &[u, shape])?;
    reshape(cx, e, vec![0, heads * reps, -1, d])
}

/// `where(allowed, 0, -inf)` as f32.
fn bias_of(cx: &mut NodeCx, allowed: ValueId) -> NodeResult<ValueId> {
    let zero = cx.const_scalar(DType::F32, 0.0);
    let ninf = cx.const_scalar(DType::F32, f64::NEG_INFINITY);
    cx.op(Op::Where, &[allowed, zero, ninf])
}

/// `Attention(Q, K, V, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen?)`
/// → `Y, present_key, present_value, qk_matmul_output`.
pub fn attention(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (q, k, v) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let mask = cx.opt_input(3)?;
    let (past_k, past_v) = (cx.opt_input(4)?, cx.opt_input(5)?);
    let nonpad = cx.opt_input(6)?;
    let scale = cx.attr_float("scale")?;
    let causal = cx.int_or("is_causal", 0)? != 0;
    let q_heads = cx.attr_int("q_num_heads")?;
    let kv_heads = cx.attr_int("kv_num_heads")?;
    let precision = cx.attr_int("softmax_precision")?;
    let softcap = cx.float_or("softcap", 0.0)?;
    let mode = cx.int_or("qk_matmul_output_mode", 0)?;
    let left = cx.int_or("left_window_size", -1)?;
    let right = cx.int_or("right_window_size", -1)?;
    if past_k.is_some() != past_v.is_some() {
        return Err(cx.bad("past_key and past_value must be given together"));
    }
    if nonpad.is_some() && past_k.is_some() {
        return Err(cx.bad("nonpad_kv_seqlen cannot be combined with past_key"));
    }
    if !(0..=3).contains(&mode) || left < -1 || right < -1 {
        return Err(cx.bad(format!(
            "qk_matmul_output_mode {mode}, window sizes {left}, {right}"
        )));
    }
    // f16, bf16 and f64 inputs arrive promoted to f32 (see `promote`), and
    // every step runs in f32: a softmax_precision of FLOAT is what runs
    if let Some(p) = precision
        && i32::try_from(p).ok().and_then(dtype_of) != Some(DType::F32)
    {
        return Err(cx.unsupported(format!("softmax_precision {p} (the softmax runs in f32)")));
    }
    let dtype = cx.ty(q).dtype;
    if dtype != DType::F32 {
        return Err(cx.bad(format!("Attention on {dtype}")));
    }
    let rank = cx.rank(q);
    let (q, k, v) = match rank {
        3 => {
            let (Some(qh), Some(kvh)) = (q_heads, kv_heads) else {
                return Err(cx.bad("3-D inputs need q_num_heads and kv_num_heads"));
            };
            (
                split_heads(cx, q, qh)?,
                split_heads(cx, k, kvh)?,
                split_heads(cx, v, kvh)?,
            )
        }
        4 => (q, k, v),
        _ => return Err(cx.bad(format!("Q has rank {rank}, expected 3 or 4"))),
    };
    let head_size = dim(cx, q, 3, "a head size")?;
    let scale = scale.map_or(1.0 / (head_size as f64).sqrt(), f64::from);
    let root = cx.const_scalar(DType::F32, f64::from(scale.sqrt() as f32));

    // the cache: present = past ++ new along the sequence
    let (k, v) = match (past_k, past_v) {
        (Some(pk), Some(pv)) => (
            cx.op(Op::Concat { axis: 2 }, &[pk, k])?,
            cx.op(Op::Concat { axis: 2 }, &[pv, v])?,
        ),
        _ => (k, v),
    };
    let (present_k, present_v) = (k, v);
    let q_len = dim(cx, q, 2, "a query length")?;
    let kv_len = dim(cx, k, 2, "a key length")?;
    let past_len = match past_k {
        Some(pk) => dim(cx, pk, 2, "a past length")?,
        None => 0,
    };

    // the additive bias, summed from its parts (None: no bias at all)
    let mut parts = Vec::new();
    if let Some(m) = mask {
        let mut m = if cx.ty(m).dtype == DType::Bool {
            bias_of(cx, m)?
        } else {
            m
        };
        let m_rank = cx.rank(m);
        let width = dim(cx, m, m_rank - 1, "a mask length")?;
        if width < kv_len {
            let mut pads = vec![0; 2 * m_rank];
            pads[2 * m_rank - 1] = kv_len - width;
            m = cx.op(
                Op::Pad {
                    pads,
                    value: f32::NEG_INFINITY,
                },
                &[m],
            )?;
        }
        parts.push(m);
    }
    let windowed = left >= 0 || right >= 0;
    if causal || windowed {
        // diff[i, j] = (position of query i) - j, per batch with nonpad
        let rel: Vec<i64> = (0..q_len)
            .flat_map(|i| (0..kv_len).map(move |j| i - j))
            .collect();
        let rel = Tensor::from_vec(rel, &[q_len as usize, kv_len as usize])
            .map_err(|e| cx.bad(e.to_string()))?;
        let rel = cx.constant(rel);
        let offset = match nonpad {
            Some(n) => {
                let n = cx.op(Op::Cast { to: DType::I64 }, &[n])?;
                let n = reshape(cx, n, vec![-1, 1, 1, 1])?;
                let ql = cx.const_scalar(DType::I64, q_len as f64);
                cx.bin(BinaryOp::Sub, n, ql)?
            }
            None => cx.const_scalar(DType::I64, past_len as f64),
        };
        let diff = cx.bin(BinaryOp::Add, rel, offset)?;
        let mut limits = Vec::new();
        if causal {
            limits.push((BinaryOp::Ge, 0));
        }
        if left >= 0 {
            limits.push((BinaryOp::Le, left));
        }
        if right >= 0 {
            limits.push((BinaryOp::Ge, -right));
        }
        let mut allowed = None;
        for (cmp, bound) in limits {
            let b = cx.const_scalar(DType::I64, bound as f64);
            let ok = cx.bin(cmp, diff, b)?;
            allowed = Some(match allowed {
                Some(a) => cx.bin(BinaryOp::And, a, ok)?,
                None => ok,
            });
        }
        if let Some(a) = allowed {
            parts.push(bias_of(cx, a)?);
        }
    }
    if let Some(n) = nonpad {
        let n = cx.op(Op::Cast { to: DType::I64 }, &[n])?;
        let n = reshape(cx, n, vec![-1, 1, 1, 1])?;
        let j = cx.const_i64s((0..kv_len).collect());
        let ok = cx.bin(BinaryOp::Lt, j, n)?;
        parts.push(bias_of(cx, ok)?);
    }
    let mut bias = None;
    for p in parts {
        bias = Some(match bias {
            Some(b) => cx.bin(BinaryOp::Add, b, p)?,
            None => p,
        });
    }

    // grouped-query attention
    let (qh, kh) = (dim(cx, q, 1, "heads")?, dim(cx, k, 1, "heads")?);
    let (k, v) = if qh != kh && kh > 0 && qh % kh == 0 {
        (repeat_heads(cx, k, qh / kh)?, repeat_heads(cx, v, qh / kh)?)
    } else {
        (k, v)
    };

    let qs = cx.bin(BinaryOp::Mul, q, root)?;
    let ks = cx.bin(BinaryOp::Mul, k, root)?;
    let kt = cx.op(
        Op::Transpose {
            perm: vec![0, 1, 3, 2],
        },
        &[ks],
    )?;
    let mut logits = cx.op(Op::MatMul, &[qs, kt])?;
    if softcap > 0.0 {
        let c = cx.const_scalar(DType::F32, f64::from(softcap));
        let t = cx.bin(BinaryOp::Div, logits, c)?;
        let t = cx.un(UnaryOp::Tanh, t)?;
        logits = cx.bin(BinaryOp::Mul, t, c)?;
    }
    let biased = match bias {
        Some(b) => cx.bin(BinaryOp::Add, logits, b)?,
        None => logits,
    };
    let mut probs = cx.op(Op::Softmax { axis: -1 }, &[biased])?;
    if let Some(b) = bias {
        let top = cx.op(
            Op::Reduce {
                op: ReduceOp::Max,
                axes: vec![-1],
                keepdims: true,
            },
            &[b],
        )?;
        let ninf = cx.const_scalar(DType::F32, f64::NEG_INFINITY);
        let masked = cx.bin(BinaryOp::Eq, top, ninf)?;
        let zero = cx.const_scalar(DType::F32, 0.0);
        probs = cx.op(Op::Where, &[masked, zero, probs])?;
    }
    let y = cx.op(Op::MatMul, &[probs, v])?;
    let y = if rank == 3 {
        let t = cx.op(
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[y],
        )?;
        reshape(cx, t, vec![0, 0, -1])?
    } else {
        y
    };
    let mut outs = vec![y, present_k, present_v];
    if cx.wants_output(3) {
        outs.push(match mode {
            0 | 1 => logits,
            2 => biased,
            _ => probs,
        });
    }
    Ok(outs)
}

/// `RotaryEmbedding(X, cos_cache, sin_cache, position_ids?)` (version 23):
/// the first `rotary_embedding_dim` (default: all) of each head's features
/// rotated in pairs by the cached angles — pairs `(i, i + half)`, or adjacent
/// pairs with `interleaved` — the rest passed through. `X` is `[b, heads, s,
/// d]` or `[b, s, heads · d]` (with `num_heads`); the caches are `[positions,
/// half]` indexed by `position_ids`, or `[b, s, half]` without them. Needs the
/// head size known.
pub fn rotary_embedding(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, cos, sin) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let positions = cx.opt_input(3)?;
    let interleaved = cx.int_or("interleaved", 0)? != 0;
    let rotary = cx.int_or("rotary_embedding_dim", 0)?;
    let heads = cx.int_or("num_heads", 0)?;
    let rank = cx.rank(x);
    let bshd = match rank {
        4 => cx.op(
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[x],
        )?,
        3 if heads > 0 => reshape(cx, x, vec![0, 0, heads, -1])?,
        3 => return Err(cx.bad("3-D input needs num_heads")),
        _ => return Err(cx.bad(format!("input of rank {rank}, expected 3 or 4"))),
    };
    let d = dim(cx, bshd, 3, "a head size")?;
    let rot = if rotary == 0 { d } else { rotary };
    if rot <= 0 || rot > d || rot % 2 != 0 {
        return Err(cx.bad(format!(
            "rotary_embedding_dim {rot} for head size {d} (it must be even and at most the head size)"
        )));
    }
    let half = rot / 2;
    let cut = |cx: &mut NodeCx, v: ValueId, start: i64, end: i64, step: i64| {
        cx.op(
            Op::Slice {
                starts: vec![start],
                ends: vec![end],
                axes: vec![-1],
                steps: vec![step],
            },
            &[v],
        )
    };
    let x_rot = cut(cx, bshd, 0, rot, 1)?;
    let (cos, sin) = match positions {
        Some(p) => (
            cx.op(Op::Gather { axis: 0 }, &[cos, p])?,
            cx.op(Op::Gather { axis: 0 }, &[sin, p])?,
        ),
        None => (cos, sin),
    };
    let cos = cx.op(Op::Unsqueeze { axes: vec![2] }, &[cos])?;
    let sin = cx.op(Op::Unsqueeze { axes: vec![2] }, &[sin])?;
    let (x1, x2) = if interleaved {
        (cut(cx, x_rot, 0, rot, 2)?, cut(cx, x_rot, 1, rot, 2)?)
    } else {
        (cut(cx, x_rot, 0, half, 1)?, cut(cx, x_rot, half, rot, 1)?)
    };
    let (c1, s2) = (
        cx.bin(BinaryOp::Mul, cos, x1)?,
        cx.bin(BinaryOp::Mul, sin, x2)?,
    );
    let real = cx.bin(BinaryOp::Sub, c1, s2)?;
    let (s1, c2) = (
        cx.bin(BinaryOp::Mul, sin, x1)?,
        cx.bin(BinaryOp::Mul, cos, x2)?,
    );
    let imag = cx.bin(BinaryOp::Add, s1, c2)?;
    let rotated = if interleaved {
        let r = cx.op(Op::Unsqueeze { axes: vec![-1] }, &[real])?;
        let i = cx.op(Op::Unsqueeze { axes: vec![-1] }, &[imag])?;
        let pairs = cx.op(Op::Concat { axis: -1 }, &[r, i])?;
        reshape(cx, pairs, vec![0, 0, 0, rot])?
    } else {
        cx.op(Op::Concat { axis: -1 }, &[real, imag])?
    };
    let out = if rot < d {
        let rest = cut(cx, bshd, rot, d, 1)?;
        cx.op(Op::Concat { axis: -1 }, &[rotated, rest])?
    } else {
        rotated
    };
    let y = if rank == 4 {
        cx.op(
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[out],
        )?
    } else {
        reshape(cx, out, vec![0, 0, -1])?
    };
    Ok(vec![y])
}
