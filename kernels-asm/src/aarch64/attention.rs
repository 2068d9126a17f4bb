//! Attention over an f16 key/value cache with NEON (f32 caches go to the
//! generic code).

use super::Dotprod;
use crate::generic;
use crate::shape::{attn_shape, attn_vector_ok, ShapeError};
use core::arch::asm;

/// Attention scores over an f32 key cache: [`generic::attn_scores_f32`]
/// (no vector code).
pub fn attn_scores_f32(
    _cpu: Dotprod,
    q: &[f32],
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    generic::attn_scores_f32(q, keys, stride, scale, scores)
}

/// Attention output over an f32 value cache: [`generic::attn_values_f32`]
/// (no vector code).
pub fn attn_values_f32(
    _cpu: Dotprod,
    probs: &[f32],
    values: &[f32],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    generic::attn_values_f32(probs, values, stride, out)
}

/// Attention scores over an f16 key cache with NEON: `scores[j] =
/// dot8(q, K_j) * scale` for `j < scores.len()`, where `K_j` is the
/// `q.len()` halves at `keys[j * stride ..]` and `dot8` the 8-lane dot
/// product of docs/kernels.md; bit-identical to
/// [`generic::attn_scores_f16`].
///
/// A shape error unless every row lies inside `keys`; rows that are not a
/// non-zero multiple of 8 elements, or overlap, and builds without NEON
/// take the generic code.
pub fn attn_scores_f16(
    _cpu: Dotprod,
    q: &[f32],
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(q.len(), scores.len(), stride, keys.len())?;
    if !cfg!(target_feature = "neon") || !attn_vector_ok(q.len(), scores.len(), stride) {
        return generic::attn_scores_f16(q, keys, stride, scale, scores);
    }
    // SAFETY: rows `j < scores.len()` of `q.len()` halves at `j * stride`
    // lie inside `keys`, `q.len()` is a non-zero multiple of 8, `scores` is
    // non-empty (all checked above); the build targets NEON.
    unsafe {
        scores_f16(
            q.as_ptr(),
            q.len() / 8,
            keys.as_ptr(),
            stride * 2,
            scale,
            scores.as_mut_ptr(),
            scores.len(),
        )
    };
    Ok(())
}

/// # Safety
/// `q` must point to `chunks * 8` floats (`chunks >= 1`), `keys` to `n >= 1`
/// rows of `chunks * 8` halves spaced `stride_bytes` apart, `out` to `n`
/// writable floats.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn scores_f16(
    q: *const f32,
    chunks: usize,
    keys: *const u16,
    stride_bytes: usize,
    scale: f32,
    out: *mut f32,
    n: usize,
) {
    // SAFETY: per the contract: each row reads `chunks * 16` bytes from its
    // start (`keys + j * stride_bytes`) and `chunks * 32` bytes of `q`; one
    // float is stored per row, `n` rows. Only the listed registers are
    // written; no stack is used.
    //
    // Bit-exactness: v0 holds lanes 0-3 and v1 lanes 4-7 of the reference's
    // 8 partial sums; each chunk adds `q * k` with a separate `fmul` and
    // `fadd` (no fusion), `fcvtl`/`fcvtl2` widen f16 exactly. Then
    // v0 + v1 = (s0+s4, s1+s5, s2+s6, s3+s7), adding the upper pair gives
    // ((s0+s4)+(s2+s6), (s1+s5)+(s3+s7)), and `faddp` adds those two.
    unsafe {
        asm!(
            "2:",
            "mov {kp}, {row}",
            "mov {qp}, {q}",
            "mov {c}, {chunks}",
            "movi v0.4s, #0",
            "movi v1.4s, #0",
            "3:",
            "ld1 {{v2.8h}}, [{kp}], #16",
            "ld1 {{v4.4s, v5.4s}}, [{qp}], #32",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmul v3.4s, v4.4s, v3.4s",
            "fmul v2.4s, v5.4s, v2.4s",
            "fadd v0.4s, v0.4s, v3.4s",
            "fadd v1.4s, v1.4s, v2.4s",
            "subs {c}, {c}, #1",
            "b.ne 3b",
            "fadd v0.4s, v0.4s, v1.4s",
            "ext v1.16b, v0.16b, v0.16b, #8",
            "fadd v0.2s, v0.2s, v1.2s",
            "faddp s0, v0.2s",
            "fmul s0, s0, {scale:s}",
            "str s0, [{out}], #4",
            "add {row}, {row}, {stride}",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            row = inout(reg) keys => _,
            q = in(reg) q,
            chunks = in(reg) chunks,
            stride = in(reg) stride_bytes,
            scale = in(vreg) scale,
            out = inout(reg) out => _,
            n = inout(reg) n => _,
            kp = out(reg) _,
            qp = out(reg) _,
            c = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _,
            options(nostack),
        );
    }
}

/// Attention output over an f16 value cache with NEON: `out[i] = sum_j
/// probs[j] * V_j[i]`, `j` in order from `out[i] = 0`, where `V_j` is the
/// `out.len()` halves at `values[j * stride ..]`; bit-identical to
/// [`generic::attn_values_f16`].
///
/// A shape error unless every row lies inside `values`; rows that are not a
/// non-zero multiple of 8 elements, or overlap, and builds without NEON
/// take the generic code.
pub fn attn_values_f16(
    _cpu: Dotprod,
    probs: &[f32],
    values: &[u16],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    attn_shape(out.len(), probs.len(), stride, values.len())?;
    if !cfg!(target_feature = "neon") || !attn_vector_ok(out.len(), probs.len(), stride) {
        return generic::attn_values_f16(probs, values, stride, out);
    }
    // SAFETY: rows `j < probs.len()` of `out.len()` halves at `j * stride`
    // lie inside `values`, `out.len()` is a non-zero multiple of 8, `probs`
    // is non-empty (all checked above); the build targets NEON.
    unsafe {
        values_f16(
            probs.as_ptr(),
            probs.len(),
            values.as_ptr(),
            stride * 2,
            out.as_mut_ptr(),
            out.len() / 8,
        )
    };
    Ok(())
}

/// # Safety
/// `probs` must point to `n >= 1` floats, `values` to `n` rows of
/// `chunks * 8` halves spaced `stride_bytes` apart (`chunks >= 1`), `out` to
/// `chunks * 8` writable floats.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn values_f16(
    probs: *const f32,
    n: usize,
    values: *const u16,
    stride_bytes: usize,
    out: *mut f32,
    chunks: usize,
) {
    // SAFETY: per the contract: for each of the `chunks` 8-element columns,
    // the inner loop reads 16 bytes at `values + 16 * chunk + j *
    // stride_bytes` and one float of `probs` for each row `j < n`, then
    // stores 32 bytes of `out`. Only the listed registers are written; no
    // stack is used.
    //
    // Bit-exactness: each output lane starts at +0.0 and adds `p_j * v_j`
    // (separate `fmul` and `fadd`) for `j` in order, as the reference does.
    unsafe {
        asm!(
            "2:",
            "mov {vp}, {col}",
            "mov {pp}, {probs}",
            "mov {j}, {n}",
            "movi v0.4s, #0",
            "movi v1.4s, #0",
            "3:",
            "ld1 {{v2.8h}}, [{vp}], {stride}",
            "ld1r {{v4.4s}}, [{pp}], #4",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmul v3.4s, v4.4s, v3.4s",
            "fmul v2.4s, v4.4s, v2.4s",
            "fadd v0.4s, v0.4s, v3.4s",
            "fadd v1.4s, v1.4s, v2.4s",
            "subs {j}, {j}, #1",
            "b.ne 3b",
            "st1 {{v0.4s, v1.4s}}, [{out}], #32",
            "add {col}, {col}, #16",
            "subs {chunks}, {chunks}, #1",
            "b.ne 2b",
            col = inout(reg) values => _,
            probs = in(reg) probs,
            n = in(reg) n,
            stride = in(reg) stride_bytes,
            out = inout(reg) out => _,
            chunks = inout(reg) chunks => _,
            vp = out(reg) _,
            pp = out(reg) _,
            j = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            options(nostack),
        );
    }
}

/// The scores of `heads` query heads over the same cached f16 keys: each
/// head through [`attn_scores_f16`] (the bits of
/// [`generic::attn_scores_f16_heads`]).
pub fn attn_scores_f16_heads(
    cpu: Dotprod,
    qs: &[f32],
    heads: usize,
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    let (hd, n) = generic::scores_heads_shape(qs.len(), heads, keys.len(), stride, scores.len())?;
    generic::scores_each_head(qs, (heads, hd, n), scores, |q, row| {
        attn_scores_f16(cpu, q, keys, stride, scale, row)
    })
}

/// [`generic::attn_scores_f32_heads`] (no vector code).
pub fn attn_scores_f32_heads(
    _cpu: Dotprod,
    qs: &[f32],
    heads: usize,
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    generic::attn_scores_f32_heads(qs, heads, keys, stride, scale, scores)
}

/// The outputs of `heads` query heads over the same cached f16 values: each
/// head through [`attn_values_f16`] (the bits of
/// [`generic::attn_values_f16_heads`]).
#[allow(clippy::too_many_arguments)]
pub fn attn_values_f16_heads(
    cpu: Dotprod,
    probs: &[f32],
    heads: usize,
    values: &[u16],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), ShapeError> {
    let o = (hd, out.len(), out_stride);
    let n = generic::values_heads_shape(probs.len(), heads, values.len(), stride, o)?;
    generic::values_each_head(probs, (heads, n, hd, out_stride), out, |p, row| {
        attn_values_f16(cpu, p, values, stride, row)
    })
}

/// [`generic::attn_values_f32_heads`] (no vector code).
#[allow(clippy::too_many_arguments)]
pub fn attn_values_f32_heads(
    _cpu: Dotprod,
    probs: &[f32],
    heads: usize,
    values: &[f32],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), ShapeError> {
    generic::attn_values_f32_heads(probs, heads, values, stride, hd, out, out_stride)
}
