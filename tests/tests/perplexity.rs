//! `kestrel perplexity` against an independent computation of the same
//! quantities: every chunk's logits come from `kestrel logits` (the same
//! forward, batches of 128), and PPL with its standard error, KL with its
//! standard error and p99, top-1 agreement, the RMS difference of the base's
//! top-token probability and the PPL ratio are computed here directly from
//! those rows, in plain f64 (two-pass softmax, sums over the positions).

use kestrel::convert::convert;
use kestrel::engine::EngineArgs;
use kestrel::perplexity::{perplexity, PerplexityArgs};
use kestrel_core::convert::WeightMode;
use kestrel_tests::loader;
use kestrel_tests::{fixtures, temp_dir};
use std::path::Path;

const CTX: usize = 64;
const CHUNKS: usize = 3;

/// Log-probabilities of one row of logits: max, then the sum of
/// exponentials, then each logit minus the log of the normaliser.
fn log_probs(row: &[f32]) -> Vec<f64> {
    let max = row.iter().map(|&x| x as f64).fold(f64::MIN, f64::max);
    let z: f64 = row.iter().map(|&x| ((x as f64) - max).exp()).sum();
    row.iter().map(|&x| (x as f64) - max - z.ln()).collect()
}

/// The scored rows of every chunk: (log-probs, next token) per position.
fn scored(model: &Path, tokens: &[u32], engine: &EngineArgs) -> Vec<(Vec<f64>, u32)> {
    let mut out = Vec::new();
    for c in 0..CHUNKS {
        let chunk = &tokens[c * CTX..(c + 1) * CTX];
        let (rows, _) = kestrel::logits::logits(model, chunk, 0, 128, engine).unwrap();
        let vocab = rows.len() / CTX;
        for j in CTX / 2..CTX - 1 {
            out.push((log_probs(&rows[j * vocab..(j + 1) * vocab]), chunk[j + 1]));
        }
    }
    out
}

fn mean_and_err(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, (var / (n - 1.0)).sqrt())
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-7 * b.abs().max(1e-3),
        "{what}: kestrel perplexity {a}, independent {b}"
    );
}

#[test]
fn perplexity_and_kl_match_an_independent_computation() {
    let dir = temp_dir("perplexity");
    let hf = fixtures().join("dev_qwen3_dense_tied/hf");
    let (f32_file, dual_file) = (dir.join("f32.vqf"), dir.join("dual.vqf"));
    convert(&hf, &f32_file, WeightMode::F32, Some(256), false).unwrap();
    convert(&hf, &dual_file, WeightMode::Dual, Some(256), false).unwrap();
    // A real text: the project's README.
    let text_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let text = std::fs::read_to_string(&text_path).unwrap();
    let model = loader::Model::open(&f32_file).unwrap();
    let mut layers = Vec::new();
    let w = model.weights(true, &mut layers).unwrap();
    let tok = kestrel_core::tokenizer::Tokenizer::new(*w.vqf.tokenizer().unwrap());
    let tokens = kestrel::generate::encode(&tok, &text).unwrap();
    assert!(tokens.len() >= CHUNKS * CTX, "README too short");

    let mut kl_means = Vec::new();
    for prefill_q8 in [true, false] {
        let engine = EngineArgs {
            ctx: Some(CTX),
            threads: Some(2),
            prefill_q8,
            ..EngineArgs::default()
        };
        let base_file = dir.join("base.bin");
        let args = |model: &Path, kl_base, kl| PerplexityArgs {
            model: model.to_path_buf(),
            file: text_path.clone(),
            chunks: Some(CHUNKS),
            kl_base,
            kl,
            engine: engine.clone(),
        };
        let base = perplexity(&args(&f32_file, Some(base_file.clone()), None)).unwrap();
        let run = perplexity(&args(&dual_file, None, Some(base_file.clone()))).unwrap();

        let reference = scored(&f32_file, &tokens, &engine);
        let this = scored(&dual_file, &tokens, &engine);
        assert_eq!((base.scored, run.scored), (reference.len(), this.len()));
        let nll = |rows: &[(Vec<f64>, u32)]| -> Vec<f64> {
            rows.iter().map(|(lp, next)| -lp[*next as usize]).collect()
        };
        let (m, e) = mean_and_err(&nll(&reference));
        close(base.ppl, m.exp(), "base PPL");
        close(base.ppl_err, m.exp() * e, "base PPL error");
        let (m, e) = mean_and_err(&nll(&this));
        close(run.ppl, m.exp(), "PPL");
        close(run.ppl_err, m.exp() * e, "PPL error");

        let mut kls = Vec::new();
        let (mut agree, mut dp2) = (0usize, 0f64);
        for ((b, _), (t, _)) in reference.iter().zip(&this) {
            // The base rows went through an f32 file: compare as stored.
            let b: Vec<f64> = b.iter().map(|&x| x as f32 as f64).collect();
            kls.push(
                b.iter()
                    .zip(t)
                    .map(|(lb, lt)| lb.exp() * (lb - lt))
                    .sum::<f64>()
                    .max(0.0),
            );
            let top =
                |v: &[f64]| (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best });
            let tb = top(&b);
            agree += usize::from(top(t) == tb);
            dp2 += (t[tb].exp() - b[tb].exp()).powi(2);
        }
        let kl = run.kl.expect("--kl reports");
        let (km, ke) = mean_and_err(&kls);
        close(kl.mean, km, "KL mean");
        close(kl.mean_err, ke, "KL error");
        kls.sort_by(f64::total_cmp);
        close(
            kl.p99,
            kls[((kls.len() - 1) as f64 * 0.99).round() as usize],
            "KL p99",
        );
        close(kl.top1, agree as f64 / kls.len() as f64, "top-1 agreement");
        close(kl.rms_top_p, (dp2 / kls.len() as f64).sqrt(), "RMS dp");
        // The ratio's base is the stored (f32) rows' PPL.
        let stored: Vec<f64> = reference
            .iter()
            .map(|(lp, next)| -(lp[*next as usize] as f32 as f64))
            .collect();
        let (sm, _) = mean_and_err(&stored);
        close(kl.base_ppl, sm.exp(), "base PPL from the file");
        close(kl.ppl_ratio, run.ppl / sm.exp(), "PPL ratio");
        println!(
            "prefill_q8 {prefill_q8}: PPL f32 {:.3}, dual {:.3}; KL {:.5} +/- {:.5}, p99 {:.5}, top-1 {:.1}%",
            base.ppl,
            run.ppl,
            kl.mean,
            kl.mean_err,
            kl.p99,
            100.0 * kl.top1
        );
        kl_means.push(kl.mean);
    }
    // Every position through the decode copy (Q4) is further from f32 than
    // the Q8 prefill copy.
    assert!(
        0.0 < kl_means[0] && kl_means[0] < kl_means[1],
        "KL with the Q8 prefill copy {} vs through the Q4 decode copy {}",
        kl_means[0],
        kl_means[1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
