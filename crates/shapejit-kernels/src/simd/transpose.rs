//! Register transposes of 16 × 16 floats at AVX-512 (packing `a` for the packed
//! GEMM, an exporter's `Kᵀ` for fused attention).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The columns of 16 rows of 16: `out[j]` lane `i` is `r[i]` lane `j`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    // pairs of rows interleaved: t[2i] = r[2i][0] r[2i+1][0] r[2i][1] r[2i+1][1] …
    // per 128-bit lane, t[2i + 1] the upper halves
    let t: [__m512; 16] = std::array::from_fn(|i| {
        let (x, y) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(x, y)
        } else {
            _mm512_unpackhi_ps(x, y)
        }
    });
    // u[4g + c], 128-bit lane l: column 4l + c of rows 4g .. 4g + 4
    let u: [__m512; 16] = std::array::from_fn(|i| {
        let (g, c) = (i / 4, i % 4);
        let (x, y) = (
            _mm512_castps_pd(t[4 * g + c / 2]),
            _mm512_castps_pd(t[4 * g + 2 + c / 2]),
        );
        _mm512_castpd_ps(if c % 2 == 0 {
            _mm512_unpacklo_pd(x, y)
        } else {
            _mm512_unpackhi_pd(x, y)
        })
    });
    // v[2c + h]: lanes h, h + 2 of u[c] and u[4 + c]; w the same of rows 8 .. 16
    let v: [__m512; 8] = std::array::from_fn(|i| {
        let (c, h) = (i / 2, i % 2);
        if h == 0 {
            _mm512_shuffle_f32x4::<0x88>(u[c], u[4 + c])
        } else {
            _mm512_shuffle_f32x4::<0xdd>(u[c], u[4 + c])
        }
    });
    let w: [__m512; 8] = std::array::from_fn(|i| {
        let (c, h) = (i / 2, i % 2);
        if h == 0 {
            _mm512_shuffle_f32x4::<0x88>(u[8 + c], u[12 + c])
        } else {
            _mm512_shuffle_f32x4::<0xdd>(u[8 + c], u[12 + c])
        }
    });
    // column 4l + c: lane l of u[c], u[4 + c], u[8 + c], u[12 + c]
    std::array::from_fn(|j| {
        let (l, c) = (j / 4, j % 4);
        let (x, y) = (v[2 * c + l % 2], w[2 * c + l % 2]);
        if l < 2 {
            _mm512_shuffle_f32x4::<0x88>(x, y)
        } else {
            _mm512_shuffle_f32x4::<0xdd>(x, y)
        }
    })
}
