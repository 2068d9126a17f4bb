//! The element-wise and reduction operations of the forward pass, in plain
//! f32 with a fixed order (bit-identical on every platform).

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

/// `x * sigmoid(x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + libm::expf(-x))
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

/// Softmax in place, max-subtracted.
pub fn softmax(x: &mut [f32]) {
    let mut max = f32::NEG_INFINITY;
    for &v in x.iter() {
        max = max.max(v);
    }
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = libm::expf(*v - max);
        sum += *v;
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
