//! `out[r] = W[r] . x` for a plain row-major f32 or f16 weight
//! (little-endian bytes, any alignment), summed in column order in f32 with
//! a separate multiply and add per column.

use super::read_f16;
use crate::shape::{matvec_shape, ShapeError};

/// `out[r] = W[r] . x` for an f32 weight: `w` is `rows x cols x 4` bytes,
/// `x` `cols` values, `out` `rows` values.
pub fn matvec_f32(
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    matvec_shape(4, w, rows, cols, x, out)?;
    if cols == 0 {
        out.fill(0.0);
        return Ok(());
    }
    for (row, o) in w.chunks_exact(4 * cols).zip(out.iter_mut()) {
        let mut sum = 0.0f32;
        for (b, &xi) in row.chunks_exact(4).zip(x) {
            sum += f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * xi;
        }
        *o = sum;
    }
    Ok(())
}

/// As [`matvec_f32`] for an f16 weight (`rows x cols x 2` bytes); each
/// weight is widened to f32 exactly before the multiply.
pub fn matvec_f16(
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    matvec_shape(2, w, rows, cols, x, out)?;
    if cols == 0 {
        out.fill(0.0);
        return Ok(());
    }
    for (row, o) in w.chunks_exact(2 * cols).zip(out.iter_mut()) {
        let mut sum = 0.0f32;
        for (i, &xi) in x.iter().enumerate() {
            sum += read_f16(row, 2 * i) * xi;
        }
        *o = sum;
    }
    Ok(())
}
