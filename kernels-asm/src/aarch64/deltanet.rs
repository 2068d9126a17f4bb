//! The gated delta rule of one value head (Qwen3.5's Gated DeltaNet) with
//! NEON: [`generic::delta_rule`]'s bits, 16 columns of the state a strip.

use super::Dotprod;
use crate::generic::{self, delta_rule_columns, delta_rule_shape};
use crate::shape::ShapeError;
use core::arch::asm;

/// Columns of one strip: four NEON registers.
const STRIP: usize = 16;

/// [`generic::delta_rule`] with NEON: each strip of 16 columns in one pass
/// over the rows for `kv` (the state decayed and stored, `kv += s * k[i]`
/// per lane), `delta = (v - kv) * beta` in registers, then a second pass
/// (`s += k[i] * delta`, `o += s * q[i]`): every lane the generic
/// sequence, `fmul` then `fadd` (no fused multiply-add). Columns past the
/// last whole strip, and builds without NEON, take the generic code.
#[allow(clippy::too_many_arguments)]
pub fn delta_rule(
    _cpu: Dotprod,
    state: &mut [f32],
    k: &[f32],
    q: &[f32],
    v: &[f32],
    decay: f32,
    beta: f32,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    delta_rule_shape(state, k, q, v, out)?;
    let (dk, dv) = (k.len(), v.len());
    if !cfg!(target_feature = "neon") || dk == 0 {
        return generic::delta_rule(state, k, q, v, decay, beta, out);
    }
    let strips = dv / STRIP;
    for c in (0..strips).map(|j| j * STRIP) {
        // SAFETY: the shapes were checked: `state` holds dk rows of dv
        // floats, so rows 0..dk at columns c..c+16 (c + 16 <= dv) are in
        // bounds, read and written by the two passes (`stride` = dv * 4
        // bytes after each row; the pointers end one stride past the last
        // row read, never dereferenced there);
        // `k` and `q` hold dk floats (read one a row), `v` and `out` 16
        // floats at c. `dk >= 1`, so each loop runs at least once. Only
        // the listed registers are written; no stack is used.
        unsafe {
            asm!(
                "dup v7.4s, {decay:w}",
                "movi v16.4s, #0",
                "movi v17.4s, #0",
                "movi v18.4s, #0",
                "movi v19.4s, #0",
                // Pass 1: s *= decay (stored); kv += s * k[i].
                "2:",
                "ld1r {{v6.4s}}, [{k}], #4",
                "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{s}]",
                "fmul v0.4s, v0.4s, v7.4s",
                "fmul v1.4s, v1.4s, v7.4s",
                "fmul v2.4s, v2.4s, v7.4s",
                "fmul v3.4s, v3.4s, v7.4s",
                "st1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{s}], {stride}",
                "fmul v24.4s, v0.4s, v6.4s",
                "fmul v25.4s, v1.4s, v6.4s",
                "fmul v26.4s, v2.4s, v6.4s",
                "fmul v27.4s, v3.4s, v6.4s",
                "fadd v16.4s, v16.4s, v24.4s",
                "fadd v17.4s, v17.4s, v25.4s",
                "fadd v18.4s, v18.4s, v26.4s",
                "fadd v19.4s, v19.4s, v27.4s",
                "subs {n}, {n}, #1",
                "b.ne 2b",
                // delta = (v - kv) * beta.
                "ld1 {{v20.4s, v21.4s, v22.4s, v23.4s}}, [{v}]",
                "dup v7.4s, {beta:w}",
                "fsub v20.4s, v20.4s, v16.4s",
                "fsub v21.4s, v21.4s, v17.4s",
                "fsub v22.4s, v22.4s, v18.4s",
                "fsub v23.4s, v23.4s, v19.4s",
                "fmul v20.4s, v20.4s, v7.4s",
                "fmul v21.4s, v21.4s, v7.4s",
                "fmul v22.4s, v22.4s, v7.4s",
                "fmul v23.4s, v23.4s, v7.4s",
                "movi v16.4s, #0",
                "movi v17.4s, #0",
                "movi v18.4s, #0",
                "movi v19.4s, #0",
                // Pass 2: s += k[i] * delta (stored); o += s * q[i].
                "3:",
                "ld1r {{v6.4s}}, [{k2}], #4",
                "ld1r {{v5.4s}}, [{q}], #4",
                "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{s2}]",
                "fmul v24.4s, v20.4s, v6.4s",
                "fmul v25.4s, v21.4s, v6.4s",
                "fmul v26.4s, v22.4s, v6.4s",
                "fmul v27.4s, v23.4s, v6.4s",
                "fadd v0.4s, v0.4s, v24.4s",
                "fadd v1.4s, v1.4s, v25.4s",
                "fadd v2.4s, v2.4s, v26.4s",
                "fadd v3.4s, v3.4s, v27.4s",
                "st1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{s2}], {stride}",
                "fmul v24.4s, v0.4s, v5.4s",
                "fmul v25.4s, v1.4s, v5.4s",
                "fmul v26.4s, v2.4s, v5.4s",
                "fmul v27.4s, v3.4s, v5.4s",
                "fadd v16.4s, v16.4s, v24.4s",
                "fadd v17.4s, v17.4s, v25.4s",
                "fadd v18.4s, v18.4s, v26.4s",
                "fadd v19.4s, v19.4s, v27.4s",
                "subs {n2}, {n2}, #1",
                "b.ne 3b",
                "st1 {{v16.4s, v17.4s, v18.4s, v19.4s}}, [{o}]",
                decay = in(reg) decay.to_bits(),
                beta = in(reg) beta.to_bits(),
                stride = in(reg) dv * 4,
                s = inout(reg) state.as_mut_ptr().add(c) => _,
                s2 = inout(reg) state.as_mut_ptr().add(c) => _,
                k = inout(reg) k.as_ptr() => _,
                k2 = inout(reg) k.as_ptr() => _,
                q = inout(reg) q.as_ptr() => _,
                n = inout(reg) dk => _,
                n2 = inout(reg) dk => _,
                v = in(reg) v.as_ptr().add(c),
                o = in(reg) out.as_mut_ptr().add(c),
                out("v0") _, out("v1") _, out("v2") _, out("v3") _,
                out("v5") _, out("v6") _, out("v7") _,
                out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                out("v20") _, out("v21") _, out("v22") _, out("v23") _,
                out("v24") _, out("v25") _, out("v26") _, out("v27") _,
                options(nostack),
            );
        }
    }
    delta_rule_columns(state, k, q, v, decay, beta, out, strips * STRIP);
    Ok(())
}
