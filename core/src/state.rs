//! The memory an inference needs, carved out of one caller-provided arena:
//! the KV cache, the activations of a batch, and the scratch of the kernels.
//! [`ArenaSizes::new`] says how many bytes are needed (checked arithmetic);
//! [`State::new`] carves them or returns [`Error::ArenaTooSmall`]. Nothing
//! allocates during inference.

use crate::config::Config;
use crate::error::Error;
use kestrel_kernels::cast;

/// Largest batch a prefill step may process.
pub const MAX_BATCH: usize = 256;

/// Most sequence slots one state holds (each its own KV region).
pub const MAX_SLOTS: usize = 64;

/// A [`State::recurrent_pos`] whose windows and states were left part-way
/// through a step (it failed or was cancelled): only a prompt from position
/// 0 can follow.
pub const RECURRENT_LOST: usize = usize::MAX;

/// How the KV cache stores keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvType {
    /// IEEE half precision (the default).
    F16,
    /// f32.
    F32,
}

/// What the state is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Context length: the most tokens the KV cache holds.
    pub max_seq: usize,
    /// The most tokens one forward step processes (prefill batch).
    pub max_batch: usize,
    /// KV cache element type.
    pub kv: KvType,
    /// Keep the logits of every row of a batch (else only the last row's,
    /// or one row per slot for a multi-sequence step).
    pub all_logits: bool,
    /// Sequence slots (1 for one conversation): each has its own KV region
    /// of `max_seq` positions; [`crate::model::forward::forward_rows`]
    /// steps several at once. `forward` uses slot 0.
    pub slots: usize,
    /// Most drafted tokens one slot verifies in a step (speculative
    /// decoding, [`crate::generate::Speculation`]; 0: none): each slot
    /// keeps the logits of `1 + draft` rows, and on Qwen3.5 its Gated
    /// DeltaNet states before a verify step and that step's row records.
    pub draft: usize,
}

impl Options {
    /// Rows of logits a step keeps: `max_batch` with `all_logits`, else
    /// `1 + draft` per slot (at most `max_batch`).
    pub fn logit_rows(&self) -> usize {
        if self.all_logits {
            self.max_batch
        } else {
            self.slots
                .saturating_mul(self.draft.saturating_add(1))
                .min(self.max_batch.max(self.slots))
        }
    }
}

/// The byte size of every buffer in the arena, in carving order (each
/// starts 64-byte aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaSizes {
    /// Bytes needed, including up to 63 bytes to align the start.
    pub total: usize,
    /// Keys: (slot, attention layer, seq, kv_dim) f16 or f32 (Qwen3.5's
    /// Gated DeltaNet layers keep none).
    pub keys: usize,
    /// Values: (slot, attention layer, seq, kv_dim).
    pub values: usize,
    /// Qwen3.5's convolution windows: (slot, DeltaNet layer, conv_kernel -
    /// 1, conv_channels) f32 (0 bytes for other models).
    pub conv_windows: usize,
    /// Qwen3.5's recurrent states: (slot, DeltaNet layer, value_heads,
    /// key_dim, value_dim) f32 (0 bytes for other models).
    pub recurrent: usize,
    /// Qwen3.5: each slot's windows and states as its last prompt left
    /// them (a turn's boundary), f32.
    pub snapshots: usize,
    /// Qwen3.5 with drafts (`draft > 0`): each slot's windows and states
    /// before its last verify step, f32.
    pub verify_base: usize,
    /// Qwen3.5 with drafts: (slot, DeltaNet layer, draft + 1, 2
    /// conv_channels + 2 value_heads) f32, each row of the slot's last
    /// verify step as its delta rule took it (`DeltaShape::record_len`).
    pub verify_rows: usize,
    /// x: (batch, hidden) f32 residual stream.
    pub x: usize,
    /// xb: (batch, hidden) f32 normed input.
    pub xb: usize,
    /// qkv: (batch, q_dim + 2 kv_dim) f32.
    pub qkv: usize,
    /// att: (batch, max(q_dim, value_len, conv_channels)) f32 attention
    /// output, and a split projection's parts while they are multiplied.
    pub att: usize,
    /// hb: (batch, ffn) f32 SwiGLU output.
    pub hb: usize,
    /// proj: (batch, hidden) f32 o/down output.
    pub proj: usize,
    /// tmp: (batch, widest output) f32 matmul parts.
    pub tmp: usize,
    /// logits: (rows, vocab) f32.
    pub logits: usize,
    /// scores: (heads, BLOCK_TOKENS, attention work per query row) f32:
    /// the attention blocks' work space (`model::attend`).
    pub scores: usize,
    /// rope: (seq, rotary_dim / 2) f32 cosines, then as many sines.
    pub rope: usize,
    /// act_qs: (batch, widest input) i8.
    pub act_qs: usize,
    /// act_d: (batch, widest input / 32 + 1) f32.
    pub act_d: usize,
    /// act_sums: (batch, widest input / 32) i16 (Q8_K activations).
    pub act_sums: usize,
    /// MoE router: (batch, experts) f32 logits, then probabilities.
    pub router: usize,
    /// MoE routes: (layer, batch, k) u32 experts.
    pub routes: usize,
    /// MoE route weights: (layer, batch, k) f32.
    pub route_w: usize,
    /// MoE groups: (batch k) u32 slots by expert, then (experts + 1) starts.
    pub groups: usize,
    /// MoE gathered input and accumulated output: (batch, hidden) f32 each.
    pub moe_rows: usize,
}

/// Widths the state needs, from the config.
struct Dims {
    hidden: usize,
    /// Attention layers (with a KV cache), DeltaNet layers.
    kv_layers: usize,
    linear_layers: usize,
    /// Per slot and DeltaNet layer: window and state floats.
    window: usize,
    recurrent: usize,
    /// A verify row's record ([`DeltaShape::record_len`](crate::config::DeltaShape::record_len)).
    record: usize,
    /// A DeltaNet layer's projections, its convolution's channels, and
    /// its output's width.
    qkvz: usize,
    conv: usize,
    value_len: usize,
    /// Its b and a rows.
    ba: usize,
    q_dim: usize,
    kv_dim: usize,
    qkv: usize,
    ffn: usize,
    vocab: usize,
    heads: usize,
    head_dim: usize,
    half_dim: usize,
    layers: usize,
    experts: usize,
    top_k: usize,
}

impl Dims {
    fn of(cfg: &Config) -> Dims {
        let moe_ffn = cfg
            .moe
            .map(|m| (m.moe_ffn_size.max(m.shared_ffn_size)) as usize)
            .unwrap_or(0);
        let lin = cfg.linear.map(|c| c.shape());
        let lin_dim = |f: fn(&crate::config::DeltaShape) -> usize| lin.as_ref().map_or(0, f);
        Dims {
            hidden: cfg.hidden_size as usize,
            kv_layers: cfg.kv_layers(),
            linear_layers: cfg.linear_layers(),
            window: lin_dim(|d| d.window_len()),
            recurrent: lin_dim(|d| d.state_len()),
            record: lin_dim(|d| d.record_len()),
            qkvz: lin_dim(|d| d.conv_channels() + d.value_len()),
            conv: lin_dim(|d| d.conv_channels()),
            value_len: lin_dim(|d| d.value_len()),
            ba: lin_dim(|d| 2 * d.value_heads),
            q_dim: cfg.q_dim(),
            kv_dim: cfg.kv_dim(),
            qkv: cfg.qkv_rows(),
            ffn: (cfg.ffn_size as usize).max(moe_ffn),
            vocab: cfg.vocab_size as usize,
            heads: cfg.num_heads as usize,
            head_dim: cfg.head_dim as usize,
            half_dim: cfg.rotary_dim as usize / 2,
            layers: cfg.num_layers as usize,
            experts: cfg.moe.map(|m| m.num_experts as usize).unwrap_or(0),
            top_k: cfg.moe.map(|m| m.experts_per_token as usize).unwrap_or(0),
        }
    }
}

fn add(a: usize, b: usize) -> Result<usize, Error> {
    a.checked_add(b)
        .ok_or(Error::Overflow { what: "arena size" })
}

/// Cached rows per tile of the attention's online softmax
/// (`model::attend`): 128 rows of a 64-element f16 head are 16 KB each of
/// keys and values, a block's (rows, 128) scores 4 KB per 8 rows.
pub const KEY_TILE: usize = 128;

/// Tokens of one sequence whose query heads of one kv head attend as one
/// block in the decoder (`model::forward`): each tile of keys and values
/// is loaded once for all of them.
pub const BLOCK_TOKENS: usize = 8;

/// f32 values of attention work per query row of a block
/// (`model::attend::Work::carve`): its query, its tile of scores, its tile
/// output and its output (`head_dim` each but the scores), and four
/// running values. `None` on overflow.
pub fn attention_work_per_row(head_dim: usize) -> Option<usize> {
    head_dim.checked_mul(3)?.checked_add(KEY_TILE + 4)
}

/// [`attention_work_per_row`] for the arena's sizes.
pub(crate) fn attention_work(head_dim: usize) -> Result<usize, Error> {
    attention_work_per_row(head_dim).ok_or(Error::Overflow { what: "arena size" })
}

fn mul(a: usize, b: usize) -> Result<usize, Error> {
    a.checked_mul(b)
        .ok_or(Error::Overflow { what: "arena size" })
}

impl ArenaSizes {
    /// The arena needed for `cfg` with `opts`.
    pub fn new(cfg: &Config, opts: &Options) -> Result<ArenaSizes, Error> {
        cfg.validate()?;
        if opts.max_batch == 0 || opts.max_batch > MAX_BATCH {
            return Err(Error::OutOfRange {
                what: "batch (tokens per step)",
                value: opts.max_batch,
                max: MAX_BATCH,
            });
        }
        if opts.slots == 0 || opts.slots > MAX_SLOTS {
            return Err(Error::OutOfRange {
                what: "sequence slots",
                value: opts.slots,
                max: MAX_SLOTS,
            });
        }
        if opts.max_seq == 0 {
            return Err(Error::OutOfRange {
                what: "max_seq",
                value: 0,
                max: usize::MAX,
            });
        }
        let d = Dims::of(cfg);
        let b = opts.max_batch;
        let max_in = d.hidden.max(d.q_dim).max(d.ffn).max(d.value_len);
        let logit_rows = opts.logit_rows();
        // att is also a split projection's parts' room (the widest: Q, or
        // a Gated DeltaNet layer's q|k|v).
        let (qkv, att) = (d.qkv.max(d.qkvz), d.q_dim.max(d.value_len).max(d.conv));
        let max_rows = qkv
            .max(2 * d.ffn)
            .max(d.hidden)
            .max(d.experts)
            .max(if opts.all_logits { d.vocab } else { 0 });
        let kv_elem = if opts.kv == KvType::F16 { 2 } else { 4 };
        let kv = mul(
            mul(mul(mul(opts.slots, d.kv_layers)?, opts.max_seq)?, d.kv_dim)?,
            kv_elem,
        )?;
        let per_slot = |floats: usize| mul(mul(mul(opts.slots, d.linear_layers)?, floats)?, 4);
        let f = 4;
        let mut layout = ArenaSizes {
            total: 0,
            keys: kv,
            values: kv,
            conv_windows: per_slot(d.window)?,
            recurrent: per_slot(d.recurrent)?,
            snapshots: per_slot(d.window + d.recurrent)?,
            verify_base: if opts.draft > 0 {
                per_slot(d.window + d.recurrent)?
            } else {
                0
            },
            verify_rows: per_slot(mul(opts.draft, d.record)?.saturating_add(d.record))?
                * usize::from(opts.draft > 0),
            x: mul(mul(b, d.hidden)?, f)?,
            xb: mul(mul(b, d.hidden)?, f)?,
            qkv: mul(mul(b, qkv)?, f)?,
            att: mul(mul(b, att)?, f)?,
            hb: mul(mul(b, d.ffn.max(d.ba))?, f)?,
            proj: mul(mul(b, d.hidden)?, f)?,
            // Also the lm_head of a step of several sequences: one row of
            // logits per slot (a one-row step writes `logits` directly).
            tmp: mul(mul(b, max_rows)?, f)?.max(mul(mul(logit_rows, d.vocab)?, f)?),
            logits: mul(mul(logit_rows, d.vocab)?, f)?,
            scores: mul(
                mul(mul(d.heads, BLOCK_TOKENS)?, attention_work(d.head_dim)?)?,
                f,
            )?,
            rope: mul(mul(mul(opts.max_seq, d.half_dim)?, 2)?, f)?,
            act_qs: mul(b, max_in)?,
            act_d: mul(mul(b, max_in / 32 + 1)?, f)?,
            act_sums: mul(mul(b, max_in / 32)?, 2)?,
            // MoE only (0 bytes for dense models):
            router: mul(mul(b, d.experts)?, f)?,
            routes: mul(mul(mul(d.layers, b)?, d.top_k)?, 4)?,
            route_w: mul(mul(mul(d.layers, b)?, d.top_k)?, f)?,
            groups: mul(add(mul(b, d.top_k)?, add(d.experts, 1)?)?, 4)?,
            moe_rows: mul(mul(mul(b, d.hidden)?, f)?, 2 * (d.experts > 0) as usize)?,
        };
        layout.total = arena_total(&layout.in_order(), "arena size")?;
        Ok(layout)
    }

    /// Every buffer's size in carving order.
    fn in_order(&self) -> [usize; 25] {
        [
            self.keys,
            self.values,
            self.conv_windows,
            self.recurrent,
            self.snapshots,
            self.verify_base,
            self.verify_rows,
            self.x,
            self.xb,
            self.qkv,
            self.att,
            self.hb,
            self.proj,
            self.tmp,
            self.logits,
            self.scores,
            self.rope,
            self.act_qs,
            self.act_d,
            self.act_sums,
            self.router,
            self.routes,
            self.route_w,
            self.groups,
            self.moe_rows,
        ]
    }

    /// Bytes of the KV cache (keys and values of every slot).
    pub fn kv_bytes(&self) -> usize {
        self.keys + self.values
    }
}

/// The KV cache of one kind.
#[derive(Debug)]
pub enum KvCache<'a> {
    /// f16 bits.
    F16(&'a mut [u16]),
    /// f32 values.
    F32(&'a mut [f32]),
}

impl<'a> KvCache<'a> {
    /// The cache of kind `kv` over `bytes`.
    pub(crate) fn of(bytes: &'a mut [u8], kv: KvType) -> Result<KvCache<'a>, Error> {
        Ok(match kv {
            KvType::F16 => KvCache::F16(cast::as_u16_mut(bytes).ok_or(Error::Overflow {
                what: "arena alignment",
            })?),
            KvType::F32 => KvCache::F32(f32s(bytes)?),
        })
    }

    /// Stores `values` at element offset `at`.
    pub fn store(&mut self, at: usize, values: &[f32]) {
        match self {
            KvCache::F16(c) => {
                for (d, &v) in c[at..at + values.len()].iter_mut().zip(values) {
                    *d = crate::quant::f16::f32_to_f16(v);
                }
            }
            KvCache::F32(c) => c[at..at + values.len()].copy_from_slice(values),
        }
    }

    /// The cache split at element `at`: elements `..at` and `at..` (parts
    /// written by different threads).
    pub fn split_at(self, at: usize) -> (KvCache<'a>, KvCache<'a>) {
        match self {
            KvCache::F16(c) => {
                let (a, b) = c.split_at_mut(at);
                (KvCache::F16(a), KvCache::F16(b))
            }
            KvCache::F32(c) => {
                let (a, b) = c.split_at_mut(at);
                (KvCache::F32(a), KvCache::F32(b))
            }
        }
    }

    /// The same cache borrowed anew (to split it and keep `self`).
    pub fn reborrow(&mut self) -> KvCache<'_> {
        match self {
            KvCache::F16(c) => KvCache::F16(c),
            KvCache::F32(c) => KvCache::F32(c),
        }
    }

    /// A read-only view of elements `range`.
    pub fn view(&self, range: core::ops::Range<usize>) -> KvView<'_> {
        match self {
            KvCache::F16(c) => KvView::F16(&c[range]),
            KvCache::F32(c) => KvView::F32(&c[range]),
        }
    }

    /// Element `at` as f32.
    #[inline]
    pub fn get(&self, at: usize) -> f32 {
        match self {
            KvCache::F16(c) => crate::quant::f16::f16_to_f32(c[at]),
            KvCache::F32(c) => c[at],
        }
    }
}

/// All mutable memory of one sequence's inference.
#[derive(Debug)]
pub struct State<'a> {
    /// What the state was sized for.
    pub opts: Options,
    /// Tokens of slot 0 already in the KV cache (the next token's position
    /// for `forward`). Multi-sequence callers keep each slot's position
    /// themselves and pass it in each [`crate::model::forward::Row`].
    pub pos: usize,
    /// Per slot: rotary position minus sequence position for steps without
    /// explicit M-RoPE positions: 0, or (Qwen3-VL, after an image) the
    /// prompt's `rope_delta` (images span fewer positions than tokens).
    pub rope_delta: [i64; MAX_SLOTS],
    /// Keys: (slot, attention layer, seq, kv_dim).
    pub k_cache: KvCache<'a>,
    /// Values: (slot, attention layer, seq, kv_dim).
    pub v_cache: KvCache<'a>,
    /// Qwen3.5: (slot, DeltaNet layer, conv_kernel - 1, conv_channels)
    /// convolution windows.
    pub conv_windows: &'a mut [f32],
    /// Qwen3.5: (slot, DeltaNet layer, value_heads, key_dim, value_dim)
    /// recurrent states.
    pub recurrent: &'a mut [f32],
    /// Qwen3.5, per slot: the tokens its windows and recurrent states hold
    /// (positions `0..n` fed in order), or [`RECURRENT_LOST`]. A step's rows
    /// must continue from there, or start the slot at position 0; a
    /// recurrent state cannot be cut back as a KV cache can.
    pub recurrent_pos: [usize; MAX_SLOTS],
    /// Qwen3.5, per slot: its windows and states as its last prompt left
    /// them, (slot, windows then states).
    pub snapshots: &'a mut [f32],
    /// Per slot: the tokens the snapshot holds (0: none); a step that runs
    /// the slot from before it drops it.
    pub snapshot_pos: [usize; MAX_SLOTS],
    /// Qwen3.5 with drafts, per slot: its windows and states before its
    /// last verify step (a step of 2 to `1 + draft` rows of the slot),
    /// (slot, windows then states).
    pub verify_base: &'a mut [f32],
    /// (slot, DeltaNet layer, draft + 1, `DeltaShape::record_len`): that
    /// step's rows, recorded for [`crate::model::forward::recurrent_settle`].
    pub verify_rows: &'a mut [f32],
    /// Per slot: (the tokens `verify_base` holds, the rows recorded after
    /// them); 0 rows: none (any other step of the slot drops them).
    pub verify: [(usize, usize); MAX_SLOTS],
    /// (batch, hidden) residual stream.
    pub x: &'a mut [f32],
    /// (batch, hidden) normed input.
    pub xb: &'a mut [f32],
    /// (batch, q_dim + 2 kv_dim (+ q_dim: the gate)) fused projections; a
    /// DeltaNet layer's (batch, conv_channels + value_heads x value_dim).
    pub qkv: &'a mut [f32],
    /// (batch, q_dim) attention output; a DeltaNet layer's (batch,
    /// value_heads x value_dim); before either, a split projection's parts
    /// (`Exec::linear_fusable`).
    pub att: &'a mut [f32],
    /// (batch, ffn) SwiGLU output; a DeltaNet layer's (batch, 2
    /// value_heads) b and a.
    pub hb: &'a mut [f32],
    /// (batch, hidden) projection output.
    pub proj: &'a mut [f32],
    /// Matrix-product scratch: (batch, widest output) parts, (batch, widest
    /// input) activation quants and their scales.
    pub scratch: Scratch<'a>,
    /// (rows, vocab) logits: [`Options::logit_rows`] rows.
    pub logits: &'a mut [f32],
    /// (heads, BLOCK_TOKENS, work per query row): the attention blocks'
    /// work space (`model::attend`).
    pub scores: &'a mut [f32],
    /// (seq, head_dim/2) RoPE cosines.
    pub rope_cos: &'a mut [f32],
    /// (seq, head_dim/2) RoPE sines.
    pub rope_sin: &'a mut [f32],
    /// MoE scratch and the routing of the last step (empty for dense models).
    pub moe: MoeState<'a>,
}

/// A read-only view of one layer's keys or values: element type and slice.
#[derive(Clone, Copy, Debug)]
pub enum KvView<'a> {
    /// f16 bits.
    F16(&'a [u16]),
    /// f32 values.
    F32(&'a [f32]),
}

impl<'a> KvView<'a> {
    /// The view from element `at` on.
    pub fn from(self, at: usize) -> KvView<'a> {
        match self {
            KvView::F16(c) => KvView::F16(&c[at..]),
            KvView::F32(c) => KvView::F32(&c[at..]),
        }
    }

    /// Element `at` as f32.
    #[inline]
    pub fn get(&self, at: usize) -> f32 {
        match self {
            KvView::F16(c) => crate::quant::f16::f16_to_f32(c[at]),
            KvView::F32(c) => c[at],
        }
    }
}

/// The scratch of a matrix product over a batch of rows.
#[derive(Debug)]
pub struct Scratch<'a> {
    /// (batch, widest output) the threads' parts (also the attention's
    /// (heads, batch, head_dim) outputs).
    pub tmp: &'a mut [f32],
    /// (batch, widest input) activation quants.
    pub act_qs: &'a mut [i8],
    /// (batch, widest input / 32) activation scales (Q8_0; Q8_K uses one
    /// per 256).
    pub act_d: &'a mut [f32],
    /// (batch, widest input / 32) activation sums (Q8_K).
    pub act_sums: &'a mut [i16],
}

/// The MoE part of the state: router scratch, the routing of the last
/// forward step, per-expert token lists, and counters of expert weight reads.
#[derive(Debug)]
pub struct MoeState<'a> {
    /// (batch, experts) router logits, then probabilities.
    pub router: &'a mut [f32],
    /// (layer, batch, k): the experts each token of the last step chose in
    /// each MoE layer, by decreasing probability (ties: lowest index first).
    pub routes: &'a mut [u32],
    /// (layer, batch, k) the chosen experts' weights, as `routes`
    /// (renormalized with norm_topk_prob).
    pub route_w: &'a mut [f32],
    /// (batch k) slots `t * k + j` grouped by expert, then (experts + 1)
    /// start offsets into them.
    pub groups: &'a mut [u32],
    /// (batch, hidden) one expert's gathered input rows.
    pub x_in: &'a mut [f32],
    /// (batch, hidden) the weighted sum of the experts' outputs.
    pub acc: &'a mut [f32],
    /// Bytes of expert weights (gate_up and down) multiplied since the state
    /// was made: each selected expert's matrices once per step.
    pub expert_bytes: u64,
    /// Expert evaluations (one per expert per layer per step) since the state was made.
    pub expert_calls: u64,
}

/// The bytes an arena of buffers of `sizes` needs: each buffer starts
/// 64-byte aligned, plus up to 63 bytes to align the arena's start.
pub(crate) fn arena_total(sizes: &[usize], what: &'static str) -> Result<usize, Error> {
    sizes.iter().try_fold(63usize, |total, s| {
        total
            .checked_add(s.div_ceil(64) * 64)
            .ok_or(Error::Overflow { what })
    })
}

/// Cuts an arena into buffers, in order, each 64-byte aligned (as
/// [`arena_total`] counts them).
pub(crate) struct Carver<'a> {
    rest: &'a mut [u8],
}

impl<'a> Carver<'a> {
    /// The arena from its first 64-byte aligned byte, when it holds at
    /// least `total` bytes.
    pub(crate) fn new(arena: &'a mut [u8], total: usize) -> Result<Carver<'a>, Error> {
        if arena.len() < total {
            return Err(Error::ArenaTooSmall {
                need: total,
                have: arena.len(),
            });
        }
        let skip = arena.as_ptr().align_offset(64).min(63);
        Ok(Carver {
            rest: &mut arena[skip..],
        })
    }

    /// The next `size` bytes.
    pub(crate) fn bytes(&mut self, size: usize) -> &'a mut [u8] {
        let padded = size.div_ceil(64) * 64;
        let all = core::mem::take(&mut self.rest);
        let (head, tail) = all.split_at_mut(padded);
        self.rest = tail;
        &mut head[..size]
    }

    /// The next `size` bytes as f32s.
    pub(crate) fn f32s(&mut self, size: usize) -> Result<&'a mut [f32], Error> {
        f32s(self.bytes(size))
    }

    /// The next `size` bytes as u32s.
    pub(crate) fn u32s(&mut self, size: usize) -> Result<&'a mut [u32], Error> {
        cast::as_u32_mut(self.bytes(size)).ok_or(Error::Overflow {
            what: "arena alignment",
        })
    }

    /// The next `size` bytes as i16s.
    pub(crate) fn i16s(&mut self, size: usize) -> Result<&'a mut [i16], Error> {
        cast::as_i16_mut(self.bytes(size)).ok_or(Error::Overflow {
            what: "arena alignment",
        })
    }

    /// The next `size` bytes as i8s.
    pub(crate) fn i8s(&mut self, size: usize) -> &'a mut [i8] {
        cast::as_i8_mut(self.bytes(size))
    }

    /// The next `size` bytes as a KV cache of `kv` elements.
    pub(crate) fn kv(&mut self, size: usize, kv: KvType) -> Result<KvCache<'a>, Error> {
        KvCache::of(self.bytes(size), kv)
    }
}

/// Bytes as f32s (aligned by the carving).
fn f32s(b: &mut [u8]) -> Result<&mut [f32], Error> {
    cast::as_f32_mut(b).ok_or(Error::Overflow {
        what: "arena alignment",
    })
}

impl<'a> State<'a> {
    /// Carves the state out of `arena` (at least `ArenaSizes::new(cfg,
    /// opts).total` bytes) and fills the RoPE tables.
    pub fn new(cfg: &Config, opts: Options, arena: &'a mut [u8]) -> Result<State<'a>, Error> {
        let s = ArenaSizes::new(cfg, &opts)?;
        let mut arena = Carver::new(arena, s.total)?;
        let k_cache = arena.kv(s.keys, opts.kv)?;
        let v_cache = arena.kv(s.values, opts.kv)?;
        let conv_windows = arena.f32s(s.conv_windows)?;
        let recurrent = arena.f32s(s.recurrent)?;
        let snapshots = arena.f32s(s.snapshots)?;
        let verify_base = arena.f32s(s.verify_base)?;
        let verify_rows = arena.f32s(s.verify_rows)?;
        let x = arena.f32s(s.x)?;
        let xb = arena.f32s(s.xb)?;
        let qkv = arena.f32s(s.qkv)?;
        let att = arena.f32s(s.att)?;
        let hb = arena.f32s(s.hb)?;
        let proj = arena.f32s(s.proj)?;
        let tmp = arena.f32s(s.tmp)?;
        let logits = arena.f32s(s.logits)?;
        let scores = arena.f32s(s.scores)?;
        let rope = arena.f32s(s.rope)?;
        let act_qs = arena.i8s(s.act_qs);
        let act_d = arena.f32s(s.act_d)?;
        let act_sums = arena.i16s(s.act_sums)?;
        let router = arena.f32s(s.router)?;
        let routes = arena.u32s(s.routes)?;
        let route_w = arena.f32s(s.route_w)?;
        let groups = arena.u32s(s.groups)?;
        let moe_rows = arena.f32s(s.moe_rows)?;
        let (x_in, acc) = moe_rows.split_at_mut(moe_rows.len() / 2);
        let (rope_cos, rope_sin) = rope.split_at_mut(rope.len() / 2);
        fill_rope(cfg, rope_cos, rope_sin);
        Ok(State {
            opts,
            pos: 0,
            rope_delta: [0; MAX_SLOTS],
            k_cache,
            v_cache,
            conv_windows,
            recurrent,
            recurrent_pos: [0; MAX_SLOTS],
            snapshots,
            snapshot_pos: [0; MAX_SLOTS],
            verify_base,
            verify_rows,
            verify: [(0, 0); MAX_SLOTS],
            x,
            xb,
            qkv,
            att,
            hb,
            proj,
            scratch: Scratch {
                tmp,
                act_qs,
                act_d,
                act_sums,
            },
            logits,
            scores,
            rope_cos,
            rope_sin,
            moe: MoeState {
                router,
                routes,
                route_w,
                groups,
                x_in,
                acc,
                expert_bytes: 0,
                expert_calls: 0,
            },
        })
    }
}

impl State<'_> {
    /// Qwen3.5: slot `slot`'s Gated DeltaNet windows, then its states
    /// (empty for other models).
    pub fn recurrent_of(&mut self, slot: usize) -> [&mut [f32]; 2] {
        let slots = self.opts.slots;
        let (w, r) = (
            self.conv_windows.len() / slots,
            self.recurrent.len() / slots,
        );
        [
            &mut self.conv_windows[slot * w..(slot + 1) * w],
            &mut self.recurrent[slot * r..(slot + 1) * r],
        ]
    }

    /// Qwen3.5: copies slot `slot`'s windows and states into its snapshot
    /// (`take`), or the snapshot back into them.
    pub fn snapshot(&mut self, slot: usize, take: bool) {
        self.copy_recurrent(slot, false, take);
        if !take {
            self.verify[slot] = (0, 0);
        }
    }

    /// Qwen3.5: copies slot `slot`'s windows and states into its snapshot,
    /// or with `verify` its [`State::verify_base`] (`take`), or back.
    pub(crate) fn copy_recurrent(&mut self, slot: usize, verify: bool, take: bool) {
        let slots = self.opts.slots;
        let (w, r) = (
            self.conv_windows.len() / slots,
            self.recurrent.len() / slots,
        );
        let win = &mut self.conv_windows[slot * w..(slot + 1) * w];
        let rec = &mut self.recurrent[slot * r..(slot + 1) * r];
        let copies = if verify {
            &mut *self.verify_base
        } else {
            &mut *self.snapshots
        };
        let (sw, sr) = copies[slot * (w + r)..(slot + 1) * (w + r)].split_at_mut(w);
        if take {
            sw.copy_from_slice(win);
            sr.copy_from_slice(rec);
        } else {
            win.copy_from_slice(sw);
            rec.copy_from_slice(sr);
        }
    }
}

/// RoPE tables as Hugging Face computes them: `inv_freq[i] = 1 /
/// theta^(2i/d)` (`d` the rotary width) and the angle `pos * inv_freq[i]`
/// in f32, then cos/sin (here in f64, rounded once, so every platform gets
/// the same bits).
fn fill_rope(cfg: &Config, cos: &mut [f32], sin: &mut [f32]) {
    let d = cfg.rotary_dim as usize;
    let half = d / 2;
    if half == 0 {
        return;
    }
    let theta = cfg.rope_theta as f32;
    for (p, (c_row, s_row)) in cos
        .chunks_exact_mut(half)
        .zip(sin.chunks_exact_mut(half))
        .enumerate()
    {
        for i in 0..half {
            let inv_freq = 1.0 / libm::powf(theta, (2 * i) as f32 / d as f32);
            let angle = p as f32 * inv_freq;
            c_row[i] = libm::cos(angle as f64) as f32;
            s_row[i] = libm::sin(angle as f64) as f32;
        }
    }
}
