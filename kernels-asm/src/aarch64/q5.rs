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

use super::gemm::{gemm_run, GemmKernels};
use super::Dotprod;
use crate::generic;
use crate::layout::{Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_1X4_BLOCK_BYTES};
use crate::shape::{gemm_shape, GemmShape, ShapeError};
use core::arch::asm;

/// GEMV, Q5_0x4 weights x one Q8_0 activation row.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 88-byte super-blocks;
/// * `act_qs`: `cols` activation quants; `act_d`: `cols / 32` scales;
/// * `out`: `rows` results.
///
/// The same contract as the generic twin (a shape error when a length does
/// not fit); zero columns go to the generic code.
pub fn gemv_q5_0x4_q8_0(
    cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let GemmShape { nb, .. } = gemm_shape(
        Q5X4_ROWS,
        Q5_0X4_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        1,
        out,
    )?;
    if nb == 0 {
        return generic::gemv_q5_0x4_q8_0(w, rows, cols, act_qs, act_d, out);
    }
    gemv_run(
        cpu,
        gemv_q5x4_groups,
        Q5_0X4_BLOCK_BYTES,
        w,
        rows,
        act_qs,
        act_d,
        out,
        nb,
    );
    Ok(())
}

/// GEMV, Q5_1x4 weights x one Q8_0 activation row.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 96-byte super-blocks;
/// * `act_qs`: `cols` activation quants; `act_d`: `cols / 32` scales;
/// * `out`: `rows` results.
///
/// The same contract as the generic twin (a shape error when a length does
/// not fit); zero columns go to the generic code.
pub fn gemv_q5_1x4_q8_0(
    cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let GemmShape { nb, .. } = gemm_shape(
        Q5X4_ROWS,
        Q5_1X4_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        1,
        out,
    )?;
    if nb == 0 {
        return generic::gemv_q5_1x4_q8_0(w, rows, cols, act_qs, act_d, out);
    }
    gemv_run(
        cpu,
        gemv_q5_1x4_groups,
        Q5_1X4_BLOCK_BYTES,
        w,
        rows,
        act_qs,
        act_d,
        out,
        nb,
    );
    Ok(())
}

/// A GEMV asm loop: (w, qs, d, nb, out, groups), as [`gemv_q5x4_groups`].
type GemvGroupsFn = unsafe fn(*const u8, *const i8, *const f32, usize, *mut f32, usize);

/// Runs `kernel` over the whole row groups, then over the last, partial
/// one into a scratch tile, for shapes [`gemm_shape`] accepted with `m = 1`
/// and super-blocks of `block_bytes`, `nb >= 1`; `kernel` must be one of
/// this file's GEMV loops for that super-block size.
#[allow(clippy::too_many_arguments)]
fn gemv_run(
    _cpu: Dotprod,
    kernel: GemvGroupsFn,
    block_bytes: usize,
    w: &[u8],
    rows: usize,
    act_qs: &[i8],
    act_d: &[f32],
    out: &mut [f32],
    nb: usize,
) {
    let group_bytes = nb * block_bytes;
    let full = rows / Q5X4_ROWS;
    if full > 0 {
        // SAFETY: `w` holds `full` groups of `nb` super-blocks (checked by
        // `gemm_shape`: w.len() = groups * nb * block_bytes >= full *
        // group_bytes), `act_qs` holds nb * 32 bytes and `act_d` nb floats,
        // `out` holds at least full * 4 floats; the token proves dotprod.
        unsafe {
            kernel(
                w.as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                out.as_mut_ptr(),
                full,
            )
        };
    }
    let rest = rows - full * Q5X4_ROWS;
    if rest > 0 {
        let mut tail = [0.0f32; Q5X4_ROWS];
        // SAFETY: the last group starts at full * group_bytes and is
        // group_bytes long (w.len() = groups * group_bytes, groups = full + 1);
        // `tail` holds 4 floats.
        unsafe {
            kernel(
                w[full * group_bytes..].as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                tail.as_mut_ptr(),
                1,
            )
        };
        out[full * Q5X4_ROWS..].copy_from_slice(&tail[..rest]);
    }
}

/// The Q5_0x4 GEMV asm loop: `groups` row groups, each `nb` super-blocks.
///
/// # Safety
/// `w` must point to `groups * nb * 88` readable bytes, `qs` to `nb * 32`,
/// `d` to `nb` floats, `out` to `groups * 4` writable floats, `nb >= 1`,
/// `groups >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q5x4_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d` and every store inside `out`: the inner loop reads 88 bytes of `w`,
    // 32 bytes of `qs` and 4 bytes of `d` per block, for nb blocks; the outer
    // loop stores 16 bytes of `out` per group. Only the listed registers are
    // written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0x0f",
            "movi v23.16b, #0x01",       // plane bit masks, p = 0..7
            "movi v24.16b, #0x02",
            "movi v25.16b, #0x04",
            "movi v26.16b, #0x08",
            "movi v27.16b, #0x10",
            "movi v28.16b, #0x20",
            "movi v29.16b, #0x40",
            "movi v30.16b, #0x80",
            "2:",
            "movi v16.16b, #0",          // sums (4 rows)
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "3:",
            "ld1 {{v0.4h}}, [{w}], #8",  // 4 row scales (f16)
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64",  // 4 nibble chunks
            "ld1 {{v9.16b}}, [{w}], #16",  // fifth-bit plane
            "ld1 {{v5.16b, v6.16b}}, [x9], #32",  // act quants 0..15, 16..31
            "ld1r {{v7.4s}}, [x10], #4",  // act scale
            "cmtst v17.16b, v9.16b, v23.16b",  // chunk 0 low (weights 0..3)
            "cmtst v18.16b, v9.16b, v27.16b",  // chunk 0 high (16..19)
            "cmtst v19.16b, v9.16b, v24.16b",
            "cmtst v20.16b, v9.16b, v28.16b",
            "movi v8.16b, #0",  // two sdot chains (in-order cores)
            "movi v12.16b, #0",
            "bit v17.16b, v1.16b, v31.16b",
            "sri v18.16b, v1.16b, #4",
            "bit v19.16b, v2.16b, v31.16b",
            "sri v20.16b, v2.16b, #4",
            "cmtst v21.16b, v9.16b, v25.16b",
            "cmtst v22.16b, v9.16b, v29.16b",
            "cmtst v10.16b, v9.16b, v26.16b",
            "cmtst v11.16b, v9.16b, v30.16b",
            "sdot v8.4s, v17.16b, v5.4b[0]",
            "sdot v12.4s, v18.16b, v6.4b[0]",
            "bit v21.16b, v3.16b, v31.16b",
            "sri v22.16b, v3.16b, #4",
            "sdot v8.4s, v19.16b, v5.4b[1]",
            "sdot v12.4s, v20.16b, v6.4b[1]",
            "bit v10.16b, v4.16b, v31.16b",
            "sri v11.16b, v4.16b, #4",
            "sdot v8.4s, v21.16b, v5.4b[2]",
            "sdot v12.4s, v22.16b, v6.4b[2]",
            "fcvtl v0.4s, v0.4h",
            "sdot v8.4s, v10.16b, v5.4b[3]",
            "sdot v12.4s, v11.16b, v6.4b[3]",
            "fmul v0.4s, v0.4s, v7.4s",  // d_w * d_a
            "add v8.4s, v8.4s, v12.4s",  // sum (q - 16) a, exact
            "scvtf v8.4s, v8.4s",
            "fmul v8.4s, v8.4s, v0.4s",
            "fadd v16.4s, v16.4s, v8.4s",
            "subs x11, x11, #1",
            "b.ne 3b",
            "st1 {{v16.4s}}, [{out}], #16",
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
            out("v10") _, out("v11") _, out("v12") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _, out("v24") _, out("v25") _,
            out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _,
            out("v31") _,
            options(nostack),
        );
    }
}

/// GEMM, Q5_0x4 weights x `m` Q8_0 activation rows: `out[t * rows + r]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 88-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
/// * `out`: `m x rows` results.
///
/// The same contract as the generic twin; one activation row takes the
/// GEMV, empty shapes the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q5_0x4_q8_0(
    cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let shape = gemm_shape(
        Q5X4_ROWS,
        Q5_0X4_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    )?;
    if m == 1 {
        return gemv_q5_0x4_q8_0(cpu, w, rows, cols, act_qs, act_d, out);
    }
    if shape.nb == 0 || rows == 0 || m == 0 {
        return generic::gemm_q5_0x4_q8_0(w, rows, cols, act_qs, act_d, m, out);
    }
    let k = GemmKernels {
        group_rows: Q5X4_ROWS,
        block_bytes: Q5_0X4_BLOCK_BYTES,
        tile: gemm_q5x4_tile4,
        row: gemv_q5x4_groups,
    };
    // SAFETY: `gemm_shape` accepted the shapes for this layout; the token
    // proves dotprod.
    unsafe { gemm_run(&k, w, rows, cols, act_qs, act_d, m, out, shape) };
    Ok(())
}

/// One Q5_0x4 row group x 4 activation rows: the quants are made `sdot`
/// operands once per super-block and serve all 4 activation rows (loaded
/// two rows at a time into the nibble registers, free by then).
///
/// # Safety
/// `w` must point to `nb * 88` readable bytes, each `qs[i]` to `nb * 32`
/// bytes, each `d[i]` to `nb` floats, `out` to 4 rows of 4 writable floats
/// `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_q5x4_tile4(
    w: *const u8,
    qs: [*const i8; 4],
    d: [*const f32; 4],
    nb: usize,
    out: *mut f32,
    stride: usize,
) {
    // SAFETY: per the function contract: per block the loop reads 88 bytes
    // of `w`, 32 bytes of each `qs[i]` and 4 bytes of each `d[i]`, for nb
    // blocks; then it stores 16 bytes at out + i * stride for i in 0..4.
    // Only the listed registers are written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0x0f",
            "movi v23.16b, #0x01",       // plane bit masks, p = 0..7
            "movi v24.16b, #0x02",
            "movi v25.16b, #0x04",
            "movi v26.16b, #0x08",
            "movi v27.16b, #0x10",
            "movi v28.16b, #0x20",
            "movi v29.16b, #0x40",
            "movi v30.16b, #0x80",
            "movi v18.16b, #0",          // sums, act rows 0..3 (4 weight rows)
            "movi v19.16b, #0",
            "movi v20.16b, #0",
            "movi v21.16b, #0",
            "3:",
            "ld1 {{v0.4h}}, [{w}], #8",                           // 4 row scales
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // 4 nibble chunks
            "ld1 {{v5.16b}}, [{w}], #16",                         // fifth-bit plane
            "ld1 {{v22.s}}[0], [{d0}], #4",                       // act scales
            "ld1 {{v22.s}}[1], [{d1}], #4",
            "ld1 {{v22.s}}[2], [{d2}], #4",
            "ld1 {{v22.s}}[3], [{d3}], #4",
            "cmtst v6.16b, v5.16b, v23.16b",  // chunk 0 low (weights 0..3)
            "cmtst v7.16b, v5.16b, v27.16b",  // chunk 0 high (16..19)
            "cmtst v8.16b, v5.16b, v24.16b",
            "cmtst v9.16b, v5.16b, v28.16b",
            "cmtst v10.16b, v5.16b, v25.16b",
            "cmtst v11.16b, v5.16b, v29.16b",
            "cmtst v12.16b, v5.16b, v26.16b",
            "cmtst v13.16b, v5.16b, v30.16b",
            "bit v6.16b, v1.16b, v31.16b",
            "sri v7.16b, v1.16b, #4",
            "bit v8.16b, v2.16b, v31.16b",
            "sri v9.16b, v2.16b, #4",
            "bit v10.16b, v3.16b, v31.16b",
            "sri v11.16b, v3.16b, #4",
            "bit v12.16b, v4.16b, v31.16b",
            "sri v13.16b, v4.16b, #4",
            "ld1 {{v1.16b, v2.16b}}, [{q0}], #32",
            "ld1 {{v3.16b, v4.16b}}, [{q1}], #32",
            "movi v14.16b, #0",
            "movi v15.16b, #0",
            "movi v16.16b, #0",
            "movi v17.16b, #0",
            // act rows 0 and 1: 2 independent sdot chains, interleaved
            "sdot v14.4s, v6.16b, v1.4b[0]",
            "sdot v15.4s, v6.16b, v3.4b[0]",
            "sdot v14.4s, v7.16b, v2.4b[0]",
            "sdot v15.4s, v7.16b, v4.4b[0]",
            "sdot v14.4s, v8.16b, v1.4b[1]",
            "sdot v15.4s, v8.16b, v3.4b[1]",
            "sdot v14.4s, v9.16b, v2.4b[1]",
            "sdot v15.4s, v9.16b, v4.4b[1]",
            "sdot v14.4s, v10.16b, v1.4b[2]",
            "sdot v15.4s, v10.16b, v3.4b[2]",
            "sdot v14.4s, v11.16b, v2.4b[2]",
            "sdot v15.4s, v11.16b, v4.4b[2]",
            "sdot v14.4s, v12.16b, v1.4b[3]",
            "sdot v15.4s, v12.16b, v3.4b[3]",
            "sdot v14.4s, v13.16b, v2.4b[3]",
            "sdot v15.4s, v13.16b, v4.4b[3]",
            "ld1 {{v1.16b, v2.16b}}, [{q2}], #32",
            "ld1 {{v3.16b, v4.16b}}, [{q3}], #32",
            // act rows 2 and 3
            "sdot v16.4s, v6.16b, v1.4b[0]",
            "sdot v17.4s, v6.16b, v3.4b[0]",
            "sdot v16.4s, v7.16b, v2.4b[0]",
            "sdot v17.4s, v7.16b, v4.4b[0]",
            "sdot v16.4s, v8.16b, v1.4b[1]",
            "sdot v17.4s, v8.16b, v3.4b[1]",
            "sdot v16.4s, v9.16b, v2.4b[1]",
            "sdot v17.4s, v9.16b, v4.4b[1]",
            "sdot v16.4s, v10.16b, v1.4b[2]",
            "sdot v17.4s, v10.16b, v3.4b[2]",
            "sdot v16.4s, v11.16b, v2.4b[2]",
            "sdot v17.4s, v11.16b, v4.4b[2]",
            "sdot v16.4s, v12.16b, v1.4b[3]",
            "sdot v17.4s, v12.16b, v3.4b[3]",
            "sdot v16.4s, v13.16b, v2.4b[3]",
            "sdot v17.4s, v13.16b, v4.4b[3]",
            "fcvtl v0.4s, v0.4h",
            "scvtf v14.4s, v14.4s",
            "scvtf v15.4s, v15.4s",
            "scvtf v16.4s, v16.4s",
            "scvtf v17.4s, v17.4s",
            "fmul v1.4s, v0.4s, v22.s[0]",   // d_w * d_a, act row 0
            "fmul v2.4s, v0.4s, v22.s[1]",
            "fmul v3.4s, v0.4s, v22.s[2]",
            "fmul v4.4s, v0.4s, v22.s[3]",
            "fmul v14.4s, v14.4s, v1.4s",
            "fmul v15.4s, v15.4s, v2.4s",
            "fmul v16.4s, v16.4s, v3.4s",
            "fmul v17.4s, v17.4s, v4.4s",
            "fadd v18.4s, v18.4s, v14.4s",
            "fadd v19.4s, v19.4s, v15.4s",
            "fadd v20.4s, v20.4s, v16.4s",
            "fadd v21.4s, v21.4s, v17.4s",
            "subs {nb}, {nb}, #1",
            "b.ne 3b",
            "st1 {{v18.4s}}, [{out}], {stride}",
            "st1 {{v19.4s}}, [{out}], {stride}",
            "st1 {{v20.4s}}, [{out}], {stride}",
            "st1 {{v21.4s}}, [{out}]",
            w = inout(reg) w => _,
            q0 = inout(reg) qs[0] => _,
            q1 = inout(reg) qs[1] => _,
            q2 = inout(reg) qs[2] => _,
            q3 = inout(reg) qs[3] => _,
            d0 = inout(reg) d[0] => _,
            d1 = inout(reg) d[1] => _,
            d2 = inout(reg) d[2] => _,
            d3 = inout(reg) d[3] => _,
            nb = inout(reg) nb => _,
            out = inout(reg) out => _,
            stride = in(reg) stride,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
            out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
            out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
            out("v30") _, out("v31") _,
            options(nostack),
        );
    }
}

/// The Q5_1x4 GEMV asm loop: `groups` row groups, each `nb` super-blocks.
/// As the Q5_0x4 loop, with the block's `16 * sum a` (two `sdot` with the
/// 0x10 bytes, `add`, two `addp`) as the start of the integer sum, which
/// makes it `sum q a`, and `sum a` (`scvtf #4` of it, exact) for the
/// minimums' term.
///
/// # Safety
/// `w` must point to `groups * nb * 96` readable bytes, `qs` to `nb * 32`,
/// `d` to `nb` floats, `out` to `groups * 4` writable floats, `nb >= 1`,
/// `groups >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q5_1x4_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d` and every store inside `out`: the inner loop reads 96 bytes of `w`,
    // 32 bytes of `qs` and 4 bytes of `d` per block, for nb blocks; the outer
    // loop stores 16 bytes of `out` per group. Only the listed registers are
    // written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0x0f",
            "movi v23.16b, #0x01",       // plane bit masks, p = 0..7
            "movi v24.16b, #0x02",
            "movi v25.16b, #0x04",
            "movi v26.16b, #0x08",
            "movi v27.16b, #0x10",       // (also the 16s of 16 * sum a)
            "movi v28.16b, #0x20",
            "movi v29.16b, #0x40",
            "movi v30.16b, #0x80",
            "2:",
            "movi v16.16b, #0",          // sums (4 rows)
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "3:",
            "ld1 {{v0.8h}}, [{w}], #16",  // 4 scales, 4 minimums (f16)
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64",  // 4 nibble chunks
            "ld1 {{v9.16b}}, [{w}], #16",  // fifth-bit plane
            "ld1 {{v5.16b, v6.16b}}, [x9], #32",  // act quants 0..15, 16..31
            "ld1r {{v7.4s}}, [x10], #4",  // act scale
            "movi v8.16b, #0",
            "movi v12.16b, #0",
            "sdot v8.4s, v5.16b, v27.16b",  // 16 * a, partial sums
            "sdot v12.4s, v6.16b, v27.16b",
            "cmtst v17.16b, v9.16b, v23.16b",  // chunk 0 low (weights 0..3)
            "cmtst v18.16b, v9.16b, v27.16b",  // chunk 0 high (16..19)
            "cmtst v19.16b, v9.16b, v24.16b",
            "cmtst v20.16b, v9.16b, v28.16b",
            "add v8.4s, v8.4s, v12.4s",
            "bit v17.16b, v1.16b, v31.16b",
            "sri v18.16b, v1.16b, #4",
            "addp v8.4s, v8.4s, v8.4s",
            "bit v19.16b, v2.16b, v31.16b",
            "sri v20.16b, v2.16b, #4",
            "addp v8.4s, v8.4s, v8.4s",  // 16 * sum a, every lane
            "cmtst v21.16b, v9.16b, v25.16b",
            "cmtst v22.16b, v9.16b, v29.16b",
            "movi v12.16b, #0",
            "scvtf v13.4s, v8.4s, #4",  // sum a as f32 (exact)
            "cmtst v10.16b, v9.16b, v26.16b",
            "cmtst v11.16b, v9.16b, v30.16b",
            "sdot v8.4s, v17.16b, v5.4b[0]",
            "sdot v12.4s, v18.16b, v6.4b[0]",
            "bit v21.16b, v3.16b, v31.16b",
            "sri v22.16b, v3.16b, #4",
            "sdot v8.4s, v19.16b, v5.4b[1]",
            "sdot v12.4s, v20.16b, v6.4b[1]",
            "bit v10.16b, v4.16b, v31.16b",
            "sri v11.16b, v4.16b, #4",
            "sdot v8.4s, v21.16b, v5.4b[2]",
            "sdot v12.4s, v22.16b, v6.4b[2]",
            "fcvtl v14.4s, v0.4h",
            "fcvtl2 v15.4s, v0.8h",
            "sdot v8.4s, v10.16b, v5.4b[3]",
            "sdot v12.4s, v11.16b, v6.4b[3]",
            "fmul v14.4s, v14.4s, v7.4s",  // d_w * d_a
            "fmul v15.4s, v15.4s, v7.4s",  // m_w * d_a
            "add v8.4s, v8.4s, v12.4s",
            "fmul v13.4s, v13.4s, v15.4s",  // asum * (m_w * d_a)
            "scvtf v8.4s, v8.4s",
            "fmul v8.4s, v8.4s, v14.4s",
            "fadd v8.4s, v8.4s, v13.4s",
            "fadd v16.4s, v16.4s, v8.4s",
            "subs x11, x11, #1",
            "b.ne 3b",
            "st1 {{v16.4s}}, [{out}], #16",
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
            out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _, out("v15") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _, out("v24") _, out("v25") _,
            out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _,
            out("v31") _,
            options(nostack),
        );
    }
}

/// GEMM, Q5_1x4 weights x `m` Q8_0 activation rows: `out[t * rows + r]`.
///
/// Shapes as [`gemm_q5_0x4_q8_0`], with 96-byte super-blocks. The same
/// contract as the generic twin; one activation row takes the GEMV, empty
/// shapes the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q5_1x4_q8_0(
    cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let shape = gemm_shape(
        Q5X4_ROWS,
        Q5_1X4_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    )?;
    if m == 1 {
        return gemv_q5_1x4_q8_0(cpu, w, rows, cols, act_qs, act_d, out);
    }
    if shape.nb == 0 || rows == 0 || m == 0 {
        return generic::gemm_q5_1x4_q8_0(w, rows, cols, act_qs, act_d, m, out);
    }
    let k = GemmKernels {
        group_rows: Q5X4_ROWS,
        block_bytes: Q5_1X4_BLOCK_BYTES,
        tile: gemm_q5_1x4_tile4,
        row: gemv_q5_1x4_groups,
    };
    // SAFETY: `gemm_shape` accepted the shapes for this layout; the token
    // proves dotprod.
    unsafe { gemm_run(&k, w, rows, cols, act_qs, act_d, m, out, shape) };
    Ok(())
}

/// One Q5_1x4 row group x 4 activation rows, as [`gemm_q5x4_tile4`]; each
/// activation row's `16 * sum a` starts its integer sum and is kept (lane
/// `t` of the plane register, free by then) for the minimums' term.
///
/// # Safety
/// `w` must point to `nb * 96` readable bytes, each `qs[i]` to `nb * 32`
/// bytes, each `d[i]` to `nb` floats, `out` to 4 rows of 4 writable floats
/// `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_q5_1x4_tile4(
    w: *const u8,
    qs: [*const i8; 4],
    d: [*const f32; 4],
    nb: usize,
    out: *mut f32,
    stride: usize,
) {
    // SAFETY: per the function contract: per block the loop reads 96 bytes
    // of `w`, 32 bytes of each `qs[i]` and 4 bytes of each `d[i]`, for nb
    // blocks; then it stores 16 bytes at out + i * stride for i in 0..4.
    // Only the listed registers are written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0x0f",
            "movi v23.16b, #0x01",       // plane bit masks, p = 0..7
            "movi v24.16b, #0x02",
            "movi v25.16b, #0x04",
            "movi v26.16b, #0x08",
            "movi v27.16b, #0x10",       // (also the 16s of 16 * sum a)
            "movi v28.16b, #0x20",
            "movi v29.16b, #0x40",
            "movi v30.16b, #0x80",
            "movi v18.16b, #0",          // sums, act rows 0..3 (4 weight rows)
            "movi v19.16b, #0",
            "movi v20.16b, #0",
            "movi v21.16b, #0",
            "3:",
            "ld1 {{v0.8h}}, [{w}], #16",                          // 4 scales, 4 minimums
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // 4 nibble chunks
            "ld1 {{v5.16b}}, [{w}], #16",                         // fifth-bit plane
            "ld1 {{v22.s}}[0], [{d0}], #4",                       // act scales
            "ld1 {{v22.s}}[1], [{d1}], #4",
            "ld1 {{v22.s}}[2], [{d2}], #4",
            "ld1 {{v22.s}}[3], [{d3}], #4",
            "cmtst v6.16b, v5.16b, v23.16b",  // chunk 0 low (weights 0..3)
            "cmtst v7.16b, v5.16b, v27.16b",  // chunk 0 high (16..19)
            "cmtst v8.16b, v5.16b, v24.16b",
            "cmtst v9.16b, v5.16b, v28.16b",
            "cmtst v10.16b, v5.16b, v25.16b",
            "cmtst v11.16b, v5.16b, v29.16b",
            "cmtst v12.16b, v5.16b, v26.16b",
            "cmtst v13.16b, v5.16b, v30.16b",
            "bit v6.16b, v1.16b, v31.16b",
            "sri v7.16b, v1.16b, #4",
            "bit v8.16b, v2.16b, v31.16b",
            "sri v9.16b, v2.16b, #4",
            "bit v10.16b, v3.16b, v31.16b",
            "sri v11.16b, v3.16b, #4",
            "bit v12.16b, v4.16b, v31.16b",
            "sri v13.16b, v4.16b, #4",
            "ld1 {{v1.16b, v2.16b}}, [{q0}], #32",
            "ld1 {{v3.16b, v4.16b}}, [{q1}], #32",
            "movi v14.16b, #0",
            "movi v15.16b, #0",
            "sdot v14.4s, v1.16b, v27.16b",
            "sdot v15.4s, v3.16b, v27.16b",
            "sdot v14.4s, v2.16b, v27.16b",
            "sdot v15.4s, v4.16b, v27.16b",
            "addp v14.4s, v14.4s, v14.4s",
            "addp v15.4s, v15.4s, v15.4s",
            "addp v14.4s, v14.4s, v14.4s", // 16 * sum a of act row 0, every lane
            "addp v15.4s, v15.4s, v15.4s",
            "mov v5.s[0], v14.s[0]",
            "mov v5.s[1], v15.s[0]",
            // act rows 0 and 1: 2 independent sdot chains, interleaved
            "sdot v14.4s, v6.16b, v1.4b[0]",
            "sdot v15.4s, v6.16b, v3.4b[0]",
            "sdot v14.4s, v7.16b, v2.4b[0]",
            "sdot v15.4s, v7.16b, v4.4b[0]",
            "sdot v14.4s, v8.16b, v1.4b[1]",
            "sdot v15.4s, v8.16b, v3.4b[1]",
            "sdot v14.4s, v9.16b, v2.4b[1]",
            "sdot v15.4s, v9.16b, v4.4b[1]",
            "sdot v14.4s, v10.16b, v1.4b[2]",
            "sdot v15.4s, v10.16b, v3.4b[2]",
            "sdot v14.4s, v11.16b, v2.4b[2]",
            "sdot v15.4s, v11.16b, v4.4b[2]",
            "sdot v14.4s, v12.16b, v1.4b[3]",
            "sdot v15.4s, v12.16b, v3.4b[3]",
            "sdot v14.4s, v13.16b, v2.4b[3]",
            "sdot v15.4s, v13.16b, v4.4b[3]",
            "ld1 {{v1.16b, v2.16b}}, [{q2}], #32",
            "ld1 {{v3.16b, v4.16b}}, [{q3}], #32",
            "movi v16.16b, #0",
            "movi v17.16b, #0",
            "sdot v16.4s, v1.16b, v27.16b",
            "sdot v17.4s, v3.16b, v27.16b",
            "sdot v16.4s, v2.16b, v27.16b",
            "sdot v17.4s, v4.16b, v27.16b",
            "addp v16.4s, v16.4s, v16.4s",
            "addp v17.4s, v17.4s, v17.4s",
            "addp v16.4s, v16.4s, v16.4s",
            "addp v17.4s, v17.4s, v17.4s",
            "mov v5.s[2], v16.s[0]",
            "mov v5.s[3], v17.s[0]",
            // act rows 2 and 3
            "sdot v16.4s, v6.16b, v1.4b[0]",
            "sdot v17.4s, v6.16b, v3.4b[0]",
            "sdot v16.4s, v7.16b, v2.4b[0]",
            "sdot v17.4s, v7.16b, v4.4b[0]",
            "sdot v16.4s, v8.16b, v1.4b[1]",
            "sdot v17.4s, v8.16b, v3.4b[1]",
            "sdot v16.4s, v9.16b, v2.4b[1]",
            "sdot v17.4s, v9.16b, v4.4b[1]",
            "sdot v16.4s, v10.16b, v1.4b[2]",
            "sdot v17.4s, v10.16b, v3.4b[2]",
            "sdot v16.4s, v11.16b, v2.4b[2]",
            "sdot v17.4s, v11.16b, v4.4b[2]",
            "sdot v16.4s, v12.16b, v1.4b[3]",
            "sdot v17.4s, v12.16b, v3.4b[3]",
            "sdot v16.4s, v13.16b, v2.4b[3]",
            "sdot v17.4s, v13.16b, v4.4b[3]",
            "fcvtl v6.4s, v0.4h",        // d_w
            "fcvtl2 v7.4s, v0.8h",       // m_w
            "scvtf v14.4s, v14.4s",
            "scvtf v15.4s, v15.4s",
            "scvtf v16.4s, v16.4s",
            "scvtf v17.4s, v17.4s",
            "scvtf v5.4s, v5.4s, #4",    // sum a of act rows 0..3 (exact)
            "fmul v1.4s, v6.4s, v22.s[0]",   // d_w * d_a, act row 0
            "fmul v2.4s, v6.4s, v22.s[1]",
            "fmul v3.4s, v6.4s, v22.s[2]",
            "fmul v4.4s, v6.4s, v22.s[3]",
            "fmul v8.4s, v7.4s, v22.s[0]",   // m_w * d_a, act row 0
            "fmul v9.4s, v7.4s, v22.s[1]",
            "fmul v10.4s, v7.4s, v22.s[2]",
            "fmul v11.4s, v7.4s, v22.s[3]",
            "fmul v14.4s, v14.4s, v1.4s",
            "fmul v15.4s, v15.4s, v2.4s",
            "fmul v16.4s, v16.4s, v3.4s",
            "fmul v17.4s, v17.4s, v4.4s",
            "fmul v8.4s, v8.4s, v5.s[0]",
            "fmul v9.4s, v9.4s, v5.s[1]",
            "fmul v10.4s, v10.4s, v5.s[2]",
            "fmul v11.4s, v11.4s, v5.s[3]",
            "fadd v14.4s, v14.4s, v8.4s",
            "fadd v15.4s, v15.4s, v9.4s",
            "fadd v16.4s, v16.4s, v10.4s",
            "fadd v17.4s, v17.4s, v11.4s",
            "fadd v18.4s, v18.4s, v14.4s",
            "fadd v19.4s, v19.4s, v15.4s",
            "fadd v20.4s, v20.4s, v16.4s",
            "fadd v21.4s, v21.4s, v17.4s",
            "subs {nb}, {nb}, #1",
            "b.ne 3b",
            "st1 {{v18.4s}}, [{out}], {stride}",
            "st1 {{v19.4s}}, [{out}], {stride}",
            "st1 {{v20.4s}}, [{out}], {stride}",
            "st1 {{v21.4s}}, [{out}]",
            w = inout(reg) w => _,
            q0 = inout(reg) qs[0] => _,
            q1 = inout(reg) qs[1] => _,
            q2 = inout(reg) qs[2] => _,
            q3 = inout(reg) qs[3] => _,
            d0 = inout(reg) d[0] => _,
            d1 = inout(reg) d[1] => _,
            d2 = inout(reg) d[2] => _,
            d3 = inout(reg) d[3] => _,
            nb = inout(reg) nb => _,
            out = inout(reg) out => _,
            stride = in(reg) stride,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
            out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
            out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
            out("v30") _, out("v31") _,
            options(nostack),
        );
    }
}
