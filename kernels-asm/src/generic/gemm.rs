//! GEMV and GEMM of a repacked quantized weight (Q4_0x4, Q8_0x8) with Q8_0
//! activations.
//!
//! Shapes: the weight is `rows x cols` (out x in) in row groups padded to
//! whole groups; activations are `m` rows: `act_qs` `m x cols` quants,
//! `act_d` `m x cols/32` scales, both row-major; the output is `m x rows`,
//! row-major.

use super::read_f16;
use crate::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS, QK};
use crate::shape::{gemm_k_shape, gemm_shape, ShapeError};

/// A row group of 72-byte 4-row nibble super-blocks (Q4_0x4, or a layout
/// of its arrangement such as IQ4_NLx4) dotted with one activation row: per
/// block and row, the exact `isum` of its 32 weight values (`value` of each
/// nibble) times quants, then `acc += isum * (d_w * d_a)`. A Q4_0x4 nibble
/// (XOR 0x88) is the two's-complement `q - 8`.
pub(crate) fn nibble_x4_group_dot(
    group: &[u8],
    act_qs: &[i8],
    act_d: &[f32],
    value: impl Fn(u8) -> i32,
) -> [f32; Q4X4_ROWS] {
    let mut acc = [0.0f32; Q4X4_ROWS];
    let blocks = group
        .chunks_exact(Q4X4_BLOCK_BYTES)
        .zip(act_qs.chunks_exact(QK))
        .zip(act_d);
    for ((sb, a), &da) in blocks {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            for c in 0..4 {
                for k in 0..4 {
                    let byte = sb[8 + 16 * c + 4 * r + k];
                    // Low nibble: weight 4c+k; high nibble: weight 16+4c+k.
                    isum += value(byte & 15) * a[4 * c + k] as i32;
                    isum += value(byte >> 4) * a[16 + 4 * c + k] as i32;
                }
            }
            *acc_r += isum as f32 * (read_f16(sb, 2 * r) * da);
        }
    }
    acc
}

/// Dots one row group with one activation row: (group, quants, scales).
pub(crate) type GroupDotFn<const R: usize> = fn(&[u8], &[i8], &[f32]) -> [f32; R];

#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_groups<const R: usize>(
    block_bytes: usize,
    group_dot: GroupDotFn<R>,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let shape = gemm_shape(R, block_bytes, w, rows, cols, act_qs, act_d, m, out)?;
    let nb = shape.nb;
    let group_bytes = nb * block_bytes;
    for t in 0..m {
        let qs = &act_qs[t * cols..(t + 1) * cols];
        let d = &act_d[t * nb..(t + 1) * nb];
        let o = &mut out[t * rows..(t + 1) * rows];
        for (g, chunk) in o.chunks_mut(R).enumerate() {
            let acc = group_dot(&w[g * group_bytes..(g + 1) * group_bytes], qs, d);
            chunk.copy_from_slice(&acc[..chunk.len()]);
        }
    }
    Ok(())
}

/// Dots one row group with one Q8_K activation row: (group, quants,
/// scales, sums).
pub(super) type KGroupDotFn<const R: usize> = fn(&[u8], &[i8], &[f32], &[i16]) -> [f32; R];

/// The GEMM of a K layout of `R`-row groups of `block_bytes`-byte
/// super-blocks: shapes checked, then every activation row against every
/// row group through `group_dot`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_k_groups<const R: usize>(
    block_bytes: usize,
    group_dot: KGroupDotFn<R>,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let args = (act_qs, act_d, act_sums);
    let shape = gemm_k_shape(
        R,
        block_bytes,
        w,
        rows,
        cols,
        args.0,
        args.1,
        args.2,
        m,
        out,
    )?;
    let (nb, ns) = (shape.nb, cols / QK);
    let group_bytes = nb * block_bytes;
    for t in 0..m {
        let qs = &act_qs[t * cols..(t + 1) * cols];
        let d = &act_d[t * nb..(t + 1) * nb];
        let s = &act_sums[t * ns..(t + 1) * ns];
        let o = &mut out[t * rows..(t + 1) * rows];
        for (g, chunk) in o.chunks_mut(R).enumerate() {
            let acc = group_dot(&w[g * group_bytes..(g + 1) * group_bytes], qs, d, s);
            chunk.copy_from_slice(&acc[..chunk.len()]);
        }
    }
    Ok(())
}
