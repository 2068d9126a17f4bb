//! The engine thread: owns the state (one KV region per slot), the thread
//! pool and the kernels; admits queued jobs into free slots, then, per
//! turn of its loop, runs one prefill chunk of one admitted prompt and one
//! step of the core's sequence driver (`kestrel_core::generate::Driver`:
//! each generating slot's token and drafts, one GEMM per weight matrix,
//! each slot's rows accepted as `kestrel run` accepts them), and sends
//! each job its tokens. The scheduler keeps admission, queues and
//! streaming; the driver keeps the decode rows, the speculation and the
//! limits. So a long prompt is admitted in chunks between the running
//! streams' steps: they wait at most one chunk, not the whole prompt. When
//! the chunk multiplies the decode copy (a file with one copy, or a
//! one-token chunk), the decode rows ride along it in the same forward step
//! (`prefill_turn`, which also decides how much of the prompt a turn runs):
//! one pass over the weights for both.
//!
//! Equality with `kestrel run`: both run the core's generation path
//! (`kestrel_core::generate`): a job's prompt goes through the same
//! `prefill` plan (chunks of `PREFILL_CHUNK` from position 0, each with the
//! weight copy its length selects), decode steps read the decode copy, and
//! `sample_next` sees the same logits and token history; every kernel
//! computes a row independently of the others, so each job's tokens are
//! `kestrel run`'s, bit for bit, whatever runs beside it. Prefix reuse
//! (`reusable_prefix`) keeps the cached positions whose tokens match the new
//! prompt *and* were computed with the copy the plan would use for them (so
//! generated tokens, decoded with the Q4 copy, are reused only when the file
//! has one copy).

use super::channel::{Receiver, RecvError, Sender};
use kestrel_core::error::Error;
use kestrel_core::generate::{
    embed_chunk, embed_finish, embed_start, prefill_turn, reusable_prefix, sample_next, settle,
    Chunk, DraftModel, Driver, Ending, Limits, Pooling, Prefill, Sampled, Sequence, StopSet,
    Streams, Text, PREFILL_CHUNK,
};
use kestrel_core::kernels::Kernels;
use kestrel_core::model::forward::{forward_rows, Row};
use kestrel_core::model::weights::WeightCopy;
use kestrel_core::model::weights::Weights;
use kestrel_core::parallel::Parallel;
use kestrel_core::sampler::{log_sum_exp, top_ids, LogitBias, Sampler, SamplerConfig};
use kestrel_core::speculate::{Adaptive, DraftSource, Drafter};
use kestrel_core::state::{State, MAX_SLOTS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use kestrel_core::generate::Finish;

/// What the engine sends a job's handler.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The prompt is in the cache; this many of its tokens were reused
    /// from the slot's previous request.
    Prefilled {
        cached: usize,
    },
    /// A sampled token, with its log-probabilities when the job asked.
    Token(u32, Option<TokenLogprobs>),
    /// Speculative decoding's counts for the answer so far (cumulative):
    /// after each step that drafted for it, and before `Done`.
    Drafted {
        drafted: usize,
        accepted: usize,
    },
    Done(Finish),
    /// An embedding job's unit vector.
    Embedding(Vec<f32>),
    Error(String),
}

/// Most alternatives a token's log-probabilities list (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// A sampled token's log-probability and the most likely alternatives',
/// under the model's distribution (the softmax of its logits, before the
/// sampling settings).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprobs {
    pub logprob: f32,
    /// (id, log-probability), most likely first.
    pub top: Vec<(u32, f32)>,
}

impl TokenLogprobs {
    /// The log-probabilities of token `id` and of the `top` most likely
    /// tokens (at most [`MAX_TOP_LOGPROBS`]) under `logits`.
    pub fn of(logits: &[f32], id: u32, top: usize) -> TokenLogprobs {
        let lse = log_sum_exp(logits);
        let lp = |i: u32| (logits[i as usize] as f64 - lse) as f32;
        let mut ids = [0u32; MAX_TOP_LOGPROBS];
        let n = top_ids(logits, &mut ids[..top.min(MAX_TOP_LOGPROBS)]);
        TokenLogprobs {
            logprob: lp(id),
            top: ids[..n].iter().map(|&i| (i, lp(i))).collect(),
        }
    }
}

/// One generation request.
pub struct Job {
    /// The prompt's ids (1 ..= ctx - 1 of them); each image's
    /// `<|image_pad|>` expanded to its token count.
    pub prompt: Vec<u32>,
    /// The prompt's images, preprocessed (Qwen3-VL), in order.
    pub images: Vec<crate::vision::Pixels>,
    /// Most tokens to generate (at least 1).
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
    /// `logit_bias`: (id < vocabulary, bias) added to the logits before
    /// each sampling (after the log-probabilities are taken: those are the
    /// model's own).
    pub logit_bias: LogitBias,
    /// Send each token's log-probabilities, with this many alternatives.
    pub logprobs: Option<usize>,
    /// Constrain the answer to JSON (`response_format`, or a call that
    /// `tool_choice` forces).
    pub json: Option<crate::json_output::JsonOutput>,
    /// Tool calls: each call is constrained to the offered functions'
    /// union (or the named function).
    pub call: Option<CallConstraint>,
    /// `prediction`'s tokens: drafts are looked up in them first (empty:
    /// none).
    pub prediction: Vec<u32>,
    /// `/v1/embeddings`: the prompt is embedded (pooled this way) instead
    /// of answered: one [`Event::Embedding`].
    pub embed: Option<Pooling>,
    /// Set by the handler when its client went away or a stop string matched.
    pub cancel: Arc<AtomicBool>,
    pub events: Sender<Event>,
}

/// The constraint of an answer's tool calls: from each `<tool_call>` (the
/// prompt's, under `required` or a named function, or one the model
/// writes) the call's JSON follows `out`'s schema, and once the JSON is
/// complete the only token allowed is `</tool_call>` (the set `close`);
/// then the answer goes on free (another call, text, or its end).
pub struct CallConstraint {
    pub out: crate::json_output::JsonOutput,
    pub open: u32,
    /// `</tool_call>` alone: what may end a call.
    pub close: StopSet,
    /// Inside a call.
    pub inside: bool,
}

/// A generation in progress: what the stream needs beside the core's
/// [`Sequence`] (the token to feed, drafts, limits and counts live there,
/// in the engine's [`Driver`]).
struct Active {
    job: Job,
    sampler: Sampler,
    /// The logits as the model gave them (sampling changes its row), kept
    /// when the job asked for log-probabilities.
    logits: Vec<f32>,
    /// Time per sampling step (the constraint's mask, the draw), reported
    /// on stderr when a JSON answer ends (every answer's with
    /// `KESTREL_LOG_SAMPLING=1`, for the comparison).
    sample_ns: Vec<u64>,
}

/// A prompt being prefilled, a chunk per turn.
struct Admitting {
    job: Job,
    /// Prompt tokens in the cache: reused, then each chunk's end.
    done: usize,
    /// Reused from the slot's previous request.
    cached: usize,
    /// The tower's output for the prompt's images (empty without).
    encoded: crate::vision::Encoded,
    scratch: crate::vision::MropeScratch,
    /// Where the first image starts (the prompt's length without images).
    first_image: usize,
}

/// A KV region and what it holds.
struct Slot {
    /// The tokens whose keys and values are in the region, in order.
    tokens: Vec<u32>,
    /// The weight copy each of those positions was computed with.
    copies: Vec<WeightCopy>,
    admitting: Option<Admitting>,
    active: Option<Active>,
    /// When the slot last took a job (least recently used goes first).
    used: u64,
    /// Positions a later prompt may reuse: all, or those before the first
    /// image token (equal placeholder ids do not mean equal images).
    reusable_upto: usize,
    /// Took a job since its cache was last kept in `--slot-dir`.
    dirty: bool,
    /// An embedding input under way, one chunk per engine turn while
    /// streams wait for their steps.
    embedding: Option<Embedding>,
}

/// A `/v1/embeddings` input running in a slot.
struct Embedding {
    job: Job,
    pooling: Pooling,
    /// The next chunk to run.
    next: usize,
    /// The pooled rows so far (hidden).
    out: Vec<f32>,
}

/// The scheduler: the slots, the state and everything a step needs; it
/// runs the jobs.
pub struct Scheduler<'a, P: Parallel> {
    pub w: &'a Weights<'a>,
    pub state: State<'a>,
    pub kernels: Kernels,
    pub pool: &'a P,
    pub stops: StopSet,
    /// Queue, slot and KV gauges for `/metrics` and `/health`.
    pub metrics: &'a super::metrics::Metrics,
    /// The vocabulary sorted by bytes, made for the first JSON answer.
    pub vocab: Option<crate::json_output::SortedVocab>,
    /// Every request drafts by prompt lookup (`--lookup`).
    pub lookup: bool,
    /// Every request drafts with this model (`--draft`), in its slot.
    pub draft: Option<DraftModel<'a, 'a, 'a, P, Vec<u32>>>,
    /// `--slot-dir`: where each slot's cache is kept across restarts.
    pub slot_dir: Option<std::path::PathBuf>,
}

/// How many leading positions of `slot` (sequence slot `i` of `state`) a
/// new `prompt` can keep.
fn reusable(w: &Weights, state: &State, i: usize, slot: &Slot, prompt: &[u32]) -> usize {
    reusable_prefix(
        &w.routing,
        PREFILL_CHUNK,
        &slot.tokens,
        &slot.copies,
        slot.reusable_upto,
        prompt,
        w.cfg
            .linear
            .map(|_| (state.recurrent_pos[i], state.snapshot_pos[i])),
    )
}

impl<'a, P: Parallel> Scheduler<'a, P> {
    /// Runs until every job sender is gone.
    pub fn run(mut self, jobs: Receiver<Job>) {
        let slots_n = self.state.opts.slots;
        let vocab = self.w.cfg.vocab_size as usize;
        let mut slots: Vec<Slot> = (0..slots_n)
            .map(|_| Slot {
                tokens: Vec::new(),
                copies: Vec::new(),
                admitting: None,
                active: None,
                used: 0,
                reusable_upto: usize::MAX,
                dirty: false,
                embedding: None,
            })
            .collect();
        for (i, slot) in slots.iter_mut().enumerate() {
            self.load_slot(slot, i);
        }
        let mut candidates = vec![0u32; vocab];
        let mut clock = 0u64;
        let mut driver = Box::new(Driver::<MAX_SLOTS>::new(self.w, &self.state));
        let blank = Row {
            slot: 0,
            pos: 0,
            token: 0,
            logits: true,
        };
        let mut rows: Vec<Row> = vec![blank; self.state.opts.max_batch];
        loop {
            // Cancelled jobs free their slots (their cached tokens stay).
            for (i, s) in slots.iter_mut().enumerate() {
                if s.active
                    .as_ref()
                    .is_some_and(|a| a.job.cancel.load(Ordering::Relaxed))
                {
                    s.active = None;
                    driver.stop(i);
                }
                if s.admitting
                    .as_ref()
                    .is_some_and(|a| a.job.cancel.load(Ordering::Relaxed))
                {
                    s.admitting = None;
                }
                if s.embedding
                    .as_ref()
                    .is_some_and(|e| e.job.cancel.load(Ordering::Relaxed))
                {
                    s.embedding = None;
                }
            }
            for (i, slot) in slots.iter_mut().enumerate() {
                if slot.dirty && slot.free() {
                    self.save_slot(slot, i);
                }
            }
            self.publish(&slots);
            // Admit waiting jobs into free slots.
            while slots.iter().any(Slot::free) {
                let idle = slots.iter().all(Slot::free);
                let job = if idle {
                    match jobs.recv(None) {
                        Ok(j) => j,
                        Err(_) => return,
                    }
                } else {
                    match jobs.recv(Some(std::time::Duration::ZERO)) {
                        Ok(j) => j,
                        Err(RecvError::Empty | RecvError::Disconnected) => break,
                    }
                };
                self.metrics.queued.fetch_sub(1, Ordering::Relaxed);
                if job.cancel.load(Ordering::Relaxed) {
                    continue;
                }
                if let Some(pooling) = job.embed {
                    // Run whole when nothing else waits, else a chunk a
                    // turn (below), one input at a time.
                    self.start_embedding(&mut slots, job, pooling);
                    if slots.iter().any(|s| !s.free()) {
                        break;
                    }
                    continue;
                }
                // The free slot sharing the longest prefix, then the least recently used.
                let Some(i) = (0..slots.len())
                    .filter(|&i| slots[i].free())
                    .max_by_key(|&i| {
                        (
                            reusable(self.w, &self.state, i, &slots[i], &job.prompt),
                            u64::MAX - slots[i].used,
                        )
                    })
                else {
                    break;
                };
                clock += 1;
                slots[i].used = clock;
                self.admit(&mut slots[i], i, job);
            }
            // An embedding under way beside streams: its next chunk.
            let streams = slots
                .iter()
                .any(|s| s.active.is_some() || s.admitting.is_some());
            for (i, slot) in slots.iter_mut().enumerate() {
                if slot.embedding.is_some() {
                    self.embedding_turn(slot, i, !streams);
                }
            }
            self.publish(&slots);
            // The streams' drafts and decode rows (the driver's), then one
            // prefill chunk of the prompt admitted first, the decode rows
            // riding along in the same step when the chunk can take them;
            // all of the prompt when no stream is waiting for a step.
            let mut n = {
                let (mut lanes, _) = self.lanes(&mut slots, &mut candidates);
                driver.plan(&mut lanes);
                driver.rows(&lanes, &mut rows)
            };
            let first = (0..slots.len())
                .filter(|&i| slots[i].admitting.is_some())
                .min_by_key(|&i| slots[i].used);
            let turn = first.map(|i| self.prefill_turn(&mut slots[i], i, &rows[..n]));
            let (rode, started) = turn.unwrap_or((None, None));
            if let (Some(i), Some(at)) = (first, started) {
                // The prompt is in: its answer starts with the token its
                // last row samples.
                let a = slots[i].active.as_ref().expect("a started slot is active");
                let max_tokens = a.job.max_tokens;
                let speculate =
                    DraftSource::drafts(&a.job.prediction, self.draft.is_some(), self.lookup);
                let length = Adaptive::new(self.state.opts.draft);
                let (mut lanes, logits) = self.lanes(&mut slots, &mut candidates);
                let logits = &mut logits[at..at + vocab];
                driver.start(&mut lanes, i, logits, max_tokens, speculate, length);
            }
            let logits_at = match rode {
                Some(at) => at,
                None => {
                    // A step of their own, with the stream the prefill may
                    // just have started.
                    n = driver.rows(&self.lanes(&mut slots, &mut candidates).0, &mut rows);
                    if n == 0 {
                        continue;
                    }
                    let r = forward_rows(
                        self.w,
                        &mut self.state,
                        &self.kernels,
                        self.pool,
                        &rows[..n],
                        self.w.routing.decode,
                        None,
                    );
                    if let Err(e) = r {
                        let msg = format!("inference failed: {e}");
                        for row in &rows[..n] {
                            driver.stop(row.slot);
                            fail(&mut slots[row.slot], &msg);
                        }
                        continue;
                    }
                    0
                }
            };
            // Each slot's rows sampled in order, its drafts kept while the
            // sampler picks them again (the driver's acceptance).
            let (mut lanes, logits) = self.lanes(&mut slots, &mut candidates);
            driver.accept(&mut lanes, &rows[..n], &mut logits[logits_at..]);
            // Qwen3.5: the states of a slot whose drafts were dropped go
            // back to the end of its tokens.
            let (w, k) = (self.w, &self.kernels);
            settle(w, &mut self.state, k, &rows[..n], &|i| {
                slots[i].tokens.len()
            });
        }
    }

    /// The slots as the driver's streams, and the state's logits.
    fn lanes<'x>(
        &'x mut self,
        slots: &'x mut [Slot],
        candidates: &'x mut [u32],
    ) -> (Lanes<'x, 'a, P>, &'x mut [f32]) {
        let lanes = Lanes {
            slots,
            stops: &self.stops,
            candidates,
            vocab: self.vocab.as_ref(),
            draft: self.draft.as_mut(),
            lookup: self.lookup,
            decode: self.w.routing.decode,
            metrics: self.metrics,
        };
        (lanes, &mut self.state.logits[..])
    }

    /// `--slot-dir`'s files of slot `i`: its state (the core's saved
    /// format) and the weight copy of each position (prefix reuse needs it).
    fn slot_files(&self, i: usize) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
        let d = self.slot_dir.as_ref()?;
        Some((
            d.join(format!("slot-{i}.kstate")),
            d.join(format!("slot-{i}.copies")),
        ))
    }

    /// Restores slot `i`'s cache from `--slot-dir`, if it was kept there
    /// by a server over the same model file (else the slot starts empty).
    fn load_slot(&mut self, s: &mut Slot, i: usize) {
        let Some((state, copies)) = self.slot_files(i) else {
            return;
        };
        let (Ok(bytes), Ok(copies)) = (std::fs::read(&state), std::fs::read(copies)) else {
            return;
        };
        let mut tokens = vec![0u32; self.state.opts.max_seq];
        let r = kestrel_core::saved::restore_slot(self.w, &mut self.state, i, &bytes, &mut tokens);
        match r {
            Ok(r) if r.tokens == copies.len() && !r.logits => {
                tokens.truncate(r.tokens);
                s.tokens = tokens;
                s.copies = copies
                    .iter()
                    .map(|&c| match c {
                        0 => WeightCopy::Prefill,
                        _ => WeightCopy::Decode,
                    })
                    .collect();
                eprintln!(
                    "[kestrel] slot {i}: {} cached tokens from {}",
                    r.tokens,
                    state.display()
                );
            }
            Ok(_) => eprintln!(
                "[kestrel] slot {i}: {} does not match its .copies file: not used",
                state.display()
            ),
            Err(e) => eprintln!("[kestrel] slot {i}: {} not used: {e}", state.display()),
        }
    }

    /// Keeps idle slot `i`'s cache in `--slot-dir` (each file written whole
    /// under a temporary name, then renamed over the old one).
    fn save_slot(&mut self, s: &mut Slot, i: usize) {
        s.dirty = false;
        let Some((state, copies)) = self.slot_files(i) else {
            return;
        };
        // What a later prompt may reuse: not image positions (and so no
        // image's rotary offset: the slot is idle, its next job resets it).
        let n = s.tokens.len().min(s.copies.len()).min(s.reusable_upto);
        if n < s.tokens.len() {
            self.state.rope_delta[i] = 0;
        }
        let saved =
            kestrel_core::saved::slot_size(self.w, &self.state, n, false).and_then(|size| {
                let mut out = vec![0u8; size];
                let (w, tokens) = (self.w, &s.tokens[..n]);
                kestrel_core::saved::save_slot(w, &self.state, i, tokens, 0, None, &mut out)?;
                Ok(out)
            });
        let write = |path: &std::path::Path, bytes: &[u8]| {
            let tmp = path.with_extension("partial");
            std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path))
        };
        let copies_bytes: Vec<u8> = s.copies[..n]
            .iter()
            .map(|&c| (c == WeightCopy::Decode) as u8)
            .collect();
        let r = match saved {
            Ok(bytes) => write(&copies, &copies_bytes).and_then(|()| write(&state, &bytes)),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        if let Err(e) = r {
            eprintln!("[kestrel] slot {i}: not saved to {}: {e}", state.display());
        }
    }

    /// Starts `job`'s embedding in the free slot used least recently
    /// (its cache is overwritten from position 0) and runs it whole when no
    /// other slot is busy ([`Scheduler::embedding_turn`]).
    fn start_embedding(&mut self, slots: &mut [Slot], job: Job, pooling: Pooling) {
        let free = (0..slots.len()).filter(|&i| slots[i].free());
        let Some(i) = free.min_by_key(|&i| slots[i].used) else {
            return;
        };
        let text = Text {
            slot: i,
            ids: &job.prompt,
            chunk: PREFILL_CHUNK,
            pooling,
        };
        let mut out = vec![0f32; self.w.cfg.hidden_size as usize];
        if let Err(e) = embed_start(self.w, &mut self.state, &text, &mut out) {
            let _ = job
                .events
                .send(Event::Error(format!("inference failed: {e}")));
            return;
        }
        let s = &mut slots[i];
        s.tokens.clear();
        s.copies.clear();
        s.dirty = true;
        s.embedding = Some(Embedding {
            job,
            pooling,
            next: 0,
            out,
        });
        let alone = slots
            .iter()
            .all(|s| s.active.is_none() && s.admitting.is_none());
        self.embedding_turn(&mut slots[i], i, alone);
    }

    /// The next chunk of the slot's embedding (every chunk left when
    /// `all`), the same steps as `embed_rows`'; at its end the vector is
    /// sent and the slot is free.
    fn embedding_turn(&mut self, slot: &mut Slot, i: usize, all: bool) {
        let Some(e) = slot.embedding.as_mut() else {
            return;
        };
        let text = Text {
            slot: i,
            ids: &e.job.prompt,
            chunk: PREFILL_CHUNK,
            pooling: e.pooling,
        };
        let (w, k) = (self.w, &self.kernels);
        while e.next < text.chunks() {
            let r = embed_chunk(
                w,
                &mut self.state,
                k,
                self.pool,
                &text,
                e.next,
                &mut e.out,
                &e.job.cancel,
            );
            if let Err(err) = r {
                let _ = e
                    .job
                    .events
                    .send(Event::Error(format!("inference failed: {err}")));
                slot.embedding = None;
                return;
            }
            e.next += 1;
            if !all {
                break;
            }
        }
        if e.next == text.chunks() {
            embed_finish(&text, &mut e.out);
            let out = std::mem::take(&mut e.out);
            let _ = e.job.events.send(Event::Embedding(out));
            slot.embedding = None;
        }
    }

    /// Sets the slot and KV gauges.
    fn publish(&self, slots: &[Slot]) {
        let busy = slots.iter().filter(|s| !s.free()).count();
        let kv: usize = slots.iter().map(|s| s.tokens.len()).sum();
        self.metrics.slots_busy.store(busy, Ordering::Relaxed);
        self.metrics.kv_used.store(kv, Ordering::Relaxed);
    }

    /// Starts `job` in slot `i`: runs its images through the vision tower
    /// and keeps the slot's reusable prefix; [`Scheduler::prefill_turn`] runs
    /// the rest of the prompt.
    fn admit(&mut self, s: &mut Slot, i: usize, job: Job) {
        s.dirty = true;
        let n = job.prompt.len();
        if n == 0 || n >= self.state.opts.max_seq {
            let _ = job
                .events
                .send(Event::Error("the prompt does not fit the context".into()));
            return;
        }
        // With images: the tower's output, and where the first image starts.
        let mut encoded = crate::vision::Encoded::default();
        let mut first_image = usize::MAX;
        if let (Some(v), false) = (self.w.cfg.vision, job.images.is_empty()) {
            match crate::vision::encode(
                self.w,
                &self.kernels,
                self.pool,
                &job.images,
                self.state.opts.kv,
            ) {
                Ok(enc) => encoded = enc,
                Err(e) => {
                    let _ = job.events.send(Event::Error(e.to_string()));
                    return;
                }
            }
            first_image = job
                .prompt
                .iter()
                .position(|&t| t == v.image_token_id)
                .unwrap_or(n);
        }
        let keep = reusable(self.w, &self.state, i, s, &job.prompt).min(first_image);
        s.tokens.truncate(keep);
        s.copies.truncate(keep);
        s.reusable_upto = usize::MAX;
        self.state.rope_delta[i] = 0;
        s.admitting = Some(Admitting {
            job,
            done: keep,
            cached: keep,
            encoded,
            scratch: crate::vision::MropeScratch::default(),
            first_image,
        });
    }

    /// Runs this turn's share of the prompt admitted into slot `i` (the
    /// core's `prefill_turn`: all of it without `riders`, else one chunk
    /// with the other slots' decode rows riding when it can take them; the
    /// plan's chunks, so the bits are those of one whole prefill). After
    /// the last chunk the slot is active: the caller starts its answer in
    /// the driver from the prompt's last row (its first decode row joins
    /// the next step when the riders rode, else this turn's own step).
    /// Returns where the riders' logits start when they rode, and where the
    /// prompt's last row's are when the slot started.
    fn prefill_turn(
        &mut self,
        s: &mut Slot,
        i: usize,
        riders: &[Row],
    ) -> (Option<usize>, Option<usize>) {
        let Some(mut adm) = s.admitting.take() else {
            return (None, None);
        };
        let n = adm.job.prompt.len();
        let mut plan = Prefill {
            slot: i,
            base: 0,
            prompt: &adm.job.prompt,
            keep: adm.done,
            chunk: PREFILL_CHUNK,
            images: adm.encoded.for_prompt(n, &mut adm.scratch),
            interrupt: None,
        };
        let (tokens, copies) = (&mut s.tokens, &mut s.copies);
        let mut on_chunk = |c: &Chunk, _: &[f32]| {
            tokens.extend_from_slice(&adm.job.prompt[c.start..c.end]);
            copies.extend(std::iter::repeat_n(c.copy, c.end - c.start));
        };
        let r = prefill_turn(
            self.w,
            &mut self.state,
            &self.kernels,
            self.pool,
            &mut plan,
            riders,
            &mut on_chunk,
        );
        let done = plan.keep;
        let step = match r {
            Ok(step) => step,
            Err(e) => {
                s.tokens.clear();
                s.copies.clear();
                let _ = adm
                    .job
                    .events
                    .send(Event::Error(format!("inference failed: {e}")));
                // The riders take a step of their own: it stores their keys
                // and values again before any row reads them.
                return (None, None);
            }
        };
        let rode = step.rider_logits;
        let Some(logits_at) = step.prompt_logits else {
            adm.done = done;
            s.admitting = Some(adm);
            return (rode, None);
        };
        if !adm.encoded.grids.is_empty() {
            // Image tokens are not reusable.
            s.reusable_upto = adm.first_image;
        }
        if adm
            .job
            .events
            .send(Event::Prefilled { cached: adm.cached })
            .is_err()
        {
            return (rode, None);
        }
        let vocab = self.w.cfg.vocab_size as usize;
        if (adm.job.json.is_some() || adm.job.call.is_some()) && self.vocab.is_none() {
            if let Some(t) = self.w.vqf.tokenizer() {
                let tok = kestrel_core::tokenizer::Tokenizer::new(*t);
                self.vocab = Some(crate::json_output::SortedVocab::new(&tok, vocab));
            }
        }
        let mut sampler = Sampler::new(adm.job.sampler);
        sampler.bias = adm.job.logit_bias.clone();
        s.active = Some(Active {
            sampler,
            job: adm.job,
            logits: Vec::new(),
            sample_ns: Vec::new(),
        });
        (rode, Some(logits_at))
    }
}

impl Slot {
    /// Neither admitting a prompt nor generating.
    fn free(&self) -> bool {
        self.admitting.is_none() && self.active.is_none() && self.embedding.is_none()
    }
}

/// The slots as the core driver's streams: each slot's tokens, sampler,
/// constraint and draft source, and its job's events.
struct Lanes<'x, 'a, P: Parallel> {
    slots: &'x mut [Slot],
    stops: &'x StopSet,
    candidates: &'x mut [u32],
    /// The vocabulary sorted by bytes (JSON answers).
    vocab: Option<&'x crate::json_output::SortedVocab>,
    draft: Option<&'x mut DraftModel<'a, 'a, 'a, P, Vec<u32>>>,
    /// Every request drafts by prompt lookup (`--lookup`).
    lookup: bool,
    /// The copy decode rows multiply (the positions they fill were
    /// computed with it).
    decode: WeightCopy,
    metrics: &'x super::metrics::Metrics,
}

impl<P: Parallel> Streams for Lanes<'_, '_, P> {
    fn history(&self, slot: usize) -> &[u32] {
        &self.slots[slot].tokens
    }

    /// The draft model's tokens (in the slot's own draft slot), else
    /// prompt lookup over the job's `prediction` then the slot's tokens.
    fn draft(&mut self, slot: usize, next: u32, out: &mut [u32]) -> Result<usize, Error> {
        let s = &mut self.slots[slot];
        let Some(a) = s.active.as_ref() else {
            return Ok(0);
        };
        s.tokens.push(next);
        let model = self.draft.as_deref_mut().map(|m| {
            m.slot = slot;
            m as &mut dyn Drafter
        });
        let r = DraftSource::choose(&a.job.prediction, model, self.lookup).draft(&s.tokens, out);
        s.tokens.pop();
        r
    }

    fn push(&mut self, slot: usize, token: u32) {
        let s = &mut self.slots[slot];
        s.tokens.push(token);
        s.copies.push(self.decode);
    }

    /// The core's `sample_next` (as `kestrel run`'s), the token sent with
    /// its log-probabilities when the job asked.
    fn sample(&mut self, slot: usize, logits: &mut [f32], limits: Limits) -> Option<Sampled> {
        let s = &mut self.slots[slot];
        let a = s.active.as_mut()?;
        if a.job.logprobs.is_some() {
            a.logits.clear();
            a.logits.extend_from_slice(logits);
        }
        let t = std::time::Instant::now();
        let view = self.vocab.map(|v| v.view());
        // Inside a call the model opened: the call's constraint, and only
        // `</tool_call>` ends it (the answer goes on after it).
        let in_call = a.job.call.as_ref().is_some_and(|c| c.inside);
        let (out, stops) = match a.job.call.as_mut() {
            Some(c) if c.inside => (Some(&mut c.out), &c.close),
            _ => (a.job.json.as_mut(), self.stops),
        };
        let mut constraint = match (out, view.as_ref()) {
            (Some(out), Some(view)) => Some(out.constraint(view)),
            _ => None,
        };
        let mut sample = sample_next(
            &mut a.sampler,
            logits,
            &s.tokens,
            self.candidates,
            stops,
            limits,
            constraint.as_mut(),
        );
        if let Some(c) = a.job.call.as_mut() {
            match sample {
                Sampled::End(id) if in_call => {
                    // The call's end: a token of the answer, not its end.
                    let last = limits.generated + 1 >= limits.max_tokens
                        || limits.cached >= limits.max_seq;
                    sample = Sampled::Token { id, last };
                    c.inside = false;
                    c.out.progress = kestrel_core::generate::Progress::new(&c.out.schema);
                }
                Sampled::Token { id, .. } if id == c.open => c.inside = true,
                _ => {}
            }
        }
        a.sample_ns.push(t.elapsed().as_nanos() as u64);
        if let Sampled::Token { id, .. } = sample {
            let lp = a
                .job
                .logprobs
                .map(|top| TokenLogprobs::of(&a.logits, id, top));
            if a.job.events.send(Event::Token(id, lp)).is_err() {
                s.active = None;
                return None;
            }
        }
        Some(sample)
    }

    /// An end token finishes with `stop`; the length limit or a full
    /// context with `length`.
    fn ended(&mut self, slot: usize, seq: &Sequence, ending: Ending) {
        let Some(a) = self.slots[slot].active.take() else {
            return;
        };
        let progress = a.job.json.as_ref().map(|out| &out.progress);
        if progress.is_some() || std::env::var_os("KESTREL_LOG_SAMPLING").is_some() {
            report_sampling(&a.sample_ns, progress);
        }
        if seq.stats.drafted > 0 {
            let _ = a.job.events.send(Event::Drafted {
                drafted: seq.stats.drafted,
                accepted: seq.stats.accepted,
            });
        }
        let _ = a.job.events.send(Event::Done(ending.finish));
    }

    /// The counts so far go to the job after each drafting step (an answer
    /// a stop string or the client ends before `Done` still reports them)
    /// and to the metrics.
    fn verified(&mut self, slot: usize, drafted: usize, accepted: usize, going: Option<&Sequence>) {
        self.metrics
            .drafted_tokens
            .fetch_add(drafted as u64, Ordering::Relaxed);
        self.metrics
            .accepted_tokens
            .fetch_add(accepted as u64, Ordering::Relaxed);
        if let (Some(seq), Some(a)) = (going, self.slots[slot].active.as_ref()) {
            let _ = a.job.events.send(Event::Drafted {
                drafted: seq.stats.drafted,
                accepted: seq.stats.accepted,
            });
        }
    }
}

/// The cost of sampling an answer, on stderr: the median and the slowest
/// step (for a JSON answer the mask, the draw and the matcher's move, and
/// how many steps needed the whole vocabulary's mask).
fn report_sampling(ns: &[u64], json: Option<&kestrel_core::generate::Progress>) {
    let mut sorted = ns.to_vec();
    kestrel_core::sort::sort_by(&mut sorted, |a, b| a.cmp(b));
    let ms = |x: u64| x as f64 / 1e6;
    let kind = match json {
        Some(p) => format!(
            "json answer: {} steps, {} with the whole mask",
            p.steps, p.masked
        ),
        None => format!("answer: {} steps", ns.len()),
    };
    eprintln!(
        "[kestrel] {kind}; sampling step median {:.3} ms, max {:.3} ms",
        ms(sorted.get(sorted.len() / 2).copied().unwrap_or(0)),
        ms(sorted.last().copied().unwrap_or(0)),
    );
}

fn fail(s: &mut Slot, msg: &str) {
    if let Some(a) = s.active.take() {
        let _ = a.job.events.send(Event::Error(msg.to_string()));
    }
    s.tokens.clear();
    s.copies.clear();
}
