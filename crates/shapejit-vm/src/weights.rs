//! [`PackedWeights`]: the module's constant matrices packed once for
//! `shapejit_kernels::packed` (the right operand of `matmul`/`gemm`, the weights
//! of a `conv2d`), shared by every Runtime of the module and by the JIT tier's
//! matmul kernels (one copy per constant for both tiers).
//!
//! A constant is packed the first time a product uses it as its right operand (as
//! stored, or transposed) or a convolution as its weights, then reused by every
//! later call; the `packed_weight_bytes` stat counts what that costs.
//!
//! **Invariant:** the packed matrix of `(constant, transposed)` holds exactly the
//! elements of that constant (transposed when asked): a product may use it in place
//! of the constant's view of the same shape. The packed convolution weights of a
//! constant are those of its contiguous elements, for the group count they record.

use crate::profile::{GlobalCounters, bump};
use shapejit_bytecode::ConstId;
use shapejit_ir::{DType, Tensor};
use shapejit_kernels::View;
use shapejit_kernels::conv::PackedConvWeights;
use shapejit_kernels::packed::PackedB;
use std::sync::{Arc, OnceLock};

/// Per constant: packed as stored and packed transposed (`None`: not packable).
#[derive(Debug, Default)]
pub struct PackedWeights {
    enabled: bool,
    slots: Vec<[OnceLock<Option<Arc<PackedB>>>; 2]>,
    /// per constant, in the usual orientation and transposed: its convolution
    /// weights packed for one convolution form
    conv: Vec<[ConvCell; 2]>,
}

/// A constant's convolution weights, packed once for the form of their first use.
type ConvCell = OnceLock<Option<(ConvForm, PackedConvWeights)>>;

/// What packing a convolution's weights depends on besides them: the group
/// count, strides and dilations (Winograd takes stride 1, dilation 1 only), and
/// the orientation of the product (`conv::takes_transposed`: small feature maps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvForm {
    /// channel groups
    pub groups: usize,
    /// strides along H and W
    pub strides: [usize; 2],
    /// dilations along H and W
    pub dilations: [usize; 2],
    /// packed as the transposed product's right operand
    pub transposed: bool,
}

impl PackedWeights {
    /// An empty table for `n_constants` constants (`enabled` false: never packs).
    pub fn new(n_constants: usize, enabled: bool) -> PackedWeights {
        PackedWeights {
            enabled,
            slots: (0..n_constants).map(|_| Default::default()).collect(),
            conv: (0..n_constants).map(|_| Default::default()).collect(),
        }
    }

    /// Constant `id` (the tensor `t`) as a packed `[k, n]` matrix: `t` itself when
    /// `transposed` is false, its transpose otherwise. `None` for a constant that is
    /// not a rank-2 f32 matrix, or when packing is off. The first call packs (and
    /// counts the bytes in `packed_weight_bytes`).
    pub fn get(
        &self,
        id: ConstId,
        t: &Tensor,
        transposed: bool,
        counters: &GlobalCounters,
    ) -> Option<&Arc<PackedB>> {
        if !self.enabled {
            return None;
        }
        let cell = &self.slots.get(id.index())?[usize::from(transposed)];
        cell.get_or_init(|| {
            let packed = pack(t, transposed)?;
            bump(&counters.packed_weight_bytes, packed.bytes() as u64);
            Some(Arc::new(packed))
        })
        .as_ref()
    }

    /// Constant `id` (the tensor `t`, `[C_out, C_in/groups, kH, kW]`) as the
    /// packed weights of a convolution of `form`. `None` when packing is off,
    /// for a constant that is not f32 of rank 4, for convolutions on the direct
    /// path, or when the constant was packed first for another form. The first
    /// call packs (and counts the bytes).
    pub fn get_conv(
        &self,
        id: ConstId,
        t: &Tensor,
        form: ConvForm,
        counters: &GlobalCounters,
    ) -> Option<&PackedConvWeights> {
        if !self.enabled {
            return None;
        }
        let cell = &self.conv.get(id.index())?[usize::from(form.transposed)];
        let (packed_form, packed) = cell
            .get_or_init(|| {
                let (&[c_out, cg, kh, kw], DType::F32) = (t.shape(), t.dtype()) else {
                    return None;
                };
                let shape = [c_out, cg, kh, kw];
                let ConvForm {
                    groups,
                    strides,
                    dilations,
                    transposed,
                } = form;
                let w = t.as_slice().ok()?;
                let packed = if transposed {
                    PackedConvWeights::pack_transposed(w, shape, groups)?
                } else {
                    PackedConvWeights::pack(w, shape, groups, strides, dilations)?
                };
                bump(&counters.packed_weight_bytes, packed.bytes() as u64);
                Some((form, packed))
            })
            .as_ref()?;
        (*packed_form == form).then_some(packed)
    }
}

fn pack(t: &Tensor, transposed: bool) -> Option<PackedB> {
    let &[rows, cols] = t.shape() else {
        return None;
    };
    if t.dtype() != DType::F32 {
        return None;
    }
    let data: &[f32] = t.as_slice().ok()?;
    let view = View::contiguous(data, &[rows, cols]).ok()?;
    let view = if transposed {
        view.with_geom(view.geom().permuted(&[1, 0]).ok()?).ok()?
    } else {
        view
    };
    PackedB::pack(&view).ok()
}
