//! GEMV and GEMM of Q6_Kx8 weights (GGUF Q6_K super-blocks, 8 rows
//! interleaved) with Q8_K activations, and the dot of every 8-row K layout
//! (`k8_group_dot`, which `crate::layouts::q3k` shares).
//!
//! Shapes: the weight is `rows x cols` (out x in, `cols` a multiple of 256)
//! in row groups of 8 rows padded to whole groups, each `cols / 256`
//! super-blocks of 1680 bytes; activations are `m` rows: `act_qs` `m x cols`
//! quants, `act_d` `m x cols/256` scales, `act_sums` `m x cols/32` sums of
//! 32 quants (checked, not read: the layout's weights are signed); the
//! output is `m x rows`, row-major.
//!
//! Per row and super-block: `isum_j = sum q * a` (Q6_K: `q - 32`) over the 16 weights
//! of scale group `j`, `sumi = sum_j scale_j * isum_j` exactly in i32
//! (|isum_j| <= 16 * 32 * 128 = 2^16, |scale_j * isum_j| <= 2^23, |sumi| <=
//! 2^27), then `acc += (d_w * d_a) * (sumi as f32)`: two roundings, no fused
//! multiply-add, super-blocks in order.

use super::gemm::gemm_k_groups;
use super::read_f16;
use crate::layout::{Q6KX8_BLOCK_BYTES, Q6KX8_PAIR_BYTES, Q6KX8_ROWS, QK, QK_K};

/// The signed quant `q - 32` of weight `i` (0..256) of row `r` (0..8) in a
/// Q6_Kx8 super-block.
#[inline]
pub fn q6kx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
    let g = &sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * (i / QK) + 2 * Q6KX8_ROWS..];
    let g = &g[96 * ((i / 16) % 2)..][..96];
    let (s, k) = ((i % 16) / 4, i % 4);
    let at = |s: usize| g[32 * s + 4 * r + k];
    // `v` is q ^ 32: read as a signed 6-bit number it is q - 32.
    let v = if s < 3 {
        at(s) >> 2
    } else {
        ((at(0) & 3) << 4) | ((at(1) & 3) << 2) | (at(2) & 3)
    };
    (v ^ 32) as i32 - 32
}

/// The `i8` scale of 16-weight group `j` (0..16) of row `r` in a Q6_Kx8
/// super-block.
#[inline]
pub fn q6kx8_scale(sb: &[u8], r: usize, j: usize) -> i32 {
    sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * (j / 2) + Q6KX8_ROWS * (j % 2) + r] as i8 as i32
}

/// The eight rows of one Q6_Kx8 row group dotted with one Q8_K activation
/// row (`act_qs`: the row's quants, `act_d`: its per-256 scales).
pub fn q6kx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q6KX8_ROWS] {
    k8_group_dot(
        Q6KX8_BLOCK_BYTES,
        (q6kx8_weight, q6kx8_scale),
        group,
        act_qs,
        act_d,
    )
}

/// `(super-block, row, index)`: a weight's signed quant, or a group's scale.
pub(crate) type Field = fn(&[u8], usize, usize) -> i32;

/// The dot of an 8-row layout of 16-weight scale groups (Q6_Kx8, Q3_Kx8)
/// whose super-blocks are `bytes` long, its quants and scales read by
/// `weight` and `scale`.
pub(crate) fn k8_group_dot(
    bytes: usize,
    (weight, scale): (Field, Field),
    group: &[u8],
    act_qs: &[i8],
    act_d: &[f32],
) -> [f32; Q6KX8_ROWS] {
    let mut acc = [0.0f32; Q6KX8_ROWS];
    let blocks = group
        .chunks_exact(bytes)
        .zip(act_qs.chunks_exact(QK_K))
        .zip(act_d);
    for ((sb, a), &da) in blocks {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut sumi = 0i32;
            for j in 0..QK_K / 16 {
                let mut isum = 0i32;
                for (t, &at) in a.iter().enumerate().skip(16 * j).take(16) {
                    isum += weight(sb, r, t) * at as i32;
                }
                sumi += scale(sb, r, j) * isum;
            }
            *acc_r += (read_f16(sb, 2 * r) * da) * sumi as f32;
        }
    }
    acc
}

forwarding_entry!(
    /// GEMV, Q6_Kx8 weights x one Q8_K activation row: `out[r] = W[r] . act`.
    ///
    /// * `w`: `ceil(rows / 8)` row groups of `cols / 256` 1680-byte super-blocks;
    /// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
    ///   `cols / 32` sums (checked only);
    /// * `out`: `rows` results.
    q8_k gemv gemv_q6_kx8_q8_k => gemm_q6_kx8_q8_k
);

forwarding_entry!(
    /// GEMM, Q6_Kx8 weights x `m` Q8_K activation rows: `out[t * rows + r] =
    /// W[r] . act[t]`.
    ///
    /// * `w`: `ceil(rows / 8)` row groups of `cols / 256` 1680-byte super-blocks;
    /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
    ///   `act_sums`: `m x cols / 32` sums (checked only);
    /// * `out`: `m x rows` results.
    q8_k gemm gemm_q6_kx8_q8_k => gemm_k_groups [Q6KX8_BLOCK_BYTES, |g, q, d, _| q6kx8_group_dot(g, q, d)]
);
