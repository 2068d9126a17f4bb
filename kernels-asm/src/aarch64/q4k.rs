//! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K, 4 rows interleaved) with
//! Q8_K activations: `sdot` by lane over the unsigned nibbles, one integer
//! sum per (row, 32-weight sub-block), times the sub-block's 6-bit scale
//! with `mla`; the mins dotted with the activation sums by `smull`/`smlal`;
//! then per super-block the reference's float steps (docs/kernels.md,
//! "Q4_Kx4").

use super::gemm::{entry_points, GemmKernels};
use super::ktile::{
    gemv_q4k_pair, gemv_q4k_quarter, gemv_scale_sums, k_gemm_tile, k_gemv_groups, nibble_chunk,
    q4k_nibbles, quarter_scales, row_dot, row_end, rows_dot, rows_end,
};
use crate::layout::{Q4KX4_BLOCK_BYTES, Q4KX4_ROWS, QK_K};
use core::arch::asm;

entry_points!(
    q8_k,
    gemv_q4_kx4_q8_k,
    gemm_q4_kx4_q8_k,
    GemmKernels {
        group_rows: Q4KX4_ROWS,
        block_bytes: Q4KX4_BLOCK_BYTES,
        row: gemv_q4kx4_groups,
        tile4: Some(gemm_q4kx4_tile4),
        small_tiles: Some([gemm_q4kx4_tile2, gemm_q4kx4_tile3]),
        strided: false,
    }
);

k_gemv_groups! {
    fn gemv_q4kx4_groups, block "576", v30 "0x3f",
    setup "", mask_setup "", mask "v30",
    quarter gemv_q4k_quarter, clobber []
}

k_gemm_tile! {
    fn gemm_q4kx4_tile2, rows "2", block "576",
    setup "", advance "64", nibbles q4k_nibbles,
    sums ["v2" @ "0", "v4" @ "16"],
    clobber []
}

k_gemm_tile! {
    fn gemm_q4kx4_tile3, rows "3", block "576",
    setup "", advance "64", nibbles q4k_nibbles,
    sums ["v2" @ "0", "v4" @ "16", "v28" @ "32"],
    clobber []
}

k_gemm_tile! {
    fn gemm_q4kx4_tile4, rows "4", block "576",
    setup "", advance "64", nibbles q4k_nibbles,
    sums ["v2" @ "0", "v4" @ "16", "v28" @ "32", "v30" @ "48"],
    clobber []
}
