//! Scalar reference kernels on the stored layouts. They are the specification
//! every fast kernel is tested against: per 32-weight block, the exact integer
//! dot product of weight and activation quants, converted to f32 and times
//! `d_w * d_a` (the f16 weight scale widened to f32, times the activation
//! scale), then added to the row's sum, blocks in order, with no fused
//! multiply-add; as ggml's `vec_dot_q4_0_q8_0` / `vec_dot_q8_0_q8_0` do.
//!
//! Shapes: a weight matrix is `rows x cols` (out x in). Activations are `m`
//! rows quantized by [`super::q8_0::quantize_acts`]: `act_qs` is `m x cols`
//! quants, `act_d` is `m x cols/32` scales, both row-major. The output is
//! `m x rows`, row-major.

use super::f16::read_f16;
use super::repack::{
    Layout, PackedMatrix, Q4X4_BLOCK_BYTES, Q4X4_ROWS, Q8X8_BLOCK_BYTES, Q8X8_ROWS,
};
use super::QK;
use crate::error::{check_len, Error};

/// The four rows of one Q4_0x4 row group dotted with one activation row.
pub fn q4x4_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q4X4_ROWS] {
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
                    let lo = ((byte << 4) as i8) >> 4;
                    let hi = (byte as i8) >> 4;
                    isum += lo as i32 * a[4 * c + k] as i32;
                    isum += hi as i32 * a[16 + 4 * c + k] as i32;
                }
            }
            *acc_r += isum as f32 * (read_f16(sb, 2 * r) * da);
        }
    }
    acc
}

/// The eight rows of one Q8_0x8 row group dotted with one activation row.
pub fn q8x8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q8X8_ROWS] {
    let mut acc = [0.0f32; Q8X8_ROWS];
    let blocks = group
        .chunks_exact(Q8X8_BLOCK_BYTES)
        .zip(act_qs.chunks_exact(QK))
        .zip(act_d);
    for ((sb, a), &da) in blocks {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            for c in 0..8 {
                for k in 0..4 {
                    let q = sb[16 + 32 * c + 4 * r + k] as i8;
                    isum += q as i32 * a[4 * c + k] as i32;
                }
            }
            *acc_r += isum as f32 * (read_f16(sb, 2 * r) * da);
        }
    }
    acc
}

/// Checks the shapes of a quantized GEMM call.
pub fn check_gemm(
    w: &PackedMatrix,
    layout: Layout,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &[f32],
) -> Result<(), Error> {
    if w.layout != layout {
        return Err(Error::SizeMismatch {
            what: "weight layout group rows",
            expected: layout.group_rows(),
            actual: w.layout.group_rows(),
        });
    }
    check_len("activation quants", m * w.cols, act_qs.len())?;
    check_len("activation scales", m * (w.cols / QK), act_d.len())?;
    check_len("output values", m * w.rows, out.len())
}

/// Dots one row group with one activation row: (group, quants, scales).
type GroupDotFn<const R: usize> = fn(&[u8], &[i8], &[f32]) -> [f32; R];

fn gemm_groups<const R: usize>(
    w: &PackedMatrix,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
    group_dot: GroupDotFn<R>,
) {
    let nb = w.cols / QK;
    for t in 0..m {
        let qs = &act_qs[t * w.cols..(t + 1) * w.cols];
        let d = &act_d[t * nb..(t + 1) * nb];
        let o = &mut out[t * w.rows..(t + 1) * w.rows];
        for (g, chunk) in o.chunks_mut(R).enumerate() {
            let acc = group_dot(w.group(g), qs, d);
            chunk.copy_from_slice(&acc[..chunk.len()]);
        }
    }
}

/// `out[t][r] = W[r] . act[t]` for a Q4_0x4 weight and `m` activation rows.
pub fn gemm_q4_0x4_q8_0(
    w: &PackedMatrix,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), Error> {
    check_gemm(w, Layout::Q4_0x4, act_qs, act_d, m, out)?;
    gemm_groups(w, act_qs, act_d, m, out, q4x4_group_dot);
    Ok(())
}

/// `out[t][r] = W[r] . act[t]` for a Q8_0x8 weight and `m` activation rows.
pub fn gemm_q8_0x8_q8_0(
    w: &PackedMatrix,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), Error> {
    check_gemm(w, Layout::Q8_0x8, act_qs, act_d, m, out)?;
    gemm_groups(w, act_qs, act_d, m, out, q8x8_group_dot);
    Ok(())
}

/// `out[r] = W[r] . x` for a plain f32 or f16 weight, summed in column order in f32.
pub fn matvec_float(w: &PackedMatrix, x: &[f32], out: &mut [f32]) -> Result<(), Error> {
    check_len("matvec input", w.cols, x.len())?;
    check_len("matvec output", w.rows, out.len())?;
    match w.layout {
        Layout::F32 => {
            for (row, o) in w.bytes.chunks_exact(4 * w.cols).zip(out.iter_mut()) {
                let mut sum = 0.0f32;
                for (b, &xi) in row.chunks_exact(4).zip(x) {
                    sum += f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * xi;
                }
                *o = sum;
            }
        }
        Layout::F16 => {
            for (row, o) in w.bytes.chunks_exact(2 * w.cols).zip(out.iter_mut()) {
                let mut sum = 0.0f32;
                for (i, &xi) in x.iter().enumerate() {
                    sum += read_f16(row, 2 * i) * xi;
                }
                *o = sum;
            }
        }
        Layout::Q4_0x4 | Layout::Q8_0x8 => {
            return Err(Error::SizeMismatch {
                what: "matvec_float layout group rows (f32/f16 only)",
                expected: 1,
                actual: w.layout.group_rows(),
            })
        }
    }
    Ok(())
}
