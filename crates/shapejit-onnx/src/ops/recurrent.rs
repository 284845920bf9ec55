//! `RNN`, `GRU` and `LSTM`, unrolled over a sequence length known at load:
//! per direction and time step, the gates `x_t·Wᵀ + h·Rᵀ + Wb + Rb` as
//! matmuls and adds, then the cell's update, as the ONNX spec writes it
//! (gate orders: GRU `z, r, h`; LSTM `i, o, f, c`; peepholes `i, o, f`).
//!
//! Directions: `forward`, `reverse` (the sequence read backwards, `Y` in the
//! input's order) and `bidirectional` (both, stacked on `Y`'s direction axis).
//! `layout = 1` swaps the batch and sequence axes of `X`, `Y` and the states.
//! `sequence_lens` masks a forward pass (a batch past its length keeps its
//! state and gets zeros in `Y`); with a reverse pass it is unsupported, and so
//! are activations other than the defaults, `clip` and LSTM's `input_forget`.
//!
//! **Invariant:** outputs are `Y [seq, dirs, batch, hidden]` (layout 0),
//! `Y_h` and `Y_c` `[dirs, batch, hidden]`, in the input's dtype (f32 after
//! promotion).

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, DType, Op, UnaryOp, ValueId};

/// Which recurrent cell.
#[derive(Clone, Copy, PartialEq)]
pub enum Cell {
    /// `h = tanh(gates)`
    Rnn,
    /// update and reset gates
    Gru,
    /// input, output, forget gates and a cell state
    Lstm,
}

impl Cell {
    fn gates(self) -> i64 {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["tanh"],
            Cell::Gru => &["sigmoid", "tanh"],
            Cell::Lstm => &["sigmoid", "tanh", "tanh"],
        }
    }
}

/// Row `i` of `v` along axis 0, the axis removed.
fn pick(cx: &mut NodeCx, v: ValueId, i: i64) -> NodeResult<ValueId> {
    let at = cx.const_scalar(DType::I64, i as f64);
    cx.op(Op::Gather { axis: 0 }, &[v, at])
}

/// Columns `[k·h, (k+1)·h)` of the last axis.
fn part(cx: &mut NodeCx, v: ValueId, k: i64, h: i64) -> NodeResult<ValueId> {
    cx.op(
        Op::Slice {
            starts: vec![k * h],
            ends: vec![(k + 1) * h],
            axes: vec![-1],
            steps: vec![1],
        },
        &[v],
    )
}

fn transpose(cx: &mut NodeCx, v: ValueId) -> NodeResult<ValueId> {
    cx.op(Op::Transpose { perm: vec![1, 0] }, &[v])
}

/// One direction's weights: `Wᵀ [in, G·h]`, `Rᵀ [h, G·h]`, the biases
/// `Wb`, `Rb` `[G·h]` (None: zero) and the peepholes `[3h]`.
struct Weights {
    wt: ValueId,
    rt: ValueId,
    wb: Option<ValueId>,
    rb: Option<ValueId>,
    p: Option<ValueId>,
}

/// `RNN`, `GRU` or `LSTM`.
pub fn recurrent(cx: &mut NodeCx, cell: Cell) -> NodeResult<Vec<ValueId>> {
    let (x, w, r) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let b = cx.opt_input(3)?;
    let lens = cx.opt_input(4)?;
    let h0 = cx.opt_input(5)?;
    let (c0, peep) = if cell == Cell::Lstm {
        (cx.opt_input(6)?, cx.opt_input(7)?)
    } else {
        (None, None)
    };
    let hidden = cx
        .attr_int("hidden_size")?
        .ok_or_else(|| cx.bad("required attribute 'hidden_size' is missing"))?;
    let direction = cx
        .attr_string("direction")?
        .unwrap_or_else(|| "forward".into());
    let dirs: Vec<bool> = match direction.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(cx.bad(format!("direction = '{other}'"))),
    };
    let layout = cx.int_or("layout", 0)?;
    if let Some(acts) = cx.attr_strings("activations")? {
        let defaults = cell.default_activations();
        let expected: Vec<&str> = dirs.iter().flat_map(|_| defaults.iter().copied()).collect();
        if acts.len() != expected.len()
            || acts
                .iter()
                .zip(&expected)
                .any(|(a, e)| !a.eq_ignore_ascii_case(e))
        {
            return Err(cx.unsupported(format!("activations {acts:?}")));
        }
    }
    cx.attrs.ignore("activation_alpha");
    cx.attrs.ignore("activation_beta");
    if cx.attr_float("clip")?.is_some() {
        return Err(cx.unsupported("clip"));
    }
    if cell == Cell::Lstm && cx.int_or("input_forget", 0)? != 0 {
        return Err(cx.unsupported("input_forget = 1"));
    }
    let linear_before_reset = cell == Cell::Gru && cx.int_or("linear_before_reset", 0)? != 0;
    if lens.is_some() && dirs.contains(&true) {
        return Err(cx.unsupported("sequence_lens with a reverse pass"));
    }
    let x = if layout == 1 {
        cx.op(
            Op::Transpose {
                perm: vec![1, 0, 2],
            },
            &[x],
        )?
    } else {
        x
    };
    let state = |cx: &mut NodeCx, v: Option<ValueId>| -> NodeResult<Option<ValueId>> {
        match v {
            Some(v) if layout == 1 => Ok(Some(cx.op(
                Op::Transpose {
                    perm: vec![1, 0, 2],
                },
                &[v],
            )?)),
            other => Ok(other),
        }
    };
    let (h0, c0) = (state(cx, h0)?, state(cx, c0)?);
    let seq = cx.ty(x).shape.dims()[0]
        .as_known()
        .ok_or_else(|| cx.unsupported("a recurrence over a symbolic sequence length"))?;
    let g = cell.gates();
    // zeros [batch, hidden]
    let batch = cx.op(
        Op::Shape {
            start: 1,
            end: Some(2),
        },
        &[x],
    )?;
    let width = cx.const_i64s(vec![hidden]);
    let shape = cx.op(Op::Concat { axis: 0 }, &[batch, width])?;
    let zero_state = cx.op(
        Op::ConstantOfShape {
            value: shapejit_ir::Tensor::scalar(0f32),
        },
        &[shape],
    )?;
    let valid = match lens {
        Some(l) => {
            let l = cx.op(Op::Cast { to: DType::I64 }, &[l])?;
            let s = cx.const_i64s(vec![-1, 1]);
            Some(cx.op(Op::Reshape { allowzero: false }, &[l, s])?)
        }
        None => None,
    };

    let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for (d, &backward) in dirs.iter().enumerate() {
        let d = d as i64;
        let wt = pick(cx, w, d)?;
        let wt = transpose(cx, wt)?;
        let rt = pick(cx, r, d)?;
        let rt = transpose(cx, rt)?;
        let (wb, rb) = match b {
            Some(b) => {
                let bd = pick(cx, b, d)?;
                let wb = cx.op(
                    Op::Slice {
                        starts: vec![0],
                        ends: vec![g * hidden],
                        axes: vec![0],
                        steps: vec![1],
                    },
                    &[bd],
                )?;
                let rb = cx.op(
                    Op::Slice {
                        starts: vec![g * hidden],
                        ends: vec![2 * g * hidden],
                        axes: vec![0],
                        steps: vec![1],
                    },
                    &[bd],
                )?;
                (Some(wb), Some(rb))
            }
            None => (None, None),
        };
        let p = match peep {
            Some(p) => Some(pick(cx, p, d)?),
            None => None,
        };
        let weights = Weights { wt, rt, wb, rb, p };
        let mut h = match h0 {
            Some(h0) => pick(cx, h0, d)?,
            None => zero_state,
        };
        let mut c = match c0 {
            Some(c0) => pick(cx, c0, d)?,
            None => zero_state,
        };
        let mut outs = vec![None; seq as usize];
        for step in 0..seq {
            let t = if backward { seq - 1 - step } else { step };
            let xt = pick(cx, x, t)?;
            let (h_new, c_new) =
                step_cell(cx, cell, &weights, xt, (h, c), hidden, linear_before_reset)?;
            let (h_next, c_next, y) = match valid {
                Some(l) => {
                    let tc = cx.const_scalar(DType::I64, t as f64);
                    let live = cx.bin(BinaryOp::Lt, tc, l)?;
                    let hn = cx.op(Op::Where, &[live, h_new, h])?;
                    let cn = cx.op(Op::Where, &[live, c_new, c])?;
                    let y = cx.op(Op::Where, &[live, h_new, zero_state])?;
                    (hn, cn, y)
                }
                None => (h_new, c_new, h_new),
            };
            h = h_next;
            c = c_next;
            outs[t as usize] = Some(y);
        }
        let outs: Vec<ValueId> = outs
            .into_iter()
            .map(|o| o.ok_or_else(|| cx.bad("an empty sequence")))
            .collect::<NodeResult<_>>()?;
        // [seq, batch, hidden] for this direction
        let stacked = outs
            .iter()
            .map(|&o| cx.op(Op::Unsqueeze { axes: vec![0] }, &[o]))
            .collect::<NodeResult<Vec<_>>>()?;
        let y = cx.op(Op::Concat { axis: 0 }, &stacked)?;
        ys.push(cx.op(Op::Unsqueeze { axes: vec![1] }, &[y])?);
        hs.push(cx.op(Op::Unsqueeze { axes: vec![0] }, &[h])?);
        cs.push(cx.op(Op::Unsqueeze { axes: vec![0] }, &[c])?);
    }
    let join = |cx: &mut NodeCx, v: Vec<ValueId>, axis: i64| -> NodeResult<ValueId> {
        if v.len() == 1 {
            return Ok(v[0]);
        }
        cx.op(Op::Concat { axis }, &v)
    };
    let mut y = join(cx, ys, 1)?;
    let mut yh = join(cx, hs, 0)?;
    let mut yc = join(cx, cs, 0)?;
    if layout == 1 {
        y = cx.op(
            Op::Transpose {
                perm: vec![2, 0, 1, 3],
            },
            &[y],
        )?;
        let swap = Op::Transpose {
            perm: vec![1, 0, 2],
        };
        yh = cx.op(swap.clone(), &[yh])?;
        yc = cx.op(swap, &[yc])?;
    }
    let mut outs = vec![y, yh];
    if cell == Cell::Lstm {
        outs.push(yc);
    }
    Ok(outs)
}

/// `a + b`, skipping an absent `b`.
fn add(cx: &mut NodeCx, a: ValueId, b: Option<ValueId>) -> NodeResult<ValueId> {
    match b {
        Some(b) => cx.bin(BinaryOp::Add, a, b),
        None => Ok(a),
    }
}

/// One time step from the states `(h, c)`: the new hidden state and cell
/// state (`c` unchanged but for LSTM).
fn step_cell(
    cx: &mut NodeCx,
    cell: Cell,
    w: &Weights,
    xt: ValueId,
    (h, c): (ValueId, ValueId),
    hidden: i64,
    linear_before_reset: bool,
) -> NodeResult<(ValueId, ValueId)> {
    let xw = cx.op(Op::MatMul, &[xt, w.wt])?;
    let xw = add(cx, xw, w.wb)?;
    let sigmoid = |cx: &mut NodeCx, v| cx.un(UnaryOp::Sigmoid, v);
    let tanh = |cx: &mut NodeCx, v| cx.un(UnaryOp::Tanh, v);
    match cell {
        Cell::Rnn => {
            let hr = cx.op(Op::MatMul, &[h, w.rt])?;
            let hr = add(cx, hr, w.rb)?;
            let s = cx.bin(BinaryOp::Add, xw, hr)?;
            Ok((tanh(cx, s)?, c))
        }
        Cell::Gru => {
            let hr = cx.op(Op::MatMul, &[h, w.rt])?;
            let hr = add(cx, hr, w.rb)?;
            let gate = |cx: &mut NodeCx, k: i64| -> NodeResult<ValueId> {
                let a = part(cx, xw, k, hidden)?;
                let b = part(cx, hr, k, hidden)?;
                let s = cx.bin(BinaryOp::Add, a, b)?;
                sigmoid(cx, s)
            };
            let (z, rg) = (gate(cx, 0)?, gate(cx, 1)?);
            let xh = part(cx, xw, 2, hidden)?;
            let pre = if linear_before_reset {
                // r ⊙ (h·Rhᵀ + Rbh)
                let hh = part(cx, hr, 2, hidden)?;
                cx.bin(BinaryOp::Mul, rg, hh)?
            } else {
                // (r ⊙ h)·Rhᵀ + Rbh
                let rh = cx.bin(BinaryOp::Mul, rg, h)?;
                let rt_h = part(cx, w.rt, 2, hidden)?;
                let m = cx.op(Op::MatMul, &[rh, rt_h])?;
                let rb_h = match w.rb {
                    Some(rb) => Some(part(cx, rb, 2, hidden)?),
                    None => None,
                };
                add(cx, m, rb_h)?
            };
            let s = cx.bin(BinaryOp::Add, xh, pre)?;
            let cand = tanh(cx, s)?;
            // (1 - z) ⊙ cand + z ⊙ h = cand + z ⊙ (h - cand)
            let diff = cx.bin(BinaryOp::Sub, h, cand)?;
            let zd = cx.bin(BinaryOp::Mul, z, diff)?;
            Ok((cx.bin(BinaryOp::Add, cand, zd)?, c))
        }
        Cell::Lstm => {
            let hr = cx.op(Op::MatMul, &[h, w.rt])?;
            let hr = add(cx, hr, w.rb)?;
            let pre = |cx: &mut NodeCx, k: i64| -> NodeResult<ValueId> {
                let a = part(cx, xw, k, hidden)?;
                let b = part(cx, hr, k, hidden)?;
                cx.bin(BinaryOp::Add, a, b)
            };
            let peep =
                |cx: &mut NodeCx, k: i64, state: ValueId, v: ValueId| -> NodeResult<ValueId> {
                    match w.p {
                        Some(p) => {
                            let pk = part(cx, p, k, hidden)?;
                            let ps = cx.bin(BinaryOp::Mul, pk, state)?;
                            cx.bin(BinaryOp::Add, v, ps)
                        }
                        None => Ok(v),
                    }
                };
            // gates i (0), o (1), f (2), c (3); peepholes i (0), o (1), f (2)
            let i = pre(cx, 0)?;
            let i = peep(cx, 0, c, i)?;
            let i = sigmoid(cx, i)?;
            let f = pre(cx, 2)?;
            let f = peep(cx, 2, c, f)?;
            let f = sigmoid(cx, f)?;
            let cand = pre(cx, 3)?;
            let cand = tanh(cx, cand)?;
            let fc = cx.bin(BinaryOp::Mul, f, c)?;
            let ic = cx.bin(BinaryOp::Mul, i, cand)?;
            let c_new = cx.bin(BinaryOp::Add, fc, ic)?;
            let o = pre(cx, 1)?;
            let o = peep(cx, 1, c_new, o)?;
            let o = sigmoid(cx, o)?;
            let tc = tanh(cx, c_new)?;
            Ok((cx.bin(BinaryOp::Mul, o, tc)?, c_new))
        }
    }
}
