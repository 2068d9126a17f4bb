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
    /// Qwen3.5 dense: Gated DeltaNet layers beside gated full attention
    /// ([`LinearConfig`]), zero-centred norms folded at conversion.
    Qwen35 = 5,
    /// Qwen3.5-MoE: as [`Arch::Qwen35`], every layer's FFN an MoE with a
    /// shared expert.
    Qwen35Moe = 6,
}

impl Arch {
    /// The arch from its stored id.
    pub fn from_id(id: u64) -> Option<Arch> {
        match id {
            1 => Some(Arch::Qwen2),
            2 => Some(Arch::Qwen3),
            3 => Some(Arch::Qwen3Moe),
            4 => Some(Arch::Qwen3Vl),
            5 => Some(Arch::Qwen35),
            6 => Some(Arch::Qwen35Moe),
            _ => None,
        }
    }

    /// A short name (`qwen2`, `qwen3`, `qwen3moe`, `qwen3vl`, `qwen35`,
    /// `qwen35moe`: llama.cpp's).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen3Vl => "qwen3vl",
            Arch::Qwen35 => "qwen35",
            Arch::Qwen35Moe => "qwen35moe",
        }
    }

    /// Whether the family is Qwen3.5's (hybrid layers, gated attention).
    pub fn is_qwen35(self) -> bool {
        matches!(self, Arch::Qwen35 | Arch::Qwen35Moe)
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
    /// The shared expert's FFN width (Qwen3.5-MoE: every token runs it,
    /// scaled by a sigmoid gate); 0 for none.
    pub shared_ffn_size: u32,
}

/// Qwen3.5's Gated DeltaNet layers: every layer but each `interval`-th
/// (`(l + 1) % interval == 0` is full attention) mixes tokens with the
/// gated delta rule over a fixed state (`model::deltanet`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearConfig {
    /// `full_attention_interval`.
    pub interval: u32,
    /// `linear_num_key_heads`.
    pub key_heads: u32,
    /// `linear_num_value_heads` (a multiple of `key_heads`).
    pub value_heads: u32,
    /// `linear_key_head_dim`.
    pub key_dim: u32,
    /// `linear_value_head_dim`.
    pub value_dim: u32,
    /// `linear_conv_kernel_dim`.
    pub conv_kernel: u32,
    /// The value heads are in llama.cpp's GGUF order (tiled: value head `h`
    /// reads key head `h % key_heads`) rather than transformers' (grouped:
    /// key head `h / (value_heads / key_heads)`).
    pub tiled: bool,
}

impl LinearConfig {
    /// The mixer's shape, for `model::deltanet`.
    pub fn shape(&self) -> DeltaShape {
        DeltaShape {
            key_heads: self.key_heads as usize,
            value_heads: self.value_heads as usize,
            key_dim: self.key_dim as usize,
            value_dim: self.value_dim as usize,
            conv_kernel: self.conv_kernel as usize,
            tiled: self.tiled,
        }
    }
}

/// The shape of one Gated DeltaNet mixer (Qwen3.5's `linear_*` config
/// keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaShape {
    /// `linear_num_key_heads`: heads of q and k.
    pub key_heads: usize,
    /// `linear_num_value_heads`: heads of v, of the state and the output
    /// (a multiple of `key_heads`).
    pub value_heads: usize,
    /// `linear_key_head_dim`: dk.
    pub key_dim: usize,
    /// `linear_value_head_dim`: dv.
    pub value_dim: usize,
    /// `linear_conv_kernel_dim`: the convolution's taps.
    pub conv_kernel: usize,
    /// Value heads in llama.cpp's tiled order ([`LinearConfig::tiled`]).
    pub tiled: bool,
}

impl DeltaShape {
    /// The key head (of q and k) value head `h` reads.
    pub fn key_head_of(&self, h: usize) -> usize {
        let key_heads = self.key_heads.max(1);
        if self.tiled {
            h % key_heads
        } else {
            h / (self.value_heads / key_heads).max(1)
        }
    }

    /// Channels of the convolution: q, k and v side by side.
    pub fn conv_channels(&self) -> usize {
        2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
    }

    /// Floats of the convolution window: the previous `conv_kernel - 1`
    /// tokens' inputs, `[conv_kernel - 1, conv_channels]`, oldest first.
    pub fn window_len(&self) -> usize {
        self.conv_kernel.saturating_sub(1) * self.conv_channels()
    }

    /// Floats of the recurrent state, `[value_heads, key_dim, value_dim]`.
    pub fn state_len(&self) -> usize {
        self.value_heads * self.key_dim * self.value_dim
    }

    /// Floats of the output (and of the gate `z`): `value_heads x
    /// value_dim`.
    pub fn value_len(&self) -> usize {
        self.value_heads * self.value_dim
    }

    /// Floats of one verify row's record (`State::verify_rows`): the
    /// row's convolution input, its q, k (normalised) and v after the
    /// convolution (conv_channels each), its gates (beta, then g: value
    /// heads each). Replaying the kept rows from the state before the step
    /// gives the state after them, bit for bit.
    pub fn record_len(&self) -> usize {
        2 * self.conv_channels() + 2 * self.value_heads
    }
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
    /// Leading dimensions of each head the rotary step turns (even; the
    /// whole `head_dim` but for Qwen3.5's partial rotary).
    pub rotary_dim: u32,
    /// Qwen3.5's Gated DeltaNet layers.
    pub linear: Option<LinearConfig>,
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
    pub const ROTARY_DIM: u32 = 15;
    pub const NUM_EXPERTS: u32 = 20;
    pub const EXPERTS_PER_TOKEN: u32 = 21;
    pub const MOE_FFN_SIZE: u32 = 22;
    pub const NORM_TOPK_PROB: u32 = 23;
    pub const DECODER_SPARSE_STEP: u32 = 24;
    pub const MLP_ONLY_LAYERS: u32 = 25;
    pub const SHARED_FFN_SIZE: u32 = 26;
    pub const MROPE_SECTION: u32 = 30;
    pub const LINEAR_INTERVAL: u32 = 40;
    pub const LINEAR_KEY_HEADS: u32 = 41;
    pub const LINEAR_VALUE_HEADS: u32 = 42;
    pub const LINEAR_KEY_DIM: u32 = 43;
    pub const LINEAR_VALUE_DIM: u32 = 44;
    pub const LINEAR_CONV_KERNEL: u32 = 45;
    pub const LINEAR_TILED: u32 = 46;
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

    /// Whether attention has an output gate (Qwen3.5: `q_proj` gives a
    /// gate per query value, stored after V in the fused QKV).
    pub fn attn_gate(&self) -> bool {
        self.arch.is_qwen35()
    }

    /// Rows of the fused QKV projection: Q, K, V, then (gated attention)
    /// the gate's `q_dim` rows.
    #[inline(never)]
    pub fn qkv_rows(&self) -> usize {
        self.q_dim() * (1 + self.attn_gate() as usize) + 2 * self.kv_dim()
    }

    /// Whether layer `l` is a Gated DeltaNet layer (Qwen3.5).
    pub fn is_linear_layer(&self, l: usize) -> bool {
        self.linear
            .is_some_and(|c| !(l + 1).is_multiple_of(c.interval.max(1) as usize))
    }

    /// Layers with a KV cache (every layer but Gated DeltaNet ones).
    #[inline(never)]
    pub fn kv_layers(&self) -> usize {
        let n = self.num_layers as usize;
        match self.linear {
            Some(c) => n / c.interval.max(1) as usize,
            None => n,
        }
    }

    /// Attention layer `l`'s index among [`Config::kv_layers`] (its KV
    /// region); for a Gated DeltaNet layer `l`, its index among the
    /// others ([`Config::linear_layers`]).
    #[inline(never)]
    pub fn layer_slot(&self, l: usize) -> usize {
        match self.linear {
            Some(c) => {
                let before = l / c.interval.max(1) as usize;
                if self.is_linear_layer(l) {
                    l - before
                } else {
                    before
                }
            }
            None => l,
        }
    }

    /// Gated DeltaNet layers.
    pub fn linear_layers(&self) -> usize {
        self.num_layers as usize - self.kv_layers()
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
        let moe_arch = matches!(self.arch, Arch::Qwen3Moe | Arch::Qwen35Moe);
        if moe_arch != self.moe.is_some() {
            return bad("MoE settings are qwen3moe's and qwen35moe's");
        }
        if !self.rotary_dim.is_multiple_of(2) || !in_range(self.rotary_dim, self.head_dim) {
            return bad("rotary_dim must be even and 2..=head_dim");
        }
        if self.arch.is_qwen35() != self.linear.is_some() {
            return bad("linear attention is qwen35's and qwen35moe's");
        }
        if let Some(c) = &self.linear {
            let dims = [c.key_heads, c.value_heads, c.key_dim, c.value_dim];
            if !in_range(c.interval, MAX_LAYERS as u32)
                || !dims.iter().all(|&d| in_range(d, 1024))
                || !in_range(c.conv_kernel, 16)
                || !c.value_heads.is_multiple_of(c.key_heads)
            {
                return bad(
                    "linear attention: interval, heads, dims 1..=1024 (value heads a multiple \
                     of key heads), conv kernel 1..=16",
                );
            }
        }
        // Interleaved M-RoPE: Qwen3-VL's, and Qwen3.5's when it keeps its
        // vision tower (over the rotary quarter of head_dim).
        if self.arch == Arch::Qwen3Vl || self.mrope_section != [0; 3] {
            let sec = self.mrope_section;
            let total = sec.iter().try_fold(0u32, |a, &b| a.checked_add(b));
            if total != Some(self.rotary_dim / 2) {
                return bad("mrope_section must sum to the rotary width / 2");
            }
        }
        if let Some(v) = &self.vision {
            let towered = self.arch == Arch::Qwen3Vl || self.arch.is_qwen35();
            if !towered || self.mrope_section == [0; 3] {
                return bad(
                    "a vision tower needs arch qwen3vl, qwen35 or qwen35moe, and mrope_section",
                );
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
            if !m.moe_ffn_size.is_multiple_of(8) || !m.shared_ffn_size.is_multiple_of(8) {
                return bad("moe_ffn_size and the shared expert's must be multiples of 8 (fused gate/up runs)");
            }
            if m.shared_ffn_size > 1 << 20 || (m.shared_ffn_size > 0) != self.arch.is_qwen35() {
                return bad("a shared expert (up to 1048576) is qwen35moe's");
            }
        }
        Ok(())
    }
}
