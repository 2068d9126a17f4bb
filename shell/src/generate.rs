//! Text generation: `kestrel run`, `kestrel chat`, `kestrel tokenize`,
//! `kestrel detokenize`. A [`Session`] keeps the KV cache across turns.

use crate::cli::{all, float32, get, model_arg, opt, switch, value, CommandArgs};
use crate::engine::{self, EngineArgs, Need, OpenModel};
use crate::error::{Context, Error, Result};
use crate::files::Output;
use crate::pool::Pool;
use clap::{value_parser, Arg, ArgMatches, Command};
use kestrel_core::chat::{self, ChatStyle, Message, Role};
use kestrel_core::generate::{DraftModel, Generator, StopSet, PREFILL_CHUNK};
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::Weights;
use kestrel_core::sampler::SamplerConfig;
use kestrel_core::speculate::{Adaptive, DraftSource, Drafter, SpecStats, Speculation};
use kestrel_core::state::State;
use kestrel_core::tokenizer::{EncodeScratch, StreamDecoder, Tokenizer};
use kestrel_core::vqf::write::Sink;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Sampling flags, llama.cpp's names.
#[derive(Clone, Debug)]
pub struct SampleArgs {
    pub temp: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub seed: u64,
}

impl SampleArgs {
    /// The flags, for run and chat. None has a clap default: an absent flag
    /// takes [`SamplerConfig::default`]'s value, which the help shows.
    pub fn args() -> [Arg; 6] {
        let d = SamplerConfig::default();
        let with_default = |name, placeholder, help: &str, default: String| {
            value(name, placeholder, "").help(format!("{help} [default: {default}]"))
        };
        [
            with_default(
                "temp",
                "F",
                "Temperature (0: greedy).",
                d.temperature.to_string(),
            )
            .value_parser(float32()),
            with_default("top-k", "N", "Top-k (0: off).", d.top_k.to_string())
                .value_parser(value_parser!(usize)),
            with_default("top-p", "F", "Top-p (1: off).", d.top_p.to_string())
                .value_parser(float32()),
            with_default("min-p", "F", "Min-p (0: off).", d.min_p.to_string())
                .value_parser(float32()),
            with_default(
                "repeat-penalty",
                "F",
                "Repetition penalty (1: off).",
                d.repeat_penalty.to_string(),
            )
            .value_parser(float32()),
            with_default(
                "seed",
                "N",
                "Random seed (the same seed gives the same text).",
                d.seed.to_string(),
            )
            .value_parser(value_parser!(u64)),
        ]
    }

    pub fn from_matches(m: &ArgMatches) -> Self {
        let d = SamplerConfig::default();
        SampleArgs {
            temp: opt(m, "temp").unwrap_or(d.temperature),
            top_k: opt(m, "top-k").unwrap_or(d.top_k),
            top_p: opt(m, "top-p").unwrap_or(d.top_p),
            min_p: opt(m, "min-p").unwrap_or(d.min_p),
            repeat_penalty: opt(m, "repeat-penalty").unwrap_or(d.repeat_penalty),
            seed: opt(m, "seed").unwrap_or(d.seed),
        }
    }

    /// The sampler's settings, refused (naming the flag's setting) when
    /// one is out of range ([`SamplerConfig::check`]).
    pub fn config(&self) -> Result<SamplerConfig> {
        let c = SamplerConfig {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            seed: self.seed,
            ..SamplerConfig::default()
        };
        c.check()?;
        Ok(c)
    }
}

/// Speculative decoding flags (run, chat, serve).
#[derive(Clone, Debug, Default)]
pub struct SpecArgs {
    /// Draft with prompt lookup.
    pub lookup: bool,
    /// Draft with this model.
    pub draft: Option<PathBuf>,
    /// Most tokens drafted per verify step.
    pub draft_max: usize,
}

impl SpecArgs {
    pub fn args() -> [Arg; 3] {
        [
            switch(
                "lookup",
                "Speculative decoding by prompt lookup: draft what followed the last n-gram earlier in the text (output unchanged).",
            ),
            value(
                "draft",
                "FILE",
                "Speculative decoding with a draft model of the same vocabulary (output unchanged).",
            )
            .value_parser(value_parser!(PathBuf))
            .conflicts_with("lookup"),
            value(
                "draft-max",
                "N",
                "Most tokens drafted per verify step (adapted to acceptance).",
            )
            .value_parser(crate::cli::in_range(1, kestrel_core::speculate::MAX_DRAFT))
            .default_value("8"),
        ]
    }

    pub fn from_matches(m: &ArgMatches) -> Self {
        SpecArgs {
            lookup: m.get_flag("lookup"),
            draft: opt(m, "draft"),
            draft_max: get(m, "draft-max"),
        }
    }

    /// Rows a verify step adds to the state's logits (0 without drafts).
    pub fn draft_rows(&self) -> usize {
        if self.lookup || self.draft.is_some() {
            self.draft_max
        } else {
            0
        }
    }
}

pub struct RunArgs {
    pub model: PathBuf,
    pub prompt: String,
    /// Most tokens to generate.
    pub n_predict: usize,
    pub system: Option<String>,
    /// Feed the prompt as is (no chat format).
    pub raw: bool,
    /// Qwen3 thinking on.
    pub think: bool,
    /// Qwen3 thinking off (the empty think block).
    pub no_think: bool,
    /// After the text, print the generated token ids as `[a, b, c]`.
    pub ids: bool,
    /// Images for the prompt (Qwen3-VL).
    pub images: Vec<PathBuf>,
    /// Resize images to at most this many pixels (default: the model's).
    pub image_max_pixels: Option<u32>,
    /// Answer with JSON valid under this schema.
    pub json_schema: Option<PathBuf>,
    pub sample: SampleArgs,
    pub spec: SpecArgs,
    pub engine: EngineArgs,
}

impl CommandArgs for RunArgs {
    fn command() -> Command {
        Command::new("run")
            .about("Answer one prompt, streaming the text (chat format unless --raw).")
            .args([
                model_arg(),
                value("prompt", "TEXT", "The prompt.")
                    .short('p')
                    .required(true)
                    .allow_hyphen_values(true),
                value("n-predict", "N", "Most tokens to generate.")
                    .short('n')
                    .value_parser(value_parser!(usize))
                    .default_value("256"),
                value("system", "TEXT", "System prompt.").allow_hyphen_values(true),
                switch("raw", "Feed the prompt as is (no chat format)."),
                switch("think", "Qwen3 thinking on."),
                switch("no-think", "Qwen3 thinking off (the empty think block).")
                    .conflicts_with("think"),
                switch(
                    "ids",
                    "After the text, print the generated token ids as `[a, b, c]`.",
                ),
                value(
                    "json-schema",
                    "FILE",
                    "Answer with JSON valid under this JSON schema (constrained sampling).",
                )
                .value_parser(value_parser!(PathBuf)),
            ])
            .args(crate::vision::image_args())
            .args(SampleArgs::args())
            .args(SpecArgs::args())
            .args(EngineArgs::args())
    }

    fn from_matches(m: &ArgMatches) -> Self {
        RunArgs {
            model: get(m, "model"),
            prompt: get(m, "prompt"),
            n_predict: get(m, "n-predict"),
            system: opt(m, "system"),
            raw: m.get_flag("raw"),
            think: m.get_flag("think"),
            no_think: m.get_flag("no-think"),
            ids: m.get_flag("ids"),
            images: all(m, "image"),
            image_max_pixels: opt(m, "image-max-pixels"),
            json_schema: opt(m, "json-schema"),
            sample: SampleArgs::from_matches(m),
            spec: SpecArgs::from_matches(m),
            engine: EngineArgs::from_matches(m),
        }
    }
}

/// Timings of one generation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub prompt_tokens: usize,
    pub prefill_s: f64,
    pub generated: usize,
    pub decode_s: f64,
    /// Stopped on an end token (else on the length limit or an interrupt).
    pub stopped: bool,
    /// Speculative decoding's counts (zero without drafts).
    pub spec: SpecStats,
}

/// A model ready to generate, over the core's [`Generator`] (the one
/// generation path): the shell adds tokenizing, timing and the report.
pub struct Session<'a> {
    /// Weights, tokenizer, state, stop set, sampler and token history.
    pub gen: Generator<'a, 'a, 'a, Pool, Vec<u32>, Vec<u32>>,
    /// Answers constrained to a JSON schema (`--json-schema`), with the
    /// sorted vocabulary.
    pub json: Option<(
        crate::json_output::JsonOutput,
        crate::json_output::SortedVocab,
    )>,
    /// Where drafted tokens come from (speculative decoding).
    pub drafts: Drafts<'a>,
    /// Most tokens drafted per verify step (at most the state's `draft`).
    pub draft_max: usize,
}

/// A session's draft source.
pub enum Drafts<'a> {
    /// Plain decoding.
    None,
    /// Prompt lookup (`--lookup`).
    Lookup,
    /// A draft model (`--draft`).
    Model(Box<DraftModel<'a, 'a, 'a, Pool, Vec<u32>>>),
}

impl<'a> Session<'a> {
    pub fn new(
        w: &'a Weights<'a>,
        kernels: Kernels,
        pool: &'a Pool,
        state: State<'a>,
        sample: SamplerConfig,
    ) -> Result<Self> {
        let history = vec![0; state.opts.max_seq];
        let candidates = vec![0; w.cfg.vocab_size as usize];
        let gen = Generator::new(w, kernels, pool, state, sample, history, candidates)?;
        Ok(Session {
            gen,
            json: None,
            drafts: Drafts::None,
            draft_max: 0,
        })
    }

    /// The session of an opened engine, drafting as `spec` asks (the draft
    /// model is the one [`engine::open`] opened beside the target).
    pub fn of_model(e: OpenModel<'a>, sample: SamplerConfig, spec: &SpecArgs) -> Result<Self> {
        let pool = e.pool();
        let state = State::new(&e.weights.cfg, e.opts, e.arena)?;
        let mut s = Session::new(e.weights, e.kernels, pool, state, sample)?;
        s.draft_max = spec.draft_max.min(e.opts.draft);
        s.drafts = match e.draft {
            Some(d) => {
                let state = State::new(&d.weights.cfg, d.opts, d.arena)?;
                let stops = StopSet::new(&e.weights.cfg, Some(&s.gen.tokenizer));
                let cached = vec![0; d.opts.max_seq * d.opts.slots];
                let m = DraftModel::new(d.weights, e.kernels, pool, state, stops, cached)?;
                Drafts::Model(Box::new(m))
            }
            None if spec.lookup => Drafts::Lookup,
            None => Drafts::None,
        };
        Ok(s)
    }

    /// The model.
    pub fn weights(&self) -> &'a Weights<'a> {
        self.gen.weights
    }

    /// Every token in the KV cache, in order.
    pub fn history(&self) -> &[u32] {
        self.gen.history()
    }

    /// Token ids of `text` (special tokens recognised).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        encode(&self.gen.tokenizer, text)
    }

    /// Token ids of a chat-formatted prompt (its data as text).
    pub fn encode_chat(&self, c: &ChatText) -> Result<Vec<u32>> {
        c.encode(&self.gen.tokenizer)
    }

    /// Runs `ids` through the model; keeps the last logits.
    pub fn feed(&mut self, ids: &[u32]) -> Result<()> {
        Ok(self.gen.feed(ids, None)?)
    }

    /// Forgets the conversation.
    pub fn reset(&mut self) {
        self.gen.reset();
    }

    /// Feeds `prompt`, then samples up to `max` tokens, streaming text to
    /// `emit`. Stops at an end token, at `max`, or when `interrupt` is set.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max: usize,
        interrupt: &AtomicBool,
        emit: &mut dyn FnMut(&str),
    ) -> Result<Stats> {
        let none = crate::vision::Encoded::default();
        self.generate_with_images(prompt, &none, max, interrupt, emit)
    }

    /// [`Session::generate`] for a prompt with images: `prompt` has each
    /// `<|image_pad|>` expanded to its image's tokens, `images` the tower's
    /// output.
    pub fn generate_with_images(
        &mut self,
        prompt: &[u32],
        images: &crate::vision::Encoded,
        max: usize,
        interrupt: &AtomicBool,
        emit: &mut dyn FnMut(&str),
    ) -> Result<Stats> {
        let t = Instant::now();
        let mut scratch = crate::vision::MropeScratch::default();
        let prompt_images = images.for_prompt(prompt.len(), &mut scratch);
        self.gen.feed(prompt, prompt_images)?;
        let prefill_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (model, lookup): (Option<&mut dyn Drafter>, bool) = match &mut self.drafts {
            Drafts::None => (None, false),
            Drafts::Lookup => (None, true),
            Drafts::Model(m) => (Some(m.as_mut()), false),
        };
        let mut drafter = DraftSource::choose(&[], model, lookup);
        let mut spec = Speculation {
            drafter: &mut drafter,
            length: Adaptive::new(self.draft_max),
        };
        let mut counts = SpecStats::default();
        let answer = match self.json.as_mut() {
            Some((out, vocab)) => {
                let view = vocab.view();
                let mut c = out.constraint(&view);
                self.gen.decode_speculative(
                    max,
                    interrupt,
                    emit,
                    Some(&mut c),
                    &mut spec,
                    &mut counts,
                )?
            }
            None => {
                self.gen
                    .decode_speculative(max, interrupt, emit, None, &mut spec, &mut counts)?
            }
        };
        Ok(Stats {
            prompt_tokens: prompt.len(),
            prefill_s,
            generated: answer.generated,
            decode_s: t.elapsed().as_secs_f64(),
            stopped: answer.stopped,
            spec: counts,
        })
    }

    /// Prints the speed line on stderr.
    pub fn report(&self, stats: &Stats, load_ms: f64) {
        let decode_tps = stats.generated as f64 / stats.decode_s.max(1e-9);
        let gbs = self.gen.weights.decode_bytes() as f64 * decode_tps / 1e9;
        eprintln!(
            "\n[kestrel] load {load_ms:.0} ms | prefill {} tok in {:.2} s ({:.1} tok/s) | decode {} tok in {:.2} s ({:.2} tok/s, {:.1} ms/tok, {gbs:.1} GB/s of weights) | {} kernels, {} threads",
            stats.prompt_tokens,
            stats.prefill_s,
            stats.prompt_tokens as f64 / stats.prefill_s.max(1e-9),
            stats.generated,
            stats.decode_s,
            decode_tps,
            1e3 / decode_tps.max(1e-9),
            self.gen.kernels.name(),
            kestrel_core::parallel::Parallel::threads(self.gen.pool),
        );
        let c = stats.spec;
        if !matches!(self.drafts, Drafts::None) {
            eprintln!(
                "[kestrel] speculative: drafted {} tok, accepted {} ({:.1}%) in {} verify steps",
                c.drafted,
                c.accepted,
                100.0 * c.rate(),
                c.steps
            );
        }
    }
}

/// Token ids of `text` (special tokens recognised: a raw prompt whose
/// caller wrote the template).
pub fn encode(tok: &Tokenizer, text: &str) -> Result<Vec<u32>> {
    encode_data(tok, text, &[])
}

/// Token ids of `text` whose byte ranges `data` are data: no added token
/// is read from them (`Tokenizer::encode_each_data`).
fn encode_data(tok: &Tokenizer, text: &str, data: &[std::ops::Range<usize>]) -> Result<Vec<u32>> {
    let mut norm = vec![0u8; 3 * text.len() + 16];
    let mut work = vec![0u32; EncodeScratch::work_len_for(text.len() + 16)];
    let mut scratch = EncodeScratch::new(&mut norm, &mut work);
    let mut ids = Vec::new();
    tok.encode_each_data(text, data, Default::default(), &mut scratch, &mut |id| {
        ids.push(id)
    })?;
    Ok(ids)
}

/// A chat-formatted prompt: its text, and the byte ranges of it that came
/// from the messages and tools (data: never control tokens).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatText {
    pub text: String,
    pub data: Vec<std::ops::Range<usize>>,
}

impl std::fmt::Write for ChatText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.text.push_str(s);
        Ok(())
    }
}

impl chat::ChatWrite for ChatText {
    fn data(&mut self, s: &str) -> std::fmt::Result {
        let at = self.text.len();
        match self.data.last_mut() {
            Some(r) if r.end == at => r.end += s.len(),
            _ if !s.is_empty() => self.data.push(at..at + s.len()),
            _ => {}
        }
        self.text.push_str(s);
        Ok(())
    }
}

impl ChatText {
    /// Its token ids: the template's markers as control tokens, the data
    /// as text.
    pub fn encode(&self, tok: &Tokenizer) -> Result<Vec<u32>> {
        encode_data(tok, &self.text, &self.data)
    }
}

/// The style the model's chat template implies.
pub fn chat_style<'w>(w: &Weights<'w>) -> ChatStyle<'w> {
    ChatStyle::from_template(w.vqf.tokenizer().map(|t| t.chat_template()).unwrap_or(&[]))
}

/// The chat-formatted prompt, with `tools` (each a tool's JSON object) in
/// the system turn.
pub fn chat_prompt(
    w: &Weights,
    messages: &[Message],
    tools: &[kestrel_core::json::Value],
    think: Option<bool>,
) -> ChatText {
    let mut s = ChatText::default();
    let _ = chat::format(&chat_style(w), messages, tools, true, think, &mut s);
    s
}

/// Set by Ctrl-C during a generation.
pub static INTERRUPT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPT.store(true, Ordering::Relaxed);
}

/// Makes Ctrl-C stop the current answer instead of the program.
pub fn catch_ctrl_c() {
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe; the function pointer has the C ABI signal() expects.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
}

pub fn run(a: &RunArgs) -> Result<()> {
    a.sample.config()?; // before the model loads
    let need = Need {
        draft: a.spec.draft_rows(),
        ..Need::one(PREFILL_CHUNK)
    };
    engine::open(&a.model, &a.engine, need, a.spec.draft.as_deref(), |e| {
        run_on(a, e)
    })
}

fn run_on(a: &RunArgs, e: OpenModel<'_>) -> Result<()> {
    let (w, pool, opts, load_ms) = (e.weights, e.pool(), e.opts, e.load_ms);
    let mut s = Session::of_model(e, a.sample.config()?, &a.spec)?;
    if let Some(path) = &a.json_schema {
        let schema = crate::json_output::schema_from_file(path)?;
        let vocab = w.cfg.vocab_size as usize;
        s.json = Some((
            crate::json_output::JsonOutput::new(schema, vocab),
            crate::json_output::SortedVocab::new(&s.gen.tokenizer, vocab),
        ));
    }
    // `--raw`: the caller wrote the template (special tokens recognised);
    // else the prompt is a message's text (data).
    let text = if a.raw {
        ChatText {
            text: a.prompt.clone(),
            data: Vec::new(),
        }
    } else {
        let mut msgs = Vec::new();
        if let Some(sys) = &a.system {
            msgs.push(Message::text(Role::System, sys));
        }
        // Qwen3-VL's chat template puts each image before the text.
        let at_start = vec![0; a.images.len()];
        msgs.push(Message {
            images: &at_start,
            ..Message::text(Role::User, &a.prompt)
        });
        let think = if a.think {
            Some(true)
        } else if a.no_think {
            Some(false)
        } else {
            None
        };
        chat_prompt(w, &msgs, &[], think)
    };
    let kv = opts.kv;
    let images =
        crate::vision::encode_files(w, &s.gen.kernels, pool, &a.images, a.image_max_pixels, kv)?;
    let mut ids = text.encode(&s.gen.tokenizer)?;
    if let Some(v) = w.cfg.vision.filter(|_| !a.images.is_empty()) {
        ids = crate::vision::expand_placeholders(&ids, v.image_token_id, &images.grids)?;
    }
    let mut out = std::io::stdout().lock();
    let stats = s.generate_with_images(
        &ids,
        &images,
        a.n_predict,
        &AtomicBool::new(false),
        &mut |t| {
            let _ = out.write_all(t.as_bytes());
            let _ = out.flush();
        },
    )?;
    let _ = writeln!(out);
    if a.ids {
        let gen = &s.history()[ids.len()..];
        let shown = &gen[..stats.generated.min(gen.len())];
        let _ = writeln!(out, "{}", crate::error::listed(shown));
    }
    s.report(&stats, load_ms);
    Ok(())
}

pub struct ChatArgs {
    pub model: PathBuf,
    pub system: Option<String>,
    /// Most tokens per answer.
    pub n_predict: usize,
    /// Qwen3 thinking off.
    pub no_think: bool,
    /// When the context is full: keep this many first tokens and drop the
    /// oldest turns (else stop).
    pub keep: Option<usize>,
    /// Images for the first turn (Qwen3-VL); `/image PATH` adds one to the next.
    pub images: Vec<PathBuf>,
    /// Resize images to at most this many pixels (default: the model's).
    pub image_max_pixels: Option<u32>,
    pub sample: SampleArgs,
    pub spec: SpecArgs,
    pub engine: EngineArgs,
}

impl CommandArgs for ChatArgs {
    fn command() -> Command {
        Command::new("chat")
            .about("Interactive multi-turn chat on the terminal.")
            .args([
                model_arg(),
                value("system", "TEXT", "System prompt.").allow_hyphen_values(true),
                value("n-predict", "N", "Most tokens per answer.")
                    .short('n')
                    .value_parser(value_parser!(usize))
                    .default_value("1024"),
                switch("no-think", "Qwen3 thinking off."),
                value(
                    "keep",
                    "N",
                    "When the context is full, keep the first N tokens and drop the oldest turns (else: stop).",
                )
                .value_parser(value_parser!(usize)),
            ])
            .args(crate::vision::image_args())
            .args(SampleArgs::args())
            .args(SpecArgs::args())
            .args(EngineArgs::args())
    }

    fn from_matches(m: &ArgMatches) -> Self {
        ChatArgs {
            model: get(m, "model"),
            system: opt(m, "system"),
            n_predict: get(m, "n-predict"),
            no_think: m.get_flag("no-think"),
            keep: opt(m, "keep"),
            images: all(m, "image"),
            image_max_pixels: opt(m, "image-max-pixels"),
            sample: SampleArgs::from_matches(m),
            spec: SpecArgs::from_matches(m),
            engine: EngineArgs::from_matches(m),
        }
    }
}

pub fn chat(a: &ChatArgs) -> Result<()> {
    a.sample.config()?; // before the model loads
    let need = Need {
        draft: a.spec.draft_rows(),
        ..Need::one(PREFILL_CHUNK)
    };
    engine::open(&a.model, &a.engine, need, a.spec.draft.as_deref(), |e| {
        chat_on(a, e)
    })
}

fn chat_on(a: &ChatArgs, e: OpenModel<'_>) -> Result<()> {
    let (w, pool, opts, load_ms) = (e.weights, e.pool(), e.opts, e.load_ms);
    let mut s = Session::of_model(e, a.sample.config()?, &a.spec)?;
    let style = chat_style(w);
    catch_ctrl_c();
    eprintln!("kestrel chat: /reset forgets the conversation, /save FILE and /load FILE keep it, /exit (or Ctrl-D) quits, Ctrl-C stops an answer.");
    if w.cfg.vision.is_some() {
        eprintln!("/image PATH adds an image (JPEG or PNG) to your next message.");
    } else if !a.images.is_empty() {
        return Err(
            "this model has no vision tower (convert a Qwen3-VL or Qwen3.5 model without --text-only to use --image)"
                .into(),
        );
    }
    // Images for the next turn, in order.
    let mut images = a.images.clone();
    let stdin = std::io::stdin();
    let mut first = true;
    // The last answer did not end on its own (cut by -n, Ctrl-C, or loaded
    // mid-answer): the next turn closes it (chat::format_turn).
    let mut answer_open = false;
    // Its last token's logits are the last row's (`/save` keeps them).
    let mut logits_waiting = false;
    loop {
        eprint!("\n> ");
        let mut line = String::new();
        if stdin.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        match line.trim() {
            "/exit" | "/quit" => break,
            "/reset" => {
                s.reset();
                images.clear();
                first = true;
                (answer_open, logits_waiting) = (false, false);
                eprintln!("(conversation reset)");
                continue;
            }
            "" => continue,
            cmd if cmd.starts_with("/save ") || cmd.starts_with("/load ") => {
                let path = Path::new(cmd[6..].trim());
                let done = match cmd.starts_with("/save") {
                    true => {
                        save_chat(&s, logits_waiting, path).map(|n| format!("saved {n} tokens to"))
                    }
                    false => load_chat(&mut s, path).map(|(n, open)| {
                        (answer_open, logits_waiting) = (open, open);
                        format!("loaded {n} tokens from")
                    }),
                };
                match done {
                    Ok(what) => eprintln!("({what} {})", path.display()),
                    Err(e) => eprintln!("({e})"),
                }
                first = s.history().is_empty();
                continue;
            }
            cmd if cmd == "/image" || cmd.starts_with("/image ") => {
                let path = cmd["/image".len()..].trim();
                if w.cfg.vision.is_none() {
                    eprintln!(
                        "(this model has no vision tower: /image needs a Qwen3-VL or Qwen3.5 file)"
                    );
                } else if path.is_empty() {
                    eprintln!("(usage: /image PATH)");
                } else {
                    images.push(PathBuf::from(path));
                    eprintln!("(image {} for the next message: {path})", images.len());
                }
                continue;
            }
            _ => {}
        }
        // Each image goes before the message's text, as Qwen3-VL's chat
        // template puts it (and `kestrel run --image`).
        let encoded = match crate::vision::encode_files(
            w,
            &s.gen.kernels,
            pool,
            &images,
            a.image_max_pixels,
            opts.kv,
        ) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("(images not used, message not sent: {e})");
                images.clear();
                continue;
            }
        };
        // The images before the text.
        let at_start = vec![0; images.len()];
        // The first turn carries the system prompt; later turns append to
        // the conversation already in the KV cache (chat::format_turn).
        let message = Message {
            images: &at_start,
            ..Message::text(Role::User, line)
        };
        let mut text = ChatText::default();
        let _ = chat::format_turn(
            &style,
            a.system.as_deref(),
            &message,
            first,
            answer_open,
            if a.no_think { Some(false) } else { None },
            &mut text,
        );
        let mut ids = text.encode(&s.gen.tokenizer)?;
        if let Some(v) = w.cfg.vision.filter(|_| !images.is_empty()) {
            ids = crate::vision::expand_placeholders(&ids, v.image_token_id, &encoded.grids)?;
        }
        images.clear();
        let max_seq = s.gen.state.opts.max_seq;
        if let Some(keep) = a.keep {
            if let Ok(n @ 1..) = s.gen.make_room_for_turn(ids.len(), keep, 2) {
                if answer_open && s.gen.closes_a_dropped_answer(&ids, keep, n) {
                    ids.remove(0);
                }
                eprintln!("(context full: the oldest {n} tokens after the first {keep} dropped)");
            }
        }
        if s.gen.state.pos + ids.len() + 1 >= max_seq {
            eprintln!("(context full: /reset to start over, or --keep N)");
            continue;
        }
        first = false;
        INTERRUPT.store(false, Ordering::Relaxed);
        let mut out = std::io::stdout().lock();
        let before = s.history().len();
        let stats = s.generate_with_images(&ids, &encoded, a.n_predict, &INTERRUPT, &mut |t| {
            let _ = out.write_all(t.as_bytes());
            let _ = out.flush();
        })?;
        answer_open = !stats.stopped;
        // The answer's last token was run (its logits wait: `/save` keeps
        // them) unless the context filled first.
        logits_waiting = answer_open && s.history().len() == before + ids.len() + stats.generated;
        s.report(&stats, load_ms);
    }
    Ok(())
}

/// `kestrel chat`'s `/save PATH`: the conversation's state (history and
/// KV rows, between turns; with the last row's logits when an open
/// answer's last token was run (`logits_waiting`), as the C ABI saves one
/// mid-answer, so whoever loads it closes the answer) to a file; returns
/// its tokens.
fn save_chat(s: &Session, logits_waiting: bool, path: &Path) -> Result<usize> {
    let mut bytes = vec![0u8; s.gen.state_size(logits_waiting)?];
    s.gen.save_state(logits_waiting, &mut bytes)?;
    let mut out = Output::create(path)?;
    out.write(&bytes).map_err(|e| out.explain(e.into()))?;
    out.commit()?;
    Ok(s.history().len())
}

/// `kestrel chat`'s `/load PATH`: the conversation saved there replaces
/// this one (refused, nothing changed, when another model file or KV type
/// saved it or it does not fit the context); returns its tokens and
/// whether it was saved mid-answer (its logits waiting: the next turn
/// closes the answer, as after a cut one).
fn load_chat(s: &mut Session, path: &Path) -> Result<(usize, bool)> {
    let bytes = std::fs::read(path).with_context(|| path.display())?;
    let waiting = s
        .gen
        .restore_state(&bytes)
        .map_err(|e| Error::from(e).context(path.display()))?;
    Ok((s.history().len(), waiting && !s.history().is_empty()))
}

pub fn tokenize(model: &Path, text: &str) -> Result<()> {
    engine::with_tokenizer(model, |tok, _| tokenize_with(tok, text))
}

fn tokenize_with(tok: &Tokenizer, text: &str) -> Result<()> {
    let mut norm = vec![0u8; 3 * text.len() + 16];
    let mut work = vec![0u32; EncodeScratch::work_len_for(text.len() + 16)];
    let mut scratch = EncodeScratch::new(&mut norm, &mut work);
    let mut ids = Vec::new();
    tok.encode_each(text, Default::default(), &mut scratch, &mut |id| {
        ids.push(id.to_string())
    })?;
    println!("[{}]", ids.join(", "));
    Ok(())
}

pub fn detokenize(model: &Path, ids: &[u32]) -> Result<()> {
    engine::with_tokenizer(model, |tok, _| detokenize_with(tok, ids))
}

fn detokenize_with(tok: &Tokenizer, ids: &[u32]) -> Result<()> {
    let mut dec = StreamDecoder::new(false);
    let mut text = String::new();
    for &id in ids {
        dec.step_with(tok, id, &mut |t| text.push_str(t))?;
    }
    dec.finish_with(&mut |t| text.push_str(t));
    println!("{text}");
    Ok(())
}
