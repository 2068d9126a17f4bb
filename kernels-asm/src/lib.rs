//! Kestrel's kernels, laid out by architecture (as ggml-cpu's `arch/` and
//! memchr's `arch/`):
//!
//! * [`layout`]: the block and repacked weight layouts, defined once.
//! * [`layouts`]: layouts written whole, one module each (geometry,
//!   repacker, generic reference and every architecture's kernels, on the
//!   block families' shared texts).
//! * [`generic`]: the scalar kernels, safe code on every target: the
//!   specification every fast kernel matches bit for bit.
//! * `aarch64` (`asm!` with `sdot` and NEON, token `Dotprod`) and `x86_64`
//!   (`core::arch` AVX2 intrinsics, token `Avx2`), each compiled only for
//!   its architecture, one file per operation (`gemv`, `gemm`, `matvec`,
//!   `quantize`, `attention`, `activation`).
//!
//! Every architecture exports the same operations with the names and
//! signatures of [`generic`], the capability token (a value that can only
//! exist when the CPU has the feature) in front. Where an architecture has
//! no fast code for an operation or a shape, its function calls the generic
//! one. Every function checks every slice length before any unsafe code and
//! returns a [`ShapeError`] (having written nothing) when one does not fit.
//!
//! Every `asm!` block and every `unsafe` arithmetic intrinsic of the project
//! lives in this crate, each with a `// SAFETY:` proof.
//!
//! Results are bit-identical to [`generic`]: integer block sums are exact,
//! and each block's contribution is added in block order with separate
//! multiply and add, exactly as the generic code does; a fused multiply-add
//! only where the generic code writes one (attention: `libm::fmaf`). Values
//! that pass through the subnormal range are the only exception.
#![cfg_attr(not(feature = "std"), no_std)]
// The shipped build (scripts/build-shipped.sh) compiles the conversion-time
// repackers for size; nothing else changes.
#![cfg_attr(kestrel_shipped, feature(optimize_attribute))]
#![deny(missing_docs)]

#[cfg(test)]
extern crate std;

/// `pub fn $name`: a kernel entry point that forwards to `$f` (after the
/// arguments `$pre`): `q8_0`/`q8_k` name the activation arguments (quants
/// and scales; with the sums), `gemv` forwards one activation row (`m =
/// 1`), `gemm` its `m`; `$cpu: $tok` is an architecture's capability token.
macro_rules! forwarding_entry {
    ($(#[$a:meta])* q8_0 gemv $name:ident $(($cpu:ident: $tok:ty))? => $f:path $([$($pre:expr),*])?) => {
        forwarding_entry!(@ $(#[$a])* $name [$($cpu: $tok)?] (w: &[u8], rows: usize, cols: usize, act_qs: &[i8], act_d: &[f32], out: &mut [f32],)
            => $f($($($pre,)*)? $($cpu,)? w, rows, cols, act_qs, act_d, 1, out));
    };
    ($(#[$a:meta])* q8_0 gemm $name:ident $(($cpu:ident: $tok:ty))? => $f:path $([$($pre:expr),*])?) => {
        forwarding_entry!(@ $(#[$a])* $name [$($cpu: $tok)?] (w: &[u8], rows: usize, cols: usize, act_qs: &[i8], act_d: &[f32], m: usize, out: &mut [f32],)
            => $f($($($pre,)*)? $($cpu,)? w, rows, cols, act_qs, act_d, m, out));
    };
    ($(#[$a:meta])* q8_k gemv $name:ident $(($cpu:ident: $tok:ty))? => $f:path) => {
        forwarding_entry!(@ $(#[$a])* $name [$($cpu: $tok)?] (w: &[u8], rows: usize, cols: usize, act_qs: &[i8], act_d: &[f32], act_sums: &[i16], out: &mut [f32],)
            => $f($($cpu,)? w, rows, cols, act_qs, act_d, act_sums, 1, out));
    };
    ($(#[$a:meta])* q8_k gemm $name:ident $(($cpu:ident: $tok:ty))? => $f:path $([$($pre:expr),*])?) => {
        forwarding_entry!(@ $(#[$a])* $name [$($cpu: $tok)?] (w: &[u8], rows: usize, cols: usize, act_qs: &[i8], act_d: &[f32], act_sums: &[i16], m: usize, out: &mut [f32],)
            => $f($($($pre,)*)? $($cpu,)? w, rows, cols, act_qs, act_d, act_sums, m, out));
    };
    (@ $(#[$a:meta])* $name:ident [$($cpu:ident: $tok:ty)?] ($($arg:ident: $t:ty,)*) => $call:expr) => {
        $(#[$a])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name($($cpu: $tok,)? $($arg: $t,)*) -> Result<(), $crate::ShapeError> {
            $call
        }
    };
}

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
pub mod cast;
pub mod generic;
pub mod layout;
pub mod layouts;
mod shape;
#[cfg(target_arch = "x86_64")]
pub mod x86_64;

pub use shape::ShapeError;

#[cfg(all(test, any(target_arch = "aarch64", target_arch = "x86_64")))]
mod arch_tests;
#[cfg(all(test, any(target_arch = "aarch64", target_arch = "x86_64")))]
mod arch_tests_k;

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
