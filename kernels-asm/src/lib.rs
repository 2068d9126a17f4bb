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

/// The DRAM probe's read loop: a wrapping sum of `buf` read as
/// little-endian u64 lanes, visiting for each `stride`-byte step its first
/// `block` bytes (rounded up to 16: the probe measures memory traffic, and a
/// cache line is read whole anyway). SIMD loads (SSE2 / NEON, in every
/// x86_64 and aarch64 baseline) so the loop is limited by memory, not by
/// the core. The value only serves to keep the reads alive.
pub fn read_sum(buf: &[u8], stride: usize, block: usize) -> u64 {
    if stride == 0 || block == 0 || block > stride {
        return 0;
    }
    let steps = buf.len() / stride;
    let span = block.div_ceil(16) * 16;
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        let mut acc = [0u64; 2];
        if stride == block {
            // Contiguous: 64 bytes per iteration into four accumulators.
            let bytes = &buf[..steps * stride];
            // SAFETY: SSE2 is in the x86_64 baseline.
            let mut a = [unsafe { _mm_setzero_si128() }; 4];
            let mut chunks = bytes.chunks_exact(64);
            for c in &mut chunks {
                for (k, ak) in a.iter_mut().enumerate() {
                    // SAFETY: `c` is 64 bytes (chunks_exact), so bytes
                    // 16k..16k+16 are in bounds; SSE2 is in the x86_64
                    // baseline; unaligned load.
                    *ak = unsafe {
                        _mm_add_epi64(*ak, _mm_loadu_si128(c.as_ptr().add(16 * k).cast()))
                    };
                }
            }
            let mut lanes = [0u64; 2];
            for ak in a {
                // SAFETY: `lanes` is 16 bytes; SSE2 baseline.
                unsafe { _mm_storeu_si128(lanes.as_mut_ptr().cast(), ak) };
                acc[0] = acc[0].wrapping_add(lanes[0]);
                acc[1] = acc[1].wrapping_add(lanes[1]);
            }
            for &b in chunks.remainder() {
                acc[0] = acc[0].wrapping_add(b as u64);
            }
        } else if span <= stride && span <= 64 {
            // SAFETY: SSE2 is in the x86_64 baseline.
            let mut a = unsafe { _mm_setzero_si128() };
            for s in 0..steps {
                let p = &buf[s * stride..s * stride + span];
                for q in p.chunks_exact(16) {
                    // SAFETY: `q` is 16 bytes (chunks_exact); SSE2 baseline.
                    a = unsafe { _mm_add_epi64(a, _mm_loadu_si128(q.as_ptr().cast())) };
                }
            }
            let mut lanes = [0u64; 2];
            // SAFETY: `lanes` is 16 bytes; SSE2 baseline.
            unsafe { _mm_storeu_si128(lanes.as_mut_ptr().cast(), a) };
            acc = lanes;
        }
        acc[0].wrapping_add(acc[1])
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // aarch64 (and any other target): plain u64 words, four chains; at
        // opt-level 3 this is two 64-bit loads per cycle.
        let mut a = [0u64; 4];
        let word = |c: &[u8]| c.iter().rev().fold(0u64, |s, &b| (s << 8) | b as u64);
        for s in 0..steps {
            let end = if stride == block {
                (s + 1) * stride
            } else {
                (s * stride + span).min(buf.len())
            };
            let p = &buf[s * stride..end];
            for (k, c) in p.chunks(8).enumerate() {
                a[k & 3] = a[k & 3].wrapping_add(word(c));
            }
        }
        a.iter().fold(0u64, |x, &y| x.wrapping_add(y))
    }
}
