//! Q6_Kx8, the whole layout in one file: GGUF Q6_K super-blocks repacked 8
//! rows at a time, every value kept exactly (docs/kernels.md, "Q6_Kx8").
//! Here are its geometry and byte order, its repacker (its inverse, which
//! only the tests use, is `kestrel_tests::unpack_q6_k`), its scalar
//! specification ([`generic`]) and its kernels on aarch64 (the 8-row K
//! text `k8_kernels!` of `aarch64/k8.rs`, its quant decoding `q6k_quants!`
//! a parameter) and x86_64 (tiles that the 8-row K driver `k8_gemm` of
//! `x86_64/k8.rs` runs, and the 512-bit AVX512-VNNI tile), the one of the
//! build also named [`arch`].
//!
//! A GGUF Q6_K block (210 bytes, 256 weights) is `ql[128]`, `qh[64]`,
//! `scales[16]: i8`, `d: f16`; weight `i = 128n + 32c + l` (`n` 0..2, `c`
//! 0..4, `l` 0..32) has the 6-bit quant `q` whose low 4 bits are the low
//! (`c` < 2) or high (`c` >= 2) nibble of `ql[64n + 32(c & 1) + l]` and
//! whose high 2 bits are bits `2c, 2c + 1` of `qh[32n + l]`; its value is
//! `d * scales[i / 16] * (q - 32)` (as `dequantize_row_q6_K`).
//!
//! For row group `g` and super-block column `b` the Q6_Kx8 super-block
//! (1680 bytes, at `(g * nb + b) * 1680`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * then for each 32-weight block `p` (0..8) 208 bytes at `16 + 208p`:
//!   * `8h + r` (`h` 0..2): `scales[2p + h]` of row `r` (copied);
//!   * `16 + 96h + 32s + 4r + k` (`s` 0..3, `k` 0..4), for the 16-weight
//!     group `j = 2p + h`: `((q(16j + 4s + k) ^ 32) << 2) | ((q(16j + 12 +
//!     k) ^ 32) >> (4 - 2s) & 3)`.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`,
//! scales 0, `q = 32`, so every padding weight is exactly 0).

use crate::layout::{K8_ROWS, QK, QK_K};
use crate::shape::ShapeError;

/// Bytes of one GGUF Q6_K super-block (256 weights): `ql[128]` (low 4 bits),
/// `qh[64]` (high 2 bits), `scales[16]` (`i8`, one per 16 weights), `d`
/// (f16 LE); weight `i` is `d * scales[i / 16] * (q - 32)`, `q` in 0..64.
pub const Q6_K_BLOCK_BYTES: usize = 128 + 64 + 16 + 2;

/// Rows in one Q6_Kx8 row group.
pub const Q6KX8_ROWS: usize = K8_ROWS;
/// Bytes of one Q6_Kx8 32-weight block (8 rows x 32 weights): the 16 scales
/// of its two 16-weight groups (`8h + r`: group `h`, row `r`), then two
/// 96-byte groups of packed 6-bit quants.
pub const Q6KX8_PAIR_BYTES: usize = 2 * Q6KX8_ROWS + 2 * 3 * 4 * Q6KX8_ROWS;
/// Bytes of one Q6_Kx8 super-block (8 rows x 256 weights): the 8 rows' f16
/// `d`, then 8 blocks of [`Q6KX8_PAIR_BYTES`]: exactly 8 GGUF Q6_K blocks'
/// worth (6.5625 bits per weight).
///
/// Q6_Kx8 holds the GGUF values exactly, rearranged for `sdot` / AVX2: in
/// the 96 bytes of 16-weight group `j` (row `r`, `k` in 0..4), byte `32s +
/// 4r + k` for `s` in 0..3 is `((q ^ 32) << 2) | t` with `q` weight `16j +
/// 4s + k`'s 6-bit quant, so `and 0xFC` makes it the `i8` `4 * (q - 32)`;
/// its two low bits `t` are bits `5 - 2s, 4 - 2s` of `q' ^ 32`, `q'` the
/// quant of weight `16j + 12 + k`, which `shl`/`sli`/`sli` reassemble the
/// same way. docs/kernels.md gives every byte.
pub const Q6KX8_BLOCK_BYTES: usize = 2 * Q6KX8_ROWS + (QK_K / QK) * Q6KX8_PAIR_BYTES;

const _: () = assert!(Q6_K_BLOCK_BYTES == 210 && Q6KX8_PAIR_BYTES == 208);
const _: () = assert!(Q6KX8_BLOCK_BYTES == Q6KX8_ROWS * Q6_K_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in Q6_Kx8, the padding rows of the last
/// group included: `ceil(rows / 8) * (cols / 256) * 1680` (`None`: it
/// overflows).
pub fn q6_kx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, Q6KX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF Q6_K: `rows * (cols / 256) *
/// 210` (`None`: it overflows).
pub fn q6_k_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, Q6_K_BLOCK_BYTES)
}

/// The 6-bit quant `q` of weight `i` in a GGUF Q6_K block.
#[inline]
pub fn gguf_q(block: &[u8], i: usize) -> u8 {
    let (n, c, l) = (i / 128, (i % 128) / 32, i % 32);
    let ql = block[64 * n + 32 * (c & 1) + l];
    let lo = if c < 2 { ql & 0x0f } else { ql >> 4 };
    let hi = (block[128 + 32 * n + l] >> (2 * c)) & 3;
    lo | (hi << 4)
}

/// Writes one Q6_Kx8 super-block from up to 8 GGUF Q6_K blocks (`src[r]`
/// for row `r`; missing rows are padding).
#[cfg_attr(kestrel_shipped, optimize(size))]
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[208..210]);
        for p in 0..QK_K / 32 {
            let pb = &mut sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * p..][..Q6KX8_PAIR_BYTES];
            for h in 0..2 {
                let j = 2 * p + h;
                pb[8 * h + r] = block[192 + j];
                for s in 0..3 {
                    for k in 0..4 {
                        let a = gguf_q(block, 16 * j + 4 * s + k) ^ 32;
                        let t = ((gguf_q(block, 16 * j + 12 + k) ^ 32) >> (4 - 2 * s)) & 3;
                        pb[16 + 96 * h + 32 * s + 4 * r + k] = (a << 2) | t;
                    }
                }
            }
        }
    }
}

/// Repacks a row-major GGUF Q6_K matrix (`rows x cols`, `cols` a multiple
/// of 256: `rows * cols / 256` blocks of 210 bytes) into Q6_Kx8 (`out`:
/// [`q6_kx8_bytes`] bytes; the last group padded with zero rows).
pub fn repack_q6_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "q6_k columns (a multiple of 256)",
            "q6_k source bytes",
            "q6_kx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (Q6_K_BLOCK_BYTES, Q6KX8_BLOCK_BYTES),
        pack_super_block,
    )
}

pub mod generic {
    //! GEMV and GEMM of Q6_Kx8 weights (GGUF Q6_K super-blocks, 8 rows
    //! interleaved) with Q8_K activations: the specification of the
    //! architecture kernels, the 8-row K family's dot (`generic/k8.rs`) over
    //! this layout's accessors.
    //!
    //! Shapes: the weight is `rows x cols` (out x in, `cols` a multiple of 256)
    //! in row groups of 8 rows padded to whole groups, each `cols / 256`
    //! super-blocks of 1680 bytes; activations are `m` rows: `act_qs` `m x cols`
    //! quants, `act_d` `m x cols/256` scales, `act_sums` `m x cols/32` sums of
    //! 32 quants (checked, not read: the layout's weights are signed); the
    //! output is `m x rows`, row-major.
    //!
    //! Per row and super-block: `isum_j = sum (q - 32) * a` over the 16
    //! weights of scale group `j`, `sumi = sum_j scale_j * isum_j` exactly in
    //! i32 (|isum_j| <= 16 * 32 * 128 = 2^16, |scale_j * isum_j| <= 2^23,
    //! |sumi| <= 2^27), then `acc += (d_w * d_a) * (sumi as f32)`.

    use super::{Q6KX8_BLOCK_BYTES, Q6KX8_PAIR_BYTES, Q6KX8_ROWS};
    use crate::generic::{gemm_k_groups, k8_group_dot};
    use crate::layout::QK;

    /// The signed quant `q - 32` of weight `i` (0..256) of row `r` (0..8) in a
    /// Q6_Kx8 super-block.
    #[inline]
    pub fn q6kx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let g = &sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * (i / QK) + 2 * Q6KX8_ROWS..];
        let g = &g[96 * ((i / 16) % 2)..][..96];
        let (s, k) = ((i % 16) / 4, i % 4);
        let at = |s: usize| g[32 * s + 4 * r + k];
        // `v` is q ^ 32: read as a signed 6-bit number it is q - 32.
        let v = if s < 3 {
            at(s) >> 2
        } else {
            ((at(0) & 3) << 4) | ((at(1) & 3) << 2) | (at(2) & 3)
        };
        (v ^ 32) as i32 - 32
    }

    /// The `i8` scale of 16-weight group `j` (0..16) of row `r` in a Q6_Kx8
    /// super-block.
    #[inline]
    pub fn q6kx8_scale(sb: &[u8], r: usize, j: usize) -> i32 {
        sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * (j / 2) + Q6KX8_ROWS * (j % 2) + r] as i8 as i32
    }

    /// The eight rows of one Q6_Kx8 row group dotted with one Q8_K activation
    /// row (`act_qs`: the row's quants, `act_d`: its per-256 scales).
    pub fn q6kx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q6KX8_ROWS] {
        k8_group_dot(
            Q6KX8_BLOCK_BYTES,
            (q6kx8_weight, q6kx8_scale),
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, Q6_Kx8 weights x one Q8_K activation row: `out[r] = W[r] . act`.
        ///
        /// * `w`: `ceil(rows / 8)` row groups of `cols / 256` 1680-byte super-blocks;
        /// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
        ///   `cols / 32` sums (checked only);
        /// * `out`: `rows` results.
        q8_k gemv gemv_q6_kx8_q8_k => gemm_q6_kx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, Q6_Kx8 weights x `m` Q8_K activation rows: `out[t * rows + r] =
        /// W[r] . act[t]`.
        ///
        /// * `w`: `ceil(rows / 8)` row groups of `cols / 256` 1680-byte super-blocks;
        /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
        ///   `act_sums`: `m x cols / 32` sums (checked only);
        /// * `out`: `m x rows` results.
        q8_k gemm gemm_q6_kx8_q8_k => gemm_k_groups [Q6KX8_BLOCK_BYTES, |g, q, d, _| q6kx8_group_dot(g, q, d)]
    );
}

#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    //! GEMV and GEMM of Q6_Kx8 weights with Q8_K activations on the 8-row K
    //! text (`aarch64/k8.rs`): `sdot` by lane on the layout's 6-bit quants,
    //! unpacked to `i8` values `4 * (q - 32)` in 1.5 instructions per register
    //! (`and` for three chunks of a 16-weight group, `shl`/`sli`/`sli` for the
    //! fourth), the 16 `i8` scales applied exactly with `mla` on `i32` lanes,
    //! and `scvtf #2` undoing the factor 4.

    use super::Q6KX8_BLOCK_BYTES;
    use crate::aarch64::k8::k8_kernels;

    /// The quant decoding of Q6_Kx8 (`v31` = 0xfc): `S & 0xFC` is `4 (q - 32)`
    /// for three chunks, `shl`/`sli`/`sli` of the low bits the fourth; `scvtf
    /// #2` undoes the factor 4. Arms: the constant, the fraction bits, a
    /// 32-weight block's 16 `i8` scales into `v0` (`v16`..`v18` free), the
    /// tile's loads and decoding of one group (into `v4`..`v11`), the GEMV's
    /// loads of two groups and the decoding of each (into `v1`..`v6`, `v21`,
    /// `v22` and `v7`..`v12`, `v0`, `v15`).
    #[rustfmt::skip]
    macro_rules! q6k_quants {
        (setup) => { "movi v31.16b, #0xfc" };
        (fbits) => { ", #2" };
        (scales) => { "ld1 {{v0.16b}}, [{w}], #16" };
        (tile_load) => { concat!(
            "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w}], #64\n", // S0, S1
            "ld1 {{v8.16b, v9.16b}}, [{w}], #32\n", // S2
        ) };
        (tile_decode) => { concat!(
            "shl v10.16b, v8.16b, #2\n",
            "shl v11.16b, v9.16b, #2\n",
            "sli v10.16b, v6.16b, #4\n",
            "sli v11.16b, v7.16b, #4\n",
            "sli v10.16b, v4.16b, #6\n",
            "sli v11.16b, v5.16b, #6\n",
            "and v4.16b, v4.16b, v31.16b\n",
            "and v5.16b, v5.16b, v31.16b\n",
            "and v6.16b, v6.16b, v31.16b\n",
            "and v7.16b, v7.16b, v31.16b\n",
            "and v8.16b, v8.16b, v31.16b\n",
            "and v9.16b, v9.16b, v31.16b\n",
        ) };
        (gemv_load) => { concat!(
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64\n", // g0: S0, S1 (rows 0-3, 4-7)
            "ld1 {{v5.16b, v6.16b, v7.16b, v8.16b}}, [{w}], #64\n", // g0: S2; g1: S0
            "ld1 {{v9.16b, v10.16b, v11.16b, v12.16b}}, [{w}], #64", // g1: S1, S2
        ) };
        (gemv_dec0) => { concat!(
            "shl v21.16b, v5.16b, #2\n", // 4th chunk: t2 << 2
            "shl v22.16b, v6.16b, #2\n",
            "sli v21.16b, v3.16b, #4\n", // | t1 << 4
            "sli v22.16b, v4.16b, #4\n",
            "sli v21.16b, v1.16b, #6\n", // | t0 << 6
            "sli v22.16b, v2.16b, #6\n",
            "and v1.16b, v1.16b, v31.16b\n", // chunks 0-2: 4 * (q - 32)
            "and v2.16b, v2.16b, v31.16b\n",
            "and v3.16b, v3.16b, v31.16b\n",
            "and v4.16b, v4.16b, v31.16b\n",
            "and v5.16b, v5.16b, v31.16b\n",
            "and v6.16b, v6.16b, v31.16b",
        ) };
        (gemv_dec1) => { concat!(
            "shl v0.16b, v11.16b, #2\n", // 4th chunk: t2 << 2
            "shl v15.16b, v12.16b, #2\n",
            "sli v0.16b, v9.16b, #4\n", // | t1 << 4
            "sli v15.16b, v10.16b, #4\n",
            "sli v0.16b, v7.16b, #6\n", // | t0 << 6
            "sli v15.16b, v8.16b, #6\n",
            "and v7.16b, v7.16b, v31.16b\n", // chunks 0-2: 4 * (q - 32)
            "and v8.16b, v8.16b, v31.16b\n",
            "and v9.16b, v9.16b, v31.16b\n",
            "and v10.16b, v10.16b, v31.16b\n",
            "and v11.16b, v11.16b, v31.16b\n",
            "and v12.16b, v12.16b, v31.16b",
        ) };
    }

    k8_kernels!(
        [super::generic]
        gemv_q6_kx8_q8_k,
        gemm_q6_kx8_q8_k,
        gemv_q6kx8_groups,
        gemm_q6kx8_tile4,
        q6k_quants,
        Q6KX8_BLOCK_BYTES
    );
}

#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    //! GEMV and GEMM of Q6_Kx8 weights with Q8_K activations: AVX2 tiles of
    //! one row group (8 rows, one per 32-bit lane) x up to 4 activation rows.
    //! The GEMV is the GEMM with one activation row. When the token names a
    //! VNNI form, the tile multiplies with `vpdpbusd` instead, with a per-call
    //! table of the activations' 16-quant sums (the same i32 sums); with
    //! AVX512-VNNI a GEMM of more than [`TILE_M`] activation rows takes the
    //! 512-bit tile of `gemm_vnni.rs` (two row groups, up to 8 activation
    //! rows). Up to [`TILE_M`] rows (a decode step, a verify step of up to 3
    //! drafts, the server's step of up to 4 streams) keep this tile's one
    //! weight stream: from DRAM the 512-bit tile's two streams took 1.99x the
    //! GEMV's time at 4 rows, this tile 1.37x (`kestrel bench --rows 65536
    //! --cols 1536 -t 1`, AMD EPYC Zen 5, 2026-12-04; in cache it is 1.4x
    //! slower than the 512-bit tile, which the 32-row prefill keeps).

    use super::{generic, Q6KX8_BLOCK_BYTES, Q6KX8_PAIR_BYTES, Q6KX8_ROWS};
    use crate::layout::{QK, QK_K};
    use crate::x86_64::k8::{k8_entry, TILE_M};
    use crate::x86_64::{prefetch_ahead, Dot, RUN};
    use core::arch::x86_64::*;

    // Q6_Kx8's entry points: `gemm_q6_kx8_q8_k` (1680-byte super-blocks; the
    // same contract as [`generic::gemm_q6_kx8_q8_k`]: empty shapes go to the
    // generic code, and so do activations with a -128 quant, which the Q8_K
    // quantizer never makes, when the CPU has no VNNI form), its GEMV, the
    // tiles, and with AVX512-VNNI and more than 4 rows the 512-bit GEMM.
    k8_entry!(
        "Q6_Kx8",
        gemv_q6_kx8_q8_k,
        gemm_q6_kx8_q8_k,
        Q6K,
        [q6kx8_tile, q6kx8_tile_avx_vnni, q6kx8_tile_avx512_vnni],
        q6kx8_tile_body,
        Q6KX8_BLOCK_BYTES,
        true,
        generic::gemm_q6_kx8_q8_k,
        wide = avx512::q6kx8_tile
    );

    /// The body of the three tiles, inlined into each so that it is compiled
    /// with its caller's features (`DOT`: a [`Dot`] constant).
    ///
    /// Per 16-weight group: three 32-byte loads `S0..S2` (8 rows x 4 bytes
    /// each); chunks 0-2 are `S & 0xFC`, chunk 3 is `(S0 & 3) << 6 | (S1 & 3)
    /// << 4 | (S2 & 3) << 2` (16-bit shifts: the masked bits stay in their
    /// byte), each the `i8` `4 * (q - 32)`. The AVX2 form, per chunk and
    /// activation row: `vpmaddubsw(|w|, sign(a, w))` (|w| <= 128 unsigned, |a|
    /// <= 127: pair sums <= 32,512, exact), then `vpmaddwd` with the row's
    /// scale in both i16 halves of its lane applies the scale exactly in i32;
    /// the super-block sum is `4 * sumi`, `>> 2` (exact) gives `sumi`. The VNNI forms take each chunk as the
    /// unsigned byte `4 * (q - 32) + 128 = 4q` (the chunk's `i8` with its sign
    /// bit flipped) and the activations as they are (any `i8`, -128 too):
    /// per group and activation row, four `vpdpbusd` add the 16 products `4q *
    /// a` per lane to the run's entry of `offsets` (`-128 * sum(a)`, see
    /// [`offset_table`]), which gives `4 * sum((q - 32) * a)` (at most 16 *
    /// 128 * 128 in magnitude), and `vpmulld` by the row's scale (an `i8`)
    /// applies it in i32: the i32 the AVX2 form adds, exact (a super-block's
    /// `4 * sumi` is at most 256 * 128 * 128 * 128 < 2^31).
    ///
    /// # Safety
    /// `w.len()` must be at least `nb * 1680`, `qs.len()` at least `T * nb *
    /// 256`, `d.len()` at least `T * nb`, `T <= 4`; with the AVX2 form no quant
    /// may be -128; with a VNNI form `offsets` must hold `T * nb * 16` entries
    /// (row `t`'s run `k` at `t * nb * 16 + k`), and the CPU must implement AVX2,
    /// FMA, F16C and the `DOT` form.
    #[inline(always)]
    unsafe fn q6kx8_tile_body<const T: usize, const DOT: u8>(
        w: &[u8],
        qs: &[i8],
        d: &[f32],
        offsets: &[i32],
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) {
        // SAFETY: the loads below read the `nb` super-blocks of `w` and `T` rows
        // of `nb` super-blocks of `qs`, `d` and (VNNI) `offsets`, all inside the
        // slices per the function contract; the CPU implements AVX2, FMA, F16C
        // and the `DOT` form.
        unsafe {
            debug_assert!(T <= TILE_M && w.len() >= nb * Q6KX8_BLOCK_BYTES);
            debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb);
            debug_assert!(DOT == Dot::MADDUBS || offsets.len() >= T * nb * QK_K / RUN);
            let cols = nb * QK_K;
            let runs = cols / RUN;
            let mfc = _mm256_set1_epi8(0xFCu8 as i8);
            let m3 = _mm256_set1_epi8(3);
            let flip = _mm256_set1_epi8(i8::MIN);
            // Each row's scale byte into both i16 halves of its 32-bit lane.
            let dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
            let mut acc = [_mm256_setzero_ps(); T];
            for b in 0..nb {
                let sb = w.as_ptr().add(b * Q6KX8_BLOCK_BYTES);
                prefetch_ahead(sb, Q6KX8_BLOCK_BYTES);
                let mut sumi = [_mm256_setzero_si256(); T];
                for p in 0..QK_K / QK {
                    let pb = sb.add(2 * Q6KX8_ROWS + p * Q6KX8_PAIR_BYTES);
                    for h in 0..2 {
                        let scale_bytes = _mm_loadl_epi64(pb.add(8 * h).cast());
                        let g = pb.add(16 + 96 * h);
                        let s0 = _mm256_loadu_si256(g.cast());
                        let s1 = _mm256_loadu_si256(g.add(32).cast());
                        let s2 = _mm256_loadu_si256(g.add(64).cast());
                        let c3 = _mm256_or_si256(
                            _mm256_or_si256(
                                _mm256_slli_epi16::<6>(_mm256_and_si256(s0, m3)),
                                _mm256_slli_epi16::<4>(_mm256_and_si256(s1, m3)),
                            ),
                            _mm256_slli_epi16::<2>(_mm256_and_si256(s2, m3)),
                        );
                        let c = [
                            _mm256_and_si256(s0, mfc),
                            _mm256_and_si256(s1, mfc),
                            _mm256_and_si256(s2, mfc),
                            c3,
                        ];
                        if DOT == Dot::MADDUBS {
                            let sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scale_bytes, dup));
                            let cabs = c.map(|ck| _mm256_abs_epi8(ck));
                            for (t, sumi_t) in sumi.iter_mut().enumerate() {
                                let ap = qs.as_ptr().add(t * cols + b * QK_K + p * QK + 16 * h);
                                let prod = |k: usize| {
                                    let a = _mm256_set1_epi32(
                                        ap.add(4 * k).cast::<i32>().read_unaligned(),
                                    );
                                    _mm256_madd_epi16(
                                        _mm256_maddubs_epi16(cabs[k], _mm256_sign_epi8(a, c[k])),
                                        sc,
                                    )
                                };
                                let s = _mm256_add_epi32(
                                    _mm256_add_epi32(prod(0), prod(1)),
                                    _mm256_add_epi32(prod(2), prod(3)),
                                );
                                *sumi_t = _mm256_add_epi32(*sumi_t, s);
                            }
                        } else {
                            let sc = _mm256_cvtepi8_epi32(scale_bytes);
                            let u = c.map(|ck| _mm256_xor_si256(ck, flip));
                            for (t, sumi_t) in sumi.iter_mut().enumerate() {
                                let ap = qs.as_ptr().add(t * cols + b * QK_K + p * QK + 16 * h);
                                let run = t * runs + b * (QK_K / RUN) + 2 * p + h;
                                let mut s = _mm256_set1_epi32(*offsets.get_unchecked(run));
                                for (k, uk) in u.iter().enumerate() {
                                    let a = _mm256_set1_epi32(
                                        ap.add(4 * k).cast::<i32>().read_unaligned(),
                                    );
                                    s = if DOT == Dot::AVX_VNNI {
                                        crate::x86_64::dpbusd_vex(s, *uk, a)
                                    } else {
                                        _mm256_dpbusd_epi32(s, *uk, a)
                                    };
                                }
                                *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(s, sc));
                            }
                        }
                    }
                }
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                    let scale = _mm256_mul_ps(dw, da);
                    let f = _mm256_cvtepi32_ps(_mm256_srai_epi32::<2>(sumi[t]));
                    *acc_t = _mm256_add_ps(*acc_t, _mm256_mul_ps(scale, f));
                }
            }
            for (r, a) in res.iter_mut().zip(acc) {
                _mm256_storeu_ps(r.as_mut_ptr(), a);
            }
        }
    }

    /// The 512-bit AVX512-VNNI tile of Q6_Kx8 (two row groups, up to 8
    /// activation rows; `x86_64/gemm_vnni.rs`'s call and tile loops), which
    /// the 8-row K driver takes for GEMMs of more than [`TILE_M`] rows.
    pub(crate) mod avx512 {
        use crate::layout::{QK, QK_K};
        use crate::layouts::q6k::{Q6KX8_BLOCK_BYTES, Q6KX8_PAIR_BYTES, Q6KX8_ROWS};
        use crate::x86_64::gemm_vnni::avx512::{
            pair_blocks, pair_f16, pair_halves, run_dot, store_pair_rows,
        };
        use crate::x86_64::gemm_vnni::{for_each_row, TILE_M};
        use crate::x86_64::RUN;
        use core::arch::x86_64::*;

        /// Two Q6_Kx8 row groups `wa`, `wb` (16 rows) against `T` activation
        /// rows: `res[t]` = the 8 rows of `wa`, then the 8 of `wb`.
        ///
        /// The 256-bit VNNI tile above on twice the rows: per 16-weight
        /// run, chunk `s` (0..3) of `wa` and of `wb` fill the two 256-bit
        /// halves of one register (lane `i` = row `i`); chunks 0-2 are `S &
        /// 0xFC` and chunk 3 `(S0 & 3) << 6 | (S1 & 3) << 4 | (S2 & 3) << 2`,
        /// each the `i8` `4 * (q - 32)`, made the unsigned `4q` by flipping its
        /// sign bit (`vpternlogd` does the mask and the flip at once). Per
        /// activation row, four `vpdpbusd` with activation dwords broadcast add
        /// `4q * a` to the run's `offsets` entry (`-128 * sum(a)`), giving `4 *
        /// sum((q - 32) a)`; `vpmulld` by the row's scale (an i8, widened)
        /// adds it to `sumi`. Per super-block `acc + (d_w * d_a) * ((4 sumi) >>
        /// 2)`, the reference's order. Exact in i32 (a super-block's `4 * sumi`
        /// is at most 256 * 128 * 128 * 128 < 2^31).
        ///
        /// # Safety
        /// `wa.len()` and `wb.len()` must be at least `nb * 1680`, `qs.len()` at
        /// least `T * nb * 256`, `d.len()` at least `T * nb`, `offsets.len()` at
        /// least `T * nb * 16` (row `t`'s run `k` at `t * nb * 16 + k`), `1 <= T
        /// <= TILE_M`, and the CPU must implement AVX512-VNNI with AVX512
        /// F/BW/VL.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn q6kx8_tile<const T: usize>(
            wa: &[u8],
            wb: &[u8],
            qs: &[i8],
            d: &[f32],
            offsets: &[i32],
            nb: usize,
            res: &mut [[f32; 16]; TILE_M],
        ) {
            debug_assert!(T <= TILE_M);
            debug_assert!(wa.len() >= nb * Q6KX8_BLOCK_BYTES && wb.len() >= nb * Q6KX8_BLOCK_BYTES);
            debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb);
            debug_assert!(offsets.len() >= T * nb * QK_K / RUN);
            let (cols, runs) = (nb * QK_K, nb * QK_K / RUN);
            let mfc = _mm512_set1_epi8(0xFCu8 as i8);
            let m3 = _mm512_set1_epi8(3);
            let flip = _mm512_set1_epi8(i8::MIN);
            let mut acc = [_mm512_setzero_ps(); T];
            for b in 0..nb {
                // SAFETY: b < nb, both groups hold `nb` super-blocks (the
                // function contract).
                let (sa, sb) = unsafe { pair_blocks(wa, wb, b, nb, Q6KX8_BLOCK_BYTES) };
                let mut sumi = [_mm512_setzero_si512(); T];
                for p in 0..QK_K / QK {
                    for h in 0..2 {
                        // The run's bytes in both groups: 8 scales at `8h`, the
                        // chunks at `16 + 96h` (after the 8 rows' `d`).
                        let at = 2 * Q6KX8_ROWS + p * Q6KX8_PAIR_BYTES;
                        // SAFETY: bytes `at .. at + 208` of both super-blocks
                        // (p < 8); unaligned loads.
                        let (scales, s) = unsafe {
                            let (ga, gb) = (sa.add(at), sb.add(at));
                            let scales = _mm_unpacklo_epi64(
                                _mm_loadl_epi64(ga.add(8 * h).cast()),
                                _mm_loadl_epi64(gb.add(8 * h).cast()),
                            );
                            let chunk = |k: usize| {
                                let at = 16 + 96 * h + 32 * k;
                                pair_halves(ga.add(at), gb.add(at))
                            };
                            (scales, [chunk(0), chunk(1), chunk(2)])
                        };
                        let sc = _mm512_cvtepi8_epi32(scales);
                        // (S & 0xFC) ^ 0x80 (0x6A: (a & b) ^ c); chunk 3 from the
                        // low bits (16-bit shifts: the masked bits stay in their
                        // byte), or'ed (0xFE) and flipped.
                        let low = |k: usize| _mm512_and_si512(s[k], m3);
                        let c3 = _mm512_ternarylogic_epi32::<0xFE>(
                            _mm512_slli_epi16::<6>(low(0)),
                            _mm512_slli_epi16::<4>(low(1)),
                            _mm512_slli_epi16::<2>(low(2)),
                        );
                        let u = [
                            _mm512_ternarylogic_epi32::<0x6A>(s[0], mfc, flip),
                            _mm512_ternarylogic_epi32::<0x6A>(s[1], mfc, flip),
                            _mm512_ternarylogic_epi32::<0x6A>(s[2], mfc, flip),
                            _mm512_xor_si512(c3, flip),
                        ];
                        for_each_row!(T, |t| {
                            // SAFETY: row t < T, run `16b + 2p + h` < 16 nb of its
                            // offsets and bytes `t * cols + 256b + 32p + 16h ..` +
                            // 16 of `qs` (the function contract); unaligned reads.
                            let (off, ap) = unsafe {
                                (
                                    *offsets.get_unchecked(t * runs + b * (QK_K / RUN) + 2 * p + h),
                                    qs.as_ptr()
                                        .add(t * cols + b * QK_K + p * QK + 16 * h)
                                        .cast::<i32>(),
                                )
                            };
                            // SAFETY: the run's 16 bytes (above).
                            let isum = unsafe { run_dot(off, ap, &u) };
                            sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(isum, sc));
                        });
                    }
                }
                // SAFETY: bytes 0..16 of both super-blocks: the rows' f16 `d`.
                let dw = unsafe { pair_f16(sa, sb) };
                for_each_row!(T, |t| {
                    // SAFETY: t < T, b < nb (the function contract).
                    let da = unsafe { *d.get_unchecked(t * nb + b) };
                    let scale = _mm512_mul_ps(dw, _mm512_set1_ps(da));
                    let f = _mm512_cvtepi32_ps(_mm512_srai_epi32::<2>(sumi[t]));
                    acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(scale, f));
                });
            }
            store_pair_rows(res, acc);
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
