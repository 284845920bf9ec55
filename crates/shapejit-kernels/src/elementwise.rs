//! Elementwise engines: unary, binary and ternary maps over strided views,
//! generic over element types and the per-element function, plus copy and fill.
//!
//! Operands must already have the output's shape (broadcast operands carry
//! stride 0, see [`crate::StridedShape::broadcast_to`]). Each innermost run takes
//! the fastest applicable path: all-contiguous slices (auto-vectorized, one
//! copy of the loop per CPU level, see the `simd` module), a scalar
//! operand (stride 0), or general strided indexing. [`unary_kernel`] runs a
//! [`Unary`] slice kernel instead of a per-element closure.
//!
//! **Invariant:** every path applies the same function to the same elements, so
//! the result does not depend on layout or CPU features.

use crate::error::KernelError;
use crate::simd::dispatch;
use crate::view::{View, ViewMut};
use crate::vmath::Unary;
use crate::walk::walk;

fn check_shape(
    what: &'static str,
    expected: &[usize],
    actual: &[usize],
) -> Result<(), KernelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(KernelError::ShapeMismatch {
            what,
            expected: expected.to_vec(),
            actual: actual.to_vec(),
        })
    }
}

#[inline(always)]
fn map1<A: Copy, O: Copy>(out: &mut [O], a: &[A], f: &impl Fn(A) -> O) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

#[inline(always)]
fn map2<A: Copy, B: Copy, O: Copy>(out: &mut [O], a: &[A], b: &[B], f: &impl Fn(A, B) -> O) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

#[inline(always)]
fn map2_scalar_b<A: Copy, B: Copy, O: Copy>(out: &mut [O], a: &[A], y: B, f: &impl Fn(A, B) -> O) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x, y);
    }
}

#[inline(always)]
fn map2_scalar_a<A: Copy, B: Copy, O: Copy>(out: &mut [O], x: A, b: &[B], f: &impl Fn(A, B) -> O) {
    for (o, &y) in out.iter_mut().zip(b) {
        *o = f(x, y);
    }
}

/// `out[i] = f(a[i])` over all indices of `out`'s shape.
pub fn unary<A: Copy, O: Copy>(
    out: &mut ViewMut<O>,
    a: &View<A>,
    f: impl Fn(A) -> O,
) -> Result<(), KernelError> {
    check_shape("unary operand", out.shape(), a.shape())?;
    let (dst, og) = out.parts();
    let (src, ag) = (a.data(), a.geom());
    walk(
        og.shape(),
        [og.strides(), ag.strides()],
        [og.offset(), ag.offset()],
        |[o, x], len, [so, sx]| {
            if so == 1 && sx == 1 {
                let (dst, src) = (&mut dst[o..o + len], &src[x..x + len]);
                dispatch(
                    #[inline(always)]
                    || map1(dst, src, &f),
                );
            } else if so == 1 && sx == 0 {
                dst[o..o + len].fill(f(src[x]));
            } else {
                for i in 0..len as isize {
                    dst[(o as isize + i * so) as usize] = f(src[(x as isize + i * sx) as usize]);
                }
            }
        },
    );
    Ok(())
}

/// Elements per stack buffer when [`unary_kernel`] gathers a strided run.
const GATHER: usize = 64;

/// `out[i] = k(a[i])` over all indices of `out`'s shape, with `k`'s slice kernel
/// at [`crate::cpu::level`] (strided runs are gathered into a stack buffer
/// first, so every element goes through the same kernel whatever the layout).
pub fn unary_kernel(out: &mut ViewMut<f32>, a: &View<f32>, k: Unary) -> Result<(), KernelError> {
    check_shape("unary operand", out.shape(), a.shape())?;
    let (dst, og) = out.parts();
    let (src, ag) = (a.data(), a.geom());
    let f = k.entry(crate::cpu::level());
    walk(
        og.shape(),
        [og.strides(), ag.strides()],
        [og.offset(), ag.offset()],
        |[o, x], len, [so, sx]| {
            if so == 1 && sx == 1 {
                let (s, d) = (&src[x..x + len], &mut dst[o..o + len]);
                // SAFETY: two distinct slices of `len` elements each.
                unsafe { f(s.as_ptr(), d.as_mut_ptr(), len) };
            } else if so == 1 && sx == 0 {
                // through the slice kernel too, so the value does not depend on layout
                let mut one = [src[x]];
                let p = one.as_mut_ptr();
                // SAFETY: in place on one element.
                unsafe { f(p, p, 1) };
                dst[o..o + len].fill(one[0]);
            } else {
                let mut buf = [0f32; GATHER];
                for start in (0..len).step_by(GATHER) {
                    let n = GATHER.min(len - start);
                    for (i, b) in buf[..n].iter_mut().enumerate() {
                        *b = src[(x as isize + (start + i) as isize * sx) as usize];
                    }
                    let p = buf.as_mut_ptr();
                    // SAFETY: in place on the buffer's first `n <= GATHER` elements.
                    unsafe { f(p, p, n) };
                    for (i, &b) in buf[..n].iter().enumerate() {
                        dst[(o as isize + (start + i) as isize * so) as usize] = b;
                    }
                }
            }
        },
    );
    Ok(())
}

/// `out[i] = f(a[i], b[i])` over all indices of `out`'s shape.
pub fn binary<A: Copy, B: Copy, O: Copy>(
    out: &mut ViewMut<O>,
    a: &View<A>,
    b: &View<B>,
    f: impl Fn(A, B) -> O,
) -> Result<(), KernelError> {
    check_shape("binary operand a", out.shape(), a.shape())?;
    check_shape("binary operand b", out.shape(), b.shape())?;
    let (dst, og) = out.parts();
    let (sa, ag, sb, bg) = (a.data(), a.geom(), b.data(), b.geom());
    walk(
        og.shape(),
        [og.strides(), ag.strides(), bg.strides()],
        [og.offset(), ag.offset(), bg.offset()],
        |[o, x, y], len, strides| match strides {
            [1, 1, 1] => {
                let (dst, a, b) = (&mut dst[o..o + len], &sa[x..x + len], &sb[y..y + len]);
                dispatch(
                    #[inline(always)]
                    || map2(dst, a, b, &f),
                );
            }
            [1, 1, 0] => {
                let (dst, a, yv) = (&mut dst[o..o + len], &sa[x..x + len], sb[y]);
                dispatch(
                    #[inline(always)]
                    || map2_scalar_b(dst, a, yv, &f),
                );
            }
            [1, 0, 1] => {
                let (dst, xv, b) = (&mut dst[o..o + len], sa[x], &sb[y..y + len]);
                dispatch(
                    #[inline(always)]
                    || map2_scalar_a(dst, xv, b, &f),
                );
            }
            [so, sx, sy] => {
                for i in 0..len as isize {
                    let (xi, yi) = (
                        (x as isize + i * sx) as usize,
                        (y as isize + i * sy) as usize,
                    );
                    dst[(o as isize + i * so) as usize] = f(sa[xi], sb[yi]);
                }
            }
        },
    );
    Ok(())
}

/// `dst[i] = f(a[i], b[i])` on contiguous slices, where `a` or `b` may also
/// hold one element that broadcasts (the interpreter's fast path: no views, no
/// walk). Any other length is a [`KernelError::ShapeMismatch`].
pub fn binary_slices<A: Copy, B: Copy, O: Copy>(
    dst: &mut [O],
    a: &[A],
    b: &[B],
    f: impl Fn(A, B) -> O,
) -> Result<(), KernelError> {
    let n = dst.len();
    match (a.len(), b.len()) {
        (la, lb) if la == n && lb == n => dispatch(
            #[inline(always)]
            || map2(dst, a, b, &f),
        ),
        (la, 1) if la == n => dispatch(
            #[inline(always)]
            || map2_scalar_b(dst, a, b[0], &f),
        ),
        (1, lb) if lb == n => dispatch(
            #[inline(always)]
            || map2_scalar_a(dst, a[0], b, &f),
        ),
        (la, lb) => {
            return Err(KernelError::ShapeMismatch {
                what: "binary slice operands",
                expected: vec![n, n],
                actual: vec![la, lb],
            });
        }
    }
    Ok(())
}

/// `out[i] = f(a[i], b[i], c[i])` over all indices of `out`'s shape.
pub fn ternary<A: Copy, B: Copy, C: Copy, O: Copy>(
    out: &mut ViewMut<O>,
    a: &View<A>,
    b: &View<B>,
    c: &View<C>,
    f: impl Fn(A, B, C) -> O,
) -> Result<(), KernelError> {
    check_shape("ternary operand a", out.shape(), a.shape())?;
    check_shape("ternary operand b", out.shape(), b.shape())?;
    check_shape("ternary operand c", out.shape(), c.shape())?;
    let (dst, og) = out.parts();
    let (sa, sb, sc) = (a.data(), b.data(), c.data());
    let (ag, bg, cg) = (a.geom(), b.geom(), c.geom());
    walk(
        og.shape(),
        [og.strides(), ag.strides(), bg.strides(), cg.strides()],
        [og.offset(), ag.offset(), bg.offset(), cg.offset()],
        |[o, x, y, z], len, strides| match strides {
            [1, 1, 1, 1] => {
                let (dst, a, b, c) = (
                    &mut dst[o..o + len],
                    &sa[x..x + len],
                    &sb[y..y + len],
                    &sc[z..z + len],
                );
                dispatch(
                    #[inline(always)]
                    || {
                        for (((d, &p), &q), &r) in dst.iter_mut().zip(a).zip(b).zip(c) {
                            *d = f(p, q, r);
                        }
                    },
                );
            }
            // a per-channel affine map (batch norm): b and c fixed along the run
            [1, 1, 0, 0] => {
                let (dst, a, q, r) = (&mut dst[o..o + len], &sa[x..x + len], sb[y], sc[z]);
                dispatch(
                    #[inline(always)]
                    || map2_scalar_b(dst, a, (q, r), &|p, (q, r)| f(p, q, r)),
                );
            }
            [so, sx, sy, sz] => {
                for i in 0..len as isize {
                    let xi = (x as isize + i * sx) as usize;
                    let yi = (y as isize + i * sy) as usize;
                    let zi = (z as isize + i * sz) as usize;
                    dst[(o as isize + i * so) as usize] = f(sa[xi], sb[yi], sc[zi]);
                }
            }
        },
    );
    Ok(())
}

/// Copies `src` into `out` (same shape, any layouts): materializes views.
pub fn copy<T: Copy>(out: &mut ViewMut<T>, src: &View<T>) -> Result<(), KernelError> {
    check_shape("copy source", out.shape(), src.shape())?;
    let (dst, og) = out.parts();
    let (s, sg) = (src.data(), src.geom());
    walk(
        og.shape(),
        [og.strides(), sg.strides()],
        [og.offset(), sg.offset()],
        |[o, x], len, [so, sx]| {
            if so == 1 && sx == 1 {
                dst[o..o + len].copy_from_slice(&s[x..x + len]);
            } else if so == 1 && sx == 0 {
                dst[o..o + len].fill(s[x]);
            } else {
                for i in 0..len as isize {
                    dst[(o as isize + i * so) as usize] = s[(x as isize + i * sx) as usize];
                }
            }
        },
    );
    Ok(())
}

/// Sets every element of `out` to `value`.
pub fn fill<T: Copy>(out: &mut ViewMut<T>, value: T) {
    let (dst, og) = out.parts();
    walk(
        og.shape(),
        [og.strides()],
        [og.offset()],
        |[o], len, [so]| {
            if so == 1 {
                dst[o..o + len].fill(value);
            } else {
                for i in 0..len as isize {
                    dst[(o as isize + i * so) as usize] = value;
                }
            }
        },
    );
}

/// Calls `f` on every element of `src` in row-major order.
pub fn for_each<T: Copy>(src: &View<T>, mut f: impl FnMut(T)) {
    let (s, sg) = (src.data(), src.geom());
    walk(
        sg.shape(),
        [sg.strides()],
        [sg.offset()],
        |[x], len, [sx]| {
            for i in 0..len as isize {
                f(s[(x as isize + i * sx) as usize]);
            }
        },
    );
}
