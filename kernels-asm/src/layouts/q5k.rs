//! Q5_Kx4, the whole layout in one file: GGUF Q5_K super-blocks repacked
//! four rows at a time, every byte of the GGUF blocks kept (docs/kernels.md,
//! "Q5_Kx4"). Here are its geometry and byte order, its repacker (its
//! inverse, which only the tests use, is `kestrel_tests::unpack_q5_k`),
//! its scalar specification ([`generic`]) and its kernels, the one of the
//! build also named [`arch`]: Q4_Kx4's family ([`super::q4k`]) with each
//! quant given its fifth bit from the `qh` bytes (on aarch64 its own tiles
//! of the 4-row K text, on x86_64 Q4_Kx4's tiles with `Q5`).
//!
//! GGUF Q5_K (256 weights, 176 bytes): `d`, `dmin` (f16 LE), the 12 scale
//! bytes of Q4_K, `qh[32]` (bit `j` of `qh[i]` is the fifth bit of weight
//! `i` of sub-block `j`), `qs[128]` nibbles as in Q4_K. `x = d * sc * q -
//! dmin * m`, `q` 0..31.
//!
//! Row group `g` (rows `4g..4g+3`) of a `rows x cols` matrix is `cols /
//! 256` consecutive 704-byte super-blocks; in super-block `b`, for row `r`
//! of the group ([`q5_kx4_offset`]):
//!
//! * bytes `2r..2r+2`: the row's `d`; bytes `8+2r..10+2r`: its `dmin`;
//! * byte `16 + 16w + 4r + k` (`w` 0..3, `k` 0..4): its scale byte `4w + k`;
//! * byte `64 + 16c + 4r + k` (chunk `c` 0..8, `k` 0..4): its `qh[4c + k]`;
//! * byte `192 + 128j + 16c + 4r + k` (half `j` 0..4, chunk `c` 0..8, `k`
//!   0..4): its nibble byte `32j + 4c + k`.
//!
//! Rows past the matrix's last row (the padding of the last group) are all
//! zero bytes.

use super::q4k::{K_SCALE_BYTES, Q4KX4_SCALES_AT};
use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF Q5_K super-block (256 weights).
pub const Q5_K_BLOCK_BYTES: usize = 4 + K_SCALE_BYTES + QK_K / 8 + QK_K / 2;
/// Rows in one Q5_Kx4 row group.
pub const Q5KX4_ROWS: usize = 4;
/// Bytes of one Q5_Kx4 super-block (4 rows x 256 weights); 5.5 bits per
/// weight, as GGUF.
pub const Q5KX4_BLOCK_BYTES: usize = Q5KX4_ROWS * Q5_K_BLOCK_BYTES;
/// Offset of the `qh` chunks in a Q5_Kx4 super-block.
pub const Q5KX4_QH_AT: usize = super::q4k::Q4KX4_QS_AT;
/// Offset of the nibble chunks in a Q5_Kx4 super-block.
pub const Q5KX4_QS_AT: usize = Q5KX4_QH_AT + Q5KX4_ROWS * QK_K / 8;

const _: () = assert!(Q5_K_BLOCK_BYTES == 176 && Q5KX4_BLOCK_BYTES == 704);
const _: () = assert!(Q5KX4_QH_AT == 64 && Q5KX4_QS_AT == 192);

/// Where byte `i` (0..176) of row `r`'s GGUF Q5_K block sits in a Q5_Kx4
/// super-block.
#[inline]
pub fn q5_kx4_offset(r: usize, i: usize) -> usize {
    match i {
        0..2 => 2 * r + i,
        2..4 => 8 + 2 * r + (i - 2),
        4..16 => {
            let s = i - 4;
            Q4KX4_SCALES_AT + 16 * (s / 4) + 4 * r + s % 4
        }
        16..48 => {
            let h = i - 16;
            Q5KX4_QH_AT + 16 * (h / 4) + 4 * r + h % 4
        }
        _ => {
            let q = i - 48;
            Q5KX4_QS_AT + 128 * (q / 32) + 16 * ((q % 32) / 4) + 4 * r + q % 4
        }
    }
}

/// Bytes of a `rows x cols` matrix of GGUF Q5_K rows (`None`: it
/// overflows).
pub fn q5_k_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, Q5_K_BLOCK_BYTES)
}

/// Bytes of a `rows x cols` matrix in Q5_Kx4, padding rows included
/// (`ceil(rows / 4) * cols / 256 * 704`: 5.5 bits per weight, as GGUF;
/// `None`: it overflows).
pub fn q5_kx4_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::row_group_bytes(rows, cols, Q5KX4_ROWS, Q5KX4_BLOCK_BYTES)
}

/// Repacks a `rows x cols` matrix of GGUF Q5_K blocks (row-major, `cols /
/// 256` blocks of 176 bytes per row) into Q5_Kx4 (`out`:
/// [`q5_kx4_bytes`] bytes; the last group's missing rows are zeros).
pub fn repack_q5_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    super::repack_row_groups_of(
        Q5KX4_ROWS,
        crate::layout::QK_K,
        [
            "q5_k columns (a multiple of 256)",
            "q5_k matrix bytes",
            "q5_kx4 matrix bytes",
        ],
        src,
        (rows, cols),
        out,
        (Q5_K_BLOCK_BYTES, Q5KX4_BLOCK_BYTES),
        |blocks, sb| super::scatter_rows(blocks, sb, q5_kx4_offset),
    )
}

pub mod generic {
    //! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K super-blocks, 4 rows
    //! interleaved) with Q8_K activations: the specification of the
    //! architecture kernels (docs/kernels.md, "Q5_Kx4").
    //!
    //! The order is Q4_Kx4's, the same code (`q4k.rs`, with `Q5`): per row and
    //! super-block the exact `sumi = sum_j sc_j * isum_j` (the quants now
    //! 0..31: nibble plus 16 x the `qh` bit) and `summ = sum_j m_j * asum_j`,
    //! then `acc = acc + (d_w * d_a) * (sumi as f32)`,
    //! `acc = acc - (dmin_w * d_a) * (summ as f32)`, no fused multiply-add.
    //! Shapes as the Q4_Kx4 functions, with 704-byte super-blocks.

    use super::{Q5KX4_BLOCK_BYTES, Q5KX4_ROWS};
    use crate::generic::gemm_k_groups;
    use crate::layouts::q4k::generic::kx4_group_dot;

    /// The four rows of one Q5_Kx4 row group dotted with one Q8_K activation
    /// row (`group`: `nb` super-blocks; `act_qs`: `nb * 256` quants; `act_d`:
    /// `nb` scales; `act_sums`: `nb * 8` sums).
    pub fn q5kx4_group_dot(
        group: &[u8],
        act_qs: &[i8],
        act_d: &[f32],
        act_sums: &[i16],
    ) -> [f32; Q5KX4_ROWS] {
        kx4_group_dot::<true>(group, act_qs, act_d, act_sums)
    }

    forwarding_entry!(
        /// GEMV, Q5_Kx4 weights x one Q8_K activation row: `out[r] = W[r] . act`.
        ///
        /// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 704-byte super-blocks;
        /// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
        ///   `cols / 32` sums;
        /// * `out`: `rows` results.
        q8_k gemv gemv_q5_kx4_q8_k => gemm_q5_kx4_q8_k
    );

    forwarding_entry!(
        /// GEMM, Q5_Kx4 weights x `m` Q8_K activation rows: `out[t * rows + r] =
        /// W[r] . act[t]` (shapes as [`gemv_q5_kx4_q8_k`], `m` activation rows).
        q8_k gemm gemm_q5_kx4_q8_k => gemm_k_groups [Q5KX4_BLOCK_BYTES, kx4_group_dot::<true>]
    );
}

#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    //! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K, 4 rows interleaved) with
    //! Q8_K activations: the Q4_Kx4 kernels (`layouts/q4k.rs`) with each extracted
    //! nibble given its fifth bit from the `qh` chunk of the same 4 rows x 4
    //! positions (`shl`/`ushr` moves bit `j` to bit 4, `bit` inserts it under
    //! the mask 0x10); quants 0..31 are valid `sdot` operands (docs/kernels.md,
    //! "Q5_Kx4").

    use super::{Q5KX4_BLOCK_BYTES, Q5KX4_ROWS};
    use crate::aarch64::gemm::{entry_points, GemmKernels};
    use crate::aarch64::ktile::{
        gemv_q5k_chunk, gemv_q5k_half, gemv_q5k_quarter, gemv_scale_sums, k_gemm_tile,
        k_gemv_groups, nibble_chunk, q5k_chunk, q5k_fifth_bits, q5k_nibbles, quarter_scales,
        row_dot, row_end, rows_dot, rows_end,
    };
    use crate::layout::QK_K;
    use core::arch::asm;

    entry_points!(
        q8_k[super::generic],
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
}

#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    //! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K, 4 rows interleaved) with
    //! Q8_K activations: the Q4_Kx4 tiles of `q4k.rs` with the fifth bit of
    //! each quant or'ed in from the `qh` chunks (docs/kernels.md, "Q5_Kx4").

    use crate::layouts::q4k::x86_64::{k_entry_points, k_gemm};
    use crate::shape::ShapeError;
    use crate::x86_64::Avx2;

    k_entry_points!(gemv_q5_kx4_q8_k, gemm_q5_kx4_q8_k, true);
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
