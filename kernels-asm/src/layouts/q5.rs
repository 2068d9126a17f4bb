//! Q5_0x4 and Q5_1x4, the whole layouts in one file: GGUF Q5_0 / Q5_1
//! blocks, 4 rows interleaved, holding every block's values exactly
//! (docs/kernels.md "Q5_0x4 and Q5_1x4"). Here are their byte order, their
//! repackers (the inverses, which only the tests use, are
//! `kestrel_tests::unpack_q5_0` and `unpack_q5_1`), their scalar
//! specification ([`generic`]) and their kernels on aarch64 (`sdot` loops
//! and 4-row tiles on the one driver) and x86_64 (AVX2 and VNNI tiles; with
//! AVX512-VNNI the 4-row nibble family's 512-bit tile `gemm_nib4`), the one
//! of the build also named [`arch`]. Their geometry constants stay in
//! `crate::layout` beside Q4_0x4's: the nibble family's 512-bit tile
//! (`x86_64/gemm_vnni.rs`) reads all three.
//!
//! For row group `g` and block column `b` there is one 88-byte super-block
//! at `(g * nb + b) * 88`:
//!
//! * bytes `0..8`: the four rows' `d` (f16 LE, row 0 first);
//! * bytes `8..72`: 64 nibble bytes; byte `8 + 16c + 4r + k` (chunk `c`,
//!   row `r`, `k` 0..4) is byte `4c + k` of row `r`'s GGUF `qs`, unchanged:
//!   the low 4 bits of weights `4c + k` (low nibble) and `16 + 4c + k` (high
//!   nibble), as Q4_0x4 without its XOR;
//! * bytes `72..88`: the fifth-bit plane; bit `p` of byte `72 + 4r + k` is
//!   `1 - qh[4p + k]`, the inverted fifth bit of row `r`'s weight `4p + k`
//!   (the sign bit of `q - 16` in 5-bit two's complement).
//!
//! Q5_1x4 super-blocks are 96 bytes: the four `d`, then the four `m` (f16
//! LE, bytes `8..16`), then the same 64 nibble bytes and 16 plane bytes
//! (at `16` and `80`).
//!
//! Rows past the matrix's last (up to the next multiple of 4) are all-zero
//! bytes: scale 0 and `q - 16 = 0`. The column count must be a multiple of
//! 32.

use crate::layout::QK;
pub use crate::layout::{
    Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_0_BLOCK_BYTES, Q5_1X4_BLOCK_BYTES, Q5_1_BLOCK_BYTES,
};
use crate::shape::{check_len, ShapeError};

/// One Q5 format's sizes: GGUF block bytes, f16 header fields per row
/// (`d`; Q5_1 also `m`), super-block bytes.
#[derive(Clone, Copy)]
pub struct Q5Format {
    /// The columns check's name.
    pub name: &'static str,
    /// Bytes of one GGUF block.
    pub block_bytes: usize,
    /// f16 header fields per row: 1 (`d`) or 2 (`d`, `m`).
    pub f16s: usize,
    /// Bytes of one super-block (4 rows x 32 weights).
    pub super_bytes: usize,
}

/// Q5_0x4.
pub const Q5_0: Q5Format = Q5Format {
    name: "q5_0 columns (a multiple of 32)",
    block_bytes: Q5_0_BLOCK_BYTES,
    f16s: 1,
    super_bytes: Q5_0X4_BLOCK_BYTES,
};

/// Q5_1x4.
pub const Q5_1: Q5Format = Q5Format {
    name: "q5_1 columns (a multiple of 32)",
    block_bytes: Q5_1_BLOCK_BYTES,
    f16s: 2,
    super_bytes: Q5_1X4_BLOCK_BYTES,
};

/// Bytes of a `rows x cols` Q5_0x4 matrix, padding rows included.
pub fn q5_0x4_bytes(rows: usize, cols: usize) -> Option<usize> {
    matrix_bytes(Q5_0, rows, cols)
}

/// Repacks a row-major GGUF Q5_0 matrix (`rows x cols / 32` blocks of 22
/// bytes) into Q5_0x4 (`out`: [`q5_0x4_bytes`] bytes).
pub fn repack_q5_0(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    repack(Q5_0, src, rows, cols, out)
}

/// Bytes of a `rows x cols` Q5_1x4 matrix, padding rows included.
pub fn q5_1x4_bytes(rows: usize, cols: usize) -> Option<usize> {
    matrix_bytes(Q5_1, rows, cols)
}

/// Repacks a row-major GGUF Q5_1 matrix (`rows x cols / 32` blocks of 24
/// bytes) into Q5_1x4 (`out`: [`q5_1x4_bytes`] bytes).
pub fn repack_q5_1(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    repack(Q5_1, src, rows, cols, out)
}

/// Bytes of a `rows x cols` matrix in `f` (`None`: `cols` is not a
/// multiple of 32, or it overflows).
fn matrix_bytes(f: Q5Format, rows: usize, cols: usize) -> Option<usize> {
    if !cols.is_multiple_of(QK) {
        return None;
    }
    let group = (cols / QK).checked_mul(f.super_bytes)?;
    rows.div_ceil(Q5X4_ROWS).checked_mul(group)
}

/// Checks the GGUF and the packed lengths; returns (blocks per row, GGUF
/// row bytes).
pub fn check(
    f: Q5Format,
    gguf: usize,
    packed: usize,
    rows: usize,
    cols: usize,
) -> Result<(usize, usize), ShapeError> {
    let nb = cols / QK;
    check_len(f.name, Some(nb * QK), cols)?;
    let row_len = nb * f.block_bytes;
    check_len("q5 gguf bytes", rows.checked_mul(row_len), gguf)?;
    check_len("q5 packed bytes", matrix_bytes(f, rows, cols), packed)?;
    Ok((nb, row_len))
}

#[cfg_attr(kestrel_shipped, optimize(size))]
fn repack(
    f: Q5Format,
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    let (nb, row_len) = check(f, src.len(), out.len(), rows, cols)?;
    let head = 2 * f.f16s;
    for (i, sb) in out.chunks_exact_mut(f.super_bytes).enumerate() {
        let (g, b) = (i / nb, i % nb);
        sb.fill(0);
        for r in 0..Q5X4_ROWS.min(rows - g * Q5X4_ROWS) {
            let row = g * Q5X4_ROWS + r;
            let blk = &src[row * row_len + b * f.block_bytes..][..f.block_bytes];
            for h in 0..f.f16s {
                sb[8 * h + 2 * r..][..2].copy_from_slice(&blk[2 * h..2 * h + 2]);
            }
            let qh = u32::from_le_bytes([blk[head], blk[head + 1], blk[head + 2], blk[head + 3]]);
            let qs = &blk[head + 4..];
            let quants = &mut sb[4 * head..];
            for k in 0..4 {
                let mut plane = 0u8;
                for p in 0..8 {
                    plane |= ((!qh >> (4 * p + k)) as u8 & 1) << p;
                }
                quants[64 + 4 * r + k] = plane;
                for c in 0..4 {
                    quants[16 * c + 4 * r + k] = qs[4 * c + k];
                }
            }
        }
    }
    Ok(())
}

pub mod generic {
    //! GEMV and GEMM of Q5_0x4 / Q5_1x4 weights (GGUF Q5_0 / Q5_1 blocks, 4
    //! rows interleaved, docs/kernels.md "Q5_0x4 and Q5_1x4") with Q8_0
    //! activations: the specification the architecture kernels match bit for
    //! bit.
    //!
    //! Shapes as the Q4_0x4 kernels: the weight is `rows x cols` in row groups
    //! of 4 padded to whole groups; activations are `m` rows (`act_qs` `m x
    //! cols` quants, `act_d` `m x cols/32` scales); the output is `m x rows`.

    use crate::generic::{gemm_groups, read_f16};
    use crate::layout::{
        Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_1X4_BLOCK_BYTES, Q5_1X4_MINS,
        Q5_1X4_NIBBLES, QK,
    };

    /// The value `q - 16` (-16..=15) of weight `j` (0..32) of row `r` (0..4) in
    /// one Q5_0x4 / Q5_1x4 super-block's quant bytes (`quants`: the 64 nibble
    /// bytes, then the 16 plane bytes).
    #[inline]
    pub fn q5x4_value(quants: &[u8], r: usize, j: usize) -> i32 {
        let (p, k) = (j / 4, j % 4);
        let byte = quants[16 * (p % 4) + 4 * r + k];
        let nibble = if p < 4 { byte & 0x0f } else { byte >> 4 };
        let sign = (quants[64 + 4 * r + k] >> p) & 1;
        // The plane bit is the inverted fifth bit: q = nibble + 16 * (1 - sign).
        nibble as i32 - 16 * sign as i32
    }

    /// The four rows of one Q5_0x4 row group dotted with one activation row:
    /// per block the exact integer `sum (q - 16) a`, then `acc += isum as f32 *
    /// (d_w * d_a)`, blocks in order.
    pub fn q5_0x4_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q5X4_ROWS] {
        let mut acc = [0.0f32; Q5X4_ROWS];
        let blocks = group
            .chunks_exact(Q5_0X4_BLOCK_BYTES)
            .zip(act_qs.chunks_exact(QK))
            .zip(act_d);
        for ((sb, a), &da) in blocks {
            let quants = &sb[Q5_0X4_NIBBLES..];
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let mut isum = 0i32;
                for (j, &aj) in a.iter().enumerate() {
                    isum += q5x4_value(quants, r, j) * aj as i32;
                }
                *acc_r += isum as f32 * (read_f16(sb, 2 * r) * da);
            }
        }
        acc
    }

    forwarding_entry!(
        /// GEMV, Q5_0x4 weights x one Q8_0 activation row: `out[r] = W[r] . act`.
        ///
        /// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 88-byte super-blocks;
        /// * `act_qs`: `cols` quants; `act_d`: `cols / 32` scales;
        /// * `out`: `rows` results.
        q8_0 gemv gemv_q5_0x4_q8_0 => gemm_q5_0x4_q8_0
    );

    forwarding_entry!(
        /// GEMM, Q5_0x4 weights x `m` Q8_0 activation rows: `out[t * rows + r] =
        /// W[r] . act[t]`.
        ///
        /// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 88-byte super-blocks;
        /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
        /// * `out`: `m x rows` results.
        q8_0 gemm gemm_q5_0x4_q8_0 => gemm_groups [Q5_0X4_BLOCK_BYTES, q5_0x4_group_dot]
    );

    /// The four rows of one Q5_1x4 row group dotted with one activation row.
    /// Per block: the exact integers `qsum = sum q a` (q 0..31) and `asum = sum
    /// a`, then `acc += (qsum as f32 * (d_w * d_a) + asum as f32 * (m_w * d_a))`
    /// (ggml's `vec_dot_q5_1_q8_1` order, with the activation sum exact instead
    /// of Q8_1's f16 `s`), blocks in order, no FMA.
    pub fn q5_1x4_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q5X4_ROWS] {
        let mut acc = [0.0f32; Q5X4_ROWS];
        let blocks = group
            .chunks_exact(Q5_1X4_BLOCK_BYTES)
            .zip(act_qs.chunks_exact(QK))
            .zip(act_d);
        for ((sb, a), &da) in blocks {
            let quants = &sb[Q5_1X4_NIBBLES..];
            let asum: i32 = a.iter().map(|&x| x as i32).sum();
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let mut qsum = 0i32;
                for (j, &aj) in a.iter().enumerate() {
                    qsum += (q5x4_value(quants, r, j) + 16) * aj as i32;
                }
                let dw = read_f16(sb, 2 * r);
                let mw = read_f16(sb, Q5_1X4_MINS + 2 * r);
                *acc_r += qsum as f32 * (dw * da) + asum as f32 * (mw * da);
            }
        }
        acc
    }

    forwarding_entry!(
        /// GEMV, Q5_1x4 weights x one Q8_0 activation row (shapes as
        /// [`gemv_q5_0x4_q8_0`], with 96-byte super-blocks).
        q8_0 gemv gemv_q5_1x4_q8_0 => gemm_q5_1x4_q8_0
    );

    forwarding_entry!(
        /// GEMM, Q5_1x4 weights x `m` Q8_0 activation rows (shapes as
        /// [`gemm_q5_0x4_q8_0`], with 96-byte super-blocks).
        q8_0 gemm gemm_q5_1x4_q8_0 => gemm_groups [Q5_1X4_BLOCK_BYTES, q5_1x4_group_dot]
    );
}

#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    //! GEMV and GEMM of Q5_0x4 / Q5_1x4 weights with Q8_0 activations: `sdot` loops
    //! over whole row groups (GEMV), and tiles of one row group x 4 activation
    //! rows (GEMM, the GEMV for the rest).
    //!
    //! The quants of a super-block become `sdot` operands in two instructions
    //! per 16 weights: `cmtst` of the fifth-bit plane with the bit `p` mask
    //! gives 0xff where the plane bit is set (the fifth bit is clear: `q - 16 <
    //! 0`), and `bit` (low nibbles, under the 0x0f mask) or `sri #4` (high
    //! nibbles) puts the nibble in the low half: the byte is `q - 16` as an
    //! `i8` (`0xf0 | n = n - 16`, or `n`). The integer sums are then exact
    //! `sum (q - 16) a` (|.| <= 32 * 16 * 128), converted with `scvtf`.

    use crate::aarch64::gemm::{entry_points, tile4_asm, GemmKernels};
    use crate::layout::{Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_1X4_BLOCK_BYTES};
    use core::arch::asm;

    /// The parts in which Q5_1x4's kernels differ from Q5_0x4's: Q5_1 keeps
    /// each block's minimums after its scales (`ld1 .8h`, 16 bytes) and adds
    /// `m_w * d_a * sum a`, with `sum a` from `16 * sum a` (`sdot` with the
    /// 0x10 bytes, exact), which also starts the integer sum so that it is
    /// `sum q a` rather than `sum (q - 16) a`. Each part is one name; Q5_0's
    /// version is listed first.
    #[rustfmt::skip]
    macro_rules! q5_part {
        (q5_0, scales) => { "ld1 {{v0.4h}}, [{w}], #8\n" };
        (q5_1, scales) => { "ld1 {{v0.8h}}, [{w}], #16\n" };
        // GEMV: the block's 16 * sum a, started before the planes.
        (q5_0, gemv_asum) => { "" };
        (q5_1, gemv_asum) => { concat!(
            "movi v8.16b, #0\n",
            "movi v12.16b, #0\n",
            "sdot v8.4s, v5.16b, v27.16b\n",
            "sdot v12.4s, v6.16b, v27.16b\n",
        ) };
        (q5_0, gemv_chains) => { concat!("movi v8.16b, #0\n", "movi v12.16b, #0\n") };
        (q5_1, gemv_chains) => { "add v8.4s, v8.4s, v12.4s\n" };
        (q5_0, gemv_addp) => { "" };
        (q5_1, gemv_addp) => { "addp v8.4s, v8.4s, v8.4s\n" };
        (q5_0, gemv_asum_f32) => { "" };
        (q5_1, gemv_asum_f32) => { concat!("movi v12.16b, #0\n", "scvtf v13.4s, v8.4s, #4\n") };
        (q5_0, gemv_widen) => { "fcvtl v0.4s, v0.4h\n" };
        (q5_1, gemv_widen) => { concat!("fcvtl v14.4s, v0.4h\n", "fcvtl2 v15.4s, v0.8h\n") };
        (q5_0, gemv_scale) => { concat!(
            "fmul v0.4s, v0.4s, v7.4s\n",
            "add v8.4s, v8.4s, v12.4s\n",
            "scvtf v8.4s, v8.4s\n",
            "fmul v8.4s, v8.4s, v0.4s\n",
        ) };
        (q5_1, gemv_scale) => { concat!(
            "fmul v14.4s, v14.4s, v7.4s\n",
            "fmul v15.4s, v15.4s, v7.4s\n",
            "add v8.4s, v8.4s, v12.4s\n",
            "fmul v13.4s, v13.4s, v15.4s\n",
            "scvtf v8.4s, v8.4s\n",
            "fmul v8.4s, v8.4s, v14.4s\n",
            "fadd v8.4s, v8.4s, v13.4s\n",
        ) };
        // Tile: each activation row's 16 * sum a starts its chain and is kept
        // in lane t of v5 (the plane register, free by then).
        (q5_0, tile_asum01) => { concat!("movi v16.16b, #0\n", "movi v17.16b, #0\n") };
        (q5_1, tile_asum01) => { q5_part!(q5_1, tile_asum, "v14", "v15", "0", "1") };
        (q5_0, tile_asum23) => { "" };
        (q5_1, tile_asum23) => { concat!(
            "movi v16.16b, #0\n",
            "movi v17.16b, #0\n",
            q5_part!(q5_1, tile_asum, "v16", "v17", "2", "3"),
        ) };
        (q5_1, tile_asum, $a:literal, $b:literal, $la:literal, $lb:literal) => { concat!(
            "sdot ", $a, ".4s, v1.16b, v27.16b\n",
            "sdot ", $b, ".4s, v3.16b, v27.16b\n",
            "sdot ", $a, ".4s, v2.16b, v27.16b\n",
            "sdot ", $b, ".4s, v4.16b, v27.16b\n",
            "addp ", $a, ".4s, ", $a, ".4s, ", $a, ".4s\n",
            "addp ", $b, ".4s, ", $b, ".4s, ", $b, ".4s\n",
            "addp ", $a, ".4s, ", $a, ".4s, ", $a, ".4s\n",
            "addp ", $b, ".4s, ", $b, ".4s, ", $b, ".4s\n",
            "mov v5.s[", $la, "], ", $a, ".s[0]\n",
            "mov v5.s[", $lb, "], ", $b, ".s[0]\n",
        ) };
        (q5_0, tile_widen) => { "fcvtl v0.4s, v0.4h\n" };
        (q5_1, tile_widen) => { concat!("fcvtl v6.4s, v0.4h\n", "fcvtl2 v7.4s, v0.8h\n") };
        (q5_0, tile_asum_f32) => { "" };
        (q5_1, tile_asum_f32) => { "scvtf v5.4s, v5.4s, #4\n" };
        (q5_0, tile_d) => { "v0" };
        (q5_1, tile_d) => { "v6" };
        (q5_0, tile_m) => { "" };
        (q5_1, tile_m) => { concat!(
            "fmul v8.4s, v7.4s, v22.s[0]\n",
            "fmul v9.4s, v7.4s, v22.s[1]\n",
            "fmul v10.4s, v7.4s, v22.s[2]\n",
            "fmul v11.4s, v7.4s, v22.s[3]\n",
        ) };
        (q5_0, tile_mins) => { "" };
        (q5_1, tile_mins) => { concat!(
            "fmul v8.4s, v8.4s, v5.s[0]\n",
            "fmul v9.4s, v9.4s, v5.s[1]\n",
            "fmul v10.4s, v10.4s, v5.s[2]\n",
            "fmul v11.4s, v11.4s, v5.s[3]\n",
            "fadd v14.4s, v14.4s, v8.4s\n",
            "fadd v15.4s, v15.4s, v9.4s\n",
            "fadd v16.4s, v16.4s, v10.4s\n",
            "fadd v17.4s, v17.4s, v11.4s\n",
        ) };
    }

    /// The 8 fifth-bit plane masks (`v23..v30`: bit p of each byte, p = 0..7;
    /// `v27`'s 0x10 bytes are also Q5_1's 16s) and the nibble mask `v31`.
    #[rustfmt::skip]
    macro_rules! q5_masks {
        () => { concat!(
            "movi v31.16b, #0x0f\n",
            "movi v23.16b, #0x01\n",
            "movi v24.16b, #0x02\n",
            "movi v25.16b, #0x04\n",
            "movi v26.16b, #0x08\n",
            "movi v27.16b, #0x10\n",
            "movi v28.16b, #0x20\n",
            "movi v29.16b, #0x40\n",
            "movi v30.16b, #0x80\n",
        ) };
    }

    /// `$name`: the GEMV asm loop of Q5 variant `$v` over `groups` row groups,
    /// each `nb` super-blocks of `$block` bytes.
    #[rustfmt::skip]
    macro_rules! q5_gemv {
        ($v:ident, $name:ident, $block:literal, [$($clobber:tt)*]) => {
            #[doc = concat!("The ", stringify!($v), " GEMV asm loop: `groups` row groups, each `nb` super-blocks (its parts: `q5_part!`).")]
            ///
            /// # Safety
            #[doc = concat!("`w` must point to `groups * nb * ", $block, "` readable bytes, `qs` to `nb * 32`, `d` to `nb` floats, `out` to `groups * 4` writable floats, `nb >= 1`, `groups >= 1`, and the CPU must implement dotprod.")]
            #[inline(never)]
            #[target_feature(enable = "neon,dotprod")]
            unsafe fn $name(
                w: *const u8,
                qs: *const i8,
                d: *const f32,
                _sums: *const i16,
                nb: usize,
                out: *mut f32,
                groups: usize,
            ) {
                // SAFETY: per the function contract, every load stays inside
                // `w`, `qs`, `d` and every store inside `out`: the inner loop
                // reads one block of `w`, 32 bytes of `qs` and 4 bytes of `d`
                // per block, for nb blocks; the outer loop stores 16 bytes of
                // `out` per group. Only the listed registers are written; no
                // stack is used.
                unsafe {
                    asm!(
                        concat!(
                            q5_masks!(),
                            "2:\n",
                            "movi v16.16b, #0\n", // sums (4 rows)
                            "mov x9, {qs}\n",
                            "mov x10, {d}\n",
                            "mov x11, {nb}\n",
                            "3:\n",
                            q5_part!($v, scales),
                            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64\n", // 4 nibble chunks
                            "ld1 {{v9.16b}}, [{w}], #16\n", // fifth-bit plane
                            "ld1 {{v5.16b, v6.16b}}, [x9], #32\n", // act quants 0..15, 16..31
                            "ld1r {{v7.4s}}, [x10], #4\n", // act scale
                            q5_part!($v, gemv_asum),
                            "cmtst v17.16b, v9.16b, v23.16b\n", // chunk 0 low (weights 0..3)
                            "cmtst v18.16b, v9.16b, v27.16b\n", // chunk 0 high (16..19)
                            "cmtst v19.16b, v9.16b, v24.16b\n",
                            "cmtst v20.16b, v9.16b, v28.16b\n",
                            q5_part!($v, gemv_chains), // two sdot chains (in-order cores)
                            "bit v17.16b, v1.16b, v31.16b\n",
                            "sri v18.16b, v1.16b, #4\n",
                            q5_part!($v, gemv_addp),
                            "bit v19.16b, v2.16b, v31.16b\n",
                            "sri v20.16b, v2.16b, #4\n",
                            q5_part!($v, gemv_addp),
                            "cmtst v21.16b, v9.16b, v25.16b\n",
                            "cmtst v22.16b, v9.16b, v29.16b\n",
                            q5_part!($v, gemv_asum_f32),
                            "cmtst v10.16b, v9.16b, v26.16b\n",
                            "cmtst v11.16b, v9.16b, v30.16b\n",
                            "sdot v8.4s, v17.16b, v5.4b[0]\n",
                            "sdot v12.4s, v18.16b, v6.4b[0]\n",
                            "bit v21.16b, v3.16b, v31.16b\n",
                            "sri v22.16b, v3.16b, #4\n",
                            "sdot v8.4s, v19.16b, v5.4b[1]\n",
                            "sdot v12.4s, v20.16b, v6.4b[1]\n",
                            "bit v10.16b, v4.16b, v31.16b\n",
                            "sri v11.16b, v4.16b, #4\n",
                            "sdot v8.4s, v21.16b, v5.4b[2]\n",
                            "sdot v12.4s, v22.16b, v6.4b[2]\n",
                            q5_part!($v, gemv_widen),
                            "sdot v8.4s, v10.16b, v5.4b[3]\n",
                            "sdot v12.4s, v11.16b, v6.4b[3]\n",
                            q5_part!($v, gemv_scale),
                            "fadd v16.4s, v16.4s, v8.4s\n",
                            "subs x11, x11, #1\n",
                            "b.ne 3b\n",
                            "st1 {{v16.4s}}, [{out}], #16\n",
                            "subs {groups}, {groups}, #1\n",
                            "b.ne 2b\n",
                        ),
                        w = inout(reg) w => _,
                        out = inout(reg) out => _,
                        groups = inout(reg) groups => _,
                        qs = in(reg) qs,
                        d = in(reg) d,
                        nb = in(reg) nb,
                        out("x9") _, out("x10") _, out("x11") _,
                        out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                        out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                        out("v10") _, out("v11") _, out("v12") _, $($clobber)*
                        out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
                        out("v21") _, out("v22") _, out("v23") _, out("v24") _, out("v25") _,
                        out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _,
                        out("v31") _,
                        options(nostack),
                    );
                }
            }
        };
    }

    /// The 16 `sdot` of two activation rows (quants in `v1`/`v2` and `v3`/`v4`)
    /// against the block's 8 operand registers, into `$a` and `$b`: two
    /// independent chains, interleaved.
    #[rustfmt::skip]
    macro_rules! q5_two_rows {
        ($a:literal, $b:literal) => { concat!(
            "sdot ", $a, ".4s, v6.16b, v1.4b[0]\n",
            "sdot ", $b, ".4s, v6.16b, v3.4b[0]\n",
            "sdot ", $a, ".4s, v7.16b, v2.4b[0]\n",
            "sdot ", $b, ".4s, v7.16b, v4.4b[0]\n",
            "sdot ", $a, ".4s, v8.16b, v1.4b[1]\n",
            "sdot ", $b, ".4s, v8.16b, v3.4b[1]\n",
            "sdot ", $a, ".4s, v9.16b, v2.4b[1]\n",
            "sdot ", $b, ".4s, v9.16b, v4.4b[1]\n",
            "sdot ", $a, ".4s, v10.16b, v1.4b[2]\n",
            "sdot ", $b, ".4s, v10.16b, v3.4b[2]\n",
            "sdot ", $a, ".4s, v11.16b, v2.4b[2]\n",
            "sdot ", $b, ".4s, v11.16b, v4.4b[2]\n",
            "sdot ", $a, ".4s, v12.16b, v1.4b[3]\n",
            "sdot ", $b, ".4s, v12.16b, v3.4b[3]\n",
            "sdot ", $a, ".4s, v13.16b, v2.4b[3]\n",
            "sdot ", $b, ".4s, v13.16b, v4.4b[3]\n",
        ) };
    }

    /// `$name`: one row group of Q5 variant `$v` (`$block`-byte super-blocks) x
    /// 4 activation rows: the quants are made `sdot` operands once per
    /// super-block and serve all 4 activation rows (loaded two rows at a time
    /// into the nibble registers, free by then).
    #[rustfmt::skip]
    macro_rules! q5_tile4 {
        ($v:ident, $name:ident, $block:literal) => {
            #[doc = concat!("One ", stringify!($v), " row group x 4 activation rows (`q5_tile4!`).")]
            ///
            /// # Safety
            #[doc = concat!("`w` must point to `nb * ", $block, "` readable bytes, `qs` and `d` to 4 consecutive activation rows of `nb * 32` quants and `nb` floats, `out` to 4 rows of 4 writable floats `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.")]
            #[inline(never)]
            #[target_feature(enable = "neon,dotprod")]
            unsafe fn $name(
                w: *const u8,
                qs: *const i8,
                d: *const f32,
                _sums: *const i16,
                nb: usize,
                out: *mut f32,
                stride: usize,
            ) {
                // SAFETY: per the function contract: per block the loop reads
                // one block of `w`, 32 bytes of each activation row's quants and 4 bytes of its
                // scales, for nb blocks; then it stores 16 bytes at out + i *
                // stride for i in 0..4. Only the listed registers are written;
                // no stack is used.
                unsafe {
                    tile4_asm!(
                        [concat!(
                            q5_masks!(),
                            "movi v18.16b, #0\n", // sums, act rows 0..3 (4 weight rows)
                            "movi v19.16b, #0\n",
                            "movi v20.16b, #0\n",
                            "movi v21.16b, #0\n",
                            "3:\n",
                            q5_part!($v, scales),
                            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64\n", // 4 nibble chunks
                            "ld1 {{v5.16b}}, [{w}], #16\n", // fifth-bit plane
                            "ld1 {{v22.s}}[0], [{d0}], #4\n", // act scales
                            "ld1 {{v22.s}}[1], [{d1}], #4\n",
                            "ld1 {{v22.s}}[2], [{d2}], #4\n",
                            "ld1 {{v22.s}}[3], [{d3}], #4\n",
                            "cmtst v6.16b, v5.16b, v23.16b\n", // chunk 0 low (weights 0..3)
                            "cmtst v7.16b, v5.16b, v27.16b\n", // chunk 0 high (16..19)
                            "cmtst v8.16b, v5.16b, v24.16b\n",
                            "cmtst v9.16b, v5.16b, v28.16b\n",
                            "cmtst v10.16b, v5.16b, v25.16b\n",
                            "cmtst v11.16b, v5.16b, v29.16b\n",
                            "cmtst v12.16b, v5.16b, v26.16b\n",
                            "cmtst v13.16b, v5.16b, v30.16b\n",
                            "bit v6.16b, v1.16b, v31.16b\n",
                            "sri v7.16b, v1.16b, #4\n",
                            "bit v8.16b, v2.16b, v31.16b\n",
                            "sri v9.16b, v2.16b, #4\n",
                            "bit v10.16b, v3.16b, v31.16b\n",
                            "sri v11.16b, v3.16b, #4\n",
                            "bit v12.16b, v4.16b, v31.16b\n",
                            "sri v13.16b, v4.16b, #4\n",
                            "ld1 {{v1.16b, v2.16b}}, [{q0}], #32\n",
                            "ld1 {{v3.16b, v4.16b}}, [{q1}], #32\n",
                            "movi v14.16b, #0\n",
                            "movi v15.16b, #0\n",
                            q5_part!($v, tile_asum01),
                            q5_two_rows!("v14", "v15"), // act rows 0 and 1
                            "ld1 {{v1.16b, v2.16b}}, [{q2}], #32\n",
                            "ld1 {{v3.16b, v4.16b}}, [{q3}], #32\n",
                            q5_part!($v, tile_asum23),
                            q5_two_rows!("v16", "v17"), // act rows 2 and 3
                            q5_part!($v, tile_widen),
                            "scvtf v14.4s, v14.4s\n",
                            "scvtf v15.4s, v15.4s\n",
                            "scvtf v16.4s, v16.4s\n",
                            "scvtf v17.4s, v17.4s\n",
                            q5_part!($v, tile_asum_f32),
                            "fmul v1.4s, ", q5_part!($v, tile_d), ".4s, v22.s[0]\n", // d_w * d_a, act row 0
                            "fmul v2.4s, ", q5_part!($v, tile_d), ".4s, v22.s[1]\n",
                            "fmul v3.4s, ", q5_part!($v, tile_d), ".4s, v22.s[2]\n",
                            "fmul v4.4s, ", q5_part!($v, tile_d), ".4s, v22.s[3]\n",
                            q5_part!($v, tile_m), // m_w * d_a
                            "fmul v14.4s, v14.4s, v1.4s\n",
                            "fmul v15.4s, v15.4s, v2.4s\n",
                            "fmul v16.4s, v16.4s, v3.4s\n",
                            "fmul v17.4s, v17.4s, v4.4s\n",
                            q5_part!($v, tile_mins),
                            "fadd v18.4s, v18.4s, v14.4s\n",
                            "fadd v19.4s, v19.4s, v15.4s\n",
                            "fadd v20.4s, v20.4s, v16.4s\n",
                            "fadd v21.4s, v21.4s, v17.4s\n",
                            "subs {nb}, {nb}, #1\n",
                            "b.ne 3b\n",
                            "st1 {{v18.4s}}, [{out}], {stride}\n",
                            "st1 {{v19.4s}}, [{out}], {stride}\n",
                            "st1 {{v20.4s}}, [{out}], {stride}\n",
                            "st1 {{v21.4s}}, [{out}]\n",
                        )],
                        (w, qs, d, nb, out, stride),
                        [out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _, out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _, out("v31") _,]
                    );
                }
            }
        };
    }

    entry_points!(
        q8_0[super::generic],
        gemv_q5_0x4_q8_0,
        gemm_q5_0x4_q8_0,
        GemmKernels {
            group_rows: Q5X4_ROWS,
            block_bytes: Q5_0X4_BLOCK_BYTES,
            row: gemv_q5x4_groups,
            tile4: Some(gemm_q5x4_tile4),
            small_tiles: None,
            strided: true,
        }
    );
    entry_points!(
        q8_0[super::generic],
        gemv_q5_1x4_q8_0,
        gemm_q5_1x4_q8_0,
        GemmKernels {
            group_rows: Q5X4_ROWS,
            block_bytes: Q5_1X4_BLOCK_BYTES,
            row: gemv_q5_1x4_groups,
            tile4: Some(gemm_q5_1x4_tile4),
            small_tiles: None,
            strided: true,
        }
    );

    q5_gemv!(q5_0, gemv_q5x4_groups, "88", []);
    q5_gemv!(q5_1, gemv_q5_1x4_groups, "96", [out("v13") _, out("v14") _, out("v15") _,]);
    q5_tile4!(q5_0, gemm_q5x4_tile4, "88");
    q5_tile4!(q5_1, gemm_q5_1x4_tile4, "96");
}

#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    //! GEMV and GEMM of Q5_0x4 / Q5_1x4 weights with Q8_0 activations: AVX2
    //! tiles of 8 weight rows (two row groups, one row per lane) x up to 4
    //! activation rows. The GEMV (one activation row, up to 12,288 columns) has
    //! its own loop over one row group at a time (one sequential stream).
    //! With its per-call activation tables, the GEMM's tile multiplies with
    //! `vpdpbusd` when the token names AVX-VNNI (the same i32 sums); with
    //! AVX512-VNNI the GEMM takes the 512-bit tile of `gemm_vnni.rs` (16 weight
    //! rows, broadcast activations, no tables).

    use super::generic;
    use crate::layout::{
        Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE, Q5_1X4_BLOCK_BYTES,
        Q5_1X4_MINS, Q5_1X4_NIBBLES, Q5_1X4_PLANE, QK,
    };
    use crate::shape::{gemm_shape, GemmShape, ShapeError};
    use crate::x86_64::gemm::{
        gemm_run, pattern_table, sum_table, table_rows_per_call, Grid, Pass, GEMM_EXPAND_BLOCKS,
        GEMV_MAX_BLOCKS,
    };
    use crate::x86_64::gemm_vnni::{
        self,
        avx512::{gemm_nib4, Nib4},
    };
    use crate::x86_64::{
        act_patterns, pair_rows, prefetch_ahead, sum_block_pairs, vnni_forms, Avx2, Dot, Vnni,
    };
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// Activation rows computed together against one pass over a weight tile.
    const TILE_M: usize = 4;

    forwarding_entry!(
        /// GEMV, Q5_0x4 weights x one Q8_0 activation row: [`gemm_q5_0x4_q8_0`]
        /// with `m = 1`; the same contract as [`super::generic::gemv_q5_0x4_q8_0`].
        q8_0 gemv gemv_q5_0x4_q8_0 (cpu: Avx2) => gemm_q5x4::<false>
    );

    forwarding_entry!(
        /// GEMV, Q5_1x4 weights x one Q8_0 activation row: [`gemm_q5_1x4_q8_0`]
        /// with `m = 1`; the same contract as [`super::generic::gemv_q5_1x4_q8_0`].
        q8_0 gemv gemv_q5_1x4_q8_0 (cpu: Avx2) => gemm_q5x4::<true>
    );

    forwarding_entry!(
        /// GEMM, Q5_0x4 weights x `m` Q8_0 activation rows: [`gemm_q5x4`] (the
        /// contract of [`super::generic::gemm_q5_0x4_q8_0`]).
        q8_0 gemm gemm_q5_0x4_q8_0 (cpu: Avx2) => gemm_q5x4::<false>
    );

    forwarding_entry!(
        /// GEMM, Q5_1x4 weights x `m` Q8_0 activation rows: [`gemm_q5x4`] (the
        /// contract of [`super::generic::gemm_q5_1x4_q8_0`]).
        q8_0 gemm gemm_q5_1x4_q8_0 (cpu: Avx2) => gemm_q5x4::<true>
    );

    /// GEMM of either layout (`Q51`: Q5_1x4 with 96-byte super-blocks, else
    /// Q5_0x4 with 88) x `m` Q8_0 activation rows: `out[t][r] = W[r] . act[t]`.
    ///
    /// * `w`: `ceil(rows / 4)` row groups of `cols / 32` super-blocks;
    /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
    /// * `out`: `m x rows`, row-major.
    ///
    /// Exact for every input bit pattern; the contract of the generic twins.
    /// Empty shapes go to the generic code.
    #[allow(clippy::too_many_arguments)]
    fn gemm_q5x4<const Q51: bool>(
        _cpu: Avx2,
        w: &[u8],
        rows: usize,
        cols: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        let block = if Q51 {
            Q5_1X4_BLOCK_BYTES
        } else {
            Q5_0X4_BLOCK_BYTES
        };
        let shape = gemm_shape(Q5X4_ROWS, block, w, rows, cols, act_qs, act_d, m, out)?;
        if shape.nb == 0 || rows == 0 || m == 0 {
            let generic = if Q51 {
                generic::gemm_q5_1x4_q8_0
            } else {
                generic::gemm_q5_0x4_q8_0
            };
            return generic(w, rows, cols, act_qs, act_d, m, out);
        }
        if m == 1 && shape.nb <= GEMV_MAX_BLOCKS {
            // SAFETY: `w` holds `groups` row groups of `nb` super-blocks of the
            // layout, `act_qs` `nb * 32` quants, `act_d` `nb` scales, `out`
            // `rows` floats (all checked by `gemm_shape` with m = 1); `nb` is
            // at most GEMV_MAX_BLOCKS; the token proves AVX2/FMA/F16C.
            unsafe {
                if shape.nb <= GEMV_EXPAND_BLOCKS {
                    q5_gemv::<Q51, true>(w, rows, shape.groups, shape.nb, act_qs, act_d, out)
                } else {
                    q5_gemv::<Q51, false>(w, rows, shape.groups, shape.nb, act_qs, act_d, out)
                }
            };
            return Ok(());
        }
        gemm_tiles::<Q51>(_cpu, w, rows, act_qs, act_d, m, out, shape);
        Ok(())
    }

    /// The tiled GEMM of either layout (`Q51`: Q5_1x4, else Q5_0x4) for shapes
    /// [`gemm_shape`] accepted with that layout's super-block size, `nb`,
    /// `rows` and `m` all non-zero: the 512-bit tile with AVX512-VNNI, else
    /// [`tiles`].
    #[allow(clippy::too_many_arguments)]
    fn gemm_tiles<const Q51: bool>(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
        shape: GemmShape,
    ) {
        let nb = shape.nb;
        if cpu.vnni() == Vnni::Avx512 && nb <= gemm_vnni::MAX_BLOCKS {
            // SAFETY: `gemm_shape` checked `w` (`groups` row groups of `nb`
            // super-blocks of the layout's size, rows <= 4 * groups), `act_qs`,
            // `act_d` and `out` for `m` rows; nb, rows, m >= 1 (the callers
            // checked); the token says AVX512-VNNI.
            unsafe {
                let tile = if Q51 {
                    gemm_nib4::<{ Nib4::Q5_1 }>
                } else {
                    gemm_nib4::<{ Nib4::Q5_0 }>
                };
                let values = &Nib4::NO_VALUES;
                tile(
                    cpu,
                    values,
                    w,
                    rows,
                    shape.groups,
                    nb,
                    act_qs,
                    act_d,
                    m,
                    out,
                )
            };
            return;
        }
        if nb > GEMV_MAX_BLOCKS {
            tiles::<Q51, false>(cpu, w, rows, act_qs, act_d, m, out, shape);
        } else {
            tiles::<Q51, true>(cpu, w, rows, act_qs, act_d, m, out, shape);
        }
    }

    /// Every pair of row groups against the `m` activation rows on the
    /// driver [`gemm_run`], in tiles of up to [`TILE_M`] rows. `TABLES`
    /// (rows of up to [`GEMV_MAX_BLOCKS`] blocks): calls of
    /// [`table_rows_per_call`] activation rows, each forming its rows'
    /// activation patterns and block sums once, which the tiles read (row `t`,
    /// block `b` at `t * nb + b` of the call); else the tiles form them.
    #[allow(clippy::too_many_arguments)]
    fn tiles<const Q51: bool, const TABLES: bool>(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
        GemmShape { nb, groups }: GemmShape,
    ) {
        let block_bytes = if Q51 {
            Q5_1X4_BLOCK_BYTES
        } else {
            Q5_0X4_BLOCK_BYTES
        };
        let (cols, group_bytes) = (nb * QK, nb * block_bytes);
        let grid = Grid {
            rows,
            units: groups.div_ceil(2),
            m,
            call_rows: if TABLES { table_rows_per_call(nb) } else { m },
        };
        gemm_run(grid, out, |pass: Pass<'_, 8, TILE_M>| {
            let (c0, c1) = (pass.first, pass.end);
            // Every block's `vpermd` patterns and quant sum, formed once here
            // (not again for each pair of row groups).
            let mut sums = [MaybeUninit::<i32>::uninit(); GEMM_EXPAND_BLOCKS];
            let mut patterns = [MaybeUninit::<[__m256i; 4]>::uninit(); GEMM_EXPAND_BLOCKS];
            let (patterns, sums): Tables<'_> = if TABLES {
                let (qs, blocks) = (&act_qs[c0 * cols..c1 * cols], (c1 - c0) * nb);
                (
                    pattern_table(cpu, qs, blocks, &mut patterns),
                    sum_table(cpu, qs, blocks, 1, &mut sums),
                )
            } else {
                (&[], &[])
            };
            // Row groups in pairs (8 rows per vector); an odd last group is
            // paired with itself and only its own rows are stored.
            pass.tiles(|pair, t0, tm, res| {
                let ga = 2 * pair;
                let gb = (ga + 1).min(groups - 1);
                let wa = &w[ga * group_bytes..(ga + 1) * group_bytes];
                let wb = &w[gb * group_bytes..(gb + 1) * group_bytes];
                let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
                let d = &act_d[t0 * nb..(t0 + tm) * nb];
                let i = (t0 - c0) * nb;
                let t = if TABLES {
                    (&patterns[i..i + tm * nb], &sums[i..i + tm * nb])
                } else {
                    (patterns, sums)
                };
                // SAFETY: `wa` and `wb` are whole row groups (`nb` super-blocks of
                // the layout's 88 or 96 bytes, sliced above), `qs` holds `tm` rows
                // of `cols = nb * 32` quants, `d` `tm` rows of `nb` scales and,
                // with TABLES, `t` `tm` rows of `nb` patterns and sums (sliced
                // above), `res` holds `tm <= 4` rows of 8 floats; the token
                // proves AVX2/FMA/F16C and the VNNI form its `vnni()` names (the
                // VNNI tile is taken with tables only, as it requires; an
                // AVX512-VNNI token takes the 512-bit tile before this, and the
                // AVX2 one here).
                unsafe {
                    match (if TABLES { cpu.vnni() } else { Vnni::No }, tm) {
                        (Vnni::Avx, 1) => q5x4_tile_avx_vnni::<1, Q51>(wa, wb, qs, d, t, nb, res),
                        (Vnni::Avx, 2) => q5x4_tile_avx_vnni::<2, Q51>(wa, wb, qs, d, t, nb, res),
                        (Vnni::Avx, 3) => q5x4_tile_avx_vnni::<3, Q51>(wa, wb, qs, d, t, nb, res),
                        (Vnni::Avx, _) => q5x4_tile_avx_vnni::<4, Q51>(wa, wb, qs, d, t, nb, res),
                        (_, 1) => q5x4_tile::<1, Q51, TABLES>(wa, wb, qs, d, t, nb, res),
                        (_, 2) => q5x4_tile::<2, Q51, TABLES>(wa, wb, qs, d, t, nb, res),
                        (_, 3) => q5x4_tile::<3, Q51, TABLES>(wa, wb, qs, d, t, nb, res),
                        (_, _) => q5x4_tile::<4, Q51, TABLES>(wa, wb, qs, d, t, nb, res),
                    }
                }
            });
        });
    }

    /// The activation patterns and quant sums of a call's blocks (row `t`,
    /// block `b` at `t * nb + b`), or empty slices when the tile forms them.
    type Tables<'a> = (&'a [[__m256i; 4]], &'a [i32]);

    /// The most blocks whose expanded activations (128 bytes per block) the
    /// GEMV keeps: 8 KB, a quarter of a 32 KB L1 (past that the expansion
    /// misses L1; the patterns are then formed in the loop).
    const GEMV_EXPAND_BLOCKS: usize = 64;

    /// The unsigned `q` (0..31) of one Q5_0x4 / Q5_1x4 super-block's 4 rows:
    /// [low nibbles of chunks 0-1, low 2-3, high 0-1, high 2-3], each 128-bit
    /// half 4 rows x 4 weights (the decoding of [`q5x4_tile`]).
    ///
    /// # Safety
    /// `p + nibbles .. p + nibbles + 64` and `p + plane .. p + plane + 16` must
    /// be readable; the CPU must implement AVX2.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn decode_q(p: *const u8, nibbles: usize, plane: usize) -> [__m256i; 4] {
        // SAFETY: the three loads read the bytes the contract names (unaligned);
        // the CPU implements AVX2.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let b4 = _mm256_set1_epi8(0x10);
            let x0 = _mm256_loadu_si256(p.add(nibbles).cast());
            let x1 = _mm256_loadu_si256(p.add(nibbles + 32).cast());
            let h = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(plane).cast()));
            // Plane bit p to bit 4: [low half, high half] = p 0, 1 | 2, 3 (left),
            // 4, 5 | 6, 7 (right).
            let h0 = _mm256_sllv_epi32(h, _mm256_setr_epi32(4, 4, 4, 4, 3, 3, 3, 3));
            let h1 = _mm256_sllv_epi32(h, _mm256_setr_epi32(2, 2, 2, 2, 1, 1, 1, 1));
            let h2 = _mm256_srlv_epi32(h, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
            let h3 = _mm256_srlv_epi32(h, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3));
            [
                _mm256_or_si256(_mm256_and_si256(x0, m4), _mm256_andnot_si256(h0, b4)),
                _mm256_or_si256(_mm256_and_si256(x1, m4), _mm256_andnot_si256(h1, b4)),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(x0, 4), m4),
                    _mm256_andnot_si256(h2, b4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(x1, 4), m4),
                    _mm256_andnot_si256(h3, b4),
                ),
            ]
        }
    }

    /// GEMV, Q5_0x4 (`Q51` false) or Q5_1x4 weights x one Q8_0 activation row,
    /// one row group (4 rows) at a time, two super-blocks per iteration.
    ///
    /// One group at a time keeps the weights one sequential stream (reading
    /// four groups side by side read DRAM at about half the rate on long rows;
    /// see the Q4_0x4 GEMV in `gemm.rs`). With `EXPAND` the activation row is
    /// expanded once per call (per block, the four dword patterns the weight
    /// registers need, `vpermd` as in [`q5x4_tile`]); without, the patterns
    /// are formed in the loop (rows too long for the expansion to stay in L1).
    /// `sum a` (i32) of every block is computed once per call. Per block the
    /// [`decode_q`] registers, four `vpmaddubsw(q, a)` summed in i16 (|.| <=
    /// 31,744) and `vpmaddwd` with ones; blocks `b` and `b + 1` fill the two
    /// 128-bit halves, and the low half is added to the 4 row sums before the
    /// high half, the reference's order. Q5_0x4 subtracts `16 sum a` in i32;
    /// Q5_1x4 adds `asum * (m_w * d_a)` to the block's term, in the
    /// reference's order.
    ///
    /// # Safety
    /// `w.len() >= groups * nb * B` (B = 88, Q5_1x4: 96), `qs.len() >= nb * 32`,
    /// `d.len() >= nb`, `out.len() >= rows`, `rows <= groups * 4`, `1 <= nb <=
    /// GEMV_MAX_BLOCKS` (`<= GEMV_EXPAND_BLOCKS` with `EXPAND`), and the CPU
    /// must implement AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q5_gemv<const Q51: bool, const EXPAND: bool>(
        w: &[u8],
        rows: usize,
        groups: usize,
        nb: usize,
        qs: &[i8],
        d: &[f32],
        out: &mut [f32],
    ) {
        let (bytes, nibbles, plane) = if Q51 {
            (Q5_1X4_BLOCK_BYTES, Q5_1X4_NIBBLES, Q5_1X4_PLANE)
        } else {
            (Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE)
        };
        // SAFETY: the pointer arithmetic and loads below stay inside `w`, `qs`,
        // `d` and `out` as sized by the function contract (`groups` row groups
        // of `nb` super-blocks, `nb` blocks of activations, `rows` outputs); the
        // CPU implements AVX2, FMA and F16C.
        unsafe {
            debug_assert!(
                (1..=GEMV_MAX_BLOCKS).contains(&nb) && qs.len() >= nb * QK && d.len() >= nb
            );
            debug_assert!(!EXPAND || nb <= GEMV_EXPAND_BLOCKS);
            debug_assert!(w.len() >= groups * nb * bytes && rows <= groups * Q5X4_ROWS);
            // SAFETY: block b < nb of `qs` is bytes 32b..32b+32.
            let spread = |b: usize| act_patterns(qs.as_ptr().add(b * QK));
            // The expanded activations (with EXPAND) and the block sums: blocks
            // 0..nb are written here and only those are read below.
            let mut av = [core::mem::MaybeUninit::<[__m256i; 4]>::uninit(); GEMV_EXPAND_BLOCKS];
            let mut asum = [0i32; GEMV_MAX_BLOCKS];
            let ones8 = _mm256_set1_epi8(1);
            let ones16 = _mm256_set1_epi16(1);
            for b in 0..nb {
                let a = _mm256_loadu_si256(qs.as_ptr().add(b * QK).cast());
                if EXPAND {
                    av[b].write(spread(b));
                }
                // sum(a) in i32: pairs with vpmaddubsw(1, a), then vpmaddwd.
                let s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones16);
                let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
                asum[b] = _mm_cvtsi128_si32(s);
            }
            // sum q a of one super-block at `p`: lanes 0-3 even chunks, 4-7 odd.
            let block_sum = |p: *const u8, a: &[__m256i; 4]| {
                // SAFETY: p is a super-block of a group (in bounds).
                let q = { decode_q(p, nibbles, plane) };
                let lo = _mm256_add_epi16(
                    _mm256_maddubs_epi16(q[0], a[0]),
                    _mm256_maddubs_epi16(q[1], a[1]),
                );
                let hi = _mm256_add_epi16(
                    _mm256_maddubs_epi16(q[2], a[2]),
                    _mm256_maddubs_epi16(q[3], a[3]),
                );
                _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones16)
            };
            let f16x8 = |pa: *const u8, pb: *const u8, at: usize| {
                // SAFETY: bytes at..at + 8 of both super-blocks are in bounds
                // (the scales, or Q5_1x4's minimums).
                let (x, y) = (
                    _mm_loadl_epi64(pa.add(at).cast()),
                    _mm_loadl_epi64(pb.add(at).cast()),
                );
                _mm256_cvtph_ps(_mm_unpacklo_epi64(x, y))
            };
            let group_bytes = nb * bytes;
            for g in 0..groups {
                let base = w.as_ptr().add(g * group_bytes);
                let acc = sum_block_pairs(nb, |b, b1| {
                    let pa = base.add(b * bytes);
                    let pb = base.add(b1 * bytes);
                    prefetch_ahead(pa, 2 * bytes);
                    // SAFETY (EXPAND): blocks b, b1 < nb were written above.
                    let (ia, ib) = if EXPAND {
                        (
                            block_sum(pa, av[b].assume_init_ref()),
                            block_sum(pb, av[b1].assume_init_ref()),
                        )
                    } else {
                        (block_sum(pa, &spread(b)), block_sum(pb, &spread(b1)))
                    };
                    // [block b rows, block b1 rows]: sum q a, exact i32.
                    let isum = pair_rows(ia, ib);
                    let da = _mm256_setr_m128(
                        _mm_set1_ps(*d.get_unchecked(b)),
                        _mm_set1_ps(*d.get_unchecked(b1)),
                    );
                    let s = _mm256_setr_m128i(_mm_set1_epi32(asum[b]), _mm_set1_epi32(asum[b1]));
                    let sw = f16x8(pa, pb, 0);
                    if Q51 {
                        let t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da));
                        let mw = f16x8(pa, pb, Q5_1X4_MINS);
                        let t2 = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(mw, da));
                        _mm256_add_ps(t1, t2)
                    } else {
                        // sum (q - 16) a = sum q a - 16 sum a, exact.
                        let isum = _mm256_sub_epi32(isum, _mm256_slli_epi32::<4>(s));
                        _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da))
                    }
                });
                let row0 = g * Q5X4_ROWS;
                let n = (rows - row0).min(Q5X4_ROWS);
                let mut r = [0.0f32; Q5X4_ROWS];
                _mm_storeu_ps(r.as_mut_ptr(), acc);
                out[row0..row0 + n].copy_from_slice(&r[..n]);
            }
        }
    }

    /// One Q5_0x4 (`Q51` false) or Q5_1x4 weight tile (row groups `wa` and
    /// `wb`, 8 rows) against `T` activation rows: `res[t]` = the 4 rows of `wa`
    /// then the 4 rows of `wb`.
    ///
    /// Per super-block and group: the nibbles as in the Q4_0x4 tile (two
    /// 32-byte loads, `and`/`srli`), and the fifth-bit plane broadcast to both
    /// 128-bit halves: plane bit `p` of byte `4r + k` belongs to the weights of
    /// chunk `p % 4`, low nibbles for `p < 4`, high ones otherwise. A per-half
    /// `vpsllvd`/`vpsrlvd` brings each register's two plane bits to bit 4, and
    /// `andnot` with 0x10 turns the inverted bit into `16 * fifth bit`: the
    /// unsigned `q` (0..31) after an `or`. `vpmaddubsw(q, a)` pair sums fit i16
    /// (|.| <= 2 * 31 * 128 = 7,936; four of them <= 31,744).
    ///
    /// The activation block's `vpermd` patterns and its quant sum `sum a` come
    /// from `tables` when `TABLES` (formed once per batch), else they are
    /// formed here. Q5_0 without tables: the activation's `16 * (a + a')`
    /// (`vpmaddubsw(16, a)`, four <= 16,384) is subtracted in i16: the
    /// difference is `sum (q - 16) a` over the lane's 8 products (|.| <=
    /// 16,384), exact because the true value fits and the adds wrap; with
    /// tables, `16 * sum a` is subtracted from the row's i32 sum instead, the
    /// same integer. Q5_1: `sum q a` as it is, and `sum a` (without tables:
    /// `vpmaddubsw(1, a)`, `vpmaddwd`, a horizontal add), exact. `vpmaddwd`
    /// with ones makes the sums i32; the two halves (even and odd chunks) are
    /// added.
    ///
    /// # Safety
    /// `wa.len()` and `wb.len()` must be at least `nb` super-blocks (88 bytes,
    /// Q5_1x4: 96), `qs.len()` at least `T * nb * 32`, `d.len()` at least `T *
    /// nb`, with `TABLES` both `tables` slices at least `T * nb` long (row `t`,
    /// block `b` at `t * nb + b`), `T <= 4`, and the CPU must implement AVX2,
    /// FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q5x4_tile<const T: usize, const Q51: bool, const TABLES: bool>(
        wa: &[u8],
        wb: &[u8],
        qs: &[i8],
        d: &[f32],
        tables: Tables<'_>,
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) {
        // SAFETY: the contract of this function is the body's, with `DOT` =
        // `vpmaddubsw`, which AVX2 implements.
        unsafe {
            q5x4_tile_body::<T, Q51, TABLES, { Dot::MADDUBS }>(wa, wb, qs, d, tables, nb, res)
        }
    }

    // [`q5x4_tile`] with tables, its byte products summed by the AVX-VNNI
    // `vpdpbusd`: the same i32 sums, so the same results.
    vnni_forms!(avx: q5x4_tile_avx_vnni<const T: usize, const Q51: bool>(
        wa: &[u8],
        wb: &[u8],
        qs: &[i8],
        d: &[f32],
        tables: Tables<'_>,
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) => q5x4_tile_body::<T, Q51, true, DOT>);

    /// The body of the two tiles, inlined into each so that it is compiled
    /// with its caller's features (`DOT`: [`Dot::MADDUBS`] or [`Dot::AVX_VNNI`],
    /// then `TABLES` must be true).
    ///
    /// # Safety
    /// As [`q5x4_tile`], and the CPU must implement the `DOT` form.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn q5x4_tile_body<const T: usize, const Q51: bool, const TABLES: bool, const DOT: u8>(
        wa: &[u8],
        wb: &[u8],
        qs: &[i8],
        d: &[f32],
        (patterns, sums): Tables<'_>,
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) {
        const { assert!(DOT == Dot::MADDUBS || (DOT == Dot::AVX_VNNI && TABLES)) };
        let (bytes, nibbles, plane) = if Q51 {
            (Q5_1X4_BLOCK_BYTES, Q5_1X4_NIBBLES, Q5_1X4_PLANE)
        } else {
            (Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE)
        };
        // SAFETY: the loads below read the `nb` super-blocks of `wa`/`wb` and `T`
        // rows of `nb` blocks of `qs`, `d` and (with TABLES) `patterns` and
        // `sums`, all inside the slices per the function contract; the CPU
        // implements AVX2, FMA and F16C.
        unsafe {
            debug_assert!(T <= TILE_M && wa.len() >= nb * bytes && wb.len() >= nb * bytes);
            debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb);
            let cols = nb * QK;
            let b4 = _mm256_set1_epi8(0x10);
            let ones8 = _mm256_set1_epi8(1);
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm256_setzero_ps(); T];
            for b in 0..nb {
                let pa = wa.as_ptr().add(b * bytes);
                let pb = wb.as_ptr().add(b * bytes);
                // Prefetch the bytes after `wb` (the next pair of row groups) at the
                // rate this pair is read. A prefetch never faults, and
                // `wrapping_add` keeps the address arithmetic defined.
                let pf = wb.as_ptr().wrapping_add(nb * bytes + 2 * b * bytes);
                _mm_prefetch::<_MM_HINT_T0>(pf.cast());
                _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64).cast());
                _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(128).cast());
                // Unsigned q, per group: [lo chunks 0-1, lo chunks 2-3, hi 0-1, hi 2-3].
                // SAFETY: pa and pb are super-blocks inside `wa` and `wb`.
                let (qa, qb) = { (decode_q(pa, nibbles, plane), decode_q(pb, nibbles, plane)) };
                // Scales (and Q5_1's minimums) of the 8 rows: 4 f16 of group a,
                // then 4 of group b.
                let f16x8 = |at: usize| {
                    // SAFETY: bytes at..at + 8 of both super-blocks are in bounds
                    // (at is 0, or the minimums' offset 8 of a 96-byte Q5_1x4
                    // super-block).
                    let (x, y) = {
                        (
                            _mm_loadl_epi64(pa.add(at).cast()),
                            _mm_loadl_epi64(pb.add(at).cast()),
                        )
                    };
                    _mm256_cvtph_ps(_mm_unpacklo_epi64(x, y))
                };
                let sw = f16x8(0);
                let mw = if Q51 { f16x8(Q5_1X4_MINS) } else { sw };
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let at = qs.as_ptr().add(t * cols + b * QK);
                    let av = if TABLES {
                        *patterns.get_unchecked(t * nb + b)
                    } else {
                        act_patterns(at)
                    };
                    let dot16 = |n: &[__m256i; 4]| {
                        _mm256_add_epi16(
                            _mm256_add_epi16(
                                _mm256_maddubs_epi16(n[0], av[0]),
                                _mm256_maddubs_epi16(n[1], av[1]),
                            ),
                            _mm256_add_epi16(
                                _mm256_maddubs_epi16(n[2], av[2]),
                                _mm256_maddubs_epi16(n[3], av[3]),
                            ),
                        )
                    };
                    // sum q a per dword (row and 4-weight chunk, the 4 registers
                    // summed) with `vpdpbusd`: the i32 that the i16 path below
                    // forms (its i16 sums are exact, see above).
                    let dot32 = |n: &[__m256i; 4]| {
                        let mut s = _mm256_setzero_si256();
                        for k in 0..4 {
                            s = crate::x86_64::dpbusd_vex(s, n[k], av[k]);
                        }
                        s
                    };
                    let (ia, ib) = if DOT != Dot::MADDUBS {
                        (dot32(&qa), dot32(&qb))
                    } else {
                        let (sa, sb) = if Q51 || TABLES {
                            (dot16(&qa), dot16(&qb))
                        } else {
                            // 16 * (a + a') per i16 lane, the lanes of dot16.
                            let corr = dot16(&[b4; 4]);
                            (
                                _mm256_sub_epi16(dot16(&qa), corr),
                                _mm256_sub_epi16(dot16(&qb), corr),
                            )
                        };
                        (_mm256_madd_epi16(sa, ones), _mm256_madd_epi16(sb, ones))
                    };
                    // [a even chunks + a odd chunks, b even + b odd]: exact i32.
                    let isum = _mm256_add_epi32(
                        _mm256_permute2x128_si256(ia, ib, 0x20),
                        _mm256_permute2x128_si256(ia, ib, 0x31),
                    );
                    let isum = if TABLES && !Q51 {
                        let sum_a = *sums.get_unchecked(t * nb + b);
                        _mm256_sub_epi32(isum, _mm256_set1_epi32(16 * sum_a))
                    } else {
                        isum
                    };
                    let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                    let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da));
                    let v = if Q51 {
                        // sum a, in every lane.
                        let s = if TABLES {
                            _mm256_set1_epi32(*sums.get_unchecked(t * nb + b))
                        } else {
                            let a = _mm256_loadu_si256(at.cast());
                            let s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones);
                            let s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 0x01));
                            let s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0b01_00_11_10));
                            _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0b10_11_00_01))
                        };
                        let m = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(mw, da));
                        _mm256_add_ps(v, m)
                    } else {
                        v
                    };
                    *acc_t = _mm256_add_ps(*acc_t, v);
                }
            }
            for (r, a) in res.iter_mut().zip(acc) {
                _mm256_storeu_ps(r.as_mut_ptr(), a);
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
