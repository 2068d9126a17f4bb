//! The tensor-role table: what each tensor is ([`Role`]), and the tensors a
//! configuration needs: one list shared by the converter (what to write) and
//! the VQF parser (what must be there).

use crate::config::{Config, VisionConfig};
use crate::error::Error;

/// The `layer` of tensors outside the decoder layers.
pub const NO_LAYER: u16 = 0xFFFF;

/// What a tensor is (docs/vqf.md, Roles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u16)]
#[allow(missing_docs)]
pub enum Role {
    TokenEmbd = 1,
    Output = 2,
    OutputNorm = 3,
    AttnNorm = 10,
    AttnQkv = 11,
    AttnQkvBias = 12,
    AttnQNorm = 13,
    AttnKNorm = 14,
    AttnOutput = 15,
    /// The Q rows of a QKV whose parts differ in type, stored apart in a
    /// copy in the source's types (flag COPY_TAGS): `(q_dim, hidden)`.
    AttnQ = 16,
    /// The K rows, likewise: `(kv_dim, hidden)`.
    AttnK = 17,
    /// The V rows, likewise: `(kv_dim, hidden)`.
    AttnV = 18,
    /// Gated attention's gate rows, likewise (after V, as in the fused
    /// QKV; the query rows are then [`Role::AttnQ`]'s): `(q_dim, hidden)`.
    AttnGate = 19,
    FfnNorm = 20,
    FfnGateUp = 21,
    FfnDown = 22,
    FfnRouter = 30,
    FfnGateUpExps = 31,
    FfnDownExps = 32,
    /// Qwen3.5-MoE's shared expert: fused gate/up `(2 shared_ffn, hidden)`
    /// in runs of 8 rows, as [`Role::FfnGateUp`].
    FfnGateUpShexp = 33,
    /// The shared expert's down, `(hidden, shared_ffn)`.
    FfnDownShexp = 34,
    /// The shared expert's gate, `(1, hidden)` F32: its output is scaled
    /// by `sigmoid` of this row times the normed input.
    FfnGateShexp = 35,
    /// A Gated DeltaNet layer's input projections `(conv_channels +
    /// value_heads x value_dim, hidden)`: q, k, v (`in_proj_qkv`), then
    /// the output gate z (`in_proj_z`).
    LinQkvz = 40,
    /// Its `b` then `a` projections, `(2 value_heads, hidden)` F32.
    LinBa = 41,
    /// Its depthwise convolution, `(conv_channels, conv_kernel)` F32.
    LinConv = 42,
    /// Its decay rate `-exp(A_log)` (llama.cpp's `ssm_a`), `(value_heads)`
    /// F32. (Id 43, `A_log` itself, was the first Qwen3.5 files'; they
    /// are refused and converted again.)
    LinDecayRate = 47,
    /// Its `dt_bias`, `(value_heads)` F32.
    LinDtBias = 44,
    /// Its output norm's weight, `(value_dim)` F32 (not zero-centred).
    LinNorm = 45,
    /// Its output projection, `(hidden, value_heads x value_dim)`.
    LinOut = 46,
    /// The q, k, v rows of [`Role::LinQkvz`] when they and z differ in
    /// type, stored apart in a copy in the source's types (flag
    /// COPY_TAGS): `(conv_channels, hidden)`.
    LinQkv = 48,
    /// The z rows, likewise: `(value_heads x value_dim, hidden)`.
    LinZ = 49,
    // Vision tower (docs/vqf.md): ViT block `layer`, then DeepStack merger
    // `layer`, then the tensors outside the blocks.
    VNorm1 = 100,
    VNorm1Bias = 101,
    VQkv = 102,
    VQkvBias = 103,
    VProj = 104,
    VProjBias = 105,
    VNorm2 = 106,
    VNorm2Bias = 107,
    VFc1 = 108,
    VFc1Bias = 109,
    VFc2 = 110,
    VFc2Bias = 111,
    DsNorm = 120,
    DsNormBias = 121,
    DsFc1 = 122,
    DsFc1Bias = 123,
    DsFc2 = 124,
    DsFc2Bias = 125,
    VPatchEmbd = 130,
    VPatchBias = 131,
    VPosEmbd = 132,
    MergerNorm = 133,
    MergerNormBias = 134,
    MergerFc1 = 135,
    MergerFc1Bias = 136,
    MergerFc2 = 137,
    MergerFc2Bias = 138,
}

impl Role {
    /// Every role, in id order.
    pub const ALL: [Role; 58] = [
        Role::TokenEmbd,
        Role::Output,
        Role::OutputNorm,
        Role::AttnNorm,
        Role::AttnQkv,
        Role::AttnQkvBias,
        Role::AttnQNorm,
        Role::AttnKNorm,
        Role::AttnOutput,
        Role::AttnQ,
        Role::AttnK,
        Role::AttnV,
        Role::AttnGate,
        Role::FfnNorm,
        Role::FfnGateUp,
        Role::FfnDown,
        Role::FfnRouter,
        Role::FfnGateUpExps,
        Role::FfnDownExps,
        Role::FfnGateUpShexp,
        Role::FfnDownShexp,
        Role::FfnGateShexp,
        Role::LinQkvz,
        Role::LinBa,
        Role::LinConv,
        Role::LinDtBias,
        Role::LinNorm,
        Role::LinOut,
        Role::LinDecayRate,
        Role::LinQkv,
        Role::LinZ,
        Role::VNorm1,
        Role::VNorm1Bias,
        Role::VQkv,
        Role::VQkvBias,
        Role::VProj,
        Role::VProjBias,
        Role::VNorm2,
        Role::VNorm2Bias,
        Role::VFc1,
        Role::VFc1Bias,
        Role::VFc2,
        Role::VFc2Bias,
        Role::DsNorm,
        Role::DsNormBias,
        Role::DsFc1,
        Role::DsFc1Bias,
        Role::DsFc2,
        Role::DsFc2Bias,
        Role::VPatchEmbd,
        Role::VPatchBias,
        Role::VPosEmbd,
        Role::MergerNorm,
        Role::MergerNormBias,
        Role::MergerFc1,
        Role::MergerFc1Bias,
        Role::MergerFc2,
        Role::MergerFc2Bias,
    ];

    /// The role with stored id `id`.
    pub fn from_id(id: u16) -> Option<Role> {
        Role::ALL.iter().copied().find(|r| *r as u16 == id)
    }

    /// A DeepStack merger's tensors: norm weight and bias, fc1 and bias,
    /// fc2 and bias.
    pub const DEEPSTACK_MERGER: [Role; 6] = [
        Role::DsNorm,
        Role::DsNormBias,
        Role::DsFc1,
        Role::DsFc1Bias,
        Role::DsFc2,
        Role::DsFc2Bias,
    ];

    /// The final merger's tensors, in the order of [`Role::DEEPSTACK_MERGER`].
    pub const MERGER: [Role; 6] = [
        Role::MergerNorm,
        Role::MergerNormBias,
        Role::MergerFc1,
        Role::MergerFc1Bias,
        Role::MergerFc2,
        Role::MergerFc2Bias,
    ];

    /// Whether the role belongs to the vision tower (ids 100 and up).
    pub fn is_vision(self) -> bool {
        self as u16 >= 100
    }

    /// The llama.cpp-style tensor name stem (`attn_qkv`, `token_embd`, ...).
    pub fn stem(self) -> &'static str {
        match self {
            Role::TokenEmbd => "token_embd",
            Role::Output => "output",
            Role::OutputNorm => "output_norm",
            Role::AttnNorm => "attn_norm",
            Role::AttnQkv => "attn_qkv",
            Role::AttnQkvBias => "attn_qkv_bias",
            Role::AttnQNorm => "attn_q_norm",
            Role::AttnKNorm => "attn_k_norm",
            Role::AttnOutput => "attn_output",
            Role::AttnQ => "attn_q",
            Role::AttnK => "attn_k",
            Role::AttnV => "attn_v",
            Role::AttnGate => "attn_q_gate",
            Role::FfnNorm => "ffn_norm",
            Role::FfnGateUp => "ffn_gate_up",
            Role::FfnDown => "ffn_down",
            Role::FfnRouter => "ffn_gate_inp",
            Role::FfnGateUpExps => "ffn_gate_up_exps",
            Role::FfnDownExps => "ffn_down_exps",
            Role::FfnGateUpShexp => "ffn_gate_up_shexp",
            Role::FfnDownShexp => "ffn_down_shexp",
            Role::FfnGateShexp => "ffn_gate_inp_shexp",
            Role::LinQkvz => "ssm_qkvz",
            Role::LinBa => "ssm_ba",
            Role::LinConv => "ssm_conv1d",
            Role::LinDecayRate => "ssm_a",
            Role::LinDtBias => "ssm_dt_bias",
            Role::LinNorm => "ssm_norm",
            Role::LinOut => "ssm_out",
            Role::LinQkv => "ssm_qkv",
            Role::LinZ => "ssm_z",
            Role::VNorm1 => "v_norm1",
            Role::VNorm1Bias => "v_norm1_bias",
            Role::VQkv => "v_attn_qkv",
            Role::VQkvBias => "v_attn_qkv_bias",
            Role::VProj => "v_attn_out",
            Role::VProjBias => "v_attn_out_bias",
            Role::VNorm2 => "v_norm2",
            Role::VNorm2Bias => "v_norm2_bias",
            Role::VFc1 => "v_ffn_up",
            Role::VFc1Bias => "v_ffn_up_bias",
            Role::VFc2 => "v_ffn_down",
            Role::VFc2Bias => "v_ffn_down_bias",
            Role::DsNorm => "v_ds_norm",
            Role::DsNormBias => "v_ds_norm_bias",
            Role::DsFc1 => "v_ds_fc1",
            Role::DsFc1Bias => "v_ds_fc1_bias",
            Role::DsFc2 => "v_ds_fc2",
            Role::DsFc2Bias => "v_ds_fc2_bias",
            Role::VPatchEmbd => "v_patch_embd",
            Role::VPatchBias => "v_patch_bias",
            Role::VPosEmbd => "v_pos_embd",
            Role::MergerNorm => "v_merger_norm",
            Role::MergerNormBias => "v_merger_norm_bias",
            Role::MergerFc1 => "v_merger_fc1",
            Role::MergerFc1Bias => "v_merger_fc1_bias",
            Role::MergerFc2 => "v_merger_fc2",
            Role::MergerFc2Bias => "v_merger_fc2_bias",
        }
    }
}

/// How a tensor is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The token embedding: F32 or F16 rows (flag EMB_F16).
    Embedding,
    /// A matrix the kernels multiply: one entry per declared weight copy.
    Linear,
    /// Norm weights, biases, the MoE router: always F32.
    F32,
    /// A vision-tower matrix: one copy, in `vqf::format::vision_layout`.
    VisionLinear,
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

#[inline(never)]
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
    if let Some(lin) = cfg.linear.filter(|_| cfg.is_linear_layer(l)) {
        let shape = lin.shape();
        let (conv, vlen) = (shape.conv_channels(), shape.value_len());
        let vh = shape.value_heads;
        f(spec(layer, Role::AttnNorm, Kind::F32, &[h])?)?;
        f(spec(layer, Role::LinQkvz, Kind::Linear, &[conv + vlen, h])?)?;
        f(spec(layer, Role::LinBa, Kind::F32, &[2 * vh, h])?)?;
        f(spec(
            layer,
            Role::LinConv,
            Kind::F32,
            &[conv, shape.conv_kernel],
        )?)?;
        f(spec(layer, Role::LinDtBias, Kind::F32, &[vh])?)?;
        f(spec(layer, Role::LinNorm, Kind::F32, &[shape.value_dim])?)?;
        f(spec(layer, Role::LinOut, Kind::Linear, &[h, vlen])?)?;
        f(spec(layer, Role::LinDecayRate, Kind::F32, &[vh])?)?;
    } else {
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
    }
    {
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
                let shared = m.shared_ffn_size as usize;
                if shared > 0 {
                    f(spec(
                        layer,
                        Role::FfnGateUpShexp,
                        Kind::Linear,
                        &[2 * shared, h],
                    )?)?;
                    f(spec(layer, Role::FfnDownShexp, Kind::Linear, &[h, shared])?)?;
                    f(spec(layer, Role::FfnGateShexp, Kind::F32, &[1, h])?)?;
                }
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

/// The rows of one part of a split weight ([`split_roles`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitRows {
    /// `q_dim`.
    Q,
    /// `kv_dim`.
    Kv,
    /// A Gated DeltaNet layer's `conv_channels`.
    Conv,
    /// Its `value_heads x value_dim`.
    Value,
}

/// The roles a fused linear weight is stored as when its parts differ in
/// type (a `source` file's decode copy), with their rows, in row order:
/// QKV as Q, K, V; a Gated DeltaNet layer's projections as q|k|v and z;
/// empty for the others (stored whole).
fn split_roles(role: Role) -> &'static [(Role, SplitRows)] {
    match role {
        Role::AttnQkv => &[
            (Role::AttnQ, SplitRows::Q),
            (Role::AttnK, SplitRows::Kv),
            (Role::AttnV, SplitRows::Kv),
        ],
        Role::LinQkvz => &[
            (Role::LinQkv, SplitRows::Conv),
            (Role::LinZ, SplitRows::Value),
        ],
        _ => &[],
    }
}

/// The parts `role` is stored as in `cfg`'s files when they differ in
/// type ([`split_roles`]; gated attention's QKV has its gate rows as a
/// fourth, [`Role::AttnGate`]).
pub fn split_parts(cfg: &Config, role: Role) -> &'static [(Role, SplitRows)] {
    if role == Role::AttnQkv && cfg.attn_gate() {
        &[
            (Role::AttnQ, SplitRows::Q),
            (Role::AttnK, SplitRows::Kv),
            (Role::AttnV, SplitRows::Kv),
            (Role::AttnGate, SplitRows::Q),
        ]
    } else {
        split_roles(role)
    }
}

/// How many rows `rows` is for `cfg`.
pub fn split_rows(cfg: &Config, rows: SplitRows) -> u32 {
    let lin = cfg.linear.map(|c| c.shape());
    (match rows {
        SplitRows::Q => cfg.q_dim(),
        SplitRows::Kv => cfg.kv_dim(),
        SplitRows::Conv => lin.map_or(0, |d| d.conv_channels()),
        SplitRows::Value => lin.map_or(0, |d| d.value_len()),
    }) as u32
}
