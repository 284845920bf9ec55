//! `a @ b` for a constant right operand `b` packed once, ahead of the calls.
//!
//! The `gemm` crate packs `b` on every call. For weights that cost is paid again at
//! every run, and it dominates small products: a `[32, 256] @ [256, 1024]` projection
//! (the built-in transformer at batch 1) runs at under half of the machine's FMA peak
//! through `gemm`. [`PackedB`] stores `b` once as column panels of [`NR`] floats per
//! row of `b` (zero-padded at the right edge); [`matmul_packed`] then streams each
//! panel from cache against [`MR`] rows of `a`, keeping an `MR × NR` block of the
//! product in registers (12 AVX registers), over `k` in blocks of [`KC`] so a panel
//! block stays in L1 while it meets every row block of `a` (one pass over the whole
//! depth when `a` is one register block: nothing to reuse, each panel streams
//! start to end), and over the panels in blocks of 32 so a `KC`-deep block of
//! them (512 KiB) stays in L2 meanwhile. At
//! AVX-512 the kernel takes two panels at a time against up to 12 rows (24 zmm
//! accumulators, masked loads and stores at the right edge). Rows of `a` are read in place for narrow
//! products; when `b` has more than a few panels, each `MC × KC` block of `a` is
//! first copied, register tile by register tile, each column by column, so the
//! kernel reads its rows' values of one `k` step from consecutive floats (a
//! thread-local scratch that grows once; a column-major `a` has them so already and
//! is read in place). The panels start on a cache line (no vector load spans two). The AVX-512
//! and AVX2 kernels prefetch a line of their panels per step, some steps ahead, or — on the row
//! blocks after a panel block's first, which find it in L1 — a line of the next
//! panels' block (and the AVX-512 kernel a line of a row-major `a`'s rows): weights that stream from
//! memory against few rows or columns then arrive before the FMAs wait. The last
//! pass's [`Epilogue`] scales, adds a bias and applies an [`Activation`] while the
//! tile is in registers (vectorized at AVX-512 and AVX2).
//!
//! **Invariant:** every product element is `alpha · fma(a[i,k-1], b[k-1,j], … fma(a[i,0],
//! b[0,j], 0))`: the sum runs in `k` order with one rounding per step on every path
//! (the AVX-512, AVX2+FMA and portable kernels), so results do not depend on the CPU.
//! **Invariant:** only elements inside `a`'s view and the first `m·n` of `out` are
//! touched; the panels' zero padding is never stored.

use crate::error::KernelError;
use crate::view::View;

pub mod activation;
pub use activation::Activation;

/// Columns per panel (two 8-lane vectors).
pub const NR: usize = 16;
/// Rows of `a` per register block.
pub const MR: usize = 6;
/// Depth of one pass over a panel (a `KC × NR` panel block is 16 KiB).
pub const KC: usize = 256;
/// Rows of `a` per cache block (its `MC × KC` slice stays in L2 across the panels).
const MC: usize = 16 * MR;
/// Panels of `b` per cache block: a `KC × NC_PANELS·NR` block (512 KiB) stays in
/// L2 while every row block of `a` meets it.
const NC_PANELS: usize = 32;

/// Products with at least this many rows run as fast on `gemm` (its own packing of
/// the right operand is amortized over the rows).
pub const PACKED_MAX_ROWS: usize = 256;

/// Whether an `[m, k] @ [k, n]` product with `b` already packed is faster through
/// [`matmul_packed`] than through `gemm` (`crate::matmul::matmul`), measured at the
/// reference shapes (`cargo bench -p shapejit-benches --bench gemm`, `sweep/…`): from
/// 1 row to [`PACKED_MAX_ROWS`] − 1. (One row, a matrix-vector product: on the
/// Intel machines 30 vs 22 GFLOP/s at 1×512×1024, 14 vs 14 at 1×1024×1024; and
/// only packed weights split by columns across threads, see the interpreter's
/// `ops::columns`.) Both tiers choose by this one rule.
pub fn packed_pays(m: usize, _k: usize, _n: usize) -> bool {
    (1..PACKED_MAX_ROWS).contains(&m)
}

/// A `[k, n]` matrix packed into column panels.
#[derive(Debug)]
pub struct PackedB {
    k: usize,
    n: usize,
    /// panel `p`, row `r`, column `j` at `start + (p·k + r)·NR + j`
    panels: Vec<f32>,
    /// where the panels start in `panels`: the first element on a 64-byte cache
    /// line, so that no vector load of a panel row spans two lines
    start: usize,
}

/// Floats per 64-byte cache line.
const LINE_FLOATS: usize = 16;

impl Clone for PackedB {
    /// A copy whose panels start on a cache line too.
    fn clone(&self) -> PackedB {
        let panels = self.panels();
        let mut copy = PackedB::zeroed(self.k, self.n, panels.len());
        let start = copy.start;
        copy.panels[start..start + panels.len()].copy_from_slice(panels);
        copy
    }
}

impl PartialEq for PackedB {
    fn eq(&self, other: &PackedB) -> bool {
        (self.k, self.n, self.panels()) == (other.k, other.n, other.panels())
    }
}

/// The geometry of a `[k, n]` right operand: `(k, n, panel elements)`.
fn panel_geometry(b: &View<f32>) -> Result<(usize, usize, usize), KernelError> {
    let shape = b.shape();
    if shape.len() != 2 {
        return Err(KernelError::Invalid(format!(
            "packed matmul needs a rank-2 right operand, got shape {shape:?}"
        )));
    }
    let (k, n) = (shape[0], shape[1]);
    let len = n
        .div_ceil(NR)
        .checked_mul(k)
        .and_then(|x| x.checked_mul(NR))
        .ok_or_else(|| KernelError::Invalid(format!("packed matmul: [{k}, {n}] too big")))?;
    Ok((k, n, len))
}

/// Writes `b`'s panels (zero padding included) into `panels` (exactly the
/// length [`panel_geometry`] gives).
fn pack_panels(b: &View<f32>, k: usize, n: usize, panels: &mut [f32]) {
    let geom = b.geom();
    let (rs, cs) = (geom.strides()[0], geom.strides()[1]);
    let data = b.data();
    if cs == 1 {
        // rows of contiguous columns: whole panels as one fixed-size copy each
        for p in 0..n.div_ceil(NR) {
            let cols = NR.min(n - p * NR);
            for r in 0..k {
                let row = &mut panels[(p * k + r) * NR..][..NR];
                // Invariant: the view's extent covers [r, p·NR .. p·NR + cols].
                let at = (geom.offset() as isize + r as isize * rs) as usize + p * NR;
                let src = &data[at..at + cols];
                match (<&mut [f32; NR]>::try_from(row), <&[f32; NR]>::try_from(src)) {
                    (Ok(dst), Ok(src)) => *dst = *src,
                    (Ok(dst), Err(_)) => {
                        dst[..cols].copy_from_slice(src);
                        dst[cols..].fill(0.0);
                    }
                    // Invariant: `row` is NR long by construction.
                    (Err(_), _) => unreachable!(),
                }
            }
        }
        return;
    }
    // contiguous columns (a transposed view, such as attention's `Kᵀ`): register
    // transposes wherever the CPU has AVX2; the element loop below otherwise
    #[cfg(target_arch = "x86_64")]
    if rs == 1 && Kernel::for_level(crate::cpu::level()) != Kernel::Portable {
        // SAFETY: the CPU has AVX2; `rs == 1`, and the view's extent covers
        // every [r, c] with r < k, c < n; `panels` holds the panels' `len`.
        unsafe { x86::pack_columns_avx2(data, geom.offset(), cs, (k, n), panels) };
        return;
    }
    for p in 0..n.div_ceil(NR) {
        for r in 0..k {
            let row = &mut panels[(p * k + r) * NR..][..NR];
            row.fill(0.0);
            for (j, slot) in row.iter_mut().enumerate().take(n - p * NR) {
                // Invariant: the view's extent covers every [r, c] with r < k, c < n.
                let at = geom.offset() as isize + r as isize * rs + (p * NR + j) as isize * cs;
                *slot = data[at as usize];
            }
        }
    }
}

/// Panels packed into a caller's buffer: [`PackedB`] without owning its memory
/// (for operands packed per call into scratch, e.g. convolution weights).
#[derive(Clone, Copy, Debug)]
pub struct PackedRef<'a> {
    k: usize,
    n: usize,
    panels: &'a [f32],
}

impl<'a> PackedRef<'a> {
    /// Panels a caller wrote itself in the packed layout (panel `p`, row `r`,
    /// column `j` at `(p·k + r)·NR + j`, [`PackedRef::len_for`] elements; the
    /// padding columns of the last panel are never stored, whatever they hold).
    pub fn from_panels(
        k: usize,
        n: usize,
        panels: &'a [f32],
    ) -> Result<PackedRef<'a>, KernelError> {
        let len = Self::len_for(k, n);
        let panels = panels.get(..len).ok_or_else(|| {
            KernelError::Invalid(format!("{} panel elements, need {len}", panels.len()))
        })?;
        Ok(PackedRef { k, n, panels })
    }

    /// Elements [`PackedRef::pack_into`] needs for a `[k, n]` operand.
    pub fn len_for(k: usize, n: usize) -> usize {
        n.div_ceil(NR).saturating_mul(k).saturating_mul(NR)
    }

    /// Columns of the matrix.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Packs a `[k, n]` view (any strides) into the front of `buf`.
    pub fn pack_into(b: &View<f32>, buf: &'a mut [f32]) -> Result<PackedRef<'a>, KernelError> {
        let (k, n, len) = panel_geometry(b)?;
        let have = buf.len();
        let panels = buf.get_mut(..len).ok_or_else(|| {
            KernelError::Invalid(format!("packing buffer of {have} elements, need {len}"))
        })?;
        pack_panels(b, k, n, panels);
        Ok(PackedRef { k, n, panels })
    }
}

impl PackedB {
    /// Packs a `[k, n]` view (any strides).
    pub fn pack(b: &View<f32>) -> Result<PackedB, KernelError> {
        let (k, n, len) = panel_geometry(b)?;
        let mut packed = PackedB::zeroed(k, n, len);
        let start = packed.start;
        pack_panels(b, k, n, &mut packed.panels[start..start + len]);
        Ok(packed)
    }

    /// `len` zeros starting on a cache line.
    fn zeroed(k: usize, n: usize, len: usize) -> PackedB {
        let panels = vec![0f32; len + LINE_FLOATS - 1];
        let start = panels.as_ptr().align_offset(64).min(LINE_FLOATS - 1);
        PackedB {
            k,
            n,
            panels,
            start,
        }
    }

    /// The packed panels.
    fn panels(&self) -> &[f32] {
        &self.panels[self.start..self.start + PackedRef::len_for(self.k, self.n)]
    }

    /// The panels as a borrowed [`PackedRef`].
    pub fn borrowed(&self) -> PackedRef<'_> {
        PackedRef {
            k: self.k,
            n: self.n,
            panels: self.panels(),
        }
    }

    /// Columns `first .. first + n` of `b`, where `first` starts a panel (a
    /// multiple of [`NR`]); `None` otherwise or past the last column.
    pub fn columns(&self, first: usize, n: usize) -> Option<PackedRef<'_>> {
        if !first.is_multiple_of(NR) || first.checked_add(n)? > self.n {
            return None;
        }
        Some(PackedRef {
            k: self.k,
            n,
            panels: &self.panels()[first / NR * self.k * NR..],
        })
    }

    /// Rows of `b`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns of `b`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.panels())
    }
}

/// A bias added to the product in the last pass's epilogue, while the output tile
/// is in registers: `out[i, j] = alpha · Σ + bias` rounds exactly as a separate
/// add after the product would.
#[derive(Clone, Copy, Debug, Default)]
pub enum Bias<'a> {
    /// no bias
    #[default]
    None,
    /// `bias[i]` added to row `i` (`m` values; a convolution's output channels)
    PerRow(&'a [f32]),
    /// `bias[j]` added to column `j` (`n` values; a linear layer's bias)
    PerColumn(&'a [f32]),
}

/// What the last pass applies to each product element while its tile is in
/// registers: `out = act(alpha · Σ + bias)`, each step rounded (or, for the
/// activation, computed exactly) as the separate op would.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    /// added after the scaling
    pub bias: Bias<'a>,
    /// applied last
    pub activation: Option<Activation>,
}

impl Epilogue<'_> {
    /// The finished value of element `[i, j]` from its scaled sum `v`.
    #[inline(always)]
    fn finish(&self, i: usize, j: usize, v: f32) -> f32 {
        let v = self.bias.at(i, j).map_or(v, |b| v + b);
        self.activation.map_or(v, |act| act.apply(v))
    }
}

impl Bias<'_> {
    /// The bias of output element `[i, j]`.
    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> Option<f32> {
        match self {
            Bias::None => None,
            Bias::PerRow(b) => Some(b[i]),
            Bias::PerColumn(b) => Some(b[j]),
        }
    }
}

/// `out[..m·n] = alpha · a @ b` with `a` a `[m, k]` view (any strides) and `out`
/// row-major `[m, n]`.
pub fn matmul_packed(
    out: &mut [f32],
    a: &View<f32>,
    b: &PackedB,
    alpha: f32,
) -> Result<(), KernelError> {
    matmul_packed_ref(out, a, b.borrowed(), alpha)
}

/// [`matmul_packed`] with panels in a caller's buffer.
pub fn matmul_packed_ref(
    out: &mut [f32],
    a: &View<f32>,
    b: PackedRef,
    alpha: f32,
) -> Result<(), KernelError> {
    matmul_packed_epilogue(out, a, b, alpha, Epilogue::default())
}

/// `out[..m·n] = act(alpha · a @ b + bias)` (see [`Epilogue`]), panels in a
/// caller's buffer.
pub fn matmul_packed_epilogue(
    out: &mut [f32],
    a: &View<f32>,
    b: PackedRef,
    alpha: f32,
    epilogue: Epilogue,
) -> Result<(), KernelError> {
    matmul_packed_step(out, a, b, alpha, epilogue, false)
}

/// [`matmul_packed_epilogue`], continuing the sums already in `out` when
/// `accumulate`: a product over `k` split into consecutive chunks of a
/// multiple of [`KC`] (every chunk but the last with alpha 1 and no epilogue)
/// gives bit for bit the one product over the whole `k`, since the kernel
/// itself runs its passes that way.
pub fn matmul_packed_step(
    out: &mut [f32],
    a: &View<f32>,
    b: PackedRef,
    alpha: f32,
    epilogue: Epilogue,
    accumulate: bool,
) -> Result<(), KernelError> {
    let shape = a.shape();
    if shape.len() != 2 || shape[1] != b.k {
        return Err(KernelError::ShapeMismatch {
            what: "packed matmul a",
            expected: vec![shape.first().copied().unwrap_or(0), b.k],
            actual: shape.to_vec(),
        });
    }
    let a = Operand::of(a);
    let kernel = Kernel::for_level(crate::cpu::level());
    // a column-major `a` already gives each `k` step's rows from one cache line
    let packs = a.rs != 1 && b.n.div_ceil(NR) > A_PACK_MIN_PANELS;
    let left = if kernel != Kernel::Portable && packs {
        Left::PackPerCall(a)
    } else {
        Left::InPlace(a)
    };
    drive(out, shape[0], left, kernel, b, alpha, epilogue, accumulate)
}

/// [`matmul_packed_epilogue`] with the left operand packed ahead: `out[..m·n] =
/// act(alpha · a[rows, ..] @ b + bias)` (`m = rows.len()`, the bias per row of
/// `out`; `a` has `b.k` columns). Bit for bit the product with `a`'s view (the
/// same fma order for any row range).
pub fn matmul_prepacked(
    out: &mut [f32],
    a: PackedPart,
    b: PackedRef,
    alpha: f32,
    epilogue: Epilogue,
) -> Result<(), KernelError> {
    let PackedPart { a, rows } = a;
    let fits = rows.start <= rows.end && rows.end <= a.m;
    if !fits || a.k != b.k {
        return Err(KernelError::ShapeMismatch {
            what: "prepacked matmul a",
            expected: vec![a.m, b.k],
            actual: vec![rows.len(), a.k],
        });
    }
    let left = Left::Prepacked {
        a,
        row0: rows.start,
    };
    drive(
        out,
        rows.len(),
        left,
        Kernel::for_level(crate::cpu::level()),
        b,
        alpha,
        epilogue,
        false,
    )
}

/// The rows of a [`PackedA`] that [`matmul_prepacked`] multiplies.
#[derive(Clone, Debug)]
pub struct PackedPart<'a> {
    /// the packed matrix
    pub a: &'a PackedA,
    /// its rows in the product (the output's rows, in order)
    pub rows: std::ops::Range<usize>,
}

/// Where the register blocks read `a` from.
enum Left<'a> {
    /// the view itself
    InPlace(Operand<'a>),
    /// the view, each `MC × KC` block copied to [`A_BLOCK`] first
    PackPerCall(Operand<'a>),
    /// a [`PackedA`], from its row `row0` on
    Prepacked { a: &'a PackedA, row0: usize },
}

/// The blocked product behind both entry points: `m` rows of `a` as `left`
/// gives them, `b`'s panels, `kernel` running the register blocks.
#[allow(clippy::too_many_arguments)]
fn drive(
    out: &mut [f32],
    m: usize,
    left: Left,
    kernel: Kernel,
    b: PackedRef,
    alpha: f32,
    epilogue: Epilogue,
    accumulate: bool,
) -> Result<(), KernelError> {
    let bias = epilogue.bias;
    let (k, n) = (b.k, b.n);
    let needed = m
        .checked_mul(n)
        .ok_or_else(|| KernelError::Invalid(format!("packed matmul: [{m}, {n}] too big")))?;
    if out.len() < needed {
        return Err(KernelError::ShapeMismatch {
            what: "packed matmul out",
            expected: vec![m, n],
            actual: vec![out.len()],
        });
    }
    let bias_len = match bias {
        Bias::None => None,
        Bias::PerRow(v) => Some((v.len(), m)),
        Bias::PerColumn(v) => Some((v.len(), n)),
    };
    if let Some((have, want)) = bias_len.filter(|(have, want)| have != want) {
        return Err(KernelError::ShapeMismatch {
            what: "packed matmul bias",
            expected: vec![want],
            actual: vec![have],
        });
    }
    if needed == 0 {
        return Ok(());
    }
    if k == 0 {
        for (i, row) in out[..needed].chunks_exact_mut(n).enumerate() {
            for (j, o) in row.iter_mut().enumerate() {
                let sum = if accumulate { *o * alpha } else { 0.0 };
                *o = epilogue.finish(i, j, sum);
            }
        }
        return Ok(());
    }
    let n_panels = n.div_ceil(NR);
    // One register block of rows meets each panel block once: nothing is reused
    // from cache between row blocks, so the whole depth is one pass and every
    // panel streams start to end (a matrix-vector product over weights from
    // memory: in `KC` blocks each panel was read as 16 KiB pieces 4·k·NR bytes
    // apart). A prepacked `a` is laid out in `KC` blocks.
    let depth = match left {
        Left::Prepacked { .. } => KC,
        _ if m <= kernel.max_rows() => k,
        _ => KC,
    };
    if matches!(left, Left::PackPerCall(_)) {
        let need = MC.min(m) * depth;
        A_BLOCK.with_borrow_mut(|scratch| {
            if scratch.len() < need {
                scratch.resize(need, 0.0);
            }
        });
    }
    // cache blocks of a's rows: the product's own, or for a prepacked `a` its
    // blocks as packed, each tile clipped to the rows `row0 ..` this call takes
    let (row0, a_rows) = match &left {
        Left::Prepacked { a, row0, .. } => (*row0, a.m),
        _ => (0, m),
    };
    for pc in (0..k).step_by(depth) {
        let kc = depth.min(k - pc);
        let pass = Pass {
            k0: pc,
            kc,
            first: pc == 0 && !accumulate,
            scale: (pc + kc == k).then_some(alpha).filter(|&s| s != 1.0),
            epilogue: if pc + kc == k {
                epilogue
            } else {
                Epilogue::default()
            },
        };
        let panel = |p: usize| &b.panels[(p * k + pc) * NR..][..kc * NR];
        for jc in (0..n_panels).step_by(NC_PANELS) {
            let panels_end = (jc + NC_PANELS).min(n_panels);
            for ic in (row0 / MC * MC..row0 + m).step_by(MC) {
                let rows_in_block = MC.min(a_rows - ic);
                let blocks = || row_blocks(ic, rows_in_block, kernel.max_rows());
                // the register tiles of this cache block, `a` read from `packed` (data
                // and where the block starts in it) or, for `InPlace`, the view
                let mut tiles = |packed: Option<(&[f32], usize)>| {
                    let mut p = jc;
                    while p < panels_end {
                        // the AVX-512 kernel takes two panels (32 columns) at a time
                        let pair = kernel == Kernel::Avx512 && p + 1 < panels_end;
                        let panels = [panel(p), if pair { panel(p + 1) } else { &[] }];
                        let width = if pair { 2 * NR } else { NR };
                        let step = if pair { 2 } else { 1 };
                        for (index, (row, rows)) in blocks().enumerate() {
                            let (lo, hi) = (row.max(row0), (row + rows).min(row0 + m));
                            if lo >= hi {
                                continue;
                            }
                            // the first row block brings these panels in; the next
                            // ones, reading them from L1, fetch the next panels'
                            // blocks, one each (weights streaming from memory
                            // against few rows wait for them otherwise)
                            let next = (p + step + index).wrapping_sub(1);
                            let ahead = (1..=step).contains(&index) && next < panels_end;
                            let ahead = ahead.then(|| panel(next));
                            let tile = Tile {
                                row: lo - row0,
                                rows: hi - lo,
                                col: p * NR,
                                cols: width.min(n - p * NR),
                                ldc: n,
                                ahead,
                            };
                            match (packed, &left) {
                                (Some((data, start)), _) => {
                                    // tile rows count from row0; the block's register
                                    // tiles are packed one after another
                                    let first = row as isize - row0 as isize;
                                    let at = start + (row - ic) * kc;
                                    let a = packed_a_operand(data, at, (first, rows), pc);
                                    block(kernel, &a, panels, out, &pass, &tile)
                                }
                                (None, Left::InPlace(a)) => {
                                    block(kernel, a, panels, out, &pass, &tile)
                                }
                                // Invariant: only `InPlace` has no packed data.
                                (None, _) => unreachable!(),
                            }
                        }
                        p += step;
                    }
                };
                match &left {
                    Left::InPlace(_) => tiles(None),
                    // the thread-local buffer is borrowed only by the path that fills it
                    Left::PackPerCall(a) => A_BLOCK.with_borrow_mut(|scratch| {
                        pack_a_block(a, kernel, blocks(), pc, kc, scratch);
                        tiles(Some((&scratch[..], 0)))
                    }),
                    Left::Prepacked { a, .. } => tiles(Some((&a.data[..], a.block_start(pc, ic)))),
                }
            }
        }
    }
    Ok(())
}

/// Panels beyond which [`matmul_packed_step`] copies each `MC × KC` block of `a`
/// into [`A_BLOCK`] before multiplying: every row block then reads its `a` values
/// contiguously (no L1 set conflicts between rows a multiple of 4 KiB apart, no
/// strided gathers), which pays once the block meets more than this many panels.
const A_PACK_MIN_PANELS: usize = 2;

thread_local! {
    /// One `MC × KC` block of `a` (see [`pack_a_block`]); grown once per thread,
    /// reused by every call.
    static A_BLOCK: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Copies columns `k0 .. k0 + kc` of the rows of `a` that `tiles` gives (the
/// register tiles of one cache block, in order, as `(first row, rows)`) into
/// `dst`, tile after tile, each column by column: element `(row + i, k0 + kk)`
/// of the tile at `row` with `rows` rows at `(row − row0)·kc + kk·rows + i`
/// (`row0` the first tile's row). A register tile then reads its rows' values
/// of one `k` step from consecutive floats at fixed offsets from one pointer (no
/// pointer per row: twelve of them spilled to the stack and reloaded every step
/// ran at 60–65 % of the FMA peak on Intel), its whole block of `a` from one
/// contiguous `kc · rows` run (which stays in L1 beside the panels).
fn pack_a_block(
    a: &Operand,
    kernel: Kernel,
    tiles: impl Iterator<Item = (usize, usize)>,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let mut at = 0;
    for (row, rows) in tiles {
        let tile = &mut dst[at..at + rows * kc];
        at += rows * kc;
        #[cfg(target_arch = "x86_64")]
        if kernel == Kernel::Avx512 && x86::gathers(a, row, rows, k0, kc) {
            // SAFETY: `Kernel::Avx512` is chosen only where the CPU has AVX-512 F;
            // `gathers` checked the tile's corners and index range.
            unsafe {
                if a.cs == 1 {
                    x86::transpose_tile(a, row, rows, k0, tile)
                } else {
                    x86::gather_tile(a, row, rows, k0, tile)
                }
            };
            continue;
        }
        #[cfg(target_arch = "x86_64")]
        if kernel == Kernel::Avx2 && a.cs == 1 && rows <= 8 && x86::gathers(a, row, rows, k0, kc) {
            // SAFETY: `Kernel::Avx2` is chosen only where the CPU has AVX2;
            // `gathers` checked the tile's corners, and its rows are contiguous.
            unsafe { x86::transpose_tile_avx2(a, row, rows, k0, tile) };
            continue;
        }
        for (kk, column) in tile.chunks_exact_mut(rows).enumerate() {
            for (i, slot) in column.iter_mut().enumerate() {
                // Invariant: rows and columns of this pass lie inside a's view.
                *slot = a.data[a.at(row + i, k0 + kk)];
            }
        }
    }
}

/// The [`Operand`] that reads a register tile of `rows` rows packed by
/// [`pack_a_block`] at `data[start]`, whose first row is row `first` of the
/// product (negative when the product starts inside it), for the pass over
/// columns `k0 ..`: `at(first + i, k0 + kk)` is the tile's element `(i, kk)`.
fn packed_a_operand(
    data: &[f32],
    start: usize,
    (first, rows): (isize, usize),
    k0: usize,
) -> Operand<'_> {
    let rows = rows as isize;
    Operand {
        data,
        offset: start as isize - first - k0 as isize * rows,
        rs: 1,
        cs: rows,
    }
}

/// An `[m, k]` left operand (a convolution's weights) packed once: every `(KC
/// column block, MC row block)` in [`pack_a_block`]'s layout, the column blocks
/// one after another. [`matmul_prepacked`] reads it as the per-call packing
/// would have, so the product is bit-identical to the unpacked one.
#[derive(Clone, Debug)]
pub struct PackedA {
    m: usize,
    k: usize,
    /// block `(pc, ic)` at [`PackedA::block_start`]
    data: Vec<f32>,
}

impl PackedA {
    /// Packs a `[m, k]` view (any strides).
    pub fn pack(a: &View<f32>) -> Result<PackedA, KernelError> {
        let &[m, k] = a.shape() else {
            return Err(KernelError::Invalid(format!(
                "packed left operand must be rank 2, got shape {:?}",
                a.shape()
            )));
        };
        let len = m
            .checked_mul(k)
            .ok_or_else(|| KernelError::Invalid(format!("packed matmul: [{m}, {k}] too big")))?;
        let op = Operand::of(a);
        let kernel = Kernel::for_level(crate::cpu::level());
        let mut packed = PackedA {
            m,
            k,
            data: vec![0.0; len],
        };
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            for ic in (0..m).step_by(MC) {
                let rows = MC.min(m - ic);
                let at = packed.block_start(pc, ic);
                let tiles = row_blocks(ic, rows, kernel.max_rows());
                let dst = &mut packed.data[at..at + rows * kc];
                pack_a_block(&op, kernel, tiles, pc, kc, dst);
            }
        }
        Ok(packed)
    }

    /// Where block `(pc, ic)` starts in `data`: all of `m` rows for each earlier
    /// column block, then `ic` rows of this one.
    fn block_start(&self, pc: usize, ic: usize) -> usize {
        pc * self.m + ic * KC.min(self.k - pc)
    }

    /// Rows of `a`.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Columns of `a`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * std::mem::size_of::<f32>()
    }
}

/// Which register kernel runs the blocks (from the CPU level in use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    /// one element at a time (any CPU)
    Portable,
    /// up to 6 rows × one panel, two 8-lane accumulators per row
    Avx2,
    /// up to 12 rows × two panels, two 16-lane accumulators per row
    Avx512,
}

impl Kernel {
    fn for_level(level: crate::cpu::Level) -> Kernel {
        use crate::cpu::Level;
        match level {
            Level::Avx512 if cfg!(target_arch = "x86_64") => Kernel::Avx512,
            Level::Avx2 | Level::Avx512 if cfg!(target_arch = "x86_64") => Kernel::Avx2,
            _ => Kernel::Portable,
        }
    }

    /// Rows per register block.
    fn max_rows(self) -> usize {
        match self {
            Kernel::Avx512 => MR_512,
            _ => MR,
        }
    }
}

/// Rows of `a` per register block of the AVX-512 kernel (24 accumulators).
const MR_512: usize = 12;

/// Splits rows `start .. start + count` into register blocks of at most `mr` rows,
/// avoiding a short last block: a block needs ≥ 4 rows (8 accumulators) to cover the
/// FMA latency, so a tail of 1–3 rows is merged with the block before it and the two
/// are split evenly.
fn row_blocks(start: usize, count: usize, mr: usize) -> impl Iterator<Item = (usize, usize)> {
    let tail = count % mr;
    let (full, merged) = if tail != 0 && tail < 4 && count > mr {
        (count / mr - 1, mr + tail)
    } else {
        (count / mr, tail)
    };
    let halves = if merged > mr {
        [merged / 2, merged - merged / 2]
    } else {
        [merged, 0]
    };
    (0..full)
        .map(move |_| mr)
        .chain(halves)
        .filter(|&rows| rows > 0)
        .scan(start, |row, rows| {
            let at = *row;
            *row += rows;
            Some((at, rows))
        })
}

/// `a`'s data and geometry.
struct Operand<'a> {
    data: &'a [f32],
    offset: isize,
    rs: isize,
    cs: isize,
}

impl<'a> Operand<'a> {
    /// A rank-2 view's data and geometry.
    fn of(v: &View<'a, f32>) -> Operand<'a> {
        let geom = v.geom();
        Operand {
            data: v.data(),
            offset: geom.offset() as isize,
            rs: geom.strides()[0],
            cs: geom.strides()[1],
        }
    }

    fn at(&self, row: usize, col: usize) -> usize {
        // Invariant: row < m and col < k, inside the view's checked extent.
        (self.offset + row as isize * self.rs + col as isize * self.cs) as usize
    }
}

/// One pass over `k0 .. k0 + kc`.
struct Pass<'a> {
    k0: usize,
    kc: usize,
    /// the first pass starts the sums at 0, later ones continue them from `out`
    first: bool,
    /// the last pass scales by alpha (when alpha is not 1)
    scale: Option<f32>,
    /// then adds the bias and applies the activation (the last pass only)
    epilogue: Epilogue<'a>,
}

/// The output block one register tile covers.
struct Tile<'a> {
    row: usize,
    rows: usize,
    col: usize,
    cols: usize,
    ldc: usize,
    /// a panel block (`kc · NR` floats) a later tile reads, which the AVX-512
    /// and AVX2 kernels prefetch a line per step instead of their own panels ahead
    ahead: Option<&'a [f32]>,
}

/// One register tile: `tile.cols` columns from `panels[0]` (and `panels[1]` past
/// [`NR`], for the AVX-512 kernel's pairs).
fn block(
    kernel: Kernel,
    a: &Operand,
    panels: [&[f32]; 2],
    out: &mut [f32],
    pass: &Pass,
    tile: &Tile,
) {
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! rows {
            ($f:ident, $panels:expr, $($r:literal)*) => {
                match tile.rows {
                    // SAFETY: `Kernel::for_level` picked this kernel for a level the
                    // CPU has; the indices the kernel forms are the ones `portable`
                    // forms, all in bounds (see `x86::avx2` / `x86::avx512`).
                    $($r => unsafe { x86::$f::<$r>(a, $panels, out, pass, tile) },)*
                    _ => portable(a, panels, out, pass, tile),
                }
            };
        }
        match kernel {
            Kernel::Avx512 if tile.cols > NR => {
                rows!(avx512_pair, panels, 1 2 3 4 5 6 7 8 9 10 11 12);
                return;
            }
            Kernel::Avx512 => {
                rows!(avx512_single, panels[0], 1 2 3 4 5 6 7 8 9 10 11 12);
                return;
            }
            Kernel::Avx2 => {
                rows!(avx2, panels[0], 1 2 3 4 5 6);
                return;
            }
            Kernel::Portable => {}
        }
    }
    portable(a, panels, out, pass, tile);
}

/// The reference path (any CPU): the same fma sequence, one element at a time.
fn portable(a: &Operand, panels: [&[f32]; 2], out: &mut [f32], pass: &Pass, tile: &Tile) {
    for r in 0..tile.rows {
        for j in 0..tile.cols {
            let o = (tile.row + r) * tile.ldc + tile.col + j;
            let mut acc = if pass.first { 0.0 } else { out[o] };
            let (panel, j) = (panels[j / NR], j % NR);
            for kk in 0..pass.kc {
                let x = a.data[a.at(tile.row + r, pass.k0 + kk)];
                acc = x.mul_add(panel[kk * NR + j], acc);
            }
            let v = pass.scale.map_or(acc, |s| acc * s);
            out[o] = pass.epilogue.finish(tile.row + r, tile.col + j, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::row_blocks;

    #[test]
    fn row_blocks_cover_the_rows_without_short_tails() {
        for (count, mr) in (1..=40).flat_map(|c| [(c, super::MR), (c, super::MR_512)]) {
            let blocks: Vec<(usize, usize)> = row_blocks(7, count, mr).collect();
            let mut next = 7;
            for &(row, rows) in &blocks {
                assert_eq!(row, next, "{count}: {blocks:?}");
                assert!((1..=mr).contains(&rows), "{count}: {blocks:?}");
                next += rows;
            }
            assert_eq!(next, 7 + count, "{count}: {blocks:?}");
            if count >= 4 {
                assert!(blocks.iter().all(|&(_, r)| r >= 3), "{count}: {blocks:?}");
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Bias, NR, Operand, Pass, Tile};
    use crate::simd::vector::{Avx2, Avx512, Simd};
    use std::arch::x86_64::*;

    /// Steps of `k` ahead that the kernels prefetch `b`'s panels (at AVX2 on a Zen 3,
    /// the built-in transformer at batch 1, whose weights stream from L3: its
    /// `matmul_bias` steady state 4.50 → 3.98 ms).
    const PREFETCH: usize = 32;
    /// Steps of `k` ahead that it prefetches the rows of a row-major `a`: a
    /// convolution's weights at a small feature map meet few columns, so their
    /// rows stream from memory at the pace of the FMAs (the light ResNet-50's
    /// 7² layers: 47–52 → 57–65 GFLOP/s; 32, 64 and 128 ahead measured alike).
    const PREFETCH_A: usize = 32;

    /// The offsets of rows `tile.row .. + R` of `a` at column `pass.k0`, after
    /// checking that every element of those rows this pass reads lies in `a.data`
    /// (the view guarantees it; checked again because the kernels read raw).
    fn row_starts<const R: usize>(a: &Operand, pass: &Pass, tile: &Tile) -> [usize; R] {
        let rows: [usize; R] = std::array::from_fn(|r| a.at(tile.row + r, pass.k0));
        let len = a.data.len() as isize;
        let span = (pass.kc as isize - 1) * a.cs;
        let in_bounds = rows
            .iter()
            .all(|&s| (0..len).contains(&(s as isize)) && (0..len).contains(&(s as isize + span)));
        assert!(in_bounds, "packed kernel: a row outside its view");
        rows
    }

    /// An `R × 16` register tile over one pass (AVX2: two 8-lane halves per row).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA. `tile` and `pass` come from `matmul_packed`, so rows
    /// `tile.row .. + R` and columns `pass.k0 .. + kc` of `a` are inside its view,
    /// `panel` holds `kc · NR` floats, and the `R × tile.cols` block at
    /// `(tile.row, tile.col)` lies in the first `m·n` elements of `out`; bounds are
    /// checked by slicing before any raw access.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2<const R: usize>(
        a: &Operand,
        panel: &[f32],
        out: &mut [f32],
        pass: &Pass,
        tile: &Tile,
    ) {
        // SAFETY: the caller's contract: the CPU has AVX2 and FMA.
        let s = unsafe { Avx2::new() };
        // lanes of each 8-column half of the tile's rows
        let lanes: [usize; 2] = std::array::from_fn(|h| tile.cols.saturating_sub(8 * h).min(8));
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        if !pass.first {
            for (r, acc) in acc.iter_mut().enumerate() {
                let o = (tile.row + r) * tile.ldc + tile.col;
                let src = &out[o..o + tile.cols];
                for (h, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: lanes 8h .. 8h + lanes[h] lie in `src`.
                    *acc = unsafe { load_lanes(s, src.as_ptr().wrapping_add(8 * h), lanes[h]) };
                }
            }
        }
        let rows = row_starts::<R>(a, pass, tile);
        assert!(panel.len() >= pass.kc * NR);
        let prefetch = match tile.ahead {
            Some(block) => block.as_ptr(),
            None => panel.as_ptr().wrapping_add(PREFETCH * NR),
        };
        let base = a.data.as_ptr();
        for kk in 0..pass.kc {
            _mm_prefetch::<_MM_HINT_T0>(prefetch.wrapping_add(kk * NR).cast());
            // SAFETY: kk < kc, so kk·NR + 16 ≤ panel.len(); the a offsets lie between
            // the rows' first and last elements of this pass, checked above.
            unsafe {
                let bp = panel.as_ptr().add(kk * NR);
                let b0 = _mm256_loadu_ps(bp);
                let b1 = _mm256_loadu_ps(bp.add(8));
                for r in 0..R {
                    let x = _mm256_set1_ps(*base.offset(rows[r] as isize + kk as isize * a.cs));
                    acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
                }
            }
        }
        // copied first, so the k loop indexes `acc` with constants only
        let mut sums = [[_mm256_setzero_ps(); 2]; R];
        sums.copy_from_slice(&acc);
        for (r, row) in sums.iter().enumerate() {
            let o = (tile.row + r) * tile.ldc + tile.col;
            let dst = &mut out[o..o + tile.cols];
            for (h, &sum) in row.iter().enumerate() {
                let n = lanes[h];
                if n == 0 {
                    continue;
                }
                let v = finish_vector(s, sum, pass, tile, (r, 8 * h, n));
                // SAFETY: lanes 8h .. 8h + n lie in `dst`.
                unsafe {
                    let d = dst.as_mut_ptr().add(8 * h);
                    if n == 8 {
                        s.store(d, v)
                    } else {
                        s.store_tail(d, n, v)
                    }
                }
            }
        }
    }

    /// The first `n ≤ LANES` floats at `p`, the other lanes 0.
    ///
    /// # Safety
    /// `p..p + n` is readable.
    #[inline(always)]
    unsafe fn load_lanes<S: Simd>(s: S, p: *const f32, n: usize) -> S::V {
        // SAFETY: the caller's contract.
        unsafe {
            if n == S::LANES {
                s.load(p)
            } else {
                s.load_tail(p, n)
            }
        }
    }

    /// The epilogue of one vector of a tile's sums, `act(sum (· scale) (+
    /// bias))`, each step rounded as a separate op would round it: row `r` of
    /// the tile, its `n ≥ 1` columns from column `first` of the tile.
    #[inline(always)]
    fn finish_vector<S: Simd>(
        s: S,
        sum: S::V,
        pass: &Pass,
        tile: &Tile,
        (r, first, n): (usize, usize, usize),
    ) -> S::V {
        // no closures here: outside the kernels' `#[target_feature]` functions a
        // closure is not inlined, and the intrinsics in it would be calls
        let mut v = match pass.scale {
            Some(c) => s.mul(sum, s.splat(c)),
            None => sum,
        };
        match pass.epilogue.bias {
            Bias::None => {}
            Bias::PerRow(b) => v = s.add(v, s.splat(b[tile.row + r])),
            Bias::PerColumn(b) => {
                let b = &b[tile.col + first..tile.col + first + n];
                // SAFETY: `b` holds the n floats read.
                v = s.add(v, unsafe { load_lanes(s, b.as_ptr(), n) });
            }
        }
        match pass.epilogue.activation {
            Some(act) => act.apply_v(s, v),
            None => v,
        }
    }

    /// Lanes of the `h`-th 16-column half of a `cols`-wide tile row, as a mask.
    #[inline(always)]
    fn half_mask(cols: usize, h: usize) -> __mmask16 {
        let lanes = cols.saturating_sub(h * NR).min(NR);
        ((1u32 << lanes) - 1) as __mmask16
    }

    /// An `R × 16·P` register tile over one pass (AVX-512: one 16-lane accumulator
    /// per row and panel); `panels[h]` is the panel of columns `16h .. 16h + 16`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F. As [`avx2`]: rows and columns of `a` inside its view,
    /// each panel holds `kc · NR` floats, and the `R × tile.cols` block of `out`
    /// (`tile.cols ≤ 16·P`) lies in its first `m·n` elements; `out` rows are sliced
    /// before the masked loads and stores, which touch only `tile.cols` lanes.
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn avx512<const R: usize, const P: usize>(
        a: &Operand,
        panels: [&[f32]; P],
        out: &mut [f32],
        pass: &Pass,
        tile: &Tile,
    ) {
        let masks: [__mmask16; P] = std::array::from_fn(|h| half_mask(tile.cols, h));
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        if !pass.first {
            for (r, acc) in acc.iter_mut().enumerate() {
                let o = (tile.row + r) * tile.ldc + tile.col;
                let src = &out[o..o + tile.cols];
                for h in 0..P {
                    // SAFETY: the mask enables only lanes below `tile.cols - 16h`,
                    // inside `src`.
                    acc[h] = unsafe { _mm512_maskz_loadu_ps(masks[h], src.as_ptr().add(h * NR)) };
                }
            }
        }
        let rows = row_starts::<R>(a, pass, tile);
        assert!(panels.iter().all(|p| p.len() >= pass.kc * NR));
        // the lines prefetched at step 0 (a line each, one step further per step):
        // this tile's panels `PREFETCH` steps ahead, or the block of a later tile
        let prefetch: [*const f32; P] = match tile.ahead {
            Some(block) => [block.as_ptr(); P],
            None => std::array::from_fn(|h| panels[h].as_ptr().wrapping_add(PREFETCH * NR)),
        };
        let base = a.data.as_ptr();
        if a.cs == 1 {
            // rows read in order (`a` row-major, or packed by `pack_a_block`):
            // one pointer per row, each stepping one element
            // SAFETY: `rows` are offsets inside `a.data`, checked above.
            let starts: [*const f32; R] = std::array::from_fn(|r| unsafe { base.add(rows[r]) });
            // one row's line `PREFETCH_A` steps ahead per step, the rows in turn:
            // `R ≤ 16` rows cover every line of each row once per 16 steps
            let mut ahead_row = 0;
            for kk in 0..pass.kc {
                _mm_prefetch::<_MM_HINT_T0>(starts[ahead_row].wrapping_add(kk + PREFETCH_A).cast());
                ahead_row = if ahead_row + 1 == R { 0 } else { ahead_row + 1 };
                // SAFETY: as below; row r of step kk is `rows[r] + kk`, between
                // the row's first and last elements of this pass, checked above.
                unsafe {
                    for &line in &prefetch {
                        _mm_prefetch::<_MM_HINT_T0>(line.wrapping_add(kk * NR).cast());
                    }
                    let b: [__m512; P] =
                        std::array::from_fn(|h| _mm512_loadu_ps(panels[h].as_ptr().add(kk * NR)));
                    for (r, row) in acc.iter_mut().enumerate() {
                        let x = _mm512_set1_ps(*starts[r].add(kk));
                        for (sum, &b) in row.iter_mut().zip(&b) {
                            *sum = _mm512_fmadd_ps(x, b, *sum);
                        }
                    }
                }
            }
        } else if a.rs == 1 {
            // rows adjacent (a block packed by `pack_a_block`, or a column-major
            // `a`): one pointer, the rows at fixed offsets from it
            // SAFETY: `rows[0]` is an offset inside `a.data`, checked above.
            let first = unsafe { base.add(rows[0]) };
            for kk in 0..pass.kc {
                // SAFETY: kk < kc, so kk·NR + 16 ≤ each panel's length; row r of
                // step kk is `rows[0] + r + kk·cs`, between the rows' first and
                // last elements of this pass, checked above.
                unsafe {
                    for &line in &prefetch {
                        _mm_prefetch::<_MM_HINT_T0>(line.wrapping_add(kk * NR).cast());
                    }
                    let b: [__m512; P] =
                        std::array::from_fn(|h| _mm512_loadu_ps(panels[h].as_ptr().add(kk * NR)));
                    let step = first.offset(kk as isize * a.cs);
                    for (r, row) in acc.iter_mut().enumerate() {
                        let x = _mm512_set1_ps(*step.add(r));
                        for (sum, &b) in row.iter_mut().zip(&b) {
                            *sum = _mm512_fmadd_ps(x, b, *sum);
                        }
                    }
                }
            }
        } else {
            for kk in 0..pass.kc {
                // SAFETY: kk < kc, so kk·NR + 16 ≤ each panel's length; the a offsets
                // lie between the rows' first and last elements of this pass, checked
                // above.
                unsafe {
                    for &line in &prefetch {
                        _mm_prefetch::<_MM_HINT_T0>(line.wrapping_add(kk * NR).cast());
                    }
                    let b: [__m512; P] =
                        std::array::from_fn(|h| _mm512_loadu_ps(panels[h].as_ptr().add(kk * NR)));
                    for r in 0..R {
                        let x = _mm512_set1_ps(*base.offset(rows[r] as isize + kk as isize * a.cs));
                        for h in 0..P {
                            acc[r][h] = _mm512_fmadd_ps(x, b[h], acc[r][h]);
                        }
                    }
                }
            }
        }
        // spilled first, so the k loop indexes `acc` with constants only and it
        // stays in registers (finishing straight from `acc` halved the throughput)
        let mut sums = [[_mm512_setzero_ps(); P]; R];
        sums.copy_from_slice(&acc);
        // SAFETY: the CPU has AVX-512 F/BW/DQ/VL (`Kernel::Avx512` is chosen
        // only at that level).
        let s = unsafe { Avx512::new() };
        for (r, row) in sums.iter().enumerate() {
            let o = (tile.row + r) * tile.ldc + tile.col;
            let dst = &mut out[o..o + tile.cols];
            for (h, &sum) in row.iter().enumerate() {
                // the half's columns: the lanes its mask enables
                let n = tile.cols.saturating_sub(h * NR).min(NR);
                if n == 0 {
                    continue;
                }
                let v = finish_vector(s, sum, pass, tile, (r, h * NR, n));
                // SAFETY: the mask enables only lanes below `tile.cols - 16h`, inside
                // `dst`.
                unsafe { _mm512_mask_storeu_ps(dst.as_mut_ptr().add(h * NR), masks[h], v) };
            }
        }
    }

    /// Whether [`gather_tile`] can pack the `rows × kc` tile of `a` at `(row,
    /// k0)`: at most 16 rows, every element of it inside `a.data`, and its row
    /// offsets within `i32`.
    pub(super) fn gathers(a: &Operand, row: usize, rows: usize, k0: usize, kc: usize) -> bool {
        if !(1..=16).contains(&rows) || kc == 0 {
            return false;
        }
        let len = a.data.len() as isize;
        let corner = |r: usize, k: usize| a.offset + r as isize * a.rs + k as isize * a.cs;
        let (r1, k1) = (row + rows - 1, k0 + kc - 1);
        let inside = [(row, k0), (row, k1), (r1, k0), (r1, k1)]
            .iter()
            .all(|&(r, k)| (0..len).contains(&corner(r, k)));
        let span = a.rs.checked_mul(rows as isize - 1);
        inside && span.is_some_and(|s| i32::try_from(s).is_ok())
    }

    /// [`super::pack_a_block`]'s copy of one tile: `dst[kk·rows + i] = a(row + i,
    /// k0 + kk)` for `kk < dst.len() / rows`, one masked gather and one masked
    /// store per step.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, and [`gathers`] holds for this tile with `kc =
    /// dst.len() / rows` (every element read lies inside `a.data`, the lane
    /// offsets fit `i32`).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn gather_tile(
        a: &Operand,
        row: usize,
        rows: usize,
        k0: usize,
        dst: &mut [f32],
    ) {
        let mask = ((1u32 << rows) - 1) as __mmask16;
        // Invariant (`gathers`): (rows − 1)·rs fits i32, so every lane's does.
        let lanes: [i32; 16] = std::array::from_fn(|i| (i.min(rows - 1) as isize * a.rs) as i32);
        // SAFETY: `lanes` holds 16 i32.
        let offsets = unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) };
        let first = a.at(row, k0);
        for (kk, column) in dst.chunks_exact_mut(rows).enumerate() {
            let at = (first as isize + kk as isize * a.cs) as usize;
            // SAFETY: lanes below `rows` read elements (row + i, k0 + kk) of the
            // tile, inside `a.data` (`gathers`); masked-off lanes read nothing;
            // the store writes `rows` lanes, the length of `column`.
            unsafe {
                let v = _mm512_mask_i32gather_ps::<4>(
                    _mm512_setzero_ps(),
                    mask,
                    offsets,
                    a.data.as_ptr().add(at),
                );
                _mm512_mask_storeu_ps(column.as_mut_ptr(), mask, v);
            }
        }
    }

    /// [`gather_tile`] for an `a` whose rows are contiguous (`cs == 1`): 16
    /// columns at a time, one masked load per row, a 16 × 16 transpose in
    /// registers, one masked store per column (a 16-lane gather cost ~2.5×
    /// as much: 6 % of the transformer's run at batch 16).
    ///
    /// # Safety
    /// As [`gather_tile`], and `a.cs == 1`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn transpose_tile(
        a: &Operand,
        row: usize,
        rows: usize,
        k0: usize,
        dst: &mut [f32],
    ) {
        let kc = dst.len() / rows;
        let row_mask = ((1u32 << rows) - 1) as __mmask16;
        let first = a.at(row, k0) as isize;
        for kk0 in (0..kc).step_by(16) {
            let width = (kc - kk0).min(16);
            let mask = ((1u32 << width) - 1) as __mmask16;
            let r: [__m512; 16] = std::array::from_fn(|i| {
                if i < rows {
                    let at = (first + i as isize * a.rs + kk0 as isize) as usize;
                    // SAFETY: lanes below `width` read elements (row + i, k0 + kk0 +
                    // j) of the tile, inside `a.data` (`gathers`, `cs == 1`).
                    unsafe { _mm512_maskz_loadu_ps(mask, a.data.as_ptr().add(at)) }
                } else {
                    _mm512_setzero_ps()
                }
            });
            let cols = crate::simd::transpose::transpose16(r);
            for (j, col) in cols.iter().enumerate().take(width) {
                // SAFETY: the store writes `rows` lanes of column `kk0 + j < kc`,
                // inside `dst` (`kc · rows` floats).
                unsafe {
                    _mm512_mask_storeu_ps(dst.as_mut_ptr().add((kk0 + j) * rows), row_mask, *col)
                };
            }
        }
    }

    /// [`transpose_tile`] at AVX2, for tiles of at most 8 rows: 8 columns at a
    /// time, one load per row, an 8 × 8 transpose in registers, one 8-lane store
    /// per column, each column's lanes past `rows` overwritten by the next
    /// column's store (the last ones stored exactly). Element by element, the
    /// copy took 4–8 % of a `[2048, 1024] @ [1024, 256]` product on a Zen 3.
    ///
    /// # Safety
    /// The CPU has AVX2, [`gathers`] holds for this tile with `kc = dst.len() /
    /// rows`, `rows ≤ 8` and `a.cs == 1`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn transpose_tile_avx2(
        a: &Operand,
        row: usize,
        rows: usize,
        k0: usize,
        dst: &mut [f32],
    ) {
        // SAFETY: the caller's contract: the CPU has AVX2.
        let s = unsafe { Avx2::new() };
        let kc = dst.len() / rows;
        let first = a.at(row, k0) as isize;
        for kk0 in (0..kc).step_by(8) {
            let width = (kc - kk0).min(8);
            let r: [__m256; 8] = std::array::from_fn(|i| {
                if i < rows {
                    let at = (first + i as isize * a.rs + kk0 as isize) as usize;
                    // SAFETY: elements (row + i, k0 + kk0 .. + width) of the tile,
                    // inside `a.data` (`gathers`, `cs == 1`).
                    unsafe { load_lanes(s, a.data.as_ptr().add(at), width) }
                } else {
                    _mm256_setzero_ps()
                }
            });
            let cols = crate::simd::transpose::transpose8(r);
            for (j, &col) in cols.iter().enumerate().take(width) {
                let at = (kk0 + j) * rows;
                // SAFETY: column `kk0 + j < kc` starts at `at` inside `dst`
                // (`kc · rows` floats); 8 lanes are stored only where they fit.
                unsafe {
                    let d = dst.as_mut_ptr().add(at);
                    if at + 8 <= dst.len() {
                        s.store(d, col)
                    } else {
                        s.store_tail(d, rows, col)
                    }
                }
            }
        }
    }

    /// `pack_panels` for a `[k, n]` view whose columns are contiguous (`rs == 1`,
    /// column `c` from `offset + c·cs`): per panel and 8-column half, 8 loads of 8
    /// column elements, an 8 × 8 transpose in registers and 8 stores of panel
    /// half-rows; columns past `n` are zeros. Element by element (a strided store
    /// each) packing attention's `Kᵀ` took ~40 % of the time of the products it
    /// fed (the built-in transformer at batch 16 on a Zen 3, `perf`: 2.2 → 0.7 %
    /// of the run).
    ///
    /// # Safety
    /// The CPU has AVX2; every element `offset + r + c·cs` (`r < k`, `c < n`) lies
    /// in `data`, and `panels` holds `n.div_ceil(NR) · k · NR` floats.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pack_columns_avx2(
        data: &[f32],
        offset: usize,
        cs: isize,
        (k, n): (usize, usize),
        panels: &mut [f32],
    ) {
        // SAFETY: the caller's contract: the CPU has AVX2.
        let s = unsafe { Avx2::new() };
        assert!(panels.len() >= n.div_ceil(NR) * k * NR);
        for p in 0..n.div_ceil(NR) {
            for half in [0, 8] {
                let first = p * NR + half;
                for kk0 in (0..k).step_by(8) {
                    let width = (k - kk0).min(8);
                    let columns: [__m256; 8] = std::array::from_fn(|i| {
                        if first + i < n {
                            let at = (offset as isize + (first + i) as isize * cs) as usize + kk0;
                            assert!(at + width <= data.len(), "packed column outside its view");
                            // SAFETY: `at .. at + width` lies in `data` (asserted).
                            unsafe { load_lanes(s, data.as_ptr().add(at), width) }
                        } else {
                            _mm256_setzero_ps()
                        }
                    });
                    let rows = crate::simd::transpose::transpose8(columns);
                    for (j, &row) in rows.iter().enumerate().take(width) {
                        let at = (p * k + kk0 + j) * NR + half;
                        // SAFETY: panel row `kk0 + j < k` of panel `p` lies in
                        // `panels` (asserted above); 8 of its 16 floats.
                        unsafe { s.store(panels.as_mut_ptr().add(at), row) };
                    }
                }
            }
        }
    }

    /// [`avx512`] over two panels (32 columns).
    ///
    /// # Safety
    /// As [`avx512`].
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512_pair<const R: usize>(
        a: &Operand,
        panels: [&[f32]; 2],
        out: &mut [f32],
        pass: &Pass,
        tile: &Tile,
    ) {
        // SAFETY: the caller upholds `avx512`'s contract.
        unsafe { avx512::<R, 2>(a, panels, out, pass, tile) }
    }

    /// [`avx512`] over one panel (16 columns).
    ///
    /// # Safety
    /// As [`avx512`].
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512_single<const R: usize>(
        a: &Operand,
        panel: &[f32],
        out: &mut [f32],
        pass: &Pass,
        tile: &Tile,
    ) {
        // SAFETY: the caller upholds `avx512`'s contract.
        unsafe { avx512::<R, 1>(a, [panel], out, pass, tile) }
    }
}
