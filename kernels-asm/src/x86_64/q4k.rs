//! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K, 4 rows interleaved) with
//! Q8_K activations: AVX2 tiles of one row group (4 rows) x up to 4
//! activation rows; the GEMV is the GEMM with one activation row. The same
//! code serves Q5_Kx4 (`x86_64/q5k.rs`). With the GEMM's per-call tables,
//! the tile adds its byte products with `vpdpbusd` when the token names
//! AVX-VNNI (the same i32 sums; docs/kernels.md); with AVX512-VNNI a GEMM
//! of more than one activation row takes the 512-bit tile of
//! `gemm_vnni.rs` (16 weight rows, broadcast activations, no tables), but
//! a Q5_Kx4 GEMM of up to 4 rows the one-stream tile with the AVX512-VL
//! `vpdpbusd` (measured faster from DRAM; see `k_gemm`).
//!
//! One row group at a time, so the weights are read as one sequential
//! stream. An earlier version read two adjacent row groups per pass (the
//! spread activations then served 8 rows: 1.15x faster on a matrix in
//! cache), and that made the decode read from DRAM at a third of the rate:
//! `kestrel bench --rows 65536 --cols 1536 -t 1` (Q4_Kx4 GEMV, 56 MB) gave
//! 8.8 GB/s with two streams against 23-25 GB/s with one, and the 1.5B
//! model's decode went from 19.9 to 39.2 tok/s (2 threads, AMD EPYC,
//! 2026-12-01).
//!
//! Per super-block and row group: the 48 scale bytes are unpacked to the
//! eight 6-bit scales and mins of each row with byte masks and 16-bit
//! shifts; per 64-weight half, four 32-byte loads (chunks `2i`, `2i + 1`:
//! 4 rows x 4 bytes per 128-bit lane), `vpand 0x0F` / `vpsrlw 4` + `vpand`
//! give the unsigned nibbles of the half's two sub-blocks; the sub-block's
//! 32 activation bytes are spread with `vpermd` (dword `2i` in the low
//! lane, `2i + 1` in the high one), `vpmaddubsw` (nibble 0..15 x any i8:
//! pairs within +-3840, the four summed within +-15360, exact in i16), then
//! `vpmaddwd` by the sub-block's scale (one i16 per row, `vpshufb` from the
//! unpacked bytes) gives `sc * isum` in i32, added over the eight
//! sub-blocks. The mins are dotted with the activation sums by `vpmaddwd`
//! and a horizontal add. Then per activation row the reference's float
//! steps on 4 lanes: `acc + (d * d_a) * sumi`, `- (dmin * d_a) * summ`.

use super::gemm::{pattern_table, table_rows_per_call, GEMM_EXPAND_BLOCKS, GEMV_MAX_BLOCKS};
use super::gemm_vnni;
use super::{prefetch_ahead, Avx2, Dot, Vnni};
use crate::generic;
use crate::layout::{
    Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT, Q4KX4_ROWS, Q4KX4_SCALES_AT, Q5KX4_BLOCK_BYTES, Q5KX4_QH_AT,
    Q5KX4_QS_AT, QK, QK_K,
};
use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Activation rows computed together against one pass over a row group.
const TILE_M: usize = 4;

/// The public GEMV and GEMM of Q4_Kx4 (`$q5`: Q5_Kx4) weights x Q8_K
/// activation rows, `$gemv` and `$gemm`, through [`k_gemm`]: the names and
/// contracts of their twins in `generic` (exact for every input bit
/// pattern; empty shapes go to the generic code).
macro_rules! k_entry_points {
    ($gemv:ident, $gemm:ident, $q5:literal) => {
        #[doc = concat!("GEMV, one Q8_K activation row: [`", stringify!($gemm), "`] with `m = 1` (the contract of [`crate::generic::", stringify!($gemv), "`]).")]
        #[allow(clippy::too_many_arguments)]
        pub fn $gemv(
            cpu: Avx2,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            act_sums: &[i16],
            out: &mut [f32],
        ) -> Result<(), ShapeError> {
            $gemm(cpu, w, rows, cols, act_qs, act_d, act_sums, 1, out)
        }

        #[doc = concat!("GEMM, `m` Q8_K activation rows: `out[t * rows + r] = W[r] . act[t]` (the contract of [`crate::generic::", stringify!($gemm), "`]).")]
        #[allow(clippy::too_many_arguments)]
        pub fn $gemm(
            cpu: Avx2,
            w: &[u8],
            rows: usize,
            cols: usize,
            act_qs: &[i8],
            act_d: &[f32],
            act_sums: &[i16],
            m: usize,
            out: &mut [f32],
        ) -> Result<(), ShapeError> {
            k_gemm::<$q5>(cpu, w, rows, cols, act_qs, act_d, act_sums, m, out)
        }
    };
}
pub(super) use k_entry_points;

k_entry_points!(gemv_q4_kx4_q8_k, gemm_q4_kx4_q8_k, false);

/// The GEMM of either layout (`Q5`: Q5_Kx4, else Q4_Kx4), shapes checked
/// here.
#[allow(clippy::too_many_arguments)]
pub(super) fn k_gemm<const Q5: bool>(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let bb = if Q5 {
        Q5KX4_BLOCK_BYTES
    } else {
        Q4KX4_BLOCK_BYTES
    };
    let GemmKShape { nb, groups } = gemm_k_shape(
        Q4KX4_ROWS, bb, w, rows, cols, act_qs, act_d, act_sums, m, out,
    )?;
    if nb == 0 || m == 0 || rows == 0 {
        return if Q5 {
            generic::gemm_q5_kx4_q8_k(w, rows, cols, act_qs, act_d, act_sums, m, out)
        } else {
            generic::gemm_q4_kx4_q8_k(w, rows, cols, act_qs, act_d, act_sums, m, out)
        };
    }
    let ns = cols / QK;
    // With AVX512-VNNI the 512-bit tile (four row groups, four weight
    // streams) takes every GEMM of Q4_Kx4; of Q5_Kx4 only those of more
    // than TILE_M rows: from DRAM (`kestrel bench --rows 65536 --cols 1536
    // -t 1`, AMD EPYC Zen 5, 2026-12-04) at 4 rows its Q5_K tile took 5.1
    // ms against 4.0 for the one-stream 256-bit VNNI tile below, while its
    // Q4_K tile took 2.0 against 3.3.
    let wide = if Q5 { m > TILE_M } else { m > 1 };
    if wide && cpu.vnni() == Vnni::Avx512 {
        // SAFETY: `gemm_k_shape` checked `w` (`groups` row groups of `nb`
        // super-blocks of `bb` bytes, rows <= 4 * groups), `act_qs`,
        // `act_d`, `act_sums` and `out` for `m` rows; nb, rows, m >= 1
        // (checked above); the token says AVX512-VNNI.
        unsafe {
            gemm_vnni::avx512::gemm_kx4::<Q5>(
                cpu, w, rows, groups, nb, act_qs, act_d, act_sums, m, out,
            )
        };
        return Ok(());
    }
    if m == 1 || ns > GEMV_MAX_BLOCKS {
        // One activation row (a decode step: its tile forms each pattern
        // once anyway), or rows wider than the tables.
        let shape = (nb, groups, bb);
        tiles::<Q5, false>(
            cpu,
            w,
            rows,
            cols,
            act_qs,
            act_d,
            act_sums,
            m,
            out,
            shape,
            &[],
        );
        return Ok(());
    }
    let max_rows = table_rows_per_call(ns);
    for t0 in (0..m).step_by(max_rows) {
        let t1 = (t0 + max_rows).min(m);
        let qs = &act_qs[t0 * cols..t1 * cols];
        // The `vpermd` patterns of every 32-quant block of the batch,
        // formed once here instead of again for every row group.
        let mut table = [MaybeUninit::<[__m256i; 4]>::uninit(); GEMM_EXPAND_BLOCKS];
        let patterns = pattern_table(cpu, qs, (t1 - t0) * ns, &mut table);
        tiles::<Q5, true>(
            cpu,
            w,
            rows,
            cols,
            qs,
            &act_d[t0 * nb..t1 * nb],
            &act_sums[t0 * ns..t1 * ns],
            t1 - t0,
            &mut out[t0 * rows..t1 * rows],
            (nb, groups, bb),
            patterns,
        );
    }
    Ok(())
}

/// Every row group against the `m` activation rows, in tiles of up to
/// [`TILE_M`] rows (`nb` super-blocks of `bb` bytes per row group); with
/// `TABLES` the tiles read the rows' `patterns` (row `t`'s 32-quant block
/// `k` at `t * cols / 32 + k`).
#[allow(clippy::too_many_arguments)]
fn tiles<const Q5: bool, const TABLES: bool>(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    m: usize,
    out: &mut [f32],
    (nb, groups, bb): (usize, usize, usize),
    patterns: &[[__m256i; 4]],
) {
    let group_bytes = nb * bb;
    let ns = cols / QK;
    // The AVX-VNNI tile (taken with tables only, as it requires) reads two
    // row groups per pass; an odd last group is paired with itself and only
    // its own rows are stored. (An AVX512-VNNI token took the 512-bit tile
    // for more than one activation row, and takes the AVX2 tile here.)
    let vnni = TABLES && cpu.vnni() == Vnni::Avx;
    let vnni512 = TABLES && cpu.vnni() == Vnni::Avx512;
    let step = if vnni { 2 } else { 1 };
    for ga in (0..groups).step_by(step) {
        let gb = (ga + step - 1).min(groups - 1);
        let wa = &w[ga * group_bytes..(ga + 1) * group_bytes];
        let wb = &w[gb * group_bytes..(gb + 1) * group_bytes];
        let mut t0 = 0;
        while t0 < m {
            let tn = (m - t0).min(TILE_M);
            let qs = &act_qs[t0 * cols..(t0 + tn) * cols];
            let d = &act_d[t0 * nb..(t0 + tn) * nb];
            let s = &act_sums[t0 * ns..(t0 + tn) * ns];
            let pt = if TABLES {
                &patterns[t0 * ns..(t0 + tn) * ns]
            } else {
                patterns
            };
            let mut res = [[[0.0f32; Q4KX4_ROWS]; TILE_M]; 2];
            // SAFETY: `wa` and `wb` are row groups of `nb` super-blocks (of
            // the layout `Q5` names), `qs`, `d` and `s` hold `tn` activation
            // rows of `cols` quants, `nb` scales and `cols / 32` sums
            // (lengths checked by gemm_k_shape), with TABLES `pt` their
            // `cols / 32` patterns each (sliced above); each tile holds
            // TILE_M >= tn rows; the token proves AVX2, FMA and F16C and the
            // VNNI form `vnni` names (taken with TABLES only, above).
            unsafe {
                let w2 = [wa, wb];
                let r = &mut res;
                if vnni512 {
                    let (w1, r1) = ([wa], core::array::from_mut(&mut r[0]));
                    match tn {
                        1 => kx4_tile_avx512_vnni::<1, Q5>(w1, qs, d, s, pt, nb, r1),
                        2 => kx4_tile_avx512_vnni::<2, Q5>(w1, qs, d, s, pt, nb, r1),
                        3 => kx4_tile_avx512_vnni::<3, Q5>(w1, qs, d, s, pt, nb, r1),
                        _ => kx4_tile_avx512_vnni::<4, Q5>(w1, qs, d, s, pt, nb, r1),
                    }
                } else {
                    match (vnni, tn) {
                        (true, 1) => kx4_tile_avx_vnni::<1, Q5>(w2, qs, d, s, pt, nb, r),
                        (true, 2) => kx4_tile_avx_vnni::<2, Q5>(w2, qs, d, s, pt, nb, r),
                        (true, 3) => kx4_tile_avx_vnni::<3, Q5>(w2, qs, d, s, pt, nb, r),
                        (true, _) => kx4_tile_avx_vnni::<4, Q5>(w2, qs, d, s, pt, nb, r),
                        (false, 1) => kx4_tile::<1, Q5, TABLES>(wa, qs, d, s, pt, nb, &mut r[0]),
                        (false, 2) => kx4_tile::<2, Q5, TABLES>(wa, qs, d, s, pt, nb, &mut r[0]),
                        (false, 3) => kx4_tile::<3, Q5, TABLES>(wa, qs, d, s, pt, nb, &mut r[0]),
                        (false, _) => kx4_tile::<4, Q5, TABLES>(wa, qs, d, s, pt, nb, &mut r[0]),
                    }
                }
            }
            for (g, tile) in [ga, gb].into_iter().zip(&res).take(gb + 1 - ga) {
                let r0 = g * Q4KX4_ROWS;
                let nr = (rows - r0).min(Q4KX4_ROWS);
                for (t, acc) in tile.iter().take(tn).enumerate() {
                    out[(t0 + t) * rows + r0..][..nr].copy_from_slice(&acc[..nr]);
                }
            }
            t0 += tn;
        }
    }
}

/// One row group x `T` activation rows, all `nb` super-blocks, of Q4_Kx4
/// (`Q5` false) or Q5_Kx4 (`Q5` true: the nibbles get their fifth bit from
/// the `qh` chunks, bit `j` moved to bit 4 with a 16-bit shift and a mask;
/// quants 0..31 keep the four `vpmaddubsw` sums within +-31744, exact).
///
/// With `TABLES` the activations' `vpermd` patterns come from `pt` (row
/// `t`'s 32-quant block `k` at `t * nb * 8 + k`, [`act_patterns`]'s four
/// registers: the spreads of dwords `2i`, `2i + 1`), formed once per batch.
///
/// # Safety
/// `w` must hold `nb` super-blocks (`nb * 576` or `nb * 704` bytes), `qs`
/// `T * nb * 256` quants, `d` `T * nb` scales, `s` `T * nb * 8` sums, with
/// `TABLES` `pt` `T * nb * 8` patterns, `T <= TILE_M`, and the CPU must
/// implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn kx4_tile<const T: usize, const Q5: bool, const TABLES: bool>(
    w: &[u8],
    qs: &[i8],
    d: &[f32],
    s: &[i16],
    pt: &[[__m256i; 4]],
    nb: usize,
    tile: &mut [[f32; Q4KX4_ROWS]; TILE_M],
) {
    let tiles = core::array::from_mut(tile);
    // SAFETY: the contract of this function is the body's with one row
    // group.
    unsafe { kx4_tile_body::<T, 1, Q5, TABLES, { Dot::MADDUBS }>([w], qs, d, s, pt, nb, tiles) }
}

// Two row groups `w` x `T` activation rows (8 weight rows, so each
// activation pattern read from the table serves two `vpdpbusd`), with
// tables, the byte products summed by the AVX-VNNI `vpdpbusd`: the same
// i32 sums as [`kx4_tile`]'s, so the same results; `tiles[g]` receives
// group `g`'s rows. (AVX512-VNNI takes the 512-bit tile of `gemm_vnni.rs`.)
vnni_forms!(avx: kx4_tile_avx_vnni<const T: usize, const Q5: bool>(
    w: [&[u8]; 2],
    qs: &[i8],
    d: &[f32],
    s: &[i16],
    pt: &[[__m256i; 4]],
    nb: usize,
    tiles: &mut [[[f32; Q4KX4_ROWS]; TILE_M]; 2],
) => kx4_tile_body::<T, 2, Q5, true, DOT>);

// One row group `w` x `T` activation rows with tables, the byte products
// summed by the AVX512-VL `vpdpbusd` on 256-bit registers: one weight
// stream, for Q5_Kx4 GEMMs of up to [`TILE_M`] activation rows with
// AVX512-VNNI (see `k_gemm`); the same i32 sums as [`kx4_tile`]'s, so the
// same results.
vnni_forms!(avx512: kx4_tile_avx512_vnni<const T: usize, const Q5: bool>(
    w: [&[u8]; 1],
    qs: &[i8],
    d: &[f32],
    s: &[i16],
    pt: &[[__m256i; 4]],
    nb: usize,
    tiles: &mut [[[f32; Q4KX4_ROWS]; TILE_M]; 1],
) => kx4_tile_body::<T, 1, Q5, true, DOT>);

/// The body of the two tiles, inlined into each so that it is compiled
/// with its caller's features: `G` row groups (`w`, one stream each; the
/// AVX2 form takes one, the AVX-VNNI form two) against the same `T`
/// activation rows, `DOT` [`Dot::MADDUBS`] or [`Dot::AVX_VNNI`] (then
/// `TABLES` must be true). The AVX-VNNI form adds each load's byte products per (row,
/// 4-byte chunk) in i32 with `vpdpbusd` (the sub-block's even chunks in the
/// low 128-bit lane, odd in the high, as the i16 sums of the AVX2 form) and
/// apply the sub-block's scale with `vpmulld` (the scale byte as an i32 per
/// row): the i32 the AVX2 form's `vpmaddwd` gives. Each group's sums and
/// float steps are those of a one-group tile, in the same order.
///
/// # Safety
/// As [`kx4_tile`] for each of `w`, and the CPU must implement the `DOT`
/// form.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn kx4_tile_body<
    const T: usize,
    const G: usize,
    const Q5: bool,
    const TABLES: bool,
    const DOT: u8,
>(
    w: [&[u8]; G],
    qs: &[i8],
    d: &[f32],
    s: &[i16],
    pt: &[[__m256i; 4]],
    nb: usize,
    tiles: &mut [[[f32; Q4KX4_ROWS]; TILE_M]; G],
) {
    const { assert!(DOT == Dot::MADDUBS || TABLES) };
    debug_assert!(T <= TILE_M);
    let bb = if Q5 {
        Q5KX4_BLOCK_BYTES
    } else {
        Q4KX4_BLOCK_BYTES
    };
    let qs_at = if Q5 { Q5KX4_QS_AT } else { Q4KX4_QS_AT };
    debug_assert!(w.iter().all(|wg| wg.len() >= nb * bb));
    debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb && s.len() >= T * nb * 8);
    let cols = nb * QK_K;
    // SAFETY: every pointer below is inside its slice per the function
    // contract: super-block `b` of group `g` is w[g][bb * b..bb * (b + 1)], row `t`'s
    // sub-block `k` of super-block `b` is qs[t * cols + 256b + 32k..][..32],
    // its sums s[t * nb * 8 + 8b..][..8], its scale d[t * nb + b]; all loads
    // are unaligned; the CPU implements AVX2, FMA and F16C.
    unsafe {
        let m0f = _mm256_set1_epi8(0x0f);
        let m3f = _mm_set1_epi8(0x3f);
        let m0f128 = _mm_set1_epi8(0x0f);
        let m30 = _mm_set1_epi8(0x30);
        // vpermd patterns: dword 2i in the low lane, 2i + 1 in the high one.
        let idx = [
            _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
            _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
            _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5),
            _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7),
        ];
        // vpshufb patterns: byte k of each row's dword as an i16, twice.
        let mk = |k: i8| {
            let z = -128i8;
            let lane = [
                k,
                z,
                k,
                z,
                4 + k,
                z,
                4 + k,
                z,
                8 + k,
                z,
                8 + k,
                z,
                12 + k,
                z,
                12 + k,
                z,
            ];
            let v = _mm_loadu_si128(lane.as_ptr().cast());
            _mm256_broadcastsi128_si256(v)
        };
        let pick = [mk(0), mk(1), mk(2), mk(3)];
        // vpshufb patterns: byte k of each row's dword as an i32 (VNNI forms).
        let mk32 = |k: i8| {
            let z = -128i8;
            let lane = [k, z, z, z, 4 + k, z, z, z, 8 + k, z, z, z, 12 + k, z, z, z];
            let v = _mm_loadu_si128(lane.as_ptr().cast());
            _mm256_broadcastsi128_si256(v)
        };
        let pick32 = [mk32(0), mk32(1), mk32(2), mk32(3)];
        let zero = _mm256_setzero_si256();
        let mut acc = [[_mm_setzero_ps(); T]; G];
        for b in 0..nb {
            let sb = w.map(|wg| wg.as_ptr().add(b * bb));
            let mut scb = [[zero; 2]; G];
            let mut mins = [[zero; 2]; G];
            for g in 0..G {
                prefetch_ahead(sb[g], bb);
                // Scales and mins: rows as dwords, sub-blocks as bytes.
                let r0 = _mm_loadu_si128(sb[g].add(Q4KX4_SCALES_AT).cast());
                let r1 = _mm_loadu_si128(sb[g].add(Q4KX4_SCALES_AT + 16).cast());
                let r2 = _mm_loadu_si128(sb[g].add(Q4KX4_SCALES_AT + 32).cast());
                let sc_lo = _mm_and_si128(r0, m3f);
                let mn_lo = _mm_and_si128(r1, m3f);
                // (q >> 6) << 4 per byte is (word >> 2) & 0x30.
                let sc_hi = _mm_or_si128(
                    _mm_and_si128(r2, m0f128),
                    _mm_and_si128(_mm_srli_epi16(r0, 2), m30),
                );
                let mn_hi = _mm_or_si128(
                    _mm_and_si128(_mm_srli_epi16(r2, 4), m0f128),
                    _mm_and_si128(_mm_srli_epi16(r1, 2), m30),
                );
                scb[g] = [
                    _mm256_broadcastsi128_si256(sc_lo),
                    _mm256_broadcastsi128_si256(sc_hi),
                ];
                mins[g] = [_mm256_cvtepu8_epi16(mn_lo), _mm256_cvtepu8_epi16(mn_hi)];
            }
            let mut sumi = [[zero; T]; G];
            for j in 0..4 {
                let mut slo = [[zero; T]; G];
                let mut shi = [[zero; T]; G];
                for (i, &ix) in idx.iter().enumerate() {
                    let mut lo = [zero; G];
                    let mut hi = [zero; G];
                    for g in 0..G {
                        let wv = _mm256_loadu_si256(sb[g].add(qs_at + 128 * j + 32 * i).cast());
                        lo[g] = _mm256_and_si256(wv, m0f);
                        hi[g] = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m0f);
                        if Q5 {
                            let qh = _mm256_loadu_si256(sb[g].add(Q5KX4_QH_AT + 32 * i).cast());
                            lo[g] = _mm256_or_si256(lo[g], bit_to_4(qh, 2 * j));
                            hi[g] = _mm256_or_si256(hi[g], bit_to_4(qh, 2 * j + 1));
                        }
                    }
                    for t in 0..T {
                        let (alo, ahi) = if TABLES {
                            // Blocks 2j and 2j + 1 of super-block b.
                            let k = t * nb * 8 + 8 * b + 2 * j;
                            (pt.get_unchecked(k)[i], pt.get_unchecked(k + 1)[i])
                        } else {
                            let a = qs.as_ptr().add(t * cols + QK_K * b + 64 * j);
                            let lo = _mm256_loadu_si256(a.cast());
                            let hi = _mm256_loadu_si256(a.add(QK).cast());
                            (
                                _mm256_permutevar8x32_epi32(lo, ix),
                                _mm256_permutevar8x32_epi32(hi, ix),
                            )
                        };
                        for g in 0..G {
                            let (sl, sh) = (&mut slo[g][t], &mut shi[g][t]);
                            if DOT == Dot::MADDUBS {
                                *sl = _mm256_add_epi16(*sl, _mm256_maddubs_epi16(lo[g], alo));
                                *sh = _mm256_add_epi16(*sh, _mm256_maddubs_epi16(hi[g], ahi));
                            } else if DOT == Dot::AVX_VNNI {
                                *sl = _mm256_dpbusd_avx_epi32(*sl, lo[g], alo);
                                *sh = _mm256_dpbusd_avx_epi32(*sh, hi[g], ahi);
                            } else {
                                *sl = _mm256_dpbusd_epi32(*sl, lo[g], alo);
                                *sh = _mm256_dpbusd_epi32(*sh, hi[g], ahi);
                            }
                        }
                    }
                }
                let (p0, p1) = if DOT == Dot::MADDUBS {
                    (pick[(2 * j) % 4], pick[(2 * j + 1) % 4])
                } else {
                    (pick32[(2 * j) % 4], pick32[(2 * j + 1) % 4])
                };
                for g in 0..G {
                    let sc0 = _mm256_shuffle_epi8(scb[g][j / 2], p0);
                    let sc1 = _mm256_shuffle_epi8(scb[g][j / 2], p1);
                    for t in 0..T {
                        let p = if DOT == Dot::MADDUBS {
                            _mm256_add_epi32(
                                _mm256_madd_epi16(slo[g][t], sc0),
                                _mm256_madd_epi16(shi[g][t], sc1),
                            )
                        } else {
                            _mm256_add_epi32(
                                _mm256_mullo_epi32(slo[g][t], sc0),
                                _mm256_mullo_epi32(shi[g][t], sc1),
                            )
                        };
                        sumi[g][t] = _mm256_add_epi32(sumi[g][t], p);
                    }
                }
            }
            for g in 0..G {
                let dw = _mm_cvtph_ps(_mm_loadl_epi64(sb[g].cast()));
                let dmw = _mm_cvtph_ps(_mm_loadl_epi64(sb[g].add(8).cast()));
                for t in 0..T {
                    // summ: mins of rows 0-3 (i16, 4 per row) times the sums.
                    let sp = s.as_ptr().add(t * nb * 8 + 8 * b);
                    let s_lo = _mm256_set1_epi64x(sp.cast::<i64>().read_unaligned());
                    let s_hi = _mm256_set1_epi64x(sp.add(4).cast::<i64>().read_unaligned());
                    let p = _mm256_add_epi32(
                        _mm256_madd_epi16(mins[g][0], s_lo),
                        _mm256_madd_epi16(mins[g][1], s_hi),
                    );
                    let h = _mm256_hadd_epi32(p, p);
                    let summ = _mm_unpacklo_epi64(
                        _mm256_castsi256_si128(h),
                        _mm256_extracti128_si256(h, 1),
                    );
                    let si = _mm_add_epi32(
                        _mm256_castsi256_si128(sumi[g][t]),
                        _mm256_extracti128_si256(sumi[g][t], 1),
                    );
                    let da = _mm_set1_ps(*d.get_unchecked(t * nb + b));
                    let dd = _mm_mul_ps(dw, da);
                    let dm = _mm_mul_ps(dmw, da);
                    let a = &mut acc[g][t];
                    *a = _mm_add_ps(*a, _mm_mul_ps(dd, _mm_cvtepi32_ps(si)));
                    *a = _mm_sub_ps(*a, _mm_mul_ps(dm, _mm_cvtepi32_ps(summ)));
                }
            }
        }
        for g in 0..G {
            for t in 0..T {
                _mm_storeu_ps(tiles[g][t].as_mut_ptr(), acc[g][t]);
            }
        }
    }
}

/// Bit `b` (0..8) of every byte of `v`, moved to bit 4 (0x10 or 0).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bit_to_4(v: __m256i, b: usize) -> __m256i {
    // A 16-bit shift by at most 4 keeps bit 4 of each byte coming from the
    // same byte.
    let s = match b {
        0 => _mm256_slli_epi16::<4>(v),
        1 => _mm256_slli_epi16::<3>(v),
        2 => _mm256_slli_epi16::<2>(v),
        3 => _mm256_slli_epi16::<1>(v),
        4 => v,
        5 => _mm256_srli_epi16::<1>(v),
        6 => _mm256_srli_epi16::<2>(v),
        _ => _mm256_srli_epi16::<3>(v),
    };
    _mm256_and_si256(s, _mm256_set1_epi8(0x10))
}
