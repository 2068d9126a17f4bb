//! The element-wise and reduction operations of the forward pass, in plain
//! f32 with a fixed order (bit-identical on every platform).

/// Reads f32 `i` of little-endian bytes.
#[inline]
pub fn f32_at(bytes: &[u8], i: usize) -> f32 {
    let b = &bytes[4 * i..4 * i + 4];
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// `out = x / sqrt(mean(x^2) + eps) * w` (w: f32 little-endian bytes).
#[cfg_attr(kestrel_shipped, optimize(speed))]
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
#[cfg_attr(kestrel_shipped, optimize(speed))]
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
#[cfg_attr(kestrel_shipped, optimize(speed))]
pub fn rope(head: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = head.len() / 2;
    for i in 0..half {
        let (x0, x1) = (head[i], head[i + half]);
        head[i] = x0 * cos[i] - x1 * sin[i];
        head[i + half] = x1 * cos[i] + x0 * sin[i];
    }
}

/// The exponential, SiLU, SwiGLU over fused runs and softmax: the scalar
/// kernels of `kestrel_kernels::generic` (the specification the vector
/// kernels match; `crate::kernels::Kernels` picks the fastest).
pub use kestrel_kernels::generic::{exp, silu, softmax, swiglu_runs};

/// `out[i] += x[i]`.
pub fn add_in_place(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o += v;
    }
}
