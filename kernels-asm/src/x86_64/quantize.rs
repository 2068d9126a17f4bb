//! Activation quantization to Q8_0 content and to Q8_K with AVX2.

use super::Avx2;
use crate::layout::{QK, QK_K};
use crate::shape::{quantize_k_shape, quantize_shape, ShapeError};
use core::arch::x86_64::*;

/// Quantizes activations to Q8_0 content, the same bytes as
/// [`crate::generic::quantize_acts_q8_0`]: per 32-value block,
/// `amax = max |x|` (NaN ignored, as `f32::max` does), `d = amax / 127`,
/// `id = d != 0 ? 1 / d : 0`, `q = roundf(x * id)` (halves away from zero)
/// saturated to i8 with NaN giving 0, and `d` rounded to f16 (nearest even)
/// and widened back.
///
/// A shape error unless `x.len()` is a multiple of 32, `qs.len() ==
/// x.len()` and `d.len() == x.len() / 32`.
pub fn quantize_acts_q8_0(
    _cpu: Avx2,
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
) -> Result<(), ShapeError> {
    quantize_shape(x, qs, d)?;
    for ((xb, qb), db) in x
        .chunks_exact(QK)
        .zip(qs.chunks_exact_mut(QK))
        .zip(d.iter_mut())
    {
        // SAFETY: each chunk is exactly 32 values / 32 quants (chunks_exact);
        // the token proves AVX2/FMA/F16C.
        *db = unsafe { quantize_block(xb, qb) };
    }
    Ok(())
}

/// One 32-value block; returns the f16-rounded scale as f32.
///
/// # Safety
/// `x.len()` and `q.len()` must be at least 32, and the CPU must implement
/// AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
    // SAFETY: `x` and `q` hold at least 32 elements (the function contract), so
    // the four 8-float loads and the 32-byte store are in bounds; the CPU
    // implements AVX2, FMA and F16C.
    unsafe {
        debug_assert!(x.len() >= QK && q.len() >= QK);
        let sign = _mm256_set1_ps(-0.0);
        let v = [
            _mm256_loadu_ps(x.as_ptr()),
            _mm256_loadu_ps(x.as_ptr().add(8)),
            _mm256_loadu_ps(x.as_ptr().add(16)),
            _mm256_loadu_ps(x.as_ptr().add(24)),
        ];
        // max_ps(a, b) returns b when a is NaN: NaN lanes never enter `m`.
        let mut m = _mm256_setzero_ps();
        for vi in v {
            m = _mm256_max_ps(_mm256_andnot_ps(sign, vi), m);
        }
        let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        let m1 = _mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1));
        let amax = _mm_cvtss_f32(m1);
        let dv = amax / 127.0;
        let id = if dv != 0.0 { 1.0 / dv } else { 0.0 };
        let idv = _mm256_set1_ps(id);
        let bytes = quants32(v, idv);
        _mm256_storeu_si256(q.as_mut_ptr().cast(), bytes);
        let h = _mm_cvtps_ph(_mm_set_ss(dv), _MM_FROUND_TO_NEAREST_INT);
        _mm_cvtss_f32(_mm_cvtph_ps(h))
    }
}

/// Quantizes activations to Q8_K, the same bytes as
/// [`crate::generic::quantize_acts_q8_k`]: per 256-value block,
/// `amax = max |x|` (NaN ignored, as `f32::max` does), `d = amax / 127`
/// kept in f32, `id = d != 0 ? 1 / d : 0`, `q = roundf(x * id)` (halves
/// away from zero) saturated to i8 with NaN giving 0, and the exact i16 sum
/// of each 32 quants.
///
/// A shape error unless `x.len()` is a multiple of 256, `qs.len() ==
/// x.len()`, `d.len() == x.len() / 256` and `sums.len() == x.len() / 32`.
pub fn quantize_acts_q8_k(
    _cpu: Avx2,
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    sums: &mut [i16],
) -> Result<(), ShapeError> {
    quantize_k_shape(x, qs, d, sums)?;
    for (((xb, qb), db), sb) in x
        .chunks_exact(QK_K)
        .zip(qs.chunks_exact_mut(QK_K))
        .zip(d.iter_mut())
        .zip(sums.chunks_exact_mut(QK_K / QK))
    {
        // SAFETY: each chunk is exactly 256 values / 256 quants / 8 sums
        // (chunks_exact); the token proves AVX2/FMA/F16C.
        *db = unsafe { quantize_k_block(xb, qb, sb) };
    }
    Ok(())
}

/// One 256-value Q8_K block; returns its scale.
///
/// # Safety
/// `x.len()` and `q.len()` must be at least 256, `sums.len()` at least 8,
/// and the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_k_block(x: &[f32], q: &mut [i8], sums: &mut [i16]) -> f32 {
    debug_assert!(x.len() >= QK_K && q.len() >= QK_K && sums.len() >= QK_K / QK);
    // SAFETY: `x` holds 256 floats and `q` 256 bytes (the function contract),
    // so the loads at 8k (k < 32) and the 32-byte stores at 32j (j < 8) are
    // in bounds; the CPU implements AVX2, FMA and F16C.
    unsafe {
        let sign = _mm256_set1_ps(-0.0);
        // max_ps(a, b) returns b when a is NaN: NaN lanes never enter `m`.
        let mut m = [_mm256_setzero_ps(); 4];
        for k in 0..QK_K / 8 {
            let v = _mm256_loadu_ps(x.as_ptr().add(8 * k));
            m[k % 4] = _mm256_max_ps(_mm256_andnot_ps(sign, v), m[k % 4]);
        }
        let m = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
        let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        let m1 = _mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1));
        let amax = _mm_cvtss_f32(m1);
        let dv = amax / 127.0;
        let id = if dv != 0.0 { 1.0 / dv } else { 0.0 };
        let idv = _mm256_set1_ps(id);
        let bias = _mm256_set1_epi8(-128);
        for (j, s) in sums.iter_mut().take(QK_K / QK).enumerate() {
            let p = x.as_ptr().add(QK * j);
            let v = [
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            ];
            let bytes = quants32(v, idv);
            _mm256_storeu_si256(q.as_mut_ptr().add(QK * j).cast(), bytes);
            // Sum of (q + 128) per 8 bytes (vpsadbw), minus 32 x 128.
            let u = _mm256_sad_epu8(_mm256_xor_si256(bytes, bias), _mm256_setzero_si256());
            let u2 = _mm_add_epi64(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
            let total = _mm_cvtsi128_si64(_mm_add_epi64(u2, _mm_unpackhi_epi64(u2, u2)));
            *s = (total - 32 * 128) as i16;
        }
        dv
    }
}

/// The 32 quants `roundf(v * id)` of four 8-float vectors, saturated to i8
/// with NaN giving 0, in order (register-only arithmetic, safe to call
/// where AVX2 is enabled).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn quants32(v: [__m256; 4], idv: __m256) -> __m256i {
    let sign = _mm256_set1_ps(-0.0);
    let half = _mm256_set1_ps(0.5);
    let one = _mm256_set1_ps(1.0);
    let lo = _mm256_set1_ps(-128.0);
    let hi = _mm256_set1_ps(127.0);
    let mut iv = [_mm256_setzero_si256(); 4];
    for (o, vi) in iv.iter_mut().zip(v) {
        let p = _mm256_mul_ps(vi, idv);
        // roundf: truncate, then step away from zero when the (exact)
        // fraction is at least one half.
        let t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(p, t));
        let step = _mm256_or_ps(one, _mm256_and_ps(p, sign));
        let up = _mm256_cmp_ps(frac, half, _CMP_GE_OQ);
        let r = _mm256_add_ps(t, _mm256_and_ps(up, step));
        // `as i8`: saturate (NaN -> -128 here) and then NaN -> 0.
        let r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
        let r = _mm256_and_ps(r, _mm256_cmp_ps(p, p, _CMP_ORD_Q));
        *o = _mm256_cvttps_epi32(r);
    }
    let s01 = _mm256_packs_epi32(iv[0], iv[1]);
    let s23 = _mm256_packs_epi32(iv[2], iv[3]);
    let bytes = _mm256_packs_epi16(s01, s23);
    _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}
