//! The codebook family's shared kernel text: IQ3_XXSx8 ([`super::iq3xxs`])
//! and IQ3_Sx8 ([`super::iq3s`]) store, for 8 rows of a 256-weight
//! super-block, each 4-weight chunk's index into a grid of 4-byte points
//! (256 points for IQ3_XXS, 512 for IQ3_S), a sign bit per weight (IQ3_XXS:
//! 7 bits per 8 weights, the eighth their parity) and a 4-bit scale per
//! 32-weight sub-block. Both layouts put the chunk indices in the same
//! order, `[sub-block p][chunk c (0..8)][row r]` from their `INDEX_AT`, and
//! give the kernels per sub-block and row a 32-bit word of four sign bytes
//! (byte `k` the signs of chunks `2k` and `2k + 1`, bit `j` weight `8k +
//! j`), so that only the front end (the index's ninth bit, where the signs
//! and scales come from) differs.
//!
//! A weight's value is `d * s * g * sign / 2^f`, `s = 2 ls + 1` (`ls` the
//! 4-bit scale), `g` the grid component, `f` 2 for IQ3_XXS (ggml's
//! `d * (0.5 + ls) * 0.5`) and 0 for IQ3_S (`d * (1 + 2 ls)`). The kernels
//! sum `g * sign * a` exactly in `i32` per sub-block, scale by `s`, and per
//! super-block add `(d_w * d_a) * (sumi / 2^f)` to the row's float sum, the
//! order of [`group_dot`].

use crate::generic::read_f16;
use crate::layout::QK_K;

/// Rows of a codebook layout's row group.
pub const IQ3_ROWS: usize = 8;

/// A super-block field of row `r`: a weight's signed value (weight `i`,
/// 0..256) or a sub-block's scale `2 ls + 1` (sub-block `i`, 0..8).
pub(crate) type Field = fn(&[u8], usize, usize) -> i32;

/// The scalar specification of both layouts' dot product: the eight rows
/// of one row group (`bytes`-byte super-blocks, each beginning with the 8
/// rows' `d`) dotted with one Q8_K activation row, `f` the power of two
/// the scaled sum is divided by.
pub(crate) fn group_dot(
    bytes: usize,
    (weight, scale): (Field, Field),
    f: u32,
    group: &[u8],
    act_qs: &[i8],
    act_d: &[f32],
) -> [f32; IQ3_ROWS] {
    let factor = 1.0 / (1u32 << f) as f32;
    let mut acc = [0.0f32; IQ3_ROWS];
    let blocks = group
        .chunks_exact(bytes)
        .zip(act_qs.chunks_exact(QK_K))
        .zip(act_d);
    for ((sb, a), &da) in blocks {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut sumi = 0i32;
            for p in 0..QK_K / 32 {
                let mut isum = 0i32;
                for (i, &at) in a.iter().enumerate().skip(32 * p).take(32) {
                    isum += weight(sb, r, i) * at as i32;
                }
                sumi += scale(sb, r, p) * isum;
            }
            *acc_r += (read_f16(sb, 2 * r) * da) * (sumi as f32 * factor);
        }
    }
    acc
}

/// The sign of weight `w` (0..32) of a sub-block from its sign word (byte
/// `w / 8`, bit `w % 8`): `g` or `-g`.
#[inline]
pub(crate) fn signed(word: u32, w: usize, g: i32) -> i32 {
    if (word >> (8 * (w / 8) + w % 8)) & 1 != 0 {
        -g
    } else {
        g
    }
}

/// Component `k` (0..4) of a grid point.
#[inline]
pub(crate) fn component(point: u32, k: usize) -> i32 {
    ((point >> (8 * k)) & 0xff) as i32
}

/// aarch64: the sub-block text both GEMV loops run. Per chunk, 8 grid
/// points are looked up (`$lookup`: 3 instructions each, a byte or
/// halfword index, `ldr` of the point, `mov` into its lane), into `v6`
/// (rows 0-3) and `v7` (rows 4-7); the chunk's sign bits are spread over
/// its bytes by `tbl` (the sign words of rows 0-3 in `v0`, 4-7 in `v1`,
/// `v16` the pair's byte index) and `cmtst` against the chunk's bit masks,
/// the values negated where set (`eor`, `sub`), then `sdot` by lane with
/// the chunk's 4 activations into `v4` / `v5`.
#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64 {
    /// The constants the loops load into `v30` (the sign-byte index of
    /// pair 0: byte `4r + k` is `4r`) and `v31` (weight `k`'s bit `1 << k`,
    /// chunks of even number; `v23` = `v31 << 4` for odd ones).
    pub(crate) static IQ3_CONSTANTS: [u8; 32] = [
        0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, //
        1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8,
    ];

    /// Loads the constants (`{kc}`: [`IQ3_CONSTANTS`]): `v30`, `v31`,
    /// `v23` as above, `v22` = 1 (the next pair's index step), `v24` =
    /// 0x7f.
    #[rustfmt::skip]
    macro_rules! iq3_setup {
        () => { concat!(
            "ld1 {{v30.16b, v31.16b}}, [{kc}]\n",
            "shl v23.16b, v31.16b, #4\n",
            "movi v22.16b, #1\n",
            "movi v24.16b, #0x7f\n",
        ) };
    }
    pub(crate) use iq3_setup;

    /// One chunk: its 8 points by `$lookup!(src, dst, lane, index lane)`
    /// (`$src` the register holding the chunk's indices, if any), signs
    /// from bit masks `$bits`, `sdot` with lane `$lane` of `$act`.
    #[rustfmt::skip]
    macro_rules! iq3_chunk {
        ($lookup:ident, $src:literal, $bits:literal, $act:literal, $lane:literal) => { concat!(
            $lookup!($src, "v6", "0", "0"),
            $lookup!($src, "v6", "1", "1"),
            $lookup!($src, "v6", "2", "2"),
            $lookup!($src, "v6", "3", "3"),
            $lookup!($src, "v7", "0", "4"),
            $lookup!($src, "v7", "1", "5"),
            $lookup!($src, "v7", "2", "6"),
            $lookup!($src, "v7", "3", "7"),
            "tbl v8.16b, {{v0.16b}}, v16.16b\n",
            "tbl v9.16b, {{v1.16b}}, v16.16b\n",
            "cmtst v8.16b, v8.16b, ", $bits, ".16b\n",
            "cmtst v9.16b, v9.16b, ", $bits, ".16b\n",
            "eor v6.16b, v6.16b, v8.16b\n",
            "eor v7.16b, v7.16b, v9.16b\n",
            "sub v6.16b, v6.16b, v8.16b\n",
            "sub v7.16b, v7.16b, v9.16b\n",
            "sdot v4.4s, v6.16b, ", $act, ".4b[", $lane, "]\n",
            "sdot v5.4s, v7.16b, ", $act, ".4b[", $lane, "]\n",
        ) };
    }
    pub(crate) use iq3_chunk;

    /// A sub-block's 8 chunks (the sign words in `v0` / `v1`, the 32
    /// activations in `v18`, `v19`), then the isums scaled by `v2` / `v3`
    /// (`2 ls + 1` of rows 0-3 / 4-7) into `v26` / `v25`. Before chunk pair
    /// `j` (chunks `2j`, `2j + 1`) comes `$prep!(j)`, which may leave their
    /// indices in `v10` and `v11` for `$lookup`.
    #[rustfmt::skip]
    macro_rules! iq3_sub_block {
        ($lookup:ident, $prep:ident) => { concat!(
            "movi v4.16b, #0\n",
            "movi v5.16b, #0\n",
            "mov v16.16b, v30.16b\n",
            $prep!("0"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v18", "0"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v18", "1"),
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("1"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v18", "2"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v18", "3"),
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("2"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v19", "0"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v19", "1"),
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("3"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v19", "2"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v19", "3"),
            "mla v26.4s, v4.4s, v2.4s\n",
            "mla v25.4s, v5.4s, v3.4s\n",
        ) };
    }
    pub(crate) use iq3_sub_block;

    /// The end of a super-block: `d_a` from `x10`, the rows' `d` in `v29`,
    /// `sumi / 2^f` (`scvtf` with `$f` = `", #f"` fraction bits, or `""`
    /// for none; one rounding) times
    /// `d_w * d_a` added to the float sums `v28` / `v27`.
    #[rustfmt::skip]
    macro_rules! iq3_finish {
        ($f:literal) => { concat!(
            "ld1r {{v4.4s}}, [x10], #4\n",
            "fcvtl v5.4s, v29.4h\n",
            "fcvtl2 v6.4s, v29.8h\n",
            "scvtf v26.4s, v26.4s", $f, "\n",
            "scvtf v25.4s, v25.4s", $f, "\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fmul v6.4s, v6.4s, v4.4s\n",
            "fmul v26.4s, v5.4s, v26.4s\n",
            "fmul v25.4s, v6.4s, v25.4s\n",
            "fadd v28.4s, v28.4s, v26.4s\n",
            "fadd v27.4s, v27.4s, v25.4s\n",
        ) };
    }
    pub(crate) use iq3_finish;

    /// A tile of 4 activation rows from a layout's GEMV loop: each row's
    /// loop over the one row group (`nb` super-blocks), added to its 8
    /// accumulators (zeroed by the driver, so the sums are the loop's: the
    /// grid lookups are not shared between the rows).
    ///
    /// # Safety
    /// `row`'s contract for one group and each of the 4 activation rows
    /// (consecutive from `qs` and `d`, `nb` super-blocks each), `acc` 32
    /// readable and writable floats.
    #[inline(always)]
    pub(crate) unsafe fn tile4_by_rows(
        row: crate::aarch64::gemm::LoopFn,
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        sums: *const i16,
        nb: usize,
        acc: *mut f32,
    ) {
        for t in 0..4 {
            let mut out = [0.0f32; 8];
            // SAFETY: activation row t of the 4 the contract provides, one
            // row group, 8 floats of `out`.
            unsafe {
                row(
                    w,
                    qs.add(t * nb * crate::layout::QK_K),
                    d.add(t * nb),
                    sums,
                    nb,
                    out.as_mut_ptr(),
                    1,
                );
                for (r, v) in out.iter().enumerate() {
                    *acc.add(8 * t + r) += *v;
                }
            }
        }
    }
}

/// x86_64: the body of both layouts' tiles (one row group, a row per
/// 32-bit lane, x up to 4 activation rows), `S` choosing IQ3_S's front
/// end: per chunk one `vpgatherdd` fetches the 8 rows' grid points, the
/// signs spread over the bytes by `vpshufb` and compared with the chunk's
/// bit masks; AVX2 multiplies `|v|` by the signed activations
/// (`vpmaddubsw`, then `vpmaddwd`), the VNNI forms take `v + 128` as the
/// unsigned byte of `vpdpbusd` and start each 16 weights from their run's
/// `offsets` entry (`-128 * sum(a)`).
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64 {
    use super::IQ3_ROWS;
    use crate::layout::QK_K;
    use crate::x86_64::q6k::TILE_M;
    use crate::x86_64::{Dot, RUN};
    use core::arch::x86_64::*;

    /// Where a layout keeps its parts: its super-block bytes, the chunk
    /// indices, the per-row sign (or IQ3_XXS's sign-and-scale) words, and
    /// for IQ3_S the ninth index bits and the scales; its grid, and `f`.
    pub(crate) struct Front {
        pub(crate) bytes: usize,
        pub(crate) index_at: usize,
        pub(crate) words_at: usize,
        pub(crate) high_at: usize,
        pub(crate) scales_at: usize,
        pub(crate) grid: *const i32,
        pub(crate) factor: f32,
    }

    /// The signs of IQ3_XXS's sign-and-scale words made sign words: byte
    /// `k` of each lane the 7 bits at `7k` and their parity in bit 7.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn xxs_sign_words(aux: __m256i) -> __m256i {
        // SAFETY: register operations; the CPU implements AVX2 (the caller's).
        unsafe {
            let m7 = _mm256_set1_epi32(0x7f);
            let mut t = _mm256_and_si256(aux, m7);
            t = _mm256_or_si256(
                t,
                _mm256_slli_epi32::<8>(_mm256_and_si256(_mm256_srli_epi32::<7>(aux), m7)),
            );
            t = _mm256_or_si256(
                t,
                _mm256_slli_epi32::<16>(_mm256_and_si256(_mm256_srli_epi32::<14>(aux), m7)),
            );
            t = _mm256_or_si256(
                t,
                _mm256_slli_epi32::<24>(_mm256_and_si256(_mm256_srli_epi32::<21>(aux), m7)),
            );
            let nibble = _mm256_set1_epi8(15);
            let count = _mm256_setr_epi8(
                0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3,
                2, 3, 3, 4,
            );
            let lo = _mm256_shuffle_epi8(count, _mm256_and_si256(t, nibble));
            let hi =
                _mm256_shuffle_epi8(count, _mm256_and_si256(_mm256_srli_epi16::<4>(t), nibble));
            let parity = _mm256_and_si256(_mm256_add_epi8(lo, hi), _mm256_set1_epi8(1));
            _mm256_or_si256(t, _mm256_slli_epi16::<7>(parity))
        }
    }

    /// The body of both layouts' tiles, inlined into each so that it is
    /// compiled with its caller's features (`DOT`: a [`Dot`] constant;
    /// `S`: IQ3_S's front end, else IQ3_XXS's).
    ///
    /// # Safety
    /// `wg` holds `nb` super-blocks of `front.bytes`, `qs` `T` rows of `nb *
    /// 256` quants and `d` of `nb` scales; with a VNNI form `offsets` holds
    /// `T * nb * 16` entries (row `t`'s run `k` at `t * nb * 16 + k`); the
    /// CPU implements AVX2, FMA, F16C and the `DOT` form.
    #[inline(always)]
    pub(crate) unsafe fn iq3_tile_body<const T: usize, const DOT: u8, const S: bool>(
        front: &Front,
        wg: &[u8],
        qs: &[i8],
        d: &[f32],
        offsets: &[i32],
        nb: usize,
        res: &mut [[f32; IQ3_ROWS]; TILE_M],
    ) {
        // SAFETY: the loads read super-block `b < nb` of `wg` at the
        // front's offsets inside `front.bytes`, grid points at indices
        // below 256 (IQ3_XXS: a byte) or 512 (IQ3_S: a byte and one bit),
        // block `b` of rows `t < T` of `qs`, `d` and (VNNI) `offsets` (the
        // function contract); unaligned; the CPU implements AVX2, FMA,
        // F16C and the `DOT` form.
        unsafe {
            debug_assert!(wg.len() >= nb * front.bytes && qs.len() >= T * nb * QK_K);
            debug_assert!(DOT == Dot::MADDUBS || offsets.len() >= T * nb * QK_K / RUN);
            let cols = nb * QK_K;
            let bits = [
                _mm256_set1_epi32(0x0804_0201),
                _mm256_set1_epi32(0x8040_2010_u32 as i32),
            ];
            let base = _mm256_setr_epi32(
                0,
                0x0404_0404,
                0x0808_0808,
                0x0c0c_0c0c,
                0,
                0x0404_0404,
                0x0808_0808,
                0x0c0c_0c0c,
            );
            let pattern =
                [0, 1, 2, 3].map(|k| _mm256_add_epi8(base, _mm256_set1_epi32(0x0101_0101 * k)));
            let ones = _mm256_set1_epi16(1);
            let one8 = _mm256_set1_epi8(1);
            let bias = _mm256_set1_epi8(i8::MIN);
            let mut acc = [_mm256_setzero_ps(); T];
            for b in 0..nb {
                let sb = wg.as_ptr().add(b * front.bytes);
                let mut sumi = [_mm256_setzero_si256(); T];
                for p in 0..QK_K / 32 {
                    let word = _mm256_loadu_si256(sb.add(front.words_at + 32 * p).cast());
                    let (scale, signs, high) = if S {
                        let four = sb
                            .add(front.scales_at + 4 * p)
                            .cast::<i32>()
                            .read_unaligned();
                        let s = _mm256_cvtepu8_epi32(_mm_set1_epi32(four));
                        let s = _mm256_and_si256(
                            _mm256_srlv_epi32(s, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi32(15),
                        );
                        let high = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                            sb.add(front.high_at + 8 * p).cast(),
                        ));
                        (s, word, high)
                    } else {
                        let s = _mm256_srli_epi32::<28>(word);
                        (s, xxs_sign_words(word), _mm256_setzero_si256())
                    };
                    let scale =
                        _mm256_or_si256(_mm256_slli_epi32::<1>(scale), _mm256_set1_epi32(1));
                    let mut isum = [_mm256_setzero_si256(); T];
                    for h in 0..2 {
                        let mut s = [_mm256_setzero_si256(); T];
                        if DOT != Dot::MADDUBS {
                            for (t, s_t) in s.iter_mut().enumerate() {
                                let run = (t * cols + b * QK_K + 32 * p + 16 * h) / RUN;
                                *s_t = _mm256_set1_epi32(*offsets.get_unchecked(run));
                            }
                        }
                        for cc in 0..4 {
                            let c = 4 * h + cc;
                            let mut idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                sb.add(front.index_at + 64 * p + 8 * c).cast(),
                            ));
                            if S {
                                let hb = _mm256_and_si256(
                                    _mm256_srlv_epi32(high, _mm256_set1_epi32(c as i32)),
                                    _mm256_set1_epi32(1),
                                );
                                idx = _mm256_or_si256(idx, _mm256_slli_epi32::<8>(hb));
                            }
                            let g = _mm256_i32gather_epi32::<4>(front.grid, idx);
                            let bit = bits[c % 2];
                            let m = _mm256_cmpeq_epi8(
                                _mm256_and_si256(_mm256_shuffle_epi8(signs, pattern[c / 2]), bit),
                                bit,
                            );
                            let at = b * QK_K + 32 * p + 4 * c;
                            if DOT == Dot::MADDUBS {
                                let sign = _mm256_or_si256(m, one8);
                                for (t, isum_t) in isum.iter_mut().enumerate() {
                                    let a = qs.as_ptr().add(t * cols + at);
                                    let av = _mm256_set1_epi32(a.cast::<i32>().read_unaligned());
                                    let pr = _mm256_maddubs_epi16(g, _mm256_sign_epi8(av, sign));
                                    *isum_t =
                                        _mm256_add_epi32(*isum_t, _mm256_madd_epi16(pr, ones));
                                }
                            } else {
                                let v = _mm256_sub_epi8(_mm256_xor_si256(g, m), m);
                                let u = _mm256_xor_si256(v, bias);
                                for (t, s_t) in s.iter_mut().enumerate() {
                                    let a = qs.as_ptr().add(t * cols + at);
                                    let av = _mm256_set1_epi32(a.cast::<i32>().read_unaligned());
                                    *s_t = if DOT == Dot::AVX_VNNI {
                                        _mm256_dpbusd_avx_epi32(*s_t, u, av)
                                    } else {
                                        _mm256_dpbusd_epi32(*s_t, u, av)
                                    };
                                }
                            }
                        }
                        if DOT != Dot::MADDUBS {
                            for (isum_t, s_t) in isum.iter_mut().zip(s) {
                                *isum_t = _mm256_add_epi32(*isum_t, s_t);
                            }
                        }
                    }
                    for (sumi_t, isum_t) in sumi.iter_mut().zip(isum) {
                        *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(scale, isum_t));
                    }
                }
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
                let factor = _mm256_set1_ps(front.factor);
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                    let sum = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi[t]), factor);
                    let v = _mm256_mul_ps(_mm256_mul_ps(dw, da), sum);
                    *acc_t = _mm256_add_ps(*acc_t, v);
                }
            }
            for (r, a) in res.iter_mut().zip(acc) {
                _mm256_storeu_ps(r.as_mut_ptr(), a);
            }
        }
    }
}
