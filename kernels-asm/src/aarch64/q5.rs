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

use super::gemm::{entry_points, tile4_asm, GemmKernels};
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
    q8_0,
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
    q8_0,
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
