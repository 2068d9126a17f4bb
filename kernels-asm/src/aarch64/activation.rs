//! The exponential with NEON, and SwiGLU and the softmax exponentials on
//! top of it.

use super::Dotprod;
use crate::generic;
use crate::shape::{swiglu_shape, ShapeError};
use core::arch::asm;

/// The constants of [`exp4`]'s instruction sequence, loaded into v16-v30.
static EXP_CONSTANTS: [u32; 15] = [
    (-87.336_55f32).to_bits(),           // v16 MIN
    88.0f32.to_bits(),                   // v17 MAX
    core::f32::consts::LOG2_E.to_bits(), // v18
    12_582_912.0f32.to_bits(),           // v19 ROUND (1.5 * 2^23)
    0.693_359_4f32.to_bits(),            // v20 LN2_HI
    (-2.121_944_4e-4f32).to_bits(),      // v21 LN2_LO
    1.987_569_2e-4f32.to_bits(),         // v22 polynomial, highest first
    1.398_199_9e-3f32.to_bits(),         // v23
    8.333_452e-3f32.to_bits(),           // v24
    4.166_579_6e-2f32.to_bits(),         // v25
    1.666_666_5e-1f32.to_bits(),         // v26
    0.5f32.to_bits(),                    // v27
    1.0f32.to_bits(),                    // v28
    12_582_912.0f32.to_bits(),           // v29 ROUND's bits, as integers
    127,                                 // v30 exponent bias
];

/// Loads [`EXP_CONSTANTS`] (address in `{k}`) into v16-v30, one per register.
macro_rules! exp_constants {
    () => {
        concat!(
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{k}]\n",
            "dup v16.4s, v0.s[0]\n",
            "dup v17.4s, v0.s[1]\n",
            "dup v18.4s, v0.s[2]\n",
            "dup v19.4s, v0.s[3]\n",
            "dup v20.4s, v1.s[0]\n",
            "dup v21.4s, v1.s[1]\n",
            "dup v22.4s, v1.s[2]\n",
            "dup v23.4s, v1.s[3]\n",
            "dup v24.4s, v2.s[0]\n",
            "dup v25.4s, v2.s[1]\n",
            "dup v26.4s, v2.s[2]\n",
            "dup v27.4s, v2.s[3]\n",
            "dup v28.4s, v3.s[0]\n",
            "dup v29.4s, v3.s[1]\n",
            "dup v30.4s, v3.s[2]\n",
        )
    };
}

/// `v5 = e^v0` for 4 lanes (clobbers v1-v6), the operations of
/// [`generic::exp`] in its order: clamp (`fmax`/`fmin`
/// propagate NaN as the scalar clamp does), `t = xc log2e + ROUND`, `n = t -
/// ROUND`, `r = (xc - n hi) - n lo`, Horner from the highest coefficient,
/// `y = (p (r r) + r) + 1`, `2^n` from t's integer bits, `e = y 2^n`, and 0
/// where `x < MIN` (`fcmgt` is false for NaN).
macro_rules! exp4 {
    () => {
        concat!(
            "fmax v1.4s, v0.4s, v16.4s\n",
            "fmin v1.4s, v1.4s, v17.4s\n",
            "fmul v2.4s, v1.4s, v18.4s\n",
            "fadd v2.4s, v2.4s, v19.4s\n",
            "fsub v3.4s, v2.4s, v19.4s\n",
            "fmul v4.4s, v3.4s, v20.4s\n",
            "fsub v4.4s, v1.4s, v4.4s\n",
            "fmul v5.4s, v3.4s, v21.4s\n",
            "fsub v4.4s, v4.4s, v5.4s\n",
            "fmul v5.4s, v22.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v23.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v24.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v25.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v26.4s\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v27.4s\n",
            "fmul v6.4s, v4.4s, v4.4s\n",
            "fmul v5.4s, v5.4s, v6.4s\n",
            "fadd v5.4s, v5.4s, v4.4s\n",
            "fadd v5.4s, v5.4s, v28.4s\n",
            "sub v2.4s, v2.4s, v29.4s\n",
            "add v2.4s, v2.4s, v30.4s\n",
            "shl v2.4s, v2.4s, #23\n",
            "fmul v5.4s, v5.4s, v2.4s\n",
            "fcmgt v6.4s, v16.4s, v0.4s\n",
            "bic v5.16b, v5.16b, v6.16b\n",
        )
    };
}

/// SwiGLU over fused gate/up runs with NEON: `out[8r + i] = silu(g) * u`,
/// `g = gate_up[16r + i]`, `u = gate_up[16r + 8 + i]`, `silu(g) = g / (1 +
/// e^-g)`: the bits of [`generic::swiglu_runs`].
///
/// A shape error unless `out.len()` is a multiple of 8 and `gate_up.len()
/// == 2 * out.len()`; a build without NEON takes the generic code.
pub fn swiglu_runs(_cpu: Dotprod, out: &mut [f32], gate_up: &[f32]) -> Result<(), ShapeError> {
    swiglu_shape(out, gate_up)?;
    if !cfg!(target_feature = "neon") {
        return generic::swiglu_runs(out, gate_up);
    }
    let runs = out.len() / 8;
    if runs == 0 {
        return Ok(());
    }
    let k: [u32; 16] = core::array::from_fn(|i| EXP_CONSTANTS.get(i).copied().unwrap_or(0));
    // SAFETY: per run the loop reads 64 bytes of `gate_up` and writes 32 of
    // `out`, `runs >= 1` times (lengths checked above); `k` holds the 16
    // words the first `ld1` reads. Only the listed registers are written;
    // no stack is used.
    unsafe {
        asm!(
            exp_constants!(),
            "2:",
            "ld1 {{v8.4s, v9.4s, v10.4s, v11.4s}}, [{gu}], #64",
            "fneg v0.4s, v8.4s",
            exp4!(),
            "fadd v5.4s, v5.4s, v28.4s",
            "fdiv v12.4s, v8.4s, v5.4s",
            "fmul v12.4s, v12.4s, v10.4s",
            "fneg v0.4s, v9.4s",
            exp4!(),
            "fadd v5.4s, v5.4s, v28.4s",
            "fdiv v13.4s, v9.4s, v5.4s",
            "fmul v13.4s, v13.4s, v11.4s",
            "st1 {{v12.4s, v13.4s}}, [{out}], #32",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            k = in(reg) k.as_ptr(),
            gu = inout(reg) gate_up.as_ptr() => _,
            out = inout(reg) out.as_mut_ptr() => _,
            n = inout(reg) runs => _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v8") _, out("v9") _, out("v10") _,
            out("v11") _, out("v12") _, out("v13") _, out("v16") _, out("v17") _,
            out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _,
            out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _,
            out("v28") _, out("v29") _, out("v30") _,
            options(nostack),
        );
    }
    Ok(())
}

/// `x[i] = e^(x[i] - max)` with NEON (the exponentials of a softmax), the
/// bits of [`generic::exp_minus`] lane by lane; any length. A build
/// without NEON takes the generic code.
pub fn exp_minus(_cpu: Dotprod, x: &mut [f32], max: f32) {
    if !cfg!(target_feature = "neon") {
        return generic::exp_minus(x, max);
    }
    let k: [u32; 16] = core::array::from_fn(|i| EXP_CONSTANTS.get(i).copied().unwrap_or(0));
    let chunks = x.chunks_exact_mut(4);
    let quads = chunks.len();
    let mut tail = [0.0f32; 4];
    let rest = chunks.into_remainder();
    let n_rest = rest.len();
    tail[..n_rest].copy_from_slice(rest);
    // SAFETY: the first loop reads and writes `quads * 16` bytes from the
    // start of `x` (whole chunks of 4, counted above), then one 16-byte
    // quad of `tail` (4 floats) is processed in place; `k` holds 16 words.
    // Only the listed registers are written; no stack is used.
    unsafe {
        asm!(
            exp_constants!(),
            "dup v7.4s, {max:w}",
            "cbz {n}, 3f",
            "2:",
            "ld1 {{v0.4s}}, [{x}]",
            "fsub v0.4s, v0.4s, v7.4s",
            exp4!(),
            "st1 {{v5.4s}}, [{x}], #16",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "3:",
            "ld1 {{v0.4s}}, [{t}]",
            "fsub v0.4s, v0.4s, v7.4s",
            exp4!(),
            "st1 {{v5.4s}}, [{t}]",
            k = in(reg) k.as_ptr(),
            max = in(reg) max.to_bits(),
            x = inout(reg) x.as_mut_ptr() => _,
            n = inout(reg) quads => _,
            t = in(reg) tail.as_mut_ptr(),
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v16") _, out("v17") _,
            out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _,
            out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _,
            out("v28") _, out("v29") _, out("v30") _,
            options(nostack),
        );
    }
    x[quads * 4..].copy_from_slice(&tail[..n_rest]);
}

/// `x[i] = gelu_tanh(x[i])`: [`crate::generic::gelu_tanh_in_place`] (no
/// vector code yet).
pub fn gelu_tanh_in_place(_cpu: Dotprod, x: &mut [f32]) {
    crate::generic::gelu_tanh_in_place(x)
}

/// Softmax of each of the rows of `n` values in `x`: the bits of
/// [`generic::softmax_rows`], the exponentials by [`exp_minus`].
pub fn softmax_rows(cpu: Dotprod, x: &mut [f32], n: usize) {
    generic::softmax_rows_with(x, n, &|row, max| exp_minus(cpu, row, max));
}
