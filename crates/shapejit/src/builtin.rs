//! Built-in models (`builtin:NAME`), built with [`GraphBuilder`] from seeded weights.
//!
//! - `transformer`: the reference workload — a 6-layer pre-LN transformer encoder,
//!   hidden 256, 8 heads (head dim 32), FFN 1024 with erf GELU, sequence 32, symbolic
//!   batch. Input `x: f32[batch, 32, 256]`, output `y: f32[batch, 32, 256]`. Each layer
//!   computes `h = x + attn(LN1(x)) @ Wo + bo` and `x' = h + gelu(LN2(h) @ W1 + b1) @ W2 + b2`;
//!   attention splits heads with `reshape [batch, 32, 8, 32]` and `transpose`, scales
//!   `q @ kᵀ` by `1/sqrt(32)`, applies softmax and multiplies by `v`; a final layer norm
//!   follows the last layer.
//! - `mlp`: `512 → 1024 → 1024 → 1024 → 10` with ReLU between layers; `x: f32[batch, 512]`.
//! - `elementwise`: an 8-op memory-bound chain on `x: f32[batch, 4096]`:
//!   `y = x*w + b; v = tanh(y)*y + x; out = sigmoid(v)*v - 0.25` (the same chain as the
//!   peers' `elementwise.onnx`).
//!
//! Each graph is returned after the ONNX importer's load-time rewrites
//! (`shapejit_ir::fuse`: a linear layer's `matmul` and bias `add` are one
//! `matmul_bias`), as its exported twin in `../shared/models` loads.
//!
//! Weight names are stable (tests read the weights back by name): linear layers are
//! `{layer}_{name}_w` (`[fan_in, fan_out]`, used as `x @ w`) and `{layer}_{name}_b`,
//! layer norms `{layer}_{name}_scale` and `{layer}_{name}_bias`, e.g. `l0_q_w`, `l3_ln2_scale`,
//! `ln_f_bias`, `fc2_w`.
//!
//! **Invariant:** each builder is deterministic: the same call returns the same graph,
//! bit for bit (a fixed seed drives a `SmallRng`; weights are drawn in build order).
//! **Invariant:** the graphs are fixed, so building them cannot fail; a failure is an
//! internal bug (the tests build every model).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shapejit_ir::{DType, Graph, GraphBuilder, IrError, Tensor, ValueId, shape};

/// The names accepted by [`by_name`] (the `NAME` of `builtin:NAME`).
pub const NAMES: &[&str] = &["transformer", "mlp", "elementwise"];

/// The built-in model called `name`, or `None` if there is none.
pub fn by_name(name: &str) -> Option<Graph> {
    match name {
        "transformer" => Some(transformer()),
        "mlp" => Some(mlp()),
        "elementwise" => Some(elementwise()),
        _ => None,
    }
}

/// Sequence length of the reference transformer.
pub const SEQ: usize = 32;
/// Hidden size of the reference transformer.
pub const HIDDEN: usize = 256;
/// Attention heads of the reference transformer.
pub const HEADS: usize = 8;
/// Feed-forward inner size of the reference transformer.
pub const FFN: usize = 1024;
/// Encoder layers of the reference transformer.
pub const LAYERS: usize = 6;
/// Layer-norm epsilon used by the built-in models.
pub const LN_EPSILON: f32 = 1e-5;

const HEAD_DIM: usize = HIDDEN / HEADS;
const SEED: u64 = 20240601;

/// The reference transformer encoder (see the module docs).
pub fn transformer() -> Graph {
    finish("transformer", build_transformer())
}

/// The 4-layer ReLU MLP (see the module docs).
pub fn mlp() -> Graph {
    finish("mlp", build_mlp())
}

/// The 8-op elementwise chain (see the module docs).
pub fn elementwise() -> Graph {
    finish("elementwise", build_elementwise())
}

/// The built graph with the load-time rewrites the ONNX importer applies
/// (`shapejit_ir::fuse`), so a built-in model runs as its exported twin does.
fn finish(name: &str, built: Result<Graph, IrError>) -> Graph {
    // Invariant (module docs): the graph is fixed and covered by tests, so an error
    // here is an internal bug, never a consequence of user input.
    let mut graph = built
        .unwrap_or_else(|e| panic!("built-in model '{name}' is malformed (internal bug): {e}"));
    shapejit_ir::fuse::fuse(&mut graph);
    graph
}

/// A builder with a seeded weight source and the few layer shapes the models use.
struct ModelBuilder {
    graph: GraphBuilder,
    rng: SmallRng,
}

impl ModelBuilder {
    fn new(name: &str, seed: u64) -> ModelBuilder {
        ModelBuilder {
            graph: GraphBuilder::new(name),
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// `n` samples of N(mean, std²) by the Box-Muller transform.
    fn normal(&mut self, n: usize, mean: f64, std: f64) -> Vec<f32> {
        let mut out = Vec::with_capacity(n + 1);
        while out.len() < n {
            // 1 - [0, 1) is in (0, 1], so the log is finite.
            let u1 = 1.0 - self.rng.random::<f64>();
            let u2 = self.rng.random::<f64>();
            let r = (-2.0 * u1.ln()).sqrt();
            let theta = std::f64::consts::TAU * u2;
            out.push((mean + std * r * theta.cos()) as f32);
            out.push((mean + std * r * theta.sin()) as f32);
        }
        out.truncate(n);
        out
    }

    /// A constant of N(mean, std²) samples.
    fn param(
        &mut self,
        name: &str,
        shape: &[usize],
        mean: f64,
        std: f64,
    ) -> Result<ValueId, IrError> {
        let data = self.normal(shape.iter().product(), mean, std);
        Ok(self.graph.constant(name, Tensor::from_vec(data, shape)?))
    }

    /// `x @ w + b` with `w: [fan_in, fan_out]` ~ N(0, 1/fan_in) and `b` ~ N(0, 0.02²).
    fn linear(
        &mut self,
        x: ValueId,
        name: &str,
        fan_in: usize,
        fan_out: usize,
    ) -> Result<ValueId, IrError> {
        let w = self.param(
            &format!("{name}_w"),
            &[fan_in, fan_out],
            0.0,
            1.0 / (fan_in as f64).sqrt(),
        )?;
        let b = self.param(&format!("{name}_b"), &[fan_out], 0.0, 0.02)?;
        let xw = self.graph.matmul(x, w)?;
        self.graph.add(xw, b)
    }

    /// Layer norm over the last axis; scale ~ N(1, 0.1²), bias ~ N(0, 0.1²) so the
    /// affine part is not the identity.
    fn layer_norm(&mut self, x: ValueId, name: &str, width: usize) -> Result<ValueId, IrError> {
        let scale = self.param(&format!("{name}_scale"), &[width], 1.0, 0.1)?;
        let bias = self.param(&format!("{name}_bias"), &[width], 0.0, 0.1)?;
        self.graph.layer_norm(x, scale, Some(bias), -1, LN_EPSILON)
    }

    /// An i64 shape constant.
    fn shape_const(&mut self, name: &str, dims: &[i64]) -> Result<ValueId, IrError> {
        Ok(self
            .graph
            .constant(name, Tensor::from_vec(dims.to_vec(), &[dims.len()])?))
    }

    fn finish(mut self, out: ValueId) -> Result<Graph, IrError> {
        self.graph.output("y", out)?;
        self.graph.finish()
    }
}

fn build_transformer() -> Result<Graph, IrError> {
    let mut m = ModelBuilder::new("transformer", SEED);
    let mut x = m.graph.input("x", DType::F32, shape!["batch", SEQ, HIDDEN]);
    let split_shape = m.shape_const(
        "split_heads",
        &[0, SEQ as i64, HEADS as i64, HEAD_DIM as i64],
    )?;
    let merge_shape = m.shape_const("merge_heads", &[0, SEQ as i64, HIDDEN as i64])?;
    let scale = m
        .graph
        .constant("attn_scale", Tensor::scalar(1.0 / (HEAD_DIM as f32).sqrt()));
    for layer in 0..LAYERS {
        let l = format!("l{layer}");
        let h = m.layer_norm(x, &format!("{l}_ln1"), HIDDEN)?;
        // [batch, seq, hidden] -> [batch, seq, heads, head_dim] -> permuted
        let heads =
            |m: &mut ModelBuilder, name: &str, perm: &[usize]| -> Result<ValueId, IrError> {
                let proj = m.linear(h, &format!("{l}_{name}"), HIDDEN, HIDDEN)?;
                let split = m.graph.reshape_to(proj, split_shape)?;
                m.graph.transpose(split, perm)
            };
        let q = heads(&mut m, "q", &[0, 2, 1, 3])?; // [batch, heads, seq, head_dim]
        let k_t = heads(&mut m, "k", &[0, 2, 3, 1])?; // [batch, heads, head_dim, seq]
        let v = heads(&mut m, "v", &[0, 2, 1, 3])?;
        let g = &mut m.graph;
        let scores = g.matmul(q, k_t)?;
        let scaled = g.mul(scores, scale)?;
        let probs = g.softmax(scaled, -1)?;
        let context = g.matmul(probs, v)?;
        let context = g.transpose(context, &[0, 2, 1, 3])?;
        let context = g.reshape_to(context, merge_shape)?;
        let attn = m.linear(context, &format!("{l}_o"), HIDDEN, HIDDEN)?;
        let h = m.graph.add(x, attn)?;
        let f = m.layer_norm(h, &format!("{l}_ln2"), HIDDEN)?;
        let f = m.linear(f, &format!("{l}_ff1"), HIDDEN, FFN)?;
        let f = m.graph.gelu(f, false)?;
        let f = m.linear(f, &format!("{l}_ff2"), FFN, HIDDEN)?;
        x = m.graph.add(h, f)?;
    }
    let y = m.layer_norm(x, "ln_f", HIDDEN)?;
    m.finish(y)
}

/// Layer widths of the built-in MLP.
pub const MLP_DIMS: [usize; 5] = [512, 1024, 1024, 1024, 10];

fn build_mlp() -> Result<Graph, IrError> {
    let mut m = ModelBuilder::new("mlp", SEED + 1);
    let mut x = m.graph.input("x", DType::F32, shape!["batch", MLP_DIMS[0]]);
    for (i, pair) in MLP_DIMS.windows(2).enumerate() {
        x = m.linear(x, &format!("fc{i}"), pair[0], pair[1])?;
        if i + 2 < MLP_DIMS.len() {
            x = m.graph.relu(x)?;
        }
    }
    m.finish(x)
}

/// Row width of the built-in elementwise chain.
pub const ELEMENTWISE_WIDTH: usize = 4096;

fn build_elementwise() -> Result<Graph, IrError> {
    let mut m = ModelBuilder::new("elementwise", SEED + 2);
    let x = m
        .graph
        .input("x", DType::F32, shape!["batch", ELEMENTWISE_WIDTH]);
    let w = m.param("w", &[ELEMENTWISE_WIDTH], 0.0, 1.0)?;
    let b = m.param("b", &[ELEMENTWISE_WIDTH], 0.0, 0.5)?;
    let c = m.graph.constant("c", Tensor::scalar(0.25f32));
    let g = &mut m.graph;
    let y = g.mul(x, w)?;
    let y = g.add(y, b)?;
    let t = g.tanh(y)?;
    let u = g.mul(t, y)?;
    let v = g.add(u, x)?;
    let s = g.sigmoid(v)?;
    let o = g.mul(s, v)?;
    let o = g.sub(o, c)?;
    m.finish(o)
}
