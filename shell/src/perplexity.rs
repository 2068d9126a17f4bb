//! `kestrel perplexity`: llama-perplexity's protocol on a text file, and
//! KL divergence against a reference run.
//!
//! The text is tokenized once (no chat format, no BOS: Qwen has none) and
//! cut into chunks of `--ctx` tokens (default 512; a shorter tail is
//! dropped). Each chunk runs from an empty cache through the prefill plan
//! (batches of at most 128, each with the weight copy its length selects;
//! `--prefill-q8 false` makes them read the decode copy of a dual file),
//! and its second half is scored: position `j` in `ctx/2 .. ctx - 1`
//! predicts token `j + 1`. PPL = exp(mean NLL), with the standard error
//! `PPL * sqrt(var(NLL) / (n - 1))` (llama-perplexity's).
//!
//! `--kl-base FILE` writes the scored positions' log-probabilities (f32,
//! full vocabulary) with the token ids; `--kl FILE` reads such a file from
//! another run of the same text and reports, over the scored positions:
//! mean KL(base || this) with its standard error, the 99th percentile,
//! top-1 agreement (the two runs' argmax equal), the RMS difference of the
//! probability each run gives the base's top token, and the PPL ratio.
//! (`libm`'s exp and log, as the core's sampler: one math library in the
//! shipped binary.)

use crate::cli::{get, model_arg, opt, value, CommandArgs};
use crate::engine::{self, EngineArgs, Need};
use crate::error::{Context, Error, Result};
use clap::{value_parser, ArgMatches, Command};
use kestrel_core::generate::{self, Prefill};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

/// Prompt tokens per forward step (also the lm_head's rows per step).
const BATCH: usize = 128;
/// `--kl-base` files start with this.
const MAGIC: &[u8; 8] = b"KSTLPB01";

pub struct PerplexityArgs {
    pub model: PathBuf,
    pub file: PathBuf,
    pub chunks: Option<usize>,
    pub kl_base: Option<PathBuf>,
    pub kl: Option<PathBuf>,
    pub engine: EngineArgs,
}

impl CommandArgs for PerplexityArgs {
    fn command() -> Command {
        Command::new("perplexity")
            .about("Perplexity of a text (llama-perplexity's protocol), and KL against a reference run.")
            .args([
                model_arg(),
                value("file", "TEXT", "The text file to score.")
                    .short('f')
                    .required(true)
                    .value_parser(value_parser!(PathBuf)),
                value("chunks", "N", "Score at most N chunks.")
                    .value_parser(value_parser!(usize)),
                value("kl-base", "FILE", "Write the scored positions' log-probabilities to FILE (the reference, from an f32 file).")
                    .value_parser(value_parser!(PathBuf)),
                value("kl", "FILE", "Compare with the log-probabilities in FILE (from --kl-base on the same text).")
                    .value_parser(value_parser!(PathBuf)),
            ])
            .args(EngineArgs::args())
    }

    fn from_matches(m: &ArgMatches) -> Self {
        PerplexityArgs {
            model: get(m, "model"),
            file: get(m, "file"),
            chunks: opt(m, "chunks"),
            kl_base: opt(m, "kl-base"),
            kl: opt(m, "kl"),
            engine: EngineArgs::from_matches(m),
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Scored positions.
    pub scored: usize,
    /// exp(mean NLL).
    pub ppl: f64,
    /// Its standard error.
    pub ppl_err: f64,
    /// With `--kl`: the comparison.
    pub kl: Option<KlReport>,
}

/// The comparison with a reference run.
#[derive(Clone, Debug, Default)]
pub struct KlReport {
    /// Mean KL(base || this), nats.
    pub mean: f64,
    /// Its standard error.
    pub mean_err: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Fraction of positions whose argmax equals the base's.
    pub top1: f64,
    /// RMS of (p_this - p_base) of the base's top token.
    pub rms_top_p: f64,
    /// The base run's PPL, and this PPL over it.
    pub base_ppl: f64,
    /// PPL / base PPL.
    pub ppl_ratio: f64,
}

/// Mean and standard error of the mean of `v` (n - 1 in the variance).
fn mean_err(sum: f64, sum2: f64, n: usize) -> (f64, f64) {
    let n_f = n.max(1) as f64;
    let mean = sum / n_f;
    let var = (sum2 / n_f - mean * mean).max(0.0);
    let err = if n > 1 {
        (var / (n_f - 1.0)).sqrt()
    } else {
        0.0
    };
    (mean, err)
}

/// log-softmax of `logits` in f64 into `out`.
fn log_softmax(logits: &[f32], out: &mut [f64]) {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let sum: f64 = logits.iter().map(|&x| libm::exp(x as f64 - max)).sum();
    let log_z = max + libm::log(sum);
    for (o, &x) in out.iter_mut().zip(logits) {
        *o = x as f64 - log_z;
    }
}

fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// The reference file being read by `--kl`.
struct Base {
    r: BufReader<std::fs::File>,
    row: Vec<f32>,
}

fn read_u32(r: &mut impl Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// Token ids of `text` with the model's tokenizer (no chat format).
pub(crate) fn tokenize(w: &kestrel_core::model::weights::Weights, text: &str) -> Result<Vec<u32>> {
    let tables = *w
        .vqf
        .tokenizer()
        .ok_or_else(|| Error::msg("this VQF file has no tokenizer"))?;
    crate::generate::encode(&kestrel_core::tokenizer::Tokenizer::new(tables), text)
}

/// Runs the protocol; prints progress on stderr.
pub fn perplexity(a: &PerplexityArgs) -> Result<Report> {
    let text = std::fs::read_to_string(&a.file).with_context(|| a.file.display())?;
    let ctx = a.engine.ctx.unwrap_or(512);
    let engine_args = EngineArgs {
        ctx: Some(ctx),
        ..a.engine.clone()
    };
    let need = Need {
        all_logits: true,
        ..Need::one(BATCH.clamp(1, ctx))
    };
    engine::open(&a.model, &engine_args, need, None, |mut e| {
        let w = e.weights;
        let file_max = w.vqf.header().max_seq as usize;
        if ctx < 4 || ctx > file_max {
            return Err(Error::msg(format!(
                "--ctx {ctx}: a chunk needs 4 to {file_max} tokens (the file's max_seq)"
            )));
        }
        let tokens = tokenize(w, &text)?;
        let mut chunks = tokens.len() / ctx;
        if let Some(n) = a.chunks {
            chunks = chunks.min(n);
        }
        if chunks == 0 {
            return Err(Error::msg(format!(
                "{}: {} tokens, fewer than one chunk of {ctx}",
                a.file.display(),
                tokens.len()
            )));
        }
        let vocab = w.cfg.vocab_size as usize;
        let first = ctx / 2;
        let per_chunk = ctx - 1 - first;
        let (k, pool, opts) = (e.kernels, e.pool(), e.opts);
        let mut s = e.state()?;

        let mut out = match &a.kl_base {
            Some(p) => {
                let f = std::fs::File::create(p).with_context(|| p.display())?;
                let mut o = BufWriter::new(f);
                let head = [vocab as u32, ctx as u32, chunks as u32];
                o.write_all(MAGIC)
                    .and_then(|_| head.iter().try_for_each(|x| o.write_all(&x.to_le_bytes())))
                    .and_then(|_| {
                        tokens[..chunks * ctx]
                            .iter()
                            .try_for_each(|t| o.write_all(&t.to_le_bytes()))
                    })
                    .with_context(|| p.display())?;
                Some((o, p))
            }
            None => None,
        };
        let mut base = match &a.kl {
            Some(p) => {
                let f = std::fs::File::open(p).with_context(|| p.display())?;
                let mut r = BufReader::new(f);
                let mut magic = [0u8; 8];
                r.read_exact(&mut magic).with_context(|| p.display())?;
                let head = [
                    read_u32(&mut r).with_context(|| p.display())?,
                    read_u32(&mut r).with_context(|| p.display())?,
                    read_u32(&mut r).with_context(|| p.display())?,
                ];
                if &magic != MAGIC || head[0] as usize != vocab || head[1] as usize != ctx {
                    return Err(
                        Error::msg("not a --kl-base file of this vocabulary and --ctx")
                            .context(p.display()),
                    );
                }
                if (head[2] as usize) < chunks {
                    return Err(Error::msg(format!(
                        "holds {} chunks, {chunks} to compare",
                        head[2]
                    ))
                    .context(p.display()));
                }
                // Its token ids: the ones this run scores must be equal.
                let base_tokens = (head[2] as usize)
                    .checked_mul(ctx)
                    .ok_or_else(|| Error::msg("chunk count overflows").context(p.display()))?;
                for i in 0..base_tokens {
                    let b = read_u32(&mut r).with_context(|| p.display())?;
                    let t = tokens.get(i).copied().filter(|_| i < chunks * ctx);
                    if t.is_some_and(|t| t != b) {
                        let t = t.unwrap_or_default();
                        return Err(Error::msg(format!(
                        "token {i} differs from this run's ({b} vs {t}): not the same text or tokenizer"
                    ))
                    .context(p.display()));
                    }
                }
                Some((
                    Base {
                        r,
                        row: vec![0f32; vocab],
                    },
                    p,
                ))
            }
            None => None,
        };

        let (mut nll, mut nll2, mut scored) = (0f64, 0f64, 0usize);
        let (mut base_nll, mut kl_sum, mut kl_sum2) = (0f64, 0f64, 0f64);
        let (mut agree, mut dp2) = (0usize, 0f64);
        let mut kls: Vec<f64> = Vec::new();
        let mut logp = vec![0f64; vocab];
        let mut row_bytes: Vec<u8> = Vec::with_capacity(vocab * 4);
        let mut failure: Option<Error> = None;
        let t = Instant::now();
        for c in 0..chunks {
            let chunk = &tokens[c * ctx..(c + 1) * ctx];
            s.pos = 0;
            s.rope_delta[0] = 0;
            let mut plan = Prefill {
                slot: 0,
                base: 0,
                prompt: chunk,
                keep: 0,
                chunk: opts.max_batch,
                images: None,
                interrupt: None,
            };
            generate::prefill(w, &mut s, &k, pool, &mut plan, &mut |step, logits| {
                for (r, j) in (step.start..step.end).enumerate() {
                    if j < first || j + 1 >= ctx || failure.is_some() {
                        continue;
                    }
                    log_softmax(&logits[r * vocab..(r + 1) * vocab], &mut logp);
                    let v = -logp[chunk[j + 1] as usize];
                    nll += v;
                    nll2 += v * v;
                    scored += 1;
                    if let Some((o, p)) = out.as_mut() {
                        row_bytes.clear();
                        row_bytes.extend(logp.iter().flat_map(|&x| (x as f32).to_le_bytes()));
                        if let Err(e) = o.write_all(&row_bytes) {
                            failure = Some(Error::from(e).context(p.display()));
                        }
                    }
                    if let Some((b, p)) = base.as_mut() {
                        row_bytes.resize(vocab * 4, 0);
                        if let Err(e) = b.r.read_exact(&mut row_bytes) {
                            failure = Some(Error::from(e).context(p.display()));
                            continue;
                        }
                        for (x, q) in b.row.iter_mut().zip(row_bytes.chunks_exact(4)) {
                            *x = f32::from_le_bytes([q[0], q[1], q[2], q[3]]);
                        }
                        let mut kl = 0f64;
                        let mut top = 0;
                        for (i, (&lb, &lt)) in b.row.iter().zip(&logp).enumerate() {
                            let lb = lb as f64;
                            kl += libm::exp(lb) * (lb - lt);
                            if lb > b.row[top] as f64 {
                                top = i;
                            }
                        }
                        let kl = kl.max(0.0);
                        kl_sum += kl;
                        kl_sum2 += kl * kl;
                        kls.push(kl);
                        base_nll += -(b.row[chunk[j + 1] as usize] as f64);
                        agree += usize::from(argmax(&logp) == top);
                        let d = libm::exp(logp[top]) - libm::exp(b.row[top] as f64);
                        dp2 += d * d;
                    }
                }
            })?;
            if let Some(e) = failure.take() {
                return Err(e);
            }
            let (mean, _) = mean_err(nll, nll2, scored);
            eprintln!(
                "[kestrel] perplexity: chunk {}/{chunks}: PPL {:.4} ({:.1} s, {:.0} tok/s)",
                c + 1,
                libm::exp(mean),
                t.elapsed().as_secs_f64(),
                ((c + 1) * ctx) as f64 / t.elapsed().as_secs_f64().max(1e-9)
            );
        }
        if let Some((mut o, p)) = out.take() {
            o.flush().with_context(|| p.display())?;
        }
        debug_assert_eq!(scored, chunks * per_chunk);
        let (mean, err) = mean_err(nll, nll2, scored);
        let ppl = libm::exp(mean);
        let kl = base.map(|_| {
            let (kl_mean, kl_err) = mean_err(kl_sum, kl_sum2, scored);
            kestrel_core::sort::sort_by(&mut kls, f64::total_cmp);
            let p99 = kls[((kls.len() - 1) as f64 * 0.99).round() as usize];
            let base_ppl = libm::exp(base_nll / scored as f64);
            KlReport {
                mean: kl_mean,
                mean_err: kl_err,
                p99,
                top1: agree as f64 / scored as f64,
                rms_top_p: (dp2 / scored as f64).sqrt(),
                base_ppl,
                ppl_ratio: ppl / base_ppl,
            }
        });
        Ok(Report {
            scored,
            ppl,
            ppl_err: ppl * err,
            kl,
        })
    })
}

pub fn run(a: &PerplexityArgs) -> Result<()> {
    let r = perplexity(a)?;
    println!(
        "PPL = {:.4} +/- {:.5} ({} positions, {} chunks of {})",
        r.ppl,
        r.ppl_err,
        r.scored,
        r.scored / (a.engine.ctx.unwrap_or(512) - 1 - a.engine.ctx.unwrap_or(512) / 2),
        a.engine.ctx.unwrap_or(512)
    );
    if let Some(k) = r.kl {
        println!(
            "KL mean = {:.6} +/- {:.6}, p99 = {:.6}; top-1 agreement = {:.2}%; RMS dp(top) = {:.4}; PPL ratio = {:.4} (base PPL {:.4})",
            k.mean,
            k.mean_err,
            k.p99,
            100.0 * k.top1,
            k.rms_top_p,
            k.ppl_ratio,
            k.base_ppl
        );
    }
    Ok(())
}
