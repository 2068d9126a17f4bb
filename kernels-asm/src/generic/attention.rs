//! Attention over a key/value cache of f16 or f32 elements.
//!
//! Row `j` of the cache is the head's elements at `j * stride`. Scores use
//! `dot8`, the 8-lane dot product (docs/kernels.md): lane `i % 8`
//! accumulates `q[i] * k[i]` in order, and the lanes are added as `((s0 +
//! s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`: the order 8-wide (AVX2) and
//! 2x4-wide (NEON) code follows naturally, so every kernel gives the same
//! bits.

use super::f16_to_f32;
use crate::shape::{attn_shape, ShapeError};

fn scores(q: &[f32], key: impl Fn(usize) -> f32, stride: usize, scale: f32, scores: &mut [f32]) {
    for (j, sc) in scores.iter_mut().enumerate() {
        let mut s = [0.0f32; 8];
        for (i, &qi) in q.iter().enumerate() {
            s[i % 8] += qi * key(j * stride + i);
        }
        *sc = (((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))) * scale;
    }
}

fn values(probs: &[f32], value: impl Fn(usize) -> f32, stride: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (j, &p) in probs.iter().enumerate() {
        for (i, o) in out.iter_mut().enumerate() {
            *o += p * value(j * stride + i);
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
