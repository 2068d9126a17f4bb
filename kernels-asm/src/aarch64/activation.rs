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
/// [`generic::softmax_rows`] (same blocks of up to 8 rows, each row's
/// maximum, exponentials and sum in order), with NEON: each row's maximum
/// by lanes, then for 4 rows at a time their exponentials and sums in one
/// pass, the 4 sums one register (row `g` in lane `g`) taking 4 positions
/// per step through a transpose, each lane still adding its row's values
/// one by one in order. A build without NEON takes the generic code.
pub fn softmax_rows(cpu: Dotprod, x: &mut [f32], n: usize) {
    if !cfg!(target_feature = "neon") {
        return generic::softmax_rows_with(x, n, &|row, max| exp_minus(cpu, row, max));
    }
    generic::softmax_blocks(x, n, |block, rows, n| softmax_block(cpu, block, rows, n));
}

/// One tile of an online softmax: the bits of
/// [`generic::softmax_rows_online`] (blocks of up to 8 rows, each row's
/// maximum from its running one, exponentials and sum in order) with
/// [`softmax_rows`]'s NEON passes, without the scaling. A build without
/// NEON takes the generic code.
pub fn softmax_rows_online(
    cpu: Dotprod,
    x: &mut [f32],
    n: usize,
    maxes: &mut [f32],
    sums: &mut [f32],
) -> Result<(), ShapeError> {
    if !cfg!(target_feature = "neon") {
        return generic::softmax_rows_online(x, n, maxes, sums);
    }
    generic::softmax_online_blocks(x, n, maxes, sums, |block, n, max, sum| {
        exp_block(cpu, block, n, max, sum)
    })
}

/// One block of [`softmax_rows`]: `rows` (1..=8) rows of `n` values in
/// `x` (`x.len() == rows * n`): [`exp_block`] from a maximum of `-inf`,
/// then each row times `1 / sum`.
fn softmax_block(cpu: Dotprod, x: &mut [f32], rows: usize, n: usize) {
    let mut max = [f32::NEG_INFINITY; 8];
    let mut sums = [0.0f32; 8];
    exp_block(cpu, x, n, &mut max[..rows], &mut sums[..rows]);
    for (row, &s) in x.chunks_exact_mut(n).zip(&sums) {
        generic::softmax_scale(row, s);
    }
}

/// The exponentials and sums of `max.len()` (1..=8) rows of `n` values in
/// `x` (`x.len() == max.len() * n`, `sum.len() == max.len()`), the bits of
/// the generic `exp_block`: each row's maximum from `max[g]` on by lanes,
/// then for 4 rows at a time their exponentials and sums in one pass, the
/// 4 sums one register (row `g` in lane `g`) taking 4 positions per step
/// through a transpose, each lane still adding its row's values one by one
/// in order.
fn exp_block(cpu: Dotprod, x: &mut [f32], n: usize, max: &mut [f32], sum_out: &mut [f32]) {
    let rows = max.len();
    for (row, m) in x.chunks_exact(n).zip(max.iter_mut()) {
        // The running maximum, then the row's: `max(m, row)` by the
        // scalar rule (equal to taking the row's values from `m` on).
        let t = row_max(row);
        if t > *m {
            *m = t;
        }
    }
    let quads = n / 4;
    let mut sums = [0.0f32; 8];
    // Where the missing rows of a group of 4 go: one quad, read and
    // rewritten in place (its lane of the sums is not used).
    let mut spare = [0.0f32; 4];
    for g0 in (0..rows).step_by(4).filter(|_| quads > 0) {
        let mut at = [spare.as_mut_ptr(); 4];
        let mut step = [0usize; 4];
        let mut maxima = [0.0f32; 4];
        for (i, row) in x.chunks_exact_mut(n).skip(g0).take(4).enumerate() {
            at[i] = row.as_mut_ptr();
            step[i] = 16;
            maxima[i] = generic::exp_offset(max[g0 + i]);
        }
        let mut lanes = [0.0f32; 4];
        let k: [u32; 16] = core::array::from_fn(|i| EXP_CONSTANTS.get(i).copied().unwrap_or(0));
        // SAFETY: each of the 4 pointers walks `quads` quads of 16 bytes:
        // a row of `x` (`n >= 4 * quads` floats, the rows disjoint) with a
        // step of 16, or the 4-float `spare` with a step of 0; `maxima`
        // and `lanes` are 4 floats, `k` 16 words. Only the listed registers
        // are written (v8-v14 as outputs, so the compiler keeps their
        // callee-saved halves); no stack is used.
        unsafe {
            asm!(
                exp_constants!(),
                "ld1 {{v8.4s}}, [{m}]",
                "dup v9.4s, v8.s[1]",
                "dup v10.4s, v8.s[2]",
                "dup v11.4s, v8.s[3]",
                "dup v8.4s, v8.s[0]",
                "movi v31.16b, #0",
                "2:",
                "ld1 {{v0.4s}}, [{p0}]",
                "fsub v0.4s, v0.4s, v8.4s",
                exp4!(),
                "st1 {{v5.4s}}, [{p0}], {s0}",
                "mov v12.16b, v5.16b",
                "ld1 {{v0.4s}}, [{p1}]",
                "fsub v0.4s, v0.4s, v9.4s",
                exp4!(),
                "st1 {{v5.4s}}, [{p1}], {s1}",
                "mov v13.16b, v5.16b",
                "ld1 {{v0.4s}}, [{p2}]",
                "fsub v0.4s, v0.4s, v10.4s",
                exp4!(),
                "st1 {{v5.4s}}, [{p2}], {s2}",
                "mov v14.16b, v5.16b",
                "ld1 {{v0.4s}}, [{p3}]",
                "fsub v0.4s, v0.4s, v11.4s",
                exp4!(),
                "st1 {{v5.4s}}, [{p3}], {s3}",
                // The 4 x 4 transpose: position j of the 4 rows, j in
                // order, into the sums.
                "trn1 v0.4s, v12.4s, v13.4s",
                "trn2 v1.4s, v12.4s, v13.4s",
                "trn1 v2.4s, v14.4s, v5.4s",
                "trn2 v3.4s, v14.4s, v5.4s",
                "zip1 v4.2d, v0.2d, v2.2d",
                "fadd v31.4s, v31.4s, v4.4s",
                "zip1 v4.2d, v1.2d, v3.2d",
                "fadd v31.4s, v31.4s, v4.4s",
                "zip2 v4.2d, v0.2d, v2.2d",
                "fadd v31.4s, v31.4s, v4.4s",
                "zip2 v4.2d, v1.2d, v3.2d",
                "fadd v31.4s, v31.4s, v4.4s",
                "subs {q}, {q}, #1",
                "b.ne 2b",
                "st1 {{v31.4s}}, [{l}]",
                k = in(reg) k.as_ptr(),
                m = in(reg) maxima.as_ptr(),
                l = in(reg) lanes.as_mut_ptr(),
                p0 = inout(reg) at[0] => _,
                p1 = inout(reg) at[1] => _,
                p2 = inout(reg) at[2] => _,
                p3 = inout(reg) at[3] => _,
                s0 = in(reg) step[0],
                s1 = in(reg) step[1],
                s2 = in(reg) step[2],
                s3 = in(reg) step[3],
                q = inout(reg) quads => _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v8") _, out("v9") _, out("v10") _,
                out("v11") _, out("v12") _, out("v13") _, out("v14") _,
                out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
                out("v21") _, out("v22") _, out("v23") _, out("v24") _, out("v25") _,
                out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _,
                out("v31") _,
                options(nostack),
            );
        }
        for (s, &l) in sums[g0..].iter_mut().zip(&lanes).take(rows - g0) {
            *s = l;
        }
    }
    for (((row, &m), &s), out) in x
        .chunks_exact_mut(n)
        .zip(max.iter())
        .zip(&sums)
        .zip(sum_out.iter_mut())
    {
        let tail = &mut row[quads * 4..];
        exp_minus(cpu, tail, generic::exp_offset(m));
        let mut s = s;
        for &v in tail.iter() {
            s += v;
        }
        *out = s;
    }
}

/// A softmax row's maximum, the value [`generic::softmax_max`] gives: lane
/// maxima by the scalar rule itself (`m = v` where `v > m`: `fcmgt` and
/// `bit`, so a NaN of either kind never enters a lane), then the lanes
/// (numbers or -inf) and the tail. Only a maximum of zero depends on the
/// order (`0.0` against `-0.0`): it is taken again by the scalar rule.
fn row_max(row: &[f32]) -> f32 {
    let quads = row.len() / 4;
    let mut m = f32::NEG_INFINITY;
    if quads > 0 {
        let bits: u32;
        // SAFETY: reads `quads` quads of 16 bytes from the start of `row`
        // (`row.len() >= 4 * quads`); only the listed registers are
        // written; no stack is used.
        unsafe {
            asm!(
                "dup v1.4s, {ninf:w}",
                "2:",
                "ld1 {{v0.4s}}, [{p}], #16",
                "fcmgt v2.4s, v0.4s, v1.4s",
                "bit v1.16b, v0.16b, v2.16b",
                "subs {q}, {q}, #1",
                "b.ne 2b",
                "fmaxnmv s1, v1.4s",
                "fmov {bits:w}, s1",
                ninf = in(reg) f32::NEG_INFINITY.to_bits(),
                p = inout(reg) row.as_ptr() => _,
                q = inout(reg) quads => _,
                bits = out(reg) bits,
                out("v0") _, out("v1") _, out("v2") _,
                options(nostack, readonly),
            );
        }
        m = f32::from_bits(bits);
    }
    for &v in &row[quads * 4..] {
        if v > m {
            m = v;
        }
    }
    if m == 0.0 {
        return generic::softmax_max(row);
    }
    m
}
