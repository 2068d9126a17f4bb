//! `kestrel inspect` and `kestrel verify`.

use crate::error::{Context, Result};
use crate::files::Mapped;
use kestrel_core::config::Config;
use kestrel_core::tensors::NO_LAYER;
use kestrel_core::vqf::format::{flags, Entry};
use kestrel_core::vqf::{self, Vqf};
use std::fmt::Write as _;
use std::path::Path;

fn open(path: &Path) -> Result<Mapped> {
    Mapped::open(path)
}

fn parse<'a>(m: &'a Mapped) -> Result<Vqf<'a>> {
    Vqf::parse(m.bytes()).with_context(|| m.path().display())
}

fn shape(e: &Entry) -> String {
    let dims: Vec<String> = e.shape[..e.ndim as usize]
        .iter()
        .map(|d| d.to_string())
        .collect();
    format!("[{}]", dims.join(", "))
}

/// Bytes per storage type, in first-seen order.
fn bytes_by_type(v: &Vqf) -> Vec<(&'static str, u64, usize)> {
    let mut out: Vec<(&'static str, u64, usize)> = Vec::new();
    for e in v.entries() {
        let name = e.layout_name();
        match out.iter_mut().find(|(n, _, _)| *n == name) {
            Some(slot) => {
                slot.1 += e.nbytes;
                slot.2 += 1;
            }
            None => out.push((name, e.nbytes, 1)),
        }
    }
    out
}

fn flag_lines(f: u64) -> Vec<(usize, bool, &'static str)> {
    (0..flags::NAMES.len())
        .map(|b| (b, f >> b & 1 == 1, flags::NAMES[b]))
        .collect()
}

fn config_pairs(c: &Config) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("arch", format!("\"{}\"", c.arch.name())),
        ("vocab_size", c.vocab_size.to_string()),
        ("hidden_size", c.hidden_size.to_string()),
        ("num_layers", c.num_layers.to_string()),
        ("num_heads", c.num_heads.to_string()),
        ("num_kv_heads", c.num_kv_heads.to_string()),
        ("head_dim", c.head_dim.to_string()),
        ("ffn_size", c.ffn_size.to_string()),
        ("rope_theta", format!("{}", c.rope_theta)),
        ("rms_norm_eps", format!("{:e}", c.rms_norm_eps)),
        ("max_position", c.max_position.to_string()),
        ("tied_embeddings", c.tied_embeddings.to_string()),
        ("qkv_bias", c.qkv_bias.to_string()),
        ("qk_norm", c.qk_norm.to_string()),
    ];
    if c.rotary_dim != c.head_dim {
        v.push(("rotary_dim", c.rotary_dim.to_string()));
    }
    if let Some(l) = &c.linear {
        let (i, kh, vh, kd, vd, k) = (
            l.interval,
            l.key_heads,
            l.value_heads,
            l.key_dim,
            l.value_dim,
            l.conv_kernel,
        );
        v.push((
            "linear_attention",
            format!("full every {i}: {kh} key / {vh} value heads of {kd} / {vd}, conv {k}"),
        ));
    }
    if let Some(m) = &c.moe {
        v.push(("num_experts", m.num_experts.to_string()));
        v.push(("experts_per_token", m.experts_per_token.to_string()));
        v.push(("moe_ffn_size", m.moe_ffn_size.to_string()));
        v.push(("norm_topk_prob", m.norm_topk_prob.to_string()));
        v.push(("decoder_sparse_step", m.decoder_sparse_step.to_string()));
        if m.shared_ffn_size > 0 {
            v.push(("shared_ffn_size", m.shared_ffn_size.to_string()));
        }
        let dense: Vec<String> = (0..c.num_layers as usize)
            .filter(|&l| m.mlp_only_layers[l / 64] >> (l % 64) & 1 == 1)
            .map(|l| l.to_string())
            .collect();
        v.push(("mlp_only_layers", format!("[{}]", dense.join(", "))));
    }
    if c.mrope_section != [0; 3] {
        v.push(("mrope_section", crate::error::listed(&c.mrope_section)));
    }
    if let Some(x) = &c.vision {
        let list = |a: &[u32]| crate::error::listed(a);
        let floats = |a: &[f32; 3]| format!("[{}, {}, {}]", a[0], a[1], a[2]);
        v.extend([
            ("vision_depth", x.depth.to_string()),
            ("vision_hidden", x.hidden_size.to_string()),
            ("vision_heads", x.num_heads.to_string()),
            ("vision_ffn", x.ffn_size.to_string()),
            ("patch_size", x.patch_size.to_string()),
            ("temporal_patch", x.temporal_patch.to_string()),
            ("spatial_merge", x.spatial_merge.to_string()),
            ("vision_out_hidden", x.out_hidden.to_string()),
            (
                "num_position_embeddings",
                x.num_position_embeddings.to_string(),
            ),
            ("deepstack_layers", list(x.deepstack())),
            ("image_token_id", x.image_token_id.to_string()),
            ("vision_start_token_id", x.vision_start_token_id.to_string()),
            ("vision_end_token_id", x.vision_end_token_id.to_string()),
            ("min_pixels", x.min_pixels.to_string()),
            ("max_pixels", x.max_pixels.to_string()),
            ("image_mean", floats(&x.image_mean)),
            ("image_std", floats(&x.image_std)),
            ("rescale_factor", format!("{}", x.rescale_factor)),
        ]);
    }
    if let Some(b) = c.bos_token_id {
        v.push(("bos_token_id", b.to_string()));
    }
    let eos: Vec<String> = c.eos().iter().map(|e| e.to_string()).collect();
    v.push(("eos_token_ids", format!("[{}]", eos.join(", "))));
    v
}

/// A JSON string literal (the core's escaper).
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    let _ = kestrel_core::json::write_json_str(&mut o, s);
    o
}

pub fn inspect(path: &Path, json: bool) -> Result<()> {
    let m = open(path)?;
    let v = parse(&m)?;
    let h = v.header();
    let file_len = m.bytes().len() as u64;
    let by_type = bytes_by_type(&v);
    let total: u64 = by_type.iter().map(|t| t.1).sum();
    if json {
        let mut o = String::new();
        let _ = write!(
            o,
            "{{\"file\":{},\"version\":{},\"flags\":{},\"flag_names\":[{}],\"tensor_count\":{},\"max_seq\":{},\"file_len\":{},\"checksum\":\"{:016x}\",",
            json_str(&path.display().to_string()),
            h.version,
            h.flags,
            flag_lines(h.flags).iter().filter(|f| f.1).map(|f| json_str(f.2)).collect::<Vec<_>>().join(","),
            h.tensor_count,
            h.max_seq,
            h.file_len,
            h.checksum
        );
        let cfg: Vec<String> = config_pairs(v.config())
            .iter()
            .map(|(k, val)| format!("{}:{val}", json_str(k)))
            .collect();
        let _ = write!(o, "\"config\":{{{}}},", cfg.join(","));
        let _ = write!(
            o,
            "\"tokenizer\":{},",
            v.tokenizer()
                .map(|t| t.n_tokens.to_string())
                .unwrap_or("null".into())
        );
        o.push_str("\"tensors\":[");
        for (i, e) in v.entries().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let layer = if e.layer == NO_LAYER {
                "null".to_string()
            } else {
                e.layer.to_string()
            };
            let _ = write!(
                o,
                "{{\"name\":{},\"layer\":{layer},\"role\":{},\"dtype\":{},\"layout\":{},\"copies\":{},\"shape\":{},\"offset\":{},\"nbytes\":{}}}",
                json_str(e.name_str()),
                json_str(e.role.stem()),
                json_str(e.dtype_name()),
                json_str(e.layout_name()),
                json_str(copies_name(e.copies)),
                shape(&e),
                e.offset,
                e.nbytes
            );
            if e.ndim == 3 {
                // An expert stack: expert i at offset + i * expert_bytes.
                o.pop();
                let _ = write!(
                    o,
                    ",\"expert_bytes\":{}}}",
                    e.nbytes / e.shape[0].max(1) as u64
                );
            }
        }
        o.push_str("],\"bytes_by_type\":{");
        let t: Vec<String> = by_type
            .iter()
            .map(|(n, b, _)| format!("{}:{b}", json_str(n)))
            .collect();
        let _ = write!(o, "{}}},\"tensor_bytes\":{total}}}", t.join(","));
        println!("{o}");
        return Ok(());
    }
    println!(
        "{}: VQF version {}, {} bytes",
        path.display(),
        h.version,
        file_len
    );
    println!(
        "tensors {}  max_seq {}  checksum {:016x}",
        h.tensor_count, h.max_seq, h.checksum
    );
    println!("flags 0x{:x}:", h.flags);
    for (bit, set, name) in flag_lines(h.flags) {
        println!(
            "  bit {bit} {:<11} {}",
            name,
            if set { "yes" } else { "no" }
        );
    }
    println!("config:");
    for (k, val) in config_pairs(v.config()) {
        println!("  {k:<20} {}", val.trim_matches('"'));
    }
    match v.tokenizer() {
        Some(t) => println!(
            "tokenizer: {} tokens, {} merges, {} added, chat template {} bytes",
            t.n_tokens,
            t.n_merges,
            t.n_added,
            t.chat_template().len()
        ),
        None => println!("tokenizer: none"),
    }
    println!(
        "sections: header 0..128, directory {}..{}, config {}..{}, tokenizer {}..{}, data {}..{}",
        h.dir_offset,
        h.dir_offset + h.dir_size,
        h.config_offset,
        h.config_offset + h.config_size,
        h.tokenizer_offset,
        h.tokenizer_offset + h.tokenizer_size,
        h.data_offset,
        h.file_len
    );
    println!(
        "\n{:<32} {:<7} {:<8} {:<20} {:>12} {:>12}",
        "name", "type", "copies", "shape", "offset", "bytes"
    );
    for e in v.entries() {
        println!(
            "{:<32} {:<7} {:<8} {:<20} {:>12} {:>12}",
            e.name_str(),
            e.layout_name(),
            copies_name(e.copies),
            shape(&e),
            e.offset,
            e.nbytes
        );
    }
    let stacks: Vec<Entry> = v.entries().filter(|e| e.ndim == 3).collect();
    if !stacks.is_empty() {
        println!(
            "\nexpert layout (expert e of a stack: bytes offset + e x per-expert, contiguous):"
        );
        for e in &stacks {
            let (n, rows, cols) = e.matrix_dims();
            let one = e.nbytes / n.max(1) as u64;
            println!(
                "  {:<30} {n} experts x [{rows}, {cols}] {:<7} {one:>10} bytes each, experts at {}..{} step {one}",
                e.name_str(),
                e.layout_name(),
                e.offset,
                e.offset + e.nbytes
            );
        }
    }
    println!("\nbytes by type:");
    for (n, b, count) in &by_type {
        println!(
            "  {n:<7} {count:>5} tensors {:>12} bytes {:>10.1} MB",
            b,
            *b as f64 / 1e6
        );
    }
    let meta = h.data_offset;
    let pad = file_len - total - meta;
    println!(
        "  total   {:>5} tensors {:>12} bytes; + {} header/directory/config/tokenizer + {} alignment padding = {} = file size {}",
        h.tensor_count, total, meta, pad, total + meta + pad, if total + meta + pad == file_len { "(ok)" } else { "(MISMATCH)" }
    );
    Ok(())
}

pub fn verify(path: &Path) -> Result<()> {
    let m = open(path)?;
    let v = parse(&m)?;
    let stored = v.header().checksum;
    let computed = vqf::checksum(m.bytes());
    if stored != computed {
        return Err(format!(
            "{}: checksum mismatch: header says {stored:016x}, the file hashes to {computed:016x} (the file is damaged)",
            path.display()
        ).into());
    }
    println!(
        "{}: OK (checksum {computed:016x}, {} tensors, {} bytes)",
        path.display(),
        v.header().tensor_count,
        m.bytes().len()
    );
    Ok(())
}

/// Bytes of the tensors (each 64-aligned) of a file for `cfg` in `mode`:
/// the file less its header, directory, config and tokenizer.
pub fn weight_bytes(cfg: &Config, mode: kestrel_core::convert::WeightMode) -> Result<u64> {
    use kestrel_core::convert as cc;
    let e = |e: kestrel_core::Error| e.to_string();
    let n = cc::entry_count(cfg, mode, None).map_err(e)?;
    let mut entries = vec![Entry::EMPTY; n];
    cc::directory(cfg, mode, None, &mut entries).map_err(e)?;
    Ok(entries.iter().map(|x| x.nbytes.div_ceil(64) * 64).sum())
}

/// An entry's copy tag as text: `prefill`, `decode`, `both`, or `-` (a file
/// without COPY_TAGS, or a tensor that is not a linear weight).
fn copies_name(c: u8) -> &'static str {
    use kestrel_core::vqf::format::copies;
    match c {
        copies::PREFILL => "prefill",
        copies::DECODE => "decode",
        copies::BOTH => "both",
        _ => "-",
    }
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / (1u64 << 20) as f64)
}

/// `kestrel inspect --memory FILE`: the memory a model needs, from a VQF
/// file, a Hugging Face directory or a config.json: the weights (the file's
/// tensors, mapped) and the arena (`ArenaSizes`: f16 KV cache, activations
/// and scratch for prefill batches of 128) at a few context lengths.
pub fn memory(path: &Path, board: Option<u64>) -> Result<()> {
    use kestrel_core::convert::WeightMode;
    use kestrel_core::state::{ArenaSizes, Options};
    type Report = (Config, Vec<(String, u64)>, u32);
    let from_config = |cfg: Config| -> Result<Report> {
        let mut w = Vec::new();
        for (name, mode) in [
            ("q4", WeightMode::Q4),
            ("q8", WeightMode::Q8),
            ("dual", WeightMode::Dual),
        ] {
            w.push((
                format!("weights if converted --wmode {name}"),
                weight_bytes(&cfg, mode)?,
            ));
        }
        Ok((cfg, w, cfg.max_position.min(32768)))
    };
    let (cfg, weights, max_seq) = if path.is_dir() {
        from_config(crate::convert::hf::config(path, true)?)?
    } else if path.extension().is_some_and(|x| x == "json") {
        let bytes = std::fs::read(path).with_context(|| path.display())?;
        from_config(
            crate::convert::hf::config_from_json(&bytes, None).with_context(|| path.display())?,
        )?
    } else {
        let m = open(path)?;
        let v = parse(&m)?;
        let tensors: u64 = v.entries().map(|e| e.nbytes).sum();
        (
            *v.config(),
            vec![
                ("file".to_string(), m.bytes().len() as u64),
                ("of which tensors".to_string(), tensors),
            ],
            v.header().max_seq,
        )
    };
    println!(
        "{}: {} layers, hidden {}, {} heads / {} KV heads of {}, vocab {}{}",
        path.display(),
        cfg.num_layers,
        cfg.hidden_size,
        cfg.num_heads,
        cfg.num_kv_heads,
        cfg.head_dim,
        cfg.vocab_size,
        cfg.moe
            .map(|m| format!(
                ", {} experts ({} per token)",
                m.num_experts, m.experts_per_token
            ))
            .unwrap_or_default()
    );
    for (what, b) in &weights {
        println!("{what:>34}: {}", mb(*b));
    }
    println!("arena (f16 KV cache + activations, prefill batch 128; max_seq {max_seq}):");
    for ctx in crate::engine::report_contexts(max_seq) {
        let opts = crate::engine::report_options(ctx);
        let layout = ArenaSizes::new(&cfg, &opts)?;
        // Speculative decoding (--lookup, --draft, a server's prediction):
        // the verify step keeps 1 + draft rows of logits.
        let spec = ArenaSizes::new(&cfg, &Options { draft: 8, ..opts })?;
        // Qwen3.5: the Gated DeltaNet layers' windows and states, the same
        // at any context (the KV cache is the attention layers' alone).
        let recurrent = (layout.conv_windows + layout.recurrent + layout.snapshots) as u64;
        let states = if recurrent > 0 {
            format!(", Gated DeltaNet states and snapshots {}", mb(recurrent))
        } else {
            String::new()
        };
        println!(
            "{:>34}: {} (KV cache {}{states}; with --draft-max 8: {})",
            format!("--ctx {ctx}"),
            mb(layout.total as u64),
            mb(layout.kv_bytes() as u64),
            mb(spec.total as u64)
        );
    }
    println!(
        "{:>34}  a --draft model adds its own arena (its inspect --memory), at the target's --ctx",
        ""
    );
    if let Some(board) = board {
        let arena = |ctx: usize| crate::engine::arena_bytes(&cfg, ctx);
        println!("a board of {} ({board} bytes):", gib(board));
        for (what, w) in weights
            .iter()
            .filter(|(what, _)| what != "of which tensors")
        {
            // The longest context (at most max_seq) whose arena fits beside
            // these weights: the arena grows with the context.
            let fits = |ctx: usize| -> Result<bool> { Ok(w + arena(ctx)? <= board) };
            let line = if !fits(1)? {
                format!("does not fit: {} over", gib(w + arena(1)? - board))
            } else {
                let (mut lo, mut hi) = (1usize, max_seq as usize);
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if fits(mid)? {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                format!(
                    "--ctx up to {lo}{}, leaving {} for the system and other programs",
                    if lo == max_seq as usize {
                        " (max_seq)"
                    } else {
                        ""
                    },
                    gib(board - w - arena(lo)?)
                )
            };
            println!("{:>34}: {line}", format!("with the {what}"));
        }
    }
    Ok(())
}

/// A board-sized amount: GiB from 1 GiB up, MiB below.
fn gib(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}
