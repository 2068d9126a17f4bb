//! What the tiled x86_64 GEMMs of Q8_0 activations share: the per-call
//! tables of activation block sums and patterns (`sum_table`,
//! `pattern_table`, `table_rows_per_call`) and the `asm!` frame of the
//! 4-row tiles (`tile4_asm!`). The layouts' own GEMV and GEMM are in
//! `crate::layouts` (Q4_0x4 in `q4_0.rs`, Q8_0x8 in `q8_0.rs`, ...).

use super::{act_patterns, block_sum, Avx2};
use crate::layout::QK;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Activation rows computed together against one pass over a weight tile.
pub(crate) const TILE_M: usize = 4;

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
