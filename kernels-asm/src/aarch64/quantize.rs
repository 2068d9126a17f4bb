//! Activation quantization to Q8_0 content and to Q8_K with NEON.

use super::Dotprod;
use crate::generic;
use crate::shape::{quantize_k_shape, quantize_shape, ShapeError};
use core::arch::asm;

/// 32 values in `v0..v7` times the inverse scale `v18.s[0]`, rounded half
/// away from zero (`fcvtas`, as the reference's `roundf`), saturated to
/// `i8` and stored at `{qs}` (which moves on by 32).
#[rustfmt::skip]
macro_rules! quantize_32 {
    () => { concat!(
        "fmul v0.4s, v0.4s, v18.s[0]\n",
        "fmul v1.4s, v1.4s, v18.s[0]\n",
        "fmul v2.4s, v2.4s, v18.s[0]\n",
        "fmul v3.4s, v3.4s, v18.s[0]\n",
        "fmul v4.4s, v4.4s, v18.s[0]\n",
        "fmul v5.4s, v5.4s, v18.s[0]\n",
        "fmul v6.4s, v6.4s, v18.s[0]\n",
        "fmul v7.4s, v7.4s, v18.s[0]\n",
        "fcvtas v0.4s, v0.4s\n",
        "fcvtas v1.4s, v1.4s\n",
        "fcvtas v2.4s, v2.4s\n",
        "fcvtas v3.4s, v3.4s\n",
        "fcvtas v4.4s, v4.4s\n",
        "fcvtas v5.4s, v5.4s\n",
        "fcvtas v6.4s, v6.4s\n",
        "fcvtas v7.4s, v7.4s\n",
        "sqxtn v0.4h, v0.4s\n",
        "sqxtn2 v0.8h, v1.4s\n",
        "sqxtn v2.4h, v2.4s\n",
        "sqxtn2 v2.8h, v3.4s\n",
        "sqxtn v4.4h, v4.4s\n",
        "sqxtn2 v4.8h, v5.4s\n",
        "sqxtn v6.4h, v6.4s\n",
        "sqxtn2 v6.8h, v7.4s\n",
        "sqxtn v0.8b, v0.8h\n",
        "sqxtn2 v0.16b, v2.8h\n",
        "sqxtn v1.8b, v4.8h\n",
        "sqxtn2 v1.16b, v6.8h\n",
        "st1 {{v0.16b, v1.16b}}, [{qs}], #32\n",
    ) };
}

/// Quantizes activations to Q8_0 content with NEON: each 32-value block of
/// `x` becomes 32 quants in `qs` and its f16-rounded scale (as f32) in `d`,
/// bytes identical to [`generic::quantize_acts_q8_0`].
///
/// Signalling NaNs are the exception: a sequential `f32::max` fold lets one
/// restart the block maximum (or end it as NaN), the tree reduction here
/// ignores it; arithmetic never produces one.
///
/// A shape error when `x.len()` is not a multiple of 32 or the output
/// lengths do not match; a build without NEON takes the generic code.
pub fn quantize_acts_q8_0(
    _cpu: Dotprod,
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
) -> Result<(), ShapeError> {
    quantize_shape(x, qs, d)?;
    // NEON is in every aarch64 target's baseline except the soft-float ones.
    if !cfg!(target_feature = "neon") {
        return generic::quantize_acts_q8_0(x, qs, d);
    }
    let nb = x.len() / 32;
    if nb > 0 {
        // SAFETY: `x` and `qs` hold nb * 32 elements, `d` nb; the build
        // targets NEON (checked above), so every CPU running it has it.
        unsafe { quantize_acts_blocks(x.as_ptr(), qs.as_mut_ptr(), d.as_mut_ptr(), nb) };
    }
    Ok(())
}

/// The quantizer loop, one 32-value block per iteration.
///
/// # Safety
/// `x` must point to `nb * 32` readable floats, `qs` to `nb * 32` writable
/// bytes, `d` to `nb` writable floats, `nb >= 1`.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn quantize_acts_blocks(x: *const f32, qs: *mut i8, d: *mut f32, nb: usize) {
    // SAFETY: per the function contract: per block the loop reads 128 bytes
    // of `x` and writes 32 bytes of `qs` and 4 of `d`, for nb blocks. Only
    // the listed registers are written; no stack is used.
    //
    // Bit-exactness with `BlockQ8_0::quantize`: `fmaxnm` is Rust's `f32::max`
    // on aarch64 (NaNs skipped; the max of non-NaN values does not depend on
    // the order), the start value 0.0 is folded in last; `d = amax / 127`,
    // `id = d != 0 ? 1 / d : 0` are the same IEEE operations; `x * id` is one
    // `fmul`; `fcvtas` is `roundf` (ties away from zero) and the two
    // saturating narrows give `as i8` (saturation; NaN converts to 0); the
    // scale is rounded to f16 (nearest even) and back with `fcvt`.
    unsafe {
        asm!(
            "mov {t:w}, #0x42fe0000",  // 127.0
            "fmov s30, {t:w}",
            "movi d31, #0",
            "fmov s29, #1.0",
            "3:",
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{x}], #64",
            "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [{x}], #64",
            "fabs v16.4s, v0.4s",
            "fabs v17.4s, v1.4s",
            "fabs v18.4s, v2.4s",
            "fabs v19.4s, v3.4s",
            "fabs v20.4s, v4.4s",
            "fabs v21.4s, v5.4s",
            "fabs v22.4s, v6.4s",
            "fabs v23.4s, v7.4s",
            "fmaxnm v16.4s, v16.4s, v17.4s",
            "fmaxnm v18.4s, v18.4s, v19.4s",
            "fmaxnm v20.4s, v20.4s, v21.4s",
            "fmaxnm v22.4s, v22.4s, v23.4s",
            "fmaxnm v16.4s, v16.4s, v18.4s",
            "fmaxnm v20.4s, v20.4s, v22.4s",
            "fmaxnm v16.4s, v16.4s, v20.4s",
            "fmaxnmv s16, v16.4s",
            "fmaxnm s16, s16, s31",    // amax = max(0, ...): all-NaN -> 0
            "fdiv s17, s16, s30",      // d = amax / 127
            "fdiv s18, s29, s17",      // 1 / d
            "fcmp s17, #0.0",
            "fcsel s18, s31, s18, eq", // id = d != 0 ? 1 / d : 0
            "fcvt h19, s17",           // d to f16 (nearest even) and back
            "fcvt s19, h19",
            "str s19, [{d}], #4",
            quantize_32!(),
            "subs {nb}, {nb}, #1",
            "b.ne 3b",
            x = inout(reg) x => _,
            qs = inout(reg) qs => _,
            d = inout(reg) d => _,
            nb = inout(reg) nb => _,
            t = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _,
            out("v29") _, out("v30") _, out("v31") _,
            options(nostack),
        );
    }
}

/// Quantizes activations to Q8_K with NEON: per 256-value block of `x` the
/// f32 scale `d = max|x| / 127`, the 256 quants `roundf(x * (1 / d))` and
/// the i16 sum of each 32 quants, bytes identical to
/// [`generic::quantize_acts_q8_k`] (signalling NaNs excepted, as for
/// [`quantize_acts_q8_0`]).
///
/// A shape error when `x.len()` is not a multiple of 256 or the output
/// lengths do not match; a build without NEON takes the generic code.
pub fn quantize_acts_q8_k(
    _cpu: Dotprod,
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    sums: &mut [i16],
) -> Result<(), ShapeError> {
    quantize_k_shape(x, qs, d, sums)?;
    if !cfg!(target_feature = "neon") {
        return generic::quantize_acts_q8_k(x, qs, d, sums);
    }
    let nb = x.len() / 256;
    if nb > 0 {
        // SAFETY: `x` and `qs` hold nb * 256 elements, `d` nb and `sums` nb *
        // 8 (checked above); the build targets NEON, so every CPU running
        // it has it.
        unsafe {
            quantize_k_blocks(
                x.as_ptr(),
                qs.as_mut_ptr(),
                d.as_mut_ptr(),
                sums.as_mut_ptr(),
                nb,
            )
        };
    }
    Ok(())
}

/// The Q8_K quantizer loop, one 256-value block per iteration: a first
/// pass of eight 32-value steps takes `max |x|` (`fabs`, `fmaxnm` into
/// eight accumulators started at 0.0, then a tree and `fmaxnmv`), then
/// `d = amax / 127` and `id = d != 0 ? 1 / d : 0` (two `fdiv`, `fcsel`);
/// the second pass re-reads the 32-value steps: 8 `fmul` by `id`, 8
/// `fcvtas`, the saturating narrows, one 32-byte store, and the step's
/// sum (`saddlp`, `sadalp`, `addv`: at most 32 x 128 in magnitude).
///
/// # Safety
/// `x` must point to `nb * 256` readable floats, `qs` to `nb * 256`
/// writable bytes, `d` to `nb` writable floats, `sums` to `nb * 8` writable
/// i16, `nb >= 1`.
#[inline(never)]
#[target_feature(enable = "neon")]
unsafe fn quantize_k_blocks(x: *const f32, qs: *mut i8, d: *mut f32, sums: *mut i16, nb: usize) {
    // SAFETY: per the function contract: per block the loop reads 1024
    // bytes of `x` twice and writes 256 bytes of `qs`, 4 of `d` and 16 of
    // `sums`, for nb blocks. Only the listed registers are written; no
    // stack is used.
    //
    // Bit-exactness with the generic code: `fmaxnm` is Rust's `f32::max` on
    // aarch64 (NaNs skipped, the order of the non-NaN values irrelevant),
    // the accumulators start at 0.0 as the scalar fold does; the scale and
    // its inverse are the same IEEE operations; `fcvtas` is `roundf` and
    // the saturating narrows are `as i8` (NaN converts to 0); the sums are
    // exact integer sums.
    unsafe {
        asm!(
            "mov {t:w}, #0x42fe0000",  // 127.0
            "fmov s30, {t:w}",
            "movi d31, #0",
            "fmov s29, #1.0",
            "3:",
            "mov x12, {x}",
            "movi v16.4s, #0",
            "movi v17.4s, #0",
            "movi v18.4s, #0",
            "movi v19.4s, #0",
            "movi v20.4s, #0",
            "movi v21.4s, #0",
            "movi v22.4s, #0",
            "movi v23.4s, #0",
            "mov x13, #8",
            "4:",
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{x}], #64",
            "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [{x}], #64",
            "fabs v0.4s, v0.4s",
            "fabs v1.4s, v1.4s",
            "fabs v2.4s, v2.4s",
            "fabs v3.4s, v3.4s",
            "fabs v4.4s, v4.4s",
            "fabs v5.4s, v5.4s",
            "fabs v6.4s, v6.4s",
            "fabs v7.4s, v7.4s",
            "fmaxnm v16.4s, v16.4s, v0.4s",
            "fmaxnm v17.4s, v17.4s, v1.4s",
            "fmaxnm v18.4s, v18.4s, v2.4s",
            "fmaxnm v19.4s, v19.4s, v3.4s",
            "fmaxnm v20.4s, v20.4s, v4.4s",
            "fmaxnm v21.4s, v21.4s, v5.4s",
            "fmaxnm v22.4s, v22.4s, v6.4s",
            "fmaxnm v23.4s, v23.4s, v7.4s",
            "subs x13, x13, #1",
            "b.ne 4b",
            "fmaxnm v16.4s, v16.4s, v17.4s",
            "fmaxnm v18.4s, v18.4s, v19.4s",
            "fmaxnm v20.4s, v20.4s, v21.4s",
            "fmaxnm v22.4s, v22.4s, v23.4s",
            "fmaxnm v16.4s, v16.4s, v18.4s",
            "fmaxnm v20.4s, v20.4s, v22.4s",
            "fmaxnm v16.4s, v16.4s, v20.4s",
            "fmaxnmv s16, v16.4s",
            "fdiv s17, s16, s30",      // d = amax / 127
            "fdiv s18, s29, s17",      // 1 / d
            "fcmp s17, #0.0",
            "fcsel s18, s31, s18, eq", // id = d != 0 ? 1 / d : 0
            "str s17, [{d}], #4",
            "mov x13, #8",
            "5:",
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [x12], #64",
            "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [x12], #64",
            quantize_32!(),
            "saddlp v2.8h, v0.16b",
            "sadalp v2.8h, v1.16b",
            "addv h2, v2.8h",
            "str h2, [{sums}], #2",
            "subs x13, x13, #1",
            "b.ne 5b",
            "subs {nb}, {nb}, #1",
            "b.ne 3b",
            x = inout(reg) x => _,
            qs = inout(reg) qs => _,
            d = inout(reg) d => _,
            sums = inout(reg) sums => _,
            nb = inout(reg) nb => _,
            t = out(reg) _,
            out("x12") _, out("x13") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _,
            out("v29") _, out("v30") _, out("v31") _,
            options(nostack),
        );
    }
}
