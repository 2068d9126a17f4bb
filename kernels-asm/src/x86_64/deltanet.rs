//! The gated delta rule of one value head (Qwen3.5's Gated DeltaNet) with
//! AVX2: [`crate::generic::delta_rule`]'s bits, 32 columns of the state a
//! strip.

use super::Avx2;
use crate::generic::{delta_rule_columns, delta_rule_shape};
use crate::shape::ShapeError;
use core::arch::x86_64::*;

/// Columns of one strip: four 256-bit registers.
const STRIP: usize = 32;

/// [`crate::generic::delta_rule`] with AVX2: each strip of 32 columns in
/// one pass over the rows for `kv` (the state decayed and stored, then
/// `kv += s * k[i]` per lane), `delta = (v - kv) * beta` in registers, then
/// a second pass (`s += k[i] * delta`, `o += s * q[i]`): every lane the generic
/// sequence, multiply then add (no fused multiply-add). Columns past the
/// last whole strip take the generic code.
#[allow(clippy::too_many_arguments)]
pub fn delta_rule(
    cpu: Avx2,
    state: &mut [f32],
    k: &[f32],
    q: &[f32],
    v: &[f32],
    decay: f32,
    beta: f32,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    delta_rule_shape(state, k, q, v, out)?;
    let strips = v.len() / STRIP;
    for c in (0..strips).map(|j| j * STRIP) {
        // SAFETY: the token proves AVX2; the shapes were checked and
        // `c + 32 <= dv`.
        unsafe { strip(cpu, state, k, q, v, decay, beta, out, c) };
    }
    delta_rule_columns(state, k, q, v, decay, beta, out, strips * STRIP);
    Ok(())
}

/// Columns `c..c + 32` of [`delta_rule`].
///
/// # Safety
/// The CPU implements AVX2; `state` holds `k.len()` rows of `v.len()`
/// floats, `q` `k.len()`, `out` `v.len()`, and `c + 32 <= v.len()`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn strip(
    _cpu: Avx2,
    state: &mut [f32],
    k: &[f32],
    q: &[f32],
    v: &[f32],
    decay: f32,
    beta: f32,
    out: &mut [f32],
    c: usize,
) {
    let dv = v.len();
    let (decay, beta) = (_mm256_set1_ps(decay), _mm256_set1_ps(beta));
    let base = state.as_mut_ptr();
    let mut kv = [_mm256_setzero_ps(); 4];
    for (i, &ki) in k.iter().enumerate() {
        let kb = _mm256_set1_ps(ki);
        for (r, acc) in kv.iter_mut().enumerate() {
            // SAFETY: row i < dk, columns c + 8r .. c + 8r + 8 <= dv (the
            // function contract); unaligned.
            unsafe {
                let p = base.add(i * dv + c + 8 * r);
                let s = _mm256_mul_ps(_mm256_loadu_ps(p), decay);
                _mm256_storeu_ps(p, s);
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(s, kb));
            }
        }
    }
    // SAFETY: v holds columns c..c + 32 (the function contract).
    let delta: [__m256; 4] = core::array::from_fn(|r| unsafe {
        let vj = _mm256_loadu_ps(v.as_ptr().add(c + 8 * r));
        _mm256_mul_ps(_mm256_sub_ps(vj, kv[r]), beta)
    });
    let mut o = [_mm256_setzero_ps(); 4];
    for (i, (&ki, &qi)) in k.iter().zip(q).enumerate() {
        let (kb, qb) = (_mm256_set1_ps(ki), _mm256_set1_ps(qi));
        for (r, acc) in o.iter_mut().enumerate() {
            // SAFETY: as in the first pass.
            unsafe {
                let p = base.add(i * dv + c + 8 * r);
                let s = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_mul_ps(kb, delta[r]));
                _mm256_storeu_ps(p, s);
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(s, qb));
            }
        }
    }
    for (r, acc) in o.iter().enumerate() {
        // SAFETY: out holds columns c..c + 32 (the function contract).
        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(c + 8 * r), *acc) };
    }
}
