//! Attention over an f16 key/value cache with AVX2 (f32 caches go to the
//! generic code).

use super::Avx2;
use crate::generic;
use crate::shape::{attn_shape, attn_vector_ok, ShapeError};
use core::arch::x86_64::*;

/// Attention scores over an f16 key cache: `scores[j] = dot8(q, K_j) * scale`
/// for `j < scores.len()`, where `K_j` is the `q.len()` halves at
/// `keys[j * stride ..]` and `dot8` is the 8-lane dot product of
/// docs/kernels.md (lane `i % 8` accumulates `q[i] * k[i]` in order, then
/// `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`): bit-identical to
/// [`generic::attn_scores_f16`].
///
/// A shape error unless every row lies inside `keys`; rows that are not a
/// non-zero multiple of 8 elements, or overlap, go to the generic code.
pub fn attn_scores_f16(
    _cpu: Avx2,
    q: &[f32],
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(q.len(), scores.len(), stride, keys.len())?;
    if !attn_vector_ok(q.len(), scores.len(), stride) {
        return generic::attn_scores_f16(q, keys, stride, scale, scores);
    }
    // SAFETY: rows `j < scores.len()` of `q.len()` halves at `j * stride`
    // lie inside `keys` (checked above); `q.len()` is a multiple of 8; the
    // token proves AVX2/FMA/F16C.
    unsafe { scores_f16(q, keys, stride, scale, scores) };
    Ok(())
}

/// Attention scores over an f32 key cache: [`generic::attn_scores_f32`]
/// (no vector code).
pub fn attn_scores_f32(
    _cpu: Avx2,
    q: &[f32],
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    generic::attn_scores_f32(q, keys, stride, scale, scores)
}

/// # Safety
/// As checked by [`attn_scores_f16`]; the CPU must implement AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_f16(q: &[f32], keys: &[u16], stride: usize, scale: f32, scores: &mut [f32]) {
    // SAFETY: per the function contract every key row `j < scores.len()` of
    // `q.len()` (a multiple of 8) halves at `j * stride` lies inside `keys`,
    // so the loads below are in bounds, as are the stores to `scores[j]`;
    // the CPU implements AVX2 and F16C.
    unsafe {
        let hd = q.len();
        let row = |j: usize| keys.as_ptr().add(j * stride);
        let dot = |acc: __m256, k: *const u16, c: usize| {
            // SAFETY: `k + c .. k + c + 8` is inside a checked row, `q` holds
            // `c + 8` floats (c < hd, hd a multiple of 8).
            {
                let kv = _mm256_cvtph_ps(_mm_loadu_si128(k.add(c).cast()));
                let qv = _mm256_loadu_ps(q.as_ptr().add(c));
                _mm256_add_ps(acc, _mm256_mul_ps(qv, kv))
            }
        };
        // Four rows at a time: four independent add chains.
        let mut j = 0;
        let n = scores.len();
        while j + 4 <= n {
            let (k0, k1, k2, k3) = (row(j), row(j + 1), row(j + 2), row(j + 3));
            let mut acc = [_mm256_setzero_ps(); 4];
            for c in (0..hd).step_by(8) {
                acc[0] = dot(acc[0], k0, c);
                acc[1] = dot(acc[1], k1, c);
                acc[2] = dot(acc[2], k2, c);
                acc[3] = dot(acc[3], k3, c);
            }
            for (i, a) in acc.iter().enumerate() {
                *scores.get_unchecked_mut(j + i) = reduce8(*a) * scale;
            }
            j += 4;
        }
        while j < n {
            let k = row(j);
            let mut acc = _mm256_setzero_ps();
            for c in (0..hd).step_by(8) {
                acc = dot(acc, k, c);
            }
            *scores.get_unchecked_mut(j) = reduce8(acc) * scale;
            j += 1;
        }
    }
}

/// `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))` of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn reduce8(acc: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(acc);
    let hi = _mm256_extractf128_ps::<1>(acc);
    let v = _mm_add_ps(lo, hi);
    let w = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps::<1>(w, w)))
}

/// Attention output over an f16 value cache: `out[i] = sum_j probs[j] *
/// V_j[i]`, `j` in order from `out[i] = 0`, where `V_j` is the `out.len()`
/// halves at `values[j * stride ..]`; bit-identical to
/// [`generic::attn_values_f16`].
///
/// A shape error unless every row lies inside `values`; rows that are not
/// a non-zero multiple of 8 elements, or overlap, go to the generic code.
pub fn attn_values_f16(
    _cpu: Avx2,
    probs: &[f32],
    values: &[u16],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(out.len(), probs.len(), stride, values.len())?;
    if !attn_vector_ok(out.len(), probs.len(), stride) {
        return generic::attn_values_f16(probs, values, stride, out);
    }
    // SAFETY: rows `j < probs.len()` of `out.len()` halves at `j * stride`
    // lie inside `values` (checked above); `out.len()` is a multiple of 8;
    // the token proves AVX2/FMA/F16C.
    unsafe { values_f16(probs, values, stride, out) };
    Ok(())
}

/// Attention output over an f32 value cache: [`generic::attn_values_f32`]
/// (no vector code).
pub fn attn_values_f32(
    _cpu: Avx2,
    probs: &[f32],
    values: &[f32],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    generic::attn_values_f32(probs, values, stride, out)
}

/// # Safety
/// As checked by [`attn_values_f16`]; the CPU must implement AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn values_f16(probs: &[f32], values: &[u16], stride: usize, out: &mut [f32]) {
    // SAFETY: per the function contract every value row `j < probs.len()` of
    // `out.len()` (a multiple of 8) halves at `j * stride` lies inside
    // `values`, so the loads below are in bounds, and the stores stay
    // inside `out`; the CPU implements AVX2 and F16C.
    unsafe {
        let hd = out.len();
        let mut c = 0;
        // Up to 32 outputs (4 vectors) stay in registers over all rows.
        while c < hd {
            let w = (hd - c).min(32) / 8;
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut v = values.as_ptr().add(c);
            for &p in probs {
                let pv = _mm256_set1_ps(p);
                for (i, a) in acc.iter_mut().enumerate().take(w) {
                    let x = _mm256_cvtph_ps(_mm_loadu_si128(v.add(8 * i).cast()));
                    *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, x));
                }
                v = v.wrapping_add(stride);
            }
            for (i, a) in acc.iter().enumerate().take(w) {
                _mm256_storeu_ps(out.as_mut_ptr().add(c + 8 * i), *a);
            }
            c += 8 * w;
        }
    }
}
