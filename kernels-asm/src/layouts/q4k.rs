//! Q4_Kx4, the whole layout in one file: GGUF Q4_K super-blocks repacked
//! four rows at a time, every byte of the GGUF blocks kept (docs/kernels.md,
//! "Q4_Kx4"). Here are its geometry and byte order, its repacker (its
//! inverse, which only the tests use, is `kestrel_tests::unpack_q4_k`),
//! its scalar specification ([`generic`]) and its kernels on aarch64 (the
//! 4-row K text of `aarch64/ktile.rs`) and x86_64 (AVX2 and VNNI tiles;
//! AVX512-VNNI GEMMs take `x86_64/gemm_vnni.rs`'s 512-bit tile), the one of
//! the build also named [`arch`]. Q5_Kx4 ([`super::q5k`]) is the same
//! family: its kernels are these with a fifth bit per quant (`Q5`).
//!
//! GGUF Q4_K (256 weights, 144 bytes): `d: f16 LE`, `dmin: f16 LE`, 12
//! bytes of 6-bit scales and mins of the eight 32-weight sub-blocks (ggml's
//! `get_scale_min_k4` packing, [`generic::k4_scale_min`]), 128 nibble
//! bytes: for each 64-weight half `j`, byte `32j + i` holds weight `64j +
//! i` in its low nibble and weight `64j + 32 + i` in its high nibble. `x =
//! d * sc * q - dmin * m`.
//!
//! Row group `g` (rows `4g..4g+3`) of a `rows x cols` matrix is `cols /
//! 256` consecutive 576-byte super-blocks; in super-block `b`, for row `r`
//! of the group ([`q4_kx4_offset`]):
//!
//! * bytes `2r..2r+2`: the row's `d`; bytes `8+2r..10+2r`: its `dmin`;
//! * byte `16 + 16w + 4r + k` (`w` 0..3, `k` 0..4): its scale byte `4w + k`;
//! * byte `64 + 128j + 16c + 4r + k` (half `j` 0..4, chunk `c` 0..8, `k`
//!   0..4): its nibble byte `32j + 4c + k`.
//!
//! Rows past the matrix's last row (the padding of the last group) are all
//! zero bytes.

use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF Q4_K super-block (256 weights).
pub const Q4_K_BLOCK_BYTES: usize = 4 + K_SCALE_BYTES + QK_K / 2;
/// Bytes of packed 6-bit scales and mins in a Q4_K / Q5_K super-block.
pub const K_SCALE_BYTES: usize = 12;
/// Rows in one Q4_Kx4 row group.
pub const Q4KX4_ROWS: usize = 4;
/// Bytes of one Q4_Kx4 super-block (4 rows x 256 weights): 4 `d`, 4 `dmin`
/// (f16), 48 scale bytes, 512 nibble bytes; 4.5 bits per weight, as GGUF.
pub const Q4KX4_BLOCK_BYTES: usize = Q4KX4_ROWS * Q4_K_BLOCK_BYTES;
/// Offset of the scale words in a Q4_Kx4 super-block.
pub const Q4KX4_SCALES_AT: usize = 4 * Q4KX4_ROWS;
/// Offset of the nibble chunks in a Q4_Kx4 super-block.
pub const Q4KX4_QS_AT: usize = Q4KX4_SCALES_AT + Q4KX4_ROWS * K_SCALE_BYTES;

const _: () = assert!(Q4_K_BLOCK_BYTES == 144 && Q4KX4_BLOCK_BYTES == 576);
const _: () = assert!(Q4KX4_SCALES_AT == 16 && Q4KX4_QS_AT == 64);

/// Where byte `i` (0..144) of row `r`'s GGUF Q4_K block sits in a Q4_Kx4
/// super-block.
#[inline]
pub fn q4_kx4_offset(r: usize, i: usize) -> usize {
    match i {
        0..2 => 2 * r + i,
        2..4 => 8 + 2 * r + (i - 2),
        4..16 => {
            let s = i - 4;
            Q4KX4_SCALES_AT + 16 * (s / 4) + 4 * r + s % 4
        }
        _ => {
            let q = i - 16;
            Q4KX4_QS_AT + 128 * (q / 32) + 16 * ((q % 32) / 4) + 4 * r + q % 4
        }
    }
}

/// Bytes of a `rows x cols` matrix of GGUF Q4_K rows (`None`: it
/// overflows).
pub fn q4_k_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, Q4_K_BLOCK_BYTES)
}

/// Bytes of a `rows x cols` matrix in Q4_Kx4, padding rows included
/// (`ceil(rows / 4) * cols / 256 * 576`: 4.5 bits per weight, as GGUF;
/// `None`: it overflows).
pub fn q4_kx4_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::row_group_bytes(rows, cols, Q4KX4_ROWS, Q4KX4_BLOCK_BYTES)
}

/// Repacks a `rows x cols` matrix of GGUF Q4_K blocks (row-major, `cols /
/// 256` blocks of 144 bytes per row) into Q4_Kx4 (`out`:
/// [`q4_kx4_bytes`] bytes; the last group's missing rows are zeros).
pub fn repack_q4_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    super::repack_row_groups_of(
        Q4KX4_ROWS,
        QK_K,
        [
            "q4_k columns (a multiple of 256)",
            "q4_k matrix bytes",
            "q4_kx4 matrix bytes",
        ],
        src,
        (rows, cols),
        out,
        (Q4_K_BLOCK_BYTES, Q4KX4_BLOCK_BYTES),
        |blocks, sb| super::scatter_rows(blocks, sb, q4_kx4_offset),
    )
}

pub mod generic {
    //! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K super-blocks, 4 rows
    //! interleaved) with Q8_K activations: the specification of the
    //! architecture kernels (docs/kernels.md, "Q4_Kx4").
    //!
    //! Per row and 256-weight super-block: the exact integer sums
    //! `sumi = sum_j sc_j * isum_j` (`isum_j` the dot of sub-block `j`'s nibbles
    //! 0..15 with its 32 activation quants) and `summ = sum_j m_j * asum_j`
    //! (`asum_j` the activation quants' sum from `act_sums`), then
    //!
    //! ```text
    //! acc = acc + (d_w * d_a) * (sumi as f32)
    //! acc = acc - (dmin_w * d_a) * (summ as f32)
    //! ```
    //!
    //! with `d_w`, `dmin_w` the f16 values widened to f32, every operation a
    //! separate IEEE f32 rounding (no fused multiply-add), super-blocks in order.
    //!
    //! Shapes: the weight is `rows x cols` (out x in, `cols` a multiple of 256)
    //! in row groups of 4 padded to whole groups; activations are `m` rows:
    //! `act_qs` `m x cols` quants, `act_d` `m x cols/256` scales, `act_sums`
    //! `m x cols/32` sums, all row-major; the output is `m x rows`, row-major.

    use super::{K_SCALE_BYTES, Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT, Q4KX4_ROWS, Q4KX4_SCALES_AT};
    use crate::generic::{gemm_k_groups, read_f16};
    use crate::layout::{QK, QK_K};
    use crate::layouts::q5k::{Q5KX4_BLOCK_BYTES, Q5KX4_QH_AT, Q5KX4_QS_AT};

    /// ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block `j`
    /// (0..8) from the 12 packed bytes of a Q4_K / Q5_K super-block.
    #[inline]
    pub fn k4_scale_min(j: usize, q: &[u8; K_SCALE_BYTES]) -> (u8, u8) {
        if j < 4 {
            (q[j] & 63, q[j + 4] & 63)
        } else {
            (
                (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
                (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
            )
        }
    }

    /// The four rows of one Q4_Kx4 row group dotted with one Q8_K activation
    /// row (`group`: `nb` super-blocks; `act_qs`: `nb * 256` quants; `act_d`:
    /// `nb` scales; `act_sums`: `nb * 8` sums).
    pub fn q4kx4_group_dot(
        group: &[u8],
        act_qs: &[i8],
        act_d: &[f32],
        act_sums: &[i16],
    ) -> [f32; Q4KX4_ROWS] {
        kx4_group_dot::<false>(group, act_qs, act_d, act_sums)
    }

    /// The dot of one row group of Q4_Kx4 (`Q5`: Q5_Kx4, whose quants add 16 x
    /// the `qh` bit) with one Q8_K activation row, in the order the module
    /// describes.
    pub(crate) fn kx4_group_dot<const Q5: bool>(
        group: &[u8],
        act_qs: &[i8],
        act_d: &[f32],
        act_sums: &[i16],
    ) -> [f32; Q4KX4_ROWS] {
        let (block_bytes, qs_at) = if Q5 {
            (Q5KX4_BLOCK_BYTES, Q5KX4_QS_AT)
        } else {
            (Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT)
        };
        let mut acc = [0.0f32; Q4KX4_ROWS];
        let blocks = group
            .chunks_exact(block_bytes)
            .zip(act_qs.chunks_exact(QK_K))
            .zip(act_d)
            .zip(act_sums.chunks_exact(QK_K / QK));
        for (((sb, a), &da), asum) in blocks {
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let mut scales = [0u8; K_SCALE_BYTES];
                for (i, s) in scales.iter_mut().enumerate() {
                    *s = sb[Q4KX4_SCALES_AT + 16 * (i / 4) + 4 * r + i % 4];
                }
                let mut sumi = 0i32;
                let mut summ = 0i32;
                for (j, &asum_j) in asum.iter().enumerate() {
                    let (sc, m) = k4_scale_min(j, &scales);
                    let half = j / 2;
                    let shift = 4 * (j % 2);
                    let mut isum = 0i32;
                    for i in 0..QK {
                        // Chunk i / 4 of half `half`: row r's bytes 4c..4c+3.
                        let at = 16 * (i / 4) + 4 * r + i % 4;
                        let byte = sb[qs_at + 128 * half + at];
                        let mut q = ((byte >> shift) & 0x0f) as i32;
                        if Q5 {
                            q |= (((sb[Q5KX4_QH_AT + at] >> j) & 1) << 4) as i32;
                        }
                        isum += q * a[QK * j + i] as i32;
                    }
                    sumi += sc as i32 * isum;
                    summ += m as i32 * asum_j as i32;
                }
                let dd = read_f16(sb, 2 * r) * da;
                let dm = read_f16(sb, 8 + 2 * r) * da;
                *acc_r += dd * sumi as f32;
                *acc_r -= dm * summ as f32;
            }
        }
        acc
    }

    forwarding_entry!(
        /// GEMV, Q4_Kx4 weights x one Q8_K activation row: `out[r] = W[r] . act`.
        ///
        /// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 576-byte super-blocks;
        /// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
        ///   `cols / 32` sums;
        /// * `out`: `rows` results.
        q8_k gemv gemv_q4_kx4_q8_k => gemm_q4_kx4_q8_k
    );

    forwarding_entry!(
        /// GEMM, Q4_Kx4 weights x `m` Q8_K activation rows: `out[t * rows + r] =
        /// W[r] . act[t]`.
        ///
        /// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 576-byte super-blocks;
        /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
        ///   `act_sums`: `m x cols / 32` sums;
        /// * `out`: `m x rows` results.
        q8_k gemm gemm_q4_kx4_q8_k => gemm_k_groups [Q4KX4_BLOCK_BYTES, kx4_group_dot::<false>]
    );
}

#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    //! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K, 4 rows interleaved) with
    //! Q8_K activations: `sdot` by lane over the unsigned nibbles, one integer
    //! sum per (row, 32-weight sub-block), times the sub-block's 6-bit scale
    //! with `mla`; the mins dotted with the activation sums by `smull`/`smlal`;
    //! then per super-block the reference's float steps (docs/kernels.md,
    //! "Q4_Kx4").

    use super::{Q4KX4_BLOCK_BYTES, Q4KX4_ROWS};
    use crate::aarch64::gemm::{entry_points, GemmKernels};
    use crate::aarch64::ktile::{
        gemv_q4k_pair, gemv_q4k_quarter, gemv_scale_sums, k_gemm_tile, k_gemv_groups, nibble_chunk,
        q4k_nibbles, quarter_scales, row_dot, row_end, rows_dot, rows_end,
    };
    use crate::layout::QK_K;
    use core::arch::asm;

    entry_points!(
        q8_k[super::generic],
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
}

#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    //! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K, 4 rows interleaved) with
    //! Q8_K activations: AVX2 tiles of one row group (4 rows) x up to 4
    //! activation rows; the GEMV is the GEMM with one activation row. The same
    //! code serves Q5_Kx4 (`layouts/q5k.rs`). With the GEMM's per-call tables,
    //! the tile adds its byte products with `vpdpbusd` when the token names
    //! AVX-VNNI (the same i32 sums; docs/kernels.md); with AVX512-VNNI a GEMM
    //! of more than one activation row takes the 512-bit tile of
    //! `gemm_vnni.rs` (16 weight rows, broadcast activations, no tables), but
    //! a Q5_Kx4 GEMM of up to 4 rows the one-stream tile with the AVX512-VL
    //! `vpdpbusd` (measured faster from DRAM; see `k_gemm`).
    //!
    //! One row group at a time, so the weights are read as one sequential
    //! stream. An earlier version read two adjacent row groups per pass (the
    //! spread activations then served 8 rows: 1.15x faster on a matrix in
    //! cache), and that made the decode read from DRAM at a third of the rate:
    //! `kestrel bench --rows 65536 --cols 1536 -t 1` (Q4_Kx4 GEMV, 56 MB) gave
    //! 8.8 GB/s with two streams against 23-25 GB/s with one, and the 1.5B
    //! model's decode went from 19.9 to 39.2 tok/s (2 threads, AMD EPYC,
    //! 2026-12-01).
    //!
    //! Per super-block and row group: the 48 scale bytes are unpacked to the
    //! eight 6-bit scales and mins of each row with byte masks and 16-bit
    //! shifts; per 64-weight half, four 32-byte loads (chunks `2i`, `2i + 1`:
    //! 4 rows x 4 bytes per 128-bit lane), `vpand 0x0F` / `vpsrlw 4` + `vpand`
    //! give the unsigned nibbles of the half's two sub-blocks; the sub-block's
    //! 32 activation bytes are spread with `vpermd` (dword `2i` in the low
    //! lane, `2i + 1` in the high one), `vpmaddubsw` (nibble 0..15 x any i8:
    //! pairs within +-3840, the four summed within +-15360, exact in i16), then
    //! `vpmaddwd` by the sub-block's scale (one i16 per row, `vpshufb` from the
    //! unpacked bytes) gives `sc * isum` in i32, added over the eight
    //! sub-blocks. The mins are dotted with the activation sums by `vpmaddwd`
    //! and a horizontal add. Then per activation row the reference's float
    //! steps on 4 lanes: `acc + (d * d_a) * sumi`, `- (dmin * d_a) * summ`.

    use super::{Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT, Q4KX4_ROWS, Q4KX4_SCALES_AT};
    use crate::layout::{QK, QK_K};
    use crate::layouts::q5k::{Q5KX4_BLOCK_BYTES, Q5KX4_QH_AT, Q5KX4_QS_AT};
    use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
    use crate::x86_64::gemm::{
        gemm_run, pattern_table, table_rows_per_call, Grid, Pass, GEMM_EXPAND_BLOCKS,
        GEMV_MAX_BLOCKS, TILE_M,
    };
    use crate::x86_64::{prefetch_ahead, vnni_forms, Avx2, Dot, Vnni};
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// The public GEMV and GEMM of Q4_Kx4 (`$q5`: Q5_Kx4) weights x Q8_K
    /// activation rows, `$gemv` and `$gemm`, through [`k_gemm`]: the names and
    /// contracts of their twins in `generic` (exact for every input bit
    /// pattern; empty shapes go to the generic code).
    macro_rules! k_entry_points {
        ($gemv:ident, $gemm:ident, $q5:literal) => {
            #[doc = concat!("GEMV, one Q8_K activation row: [`", stringify!($gemm), "`] with `m = 1` (the contract of [`super::generic::", stringify!($gemv), "`]).")]
            #[allow(clippy::too_many_arguments)]
            pub fn $gemv(
                cpu: Avx2,
                w: &[u8],
                rows: usize,
                cols: usize,
                act_qs: &[i8],
                act_d: &[f32],
                act_sums: &[i16],
                out: &mut [f32],
            ) -> Result<(), ShapeError> {
                $gemm(cpu, w, rows, cols, act_qs, act_d, act_sums, 1, out)
            }

            #[doc = concat!("GEMM, `m` Q8_K activation rows: `out[t * rows + r] = W[r] . act[t]` (the contract of [`super::generic::", stringify!($gemm), "`]).")]
            #[allow(clippy::too_many_arguments)]
            pub fn $gemm(
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
                k_gemm::<$q5>(cpu, w, rows, cols, act_qs, act_d, act_sums, m, out)
            }
        };
    }
    pub(crate) use k_entry_points;

    k_entry_points!(gemv_q4_kx4_q8_k, gemm_q4_kx4_q8_k, false);

    /// The GEMM of either layout (`Q5`: Q5_Kx4, else Q4_Kx4), shapes checked
    /// here.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn k_gemm<const Q5: bool>(
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
        let bb = if Q5 {
            Q5KX4_BLOCK_BYTES
        } else {
            Q4KX4_BLOCK_BYTES
        };
        let GemmKShape { nb, groups } = gemm_k_shape(
            Q4KX4_ROWS, bb, w, rows, cols, act_qs, act_d, act_sums, m, out,
        )?;
        if nb == 0 || m == 0 || rows == 0 {
            return if Q5 {
                crate::layouts::q5k::generic::gemm_q5_kx4_q8_k(
                    w, rows, cols, act_qs, act_d, act_sums, m, out,
                )
            } else {
                super::generic::gemm_q4_kx4_q8_k(w, rows, cols, act_qs, act_d, act_sums, m, out)
            };
        }
        let ns = cols / QK;
        // With AVX512-VNNI the 512-bit tile (four row groups, four weight
        // streams) takes every GEMM of Q4_Kx4; of Q5_Kx4 only those of more
        // than TILE_M rows: from DRAM (`kestrel bench --rows 65536 --cols 1536
        // -t 1`, AMD EPYC Zen 5, 2026-12-04) at 4 rows its Q5_K tile took 5.1
        // ms against 4.0 for the one-stream 256-bit VNNI tile below, while its
        // Q4_K tile took 2.0 against 3.3.
        let wide = if Q5 { m > TILE_M } else { m > 1 };
        if wide && cpu.vnni() == Vnni::Avx512 {
            // SAFETY: `gemm_k_shape` checked `w` (`groups` row groups of `nb`
            // super-blocks of `bb` bytes, rows <= 4 * groups), `act_qs`,
            // `act_d`, `act_sums` and `out` for `m` rows; nb, rows, m >= 1
            // (checked above); the token says AVX512-VNNI.
            unsafe {
                avx512::gemm_kx4::<Q5>(cpu, w, rows, groups, nb, act_qs, act_d, act_sums, m, out)
            };
            return Ok(());
        }
        // One activation row (a decode step: its tile forms each pattern once
        // anyway), or rows wider than the tables: no tables.
        let shape = (nb, groups, bb);
        let (a, o) = ((act_qs, act_d, act_sums), out);
        if m == 1 || ns > GEMV_MAX_BLOCKS {
            tiles::<Q5, false>(cpu, w, rows, a, m, o, shape);
        } else {
            tiles::<Q5, true>(cpu, w, rows, a, m, o, shape);
        }
        Ok(())
    }

    /// The `vpermd` patterns of every 32-quant block of activation rows
    /// `c0..c1` (`ns` blocks each), formed once per call of the driver into
    /// `table` instead of again for every row group; none without `TABLES`.
    fn call_patterns<'t, const TABLES: bool>(
        cpu: Avx2,
        act_qs: &[i8],
        (c0, c1, ns): (usize, usize, usize),
        table: &'t mut [MaybeUninit<[__m256i; 4]>; GEMM_EXPAND_BLOCKS],
    ) -> &'t [[__m256i; 4]] {
        if TABLES {
            let qs = &act_qs[c0 * ns * QK..c1 * ns * QK];
            pattern_table(cpu, qs, (c1 - c0) * ns, table)
        } else {
            &[]
        }
    }

    /// Every row group against the `m` activation rows on the driver
    /// [`gemm_run`], in tiles of up to [`TILE_M`] rows (`nb` super-blocks of
    /// `bb` bytes per row group); with `TABLES`, in calls of
    /// [`table_rows_per_call`] rows whose tiles read the call's `patterns`
    /// (row `t`'s 32-quant block `k` at `t * cols / 32 + k`).
    fn tiles<const Q5: bool, const TABLES: bool>(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        (act_qs, act_d, act_sums): (&[i8], &[f32], &[i16]),
        m: usize,
        out: &mut [f32],
        (nb, groups, bb): (usize, usize, usize),
    ) {
        let group_bytes = nb * bb;
        let (cols, ns) = (nb * QK_K, nb * (QK_K / QK));
        let group = |g: usize| &w[g * group_bytes..(g + 1) * group_bytes];
        let call_rows = if TABLES { table_rows_per_call(ns) } else { m };
        // Activation rows t0..t0 + tm: their quants, scales and sums, and
        // with TABLES their patterns in the call's table from row c0.
        let acts = move |t0: usize, tm: usize| {
            (
                &act_qs[t0 * cols..(t0 + tm) * cols],
                &act_d[t0 * nb..(t0 + tm) * nb],
                &act_sums[t0 * ns..(t0 + tm) * ns],
            )
        };
        // Rows t0..t0 + tm of the call's patterns (from row c0).
        fn rows_of<const TABLES: bool>(
            pt: &[[__m256i; 4]],
            (c0, t0, tm, ns): (usize, usize, usize, usize),
        ) -> &[[__m256i; 4]] {
            if TABLES {
                &pt[(t0 - c0) * ns..(t0 - c0 + tm) * ns]
            } else {
                pt
            }
        }
        if TABLES && cpu.vnni() == Vnni::Avx {
            // The AVX-VNNI tile (taken with tables only, as it requires) reads
            // two row groups per pass; an odd last group is paired with itself
            // and only its own rows are stored.
            let grid = Grid {
                rows,
                units: groups.div_ceil(2),
                m,
                call_rows,
            };
            gemm_run(grid, out, |pass: Pass<'_, 8, TILE_M>| {
                let c0 = pass.first;
                let mut table = [MaybeUninit::<[__m256i; 4]>::uninit(); GEMM_EXPAND_BLOCKS];
                let patterns = call_patterns::<TABLES>(cpu, act_qs, (c0, pass.end, ns), &mut table);
                pass.tiles(|pair, t0, tn, res| {
                    let w2 = [group(2 * pair), group((2 * pair + 1).min(groups - 1))];
                    let (qs, d, s) = acts(t0, tn);
                    let pt = rows_of::<TABLES>(patterns, (c0, t0, tn, ns));
                    let mut r = [[[0.0f32; Q4KX4_ROWS]; TILE_M]; 2];
                    // SAFETY: `w2` are row groups of `nb` super-blocks (of the
                    // layout `Q5` names), `qs`, `d` and `s` hold `tn`
                    // activation rows of `cols` quants, `nb` scales and `cols /
                    // 32` sums (lengths checked by gemm_k_shape), `pt` their
                    // `cols / 32` patterns each (sliced above); each tile holds
                    // TILE_M >= tn rows; the token proves AVX2, FMA, F16C and
                    // AVX-VNNI.
                    unsafe {
                        match tn {
                            1 => kx4_tile_avx_vnni::<1, Q5>(w2, qs, d, s, pt, nb, &mut r),
                            2 => kx4_tile_avx_vnni::<2, Q5>(w2, qs, d, s, pt, nb, &mut r),
                            3 => kx4_tile_avx_vnni::<3, Q5>(w2, qs, d, s, pt, nb, &mut r),
                            _ => kx4_tile_avx_vnni::<4, Q5>(w2, qs, d, s, pt, nb, &mut r),
                        }
                    }
                    for (t, row) in res.iter_mut().enumerate().take(tn) {
                        row[..Q4KX4_ROWS].copy_from_slice(&r[0][t]);
                        row[Q4KX4_ROWS..].copy_from_slice(&r[1][t]);
                    }
                });
            });
            return;
        }
        // One row group per tile: the AVX2 tile, or with AVX512-VNNI (a
        // decode step of Q5_Kx4: the 512-bit tile took the rest) its
        // 256-bit VNNI form.
        let vnni512 = TABLES && cpu.vnni() == Vnni::Avx512;
        let grid = Grid {
            rows,
            units: groups,
            m,
            call_rows,
        };
        gemm_run(grid, out, |pass: Pass<'_, Q4KX4_ROWS, TILE_M>| {
            let c0 = pass.first;
            let mut table = [MaybeUninit::<[__m256i; 4]>::uninit(); GEMM_EXPAND_BLOCKS];
            let patterns = call_patterns::<TABLES>(cpu, act_qs, (c0, pass.end, ns), &mut table);
            pass.tiles(|g, t0, tn, res| {
                let wa = group(g);
                let (qs, d, s) = acts(t0, tn);
                let pt = rows_of::<TABLES>(patterns, (c0, t0, tn, ns));
                // SAFETY: `wa` is a row group of `nb` super-blocks (of the
                // layout `Q5` names), `qs`, `d` and `s` hold `tn` activation
                // rows of `cols` quants, `nb` scales and `cols / 32` sums
                // (lengths checked by gemm_k_shape), with TABLES `pt` their
                // `cols / 32` patterns each (sliced above); `res` holds TILE_M
                // >= tn rows; the token proves AVX2, FMA and F16C and, where
                // taken (with TABLES only), AVX512-VNNI.
                unsafe {
                    if vnni512 {
                        let w1 = [wa];
                        let r1 = core::array::from_mut(res);
                        match tn {
                            1 => kx4_tile_avx512_vnni::<1, Q5>(w1, qs, d, s, pt, nb, r1),
                            2 => kx4_tile_avx512_vnni::<2, Q5>(w1, qs, d, s, pt, nb, r1),
                            3 => kx4_tile_avx512_vnni::<3, Q5>(w1, qs, d, s, pt, nb, r1),
                            _ => kx4_tile_avx512_vnni::<4, Q5>(w1, qs, d, s, pt, nb, r1),
                        }
                    } else {
                        match tn {
                            1 => kx4_tile::<1, Q5, TABLES>(wa, qs, d, s, pt, nb, res),
                            2 => kx4_tile::<2, Q5, TABLES>(wa, qs, d, s, pt, nb, res),
                            3 => kx4_tile::<3, Q5, TABLES>(wa, qs, d, s, pt, nb, res),
                            _ => kx4_tile::<4, Q5, TABLES>(wa, qs, d, s, pt, nb, res),
                        }
                    }
                }
            });
        });
    }

    /// One row group x `T` activation rows, all `nb` super-blocks, of Q4_Kx4
    /// (`Q5` false) or Q5_Kx4 (`Q5` true: the nibbles get their fifth bit from
    /// the `qh` chunks, bit `j` moved to bit 4 with a 16-bit shift and a mask;
    /// quants 0..31 keep the four `vpmaddubsw` sums within +-31744, exact).
    ///
    /// With `TABLES` the activations' `vpermd` patterns come from `pt` (row
    /// `t`'s 32-quant block `k` at `t * nb * 8 + k`, [`act_patterns`]'s four
    /// registers: the spreads of dwords `2i`, `2i + 1`), formed once per batch.
    ///
    /// # Safety
    /// `w` must hold `nb` super-blocks (`nb * 576` or `nb * 704` bytes), `qs`
    /// `T * nb * 256` quants, `d` `T * nb` scales, `s` `T * nb * 8` sums, with
    /// `TABLES` `pt` `T * nb * 8` patterns, `T <= TILE_M`, and the CPU must
    /// implement AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn kx4_tile<const T: usize, const Q5: bool, const TABLES: bool>(
        w: &[u8],
        qs: &[i8],
        d: &[f32],
        s: &[i16],
        pt: &[[__m256i; 4]],
        nb: usize,
        tile: &mut [[f32; Q4KX4_ROWS]; TILE_M],
    ) {
        let tiles = core::array::from_mut(tile);
        // SAFETY: the contract of this function is the body's with one row
        // group.
        unsafe { kx4_tile_body::<T, 1, Q5, TABLES, { Dot::MADDUBS }>([w], qs, d, s, pt, nb, tiles) }
    }

    // Two row groups `w` x `T` activation rows (8 weight rows, so each
    // activation pattern read from the table serves two `vpdpbusd`), with
    // tables, the byte products summed by the AVX-VNNI `vpdpbusd`: the same
    // i32 sums as [`kx4_tile`]'s, so the same results; `tiles[g]` receives
    // group `g`'s rows. (AVX512-VNNI takes the 512-bit tile of `gemm_vnni.rs`.)
    vnni_forms!(avx: kx4_tile_avx_vnni<const T: usize, const Q5: bool>(
        w: [&[u8]; 2],
        qs: &[i8],
        d: &[f32],
        s: &[i16],
        pt: &[[__m256i; 4]],
        nb: usize,
        tiles: &mut [[[f32; Q4KX4_ROWS]; TILE_M]; 2],
    ) => kx4_tile_body::<T, 2, Q5, true, DOT>);

    // One row group `w` x `T` activation rows with tables, the byte products
    // summed by the AVX512-VL `vpdpbusd` on 256-bit registers: one weight
    // stream, for Q5_Kx4 GEMMs of up to [`TILE_M`] activation rows with
    // AVX512-VNNI (see `k_gemm`); the same i32 sums as [`kx4_tile`]'s, so the
    // same results.
    vnni_forms!(avx512: kx4_tile_avx512_vnni<const T: usize, const Q5: bool>(
        w: [&[u8]; 1],
        qs: &[i8],
        d: &[f32],
        s: &[i16],
        pt: &[[__m256i; 4]],
        nb: usize,
        tiles: &mut [[[f32; Q4KX4_ROWS]; TILE_M]; 1],
    ) => kx4_tile_body::<T, 1, Q5, true, DOT>);

    /// The body of the two tiles, inlined into each so that it is compiled
    /// with its caller's features: `G` row groups (`w`, one stream each; the
    /// AVX2 form takes one, the AVX-VNNI form two) against the same `T`
    /// activation rows, `DOT` [`Dot::MADDUBS`] or [`Dot::AVX_VNNI`] (then
    /// `TABLES` must be true). The AVX-VNNI form adds each load's byte products per (row,
    /// 4-byte chunk) in i32 with `vpdpbusd` (the sub-block's even chunks in the
    /// low 128-bit lane, odd in the high, as the i16 sums of the AVX2 form) and
    /// apply the sub-block's scale with `vpmulld` (the scale byte as an i32 per
    /// row): the i32 the AVX2 form's `vpmaddwd` gives. Each group's sums and
    /// float steps are those of a one-group tile, in the same order.
    ///
    /// # Safety
    /// As [`kx4_tile`] for each of `w`, and the CPU must implement the `DOT`
    /// form.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kx4_tile_body<
        const T: usize,
        const G: usize,
        const Q5: bool,
        const TABLES: bool,
        const DOT: u8,
    >(
        w: [&[u8]; G],
        qs: &[i8],
        d: &[f32],
        s: &[i16],
        pt: &[[__m256i; 4]],
        nb: usize,
        tiles: &mut [[[f32; Q4KX4_ROWS]; TILE_M]; G],
    ) {
        const { assert!(DOT == Dot::MADDUBS || TABLES) };
        debug_assert!(T <= TILE_M);
        let bb = if Q5 {
            Q5KX4_BLOCK_BYTES
        } else {
            Q4KX4_BLOCK_BYTES
        };
        let qs_at = if Q5 { Q5KX4_QS_AT } else { Q4KX4_QS_AT };
        debug_assert!(w.iter().all(|wg| wg.len() >= nb * bb));
        debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb && s.len() >= T * nb * 8);
        let cols = nb * QK_K;
        // SAFETY: every pointer below is inside its slice per the function
        // contract: super-block `b` of group `g` is w[g][bb * b..bb * (b + 1)], row `t`'s
        // sub-block `k` of super-block `b` is qs[t * cols + 256b + 32k..][..32],
        // its sums s[t * nb * 8 + 8b..][..8], its scale d[t * nb + b]; all loads
        // are unaligned; the CPU implements AVX2, FMA and F16C.
        unsafe {
            let m0f = _mm256_set1_epi8(0x0f);
            let m3f = _mm_set1_epi8(0x3f);
            let m0f128 = _mm_set1_epi8(0x0f);
            let m30 = _mm_set1_epi8(0x30);
            // vpermd patterns: dword 2i in the low lane, 2i + 1 in the high one.
            let idx = [
                _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
                _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5),
                _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7),
            ];
            // vpshufb patterns: byte k of each row's dword as an i16, twice.
            let mk = |k: i8| {
                let z = -128i8;
                let lane = [
                    k,
                    z,
                    k,
                    z,
                    4 + k,
                    z,
                    4 + k,
                    z,
                    8 + k,
                    z,
                    8 + k,
                    z,
                    12 + k,
                    z,
                    12 + k,
                    z,
                ];
                let v = _mm_loadu_si128(lane.as_ptr().cast());
                _mm256_broadcastsi128_si256(v)
            };
            let pick = [mk(0), mk(1), mk(2), mk(3)];
            // vpshufb patterns: byte k of each row's dword as an i32 (VNNI forms).
            let mk32 = |k: i8| {
                let z = -128i8;
                let lane = [k, z, z, z, 4 + k, z, z, z, 8 + k, z, z, z, 12 + k, z, z, z];
                let v = _mm_loadu_si128(lane.as_ptr().cast());
                _mm256_broadcastsi128_si256(v)
            };
            let pick32 = [mk32(0), mk32(1), mk32(2), mk32(3)];
            let zero = _mm256_setzero_si256();
            let mut acc = [[_mm_setzero_ps(); T]; G];
            for b in 0..nb {
                let sb = w.map(|wg| wg.as_ptr().add(b * bb));
                let mut scb = [[zero; 2]; G];
                let mut mins = [[zero; 2]; G];
                for g in 0..G {
                    prefetch_ahead(sb[g], bb);
                    // Scales and mins: rows as dwords, sub-blocks as bytes.
                    let r0 = _mm_loadu_si128(sb[g].add(Q4KX4_SCALES_AT).cast());
                    let r1 = _mm_loadu_si128(sb[g].add(Q4KX4_SCALES_AT + 16).cast());
                    let r2 = _mm_loadu_si128(sb[g].add(Q4KX4_SCALES_AT + 32).cast());
                    let sc_lo = _mm_and_si128(r0, m3f);
                    let mn_lo = _mm_and_si128(r1, m3f);
                    // (q >> 6) << 4 per byte is (word >> 2) & 0x30.
                    let sc_hi = _mm_or_si128(
                        _mm_and_si128(r2, m0f128),
                        _mm_and_si128(_mm_srli_epi16(r0, 2), m30),
                    );
                    let mn_hi = _mm_or_si128(
                        _mm_and_si128(_mm_srli_epi16(r2, 4), m0f128),
                        _mm_and_si128(_mm_srli_epi16(r1, 2), m30),
                    );
                    scb[g] = [
                        _mm256_broadcastsi128_si256(sc_lo),
                        _mm256_broadcastsi128_si256(sc_hi),
                    ];
                    mins[g] = [_mm256_cvtepu8_epi16(mn_lo), _mm256_cvtepu8_epi16(mn_hi)];
                }
                let mut sumi = [[zero; T]; G];
                for j in 0..4 {
                    let mut slo = [[zero; T]; G];
                    let mut shi = [[zero; T]; G];
                    for (i, &ix) in idx.iter().enumerate() {
                        let mut lo = [zero; G];
                        let mut hi = [zero; G];
                        for g in 0..G {
                            let wv = _mm256_loadu_si256(sb[g].add(qs_at + 128 * j + 32 * i).cast());
                            lo[g] = _mm256_and_si256(wv, m0f);
                            hi[g] = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m0f);
                            if Q5 {
                                let qh = _mm256_loadu_si256(sb[g].add(Q5KX4_QH_AT + 32 * i).cast());
                                lo[g] = _mm256_or_si256(lo[g], bit_to_4(qh, 2 * j));
                                hi[g] = _mm256_or_si256(hi[g], bit_to_4(qh, 2 * j + 1));
                            }
                        }
                        for t in 0..T {
                            let (alo, ahi) = if TABLES {
                                // Blocks 2j and 2j + 1 of super-block b.
                                let k = t * nb * 8 + 8 * b + 2 * j;
                                (pt.get_unchecked(k)[i], pt.get_unchecked(k + 1)[i])
                            } else {
                                let a = qs.as_ptr().add(t * cols + QK_K * b + 64 * j);
                                let lo = _mm256_loadu_si256(a.cast());
                                let hi = _mm256_loadu_si256(a.add(QK).cast());
                                (
                                    _mm256_permutevar8x32_epi32(lo, ix),
                                    _mm256_permutevar8x32_epi32(hi, ix),
                                )
                            };
                            for g in 0..G {
                                let (sl, sh) = (&mut slo[g][t], &mut shi[g][t]);
                                if DOT == Dot::MADDUBS {
                                    *sl = _mm256_add_epi16(*sl, _mm256_maddubs_epi16(lo[g], alo));
                                    *sh = _mm256_add_epi16(*sh, _mm256_maddubs_epi16(hi[g], ahi));
                                } else if DOT == Dot::AVX_VNNI {
                                    *sl = crate::x86_64::dpbusd_vex(*sl, lo[g], alo);
                                    *sh = crate::x86_64::dpbusd_vex(*sh, hi[g], ahi);
                                } else {
                                    *sl = _mm256_dpbusd_epi32(*sl, lo[g], alo);
                                    *sh = _mm256_dpbusd_epi32(*sh, hi[g], ahi);
                                }
                            }
                        }
                    }
                    let (p0, p1) = if DOT == Dot::MADDUBS {
                        (pick[(2 * j) % 4], pick[(2 * j + 1) % 4])
                    } else {
                        (pick32[(2 * j) % 4], pick32[(2 * j + 1) % 4])
                    };
                    for g in 0..G {
                        let sc0 = _mm256_shuffle_epi8(scb[g][j / 2], p0);
                        let sc1 = _mm256_shuffle_epi8(scb[g][j / 2], p1);
                        for t in 0..T {
                            let p = if DOT == Dot::MADDUBS {
                                _mm256_add_epi32(
                                    _mm256_madd_epi16(slo[g][t], sc0),
                                    _mm256_madd_epi16(shi[g][t], sc1),
                                )
                            } else {
                                _mm256_add_epi32(
                                    _mm256_mullo_epi32(slo[g][t], sc0),
                                    _mm256_mullo_epi32(shi[g][t], sc1),
                                )
                            };
                            sumi[g][t] = _mm256_add_epi32(sumi[g][t], p);
                        }
                    }
                }
                for g in 0..G {
                    let dw = _mm_cvtph_ps(_mm_loadl_epi64(sb[g].cast()));
                    let dmw = _mm_cvtph_ps(_mm_loadl_epi64(sb[g].add(8).cast()));
                    for t in 0..T {
                        // summ: mins of rows 0-3 (i16, 4 per row) times the sums.
                        let sp = s.as_ptr().add(t * nb * 8 + 8 * b);
                        let s_lo = _mm256_set1_epi64x(sp.cast::<i64>().read_unaligned());
                        let s_hi = _mm256_set1_epi64x(sp.add(4).cast::<i64>().read_unaligned());
                        let p = _mm256_add_epi32(
                            _mm256_madd_epi16(mins[g][0], s_lo),
                            _mm256_madd_epi16(mins[g][1], s_hi),
                        );
                        let h = _mm256_hadd_epi32(p, p);
                        let summ = _mm_unpacklo_epi64(
                            _mm256_castsi256_si128(h),
                            _mm256_extracti128_si256(h, 1),
                        );
                        let si = _mm_add_epi32(
                            _mm256_castsi256_si128(sumi[g][t]),
                            _mm256_extracti128_si256(sumi[g][t], 1),
                        );
                        let da = _mm_set1_ps(*d.get_unchecked(t * nb + b));
                        let dd = _mm_mul_ps(dw, da);
                        let dm = _mm_mul_ps(dmw, da);
                        let a = &mut acc[g][t];
                        *a = _mm_add_ps(*a, _mm_mul_ps(dd, _mm_cvtepi32_ps(si)));
                        *a = _mm_sub_ps(*a, _mm_mul_ps(dm, _mm_cvtepi32_ps(summ)));
                    }
                }
            }
            for g in 0..G {
                for t in 0..T {
                    _mm_storeu_ps(tiles[g][t].as_mut_ptr(), acc[g][t]);
                }
            }
        }
    }

    /// Bit `b` (0..8) of every byte of `v`, moved to bit 4 (0x10 or 0).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn bit_to_4(v: __m256i, b: usize) -> __m256i {
        // A 16-bit shift by at most 4 keeps bit 4 of each byte coming from the
        // same byte.
        let s = match b {
            0 => _mm256_slli_epi16::<4>(v),
            1 => _mm256_slli_epi16::<3>(v),
            2 => _mm256_slli_epi16::<2>(v),
            3 => _mm256_slli_epi16::<1>(v),
            4 => v,
            5 => _mm256_srli_epi16::<1>(v),
            6 => _mm256_srli_epi16::<2>(v),
            _ => _mm256_srli_epi16::<3>(v),
        };
        _mm256_and_si256(s, _mm256_set1_epi8(0x10))
    }

    /// The 512-bit AVX512-VNNI tile of Q4_Kx4 and Q5_Kx4 (four row groups,
    /// 16 weight rows, activations broadcast; `x86_64/gemm_vnni.rs`'s call
    /// and tile loops), which [`k_gemm`] takes for GEMMs of more than one
    /// activation row (Q5_Kx4: more than [`TILE_M`]).
    pub(crate) mod avx512 {
        use crate::layout::{QK, QK_K};
        use crate::layouts::q4k::{Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT, Q4KX4_SCALES_AT};
        use crate::layouts::q5k::{Q5KX4_BLOCK_BYTES, Q5KX4_QH_AT, Q5KX4_QS_AT};
        use crate::x86_64::gemm::{gemm_run, Grid, Pass};
        use crate::x86_64::gemm_vnni::avx512::{f16_quarters, load_quarters, prefetch};
        use crate::x86_64::gemm_vnni::{for_each_row, with_rows, MAX_ROWS, TILE_M};
        use crate::x86_64::{Avx2, Vnni};
        use core::arch::x86_64::*;

        /// GEMM, Q4_Kx4 (`Q5` false) or Q5_Kx4 weights x `m` Q8_K activation
        /// rows with the 512-bit tile: the contract of [`super::k_gemm`] after its
        /// shape checks, for `nb >= 1`, `rows >= 1`, `m >= 1`. No tables: the
        /// nibbles are unsigned and the mins take the activations' own sums.
        /// Activation rows in calls of at most [`MAX_ROWS`] (their quants stay
        /// in L2 while every unit of 16 weight rows passes), tiles of up to
        /// [`TILE_M`].
        ///
        /// # Safety
        /// `w` holds `groups` row groups of `nb` super-blocks (576 bytes,
        /// Q5_Kx4: 704) with `rows <= 4 * groups`, `act_qs` `m * nb * 256`
        /// quants, `act_d` `m * nb` scales, `act_sums` `m * nb * 8` sums, `out`
        /// `m * rows` floats; the token says `Vnni::Avx512`.
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn gemm_kx4<const Q5: bool>(
            cpu: Avx2,
            w: &[u8],
            rows: usize,
            groups: usize,
            nb: usize,
            act_qs: &[i8],
            act_d: &[f32],
            act_sums: &[i16],
            m: usize,
            out: &mut [f32],
        ) {
            debug_assert!(cpu.vnni() == Vnni::Avx512 && nb >= 1 && rows >= 1 && m >= 1);
            let bb = if Q5 {
                Q5KX4_BLOCK_BYTES
            } else {
                Q4KX4_BLOCK_BYTES
            };
            let (cols, ns, group_bytes) = (nb * QK_K, nb * (QK_K / QK), nb * bb);
            // Row groups in fours (16 rows per vector); past the last group the
            // last one is repeated and only real rows are stored.
            let group = |g: usize| &w[g.min(groups - 1) * group_bytes..][..group_bytes];
            let grid = Grid {
                rows,
                units: groups.div_ceil(4),
                m,
                call_rows: MAX_ROWS,
            };
            gemm_run(grid, out, |pass: Pass<'_, 16, TILE_M>| {
                pass.tiles(|unit, t0, tm, res| {
                    let g: [&[u8]; 4] = core::array::from_fn(|j| group(4 * unit + j));
                    let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
                    let d = &act_d[t0 * nb..(t0 + tm) * nb];
                    let s = &act_sums[t0 * ns..(t0 + tm) * ns];
                    // SAFETY: each of `g` is a whole row group (`nb` super-blocks
                    // of `bb` bytes, sliced above); `qs`, `d` and `s` hold `tm`
                    // (1 to TILE_M) activation rows of `cols` quants, `nb` scales
                    // and `ns` sums (sliced above); the token proves AVX512-VNNI
                    // with F/BW/VL.
                    unsafe { with_rows!(tm, kx4_tile[Q5](g, qs, d, s, nb, res)) };
                });
            });
        }

        /// `v` shifted so that bit `j` (0..8) of every byte is at bit 4 (the
        /// other bits are left as they fall: a 32-bit shift by at most 4 brings
        /// only the byte's own bit `j` to bit 4).
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        fn bit_to_4(v: __m512i, j: usize) -> __m512i {
            match j {
                0 => _mm512_slli_epi32::<4>(v),
                1 => _mm512_slli_epi32::<3>(v),
                2 => _mm512_slli_epi32::<2>(v),
                3 => _mm512_slli_epi32::<1>(v),
                4 => v,
                5 => _mm512_srli_epi32::<1>(v),
                6 => _mm512_srli_epi32::<2>(v),
                _ => _mm512_srli_epi32::<3>(v),
            }
        }

        /// One Q4_Kx4 (`Q5` false) or Q5_Kx4 weight tile (the four row groups
        /// `g`, 16 rows) against `T` Q8_K activation rows: `res[t]` = the 4
        /// rows of `g[0]`, then of `g[1]`, ...
        ///
        /// Per super-block: the three scale words of the four groups fill the
        /// quarters of three registers (lane `i` = row `i`; byte `k` of a lane
        /// is the row's `scales[4w + k]`), unpacked as in the AVX2 tile to the
        /// 8 scales and 8 mins as bytes; `vpshufb` makes sub-block `j`'s scale
        /// an i32 per row, and the mins i16 pairs. Per half `h`, nibble chunk
        /// `c` of the four groups fills one register (lane `i` = row `i`'s
        /// weights `4c..4c+3` of sub-block `2h` in its low nibbles, of `2h + 1`
        /// in its high ones; Q5_Kx4: `qh` chunk `c`'s bit `2h` or `2h + 1`
        /// brought to bit 4 and merged with `vpternlogd`). Per activation row,
        /// two chains of eight `vpdpbusd` with the activation dwords broadcast
        /// give the two sub-blocks' `isum` (exact: |.| <= 32 * 31 * 128), and
        /// `vpmulld` by their scales adds `sc_j * isum_j` to `sumi`; `summ` is
        /// four `vpdpwssd` of the min pairs with the activation's i16 sum pairs.
        /// Then the reference's float steps in its order: `acc + (d * d_a) *
        /// sumi`, `- (dmin * d_a) * summ`. Every integer is exact in i32, so
        /// the outputs are the reference's bits.
        ///
        /// # Safety
        /// Every `g[j].len()` must be at least `nb` super-blocks (576 bytes,
        /// Q5_Kx4: 704), `qs.len()` at least `T * nb * 256`, `d.len()` at least
        /// `T * nb`, `s.len()` at least `T * nb * 8`, `1 <= T <= TILE_M`, and
        /// the CPU must implement AVX512-VNNI with AVX512 F/BW/VL.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        unsafe fn kx4_tile<const T: usize, const Q5: bool>(
            g: [&[u8]; 4],
            qs: &[i8],
            d: &[f32],
            s: &[i16],
            nb: usize,
            res: &mut [[f32; 16]; TILE_M],
        ) {
            let (bb, qs_at) = if Q5 {
                (Q5KX4_BLOCK_BYTES, Q5KX4_QS_AT)
            } else {
                (Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT)
            };
            debug_assert!(T <= TILE_M && g.iter().all(|g| g.len() >= nb * bb));
            debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb && s.len() >= T * nb * 8);
            let cols = nb * QK_K;
            let m0f = _mm512_set1_epi8(0x0F);
            let m3f = _mm512_set1_epi8(0x3F);
            let m30 = _mm512_set1_epi8(0x30);
            let b4 = _mm512_set1_epi8(0x10);
            // A `vpshufb` pattern per 128-bit lane (`-128`: a zero byte), from
            // `f(i)` for the lane's dword `i`.
            let pattern = |f: &dyn Fn(i8) -> [i8; 4]| {
                let mut lane = [0i8; 16];
                for i in 0..4 {
                    lane[4 * i as usize..][..4].copy_from_slice(&f(4 * i));
                }
                // SAFETY: `lane` is 16 readable bytes; unaligned load.
                _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(lane.as_ptr().cast()) })
            };
            let z = -128i8;
            // Byte k of each row's dword as an i32.
            let byte: [__m512i; 4] = core::array::from_fn(|k| {
                let k = k as i8;
                pattern(&|o| [o + k, z, z, z])
            });
            // Bytes k, k + 1 of each row's dword as two i16.
            let pair: [__m512i; 2] = core::array::from_fn(|p| {
                let k = 2 * p as i8;
                pattern(&|o| [o + k, z, o + k + 1, z])
            });
            let zero = _mm512_setzero_si512();
            let mut acc = [_mm512_setzero_ps(); T];
            for b in 0..nb {
                // SAFETY: block b < nb of every group is bytes `bb * b .. bb *
                // (b + 1)` (the function contract).
                let p: [*const u8; 4] =
                    core::array::from_fn(|j| unsafe { g[j].as_ptr().add(b * bb) });
                // The next four groups follow the last one (when they exist).
                prefetch(p[3], nb * bb + 3 * b * bb, 4 * bb);
                // SAFETY: every `quarters` below reads bytes `at .. at + 16 <=
                // bb` (scale words, `qh` and nibble chunks) of each super-block.
                let quarters = |at: usize| unsafe { load_quarters(&p, at) };
                // Scales and mins, sub-blocks as bytes: [0..4], [4..8].
                let w0 = quarters(Q4KX4_SCALES_AT);
                let w1 = quarters(Q4KX4_SCALES_AT + 16);
                let w2 = quarters(Q4KX4_SCALES_AT + 32);
                let sc = [
                    _mm512_and_si512(w0, m3f),
                    // (s >> 6) << 4 per byte is (word >> 2) & 0x30.
                    _mm512_or_si512(
                        _mm512_and_si512(w2, m0f),
                        _mm512_and_si512(_mm512_srli_epi16::<2>(w0), m30),
                    ),
                ];
                let mn = [
                    _mm512_and_si512(w1, m3f),
                    _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi16::<4>(w2), m0f),
                        _mm512_and_si512(_mm512_srli_epi16::<2>(w1), m30),
                    ),
                ];
                let mut sumi = [zero; T];
                for h in 0..4 {
                    // The scales of sub-blocks 2h and 2h + 1, an i32 per row.
                    let sc0 = _mm512_shuffle_epi8(sc[h / 2], byte[(2 * h) % 4]);
                    let sc1 = _mm512_shuffle_epi8(sc[h / 2], byte[(2 * h + 1) % 4]);
                    // [q of sub-block 2h, of 2h + 1], weights 4c..4c+3, 16 rows;
                    // 0xF8: a | (b & c).
                    let q: [(__m512i, __m512i); 8] = core::array::from_fn(|c| {
                        let x = quarters(qs_at + 128 * h + 16 * c);
                        let lo = _mm512_and_si512(x, m0f);
                        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(x), m0f);
                        if Q5 {
                            let qh = quarters(Q5KX4_QH_AT + 16 * c);
                            (
                                _mm512_ternarylogic_epi32::<0xF8>(lo, bit_to_4(qh, 2 * h), b4),
                                _mm512_ternarylogic_epi32::<0xF8>(hi, bit_to_4(qh, 2 * h + 1), b4),
                            )
                        } else {
                            (lo, hi)
                        }
                    });
                    for_each_row!(T, |t| {
                        // SAFETY: row t < T, half h of super-block b < nb: bytes
                        // `t * cols + 256b + 64h ..` + 64 of `qs` (the function
                        // contract).
                        let a =
                            unsafe { qs.as_ptr().add(t * cols + QK_K * b + 64 * h) }.cast::<i32>();
                        // SAFETY: dword k < 16 of those 64 bytes; unaligned read.
                        let a = |k: usize| _mm512_set1_epi32(unsafe { a.add(k).read_unaligned() });
                        let (mut il, mut ih) = (zero, zero);
                        for (c, &(ql, qh)) in q.iter().enumerate() {
                            il = _mm512_dpbusd_epi32(il, ql, a(c));
                            ih = _mm512_dpbusd_epi32(ih, qh, a(8 + c));
                        }
                        let p = _mm512_add_epi32(
                            _mm512_mullo_epi32(il, sc0),
                            _mm512_mullo_epi32(ih, sc1),
                        );
                        sumi[t] = _mm512_add_epi32(sumi[t], p);
                    });
                }
                // The mins as i16 pairs (sub-blocks 2p, 2p + 1) per row.
                let mp = [
                    _mm512_shuffle_epi8(mn[0], pair[0]),
                    _mm512_shuffle_epi8(mn[0], pair[1]),
                    _mm512_shuffle_epi8(mn[1], pair[0]),
                    _mm512_shuffle_epi8(mn[1], pair[1]),
                ];
                // The 16 rows' `d` and `dmin` (4 of each group).
                // SAFETY: bytes 0..16 of every super-block.
                let (dw, dmw) = unsafe { (f16_quarters(&p, 0), f16_quarters(&p, 8)) };
                for_each_row!(T, |t| {
                    // SAFETY: row t < T, super-block b < nb: sums `t * nb * 8 + 8b
                    // ..` + 8 of `s` and scale `t * nb + b` of `d` (the function
                    // contract); unaligned reads.
                    let (sp, da) = unsafe {
                        (
                            s.as_ptr().add(t * nb * 8 + 8 * b).cast::<i32>(),
                            *d.get_unchecked(t * nb + b),
                        )
                    };
                    let mut summ = zero;
                    for (k, &m) in mp.iter().enumerate() {
                        // SAFETY: i16 pair k < 4 of the 8 sums above.
                        let pair = _mm512_set1_epi32(unsafe { sp.add(k).read_unaligned() });
                        summ = _mm512_dpwssd_epi32(summ, m, pair);
                    }
                    let da = _mm512_set1_ps(da);
                    let (dd, dm) = (_mm512_mul_ps(dw, da), _mm512_mul_ps(dmw, da));
                    let a = _mm512_add_ps(acc[t], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sumi[t])));
                    acc[t] = _mm512_sub_ps(a, _mm512_mul_ps(dm, _mm512_cvtepi32_ps(summ)));
                });
            }
            for (r, a) in res.iter_mut().zip(acc) {
                // SAFETY: `r` is 16 writable floats.
                unsafe { _mm512_storeu_ps(r.as_mut_ptr(), a) };
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
