//! Load-time graph rewrites of the kind onnxruntime applies: patterns that
//! exporters emit for one operation are replaced by that operation, so the
//! interpreter runs one kernel (one pass over memory) instead of several.
//!
//! - **GELU, erf form**: `x · 0.5 · (1 + erf(x / √2))` in the groupings
//!   exporters emit (`Mul(x, 1/√2)` or `Div(x, √2)`; the `0.5` applied to `x`,
//!   to the sum, or to the product) becomes `gelu(x)` (`tanh_approx = false`).
//! - **SiLU (swish)**: `Mul(x, Sigmoid(x))` (either operand order) becomes
//!   `silu(x)`, as onnxruntime's QuickGelu fusion does; PyTorch exports `SiLU`
//!   and `swish` so.
//! - **Batch norm after a convolution**: `batch_norm(conv2d(x, w, b))` whose
//!   weights, bias and batch-norm parameters are all f32 constants becomes one
//!   `conv2d(x, w·mul, b·mul + add)` with the batch norm's own
//!   `mul = scale / √(var + ε)`, `add = bias − mean·mul` (as onnxruntime folds it):
//!   new constants, placed just before the fused node.
//! - **Per-channel affine after a convolution**: `conv2d(x, w, b) · s + t` with
//!   `s` and `t` f32 constants of shape `[C, 1, 1]` or `[1, C, 1, 1]` (directly or
//!   through an `unsqueeze`/`reshape` of a `[C]` constant, as caffe2-converted models
//!   spell a scale layer) becomes `conv2d(x, w·s, b·s + t)`, folded as the batch
//!   norm is; after a batch norm with constant parameters it is multiplied into
//!   the batch norm's scale and shift instead.
//! - **Activation after a convolution or batch norm**: `relu`, `leaky_relu` or
//!   `clip` of a `conv2d` becomes the conv with that [`Activation`], which its
//!   kernel applies while the output is in registers; of a `batch_norm` (that
//!   no conv absorbed: the pre-activation `batch_norm → relu` of DenseNet-style
//!   blocks), the batch norm with it, one pass over memory instead of two.
//! - **Bias after a matrix product**: `matmul(a, b) + bias` (either operand
//!   order) with `b` of rank >= 2 and `bias` an f32 constant of shape `[n]`, the
//!   product's last dim, becomes `matmul_bias(a, b, bias)`, which the matmul
//!   kernel adds while the output is in registers.
//! - Dead code is removed afterwards ([`remove_dead`]): nodes none of whose
//!   results reach a graph output, and the values only they defined.
//!
//! **Invariant:** a rewrite fires only when every value it bypasses has exactly
//! one use and is not a graph output, and the fused node's result keeps its
//! dtype and shape; the graph's inputs and outputs are unchanged, and the result
//! passes [`crate::verify()`] whenever the input did.
//! **Invariant:** the fused GELU differs from the unfused chain only by rounding
//! (within the error [`UnaryOp::Gelu`]'s kernels state), the fused SiLU is
//! bit-identical to the chain (its kernel multiplies `x` by the sigmoid kernel's
//! result); the folded batch norm
//! and the per-channel affine only by rounding (within conv's 1e-5 relative
//! tolerance: the products and the bias are each rounded once more); a fused activation is bit-identical to the
//! unary op after the conv or batch norm, and `matmul_bias` to the `add` after the matmul.

use crate::dtype::DType;
use crate::graph::{Graph, Node, NodeId, ValueId, ValueInfo, ValueType};
use crate::op::{Activation, BinaryOp, Op, UnaryOp};
use crate::shape::Shape;
use crate::tensor::Tensor;
use std::collections::HashSet;

/// Applies every rewrite, then [`remove_dead`]; returns how many patterns fused.
pub fn fuse(graph: &mut Graph) -> usize {
    let fused = fuse_gelu(graph)
        + fuse_silu(graph)
        + apply_folds(graph, bn_fold)
        + apply_folds(graph, affine_fold)
        + fuse_activations(graph)
        + fuse_matmul_bias(graph);
    if fused > 0 {
        remove_dead(graph);
    }
    fused
}

/// What the rewrites look up about the graph.
struct Facts {
    producer: Vec<Option<NodeId>>,
    uses: Vec<usize>,
}

impl Facts {
    fn of(graph: &Graph) -> Facts {
        Facts {
            producer: graph.producers(),
            uses: graph.use_counts(),
        }
    }

    /// The node defining `v` when `v` feeds nothing but its one consumer.
    fn single_use_def<'g>(&self, graph: &'g Graph, v: ValueId) -> Option<(NodeId, &'g Op)> {
        if self.uses[v.index()] != 1 || graph.outputs.contains(&v) {
            return None;
        }
        let id = self.producer[v.index()]?;
        Some((id, &graph.node(id).op))
    }
}

/// The value of a one-element f32 constant.
fn scalar_of(graph: &Graph, facts: &Facts, v: ValueId) -> Option<f32> {
    let node = graph.node(facts.producer[v.index()]?);
    match &node.op {
        Op::Constant { value } if value.dtype() == DType::F32 && value.numel() == 1 => {
            value.as_slice::<f32>().ok()?.first().copied()
        }
        _ => None,
    }
}

/// `(other operand, constant)` of a binary node with `op` whose operand is the
/// scalar `c` (either side for commutative ops, right only otherwise).
fn with_scalar(
    graph: &Graph,
    facts: &Facts,
    node: NodeId,
    op: BinaryOp,
    c: f32,
) -> Option<ValueId> {
    let n = graph.node(node);
    if n.op != Op::Binary(op) || n.inputs.len() != 2 {
        return None;
    }
    let (a, b) = (n.inputs[0], n.inputs[1]);
    let close = |v| scalar_of(graph, facts, v).is_some_and(|x| (x - c).abs() <= c.abs() * 1e-6);
    if close(b) {
        Some(a)
    } else if close(a) && matches!(op, BinaryOp::Add | BinaryOp::Mul) {
        Some(b)
    } else {
        None
    }
}

/// Rewrites every erf-form GELU; returns how many.
fn fuse_gelu(graph: &mut Graph) -> usize {
    let facts = Facts::of(graph);
    let mut rewrites = Vec::new();
    for (idx, node) in graph.nodes.iter().enumerate() {
        if let Some(x) = gelu_input(graph, &facts, NodeId(idx as u32)) {
            let (xt, yt) = (&graph.value(x).ty, &graph.value(node.outputs[0]).ty);
            if xt == yt && xt.dtype == DType::F32 {
                rewrites.push((idx, x));
            }
        }
    }
    for &(idx, x) in &rewrites {
        let node = &mut graph.nodes[idx];
        node.op = Op::Unary(UnaryOp::Gelu { tanh_approx: false });
        node.inputs = vec![x];
    }
    rewrites.len()
}

/// When `root` is the last `Mul` of an erf-form GELU of `x`, returns `x`.
fn gelu_input(graph: &Graph, facts: &Facts, root: NodeId) -> Option<ValueId> {
    let node = graph.node(root);
    if node.op != Op::Binary(BinaryOp::Mul) || node.inputs.len() != 2 || node.outputs.len() != 1 {
        return None;
    }
    let (p, q) = (node.inputs[0], node.inputs[1]);
    // Mul(a, b) of two single-use intermediates or of one and a constant 0.5.
    for (u, v) in [(p, q), (q, p)] {
        // (x · 0.5) · (1 + erf)  or  (x · (1 + erf)) · 0.5  or  x · ((1 + erf) · 0.5)
        if let Some((u_id, _)) = facts.single_use_def(graph, u) {
            if let Some(x) = with_scalar(graph, facts, u_id, BinaryOp::Mul, 0.5)
                && one_plus_erf_of(graph, facts, v) == Some(x)
            {
                return Some(x);
            }
            if scalar_of(graph, facts, v).is_some_and(|c| c == 0.5) {
                let inner = graph.node(u_id);
                if inner.op == Op::Binary(BinaryOp::Mul) && inner.inputs.len() == 2 {
                    let (a, b) = (inner.inputs[0], inner.inputs[1]);
                    for (x, s) in [(a, b), (b, a)] {
                        if one_plus_erf_of(graph, facts, s) == Some(x) {
                            return Some(x);
                        }
                    }
                }
            }
            if let Some(s) = with_scalar(graph, facts, u_id, BinaryOp::Mul, 0.5)
                && one_plus_erf_of(graph, facts, s) == Some(v)
            {
                return Some(v);
            }
        }
    }
    None
}

/// Rewrites every `Mul(x, Sigmoid(x))` of f32 as `silu(x)`; returns how many.
fn fuse_silu(graph: &mut Graph) -> usize {
    let facts = Facts::of(graph);
    let mut rewrites = Vec::new();
    for (idx, node) in graph.nodes.iter().enumerate() {
        if node.op != Op::Binary(BinaryOp::Mul) || node.inputs.len() != 2 {
            continue;
        }
        let (p, q) = (node.inputs[0], node.inputs[1]);
        for (x, s) in [(p, q), (q, p)] {
            let sigmoid_of_x = facts.single_use_def(graph, s).is_some_and(|(id, op)| {
                *op == Op::Unary(UnaryOp::Sigmoid) && graph.node(id).inputs == [x]
            });
            let (xt, yt) = (&graph.value(x).ty, &graph.value(node.outputs[0]).ty);
            if sigmoid_of_x && xt == yt && xt.dtype == DType::F32 {
                rewrites.push((idx, x));
                break;
            }
        }
    }
    for &(idx, x) in &rewrites {
        let node = &mut graph.nodes[idx];
        node.op = Op::Unary(UnaryOp::Silu);
        node.inputs = vec![x];
    }
    rewrites.len()
}

/// When single-use `v` is `1 + erf(x/√2)` (either operand order), returns `x`.
fn one_plus_erf_of(graph: &Graph, facts: &Facts, v: ValueId) -> Option<ValueId> {
    let (add, _) = facts.single_use_def(graph, v)?;
    let e = with_scalar(graph, facts, add, BinaryOp::Add, 1.0)?;
    let (erf, op) = facts.single_use_def(graph, e)?;
    if *op != Op::Unary(UnaryOp::Erf) {
        return None;
    }
    let arg = graph.node(erf).inputs.first().copied()?;
    let (scale, _) = facts.single_use_def(graph, arg)?;
    with_scalar(
        graph,
        facts,
        scale,
        BinaryOp::Mul,
        std::f32::consts::FRAC_1_SQRT_2,
    )
    .or_else(|| with_scalar(graph, facts, scale, BinaryOp::Div, std::f32::consts::SQRT_2))
}

/// The contents of an f32 constant.
fn const_f32<'g>(graph: &'g Graph, facts: &Facts, v: ValueId) -> Option<&'g [f32]> {
    match &graph.node(facts.producer[v.index()]?).op {
        Op::Constant { value } if value.dtype() == DType::F32 => value.as_slice::<f32>().ok(),
        _ => None,
    }
}

/// A pattern folded into one node: the node that ends it takes `op` and
/// `inputs`, some of them new constants.
struct Fold {
    /// the node that ends the pattern
    node: usize,
    op: Op,
    inputs: Vec<FoldInput>,
}

/// An input of a folded node.
enum FoldInput {
    /// an existing value
    Value(ValueId),
    /// a new constant, named after the node and this suffix
    New(&'static str, Tensor),
}

/// Applies every fold `matcher` finds (given each node as the pattern's end);
/// new constants are placed just before their node. Returns how many.
fn apply_folds(graph: &mut Graph, matcher: fn(&Graph, &Facts, usize) -> Option<Fold>) -> usize {
    let facts = Facts::of(graph);
    let folds: Vec<Fold> = (0..graph.nodes.len())
        .filter_map(|idx| matcher(graph, &facts, idx))
        .collect();
    let count = folds.len();
    if count == 0 {
        return 0;
    }
    let mut names: HashSet<String> = graph.values.iter().map(|v| v.name.clone()).collect();
    names.extend(graph.nodes.iter().map(|n| n.name.clone()));
    let mut fresh = |base: String| {
        let mut name = base.clone();
        let mut k = 0;
        while !names.insert(name.clone()) {
            k += 1;
            name = format!("{base}.{k}");
        }
        name
    };
    let old = std::mem::take(&mut graph.nodes);
    let mut folds = folds.into_iter().peekable();
    for (idx, mut node) in old.into_iter().enumerate() {
        if let Some(fold) = folds.next_if(|f| f.node == idx) {
            let mut inputs = Vec::with_capacity(fold.inputs.len());
            for input in fold.inputs {
                let (what, value) = match input {
                    FoldInput::Value(v) => {
                        inputs.push(v);
                        continue;
                    }
                    FoldInput::New(what, value) => (what, value),
                };
                let id = ValueId(graph.values.len() as u32);
                graph.values.push(ValueInfo {
                    name: fresh(format!("{}.folded_{what}", node.name)),
                    ty: ValueType {
                        dtype: DType::F32,
                        shape: Shape::known(value.shape()),
                    },
                    known: None,
                });
                graph.nodes.push(Node {
                    name: fresh(format!("{}.folded_{what}", node.name)),
                    op: Op::Constant { value },
                    inputs: Vec::new(),
                    outputs: vec![id],
                });
                inputs.push(id);
            }
            node.op = fold.op;
            node.inputs = inputs;
        }
        graph.nodes.push(node);
    }
    count
}

/// The fold of batch norm node `idx`, when it normalizes (alone) the output of
/// a conv with no activation and every operand is an f32 constant of the
/// expected size.
fn bn_fold(graph: &Graph, facts: &Facts, idx: usize) -> Option<Fold> {
    let node = &graph.nodes[idx];
    let Op::BatchNorm {
        epsilon,
        activation: None,
    } = node.op
    else {
        return None;
    };
    let conv = facts.single_use_def(graph, *node.inputs.first()?)?.0;
    let c_out = conv_channels(graph, conv)?;
    let params: Vec<&[f32]> = node.inputs[1..]
        .iter()
        .map(|&v| const_f32(graph, facts, v).filter(|p| p.len() == c_out))
        .collect::<Option<_>>()?;
    let [scale, bn_bias, mean, var] = params[..] else {
        return None;
    };
    // the batch norm's own per-channel factors (see the VM's batch_norm)
    let mul: Vec<f32> = scale
        .iter()
        .zip(var)
        .map(|(&s, &v)| s / (v + epsilon).sqrt())
        .collect();
    let add: Vec<f32> = (0..c_out).map(|c| bn_bias[c] - mean[c] * mul[c]).collect();
    conv_fold(graph, facts, idx, conv, &mul, &add)
}

/// The fold of `add` node `idx` when it is `mul(y, s) + t` (either operand
/// order), `y` the output of a conv ([`conv_fold`]) or of a batch norm with
/// constant parameters (scale and shift multiplied into its own), `y` and the
/// product used only there, `s` and `t` per-channel constants
/// ([`channel_const`]).
fn affine_fold(graph: &Graph, facts: &Facts, idx: usize) -> Option<Fold> {
    let node = &graph.nodes[idx];
    if node.op != Op::Binary(BinaryOp::Add) || node.inputs.len() != 2 {
        return None;
    }
    let (mul_id, t) = [(0, 1), (1, 0)].into_iter().find_map(|(m, t)| {
        let (id, op) = facts.single_use_def(graph, node.inputs[m])?;
        (*op == Op::Binary(BinaryOp::Mul)).then_some((id, node.inputs[t]))
    })?;
    let mul = graph.node(mul_id);
    let (y, s) = [(0, 1), (1, 0)].into_iter().find_map(|(y, s)| {
        let (id, op) = facts.single_use_def(graph, *mul.inputs.get(y)?)?;
        let affine = matches!(
            op,
            Op::Conv2d { .. }
                | Op::BatchNorm {
                    activation: None,
                    ..
                }
        );
        affine.then_some((id, *mul.inputs.get(s)?))
    })?;
    let y_node = graph.node(y);
    let c = channels(graph, y)?;
    let (s, t) = (
        channel_const(graph, facts, s, c)?,
        channel_const(graph, facts, t, c)?,
    );
    if let Op::BatchNorm { .. } = y_node.op {
        let [x, scale, bias, mean, var] = y_node.inputs[..] else {
            return None;
        };
        let (scale, bias) = (
            const_f32(graph, facts, scale).filter(|v| v.len() == c)?,
            const_f32(graph, facts, bias).filter(|v| v.len() == c)?,
        );
        let scale: Vec<f32> = scale.iter().zip(s).map(|(&a, &m)| a * m).collect();
        let bias: Vec<f32> = (0..c).map(|i| bias[i] * s[i] + t[i]).collect();
        return Some(Fold {
            node: idx,
            op: y_node.op.clone(),
            inputs: vec![
                FoldInput::Value(x),
                FoldInput::New("scale", Tensor::from_vec(scale, &[c]).ok()?),
                FoldInput::New("bias", Tensor::from_vec(bias, &[c]).ok()?),
                FoldInput::Value(mean),
                FoldInput::Value(var),
            ],
        });
    }
    if conv_channels(graph, y)? != c {
        return None;
    }
    conv_fold(graph, facts, idx, y, s, t)
}

/// Output channels of node `conv` when it is a conv with no activation whose
/// output has a known channel count.
fn conv_channels(graph: &Graph, conv: NodeId) -> Option<usize> {
    let Op::Conv2d {
        activation: None, ..
    } = graph.node(conv).op
    else {
        return None;
    };
    channels(graph, conv)
}

/// The known, nonzero dim 1 (channels, NCHW) of node `id`'s first output.
fn channels(graph: &Graph, id: NodeId) -> Option<usize> {
    let c = graph
        .value(*graph.node(id).outputs.first()?)
        .ty
        .shape
        .dims()
        .get(1)?
        .as_known()?;
    usize::try_from(c).ok().filter(|&c| c > 0)
}

/// The `c` values of `v` when it is an f32 constant of shape `[c, 1, 1]` or
/// `[1, c, 1, 1]` (one value per channel of an NCHW tensor), directly or as an
/// `unsqueeze` or `reshape` of a constant of `c` elements.
fn channel_const<'g>(graph: &'g Graph, facts: &Facts, v: ValueId, c: usize) -> Option<&'g [f32]> {
    let dims = graph.value(v).ty.shape.as_known()?;
    if dims != [c, 1, 1] && dims != [1, c, 1, 1] {
        return None;
    }
    let node = graph.node(facts.producer[v.index()]?);
    let data = match node.op {
        Op::Unsqueeze { .. } | Op::Reshape { .. } => {
            const_f32(graph, facts, *node.inputs.first()?)?
        }
        _ => const_f32(graph, facts, v)?,
    };
    (data.len() == c).then_some(data)
}

/// `conv`'s weights and bias scaled by `mul` and shifted by `add` per output
/// channel, as the fold ending at node `idx`; `None` unless the weights (and the
/// bias, if any) are f32 constants of `mul.len()` channels.
fn conv_fold(
    graph: &Graph,
    facts: &Facts,
    idx: usize,
    conv: NodeId,
    mul: &[f32],
    add: &[f32],
) -> Option<Fold> {
    let conv_node = graph.node(conv);
    let c_out = mul.len();
    let w = const_f32(graph, facts, *conv_node.inputs.get(1)?)
        .filter(|w| !w.is_empty() && w.len() % c_out == 0)?;
    let conv_bias = match conv_node.inputs.get(2) {
        Some(&b) => Some(const_f32(graph, facts, b).filter(|b| b.len() == c_out)?),
        None => None,
    };
    let per_channel = w.len() / c_out;
    let w: Vec<f32> = w
        .chunks_exact(per_channel)
        .zip(mul)
        .flat_map(|(ws, &m)| ws.iter().map(move |&x| x * m))
        .collect();
    let b: Vec<f32> = (0..c_out)
        .map(|c| conv_bias.map_or(add[c], |b| b[c] * mul[c] + add[c]))
        .collect();
    let w_shape = graph.value(conv_node.inputs[1]).ty.shape.as_known()?;
    Some(Fold {
        node: idx,
        op: conv_node.op.clone(),
        inputs: vec![
            FoldInput::Value(conv_node.inputs[0]),
            FoldInput::New("w", Tensor::from_vec(w, &w_shape).ok()?),
            FoldInput::New("b", Tensor::from_vec(b, &[c_out]).ok()?),
        ],
    })
}

/// Fuses every `relu`, `leaky_relu` or `clip` of a conv's or batch norm's output
/// (its only use) into that op; returns how many.
fn fuse_activations(graph: &mut Graph) -> usize {
    let facts = Facts::of(graph);
    let mut rewrites = Vec::new();
    for (idx, node) in graph.nodes.iter().enumerate() {
        let Op::Unary(u) = node.op else { continue };
        let Some(act) = Activation::from_unary(u) else {
            continue;
        };
        let Some((producer_id, producer)) = node
            .inputs
            .first()
            .and_then(|&x| facts.single_use_def(graph, x))
        else {
            continue;
        };
        if graph.value(node.outputs[0]).ty.dtype != DType::F32 {
            continue;
        }
        let fused = match producer {
            Op::Conv2d {
                window,
                groups,
                activation: None,
            } => Op::Conv2d {
                window: window.clone(),
                groups: *groups,
                activation: Some(act),
            },
            Op::BatchNorm {
                epsilon,
                activation: None,
            } => Op::BatchNorm {
                epsilon: *epsilon,
                activation: Some(act),
            },
            _ => continue,
        };
        rewrites.push((idx, fused, graph.node(producer_id).inputs.clone()));
    }
    let count = rewrites.len();
    for (idx, op, inputs) in rewrites {
        let node = &mut graph.nodes[idx];
        node.op = op;
        node.inputs = inputs;
    }
    count
}

/// Rewrites every `add` of a `matmul` and a constant `[n]` f32 bias into one
/// `matmul_bias`; returns how many.
fn fuse_matmul_bias(graph: &mut Graph) -> usize {
    let facts = Facts::of(graph);
    let mut rewrites = Vec::new();
    for (idx, node) in graph.nodes.iter().enumerate() {
        let [x, y] = node.inputs[..] else { continue };
        let out = &graph.value(node.outputs[0]).ty;
        if node.op != Op::Binary(BinaryOp::Add) || out.dtype != DType::F32 {
            continue;
        }
        // a `[n]` constant along the product's last dim (no broadcast of the product)
        let bias_fits = |bias: ValueId, product: ValueId| {
            let n = out.shape.dims().last().and_then(|d| d.as_known());
            let vector = matches!(graph.value(bias).ty.shape.dims(), [d] if n.is_some() && d.as_known() == n);
            graph.value(product).ty.shape == out.shape
                && vector
                && const_f32(graph, &facts, bias).is_some()
        };
        let fused = [(x, y), (y, x)].into_iter().find_map(|(product, bias)| {
            let (mm, op) = facts.single_use_def(graph, product)?;
            let inputs = &graph.node(mm).inputs;
            let b_is_matrix = inputs.get(1).map(|&b| graph.value(b).ty.shape.rank() >= 2);
            (*op == Op::MatMul && b_is_matrix == Some(true) && bias_fits(bias, product))
                .then(|| vec![inputs[0], inputs[1], bias])
        });
        if let Some(inputs) = fused {
            rewrites.push((idx, inputs));
        }
    }
    let count = rewrites.len();
    for (idx, inputs) in rewrites {
        let node = &mut graph.nodes[idx];
        node.op = Op::MatMulBias;
        node.inputs = inputs;
    }
    count
}

/// Removes nodes none of whose results reach a graph output (sub-graph nodes
/// are kept whole) and the values only they defined; value ids are renumbered
/// in their old order.
pub fn remove_dead(graph: &mut Graph) {
    let mut live = vec![false; graph.values.len()];
    for &o in &graph.outputs {
        live[o.index()] = true;
    }
    let mut keep = vec![false; graph.nodes.len()];
    for (idx, node) in graph.nodes.iter().enumerate().rev() {
        if node.outputs.iter().any(|o| live[o.index()]) {
            keep[idx] = true;
            for &i in &node.inputs {
                live[i.index()] = true;
            }
        }
    }
    if keep.iter().all(|&k| k) {
        return;
    }
    let mut kept_values = vec![false; graph.values.len()];
    for &i in &graph.inputs {
        kept_values[i.index()] = true;
    }
    let mut idx = 0;
    graph.nodes.retain(|_| {
        idx += 1;
        keep[idx - 1]
    });
    for node in &graph.nodes {
        for &v in node.inputs.iter().chain(&node.outputs) {
            kept_values[v.index()] = true;
        }
    }
    let mut new_id = vec![None; graph.values.len()];
    let mut next = 0u32;
    for (old, &kept) in kept_values.iter().enumerate() {
        if kept {
            new_id[old] = Some(ValueId(next));
            next += 1;
        }
    }
    let mut old = 0;
    graph.values.retain(|_| {
        old += 1;
        kept_values[old - 1]
    });
    // Invariant: every id still referenced is an input, output or node operand,
    // all of which were marked kept above.
    let map = |v: &mut ValueId| *v = new_id[v.index()].expect("referenced values are kept");
    graph.inputs.iter_mut().for_each(map);
    graph.outputs.iter_mut().for_each(map);
    for node in &mut graph.nodes {
        node.inputs.iter_mut().for_each(map);
        node.outputs.iter_mut().for_each(map);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GraphBuilder, Tensor, shape, verify};

    /// The groupings of `x · 0.5 · (1 + erf(x/√2))` exporters emit.
    #[derive(Clone, Copy, Debug)]
    enum Grouping {
        HalfXTimesSum,
        XTimesSumThenHalf,
        XTimesHalfSum,
        DivBySqrt2,
    }

    /// `y = gelu-chain(x)` with `grouping`, and `extra_use` of `1 + erf` as a
    /// second output when asked; `half` is the constant used for 0.5.
    fn chain(grouping: Grouping, half: f32, extra_use: bool) -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", DType::F32, shape!["batch", 8]);
        let c = |b: &mut GraphBuilder, name, v: f32| b.constant(name, Tensor::scalar(v));
        let h = c(&mut b, "half", half);
        let one = c(&mut b, "one", 1.0);
        let scaled = if let Grouping::DivBySqrt2 = grouping {
            let s = c(&mut b, "sqrt2", std::f32::consts::SQRT_2);
            b.binary(BinaryOp::Div, x, s).unwrap()
        } else {
            let s = c(&mut b, "rsqrt2", std::f32::consts::FRAC_1_SQRT_2);
            b.binary(BinaryOp::Mul, s, x).unwrap()
        };
        let e = b.unary(UnaryOp::Erf, scaled).unwrap();
        let sum = b.binary(BinaryOp::Add, one, e).unwrap();
        let y = match grouping {
            Grouping::HalfXTimesSum | Grouping::DivBySqrt2 => {
                let hx = b.binary(BinaryOp::Mul, x, h).unwrap();
                b.binary(BinaryOp::Mul, hx, sum).unwrap()
            }
            Grouping::XTimesSumThenHalf => {
                let xs = b.binary(BinaryOp::Mul, sum, x).unwrap();
                b.binary(BinaryOp::Mul, h, xs).unwrap()
            }
            Grouping::XTimesHalfSum => {
                let hs = b.binary(BinaryOp::Mul, sum, h).unwrap();
                b.binary(BinaryOp::Mul, x, hs).unwrap()
            }
        };
        b.output("y", y).unwrap();
        if extra_use {
            b.output("sum", sum).unwrap();
        }
        b.finish().unwrap()
    }

    fn ops(g: &Graph) -> Vec<&'static str> {
        g.nodes.iter().map(|n| n.op.name()).collect()
    }

    #[test]
    fn every_grouping_becomes_one_gelu_of_the_input() {
        for grouping in [
            Grouping::HalfXTimesSum,
            Grouping::XTimesSumThenHalf,
            Grouping::XTimesHalfSum,
            Grouping::DivBySqrt2,
        ] {
            let mut g = chain(grouping, 0.5, false);
            assert_eq!(fuse(&mut g), 1, "{grouping:?}");
            verify(&g).unwrap();
            assert_eq!(ops(&g), ["gelu"], "{grouping:?}");
            assert_eq!(g.nodes[0].inputs, g.inputs, "{grouping:?}");
            assert_eq!(g.value(g.outputs[0]).name, "y");
            assert_eq!(g.value(g.outputs[0]).ty.to_string(), "f32[batch, 8]");
        }
    }

    #[test]
    fn shared_intermediates_and_other_constants_are_left_alone() {
        let mut shared = chain(Grouping::HalfXTimesSum, 0.5, true);
        let before = shared.clone();
        assert_eq!(fuse(&mut shared), 0);
        assert_eq!(shared, before);
        let mut other = chain(Grouping::HalfXTimesSum, 0.6, false);
        let before = other.clone();
        assert_eq!(fuse(&mut other), 0);
        assert_eq!(other, before);
    }

    /// `x · sigmoid(x)` (sigmoid first when `sigmoid_first`), the sigmoid also a
    /// graph output when `shared`, of `other` instead of `x` when given.
    fn swish(sigmoid_first: bool, shared: bool, other: bool) -> Graph {
        let mut b = GraphBuilder::new("s");
        let x = b.input("x", DType::F32, shape!["batch", 8]);
        let z = b.input("z", DType::F32, shape!["batch", 8]);
        let s = b
            .unary(UnaryOp::Sigmoid, if other { z } else { x })
            .unwrap();
        let (l, r) = if sigmoid_first { (s, x) } else { (x, s) };
        let y = b.binary(BinaryOp::Mul, l, r).unwrap();
        b.output("y", y).unwrap();
        if shared {
            b.output("s", s).unwrap();
        }
        b.finish().unwrap()
    }

    #[test]
    fn x_times_its_sigmoid_becomes_silu_in_either_order() {
        for sigmoid_first in [false, true] {
            let mut g = swish(sigmoid_first, false, false);
            assert_eq!(fuse(&mut g), 1);
            verify(&g).unwrap();
            assert_eq!(ops(&g), ["silu"]);
            assert_eq!(g.nodes[0].inputs, [g.inputs[0]]);
            assert_eq!(g.value(g.outputs[0]).ty.to_string(), "f32[batch, 8]");
        }
    }

    #[test]
    fn a_shared_sigmoid_or_another_inputs_sigmoid_is_left_alone() {
        for (shared, other) in [(true, false), (false, true)] {
            let mut g = swish(false, shared, other);
            let before = g.clone();
            assert_eq!(fuse(&mut g), 0, "shared {shared}, other {other}");
            assert_eq!(g, before);
        }
    }

    /// `act(bn(conv2d(x, w, b)))` over 3 output channels (`bias` and `bn`
    /// optional), and the conv's output as a second graph output when asked.
    fn conv_chain(bias: bool, bn: bool, act: Option<UnaryOp>, conv_is_output: bool) -> Graph {
        use crate::builder_ops::ConvAttrs;
        let mut b = GraphBuilder::new("c");
        let x = b.input("x", DType::F32, shape!["n", 2, 5, 5]);
        let t = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap();
        let w = b.constant(
            "w",
            t(
                (0..54).map(|i| i as f32 * 0.1 - 2.0).collect(),
                &[3, 2, 3, 3],
            ),
        );
        let cb = bias.then(|| b.constant("cb", t(vec![0.5, -1.0, 2.0], &[3])));
        let attrs = ConvAttrs {
            pads: [1; 4],
            ..ConvAttrs::default()
        };
        let conv = b.conv2d(x, w, cb, attrs).unwrap();
        let mut y = conv;
        if bn {
            let params = bn_params(&mut b);
            y = b.batch_norm(y, params, 1e-5).unwrap();
        }
        if let Some(u) = act {
            y = b.unary(u, y).unwrap();
        }
        b.output("y", y).unwrap();
        if conv_is_output {
            b.output("conv", conv).unwrap();
        }
        b.finish().unwrap()
    }

    /// Constant batch-norm parameters over 3 channels.
    fn bn_params(b: &mut GraphBuilder) -> crate::builder_ops::BatchNormParams {
        let mut c =
            |name, v: [f32; 3]| b.constant(name, Tensor::from_vec(v.to_vec(), &[3]).unwrap());
        crate::builder_ops::BatchNormParams {
            scale: c("scale", [2.0, 0.5, -1.0]),
            bias: c("shift", [0.25, 0.0, 1.0]),
            mean: c("mean", [1.0, -2.0, 0.0]),
            var: c("var", [4.0, 0.25, 1.0]),
        }
    }

    /// `act(batch_norm(x))` of a graph input (no conv to fold into), the batch
    /// norm's output also a graph output when asked.
    fn bn_then(act: UnaryOp, bn_is_output: bool) -> Graph {
        let mut b = GraphBuilder::new("bn");
        let x = b.input("x", DType::F32, shape!["n", 3, 4, 4]);
        let params = bn_params(&mut b);
        let bn = b.batch_norm(x, params, 1e-5).unwrap();
        let y = b.unary(act, bn).unwrap();
        b.output("y", y).unwrap();
        if bn_is_output {
            b.output("bn", bn).unwrap();
        }
        b.finish().unwrap()
    }

    #[test]
    fn an_activation_after_a_batch_norm_fuses_into_it() {
        for act in [
            UnaryOp::Relu,
            UnaryOp::LeakyRelu { alpha: 0.1 },
            UnaryOp::Clip { min: 0.0, max: 6.0 },
        ] {
            let mut g = bn_then(act, false);
            assert_eq!(fuse(&mut g), 1, "{act:?}");
            let bn: Vec<&Node> = g
                .nodes
                .iter()
                .filter(|n| !matches!(n.op, Op::Constant { .. }))
                .collect();
            assert_eq!(bn.len(), 1, "{g}");
            let want = Op::BatchNorm {
                epsilon: 1e-5,
                activation: Activation::from_unary(act),
            };
            assert_eq!(bn[0].op, want, "{g}");
            assert_eq!(bn[0].inputs[0], g.inputs[0]);
            assert_eq!(bn[0].outputs, g.outputs);
            assert_eq!(g.value(g.outputs[0]).ty.to_string(), "f32[n, 3, 4, 4]");
        }
        // a batch norm whose output is used elsewhere keeps it unactivated
        let mut g = bn_then(UnaryOp::Relu, true);
        let before = g.clone();
        assert_eq!(fuse(&mut g), 0);
        assert_eq!(g, before);
        // an activation that is not fusible stays a unary op
        let mut g = bn_then(UnaryOp::Tanh, false);
        let before = g.clone();
        assert_eq!(fuse(&mut g), 0);
        assert_eq!(g, before);
    }

    /// The values of the graph's constants, in node order.
    fn constants(g: &Graph) -> Vec<&Tensor> {
        g.nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Constant { value } => Some(value),
                _ => None,
            })
            .collect()
    }

    fn conv_activation(g: &Graph) -> Vec<Option<Activation>> {
        g.nodes
            .iter()
            .filter_map(|n| match n.op {
                Op::Conv2d { activation, .. } => Some(activation),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn batch_norm_and_activations_fold_into_the_conv() {
        let acts = [
            None,
            Some(UnaryOp::Relu),
            Some(UnaryOp::LeakyRelu { alpha: 0.1 }),
            Some(UnaryOp::Clip { min: 0.0, max: 6.0 }),
        ];
        for (bias, bn, act) in [false, true]
            .into_iter()
            .flat_map(|b| [(b, false), (b, true)])
            .flat_map(|(b, n)| acts.map(|a| (b, n, a)))
        {
            let mut g = conv_chain(bias, bn, act, false);
            let before = g.to_string();
            let want = usize::from(bn) + usize::from(act.is_some());
            assert_eq!(fuse(&mut g), want, "{before}");
            verify(&g).unwrap();
            assert_eq!(
                ops(&g).iter().filter(|o| **o != "constant").count(),
                1,
                "{g}"
            );
            assert_eq!(conv_activation(&g), [act.and_then(Activation::from_unary)]);
            assert_eq!(g.value(g.outputs[0]).ty.to_string(), "f32[n, 3, 5, 5]");
            let conv = g.nodes.last().unwrap();
            assert_eq!(conv.inputs.len(), if bias || bn { 3 } else { 2 }, "{g}");
        }
    }

    #[test]
    fn folded_parameters_are_the_batch_norms_factors() {
        let mut g = conv_chain(true, true, None, false);
        fuse(&mut g);
        let [w, b] = constants(&g)[..] else {
            panic!("{g}")
        };
        let mul: Vec<f32> = [(2.0f32, 4.0f32), (0.5, 0.25), (-1.0, 1.0)]
            .iter()
            .map(|&(s, v)| s / (v + 1e-5f32).sqrt())
            .collect();
        let w0: Vec<f32> = (0..54).map(|i| i as f32 * 0.1 - 2.0).collect();
        let want_w: Vec<f32> = w0
            .iter()
            .enumerate()
            .map(|(i, &x)| x * mul[i / 18])
            .collect();
        assert_eq!(w.as_slice::<f32>().unwrap(), want_w);
        let (cb, shift, mean) = (
            [0.5f32, -1.0, 2.0],
            [0.25f32, 0.0, 1.0],
            [1.0f32, -2.0, 0.0],
        );
        let want_b: Vec<f32> = (0..3)
            .map(|c| cb[c] * mul[c] + (shift[c] - mean[c] * mul[c]))
            .collect();
        assert_eq!(b.as_slice::<f32>().unwrap(), want_b);
    }

    /// `relu(conv(x) · s + t)` with `s` an unsqueezed `[3]` constant and `t` a
    /// `[1, 3, 1, 1]` constant, the product's operands in either order: one conv
    /// with weights `w·s`, bias `b·s + t` and the relu.
    #[test]
    fn a_per_channel_scale_and_shift_fold_into_the_conv() {
        use crate::builder_ops::ConvAttrs;
        let (s, sh, cb) = (
            [2.0f32, -0.5, 3.0],
            [0.25f32, 1.0, -2.0],
            [0.5f32, -1.0, 2.0],
        );
        let w0: Vec<f32> = (0..54).map(|i| i as f32 * 0.1 - 2.0).collect();
        for conv_first in [true, false] {
            let mut b = GraphBuilder::new("a");
            let x = b.input("x", DType::F32, shape!["n", 2, 5, 5]);
            let t = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap();
            let w = b.constant("w", t(w0.clone(), &[3, 2, 3, 3]));
            let bias = b.constant("cb", t(cb.to_vec(), &[3]));
            let attrs = ConvAttrs {
                pads: [1; 4],
                ..ConvAttrs::default()
            };
            let conv = b.conv2d(x, w, Some(bias), attrs).unwrap();
            let scale = b.constant("s", t(s.to_vec(), &[3]));
            let scale = b.unsqueeze(scale, &[1, 2]).unwrap();
            let shift = b.constant("t", t(sh.to_vec(), &[1, 3, 1, 1]));
            let (l, r) = if conv_first {
                (conv, scale)
            } else {
                (scale, conv)
            };
            let y = b.binary(BinaryOp::Mul, l, r).unwrap();
            let y = b.binary(BinaryOp::Add, shift, y).unwrap();
            let y = b.unary(UnaryOp::Relu, y).unwrap();
            b.output("y", y).unwrap();
            let mut g = b.finish().unwrap();
            assert_eq!(fuse(&mut g), 2, "{g}");
            verify(&g).unwrap();
            assert_eq!(
                ops(&g).iter().filter(|o| **o != "constant").count(),
                1,
                "{g}"
            );
            assert_eq!(conv_activation(&g), [Some(Activation::Relu)]);
            let [w, b] = constants(&g)[..] else {
                panic!("{g}")
            };
            let want_w: Vec<f32> = w0.iter().enumerate().map(|(i, &x)| x * s[i / 18]).collect();
            assert_eq!(w.as_slice::<f32>().unwrap(), want_w);
            let want_b: Vec<f32> = (0..3).map(|c| cb[c] * s[c] + sh[c]).collect();
            assert_eq!(b.as_slice::<f32>().unwrap(), want_b);
        }
    }

    /// `batch_norm(x) · s + t` with constant parameters: one batch norm whose
    /// scale and shift are `scale·s` and `shift·s + t`.
    #[test]
    fn a_per_channel_scale_and_shift_fold_into_a_batch_norm() {
        use crate::builder_ops::BatchNormParams;
        let mut b = GraphBuilder::new("b");
        let x = b.input("x", DType::F32, shape!["n", 3, 4, 4]);
        let t = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap();
        let mut c = |name, v: [f32; 3]| b.constant(name, t(v.to_vec(), &[3]));
        let params = BatchNormParams {
            scale: c("scale", [2.0, 0.5, -1.0]),
            bias: c("shift", [0.25, 0.0, 1.0]),
            mean: c("mean", [1.0, -2.0, 0.0]),
            var: c("var", [4.0, 0.25, 1.0]),
        };
        let y = b.batch_norm(x, params, 1e-5).unwrap();
        let s = b.constant("s", t(vec![3.0, -1.0, 0.5], &[3, 1, 1]));
        let sh = b.constant("t", t(vec![1.0, 2.0, -3.0], &[3, 1, 1]));
        let y = b.binary(BinaryOp::Mul, s, y).unwrap();
        let y = b.binary(BinaryOp::Add, y, sh).unwrap();
        b.output("y", y).unwrap();
        let mut g = b.finish().unwrap();
        assert_eq!(fuse(&mut g), 1, "{g}");
        verify(&g).unwrap();
        let bn = g.nodes.last().unwrap();
        assert!(matches!(bn.op, Op::BatchNorm { .. }), "{g}");
        let param = |i: usize| -> Vec<f32> {
            let node = g.node(g.producers()[bn.inputs[i].index()].unwrap());
            match &node.op {
                Op::Constant { value } => value.as_slice::<f32>().unwrap().to_vec(),
                _ => panic!("{g}"),
            }
        };
        assert_eq!(param(1), [6.0, -0.5, -0.5]);
        assert_eq!(param(2), [1.75, 2.0, -2.5]);
        assert_eq!(param(3), [1.0, -2.0, 0.0]);
        assert_eq!(param(4), [4.0, 0.25, 1.0]);
    }

    /// A scale of the wrong shape (along W, not the channels) is left alone.
    #[test]
    fn a_scale_along_another_axis_is_not_folded() {
        use crate::builder_ops::ConvAttrs;
        let mut b = GraphBuilder::new("a");
        let x = b.input("x", DType::F32, shape!["n", 2, 3, 3]);
        let t = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap();
        let w = b.constant("w", t(vec![0.5; 54], &[3, 2, 3, 3]));
        let attrs = ConvAttrs {
            pads: [1; 4],
            ..ConvAttrs::default()
        };
        let conv = b.conv2d(x, w, None, attrs).unwrap();
        let scale = b.constant("s", t(vec![2.0, 3.0, 4.0], &[3]));
        let shift = b.constant("t", t(vec![1.0, 1.0, 1.0], &[3, 1, 1]));
        let y = b.binary(BinaryOp::Mul, conv, scale).unwrap();
        let y = b.binary(BinaryOp::Add, y, shift).unwrap();
        b.output("y", y).unwrap();
        let mut g = b.finish().unwrap();
        assert_eq!(fuse(&mut g), 0, "{g}");
    }

    #[test]
    fn a_conv_output_used_elsewhere_is_not_fused() {
        for (bn, act) in [(true, None), (false, Some(UnaryOp::Relu))] {
            let mut g = conv_chain(true, bn, act, true);
            let before = g.clone();
            assert_eq!(fuse(&mut g), 0);
            assert_eq!(g, before);
        }
        // sigmoid is not an activation a conv applies
        let mut g = conv_chain(false, false, Some(UnaryOp::Sigmoid), false);
        assert_eq!(fuse(&mut g), 0);
    }

    #[test]
    fn dead_nodes_go_and_values_are_renumbered() {
        let mut b = GraphBuilder::new("d");
        let x = b.input("x", DType::F32, shape![4]);
        let unused = b.unary(UnaryOp::Exp, x).unwrap();
        let _also = b.unary(UnaryOp::Neg, unused).unwrap();
        let y = b.unary(UnaryOp::Abs, x).unwrap();
        b.output("y", y).unwrap();
        let mut g = b.finish().unwrap();
        remove_dead(&mut g);
        verify(&g).unwrap();
        assert_eq!(ops(&g), ["abs"]);
        assert_eq!(g.values.len(), 2);
        assert_eq!(
            g.to_string(),
            "graph @d(%x: f32[4]) -> (%y) {\n  %y = abs @abs_0 %x : f32[4]\n}\n"
        );
    }

    /// `y = x @ w + bias` (`bias_first`: `bias + x @ w`) with `x [batch, 3, 4]`,
    /// `w [4, n]` and a constant bias of `bias_shape`; `product_out` also
    /// returns the product.
    fn linear(n: usize, bias_shape: &[usize], bias_first: bool, product_out: bool) -> Graph {
        let mut b = GraphBuilder::new("l");
        let x = b.input("x", DType::F32, shape!["batch", 3, 4]);
        let t = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap();
        let w = b.constant("w", t((0..4 * n).map(|i| i as f32).collect(), &[4, n]));
        let len = bias_shape.iter().product();
        let bias = b.constant("bias", t(vec![0.5; len], bias_shape));
        let product = b.matmul(x, w).unwrap();
        let (l, r) = if bias_first {
            (bias, product)
        } else {
            (product, bias)
        };
        let y = b.binary(BinaryOp::Add, l, r).unwrap();
        b.output("y", y).unwrap();
        if product_out {
            b.output("product", product).unwrap();
        }
        b.finish().unwrap()
    }

    #[test]
    fn a_constant_bias_after_a_matmul_fuses_in_either_order() {
        for bias_first in [false, true] {
            let mut g = linear(5, &[5], bias_first, false);
            assert_eq!(fuse(&mut g), 1);
            verify(&g).unwrap();
            assert_eq!(ops(&g), ["constant", "constant", "matmul_bias"]);
            let node = &g.nodes[2];
            let names: Vec<&str> = node.inputs.iter().map(|&v| &*g.value(v).name).collect();
            assert_eq!(names, ["x", "w", "bias"]);
            assert_eq!(g.value(g.outputs[0]).ty.to_string(), "f32[batch, 3, 5]");
        }
    }

    #[test]
    fn a_broadcasting_or_shared_product_or_other_bias_shapes_stay_unfused() {
        // [1, 5] bias, a bias that broadcasts the [.., 1] product, a product also returned
        for g in [
            linear(5, &[1, 5], false, false),
            linear(1, &[5], false, false),
            linear(5, &[5], false, true),
        ] {
            let mut fused = g.clone();
            assert_eq!(fuse(&mut fused), 0);
            assert_eq!(fused.to_string(), g.to_string());
        }
    }
}
