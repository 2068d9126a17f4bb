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

/// Most DeepStack feature levels a vision tower may declare.
pub const MAX_DEEPSTACK: usize = 8;

/// The Qwen3-VL vision tower and its image preprocessing (docs/vqf.md,
/// config keys 60-77). LayerNorm epsilon is 1e-6 and the 2-D rotary base
/// 10000, as in the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VisionConfig {
    /// ViT blocks.
    pub depth: u32,
    /// ViT residual width.
    pub hidden_size: u32,
    /// Attention heads (divide `hidden_size`, even head width).
    pub num_heads: u32,
    /// ViT MLP width.
    pub ffn_size: u32,
    /// Side of a square patch, in pixels.
    pub patch_size: u32,
    /// Frames per temporal patch (a still image is repeated).
    pub temporal_patch: u32,
    /// Side of the patch block merged into one LLM token.
    pub spatial_merge: u32,
    /// Width of the merger output (the text hidden size).
    pub out_hidden: u32,
    /// Learned position embeddings: a square grid of this many.
    pub num_position_embeddings: u32,
    /// ViT blocks whose output feeds a DeepStack merger, in merger order.
    pub deepstack_layers: [u32; MAX_DEEPSTACK],
    /// How many of `deepstack_layers` are used.
    pub deepstack_count: u32,
    /// `<|image_pad|>`, expanded to the image's token count.
    pub image_token_id: u32,
    /// `<|vision_start|>`.
    pub vision_start_token_id: u32,
    /// `<|vision_end|>`.
    pub vision_end_token_id: u32,
    /// Preprocessing: fewest pixels after the smart resize.
    pub min_pixels: u32,
    /// Preprocessing: most pixels after the smart resize.
    pub max_pixels: u32,
    /// Preprocessing: per-channel mean (after rescaling).
    pub image_mean: [f32; 3],
    /// Preprocessing: per-channel standard deviation.
    pub image_std: [f32; 3],
    /// Preprocessing: the factor taking u8 values to [0, 1].
    pub rescale_factor: f32,
}

impl VisionConfig {
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        (self.hidden_size / self.num_heads.max(1)) as usize
    }

    /// Values in one flattened patch: 3 channels x temporal x patch x patch.
    pub fn patch_values(&self) -> usize {
        3 * self.temporal_patch as usize * (self.patch_size as usize).pow(2)
    }

    /// Patches merged into one LLM token (`spatial_merge^2`).
    pub fn merge_patches(&self) -> usize {
        (self.spatial_merge as usize).pow(2)
    }

    /// The DeepStack ViT block indices.
    pub fn deepstack(&self) -> &[u32] {
        &self.deepstack_layers[..(self.deepstack_count as usize).min(MAX_DEEPSTACK)]
    }

    fn validate(&self, text_hidden: u32) -> Result<(), Error> {
        let bad = |what: &'static str| Err(Error::BadConfig { what });
        let in_range = |v: u32, max: u32| v > 0 && v <= max;
        if !in_range(self.depth, MAX_LAYERS as u32) || !in_range(self.hidden_size, 16_384) {
            return bad("vision depth must be 1..=1024 and hidden 1..=16384");
        }
        if !in_range(self.num_heads, 256)
            || !self.hidden_size.is_multiple_of(self.num_heads)
            || !(self.hidden_size / self.num_heads).is_multiple_of(4)
        {
            return bad("vision heads must divide hidden into head widths that are multiples of 4");
        }
        if !in_range(self.ffn_size, 1 << 18) || !in_range(self.patch_size, 64) {
            return bad("vision ffn must be 1..=262144 and patch_size 1..=64");
        }
        if !in_range(self.temporal_patch, 4) || !in_range(self.spatial_merge, 4) {
            return bad("temporal_patch and spatial_merge must be 1..=4");
        }
        if self.out_hidden != text_hidden {
            return bad("vision out_hidden must equal the text hidden_size");
        }
        let side = isqrt(self.num_position_embeddings);
        if side < 2 || side * side != self.num_position_embeddings || side > 1024 {
            return bad("num_position_embeddings must be a square grid of 2x2..=1024x1024");
        }
        if self.deepstack_count as usize > MAX_DEEPSTACK
            || self.deepstack().iter().any(|&l| l >= self.depth)
        {
            return bad("deepstack layers must be ViT blocks (at most 8)");
        }
        if self.min_pixels == 0 || self.min_pixels > self.max_pixels {
            return bad("image min_pixels must be 1..=max_pixels");
        }
        let positive = |v: f32| v.is_finite() && v > 0.0;
        let sane = self.image_mean.iter().all(|v| v.is_finite())
            && self.image_std.iter().all(|&v| positive(v))
            && positive(self.rescale_factor);
        if !sane {
            return bad("image mean, std (> 0) and rescale_factor (> 0) must be finite");
        }
        Ok(())
    }
}

/// The integer square root (floor) of `v`.
pub fn isqrt(v: u32) -> u32 {
    let mut r = libm::sqrt(v as f64) as u32;
    while (r as u64) * (r as u64) > v as u64 {
        r -= 1;
    }
    while ((r + 1) as u64) * ((r + 1) as u64) <= v as u64 {
        r += 1;
    }
    r
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
    /// The vision tower, for VL files converted with it.
    pub vision: Option<VisionConfig>,
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
    pub const VISION_DEPTH: u32 = 60;
    pub const VISION_HIDDEN: u32 = 61;
    pub const VISION_HEADS: u32 = 62;
    pub const VISION_FFN: u32 = 63;
    pub const PATCH_SIZE: u32 = 64;
    pub const TEMPORAL_PATCH: u32 = 65;
    pub const SPATIAL_MERGE: u32 = 66;
    pub const VISION_OUT_HIDDEN: u32 = 67;
    pub const NUM_POSITION_EMBEDDINGS: u32 = 68;
    pub const DEEPSTACK_LAYERS: u32 = 69;
    pub const IMAGE_TOKEN_ID: u32 = 70;
    pub const VISION_START_TOKEN_ID: u32 = 71;
    pub const VISION_END_TOKEN_ID: u32 = 72;
    pub const MIN_PIXELS: u32 = 73;
    pub const MAX_PIXELS: u32 = 74;
    pub const IMAGE_MEAN: u32 = 75;
    pub const IMAGE_STD: u32 = 76;
    pub const RESCALE_FACTOR: u32 = 77;
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
        if self.arch == Arch::Qwen3Vl {
            let sec = self.mrope_section;
            let total = sec.iter().try_fold(0u32, |a, &b| a.checked_add(b));
            if total != Some(self.head_dim / 2) {
                return bad("mrope_section must sum to head_dim / 2");
            }
        }
        if let Some(v) = &self.vision {
            if self.arch != Arch::Qwen3Vl {
                return bad("a vision tower needs arch qwen3vl");
            }
            v.validate(self.hidden_size)?;
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
