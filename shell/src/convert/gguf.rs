//! GGUF files (v2/v3, llama.cpp names for qwen2, qwen3, qwen3moe): config
//! from metadata, tensors dequantized row by row, tokenizer from
//! `tokenizer.ggml.*`, chat template from `tokenizer.chat_template`.

use crate::error::Result;
use crate::gguf_names::gguf_name;
use kestrel_core::config::{Arch, Config, MoeConfig, MAX_EOS, MAX_LAYERS};
use kestrel_core::convert::{Part, TensorSource};
use kestrel_core::gguf::{dequantize_row, GgmlType, Gguf, TensorInfo};
use kestrel_core::vqf::tokenizer_build::{added_flags, SourceToken, Tables};
use kestrel_core::Error;
use std::collections::HashMap;

/// GGUF token types (llama.cpp `llama_token_type`).
const TOKEN_UNUSED: i64 = 5;
const TOKEN_CONTROL: i64 = 3;
const TOKEN_USER_DEFINED: i64 = 4;

pub struct GgufSource<'a> {
    pub cfg: Config,
    tensors: HashMap<String, TensorInfo<'a>>,
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
        other => {
            return Err(
                format!("unsupported GGUF architecture {other:?} (qwen2, qwen3, qwen3moe)").into(),
            )
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
    let moe = if arch == Arch::Qwen3Moe {
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
        })
    } else {
        None
    };
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
        num_layers: need("block_count")?,
        num_heads: heads,
        num_kv_heads: optional("attention.head_count_kv")?.unwrap_or(heads),
        head_dim,
        ffn_size: optional("feed_forward_length")?.unwrap_or(0).max(
            // MoE files may give 0 for the dense width; any positive value validates.
            if arch == Arch::Qwen3Moe { 8 } else { 0 },
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
        qkv_bias: g.tensor("blk.0.attn_q.bias").is_some(),
        qk_norm: g.tensor("blk.0.attn_q_norm.weight").is_some(),
        moe,
        mrope_section: [0; 3],
        vision: None,
        bos_token_id: g.get_u32("tokenizer.ggml.bos_token_id"),
        eos_token_ids: eos,
        eos_count,
    };
    cfg.validate()?;
    Ok(cfg)
}

impl<'a> GgufSource<'a> {
    pub fn new(cfg: Config, g: &Gguf<'a>) -> GgufSource<'a> {
        let tensors = g.tensors().map(|t| (t.name().to_string(), t)).collect();
        GgufSource { cfg, tensors }
    }

    fn name(&self, part: Part, layer: u16) -> String {
        gguf_name(part, layer, self.cfg.tied_embeddings)
    }
}

impl GgufSource<'_> {
    fn tensor(&self, part: Part, layer: u16) -> std::result::Result<&TensorInfo<'_>, Error> {
        self.tensors
            .get(&self.name(part, layer))
            .ok_or(Error::MissingTensor {
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
        let t = self
            .tensors
            .get(&self.name(part, layer))
            .ok_or(Error::MissingTensor {
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
        self.tensors.contains_key(&self.name(part, layer))
    }

    fn shape(&self, part: Part, layer: u16, _expert: usize) -> Option<Vec<u64>> {
        let t = self.tensors.get(&self.name(part, layer))?;
        // GGUF lists dimensions innermost first.
        Some(t.dims().iter().rev().copied().collect())
    }

    fn names(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }

    fn index_of(&self, name: &str) -> Option<(u64, Option<u64>)> {
        let (layer, _) = name.strip_prefix("blk.")?.split_once('.')?;
        Some((layer.parse().ok()?, None))
    }
}

/// The tokenizer tables from `tokenizer.ggml.*` (gpt2 BPE only).
pub fn tokenizer(g: &Gguf) -> Result<Option<Tables>> {
    let Some(model) = g.get_str("tokenizer.ggml.model") else {
        return Ok(None);
    };
    if model != "gpt2" {
        return Err(
            format!("GGUF tokenizer model {model:?} is not supported (gpt2 BPE only)").into(),
        );
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
