//! GEMV and GEMM of Q5_0x4 / Q5_1x4 weights (GGUF Q5_0 / Q5_1 blocks, 4
//! rows interleaved, docs/kernels.md "Q5_0x4 and Q5_1x4") with Q8_0
//! activations: the specification the architecture kernels match bit for
//! bit.
//!
//! Shapes as the Q4_0x4 kernels: the weight is `rows x cols` in row groups
//! of 4 padded to whole groups; activations are `m` rows (`act_qs` `m x
//! cols` quants, `act_d` `m x cols/32` scales); the output is `m x rows`.

use super::gemm::gemm_groups;
use super::read_f16;
use crate::layout::{
    Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_1X4_BLOCK_BYTES, Q5_1X4_MINS, Q5_1X4_NIBBLES,
    QK,
};

/// The value `q - 16` (-16..=15) of weight `j` (0..32) of row `r` (0..4) in
/// one Q5_0x4 / Q5_1x4 super-block's quant bytes (`quants`: the 64 nibble
/// bytes, then the 16 plane bytes).
#[inline]
pub fn q5x4_value(quants: &[u8], r: usize, j: usize) -> i32 {
    let (p, k) = (j / 4, j % 4);
    let byte = quants[16 * (p % 4) + 4 * r + k];
    let nibble = if p < 4 { byte & 0x0f } else { byte >> 4 };
    let sign = (quants[64 + 4 * r + k] >> p) & 1;
    // The plane bit is the inverted fifth bit: q = nibble + 16 * (1 - sign).
    nibble as i32 - 16 * sign as i32
}

/// The four rows of one Q5_0x4 row group dotted with one activation row:
/// per block the exact integer `sum (q - 16) a`, then `acc += isum as f32 *
/// (d_w * d_a)`, blocks in order.
pub fn q5_0x4_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q5X4_ROWS] {
    let mut acc = [0.0f32; Q5X4_ROWS];
    let blocks = group
        .chunks_exact(Q5_0X4_BLOCK_BYTES)
        .zip(act_qs.chunks_exact(QK))
        .zip(act_d);
    for ((sb, a), &da) in blocks {
        let quants = &sb[Q5_0X4_NIBBLES..];
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            for (j, &aj) in a.iter().enumerate() {
                isum += q5x4_value(quants, r, j) * aj as i32;
            }
            *acc_r += isum as f32 * (read_f16(sb, 2 * r) * da);
        }
    }
    acc
}

forwarding_entry!(
    /// GEMV, Q5_0x4 weights x one Q8_0 activation row: `out[r] = W[r] . act`.
    ///
    /// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 88-byte super-blocks;
    /// * `act_qs`: `cols` quants; `act_d`: `cols / 32` scales;
    /// * `out`: `rows` results.
    q8_0 gemv gemv_q5_0x4_q8_0 => gemm_q5_0x4_q8_0
);

forwarding_entry!(
    /// GEMM, Q5_0x4 weights x `m` Q8_0 activation rows: `out[t * rows + r] =
    /// W[r] . act[t]`.
    ///
    /// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 88-byte super-blocks;
    /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
    /// * `out`: `m x rows` results.
    q8_0 gemm gemm_q5_0x4_q8_0 => gemm_groups [Q5_0X4_BLOCK_BYTES, q5_0x4_group_dot]
);

/// The four rows of one Q5_1x4 row group dotted with one activation row.
/// Per block: the exact integers `qsum = sum q a` (q 0..31) and `asum = sum
/// a`, then `acc += (qsum as f32 * (d_w * d_a) + asum as f32 * (m_w * d_a))`
/// (ggml's `vec_dot_q5_1_q8_1` order, with the activation sum exact instead
/// of Q8_1's f16 `s`), blocks in order, no FMA.
pub fn q5_1x4_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q5X4_ROWS] {
    let mut acc = [0.0f32; Q5X4_ROWS];
    let blocks = group
        .chunks_exact(Q5_1X4_BLOCK_BYTES)
        .zip(act_qs.chunks_exact(QK))
        .zip(act_d);
    for ((sb, a), &da) in blocks {
        let quants = &sb[Q5_1X4_NIBBLES..];
        let asum: i32 = a.iter().map(|&x| x as i32).sum();
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut qsum = 0i32;
            for (j, &aj) in a.iter().enumerate() {
                qsum += (q5x4_value(quants, r, j) + 16) * aj as i32;
            }
            let dw = read_f16(sb, 2 * r);
            let mw = read_f16(sb, Q5_1X4_MINS + 2 * r);
            *acc_r += qsum as f32 * (dw * da) + asum as f32 * (mw * da);
        }
    }
    acc
}

forwarding_entry!(
    /// GEMV, Q5_1x4 weights x one Q8_0 activation row (shapes as
    /// [`gemv_q5_0x4_q8_0`], with 96-byte super-blocks).
    q8_0 gemv gemv_q5_1x4_q8_0 => gemm_q5_1x4_q8_0
);

forwarding_entry!(
    /// GEMM, Q5_1x4 weights x `m` Q8_0 activation rows (shapes as
    /// [`gemm_q5_0x4_q8_0`], with 96-byte super-blocks).
    q8_0 gemm gemm_q5_1x4_q8_0 => gemm_groups [Q5_1X4_BLOCK_BYTES, q5_1x4_group_dot]
);
