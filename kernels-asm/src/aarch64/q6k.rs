//! GEMV and GEMM of Q6_Kx8 weights with Q8_K activations: `sdot` by lane on
//! the layout's 6-bit quants, unpacked to `i8` values `4 * (q - 32)` in 1.5
//! instructions per register (`and` for three chunks of a 16-weight group,
//! `shl`/`sli`/`sli` for the fourth), the 16 `i8` scales applied exactly
//! with `mla` on `i32` lanes, and `scvtf #2` undoing the factor 4.

use super::Dotprod;
use crate::generic;
use crate::layout::{Q6KX8_BLOCK_BYTES, Q6KX8_ROWS};
use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
use core::arch::asm;

/// One 16-weight group of the Q6_Kx8 tile: its three 32-byte loads made
/// into 8 `sdot` operands (`S & 0xFC` and the low 2-bit chunks), each
/// activation row's 8 `sdot` by lane, the two sums scaled by the group's
/// scales of rows 0-3 (`$lo`) and 4-7 (`$hi`) into that row's accumulators.
#[rustfmt::skip]
macro_rules! q6k_group {
    ($lo:literal, $hi:literal) => { concat!(
        "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w}], #64\n", // S0, S1
        "ld1 {{v8.16b, v9.16b}}, [{w}], #32\n", // S2
        "ld1 {{v12.16b}}, [{q0}], #16\n", // activations
        "ld1 {{v13.16b}}, [{q1}], #16\n",
        "ld1 {{v14.16b}}, [{q2}], #16\n",
        "ld1 {{v15.16b}}, [{q3}], #16\n",
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
        "movi v16.16b, #0\n",
        "movi v17.16b, #0\n",
        "sdot v16.4s, v4.16b, v12.4b[0]\n",
        "sdot v17.4s, v5.16b, v12.4b[0]\n",
        "sdot v16.4s, v6.16b, v12.4b[1]\n",
        "sdot v17.4s, v7.16b, v12.4b[1]\n",
        "sdot v16.4s, v8.16b, v12.4b[2]\n",
        "sdot v17.4s, v9.16b, v12.4b[2]\n",
        "sdot v16.4s, v10.16b, v12.4b[3]\n",
        "sdot v17.4s, v11.16b, v12.4b[3]\n",
        "mla v20.4s, v16.4s, ", $lo, ".4s\n",
        "mla v21.4s, v17.4s, ", $hi, ".4s\n",
        "movi v18.16b, #0\n",
        "movi v19.16b, #0\n",
        "sdot v18.4s, v4.16b, v13.4b[0]\n",
        "sdot v19.4s, v5.16b, v13.4b[0]\n",
        "sdot v18.4s, v6.16b, v13.4b[1]\n",
        "sdot v19.4s, v7.16b, v13.4b[1]\n",
        "sdot v18.4s, v8.16b, v13.4b[2]\n",
        "sdot v19.4s, v9.16b, v13.4b[2]\n",
        "sdot v18.4s, v10.16b, v13.4b[3]\n",
        "sdot v19.4s, v11.16b, v13.4b[3]\n",
        "mla v22.4s, v18.4s, ", $lo, ".4s\n",
        "mla v23.4s, v19.4s, ", $hi, ".4s\n",
        "movi v28.16b, #0\n",
        "movi v29.16b, #0\n",
        "sdot v28.4s, v4.16b, v14.4b[0]\n",
        "sdot v29.4s, v5.16b, v14.4b[0]\n",
        "sdot v28.4s, v6.16b, v14.4b[1]\n",
        "sdot v29.4s, v7.16b, v14.4b[1]\n",
        "sdot v28.4s, v8.16b, v14.4b[2]\n",
        "sdot v29.4s, v9.16b, v14.4b[2]\n",
        "sdot v28.4s, v10.16b, v14.4b[3]\n",
        "sdot v29.4s, v11.16b, v14.4b[3]\n",
        "mla v24.4s, v28.4s, ", $lo, ".4s\n",
        "mla v25.4s, v29.4s, ", $hi, ".4s\n",
        "movi v30.16b, #0\n",
        "movi v17.16b, #0\n",
        "sdot v30.4s, v4.16b, v15.4b[0]\n",
        "sdot v17.4s, v5.16b, v15.4b[0]\n",
        "sdot v30.4s, v6.16b, v15.4b[1]\n",
        "sdot v17.4s, v7.16b, v15.4b[1]\n",
        "sdot v30.4s, v8.16b, v15.4b[2]\n",
        "sdot v17.4s, v9.16b, v15.4b[2]\n",
        "sdot v30.4s, v10.16b, v15.4b[3]\n",
        "sdot v17.4s, v11.16b, v15.4b[3]\n",
        "mla v26.4s, v30.4s, ", $lo, ".4s\n",
        "mla v27.4s, v17.4s, ", $hi, ".4s\n",
    ) };
}

/// Activation rows per GEMM tile: one weight decode serves this many rows.
const TILE_M: usize = 4;

/// GEMV, Q6_Kx8 weights x one Q8_K activation row.
///
/// * `w`: `ceil(rows / 8)` row groups of `cols / 256` 1680-byte super-blocks;
/// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
///   `cols / 32` sums (checked only);
/// * `out`: `rows` results.
///
/// The same contract as the generic twin (a shape error when a length does
/// not fit); empty shapes go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemv_q6_kx8_q8_k(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let GemmKShape { nb, .. } = gemm_k_shape(
        Q6KX8_ROWS,
        Q6KX8_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        act_sums,
        1,
        out,
    )?;
    if nb == 0 || rows == 0 {
        return generic::gemv_q6_kx8_q8_k(w, rows, cols, act_qs, act_d, act_sums, out);
    }
    let group_bytes = nb * Q6KX8_BLOCK_BYTES;
    let full = rows / Q6KX8_ROWS;
    if full > 0 {
        // SAFETY: `w` holds at least `full` groups of `nb` super-blocks
        // (w.len() = groups * nb * 1680, groups >= full), `act_qs` nb * 256
        // quants and `act_d` nb scales, `out` at least full * 8 floats
        // (all checked by `gemm_k_shape`); nb >= 1, full >= 1; the token
        // proves dotprod.
        unsafe {
            gemv_q6kx8_groups(
                w.as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                out.as_mut_ptr(),
                full,
            )
        };
    }
    let rest = rows - full * Q6KX8_ROWS;
    if rest > 0 {
        let mut tail = [0.0f32; Q6KX8_ROWS];
        // SAFETY: the last group starts at full * group_bytes and is
        // group_bytes long (groups = full + 1); `tail` holds 8 floats.
        unsafe {
            gemv_q6kx8_groups(
                w[full * group_bytes..].as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                tail.as_mut_ptr(),
                1,
            )
        };
        out[full * Q6KX8_ROWS..].copy_from_slice(&tail[..rest]);
    }
    Ok(())
}

/// GEMM, Q6_Kx8 weights x `m` Q8_K activation rows: `out[t * rows + r]`.
///
/// * `w`: `ceil(rows / 8)` row groups of `cols / 256` 1680-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
///   `act_sums`: `m x cols / 32` sums (checked only);
/// * `out`: `m x rows` results.
///
/// Tiles of one row group x 4 activation rows (the weights decoded once
/// for the 4), the rest of the rows through the GEMV loop; the same
/// contract as the generic twin; one activation row takes the GEMV, empty
/// shapes the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q6_kx8_q8_k(
    cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let GemmKShape { nb, groups } = gemm_k_shape(
        Q6KX8_ROWS,
        Q6KX8_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        act_sums,
        m,
        out,
    )?;
    if m == 1 {
        return gemv_q6_kx8_q8_k(cpu, w, rows, cols, act_qs, act_d, act_sums, out);
    }
    if nb == 0 || rows == 0 || m == 0 {
        return generic::gemm_q6_kx8_q8_k(w, rows, cols, act_qs, act_d, act_sums, m, out);
    }
    let group_bytes = nb * Q6KX8_BLOCK_BYTES;
    for g in 0..groups {
        let wg = w[g * group_bytes..(g + 1) * group_bytes].as_ptr();
        let r0 = g * Q6KX8_ROWS;
        let real = (rows - r0).min(Q6KX8_ROWS);
        let mut t = 0;
        while t < m {
            let n = if m - t >= TILE_M { TILE_M } else { 1 };
            let mut acc = [0.0f32; Q6KX8_ROWS * TILE_M];
            if n == TILE_M {
                let qs = core::array::from_fn(|i| act_qs[(t + i) * cols..].as_ptr());
                let d = core::array::from_fn(|i| act_d[(t + i) * nb..].as_ptr());
                // SAFETY: `wg` is one group (group_bytes = nb * 1680 readable
                // bytes, sliced above); each `qs[i]` / `d[i]` starts row
                // t + i < m and has cols = nb * 256 quants / nb scales after
                // it (`gemm_k_shape`); `acc` holds 4 x 8 floats; nb >= 1;
                // the token proves dotprod.
                unsafe { gemm_q6kx8_tile4(wg, qs, d, nb, acc.as_mut_ptr()) };
            } else {
                // SAFETY: as above for one activation row t < m, one group
                // and 8 floats of `acc`.
                unsafe {
                    gemv_q6kx8_groups(
                        wg,
                        act_qs[t * cols..].as_ptr(),
                        act_d[t * nb..].as_ptr(),
                        nb,
                        acc.as_mut_ptr(),
                        1,
                    )
                };
            }
            for i in 0..n {
                out[(t + i) * rows + r0..(t + i) * rows + r0 + real]
                    .copy_from_slice(&acc[i * Q6KX8_ROWS..i * Q6KX8_ROWS + real]);
            }
            t += n;
        }
    }
    Ok(())
}

/// The Q6_Kx8 GEMV asm loop: `groups` row groups, each `nb` super-blocks.
///
/// Per 32-weight block (8 rows x 32 weights, 208 bytes) the loop body is 61
/// instructions: 5 loads, 6 `sxtl` (scales to i32), 24 to unpack the 12
/// quant registers into 16 `sdot` operands, 4 `movi`, 16 `sdot`, 4 `mla`,
/// the counter and the branch.
///
/// # Safety
/// `w` must point to `groups * nb * 1680` readable bytes, `qs` to `nb * 256`,
/// `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb >= 1`,
/// `groups >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q6kx8_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d` and every store inside `out`: per super-block the loop reads 16 +
    // 8 * 208 = 1680 bytes of `w`, 256 bytes of `qs` and 4 bytes of `d`, for
    // nb super-blocks per group; each group stores 32 bytes of `out`. Only
    // the listed registers are written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0xfc",
            "2:",
            "movi v28.16b, #0", // float sums, rows 0-3
            "movi v29.16b, #0", // rows 4-7
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "3:",
            "ld1 {{v30.8h}}, [{w}], #16", // d of the 8 rows (f16)
            "movi v26.16b, #0", // 4 * sumi, rows 0-3
            "movi v27.16b, #0", // rows 4-7
            "mov x12, #8",
            "4:",
            "ld1 {{v0.16b}}, [{w}], #16", // scales: group 2p (8 rows), 2p + 1
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // g0: S0, S1 (rows 0-3, 4-7)
            "ld1 {{v5.16b, v6.16b, v7.16b, v8.16b}}, [{w}], #64", // g0: S2; g1: S0
            "ld1 {{v9.16b, v10.16b, v11.16b, v12.16b}}, [{w}], #64", // g1: S1, S2
            "ld1 {{v13.16b, v14.16b}}, [x9], #32", // activations of g0, g1
            "sxtl2 v16.8h, v0.16b", // scales to i32
            "sxtl v15.8h, v0.8b",
            "sxtl v17.4s, v15.4h",
            "sxtl2 v18.4s, v15.8h",
            "sxtl v19.4s, v16.4h",
            "sxtl2 v20.4s, v16.8h",
            "shl v21.16b, v5.16b, #2", // 4th chunk: t2 << 2
            "shl v22.16b, v6.16b, #2",
            "sli v21.16b, v3.16b, #4", // | t1 << 4
            "sli v22.16b, v4.16b, #4",
            "sli v21.16b, v1.16b, #6", // | t0 << 6
            "sli v22.16b, v2.16b, #6",
            "and v1.16b, v1.16b, v31.16b", // chunks 0-2: 4 * (q - 32)
            "and v2.16b, v2.16b, v31.16b",
            "and v3.16b, v3.16b, v31.16b",
            "and v4.16b, v4.16b, v31.16b",
            "and v5.16b, v5.16b, v31.16b",
            "and v6.16b, v6.16b, v31.16b",
            "movi v23.16b, #0",
            "movi v24.16b, #0",
            "sdot v23.4s, v1.16b, v13.4b[0]",
            "sdot v24.4s, v2.16b, v13.4b[0]",
            "sdot v23.4s, v3.16b, v13.4b[1]",
            "sdot v24.4s, v4.16b, v13.4b[1]",
            "sdot v23.4s, v5.16b, v13.4b[2]",
            "sdot v24.4s, v6.16b, v13.4b[2]",
            "sdot v23.4s, v21.16b, v13.4b[3]",
            "sdot v24.4s, v22.16b, v13.4b[3]",
            "mla v26.4s, v23.4s, v17.4s", // sumi += scale * isum
            "mla v27.4s, v24.4s, v18.4s",
            "shl v0.16b, v11.16b, #2", // 4th chunk: t2 << 2
            "shl v15.16b, v12.16b, #2",
            "sli v0.16b, v9.16b, #4", // | t1 << 4
            "sli v15.16b, v10.16b, #4",
            "sli v0.16b, v7.16b, #6", // | t0 << 6
            "sli v15.16b, v8.16b, #6",
            "and v7.16b, v7.16b, v31.16b", // chunks 0-2: 4 * (q - 32)
            "and v8.16b, v8.16b, v31.16b",
            "and v9.16b, v9.16b, v31.16b",
            "and v10.16b, v10.16b, v31.16b",
            "and v11.16b, v11.16b, v31.16b",
            "and v12.16b, v12.16b, v31.16b",
            "movi v16.16b, #0",
            "movi v25.16b, #0",
            "sdot v16.4s, v7.16b, v14.4b[0]",
            "sdot v25.4s, v8.16b, v14.4b[0]",
            "sdot v16.4s, v9.16b, v14.4b[1]",
            "sdot v25.4s, v10.16b, v14.4b[1]",
            "sdot v16.4s, v11.16b, v14.4b[2]",
            "sdot v25.4s, v12.16b, v14.4b[2]",
            "sdot v16.4s, v0.16b, v14.4b[3]",
            "sdot v25.4s, v15.16b, v14.4b[3]",
            "mla v26.4s, v16.4s, v19.4s", // sumi += scale * isum
            "mla v27.4s, v25.4s, v20.4s",
            "subs x12, x12, #1",
            "b.ne 4b",
            "ld1r {{v0.4s}}, [x10], #4", // d_a
            "fcvtl v1.4s, v30.4h",
            "fcvtl2 v2.4s, v30.8h",
            "scvtf v26.4s, v26.4s, #2", // (4 * sumi) / 4 as f32: sumi rounded once
            "scvtf v27.4s, v27.4s, #2",
            "fmul v1.4s, v1.4s, v0.4s", // d_w * d_a
            "fmul v2.4s, v2.4s, v0.4s",
            "fmul v26.4s, v1.4s, v26.4s",
            "fmul v27.4s, v2.4s, v27.4s",
            "fadd v28.4s, v28.4s, v26.4s",
            "fadd v29.4s, v29.4s, v27.4s",
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
            out("x9") _, out("x10") _, out("x11") _, out("x12") _,
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

/// One Q6_Kx8 row group x 4 activation rows: `acc[8i + r]` += row `r` . act
/// row `i` (`acc` holds the running float sums between super-blocks).
///
/// Per 32-weight block: the weights are loaded and unpacked once (5 + 24
/// instructions, 6 `sxtl` for the scales), then per activation row 2 loads,
/// 4 `movi`, 16 `sdot`, 4 `mla`: 141 instructions for 8 x 4 x 32 (with
/// the counter and the branch).
///
/// # Safety
/// `w` must point to `nb * 1680` readable bytes, each `qs[i]` to `nb * 256`
/// bytes, each `d[i]` to `nb` floats, `acc` to 32 readable and writable
/// floats, `nb >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_q6kx8_tile4(
    w: *const u8,
    qs: [*const i8; 4],
    d: [*const f32; 4],
    nb: usize,
    acc: *mut f32,
) {
    // SAFETY: per the function contract: per super-block the loop reads 1680
    // bytes of `w`, 256 bytes of each `qs[i]` and 4 bytes of each `d[i]`, for
    // nb super-blocks, and reads and writes the 128 bytes at `acc`. Only the
    // listed registers are written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0xfc",
            "add x16, {acc}, #64",
            "3:",
            "mov x15, {w}", // the super-block's d
            "add {w}, {w}, #16",
            "movi v20.16b, #0", // 4 * sumi: act row i -> v(20+2i), v(21+2i)
            "movi v21.16b, #0",
            "movi v22.16b, #0",
            "movi v23.16b, #0",
            "movi v24.16b, #0",
            "movi v25.16b, #0",
            "movi v26.16b, #0",
            "movi v27.16b, #0",
            "mov x12, #8",
            "4:",
            "ld1 {{v0.16b}}, [{w}], #16", // scales of groups 2p, 2p + 1
            "sxtl2 v1.8h, v0.16b",
            "sxtl v0.8h, v0.8b",
            "sxtl v2.4s, v0.4h", // group 2p, rows 0-3
            "sxtl2 v3.4s, v0.8h",
            "sxtl v0.4s, v1.4h", // group 2p + 1, rows 0-3
            "sxtl2 v1.4s, v1.8h",
            q6k_group!("v2", "v3"), // group 2p + 0
            q6k_group!("v0", "v1"), // group 2p + 1
            "subs x12, x12, #1",
            "b.ne 4b",
            "ld1 {{v4.8h}}, [x15]", // d_w
            "fcvtl v5.4s, v4.4h",
            "fcvtl2 v6.4s, v4.8h",
            "ld1 {{v7.s}}[0], [{d0}], #4", // d_a of the 4 act rows
            "ld1 {{v7.s}}[1], [{d1}], #4",
            "ld1 {{v7.s}}[2], [{d2}], #4",
            "ld1 {{v7.s}}[3], [{d3}], #4",
            "ld1 {{v8.4s, v9.4s, v10.4s, v11.4s}}, [{acc}]", // float sums, act rows 0-1
            "ld1 {{v12.4s, v13.4s, v14.4s, v15.4s}}, [x16]", // act rows 2-3
            "fmul v16.4s, v5.4s, v7.s[0]", // d_w * d_a
            "fmul v17.4s, v6.4s, v7.s[0]",
            "scvtf v20.4s, v20.4s, #2",
            "scvtf v21.4s, v21.4s, #2",
            "fmul v20.4s, v16.4s, v20.4s",
            "fmul v21.4s, v17.4s, v21.4s",
            "fadd v8.4s, v8.4s, v20.4s",
            "fadd v9.4s, v9.4s, v21.4s",
            "fmul v16.4s, v5.4s, v7.s[1]",
            "fmul v17.4s, v6.4s, v7.s[1]",
            "scvtf v22.4s, v22.4s, #2",
            "scvtf v23.4s, v23.4s, #2",
            "fmul v22.4s, v16.4s, v22.4s",
            "fmul v23.4s, v17.4s, v23.4s",
            "fadd v10.4s, v10.4s, v22.4s",
            "fadd v11.4s, v11.4s, v23.4s",
            "fmul v16.4s, v5.4s, v7.s[2]",
            "fmul v17.4s, v6.4s, v7.s[2]",
            "scvtf v24.4s, v24.4s, #2",
            "scvtf v25.4s, v25.4s, #2",
            "fmul v24.4s, v16.4s, v24.4s",
            "fmul v25.4s, v17.4s, v25.4s",
            "fadd v12.4s, v12.4s, v24.4s",
            "fadd v13.4s, v13.4s, v25.4s",
            "fmul v16.4s, v5.4s, v7.s[3]",
            "fmul v17.4s, v6.4s, v7.s[3]",
            "scvtf v26.4s, v26.4s, #2",
            "scvtf v27.4s, v27.4s, #2",
            "fmul v26.4s, v16.4s, v26.4s",
            "fmul v27.4s, v17.4s, v27.4s",
            "fadd v14.4s, v14.4s, v26.4s",
            "fadd v15.4s, v15.4s, v27.4s",
            "st1 {{v8.4s, v9.4s, v10.4s, v11.4s}}, [{acc}]",
            "st1 {{v12.4s, v13.4s, v14.4s, v15.4s}}, [x16]",
            "subs {nb}, {nb}, #1",
            "b.ne 3b",
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
            acc = in(reg) acc,
            out("x12") _, out("x15") _, out("x16") _,
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
