//! Hugging Face model directories: config.json (hub and transformers-5
//! formats), one or many *.safetensors shards, tokenizer.json and the chat
//! template.

use crate::error::{Context, Result};
use kestrel_core::config::{
    Arch, Config, LinearConfig, MoeConfig, VisionConfig, MAX_DEEPSTACK, MAX_EOS, MAX_LAYERS,
};
use kestrel_core::convert::{Part, TensorSource};
use kestrel_core::json::{self, Value};
use kestrel_core::safetensors::{SafeTensors, TensorView};
use kestrel_core::tensors::Role;
use kestrel_core::vqf::tokenizer_build::{added_flags, SourceToken, Tables};
use kestrel_core::Error;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn text(v: &Value) -> Option<String> {
    v.as_str().map(|s| s.chars().collect())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| path.display())
}

/// Parses `DIR/config.json` (and `DIR/generation_config.json` for the EOS
/// ids, when present) into a [`Config`]; for Qwen3-VL or a Qwen3.5 wrapper
/// with `vision`, the vision tower and `DIR/preprocessor_config.json` too
/// (else the text model only).
pub fn config(dir: &Path, vision: bool) -> Result<Config> {
    let path = dir.join("config.json");
    let bytes = read(&path)?;
    let gen = std::fs::read(dir.join("generation_config.json")).ok();
    let pre = std::fs::read(dir.join("preprocessor_config.json")).ok();
    let vision = vision.then_some(pre.as_deref());
    parse_config(&bytes, gen.as_deref(), vision).with_context(|| path.display())
}

/// [`config_from_json`] keeping a Qwen3-VL or Qwen3.5 model's vision tower, with the
/// bytes of its preprocessor_config.json (`None`: missing, an error for a
/// VL model).
pub fn config_from_json_vl(
    bytes: &[u8],
    generation: Option<&[u8]>,
    preprocessor: Option<&[u8]>,
) -> Result<Config> {
    parse_config(bytes, generation, Some(preprocessor))
}

/// Parses the bytes of a config.json (hub or transformers-5 format) into a
/// validated [`Config`]; `generation` is generation_config.json's bytes, if
/// any (its `eos_token_id` wins). Errors name what is wrong, not the file.
pub fn config_from_json(bytes: &[u8], generation: Option<&[u8]>) -> Result<Config> {
    parse_config(bytes, generation, None)
}

/// The config reader; `vision`: `None` for the text model only, else the
/// preprocessor_config.json bytes (if the file exists) for a VL model's tower.
fn parse_config(
    bytes: &[u8],
    generation: Option<&[u8]>,
    vision: Option<Option<&[u8]>>,
) -> Result<Config> {
    let fail = |what: &str| crate::error::Error::msg(what);
    let root = json::parse(bytes)?;
    let model_type = root
        .get("model_type")
        .and_then(|v| text(&v))
        .unwrap_or_default();
    // Qwen3.5's wrappers (`qwen3_5`, `qwen3_5_moe`) keep the text model's
    // settings under text_config, as VL does; `*_text` is the text model
    // alone.
    let (arch, nested) = match model_type.as_str() {
        "qwen2" => (Arch::Qwen2, false),
        "qwen3" => (Arch::Qwen3, false),
        "qwen3_moe" => (Arch::Qwen3Moe, false),
        "qwen3_vl" => (Arch::Qwen3Vl, true),
        "qwen3_5" => (Arch::Qwen35, true),
        "qwen3_5_moe" => (Arch::Qwen35Moe, true),
        "qwen3_5_text" => (Arch::Qwen35, false),
        "qwen3_5_moe_text" => (Arch::Qwen35Moe, false),
        other => {
            return Err(fail(&format!(
                "unsupported model_type {} (qwen2, qwen3, qwen3_moe, qwen3_vl, qwen3_5, \
                 qwen3_5_moe)",
                crate::error::quoted(other)
            )))
        }
    };
    let c = if nested {
        root.get("text_config")
            .ok_or_else(|| fail("no text_config"))?
    } else {
        root
    };
    let u = |key: &str| -> Result<u32> {
        c.get(key)
            .and_then(|v| v.as_u64())
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| fail(&format!("{key} missing or not a u32")))
    };
    let u_or = |key: &str, default: u32| -> Result<u32> {
        match c.get(key) {
            None => Ok(default),
            Some(v) if v.is_null() => Ok(default),
            Some(_) => u(key),
        }
    };
    let b_or = |key: &str, default: bool| c.get(key).and_then(|v| v.as_bool()).unwrap_or(default);
    let heads = u("num_attention_heads")?;
    let hidden = u("hidden_size")?;
    let head_dim = match c.get("head_dim") {
        Some(v) if !v.is_null() => u("head_dim")?,
        _ => hidden / heads.max(1),
    };
    // rope_theta: hub format at the top level; transformers 5 in rope_parameters.
    let rope = c.get("rope_parameters");
    let theta = c
        .get("rope_theta")
        .and_then(|v| v.as_f64())
        .or_else(|| {
            rope.and_then(|r| r.get("rope_theta"))
                .and_then(|v| v.as_f64())
        })
        .ok_or_else(|| fail("rope_theta missing (top level or rope_parameters)"))?;
    // Interleaved M-RoPE sections: Qwen3-VL's, and a Qwen3.5 wrapper's
    // when its vision tower is kept (text alone has one position per row).
    let multimodal = arch == Arch::Qwen3Vl || (arch.is_qwen35() && nested && vision.is_some());
    let mut mrope = [0u32; 3];
    if multimodal {
        let scaling = c.get("rope_scaling").filter(|v| !v.is_null()).or(rope);
        let sec = scaling
            .and_then(|s| s.get("mrope_section"))
            .ok_or_else(|| fail("mrope_section missing"))?;
        let vals: Vec<u32> = sec
            .iter_array()
            .into_iter()
            .flatten()
            .map(|v| v.as_u64().and_then(|v| u32::try_from(v).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| fail("mrope_section entries must be u32"))?;
        if vals.len() != 3 {
            return Err(fail("mrope_section must have 3 entries"));
        }
        mrope.copy_from_slice(&vals);
    }
    let moe_arch = matches!(arch, Arch::Qwen3Moe | Arch::Qwen35Moe);
    let moe = if moe_arch {
        let experts = match c.get("num_experts") {
            Some(v) if !v.is_null() => u("num_experts")?,
            _ => u("num_local_experts")?,
        };
        let mut dense = [0u64; MAX_LAYERS / 64];
        if let Some(list) = c.get("mlp_only_layers").and_then(|v| v.iter_array()) {
            for v in list {
                let l = v
                    .as_u64()
                    .filter(|&l| (l as usize) < MAX_LAYERS)
                    .ok_or_else(|| fail("bad mlp_only_layers"))? as usize;
                dense[l / 64] |= 1 << (l % 64);
            }
        }
        Some(MoeConfig {
            num_experts: experts,
            experts_per_token: u("num_experts_per_tok")?,
            moe_ffn_size: u("moe_intermediate_size")?,
            // Qwen3.5-MoE renormalises the top k always (no key).
            norm_topk_prob: b_or("norm_topk_prob", arch == Arch::Qwen35Moe),
            decoder_sparse_step: u_or("decoder_sparse_step", 1)?,
            mlp_only_layers: dense,
            shared_ffn_size: u_or("shared_expert_intermediate_size", 0)?,
        })
    } else {
        None
    };
    let (linear, rotary_dim) = if arch.is_qwen35() {
        linear_config(&c, rope, head_dim, &u)?
    } else {
        (None, head_dim)
    };
    // Qwen3.5-MoE has no dense FFN: any positive width validates.
    let ffn_size = match (arch, c.get("intermediate_size")) {
        (Arch::Qwen35Moe, None) => 8,
        _ => u("intermediate_size")?,
    };
    let (eos, eos_count) = eos_ids(generation, &c);
    let cfg = Config {
        arch,
        vocab_size: u("vocab_size")?,
        hidden_size: hidden,
        num_layers: u("num_hidden_layers")?,
        num_heads: heads,
        num_kv_heads: u_or("num_key_value_heads", heads)?,
        head_dim,
        ffn_size,
        rope_theta: theta,
        rms_norm_eps: c
            .get("rms_norm_eps")
            .and_then(|v| v.as_f64())
            .unwrap_or(1e-6),
        max_position: u("max_position_embeddings")?,
        tied_embeddings: b_or(
            "tie_word_embeddings",
            root.get("tie_word_embeddings")
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
        ),
        // Qwen2's attention always has q/k/v biases; Qwen3 has attention_bias (false).
        qkv_bias: arch == Arch::Qwen2 || b_or("attention_bias", false),
        qk_norm: arch != Arch::Qwen2,
        moe,
        mrope_section: mrope,
        rotary_dim,
        linear,
        vision: match vision {
            Some(pre) if multimodal => Some(vision_config(&root, pre, &fail)?),
            _ => None,
        },
        bos_token_id: c
            .get("bos_token_id")
            .and_then(|v| v.as_u64())
            .and_then(|v| u32::try_from(v).ok()),
        eos_token_ids: eos,
        eos_count,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Qwen3.5's Gated DeltaNet settings and rotary width from its text
/// config: `layer_types` must be the `full_attention_interval` pattern
/// (full attention at every `interval`-th layer), the attention gated
/// (`attn_output_gate`), no multi-token-prediction layers beyond what the
/// converter keeps (none yet: `mtp_num_hidden_layers` is ignored, as
/// transformers does).
fn linear_config(
    c: &Value,
    rope: Option<Value>,
    head_dim: u32,
    u: &dyn Fn(&str) -> Result<u32>,
) -> Result<(Option<LinearConfig>, u32)> {
    let fail = |what: &str| crate::error::Error::msg(what);
    let interval = u("full_attention_interval")?;
    if let Some(types) = c.get("layer_types").filter(|v| !v.is_null()) {
        let (mut n, mut ok) = (0u32, true);
        for v in types.iter_array().into_iter().flatten() {
            n += 1;
            let full = n % interval.max(1) == 0;
            let want = if full {
                "full_attention"
            } else {
                "linear_attention"
            };
            ok &= text(&v).as_deref() == Some(want);
        }
        if !ok || n != u("num_hidden_layers")? {
            return Err(fail("layer_types must follow full_attention_interval"));
        }
    }
    if c.get("attn_output_gate").and_then(|v| v.as_bool()) == Some(false) {
        return Err(fail("attn_output_gate must be true"));
    }
    let factor = c
        .get("partial_rotary_factor")
        .or_else(|| rope.and_then(|r| r.get("partial_rotary_factor")))
        .and_then(|v| v.as_f64())
        .unwrap_or(1.0);
    let rotary = head_dim as f64 * factor;
    if !(rotary >= 2.0 && rotary <= head_dim as f64 && rotary.fract() == 0.0) {
        return Err(fail(
            "partial_rotary_factor must give a whole number of dimensions",
        ));
    }
    let linear = LinearConfig {
        interval,
        key_heads: u("linear_num_key_heads")?,
        value_heads: u("linear_num_value_heads")?,
        key_dim: u("linear_key_head_dim")?,
        value_dim: u("linear_value_head_dim")?,
        conv_kernel: u("linear_conv_kernel_dim")?,
        // transformers' order: value heads grouped by key head.
        tiled: false,
    };
    Ok((Some(linear), rotary as u32))
}

/// The vision tower's settings (config.json `vision_config` and the token
/// ids) and the image preprocessing (preprocessor_config.json).
fn vision_config(
    root: &Value,
    preprocessor: Option<&[u8]>,
    fail: &dyn Fn(&str) -> crate::error::Error,
) -> Result<VisionConfig> {
    let v = root
        .get("vision_config")
        .ok_or_else(|| fail("no vision_config (convert with --text-only for the text model)"))?;
    let u = |c: &Value, key: &str| -> Result<u32> {
        c.get(key)
            .and_then(|v| v.as_u64())
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| fail(&format!("{key} missing or not a u32")))
    };
    let act = v
        .get("hidden_act")
        .and_then(|a| text(&a))
        .unwrap_or_default();
    if act != "gelu_pytorch_tanh" {
        return Err(fail(&format!(
            "vision hidden_act {} is not supported (gelu_pytorch_tanh)",
            crate::error::quoted(&act)
        )));
    }
    if v.get("in_channels").and_then(|c| c.as_u64()).unwrap_or(3) != 3 {
        return Err(fail("vision in_channels must be 3"));
    }
    let mut deepstack = [0u32; MAX_DEEPSTACK];
    let mut count = 0;
    for x in v
        .get("deepstack_visual_indexes")
        .and_then(|d| d.iter_array())
        .into_iter()
        .flatten()
    {
        let l = x
            .as_u64()
            .and_then(|l| u32::try_from(l).ok())
            .ok_or_else(|| fail("bad deepstack_visual_indexes"))?;
        *deepstack
            .get_mut(count)
            .ok_or_else(|| fail("more than 8 deepstack_visual_indexes"))? = l;
        count += 1;
    }
    let pre_bytes = preprocessor.ok_or_else(|| {
        fail("no preprocessor_config.json (the image preprocessing; convert with --text-only without it)")
    })?;
    let pfail = |what: &str| crate::error::Error::msg(what).context("preprocessor_config.json");
    let pre = json::parse(pre_bytes).map_err(|e| pfail(&e.to_string()))?;
    let pixels = |edge: &str, flat: &str| -> Result<u32> {
        pre.get("size")
            .and_then(|s| s.get(edge))
            .or_else(|| pre.get(flat))
            .and_then(|v| v.as_u64())
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| pfail(&format!("size.{edge} (or {flat}) missing or not a u32")))
    };
    let three = |key: &str| -> Result<[f32; 3]> {
        let vals: Vec<f32> = pre
            .get(key)
            .and_then(|a| a.iter_array())
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_f64())
            .map(|x| x as f32)
            .collect();
        <[f32; 3]>::try_from(vals.as_slice())
            .map_err(|_| pfail(&format!("{key} must have 3 numbers")))
    };
    let same = |key: &str, want: u32| -> Result<()> {
        match pre.get(key).and_then(|x| x.as_u64()) {
            Some(x) if x != want as u64 => {
                Err(pfail(&format!("{key} {x} differs from the model's {want}")))
            }
            _ => Ok(()),
        }
    };
    let patch_size = u(&v, "patch_size")?;
    let temporal_patch = u(&v, "temporal_patch_size")?;
    let spatial_merge = u(&v, "spatial_merge_size")?;
    same("patch_size", patch_size)?;
    same("temporal_patch_size", temporal_patch)?;
    same("merge_size", spatial_merge)?;
    Ok(VisionConfig {
        depth: u(&v, "depth")?,
        hidden_size: u(&v, "hidden_size")?,
        num_heads: u(&v, "num_heads")?,
        ffn_size: u(&v, "intermediate_size")?,
        patch_size,
        temporal_patch,
        spatial_merge,
        out_hidden: u(&v, "out_hidden_size")?,
        num_position_embeddings: u(&v, "num_position_embeddings")?,
        deepstack_layers: deepstack,
        deepstack_count: count as u32,
        image_token_id: u(root, "image_token_id")?,
        vision_start_token_id: u(root, "vision_start_token_id")?,
        vision_end_token_id: u(root, "vision_end_token_id")?,
        min_pixels: pixels("shortest_edge", "min_pixels")?,
        max_pixels: pixels("longest_edge", "max_pixels")?,
        image_mean: three("image_mean")?,
        image_std: three("image_std")?,
        rescale_factor: pre
            .get("rescale_factor")
            .and_then(|x| x.as_f64())
            .unwrap_or(1.0 / 255.0) as f32,
    })
}

/// EOS ids: generation_config.json's `eos_token_id` (int or list) when
/// present, else config.json's.
fn eos_ids(generation: Option<&[u8]>, c: &Value) -> ([u32; MAX_EOS], u32) {
    let mut out = [0u32; MAX_EOS];
    let mut n = 0;
    let gen_root = generation.and_then(|b| json::parse(b).ok());
    let v = gen_root
        .and_then(|g| g.get("eos_token_id"))
        .or_else(|| c.get("eos_token_id"));
    let mut push = |x: u64| {
        // An id past u32 is no token: ignored, not wrapped.
        let Ok(x) = u32::try_from(x) else { return };
        if n < MAX_EOS && !out[..n].contains(&x) {
            out[n] = x;
            n += 1;
        }
    };
    match v {
        Some(v) if v.as_u64().is_some() => push(v.as_u64().unwrap_or(0)),
        Some(v) => {
            for x in v.iter_array().into_iter().flatten() {
                if let Some(x) = x.as_u64() {
                    push(x);
                }
            }
        }
        None => {}
    }
    (out, n as u32)
}

/// The safetensors shards of a directory (index file order, or sorted names).
pub fn shard_paths(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| dir.display())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    kestrel_core::sort::sort_by(&mut paths, |a, b| a.cmp(b));
    if paths.is_empty() {
        return Err(format!("{}: no *.safetensors files", dir.display()).into());
    }
    Ok(paths)
}

/// Tensor views of all shards, by name.
pub struct HfSource<'a> {
    pub cfg: Config,
    tensors: HashMap<String, TensorView<'a>>,
    prefix: &'static str,
    /// Where the vision tower's tensors are (`model.visual.` or `visual.`).
    visual: &'static str,
}

impl<'a> HfSource<'a> {
    pub fn new(cfg: Config, shards: &[(PathBuf, SafeTensors<'a>)]) -> Result<HfSource<'a>> {
        let mut tensors = HashMap::new();
        for (path, st) in shards {
            for (name, view) in st.tensors() {
                let name: String = name.chars().collect();
                if tensors.insert(name.clone(), view).is_some() {
                    return Err(
                        format!("{}: tensor {name} appears in two shards", path.display()).into(),
                    );
                }
            }
        }
        let prefix = if cfg.arch == Arch::Qwen3Vl
            || (cfg.arch.is_qwen35() && tensors.contains_key("model.language_model.norm.weight"))
        {
            "model.language_model."
        } else {
            "model."
        };
        let visual = if tensors.contains_key("visual.pos_embed.weight") {
            "visual."
        } else {
            "model.visual."
        };
        Ok(HfSource {
            cfg,
            tensors,
            prefix,
            visual,
        })
    }

    fn name(&self, part: Part, layer: u16, expert: usize) -> String {
        let p = self.prefix;
        let l = format!("{p}layers.{layer}.");
        match part {
            Part::Embed => format!("{p}embed_tokens.weight"),
            Part::LmHead if self.cfg.tied_embeddings => format!("{p}embed_tokens.weight"),
            Part::LmHead => "lm_head.weight".to_string(),
            Part::FinalNorm => format!("{p}norm.weight"),
            Part::AttnNorm => format!("{l}input_layernorm.weight"),
            Part::Q => format!("{l}self_attn.q_proj.weight"),
            Part::K => format!("{l}self_attn.k_proj.weight"),
            Part::V => format!("{l}self_attn.v_proj.weight"),
            Part::QBias => format!("{l}self_attn.q_proj.bias"),
            Part::KBias => format!("{l}self_attn.k_proj.bias"),
            Part::VBias => format!("{l}self_attn.v_proj.bias"),
            Part::QNorm => format!("{l}self_attn.q_norm.weight"),
            Part::KNorm => format!("{l}self_attn.k_norm.weight"),
            Part::O => format!("{l}self_attn.o_proj.weight"),
            Part::FfnNorm => format!("{l}post_attention_layernorm.weight"),
            Part::Gate => format!("{l}mlp.gate_proj.weight"),
            Part::Up => format!("{l}mlp.up_proj.weight"),
            Part::Down => format!("{l}mlp.down_proj.weight"),
            Part::Router => format!("{l}mlp.gate.weight"),
            Part::ExpGate => format!("{l}mlp.experts.{expert}.gate_proj.weight"),
            Part::ExpUp => format!("{l}mlp.experts.{expert}.up_proj.weight"),
            Part::ExpDown => format!("{l}mlp.experts.{expert}.down_proj.weight"),
            Part::ShGate => format!("{l}mlp.shared_expert.gate_proj.weight"),
            Part::ShUp => format!("{l}mlp.shared_expert.up_proj.weight"),
            Part::ShDown => format!("{l}mlp.shared_expert.down_proj.weight"),
            Part::ShGateInp => format!("{l}mlp.shared_expert_gate.weight"),
            Part::LinQkv => format!("{l}linear_attn.in_proj_qkv.weight"),
            Part::LinZ => format!("{l}linear_attn.in_proj_z.weight"),
            Part::LinB => format!("{l}linear_attn.in_proj_b.weight"),
            Part::LinA => format!("{l}linear_attn.in_proj_a.weight"),
            Part::LinConv => format!("{l}linear_attn.conv1d.weight"),
            Part::LinDecayRate => format!("{l}linear_attn.A_log"),
            Part::LinDtBias => format!("{l}linear_attn.dt_bias"),
            Part::LinNorm => format!("{l}linear_attn.norm.weight"),
            Part::LinOut => format!("{l}linear_attn.out_proj.weight"),
            Part::Vision(role) => self.vision_name(role, layer),
        }
    }

    /// The checkpoint name of a vision tensor.
    fn vision_name(&self, role: Role, layer: u16) -> String {
        let v = self.visual;
        let (stem, what) = match role {
            Role::VNorm1 => ("norm1", "weight"),
            Role::VNorm1Bias => ("norm1", "bias"),
            Role::VQkv => ("attn.qkv", "weight"),
            Role::VQkvBias => ("attn.qkv", "bias"),
            Role::VProj => ("attn.proj", "weight"),
            Role::VProjBias => ("attn.proj", "bias"),
            Role::VNorm2 => ("norm2", "weight"),
            Role::VNorm2Bias => ("norm2", "bias"),
            Role::VFc1 => ("mlp.linear_fc1", "weight"),
            Role::VFc1Bias => ("mlp.linear_fc1", "bias"),
            Role::VFc2 => ("mlp.linear_fc2", "weight"),
            Role::VFc2Bias => ("mlp.linear_fc2", "bias"),
            Role::DsNorm | Role::MergerNorm => ("norm", "weight"),
            Role::DsNormBias | Role::MergerNormBias => ("norm", "bias"),
            Role::DsFc1 | Role::MergerFc1 => ("linear_fc1", "weight"),
            Role::DsFc1Bias | Role::MergerFc1Bias => ("linear_fc1", "bias"),
            Role::DsFc2 | Role::MergerFc2 => ("linear_fc2", "weight"),
            Role::DsFc2Bias | Role::MergerFc2Bias => ("linear_fc2", "bias"),
            Role::VPatchEmbd => return format!("{v}patch_embed.proj.weight"),
            Role::VPatchBias => return format!("{v}patch_embed.proj.bias"),
            Role::VPosEmbd => return format!("{v}pos_embed.weight"),
            other => return format!("(no checkpoint tensor for role {})", other.stem()),
        };
        match role {
            Role::DsNorm
            | Role::DsNormBias
            | Role::DsFc1
            | Role::DsFc1Bias
            | Role::DsFc2
            | Role::DsFc2Bias => format!("{v}deepstack_merger_list.{layer}.{stem}.{what}"),
            Role::MergerNorm
            | Role::MergerNormBias
            | Role::MergerFc1
            | Role::MergerFc1Bias
            | Role::MergerFc2
            | Role::MergerFc2Bias => format!("{v}merger.{stem}.{what}"),
            _ => format!("{v}blocks.{layer}.{stem}.{what}"),
        }
    }
}

impl TensorSource for HfSource<'_> {
    fn read_rows(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row0: usize,
        out: &mut [f32],
    ) -> Result<(), Error> {
        let name = self.name(part, layer, expert);
        let view = self.tensors.get(&name).ok_or(Error::MissingTensor {
            role: "safetensors tensor",
            layer,
        })?;
        // A tensor of 3 or more dimensions (the Conv3d patch embedding)
        // is read as a matrix: its first dimension by all the others.
        let inner = view.cols();
        let shape = view.shape();
        let cols = if shape.len() > 2 {
            shape[1..].iter().try_fold(1usize, |a, &d| a.checked_mul(d))
        } else {
            Some(inner)
        };
        let Some(cols) = cols.filter(|&c| c > 0 && inner > 0 && out.len().is_multiple_of(c)) else {
            return Err(Error::BadShape {
                role: "safetensors tensor row width",
                layer,
            });
        };
        let per = cols / inner;
        for (i, row) in out.chunks_exact_mut(cols).enumerate() {
            for (j, part) in row.chunks_exact_mut(inner).enumerate() {
                view.to_f32_row((row0 + i) * per + j, part)?;
            }
        }
        // Qwen3.5's RMSNorms scale by `1 + w` (zero-centred, in f32 as
        // transformers computes it); stored folded, the forward's norm is
        // every other model's. The DeltaNet output norm is not one of them.
        let zero_centred = matches!(
            part,
            Part::AttnNorm | Part::FfnNorm | Part::FinalNorm | Part::QNorm | Part::KNorm
        );
        if self.cfg.arch.is_qwen35() && zero_centred {
            out.iter_mut().for_each(|v| *v += 1.0);
        }
        // The decay rate is stored as llama.cpp's files hold it.
        if part == Part::LinDecayRate {
            out.iter_mut().for_each(|v| *v = -libm::expf(*v));
        }
        Ok(())
    }
}

impl super::NamedSource for HfSource<'_> {
    fn tensor_name(&self, part: Part, layer: u16, expert: usize) -> String {
        self.name(part, layer, expert)
    }

    fn has(&self, part: Part, layer: u16, expert: usize) -> bool {
        self.tensors.contains_key(&self.name(part, layer, expert))
    }

    fn shape(&self, part: Part, layer: u16, expert: usize) -> Option<Vec<u64>> {
        let view = self.tensors.get(&self.name(part, layer, expert))?;
        Some(view.shape().iter().map(|&d| d as u64).collect())
    }

    fn names(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }

    fn index_of(&self, name: &str) -> Option<(u64, Option<u64>)> {
        let rest = name.strip_prefix(self.prefix)?.strip_prefix("layers.")?;
        let (layer, rest) = rest.split_once('.')?;
        let expert = rest
            .strip_prefix("mlp.experts.")
            .and_then(|r| r.split_once('.'))
            .and_then(|(e, _)| e.parse().ok());
        Some((layer.parse().ok()?, expert))
    }
}

/// The tokenizer tables from tokenizer.json and the chat template from
/// tokenizer_config.json (or chat_template.jinja).
pub fn tokenizer(dir: &Path) -> Result<Option<Tables>> {
    let path = dir.join("tokenizer.json");
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read(&path)?;
    let template = chat_template(dir)?;
    tokenizer_from_json(&bytes, &template)
        .map(Some)
        .with_context(|| path.display())
}

/// Builds the tokenizer tables from the bytes of a tokenizer.json (byte-level
/// BPE) and a chat template. Errors name what is wrong, not the file.
pub fn tokenizer_from_json(bytes: &[u8], template: &str) -> Result<Tables> {
    let fail = |what: &str| crate::error::Error::msg(what);
    let root = json::parse(bytes)?;
    let model = root.get("model").ok_or_else(|| fail("no model"))?;
    if !model.get("type").is_some_and(|t| t.str_eq("BPE")) {
        return Err(fail("model.type must be BPE"));
    }
    let mut tokens: Vec<SourceToken> = Vec::new();
    let mut place = |id: usize, t: SourceToken| {
        if tokens.len() <= id {
            tokens.resize_with(id + 1, || SourceToken {
                text: String::new(),
                added: None,
                unused: true,
            });
        }
        tokens[id] = t;
    };
    let vocab = model
        .get("vocab")
        .and_then(|v| v.iter_object())
        .ok_or_else(|| fail("model.vocab must be an object"))?;
    for (k, v) in vocab {
        let id = v
            .as_u64()
            .filter(|&i| i < 4_194_304)
            .ok_or_else(|| fail("vocab id out of range"))? as usize;
        place(
            id,
            SourceToken {
                text: k.chars().collect(),
                added: None,
                unused: false,
            },
        );
    }
    if let Some(added) = root.get("added_tokens").and_then(|v| v.iter_array()) {
        for a in added {
            let id = a
                .get("id")
                .and_then(|v| v.as_u64())
                .filter(|&i| i < 4_194_304)
                .ok_or_else(|| fail("added token id"))? as usize;
            let content = a
                .get("content")
                .and_then(|v| text(&v))
                .ok_or_else(|| fail("added token content"))?;
            let flag = |k: &str| a.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
            let flags = added_flags(
                flag("special"),
                flag("lstrip"),
                flag("rstrip"),
                flag("normalized"),
                flag("single_word"),
            );
            place(
                id,
                SourceToken {
                    text: content,
                    added: Some(flags),
                    unused: false,
                },
            );
        }
    }
    let mut merges = Vec::new();
    for m in model
        .get("merges")
        .and_then(|v| v.iter_array())
        .ok_or_else(|| fail("model.merges must be an array"))?
    {
        let pair = if let Some(s) = text(&m) {
            let mut it = s.splitn(2, ' ');
            match (it.next(), it.next()) {
                (Some(a), Some(b)) => (a.to_string(), b.to_string()),
                _ => return Err(fail("merge string without a space")),
            }
        } else {
            let parts: Vec<String> = m
                .iter_array()
                .into_iter()
                .flatten()
                .filter_map(|v| text(&v))
                .collect();
            if parts.len() != 2 {
                return Err(fail("merge pair must have two strings"));
            }
            (parts[0].clone(), parts[1].clone())
        };
        merges.push(pair);
    }
    let nfc = root
        .get("normalizer")
        .is_some_and(|n| n.get("type").is_some_and(|t| t.str_eq("NFC")));
    Ok(Tables::build(&tokens, &merges, nfc, template)?)
}

fn chat_template(dir: &Path) -> Result<String> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.exists() {
        return std::fs::read_to_string(&jinja).with_context(|| jinja.display());
    }
    let path = dir.join("tokenizer_config.json");
    let Ok(bytes) = std::fs::read(&path) else {
        return Ok(String::new());
    };
    let root = json::parse(&bytes).with_context(|| path.display())?;
    Ok(root
        .get("chat_template")
        .and_then(|v| text(&v))
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::config_from_json;

    const DENSE: &str = r#""vocab_size":576,"hidden_size":96,"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":2,"head_dim":16,"intermediate_size":256,"rope_theta":1000000,"max_position_embeddings":4096"#;

    #[test]
    fn ids_past_u32_are_not_wrapped() {
        // An EOS id of 2^32 + 5 is no token: ignored, not read as 5.
        let j = format!(
            r#"{{"model_type":"qwen3",{DENSE},"bos_token_id":4294967297,"eos_token_id":[4294967301,7]}}"#
        );
        let c = config_from_json(j.as_bytes(), None).unwrap();
        assert_eq!(c.eos(), &[7]);
        assert_eq!(c.bos_token_id, None);
        let vl = format!(
            r#"{{"model_type":"qwen3_vl","text_config":{{{DENSE},"rope_scaling":{{"mrope_section":[4294967300,2,2]}}}}}}"#
        );
        let e = config_from_json(vl.as_bytes(), None).unwrap_err();
        assert!(
            e.to_string().contains("mrope_section entries must be u32"),
            "{e}"
        );
        let ok = vl.replace("4294967300", "4");
        assert_eq!(
            config_from_json(ok.as_bytes(), None).unwrap().mrope_section,
            [4, 2, 2]
        );
    }
}
