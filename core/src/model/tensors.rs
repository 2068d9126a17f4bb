//! The tensors a configuration needs: one list shared by the converter (what
//! to write) and the VQF parser (what must be there).

use super::config::Config;
use crate::error::Error;
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
    let hd = cfg.head_dim as usize;
    let qkv = cfg.qkv_rows();
    for l in 0..cfg.num_layers as usize {
        let layer = l as u16;
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
    let v = cfg.vocab_size as usize;
    f(spec(NO_LAYER, Role::TokenEmbd, Kind::Embedding, &[v, h])?)?;
    f(spec(NO_LAYER, Role::Output, Kind::Linear, &[v, h])?)?;
    f(spec(NO_LAYER, Role::OutputNorm, Kind::F32, &[h])?)?;
    Ok(())
}
