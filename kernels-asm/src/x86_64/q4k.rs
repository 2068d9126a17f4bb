//! GEMV and GEMM of Q4_Kx4 weights (GGUF Q4_K, 4 rows interleaved) with
//! Q8_K activations: AVX2 tiles of one row group (4 rows) x up to 4
//! activation rows, or of two row groups x one or two activation rows when
//! M <= 2 (the spread activations then serve 8 weight rows: 1.15x faster
//! for the GEMV on a 2048 x 4096 matrix here); the GEMV is the GEMM with one
//! activation row. The same code serves Q5_Kx4 (`x86_64/q5k.rs`).
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

use super::Avx2;
use crate::generic;
use crate::layout::{
    Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT, Q4KX4_ROWS, Q4KX4_SCALES_AT, Q5KX4_BLOCK_BYTES, Q5KX4_QH_AT,
    Q5KX4_QS_AT, QK, QK_K,
};
use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
use core::arch::x86_64::*;

/// Activation rows computed together against one pass over a row group.
const TILE_M: usize = 4;

/// GEMV, Q4_Kx4 weights x one Q8_K activation row: [`gemm_q4_kx4_q8_k`]
/// with `m = 1`; the same contract as [`generic::gemv_q4_kx4_q8_k`].
#[allow(clippy::too_many_arguments)]
pub fn gemv_q4_kx4_q8_k(
    cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    gemm_q4_kx4_q8_k(cpu, w, rows, cols, act_qs, act_d, act_sums, 1, out)
}

/// GEMM, Q4_Kx4 weights x `m` Q8_K activation rows: `out[t * rows + r] =
/// W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 256` 576-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 256` scales;
///   `act_sums`: `m x cols / 32` sums;
/// * `out`: `m x rows`, row-major.
///
/// Exact for every input bit pattern; the same contract as
/// [`generic::gemm_q4_kx4_q8_k`]. Empty shapes go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q4_kx4_q8_k(
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
    k_gemm::<false>(cpu, w, rows, cols, act_qs, act_d, act_sums, m, out)
}

/// The GEMM of either layout (`Q5`: Q5_Kx4, else Q4_Kx4), shapes checked
/// here.
#[allow(clippy::too_many_arguments)]
pub(super) fn k_gemm<const Q5: bool>(
    _cpu: Avx2,
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
    let group_bytes = nb * bb;
    let ns = cols / QK;
    // Two row groups per pass for one or two activation rows (the spread
    // activations serve 8 weight rows), one group per pass for larger tiles.
    let pair = m <= 2;
    let mut g = 0;
    while g < groups {
        let gn = if pair && g + 1 < groups { 2 } else { 1 };
        let mut t0 = 0;
        while t0 < m {
            let tn = (m - t0).min(TILE_M);
            let qs = &act_qs[t0 * cols..(t0 + tn) * cols];
            let d = &act_d[t0 * nb..(t0 + tn) * nb];
            let s = &act_sums[t0 * ns..(t0 + tn) * ns];
            let wg = |k: usize| &w[(g + k) * group_bytes..(g + k + 1) * group_bytes];
            let mut tile = [[[0.0f32; Q4KX4_ROWS]; TILE_M]; 2];
            // SAFETY: each `wg(k)` is one row group of `nb` super-blocks (of
            // the layout `Q5` names; g + gn <= groups), `qs`, `d` and `s`
            // hold `tn` activation rows of `cols` quants, `nb` scales and
            // `cols / 32` sums (lengths checked by gemm_k_shape); `tile`
            // holds 2 groups x TILE_M >= tn rows; the token proves AVX2, FMA
            // and F16C.
            unsafe {
                let mut one = [[[0.0f32; Q4KX4_ROWS]; TILE_M]; 1];
                match (gn, tn) {
                    (2, 1) => kx4_tile::<1, 2, Q5>([wg(0), wg(1)], qs, d, s, nb, &mut tile),
                    (2, _) => kx4_tile::<2, 2, Q5>([wg(0), wg(1)], qs, d, s, nb, &mut tile),
                    (_, 1) => kx4_tile::<1, 1, Q5>([wg(0)], qs, d, s, nb, &mut one),
                    (_, 2) => kx4_tile::<2, 1, Q5>([wg(0)], qs, d, s, nb, &mut one),
                    (_, 3) => kx4_tile::<3, 1, Q5>([wg(0)], qs, d, s, nb, &mut one),
                    _ => kx4_tile::<4, 1, Q5>([wg(0)], qs, d, s, nb, &mut one),
                }
                if gn == 1 {
                    tile[0] = one[0];
                }
            }
            for (k, tk) in tile.iter().take(gn).enumerate() {
                let r0 = (g + k) * Q4KX4_ROWS;
                let nr = (rows - r0).min(Q4KX4_ROWS);
                for (t, acc) in tk.iter().take(tn).enumerate() {
                    out[(t0 + t) * rows + r0..][..nr].copy_from_slice(&acc[..nr]);
                }
            }
            t0 += tn;
        }
        g += gn;
    }
    Ok(())
}

/// `G` row groups (1 or 2) x `T` activation rows, all `nb` super-blocks,
/// of Q4_Kx4 (`Q5` false) or Q5_Kx4 (`Q5` true: the nibbles get their fifth
/// bit from the `qh` chunks, bit `j` moved to bit 4 with a 16-bit shift and
/// a mask; quants 0..31 keep the four `vpmaddubsw` sums within +-31744,
/// exact). The activation dwords are spread once per (chunk pair,
/// activation row) and used by the `G` groups.
///
/// # Safety
/// Each `ws[g]` must hold `nb` super-blocks (`nb * 576` or `nb * 704`
/// bytes), `qs` `T * nb * 256` quants, `d` `T * nb` scales, `s` `T * nb * 8`
/// sums, `T <= TILE_M`, and the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn kx4_tile<const T: usize, const G: usize, const Q5: bool>(
    ws: [&[u8]; G],
    qs: &[i8],
    d: &[f32],
    s: &[i16],
    nb: usize,
    tile: &mut [[[f32; Q4KX4_ROWS]; TILE_M]; G],
) {
    debug_assert!(T <= TILE_M);
    let bb = if Q5 {
        Q5KX4_BLOCK_BYTES
    } else {
        Q4KX4_BLOCK_BYTES
    };
    let qs_at = if Q5 { Q5KX4_QS_AT } else { Q4KX4_QS_AT };
    debug_assert!(ws.iter().all(|w| w.len() >= nb * bb));
    debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb && s.len() >= T * nb * 8);
    let cols = nb * QK_K;
    // SAFETY: every pointer below is inside its slice per the function
    // contract: super-block `b` of group `g` is ws[g][bb * b..bb * (b + 1)],
    // row `t`'s sub-block `k` of super-block `b` is qs[t * cols + 256b +
    // 32k..][..32], its sums s[t * nb * 8 + 8b..][..8], its scale
    // d[t * nb + b]; all loads are unaligned; the CPU implements AVX2, FMA
    // and F16C.
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
        let zero = _mm256_setzero_si256();
        let mut acc = [[_mm_setzero_ps(); T]; G];
        for b in 0..nb {
            let sbs: [*const u8; G] = core::array::from_fn(|g| ws[g].as_ptr().add(b * bb));
            let mut scb = [[zero; 2]; G];
            let mut mins = [[zero; 2]; G];
            for g in 0..G {
                // Scales and mins: rows as dwords, sub-blocks as bytes.
                let sb = sbs[g];
                let r0 = _mm_loadu_si128(sb.add(Q4KX4_SCALES_AT).cast());
                let r1 = _mm_loadu_si128(sb.add(Q4KX4_SCALES_AT + 16).cast());
                let r2 = _mm_loadu_si128(sb.add(Q4KX4_SCALES_AT + 32).cast());
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
                        let sb = sbs[g];
                        let wv = _mm256_loadu_si256(sb.add(qs_at + 128 * j + 32 * i).cast());
                        lo[g] = _mm256_and_si256(wv, m0f);
                        hi[g] = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m0f);
                        if Q5 {
                            let qh = _mm256_loadu_si256(sb.add(Q5KX4_QH_AT + 32 * i).cast());
                            lo[g] = _mm256_or_si256(lo[g], bit_to_4(qh, 2 * j));
                            hi[g] = _mm256_or_si256(hi[g], bit_to_4(qh, 2 * j + 1));
                        }
                    }
                    for t in 0..T {
                        let a = qs.as_ptr().add(t * cols + QK_K * b + 64 * j);
                        let alo = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(a.cast()), ix);
                        let ahi =
                            _mm256_permutevar8x32_epi32(_mm256_loadu_si256(a.add(QK).cast()), ix);
                        for g in 0..G {
                            let plo = _mm256_maddubs_epi16(lo[g], alo);
                            let phi = _mm256_maddubs_epi16(hi[g], ahi);
                            slo[g][t] = _mm256_add_epi16(slo[g][t], plo);
                            shi[g][t] = _mm256_add_epi16(shi[g][t], phi);
                        }
                    }
                }
                for g in 0..G {
                    let sc0 = _mm256_shuffle_epi8(scb[g][j / 2], pick[(2 * j) % 4]);
                    let sc1 = _mm256_shuffle_epi8(scb[g][j / 2], pick[(2 * j + 1) % 4]);
                    for t in 0..T {
                        let p = _mm256_add_epi32(
                            _mm256_madd_epi16(slo[g][t], sc0),
                            _mm256_madd_epi16(shi[g][t], sc1),
                        );
                        sumi[g][t] = _mm256_add_epi32(sumi[g][t], p);
                    }
                }
            }
            for g in 0..G {
                let sb = sbs[g];
                let dw = _mm_cvtph_ps(_mm_loadl_epi64(sb.cast()));
                let dmw = _mm_cvtph_ps(_mm_loadl_epi64(sb.add(8).cast()));
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
                    acc[g][t] = _mm_add_ps(acc[g][t], _mm_mul_ps(dd, _mm_cvtepi32_ps(si)));
                    acc[g][t] = _mm_sub_ps(acc[g][t], _mm_mul_ps(dm, _mm_cvtepi32_ps(summ)));
                }
            }
        }
        for g in 0..G {
            for t in 0..T {
                _mm_storeu_ps(tile[g][t].as_mut_ptr(), acc[g][t]);
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
