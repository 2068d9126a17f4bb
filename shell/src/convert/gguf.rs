//! GGUF files (v2/v3, llama.cpp names for qwen2, qwen3, qwen3moe, qwen3vl,
//! qwen35, qwen35moe):
//! config from metadata, tensors dequantized row by row, tokenizer from
//! `tokenizer.ggml.*`, chat template from `tokenizer.chat_template`; a
//! Qwen3-VL vision tower from llama.cpp's mmproj file beside the text file
//! (`clip`, projector `qwen3vl_merger`).

use crate::error::Result;
use crate::gguf_names::gguf_name_in;
use kestrel_core::config::{
    Arch, Config, LinearConfig, MoeConfig, VisionConfig, MAX_DEEPSTACK, MAX_EOS, MAX_LAYERS,
};
use kestrel_core::convert::{Part, TensorSource};
use kestrel_core::gguf::{dequantize_row, GgmlType, Gguf, TensorInfo};
use kestrel_core::tensors::Role;
use kestrel_core::vqf::tokenizer_build::{added_flags, SourceToken, Tables};
use kestrel_core::Error;
use std::collections::HashMap;

/// GGUF token types (llama.cpp `llama_token_type`).
const TOKEN_UNUSED: i64 = 5;
const TOKEN_CONTROL: i64 = 3;
const TOKEN_USER_DEFINED: i64 = 4;

pub struct GgufSource<'a> {
    pub cfg: Config,
    /// Qwen3.5's MTP blocks after the layers ([`mtp_layers`]).
    mtp_layers: u32,
    tensors: HashMap<String, TensorInfo<'a>>,
    /// The mmproj file's tensors (the vision tower), when one is given.
    mmproj: HashMap<String, TensorInfo<'a>>,
}

fn arch_key(g: &Gguf, arch: &str, key: &str) -> Option<u64> {
    g.get_u64(&format!("{arch}.{key}"))
}

/// The config from a GGUF file's metadata.
pub fn config(g: &Gguf) -> Result<Config> {
    let arch_name = g
        .get_str("general.architecture")
        .ok_or("general.architecture missing")?;
    let arch = match arch_name {
        "qwen2" => Arch::Qwen2,
        "qwen3" => Arch::Qwen3,
        "qwen3moe" => Arch::Qwen3Moe,
        "qwen3vl" => Arch::Qwen3Vl,
        "qwen35" => Arch::Qwen35,
        "qwen35moe" => Arch::Qwen35Moe,
        other => {
            return Err(format!(
            "unsupported GGUF architecture {} (qwen2, qwen3, qwen3moe, qwen3vl, qwen35, qwen35moe)",
            crate::error::quoted(other)
        )
            .into())
        }
    };
    // An optional u32 key: absent is None, present but out of range an error
    // (a cast would wrap it into a wrong model).
    let optional = |key: &str| -> Result<Option<u32>> {
        arch_key(g, arch_name, key)
            .map(|v| {
                u32::try_from(v).map_err(|_| {
                    format!(
                        "GGUF metadata {arch_name}.{key} = {v} is out of range (at most {})",
                        u32::MAX
                    )
                    .into()
                })
            })
            .transpose()
    };
    let need = |key: &str| -> Result<u32> {
        arch_key(g, arch_name, key)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| format!("GGUF metadata {arch_name}.{key} missing").into())
    };
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    let head_dim = optional("attention.key_length")?.unwrap_or(hidden / heads.max(1));
    let vocab = g
        .tensor("token_embd.weight")
        .ok_or("GGUF tensor token_embd.weight missing")
        .and_then(|t| {
            u32::try_from(t.ne()[1])
                .map_err(|_| "GGUF tensor token_embd.weight: more rows than a u32 holds")
        })?;
    let moe_arch = matches!(arch, Arch::Qwen3Moe | Arch::Qwen35Moe);
    let moe = if moe_arch {
        Some(MoeConfig {
            num_experts: need("expert_count")?,
            experts_per_token: need("expert_used_count")?,
            moe_ffn_size: need("expert_feed_forward_length")?,
            // llama.cpp's qwen3moe graph always renormalizes the top-k weights.
            norm_topk_prob: g
                .get_bool(&format!("{arch_name}.expert_weights_norm"))
                .unwrap_or(true),
            decoder_sparse_step: 1,
            mlp_only_layers: [0u64; MAX_LAYERS / 64],
            // Qwen3.5-MoE has a shared expert; Qwen3-MoE none.
            shared_ffn_size: if arch.is_qwen35() {
                need("expert_shared_feed_forward_length")?
            } else {
                0
            },
        })
    } else {
        None
    };
    let num_layers = need("block_count")?
        .checked_sub(mtp_layers(g, arch_name))
        .filter(|&n| n > 0)
        .ok_or("GGUF metadata: nextn_predict_layers leaves no layer of block_count")?;
    let linear = if arch.is_qwen35() {
        Some(linear_config(g, arch_name, num_layers, &need)?)
    } else {
        None
    };
    // The first attention layer's tensors tell the attention's options
    // (in Qwen3.5, layers before it are Gated DeltaNet).
    let first_attn = format!("blk.{}.", linear.map_or(0, |c| c.interval - 1));
    let has = |name: &str| g.tensor(&format!("{first_attn}{name}")).is_some();
    let mut eos = [0u32; MAX_EOS];
    let mut eos_count = 0;
    if let Some(e) = g.get_u32("tokenizer.ggml.eos_token_id") {
        eos[0] = e;
        eos_count = 1;
    }
    let cfg = Config {
        arch,
        vocab_size: vocab,
        hidden_size: hidden,
        num_layers,
        num_heads: heads,
        num_kv_heads: optional("attention.head_count_kv")?.unwrap_or(heads),
        head_dim,
        ffn_size: optional("feed_forward_length")?.unwrap_or(0).max(
            // MoE files may give 0 for the dense width; any positive value validates.
            if moe_arch { 8 } else { 0 },
        ),
        rope_theta: g
            .get_f32(&format!("{arch_name}.rope.freq_base"))
            .map(|v| v as f64)
            .unwrap_or(10_000.0),
        rms_norm_eps: g
            .get_f32(&format!("{arch_name}.attention.layer_norm_rms_epsilon"))
            .map(|v| v as f64)
            .unwrap_or(1e-6),
        max_position: need("context_length")?,
        tied_embeddings: g.tensor("output.weight").is_none(),
        qkv_bias: has("attn_q.bias"),
        qk_norm: has("attn_q_norm.weight"),
        moe,
        mrope_section: if arch == Arch::Qwen3Vl {
            mrope_sections(g, arch_name)?
        } else {
            [0; 3]
        },
        rotary_dim: if arch.is_qwen35() {
            need("rope.dimension_count")?
        } else {
            head_dim
        },
        linear,
        vision: None,
        bos_token_id: g.get_u32("tokenizer.ggml.bos_token_id"),
        eos_token_ids: eos,
        eos_count,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Qwen3.5's Gated DeltaNet settings (`ssm.*`, llama.cpp's names for
/// them), its value heads in llama.cpp's tiled order; the recurrent layers
/// the file lists, when it does, must be those of its interval.
fn linear_config(
    g: &Gguf,
    arch_name: &str,
    num_layers: u32,
    need: &dyn Fn(&str) -> Result<u32>,
) -> Result<LinearConfig> {
    let interval = need("full_attention_interval")?;
    let value_heads = need("ssm.time_step_rank")?;
    let inner = need("ssm.inner_size")?;
    if value_heads == 0 || interval == 0 || !inner.is_multiple_of(value_heads) {
        return Err(format!(
            "GGUF metadata {arch_name}.ssm.inner_size {inner} is not a multiple of \
             ssm.time_step_rank {value_heads}, or a count is 0"
        )
        .into());
    }
    let key = format!("{arch_name}.attention.recurrent_layers");
    if let Some(a) = g.get_array(&key) {
        if a.len() < num_layers as usize {
            return Err(format!("GGUF metadata {key}: fewer entries than layers").into());
        }
        for (l, x) in a.iter().enumerate().take(num_layers as usize) {
            if x.as_bool() != Some((l + 1) % interval as usize != 0) {
                return Err(format!(
                    "GGUF metadata {key}: layer {l} is not as full_attention_interval {interval} says"
                )
                .into());
            }
        }
    }
    Ok(LinearConfig {
        interval,
        key_heads: need("ssm.group_count")?,
        value_heads,
        key_dim: need("ssm.state_size")?,
        value_dim: inner / value_heads,
        conv_kernel: need("ssm.conv_kernel")?,
        tiled: true,
    })
}

/// The multi-token-prediction blocks a Qwen3.5 file holds after its layers
/// (`nextn_predict_layers`; llama.cpp's converter counts them in
/// `block_count`). They are not read: the model is the layers before them.
fn mtp_layers(g: &Gguf, arch_name: &str) -> u32 {
    if arch_name.starts_with("qwen35") {
        arch_key(g, arch_name, "nextn_predict_layers").map_or(0, |n| n.min(u32::MAX as u64) as u32)
    } else {
        0
    }
}

/// `qwen3vl.rope.dimension_sections`: the M-RoPE sections of the
/// temporal, height and width positions (a fourth, llama.cpp's, must be 0).
pub fn mrope_sections(g: &Gguf, arch_name: &str) -> Result<[u32; 3]> {
    let key = format!("{arch_name}.rope.dimension_sections");
    let a = g
        .get_array(&key)
        .ok_or_else(|| format!("GGUF metadata {key} missing"))?;
    let v: Vec<u32> = a
        .iter()
        .map(|x| x.as_u32())
        .collect::<Option<_>>()
        .ok_or_else(|| format!("GGUF metadata {key}: not unsigned integers"))?;
    match v.as_slice() {
        [t, h, w] | [t, h, w, 0] => Ok([*t, *h, *w]),
        _ => Err(format!(
            "GGUF metadata {key} = {}: three sections (and a fourth of 0) expected",
            crate::error::listed(&v)
        )
        .into()),
    }
}

/// How many image tokens an image may become, at least and at most
/// (`--image-min-tokens`, `--image-max-tokens`; an image token is a
/// merged block of spatial_merge^2 patches).
#[derive(Clone, Copy, Debug, Default)]
pub struct ImageTokens {
    pub min: Option<u32>,
    pub max: Option<u32>,
}

/// The Qwen3-VL vision tower's settings from llama.cpp's mmproj file `m`,
/// with the token ids from the text file `text`. The image limits: as
/// asked, else the mmproj's `clip.vision.image_min_pixels` /
/// `image_max_pixels`, else llama.cpp's for Qwen-VL (8 to 4096 image
/// tokens).
pub fn mmproj_vision(
    m: &Gguf,
    text: &Gguf,
    cfg: &Config,
    limits: ImageTokens,
) -> Result<VisionConfig> {
    let fail = |what: String| -> crate::error::Error { format!("mmproj: {what}").into() };
    if m.get_str("general.architecture") != Some("clip") {
        return Err(fail(
            "general.architecture is not \"clip\" (not an mmproj file)".into(),
        ));
    }
    match m.get_str("clip.projector_type") {
        Some("qwen3vl_merger") => {}
        other => {
            return Err(fail(format!(
                "clip.projector_type {} is not supported (qwen3vl_merger: Qwen3-VL)",
                other.map_or("(none)".to_string(), crate::error::quoted)
            )))
        }
    }
    if cfg.arch != Arch::Qwen3Vl && !cfg.arch.is_qwen35() {
        return Err(fail(format!(
            "a Qwen3-VL vision tower, but the text file is {} (qwen3vl, qwen35 or qwen35moe expected)",
            cfg.arch.name()
        )));
    }
    if m.get_bool("clip.use_gelu") == Some(false) {
        return Err(fail(
            "clip.use_gelu is false (Qwen3-VL's tower uses GELU)".into(),
        ));
    }
    let need = |key: &str| -> Result<u32> {
        m.get_u32(key)
            .ok_or_else(|| fail(format!("{key} missing or not a u32")))
    };
    let hidden_size = need("clip.vision.embedding_length")?;
    let patch_size = need("clip.vision.patch_size")?;
    let spatial_merge = m.get_u32("clip.vision.spatial_merge_size").unwrap_or(2);
    let out_hidden = need("clip.vision.projection_dim")?;
    // The Conv3d is split in two along time: llama.cpp's converter takes
    // temporal patches of 2 only.
    let patch = |name: &str| m.tensor(name).map(|t| t.ne().to_vec());
    let temporal_patch = match (patch("v.patch_embd.weight"), patch("v.patch_embd.weight.1")) {
        (Some(a), Some(b)) if a == b => 2,
        _ => return Err(fail("v.patch_embd.weight and v.patch_embd.weight.1 (one per frame of a temporal patch of 2) missing or of different shapes".into())),
    };
    let num_position_embeddings = m
        .tensor("v.position_embd.weight")
        .and_then(|t| u32::try_from(t.ne().get(1).copied().unwrap_or(0)).ok())
        .ok_or_else(|| fail("v.position_embd.weight missing".into()))?;
    let mut deepstack_layers = [0u32; MAX_DEEPSTACK];
    let mut deepstack_count = 0;
    if let Some(a) = m.get_array("clip.vision.is_deepstack_layers") {
        for (l, x) in a.iter().enumerate() {
            if x.as_bool()
                .ok_or_else(|| fail("clip.vision.is_deepstack_layers: not booleans".into()))?
            {
                *deepstack_layers
                    .get_mut(deepstack_count)
                    .ok_or_else(|| fail(format!("more than {MAX_DEEPSTACK} DeepStack layers")))? =
                    l as u32;
                deepstack_count += 1;
            }
        }
    }
    let deepstack_key = format!("{}.n_deepstack_layers", cfg.arch.name());
    let text_deepstack = text.get_u32(&deepstack_key).unwrap_or(0);
    if text_deepstack as usize != deepstack_count {
        return Err(fail(format!(
            "{deepstack_count} DeepStack layers, the text file's {deepstack_key} is {text_deepstack}"
        )));
    }
    let three = |key: &str| -> Result<[f32; 3]> {
        let v: Vec<f32> = m
            .get_array(key)
            .map(|a| a.iter().filter_map(|x| x.as_f32()).collect())
            .unwrap_or_default();
        <[f32; 3]>::try_from(v.as_slice()).map_err(|_| fail(format!("{key} must hold 3 numbers")))
    };
    // Image tokens: merged blocks of spatial_merge^2 patches.
    let per_token = patch_size
        .checked_mul(patch_size)
        .and_then(|p| p.checked_mul(spatial_merge))
        .and_then(|p| p.checked_mul(spatial_merge))
        .ok_or_else(|| fail("patch_size and spatial_merge_size overflow".into()))?;
    let pixels = |tokens: Option<u32>, key: &str, default: u32| -> Result<u32> {
        match tokens {
            Some(t) => t
                .checked_mul(per_token)
                .ok_or_else(|| fail(format!("{t} image tokens of {per_token} pixels overflow"))),
            None => Ok(m.get_u32(key).unwrap_or(default.saturating_mul(per_token))),
        }
    };
    let token_id = |text_of: &str| -> Result<u32> {
        text.get_array("tokenizer.ggml.tokens")
            .and_then(|a| a.iter().position(|t| t.as_str() == Some(text_of)))
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| fail(format!("the text file's vocabulary has no {text_of} token")))
    };
    Ok(VisionConfig {
        depth: need("clip.vision.block_count")?,
        hidden_size,
        num_heads: need("clip.vision.attention.head_count")?,
        ffn_size: need("clip.vision.feed_forward_length")?,
        patch_size,
        temporal_patch,
        spatial_merge,
        out_hidden,
        num_position_embeddings,
        deepstack_layers,
        deepstack_count: deepstack_count as u32,
        image_token_id: token_id("<|image_pad|>")?,
        vision_start_token_id: token_id("<|vision_start|>")?,
        vision_end_token_id: token_id("<|vision_end|>")?,
        min_pixels: pixels(limits.min, "clip.vision.image_min_pixels", 8)?,
        max_pixels: pixels(limits.max, "clip.vision.image_max_pixels", 4096)?,
        image_mean: three("clip.vision.image_mean")?,
        image_std: three("clip.vision.image_std")?,
        rescale_factor: 1.0 / 255.0,
    })
}

/// llama.cpp's mmproj name of a vision tensor (`layer`: the block, or the
/// DeepStack merger's index, which the mmproj names by its block).
fn mmproj_name(role: Role, layer: u16, vision: Option<&VisionConfig>) -> String {
    // (where: 0 the block's, 1 the DeepStack merger's, 2 the tower's; name)
    let (at, name) = match role {
        Role::VNorm1 => (0, "ln1.weight"),
        Role::VNorm1Bias => (0, "ln1.bias"),
        Role::VQkv => (0, "attn_qkv.weight"),
        Role::VQkvBias => (0, "attn_qkv.bias"),
        Role::VProj => (0, "attn_out.weight"),
        Role::VProjBias => (0, "attn_out.bias"),
        Role::VNorm2 => (0, "ln2.weight"),
        Role::VNorm2Bias => (0, "ln2.bias"),
        Role::VFc1 => (0, "ffn_up.weight"),
        Role::VFc1Bias => (0, "ffn_up.bias"),
        Role::VFc2 => (0, "ffn_down.weight"),
        Role::VFc2Bias => (0, "ffn_down.bias"),
        Role::DsNorm => (1, "norm.weight"),
        Role::DsNormBias => (1, "norm.bias"),
        Role::DsFc1 => (1, "fc1.weight"),
        Role::DsFc1Bias => (1, "fc1.bias"),
        Role::DsFc2 => (1, "fc2.weight"),
        Role::DsFc2Bias => (1, "fc2.bias"),
        Role::MergerNorm => (2, "v.post_ln.weight"),
        Role::MergerNormBias => (2, "v.post_ln.bias"),
        Role::MergerFc1 => (2, "mm.0.weight"),
        Role::MergerFc1Bias => (2, "mm.0.bias"),
        Role::MergerFc2 => (2, "mm.2.weight"),
        Role::MergerFc2Bias => (2, "mm.2.bias"),
        // The first frame's half of the Conv3d; `.weight.1` the second's.
        Role::VPatchEmbd => (2, "v.patch_embd.weight"),
        Role::VPatchBias => (2, "v.patch_embd.bias"),
        Role::VPosEmbd => (2, "v.position_embd.weight"),
        _ => (2, "(no mmproj tensor)"),
    };
    match at {
        0 => format!("v.blk.{layer}.{name}"),
        1 => {
            let block = vision
                .and_then(|v| v.deepstack_layers.get(layer as usize).copied())
                .unwrap_or(u32::MAX);
            format!("v.deepstack.{block}.{name}")
        }
        _ => name.to_string(),
    }
}

impl<'a> GgufSource<'a> {
    pub fn new(cfg: Config, g: &Gguf<'a>) -> GgufSource<'a> {
        let tensors = g.tensors().map(|t| (t.name().to_string(), t)).collect();
        GgufSource {
            mtp_layers: g
                .get_str("general.architecture")
                .map_or(0, |a| mtp_layers(g, a)),
            cfg,
            tensors,
            mmproj: HashMap::new(),
        }
    }

    /// The text file `g` with the vision tower of the mmproj file `m`.
    pub fn with_mmproj(cfg: Config, g: &Gguf<'a>, m: &Gguf<'a>) -> GgufSource<'a> {
        let mut s = GgufSource::new(cfg, g);
        s.mmproj = m.tensors().map(|t| (t.name().to_string(), t)).collect();
        s
    }

    fn name(&self, part: Part, layer: u16) -> String {
        match part {
            Part::Vision(role) => mmproj_name(role, layer, self.cfg.vision.as_ref()),
            _ => gguf_name_in(&self.cfg, part, layer),
        }
    }

    fn lookup(&self, part: Part, layer: u16) -> Option<&TensorInfo<'a>> {
        let map = match part {
            Part::Vision(_) => &self.mmproj,
            _ => &self.tensors,
        };
        map.get(&self.name(part, layer))
    }

    /// The Conv3d patch embedding, [out, 3, 2, p, p] as the Hugging Face
    /// checkpoint holds it, from the mmproj's two frames ([out, 3, p, p]
    /// each): rows `row0..` into `out` (rows of 3 * 2 * p * p).
    fn read_patch_rows(&self, row0: usize, out: &mut [f32]) -> Result<(), Error> {
        let bad = Error::BadShape {
            role: "mmproj v.patch_embd.weight",
            layer: 0,
        };
        let frames = [
            self.mmproj.get("v.patch_embd.weight"),
            self.mmproj.get("v.patch_embd.weight.1"),
        ];
        let [Some(f0), Some(f1)] = frames else {
            return Err(bad);
        };
        let ne = f0.ne();
        if ne.len() != 4 || f1.ne() != ne {
            return Err(bad);
        }
        let (p, channels) = (ne[0] as usize, ne[2] as usize);
        if p == 0 || p > 1 << 16 || ne[1] as usize != p {
            return Err(bad);
        }
        let Some(cols) = channels
            .checked_mul(2 * p)
            .and_then(|c| c.checked_mul(p))
            .filter(|&c| c > 0 && out.len().is_multiple_of(c))
        else {
            return Err(bad);
        };
        for (i, row) in out.chunks_exact_mut(cols).enumerate() {
            for (t, f) in [f0, f1].into_iter().enumerate() {
                for c in 0..channels {
                    for y in 0..p {
                        // The frame's row (o, c, y): p values along x.
                        let r = ((row0 + i) * channels + c) * p + y;
                        let bytes = f.row(r as u64).ok_or(Error::OutOfRange {
                            what: "mmproj v.patch_embd row",
                            value: r,
                            max: f.n_rows() as usize,
                        })?;
                        let at = ((c * 2 + t) * p + y) * p;
                        dequantize_row(f.ggml_type(), bytes, &mut row[at..at + p])?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl GgufSource<'_> {
    fn tensor(&self, part: Part, layer: u16) -> std::result::Result<&TensorInfo<'_>, Error> {
        self.lookup(part, layer).ok_or(Error::MissingTensor {
            role: "GGUF tensor",
            layer,
        })
    }

    /// Stacked experts (ne = [in, out, experts]): expert e's row r is row
    /// e * out + r.
    fn first_row(part: Part, t: &TensorInfo, expert: usize) -> usize {
        if matches!(part, Part::ExpGate | Part::ExpUp | Part::ExpDown) {
            expert * t.ne()[1] as usize
        } else {
            0
        }
    }
}

impl TensorSource for GgufSource<'_> {
    fn block_type(&self, part: Part, layer: u16) -> Option<GgmlType> {
        // The vision tower is read as floats, as from a checkpoint.
        if matches!(part, Part::Vision(_)) {
            return None;
        }
        self.tensor(part, layer).ok().map(|t| t.ggml_type())
    }

    fn read_block_bytes(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row: usize,
        byte0: usize,
        out: &mut [u8],
    ) -> Result<(), Error> {
        let t = self.tensor(part, layer)?;
        let r = Self::first_row(part, t, expert) + row;
        let bytes = t.row(r as u64).ok_or(Error::OutOfRange {
            what: "GGUF tensor row",
            value: r,
            max: t.n_rows() as usize,
        })?;
        let src = byte0
            .checked_add(out.len())
            .and_then(|end| bytes.get(byte0..end))
            .ok_or(Error::Truncated {
                what: "GGUF row blocks",
                need: (byte0 as u64).saturating_add(out.len() as u64),
                have: bytes.len() as u64,
            })?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn read_rows(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row0: usize,
        out: &mut [f32],
    ) -> Result<(), Error> {
        if part == Part::Vision(Role::VPatchEmbd) {
            return self.read_patch_rows(row0, out);
        }
        let t = self.lookup(part, layer).ok_or(Error::MissingTensor {
            role: "GGUF tensor",
            layer,
        })?;
        let ne = t.ne();
        let cols = ne[0] as usize;
        if cols == 0 || !out.len().is_multiple_of(cols) {
            return Err(Error::BadShape {
                role: "GGUF tensor row width",
                layer,
            });
        }
        // Stacked experts (ne = [in, out, experts]): expert e's row r is row e * out + r.
        let base = if matches!(part, Part::ExpGate | Part::ExpUp | Part::ExpDown) {
            expert * ne[1] as usize
        } else {
            0
        };
        for (i, row) in out.chunks_exact_mut(cols).enumerate() {
            let bytes = t.row((base + row0 + i) as u64).ok_or(Error::OutOfRange {
                what: "GGUF tensor row",
                value: base + row0 + i,
                max: t.n_rows() as usize,
            })?;
            dequantize_row(t.ggml_type(), bytes, row)?;
        }
        Ok(())
    }
}

impl super::NamedSource for GgufSource<'_> {
    fn tensor_name(&self, part: Part, layer: u16, _expert: usize) -> String {
        self.name(part, layer)
    }

    fn has(&self, part: Part, layer: u16, _expert: usize) -> bool {
        self.lookup(part, layer).is_some()
    }

    fn shape(&self, part: Part, layer: u16, _expert: usize) -> Option<Vec<u64>> {
        let t = self.lookup(part, layer)?;
        // GGUF lists dimensions innermost first.
        let mut dims: Vec<u64> = t.dims().iter().rev().copied().collect();
        if part == Part::Vision(Role::VPatchEmbd) {
            // Two frames of [out, 3, p, p]: the Conv3d [out, 3, 2, p, p].
            let second = self.mmproj.get("v.patch_embd.weight.1")?;
            if second.dims() != t.dims() || dims.len() != 4 {
                return None;
            }
            dims.insert(2, 2);
        }
        Some(dims)
    }

    fn names(&self) -> Vec<String> {
        self.tensors
            .keys()
            .chain(self.mmproj.keys())
            .cloned()
            .collect()
    }

    fn index_of(&self, name: &str) -> Option<(u64, Option<u64>)> {
        let (layer, _) = name.strip_prefix("blk.")?.split_once('.')?;
        let layer: u64 = layer.parse().ok()?;
        // A Qwen3.5 file's MTP blocks follow its layers: kept, not read.
        let layers = self.cfg.num_layers as u64;
        if (layers..layers + self.mtp_layers as u64).contains(&layer) {
            return None;
        }
        Some((layer, None))
    }
}

/// The tokenizer tables from `tokenizer.ggml.*` (gpt2 BPE only).
pub fn tokenizer(g: &Gguf) -> Result<Option<Tables>> {
    let Some(model) = g.get_str("tokenizer.ggml.model") else {
        return Ok(None);
    };
    if model != "gpt2" {
        return Err(format!(
            "GGUF tokenizer model {} is not supported (gpt2 BPE only)",
            crate::error::quoted(model)
        )
        .into());
    }
    let tokens = g
        .get_array("tokenizer.ggml.tokens")
        .ok_or("tokenizer.ggml.tokens missing")?;
    let types = g.get_array("tokenizer.ggml.token_type");
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let text = t
            .as_str()
            .ok_or("tokenizer.ggml.tokens holds a non-string or non-UTF-8 value")?
            .to_string();
        let ty = types
            .as_ref()
            .and_then(|a| a.get(i))
            .and_then(|v| v.as_i64())
            .unwrap_or(1);
        out.push(match ty {
            TOKEN_UNUSED => SourceToken {
                text,
                added: None,
                unused: true,
            },
            TOKEN_CONTROL => SourceToken {
                text,
                added: Some(added_flags(true, false, false, false, false)),
                unused: false,
            },
            TOKEN_USER_DEFINED => SourceToken {
                text,
                added: Some(added_flags(false, false, false, false, false)),
                unused: false,
            },
            _ => SourceToken {
                text,
                added: None,
                unused: false,
            },
        });
    }
    let mut merges = Vec::new();
    if let Some(m) = g.get_array("tokenizer.ggml.merges") {
        for v in m.iter() {
            let s = v
                .as_str()
                .ok_or("tokenizer.ggml.merges holds a non-string or non-UTF-8 value")?;
            let (a, b) = s.split_once(' ').ok_or("a GGUF merge has no space")?;
            merges.push((a.to_string(), b.to_string()));
        }
    }
    // Qwen's Hugging Face tokenizer normalizes to NFC (pre-tokenizer "qwen2").
    let nfc = g
        .get_str("tokenizer.ggml.pre")
        .is_some_and(|p| p.starts_with("qwen"));
    let template = g.get_str("tokenizer.chat_template").unwrap_or("");
    Ok(Tables::build(&out, &merges, nfc, template).map(Some)?)
}
