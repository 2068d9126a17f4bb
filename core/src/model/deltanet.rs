//! Gated DeltaNet, Qwen3.5's linear attention: the per-token rules of its mixer, in f32, over a state that does not grow.
//!
//! Three of every four Qwen3.5 layers mix tokens this way instead of
//! attending over a KV cache (transformers' `Qwen3_5GatedDeltaNet`). For
//! each token, after the input projections (`in_proj_qkv`, `in_proj_z`,
//! `in_proj_b`, `in_proj_a`, run by the caller with the layouts every
//! matrix uses):
//!
//! 1. [`conv_step`]: the q|k|v channels through a depthwise causal
//!    convolution of `conv_kernel` taps (the previous `conv_kernel - 1`
//!    tokens' inputs kept in a window), then SiLU;
//! 2. [`gates`]: per value head, the write strength `beta = sigmoid(b)`
//!    and the log decay `g = -exp(A_log) * softplus(a + dt_bias)`;
//! 3. [`normalize_qk`]: q and k L2-normalised (q scaled by 1/sqrt(dk));
//!    then [`head_step`] per value head `h` (reading key head `h /
//!    (value_heads / key_heads)`, or `h % key_heads` in llama.cpp's
//!    order: [`DeltaShape::key_head_of`]),
//!    the state `S` [dk, dv] decays by `exp(g)`, takes the delta rule's
//!    write `S += k (beta (v - S^T k))^T`, and the output is `S^T q`;
//! 4. [`gated_norm`]: each head's output RMS-normalised, times the norm's
//!    weight (not zero-centred) and `silu(z)`; then `out_proj`.
//!
//! The state per sequence is the convolution window and the `[value_heads,
//! dk, dv]` matrix: a prompt fed in any chunks leaves the same state, bit
//! for bit, because every token runs the same rule in the same order.
//! The state's update is a kernel ([`Kernels::delta_rule`]: scalar
//! reference, NEON, AVX2, the same bits); `forward::delta_rows` runs the
//! value heads over the pool, each head's tokens in order.
//! `tests/tests/qwen35.rs` checks these rules layer by layer against
//! transformers' outputs on the Qwen3.5 fixture.

pub use crate::config::DeltaShape;

use super::ops::f32_at;
use crate::kernels::Kernels;

/// `x / (1 + e^-x)`.
fn silu(x: f32) -> f32 {
    x / (1.0 + libm::expf(-x))
}

/// `1 / (1 + e^-x)`.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + libm::expf(-x))
}

/// `ln(1 + e^x)`, `x` itself above 20 (torch's threshold).
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        libm::log1pf(libm::expf(x))
    }
}

/// One token through the depthwise causal convolution, then SiLU: `x`
/// [conv_channels] (the token's q|k|v projection) becomes the output;
/// `window` [`DeltaShape::window_len`] holds the previous tokens' inputs
/// (zeros before the first) and moves on by this one; `weight`
/// [conv_channels, conv_kernel] f32 bytes (transformers' `conv1d.weight`
/// [C, 1, K]), the last tap on the token itself.
pub fn conv_step(shape: &DeltaShape, window: &mut [f32], weight: &[u8], x: &mut [f32]) {
    let (c, k) = (shape.conv_channels(), shape.conv_kernel);
    let window = &mut window[..shape.window_len()];
    for (ch, v) in x[..c].iter_mut().enumerate() {
        let tap = |t: usize| f32_at(weight, ch * k + t);
        let mut acc = 0.0f32;
        for t in 0..k - 1 {
            acc += tap(t) * window[t * c + ch];
        }
        acc += tap(k - 1) * *v;
        push_channel(window, c, k, ch, *v);
        *v = silu(acc);
    }
}

/// The window moves on by one token without the convolution: `input`
/// [conv_channels] is the token's convolution input (a verify row
/// replayed by `forward::recurrent_settle`).
pub fn window_push(shape: &DeltaShape, window: &mut [f32], input: &[f32]) {
    let (c, k) = (shape.conv_channels(), shape.conv_kernel);
    for (ch, &v) in input[..c].iter().enumerate() {
        push_channel(window, c, k, ch, v);
    }
}

/// Channel `ch` of the window ([k - 1, c], oldest first) drops its oldest
/// input and keeps `input`.
fn push_channel(window: &mut [f32], c: usize, k: usize, ch: usize, input: f32) {
    for t in 0..k.saturating_sub(2) {
        window[t * c + ch] = window[(t + 1) * c + ch];
    }
    if k > 1 {
        window[(k - 2) * c + ch] = input;
    }
}

/// The gates of one token per value head, in place: `ba` [2 value_heads]
/// holds the token's `b` then `a` projections and becomes `beta =
/// sigmoid(b)` then `g = rate * softplus(a + dt_bias)` (the log of the
/// state's decay); `rate` (`-exp(A_log)`, computed at conversion as
/// llama.cpp's files store it) and `dt_bias` [value_heads] are the layer's,
/// f32 bytes.
pub fn gates(ba: &mut [f32], rate: &[u8], dt_bias: &[u8]) {
    let (b, a) = ba.split_at_mut(ba.len() / 2);
    for (h, (b, a)) in b.iter_mut().zip(a.iter_mut()).enumerate() {
        *b = sigmoid(*b);
        *a = f32_at(rate, h) * softplus(*a + f32_at(dt_bias, h));
    }
}

/// `x * rsqrt(sum(x^2) + 1e-6)`, in place (transformers' `l2norm`).
fn l2_normalize(x: &mut [f32]) {
    let ss: f32 = x.iter().map(|v| v * v).sum();
    let r = 1.0 / libm::sqrtf(ss + 1e-6);
    x.iter_mut().for_each(|v| *v *= r);
}

/// q and k of one token, [key_heads x key_dim] each, L2-normalised per
/// head in place, q then scaled by `1/sqrt(key_dim)`.
pub fn normalize_qk(shape: &DeltaShape, q: &mut [f32], k: &mut [f32]) {
    let dk = shape.key_dim;
    let scale = 1.0 / libm::sqrtf(dk as f32);
    for h in 0..shape.key_heads {
        l2_normalize(&mut q[h * dk..(h + 1) * dk]);
        l2_normalize(&mut k[h * dk..(h + 1) * dk]);
        q[h * dk..(h + 1) * dk].iter_mut().for_each(|x| *x *= scale);
    }
}

/// Value head `h` of one token through the gated delta rule: its state
/// `s` [dk, dv] decays by `exp(g)`, takes the delta rule's write `S += k
/// (beta (v - S^T k))^T`, and `out` [dv] = `S^T q` (`q` and `k` of its key
/// head, normalised: [`normalize_qk`]; [`Kernels::delta_rule`]).
#[allow(clippy::too_many_arguments)]
pub fn head_step(
    kernels: &Kernels,
    s: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: f32,
    beta: f32,
    out: &mut [f32],
) {
    kernels.delta_rule(s, k, q, v, libm::expf(g), beta, out);
}

/// The mixer's output norm, per value head: `rmsnorm(out) * weight *
/// silu(z)` (transformers' `RMSNormGated`; `weight` [value_dim] f32 bytes,
/// not zero-centred), in place on `out` [value_heads x value_dim].
pub fn gated_norm(shape: &DeltaShape, out: &mut [f32], z: &[f32], weight: &[u8], eps: f32) {
    let dv = shape.value_dim;
    for (o, z) in out.chunks_exact_mut(dv).zip(z.chunks_exact(dv)) {
        let ms = o.iter().map(|v| v * v).sum::<f32>() / dv as f32;
        let r = 1.0 / libm::sqrtf(ms + eps);
        for (i, (x, &zi)) in o.iter_mut().zip(z).enumerate() {
            *x = f32_at(weight, i) * (*x * r) * silu(zi);
        }
    }
}
