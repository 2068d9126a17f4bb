//! Loading a model for inference: map the file, validate it once, size the
//! arena, and set up kernels and threads.

use crate::cli::{at_least_one, get, opt, switch, value};
use crate::error::{Context, Result};
use crate::files::Mapped;
use crate::pool::Pool;
use clap::{value_parser, Arg, ArgMatches};
use kestrel_core::embed::Model;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::{LayerWeights, Weights};
use kestrel_core::state::{ArenaSizes, KvType, Options, State};
use kestrel_core::tokenizer::Tokenizer;
use kestrel_core::vqf::Vqf;
use std::cell::OnceCell;
use std::path::Path;
use std::time::Instant;

/// Settings shared by the commands that run the model.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineArgs {
    /// Worker threads (default: the big cores on big.LITTLE, else all cores).
    pub threads: Option<usize>,
    /// Do not pin threads to cores.
    pub no_pin: bool,
    /// Context length (default 4096, capped by the file's max_seq).
    pub ctx: Option<usize>,
    /// KV cache in f32 instead of f16.
    pub kv_f32: bool,
    /// Prefill reads the Q8 copy of a dual file (on by default).
    pub prefill_q8: bool,
}

impl EngineArgs {
    /// `-t/--threads N`.
    pub fn threads_arg() -> Arg {
        value(
            "threads",
            "N",
            "Worker threads (default: the big cores on big.LITTLE, else all cores).",
        )
        .short('t')
        .value_parser(at_least_one())
    }

    /// `--no-pin`.
    pub fn no_pin_arg() -> Arg {
        switch("no-pin", "Do not pin threads to cores.")
    }

    /// The flags, for the commands that run the model.
    pub fn args() -> [Arg; 5] {
        [
            Self::threads_arg(),
            Self::no_pin_arg(),
            value(
                "ctx",
                "N",
                "Context length (default 4096, capped by the file's max_seq).",
            )
            .value_parser(at_least_one()),
            switch("kv-f32", "KV cache in f32 instead of f16."),
            value(
                "prefill-q8",
                "BOOL",
                "Prefill reads the Q8 copy of a dual file (`--prefill-q8 false` reads Q4).",
            )
            .value_parser(value_parser!(bool))
            .default_value("true"),
        ]
    }

    pub fn from_matches(m: &ArgMatches) -> Self {
        EngineArgs {
            threads: opt(m, "threads"),
            no_pin: m.get_flag("no-pin"),
            ctx: opt(m, "ctx"),
            kv_f32: m.get_flag("kv-f32"),
            prefill_q8: get(m, "prefill-q8"),
        }
    }
}

impl Default for EngineArgs {
    fn default() -> Self {
        EngineArgs {
            threads: None,
            no_pin: false,
            ctx: None,
            kv_f32: false,
            prefill_q8: true,
        }
    }
}

/// Runs `f` on the tokenizer and the configuration of the model at `path`
/// (mapped and parsed; no weights resolved, no arena): `kestrel tokenize`,
/// `detokenize` and `schema bench`.
pub fn with_tokenizer<R>(
    path: &Path,
    f: impl FnOnce(&Tokenizer, &kestrel_core::config::Config) -> Result<R>,
) -> Result<R> {
    let map = Mapped::open(path)?;
    let vqf = Vqf::parse(map.bytes()).with_context(|| path.display())?;
    let tables = *vqf.tokenizer().ok_or("this VQF file has no tokenizer")?;
    f(&Tokenizer::new(tables), vqf.config())
}

/// What a command needs of the state beside [`EngineArgs`].
#[derive(Clone, Copy, Debug)]
pub struct Need {
    /// Keep every row's logits.
    pub all_logits: bool,
    /// Most rows of one forward step.
    pub max_batch: usize,
    /// Sequence slots.
    pub slots: usize,
    /// Most drafted tokens a slot verifies in one step (0: none).
    pub draft: usize,
    /// Context length when `--ctx` is not given.
    pub default_ctx: usize,
    /// Shortest context (the server needs a prompt token and an answer's).
    pub min_ctx: usize,
}

impl Need {
    /// One sequence in prompt chunks of `max_batch`, last rows' logits.
    pub fn one(max_batch: usize) -> Need {
        Need {
            all_logits: false,
            max_batch,
            slots: 1,
            draft: 0,
            default_ctx: 4096,
            min_ctx: 1,
        }
    }
}

/// A model opened for a command by [`open`]: the weights resolved once,
/// kernels, threads, the state's options and an arena sized for them.
pub struct OpenModel<'a> {
    /// The model.
    pub weights: &'a Weights<'a>,
    /// The kernels for this CPU.
    pub kernels: Kernels,
    /// The threads, started by the first [`OpenModel::pool`] call on the
    /// thread that will use them (the pool pins its caller).
    pool: &'a OnceCell<Pool>,
    threads: Option<usize>,
    no_pin: bool,
    /// What the arena is sized for.
    pub opts: Options,
    /// The arena (KV cache, activations): `State::new` carves it.
    pub arena: &'a mut [u8],
    /// Milliseconds to map and resolve the file.
    pub load_ms: f64,
    /// The draft model (`--draft`), if any.
    pub draft: Option<DraftEngine<'a>>,
}

/// A draft model opened beside its target: its weights, options and arena
/// (the target's kernels and threads).
pub struct DraftEngine<'a> {
    /// The draft's weights.
    pub weights: &'a Weights<'a>,
    /// Its state's options (the target's slots, no drafts of its own).
    pub opts: Options,
    /// Its arena.
    pub arena: &'a mut [u8],
}

impl<'a> OpenModel<'a> {
    /// The threads (started on the first call, pinned to the biggest
    /// cores unless `--no-pin`; the calling thread is one of them).
    pub fn pool(&self) -> &'a Pool {
        self.pool
            .get_or_init(|| make_pool(self.threads, self.no_pin))
    }

    /// The state over the arena.
    pub fn state(&mut self) -> Result<State<'_>> {
        Ok(State::new(&self.weights.cfg, self.opts, self.arena)?)
    }
}

/// The one loader: maps `path`, parses and resolves it once, sizes the
/// arena for `need` and `args`, starts the threads, opens `draft` (a
/// smaller model of the same vocabulary) beside it, and runs `f` on it.
pub fn open<R>(
    path: &Path,
    args: &EngineArgs,
    need: Need,
    draft: Option<&Path>,
    f: impl FnOnce(OpenModel<'_>) -> Result<R>,
) -> Result<R> {
    // One copy of the loader in the binary, whatever the command: `f` runs
    // through a `dyn` call.
    let mut f = Some(f);
    let mut out = None;
    open_with(path, args, need, draft, &mut |e| {
        if let Some(f) = f.take() {
            out = Some(f(e)?);
        }
        Ok(())
    })?;
    out.ok_or_else(|| "the model was opened but not run".into())
}

fn open_with(
    path: &Path,
    args: &EngineArgs,
    need: Need,
    draft: Option<&Path>,
    f: &mut dyn FnMut(OpenModel<'_>) -> Result<()>,
) -> Result<()> {
    let t = Instant::now();
    let map = Mapped::open(path)?;
    let vqf = Vqf::parse(map.bytes()).with_context(|| path.display())?;
    let mut layers = vec![LayerWeights::EMPTY; Weights::layer_slots(vqf.config())];
    let weights = Model::with_prefill(vqf, args.prefill_q8, &mut layers)
        .with_context(|| path.display())?
        .weights;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let kernels = crate::cpu::detect_kernels();
    let pool = OnceCell::new();
    let file_max = weights.vqf.header().max_seq as usize;
    let opts = Options {
        max_seq: args
            .ctx
            .unwrap_or(need.default_ctx)
            .min(file_max)
            .max(need.min_ctx),
        max_batch: need.max_batch,
        kv: if args.kv_f32 {
            KvType::F32
        } else {
            KvType::F16
        },
        all_logits: need.all_logits,
        slots: need.slots,
        draft: need.draft,
    };
    let mut target_arena = arena(&weights, &opts)?;
    let draft_map = draft.map(Mapped::open).transpose()?;
    let mut draft_layers = Vec::new();
    let mut draft_arena = Vec::new();
    let draft = match (draft, &draft_map) {
        (Some(dpath), Some(dmap)) => {
            let vqf = Vqf::parse(dmap.bytes()).with_context(|| dpath.display())?;
            draft_layers.resize(Weights::layer_slots(vqf.config()), LayerWeights::EMPTY);
            let dw = Model::with_prefill(vqf, args.prefill_q8, &mut draft_layers)
                .with_context(|| dpath.display())?
                .weights;
            check_draft(&weights, &dw, dpath)?;
            let dopts = Options {
                max_seq: opts.max_seq.min(dw.vqf.header().max_seq as usize),
                max_batch: kestrel_core::generate::PREFILL_CHUNK,
                all_logits: false,
                // A draft slot per target slot (the server's each draft).
                slots: need.slots,
                draft: 0,
                ..opts
            };
            draft_arena = arena(&dw, &dopts)?;
            Some((dw, dopts))
        }
        _ => None,
    };
    let draft = draft.as_ref().map(|(dw, dopts)| DraftEngine {
        weights: dw,
        opts: *dopts,
        arena: &mut draft_arena,
    });
    f(OpenModel {
        weights: &weights,
        kernels,
        pool: &pool,
        threads: args.threads,
        no_pin: args.no_pin,
        opts,
        arena: &mut target_arena,
        load_ms,
        draft,
    })
}

/// Refuses a draft model whose vocabulary is not the target's, naming the
/// first token that differs.
fn check_draft(target: &Weights, draft: &Weights, path: &Path) -> Result<()> {
    if draft.cfg.linear.is_some() {
        // Its Gated DeltaNet state cannot go back past a rejected draft.
        return Err(format!("{}: a Qwen3.5 model cannot draft yet", path.display()).into());
    }
    let (Some(a), Some(b)) = (target.vqf.tokenizer(), draft.vqf.tokenizer()) else {
        return Err(format!(
            "{}: a draft model and its target need their tokenizers (convert them from directories with tokenizer.json)",
            path.display()
        )
        .into());
    };
    let (ta, tb) = (Tokenizer::new(*a), Tokenizer::new(*b));
    if let Err(id) = kestrel_core::speculate::same_vocabulary(&ta, &tb) {
        let show = |t: &Tokenizer| match t.tables().token_bytes(id) {
            Some(b) => crate::error::quoted(&String::from_utf8_lossy(b)),
            None => "none".to_string(),
        };
        return Err(format!(
            "{}: the draft model's vocabulary differs from the target's at token {id} ({} against {})",
            path.display(),
            show(&tb),
            show(&ta)
        )
        .into());
    }
    Ok(())
}

/// The default thread count (the pool crate's: the biggest cores on
/// big.LITTLE, else all online CPUs; the hosted C library's too).
pub use crate::pool::default_threads;

/// The pool for `threads` (None: [`default_threads`]), pinned to the
/// biggest cores unless `no_pin`.
pub fn make_pool(threads: Option<usize>, no_pin: bool) -> Pool {
    let cores = crate::pool::system_big_cores();
    let n = threads.unwrap_or(if cores.is_empty() {
        default_threads()
    } else {
        cores.len()
    });
    if no_pin {
        Pool::new(n)
    } else {
        Pool::with_cores(n, &cores)
    }
}

/// An arena sized for `opts`.
pub fn arena(w: &Weights, opts: &Options) -> Result<Vec<u8>> {
    let need = ArenaSizes::new(&w.cfg, opts)?.total;
    let mut v = Vec::new();
    v.try_reserve_exact(need).map_err(|_| {
        format!(
            "cannot allocate {} MB for the KV cache and activations (try a smaller --ctx)",
            need >> 20
        )
    })?;
    v.resize(need, 0);
    Ok(v)
}

/// The options the memory reports (`inspect --memory`, `convert
/// --dry-run`) assume at context `ctx`: f16 KV cache, prefill batches of
/// 128, one slot, no speculation.
pub fn report_options(ctx: usize) -> Options {
    Options {
        max_seq: ctx,
        max_batch: 128,
        kv: KvType::F16,
        all_logits: false,
        slots: 1,
        draft: 0,
    }
}

/// The context lengths the memory reports show: 512, 4096 and 32768 below
/// `max_seq`, then `max_seq`.
pub fn report_contexts(max_seq: u32) -> Vec<usize> {
    let mut ctxs = vec![512usize, 4096, 32768];
    ctxs.retain(|&c| c < max_seq as usize);
    ctxs.push(max_seq as usize);
    ctxs
}

/// The arena one session needs at context `ctx` ([`report_options`]).
pub fn arena_bytes(cfg: &kestrel_core::config::Config, ctx: usize) -> Result<u64> {
    Ok(ArenaSizes::new(cfg, &report_options(ctx))?.total as u64)
}
