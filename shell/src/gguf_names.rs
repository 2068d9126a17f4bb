//! The GGUF tensor name of each part of the model (llama.cpp's names): the
//! GGUF source of `convert` reads tensors by them, and `imatrix` writes and
//! reads its importance file's entries by them.

use kestrel_core::config::Config;
use kestrel_core::convert::Part;

/// The GGUF name of `part` of `layer` in a file of `cfg`'s model: as
/// [`gguf_name`], but Qwen3.5's FFN norm is `post_attention_norm`.
pub fn gguf_name_in(cfg: &Config, part: Part, layer: u16) -> String {
    if part == Part::FfnNorm && cfg.arch.is_qwen35() {
        return format!("blk.{layer}.post_attention_norm.weight");
    }
    gguf_name(part, layer, cfg.tied_embeddings)
}

/// The GGUF name of `part` of `layer` (llama.cpp's; with `tied`, the
/// lm_head is the embedding). The names of matrices do not depend on the
/// architecture; [`gguf_name_in`] gives a norm's.
pub fn gguf_name(part: Part, layer: u16, tied: bool) -> String {
    let l = format!("blk.{layer}.");
    match part {
        Part::Embed => "token_embd.weight".into(),
        Part::LmHead if tied => "token_embd.weight".into(),
        Part::LmHead => "output.weight".into(),
        Part::FinalNorm => "output_norm.weight".into(),
        Part::AttnNorm => format!("{l}attn_norm.weight"),
        Part::Q => format!("{l}attn_q.weight"),
        Part::K => format!("{l}attn_k.weight"),
        Part::V => format!("{l}attn_v.weight"),
        Part::QBias => format!("{l}attn_q.bias"),
        Part::KBias => format!("{l}attn_k.bias"),
        Part::VBias => format!("{l}attn_v.bias"),
        Part::QNorm => format!("{l}attn_q_norm.weight"),
        Part::KNorm => format!("{l}attn_k_norm.weight"),
        Part::O => format!("{l}attn_output.weight"),
        Part::FfnNorm => format!("{l}ffn_norm.weight"),
        Part::Gate => format!("{l}ffn_gate.weight"),
        Part::Up => format!("{l}ffn_up.weight"),
        Part::Down => format!("{l}ffn_down.weight"),
        Part::Router => format!("{l}ffn_gate_inp.weight"),
        Part::ExpGate => format!("{l}ffn_gate_exps.weight"),
        Part::ExpUp => format!("{l}ffn_up_exps.weight"),
        Part::ExpDown => format!("{l}ffn_down_exps.weight"),
        // Qwen3.5's (`qwen35`, `qwen35moe`): the shared expert, and the
        // Gated DeltaNet layers' tensors (`ssm_a` is `-exp(A_log)`).
        Part::ShGate => format!("{l}ffn_gate_shexp.weight"),
        Part::ShUp => format!("{l}ffn_up_shexp.weight"),
        Part::ShDown => format!("{l}ffn_down_shexp.weight"),
        Part::ShGateInp => format!("{l}ffn_gate_inp_shexp.weight"),
        Part::LinQkv => format!("{l}attn_qkv.weight"),
        Part::LinZ => format!("{l}attn_gate.weight"),
        Part::LinB => format!("{l}ssm_beta.weight"),
        Part::LinA => format!("{l}ssm_alpha.weight"),
        Part::LinConv => format!("{l}ssm_conv1d.weight"),
        Part::LinDecayRate => format!("{l}ssm_a"),
        Part::LinDtBias => format!("{l}ssm_dt.bias"),
        Part::LinNorm => format!("{l}ssm_norm.weight"),
        Part::LinOut => format!("{l}ssm_out.weight"),
        // GGUF text files carry no vision tower (llama.cpp keeps it in
        // a separate mmproj file).
        Part::Vision(role) => {
            format!("(vision tensor {} is not in text GGUF files)", role.stem())
        }
    }
}
