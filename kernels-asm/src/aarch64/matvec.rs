//! `out[r] = W[r] . x` for plain f32 / f16 weights: no aarch64 vector code
//! (these weights are rare: norms and small heads), the generic code.

use super::Dotprod;
use crate::generic;
use crate::ShapeError;

/// [`generic::matvec_f32`].
pub fn matvec_f32(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    generic::matvec_f32(w, rows, cols, x, out)
}

/// [`generic::matvec_f16`].
pub fn matvec_f16(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    generic::matvec_f16(w, rows, cols, x, out)
}
