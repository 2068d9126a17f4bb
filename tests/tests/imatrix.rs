//! `kestrel imatrix` and `kestrel convert --imatrix`: the importance matrix
//! sums the right activations (layer 0's q/k/v input recomputed here from
//! the embedding and the norm), counts every row (per expert for MoE),
//! writes the same bytes on every architecture (the hash below is checked
//! on x86_64 and, in the test command, under qemu aarch64), reads back,
//! never panics on damaged bytes, and weighs the conversion's search; its
//! misuses are errors naming the cause.

use kestrel::cli::CommandArgs;
use kestrel::convert::{convert, ConvertArgs};
use kestrel::engine::EngineArgs;
use kestrel::imatrix::{compute, ImatrixArgs, ImportanceMatrix};
use kestrel_core::convert::{Importance, Part, WeightMode};
use kestrel_core::gguf::Gguf;
use kestrel_tests::{f32s, fixtures, temp_dir};
use std::path::{Path, PathBuf};

const CTX: usize = 64;
const CHUNKS: usize = 3;

/// The calibration text: the project's README.
fn text() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")
}

fn args(model: &Path, out: &Path) -> ImatrixArgs {
    ImatrixArgs {
        model: model.to_path_buf(),
        file: text(),
        out: out.to_path_buf(),
        chunks: Some(CHUNKS),
        engine: EngineArgs {
            ctx: Some(CTX),
            threads: Some(2),
            ..EngineArgs::default()
        },
    }
}

/// FNV-1a 64.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A tensor of the file as f32 values.
fn tensor(g: &Gguf, name: &str) -> Vec<f32> {
    f32s(g.tensor(name).unwrap_or_else(|| panic!("no {name}")).data())
}

#[test]
fn the_imatrix_sums_every_matrix_input_and_is_the_same_on_every_architecture() {
    let dir = temp_dir("imatrix-dense");
    let hf = fixtures().join("dev_qwen3_dense_tied/hf");
    let model = dir.join("f32.vqf");
    convert(&hf, &model, WeightMode::F32, Some(256), false).unwrap();
    let (bytes, read) = compute(&args(&model, &dir.join("unused"))).unwrap();
    assert_eq!(read, CHUNKS * CTX);

    let map = kestrel::files::Mapped::open(&model).unwrap();
    let v = kestrel_core::vqf::Vqf::parse(map.bytes()).unwrap();
    let w = kestrel_tests::weights(v, true).unwrap();
    let cfg = w.cfg;
    let g = Gguf::parse(&bytes).unwrap();
    // ggml reads every tensor's padded size, the last one's included.
    assert_eq!(
        bytes.len() % g.alignment(),
        0,
        "the last tensor is not padded"
    );
    assert_eq!(g.get_str("general.type"), Some("imatrix"));
    assert_eq!(g.get_u32("imatrix.chunk_count"), Some(CHUNKS as u32));
    assert_eq!(g.get_u32("imatrix.chunk_size"), Some(CTX as u32));
    let (h, ffn) = (cfg.hidden_size as usize, cfg.ffn_size as usize);
    for l in 0..cfg.num_layers {
        let name = |t: &str| format!("blk.{l}.{t}.weight");
        for (t, width) in [
            ("attn_q", h),
            ("attn_k", h),
            ("attn_v", h),
            ("attn_output", cfg.q_dim()),
            ("ffn_gate", h),
            ("ffn_up", h),
            ("ffn_down", ffn),
        ] {
            let sums = tensor(&g, &format!("{}.in_sum2", name(t)));
            assert_eq!(sums.len(), width, "{}", name(t));
            assert!(sums.iter().all(|x| x.is_finite() && *x >= 0.0));
            assert!(sums.iter().any(|&x| x > 0.0), "{} is all zeros", name(t));
            let counts = tensor(&g, &format!("{}.counts", name(t)));
            assert_eq!(counts, [read as f32], "{}", name(t));
        }
        // The tensors reading one input hold the same sums.
        let q = tensor(&g, &format!("{}.in_sum2", name("attn_q")));
        assert_eq!(q, tensor(&g, &format!("{}.in_sum2", name("attn_v"))));
        let gate = tensor(&g, &format!("{}.in_sum2", name("ffn_gate")));
        assert_eq!(gate, tensor(&g, &format!("{}.in_sum2", name("ffn_up"))));
    }

    // Layer 0's q/k/v input, recomputed: rmsnorm(embedding row) for each
    // token read.
    let tok = kestrel_core::tokenizer::Tokenizer::new(*w.vqf.tokenizer().unwrap());
    let ids = kestrel::generate::encode(&tok, &std::fs::read_to_string(text()).unwrap()).unwrap();
    let lw = w.layer(0, w.routing.for_batch(CTX)).unwrap();
    let mut expect = vec![0f64; h];
    let (mut row, mut normed) = (vec![0f32; h], vec![0f32; h]);
    for &id in &ids[..read] {
        w.embedding_row(id, &mut row).unwrap();
        kestrel_core::model::ops::rmsnorm(&mut normed, &row, lw.attn_norm, cfg.rms_norm_eps as f32);
        for (e, &x) in expect.iter_mut().zip(&normed) {
            *e += x as f64 * x as f64;
        }
    }
    let got = tensor(&g, "blk.0.attn_q.weight.in_sum2");
    for (i, (&a, &b)) in got.iter().zip(&expect).enumerate() {
        assert_eq!(a, b as f32, "column {i}: {a} against {b}");
    }

    // Computed on x86_64; the test command checks it under qemu aarch64.
    assert_eq!(
        fnv(&bytes),
        0x4cb2_1c0d_ad6c_25a7,
        "the imatrix differs from x86_64's: hash {:#018x}",
        fnv(&bytes)
    );

    // Read back: each column's mean square.
    let m = ImportanceMatrix::parse(&bytes).unwrap();
    m.check(&cfg).unwrap();
    let cols = m.columns(Part::K, 0, 0).unwrap();
    for (c, s) in cols.iter().zip(&got) {
        assert_eq!(*c, s / read as f32);
    }
    // The lm_head's input (the final norm's output), under the tied
    // embedding's name.
    let head = m.columns(Part::LmHead, 0, 0).unwrap();
    assert_eq!(head.len(), h);
    assert_eq!(tensor(&g, "token_embd.weight.counts"), [read as f32]);
    assert!(head.iter().any(|&x| x > 0.0));
}

/// Qwen3.5 (both fixtures): a Gated DeltaNet layer's input is summed under
/// `attn_qkv` and `attn_gate` (the same sums), its gated norm's output
/// under `ssm_out`, the shared expert's under `ffn_{gate,up,down}_shexp`,
/// every row counted, no attention name for a DeltaNet layer; the file
/// checks against the model and gives the q|k|v matrix its columns; and it
/// weighs the `q4` conversion of the DeltaNet projections.
#[test]
fn qwen35_inputs_are_summed_under_llama_cpp_names() {
    let dir = temp_dir("imatrix-qwen35");
    for name in ["dev_qwen35_dense", "dev_qwen35_moe"] {
        let hf = fixtures().join(name).join("hf_bf16");
        let model = dir.join(format!("{name}.vqf"));
        convert(&hf, &model, WeightMode::F32, Some(256), false).unwrap();
        let (bytes, read) = compute(&args(&model, &dir.join("unused"))).unwrap();
        let map = kestrel::files::Mapped::open(&model).unwrap();
        let cfg = *kestrel_core::vqf::Vqf::parse(map.bytes()).unwrap().config();
        let g = Gguf::parse(&bytes).unwrap();
        let h = cfg.hidden_size as usize;
        let vlen = cfg.linear.unwrap().shape().value_len();
        let summed = |t: &str, l: u32, width: usize| {
            let n = format!("blk.{l}.{t}.weight");
            let sums = tensor(&g, &format!("{n}.in_sum2"));
            assert_eq!(sums.len(), width, "{name} {n}");
            assert!(sums.iter().any(|&x| x > 0.0), "{name} {n} is all zeros");
            assert_eq!(
                tensor(&g, &format!("{n}.counts")),
                [read as f32],
                "{name} {n}"
            );
            sums
        };
        for l in 0..cfg.num_layers {
            if cfg.is_linear_layer(l as usize) {
                let qkv = summed("attn_qkv", l, h);
                assert_eq!(qkv, summed("attn_gate", l, h), "{name} layer {l}");
                summed("ssm_out", l, vlen);
                assert!(g
                    .tensor(&format!("blk.{l}.attn_q.weight.in_sum2"))
                    .is_none());
            } else {
                summed("attn_q", l, h);
                summed("attn_output", l, cfg.q_dim());
            }
            if let Some(m) = cfg.moe {
                summed("ffn_gate_shexp", l, h);
                summed("ffn_down_shexp", l, m.shared_ffn_size as usize);
            }
        }
        let m = ImportanceMatrix::parse(&bytes).unwrap();
        m.check(&cfg).unwrap();
        assert_eq!(m.columns(Part::LinQkv, 0, 0).unwrap().len(), h);
        assert_eq!(m.columns(Part::LinOut, 0, 0).unwrap().len(), vlen);
        // It weighs the q4 search of the DeltaNet projections.
        let im = dir.join(format!("{name}.imatrix"));
        std::fs::write(&im, &bytes).unwrap();
        let out = dir.join(format!("{name}-q4.vqf"));
        let run = |extra: &[&str]| {
            let mut v: Vec<String> = [hf.to_str().unwrap(), "-o", out.to_str().unwrap()]
                .iter()
                .map(|s| s.to_string())
                .collect();
            v.extend(["--wmode", "q4", "--max-seq", "256"].map(String::from));
            v.extend(extra.iter().map(|s| s.to_string()));
            kestrel::convert::run(&ConvertArgs::parse(&v).unwrap()).unwrap();
            let map = kestrel::files::Mapped::open(&out).unwrap();
            let v = kestrel_core::vqf::Vqf::parse(map.bytes()).unwrap();
            let e = v
                .entries()
                .find(|e| e.layer == 0 && e.role == kestrel_core::tensors::Role::LinQkvz)
                .unwrap();
            v.data(&e).to_vec()
        };
        let weighted = run(&["--imatrix", im.to_str().unwrap()]);
        assert_ne!(
            weighted,
            run(&["--quantizer", "search"]),
            "{name}: ssm_qkvz not weighed"
        );
    }
}

#[test]
fn moe_expert_inputs_are_counted_per_expert() {
    let dir = temp_dir("imatrix-moe");
    let model = dir.join("moe.vqf");
    let hf = fixtures().join("dev_qwen3_moe/hf");
    convert(&hf, &model, WeightMode::Dual, Some(256), false).unwrap();
    let (bytes, read) = compute(&args(&model, &dir.join("unused"))).unwrap();
    let map = kestrel::files::Mapped::open(&model).unwrap();
    let cfg = *kestrel_core::vqf::Vqf::parse(map.bytes()).unwrap().config();
    let moe = cfg.moe.unwrap();
    let g = Gguf::parse(&bytes).unwrap();
    for l in (0..cfg.num_layers).filter(|&l| cfg.is_moe_layer(l as usize)) {
        for t in ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"] {
            let counts = tensor(&g, &format!("blk.{l}.{t}.weight.counts"));
            assert_eq!(counts.len(), moe.num_experts as usize);
            let total: f32 = counts.iter().sum();
            assert_eq!(
                total,
                (read * moe.experts_per_token as usize) as f32,
                "blk.{l}.{t}"
            );
            let sums = tensor(&g, &format!("blk.{l}.{t}.weight.in_sum2"));
            let width = sums.len() / counts.len();
            for (e, &n) in counts.iter().enumerate() {
                let s = &sums[e * width..(e + 1) * width];
                assert_eq!(n == 0.0, s.iter().all(|&x| x == 0.0), "expert {e}");
            }
        }
    }
    let m = ImportanceMatrix::parse(&bytes).unwrap();
    m.check(&cfg).unwrap();
    // The imatrix weighs the MoE file's conversion.
    let out = dir.join("moe-q4-im.vqf");
    let im = dir.join("moe.imatrix");
    std::fs::write(&im, &bytes).unwrap();
    let argv = |extra: &[&str]| {
        let mut v: Vec<String> = [hf.to_str().unwrap(), "-o", out.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str]| kestrel::convert::run(&ConvertArgs::parse(&argv(extra)).unwrap());
    run(&[
        "--wmode",
        "q4",
        "--imatrix",
        im.to_str().unwrap(),
        "--max-seq",
        "256",
    ])
    .unwrap();
    let weighted = std::fs::read(&out).unwrap();
    run(&["--wmode", "q4", "--quantizer", "search", "--max-seq", "256"]).unwrap();
    assert_ne!(weighted, std::fs::read(&out).unwrap());
}

#[test]
fn convert_with_an_imatrix_weighs_the_search_and_rejects_misuse() {
    let dir = temp_dir("imatrix-convert");
    let hf = fixtures().join("dev_qwen3_dense_tied/hf");
    let dual = dir.join("dual.vqf");
    convert(&hf, &dual, WeightMode::Dual, Some(256), false).unwrap();
    let im = dir.join("dense.imatrix");
    kestrel::imatrix::run(&args(&dual, &im)).unwrap();
    let out = dir.join("out.vqf");
    let argv = |src: &Path, extra: &[&str]| {
        let mut v: Vec<String> = [src.to_str().unwrap(), "-o", out.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["--max-seq", "256"].iter().map(|s| s.to_string()));
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |src: &Path, extra: &[&str]| {
        kestrel::convert::run(&ConvertArgs::parse(&argv(src, extra)).unwrap())
    };
    let im_s = im.to_str().unwrap();
    run(&hf, &["--wmode", "mix", "--imatrix", im_s]).unwrap();
    let weighted = std::fs::read(&out).unwrap();
    run(&hf, &["--wmode", "mix", "--imatrix", im_s]).unwrap();
    assert_eq!(weighted, std::fs::read(&out).unwrap(), "not reproducible");
    run(&hf, &["--wmode", "mix", "--quantizer", "search"]).unwrap();
    assert_ne!(
        weighted,
        std::fs::read(&out).unwrap(),
        "the weights changed nothing"
    );

    let err = |src: &Path, extra: &[&str]| run(src, extra).unwrap_err().to_string();
    let e = err(
        &hf,
        &["--wmode", "q4", "--quantizer", "ggml", "--imatrix", im_s],
    );
    assert!(e.contains("--quantizer ggml"), "{e}");
    let e = err(&hf, &["--wmode", "q8", "--imatrix", im_s]);
    assert!(e.contains("--imatrix applies"), "{e}");
    // Another model's matrix: a shape that differs, named.
    let other = fixtures().join("dev_qwen2_dense/hf");
    let e = err(&other, &["--wmode", "q4", "--imatrix", im_s]);
    assert!(
        e.contains(
            "imatrix tensor token_embd.weight: 96 columns x 1 matrices, the model's has 128"
        ),
        "{e}"
    );
    let e = err(&hf, &["--wmode", "q4", "--imatrix", "/nonexistent.imatrix"]);
    assert!(e.contains("/nonexistent.imatrix"), "{e}");
}

#[test]
fn damaged_imatrix_bytes_are_errors_not_panics() {
    let dir = temp_dir("imatrix-damaged");
    let hf = fixtures().join("dev_qwen3_dense_tied/hf");
    let dual = dir.join("dual.vqf");
    convert(&hf, &dual, WeightMode::Dual, Some(256), false).unwrap();
    let (bytes, _) = compute(&ImatrixArgs {
        chunks: Some(1),
        ..args(&dual, &dir.join("unused"))
    })
    .unwrap();
    assert!(ImportanceMatrix::parse(&bytes).is_ok());
    for cut in (0..bytes.len()).step_by(97) {
        let _ = ImportanceMatrix::parse(&bytes[..cut]);
    }
    let mut state = 7u64;
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..3 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let at = (state >> 33) as usize % b.len();
            b[at] = (state >> 13) as u8;
        }
        if let Ok(m) = ImportanceMatrix::parse(&b) {
            for l in 0..2 {
                for p in [Part::Q, Part::O, Part::Down] {
                    if let Some(c) = m.columns(p, l, 0) {
                        assert!(c.iter().all(|x| x.is_finite() && *x >= 0.0));
                    }
                }
            }
        }
    }
    // Negative sums are refused, naming the tensor.
    let g = Gguf::parse(&bytes).unwrap();
    let t = g.tensor("blk.0.attn_q.weight.in_sum2").unwrap();
    let at = g.data_offset() + t.offset() as usize;
    let mut b = bytes.clone();
    b[at..at + 4].copy_from_slice(&(-1.0f32).to_le_bytes());
    let e = ImportanceMatrix::parse(&b).unwrap_err().to_string();
    assert!(e.contains("blk.0.attn_q.weight.in_sum2"), "{e}");
}
