//! GEMV and GEMM of Q3_Kx8 weights with Q8_K activations: AVX2 tiles of
//! one row group (8 rows, one per lane) x up to 4 activation rows.

use super::Avx2;
use crate::generic;
use crate::layout::{Q3KX8_BLOCK_BYTES, Q3KX8_PAIR_BYTES, Q3KX8_ROWS, QK_K};
use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
use core::arch::x86_64::*;

/// Activation rows computed together against one pass over a row group.
const TILE_M: usize = 4;

forwarding_entry!(
    /// GEMV, Q3_Kx8 weights x one Q8_K activation row: [`gemm_q3_kx8_q8_k`]
    /// with `m = 1`; the contract of [`generic::gemv_q3_kx8_q8_k`].
    q8_k gemv gemv_q3_kx8_q8_k (cpu: Avx2) => gemm_q3_kx8_q8_k
);

/// GEMM, Q3_Kx8 weights x `m` Q8_K activation rows: the contract of
/// [`generic::gemm_q3_kx8_q8_k`], exact for every input bit pattern; empty
/// shapes go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q3_kx8_q8_k(
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
    let (r8, bytes) = (Q3KX8_ROWS, Q3KX8_BLOCK_BYTES);
    let GemmKShape { nb, groups } =
        gemm_k_shape(r8, bytes, w, rows, cols, act_qs, act_d, act_sums, m, out)?;
    if nb == 0 || rows == 0 || m == 0 {
        return generic::gemm_q3_kx8_q8_k(w, rows, cols, act_qs, act_d, act_sums, m, out);
    }
    let tiles = [q3k_tile::<1>, q3k_tile::<2>, q3k_tile::<3>, q3k_tile::<4>];
    for g in 0..groups {
        let wg = &w[g * nb * bytes..(g + 1) * nb * bytes];
        let (row0, n) = (g * r8, (rows - g * r8).min(r8));
        for t0 in (0..m).step_by(TILE_M) {
            let tm = (m - t0).min(TILE_M);
            let mut res = [[0.0f32; Q3KX8_ROWS]; TILE_M];
            // SAFETY: `wg` is one row group of `nb` super-blocks, and from
            // row `t0` `act_qs` and `act_d` hold `tm` rows of `cols` quants
            // and `nb` scales (`gemm_k_shape` checked `m` rows); the token
            // proves AVX2.
            unsafe { tiles[tm - 1](wg, &act_qs[t0 * cols..], &act_d[t0 * nb..], nb, &mut res) };
            for (t, r) in res.iter().enumerate().take(tm) {
                let o = (t0 + t) * rows + row0;
                out[o..o + n].copy_from_slice(&r[..n]);
            }
        }
    }
    Ok(())
}

/// One Q3_Kx8 row group `wg` against `T` activation rows: `res[t]` its 8
/// rows' dots with row `t`.
///
/// Per 16-weight group: `R` (32 bytes, a row per 32-bit lane) and `N` (its
/// nibbles spread to the two 128-bit halves) give each chunk's low 2 bits
/// and sign bit of `q = low - 4 top`; against the activation dword of each
/// chunk (broadcast), `vpmaddubsw` sums `low a` and `top a` (i16 lanes at
/// most 4 x 2 x 3 x 128), `vpmaddwd` widens them, `isum = L - 4 T` exactly,
/// and `sumi += scale * isum` (`vpmulld`). Per super-block `acc += (d_w *
/// d_a) * sumi`, the reference's order.
///
/// # Safety
/// `wg.len() >= nb * 912`, `qs.len() >= T * nb * 256` (rows `nb * 256`
/// apart), `d.len() >= T * nb`, `1 <= T <= 4`, and the CPU must implement
/// AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3k_tile<const T: usize>(
    wg: &[u8],
    qs: &[i8],
    d: &[f32],
    nb: usize,
    res: &mut [[f32; Q3KX8_ROWS]; TILE_M],
) {
    // SAFETY: the loads read super-block `b < nb` of `wg` (its `d`, scales
    // and groups at their offsets inside 912 bytes) and block `b` of rows
    // `t < T` of `qs` and `d` (the function contract); unaligned.
    unsafe {
        debug_assert!(wg.len() >= nb * Q3KX8_BLOCK_BYTES && qs.len() >= T * nb * QK_K);
        let cols = nb * QK_K;
        let (m3, m1) = (_mm256_set1_epi8(3), _mm256_set1_epi8(1));
        let (m4, ones) = (_mm_set1_epi8(0x0F), _mm256_set1_epi16(1));
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let sb = wg.as_ptr().add(b * Q3KX8_BLOCK_BYTES);
            let mut sumi = [_mm256_setzero_si256(); T];
            for j in 0..QK_K / 16 {
                let pair = sb.add(2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * (j / 2));
                let sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(pair.add(8 * (j % 2)).cast()));
                let g = pair.add(2 * Q3KX8_ROWS + 48 * (j % 2));
                let r = _mm256_loadu_si256(g.cast());
                let n = _mm_loadu_si128(g.add(32).cast());
                let n = _mm256_setr_m128i(
                    _mm_and_si128(n, m4),
                    _mm_and_si128(_mm_srli_epi16::<4>(n), m4),
                );
                let and = _mm256_and_si256;
                let low = [
                    and(_mm256_srli_epi16::<5>(r), m3),
                    and(_mm256_srli_epi16::<2>(r), m3),
                    and(r, m3),
                    and(n, m3),
                ];
                let top = [
                    and(_mm256_srli_epi16::<7>(r), m1),
                    and(_mm256_srli_epi16::<4>(r), m1),
                    and(_mm256_srli_epi16::<3>(n), m1),
                    and(_mm256_srli_epi16::<2>(n), m1),
                ];
                for (t, sumi_t) in sumi.iter_mut().enumerate() {
                    let a = qs.as_ptr().add(t * cols + b * QK_K + 16 * j);
                    let (mut l, mut h) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                    for s in 0..4 {
                        let av = _mm256_set1_epi32(a.add(4 * s).cast::<i32>().read_unaligned());
                        l = _mm256_add_epi16(l, _mm256_maddubs_epi16(low[s], av));
                        h = _mm256_add_epi16(h, _mm256_maddubs_epi16(top[s], av));
                    }
                    let (l, h) = (_mm256_madd_epi16(l, ones), _mm256_madd_epi16(h, ones));
                    let isum = _mm256_sub_epi32(l, _mm256_slli_epi32::<2>(h));
                    *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(sc, isum));
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
            for (t, acc_t) in acc.iter_mut().enumerate() {
                let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                let v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi[t]));
                *acc_t = _mm256_add_ps(*acc_t, v);
            }
        }
        for (r, a) in res.iter_mut().zip(acc) {
            _mm256_storeu_ps(r.as_mut_ptr(), a);
        }
    }
}
