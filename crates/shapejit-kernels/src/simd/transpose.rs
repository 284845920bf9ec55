//! Register transposes of 16 × 16 floats at AVX-512 (packing `a` for the packed
//! GEMM, an exporter's `Kᵀ` for fused attention) and of 8 × 8 at AVX2 (packing
//! `a`).

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

/// The columns of 8 rows of 8: `out[j]` lane `i` is `r[i]` lane `j`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // pairs of rows interleaved per 128-bit lane, as in `transpose16`
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (x, y) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(x, y)
        } else {
            _mm256_unpackhi_ps(x, y)
        }
    });
    // u[4g + c], 128-bit lane l: column 4l + c of rows 4g .. 4g + 4
    let u: [__m256; 8] = std::array::from_fn(|i| {
        let (g, c) = (i / 4, i % 4);
        let (x, y) = (
            _mm256_castps_pd(t[4 * g + c / 2]),
            _mm256_castps_pd(t[4 * g + 2 + c / 2]),
        );
        _mm256_castpd_ps(if c % 2 == 0 {
            _mm256_unpacklo_pd(x, y)
        } else {
            _mm256_unpackhi_pd(x, y)
        })
    });
    // column 4l + c: lane l of u[c] (rows 0 .. 4) and of u[4 + c] (rows 4 .. 8)
    std::array::from_fn(|j| {
        let (l, c) = (j / 4, j % 4);
        if l == 0 {
            _mm256_permute2f128_ps::<0x20>(u[c], u[4 + c])
        } else {
            _mm256_permute2f128_ps::<0x31>(u[c], u[4 + c])
        }
    })
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn transpose8_swaps_rows_and_columns() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("SKIP: no AVX2 on this CPU");
            return;
        }
        let rows: [[f32; 8]; 8] =
            std::array::from_fn(|i| std::array::from_fn(|j| (10 * i + j) as f32));
        // SAFETY: the CPU has AVX2 (checked above); each row holds 8 floats.
        let cols = unsafe { transpose8(rows.map(|r| _mm256_loadu_ps(r.as_ptr()))) };
        for (j, col) in cols.iter().enumerate() {
            let mut got = [0f32; 8];
            // SAFETY: as above; `got` holds 8 floats.
            unsafe { _mm256_storeu_ps(got.as_mut_ptr(), *col) };
            assert_eq!(got, std::array::from_fn(|i| rows[i][j]), "column {j}");
        }
    }
}
