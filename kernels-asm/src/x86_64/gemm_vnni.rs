//! The VNNI GEMM tiles: Q4_0x4 and Q8_0x8 weights against up to 8 Q8_0
//! activation rows per pass over a weight tile, with `vpdpbusd` in either
//! encoding: AVX512-VNNI on 512-bit registers (EVEX, 32 registers, 16 weight
//! rows per register; module `avx512`) or AVX-VNNI on 256-bit ones (VEX, 16
//! registers, 8 weight rows; module `avx`). Module `avx512` also holds the
//! Q5_0x4 / Q5_1x4 tiles for GEMMs of more than one activation row (the
//! AVX-VNNI CPUs take the table tiles of `layouts/q5.rs`), and what the
//! 512-bit tiles of `layouts/q4k.rs` (Q4_Kx4, Q5_Kx4) share (`with_rows!`,
//! `for_each_row!`), and the driver and helpers of the 8-row K layouts'
//! two-group tiles (Q6_Kx8, Q3_Kx8, Q2_Kx8, IQ4_XSx8 in their `layouts/`
//! files: `avx512::pair_groups_gemm`); every one runs on the driver
//! `gemm::gemm_run`.
//!
//! Every tile keeps one weight row per 32-bit lane in every register it
//! multiplies, so the activation operand is one dword of the activation block
//! broadcast to all lanes (folded into the EVEX `vpdpbusd` as a `{1to16}`
//! memory operand: no pattern table, no shuffle per activation row), and the i32 sums
//! of a block need no cross-lane step. `vpdpbusd` multiplies unsigned by
//! signed bytes, so the weights are made unsigned by an offset and each
//! block's sums start at minus the offset times `sum(a)` (a table formed once
//! per call: per 32-quant block, or per 16-quant run for the 8-row K
//! layouts; the 4-row K layouts' nibbles and Q2_K's quants are unsigned
//! already and need none): exact in i32, the
//! same sums as the scalar reference, then the reference's float steps in
//! its order.

use super::block_sum;
use super::gemm::{gemm_run, Grid, Pass};
use crate::layout::QK;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Activation rows computed together against one pass over a weight tile.
pub(crate) const TILE_M: usize = 8;

/// The most activation rows one call takes (its block-sum table lives on
/// the stack: `MAX_ROWS * MAX_BLOCKS` i32, 96 KB).
pub(crate) const MAX_ROWS: usize = 64;

/// The most 32-column blocks per row (12,288 columns); wider rows take the
/// AVX2 tiles.
pub(crate) const MAX_BLOCKS: usize = 384;

/// `$tile::<T>(args)` (or `$tile[G](args)`: `$tile::<T, G>(args)`) with the
/// const `T` = `$tm` (1 to [`TILE_M`]): the tiles are generic over their row
/// count so that their loops over rows are written out.
macro_rules! with_rows {
    ($tm:expr, $tile:ident($($arg:expr),*)) => {
        with_rows!($tm, $tile[]($($arg),*))
    };
    ($tm:expr, $tile:ident[$($g:tt),*]($($arg:expr),*)) => {
        match $tm {
            8 => $tile::<8 $(, $g)*>($($arg),*),
            7 => $tile::<7 $(, $g)*>($($arg),*),
            6 => $tile::<6 $(, $g)*>($($arg),*),
            5 => $tile::<5 $(, $g)*>($($arg),*),
            4 => $tile::<4 $(, $g)*>($($arg),*),
            3 => $tile::<3 $(, $g)*>($($arg),*),
            2 => $tile::<2 $(, $g)*>($($arg),*),
            _ => $tile::<1 $(, $g)*>($($arg),*),
        }
    };
}
pub(crate) use with_rows;

/// Runs `$body` for `$t` = 0, 1, ..., `$T - 1` (`$T <= TILE_M`), written
/// out: the compiler leaves a loop over 7 or 8 activation rows rolled, and
/// their accumulators then live on the stack (a store and a load per row and
/// block); written out, every `acc[$t]` is a register.
macro_rules! for_each_row {
    ($T:ident, |$t:ident| $body:block) => {
        for_each_row!(@ $T, $t, $body, 0 1 2 3 4 5 6 7)
    };
    (@ $T:ident, $t:ident, $body:block, $($k:literal)*) => {
        const { assert!($T <= TILE_M) };
        $(
            if $k < $T {
                let $t: usize = $k;
                $body
            }
        )*
    };
}
pub(crate) use for_each_row;

/// `-(sum(a) << shift)` of every 32-byte block of `qs` (`blocks` of them),
/// exact in i32 (|sum| <= 32 * 128, shifted by at most 7).
///
/// # Safety
/// `qs` must hold `blocks * 32` quants, `blocks <= out.len()`, and the CPU
/// must implement AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn neg_block_sums<'a>(
    qs: &[i8],
    blocks: usize,
    shift: u32,
    out: &'a mut [MaybeUninit<i32>],
) -> &'a [i32] {
    debug_assert!(qs.len() >= blocks * QK && out.len() >= blocks && shift <= 7);
    for (i, o) in out.iter_mut().enumerate().take(blocks) {
        // SAFETY: block i < blocks of `qs` is bytes 32i..32i+32; the CPU
        // implements AVX2 (the function contract).
        o.write(-(unsafe { block_sum(qs.as_ptr().add(i * QK)) } << shift));
    }
    // SAFETY: entries 0..blocks were written just above; MaybeUninit<i32>
    // has the layout of i32.
    unsafe { core::slice::from_raw_parts(out.as_ptr().cast(), blocks) }
}

/// Activation row `t`, block `b` of a tile's inputs (`nb` blocks per row):
/// the block's quants as dwords, its scale and its `-offset * sum(a)`.
///
/// # Safety
/// `qs` must hold at least `(t + 1) * nb * 32` quants and `d` and `neg_corr`
/// `(t + 1) * nb` values, with `b < nb`.
#[inline(always)]
unsafe fn row_block(
    qs: &[i8],
    d: &[f32],
    neg_corr: &[i32],
    nb: usize,
    t: usize,
    b: usize,
) -> (*const i32, f32, i32) {
    let i = t * nb + b;
    // SAFETY: i < (t + 1) * nb, inside all three (the function contract).
    unsafe {
        (
            qs.as_ptr().add(i * QK).cast::<i32>(),
            *d.get_unchecked(i),
            *neg_corr.get_unchecked(i),
        )
    }
}

/// One block's contribution to a tile row's 8 sums, in the scalar
/// reference's order: `acc + isum as f32 * (dw * da)` per lane (`sw` the 8
/// weight rows' scales, `da` the activation block's). `|isum| < 2^24`, so
/// its conversion is exact.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn add_block(acc: __m256, isum: __m256i, sw: __m256, da: f32) -> __m256 {
    let scale = _mm256_mul_ps(sw, _mm256_set1_ps(da));
    _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale))
}

/// The driver of the tiles here ([`gemm_run`]): calls of at most
/// [`MAX_ROWS`] activation rows, each forming its table of `-(sum(a) <<
/// shift)` once, then every unit of `W` weight rows (`units` of them)
/// against tiles of up to [`TILE_M`] activation rows. The layout's tile is
/// `tile(unit, quants, scales, sums, tm, res)`: the unit's `W` weight rows
/// (rows `W unit` on) against `tm` activation rows (their quants, scales
/// and `-offset * sum(a)` per block) into `res[..tm]`; it checks nothing (a
/// generic, so the compiler inlines it per layout).
///
/// # Safety
/// `act_qs` must hold `m * nb * 32` quants, `act_d` `m * nb` scales, `out`
/// `m * rows` floats, `units * W >= rows > W * (units - 1)`,
/// `nb <= MAX_BLOCKS`, `shift <= 7`, the CPU must implement AVX2, and
/// `tile` must be safe to call for every unit `< units` and those slices.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_units<const W: usize>(
    (rows, units, nb): (usize, usize, usize),
    shift: u32,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
    tile: impl Fn(usize, &[i8], &[f32], &[i32], usize, &mut [[f32; W]; TILE_M]),
) {
    let cols = nb * QK;
    let grid = Grid {
        rows,
        units,
        m,
        call_rows: MAX_ROWS,
    };
    gemm_run(grid, out, |pass: Pass<'_, W, TILE_M>| {
        let (c0, c1) = (pass.first, pass.end);
        let mut table = [MaybeUninit::<i32>::uninit(); MAX_ROWS * MAX_BLOCKS];
        // SAFETY: rows c0..c1 of `act_qs` hold (c1 - c0) * nb blocks; the
        // table holds MAX_ROWS * MAX_BLOCKS entries; the CPU implements AVX2
        // (the function contract).
        let neg_corr = unsafe {
            neg_block_sums(
                &act_qs[c0 * cols..c1 * cols],
                (c1 - c0) * nb,
                shift,
                &mut table,
            )
        };
        pass.tiles(|unit, t0, tm, res| {
            let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
            let d = &act_d[t0 * nb..(t0 + tm) * nb];
            let c = &neg_corr[(t0 - c0) * nb..(t0 - c0 + tm) * nb];
            tile(unit, qs, d, c, tm, res);
        });
    });
}

/// The AVX-VNNI tiles (VEX `vpdpbusd` on 256-bit registers, 16 of them):
/// 8 weight rows per register.
pub(crate) mod avx {
    use super::{add_block, gemm_units, row_block, MAX_BLOCKS, TILE_M};
    use crate::layout::{Q4X4_BLOCK_BYTES, Q8X8_BLOCK_BYTES, QK};
    use crate::x86_64::prefetch_next_pair;
    use crate::x86_64::{Avx2, Vnni};
    use core::arch::x86_64::*;

    /// GEMM, Q4_0x4 weights x `m` Q8_0 activation rows with the VNNI tile: the
    /// contract of [`super::gemm_q4_0x4_q8_0`] after its shape checks, for
    /// `1 <= nb <= MAX_BLOCKS`, `rows >= 1`, `m >= 1`.
    ///
    /// # Safety
    /// `w` holds `groups` row groups of `nb` 72-byte super-blocks with
    /// `rows <= 4 * groups`, `act_qs` `m * nb * 32` quants, `act_d` `m * nb`
    /// scales, `out` `m * rows` floats; the token says `Vnni::Avx`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_q4_0x4(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        groups: usize,
        nb: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) {
        debug_assert!(cpu.vnni() == Vnni::Avx && (1..=MAX_BLOCKS).contains(&nb));
        let group_bytes = nb * Q4X4_BLOCK_BYTES;
        let group = |g: usize| &w[g * group_bytes..(g + 1) * group_bytes];
        // Row groups in pairs (8 rows per vector); an odd last group is
        // paired with itself and only its own rows are stored.
        let tile = |pair: usize, qs: &[i8], d: &[f32], c: &[i32], tm: usize, res: &mut _| {
            let (wa, wb) = (group(2 * pair), group((2 * pair + 1).min(groups - 1)));
            // SAFETY: `wa` and `wb` are whole row groups (`nb` super-blocks
            // of 72 bytes, sliced above), `gemm_units` passes `tm` (1 to
            // TILE_M) rows of `nb * 32` quants and of `nb` scales and
            // sums; the token proves AVX2, FMA, F16C and AVX-VNNI.
            unsafe { with_rows!(tm, q4x4_tile(wa, wb, qs, d, c, nb, res)) }
        };
        // `-8 sum(a)` per block: the nibbles are unsigned (n = q + 8).
        // SAFETY: the shapes as `gemm_units` needs them (the function
        // contract: 8 rows per pair of groups); the token proves AVX2.
        unsafe {
            gemm_units(
                (rows, groups.div_ceil(2), nb),
                3,
                act_qs,
                act_d,
                m,
                out,
                tile,
            )
        };
    }

    /// One Q4_0x4 weight tile (row groups `wa` and `wb`, 8 rows) against `T`
    /// activation rows: `res[t]` = the 4 rows of `wa` then the 4 rows of `wb`.
    ///
    /// Per super-block: chunk `c` (16 bytes: 4 rows x 4 bytes) of `wa` and of
    /// `wb` fill the two 128-bit halves of one register, so lane `i` is row `i`
    /// of the tile; the XOR 0x88 is undone and the low and high nibbles `n`
    /// (0..15: weights `4c..4c+3` and `16+4c..16+4c+3`) split out. Per
    /// activation row, `vpdpbusd` adds `n * a` with the activation dword `c`
    /// (low) or `4 + c` (high) broadcast, in two chains (low, high) of four;
    /// the low chain starts at `-8 sum(a)` (`neg_corr`), so the sum of the two
    /// is `sum (n - 8) a`, exact in i32 (|.| <= 32 * 15 * 128).
    ///
    /// # Safety
    /// `wa.len()` and `wb.len()` must be at least `nb * 72`, `qs.len()` at least
    /// `T * nb * 32`, `d.len()` and `neg_corr.len()` at least `T * nb`,
    /// `1 <= T <= TILE_M`, and the CPU must implement AVX2, FMA, F16C and AVX-VNNI.
    #[cfg_attr(
        not(kestrel_avx_vnni_as_evex),
        target_feature(enable = "avx2,fma,f16c,avxvnni")
    )]
    #[cfg_attr(
        kestrel_avx_vnni_as_evex,
        target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
    )]
    unsafe fn q4x4_tile<const T: usize>(
        wa: &[u8],
        wb: &[u8],
        qs: &[i8],
        d: &[f32],
        neg_corr: &[i32],
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) {
        debug_assert!(T <= TILE_M && wa.len() >= nb * 72 && wb.len() >= nb * 72);
        debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb && neg_corr.len() >= T * nb);
        let m4 = _mm256_set1_epi8(0x0F);
        let x88 = _mm256_set1_epi8(0x88u8 as i8);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            // SAFETY: block b < nb of `wa` and `wb` is bytes 72b..72b+72 (the
            // function contract).
            let (pa, pb) = unsafe {
                (
                    wa.as_ptr().add(b * Q4X4_BLOCK_BYTES),
                    wb.as_ptr().add(b * Q4X4_BLOCK_BYTES),
                )
            };
            prefetch_next_pair(wb, nb, b);
            // [low nibbles of chunk c, high nibbles of chunk c], rows a0-3 | b0-3.
            let nibbles = |c: usize| {
                // SAFETY: bytes 8 + 16c .. 24 + 16c (c < 4) of a 72-byte
                // super-block; unaligned loads.
                let x = unsafe {
                    _mm256_inserti128_si256::<1>(
                        _mm256_castsi128_si256(_mm_loadu_si128(pa.add(8 + 16 * c).cast())),
                        _mm_loadu_si128(pb.add(8 + 16 * c).cast()),
                    )
                };
                let x = _mm256_xor_si256(x, x88);
                (
                    _mm256_and_si256(x, m4),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4),
                )
            };
            let n: [(__m256i, __m256i); 4] = core::array::from_fn(nibbles);
            // Scales of the 8 rows: 4 f16 of group a, then 4 of group b.
            // SAFETY: bytes 0..8 of both super-blocks.
            let sw = unsafe {
                _mm256_cvtph_ps(_mm_unpacklo_epi64(
                    _mm_loadl_epi64(pa.cast()),
                    _mm_loadl_epi64(pb.cast()),
                ))
            };
            for_each_row!(T, |t| {
                let acc_t = &mut acc[t];
                // SAFETY: t < T and b < nb (the function contract: `T`
                // rows of `nb` blocks).
                let (ap, da, c) = unsafe { row_block(qs, d, neg_corr, nb, t, b) };
                // SAFETY: dword k < 8 of the block; unaligned read.
                let a = |k: usize| _mm256_set1_epi32(unsafe { ap.add(k).read_unaligned() });
                let mut isum = _mm256_set1_epi32(c);
                for (k, &(nl, nh)) in n.iter().enumerate() {
                    isum = crate::x86_64::dpbusd_vex(isum, nl, a(k));
                    isum = crate::x86_64::dpbusd_vex(isum, nh, a(4 + k));
                }
                *acc_t = add_block(*acc_t, isum, sw, da);
            });
        }
        for (r, a) in res.iter_mut().zip(acc) {
            // SAFETY: `r` is 8 writable floats.
            unsafe { _mm256_storeu_ps(r.as_mut_ptr(), a) };
        }
    }

    /// GEMM, Q8_0x8 weights x `m` Q8_0 activation rows with the VNNI tile: the
    /// contract of [`super::gemm_q8_0x8_q8_0`] after its shape checks, for
    /// `1 <= nb <= MAX_BLOCKS`, `rows >= 1`, `m >= 1`. Any activation quant
    /// (-128 too).
    ///
    /// # Safety
    /// `w` holds `groups` row groups of `nb` 272-byte super-blocks with
    /// `rows <= 8 * groups`, `act_qs` `m * nb * 32` quants, `act_d` `m * nb`
    /// scales, `out` `m * rows` floats; the token says `Vnni::Avx`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_q8_0x8(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        groups: usize,
        nb: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) {
        debug_assert!(cpu.vnni() == Vnni::Avx && (1..=MAX_BLOCKS).contains(&nb));
        let group_bytes = nb * Q8X8_BLOCK_BYTES;
        let tile = |g: usize, qs: &[i8], d: &[f32], c: &[i32], tm: usize, res: &mut _| {
            let wg = &w[g * group_bytes..(g + 1) * group_bytes];
            // SAFETY: `wg` is a whole row group (`nb` super-blocks of 272
            // bytes, sliced above), `gemm_units` passes `tm` (1 to TILE_M)
            // rows of `nb * 32` quants and of `nb` scales and sums; the
            // token proves AVX2, FMA, F16C and AVX-VNNI.
            unsafe { with_rows!(tm, q8x8_tile(wg, qs, d, c, nb, res)) }
        };
        // `-128 sum(a)` per block: the weights are offset by 128.
        // SAFETY: the shapes as `gemm_units` needs them (the function
        // contract: 8 rows per group); the token proves AVX2.
        unsafe { gemm_units((rows, groups, nb), 7, act_qs, act_d, m, out, tile) };
    }

    /// One Q8_0x8 row group (8 rows) against `T` activation rows.
    ///
    /// Chunk `c` of a super-block (32 bytes) is one register whose 32-bit lanes
    /// are the 8 rows' weights `4c..4c+3`; `xor 0x80` makes them `w + 128`
    /// (0..255, unsigned). Per activation row, `vpdpbusd` adds `(w + 128) * a`
    /// with the activation dword `c` broadcast, in two chains (even and odd
    /// chunks) of four; the even chain starts at `-128 sum(a)` (`neg_corr`), so
    /// the sum of the two is `sum w a`, exact in i32 (|.| <= 32 * 255 * 128).
    ///
    /// # Safety
    /// `w.len()` must be at least `nb * 272`, `qs.len()` at least
    /// `T * nb * 32`, `d.len()` and `neg_corr.len()` at least `T * nb`,
    /// `1 <= T <= TILE_M`, and the CPU must implement AVX2, FMA, F16C and AVX-VNNI.
    #[cfg_attr(
        not(kestrel_avx_vnni_as_evex),
        target_feature(enable = "avx2,fma,f16c,avxvnni")
    )]
    #[cfg_attr(
        kestrel_avx_vnni_as_evex,
        target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
    )]
    unsafe fn q8x8_tile<const T: usize>(
        w: &[u8],
        qs: &[i8],
        d: &[f32],
        neg_corr: &[i32],
        nb: usize,
        res: &mut [[f32; 8]; TILE_M],
    ) {
        debug_assert!(T <= TILE_M && w.len() >= nb * Q8X8_BLOCK_BYTES);
        debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb && neg_corr.len() >= T * nb);
        let x80 = _mm256_set1_epi8(-128);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            // SAFETY: block b < nb of `w` is bytes 272b..272b+272.
            let p = unsafe { w.as_ptr().add(b * Q8X8_BLOCK_BYTES) };
            // Prefetch the next row group (the bytes after `w`) at the rate this
            // one is read; a prefetch never faults, `wrapping_add` keeps the
            // address arithmetic defined.
            let pf = p.wrapping_add(nb * Q8X8_BLOCK_BYTES);
            for k in 0..5 {
                _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64 * k).cast());
            }
            let u: [__m256i; 8] = core::array::from_fn(|c| {
                // SAFETY: bytes 16 + 32c .. 48 + 32c (c < 8) of the
                // super-block; unaligned load.
                let chunk = unsafe { _mm256_loadu_si256(p.add(16 + 32 * c).cast()) };
                _mm256_xor_si256(chunk, x80)
            });
            // SAFETY: bytes 0..16 of the super-block: the 8 rows' f16 scales.
            let sw = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) };
            for_each_row!(T, |t| {
                let acc_t = &mut acc[t];
                // SAFETY: t < T and b < nb (the function contract: `T`
                // rows of `nb` blocks).
                let (ap, da, c) = unsafe { row_block(qs, d, neg_corr, nb, t, b) };
                // SAFETY: dword k < 8 of the block; unaligned read.
                let a = |k: usize| _mm256_set1_epi32(unsafe { ap.add(k).read_unaligned() });
                let mut isum = _mm256_set1_epi32(c);
                for (k, &u_k) in u.iter().enumerate() {
                    isum = crate::x86_64::dpbusd_vex(isum, u_k, a(k));
                }
                *acc_t = add_block(*acc_t, isum, sw, da);
            });
        }
        for (r, a) in res.iter_mut().zip(acc) {
            // SAFETY: `r` is 8 writable floats.
            unsafe { _mm256_storeu_ps(r.as_mut_ptr(), a) };
        }
    }
}

/// The AVX512-VNNI tiles (EVEX `vpdpbusd` on 512-bit registers, 32 of
/// them): 16 weight rows per register, two Q8_0x8 row groups or four
/// Q4_0x4 ones side by side, so each broadcast activation dword (a
/// `{1to16}` memory operand) multiplies twice the rows of the 256-bit tiles.
/// On a CPU with two 512-bit multiply ports (Intel's Xeons) that is twice
/// the multiplies per cycle; where a 512-bit operation takes two 256-bit
/// passes it is the same multiplies in half the instructions.
pub(crate) mod avx512 {
    use super::{gemm_units, row_block, MAX_BLOCKS, MAX_ROWS, TILE_M};
    use crate::layout::QK_K;
    use crate::layout::{
        Q4X4_BLOCK_BYTES, Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE, Q5_1X4_BLOCK_BYTES,
        Q5_1X4_MINS, Q5_1X4_NIBBLES, Q5_1X4_PLANE, Q8X8_BLOCK_BYTES, QK,
    };
    use crate::x86_64::gemm::{gemm_run, Grid, Pass};
    use crate::x86_64::{offset_table, RUN};
    use crate::x86_64::{Avx2, Vnni};
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// The weights of [`pair_groups_gemm`]: `groups` row groups of 8 rows,
    /// each `nb` super-blocks of `block_bytes`, holding `rows` rows.
    pub(crate) struct PairGroups {
        pub(crate) rows: usize,
        pub(crate) groups: usize,
        pub(crate) nb: usize,
        pub(crate) block_bytes: usize,
    }

    /// A 512-bit tile of an 8-row K layout, `(wa, wb, qs, d, offsets, nb,
    /// res)`: two whole row groups (`nb` super-blocks each) against `T`
    /// activation rows (`qs`, `d`, `offsets`: `T` rows of `nb * 256`
    /// quants, `nb` scales and `nb * 16` [`offset_table`] runs) into
    /// `res[t]`: the 8 rows of `wa`, then the 8 of `wb`. Its safety
    /// contract: those lengths, `1 <= T <= TILE_M`, and a CPU with
    /// AVX512-VNNI and AVX512 F/BW/VL.
    pub(crate) type PairTile =
        unsafe fn(&[u8], &[u8], &[i8], &[f32], &[i32], usize, &mut [[f32; 16]; TILE_M]);

    /// `[$tile::<1>, ..., $tile::<TILE_M>]`: a layout's [`PairTile`] for
    /// each activation row count.
    macro_rules! pair_tiles {
        ($module:ident :: $tile:ident) => {
            [
                $module::$tile::<1>,
                $module::$tile::<2>,
                $module::$tile::<3>,
                $module::$tile::<4>,
                $module::$tile::<5>,
                $module::$tile::<6>,
                $module::$tile::<7>,
                $module::$tile::<8>,
            ]
        };
    }
    pub(crate) use pair_tiles;
    const _: () = assert!(TILE_M == 8, "pair_tiles! lists TILE_M tiles");

    /// Activation rows per call of [`pair_groups_gemm`]: its offset table (one
    /// i32 per 16 quants, rows of up to [`MAX_BLOCKS`] blocks) is 96 KB.
    const PAIR_CALL_ROWS: usize = MAX_ROWS / 2;

    /// The 512-bit GEMM of an 8-row K layout (Q6_Kx8, Q3_Kx8, Q2_Kx8,
    /// IQ4_XSx8) on the driver [`gemm_run`]: row groups in pairs (16 rows
    /// per vector; an odd last group is paired with itself and only its own
    /// rows are stored) x tiles of up to [`TILE_M`] activation rows
    /// (`tiles[T - 1]`), in calls of at most [`PAIR_CALL_ROWS`] rows that
    /// form their rows' offset table once.
    ///
    /// # Safety
    /// `w` holds `groups >= 1` row groups of `nb >= 1` super-blocks of
    /// `block_bytes` with `rows <= 8 * groups`, `nb * 8 <= MAX_BLOCKS`;
    /// `act_qs` `m * nb * 256` quants, `act_d` `m * nb` scales, `out` `m *
    /// rows` floats, `m >= 1`; the token says `Vnni::Avx512`; `tiles` are
    /// the layout's tiles for super-blocks of `block_bytes` ([`PairTile`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn pair_groups_gemm(
        cpu: Avx2,
        shape: PairGroups,
        tiles: &[PairTile; TILE_M],
        w: &[u8],
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) {
        let PairGroups {
            rows,
            groups,
            nb,
            block_bytes,
        } = shape;
        debug_assert!(cpu.vnni() == Vnni::Avx512 && nb >= 1 && nb * 8 <= MAX_BLOCKS);
        let (cols, runs) = (nb * QK_K, nb * QK_K / RUN);
        let group_bytes = nb * block_bytes;
        let group = |g: usize| &w[g.min(groups - 1) * group_bytes..][..group_bytes];
        let grid = Grid {
            rows,
            units: groups.div_ceil(2),
            m,
            call_rows: PAIR_CALL_ROWS,
        };
        gemm_run(grid, out, |pass: Pass<'_, 16, TILE_M>| {
            let (c0, c1) = (pass.first, pass.end);
            let mut table = [MaybeUninit::<i32>::uninit(); PAIR_CALL_ROWS * 2 * MAX_BLOCKS];
            let offsets = offset_table(&act_qs[c0 * cols..c1 * cols], &mut table);
            pass.tiles(|unit, t0, tm, res| {
                let (wa, wb) = (group(2 * unit), group(2 * unit + 1));
                let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
                let d = &act_d[t0 * nb..(t0 + tm) * nb];
                let o = &offsets[(t0 - c0) * runs..(t0 - c0 + tm) * runs];
                // SAFETY: `wa` and `wb` are whole row groups (`nb`
                // super-blocks of `block_bytes`, sliced above); `qs`, `d`
                // and `o` hold `tm` (1 to TILE_M) activation rows of `cols`
                // quants, `nb` scales and `runs` offsets (sliced above); the
                // token proves AVX512-VNNI with F/BW/VL; `tiles` are the
                // layout's (the function contract).
                unsafe { tiles[tm - 1](wa, wb, qs, d, o, nb, res) };
            });
        });
    }

    /// Super-block `b` of the row groups `wa` and `wb` (`bytes` each), with
    /// a prefetch of super-blocks `b` and `b + 1` of the group after `wb`
    /// (the next pair's first group, when it exists; its second is not
    /// prefetched).
    ///
    /// # Safety
    /// `b < nb` and both groups hold `nb` super-blocks of `bytes`.
    #[inline(always)]
    pub(crate) unsafe fn pair_blocks(
        wa: &[u8],
        wb: &[u8],
        b: usize,
        nb: usize,
        bytes: usize,
    ) -> (*const u8, *const u8) {
        // SAFETY: super-block b < nb of each group is bytes `b * bytes ..`
        // of it (the function contract).
        let (sa, sb) = unsafe { (wa.as_ptr().add(b * bytes), wb.as_ptr().add(b * bytes)) };
        prefetch(sb, nb * bytes + b * bytes, 2 * bytes);
        (sa, sb)
    }

    /// The 32 bytes at `a` and the 32 at `b` as the two 256-bit halves of
    /// one register (a row group's 8 rows, then the other's).
    ///
    /// # Safety
    /// Both 32-byte ranges are readable; the CPU implements AVX512 F.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) unsafe fn pair_halves(a: *const u8, b: *const u8) -> __m512i {
        // SAFETY: the function contract; unaligned loads.
        unsafe {
            _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_loadu_si256(a.cast())),
                _mm256_loadu_si256(b.cast()),
            )
        }
    }

    /// The 8 f16 at `a` and the 8 at `b` (two groups' per-row scales)
    /// widened to 16 floats.
    ///
    /// # Safety
    /// Both 16-byte ranges are readable; the CPU implements AVX512 F.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) unsafe fn pair_f16(a: *const u8, b: *const u8) -> __m512 {
        // SAFETY: the function contract; unaligned loads.
        unsafe {
            _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(a.cast())),
                _mm_loadu_si128(b.cast()),
            ))
        }
    }

    /// `start + sum_k u[k] * a_k` per lane, with `vpdpbusd` (`u` unsigned
    /// bytes, `a_k` the activation dword `k` at `ap`, broadcast): one
    /// 16-weight run of 16 rows against one activation row.
    ///
    /// # Safety
    /// The 16 bytes at `ap` are readable; the CPU implements AVX512-VNNI
    /// with AVX512 F.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) unsafe fn run_dot(start: i32, ap: *const i32, u: &[__m512i; 4]) -> __m512i {
        let mut v = _mm512_set1_epi32(start);
        for (k, &uk) in u.iter().enumerate() {
            // SAFETY: dword k < 4 of the run (the function contract);
            // unaligned read.
            let a = _mm512_set1_epi32(unsafe { ap.add(k).read_unaligned() });
            v = _mm512_dpbusd_epi32(v, uk, a);
        }
        v
    }

    /// Stores a pair tile's `T` accumulators into `res`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn store_pair_rows<const T: usize>(res: &mut [[f32; 16]; TILE_M], acc: [__m512; T]) {
        for (r, a) in res.iter_mut().zip(acc) {
            // SAFETY: `r` is 16 writable floats.
            unsafe { _mm512_storeu_ps(r.as_mut_ptr(), a) };
        }
    }

    /// One block's contribution to a tile row's 16 sums, in the scalar
    /// reference's order: `acc + isum as f32 * (dw * da)` per lane (`sw` the
    /// 16 weight rows' scales, `da` the activation block's). `|isum| < 2^24`,
    /// so its conversion is exact.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    fn add_block(acc: __m512, isum: __m512i, sw: __m512, da: f32) -> __m512 {
        let scale = _mm512_mul_ps(sw, _mm512_set1_ps(da));
        _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), scale))
    }

    /// The 16 bytes at `at` of each of the four super-blocks `p`, one per
    /// 128-bit quarter (quarter `j` from `p[j]`): in the 4-row layouts, whose
    /// 16-byte chunks are 4 rows x 4 bytes, lane `4j + r` is row `r` of
    /// group `j`.
    ///
    /// # Safety
    /// `p[j] + at .. p[j] + at + 16` must be readable for every `j`; the CPU
    /// must implement AVX512 F/BW/VL.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) unsafe fn load_quarters(p: &[*const u8; 4], at: usize) -> __m512i {
        // SAFETY: the four 16-byte reads the contract names; unaligned.
        unsafe {
            let q = |j: usize| _mm_loadu_si128(p[j].add(at).cast());
            let x = _mm512_castsi128_si512(q(0));
            let x = _mm512_inserti32x4::<1>(x, q(1));
            let x = _mm512_inserti32x4::<2>(x, q(2));
            _mm512_inserti32x4::<3>(x, q(3))
        }
    }

    /// The four f16 at `at` of each of the four super-blocks `p` (the 4
    /// rows' scales, or minimums), in group order, as 16 f32.
    ///
    /// # Safety
    /// `p[j] + at .. p[j] + at + 8` must be readable for every `j`; the CPU
    /// must implement AVX512 F/BW/VL.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) unsafe fn f16_quarters(p: &[*const u8; 4], at: usize) -> __m512 {
        // SAFETY: the four 8-byte reads the contract names; unaligned.
        let s = |j: usize| unsafe { p[j].add(at).cast::<i64>().read_unaligned() };
        _mm512_cvtph_ps(_mm256_setr_epi64x(s(0), s(1), s(2), s(3)))
    }

    /// Prefetches the `bytes` of block `b` of the row groups after a unit's
    /// (`ahead` bytes on from `p`, the unit's last group at block `b`); a
    /// prefetch never faults, `wrapping_add` keeps the address arithmetic
    /// defined.
    #[inline(always)]
    pub(crate) fn prefetch(p: *const u8, ahead: usize, bytes: usize) {
        let pf = p.wrapping_add(ahead);
        for k in 0..bytes.div_ceil(64) {
            // SAFETY: a prefetch of any address is defined (it never faults).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64 * k).cast()) };
        }
    }

    /// The 4-row nibble layouts of [`gemm_nib4`]: their super-block bytes,
    /// the offsets of their nibbles and fifth-bit plane, and the shift of
    /// the per-block `sum(a)` that starts each chain (`-2^shift sum(a)`, the
    /// offset that makes the weights unsigned; Q5_1x4: `-sum(a)`, the
    /// reference's `asum` negated).
    pub(crate) struct Nib4;

    impl Nib4 {
        /// Q4_0x4: nibbles XOR 0x88, `n = q + 8`.
        pub(crate) const Q4_0: u8 = 0;
        /// Q5_0x4: nibbles and plane, `q = value + 16`.
        pub(crate) const Q5_0: u8 = 1;
        /// Q5_1x4: nibbles and plane, `q` as it is, and the minimums.
        pub(crate) const Q5_1: u8 = 2;
        /// A table layout (IQ4_NLx4): nibbles indexing 16 values (given
        /// to [`gemm_nib4`]), offset by 128.
        pub(crate) const TABLE: u8 = 3;
        /// The values argument of the kinds without a table.
        pub(crate) const NO_VALUES: [i8; 16] = [0; 16];

        /// `(super-block bytes, nibbles at, plane at, shift)` of `kind`.
        const fn layout(kind: u8) -> (usize, usize, usize, u32) {
            match kind {
                Nib4::Q4_0 => (Q4X4_BLOCK_BYTES, 8, 0, 3),
                Nib4::Q5_0 => (Q5_0X4_BLOCK_BYTES, Q5_0X4_NIBBLES, Q5_0X4_PLANE, 4),
                Nib4::Q5_1 => (Q5_1X4_BLOCK_BYTES, Q5_1X4_NIBBLES, Q5_1X4_PLANE, 0),
                _ => (Q4X4_BLOCK_BYTES, 8, 0, 7),
            }
        }
    }

    /// GEMM of a 4-row nibble layout ([`Nib4`] `KIND`, a table kind's
    /// nibble `values`) x `m` Q8_0 activation rows with the 512-bit tile:
    /// the contract of its entry point (`gemm_q4_0x4_q8_0`,
    /// `q5::gemm_q5_0x4_q8_0`, ...) after its shape checks, for `1 <= nb <=
    /// MAX_BLOCKS`, `rows >= 1`, `m >= 1`.
    ///
    /// # Safety
    /// `w` holds `groups` row groups of `nb` super-blocks of the layout's
    /// size with `rows <= 4 * groups`, `act_qs` `m * nb * 32` quants,
    /// `act_d` `m * nb` scales, `out` `m * rows` floats; the token says
    /// `Vnni::Avx512`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_nib4<const KIND: u8>(
        cpu: Avx2,
        values: &[i8; 16],
        w: &[u8],
        rows: usize,
        groups: usize,
        nb: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) {
        debug_assert!(cpu.vnni() == Vnni::Avx512 && (1..=MAX_BLOCKS).contains(&nb));
        let (block_bytes, _, _, shift) = Nib4::layout(KIND);
        let group_bytes = nb * block_bytes;
        // Row groups in fours (16 rows per vector); past the last group the
        // last one is repeated and only real rows are stored.
        let group = |g: usize| &w[g.min(groups - 1) * group_bytes..][..group_bytes];
        let tile = |unit: usize, qs: &[i8], d: &[f32], c: &[i32], tm: usize, res: &mut _| {
            let g: [&[u8]; 4] = core::array::from_fn(|j| group(4 * unit + j));
            // SAFETY: each of `g` is a whole row group (`nb` super-blocks of
            // the layout's size, sliced above), `gemm_units` passes `tm` (1
            // to TILE_M) rows of `nb * 32` quants and of `nb` scales and
            // sums; the token proves AVX512-VNNI with AVX512 F/BW/VL.
            unsafe { with_rows!(tm, nib4_tile[KIND](g, values, qs, d, c, nb, res)) }
        };
        // SAFETY: the shapes as `gemm_units` needs them (the function
        // contract: 16 rows per four groups); the token proves AVX2.
        unsafe {
            gemm_units(
                (rows, groups.div_ceil(4), nb),
                shift,
                act_qs,
                act_d,
                m,
                out,
                tile,
            )
        };
    }

    /// One weight tile of a 4-row nibble layout ([`Nib4`] `KIND`: the four
    /// row groups `g`, 16 rows) against `T` activation rows: `res[t]` = the
    /// 4 rows of `g[0]`, then of `g[1]`, ...
    ///
    /// Per super-block: chunk `c` of the four groups' nibbles fills the
    /// four 128-bit quarters of one register (lane `i` is row `i`), split
    /// into low and high nibbles `n` (0..15): weights `4c..4c+3` and
    /// `16+4c..16+4c+3`. Q4_0x4 undoes the XOR 0x88 first (`n = q + 8`);
    /// a table kind looks `n` up (`vpshufb`) in `values + 128`. Q5: the four
    /// 16-byte fifth-bit planes fill one register the same way (lane `i`
    /// the plane dword of row `i`: byte `k` holds the bits of the weights
    /// at position `k` of each chunk); `vpslld` by `4 - c` (low nibbles)
    /// or `vpsrld` by `c` (high) brings plane bit `c` or `4 + c` of every
    /// byte to bit 4 (neighbouring bytes' bits land below bit 4 or above
    /// it), and one `vpternlogd` forms `n | (!plane & 0x10)`, the unsigned
    /// `q` = value + 16 (0..31). Per activation row, `vpdpbusd` adds `q *
    /// a` with activation dword `c` (low) or `4 + c` (high) broadcast, one
    /// chain of eight. Q5_0: the chain starts at `-16 sum(a)` (`neg_corr`),
    /// so it ends at the reference's `sum (q - 16) a`, then `acc + isum *
    /// (dw * da)`. Q5_1: it starts at 0 (the reference's `qsum`), and
    /// `asum = -neg_corr`; `acc + (qsum * (dw * da) + asum * (mw * da))`,
    /// the reference's order. Q4_0x4 and the table kind are Q5_0x4's with their
    /// offsets, 8 and 128. Every sum is exact in i32 (|.| <= 32 * 255 * 128
    /// + 128 * 32 * 128).
    ///
    /// # Safety
    /// Every `g[j].len()` must be at least `nb` super-blocks of the
    /// layout's size, `qs.len()` at least `T * nb * 32`, `d.len()` and
    /// `neg_corr.len()` at least `T * nb`, `1 <= T <= TILE_M`, and the CPU
    /// must implement AVX512-VNNI with AVX512 F/BW/VL.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn nib4_tile<const T: usize, const KIND: u8>(
        g: [&[u8]; 4],
        values: &[i8; 16],
        qs: &[i8],
        d: &[f32],
        neg_corr: &[i32],
        nb: usize,
        res: &mut [[f32; 16]; TILE_M],
    ) {
        let (bytes, nibbles, plane, _) = Nib4::layout(KIND);
        let q51 = KIND == Nib4::Q5_1;
        let plain = KIND == Nib4::Q4_0 || KIND == Nib4::TABLE;
        let mut table = [0u8; 16];
        for (t, &v) in table.iter_mut().zip(values) {
            *t = (v as u8).wrapping_add(128);
        }
        // SAFETY: 16 readable bytes; the CPU implements AVX512F.
        let table = unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr().cast())) };
        debug_assert!(T <= TILE_M && g.iter().all(|g| g.len() >= nb * bytes));
        debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb && neg_corr.len() >= T * nb);
        let m4 = _mm512_set1_epi8(0x0F);
        let b4 = _mm512_set1_epi8(0x10);
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..nb {
            // SAFETY: block b < nb of every group is bytes `bytes * b ..
            // bytes * (b + 1)` (the function contract).
            let p: [*const u8; 4] =
                core::array::from_fn(|j| unsafe { g[j].as_ptr().add(b * bytes) });
            // The next four groups follow the last one (when they exist).
            prefetch(p[3], nb * bytes + 3 * b * bytes, 4 * bytes);
            // SAFETY: every `quarters` below reads bytes `at .. at + 16 <=
            // bytes` (the nibble chunks, the plane) of each super-block.
            let quarters = |at: usize| unsafe { load_quarters(&p, at) };
            // The plane (Q5), read where the layout has one.
            let h = if plain {
                _mm512_setzero_si512()
            } else {
                quarters(plane)
            };
            // Plane bit c (low nibbles of chunk c) and 4 + c (high) at bit 4.
            let h_low = [
                _mm512_slli_epi32::<4>(h),
                _mm512_slli_epi32::<3>(h),
                _mm512_slli_epi32::<2>(h),
                _mm512_slli_epi32::<1>(h),
            ];
            let h_high = [
                h,
                _mm512_srli_epi32::<1>(h),
                _mm512_srli_epi32::<2>(h),
                _mm512_srli_epi32::<3>(h),
            ];
            // [unsigned weights of chunk c's low nibbles, of its high
            // nibbles], 16 rows; 0xF2: a | (!b & c).
            let q: [(__m512i, __m512i); 4] = core::array::from_fn(|c| {
                let x = quarters(nibbles + 16 * c);
                let x = if KIND == Nib4::Q4_0 {
                    _mm512_xor_si512(x, _mm512_set1_epi8(0x88u8 as i8))
                } else {
                    x
                };
                let lo = _mm512_and_si512(x, m4);
                let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(x), m4);
                match KIND {
                    Nib4::Q4_0 => (lo, hi),
                    Nib4::TABLE => (
                        _mm512_shuffle_epi8(table, lo),
                        _mm512_shuffle_epi8(table, hi),
                    ),
                    _ => (
                        _mm512_ternarylogic_epi32::<0xF2>(lo, h_low[c], b4),
                        _mm512_ternarylogic_epi32::<0xF2>(hi, h_high[c], b4),
                    ),
                }
            });
            // The 16 rows' scales and Q5_1 minimums (4 of each group).
            // SAFETY: bytes 0..8 of every super-block.
            let sw = unsafe { f16_quarters(&p, 0) };
            let mw = if q51 {
                // SAFETY: bytes 8..16 of every (96-byte) super-block.
                unsafe { f16_quarters(&p, Q5_1X4_MINS) }
            } else {
                sw
            };
            for_each_row!(T, |t| {
                let acc_t = &mut acc[t];
                // SAFETY: t < T and b < nb (the function contract: `T` rows of
                // `nb` blocks).
                let (ap, da, c) = unsafe { row_block(qs, d, neg_corr, nb, t, b) };
                // SAFETY: dword k < 8 of the block; unaligned read.
                let a = |k: usize| _mm512_set1_epi32(unsafe { ap.add(k).read_unaligned() });
                let mut isum = _mm512_set1_epi32(if q51 { 0 } else { c });
                for (k, &(ql, qh)) in q.iter().enumerate() {
                    isum = _mm512_dpbusd_epi32(isum, ql, a(k));
                    isum = _mm512_dpbusd_epi32(isum, qh, a(4 + k));
                }
                *acc_t = if q51 {
                    let da = _mm512_set1_ps(da);
                    let v = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sw, da));
                    let asum = _mm512_set1_ps((-c) as f32);
                    let m = _mm512_mul_ps(asum, _mm512_mul_ps(mw, da));
                    _mm512_add_ps(*acc_t, _mm512_add_ps(v, m))
                } else {
                    add_block(*acc_t, isum, sw, da)
                };
            });
        }
        for (r, a) in res.iter_mut().zip(acc) {
            // SAFETY: `r` is 16 writable floats.
            unsafe { _mm512_storeu_ps(r.as_mut_ptr(), a) };
        }
    }

    /// GEMM, Q8_0x8 weights x `m` Q8_0 activation rows with the 512-bit
    /// tile: the contract of [`super::gemm_q8_0x8_q8_0`] after its shape
    /// checks, for `1 <= nb <= MAX_BLOCKS`, `rows >= 1`, `m >= 1`. Any
    /// activation quant (-128 too).
    ///
    /// # Safety
    /// `w` holds `groups` row groups of `nb` 272-byte super-blocks with
    /// `rows <= 8 * groups`, `act_qs` `m * nb * 32` quants, `act_d` `m * nb`
    /// scales, `out` `m * rows` floats; the token says `Vnni::Avx512`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_q8_0x8(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        groups: usize,
        nb: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) {
        debug_assert!(cpu.vnni() == Vnni::Avx512 && (1..=MAX_BLOCKS).contains(&nb));
        let group_bytes = nb * Q8X8_BLOCK_BYTES;
        // Row groups in pairs (16 rows per vector); an odd last group is
        // paired with itself and only its own rows are stored.
        let group = |g: usize| &w[g.min(groups - 1) * group_bytes..][..group_bytes];
        let tile = |unit: usize, qs: &[i8], d: &[f32], c: &[i32], tm: usize, res: &mut _| {
            let (wa, wb) = (group(2 * unit), group(2 * unit + 1));
            // SAFETY: `wa` and `wb` are whole row groups (`nb` super-blocks of
            // 272 bytes, sliced above), `gemm_units` passes `tm` (1 to TILE_M)
            // rows of `nb * 32` quants and of `nb` scales and sums; the token
            // proves AVX512-VNNI with AVX512 F/BW/VL.
            unsafe { with_rows!(tm, q8x8_tile(wa, wb, qs, d, c, nb, res)) }
        };
        // `-128 sum(a)` per block: the weights are offset by 128.
        // SAFETY: the shapes as `gemm_units` needs them (the function
        // contract: 16 rows per pair of groups); the token proves AVX2.
        unsafe {
            gemm_units(
                (rows, groups.div_ceil(2), nb),
                7,
                act_qs,
                act_d,
                m,
                out,
                tile,
            )
        };
    }

    /// Two Q8_0x8 row groups `wa`, `wb` (16 rows) against `T` activation rows:
    /// `res[t]` = the 8 rows of `wa`, then the 8 of `wb`.
    ///
    /// Chunk `c` of a super-block (32 bytes) of `wa` and of `wb` fill the two
    /// 256-bit halves of one register, whose 32-bit lanes are the 16 rows'
    /// weights `4c..4c+3`; `xor 0x80` makes them `w + 128` (0..255,
    /// unsigned). Per activation row, `vpdpbusd` adds `(w + 128) * a` with
    /// the activation dword `c` broadcast, in two chains (even and odd
    /// chunks) of four; the even chain starts at `-128 sum(a)` (`neg_corr`),
    /// so the sum of the two is `sum w a`, exact in i32 (|.| <= 32 * 255 *
    /// 128).
    ///
    /// # Safety
    /// `wa.len()` and `wb.len()` must be at least `nb * 272`, `qs.len()` at
    /// least `T * nb * 32`, `d.len()` and `neg_corr.len()` at least `T * nb`,
    /// `1 <= T <= TILE_M`, and the CPU must implement AVX512-VNNI with
    /// AVX512 F/BW/VL.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn q8x8_tile<const T: usize>(
        wa: &[u8],
        wb: &[u8],
        qs: &[i8],
        d: &[f32],
        neg_corr: &[i32],
        nb: usize,
        res: &mut [[f32; 16]; TILE_M],
    ) {
        debug_assert!(T <= TILE_M);
        debug_assert!(wa.len() >= nb * Q8X8_BLOCK_BYTES && wb.len() >= nb * Q8X8_BLOCK_BYTES);
        debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb && neg_corr.len() >= T * nb);
        let x80 = _mm512_set1_epi8(-128);
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..nb {
            // SAFETY: block b < nb of `wa` and `wb` is bytes 272b..272b+272.
            let (pa, pb) = unsafe {
                (
                    wa.as_ptr().add(b * Q8X8_BLOCK_BYTES),
                    wb.as_ptr().add(b * Q8X8_BLOCK_BYTES),
                )
            };
            // The next two groups follow `wb` (when they exist).
            prefetch(pb, nb * Q8X8_BLOCK_BYTES + b * Q8X8_BLOCK_BYTES, 2 * 272);
            let u: [__m512i; 8] = core::array::from_fn(|c| {
                // SAFETY: bytes 16 + 32c .. 48 + 32c (c < 8) of both
                // super-blocks; unaligned loads.
                let x = unsafe {
                    _mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(_mm256_loadu_si256(pa.add(16 + 32 * c).cast())),
                        _mm256_loadu_si256(pb.add(16 + 32 * c).cast()),
                    )
                };
                _mm512_xor_si512(x, x80)
            });
            // SAFETY: bytes 0..16 of both super-blocks: the 16 rows' f16 scales.
            let sw = unsafe {
                _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(_mm_loadu_si128(pa.cast())),
                    _mm_loadu_si128(pb.cast()),
                ))
            };
            for_each_row!(T, |t| {
                let acc_t = &mut acc[t];
                // SAFETY: t < T and b < nb (the function contract: `T` rows of
                // `nb` blocks).
                let (ap, da, c) = unsafe { row_block(qs, d, neg_corr, nb, t, b) };
                // SAFETY: dword k < 8 of the block; unaligned read.
                let a = |k: usize| _mm512_set1_epi32(unsafe { ap.add(k).read_unaligned() });
                let mut isum = _mm512_set1_epi32(c);
                for (k, &u_k) in u.iter().enumerate() {
                    isum = _mm512_dpbusd_epi32(isum, u_k, a(k));
                }
                *acc_t = add_block(*acc_t, isum, sw, da);
            });
        }
        for (r, a) in res.iter_mut().zip(acc) {
            // SAFETY: `r` is 16 writable floats.
            unsafe { _mm512_storeu_ps(r.as_mut_ptr(), a) };
        }
    }
}
