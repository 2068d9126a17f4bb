//! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K super-blocks, 4 rows
//! interleaved) with Q8_K activations: the specification of the
//! architecture kernels (docs/kernels.md, "Q4_Kx4").
//!
//! Per row and 256-weight super-block: the exact integer sums
//! `sumi = sum_j sc_j * isum_j` (`isum_j` the dot of sub-block `j`'s nibbles
//! 0..15 with its 32 activation quants) and `summ = sum_j m_j * asum_j`
//! (`asum_j` the activation quants' sum from `act_sums`), then
//!
//! ```text
//! acc = acc + (d_w * d_a) * (sumi as f32)
//! acc = acc - (dmin_w * d_a) * (summ as f32)
//! ```
//!
//! with `d_w`, `dmin_w` the f16 values widened to f32, every operation a
//! separate IEEE f32 rounding (no fused multiply-add), super-blocks in order.
//!
//! Shapes: the weight is `rows x cols` (out x in, `cols` a multiple of 256)
//! in row groups of 4 padded to whole groups; activations are `m` rows:
//! `act_qs` `m x cols` quants, `act_d` `m x cols/256` scales, `act_sums`
//! `m x cols/32` sums, all row-major; the output is `m x rows`, row-major.

use super::gemm::gemm_k_groups;
use super::read_f16;
use crate::layout::{
    K_SCALE_BYTES, Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT, Q4KX4_ROWS, Q4KX4_SCALES_AT, Q5KX4_BLOCK_BYTES,
    Q5KX4_QH_AT, Q5KX4_QS_AT, QK, QK_K,
};

/// ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block `j`
/// (0..8) from the 12 packed bytes of a Q4_K / Q5_K super-block.
#[inline]
pub fn k4_scale_min(j: usize, q: &[u8; K_SCALE_BYTES]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The four rows of one Q4_Kx4 row group dotted with one Q8_K activation
/// row (`group`: `nb` super-blocks; `act_qs`: `nb * 256` quants; `act_d`:
/// `nb` scales; `act_sums`: `nb * 8` sums).
pub fn q4kx4_group_dot(
    group: &[u8],
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
) -> [f32; Q4KX4_ROWS] {
    kx4_group_dot::<false>(group, act_qs, act_d, act_sums)
}

/// The dot of one row group of Q4_Kx4 (`Q5`: Q5_Kx4, whose quants add 16 x
/// the `qh` bit) with one Q8_K activation row, in the order the module
/// describes.
pub(super) fn kx4_group_dot<const Q5: bool>(
    group: &[u8],
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
) -> [f32; Q4KX4_ROWS] {
    let (block_bytes, qs_at) = if Q5 {
        (Q5KX4_BLOCK_BYTES, Q5KX4_QS_AT)
    } else {
        (Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT)
    };
    let mut acc = [0.0f32; Q4KX4_ROWS];
    let blocks = group
        .chunks_exact(block_bytes)
        .zip(act_qs.chunks_exact(QK_K))
        .zip(act_d)
        .zip(act_sums.chunks_exact(QK_K / QK));
    for (((sb, a), &da), asum) in blocks {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut scales = [0u8; K_SCALE_BYTES];
            for (i, s) in scales.iter_mut().enumerate() {
                *s = sb[Q4KX4_SCALES_AT + 16 * (i / 4) + 4 * r + i % 4];
            }
            let mut sumi = 0i32;
            let mut summ = 0i32;
            for (j, &asum_j) in asum.iter().enumerate() {
                let (sc, m) = k4_scale_min(j, &scales);
                let half = j / 2;
                let shift = 4 * (j % 2);
                let mut isum = 0i32;
                for i in 0..QK {
                    // Chunk i / 4 of half `half`: row r's bytes 4c..4c+3.
                    let at = 16 * (i / 4) + 4 * r + i % 4;
                    let byte = sb[qs_at + 128 * half + at];
                    let mut q = ((byte >> shift) & 0x0f) as i32;
                    if Q5 {
                        q |= (((sb[Q5KX4_QH_AT + at] >> j) & 1) << 4) as i32;
                    }
                    isum += q * a[QK * j + i] as i32;
                }
                sumi += sc as i32 * isum;
                summ += m as i32 * asum_j as i32;
            }
            let dd = read_f16(sb, 2 * r) * da;
            let dm = read_f16(sb, 8 + 2 * r) * da;
            *acc_r += dd * sumi as f32;
            *acc_r -= dm * summ as f32;
        }
    }
    acc
}

forwarding_entry!(
    /// GEMV, Q4_Kx4 weights x one Q8_K activation row: `out[r] = W[r] . act`.
    ///
    /// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 576-byte super-blocks;
    /// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
    ///   `cols / 32` sums;
    /// * `out`: `rows` results.
    q8_k gemv gemv_q4_kx4_q8_k => gemm_q4_kx4_q8_k
);

forwarding_entry!(
    /// GEMM, Q4_Kx4 weights x `m` Q8_K activation rows: `out[t * rows + r] =
    /// W[r] . act[t]`.
    ///
    /// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 576-byte super-blocks;
    /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
    ///   `act_sums`: `m x cols / 32` sums;
    /// * `out`: `m x rows` results.
    q8_k gemm gemm_q4_kx4_q8_k => gemm_k_groups [Q4KX4_BLOCK_BYTES, kx4_group_dot::<false>]
);
