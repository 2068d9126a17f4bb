//! GEMM of Q4_0x4 / IQ4_NLx4 / Q8_0x8 weights with `m` Q8_0 activation rows: `sdot`
//! tiles of one row group x 4 activation rows, the GEMV for the rest.

use super::gemv::{
    gemv_iq4x4_groups, gemv_q4x4_groups, gemv_q8x8_groups, iq4_nl_nibbles, q4_0_nibbles,
    IQ4_NL_TABLE,
};
use super::{gemv_iq4_nlx4_q8_0, gemv_q4_0x4_q8_0, gemv_q8_0x8_q8_0, Dotprod};
use crate::generic;
use crate::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS, Q8X8_BLOCK_BYTES, Q8X8_ROWS};
use crate::shape::{gemm_shape, GemmShape, ShapeError};
use core::arch::asm;

/// Activation rows per GEMM tile: one weight load serves this many rows.
const TILE_M: usize = 4;

/// The kernels one GEMM layout needs: a 4-activation-row tile over one row
/// group, and a one-row GEMV over one row group.
pub(super) struct GemmKernels {
    pub(super) group_rows: usize,
    pub(super) block_bytes: usize,
    /// (w, [qs; 4], [d; 4], nb, out, out row stride in bytes)
    pub(super) tile: unsafe fn(*const u8, [*const i8; 4], [*const f32; 4], usize, *mut f32, usize),
    /// (w, qs, d, nb, out, groups)
    pub(super) row: unsafe fn(*const u8, *const i8, *const f32, usize, *mut f32, usize),
}

/// `out[t * rows + r]` for every activation row `t < m` and weight row `r`,
/// after [`gemm_shape`] has accepted the arguments (with `nb >= 1`).
///
/// # Safety
/// The shapes must have passed [`gemm_shape`] with `k`'s layout, and the CPU must implement what `k`'s kernels need.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_run(
    k: &GemmKernels,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
    GemmShape { nb, groups }: GemmShape,
) {
    let group_bytes = nb * k.block_bytes;
    let gr = k.group_rows;
    let mut tile = [0.0f32; 8 * TILE_M];
    for g in 0..groups {
        let wg = w[g * group_bytes..(g + 1) * group_bytes].as_ptr();
        let r0 = g * gr;
        let real = (rows - r0).min(gr);
        let mut t = 0;
        while t < m {
            let n = if m - t >= TILE_M { TILE_M } else { 1 };
            // A full group writes straight into `out` (row stride `rows`);
            // a partial one into `tile` (row stride `gr`), then copies.
            let (dst, stride) = if real == gr {
                (out[t * rows + r0..].as_mut_ptr(), rows)
            } else {
                (tile.as_mut_ptr(), gr)
            };
            if n == TILE_M {
                let qs = core::array::from_fn(|i| act_qs[(t + i) * cols..].as_ptr());
                let d = core::array::from_fn(|i| act_d[(t + i) * nb..].as_ptr());
                // SAFETY: `wg` is one group (group_bytes = nb * block_bytes
                // readable bytes); each `qs[i]` / `d[i]` starts row t + i < m
                // and has cols bytes / nb floats after it; `dst` has 4 rows
                // of `gr` floats at stride `stride`: for a full group the last
                // one written is (t + 3) * rows + r0 + gr - 1 < m * rows,
                // otherwise `tile` holds 4 * gr floats.
                unsafe { (k.tile)(wg, qs, d, nb, dst, stride * 4) };
            } else {
                // SAFETY: as above for one row t < m and one group.
                unsafe {
                    (k.row)(
                        wg,
                        act_qs[t * cols..].as_ptr(),
                        act_d[t * nb..].as_ptr(),
                        nb,
                        dst,
                        1,
                    )
                };
            }
            if real < gr {
                for i in 0..n {
                    out[(t + i) * rows + r0..(t + i) * rows + r0 + real]
                        .copy_from_slice(&tile[i * gr..i * gr + real]);
                }
            }
            t += n;
        }
    }
}

/// The `asm!` of a tile of one row group x 4 activation rows (the `tile`
/// of [`GemmKernels`]): the template pieces, with the tile's operands bound
/// by name (`{w}`, `{q0}`..`{q3}`, `{d0}`..`{d3}`, `{nb}`, `{out}`,
/// `{stride}`) to the function's arguments, and the vector registers it
/// writes.
macro_rules! tile4_asm {
    ([$($t:expr),+ $(,)?], ($w:ident, $qs:ident, $d:ident, $nb:ident, $out:ident, $stride:ident), [$($clobber:tt)*]) => {
        asm!(
            $($t,)+
            w = inout(reg) $w => _,
            q0 = inout(reg) $qs[0] => _,
            q1 = inout(reg) $qs[1] => _,
            q2 = inout(reg) $qs[2] => _,
            q3 = inout(reg) $qs[3] => _,
            d0 = inout(reg) $d[0] => _,
            d1 = inout(reg) $d[1] => _,
            d2 = inout(reg) $d[2] => _,
            d3 = inout(reg) $d[3] => _,
            nb = inout(reg) $nb => _,
            out = inout(reg) $out => _,
            stride = in(reg) $stride,
            $($clobber)*
            options(nostack),
        )
    };
}
pub(super) use tile4_asm;

/// `$name`: the GEMM of a layout of `$rows`-row groups of `$block`-byte
/// super-blocks x `m` Q8_0 activation rows (`out[t * rows + r]`), through
/// [`gemm_run`] with its tile `$tile` and GEMV loop `$loop`; one activation
/// row takes its GEMV `$gemv`, empty shapes `generic::$name` (whose
/// contract it has).
macro_rules! gemm_entry {
    ($name:ident, $gemv:ident, $rows:expr, $block:expr, $tile:ident, $loop:ident) => {
        #[doc = concat!("GEMM, `m` Q8_0 activation rows (`gemm_entry!`; the contract of [`generic::", stringify!($name), "`]).")]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            cpu: Dotprod,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            m: usize,
            out: &mut [f32],
        ) -> Result<(), ShapeError> {
            let shape = gemm_shape($rows, $block, w, rows, cols, act_qs, act_d, m, out)?;
            if m == 1 {
                return $gemv(cpu, w, rows, cols, act_qs, act_d, out);
            }
            if shape.nb == 0 || rows == 0 || m == 0 {
                return generic::$name(w, rows, cols, act_qs, act_d, m, out);
            }
            let k = GemmKernels {
                group_rows: $rows,
                block_bytes: $block,
                tile: $tile,
                row: $loop,
            };
            // SAFETY: `gemm_shape` accepted the shapes for this layout; the
            // token proves dotprod.
            unsafe { gemm_run(&k, w, rows, cols, act_qs, act_d, m, out, shape) };
            Ok(())
        }
    };
}
pub(super) use gemm_entry;

gemm_entry!(
    gemm_q4_0x4_q8_0,
    gemv_q4_0x4_q8_0,
    Q4X4_ROWS,
    Q4X4_BLOCK_BYTES,
    gemm_q4x4_tile4,
    gemv_q4x4_groups
);
gemm_entry!(
    gemm_iq4_nlx4_q8_0,
    gemv_iq4_nlx4_q8_0,
    Q4X4_ROWS,
    Q4X4_BLOCK_BYTES,
    gemm_iq4x4_tile4,
    gemv_iq4x4_groups
);
gemm_entry!(
    gemm_q8_0x8_q8_0,
    gemv_q8_0x8_q8_0,
    Q8X8_ROWS,
    Q8X8_BLOCK_BYTES,
    gemm_q8x8_tile4,
    gemv_q8x8_groups
);

/// `$name`: the GEMM tile (one row group x 4 activation rows) of a 4-row
/// nibble layout whose nibbles `$nib!` decodes (see `gemv.rs`), with the
/// extra operands `$extra`.
macro_rules! nibble_tile4 {
    ($name:ident, $nib:ident, [$($extra:tt)*]) => {
        /// One row group x 4 activation rows (`nibble_tile4!`).
        ///
        /// # Safety
        /// `w` must point to `nb * 72` readable bytes, each `qs[i]` to `nb * 32`
        /// bytes, each `d[i]` to `nb` floats, `out` to 4 rows of 4 writable floats
        /// `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.
        #[inline(never)]
        #[target_feature(enable = "neon,dotprod")]
        unsafe fn $name(
            w: *const u8,
            qs: [*const i8; 4],
            d: [*const f32; 4],
            nb: usize,
            out: *mut f32,
            stride: usize,
        ) {
            // SAFETY: per the function contract (and the 16-byte table `$extra`
            // names): per block the loop reads 72 bytes
            // of `w`, 32 bytes of each `qs[i]` and 4 bytes of each `d[i]`, for nb
            // blocks; then it stores 16 bytes at out + i * stride for i in 0..4.
            // Only the listed registers are written; no stack is used.
            unsafe {
                tile4_asm!(
                    [
                        $nib!(setup),
                        "movi v25.16b, #0",          // sums, act row 0 (4 weight rows)
                        "movi v26.16b, #0",
                        "movi v27.16b, #0",
                        "movi v28.16b, #0",
                        "3:",
                        "ld1 {{v0.4h}}, [{w}], #8",                          // 4 row scales
                        "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // 4 chunks
                        "ld1 {{v29.s}}[0], [{d0}], #4",                      // act scales
                        "ld1 {{v29.s}}[1], [{d1}], #4",
                        "ld1 {{v29.s}}[2], [{d2}], #4",
                        "ld1 {{v29.s}}[3], [{d3}], #4",
                        "ld1 {{v5.16b, v6.16b}}, [{q0}], #32",
                        "ld1 {{v7.16b, v8.16b}}, [{q1}], #32",
                        "ld1 {{v9.16b, v10.16b}}, [{q2}], #32",
                        "ld1 {{v11.16b, v12.16b}}, [{q3}], #32",
                        $nib!("v17", "v18", "v1"),
                        $nib!("v19", "v20", "v2"),
                        $nib!("v21", "v22", "v3"),
                        $nib!("v23", "v24", "v4"),
                        "movi v13.16b, #0",
                        "movi v14.16b, #0",
                        "movi v15.16b, #0",
                        "movi v16.16b, #0",
                        // 4 independent sdot chains, interleaved for in-order cores
                        "sdot v13.4s, v17.16b, v5.4b[0]",
                        "sdot v14.4s, v17.16b, v7.4b[0]",
                        "sdot v15.4s, v17.16b, v9.4b[0]",
                        "sdot v16.4s, v17.16b, v11.4b[0]",
                        "sdot v13.4s, v18.16b, v6.4b[0]",
                        "sdot v14.4s, v18.16b, v8.4b[0]",
                        "sdot v15.4s, v18.16b, v10.4b[0]",
                        "sdot v16.4s, v18.16b, v12.4b[0]",
                        "sdot v13.4s, v19.16b, v5.4b[1]",
                        "sdot v14.4s, v19.16b, v7.4b[1]",
                        "sdot v15.4s, v19.16b, v9.4b[1]",
                        "sdot v16.4s, v19.16b, v11.4b[1]",
                        "sdot v13.4s, v20.16b, v6.4b[1]",
                        "sdot v14.4s, v20.16b, v8.4b[1]",
                        "sdot v15.4s, v20.16b, v10.4b[1]",
                        "sdot v16.4s, v20.16b, v12.4b[1]",
                        "sdot v13.4s, v21.16b, v5.4b[2]",
                        "sdot v14.4s, v21.16b, v7.4b[2]",
                        "sdot v15.4s, v21.16b, v9.4b[2]",
                        "sdot v16.4s, v21.16b, v11.4b[2]",
                        "sdot v13.4s, v22.16b, v6.4b[2]",
                        "sdot v14.4s, v22.16b, v8.4b[2]",
                        "sdot v15.4s, v22.16b, v10.4b[2]",
                        "sdot v16.4s, v22.16b, v12.4b[2]",
                        "sdot v13.4s, v23.16b, v5.4b[3]",
                        "sdot v14.4s, v23.16b, v7.4b[3]",
                        "sdot v15.4s, v23.16b, v9.4b[3]",
                        "sdot v16.4s, v23.16b, v11.4b[3]",
                        "sdot v13.4s, v24.16b, v6.4b[3]",
                        "sdot v14.4s, v24.16b, v8.4b[3]",
                        "sdot v15.4s, v24.16b, v10.4b[3]",
                        "sdot v16.4s, v24.16b, v12.4b[3]",
                        "fcvtl v0.4s, v0.4h",
                        concat!("scvtf v13.4s, v13.4s", $nib!(fbits)),
                        concat!("scvtf v14.4s, v14.4s", $nib!(fbits)),
                        concat!("scvtf v15.4s, v15.4s", $nib!(fbits)),
                        concat!("scvtf v16.4s, v16.4s", $nib!(fbits)),
                        "fmul v5.4s, v0.4s, v29.s[0]",   // d_w * d_a, act row 0
                        "fmul v6.4s, v0.4s, v29.s[1]",
                        "fmul v7.4s, v0.4s, v29.s[2]",
                        "fmul v8.4s, v0.4s, v29.s[3]",
                        "fmul v13.4s, v13.4s, v5.4s",
                        "fmul v14.4s, v14.4s, v6.4s",
                        "fmul v15.4s, v15.4s, v7.4s",
                        "fmul v16.4s, v16.4s, v8.4s",
                        "fadd v25.4s, v25.4s, v13.4s",
                        "fadd v26.4s, v26.4s, v14.4s",
                        "fadd v27.4s, v27.4s, v15.4s",
                        "fadd v28.4s, v28.4s, v16.4s",
                        "subs {nb}, {nb}, #1",
                        "b.ne 3b",
                        "st1 {{v25.4s}}, [{out}], {stride}",
                        "st1 {{v26.4s}}, [{out}], {stride}",
                        "st1 {{v27.4s}}, [{out}], {stride}",
                        "st1 {{v28.4s}}, [{out}]",
                    ],
                    (w, qs, d, nb, out, stride),
                    [out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _, out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v31") _, $($extra)*]
                );
            }
        }
    };
}

nibble_tile4!(gemm_q4x4_tile4, q4_0_nibbles, []);
nibble_tile4!(
    gemm_iq4x4_tile4,
    iq4_nl_nibbles,
    [kv = in(reg) IQ4_NL_TABLE.as_ptr(), out("v30") _,]
);

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
/// `w` must point to `nb * 272` readable bytes, each `qs[i]` to `nb * 32`
/// bytes, each `d[i]` to `nb` floats, `out` to 4 rows of 8 writable floats
/// `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_q8x8_tile4(
    w: *const u8,
    qs: [*const i8; 4],
    d: [*const f32; 4],
    nb: usize,
    out: *mut f32,
    stride: usize,
) {
    // SAFETY: per the function contract: per block the loop reads 272 bytes
    // of `w`, 32 bytes of each `qs[i]` and 4 bytes of each `d[i]`, for nb
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
