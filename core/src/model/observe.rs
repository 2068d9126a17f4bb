//! What a forward step shows an observer: the input rows of every matrix
//! product, for the activation statistics of an importance matrix
//! (`kestrel imatrix`). [`super::forward::forward_observed`] and the MoE
//! block call it; every other step passes [`NoObserver`].

/// The input of a linear weight: which matrix multiplies the rows an
/// [`Observer`] is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The normed residual the fused q/k/v matrix reads: (m, hidden).
    Qkv,
    /// The attention output `attn_output` reads: (m, q_dim).
    O,
    /// The normed residual the fused gate/up matrix reads: (m, hidden).
    GateUp,
    /// The SwiGLU output `ffn_down` reads: (m, ffn).
    Down,
    /// The rows routed to MoE expert `e`, as its gate/up reads them:
    /// (tokens routed, hidden).
    ExpertGateUp(usize),
    /// Expert `e`'s SwiGLU output, as its down matrix reads it: (tokens
    /// routed, moe_ffn).
    ExpertDown(usize),
    /// Qwen3.5-MoE's shared expert: the normed residual its gate/up reads,
    /// (m, hidden).
    SharedGateUp,
    /// Its SwiGLU output, as its down reads it: (m, shared_ffn).
    SharedDown,
    /// A Gated DeltaNet layer's normed residual, as its q|k|v and z
    /// projections read it: (m, hidden).
    LinIn,
    /// Its gated norm's output, as `ssm_out` reads it: (m, value_heads x
    /// value_dim).
    LinOut,
    /// The final norm's output, as the lm_head reads it: (m, hidden); shown
    /// (with the layer count as its layer) only to an observer that asks
    /// ([`Observer::observes_output`]), for every row of the step.
    Output,
}

/// Shown the input rows of every decoder matrix as a step computes them
/// ([`super::forward::forward_observed`]): the activation statistics of an importance
/// matrix.
pub trait Observer {
    /// `rows` (whole rows, row-major) are the input of `input` in layer
    /// `layer`.
    fn observe(&mut self, layer: usize, input: Input, rows: &[f32]);

    /// Whether to compute and show [`Input::Output`] (the lm_head's input)
    /// even when the step computes no logits.
    fn observes_output(&self) -> bool {
        false
    }
}

/// The observer of every ordinary step: does nothing.
pub struct NoObserver;

impl Observer for NoObserver {
    fn observe(&mut self, _: usize, _: Input, _: &[f32]) {}
}
