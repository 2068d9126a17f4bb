//! GEMV and GEMM of Q4_0x4 / Q8_0x8 weights with Q8_0 activations: AVX2
//! tiles of 8 weight rows (one per lane) x up to 4 activation rows, and
//! the VNNI tiles of [`super::gemm_vnni`] when the token has a VNNI form.
//! The GEMV is the GEMM with one activation row (its own loop, one row
//! group at a time, when the row has at most 12,288 columns).

use super::{
    act_patterns, block_sum, gemm_vnni, pair_rows16, prefetch_ahead, prefetch_next_pair,
    sum_block_pairs, Avx2, Vnni,
};
use crate::generic;
use crate::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS, Q8X8_BLOCK_BYTES, Q8X8_ROWS, QK};
use crate::shape::{gemm_shape, GemmShape, ShapeError};
use core::arch::asm;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Activation rows computed together against one pass over a weight tile.
const TILE_M: usize = 4;

forwarding_entry!(
    /// GEMV, Q4_0x4 weights x one Q8_0 activation row: [`gemm_q4_0x4_q8_0`]
    /// with `m = 1`; the same contract as [`generic::gemv_q4_0x4_q8_0`].
    q8_0 gemv gemv_q4_0x4_q8_0 (cpu: Avx2) => gemm_q4_0x4_q8_0
);

forwarding_entry!(
    /// GEMV, Q8_0x8 weights x one Q8_0 activation row: [`gemm_q8_0x8_q8_0`]
    /// with `m = 1`; the same contract as [`generic::gemv_q8_0x8_q8_0`].
    q8_0 gemv gemv_q8_0x8_q8_0 (cpu: Avx2) => gemm_q8_0x8_q8_0
);

/// GEMM, Q4_0x4 weights x `m` Q8_0 activation rows: `out[t][r] = W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 72-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
/// * `out`: `m x rows`, row-major.
///
/// Exact for every input bit pattern; the same contract as
/// [`generic::gemm_q4_0x4_q8_0`]. Rows wider than 12,288 columns in a batch
/// and empty shapes go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q4_0x4_q8_0(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let GemmShape { nb, groups } = gemm_shape(
        Q4X4_ROWS,
        Q4X4_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    )?;
    if nb == 0 || rows == 0 || m == 0 {
        return generic::gemm_q4_0x4_q8_0(w, rows, cols, act_qs, act_d, m, out);
    }
    if m == 1 && nb <= GEMV_MAX_BLOCKS {
        // SAFETY: `w` holds `groups` row groups of `nb` 72-byte super-blocks,
        // `act_qs` `nb * 32` quants, `act_d` `nb` scales, `out` `rows`
        // floats (all checked by `gemm_shape` with m = 1); `nb` is at most
        // GEMV_MAX_BLOCKS; the token proves AVX2/FMA/F16C.
        unsafe {
            if nb <= GEMV_EXPAND_BLOCKS {
                q4x4_gemv::<true>(w, rows, groups, nb, act_qs, act_d, out)
            } else {
                q4x4_gemv::<false>(w, rows, groups, nb, act_qs, act_d, out)
            }
        };
        return Ok(());
    }
    if cpu.has_vnni() && nb <= gemm_vnni::MAX_BLOCKS {
        // SAFETY: `gemm_shape` checked `w` (`groups` row groups of `nb`
        // super-blocks, rows <= 4 * groups), `act_qs`, `act_d` and `out` for
        // `m` rows; nb, rows, m >= 1 (checked above); the token says which VNNI.
        unsafe {
            match cpu.vnni() {
                Vnni::Avx => {
                    gemm_vnni::avx::gemm_q4_0x4(cpu, w, rows, groups, nb, act_qs, act_d, m, out)
                }
                _ => {
                    use gemm_vnni::avx512::{gemm_nib4, Nib4};
                    let values = &Nib4::NO_VALUES;
                    gemm_nib4::<{ Nib4::Q4_0 }>(
                        cpu, values, w, rows, groups, nb, act_qs, act_d, m, out,
                    )
                }
            }
        };
        return Ok(());
    }
    if nb > GEMV_MAX_BLOCKS {
        // Wider than the tables: no vector code.
        return generic::gemm_q4_0x4_q8_0(w, rows, cols, act_qs, act_d, m, out);
    }
    let max_rows = table_rows_per_call(nb);
    if m > max_rows {
        // Batches of `max_rows` tokens (the block-sum and pattern tables'
        // sizes).
        return (0..m).step_by(max_rows).try_for_each(|t0| {
            let t1 = (t0 + max_rows).min(m);
            gemm_q4_0x4_q8_0(
                cpu,
                w,
                rows,
                cols,
                &act_qs[t0 * cols..t1 * cols],
                &act_d[t0 * nb..t1 * nb],
                t1 - t0,
                &mut out[t0 * rows..t1 * rows],
            )
        });
    }
    // m <= table_rows_per_call(nb) and nb <= 384 (above): the tables below hold
    // every block. Checked, since the slices made from them rely on it.
    assert!(m * nb <= GEMM_EXPAND_BLOCKS);
    // `-8 * sum(a)` of every activation block and its patterns (4 `vpermd`
    // each), once per call (the tiles add the sum in i32 instead of forming
    // it per row pair, and read the patterns instead of forming them again
    // for every pair of row groups).
    let blocks = m * nb;
    let mut neg_corr = [MaybeUninit::<i32>::uninit(); GEMM_EXPAND_BLOCKS];
    let neg_corr = sum_table(cpu, act_qs, blocks, -8, &mut neg_corr);
    let mut patterns = [MaybeUninit::<[__m256i; 4]>::uninit(); GEMM_EXPAND_BLOCKS];
    let patterns = pattern_table(cpu, act_qs, blocks, &mut patterns);
    let group_bytes = nb * Q4X4_BLOCK_BYTES;
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
            let d = &act_d[t0 * nb..(t0 + tm) * nb];
            let c = &neg_corr[t0 * nb..(t0 + tm) * nb];
            let pt = &patterns[t0 * nb..(t0 + tm) * nb];
            let mut res = [[0.0f32; 8]; TILE_M];
            // SAFETY: `wa` and `wb` are whole row groups (`nb` >= 1
            // super-blocks of 72 bytes each, sliced above), `pt`, `d` and `c`
            // hold `tm` rows of `nb` values (sliced above), `res` holds `tm
            // <= 4` rows of 8 floats; the token proves AVX2/FMA/F16C.
            unsafe { q4_tile(tm)(wa, wb, pt, d, c, nb, &mut res) }
            for (t, r) in res.iter().enumerate().take(tm) {
                let row0 = 2 * pair * Q4X4_ROWS;
                let n = rows.saturating_sub(row0).min(8);
                let o = (t0 + t) * rows + row0;
                out[o..o + n].copy_from_slice(&r[..n]);
            }
            t0 += tm;
        }
    }
    Ok(())
}

/// `factor * sum a` of each of the first `blocks` 32-quant blocks of `qs`,
/// written to the front of `table` and returned (the GEMMs' per-call block
/// sums). Panics unless `qs` and `table` hold `blocks` blocks.
pub(crate) fn sum_table<'t>(
    _cpu: Avx2,
    qs: &[i8],
    blocks: usize,
    factor: i32,
    table: &'t mut [MaybeUninit<i32>],
) -> &'t [i32] {
    assert!(qs.len() >= blocks * QK && table.len() >= blocks);
    for (i, c) in table.iter_mut().enumerate().take(blocks) {
        // SAFETY: block i < blocks of `qs` is bytes 32i..32i+32, inside `qs`
        // (asserted); the token proves AVX2.
        c.write(factor * unsafe { block_sum(qs.as_ptr().add(i * QK)) });
    }
    // SAFETY: entries 0..blocks were written just above; MaybeUninit<i32>
    // has the layout of i32.
    unsafe { core::slice::from_raw_parts(table.as_ptr().cast(), blocks) }
}

/// The [`act_patterns`] of each of the first `blocks` 32-quant blocks of
/// `qs`, written to the front of `table` and returned (the GEMMs' per-call
/// pattern tables). Panics unless `qs` and `table` hold `blocks` blocks.
pub(crate) fn pattern_table<'t>(
    _cpu: Avx2,
    qs: &[i8],
    blocks: usize,
    table: &'t mut [MaybeUninit<[__m256i; 4]>],
) -> &'t [[__m256i; 4]] {
    assert!(qs.len() >= blocks * QK && table.len() >= blocks);
    for (i, p) in table.iter_mut().enumerate().take(blocks) {
        // SAFETY: block i < blocks of `qs` is bytes 32i..32i+32, inside `qs`
        // (asserted); the token proves AVX2.
        p.write(unsafe { act_patterns(qs.as_ptr().add(i * QK)) });
    }
    // SAFETY: entries 0..blocks were written just above; MaybeUninit<T> has
    // the layout of T.
    unsafe { core::slice::from_raw_parts(table.as_ptr().cast(), blocks) }
}

/// The activation blocks (rows x blocks of 32 per row) whose patterns and
/// sums one call of a tiled GEMM (Q4_0x4, Q5_0x4 / Q5_1x4, Q4_Kx4 /
/// Q5_Kx4) forms, at most: one tile of the widest rows the tables take (4 x
/// 384 blocks, 12,288 columns); 192 KB of patterns on the stack.
pub(crate) const GEMM_EXPAND_BLOCKS: usize = TILE_M * GEMV_MAX_BLOCKS;

/// The activation blocks a call forms when its rows allow more than one
/// tile: 128 KB of patterns, L2-resident (4 rows of 8,192 columns).
const GEMM_CALL_BLOCKS: usize = 1024;

/// Activation rows per call of a GEMM with per-call tables (Q4_0x4, Q5, K)
/// for rows of `nb` (<= 384) blocks of 32: as many whole tiles as GEMM_CALL_BLOCKS holds, at least
/// one, at most GEMM_MAX_ROWS, so a prefill batch is split into calls that
/// each form their patterns once (within GEMM_EXPAND_BLOCKS). Splitting
/// rereads the weights once per call (from L2/L3: a thread's share of one
/// matrix), which costs less than the permutes it saves (`kestrel bench
/// --rows 896 --cols 4864`, M=32).
pub(crate) fn table_rows_per_call(nb: usize) -> usize {
    (GEMM_CALL_BLOCKS / nb.max(1) / TILE_M * TILE_M).clamp(TILE_M, GEMM_MAX_ROWS)
}

/// The most activation rows the tiled Q4_0x4 GEMM takes in one call (the
/// engine's largest batch).
const GEMM_MAX_ROWS: usize = 64;

/// The most 32-column blocks the GEMV's expanded activation row holds
/// (12,288 columns; wider rows take the tiled path).
pub(crate) const GEMV_MAX_BLOCKS: usize = 384;
/// The most blocks whose expanded activations (128 bytes per block) the
/// GEMV keeps: 8 KB, a quarter of a 32 KB L1. Past that the expansion
/// misses L1 on every load (`--rows 16384 --cols 8960`: 10 GB/s against
/// 20+ with the patterns formed in the loop).
const GEMV_EXPAND_BLOCKS: usize = 64;

/// GEMV, Q4_0x4 weights x one Q8_0 activation row, one row group (4 rows)
/// at a time, two super-blocks per iteration.
///
/// One group at a time keeps the weights one sequential stream: reading
/// four groups side by side (as an earlier version did, 16 rows per
/// iteration) read DRAM at half the rate on long rows (`kestrel bench
/// --rows 16384 --cols 8960 -t 1`: 13.8 GB/s against 25 GB/s for one
/// stream, AMD EPYC, 2026-12-01). The stream is prefetched
/// [`super::PREFETCH_AHEAD`] bytes ahead: on an Intel Xeon VM the hardware
/// prefetcher alone held it at 12 GB/s (19-20 with it, 2026-12-02).
///
/// The activation row is expanded once per call: per block, the four
/// dword patterns each 32-byte weight load needs (`vpermd`, as in
/// [`q4x4_tile_avx2`]) and `8 * sum(a)`. The inner loop then reads only weights:
/// `sum (n - 8) a = sum n a - 8 sum a` is formed exactly in i32 after the
/// `vpmaddubsw`/`vpmaddwd` sums (|sum n a| <= 32 * 15 * 127 per row, no i16
/// lane exceeds 4 * 2 * 15 * 127 = 15,240). Blocks `b` and `b + 1` fill the
/// two 128-bit halves; the low half is added to the 4 row sums before the
/// high half, the reference's order.
///
/// # Safety
/// `w.len() >= groups * nb * 72`, `qs.len() >= nb * 32`, `d.len() >= nb`,
/// `out.len() >= rows`, `rows <= groups * 4`, `1 <= nb <= GEMV_MAX_BLOCKS`,
/// and the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4x4_gemv<const EXPAND: bool>(
    w: &[u8],
    rows: usize,
    groups: usize,
    nb: usize,
    qs: &[i8],
    d: &[f32],
    out: &mut [f32],
) {
    // SAFETY: the pointer arithmetic and loads below stay inside `w`, `qs`,
    // `d` and `out` as sized by the function contract (`groups` row groups
    // of `nb` 72-byte super-blocks, `nb` blocks of activations, `rows`
    // outputs); the CPU implements AVX2, FMA and F16C.
    unsafe {
        debug_assert!((1..=GEMV_MAX_BLOCKS).contains(&nb) && qs.len() >= nb * QK && d.len() >= nb);
        debug_assert!(w.len() >= groups * nb * Q4X4_BLOCK_BYTES && rows <= groups * Q4X4_ROWS);
        // The expanded activations: blocks 0..nb of `av` and `corr` are written
        // here and only those are read below.
        let mut av = [core::mem::MaybeUninit::<[__m256i; 4]>::uninit(); GEMV_MAX_BLOCKS];
        let mut corr = [0i32; GEMV_MAX_BLOCKS];
        let ones8 = _mm256_set1_epi8(1);
        let ones16 = _mm256_set1_epi16(1);
        // SAFETY: block b < nb of `qs` is bytes 32b..32b+32.
        let spread = |b: usize| act_patterns(qs.as_ptr().add(b * QK));
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
            corr[b] = 8 * _mm_cvtsi128_si32(s);
        }
        let m4 = _mm256_set1_epi8(0x0F);
        let x88 = _mm256_set1_epi8(0x88u8 as i8);
        let group_bytes = nb * Q4X4_BLOCK_BYTES;
        // sum n a of one super-block at `p` against the expanded block `a`,
        // per i16 lane pair: dwords 0-3 even chunks, 4-7 odd chunks.
        let block_sum = |p: *const u8, a: &[__m256i; 4]| {
            // SAFETY: p + 8 .. p + 72 is one super-block of a group.
            let (x0, x1) = (
                _mm256_xor_si256(_mm256_loadu_si256(p.add(8).cast()), x88),
                _mm256_xor_si256(_mm256_loadu_si256(p.add(40).cast()), x88),
            );
            let lo = _mm256_add_epi16(
                _mm256_maddubs_epi16(_mm256_and_si256(x0, m4), a[0]),
                _mm256_maddubs_epi16(_mm256_and_si256(x1, m4), a[1]),
            );
            let hi = _mm256_add_epi16(
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(x0, 4), m4), a[2]),
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(x1, 4), m4), a[3]),
            );
            _mm256_add_epi16(lo, hi)
        };
        for g in 0..groups {
            let base = w.as_ptr().add(g * group_bytes);
            let acc = sum_block_pairs(nb, |b, b1| {
                let pa = base.add(b * Q4X4_BLOCK_BYTES);
                let pb = base.add(b1 * Q4X4_BLOCK_BYTES);
                prefetch_ahead(pa, 2 * Q4X4_BLOCK_BYTES);
                // SAFETY: blocks b, b1 < nb were written above.
                let (ia, ib) = if EXPAND {
                    (
                        block_sum(pa, av[b].assume_init_ref()),
                        block_sum(pb, av[b1].assume_init_ref()),
                    )
                } else {
                    (block_sum(pa, &spread(b)), block_sum(pb, &spread(b1)))
                };
                // [block b rows, block b1 rows]: sum n a, exact i32, then
                // - 8 sum a of each block.
                let c = _mm256_setr_m128i(_mm_set1_epi32(corr[b]), _mm_set1_epi32(corr[b1]));
                let isum = _mm256_sub_epi32(pair_rows16(ia, ib), c);
                let sw = _mm256_cvtph_ps(_mm_unpacklo_epi64(
                    _mm_loadl_epi64(pa.cast()),
                    _mm_loadl_epi64(pb.cast()),
                ));
                let da = _mm256_setr_m128(
                    _mm_set1_ps(*d.get_unchecked(b)),
                    _mm_set1_ps(*d.get_unchecked(b1)),
                );
                _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da))
            });
            let row0 = g * Q4X4_ROWS;
            let n = (rows - row0).min(Q4X4_ROWS);
            let mut r = [0.0f32; Q4X4_ROWS];
            _mm_storeu_ps(r.as_mut_ptr(), acc);
            out[row0..row0 + n].copy_from_slice(&r[..n]);
        }
    }
}

/// One Q4_0x4 weight tile (row groups `wa` and `wb`, 8 rows) against `T`
/// activation rows: `res[t]` = the 4 rows of `wa` then the 4 rows of `wb`.
///
/// Per super-block and group: two 32-byte loads (chunks 0-1 and 2-3), the
/// XOR 0x88 undone, nibbles `n` (0..15) split out with `and`/`srli`, and
/// the exact i32 products with the activation dwords each chunk needs
/// (`vpermd`: `patterns`, row `t` and block `b` at `t * nb + b`, formed
/// once per call by [`act_patterns`]), summed per i16 lane by
/// [`dot4_avx2`]; [`pair_rows16`] adds the two 128-bit halves (even and odd
/// chunks) and widens to i32, and `sum (n - 8) a = sum n a - 8 sum a` adds
/// `neg_corr` (`-8 sum a` per token and block, computed once per call) in
/// i32: exact.
///
/// # Safety
/// `wa.len()` and `wb.len()` must be at least `nb * 72`, `patterns.len()`,
/// `d.len()` and `neg_corr.len()` at least `T * nb`, `T <= 4`, and the CPU
/// must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4x4_tile_avx2<const T: usize>(
    wa: &[u8],
    wb: &[u8],
    patterns: &[[__m256i; 4]],
    d: &[f32],
    neg_corr: &[i32],
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) {
    // SAFETY: the loads below read the `nb` super-blocks of `wa`/`wb` and `T`
    // rows of `nb` entries of `patterns`, `d` and `neg_corr`, all inside the
    // slices per the function contract; the CPU implements AVX2, FMA and
    // F16C.
    unsafe {
        debug_assert!(T <= TILE_M && wa.len() >= nb * 72 && wb.len() >= nb * 72);
        debug_assert!(patterns.len() >= T * nb && d.len() >= T * nb && neg_corr.len() >= T * nb);
        let m4 = _mm256_set1_epi8(0x0F);
        let x88 = _mm256_set1_epi8(0x88u8 as i8);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let pa = wa.as_ptr().add(b * Q4X4_BLOCK_BYTES);
            let pb = wb.as_ptr().add(b * Q4X4_BLOCK_BYTES);
            prefetch_next_pair(wb, nb, b);
            // Nibbles, per group: [lo chunks 0-1, lo chunks 2-3, hi 0-1, hi 2-3].
            let nib = |p: *const u8| {
                // SAFETY: p points to a 72-byte super-block (caller's contract):
                // bytes 8..40 and 40..72 are in bounds; unaligned loads.
                let (x0, x1) = {
                    (
                        _mm256_xor_si256(_mm256_loadu_si256(p.add(8).cast()), x88),
                        _mm256_xor_si256(_mm256_loadu_si256(p.add(40).cast()), x88),
                    )
                };
                [
                    _mm256_and_si256(x0, m4),
                    _mm256_and_si256(x1, m4),
                    _mm256_and_si256(_mm256_srli_epi16(x0, 4), m4),
                    _mm256_and_si256(_mm256_srli_epi16(x1, 4), m4),
                ]
            };
            let na = nib(pa);
            let nbb = nib(pb);
            // Scales of the 8 rows: 4 f16 of group a, then 4 of group b.
            let sw = _mm256_cvtph_ps(_mm_unpacklo_epi64(
                _mm_loadl_epi64(pa.cast()),
                _mm_loadl_epi64(pb.cast()),
            ));
            for (t, acc_t) in acc.iter_mut().enumerate() {
                let av = *patterns.get_unchecked(t * nb + b);
                // [rows of a, rows of b]: sum n a, exact i32; then - 8 sum a.
                let isum = _mm256_add_epi32(
                    pair_rows16(dot4_avx2(&na, &av), dot4_avx2(&nbb, &av)),
                    _mm256_set1_epi32(*neg_corr.get_unchecked(t * nb + b)),
                );
                let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                let scale = _mm256_mul_ps(sw, da);
                let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale);
                *acc_t = _mm256_add_ps(*acc_t, v);
            }
        }
        for (r, a) in res.iter_mut().zip(acc) {
            _mm256_storeu_ps(r.as_mut_ptr(), a);
        }
    }
}

/// Per 16-bit lane, the sum of the 8 products `n[k] * a[k]` (2 bytes of
/// each register pair): unsigned nibbles (0..15) times signed quants, exact.
/// `vpmaddubsw` pair sums, four added, fit i16 (|.| <= 4 * 2 * 15 * 128 =
/// 15,360).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot4_avx2(n: &[__m256i; 4], a: &[__m256i; 4]) -> __m256i {
    _mm256_add_epi16(
        _mm256_add_epi16(
            _mm256_maddubs_epi16(n[0], a[0]),
            _mm256_maddubs_epi16(n[1], a[1]),
        ),
        _mm256_add_epi16(
            _mm256_maddubs_epi16(n[2], a[2]),
            _mm256_maddubs_epi16(n[3], a[3]),
        ),
    )
}

/// The frame both `asm!` tiles share: the 4 activation rows' float sums
/// live in ymm8-11, zeroed before `$body` (the loop, prefetches included)
/// and stored to `$res` after it; every vector register is clobbered;
/// `$ops` are the loop's operands (a trailing comma after the last). The
/// block reads memory only, and leaves the stack alone.
macro_rules! tile4_asm {
    ($res:expr, [$($body:expr),* $(,)?], $($ops:tt)*) => {{
        let (acc0, acc1, acc2, acc3): (__m256, __m256, __m256, __m256);
        asm!(
            "vxorps ymm8, ymm8, ymm8",
            "vxorps ymm9, ymm9, ymm9",
            "vxorps ymm10, ymm10, ymm10",
            "vxorps ymm11, ymm11, ymm11",
            $($body,)*
            $($ops)*
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
            out("ymm8") acc0, out("ymm9") acc1, out("ymm10") acc2, out("ymm11") acc3,
            out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
            options(nostack, readonly),
        );
        for (r, a) in $res.iter_mut().zip([acc0, acc1, acc2, acc3]) {
            _mm256_storeu_ps(r.as_mut_ptr(), a);
        }
    }};
}

/// `x88`, `0x0F` and the 16-bit ones: the constants of [`q4x4_tile4_asm`]
/// (memory operands, so that no register holds them), and the ones of
/// [`q8x8_tile4_asm`] (field 2, 32-byte aligned).
#[repr(C, align(32))]
struct TileConsts([u8; 32], [u8; 32], [i16; 16]);
static TILE_CONSTS: TileConsts = TileConsts([0x88; 32], [0x0F; 32], [1; 16]);

/// One activation row's step of [`q4x4_tile4_asm`]: the 8 `vpmaddubsw` of
/// both groups' nibbles (ymm0-3, ymm4-7) against the row's 4 patterns at
/// `[$pat]`, [`pair_rows16`]'s blend, permute, add and `vpmaddwd`, the
/// `-8 sum a` at `[$nc]`, then the reference's float steps with the row's
/// scale at `[$d]`: `acc += cvt(isum) * (sw * da)` into `$acc`.
#[rustfmt::skip]
macro_rules! q4_tile_row {
    ($pat:literal, $nc:literal, $d:literal, $acc:literal) => {
        concat!(
            "vpmaddubsw ymm13, ymm0, ymmword ptr [", $pat, "]\n",
            "vpmaddubsw ymm14, ymm1, ymmword ptr [", $pat, " + 32]\n",
            "vpaddw ymm13, ymm13, ymm14\n",
            "vpmaddubsw ymm14, ymm2, ymmword ptr [", $pat, " + 64]\n",
            "vpaddw ymm13, ymm13, ymm14\n",
            "vpmaddubsw ymm14, ymm3, ymmword ptr [", $pat, " + 96]\n",
            "vpaddw ymm13, ymm13, ymm14\n",
            "vpmaddubsw ymm14, ymm4, ymmword ptr [", $pat, "]\n",
            "vpmaddubsw ymm15, ymm5, ymmword ptr [", $pat, " + 32]\n",
            "vpaddw ymm14, ymm14, ymm15\n",
            "vpmaddubsw ymm15, ymm6, ymmword ptr [", $pat, " + 64]\n",
            "vpaddw ymm14, ymm14, ymm15\n",
            "vpmaddubsw ymm15, ymm7, ymmword ptr [", $pat, " + 96]\n",
            "vpaddw ymm14, ymm14, ymm15\n",
            "vpblendd ymm15, ymm13, ymm14, 0xF0\n",
            "vperm2i128 ymm13, ymm13, ymm14, 0x21\n",
            "vpaddw ymm13, ymm13, ymm15\n",
            "vpmaddwd ymm13, ymm13, ymmword ptr [{k} + 64]\n",
            "vpbroadcastd ymm14, dword ptr [", $nc, "]\n",
            "vpaddd ymm13, ymm13, ymm14\n",
            "vcvtdq2ps ymm13, ymm13\n",
            "vbroadcastss ymm14, dword ptr [", $d, "]\n",
            "vmulps ymm14, ymm12, ymm14\n",
            "vmulps ymm13, ymm13, ymm14\n",
            "vaddps ", $acc, ", ", $acc, ", ymm13\n",
        )
    };
}

/// [`q4x4_tile_avx2`] with `T = 4` (every full tile of a prefill), in
/// `asm!`: the same operations on the same values in the same
/// order, so the same bits, with every register assigned by hand. The
/// compiled form kept three of the four accumulators and a constant on the
/// stack (16 vector registers: 8 of nibbles, 4 accumulators, the scales and
/// 3 temporaries leave none for the constants, which here are memory
/// operands, as are the patterns).
///
/// # Safety
/// As [`q4x4_tile_avx2`] with `T = 4`: `wa.len()` and
/// `wb.len()` at least `nb * 72`, `patterns.len()`, `d.len()` and
/// `neg_corr.len()` at least `4 * nb`, `nb >= 1`, and the CPU implements
/// AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4x4_tile4_asm(
    wa: &[u8],
    wb: &[u8],
    patterns: &[[__m256i; 4]],
    d: &[f32],
    neg_corr: &[i32],
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) {
    debug_assert!(
        nb >= 1 && wa.len() >= nb * Q4X4_BLOCK_BYTES && wb.len() >= nb * Q4X4_BLOCK_BYTES
    );
    debug_assert!(patterns.len() >= 4 * nb && d.len() >= 4 * nb && neg_corr.len() >= 4 * nb);
    // SAFETY: per iteration `b` (0..nb) the loop reads super-block `b` of
    // `wa` and `wb` (72 bytes each at `b * 72`), the patterns of row `t`
    // and block `b` (128 bytes at `(t * nb + b) * 128`), and `d`/`neg_corr`
    // entry `t * nb + b`, for t < 4: all inside the slices per the function
    // contract; `k` points to the 96 bytes of `TILE_CONSTS` (32-byte
    // aligned). Prefetches (of the next pair's bytes, possibly past `wb`)
    // never fault. The block (`tile4_asm!`) only writes the registers it
    // names (ymm0-15, the pointer and counter registers it is given as
    // `inout`) and the flags, and does not touch the stack; the 4
    // accumulators are then stored to `res` (4 rows of 8 floats). The CPU
    // implements AVX2, FMA and F16C (the function contract).
    unsafe {
        tile4_asm!(
            res,
            [
                "2:",
                "prefetcht0 byte ptr [{pf}]",
                "prefetcht0 byte ptr [{pf} + 64]",
                "prefetcht0 byte ptr [{pf} + 128]",
                // Nibbles of group a (ymm0-3) and group b (ymm4-7):
                // [lo chunks 0-1, lo chunks 2-3, hi 0-1, hi 2-3].
                "vmovdqu ymm13, ymmword ptr [{pa} + 8]",
                "vmovdqu ymm14, ymmword ptr [{pa} + 40]",
                "vpxor ymm13, ymm13, ymmword ptr [{k}]",
                "vpxor ymm14, ymm14, ymmword ptr [{k}]",
                "vpand ymm0, ymm13, ymmword ptr [{k} + 32]",
                "vpand ymm1, ymm14, ymmword ptr [{k} + 32]",
                "vpsrlw ymm13, ymm13, 4",
                "vpsrlw ymm14, ymm14, 4",
                "vpand ymm2, ymm13, ymmword ptr [{k} + 32]",
                "vpand ymm3, ymm14, ymmword ptr [{k} + 32]",
                "vmovdqu ymm13, ymmword ptr [{pb} + 8]",
                "vmovdqu ymm14, ymmword ptr [{pb} + 40]",
                "vpxor ymm13, ymm13, ymmword ptr [{k}]",
                "vpxor ymm14, ymm14, ymmword ptr [{k}]",
                "vpand ymm4, ymm13, ymmword ptr [{k} + 32]",
                "vpand ymm5, ymm14, ymmword ptr [{k} + 32]",
                "vpsrlw ymm13, ymm13, 4",
                "vpsrlw ymm14, ymm14, 4",
                "vpand ymm6, ymm13, ymmword ptr [{k} + 32]",
                "vpand ymm7, ymm14, ymmword ptr [{k} + 32]",
                // Scales of the 8 rows: 4 f16 of group a, then 4 of group b.
                "vmovq xmm12, qword ptr [{pa}]",
                "vmovhps xmm12, xmm12, qword ptr [{pb}]",
                "vcvtph2ps ymm12, xmm12",
                q4_tile_row!("{pt}", "{nc}", "{dp}", "ymm8"),
                q4_tile_row!("{pt} + {ps}", "{nc} + {ss}", "{dp} + {ss}", "ymm9"),
                q4_tile_row!("{pt} + {ps}*2", "{nc} + {ss}*2", "{dp} + {ss}*2", "ymm10"),
                q4_tile_row!("{pt} + {ps3}", "{nc} + {ss3}", "{dp} + {ss3}", "ymm11"),
                "add {pa}, 72",
                "add {pb}, 72",
                "add {pf}, 144",
                "add {pt}, 128",
                "add {nc}, 4",
                "add {dp}, 4",
                "dec {n}",
                "jnz 2b",
            ],
            pa = inout(reg) wa.as_ptr() => _,
            pb = inout(reg) wb.as_ptr() => _,
            pf = inout(reg) wb.as_ptr().wrapping_add(nb * Q4X4_BLOCK_BYTES) => _,
            pt = inout(reg) patterns.as_ptr() => _,
            nc = inout(reg) neg_corr.as_ptr() => _,
            dp = inout(reg) d.as_ptr() => _,
            n = inout(reg) nb => _,
            ps = in(reg) nb * 128,
            ps3 = in(reg) 3 * nb * 128,
            ss = in(reg) nb * 4,
            ss3 = in(reg) 3 * nb * 4,
            k = in(reg) &TILE_CONSTS,
        );
    }
}

/// A Q4_0x4 tile function: [`q4x4_tile_avx2`] at one `T`, or
/// [`q4x4_tile4_asm`].
type Q4Tile =
    unsafe fn(&[u8], &[u8], &[[__m256i; 4]], &[f32], &[i32], usize, &mut [[f32; 8]; TILE_M]);

/// The Q4_0x4 tile for `tm` activation rows (1..=4).
fn q4_tile(tm: usize) -> Q4Tile {
    match tm {
        1 => q4x4_tile_avx2::<1>,
        2 => q4x4_tile_avx2::<2>,
        3 => q4x4_tile_avx2::<3>,
        _ => q4x4_tile4_asm,
    }
}

/// GEMM, Q8_0x8 weights x `m` Q8_0 activation rows: `out[t][r] = W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 8)` row groups of `cols / 32` 272-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
/// * `out`: `m x rows`, row-major.
///
/// The same contract as [`generic::gemm_q8_0x8_q8_0`]. Empty shapes go to
/// the generic code, and so do activations with a -128 quant when the AVX2
/// tiles run (the quantizer never makes one: its quants are in -127..=127;
/// their sign trick needs that; the VNNI tiles take any quant).
#[allow(clippy::too_many_arguments)]
pub fn gemm_q8_0x8_q8_0(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let GemmShape { nb, groups } = gemm_shape(
        Q8X8_ROWS,
        Q8X8_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    )?;
    if nb == 0 || rows == 0 || m == 0 {
        return generic::gemm_q8_0x8_q8_0(w, rows, cols, act_qs, act_d, m, out);
    }
    if cpu.has_vnni() && nb <= gemm_vnni::MAX_BLOCKS {
        // SAFETY: `gemm_shape` checked `w` (`groups` row groups of `nb`
        // super-blocks, rows <= 8 * groups), `act_qs`, `act_d` and `out` for
        // `m` rows; nb, rows, m >= 1 (checked above); the token says which VNNI.
        unsafe {
            match cpu.vnni() {
                Vnni::Avx => {
                    gemm_vnni::avx::gemm_q8_0x8(cpu, w, rows, groups, nb, act_qs, act_d, m, out)
                }
                _ => {
                    gemm_vnni::avx512::gemm_q8_0x8(cpu, w, rows, groups, nb, act_qs, act_d, m, out)
                }
            }
        };
        return Ok(());
    }
    if act_qs.contains(&i8::MIN) {
        return generic::gemm_q8_0x8_q8_0(w, rows, cols, act_qs, act_d, m, out);
    }
    let group_bytes = nb * Q8X8_BLOCK_BYTES;
    for g in 0..groups {
        let wg = &w[g * group_bytes..(g + 1) * group_bytes];
        let mut t0 = 0;
        while t0 < m {
            let tm = (m - t0).min(TILE_M);
            let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
            let d = &act_d[t0 * nb..(t0 + tm) * nb];
            let mut res = [[0.0f32; 8]; TILE_M];
            // SAFETY: `wg` is a whole row group (`nb` super-blocks of 272
            // bytes, sliced above), `qs` holds `tm` rows of `nb * 32` quants
            // and `d` `tm` rows of `nb` scales (sliced above), `res` holds
            // `tm <= 4` rows of 8 floats; the token proves AVX2/FMA/F16C,
            unsafe {
                match tm {
                    1 => q8x8_tile_avx2::<1>(wg, qs, d, nb, &mut res),
                    2 => q8x8_tile_avx2::<2>(wg, qs, d, nb, &mut res),
                    3 => q8x8_tile_avx2::<3>(wg, qs, d, nb, &mut res),
                    _ => q8x8_tile4_asm(wg, qs, d, nb, &mut res),
                }
            }
            for (t, r) in res.iter().enumerate().take(tm) {
                let row0 = g * Q8X8_ROWS;
                let n = (rows - row0).min(8);
                let o = (t0 + t) * rows + row0;
                out[o..o + n].copy_from_slice(&r[..n]);
            }
            t0 += tm;
        }
    }
    Ok(())
}

/// One Q8_0x8 row group (8 rows) against `T` activation rows.
///
/// Chunk `c` of a super-block (32 bytes) is one register whose 32-bit lanes
/// are the 8 rows' weights `4c..4c+3`; the activation dword `c` is
/// broadcast. [`chunk_avx2`] adds the exact
/// per-row i32 of `|w| * sign(a, w)` (|w| <= 128 unsigned, |a| <= 127).
///
/// # Safety
/// `w.len()` must be at least `nb * 272`, `qs.len()` at least `T * nb * 32`
/// with no quant equal to -128, `d.len()` at least `T * nb`, `T <= 4`, and
/// the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8x8_tile_avx2<const T: usize>(
    w: &[u8],
    qs: &[i8],
    d: &[f32],
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) {
    // SAFETY: the loads below read the `nb` super-blocks of `w` and `T` rows
    // of `nb` blocks of `qs` and `d`, all inside the slices per the
    // function contract; the CPU implements AVX2, FMA and F16C.
    unsafe {
        debug_assert!(T <= TILE_M && w.len() >= nb * Q8X8_BLOCK_BYTES);
        debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb);
        let cols = nb * QK;
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let p = w.as_ptr().add(b * Q8X8_BLOCK_BYTES);
            // Prefetch the next row group (the bytes after `w`) at the rate this
            // one is read; a prefetch never faults, `wrapping_add` keeps the
            // address arithmetic defined.
            let pf = p.wrapping_add(nb * Q8X8_BLOCK_BYTES);
            for k in 0..5 {
                _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64 * k).cast());
            }
            // Chunks outer, tokens inner: one weight chunk and its |w| live in
            // registers at a time next to the T integer sums (no spills).
            let mut isum = [_mm256_setzero_si256(); T];
            for c in 0..8 {
                let wv = _mm256_loadu_si256(p.add(16 + 32 * c).cast());
                let wabs = _mm256_sign_epi8(wv, wv);
                for (t, isum_t) in isum.iter_mut().enumerate() {
                    let ap = qs.as_ptr().add(t * cols + b * QK + 4 * c);
                    let a = _mm256_set1_epi32(ap.cast::<i32>().read_unaligned());
                    *isum_t = chunk_avx2(*isum_t, wabs, _mm256_sign_epi8(a, wv));
                }
            }
            let sw = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
            for (t, acc_t) in acc.iter_mut().enumerate() {
                let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                let scale = _mm256_mul_ps(sw, da);
                let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[t]), scale);
                *acc_t = _mm256_add_ps(*acc_t, v);
            }
        }
        for (r, a) in res.iter_mut().zip(acc) {
            _mm256_storeu_ps(r.as_mut_ptr(), a);
        }
    }
}

/// One 4-column chunk of [`q8x8_tile4_asm`]: the chunk's 8 rows' weights
/// at byte `$w` of the super-block (ymm0) and their `|w|` (ymm1), then per
/// activation row `t` the broadcast dword at byte `$a` of the row's block,
/// its sign taken from `w`, `vpmaddubsw`, `vpmaddwd` with ones, added to
/// the row's i32 sums (ymm4-7; `first` writes them instead: 0 + x = x).
/// ymm3 holds the 16-bit ones: the vector units take 2 loads per cycle on
/// Zen 3, so the loop loads only weights, activations and scales.
macro_rules! q8_tile_chunk {
    (@row $a:literal, $q:literal, $sum:literal, first) => {
        concat!(
            "vpbroadcastd ymm2, dword ptr [", $q, " + ", $a, "]\n",
            "vpsignb ymm2, ymm2, ymm0\n",
            "vpmaddubsw ymm2, ymm1, ymm2\n",
            "vpmaddwd ", $sum, ", ymm2, ymm3\n",
        )
    };
    (@row $a:literal, $q:literal, $sum:literal, add) => {
        concat!(
            "vpbroadcastd ymm2, dword ptr [", $q, " + ", $a, "]\n",
            "vpsignb ymm2, ymm2, ymm0\n",
            "vpmaddubsw ymm2, ymm1, ymm2\n",
            "vpmaddwd ymm2, ymm2, ymm3\n",
            "vpaddd ", $sum, ", ", $sum, ", ymm2\n",
        )
    };
    ($w:literal, $a:literal, $how:ident) => {
        concat!(
            "vmovdqu ymm0, ymmword ptr [{p} + ", $w, "]\n",
            "vpsignb ymm1, ymm0, ymm0\n",
            q8_tile_chunk!(@row $a, "{qp}", "ymm4", $how),
            q8_tile_chunk!(@row $a, "{qp} + {qs}", "ymm5", $how),
            q8_tile_chunk!(@row $a, "{qp} + {qs}*2", "ymm6", $how),
            q8_tile_chunk!(@row $a, "{qp} + {qs3}", "ymm7", $how),
        )
    };
}

/// One activation row's float step of [`q8x8_tile4_asm`], the reference's:
/// `acc += cvt(isum) * (sw * da)`, with the row's scale at `[$d]`.
#[rustfmt::skip]
macro_rules! q8_tile_float {
    ($sum:literal, $d:literal, $acc:literal) => {
        concat!(
            "vcvtdq2ps ", $sum, ", ", $sum, "\n",
            "vbroadcastss ymm2, dword ptr [", $d, "]\n",
            "vmulps ymm2, ymm12, ymm2\n",
            "vmulps ", $sum, ", ", $sum, ", ymm2\n",
            "vaddps ", $acc, ", ", $acc, ", ", $sum, "\n",
        )
    };
}

/// [`q8x8_tile_avx2`] with `T = 4` (the prefill's tile) in `asm!`: the same
/// operations on the same values in the same order, so the same bits, with
/// every register assigned by hand (the compiled form kept weights and
/// accumulators on the stack).
///
/// # Safety
/// As [`q8x8_tile_avx2`] with `T = 4`: `w.len()` at least `nb * 272`,
/// `qs.len()` at least `4 * nb * 32` with no quant equal to -128, `d.len()`
/// at least `4 * nb`, `nb >= 1`, and the CPU implements AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8x8_tile4_asm(w: &[u8], qs: &[i8], d: &[f32], nb: usize, res: &mut [[f32; 8]; TILE_M]) {
    debug_assert!(nb >= 1 && w.len() >= nb * Q8X8_BLOCK_BYTES);
    debug_assert!(qs.len() >= 4 * nb * QK && d.len() >= 4 * nb);
    // SAFETY: per iteration `b` (0..nb) the loop reads super-block `b` of
    // `w` (272 bytes at `b * 272`), block `b` of activation row `t` (32
    // bytes at `t * nb * 32 + b * 32`) and `d` entry `t * nb + b`, for
    // t < 4: all inside the slices per the function contract; `k` points to
    // the 32 bytes of `TILE_CONSTS.2` (the 16-bit ones, 32-byte aligned).
    // Prefetches (of the next row group, possibly past `w`) never fault.
    // The block (`tile4_asm!`) only writes the registers it names (ymm0-15,
    // the pointer and counter registers it is given as `inout`) and the
    // flags, and does not touch the stack; the 4 accumulators are then
    // stored to `res` (4 rows of 8 floats). The CPU implements AVX2, FMA
    // and F16C (the function contract).
    unsafe {
        tile4_asm!(
            res,
            [
                "vmovdqa ymm3, ymmword ptr [{k}]",
                "2:",
                "prefetcht0 byte ptr [{pf}]",
                "prefetcht0 byte ptr [{pf} + 64]",
                "prefetcht0 byte ptr [{pf} + 128]",
                "prefetcht0 byte ptr [{pf} + 192]",
                "prefetcht0 byte ptr [{pf} + 256]",
                // The 8 rows' scales.
                "vcvtph2ps ymm12, xmmword ptr [{p}]",
                q8_tile_chunk!("16", "0", first),
                q8_tile_chunk!("48", "4", add),
                q8_tile_chunk!("80", "8", add),
                q8_tile_chunk!("112", "12", add),
                q8_tile_chunk!("144", "16", add),
                q8_tile_chunk!("176", "20", add),
                q8_tile_chunk!("208", "24", add),
                q8_tile_chunk!("240", "28", add),
                q8_tile_float!("ymm4", "{dp}", "ymm8"),
                q8_tile_float!("ymm5", "{dp} + {ss}", "ymm9"),
                q8_tile_float!("ymm6", "{dp} + {ss}*2", "ymm10"),
                q8_tile_float!("ymm7", "{dp} + {ss3}", "ymm11"),
                "add {p}, 272",
                "add {pf}, 272",
                "add {qp}, 32",
                "add {dp}, 4",
                "dec {n}",
                "jnz 2b",
            ],
            p = inout(reg) w.as_ptr() => _,
            pf = inout(reg) w.as_ptr().wrapping_add(nb * Q8X8_BLOCK_BYTES) => _,
            qp = inout(reg) qs.as_ptr() => _,
            dp = inout(reg) d.as_ptr() => _,
            n = inout(reg) nb => _,
            qs = in(reg) nb * QK,
            qs3 = in(reg) 3 * nb * QK,
            ss = in(reg) nb * 4,
            ss3 = in(reg) 3 * nb * 4,
            k = in(reg) &TILE_CONSTS.2,
        );
    }
}

/// `acc` plus, per 32-bit lane, the sum of the 4 products `u * s` (unsigned
/// `u <= 128`, signed `|s| <= 127`): `vpmaddubsw` pair sums fit i16 (<= 2 *
/// 128 * 127), `vpmaddwd` with ones makes them i32. Exact.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn chunk_avx2(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    let prod = _mm256_maddubs_epi16(u, s);
    _mm256_add_epi32(acc, _mm256_madd_epi16(prod, _mm256_set1_epi16(1)))
}
