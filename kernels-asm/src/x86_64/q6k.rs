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

use super::gemm::{table_rows_per_call, GEMM_EXPAND_BLOCKS, GEMV_MAX_BLOCKS};
use super::gemm_vnni;
use super::{offset_table, prefetch_ahead, Avx2, Dot, Vnni, RUN};
use crate::generic;
use crate::layout::{Q6KX8_BLOCK_BYTES, Q6KX8_PAIR_BYTES, Q6KX8_ROWS, QK, QK_K};
use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
use core::arch::x86_64::*;
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

/// The 512-bit GEMM of an 8-row K layout (`gemm_vnni::avx512::gemm_q6kx8`'s
/// contract).
type WideGemm = unsafe fn(Avx2, &[u8], usize, usize, usize, &[i8], &[f32], usize, &mut [f32]);

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
    /// With AVX512-VNNI, a GEMM of more than [`TILE_M`] rows (Q6_K's
    /// two-group tile).
    pub(crate) wide: Option<WideGemm>,
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
/// `$generic` and, after `wide =`, the layout's 512-bit GEMM (default
/// `None`).
macro_rules! k8_entry {
    (
        $name:literal, $gemv:ident, $gemm:ident, $table:ident,
        [$tile:ident, $avx:ident, $avx512:ident], $body:ident,
        $bytes:expr, $no_min:expr, $generic:path
    ) => {
        $crate::x86_64::q6k::k8_entry!(
            $name, $gemv, $gemm, $table, [$tile, $avx, $avx512], $body,
            $bytes, $no_min, $generic, wide = None
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
        const $table: $crate::x86_64::q6k::K8Kernels = $crate::x86_64::q6k::K8Kernels {
            block_bytes: $bytes,
            tiles: $crate::x86_64::q6k::k8_tiles!($tile, $avx, $avx512),
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
            $crate::x86_64::q6k::k8_gemm(cpu, &$table, w, rows, cols, act_qs, act_d, act_sums, m, out)
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
            res: &mut [[f32; 8]; $crate::x86_64::q6k::TILE_M],
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
            res: &mut [[f32; 8]; $crate::x86_64::q6k::TILE_M],
        ) => $body::<T, DOT>);
    };
}
pub(crate) use k8_entry;

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
    wide = Some(gemm_vnni::avx512::gemm_q6kx8)
);

/// The GEMM of an 8-row K layout with the kernels `k` (the contract of
/// `k.generic`): tiles of one row group x up to [`TILE_M`] activation rows,
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
        Q6KX8_ROWS,
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
    if let (Vnni::Avx512, Some(wide), true) = (vnni, k.wide, m > TILE_M) {
        // SAFETY: `gemm_k_shape` checked `w` (`groups` row groups of `nb`
        // super-blocks, rows <= 8 * groups), `act_qs`, `act_d` and `out`
        // for `m` rows; nb, rows, m >= 1 (checked above), nb * 8 <=
        // GEMV_MAX_BLOCKS = MAX_BLOCKS (`vnni` is not `No`); the token says
        // AVX512-VNNI.
        unsafe { wide(cpu, w, rows, groups, nb, act_qs, act_d, m, out) };
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
    for b0 in (0..m).step_by(batch) {
        let b1 = (b0 + batch).min(m);
        // At most GEMM_EXPAND_BLOCKS 32-quant blocks per VNNI batch (the
        // contract of table_rows_per_call): two runs each.
        let mut table = [MaybeUninit::<i32>::uninit(); 2 * GEMM_EXPAND_BLOCKS];
        let offsets = if vnni == Vnni::No {
            &[]
        } else {
            offset_table(&act_qs[b0 * cols..b1 * cols], &mut table)
        };
        for g in 0..groups {
            let wg = &w[g * group_bytes..(g + 1) * group_bytes];
            let mut t0 = b0;
            while t0 < b1 {
                let tm = (b1 - t0).min(TILE_M);
                let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
                let d = &act_d[t0 * nb..(t0 + tm) * nb];
                let o = if vnni == Vnni::No {
                    offsets
                } else {
                    &offsets[(t0 - b0) * runs..(t0 - b0 + tm) * runs]
                };
                let mut res = [[0.0f32; 8]; TILE_M];
                // SAFETY: `wg` is a whole row group (`nb` super-blocks of
                // `k.block_bytes`), `qs` holds `tm` rows of `nb * 256`
                // quants (with no -128 where the AVX2 tile needs that,
                // checked above), `d` and, with a VNNI form, `o` `tm` rows
                // of `nb` scales and `nb * 16` offsets (sliced above), `res`
                // holds `tm <= 4` rows of 8 floats; the token proves
                // AVX2/FMA/F16C and the VNNI form `vnni` names.
                unsafe { (k.tiles[form][tm - 1])(wg, qs, d, o, nb, &mut res) };
                for (t, r) in res.iter().enumerate().take(tm) {
                    let row0 = g * Q6KX8_ROWS;
                    let n = (rows - row0).min(8);
                    let o = (t0 + t) * rows + row0;
                    out[o..o + n].copy_from_slice(&r[..n]);
                }
                t0 += tm;
            }
        }
    }
    Ok(())
}

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
                                let a =
                                    _mm256_set1_epi32(ap.add(4 * k).cast::<i32>().read_unaligned());
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
                                let a =
                                    _mm256_set1_epi32(ap.add(4 * k).cast::<i32>().read_unaligned());
                                s = if DOT == Dot::AVX_VNNI {
                                    _mm256_dpbusd_avx_epi32(s, *uk, a)
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
