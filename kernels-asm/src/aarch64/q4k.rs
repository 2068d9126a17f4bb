//! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K, 4 rows interleaved) with
//! Q8_K activations: `sdot` by lane over the unsigned nibbles, one integer
//! sum per (row, 32-weight sub-block), times the sub-block's 6-bit scale
//! with `mla`; the mins dotted with the activation sums by `smull`/`smlal`;
//! then per super-block the reference's float steps (docs/kernels.md,
//! "Q4_Kx4").

use super::ktile::{
    k_gemm_tile, nibble_chunk, q4k_nibbles, quarter_scales, row_dot, row_end, rows_dot, rows_end,
};
use super::Dotprod;
use crate::generic;
use crate::layout::{Q4KX4_BLOCK_BYTES, Q4KX4_ROWS, QK, QK_K};
use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
use core::arch::asm;

/// Activation rows per GEMM tile: one weight load serves this many rows.
const TILE_M: usize = 4;

/// GEMV, Q4_Kx4 weights x one Q8_K activation row.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 576-byte super-blocks;
/// * `act_qs`: `cols` quants; `act_d`: `cols / 256` scales; `act_sums`:
///   `cols / 32` sums;
/// * `out`: `rows` results.
///
/// The same contract as [`generic::gemv_q4_kx4_q8_k`] (a shape error when a
/// length does not fit); zero columns go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemv_q4_kx4_q8_k(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let GemmKShape { nb, groups } = gemm_k_shape(
        Q4KX4_ROWS,
        Q4KX4_BLOCK_BYTES,
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
        return generic::gemv_q4_kx4_q8_k(w, rows, cols, act_qs, act_d, act_sums, out);
    }
    // SAFETY: the shape check gives w.len() = groups * nb * 576, act_qs nb *
    // 256 quants, act_d nb scales, act_sums nb * 8 sums and out `rows`
    // floats, with groups = ceil(rows / 4) >= 1 and nb >= 1; the token
    // proves dotprod.
    unsafe { gemv_rows(w, act_qs, act_d, act_sums, nb, groups, rows, out) };
    Ok(())
}

/// The GEMV over `groups` row groups: whole groups straight into `out`, a
/// partial last one through a 4-float tile.
///
/// # Safety
/// `w` must hold `groups * nb * 576` bytes, `qs` `nb * 256` quants, `d` `nb`
/// scales, `s` `nb * 8` sums, `out` `rows` floats with `groups = ceil(rows /
/// 4)`, `nb >= 1`, `groups >= 1`; the CPU must implement dotprod.
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_rows(
    w: &[u8],
    qs: &[i8],
    d: &[f32],
    s: &[i16],
    nb: usize,
    groups: usize,
    rows: usize,
    out: &mut [f32],
) {
    let full = rows / Q4KX4_ROWS;
    let group_bytes = nb * Q4KX4_BLOCK_BYTES;
    if full > 0 {
        // SAFETY: `w` holds full <= groups groups, `out` full * 4 <= rows
        // floats; the rest per the function contract.
        unsafe {
            gemv_q4kx4_groups(
                w.as_ptr(),
                qs.as_ptr(),
                d.as_ptr(),
                s.as_ptr(),
                nb,
                out.as_mut_ptr(),
                full,
            )
        };
    }
    if full < groups {
        let mut tail = [0.0f32; Q4KX4_ROWS];
        // SAFETY: the last group is w[full * group_bytes..][..group_bytes]
        // (groups = full + 1); `tail` holds 4 floats.
        unsafe {
            gemv_q4kx4_groups(
                w[full * group_bytes..].as_ptr(),
                qs.as_ptr(),
                d.as_ptr(),
                s.as_ptr(),
                nb,
                tail.as_mut_ptr(),
                1,
            )
        };
        out[full * Q4KX4_ROWS..].copy_from_slice(&tail[..rows - full * Q4KX4_ROWS]);
    }
}

/// GEMM, Q4_Kx4 weights x `m` Q8_K activation rows: `out[t * rows + r] =
/// W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 576-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
///   `act_sums`: `m x cols / 32` sums;
/// * `out`: `m x rows` results.
///
/// Tiles of one row group x 4 activation rows (the weight block loaded and
/// its nibbles extracted once for the 4 rows), then one tile of the 2 or 3
/// rows left over; a single row left over goes through the GEMV loop. The same contract as
/// [`generic::gemm_q4_kx4_q8_k`]; empty shapes go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q4_kx4_q8_k(
    _cpu: Dotprod,
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
        Q4KX4_ROWS,
        Q4KX4_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        act_sums,
        m,
        out,
    )?;
    if nb == 0 || rows == 0 || m == 0 {
        return generic::gemm_q4_kx4_q8_k(w, rows, cols, act_qs, act_d, act_sums, m, out);
    }
    let group_bytes = nb * Q4KX4_BLOCK_BYTES;
    let ns = cols / QK;
    // Tiles of 4 activation rows, then one of the 2 or 3 left over; a
    // single row left over takes the GEMV loop.
    let full = m / TILE_M * TILE_M;
    let tile_end = if m - full >= 2 { m } else { full };
    for g in 0..groups {
        let wg = &w[g * group_bytes..(g + 1) * group_bytes];
        let r0 = g * Q4KX4_ROWS;
        let real = (rows - r0).min(Q4KX4_ROWS);
        let mut t = 0;
        while t < tile_end {
            let n = (tile_end - t).min(TILE_M);
            let mut tile = [0.0f32; Q4KX4_ROWS * TILE_M];
            let kernel = [gemm_q4kx4_tile2, gemm_q4kx4_tile3, gemm_q4kx4_tile4][n - 2];
            // SAFETY: `wg` is one group (nb super-blocks); activation rows
            // t..t + n <= m (2 <= n <= 4) start at t * cols quants, t * nb
            // scales and t * ns sums, and the kernel reads n rows at strides
            // cols, nb * 4 bytes and ns * 2 bytes, all inside the checked
            // slices; `tile` holds 16 >= 4n floats; the token proves dotprod.
            unsafe {
                kernel(
                    wg.as_ptr(),
                    act_qs[t * cols..].as_ptr(),
                    act_d[t * nb..].as_ptr(),
                    act_sums[t * ns..].as_ptr(),
                    nb,
                    tile.as_mut_ptr(),
                )
            };
            for i in 0..n {
                out[(t + i) * rows + r0..][..real].copy_from_slice(&tile[i * Q4KX4_ROWS..][..real]);
            }
            t += n;
        }
    }
    for t in tile_end..m {
        // SAFETY: row t < m of the activations (cols quants, nb scales, ns
        // sums) and of the output (rows floats), the whole weight; nb >= 1,
        // groups >= 1; the token proves dotprod.
        unsafe {
            gemv_rows(
                w,
                &act_qs[t * cols..(t + 1) * cols],
                &act_d[t * nb..(t + 1) * nb],
                &act_sums[t * ns..(t + 1) * ns],
                nb,
                groups,
                rows,
                &mut out[t * rows..(t + 1) * rows],
            )
        };
    }
    Ok(())
}

/// The GEMV asm loop: `groups` row groups, each `nb` super-blocks.
///
/// Per super-block: the four `d`/`dmin` (one `ld1 .8h`), the 48 scale bytes
/// (rows as 32-bit lanes, sub-blocks as bytes) unpacked to scales and mins
/// with `and`/`ushr`/`sli`; the mins dotted with the 8 activation sums
/// (`smull`/`smlal` on halfwords, `addp`); per 64-weight half 8 nibble
/// chunks, `and 0x0F` / `ushr #4` and 16 `sdot` by lane into two sums (the
/// half's two sub-blocks, 4 rows each), `mla` by the sub-block's scale
/// (byte `k` of each lane: `ushr`/`and`); then `acc + (d * d_a) * sumi` and
/// `- (dmin * d_a) * summ`, separate `fmul`, `fadd`, `fsub`.
///
/// # Safety
/// `w` must point to `groups * nb * 576` readable bytes, `qs` to `nb * 256`,
/// `d` to `nb` floats, `s` to `nb * 8` i16, `out` to `groups * 4` writable
/// floats, `nb >= 1`, `groups >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q4kx4_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    sums: *const i16,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d`, `sums` and every store inside `out`: the inner loop reads 576
    // bytes of `w`, 256 bytes of `qs`, 16 bytes of `sums` and 4 bytes of `d`
    // per super-block, for nb super-blocks; the outer loop stores 16 bytes
    // of `out` per group and restarts the activation pointers. Only the
    // listed registers are written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0x0f",
            "movi v30.16b, #0x3f",
            "movi v29.4s, #0xff",
            "2:",
            "movi v20.16b, #0",
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "mov x12, {sums}",
            "3:",
            "ld1 {{v0.8h}}, [{w}], #16",
            "ld1 {{v1.16b, v2.16b, v3.16b}}, [{w}], #48",
            "ld1 {{v21.8h}}, [x12], #16",
            "ld1r {{v7.4s}}, [x10], #4",
            "and v16.16b, v2.16b, v30.16b",
            "ushr v17.16b, v3.16b, #4",
            "ushr v18.16b, v2.16b, #6",
            "sli v17.16b, v18.16b, #4",
            "and v2.16b, v3.16b, v31.16b",
            "ushr v18.16b, v1.16b, #6",
            "sli v2.16b, v18.16b, #4",
            "and v1.16b, v1.16b, v30.16b",
            "dup v22.2d, v21.d[0]",
            "dup v23.2d, v21.d[1]",
            "uxtl v18.8h, v16.8b",
            "uxtl2 v19.8h, v16.16b",
            "uxtl v16.8h, v17.8b",
            "uxtl2 v17.8h, v17.16b",
            "smull v3.4s, v18.4h, v22.4h",
            "smlal v3.4s, v16.4h, v23.4h",
            "smull2 v4.4s, v18.8h, v22.8h",
            "smlal2 v4.4s, v16.8h, v23.8h",
            "smull v5.4s, v19.4h, v22.4h",
            "smlal v5.4s, v17.4h, v23.4h",
            "smull2 v6.4s, v19.8h, v22.8h",
            "smlal2 v6.4s, v17.8h, v23.8h",
            "addp v3.4s, v3.4s, v4.4s",
            "addp v5.4s, v5.4s, v6.4s",
            "addp v3.4s, v3.4s, v5.4s",
            "movi v4.16b, #0",
            "ld1 {{v8.16b, v9.16b, v10.16b, v11.16b}}, [{w}], #64",
            "ld1 {{v12.16b, v13.16b, v14.16b, v15.16b}}, [{w}], #64",
            "ld1 {{v24.16b, v25.16b, v26.16b, v27.16b}}, [x9], #64",
            "movi v5.16b, #0",
            "movi v6.16b, #0",
            "and v16.16b, v8.16b, v31.16b",
            "ushr v17.16b, v8.16b, #4",
            "and v18.16b, v9.16b, v31.16b",
            "ushr v19.16b, v9.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[0]",
            "sdot v6.4s, v17.16b, v26.4b[0]",
            "sdot v5.4s, v18.16b, v24.4b[1]",
            "sdot v6.4s, v19.16b, v26.4b[1]",
            "and v16.16b, v10.16b, v31.16b",
            "ushr v17.16b, v10.16b, #4",
            "and v18.16b, v11.16b, v31.16b",
            "ushr v19.16b, v11.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[2]",
            "sdot v6.4s, v17.16b, v26.4b[2]",
            "sdot v5.4s, v18.16b, v24.4b[3]",
            "sdot v6.4s, v19.16b, v26.4b[3]",
            "and v16.16b, v12.16b, v31.16b",
            "ushr v17.16b, v12.16b, #4",
            "and v18.16b, v13.16b, v31.16b",
            "ushr v19.16b, v13.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[0]",
            "sdot v6.4s, v17.16b, v27.4b[0]",
            "sdot v5.4s, v18.16b, v25.4b[1]",
            "sdot v6.4s, v19.16b, v27.4b[1]",
            "and v16.16b, v14.16b, v31.16b",
            "ushr v17.16b, v14.16b, #4",
            "and v18.16b, v15.16b, v31.16b",
            "ushr v19.16b, v15.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[2]",
            "sdot v6.4s, v17.16b, v27.4b[2]",
            "sdot v5.4s, v18.16b, v25.4b[3]",
            "sdot v6.4s, v19.16b, v27.4b[3]",
            "and v22.16b, v1.16b, v29.16b",
            "ushr v23.4s, v1.4s, #8",
            "and v23.16b, v23.16b, v29.16b",
            "mla v4.4s, v5.4s, v22.4s",
            "mla v4.4s, v6.4s, v23.4s",
            "ld1 {{v8.16b, v9.16b, v10.16b, v11.16b}}, [{w}], #64",
            "ld1 {{v12.16b, v13.16b, v14.16b, v15.16b}}, [{w}], #64",
            "ld1 {{v24.16b, v25.16b, v26.16b, v27.16b}}, [x9], #64",
            "movi v5.16b, #0",
            "movi v6.16b, #0",
            "and v16.16b, v8.16b, v31.16b",
            "ushr v17.16b, v8.16b, #4",
            "and v18.16b, v9.16b, v31.16b",
            "ushr v19.16b, v9.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[0]",
            "sdot v6.4s, v17.16b, v26.4b[0]",
            "sdot v5.4s, v18.16b, v24.4b[1]",
            "sdot v6.4s, v19.16b, v26.4b[1]",
            "and v16.16b, v10.16b, v31.16b",
            "ushr v17.16b, v10.16b, #4",
            "and v18.16b, v11.16b, v31.16b",
            "ushr v19.16b, v11.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[2]",
            "sdot v6.4s, v17.16b, v26.4b[2]",
            "sdot v5.4s, v18.16b, v24.4b[3]",
            "sdot v6.4s, v19.16b, v26.4b[3]",
            "and v16.16b, v12.16b, v31.16b",
            "ushr v17.16b, v12.16b, #4",
            "and v18.16b, v13.16b, v31.16b",
            "ushr v19.16b, v13.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[0]",
            "sdot v6.4s, v17.16b, v27.4b[0]",
            "sdot v5.4s, v18.16b, v25.4b[1]",
            "sdot v6.4s, v19.16b, v27.4b[1]",
            "and v16.16b, v14.16b, v31.16b",
            "ushr v17.16b, v14.16b, #4",
            "and v18.16b, v15.16b, v31.16b",
            "ushr v19.16b, v15.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[2]",
            "sdot v6.4s, v17.16b, v27.4b[2]",
            "sdot v5.4s, v18.16b, v25.4b[3]",
            "sdot v6.4s, v19.16b, v27.4b[3]",
            "ushr v22.4s, v1.4s, #16",
            "and v22.16b, v22.16b, v29.16b",
            "ushr v23.4s, v1.4s, #24",
            "mla v4.4s, v5.4s, v22.4s",
            "mla v4.4s, v6.4s, v23.4s",
            "ld1 {{v8.16b, v9.16b, v10.16b, v11.16b}}, [{w}], #64",
            "ld1 {{v12.16b, v13.16b, v14.16b, v15.16b}}, [{w}], #64",
            "ld1 {{v24.16b, v25.16b, v26.16b, v27.16b}}, [x9], #64",
            "movi v5.16b, #0",
            "movi v6.16b, #0",
            "and v16.16b, v8.16b, v31.16b",
            "ushr v17.16b, v8.16b, #4",
            "and v18.16b, v9.16b, v31.16b",
            "ushr v19.16b, v9.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[0]",
            "sdot v6.4s, v17.16b, v26.4b[0]",
            "sdot v5.4s, v18.16b, v24.4b[1]",
            "sdot v6.4s, v19.16b, v26.4b[1]",
            "and v16.16b, v10.16b, v31.16b",
            "ushr v17.16b, v10.16b, #4",
            "and v18.16b, v11.16b, v31.16b",
            "ushr v19.16b, v11.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[2]",
            "sdot v6.4s, v17.16b, v26.4b[2]",
            "sdot v5.4s, v18.16b, v24.4b[3]",
            "sdot v6.4s, v19.16b, v26.4b[3]",
            "and v16.16b, v12.16b, v31.16b",
            "ushr v17.16b, v12.16b, #4",
            "and v18.16b, v13.16b, v31.16b",
            "ushr v19.16b, v13.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[0]",
            "sdot v6.4s, v17.16b, v27.4b[0]",
            "sdot v5.4s, v18.16b, v25.4b[1]",
            "sdot v6.4s, v19.16b, v27.4b[1]",
            "and v16.16b, v14.16b, v31.16b",
            "ushr v17.16b, v14.16b, #4",
            "and v18.16b, v15.16b, v31.16b",
            "ushr v19.16b, v15.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[2]",
            "sdot v6.4s, v17.16b, v27.4b[2]",
            "sdot v5.4s, v18.16b, v25.4b[3]",
            "sdot v6.4s, v19.16b, v27.4b[3]",
            "and v22.16b, v2.16b, v29.16b",
            "ushr v23.4s, v2.4s, #8",
            "and v23.16b, v23.16b, v29.16b",
            "mla v4.4s, v5.4s, v22.4s",
            "mla v4.4s, v6.4s, v23.4s",
            "ld1 {{v8.16b, v9.16b, v10.16b, v11.16b}}, [{w}], #64",
            "ld1 {{v12.16b, v13.16b, v14.16b, v15.16b}}, [{w}], #64",
            "ld1 {{v24.16b, v25.16b, v26.16b, v27.16b}}, [x9], #64",
            "movi v5.16b, #0",
            "movi v6.16b, #0",
            "and v16.16b, v8.16b, v31.16b",
            "ushr v17.16b, v8.16b, #4",
            "and v18.16b, v9.16b, v31.16b",
            "ushr v19.16b, v9.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[0]",
            "sdot v6.4s, v17.16b, v26.4b[0]",
            "sdot v5.4s, v18.16b, v24.4b[1]",
            "sdot v6.4s, v19.16b, v26.4b[1]",
            "and v16.16b, v10.16b, v31.16b",
            "ushr v17.16b, v10.16b, #4",
            "and v18.16b, v11.16b, v31.16b",
            "ushr v19.16b, v11.16b, #4",
            "sdot v5.4s, v16.16b, v24.4b[2]",
            "sdot v6.4s, v17.16b, v26.4b[2]",
            "sdot v5.4s, v18.16b, v24.4b[3]",
            "sdot v6.4s, v19.16b, v26.4b[3]",
            "and v16.16b, v12.16b, v31.16b",
            "ushr v17.16b, v12.16b, #4",
            "and v18.16b, v13.16b, v31.16b",
            "ushr v19.16b, v13.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[0]",
            "sdot v6.4s, v17.16b, v27.4b[0]",
            "sdot v5.4s, v18.16b, v25.4b[1]",
            "sdot v6.4s, v19.16b, v27.4b[1]",
            "and v16.16b, v14.16b, v31.16b",
            "ushr v17.16b, v14.16b, #4",
            "and v18.16b, v15.16b, v31.16b",
            "ushr v19.16b, v15.16b, #4",
            "sdot v5.4s, v16.16b, v25.4b[2]",
            "sdot v6.4s, v17.16b, v27.4b[2]",
            "sdot v5.4s, v18.16b, v25.4b[3]",
            "sdot v6.4s, v19.16b, v27.4b[3]",
            "ushr v22.4s, v2.4s, #16",
            "and v22.16b, v22.16b, v29.16b",
            "ushr v23.4s, v2.4s, #24",
            "mla v4.4s, v5.4s, v22.4s",
            "mla v4.4s, v6.4s, v23.4s",
            "fcvtl v16.4s, v0.4h",
            "fcvtl2 v17.4s, v0.8h",
            "fmul v16.4s, v16.4s, v7.4s",
            "fmul v17.4s, v17.4s, v7.4s",
            "scvtf v18.4s, v4.4s",
            "scvtf v19.4s, v3.4s",
            "fmul v18.4s, v16.4s, v18.4s",
            "fmul v19.4s, v17.4s, v19.4s",
            "fadd v20.4s, v20.4s, v18.4s",
            "fsub v20.4s, v20.4s, v19.4s",
            "subs x11, x11, #1",
            "b.ne 3b",
            "st1 {{v20.4s}}, [{out}], #16",
            "subs {groups}, {groups}, #1",
            "b.ne 2b",
            w = inout(reg) w => _,
            out = inout(reg) out => _,
            groups = inout(reg) groups => _,
            qs = in(reg) qs,
            d = in(reg) d,
            sums = in(reg) sums,
            nb = in(reg) nb,
            out("x9") _, out("x10") _, out("x11") _, out("x12") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
            out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
            out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v25") _, out("v26") _, out("v27") _,
            out("v29") _, out("v30") _, out("v31") _,
            options(nostack),
        );
    }
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
