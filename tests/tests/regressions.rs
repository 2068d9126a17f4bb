//! Inputs the fuzz campaigns kept, replayed forever: every file under
//! `tests/vectors/fuzz/TARGET/` (a minimised corpus of the campaign, and
//! any crasher) goes through `kestrel_tests::exercise::TARGET`, the very
//! function the cargo-fuzz target runs (fuzz/fuzz_targets/TARGET.rs), and
//! must return, never panic. A folder that is missing or empty fails: the
//! test cannot pass having run nothing. A new crasher is added by copying
//! `fuzz/artifacts/TARGET/crash-*` there (docs/reliability.md).

use kestrel_tests::exercise::TARGETS;
use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("vectors/fuzz")
        .join(target);
    let rd = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut v: Vec<(PathBuf, Vec<u8>)> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "{}: no kept inputs", dir.display());
    v
}

#[test]
fn every_fuzz_target_has_kept_inputs_and_none_panics() {
    let mut total = 0;
    for (target, exercise) in TARGETS {
        let inputs = inputs(target);
        for (path, data) in &inputs {
            let run = std::panic::catch_unwind(|| exercise(data));
            assert!(run.is_ok(), "{target}: {} panicked", path.display());
        }
        println!("{target}: {} inputs", inputs.len());
        total += inputs.len();
    }
    println!("{total} inputs in all");
}

#[test]
fn every_fuzz_target_is_listed() {
    // The targets fuzz/Cargo.toml builds are the ones replayed here.
    let toml = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/Cargo.toml"),
    )
    .unwrap();
    let built: Vec<&str> = toml
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "kestrel-fuzz")
        .collect();
    let mut listed: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    let mut built_sorted = built.clone();
    built_sorted.sort();
    listed.sort();
    assert_eq!(built_sorted, listed);
}

/// The VQF target on files of every kept-GGUF layout, made here from the
/// fixtures (a whole model is larger than the kept corpus takes): IQ4_NLx4
/// (layout 8), Q3_Kx8 (12), IQ4_XSx8 (10), Q2_Kx8 (11), IQ3_XXSx8 (13),
/// IQ3_Sx8 (14), IQ2_XXSx8 (15), the K-quant mix (5, 6, 7), each whole, cut at
/// 48 points, and with 300 deterministic byte changes (most in the header
/// and entry table, some anywhere): the exerciser returns on each, and the
/// whole file parses with the layouts it should hold.
#[test]
fn vqf_files_of_the_kept_layouts_and_their_damage_never_panic() {
    use kestrel::convert::convert;
    use kestrel_core::convert::WeightMode;
    use kestrel_core::quant::layout::Layout;
    use kestrel_core::vqf::Vqf;
    use kestrel_tests::{exercise, fixtures, temp_dir};
    let dir = temp_dir("regressions-vqf-layouts");
    let cases = [
        ("dev_qwen2_dense", "model-iq4_nl.gguf", Layout::Iq4Nlx4),
        ("dev_qwen2_kquant", "model-q3_k_m.gguf", Layout::Q3Kx8),
        ("dev_qwen2_kquant", "model-iq4_xs.gguf", Layout::Iq4Xsx8),
        ("dev_qwen2_kquant", "model-q2_k.gguf", Layout::Q2Kx8),
        ("dev_qwen2_kquant", "model-iq3_xxs.gguf", Layout::Iq3Xxsx8),
        ("dev_qwen2_kquant", "model-iq3_s.gguf", Layout::Iq3Sx8),
        ("dev_qwen2_kquant", "model-iq2_xxs.gguf", Layout::Iq2Xxsx8),
        ("dev_qwen2_kquant", "model-iq2_xs.gguf", Layout::Iq2Xsx8),
        ("dev_qwen2_kquant", "model-iq2_s.gguf", Layout::Iq2Sx8),
        ("dev_qwen2_kquant", "model-kquant-mix.gguf", Layout::Q6Kx8),
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for (model, file, layout) in cases {
        let src = fixtures().join(model).join("gguf").join(file);
        let out = dir.join(format!("{file}.vqf"));
        convert(&src, &out, WeightMode::Source, None, false).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        let v = Vqf::parse(&bytes).unwrap();
        assert!(
            v.entries().any(|e| e.layout == layout),
            "{file}: no {layout:?}"
        );
        let run = |data: &[u8], what: &str| {
            let r = std::panic::catch_unwind(|| exercise::vqf(data));
            assert!(r.is_ok(), "{file}: {what} panicked");
        };
        run(&bytes, "the whole file");
        for i in 0..48 {
            let at = bytes.len() * i / 48 + rand(64);
            run(&bytes[..at.min(bytes.len())], &format!("cut at {at}"));
        }
        let head = bytes.len().min(64 << 10);
        for i in 0..300 {
            let mut m = bytes.clone();
            let at = if i % 3 == 0 {
                rand(m.len())
            } else {
                rand(head)
            };
            let width = 1 + rand(4);
            for b in m.iter_mut().skip(at).take(width) {
                *b = rand(256) as u8;
            }
            run(&m, &format!("change {i} at {at}"));
        }
    }
}
