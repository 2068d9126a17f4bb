//! The dot of every 8-row K layout (`k8_group_dot`): Q6_Kx8, Q3_Kx8,
//! IQ4_XSx8 (`crate::layouts`), their quants and scales read by the
//! layout's accessors; the specification of the architectures' 8-row K
//! kernels (`aarch64/k8.rs`, `x86_64/k8.rs`).
//!
//! Per row and super-block: `isum_j = sum q * a` over the 16 weights of
//! scale group `j` (`q` the signed quant), `sumi = sum_j scale_j * isum_j`
//! exactly in i32, then `acc += (d_w * d_a) * (sumi as f32)`: two
//! roundings, no fused multiply-add, super-blocks in order (`d_w` the f16
//! at bytes `2r, 2r + 1` of the super-block).

use super::read_f16;
use crate::layout::{K8_ROWS, QK_K};

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
) -> [f32; K8_ROWS] {
    let mut acc = [0.0f32; K8_ROWS];
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
