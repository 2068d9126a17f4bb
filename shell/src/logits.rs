//! `kestrel logits`: run token ids as one prefill (in batches), then greedy
//! decode steps through the decode path, and write every position's logits
//! as little-endian f32 rows (the hook for comparing with references).

use crate::cli::{all, get, model_arg, opt, token_id, token_ids, value, CommandArgs};
use crate::engine::{self, EngineArgs, Need};
use crate::error::{Context, Error, Result};
use crate::generate::Session;
use crate::pool::Pool;
use clap::{value_parser, ArgAction, ArgMatches, Command};
use kestrel_core::generate::{Sampled, StopSet};
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::Weights;
use kestrel_core::sampler::SamplerConfig;
use kestrel_core::state::{Options, State};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

pub struct LogitsArgs {
    pub model: PathBuf,
    pub tokens: Vec<u32>,
    greedy: usize,
    out: Option<PathBuf>,
    batch: usize,
    images: Vec<PathBuf>,
    image_max_pixels: Option<u32>,
    engine: EngineArgs,
}

impl CommandArgs for LogitsArgs {
    fn command() -> Command {
        Command::new("logits")
            .about(
                "Run token ids through the model and write every position's logits (f32 LE rows).",
            )
            .args([
                model_arg(),
                value("tokens", "IDS", "Comma-separated token ids of the prompt.")
                    .required(true)
                    .action(ArgAction::Append)
                    .value_delimiter(',')
                    .value_parser(token_id()),
                value("greedy", "N", "Greedy decode steps after the prompt.")
                    .value_parser(value_parser!(usize))
                    .default_value("0"),
                value("out", "PATH", "Output file (default: stdout).")
                    .value_parser(value_parser!(PathBuf)),
                value("batch", "N", "Prefill batch size.")
                    .value_parser(value_parser!(usize))
                    .default_value("32"),
            ])
            .args(crate::vision::image_args())
            .args(EngineArgs::args())
    }

    fn from_matches(m: &ArgMatches) -> Self {
        LogitsArgs {
            model: get(m, "model"),
            tokens: token_ids(m, "tokens"),
            greedy: get(m, "greedy"),
            out: opt(m, "out"),
            batch: get(m, "batch"),
            images: all(m, "image"),
            image_max_pixels: opt(m, "image-max-pixels"),
            engine: EngineArgs::from_matches(m),
        }
    }
}

/// Runs `tokens` as a prefill (batches of `batch`), then `greedy` greedy
/// decode steps; returns every position's logits (rows x vocab) and the
/// generated ids.
pub fn logits(
    model: &Path,
    tokens: &[u32],
    greedy: usize,
    batch: usize,
    engine_args: &EngineArgs,
) -> Result<(Vec<f32>, Vec<u32>)> {
    logits_with_images(model, tokens, &[], None, greedy, batch, engine_args).map(|r| (r.0, r.1))
}

/// Every row's logits, the generated ids, and the prompt as run.
pub type LogitsRun = (Vec<f32>, Vec<u32>, Vec<u32>);

/// [`logits`] with images (Qwen3-VL): `tokens` holds one `<|image_pad|>`
/// per image, expanded here to the image's token count; the rows follow the
/// expanded sequence, which is returned third.
pub fn logits_with_images(
    model: &Path,
    tokens: &[u32],
    images: &[PathBuf],
    image_max_pixels: Option<u32>,
    greedy: usize,
    batch: usize,
    engine_args: &EngineArgs,
) -> Result<LogitsRun> {
    let need = Need {
        all_logits: true,
        ..Need::one(batch.clamp(1, kestrel_core::state::MAX_BATCH))
    };
    engine::open(model, engine_args, need, None, |mut e| {
        let (w, k, pool, opts) = (e.weights, e.kernels, e.pool(), e.opts);
        let s = e.state()?;
        logits_on(
            w,
            s,
            &k,
            pool,
            opts,
            tokens,
            images,
            image_max_pixels,
            greedy,
        )
    })
}

/// [`logits_with_images`] on an opened model.
#[allow(clippy::too_many_arguments)]
fn logits_on(
    w: &Weights,
    s: State,
    k: &Kernels,
    pool: &Pool,
    opts: Options,
    tokens: &[u32],
    images: &[PathBuf],
    image_max_pixels: Option<u32>,
    greedy: usize,
) -> Result<LogitsRun> {
    let vocab = w.cfg.vocab_size as usize;
    let encoded = crate::vision::encode_files(w, k, pool, images, image_max_pixels, opts.kv)?;
    let tokens = match w.cfg.vision.filter(|_| !images.is_empty()) {
        Some(v) => crate::vision::expand_placeholders(tokens, v.image_token_id, &encoded.grids)?,
        None => tokens.to_vec(),
    };
    let mut rows: Vec<f32> = Vec::with_capacity((tokens.len() + greedy) * vocab);
    // The session's one path: its feed (each chunk's rows recorded), then
    // greedy tokens pulled past any end token, each fed token's row
    // recorded.
    let greedy_cfg = SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    };
    let mut session = Session::new(w, *k, pool, s, greedy_cfg)?;
    let gen = &mut session.gen;
    gen.stops = StopSet::NONE;
    let mut scratch = crate::vision::MropeScratch::default();
    let images = encoded.for_prompt(tokens.len(), &mut scratch);
    let no = AtomicBool::new(false);
    gen.feed_until(&tokens, images, &no, &mut |_, l| rows.extend_from_slice(l))?;
    if greedy > 0 && tokens.is_empty() {
        return Err(Error::msg("--greedy needs at least one prompt token"));
    }
    let mut generated = Vec::with_capacity(greedy);
    for _ in 0..greedy {
        match gen.next_token(None)? {
            Sampled::Token { id, last: false } => generated.push(id),
            _ => return Err(Error::msg("the context is full: raise --ctx")),
        }
        rows.extend_from_slice(gen.last_logits());
    }
    Ok((rows, generated, tokens))
}

pub fn run(a: &LogitsArgs) -> Result<()> {
    let (rows, generated, tokens) = logits_with_images(
        &a.model,
        &a.tokens,
        &a.images,
        a.image_max_pixels,
        a.greedy,
        a.batch,
        &a.engine,
    )?;
    let vocab = rows.len() / (tokens.len() + a.greedy).max(1);
    if !generated.is_empty() {
        let ids: Vec<String> = generated.iter().map(|t| t.to_string()).collect();
        eprintln!("greedy: {}", ids.join(","));
    }
    let bytes: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
    match &a.out {
        Some(p) => std::fs::write(p, &bytes).with_context(|| p.display())?,
        None => std::io::stdout().write_all(&bytes)?,
    }
    eprintln!("logits: {} rows x {vocab}", rows.len() / vocab.max(1));
    Ok(())
}
