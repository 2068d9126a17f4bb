//! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K, 4 rows interleaved) with
//! Q8_K activations: the Q5_Kx4 kernels (`q4k.rs`) with each extracted
//! nibble given its fifth bit from the `qh` chunk of the same 4 rows x 4
//! positions (`shl`/`ushr` moves bit `j` to bit 4, `bit` inserts it under
//! the mask 0x10); quants 0..31 are valid `sdot` operands (docs/kernels.md,
//! "Q5_Kx4").

use super::gemm::{entry_points, GemmKernels};
use super::ktile::{
    gemv_q5k_chunk, gemv_q5k_half, gemv_q5k_quarter, gemv_scale_sums, k_gemm_tile, k_gemv_groups,
    nibble_chunk, q5k_chunk, q5k_fifth_bits, q5k_nibbles, quarter_scales, row_dot, row_end,
    rows_dot, rows_end,
};
use crate::layout::{Q5KX4_BLOCK_BYTES, Q5KX4_ROWS, QK_K};
use core::arch::asm;

entry_points!(
    q8_k,
    gemv_q5_kx4_q8_k,
    gemm_q5_kx4_q8_k,
    GemmKernels {
        group_rows: Q5KX4_ROWS,
        block_bytes: Q5KX4_BLOCK_BYTES,
        row: gemv_q5kx4_groups,
        tile4: Some(gemm_q5kx4_tile4),
        small_tiles: Some([gemm_q5kx4_tile2, gemm_q5kx4_tile3]),
        strided: false,
    }
);

k_gemv_groups! {
    fn gemv_q5kx4_groups, block "704", v30 "0x10",
    setup "mov x13, {w}\nadd {w}, {w}, #128\n", mask_setup "movi v28.16b, #0x3f\n", mask "v28",
    quarter gemv_q5k_quarter, clobber [out("x13") _, out("v28") _,]
}

k_gemm_tile! {
    fn gemm_q5kx4_tile2, rows "2", block "704",
    setup "add x14, {w}, #64\n", advance "192", nibbles q5k_nibbles,
    sums ["v2" @ "0", "v4" @ "16"],
    clobber [out("x14") _,]
}

k_gemm_tile! {
    fn gemm_q5kx4_tile3, rows "3", block "704",
    setup "add x14, {w}, #64\n", advance "192", nibbles q5k_nibbles,
    sums ["v2" @ "0", "v4" @ "16", "v28" @ "32"],
    clobber [out("x14") _,]
}

k_gemm_tile! {
    fn gemm_q5kx4_tile4, rows "4", block "704",
    setup "add x14, {w}, #64\n", advance "192", nibbles q5k_nibbles,
    sums ["v2" @ "0", "v4" @ "16", "v28" @ "32", "v30" @ "48"],
    clobber [out("x14") _,]
}
