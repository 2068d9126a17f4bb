//! `kestrel convert SRC -o OUT.vqf`: a Hugging Face model directory or a
//! GGUF file (detected from content, not the name) to VQF. All the work
//! (dequantize, quantize, repack, fuse) is done here, once; the file is
//! written unnamed, checked (memsum == file_sum, reloaded by the same parser
//! inference uses), and only then appears at OUT.

pub mod fit;
pub mod gguf;
pub mod hf;

use crate::cli::{get, opt, switch, value, CommandArgs};
use crate::error::{Context, Result};
use crate::files::{Mapped, Output};
use crate::imatrix::ImportanceMatrix;
use clap::builder::{EnumValueParser, PossibleValue};
use clap::{value_parser, Arg, ArgMatches, Command, ValueEnum};
use kestrel_core::config::{Arch, Config};
use kestrel_core::convert::{
    self as core_convert, Importance, Part, QuantError, Recipe, RecipePart, TensorSource,
    TensorWritten, WeightMode,
};
use kestrel_core::quant::repack::Layout;
use kestrel_core::quant::Quantizer;
use kestrel_core::vqf::format::{Entry, CHECKSUM_AT};
use kestrel_core::vqf::tokenizer_build::Tables;
use kestrel_core::vqf::{self, Vqf};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Dual,
    Q4,
    Q8,
    F16,
    F32,
    Source,
    Mix,
    Small,
    Exact,
}

/// `--wmode`'s values, in the order of the help.
impl ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            Mode::Dual,
            Mode::Source,
            Mode::Mix,
            Mode::Small,
            Mode::Exact,
            Mode::Q4,
            Mode::Q8,
            Mode::F16,
            Mode::F32,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            Mode::Dual => "dual",
            Mode::Q4 => "q4",
            Mode::Q8 => "q8",
            Mode::F16 => "f16",
            Mode::F32 => "f32",
            Mode::Source => "source",
            Mode::Mix => "mix",
            Mode::Small => "small",
            Mode::Exact => "exact",
        }))
    }
}

/// `--quantizer`'s values.
#[derive(Clone, Copy, Debug)]
pub struct QuantizerArg(pub Quantizer);

impl ValueEnum for QuantizerArg {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            QuantizerArg(Quantizer::Ggml),
            QuantizerArg(Quantizer::Search),
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()))
    }
}

pub struct ConvertArgs {
    src: PathBuf,
    out: Option<PathBuf>,
    wmode: Option<Mode>,
    quantizer: Option<QuantizerArg>,
    imatrix: Option<PathBuf>,
    keep_q8: Option<String>,
    max_seq: Option<u32>,
    text_only: bool,
    mmproj: Option<PathBuf>,
    image_min_tokens: Option<u32>,
    image_max_tokens: Option<u32>,
    fit: Option<u64>,
    fit_decode: Option<u64>,
    bpw: Option<f32>,
    tensor_type: Option<String>,
    fit_types: Option<String>,
    dry_run: bool,
}

impl CommandArgs for ConvertArgs {
    fn command() -> Command {
        Command::new("convert")
            .about("Convert a Hugging Face model directory or a GGUF file to VQF.")
            .args([
                Arg::new("src")
                    .value_name("SRC")
                    .required(true)
                    .value_parser(value_parser!(PathBuf))
                    .help("A Hugging Face model directory or a .gguf file."),
                value("out", "PATH", "The VQF file to write.")
                    .short('o')
                    .required_unless_present("dry-run")
                    .value_parser(value_parser!(PathBuf)),
                value(
                    "wmode",
                    "MODE",
                    "Weight copies: exact (a quantized GGUF's own blocks for everything; its default), source (exact's blocks + a Q8 prefill copy), dual (Q8 prefill + Q4 decode; the default otherwise), mix (dual but --keep-q8's matrices in Q8), small (mix's decode copy alone), q4, q8, f16, f32 (README).",
                )
                .value_parser(EnumValueParser::<Mode>::new()),
                value(
                    "quantizer",
                    "Q",
                    "How Q4_0 blocks are made: ggml (llama.cpp's reference, bit for bit) or search (the least weighted squared error over scales; the default for mix, small and --imatrix).",
                )
                .value_parser(EnumValueParser::<QuantizerArg>::new()),
                value(
                    "imatrix",
                    "FILE",
                    "An importance matrix (kestrel imatrix, or llama-imatrix's GGUF) weighting each value's error by its column's activations: for --fit, --bpw and the Q4_0 modes (search quantizer).",
                )
                .value_parser(value_parser!(PathBuf)),
                value(
                    "keep-q8",
                    "PARTS",
                    "mix or small: matrices decoded in Q8_0 (output, attn_q, attn_k, attn_v, attn_output, ffn_gate_up, ffn_down, none; PART@endsN: first and last N layers).",
                ),
                value(
                    "max-seq",
                    "N",
                    "Longest context the file is made for (default: the model's, at most 32768).",
                )
                .value_parser(value_parser!(u32)),
                switch(
                    "text-only",
                    "For a Qwen3-VL or Qwen3.5 model, convert the text model only (no vision tower).",
                ),
                value(
                    "mmproj",
                    "FILE",
                    "For a Qwen3-VL or Qwen3.5 GGUF: the mmproj GGUF holding its vision tower.",
                )
                .value_parser(value_parser!(PathBuf)),
                value(
                    "image-min-tokens",
                    "N",
                    "With --mmproj: fewest image tokens (default: the mmproj's, else 8).",
                )
                .value_parser(value_parser!(u32)),
                value(
                    "image-max-tokens",
                    "N",
                    "With --mmproj: most image tokens (default: the mmproj's, else 4096).",
                )
                .value_parser(value_parser!(u32)),
                value(
                    "fit",
                    "SIZE",
                    "At most SIZE bytes (or 800MB, 11.5GiB): a type per matrix for the least measured error; prints the plan.",
                )
                .value_parser(crate::cli::byte_size()),
                value(
                    "fit-decode",
                    "SIZE",
                    "With --fit or --bpw: also bound the bytes a decoded token reads (one embedding row, a MoE layer's routed experts), which set decode speed.",
                )
                .value_parser(crate::cli::byte_size()),
                value(
                    "bpw",
                    "BITS",
                    "As --fit, the budget in bits per weight of the planned matrices.",
                )
                .value_parser(crate::cli::float32()),
                value(
                    "tensor-type",
                    "CLASS=TYPE,...",
                    "Fix a class's type (token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_gate_up, ffn_down = q2_k ... q8_0); alone, every other matrix in q8_0.",
                ),
                switch(
                    "dry-run",
                    "With --fit or --bpw: print the plan, size and memory, write nothing; SRC may be a config.json alone (errors measured on Gaussian rows of each shape).",
                ),
                value(
                    "fit-types",
                    "TYPE,...",
                    "With --fit or --bpw: the types the plan may choose from (default: all of them).",
                ),
            ])
    }

    fn from_matches(m: &ArgMatches) -> Self {
        ConvertArgs {
            src: get(m, "src"),
            out: opt(m, "out"),
            wmode: opt(m, "wmode"),
            quantizer: opt(m, "quantizer"),
            imatrix: opt(m, "imatrix"),
            keep_q8: opt(m, "keep-q8"),
            max_seq: opt(m, "max-seq"),
            text_only: m.get_flag("text-only"),
            mmproj: opt(m, "mmproj"),
            image_min_tokens: opt(m, "image-min-tokens"),
            image_max_tokens: opt(m, "image-max-tokens"),
            fit: opt(m, "fit"),
            fit_decode: opt(m, "fit-decode"),
            bpw: opt(m, "bpw"),
            tensor_type: opt(m, "tensor-type"),
            fit_types: opt(m, "fit-types"),
            dry_run: m.get_flag("dry-run"),
        }
    }
}

/// A tensor source that can name its tensors (for clear errors) and tell
/// their shapes.
pub trait NamedSource: TensorSource {
    fn tensor_name(&self, part: Part, layer: u16, expert: usize) -> String;
    fn has(&self, part: Part, layer: u16, expert: usize) -> bool;
    /// The stored shape of `part`, outermost dimension first (a stack of
    /// experts: `[experts, rows, cols]`), or `None` when it is missing.
    fn shape(&self, part: Part, layer: u16, expert: usize) -> Option<Vec<u64>>;
    /// Every tensor name the source holds.
    fn names(&self) -> Vec<String>;
    /// The decoder layer a tensor name belongs to, and its expert when the
    /// name has one (`None` for the other tensors, the vision tower's too).
    fn index_of(&self, name: &str) -> Option<(u64, Option<u64>)>;
}

/// A source tensor the config needs: `(part, layer, expert)` and the shape
/// the config implies, outermost first.
struct Needed {
    part: Part,
    layer: u16,
    expert: usize,
    shape: Vec<u64>,
}

/// The source tensors a config needs, with their shapes.
fn required_parts(cfg: &Config) -> Vec<Needed> {
    let (h, vocab) = (cfg.hidden_size as u64, cfg.vocab_size as u64);
    let (q, kv, hd) = (cfg.q_dim() as u64, cfg.kv_dim() as u64, cfg.head_dim as u64);
    let ffn = cfg.ffn_size as u64;
    let mut v = Vec::new();
    let mut need = |part: Part, layer: u16, expert: usize, shape: &[u64]| {
        v.push(Needed {
            part,
            layer,
            expert,
            shape: shape.to_vec(),
        })
    };
    need(Part::Embed, 0, 0, &[vocab, h]);
    need(Part::FinalNorm, 0, 0, &[h]);
    if !cfg.tied_embeddings {
        need(Part::LmHead, 0, 0, &[vocab, h]);
    }
    // Gated attention's q_proj also gives the gate: each head's query
    // then its gate.
    let q_rows = if cfg.attn_gate() { 2 * q } else { q };
    for l in 0..cfg.num_layers as u16 {
        need(Part::AttnNorm, l, 0, &[h]);
        need(Part::FfnNorm, l, 0, &[h]);
        if let Some(lin) = cfg.linear.filter(|_| cfg.is_linear_layer(l as usize)) {
            let d = lin.shape();
            let (conv, vlen, vh) = (
                d.conv_channels() as u64,
                d.value_len() as u64,
                d.value_heads as u64,
            );
            need(Part::LinQkv, l, 0, &[conv, h]);
            need(Part::LinZ, l, 0, &[vlen, h]);
            need(Part::LinB, l, 0, &[vh, h]);
            need(Part::LinA, l, 0, &[vh, h]);
            need(Part::LinConv, l, 0, &[conv, 1, d.conv_kernel as u64]);
            need(Part::LinDecayRate, l, 0, &[vh]);
            need(Part::LinDtBias, l, 0, &[vh]);
            need(Part::LinNorm, l, 0, &[d.value_dim as u64]);
            need(Part::LinOut, l, 0, &[h, vlen]);
        } else {
            need(Part::Q, l, 0, &[q_rows, h]);
            need(Part::K, l, 0, &[kv, h]);
            need(Part::V, l, 0, &[kv, h]);
            need(Part::O, l, 0, &[h, q]);
        }
        if cfg.qkv_bias {
            need(Part::QBias, l, 0, &[q]);
            need(Part::KBias, l, 0, &[kv]);
            need(Part::VBias, l, 0, &[kv]);
        }
        if cfg.qk_norm && !cfg.is_linear_layer(l as usize) {
            need(Part::QNorm, l, 0, &[hd]);
            need(Part::KNorm, l, 0, &[hd]);
        }
        match &cfg.moe {
            Some(m) if cfg.is_moe_layer(l as usize) => {
                let (n, f) = (m.num_experts as u64, m.moe_ffn_size as u64);
                need(Part::Router, l, 0, &[n, h]);
                for e in 0..n as usize {
                    need(Part::ExpGate, l, e, &[f, h]);
                    need(Part::ExpUp, l, e, &[f, h]);
                    need(Part::ExpDown, l, e, &[h, f]);
                }
                let sh = m.shared_ffn_size as u64;
                if sh > 0 {
                    need(Part::ShGate, l, 0, &[sh, h]);
                    need(Part::ShUp, l, 0, &[sh, h]);
                    need(Part::ShDown, l, 0, &[h, sh]);
                    need(Part::ShGateInp, l, 0, &[1, h]);
                }
            }
            _ => {
                need(Part::Gate, l, 0, &[ffn, h]);
                need(Part::Up, l, 0, &[ffn, h]);
                need(Part::Down, l, 0, &[h, ffn]);
            }
        }
    }
    // The vision tower: every vision tensor the directory will hold, one
    // source tensor each, with the directory's shape.
    let _ = kestrel_core::tensors::for_each(cfg, &mut |spec| {
        if spec.role.is_vision() {
            let layer = if spec.layer == kestrel_core::tensors::NO_LAYER {
                0
            } else {
                spec.layer
            };
            let dims: Vec<u64> = spec.shape[..spec.ndim as usize]
                .iter()
                .map(|&d| d as u64)
                .collect();
            need(Part::Vision(spec.role), layer, 0, &dims);
        }
        Ok(())
    });
    v
}

/// `shape` as a matrix: its first dimension by the product of the others
/// (a 1-D tensor is a column).
fn as_matrix(shape: &[u64]) -> (u64, u64) {
    let rest = shape
        .iter()
        .skip(1)
        .try_fold(1u64, |a, &d| a.checked_mul(d));
    (
        shape.first().copied().unwrap_or(0),
        rest.unwrap_or(u64::MAX),
    )
}

/// Every tensor the config needs is in the source with the shape the
/// config implies (a vision tensor: the same matrix, however its
/// dimensions are grouped), a stack of experts holds the config's count,
/// and no tensor belongs to a layer or an expert the config does not have.
/// Errors name the tensor and both shapes.
fn check_parts(src: &dyn NamedSource, cfg: &Config, origin: &Path) -> Result<()> {
    let fail = |msg: String| -> Result<()> { Err(format!("{}: {msg}", origin.display()).into()) };
    let experts = cfg.moe.map_or(0, |m| m.num_experts as u64);
    for n in required_parts(cfg) {
        let name = || src.tensor_name(n.part, n.layer, n.expert);
        let Some(found) = src.shape(n.part, n.layer, n.expert) else {
            return fail(format!("tensor {} is missing", name()));
        };
        let stacked = matches!(n.part, Part::ExpGate | Part::ExpUp | Part::ExpDown)
            && found.len() == n.shape.len() + 1;
        let found_one = if stacked { &found[1..] } else { &found[..] };
        if stacked && found[0] != experts {
            return fail(format!(
                "tensor {} stacks {} experts, the config has {experts} (num_experts)",
                name(),
                found[0]
            ));
        }
        let same = match n.part {
            Part::Vision(_) | Part::LinConv => as_matrix(found_one) == as_matrix(&n.shape),
            // A row of `hidden`: llama-quantize writes it as a vector.
            Part::ShGateInp => found_one.iter().filter(|&&d| d != 1).eq(&n.shape[1..]),
            _ => found_one == n.shape,
        };
        if !same {
            return fail(format!(
                "tensor {} has shape {}, the config implies {}",
                name(),
                crate::error::listed(found_one),
                crate::error::listed(&n.shape)
            ));
        }
    }
    for name in src.names() {
        let Some((layer, expert)) = src.index_of(&name) else {
            continue;
        };
        if layer >= cfg.num_layers as u64 {
            return fail(format!(
                "tensor {name} is in layer {layer}, the config has {} layers (num_hidden_layers)",
                cfg.num_layers
            ));
        }
        if let Some(e) = expert.filter(|&e| e >= experts) {
            return fail(format!(
                "tensor {name} is expert {e}, the config has {experts} (num_experts)"
            ));
        }
    }
    Ok(())
}

/// The tokenizer fits the embedding: at most `vocab_size` tokens (Qwen2.5's
/// 151,936 rows hold 151,665).
fn check_tokenizer(tables: Option<&Tables>, cfg: &Config, origin: &Path) -> Result<()> {
    match tables {
        Some(t) if t.tokens.len() > cfg.vocab_size as usize => Err(format!(
            "{}: the tokenizer has {} tokens, more than the embedding's {} rows (vocab_size)",
            origin.display(),
            t.tokens.len(),
            cfg.vocab_size
        )
        .into()),
        _ => Ok(()),
    }
}

/// Progress on stderr: a bar on a terminal, a line per 10% otherwise.
struct Progress {
    quiet: bool,
    tty: bool,
    last: u64,
    start: Instant,
    /// Per tensor class (role stem) and stored layout: what storage lost.
    errors: Vec<(&'static str, &'static str, QuantError)>,
}

impl Progress {
    fn update(&mut self, t: &TensorWritten) {
        let (e, done, total) = (t.entry, t.written, t.total);
        let class = e.role.stem();
        match self
            .errors
            .iter_mut()
            .find(|(c, l, _)| *c == class && *l == e.layout_name())
        {
            Some((_, _, q)) => {
                q.err += t.error.err;
                q.reference += t.error.reference;
            }
            None => self.errors.push((class, e.layout_name(), t.error)),
        }
        if self.quiet {
            return;
        }
        let pct = done * 100 / total.max(1);
        if self.tty {
            let filled = (pct / 4) as usize;
            eprint!(
                "\r[{}{}] {pct:>3}% {:>7.1} MB  {:<32}",
                "#".repeat(filled),
                ".".repeat(25 - filled),
                done as f64 / 1e6,
                e.name_str()
            );
            if done == total {
                eprintln!();
            }
        } else if pct >= self.last + 10 || done == total {
            self.last = pct - pct % 10;
            eprintln!(
                "convert: {pct:>3}% ({:.1} MB, {:.1} s)",
                done as f64 / 1e6,
                self.start.elapsed().as_secs_f64()
            );
        }
    }
}

/// For `--wmode source` and `exact`: fails on a source without quantized
/// blocks, and names every matrix the decode copy cannot keep as it is (its
/// type has no exact layout, or fused parts differ in type), which is then
/// stored in Q8_0 (in `source`, its prefill copy's entry serves both).
fn say_source_plan(
    cfg: &Config,
    src: &dyn NamedSource,
    mode: WeightMode,
    verbose: bool,
) -> Result<()> {
    use kestrel_core::tensors::{self, Kind};
    // Every model has an embedding (layer 0 of Qwen3.5 has no `Q`).
    if src.block_type(Part::Embed, 0).is_none() {
        return Err(format!(
            "--wmode {} keeps a GGUF file's own blocks; this source has none (use dual)",
            mode.name()
        )
        .into());
    }
    let mut notes = Vec::new();
    tensors::for_each(cfg, &mut |spec| {
        if spec.kind != Kind::Linear {
            return Ok(());
        }
        let cols = spec.shape[spec.ndim as usize - 1] as usize;
        let plan = core_convert::source_plan(cfg, src, spec.layer, spec.role, cols);
        for &part in core_convert::parts_of(spec.role) {
            let Some(ty) = src.block_type(part, spec.layer) else {
                continue;
            };
            let exact = core_convert::exact_layout(ty, cols);
            let kept = match plan {
                core_convert::SourcePlan::Shared => exact == Some(Layout::Q8_0x8),
                _ => exact.is_some(),
            };
            if !kept {
                notes.push(format!(
                    "{} ({}): stored in Q8_0 ({})",
                    src.tensor_name(part, spec.layer, 0),
                    ty.name(),
                    if exact.is_none() {
                        "no layout holds this type exactly"
                    } else {
                        "fused with a part of another type"
                    }
                ));
            }
        }
        Ok(())
    })?;
    if verbose {
        for n in &notes {
            eprintln!("[VQF] {n}");
        }
    }
    Ok(())
}

/// What a file holds besides its planned matrices, at most: the header,
/// the directory, the tokenizer, and every tensor that is not a linear
/// weight or the token embedding (f32), each aligned.
fn other_bytes(cfg: &Config, tables: Option<&Tables>) -> Result<u64> {
    use kestrel_core::tensors::{self, Kind, Role};
    use kestrel_core::vqf::format::{ALIGN, ENTRY_SIZE, HEADER_SIZE};
    let mut total = HEADER_SIZE as u64 + 4 * ALIGN;
    tensors::for_each(cfg, &mut |spec| {
        // A fused weight may be stored as its parts (types that differ).
        let entries = tensors::split_parts(cfg, spec.role).len().max(1) as u64;
        total += entries * (ENTRY_SIZE as u64 + ALIGN);
        if spec.kind != Kind::Linear && spec.role != Role::TokenEmbd {
            let n: u64 = spec.shape[..spec.ndim as usize]
                .iter()
                .map(|&d| d as u64)
                .product();
            total += 4 * n;
        }
        Ok(())
    })?;
    if let Some(t) = tables {
        let tokens: usize = t.tokens.iter().map(|b| b.len() + 8).sum();
        total +=
            (tokens + 16 * t.merges.len() + 8 * t.added.len() + t.template.len() + 4096) as u64;
    }
    Ok(total)
}

/// What the file holds, by copy: the prefill-only entries (the Q8 copy of
/// a two-copy file), the decode copy, the token embedding and the rest
/// (norms, biases, vision tower), and for a two-copy mode the size of its
/// one-copy alternative (the file less its prefill-only entries).
fn size_line(v: &Vqf, mode: WeightMode) -> String {
    use kestrel_core::vqf::format::copies;
    let (mut prefill, mut decode, mut embedding, mut other) = (0u64, 0u64, 0u64, 0u64);
    for e in v.entries() {
        if e.role == kestrel_core::tensors::Role::TokenEmbd {
            embedding += e.nbytes;
        } else if e.copies == copies::PREFILL {
            prefill += e.nbytes;
        } else if e.copies & copies::DECODE != 0 {
            decode += e.nbytes;
        } else {
            other += e.nbytes;
        }
    }
    let total = v.header().file_len;
    let mb = |b: u64| b as f64 / 1e6;
    let mut line = format!(
        "[VQF] size {:.1} MB: decode copy {:.1} MB, prefill-only copy {:.1} MB ({:.0}%), embedding {:.1} MB, other {:.1} MB",
        mb(total),
        mb(decode),
        mb(prefill),
        100.0 * prefill as f64 / total.max(1) as f64,
        mb(embedding),
        mb(other + total.saturating_sub(prefill + decode + embedding + other)),
    );
    let alternative = match mode {
        WeightMode::Source => Some("exact"),
        WeightMode::Dual | WeightMode::Mix(_) => Some("small"),
        _ => None,
    };
    if let (Some(alt), true) = (alternative, prefill > 0) {
        line += &format!(
            "; --wmode {alt} keeps one copy: about {:.1} MB",
            mb(total - prefill)
        );
    }
    line
}

/// Peak resident memory of this process (VmHWM), in bytes.
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}

/// The recipe of a `mix` or `small` file: the parts `--keep-q8` names (`none`: every
/// matrix in Q4_0), or the core's [`Recipe::DEFAULT`].
fn recipe(keep_q8: Option<&str>) -> Result<Recipe> {
    let Some(list) = keep_q8 else {
        return Ok(Recipe::DEFAULT);
    };
    let mut r = Recipe::ALL_Q4;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == "none" {
            continue;
        }
        // `PART@endsN`: only the first and last N layers.
        let (name, ends) = match name.split_once('@') {
            None => (name, 0),
            Some((part, sel)) => {
                let n = sel
                    .strip_prefix("ends")
                    .and_then(|n| n.parse::<u16>().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        format!(
                            "--keep-q8: {}: after @, endsN (N > 0: the first and last N layers)",
                            crate::error::quoted(name)
                        )
                    })?;
                (part, n)
            }
        };
        let part = RecipePart::from_name(name).ok_or_else(|| {
            let names: Vec<_> = RecipePart::ALL.iter().map(|p| p.name()).collect();
            format!(
                "--keep-q8: unknown matrix {} (one of {}, or none)",
                crate::error::quoted(name),
                names.join(", ")
            )
        })?;
        r = r.with_q8_ends(part, ends);
    }
    Ok(r)
}

/// The mode when `--wmode` is not given: `exact` for a GGUF file whose
/// linear weights are quantized (what the user downloaded, at its size:
/// prompts through the file's own blocks cost 0.91x `source`'s prefill
/// speed on the 0.5B, 0.97x on the 1.5B, for half the file;
/// docs/benchmarks.md), `dual` otherwise (a Hugging Face directory, a
/// float GGUF).
fn default_mode(src: &Path) -> WeightMode {
    use kestrel_core::gguf::{GgmlType, Gguf};
    let quantized = || -> Option<bool> {
        if src.is_dir() {
            return Some(false);
        }
        let map = Mapped::open(src).ok()?;
        let g = Gguf::parse(map.bytes()).ok()?;
        let t = g.tensor("blk.0.attn_q.weight")?;
        Some(!matches!(
            t.ggml_type(),
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16
        ))
    };
    if quantized().unwrap_or(false) {
        WeightMode::Exact
    } else {
        WeightMode::Dual
    }
}

/// `--quantizer ggml --imatrix`: refused (ggml rounds; it has no error to weigh).
const GGML_WITH_IMATRIX: &str =
    "--imatrix weighs the search quantizer's error; --quantizer ggml does not search";

/// `--fit`, `--bpw` and `--tensor-type`, checked: `None` when none is given.
fn fit_request(a: &ConvertArgs) -> Result<Option<FitRequest>> {
    let budget = match (a.fit, a.bpw) {
        (Some(_), Some(_)) => {
            return Err("--fit and --bpw both give the budget: one of them".into())
        }
        (Some(b), None) => Some(fit::Budget::Bytes(b)),
        (None, Some(b)) => Some(fit::Budget::BitsPerWeight(b)),
        (None, None) => None,
    };
    let pins = a
        .tensor_type
        .as_deref()
        .map(fit::parse_pins)
        .transpose()?
        .unwrap_or_default();
    let allowed = a
        .fit_types
        .as_deref()
        .map(fit::parse_types)
        .transpose()?
        .unwrap_or_default();
    if budget.is_none() {
        if a.fit_types.is_some() {
            return Err("--fit-types applies with --fit or --bpw".into());
        }
        if a.fit_decode.is_some() {
            return Err("--fit-decode applies with --fit or --bpw".into());
        }
        if a.dry_run {
            return Err("--dry-run applies with --fit or --bpw".into());
        }
        if a.tensor_type.is_none() {
            return Ok(None);
        }
    }
    if let Some(m) = a.wmode.filter(|m| !matches!(m, Mode::Exact)) {
        let name = m
            .to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default();
        return Err(format!("--fit, --bpw and --tensor-type write an exact file (one copy of each matrix in its planned type); not --wmode {name}").into());
    }
    if a.quantizer.is_some() {
        return Err("--quantizer chooses how Q4_0 modes round; --fit, --bpw and --tensor-type quantize with Kestrel's own quantizers".into());
    }
    Ok(Some(FitRequest {
        budget,
        decode_budget: a.fit_decode,
        dry_run: a.dry_run,
        pins,
        allowed,
    }))
}

/// What `--fit`, `--bpw` and `--tensor-type` ask for.
#[derive(Clone, Debug)]
pub struct FitRequest {
    pub budget: Option<fit::Budget>,
    /// `--fit-decode`: the most bytes of matrices a decoded token reads.
    pub decode_budget: Option<u64>,
    /// `--dry-run`: plan, print, write nothing.
    pub dry_run: bool,
    pub pins: Vec<(fit::Class, kestrel_core::gguf::GgmlType)>,
    pub allowed: Vec<kestrel_core::gguf::GgmlType>,
}

pub fn run(a: &ConvertArgs) -> Result<()> {
    if a.keep_q8.is_some() && !matches!(a.wmode, Some(Mode::Mix | Mode::Small)) {
        return Err("--keep-q8 applies to --wmode mix and small only".into());
    }
    let fit = fit_request(a)?;
    let imatrix = a
        .imatrix
        .as_deref()
        .map(ImportanceMatrix::open)
        .transpose()?;
    // The quantizer: as asked; else search with an imatrix or for `mix`
    // and `small` (the modes made for the least error at their size), ggml
    // otherwise.
    let quantizer = match (a.quantizer.map(|q| q.0), &imatrix) {
        (Some(Quantizer::Ggml), Some(_)) => return Err(GGML_WITH_IMATRIX.into()),
        (Some(q), _) => q,
        (None, Some(_)) => Quantizer::Search,
        (None, None) if matches!(a.wmode, Some(Mode::Mix | Mode::Small)) => Quantizer::Search,
        (None, None) => Quantizer::Ggml,
    };
    let q = Quantize {
        quantizer,
        imatrix: imatrix.as_ref(),
        fit: fit.as_ref(),
    };
    // -o is required but with --dry-run (clap checks), where nothing is
    // written.
    let out = a.out.as_deref().unwrap_or(Path::new(""));
    let limits = gguf::ImageTokens {
        min: a.image_min_tokens,
        max: a.image_max_tokens,
    };
    let tower = match (&a.mmproj, a.text_only) {
        (Some(_), true) => {
            return Err(
                "--mmproj gives a vision tower, --text-only leaves it out: one of them".into(),
            )
        }
        (Some(m), false) => Tower::Mmproj(m, limits),
        (None, _) if a.image_min_tokens.is_some() || a.image_max_tokens.is_some() => {
            return Err("--image-min-tokens and --image-max-tokens apply with --mmproj".into())
        }
        (None, true) => Tower::None,
        (None, false) => Tower::FromSource,
    };
    if fit.is_some() {
        return convert_model(&a.src, out, WeightMode::Exact, q, a.max_seq, true, tower);
    }
    let Some(wmode) = a.wmode else {
        let mode = default_mode(&a.src);
        return convert_model(&a.src, out, mode, q, a.max_seq, true, tower);
    };
    let mode = match wmode {
        Mode::Dual => WeightMode::Dual,
        Mode::Q4 => WeightMode::Q4,
        Mode::Q8 => WeightMode::Q8,
        Mode::F16 => WeightMode::F16,
        Mode::F32 => WeightMode::F32,
        Mode::Source => WeightMode::Source,
        Mode::Mix => WeightMode::Mix(recipe(a.keep_q8.as_deref())?),
        Mode::Small => WeightMode::Small(recipe(a.keep_q8.as_deref())?),
        Mode::Exact => WeightMode::Exact,
    };

    convert_model(&a.src, out, mode, q, a.max_seq, true, tower)
}

/// Where a conversion's vision tower comes from.
#[derive(Clone, Copy, Debug)]
pub enum Tower<'p> {
    /// None: the text model only (`--text-only`).
    None,
    /// The source's own (a Qwen3-VL or Qwen3.5 Hugging Face directory's; a GGUF text
    /// file has none).
    FromSource,
    /// llama.cpp's mmproj file beside a GGUF text file (`--mmproj`).
    Mmproj(&'p Path, gguf::ImageTokens),
}

/// How Q4_0 blocks are made: the quantizer, and for the searching one
/// optionally an importance matrix weighing each column's error.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quantize<'m> {
    pub quantizer: Quantizer,
    pub imatrix: Option<&'m ImportanceMatrix>,
    /// `--fit`, `--bpw`, `--tensor-type`: every matrix in a planned type.
    pub fit: Option<&'m FitRequest>,
}

impl Quantize<'_> {
    fn importance(&self) -> Option<&dyn Importance> {
        self.imatrix.map(|m| m as &dyn Importance)
    }
}

/// What a conversion needs.
struct Job<'p> {
    src: &'p Path,
    out: &'p Path,
    quant: Quantize<'p>,
    max_seq: Option<u32>,
    verbose: bool,
}

/// Converts `src` (a Hugging Face directory or a GGUF file) to `out`.
/// `verbose` prints progress and the summary lines on stderr.
pub fn convert(
    src: &Path,
    out: &Path,
    mode: WeightMode,
    max_seq: Option<u32>,
    verbose: bool,
) -> Result<()> {
    convert_model(
        src,
        out,
        mode,
        Quantize::default(),
        max_seq,
        verbose,
        Tower::FromSource,
    )
}

/// [`convert`], with or without a Qwen3-VL or Qwen3.5 model's vision tower.
#[allow(clippy::too_many_arguments)]
pub fn convert_model(
    src: &Path,
    out: &Path,
    mode: WeightMode,
    quant: Quantize,
    max_seq: Option<u32>,
    verbose: bool,
    tower: Tower,
) -> Result<()> {
    let t0 = Instant::now();
    let a = &Job {
        src,
        out,
        quant,
        max_seq,
        verbose,
    };
    if a.src.is_dir() {
        if let Tower::Mmproj(..) = tower {
            return Err(format!(
                "{}: --mmproj applies to a GGUF text file; a Hugging Face directory holds its own vision tower",
                a.src.display()
            )
            .into());
        }
        let cfg = hf::config(a.src, matches!(tower, Tower::FromSource))?;
        let paths = hf::shard_paths(a.src)?;
        // Plain loops: a `collect` into a `Result` per element type was
        // 2.5 KB of the binary.
        let mut maps: Vec<Mapped> = Vec::with_capacity(paths.len());
        for p in &paths {
            maps.push(Mapped::open(p)?);
        }
        let mut shards: Vec<(PathBuf, kestrel_core::safetensors::SafeTensors<'_>)> =
            Vec::with_capacity(maps.len());
        for m in &maps {
            let st = kestrel_core::safetensors::SafeTensors::parse(m.bytes())
                .map_err(|e| format!("{}: {e}", m.path().display()))?;
            shards.push((m.path().to_owned(), st));
        }
        let src = hf::HfSource::new(cfg, &shards)?;
        check_parts(&src, &cfg, a.src)?;
        let mut tables = hf::tokenizer(a.src)?;
        check_tokenizer(tables.as_ref(), &cfg, a.src)?;
        if let Some(t) = tables.as_mut() {
            t.pad_to(cfg.vocab_size as usize);
        }
        write(a, mode, &cfg, &src, tables.as_ref(), t0)
    } else if a.src.extension().is_some_and(|x| x == "json") {
        // A config.json alone: a plan from the shapes (--dry-run only).
        if !a.quant.fit.is_some_and(|f| f.dry_run && f.budget.is_some()) {
            return Err(format!(
                "{}: a config.json holds no weights; only --fit or --bpw with --dry-run plans from it",
                a.src.display()
            )
            .into());
        }
        let bytes = std::fs::read(a.src).with_context(|| a.src.display())?;
        let cfg = hf::config_from_json(&bytes, None).with_context(|| a.src.display())?;
        let src = fit::GaussianSource::new(cfg);
        // The tokenizer beside it, if any, counts in the file's size.
        let dir = a.src.parent().unwrap_or(Path::new("."));
        let mut tables = hf::tokenizer(dir)?;
        if let Some(t) = tables.as_mut() {
            t.pad_to(cfg.vocab_size as usize);
        }
        write(a, mode, &cfg, &src, tables.as_ref(), t0)
    } else {
        let map = Mapped::open(a.src)?;
        if !map.bytes().starts_with(b"GGUF") {
            return Err(format!(
                "{}: not a GGUF file (no GGUF magic) and not a Hugging Face model directory",
                a.src.display()
            )
            .into());
        }
        let g = kestrel_core::gguf::Gguf::parse(map.bytes()).with_context(|| a.src.display())?;
        let mut cfg = gguf::config(&g).with_context(|| a.src.display())?;
        let mmproj_map;
        let mmproj;
        let src = match tower {
            Tower::Mmproj(path, limits) => {
                mmproj_map = Mapped::open(path)?;
                mmproj = kestrel_core::gguf::Gguf::parse(mmproj_map.bytes())
                    .with_context(|| path.display())?;
                if cfg.arch.is_qwen35() {
                    // Qwen3.5's interleaved M-RoPE matters once images
                    // give a row three positions.
                    cfg.mrope_section = gguf::mrope_sections(&g, cfg.arch.name())
                        .with_context(|| a.src.display())?;
                }
                cfg.vision = Some(
                    gguf::mmproj_vision(&mmproj, &g, &cfg, limits)
                        .with_context(|| path.display())?,
                );
                cfg.validate().with_context(|| path.display())?;
                gguf::GgufSource::with_mmproj(cfg, &g, &mmproj)
            }
            _ => {
                let towered = cfg.arch == Arch::Qwen3Vl || cfg.arch.is_qwen35();
                if towered && matches!(tower, Tower::FromSource) && a.verbose {
                    eprintln!(
                        "[VQF] {}: the text model only: llama.cpp keeps the vision tower in an mmproj file (--mmproj FILE)",
                        a.src.display()
                    );
                }
                gguf::GgufSource::new(cfg, &g)
            }
        };
        check_parts(&src, &cfg, a.src)?;
        let mut tables = gguf::tokenizer(&g).with_context(|| a.src.display())?;
        check_tokenizer(tables.as_ref(), &cfg, a.src)?;
        if let Some(t) = tables.as_mut() {
            t.pad_to(cfg.vocab_size as usize);
        }
        write(a, mode, &cfg, &src, tables.as_ref(), t0)
    }
}

/// `--dry-run`'s report: the file the plan would write and the memory it
/// needs at a few context lengths (`kestrel inspect --memory`'s arena).
fn dry_run_report(
    cfg: &Config,
    plan: &fit::Plan,
    other: u64,
    tokenizer: bool,
    max_seq: u32,
) -> Result<()> {
    let file = plan.bytes() + other;
    println!(
        "[fit] the file would take about {file} bytes ({:.2} GiB): {} of matrices, about {other} of the rest{}",
        file as f64 / (1u64 << 30) as f64,
        plan.bytes(),
        if tokenizer { "" } else { " (no tokenizer beside the config: 28 bytes per vocabulary entry set aside for one)" }
    );
    println!(
        "[fit] a decoded token reads {:.1} MB of its matrices",
        plan.read_bytes() / 1e6
    );
    for ctx in crate::engine::report_contexts(max_seq) {
        let arena = crate::engine::arena_bytes(cfg, ctx)?;
        println!(
            "[fit] memory at --ctx {ctx}: {:.2} GiB (the file, mapped, + {:.1} MiB of arena: f16 KV cache, activations, prefill batch 128)",
            (file + arena) as f64 / (1u64 << 30) as f64,
            arena as f64 / (1u64 << 20) as f64
        );
    }
    println!("[fit] --dry-run: nothing written");
    Ok(())
}

fn write(
    a: &Job,
    mode: WeightMode,
    cfg: &Config,
    src: &(dyn NamedSource + Sync),
    tables: Option<&Tables>,
    t0: Instant,
) -> Result<()> {
    let max_seq = a.max_seq.unwrap_or(cfg.max_position.min(32768)).max(1);
    if let Some(m) = a.quant.imatrix {
        if !matches!(
            mode,
            WeightMode::Dual | WeightMode::Q4 | WeightMode::Mix(_) | WeightMode::Small(_)
        ) && a.quant.fit.is_none()
        {
            return Err(
                "--imatrix applies to --fit, --bpw, --tensor-type and the modes that write Q4_0: dual, mix, small, q4".into(),
            );
        }
        m.check(cfg).context("--imatrix")?;
    }
    let (plan, fitted, pool);
    let src: &dyn NamedSource = match a.quant.fit {
        None => src,
        Some(f) => {
            // A config.json alone has no tokenizer beside it: Qwen's takes
            // about 26.4 bytes per vocabulary entry in a file (4.0 MB of
            // 151,936), so 28 are set aside.
            let config_only = tables.is_none() && a.src.extension().is_some_and(|x| x == "json");
            let other = other_bytes(cfg, tables)?
                + if config_only {
                    28 * cfg.vocab_size as u64
                } else {
                    0
                };
            let budget = f
                .budget
                .map(|b| fit::matrix_budget(b, cfg, other))
                .transpose()?;
            if a.verbose {
                eprintln!(
                    "[fit] measuring each matrix's error in each type ({} rows of each)...",
                    fit::SAMPLE_ROWS
                );
            }
            pool = crate::pool::Pool::new(crate::engine::default_threads());
            plan = fit::plan(
                cfg,
                src,
                a.quant.imatrix.map(|m| m as &(dyn Importance + Sync)),
                fit::Limits {
                    file: budget,
                    decode: f.decode_budget,
                },
                &f.pins,
                &f.allowed,
                &pool,
            )
            .with_context(|| a.src.display())?;
            if f.dry_run {
                for line in plan.lines(src) {
                    println!("{line}");
                }
                return dry_run_report(cfg, &plan, other, tables.is_some(), max_seq);
            }
            if a.verbose {
                for line in plan.lines(src) {
                    eprintln!("{line}");
                }
                eprintln!(
                    "[fit] the file: about {:.1} MB ({} bytes of matrices + about {other} of the rest)",
                    (plan.bytes() + other) as f64 / 1e6,
                    plan.bytes()
                );
            }
            fitted = fit::FitSource::new(
                src,
                &plan,
                a.quant.imatrix.map(|m| m as &(dyn Importance + Sync)),
                &pool,
            );
            &fitted
        }
    };
    if matches!(mode, WeightMode::Source | WeightMode::Exact) {
        say_source_plan(cfg, src, mode, a.verbose)?;
    }
    let n = core_convert::entry_count(cfg, mode, Some(src as &dyn TensorSource))?;
    let mut entries = vec![Entry::EMPTY; n];
    let mut scratch = vec![0f32; core_convert::scratch_len(cfg)?];
    let staging = scratch.len() * 4 + (1 << 20);
    let mut out = Output::create(a.out)?;
    let mut progress = Progress {
        tty: std::io::stderr().is_terminal(),
        last: 0,
        start: t0,
        quiet: !a.verbose,
        errors: Vec::new(),
    };
    let source: &dyn TensorSource = src;
    let result = match tables {
        Some(t) => t.with_input(|input| {
            core_convert::write_vqf(
                cfg,
                mode,
                a.quant.quantizer,
                a.quant.importance(),
                max_seq,
                Some(input),
                source,
                &mut entries,
                &mut scratch,
                &mut out,
                &mut |t| progress.update(t),
            )
        }),
        None => core_convert::write_vqf(
            cfg,
            mode,
            a.quant.quantizer,
            a.quant.importance(),
            max_seq,
            None,
            source,
            &mut entries,
            &mut scratch,
            &mut out,
            &mut |t| progress.update(t),
        ),
    };
    let written = result
        .map_err(|e| out.explain(e.into()))
        .with_context(|| format!("converting {}", a.src.display()))?;
    out.patch(CHECKSUM_AT as u64, &written.memsum.to_le_bytes())?;
    let map = out.finish_and_map()?;
    let file_sum = vqf::checksum(&map);
    let h = written.header;
    let say = |line: String| {
        if a.verbose {
            eprintln!("{line}");
        }
    };
    say(format!(
        "[VQF] wrote {}: {} tensors, {:.1} MB, flags=0x{:x} (seq={}) memsum={:016x} file_sum={:016x}",
        a.out.display(),
        h.tensor_count,
        h.file_len as f64 / 1e6,
        h.flags,
        h.max_seq,
        written.memsum,
        file_sum
    ));
    if file_sum != written.memsum {
        return Err(format!(
            "{}: checksum of the written file differs from the bytes written; nothing was kept",
            a.out.display()
        )
        .into());
    }
    let reloaded = Vqf::parse(&map).map_err(|e| {
        format!(
            "{}: self-check failed: {e}; nothing was kept",
            a.out.display()
        )
    })?;
    if reloaded.header() != &h {
        return Err(format!(
            "{}: self-check failed: header differs after reload; nothing was kept",
            a.out.display()
        )
        .into());
    }
    say(size_line(&reloaded, mode));
    drop(map);
    if let Some(fit::Budget::Bytes(b)) = a.quant.fit.and_then(|f| f.budget) {
        if h.file_len > b {
            return Err(format!(
                "{}: the file came to {} bytes, over --fit's {b}; nothing was kept",
                a.out.display(),
                h.file_len
            )
            .into());
        }
    }
    out.commit()?;
    say(format!(
        "[VQF] self-check PASS: reload OK ({} mode). {:.1} s, peak staging {:.1} MB, peak RSS {:.1} MB",
        mode.name(),
        t0.elapsed().as_secs_f64(),
        staging as f64 / 1e6,
        peak_rss().unwrap_or(0) as f64 / 1e6
    ));
    // The recipe and what it cost: each tensor class's stored layouts and
    // relative RMS error against the source values.
    say(format!(
        "[VQF] recipe ({} mode): relative RMS error of the stored values against the source's, per tensor class and layout:",
        mode.name()
    ));
    for (class, layout, q) in &progress.errors {
        say(format!(
            "  {class:<22} {layout:<7} {:.3e}",
            q.relative_rms()
        ));
    }
    Ok(())
}
