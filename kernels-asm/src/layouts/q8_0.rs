//! Q8_0x8, the whole layout in one file: GGUF Q8_0 blocks, 8 rows
//! interleaved, every value kept exactly (docs/kernels.md, "Q8_0x8"): the
//! prefill copy of the `dual` and `source` modes and the one copy of `q8`.
//! Here are its byte order (its geometry constants are `crate::layout`'s), its repacker, its scalar
//! specification ([`generic`]) and its kernels on aarch64 (`sdot` GEMV loop
//! and 4-row tile on the one driver) and x86_64 (AVX2 tiles; the VNNI tiles
//! of `x86_64/gemm_vnni.rs`), the one of the build also named [`arch`]. The
//! inverse, which only the tests use, is `kestrel_tests::unpack_q8_0`.
//!
//! * Q8_0 (GGUF): 32 weights in 34 bytes: `d: f16 LE`, then 32 x `i8`
//!   (`x = d * q`).
//! * Q8_0x8: rows eight at a time. For row group `g` and block column `b`
//!   one 272-byte super-block at `(g * nb + b) * 272`: eight f16 scales (16
//!   bytes), then 256 quant bytes; byte `32 * c + 4 * r + k` (chunk `c`
//!   0..8, row `r` 0..8, `k` 0..4) is quant `4c + k` of row `r`. One 32-byte
//!   chunk is 8 rows x 4 weights: two `sdot` operands, or one AVX2 register.
//! * Rows past the matrix's last (up to the next multiple of 8) are
//!   all-zero bytes (scale 0). The column count must be a multiple of 32.

use crate::layout::QK;
use crate::shape::ShapeError;

pub use crate::layout::{Q8X8_BLOCK_BYTES, Q8X8_ROWS, Q8_0_BLOCK_BYTES};

/// Repacks a row-major GGUF Q8_0 matrix (`rows x cols / 32` blocks of 34
/// bytes) into Q8_0x8 (`out`: `ceil(rows / 8) * cols / 32` super-blocks).
pub fn repack_q8_0(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    super::repack_row_groups_of(
        Q8X8_ROWS,
        QK,
        [
            "q8_0x8 columns (a multiple of 32)",
            "q8_0 rows bytes",
            "q8_0x8 matrix bytes",
        ],
        src,
        (rows, cols),
        out,
        (Q8_0_BLOCK_BYTES, Q8X8_BLOCK_BYTES),
        pack,
    )
}

/// One super-block from its rows' blocks (missing rows: zeros).
#[cfg_attr(kestrel_shipped, optimize(size))]
fn pack(blocks: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, src) in blocks.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
        for c in 0..8 {
            sb[16 + 32 * c + 4 * r..][..4].copy_from_slice(&src[2 + 4 * c..][..4]);
        }
    }
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{Q8X8_BLOCK_BYTES, Q8X8_ROWS};
    use crate::generic::{gemm_groups, read_f16};
    use crate::layout::QK;

    /// The eight rows of one Q8_0x8 row group dotted with one activation row.
    pub fn q8x8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q8X8_ROWS] {
        let mut acc = [0.0f32; Q8X8_ROWS];
        let blocks = group
            .chunks_exact(Q8X8_BLOCK_BYTES)
            .zip(act_qs.chunks_exact(QK))
            .zip(act_d);
        for ((sb, a), &da) in blocks {
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let mut isum = 0i32;
                for c in 0..8 {
                    for k in 0..4 {
                        let q = sb[16 + 32 * c + 4 * r + k] as i8;
                        isum += q as i32 * a[4 * c + k] as i32;
                    }
                }
                *acc_r += isum as f32 * (read_f16(sb, 2 * r) * da);
            }
        }
        acc
    }

    forwarding_entry!(
        /// GEMV, Q8_0x8 weights x one Q8_0 activation row (shapes as
        /// [`gemv_q4_0x4_q8_0`], with 8-row groups of 272-byte super-blocks).
        q8_0 gemv gemv_q8_0x8_q8_0 => gemm_q8_0x8_q8_0
    );

    forwarding_entry!(
        /// GEMM, Q8_0x8 weights x `m` Q8_0 activation rows (shapes as
        /// [`gemm_q4_0x4_q8_0`], with 8-row groups of 272-byte super-blocks).
        q8_0 gemm gemm_q8_0x8_q8_0 => gemm_groups [Q8X8_BLOCK_BYTES, q8x8_group_dot]
    );
}

/// aarch64: the `sdot` GEMV loop and 4-row tile, on the one driver.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{Q8X8_BLOCK_BYTES, Q8X8_ROWS};
    use crate::aarch64::gemm::{entry_points, tile4_asm, GemmKernels};
    use core::arch::asm;

    /// The Q8_0x8 GEMV asm loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 272` readable bytes, `qs` to `nb * 32`,
    /// `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb >= 1`,
    /// `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    pub(super) unsafe fn gemv_q8x8_groups(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        groups: usize,
    ) {
        // SAFETY: per the function contract, every load stays inside `w`, `qs`,
        // `d` and every store inside `out`: the inner loop reads 272 bytes of
        // `w`, 32 bytes of `qs` and 4 bytes of `d` per block, for nb blocks; the
        // outer loop stores 32 bytes of `out` per group. Only the listed
        // registers are written; no stack is used.
        unsafe {
            asm!(
                "2:",
                "movi v28.16b, #0",          // rows 0-3 sums
                "movi v29.16b, #0",          // rows 4-7 sums
                "mov x9, {qs}",
                "mov x10, {d}",
                "mov x11, {nb}",
                "3:",
                "ld1 {{v0.8h}}, [{w}], #16",                           // 8 row scales (f16)
                "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64",     // chunks 0, 1
                "ld1 {{v5.16b, v6.16b, v7.16b, v8.16b}}, [{w}], #64",     // chunks 2, 3
                "ld1 {{v9.16b, v10.16b, v11.16b, v12.16b}}, [{w}], #64",  // chunks 4, 5
                "ld1 {{v13.16b, v14.16b, v15.16b, v16.16b}}, [{w}], #64", // chunks 6, 7
                "ld1 {{v17.16b, v18.16b}}, [x9], #32",                 // act quants
                "ld1r {{v19.4s}}, [x10], #4",                          // act scale
                "movi v20.16b, #0",
                "movi v21.16b, #0",
                "sdot v20.4s, v1.16b, v17.4b[0]",
                "sdot v21.4s, v2.16b, v17.4b[0]",
                "sdot v20.4s, v3.16b, v17.4b[1]",
                "sdot v21.4s, v4.16b, v17.4b[1]",
                "sdot v20.4s, v5.16b, v17.4b[2]",
                "sdot v21.4s, v6.16b, v17.4b[2]",
                "sdot v20.4s, v7.16b, v17.4b[3]",
                "sdot v21.4s, v8.16b, v17.4b[3]",
                "sdot v20.4s, v9.16b, v18.4b[0]",
                "sdot v21.4s, v10.16b, v18.4b[0]",
                "sdot v20.4s, v11.16b, v18.4b[1]",
                "sdot v21.4s, v12.16b, v18.4b[1]",
                "sdot v20.4s, v13.16b, v18.4b[2]",
                "sdot v21.4s, v14.16b, v18.4b[2]",
                "sdot v20.4s, v15.16b, v18.4b[3]",
                "sdot v21.4s, v16.16b, v18.4b[3]",
                "fcvtl v22.4s, v0.4h",
                "fcvtl2 v23.4s, v0.8h",
                "scvtf v20.4s, v20.4s",
                "scvtf v21.4s, v21.4s",
                "fmul v22.4s, v22.4s, v19.4s", // d_w * d_a
                "fmul v23.4s, v23.4s, v19.4s",
                "fmul v20.4s, v20.4s, v22.4s",
                "fmul v21.4s, v21.4s, v23.4s",
                "fadd v28.4s, v28.4s, v20.4s",
                "fadd v29.4s, v29.4s, v21.4s",
                "subs x11, x11, #1",
                "b.ne 3b",
                "st1 {{v28.4s, v29.4s}}, [{out}], #32",
                "subs {groups}, {groups}, #1",
                "b.ne 2b",
                w = inout(reg) w => _,
                out = inout(reg) out => _,
                groups = inout(reg) groups => _,
                qs = in(reg) qs,
                d = in(reg) d,
                nb = in(reg) nb,
                out("x9") _, out("x10") _, out("x11") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
                out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                out("v20") _, out("v21") _, out("v22") _, out("v23") _,
                out("v28") _, out("v29") _,
                options(nostack),
            );
        }
    }

    /// One activation row of the Q8_0x8 tile: its 32 quants at `{$q}`, 16
    /// `sdot` by lane against the 8 rows' chunks (`v0..v15`) into `v22`/`v23`
    /// (rows 0-3, 4-7), scaled by `d_w` (`v17`, `v18`) times the row's `d_a`
    /// (lane `$lane` of `v19`) into the row's accumulators `$lo`, `$hi`.
    #[rustfmt::skip]
    macro_rules! q8x8_row {
        ($q:literal, $lane:literal, $lo:literal, $hi:literal) => { concat!(
            "ld1 {{v20.16b, v21.16b}}, [{", $q, "}], #32\n",
            "movi v22.16b, #0\n",
            "movi v23.16b, #0\n",
            "sdot v22.4s, v0.16b, v20.4b[0]\n",
            "sdot v23.4s, v1.16b, v20.4b[0]\n",
            "sdot v22.4s, v2.16b, v20.4b[1]\n",
            "sdot v23.4s, v3.16b, v20.4b[1]\n",
            "sdot v22.4s, v4.16b, v20.4b[2]\n",
            "sdot v23.4s, v5.16b, v20.4b[2]\n",
            "sdot v22.4s, v6.16b, v20.4b[3]\n",
            "sdot v23.4s, v7.16b, v20.4b[3]\n",
            "sdot v22.4s, v8.16b, v21.4b[0]\n",
            "sdot v23.4s, v9.16b, v21.4b[0]\n",
            "sdot v22.4s, v10.16b, v21.4b[1]\n",
            "sdot v23.4s, v11.16b, v21.4b[1]\n",
            "sdot v22.4s, v12.16b, v21.4b[2]\n",
            "sdot v23.4s, v13.16b, v21.4b[2]\n",
            "sdot v22.4s, v14.16b, v21.4b[3]\n",
            "sdot v23.4s, v15.16b, v21.4b[3]\n",
            "fmul v20.4s, v17.4s, v19.s[", $lane, "]\n",
            "fmul v21.4s, v18.4s, v19.s[", $lane, "]\n",
            "scvtf v22.4s, v22.4s\n",
            "scvtf v23.4s, v23.4s\n",
            "fmul v22.4s, v22.4s, v20.4s\n",
            "fmul v23.4s, v23.4s, v21.4s\n",
            "fadd ", $lo, ".4s, ", $lo, ".4s, v22.4s\n",
            "fadd ", $hi, ".4s, ", $hi, ".4s, v23.4s\n",
        ) };
    }

    /// One Q8_0x8 row group x 4 activation rows.
    ///
    /// # Safety
    /// `w` must point to `nb * 272` readable bytes, `qs` and `d` to 4 consecutive
    /// activation rows of `nb * 32` quants and `nb` floats, `out` to 4 rows of 8 writable floats
    /// `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemm_q8x8_tile4(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        stride: usize,
    ) {
        // SAFETY: per the function contract: per block the loop reads 272 bytes
        // of `w`, 32 bytes of each activation row's quants and 4 bytes of its scales, for nb
        // blocks; then it stores 32 bytes at out + i * stride for i in 0..4.
        // Only the listed registers are written; no stack is used.
        unsafe {
            tile4_asm!(
                [
                    "movi v24.16b, #0",          // sums: act row i -> v(24+2i), v(25+2i)
                    "movi v25.16b, #0",
                    "movi v26.16b, #0",
                    "movi v27.16b, #0",
                    "movi v28.16b, #0",
                    "movi v29.16b, #0",
                    "movi v30.16b, #0",
                    "movi v31.16b, #0",
                    "3:",
                    "ld1 {{v16.8h}}, [{w}], #16",                             // 8 row scales
                    "ld1 {{v0.16b, v1.16b, v2.16b, v3.16b}}, [{w}], #64",     // chunks 0, 1
                    "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w}], #64",     // chunks 2, 3
                    "ld1 {{v8.16b, v9.16b, v10.16b, v11.16b}}, [{w}], #64",   // chunks 4, 5
                    "ld1 {{v12.16b, v13.16b, v14.16b, v15.16b}}, [{w}], #64", // chunks 6, 7
                    "ld1 {{v19.s}}[0], [{d0}], #4",                           // act scales
                    "ld1 {{v19.s}}[1], [{d1}], #4",
                    "ld1 {{v19.s}}[2], [{d2}], #4",
                    "ld1 {{v19.s}}[3], [{d3}], #4",
                    "fcvtl v17.4s, v16.4h",
                    "fcvtl2 v18.4s, v16.8h",
                    q8x8_row!("q0", "0", "v24", "v25"),
                    q8x8_row!("q1", "1", "v26", "v27"),
                    q8x8_row!("q2", "2", "v28", "v29"),
                    q8x8_row!("q3", "3", "v30", "v31"),
                    "subs {nb}, {nb}, #1",
                    "b.ne 3b",
                    "st1 {{v24.4s, v25.4s}}, [{out}], {stride}",
                    "st1 {{v26.4s, v27.4s}}, [{out}], {stride}",
                    "st1 {{v28.4s, v29.4s}}, [{out}], {stride}",
                    "st1 {{v30.4s, v31.4s}}, [{out}]",
                ],
                (w, qs, d, nb, out, stride),
                [out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _, out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _, out("v31") _,]
            );
        }
    }

    entry_points!(
        q8_0[super::generic],
        gemv_q8_0x8_q8_0,
        gemm_q8_0x8_q8_0,
        GemmKernels {
            group_rows: Q8X8_ROWS,
            block_bytes: Q8X8_BLOCK_BYTES,
            row: gemv_q8x8_groups,
            tile4: Some(gemm_q8x8_tile4),
            small_tiles: None,
            strided: true,
        }
    );
}

/// x86_64: AVX2 tiles of one row group (8 rows) x up to 4 activation rows;
/// with VNNI the tiles of `x86_64/gemm_vnni.rs`.
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{generic, Q8X8_BLOCK_BYTES, Q8X8_ROWS};
    use crate::layout::QK;
    use crate::shape::{gemm_shape, GemmShape, ShapeError};
    use crate::x86_64::gemm::{gemm_run, tile4_asm, Grid, Pass, TILE_CONSTS, TILE_M};
    use crate::x86_64::{gemm_vnni, Avx2, Vnni};
    use core::arch::asm;
    use core::arch::x86_64::*;

    forwarding_entry!(
        /// GEMV, Q8_0x8 weights x one Q8_0 activation row: [`gemm_q8_0x8_q8_0`]
        /// with `m = 1`; the same contract as [`generic::gemv_q8_0x8_q8_0`].
        q8_0 gemv gemv_q8_0x8_q8_0 (cpu: Avx2) => gemm_q8_0x8_q8_0
    );

    /// GEMM, Q8_0x8 weights x `m` Q8_0 activation rows: `out[t][r] = W[r] . act[t]`.
    ///
    /// * `w`: `ceil(rows / 8)` row groups of `cols / 32` 272-byte super-blocks;
    /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
    /// * `out`: `m x rows`, row-major.
    ///
    /// The same contract as [`generic::gemm_q8_0x8_q8_0`]. Empty shapes go to
    /// the generic code, and so do activations with a -128 quant when the AVX2
    /// tiles run (the quantizer never makes one: its quants are in -127..=127;
    /// their sign trick needs that; the VNNI tiles take any quant).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_q8_0x8_q8_0(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        cols: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        let GemmShape { nb, groups } = gemm_shape(
            Q8X8_ROWS,
            Q8X8_BLOCK_BYTES,
            w,
            rows,
            cols,
            act_qs,
            act_d,
            m,
            out,
        )?;
        if nb == 0 || rows == 0 || m == 0 {
            return generic::gemm_q8_0x8_q8_0(w, rows, cols, act_qs, act_d, m, out);
        }
        if cpu.has_vnni() && nb <= gemm_vnni::MAX_BLOCKS {
            // SAFETY: `gemm_shape` checked `w` (`groups` row groups of `nb`
            // super-blocks, rows <= 8 * groups), `act_qs`, `act_d` and `out` for
            // `m` rows; nb, rows, m >= 1 (checked above); the token says which VNNI.
            unsafe {
                match cpu.vnni() {
                    Vnni::Avx => {
                        gemm_vnni::avx::gemm_q8_0x8(cpu, w, rows, groups, nb, act_qs, act_d, m, out)
                    }
                    _ => gemm_vnni::avx512::gemm_q8_0x8(
                        cpu, w, rows, groups, nb, act_qs, act_d, m, out,
                    ),
                }
            };
            return Ok(());
        }
        if act_qs.contains(&i8::MIN) {
            return generic::gemm_q8_0x8_q8_0(w, rows, cols, act_qs, act_d, m, out);
        }
        let group_bytes = nb * Q8X8_BLOCK_BYTES;
        let grid = Grid {
            rows,
            units: groups,
            m,
            call_rows: m,
        };
        gemm_run(grid, out, |pass: Pass<'_, Q8X8_ROWS, TILE_M>| {
            pass.tiles(|g, t0, tm, res| {
                let wg = &w[g * group_bytes..(g + 1) * group_bytes];
                let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
                let d = &act_d[t0 * nb..(t0 + tm) * nb];
                // SAFETY: `wg` is a whole row group (`nb` super-blocks of 272
                // bytes, sliced above), `qs` holds `tm` rows of `nb * 32`
                // quants (none -128, checked above) and `d` `tm` rows of `nb`
                // scales (sliced above), `res` holds `tm <= 4` rows of 8
                // floats; the token proves AVX2/FMA/F16C.
                unsafe {
                    match tm {
                        1 => q8x8_tile_avx2::<1>(wg, qs, d, nb, res),
                        2 => q8x8_tile_avx2::<2>(wg, qs, d, nb, res),
                        3 => q8x8_tile_avx2::<3>(wg, qs, d, nb, res),
                        _ => q8x8_tile4_asm(wg, qs, d, nb, res),
                    }
                }
            });
        });
        Ok(())
    }

    /// One Q8_0x8 row group (8 rows) against `T` activation rows.
    ///
    /// Chunk `c` of a super-block (32 bytes) is one register whose 32-bit lanes
    /// are the 8 rows' weights `4c..4c+3`; the activation dword `c` is
    /// broadcast. [`chunk_avx2`] adds the exact
    /// per-row i32 of `|w| * sign(a, w)` (|w| <= 128 unsigned, |a| <= 127).
    ///
    /// # Safety
    /// `w.len()` must be at least `nb * 272`, `qs.len()` at least `T * nb * 32`
    /// with no quant equal to -128, `d.len()` at least `T * nb`, `T <= 4`, and
    /// the CPU must implement AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q8x8_tile_avx2<const T: usize>(
        w: &[u8],
        qs: &[i8],
        d: &[f32],
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) {
        // SAFETY: the loads below read the `nb` super-blocks of `w` and `T` rows
        // of `nb` blocks of `qs` and `d`, all inside the slices per the
        // function contract; the CPU implements AVX2, FMA and F16C.
        unsafe {
            debug_assert!(T <= TILE_M && w.len() >= nb * Q8X8_BLOCK_BYTES);
            debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb);
            let cols = nb * QK;
            let mut acc = [_mm256_setzero_ps(); T];
            for b in 0..nb {
                let p = w.as_ptr().add(b * Q8X8_BLOCK_BYTES);
                // Prefetch the next row group (the bytes after `w`) at the rate this
                // one is read; a prefetch never faults, `wrapping_add` keeps the
                // address arithmetic defined.
                let pf = p.wrapping_add(nb * Q8X8_BLOCK_BYTES);
                for k in 0..5 {
                    _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64 * k).cast());
                }
                // Chunks outer, tokens inner: one weight chunk and its |w| live in
                // registers at a time next to the T integer sums (no spills).
                let mut isum = [_mm256_setzero_si256(); T];
                for c in 0..8 {
                    let wv = _mm256_loadu_si256(p.add(16 + 32 * c).cast());
                    let wabs = _mm256_sign_epi8(wv, wv);
                    for (t, isum_t) in isum.iter_mut().enumerate() {
                        let ap = qs.as_ptr().add(t * cols + b * QK + 4 * c);
                        let a = _mm256_set1_epi32(ap.cast::<i32>().read_unaligned());
                        *isum_t = chunk_avx2(*isum_t, wabs, _mm256_sign_epi8(a, wv));
                    }
                }
                let sw = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                    let scale = _mm256_mul_ps(sw, da);
                    let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[t]), scale);
                    *acc_t = _mm256_add_ps(*acc_t, v);
                }
            }
            for (r, a) in res.iter_mut().zip(acc) {
                _mm256_storeu_ps(r.as_mut_ptr(), a);
            }
        }
    }

    /// One 4-column chunk of [`q8x8_tile4_asm`]: the chunk's 8 rows' weights
    /// at byte `$w` of the super-block (ymm0) and their `|w|` (ymm1), then per
    /// activation row `t` the broadcast dword at byte `$a` of the row's block,
    /// its sign taken from `w`, `vpmaddubsw`, `vpmaddwd` with ones, added to
    /// the row's i32 sums (ymm4-7; `first` writes them instead: 0 + x = x).
    /// ymm3 holds the 16-bit ones: the vector units take 2 loads per cycle on
    /// Zen 3, so the loop loads only weights, activations and scales.
    macro_rules! q8_tile_chunk {
        (@row $a:literal, $q:literal, $sum:literal, first) => {
            concat!(
                "vpbroadcastd ymm2, dword ptr [", $q, " + ", $a, "]\n",
                "vpsignb ymm2, ymm2, ymm0\n",
                "vpmaddubsw ymm2, ymm1, ymm2\n",
                "vpmaddwd ", $sum, ", ymm2, ymm3\n",
            )
        };
        (@row $a:literal, $q:literal, $sum:literal, add) => {
            concat!(
                "vpbroadcastd ymm2, dword ptr [", $q, " + ", $a, "]\n",
                "vpsignb ymm2, ymm2, ymm0\n",
                "vpmaddubsw ymm2, ymm1, ymm2\n",
                "vpmaddwd ymm2, ymm2, ymm3\n",
                "vpaddd ", $sum, ", ", $sum, ", ymm2\n",
            )
        };
        ($w:literal, $a:literal, $how:ident) => {
            concat!(
                "vmovdqu ymm0, ymmword ptr [{p} + ", $w, "]\n",
                "vpsignb ymm1, ymm0, ymm0\n",
                q8_tile_chunk!(@row $a, "{qp}", "ymm4", $how),
                q8_tile_chunk!(@row $a, "{qp} + {qs}", "ymm5", $how),
                q8_tile_chunk!(@row $a, "{qp} + {qs}*2", "ymm6", $how),
                q8_tile_chunk!(@row $a, "{qp} + {qs3}", "ymm7", $how),
            )
        };
    }

    /// One activation row's float step of [`q8x8_tile4_asm`], the reference's:
    /// `acc += cvt(isum) * (sw * da)`, with the row's scale at `[$d]`.
    #[rustfmt::skip]
    macro_rules! q8_tile_float {
        ($sum:literal, $d:literal, $acc:literal) => {
            concat!(
                "vcvtdq2ps ", $sum, ", ", $sum, "\n",
                "vbroadcastss ymm2, dword ptr [", $d, "]\n",
                "vmulps ymm2, ymm12, ymm2\n",
                "vmulps ", $sum, ", ", $sum, ", ymm2\n",
                "vaddps ", $acc, ", ", $acc, ", ", $sum, "\n",
            )
        };
    }

    /// [`q8x8_tile_avx2`] with `T = 4` (the prefill's tile) in `asm!`: the same
    /// operations on the same values in the same order, so the same bits, with
    /// every register assigned by hand (the compiled form kept weights and
    /// accumulators on the stack).
    ///
    /// # Safety
    /// As [`q8x8_tile_avx2`] with `T = 4`: `w.len()` at least `nb * 272`,
    /// `qs.len()` at least `4 * nb * 32` with no quant equal to -128, `d.len()`
    /// at least `4 * nb`, `nb >= 1`, and the CPU implements AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q8x8_tile4_asm(
        w: &[u8],
        qs: &[i8],
        d: &[f32],
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) {
        debug_assert!(nb >= 1 && w.len() >= nb * Q8X8_BLOCK_BYTES);
        debug_assert!(qs.len() >= 4 * nb * QK && d.len() >= 4 * nb);
        // SAFETY: per iteration `b` (0..nb) the loop reads super-block `b` of
        // `w` (272 bytes at `b * 272`), block `b` of activation row `t` (32
        // bytes at `t * nb * 32 + b * 32`) and `d` entry `t * nb + b`, for
        // t < 4: all inside the slices per the function contract; `k` points to
        // the 32 bytes of `TILE_CONSTS.2` (the 16-bit ones, 32-byte aligned).
        // Prefetches (of the next row group, possibly past `w`) never fault.
        // The block (`tile4_asm!`) only writes the registers it names (ymm0-15,
        // the pointer and counter registers it is given as `inout`) and the
        // flags, and does not touch the stack; the 4 accumulators are then
        // stored to `res` (4 rows of 8 floats). The CPU implements AVX2, FMA
        // and F16C (the function contract).
        unsafe {
            tile4_asm!(
                res,
                [
                    "vmovdqa ymm3, ymmword ptr [{k}]",
                    "2:",
                    "prefetcht0 byte ptr [{pf}]",
                    "prefetcht0 byte ptr [{pf} + 64]",
                    "prefetcht0 byte ptr [{pf} + 128]",
                    "prefetcht0 byte ptr [{pf} + 192]",
                    "prefetcht0 byte ptr [{pf} + 256]",
                    // The 8 rows' scales.
                    "vcvtph2ps ymm12, xmmword ptr [{p}]",
                    q8_tile_chunk!("16", "0", first),
                    q8_tile_chunk!("48", "4", add),
                    q8_tile_chunk!("80", "8", add),
                    q8_tile_chunk!("112", "12", add),
                    q8_tile_chunk!("144", "16", add),
                    q8_tile_chunk!("176", "20", add),
                    q8_tile_chunk!("208", "24", add),
                    q8_tile_chunk!("240", "28", add),
                    q8_tile_float!("ymm4", "{dp}", "ymm8"),
                    q8_tile_float!("ymm5", "{dp} + {ss}", "ymm9"),
                    q8_tile_float!("ymm6", "{dp} + {ss}*2", "ymm10"),
                    q8_tile_float!("ymm7", "{dp} + {ss3}", "ymm11"),
                    "add {p}, 272",
                    "add {pf}, 272",
                    "add {qp}, 32",
                    "add {dp}, 4",
                    "dec {n}",
                    "jnz 2b",
                ],
                p = inout(reg) w.as_ptr() => _,
                pf = inout(reg) w.as_ptr().wrapping_add(nb * Q8X8_BLOCK_BYTES) => _,
                qp = inout(reg) qs.as_ptr() => _,
                dp = inout(reg) d.as_ptr() => _,
                n = inout(reg) nb => _,
                qs = in(reg) nb * QK,
                qs3 = in(reg) 3 * nb * QK,
                ss = in(reg) nb * 4,
                ss3 = in(reg) 3 * nb * 4,
                k = in(reg) &TILE_CONSTS.2,
            );
        }
    }

    /// `acc` plus, per 32-bit lane, the sum of the 4 products `u * s` (unsigned
    /// `u <= 128`, signed `|s| <= 127`): `vpmaddubsw` pair sums fit i16 (<= 2 *
    /// 128 * 127), `vpmaddwd` with ones makes them i32. Exact.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn chunk_avx2(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        let prod = _mm256_maddubs_epi16(u, s);
        _mm256_add_epi32(acc, _mm256_madd_epi16(prod, _mm256_set1_epi16(1)))
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
