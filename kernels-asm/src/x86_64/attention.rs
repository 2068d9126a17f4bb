//! Attention over an f16 or f32 key/value cache with AVX2: one text for
//! both element types ([`KvElem`]), which differ only in how 8 elements
//! become 8 f32 lanes.

use super::Avx2;
use crate::generic;
use crate::shape::{attn_shape, attn_vector_ok, ShapeError};
use core::arch::x86_64::*;

/// A cache element type: f16 bits (`u16`) or `f32`.
trait KvElem: Copy {
    /// Whether the elements are f16 bits, widened by `vcvtph2ps`.
    const HALF: bool;
}

impl KvElem for u16 {
    const HALF: bool = true;
}

impl KvElem for f32 {
    const HALF: bool = false;
}

/// The 8 cache elements at `p` as f32 lanes (f16 widens exactly).
///
/// # Safety
/// `p .. p + 8` must be readable; the CPU must implement AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load8<T: KvElem>(p: *const T) -> __m256 {
    // SAFETY: 8 readable elements at `p` (the function contract);
    // unaligned loads.
    unsafe {
        if T::HALF {
            _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
        } else {
            _mm256_loadu_ps(p.cast())
        }
    }
}

/// Attention scores over an f16 key cache: `scores[j] = dot8(q, K_j) * scale`
/// for `j < scores.len()`, where `K_j` is the `q.len()` halves at
/// `keys[j * stride ..]` and `dot8` is the 8-lane dot product of
/// docs/kernels.md (lane `i % 8` accumulates `q[i] * k[i]` in order, fused, then
/// `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`): bit-identical to
/// [`generic::attn_scores_f16`].
///
/// A shape error unless every row lies inside `keys`; rows that are not a
/// non-zero multiple of 8 elements, or overlap, go to the generic code.
pub fn attn_scores_f16(
    cpu: Avx2,
    q: &[f32],
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    scores_one(
        cpu,
        q,
        keys,
        stride,
        scale,
        scores,
        generic::attn_scores_f16,
    )
}

/// As [`attn_scores_f16`] over an f32 key cache
/// ([`generic::attn_scores_f32`]).
pub fn attn_scores_f32(
    cpu: Avx2,
    q: &[f32],
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    scores_one(
        cpu,
        q,
        keys,
        stride,
        scale,
        scores,
        generic::attn_scores_f32,
    )
}

/// The generic code's one-head scores: `(q, keys, stride, scale, scores)`.
type ScoresFn<T> = fn(&[f32], &[T], usize, f32, &mut [f32]) -> Result<(), ShapeError>;

/// One head's scores over either cache: [`scores_rows`] after the checks,
/// `fallback` (the generic twin) for shapes without vector code.
fn scores_one<T: KvElem>(
    _cpu: Avx2,
    q: &[f32],
    keys: &[T],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
    fallback: ScoresFn<T>,
) -> Result<(), ShapeError> {
    attn_shape(q.len(), scores.len(), stride, keys.len())?;
    if !attn_vector_ok(q.len(), scores.len(), stride) {
        return fallback(q, keys, stride, scale, scores);
    }
    // SAFETY: rows `j < scores.len()` of `q.len()` elements at `j * stride`
    // lie inside `keys` (checked above); `q.len()` is a multiple of 8; the
    // token proves AVX2/FMA/F16C.
    unsafe { scores_rows(q, keys, stride, scale, scores) };
    Ok(())
}

/// # Safety
/// As checked by [`scores_one`]; the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_rows<T: KvElem>(
    q: &[f32],
    keys: &[T],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) {
    // SAFETY: per the function contract every key row `j < scores.len()` of
    // `q.len()` (a multiple of 8) elements at `j * stride` lies inside `keys`,
    // so the loads below are in bounds, as are the stores to `scores[j]`;
    // the CPU implements AVX2, FMA and F16C.
    unsafe {
        let hd = q.len();
        let row = |j: usize| keys.as_ptr().add(j * stride);
        let dot = |acc: __m256, k: *const T, c: usize| {
            // SAFETY: `k + c .. k + c + 8` is inside a checked row, `q` holds
            // `c + 8` floats (c < hd, hd a multiple of 8).
            {
                let kv = load8(k.add(c));
                let qv = _mm256_loadu_ps(q.as_ptr().add(c));
                _mm256_fmadd_ps(qv, kv, acc)
            }
        };
        // Four rows at a time: four independent chains.
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
    cpu: Avx2,
    probs: &[f32],
    values: &[u16],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    values_one(cpu, probs, values, stride, out, generic::attn_values_f16)
}

/// As [`attn_values_f16`] over an f32 value cache
/// ([`generic::attn_values_f32`]).
pub fn attn_values_f32(
    cpu: Avx2,
    probs: &[f32],
    values: &[f32],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    values_one(cpu, probs, values, stride, out, generic::attn_values_f32)
}

/// The generic code's one-head outputs: `(probs, values, stride, out)`.
type ValuesFn<T> = fn(&[f32], &[T], usize, &mut [f32]) -> Result<(), ShapeError>;

/// One head's outputs over either cache: [`values_rows`] after the checks,
/// `fallback` (the generic twin) for shapes without vector code.
fn values_one<T: KvElem>(
    _cpu: Avx2,
    probs: &[f32],
    values: &[T],
    stride: usize,
    out: &mut [f32],
    fallback: ValuesFn<T>,
) -> Result<(), ShapeError> {
    attn_shape(out.len(), probs.len(), stride, values.len())?;
    if !attn_vector_ok(out.len(), probs.len(), stride) {
        return fallback(probs, values, stride, out);
    }
    // SAFETY: rows `j < probs.len()` of `out.len()` elements at `j * stride`
    // lie inside `values` (checked above); `out.len()` is a multiple of 8;
    // the token proves AVX2/FMA/F16C.
    unsafe { values_rows(probs, values, stride, out) };
    Ok(())
}

/// # Safety
/// As checked by [`values_one`]; the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn values_rows<T: KvElem>(probs: &[f32], values: &[T], stride: usize, out: &mut [f32]) {
    // SAFETY: per the function contract every value row `j < probs.len()` of
    // `out.len()` (a multiple of 8) elements at `j * stride` lies inside
    // `values`, so the loads below are in bounds, and the stores stay
    // inside `out`; the CPU implements AVX2, FMA and F16C.
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
                    let x = load8(v.add(8 * i));
                    *a = _mm256_fmadd_ps(pv, x, *a);
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

/// The most query heads the grouped kernels take in one pass (more are
/// taken in passes of this many).
const MAX_GROUP: usize = 8;

/// The scores of `heads` query heads over the same cached f16 keys (one GQA
/// group; [`generic::attn_scores_f16_heads`]): each key row is loaded and
/// converted once for up to 8 heads, each head's lanes accumulate and
/// reduce as in [`attn_scores_f16`], so every score has its bits. One or two
/// heads, and shapes without vector code, go head by head.
pub fn attn_scores_f16_heads(
    cpu: Avx2,
    qs: &[f32],
    heads: usize,
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    let one = generic::attn_scores_f16;
    scores_heads(cpu, qs, heads, keys, stride, scale, scores, one)
}

/// As [`attn_scores_f16_heads`] over an f32 key cache
/// ([`generic::attn_scores_f32_heads`]).
pub fn attn_scores_f32_heads(
    cpu: Avx2,
    qs: &[f32],
    heads: usize,
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    let one = generic::attn_scores_f32;
    scores_heads(cpu, qs, heads, keys, stride, scale, scores, one)
}

/// The grouped scores over either cache; `one` is the generic one-head
/// twin, for shapes without vector code.
#[allow(clippy::too_many_arguments)]
fn scores_heads<T: KvElem>(
    cpu: Avx2,
    qs: &[f32],
    heads: usize,
    keys: &[T],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
    one: ScoresFn<T>,
) -> Result<(), ShapeError> {
    let (hd, n) = generic::scores_heads_shape(qs.len(), heads, keys.len(), stride, scores.len())?;
    if heads <= 2 || !attn_vector_ok(hd, n, stride) {
        return generic::scores_each_head(qs, (heads, hd, n), scores, |q, row| {
            scores_one(cpu, q, keys, stride, scale, row, one)
        });
    }
    let mut g0 = 0;
    while g0 < heads {
        let g = (heads - g0).min(MAX_GROUP);
        let q = &qs[g0 * hd..(g0 + g) * hd];
        let out = &mut scores[g0 * n..(g0 + g) * n];
        // SAFETY: rows `j < n` of `hd` elements at `j * stride` lie inside
        // `keys` (checked above); `q` holds `g` queries of `hd` floats and
        // `out` `g` rows of `n` scores (sliced above); `hd` is a non-zero
        // multiple of 8; the token proves AVX2/FMA/F16C.
        unsafe {
            match g {
                1 => scores_group::<1, T>(q, keys, stride, scale, n, out),
                2 => scores_group::<2, T>(q, keys, stride, scale, n, out),
                3 => scores_group::<3, T>(q, keys, stride, scale, n, out),
                4 => scores_group::<4, T>(q, keys, stride, scale, n, out),
                5 => scores_group::<5, T>(q, keys, stride, scale, n, out),
                6 => scores_group::<6, T>(q, keys, stride, scale, n, out),
                7 => scores_group::<7, T>(q, keys, stride, scale, n, out),
                _ => scores_group::<8, T>(q, keys, stride, scale, n, out),
            }
        }
        g0 += g;
    }
    Ok(())
}

/// `G` heads' scores, key row by key row: the row's 8-element chunks
/// converted once, each head's lane sums `acc + q * k` in chunk order, then
/// [`reduce8`]'s tree and the scale: [`scores_rows`]'s operations per score.
/// The heads' trees run side by side in one register ([`reduce_heads`]),
/// and 8 rows' results are transposed into 8 scores per head and stored
/// whole.
///
/// # Safety
/// `qs.len() >= G * hd` with `hd = qs.len() / G` a non-zero multiple of 8,
/// rows `j < n` of `hd` elements at `j * stride` inside `keys`, `out.len() >=
/// G * n`; the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_group<const G: usize, T: KvElem>(
    qs: &[f32],
    keys: &[T],
    stride: usize,
    scale: f32,
    n: usize,
    out: &mut [f32],
) {
    // SAFETY: per the function contract the rows read lie inside `keys`
    // and `qs`, and the stores `out[g * n + j .. + 8]` (`j + 8 <= n`) and
    // `out[g * n + j]` (`j < n`) stay inside `out`; the CPU implements
    // AVX2, FMA and F16C.
    unsafe {
        let hd = qs.len() / G;
        let scale = _mm256_set1_ps(scale);
        let o = out.as_mut_ptr();
        let whole = n / 8 * 8;
        for j0 in (0..whole).step_by(8) {
            // A loop, not `array::from_fn`: its closure would be compiled
            // apart (a call per row, results through memory).
            let mut rows = [_mm256_setzero_ps(); 8];
            for (i, row) in rows.iter_mut().enumerate() {
                *row = _mm256_mul_ps(scores_row::<G, T>(qs, hd, keys, (j0 + i) * stride), scale);
            }
            // Column `g`: head g's scores of rows j0..j0 + 8.
            for (g, column) in super::transpose8(rows).iter().enumerate().take(G) {
                _mm256_storeu_ps(o.add(g * n + j0), *column);
            }
        }
        for j in whole..n {
            let mut lanes = [0.0f32; 8];
            let row = _mm256_mul_ps(scores_row::<G, T>(qs, hd, keys, j * stride), scale);
            _mm256_storeu_ps(lanes.as_mut_ptr(), row);
            for (g, &v) in lanes.iter().enumerate().take(G) {
                *o.add(g * n + j) = v;
            }
        }
    }
}

/// One key row's unscaled scores for `G` heads, head `g` in lane `g` (the
/// lanes from `G` on are 0): the row's 8-element chunks converted once,
/// each head's lanes summing `acc + q * k` in chunk order, then
/// [`reduce_heads`].
///
/// # Safety
/// `qs.len() >= G * hd`, `hd` a multiple of 8, and the `hd` elements at
/// `keys[at..]` inside `keys`; the CPU must implement AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_row<const G: usize, T: KvElem>(
    qs: &[f32],
    hd: usize,
    keys: &[T],
    at: usize,
) -> __m256 {
    // SAFETY: per the function contract.
    unsafe {
        let (q, k) = (qs.as_ptr(), keys.as_ptr().add(at));
        let mut acc = [_mm256_setzero_ps(); 8];
        for c in (0..hd).step_by(8) {
            let kv = load8(k.add(c));
            for (g, a) in acc.iter_mut().enumerate().take(G) {
                let qv = _mm256_loadu_ps(q.add(g * hd + c));
                *a = _mm256_fmadd_ps(qv, kv, *a);
            }
        }
        reduce_heads(acc)
    }
}

/// [`reduce8`] of each of 8 accumulators at once: lane `g` of the result is
/// `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))` of `acc[g]`, each
/// addition with the operands [`reduce8`] adds.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn reduce_heads(acc: [__m256; 8]) -> __m256 {
    // Heads g and g + 4 share a register: lanes s_i + s_{i+4} of g, then of
    // g + 4.
    let half = |a: __m256, b: __m256| {
        _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(a, b),
            _mm256_permute2f128_ps::<0x31>(a, b),
        )
    };
    let p0 = half(acc[0], acc[4]);
    let p1 = half(acc[1], acc[5]);
    let p2 = half(acc[2], acc[6]);
    let p3 = half(acc[3], acc[7]);
    // (s0 + s4) + (s2 + s6) and (s1 + s5) + (s3 + s7) of two heads per
    // register half.
    let pair = |a: __m256, b: __m256| {
        _mm256_add_ps(
            _mm256_shuffle_ps::<0x44>(a, b),
            _mm256_shuffle_ps::<0xEE>(a, b),
        )
    };
    let q01 = pair(p0, p1);
    let q23 = pair(p2, p3);
    // The two halves of each tree: heads 0-3 in the low lanes, 4-7 high.
    _mm256_add_ps(
        _mm256_shuffle_ps::<0x88>(q01, q23),
        _mm256_shuffle_ps::<0xDD>(q01, q23),
    )
}

/// The outputs of `heads` query heads over the same cached f16 values (one
/// GQA group; [`generic::attn_values_f16_heads`]): each value chunk is
/// loaded and converted once for up to 8 heads, each output element sums
/// `p * v` over the rows in order as in [`attn_values_f16`], so it has its
/// bits. One or two heads, and shapes without vector code, go head by head.
#[allow(clippy::too_many_arguments)]
pub fn attn_values_f16_heads(
    cpu: Avx2,
    probs: &[f32],
    heads: usize,
    values: &[u16],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), ShapeError> {
    let one = generic::attn_values_f16;
    values_heads(
        cpu,
        probs,
        heads,
        values,
        stride,
        (hd, out_stride),
        out,
        one,
    )
}

/// As [`attn_values_f16_heads`] over an f32 value cache
/// ([`generic::attn_values_f32_heads`]).
#[allow(clippy::too_many_arguments)]
pub fn attn_values_f32_heads(
    cpu: Avx2,
    probs: &[f32],
    heads: usize,
    values: &[f32],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), ShapeError> {
    let one = generic::attn_values_f32;
    values_heads(
        cpu,
        probs,
        heads,
        values,
        stride,
        (hd, out_stride),
        out,
        one,
    )
}

/// The grouped outputs over either cache; `one` is the generic one-head
/// twin, for shapes without vector code.
#[allow(clippy::too_many_arguments)]
fn values_heads<T: KvElem>(
    cpu: Avx2,
    probs: &[f32],
    heads: usize,
    values: &[T],
    stride: usize,
    (hd, out_stride): (usize, usize),
    out: &mut [f32],
    one: ValuesFn<T>,
) -> Result<(), ShapeError> {
    let o = (hd, out.len(), out_stride);
    let n = generic::values_heads_shape(probs.len(), heads, values.len(), stride, o)?;
    if heads <= 2 || !attn_vector_ok(hd, n, stride) {
        return generic::values_each_head(probs, (heads, n, hd, out_stride), out, |p, row| {
            values_one(cpu, p, values, stride, row, one)
        });
    }
    let mut g0 = 0;
    while g0 < heads {
        let g = (heads - g0).min(MAX_GROUP);
        let p = &probs[g0 * n..(g0 + g) * n];
        let o = &mut out[g0 * out_stride..(g0 + g - 1) * out_stride + hd];
        // SAFETY: rows `j < n` of `hd` elements at `j * stride` lie inside
        // `values` (checked above); `p` holds `g` rows of `n` probabilities
        // and `o` `g` rows of `hd` outputs at `out_stride` (sliced above,
        // inside `out` as checked); `hd` is a non-zero multiple of 8; the
        // token proves AVX2/FMA/F16C.
        unsafe {
            match g {
                1 => values_group::<1, T>(p, values, stride, hd, o, out_stride),
                2 => values_group::<2, T>(p, values, stride, hd, o, out_stride),
                3 => values_group::<3, T>(p, values, stride, hd, o, out_stride),
                4 => values_group::<4, T>(p, values, stride, hd, o, out_stride),
                5 => values_group::<5, T>(p, values, stride, hd, o, out_stride),
                6 => values_group::<6, T>(p, values, stride, hd, o, out_stride),
                7 => values_group::<7, T>(p, values, stride, hd, o, out_stride),
                _ => values_group::<8, T>(p, values, stride, hd, o, out_stride),
            }
        }
        g0 += g;
    }
    Ok(())
}

/// Value rows per block of [`values_group`]: a block's rows (128 bytes each
/// for a 64-element f16 head) stay in L1 while every head and column of
/// the block passes over them.
const VALUE_ROWS_BLOCK: usize = 64;

/// `G` heads' outputs: blocks of [`VALUE_ROWS_BLOCK`] value rows, each
/// swept by [`values_tile`]s of up to 2 heads x 32 columns, the
/// accumulators kept in `out` between blocks. Each output element is still
/// `acc + p * v` over the rows in order from zero: [`values_rows`]'s
/// operations per output element.
///
/// # Safety
/// `probs.len() == G * n` for some `n`, rows `j < n` of `hd` elements at `j *
/// stride` inside `values`, `hd` a non-zero multiple of 8, `out.len() >= (G
/// - 1) * out_stride + hd`; the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn values_group<const G: usize, T: KvElem>(
    probs: &[f32],
    values: &[T],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    // SAFETY: per the function contract the tiles read inside `probs` and
    // the checked value rows, and write inside `out`; the CPU implements
    // AVX2, FMA and F16C.
    unsafe {
        let n = probs.len() / G;
        // Zeroed through `out` before the raw pointer is taken from it (a
        // later use of `out` would invalidate the pointer).
        for g in 0..G {
            out[g * out_stride..g * out_stride + hd].fill(0.0);
        }
        let (p, v, o) = (probs.as_ptr(), values.as_ptr(), out.as_mut_ptr());
        for j0 in (0..n).step_by(VALUE_ROWS_BLOCK) {
            let rows = (n - j0).min(VALUE_ROWS_BLOCK);
            let mut c = 0;
            while c < hd {
                let wide = hd - c >= 32;
                let mut g = 0;
                while g < G {
                    let pg = p.add(g * n + j0);
                    let vc = v.add(j0 * stride + c);
                    let og = o.add(g * out_stride + c);
                    let pair = G - g >= 2;
                    match (pair, wide) {
                        (true, true) => {
                            values_tile::<2, 4, T>(pg, n, vc, stride, rows, og, out_stride)
                        }
                        (true, false) => {
                            values_tile::<2, 1, T>(pg, n, vc, stride, rows, og, out_stride)
                        }
                        (false, true) => {
                            values_tile::<1, 4, T>(pg, n, vc, stride, rows, og, out_stride)
                        }
                        (false, false) => {
                            values_tile::<1, 1, T>(pg, n, vc, stride, rows, og, out_stride)
                        }
                    }
                    g += if pair { 2 } else { 1 };
                }
                c += if wide { 32 } else { 8 };
            }
        }
    }
}

/// `Q` heads x `C` 8-column chunks of outputs over `rows` value rows: the
/// accumulators loaded from `out`, `acc + p * v` row by row, stored back.
///
/// # Safety
/// `p + h * n + j` readable for `h < Q`, `j < rows`; `v + j * stride + 8 *
/// C` readable for `j < rows`; `out + h * out_stride + 8 * C` writable for
/// `h < Q`; the CPU must implement AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn values_tile<const Q: usize, const C: usize, T: KvElem>(
    p: *const f32,
    n: usize,
    v: *const T,
    stride: usize,
    rows: usize,
    out: *mut f32,
    out_stride: usize,
) {
    // SAFETY: per the function contract.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); C]; Q];
        for (h, a) in acc.iter_mut().enumerate() {
            for (k, a) in a.iter_mut().enumerate() {
                *a = _mm256_loadu_ps(out.add(h * out_stride + 8 * k));
            }
        }
        for j in 0..rows {
            let row = v.add(j * stride);
            let mut x = [_mm256_setzero_ps(); C];
            for (k, x) in x.iter_mut().enumerate() {
                *x = load8(row.add(8 * k));
            }
            for (h, a) in acc.iter_mut().enumerate() {
                let pv = _mm256_set1_ps(*p.add(h * n + j));
                for (a, x) in a.iter_mut().zip(&x) {
                    *a = _mm256_fmadd_ps(pv, *x, *a);
                }
            }
        }
        for (h, a) in acc.iter().enumerate() {
            for (k, a) in a.iter().enumerate() {
                _mm256_storeu_ps(out.add(h * out_stride + 8 * k), *a);
            }
        }
    }
}
