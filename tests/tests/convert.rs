//! Conversion: the same input always gives the same bytes; a GGUF Q8_0 file
//! and the F32 GGUF of the same weights give identical tensors in q8 mode;
//! both config.json formats and sharded checkpoints convert to the same
//! model; malformed inputs are clear errors, never panics or partial files.

use kestrel::convert::convert;
use kestrel_core::convert::WeightMode;
use kestrel_tests::{fixtures, temp_dir, tensors_of};
use std::path::{Path, PathBuf};

const MODES: [WeightMode; 5] = [
    WeightMode::Dual,
    WeightMode::Q4,
    WeightMode::Q8,
    WeightMode::F16,
    WeightMode::F32,
];

#[test]
fn every_fixture_converts_in_every_mode_reproducibly() {
    let dir = temp_dir("modes");
    let mut sources: Vec<PathBuf> = Vec::new();
    for m in [
        "dev_qwen3_dense_tied",
        "dev_qwen3_dense_untied",
        "dev_qwen2_dense",
        "dev_qwen3_moe",
    ] {
        sources.push(fixtures().join(m).join("hf"));
        for f in ["model-q8_0.gguf", "model-q4_0.gguf", "model-f32.gguf"] {
            let p = fixtures().join(m).join("gguf").join(f);
            if p.exists() {
                sources.push(p);
            }
        }
    }
    for (i, src) in sources.iter().enumerate() {
        for mode in MODES {
            let a = dir.join(format!("{i}-{}-a.vqf", mode.name()));
            let b = dir.join(format!("{i}-{}-b.vqf", mode.name()));
            convert(src, &a, mode, None, false)
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            convert(src, &b, mode, Some(4096), false).unwrap();
            let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
            // Only max_seq (and so the checksum) differ.
            assert_eq!(x.len(), y.len());
            assert_eq!(tensors_of(&a), tensors_of(&b));
            convert(src, &b, mode, None, false).unwrap();
            assert_eq!(
                x,
                std::fs::read(&b).unwrap(),
                "{} {mode:?}: not reproducible",
                src.display()
            );
            let _ = std::fs::remove_file(&a);
            let _ = std::fs::remove_file(&b);
        }
    }
    println!(
        "{} sources x {} modes converted twice, byte-identical",
        sources.len(),
        MODES.len()
    );
}

#[test]
fn gguf_q8_0_and_f32_give_identical_q8_tensors() {
    let dir = temp_dir("q8-vs-f32");
    let g = fixtures().join("dev_qwen3_dense_tied").join("gguf");
    let (a, b) = (dir.join("from-q8.vqf"), dir.join("from-f32.vqf"));
    convert(&g.join("model-q8_0.gguf"), &a, WeightMode::Q8, None, false).unwrap();
    convert(&g.join("model-f32.gguf"), &b, WeightMode::Q8, None, false).unwrap();
    let (ta, tb) = (tensors_of(&a), tensors_of(&b));
    let quantized: Vec<_> = ta.iter().filter(|(n, _)| n.ends_with(".q8")).collect();
    assert!(!quantized.is_empty());
    for ((na, da), (nb, db)) in ta.iter().zip(&tb) {
        assert_eq!(na, nb);
        if na.ends_with(".q8") {
            assert_eq!(
                da, db,
                "{na}: Q8_0 GGUF and F32 GGUF differ after requantization"
            );
        }
    }
    // The HF checkpoint holds the same weights: the same Q8 tensors again.
    let c = dir.join("from-hf.vqf");
    convert(
        &fixtures().join("dev_qwen3_dense_tied").join("hf"),
        &c,
        WeightMode::Q8,
        None,
        false,
    )
    .unwrap();
    for ((na, da), (_, dc)) in ta.iter().zip(&tensors_of(&c)) {
        if na.ends_with(".q8") {
            assert_eq!(da, dc, "{na}: HF and GGUF differ");
        }
    }
}

/// Writes a safetensors file (F32 tensors) with the given names.
fn write_safetensors(path: &Path, tensors: &[(String, Vec<usize>, Vec<u8>)]) {
    let mut header = String::from("{");
    let mut off = 0;
    for (i, (name, shape, data)) in tensors.iter().enumerate() {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        if i > 0 {
            header.push(',');
        }
        header += &format!(
            "\"{name}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{off},{}]}}",
            dims.join(","),
            off + data.len()
        );
        off += data.len();
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    for (_, _, d) in tensors {
        out.extend_from_slice(d);
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn sharded_checkpoints_and_both_config_formats_agree() {
    let src = fixtures().join("dev_qwen3_dense_tied").join("hf");
    let dir = temp_dir("shards");
    let whole = dir.join("whole.vqf");
    convert(&src, &whole, WeightMode::Q8, None, false).unwrap();

    // Split the checkpoint in three shards (as f32) with an index file, and
    // use the transformers-5 config.json.
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let st = kestrel_core::safetensors::SafeTensors::parse(&bytes).unwrap();
    let mut all: Vec<(String, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .map(|(n, v)| {
            let mut vals = vec![0f32; v.numel()];
            v.to_f32(&mut vals).unwrap();
            (
                n.chars().collect(),
                v.shape().to_vec(),
                vals.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let sharded = dir.join("sharded");
    std::fs::create_dir_all(&sharded).unwrap();
    let third = all.len().div_ceil(3);
    let mut index = String::from("{\"metadata\":{},\"weight_map\":{");
    for (i, chunk) in all.chunks(third).enumerate() {
        let name = format!("model-{:05}-of-00003.safetensors", i + 1);
        write_safetensors(&sharded.join(&name), chunk);
        for (j, (t, _, _)) in chunk.iter().enumerate() {
            if i + j > 0 {
                index.push(',');
            }
            index += &format!("\"{t}\":\"{name}\"");
        }
    }
    index += "}}";
    std::fs::write(sharded.join("model.safetensors.index.json"), index).unwrap();
    std::fs::copy(
        src.join("config.transformers5.json"),
        sharded.join("config.json"),
    )
    .unwrap();
    for f in [
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        std::fs::copy(src.join(f), sharded.join(f)).unwrap();
    }
    let from_shards = dir.join("sharded.vqf");
    convert(&sharded, &from_shards, WeightMode::Q8, None, false).unwrap();
    assert_eq!(
        std::fs::read(&whole).unwrap(),
        std::fs::read(&from_shards).unwrap()
    );
}

#[test]
fn malformed_inputs_are_clear_errors_and_leave_nothing() {
    let dir = temp_dir("bad");
    let out = dir.join("out.vqf");
    let src = fixtures().join("dev_qwen3_dense_tied").join("hf");
    let copy = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        for f in [
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "generation_config.json",
            "model.safetensors",
        ] {
            std::fs::copy(src.join(f), d.join(f)).unwrap();
        }
        d
    };
    type Damage = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Damage, &str)> = vec![
        (
            "config-not-json",
            Box::new(|d: &Path| {
                std::fs::write(d.join("config.json"), "{\"hidden_size\": 96,").unwrap()
            }),
            "config.json",
        ),
        (
            "config-bad-arch",
            Box::new(|d: &Path| {
                let t = std::fs::read_to_string(d.join("config.json"))
                    .unwrap()
                    .replace("\"qwen3\"", "\"llama\"");
                std::fs::write(d.join("config.json"), t).unwrap()
            }),
            "model_type",
        ),
        (
            "config-zero-heads",
            Box::new(|d: &Path| {
                let t = std::fs::read_to_string(d.join("config.json"))
                    .unwrap()
                    .replace("\"num_attention_heads\": 6", "\"num_attention_heads\": 0");
                std::fs::write(d.join("config.json"), t).unwrap()
            }),
            "config",
        ),
        (
            "tokenizer-truncated",
            Box::new(|d: &Path| {
                let t = std::fs::read(d.join("tokenizer.json")).unwrap();
                std::fs::write(d.join("tokenizer.json"), &t[..t.len() / 2]).unwrap()
            }),
            "tokenizer.json",
        ),
        (
            "weights-truncated",
            Box::new(|d: &Path| {
                let t = std::fs::read(d.join("model.safetensors")).unwrap();
                std::fs::write(d.join("model.safetensors"), &t[..t.len() - 100]).unwrap()
            }),
            "model.safetensors",
        ),
        (
            "weights-missing",
            Box::new(|d: &Path| std::fs::remove_file(d.join("model.safetensors")).unwrap()),
            "safetensors",
        ),
    ];
    for (name, damage, needle) in cases {
        let d = copy(name);
        damage(&d);
        std::fs::write(&out, b"previous output").unwrap();
        let err = convert(&d, &out, WeightMode::Q8, None, false)
            .unwrap_err()
            .to_string();
        println!("{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
        assert!(!err.contains('\n'), "{name}: one line");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            b"previous output",
            "{name}: existing output touched"
        );
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{name}: temporary files left behind");
    }
    // A file that is neither GGUF nor a directory.
    let junk = dir.join("junk.bin");
    std::fs::write(&junk, b"not a model").unwrap();
    assert!(convert(&junk, &out, WeightMode::Q8, None, false)
        .unwrap_err()
        .to_string()
        .contains("not a GGUF"));
    // A GGUF cut short.
    let g = std::fs::read(fixtures().join("dev_qwen2_dense/gguf/model-q8_0.gguf")).unwrap();
    for cut in [8, 100, 1000, g.len() / 2, g.len() - 1] {
        std::fs::write(&junk, &g[..cut]).unwrap();
        let e = convert(&junk, &out, WeightMode::Q8, None, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("junk.bin"), "{e}");
    }
}

/// Conversion reports what storing each tensor lost: exact for F32, the
/// f16 rounding for F16, about 2^-8 of the values for Q8_0 and about 2^-4
/// for Q4_0 (relative RMS), and the reference is the source's own sum of
/// squares.
#[test]
fn conversion_reports_each_tensors_quantization_error() {
    use kestrel_core::config::Arch;
    use kestrel_core::convert::{self, Part, TensorSource};
    use kestrel_core::quant::repack::Layout;
    use kestrel_core::vqf::format::Entry;
    let cfg = kestrel_tests::tiny_config(Arch::Qwen3);
    let src = kestrel_tests::SyntheticSource { cfg };
    let mut entries =
        vec![Entry::EMPTY; convert::entry_count(&cfg, WeightMode::Dual, None).unwrap()];
    let mut scratch = vec![0f32; convert::scratch_len(&cfg).unwrap()];
    let mut sink = kestrel_tests::VecSink::default();
    let mut seen = Vec::new();
    convert::write_vqf(
        &cfg,
        WeightMode::Dual,
        kestrel_core::quant::Quantizer::Ggml,
        None,
        64,
        None,
        &src,
        &mut entries,
        &mut scratch,
        &mut sink,
        &mut |t| seen.push((*t.entry, t.error)),
    )
    .unwrap();
    assert_eq!(seen.len(), entries.len());
    for (e, q) in &seen {
        let rel = q.relative_rms();
        let name = e.name_str();
        match e.layout {
            Layout::F32 => assert_eq!(q.err, 0.0, "{name}"),
            Layout::F16 => assert!(rel < 1e-3, "{name}: {rel}"),
            Layout::Q8_0x8 => assert!((1e-4..2e-2).contains(&rel), "{name}: {rel}"),
            Layout::Q4_0x4 => assert!((1e-2..0.2).contains(&rel), "{name}: {rel}"),
            // Layouts that keep a GGUF file's blocks: nothing is lost.
            _ => assert_eq!(q.err, 0.0, "{name}"),
        }
        assert!(q.reference > 0.0, "{name}");
    }
    // The reference is the source's sum of squares: layer 0's attention norm.
    let norm = seen
        .iter()
        .find(|(e, _)| e.name_str() == "blk.0.attn_norm.f32")
        .unwrap()
        .1;
    let mut row = vec![0f32; cfg.hidden_size as usize];
    src.read_rows(Part::AttnNorm, 0, 0, 0, &mut row).unwrap();
    let want: f64 = row.iter().map(|&x| x as f64 * x as f64).sum();
    assert!(
        (norm.reference - want).abs() <= 1e-12 * want,
        "{} vs {want}",
        norm.reference
    );
}

/// `Quantizer::Search` writes Q4_0 blocks with less squared error than
/// ggml's quantizer, tensor by tensor on this synthetic source (it
/// minimizes an error weighted by the values' magnitude, so this is a
/// measurement, not a per-block guarantee; `quantizer.rs` checks the
/// guarantee), and leaves every other layout's bytes as they were (the Q8
/// copy, norms, the embedding).
#[test]
fn the_searching_quantizer_lowers_each_q4_tensors_error() {
    use kestrel_core::config::Arch;
    use kestrel_core::convert;
    use kestrel_core::quant::repack::Layout;
    use kestrel_core::quant::Quantizer;
    use kestrel_core::vqf::format::Entry;
    let cfg = kestrel_tests::tiny_config(Arch::Qwen3);
    let src = kestrel_tests::SyntheticSource { cfg };
    let run = |q: Quantizer| {
        let mut entries =
            vec![Entry::EMPTY; convert::entry_count(&cfg, WeightMode::Dual, None).unwrap()];
        let mut scratch = vec![0f32; convert::scratch_len(&cfg).unwrap()];
        let mut sink = kestrel_tests::VecSink::default();
        let mut seen = Vec::new();
        convert::write_vqf(
            &cfg,
            WeightMode::Dual,
            q,
            None,
            64,
            None,
            &src,
            &mut entries,
            &mut scratch,
            &mut sink,
            &mut |t| seen.push((*t.entry, t.error)),
        )
        .unwrap();
        (seen, sink.0)
    };
    let (ggml, ggml_bytes) = run(Quantizer::Ggml);
    let (search, search_bytes) = run(Quantizer::Search);
    assert_eq!(ggml_bytes.len(), search_bytes.len());
    let (mut q4, mut sum_g, mut sum_s) = (0, 0.0, 0.0);
    for ((e, g), (es, s)) in ggml.iter().zip(&search) {
        assert_eq!(e.name_str(), es.name_str());
        let at = e.offset as usize..(e.offset + e.nbytes) as usize;
        if e.layout == Layout::Q4_0x4 {
            q4 += 1;
            assert!(
                s.err <= g.err * (1.0 + 1e-9),
                "{}: search {} above ggml {}",
                e.name_str(),
                s.err,
                g.err
            );
            sum_g += g.err;
            sum_s += s.err;
        } else {
            assert_eq!(ggml_bytes[at.clone()], search_bytes[at], "{}", e.name_str());
        }
    }
    assert!(q4 > 5, "only {q4} Q4 tensors");
    assert!(sum_s < 0.95 * sum_g, "search {sum_s} vs ggml {sum_g}");
    println!(
        "{q4} Q4_0 tensors: squared error {:.3}x ggml's",
        sum_s / sum_g
    );
}
