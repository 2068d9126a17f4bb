//! Q8_0: 32 weights in 34 bytes, `d: f16 LE` then 32 x `i8`; `x = d * q`.
//!
//! The quantizer is ggml's `quantize_row_q8_0_ref`: `d = max|x| / 127`,
//! `q = roundf(x / d)` (halves away from zero), computed as `x * (1 / d)` in f32.

use super::f16::f16_to_f32;
use super::{blocks_in, QK};
use crate::error::{check_len, Error};

/// Bytes of one Q8_0 block.
pub use kestrel_kernels::layout::Q8_0_BLOCK_BYTES as BLOCK_BYTES;

/// One Q8_0 block, unpacked: the f16 scale bits and 32 signed quants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockQ8_0 {
    /// The scale, as f16 bits.
    pub d: u16,
    /// The quants.
    pub qs: [i8; QK],
}

impl BlockQ8_0 {
    /// The all-zero block.
    pub const ZERO: BlockQ8_0 = BlockQ8_0 { d: 0, qs: [0; QK] };

    /// Quantizes 32 values exactly as ggml's reference quantizer does
    /// ([`kestrel_kernels::generic::quantize_block_q8_0`], which the
    /// activation quantizer uses too).
    pub fn quantize(x: &[f32; QK]) -> BlockQ8_0 {
        let mut qs = [0i8; QK];
        let d = kestrel_kernels::generic::quantize_block_q8_0(x, &mut qs);
        BlockQ8_0 { d, qs }
    }

    /// The scale as f32.
    #[inline]
    pub fn scale(&self) -> f32 {
        f16_to_f32(self.d)
    }

    /// The block in GGUF's 34-byte form.
    pub fn to_bytes(&self) -> [u8; BLOCK_BYTES] {
        let mut out = [0u8; BLOCK_BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        for (o, &q) in out[2..].iter_mut().zip(&self.qs) {
            *o = q as u8;
        }
        out
    }

    /// Reads a block from its 34-byte form.
    pub fn from_bytes(b: &[u8; BLOCK_BYTES]) -> BlockQ8_0 {
        let mut qs = [0i8; QK];
        for (q, &v) in qs.iter_mut().zip(&b[2..]) {
            *q = v as i8;
        }
        BlockQ8_0 {
            d: u16::from_le_bytes([b[0], b[1]]),
            qs,
        }
    }
}

/// Quantizes a row of `x.len()` values (a multiple of 32) into `out`.
pub fn quantize_row(x: &[f32], out: &mut [BlockQ8_0]) -> Result<(), Error> {
    let nb = blocks_in("q8_0 row", x.len())?;
    check_len("q8_0 output blocks", nb, out.len())?;
    for (chunk, block) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let mut a = [0.0f32; QK];
        a.copy_from_slice(chunk);
        *block = BlockQ8_0::quantize(&a);
    }
    Ok(())
}

/// Quantizes a row into GGUF's byte form (`x.len() / 32 * 34` bytes).
pub fn quantize_row_bytes(x: &[f32], out: &mut [u8]) -> Result<(), Error> {
    let nb = blocks_in("q8_0 row", x.len())?;
    check_len("q8_0 output bytes", nb * BLOCK_BYTES, out.len())?;
    for (chunk, o) in x.chunks_exact(QK).zip(out.chunks_exact_mut(BLOCK_BYTES)) {
        let mut a = [0.0f32; QK];
        a.copy_from_slice(chunk);
        o.copy_from_slice(&BlockQ8_0::quantize(&a).to_bytes());
    }
    Ok(())
}

/// Quantizes activations for the kernels: each 32-value block of `x` becomes
/// 32 quants in `qs` and one scale in `d`, exactly the contents of the Q8_0
/// block [`BlockQ8_0::quantize`] makes (the scale rounded to f16, stored as
/// f32 so the kernels need no conversion). `x` may hold several rows. The
/// scalar kernel: [`kestrel_kernels::generic::quantize_acts_q8_0`].
pub fn quantize_acts(x: &[f32], qs: &mut [i8], d: &mut [f32]) -> Result<(), Error> {
    Ok(kestrel_kernels::generic::quantize_acts_q8_0(x, qs, d)?)
}

/// Dequantizes GGUF-form Q8_0 bytes into `out` (`bytes.len() / 34 * 32` values).
pub fn dequantize_row_bytes(bytes: &[u8], out: &mut [f32]) -> Result<(), Error> {
    if !bytes.len().is_multiple_of(BLOCK_BYTES) {
        return Err(Error::SizeMismatch {
            what: "q8_0 bytes (a multiple of 34)",
            expected: bytes.len() / BLOCK_BYTES * BLOCK_BYTES,
            actual: bytes.len(),
        });
    }
    check_len(
        "q8_0 dequantized values",
        bytes.len() / BLOCK_BYTES * QK,
        out.len(),
    )?;
    for (b, o) in bytes
        .chunks_exact(BLOCK_BYTES)
        .zip(out.chunks_exact_mut(QK))
    {
        let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        for (v, &q) in o.iter_mut().zip(&b[2..]) {
            *v = (q as i8) as f32 * d;
        }
    }
    Ok(())
}

/// Dequantizes unpacked blocks into `out`.
pub fn dequantize_blocks(blocks: &[BlockQ8_0], out: &mut [f32]) -> Result<(), Error> {
    check_len("q8_0 dequantized values", blocks.len() * QK, out.len())?;
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.scale();
        for (v, &q) in o.iter_mut().zip(&b.qs) {
            *v = q as f32 * d;
        }
    }
    Ok(())
}

/// ggml's `vec_dot_q8_0_q8_0` reference: per block, the exact integer dot
/// times `d_a * d_b`, summed in block order.
pub fn vec_dot(a: &[BlockQ8_0], b: &[BlockQ8_0]) -> Result<f32, Error> {
    check_len("q8_0 vec_dot blocks", a.len(), b.len())?;
    let mut sum = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        let mut isum = 0i32;
        for (&p, &q) in x.qs.iter().zip(&y.qs) {
            isum += p as i32 * q as i32;
        }
        sum += isum as f32 * (x.scale() * y.scale());
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f16::f32_to_f16;

    #[test]
    fn zeros_and_extremes() {
        let b = BlockQ8_0::quantize(&[0.0; QK]);
        assert_eq!(b, BlockQ8_0::ZERO);
        let mut x = [0.0f32; QK];
        x[3] = -2.54;
        x[5] = 1.27;
        let b = BlockQ8_0::quantize(&x);
        assert_eq!(b.qs[3], -127);
        assert_eq!(b.qs[5], 64); // 63.5 rounds away from zero
        assert_eq!(f16_to_f32(b.d), f16_to_f32(f32_to_f16(2.54 / 127.0)));
    }

    #[test]
    fn bytes_round_trip() {
        let mut x = [0.0f32; QK];
        for (i, v) in x.iter_mut().enumerate() {
            *v = i as f32 - 15.5;
        }
        let b = BlockQ8_0::quantize(&x);
        assert_eq!(BlockQ8_0::from_bytes(&b.to_bytes()), b);
        let mut out = [0.0f32; QK];
        dequantize_row_bytes(&b.to_bytes(), &mut out).unwrap();
        for (o, v) in out.iter().zip(&x) {
            assert!((o - v).abs() <= b.scale() * 0.5 + 1e-6);
        }
    }

    #[test]
    fn rejects_bad_lengths() {
        let mut out = [BlockQ8_0::ZERO; 1];
        assert!(quantize_row(&[0.0; 31], &mut out).is_err());
        assert!(quantize_row(&[0.0; 64], &mut out).is_err());
        assert!(dequantize_row_bytes(&[0; 33], &mut [0.0; 32]).is_err());
    }
}
