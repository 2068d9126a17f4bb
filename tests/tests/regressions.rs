//! Inputs the fuzzers found, kept forever: every file under
//! `tests/vectors/crashers/TARGET/` goes through the same readers as the
//! cargo-fuzz target TARGET (fuzz/fuzz_targets/TARGET.rs), and must give an
//! error or a value, never a panic. A new crasher is added by copying
//! `fuzz/artifacts/TARGET/crash-*` there (docs/reliability.md). The
//! campaign of 2026-11-29 found none, so the directories are empty for now.

use kestrel_core::gguf::{dequantize_row, Gguf};
use kestrel_core::json;
use kestrel_core::safetensors::SafeTensors;
use kestrel_core::tokenizer::{EncodeOptions, EncodeScratch, Tokenizer};
use kestrel_core::vqf::tokenizer_section::{self, TokenizerTables};
use kestrel_core::vqf::{config_section, Vqf};
use kestrel_tests::VecSink;
use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("vectors/crashers")
        .join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<(PathBuf, Vec<u8>)> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn vqf() {
    for (_p, data) in inputs("vqf") {
        if let Ok(v) = Vqf::parse(&data) {
            for e in v.entries() {
                let _ = v.data(&e);
                let _ = v.matrix(&e, 0);
            }
            if let Ok(w) = kestrel_tests::weights(v, true) {
                for l in 0..w.cfg.num_layers as usize {
                    let _ = w.layer(l, w.routing.decode);
                    let _ = w.layer(l, w.routing.prefill);
                }
            }
        }
    }
}

#[test]
fn gguf() {
    for (_p, data) in inputs("gguf") {
        if let Ok(g) = Gguf::parse(&data) {
            let mut row = vec![0f32; 4096];
            for t in g.tensors() {
                let n = t.row_len() as usize;
                if n == 0 || n > row.len() {
                    continue;
                }
                for i in 0..t.n_rows().min(256) {
                    if let Some(bytes) = t.row(i) {
                        let _ = dequantize_row(t.ggml_type(), bytes, &mut row[..n]);
                    }
                }
            }
        }
    }
}

#[test]
fn safetensors() {
    for (_p, data) in inputs("safetensors") {
        if let Ok(st) = SafeTensors::parse(&data) {
            let mut row = [0f32; 64];
            for (_, t) in st.tensors() {
                let cols = t.cols();
                if cols > 0 && cols <= row.len() && t.rows() > 0 {
                    let _ = t.to_f32_row(t.rows() - 1, &mut row[..cols]);
                }
            }
        }
    }
}

#[test]
fn json() {
    for (_p, data) in inputs("json") {
        if let Ok(v) = json::parse(&data) {
            let _ = v.iter_object().map(|it| it.count());
            let _ = v.iter_array().map(|it| it.count());
        }
    }
}

#[test]
fn config() {
    for (p, data) in inputs("config") {
        for generation in [None, Some(&data[..])] {
            if let Ok(cfg) = kestrel::convert::hf::config_from_json(&data, generation) {
                let mut sink = VecSink::default();
                config_section::encode(&cfg, &mut sink).unwrap();
                config_section::decode(&sink.0).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            }
        }
    }
}

#[test]
fn tokenizer() {
    for (_p, data) in inputs("tokenizer") {
        if let Ok(tables) = kestrel::convert::hf::tokenizer_from_json(&data, "") {
            let mut sink = VecSink::default();
            tables
                .with_input(|i| tokenizer_section::encode(i, &mut sink))
                .unwrap();
            let tok = Tokenizer::new(TokenizerTables::parse(&sink.0).unwrap());
            let text = String::from_utf8_lossy(&data);
            let mut buf = vec![0u8; 4 * text.len() + 64];
            let mut work = vec![0u32; EncodeScratch::work_len_for(4 * text.len() + 64)];
            let mut scratch = EncodeScratch::new(&mut buf, &mut work);
            let mut out = vec![0u32; text.len() + 8];
            let _ = tok.encode_with(&text, EncodeOptions::default(), &mut out, &mut scratch);
        }
    }
}
