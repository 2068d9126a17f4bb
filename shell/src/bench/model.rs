//! `kestrel bench MODEL`: the end-to-end model bench.

use super::dram::dram_probe;
use super::synthetic::synthetic;
use super::{median, num, BenchArgs};
use crate::engine::EngineArgs;
use crate::error::Result;
use kestrel_core::parallel::Parallel;
use std::time::Instant;

/// The end-to-end model bench (llama-bench's pp and tg): per repeat, tokens
/// per second of a `n_prompt`-token synthetic prompt prefilled in batches,
/// and of `n_gen` tokens decoded one by one, each from an empty KV cache.
/// One warm-up of each first (prefill whole, decode one token). With
/// `--parallel K` (K > 1), also `n_gen` steps of K sequences in lockstep,
/// each step one row per sequence through the decode copy (the server's
/// step): aggregate tokens per second.
pub(super) fn model_bench(path: &std::path::Path, args: &BenchArgs) -> Result<()> {
    use crate::engine::{self, Need};
    if args.spec.draft_rows() > 0 {
        return speculation_bench(path, args);
    }
    use kestrel_core::model::forward::{forward, forward_rows, Row};
    let eargs = EngineArgs {
        threads: args.threads,
        no_pin: args.no_pin,
        ctx: Some((args.n_prompt + args.n_gen).max(1)),
        ..EngineArgs::default()
    };
    let streams = args.parallel.max(1);
    let max_batch = kestrel_core::state::MAX_BATCH;
    if streams > max_batch || args.verify_rows > max_batch {
        return Err(
            format!("bench: --parallel and --verify-rows take at most {max_batch} rows").into(),
        );
    }
    // A lockstep step is `streams` rows, a verify step `verify_rows`;
    // prompts go in chunks of `batch`.
    let batch = args.batch.clamp(1, max_batch);
    let need = Need {
        max_batch: batch.max(streams).max(args.verify_rows),
        slots: streams,
        draft: args.verify_rows.saturating_sub(1),
        ..Need::one(batch)
    };
    engine::open(path, &eargs, need, None, |mut e| {
        let (w, k, pool, opts) = (e.weights, e.kernels, e.pool(), e.opts);
        if opts.max_seq < args.n_prompt + args.n_gen {
            return Err(format!("bench: the file holds at most {} tokens", opts.max_seq).into());
        }
        let mut s = e.state()?;
        let vocab = w.cfg.vocab_size as usize;
        let toks = synthetic_tokens(args.n_prompt.max(args.n_gen), vocab);
        let mut pass = |n: usize, batch: usize| -> Result<f64> {
            s.pos = 0;
            let t = Instant::now();
            for c in toks[..n].chunks(batch) {
                forward(w, &mut s, &k, pool, c)?;
            }
            Ok(n as f64 / t.elapsed().as_secs_f64())
        };
        let reps = args.repeats.max(1);
        let (mut pp, mut tg) = (Vec::new(), Vec::new());
        if args.n_prompt > 0 {
            pass(args.n_prompt, batch)?;
            for _ in 0..reps {
                pp.push(pass(args.n_prompt, batch)?);
            }
        }
        if args.n_gen > 0 {
            pass(1, 1)?;
            for _ in 0..reps {
                tg.push(pass(args.n_gen, 1)?);
            }
        }
        // K sequences from empty caches, one row each per step.
        let mut tgk = Vec::new();
        if streams > 1 && args.n_gen > 0 {
            let decode = w.routing.decode;
            let mut lockstep = |n: usize| -> Result<f64> {
                let t = Instant::now();
                for pos in 0..n {
                    let rows: Vec<Row> = (0..streams)
                        .map(|slot| Row {
                            slot,
                            pos,
                            token: toks[(pos + slot) % toks.len()],
                            logits: true,
                        })
                        .collect();
                    forward_rows(w, &mut s, &k, pool, &rows, decode, None)?;
                }
                Ok((n * streams) as f64 / t.elapsed().as_secs_f64())
            };
            lockstep(1)?;
            for _ in 0..reps {
                tgk.push(lockstep(args.n_gen)?);
            }
        }
        // Verify steps: `verify_rows` rows of one sequence (a sampled token and
        // its drafts) through the decode copy, every row with logits.
        let rows_n = args.verify_rows;
        let mut verify_ms = Vec::new();
        if rows_n > 1 && args.n_gen >= rows_n {
            let decode = w.routing.decode;
            let mut verify = |n: usize| -> Result<f64> {
                let t = Instant::now();
                let steps = n / rows_n;
                for step in 0..steps {
                    let rows: Vec<Row> = (0..rows_n)
                        .map(|i| {
                            let pos = step * rows_n + i;
                            Row {
                                slot: 0,
                                pos,
                                token: toks[pos % toks.len()],
                                logits: true,
                            }
                        })
                        .collect();
                    forward_rows(w, &mut s, &k, pool, &rows, decode, None)?;
                }
                Ok(t.elapsed().as_secs_f64() * 1e3 / steps as f64)
            };
            verify(rows_n)?;
            for _ in 0..reps {
                verify_ms.push(verify(args.n_gen)?);
            }
        }
        let verify_med = median(&mut verify_ms);
        let tgk_med = median(&mut tgk);
        let list = |v: &[f64]| v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(",");
        let (pps, tgs) = (list(&pp), list(&tg));
        let (pp_med, tg_med) = (median(&mut pp), median(&mut tg));
        let bytes = w.decode_bytes();
        let gbs = bytes as f64 * tg_med / 1e9;
        let (_, probes) = dram_probe(pool, args.probe_rows, args.probe_blocks, reps.min(5));
        let threads = pool.threads();
        if args.json {
            let pr = probes
                .iter()
                .map(|p| {
                    format!(
                        "{{\"name\":\"{}\",\"payload_gbs\":{},\"raw_gbs\":{}}}",
                        p.name,
                        num(p.payload_gbs),
                        num(p.raw_gbs)
                    )
                })
                .collect::<Vec<_>>()
                .join(",");
            println!(
            "{{\"kernels\":\"{}\",\"threads\":{threads},\"batch\":{},\"decode_bytes\":{bytes},\"pp\":{{\"n\":{},\"samples_ts\":[{pps}],\"median_ts\":{}}},\"tg\":{{\"n\":{},\"samples_ts\":[{tgs}],\"median_ts\":{}}},\"decode_gbs\":{},\"parallel\":{{\"streams\":{streams},\"median_ts\":{}}},\"verify\":{{\"rows\":{rows_n},\"median_ms\":{}}},\"dram\":[{pr}]}}",
            k.name(),
            batch,
            args.n_prompt,
            num(pp_med),
            args.n_gen,
            num(tg_med),
            num(gbs),
            num(tgk_med),
            num(verify_med)
        );
            return Ok(());
        }
        println!(
            "{} | {} kernels, {threads} threads, batch {}",
            path.display(),
            k.name(),
            batch
        );
        // A phase with no tokens (`-p 0` or `-n 0`) was not run: no line.
        if args.n_prompt > 0 {
            println!(
                "pp{:<5} {:>9.2} tok/s (median of {reps})",
                args.n_prompt, pp_med
            );
        }
        if args.n_gen > 0 {
            println!(
            "tg{:<5} {:>9.2} tok/s (median of {reps}), {:.1} MB of weights per token, {gbs:.1} GB/s",
            args.n_gen,
            tg_med,
            bytes as f64 / 1e6
        );
        }
        if streams > 1 && args.n_gen > 0 {
            println!(
            "tg{:<5} {:>9.2} tok/s aggregate of {streams} sequences in lockstep (median of {reps}), {:.2}x one sequence",
            args.n_gen,
            tgk_med,
            tgk_med / tg_med
        );
        }
        if !verify_ms.is_empty() {
            println!(
            "verify {rows_n:<3} {:>9.2} ms per step of {rows_n} rows of one sequence (median of {reps}), {:.2}x a one-row step",
            verify_med,
            verify_med * tg_med / 1e3
        );
        }
        for p in &probes {
            println!(
                "DRAM {:<18} {:>6.1} GB/s payload, {:.1} raw",
                p.name, p.payload_gbs, p.raw_gbs
            );
        }
        Ok(())
    })
}

/// `--lookup` or `--draft` (instead of pp and tg): one greedy answer of `n_gen` tokens to the
/// prompt (`--prompt-file`'s raw text, else the synthetic tokens), decoded
/// plain and with speculation alternately from an empty cache, `repeats`
/// times each after a warm-up of each: decode tokens per second, their
/// ratio, and the drafting counts of the speculative runs.
fn speculation_bench(path: &std::path::Path, args: &BenchArgs) -> Result<()> {
    use crate::engine::{self, Need};
    use crate::generate::{Drafts, Session};
    use kestrel_core::sampler::SamplerConfig;
    let eargs = EngineArgs {
        threads: args.threads,
        no_pin: args.no_pin,
        ..EngineArgs::default()
    };
    let need = Need {
        draft: args.spec.draft_rows(),
        ..Need::one(args.batch.clamp(1, kestrel_core::state::MAX_BATCH))
    };
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    };
    engine::open(path, &eargs, need, args.spec.draft.as_deref(), |e| {
        let mut s = Session::of_model(e, greedy, &args.spec)?;
        let vocab = s.weights().cfg.vocab_size as usize;
        let prompt: Vec<u32> =
            match &args.prompt_file {
                Some(f) => s.encode(&std::fs::read_to_string(f).map_err(|e| {
                    format!("bench: cannot read --prompt-file {}: {e}", f.display())
                })?)?,
                None => synthetic_tokens(args.n_prompt.max(1), vocab),
            };
        let max_seq = s.gen.state.opts.max_seq;
        if prompt.is_empty() || prompt.len() + args.n_gen > max_seq {
            return Err(format!(
                "bench: the prompt ({} tokens) and {} generated tokens do not fit the context ({max_seq})",
                prompt.len(),
                args.n_gen
            )
            .into());
        }
        let mut drafts = std::mem::replace(&mut s.drafts, Drafts::None);
        let no = std::sync::atomic::AtomicBool::new(false);
        let reps = args.repeats.max(1);
        let (mut plain, mut spec) = (Vec::new(), Vec::new());
        let mut counts = kestrel_core::speculate::SpecStats::default();
        for rep in 0..=reps {
            for speculate in [false, true] {
                if speculate {
                    std::mem::swap(&mut s.drafts, &mut drafts);
                }
                s.reset();
                let st = s.generate(&prompt, args.n_gen, &no, &mut |_| {})?;
                if speculate {
                    std::mem::swap(&mut s.drafts, &mut drafts);
                }
                let tps = st.generated as f64 / st.decode_s.max(1e-9);
                if rep == 0 {
                    continue; // warm-up
                }
                if speculate {
                    spec.push(tps);
                    counts = st.spec;
                } else {
                    plain.push(tps);
                }
            }
        }
        let (p, q) = (median(&mut plain), median(&mut spec));
        let source = if args.spec.lookup {
            "lookup"
        } else {
            "draft model"
        };
        if args.json {
            println!(
                "{{\"speculation\":{{\"source\":\"{source}\",\"draft_max\":{},\"n\":{},\"plain_ts\":{},\"spec_ts\":{},\"drafted\":{},\"accepted\":{},\"steps\":{}}}}}",
                s.draft_max,
                args.n_gen,
                num(p),
                num(q),
                counts.drafted,
                counts.accepted,
                counts.steps
            );
        } else {
            println!(
                "spec{:<3} {:>9.2} tok/s with {source} (--draft-max {}) against {:.2} plain: {:.2}x (medians of {reps}, alternated); drafted {} tok, accepted {} ({:.0}%) in {} verify steps",
                args.n_gen,
                q,
                s.draft_max,
                p,
                q / p.max(1e-9),
                counts.drafted,
                counts.accepted,
                100.0 * counts.rate(),
                counts.steps
            );
        }
        Ok(())
    })
}

/// `n` synthetic token ids below `vocab` (the model bench's prompt).
fn synthetic_tokens(n: usize, vocab: usize) -> Vec<u32> {
    synthetic(n, 7)
        .iter()
        .map(|v| ((v + 1.0) * 0.5 * vocab as f32) as u32 % vocab as u32)
        .collect()
}
