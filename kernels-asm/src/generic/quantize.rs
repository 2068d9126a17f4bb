//! Activation quantization: Q8_0 content (32-value blocks, the scale
//! rounded to f16) for the 32-block weight layouts, Q8_K (256-value blocks,
//! an f32 scale, the quants' sum per 32) for the k-quant layouts.

use super::{f16_to_f32, f32_to_f16};
use crate::layout::{QK, QK_K};
use crate::shape::{quantize_k_shape, quantize_shape, ShapeError};

/// Quantizes 32 values as ggml's `quantize_row_q8_0_ref` does: `d = max|x| /
/// 127` (NaNs skipped, as `f32::max` does), `q = roundf(x * (1 / d))`
/// (halves away from zero, `0` when `d` is 0), saturated to `i8` with NaN
/// giving 0. Writes the quants and returns `d` as f16 bits (nearest even).
pub fn quantize_block_q8_0(x: &[f32; QK], qs: &mut [i8; QK]) -> u16 {
    let mut amax = 0.0f32;
    for &v in x {
        amax = amax.max(libm::fabsf(v));
    }
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in qs.iter_mut().zip(x) {
        // |v * id| <= 127 up to rounding; `as` saturates (and maps NaN to 0).
        *q = libm::roundf(v * id) as i8;
    }
    f32_to_f16(d)
}

/// Quantizes activations for the GEMM kernels: each 32-value block of `x`
/// becomes 32 quants in `qs` and one scale in `d`, exactly the contents of
/// the Q8_0 block [`quantize_block_q8_0`] makes (the scale rounded to f16,
/// stored as f32 so the kernels need no conversion). `x` may hold several
/// rows.
pub fn quantize_acts_q8_0(x: &[f32], qs: &mut [i8], d: &mut [f32]) -> Result<(), ShapeError> {
    quantize_shape(x, qs, d)?;
    for ((chunk, q), s) in x
        .chunks_exact(QK)
        .zip(qs.chunks_exact_mut(QK))
        .zip(d.iter_mut())
    {
        let mut a = [0.0f32; QK];
        a.copy_from_slice(chunk);
        let mut block = [0i8; QK];
        let bits = quantize_block_q8_0(&a, &mut block);
        q.copy_from_slice(&block);
        *s = f16_to_f32(bits);
    }
    Ok(())
}

/// Quantizes activations for the k-quant kernels (Q8_K): each 256-value
/// block of `x` gets one scale `d = max|x| / 127` kept in f32 (NaNs skipped,
/// as `f32::max` does), its quants `q = roundf(x * (1 / d))` (halves away
/// from zero, `0` when `d` is 0, saturated to `i8`, NaN giving 0), and for
/// each 32 of them their exact sum in `sums` (at most 32 x 127 in
/// magnitude). `x` may hold several rows, each a multiple of 256 long.
///
/// * `x`: `n` values (`n` a multiple of 256); `qs`: `n` quants;
/// * `d`: `n / 256` scales; `sums`: `n / 32` sums.
pub fn quantize_acts_q8_k(
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    sums: &mut [i16],
) -> Result<(), ShapeError> {
    quantize_k_shape(x, qs, d, sums)?;
    for (((chunk, q), s), sum) in x
        .chunks_exact(QK_K)
        .zip(qs.chunks_exact_mut(QK_K))
        .zip(d.iter_mut())
        .zip(sums.chunks_exact_mut(QK_K / QK))
    {
        let mut amax = 0.0f32;
        for &v in chunk {
            amax = amax.max(libm::fabsf(v));
        }
        let scale = amax / 127.0;
        let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        for (qi, &v) in q.iter_mut().zip(chunk) {
            // |v * id| <= 127 up to rounding; `as` saturates (and maps NaN to 0).
            *qi = libm::roundf(v * id) as i8;
        }
        for (sj, block) in sum.iter_mut().zip(q.chunks_exact(QK)) {
            *sj = block.iter().map(|&v| v as i16).sum();
        }
        *s = scale;
    }
    Ok(())
}
