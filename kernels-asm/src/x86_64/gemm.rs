//! The one driver of every x86_64 GEMM ([`gemm_run`]): a layout's tiles
//! run over calls of activation rows (each forming the layout's per-call
//! tables once), units of weight rows and tiles of activation rows, each
//! tile's results stored into the output; and what the tiled GEMMs of Q8_0
//! activations share: the per-call tables of activation block sums and
//! patterns (`sum_table`, `pattern_table`, `table_rows_per_call`) and the
//! `asm!` frame of the 4-row tiles (`tile4_asm!`). The layouts' tiles, their
//! one-row loops and their entry points are in `crate::layouts` (Q4_0x4 in
//! `q4_0.rs`, Q8_0x8 in `q8_0.rs`, ...), as on aarch64.

use super::{act_patterns, block_sum, Avx2};
use crate::layout::QK;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Activation rows computed together against one pass over a weight tile.
pub(crate) const TILE_M: usize = 4;

/// The shape the driver runs: `units` units of `W` weight rows (the last
/// may run past `rows`; its rows past `rows` are dropped) against `m`
/// activation rows, in calls of at most `call_rows` activation rows (the
/// rows one call's tables hold).
#[derive(Clone, Copy)]
pub(crate) struct Grid {
    pub(crate) rows: usize,
    pub(crate) units: usize,
    pub(crate) m: usize,
    pub(crate) call_rows: usize,
}

/// One call of [`gemm_run`]: activation rows `first..end`. The layout forms
/// its tables for these rows, then runs its tile through [`Pass::tiles`].
pub(crate) struct Pass<'a, const W: usize, const TM: usize> {
    pub(crate) first: usize,
    pub(crate) end: usize,
    rows: usize,
    units: usize,
    out: &'a mut [f32],
    res: &'a mut [[f32; W]; TM],
}

impl<const W: usize, const TM: usize> Pass<'_, W, TM> {
    /// Every unit of `W` weight rows against tiles of up to `TM` of the
    /// call's activation rows: `tile(unit, t0, tm, res)` fills `res[..tm]`
    /// for activation rows `t0..t0 + tm` (absolute indices), then each of
    /// those rows is stored into `out` (`m x rows`). `res` is the driver's
    /// one result buffer: each tile writes the rows it is given before they
    /// are read, so nothing zeroes it per tile.
    #[inline(always)]
    pub(crate) fn tiles(self, mut tile: impl FnMut(usize, usize, usize, &mut [[f32; W]; TM])) {
        let Pass {
            first,
            end,
            rows,
            units,
            out,
            res,
        } = self;
        for unit in 0..units {
            let row0 = W * unit;
            let n = rows.saturating_sub(row0).min(W);
            let mut t0 = first;
            while t0 < end {
                let tm = (end - t0).min(TM);
                tile(unit, t0, tm, res);
                for (t, r) in res.iter().enumerate().take(tm) {
                    store_row(out, (t0 + t) * rows + row0, r, n);
                }
                t0 += tm;
            }
        }
    }
}

/// `out[o..o + n] = r[..n]`: a whole row of a tile's result as a copy of
/// fixed size (inlined, where a copy of `n` floats calls `memmove`).
#[inline(always)]
fn store_row<const W: usize>(out: &mut [f32], o: usize, r: &[f32; W], n: usize) {
    if n == W {
        out[o..o + W].copy_from_slice(r);
    } else {
        out[o..o + n].copy_from_slice(&r[..n]);
    }
}

/// The one x86_64 GEMM driver: `out` (`m x rows`) from the layout's tiles,
/// over calls of at most `grid.call_rows` activation rows; `call(pass)`
/// forms the call's tables and runs its tile over the units and the
/// activation rows with [`Pass::tiles`]. Every layout's GEMM of more than
/// one row goes through here, in each kernel set (AVX2, AVX-VNNI,
/// AVX512-VNNI); their one-row loops (the GEMVs that keep the weights one
/// stream) are the layouts' own, as aarch64's are.
#[inline(always)]
pub(crate) fn gemm_run<const W: usize, const TM: usize>(
    grid: Grid,
    out: &mut [f32],
    mut call: impl FnMut(Pass<'_, W, TM>),
) {
    let Grid {
        rows,
        units,
        m,
        call_rows,
    } = grid;
    let mut res = [[0.0f32; W]; TM];
    let step = call_rows.max(1);
    for first in (0..m).step_by(step) {
        call(Pass {
            first,
            end: (first + step).min(m),
            rows,
            units,
            out: &mut *out,
            res: &mut res,
        });
    }
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
pub(crate) struct TileConsts(
    pub(crate) [u8; 32],
    pub(crate) [u8; 32],
    pub(crate) [i16; 16],
);
pub(crate) static TILE_CONSTS: TileConsts = TileConsts([0x88; 32], [0x0F; 32], [1; 16]);

pub(crate) use tile4_asm;
