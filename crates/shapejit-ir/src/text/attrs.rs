//! The attribute schema of every op, in both directions: [`attrs_of`] lists an
//! op's attributes for printing, [`op_from`] builds an op from a parsed
//! attribute list (with ONNX defaults for the ones left out).
//!
//! **Invariant:** `op_from(op.name(), attrs_of(op), ..) == op` for every op
//! (the round-trip test in `text::tests` checks each variant).

use crate::dtype::DType;
use crate::graph::{Graph, ValueType};
use crate::op::{Activation, BinaryOp, MathFn, Op, ReduceOp, ScatterReduction, UnaryOp, Window2d};
use crate::tensor::Tensor;

/// An attribute value as written in `.sjir`.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum AttrValue {
    /// `-1`
    Int(i64),
    /// `1e-5`, `inf`, `NaN`
    Float(f32),
    /// `true` / `false`
    Bool(bool),
    /// `[0, 2, 1]`
    Ints(Vec<i64>),
    /// a bare word: a dtype (`i64`) or a mode (`tanh`)
    Word(String),
    /// a tensor literal
    Tensor(Tensor),
}

impl AttrValue {
    /// How the value reads in an error message.
    fn describe(&self) -> String {
        match self {
            AttrValue::Int(i) => format!("integer {i}"),
            AttrValue::Float(f) => format!("number {f:?}"),
            AttrValue::Bool(b) => format!("'{b}'"),
            AttrValue::Ints(v) => format!("list {v:?}"),
            AttrValue::Word(w) => format!("'{w}'"),
            AttrValue::Tensor(t) => format!("a {}{:?} tensor", t.dtype(), t.shape()),
        }
    }
}

/// Every unary op with its default attributes (for name lookup).
const UNARY: [UnaryOp; 16] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Reciprocal,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Silu,
    UnaryOp::Relu,
    UnaryOp::LeakyRelu { alpha: 0.01 },
    UnaryOp::Elu { alpha: 1.0 },
    UnaryOp::Gelu { tanh_approx: false },
    UnaryOp::Erf,
    UnaryOp::Clip {
        min: f32::NEG_INFINITY,
        max: f32::INFINITY,
    },
    UnaryOp::Not,
];

const REDUCE: [ReduceOp; 5] = [
    ReduceOp::Sum,
    ReduceOp::Mean,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::Prod,
];

fn ints_usize(v: &[usize]) -> AttrValue {
    AttrValue::Ints(v.iter().map(|&x| x as i64).collect())
}

fn window_attrs(w: &Window2d) -> Vec<(&'static str, AttrValue)> {
    vec![
        ("kernel", ints_usize(&w.kernel)),
        ("strides", ints_usize(&w.strides)),
        ("pads", ints_usize(&w.pads)),
        ("dilations", ints_usize(&w.dilations)),
    ]
}

/// The attributes an op prints, in a fixed order (all of them, defaults too).
/// A fused `activation` word (`none` when absent) and that unary op's attributes.
fn activation_attrs(activation: Option<Activation>) -> Vec<(&'static str, AttrValue)> {
    let act = activation.map(Activation::as_unary);
    let word = AttrValue::Word(act.map_or("none", UnaryOp::name).into());
    let mut v = vec![("activation", word)];
    v.extend(act.map_or_else(Vec::new, |u| attrs_of(&Op::Unary(u))));
    v
}

pub(super) fn attrs_of(op: &Op) -> Vec<(&'static str, AttrValue)> {
    use AttrValue::{Bool, Float, Int, Ints, Word};
    match op {
        Op::Unary(UnaryOp::LeakyRelu { alpha } | UnaryOp::Elu { alpha }) => {
            vec![("alpha", Float(*alpha))]
        }
        Op::Unary(UnaryOp::Gelu { tanh_approx }) => {
            vec![(
                "approximate",
                Word(if *tanh_approx { "tanh" } else { "none" }.into()),
            )]
        }
        Op::Unary(UnaryOp::Clip { min, max }) => vec![("min", Float(*min)), ("max", Float(*max))],
        Op::Cast { to } | Op::BitCast { to } => vec![("to", Word(to.name().into()))],
        Op::Gemm {
            alpha,
            beta,
            trans_a,
            trans_b,
        } => vec![
            ("alpha", Float(*alpha)),
            ("beta", Float(*beta)),
            ("trans_a", Bool(*trans_a)),
            ("trans_b", Bool(*trans_b)),
        ],
        Op::Reduce { axes, keepdims, .. } => {
            vec![("axes", Ints(axes.clone())), ("keepdims", Bool(*keepdims))]
        }
        Op::DynReduce {
            keepdims,
            noop_with_empty_axes,
            ..
        } => vec![
            ("keepdims", Bool(*keepdims)),
            ("noop_with_empty_axes", Bool(*noop_with_empty_axes)),
        ],
        Op::Softmax { axis }
        | Op::LogSoftmax { axis }
        | Op::Flatten { axis }
        | Op::Concat { axis } => {
            vec![("axis", Int(*axis))]
        }
        Op::Gather { axis } | Op::GatherElements { axis } => vec![("axis", Int(*axis))],
        Op::ScatterElements { axis, reduction } => vec![
            ("axis", Int(*axis)),
            ("reduction", Word(reduction.name().into())),
        ],
        Op::GatherNd { batch_dims } => vec![("batch_dims", Int(*batch_dims as i64))],
        Op::ScatterNd { reduction } => vec![("reduction", Word(reduction.name().into()))],
        Op::LayerNorm { axis, epsilon } => vec![("axis", Int(*axis)), ("epsilon", Float(*epsilon))],
        Op::BatchNorm {
            epsilon,
            activation,
        } => {
            let mut v = vec![("epsilon", Float(*epsilon))];
            v.extend(activation_attrs(*activation));
            v
        }
        Op::Reshape { allowzero } => vec![("allowzero", Bool(*allowzero))],
        Op::Transpose { perm } => vec![("perm", ints_usize(perm))],
        Op::Squeeze { axes } | Op::Unsqueeze { axes } => vec![("axes", Ints(axes.clone()))],
        Op::Split { axis, sizes } => vec![("axis", Int(*axis)), ("sizes", Ints(sizes.clone()))],
        Op::Slice {
            starts,
            ends,
            axes,
            steps,
        } => vec![
            ("starts", Ints(starts.clone())),
            ("ends", Ints(ends.clone())),
            ("axes", Ints(axes.clone())),
            ("steps", Ints(steps.clone())),
        ],
        Op::Pad { pads, value } => vec![("pads", Ints(pads.clone())), ("value", Float(*value))],
        Op::Shape { start, end } => {
            let mut v = vec![("start", Int(*start))];
            v.extend(end.map(|e| ("end", Int(e))));
            v
        }
        Op::ConstantOfShape { value } => vec![("value", AttrValue::Tensor(value.clone()))],
        Op::Conv2d {
            window,
            groups,
            activation,
        } => {
            let mut v = window_attrs(window);
            v.push(("groups", Int(*groups as i64)));
            v.extend(activation_attrs(*activation));
            v
        }
        Op::ConvTranspose2d {
            window,
            groups,
            output_padding,
        } => {
            let mut v = window_attrs(window);
            v.push(("groups", Int(*groups as i64)));
            v.push(("output_padding", ints_usize(output_padding)));
            v
        }
        Op::MaxPool2d { window, ceil_mode } => {
            let mut v = window_attrs(window);
            v.push(("ceil_mode", Bool(*ceil_mode)));
            v
        }
        Op::AvgPool2d {
            window,
            ceil_mode,
            count_include_pad,
        } => {
            let mut v = window_attrs(window);
            v.push(("ceil_mode", Bool(*ceil_mode)));
            v.push(("count_include_pad", Bool(*count_include_pad)));
            v
        }
        Op::Loop { n_carried, .. } => vec![("n_carried", Int(*n_carried as i64))],
        Op::TopK { axis, largest } => vec![("axis", Int(*axis)), ("largest", Bool(*largest))],
        Op::Cumulative {
            exclusive, reverse, ..
        } => vec![("exclusive", Bool(*exclusive)), ("reverse", Bool(*reverse))],
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Where
        | Op::MatMul
        | Op::MatMulBias
        | Op::Expand
        | Op::DynSlice
        | Op::Tile
        | Op::Size
        | Op::Constant { .. }
        | Op::Range
        | Op::GlobalAvgPool
        | Op::Identity
        | Op::If { .. } => Vec::new(),
    }
}

/// The sub-graph keywords an op expects after its types, in order.
pub(super) fn subgraph_keywords(op_name: &str) -> &'static [&'static str] {
    match op_name {
        "if" => &["then", "else"],
        "loop" => &["body"],
        _ => &[],
    }
}

/// Parsed attributes, consumed by name; an error carries the attribute index.
pub(super) struct Attrs {
    items: Vec<(String, AttrValue, bool)>,
}

/// An attribute problem: which attribute (index into the parsed list, or
/// `None` for a missing one) and what is wrong.
pub(super) struct AttrError {
    pub index: Option<usize>,
    pub message: String,
}

type AResult<T> = Result<T, AttrError>;

impl Attrs {
    pub(super) fn new(items: Vec<(String, AttrValue)>) -> Attrs {
        Attrs {
            items: items.into_iter().map(|(n, v)| (n, v, false)).collect(),
        }
    }

    fn take(&mut self, name: &str) -> Option<(usize, AttrValue)> {
        let idx = self
            .items
            .iter()
            .position(|(n, _, used)| n == name && !used)?;
        self.items[idx].2 = true;
        Some((idx, self.items[idx].1.clone()))
    }

    fn wrong(index: usize, name: &str, expected: &str, got: &AttrValue) -> AttrError {
        AttrError {
            index: Some(index),
            message: format!(
                "attribute '{name}': expected {expected}, found {}",
                got.describe()
            ),
        }
    }

    fn missing(name: &str) -> AttrError {
        AttrError {
            index: None,
            message: format!("expected attribute '{name}', found none"),
        }
    }

    fn int(&mut self, name: &str, default: Option<i64>) -> AResult<i64> {
        match self.take(name) {
            Some((_, AttrValue::Int(v))) => Ok(v),
            Some((i, other)) => Err(Attrs::wrong(i, name, "an integer", &other)),
            None => default.ok_or_else(|| Attrs::missing(name)),
        }
    }

    fn opt_int(&mut self, name: &str) -> AResult<Option<i64>> {
        match self.take(name) {
            Some((_, AttrValue::Int(v))) => Ok(Some(v)),
            Some((i, other)) => Err(Attrs::wrong(i, name, "an integer", &other)),
            None => Ok(None),
        }
    }

    fn usize(&mut self, name: &str, default: Option<usize>) -> AResult<usize> {
        match self.take(name) {
            Some((i, AttrValue::Int(v))) => usize::try_from(v)
                .map_err(|_| Attrs::wrong(i, name, "a non-negative integer", &AttrValue::Int(v))),
            Some((i, other)) => Err(Attrs::wrong(i, name, "a non-negative integer", &other)),
            None => default.ok_or_else(|| Attrs::missing(name)),
        }
    }

    fn float(&mut self, name: &str, default: Option<f32>) -> AResult<f32> {
        match self.take(name) {
            Some((_, AttrValue::Float(v))) => Ok(v),
            Some((_, AttrValue::Int(v))) => Ok(v as f32),
            Some((i, other)) => Err(Attrs::wrong(i, name, "a number", &other)),
            None => default.ok_or_else(|| Attrs::missing(name)),
        }
    }

    fn bool(&mut self, name: &str, default: Option<bool>) -> AResult<bool> {
        match self.take(name) {
            Some((_, AttrValue::Bool(v))) => Ok(v),
            Some((i, other)) => Err(Attrs::wrong(i, name, "true or false", &other)),
            None => default.ok_or_else(|| Attrs::missing(name)),
        }
    }

    fn ints(&mut self, name: &str, default: Option<Vec<i64>>) -> AResult<Vec<i64>> {
        match self.take(name) {
            Some((_, AttrValue::Ints(v))) => Ok(v),
            Some((i, other)) => Err(Attrs::wrong(i, name, "a list of integers", &other)),
            None => default.ok_or_else(|| Attrs::missing(name)),
        }
    }

    fn usizes<const N: usize>(
        &mut self,
        name: &str,
        default: Option<[usize; N]>,
    ) -> AResult<[usize; N]> {
        let Some((i, value)) = self.take(name) else {
            return default.ok_or_else(|| Attrs::missing(name));
        };
        let expected = format!("a list of {N} non-negative integers");
        let AttrValue::Ints(v) = &value else {
            return Err(Attrs::wrong(i, name, &expected, &value));
        };
        let parsed: Option<Vec<usize>> = v.iter().map(|&x| usize::try_from(x).ok()).collect();
        parsed
            .and_then(|p| <[usize; N]>::try_from(p).ok())
            .ok_or_else(|| Attrs::wrong(i, name, &expected, &value))
    }

    fn usize_list(&mut self, name: &str) -> AResult<Vec<usize>> {
        let Some((i, value)) = self.take(name) else {
            return Err(Attrs::missing(name));
        };
        let expected = "a list of non-negative integers";
        let AttrValue::Ints(v) = &value else {
            return Err(Attrs::wrong(i, name, expected, &value));
        };
        v.iter()
            .map(|&x| usize::try_from(x).ok())
            .collect::<Option<_>>()
            .ok_or_else(|| Attrs::wrong(i, name, expected, &value))
    }

    fn word(&mut self, name: &str, default: Option<&str>) -> AResult<(Option<usize>, String)> {
        match self.take(name) {
            Some((i, AttrValue::Word(w))) => Ok((Some(i), w)),
            Some((i, other)) => Err(Attrs::wrong(i, name, "a word", &other)),
            None => default
                .map(|d| (None, d.to_string()))
                .ok_or_else(|| Attrs::missing(name)),
        }
    }

    /// The `reduction` word of a scatter (default `none`).
    fn reduction(&mut self) -> AResult<ScatterReduction> {
        let (i, w) = self.word("reduction", Some("none"))?;
        ScatterReduction::ALL
            .into_iter()
            .find(|r| r.name() == w)
            .ok_or_else(|| AttrError {
                index: i,
                message: format!(
                    "attribute 'reduction': expected none, add, mul, max or min, found {w}"
                ),
            })
    }

    fn tensor(&mut self, name: &str) -> AResult<Tensor> {
        match self.take(name) {
            Some((_, AttrValue::Tensor(t))) => Ok(t),
            Some((i, other)) => Err(Attrs::wrong(i, name, "a tensor literal", &other)),
            None => Err(Attrs::missing(name)),
        }
    }

    /// Fails on the first attribute no getter asked for.
    fn finish(self, op: &str) -> AResult<()> {
        match self.items.iter().position(|(_, _, used)| !used) {
            Some(i) => Err(AttrError {
                index: Some(i),
                message: format!(
                    "unknown or repeated attribute '{}' for {op}",
                    self.items[i].0
                ),
            }),
            None => Ok(()),
        }
    }

    /// `u` with its attributes read (defaults: `u`'s own).
    fn unary(&mut self, u: UnaryOp) -> AResult<UnaryOp> {
        Ok(match u {
            UnaryOp::LeakyRelu { alpha } => UnaryOp::LeakyRelu {
                alpha: self.float("alpha", Some(alpha))?,
            },
            UnaryOp::Elu { alpha } => UnaryOp::Elu {
                alpha: self.float("alpha", Some(alpha))?,
            },
            UnaryOp::Gelu { .. } => match self.word("approximate", Some("none"))? {
                (_, w) if w == "none" => UnaryOp::Gelu { tanh_approx: false },
                (_, w) if w == "tanh" => UnaryOp::Gelu { tanh_approx: true },
                (i, w) => {
                    return Err(AttrError {
                        index: i,
                        message: format!(
                            "attribute 'approximate': expected none or tanh, found {w}"
                        ),
                    });
                }
            },
            UnaryOp::Clip { min, max } => UnaryOp::Clip {
                min: self.float("min", Some(min))?,
                max: self.float("max", Some(max))?,
            },
            other => other,
        })
    }

    /// A conv's `activation` word and that unary op's attributes (default none).
    fn activation(&mut self) -> AResult<Option<Activation>> {
        let (i, w) = self.word("activation", Some("none"))?;
        if w == "none" {
            return Ok(None);
        }
        let fusable = UNARY
            .into_iter()
            .find(|u| u.name() == w && Activation::from_unary(*u).is_some());
        match fusable {
            Some(u) => Ok(Activation::from_unary(self.unary(u)?)),
            None => Err(AttrError {
                index: i,
                message: format!(
                    "attribute 'activation': expected none, relu, leaky_relu or clip, found {w}"
                ),
            }),
        }
    }

    fn window(&mut self, kernel_default: Option<[usize; 2]>) -> AResult<Window2d> {
        Ok(Window2d {
            kernel: self.usizes("kernel", kernel_default)?,
            strides: self.usizes("strides", Some([1, 1]))?,
            pads: self.usizes("pads", Some([0; 4]))?,
            dilations: self.usizes("dilations", Some([1, 1]))?,
        })
    }
}

/// The kernel size a conv's weight operand (`[_, _, kH, kW]`) implies, when known.
fn weight_kernel(inputs: &[&ValueType]) -> Option<[usize; 2]> {
    inputs
        .get(1)
        .and_then(|w| w.shape.as_known())
        .filter(|d| d.len() == 4)
        .map(|d| [d[2], d[3]])
}

/// Builds the op named `name` from its attributes. `inputs` are the operand
/// types (conv reads its default kernel from the weight), `subgraphs` the
/// parsed sub-graphs in [`subgraph_keywords`] order.
pub(super) fn op_from(
    name: &str,
    mut a: Attrs,
    inputs: &[&ValueType],
    mut subgraphs: Vec<Graph>,
) -> Result<Op, AttrError> {
    let math = MathFn::ALL.map(UnaryOp::Math);
    let op = if let Some(u) = UNARY.iter().chain(&math).find(|u| u.name() == name) {
        Op::Unary(a.unary(*u)?)
    } else if let Some(b) = BinaryOp::ALL.iter().find(|b| b.name() == name) {
        Op::Binary(*b)
    } else if let Some(r) = REDUCE.iter().find(|r| r.dyn_name() == name) {
        Op::DynReduce {
            op: *r,
            keepdims: a.bool("keepdims", Some(true))?,
            noop_with_empty_axes: a.bool("noop_with_empty_axes", Some(false))?,
        }
    } else if let Some(r) = REDUCE.iter().find(|r| r.name() == name) {
        Op::Reduce {
            op: *r,
            axes: a.ints("axes", Some(Vec::new()))?,
            keepdims: a.bool("keepdims", Some(true))?,
        }
    } else {
        match name {
            "where" => Op::Where,
            "cast" | "bitcast" => {
                let (i, w) = a.word("to", None)?;
                let to = DType::from_name(&w).ok_or_else(|| AttrError {
                    index: i,
                    message: format!("attribute 'to': expected a dtype name, found {w}"),
                })?;
                if name == "cast" {
                    Op::Cast { to }
                } else {
                    Op::BitCast { to }
                }
            }
            "matmul" => Op::MatMul,
            "matmul_bias" => Op::MatMulBias,
            "gemm" => Op::Gemm {
                alpha: a.float("alpha", Some(1.0))?,
                beta: a.float("beta", Some(1.0))?,
                trans_a: a.bool("trans_a", Some(false))?,
                trans_b: a.bool("trans_b", Some(false))?,
            },
            "softmax" => Op::Softmax {
                axis: a.int("axis", Some(-1))?,
            },
            "log_softmax" => Op::LogSoftmax {
                axis: a.int("axis", Some(-1))?,
            },
            "layer_norm" => Op::LayerNorm {
                axis: a.int("axis", Some(-1))?,
                epsilon: a.float("epsilon", Some(1e-5))?,
            },
            "batch_norm" => Op::BatchNorm {
                epsilon: a.float("epsilon", Some(1e-5))?,
                activation: a.activation()?,
            },
            "reshape" => Op::Reshape {
                allowzero: a.bool("allowzero", Some(false))?,
            },
            "transpose" => Op::Transpose {
                perm: a.usize_list("perm")?,
            },
            "squeeze" => Op::Squeeze {
                axes: a.ints("axes", Some(Vec::new()))?,
            },
            "unsqueeze" => Op::Unsqueeze {
                axes: a.ints("axes", None)?,
            },
            "flatten" => Op::Flatten {
                axis: a.int("axis", Some(1))?,
            },
            "concat" => Op::Concat {
                axis: a.int("axis", None)?,
            },
            "split" => Op::Split {
                axis: a.int("axis", Some(0))?,
                sizes: a.ints("sizes", None)?,
            },
            "slice" => Op::Slice {
                starts: a.ints("starts", None)?,
                ends: a.ints("ends", None)?,
                axes: a.ints("axes", Some(Vec::new()))?,
                steps: a.ints("steps", Some(Vec::new()))?,
            },
            "gather" => Op::Gather {
                axis: a.int("axis", Some(0))?,
            },
            "gather_elements" => Op::GatherElements {
                axis: a.int("axis", Some(0))?,
            },
            "scatter_elements" => Op::ScatterElements {
                axis: a.int("axis", Some(0))?,
                reduction: a.reduction()?,
            },
            "gather_nd" => Op::GatherNd {
                batch_dims: a.usize("batch_dims", Some(0))?,
            },
            "scatter_nd" => Op::ScatterNd {
                reduction: a.reduction()?,
            },
            "expand" => Op::Expand,
            "dyn_slice" => Op::DynSlice,
            "tile" => Op::Tile,
            "pad" => Op::Pad {
                pads: a.ints("pads", None)?,
                value: a.float("value", Some(0.0))?,
            },
            "shape" => Op::Shape {
                start: a.int("start", Some(0))?,
                end: a.opt_int("end")?,
            },
            "size" => Op::Size,
            "top_k" => Op::TopK {
                axis: a.int("axis", Some(-1))?,
                largest: a.bool("largest", Some(true))?,
            },
            "cum_sum" | "cum_prod" => Op::Cumulative {
                product: name == "cum_prod",
                exclusive: a.bool("exclusive", Some(false))?,
                reverse: a.bool("reverse", Some(false))?,
            },
            "constant_of_shape" => Op::ConstantOfShape {
                value: a.tensor("value")?,
            },
            "range" => Op::Range,
            "conv2d" => Op::Conv2d {
                window: a.window(weight_kernel(inputs))?,
                groups: a.usize("groups", Some(1))?,
                activation: a.activation()?,
            },
            "conv_transpose2d" => Op::ConvTranspose2d {
                window: a.window(weight_kernel(inputs))?,
                groups: a.usize("groups", Some(1))?,
                output_padding: a.usizes("output_padding", Some([0, 0]))?,
            },
            "max_pool2d" => Op::MaxPool2d {
                window: a.window(None)?,
                ceil_mode: a.bool("ceil_mode", Some(false))?,
            },
            "avg_pool2d" => Op::AvgPool2d {
                window: a.window(None)?,
                ceil_mode: a.bool("ceil_mode", Some(false))?,
                count_include_pad: a.bool("count_include_pad", Some(false))?,
            },
            "global_avg_pool" => Op::GlobalAvgPool,
            "identity" => Op::Identity,
            "if" | "loop" if subgraphs.len() != subgraph_keywords(name).len() => {
                return Err(AttrError {
                    index: None,
                    message: format!("{name} is missing its sub-graphs"),
                });
            }
            "if" => {
                let else_branch = Box::new(subgraphs.pop().unwrap_or_default());
                let then_branch = Box::new(subgraphs.pop().unwrap_or_default());
                Op::If {
                    then_branch,
                    else_branch,
                }
            }
            "loop" => Op::Loop {
                n_carried: a.usize("n_carried", None)?,
                body: Box::new(subgraphs.pop().unwrap_or_default()),
            },
            "constant" => {
                return Err(AttrError {
                    index: None,
                    message: "constant takes a tensor literal, not attributes".into(),
                });
            }
            other => {
                return Err(AttrError {
                    index: None,
                    message: format!("expected an op name, found '{other}'"),
                });
            }
        }
    };
    a.finish(name)?;
    Ok(op)
}
