//! The one driver of every aarch64 GEMV and GEMM: a layout's kernels
//! ([`GemmKernels`]: its GEMV loop over row groups and its GEMM tiles) run
//! over the row groups and activation rows by [`gemv_run`] and
//! [`gemm_run`], whose public entry points `entry_points!` writes; here
//! too the texts the layouts share: the `asm!` frame of a 4-row tile
//! (`tile4_asm!`) and the 4-row nibble tile (`nibble_tile4!`, Q4_0x4's and
//! IQ4_NLx4's).

use crate::shape::ShapeError;

/// Activation rows per GEMM tile: one weight load serves this many rows.
const TILE_M: usize = 4;

/// The most rows a layout's row group has (Q8_0x8, Q6_Kx8, Q3_Kx8).
const MAX_GROUP_ROWS: usize = 8;

/// A GEMM tile, `(w, qs, d, sums, nb, out, stride)`: one row group (`nb`
/// super-blocks at `w`) x the tile's activation rows, consecutive from
/// `qs`, `d` and `sums` (Q8_K only) at the strides of one row (`nb`
/// super-blocks' worth), into rows of `out` `stride` bytes apart (a
/// [`GemmKernels::strided`] tile) or accumulated into `group_rows`-float
/// rows back to back (the others; the driver zeroes them first).
pub(crate) type TileFn =
    unsafe fn(*const u8, *const i8, *const f32, *const i16, usize, *mut f32, usize);

/// A GEMV loop, `(w, qs, d, sums, nb, out, groups)`: `groups` row groups
/// (`nb` super-blocks each, from `w`) x one activation row (`sums`: Q8_K
/// only) into `groups * group_rows` floats of `out`.
pub(crate) type LoopFn =
    unsafe fn(*const u8, *const i8, *const f32, *const i16, usize, *mut f32, usize);

/// One layout's kernels, for the driver.
pub(crate) struct GemmKernels {
    /// Weight rows per row group.
    pub(crate) group_rows: usize,
    /// Bytes of one super-block of a row group.
    pub(crate) block_bytes: usize,
    /// The GEMV loop, also the one-row step of the GEMM.
    pub(crate) row: LoopFn,
    /// The tile of 4 activation rows, if the layout has one (else every
    /// activation row takes the GEMV loop: a layout whose own GEMM serves
    /// prompts and calls the driver for one row only, the codebook ones).
    pub(crate) tile4: Option<TileFn>,
    /// The tiles of 2 and 3 activation rows, if the layout has them (else
    /// 2 or 3 rows left over take the GEMV loop).
    pub(crate) small_tiles: Option<[TileFn; 2]>,
    /// Whether the tiles store at the caller's row stride.
    pub(crate) strided: bool,
}

/// `m` activation rows as the kernels read them: `cols` quants, `nb`
/// scales and `ns` sums (Q8_K; `sums` is empty for Q8_0) per row.
#[derive(Clone, Copy)]
pub(crate) struct Acts<'a> {
    pub(crate) qs: &'a [i8],
    pub(crate) d: &'a [f32],
    pub(crate) sums: &'a [i16],
    pub(crate) cols: usize,
    pub(crate) nb: usize,
    pub(crate) ns: usize,
}

impl Acts<'_> {
    /// Row `t`'s quants, scales and sums (`t < m`).
    fn row(&self, t: usize) -> (*const i8, *const f32, *const i16) {
        (
            self.qs[t * self.cols..].as_ptr(),
            self.d[t * self.nb..].as_ptr(),
            self.sums[t * self.ns..].as_ptr(),
        )
    }
}

/// `out[r] = W[r] . act` for one activation row: the whole row groups in
/// one call of the GEMV loop, straight into `out`; a partial last group
/// through the loop into a tail buffer, whose real rows are copied.
///
/// # Safety
/// The layout's shape check (`gemm_shape` / `gemm_k_shape` with `k`'s
/// geometry and `m = 1`) must have accepted `w`, `rows`, `a` and `out`,
/// with `a.nb >= 1` and `groups = ceil(rows / k.group_rows)`; the CPU must
/// implement what `k`'s kernels need.
pub(crate) unsafe fn gemv_run(
    k: &GemmKernels,
    w: &[u8],
    rows: usize,
    a: Acts,
    out: &mut [f32],
    groups: usize,
) {
    let gr = k.group_rows;
    let full = rows / gr;
    let (qs, d, s) = a.row(0);
    if full > 0 {
        // SAFETY: `w` holds `groups >= full` groups of `nb` super-blocks,
        // the row `cols` quants, `nb` scales and `ns` sums, `out` `rows >=
        // full * gr` floats (the shape check).
        unsafe { (k.row)(w.as_ptr(), qs, d, s, a.nb, out.as_mut_ptr(), full) };
    }
    if full < groups {
        let mut tail = [0.0f32; MAX_GROUP_ROWS];
        // SAFETY: the last group starts at full * nb * block_bytes and is one
        // group long (groups = full + 1); `tail` holds gr <= 8 floats.
        unsafe {
            (k.row)(
                w[full * a.nb * k.block_bytes..].as_ptr(),
                qs,
                d,
                s,
                a.nb,
                tail.as_mut_ptr(),
                1,
            )
        };
        out[full * gr..].copy_from_slice(&tail[..rows - full * gr]);
    }
}

/// `out[t * rows + r] = W[r] . act[t]` for every activation row `t < m`:
/// per row group, tiles of 4 activation rows, then the 2 or 3 left over in
/// one tile where the layout has one, the rest one row at a time.
///
/// # Safety
/// The layout's shape check must have accepted the arguments for `m` rows,
/// with `a.nb >= 1` and `groups = ceil(rows / k.group_rows)`; the CPU must
/// implement what `k`'s kernels need.
pub(crate) unsafe fn gemm_run(
    k: &GemmKernels,
    w: &[u8],
    rows: usize,
    a: Acts,
    m: usize,
    out: &mut [f32],
    groups: usize,
) {
    let gr = k.group_rows;
    let group_bytes = a.nb * k.block_bytes;
    let mut tile = [0.0f32; MAX_GROUP_ROWS * TILE_M];
    for g in 0..groups {
        let wg = w[g * group_bytes..(g + 1) * group_bytes].as_ptr();
        let r0 = g * gr;
        let real = (rows - r0).min(gr);
        // A strided tile of a full group writes straight into `out` (row
        // stride `rows`); anything else into `tile` (row stride `gr`), then
        // the real rows are copied.
        let direct = k.strided && real == gr;
        let mut t = 0;
        while t < m {
            let left = m - t;
            let (n, step) = match k.small_tiles {
                _ if left >= TILE_M && k.tile4.is_some() => (TILE_M, k.tile4),
                Some(small) if left >= 2 => (left, Some(small[left - 2])),
                _ => (1, None),
            };
            let (dst, stride) = if direct {
                (out[t * rows + r0..].as_mut_ptr(), rows)
            } else {
                tile = [0.0; MAX_GROUP_ROWS * TILE_M];
                (tile.as_mut_ptr(), gr)
            };
            let (qs, d, s) = a.row(t);
            match step {
                // SAFETY: `wg` is one group (group_bytes readable bytes);
                // activation rows t..t + n <= m follow row t at the strides
                // of `a` inside the checked slices; `dst` has n rows of `gr`
                // floats at stride `stride`: for a full group the last one
                // written is (t + n - 1) * rows + r0 + gr - 1 < m * rows,
                // otherwise `tile` holds 8 * 4 >= gr * n floats.
                Some(f) => unsafe { f(wg, qs, d, s, a.nb, dst, stride * 4) },
                // SAFETY: as above for one row t < m and one group.
                None => unsafe { (k.row)(wg, qs, d, s, a.nb, dst, 1) },
            }
            if !direct {
                for i in 0..n {
                    out[(t + i) * rows + r0..][..real].copy_from_slice(&tile[i * gr..][..real]);
                }
            }
            t += n;
        }
    }
}

/// The `asm!` of a Q8_0 tile of one row group x 4 activation rows (a
/// strided [`TileFn`]): the template pieces, with the tile's operands bound
/// by name (`{w}`, `{q0}`..`{q3}`, `{d0}`..`{d3}` for the 4 activation
/// rows, each `nb` blocks of 32 quants and one scale after the last,
/// `{nb}`, `{out}`, `{stride}`) to the function's arguments, and the vector
/// registers it writes.
macro_rules! tile4_asm {
    ([$($t:expr),+ $(,)?], ($w:ident, $qs:ident, $d:ident, $nb:ident, $out:ident, $stride:ident), [$($clobber:tt)*]) => {
        core::arch::asm!(
            $($t,)+
            w = inout(reg) $w => _,
            q0 = inout(reg) $qs => _,
            q1 = inout(reg) $qs.wrapping_add($nb * 32) => _,
            q2 = inout(reg) $qs.wrapping_add($nb * 64) => _,
            q3 = inout(reg) $qs.wrapping_add($nb * 96) => _,
            d0 = inout(reg) $d => _,
            d1 = inout(reg) $d.wrapping_add($nb) => _,
            d2 = inout(reg) $d.wrapping_add($nb * 2) => _,
            d3 = inout(reg) $d.wrapping_add($nb * 3) => _,
            nb = inout(reg) $nb => _,
            out = inout(reg) $out => _,
            stride = in(reg) $stride,
            $($clobber)*
            options(nostack),
        )
    };
}
pub(crate) use tile4_asm;

/// A layout's generic GEMM with Q8_0 activations (the fallback of
/// [`run_q8_0`]).
pub(crate) type GenericQ8_0 =
    fn(&[u8], usize, usize, &[i8], &[f32], usize, &mut [f32]) -> Result<(), ShapeError>;

/// A layout's generic GEMM with Q8_K activations (the fallback of
/// [`run_q8_k`]).
pub(crate) type GenericQ8K =
    fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Result<(), ShapeError>;

/// The one body of every Q8_0 layout's public GEMV and GEMM (`m` rows):
/// the layout's shape check for `k`, empty shapes to `generic`, one row
/// through [`gemv_run`], more through [`gemm_run`]. One copy for all
/// layouts: each entry point is a call with its kernels.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_q8_0(
    _cpu: super::Dotprod,
    k: &GemmKernels,
    generic: GenericQ8_0,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let shape = crate::shape::gemm_shape(
        k.group_rows,
        k.block_bytes,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    )?;
    if shape.nb == 0 || rows == 0 || m == 0 {
        return generic(w, rows, cols, act_qs, act_d, m, out);
    }
    let a = Acts {
        qs: act_qs,
        d: act_d,
        sums: &[],
        cols,
        nb: shape.nb,
        ns: 0,
    };
    // SAFETY: the shape check accepted the arguments for this layout's
    // kernels, nb, rows, m >= 1; the token proves dotprod, all `k`'s
    // kernels need.
    unsafe {
        if m == 1 {
            gemv_run(k, w, rows, a, out, shape.groups)
        } else {
            gemm_run(k, w, rows, a, m, out, shape.groups)
        }
    }
    Ok(())
}

/// [`run_q8_0`] for the Q8_K layouts (activation sums `act_sums`, one per
/// 32 quants).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_q8_k(
    _cpu: super::Dotprod,
    k: &GemmKernels,
    generic: GenericQ8K,
    w: &[u8],
    rows: usize,
    cols: usize,
    (act_qs, act_d, act_sums): (&[i8], &[f32], &[i16]),
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let shape = crate::shape::gemm_k_shape(
        k.group_rows,
        k.block_bytes,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        act_sums,
        m,
        out,
    )?;
    if shape.nb == 0 || rows == 0 || m == 0 {
        return generic(w, rows, cols, act_qs, act_d, act_sums, m, out);
    }
    let a = Acts {
        qs: act_qs,
        d: act_d,
        sums: act_sums,
        cols,
        nb: shape.nb,
        ns: cols / 32,
    };
    // SAFETY: as in `run_q8_0`.
    unsafe {
        if m == 1 {
            gemv_run(k, w, rows, a, out, shape.groups)
        } else {
            gemm_run(k, w, rows, a, m, out, shape.groups)
        }
    }
    Ok(())
}

/// `$gemv` and `$gemm`: a layout's public GEMV and GEMM (the names and
/// contracts of their twins in `generic`: a shape error when a length does
/// not fit, empty shapes to the generic code), through [`run_q8_0`] or
/// [`run_q8_k`] (so [`gemv_run`] and [`gemm_run`]) with its kernels `$k`,
/// for Q8_0 activations (`q8_0`) or Q8_K ones with their sums (`q8_k`);
/// the GEMM of one row is the GEMV. The generic twins are
/// `crate::generic`'s, or those of the module in brackets (`q8_k
/// [super::generic]`).
macro_rules! entry_points {
    (q8_0, $gemv:ident, $gemm:ident, $k:expr) => {
        $crate::aarch64::gemm::entry_points!(q8_0 [crate::generic], $gemv, $gemm, $k);
    };
    (q8_0 [$($g:ident)::+], $gemv:ident, $gemm:ident, $k:expr) => {
        #[doc = concat!("GEMV, one Q8_0 activation row (`entry_points!`; the contract of [`generic::", stringify!($gemv), "`]).")]
        pub fn $gemv(
            cpu: $crate::aarch64::Dotprod,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            out: &mut [f32],
        ) -> Result<(), crate::shape::ShapeError> {
            $gemm(cpu, w, rows, cols, act_qs, act_d, 1, out)
        }

        #[doc = concat!("GEMM, `m` Q8_0 activation rows (`entry_points!`; the contract of [`generic::", stringify!($gemm), "`]).")]
        #[allow(clippy::too_many_arguments)]
        pub fn $gemm(
            cpu: $crate::aarch64::Dotprod,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            m: usize,
            out: &mut [f32],
        ) -> Result<(), crate::shape::ShapeError> {
            $crate::aarch64::gemm::run_q8_0(cpu, &$k, $($g)::+::$gemm, w, rows, cols, act_qs, act_d, m, out)
        }
    };
    (q8_k, $gemv:ident, $gemm:ident, $k:expr) => {
        $crate::aarch64::gemm::entry_points!(q8_k [crate::generic], $gemv, $gemm, $k);
    };
    (q8_k [$($g:ident)::+], $gemv:ident, $gemm:ident, $k:expr) => {
        #[doc = concat!("GEMV, one Q8_K activation row (`entry_points!`; the contract of [`generic::", stringify!($gemv), "`]).")]
        #[allow(clippy::too_many_arguments)]
        pub fn $gemv(
            cpu: $crate::aarch64::Dotprod,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            act_sums: &[i16],
            out: &mut [f32],
        ) -> Result<(), crate::shape::ShapeError> {
            $gemm(cpu, w, rows, cols, act_qs, act_d, act_sums, 1, out)
        }

        #[doc = concat!("GEMM, `m` Q8_K activation rows (`entry_points!`; the contract of [`generic::", stringify!($gemm), "`]).")]
        #[allow(clippy::too_many_arguments)]
        pub fn $gemm(
            cpu: $crate::aarch64::Dotprod,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            act_sums: &[i16],
            m: usize,
            out: &mut [f32],
        ) -> Result<(), crate::shape::ShapeError> {
            $crate::aarch64::gemm::run_q8_k(cpu, &$k, $($g)::+::$gemm, w, rows, cols, (act_qs, act_d, act_sums), m, out)
        }
    };
}
pub(crate) use entry_points;

/// `$name`: the GEMM tile (one row group x 4 activation rows) of a 4-row
/// nibble layout whose nibbles `$nib!` decodes (see `gemv.rs`), with the
/// extra operands `$extra`.
macro_rules! nibble_tile4 {
    ($name:ident, $nib:ident, [$($extra:tt)*]) => {
        /// One row group x 4 activation rows (`nibble_tile4!`).
        ///
        /// # Safety
        /// `w` must point to `nb * 72` readable bytes, `qs` and `d` to 4
        /// consecutive activation rows of `nb * 32` quants and `nb` floats, `out` to 4 rows of 4 writable floats
        /// `stride` bytes apart, `nb >= 1`, and the CPU must implement dotprod.
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
            // SAFETY: per the function contract (and the 16-byte table `$extra`
            // names): per block the loop reads 72 bytes
            // of `w`, 32 bytes of each activation row's quants and 4 bytes of its scales, for nb
            // blocks; then it stores 16 bytes at out + i * stride for i in 0..4.
            // Only the listed registers are written; no stack is used.
            unsafe {
                $crate::aarch64::gemm::tile4_asm!(
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
pub(crate) use nibble_tile4;
