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

/// Softmax of each of the rows of `n` values in `x`: the bits of
/// [`crate::generic::softmax_rows`] (same blocks of up to 8 rows, each
/// row's maximum, exponentials and sum in order), with the passes
/// vectorized: each block's exponentials and sums are one pass, the sums of
/// its rows one vector (row `g` in lane `g`) taking 8 positions per step
/// through a transpose, each lane still adding its row's values one by one
/// in order.
pub fn softmax_rows(_cpu: Avx2, x: &mut [f32], n: usize) {
    crate::generic::softmax_blocks(x, n, |block, rows, n| {
        // SAFETY: the token proves AVX2/FMA/F16C; `block` holds `rows <= 8`
        // rows of `n` values (softmax_blocks).
        unsafe { softmax_block_avx2(block, rows, n) }
    });
}

/// One tile of an online softmax: the bits of
/// [`crate::generic::softmax_rows_online`] (blocks of up to 8 rows, each
/// row's maximum from its running one, exponentials and sum in order) with
/// [`softmax_rows`]'s vector passes, without the scaling.
pub fn softmax_rows_online(
    _cpu: Avx2,
    x: &mut [f32],
    n: usize,
    maxes: &mut [f32],
    sums: &mut [f32],
) -> Result<(), ShapeError> {
    crate::generic::softmax_online_blocks(x, n, maxes, sums, |block, n, max, sum| {
        // SAFETY: the token proves AVX2/FMA/F16C; `block` holds `max.len()
        // = sum.len()` (1..=8) rows of `n` values (softmax_online_blocks).
        unsafe { exp_block_avx2(block, n, max, sum) }
    })
}

/// One block of [`softmax_rows`]: `rows` (1..=8) rows of `n` values:
/// [`exp_block_avx2`] from a maximum of `-inf`, then each row times `1 /
/// sum`.
///
/// # Safety
/// `x.len() == rows * n`, `1 <= rows <= 8`; the CPU must implement AVX2,
/// FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn softmax_block_avx2(x: &mut [f32], rows: usize, n: usize) {
    let mut max = [f32::NEG_INFINITY; 8];
    let mut sums = [0.0f32; 8];
    // SAFETY: the function contract.
    unsafe { exp_block_avx2(x, n, &mut max[..rows], &mut sums[..rows]) };
    for (row, &s) in x.chunks_exact_mut(n).zip(&sums) {
        // Each value times `1 / sum`: one rounding per product, as in
        // the generic code's last step.
        let inv = _mm256_set1_ps(1.0 / s);
        map8(row, |v| _mm256_mul_ps(v, inv));
    }
}

/// The exponentials and sums of `max.len()` (1..=8) rows of `n` values in
/// `x`, the bits of the generic `exp_block`: each row's maximum from
/// `max[g]` on, its exponentials (from `exp_offset` of the maximum) and
/// (into `sum[g]`) their sum in order.
/// The exponentials and sums are one pass, the rows' sums one vector (row
/// `g` in lane `g`) taking 8 positions per step through a transpose, each
/// lane still adding its row's values one by one in order.
///
/// # Safety
/// `x.len() == max.len() * n`, `1 <= max.len() <= 8`, `sum.len() ==
/// max.len()`; the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn exp_block_avx2(x: &mut [f32], n: usize, max: &mut [f32], sum_out: &mut [f32]) {
    let rows = max.len();
    for (row, m) in x.chunks_exact(n).zip(max.iter_mut()) {
        // The running maximum, then the row's: `max(m, row)` by the
        // scalar rule (equal to taking the row's values from `m` on).
        let t = row_max(row);
        if t > *m {
            *m = t;
        }
    }
    let mut offsets = [0.0f32; 8];
    for (o, &m) in offsets.iter_mut().zip(max.iter()) {
        *o = crate::generic::exp_offset(m);
    }
    let whole = n / 8 * 8;
    let mut sum = _mm256_setzero_ps();
    let base = x.as_mut_ptr();
    for c in (0..whole).step_by(8) {
        let mut e = [_mm256_setzero_ps(); 8];
        for (g, (e, &m)) in e.iter_mut().zip(&offsets).enumerate().take(rows) {
            // SAFETY: row `g < rows` holds `n >= c + 8` values at `g * n`
            // inside `x` (the function contract).
            unsafe {
                let p = base.add(g * n + c);
                *e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p), _mm256_set1_ps(m)));
                _mm256_storeu_ps(p, *e);
            }
        }
        // Column `j` of the block: position `c + j` of every row.
        for column in super::transpose8(e) {
            sum = _mm256_add_ps(sum, column);
        }
    }
    let mut sums = [0.0f32; 8];
    // SAFETY: `sums` is 8 floats; unaligned store.
    unsafe { _mm256_storeu_ps(sums.as_mut_ptr(), sum) };
    for (((row, &m), s), out) in x
        .chunks_exact_mut(n)
        .zip(&offsets)
        .zip(&mut sums)
        .zip(sum_out.iter_mut())
    {
        let tail = &mut row[whole..];
        exp_minus_avx2(tail, m);
        for &v in tail.iter() {
            *s += v;
        }
        *out = *s;
    }
}

/// A softmax row's maximum, the value [`crate::generic::softmax_max`]
/// gives: lane maxima with `max(v, m)` (which keeps `m` when `v` is NaN, as
/// the scalar `v > m` skips it), then the lanes. Only a maximum of zero
/// depends on the order (`0.0` against `-0.0`): it is taken again by the
/// scalar rule.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn row_max(row: &[f32]) -> f32 {
    let mut chunks = row.chunks_exact(8);
    let mut lanes = _mm256_set1_ps(f32::NEG_INFINITY);
    for c in &mut chunks {
        // SAFETY: `c` is 8 floats (chunks_exact); unaligned load.
        lanes = _mm256_max_ps(unsafe { _mm256_loadu_ps(c.as_ptr()) }, lanes);
    }
    let mut each = [0.0f32; 8];
    // SAFETY: `each` is 8 floats; unaligned store.
    unsafe { _mm256_storeu_ps(each.as_mut_ptr(), lanes) };
    let mut m = f32::NEG_INFINITY;
    for &v in each.iter().chain(chunks.remainder()) {
        if v > m {
            m = v;
        }
    }
    if m == 0.0 {
        return crate::generic::softmax_max(row);
    }
    m
}
