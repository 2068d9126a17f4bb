//! GEMV and GEMM of Q5_Kx4 weights with Q8_K activations (the generic code
//! for now).

use super::Dotprod;
use crate::generic;
use crate::shape::ShapeError;

/// GEMV, Q5_Kx4 weights x one Q8_K activation row: the contract of
/// [`generic::gemv_q5_kx4_q8_k`].
#[allow(clippy::too_many_arguments)]
pub fn gemv_q5_kx4_q8_k(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    generic::gemv_q5_kx4_q8_k(w, rows, cols, act_qs, act_d, act_sums, out)
}

/// GEMM, Q5_Kx4 weights x `m` Q8_K activation rows: the contract of
/// [`generic::gemm_q5_kx4_q8_k`].
#[allow(clippy::too_many_arguments)]
pub fn gemm_q5_kx4_q8_k(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    generic::gemm_q5_kx4_q8_k(w, rows, cols, act_qs, act_d, act_sums, m, out)
}
