//! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K super-blocks, 4 rows
//! interleaved) with Q8_K activations: the specification of the
//! architecture kernels (docs/kernels.md, "Q5_Kx4").
//!
//! The order is Q4_Kx4's, the same code (`q4k.rs`, with `Q5`): per row and
//! super-block the exact `sumi = sum_j sc_j * isum_j` (the quants now
//! 0..31: nibble plus 16 x the `qh` bit) and `summ = sum_j m_j * asum_j`,
//! then `acc = acc + (d_w * d_a) * (sumi as f32)`,
//! `acc = acc - (dmin_w * d_a) * (summ as f32)`, no fused multiply-add.
//! Shapes as the Q4_Kx4 functions, with 704-byte super-blocks.

use super::gemm::gemm_k_groups;
use super::q4k::kx4_group_dot;
use crate::layout::{Q5KX4_BLOCK_BYTES, Q5KX4_ROWS};

/// The four rows of one Q5_Kx4 row group dotted with one Q8_K activation
/// row (`group`: `nb` super-blocks; `act_qs`: `nb * 256` quants; `act_d`:
/// `nb` scales; `act_sums`: `nb * 8` sums).
pub fn q5kx4_group_dot(
    group: &[u8],
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
) -> [f32; Q5KX4_ROWS] {
    kx4_group_dot::<true>(group, act_qs, act_d, act_sums)
}

forwarding_entry!(
    /// GEMV, Q5_Kx4 weights x one Q8_K activation row: `out[r] = W[r] . act`.
    ///
    /// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 704-byte super-blocks;
    /// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
    ///   `cols / 32` sums;
    /// * `out`: `rows` results.
    q8_k gemv gemv_q5_kx4_q8_k => gemm_q5_kx4_q8_k
);

forwarding_entry!(
    /// GEMM, Q5_Kx4 weights x `m` Q8_K activation rows: `out[t * rows + r] =
    /// W[r] . act[t]` (shapes as [`gemv_q5_kx4_q8_k`], `m` activation rows).
    q8_k gemm gemm_q5_kx4_q8_k => gemm_k_groups [Q5KX4_BLOCK_BYTES, kx4_group_dot::<true>]
);
