//! The exponential with AVX2, and SwiGLU and the softmax exponentials on
//! top of it.

use super::Avx2;
use crate::shape::{swiglu_shape, ShapeError};
use core::arch::x86_64::*;

/// `e^x` of 8 lanes: the same operations, in the same order, as
/// [`crate::generic::exp`] applies to each value, so the bits are
/// the same (NaN lanes stay NaN).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp8(x: __m256) -> __m256 {
    const ROUND: f32 = 12_582_912.0;
    const MIN: f32 = -87.336_55;
    let round = _mm256_set1_ps(ROUND);
    // clamp: max/min return their second operand when one is NaN, so
    // NaN lanes pass through as the scalar `clamp` lets them.
    let xc = _mm256_min_ps(_mm256_set1_ps(88.0), _mm256_max_ps(_mm256_set1_ps(MIN), x));
    let t = _mm256_add_ps(
        _mm256_mul_ps(xc, _mm256_set1_ps(core::f32::consts::LOG2_E)),
        round,
    );
    let n = _mm256_sub_ps(t, round);
    let r = _mm256_sub_ps(
        _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(0.693_359_4))),
        _mm256_mul_ps(n, _mm256_set1_ps(-2.121_944_4e-4)),
    );
    let mut p = _mm256_set1_ps(1.987_569_2e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(c));
    }
    let y = _mm256_add_ps(
        _mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r),
        _mm256_set1_ps(1.0),
    );
    let n_bits = _mm256_sub_epi32(
        _mm256_castps_si256(t),
        _mm256_set1_epi32(ROUND.to_bits() as i32),
    );
    let scale = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        n_bits,
        _mm256_set1_epi32(127),
    )));
    let e = _mm256_mul_ps(y, scale);
    let below = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(MIN));
    _mm256_andnot_ps(below, e)
}

/// SwiGLU over fused gate/up runs: `out[8r + i] = silu(g) * u` with
/// `g = gate_up[16r + i]`, `u = gate_up[16r + 8 + i]`, `silu(g) = g / (1 +
/// e^-g)`; the bits of [`crate::generic::swiglu_runs`].
///
/// A shape error unless `out.len()` is a multiple of 8 and `gate_up.len()
/// == 2 * out.len()`.
pub fn swiglu_runs(_cpu: Avx2, out: &mut [f32], gate_up: &[f32]) -> Result<(), ShapeError> {
    swiglu_shape(out, gate_up)?;
    // SAFETY: `out` holds 8 floats per run and `gate_up` 16 (checked
    // above); the token proves AVX2/FMA/F16C.
    unsafe { swiglu_avx2(out, gate_up) };
    Ok(())
}

/// # Safety
/// `out.len() * 2 == gate_up.len()`, `out.len() % 8 == 0`; AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn swiglu_avx2(out: &mut [f32], gate_up: &[f32]) {
    // SAFETY: `out` holds whole runs of 8 floats and `gate_up` 16 per run (the
    // function contract), so every load and store below is in bounds; the
    // CPU implements AVX2 and F16C (the contract).
    unsafe {
        let sign = _mm256_set1_ps(-0.0);
        let one = _mm256_set1_ps(1.0);
        for (o, gu) in out.chunks_exact_mut(8).zip(gate_up.chunks_exact(16)) {
            let g = _mm256_loadu_ps(gu.as_ptr());
            let u = _mm256_loadu_ps(gu.as_ptr().add(8));
            let silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_xor_ps(g, sign))));
            _mm256_storeu_ps(o.as_mut_ptr(), _mm256_mul_ps(silu, u));
        }
    }
}

/// `x[i] = gelu_tanh(x[i])`: the operations of
/// [`crate::generic::gelu_tanh`] on 8 lanes (the cube, the sum, the
/// factor, [`exp8`], `1 +`, the division), so the same bits; any length.
pub fn gelu_tanh_in_place(_cpu: Avx2, x: &mut [f32]) {
    // SAFETY: the token proves AVX2/FMA/F16C; the function only touches
    // `x` through its chunks.
    unsafe { gelu_avx2(x) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn gelu_avx2(x: &mut [f32]) {
    map8(x, |v| gelu8(v));
}

/// [`crate::generic::gelu_tanh`] of 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gelu8(x: __m256) -> __m256 {
    use crate::generic::{GELU_CUBE, GELU_MINUS_2C};
    let cube = _mm256_mul_ps(
        _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_CUBE), x), x),
        x,
    );
    let a = _mm256_mul_ps(_mm256_set1_ps(GELU_MINUS_2C), _mm256_add_ps(x, cube));
    _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), exp8(a)))
}

/// `x[i] = f(x[i])` 8 lanes at a time, the tail through a padded vector.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn map8(x: &mut [f32], f: impl Fn(__m256) -> __m256) {
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: `c` is 8 floats (chunks_exact); unaligned load and store.
        unsafe { _mm256_storeu_ps(c.as_mut_ptr(), f(_mm256_loadu_ps(c.as_ptr()))) };
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let n = rest.len();
        let mut lanes = [0.0f32; 8];
        lanes[..n].copy_from_slice(rest);
        // SAFETY: `lanes` is 8 floats; unaligned load and store.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), f(_mm256_loadu_ps(lanes.as_ptr()))) };
        rest.copy_from_slice(&lanes[..n]);
    }
}

/// `x[i] = e^(x[i] - max)` (the exponentials of a softmax), the bits of
/// [`crate::generic::exp`] lane by lane; any length.
pub fn exp_minus(_cpu: Avx2, x: &mut [f32], max: f32) {
    // SAFETY: the token proves AVX2/FMA/F16C; the function only touches
    // `x` through its chunks.
    unsafe { exp_minus_avx2(x, max) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn exp_minus_avx2(x: &mut [f32], max: f32) {
    let m = _mm256_set1_ps(max);
    map8(x, |v| exp8(_mm256_sub_ps(v, m)));
}
