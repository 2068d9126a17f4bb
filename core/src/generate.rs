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
//! * [`Generator`]: the single-sequence driver (`kestrel run`, `kestrel
//!   chat`, the firmware host): feed a prompt, then sample, stream text and
//!   feed each token until the answer ends.
//!
//! The server's scheduler (K sequences decoding together through
//! [`forward_rows`](crate::model::forward::forward_rows)) calls the same
//! [`prefill`], [`sample_next`] and [`reusable_prefix`], so its answers
//! equal `kestrel run`'s bit for bit by construction.
//!
//! Nothing here allocates: the caller brings the state, the token history
//! and the sampler's scratch.

use crate::config::{Config, MAX_EOS};
use crate::constrain::{Matcher, Schema, Vocab};
use crate::error::Error;
use crate::kernels::Kernels;
use crate::model::forward::{forward_step, Multimodal, Row, Rows, Step};
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
/// logits are needed).
pub fn reusable_prefix(
    routing: &Routing,
    chunk: usize,
    cached: &[u32],
    copies: &[WeightCopy],
    upto: usize,
    prompt: &[u32],
) -> usize {
    let n = prompt.len();
    let limit = cached
        .len()
        .min(copies.len())
        .min(n.saturating_sub(1))
        .min(upto);
    (0..limit)
        .take_while(|&p| cached[p] == prompt[p] && copies[p] == prompt_copy(routing, chunk, p, n))
        .count()
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
    /// Scratch: one bit per token of the vocabulary.
    pub bits: &'a mut [u64],
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
    fn allows(&mut self, id: u32) -> bool {
        let Some(bytes) = self.vocab.token_bytes(id) else {
            return false;
        };
        let (first, _) = self.states.split_at_mut(1);
        self.progress
            .matcher
            .accepts(self.schema, bytes, &mut first[0])
    }

    /// Gives the tokens that cannot continue the output no probability;
    /// `Some(id)` when greedy sampling without penalties would pick `id`
    /// from the unmasked logits and it is allowed (it is then the best
    /// allowed token, found without the mask).
    fn restrict(
        &mut self,
        cfg: &SamplerConfig,
        logits: &mut [f32],
        stops: &StopSet,
    ) -> Option<u32> {
        self.progress.steps += 1;
        let can_end = self.progress.matcher.can_end(self.schema);
        if (cfg.temperature <= 0.0 || cfg.top_k == 1) && cfg.repeat_penalty == 1.0 {
            let best = crate::sampler::argmax(logits) as u32;
            let ok = if stops.contains(best) {
                can_end
            } else {
                self.allows(best)
            };
            if ok {
                return Some(best);
            }
        }
        self.progress.masked += 1;
        let words = logits.len().div_ceil(64).min(self.bits.len());
        let bits = &mut self.bits[..words];
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
        if plain {
            for (w, p) in bits.iter_mut().zip(self.vocab.plain_ids) {
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
    fn accept(&mut self, id: u32) {
        if let Some(bytes) = self.vocab.token_bytes(id) {
            for &b in bytes {
                if !self.progress.matcher.advance(self.schema, b) {
                    break;
                }
            }
        }
    }
}

/// Samples the next token from `logits` (modified: penalties, and the
/// constraint's mask), with `history` the sequence's tokens so far, and
/// decides whether the answer goes on.
pub fn sample_next(
    sampler: &mut Sampler,
    logits: &mut [f32],
    history: &[u32],
    candidates: &mut [u32],
    stops: &StopSet,
    limits: Limits,
    constraint: Option<&mut Constraint>,
) -> Sampled {
    let id = match constraint {
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
}

/// Drafted tokens whose rows the last verify step computed and the sampler
/// has not taken yet: `tokens[next..n]`, the logits of `tokens[i]`'s
/// successor at row `i + 1` of `state.logits` (row 0 holds the logits
/// after the token fed with them).
struct Pending {
    tokens: [u32; MAX_DRAFT],
    next: usize,
    n: usize,
}

impl Pending {
    fn peek(&self) -> Option<u32> {
        (self.next < self.n).then(|| self.tokens[self.next])
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
            what: "the model file has no tokenizer",
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

    /// Runs `ids` (each `<|image_pad|>` expanded, with `images` the tower's
    /// output for them) through the model after the tokens already cached,
    /// in the prefill plan's chunks; keeps the last row's logits for
    /// sampling.
    pub fn feed(&mut self, ids: &[u32], images: Option<PromptImages>) -> Result<(), Error> {
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
        };
        self.logits_at = prefill(
            self.weights,
            &mut self.state,
            &self.kernels,
            self.pool,
            &mut p,
            &mut |_, _| {},
        )?;
        self.state.pos = end;
        self.history.as_mut()[base..end].copy_from_slice(ids);
        self.len = end;
        Ok(())
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
    /// with speculation: each sampled token is fed
    /// with up to `spec.length.n` drafted tokens in one step of the decode
    /// copy, and drafted tokens the sampler picks again need no step of
    /// their own. The answer, the cache and the history are plain
    /// decoding's (see the module docs); the counts go to `stats`.
    pub fn decode_speculative(
        &mut self,
        max_tokens: usize,
        interrupt: &AtomicBool,
        emit: &mut dyn FnMut(&str),
        mut constraint: Option<&mut Constraint>,
        spec: &mut Speculation,
        stats: &mut SpecStats,
    ) -> Result<Answer, Error> {
        let mut answer = Answer::default();
        let mut text = StreamDecoder::new(true);
        let vocab = self.weights.cfg.vocab_size as usize;
        let mut pending = Pending {
            tokens: [0; MAX_DRAFT],
            next: 0,
            n: 0,
        };
        // A verify step is the token and its drafts: at most max_batch rows.
        let max_draft = self
            .state
            .opts
            .draft
            .min(MAX_DRAFT)
            .min(self.state.opts.max_batch.saturating_sub(1));
        while answer.generated < max_tokens {
            if interrupt.load(Ordering::Relaxed) {
                break;
            }
            let limits = Limits {
                generated: answer.generated,
                max_tokens,
                cached: self.state.pos,
                max_seq: self.state.opts.max_seq,
            };
            let at = self.logits_at;
            let sampled = sample_next(
                &mut self.sampler,
                &mut self.state.logits[at..at + vocab],
                &self.history.as_ref()[..self.len],
                self.candidates.as_mut(),
                &self.stops,
                limits,
                constraint.as_deref_mut(),
            );
            let id = match sampled {
                Sampled::End(id) | Sampled::Token { id, .. } => id,
            };
            // Whether the token is already in the cache: a drafted token
            // the sampler picked again.
            let fed = pending.peek() == Some(id);
            if fed {
                // The draft was right: its row is computed, its logits are
                // the next row's.
                self.history.as_mut()[self.len] = id;
                self.len += 1;
                self.state.pos += 1;
                self.logits_at += vocab;
                pending.next += 1;
                stats.accepted += 1;
                if pending.next == pending.n {
                    spec.length.update(pending.n, pending.n);
                }
            } else {
                if pending.next < pending.n {
                    spec.length.update(pending.n, pending.next);
                }
                pending.n = 0;
                pending.next = 0;
            }
            match sampled {
                Sampled::End(id) => {
                    if !fed {
                        // The end token belongs to the conversation.
                        self.feed(&[id], None)?;
                    }
                    answer.stopped = true;
                    break;
                }
                Sampled::Token { id, last } => {
                    text.step_with(&self.tokenizer, id, emit)?;
                    answer.generated += 1;
                    if fed {
                        continue;
                    }
                    if self.state.pos >= self.state.opts.max_seq {
                        break;
                    }
                    // Drafts may fill the answer's and the cache's room.
                    let room = if last {
                        0
                    } else {
                        (max_tokens - answer.generated)
                            .min(self.state.opts.max_seq - self.state.pos - 1)
                    };
                    let n = spec.length.n.min(max_draft).min(room);
                    self.history.as_mut()[self.len] = id;
                    let drafted = if n > 0 {
                        let history = &self.history.as_ref()[..self.len + 1];
                        // A drafter that fails (a draft model that cannot
                        // read a token of the target's) drafts nothing;
                        // drafts stop at an id the target does not have.
                        let k = spec
                            .drafter
                            .draft(history, &mut pending.tokens[..n])
                            .unwrap_or(0)
                            .min(n);
                        pending.tokens[..k]
                            .iter()
                            .take_while(|&&t| (t as usize) < vocab)
                            .count()
                    } else {
                        0
                    };
                    if drafted == 0 {
                        self.feed(&[id], None)?;
                        continue;
                    }
                    self.verify(id, &pending.tokens[..drafted])?;
                    pending.n = drafted;
                    pending.next = 0;
                    stats.steps += 1;
                    stats.drafted += drafted;
                }
            }
        }
        text.finish_with(emit);
        Ok(answer)
    }

    /// Feeds `id` and the `drafts` after it in one step of the decode copy,
    /// every row with logits: `id` joins the history; the drafts' rows
    /// wait for the sampler.
    fn verify(&mut self, id: u32, drafts: &[u32]) -> Result<(), Error> {
        let pos = self.state.pos;
        let mut rows = [Row {
            slot: 0,
            pos: 0,
            token: 0,
            logits: true,
        }; MAX_DRAFT + 1];
        let n = drafts.len() + 1;
        for (i, r) in rows[..n].iter_mut().enumerate() {
            r.pos = pos + i;
            r.token = if i == 0 { id } else { drafts[i - 1] };
        }
        let step = Step {
            rows: Rows::Explicit(&rows[..n]),
            copy: self.weights.routing.decode,
            images: None,
            logits: true,
        };
        forward_step(
            self.weights,
            &mut self.state,
            &self.kernels,
            self.pool,
            &step,
        )?;
        self.history.as_mut()[self.len] = id;
        self.len += 1;
        self.state.pos = pos + 1;
        self.logits_at = 0;
        Ok(())
    }
    /// Forgets the conversation.
    pub fn reset(&mut self) {
        self.state.pos = 0;
        self.state.rope_delta[0] = 0;
        self.len = 0;
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
            let mut bits = std::vec![0u64; 1];
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
        }
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
            reusable_prefix(&dual(), 128, &cached, &q8, usize::MAX, &prompt),
            3
        );
        // An image at position 1 of the cache stops reuse there.
        assert_eq!(reusable_prefix(&dual(), 128, &cached, &q8, 1, &prompt), 1);
        // Positions decoded with Q4 are not what the plan would compute.
        let q4 = [WeightCopy::Decode; 4];
        assert_eq!(
            reusable_prefix(&dual(), 128, &cached, &q4, usize::MAX, &prompt),
            0
        );
        // At least one prompt token is left to run.
        assert_eq!(
            reusable_prefix(&dual(), 128, &[1, 2, 3], &q8, usize::MAX, &[1, 2, 3]),
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
