//! Q4_0: 32 weights in 18 bytes, `d: f16 LE` then 16 bytes of nibbles. Byte `j`
//! holds weight `j` (low nibble) and weight `j + 16` (high nibble);
//! `x = d * (nibble - 8)`.
//!
//! The quantizer is ggml's `quantize_row_q4_0_ref`: the value of largest
//! magnitude (first one on ties) gives `d = max / -8`, and
//! `nibble = min(15, trunc(x / d + 8.5))`, computed as `x * (1 / d)` in f32.
//! [`BlockQ4_0::quantize_weighted`] writes the same format with the scale
//! searched for the least weighted squared error; [`quantize_block_with`]
//! applies either to a block of a row.

use super::f16::{f16_to_f32, f32_to_f16};
use super::q8_0::BlockQ8_0;
use super::{blocks_in, Quantizer, QK};
use crate::error::{check_len, Error};

/// Bytes of one Q4_0 block.
pub use kestrel_kernels::layout::Q4_0_BLOCK_BYTES as BLOCK_BYTES;

/// One Q4_0 block: the f16 scale bits and the 16 nibble bytes, as in GGUF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockQ4_0 {
    /// The scale, as f16 bits.
    pub d: u16,
    /// Byte `j`: weight `j` in the low nibble, weight `j + 16` in the high one.
    pub qs: [u8; QK / 2],
}

impl BlockQ4_0 {
    /// Quantizes 32 values exactly as ggml's reference quantizer does.
    pub fn quantize(x: &[f32; QK]) -> BlockQ4_0 {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in x {
            if amax < libm::fabsf(v) {
                amax = libm::fabsf(v);
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0u8; QK / 2];
        for (j, q) in qs.iter_mut().enumerate() {
            // C's `(int8_t)(x + 8.5f)` truncates toward zero; the value is in
            // [0, 16.5] for finite inputs, and `as` saturates otherwise.
            let lo = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let hi = ((x[j + 16] * id + 8.5) as i8).min(15) as u8;
            *q = lo | (hi << 4);
        }
        BlockQ4_0 {
            d: f32_to_f16(d),
            qs,
        }
    }

    /// Quantizes 32 values with the scale searched for the least squared
    /// error `sum (x - d * q)^2` (in f64, `d` the stored f16 scale), never
    /// more than [`BlockQ4_0::quantize`]'s, which is the first candidate:
    /// [`BlockQ4_0::quantize_weighted`] with every weight 1.
    pub fn quantize_search(x: &[f32; QK]) -> BlockQ4_0 {
        Self::quantize_weighted(x, &[1.0; QK])
    }

    /// Quantizes 32 values with the scale searched for the least weighted
    /// squared error `sum w (x - d * q)^2` (in f64, `d` the stored f16
    /// scale; `w` the columns' importance, finite and >= 0), never more
    /// than [`BlockQ4_0::quantize`]'s, which is the first candidate.
    ///
    /// Each further candidate maps the largest magnitude `max` to `t`
    /// quantization steps, `t` in -9.0..=-7.0 and 6.5..=7.5 by 0.1 (ggml's
    /// scale is `t = -8`, whose refit is a candidate too): the values round
    /// to `q` in -8..=7 at `d = max / t`; the weighted least-squares scale
    /// for those `q`, `sum w x q / sum w q q`, is rounded to f16; the values
    /// are rounded again at that scale (the best `q` for it), and the
    /// candidate replaces the best so far only when its error is strictly
    /// smaller. Plain f32/f64 arithmetic in a fixed order: the same bytes on
    /// every architecture. A block with a non-finite value or weight, a
    /// negative weight, or all weights zero is quantized as ggml does.
    pub fn quantize_weighted(x: &[f32; QK], w: &[f32; QK]) -> BlockQ4_0 {
        let ggml = Self::quantize(x);
        let bad_weight = |v: &f32| !v.is_finite() || *v < 0.0;
        if x.iter().any(|v| !v.is_finite()) || w.iter().any(bad_weight) {
            return ggml;
        }
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in x {
            if amax < libm::fabsf(v) {
                amax = libm::fabsf(v);
                max = v;
            }
        }
        if amax == 0.0 {
            return ggml;
        }
        let mut best = ggml;
        let mut best_err = ggml.weighted_error(x, w);
        let steps = (0..=20)
            .map(|k| (k as f32 - 90.0) / 10.0)
            .chain((0..=10).map(|k| (k as f32 + 65.0) / 10.0));
        for t in steps {
            let Some(candidate) = Self::refit(x, w, max / t) else {
                continue;
            };
            let err = candidate.weighted_error(x, w);
            if err < best_err {
                best = candidate;
                best_err = err;
            }
        }
        best
    }

    /// The block for quants rounded at scale `d`, refitted: the weighted
    /// least-squares scale for them, rounded to f16, and the quants rounded
    /// again at that scale. `None` when the refit scale is zero or not
    /// finite.
    fn refit(x: &[f32; QK], w: &[f32; QK], d: f32) -> Option<BlockQ4_0> {
        let round = |v: f32, id: f32| libm::roundf(v * id).clamp(-8.0, 7.0);
        let id = 1.0 / d;
        let (mut sxq, mut sqq) = (0.0f32, 0.0f32);
        for (&v, &wj) in x.iter().zip(w) {
            let q = round(v, id);
            sxq += wj * v * q;
            sqq += wj * q * q;
        }
        if sqq == 0.0 {
            return None;
        }
        let h = f32_to_f16(sxq / sqq);
        let df = f16_to_f32(h);
        if df == 0.0 || !df.is_finite() {
            return None;
        }
        let id = 1.0 / df;
        let mut qs = [0u8; QK / 2];
        for (j, b) in qs.iter_mut().enumerate() {
            let lo = (round(x[j], id) as i8 + 8) as u8;
            let hi = (round(x[j + 16], id) as i8 + 8) as u8;
            *b = lo | (hi << 4);
        }
        Some(BlockQ4_0 { d: h, qs })
    }

    /// `sum (x - d * q)^2` over the block, in f64 (`d` the stored scale),
    /// the measure [`BlockQ4_0::quantize_search`] minimizes.
    pub fn squared_error(&self, x: &[f32; QK]) -> f64 {
        self.weighted_error(x, &[1.0; QK])
    }

    /// `sum w (x - d * q)^2` over the block, in f64, the measure
    /// [`BlockQ4_0::quantize_weighted`] minimizes.
    pub fn weighted_error(&self, x: &[f32; QK], w: &[f32; QK]) -> f64 {
        let d = self.scale() as f64;
        let mut e = 0.0f64;
        for (i, (&v, &wi)) in x.iter().zip(w).enumerate() {
            let r = v as f64 - d * self.quant(i) as f64;
            e += wi as f64 * r * r;
        }
        e
    }

    /// The scale as f32.
    #[inline]
    pub fn scale(&self) -> f32 {
        f16_to_f32(self.d)
    }

    /// Weight `i` (0..32) as a signed integer in -8..=7.
    #[inline]
    pub fn quant(&self, i: usize) -> i8 {
        let byte = self.qs[i % 16];
        let nibble = if i < 16 { byte & 0x0f } else { byte >> 4 };
        nibble as i8 - 8
    }

    /// The block in GGUF's 18-byte form.
    pub fn to_bytes(&self) -> [u8; BLOCK_BYTES] {
        let mut out = [0u8; BLOCK_BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..].copy_from_slice(&self.qs);
        out
    }

    /// Reads a block from its 18-byte form.
    pub fn from_bytes(b: &[u8; BLOCK_BYTES]) -> BlockQ4_0 {
        let mut qs = [0u8; QK / 2];
        qs.copy_from_slice(&b[2..]);
        BlockQ4_0 {
            d: u16::from_le_bytes([b[0], b[1]]),
            qs,
        }
    }
}

/// Quantizes a row into GGUF's byte form (`x.len() / 32 * 18` bytes) with
/// ggml's quantizer.
pub fn quantize_row_bytes(x: &[f32], out: &mut [u8]) -> Result<(), Error> {
    quantize_row_bytes_with(Quantizer::Ggml, x, None, out)
}

/// Quantizes a row into GGUF's byte form with the given quantizer
/// ([`quantize_block_with`] on each block, the row's mean square computed
/// once); `importance`: one weight per value of `x`, its column's.
pub fn quantize_row_bytes_with(
    q: Quantizer,
    x: &[f32],
    importance: Option<&[f32]>,
    out: &mut [u8],
) -> Result<(), Error> {
    let nb = blocks_in("q4_0 row", x.len())?;
    check_len("q4_0 output bytes", nb * BLOCK_BYTES, out.len())?;
    if let Some(w) = importance {
        check_len("q4_0 importance values", x.len(), w.len())?;
    }
    let ms = mean_square(x);
    for (b, (chunk, o)) in x
        .chunks_exact(QK)
        .zip(out.chunks_exact_mut(BLOCK_BYTES))
        .enumerate()
    {
        let mut a = [0.0f32; QK];
        a.copy_from_slice(chunk);
        let w = importance.map(|w| &w[b * QK..(b + 1) * QK]);
        o.copy_from_slice(&quantize_block_with(q, &a, ms, w)?.to_bytes());
    }
    Ok(())
}

/// The mean square of a row's values (f32, summed in order): the `s` of
/// [`search_weights`].
pub fn mean_square(row: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for &v in row {
        sum += v * v;
    }
    sum / row.len().max(1) as f32
}

/// The weight of each value in the error the search minimizes:
/// `sqrt(s + x^2)`, `s` the row's mean square (the large values of a row
/// weigh more: they dominate its dot products; ggml's imatrix quantizers
/// weigh the same way), times the column's importance (the mean square of
/// what it multiplies, from a calibration text) when there is one.
pub fn search_weights(
    x: &[f32; QK],
    row_mean_square: f32,
    importance: Option<&[f32; QK]>,
) -> [f32; QK] {
    let mut w = [0.0f32; QK];
    for (j, o) in w.iter_mut().enumerate() {
        let magnitude = libm::sqrtf(row_mean_square + x[j] * x[j]);
        *o = match importance {
            Some(c) => c[j] * magnitude,
            None => magnitude,
        };
    }
    w
}

/// Quantizes one block of a row whose mean square is `row_mean_square`:
/// ggml's block, or the search's for the least weighted squared error
/// ([`search_weights`], [`BlockQ4_0::quantize_weighted`]); `importance`,
/// for the search only, is the block's 32 column importances.
pub fn quantize_block_with(
    q: Quantizer,
    x: &[f32; QK],
    row_mean_square: f32,
    importance: Option<&[f32]>,
) -> Result<BlockQ4_0, Error> {
    let importance = match importance {
        None => None,
        Some(_) if q == Quantizer::Ggml => {
            return Err(Error::Unsupported {
                what: "importance with the ggml quantizer (it does not search)",
                value: 0,
            })
        }
        Some(c) => Some(<&[f32; QK]>::try_from(c).map_err(|_| Error::SizeMismatch {
            what: "q4_0 block importance values",
            expected: QK,
            actual: c.len(),
        })?),
    };
    Ok(match q {
        Quantizer::Ggml => BlockQ4_0::quantize(x),
        Quantizer::Search => {
            BlockQ4_0::quantize_weighted(x, &search_weights(x, row_mean_square, importance))
        }
    })
}

/// Dequantizes GGUF-form Q4_0 bytes into `out` (`bytes.len() / 18 * 32` values).
pub fn dequantize_row_bytes(bytes: &[u8], out: &mut [f32]) -> Result<(), Error> {
    if !bytes.len().is_multiple_of(BLOCK_BYTES) {
        return Err(Error::SizeMismatch {
            what: "q4_0 bytes (a multiple of 18)",
            expected: bytes.len() / BLOCK_BYTES * BLOCK_BYTES,
            actual: bytes.len(),
        });
    }
    check_len(
        "q4_0 dequantized values",
        bytes.len() / BLOCK_BYTES * QK,
        out.len(),
    )?;
    for (b, o) in bytes
        .chunks_exact(BLOCK_BYTES)
        .zip(out.chunks_exact_mut(QK))
    {
        let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        for j in 0..QK / 2 {
            o[j] = ((b[2 + j] & 0x0f) as i32 - 8) as f32 * d;
            o[j + 16] = ((b[2 + j] >> 4) as i32 - 8) as f32 * d;
        }
    }
    Ok(())
}

/// ggml's `vec_dot_q4_0_q8_0` reference: per block, the exact integer dot
/// times `d_w * d_a`, summed in block order.
pub fn vec_dot_q8_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> Result<f32, Error> {
    check_len("q4_0 vec_dot blocks", w.len(), a.len())?;
    let mut sum = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut isum = 0i32;
        for i in 0..QK {
            isum += x.quant(i) as i32 * y.qs[i] as i32;
        }
        sum += isum as f32 * (x.scale() * y.scale());
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_magnitude_sets_the_scale() {
        let mut x = [0.0f32; QK];
        x[0] = 1.0;
        x[7] = -4.0; // first largest magnitude: d = -4 / -8 = 0.5
        x[9] = 4.0;
        let b = BlockQ4_0::quantize(&x);
        assert_eq!(b.scale(), 0.5);
        assert_eq!(b.quant(7), -8);
        assert_eq!(b.quant(9), 7); // 4 / 0.5 + 8.5 = 16.5 -> 16 -> clamped to 15
        assert_eq!(b.quant(0), 2);
        assert_eq!(b.quant(31), 0);
    }

    #[test]
    fn zeros() {
        let b = BlockQ4_0::quantize(&[0.0; QK]);
        assert_eq!(b.d, 0x8000); // 0 / -8 = -0.0, as ggml writes it
        assert_eq!(b.qs, [0x88; 16]);
        assert_eq!(BlockQ4_0::from_bytes(&b.to_bytes()), b);
    }
}
