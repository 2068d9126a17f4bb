//! GEMV and GEMM of Q5_0x4 / Q5_1x4 weights with Q8_0 activations: AVX2
//! tiles of 8 weight rows (two row groups, one row per lane) x up to 4
//! activation rows. The GEMV (one activation row, up to 12,288 columns) has
//! its own loop over one row group at a time (one sequential stream).
//! With its per-call activation tables, the GEMM's tile multiplies with
//! `vpdpbusd` when the token names AVX-VNNI (the same i32 sums); with
//! AVX512-VNNI the GEMM takes the 512-bit tile of `gemm_vnni.rs` (16 weight
//! rows, broadcast activations, no tables).

use super::gemm::{
    pattern_table, sum_table, table_rows_per_call, GEMM_EXPAND_BLOCKS, GEMV_MAX_BLOCKS,
};
use super::gemm_vnni::{
    self,
    avx512::{gemm_nib4, Nib4},
};
use super::{act_patterns, pair_rows, prefetch_ahead, sum_block_pairs, Avx2, Dot, Vnni};
use crate::generic;
use crate::layout::{
    Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE, Q5_1X4_BLOCK_BYTES, Q5_1X4_MINS,
    Q5_1X4_NIBBLES, Q5_1X4_PLANE, QK,
};
use crate::shape::{gemm_shape, GemmShape, ShapeError};
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Activation rows computed together against one pass over a weight tile.
const TILE_M: usize = 4;

forwarding_entry!(
    /// GEMV, Q5_0x4 weights x one Q8_0 activation row: [`gemm_q5_0x4_q8_0`]
    /// with `m = 1`; the same contract as [`generic::gemv_q5_0x4_q8_0`].
    q8_0 gemv gemv_q5_0x4_q8_0 (cpu: Avx2) => gemm_q5x4::<false>
);

forwarding_entry!(
    /// GEMV, Q5_1x4 weights x one Q8_0 activation row: [`gemm_q5_1x4_q8_0`]
    /// with `m = 1`; the same contract as [`generic::gemv_q5_1x4_q8_0`].
    q8_0 gemv gemv_q5_1x4_q8_0 (cpu: Avx2) => gemm_q5x4::<true>
);

forwarding_entry!(
    /// GEMM, Q5_0x4 weights x `m` Q8_0 activation rows: [`gemm_q5x4`] (the
    /// contract of [`generic::gemm_q5_0x4_q8_0`]).
    q8_0 gemm gemm_q5_0x4_q8_0 (cpu: Avx2) => gemm_q5x4::<false>
);

forwarding_entry!(
    /// GEMM, Q5_1x4 weights x `m` Q8_0 activation rows: [`gemm_q5x4`] (the
    /// contract of [`generic::gemm_q5_1x4_q8_0`]).
    q8_0 gemm gemm_q5_1x4_q8_0 (cpu: Avx2) => gemm_q5x4::<true>
);

/// GEMM of either layout (`Q51`: Q5_1x4 with 96-byte super-blocks, else
/// Q5_0x4 with 88) x `m` Q8_0 activation rows: `out[t][r] = W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
/// * `out`: `m x rows`, row-major.
///
/// Exact for every input bit pattern; the contract of the generic twins.
/// Empty shapes go to the generic code.
#[allow(clippy::too_many_arguments)]
fn gemm_q5x4<const Q51: bool>(
    _cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let block = if Q51 {
        Q5_1X4_BLOCK_BYTES
    } else {
        Q5_0X4_BLOCK_BYTES
    };
    let shape = gemm_shape(Q5X4_ROWS, block, w, rows, cols, act_qs, act_d, m, out)?;
    if shape.nb == 0 || rows == 0 || m == 0 {
        let generic = if Q51 {
            generic::gemm_q5_1x4_q8_0
        } else {
            generic::gemm_q5_0x4_q8_0
        };
        return generic(w, rows, cols, act_qs, act_d, m, out);
    }
    if m == 1 && shape.nb <= GEMV_MAX_BLOCKS {
        // SAFETY: `w` holds `groups` row groups of `nb` super-blocks of the
        // layout, `act_qs` `nb * 32` quants, `act_d` `nb` scales, `out`
        // `rows` floats (all checked by `gemm_shape` with m = 1); `nb` is
        // at most GEMV_MAX_BLOCKS; the token proves AVX2/FMA/F16C.
        unsafe {
            if shape.nb <= GEMV_EXPAND_BLOCKS {
                q5_gemv::<Q51, true>(w, rows, shape.groups, shape.nb, act_qs, act_d, out)
            } else {
                q5_gemv::<Q51, false>(w, rows, shape.groups, shape.nb, act_qs, act_d, out)
            }
        };
        return Ok(());
    }
    gemm_tiles::<Q51>(_cpu, w, rows, cols, act_qs, act_d, m, out, shape);
    Ok(())
}

/// The tiled GEMM of either layout (`Q51`: Q5_1x4, else Q5_0x4) for shapes
/// [`gemm_shape`] accepted with that layout's super-block size, `nb`,
/// `rows` and `m` all non-zero. Rows of up to [`GEMV_MAX_BLOCKS`] blocks go
/// in batches of [`table_rows_per_call`] activation rows, each forming its
/// rows' activation patterns and block sums once; wider rows form them in
/// the tile.
#[allow(clippy::too_many_arguments)]
fn gemm_tiles<const Q51: bool>(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
    shape: GemmShape,
) {
    let nb = shape.nb;
    if cpu.vnni() == Vnni::Avx512 && nb <= gemm_vnni::MAX_BLOCKS {
        // SAFETY: `gemm_shape` checked `w` (`groups` row groups of `nb`
        // super-blocks of the layout's size, rows <= 4 * groups), `act_qs`,
        // `act_d` and `out` for `m` rows; nb, rows, m >= 1 (the callers
        // checked); the token says AVX512-VNNI.
        unsafe {
            let tile = if Q51 {
                gemm_nib4::<{ Nib4::Q5_1 }>
            } else {
                gemm_nib4::<{ Nib4::Q5_0 }>
            };
            let values = &Nib4::NO_VALUES;
            tile(
                cpu,
                values,
                w,
                rows,
                shape.groups,
                nb,
                act_qs,
                act_d,
                m,
                out,
            )
        };
        return;
    }
    if nb > GEMV_MAX_BLOCKS {
        return tiles::<Q51, false>(cpu, w, rows, cols, act_qs, act_d, m, out, shape, (&[], &[]));
    }
    let max_rows = table_rows_per_call(nb);
    for t0 in (0..m).step_by(max_rows) {
        let t1 = (t0 + max_rows).min(m);
        let qs = &act_qs[t0 * cols..t1 * cols];
        // Every block's `vpermd` patterns and quant sum, formed once here
        // (not again for each pair of row groups).
        let blocks = (t1 - t0) * nb;
        let mut sums = [MaybeUninit::<i32>::uninit(); GEMM_EXPAND_BLOCKS];
        let mut patterns = [MaybeUninit::<[__m256i; 4]>::uninit(); GEMM_EXPAND_BLOCKS];
        let tables = (
            pattern_table(cpu, qs, blocks, &mut patterns),
            sum_table(cpu, qs, blocks, 1, &mut sums),
        );
        let d = &act_d[t0 * nb..t1 * nb];
        let out = &mut out[t0 * rows..t1 * rows];
        tiles::<Q51, true>(cpu, w, rows, cols, qs, d, t1 - t0, out, shape, tables);
    }
}

/// The activation patterns and quant sums of a batch's blocks (row `t`,
/// block `b` at `t * nb + b`), or empty slices when the tile forms them.
type Tables<'a> = (&'a [[__m256i; 4]], &'a [i32]);

/// Every pair of row groups against the `m` activation rows, in tiles of
/// up to [`TILE_M`] rows; `TABLES`: the tiles read `tables` (row `t0 + t`'s
/// entries from `(t0 + t) * nb`).
#[allow(clippy::too_many_arguments)]
fn tiles<const Q51: bool, const TABLES: bool>(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
    GemmShape { nb, groups }: GemmShape,
    (patterns, sums): Tables<'_>,
) {
    let block_bytes = if Q51 {
        Q5_1X4_BLOCK_BYTES
    } else {
        Q5_0X4_BLOCK_BYTES
    };
    let group_bytes = nb * block_bytes;
    // Row groups in pairs (8 rows per vector); an odd last group is paired
    // with itself and only its own rows are stored.
    for pair in 0..groups.div_ceil(2) {
        let ga = 2 * pair;
        let gb = (ga + 1).min(groups - 1);
        let wa = &w[ga * group_bytes..(ga + 1) * group_bytes];
        let wb = &w[gb * group_bytes..(gb + 1) * group_bytes];
        let mut t0 = 0;
        while t0 < m {
            let tm = (m - t0).min(TILE_M);
            let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
            let d = &act_d[t0 * nb..(t0 + tm) * nb];
            let t = if TABLES {
                (
                    &patterns[t0 * nb..(t0 + tm) * nb],
                    &sums[t0 * nb..(t0 + tm) * nb],
                )
            } else {
                (patterns, sums)
            };
            let mut res = [[0.0f32; 8]; TILE_M];
            // SAFETY: `wa` and `wb` are whole row groups (`nb` super-blocks of
            // the layout's 88 or 96 bytes, sliced above), `qs` holds `tm` rows
            // of `cols = nb * 32` quants, `d` `tm` rows of `nb` scales and,
            // with TABLES, `t` `tm` rows of `nb` patterns and sums (sliced
            // above), `res` holds `tm <= 4` rows of 8 floats; the token
            // proves AVX2/FMA/F16C and the VNNI form its `vnni()` names (the
            // VNNI tile is taken with tables only, as it requires; an
            // AVX512-VNNI token takes the 512-bit tile before this, and the
            // AVX2 one here).
            unsafe {
                match (if TABLES { cpu.vnni() } else { Vnni::No }, tm) {
                    (Vnni::Avx, 1) => q5x4_tile_avx_vnni::<1, Q51>(wa, wb, qs, d, t, nb, &mut res),
                    (Vnni::Avx, 2) => q5x4_tile_avx_vnni::<2, Q51>(wa, wb, qs, d, t, nb, &mut res),
                    (Vnni::Avx, 3) => q5x4_tile_avx_vnni::<3, Q51>(wa, wb, qs, d, t, nb, &mut res),
                    (Vnni::Avx, _) => q5x4_tile_avx_vnni::<4, Q51>(wa, wb, qs, d, t, nb, &mut res),
                    (_, 1) => q5x4_tile::<1, Q51, TABLES>(wa, wb, qs, d, t, nb, &mut res),
                    (_, 2) => q5x4_tile::<2, Q51, TABLES>(wa, wb, qs, d, t, nb, &mut res),
                    (_, 3) => q5x4_tile::<3, Q51, TABLES>(wa, wb, qs, d, t, nb, &mut res),
                    (_, _) => q5x4_tile::<4, Q51, TABLES>(wa, wb, qs, d, t, nb, &mut res),
                }
            }
            for (t, r) in res.iter().enumerate().take(tm) {
                let row0 = 2 * pair * Q5X4_ROWS;
                let n = rows.saturating_sub(row0).min(8);
                let o = (t0 + t) * rows + row0;
                out[o..o + n].copy_from_slice(&r[..n]);
            }
            t0 += tm;
        }
    }
}

/// The most blocks whose expanded activations (128 bytes per block) the
/// GEMV keeps: 8 KB, a quarter of a 32 KB L1 (past that the expansion
/// misses L1; the patterns are then formed in the loop).
const GEMV_EXPAND_BLOCKS: usize = 64;

/// The unsigned `q` (0..31) of one Q5_0x4 / Q5_1x4 super-block's 4 rows:
/// [low nibbles of chunks 0-1, low 2-3, high 0-1, high 2-3], each 128-bit
/// half 4 rows x 4 weights (the decoding of [`q5x4_tile`]).
///
/// # Safety
/// `p + nibbles .. p + nibbles + 64` and `p + plane .. p + plane + 16` must
/// be readable; the CPU must implement AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn decode_q(p: *const u8, nibbles: usize, plane: usize) -> [__m256i; 4] {
    // SAFETY: the three loads read the bytes the contract names (unaligned);
    // the CPU implements AVX2.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let b4 = _mm256_set1_epi8(0x10);
        let x0 = _mm256_loadu_si256(p.add(nibbles).cast());
        let x1 = _mm256_loadu_si256(p.add(nibbles + 32).cast());
        let h = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(plane).cast()));
        // Plane bit p to bit 4: [low half, high half] = p 0, 1 | 2, 3 (left),
        // 4, 5 | 6, 7 (right).
        let h0 = _mm256_sllv_epi32(h, _mm256_setr_epi32(4, 4, 4, 4, 3, 3, 3, 3));
        let h1 = _mm256_sllv_epi32(h, _mm256_setr_epi32(2, 2, 2, 2, 1, 1, 1, 1));
        let h2 = _mm256_srlv_epi32(h, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
        let h3 = _mm256_srlv_epi32(h, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3));
        [
            _mm256_or_si256(_mm256_and_si256(x0, m4), _mm256_andnot_si256(h0, b4)),
            _mm256_or_si256(_mm256_and_si256(x1, m4), _mm256_andnot_si256(h1, b4)),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(x0, 4), m4),
                _mm256_andnot_si256(h2, b4),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(x1, 4), m4),
                _mm256_andnot_si256(h3, b4),
            ),
        ]
    }
}

/// GEMV, Q5_0x4 (`Q51` false) or Q5_1x4 weights x one Q8_0 activation row,
/// one row group (4 rows) at a time, two super-blocks per iteration.
///
/// One group at a time keeps the weights one sequential stream (reading
/// four groups side by side read DRAM at about half the rate on long rows;
/// see the Q4_0x4 GEMV in `gemm.rs`). With `EXPAND` the activation row is
/// expanded once per call (per block, the four dword patterns the weight
/// registers need, `vpermd` as in [`q5x4_tile`]); without, the patterns
/// are formed in the loop (rows too long for the expansion to stay in L1).
/// `sum a` (i32) of every block is computed once per call. Per block the
/// [`decode_q`] registers, four `vpmaddubsw(q, a)` summed in i16 (|.| <=
/// 31,744) and `vpmaddwd` with ones; blocks `b` and `b + 1` fill the two
/// 128-bit halves, and the low half is added to the 4 row sums before the
/// high half, the reference's order. Q5_0x4 subtracts `16 sum a` in i32;
/// Q5_1x4 adds `asum * (m_w * d_a)` to the block's term, in the
/// reference's order.
///
/// # Safety
/// `w.len() >= groups * nb * B` (B = 88, Q5_1x4: 96), `qs.len() >= nb * 32`,
/// `d.len() >= nb`, `out.len() >= rows`, `rows <= groups * 4`, `1 <= nb <=
/// GEMV_MAX_BLOCKS` (`<= GEMV_EXPAND_BLOCKS` with `EXPAND`), and the CPU
/// must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_gemv<const Q51: bool, const EXPAND: bool>(
    w: &[u8],
    rows: usize,
    groups: usize,
    nb: usize,
    qs: &[i8],
    d: &[f32],
    out: &mut [f32],
) {
    let (bytes, nibbles, plane) = if Q51 {
        (Q5_1X4_BLOCK_BYTES, Q5_1X4_NIBBLES, Q5_1X4_PLANE)
    } else {
        (Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE)
    };
    // SAFETY: the pointer arithmetic and loads below stay inside `w`, `qs`,
    // `d` and `out` as sized by the function contract (`groups` row groups
    // of `nb` super-blocks, `nb` blocks of activations, `rows` outputs); the
    // CPU implements AVX2, FMA and F16C.
    unsafe {
        debug_assert!((1..=GEMV_MAX_BLOCKS).contains(&nb) && qs.len() >= nb * QK && d.len() >= nb);
        debug_assert!(!EXPAND || nb <= GEMV_EXPAND_BLOCKS);
        debug_assert!(w.len() >= groups * nb * bytes && rows <= groups * Q5X4_ROWS);
        // SAFETY: block b < nb of `qs` is bytes 32b..32b+32.
        let spread = |b: usize| act_patterns(qs.as_ptr().add(b * QK));
        // The expanded activations (with EXPAND) and the block sums: blocks
        // 0..nb are written here and only those are read below.
        let mut av = [core::mem::MaybeUninit::<[__m256i; 4]>::uninit(); GEMV_EXPAND_BLOCKS];
        let mut asum = [0i32; GEMV_MAX_BLOCKS];
        let ones8 = _mm256_set1_epi8(1);
        let ones16 = _mm256_set1_epi16(1);
        for b in 0..nb {
            let a = _mm256_loadu_si256(qs.as_ptr().add(b * QK).cast());
            if EXPAND {
                av[b].write(spread(b));
            }
            // sum(a) in i32: pairs with vpmaddubsw(1, a), then vpmaddwd.
            let s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones16);
            let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
            asum[b] = _mm_cvtsi128_si32(s);
        }
        // sum q a of one super-block at `p`: lanes 0-3 even chunks, 4-7 odd.
        let block_sum = |p: *const u8, a: &[__m256i; 4]| {
            // SAFETY: p is a super-block of a group (in bounds).
            let q = { decode_q(p, nibbles, plane) };
            let lo = _mm256_add_epi16(
                _mm256_maddubs_epi16(q[0], a[0]),
                _mm256_maddubs_epi16(q[1], a[1]),
            );
            let hi = _mm256_add_epi16(
                _mm256_maddubs_epi16(q[2], a[2]),
                _mm256_maddubs_epi16(q[3], a[3]),
            );
            _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones16)
        };
        let f16x8 = |pa: *const u8, pb: *const u8, at: usize| {
            // SAFETY: bytes at..at + 8 of both super-blocks are in bounds
            // (the scales, or Q5_1x4's minimums).
            let (x, y) = (
                _mm_loadl_epi64(pa.add(at).cast()),
                _mm_loadl_epi64(pb.add(at).cast()),
            );
            _mm256_cvtph_ps(_mm_unpacklo_epi64(x, y))
        };
        let group_bytes = nb * bytes;
        for g in 0..groups {
            let base = w.as_ptr().add(g * group_bytes);
            let acc = sum_block_pairs(nb, |b, b1| {
                let pa = base.add(b * bytes);
                let pb = base.add(b1 * bytes);
                prefetch_ahead(pa, 2 * bytes);
                // SAFETY (EXPAND): blocks b, b1 < nb were written above.
                let (ia, ib) = if EXPAND {
                    (
                        block_sum(pa, av[b].assume_init_ref()),
                        block_sum(pb, av[b1].assume_init_ref()),
                    )
                } else {
                    (block_sum(pa, &spread(b)), block_sum(pb, &spread(b1)))
                };
                // [block b rows, block b1 rows]: sum q a, exact i32.
                let isum = pair_rows(ia, ib);
                let da = _mm256_setr_m128(
                    _mm_set1_ps(*d.get_unchecked(b)),
                    _mm_set1_ps(*d.get_unchecked(b1)),
                );
                let s = _mm256_setr_m128i(_mm_set1_epi32(asum[b]), _mm_set1_epi32(asum[b1]));
                let sw = f16x8(pa, pb, 0);
                if Q51 {
                    let t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da));
                    let mw = f16x8(pa, pb, Q5_1X4_MINS);
                    let t2 = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(mw, da));
                    _mm256_add_ps(t1, t2)
                } else {
                    // sum (q - 16) a = sum q a - 16 sum a, exact.
                    let isum = _mm256_sub_epi32(isum, _mm256_slli_epi32::<4>(s));
                    _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da))
                }
            });
            let row0 = g * Q5X4_ROWS;
            let n = (rows - row0).min(Q5X4_ROWS);
            let mut r = [0.0f32; Q5X4_ROWS];
            _mm_storeu_ps(r.as_mut_ptr(), acc);
            out[row0..row0 + n].copy_from_slice(&r[..n]);
        }
    }
}

/// One Q5_0x4 (`Q51` false) or Q5_1x4 weight tile (row groups `wa` and
/// `wb`, 8 rows) against `T` activation rows: `res[t]` = the 4 rows of `wa`
/// then the 4 rows of `wb`.
///
/// Per super-block and group: the nibbles as in the Q4_0x4 tile (two
/// 32-byte loads, `and`/`srli`), and the fifth-bit plane broadcast to both
/// 128-bit halves: plane bit `p` of byte `4r + k` belongs to the weights of
/// chunk `p % 4`, low nibbles for `p < 4`, high ones otherwise. A per-half
/// `vpsllvd`/`vpsrlvd` brings each register's two plane bits to bit 4, and
/// `andnot` with 0x10 turns the inverted bit into `16 * fifth bit`: the
/// unsigned `q` (0..31) after an `or`. `vpmaddubsw(q, a)` pair sums fit i16
/// (|.| <= 2 * 31 * 128 = 7,936; four of them <= 31,744).
///
/// The activation block's `vpermd` patterns and its quant sum `sum a` come
/// from `tables` when `TABLES` (formed once per batch), else they are
/// formed here. Q5_0 without tables: the activation's `16 * (a + a')`
/// (`vpmaddubsw(16, a)`, four <= 16,384) is subtracted in i16: the
/// difference is `sum (q - 16) a` over the lane's 8 products (|.| <=
/// 16,384), exact because the true value fits and the adds wrap; with
/// tables, `16 * sum a` is subtracted from the row's i32 sum instead, the
/// same integer. Q5_1: `sum q a` as it is, and `sum a` (without tables:
/// `vpmaddubsw(1, a)`, `vpmaddwd`, a horizontal add), exact. `vpmaddwd`
/// with ones makes the sums i32; the two halves (even and odd chunks) are
/// added.
///
/// # Safety
/// `wa.len()` and `wb.len()` must be at least `nb` super-blocks (88 bytes,
/// Q5_1x4: 96), `qs.len()` at least `T * nb * 32`, `d.len()` at least `T *
/// nb`, with `TABLES` both `tables` slices at least `T * nb` long (row `t`,
/// block `b` at `t * nb + b`), `T <= 4`, and the CPU must implement AVX2,
/// FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5x4_tile<const T: usize, const Q51: bool, const TABLES: bool>(
    wa: &[u8],
    wb: &[u8],
    qs: &[i8],
    d: &[f32],
    tables: Tables<'_>,
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) {
    // SAFETY: the contract of this function is the body's, with `DOT` =
    // `vpmaddubsw`, which AVX2 implements.
    unsafe { q5x4_tile_body::<T, Q51, TABLES, { Dot::MADDUBS }>(wa, wb, qs, d, tables, nb, res) }
}

// [`q5x4_tile`] with tables, its byte products summed by the AVX-VNNI
// `vpdpbusd`: the same i32 sums, so the same results.
vnni_forms!(avx: q5x4_tile_avx_vnni<const T: usize, const Q51: bool>(
    wa: &[u8],
    wb: &[u8],
    qs: &[i8],
    d: &[f32],
    tables: Tables<'_>,
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) => q5x4_tile_body::<T, Q51, true, DOT>);

/// The body of the two tiles, inlined into each so that it is compiled
/// with its caller's features (`DOT`: [`Dot::MADDUBS`] or [`Dot::AVX_VNNI`],
/// then `TABLES` must be true).
///
/// # Safety
/// As [`q5x4_tile`], and the CPU must implement the `DOT` form.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn q5x4_tile_body<const T: usize, const Q51: bool, const TABLES: bool, const DOT: u8>(
    wa: &[u8],
    wb: &[u8],
    qs: &[i8],
    d: &[f32],
    (patterns, sums): Tables<'_>,
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) {
    const { assert!(DOT == Dot::MADDUBS || (DOT == Dot::AVX_VNNI && TABLES)) };
    let (bytes, nibbles, plane) = if Q51 {
        (Q5_1X4_BLOCK_BYTES, Q5_1X4_NIBBLES, Q5_1X4_PLANE)
    } else {
        (Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE)
    };
    // SAFETY: the loads below read the `nb` super-blocks of `wa`/`wb` and `T`
    // rows of `nb` blocks of `qs`, `d` and (with TABLES) `patterns` and
    // `sums`, all inside the slices per the function contract; the CPU
    // implements AVX2, FMA and F16C.
    unsafe {
        debug_assert!(T <= TILE_M && wa.len() >= nb * bytes && wb.len() >= nb * bytes);
        debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb);
        let cols = nb * QK;
        let b4 = _mm256_set1_epi8(0x10);
        let ones8 = _mm256_set1_epi8(1);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let pa = wa.as_ptr().add(b * bytes);
            let pb = wb.as_ptr().add(b * bytes);
            // Prefetch the bytes after `wb` (the next pair of row groups) at the
            // rate this pair is read. A prefetch never faults, and
            // `wrapping_add` keeps the address arithmetic defined.
            let pf = wb.as_ptr().wrapping_add(nb * bytes + 2 * b * bytes);
            _mm_prefetch::<_MM_HINT_T0>(pf.cast());
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64).cast());
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(128).cast());
            // Unsigned q, per group: [lo chunks 0-1, lo chunks 2-3, hi 0-1, hi 2-3].
            // SAFETY: pa and pb are super-blocks inside `wa` and `wb`.
            let (qa, qb) = { (decode_q(pa, nibbles, plane), decode_q(pb, nibbles, plane)) };
            // Scales (and Q5_1's minimums) of the 8 rows: 4 f16 of group a,
            // then 4 of group b.
            let f16x8 = |at: usize| {
                // SAFETY: bytes at..at + 8 of both super-blocks are in bounds
                // (at is 0, or the minimums' offset 8 of a 96-byte Q5_1x4
                // super-block).
                let (x, y) = {
                    (
                        _mm_loadl_epi64(pa.add(at).cast()),
                        _mm_loadl_epi64(pb.add(at).cast()),
                    )
                };
                _mm256_cvtph_ps(_mm_unpacklo_epi64(x, y))
            };
            let sw = f16x8(0);
            let mw = if Q51 { f16x8(Q5_1X4_MINS) } else { sw };
            for (t, acc_t) in acc.iter_mut().enumerate() {
                let at = qs.as_ptr().add(t * cols + b * QK);
                let av = if TABLES {
                    *patterns.get_unchecked(t * nb + b)
                } else {
                    act_patterns(at)
                };
                let dot16 = |n: &[__m256i; 4]| {
                    _mm256_add_epi16(
                        _mm256_add_epi16(
                            _mm256_maddubs_epi16(n[0], av[0]),
                            _mm256_maddubs_epi16(n[1], av[1]),
                        ),
                        _mm256_add_epi16(
                            _mm256_maddubs_epi16(n[2], av[2]),
                            _mm256_maddubs_epi16(n[3], av[3]),
                        ),
                    )
                };
                // sum q a per dword (row and 4-weight chunk, the 4 registers
                // summed) with `vpdpbusd`: the i32 that the i16 path below
                // forms (its i16 sums are exact, see above).
                let dot32 = |n: &[__m256i; 4]| {
                    let mut s = _mm256_setzero_si256();
                    for k in 0..4 {
                        s = _mm256_dpbusd_avx_epi32(s, n[k], av[k]);
                    }
                    s
                };
                let (ia, ib) = if DOT != Dot::MADDUBS {
                    (dot32(&qa), dot32(&qb))
                } else {
                    let (sa, sb) = if Q51 || TABLES {
                        (dot16(&qa), dot16(&qb))
                    } else {
                        // 16 * (a + a') per i16 lane, the lanes of dot16.
                        let corr = dot16(&[b4; 4]);
                        (
                            _mm256_sub_epi16(dot16(&qa), corr),
                            _mm256_sub_epi16(dot16(&qb), corr),
                        )
                    };
                    (_mm256_madd_epi16(sa, ones), _mm256_madd_epi16(sb, ones))
                };
                // [a even chunks + a odd chunks, b even + b odd]: exact i32.
                let isum = _mm256_add_epi32(
                    _mm256_permute2x128_si256(ia, ib, 0x20),
                    _mm256_permute2x128_si256(ia, ib, 0x31),
                );
                let isum = if TABLES && !Q51 {
                    let sum_a = *sums.get_unchecked(t * nb + b);
                    _mm256_sub_epi32(isum, _mm256_set1_epi32(16 * sum_a))
                } else {
                    isum
                };
                let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da));
                let v = if Q51 {
                    // sum a, in every lane.
                    let s = if TABLES {
                        _mm256_set1_epi32(*sums.get_unchecked(t * nb + b))
                    } else {
                        let a = _mm256_loadu_si256(at.cast());
                        let s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones);
                        let s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 0x01));
                        let s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0b01_00_11_10));
                        _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0b10_11_00_01))
                    };
                    let m = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(mw, da));
                    _mm256_add_ps(v, m)
                } else {
                    v
                };
                *acc_t = _mm256_add_ps(*acc_t, v);
            }
        }
        for (r, a) in res.iter_mut().zip(acc) {
            _mm256_storeu_ps(r.as_mut_ptr(), a);
        }
    }
}
