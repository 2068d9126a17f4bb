//! The one generation path: the per-sequence policy every caller shares.
//!
//! * [`StopSet`]: the tokens that end an answer.
//! * The prefill plan ([`prefill_chunks`], [`prompt_copy`]): a prompt runs
//!   in chunks of [`PREFILL_CHUNK`] tokens from its first token, each chunk
//!   multiplying the weight copy its length selects (a one-token chunk reads
//!   the decode copy); [`prefill`] runs it for one sequence slot, with
//!   images (Qwen3-VL: M-RoPE positions, image rows, DeepStack, and the
//!   slot's `rope_delta` moved for the tokens that follow);
//!   [`prefill_some`] a few chunks at a time; [`prefill_turn`] the share
//!   of one server turn: the whole prompt when no stream waits, else one
//!   chunk with the streams' decode rows riding along.
//! * [`sample_next`]: sample one row and decide whether the answer ends
//!   (an end token, the length limit, a full context).
//! * [`Driver`]: the sequence driver of K answers decoding together, each
//!   in its slot of one state: drafts ([`Streams::draft`]), the step's rows,
//!   one forward step of the decode copy, and the acceptance of each
//!   slot's rows (a drafted token kept iff the sampler picks it again).
//!   The server's scheduler drives its streams with it and keeps only
//!   admission, queues and streaming.
//! * [`Generator`]: the driver's K = 1 case (`kestrel run`, `kestrel
//!   chat`, the firmware host): feed a prompt, then sample, stream text and
//!   feed each token until the answer ends.
//!
//! The server calls the same [`prefill_turn`] (chunks of the same plan),
//! [`Driver`] and [`reusable_prefix`], so its answers equal `kestrel
//! run`'s bit for bit by construction.
//!
//! Nothing here allocates: the caller brings the state, the token history
//! and the sampler's scratch.

use crate::config::{Config, MAX_EOS};
use crate::constrain::{Matcher, Schema, Vocab};
use crate::error::Error;
use crate::kernels::Kernels;
use crate::model::forward::{forward_step, forward_step_observed, Input, Multimodal, Observer};
use crate::model::forward::{recurrent_settle, Row, Rows, Step};
use crate::model::vision::mrope_positions;
use crate::model::weights::{Routing, WeightCopy, Weights};
use crate::parallel::Parallel;
use crate::sampler::{argmax, Sampler, SamplerConfig};
use crate::speculate::{Adaptive, Drafter, NoDraft, SpecStats, Speculation, MAX_DRAFT};
use crate::state::{State, MAX_SLOTS};
use crate::tokenizer::{StreamDecoder, Tokenizer};
use core::sync::atomic::{AtomicBool, Ordering};

/// Prompt tokens per forward step: large chunks read the weights fewer
/// times per prompt token (at most [`crate::state::MAX_BATCH`]).
pub const PREFILL_CHUNK: usize = 128;

/// Most stop tokens: the config's EOS ids and two named tokens.
pub const MAX_STOPS: usize = MAX_EOS + 2;

/// The tokens that end an answer: the file's EOS ids, `<|im_end|>` and
/// `<|endoftext|>`, each once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopSet {
    ids: [u32; MAX_STOPS],
    len: usize,
}

impl StopSet {
    /// No token ends the answer (`kestrel logits`' greedy steps).
    pub const NONE: StopSet = StopSet {
        ids: [0; MAX_STOPS],
        len: 0,
    };

    /// The stop set of a model: `cfg`'s EOS ids, then `<|im_end|>` and
    /// `<|endoftext|>` when the tokenizer has them.
    pub fn new(cfg: &Config, tok: Option<&Tokenizer>) -> StopSet {
        let mut set = StopSet {
            ids: [0; MAX_STOPS],
            len: 0,
        };
        for &id in cfg.eos() {
            set.insert(id);
        }
        if let Some(tok) = tok {
            for name in ["<|im_end|>", "<|endoftext|>"] {
                if let Some(id) = tok.token_id(name) {
                    set.insert(id);
                }
            }
        }
        set
    }

    /// The set of `id` alone (what ends a constrained span, not the
    /// answer: a tool call's `</tool_call>`).
    pub fn only(id: u32) -> StopSet {
        let mut set = StopSet {
            ids: [0; MAX_STOPS],
            len: 0,
        };
        set.insert(id);
        set
    }

    /// Adds `id`; false when the set is full (it is left as it was).
    pub fn insert(&mut self, id: u32) -> bool {
        if self.contains(id) {
            return true;
        }
        match self.ids.get_mut(self.len) {
            Some(slot) => {
                *slot = id;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// Whether `id` ends an answer.
    pub fn contains(&self, id: u32) -> bool {
        self.ids().contains(&id)
    }

    /// The ids, in insertion order.
    pub fn ids(&self) -> &[u32] {
        &self.ids[..self.len]
    }
}

/// One forward step of a prompt's prefill: prompt positions `start..end`
/// (relative to the prompt's first token) with the weight copy `copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// First prompt position computed.
    pub start: usize,
    /// One past the last.
    pub end: usize,
    /// The weight copy: the one its whole plan chunk's length selects,
    /// also when a reused prefix shortens it.
    pub copy: WeightCopy,
    /// The last chunk of the prompt (its last row's logits are sampled).
    pub last: bool,
}

/// The copy the prefill plan multiplies for prompt position `p` of `n`
/// (chunks of `chunk` tokens from position 0; a chunk of one token reads
/// the decode copy).
pub fn prompt_copy(routing: &Routing, chunk: usize, p: usize, n: usize) -> WeightCopy {
    let chunk = chunk.max(1);
    let c0 = p / chunk * chunk;
    routing.for_batch((n - c0).min(chunk))
}

/// The prefill plan of a prompt of `n` tokens whose first `keep` tokens are
/// already in the cache: chunks of `chunk` tokens from position 0 (so the
/// copies are those of a prefill from scratch), the cached positions left
/// out. Yields nothing for `keep >= n`.
pub fn prefill_chunks(
    routing: Routing,
    n: usize,
    chunk: usize,
    keep: usize,
) -> impl Iterator<Item = Chunk> {
    let chunk = chunk.max(1);
    let first = keep / chunk * chunk;
    (first..n)
        .step_by(chunk)
        .map(move |c0| {
            let c1 = (c0 + chunk).min(n);
            Chunk {
                start: c0.max(keep),
                end: c1,
                copy: routing.for_batch(c1 - c0),
                last: c1 == n,
            }
        })
        .filter(|c| c.start < c.end)
}

/// How many leading positions of a cache holding `cached` (computed with
/// `copies`, one per position) a new `prompt` can keep: they match its
/// tokens, lie before `upto` (a cached image: equal placeholder ids do not
/// mean equal images), and were computed with the copy the prefill plan
/// would use for them; at least one prompt token is left to run (its
/// logits are needed). `holds`: a Qwen3.5 slot's Gated DeltaNet state
/// holds that many tokens and its snapshot the second many (0: none); a
/// recurrent state is not cut back, so the prefix is all the state holds,
/// else all the snapshot holds, else nothing.
pub fn reusable_prefix(
    routing: &Routing,
    chunk: usize,
    cached: &[u32],
    copies: &[WeightCopy],
    upto: usize,
    prompt: &[u32],
    holds: Option<(usize, usize)>,
) -> usize {
    let n = prompt.len();
    let limit = cached
        .len()
        .min(copies.len())
        .min(n.saturating_sub(1))
        .min(upto);
    let keep = (0..limit)
        .take_while(|&p| cached[p] == prompt[p] && copies[p] == prompt_copy(routing, chunk, p, n))
        .count();
    match holds {
        Some((h, _)) if keep == h => h,
        Some((_, snap)) if keep >= snap => snap,
        Some(_) => 0,
        None => keep,
    }
}

/// The images of one prompt, as the vision tower gave them, and scratch for
/// their rows' M-RoPE positions.
#[derive(Debug)]
pub struct PromptImages<'a> {
    /// Each image's merged token grid (rows, cols), in prompt order.
    pub grids: &'a [(usize, usize)],
    /// (image tokens, hidden), all images in order.
    pub embeds: &'a [f32],
    /// (levels, image tokens, hidden).
    pub deepstack: &'a [f32],
    /// (prompt tokens) scratch: each token's (t, h, w) rotary position.
    pub positions: &'a mut [[u32; 3]],
    /// (prompt tokens) scratch: each token's image row, or
    /// [`TEXT_ROW`](crate::model::forward::TEXT_ROW).
    pub image_rows: &'a mut [u32],
}

/// One prompt's prefill into one sequence slot.
#[derive(Debug)]
pub struct Prefill<'a> {
    /// The sequence slot (its KV region and `rope_delta`).
    pub slot: usize,
    /// The cache position of the prompt's first token.
    pub base: usize,
    /// The prompt's ids, each `<|image_pad|>` expanded to its image's tokens.
    pub prompt: &'a [u32],
    /// Leading prompt tokens already in the cache (prefix reuse; 0 for a
    /// fresh prompt).
    pub keep: usize,
    /// Tokens per chunk ([`PREFILL_CHUNK`] by default; at most the state's
    /// max_batch).
    pub chunk: usize,
    /// The prompt's images (Qwen3-VL), if any.
    pub images: Option<PromptImages<'a>>,
    /// Read before each layer of each chunk ([`Step::interrupt`]): set, the
    /// chunk running stops with [`Error::Cancelled`] and does not count
    /// (`keep` stays at the chunks completed).
    pub interrupt: Option<&'a AtomicBool>,
}

/// Runs a prompt's prefill plan through the model: each chunk as one
/// forward step of slot `p.slot` at positions `p.base + start ..`, the last
/// chunk's last row with logits (every chunk's rows when the state keeps
/// all logits). `on_chunk` sees each chunk and the logits it computed
/// (empty when none). With images, the rotary positions continue from the
/// slot's (`base + rope_delta`), and `rope_delta` moves by the prompt's
/// delta for the tokens that follow. Returns where the last row's logits
/// start in `s.logits` (one `vocab` row).
pub fn prefill<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    p: &mut Prefill,
    on_chunk: &mut dyn FnMut(&Chunk, &[f32]),
) -> Result<usize, Error> {
    match prefill_some(w, s, k, pool, p, usize::MAX, on_chunk)? {
        Some(at) => Ok(at),
        None => Err(Error::OutOfRange {
            what: "prefill chunks",
            value: 0,
            max: 0,
        }),
    }
}

/// [`prefill`] of at most `max_chunks` chunks of the plan (at least one):
/// `p.keep` moves past the chunks run, and `None` says chunks remain (call
/// again with the same plan); `Some` is [`prefill`]'s answer once the last
/// chunk ran. The chunks are the plan's whatever the calls, so a prompt
/// prefilled a chunk at a time between other work (the server's decode
/// steps) computes the same bits as one call; `rope_delta` moves only with
/// the last chunk.
pub fn prefill_some<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    p: &mut Prefill,
    max_chunks: usize,
    on_chunk: &mut dyn FnMut(&Chunk, &[f32]),
) -> Result<Option<usize>, Error> {
    run_plan(w, s, k, pool, p, max_chunks, &[], on_chunk).map(|r| r.prompt_logits)
}

/// What [`prefill_turn`] computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkStep {
    /// Where the prompt's last row's logits start in `s.logits` once its
    /// last chunk ran ([`prefill`]'s answer); `None` while chunks remain.
    pub prompt_logits: Option<usize>,
    /// Where the riders' logits start (one `vocab` row per rider that keeps
    /// them, in order); `None` when they did not ride (see
    /// [`prefill_turn`]) and still need a step of their own.
    pub rider_logits: Option<usize>,
}

/// A prompt's share of one turn beside other sequences (the server's
/// engine loop): without `riders` (no stream waits for a step) the rest of
/// the plan ([`prefill_some`] of every chunk); with them (other slots'
/// decode rows, `w.routing.decode`'s rows) the plan's next chunk, the
/// riders computed in the same forward step after the chunk's rows: the
/// step reads the weights once for both, and the streams wait one chunk. Every row is computed as in a step of its own
/// (rows do not mix), so the chunk gives [`prefill`]'s bits and each rider
/// a decode step's. The riders ride only when the chunk multiplies the
/// decode copy (in the `dual` mode, only a one-token chunk does), has no
/// images, and the step fits `max_batch`; else the chunk runs alone. The
/// riders must be a valid step of their own (distinct slots other than
/// `p.slot`, positions inside the context, at most `slots` rows with
/// logits with the prompt's last row): an invalid one fails the whole step.
pub fn prefill_turn<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    p: &mut Prefill,
    riders: &[Row],
    on_chunk: &mut dyn FnMut(&Chunk, &[f32]),
) -> Result<ChunkStep, Error> {
    let max_chunks = if riders.is_empty() { usize::MAX } else { 1 };
    run_plan(w, s, k, pool, p, max_chunks, riders, on_chunk)
}

/// [`prefill_some`], the first chunk run with `riders` when they can ride.
#[allow(clippy::too_many_arguments)]
fn run_plan<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    p: &mut Prefill,
    max_chunks: usize,
    riders: &[Row],
    on_chunk: &mut dyn FnMut(&Chunk, &[f32]),
) -> Result<ChunkStep, Error> {
    let n = p.prompt.len();
    if n == 0 || p.keep >= n {
        return Err(Error::OutOfRange {
            what: "prompt tokens to run (after the cached prefix)",
            value: 0,
            max: 0,
        });
    }
    if p.chunk == 0 || p.chunk > s.opts.max_batch {
        return Err(Error::OutOfRange {
            what: "prefill chunk",
            value: p.chunk,
            max: s.opts.max_batch,
        });
    }
    let slot_delta = *s.rope_delta.get(p.slot).ok_or(Error::OutOfRange {
        what: "sequence slot",
        value: p.slot,
        max: s.opts.slots - 1,
    })?;
    // Qwen3.5: a kept prefix its state has gone past goes on from the
    // snapshot at the end of the slot's last prompt (`reusable_prefix`
    // keeps exactly that much then).
    let at = p.base + p.keep;
    if w.cfg.linear.is_some() && at != s.recurrent_pos[p.slot] && at == s.snapshot_pos[p.slot] {
        s.snapshot(p.slot, false);
        s.recurrent_pos[p.slot] = at;
    }
    let mut delta = 0i64;
    if let Some(img) = p.images.as_mut() {
        let v = w.cfg.vision.ok_or(Error::BadConfig {
            what: "a prompt with images for a model without a vision tower",
        })?;
        if img.positions.len() < n || img.image_rows.len() < n {
            return Err(Error::BufferTooSmall {
                what: "M-RoPE positions and image rows",
                need: n,
                have: img.positions.len().min(img.image_rows.len()),
            });
        }
        let positions = &mut img.positions[..n];
        let image_rows = &mut img.image_rows[..n];
        delta = mrope_positions(p.prompt, v.image_token_id, img.grids, positions, image_rows)?;
        // Positions continue from the rotary position of the next token.
        let start = i64::try_from(p.base)
            .ok()
            .and_then(|b| b.checked_add(slot_delta))
            .and_then(|r| u32::try_from(r).ok())
            .ok_or(Error::Overflow {
                what: "rotary position",
            })?;
        for x in positions.iter_mut().flatten() {
            *x = x.checked_add(start).ok_or(Error::Overflow {
                what: "rotary position",
            })?;
        }
    }
    let vocab = w.cfg.vocab_size as usize;
    let mut last_rows = 0;
    let mut finished = false;
    let mut rider_logits = None;
    for (i, c) in prefill_chunks(w.routing, n, p.chunk, p.keep)
        .take(max_chunks.max(1))
        .enumerate()
    {
        let mm = p.images.as_ref().map(|img| Multimodal {
            positions: &img.positions[c.start..c.end],
            image_rows: &img.image_rows[c.start..c.end],
            embeds: img.embeds,
            deepstack: img.deepstack,
        });
        let ride = i == 0
            && !riders.is_empty()
            && mm.is_none()
            && c.copy == w.routing.decode
            && c.end - c.start + riders.len() <= s.opts.max_batch
            && riders.iter().all(|r| r.slot != p.slot);
        let then = if ride { riders } else { &[] };
        // Only the last chunk's logits are read unless the state keeps all.
        let all_logits = s.opts.all_logits;
        let chunk_logits = c.last || all_logits;
        let step = Step {
            rows: Rows::Run {
                slot: p.slot,
                pos: p.base + c.start,
                tokens: &p.prompt[c.start..c.end],
                last_logits: c.last,
                then,
            },
            copy: c.copy,
            images: mm.as_ref(),
            logits: chunk_logits || then.iter().any(|r| r.logits),
            interrupt: p.interrupt,
        };
        let logits = forward_step(w, s, k, pool, &step)?;
        // The chunk's rows come first: its last row, or all of them.
        let chunk_rows = match (chunk_logits, all_logits) {
            (false, _) => 0,
            (true, true) => c.end - c.start,
            (true, false) => 1,
        };
        let chunk_part = &logits[..(chunk_rows * vocab).min(logits.len())];
        last_rows = chunk_rows;
        if ride {
            rider_logits = Some(chunk_part.len());
        }
        on_chunk(&c, chunk_part);
        p.keep = c.end;
        finished = c.last;
    }
    if !finished {
        return Ok(ChunkStep {
            prompt_logits: None,
            rider_logits,
        });
    }
    if let Some(d) = s.rope_delta.get_mut(p.slot) {
        *d += delta;
    }
    // Qwen3.5: the state at a turn's boundary, for a follow-up that
    // renders the answer otherwise (a prompt: not the one token that
    // closes an answer).
    if w.cfg.linear.is_some() && n > 1 {
        s.snapshot(p.slot, true);
        s.snapshot_pos[p.slot] = p.base + n;
    }
    Ok(ChunkStep {
        prompt_logits: Some(last_rows.saturating_sub(1) * vocab),
        rider_logits,
    })
}

/// Why an answer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// An end token (or, decided by a server handler, a stop string).
    Stop,
    /// The token limit or a full context.
    Length,
}

impl Finish {
    /// The OpenAI API's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// Holds back text that may be the start of a stop string. Returns how many
/// leading bytes of `pending` can be sent, and whether a stop string starts
/// there (then nothing after it is sent). The server and the embedding API
/// end answers with it.
pub fn stop_scan<S: AsRef<str>>(pending: &str, stops: &[S]) -> (usize, bool) {
    let found = stops.iter().filter_map(|s| pending.find(s.as_ref())).min();
    if let Some(at) = found {
        return (at, true);
    }
    let mut keep = 0;
    for s in stops.iter().map(AsRef::as_ref) {
        for k in (1..s.len().min(pending.len() + 1)).rev() {
            if s.is_char_boundary(k) && pending.ends_with(&s[..k]) {
                keep = keep.max(k);
                break;
            }
        }
    }
    (pending.len() - keep, false)
}

/// What sampling one row decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampled {
    /// An end token: the answer is over (the token is not part of it).
    End(u32),
    /// A token of the answer; `last` when it is the final one (the token
    /// limit is reached or the cache is full), else it is fed next.
    Token {
        /// The token.
        id: u32,
        /// The answer ends after it ([`Finish::Length`]).
        last: bool,
    },
}

/// Where a sequence stands against its limits when a row is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Tokens of the answer so far (before this one).
    pub generated: usize,
    /// Most tokens of the answer.
    pub max_tokens: usize,
    /// Positions of the sequence in the KV cache.
    pub cached: usize,
    /// The cache's positions per sequence.
    pub max_seq: usize,
}

/// An answer constrained to JSON valid under a schema
/// ([`crate::constrain`]): where the output stands, the schema, the sorted
/// vocabulary, and scratch. Tokens that cannot continue a valid output get
/// no probability before any sampling setting applies; the end tokens only
/// once the JSON value is complete.
pub struct Constraint<'a> {
    /// The schema.
    pub schema: &'a Schema,
    /// The vocabulary, sorted by bytes.
    pub vocab: &'a Vocab<'a>,
    /// The output so far.
    pub progress: &'a mut Progress,
    /// Scratch: at least `MAX_TOKEN_BYTES + 1` matchers.
    pub states: &'a mut [Matcher],
    /// One bit per token of the vocabulary: the mask, then (when it has
    /// room for [`MASK_CACHE`] more) the cached masks.
    pub bits: &'a mut [u64],
    /// The states whose masks `bits` keeps.
    pub cache: &'a mut MaskCache,
    /// Without the feature `constrain`, a field no value fills: no
    /// constraint can be made, so [`sample_next`] never masks.
    #[cfg(not(feature = "constrain"))]
    unmade: core::convert::Infallible,
}

/// Masks kept per answer: a state met again (every token inside a string,
/// every item of an array of one shape) takes its mask from here.
pub const MASK_CACHE: usize = 8;

/// The states of the masks a [`Constraint`]'s `bits` keeps, the oldest
/// replaced first. The mask is a function of the state alone (the schema,
/// the vocabulary and the end tokens fixed for an answer).
#[derive(Clone, Debug)]
pub struct MaskCache {
    keys: [Matcher; MASK_CACHE],
    filled: usize,
    next: usize,
    /// Masks taken from the cache.
    pub hits: usize,
}

impl MaskCache {
    /// Empty, for answers under `schema`.
    pub fn new(schema: &Schema) -> MaskCache {
        MaskCache {
            keys: core::array::from_fn(|_| Matcher::new(schema)),
            filled: 0,
            next: 0,
            hits: 0,
        }
    }
}

/// Where a constrained answer stands.
#[derive(Clone, Debug)]
pub struct Progress {
    /// The output so far.
    pub matcher: Matcher,
    /// Steps taken.
    pub steps: usize,
    /// Steps that needed the whole vocabulary's mask (the greedy check
    /// failed, or the sampling is not greedy).
    pub masked: usize,
}

impl Progress {
    /// At the start of an answer.
    pub fn new(schema: &Schema) -> Progress {
        Progress {
            matcher: Matcher::new(schema),
            steps: 0,
            masked: 0,
        }
    }
}

impl Constraint<'_> {
    /// Whether token `id` (not an end token) continues the output.
    #[cfg(feature = "constrain")]
    fn allows(&mut self, id: u32) -> bool {
        let Some(bytes) = self.vocab.token_bytes(id) else {
            return false;
        };
        let (first, _) = self.states.split_at_mut(1);
        self.progress
            .matcher
            .accepts(self.schema, bytes, &mut first[0])
    }

    /// The token mask over the first `vocab` ids: a bit in `self.bits` for
    /// every token that can continue the output, and for the end tokens
    /// once the value is complete (or nothing else can follow). Returns
    /// the number of words of `self.bits` it wrote. `kestrel schema bench`
    /// times this.
    pub fn mask(&mut self, vocab: usize, stops: &StopSet) -> usize {
        let words = vocab.div_ceil(64).min(self.bits.len());
        let key = self.progress.matcher.mask_key(self.schema);
        let (bits, kept) = self.bits.split_at_mut(words);
        let cache = &mut *self.cache;
        let caching = kept.len() >= words * MASK_CACHE;
        if caching {
            if let Some(slot) = (0..cache.filled).find(|&k| cache.keys[k].same_state(&key)) {
                bits.copy_from_slice(&kept[slot * words..(slot + 1) * words]);
                cache.hits += 1;
                return words;
            }
        }
        let can_end = self.progress.matcher.can_end(self.schema);
        bits.fill(0);
        let mut any = false;
        let plain = self.vocab.allowed(
            self.schema,
            &self.progress.matcher,
            self.states,
            &mut |id| {
                if let Some(w) = bits.get_mut(id as usize / 64) {
                    *w |= 1 << (id % 64);
                    any = true;
                }
            },
        );
        if let Some(block) = plain {
            for (w, p) in bits.iter_mut().zip(block) {
                *w |= p;
                any |= *p != 0;
            }
        }
        for &id in stops.ids() {
            // The end only after a complete value (or when nothing else can follow).
            if can_end || !any {
                if let Some(w) = bits.get_mut(id as usize / 64) {
                    *w |= 1 << (id % 64);
                }
            }
        }
        if caching {
            let slot = cache.next;
            cache.keys[slot] = key;
            kept[slot * words..(slot + 1) * words].copy_from_slice(bits);
            cache.next = (slot + 1) % MASK_CACHE;
            cache.filled = (cache.filled + 1).min(MASK_CACHE);
        }
        words
    }

    /// Gives the tokens that cannot continue the output no probability;
    /// `Some(id)` when greedy sampling without penalties would pick `id`
    /// from the unmasked logits and it is allowed (it is then the best
    /// allowed token, found without the mask).
    #[cfg(feature = "constrain")]
    fn restrict(
        &mut self,
        cfg: &SamplerConfig,
        logits: &mut [f32],
        stops: &StopSet,
    ) -> Option<u32> {
        self.progress.steps += 1;
        if (cfg.temperature <= 0.0 || cfg.top_k == 1) && cfg.repeat_penalty == 1.0 {
            let best = crate::sampler::argmax(logits) as u32;
            let ok = if stops.contains(best) {
                self.progress.matcher.can_end(self.schema)
            } else {
                self.allows(best)
            };
            if ok {
                return Some(best);
            }
        }
        self.progress.masked += 1;
        let words = self.mask(logits.len(), stops);
        let bits = &self.bits[..words];
        // A word of 64 tokens at a time: most are all allowed or all refused.
        for (j, block) in logits.chunks_mut(64).enumerate() {
            match bits.get(j).copied().unwrap_or(0) {
                u64::MAX => {}
                0 => block.fill(f32::NEG_INFINITY),
                w => {
                    for (i, l) in block.iter_mut().enumerate() {
                        if w >> i & 1 == 0 {
                            *l = f32::NEG_INFINITY;
                        }
                    }
                }
            }
        }
        None
    }

    /// Moves past the sampled token.
    pub fn accept(&mut self, id: u32) {
        if let Some(bytes) = self.vocab.token_bytes(id) {
            for &b in bytes {
                if !self.progress.matcher.advance(self.schema, b) {
                    break;
                }
            }
        }
    }
}

/// Samples the next token from `logits` (modified: the sampler's logit
/// bias, penalties, and the constraint's mask), with `history` the
/// sequence's tokens so far, and decides whether the answer goes on.
pub fn sample_next(
    sampler: &mut Sampler,
    logits: &mut [f32],
    history: &[u32],
    candidates: &mut [u32],
    stops: &StopSet,
    limits: Limits,
    constraint: Option<&mut Constraint>,
) -> Sampled {
    sampler.bias.apply(logits);
    let id = match constraint {
        #[cfg(not(feature = "constrain"))]
        Some(c) => match c.unmade {},
        #[cfg(feature = "constrain")]
        Some(c) => {
            // Greedy sampling draws nothing from the generator: picking the
            // token here leaves the sampler as `sample` would.
            let id = match c.restrict(&sampler.cfg, logits, stops) {
                Some(id) => id,
                None => sampler.sample(logits, history, candidates),
            };
            if !stops.contains(id) {
                c.accept(id);
            }
            id
        }
        None => sampler.sample(logits, history, candidates),
    };
    if stops.contains(id) {
        return Sampled::End(id);
    }
    let last = limits.generated + 1 >= limits.max_tokens || limits.cached >= limits.max_seq;
    Sampled::Token { id, last }
}

/// How one answer ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Tokens of the answer (not counting an end token).
    pub generated: usize,
    /// Ended on an end token (else on the length limit, a full context or
    /// an interrupt).
    pub stopped: bool,
    /// The answer's last token, or the end token that ended it (0 when
    /// nothing was sampled).
    pub last: u32,
}

/// One answer decoding in a slot of the state ([`Driver`]): the token
/// sampled last, which the next step feeds, the tokens drafted after it,
/// its limits and its speculation counts.
#[derive(Clone, Copy, Debug)]
pub struct Sequence {
    /// The token sampled last: the next step feeds it (its row first).
    pub next: u32,
    /// Tokens of the answer so far (`next` among them).
    pub generated: usize,
    /// Most tokens of the answer.
    pub max_tokens: usize,
    /// The sequence drafts ([`Streams::draft`]) before each step.
    pub speculate: bool,
    /// The draft length, adapted step by step.
    pub length: Adaptive,
    /// Speculation's counts for this answer.
    pub stats: SpecStats,
    /// The tokens drafted after `next` for the coming step.
    drafts: [u32; MAX_DRAFT],
    n_drafts: usize,
}

impl Sequence {
    /// The tokens drafted after `next` for the coming step.
    pub fn drafts(&self) -> &[u32] {
        &self.drafts[..self.n_drafts]
    }
}

/// How an answer ended ([`Streams::ended`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    /// Why.
    pub finish: Finish,
    /// The end token sampled ([`Finish::Stop`]); not part of the answer.
    pub end_token: Option<u32>,
    /// The end token was the next drafted token, so its row was computed
    /// and it joined the history ([`Streams::push`]).
    pub end_fed: bool,
}

/// The sequences a [`Driver`] steps, as their owner keeps them: the token
/// history of each slot, its sampler and constraint, its draft source,
/// and where its tokens go (a terminal, a server's client).
pub trait Streams {
    /// Every token in `slot`'s KV cache, in order (not its `next`).
    fn history(&self, slot: usize) -> &[u32];
    /// Writes up to `out.len()` tokens likely to follow `slot`'s history
    /// and then `next`; returns how many.
    fn draft(&mut self, slot: usize, next: u32, out: &mut [u32]) -> Result<usize, Error>;
    /// `token`'s row was computed at the end of `slot`'s history: it
    /// joins it.
    fn push(&mut self, slot: usize, token: u32);
    /// Samples `slot`'s next token from `logits` with [`sample_next`] (the
    /// stream's sampler, constraint, stop set and history) under `limits`
    /// and hands a token of the answer to the stream; `None` when the
    /// stream is gone (the driver drops the sequence without
    /// [`Streams::ended`]).
    fn sample(&mut self, slot: usize, logits: &mut [f32], limits: Limits) -> Option<Sampled>;
    /// `slot`'s answer ended; `seq` is its last state.
    fn ended(&mut self, slot: usize, seq: &Sequence, ending: Ending);
    /// A verify step drafted `drafted` tokens for `slot` and `accepted` of
    /// them were kept; `going` is the answer when it goes on (else
    /// [`Streams::ended`] came first).
    fn verified(
        &mut self,
        _slot: usize,
        _drafted: usize,
        _accepted: usize,
        _going: Option<&Sequence>,
    ) {
    }
}

/// The sequence driver: up to `K` answers decoding together, each in its
/// own slot of one state (the server's K streams; [`Generator`] is its
/// `K = 1` case). A step is [`Driver::plan`] (each speculating sequence's
/// drafts, within its answer's and its context's room and a row budget
/// that keeps the step within `max_batch`), [`Driver::rows`] (slot by slot,
/// the token sampled last, then its drafts), one forward step of the
/// decode copy with every row's logits ([`Driver::step`]; the server may
/// let the rows ride a prompt chunk instead), and [`Driver::accept`]: each
/// slot's rows sampled in order, a drafted token kept iff the sampler picks
/// it again, the first it does not pick dropping the rest (the history,
/// and so the cache's positions, never hold it), the stop and the limits
/// decided by [`sample_next`]. Every row gives a single-row step's bits,
/// so each answer is plain decoding's at every temperature, whatever runs
/// beside it.
#[derive(Clone, Debug)]
pub struct Driver<const K: usize> {
    seqs: [Option<Sequence>; K],
    /// The state's positions per slot.
    pub max_seq: usize,
    /// Most rows of one step.
    pub max_batch: usize,
    /// Most drafted tokens per sequence and step (the state's
    /// `opts.draft`, at most [`MAX_DRAFT`]).
    pub max_draft: usize,
    /// The target's vocabulary size: a draft stops at an id it lacks.
    pub vocab: usize,
}

impl<const K: usize> Driver<K> {
    /// No sequences, for `state`'s limits and `w`'s vocabulary.
    pub fn new(w: &Weights, state: &State) -> Self {
        Driver {
            seqs: [None; K],
            max_seq: state.opts.max_seq,
            max_batch: state.opts.max_batch,
            max_draft: state.opts.draft.min(MAX_DRAFT),
            vocab: w.cfg.vocab_size as usize,
        }
    }

    /// The answer decoding in `slot`, if any.
    pub fn sequence(&self, slot: usize) -> Option<&Sequence> {
        self.seqs.get(slot).and_then(Option::as_ref)
    }

    /// How many answers are decoding.
    pub fn active(&self) -> usize {
        self.seqs.iter().flatten().count()
    }

    /// Drops `slot`'s answer (cancelled, failed, or interrupted: its
    /// `next` was never fed) and returns it.
    pub fn stop(&mut self, slot: usize) -> Option<Sequence> {
        self.seqs.get_mut(slot).and_then(Option::take)
    }

    /// Starts an answer of at most `max_tokens` tokens in `slot`, whose
    /// prompt is in its history: samples its first token from `logits`
    /// (the prompt's last row). It drafts when `speculate`, its length
    /// starting from `length`.
    pub fn start<S: Streams>(
        &mut self,
        streams: &mut S,
        slot: usize,
        logits: &mut [f32],
        max_tokens: usize,
        speculate: bool,
        length: Adaptive,
    ) {
        if slot >= K || max_tokens == 0 {
            return;
        }
        let seq = Sequence {
            next: 0,
            generated: 0,
            max_tokens,
            speculate,
            length,
            stats: SpecStats::default(),
            drafts: [0; MAX_DRAFT],
            n_drafts: 0,
        };
        self.seqs[slot] = Some(seq);
        self.sample(streams, slot, logits, None);
    }

    /// Samples `slot`'s next token from `logits`: the answer goes on with
    /// it, ends, or its stream is gone. `drafted`: the token the step fed
    /// after the sampled row (a drafted one), whose row is computed: an end
    /// token equal to it joins the history. Returns whether the answer
    /// goes on.
    fn sample<S: Streams>(
        &mut self,
        streams: &mut S,
        slot: usize,
        logits: &mut [f32],
        drafted: Option<u32>,
    ) -> bool {
        let Some(seq) = self.seqs[slot].as_mut() else {
            return false;
        };
        let limits = Limits {
            generated: seq.generated,
            max_tokens: seq.max_tokens,
            cached: streams.history(slot).len(),
            max_seq: self.max_seq,
        };
        let ending = match streams.sample(slot, logits, limits) {
            None => {
                self.seqs[slot] = None;
                return false;
            }
            Some(Sampled::Token { id, last }) => {
                seq.generated += 1;
                seq.next = id;
                if !last {
                    return true;
                }
                Ending {
                    finish: Finish::Length,
                    end_token: None,
                    end_fed: false,
                }
            }
            Some(Sampled::End(id)) => {
                let end_fed = drafted == Some(id);
                if end_fed {
                    seq.stats.accepted += 1;
                    streams.push(slot, id);
                }
                Ending {
                    finish: Finish::Stop,
                    end_token: Some(id),
                    end_fed,
                }
            }
        };
        if let Some(seq) = self.seqs[slot].take() {
            streams.ended(slot, &seq, ending);
        }
        false
    }

    /// Drafts the coming step's tokens for every speculating sequence, in
    /// slot order: as many as its adaptive length, the answer's room (the
    /// row of the answer's last token is never computed), the context's
    /// room and the step's row budget allow. A draft source that fails
    /// drafts nothing; drafts stop at an id the target lacks.
    pub fn plan<S: Streams>(&mut self, streams: &mut S) {
        let mut budget = self.max_batch.saturating_sub(self.active());
        for (slot, seq) in self.seqs.iter_mut().enumerate() {
            let Some(seq) = seq.as_mut() else {
                continue;
            };
            seq.n_drafts = 0;
            let pos = streams.history(slot).len();
            let room = seq
                .max_tokens
                .saturating_sub(seq.generated + 1)
                .min(self.max_seq.saturating_sub(pos + 1))
                .min(seq.length.n)
                .min(self.max_draft)
                .min(budget);
            if !seq.speculate || room == 0 {
                continue;
            }
            let n = streams
                .draft(slot, seq.next, &mut seq.drafts[..room])
                .unwrap_or(0)
                .min(room);
            let vocab = self.vocab;
            seq.n_drafts = seq.drafts[..n]
                .iter()
                .take_while(|&&t| (t as usize) < vocab)
                .count();
            budget -= seq.n_drafts;
        }
    }

    /// The coming step's rows into `out` (slot by slot: the token sampled
    /// last, then its drafts, at the positions after the history; every
    /// row with logits); returns how many (at most `out.len()`).
    pub fn rows<S: Streams>(&self, streams: &S, out: &mut [Row]) -> usize {
        let mut n = 0;
        for (slot, seq) in self.seqs.iter().enumerate() {
            let Some(seq) = seq else {
                continue;
            };
            let pos = streams.history(slot).len();
            for (k, &token) in core::iter::once(&seq.next).chain(seq.drafts()).enumerate() {
                let Some(row) = out.get_mut(n) else {
                    return n;
                };
                *row = Row {
                    slot,
                    pos: pos + k,
                    token,
                    logits: true,
                };
                n += 1;
            }
        }
        n
    }

    /// Takes a step's results: `rows` as [`Driver::rows`] gave them, their
    /// logits one `vocab` row each in order in `logits`. Each slot's fed
    /// token joins its history and its row is sampled; a drafted token the
    /// sampler picked is kept and its row sampled in turn; the first it
    /// did not pick drops the rest.
    pub fn accept<S: Streams>(&mut self, streams: &mut S, rows: &[Row], logits: &mut [f32]) {
        let vocab = self.vocab;
        let mut j = 0;
        while j < rows.len() {
            let slot = rows[j].slot;
            let group = rows[j..].iter().take_while(|r| r.slot == slot).count();
            let drafted = group - 1;
            if let Some(seq) = self.seqs.get_mut(slot).and_then(Option::as_mut) {
                if drafted > 0 {
                    seq.stats.steps += 1;
                    seq.stats.drafted += drafted;
                }
            }
            let mut kept = 0;
            let mut going = false;
            for k in 0..group {
                let row = rows[j + k];
                if k > 0 {
                    match self.seqs[slot].as_mut() {
                        Some(seq) if seq.next == row.token => {
                            seq.stats.accepted += 1;
                            kept += 1;
                        }
                        _ => break,
                    }
                }
                streams.push(slot, row.token);
                let at = (j + k) * vocab;
                let Some(row_logits) = logits.get_mut(at..at + vocab) else {
                    break;
                };
                let drafted_next = rows.get(j + k + 1).filter(|r| r.slot == slot);
                going = self.sample(streams, slot, row_logits, drafted_next.map(|r| r.token));
                if !going {
                    break;
                }
            }
            if let Some(seq) = self.seqs.get_mut(slot).and_then(Option::as_mut) {
                seq.length.update(drafted, kept);
                seq.n_drafts = 0;
            }
            if drafted > 0 {
                let seq = self.seqs[slot].as_ref().filter(|_| going);
                streams.verified(slot, drafted, kept, seq);
            }
            j += group;
        }
    }

    /// One step of every answer: [`Driver::plan`], [`Driver::rows`] into
    /// `rows` (scratch: a step holds at most `rows.len()` rows), one
    /// forward step of the decode copy with every row's logits, and
    /// [`Driver::accept`].
    pub fn step<P: Parallel, S: Streams>(
        &mut self,
        w: &Weights,
        state: &mut State,
        kernels: &Kernels,
        pool: &P,
        streams: &mut S,
        rows: &mut [Row],
    ) -> Result<(), Error> {
        self.plan(streams);
        let n = self.rows(streams, rows);
        if n == 0 {
            return Ok(());
        }
        let step = Step {
            rows: Rows::Explicit(&rows[..n]),
            copy: w.routing.decode,
            images: None,
            logits: true,
            interrupt: None,
        };
        forward_step(w, state, kernels, pool, &step)?;
        self.accept(streams, &rows[..n], state.logits);
        settle(w, state, kernels, &rows[..n], &|slot| {
            streams.history(slot).len()
        });
        Ok(())
    }
}

/// Qwen3.5, after [`Driver::accept`] took a step's `rows`: each slot whose
/// verify step fed drafts the sampler dropped goes back to the end of its
/// history (`history_len(slot)` tokens; [`recurrent_settle`]: its Gated
/// DeltaNet states are not cut back as a KV cache is by its position
/// alone). Every slot whose drafts the step fed was recorded (its rows
/// are at most `1 + opts.draft`), so each is brought back; a slot that
/// cannot be (its history gone) keeps what it holds, and a step that would
/// run it past its history is refused ([`Error::RecurrentState`]).
pub fn settle(
    w: &Weights,
    state: &mut State,
    k: &Kernels,
    rows: &[Row],
    history_len: &dyn Fn(usize) -> usize,
) {
    if w.cfg.linear.is_none() {
        return;
    }
    for (i, r) in rows.iter().enumerate() {
        if i == 0 || rows[i - 1].slot != r.slot {
            recurrent_settle(w, state, k, r.slot, history_len(r.slot));
        }
    }
}

/// A text to embed ([`embed_rows`]): its ids run as a sequence of their own
/// in `slot` (positions from 0), in chunks of `chunk` tokens.
#[derive(Clone, Copy, Debug)]
pub struct Text<'a> {
    /// The sequence slot whose KV region it overwrites.
    pub slot: usize,
    /// The tokens (1 to the context, each below the vocabulary).
    pub ids: &'a [u32],
    /// Tokens per forward step (at most the state's `max_batch`).
    pub chunk: usize,
    /// How its rows become one vector.
    pub pooling: Pooling,
}

/// What [`embed_rows`] refuses before it changes anything: `out_len`
/// floats fewer than the hidden size (returned when they suffice), no ids
/// or more than the context, an id past the vocabulary.
pub fn check_text(w: &Weights, s: &State, text: &Text, out_len: usize) -> Result<usize, Error> {
    let (hidden, vocab) = (w.cfg.hidden_size as usize, w.cfg.vocab_size);
    if out_len < hidden {
        return Err(Error::BufferTooSmall {
            what: "embedding (floats)",
            need: hidden,
            have: out_len,
        });
    }
    let (ids, max) = (text.ids, s.opts.max_seq);
    if ids.is_empty() || ids.len() > max {
        return Err(Error::OutOfRange {
            what: "tokens to embed (at least 1)",
            value: ids.len(),
            max,
        });
    }
    match ids.iter().find(|&&id| id >= vocab) {
        Some(&id) => Err(Error::BadToken { id, vocab }),
        None => Ok(hidden),
    }
}

/// The embedding of `text` into the front of `out` (`hidden` floats,
/// returned): the final norm's rows (what the lm_head reads) pooled as
/// `text.pooling` says, scaled to unit length. Its keys and values
/// overwrite the slot's region from position 0 (the slot's rotary offset
/// is reset); `cancel` is read before each layer. The embedding API and the
/// server's `/v1/embeddings` run it.
pub fn embed_rows<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    text: &Text,
    out: &mut [f32],
    cancel: &AtomicBool,
) -> Result<usize, Error> {
    let hidden = embed_start(w, s, text, out)?;
    let out = &mut out[..hidden];
    for c in 0..text.chunks() {
        embed_chunk(w, s, k, pool, text, c, out, cancel)?;
    }
    embed_finish(text, out);
    Ok(hidden)
}

impl Text<'_> {
    /// Forward steps of [`embed_rows`]: the ids in chunks of `chunk`.
    pub fn chunks(&self) -> usize {
        self.ids.len().div_ceil(self.chunk.max(1))
    }
}

/// [`embed_rows`]'s start, for a host that runs the chunks one at a time
/// ([`embed_chunk`], then [`embed_finish`]: the server, one chunk per
/// engine turn beside its streams; the same bits): the checks of
/// [`check_text`], the slot's rotary offset reset, `out` zeroed; returns
/// the hidden size (`out`'s first floats are the embedding's).
pub fn embed_start(
    w: &Weights,
    s: &mut State,
    text: &Text,
    out: &mut [f32],
) -> Result<usize, Error> {
    let hidden = check_text(w, s, text, out.len())?;
    if let Some(delta) = s.rope_delta.get_mut(text.slot) {
        *delta = 0;
    }
    out[..hidden].fill(0.0);
    Ok(hidden)
}

/// Chunk `c` of `text` (below [`Text::chunks`], after the chunks before
/// it) through the model, its final norm's rows pooled into `out`
/// (`hidden` floats, as [`embed_start`] left them); `cancel` read before
/// each layer (then [`Error::Cancelled`], the flag cleared).
#[allow(clippy::too_many_arguments)]
pub fn embed_chunk<P: Parallel>(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &P,
    text: &Text,
    c: usize,
    out: &mut [f32],
    cancel: &AtomicBool,
) -> Result<(), Error> {
    let chunk = text.chunk.max(1);
    let part = text.ids.chunks(chunk).nth(c).unwrap_or(&[]);
    let mut pooler = Pooler {
        out,
        pooling: text.pooling,
    };
    let step = Step {
        rows: Rows::Run {
            slot: text.slot,
            pos: c * chunk,
            tokens: part,
            last_logits: false,
            then: &[],
        },
        copy: w.routing.for_batch(part.len()),
        images: None,
        logits: false,
        interrupt: Some(cancel),
    };
    let r = forward_step_observed(w, s, k, pool, &step, &mut pooler).map(|_| ());
    if r == Err(Error::Cancelled) {
        // Seen: the flag is cleared, as a cancelled feed clears it.
        cancel.store(false, Ordering::Relaxed);
    }
    r
}

/// [`embed_rows`]'s end: the pooled rows of every chunk in `out`
/// (`hidden` floats) averaged (mean pooling) and scaled to unit length.
pub fn embed_finish(text: &Text, out: &mut [f32]) {
    if text.pooling == Pooling::Mean {
        let scale = 1.0 / text.ids.len() as f32;
        out.iter_mut().for_each(|v| *v *= scale);
    }
    let norm = libm::sqrtf(out.iter().map(|v| v * v).sum::<f32>());
    if norm > 0.0 {
        out.iter_mut().for_each(|v| *v /= norm);
    }
}

/// How [`embed_rows`] pools a text's rows into one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of every token's row.
    Mean,
    /// The last token's row (Qwen3-Embedding's pooling: its texts end
    /// with `<|endoftext|>`).
    Last,
}

/// Pools the final norm's rows as a forward step shows them.
struct Pooler<'a> {
    /// (hidden): the sum of the rows, or the last row.
    out: &'a mut [f32],
    pooling: Pooling,
}

impl Observer for Pooler<'_> {
    fn observe(&mut self, _: usize, input: Input, rows: &[f32]) {
        if input != Input::Output {
            return;
        }
        let h = self.out.len();
        match self.pooling {
            Pooling::Mean => {
                for row in rows.chunks_exact(h) {
                    self.out.iter_mut().zip(row).for_each(|(o, v)| *o += v);
                }
            }
            Pooling::Last => {
                if let Some(row) = rows.rchunks_exact(h).next() {
                    self.out.copy_from_slice(row);
                }
            }
        }
    }

    fn observes_output(&self) -> bool {
        true
    }
}

/// One sequence (slot 0 of its state) generating text: `kestrel run`,
/// `kestrel chat` and the firmware host. `H` holds the token history
/// (every token in the KV cache, in order; at least `max_seq` long) and
/// `C` the sampler's scratch (at least `vocab` long): a `Vec` in the shell,
/// a static array in firmware.
pub struct Generator<'w, 's, 'p, P: Parallel, H, C> {
    /// The model.
    pub weights: &'w Weights<'w>,
    /// Its tokenizer.
    pub tokenizer: Tokenizer<'w>,
    /// The KV cache and activations.
    pub state: State<'s>,
    /// The kernels.
    pub kernels: Kernels,
    /// The threads.
    pub pool: &'p P,
    /// The tokens that end an answer.
    pub stops: StopSet,
    /// The sampler.
    pub sampler: Sampler,
    /// Prompt tokens per forward step: the state's max_batch
    /// ([`PREFILL_CHUNK`] as the shell and the firmware host size it).
    pub chunk: usize,
    pub(crate) history: H,
    pub(crate) len: usize,
    pub(crate) candidates: C,
    /// Offset of the logits of the last row fed in `state.logits`.
    pub(crate) logits_at: usize,
}

impl<'w, 's, 'p, P, H, C> Generator<'w, 's, 'p, P, H, C>
where
    P: Parallel,
    H: AsMut<[u32]> + AsRef<[u32]>,
    C: AsMut<[u32]>,
{
    /// A generator over a fresh state (slot 0 empty) and the file's
    /// tokenizer. `history` must hold `state.opts.max_seq` tokens and
    /// `candidates` `vocab` ids.
    pub fn new(
        weights: &'w Weights<'w>,
        kernels: Kernels,
        pool: &'p P,
        state: State<'s>,
        sampler: SamplerConfig,
        mut history: H,
        mut candidates: C,
    ) -> Result<Self, Error> {
        let tables = weights.vqf.tokenizer().ok_or(Error::BadTokenizer {
            what: "the model file has no tokenizer (convert it with tokenizer.json)",
        })?;
        let tokenizer = Tokenizer::new(*tables);
        let (max_seq, max_batch) = (state.opts.max_seq, state.opts.max_batch);
        let vocab = weights.cfg.vocab_size as usize;
        if history.as_mut().len() < max_seq {
            return Err(Error::BufferTooSmall {
                what: "token history",
                need: max_seq,
                have: history.as_mut().len(),
            });
        }
        if candidates.as_mut().len() < vocab {
            return Err(Error::BufferTooSmall {
                what: "sampler candidates",
                need: vocab,
                have: candidates.as_mut().len(),
            });
        }
        Ok(Generator {
            weights,
            stops: StopSet::new(&weights.cfg, Some(&tokenizer)),
            tokenizer,
            state,
            kernels,
            pool,
            sampler: Sampler::new(sampler),
            chunk: max_batch,
            history,
            len: 0,
            candidates,
            logits_at: 0,
        })
    }

    /// Every token in the KV cache, in order.
    pub fn history(&self) -> &[u32] {
        &self.history.as_ref()[..self.len]
    }

    /// The logits of the last row fed (what the next token is sampled
    /// from).
    pub fn last_logits(&self) -> &[f32] {
        let vocab = self.weights.cfg.vocab_size as usize;
        &self.state.logits[self.logits_at..self.logits_at + vocab]
    }

    /// Runs `ids` (each `<|image_pad|>` expanded, with `images` the tower's
    /// output for them) through the model after the tokens already cached,
    /// in the prefill plan's chunks; keeps the last row's logits for
    /// sampling.
    pub fn feed(&mut self, ids: &[u32], images: Option<PromptImages>) -> Result<(), Error> {
        self.feed_until(ids, images, &AtomicBool::new(false), &mut |_, _| {})
    }

    /// [`Generator::feed`], reading `interrupt` before each layer of each
    /// chunk of the plan (the same chunks, so the same bits): set, it is
    /// cleared and the feed stops with [`Error::Cancelled`] within one
    /// layer's work, the chunks completed staying in the cache and the
    /// history (the chunk it stopped in does not count; the last row's
    /// logits are then not those of `ids`' last token). `on_chunk` is shown each chunk's logit rows
    /// (every row's when the state keeps all logits: `kestrel logits`).
    pub fn feed_until(
        &mut self,
        ids: &[u32],
        images: Option<PromptImages>,
        interrupt: &AtomicBool,
        on_chunk: &mut dyn FnMut(&Chunk, &[f32]),
    ) -> Result<(), Error> {
        if ids.is_empty() {
            return Ok(());
        }
        let base = self.state.pos;
        let end = base
            .checked_add(ids.len())
            .filter(|&e| e <= self.state.opts.max_seq);
        let Some(end) = end else {
            return Err(Error::ContextFull {
                need: base.saturating_add(ids.len()),
                max: self.state.opts.max_seq,
            });
        };
        let mut p = Prefill {
            slot: 0,
            base,
            prompt: ids,
            keep: 0,
            chunk: self.chunk,
            images,
            interrupt: Some(interrupt),
        };
        let at = loop {
            let (w, k) = (self.weights, &self.kernels);
            match prefill_some(w, &mut self.state, k, self.pool, &mut p, 1, on_chunk) {
                Ok(Some(at)) => break at,
                Ok(None) => {}
                Err(Error::Cancelled) => {
                    // The chunks completed stay; the one stopped does not count.
                    interrupt.store(false, Ordering::Relaxed);
                    let ran = p.keep;
                    self.state.pos = base + ran;
                    self.history.as_mut()[base..base + ran].copy_from_slice(&ids[..ran]);
                    self.len = base + ran;
                    return Err(Error::Cancelled);
                }
                Err(e) => return Err(e),
            }
        };
        self.logits_at = at;
        self.state.pos = end;
        self.history.as_mut()[base..end].copy_from_slice(ids);
        self.len = end;
        Ok(())
    }

    /// One token, pulled (the embedding API's way; [`Generator::decode`]
    /// pushes an answer): an answer of one token through the same path
    /// (the [`Driver`] samples it from the last fed row, then it is run
    /// through the model, so the next call has its logits); an end token is
    /// run too (a chat turn ends with it), while the cache has room.
    /// `Sampled::Token`'s `last` says the cache had no room for the token
    /// (it is not cached: nothing more can be pulled). The caller samples
    /// only after a feed or a token that was run.
    pub fn next_token(&mut self, constraint: Option<&mut Constraint>) -> Result<Sampled, Error> {
        let before = self.len;
        let answer = self.decode(1, &AtomicBool::new(false), &mut |_| {}, constraint)?;
        let id = answer.last;
        Ok(match answer.stopped {
            true => Sampled::End(id),
            false => Sampled::Token {
                id,
                last: self.len == before,
            },
        })
    }

    /// Samples up to `max_tokens` tokens after what was fed, streaming
    /// their text to `emit`; each token but the last is fed back. Ends at
    /// an end token (which is fed too: a chat turn ends with it), at
    /// `max_tokens`, at a full context, or when `interrupt` is set. Plain
    /// decoding: [`Generator::decode_speculative`] without drafts.
    pub fn decode(
        &mut self,
        max_tokens: usize,
        interrupt: &AtomicBool,
        emit: &mut dyn FnMut(&str),
        constraint: Option<&mut Constraint>,
    ) -> Result<Answer, Error> {
        let mut spec = Speculation {
            drafter: &mut NoDraft,
            length: Adaptive::new(1),
        };
        let mut stats = SpecStats::default();
        self.decode_speculative(
            max_tokens, interrupt, emit, constraint, &mut spec, &mut stats,
        )
    }

    /// Samples up to `max_tokens` tokens as [`Generator::decode`] does,
    /// with speculation: the [`Driver`] of one sequence, each sampled token
    /// fed with up to `spec.length.n` drafted tokens in one step of the
    /// decode copy, drafted tokens the sampler picks again needing no step
    /// of their own. The answer, the cache and the history are plain
    /// decoding's (see the driver); the counts go to `stats`. The answer's
    /// last token (or its end token) is fed after it, so the cache holds
    /// the whole turn while there is room.
    pub fn decode_speculative(
        &mut self,
        max_tokens: usize,
        interrupt: &AtomicBool,
        emit: &mut dyn FnMut(&str),
        constraint: Option<&mut Constraint>,
        spec: &mut Speculation,
        stats: &mut SpecStats,
    ) -> Result<Answer, Error> {
        if interrupt.load(Ordering::Relaxed) {
            return Ok(Answer::default());
        }
        let mut driver = Driver::<1>::new(self.weights, &self.state);
        let vocab = self.weights.cfg.vocab_size as usize;
        let mut rows = [Row {
            slot: 0,
            pos: 0,
            token: 0,
            logits: true,
        }; MAX_DRAFT + 1];
        let mut one = One {
            history: self.history.as_mut(),
            len: self.len,
            sampler: &mut self.sampler,
            candidates: self.candidates.as_mut(),
            stops: &self.stops,
            constraint,
            drafter: &mut *spec.drafter,
            tokenizer: &self.tokenizer,
            text: StreamDecoder::new(true),
            emit,
            error: None,
            last: None,
        };
        let at = self.logits_at;
        driver.start(
            &mut one,
            0,
            &mut self.state.logits[at..at + vocab],
            max_tokens,
            true,
            spec.length,
        );
        while driver.active() > 0 && one.error.is_none() {
            if interrupt.load(Ordering::Relaxed) {
                one.last = driver.stop(0).map(|seq| (seq, None));
                break;
            }
            let r = driver.step(
                self.weights,
                &mut self.state,
                &self.kernels,
                self.pool,
                &mut one,
                &mut rows,
            );
            self.state.pos = one.len;
            if let Err(e) = r {
                self.len = one.len;
                return Err(e);
            }
        }
        one.text.finish_with(one.emit);
        let (len, error, last) = (one.len, one.error, one.last);
        self.len = len;
        self.state.pos = len;
        if let Some(e) = error {
            return Err(e);
        }
        let Some((seq, ending)) = last else {
            return Ok(Answer::default());
        };
        spec.length = seq.length;
        stats.steps += seq.stats.steps;
        stats.drafted += seq.stats.drafted;
        stats.accepted += seq.stats.accepted;
        // The turn's last token, or its end token, joins the cache.
        let tail = match ending {
            Some(Ending {
                end_token: Some(id),
                end_fed,
                ..
            }) => (!end_fed).then_some(id),
            _ => Some(seq.next),
        };
        if let Some(id) = tail.filter(|_| self.state.pos < self.state.opts.max_seq) {
            self.feed(&[id], None)?;
        }
        Ok(Answer {
            generated: seq.generated,
            stopped: ending.is_some_and(|e| e.finish == Finish::Stop),
            last: ending.and_then(|e| e.end_token).unwrap_or(seq.next),
        })
    }

    /// [`Generator::make_room`] for a turn of `turn` tokens and its
    /// answer, the one policy of every host that keeps `keep` tokens
    /// (`kestrel chat --keep`, the embedding API's context policy): room
    /// for the turn and an answer of a quarter of the context after `keep`
    /// when dropping turns can make it, else for the turn and `least` more
    /// (the embedding API: 0, the feed alone; `kestrel chat`: 2, one
    /// answer token and its end).
    pub fn make_room_for_turn(
        &mut self,
        turn: usize,
        keep: usize,
        least: usize,
    ) -> Result<usize, Error> {
        let answer = self.state.opts.max_seq.saturating_sub(keep) / 4;
        self.make_room(turn.saturating_add(answer.max(least)), keep)
            .or_else(|_| self.make_room(turn.saturating_add(least), keep))
    }

    /// After [`Generator::make_room_for_turn`] dropped `dropped` tokens:
    /// whether `turn` begins by closing an open answer (the end-of-turn
    /// token [`crate::chat::format_turn`] writes first) that went with
    /// every turn after `keep`, so there is nothing left to close and the
    /// caller skips that first id.
    pub fn closes_a_dropped_answer(&self, turn: &[u32], keep: usize, dropped: usize) -> bool {
        let end = self.tokenizer.token_id(crate::chat::END_OF_TURN);
        dropped > 0 && self.len <= keep && end.is_some() && turn.first() == end.as_ref()
    }

    /// Room for `need` more tokens by the context policy "keep the first
    /// `keep` tokens, drop the oldest turns": when the cached tokens and
    /// `need` do not fit the context, the turns after the first `keep`
    /// tokens are dropped, oldest first and whole (a turn begins at
    /// `<|im_start|>`; without that token, at any token), until they fit;
    /// the turns kept after them are run again at their new positions (a
    /// prefill of those tokens). Returns how many tokens were dropped (0
    /// when they fit). When even dropping every turn after `keep` leaves no
    /// room (or the turns after `keep` hold an image: its rows cannot be
    /// run again), it is [`Error::ContextFull`] and nothing changes; an
    /// error while the kept turns run again leaves the first `keep` tokens.
    pub fn make_room(&mut self, need: usize, keep: usize) -> Result<usize, Error> {
        let (len, max) = (self.len, self.state.opts.max_seq);
        if len.saturating_add(need) <= max {
            return Ok(0);
        }
        let keep = keep.min(len);
        let full = Error::ContextFull {
            need: len.saturating_add(need),
            max,
        };
        let room = max.checked_sub(keep).and_then(|r| r.checked_sub(need));
        // Image rows cannot move (their embeddings are not kept): turns
        // after `keep` that hold one are never run again.
        let image = self.weights.cfg.vision.map(|v| v.image_token_id);
        let images = image.is_some_and(|t| self.history.as_ref()[keep..len].contains(&t));
        let (Some(room), false) = (room, images) else {
            return Err(full);
        };
        // The earliest turn start after `keep` whose tail fits.
        let start = self.tokenizer.token_id("<|im_start|>");
        let history = self.history.as_mut();
        let first = keep.max(len - room.min(len));
        let cut = (first..len)
            .find(|&c| start.is_none_or(|s| history[c] == s))
            .unwrap_or(len);
        history.copy_within(cut..len, keep);
        let end = keep + (len - cut);
        self.len = keep;
        self.state.pos = keep;
        // Qwen3.5: a Gated DeltaNet state is not cut back: the first `keep`
        // tokens run again too.
        let from = if self.weights.cfg.linear.is_some() {
            0
        } else {
            keep
        };
        if end > from {
            let mut p = Prefill {
                slot: 0,
                base: from,
                prompt: &self.history.as_ref()[from..end],
                keep: 0,
                chunk: self.chunk,
                images: None,
                interrupt: None,
            };
            let (w, k) = (self.weights, &self.kernels);
            self.logits_at = prefill(w, &mut self.state, k, self.pool, &mut p, &mut |_, _| {})?;
            self.len = end;
            self.state.pos = end;
        }
        Ok(cut - keep)
    }

    /// Forgets the conversation.
    pub fn reset(&mut self) {
        self.state.pos = 0;
        self.state.rope_delta[0] = 0;
        self.len = 0;
    }
}

/// [`Generator`]'s one sequence as the driver's [`Streams`]: its history,
/// sampler and constraint, its draft source, and the text it streams.
struct One<'a, 'c, 'x> {
    history: &'a mut [u32],
    len: usize,
    sampler: &'a mut Sampler,
    candidates: &'a mut [u32],
    stops: &'a StopSet,
    constraint: Option<&'a mut Constraint<'c>>,
    drafter: &'a mut (dyn Drafter + 'x),
    tokenizer: &'a Tokenizer<'a>,
    text: StreamDecoder,
    emit: &'a mut dyn FnMut(&str),
    /// Streaming the text failed.
    error: Option<Error>,
    /// The answer's last state, and how it ended (`None`: interrupted).
    last: Option<(Sequence, Option<Ending>)>,
}

impl Streams for One<'_, '_, '_> {
    fn history(&self, _: usize) -> &[u32] {
        &self.history[..self.len]
    }

    fn draft(&mut self, _: usize, next: u32, out: &mut [u32]) -> Result<usize, Error> {
        let max = self.history.len();
        let slot = self.history.get_mut(self.len).ok_or(Error::ContextFull {
            need: self.len + 1,
            max,
        })?;
        *slot = next;
        self.drafter.draft(&self.history[..self.len + 1], out)
    }

    fn push(&mut self, _: usize, token: u32) {
        if let Some(slot) = self.history.get_mut(self.len) {
            *slot = token;
            self.len += 1;
        }
    }

    fn sample(&mut self, _: usize, logits: &mut [f32], limits: Limits) -> Option<Sampled> {
        let sampled = sample_next(
            self.sampler,
            logits,
            &self.history[..self.len],
            self.candidates,
            self.stops,
            limits,
            self.constraint.as_deref_mut(),
        );
        if let Sampled::Token { id, .. } = sampled {
            if let Err(e) = self.text.step_with(self.tokenizer, id, self.emit) {
                self.error = Some(e);
                return None;
            }
        }
        Some(sampled)
    }

    fn ended(&mut self, _: usize, seq: &Sequence, ending: Ending) {
        self.last = Some((*seq, Some(ending)));
    }
}

/// A smaller model of the same vocabulary drafting greedily, for the
/// sequence in slot [`DraftModel::slot`] of its own state (one slot per
/// target sequence: the server's slots each draft in theirs). Its KV cache
/// follows the sequence: before each draft it keeps the longest prefix it
/// shares with the sequence and feeds the rest (the tokens accepted and
/// sampled since), then decodes up to `n` tokens one step each, stopping
/// after an end token. `H` holds its cached tokens (at least `slots x
/// max_seq` of its state).
pub struct DraftModel<'w, 's, 'p, P: Parallel, H> {
    /// The draft's weights.
    pub weights: &'w Weights<'w>,
    /// Its KV cache and activations.
    pub state: State<'s>,
    /// Its kernels.
    pub kernels: Kernels,
    /// Its threads (the target's pool: the two never run at once).
    pub pool: &'p P,
    /// The target's end tokens: a draft stops after one.
    pub stops: StopSet,
    /// The slot the next [`Drafter::draft`] works in.
    pub slot: usize,
    /// (slots, max_seq): the tokens of each slot's cache.
    cached: H,
    /// Positions cached per slot.
    lens: [usize; MAX_SLOTS],
}

impl<'w, 's, 'p, P: Parallel, H: AsMut<[u32]> + AsRef<[u32]>> DraftModel<'w, 's, 'p, P, H> {
    /// A draft model over a fresh state; `cached` must hold the state's
    /// `slots x max_seq` tokens.
    pub fn new(
        weights: &'w Weights<'w>,
        kernels: Kernels,
        pool: &'p P,
        state: State<'s>,
        stops: StopSet,
        cached: H,
    ) -> Result<Self, Error> {
        let need = state.opts.max_seq.saturating_mul(state.opts.slots);
        if cached.as_ref().len() < need {
            return Err(Error::BufferTooSmall {
                what: "draft model's token history",
                need,
                have: cached.as_ref().len(),
            });
        }
        Ok(DraftModel {
            weights,
            state,
            kernels,
            pool,
            stops,
            slot: 0,
            cached,
            lens: [0; MAX_SLOTS],
        })
    }

    /// Runs `tokens` at the slot's positions after its cached ones;
    /// returns where the last row's logits start.
    fn feed(&mut self, tokens: &[u32]) -> Result<usize, Error> {
        let (slot, max_seq) = (self.slot, self.state.opts.max_seq);
        let base = self.lens[slot];
        let mut p = Prefill {
            slot,
            base,
            prompt: tokens,
            keep: 0,
            chunk: self.state.opts.max_batch,
            images: None,
            interrupt: None,
        };
        let at = prefill(
            self.weights,
            &mut self.state,
            &self.kernels,
            self.pool,
            &mut p,
            &mut |_, _| {},
        )?;
        let row = &mut self.cached.as_mut()[slot * max_seq..(slot + 1) * max_seq];
        row[base..base + tokens.len()].copy_from_slice(tokens);
        self.lens[slot] = base + tokens.len();
        Ok(at)
    }
}

impl<P: Parallel, H: AsMut<[u32]> + AsRef<[u32]>> Drafter for DraftModel<'_, '_, '_, P, H> {
    fn draft(&mut self, history: &[u32], out: &mut [u32]) -> Result<usize, Error> {
        let max_seq = self.state.opts.max_seq;
        let vocab = self.weights.cfg.vocab_size as usize;
        // Room for the history and the drafts but the last (never fed).
        let n = out.len().min((max_seq + 1).saturating_sub(history.len()));
        if n == 0 || history.is_empty() {
            return Ok(0);
        }
        if self.slot >= self.state.opts.slots {
            return Err(Error::OutOfRange {
                what: "draft model slot",
                value: self.slot,
                max: self.state.opts.slots - 1,
            });
        }
        // Keep what the cache shares with the sequence; at least one token
        // is fed again (its logits are the first draft's).
        let slot = self.slot;
        let keep = self.cached.as_ref()[slot * max_seq..slot * max_seq + self.lens[slot]]
            .iter()
            .zip(history)
            .take_while(|(a, b)| a == b)
            .count()
            .min(history.len() - 1);
        self.lens[slot] = keep;
        let mut at = self.feed(&history[keep..])?;
        for (i, slot) in out[..n].iter_mut().enumerate() {
            let id = argmax(&self.state.logits[at..at + vocab]) as u32;
            *slot = id;
            if i + 1 == n || self.stops.contains(id) {
                return Ok(i + 1);
            }
            at = self.feed(&[id])?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::vqf::format::flags;

    fn dual() -> Routing {
        Routing::for_flags(flags::Q8_8X8 | flags::Q4_4X4, true).unwrap()
    }

    /// The greedy shortcut (the best token checked alone) and the mask
    /// pick what sampling over the fully masked logits picks, with the same
    /// generator state, over many random rows.
    #[cfg(feature = "constrain")]
    #[test]
    fn constrained_sampling_equals_sampling_the_masked_logits() {
        extern crate std;
        use crate::constrain::MAX_TOKEN_BYTES;
        use std::vec::Vec;
        let schema = Schema::compile(
            &crate::json::parse(br#"{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"}},"required":["ok"]}"#)
                .unwrap(),
        )
        .unwrap();
        let tokens: [&[u8]; 14] = [
            b"{", b"{\"", b"\"ok\"", b"ok", b"\":", b":", b" ", b"true", b"false", b",", b"\"n\":",
            b"12", b"}", b"x",
        ];
        let mut order: Vec<u32> = (0..tokens.len() as u32).collect();
        order.sort_by(|&a, &b| tokens[a as usize].cmp(tokens[b as usize]));
        let mut offsets = std::vec![0u32];
        let mut bytes = Vec::new();
        let mut position = std::vec![u32::MAX; tokens.len() + 1];
        for (i, &id) in order.iter().enumerate() {
            bytes.extend_from_slice(tokens[id as usize]);
            offsets.push(bytes.len() as u32);
            position[id as usize] = i as u32;
        }
        let skip: Vec<u32> = (0..order.len() as u32).map(|i| i + 1).collect();
        let unplain: Vec<u32> = (0..order.len() as u32).collect();
        let vocab = Vocab {
            order: &order,
            offsets: &offsets,
            bytes: &bytes,
            skip: &skip,
            skip2: &skip,
            position: &position,
            unplain: &unplain,
            plain_ids: &[0],
            plain_ascii_ids: &[0],
            not_plain_ascii: &unplain,
            plain_upto: &[0; crate::constrain::PLAIN_COUNTS],
            longest_plain: 0,
            not_short_plain: &unplain,
            byte_sets: &[],
        };
        // Token 14 ends the answer.
        let mut stops = StopSet {
            ids: [0; MAX_STOPS],
            len: 0,
        };
        stops.insert(14);
        let n = tokens.len() + 1;
        let mut rng = 1u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((rng >> 33) as f32 / (1u64 << 31) as f32) * 8.0 - 4.0
        };
        let limits = Limits {
            generated: 0,
            max_tokens: 1000,
            cached: 0,
            max_seq: 1000,
        };
        let mut total_hits = 0;
        for cfg in [
            SamplerConfig {
                temperature: 0.0,
                ..SamplerConfig::default()
            },
            SamplerConfig {
                temperature: 1.0,
                top_k: 3,
                top_p: 1.0,
                min_p: 0.0,
                ..SamplerConfig::default()
            },
            SamplerConfig {
                temperature: 0.7,
                top_k: 0,
                ..SamplerConfig::default()
            },
        ] {
            let mut progress = Progress::new(&schema);
            let mut states = std::vec![progress.matcher.clone(); MAX_TOKEN_BYTES + 1];
            // Room for the cache: masks of states met again come from it.
            let mut bits = std::vec![0u64; 1 + MASK_CACHE];
            let mut cache = MaskCache::new(&schema);
            let (mut a, mut b) = (Sampler::new(cfg), Sampler::new(cfg));
            let mut cand = std::vec![0u32; n];
            for _ in 0..40 {
                let row: Vec<f32> = (0..n).map(|_| next()).collect();
                // The reference: every token checked, then plain sampling.
                let mut masked = row.clone();
                let mut scratch = progress.matcher.clone();
                for (id, l) in masked.iter_mut().enumerate() {
                    let ok = if id == 14 {
                        progress.matcher.can_end(&schema)
                    } else {
                        progress.matcher.accepts(&schema, tokens[id], &mut scratch)
                    };
                    if !ok {
                        *l = f32::NEG_INFINITY;
                    }
                }
                let want = b.sample(&mut masked, &[], &mut cand);
                let mut c = Constraint {
                    schema: &schema,
                    vocab: &vocab,
                    progress: &mut progress,
                    states: &mut states,
                    bits: &mut bits,
                    cache: &mut cache,
                };
                let got = match sample_next(
                    &mut a,
                    &mut row.clone(),
                    &[],
                    &mut cand,
                    &stops,
                    limits,
                    Some(&mut c),
                ) {
                    Sampled::End(id) => id,
                    Sampled::Token { id, .. } => id,
                };
                assert_eq!(got, want, "{cfg:?}");
                if got == 14 {
                    break;
                }
            }
            assert!(progress.steps > 3, "{cfg:?}");
            total_hits += cache.hits;
        }
        assert!(total_hits > 0, "no mask came from the cache");
    }

    #[test]
    fn the_plan_chunks_from_the_first_token_and_keeps_the_copies_of_a_fresh_prefill() {
        // 300 tokens in chunks of 128: 128, 128, 44; all three read Q8.
        let plan: heapless::Vec<Chunk, 8> = prefill_chunks(dual(), 300, 128, 0).collect();
        let spans: heapless::Vec<(usize, usize, WeightCopy, bool), 8> = plan
            .iter()
            .map(|c| (c.start, c.end, c.copy, c.last))
            .collect();
        assert_eq!(
            &spans[..],
            &[
                (0, 128, WeightCopy::Prefill, false),
                (128, 256, WeightCopy::Prefill, false),
                (256, 300, WeightCopy::Prefill, true)
            ]
        );
        // 257 tokens: the last chunk is one token, so it reads the decode copy.
        let last = prefill_chunks(dual(), 257, 128, 0).last().unwrap();
        assert_eq!(
            (last.start, last.end, last.copy),
            (256, 257, WeightCopy::Decode)
        );
        assert_eq!(prompt_copy(&dual(), 128, 256, 257), WeightCopy::Decode);
        assert_eq!(prompt_copy(&dual(), 128, 255, 257), WeightCopy::Prefill);
        // A cached prefix of 130: the second chunk starts at 130 but keeps
        // the copy its whole 128-token chunk selects.
        let plan: heapless::Vec<Chunk, 8> = prefill_chunks(dual(), 300, 128, 130).collect();
        assert_eq!(plan.len(), 2);
        assert_eq!(
            (plan[0].start, plan[0].end, plan[0].copy),
            (130, 256, WeightCopy::Prefill)
        );
        assert_eq!(prefill_chunks(dual(), 300, 128, 300).count(), 0);
    }

    #[test]
    fn a_cache_is_reused_only_where_tokens_and_copies_match() {
        let prompt = [1, 2, 3, 4, 5];
        let cached = [1, 2, 3, 9];
        let q8 = [WeightCopy::Prefill; 4];
        // Tokens 0..3 match and were computed with the plan's copy (Q8).
        assert_eq!(
            reusable_prefix(&dual(), 128, &cached, &q8, usize::MAX, &prompt, None),
            3
        );
        // An image at position 1 of the cache stops reuse there.
        assert_eq!(
            reusable_prefix(&dual(), 128, &cached, &q8, 1, &prompt, None),
            1
        );
        // Positions decoded with Q4 are not what the plan would compute.
        let q4 = [WeightCopy::Decode; 4];
        assert_eq!(
            reusable_prefix(&dual(), 128, &cached, &q4, usize::MAX, &prompt, None),
            0
        );
        // At least one prompt token is left to run.
        assert_eq!(
            reusable_prefix(&dual(), 128, &[1, 2, 3], &q8, usize::MAX, &[1, 2, 3], None),
            2
        );
    }

    #[test]
    fn sampling_stops_on_end_tokens_and_at_the_limits() {
        let mut stops = StopSet {
            ids: [0; MAX_STOPS],
            len: 0,
        };
        assert!(stops.insert(2) && stops.insert(2) && stops.ids() == [2]);
        for id in 10..10 + MAX_STOPS as u32 - 1 {
            assert!(stops.insert(id));
        }
        assert!(!stops.insert(99), "a full set refuses");
        let mut greedy = Sampler::new(SamplerConfig {
            temperature: 0.0,
            ..SamplerConfig::default()
        });
        let limits = Limits {
            generated: 0,
            max_tokens: 3,
            cached: 5,
            max_seq: 16,
        };
        let mut cand = [0u32; 4];
        let mut logits = [0.0, 0.0, 1.0, 0.0];
        let s = sample_next(
            &mut greedy,
            &mut logits,
            &[],
            &mut cand,
            &stops,
            limits,
            None,
        );
        assert_eq!(s, Sampled::End(2));
        let mut logits = [0.0, 1.0, 0.0, 0.0];
        let s = sample_next(
            &mut greedy,
            &mut logits,
            &[],
            &mut cand,
            &stops,
            limits,
            None,
        );
        assert_eq!(s, Sampled::Token { id: 1, last: false });
        let at_limit = Limits {
            generated: 2,
            ..limits
        };
        let s = sample_next(
            &mut greedy,
            &mut logits,
            &[],
            &mut cand,
            &stops,
            at_limit,
            None,
        );
        assert_eq!(s, Sampled::Token { id: 1, last: true });
        let full = Limits {
            cached: 16,
            ..limits
        };
        let s = sample_next(&mut greedy, &mut logits, &[], &mut cand, &stops, full, None);
        assert_eq!(s, Sampled::Token { id: 1, last: true });
    }
}
