//! Micro-kernels for generated code: one table of `extern "C"` slice kernels per
//! CPU level.
//!
//! The JIT tier's generated drivers do no vector arithmetic of their own: they walk
//! cache-resident tiles and call these kernels, which run at the full width of the
//! level (Cranelift's x64 vectors are 128-bit). A driver receives the [`Table`] of the
//! level chosen at load as an argument and calls through it, so its code has no
//! relocations and the same code runs at any level.
//!
//! Every kernel reads `len` f32 from each source and writes `len` f32 to `dst`; a
//! source may be `dst` itself (in place), other overlaps are not allowed. Full vectors
//! are loaded and stored unaligned, the tail with masked loads and stores, so nothing
//! outside the ranges is touched.
//!
//! **Invariant:** each binary kernel computes every element exactly as the
//! interpreter's op does (IEEE f32, NaN propagating `max`/`min` keeping the operand
//! the interpreter keeps), and the unary kernels are [`Unary`]'s, so a driver over
//! these kernels is bit-identical to the interpreter's op-by-op pass at the same level.

use std::sync::OnceLock;

use crate::cpu::{self, Level};
use crate::simd::vector::{Scalar, Simd};
use crate::vmath::{Unary, UnaryFn};

/// `dst[i] = op(a[i], b[i])` for `i < len`.
pub type BinaryFn = unsafe extern "C" fn(a: *const f32, b: *const f32, dst: *mut f32, len: usize);

/// `dst[i] = value` for `i < len`.
pub type FillFn = unsafe extern "C" fn(dst: *mut f32, len: usize, value: f32);

/// A binary f32 op with a slice kernel per level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binary {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// `a > b || a is NaN ? a : b`
    Max,
    /// `a < b || a is NaN ? a : b`
    Min,
}

impl Binary {
    /// Every op, in table order.
    pub const ALL: [Binary; 6] = [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::Max,
        Binary::Min,
    ];

    /// The one-element function (what every level computes per lane).
    pub fn scalar(self) -> fn(f32, f32) -> f32 {
        match self {
            Binary::Add => |a, b| a + b,
            Binary::Sub => |a, b| a - b,
            Binary::Mul => |a, b| a * b,
            Binary::Div => |a, b| a / b,
            Binary::Max => |a, b| if a > b || a.is_nan() { a } else { b },
            Binary::Min => |a, b| if a < b || a.is_nan() { a } else { b },
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The kernels of one level, laid out for generated code (`#[repr(C)]`: a driver
/// loads a kernel's pointer at the offset [`Table::unary_offset`] and friends give).
#[repr(C)]
#[derive(Debug)]
pub struct Table {
    unary: [UnaryFn; Unary::ALL.len()],
    binary: [BinaryFn; Binary::ALL.len()],
    fill: FillFn,
    copy: UnaryFn,
    level: Level,
}

impl Table {
    /// The table of `level`, lowered to what the CPU supports (built once per level).
    pub fn for_level(level: Level) -> &'static Table {
        static TABLES: [OnceLock<Table>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let level = level.capped();
        let slot = match level {
            Level::Scalar => 0,
            Level::Avx2 => 1,
            Level::Avx512 => 2,
        };
        TABLES[slot].get_or_init(|| Table::build(level))
    }

    /// The table of [`cpu::level`].
    pub fn current() -> &'static Table {
        Table::for_level(cpu::level())
    }

    fn build(level: Level) -> Table {
        Table {
            unary: std::array::from_fn(|i| Unary::ALL[i].entry(level)),
            binary: std::array::from_fn(|i| binary_entry(Binary::ALL[i], level)),
            fill: fill_entry(level),
            copy: copy_f32,
            level,
        }
    }

    /// The level whose kernels the table holds.
    pub fn level(&self) -> Level {
        self.level
    }

    /// Byte offset of `k`'s [`UnaryFn`] in the table.
    pub fn unary_offset(k: Unary) -> usize {
        std::mem::offset_of!(Table, unary) + k as usize * size_of::<UnaryFn>()
    }

    /// Byte offset of `op`'s [`BinaryFn`] in the table.
    pub fn binary_offset(op: Binary) -> usize {
        std::mem::offset_of!(Table, binary) + op.index() * size_of::<BinaryFn>()
    }

    /// Byte offset of the [`FillFn`].
    pub fn fill_offset() -> usize {
        std::mem::offset_of!(Table, fill)
    }

    /// Byte offset of the copy kernel (a [`UnaryFn`]: `dst[i] = src[i]`).
    pub fn copy_offset() -> usize {
        std::mem::offset_of!(Table, copy)
    }

    /// `dst[i] = k(src[i])` through the table (for tests and Rust callers).
    pub fn unary(&self, k: Unary, src: &[f32], dst: &mut [f32]) {
        let n = src.len().min(dst.len());
        let f = self.unary[k as usize];
        // SAFETY: both ranges hold `n` elements and are disjoint (`&mut`).
        unsafe { f(src.as_ptr(), dst.as_mut_ptr(), n) }
    }

    /// `dst[i] = op(a[i], b[i])` through the table over the shortest length.
    pub fn binary(&self, op: Binary, a: &[f32], b: &[f32], dst: &mut [f32]) {
        let n = a.len().min(b.len()).min(dst.len());
        // SAFETY: every range holds `n` elements; `dst` is disjoint from both (`&mut`).
        unsafe { self.binary[op.index()](a.as_ptr(), b.as_ptr(), dst.as_mut_ptr(), n) }
    }

    /// `dst[i] = value` through the table.
    pub fn fill(&self, dst: &mut [f32], value: f32) {
        // SAFETY: `dst` holds `dst.len()` elements.
        unsafe { (self.fill)(dst.as_mut_ptr(), dst.len(), value) }
    }
}

/// `dst[i] = src[i]` (a [`UnaryFn`]; `memmove`, so any overlap is fine).
unsafe extern "C" fn copy_f32(src: *const f32, dst: *mut f32, len: usize) {
    // SAFETY: the caller upholds `UnaryFn`'s contract (both ranges valid for `len`).
    unsafe { std::ptr::copy(src, dst, len) }
}

/// A binary op's per-vector formula.
#[inline(always)]
fn apply<S: Simd>(s: S, op: Binary, a: S::V, b: S::V) -> S::V {
    match op {
        Binary::Add => s.add(a, b),
        Binary::Sub => s.sub(a, b),
        Binary::Mul => s.mul(a, b),
        Binary::Div => s.div(a, b),
        // `Simd::max(a, b)` is `a > b ? a : b`; a NaN `a` is kept by the select.
        Binary::Max => s.select(s.eq(a, a), s.max(a, b), a),
        Binary::Min => s.select(s.eq(a, a), s.min(a, b), a),
    }
}

/// `dst[i] = op(a[i], b[i])`, full vectors then one masked tail.
///
/// # Safety
/// `a`, `b` readable and `dst` writable for `len` elements; a source is `dst` or
/// disjoint from it.
#[inline(always)]
unsafe fn zip<S: Simd>(s: S, op: Binary, a: *const f32, b: *const f32, dst: *mut f32, len: usize) {
    let mut i = 0;
    // SAFETY: every access is below `len`; each lane is read before it is stored.
    unsafe {
        while i + S::LANES <= len {
            let v = apply(s, op, s.load(a.add(i)), s.load(b.add(i)));
            s.store(dst.add(i), v);
            i += S::LANES;
        }
        if i < len {
            let n = len - i;
            let v = apply(s, op, s.load_tail(a.add(i), n), s.load_tail(b.add(i), n));
            s.store_tail(dst.add(i), n, v);
        }
    }
}

/// `dst[i] = value`.
///
/// # Safety
/// `dst` writable for `len` elements.
#[inline(always)]
unsafe fn splat_into<S: Simd>(s: S, dst: *mut f32, len: usize, value: f32) {
    let v = s.splat(value);
    let mut i = 0;
    // SAFETY: every store is below `len`.
    unsafe {
        while i + S::LANES <= len {
            s.store(dst.add(i), v);
            i += S::LANES;
        }
        if i < len {
            s.store_tail(dst.add(i), len - i, v);
        }
    }
}

/// Defines one `extern "C"` entry per binary op for a level module.
macro_rules! binary_entries {
    ($token:expr $(, #[$attr:meta])?) => {
        /// `a + b`
        $(#[$attr])? pub(super) unsafe extern "C" fn add(a: *const f32, b: *const f32, d: *mut f32, n: usize) {
            // SAFETY: only handed out where the CPU has the level; the caller upholds
            // `BinaryFn`'s contract.
            unsafe { zip($token, Binary::Add, a, b, d, n) }
        }
        /// `a - b`
        $(#[$attr])? pub(super) unsafe extern "C" fn sub(a: *const f32, b: *const f32, d: *mut f32, n: usize) {
            // SAFETY: as `add`.
            unsafe { zip($token, Binary::Sub, a, b, d, n) }
        }
        /// `a * b`
        $(#[$attr])? pub(super) unsafe extern "C" fn mul(a: *const f32, b: *const f32, d: *mut f32, n: usize) {
            // SAFETY: as `add`.
            unsafe { zip($token, Binary::Mul, a, b, d, n) }
        }
        /// `a / b`
        $(#[$attr])? pub(super) unsafe extern "C" fn div(a: *const f32, b: *const f32, d: *mut f32, n: usize) {
            // SAFETY: as `add`.
            unsafe { zip($token, Binary::Div, a, b, d, n) }
        }
        /// NaN-propagating max
        $(#[$attr])? pub(super) unsafe extern "C" fn max(a: *const f32, b: *const f32, d: *mut f32, n: usize) {
            // SAFETY: as `add`.
            unsafe { zip($token, Binary::Max, a, b, d, n) }
        }
        /// NaN-propagating min
        $(#[$attr])? pub(super) unsafe extern "C" fn min(a: *const f32, b: *const f32, d: *mut f32, n: usize) {
            // SAFETY: as `add`.
            unsafe { zip($token, Binary::Min, a, b, d, n) }
        }
        /// `dst[i] = value`
        $(#[$attr])? pub(super) unsafe extern "C" fn fill(d: *mut f32, n: usize, value: f32) {
            // SAFETY: as `add` (`FillFn`'s contract).
            unsafe { splat_into($token, d, n, value) }
        }
    };
}

mod scalar {
    use super::*;
    binary_entries!(Scalar);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use crate::simd::vector::Avx2;
    // The token's contract: these entries are only handed out where the CPU has
    // AVX2 + FMA (`Level::capped`).
    binary_entries!(Avx2::new(), #[target_feature(enable = "avx2,fma")]);
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;
    use crate::simd::vector::Avx512;
    // The token's contract: these entries are only handed out where the CPU has
    // AVX-512 F/BW/DQ/VL (`Level::capped`).
    binary_entries!(
        Avx512::new(),
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
    );
}

fn binary_entry(op: Binary, level: Level) -> BinaryFn {
    macro_rules! pick {
        ($m:ident) => {
            match op {
                Binary::Add => $m::add,
                Binary::Sub => $m::sub,
                Binary::Mul => $m::mul,
                Binary::Div => $m::div,
                Binary::Max => $m::max,
                Binary::Min => $m::min,
            }
        };
    }
    match level.capped() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => pick!(avx512),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => pick!(avx2),
        _ => pick!(scalar),
    }
}

fn fill_entry(level: Level) -> FillFn {
    match level.capped() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => avx512::fill,
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => avx2::fill,
        _ => scalar::fill,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Vec<f32> {
        let mut v = vec![
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -1e-40,
            f32::MAX,
            f32::MIN,
            1.0,
            1.0,
        ];
        v.extend((0..41).map(|i| (i as f32 * 0.77).sin() * 3.0));
        v
    }

    /// Bit for bit, except that any NaN matches any NaN: which operand's payload a
    /// NaN result carries is the compiler's choice (it may commute `a + b`), and ONNX
    /// only asks that NaN propagate.
    fn same(x: f32, y: f32) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }

    /// Every op at every level, every pairing of special and ordinary values, every
    /// length 0..=33 from unaligned starts: bit for bit the scalar formula (NaN for
    /// NaN), nothing written outside the destination.
    #[test]
    fn binary_kernels_match_the_scalar_formula_bit_for_bit() {
        let xs = values();
        let a: Vec<f32> = xs.iter().flat_map(|&x| xs.iter().map(move |_| x)).collect();
        let b: Vec<f32> = xs.iter().flat_map(|_| xs.iter().copied()).collect();
        for level in Level::ALL.into_iter().filter(|&l| cpu::supported(l)) {
            let t = Table::for_level(level);
            assert_eq!(t.level(), level);
            for op in Binary::ALL {
                let f = op.scalar();
                let mut out = vec![0f32; a.len()];
                t.binary(op, &a, &b, &mut out);
                for i in 0..a.len() {
                    let want = f(a[i], b[i]);
                    assert!(
                        same(out[i], want),
                        "{op:?}({}, {}) at {level}: {} vs {want}",
                        a[i],
                        b[i],
                        out[i]
                    );
                }
                for len in 0..=33 {
                    for off in 0..3 {
                        let mut dst = vec![-7.0f32; len + 8];
                        t.binary(
                            op,
                            &a[off..off + len],
                            &b[off..off + len],
                            &mut dst[off..off + len],
                        );
                        for (i, &d) in dst.iter().enumerate() {
                            let want = if (off..off + len).contains(&i) {
                                f(a[i], b[i])
                            } else {
                                -7.0
                            };
                            assert!(same(d, want), "{op:?} len {len} off {off} [{i}]");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fill_and_copy_touch_exactly_their_range() {
        for level in Level::ALL.into_iter().filter(|&l| cpu::supported(l)) {
            let t = Table::for_level(level);
            for len in 0..=33 {
                let mut dst = vec![1.5f32; len + 4];
                t.fill(&mut dst[2..2 + len], -3.25);
                for (i, &d) in dst.iter().enumerate() {
                    let want = if (2..2 + len).contains(&i) {
                        -3.25
                    } else {
                        1.5
                    };
                    assert_eq!(d, want, "fill at {level}, len {len}, [{i}]");
                }
                let src: Vec<f32> = (0..len).map(|i| i as f32).collect();
                let mut out = vec![9.0f32; len];
                // SAFETY: both hold `len` elements.
                unsafe { (t.copy)(src.as_ptr(), out.as_mut_ptr(), len) };
                assert_eq!(out, src);
            }
        }
    }

    #[test]
    fn offsets_address_the_entries() {
        let t = Table::current();
        let base = t as *const Table as usize;
        let read = |off: usize| {
            // SAFETY: every offset below is inside `Table` and points at a fn pointer.
            unsafe { *((base + off) as *const usize) }
        };
        for (i, &k) in Unary::ALL.iter().enumerate() {
            assert_eq!(read(Table::unary_offset(k)), t.unary[i] as usize);
        }
        for op in Binary::ALL {
            assert_eq!(
                read(Table::binary_offset(op)),
                t.binary[op.index()] as usize
            );
        }
        assert_eq!(read(Table::fill_offset()), t.fill as usize);
        assert_eq!(read(Table::copy_offset()), t.copy as usize);
    }
}
