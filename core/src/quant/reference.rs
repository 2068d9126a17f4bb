//! The scalar kernels of `kestrel_kernels::generic` applied to a
//! [`PackedMatrix`]: the specification every fast kernel is tested against
//! (the arithmetic itself lives in the kernel crate, once).
//!
//! Shapes: a weight matrix is `rows x cols` (out x in). Activations are `m`
//! rows quantized by [`super::q8_0::quantize_acts`]: `act_qs` is `m x cols`
//! quants, `act_d` is `m x cols/32` scales, both row-major. The output is
//! `m x rows`, row-major.

use super::repack::{Layout, PackedMatrix};
use crate::error::Error;
use kestrel_kernels::generic;

pub use kestrel_kernels::generic::{q4x4_group_dot, q8x8_group_dot};

/// An error unless `w` is stored in `layout`.
fn check_layout(w: &PackedMatrix, layout: Layout) -> Result<(), Error> {
    if w.layout == layout {
        Ok(())
    } else {
        Err(Error::SizeMismatch {
            what: "weight layout group rows",
            expected: layout.group_rows(),
            actual: w.layout.group_rows(),
        })
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
    check_layout(w, Layout::Q4_0x4)?;
    Ok(generic::gemm_q4_0x4_q8_0(
        w.bytes, w.rows, w.cols, act_qs, act_d, m, out,
    )?)
}

/// `out[t][r] = W[r] . act[t]` for a Q8_0x8 weight and `m` activation rows.
pub fn gemm_q8_0x8_q8_0(
    w: &PackedMatrix,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), Error> {
    check_layout(w, Layout::Q8_0x8)?;
    Ok(generic::gemm_q8_0x8_q8_0(
        w.bytes, w.rows, w.cols, act_qs, act_d, m, out,
    )?)
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
