//! Attention over the f16 key/value cache with NEON (one head, and the
//! heads of a GQA group in passes of 4 and 2), and over an f32 cache
//! (`--kv-f32`) one head at a time.

use super::Dotprod;
use crate::generic;
use crate::shape::{attn_shape, attn_vector_ok, ShapeError};
use core::arch::asm;

/// Defines a one-head scores kernel `$name` over cached elements `$elem`
/// whose key chunk (8 elements) the `$load` lines bring into `v2` (lanes
/// 0-3) and `v3` (lanes 4-7) as f32, advancing `{kp}` by one chunk.
///
/// The kernel's contract (`# Safety`): `q` must point to `chunks * 8`
/// floats (`chunks >= 1`), `keys` to `n >= 1` rows of `chunks * 8`
/// elements spaced `stride_bytes` apart, `out` to `n` writable floats.
macro_rules! one_head_scores_kernel {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $($load:literal),+ $(,)?) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// See [`one_head_scores_kernel`].
        #[inline(never)]
        #[target_feature(enable = "neon")]
        unsafe fn $name(
            q: *const f32,
            chunks: usize,
            keys: *const $elem,
            stride_bytes: usize,
            scale: f32,
            out: *mut f32,
            n: usize,
        ) {
            // SAFETY: per the contract: each row reads one chunk of keys
            // per step, `chunks` steps from its start (`keys + j *
            // stride_bytes`), and `chunks * 32` bytes of `q`; one float is
            // stored per row, `n` rows. Only the listed registers are
            // written; no stack is used.
            //
            // Bit-exactness: v0 holds lanes 0-3 and v1 lanes 4-7 of the
            // reference's 8 partial sums; each chunk adds `q * k` with one
            // `fmla` (fused, as the reference's `fmaf`); f16 keys widen
            // exactly. Then v0 + v1 = (s0+s4, s1+s5, s2+s6, s3+s7), adding
            // the upper pair gives ((s0+s4)+(s2+s6), (s1+s5)+(s3+s7)), and
            // `faddp` adds those two.
            unsafe {
                asm!(
                    "2:",
                    "mov {kp}, {row}",
                    "mov {qp}, {q}",
                    "mov {c}, {chunks}",
                    "movi v0.4s, #0",
                    "movi v1.4s, #0",
                    "3:",
                    $($load,)+
                    "ld1 {{v4.4s, v5.4s}}, [{qp}], #32",
                    "fmla v0.4s, v4.4s, v2.4s",
                    "fmla v1.4s, v5.4s, v3.4s",
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
    };
}

/// Attention scores over an f32 key cache with NEON: [`attn_scores_f16`]'s
/// operations on keys that need no widening; bit-identical to
/// [`generic::attn_scores_f32`]. Shapes without vector code take the
/// generic code.
pub fn attn_scores_f32(
    _cpu: Dotprod,
    q: &[f32],
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    let generic = generic::attn_scores_f32;
    // SAFETY: `scores_f32` reads rows of `chunks * 8` floats (its contract).
    unsafe { one_head_scores(q, keys, stride, scale, scores, generic, scores_f32) }
}

one_head_scores_kernel!(
    /// The one-head scores kernel over f32 keys: each chunk's 8 keys loaded
    /// as they are.
    scores_f32,
    f32,
    "ld1 {{v2.4s, v3.4s}}, [{kp}], #32",
);

/// Attention output over an f32 value cache with NEON: [`attn_values_f16`]'s
/// operations on values that need no widening; bit-identical to
/// [`generic::attn_values_f32`]. Shapes without vector code take the
/// generic code.
pub fn attn_values_f32(
    _cpu: Dotprod,
    probs: &[f32],
    values: &[f32],
    stride: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let generic = generic::attn_values_f32;
    // SAFETY: `values_f32` reads rows of `chunks * 8` floats (its contract).
    unsafe { one_head_values(probs, values, stride, out, generic, values_f32) }
}

/// # Safety
/// `probs` must point to `n >= 1` floats, `values` to `n` rows of
/// `chunks * 8` floats spaced `stride_bytes` apart (`chunks >= 1`), `out` to
/// `chunks * 8` writable floats.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn values_f32(
    probs: *const f32,
    n: usize,
    values: *const f32,
    stride_bytes: usize,
    out: *mut f32,
    chunks: usize,
) {
    // SAFETY: per the contract: for each of the `chunks` 8-element columns,
    // the inner loop reads 32 bytes at `values + 32 * chunk + j *
    // stride_bytes` and one float of `probs` for each row `j < n`, then
    // stores 32 bytes of `out`. Only the listed registers are written; no
    // stack is used.
    //
    // Bit-exactness: each output lane starts at +0.0 and adds `p_j * v_j`
    // (one fused `fmla`) for `j` in order, as the reference does, one row
    // at a time (`ld1r` of its probability).
    unsafe {
        asm!(
            "2:",
            "mov {vp}, {col}",
            "mov {pp}, {p}",
            "mov {j}, {n}",
            "movi v16.4s, #0",
            "movi v17.4s, #0",
            "3:",
            "ld1 {{v2.4s, v3.4s}}, [{vp}], {stride}",
            "ld1r {{v4.4s}}, [{pp}], #4",
            "fmla v16.4s, v4.4s, v2.4s",
            "fmla v17.4s, v4.4s, v3.4s",
            "subs {j}, {j}, #1",
            "b.ne 3b",
            "st1 {{v16.4s, v17.4s}}, [{o}], #32",
            "add {col}, {col}, #32",
            "subs {chunks}, {chunks}, #1",
            "b.ne 2b",
            col = inout(reg) values => _,
            p = in(reg) probs,
            n = in(reg) n,
            stride = in(reg) stride_bytes,
            o = inout(reg) out => _,
            chunks = inout(reg) chunks => _,
            vp = out(reg) _,
            pp = out(reg) _,
            j = out(reg) _,
            out("v2") _, out("v3") _, out("v4") _, out("v16") _, out("v17") _,
            options(nostack),
        );
    }
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
    let generic = generic::attn_scores_f16;
    // SAFETY: `scores_f16` reads rows of `chunks * 8` halves (its contract).
    unsafe { one_head_scores(q, keys, stride, scale, scores, generic, scores_f16) }
}

/// A one-head scores kernel over cached elements `E`: `kernel(q, chunks,
/// keys, stride_bytes, scale, out, n)`.
type ScoresKernel<E> = unsafe fn(*const f32, usize, *const E, usize, f32, *mut f32, usize);

/// The generic one-head scores over cached elements `E`.
type GenericScores<E> = fn(&[f32], &[E], usize, f32, &mut [f32]) -> Result<(), ShapeError>;

/// The generic one-head values over cached elements `E`.
type GenericValues<E> = fn(&[f32], &[E], usize, &mut [f32]) -> Result<(), ShapeError>;

/// A one-head values kernel over cached elements `E`: `kernel(probs, n,
/// values, stride_bytes, out, chunks)`.
type ValuesKernel<E> = unsafe fn(*const f32, usize, *const E, usize, *mut f32, usize);

/// The shape check and dispatch every one-head scores call shares: the
/// shape error of the generic code, the generic code itself for shapes
/// without vector code (and builds without NEON), else `kernel`.
///
/// # Safety
/// `kernel` must be safe to call for `n >= 1` rows of `chunks * 8`
/// elements `E` spaced `stride_bytes` apart, `chunks * 8` queries and `n`
/// outputs, and compute what `generic` does.
unsafe fn one_head_scores<E>(
    q: &[f32],
    keys: &[E],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
    generic: GenericScores<E>,
    kernel: ScoresKernel<E>,
) -> Result<(), ShapeError> {
    attn_shape(q.len(), scores.len(), stride, keys.len())?;
    if !cfg!(target_feature = "neon") || !attn_vector_ok(q.len(), scores.len(), stride) {
        return generic(q, keys, stride, scale, scores);
    }
    // SAFETY: rows `j < scores.len()` of `q.len()` elements at `j * stride`
    // lie inside `keys`, `q.len()` is a non-zero multiple of 8, `scores` is
    // non-empty (all checked above); `kernel` takes such shapes (the
    // function contract).
    unsafe {
        kernel(
            q.as_ptr(),
            q.len() / 8,
            keys.as_ptr(),
            stride * core::mem::size_of::<E>(),
            scale,
            scores.as_mut_ptr(),
            scores.len(),
        )
    };
    Ok(())
}

/// The shape check and dispatch every one-head values call shares, as
/// [`one_head_scores`].
///
/// # Safety
/// `kernel` must be safe to call for `n >= 1` rows of `chunks * 8`
/// elements `E` spaced `stride_bytes` apart, `n` probabilities and
/// `chunks * 8` outputs, and compute what `generic` does.
unsafe fn one_head_values<E>(
    probs: &[f32],
    values: &[E],
    stride: usize,
    out: &mut [f32],
    generic: GenericValues<E>,
    kernel: ValuesKernel<E>,
) -> Result<(), ShapeError> {
    attn_shape(out.len(), probs.len(), stride, values.len())?;
    if !cfg!(target_feature = "neon") || !attn_vector_ok(out.len(), probs.len(), stride) {
        return generic(probs, values, stride, out);
    }
    // SAFETY: rows `j < probs.len()` of `out.len()` elements at `j *
    // stride` lie inside `values`, `out.len()` is a non-zero multiple of 8,
    // `probs` is non-empty (all checked above); `kernel` takes such shapes
    // (the function contract).
    unsafe {
        kernel(
            probs.as_ptr(),
            probs.len(),
            values.as_ptr(),
            stride * core::mem::size_of::<E>(),
            out.as_mut_ptr(),
            out.len() / 8,
        )
    };
    Ok(())
}

one_head_scores_kernel!(
    /// The one-head scores kernel over f16 keys: each chunk's 8 halves
    /// loaded and widened (the high half first, so `v2` is read before it
    /// is overwritten).
    scores_f16,
    u16,
    "ld1 {{v2.8h}}, [{kp}], #16",
    "fcvtl2 v3.4s, v2.8h",
    "fcvtl v2.4s, v2.4h",
);

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
    let generic = generic::attn_values_f16;
    // SAFETY: `values_f16` reads rows of `chunks * 8` halves (its contract).
    unsafe { one_head_values(probs, values, stride, out, generic, values_f16) }
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
    // (one fused `fmla`) for `j` in order, as the reference does. Rows go
    // in blocks of 4: one `ld1` brings their 4 probabilities and `fmla` by
    // element takes each in turn (the same fused step as with `ld1r`), then
    // the last `n % 4` rows one at a time.
    unsafe {
        asm!(
            "2:",
            "mov {vp}, {col}",
            "mov {pp0}, {p0}",
            "movi v16.4s, #0",
            "movi v17.4s, #0",
            "lsr {j}, {n}, #2",       // blocks of 4 rows
            "cbz {j}, 4f",
            "3:",
            "ld1 {{v24.4s}}, [{pp0}], #16",  // 4 probabilities of head 0
            "ld1 {{v2.8h}}, [{vp}], {stride}",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmla v16.4s, v3.4s, v24.s[0]",
            "fmla v17.4s, v2.4s, v24.s[0]",
            "ld1 {{v2.8h}}, [{vp}], {stride}",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmla v16.4s, v3.4s, v24.s[1]",
            "fmla v17.4s, v2.4s, v24.s[1]",
            "ld1 {{v2.8h}}, [{vp}], {stride}",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmla v16.4s, v3.4s, v24.s[2]",
            "fmla v17.4s, v2.4s, v24.s[2]",
            "ld1 {{v2.8h}}, [{vp}], {stride}",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmla v16.4s, v3.4s, v24.s[3]",
            "fmla v17.4s, v2.4s, v24.s[3]",
            "subs {j}, {j}, #1",
            "b.ne 3b",
            "4:",
            "ands {j}, {n}, #3",      // the last n % 4 rows one at a time
            "b.eq 6f",
            "5:",
            "ld1 {{v2.8h}}, [{vp}], {stride}",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "ld1r {{v4.4s}}, [{pp0}], #4",
            "fmla v16.4s, v4.4s, v3.4s",
            "fmla v17.4s, v4.4s, v2.4s",
            "subs {j}, {j}, #1",
            "b.ne 5b",
            "6:",
            "st1 {{v16.4s, v17.4s}}, [{o0}], #32",
            "add {col}, {col}, #16",
            "subs {chunks}, {chunks}, #1",
            "b.ne 2b",
            col = inout(reg) values => _,
            p0 = in(reg) probs,
            n = in(reg) n,
            stride = in(reg) stride_bytes,
            o0 = inout(reg) out => _,
            chunks = inout(reg) chunks => _,
            vp = out(reg) _,
            pp0 = out(reg) _,
            j = out(reg) _,
            out("v2") _, out("v3") _, out("v4") _, out("v16") _, out("v17") _, out("v24") _,
            options(nostack),
        );
    }
}

/// The scores of `heads` query heads over the same cached f16 keys (one GQA
/// group; [`generic::attn_scores_f16_heads`]): heads in passes of 4 and 2
/// through [`scores_f16_x4`] / [`scores_f16_x2`], which load and widen each
/// key chunk once per pass, a last single head through [`scores_f16`];
/// every score with [`attn_scores_f16`]'s operations, so the same bits.
/// Shapes without vector code go head by head.
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
    if !cfg!(target_feature = "neon") || !attn_vector_ok(hd, n, stride) {
        return generic::scores_each_head(qs, (heads, hd, n), scores, |q, row| {
            attn_scores_f16(cpu, q, keys, stride, scale, row)
        });
    }
    let mut g0 = 0;
    while g0 < heads {
        let g = match heads - g0 {
            1 => 1,
            2 | 3 => 2,
            _ => 4,
        };
        let (q, out) = (qs[g0 * hd..].as_ptr(), scores[g0 * n..].as_mut_ptr());
        // SAFETY: heads g0..g0 + g have `hd` queries each at `q` and `n`
        // scores each at `out` (inside `qs` and `scores`, whose lengths
        // were checked for `heads` heads); rows `j < n` of `hd` halves at
        // `j * stride` lie inside `keys`; `hd` is a non-zero multiple of 8
        // and `n >= 1` (`attn_vector_ok`); the build targets NEON.
        unsafe {
            let (chunks, sb) = (hd / 8, stride * 2);
            match g {
                1 => scores_f16(q, chunks, keys.as_ptr(), sb, scale, out, n),
                2 => scores_f16_x2(q, chunks, keys.as_ptr(), sb, scale, out, n),
                _ => scores_f16_x4(q, chunks, keys.as_ptr(), sb, scale, out, n),
            }
        }
        g0 += g;
    }
    Ok(())
}

/// The scores of `heads` query heads over the same cached f32 keys
/// ([`generic::attn_scores_f32_heads`]): head by head through
/// [`attn_scores_f32`].
pub fn attn_scores_f32_heads(
    cpu: Dotprod,
    qs: &[f32],
    heads: usize,
    keys: &[f32],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> Result<(), ShapeError> {
    let (hd, n) = generic::scores_heads_shape(qs.len(), heads, keys.len(), stride, scores.len())?;
    generic::scores_each_head(qs, (heads, hd, n), scores, |q, row| {
        attn_scores_f32(cpu, q, keys, stride, scale, row)
    })
}

/// The outputs of `heads` query heads over the same cached f16 values (one
/// GQA group; [`generic::attn_values_f16_heads`]): heads in passes of 4 and
/// 2 through [`values_f16_x4`] / [`values_f16_x2`], which load and widen
/// each value chunk once per pass, a last single head through
/// [`values_f16`]; every output with [`attn_values_f16`]'s operations, so
/// the same bits. Shapes without vector code go head by head.
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
    if !cfg!(target_feature = "neon") || !attn_vector_ok(hd, n, stride) {
        return generic::values_each_head(probs, (heads, n, hd, out_stride), out, |p, row| {
            attn_values_f16(cpu, p, values, stride, row)
        });
    }
    let mut g0 = 0;
    while g0 < heads {
        let g = match heads - g0 {
            1 => 1,
            2 | 3 => 2,
            _ => 4,
        };
        let (p, o) = (
            probs[g0 * n..].as_ptr(),
            out[g0 * out_stride..].as_mut_ptr(),
        );
        // SAFETY: heads g0..g0 + g have `n` probabilities each at `p` and
        // `hd` outputs each at `o + i * out_stride` (inside `probs` and
        // `out`, whose lengths were checked for `heads` heads); rows `j <
        // n` of `hd` halves at `j * stride` lie inside `values`; `hd` is a
        // non-zero multiple of 8 and `n >= 1` (`attn_vector_ok`); the build
        // targets NEON.
        unsafe {
            let (chunks, sb) = (hd / 8, stride * 2);
            match g {
                1 => values_f16(p, n, values.as_ptr(), sb, o, chunks),
                2 => values_f16_x2(p, n, values.as_ptr(), sb, o, out_stride, chunks),
                _ => values_f16_x4(p, n, values.as_ptr(), sb, o, out_stride, chunks),
            }
        }
        g0 += g;
    }
    Ok(())
}

/// The outputs of `heads` query heads over the same cached f32 values
/// ([`generic::attn_values_f32_heads`]): head by head through
/// [`attn_values_f32`].
#[allow(clippy::too_many_arguments)]
pub fn attn_values_f32_heads(
    cpu: Dotprod,
    probs: &[f32],
    heads: usize,
    values: &[f32],
    stride: usize,
    hd: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), ShapeError> {
    let o = (hd, out.len(), out_stride);
    let n = generic::values_heads_shape(probs.len(), heads, values.len(), stride, o)?;
    generic::values_each_head(probs, (heads, n, hd, out_stride), out, |p, row| {
        attn_values_f32(cpu, p, values, stride, row)
    })
}

/// `$name`: the scores of `$heads` query heads (`$heads x chunks * 8`
/// floats at `q`, one head after the other) over the same `n` key rows:
/// [`scores_f16`]'s operations for each, each key chunk loaded and widened
/// once for all. Per head `h`: its query and output operand names and its
/// two accumulators `v$a`, `v$b` (lanes 0-3 and 4-7 of the reference's 8
/// partial sums).
#[rustfmt::skip]
macro_rules! scores_heads {
    ($name:ident, $heads:literal, $(($h:literal, $q:ident, $qp:ident, $o:ident, $a:literal, $b:literal)),+) => {
        #[doc = concat!("The scores of ", $heads, " query heads over the same key rows (`scores_heads!`).")]
        ///
        /// # Safety
        #[doc = concat!("`q` must point to `", $heads, " * chunks * 8` floats (`chunks >= 1`), `keys` to `n >= 1` rows of `chunks * 8` halves spaced `stride_bytes` apart, `out` to `", $heads, " * n` writable floats.")]
        #[inline(never)]
        #[target_feature(enable = "neon")]
        unsafe fn $name(
            q: *const f32,
            chunks: usize,
            keys: *const u16,
            stride_bytes: usize,
            scale: f32,
            out: *mut f32,
            n: usize,
        ) {
            // SAFETY: per the contract: each key row reads `chunks * 16` bytes from its start (`keys + j * stride_bytes`) and each query `chunks * 32` bytes; one float per row is stored for each query, at `out + h * n + j`. Only the listed registers are written; no stack is used.
            //
            // Bit-exactness: per query, its two accumulators hold lanes 0-3 and 4-7 of the reference's 8 partial sums, each chunk adding `q * k` with one fused `fmla`, then the reduction of [`scores_f16`]: the same operations per score; only the widened key chunk is shared.
            unsafe {
                asm!(
                    concat!(
                        "2:\n",
                        "mov {kp}, {row}\n",
                        $("mov {", stringify!($qp), "}, {", stringify!($q), "}\n",)+
                        "mov {c}, {chunks}\n",
                        $("movi v", $a, ".4s, #0\n", "movi v", $b, ".4s, #0\n",)+
                        "3:\n",
                        "ld1 {{v0.8h}}, [{kp}], #16\n",
                        "fcvtl v1.4s, v0.4h\n",
                        "fcvtl2 v0.4s, v0.8h\n",
                        $(
                            "ld1 {{v2.4s, v3.4s}}, [{", stringify!($qp), "}], #32\n",
                            "fmla v", $a, ".4s, v2.4s, v1.4s\n",
                            "fmla v", $b, ".4s, v3.4s, v0.4s\n",
                        )+
                        "subs {c}, {c}, #1\n",
                        "b.ne 3b\n",
                        $(
                            "fadd v", $a, ".4s, v", $a, ".4s, v", $b, ".4s\n",
                            "ext v", $b, ".16b, v", $a, ".16b, v", $a, ".16b, #8\n",
                            "fadd v", $a, ".2s, v", $a, ".2s, v", $b, ".2s\n",
                            "faddp s", $a, ", v", $a, ".2s\n",
                            "fmul s", $a, ", s", $a, ", {scale:s}\n",
                            "str s", $a, ", [{", stringify!($o), "}], #4\n",
                        )+
                        "add {row}, {row}, {stride}\n",
                        "subs {n}, {n}, #1\n",
                        "b.ne 2b\n",
                    ),
                    row = inout(reg) keys => _,
                    $($q = in(reg) q.add($h * chunks * 8),)+
                    chunks = in(reg) chunks,
                    stride = in(reg) stride_bytes,
                    scale = in(vreg) scale,
                    $($o = inout(reg) out.add($h * n) => _,)+
                    n = inout(reg) n => _,
                    kp = out(reg) _,
                    $($qp = out(reg) _,)+
                    c = out(reg) _,
                    // The accumulators of up to 4 heads (caller-saved: naming
                    // unused ones costs nothing).
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _,
                    out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                    out("v20") _, out("v21") _, out("v22") _, out("v23") _,
                    options(nostack),
                );
            }
        }
    };
}

/// `$name`: the outputs of `$heads` query heads (`$heads x n`
/// probabilities at `probs`, one head after the other) over the same `n`
/// value rows: [`values_f16`]'s operations for each, each value chunk
/// loaded and widened once for all; head `h`'s `chunks * 8` outputs at
/// `out + h * out_stride`. Per head: its probability and output operand
/// names, the register `v$p` of its 4 probabilities, its accumulators.
#[rustfmt::skip]
macro_rules! values_heads {
    ($name:ident, $heads:literal, $(($h:literal, $pr:ident, $pp:ident, $o:ident, $p:literal, $a:literal, $b:literal)),+) => {
        #[doc = concat!("The outputs of ", $heads, " query heads over the same value rows (`values_heads!`).")]
        ///
        /// # Safety
        #[doc = concat!("`probs` must point to `", $heads, " * n` floats (`n >= 1`), `values` to `n` rows of `chunks * 8` halves spaced `stride_bytes` apart (`chunks >= 1`), `out` to ", $heads, " rows of `chunks * 8` writable floats `out_stride` floats apart.")]
        #[inline(never)]
        #[target_feature(enable = "neon")]
        unsafe fn $name(
            probs: *const f32,
            n: usize,
            values: *const u16,
            stride_bytes: usize,
            out: *mut f32,
            out_stride: usize,
            chunks: usize,
        ) {
            // SAFETY: per the contract: for each of the `chunks` 8-element columns, the inner loop reads 16 bytes at `values + 16 * chunk + j * stride_bytes` and one float of each probability row for each `j < n`, then stores 32 bytes of each output row (`out + h * out_stride`). Only the listed registers are written; no stack is used.
            //
            // Bit-exactness: each output lane of each head starts at +0.0 and adds `p_j * v_j` (one fused `fmla`) for `j` in order, as [`values_f16`] does (rows in blocks of 4, the probabilities by element); only the widened value chunk is shared.
            unsafe {
                asm!(
                    concat!(
                        "2:\n",
                        "mov {vp}, {col}\n",
                        $("mov {", stringify!($pp), "}, {", stringify!($pr), "}\n",)+
                        $("movi v", $a, ".4s, #0\n", "movi v", $b, ".4s, #0\n",)+
                        "lsr {j}, {n}, #2\n", // blocks of 4 rows
                        "cbz {j}, 4f\n",
                        "3:\n",
                        $("ld1 {{v", $p, ".4s}}, [{", stringify!($pp), "}], #16\n",)+ // 4 probabilities of each head
                        values_heads!(@row "0" $(, $p, $a, $b)+),
                        values_heads!(@row "1" $(, $p, $a, $b)+),
                        values_heads!(@row "2" $(, $p, $a, $b)+),
                        values_heads!(@row "3" $(, $p, $a, $b)+),
                        "subs {j}, {j}, #1\n",
                        "b.ne 3b\n",
                        "4:\n",
                        "ands {j}, {n}, #3\n", // the last n % 4 rows one at a time
                        "b.eq 6f\n",
                        "5:\n",
                        "ld1 {{v2.8h}}, [{vp}], {stride}\n",
                        "fcvtl v3.4s, v2.4h\n",
                        "fcvtl2 v2.4s, v2.8h\n",
                        $(
                            "ld1r {{v4.4s}}, [{", stringify!($pp), "}], #4\n",
                            "fmla v", $a, ".4s, v4.4s, v3.4s\n",
                            "fmla v", $b, ".4s, v4.4s, v2.4s\n",
                        )+
                        "subs {j}, {j}, #1\n",
                        "b.ne 5b\n",
                        "6:\n",
                        $("st1 {{v", $a, ".4s, v", $b, ".4s}}, [{", stringify!($o), "}], #32\n",)+
                        "add {col}, {col}, #16\n",
                        "subs {chunks}, {chunks}, #1\n",
                        "b.ne 2b\n",
                    ),
                    col = inout(reg) values => _,
                    $($pr = in(reg) probs.add($h * n),)+
                    n = in(reg) n,
                    stride = in(reg) stride_bytes,
                    $($o = inout(reg) out.add($h * out_stride) => _,)+
                    chunks = inout(reg) chunks => _,
                    vp = out(reg) _,
                    $($pp = out(reg) _,)+
                    j = out(reg) _,
                    // The accumulators and probabilities of up to 4 heads
                    // (caller-saved: naming unused ones costs nothing).
                    out("v2") _, out("v3") _, out("v4") _,
                    out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                    out("v20") _, out("v21") _, out("v22") _, out("v23") _,
                    out("v24") _, out("v25") _, out("v26") _, out("v27") _,
                    options(nostack),
                );
            }
        }
    };
    // One value row of a block of 4: widened once, `fmla` by probability
    // lane `$lane` into every head's accumulators.
    (@row $lane:literal $(, $p:literal, $a:literal, $b:literal)+) => {
        concat!(
            "ld1 {{v2.8h}}, [{vp}], {stride}\n",
            "fcvtl v3.4s, v2.4h\n",
            "fcvtl2 v2.4s, v2.8h\n",
            $(
                "fmla v", $a, ".4s, v3.4s, v", $p, ".s[", $lane, "]\n",
                "fmla v", $b, ".4s, v2.4s, v", $p, ".s[", $lane, "]\n",
            )+
        )
    };
}

scores_heads!(
    scores_f16_x2,
    "2",
    (0, q0, qp0, o0, "16", "17"),
    (1, q1, qp1, o1, "18", "19")
);
scores_heads!(
    scores_f16_x4,
    "4",
    (0, q0, qp0, o0, "16", "17"),
    (1, q1, qp1, o1, "18", "19"),
    (2, q2, qp2, o2, "20", "21"),
    (3, q3, qp3, o3, "22", "23")
);
values_heads!(
    values_f16_x2,
    "2",
    (0, p0, pp0, o0, "24", "16", "17"),
    (1, p1, pp1, o1, "25", "18", "19")
);
values_heads!(
    values_f16_x4,
    "4",
    (0, p0, pp0, o0, "24", "16", "17"),
    (1, p1, pp1, o1, "25", "18", "19"),
    (2, p2, pp2, o2, "26", "20", "21"),
    (3, p3, pp3, o3, "27", "22", "23")
);
