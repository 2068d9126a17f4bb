//! aarch64 kernels: hand-written `asm!` using `sdot` (Armv8.2 dotprod) and
//! NEON.
//!
//! One file per operation; every public function has the name and the
//! signature of its twin in [`crate::generic`] with the [`Dotprod`] token in
//! front, and calls that twin for the shapes (or builds without NEON) it
//! has no vector code for. A [`ShapeError`](crate::ShapeError) means the
//! slices do not fit the dimensions; nothing was written then.

mod activation;
mod attention;
mod deltanet;
pub(crate) mod gemm;
pub(crate) mod gemv;
pub(crate) mod k8;
pub(crate) mod ktile;
mod matvec;
mod quantize;

pub use activation::{
    exp_minus, gelu_tanh_in_place, softmax_rows, softmax_rows_online, swiglu_runs,
};
pub use attention::{
    attn_scores_f16, attn_scores_f16_heads, attn_scores_f32, attn_scores_f32_heads,
    attn_values_f16, attn_values_f16_heads, attn_values_f32, attn_values_f32_heads,
};
pub use deltanet::delta_rule;
pub use matvec::{matvec_f16, matvec_f32};
pub use quantize::{quantize_acts_q8_0, quantize_acts_q8_k};

/// This architecture's capability token under the name every architecture
/// module exports.
pub type Cpu = Dotprod;

/// Proof that the CPU executing this program implements the dotprod
/// extension (`sdot`/`udot`). Kernels that use `sdot` take one by value.
#[derive(Clone, Copy, Debug)]
pub struct Dotprod(());

impl Dotprod {
    /// `Some` when the build itself targets dotprod (`-C target-feature=+dotprod`
    /// or a target CPU that has it), so every CPU able to run this binary has it.
    pub fn new() -> Option<Self> {
        if cfg!(target_feature = "dotprod") {
            Some(Dotprod(()))
        } else {
            None
        }
    }

    /// Detects dotprod at run time through the operating system.
    #[cfg(any(feature = "std", test))]
    pub fn detect() -> Option<Self> {
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            Some(Dotprod(()))
        } else {
            None
        }
    }

    /// A token without checking.
    ///
    /// # Safety
    /// The caller guarantees that the CPU implements FEAT_DotProd; calling a
    /// kernel with this token on a CPU without it executes an undefined
    /// instruction.
    pub unsafe fn new_unchecked() -> Self {
        Dotprod(())
    }
}
