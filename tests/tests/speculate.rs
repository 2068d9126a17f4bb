//! Speculative decoding (issue "Past the memory wall"): a verify step's
//! rows equal single decode steps bit for bit, for every weight mode and
//! the kernel set of this CPU (x86_64; under qemu the aarch64 dotprod and
//! fallback sets); the answer with drafts (prompt lookup, a prediction, a
//! draft model) equals plain decoding token for token, greedy and sampled
//! (same seed), with the KV cache a run that never drafted leaves; drafts
//! are really taken (accepted > 0); a draft model of another vocabulary is
//! refused naming the token.

use kestrel::convert::convert;
use kestrel::engine::{self, EngineArgs, Need};
use kestrel::generate::{Session, SpecArgs};
use kestrel_core::convert::WeightMode;
use kestrel_core::model::forward::{forward_step, Row, Rows, Step};
use kestrel_core::sampler::SamplerConfig;
use kestrel_core::speculate::{Adaptive, Lookup, SpecStats, Speculation};
use kestrel_tests::{fixtures, json_ids, temp_dir};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

fn converted(src: &Path, dir: &Path, mode: WeightMode, name: &str) -> PathBuf {
    let out = dir.join(format!("{name}.vqf"));
    convert(src, &out, mode, Some(256), false).unwrap();
    out
}

/// The answer to `prompt` (`n` tokens), its drafting counts, and the keys
/// and values of every cached position.
struct Run {
    ids: Vec<u32>,
    stats: SpecStats,
    kv: Vec<f32>,
    pos: usize,
}

fn run(
    target: &Path,
    spec: &SpecArgs,
    sample: SamplerConfig,
    prompt: &[u32],
    n: usize,
    prediction: Option<&[u32]>,
) -> Run {
    let need = Need {
        draft: spec
            .draft_rows()
            .max(usize::from(prediction.is_some()) * spec.draft_max),
        ..Need::one(32)
    };
    let args = EngineArgs {
        threads: Some(2),
        no_pin: true,
        ..EngineArgs::default()
    };
    engine::open(target, &args, need, spec.draft.as_deref(), |e| {
        let mut s = Session::of_model(e, sample, spec).unwrap();
        let no = AtomicBool::new(false);
        let stats = match prediction {
            // The server's way: a prediction drafts by lookup.
            Some(p) => {
                s.feed(prompt).unwrap();
                let mut lookup = Lookup::with_prediction(p);
                let mut spec_state = Speculation {
                    drafter: &mut lookup,
                    length: Adaptive::new(spec.draft_max),
                };
                let mut counts = SpecStats::default();
                s.gen
                    .decode_speculative(n, &no, &mut |_| {}, None, &mut spec_state, &mut counts)
                    .unwrap();
                counts
            }
            None => s.generate(prompt, n, &no, &mut |_| {}).unwrap().spec,
        };
        let st = &s.gen.state;
        let cfg = &s.gen.weights.cfg;
        let kv_dim = cfg.kv_dim();
        let mut kv = Vec::new();
        for l in 0..cfg.num_layers as usize {
            let at = l * st.opts.max_seq * kv_dim;
            for cache in [&st.k_cache, &st.v_cache] {
                let view = cache.view(at..at + st.pos * kv_dim);
                kv.extend((0..st.pos * kv_dim).map(|i| view.get(i)));
            }
        }
        Ok(Run {
            ids: s.history()[prompt.len()..].to_vec(),
            stats,
            kv,
            pos: st.pos,
        })
    })
    .unwrap()
}

fn spec(lookup: bool, draft: Option<&Path>, max: usize) -> SpecArgs {
    SpecArgs {
        lookup,
        draft: draft.map(Path::to_path_buf),
        draft_max: max,
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The reference prompt twice: lookup finds n-grams from the start.
fn prompt() -> Vec<u32> {
    let refj = std::fs::read(fixtures().join("dev_qwen3_dense_tied/ref/ref.json")).unwrap();
    let p = json_ids(&refj, "prompt_ids");
    [p.clone(), p].concat()
}

#[test]
fn speculative_answers_equal_plain_decoding_for_every_mode_and_draft_source() {
    let dir = temp_dir("speculate-modes");
    let hf = fixtures().join("dev_qwen3_dense_tied/hf");
    let draft = converted(&hf, &dir, WeightMode::Q4, "draft-q4");
    let prompt = prompt();
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    };
    let sampled = SamplerConfig {
        temperature: 0.9,
        top_k: 20,
        top_p: 0.95,
        min_p: 0.02,
        repeat_penalty: 1.1,
        seed: 7,
        ..SamplerConfig::default()
    };
    let mut accepted = [0usize; 3];
    for mode in [
        WeightMode::F32,
        WeightMode::F16,
        WeightMode::Q8,
        WeightMode::Dual,
        WeightMode::Q4,
        WeightMode::Small(kestrel_core::convert::Recipe::DEFAULT),
    ] {
        let target = converted(&hf, &dir, mode, &format!("{mode:?}"));
        for sample in [greedy, sampled] {
            let plain = run(&target, &spec(false, None, 8), sample, &prompt, 48, None);
            assert_eq!(plain.ids.len(), 48, "{mode:?}");
            assert_eq!(plain.stats, SpecStats::default());
            for (i, (src, max)) in [
                (spec(true, None, 8), 8),
                (spec(false, Some(&draft), 5), 5),
                (spec(true, None, 3), 3),
            ]
            .into_iter()
            .enumerate()
            {
                let s = run(&target, &src, sample, &prompt, 48, None);
                let what = format!("{mode:?} {sample:?} lookup={} draft max {max}", src.lookup);
                assert_eq!(s.ids, plain.ids, "{what}");
                assert_eq!(s.pos, plain.pos, "{what}");
                assert_eq!(bits(&s.kv), bits(&plain.kv), "{what}: KV cache");
                assert!(s.stats.accepted <= s.stats.drafted, "{what}");
                accepted[i] += s.stats.accepted;
            }
            // A prediction: the plain answer's first half, then noise.
            let mut pred = plain.ids[..24].to_vec();
            pred.extend([5u32, 6, 7, 8]);
            let s = run(
                &target,
                &spec(false, None, 8),
                sample,
                &prompt,
                48,
                Some(&pred),
            );
            assert_eq!(s.ids, plain.ids, "{mode:?} prediction");
            assert_eq!(
                bits(&s.kv),
                bits(&plain.kv),
                "{mode:?} prediction: KV cache"
            );
            assert!(s.stats.accepted >= 12, "{mode:?}: {:?}", s.stats);
        }
    }
    // Every source's drafts were taken somewhere (else nothing was tested).
    assert!(accepted.iter().all(|&a| a > 0), "{accepted:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A verify step (one token and its drafts, every row with logits, the
/// decode copy) gives each row the logits and the cached keys and values a
/// single decode step gives, bit for bit: on every weight mode of a dense
/// fixture, the k-quant GGUF's `source` and `exact` files and the MoE
/// fixture, from positions inside and across attention blocks.
#[test]
fn verify_rows_equal_single_decode_steps_bit_for_bit() {
    let dir = temp_dir("speculate-verify");
    let mut files = Vec::new();
    let hf = fixtures().join("dev_qwen3_dense_untied/hf");
    for mode in [
        WeightMode::F32,
        WeightMode::Q8,
        WeightMode::Dual,
        WeightMode::Q4,
        WeightMode::Small(kestrel_core::convert::Recipe::DEFAULT),
    ] {
        files.push(converted(&hf, &dir, mode, &format!("untied-{mode:?}")));
    }
    let kq = fixtures().join("dev_qwen2_kquant/gguf/model-kquant-mix.gguf");
    files.push(converted(&kq, &dir, WeightMode::Source, "kq-source"));
    files.push(converted(&kq, &dir, WeightMode::Exact, "kq-exact"));
    let moe = fixtures().join("dev_qwen3_moe/hf");
    files.push(converted(&moe, &dir, WeightMode::Dual, "moe-dual"));
    for file in &files {
        for (start, rows) in [(5usize, 9usize), (13, 4), (30, 17)] {
            let need = Need {
                draft: rows - 1,
                ..Need::one(32)
            };
            let args = EngineArgs {
                threads: Some(2),
                no_pin: true,
                ..EngineArgs::default()
            };
            engine::open(file, &args, need, None, |mut e| {
                let w = e.weights;
                let (k, pool) = (e.kernels, e.pool());
                let vocab = w.cfg.vocab_size as usize;
                let tokens: Vec<u32> = (0..start + rows)
                    .map(|i| ((i * 31 + 3) % vocab) as u32)
                    .collect();
                let decode = w.routing.decode;
                let step = |s: &mut kestrel_core::state::State, rows: &[Row]| {
                    let st = Step {
                        rows: Rows::Explicit(rows),
                        copy: decode,
                        images: None,
                        logits: true,
                        interrupt: None,
                    };
                    forward_step(w, s, &k, pool, &st).unwrap().to_vec()
                };
                let row = |p: usize| Row {
                    slot: 0,
                    pos: p,
                    token: tokens[p],
                    logits: true,
                };
                // One token a step, the whole way.
                let mut s = e.state().unwrap();
                let mut single = Vec::new();
                for p in 0..start + rows {
                    let l = step(&mut s, &[row(p)]);
                    if p >= start {
                        single.extend(l);
                    }
                }
                let kv_single = cache(&s, &w.cfg, start + rows);
                // The same prefix, then one verify step of `rows` rows.
                let mut s = e.state().unwrap();
                for p in 0..start {
                    step(&mut s, &[row(p)]);
                }
                let block: Vec<Row> = (start..start + rows).map(row).collect();
                let verify = step(&mut s, &block);
                assert_eq!(verify.len(), rows * vocab);
                assert_eq!(
                    bits(&verify),
                    bits(&single),
                    "{}: rows {start}..{}",
                    file.display(),
                    start + rows
                );
                assert_eq!(
                    bits(&cache(&s, &w.cfg, start + rows)),
                    bits(&kv_single),
                    "{}: KV",
                    file.display()
                );
                Ok(())
            })
            .unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Keys and values of positions `0..n` of slot 0, every layer.
fn cache(s: &kestrel_core::state::State, cfg: &kestrel_core::config::Config, n: usize) -> Vec<f32> {
    let kv_dim = cfg.kv_dim();
    let mut out = Vec::new();
    for l in 0..cfg.num_layers as usize {
        let at = l * s.opts.max_seq * kv_dim;
        for c in [&s.k_cache, &s.v_cache] {
            let v = c.view(at..at + n * kv_dim);
            out.extend((0..n * kv_dim).map(|i| v.get(i)));
        }
    }
    out
}

/// More rows than the state keeps logits for are refused, not written
/// past the buffer.
#[test]
fn a_verify_step_larger_than_the_state_is_an_error() {
    let dir = temp_dir("speculate-cap");
    let file = converted(
        &fixtures().join("dev_qwen3_dense_tied/hf"),
        &dir,
        WeightMode::Q8,
        "q8",
    );
    let need = Need {
        draft: 3,
        ..Need::one(32)
    };
    engine::open(&file, &EngineArgs::default(), need, None, |mut e| {
        let w = e.weights;
        let (k, pool) = (e.kernels, e.pool());
        let mut s = e.state().unwrap();
        let rows: Vec<Row> = (0..5)
            .map(|p| Row {
                slot: 0,
                pos: p,
                token: 1,
                logits: true,
            })
            .collect();
        let step = |n: usize| Step {
            rows: Rows::Explicit(&rows[..n]),
            copy: w.routing.decode,
            images: None,
            logits: true,
            interrupt: None,
        };
        assert!(forward_step(w, &mut s, &k, pool, &step(4)).is_ok());
        assert!(forward_step(w, &mut s, &k, pool, &step(5)).is_err());
        Ok(())
    })
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A draft model whose vocabulary differs from the target's is refused at
/// start-up, the first differing token named.
#[test]
fn a_draft_model_of_another_vocabulary_is_refused() {
    let dir = temp_dir("speculate-vocab");
    let target = converted(
        &fixtures().join("dev_qwen3_dense_tied/hf"),
        &dir,
        WeightMode::Q8,
        "target",
    );
    let other = converted(
        &fixtures().join("dev_qwen2_dense/hf"),
        &dir,
        WeightMode::Q4,
        "other",
    );
    let need = Need {
        draft: 4,
        ..Need::one(32)
    };
    let err = engine::open(&target, &EngineArgs::default(), need, Some(&other), |_| {
        Ok(())
    })
    .expect_err("a draft of another vocabulary was accepted");
    let msg = err.to_string();
    assert!(
        msg.contains("other.vqf") && msg.contains("vocabulary differs") && msg.contains("at token"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The sampled output keeps the target's distribution with a draft model
/// (whose greedy drafts are a point-mass `q`): over a fixed list of seeds at
/// temperature 1, the second token of a three-token answer (the first
/// sampled from a verify step's rows: the driver drafts no row for an
/// answer's last token; after the most frequent first token) follows the target's
/// softmax by a chi-square test at p = 0.001. Accepting a draft because it
/// is the target's most likely token (greedy acceptance) skews it, and
/// fails this test.
#[test]
fn sampled_answers_keep_the_targets_distribution() {
    use kestrel_core::sampler::Sampler;
    let dir = temp_dir("speculate-chi2");
    let hf = fixtures().join("dev_qwen3_dense_tied/hf");
    let target = converted(&hf, &dir, WeightMode::Q8, "target");
    let draft = converted(&hf, &dir, WeightMode::Q4, "draft");
    let prompt = prompt();
    let cfg = SamplerConfig {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        ..SamplerConfig::default()
    };
    let src = spec(false, Some(&draft), 4);
    let need = Need {
        draft: 4,
        ..Need::one(32)
    };
    let args = EngineArgs {
        threads: Some(1),
        no_pin: true,
        ..EngineArgs::default()
    };
    let seeds = 2000u64;
    let (pairs, stats) = engine::open(&target, &args, need, Some(&draft), |e| {
        let mut s = Session::of_model(e, cfg, &src).unwrap();
        let no = AtomicBool::new(false);
        let mut pairs = Vec::new();
        let mut total = SpecStats::default();
        for seed in 0..seeds {
            s.reset();
            s.gen.sampler = Sampler::new(SamplerConfig { seed, ..cfg });
            let st = s.generate(&prompt, 3, &no, &mut |_| {}).unwrap();
            total.drafted += st.spec.drafted;
            total.accepted += st.spec.accepted;
            let h = &s.history()[prompt.len()..];
            if h.len() >= 2 {
                pairs.push((h[0], h[1]));
            }
        }
        Ok((pairs, total))
    })
    .unwrap();
    assert!(stats.accepted > 0, "{stats:?}");
    // The most frequent first token, and the second tokens after it.
    let mut first = std::collections::BTreeMap::<u32, usize>::new();
    for &(a, _) in &pairs {
        *first.entry(a).or_default() += 1;
    }
    let (&t1, &n1) = first.iter().max_by_key(|(_, &n)| n).unwrap();
    assert!(n1 >= 300, "the most frequent first token came {n1} times");
    let seconds: Vec<u32> = pairs.iter().filter(|p| p.0 == t1).map(|p| p.1).collect();
    // The target's distribution after prompt + t1 (plain forward, f64 softmax).
    let logits = engine::open(&target, &args, Need::one(128), None, |mut e| {
        let w = e.weights;
        let (k, pool) = (e.kernels, e.pool());
        let mut st = e.state().unwrap();
        let all: Vec<u32> = prompt.iter().copied().chain([t1]).collect();
        let rows: Vec<Row> = all
            .iter()
            .enumerate()
            .map(|(p, &token)| Row {
                slot: 0,
                pos: p,
                token,
                logits: p + 1 == all.len(),
            })
            .collect();
        let step = Step {
            rows: Rows::Explicit(&rows),
            copy: w.routing.decode,
            images: None,
            logits: true,
            interrupt: None,
        };
        Ok(forward_step(w, &mut st, &k, pool, &step).unwrap().to_vec())
    })
    .unwrap();
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let z: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    let p: Vec<f64> = logits.iter().map(|&x| (x as f64 - max).exp() / z).collect();
    let n = seconds.len() as f64;
    let mut count = vec![0usize; p.len()];
    for &t in &seconds {
        count[t as usize] += 1;
    }
    // Bins of expected count >= 5; the rest pooled.
    let (mut chi2, mut bins) = (0.0f64, 0usize);
    let (mut rest_obs, mut rest_exp) = (0.0f64, 0.0f64);
    for (i, &pi) in p.iter().enumerate() {
        let e = pi * n;
        if e >= 5.0 {
            chi2 += (count[i] as f64 - e).powi(2) / e;
            bins += 1;
        } else {
            rest_obs += count[i] as f64;
            rest_exp += e;
        }
    }
    if rest_exp > 0.0 {
        chi2 += (rest_obs - rest_exp).powi(2) / rest_exp;
        bins += 1;
    }
    assert!(bins >= 3, "too few bins: {bins}");
    let df = (bins - 1) as f64;
    // Wilson-Hilferty: the chi-square quantile at p = 0.001 (z = 3.09).
    let a = 2.0 / (9.0 * df);
    let critical = df * (1.0 - a + 3.09 * a.sqrt()).powi(3);
    eprintln!("chi2 {chi2:.1} critical {critical:.1} df {df} n {n}");
    assert!(
        chi2 < critical,
        "chi2 {chi2:.1} >= {critical:.1} (df {df}, {n} samples after token {t1})"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
