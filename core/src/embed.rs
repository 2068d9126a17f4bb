//! The embedding API: the whole generation path behind a few calls, for
//! hosts that link the core (firmware, an RTOS task, the C ABI of `capi/`,
//! the shell). Allocation-free: the host brings the model's bytes and
//! the memory, sized by [`Sizes::new`]: the layers' views, and one block of
//! bytes for everything else (the KV cache, activations, token history,
//! sampler and tokenizer scratch).
//!
//! ```text
//! let sizes = Sizes::new(model_bytes, &config)?;        // what to reserve
//! let model = Model::open(model_bytes, layers)?;         // layers: sizes.layers
//! let mut engine = Conversation::new(&model, kernels, &Serial, &config, sampler, memory)?; // sizes.memory bytes
//! let n = engine.chat_turn(None, "Hello", &mut ids)?;    // the message is data
//! engine.feed(&ids[..n], &cancel)?;                      // after the cached turns
//! while let Next::Token(id) = engine.next(&cancel, None)? { // sample, then run it
//!     print(engine.piece(id, &mut text)?);               // streamed UTF-8
//! }
//! ```
//!
//! [`Conversation::generate`] decodes a whole answer the way `kestrel run` does
//! (speculatively by prompt lookup when [`Config::draft`] is set);
//! [`Conversation::logits`] and [`Conversation::embed`] give the last row's
//! logits and a pooled embedding; [`Conversation::set_stop_strings`] ends
//! answers at texts; a [`Constraint`] given to `next` or `generate` keeps
//! the answer to a JSON schema (the host owns it: its tables need an
//! allocator, `constrain::sorted`). Not here yet: images, a draft model
//! and several sequences (the shell and the server drive
//! [`crate::generate`] directly for those). docs/embedding.md is the guide; `capi/` puts this API
//! behind a C ABI.

use crate::chat::{self, BufWriter, ChatStyle, Message, Role};
use crate::error::Error;
pub use crate::generate::Pooling;
use crate::generate::{
    check_text, embed_rows, stop_scan, Constraint, Generator, Sampled, Text, PREFILL_CHUNK,
};
use crate::kernels::Kernels;
use crate::model::weights::{LayerWeights, Weights};
use crate::parallel::Parallel;
use crate::sampler::SamplerConfig;
use crate::speculate::{Adaptive, DraftSource, SpecStats, Speculation, MAX_DRAFT};
use crate::state::{ArenaSizes, KvType, Options, State};
use crate::tokenizer::{EncodeOptions, EncodeScratch, StreamDecoder};
use crate::vqf::Vqf;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, Ordering};
use kestrel_kernels::cast;

/// What an engine is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most tokens in the KV cache (capped by the file's own limit).
    pub context: usize,
    /// Most prompt tokens per forward step ([`PREFILL_CHUNK`]: `kestrel
    /// run`'s choice, and the bits of its prefill).
    pub batch: usize,
    /// The KV cache's element type.
    pub kv: KvType,
    /// Longest text [`Conversation::tokenize`] and [`Conversation::chat_turn`] take,
    /// in bytes.
    pub text_bytes: usize,
    /// Most tokens [`Conversation::generate`] drafts by prompt lookup per verify
    /// step (speculative decoding, the same tokens; 0: none, at most
    /// [`MAX_DRAFT`]).
    pub draft: usize,
}

impl Default for Config {
    /// `kestrel run`'s defaults: 4096 positions, chunks of 128, f16 cache;
    /// texts up to 4 KiB.
    fn default() -> Self {
        Config {
            context: 4096,
            batch: PREFILL_CHUNK,
            kv: KvType::F16,
            text_bytes: 4096,
            draft: 0,
        }
    }
}

/// Chat-template bytes a turn adds around its message (ChatML tags, the
/// default system prompt of Qwen2.5).
const TURN_OVERHEAD: usize = 256;
/// Template bytes counted for each message of
/// [`Conversation::chat_messages`] beyond the first two, against the
/// config's `text_bytes` (a tool's answer's tags are the longest:
/// `<|im_start|>user\n<tool_response>\n`, its end).
const MESSAGE_OVERHEAD: usize = 64;
/// Data ranges of one formatted turn: a system and a user text, or
/// [`MAX_MESSAGES`] messages' texts.
const DATA_RANGES: usize = MAX_MESSAGES + 1;

/// Most messages [`Conversation::chat_messages`] formats at once.
pub const MAX_MESSAGES: usize = 32;

/// The buffers an engine needs for a model and a [`Config`], in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// [`LayerWeights`] for [`Model::open`].
    pub layers: usize,
    /// Bytes of the KV cache and activations (the first part of
    /// [`Sizes::memory`]).
    pub arena: usize,
    /// Token ids of the history: one per cached position.
    pub history: usize,
    /// Token ids of the sampler's scratch: the vocabulary size.
    pub candidates: usize,
    /// Token ids of a predicted answer ([`Conversation::set_drafting`]):
    /// the context, or none when the config drafts nothing.
    pub prediction: usize,
    /// Bytes of a formatted chat turn.
    pub text: usize,
    /// Bytes of the tokenizer's normalization scratch.
    pub norm: usize,
    /// u32 words of the tokenizer's BPE scratch.
    pub work: usize,
    /// The context length the engine gets (the config's, capped by the
    /// file's).
    pub context: usize,
    /// Bytes of the one block [`Conversation::new`] takes: all of the above but
    /// the layers, each part 64-byte aligned.
    pub memory: usize,
}

impl Sizes {
    /// Checks `model` (a VQF file) and sizes every buffer for `config`.
    pub fn new(model: &[u8], config: &Config) -> Result<Sizes, Error> {
        let vqf = Vqf::parse(model)?;
        Sizes::of(&vqf, config)
    }

    /// [`Sizes::new`] for a file already parsed (each parse checks every
    /// byte: a host that opens the model right after sizes it once).
    pub fn of(vqf: &Vqf, config: &Config) -> Result<Sizes, Error> {
        let cfg = vqf.config();
        let opts = options(vqf, config)?;
        if config.text_bytes > MAX_TEXT_BYTES {
            return Err(Error::OutOfRange {
                what: "text_bytes",
                value: config.text_bytes,
                max: MAX_TEXT_BYTES,
            });
        }
        let mut sizes = Sizes {
            layers: Weights::layer_slots(cfg),
            arena: ArenaSizes::new(cfg, &opts)?.total,
            history: opts.max_seq,
            candidates: cfg.vocab_size as usize,
            prediction: if config.draft > 0 { opts.max_seq } else { 0 },
            text: Sizes::text_len(config.text_bytes),
            norm: Sizes::norm_len(config.text_bytes),
            work: Sizes::work_len(config.text_bytes),
            context: opts.max_seq,
            memory: 0,
        };
        sizes.memory = sizes
            .parts()
            .iter()
            .try_fold(ALIGN - 1, |sum, &part| {
                part.checked_add(ALIGN - 1)
                    .map(|p| p / ALIGN * ALIGN)
                    .and_then(|p| sum.checked_add(p))
            })
            .ok_or(overflow("engine memory"))?;
        Ok(sizes)
    }

    /// The byte sizes of the memory block's parts, in order: arena,
    /// history, candidates, prediction, text, norm, work.
    fn parts(&self) -> [usize; 7] {
        [
            self.arena,
            self.history.saturating_mul(4),
            self.candidates.saturating_mul(4),
            self.prediction.saturating_mul(4),
            self.text,
            self.norm,
            self.work.saturating_mul(4),
        ]
    }

    /// [`Sizes::text`] for texts of up to `text_bytes` bytes (for buffers
    /// sized at compile time).
    pub const fn text_len(text_bytes: usize) -> usize {
        text_bytes + TURN_OVERHEAD
    }

    /// [`Sizes::norm`] for texts of up to `text_bytes` bytes.
    pub const fn norm_len(text_bytes: usize) -> usize {
        3 * Sizes::text_len(text_bytes) + 16
    }

    /// [`Sizes::work`] for texts of up to `text_bytes` bytes.
    pub const fn work_len(text_bytes: usize) -> usize {
        EncodeScratch::work_len_for(Sizes::text_len(text_bytes) + 16)
    }
}

/// The alignment of each part of an engine's memory block.
const ALIGN: usize = 64;

/// Longest [`Config::text_bytes`] (16 MiB): the size helpers cannot
/// overflow below it.
pub const MAX_TEXT_BYTES: usize = 1 << 24;

fn overflow(what: &'static str) -> Error {
    Error::Overflow { what }
}

/// The state's options for `config` on `vqf`.
fn options(vqf: &Vqf, config: &Config) -> Result<Options, Error> {
    if config.draft > MAX_DRAFT {
        return Err(Error::OutOfRange {
            what: "draft",
            value: config.draft,
            max: MAX_DRAFT,
        });
    }
    if config.context == 0 {
        return Err(Error::OutOfRange {
            what: "context",
            value: 0,
            max: vqf.header().max_seq as usize,
        });
    }
    Ok(Options {
        max_seq: config.context.min(vqf.header().max_seq as usize).max(1),
        max_batch: config.batch,
        kv: config.kv,
        all_logits: false,
        slots: 1,
        draft: config.draft,
    })
}

/// A model opened over its file's bytes: every tensor checked and
/// resolved once.
pub struct Model<'m> {
    /// The views the forward pass reads.
    pub weights: Weights<'m>,
}

impl<'m> Model<'m> {
    /// Opens the VQF file in `bytes` (64-byte aligned: its f32 and f16
    /// tensors are read in place); `layers` holds [`Sizes::layers`] views.
    pub fn open(bytes: &'m [u8], layers: &'m mut [LayerWeights<'m>]) -> Result<Model<'m>, Error> {
        Model::of(Vqf::parse(bytes)?, layers)
    }

    /// [`Model::open`] of a file already parsed.
    pub fn of(vqf: Vqf<'m>, layers: &'m mut [LayerWeights<'m>]) -> Result<Model<'m>, Error> {
        Model::with_prefill(vqf, true, layers)
    }

    /// [`Model::of`] choosing the prompt's copy: with `prefill_q8` a file's
    /// Q8 prefill copies serve prompts (the default), without it every
    /// matrix product reads the decode copy (`--no-prefill-q8`). The one
    /// loader of every host: the command line, the server, the C ABI and
    /// the firmware host open their files here.
    pub fn with_prefill(
        vqf: Vqf<'m>,
        prefill_q8: bool,
        layers: &'m mut [LayerWeights<'m>],
    ) -> Result<Model<'m>, Error> {
        if vqf.bytes().as_ptr().align_offset(64) != 0 {
            return Err(Error::Malformed {
                what: "model bytes: not 64-byte aligned in memory",
                at: 0,
            });
        }
        Ok(Model {
            weights: Weights::new(vqf, prefill_q8, layers)?,
        })
    }
}

/// The next `len` bytes of `rest` (from a 64-byte aligned start; the
/// caller checked the total).
fn carve<'s>(rest: &mut &'s mut [u8], len: usize) -> &'s mut [u8] {
    let all = core::mem::take(rest);
    let padded = len.div_ceil(ALIGN).saturating_mul(ALIGN).min(all.len());
    let (head, tail) = all.split_at_mut(padded);
    *rest = tail;
    let len = len.min(head.len());
    &mut head[..len]
}

fn words(bytes: &mut [u8]) -> Result<&mut [u32], Error> {
    cast::as_u32_mut(bytes).ok_or(Error::Overflow {
        what: "engine memory alignment",
    })
}

/// What [`Conversation::next`] produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A token of the answer (already run through the model).
    Token(u32),
    /// An end token: the answer is over (the token joined the cache, so
    /// the next turn follows it).
    End(u32),
}

/// How [`Conversation::generate`] ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Generated {
    /// Tokens of the answer (an end token not counted): the `tokens` ids
    /// of [`Conversation::history`] from where it ended before the call (all but
    /// the last when [`Generated::full`]).
    pub tokens: usize,
    /// It ended on an end token or a stop string.
    pub stopped: bool,
    /// The cancel flag ended it (the tokens so far are cached, the last one
    /// run: [`Conversation::next`] or [`Conversation::generate`] may go on).
    pub cancelled: bool,
    /// The cache filled up: the answer's last token has no row (it is not
    /// in [`Conversation::history`]; the conversation cannot go on).
    pub full: bool,
    /// Tokens drafted by prompt lookup (over the prediction, then the
    /// conversation).
    pub drafted: usize,
    /// Drafted tokens kept.
    pub accepted: usize,
}

fn not_ready() -> Error {
    Error::NotReady {
        what: "no prompt fed since the last answer, or the last feed stopped",
    }
}

/// One conversation: the model, its KV cache in caller memory, the
/// sampler and the text streams. Feed a prompt, then pull tokens.
pub struct Conversation<'w, 's, 'p, P: Parallel> {
    gen: Generator<'w, 's, 'p, P, &'s mut [u32], &'s mut [u32]>,
    style: ChatStyle<'w>,
    text: &'s mut [u8],
    norm: &'s mut [u8],
    work: &'s mut [u32],
    /// The text of the tokens pulled so far (a character split across
    /// tokens waits for its end).
    stream: StreamDecoder,
    /// The last fed row's logits are waiting to be sampled.
    ready: bool,
    /// An answer was pulled or generated and did not end on an end token
    /// (cut by `max_tokens`, cancelled, the cache full): the next
    /// `chat_turn` closes it first (`chat::format_turn` writes
    /// [`chat::END_OF_TURN`]), as `kestrel chat`'s next turn does.
    answer_open: bool,
    /// Longest text `tokenize` and `chat_turn` take ([`Config::text_bytes`]).
    text_bytes: usize,
    /// Texts that end an answer of [`Conversation::generate`]
    /// ([`Conversation::set_stop_strings`]).
    stop_strings: heapless::Vec<heapless::String<MAX_STOP_BYTES>, MAX_STOP_STRINGS>,
    /// The context policy: `None` refuses a feed that does not fit;
    /// `Some(keep)` keeps the first `keep` tokens and drops the oldest
    /// turns ([`Generator::make_room`]).
    keep: Option<usize>,
    /// Most tokens drafted per verify step ([`Conversation::set_drafting`];
    /// at most the config's `draft`).
    draft: usize,
    /// The predicted answer's ids (the first `predicted`).
    prediction: &'s mut [u32],
    predicted: usize,
    /// The last `generate`'s drafted and accepted tokens.
    drafts: (usize, usize),
}

/// Most stop strings [`Conversation::set_stop_strings`] takes.
pub const MAX_STOP_STRINGS: usize = 4;
/// Most bytes of one stop string.
pub const MAX_STOP_BYTES: usize = 64;
/// Text held back while it may begin a stop string: the longest one's
/// bytes but one, and the longest piece one token completes.
const HELD_BYTES: usize = MAX_STOP_BYTES + 2 * crate::constrain::MAX_TOKEN_BYTES;

impl<'w, 's, 'p, P: Parallel> Conversation<'w, 's, 'p, P> {
    /// An engine over `model` with an empty cache; `kernels` as the host
    /// detected them, `pool` running the loops.
    pub fn new(
        model: &'w Model<'w>,
        kernels: Kernels,
        pool: &'p P,
        config: &Config,
        sampler: SamplerConfig,
        memory: &'s mut [u8],
    ) -> Result<Self, Error> {
        let w = &model.weights;
        let sizes = Sizes::of(&w.vqf, config)?;
        if memory.len() < sizes.memory {
            return Err(Error::BufferTooSmall {
                what: "engine memory (bytes)",
                need: sizes.memory,
                have: memory.len(),
            });
        }
        let skip = memory.as_ptr().align_offset(ALIGN).min(ALIGN - 1);
        let mut rest = &mut memory[skip..];
        let [arena, history, candidates, prediction, text, norm, work] = sizes.parts();
        let arena = carve(&mut rest, arena);
        let history = words(carve(&mut rest, history))?;
        let candidates = words(carve(&mut rest, candidates))?;
        let prediction = words(carve(&mut rest, prediction))?;
        let (text, norm) = (carve(&mut rest, text), carve(&mut rest, norm));
        let work = words(carve(&mut rest, work))?;
        let state = State::new(&w.cfg, options(&w.vqf, config)?, arena)?;
        let gen = Generator::new(w, kernels, pool, state, sampler, history, candidates)?;
        let template = w.vqf.tokenizer().map_or(&[][..], |t| t.chat_template());
        Ok(Conversation {
            gen,
            style: ChatStyle::from_template(template),
            text,
            norm,
            work,
            stream: StreamDecoder::new(true),
            ready: false,
            answer_open: false,
            text_bytes: config.text_bytes,
            stop_strings: heapless::Vec::new(),
            keep: None,
            draft: config.draft,
            prediction,
            predicted: 0,
            drafts: (0, 0),
        })
    }

    /// The vocabulary size: token ids are below it.
    pub fn vocab(&self) -> usize {
        self.gen.weights.cfg.vocab_size as usize
    }

    /// The context length: most tokens the cache holds.
    pub fn context(&self) -> usize {
        self.gen.state.opts.max_seq
    }

    /// Every token in the KV cache, in order.
    pub fn history(&self) -> &[u32] {
        self.gen.history()
    }

    /// The kernels in use.
    pub fn kernels(&self) -> Kernels {
        self.gen.kernels
    }

    /// Token ids of `text` into `out`; returns how many. `special`: the
    /// caller wrote its own template, so special tokens' text (e.g.
    /// `<|im_start|>`) becomes those tokens; otherwise all of `text` is
    /// data and never a control token. If `out` is too small the error
    /// says how many ids the text needs.
    pub fn tokenize(&mut self, text: &str, special: bool, out: &mut [u32]) -> Result<usize, Error> {
        let whole = 0..text.len();
        let data = if special {
            &[][..]
        } else {
            core::slice::from_ref(&whole)
        };
        self.encode(text, data, out)
    }

    fn encode(
        &mut self,
        text: &str,
        data: &[Range<usize>],
        out: &mut [u32],
    ) -> Result<usize, Error> {
        self.check_text(text.len())?;
        let mut scratch = EncodeScratch::new(&mut *self.norm, &mut *self.work);
        let options = EncodeOptions::default();
        self.gen
            .tokenizer
            .encode_data(text, data, options, out, &mut scratch)
    }

    /// Token ids of a user turn in the model's chat format, as `kestrel
    /// run` and `kestrel chat` write it: on an empty cache the system turn
    /// (`system`, else the template's default), the user's message, the
    /// opened assistant turn; after cached turns the same without a system
    /// turn, following the previous answer's end token (an answer that did
    /// not end on one, cut by `max_tokens` or cancelled, is closed first
    /// with [`chat::END_OF_TURN`] by `chat::format_turn`, as in `kestrel
    /// chat`). The message and
    /// `system` are data, never control tokens. Returns how many ids.
    pub fn chat_turn(
        &mut self,
        system: Option<&str>,
        user: &str,
        out: &mut [u32],
    ) -> Result<usize, Error> {
        let bytes = user.len().saturating_add(system.map_or(0, str::len));
        self.check_text(bytes)?;
        let (first, open) = (self.gen.history().is_empty(), self.answer_open);
        let message = Message::text(Role::User, user);
        // An answer cut short is closed first, as the model would have.
        self.encode_formatted(bytes, out, |style, w| {
            chat::format_turn(style, system, &message, first, open, None, w)
        })
    }

    /// Token ids of `messages` (system, user, assistant and tool turns, at
    /// most [`MAX_MESSAGES`]) in the model's chat format, then the opened
    /// assistant turn, as the server formats a request's messages (without
    /// tools' schemas): on an empty cache from the start (the template's
    /// default system turn when the first message is not one), after
    /// cached turns following them (an open answer closed first, as by
    /// [`Conversation::chat_turn`]). The texts are data, never control
    /// tokens; together, with 64 bytes for each message past two, they fit
    /// the config's `text_bytes`. Returns how many ids.
    pub fn chat_messages(&mut self, messages: &[Message], out: &mut [u32]) -> Result<usize, Error> {
        if messages.len() > MAX_MESSAGES {
            return Err(Error::OutOfRange {
                what: "messages",
                value: messages.len(),
                max: MAX_MESSAGES,
            });
        }
        // The tags of messages past two (the turn's own room holds those of
        // a system and a user message) count against `text_bytes`.
        let tags = MESSAGE_OVERHEAD * messages.len().saturating_sub(2);
        let bytes = messages
            .iter()
            .fold(tags, |n, m| n.saturating_add(m.content.len()));
        self.check_text(bytes)?;
        let (first, open) = (self.gen.history().is_empty(), self.answer_open);
        self.encode_formatted(bytes, out, |style, w| {
            chat::format_turns(style, messages, first, open, None, w)
        })
    }

    /// Formats a turn with `write` (the texts `bytes` long) and encodes
    /// it, its data ranges as data, into `out`.
    fn encode_formatted(
        &mut self,
        bytes: usize,
        out: &mut [u32],
        write: impl FnOnce(&ChatStyle, &mut BufWriter) -> core::fmt::Result,
    ) -> Result<usize, Error> {
        let mut ranges: [Range<usize>; DATA_RANGES] = core::array::from_fn(|_| 0..0);
        let have = self.text.len();
        let mut w = BufWriter::new(&mut *self.text, &mut ranges);
        if write(&self.style, &mut w).is_err() {
            // The texts fit `text_bytes` (checked): template parts that
            // outgrow TURN_OVERHEAD.
            return Err(Error::BufferTooSmall {
                what: "chat turn scratch (the texts and the template's parts: raise text_bytes)",
                need: bytes.saturating_add(TURN_OVERHEAD),
                have,
            });
        }
        let (text, data) = (w.as_str(), w.data_ranges());
        let mut scratch = EncodeScratch::new(&mut *self.norm, &mut *self.work);
        let options = EncodeOptions::default();
        self.gen
            .tokenizer
            .encode_data(text, data, options, out, &mut scratch)
    }

    /// Runs `ids` through the model after the cached tokens (a whole
    /// prompt, or the next turn of a conversation: the cache is kept), in
    /// chunks of the config's batch; `cancel` is read before each layer
    /// (the chunks completed stay cached; the one it stopped in does not
    /// count). Ids must be below [`Conversation::vocab`].
    pub fn feed(&mut self, ids: &[u32], cancel: &AtomicBool) -> Result<(), Error> {
        self.check_ids(ids)?;
        let mut ids = ids;
        if let (Some(keep), false) = (self.keep, ids.is_empty()) {
            let dropped = self.gen.make_room_for_turn(ids.len(), keep, 0)?;
            if self.answer_open && self.gen.closes_a_dropped_answer(ids, keep, dropped) {
                ids = &ids[1..];
            }
        }
        let room = self.context() - self.gen.history().len();
        if ids.len() > room {
            return Err(Error::ContextFull {
                need: self.gen.history().len().saturating_add(ids.len()),
                max: self.context(),
            });
        }
        if ids.is_empty() {
            return Ok(());
        }
        // Ready again only when the whole prompt ran: a cancel or an error
        // part-way leaves nothing to sample. What is fed after an answer
        // (a `chat_turn`'s ids: its closing included) takes it over.
        self.ready = false;
        self.answer_open = false;
        self.stream = StreamDecoder::new(true);
        let before = self.gen.history().len();
        match self.gen.feed_until(ids, None, cancel, &mut |_, _| {}) {
            Err(Error::Cancelled) => Err(Error::FeedCancelled {
                fed: self.gen.history().len() - before,
                of: ids.len(),
            }),
            r => {
                r?;
                self.ready = true;
                Ok(())
            }
        }
    }

    /// Samples the next token from the last fed row (the sampler, the stop
    /// set, the history) and runs it through the model, so the call after
    /// has its logits. An end token ends the answer and is cached too
    /// (while there is room). With `constraint`, only tokens that keep the
    /// answer within its schema (and an end token only once it is
    /// complete). Errors: nothing fed yet (or the answer ended), a full
    /// cache, `cancel` set.
    pub fn next(
        &mut self,
        cancel: &AtomicBool,
        constraint: Option<&mut Constraint>,
    ) -> Result<Next, Error> {
        if cancel.swap(false, Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        if !self.ready {
            return Err(not_ready());
        }
        self.ready = false;
        self.answer_open = true;
        let next = match self.gen.next_token(constraint)? {
            Sampled::End(id) => {
                self.answer_open = false;
                Next::End(id)
            }
            Sampled::Token { last: true, .. } => {
                // The token's row has no room: the cache is full.
                let max = self.context();
                return Err(Error::ContextFull { need: max + 1, max });
            }
            Sampled::Token { id, .. } => {
                self.ready = true;
                Next::Token(id)
            }
        };
        Ok(next)
    }

    /// Samples up to `max_tokens` tokens as `kestrel run` does (the same
    /// path: [`Generator::decode_speculative`], drafting by prompt lookup,
    /// over the prediction first, when the config's `draft` is set: see
    /// [`Conversation::set_drafting`]), streaming their text to `emit`.
    /// Ends at an end token, at `max_tokens`, at a full cache
    /// ([`Generated::full`]), or when `cancel` is set during it
    /// ([`Generated::cancelled`]; the flag is cleared; set before the call,
    /// it is [`Error::Cancelled`] and nothing runs). After an answer cut by
    /// `max_tokens`, [`Conversation::next`] or this goes on with it.
    /// `constraint`: as for [`Conversation::next`].
    pub fn generate(
        &mut self,
        max_tokens: usize,
        cancel: &AtomicBool,
        emit: &mut dyn FnMut(&str),
        constraint: Option<&mut Constraint>,
    ) -> Result<Generated, Error> {
        self.drafts = (0, 0);
        if cancel.swap(false, Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        if !self.ready {
            return Err(not_ready());
        }
        if max_tokens == 0 {
            return Ok(Generated::default());
        }
        let before = self.gen.history().len();
        self.stream = StreamDecoder::new(true);
        let draft = self.draft;
        // A draft length of 0 is plain decoding, prediction or not.
        let prediction = &self.prediction[..self.predicted * usize::from(draft > 0)];
        let mut drafter = DraftSource::choose(prediction, None, draft > 0);
        let mut spec = Speculation {
            drafter: &mut drafter,
            length: Adaptive::new(draft),
        };
        let mut stats = SpecStats::default();
        self.ready = false;
        // Text that may begin a stop string waits in `held`; one found sets
        // the flag the decoder reads between steps.
        let stops = &self.stop_strings;
        let mut held: heapless::String<HELD_BYTES> = heapless::String::new();
        let mut stop_found = false;
        // With stop strings the decoder reads a flag of its own: a stop
        // string found sets it, and so does the host's cancel (seen with
        // each piece of text), which stays the host's to see.
        let halt = AtomicBool::new(false);
        let flag = if stops.is_empty() { cancel } else { &halt };
        let mut filter = |piece: &str| {
            if stops.is_empty() {
                return emit(piece);
            }
            if cancel.load(Ordering::Relaxed) {
                halt.store(true, Ordering::Relaxed);
            }
            if stop_found {
                return;
            }
            if held.push_str(piece).is_err() {
                emit(&held);
                held.clear();
                if held.push_str(piece).is_err() {
                    return emit(piece);
                }
            }
            let (send, found) = stop_scan(&held, stops);
            emit(&held[..send]);
            if found {
                stop_found = true;
                halt.store(true, Ordering::Relaxed);
                held.clear();
                return;
            }
            let rest: heapless::String<HELD_BYTES> = held[send..].try_into().unwrap_or_default();
            held = rest;
        };
        let answer = self.gen.decode_speculative(
            max_tokens,
            flag,
            &mut filter,
            constraint,
            &mut spec,
            &mut stats,
        );
        if !stop_found && !held.is_empty() {
            emit(&held);
        }
        let answer = answer?;
        let (n, stopped) = (answer.generated, answer.stopped || stop_found);
        // Cut short: by the flag (consumed), else by a full cache.
        let short = !stopped && n < max_tokens;
        let cancelled = short && cancel.swap(false, Ordering::Relaxed);
        // The answer's last token was run (so its logits wait) unless the
        // flag or a full cache stopped it first.
        let last_fed = self.gen.history().len() == before + n;
        self.ready = !stopped && n > 0 && last_fed;
        // Cut by a stop string, the answer still needs its end of turn.
        self.answer_open = !answer.stopped;
        self.drafts = (stats.drafted, stats.accepted);
        Ok(Generated {
            tokens: n,
            stopped,
            cancelled,
            full: !stopped && !cancelled && n > 0 && !last_fed,
            drafted: stats.drafted,
            accepted: stats.accepted,
        })
    }

    /// Tokens the last [`Conversation::generate`] drafted, and how many
    /// of them it kept (both 0 before any).
    pub fn drafts(&self) -> (usize, usize) {
        self.drafts
    }

    /// The text token `id` completes in the answer's stream, into `out`
    /// (special tokens give none; a character split across tokens comes
    /// whole with its last byte). If `out` is too small nothing changes
    /// and the error gives the size needed.
    pub fn piece<'o>(&mut self, id: u32, out: &'o mut [u8]) -> Result<&'o str, Error> {
        self.check_ids(&[id])?;
        self.stream.step(&self.gen.tokenizer, id, out)
    }

    /// Ends the answer's text stream: bytes of an unfinished character
    /// become U+FFFD (at most 3 bytes).
    pub fn piece_end<'o>(&mut self, out: &'o mut [u8]) -> Result<&'o str, Error> {
        self.stream.finish(out)
    }

    /// The text of `ids` into `out` (special tokens included); returns its
    /// length in bytes, or the size needed.
    pub fn detokenize(&self, ids: &[u32], out: &mut [u8]) -> Result<usize, Error> {
        self.check_ids(ids)?;
        self.gen.tokenizer.decode_into(ids, false, out)
    }

    /// `len` bytes of text within the config's `text_bytes`.
    fn check_text(&self, len: usize) -> Result<(), Error> {
        match len > self.text_bytes {
            true => Err(Error::OutOfRange {
                what: "text length in bytes (the config's text_bytes)",
                value: len,
                max: self.text_bytes,
            }),
            false => Ok(()),
        }
    }

    /// Every id below the vocabulary size, or the first that is not.
    fn check_ids(&self, ids: &[u32]) -> Result<(), Error> {
        let vocab = self.gen.weights.cfg.vocab_size;
        match ids.iter().find(|&&id| id >= vocab) {
            Some(&id) => Err(Error::BadToken { id, vocab }),
            None => Ok(()),
        }
    }

    /// The model file's tokenizer.
    pub fn tokenizer(&self) -> &crate::tokenizer::Tokenizer<'w> {
        &self.gen.tokenizer
    }

    /// The sampler's settings now.
    pub fn sampler(&self) -> SamplerConfig {
        self.gen.sampler.cfg
    }

    /// New sampler settings from the next sampled token on (temperature,
    /// top-k/p, min-p, the repetition penalty, the seed): the conversation
    /// and its cache are kept. `reseed`: the generator restarts from
    /// `cfg.seed` (as a new engine's would); else it goes on from its
    /// state. A setting out of range is refused by name
    /// ([`SamplerConfig::check`]) and nothing changes.
    pub fn set_sampler(&mut self, cfg: SamplerConfig, reseed: bool) -> Result<(), &'static str> {
        cfg.check()?;
        self.gen.sampler.cfg = cfg;
        if reseed {
            self.gen.sampler.reseed();
        }
        Ok(())
    }

    /// Values added to the logits of the tokens named, from the next
    /// sampled token on, until set again (none: `&[]`): OpenAI's
    /// `logit_bias`, checked by [`crate::sampler::LogitBias::set`] (refused by name,
    /// nothing changed).
    pub fn set_logit_bias(&mut self, entries: &[(u32, f32)]) -> Result<(), &'static str> {
        let vocab = self.vocab();
        self.gen.sampler.bias.set(entries, vocab)
    }

    /// Bytes [`Conversation::save_state`] writes now.
    pub fn state_size(&self) -> Result<usize, Error> {
        self.gen.state_size(self.ready)
    }

    /// Writes the conversation's state (history, KV rows, the sampler's
    /// generator, and the last row's logits when a token waits to be
    /// sampled: [`crate::saved`]) to the front of `out`; returns its
    /// length. Too small an `out` is an error naming the size needed.
    pub fn save_state(&self, out: &mut [u8]) -> Result<usize, Error> {
        self.gen.save_state(self.ready, out)
    }

    /// Replaces the conversation with a saved one: the next call goes on
    /// as the saved engine's would have (a pull when its logits were
    /// waiting, else a feed). Refused, nothing changed, for a state of
    /// another model file or KV element type, or longer than the context.
    pub fn load_state(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let ready = self.gen.restore_state(bytes)?;
        self.stream = StreamDecoder::new(true);
        self.ready = ready;
        // A state saved with its logits waiting was saved inside an answer.
        self.answer_open = ready;
        Ok(())
    }

    /// Keeps the first `tokens` of the conversation (an earlier turn's
    /// end, from [`Conversation::history`]'s length then) and forgets the rest;
    /// the next call is a feed.
    pub fn rollback(&mut self, tokens: usize) -> Result<(), Error> {
        self.gen.rollback(tokens)?;
        self.stream = StreamDecoder::new(true);
        self.ready = false;
        self.answer_open = false;
        Ok(())
    }

    /// Forgets the conversation: the cache is empty again.
    pub fn reset(&mut self) {
        self.gen.reset();
        self.stream = StreamDecoder::new(true);
        self.ready = false;
        self.answer_open = false;
    }

    /// The context policy for the feeds from now on: `None` (the default)
    /// refuses a feed that does not fit the context
    /// ([`Error::ContextFull`]); `Some(keep)` makes room first by keeping
    /// the first `keep` tokens (a system prompt, say) and dropping the
    /// oldest turns after them, whole, the turns kept run again at their
    /// new positions, so that the feed and an answer of a quarter of the
    /// context after `keep` fit (or at least the feed:
    /// [`Generator::make_room_for_turn`]).
    pub fn set_context_keep(&mut self, keep: Option<usize>) {
        self.keep = keep;
    }

    /// How [`Conversation::generate`] drafts from now on (speculative
    /// decoding: the same tokens, fewer steps): up to `max_draft` tokens
    /// per verify step (0: plain decoding; at most the config's `draft`,
    /// which sized the verify rows), looked up first in `prediction` (the
    /// text the answer is expected to resemble, as ids: OpenAI's predicted
    /// outputs; empty: none; at most the context), then in the
    /// conversation. Refused by name, nothing changed, past those limits
    /// or for an id past the vocabulary.
    pub fn set_drafting(&mut self, max_draft: usize, prediction: &[u32]) -> Result<(), Error> {
        let max = self.gen.state.opts.draft;
        if max_draft > max {
            return Err(Error::OutOfRange {
                what: "max_draft (the config's draft sized the verify rows)",
                value: max_draft,
                max,
            });
        }
        if prediction.len() > self.prediction.len() {
            return Err(Error::OutOfRange {
                what: "prediction tokens (the context; none when the config's draft is 0)",
                value: prediction.len(),
                max: self.prediction.len(),
            });
        }
        self.check_ids(prediction)?;
        self.prediction[..prediction.len()].copy_from_slice(prediction);
        self.predicted = prediction.len();
        self.draft = max_draft;
        Ok(())
    }

    /// Texts that end [`Conversation::generate`]'s answers from now on (at
    /// most [`MAX_STOP_STRINGS`], each 1 to [`MAX_STOP_BYTES`] bytes; none:
    /// only end tokens and the limits end them). The answer's text stops
    /// before the first one found within one `generate` call; the tokens of
    /// the step that found it stay cached (the next `chat_turn` closes the
    /// answer). While they are set, a cancel is seen with the next piece of
    /// text. Refused, nothing changed, when there are too many or one is
    /// empty or too long.
    pub fn set_stop_strings(&mut self, stops: &[&str]) -> Result<(), Error> {
        let mut all = heapless::Vec::new();
        for &s in stops {
            let mut one = heapless::String::new();
            if s.is_empty() || one.push_str(s).is_err() || all.push(one).is_err() {
                return Err(Error::OutOfRange {
                    what: "stop strings (at most 4, each of 1 to 64 bytes)",
                    value: stops.len(),
                    max: MAX_STOP_STRINGS,
                });
            }
        }
        self.stop_strings = all;
        Ok(())
    }

    /// The logits of the last row fed (a prompt's last token, or the token
    /// [`Conversation::next`] pulled last): what the next token is sampled
    /// from, before any sampling setting applies; one per vocabulary id.
    pub fn logits(&self) -> Result<&[f32], Error> {
        match self.ready {
            true => Ok(self.gen.last_logits()),
            false => Err(not_ready()),
        }
    }

    /// The embedding of `ids` (at least one, at most the context) into the
    /// front of `out` (`hidden` floats, returned): the final norm's rows
    /// (what the lm_head reads) pooled as `pooling` says, scaled to unit
    /// length. The text runs as a conversation of its own, in chunks of the
    /// config's batch (`cancel` read before each layer): the conversation
    /// is forgotten, as by [`Conversation::reset`] (not when the call is
    /// refused: a short `out`, no ids or too many, an id past the
    /// vocabulary).
    pub fn embed(
        &mut self,
        ids: &[u32],
        pooling: Pooling,
        out: &mut [f32],
        cancel: &AtomicBool,
    ) -> Result<usize, Error> {
        let text = Text {
            slot: 0,
            ids,
            chunk: self.gen.chunk,
            pooling,
        };
        // Refused before the conversation is forgotten.
        check_text(self.gen.weights, &self.gen.state, &text, out.len())?;
        self.reset();
        let g = &mut self.gen;
        let (w, k) = (g.weights, &g.kernels);
        let done = embed_rows(w, &mut g.state, k, g.pool, &text, out, cancel);
        g.reset();
        done
    }
}
