//! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K, 4 rows interleaved) with
//! Q8_K activations: the Q4_Kx4 tiles of `q4k.rs` with the fifth bit of
//! each quant or'ed in from the `qh` chunks (docs/kernels.md, "Q5_Kx4").

use super::q4k::k_gemm;
use super::Avx2;
use crate::shape::ShapeError;

/// GEMV, Q5_Kx4 weights x one Q8_K activation row: [`gemm_q5_kx4_q8_k`]
/// with `m = 1`; the same contract as
/// [`crate::generic::gemv_q5_kx4_q8_k`].
#[allow(clippy::too_many_arguments)]
pub fn gemv_q5_kx4_q8_k(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    gemm_q5_kx4_q8_k(cpu, w, rows, cols, act_qs, act_d, act_sums, 1, out)
}

/// GEMM, Q5_Kx4 weights x `m` Q8_K activation rows: `out[t * rows + r] =
/// W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 704-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
///   `act_sums`: `m x cols / 32` sums;
/// * `out`: `m x rows`, row-major.
///
/// The same contract as [`crate::generic::gemm_q5_kx4_q8_k`]; empty shapes
/// go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q5_kx4_q8_k(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    k_gemm::<true>(cpu, w, rows, cols, act_qs, act_d, act_sums, m, out)
}
