//! `kestrel bench`: kernel timings on synthetic weights (median of repeats
//! after a warm-up). Benchmarks are not tests: nothing here asserts a speed.
//!
//! Three parts: single-thread per-kernel lines (`--rows` x `--cols`), the
//! mixed-precision table (a Qwen-like layer with dual Q8_0/Q4_0 weights,
//! decode M=1 and prefill M=32, through the threaded `Kernels::matmul` on
//! the pool), and a DRAM wall probe (compact vs 64-byte-strided blocks).
//!
//! With a VQF model, `kestrel bench MODEL -p 512 -n 128 -r 3` times the
//! whole model instead, as llama-bench's pp/tg tests do: prefill of a
//! synthetic prompt, then decode token by token, each repeat from an empty
//! KV cache; then the DRAM probe on the same threads.
//!
//! One file per bench: `kernels` (the per-kernel lines), `mixed` (the mixed
//! table), `dram` (the probe), `moe` (`--moe`), `vision` (`--vision`),
//! `model` (`kestrel bench MODEL`); `synthetic` holds the synthetic data
//! they share with the integration tests.

mod dram;
mod kernels;
mod mixed;
mod model;
mod moe;
pub mod synthetic;
mod vision;

use crate::cli::{get, opt, switch, value, CommandArgs};
use crate::engine::EngineArgs;
use crate::error::Result;
use clap::{value_parser, Arg, ArgMatches, Command};
use dram::dram_probe;
use kernels::kernel_lines;
use kestrel_core::parallel::Parallel;
use mixed::{mixed, Line};
use model::model_bench;
use moe::moe;
use std::path::PathBuf;
use std::time::Instant;
use vision::vision;

pub struct BenchArgs {
    model: Option<PathBuf>,
    n_prompt: usize,
    n_gen: usize,
    parallel: usize,
    /// Model bench: also time verify steps of this many rows of one
    /// sequence (speculative decoding's step).
    verify_rows: usize,
    /// Model bench: also decode one answer plain and with speculation
    /// (`--lookup`, `--draft`), alternated.
    spec: crate::generate::SpecArgs,
    /// Model bench: the speculation line's prompt (raw text; else the
    /// synthetic tokens).
    prompt_file: Option<PathBuf>,
    batch: usize,
    rows: usize,
    cols: usize,
    repeats: usize,
    threads: Option<usize>,
    no_pin: bool,
    hidden: usize,
    ffn: usize,
    q_heads: usize,
    kv_heads: usize,
    head_dim: usize,
    probe_rows: usize,
    probe_blocks: usize,
    no_kernels: bool,
    json: bool,
    moe: bool,
    vision: bool,
    image_side: usize,
}

impl CommandArgs for BenchArgs {
    fn command() -> Command {
        let count = |name, help, default| {
            value(name, "N", help)
                .value_parser(value_parser!(usize))
                .default_value(default)
        };
        Command::new("bench")
            .about("Time the kernels, the Q8/Q4 mixed-precision table and the DRAM wall on synthetic data.")
            .args([
                Arg::new("model")
                    .value_name("MODEL")
                    .value_parser(value_parser!(PathBuf))
                    .help("A VQF model: time prefill (pp) and decode (tg) end to end instead."),
                count("n-prompt", "Model bench: prompt tokens (pp).", "512").short('p'),
                count("n-gen", "Model bench: generated tokens (tg).", "128").short('n'),
                count(
                    "parallel",
                    "Model bench: also decode N sequences in lockstep (serve --parallel N).",
                    "1",
                ),
                count(
                    "verify-rows",
                    "Model bench: also time verify steps of N rows of one sequence (a token and N - 1 drafts).",
                    "1",
                ),
                value(
                    "prompt-file",
                    "FILE",
                    "With --lookup or --draft (one greedy answer, plain and speculative, alternated): its raw prompt (default: synthetic).",
                )
                .value_parser(value_parser!(PathBuf)),
                count("batch", "Model bench: prefill batch (at most 256).", "128").short('b'),
                count(
                    "rows",
                    "Matrix rows of the single-thread kernel lines (output size).",
                    "4096",
                ),
                count(
                    "cols",
                    "Matrix columns of the single-thread kernel lines (a multiple of 32).",
                    "4096",
                ),
                count("repeats", "Timed repeats per line (the median is reported).", "9")
                    .short('r'),
                EngineArgs::threads_arg(),
                EngineArgs::no_pin_arg(),
                count("hidden", "Hidden size of the mixed table's layer.", "4096"),
                count("ffn", "FFN (intermediate) size of the mixed table's layer.", "12288"),
                count("q-heads", "Query heads.", "32"),
                count("kv-heads", "Key/value heads.", "8"),
                count("head-dim", "Head dimension.", "128"),
                count("probe-rows", "DRAM probe rows (0: no probe).", "131072"),
                count("probe-blocks", "DRAM probe blocks per row.", "128"),
                switch("no-kernels", "Skip the single-thread per-kernel lines."),
                switch("json", "Print one JSON object instead of tables."),
                switch(
                    "moe",
                    "Only one Qwen3-30B-A3B MoE layer (synthetic): decode and a 32-token prefill.",
                ),
                switch(
                    "vision",
                    "Only the Qwen3-VL-2B vision tower (synthetic): one image's encode time.",
                ),
                count(
                    "image-side",
                    "--vision: the square image's side in pixels (a multiple of 32).",
                    "448",
                ),
            ])
            .args(crate::generate::SpecArgs::args())
    }

    fn from_matches(m: &ArgMatches) -> Self {
        BenchArgs {
            model: opt(m, "model"),
            n_prompt: get(m, "n-prompt"),
            n_gen: get(m, "n-gen"),
            parallel: get(m, "parallel"),
            verify_rows: get(m, "verify-rows"),
            spec: crate::generate::SpecArgs::from_matches(m),
            prompt_file: opt(m, "prompt-file"),
            batch: get(m, "batch"),
            rows: get(m, "rows"),
            cols: get(m, "cols"),
            repeats: get(m, "repeats"),
            threads: opt(m, "threads"),
            no_pin: m.get_flag("no-pin"),
            hidden: get(m, "hidden"),
            ffn: get(m, "ffn"),
            q_heads: get(m, "q-heads"),
            kv_heads: get(m, "kv-heads"),
            head_dim: get(m, "head-dim"),
            probe_rows: get(m, "probe-rows"),
            probe_blocks: get(m, "probe-blocks"),
            no_kernels: m.get_flag("no-kernels"),
            json: m.get_flag("json"),
            moe: m.get_flag("moe"),
            vision: m.get_flag("vision"),
            image_side: get(m, "image-side"),
        }
    }
}

fn median_ms(repeats: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up
    let mut times: Vec<f64> = (0..repeats.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    kestrel_core::sort::sort_by(&mut times, f64::total_cmp);
    times[times.len() / 2]
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.4}")
    } else {
        "null".into()
    }
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if let Some(m) = &args.model {
        return model_bench(m, args);
    }
    let (rows, cols) = (args.rows, args.cols);
    if cols == 0 || cols % 32 != 0 || rows == 0 {
        return Err(format!(
            "bench: need rows > 0 and cols a multiple of 32 (got {rows} x {cols})"
        )
        .into());
    }
    let kernels = crate::cpu::detect_kernels();
    if args.moe {
        let pool = crate::engine::make_pool(args.threads, args.no_pin);
        return moe(&kernels, &pool, args.repeats);
    }
    if args.vision {
        let pool = crate::engine::make_pool(args.threads, args.no_pin);
        return vision(&kernels, &pool, args.repeats, args.image_side);
    }
    let klines = if args.no_kernels {
        Vec::new()
    } else {
        kernel_lines(&kernels, args)?
    };
    let pool = crate::engine::make_pool(args.threads, args.no_pin);
    let (mb, decode, prefill, shapes) = mixed(&kernels, &pool, args)?;
    let (probe_rows, probes) = dram_probe(
        &pool,
        args.probe_rows,
        args.probe_blocks,
        args.repeats.min(5),
    );
    let threads = pool.threads();
    if args.json {
        let lines = |ls: &[Line]| {
            ls.iter()
                .map(|l| {
                    format!(
                        "{{\"name\":\"{}\",\"ms\":{},\"gflops\":{}}}",
                        l.name,
                        num(l.ms),
                        num(l.gflops)
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let kl = klines
            .iter()
            .map(|(n, ms, gf, gb)| {
                format!(
                    "{{\"name\":\"{n}\",\"ms\":{},\"gflops\":{},\"gbs\":{}}}",
                    num(*ms),
                    num(*gf),
                    num(*gb)
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        let pr = probes
            .iter()
            .map(|p| {
                format!(
                    "{{\"name\":\"{}\",\"ms\":{},\"payload_gbs\":{},\"raw_gbs\":{}}}",
                    p.name,
                    num(p.ms),
                    num(p.payload_gbs),
                    num(p.raw_gbs)
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        println!(
            "{{\"kernels\":\"{}\",\"threads\":{threads},\"pinned\":{},\"repeats\":{},\"kernel_lines\":{{\"rows\":{rows},\"cols\":{cols},\"threads\":1,\"lines\":[{kl}]}},\"mixed\":{{\"weights_mb\":{},\"shapes\":\"{shapes}\",\"decode\":[{}],\"prefill\":[{}]}},\"dram\":{{\"rows\":{},\"blocks\":{},\"probes\":[{pr}]}}}}",
            kernels.name(),
            pool.pinned(),
            args.repeats,
            num(mb),
            lines(&decode),
            lines(&prefill),
            probe_rows,
            args.probe_blocks,
        );
        return Ok(());
    }
    if !klines.is_empty() {
        println!(
            "kernels: {}  shape: {rows} x {cols}  threads: 1",
            kernels.name()
        );
        println!(
            "{:<28} {:>10} {:>10} {:>10}",
            "kernel", "ms", "GFLOPS", "GB/s"
        );
        for (name, ms, gf, gb) in &klines {
            let gf = if gf.is_finite() {
                format!("{gf:.2}")
            } else {
                "-".into()
            };
            println!("{name:<28} {ms:>10.3} {gf:>10} {gb:>10.2}");
        }
        println!();
    }
    println!(
        "=== Mixed precision ({}, {threads} threads{}) ===",
        kernels.name(),
        if pool.pinned() {
            ", pinned"
        } else {
            ", unpinned"
        }
    );
    println!("Weights: dual Q8_0+Q4_0 copies ({mb:.0} MB)");
    println!("Shapes: {shapes}");
    for (title, lines) in [
        ("--- Decode (M=1) ---", &decode),
        ("--- Prefill (M=32, batched) ---", &prefill),
    ] {
        println!("{title}");
        for l in lines.iter() {
            println!("{:<26} {:>9.3} ms {:>8.1} GFLOPS", l.name, l.ms, l.gflops);
        }
    }
    if !probes.is_empty() {
        println!(
            "--- Real-DRAM wall probe ({} rows x {} blocks/row, {threads} threads) ---",
            probe_rows, args.probe_blocks
        );
    }
    for p in &probes {
        let raw = if (p.raw_gbs - p.payload_gbs).abs() > 1e-9 {
            format!(" (raw {:.1} GB/s)", p.raw_gbs)
        } else {
            String::new()
        };
        println!(
            "{:<18}: {:>8.2} ms -> {:>5.1} GB/s payload{raw}",
            p.name, p.ms, p.payload_gbs
        );
    }
    Ok(())
}

/// Median of `v` (sorted in place); NaN when empty.
fn median(v: &mut [f64]) -> f64 {
    kestrel_core::sort::sort_by(v, f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
