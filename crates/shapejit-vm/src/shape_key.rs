//! Shape keys: what a slot is specialized on — for each input, its dtype,
//! dims and strides (which also say whether it is contiguous).
//!
//! Keys are interned per slot (see [`crate::profile::SlotProfile::intern`]): a
//! slot holds one `Arc<ShapeKey>` per distinct key, so a strong guard's fast
//! path is [`Arc::ptr_eq`]; the slow path is [`ShapeKey::matches`], which
//! compares dims and strides. The interpreter keeps, per slot, the last key it
//! saw, and only interns (takes the slot's lock) when the shapes change.
//!
//! **Invariant:** two interned keys of one slot are pointer-equal iff they are
//! equal; a key never includes a tensor's data or its offset in the buffer.

use crate::tensor::{Dims, Strides, TensorRef};
use shapejit_ir::DType;
use smallvec::SmallVec;
use std::fmt;

/// One input's part of a shape key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyPart {
    /// element type
    pub dtype: DType,
    /// dims
    pub shape: Dims,
    /// strides in elements
    pub strides: Strides,
    /// row-major contiguous (size-1 dims' strides ignored)
    pub contiguous: bool,
}

/// The shape key of an instruction's or region's inputs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ShapeKey {
    /// one part per input, in operand order
    pub inputs: SmallVec<[KeyPart; 4]>,
}

impl ShapeKey {
    /// The key of these inputs.
    pub fn of(inputs: &[TensorRef<'_>]) -> ShapeKey {
        ShapeKey {
            inputs: inputs
                .iter()
                .map(|t| KeyPart {
                    dtype: t.dtype,
                    shape: t.layout.shape.clone(),
                    strides: t.layout.strides.clone(),
                    contiguous: t.layout.is_contiguous(),
                })
                .collect(),
        }
    }

    /// True when these inputs have exactly this key (the strong guard's slow path).
    pub fn matches(&self, inputs: &[TensorRef<'_>]) -> bool {
        self.inputs.len() == inputs.len()
            && self.inputs.iter().zip(inputs).all(|(k, t)| {
                k.dtype == t.dtype && k.shape == t.layout.shape && k.strides == t.layout.strides
            })
    }

    /// Total element count over all inputs (a size measure for cost models).
    pub fn numel(&self) -> usize {
        self.inputs
            .iter()
            .map(|p| p.shape.iter().product::<usize>())
            .sum()
    }
}

impl fmt::Display for ShapeKey {
    /// `f32[4, 32, 256], f32[256]`; a non-contiguous input shows its strides:
    /// `f32[256, 4]/[1, 256]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.inputs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}{:?}", p.dtype, p.shape.as_slice())?;
            if !p.contiguous {
                write!(f, "/{:?}", p.strides.as_slice())?;
            }
        }
        Ok(())
    }
}
