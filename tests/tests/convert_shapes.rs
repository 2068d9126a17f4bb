//! Conversion checks every tensor's shape against the config (issue 19):
//! a checkpoint whose config disagrees with its tensors is one error line
//! naming the tensor, the shape found and the shape the config implies, and
//! leaves no output. One deliberately mismatched checkpoint per rule, from
//! Hugging Face directories (config.json edited) and GGUF files (a
//! metadata integer patched in place).

use kestrel::convert::convert;
use kestrel_core::convert::WeightMode;
use kestrel_tests::{fixtures, temp_dir, ScratchDir};
use std::path::{Path, PathBuf};

/// The error converting `src`, which must fail and leave nothing at the
/// output path.
fn convert_error(src: &Path, dir: &Path) -> String {
    let out = dir.join("out.vqf");
    let e = convert(src, &out, WeightMode::Q8, Some(64), false)
        .expect_err("a mismatched checkpoint converted")
        .to_string();
    assert!(!out.exists(), "an output was left behind: {e}");
    assert_eq!(e.lines().count(), 1, "not one line: {e}");
    e
}

/// A copy of fixture `name`'s Hugging Face directory with `key`'s value in
/// config.json replaced by `value`.
fn hf_with(name: &str, key: &str, value: &str, tag: &str) -> Edited {
    let src = fixtures().join(name).join("hf");
    let scratch = temp_dir(&format!("shapes-{name}-{tag}"));
    let dir = scratch.join("hf");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let pattern = format!("\"{key}\": ");
    let at = config.find(&pattern).unwrap_or_else(|| panic!("no {key}")) + pattern.len();
    let end = at + config[at..].find([',', '\n']).unwrap();
    let edited = format!("{}{value}{}", &config[..at], &config[end..]);
    std::fs::write(dir.join("config.json"), edited).unwrap();
    Edited(scratch, dir)
}

/// An edited copy of a fixture (its path), in a scratch folder removed
/// when it is dropped (the folder is only held).
struct Edited(#[allow(dead_code)] ScratchDir, PathBuf);

impl std::ops::Deref for Edited {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.1
    }
}

/// A copy of a GGUF fixture with the integer metadata `key` set to `value`
/// (patched in place: the file keeps its length and layout).
fn gguf_with(path: &str, key: &str, value: u32, tag: &str) -> Edited {
    let mut bytes = std::fs::read(fixtures().join(path)).unwrap();
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend(key.as_bytes());
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("no {key}"))
        + needle.len();
    let ty = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    assert!(
        ty == 4 || ty == 5,
        "{key} is not a 32-bit integer (type {ty})"
    );
    bytes[at + 4..at + 8].copy_from_slice(&value.to_le_bytes());
    let scratch = temp_dir(&format!("shapes-gguf-{tag}"));
    let out = scratch.join("model.gguf");
    std::fs::write(&out, bytes).unwrap();
    Edited(scratch, out)
}

fn expect(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "{p:?} not in: {e}");
    }
}

#[test]
fn hf_checkpoints_whose_config_disagrees_with_their_tensors_do_not_convert() {
    let dense = "dev_qwen3_dense_tied";
    let dir = temp_dir("shapes-hf-out");
    // The fixture: hidden 96, 6 heads of 16, 2 KV heads, FFN 256, 576
    // tokens, 2 layers. hidden_size 96 -> 80: the embedding is (576, 96).
    let e = convert_error(&hf_with(dense, "hidden_size", "80", "hidden"), &dir);
    expect(
        &e,
        &[
            "model.embed_tokens.weight",
            "has shape [576, 96]",
            "implies [576, 80]",
        ],
    );
    // num_attention_heads 6 -> 4 (head_dim 16 stays): q_proj is (96, 96).
    let e = convert_error(&hf_with(dense, "num_attention_heads", "4", "heads"), &dir);
    expect(
        &e,
        &[
            "layers.0.self_attn.q_proj.weight",
            "[96, 96]",
            "implies [64, 96]",
        ],
    );
    // num_key_value_heads 2 -> 3: k_proj is (32, 96).
    let e = convert_error(&hf_with(dense, "num_key_value_heads", "3", "kv"), &dir);
    expect(
        &e,
        &[
            "layers.0.self_attn.k_proj.weight",
            "[32, 96]",
            "implies [48, 96]",
        ],
    );
    // vocab_size: the embedding's rows.
    let e = convert_error(&hf_with(dense, "vocab_size", "600", "vocab"), &dir);
    expect(&e, &["model.embed_tokens.weight", "implies [600, 96]"]);
    // intermediate_size: the FFN's rows.
    let e = convert_error(&hf_with(dense, "intermediate_size", "96", "ffn"), &dir);
    expect(
        &e,
        &[
            "layers.0.mlp.gate_proj.weight",
            "[256, 96]",
            "implies [96, 96]",
        ],
    );
    // One layer fewer: the second layer's tensors are extra.
    let e = convert_error(&hf_with(dense, "num_hidden_layers", "1", "fewer"), &dir);
    expect(&e, &["model.layers.1.", "is in layer 1", "1 layers"]);
    // One layer more: missing.
    let e = convert_error(&hf_with(dense, "num_hidden_layers", "3", "more"), &dir);
    expect(&e, &["model.layers.2.", "is missing"]);

    let moe = "dev_qwen3_moe";
    // num_experts 6 -> 4: experts 4 and 5 are extra (and the router has 6 rows).
    let e = convert_error(&hf_with(moe, "num_experts", "4", "experts"), &dir);
    expect(&e, &["mlp.gate.weight", "[6, 64]", "implies [4, 64]"]);
    // moe_intermediate_size: each expert's rows.
    let e = convert_error(&hf_with(moe, "moe_intermediate_size", "64", "moeffn"), &dir);
    expect(
        &e,
        &[
            "mlp.experts.0.gate_proj.weight",
            "[96, 64]",
            "implies [64, 64]",
        ],
    );
}

#[test]
fn gguf_files_whose_metadata_disagrees_with_their_tensors_do_not_convert() {
    let dir = temp_dir("shapes-gguf-out");
    let dense = "dev_qwen3_dense_tied/gguf/model-q8_0.gguf";
    let e = convert_error(
        &gguf_with(dense, "qwen3.attention.head_count", 4, "heads"),
        &dir,
    );
    expect(&e, &["blk.0.attn_q.weight", "[96, 96]", "implies [64, 96]"]);
    let e = convert_error(
        &gguf_with(dense, "qwen3.attention.head_count_kv", 3, "kv"),
        &dir,
    );
    expect(&e, &["blk.0.attn_k.weight", "[32, 96]", "implies [48, 96]"]);
    let e = convert_error(
        &gguf_with(dense, "qwen3.feed_forward_length", 96, "ffn"),
        &dir,
    );
    expect(
        &e,
        &["blk.0.ffn_gate.weight", "[256, 96]", "implies [96, 96]"],
    );
    let e = convert_error(&gguf_with(dense, "qwen3.block_count", 1, "fewer"), &dir);
    expect(&e, &["blk.1.", "is in layer 1", "1 layers"]);
    let e = convert_error(&gguf_with(dense, "qwen3.block_count", 3, "more"), &dir);
    expect(&e, &["blk.2.", "is missing"]);

    let moe = "dev_qwen3_moe/gguf/model-q8_0.gguf";
    // The expert stacks hold 6.
    let e = convert_error(&gguf_with(moe, "qwen3moe.expert_count", 4, "experts"), &dir);
    expect(
        &e,
        &["blk.0.ffn_gate_inp.weight", "[6, 64]", "implies [4, 64]"],
    );
    let e = convert_error(
        &gguf_with(moe, "qwen3moe.expert_feed_forward_length", 64, "moeffn"),
        &dir,
    );
    expect(
        &e,
        &["blk.0.ffn_gate_exps.weight", "[96, 64]", "implies [64, 64]"],
    );
}

#[test]
fn a_stack_of_experts_must_hold_the_configs_count() {
    // The GGUF fixture's stacks hold 6 experts, as its metadata says. Its
    // first gate stack's info is patched to say 5 (the data, sized for
    // the tensors' own shapes, still tiles the file): the stack no longer
    // holds the config's count.
    let dir = temp_dir("shapes-stack-out");
    let moe = "dev_qwen3_moe/gguf/model-q8_0.gguf";
    let bytes = std::fs::read(fixtures().join(moe)).unwrap();
    let g = kestrel_core::gguf::Gguf::parse(&bytes).unwrap();
    let name = "blk.0.ffn_gate_exps.weight";
    let t = g.tensor(name).unwrap();
    assert_eq!(t.dims(), [64, 96, 6], "fixture changed");
    // Info record: name (u64 length, bytes), n_dims (u32), dims (u64 each).
    let third = t.info_offset() + 8 + name.len() + 4 + 16;
    let mut patched = bytes.clone();
    assert_eq!(
        u64::from_le_bytes(patched[third..third + 8].try_into().unwrap()),
        6
    );
    patched[third..third + 8].copy_from_slice(&5u64.to_le_bytes());
    let scratch = temp_dir("shapes-stack");
    let path = scratch.join("model.gguf");
    std::fs::write(&path, patched).unwrap();
    let e = convert_error(&path, &dir);
    expect(&e, &[name, "stacks 5 experts, the config has 6"]);
}

#[test]
fn a_tokenizer_larger_than_the_embedding_does_not_convert() {
    // The fixture's 496 tokens fit its 576 embedding rows; one more added
    // token at id 600 does not.
    let dir = hf_with("dev_qwen3_dense_tied", "vocab_size", "576", "tokenizer");
    let path = dir.join("tokenizer.json");
    let json = std::fs::read_to_string(&path).unwrap();
    let extra = r#""added_tokens": [
    {"id": 600, "content": "<|extra|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},"#;
    std::fs::write(&path, json.replacen(r#""added_tokens": ["#, extra, 1)).unwrap();
    let e = convert_error(&dir, &temp_dir("shapes-tokenizer-out"));
    expect(
        &e,
        &["the tokenizer has 601 tokens", "576 rows (vocab_size)"],
    );
}
