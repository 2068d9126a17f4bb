//! Conversion, the one code path that writes a VQF file: it asks a
//! [`TensorSource`] for f32 rows, quantizes and repacks them with the same
//! functions the kernels' tests use, and streams the result into a sink.
//! It needs no allocator: the caller provides the directory storage and a
//! small scratch buffer (one row group), so peak staging memory is bounded
//! by the widest matrix, not by the largest tensor.

use crate::config::Config;
use crate::error::{mul, Error};
use crate::gguf::GgmlType;
use crate::quant::layout::{BlockValues, QuantizeFn};
use crate::quant::repack::{Layout, Q8X8_ROWS};
use crate::quant::{f16, Quantizer, QK_K};
use crate::tensors::{self, Kind, Spec};
use crate::tensors::{split_parts, split_rows, Role, NO_LAYER};
use crate::vqf::config_section;
use crate::vqf::format::{copies, copy_flag, flags, name_field, vision_layout, Entry};
use crate::vqf::tokenizer_section::{self, TokenizerInput};
use crate::vqf::write::{self, Counter, Sink, Writer};

/// A logical tensor of the source checkpoint (HF or GGUF naming aside).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Part {
    Embed,
    /// The lm_head; for tied models the source returns the embedding.
    LmHead,
    FinalNorm,
    AttnNorm,
    Q,
    K,
    V,
    QBias,
    KBias,
    VBias,
    QNorm,
    KNorm,
    O,
    FfnNorm,
    Gate,
    Up,
    Down,
    Router,
    ExpGate,
    ExpUp,
    ExpDown,
    /// Qwen3.5-MoE's shared expert: gate, up, down and its sigmoid gate's
    /// row.
    ShGate,
    ShUp,
    ShDown,
    ShGateInp,
    /// A Gated DeltaNet layer's tensors: `in_proj_qkv`, `in_proj_z`,
    /// `in_proj_b`, `in_proj_a`, `conv1d` (as `(channels, kernel)`),
    /// `-exp(A_log)` (llama.cpp's `ssm_a`), `dt_bias`, `norm`, `out_proj`.
    LinQkv,
    LinZ,
    LinB,
    LinA,
    LinConv,
    LinDecayRate,
    LinDtBias,
    LinNorm,
    LinOut,
    /// A vision-tower tensor: each vision role is one source tensor (of
    /// ViT block or DeepStack merger `layer`).
    Vision(Role),
}

/// Where conversion reads weights from.
pub trait TensorSource {
    /// Writes rows `row0 .. row0 + out.len() / cols` of `part` (of `layer`,
    /// and of `expert` for expert tensors) as f32 into `out`, where `cols`
    /// is the tensor's row width. A 1-D tensor is one row.
    fn read_rows(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row0: usize,
        out: &mut [f32],
    ) -> Result<(), Error>;

    /// The GGUF block type `part` (of `layer`) is stored in, when the
    /// source keeps quantized blocks that a file can hold as they are (a
    /// GGUF file); `None` (the default) for float sources.
    fn block_type(&self, _part: Part, _layer: u16) -> Option<GgmlType> {
        None
    }

    /// Copies bytes `byte0 .. byte0 + out.len()` of the stored row `row`
    /// of `part` (of `layer`, and of `expert` for expert tensors): whole
    /// blocks of [`TensorSource::block_type`]. Only called for parts whose
    /// `block_type` is `Some`.
    fn read_block_bytes(
        &self,
        _part: Part,
        _layer: u16,
        _expert: usize,
        _row: usize,
        _byte0: usize,
        _out: &mut [u8],
    ) -> Result<(), Error> {
        Err(Error::Unsupported {
            what: "stored blocks from a float source",
            value: 0,
        })
    }
}

/// An importance matrix: how much each input column of a matrix matters,
/// the mean square of the activations it multiplies on a calibration text
/// (`kestrel imatrix`). The searching quantizer weighs each value's error
/// by its column's importance.
pub trait Importance {
    /// The importance of the input columns of `part` (of `layer`, and of
    /// `expert` for expert tensors): one finite value >= 0 per column, or
    /// `None` when the matrix has none (the search then weighs by the
    /// values' magnitude alone).
    fn columns(&self, part: Part, layer: u16, expert: usize) -> Option<&[f32]>;
}

/// What to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightMode {
    /// Q8_0x8 and Q4_0x4 copies of every linear weight.
    Dual,
    /// Q4_0x4 only.
    Q4,
    /// Q8_0x8 only.
    Q8,
    /// F16 linear weights (accuracy mode).
    F16,
    /// F32 linear weights (accuracy mode).
    F32,
    /// For a quantized GGUF source: a Q8_0x8 prefill copy, and a decode
    /// copy that keeps every matrix's own blocks (each tensor in the layout
    /// that holds its type exactly, [`exact_layout`]; types without one
    /// decode from the Q8 copy). Tensors whose source is Q8_0 are stored
    /// once, for both copies. Flags COPY_TAGS.
    Source,
    /// A Q8_0x8 prefill copy, and a decode copy in Q4_0x4 except the
    /// matrices the recipe keeps in Q8_0 (read from the prefill copy, as a
    /// `source` file does for Q8_0 blocks). Flags COPY_TAGS.
    Mix(Recipe),
    /// The smallest file: one copy, read by prompts and decode steps
    /// alike, in Q4_0x4 except the matrices the recipe keeps in Q8_0x8 (a
    /// `mix` file's decode copy without its Q8 prefill copy). Flags
    /// COPY_TAGS and Q4_4X4; every linear weight is tagged for both copies.
    Small(Recipe),
    /// For a quantized GGUF source: [`WeightMode::Source`]'s decode copy
    /// alone, read by prompts and decode steps alike (no Q8 prefill copy):
    /// every matrix in its own blocks where a layout holds its type
    /// exactly, the rest in Q8_0x8. About the GGUF file's size plus the F16
    /// embedding table. Flags COPY_TAGS and Q4_4X4 (one copy), every linear
    /// weight tagged for both copies.
    Exact,
}

/// Which linear weights a [`WeightMode::Mix`] file decodes (and a
/// [`WeightMode::Small`] file stores) in Q8_0, the rest in Q4_0: one bit
/// per [`RecipePart`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recipe {
    q8: u16,
    /// Per part kept in Q8_0: 0 for every layer, else only the first and
    /// the last `ends[p]` layers.
    ends: [u16; 7],
}

/// The matrices a [`Recipe`] chooses between Q4_0 and Q8_0 for, in every
/// layer (the lm_head once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecipePart {
    /// The lm_head (for a tied model, the embedding's Q8/Q4 copy).
    Output = 0,
    /// Attention Q rows.
    AttnQ = 1,
    /// Attention K rows.
    AttnK = 2,
    /// Attention V rows.
    AttnV = 3,
    /// The attention output projection.
    AttnOutput = 4,
    /// The fused FFN gate and up projections (the experts' too).
    FfnGateUp = 5,
    /// The FFN down projection (the experts' too).
    FfnDown = 6,
}

impl RecipePart {
    /// Every part, in order.
    pub const ALL: [RecipePart; 7] = [
        RecipePart::Output,
        RecipePart::AttnQ,
        RecipePart::AttnK,
        RecipePart::AttnV,
        RecipePart::AttnOutput,
        RecipePart::FfnGateUp,
        RecipePart::FfnDown,
    ];

    /// The part's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RecipePart::Output => "output",
            RecipePart::AttnQ => "attn_q",
            RecipePart::AttnK => "attn_k",
            RecipePart::AttnV => "attn_v",
            RecipePart::AttnOutput => "attn_output",
            RecipePart::FfnGateUp => "ffn_gate_up",
            RecipePart::FfnDown => "ffn_down",
        }
    }

    /// The part a name on the command line names.
    pub fn from_name(name: &str) -> Option<RecipePart> {
        RecipePart::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl Recipe {
    /// Every matrix in Q4_0.
    pub const ALL_Q4: Recipe = Recipe {
        q8: 0,
        ends: [0; 7],
    };

    /// The recipe of `--wmode mix` without `--keep-q8`: attention's K, V
    /// and output projections in Q8_0, and the FFN down projection of the
    /// first and the last layer. Of the recipes measured on both real
    /// models (docs/benchmarks.md, "Recipes"), the lowest KL that reads no
    /// more bytes per token than llama.cpp's Q4_0 on either.
    pub const DEFAULT: Recipe = Recipe::ALL_Q4
        .with_q8(RecipePart::AttnK)
        .with_q8(RecipePart::AttnV)
        .with_q8(RecipePart::AttnOutput)
        .with_q8_ends(RecipePart::FfnDown, 1);

    /// This recipe, with `part` decoded in Q8_0 too, in every layer.
    pub const fn with_q8(self, part: RecipePart) -> Recipe {
        self.with_q8_ends(part, 0)
    }

    /// This recipe, with `part` decoded in Q8_0 in the first `n` and the
    /// last `n` layers (every layer when `n` is 0).
    pub const fn with_q8_ends(self, part: RecipePart, n: u16) -> Recipe {
        let mut ends = self.ends;
        ends[part as usize] = n;
        Recipe {
            q8: self.q8 | 1 << part as u16,
            ends,
        }
    }

    /// Whether `part` decodes in Q8_0 (in some layers at least).
    pub fn keeps_q8(self, part: RecipePart) -> bool {
        self.q8 & (1 << part as u16) != 0
    }

    /// Whether `part` of `layer` (of `layers`) decodes in Q8_0.
    pub fn keeps_q8_in(self, part: RecipePart, layer: u16, layers: u32) -> bool {
        let n = self.ends[part as usize] as u32;
        let l = layer as u32;
        self.keeps_q8(part) && (n == 0 || part == RecipePart::Output || l < n || l + n >= layers)
    }

    fn layout(self, part: RecipePart, layer: u16, layers: u32) -> Layout {
        if self.keeps_q8_in(part, layer, layers) {
            Layout::Q8_0x8
        } else {
            Layout::Q4_0x4
        }
    }

    /// How a `mix` file stores linear weight `role` of `layer` (of
    /// `layers`).
    pub fn plan(self, role: Role, layer: u16, layers: u32) -> SourcePlan {
        let part = match role {
            Role::Output => RecipePart::Output,
            Role::AttnOutput => RecipePart::AttnOutput,
            Role::FfnGateUp | Role::FfnGateUpExps => RecipePart::FfnGateUp,
            Role::FfnDown | Role::FfnDownExps => RecipePart::FfnDown,
            Role::AttnQkv => {
                let l = [
                    self.layout(RecipePart::AttnQ, layer, layers),
                    self.layout(RecipePart::AttnK, layer, layers),
                    self.layout(RecipePart::AttnV, layer, layers),
                ];
                return if l.iter().all(|&x| x == Layout::Q8_0x8) {
                    SourcePlan::Shared
                } else if l.iter().all(|&x| x == Layout::Q4_0x4) {
                    SourcePlan::Decode(Layout::Q4_0x4)
                } else {
                    // Gated attention's gate rows go with the query's.
                    SourcePlan::Split([l[0], l[1], l[2], l[0]])
                };
            }
            // Any other linear weight (a router) decodes in Q8_0.
            _ => return SourcePlan::Shared,
        };
        match self.layout(part, layer, layers) {
            Layout::Q8_0x8 => SourcePlan::Shared,
            l => SourcePlan::Decode(l),
        }
    }
}

impl WeightMode {
    /// Header flags for this mode (embedding F16 except in f32 mode).
    pub fn flags(self) -> u64 {
        match self {
            WeightMode::Dual => flags::Q8_8X8 | flags::Q4_4X4 | flags::EMB_F16,
            WeightMode::Q4 => flags::Q4_4X4 | flags::EMB_F16,
            WeightMode::Q8 => flags::Q8_8X8 | flags::EMB_F16,
            WeightMode::F16 => flags::LINEAR_F16 | flags::EMB_F16,
            WeightMode::F32 => flags::LINEAR_F32,
            WeightMode::Source | WeightMode::Mix(_) => {
                flags::Q8_8X8 | flags::COPY_TAGS | flags::EMB_F16
            }
            WeightMode::Small(_) | WeightMode::Exact => {
                flags::Q4_4X4 | flags::COPY_TAGS | flags::EMB_F16
            }
        }
    }

    /// The mode's name (`dual`, `q4`, `q8`, `f16`, `f32`, `source`, `mix`,
    /// `small`).
    pub fn name(self) -> &'static str {
        match self {
            WeightMode::Dual => "dual",
            WeightMode::Q4 => "q4",
            WeightMode::Q8 => "q8",
            WeightMode::F16 => "f16",
            WeightMode::F32 => "f32",
            WeightMode::Source => "source",
            WeightMode::Mix(_) => "mix",
            WeightMode::Small(_) => "small",
            WeightMode::Exact => "exact",
        }
    }
}

const COPY_ORDER: [Layout; 4] = [Layout::F32, Layout::F16, Layout::Q4_0x4, Layout::Q8_0x8];

/// The layout that holds GGUF blocks of type `ty` exactly, in rows of
/// `cols` weights, if the kernels have one: what a `source` file's decode
/// copy stores a matrix of that type in.
pub fn exact_layout(ty: GgmlType, cols: usize) -> Option<Layout> {
    let layout = Layout::keeping(ty.id())?;
    cols.is_multiple_of(layout.block_cols()).then_some(layout)
}

/// The GGUF block type a layout that keeps source blocks holds (the
/// inverse of [`exact_layout`]).
fn kept_type(layout: Layout) -> Option<GgmlType> {
    GgmlType::from_id(layout.spec().kept?.ggml_id)
}

/// The source parts a stored linear role is assembled from, in row order
/// (empty for roles that are not linear weights).
pub fn parts_of(role: Role) -> &'static [Part] {
    match role {
        Role::AttnQkv => &[Part::Q, Part::K, Part::V],
        Role::AttnQ => &[Part::Q],
        Role::AttnK => &[Part::K],
        Role::AttnV => &[Part::V],
        Role::AttnGate => &[Part::Q],
        Role::AttnOutput => &[Part::O],
        Role::FfnGateUp => &[Part::Gate, Part::Up],
        Role::FfnDown => &[Part::Down],
        Role::FfnGateUpExps => &[Part::ExpGate, Part::ExpUp],
        Role::FfnDownExps => &[Part::ExpDown],
        Role::FfnGateUpShexp => &[Part::ShGate, Part::ShUp],
        Role::FfnDownShexp => &[Part::ShDown],
        Role::LinQkvz => &[Part::LinQkv, Part::LinZ],
        Role::LinQkv => &[Part::LinQkv],
        Role::LinZ => &[Part::LinZ],
        Role::LinOut => &[Part::LinOut],
        Role::Output => &[Part::LmHead],
        _ => &[],
    }
}

/// How a `source` file stores one linear weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourcePlan {
    /// One Q8_0x8 entry read by both copies (every part is Q8_0, or a part
    /// has no exact layout, or fused parts differ in a way the decode copy
    /// cannot split: then the decode copy is the requantized Q8 one).
    Shared,
    /// The Q8_0x8 prefill entry and a decode entry in this layout.
    Decode(Layout),
    /// The fused weight's Q8_0x8 prefill entry, and its parts apart in
    /// the decode copy, each in its own layout, in the order of
    /// [`tensors::split_parts`] (a QKV's Q, K, V and, gated, its gate; a
    /// Gated DeltaNet layer's q|k|v and z; the rest unused).
    Split([Layout; 4]),
}

/// The plan of linear weight `(layer, role)` of a `source` file: each
/// part's exact layout ([`exact_layout`]; Q8_0x8 for a source without
/// blocks or a type without one).
pub fn source_plan(
    cfg: &Config,
    src: &dyn TensorSource,
    layer: u16,
    role: Role,
    cols: usize,
) -> SourcePlan {
    let exact = |part: Part| {
        src.block_type(part, layer)
            .and_then(|t| exact_layout(t, cols))
            .unwrap_or(Layout::Q8_0x8)
    };
    let parts = parts_of(role);
    let first = parts.first().map_or(Layout::Q8_0x8, |&p| exact(p));
    if parts.iter().all(|&p| exact(p) == first) {
        return if first == Layout::Q8_0x8 {
            SourcePlan::Shared
        } else {
            SourcePlan::Decode(first)
        };
    }
    let split = split_parts(cfg, role);
    if split.is_empty() {
        return SourcePlan::Shared;
    }
    // Each stored part in the layout of the source part its rows are.
    let mut layouts = [Layout::Q8_0x8; 4];
    for (l, &(part_role, _)) in layouts.iter_mut().zip(split) {
        *l = parts_of(part_role)
            .first()
            .map_or(Layout::Q8_0x8, |&p| exact(p));
    }
    SourcePlan::Split(layouts)
}

/// Calls `f` with every (spec, layout, copies) the file will hold (copies
/// 0 but in a COPY_TAGS file's linear weights), in the order of
/// [`tensors::for_each`] (a QKV's split parts right after it; the caller
/// sorts). `src` is asked for block types in `source` mode only.
fn for_each_tensor(
    cfg: &Config,
    mode: WeightMode,
    src: Option<&dyn TensorSource>,
    f: &mut dyn FnMut(Spec, Layout, u8) -> Result<(), Error>,
) -> Result<(), Error> {
    let file_flags = file_flags(cfg, mode, src);
    let emb = crate::vqf::embedding_layout(file_flags)?;
    let tagged = file_flags & flags::COPY_TAGS != 0;
    tensors::for_each(cfg, &mut |spec| match spec.kind {
        Kind::Embedding => f(spec, emb, 0),
        Kind::F32 => f(spec, Layout::F32, 0),
        Kind::VisionLinear => f(spec, vision_layout(file_flags, spec.shape[1] as usize), 0),
        Kind::Linear if tagged => {
            let cols = spec.shape[(spec.ndim as usize).saturating_sub(1)] as usize;
            let plan = match (mode, src) {
                (WeightMode::Mix(recipe) | WeightMode::Small(recipe), _) => {
                    recipe.plan(spec.role, spec.layer, cfg.num_layers)
                }
                (_, Some(src)) => source_plan(cfg, src, spec.layer, spec.role, cols),
                (_, None) => SourcePlan::Shared,
            };
            // A one-copy file (flag COPY_TAGS without Q8_8X8) stores only
            // the decode copy, tagged for both phases.
            let one_copy = file_flags & flags::Q8_8X8 == 0;
            let decode_tag = if one_copy {
                copies::BOTH
            } else {
                copies::DECODE
            };
            match plan {
                SourcePlan::Shared => f(spec, Layout::Q8_0x8, copies::BOTH),
                SourcePlan::Decode(layout) => {
                    if !one_copy {
                        f(spec, Layout::Q8_0x8, copies::PREFILL)?;
                    }
                    f(spec, layout, decode_tag)
                }
                SourcePlan::Split(layouts) => {
                    if !one_copy {
                        f(spec, Layout::Q8_0x8, copies::PREFILL)?;
                    }
                    for (&(role, rows), layout) in split_parts(cfg, spec.role).iter().zip(layouts) {
                        let part = Spec {
                            role,
                            shape: [split_rows(cfg, rows), cfg.hidden_size, 0, 0],
                            ..spec
                        };
                        f(part, layout, decode_tag)?;
                    }
                    Ok(())
                }
            }
        }
        Kind::Linear => {
            // Layout codes order the directory: plain (F32/F16), Q4_0x4, Q8_0x8.
            for l in COPY_ORDER {
                if file_flags & copy_flag(l) != 0 {
                    f(spec, l, 0)?;
                }
            }
            Ok(())
        }
    })
}

/// How many directory entries a file for `cfg` in `mode` has (`src`: the
/// source, whose block types shape a `source` file; without it such a file
/// is planned as if every matrix decoded from the Q8 copy).
pub fn entry_count(
    cfg: &Config,
    mode: WeightMode,
    src: Option<&dyn TensorSource>,
) -> Result<usize, Error> {
    let mut n = 0;
    for_each_tensor(cfg, mode, src, &mut |_, _, _| {
        n += 1;
        Ok(())
    })?;
    Ok(n)
}

/// The GGUF block type a file keeps the token embedding in: a `source` or
/// `exact` file of a quantized GGUF keeps the download's blocks, one row
/// dequantized per token (the embedding at the file's size, not widened to
/// F16); `None`: the mode's F16 (or F32).
pub fn embedding_blocks(mode: WeightMode, src: Option<&dyn TensorSource>) -> Option<GgmlType> {
    if !matches!(mode, WeightMode::Source | WeightMode::Exact) {
        return None;
    }
    let ty = src?.block_type(Part::Embed, NO_LAYER)?;
    (ty.block_size() > 1 && ty.can_dequantize()).then_some(ty)
}

/// The header flags of a file for `cfg` in `mode` from `src`, but
/// TOKENIZER: the mode's, the model's ([`model_flags`]), EMB_BLOCKS for
/// [`embedding_blocks`].
fn file_flags(cfg: &Config, mode: WeightMode, src: Option<&dyn TensorSource>) -> u64 {
    let f = mode.flags() | model_flags(cfg);
    match embedding_blocks(mode, src) {
        Some(_) => f & !flags::EMB_F16 | flags::EMB_BLOCKS,
        None => f,
    }
}

/// The flags the model itself implies: MOE for expert layers, VISION for a
/// vision tower.
fn model_flags(cfg: &Config) -> u64 {
    let mut f = 0;
    if cfg.moe.is_some() {
        f |= flags::MOE;
    }
    if cfg.vision.is_some() {
        f |= flags::VISION;
    }
    f
}

/// f32 values of scratch the conversion of `cfg` needs: one row group
/// (8 rows) of the widest matrix.
pub fn scratch_len(cfg: &Config) -> Result<usize, Error> {
    let widest = [
        cfg.hidden_size as usize,
        cfg.q_dim(),
        cfg.ffn_size as usize,
        cfg.moe.map(|m| m.moe_ffn_size as usize).unwrap_or(0),
        cfg.qkv_rows(),
        cfg.vision.map_or(0, |v| {
            v.patch_values()
                .max(v.ffn_size as usize)
                .max(v.merge_patches() * v.hidden_size as usize)
        }),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    mul("scratch", Q8X8_ROWS, widest)
}

/// The llama.cpp-style name of a tensor (`blk.3.attn_qkv.q4`).
fn entry_name(spec: &Spec, layout: Layout) -> Result<[u8; 48], Error> {
    let mut buf = [0u8; 48];
    let mut w = ByteWriter {
        buf: &mut buf,
        len: 0,
    };
    use core::fmt::Write;
    let suffix = layout.spec().suffix;
    let r = if spec.layer == NO_LAYER {
        write!(w, "{}.{}", spec.role.stem(), suffix)
    } else {
        write!(w, "blk.{}.{}.{}", spec.layer, spec.role.stem(), suffix)
    };
    r.map_err(|_| Error::Overflow {
        what: "tensor name",
    })?;
    let len = w.len;
    name_field(core::str::from_utf8(&buf[..len]).unwrap_or("?"))
}

struct ByteWriter<'b> {
    buf: &'b mut [u8; 48],
    len: usize,
}

impl core::fmt::Write for ByteWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self
            .len
            .checked_add(s.len())
            .filter(|&e| e <= 48)
            .ok_or(core::fmt::Error)?;
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Fills `entries` (exactly [`entry_count`] long) with the directory of a
/// file for `cfg` in `mode` (`src` as for [`entry_count`]), sorted, offsets
/// not yet assigned.
pub fn directory(
    cfg: &Config,
    mode: WeightMode,
    src: Option<&dyn TensorSource>,
    entries: &mut [Entry],
) -> Result<(), Error> {
    let mut i = 0;
    let blocks = embedding_blocks(mode, src);
    for_each_tensor(cfg, mode, src, &mut |spec, layout, copies| {
        let slot = entries.get_mut(i).ok_or(Error::SizeMismatch {
            what: "directory entries",
            expected: i + 1,
            actual: i,
        })?;
        let mut e = Entry {
            name: entry_name(&spec, layout)?,
            layer: spec.layer,
            role: spec.role,
            layout,
            dtype: match (layout, blocks) {
                (Layout::GgufRows, Some(ty)) => ty.id() as u8,
                _ => layout.spec().dtype_code,
            },
            ndim: spec.ndim,
            shape: spec.shape,
            offset: 0,
            nbytes: 0,
            copies,
        };
        e.nbytes = e.expected_nbytes()?;
        *slot = e;
        i += 1;
        Ok(())
    })?;
    if i != entries.len() {
        return Err(Error::SizeMismatch {
            what: "directory entries",
            expected: i,
            actual: entries.len(),
        });
    }
    crate::sort::sort_by(entries, |a, b| a.key().cmp(&b.key()));
    Ok(())
}

/// The source part and its row that row `r` of a stored linear role comes
/// from: QKV rows are Q (q_dim), then K (kv_dim), then V (kv_dim), then
/// (gated attention) the gate (q_dim): the source's `q_proj` holds each
/// head's query then its gate, `2 head_dim` rows a head; fused gate/up rows
/// come in runs of 8 gate then 8 up rows; a Gated DeltaNet layer's
/// projections are `in_proj_qkv`'s rows, then `in_proj_z`'s.
fn row_source(cfg: &Config, role: Role, r: usize) -> (Part, usize) {
    let (q, kv, hd) = (cfg.q_dim(), cfg.kv_dim(), cfg.head_dim as usize);
    let gated = cfg.attn_gate();
    // Row j of the query (gate: `hd` on) in the source.
    let q_row = |j: usize, gate: usize| {
        if gated {
            (Part::Q, j / hd * 2 * hd + gate + j % hd)
        } else {
            (Part::Q, j)
        }
    };
    match role {
        Role::AttnQ => q_row(r, 0),
        Role::AttnGate => q_row(r, hd),
        Role::AttnQkv => {
            if r < q {
                q_row(r, 0)
            } else if r < q + kv {
                (Part::K, r - q)
            } else if r < q + 2 * kv {
                (Part::V, r - q - kv)
            } else {
                q_row(r - q - 2 * kv, hd)
            }
        }
        Role::LinQkvz => {
            let conv = cfg.linear.map_or(0, |c| c.shape().conv_channels());
            if r < conv {
                (Part::LinQkv, r)
            } else {
                (Part::LinZ, r - conv)
            }
        }
        Role::FfnGateUp | Role::FfnGateUpExps | Role::FfnGateUpShexp => {
            let (gate, up) = match role {
                Role::FfnGateUp => (Part::Gate, Part::Up),
                Role::FfnGateUpShexp => (Part::ShGate, Part::ShUp),
                _ => (Part::ExpGate, Part::ExpUp),
            };
            let (run, within) = (r / 16, r % 16);
            if within < 8 {
                (gate, run * 8 + within)
            } else {
                (up, run * 8 + within - 8)
            }
        }
        role => (parts_of(role).first().copied().unwrap_or(Part::Embed), r),
    }
}

/// Reads rows of a stored tensor (fused roles are assembled from their
/// source parts) into `out` (`n x cols` values).
fn read_role_rows(
    cfg: &Config,
    src: &dyn TensorSource,
    e: &Entry,
    expert: usize,
    row0: usize,
    n: usize,
    out: &mut [f32],
) -> Result<(), Error> {
    let (_, _, cols) = e.matrix_dims();
    let layer = e.layer;
    let simple = |part: Part, out: &mut [f32]| src.read_rows(part, layer, expert, row0, out);
    match e.role {
        Role::TokenEmbd => simple(Part::Embed, out),
        Role::OutputNorm => simple(Part::FinalNorm, out),
        Role::AttnNorm => simple(Part::AttnNorm, out),
        Role::AttnQNorm => simple(Part::QNorm, out),
        Role::AttnKNorm => simple(Part::KNorm, out),
        Role::FfnNorm => simple(Part::FfnNorm, out),
        Role::FfnRouter => simple(Part::Router, out),
        Role::FfnGateShexp => simple(Part::ShGateInp, out),
        Role::LinConv => simple(Part::LinConv, out),
        Role::LinDecayRate => simple(Part::LinDecayRate, out),
        Role::LinDtBias => simple(Part::LinDtBias, out),
        Role::LinNorm => simple(Part::LinNorm, out),
        Role::LinBa => {
            // b's rows, then a's (each `value_heads` of them).
            let vh = cfg.linear.map_or(0, |c| c.value_heads as usize);
            for i in 0..n {
                let r = row0 + i;
                let (part, pr) = if r < vh {
                    (Part::LinB, r)
                } else {
                    (Part::LinA, r - vh)
                };
                src.read_rows(part, layer, 0, pr, &mut out[i * cols..(i + 1) * cols])?;
            }
            Ok(())
        }
        Role::AttnQkvBias => {
            let (q, kv) = (cfg.q_dim(), cfg.kv_dim());
            let (a, rest) = out.split_at_mut(q.min(out.len()));
            let (b, c) = rest.split_at_mut(kv.min(rest.len()));
            src.read_rows(Part::QBias, layer, 0, 0, a)?;
            src.read_rows(Part::KBias, layer, 0, 0, b)?;
            src.read_rows(Part::VBias, layer, 0, 0, c)
        }
        Role::AttnQkv
        | Role::AttnQ
        | Role::AttnGate
        | Role::FfnGateUp
        | Role::FfnGateUpExps
        | Role::FfnGateUpShexp
        | Role::LinQkvz => {
            for i in 0..n {
                let (part, pr) = row_source(cfg, e.role, row0 + i);
                src.read_rows(part, layer, expert, pr, &mut out[i * cols..(i + 1) * cols])?;
            }
            Ok(())
        }
        role if !parts_of(role).is_empty() => simple(parts_of(role)[0], out),
        vision => simple(Part::Vision(vision), out),
    }
}

/// What storing a tensor lost: squared error of the stored values against
/// the source's, and the squared source values (relative RMS error =
/// sqrt(err / reference)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QuantError {
    /// Sum of (stored - source)^2.
    pub err: f64,
    /// Sum of source^2.
    pub reference: f64,
}

impl QuantError {
    fn add(&mut self, source: f32, stored: f32) {
        let d = (stored - source) as f64;
        self.err += d * d;
        self.reference += source as f64 * source as f64;
    }

    /// sqrt(err / reference) (0 for an all-zero tensor).
    pub fn relative_rms(&self) -> f64 {
        if self.reference > 0.0 {
            libm::sqrt(self.err / self.reference)
        } else {
            0.0
        }
    }
}

/// One tensor written: what [`write_vqf`]'s progress callback is told.
#[derive(Clone, Copy, Debug)]
pub struct TensorWritten<'e> {
    /// Its directory entry.
    pub entry: &'e Entry,
    /// Bytes written so far, of `total`.
    pub written: u64,
    /// The file's length.
    pub total: u64,
    /// What its storage lost against the source values.
    pub error: QuantError,
}

/// Streams the data of one tensor into `w`, a row group at a time; returns
/// what the storage lost.
fn write_tensor(
    cfg: &Config,
    src: &dyn TensorSource,
    e: &Entry,
    quantizer: Quantizer,
    importance: Option<&dyn Importance>,
    scratch: &mut [f32],
    w: &mut Writer<'_>,
) -> Result<QuantError, Error> {
    let (experts, rows, cols) = e.matrix_dims();
    let group = match e.layout {
        Layout::F32 | Layout::F16 => Q8X8_ROWS,
        l => l.group_rows(),
    };
    let values = mul("scratch rows", group, cols)?;
    let have = scratch.len();
    let vals = scratch.get_mut(..values).ok_or(Error::SizeMismatch {
        what: "conversion scratch",
        expected: values,
        actual: have,
    })?;
    let mut bytes_buf = [0u8; 4096];
    let mut error = QuantError::default();
    for expert in 0..experts {
        let mut row0 = 0;
        while row0 < rows {
            let n = group.min(rows - row0);
            let v = &mut vals[..n * cols];
            if e.layout != Layout::GgufRows {
                read_role_rows(cfg, src, e, expert, row0, n, v)?;
            }
            match e.layout {
                Layout::F32 => {
                    error.reference += v.iter().map(|&x| x as f64 * x as f64).sum::<f64>();
                    for chunk in v.chunks(1024) {
                        for (o, x) in bytes_buf.chunks_exact_mut(4).zip(chunk) {
                            o.copy_from_slice(&x.to_le_bytes());
                        }
                        w.write(&bytes_buf[..chunk.len() * 4])?;
                    }
                }
                Layout::F16 => {
                    for chunk in v.chunks(2048) {
                        for (o, x) in bytes_buf.chunks_exact_mut(2).zip(chunk) {
                            let h = f16::f32_to_f16(*x);
                            error.add(*x, f16::f16_to_f32(h));
                            o.copy_from_slice(&h.to_le_bytes());
                        }
                        w.write(&bytes_buf[..chunk.len() * 2])?;
                    }
                }
                Layout::GgufRows => {
                    // The source's own blocks, row by row: nothing is lost
                    // (and no value needs reading).
                    let ty = e.block_type().ok_or(Error::Unsupported {
                        what: "GGUF rows of an unknown block type",
                        value: e.dtype as u64,
                    })?;
                    let row_bytes = cols / ty.block_size() * ty.type_size();
                    let chunk = bytes_buf.len() / ty.type_size() * ty.type_size();
                    for r in row0..row0 + n {
                        let mut at = 0;
                        while at < row_bytes {
                            let out = &mut bytes_buf[..chunk.min(row_bytes - at)];
                            src.read_block_bytes(Part::Embed, NO_LAYER, 0, r, at, out)?;
                            w.write(out)?;
                            at += out.len();
                        }
                    }
                }
                _ => {
                    let rows = GroupRows {
                        cfg,
                        src,
                        e,
                        quantizer,
                        importance,
                        expert,
                        row0,
                        n,
                    };
                    write_group(&rows, v, cols, w, &mut error)?;
                }
            }
            row0 += n;
        }
    }
    Ok(error)
}

/// The rows of one row group being written, and where they come from.
struct GroupRows<'s> {
    cfg: &'s Config,
    src: &'s dyn TensorSource,
    e: &'s Entry,
    /// How Q4_0 blocks are made from values.
    quantizer: Quantizer,
    /// The columns' importance, weighing the searching quantizer's error.
    importance: Option<&'s dyn Importance>,
    expert: usize,
    row0: usize,
    n: usize,
}

impl<'s> GroupRows<'s> {
    /// Where row `i` of the group is stored in the source, when the entry
    /// keeps the source's blocks for it: a tagged entry (a `source` file)
    /// whose layout holds that row's block type exactly.
    fn kept_blocks(&self, i: usize) -> Option<(Part, usize)> {
        if self.e.copies == 0 {
            return None;
        }
        let (part, r) = row_source(self.cfg, self.e.role, self.row0 + i);
        let ty = self.src.block_type(part, self.e.layer)?;
        (Some(ty) == kept_type(self.e.layout)).then_some((part, r))
    }

    /// The importance of row `i`'s columns (`cols` of them), if any.
    fn importance(&self, i: usize, cols: usize) -> Result<Option<&'s [f32]>, Error> {
        let Some(imp) = self.importance else {
            return Ok(None);
        };
        let (part, _) = row_source(self.cfg, self.e.role, self.row0 + i);
        match imp.columns(part, self.e.layer, self.expert) {
            Some(c) if c.len() != cols => Err(Error::SizeMismatch {
                what: "importance columns of a matrix",
                expected: cols,
                actual: c.len(),
            }),
            c => Ok(c),
        }
    }
}

/// Writes one row group of a layout of GGUF blocks (`n x cols` values
/// `v`), one super-block column at a time (so the byte staging is a few KB
/// on the stack): each row's blocks are the source's own where the entry
/// keeps them ([`GroupRows::kept_blocks`]), else made from the values by
/// the layout's quantizer (the layout table's; a layout without one, such
/// as the k-quant ones, has an entry only where the source's blocks are
/// kept), then repacked by the layout's repacker.
fn write_group(
    rows: &GroupRows,
    v: &[f32],
    cols: usize,
    w: &mut Writer<'_>,
    error: &mut QuantError,
) -> Result<(), Error> {
    let (e, n) = (rows.e, rows.n);
    let spec = e.layout.spec();
    let no_blocks = Error::Unsupported {
        what: "layout that keeps no source blocks",
        value: crate::vqf::format::layout_code(e.layout) as u64,
    };
    let kept = spec.kept.ok_or(no_blocks)?;
    let ty = GgmlType::from_id(kept.ggml_id).ok_or(no_blocks)?;
    let per = e.layout.block_cols();
    let (block, group) = (ty.type_size(), e.layout.group_bytes(per)?);
    // Per row: where its source blocks are, or what its quantizer needs.
    let mut from = [RowBlocks::Source(Part::Embed, 0); 8];
    for (r, from_r) in from.iter_mut().enumerate().take(n) {
        *from_r = match (rows.kept_blocks(r), spec.quantize) {
            (Some((part, pr)), _) => RowBlocks::Source(part, pr),
            (None, Some(quantize)) => RowBlocks::Quantized {
                quantize,
                importance: rows.importance(r, cols)?,
                mean_square: crate::quant::q4_0::mean_square(&v[r * cols..(r + 1) * cols]),
            },
            (None, None) => {
                return Err(Error::Unsupported {
                    what: "a row whose source type the entry's layout does not hold",
                    value: (rows.row0 + r) as u64,
                })
            }
        };
    }
    let mut gguf = [0u8; 8 * MAX_KEPT_BLOCK];
    let mut packed = [0u8; MAX_KEPT_GROUP];
    let mut stored = [0f32; QK_K];
    for b in 0..cols / per {
        for r in 0..n {
            let dst = &mut gguf[r * block..(r + 1) * block];
            let x = &v[r * cols + b * per..r * cols + (b + 1) * per];
            match from[r] {
                RowBlocks::Source(part, pr) => {
                    rows.src
                        .read_block_bytes(part, e.layer, rows.expert, pr, b * block, dst)?
                }
                RowBlocks::Quantized {
                    quantize,
                    importance,
                    mean_square,
                } => {
                    let values = BlockValues {
                        values: x,
                        row_mean_square: mean_square,
                        importance: importance.map(|c| &c[b * per..(b + 1) * per]),
                        quantizer: rows.quantizer,
                    };
                    quantize(&values, dst)?
                }
            }
            crate::gguf::dequantize_row(ty, dst, &mut stored[..per])?;
            for (&a, &q) in x.iter().zip(&stored) {
                error.add(a, q);
            }
        }
        let out = &mut packed[..group];
        kept.repack_into(&gguf[..n * block], n, per, out)?;
        w.write(out)?;
    }
    Ok(())
}

/// Where one row's blocks come from in [`write_group`].
#[derive(Clone, Copy)]
enum RowBlocks<'a> {
    /// The source's own blocks: its part and row there.
    Source(Part, usize),
    /// Made from the values by the layout's quantizer, with the columns'
    /// importance and the row's mean square.
    Quantized {
        quantize: QuantizeFn,
        importance: Option<&'a [f32]>,
        mean_square: f32,
    },
}

/// Largest source block a kept layout holds, and its repacked row group.
const MAX_KEPT_BLOCK: usize = kestrel_kernels::layouts::q6k::Q6_K_BLOCK_BYTES;
const MAX_KEPT_GROUP: usize = kestrel_kernels::layouts::q6k::Q6KX8_BLOCK_BYTES;

// Every kept layout's row group (at most 8 rows of one super-block column)
// fits the buffers above; a new layout that does not fails to compile.
const _: () = {
    let mut i = 0;
    while i < crate::quant::layout::LAYOUTS.len() {
        let s = &crate::quant::layout::LAYOUTS[i];
        if s.kept.is_some() {
            assert!(s.group_rows <= 8 && s.block_bytes <= MAX_KEPT_GROUP);
            assert!(s.block_bytes / s.group_rows <= MAX_KEPT_BLOCK);
        }
        i += 1;
    }
};

/// The result of a conversion.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    /// The header written (with its checksum).
    pub header: crate::vqf::format::Header,
    /// FNV-1a 64 of every byte written (header checksum field as zeros).
    pub memsum: u64,
}

/// Writes a whole VQF file for `cfg` in `mode` into `sink`. `entries` must
/// be [`entry_count`] long; `scratch` [`scratch_len`] long. `progress` is
/// told after each tensor: its entry, the bytes written of the total, and
/// what its storage lost against the source values. The checksum in the
/// header written to `sink` is zero; the caller patches `Written::memsum`
/// into bytes 40..48 (the sink may be a file that cannot seek from here).
/// With `importance`, the searching quantizer weighs each Q4_0 value's
/// error by its column's importance.
#[allow(clippy::too_many_arguments)]
pub fn write_vqf(
    cfg: &Config,
    mode: WeightMode,
    quantizer: Quantizer,
    importance: Option<&dyn Importance>,
    max_seq: u32,
    tokenizer: Option<&TokenizerInput<'_>>,
    src: &dyn TensorSource,
    entries: &mut [Entry],
    scratch: &mut [f32],
    sink: &mut dyn Sink,
    progress: &mut dyn FnMut(&TensorWritten),
) -> Result<Written, Error> {
    for l in [cfg.ffn_size, cfg.moe.map(|m| m.moe_ffn_size).unwrap_or(8)] {
        if l % 8 != 0 {
            return Err(Error::Unsupported {
                what: "FFN width not a multiple of 8 (fused gate/up runs)",
                value: l as u64,
            });
        }
    }
    directory(cfg, mode, Some(src), entries)?;
    let mut file_flags = file_flags(cfg, mode, Some(src));
    let config_size = config_section::encode(cfg, &mut Counter::default())?;
    let tokenizer_size = match tokenizer {
        Some(t) => {
            file_flags |= flags::TOKENIZER;
            tokenizer_section::encode(t, &mut Counter::default())?
        }
        None => 0,
    };
    let mut header = write::plan(file_flags, max_seq, entries, config_size, tokenizer_size)?;
    let mut w = Writer::new(sink);
    w.write(&header.to_bytes())?;
    for e in entries.iter() {
        w.write(&e.to_bytes())?;
    }
    config_section::encode(cfg, &mut w)?;
    if let Some(t) = tokenizer {
        tokenizer_section::encode(t, &mut w)?;
    }
    for e in entries.iter() {
        w.pad_to(e.offset)?;
        let error = write_tensor(cfg, src, e, quantizer, importance, scratch, &mut w)?;
        if w.position() != e.offset + e.nbytes {
            return Err(Error::SizeMismatch {
                what: "tensor bytes written",
                expected: (e.offset + e.nbytes) as usize,
                actual: w.position() as usize,
            });
        }
        progress(&TensorWritten {
            entry: e,
            written: w.position(),
            total: header.file_len,
            error,
        });
    }
    let memsum = w.memsum();
    header.checksum = memsum;
    Ok(Written { header, memsum })
}
