//! Q4_0x4, the whole layout in one file: GGUF Q4_0 blocks, 4 rows
//! interleaved, every value kept exactly (docs/kernels.md, "Q4_0x4"): the
//! decode copy of the `q4` and `dual` modes and of a Q4_0 GGUF. Here are its
//! byte order (its geometry constants are `crate::layout`'s), its repacker (and the 4-row nibble repacking
//! IQ4_NLx4 shares, [`repack_nibble_x4`]), its scalar specification
//! ([`generic`]) and its kernels on aarch64 (the 4-row nibble texts
//! `nibble_gemv_loop!` and `nibble_tile4!` with its nibble decoding
//! `q4_0_nibbles!`, on the one driver) and x86_64 (AVX2 GEMV and tiles; the
//! VNNI tiles of `x86_64/gemm_vnni.rs`), the one of the build also named
//! [`arch`]. The inverse, which only the tests use, is
//! `kestrel_tests::unpack_q4_0`.
//!
//! * Q4_0 (GGUF): 32 weights in 18 bytes: `d: f16 LE`, then 16 bytes; byte
//!   `j` holds weight `j` in its low nibble and weight `j + 16` in its high
//!   nibble (`x = d * (q - 8)`).
//! * Q4_0x4: rows four at a time (a *row group*). For row group `g` and
//!   block column `b` (32 weights) one 72-byte super-block at
//!   `72 (g nb + b)`: the four rows' f16 scales (8 bytes, row 0 first),
//!   then 64 quant bytes. Quant byte `16 * c + 4 * r + k` (chunk `c` 0..4, row `r` 0..4,
//!   `k` 0..4) is byte `4 * c + k` of row `r`'s GGUF block, XOR 0x88: its
//!   low nibble is weight `4c + k`, its high nibble weight `16 + 4c + k`,
//!   both now two's-complement 4-bit values `q - 8`. One 16-byte chunk
//!   holds 4 rows x 4 consecutive weights: exactly one `sdot` by-lane
//!   operand.
//! * Rows past the matrix's last (up to the next multiple of 4) are
//!   all-zero bytes (scale 0). The column count must be a multiple of 32.

use crate::layout::QK;
use crate::shape::ShapeError;

pub use crate::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS, Q4_0_BLOCK_BYTES};
/// What the repacker XORs each nibble byte with: both nibbles `q` become
/// the two's-complement `q - 8`.
pub const Q4_0X4_XOR: u8 = 0x88;

/// Repacks a row-major GGUF Q4_0 matrix (`rows x cols / 32` blocks of 18
/// bytes) into Q4_0x4 (`out`: `ceil(rows / 4) * cols / 32` super-blocks).
pub fn repack_q4_0(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    repack_nibble_x4::<Q4_0X4_XOR>(src, rows, cols, out)
}

/// The 4-row nibble repacking of Q4_0x4 and the layouts of its arrangement
/// (IQ4_NLx4), each nibble byte XOR `XOR`.
pub fn repack_nibble_x4<const XOR: u8>(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    super::repack_row_groups_of(
        Q4X4_ROWS,
        QK,
        [
            "q4_0x4 columns (a multiple of 32)",
            "q4_0 rows bytes",
            "q4_0x4 matrix bytes",
        ],
        src,
        (rows, cols),
        out,
        (Q4_0_BLOCK_BYTES, Q4X4_BLOCK_BYTES),
        |blocks, sb| pack_nibbles(blocks, sb, XOR),
    )
}

/// One super-block from its rows' blocks, each nibble byte XOR `xor`
/// (missing rows: zeros).
#[inline(never)] // one copy for every XOR (it runs only at conversion)
#[cfg_attr(kestrel_shipped, optimize(size))]
fn pack_nibbles(blocks: &[&[u8]], sb: &mut [u8], xor: u8) {
    sb.fill(0);
    for (r, src) in blocks.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
        for (i, &byte) in src[2..Q4_0_BLOCK_BYTES].iter().enumerate() {
            sb[8 + 16 * (i / 4) + 4 * r + i % 4] = byte ^ xor;
        }
    }
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{Q4X4_BLOCK_BYTES, Q4X4_ROWS};
    use crate::generic::{gemm_groups, nibble_x4_group_dot};

    /// The four rows of one Q4_0x4 row group dotted with one activation row.
    pub fn q4x4_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q4X4_ROWS] {
        nibble_x4_group_dot(group, act_qs, act_d, |n| ((n << 4) as i8 >> 4) as i32)
    }

    forwarding_entry!(
        /// GEMV, Q4_0x4 weights x one Q8_0 activation row: `out[r] = W[r] . act`.
        ///
        /// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 72-byte super-blocks;
        /// * `act_qs`: `cols` quants; `act_d`: `cols / 32` scales;
        /// * `out`: `rows` results.
        q8_0 gemv gemv_q4_0x4_q8_0 => gemm_q4_0x4_q8_0
    );

    forwarding_entry!(
        /// GEMM, Q4_0x4 weights x `m` Q8_0 activation rows: `out[t * rows + r] =
        /// W[r] . act[t]`.
        ///
        /// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 72-byte super-blocks;
        /// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
        /// * `out`: `m x rows` results.
        q8_0 gemm gemm_q4_0x4_q8_0 => gemm_groups [Q4X4_BLOCK_BYTES, q4x4_group_dot]
    );
}

/// aarch64: the 4-row nibble texts with Q4_0's nibble decoding, on the one
/// driver.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{Q4X4_BLOCK_BYTES, Q4X4_ROWS};
    use crate::aarch64::gemm::{entry_points, nibble_tile4, GemmKernels};
    use crate::aarch64::gemv::nibble_gemv_loop;

    /// The nibble decoding of a 4-row nibble layout (Q4_0x4 here), one
    /// 16-byte chunk `$src` into the `i8` weights of its low nibbles (`$lo`)
    /// and high nibbles (`$hi`). Q4_0x4 (XOR 0x88, `v31` = 0xf0): `shl #4` and
    /// `and 0xf0` give `16 (q - 8)`, which `scvtf #4` divides back exactly.
    #[rustfmt::skip]
    macro_rules! q4_0_nibbles {
        (setup) => { "movi v31.16b, #0xf0" };
        (fbits) => { ", #4" };
        ($lo:literal, $hi:literal, $src:literal) => { concat!(
            "shl ", $lo, ".16b, ", $src, ".16b, #4\n",
            "and ", $hi, ".16b, ", $src, ".16b, v31.16b",
        ) };
    }

    nibble_gemv_loop!(gemv_q4x4_groups, q4_0_nibbles, []);

    nibble_tile4!(gemm_q4x4_tile4, q4_0_nibbles, []);

    entry_points!(
        q8_0[super::generic],
        gemv_q4_0x4_q8_0,
        gemm_q4_0x4_q8_0,
        GemmKernels {
            group_rows: Q4X4_ROWS,
            block_bytes: Q4X4_BLOCK_BYTES,
            row: gemv_q4x4_groups,
            tile4: Some(gemm_q4x4_tile4),
            small_tiles: None,
            strided: true,
        }
    );
}

/// x86_64: the AVX2 GEMV (one row group at a time) and tiles of two row
/// groups (8 rows) x up to 4 activation rows; with VNNI the tiles of
/// `x86_64/gemm_vnni.rs`.
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{generic, Q4X4_BLOCK_BYTES, Q4X4_ROWS};
    use crate::layout::QK;
    use crate::shape::{gemm_shape, GemmShape, ShapeError};
    use crate::x86_64::gemm::{
        gemm_run, pattern_table, sum_table, table_rows_per_call, tile4_asm, Grid, Pass,
        GEMM_EXPAND_BLOCKS, GEMV_MAX_BLOCKS, TILE_CONSTS, TILE_M,
    };
    use crate::x86_64::{
        act_patterns, gemm_vnni, pair_rows16, prefetch_ahead, prefetch_next_pair, sum_block_pairs,
        Avx2, Vnni,
    };
    use core::arch::asm;
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    forwarding_entry!(
        /// GEMV, Q4_0x4 weights x one Q8_0 activation row: [`gemm_q4_0x4_q8_0`]
        /// with `m = 1`; the same contract as [`generic::gemv_q4_0x4_q8_0`].
        q8_0 gemv gemv_q4_0x4_q8_0 (cpu: Avx2) => gemm_q4_0x4_q8_0
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
        // Calls of `table_rows_per_call` rows: the block-sum and pattern
        // tables' sizes.
        let group_bytes = nb * Q4X4_BLOCK_BYTES;
        let grid = Grid {
            rows,
            units: groups.div_ceil(2),
            m,
            call_rows: table_rows_per_call(nb),
        };
        gemm_run(grid, out, |pass: Pass<'_, 8, TILE_M>| {
            let (c0, c1) = (pass.first, pass.end);
            // c1 - c0 <= table_rows_per_call(nb) and nb <= 384 (above): the
            // tables below hold every block. Checked, since the slices made
            // from them rely on it.
            let blocks = (c1 - c0) * nb;
            assert!(blocks <= GEMM_EXPAND_BLOCKS);
            // `-8 * sum(a)` of every activation block and its patterns (4
            // `vpermd` each), once per call (the tiles add the sum in i32
            // instead of forming it per row pair, and read the patterns
            // instead of forming them again for every pair of row groups).
            let qs = &act_qs[c0 * cols..c1 * cols];
            let mut neg_corr = [MaybeUninit::<i32>::uninit(); GEMM_EXPAND_BLOCKS];
            let neg_corr = sum_table(cpu, qs, blocks, -8, &mut neg_corr);
            let mut patterns = [MaybeUninit::<[__m256i; 4]>::uninit(); GEMM_EXPAND_BLOCKS];
            let patterns = pattern_table(cpu, qs, blocks, &mut patterns);
            // Row groups in pairs (8 rows per vector); an odd last group is
            // paired with itself and only its own rows are stored.
            pass.tiles(|pair, t0, tm, res| {
                let ga = 2 * pair;
                let gb = (ga + 1).min(groups - 1);
                let wa = &w[ga * group_bytes..(ga + 1) * group_bytes];
                let wb = &w[gb * group_bytes..(gb + 1) * group_bytes];
                let i = (t0 - c0) * nb;
                let d = &act_d[t0 * nb..(t0 + tm) * nb];
                let c = &neg_corr[i..i + tm * nb];
                let pt = &patterns[i..i + tm * nb];
                // SAFETY: `wa` and `wb` are whole row groups (`nb` >= 1
                // super-blocks of 72 bytes each, sliced above), `pt`, `d` and
                // `c` hold `tm` rows of `nb` values (sliced above), `res` holds
                // `tm <= 4` rows of 8 floats; the token proves AVX2/FMA/F16C.
                unsafe { q4_tile(tm)(wa, wb, pt, d, c, nb, res) }
            });
        });
        Ok(())
    }

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
            debug_assert!(
                (1..=GEMV_MAX_BLOCKS).contains(&nb) && qs.len() >= nb * QK && d.len() >= nb
            );
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
            debug_assert!(
                patterns.len() >= T * nb && d.len() >= T * nb && neg_corr.len() >= T * nb
            );
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
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
