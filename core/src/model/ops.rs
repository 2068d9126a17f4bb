//! The element-wise and reduction operations of the forward pass, in plain
//! f32 with a fixed order (bit-identical on every platform).

use crate::state::KvView;

/// Reads f32 `i` of little-endian bytes.
#[inline]
pub fn f32_at(bytes: &[u8], i: usize) -> f32 {
    let b = &bytes[4 * i..4 * i + 4];
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// `out = x / sqrt(mean(x^2) + eps) * w` (w: f32 little-endian bytes).
pub fn rmsnorm(out: &mut [f32], x: &[f32], w: &[u8], eps: f32) {
    let mut ss = 0.0f32;
    for &v in x {
        ss += v * v;
    }
    let scale = 1.0 / libm::sqrtf(ss / x.len() as f32 + eps);
    for (i, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = v * scale * f32_at(w, i);
    }
}

/// RMSNorm in place.
pub fn rmsnorm_in_place(x: &mut [f32], w: &[u8], eps: f32) {
    let mut ss = 0.0f32;
    for &v in x.iter() {
        ss += v * v;
    }
    let scale = 1.0 / libm::sqrtf(ss / x.len() as f32 + eps);
    for (i, v) in x.iter_mut().enumerate() {
        *v = *v * scale * f32_at(w, i);
    }
}

/// NEOX-style rotary embedding of one head: pairs `(i, i + d/2)`.
pub fn rope(head: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = head.len() / 2;
    for i in 0..half {
        let (x0, x1) = (head[i], head[i + half]);
        head[i] = x0 * cos[i] - x1 * sin[i];
        head[i + half] = x1 * cos[i] + x0 * sin[i];
    }
}

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

/// SwiGLU over the fused gate/up layout (runs of 8 gate rows then 8 up
/// rows): `out[8r + i] = silu(gate[r][i]) * up[r][i]`.
pub fn swiglu_runs(out: &mut [f32], gate_up: &[f32]) {
    for (o, gu) in out.chunks_exact_mut(8).zip(gate_up.chunks_exact(16)) {
        for i in 0..8 {
            o[i] = silu(gu[i]) * gu[8 + i];
        }
    }
}

/// Softmax in place, max-subtracted (NaNs do not take part in the max).
/// The exponentials vectorize; their sum is taken in order.
pub fn softmax(x: &mut [f32]) {
    let max = max_of(x);
    for v in x.iter_mut() {
        *v = exp(*v - max);
    }
    normalize(x);
}

/// The largest value of `x` (NaNs skipped; -inf when empty or all NaN).
pub fn max_of(x: &[f32]) -> f32 {
    let mut max = f32::NEG_INFINITY;
    for &v in x {
        if v > max {
            max = v;
        }
    }
    max
}

/// Divides `x` by its sum (taken in order): `x[i] *= 1 / sum`.
pub fn normalize(x: &mut [f32]) {
    let mut sum = 0.0f32;
    for &v in x.iter() {
        sum += v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// `out[i] += x[i]`.
pub fn add_in_place(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o += v;
    }
}

/// The reference attention scores: `scores[j] = dot8(q, K_j) * scale`,
/// where `K_j` is `q.len()` elements at `j * stride` and `dot8` the 8-lane
/// dot product (docs/kernels.md): lane `i % 8` accumulates `q[i] * k[i]` in
/// order, and the lanes are added as `((s0 + s4) + (s2 + s6)) + ((s1 + s5) +
/// (s3 + s7))`: the order 8-wide (AVX2) and 2x4-wide (NEON) code follows
/// naturally, so every kernel gives the same bits.
pub fn attn_scores(q: &[f32], keys: KvView, stride: usize, scale: f32, scores: &mut [f32]) {
    for (j, sc) in scores.iter_mut().enumerate() {
        let mut s = [0.0f32; 8];
        for (i, &qi) in q.iter().enumerate() {
            s[i % 8] += qi * keys.get(j * stride + i);
        }
        *sc = (((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))) * scale;
    }
}

/// The reference attention output: `out[i] = sum_j probs[j] * V_j[i]`,
/// `j` in order starting from 0.0, `V_j` = `out.len()` elements at
/// `j * stride`.
pub fn attn_values(probs: &[f32], values: KvView, stride: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (j, &p) in probs.iter().enumerate() {
        for (i, o) in out.iter_mut().enumerate() {
            *o += p * values.get(j * stride + i);
        }
    }
}
