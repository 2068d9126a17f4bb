//! The forward pass of the dense Qwen2/Qwen3 decoder, top to bottom.
//!
//! One call processes a batch of `m` tokens (1 for decode, up to
//! `max_batch` for prefill) at positions `state.pos ..`, writes their keys
//! and values into the cache, and leaves the logits of the last token (or of
//! every token, with `all_logits`) in `state.logits`.
//!
//! Several sequences: [`forward_rows`] runs one row per (slot, position,
//! token), each row's keys and values stored in its slot's KV region and
//! its attention causal over that slot only; the rows share every weight
//! read (one GEMM per matrix). A row's result does not depend on the other
//! rows (every kernel computes each activation row alone, in a fixed order),
//! so a row equals the single-sequence `forward` of the same token with the
//! same weight copy, bit for bit.

use super::attend;
use super::deltanet::{self, DeltaShape};
use super::linear::Exec;
pub use super::observe::{Input, NoObserver, Observer};
use super::ops;
use super::weights::{LayerWeights, LinearLayer, WeightCopy, Weights};
use crate::error::Error;
use crate::kernels::{Epilogue, Kernels};
use crate::parallel::{rows_parallel, try_rows_parallel, Parallel, MAX_PARTS};
use crate::state::{attention_work, State, BLOCK_TOKENS, MAX_SLOTS, RECURRENT_LOST};
use core::sync::atomic::{AtomicBool, Ordering};

/// One row of a multi-sequence step: `token` at position `pos` of sequence
/// slot `slot` (`slot < opts.slots`, `pos < opts.max_seq`; positions
/// `0..pos` of the slot must hold that sequence's keys and values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The sequence slot (its KV region).
    pub slot: usize,
    /// The token's position in its sequence (RoPE angle, KV index).
    pub pos: usize,
    /// The token id.
    pub token: u32,
    /// Compute this row's logits.
    pub logits: bool,
}

/// The rows of one step.
#[derive(Clone, Copy, Debug)]
pub enum Rows<'r> {
    /// `tokens` of sequence slot `slot` at positions `pos ..` (a prompt
    /// chunk, or one decode token), then the rows `then` of other slots (the
    /// server's decode rows riding along a prompt chunk). The chunk's last
    /// row keeps logits when `last_logits` is set, every chunk row when the
    /// state keeps all logits; each row of `then` says for itself.
    Run {
        /// The sequence slot (its KV region).
        slot: usize,
        /// The first token's position in its sequence.
        pos: usize,
        /// The tokens, in order.
        tokens: &'r [u32],
        /// The chunk's last row keeps logits (the prompt's last chunk).
        last_logits: bool,
        /// Rows of other slots computed after the chunk's.
        then: &'r [Row],
    },
    /// Explicit rows, any mix of slots (a multi-sequence decode step).
    Explicit(&'r [Row]),
}

impl Rows<'_> {
    fn len(&self) -> usize {
        match self {
            Rows::Run { tokens, then, .. } => tokens.len() + then.len(),
            Rows::Explicit(rows) => rows.len(),
        }
    }

    /// Row `t` (`t < len`), with whether its logits are kept.
    fn get(&self, t: usize, all_logits: bool) -> Row {
        match *self {
            Rows::Run {
                slot,
                pos,
                tokens,
                last_logits,
                then,
            } => match tokens.get(t) {
                Some(&token) => Row {
                    slot,
                    pos: pos + t,
                    token,
                    logits: all_logits || (last_logits && t + 1 == tokens.len()),
                },
                None => then[t - tokens.len()],
            },
            Rows::Explicit(rows) => rows[t],
        }
    }
}

/// One forward step: which rows, with which weight copy, and whether the
/// lm_head runs.
#[derive(Clone, Copy, Debug)]
pub struct Step<'r> {
    /// The rows (1 to `max_batch`).
    pub rows: Rows<'r>,
    /// The weight copy multiplied: `w.routing.for_batch(n)` for a chunk of
    /// `n` prompt tokens, `w.routing.decode` for a decode step.
    pub copy: WeightCopy,
    /// Qwen3-VL and Qwen3.5: the rows' M-RoPE positions and image rows.
    pub images: Option<&'r Multimodal<'r>>,
    /// Run the lm_head for the rows that keep logits (else the logits
    /// buffer is left as it was).
    pub logits: bool,
    /// Read before each layer: set, the step stops with
    /// [`Error::Cancelled`] (its rows' keys and values partly written: they
    /// count as not run). `None`: the step runs whole.
    pub interrupt: Option<&'r AtomicBool>,
}

/// Runs one [`Step`] and returns the logits of the rows that keep them, one
/// `vocab` row each, in row order. `state.pos` is neither read nor changed:
/// the caller keeps each sequence's position.
pub fn forward_step<'s, P: Parallel>(
    w: &Weights,
    s: &'s mut State,
    k: &Kernels,
    pool: &P,
    step: &Step,
) -> Result<&'s [f32], Error> {
    let n = forward_step_observed(w, s, k, pool, step, &mut NoObserver)?;
    Ok(&s.logits[..n * w.cfg.vocab_size as usize])
}

/// [`forward`] without the lm_head's logits, showing `observer` the input
/// of every decoder matrix (the lm_head's too when it asks): fills the KV
/// cache for `tokens` and advances `state.pos`. The computation is
/// `forward`'s, bit for bit (`kestrel imatrix`).
pub fn forward_observed<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    tokens: &[u32],
    observer: &mut dyn Observer,
) -> Result<(), Error> {
    run_prompt(w, s, k, pool, tokens, false, observer).map(|_| ())
}

/// Runs `tokens` (at most `max_batch`) through the model at positions
/// `state.pos ..` of slot 0 and advances `state.pos`. Returns the logits:
/// the last token's row, or one row per token when the state keeps all
/// logits.
pub fn forward<'s, P: Parallel>(
    w: &Weights,
    s: &'s mut State,
    k: &Kernels,
    pool: &P,
    tokens: &[u32],
) -> Result<&'s [f32], Error> {
    run_prompt(w, s, k, pool, tokens, true, &mut NoObserver)
}

/// The image side of a Qwen3-VL forward step: every row's M-RoPE position,
/// and for the image rows their embedding and DeepStack features (from
/// [`super::vision::encode_image`]).
#[derive(Clone, Copy, Debug)]
pub struct Multimodal<'a> {
    /// (m): the (t, h, w) rotary position of each row of the step.
    pub positions: &'a [[u32; 3]],
    /// (m): each row's index into `embeds`, or [`TEXT_ROW`] for a text token.
    pub image_rows: &'a [u32],
    /// (image tokens, hidden): replace the `<|image_pad|>` embeddings.
    pub embeds: &'a [f32],
    /// (levels, image tokens, hidden): level `l` is added to the image rows
    /// of the residual stream after decoder layer `l`.
    pub deepstack: &'a [f32],
}

/// A row of [`Multimodal::image_rows`] that is a text token.
pub const TEXT_ROW: u32 = u32::MAX;

/// `tokens` of slot 0 at `state.pos ..` with the weight copy their count
/// selects, `observer` shown each matrix's input; advances `state.pos`.
fn run_prompt<'s, P: Parallel>(
    w: &Weights,
    s: &'s mut State,
    k: &Kernels,
    pool: &P,
    tokens: &[u32],
    logits: bool,
    observer: &mut dyn Observer,
) -> Result<&'s [f32], Error> {
    let step = Step {
        rows: Rows::Run {
            slot: 0,
            pos: s.pos,
            tokens,
            last_logits: true,
            then: &[],
        },
        copy: w.routing.for_batch(tokens.len()),
        images: None,
        logits,
        interrupt: None,
    };
    let n = forward_step_observed(w, s, k, pool, &step, observer)?;
    s.pos += tokens.len();
    Ok(&s.logits[..n * w.cfg.vocab_size as usize])
}

/// Runs `rows` (1 to `max_batch`, any mix of slots) through the model,
/// multiplying the weight copy `copy`, and returns the logits of the rows
/// with `logits` set (see [`forward_step`]). `copy`: `w.routing.decode`
/// for a decode step of several sequences (the copy `forward` reads for one
/// token, so every row equals a single-sequence decode step bit for bit),
/// or `w.routing.for_batch(n)` for rows that `forward` would run as a batch
/// of `n` (prefill).
pub fn forward_rows<'s, P: Parallel>(
    w: &Weights,
    s: &'s mut State,
    k: &Kernels,
    pool: &P,
    rows: &[Row],
    copy: WeightCopy,
    images: Option<&Multimodal>,
) -> Result<&'s [f32], Error> {
    let step = Step {
        rows: Rows::Explicit(rows),
        copy,
        images,
        logits: rows.iter().any(|r| r.logits),
        interrupt: None,
    };
    forward_step(w, s, k, pool, &step)
}

/// Largest head_dim / 2 (the config allows head_dim up to 1024).
const MAX_HALF: usize = 512;

/// Which of (t, h, w) drives rotary frequency `j` with interleaved M-RoPE
/// sections `sec`: h for `j % 3 == 1, j < 3 sec[1]`, w for `j % 3 == 2,
/// j < 3 sec[2]`, else t.
pub fn mrope_axis(sec: [u32; 3], j: usize) -> usize {
    if j % 3 == 1 && j < 3 * sec[1] as usize {
        1
    } else if j % 3 == 2 && j < 3 * sec[2] as usize {
        2
    } else {
        0
    }
}

/// What [`row_rope`] reads of the state: the rotary tables, (max_seq,
/// head_dim / 2) each, and every slot's position offset.
struct Rotary<'a> {
    rope_cos: &'a [f32],
    rope_sin: &'a [f32],
    rope_delta: &'a [i64],
    max_seq: usize,
}

/// The cos/sin of row `t` (`row`): from the table at the rotary position
/// (its position plus its slot's `rope_delta`, or the step's M-RoPE
/// positions), each frequency at its section's axis.
#[cfg_attr(kestrel_shipped, optimize(speed))]
fn row_rope(
    w: &Weights,
    s: &Rotary,
    mm: Option<&Multimodal>,
    t: usize,
    row: &Row,
    out: &mut [f32; 2 * MAX_HALF],
) -> Result<(), Error> {
    let half = w.cfg.rotary_dim as usize / 2;
    let limit = s.max_seq;
    let pos3 = match mm {
        Some(mm) => mm.positions[t].map(|x| x as usize),
        None => {
            let delta = s.rope_delta.get(row.slot).copied().unwrap_or(0);
            let r = (row.pos as i64).checked_add(delta).unwrap_or(-1);
            let r = usize::try_from(r).unwrap_or(usize::MAX);
            [r; 3]
        }
    };
    if let Some(&bad) = pos3.iter().find(|&&x| x >= limit) {
        return Err(Error::OutOfRange {
            what: "rotary position",
            value: bad,
            max: limit - 1,
        });
    }
    if pos3[0] == pos3[1] && pos3[1] == pos3[2] {
        // One position on every axis (text, and every non-VL model): the
        // table's row as it is.
        let at = pos3[0] * half;
        out[..half].copy_from_slice(&s.rope_cos[at..at + half]);
        out[MAX_HALF..MAX_HALF + half].copy_from_slice(&s.rope_sin[at..at + half]);
        return Ok(());
    }
    let sec = w.cfg.mrope_section;
    for j in 0..half {
        let at = pos3[mrope_axis(sec, j)] * half + j;
        out[j] = s.rope_cos[at];
        out[MAX_HALF + j] = s.rope_sin[at];
    }
    Ok(())
}

/// `out = rmsnorm(x) * weight` for every `h`-wide row of `x` (rows, h),
/// the rows split over the pool.
#[cfg_attr(kestrel_shipped, optimize(speed))]
fn norm_rows<P: Parallel>(pool: &P, out: &mut [f32], x: &[f32], h: usize, weight: &[u8], eps: f32) {
    rows_parallel(pool, out, h, &|first, part| {
        let src = &x[first * h..first * h + part.len()];
        for (dst, src) in part.chunks_exact_mut(h).zip(src.chunks_exact(h)) {
            ops::rmsnorm(dst, src, weight, eps);
        }
    });
}

/// [`forward_step`] showing `observer` each matrix's input (and the final
/// norm's rows when it asks); returns the number of logit rows written (0
/// without `step.logits`).
#[cfg_attr(kestrel_shipped, optimize(speed))]
pub fn forward_step_observed<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    step: &Step,
    observer: &mut dyn Observer,
) -> Result<usize, Error> {
    let Step {
        rows,
        copy,
        images: mm,
        logits,
        interrupt,
    } = *step;
    let cx = Exec { kernels: k, pool };
    let cfg = &w.cfg;
    let m = rows.len();
    let levels = cfg.vision.map_or(0, |v| v.deepstack().len());
    if let Some(mm) = mm {
        let h = cfg.hidden_size as usize;
        let tokens_in = mm.embeds.len() / h;
        let ok = mm.positions.len() == m
            && mm.image_rows.len() == m
            && mm.embeds.len() == tokens_in * h
            && mm.deepstack.len() == levels * tokens_in * h
            && mm
                .image_rows
                .iter()
                .all(|&r| r == TEXT_ROW || (r as usize) < tokens_in);
        if !ok {
            return Err(Error::SizeMismatch {
                what: "multimodal rows (positions, image rows, embeddings, deepstack)",
                expected: m,
                actual: mm.positions.len(),
            });
        }
    }
    if m == 0 || m > s.opts.max_batch {
        return Err(Error::OutOfRange {
            what: "tokens in one forward step",
            value: m,
            max: s.opts.max_batch,
        });
    }
    let all_logits = s.opts.all_logits;
    let mut logit_rows = 0usize;
    let mut need = 0usize;
    for t in 0..m {
        let r = rows.get(t, all_logits);
        need = need.max(r.pos.saturating_add(1));
        if r.slot >= s.opts.slots {
            return Err(Error::OutOfRange {
                what: "sequence slot",
                value: r.slot,
                max: s.opts.slots - 1,
            });
        }
        logit_rows += usize::from(r.logits);
    }
    if need > s.opts.max_seq {
        return Err(Error::ContextFull {
            need,
            max: s.opts.max_seq,
        });
    }
    let logit_cap = s.opts.logit_rows();
    if logits && logit_rows > logit_cap {
        return Err(Error::OutOfRange {
            what: "rows with logits in one step",
            value: logit_rows,
            max: logit_cap,
        });
    }
    let layers = cfg.num_layers as usize;
    let h = cfg.hidden_size as usize;
    let hd = cfg.head_dim as usize;
    let rot = cfg.rotary_dim as usize;
    let (q_dim, kv_dim) = (cfg.q_dim(), cfg.kv_dim());
    let qkv_rows = cfg.qkv_rows();
    let eps = cfg.rms_norm_eps as f32;
    // Qwen3.5: what each slot's Gated DeltaNet states will hold after the
    // step (they hold nothing usable while it runs).

    // x: (m, hidden) <- embedding rows (an image's rows from the vision
    // tower).
    for t in 0..m {
        let id = rows.get(t, all_logits).token;
        let row = &mut s.x[t * h..(t + 1) * h];
        if let Some(img) = mm
            .map(|mm| (mm, mm.image_rows[t]))
            .filter(|m| m.1 != TEXT_ROW)
        {
            let (mm, r) = (img.0, img.1 as usize);
            row.copy_from_slice(&mm.embeds[r * h..(r + 1) * h]);
            continue;
        }
        w.embedding_row(id, row)?;
    }

    // Qwen3.5: what each slot's Gated DeltaNet states will hold after the
    // step (they hold nothing usable while it runs, so a cancel is seen
    // only here, before any of them changes).
    let delta = cfg.linear.map(|c| c.shape());
    let recurrent = match &delta {
        Some(_) if interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) => {
            return Err(Error::Cancelled)
        }
        Some(shape) => Some(recurrent_begin(w, shape, s, rows)?),
        None => None,
    };
    for l in 0..cfg.num_layers as usize {
        if delta.is_none() && interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(Error::Cancelled);
        }
        let lw: &LayerWeights = w.layer(l, copy)?;

        // xb = rmsnorm(x): the mixer's input.
        norm_rows(
            pool,
            &mut s.xb[..m * h],
            &s.x[..m * h],
            h,
            lw.attn_norm,
            eps,
        );
        if let Some(lin) = &lw.linear {
            // --- Gated DeltaNet (Qwen3.5) ---
            // qkvz (m, conv + value) = Wqkvz xb; ba (m, 2 value heads) =
            // Wba xb; then each row in order through its slot's window and
            // state into att (m, value); x += Wout att.
            observer.observe(l, Input::LinIn, &s.xb[..m * h]);
            cx.linear_fusable(&lin.qkvz, s.xb, m, &mut s.scratch, s.att, s.qkv)?;
            cx.linear(&lin.ba, s.xb, m, &mut s.scratch, Epilogue::Store, s.hb)?;
            if let (Some(shape), Some(plan)) = (&delta, &recurrent) {
                delta_rows(w, shape, s, k, pool, lin, l, rows, &plan.record);
            }
            let vlen = delta.map_or(0, |d| d.value_len());
            observer.observe(l, Input::LinOut, &s.att[..m * vlen]);
            cx.linear(&lin.out, s.att, m, &mut s.scratch, Epilogue::Add, s.x)?;
        } else {
            // --- attention ---
            // qkv (m, q_dim + 2 kv_dim) = Wqkv xb (+ bias)
            observer.observe(l, Input::Qkv, &s.xb[..m * h]);
            // s.att is free until attention fills it: a split QKV's parts
            // land there first.
            cx.linear_fusable(&lw.qkv, s.xb, m, &mut s.scratch, s.att, s.qkv)?;
            // Per row of qkv: the bias, the q/k norms and the rotary step (the
            // rows split over the pool).
            let rotary = Rotary {
                rope_cos: s.rope_cos,
                rope_sin: s.rope_sin,
                rope_delta: &s.rope_delta,
                max_seq: s.opts.max_seq,
            };
            try_rows_parallel(
                pool,
                &mut s.qkv[..m * qkv_rows],
                qkv_rows,
                &|first, part| {
                    let mut rope = [0f32; 2 * MAX_HALF];
                    for (i, row) in part.chunks_exact_mut(qkv_rows).enumerate() {
                        let t = first + i;
                        row_rope(w, &rotary, mm, t, &rows.get(t, all_logits), &mut rope)?;
                        let (cos, sin) = (&rope[..rot / 2], &rope[MAX_HALF..MAX_HALF + rot / 2]);
                        if let Some(b) = lw.qkv_bias {
                            for (j, v) in row.iter_mut().enumerate() {
                                *v += ops::f32_at(b, j);
                            }
                        }
                        let (q, kv) = row.split_at_mut(q_dim);
                        for head in q.chunks_exact_mut(hd) {
                            if let Some(n) = lw.q_norm {
                                ops::rmsnorm_in_place(head, n, eps);
                            }
                            ops::rope(&mut head[..rot], cos, sin);
                        }
                        for head in kv[..kv_dim].chunks_exact_mut(hd) {
                            if let Some(n) = lw.k_norm {
                                ops::rmsnorm_in_place(head, n, eps);
                            }
                            ops::rope(&mut head[..rot], cos, sin);
                        }
                    }
                    Ok(())
                },
            )?;
            let kv_layer = cfg.layer_slot(l);
            for t in 0..m {
                let Row { slot, pos: p, .. } = rows.get(t, all_logits);
                let kv = &s.qkv[t * qkv_rows + q_dim..(t + 1) * qkv_rows];
                // Cache: (slot, attention layer, seq, kv_dim).
                let at = ((slot * cfg.kv_layers() + kv_layer) * s.opts.max_seq + p) * kv_dim;
                s.k_cache.store(at, &kv[..kv_dim]);
                s.v_cache.store(at, &kv[kv_dim..2 * kv_dim]);
            }
            // att (m, q_dim): causal attention of each token over the cache.
            attention(w, s, k, pool, l, rows)?;
            if cfg.attn_gate() {
                // Qwen3.5: att *= sigmoid(gate), the gate after V in each row.
                for t in 0..m {
                    let gate = &s.qkv[t * qkv_rows + q_dim + 2 * kv_dim..(t + 1) * qkv_rows];
                    for (a, &g) in s.att[t * q_dim..(t + 1) * q_dim].iter_mut().zip(gate) {
                        *a *= 1.0 / (1.0 + libm::expf(-g));
                    }
                }
            }
            // x += Wo att
            observer.observe(l, Input::O, &s.att[..m * q_dim]);
            cx.linear(&lw.o, s.att, m, &mut s.scratch, Epilogue::Add, s.x)?;
        }

        // --- feed-forward ---
        norm_rows(pool, &mut s.xb[..m * h], &s.x[..m * h], h, lw.ffn_norm, eps);
        if let Some(experts) = &lw.moe {
            super::moe::ffn(&cx, experts, s, l, m, observer)?;
        } else {
            // hb (m, ffn) = swiglu(Wgate_up xb), applied as the rows come out
            observer.observe(l, Input::GateUp, &s.xb[..m * h]);
            cx.linear(&lw.gate_up, s.xb, m, &mut s.scratch, Epilogue::SwiGlu, s.hb)?;
            // x += Wdown hb
            observer.observe(l, Input::Down, &s.hb[..m * cfg.ffn_size as usize]);
            cx.linear(&lw.down, s.hb, m, &mut s.scratch, Epilogue::Add, s.x)?;
        }

        // Qwen3-VL DeepStack: image rows += level-l features.
        if let Some(mm) = mm.filter(|_| l < levels) {
            let images = mm.embeds.len() / h;
            for (t, &r) in mm.image_rows.iter().enumerate() {
                if r != TEXT_ROW {
                    let at = (l * images + r as usize) * h;
                    ops::add_in_place(&mut s.x[t * h..(t + 1) * h], &mm.deepstack[at..at + h]);
                }
            }
        }
    }

    if let Some(plan) = recurrent {
        s.recurrent_pos = plan.after;
        for (slot, &(base, n)) in plan.record.iter().enumerate() {
            if n > 0 {
                s.verify[slot] = (base, n);
            }
        }
    }
    if observer.observes_output() {
        let norm = w.output_norm();
        for t in 0..m {
            ops::rmsnorm(
                &mut s.xb[t * h..(t + 1) * h],
                &s.x[t * h..(t + 1) * h],
                norm,
                eps,
            );
        }
        observer.observe(layers, Input::Output, &s.xb[..m * h]);
    }
    if !logits {
        return Ok(0);
    }
    // Final norm into xb (logit_rows, hidden), packed in row order, then the
    // lm_head over those rows.
    let norm = w.output_norm();
    let mut j = 0;
    for t in 0..m {
        if rows.get(t, all_logits).logits {
            let src = t * h;
            ops::rmsnorm(&mut s.xb[j * h..(j + 1) * h], &s.x[src..src + h], norm, eps);
            j += 1;
        }
    }
    let head = w.output(copy);
    cx.linear(
        &head,
        s.xb,
        logit_rows,
        &mut s.scratch,
        Epilogue::Store,
        s.logits,
    )?;
    Ok(logit_rows)
}

/// What a step does to each slot's Gated DeltaNet states.
struct RecurrentPlan {
    /// The tokens each slot's states hold after the step.
    after: [usize; MAX_SLOTS],
    /// Per slot: (its first row's position, its rows) when the step
    /// records them (2 to `1 + draft` explicit rows: a verify step's; never
    /// a prompt chunk's own slot), else 0 rows.
    record: [(usize, usize); MAX_SLOTS],
}

/// Qwen3.5: checks that each slot's rows continue what its Gated DeltaNet
/// states hold (`s.recurrent_pos`), in row order, or start the slot anew
/// at position 0 (its windows and states cleared); returns what each slot
/// will hold after the step and which slots' rows the step records (their
/// states before it kept in `s.verify_base`), and marks the step's slots
/// [`RECURRENT_LOST`], their records gone, until it ends (a step that
/// fails part-way leaves them so).
fn recurrent_begin(
    w: &Weights,
    shape: &DeltaShape,
    s: &mut State,
    rows: Rows,
) -> Result<RecurrentPlan, Error> {
    let nlin = w.cfg.linear_layers();
    let mut after = s.recurrent_pos;
    let mut record = [(0usize, 0usize); MAX_SLOTS];
    // A prompt chunk's slot: its rows are never drafts (verify steps are
    // explicit rows, alone or riding along a chunk as `then`).
    let prompt_slot = match rows {
        Rows::Run { slot, .. } => Some(slot),
        Rows::Explicit(_) => None,
    };
    let mut seen = 0u64;
    let mut fresh = 0u64;
    let mut rewinds = 0u64;
    for t in 0..rows.len() {
        let r = rows.get(t, false);
        let bit = 1u64 << r.slot;
        // Rows from before the snapshot's end rewrite what it held.
        if seen & bit == 0 && r.pos < s.snapshot_pos[r.slot] {
            rewinds |= bit;
        }
        if seen & bit == 0 && r.pos == 0 {
            after[r.slot] = 0;
            fresh |= bit;
        }
        if seen & bit == 0 {
            record[r.slot] = (r.pos, 0);
        }
        record[r.slot].1 += 1;
        if r.pos != after[r.slot] {
            return Err(Error::RecurrentState {
                slot: r.slot,
                pos: r.pos,
                holds: after[r.slot],
            });
        }
        after[r.slot] += 1;
        seen |= bit;
    }
    for (slot, rec) in record.iter_mut().enumerate() {
        if fresh >> slot & 1 == 1 {
            let (wl, sl) = (shape.window_len(), shape.state_len());
            s.conv_windows[slot * nlin * wl..(slot + 1) * nlin * wl].fill(0.0);
            s.recurrent[slot * nlin * sl..(slot + 1) * nlin * sl].fill(0.0);
        }
        if rewinds >> slot & 1 == 1 {
            s.snapshot_pos[slot] = 0;
        }
        if seen >> slot & 1 == 0 {
            continue;
        }
        // A slot's 2 to 1 + draft explicit rows (a verify step's) are
        // recorded, with the states before them, for `recurrent_settle`;
        // a prompt chunk's are not (its tokens are kept whatever follows).
        if (2..=s.opts.draft + 1).contains(&rec.1)
            && prompt_slot != Some(slot)
            && !s.verify_base.is_empty()
        {
            s.copy_recurrent(slot, true, true);
        } else {
            rec.1 = 0;
        }
        s.recurrent_pos[slot] = RECURRENT_LOST;
        s.verify[slot] = (0, 0);
    }
    Ok(RecurrentPlan { after, record })
}

/// Qwen3.5 after a verify step: brings slot `slot`'s Gated DeltaNet
/// windows and states back to holding its first `pos` tokens when the
/// step fed rows past them (drafts the sampler dropped): the states
/// before the step, then the step's first `pos - base` rows replayed
/// from their records through the same kernels (the same bits as the
/// step computed for them). Returns whether the states hold `pos` tokens
/// (false, nothing changed: `pos` is outside the last verify step's rows).
pub fn recurrent_settle(w: &Weights, s: &mut State, k: &Kernels, slot: usize, pos: usize) -> bool {
    let Some(shape) = w.cfg.linear.map(|c| c.shape()) else {
        return true;
    };
    let (Some(&holds), Some(&(base, n))) = (s.recurrent_pos.get(slot), s.verify.get(slot)) else {
        return false;
    };
    if holds == pos {
        return true;
    }
    if n == 0 || pos < base || pos > base + n || slot >= s.opts.slots {
        return false;
    }
    s.copy_recurrent(slot, true, false);
    let nlin = w.cfg.linear_layers();
    let (wl, sl, rec) = (shape.window_len(), shape.state_len(), shape.record_len());
    let (conv, vh, dk, dv) = (
        shape.conv_channels(),
        shape.value_heads,
        shape.key_dim,
        shape.value_dim,
    );
    let key = shape.key_heads * dk;
    let per_cell = (s.opts.draft + 1) * rec;
    let out = &mut s.scratch.tmp[..dv];
    for cell in slot * nlin..(slot + 1) * nlin {
        let window = &mut s.conv_windows[cell * wl..(cell + 1) * wl];
        let state = &mut s.recurrent[cell * sl..(cell + 1) * sl];
        let records = &s.verify_rows[cell * per_cell..(cell + 1) * per_cell];
        for r in records.chunks_exact(rec).take(pos - base) {
            let (input, rest) = r.split_at(conv);
            let (qkv, gates) = rest.split_at(conv);
            deltanet::window_push(&shape, window, input);
            for (h, st) in state.chunks_exact_mut(dk * dv).enumerate() {
                let kh = shape.key_head_of(h);
                deltanet::head_step(
                    k,
                    st,
                    &qkv[kh * dk..(kh + 1) * dk],
                    &qkv[key + kh * dk..key + (kh + 1) * dk],
                    &qkv[2 * key + h * dv..2 * key + (h + 1) * dv],
                    gates[vh + h],
                    gates[h],
                    out,
                );
            }
        }
    }
    s.recurrent_pos[slot] = pos;
    s.verify[slot] = (0, 0);
    true
}

/// Gated DeltaNet layer `l` for the step's rows: each row's projections
/// (`s.qkv`: q, k, v, z; `s.hb`: b, a) through its slot's window and state
/// into `s.att` (m, value_heads x value_dim). Each row in order: its
/// convolution, gates and normalised q and k; then per slot, its rows in
/// order through the delta rule, the value heads split over the pool
/// (each head's state and output one part's; the bits do not depend on
/// the split), into `s.scratch.tmp` head-major (value_heads, m,
/// value_dim); then each row's gated norm. The rows of a slot `record`
/// names (a verify step) leave their record in `s.verify_rows`
/// ([`DeltaShape::record_len`]) for [`recurrent_settle`].
#[allow(clippy::too_many_arguments)]
fn delta_rows<P: Parallel>(
    w: &Weights,
    shape: &DeltaShape,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    lin: &LinearLayer,
    l: usize,
    rows: Rows,
    record: &[(usize, usize); MAX_SLOTS],
) {
    let cfg = &w.cfg;
    let m = rows.len();
    let (wl, sl) = (shape.window_len(), shape.state_len());
    let (rec, per_cell) = (shape.record_len(), (s.opts.draft + 1) * shape.record_len());
    let (conv, vlen) = (shape.conv_channels(), shape.value_len());
    let (vh, dk, dv) = (shape.value_heads, shape.key_dim, shape.value_dim);
    let (width, vh2, key) = (conv + vlen, 2 * vh, shape.key_heads * dk);
    let at = |slot: usize| slot * cfg.linear_layers() + cfg.layer_slot(l);
    let mut nth = [0usize; MAX_SLOTS];
    for t in 0..m {
        let slot = rows.get(t, false).slot;
        let cell = at(slot);
        let qkv = &mut s.qkv[t * width..t * width + conv];
        // A verify row's record: its convolution input, then (below) what
        // the delta rule takes.
        let j = nth[slot];
        nth[slot] += 1;
        let mut recorded = (record[slot].1 > 0).then(|| {
            let at = cell * per_cell + j * rec;
            &mut s.verify_rows[at..at + rec]
        });
        if let Some(r) = recorded.as_deref_mut() {
            r[..conv].copy_from_slice(qkv);
        }
        deltanet::conv_step(
            shape,
            &mut s.conv_windows[cell * wl..(cell + 1) * wl],
            lin.conv,
            qkv,
        );
        deltanet::gates(
            &mut s.hb[t * vh2..(t + 1) * vh2],
            lin.decay_rate,
            lin.dt_bias,
        );
        let (q, rest) = qkv.split_at_mut(key);
        deltanet::normalize_qk(shape, q, &mut rest[..key]);
        if let Some(r) = recorded {
            r[conv..2 * conv].copy_from_slice(qkv);
            r[2 * conv..].copy_from_slice(&s.hb[t * vh2..(t + 1) * vh2]);
        }
    }
    let out = &mut s.scratch.tmp[..m * vlen];
    let (qkv, hb) = (&*s.qkv, &*s.hb);
    let per = vh.div_ceil(pool.threads().clamp(1, MAX_PARTS).min(vh));
    let mut seen = [false; MAX_SLOTS];
    for t0 in 0..m {
        let slot = rows.get(t0, false).slot;
        if core::mem::replace(&mut seen[slot], true) {
            continue;
        }
        let cell = at(slot);
        let state = &mut s.recurrent[cell * sl..(cell + 1) * sl];
        let mut parts: heapless::Vec<(usize, &mut [f32], &mut [f32]), MAX_PARTS> = state
            .chunks_mut(per * dk * dv)
            .zip(out.chunks_mut(per * m * dv))
            .enumerate()
            .map(|(i, (st, o))| (i * per, st, o))
            .collect();
        pool.for_each_mut(&mut parts, &|_, (h0, st, o)| {
            let heads = st.chunks_exact_mut(dk * dv).zip(o.chunks_exact_mut(m * dv));
            for (h, (st, o)) in heads.enumerate().map(|(j, x)| (*h0 + j, x)) {
                let kh = shape.key_head_of(h);
                for t in (t0..m).filter(|&t| rows.get(t, false).slot == slot) {
                    let row = &qkv[t * width..(t + 1) * width];
                    deltanet::head_step(
                        k,
                        st,
                        &row[kh * dk..(kh + 1) * dk],
                        &row[key + kh * dk..key + (kh + 1) * dk],
                        &row[2 * key + h * dv..2 * key + (h + 1) * dv],
                        hb[t * vh2 + vh + h],
                        hb[t * vh2 + h],
                        &mut o[t * dv..(t + 1) * dv],
                    );
                }
            }
        });
    }
    for t in 0..m {
        let att = &mut s.att[t * vlen..(t + 1) * vlen];
        for (h, a) in att.chunks_exact_mut(dv).enumerate() {
            a.copy_from_slice(&out[(h * m + t) * dv..(h * m + t + 1) * dv]);
        }
        let z = &s.qkv[t * width + conv..(t + 1) * width];
        deltanet::gated_norm(shape, att, z, lin.norm, cfg.rms_norm_eps as f32);
    }
}

/// The query heads `h0..h1` of one attention part: its work space and
/// its output, (heads, m, head_dim) head-major.
struct HeadRange<'a> {
    h0: usize,
    h1: usize,
    /// (h1 - h0) x BLOCK_TOKENS query rows' work space
    /// ([`crate::state::attention_work_per_row`] each).
    work: &'a mut [f32],
    /// (h1 - h0, m, head_dim) outputs.
    out: &'a mut [f32],
}

/// Causal grouped-query attention for the step's rows: row `t` at position
/// `pos_t` of slot `slot_t` attends over positions `0..=pos_t` of its slot's
/// cache; query head `h` reads kv head `h / (heads / kv_heads)`. The heads
/// of one kv head for a run of up to [`BLOCK_TOKENS`] consecutive rows of
/// the same slot are one block of [`attend::attend`] (each row's result is
/// the same whatever block it is in). The heads are split over the pool's
/// threads, in whole kv groups when there are at least as many groups as
/// threads; each output element is computed by one thread in a fixed
/// order, so results do not depend on the split or the grouping.
#[cfg_attr(kestrel_shipped, optimize(speed))]
fn attention<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    l: usize,
    rows: Rows,
) -> Result<(), Error> {
    let m = rows.len();
    let all_logits = s.opts.all_logits;
    let layers = w.cfg.kv_layers();
    let l = w.cfg.layer_slot(l);
    let cfg = &w.cfg;
    let hd = cfg.head_dim as usize;
    let heads = cfg.num_heads as usize;
    let (q_dim, kv_dim) = (cfg.q_dim(), cfg.kv_dim());
    let qkv_rows = cfg.qkv_rows();
    let group = heads / cfg.num_kv_heads as usize;
    let scale = 1.0 / libm::sqrtf(hd as f32);
    let max_seq = s.opts.max_seq;
    let per_row = attention_work(hd)?;
    // A slot's keys and values of this layer: (seq, kv_dim).
    let region = |slot: usize| {
        let at = (slot * layers + l) * max_seq * kv_dim;
        at..at + max_seq * kv_dim
    };
    let (k_cache, v_cache) = (&s.k_cache, &s.v_cache);
    // Outputs (heads, m, head_dim): for one token that is `att` itself.
    let out_all: &mut [f32] = if m == 1 {
        &mut s.att[..q_dim]
    } else {
        &mut s.scratch.tmp[..m * q_dim]
    };
    let parts = pool.threads().clamp(1, MAX_PARTS).min(heads);
    // Split in units of whole kv groups when there are enough of them.
    let kv_heads = heads / group;
    let (units, per_unit) = if parts <= kv_heads {
        (kv_heads, group)
    } else {
        (heads, 1)
    };
    let mut items: heapless::Vec<HeadRange<'_>, MAX_PARTS> = heapless::Vec::new();
    let mut work_rest: &mut [f32] = s.scores;
    let mut out_rest = out_all;
    for p in 0..parts {
        let (h0, h1) = (
            units * p / parts * per_unit,
            units * (p + 1) / parts * per_unit,
        );
        let (work, rest) =
            core::mem::take(&mut work_rest).split_at_mut((h1 - h0) * BLOCK_TOKENS * per_row);
        work_rest = rest;
        let (out, rest) = core::mem::take(&mut out_rest).split_at_mut((h1 - h0) * m * hd);
        out_rest = rest;
        let _ = items.push(HeadRange { h0, h1, work, out });
    }
    let qkv: &[f32] = s.qkv;
    pool.for_each_mut(&mut items, &|_, part| {
        // The part's heads of one kv head at a time: heads h..hb.
        let mut h = part.h0;
        while h < part.h1 {
            let kv = h / group;
            let hb = ((kv + 1) * group).min(part.h1);
            let g = hb - h;
            let mut t0 = 0;
            while t0 < m {
                // Rows t0..t1: consecutive rows of one slot.
                let slot = rows.get(t0, all_logits).slot;
                let mut positions = [0usize; BLOCK_TOKENS];
                let mut t1 = t0;
                while t1 < m && t1 - t0 < BLOCK_TOKENS {
                    let row = rows.get(t1, all_logits);
                    if row.slot != slot {
                        break;
                    }
                    positions[t1 - t0] = row.pos;
                    t1 += 1;
                }
                let block = (t1 - t0) * g;
                let mut work = attend::Work::carve(part.work, block, hd);
                // Block row b * g + i: token t0 + b, head h + i.
                for (b, qs) in work.qs.chunks_exact_mut(g * hd).take(t1 - t0).enumerate() {
                    let at = (t0 + b) * qkv_rows + h * hd;
                    qs.copy_from_slice(&qkv[at..at + g * hd]);
                }
                let cached = attend::Cached {
                    keys: k_cache.view(region(slot)).from(kv * hd),
                    values: v_cache.view(region(slot)).from(kv * hd),
                    stride: kv_dim,
                };
                let len = |r: usize| positions[r / g] + 1;
                attend::attend(k, cached, hd, scale, block, &len, &mut work);
                for (r, o) in work.out.chunks_exact(hd).take(block).enumerate() {
                    let (b, i) = (r / g, r % g);
                    // Head h + i, token t0 + b at ((h + i - h0) * m + t) * hd.
                    let at = ((h + i - part.h0) * m + t0 + b) * hd;
                    part.out[at..at + hd].copy_from_slice(o);
                }
                t0 = t1;
            }
            h = hb;
        }
    });
    drop(items);
    if m > 1 {
        // (heads, m, head_dim) -> (m, heads * head_dim)
        for h in 0..heads {
            for t in 0..m {
                let src = &s.scratch.tmp[(h * m + t) * hd..(h * m + t + 1) * hd];
                s.att[t * q_dim + h * hd..t * q_dim + (h + 1) * hd].copy_from_slice(src);
            }
        }
    }
    Ok(())
}
