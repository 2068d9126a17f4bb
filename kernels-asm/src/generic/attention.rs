//! Attention over a key/value cache of f16 or f32 elements.
//!
//! Row `j` of the cache is the head's elements at `j * stride`. Scores use
//! `dot8`, the 8-lane dot product (docs/kernels.md): lane `i % 8`
//! accumulates `q[i] * k[i]` in order with a fused multiply-add (one
//! rounding), and the lanes are added as `((s0 + s4) + (s2 + s6)) + ((s1 +
//! s5) + (s3 + s7))`: the order 8-wide (AVX2) and 2x4-wide (NEON) code
//! follows naturally, so every kernel gives the same bits. Outputs add
//! `p_j * v_j` in order of `j`, fused too. Fused, because a multiply-add is
//! one instruction on every target with vectors (`vfmadd`, `fmla`) where a
//! separate multiply and add are two: half the arithmetic instructions of
//! attention on a Cortex-A76.

use super::f16_to_f32;
use crate::shape::{attn_heads, attn_out_shape, attn_shape, ShapeError};

fn scores(q: &[f32], key: impl Fn(usize) -> f32, stride: usize, scale: f32, scores: &mut [f32]) {
    for (j, sc) in scores.iter_mut().enumerate() {
        let mut s = [0.0f32; 8];
        for (i, &qi) in q.iter().enumerate() {
            s[i % 8] = libm::fmaf(qi, key(j * stride + i), s[i % 8]);
        }
        *sc = (((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))) * scale;
    }
}

fn values(probs: &[f32], value: impl Fn(usize) -> f32, stride: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (j, &p) in probs.iter().enumerate() {
        for (i, o) in out.iter_mut().enumerate() {
            *o = libm::fmaf(p, value(j * stride + i), *o);
        }
    }
}

/// `scores[j] = dot8(q, K_j) * scale` for `j < scores.len()`, `K_j` the
/// `q.len()` f16 keys at `keys[j * stride ..]`.
pub fn attn_scores_f16(
    q: &[f32],
    keys: &[u16],
    stride: usize,
    scale: f32,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(q.len(), out.len(), stride, keys.len())?;
    scores(q, |at| f16_to_f32(keys[at]), stride, scale, out);
    Ok(())
}

/// As [`attn_scores_f16`] over an f32 key cache.
pub fn attn_scores_f32(
    q: &[f32],
    keys: &[f32],
    stride: usize,
    scale: f32,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(q.len(), out.len(), stride, keys.len())?;
    scores(q, |at| keys[at], stride, scale, out);
    Ok(())
}

/// `out[i] = sum_j probs[j] * V_j[i]`, `j` in order from `out[i] = 0`, `V_j`
/// the `out.len()` f16 values at `values[j * stride ..]`.
pub fn attn_values_f16(
    probs: &[f32],
    values_f16: &[u16],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(out.len(), probs.len(), stride, values_f16.len())?;
    values(probs, |at| f16_to_f32(values_f16[at]), stride, out);
    Ok(())
}

/// As [`attn_values_f16`] over an f32 value cache.
pub fn attn_values_f32(
    probs: &[f32],
    values_f32: &[f32],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(out.len(), probs.len(), stride, values_f32.len())?;
    values(probs, |at| values_f32[at], stride, out);
    Ok(())
}

/// Checks a grouped scores call ([`attn_scores_f16_heads`]) and returns
/// `(hd, n)`: each head's query length and score count.
pub(crate) fn scores_heads_shape(
    qs: usize,
    heads: usize,
    cache_len: usize,
    stride: usize,
    scores: usize,
) -> Result<(usize, usize), ShapeError> {
    let hd = attn_heads("attention queries (whole heads)", qs, heads)?;
    let n = attn_heads("attention scores (whole heads)", scores, heads)?;
    attn_shape(hd, n, stride, cache_len)?;
    Ok((hd, n))
}

/// Checks a grouped values call ([`attn_values_f16_heads`]) and returns
/// `n`: each head's probability count.
pub(crate) fn values_heads_shape(
    probs: usize,
    heads: usize,
    cache_len: usize,
    stride: usize,
    (hd, out, out_stride): (usize, usize, usize),
) -> Result<usize, ShapeError> {
    let n = attn_heads("attention probabilities (whole heads)", probs, heads)?;
    attn_out_shape(heads, hd, out_stride, out)?;
    attn_shape(hd, n, stride, cache_len)?;
    Ok(n)
}

/// Runs a one-head scores kernel `single(q, scores)` for each head of a
/// checked grouped call.
pub(crate) fn scores_each_head(
    qs: &[f32],
    (heads, hd, n): (usize, usize, usize),
    scores: &mut [f32],
    mut single: impl FnMut(&[f32], &mut [f32]) -> Result<(), ShapeError>,
) -> Result<(), ShapeError> {
    for g in 0..heads {
        single(&qs[g * hd..(g + 1) * hd], &mut scores[g * n..(g + 1) * n])?;
    }
    Ok(())
}

/// Runs a one-head values kernel `single(probs, out)` for each head of a
/// checked grouped call.
pub(crate) fn values_each_head(
    probs: &[f32],
    (heads, n, hd, out_stride): (usize, usize, usize, usize),
    out: &mut [f32],
    mut single: impl FnMut(&[f32], &mut [f32]) -> Result<(), ShapeError>,
) -> Result<(), ShapeError> {
    for g in 0..heads {
        let row = &mut out[g * out_stride..g * out_stride + hd];
        single(&probs[g * n..(g + 1) * n], row)?;
    }
    Ok(())
}

/// The scores of `heads` query heads over the same cached keys (the heads
/// of one GQA group): `qs` holds the heads' `hd`-element queries one after
/// the other, `scores` their `n` scores each (`scores[g * n + j]`), each
/// row the bits of [`attn_scores_f16`] for its query.
pub fn attn_scores_f16_heads(
    qs: &[f32],
    heads: usize,
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    let (hd, n) = scores_heads_shape(qs.len(), heads, keys.len(), stride, scores.len())?;
    scores_each_head(qs, (heads, hd, n), scores, |q, row| {
        attn_scores_f16(q, keys, stride, scale, row)
    })
}

/// As [`attn_scores_f16_heads`] over an f32 key cache.
pub fn attn_scores_f32_heads(
    qs: &[f32],
    heads: usize,
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    let (hd, n) = scores_heads_shape(qs.len(), heads, keys.len(), stride, scores.len())?;
    scores_each_head(qs, (heads, hd, n), scores, |q, row| {
        attn_scores_f32(q, keys, stride, scale, row)
    })
}

/// The outputs of `heads` query heads over the same cached values: `probs`
/// holds the heads' `n` probabilities one after the other, head `g`'s `hd`
/// outputs go to `out[g * out_stride ..]`, each row the bits of
/// [`attn_values_f16`] for its probabilities.
pub fn attn_values_f16_heads(
    probs: &[f32],
    heads: usize,
    values_f16: &[u16],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), ShapeError> {
    let o = (hd, out.len(), out_stride);
    let n = values_heads_shape(probs.len(), heads, values_f16.len(), stride, o)?;
    values_each_head(probs, (heads, n, hd, out_stride), out, |p, row| {
        attn_values_f16(p, values_f16, stride, row)
    })
}

/// As [`attn_values_f16_heads`] over an f32 value cache.
pub fn attn_values_f32_heads(
    probs: &[f32],
    heads: usize,
    values_f32: &[f32],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), ShapeError> {
    let o = (hd, out.len(), out_stride);
    let n = values_heads_shape(probs.len(), heads, values_f32.len(), stride, o)?;
    values_each_head(probs, (heads, n, hd, out_stride), out, |p, row| {
        attn_values_f32(p, values_f32, stride, row)
    })
}
