//! Fused attention regions: `softmax(scale(q·k) + mask)·v` one (batch…, head) at a
//! time, the scores of a head never leaving its scratch.
//!
//! The arithmetic of a head is the precompiled micro-kernel
//! `shapejit_kernels::attention::head` (register-blocked products and the
//! interpreter's softmax, auto-vectorized per CPU level); this driver walks the
//! leading dims, computing every operand's head pointer from its strides (broadcast
//! masks have stride 0), and hands ranges of heads to the intra-op pool. A head's
//! work — two small products and a softmax — dwarfs the driver's, so there is
//! nothing for generated code to fold here: the kernel is specialized per key by its
//! validated shapes, not by Cranelift.
//!
//! **Invariant:** operands are `q [lead…, s_q, d]`, `k [lead…, d, s_k]`,
//! `v [lead…, s_k, d_v]` with the same leading dims, an optional mask broadcast to
//! `[lead…, s_q, s_k]`; the output is the contiguous `[lead…, s_q, d_v]`. Heads are
//! independent, so the result does not depend on how they are split.

use std::cell::RefCell;

use shapejit_kernels::View;
use shapejit_kernels::attention::{Dims, Head, Scale, Strided, head, prefetch};
use shapejit_kernels::cpu;

use crate::elementwise::{Shape, Spread};
use crate::error::JitError;

/// How the scores are scaled (the region's `mul` or `div` by a one-element input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleOp {
    /// `scores · s`
    Mul,
    /// `scores / s`
    Div,
}

/// Where an attention region's operands are among its inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionSpec {
    /// kernel name
    pub name: String,
    /// region input index of `q`
    pub q: usize,
    /// region input index of `k` (the first product's right operand)
    pub k: usize,
    /// region input index of `v`
    pub v: usize,
    /// region input index of the one-element scale, and how it applies
    pub scale: Option<(usize, ScaleOp)>,
    /// region input index of the additive mask
    pub mask: Option<usize>,
}

/// A compiled attention region.
#[derive(Debug)]
pub struct AttentionKernel {
    spec: AttentionSpec,
}

/// Estimated cost of one score, ps per unit of depth (both products), for the split.
const PS_PER_DEPTH: u128 = 150;

thread_local! {
    /// Per-thread head scratch, grown to the largest head seen (no allocation in
    /// steady state).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The operands of one call.
pub struct Operands<'a, 'v> {
    /// `[lead…, s_q, d]`
    pub q: &'a View<'v, f32>,
    /// `[lead…, d, s_k]`
    pub k: &'a View<'v, f32>,
    /// `[lead…, s_k, d_v]`
    pub v: &'a View<'v, f32>,
    /// broadcast to `[lead…, s_q, s_k]`
    pub mask: Option<&'a View<'v, f32>>,
    /// the scale's value
    pub scale: Option<f32>,
}

/// Head pointers of one call, shared by its pieces.
struct Call<'a> {
    ops: &'a Operands<'a, 'a>,
    out: *mut f32,
    lead: &'a [usize],
    dims: Dims,
    scale: Scale,
}

// SAFETY: pieces read the shared operands and write disjoint heads of `out` while
// the call that made the pointer waits for them.
unsafe impl Sync for Call<'_> {}

impl AttentionKernel {
    /// A kernel for `spec`.
    pub fn new(spec: AttentionSpec) -> AttentionKernel {
        AttentionKernel { spec }
    }

    /// The spec.
    pub fn spec(&self) -> &AttentionSpec {
        &self.spec
    }

    /// The output shape for operands of these shapes, or why they do not fit.
    pub fn out_shape(q: &[usize], k: &[usize], v: &[usize]) -> Result<Shape, String> {
        let r = q.len();
        if r < 3 || k.len() != r || v.len() != r {
            return Err(format!(
                "attention operands {q:?}, {k:?}, {v:?} need one rank ≥ 3"
            ));
        }
        if q[..r - 2] != k[..r - 2] || q[..r - 2] != v[..r - 2] {
            return Err(format!(
                "attention operands {q:?}, {k:?}, {v:?} differ in leading dims"
            ));
        }
        if q[r - 1] != k[r - 2] || k[r - 1] != v[r - 2] {
            return Err(format!(
                "attention operands {q:?}, {k:?}, {v:?} do not chain"
            ));
        }
        let mut out: Shape = q[..r - 1].iter().copied().collect();
        out.push(v[r - 1]);
        Ok(out)
    }

    /// Computes `out` (contiguous, [`Self::out_shape`]) in up to `pieces` ranges of
    /// heads handed to `spread`.
    pub fn run(
        &self,
        ops: &Operands<'_, '_>,
        out: &mut [f32],
        pieces: usize,
        spread: Spread,
    ) -> Result<(), JitError> {
        let bad = |what: String| JitError::InvalidSpec {
            kind: "attention",
            reason: what,
        };
        let (qs, ks, vs) = (ops.q.shape(), ops.k.shape(), ops.v.shape());
        let shape = Self::out_shape(qs, ks, vs).map_err(bad)?;
        let r = qs.len();
        if out.len() != shape.iter().product::<usize>() {
            return Err(bad(format!("output of {} for {shape:?}", out.len())));
        }
        let dims = Dims {
            s_q: qs[r - 2],
            s_k: ks[r - 1],
            d: qs[r - 1],
            d_v: vs[r - 1],
        };
        if let Some(m) = ops.mask
            && (m.shape()[..r - 1] != qs[..r - 1] || m.shape()[r - 1] != ks[r - 1])
        {
            return Err(bad(format!(
                "mask {:?} for scores of {qs:?}·{ks:?}",
                m.shape()
            )));
        }
        let scale = match (self.spec.scale, ops.scale) {
            (None, _) => Scale::None,
            (Some((_, ScaleOp::Mul)), Some(s)) => Scale::Mul(s),
            (Some((_, ScaleOp::Div)), Some(s)) => Scale::Div(s),
            (Some(_), None) => return Err(bad("no scale value".to_string())),
        };
        let lead = &qs[..r - 2];
        let heads: usize = lead.iter().product();
        let call = Call {
            ops,
            out: out.as_mut_ptr(),
            lead,
            dims,
            scale,
        };
        let pieces = pieces.clamp(1, heads.max(1));
        spread(pieces, &|i| {
            call.heads(i * heads / pieces, (i + 1) * heads / pieces);
        });
        Ok(())
    }

    /// Pieces for a call on operands of these shapes (a function of the shapes only).
    pub fn pieces(q: &[usize], k: &[usize], v: &[usize]) -> usize {
        let r = q.len();
        if r < 3 {
            return 1;
        }
        let heads: usize = q[..r - 2].iter().product();
        let scores = heads * q[r - 2] * k[r - 1];
        let depth = (q[r - 1] + v[r - 1]) as u128;
        shapejit_vm::ops::pieces_for(scores, PS_PER_DEPTH * depth, heads)
    }
}

impl Call<'_> {
    /// Heads `lo..hi` (row-major over the leading dims).
    fn heads(&self, lo: usize, hi: usize) {
        let level = cpu::level();
        let need = self.dims.scratch_len();
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            if scratch.len() < need {
                scratch.resize(need, 0.0);
            }
            let args = |h: usize| {
                let strided = |v: &View<f32>| {
                    let g = v.geom();
                    let s = g.strides();
                    let r = s.len();
                    let mut off = g.offset() as isize;
                    let mut rest = h;
                    for d in (0..self.lead.len()).rev() {
                        off += (rest % self.lead[d]) as isize * s[d];
                        rest /= self.lead[d];
                    }
                    Strided {
                        // SAFETY: the view's geometry was checked against its data.
                        ptr: unsafe { v.data().as_ptr().offset(off) },
                        row: s[r - 2],
                        col: s[r - 1],
                    }
                };
                Head {
                    q: strided(self.ops.q),
                    k: strided(self.ops.k),
                    v: strided(self.ops.v),
                    mask: self.ops.mask.map(strided),
                    // SAFETY: head `h` of the contiguous output checked by `run`.
                    out: unsafe { self.out.add(h * self.dims.s_q * self.dims.d_v) },
                    dims: self.dims,
                    scale: self.scale,
                }
            };
            // each head's operands are worked out once: prefetched while the head
            // before it runs, then run
            let mut pending = (lo < hi).then(|| args(lo));
            for h in lo..hi {
                let Some(current) = pending.take() else { break };
                pending = (h + 1 < hi).then(|| args(h + 1));
                if let Some(next) = &pending {
                    prefetch(next);
                }
                // SAFETY: every view addresses its head inside its data (views check
                // their geometry); the output head is this piece's alone.
                unsafe { head(level, &current, &mut scratch) };
            }
        });
    }
}
