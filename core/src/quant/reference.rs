//! The scalar kernels of `kestrel_kernels::generic` applied to a
//! [`PackedMatrix`]: the specification every fast kernel is tested against
//! (the arithmetic itself lives in the kernel crate, once).
//!
//! Shapes: a weight matrix is `rows x cols` (out x in). Activations are `m`
//! rows quantized by [`super::q8_0::quantize_acts`]: `act_qs` is `m x cols`
//! quants, `act_d` is `m x cols/32` scales, both row-major. The output is
//! `m x rows`, row-major.

use super::layout::Gemm;
use super::repack::{Layout, PackedMatrix};
use crate::error::Error;
use kestrel_kernels::generic;

/// `out[t][r] = W[r] . act[t]` for a weight in any layout of Q8_0
/// activations (Q4_0x4, Q8_0x8, Q5_0x4, ...) and `m` activation rows:
/// the layout's generic kernel (the layout table's).
pub fn gemm_q8_0(
    w: &PackedMatrix,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), Error> {
    match w.layout.spec().gemm {
        Gemm::Q8_0(f) => Ok((f.generic)(w.bytes, w.rows, w.cols, act_qs, act_d, m, out)?),
        _ => Err(Error::Unsupported {
            what: "a Q8_0-activation GEMM of a layout without one; layout code",
            value: w.layout.spec().layout_code as u64,
        }),
    }
}

/// `out[r] = W[r] . x` for a plain f32 or f16 weight, summed in column order in f32.
pub fn matvec_float(w: &PackedMatrix, x: &[f32], out: &mut [f32]) -> Result<(), Error> {
    match w.layout {
        Layout::F32 => Ok(generic::matvec_f32(w.bytes, w.rows, w.cols, x, out)?),
        Layout::F16 => Ok(generic::matvec_f16(w.bytes, w.rows, w.cols, x, out)?),
        _ => Err(Error::SizeMismatch {
            what: "matvec_float layout group rows (f32/f16 only)",
            expected: 1,
            actual: w.layout.group_rows(),
        }),
    }
}
