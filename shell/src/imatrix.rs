//! `kestrel imatrix`: an importance matrix from a calibration text, and
//! reading one for `kestrel convert --imatrix`.
//!
//! The text is tokenized and cut into chunks of `--ctx` tokens (default
//! 512) as `kestrel perplexity` does; each chunk runs from an empty cache
//! through the model in batches of 128 ([`forward_observed`]), and every
//! decoder matrix's input rows are summed: per input column, the sum of the
//! squared activations, and the number of rows (per expert for MoE expert
//! stacks). Sums are f64 in row order, so the file is the same on every
//! architecture (the forward is bit-reproducible). The lm_head's input (the
//! final norm's output) is summed too, under its weight's name
//! (`output.weight`, or `token_embd.weight` when tied); the lm_head itself
//! is not run.
//!
//! The file is GGUF in llama.cpp's imatrix layout, so either engine's
//! matrix works with either quantizer: `general.type = "imatrix"`,
//! `imatrix.datasets`, `imatrix.chunk_count`, `imatrix.chunk_size`, and per
//! weight tensor (`blk.N.attn_q.weight`, ...) two f32 tensors:
//! `NAME.in_sum2` (columns x matrices) and `NAME.counts` (1 x matrices).
//! A column's importance is `in_sum2 / counts`: the mean square of what it
//! multiplies.

use crate::cli::{get, model_arg, opt, value, CommandArgs};
use crate::engine::{self, EngineArgs, Need};
use crate::error::{Context, Error, Result};
use crate::gguf_names::{gguf_name, gguf_name_in};
use clap::{value_parser, ArgMatches, Command};
use kestrel_core::config::Config;
use kestrel_core::convert::{Importance, Part};
use kestrel_core::gguf::{GgmlType, Gguf};
use kestrel_core::model::forward::{forward_observed, Input, Observer};
use kestrel_core::vqf::write::Sink;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Prompt tokens per forward step.
const BATCH: usize = 128;
/// GGUF data alignment (the default).
const ALIGN: usize = 32;

pub struct ImatrixArgs {
    pub model: PathBuf,
    pub file: PathBuf,
    pub out: PathBuf,
    pub chunks: Option<usize>,
    pub engine: EngineArgs,
}

impl CommandArgs for ImatrixArgs {
    fn command() -> Command {
        Command::new("imatrix")
            .about("An importance matrix from a calibration text (llama.cpp's imatrix GGUF layout), for convert --imatrix.")
            .args([
                model_arg(),
                value("file", "TEXT", "The calibration text.")
                    .short('f')
                    .required(true)
                    .value_parser(value_parser!(PathBuf)),
                value("out", "PATH", "The imatrix file to write (GGUF).")
                    .short('o')
                    .required(true)
                    .value_parser(value_parser!(PathBuf)),
                value("chunks", "N", "Use at most N chunks of --ctx tokens (default 512).")
                    .value_parser(value_parser!(usize)),
            ])
            .args(EngineArgs::args())
    }

    fn from_matches(m: &ArgMatches) -> Self {
        ImatrixArgs {
            model: get(m, "model"),
            file: get(m, "file"),
            out: get(m, "out"),
            chunks: opt(m, "chunks"),
            engine: EngineArgs::from_matches(m),
        }
    }
}

/// The statistics of one input: per matrix (1, or one per expert), the sum
/// of squares of each column and the number of rows.
struct Sums {
    width: usize,
    /// (matrices, width)
    sum2: Vec<f64>,
    /// (matrices)
    rows: Vec<u64>,
}

/// The [`Observer`] that sums every input's squares.
struct Collector {
    /// Keyed by (layer, input; expert inputs under expert 0's key).
    sums: BTreeMap<(usize, InputKey), Sums>,
}

/// An [`Input`] without its expert index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum InputKey {
    Qkv,
    O,
    GateUp,
    Down,
    ExpertGateUp,
    ExpertDown,
    SharedGateUp,
    SharedDown,
    LinIn,
    LinOut,
    Output,
}

impl InputKey {
    /// The key and matrix index of `input`.
    fn of(input: Input) -> (InputKey, usize) {
        match input {
            Input::Qkv => (InputKey::Qkv, 0),
            Input::O => (InputKey::O, 0),
            Input::GateUp => (InputKey::GateUp, 0),
            Input::Down => (InputKey::Down, 0),
            Input::ExpertGateUp(e) => (InputKey::ExpertGateUp, e),
            Input::ExpertDown(e) => (InputKey::ExpertDown, e),
            Input::SharedGateUp => (InputKey::SharedGateUp, 0),
            Input::SharedDown => (InputKey::SharedDown, 0),
            Input::LinIn => (InputKey::LinIn, 0),
            Input::LinOut => (InputKey::LinOut, 0),
            Input::Output => (InputKey::Output, 0),
        }
    }

    /// The weight tensors that read this input.
    fn parts(self) -> &'static [Part] {
        match self {
            InputKey::Qkv => &[Part::Q, Part::K, Part::V],
            InputKey::O => &[Part::O],
            InputKey::GateUp => &[Part::Gate, Part::Up],
            InputKey::Down => &[Part::Down],
            InputKey::ExpertGateUp => &[Part::ExpGate, Part::ExpUp],
            InputKey::ExpertDown => &[Part::ExpDown],
            InputKey::SharedGateUp => &[Part::ShGate, Part::ShUp],
            InputKey::SharedDown => &[Part::ShDown],
            InputKey::LinIn => &[Part::LinQkv, Part::LinZ],
            InputKey::LinOut => &[Part::LinOut],
            InputKey::Output => &[Part::LmHead],
        }
    }
}

impl Observer for Collector {
    fn observe(&mut self, layer: usize, input: Input, rows: &[f32]) {
        let (key, matrix) = InputKey::of(input);
        let Some(s) = self.sums.get_mut(&(layer, key)) else {
            return;
        };
        let width = s.width;
        let at = matrix * width;
        let Some(sum) = s.sum2.get_mut(at..at + width) else {
            return;
        };
        for row in rows.chunks_exact(width) {
            for (acc, &x) in sum.iter_mut().zip(row) {
                let x = x as f64;
                *acc += x * x;
            }
            s.rows[matrix] += 1;
        }
    }

    fn observes_output(&self) -> bool {
        true
    }
}

impl Collector {
    /// Empty sums for every matrix input of `cfg`.
    fn new(cfg: &Config) -> Collector {
        let h = cfg.hidden_size as usize;
        let experts = cfg.moe.map_or(1, |m| m.num_experts as usize);
        let mut sums = BTreeMap::new();
        let mut add = |l: usize, key: InputKey, width: usize, matrices: usize| {
            let s = Sums {
                width,
                sum2: vec![0.0; width * matrices],
                rows: vec![0; matrices],
            };
            sums.insert((l, key), s);
        };
        let value_len = cfg.linear.map_or(0, |c| c.shape().value_len());
        for l in 0..cfg.num_layers as usize {
            if cfg.is_linear_layer(l) {
                add(l, InputKey::LinIn, h, 1);
                add(l, InputKey::LinOut, value_len, 1);
            } else {
                add(l, InputKey::Qkv, h, 1);
                add(l, InputKey::O, cfg.q_dim(), 1);
            }
            match cfg.moe.filter(|_| cfg.is_moe_layer(l)) {
                Some(m) => {
                    add(l, InputKey::ExpertGateUp, h, experts);
                    add(l, InputKey::ExpertDown, m.moe_ffn_size as usize, experts);
                    if m.shared_ffn_size > 0 {
                        add(l, InputKey::SharedGateUp, h, 1);
                        add(l, InputKey::SharedDown, m.shared_ffn_size as usize, 1);
                    }
                }
                None => {
                    add(l, InputKey::GateUp, h, 1);
                    add(l, InputKey::Down, cfg.ffn_size as usize, 1);
                }
            }
        }
        add(cfg.num_layers as usize, InputKey::Output, h, 1);
        Collector { sums }
    }
}

/// One tensor of the file being written.
struct Tensor {
    name: String,
    dims: [u64; 2],
    data: Vec<f32>,
}

/// Writes `key` as a GGUF string.
fn put_str(o: &mut Vec<u8>, s: &str) {
    o.extend((s.len() as u64).to_le_bytes());
    o.extend(s.as_bytes());
}

/// The file's bytes: GGUF v3 with the imatrix keys and `tensors`.
fn encode(dataset: &str, chunks: u32, chunk_size: u32, tensors: &[Tensor]) -> Vec<u8> {
    const U32: u32 = 4;
    const STRING: u32 = 8;
    const ARRAY: u32 = 9;
    let mut o = Vec::new();
    o.extend(b"GGUF");
    o.extend(3u32.to_le_bytes());
    o.extend((tensors.len() as u64).to_le_bytes());
    o.extend(4u64.to_le_bytes());
    put_str(&mut o, "general.type");
    o.extend(STRING.to_le_bytes());
    put_str(&mut o, "imatrix");
    put_str(&mut o, "imatrix.datasets");
    o.extend(ARRAY.to_le_bytes());
    o.extend(STRING.to_le_bytes());
    o.extend(1u64.to_le_bytes());
    put_str(&mut o, dataset);
    for (key, v) in [
        ("imatrix.chunk_count", chunks),
        ("imatrix.chunk_size", chunk_size),
    ] {
        put_str(&mut o, key);
        o.extend(U32.to_le_bytes());
        o.extend(v.to_le_bytes());
    }
    let mut offset = 0u64;
    for t in tensors {
        put_str(&mut o, &t.name);
        o.extend(2u32.to_le_bytes());
        o.extend(t.dims[0].to_le_bytes());
        o.extend(t.dims[1].to_le_bytes());
        o.extend(0u32.to_le_bytes()); // F32
        o.extend(offset.to_le_bytes());
        offset += (t.data.len() * 4).next_multiple_of(ALIGN) as u64;
    }
    // Each tensor's data starts aligned and is padded to the alignment
    // (ggml reads the padded sizes, the last tensor's included).
    for t in tensors {
        o.resize(o.len().next_multiple_of(ALIGN), 0);
        o.extend(t.data.iter().flat_map(|x| x.to_le_bytes()));
    }
    o.resize(o.len().next_multiple_of(ALIGN), 0);
    o
}

/// The file's tensors: per weight tensor that reads an input, its sums and
/// row counts, named as llama.cpp names them.
fn tensors(c: &Collector, cfg: &Config) -> Vec<Tensor> {
    let mut out = Vec::new();
    for (&(layer, key), s) in &c.sums {
        let matrices = s.rows.len();
        for &part in key.parts() {
            let name = gguf_name_in(cfg, part, layer as u16);
            out.push(Tensor {
                name: format!("{name}.in_sum2"),
                dims: [s.width as u64, matrices as u64],
                data: s.sum2.iter().map(|&x| x as f32).collect(),
            });
            out.push(Tensor {
                name: format!("{name}.counts"),
                dims: [1, matrices as u64],
                data: s.rows.iter().map(|&n| n as f32).collect(),
            });
        }
    }
    out
}

/// Runs the calibration; returns the file's bytes and the tokens read.
pub fn compute(a: &ImatrixArgs) -> Result<(Vec<u8>, usize)> {
    let text = std::fs::read_to_string(&a.file).with_context(|| a.file.display())?;
    let ctx = a.engine.ctx.unwrap_or(512);
    let engine_args = EngineArgs {
        ctx: Some(ctx),
        ..a.engine.clone()
    };
    let need = Need::one(BATCH.clamp(1, ctx));
    engine::open(&a.model, &engine_args, need, None, |mut e| {
        let w = e.weights;
        let file_max = w.vqf.header().max_seq as usize;
        if ctx < 1 || ctx > file_max {
            return Err(Error::msg(format!(
                "--ctx {ctx}: a chunk needs 1 to {file_max} tokens (the file's max_seq)"
            )));
        }
        let tokens = crate::perplexity::tokenize(w, &text)?;
        let mut chunks = tokens.len() / ctx;
        if let Some(n) = a.chunks {
            chunks = chunks.min(n);
        }
        if chunks == 0 {
            return Err(Error::msg(format!(
                "{}: {} tokens, fewer than one chunk of {ctx}",
                a.file.display(),
                tokens.len()
            )));
        }
        let (k, pool, opts) = (e.kernels, e.pool(), e.opts);
        let mut s = e.state()?;
        let mut collector = Collector::new(&w.cfg);
        let t = Instant::now();
        for c in 0..chunks {
            s.pos = 0;
            s.rope_delta[0] = 0;
            for batch in tokens[c * ctx..(c + 1) * ctx].chunks(opts.max_batch) {
                forward_observed(w, &mut s, &k, pool, batch, &mut collector)?;
            }
            eprintln!(
                "[kestrel] imatrix: chunk {}/{chunks} ({:.1} s, {:.0} tok/s)",
                c + 1,
                t.elapsed().as_secs_f64(),
                ((c + 1) * ctx) as f64 / t.elapsed().as_secs_f64().max(1e-9)
            );
        }
        let dataset = a
            .file
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let bytes = encode(
            &dataset,
            chunks as u32,
            ctx as u32,
            &tensors(&collector, &w.cfg),
        );
        Ok((bytes, chunks * ctx))
    })
}

pub fn run(a: &ImatrixArgs) -> Result<()> {
    let (bytes, read) = compute(a)?;
    let mut out = crate::files::Output::create(&a.out)?;
    if let Err(e) = Sink::write(&mut out, &bytes) {
        return Err(out.explain(e.into()));
    }
    out.commit()?;
    eprintln!(
        "[kestrel] imatrix: {} tokens of {} -> {} ({} bytes)",
        read,
        a.file.display(),
        a.out.display(),
        bytes.len()
    );
    Ok(())
}

/// An importance matrix read from a file (ours or llama-imatrix's): each
/// weight tensor's column importance, per matrix (expert).
#[derive(Debug, Default)]
pub struct ImportanceMatrix {
    /// By tensor name: per matrix, `in_sum2 / counts`, or `None` where the
    /// count is zero (a matrix no calibration row reached).
    columns: BTreeMap<String, Vec<Option<Vec<f32>>>>,
}

impl ImportanceMatrix {
    /// Reads `path`: a GGUF file in llama.cpp's imatrix layout. Every
    /// `NAME.in_sum2` needs its `NAME.counts`, both F32, shaped (columns,
    /// matrices) and (1, matrices), with finite values >= 0.
    pub fn open(path: &Path) -> Result<ImportanceMatrix> {
        let bytes = std::fs::read(path).with_context(|| path.display())?;
        Self::parse(&bytes).with_context(|| path.display())
    }

    /// [`ImportanceMatrix::open`] on bytes.
    pub fn parse(bytes: &[u8]) -> Result<ImportanceMatrix> {
        let g = Gguf::parse(bytes)?;
        let mut columns = BTreeMap::new();
        for t in g.tensors() {
            let Some(name) = t.name().strip_suffix(".in_sum2") else {
                continue;
            };
            let bad = |what: &str| Error::msg(format!("imatrix tensor {}: {what}", t.name()));
            let counts_name = format!("{name}.counts");
            let counts = g
                .tensor(&counts_name)
                .ok_or_else(|| bad(&format!("no {counts_name}")))?;
            let dims = t.dims();
            if t.ggml_type() != GgmlType::F32 || counts.ggml_type() != GgmlType::F32 {
                return Err(bad("not F32 (it or its counts)"));
            }
            let (width, matrices) = match dims {
                [w] => (*w, 1),
                [w, m] => (*w, *m),
                _ => return Err(bad("not 1 or 2 dimensions")),
            };
            if counts.n_elements() != matrices || width == 0 {
                return Err(bad(&format!(
                    "{width} x {matrices} sums against {} counts",
                    counts.n_elements()
                )));
            }
            let f32s = |b: &[u8]| -> Vec<f32> {
                b.chunks_exact(4)
                    .map(|q| f32::from_le_bytes([q[0], q[1], q[2], q[3]]))
                    .collect()
            };
            let sums = f32s(t.data());
            let n = f32s(counts.data());
            let ok = |x: &f32| x.is_finite() && *x >= 0.0;
            if !sums.iter().all(ok) || !n.iter().all(ok) {
                return Err(bad("a value that is negative or not finite"));
            }
            let width = width as usize;
            let per: Vec<Option<Vec<f32>>> = sums
                .chunks_exact(width)
                .zip(&n)
                .map(|(s, &c)| (c > 0.0).then(|| s.iter().map(|&x| x / c).collect()))
                .collect();
            let finite = |m: &Vec<f32>| m.iter().all(|x| x.is_finite());
            if !per.iter().flatten().all(finite) {
                return Err(bad("a mean square (sum / count) that is not finite"));
            }
            columns.insert(name.to_string(), per);
        }
        if columns.is_empty() {
            return Err(Error::msg("no imatrix tensors (NAME.in_sum2)"));
        }
        Ok(ImportanceMatrix { columns })
    }

    /// Checks that every tensor it holds for `cfg`'s Q4_0-quantized
    /// matrices has their input width and matrix count, and that it holds
    /// at least one.
    pub fn check(&self, cfg: &Config) -> Result<()> {
        let h = cfg.hidden_size as usize;
        let experts = cfg.moe.map_or(1, |m| m.num_experts as usize);
        let moe_ffn = cfg.moe.map_or(0, |m| m.moe_ffn_size as usize);
        let shared_ffn = cfg.moe.map_or(0, |m| m.shared_ffn_size as usize);
        let value_len = cfg.linear.map_or(0, |c| c.shape().value_len());
        let mut found = 0;
        let mut expect = |part: Part, layer: u16, width: usize, matrices: usize| {
            let name = gguf_name_in(cfg, part, layer);
            let Some(per) = self.columns.get(&name) else {
                return Ok(());
            };
            let w = per.iter().flatten().map(Vec::len).next().unwrap_or(width);
            if per.len() != matrices || w != width {
                return Err(Error::msg(format!(
                    "imatrix tensor {name}: {w} columns x {} matrices, the model's has {width} x {matrices}",
                    per.len()
                )));
            }
            found += 1;
            Ok(())
        };
        expect(Part::LmHead, 0, h, 1)?;
        for l in 0..cfg.num_layers as u16 {
            for p in [Part::Q, Part::K, Part::V, Part::Gate, Part::Up] {
                expect(p, l, h, 1)?;
            }
            expect(Part::O, l, cfg.q_dim(), 1)?;
            expect(Part::Down, l, cfg.ffn_size as usize, 1)?;
            for p in [Part::ExpGate, Part::ExpUp] {
                expect(p, l, h, experts)?;
            }
            expect(Part::ExpDown, l, moe_ffn, experts)?;
            for p in [Part::ShGate, Part::ShUp, Part::LinQkv, Part::LinZ] {
                expect(p, l, h, 1)?;
            }
            expect(Part::ShDown, l, shared_ffn, 1)?;
            expect(Part::LinOut, l, value_len, 1)?;
        }
        if found == 0 {
            return Err(Error::msg(
                "the imatrix holds no matrix of this model (names or shapes differ)",
            ));
        }
        Ok(())
    }
}

impl Importance for ImportanceMatrix {
    fn columns(&self, part: Part, layer: u16, expert: usize) -> Option<&[f32]> {
        // The lm_head's input is recorded under the tensor that multiplies
        // it: `output.weight`, or the embedding when they are tied.
        let per = self
            .columns
            .get(&gguf_name(part, layer, false))
            .or_else(|| (part == Part::LmHead).then(|| self.columns.get("token_embd.weight"))?)?;
        let index = if per.len() == 1 { 0 } else { expert };
        per.get(index)?.as_deref()
    }
}
