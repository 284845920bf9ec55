//! Inference for the element-indexed ops: gather_elements, scatter_elements,
//! gather_nd and scatter_nd.
//!
//! **Invariant:** the output shapes are those the VM computes from concrete
//! inputs (`shapejit_vm::ops::index`): a gather's output follows its indices,
//! a scatter's output is its `data`.

use super::{INTEGER, Inferred, MAX_RANK, arity, expect_dtype, expect_same_dtype};
use crate::dtype::DType;
use crate::graph::ValueInfo;
use crate::shape::Shape;

fn same_rank(inputs: &[&ValueInfo], a: usize, b: usize) -> Result<(), String> {
    let (ra, rb) = (inputs[a].ty.shape.rank(), inputs[b].ty.shape.rank());
    if ra != rb {
        return Err(format!(
            "input {b} has rank {rb}, expected the rank {ra} of input {a}"
        ));
    }
    Ok(())
}

/// gather_elements: the shape of the indices, the dtype of the data.
pub(super) fn gather_elements(inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    expect_dtype(inputs, 1, &INTEGER)?;
    same_rank(inputs, 0, 1)?;
    if inputs[0].ty.shape.rank() == 0 {
        return Err("data must have rank >= 1".into());
    }
    Ok(Inferred::new(
        inputs[0].ty.dtype,
        inputs[1].ty.shape.clone(),
    ))
}

/// scatter_elements: the type of the data.
pub(super) fn scatter_elements(inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 3, 3)?;
    expect_dtype(inputs, 1, &INTEGER)?;
    same_rank(inputs, 0, 1)?;
    same_rank(inputs, 0, 2)?;
    expect_same_dtype(inputs, 2)?;
    if inputs[1].ty.shape != inputs[2].ty.shape {
        return Err(format!(
            "updates {} must have the shape of indices {}",
            inputs[2].ty.shape, inputs[1].ty.shape
        ));
    }
    Ok(Inferred::new(
        inputs[0].ty.dtype,
        inputs[0].ty.shape.clone(),
    ))
}

/// The index tuple length `k` (the known last dim of the indices), checked
/// against the data's rank after `batch_dims`.
fn tuple_len(inputs: &[&ValueInfo], batch_dims: usize) -> Result<usize, String> {
    expect_dtype(inputs, 1, &[DType::I64])?;
    let (data, idx) = (&inputs[0].ty.shape, &inputs[1].ty.shape);
    let last = idx
        .dims()
        .last()
        .ok_or("indices must have rank >= 1")?
        .clone();
    let k = last
        .as_known()
        .and_then(|k| usize::try_from(k).ok())
        .ok_or_else(|| format!("the last dim of indices {idx} must be known"))?;
    if batch_dims >= idx.rank() || batch_dims.saturating_add(k) > data.rank() {
        return Err(format!(
            "batch_dims {batch_dims} and index tuples of length {k} do not fit data {data} and indices {idx}"
        ));
    }
    if data.dims()[..batch_dims] != idx.dims()[..batch_dims] {
        return Err(format!(
            "the first {batch_dims} dims of data {data} and indices {idx} differ"
        ));
    }
    Ok(k)
}

/// gather_nd: `indices.shape[..-1] ++ data.shape[batch_dims + k..]`.
pub(super) fn gather_nd(batch_dims: usize, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    let k = tuple_len(inputs, batch_dims)?;
    let (data, idx) = (&inputs[0].ty.shape, &inputs[1].ty.shape);
    let mut dims = idx.dims()[..idx.rank() - 1].to_vec();
    dims.extend(data.dims()[batch_dims + k..].iter().cloned());
    if dims.len() > MAX_RANK {
        return Err(format!(
            "output rank {} exceeds the limit {MAX_RANK}",
            dims.len()
        ));
    }
    Ok(Inferred::new(inputs[0].ty.dtype, Shape(dims)))
}

/// scatter_nd: the type of the data; updates are `indices.shape[..-1] ++ data.shape[k..]`.
pub(super) fn scatter_nd(inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 3, 3)?;
    let k = tuple_len(inputs, 0)?;
    expect_same_dtype(inputs, 2)?;
    let (data, idx) = (&inputs[0].ty.shape, &inputs[1].ty.shape);
    let mut want = idx.dims()[..idx.rank() - 1].to_vec();
    want.extend(data.dims()[k..].iter().cloned());
    if inputs[2].ty.shape.dims() != want.as_slice() {
        return Err(format!(
            "updates {} must have shape {}",
            inputs[2].ty.shape,
            Shape(want)
        ));
    }
    Ok(Inferred::new(inputs[0].ty.dtype, data.clone()))
}
