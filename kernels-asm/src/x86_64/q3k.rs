//! GEMV and GEMM of Q3_Kx8 weights with Q8_K activations: tiles of one
//! row group (8 rows, one per 32-bit lane) x up to 4 activation rows, run
//! by Q6_Kx8's driver (`q6k::k8_gemm`); AVX2, or `vpdpbusd` with a VNNI
//! form.

use super::q6k::{k8_gemm, K8Kernels, TILE_M};
use super::{Avx2, Dot, RUN};
use crate::generic;
use crate::layout::{Q3KX8_BLOCK_BYTES, Q3KX8_PAIR_BYTES, Q3KX8_ROWS, QK_K};
use crate::shape::ShapeError;
use core::arch::x86_64::*;

forwarding_entry!(
    /// GEMV, Q3_Kx8 weights x one Q8_K activation row: [`gemm_q3_kx8_q8_k`]
    /// with `m = 1`; the contract of [`generic::gemv_q3_kx8_q8_k`].
    q8_k gemv gemv_q3_kx8_q8_k (cpu: Avx2) => gemm_q3_kx8_q8_k
);

/// Q3_Kx8's kernels.
const Q3K: K8Kernels = K8Kernels {
    block_bytes: Q3KX8_BLOCK_BYTES,
    tiles: [
        [q3k_tile::<1>, q3k_tile::<2>, q3k_tile::<3>, q3k_tile::<4>],
        [
            q3k_tile_avx_vnni::<1>,
            q3k_tile_avx_vnni::<2>,
            q3k_tile_avx_vnni::<3>,
            q3k_tile_avx_vnni::<4>,
        ],
        [
            q3k_tile_avx512_vnni::<1>,
            q3k_tile_avx512_vnni::<2>,
            q3k_tile_avx512_vnni::<3>,
            q3k_tile_avx512_vnni::<4>,
        ],
    ],
    wide: None,
    avx2_no_min: false,
    generic: generic::gemm_q3_kx8_q8_k,
};

/// GEMM, Q3_Kx8 weights x `m` Q8_K activation rows: the contract of
/// [`generic::gemm_q3_kx8_q8_k`], exact for every input bit pattern; empty
/// shapes go to the generic code.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q3_kx8_q8_k(
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
    k8_gemm(cpu, &Q3K, w, rows, cols, act_qs, act_d, act_sums, m, out)
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
    _offsets: &[i32],
    nb: usize,
    res: &mut [[f32; Q3KX8_ROWS]; TILE_M],
) {
    // SAFETY: the contract of this function is the body's (no offsets).
    unsafe { q3k_tile_body::<T, { Dot::MADDUBS }>(wg, qs, d, &[], nb, res) }
}

// [`q3k_tile`] summing with `vpdpbusd`: the same i32 sums.
vnni_forms!(q3k_tile_avx_vnni, q3k_tile_avx512_vnni<const T: usize>(
    wg: &[u8],
    qs: &[i8],
    d: &[f32],
    offsets: &[i32],
    nb: usize,
    res: &mut [[f32; Q3KX8_ROWS]; TILE_M],
) => q3k_tile_body::<T, DOT>);

/// The body of the three tiles, inlined into each so that it is compiled
/// with its caller's features (`DOT`: a [`Dot`] constant).
///
/// The VNNI forms take each chunk as the unsigned byte `32 (q + 4) =
/// (low << 5) | (1 - top) << 7` (0..=224) and the activations as they are:
/// per group and activation row four `vpdpbusd` add the 16 products to the
/// run's entry of `offsets` (`-128 * sum(a)`), which gives `32 * isum`
/// exactly (at most 32 * 16 * 4 * 128 in magnitude); `vpmulld` by the scale
/// and, per super-block, `>> 5` (exact: every term is a multiple of 32,
/// and `32 * sumi` is at most 32 * 16 * 32 * 8192 < 2^31) give the AVX2
/// form's `sumi`.
///
/// # Safety
/// The AVX2 tile's contract; with a VNNI form `offsets` must hold `T * nb *
/// 16` entries (row `t`'s run `k` at `t * nb * 16 + k`), and the CPU must
/// implement the `DOT` form.
#[inline(always)]
unsafe fn q3k_tile_body<const T: usize, const DOT: u8>(
    wg: &[u8],
    qs: &[i8],
    d: &[f32],
    offsets: &[i32],
    nb: usize,
    res: &mut [[f32; Q3KX8_ROWS]; TILE_M],
) {
    // SAFETY: the loads read super-block `b < nb` of `wg` (its `d`, scales
    // and groups at their offsets inside 912 bytes) and block `b` of rows
    // `t < T` of `qs`, `d` and (VNNI) `offsets` (the function contract);
    // unaligned; the CPU implements AVX2, FMA, F16C and the `DOT` form.
    unsafe {
        debug_assert!(wg.len() >= nb * Q3KX8_BLOCK_BYTES && qs.len() >= T * nb * QK_K);
        debug_assert!(DOT == Dot::MADDUBS || offsets.len() >= T * nb * QK_K / RUN);
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
                if DOT == Dot::MADDUBS {
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
                } else {
                    // 32 (q + 4) per byte: low in bits 5-6, 1 - top in bit 7
                    // (16-bit shifts: the bits stay in their byte).
                    let flip = _mm256_set1_epi8(i8::MIN);
                    let u: [__m256i; 4] = core::array::from_fn(|s| {
                        let lt = _mm256_or_si256(
                            _mm256_slli_epi16::<5>(low[s]),
                            _mm256_slli_epi16::<7>(top[s]),
                        );
                        _mm256_xor_si256(lt, flip)
                    });
                    for (t, sumi_t) in sumi.iter_mut().enumerate() {
                        let a = qs.as_ptr().add(t * cols + b * QK_K + 16 * j);
                        let run = (t * cols + b * QK_K + 16 * j) / RUN;
                        let mut v = _mm256_set1_epi32(*offsets.get_unchecked(run));
                        for (s, us) in u.iter().enumerate() {
                            let av = _mm256_set1_epi32(a.add(4 * s).cast::<i32>().read_unaligned());
                            v = if DOT == Dot::AVX_VNNI {
                                _mm256_dpbusd_avx_epi32(v, *us, av)
                            } else {
                                _mm256_dpbusd_epi32(v, *us, av)
                            };
                        }
                        *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(sc, v));
                    }
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
            for (t, acc_t) in acc.iter_mut().enumerate() {
                let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                let sumi_t = if DOT == Dot::MADDUBS {
                    sumi[t]
                } else {
                    _mm256_srai_epi32::<5>(sumi[t])
                };
                let v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi_t));
                *acc_t = _mm256_add_ps(*acc_t, v);
            }
        }
        for (r, a) in res.iter_mut().zip(acc) {
            _mm256_storeu_ps(r.as_mut_ptr(), a);
        }
    }
}
