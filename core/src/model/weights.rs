//! Typed views of a validated VQF file's tensors, and the routing of each
//! phase to a weight copy (mixed precision: prefill reads Q8, decode Q4).

use crate::config::Config;
use crate::error::Error;
use crate::gguf::GgmlType;
use crate::quant::repack::{Layout, PackedMatrix};
use crate::tensors::{split_parts, Role, NO_LAYER};
use crate::vqf::format::{copies, flags, Entry};
use crate::vqf::Vqf;

/// One of a file's two weight copies (mixed precision: a prompt's chunks
/// multiply the prefill copy, decode steps the decode copy). A file with
/// one copy resolves both to the same tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightCopy {
    /// The copy multiplied when a step has more than one token.
    Prefill,
    /// The copy multiplied for single-token steps.
    Decode,
}

/// Which weight copy each phase reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Routing {
    /// The copy a step of more than one token multiplies (prefill).
    pub prefill: WeightCopy,
    /// The copy single-token steps multiply (decode).
    pub decode: WeightCopy,
    /// For a file without COPY_TAGS, the one layout of each copy (prefill,
    /// decode); a COPY_TAGS file's decode copy mixes layouts (`None`).
    layouts: [Option<Layout>; 2],
}

impl Routing {
    /// The routing for a file's flags. Decode reads the Q4 copy when the
    /// file has one, or the per-tensor decode copy of a COPY_TAGS file;
    /// prefill reads the Q8 copy when the file has another copy besides it
    /// and `prefill_q8` is on (the default), else the decode copy. Files
    /// with one copy (q4, q8, f16, f32, and `small` and `exact`: COPY_TAGS
    /// with Q4_4X4) use it for both.
    pub fn for_flags(f: u64, prefill_q8: bool) -> Result<Routing, Error> {
        let has = |bit: u64| f & bit != 0;
        let tagged = has(flags::COPY_TAGS);
        let decode = if tagged {
            None
        } else if has(flags::Q4_4X4) {
            Some(Layout::Q4_0x4)
        } else if has(flags::Q8_8X8) {
            Some(Layout::Q8_0x8)
        } else if has(flags::LINEAR_F16) {
            Some(Layout::F16)
        } else if has(flags::LINEAR_F32) {
            Some(Layout::F32)
        } else {
            return Err(Error::BadConfig {
                what: "the file declares no linear-weight copy",
            });
        };
        let two_copies = has(flags::Q8_8X8) && (tagged || has(flags::Q4_4X4));
        let prefill_layout = if has(flags::Q8_8X8) {
            Some(Layout::Q8_0x8)
        } else {
            decode
        };
        Ok(Routing {
            prefill: if prefill_q8 && two_copies {
                WeightCopy::Prefill
            } else {
                WeightCopy::Decode
            },
            decode: WeightCopy::Decode,
            layouts: [prefill_layout, decode],
        })
    }

    /// The copy a step of `m` tokens multiplies.
    pub fn for_batch(&self, m: usize) -> WeightCopy {
        if m > 1 {
            self.prefill
        } else {
            self.decode
        }
    }

    /// The one layout of `copy`, or `None` when the copy mixes layouts
    /// tensor by tensor (the decode copy of a COPY_TAGS file).
    pub fn layout(&self, copy: WeightCopy) -> Option<Layout> {
        self.layouts[copy as usize]
    }
}

/// The model's tensors, as views into the file, resolved once when the
/// model opens: a step looks nothing up and cannot fail on a missing
/// tensor.
#[derive(Clone, Copy, Debug)]
pub struct Weights<'a> {
    /// The file.
    pub vqf: Vqf<'a>,
    /// Its config.
    pub cfg: Config,
    /// Which copy each phase reads.
    pub routing: Routing,
    /// Embedding storage: F16, F32 or GGUF rows.
    pub embedding: Layout,
    /// The block type of GGUF rows (`embedding` [`Layout::GgufRows`]).
    embedding_blocks: Option<GgmlType>,
    /// (vocab, hidden) embedding rows, in `embedding`.
    embedding_rows: &'a [u8],
    /// (hidden) f32 final norm.
    output_norm: &'a [u8],
    /// (vocab, hidden) lm_head: the prefill copy, the decode copy.
    output: [PackedMatrix<'a>; 2],
    /// (2, layers): every decoder layer in the prefill copy, then in the
    /// decode copy (the caller's storage, [`Weights::layer_slots`] long).
    layers: &'a [LayerWeights<'a>],
}

/// One decoder layer's tensors for one weight copy.
#[derive(Clone, Copy, Debug)]
pub struct LayerWeights<'a> {
    /// (hidden) f32.
    pub attn_norm: &'a [u8],
    /// (q_dim + 2 kv_dim (+ q_dim: gated attention's gate), hidden): Q,
    /// K, V (then the gate) rows.
    pub qkv: Fusable<'a>,
    /// (q_dim + 2 kv_dim) f32, Qwen2 only.
    pub qkv_bias: Option<&'a [u8]>,
    /// (head_dim) f32, Qwen3 only.
    pub q_norm: Option<&'a [u8]>,
    /// (head_dim) f32, Qwen3 only.
    pub k_norm: Option<&'a [u8]>,
    /// (hidden, q_dim).
    pub o: PackedMatrix<'a>,
    /// (hidden) f32.
    pub ffn_norm: &'a [u8],
    /// (2 ffn, hidden): gate and up in runs of 8 rows (0 x 0 on MoE layers).
    pub gate_up: PackedMatrix<'a>,
    /// (hidden, ffn) (0 x 0 on MoE layers).
    pub down: PackedMatrix<'a>,
    /// The router and experts, on MoE layers.
    pub moe: Option<MoeLayer<'a>>,
    /// A Gated DeltaNet layer's tensors (Qwen3.5), on those layers (whose
    /// `qkv` and `o` are 0 x 0).
    pub linear: Option<LinearLayer<'a>>,
}

/// One Gated DeltaNet layer's tensors for one weight copy
/// (`model::deltanet`).
#[derive(Clone, Copy, Debug)]
pub struct LinearLayer<'a> {
    /// (conv_channels + value_heads x value_dim, hidden): q, k, v, then z.
    pub qkvz: Fusable<'a>,
    /// (2 value_heads, hidden) F32: b, then a.
    pub ba: PackedMatrix<'a>,
    /// (conv_channels, conv_kernel) f32.
    pub conv: &'a [u8],
    /// (value_heads) f32: `-exp(A_log)`.
    pub decay_rate: &'a [u8],
    /// (value_heads) f32.
    pub dt_bias: &'a [u8],
    /// (value_dim) f32.
    pub norm: &'a [u8],
    /// (hidden, value_heads x value_dim).
    pub out: PackedMatrix<'a>,
}

/// A fused projection of one copy (the attention's QKV, `(q_dim + 2
/// kv_dim, hidden)` rows, Q then K then V, then gated attention's gate
/// rows; a Gated DeltaNet layer's
/// `(conv_channels + value_len, hidden)`, q|k|v then z), whole or in its
/// parts.
#[derive(Clone, Copy, Debug)]
pub enum Fusable<'a> {
    /// One matrix.
    Fused(PackedMatrix<'a>),
    /// Its parts in row order (`tensors::split_parts`; unused ones 0 x
    /// 0): a copy in the source's types where the parts differ.
    Split([PackedMatrix<'a>; 4]),
}

/// A 0 x 0 matrix: a placeholder.
const NO_MATRIX: PackedMatrix<'static> = PackedMatrix {
    layout: Layout::F32,
    rows: 0,
    cols: 0,
    bytes: &[],
};

impl<'a> LayerWeights<'a> {
    /// A placeholder to fill storage with before [`Weights::new`].
    pub const EMPTY: LayerWeights<'static> = LayerWeights {
        attn_norm: &[],
        qkv: Fusable::Fused(NO_MATRIX),
        qkv_bias: None,
        q_norm: None,
        k_norm: None,
        o: NO_MATRIX,
        ffn_norm: &[],
        gate_up: NO_MATRIX,
        down: NO_MATRIX,
        moe: None,
        linear: None,
    };
}

impl<'a> Weights<'a> {
    /// The [`LayerWeights`] storage [`Weights::new`] needs for `cfg`: every
    /// layer in both weight copies.
    pub fn layer_slots(cfg: &Config) -> usize {
        2 * cfg.num_layers as usize
    }

    /// Views over a validated file, every tensor resolved once; `layers`
    /// (at least [`Weights::layer_slots`] long) holds the layers' views.
    pub fn new(
        vqf: Vqf<'a>,
        prefill_q8: bool,
        layers: &'a mut [LayerWeights<'a>],
    ) -> Result<Weights<'a>, Error> {
        let f = vqf.header().flags;
        let cfg = *vqf.config();
        let n = cfg.num_layers as usize;
        let have = layers.len();
        let layers = layers
            .get_mut(..Self::layer_slots(&cfg))
            .ok_or(Error::BufferTooSmall {
                what: "layer weight storage",
                need: Self::layer_slots(&cfg),
                have,
            })?;
        let routing = Routing::for_flags(f, prefill_q8)?;
        let embedding = crate::vqf::embedding_layout(f)?;
        let mut w = Weights {
            vqf,
            cfg,
            routing,
            embedding,
            embedding_blocks: None,
            embedding_rows: &[],
            output_norm: &[],
            output: [NO_MATRIX; 2],
            layers: &[],
        };
        #[cfg(not(feature = "gguf-rows"))]
        if embedding == Layout::GgufRows {
            return Err(Error::Unsupported {
                what: "a token embedding in the GGUF's blocks (flag EMB_BLOCKS): this build \
                       of kestrel-core has no feature `gguf-rows`; convert the model with \
                       --wmode dual, mix, small or q4 (F16 embedding) for it; flags",
                value: f,
            });
        }
        let emb = w.entry(NO_LAYER, Role::TokenEmbd, embedding)?;
        w.embedding_blocks = emb.block_type();
        w.embedding_rows = w.vqf.data(&emb);
        w.output_norm = w.vector(NO_LAYER, Role::OutputNorm)?;
        for copy in [WeightCopy::Prefill, WeightCopy::Decode] {
            let c = copy as usize;
            w.output[c] = w.matrix(NO_LAYER, Role::Output, copy)?;
            for l in 0..n {
                layers[c * n + l] = w.resolve_layer(l, copy)?;
            }
        }
        w.layers = layers;
        Ok(w)
    }

    /// The directory entry of a tensor the model needs.
    #[inline(never)]
    fn entry(&self, layer: u16, role: Role, layout: Layout) -> Result<Entry, Error> {
        self.vqf
            .find(layer, role, layout)
            .ok_or(Error::MissingTensor {
                role: role.stem(),
                layer,
            })
    }

    /// The entry of linear weight `(layer, role)` in `copy`: by its tag in
    /// a COPY_TAGS file, else by the copy's layout.
    #[inline(never)]
    fn copy_entry(&self, layer: u16, role: Role, copy: WeightCopy) -> Result<Entry, Error> {
        match self.routing.layout(copy) {
            Some(layout) => self.entry(layer, role, layout),
            None => {
                let bit = match copy {
                    WeightCopy::Prefill => copies::PREFILL,
                    WeightCopy::Decode => copies::DECODE,
                };
                self.vqf
                    .find_copy(layer, role, bit)
                    .ok_or(Error::MissingTensor {
                        role: role.stem(),
                        layer,
                    })
            }
        }
    }

    #[inline(never)]
    fn find(&self, layer: u16, role: Role, layout: Layout) -> Result<&'a [u8], Error> {
        Ok(self.vqf.data(&self.entry(layer, role, layout)?))
    }

    #[inline(never)]
    pub(crate) fn vector(&self, layer: u16, role: Role) -> Result<&'a [u8], Error> {
        self.find(layer, role, Layout::F32)
    }

    #[inline(never)]
    fn matrix(&self, layer: u16, role: Role, copy: WeightCopy) -> Result<PackedMatrix<'a>, Error> {
        self.vqf.matrix(&self.copy_entry(layer, role, copy)?, 0)
    }

    /// Layer `layer`'s fused projection `role` (QKV, a Gated DeltaNet
    /// layer's projections) in `copy`: one matrix, or (a COPY_TAGS file
    /// whose parts differ in type) its parts.
    #[inline(never)]
    fn fusable(&self, layer: u16, role: Role, copy: WeightCopy) -> Result<Fusable<'a>, Error> {
        match self.copy_entry(layer, role, copy) {
            Ok(e) => Ok(Fusable::Fused(self.vqf.matrix(&e, 0)?)),
            Err(missing)
                if self.routing.layout(copy).is_none()
                    && !split_parts(&self.cfg, role).is_empty() =>
            {
                let mut parts = [NO_MATRIX; 4];
                for (p, &(part, _)) in parts.iter_mut().zip(split_parts(&self.cfg, role)) {
                    *p = self.matrix(layer, part, copy).map_err(|_| missing)?;
                }
                Ok(Fusable::Split(parts))
            }
            Err(e) => Err(e),
        }
    }

    /// MoE layer `layer`'s router and expert stacks in `copy`.
    #[inline(never)]
    fn moe_layer(&self, layer: u16, copy: WeightCopy) -> Result<Option<MoeLayer<'a>>, Error> {
        let Some(m) = self.cfg.moe else {
            return Ok(None);
        };
        if !self.cfg.is_moe_layer(layer as usize) {
            return Ok(None);
        }
        let gate_up = self.copy_entry(layer, Role::FfnGateUpExps, copy)?;
        let down = self.copy_entry(layer, Role::FfnDownExps, copy)?;
        let shared = if m.shared_ffn_size > 0 {
            Some(SharedExpert {
                gate_up: self.matrix(layer, Role::FfnGateUpShexp, copy)?,
                down: self.matrix(layer, Role::FfnDownShexp, copy)?,
                gate: self.vector(layer, Role::FfnGateShexp)?,
            })
        } else {
            None
        };
        Ok(Some(MoeLayer {
            shared,
            router: self
                .vqf
                .matrix(&self.entry(layer, Role::FfnRouter, Layout::F32)?, 0)?,
            gate_up: self.vqf.data(&gate_up),
            down: self.vqf.data(&down),
            gate_up_layout: gate_up.layout,
            down_layout: down.layout,
            experts: m.num_experts as usize,
            top_k: m.experts_per_token as usize,
            ffn: m.moe_ffn_size as usize,
            hidden: self.cfg.hidden_size as usize,
            norm_topk_prob: m.norm_topk_prob,
        }))
    }

    /// Layer `l`'s tensors in `copy` (the copy a step multiplies).
    pub fn layer(&self, l: usize, copy: WeightCopy) -> Result<&LayerWeights<'a>, Error> {
        let n = self.cfg.num_layers as usize;
        let at = copy as usize * n + l;
        self.layers
            .get(at)
            .filter(|_| l < n)
            .ok_or(Error::OutOfRange {
                what: "layer index",
                value: l,
                max: n.saturating_sub(1),
            })
    }

    /// Looks up layer `l`'s tensors in `copy` (the parser checked they
    /// all exist).
    #[inline(never)]
    fn resolve_layer(&self, l: usize, copy: WeightCopy) -> Result<LayerWeights<'a>, Error> {
        let layer = u16::try_from(l).map_err(|_| Error::Overflow {
            what: "layer index",
        })?;
        let moe = self.moe_layer(layer, copy)?;
        let ffn_norm = self.vector(layer, Role::FfnNorm)?;
        let (gate_up, down) = if moe.is_some() {
            (NO_MATRIX, NO_MATRIX)
        } else {
            (
                self.matrix(layer, Role::FfnGateUp, copy)?,
                self.matrix(layer, Role::FfnDown, copy)?,
            )
        };
        if self.cfg.is_linear_layer(l) {
            let f32_matrix = |role| self.vqf.matrix(&self.entry(layer, role, Layout::F32)?, 0);
            return Ok(LayerWeights {
                attn_norm: self.vector(layer, Role::AttnNorm)?,
                ffn_norm,
                gate_up,
                down,
                moe,
                linear: Some(LinearLayer {
                    qkvz: self.fusable(layer, Role::LinQkvz, copy)?,
                    ba: f32_matrix(Role::LinBa)?,
                    conv: self.vector(layer, Role::LinConv)?,
                    decay_rate: self.vector(layer, Role::LinDecayRate)?,
                    dt_bias: self.vector(layer, Role::LinDtBias)?,
                    norm: self.vector(layer, Role::LinNorm)?,
                    out: self.matrix(layer, Role::LinOut, copy)?,
                }),
                ..LayerWeights::EMPTY
            });
        }
        Ok(LayerWeights {
            attn_norm: self.vector(layer, Role::AttnNorm)?,
            qkv: self.fusable(layer, Role::AttnQkv, copy)?,
            qkv_bias: if self.cfg.qkv_bias {
                Some(self.vector(layer, Role::AttnQkvBias)?)
            } else {
                None
            },
            q_norm: if self.cfg.qk_norm {
                Some(self.vector(layer, Role::AttnQNorm)?)
            } else {
                None
            },
            k_norm: if self.cfg.qk_norm {
                Some(self.vector(layer, Role::AttnKNorm)?)
            } else {
                None
            },
            o: self.matrix(layer, Role::AttnOutput, copy)?,
            ffn_norm,
            gate_up,
            down,
            moe,
            linear: None,
        })
    }

    /// (vocab, hidden) embedding rows, in [`Weights::embedding`].
    pub fn embedding(&self) -> &'a [u8] {
        self.embedding_rows
    }

    /// Bytes of one embedding row.
    pub fn embedding_row_bytes(&self) -> u64 {
        let h = self.cfg.hidden_size as u64;
        match (self.embedding, self.embedding_blocks) {
            (Layout::F16, _) => 2 * h,
            (Layout::GgufRows, Some(ty)) => h / ty.block_size() as u64 * ty.type_size() as u64,
            _ => 4 * h,
        }
    }

    /// Token `id`'s embedding row, widened to f32 in `out` (hidden).
    pub fn embedding_row(&self, id: u32, out: &mut [f32]) -> Result<(), Error> {
        let vocab = self.cfg.vocab_size;
        if id >= vocab {
            return Err(Error::BadToken { id, vocab });
        }
        let n = self.embedding_row_bytes() as usize;
        let at = id as usize * n;
        let bytes = self
            .embedding_rows
            .get(at..at + n)
            .ok_or(Error::BadToken { id, vocab })?;
        match (self.embedding, self.embedding_blocks) {
            #[cfg(feature = "gguf-rows")]
            (Layout::GgufRows, Some(ty)) => return crate::gguf::dequantize_row(ty, bytes, out),
            (Layout::F16, _) => {
                for (v, h) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *v = crate::quant::f16::f16_to_f32(u16::from_le_bytes([h[0], h[1]]));
                }
            }
            _ => {
                for (v, x) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *v = f32::from_le_bytes([x[0], x[1], x[2], x[3]]);
                }
            }
        }
        Ok(())
    }

    /// (hidden) final norm.
    pub fn output_norm(&self) -> &'a [u8] {
        self.output_norm
    }

    /// (vocab, hidden) lm_head in `copy` (the copy a step multiplies).
    pub fn output(&self, copy: WeightCopy) -> PackedMatrix<'a> {
        self.output[copy as usize]
    }

    /// Bytes of weights one decode step reads (layers and lm_head in the
    /// decode copy, one embedding row; of each MoE layer's experts, the `k`
    /// selected ones): for bandwidth figures.
    pub fn decode_bytes(&self) -> u64 {
        let decode_layout = self.routing.layout(WeightCopy::Decode);
        let in_decode_copy = |e: &Entry| match decode_layout {
            Some(layout) => e.layout == layout,
            None => e.copies & copies::DECODE != 0,
        };
        let mut total = 0u64;
        for e in self.vqf.entries() {
            if matches!(e.role, Role::FfnGateUpExps | Role::FfnDownExps) {
                if let (Some(m), true) = (self.cfg.moe, in_decode_copy(&e)) {
                    let per = e.nbytes / (m.num_experts.max(1) as u64);
                    total += per * m.experts_per_token as u64;
                }
                continue;
            }
            let used = match e.role {
                Role::TokenEmbd => false,
                Role::AttnQkv
                | Role::AttnQ
                | Role::AttnK
                | Role::AttnV
                | Role::AttnGate
                | Role::AttnOutput
                | Role::FfnGateUp
                | Role::FfnDown
                | Role::FfnGateUpShexp
                | Role::FfnDownShexp
                | Role::LinQkvz
                | Role::LinQkv
                | Role::LinZ
                | Role::LinOut
                | Role::Output => in_decode_copy(&e),
                role => !role.is_vision(),
            };
            if used {
                total += e.nbytes;
            }
        }
        total + self.embedding_row_bytes()
    }
}

/// Qwen3.5-MoE's shared expert: every token runs it, its output scaled by
/// `sigmoid(gate . x)`.
#[derive(Clone, Copy, Debug)]
pub struct SharedExpert<'a> {
    /// (2 shared_ffn, hidden): gate and up in runs of 8 rows.
    pub gate_up: PackedMatrix<'a>,
    /// (hidden, shared_ffn).
    pub down: PackedMatrix<'a>,
    /// (hidden) f32: the sigmoid gate's row.
    pub gate: &'a [u8],
}

/// One MoE layer's tensors for one weight copy.
#[derive(Clone, Copy, Debug)]
pub struct MoeLayer<'a> {
    /// The shared expert (Qwen3.5-MoE), if any.
    pub shared: Option<SharedExpert<'a>>,
    /// (experts, hidden) F32 router.
    pub router: PackedMatrix<'a>,
    /// Stacked experts' fused gate/up, `experts x (2 ffn, hidden)`, each
    /// expert's matrix contiguous.
    pub gate_up: &'a [u8],
    /// Stacked experts' down, `experts x (hidden, ffn)`.
    pub down: &'a [u8],
    /// The layout of the gate/up stack.
    pub gate_up_layout: Layout,
    /// The layout of the down stack.
    pub down_layout: Layout,
    /// Number of experts.
    pub experts: usize,
    /// Experts chosen per token.
    pub top_k: usize,
    /// Each expert's FFN width.
    pub ffn: usize,
    /// Residual width.
    pub hidden: usize,
    /// Renormalize the chosen weights.
    pub norm_topk_prob: bool,
}

impl<'a> MoeLayer<'a> {
    /// Expert `e`'s `(gate_up, down)` matrices: byte ranges
    /// `e * size .. (e + 1) * size` of each stack (docs/vqf.md).
    pub fn expert(&self, e: usize) -> Result<(PackedMatrix<'a>, PackedMatrix<'a>), Error> {
        if e >= self.experts {
            return Err(Error::OutOfRange {
                what: "expert index",
                value: e,
                max: self.experts.saturating_sub(1),
            });
        }
        let gu_rows = self.ffn.checked_mul(2).ok_or(Error::Overflow {
            what: "expert rows",
        })?;
        let slice = |stack: &'a [u8], layout: Layout, rows: usize, cols: usize| {
            let one = layout.matrix_bytes(rows, cols)?;
            let start = one.checked_mul(e).ok_or(Error::Overflow {
                what: "expert offset",
            })?;
            let bytes = stack
                .get(start..start.saturating_add(one))
                .ok_or(Error::Truncated {
                    what: "expert matrix",
                    need: start.saturating_add(one) as u64,
                    have: stack.len() as u64,
                })?;
            PackedMatrix::new(layout, rows, cols, bytes)
        };
        Ok((
            slice(self.gate_up, self.gate_up_layout, gu_rows, self.hidden)?,
            slice(self.down, self.down_layout, self.hidden, self.ffn)?,
        ))
    }
}
