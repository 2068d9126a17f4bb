//! Q3_Kx8, the whole layout in one file: GGUF Q3_K super-blocks repacked 8
//! rows at a time, every value kept exactly (docs/kernels.md, "Q3_Kx8").
//! Here are its geometry and byte order, its repacker (its inverse, which
//! only the tests use, is `kestrel_tests::unpack_q3_k`), its scalar specification ([`generic`]) and its kernels on
//! aarch64 (the 8-row K text `k8_kernels!` of `aarch64/k8.rs`, its quant
//! decoding `q3k_quants!` a parameter) and x86_64 (tiles that Q6_Kx8's
//! driver `k8_gemm` runs), the one of the build also named [`arch`].
//!
//! A GGUF Q3_K block (110 bytes, 256 weights) is `hmask[32]`, `qs[64]`,
//! `scales[12]` (sixteen 6-bit scales, ggml's packing), `d: f16`; weight `i
//! = 128n + 32j + l` (`n` 0..2, `j` 0..4, `l` 0..32) has `low` = bits `2j,
//! 2j + 1` of `qs[32n + l]` and `q = low - 4` unless bit `4n + j` of
//! `hmask[l]` is set (then `q = low`); its value is `d * (sc[i / 16] - 32) *
//! q` (as `dequantize_row_q3_K`).
//!
//! For row group `g` and super-block column `b` the Q3_Kx8 super-block (880
//! bytes, at `(g * nb + b) * 880`: eight GGUF blocks' size) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * then for each 32-weight block `p` (0..8) 108 bytes at `16 + 108p`:
//!   * 12 bytes, the 16 scales `t = 8h + r` (`h` 0..2: group `2p + h`) as
//!     `u(t) = sc ^ 32`, the 6-bit two's complement of `sc - 32`: byte `k`
//!     (0..8) is `u(k) | (u(8 + k) >> 4) << 6`, byte `8 + m` (0..4) is
//!     `u(8 + m) & 15 | (u(12 + m) & 15) << 4` ([`pack_pair_scales`]);
//!   * for the 16-weight group `j = 2p + h`, with `f(i) = q(i) & 7` (the
//!     3-bit two's complement) and `w = 16j + k`: at `12 + 48h + 4r + k`
//!     (`r` 0..8, `k` 0..4) `f(w) << 5 | f(w + 4) << 2 | f(w + 8) & 3`; at
//!     `12 + 48h + 32 + 4(r % 4) + k`, in the low nibble for `r` < 4 and
//!     the high one otherwise, `(f(w + 8) >> 2) << 3 | f(w + 12)`.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`,
//! `q = 0`).

use crate::layout::{QK, QK_K};
use crate::shape::ShapeError;

/// Bytes of one GGUF Q3_K super-block (256 weights).
pub const Q3_K_BLOCK_BYTES: usize = QK_K / 8 + QK_K / 4 + 12 + 2;
/// Rows in one Q3_Kx8 row group.
pub const Q3KX8_ROWS: usize = 8;
/// Bytes of one Q3_Kx8 32-weight block's 16 packed 6-bit scales.
pub const Q3KX8_SCALE_BYTES: usize = 12;
/// Bytes of one Q3_Kx8 32-weight block: 16 scales, two 48-byte groups.
pub const Q3KX8_PAIR_BYTES: usize = Q3KX8_SCALE_BYTES + 2 * 48;
/// Bytes of one Q3_Kx8 super-block (8 rows x 256 weights): 3.4375 bits per
/// weight, GGUF's Q3_K size.
pub const Q3KX8_BLOCK_BYTES: usize = 2 * Q3KX8_ROWS + (QK_K / QK) * Q3KX8_PAIR_BYTES;

const _: () = assert!(Q3_K_BLOCK_BYTES == 110 && Q3KX8_PAIR_BYTES == 108);
const _: () = assert!(Q3KX8_BLOCK_BYTES == Q3KX8_ROWS * Q3_K_BLOCK_BYTES);

/// The 12 bytes of a 32-weight block's 16 scales `u` (6-bit, `u[t]` for
/// group `2p + t / 8`, row `t % 8`), as the byte order above packs them.
pub fn pack_pair_scales(u: &[u8; 16]) -> [u8; Q3KX8_SCALE_BYTES] {
    let mut b = [0u8; Q3KX8_SCALE_BYTES];
    for k in 0..8 {
        b[k] = (u[k] & 63) | (u[8 + k] >> 4) << 6;
    }
    for m in 0..4 {
        b[8 + m] = (u[8 + m] & 15) | (u[12 + m] & 15) << 4;
    }
    b
}

/// Scale `t` (0..16) of a block's 12 packed bytes, the 6-bit `u`.
#[inline]
pub fn pair_scale(b: &[u8], t: usize) -> u8 {
    if t < 8 {
        return b[t] & 63;
    }
    let k = t - 8;
    let low = if k < 4 { b[8 + k] & 15 } else { b[4 + k] >> 4 };
    (b[k] >> 6) << 4 | low
}

/// Bytes of a `rows x cols` matrix in Q3_Kx8, padding rows included
/// (`None`: it overflows).
pub fn q3_kx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, Q3KX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF Q3_K (`None`: it overflows).
pub fn q3_k_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, Q3_K_BLOCK_BYTES)
}

/// The 3-bit two's complement `q & 7` of weight `i` of a GGUF Q3_K block.
#[inline]
fn gguf_f(block: &[u8], i: usize) -> u8 {
    let (n, j, l) = (i / 128, (i % 128) / 32, i % 32);
    let low = (block[32 + 32 * n + l] >> (2 * j)) & 3;
    let high = (block[l] >> (4 * n + j)) & 1;
    low | (high ^ 1) << 2
}

/// Scale `s` (0..16) of a GGUF Q3_K block, 0..64 (ggml's kmask packing).
#[inline]
fn gguf_scale(block: &[u8], s: usize) -> u8 {
    let lo = if s < 8 {
        block[96 + s] & 0x0f
    } else {
        block[88 + s] >> 4
    };
    lo | ((block[104 + s % 4] >> (2 * (s / 4))) & 3) << 4
}

/// The offsets in a super-block of weight `i`'s two bytes (`R`, `N`) for
/// row `r`, and `N`'s nibble shift (the byte order above, which the tests'
/// inverse of the repacker reads too).
#[inline]
pub fn places(r: usize, i: usize) -> (usize, usize, u32) {
    let (p, h, k) = (i / 32, (i / 16) % 2, i % 4);
    let g = 2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * p + Q3KX8_SCALE_BYTES + 48 * h;
    (g + 4 * r + k, g + 32 + 4 * (r % 4) + k, 4 * (r / 4) as u32)
}

/// Writes one Q3_Kx8 super-block from up to 8 GGUF Q3_K blocks (`src[r]`
/// for row `r`; missing rows are padding).
#[cfg_attr(kestrel_shipped, optimize(size))]
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    let mut u = [[0u8; 16]; QK_K / QK];
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[108..110]);
        for j in 0..QK_K / 16 {
            u[j / 2][Q3KX8_ROWS * (j % 2) + r] = gguf_scale(block, j) ^ 32;
            for k in 0..4 {
                let w = 16 * j + k;
                let f = |s: usize| gguf_f(block, w + 4 * s);
                let (ra, na, shift) = places(r, w);
                sb[ra] = f(0) << 5 | f(1) << 2 | (f(2) & 3);
                sb[na] |= ((f(2) >> 2) << 3 | f(3)) << shift;
            }
        }
    }
    for (p, u) in u.iter().enumerate() {
        let at = 2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * p;
        sb[at..at + Q3KX8_SCALE_BYTES].copy_from_slice(&pack_pair_scales(u));
    }
}

/// Repacks a row-major GGUF Q3_K matrix (`rows x cols`, `cols` a multiple
/// of 256) into Q3_Kx8 (`out`: [`q3_kx8_bytes`] bytes).
pub fn repack_q3_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "q3_k columns (a multiple of 256)",
            "q3_k source bytes",
            "q3_kx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (Q3_K_BLOCK_BYTES, Q3KX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{pair_scale, Q3KX8_BLOCK_BYTES, Q3KX8_PAIR_BYTES, Q3KX8_ROWS, Q3KX8_SCALE_BYTES};
    use crate::generic::{gemm_k_groups, k8_group_dot};
    use crate::layout::QK;

    /// The signed quant (-4..=3) of weight `i` (0..256) of row `r` (0..8) in a
    /// Q3_Kx8 super-block.
    #[inline]
    pub fn q3kx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let g = &sb[2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * (i / QK) + Q3KX8_SCALE_BYTES..];
        let g = &g[48 * ((i / 16) % 2)..][..48];
        let (s, k) = ((i % 16) / 4, i % 4);
        let (rb, nb) = (g[4 * r + k], g[32 + 4 * (r % 4) + k] >> (4 * (r / 4)));
        let f = match s {
            0 => rb >> 5,
            1 => rb >> 2,
            2 => (rb & 3) | ((nb >> 1) & 4),
            _ => nb,
        };
        ((f << 5) as i8 >> 5) as i32
    }

    /// The scale `sc - 32` (-32..=31) of 16-weight group `j` (0..16) of row
    /// `r` in a Q3_Kx8 super-block.
    #[inline]
    pub fn q3kx8_scale(sb: &[u8], r: usize, j: usize) -> i32 {
        let pair = &sb[2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * (j / 2)..];
        let u = pair_scale(pair, Q3KX8_ROWS * (j % 2) + r);
        ((u << 2) as i8 >> 2) as i32
    }

    /// The eight rows of one Q3_Kx8 row group dotted with one Q8_K activation
    /// row.
    pub fn q3kx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q3KX8_ROWS] {
        k8_group_dot(
            Q3KX8_BLOCK_BYTES,
            (q3kx8_weight, q3kx8_scale),
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, Q3_Kx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`], with 880-byte super-blocks).
        q8_k gemv gemv_q3_kx8_q8_k => gemm_q3_kx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, Q3_Kx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`], with 880-byte super-blocks).
        q8_k gemm gemm_q3_kx8_q8_k => gemm_k_groups [Q3KX8_BLOCK_BYTES, |g, q, d, _| q3kx8_group_dot(g, q, d)]
    );
}

/// aarch64: `k8_kernels!` with this layout's quant decoding.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::Q3KX8_BLOCK_BYTES;
    use crate::aarch64::k8::k8_kernels;

    /// One group's 3-bit quants of Q3_Kx8 (`R` rows 0-3 `$r0`, rows 4-7 `$r1`,
    /// `N` `$n`) into the `i8` values `32 q` of chunks 0..4 (`$c0a`, `$c0b`: rows
    /// 0-3, 4-7; ...), `v31` = 0xe0, `$t`, `$u` scratch: chunk 0 is `R & 0xE0`,
    /// chunk 1 `(R << 3) & 0xE0`, chunk 2 the top bit from `N` (`shl #4`, or
    /// as it is for rows 4-7) with `R`'s low bits inserted below it (`sri`),
    /// chunk 3 `N << 5` (rows 0-3) or `(N << 1) & 0xE0`.
    #[rustfmt::skip]
    macro_rules! q3k_group_decode {
        ($r0:literal, $r1:literal, $n:literal, $t:literal, $u:literal,
         [$c0a:literal, $c0b:literal, $c1a:literal, $c1b:literal,
          $c2a:literal, $c2b:literal, $c3a:literal, $c3b:literal]) => { concat!(
            "and ", $c0a, ".16b, ", $r0, ".16b, v31.16b\n",
            "and ", $c0b, ".16b, ", $r1, ".16b, v31.16b\n",
            "shl ", $c1a, ".16b, ", $r0, ".16b, #3\n",
            "shl ", $c1b, ".16b, ", $r1, ".16b, #3\n",
            "and ", $c1a, ".16b, ", $c1a, ".16b, v31.16b\n",
            "and ", $c1b, ".16b, ", $c1b, ".16b, v31.16b\n",
            "shl ", $t, ".16b, ", $r0, ".16b, #6\n",
            "shl ", $c2a, ".16b, ", $n, ".16b, #4\n",
            "sri ", $c2a, ".16b, ", $t, ".16b, #1\n",
            "shl ", $u, ".16b, ", $r1, ".16b, #6\n",
            "mov ", $c2b, ".16b, ", $n, ".16b\n",
            "sri ", $c2b, ".16b, ", $u, ".16b, #1\n",
            "shl ", $c3a, ".16b, ", $n, ".16b, #5\n",
            "shl ", $c3b, ".16b, ", $n, ".16b, #1\n",
            "and ", $c3b, ".16b, ", $c3b, ".16b, v31.16b",
        ) };
    }

    /// The quant decoding of Q3_Kx8 (`v31` = 0xe0): [`q3k_group_decode!`] into
    /// the registers [`q6k_quants!`] fills; the 16 scales of a 32-weight
    /// block unpacked from their 12 bytes into `v0` as `4 (sc - 32)` (10
    /// instructions, `v16`..`v18` scratch); `scvtf #7` undoes the factor 32
    /// of the quants and 4 of the scales.
    /// The GEMV loads its second group after the first one's `sdot`s.
    #[rustfmt::skip]
    macro_rules! q3k_quants {
        (setup) => { "movi v31.16b, #0xe0" };
        (fbits) => { ", #7" };
        (scales) => { concat!(
            "ld1 {{v0.8b}}, [{w}], #8\n", // u(k) | top bits of u(8 + k)
            "ld1 {{v16.s}}[0], [{w}], #4\n", // low nibbles of u(8..16)
            "shl v17.8b, v16.8b, #4\n",
            "ushr v16.8b, v16.8b, #4\n",
            "shl v16.8b, v16.8b, #4\n",
            "ins v17.s[1], v16.s[0]\n", // byte m: (u(8 + m) & 15) << 4
            "mov v18.16b, v0.16b\n",
            "sri v18.8b, v17.8b, #2\n", // u(8 + k) << 2
            "shl v0.8b, v0.8b, #2\n", // u(k) << 2
            "ins v0.d[1], v18.d[0]", // 4 (sc - 32) as i8, scale t in byte t
        ) };
        (tile_load) => { "ld1 {{v16.16b, v17.16b, v18.16b}}, [{w}], #48\n" };
        (tile_decode) => { concat!(q3k_group_decode!("v16", "v17", "v18", "v19", "v28",
            ["v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11"]), "\n") };
        (gemv_load) => { "ld1 {{v10.16b, v11.16b, v12.16b}}, [{w}], #48" };
        (gemv_dec0) => { q3k_group_decode!("v10", "v11", "v12", "v23", "v24",
            ["v1", "v2", "v3", "v4", "v5", "v6", "v21", "v22"]) };
        (gemv_dec1) => { concat!(
            "ld1 {{v1.16b, v2.16b, v3.16b}}, [{w}], #48\n",
            q3k_group_decode!("v1", "v2", "v3", "v16", "v25",
                ["v7", "v8", "v9", "v10", "v11", "v12", "v0", "v15"]),
        ) };
    }

    k8_kernels!(
        [super::generic] gemv_q3_kx8_q8_k,
        gemm_q3_kx8_q8_k,
        gemv_q3kx8_groups,
        gemm_q3kx8_tile4,
        q3k_quants,
        Q3KX8_BLOCK_BYTES
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows, run by Q6_Kx8's driver (`k8_gemm`); AVX2, or
/// `vpdpbusd` with a VNNI form.
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::generic;
    use super::{Q3KX8_BLOCK_BYTES, Q3KX8_PAIR_BYTES, Q3KX8_ROWS, Q3KX8_SCALE_BYTES};
    use crate::layout::QK_K;
    use crate::x86_64::k8::{k8_entry, TILE_M};
    use crate::x86_64::{Dot, RUN};
    use core::arch::x86_64::*;

    k8_entry!(
        "Q3_Kx8",
        gemv_q3_kx8_q8_k,
        gemm_q3_kx8_q8_k,
        Q3K,
        [q3k_tile, q3k_tile_avx_vnni, q3k_tile_avx512_vnni],
        q3k_tile_body,
        Q3KX8_BLOCK_BYTES,
        false,
        generic::gemm_q3_kx8_q8_k,
        wide = avx512::q3kx8_tile
    );

    /// The 16 scales `sc - 32` of the 32-weight block at `pair` as `i8`,
    /// scale `t` (group `t / 8`, row `t % 8`) in byte `t`.
    ///
    /// # Safety
    /// `pair` must point to the block's 12 scale bytes; SSE2 (the x86_64
    /// baseline).
    #[inline(always)]
    unsafe fn pair_scales(pair: *const u8) -> __m128i {
        // SAFETY: the 12 bytes at `pair` are readable (the function
        // contract); unaligned loads.
        unsafe {
            let x = _mm_loadl_epi64(pair.cast());
            let y = _mm_cvtsi32_si128(pair.add(8).cast::<i32>().read_unaligned());
            let m4 = _mm_set1_epi8(15);
            let low6 = _mm_and_si128(x, _mm_set1_epi8(63));
            let top = _mm_and_si128(_mm_srli_epi16::<6>(x), _mm_set1_epi8(3));
            let nib = _mm_unpacklo_epi32(
                _mm_and_si128(y, m4),
                _mm_and_si128(_mm_srli_epi16::<4>(y), m4),
            );
            let high6 = _mm_or_si128(_mm_slli_epi16::<4>(top), nib);
            let u = _mm_unpacklo_epi64(low6, high6);
            let k32 = _mm_set1_epi8(32);
            _mm_sub_epi8(_mm_xor_si128(u, k32), k32)
        }
    }

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
        // and groups at their offsets inside 880 bytes) and block `b` of rows
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
                let mut sc16 = _mm_setzero_si128();
                for j in 0..QK_K / 16 {
                    let pair = sb.add(2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * (j / 2));
                    // A pair's 16 scales unpacked once, for both its groups.
                    let sc = _mm256_cvtepi8_epi32(if j % 2 == 0 {
                        sc16 = pair_scales(pair);
                        sc16
                    } else {
                        _mm_srli_si128::<8>(sc16)
                    });
                    let g = pair.add(Q3KX8_SCALE_BYTES + 48 * (j % 2));
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
                                let av =
                                    _mm256_set1_epi32(a.add(4 * s).cast::<i32>().read_unaligned());
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
                                let av =
                                    _mm256_set1_epi32(a.add(4 * s).cast::<i32>().read_unaligned());
                                v = if DOT == Dot::AVX_VNNI {
                                    crate::x86_64::dpbusd_vex(v, *us, av)
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

    /// The 512-bit GEMM: two row groups per vector, up to 8 activation
    /// rows per tile.
    pub(crate) mod avx512 {
        use super::pair_scales;
        use crate::layout::QK_K;
        use crate::layouts::q3k::{
            Q3KX8_BLOCK_BYTES, Q3KX8_PAIR_BYTES, Q3KX8_ROWS, Q3KX8_SCALE_BYTES,
        };
        use crate::x86_64::gemm_vnni::avx512::{
            pair_blocks, pair_f16, pair_halves, run_dot, store_pair_rows,
        };
        use crate::x86_64::gemm_vnni::{for_each_row, TILE_M};
        use crate::x86_64::RUN;
        use core::arch::x86_64::*;

        /// Two Q3_Kx8 row groups `wa`, `wb` (16 rows) against `T` activation
        /// rows: `res[t]` = the 8 rows of `wa`, then the 8 of `wb`.
        ///
        /// The 256-bit VNNI tile's arithmetic on twice the rows: per
        /// 16-weight group, the chunks of `wa` and of `wb` fill the two
        /// 256-bit halves of one register (lane `i` = row `i`), each byte the
        /// unsigned `32 (q + 4) = (low << 5) | (1 - top) << 7`; per activation
        /// row four `vpdpbusd` with activation dwords broadcast add the
        /// products to the run's `offsets` entry (`-128 * sum(a)`), giving
        /// `32 * isum`; `vpmulld` by the rows' scales adds it to `sumi`. Per
        /// super-block `acc + (d_w * d_a) * (sumi >> 5)`, the reference's
        /// order; exact in i32 (as the 256-bit tile's).
        ///
        /// # Safety
        /// `wa.len()` and `wb.len()` must be at least `nb * 880`, `qs.len()` at
        /// least `T * nb * 256`, `d.len()` at least `T * nb`, `offsets.len()` at
        /// least `T * nb * 16` (row `t`'s run `k` at `t * nb * 16 + k`), `1 <= T
        /// <= TILE_M`, and the CPU must implement AVX512-VNNI with AVX512
        /// F/BW/VL.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn q3kx8_tile<const T: usize>(
            wa: &[u8],
            wb: &[u8],
            qs: &[i8],
            d: &[f32],
            offsets: &[i32],
            nb: usize,
            res: &mut [[f32; 16]; TILE_M],
        ) {
            debug_assert!(T <= TILE_M);
            debug_assert!(wa.len() >= nb * Q3KX8_BLOCK_BYTES && wb.len() >= nb * Q3KX8_BLOCK_BYTES);
            debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb);
            debug_assert!(offsets.len() >= T * nb * QK_K / RUN);
            let (cols, runs) = (nb * QK_K, nb * QK_K / RUN);
            let (m3, m1, m4) = (
                _mm512_set1_epi8(3),
                _mm512_set1_epi8(1),
                _mm_set1_epi8(0x0F),
            );
            let flip = _mm512_set1_epi8(i8::MIN);
            let mut acc = [_mm512_setzero_ps(); T];
            for b in 0..nb {
                // SAFETY: b < nb, both groups hold `nb` super-blocks (the
                // function contract).
                let (sa, sb) = unsafe { pair_blocks(wa, wb, b, nb, Q3KX8_BLOCK_BYTES) };
                let mut sumi = [_mm512_setzero_si512(); T];
                for p in 0..QK_K / 32 {
                    let at = 2 * Q3KX8_ROWS + p * Q3KX8_PAIR_BYTES;
                    // SAFETY: the pair's 12 scale bytes of both super-blocks
                    // (p < 8).
                    let (sca, scb) = unsafe { (pair_scales(sa.add(at)), pair_scales(sb.add(at))) };
                    for h in 0..2 {
                        // Group 2p + h's 8 scales of `wa`, then of `wb`.
                        let sc = _mm512_cvtepi8_epi32(if h == 0 {
                            _mm_unpacklo_epi64(sca, scb)
                        } else {
                            _mm_unpackhi_epi64(sca, scb)
                        });
                        let g = at + Q3KX8_SCALE_BYTES + 48 * h;
                        // SAFETY: the group's 48 bytes at `g` of both
                        // super-blocks (inside their 880); unaligned loads.
                        let (r, n) = unsafe {
                            let (ga, gb) = (sa.add(g), sb.add(g));
                            let r = pair_halves(ga, gb);
                            let half = |n: __m128i| {
                                _mm256_setr_m128i(
                                    _mm_and_si128(n, m4),
                                    _mm_and_si128(_mm_srli_epi16::<4>(n), m4),
                                )
                            };
                            let n = _mm512_inserti64x4::<1>(
                                _mm512_castsi256_si512(half(_mm_loadu_si128(ga.add(32).cast()))),
                                half(_mm_loadu_si128(gb.add(32).cast())),
                            );
                            (r, n)
                        };
                        let and = _mm512_and_si512;
                        let low = [
                            and(_mm512_srli_epi16::<5>(r), m3),
                            and(_mm512_srli_epi16::<2>(r), m3),
                            and(r, m3),
                            and(n, m3),
                        ];
                        let top = [
                            and(_mm512_srli_epi16::<7>(r), m1),
                            and(_mm512_srli_epi16::<4>(r), m1),
                            and(_mm512_srli_epi16::<3>(n), m1),
                            and(_mm512_srli_epi16::<2>(n), m1),
                        ];
                        // (low << 5 | top << 7) ^ 0x80 (0x56: (a | b) ^ c;
                        // 16-bit shifts: the bits stay in their byte).
                        let u: [__m512i; 4] = core::array::from_fn(|s| {
                            _mm512_ternarylogic_epi32::<0x56>(
                                _mm512_slli_epi16::<5>(low[s]),
                                _mm512_slli_epi16::<7>(top[s]),
                                flip,
                            )
                        });
                        for_each_row!(T, |t| {
                            // SAFETY: row t < T, run `16b + 2p + h` < 16 nb of its
                            // offsets and bytes `t * cols + 256b + 32p + 16h ..` +
                            // 16 of `qs` (the function contract); unaligned reads.
                            let (off, ap) = unsafe {
                                (
                                    *offsets.get_unchecked(t * runs + b * (QK_K / RUN) + 2 * p + h),
                                    qs.as_ptr()
                                        .add(t * cols + b * QK_K + 32 * p + 16 * h)
                                        .cast::<i32>(),
                                )
                            };
                            // SAFETY: the run's 16 bytes (above).
                            let v = unsafe { run_dot(off, ap, &u) };
                            sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(sc, v));
                        });
                    }
                }
                // SAFETY: bytes 0..16 of both super-blocks: the rows' f16 `d`.
                let dw = unsafe { pair_f16(sa, sb) };
                for_each_row!(T, |t| {
                    // SAFETY: t < T, b < nb (the function contract).
                    let da = unsafe { *d.get_unchecked(t * nb + b) };
                    let scale = _mm512_mul_ps(dw, _mm512_set1_ps(da));
                    let f = _mm512_cvtepi32_ps(_mm512_srai_epi32::<5>(sumi[t]));
                    acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(scale, f));
                });
            }
            store_pair_rows(res, acc);
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
