//! The scalar kernels: safe code on every target, and the specification
//! every architecture's kernels match bit for bit (docs/kernels.md).
//!
//! Per 32-weight block a quantized dot product is the exact integer sum of
//! weight times activation quants, converted to f32 and times `d_w * d_a`
//! (the f16 weight scale widened to f32, times the activation scale), added
//! to the row's sum blocks in order, with no fused multiply-add, as ggml's
//! `vec_dot_q4_0_q8_0` / `vec_dot_q8_0_q8_0` do. The float operations are
//! plain IEEE f32 in a fixed order.
//!
//! Every function has the name and the signature of its architecture twins
//! (`crate::aarch64`, `crate::x86_64`) without the capability token.

mod activation;
mod attention;
mod deltanet;
mod gemm;
mod k8;
mod matvec;
mod quantize;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use activation::softmax_max;
#[cfg(target_arch = "aarch64")]
pub(crate) use activation::softmax_scale;
pub use activation::{
    exp, exp_minus, gelu_tanh, gelu_tanh_in_place, silu, softmax, softmax_blocks, softmax_rows,
    softmax_rows_online, softmax_rows_with, swiglu_runs,
};
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use activation::{exp_offset, softmax_online_blocks};
#[cfg(target_arch = "x86_64")]
pub(crate) use activation::{GELU_CUBE, GELU_MINUS_2C};
pub use attention::{
    attn_scores_f16, attn_scores_f16_heads, attn_scores_f32, attn_scores_f32_heads,
    attn_values_f16, attn_values_f16_heads, attn_values_f32, attn_values_f32_heads,
};
pub use deltanet::delta_rule;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use deltanet::{delta_rule_columns, delta_rule_shape};
// Used by the x86_64 and aarch64 grouped-attention kernels only.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use attention::{
    scores_each_head, scores_heads_shape, values_each_head, values_heads_shape,
};
pub(crate) use gemm::{gemm_groups, gemm_k_groups, nibble_x4_group_dot};
pub(crate) use k8::k8_group_dot;
pub use matvec::{matvec_f16, matvec_f32};
pub use quantize::{quantize_acts_q8_0, quantize_acts_q8_k, quantize_block_q8_0};

/// f16 bits -> f32 (exact).
#[inline]
pub fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// f32 -> f16 bits, round to nearest even; overflow gives infinity.
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

/// Reads the little-endian f16 at `bytes[at..at + 2]` as f32.
#[inline]
pub fn read_f16(bytes: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
}
