//! Shapes, strides and the loop nest a strided elementwise iteration collapses to.
//!
//! A kernel iterates the output shape in row-major order; every input is addressed by
//! per-dim element strides relative to that shape (a broadcast dim has stride 0, a
//! transposed or sliced view has its own strides). Outputs are contiguous.
//!
//! **Invariant:** [`LoopNest::new`] preserves the element visiting order and every
//! buffer's addresses: it only drops size-1 dims and merges a dim into the next inner
//! one when every buffer's strides say the two form one linear range.

use crate::error::JitError;

/// How the outermost dim is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShapeMode {
    /// Every dim is folded into the code.
    Exact,
    /// The outermost dim is a runtime argument (`outer`); every other dim is folded.
    /// The value in `shape[0]` is only a representative.
    Family,
}

/// Per-dim element strides of one input, relative to the output shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InputLayout {
    /// One stride per output dim, in elements (0 = broadcast along that dim).
    pub strides: Vec<usize>,
}

impl InputLayout {
    /// A contiguous (row-major) input of exactly `shape`.
    pub fn contiguous(shape: &[usize]) -> Self {
        Self {
            strides: contiguous_strides(shape),
        }
    }

    /// An input of `input_shape` broadcast (NumPy rules, right-aligned) to `out_shape`.
    /// Returns `None` when the shapes are not broadcast-compatible.
    pub fn broadcast(input_shape: &[usize], out_shape: &[usize]) -> Option<Self> {
        if input_shape.len() > out_shape.len() {
            return None;
        }
        let own = contiguous_strides(input_shape);
        let lead = out_shape.len() - input_shape.len();
        let mut strides = vec![0; out_shape.len()];
        for (d, (&n, &s)) in input_shape.iter().zip(&own).enumerate() {
            let out_n = out_shape[lead + d];
            if n == out_n && n != 1 {
                strides[lead + d] = s;
            } else if n != 1 {
                return None;
            }
        }
        Some(Self { strides })
    }
}

/// Row-major strides of a contiguous tensor.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1usize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(shape[d]);
    }
    strides
}

/// Number of elements a buffer must hold to be read with `strides` over `shape`
/// (0 when the shape is empty of elements). `None` on overflow.
pub fn required_len(shape: &[usize], strides: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    let mut last = 0usize;
    for (&n, &s) in shape.iter().zip(strides) {
        last = last.checked_add((n - 1).checked_mul(s)?)?;
    }
    last.checked_add(1)
}

/// Elements are addressed in bytes as `i64` in generated code; keep every extent far
/// below that.
const MAX_EXTENT: usize = 1 << 40;

/// The collapsed loop nest of an elementwise iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoopNest {
    /// Trip counts, outermost first; never empty. In family mode `dims[0]` is runtime.
    pub dims: Vec<usize>,
    /// Per buffer (inputs first, then outputs), one element stride per dim.
    pub strides: Vec<Vec<usize>>,
    /// Whether `dims[0]` is the runtime outer dim.
    pub family: bool,
}

impl LoopNest {
    /// Collapses `shape` with the given buffer strides (inputs, then contiguous outputs).
    pub(crate) fn new(
        shape: &[usize],
        mode: ShapeMode,
        input_strides: &[&[usize]],
        n_outputs: usize,
    ) -> Self {
        let family = mode == ShapeMode::Family;
        let out_strides = contiguous_strides(shape);
        let mut buffers: Vec<Vec<usize>> = input_strides.iter().map(|s| s.to_vec()).collect();
        buffers.extend((0..n_outputs).map(|_| out_strides.clone()));
        // Keep dim 0 in family mode; drop other size-1 dims.
        let keep: Vec<usize> = (0..shape.len())
            .filter(|&d| (family && d == 0) || shape[d] != 1)
            .collect();
        let mut dims: Vec<usize> = Vec::new();
        let mut strides: Vec<Vec<usize>> = vec![Vec::new(); buffers.len()];
        for &d in &keep {
            let merges_into_runtime_dim = family && dims.len() == 1;
            let mergeable = !dims.is_empty()
                && !merges_into_runtime_dim
                && buffers.iter().zip(&strides).all(|(buf, kept)| {
                    // the previous (outer) dim strides == this stride · this extent
                    kept.last().copied() == Some(buf[d] * shape[d])
                });
            if mergeable {
                let last = dims.len() - 1;
                dims[last] *= shape[d];
                for (buf, kept) in buffers.iter().zip(strides.iter_mut()) {
                    kept[last] = buf[d];
                }
            } else {
                dims.push(shape[d]);
                for (buf, kept) in buffers.iter().zip(strides.iter_mut()) {
                    kept.push(buf[d]);
                }
            }
        }
        if dims.is_empty() {
            dims.push(1);
            for kept in &mut strides {
                kept.push(1);
            }
        }
        Self {
            dims,
            strides,
            family,
        }
    }
}

/// Checks rank, strides and extents of an elementwise iteration.
pub(crate) fn validate_iteration(
    kind: &'static str,
    shape: &[usize],
    mode: ShapeMode,
    inputs: &[InputLayout],
) -> Result<(), JitError> {
    let invalid = |reason: String| JitError::InvalidSpec { kind, reason };
    if mode == ShapeMode::Family && shape.is_empty() {
        return Err(invalid(
            "a family kernel needs at least one dim".to_string(),
        ));
    }
    let numel = shape.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n));
    if numel.is_none_or(|n| n > MAX_EXTENT) {
        return Err(invalid(format!(
            "output shape {shape:?} has too many elements"
        )));
    }
    for (idx, input) in inputs.iter().enumerate() {
        if input.strides.len() != shape.len() {
            return Err(invalid(format!(
                "input {idx} has {} strides, the output shape {shape:?} has rank {}",
                input.strides.len(),
                shape.len()
            )));
        }
        if required_len(shape, &input.strides).is_none_or(|n| n > MAX_EXTENT) {
            return Err(invalid(format!(
                "input {idx}: strides {:?} over {shape:?} address too much memory",
                input.strides
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_collapses_to_one_loop() {
        let s = contiguous_strides(&[2, 3, 4]);
        let nest = LoopNest::new(&[2, 3, 4], ShapeMode::Exact, &[&s], 1);
        assert_eq!(nest.dims, vec![24]);
        assert_eq!(nest.strides, vec![vec![1], vec![1]]);
    }

    #[test]
    fn family_keeps_outer_dim() {
        let s = contiguous_strides(&[2, 3, 4]);
        let nest = LoopNest::new(&[2, 3, 4], ShapeMode::Family, &[&s], 1);
        assert_eq!(nest.dims, vec![2, 12]);
        assert_eq!(nest.strides, vec![vec![12, 1], vec![12, 1]]);
    }

    #[test]
    fn broadcast_row_stays_separate() {
        let bias = InputLayout::broadcast(&[4], &[3, 4]).unwrap();
        assert_eq!(bias.strides, vec![0, 1]);
        let nest = LoopNest::new(&[3, 4], ShapeMode::Exact, &[&bias.strides], 1);
        assert_eq!(nest.dims, vec![3, 4]);
        assert_eq!(nest.strides, vec![vec![0, 1], vec![4, 1]]);
    }

    #[test]
    fn size_one_dims_drop_and_scalar_becomes_one_element() {
        let nest = LoopNest::new(&[1, 5, 1], ShapeMode::Exact, &[&[0, 1, 0]], 1);
        assert_eq!(nest.dims, vec![5]);
        let nest = LoopNest::new(&[], ShapeMode::Exact, &[&[]], 1);
        assert_eq!(nest.dims, vec![1]);
    }

    #[test]
    fn incompatible_broadcast_is_none() {
        assert!(InputLayout::broadcast(&[3], &[2, 4]).is_none());
        assert!(InputLayout::broadcast(&[2, 2, 2], &[2, 2]).is_none());
    }
}
