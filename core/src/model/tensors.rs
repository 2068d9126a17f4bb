//! The tensors a configuration needs: one list shared by the converter (what
//! to write) and the VQF parser (what must be there).

use super::config::{Config, VisionConfig};
use crate::error::Error;
use crate::quant::repack::Layout;
use crate::vqf::layout::{Role, NO_LAYER};

/// How a tensor is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The token embedding: F32 or F16 rows (flag EMB_F16).
    Embedding,
    /// A matrix the kernels multiply: one entry per declared weight copy.
    Linear,
    /// Norm weights, biases, the MoE router: always F32.
    F32,
    /// A vision-tower matrix: one copy, in [`vision_layout`].
    VisionLinear,
}

/// The one layout a vision matrix of row width `cols` has in a file with
/// `file_flags`: Q8_0x8 when the text weights are quantized (and `cols` is
/// a multiple of 32; else F32), F16 or F32 in the accuracy modes.
pub fn vision_layout(file_flags: u64, cols: usize) -> Layout {
    use crate::vqf::layout::flags;
    if file_flags & (flags::Q8_8X8 | flags::Q4_4X4) != 0 {
        if cols.is_multiple_of(crate::quant::QK) {
            Layout::Q8_0x8
        } else {
            Layout::F32
        }
    } else if file_flags & flags::LINEAR_F16 != 0 {
        Layout::F16
    } else {
        Layout::F32
    }
}

/// One tensor the model needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Decoder layer, or [`NO_LAYER`].
    pub layer: u16,
    /// What the tensor is.
    pub role: Role,
    /// How it is stored.
    pub kind: Kind,
    /// Shape, outermost first; `ndim` entries used.
    pub shape: [u32; 4],
    /// Number of dimensions.
    pub ndim: u8,
}

fn spec(layer: u16, role: Role, kind: Kind, dims: &[usize]) -> Result<Spec, Error> {
    let mut shape = [0u32; 4];
    for (s, &d) in shape.iter_mut().zip(dims) {
        *s = u32::try_from(d).map_err(|_| Error::Overflow {
            what: "tensor dimension",
        })?;
    }
    Ok(Spec {
        layer,
        role,
        kind,
        shape,
        ndim: dims.len() as u8,
    })
}

/// Calls `f` for every tensor `cfg` needs, in directory order (sorted by
/// layer, then role). Fails if `cfg` is not valid or `f` fails.
pub fn for_each(cfg: &Config, f: &mut dyn FnMut(Spec) -> Result<(), Error>) -> Result<(), Error> {
    cfg.validate()?;
    let h = cfg.hidden_size as usize;
    let (depth, deepstack) = match &cfg.vision {
        Some(v) => (v.depth as usize, v.deepstack().len()),
        None => (0, 0),
    };
    let layers = (cfg.num_layers as usize).max(depth);
    for l in 0..layers {
        let layer = l as u16;
        if l < cfg.num_layers as usize {
            text_layer(cfg, layer, f)?;
        }
        if let Some(v) = &cfg.vision {
            if l < depth {
                vision_block(v, layer, f)?;
            }
            if l < deepstack {
                merger(
                    v,
                    layer,
                    Role::DEEPSTACK_MERGER,
                    v.merge_patches() * v.hidden_size as usize,
                    f,
                )?;
            }
        }
    }
    let v = cfg.vocab_size as usize;
    f(spec(NO_LAYER, Role::TokenEmbd, Kind::Embedding, &[v, h])?)?;
    f(spec(NO_LAYER, Role::Output, Kind::Linear, &[v, h])?)?;
    f(spec(NO_LAYER, Role::OutputNorm, Kind::F32, &[h])?)?;
    if let Some(v) = &cfg.vision {
        let d = v.hidden_size as usize;
        let n = NO_LAYER;
        f(spec(
            n,
            Role::VPatchEmbd,
            Kind::VisionLinear,
            &[d, v.patch_values()],
        )?)?;
        f(spec(n, Role::VPatchBias, Kind::F32, &[d])?)?;
        f(spec(
            n,
            Role::VPosEmbd,
            Kind::F32,
            &[v.num_position_embeddings as usize, d],
        )?)?;
        merger(v, n, Role::MERGER, d, f)?;
    }
    Ok(())
}

/// ViT block `layer`: LayerNorms, fused qkv and projection with biases,
/// the GELU MLP.
fn vision_block(
    v: &VisionConfig,
    layer: u16,
    f: &mut dyn FnMut(Spec) -> Result<(), Error>,
) -> Result<(), Error> {
    let (d, ffn) = (v.hidden_size as usize, v.ffn_size as usize);
    let lin = Kind::VisionLinear;
    f(spec(layer, Role::VNorm1, Kind::F32, &[d])?)?;
    f(spec(layer, Role::VNorm1Bias, Kind::F32, &[d])?)?;
    f(spec(layer, Role::VQkv, lin, &[3 * d, d])?)?;
    f(spec(layer, Role::VQkvBias, Kind::F32, &[3 * d])?)?;
    f(spec(layer, Role::VProj, lin, &[d, d])?)?;
    f(spec(layer, Role::VProjBias, Kind::F32, &[d])?)?;
    f(spec(layer, Role::VNorm2, Kind::F32, &[d])?)?;
    f(spec(layer, Role::VNorm2Bias, Kind::F32, &[d])?)?;
    f(spec(layer, Role::VFc1, lin, &[ffn, d])?)?;
    f(spec(layer, Role::VFc1Bias, Kind::F32, &[ffn])?)?;
    f(spec(layer, Role::VFc2, lin, &[d, ffn])?)?;
    f(spec(layer, Role::VFc2Bias, Kind::F32, &[d])?)
}

/// A patch merger: LayerNorm over `norm_width` (the ViT width for the final
/// merger, 4 x it for DeepStack), fc1 (4d -> 4d), fc2 (4d -> out).
fn merger(
    v: &VisionConfig,
    layer: u16,
    roles: [Role; 6],
    norm_width: usize,
    f: &mut dyn FnMut(Spec) -> Result<(), Error>,
) -> Result<(), Error> {
    let wide = v.merge_patches() * v.hidden_size as usize;
    let out = v.out_hidden as usize;
    let lin = Kind::VisionLinear;
    f(spec(layer, roles[0], Kind::F32, &[norm_width])?)?;
    f(spec(layer, roles[1], Kind::F32, &[norm_width])?)?;
    f(spec(layer, roles[2], lin, &[wide, wide])?)?;
    f(spec(layer, roles[3], Kind::F32, &[wide])?)?;
    f(spec(layer, roles[4], lin, &[out, wide])?)?;
    f(spec(layer, roles[5], Kind::F32, &[out])?)
}

/// Text decoder layer `layer`'s tensors.
fn text_layer(
    cfg: &Config,
    layer: u16,
    f: &mut dyn FnMut(Spec) -> Result<(), Error>,
) -> Result<(), Error> {
    let l = layer as usize;
    let h = cfg.hidden_size as usize;
    let hd = cfg.head_dim as usize;
    let qkv = cfg.qkv_rows();
    {
        f(spec(layer, Role::AttnNorm, Kind::F32, &[h])?)?;
        f(spec(layer, Role::AttnQkv, Kind::Linear, &[qkv, h])?)?;
        if cfg.qkv_bias {
            f(spec(layer, Role::AttnQkvBias, Kind::F32, &[qkv])?)?;
        }
        if cfg.qk_norm {
            f(spec(layer, Role::AttnQNorm, Kind::F32, &[hd])?)?;
            f(spec(layer, Role::AttnKNorm, Kind::F32, &[hd])?)?;
        }
        f(spec(
            layer,
            Role::AttnOutput,
            Kind::Linear,
            &[h, cfg.q_dim()],
        )?)?;
        f(spec(layer, Role::FfnNorm, Kind::F32, &[h])?)?;
        match (&cfg.moe, cfg.is_moe_layer(l)) {
            (Some(m), true) => {
                let e = m.num_experts as usize;
                let ffn = m.moe_ffn_size as usize;
                f(spec(layer, Role::FfnRouter, Kind::F32, &[e, h])?)?;
                f(spec(
                    layer,
                    Role::FfnGateUpExps,
                    Kind::Linear,
                    &[e, 2 * ffn, h],
                )?)?;
                f(spec(layer, Role::FfnDownExps, Kind::Linear, &[e, h, ffn])?)?;
            }
            _ => {
                let ffn = cfg.ffn_size as usize;
                f(spec(layer, Role::FfnGateUp, Kind::Linear, &[2 * ffn, h])?)?;
                f(spec(layer, Role::FfnDown, Kind::Linear, &[h, ffn])?)?;
            }
        }
    }
    Ok(())
}
