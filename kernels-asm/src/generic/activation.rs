//! The exponential and what is built on it: SiLU/SwiGLU and softmax.

use crate::shape::{check_len, swiglu_shape, ShapeError};

/// `e^x` in plain f32 arithmetic, with no branches and no table, so that a
/// loop over it vectorizes and every platform gets the same bits (only
/// IEEE add, multiply, compare and bit moves; Rust never fuses them).
///
/// Cephes' method: `n = round(x log2 e)` (by the 1.5 * 2^23 trick, ties to
/// even), `r = x - n ln 2` in two parts, `e^r` by a degree-7 polynomial on
/// |r| <= ln 2 / 2, times `2^n` built in the exponent bits. Within 2 ulp of
/// `e^x` for x in [-87.3, 88]; below -87.3 it returns 0, above 88 it
/// returns e^88 (1.65e38); NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MIN: f32 = -87.336_55;
    const MAX: f32 = 88.0;
    let xc = x.clamp(MIN, MAX);
    // t = 1.5 * 2^23 + n: n = round(xc log2 e) sits in t's low mantissa
    // bits, so both n as a float and 2^n's exponent bits come without a
    // float-to-int conversion (which would not vectorize).
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let p = 1.987_569_2e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let y = (p * (r * r) + r) + 1.0;
    // n is an integer in -126..=127 here: 2^n = (n + 127) << 23.
    let n_bits = t.to_bits().wrapping_sub(ROUND.to_bits());
    let scale = f32::from_bits(n_bits.wrapping_add(127) << 23);
    let e = y * scale;
    if x < MIN {
        0.0
    } else {
        e
    }
}

/// `x * sigmoid(x)`, as `x / (1 + e^-x)` with [`exp`].
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// GELU with the tanh approximation (`gelu_pytorch_tanh`, the vision
/// tower's MLP), written as `x * sigmoid(2u) = x / (1 + e^-2u)` with
/// `u = sqrt(2/pi) (x + 0.044715 x^3)` (the same function, since
/// `1 + tanh u = 2 / (1 + e^-2u)`) and [`exp`]:
/// `x / (1 + exp(-2 sqrt(2/pi) * (x + ((0.044715 x) x) x)))`, in that order.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    x / (1.0 + exp(GELU_MINUS_2C * (x + GELU_CUBE * x * x * x)))
}

/// `-2 sqrt(2 / pi)`: [`gelu_tanh`]'s factor.
pub(crate) const GELU_MINUS_2C: f32 = -2.0 * 0.797_884_6;
/// The cubic term's coefficient of [`gelu_tanh`].
pub(crate) const GELU_CUBE: f32 = 0.044_715;

/// `x[i] = gelu_tanh(x[i])`; any length.
pub fn gelu_tanh_in_place(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = gelu_tanh(*v);
    }
}

/// `x[i] = e^(x[i] - max)` with [`exp`] (the exponentials of a softmax);
/// any length.
pub fn exp_minus(x: &mut [f32], max: f32) {
    for v in x.iter_mut() {
        *v = exp(*v - max);
    }
}

/// SwiGLU over the fused gate/up layout (runs of 8 gate rows then 8 up
/// rows): `out[8r + i] = silu(gate_up[16r + i]) * gate_up[16r + 8 + i]`;
/// `out.len()` a multiple of 8, `gate_up.len() == 2 * out.len()`.
pub fn swiglu_runs(out: &mut [f32], gate_up: &[f32]) -> Result<(), ShapeError> {
    swiglu_shape(out, gate_up)?;
    for (o, gu) in out.chunks_exact_mut(8).zip(gate_up.chunks_exact(16)) {
        for i in 0..8 {
            o[i] = silu(gu[i]) * gu[8 + i];
        }
    }
    Ok(())
}

/// Softmax in place, max-subtracted (NaNs do not take part in the max; the
/// largest value is the first of any equal ones), the exponentials by
/// [`exp_minus`], then each value times `1 / sum`, the sum taken in order:
/// [`softmax_rows`] of one row, which defines these operations once.
pub fn softmax(x: &mut [f32]) {
    let n = x.len();
    softmax_rows(x, n);
}

/// Softmax of each of the rows of `n` values in `x` (the heads of one GQA
/// group, or a block of queries): every row gets the bits of [`softmax`].
/// A last partial row (`x.len()` not a multiple of `n`) is a row of its
/// own. [`softmax_rows_with`] with [`exp_minus`].
pub fn softmax_rows(x: &mut [f32], n: usize) {
    softmax_rows_with(x, n, &exp_minus);
}

/// [`softmax_rows`] with `exp_minus` doing each row's exponentials: every
/// row gets the bits of [`softmax`] with that `exp_minus`. Up to 8 rows
/// step in lockstep through the two serial passes (the maximum, and the
/// sum in each row's order), so their dependency chains overlap instead of
/// following one another.
pub fn softmax_rows_with(x: &mut [f32], n: usize, exp_minus: &dyn Fn(&mut [f32], f32)) {
    softmax_blocks(x, n, |block, rows, n| {
        softmax_block(block, rows, n, exp_minus)
    });
}

/// The blocks a softmax of rows of `n` values in `x` steps through: `f(block,
/// rows, len)` for each run of up to 8 whole rows of `len = n` values, then
/// a last partial row as a block of one row of its length (and all of `x`
/// as one row when `n` is 0). The one place that splits rows into blocks,
/// for every kernel set's softmax.
pub fn softmax_blocks(x: &mut [f32], n: usize, mut f: impl FnMut(&mut [f32], usize, usize)) {
    if x.is_empty() {
        return;
    }
    if n == 0 {
        // No whole row: the values are one row.
        let len = x.len();
        return f(x, 1, len);
    }
    let mut rest = x;
    while !rest.is_empty() {
        let rows = (rest.len() / n).min(8);
        if rows == 0 {
            let len = rest.len();
            return f(rest, 1, len);
        }
        let (block, tail) = core::mem::take(&mut rest).split_at_mut(rows * n);
        rest = tail;
        f(block, rows, n);
    }
}

/// [`softmax`] of the `rows` (at most 8) rows of `n` values in `x`, the
/// serial passes stepped in lockstep: [`exp_block`] from a maximum of
/// `-inf`, then each row times `1 / sum`.
fn softmax_block(x: &mut [f32], rows: usize, n: usize, exp_minus: &dyn Fn(&mut [f32], f32)) {
    let mut max = [f32::NEG_INFINITY; 8];
    let mut sum = [0.0f32; 8];
    exp_block(x, n, exp_minus, &mut max[..rows], &mut sum[..rows]);
    for (row, &s) in x.chunks_exact_mut(n).zip(&sum) {
        softmax_scale(row, s);
    }
}

/// The exponentials of `max.len()` (at most 8) rows of `n` values in `x`
/// and their sums, the steps a softmax and an online softmax share: each
/// row's maximum taken from `max[g]` on (`m = v` where `v > m`: NaNs do not
/// take part, the first of equal values stays), the row's values made
/// `e^(v - exp_offset(max[g]))` by `exp_minus`, and `sum[g]` their sum in
/// order from zero. The serial passes step the rows in lockstep.
fn exp_block(
    x: &mut [f32],
    n: usize,
    exp_minus: &dyn Fn(&mut [f32], f32),
    max: &mut [f32],
    sum: &mut [f32],
) {
    for j in 0..n {
        for (g, m) in max.iter_mut().enumerate() {
            let v = x[g * n + j];
            if v > *m {
                *m = v;
            }
        }
    }
    for (row, &m) in x.chunks_exact_mut(n).zip(max.iter()) {
        exp_minus(row, exp_offset(m));
    }
    sum.fill(0.0);
    for j in 0..n {
        for (g, s) in sum.iter_mut().enumerate() {
            *s += x[g * n + j];
        }
    }
}

/// What a row's values are taken from before their exponentials: its
/// maximum, or 0 when it has none (`-inf`: every value `-inf` or NaN), so
/// that `-inf` values give 0 and NaNs stay NaN (`-inf - -inf` would be a
/// NaN for every value). A tile of an online softmax whose values are all
/// `-inf` then adds nothing.
#[inline]
pub(crate) fn exp_offset(max: f32) -> f32 {
    if max == f32::NEG_INFINITY {
        0.0
    } else {
        max
    }
}

/// One tile of an online softmax over the rows of `n` values in `x`
/// (`x.len() == rows * n`, `maxes` and `sums` one value per row): the
/// running maximum `maxes[g]` takes in the row's values (NaNs do not take
/// part; [`softmax`]'s rule, from `maxes[g]` on), the values become `e^(v -
/// maxes[g])` by [`exp_minus`], and `sums[g]` is their sum in order from
/// zero. Nothing is scaled: the caller rescales what it kept of earlier
/// tiles by `e^(old max - new max)` and divides by the total at the end.
/// Rows step through in blocks of 8 as in [`softmax_rows`].
pub fn softmax_rows_online(
    x: &mut [f32],
    n: usize,
    maxes: &mut [f32],
    sums: &mut [f32],
) -> Result<(), ShapeError> {
    softmax_online_blocks(x, n, maxes, sums, |block, n, max, sum| {
        exp_block(block, n, &exp_minus, max, sum)
    })
}

/// Checks an online softmax tile's slices ([`softmax_rows_online`]) and
/// calls `f(block, n, maxes, sums)` for each run of up to 8 rows: the one
/// place that splits them, for every kernel set.
pub(crate) fn softmax_online_blocks(
    x: &mut [f32],
    n: usize,
    maxes: &mut [f32],
    sums: &mut [f32],
    mut f: impl FnMut(&mut [f32], usize, &mut [f32], &mut [f32]),
) -> Result<(), ShapeError> {
    let rows = maxes.len();
    check_len("online softmax sums (one per row)", Some(rows), sums.len())?;
    check_len(
        "online softmax values (rows x n)",
        rows.checked_mul(n),
        x.len(),
    )?;
    if n == 0 {
        sums.fill(0.0);
        return Ok(());
    }
    for ((block, max), sum) in x
        .chunks_mut(8 * n)
        .zip(maxes.chunks_mut(8))
        .zip(sums.chunks_mut(8))
    {
        f(block, n, max, sum);
    }
    Ok(())
}

/// A softmax row's maximum as [`softmax`] takes it: NaNs do not take part,
/// and of equal values (`0.0` and `-0.0`) the first is the maximum;
/// `-inf` for a row without a number. (The vector softmaxes' fallback; the
/// lockstep loop of [`softmax_rows_with`] applies the same rule.)
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn softmax_max(row: &[f32]) -> f32 {
    let mut m = f32::NEG_INFINITY;
    for &v in row {
        if v > m {
            m = v;
        }
    }
    m
}

/// A softmax row's last step: each exponential times `1 / sum`.
pub(crate) fn softmax_scale(row: &mut [f32], sum: f32) {
    let inv = 1.0 / sum;
    // Runs of 8 (the compiler's vector multiply; each product is
    // exact-rounded alone, so any width gives the same bits).
    let mut runs = row.chunks_exact_mut(8);
    for run in &mut runs {
        for v in run.iter_mut() {
            *v *= inv;
        }
    }
    for v in runs.into_remainder() {
        *v *= inv;
    }
}
