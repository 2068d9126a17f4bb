//! aarch64 kernels: hand-written `asm!` using `sdot` (Armv8.2 dotprod).

use core::arch::asm;

/// Proof that the CPU executing this program implements the dotprod
/// extension (`sdot`/`udot`). Kernels that use `sdot` take one by value.
#[derive(Clone, Copy, Debug)]
pub struct Dotprod(());

impl Dotprod {
    /// `Some` when the build itself targets dotprod (`-C target-feature=+dotprod`
    /// or a target CPU that has it), so every CPU able to run this binary has it.
    pub fn new() -> Option<Self> {
        if cfg!(target_feature = "dotprod") {
            Some(Dotprod(()))
        } else {
            None
        }
    }

    /// Detects dotprod at run time through the operating system.
    #[cfg(feature = "std")]
    pub fn detect() -> Option<Self> {
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            Some(Dotprod(()))
        } else {
            None
        }
    }

    /// A token without checking.
    ///
    /// # Safety
    /// The caller guarantees that the CPU implements FEAT_DotProd; calling a
    /// kernel with this token on a CPU without it executes an undefined
    /// instruction.
    pub unsafe fn new_unchecked() -> Self {
        Dotprod(())
    }
}

const Q4X4_ROWS: usize = 4;
const Q4X4_BLOCK_BYTES: usize = 72;

/// GEMV, Q4_0x4 weights x one Q8_0 activation row.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 72-byte super-blocks;
/// * `act_qs`: `cols` activation quants; `act_d`: `cols / 32` scales;
/// * `out`: `rows` results.
///
/// Returns `false` (and writes nothing) when a length does not fit.
pub fn gemv_q4_0x4_q8_0(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    out: &mut [f32],
) -> bool {
    if !cols.is_multiple_of(32) || cols == 0 {
        return false;
    }
    let nb = cols / 32;
    let groups = rows.div_ceil(Q4X4_ROWS);
    let group_bytes = nb * Q4X4_BLOCK_BYTES;
    if !(crate::len_ok(groups.checked_mul(group_bytes), w.len())
        && act_qs.len() == cols
        && act_d.len() == nb
        && out.len() == rows)
    {
        return false;
    }
    let full = rows / Q4X4_ROWS;
    if full > 0 {
        // SAFETY: `w` holds `full` groups of `nb` super-blocks (checked above:
        // w.len() = groups * nb * 72 >= full * nb * 72), `act_qs` holds nb * 32
        // bytes and `act_d` nb floats, `out` holds at least full * 4 floats; the
        // token proves dotprod.
        unsafe {
            gemv_q4x4_groups(
                w.as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                out.as_mut_ptr(),
                full,
            )
        };
    }
    let rest = rows - full * Q4X4_ROWS;
    if rest > 0 {
        let mut tail = [0.0f32; Q4X4_ROWS];
        // SAFETY: the last group starts at full * group_bytes and is
        // group_bytes long (w.len() = groups * group_bytes, groups = full + 1);
        // `tail` holds 4 floats.
        unsafe {
            gemv_q4x4_groups(
                w[full * group_bytes..].as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                tail.as_mut_ptr(),
                1,
            )
        };
        out[full * Q4X4_ROWS..].copy_from_slice(&tail[..rest]);
    }
    true
}

/// The asm loop: `groups` row groups, each `nb` super-blocks.
///
/// # Safety
/// `w` must point to `groups * nb * 72` readable bytes, `qs` to `nb * 32`,
/// `d` to `nb` floats, `out` to `groups * 4` writable floats, `nb >= 1`, and
/// the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q4x4_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d` and every store inside `out`: the inner loop reads 72 bytes of `w`,
    // 32 bytes of `qs` and 4 bytes of `d` per block, for nb blocks; the outer
    // loop stores 16 bytes of `out` per group. Only the listed registers are
    // written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0xf0",
            "2:",
            "movi v16.16b, #0",          // acc16 (4 rows) = 0
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "3:",
            "ld1 {{v0.4h}}, [{w}], #8",                         // 4 row scales (f16)
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // 4 chunks
            "ld1 {{v5.16b, v6.16b}}, [x9], #32",                // act quants 0..15, 16..31
            "ld1r {{v7.4s}}, [x10], #4",                        // act scale
            "movi v8.16b, #0",
            "shl v17.16b, v1.16b, #4",
            "and v18.16b, v1.16b, v31.16b",
            "shl v19.16b, v2.16b, #4",
            "and v20.16b, v2.16b, v31.16b",
            "shl v21.16b, v3.16b, #4",
            "and v22.16b, v3.16b, v31.16b",
            "shl v23.16b, v4.16b, #4",
            "and v24.16b, v4.16b, v31.16b",
            "sdot v8.4s, v17.16b, v5.4b[0]",
            "sdot v8.4s, v18.16b, v6.4b[0]",
            "sdot v8.4s, v19.16b, v5.4b[1]",
            "sdot v8.4s, v20.16b, v6.4b[1]",
            "sdot v8.4s, v21.16b, v5.4b[2]",
            "sdot v8.4s, v22.16b, v6.4b[2]",
            "sdot v8.4s, v23.16b, v5.4b[3]",
            "sdot v8.4s, v24.16b, v6.4b[3]",
            "fcvtl v0.4s, v0.4h",
            "scvtf v8.4s, v8.4s, #4",    // (16 * isum) / 16 as f32: exact
            "fmul v0.4s, v0.4s, v7.4s",  // d_w * d_a
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
            out("v5") _, out("v6") _, out("v7") _, out("v8") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v31") _,
            options(nostack),
        );
    }
}

const Q8X8_ROWS: usize = 8;
const Q8X8_BLOCK_BYTES: usize = 272;

/// GEMV, Q8_0x8 weights x one Q8_0 activation row.
///
/// * `w`: `ceil(rows / 8)` row groups of `cols / 32` 272-byte super-blocks;
/// * `act_qs`: `cols` activation quants; `act_d`: `cols / 32` scales;
/// * `out`: `rows` results.
///
/// Returns `false` (and writes nothing) when a length does not fit.
pub fn gemv_q8_0x8_q8_0(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    out: &mut [f32],
) -> bool {
    if !cols.is_multiple_of(32) || cols == 0 {
        return false;
    }
    let nb = cols / 32;
    let groups = rows.div_ceil(Q8X8_ROWS);
    let group_bytes = nb * Q8X8_BLOCK_BYTES;
    if !(crate::len_ok(groups.checked_mul(group_bytes), w.len())
        && act_qs.len() == cols
        && act_d.len() == nb
        && out.len() == rows)
    {
        return false;
    }
    let full = rows / Q8X8_ROWS;
    if full > 0 {
        // SAFETY: `w` holds `full` groups of `nb` super-blocks (w.len() =
        // groups * nb * 272 >= full * nb * 272), `act_qs` holds nb * 32 bytes
        // and `act_d` nb floats, `out` at least full * 8 floats; the token
        // proves dotprod.
        unsafe {
            gemv_q8x8_groups(
                w.as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                out.as_mut_ptr(),
                full,
            )
        };
    }
    let rest = rows - full * Q8X8_ROWS;
    if rest > 0 {
        let mut tail = [0.0f32; Q8X8_ROWS];
        // SAFETY: the last group starts at full * group_bytes and is
        // group_bytes long (groups = full + 1); `tail` holds 8 floats.
        unsafe {
            gemv_q8x8_groups(
                w[full * group_bytes..].as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                tail.as_mut_ptr(),
                1,
            )
        };
        out[full * Q8X8_ROWS..].copy_from_slice(&tail[..rest]);
    }
    true
}

/// The Q8_0x8 GEMV asm loop: `groups` row groups, each `nb` super-blocks.
///
/// # Safety
/// `w` must point to `groups * nb * 272` readable bytes, `qs` to `nb * 32`,
/// `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb >= 1`,
/// `groups >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q8x8_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
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

/// Activation rows per GEMM tile: one weight load serves this many rows.
const TILE_M: usize = 4;

/// Checks the shapes of a GEMM call; returns `(nb, groups, group_bytes)`.
#[allow(clippy::too_many_arguments)]
fn gemm_shape(
    w: &[u8],
    group_rows: usize,
    block_bytes: usize,
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &[f32],
) -> Option<(usize, usize, usize)> {
    if m == 0 || rows == 0 {
        return None;
    }
    let (nb, groups) = crate::gemm_shape(
        group_rows,
        block_bytes,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    )?;
    Some((nb, groups, nb * block_bytes))
}

/// The kernels one GEMM layout needs: a 4-activation-row tile over one row
/// group, and a one-row GEMV over one row group.
struct GemmKernels {
    group_rows: usize,
    /// (w, [qs; 4], [d; 4], nb, out, out row stride in bytes)
    tile: unsafe fn(*const u8, [*const i8; 4], [*const f32; 4], usize, *mut f32, usize),
    /// (w, qs, d, nb, out, groups)
    row: unsafe fn(*const u8, *const i8, *const f32, usize, *mut f32, usize),
}

/// `out[t * rows + r]` for every activation row `t < m` and weight row `r`,
/// after [`gemm_shape`] has accepted the arguments.
///
/// # Safety
/// The shapes must have passed [`gemm_shape`] with `k`'s layout, and the CPU must implement what `k`'s kernels need.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_run(
    k: &GemmKernels,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
    (nb, groups, group_bytes): (usize, usize, usize),
) {
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

/// GEMM, Q4_0x4 weights x `m` Q8_0 activation rows: `out[t * rows + r]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 72-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
/// * `out`: `m x rows` results.
///
/// Returns `false` (and writes nothing) when a length does not fit.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q4_0x4_q8_0(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> bool {
    let Some(shape) = gemm_shape(
        w,
        Q4X4_ROWS,
        Q4X4_BLOCK_BYTES,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    ) else {
        return false;
    };
    let k = GemmKernels {
        group_rows: Q4X4_ROWS,
        tile: gemm_q4x4_tile4,
        row: gemv_q4x4_groups,
    };
    // SAFETY: `gemm_shape` accepted the shapes for this layout; the token
    // proves dotprod.
    unsafe { gemm_run(&k, w, rows, cols, act_qs, act_d, m, out, shape) };
    true
}

/// GEMM, Q8_0x8 weights x `m` Q8_0 activation rows: `out[t * rows + r]`.
///
/// Shapes as [`gemm_q4_0x4_q8_0`], with 8-row groups of 272-byte
/// super-blocks. Returns `false` (and writes nothing) when a length does
/// not fit.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q8_0x8_q8_0(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> bool {
    let Some(shape) = gemm_shape(
        w,
        Q8X8_ROWS,
        Q8X8_BLOCK_BYTES,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    ) else {
        return false;
    };
    let k = GemmKernels {
        group_rows: Q8X8_ROWS,
        tile: gemm_q8x8_tile4,
        row: gemv_q8x8_groups,
    };
    // SAFETY: `gemm_shape` accepted the shapes for this layout; the token
    // proves dotprod.
    unsafe { gemm_run(&k, w, rows, cols, act_qs, act_d, m, out, shape) };
    true
}

/// One Q4_0x4 row group x 4 activation rows.
///
/// # Safety
/// `w` must point to `nb * 72` readable bytes, each `qs[i]` to `nb * 32`
/// bytes, each `d[i]` to `nb` floats, `out` to 4 rows of 4 writable floats
/// `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_q4x4_tile4(
    w: *const u8,
    qs: [*const i8; 4],
    d: [*const f32; 4],
    nb: usize,
    out: *mut f32,
    stride: usize,
) {
    // SAFETY: per the function contract: per block the loop reads 72 bytes
    // of `w`, 32 bytes of each `qs[i]` and 4 bytes of each `d[i]`, for nb
    // blocks; then it stores 16 bytes at out + i * stride for i in 0..4.
    // Only the listed registers are written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0xf0",
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
            "shl v17.16b, v1.16b, #4",
            "and v18.16b, v1.16b, v31.16b",
            "shl v19.16b, v2.16b, #4",
            "and v20.16b, v2.16b, v31.16b",
            "shl v21.16b, v3.16b, #4",
            "and v22.16b, v3.16b, v31.16b",
            "shl v23.16b, v4.16b, #4",
            "and v24.16b, v4.16b, v31.16b",
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
            "scvtf v13.4s, v13.4s, #4",
            "scvtf v14.4s, v14.4s, #4",
            "scvtf v15.4s, v15.4s, #4",
            "scvtf v16.4s, v16.4s, #4",
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
            out("v31") _,
            options(nostack),
        );
    }
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
        asm!(
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
            "ld1 {{v20.16b, v21.16b}}, [{q0}], #32",
            "movi v22.16b, #0",
            "movi v23.16b, #0",
            "sdot v22.4s, v0.16b, v20.4b[0]",
            "sdot v23.4s, v1.16b, v20.4b[0]",
            "sdot v22.4s, v2.16b, v20.4b[1]",
            "sdot v23.4s, v3.16b, v20.4b[1]",
            "sdot v22.4s, v4.16b, v20.4b[2]",
            "sdot v23.4s, v5.16b, v20.4b[2]",
            "sdot v22.4s, v6.16b, v20.4b[3]",
            "sdot v23.4s, v7.16b, v20.4b[3]",
            "sdot v22.4s, v8.16b, v21.4b[0]",
            "sdot v23.4s, v9.16b, v21.4b[0]",
            "sdot v22.4s, v10.16b, v21.4b[1]",
            "sdot v23.4s, v11.16b, v21.4b[1]",
            "sdot v22.4s, v12.16b, v21.4b[2]",
            "sdot v23.4s, v13.16b, v21.4b[2]",
            "sdot v22.4s, v14.16b, v21.4b[3]",
            "sdot v23.4s, v15.16b, v21.4b[3]",
            "fmul v20.4s, v17.4s, v19.s[0]",
            "fmul v21.4s, v18.4s, v19.s[0]",
            "scvtf v22.4s, v22.4s",
            "scvtf v23.4s, v23.4s",
            "fmul v22.4s, v22.4s, v20.4s",
            "fmul v23.4s, v23.4s, v21.4s",
            "fadd v24.4s, v24.4s, v22.4s",
            "fadd v25.4s, v25.4s, v23.4s",
            "ld1 {{v20.16b, v21.16b}}, [{q1}], #32",
            "movi v22.16b, #0",
            "movi v23.16b, #0",
            "sdot v22.4s, v0.16b, v20.4b[0]",
            "sdot v23.4s, v1.16b, v20.4b[0]",
            "sdot v22.4s, v2.16b, v20.4b[1]",
            "sdot v23.4s, v3.16b, v20.4b[1]",
            "sdot v22.4s, v4.16b, v20.4b[2]",
            "sdot v23.4s, v5.16b, v20.4b[2]",
            "sdot v22.4s, v6.16b, v20.4b[3]",
            "sdot v23.4s, v7.16b, v20.4b[3]",
            "sdot v22.4s, v8.16b, v21.4b[0]",
            "sdot v23.4s, v9.16b, v21.4b[0]",
            "sdot v22.4s, v10.16b, v21.4b[1]",
            "sdot v23.4s, v11.16b, v21.4b[1]",
            "sdot v22.4s, v12.16b, v21.4b[2]",
            "sdot v23.4s, v13.16b, v21.4b[2]",
            "sdot v22.4s, v14.16b, v21.4b[3]",
            "sdot v23.4s, v15.16b, v21.4b[3]",
            "fmul v20.4s, v17.4s, v19.s[1]",
            "fmul v21.4s, v18.4s, v19.s[1]",
            "scvtf v22.4s, v22.4s",
            "scvtf v23.4s, v23.4s",
            "fmul v22.4s, v22.4s, v20.4s",
            "fmul v23.4s, v23.4s, v21.4s",
            "fadd v26.4s, v26.4s, v22.4s",
            "fadd v27.4s, v27.4s, v23.4s",
            "ld1 {{v20.16b, v21.16b}}, [{q2}], #32",
            "movi v22.16b, #0",
            "movi v23.16b, #0",
            "sdot v22.4s, v0.16b, v20.4b[0]",
            "sdot v23.4s, v1.16b, v20.4b[0]",
            "sdot v22.4s, v2.16b, v20.4b[1]",
            "sdot v23.4s, v3.16b, v20.4b[1]",
            "sdot v22.4s, v4.16b, v20.4b[2]",
            "sdot v23.4s, v5.16b, v20.4b[2]",
            "sdot v22.4s, v6.16b, v20.4b[3]",
            "sdot v23.4s, v7.16b, v20.4b[3]",
            "sdot v22.4s, v8.16b, v21.4b[0]",
            "sdot v23.4s, v9.16b, v21.4b[0]",
            "sdot v22.4s, v10.16b, v21.4b[1]",
            "sdot v23.4s, v11.16b, v21.4b[1]",
            "sdot v22.4s, v12.16b, v21.4b[2]",
            "sdot v23.4s, v13.16b, v21.4b[2]",
            "sdot v22.4s, v14.16b, v21.4b[3]",
            "sdot v23.4s, v15.16b, v21.4b[3]",
            "fmul v20.4s, v17.4s, v19.s[2]",
            "fmul v21.4s, v18.4s, v19.s[2]",
            "scvtf v22.4s, v22.4s",
            "scvtf v23.4s, v23.4s",
            "fmul v22.4s, v22.4s, v20.4s",
            "fmul v23.4s, v23.4s, v21.4s",
            "fadd v28.4s, v28.4s, v22.4s",
            "fadd v29.4s, v29.4s, v23.4s",
            "ld1 {{v20.16b, v21.16b}}, [{q3}], #32",
            "movi v22.16b, #0",
            "movi v23.16b, #0",
            "sdot v22.4s, v0.16b, v20.4b[0]",
            "sdot v23.4s, v1.16b, v20.4b[0]",
            "sdot v22.4s, v2.16b, v20.4b[1]",
            "sdot v23.4s, v3.16b, v20.4b[1]",
            "sdot v22.4s, v4.16b, v20.4b[2]",
            "sdot v23.4s, v5.16b, v20.4b[2]",
            "sdot v22.4s, v6.16b, v20.4b[3]",
            "sdot v23.4s, v7.16b, v20.4b[3]",
            "sdot v22.4s, v8.16b, v21.4b[0]",
            "sdot v23.4s, v9.16b, v21.4b[0]",
            "sdot v22.4s, v10.16b, v21.4b[1]",
            "sdot v23.4s, v11.16b, v21.4b[1]",
            "sdot v22.4s, v12.16b, v21.4b[2]",
            "sdot v23.4s, v13.16b, v21.4b[2]",
            "sdot v22.4s, v14.16b, v21.4b[3]",
            "sdot v23.4s, v15.16b, v21.4b[3]",
            "fmul v20.4s, v17.4s, v19.s[3]",
            "fmul v21.4s, v18.4s, v19.s[3]",
            "scvtf v22.4s, v22.4s",
            "scvtf v23.4s, v23.4s",
            "fmul v22.4s, v22.4s, v20.4s",
            "fmul v23.4s, v23.4s, v21.4s",
            "fadd v30.4s, v30.4s, v22.4s",
            "fadd v31.4s, v31.4s, v23.4s",
            "subs {nb}, {nb}, #1",
            "b.ne 3b",
            "st1 {{v24.4s, v25.4s}}, [{out}], {stride}",
            "st1 {{v26.4s, v27.4s}}, [{out}], {stride}",
            "st1 {{v28.4s, v29.4s}}, [{out}], {stride}",
            "st1 {{v30.4s, v31.4s}}, [{out}]",
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

/// Quantizes activations to Q8_0 content with NEON: each 32-value block of
/// `x` becomes 32 quants in `qs` and its f16-rounded scale (as f32) in `d`,
/// bytes identical to the scalar `quantize_acts` of `kestrel-core`.
///
/// Signalling NaNs are the exception: a sequential `f32::max` fold lets one
/// restart the block maximum (or end it as NaN), the tree reduction here
/// ignores it; arithmetic never produces one.
///
/// Returns `false` (and writes nothing) when `x.len()` is not a multiple of
/// 32, the output lengths do not match, or the build does not target NEON.
pub fn quantize_acts_q8_0(x: &[f32], qs: &mut [i8], d: &mut [f32]) -> bool {
    // NEON is in every aarch64 target's baseline except the soft-float ones.
    if !cfg!(target_feature = "neon") {
        return false;
    }
    if !x.len().is_multiple_of(32) || qs.len() != x.len() || d.len() != x.len() / 32 {
        return false;
    }
    let nb = x.len() / 32;
    if nb > 0 {
        // SAFETY: `x` and `qs` hold nb * 32 elements, `d` nb; the build
        // targets NEON (checked above), so every CPU running it has it.
        unsafe { quantize_acts_blocks(x.as_ptr(), qs.as_mut_ptr(), d.as_mut_ptr(), nb) };
    }
    true
}

/// The quantizer loop, one 32-value block per iteration.
///
/// # Safety
/// `x` must point to `nb * 32` readable floats, `qs` to `nb * 32` writable
/// bytes, `d` to `nb` writable floats, `nb >= 1`.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn quantize_acts_blocks(x: *const f32, qs: *mut i8, d: *mut f32, nb: usize) {
    // SAFETY: per the function contract: per block the loop reads 128 bytes
    // of `x` and writes 32 bytes of `qs` and 4 of `d`, for nb blocks. Only
    // the listed registers are written; no stack is used.
    //
    // Bit-exactness with `BlockQ8_0::quantize`: `fmaxnm` is Rust's `f32::max`
    // on aarch64 (NaNs skipped; the max of non-NaN values does not depend on
    // the order), the start value 0.0 is folded in last; `d = amax / 127`,
    // `id = d != 0 ? 1 / d : 0` are the same IEEE operations; `x * id` is one
    // `fmul`; `fcvtas` is `roundf` (ties away from zero) and the two
    // saturating narrows give `as i8` (saturation; NaN converts to 0); the
    // scale is rounded to f16 (nearest even) and back with `fcvt`.
    unsafe {
        asm!(
            "mov {t:w}, #0x42fe0000",  // 127.0
            "fmov s30, {t:w}",
            "movi d31, #0",
            "fmov s29, #1.0",
            "3:",
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{x}], #64",
            "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [{x}], #64",
            "fabs v16.4s, v0.4s",
            "fabs v17.4s, v1.4s",
            "fabs v18.4s, v2.4s",
            "fabs v19.4s, v3.4s",
            "fabs v20.4s, v4.4s",
            "fabs v21.4s, v5.4s",
            "fabs v22.4s, v6.4s",
            "fabs v23.4s, v7.4s",
            "fmaxnm v16.4s, v16.4s, v17.4s",
            "fmaxnm v18.4s, v18.4s, v19.4s",
            "fmaxnm v20.4s, v20.4s, v21.4s",
            "fmaxnm v22.4s, v22.4s, v23.4s",
            "fmaxnm v16.4s, v16.4s, v18.4s",
            "fmaxnm v20.4s, v20.4s, v22.4s",
            "fmaxnm v16.4s, v16.4s, v20.4s",
            "fmaxnmv s16, v16.4s",
            "fmaxnm s16, s16, s31",    // amax = max(0, ...): all-NaN -> 0
            "fdiv s17, s16, s30",      // d = amax / 127
            "fdiv s18, s29, s17",      // 1 / d
            "fcmp s17, #0.0",
            "fcsel s18, s31, s18, eq", // id = d != 0 ? 1 / d : 0
            "fcvt h19, s17",           // d to f16 (nearest even) and back
            "fcvt s19, h19",
            "str s19, [{d}], #4",
            "fmul v0.4s, v0.4s, v18.s[0]",
            "fmul v1.4s, v1.4s, v18.s[0]",
            "fmul v2.4s, v2.4s, v18.s[0]",
            "fmul v3.4s, v3.4s, v18.s[0]",
            "fmul v4.4s, v4.4s, v18.s[0]",
            "fmul v5.4s, v5.4s, v18.s[0]",
            "fmul v6.4s, v6.4s, v18.s[0]",
            "fmul v7.4s, v7.4s, v18.s[0]",
            "fcvtas v0.4s, v0.4s",
            "fcvtas v1.4s, v1.4s",
            "fcvtas v2.4s, v2.4s",
            "fcvtas v3.4s, v3.4s",
            "fcvtas v4.4s, v4.4s",
            "fcvtas v5.4s, v5.4s",
            "fcvtas v6.4s, v6.4s",
            "fcvtas v7.4s, v7.4s",
            "sqxtn v0.4h, v0.4s",
            "sqxtn2 v0.8h, v1.4s",
            "sqxtn v2.4h, v2.4s",
            "sqxtn2 v2.8h, v3.4s",
            "sqxtn v4.4h, v4.4s",
            "sqxtn2 v4.8h, v5.4s",
            "sqxtn v6.4h, v6.4s",
            "sqxtn2 v6.8h, v7.4s",
            "sqxtn v0.8b, v0.8h",
            "sqxtn2 v0.16b, v2.8h",
            "sqxtn v1.8b, v4.8h",
            "sqxtn2 v1.16b, v6.8h",
            "st1 {{v0.16b, v1.16b}}, [{qs}], #32",
            "subs {nb}, {nb}, #1",
            "b.ne 3b",
            x = inout(reg) x => _,
            qs = inout(reg) qs => _,
            d = inout(reg) d => _,
            nb = inout(reg) nb => _,
            t = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _,
            out("v29") _, out("v30") _, out("v31") _,
            options(nostack),
        );
    }
}

/// Attention scores over an f16 key cache with NEON: `scores[j] =
/// dot8(q, K_j) * scale` for `j < scores.len()`, where `K_j` is the
/// `q.len()` halves at `keys[j * stride ..]` and `dot8` the 8-lane dot
/// product of docs/kernels.md; bit-identical to the scalar reference.
///
/// Returns `false` (and writes nothing) unless `q.len()` is a non-zero
/// multiple of 8, `stride >= q.len()`, every row lies inside `keys`, and the
/// build targets NEON.
pub fn attn_scores_f16(
    q: &[f32],
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> bool {
    if !cfg!(target_feature = "neon")
        || !crate::attn_rows_ok(q.len(), scores.len(), stride, keys.len())
    {
        return false;
    }
    // SAFETY: rows `j < scores.len()` of `q.len()` halves at `j * stride`
    // lie inside `keys`, `q.len()` is a non-zero multiple of 8, `scores` is
    // non-empty (all checked above); the build targets NEON.
    unsafe {
        scores_f16(
            q.as_ptr(),
            q.len() / 8,
            keys.as_ptr(),
            stride * 2,
            scale,
            scores.as_mut_ptr(),
            scores.len(),
        )
    };
    true
}

/// # Safety
/// `q` must point to `chunks * 8` floats (`chunks >= 1`), `keys` to `n >= 1`
/// rows of `chunks * 8` halves spaced `stride_bytes` apart, `out` to `n`
/// writable floats.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn scores_f16(
    q: *const f32,
    chunks: usize,
    keys: *const u16,
    stride_bytes: usize,
    scale: f32,
    out: *mut f32,
    n: usize,
) {
    // SAFETY: per the contract: each row reads `chunks * 16` bytes from its
    // start (`keys + j * stride_bytes`) and `chunks * 32` bytes of `q`; one
    // float is stored per row, `n` rows. Only the listed registers are
    // written; no stack is used.
    //
    // Bit-exactness: v0 holds lanes 0-3 and v1 lanes 4-7 of the reference's
    // 8 partial sums; each chunk adds `q * k` with a separate `fmul` and
    // `fadd` (no fusion), `fcvtl`/`fcvtl2` widen f16 exactly. Then
    // v0 + v1 = (s0+s4, s1+s5, s2+s6, s3+s7), adding the upper pair gives
    // ((s0+s4)+(s2+s6), (s1+s5)+(s3+s7)), and `faddp` adds those two.
    unsafe {
        asm!(
            "2:",
            "mov {kp}, {row}",
            "mov {qp}, {q}",
            "mov {c}, {chunks}",
            "movi v0.4s, #0",
            "movi v1.4s, #0",
            "3:",
            "ld1 {{v2.8h}}, [{kp}], #16",
            "ld1 {{v4.4s, v5.4s}}, [{qp}], #32",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmul v3.4s, v4.4s, v3.4s",
            "fmul v2.4s, v5.4s, v2.4s",
            "fadd v0.4s, v0.4s, v3.4s",
            "fadd v1.4s, v1.4s, v2.4s",
            "subs {c}, {c}, #1",
            "b.ne 3b",
            "fadd v0.4s, v0.4s, v1.4s",
            "ext v1.16b, v0.16b, v0.16b, #8",
            "fadd v0.2s, v0.2s, v1.2s",
            "faddp s0, v0.2s",
            "fmul s0, s0, {scale:s}",
            "str s0, [{out}], #4",
            "add {row}, {row}, {stride}",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            row = inout(reg) keys => _,
            q = in(reg) q,
            chunks = in(reg) chunks,
            stride = in(reg) stride_bytes,
            scale = in(vreg) scale,
            out = inout(reg) out => _,
            n = inout(reg) n => _,
            kp = out(reg) _,
            qp = out(reg) _,
            c = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _,
            options(nostack),
        );
    }
}

/// Attention output over an f16 value cache with NEON: `out[i] = sum_j
/// probs[j] * V_j[i]`, `j` in order from `out[i] = 0`, where `V_j` is the
/// `out.len()` halves at `values[j * stride ..]`; bit-identical to the scalar
/// reference.
///
/// Returns `false` (and writes nothing) unless `out.len()` is a non-zero
/// multiple of 8, `stride >= out.len()`, every row lies inside `values`, and
/// the build targets NEON.
pub fn attn_values_f16(probs: &[f32], values: &[u16], stride: usize, out: &mut [f32]) -> bool {
    if !cfg!(target_feature = "neon")
        || !crate::attn_rows_ok(out.len(), probs.len(), stride, values.len())
    {
        return false;
    }
    // SAFETY: rows `j < probs.len()` of `out.len()` halves at `j * stride`
    // lie inside `values`, `out.len()` is a non-zero multiple of 8, `probs`
    // is non-empty (all checked above); the build targets NEON.
    unsafe {
        values_f16(
            probs.as_ptr(),
            probs.len(),
            values.as_ptr(),
            stride * 2,
            out.as_mut_ptr(),
            out.len() / 8,
        )
    };
    true
}

/// # Safety
/// `probs` must point to `n >= 1` floats, `values` to `n` rows of
/// `chunks * 8` halves spaced `stride_bytes` apart (`chunks >= 1`), `out` to
/// `chunks * 8` writable floats.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn values_f16(
    probs: *const f32,
    n: usize,
    values: *const u16,
    stride_bytes: usize,
    out: *mut f32,
    chunks: usize,
) {
    // SAFETY: per the contract: for each of the `chunks` 8-element columns,
    // the inner loop reads 16 bytes at `values + 16 * chunk + j *
    // stride_bytes` and one float of `probs` for each row `j < n`, then
    // stores 32 bytes of `out`. Only the listed registers are written; no
    // stack is used.
    //
    // Bit-exactness: each output lane starts at +0.0 and adds `p_j * v_j`
    // (separate `fmul` and `fadd`) for `j` in order, as the reference does.
    unsafe {
        asm!(
            "2:",
            "mov {vp}, {col}",
            "mov {pp}, {probs}",
            "mov {j}, {n}",
            "movi v0.4s, #0",
            "movi v1.4s, #0",
            "3:",
            "ld1 {{v2.8h}}, [{vp}], {stride}",
            "ld1r {{v4.4s}}, [{pp}], #4",
            "fcvtl v3.4s, v2.4h",
            "fcvtl2 v2.4s, v2.8h",
            "fmul v3.4s, v4.4s, v3.4s",
            "fmul v2.4s, v4.4s, v2.4s",
            "fadd v0.4s, v0.4s, v3.4s",
            "fadd v1.4s, v1.4s, v2.4s",
            "subs {j}, {j}, #1",
            "b.ne 3b",
            "st1 {{v0.4s, v1.4s}}, [{out}], #32",
            "add {col}, {col}, #16",
            "subs {chunks}, {chunks}, #1",
            "b.ne 2b",
            col = inout(reg) values => _,
            probs = in(reg) probs,
            n = in(reg) n,
            stride = in(reg) stride_bytes,
            out = inout(reg) out => _,
            chunks = inout(reg) chunks => _,
            vp = out(reg) _,
            pp = out(reg) _,
            j = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            options(nostack),
        );
    }
}

/// The constants of [`exp4`]'s instruction sequence, loaded into v16-v30.
static EXP_CONSTANTS: [u32; 15] = [
    (-87.336_55f32).to_bits(),           // v16 MIN
    88.0f32.to_bits(),                   // v17 MAX
    core::f32::consts::LOG2_E.to_bits(), // v18
    12_582_912.0f32.to_bits(),           // v19 ROUND (1.5 * 2^23)
    0.693_359_4f32.to_bits(),            // v20 LN2_HI
    (-2.121_944_4e-4f32).to_bits(),      // v21 LN2_LO
    1.987_569_2e-4f32.to_bits(),         // v22 polynomial, highest first
    1.398_199_9e-3f32.to_bits(),         // v23
    8.333_452e-3f32.to_bits(),           // v24
    4.166_579_6e-2f32.to_bits(),         // v25
    1.666_666_5e-1f32.to_bits(),         // v26
    0.5f32.to_bits(),                    // v27
    1.0f32.to_bits(),                    // v28
    12_582_912.0f32.to_bits(),           // v29 ROUND's bits, as integers
    127,                                 // v30 exponent bias
];

/// Loads [`EXP_CONSTANTS`] (address in `{k}`) into v16-v30, one per register.
macro_rules! exp_constants {
    () => {
        concat!(
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{k}]\n",
            "dup v16.4s, v0.s[0]\n",
            "dup v17.4s, v0.s[1]\n",
            "dup v18.4s, v0.s[2]\n",
            "dup v19.4s, v0.s[3]\n",
            "dup v20.4s, v1.s[0]\n",
            "dup v21.4s, v1.s[1]\n",
            "dup v22.4s, v1.s[2]\n",
            "dup v23.4s, v1.s[3]\n",
            "dup v24.4s, v2.s[0]\n",
            "dup v25.4s, v2.s[1]\n",
            "dup v26.4s, v2.s[2]\n",
            "dup v27.4s, v2.s[3]\n",
            "dup v28.4s, v3.s[0]\n",
            "dup v29.4s, v3.s[1]\n",
            "dup v30.4s, v3.s[2]\n",
        )
    };
}

/// `v5 = e^v0` for 4 lanes (clobbers v1-v6), the operations of
/// `kestrel_core::model::ops::exp` in its order: clamp (`fmax`/`fmin`
/// propagate NaN as the scalar clamp does), `t = xc log2e + ROUND`, `n = t -
/// ROUND`, `r = (xc - n hi) - n lo`, Horner from the highest coefficient,
/// `y = (p (r r) + r) + 1`, `2^n` from t's integer bits, `e = y 2^n`, and 0
/// where `x < MIN` (`fcmgt` is false for NaN).
macro_rules! exp4 {
    () => {
        concat!(
            "fmax v1.4s, v0.4s, v16.4s\n",
            "fmin v1.4s, v1.4s, v17.4s\n",
            "fmul v2.4s, v1.4s, v18.4s\n",
            "fadd v2.4s, v2.4s, v19.4s\n",
            "fsub v3.4s, v2.4s, v19.4s\n",
            "fmul v4.4s, v3.4s, v20.4s\n",
            "fsub v4.4s, v1.4s, v4.4s\n",
            "fmul v5.4s, v3.4s, v21.4s\n",
            "fsub v4.4s, v4.4s, v5.4s\n",
            "fmul v5.4s, v22.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v23.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v24.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v25.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v26.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v27.4s\n",
            "fmul v6.4s, v4.4s, v4.4s\n",
            "fmul v5.4s, v5.4s, v6.4s\n",
            "fadd v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v28.4s\n",
            "sub v2.4s, v2.4s, v29.4s\n",
            "add v2.4s, v2.4s, v30.4s\n",
            "shl v2.4s, v2.4s, #23\n",
            "fmul v5.4s, v5.4s, v2.4s\n",
            "fcmgt v6.4s, v16.4s, v0.4s\n",
            "bic v5.16b, v5.16b, v6.16b\n",
        )
    };
}

/// SwiGLU over fused gate/up runs with NEON: `out[8r + i] = silu(g) * u`,
/// `g = gate_up[16r + i]`, `u = gate_up[16r + 8 + i]`, `silu(g) = g / (1 +
/// e^-g)`: the bits of `kestrel_core::model::ops::swiglu_runs`.
///
/// Returns `false` (and writes nothing) unless `out.len()` is a multiple of
/// 8, `gate_up.len() == 2 * out.len()`, and the build targets NEON.
pub fn swiglu_runs(out: &mut [f32], gate_up: &[f32]) -> bool {
    if !cfg!(target_feature = "neon")
        || !out.len().is_multiple_of(8)
        || gate_up.len() != 2 * out.len()
    {
        return false;
    }
    let runs = out.len() / 8;
    if runs == 0 {
        return true;
    }
    let k: [u32; 16] = core::array::from_fn(|i| EXP_CONSTANTS.get(i).copied().unwrap_or(0));
    // SAFETY: per run the loop reads 64 bytes of `gate_up` and writes 32 of
    // `out`, `runs >= 1` times (lengths checked above); `k` holds the 16
    // words the first `ld1` reads. Only the listed registers are written;
    // no stack is used.
    unsafe {
        asm!(
            exp_constants!(),
            "2:",
            "ld1 {{v8.4s, v9.4s, v10.4s, v11.4s}}, [{gu}], #64",
            "fneg v0.4s, v8.4s",
            exp4!(),
            "fadd v5.4s, v5.4s, v28.4s",
            "fdiv v12.4s, v8.4s, v5.4s",
            "fmul v12.4s, v12.4s, v10.4s",
            "fneg v0.4s, v9.4s",
            exp4!(),
            "fadd v5.4s, v5.4s, v28.4s",
            "fdiv v13.4s, v9.4s, v5.4s",
            "fmul v13.4s, v13.4s, v11.4s",
            "st1 {{v12.4s, v13.4s}}, [{out}], #32",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            k = in(reg) k.as_ptr(),
            gu = inout(reg) gate_up.as_ptr() => _,
            out = inout(reg) out.as_mut_ptr() => _,
            n = inout(reg) runs => _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v8") _, out("v9") _, out("v10") _,
            out("v11") _, out("v12") _, out("v13") _, out("v16") _, out("v17") _,
            out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _,
            out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _,
            out("v28") _, out("v29") _, out("v30") _,
            options(nostack),
        );
    }
    true
}

/// `x[i] = e^(x[i] - max)` with NEON (the exponentials of a softmax), the
/// bits of `kestrel_core::model::ops::exp` lane by lane; any length.
/// Returns `false` (and changes nothing) when the build does not target NEON.
pub fn exp_minus(x: &mut [f32], max: f32) -> bool {
    if !cfg!(target_feature = "neon") {
        return false;
    }
    let k: [u32; 16] = core::array::from_fn(|i| EXP_CONSTANTS.get(i).copied().unwrap_or(0));
    let chunks = x.chunks_exact_mut(4);
    let quads = chunks.len();
    let mut tail = [0.0f32; 4];
    let rest = chunks.into_remainder();
    let n_rest = rest.len();
    tail[..n_rest].copy_from_slice(rest);
    // SAFETY: the first loop reads and writes `quads * 16` bytes from the
    // start of `x` (whole chunks of 4, counted above), then one 16-byte
    // quad of `tail` (4 floats) is processed in place; `k` holds 16 words.
    // Only the listed registers are written; no stack is used.
    unsafe {
        asm!(
            exp_constants!(),
            "dup v7.4s, {max:w}",
            "cbz {n}, 3f",
            "2:",
            "ld1 {{v0.4s}}, [{x}]",
            "fsub v0.4s, v0.4s, v7.4s",
            exp4!(),
            "st1 {{v5.4s}}, [{x}], #16",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "3:",
            "ld1 {{v0.4s}}, [{t}]",
            "fsub v0.4s, v0.4s, v7.4s",
            exp4!(),
            "st1 {{v5.4s}}, [{t}]",
            k = in(reg) k.as_ptr(),
            max = in(reg) max.to_bits(),
            x = inout(reg) x.as_mut_ptr() => _,
            n = inout(reg) quads => _,
            t = in(reg) tail.as_mut_ptr(),
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v16") _, out("v17") _,
            out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _,
            out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _,
            out("v28") _, out("v29") _, out("v30") _,
            options(nostack),
        );
    }
    x[quads * 4..].copy_from_slice(&tail[..n_rest]);
    true
}
