//! GEMV and GEMM of Q6_Kx8 weights with Q8_K activations: AVX2 tiles of
//! one row group (8 rows, one per 32-bit lane) x up to 4 activation rows.
//! The GEMV is the GEMM with one activation row. When the token names a
//! VNNI form, the tile multiplies with `vpdpbusd` instead, with a per-call
//! table of the activations' 16-quant sums (the same i32 sums); with
//! AVX512-VNNI a GEMM of more than [`TILE_M`] activation rows takes the
//! layout's 512-bit two-group tile (up to 8 activation rows) on
//! `gemm_vnni::avx512::pair_groups_gemm`, where it has one. Up to
//! [`TILE_M`] rows (a decode step, a verify step of up to 3 drafts, the
//! server's step of up to 4 streams) keep this tile's one weight stream:
//! from DRAM the 512-bit tile's two streams took 1.99x the GEMV's time at
//! 4 rows, this tile 1.37x (`kestrel bench --rows 65536 --cols 1536 -t
//! 1`, AMD EPYC Zen 5, 2026-12-04; in cache it is 1.4x slower than the
//! 512-bit tile, which the 32-row prefill keeps).

use super::gemm::{gemm_run, table_rows_per_call, Grid, Pass, GEMM_EXPAND_BLOCKS, GEMV_MAX_BLOCKS};
use super::gemm_vnni;
use super::{offset_table, Avx2, Vnni, RUN};
use crate::layout::{K8_ROWS, QK};
use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
use core::mem::MaybeUninit;

/// Activation rows computed together against one pass over a row group.
pub(crate) const TILE_M: usize = 4;

// The 512-bit tile takes every row the offset table does.
const _: () = assert!(GEMV_MAX_BLOCKS <= gemm_vnni::MAX_BLOCKS);

/// A tile of an 8-row K layout, `(w, qs, d, offsets, nb, res)`: one row
/// group (`nb` super-blocks) x `T` activation rows (`qs`, `d`: `T` rows of
/// `nb * 256` quants and `nb` scales; `offsets`: with a VNNI form their
/// [`offset_table`] runs, else unused) into `res[t]`.
pub(crate) type K8Tile = unsafe fn(&[u8], &[i8], &[f32], &[i32], usize, &mut [[f32; 8]; TILE_M]);

/// A generic K GEMM (`generic::gemm_q6_kx8_q8_k` and its twin).
type GenericK8 =
    fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Result<(), ShapeError>;

/// An 8-row K layout's x86 kernels (Q6_Kx8; Q3_Kx8 in `crate::layouts::q3k`) for [`k8_gemm`].
pub(crate) struct K8Kernels {
    /// Bytes per super-block of a row group.
    pub(crate) block_bytes: usize,
    /// `tiles[form][T - 1]`: the AVX2, AVX-VNNI and AVX512-VNNI tiles of
    /// `T` = 1..=4 activation rows.
    pub(crate) tiles: [[K8Tile; TILE_M]; 3],
    /// With AVX512-VNNI, a GEMM of more than [`TILE_M`] rows takes these
    /// two-group tiles on [`gemm_vnni::avx512::pair_groups_gemm`].
    pub(crate) wide: Option<[gemm_vnni::avx512::PairTile; gemm_vnni::TILE_M]>,
    /// The AVX2 tile cannot take a -128 quant (Q6_K's sign trick).
    pub(crate) avx2_no_min: bool,
    /// The generic twin, for empty shapes and what the tiles cannot take.
    pub(crate) generic: GenericK8,
}

/// A layout's [`K8Kernels::tiles`] from its AVX2 tile and that tile's two
/// VNNI forms (`vnni_forms!`), each for 1 to 4 activation rows.
macro_rules! k8_tiles {
    ($avx2:ident, $avx_vnni:ident, $avx512_vnni:ident) => {
        [
            [$avx2::<1>, $avx2::<2>, $avx2::<3>, $avx2::<4>],
            [
                $avx_vnni::<1>,
                $avx_vnni::<2>,
                $avx_vnni::<3>,
                $avx_vnni::<4>,
            ],
            [
                $avx512_vnni::<1>,
                $avx512_vnni::<2>,
                $avx512_vnni::<3>,
                $avx512_vnni::<4>,
            ],
        ]
    };
}
pub(crate) use k8_tiles;

/// An 8-row K layout's x86 entry points over [`k8_gemm`] (`$name` names
/// the layout in the docs): the GEMV `$gemv` (the GEMM with one row), the
/// GEMM `$gemm` over the table `$table` of its tiles, and the tiles: the
/// AVX2 tile `$tile` and its VNNI forms `$avx`, `$avx512`, each `$body::<T,
/// DOT>` (`(wg, qs, d, offsets, nb, res)`, the contract of [`K8Tile`] with
/// `offsets` read by the VNNI forms only); `$bytes`-byte super-blocks, `$no_min`
/// (the AVX2 tile cannot take a -128 activation), the generic twin
/// `$generic` and, after `wide =`, the layout's 512-bit two-group tile as
/// `module::tile` (its [`gemm_vnni::avx512::PairTile`]s; default none).
macro_rules! k8_entry {
    (
        $name:literal, $gemv:ident, $gemm:ident, $table:ident,
        [$tile:ident, $avx:ident, $avx512:ident], $body:ident,
        $bytes:expr, $no_min:expr, $generic:path
    ) => {
        $crate::x86_64::k8::k8_entry!(
            $name, $gemv, $gemm, $table, [$tile, $avx, $avx512], $body,
            $bytes, $no_min, $generic, wide = None
        );
    };
    (
        $name:literal, $gemv:ident, $gemm:ident, $table:ident,
        [$tile:ident, $avx:ident, $avx512:ident], $body:ident,
        $bytes:expr, $no_min:expr, $generic:path, wide = $wide_mod:ident :: $wide:ident
    ) => {
        $crate::x86_64::k8::k8_entry!(
            $name, $gemv, $gemm, $table, [$tile, $avx, $avx512], $body,
            $bytes, $no_min, $generic,
            wide = Some($crate::x86_64::gemm_vnni::avx512::pair_tiles!($wide_mod::$wide))
        );
    };
    (
        $name:literal, $gemv:ident, $gemm:ident, $table:ident,
        [$tile:ident, $avx:ident, $avx512:ident], $body:ident,
        $bytes:expr, $no_min:expr, $generic:path, wide = $wide:expr
    ) => {
        forwarding_entry!(
            #[doc = concat!("GEMV, ", $name, " weights x one Q8_K activation row: the GEMM with `m = 1`.")]
            q8_k gemv $gemv (cpu: $crate::x86_64::Avx2) => $gemm
        );

        #[doc = concat!($name, "'s kernels.")]
        const $table: $crate::x86_64::k8::K8Kernels = $crate::x86_64::k8::K8Kernels {
            block_bytes: $bytes,
            tiles: $crate::x86_64::k8::k8_tiles!($tile, $avx, $avx512),
            wide: $wide,
            avx2_no_min: $no_min,
            generic: $generic,
        };

        #[doc = concat!("GEMM, ", $name, " weights x `m` Q8_K activation rows: the generic twin's contract, exact for every input bit pattern; empty shapes (and what the AVX2 tile cannot take) go to the generic code.")]
        #[allow(clippy::too_many_arguments)]
        pub fn $gemm(
            cpu: $crate::x86_64::Avx2,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            act_sums: &[i16],
            m: usize,
            out: &mut [f32],
        ) -> Result<(), $crate::shape::ShapeError> {
            $crate::x86_64::k8::k8_gemm(cpu, &$table, w, rows, cols, act_qs, act_d, act_sums, m, out)
        }

        /// The AVX2 tile: one row group against `T` activation rows.
        ///
        /// # Safety
        /// The body's contract without offsets, and the CPU must implement
        /// AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $tile<const T: usize>(
            wg: &[u8],
            qs: &[i8],
            d: &[f32],
            _offsets: &[i32],
            nb: usize,
            res: &mut [[f32; 8]; $crate::x86_64::k8::TILE_M],
        ) {
            // SAFETY: the contract of this function is the body's (no offsets).
            unsafe { $body::<T, { $crate::x86_64::Dot::MADDUBS }>(wg, qs, d, &[], nb, res) }
        }

        // The AVX2 tile summing with `vpdpbusd`: the same i32 sums.
        $crate::x86_64::vnni_forms!($avx, $avx512<const T: usize>(
            wg: &[u8],
            qs: &[i8],
            d: &[f32],
            offsets: &[i32],
            nb: usize,
            res: &mut [[f32; 8]; $crate::x86_64::k8::TILE_M],
        ) => $body::<T, DOT>);
    };
}
pub(crate) use k8_entry;

/// The GEMM of an 8-row K layout with the kernels `k` (the contract of
/// `k.generic`), on the driver [`gemm_run`]: tiles of one row group x up to [`TILE_M`] activation rows,
/// with a VNNI form in batches of rows that share an offset table; with
/// AVX512-VNNI and more than [`TILE_M`] rows the layout's 512-bit GEMM where
/// it has one.
#[allow(clippy::too_many_arguments)]
pub(crate) fn k8_gemm(
    cpu: Avx2,
    k: &K8Kernels,
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
        K8_ROWS,
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
    if nb == 0 || rows == 0 || m == 0 {
        return (k.generic)(w, rows, cols, act_qs, act_d, act_sums, m, out);
    }
    // The VNNI tiles need the offset table, which holds rows of up to
    // GEMV_MAX_BLOCKS blocks; wider rows take the AVX2 tiles.
    let vnni = if cols / QK <= GEMV_MAX_BLOCKS {
        cpu.vnni()
    } else {
        Vnni::No
    };
    if let (Vnni::Avx512, Some(tiles), true) = (vnni, &k.wide, m > TILE_M) {
        let shape = gemm_vnni::avx512::PairGroups {
            rows,
            groups,
            nb,
            block_bytes: k.block_bytes,
        };
        // SAFETY: `gemm_k_shape` checked `w` (`groups` row groups of `nb`
        // super-blocks, rows <= 8 * groups), `act_qs`, `act_d` and `out`
        // for `m` rows; nb, rows, m >= 1 (checked above), nb * 8 <=
        // GEMV_MAX_BLOCKS = MAX_BLOCKS (`vnni` is not `No`); the token says
        // AVX512-VNNI; `tiles` are the layout's, for its `k.block_bytes`.
        unsafe { gemm_vnni::avx512::pair_groups_gemm(cpu, shape, tiles, w, act_qs, act_d, m, out) };
        return Ok(());
    }
    if vnni == Vnni::No && k.avx2_no_min && act_qs.contains(&i8::MIN) {
        return (k.generic)(w, rows, cols, act_qs, act_d, act_sums, m, out);
    }
    let form = match vnni {
        Vnni::No => 0,
        Vnni::Avx => 1,
        Vnni::Avx512 => 2,
    };
    // Batches of activation rows: with a VNNI form, of table_rows_per_call
    // rows, each forming its rows' offset_table once; else all rows.
    let batch = if vnni == Vnni::No {
        m
    } else {
        table_rows_per_call(cols / QK)
    };
    let runs = cols / RUN;
    let group_bytes = nb * k.block_bytes;
    let grid = Grid {
        rows,
        units: groups,
        m,
        call_rows: batch,
    };
    gemm_run(grid, out, |pass: Pass<'_, K8_ROWS, TILE_M>| {
        let (b0, b1) = (pass.first, pass.end);
        // At most GEMM_EXPAND_BLOCKS 32-quant blocks per VNNI batch (the
        // contract of table_rows_per_call): two runs each.
        let mut table = [MaybeUninit::<i32>::uninit(); 2 * GEMM_EXPAND_BLOCKS];
        let offsets = if vnni == Vnni::No {
            &[]
        } else {
            offset_table(&act_qs[b0 * cols..b1 * cols], &mut table)
        };
        pass.tiles(|g, t0, tm, res| {
            let wg = &w[g * group_bytes..(g + 1) * group_bytes];
            let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
            let d = &act_d[t0 * nb..(t0 + tm) * nb];
            let o = if vnni == Vnni::No {
                offsets
            } else {
                &offsets[(t0 - b0) * runs..(t0 - b0 + tm) * runs]
            };
            // SAFETY: `wg` is a whole row group (`nb` super-blocks of
            // `k.block_bytes`), `qs` holds `tm` rows of `nb * 256` quants
            // (with no -128 where the AVX2 tile needs that, checked above),
            // `d` and, with a VNNI form, `o` `tm` rows of `nb` scales and `nb
            // * 16` offsets (sliced above), `res` holds `tm <= 4` rows of 8
            // floats; the token proves AVX2/FMA/F16C and the VNNI form
            // `vnni` names.
            unsafe { (k.tiles[form][tm - 1])(wg, qs, d, o, nb, res) };
        });
    });
    Ok(())
}
