//! The GGUF tensor name of each part of the model (llama.cpp's names): the
//! GGUF source of `convert` reads tensors by them, and `imatrix` writes and
//! reads its importance file's entries by them.

use kestrel_core::convert::Part;

/// The GGUF name of `part` of `layer` (llama.cpp's; with `tied`, the
/// lm_head is the embedding).
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
        // Qwen3.5's own tensors: its GGUF files (`qwen35`) are not read yet.
        Part::ShGate
        | Part::ShUp
        | Part::ShDown
        | Part::ShGateInp
        | Part::LinQkv
        | Part::LinZ
        | Part::LinB
        | Part::LinA
        | Part::LinConv
        | Part::LinALog
        | Part::LinDtBias
        | Part::LinNorm
        | Part::LinOut => "(not read from GGUF yet)".into(),
        // GGUF text files carry no vision tower (llama.cpp keeps it in
        // a separate mmproj file).
        Part::Vision(role) => {
            format!("(vision tensor {} is not in text GGUF files)", role.stem())
        }
    }
}
