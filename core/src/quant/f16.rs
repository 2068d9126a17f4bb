//! IEEE half (f16) and bfloat16 conversions, round-to-nearest-even, as GGUF
//! writers (numpy `astype(float16)`, ggml `GGML_FP32_TO_FP16`) do.

use half::bf16;

/// The f16 conversions the kernels use (f32 -> f16 rounds to nearest even,
/// overflow gives infinity; f16 -> f32 is exact), and the little-endian f16
/// reader.
pub use kestrel_kernels::generic::{f16_to_f32, f32_to_f16, read_f16};

/// f32 -> bf16 bits, round to nearest even (NaN stays NaN).
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    bf16::from_f32(x).to_bits()
}

/// bf16 bits -> f32 (exact).
#[inline]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trip_and_rounding() {
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        // 1 + 2^-11 is exactly half way between 1 and 1 + 2^-10: ties to even (1.0).
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        // Smallest subnormal.
        assert_eq!(f16_to_f32(1), 5.960_464_5e-8);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
    }

    #[test]
    fn bf16_round_trip_and_rounding() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        // Half way between two bf16 values: ties to even.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
    }
}
