//! Kestrel's architecture kernels. Every `asm!` block and every `unsafe`
//! arithmetic intrinsic of the project lives in this crate, each with a
//! `// SAFETY:` proof. The public functions are safe: they take a capability
//! token (a value that can only exist when the CPU has the feature) and check
//! every slice length before entering the unsafe code.
//!
//! Modules: `aarch64` (`asm!` with `sdot`, token `Dotprod`) and `x86_64`
//! (`core::arch` AVX2 intrinsics, token `Avx2`), each compiled only for its
//! architecture.
//!
//! Data layouts (specified in docs/kernels.md):
//! * Q4_0x4 weights: 72-byte super-blocks, 4 rows x 32 weights, f16 scales
//!   then 64 nibble bytes (XOR 0x88) in 16-byte chunks of 4 rows x 4 weights.
//! * Q8_0x8 weights: 272-byte super-blocks, 8 rows x 32 weights, 8 f16 scales
//!   then 256 quant bytes in 32-byte chunks of 8 rows x 4 weights.
//! * Activations: `qs` (`i8`, `m x cols`, row-major) and `d` (`f32`, one per
//!   32-block, the Q8_0 scale already rounded to f16 precision).
//!
//! Results are bit-identical to the scalar references in `kestrel-core`
//! (`quant::reference`): integer block sums are exact, and each block's
//! contribution is added in block order with separate multiply and add (no
//! fused multiply-add), exactly as the reference does. Values that pass
//! through the subnormal range are the only exception.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
pub mod cast;
#[cfg(target_arch = "x86_64")]
pub mod x86_64;

/// Checks one length; the kernels call this before any unsafe code.
#[inline]
#[allow(dead_code)]
pub(crate) fn len_ok(expected: Option<usize>, actual: usize) -> bool {
    expected == Some(actual)
}

/// Checks the slices of a quantized GEMM (weights in row groups of
/// `group_rows` rows, `block_bytes` per 32-column super-block; `m` activation
/// rows; `out` = `m x rows`) and returns `(blocks per row, row groups)`, or
/// `None` when any length does not fit. Shared by every architecture.
#[allow(dead_code, clippy::too_many_arguments)]
pub(crate) fn gemm_shape(
    group_rows: usize,
    block_bytes: usize,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &[f32],
) -> Option<(usize, usize)> {
    if cols == 0 || !cols.is_multiple_of(32) {
        return None;
    }
    let nb = cols / 32;
    let groups = rows.div_ceil(group_rows);
    let ok = len_ok(
        groups
            .checked_mul(nb)
            .and_then(|n| n.checked_mul(block_bytes)),
        w.len(),
    ) && len_ok(m.checked_mul(cols), act_qs.len())
        && len_ok(m.checked_mul(nb), act_d.len())
        && len_ok(m.checked_mul(rows), out.len());
    ok.then_some((nb, groups))
}

/// Checks an attention call over a cache: `n >= 1` rows of `hd` elements
/// (`hd` a non-zero multiple of 8) at `stride` elements apart, all inside a
/// cache of `cache_len` elements.
#[allow(dead_code)]
pub(crate) fn attn_rows_ok(hd: usize, n: usize, stride: usize, cache_len: usize) -> bool {
    hd > 0
        && hd.is_multiple_of(8)
        && n > 0
        && stride >= hd
        && (n - 1)
            .checked_mul(stride)
            .and_then(|e| e.checked_add(hd))
            .is_some_and(|end| end <= cache_len)
}
