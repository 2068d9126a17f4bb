//! The model configuration, as stored in a VQF file's config section.

use crate::error::Error;

/// Largest number of decoder layers a config may declare.
pub const MAX_LAYERS: usize = 1024;
/// Largest number of EOS ids kept.
pub const MAX_EOS: usize = 8;

/// The model family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Qwen2 / Qwen2.5: q/k/v biases, no q/k norm.
    Qwen2 = 1,
    /// Qwen3 dense: per-head q/k RMSNorm, no biases.
    Qwen3 = 2,
    /// Qwen3-MoE.
    Qwen3Moe = 3,
    /// Qwen3-VL (text side).
    Qwen3Vl = 4,
}

impl Arch {
    /// The arch from its stored id.
    pub fn from_id(id: u64) -> Option<Arch> {
        match id {
            1 => Some(Arch::Qwen2),
            2 => Some(Arch::Qwen3),
            3 => Some(Arch::Qwen3Moe),
            4 => Some(Arch::Qwen3Vl),
            _ => None,
        }
    }

    /// A short name (`qwen2`, `qwen3`, `qwen3moe`, `qwen3vl`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen3Vl => "qwen3vl",
        }
    }
}

/// Mixture-of-experts settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeConfig {
    /// Experts per MoE layer.
    pub num_experts: u32,
    /// Experts chosen per token.
    pub experts_per_token: u32,
    /// Each expert's FFN width.
    pub moe_ffn_size: u32,
    /// Renormalize the chosen experts' weights to sum 1.
    pub norm_topk_prob: bool,
    /// Every `decoder_sparse_step`-th layer is MoE (counting from 1).
    pub decoder_sparse_step: u32,
    /// Layers forced dense, as a bitset over layer indices.
    pub mlp_only_layers: [u64; MAX_LAYERS / 64],
}

/// A validated model configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Model family.
    pub arch: Arch,
    /// Rows of the embedding and lm_head.
    pub vocab_size: u32,
    /// Residual width.
    pub hidden_size: u32,
    /// Decoder layers.
    pub num_layers: u32,
    /// Query heads.
    pub num_heads: u32,
    /// Key/value heads (divides `num_heads`).
    pub num_kv_heads: u32,
    /// Width of one head (even).
    pub head_dim: u32,
    /// Dense FFN width.
    pub ffn_size: u32,
    /// RoPE base.
    pub rope_theta: f64,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// The model's max_position_embeddings.
    pub max_position: u32,
    /// lm_head shares the embedding.
    pub tied_embeddings: bool,
    /// q/k/v projections have biases (Qwen2).
    pub qkv_bias: bool,
    /// Per-head q/k RMSNorm (Qwen3).
    pub qk_norm: bool,
    /// MoE settings, for MoE models.
    pub moe: Option<MoeConfig>,
    /// M-RoPE sections (t, h, w), for VL models; zeros otherwise.
    pub mrope_section: [u32; 3],
    /// Beginning-of-text token, if any.
    pub bos_token_id: Option<u32>,
    /// End-of-generation tokens (`eos_count` of them).
    pub eos_token_ids: [u32; MAX_EOS],
    /// How many of `eos_token_ids` are used.
    pub eos_count: u32,
}

/// Config record keys (docs/vqf.md).
pub mod key {
    #![allow(missing_docs)]
    pub const ARCH: u32 = 1;
    pub const VOCAB_SIZE: u32 = 2;
    pub const HIDDEN_SIZE: u32 = 3;
    pub const NUM_LAYERS: u32 = 4;
    pub const NUM_HEADS: u32 = 5;
    pub const NUM_KV_HEADS: u32 = 6;
    pub const HEAD_DIM: u32 = 7;
    pub const FFN_SIZE: u32 = 8;
    pub const ROPE_THETA: u32 = 9;
    pub const RMS_NORM_EPS: u32 = 10;
    pub const MAX_POSITION: u32 = 11;
    pub const TIED_EMBEDDINGS: u32 = 12;
    pub const QKV_BIAS: u32 = 13;
    pub const QK_NORM: u32 = 14;
    pub const NUM_EXPERTS: u32 = 20;
    pub const EXPERTS_PER_TOKEN: u32 = 21;
    pub const MOE_FFN_SIZE: u32 = 22;
    pub const NORM_TOPK_PROB: u32 = 23;
    pub const DECODER_SPARSE_STEP: u32 = 24;
    pub const MLP_ONLY_LAYERS: u32 = 25;
    pub const MROPE_SECTION: u32 = 30;
    pub const BOS_TOKEN_ID: u32 = 50;
    pub const EOS_TOKEN_IDS: u32 = 51;
}

impl Config {
    /// Width of all query heads.
    pub fn q_dim(&self) -> usize {
        self.num_heads as usize * self.head_dim as usize
    }

    /// Width of all key (or value) heads.
    pub fn kv_dim(&self) -> usize {
        self.num_kv_heads as usize * self.head_dim as usize
    }

    /// Rows of the fused QKV projection.
    pub fn qkv_rows(&self) -> usize {
        self.q_dim() + 2 * self.kv_dim()
    }

    /// The EOS ids.
    pub fn eos(&self) -> &[u32] {
        &self.eos_token_ids[..(self.eos_count as usize).min(MAX_EOS)]
    }

    /// Whether layer `l` uses the MoE FFN (Qwen3-MoE rule: not listed in
    /// mlp_only_layers and `(l + 1) % decoder_sparse_step == 0`).
    pub fn is_moe_layer(&self, l: usize) -> bool {
        match &self.moe {
            None => false,
            Some(m) => {
                let forced_dense =
                    l < MAX_LAYERS && (m.mlp_only_layers[l / 64] >> (l % 64)) & 1 == 1;
                let step = m.decoder_sparse_step.max(1) as usize;
                !forced_dense && (l + 1).is_multiple_of(step)
            }
        }
    }

    /// Checks that every size is positive, bounded, and consistent.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |what: &'static str| Err(Error::BadConfig { what });
        let in_range = |v: u32, max: u32| v > 0 && v <= max;
        if !in_range(self.vocab_size, 4_194_304) {
            return bad("vocab_size must be 1..=4194304");
        }
        if !in_range(self.hidden_size, 65_536) {
            return bad("hidden_size must be 1..=65536");
        }
        if !in_range(self.num_layers, MAX_LAYERS as u32) {
            return bad("num_layers must be 1..=1024");
        }
        if !in_range(self.num_heads, 1024) || !in_range(self.num_kv_heads, 1024) {
            return bad("head counts must be 1..=1024");
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return bad("num_kv_heads must divide num_heads");
        }
        if !in_range(self.head_dim, 1024) || !self.head_dim.is_multiple_of(2) {
            return bad("head_dim must be even and 2..=1024");
        }
        if !in_range(self.ffn_size, 1 << 20) {
            return bad("ffn_size must be 1..=1048576");
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return bad("rope_theta must be finite and > 0");
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return bad("rms_norm_eps must be finite and > 0");
        }
        if self.max_position == 0 {
            return bad("max_position must be > 0");
        }
        if self.eos_count as usize > MAX_EOS {
            return bad("too many eos_token_ids (at most 8)");
        }
        if (self.arch == Arch::Qwen3Moe) != self.moe.is_some() {
            return bad("MoE settings must be present exactly for arch qwen3moe");
        }
        if let Some(m) = &self.moe {
            if !in_range(m.num_experts, 4096)
                || !in_range(m.experts_per_token, m.num_experts)
                || !in_range(m.moe_ffn_size, 1 << 20)
                || m.decoder_sparse_step == 0
            {
                return bad("MoE sizes must be positive, with experts_per_token <= num_experts");
            }
            if !m.moe_ffn_size.is_multiple_of(8) {
                return bad("moe_ffn_size must be a multiple of 8 (fused gate/up runs)");
            }
        }
        Ok(())
    }
}
