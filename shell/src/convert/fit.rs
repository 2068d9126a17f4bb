//! `kestrel convert --fit SIZE` / `--bpw B`: a block type for every matrix
//! (the token embedding, each layer's q, k, v, o, gate+up and down, a MoE
//! layer's experts as one, the output head), chosen to minimise the
//! measured error within a byte budget, then written as an `exact` file
//! of those blocks (each matrix quantized by Kestrel's quantizers:
//! `kestrel_core::quant::kquant` for the k-quants and IQ4_XS, the Q4_0
//! search, Q8_0).
//!
//! The error of a matrix in a type is measured on a sample of its rows:
//! `sum w * (x - y)^2 / sum w * x^2`, `w` the column's importance (with
//! `--imatrix`; 1 otherwise), the relative noise the matrix adds to what it
//! computes. The plan minimises the sum of those errors, each times its
//! class's weight ([`class_weight`]), under the budget: a Lagrangian search
//! over the price of a byte (each matrix takes the type that minimises
//! error + price * bytes), then the bytes left buy the best remaining
//! upgrades.

use super::NamedSource;
use crate::error::Result;
use crate::pool::Pool;
use kestrel_core::config::Config;
use kestrel_core::convert::{Importance, Part, TensorSource};
use kestrel_core::gguf::{dequantize_row, GgmlType};
use kestrel_core::parallel::Parallel;
use kestrel_core::quant::{kquant, q4_0, q8_0, Quantizer};
use kestrel_core::Error;
use std::sync::Mutex;

/// Rows of each matrix whose error is measured (evenly spaced; across the
/// experts of a MoE layer).
pub const SAMPLE_ROWS: usize = 96;

/// What `--fit` or `--bpw` asks for.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// The whole file, in bytes.
    Bytes(u64),
    /// Bits per weight of the planned matrices (embedding and output head
    /// included); the rest of the file comes on top.
    BitsPerWeight(f32),
}

/// A class of matrices, as `--tensor-type` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    TokenEmbd,
    Output,
    AttnQ,
    AttnK,
    AttnV,
    AttnOutput,
    FfnGateUp,
    FfnDown,
    /// Qwen3.5's Gated DeltaNet layers: q|k|v, z, the output projection.
    SsmQkv,
    SsmGate,
    SsmOut,
}

impl Class {
    pub const ALL: [Class; 11] = [
        Class::TokenEmbd,
        Class::Output,
        Class::AttnQ,
        Class::AttnK,
        Class::AttnV,
        Class::AttnOutput,
        Class::FfnGateUp,
        Class::FfnDown,
        Class::SsmQkv,
        Class::SsmGate,
        Class::SsmOut,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::TokenEmbd => "token_embd",
            Class::Output => "output",
            Class::AttnQ => "attn_q",
            Class::AttnK => "attn_k",
            Class::AttnV => "attn_v",
            Class::AttnOutput => "attn_output",
            Class::FfnGateUp => "ffn_gate_up",
            Class::FfnDown => "ffn_down",
            Class::SsmQkv => "attn_qkv",
            Class::SsmGate => "attn_gate",
            Class::SsmOut => "ssm_out",
        }
    }

    fn of(part: Part) -> Option<Class> {
        Some(match part {
            Part::Embed => Class::TokenEmbd,
            Part::LmHead => Class::Output,
            Part::Q => Class::AttnQ,
            Part::K => Class::AttnK,
            Part::V => Class::AttnV,
            Part::O => Class::AttnOutput,
            Part::Gate | Part::Up | Part::ExpGate | Part::ExpUp | Part::ShGate | Part::ShUp => {
                Class::FfnGateUp
            }
            Part::Down | Part::ExpDown | Part::ShDown => Class::FfnDown,
            Part::LinQkv => Class::SsmQkv,
            Part::LinZ => Class::SsmGate,
            Part::LinOut => Class::SsmOut,
            _ => return None,
        })
    }
}

/// How much a class's relative error counts in the plan's objective: the
/// KL against the exact f32 computation per unit of the summed relative
/// error of the class's matrices, measured by `bench/fit-sensitivity.sh`
/// on Qwen2.5-Coder-1.5B (each class alone in q2_k, the rest in q8_0; the
/// mean of its prose and code figures, on the Apache-2.0 text and
/// argparse.py, which the quality tables do not score; docs/benchmarks.md,
/// "`--fit`"). A MoE layer's experts take
/// their dense counterparts' weights, a shared expert too. Qwen3.5's Gated
/// DeltaNet classes are not measured (no Qwen3.5 weights are reachable
/// here): q|k|v takes the mean of attention's Q, K and V, z attention Q's,
/// the output projection attention's.
fn class_weight(c: Class) -> f64 {
    match c {
        Class::TokenEmbd => 0.0859,
        Class::Output => 1.0538,
        Class::AttnQ => 0.00915,
        Class::AttnK => 0.01125,
        Class::AttnV => 0.03855,
        Class::AttnOutput => 0.05035,
        Class::FfnGateUp => 0.18985,
        Class::FfnDown => 0.13155,
        Class::SsmQkv => (0.00915 + 0.01125 + 0.03855) / 3.0,
        Class::SsmGate => 0.00915,
        Class::SsmOut => 0.05035,
    }
}

/// The types `--tensor-type` and the plan choose from.
const NAMED_TYPES: [GgmlType; 8] = [
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::IQ4_XS,
    GgmlType::Q4_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_0,
];

fn type_name(t: GgmlType) -> String {
    t.name().to_ascii_lowercase()
}

/// A type's name on the command line.
fn parse_type(flag: &str, t: &str) -> std::result::Result<GgmlType, String> {
    NAMED_TYPES
        .into_iter()
        .find(|&k| type_name(k) == t.trim().to_ascii_lowercase())
        .ok_or_else(|| {
            let names: Vec<_> = NAMED_TYPES.iter().map(|&k| type_name(k)).collect();
            format!(
                "{flag}: unknown type {} (one of {})",
                crate::error::quoted(t),
                names.join(", ")
            )
        })
}

/// Parses `--fit-types TYPE[,TYPE...]`: the types the plan may choose.
pub fn parse_types(list: &str) -> std::result::Result<Vec<GgmlType>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|t| parse_type("--fit-types", t))
        .collect()
}

/// Parses `--tensor-type CLASS=TYPE[,CLASS=TYPE...]`.
pub fn parse_pins(list: &str) -> std::result::Result<Vec<(Class, GgmlType)>, String> {
    let mut v = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (c, t) = item.split_once('=').ok_or_else(|| {
            format!(
                "--tensor-type: {} is not CLASS=TYPE",
                crate::error::quoted(item)
            )
        })?;
        let class = Class::ALL
            .into_iter()
            .find(|k| k.name() == c.trim())
            .ok_or_else(|| {
                let names: Vec<_> = Class::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "--tensor-type: unknown class {} (one of {})",
                    crate::error::quoted(c),
                    names.join(", ")
                )
            })?;
        let ty = parse_type("--tensor-type", t)?;
        v.push((class, ty));
    }
    Ok(v)
}

/// The types a matrix of `cols` columns can take, fewest bytes first.
fn candidates(cols: usize) -> &'static [GgmlType] {
    if cols.is_multiple_of(256) {
        &[
            GgmlType::Q2_K,
            GgmlType::Q3_K,
            GgmlType::IQ4_XS,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
        ]
    } else {
        &[GgmlType::Q4_0, GgmlType::Q8_0]
    }
}

/// One planned matrix: parts that share a type (gate and up, which the
/// file fuses), of one layer, each `experts` x `rows` x `cols`.
#[derive(Clone, Debug)]
pub struct Unit {
    parts: Vec<Part>,
    layer: u16,
    experts: usize,
    rows: usize,
    cols: usize,
    class: Class,
    /// (type, bytes, relative error) per candidate, fewest bytes first.
    choices: Vec<(GgmlType, u64, f64)>,
    pinned: Option<GgmlType>,
    /// The fraction of its bytes a decoded token reads: one row of the
    /// embedding (all of it when it is the head too), the routed experts'
    /// share of a MoE layer's, all of any other matrix.
    read: f64,
    /// The weight of its relative error ([`class_weight`]; a tied
    /// embedding, also the output head, takes both classes' weights).
    weight: f64,
}

impl Unit {
    fn weights(&self) -> u64 {
        (self.parts.len() * self.experts * self.rows * self.cols) as u64
    }

    fn bytes(&self, ty: GgmlType) -> u64 {
        let per_row = self.cols / ty.block_size() * ty.type_size();
        (self.parts.len() * self.experts * self.rows * per_row) as u64
    }

    /// The bytes of choice `c` a decoded token reads.
    fn read_bytes(&self, c: usize) -> f64 {
        self.choices[c].1 as f64 * self.read
    }

    /// The layer key: the embedding and the head have none.
    fn key(part: Part, layer: u16) -> (u8, u16) {
        let layer = match part {
            Part::Embed | Part::LmHead => u16::MAX,
            _ => layer,
        };
        (part_code(part), layer)
    }
}

fn part_code(p: Part) -> u8 {
    match p {
        Part::Embed => 0,
        Part::LmHead => 1,
        Part::Q => 2,
        Part::K => 3,
        Part::V => 4,
        Part::O => 5,
        Part::Gate => 6,
        Part::Up => 7,
        Part::Down => 8,
        Part::ExpGate => 9,
        Part::ExpUp => 10,
        Part::ExpDown => 11,
        Part::ShGate => 12,
        Part::ShUp => 13,
        Part::ShDown => 14,
        Part::LinQkv => 15,
        Part::LinZ => 16,
        Part::LinOut => 17,
        _ => 255,
    }
}

/// The matrices a config plans, without their errors yet.
fn units(cfg: &Config) -> Vec<Unit> {
    let (h, vocab) = (cfg.hidden_size as usize, cfg.vocab_size as usize);
    let (q, kv, ffn) = (cfg.q_dim(), cfg.kv_dim(), cfg.ffn_size as usize);
    let mut v = Vec::new();
    let mut add = |parts: &[Part], layer: u16, experts: usize, rows: usize, cols: usize, read| {
        v.push(Unit {
            parts: parts.to_vec(),
            layer,
            experts,
            rows,
            cols,
            class: Class::of(parts[0]).unwrap_or(Class::FfnDown),
            choices: Vec::new(),
            pinned: None,
            read,
            // A tied embedding is the output head too: its error weighs
            // as both.
            weight: class_weight(Class::of(parts[0]).unwrap_or(Class::FfnDown))
                + if parts[0] == Part::Embed && cfg.tied_embeddings {
                    class_weight(Class::Output)
                } else {
                    0.0
                },
        })
    };
    if cfg.tied_embeddings {
        add(&[Part::Embed], 0, 1, vocab, h, 1.0);
    } else {
        add(&[Part::Embed], 0, 1, vocab, h, 1.0 / vocab.max(1) as f64);
        add(&[Part::LmHead], 0, 1, vocab, h, 1.0);
    }
    // Gated attention's source Q rows hold each head's query and gate.
    let q_rows = if cfg.attn_gate() { 2 * q } else { q };
    let lin = cfg.linear.map(|c| c.shape());
    for l in 0..cfg.num_layers as u16 {
        match lin.filter(|_| cfg.is_linear_layer(l as usize)) {
            Some(d) => {
                add(&[Part::LinQkv], l, 1, d.conv_channels(), h, 1.0);
                add(&[Part::LinZ], l, 1, d.value_len(), h, 1.0);
                add(&[Part::LinOut], l, 1, h, d.value_len(), 1.0);
            }
            None => {
                add(&[Part::Q], l, 1, q_rows, h, 1.0);
                add(&[Part::K], l, 1, kv, h, 1.0);
                add(&[Part::V], l, 1, kv, h, 1.0);
                add(&[Part::O], l, 1, h, q, 1.0);
            }
        }
        match &cfg.moe {
            Some(m) if cfg.is_moe_layer(l as usize) => {
                let (n, f) = (m.num_experts as usize, m.moe_ffn_size as usize);
                let routed = (m.experts_per_token as f64 / n.max(1) as f64).min(1.0);
                add(&[Part::ExpGate, Part::ExpUp], l, n, f, h, routed);
                add(&[Part::ExpDown], l, n, h, f, routed);
                let shared = m.shared_ffn_size as usize;
                if shared > 0 {
                    add(&[Part::ShGate, Part::ShUp], l, 1, shared, h, 1.0);
                    add(&[Part::ShDown], l, 1, h, shared, 1.0);
                }
            }
            _ => {
                add(&[Part::Gate, Part::Up], l, 1, ffn, h, 1.0);
                add(&[Part::Down], l, 1, h, ffn, 1.0);
            }
        }
    }
    v
}

/// Quantizes one row of `ty` into `out` (`importance`: the row's column
/// importances).
fn quantize_row(ty: GgmlType, x: &[f32], importance: Option<&[f32]>, out: &mut [u8]) -> Result<()> {
    match ty {
        GgmlType::Q8_0 => q8_0::quantize_row_bytes(x, out)?,
        GgmlType::Q4_0 => q4_0::quantize_row_bytes_with(Quantizer::Search, x, importance, out)?,
        _ => kquant::quantize_row(ty, x, importance, out)?,
    }
    Ok(())
}

/// The relative error of each candidate type of `u`, on its sample rows.
fn measure(
    u: &mut Unit,
    src: &dyn NamedSource,
    imp: Option<&dyn Importance>,
    allowed: &[GgmlType],
) -> Result<()> {
    let total = u.parts.len() * u.experts * u.rows;
    let n = SAMPLE_ROWS.min(total);
    let mut x = vec![0f32; u.cols];
    let mut y = vec![0f32; u.cols];
    let mut bytes = vec![0u8; u.cols / 32 * 34];
    let tys: Vec<GgmlType> = candidates(u.cols)
        .iter()
        .copied()
        .filter(|t| allowed.is_empty() || allowed.contains(t) || u.pinned == Some(*t))
        .collect();
    if tys.is_empty() {
        return Err(format!(
            "--fit-types: none of the types allowed holds rows of {} columns (q4_0 or q8_0 do)",
            u.cols
        )
        .into());
    }
    let mut err = vec![0f64; tys.len()];
    let mut reference = 0f64;
    for i in 0..n {
        // Evenly spaced over parts, experts and rows.
        let k = i * total / n + (total / n) / 2;
        let part = u.parts[k / (u.experts * u.rows)];
        let expert = (k / u.rows) % u.experts;
        let row = k % u.rows;
        src.read_rows(part, u.layer, expert, row, &mut x)?;
        let w = imp.and_then(|m| m.columns(part, u.layer, expert));
        let wt = |j: usize| w.map_or(1.0, |w| w[j] as f64);
        for (j, &v) in x.iter().enumerate() {
            reference += wt(j) * (v as f64) * (v as f64);
        }
        for (t, &ty) in tys.iter().enumerate() {
            let b = &mut bytes[..u.cols / ty.block_size() * ty.type_size()];
            quantize_row(ty, &x, w, b)?;
            dequantize_row(ty, b, &mut y)?;
            for j in 0..u.cols {
                let d = (x[j] - y[j]) as f64;
                err[t] += wt(j) * d * d;
            }
        }
    }
    u.choices = tys
        .iter()
        .zip(&err)
        .map(|(&ty, &e)| {
            (
                ty,
                u.bytes(ty),
                if reference > 0.0 { e / reference } else { 0.0 },
            )
        })
        .collect();
    Ok(())
}

/// The chosen type of every planned matrix.
pub struct Plan {
    pub units: Vec<Unit>,
    chosen: Vec<usize>,
}

impl Plan {
    fn cost(&self) -> f64 {
        self.units
            .iter()
            .zip(&self.chosen)
            .map(|(u, &c)| u.weight * u.choices[c].2)
            .sum()
    }

    pub fn bytes(&self) -> u64 {
        self.units
            .iter()
            .zip(&self.chosen)
            .map(|(u, &c)| u.choices[c].1)
            .sum()
    }

    fn weights(&self) -> u64 {
        self.units.iter().map(Unit::weights).sum()
    }

    /// The bytes of the planned matrices a decoded token reads.
    pub fn read_bytes(&self) -> f64 {
        self.units
            .iter()
            .zip(&self.chosen)
            .map(|(u, &c)| u.read_bytes(c))
            .sum()
    }

    /// The type of `part` of `layer`, if planned.
    pub fn type_of(&self, part: Part, layer: u16) -> Option<GgmlType> {
        let key = Unit::key(part, layer);
        self.units
            .iter()
            .zip(&self.chosen)
            .find(|(u, _)| u.parts.iter().any(|&p| Unit::key(p, u.layer) == key))
            .map(|(u, &c)| u.choices[c].0)
    }

    /// The plan's table: a line per matrix, then per class.
    pub fn lines(&self, src: &dyn NamedSource) -> Vec<String> {
        let mut v = vec![format!(
            "[fit] {:<32} {:<5} {:>12} {:>10}",
            "tensor", "type", "bytes", "rel. error"
        )];
        for (u, &c) in self.units.iter().zip(&self.chosen) {
            let (ty, b, e) = u.choices[c];
            let mut name = src.tensor_name(u.parts[0], u.layer, 0);
            if u.parts.len() > 1 {
                name.push_str(" (+up)");
            }
            if u.experts > 1 {
                name.push_str(&format!(" x{}", u.experts));
            }
            let pin = if u.pinned.is_some() { " (pinned)" } else { "" };
            v.push(format!(
                "[fit] {name:<32} {:<5} {b:>12} {e:>10.3e}{pin}",
                type_name(ty)
            ));
        }
        // Per class and type, in the order of Class::ALL and of the types.
        for class in Class::ALL {
            for ty in NAMED_TYPES {
                let (mut b, mut n, mut e) = (0u64, 0usize, 0f64);
                for (u, &c) in self.units.iter().zip(&self.chosen) {
                    if u.class == class && u.choices[c].0 == ty {
                        b += u.choices[c].1;
                        n += 1;
                        e += u.choices[c].2;
                    }
                }
                if n > 0 {
                    v.push(format!(
                        "[fit] class {:<12} {:<6} {n:>3} matrices {b:>12} bytes, error sum {e:.4e}",
                        class.name(),
                        type_name(ty),
                    ));
                }
            }
        }
        v.push(format!(
            "[fit] planned matrices: {} bytes, {:.3} bits per weight, {:.0} bytes read per decoded token, weighted error sum {:.4e}",
            self.bytes(),
            self.bytes() as f64 * 8.0 / self.weights() as f64,
            self.read_bytes(),
            self.cost()
        ));
        v
    }
}

/// The bytes the planned matrices may take.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// In the file (`None`: every unpinned matrix in Q8_0).
    pub file: Option<u64>,
    /// Read per decoded token (`--fit-decode`).
    pub decode: Option<u64>,
}

/// Measures every matrix of `cfg` in `src` and chooses its type within
/// `limits`, `pins` fixing classes.
pub fn plan(
    cfg: &Config,
    src: &(dyn NamedSource + Sync),
    imp: Option<&(dyn Importance + Sync)>,
    limits: Limits,
    pins: &[(Class, GgmlType)],
    allowed: &[GgmlType],
    pool: &Pool,
) -> Result<Plan> {
    let mut units = units(cfg);
    for u in &mut units {
        u.pinned = pins.iter().rev().find(|p| p.0 == u.class).map(|p| p.1);
        if let Some(t) = u.pinned {
            if !u.cols.is_multiple_of(t.block_size()) {
                return Err(format!(
                    "--tensor-type {}={}: {} has {} columns, not a multiple of {}",
                    u.class.name(),
                    type_name(t),
                    src.tensor_name(u.parts[0], u.layer, 0),
                    u.cols,
                    t.block_size()
                )
                .into());
            }
        }
    }
    // Measure, split over the pool (each matrix's rows are read and
    // quantized independently).
    let failed: Mutex<Option<String>> = Mutex::new(None);
    pool.for_each_mut(&mut units, &|_, u: &mut Unit| {
        if let Err(e) = measure(u, src, imp.map(|m| m as &dyn Importance), allowed) {
            let name = src.tensor_name(u.parts[0], u.layer, 0);
            *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{name}: {e}"));
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e.into());
    }
    // A pinned matrix keeps one choice.
    for u in &mut units {
        if let Some(t) = u.pinned {
            let e = u
                .choices
                .iter()
                .find(|c| c.0 == t)
                .map_or(f64::NAN, |c| c.2);
            u.choices = vec![(t, u.bytes(t), e)];
        }
    }
    let q8 = |u: &Unit| {
        u.choices
            .iter()
            .position(|c| c.0 == GgmlType::Q8_0)
            .unwrap_or(0)
    };
    let decode_budget = limits.decode;
    let Some(budget) = limits.file else {
        let chosen = units.iter().map(q8).collect();
        return Ok(Plan { units, chosen });
    };
    let least: u64 = units.iter().map(|u| u.choices[0].1).sum();
    if least > budget {
        return Err(format!(
            "--fit: the planned matrices take at least {least} bytes in their smallest types, more than the {budget} bytes left for them"
        )
        .into());
    }
    let least_read: f64 = units.iter().map(|u| u.read_bytes(0)).sum();
    if let Some(d) = decode_budget.filter(|&d| least_read > d as f64) {
        return Err(format!(
            "--fit-decode: a decoded token reads at least {least_read:.0} bytes of the planned matrices in their smallest types, more than {d}"
        )
        .into());
    }
    let chosen = choose(&units, budget, decode_budget);
    Ok(Plan { units, chosen })
}

/// The choice of every unit with the least weighted error within `budget`
/// bytes and, if given, `decode_budget` bytes read per decoded token; the
/// smallest choices must fit both.
///
/// Each unit's choice at prices `lambda` per byte of the file and `mu` per
/// byte read per token is the one of least `error + lambda * bytes + mu *
/// read bytes`; the least `mu` whose plan meets the decode budget (with
/// its least fitting `lambda`) is found by bisection, then the bytes left
/// buy the upgrades that remove the most error per byte.
fn choose(units: &[Unit], budget: u64, decode_budget: Option<u64>) -> Vec<usize> {
    let pick = |u: &Unit, lambda: f64, mu: f64| -> usize {
        let w = u.weight;
        let mut best = (0, f64::MAX);
        for (i, &(_, b, e)) in u.choices.iter().enumerate() {
            let c = w * e + lambda * b as f64 + mu * u.read_bytes(i);
            if c < best.1 {
                best = (i, c);
            }
        }
        best.0
    };
    let file = |lambda: f64, mu: f64| -> u64 {
        units.iter().map(|u| u.choices[pick(u, lambda, mu)].1).sum()
    };
    let read = |lambda: f64, mu: f64| -> f64 {
        units
            .iter()
            .map(|u| u.read_bytes(pick(u, lambda, mu)))
            .sum()
    };
    // The least price of a file byte at read price `mu` whose plan fits:
    // bisection on a log scale.
    let fitting_lambda = |mu: f64| -> f64 {
        let (mut lo, mut hi) = (1e-30f64, 1.0f64);
        while file(hi, mu) > budget {
            hi *= 16.0;
        }
        for _ in 0..100 {
            let mid = (lo * hi).sqrt();
            if file(mid, mu) > budget {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    };
    let (lambda, mu) = match decode_budget {
        Some(d) if read(fitting_lambda(0.0), 0.0) > d as f64 => {
            let (mut lo, mut hi) = (1e-30f64, 1.0f64);
            while read(fitting_lambda(hi), hi) > d as f64 {
                hi *= 16.0;
            }
            for _ in 0..60 {
                let mid = (lo * hi).sqrt();
                if read(fitting_lambda(mid), mid) > d as f64 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            (fitting_lambda(hi), hi)
        }
        _ => (fitting_lambda(0.0), 0.0),
    };
    let mut chosen: Vec<usize> = units.iter().map(|u| pick(u, lambda, mu)).collect();
    // The bytes left buy the upgrades with the most error removed per byte.
    let mut used: u64 = units
        .iter()
        .zip(&chosen)
        .map(|(u, &c)| u.choices[c].1)
        .sum();
    let mut reading: f64 = units
        .iter()
        .zip(&chosen)
        .map(|(u, &c)| u.read_bytes(c))
        .sum();
    let read_limit = decode_budget.map_or(f64::INFINITY, |d| d as f64);
    loop {
        let mut best: Option<(usize, usize, f64)> = None;
        for (i, u) in units.iter().enumerate() {
            let (_, b0, e0) = u.choices[chosen[i]];
            for (j, &(_, b, e)) in u.choices.iter().enumerate().skip(chosen[i] + 1) {
                let more_read = u.read_bytes(j) - u.read_bytes(chosen[i]);
                if b <= b0 || used - b0 + b > budget || reading + more_read > read_limit {
                    continue;
                }
                let gain = u.weight * (e0 - e) / (b - b0) as f64;
                if gain > 0.0 && best.is_none_or(|x| gain > x.2) {
                    best = Some((i, j, gain));
                }
            }
        }
        let Some((i, j, _)) = best else { break };
        used = used - units[i].choices[chosen[i]].1 + units[i].choices[j].1;
        reading += units[i].read_bytes(j) - units[i].read_bytes(chosen[i]);
        chosen[i] = j;
    }
    chosen
}

/// The budget for the planned matrices: `--fit`'s bytes less the rest of
/// the file (`other`: norms, biases, tokenizer, header and alignment), or
/// `--bpw` times their weights.
pub fn matrix_budget(budget: Budget, cfg: &Config, other: u64) -> Result<u64> {
    let weights: u64 = units(cfg).iter().map(Unit::weights).sum();
    Ok(match budget {
        Budget::Bytes(b) => b
            .checked_sub(other)
            .ok_or_else(|| format!("--fit {b}: the file's other parts alone take {other} bytes"))?,
        Budget::BitsPerWeight(bpw) => {
            if !(bpw > 0.0 && bpw <= 32.0) {
                return Err(format!("--bpw {bpw}: between 0 and 32").into());
            }
            (weights as f64 * bpw as f64 / 8.0) as u64
        }
    })
}

/// A source whose planned matrices are stored in their planned types:
/// [`TensorSource::block_type`] names it, and the blocks are the rows of
/// the wrapped source quantized by Kestrel, a whole matrix (every expert)
/// at a time over the cores, kept while it is written (two at once: the
/// file fuses gate and up row by row). Float rows read through it are the
/// wrapped source's, so the converter's error report is against the source
/// values.
pub struct FitSource<'a> {
    inner: &'a (dyn NamedSource + Sync),
    plan: &'a Plan,
    imp: Option<&'a (dyn Importance + Sync)>,
    pool: &'a Pool,
    cache: Mutex<Vec<Quantized>>,
}

/// One matrix's quantized rows: `experts * rows` rows of `row_bytes`.
struct Quantized {
    key: (u8, u16),
    rows: usize,
    row_bytes: usize,
    bytes: Vec<u8>,
}

impl<'a> FitSource<'a> {
    pub fn new(
        inner: &'a (dyn NamedSource + Sync),
        plan: &'a Plan,
        imp: Option<&'a (dyn Importance + Sync)>,
        pool: &'a Pool,
    ) -> Self {
        FitSource {
            inner,
            plan,
            imp,
            pool,
            cache: Mutex::new(Vec::new()),
        }
    }

    /// Quantizes every row of `part` of `layer` (its unit `u`) in `ty`.
    fn quantize(
        &self,
        u: &Unit,
        part: Part,
        layer: u16,
        ty: GgmlType,
    ) -> std::result::Result<Quantized, Error> {
        let row_bytes = u.cols / ty.block_size() * ty.type_size();
        let n = u.experts * u.rows;
        let mut bytes = vec![0u8; n * row_bytes];
        // Runs of rows, more than the threads (rows differ in cost).
        const RUN: usize = 64;
        let mut runs: Vec<(usize, &mut [u8])> =
            bytes.chunks_mut(RUN * row_bytes).enumerate().collect();
        let failed: Mutex<Option<Error>> = Mutex::new(None);
        self.pool.for_each_mut(&mut runs, &|_, (c, run)| {
            let mut x = vec![0f32; u.cols];
            for (i, out) in run.chunks_exact_mut(row_bytes).enumerate() {
                let k = *c * RUN + i;
                let (expert, row) = (k / u.rows, k % u.rows);
                let w = self.imp.and_then(|m| m.columns(part, layer, expert));
                let done = self
                    .inner
                    .read_rows(part, layer, expert, row, &mut x)
                    .and_then(|()| {
                        quantize_row(ty, &x, w, out).map_err(|_| Error::Unsupported {
                            what: "quantizing a row for --fit",
                            value: row as u64,
                        })
                    });
                if let Err(e) = done {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    return;
                }
            }
        });
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        Ok(Quantized {
            key: Unit::key(part, layer),
            rows: u.rows,
            row_bytes,
            bytes,
        })
    }
}

impl TensorSource for FitSource<'_> {
    fn read_rows(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row0: usize,
        out: &mut [f32],
    ) -> std::result::Result<(), Error> {
        self.inner.read_rows(part, layer, expert, row0, out)
    }

    fn block_type(&self, part: Part, layer: u16) -> Option<GgmlType> {
        self.plan.type_of(part, layer)
    }

    fn read_block_bytes(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row: usize,
        byte0: usize,
        out: &mut [u8],
    ) -> std::result::Result<(), Error> {
        let unplanned = Error::Unsupported {
            what: "stored blocks of a matrix --fit did not plan",
            value: 0,
        };
        let key = Unit::key(part, layer);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // The plan is searched once per matrix, not once per block read.
        if !cache.iter().any(|q| q.key == key) {
            let ty = self.plan.type_of(part, layer).ok_or(unplanned)?;
            let u = self
                .plan
                .units
                .iter()
                .find(|u| u.parts.iter().any(|&p| Unit::key(p, u.layer) == key))
                .ok_or(unplanned)?;
            let q = self.quantize(u, part, layer, ty)?;
            if cache.len() >= 2 {
                cache.remove(0);
            }
            cache.push(q);
        }
        let q = cache.iter().find(|q| q.key == key).ok_or(unplanned)?;
        let start = (expert * q.rows + row) * q.row_bytes;
        let src = (start + byte0)
            .checked_add(out.len())
            .filter(|&end| byte0 + out.len() <= q.row_bytes && end <= q.bytes.len())
            .map(|end| &q.bytes[start + byte0..end])
            .ok_or(Error::Truncated {
                what: "quantized row blocks",
                need: (byte0 as u64).saturating_add(out.len() as u64),
                have: q.row_bytes as u64,
            })?;
        out.copy_from_slice(src);
        Ok(())
    }
}

impl NamedSource for FitSource<'_> {
    fn tensor_name(&self, part: Part, layer: u16, expert: usize) -> String {
        self.inner.tensor_name(part, layer, expert)
    }
    fn has(&self, part: Part, layer: u16, expert: usize) -> bool {
        self.inner.has(part, layer, expert)
    }
    fn shape(&self, part: Part, layer: u16, expert: usize) -> Option<Vec<u64>> {
        self.inner.shape(part, layer, expert)
    }
    fn names(&self) -> Vec<String> {
        self.inner.names()
    }
    fn index_of(&self, name: &str) -> Option<(u64, Option<u64>)> {
        self.inner.index_of(name)
    }
}

/// A config's matrices without weights, for a plan from the shapes alone
/// (`--dry-run` of a config.json): every value drawn from N(0, 1), as in a
/// random-weight model, reproducibly (a hash of the matrix, the row and
/// the column), so each type's measured error is its error on Gaussian
/// rows of the matrix's width.
pub struct GaussianSource {
    cfg: Config,
}

impl GaussianSource {
    pub fn new(cfg: Config) -> Self {
        GaussianSource { cfg }
    }
}

/// SplitMix64: a well-mixed 64-bit hash of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl TensorSource for GaussianSource {
    fn read_rows(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row0: usize,
        out: &mut [f32],
    ) -> std::result::Result<(), Error> {
        let h = self.cfg.hidden_size as usize;
        let cols = match part {
            Part::O => self.cfg.q_dim(),
            Part::Down => self.cfg.ffn_size as usize,
            Part::ExpDown => self.cfg.moe.map_or(h, |m| m.moe_ffn_size as usize),
            Part::ShDown => self.cfg.moe.map_or(h, |m| m.shared_ffn_size as usize),
            Part::LinOut => self.cfg.linear.map_or(h, |c| c.shape().value_len()),
            _ => h,
        }
        .max(1);
        let matrix = mix(((part_code(part) as u64) << 48) ^ ((layer as u64) << 32) ^ expert as u64);
        for (i, x) in out.iter_mut().enumerate() {
            let (row, col) = (row0 + i / cols, i % cols);
            let h = mix(matrix ^ mix(((row as u64) << 32) ^ col as u64));
            // Box-Muller: two uniforms in (0, 1] from the hash's halves.
            let u1 = ((h >> 32) as f64 + 1.0) / 4_294_967_296.0;
            let u2 = (h & 0xffff_ffff) as f64 / 4_294_967_296.0;
            *x = (libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * core::f64::consts::PI * u2))
                as f32;
        }
        Ok(())
    }
}

impl NamedSource for GaussianSource {
    fn tensor_name(&self, part: Part, layer: u16, _expert: usize) -> String {
        crate::gguf_names::gguf_name_in(&self.cfg, part, layer)
    }

    fn has(&self, _part: Part, _layer: u16, _expert: usize) -> bool {
        false
    }

    fn shape(&self, _part: Part, _layer: u16, _expert: usize) -> Option<Vec<u64>> {
        None
    }

    fn names(&self) -> Vec<String> {
        Vec::new()
    }

    fn index_of(&self, _name: &str) -> Option<(u64, Option<u64>)> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_parse() {
        let p = parse_pins("output=q6_k, attn_v=Q4_K").unwrap();
        assert_eq!(
            p,
            vec![
                (Class::Output, GgmlType::Q6_K),
                (Class::AttnV, GgmlType::Q4_K)
            ]
        );
        assert!(parse_pins("outptu=q6_k").is_err());
        assert!(parse_pins("output=iq9").is_err());
        assert!(parse_pins("output").is_err());
    }
}
