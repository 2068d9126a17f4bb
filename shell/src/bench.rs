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

use crate::cli::{get, opt, switch, value, CommandArgs};
use crate::engine::EngineArgs;
use crate::pool::Pool;
use clap::{value_parser, Arg, ArgMatches, Command};
use kestrel_core::kernels::{Acts, Epilogue, Kernels};
use kestrel_core::parallel::Parallel;
use kestrel_core::quant::{q4_0, q8_0, repack};
use std::path::PathBuf;
use std::time::Instant;

pub struct BenchArgs {
    model: Option<PathBuf>,
    n_prompt: usize,
    n_gen: usize,
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
                count("probe-rows", "DRAM probe rows.", "131072"),
                count("probe-blocks", "DRAM probe blocks per row.", "128"),
                switch("no-kernels", "Skip the single-thread per-kernel lines."),
                switch("json", "Print one JSON object instead of tables."),
                switch(
                    "moe",
                    "Only one Qwen3-30B-A3B MoE layer (hidden 2048, 128 experts of FFN 768, top-8; synthetic weights): decode and a 32-token prefill.",
                ),
                switch(
                    "vision",
                    "Only the vision tower at the Qwen3-VL-2B shape (depth 24, hidden 1024; synthetic Q8 weights): one image's encode time.",
                ),
                count(
                    "image-side",
                    "--vision: the square image's side in pixels (a multiple of 32).",
                    "448",
                ),
            ])
    }

    fn from_matches(m: &ArgMatches) -> Self {
        BenchArgs {
            model: opt(m, "model"),
            n_prompt: get(m, "n-prompt"),
            n_gen: get(m, "n-gen"),
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

/// Deterministic pseudo-random values in [-1, 1).
fn synthetic(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
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

/// A packed `rows x cols` matrix in `layout`, built by quantizing one tile of
/// synthetic rows and repeating it (the bytes a kernel streams are what
/// matters for timing, not their variety).
fn synthetic_packed(layout: repack::Layout, rows: usize, cols: usize) -> Result<Vec<u8>, String> {
    const TILE: usize = 64;
    let e = |e: kestrel_core::Error| e.to_string();
    let nb = cols / 32;
    let tile_rows = TILE.min(rows);
    let w = synthetic(tile_rows * cols, rows as u64 ^ cols as u64);
    let (bb, src_len) = match layout {
        repack::Layout::Q4_0x4 => (q4_0::BLOCK_BYTES, tile_rows * nb * q4_0::BLOCK_BYTES),
        _ => (q8_0::BLOCK_BYTES, tile_rows * nb * q8_0::BLOCK_BYTES),
    };
    let mut src = vec![0u8; src_len];
    for r in 0..tile_rows {
        let row = &w[r * cols..(r + 1) * cols];
        let dst = &mut src[r * nb * bb..(r + 1) * nb * bb];
        match layout {
            repack::Layout::Q4_0x4 => q4_0::quantize_row_bytes(row, dst).map_err(e)?,
            _ => q8_0::quantize_row_bytes(row, dst).map_err(e)?,
        }
    }
    let mut tile = vec![0u8; layout.matrix_bytes(tile_rows, cols).map_err(e)?];
    match layout {
        repack::Layout::Q4_0x4 => repack::repack_q4_0x4(&src, tile_rows, cols, &mut tile),
        _ => repack::repack_q8_0x8(&src, tile_rows, cols, &mut tile),
    }
    .map_err(e)?;
    let total = layout.matrix_bytes(rows, cols).map_err(e)?;
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        let n = tile.len().min(total - out.len());
        out.extend_from_slice(&tile[..n]);
    }
    Ok(out)
}

/// One timed line.
struct Line {
    name: String,
    ms: f64,
    gflops: f64,
}

/// One DRAM probe result.
struct Probe {
    name: &'static str,
    ms: f64,
    payload_gbs: f64,
    raw_gbs: f64,
}

/// Reads the `block`-byte payloads at a `stride`-byte pitch over `buf`
/// (`kestrel_kernels::read_sum`, SIMD loads), split over the pool (each
/// thread a contiguous range of whole steps).
fn stream_sum(pool: &Pool, buf: &[u8], stride: usize, block: usize) -> u64 {
    let n = buf.len() / stride;
    let parts = pool.threads().max(1);
    let mut items: Vec<u64> = vec![0; parts];
    pool.for_each_mut(&mut items, &|p, acc| {
        let (b0, b1) = (n * p / parts, n * (p + 1) / parts);
        *acc = kestrel_kernels::read_sum(&buf[b0 * stride..b1 * stride], stride, block);
    });
    items.iter().fold(0u64, |a, &b| a.wrapping_add(b))
}

fn dram_probe(pool: &Pool, rows: usize, blocks: usize, repeats: usize) -> Vec<Probe> {
    let n = rows * blocks;
    let mut out = Vec::new();
    for (name, stride, block) in [
        ("compact 18B/block", 18usize, 18usize),
        ("compact 34B/block", 34, 34),
        ("64B-aligned/block", 64, 18),
    ] {
        let buf: Vec<u8> = (0..n * stride).map(|i| (i * 31 + 7) as u8).collect();
        let mut sink = 0u64;
        let ms = median_ms(repeats, || {
            sink = sink.wrapping_add(stream_sum(pool, &buf, stride, block));
        });
        std::hint::black_box(sink);
        let secs = ms * 1e-3;
        out.push(Probe {
            name,
            ms,
            payload_gbs: (n * block) as f64 / secs / 1e9,
            raw_gbs: (n * stride) as f64 / secs / 1e9,
        });
    }
    out
}

/// The `--bench-mixed` table: decode (M=1) and prefill (M=32) on a
/// Qwen-like layer with dual Q8_0/Q4_0 weights, threaded `matmul`.
fn mixed(
    kernels: &Kernels,
    pool: &Pool,
    args: &BenchArgs,
) -> Result<(f64, Vec<Line>, Vec<Line>, String), String> {
    let h = args.hidden;
    let qkv = args.q_heads * args.head_dim + 2 * args.kv_heads * args.head_dim;
    let ffn = args.ffn;
    if !h.is_multiple_of(32) || !ffn.is_multiple_of(32) || qkv == 0 {
        return Err("bench: hidden and ffn must be multiples of 32".into());
    }
    let e = |e: kestrel_core::Error| e.to_string();
    let shapes = [
        ("fused QKV", qkv, h),
        ("fused gate+up", 2 * ffn, h),
        ("fused down+res", h, ffn),
    ];
    let mut mats = Vec::new();
    let mut total = 0usize;
    for &(_, rows, cols) in &shapes {
        let q4 = synthetic_packed(repack::Layout::Q4_0x4, rows, cols)?;
        let q8 = synthetic_packed(repack::Layout::Q8_0x8, rows, cols)?;
        total += q4.len() + q8.len();
        mats.push((q4, q8));
    }
    let shape_text = format!(
        "QKV {qkv} x {h} (q {} + k/v 2 x {}), gate+up 2 x {ffn} x {h}, down+res {h} x {ffn}",
        args.q_heads * args.head_dim,
        args.kv_heads * args.head_dim
    );
    let mut phases = Vec::new();
    for m in [1usize, 32] {
        let mut lines = Vec::new();
        for (&(name, rows, cols), (q4, q8)) in shapes.iter().zip(&mats) {
            let x = synthetic(m * cols, 3);
            let mut qs = vec![0i8; m * cols];
            let mut d = vec![0f32; m * cols / 32];
            // The engine's epilogues: SwiGLU on gate+up, residual add on down.
            let epi = match name {
                "fused gate+up" => Epilogue::SwiGlu,
                "fused down+res" => Epilogue::Add,
                _ => Epilogue::Store,
            };
            let width = if epi == Epilogue::SwiGlu {
                rows / 2
            } else {
                rows
            };
            let mut out = vec![0f32; m * width];
            let mut tmp = vec![0f32; m * rows];
            for (quant, layout, bytes) in [
                ("Q4", repack::Layout::Q4_0x4, q4),
                ("Q8", repack::Layout::Q8_0x8, q8),
            ] {
                let w = repack::PackedMatrix::new(layout, rows, cols, bytes).map_err(e)?;
                let mut err = Ok(());
                let ms = median_ms(args.repeats, || {
                    // What the engine does per matmul: quantize the
                    // activations, multiply (threaded) with the epilogue.
                    let r = kernels.quantize_acts(&x, &mut qs, &mut d).and_then(|()| {
                        let acts = Acts {
                            x: &x,
                            qs: &qs,
                            d: &d,
                        };
                        kernels.matmul_into(pool, &w, &acts, m, epi, &mut out, &mut tmp)
                    });
                    if r.is_err() {
                        err = r;
                    }
                });
                err.map_err(e)?;
                let label = if m == 1 {
                    format!("{quant} {name}")
                } else {
                    format!("{quant} batched {}", name.trim_start_matches("fused "))
                };
                lines.push(Line {
                    name: label,
                    ms,
                    gflops: 2.0 * (m * rows * cols) as f64 / (ms * 1e-3) / 1e9,
                });
            }
        }
        phases.push(lines);
    }
    let prefill = phases.pop().unwrap_or_default();
    let decode = phases.pop().unwrap_or_default();
    Ok((
        total as f64 / (1u64 << 20) as f64,
        decode,
        prefill,
        shape_text,
    ))
}

/// `--moe`: one MoE layer at the Qwen3-30B-A3B shape through the engine's
/// MoE block (router, top-8, grouped experts): decode reads the Q4 copy,
/// prefill (M=32) the Q8 copy, as a dual file does. Bytes touched = the F32
/// router plus the expert matrices multiplied (counted by the state).
fn moe(kernels: &Kernels, pool: &Pool, repeats: usize) -> Result<(), String> {
    use kestrel_core::model::config::{Arch, Config, MoeConfig, MAX_EOS, MAX_LAYERS};
    use kestrel_core::model::moe::{ffn, MoeLayer};
    use kestrel_core::state::{ArenaLayout, KvType, Options, State};
    use repack::Layout;
    const H: usize = 2048;
    const E: usize = 128;
    const F: usize = 768;
    const K: usize = 8;
    let e = |e: kestrel_core::Error| e.to_string();
    let cfg = Config {
        arch: Arch::Qwen3Moe,
        vocab_size: 32,
        hidden_size: H as u32,
        num_layers: 1,
        num_heads: 32,
        num_kv_heads: 4,
        head_dim: 128,
        ffn_size: F as u32,
        rope_theta: 1e6,
        rms_norm_eps: 1e-6,
        max_position: 32,
        tied_embeddings: false,
        qkv_bias: false,
        qk_norm: true,
        moe: Some(MoeConfig {
            num_experts: E as u32,
            experts_per_token: K as u32,
            moe_ffn_size: F as u32,
            norm_topk_prob: true,
            decoder_sparse_step: 1,
            mlp_only_layers: [0; MAX_LAYERS / 64],
        }),
        mrope_section: [0; 3],
        vision: None,
        bos_token_id: None,
        eos_token_ids: [0; MAX_EOS],
        eos_count: 0,
    };
    let rb: Vec<u8> = synthetic(E * H, 11)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let router = repack::PackedMatrix::new(Layout::F32, E, H, &rb).map_err(e)?;
    let x = synthetic(32 * H, 5);
    println!(
        "=== MoE layer, Qwen3-30B-A3B shape: hidden {H}, {E} experts x FFN {F}, top-{K} ({}, {} threads) ===",
        kernels.name(),
        pool.threads()
    );
    for (m, layout, name) in [(1usize, Layout::Q4_0x4, "Q4"), (32, Layout::Q8_0x8, "Q8")] {
        let gu = synthetic_packed(layout, 2 * F, H)?.repeat(E);
        let dn = synthetic_packed(layout, H, F)?.repeat(E);
        let layer = MoeLayer {
            router,
            gate_up: &gu,
            down: &dn,
            layout,
            experts: E,
            top_k: K,
            ffn: F,
            hidden: H,
            norm_topk_prob: true,
        };
        let opts = Options {
            max_seq: 1,
            max_batch: 32,
            kv: KvType::F16,
            all_logits: false,
            slots: 1,
        };
        let mut arena = vec![0u8; ArenaLayout::new(&cfg, &opts).map_err(e)?.total];
        let mut s = State::new(&cfg, opts, &mut arena).map_err(e)?;
        let (mut runs, mut err) = (0usize, Ok(()));
        let ms = median_ms(repeats, || {
            // Decode: a different token each run (its own 8 experts).
            let t = runs % 32;
            let src = if m == 1 {
                &x[t * H..(t + 1) * H]
            } else {
                &x[..]
            };
            s.xb[..m * H].copy_from_slice(src);
            s.x[..m * H].fill(0.0);
            if let Err(x) = ffn(kernels, pool, &layer, &mut s, 0, m) {
                err = Err(x);
            }
            runs += 1;
        });
        err.map_err(e)?;
        let calls = s.moe.expert_calls as f64 / runs as f64;
        let bytes = s.moe.expert_bytes as f64 / runs as f64 + rb.len() as f64;
        println!(
            "{:<8} M={m:<2} {name}: {ms:>8.3} ms/step {:>8.3} ms/token  experts run {calls:>5.1}  bytes touched {:>6.2} MB/step {:>6.2} MB/token  ({:.1} GB/s)",
            if m == 1 { "decode" } else { "prefill" },
            ms / m as f64,
            bytes / 1e6,
            bytes / 1e6 / m as f64,
            bytes / (ms * 1e-3) / 1e9
        );
    }
    println!(
        "(router F32 {:.2} MB read once per step; synthetic router: uniform-ish routing)",
        rb.len() as f64 / 1e6
    );
    Ok(())
}

/// Synthetic weights for any tensor: a hash of (part, layer, row, col) in
/// [-0.05, 0.05) (norm weights near 1), so activations stay bounded.
struct HashSource;

impl kestrel_core::convert::TensorSource for HashSource {
    fn read_rows(
        &self,
        part: kestrel_core::convert::Part,
        layer: u16,
        _expert: usize,
        row0: usize,
        out: &mut [f32],
    ) -> Result<(), kestrel_core::Error> {
        let name = format!("{part:?}");
        let seed = name.bytes().fold(layer as u64, |a, b| {
            a.wrapping_mul(131).wrapping_add(b as u64)
        });
        let norm = name.contains("Norm") && !name.contains("Bias");
        let mut st = seed ^ (row0 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for v in out.iter_mut() {
            st = st
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((st >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            *v = if norm { 1.0 + 0.1 * u } else { 0.05 * u };
        }
        Ok(())
    }
}

/// `--vision`: one image through a vision tower at the Qwen3-VL-2B shape
/// (depth 24, hidden 1024, 16 heads, MLP 4096, DeepStack after blocks 5, 11
/// and 17, merger to 2048) with synthetic weights in a Q8 file (the vision
/// matrices' copy in quantized files): an `side x side` image is
/// `(side / 16)^2` patches and a quarter as many LLM tokens.
fn vision(kernels: &Kernels, pool: &Pool, repeats: usize, side: usize) -> Result<(), String> {
    use kestrel_core::convert::{write_vqf, WeightMode};
    use kestrel_core::model::config::{Arch, Config, VisionConfig, MAX_EOS};
    use kestrel_core::model::vision::{encode_image, VisionLayout, VisionState};
    use kestrel_core::state::KvType;
    use kestrel_core::vqf::layout::Entry;
    let e = |e: kestrel_core::Error| e.to_string();
    if side == 0 || !side.is_multiple_of(32) {
        return Err(format!(
            "bench --vision: the image side must be a multiple of 32 (got {side})"
        ));
    }
    let mut deepstack = [0u32; 8];
    deepstack[..3].copy_from_slice(&[5, 11, 17]);
    let vision = VisionConfig {
        depth: 24,
        hidden_size: 1024,
        num_heads: 16,
        ffn_size: 4096,
        patch_size: 16,
        temporal_patch: 2,
        spatial_merge: 2,
        out_hidden: 2048,
        num_position_embeddings: 2304,
        deepstack_layers: deepstack,
        deepstack_count: 3,
        image_token_id: 30,
        vision_start_token_id: 28,
        vision_end_token_id: 29,
        min_pixels: 1024,
        max_pixels: 16_777_216,
        image_mean: [0.5; 3],
        image_std: [0.5; 3],
        rescale_factor: 1.0 / 255.0,
    };
    // A one-layer text model of the 2B's width (the tower's output size).
    let cfg = Config {
        arch: Arch::Qwen3Vl,
        vocab_size: 32,
        hidden_size: 2048,
        num_layers: 1,
        num_heads: 16,
        num_kv_heads: 8,
        head_dim: 128,
        ffn_size: 64,
        rope_theta: 5e6,
        rms_norm_eps: 1e-6,
        max_position: 256,
        tied_embeddings: true,
        qkv_bias: false,
        qk_norm: true,
        moe: None,
        mrope_section: [24, 20, 20],
        vision: Some(vision),
        bos_token_id: None,
        eos_token_ids: [0; MAX_EOS],
        eos_count: 0,
    };
    let t = Instant::now();
    let n = kestrel_core::convert::entry_count(&cfg, WeightMode::Q8).map_err(e)?;
    let mut entries = vec![Entry::EMPTY; n];
    let mut scratch = vec![0f32; kestrel_core::convert::scratch_len(&cfg).map_err(e)?];
    struct VecSink(Vec<u8>);
    impl kestrel_core::vqf::write::Sink for VecSink {
        fn write(&mut self, bytes: &[u8]) -> Result<(), kestrel_core::Error> {
            self.0.extend_from_slice(bytes);
            Ok(())
        }
    }
    let mut sink = VecSink(Vec::new());
    write_vqf(
        &cfg,
        WeightMode::Q8,
        256,
        None,
        &HashSource,
        &mut entries,
        &mut scratch,
        &mut sink,
        &mut |_, _, _| {},
    )
    .map_err(e)?;
    let file = sink.0;
    let vision_bytes: u64 = entries
        .iter()
        .filter(|x| x.role.is_vision())
        .map(|x| x.nbytes)
        .sum();
    let w = kestrel_core::model::weights::Weights::new(
        kestrel_core::vqf::Vqf::parse(&file).map_err(e)?,
        true,
    )
    .map_err(e)?;
    let grid = side / 16;
    let patches = grid * grid;
    let tokens = patches / 4;
    let pixels = synthetic(patches * vision.patch_values(), 9);
    let layout = VisionLayout::new(&vision, patches, KvType::F16, pool.threads()).map_err(e)?;
    let mut arena = vec![0u8; layout.total];
    let mut s = VisionState::new(layout, &mut arena).map_err(e)?;
    let mut embeds = vec![0f32; tokens * 2048];
    let mut deep = vec![0f32; 3 * tokens * 2048];
    println!(
        "=== vision tower, Qwen3-VL-2B shape: depth 24, hidden 1024, MLP 4096, Q8 matrices ({:.0} MB; built in {:.1} s) ===",
        vision_bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let mut err = Ok(());
    let ms = median_ms(repeats, || {
        if let Err(x) = encode_image(
            &w,
            &mut s,
            kernels,
            pool,
            &pixels,
            grid,
            grid,
            &mut embeds,
            &mut deep,
        ) {
            err = Err(x);
        }
    });
    err.map_err(e)?;
    // Multiply-adds: patch embed, per block qkv + proj + MLP and attention
    // (QK^T and PV), the mergers.
    let (p, d, f) = (patches as f64, 1024f64, 4096f64);
    let macs = p * 1536.0 * d
        + 24.0 * (p * (4.0 * d * d + 2.0 * d * f) + 2.0 * p * p * d)
        + 4.0 * (tokens as f64) * (4096.0 * 4096.0 + 4096.0 * 2048.0);
    println!(
        "image {side}x{side}: {patches} patches -> {tokens} tokens: {:.0} ms ({:.2} s) median of {repeats}, {:.1} GMAC/s, {} kernels, {} threads",
        ms,
        ms / 1e3,
        macs / (ms * 1e-3) / 1e9,
        kernels.name(),
        pool.threads()
    );
    Ok(())
}

/// The single-thread kernel lines: (name, ms, GFLOPS, GB/s; NaN = none).
fn kernel_lines(
    kernels: &Kernels,
    args: &BenchArgs,
) -> Result<Vec<(String, f64, f64, f64)>, String> {
    let (rows, cols) = (args.rows, args.cols);
    let mut lines = Vec::new();
    let w = synthetic(rows * cols, 1);
    let x = synthetic(cols * 32, 2);

    let nb = cols / 32;
    let mut q4 = vec![0u8; rows * nb * q4_0::BLOCK_BYTES];
    let mut q8 = vec![0u8; rows * nb * q8_0::BLOCK_BYTES];
    for r in 0..rows {
        let row = &w[r * cols..(r + 1) * cols];
        q4_0::quantize_row_bytes(row, &mut q4[r * nb * 18..(r + 1) * nb * 18])
            .map_err(|e| e.to_string())?;
        q8_0::quantize_row_bytes(row, &mut q8[r * nb * 34..(r + 1) * nb * 34])
            .map_err(|e| e.to_string())?;
    }
    let l4 = repack::Layout::Q4_0x4;
    let l8 = repack::Layout::Q8_0x8;
    let mut p4 = vec![0u8; l4.matrix_bytes(rows, cols).map_err(|e| e.to_string())?];
    let mut p8 = vec![0u8; l8.matrix_bytes(rows, cols).map_err(|e| e.to_string())?];
    repack::repack_q4_0x4(&q4, rows, cols, &mut p4).map_err(|e| e.to_string())?;
    repack::repack_q8_0x8(&q8, rows, cols, &mut p8).map_err(|e| e.to_string())?;
    let m4 = repack::PackedMatrix::new(l4, rows, cols, &p4).map_err(|e| e.to_string())?;
    let m8 = repack::PackedMatrix::new(l8, rows, cols, &p8).map_err(|e| e.to_string())?;

    let mut qs = vec![0i8; x.len()];
    let mut d = vec![0f32; x.len() / 32];
    kernels
        .quantize_acts(&x, &mut qs, &mut d)
        .map_err(|e| e.to_string())?;

    for (name, mat, m) in [
        ("Q4_0x4 gemv (M=1)", &m4, 1usize),
        ("Q8_0x8 gemv (M=1)", &m8, 1),
        ("Q4_0x4 gemm (M=32)", &m4, 32),
        ("Q8_0x8 gemm (M=32)", &m8, 32),
    ] {
        let mut out = vec![0f32; m * rows];
        let ms = median_ms(args.repeats, || {
            kernels
                .gemm_q8(mat, &qs[..m * cols], &d[..m * nb], m, &mut out)
                .expect("shapes were checked above");
        });
        let flops = 2.0 * (m * rows * cols) as f64;
        let gbs = mat.bytes.len() as f64 / (ms * 1e-3) / 1e9;
        lines.push((name.to_string(), ms, flops / (ms * 1e-3) / 1e9, gbs));
    }
    // f16 weights (plain matvec, M=1).
    let f16w: Vec<u8> = w
        .iter()
        .flat_map(|v| kestrel_core::quant::f16::f32_to_f16(*v).to_le_bytes())
        .collect();
    let mf16 = repack::PackedMatrix::new(repack::Layout::F16, rows, cols, &f16w)
        .map_err(|e| e.to_string())?;
    let mut out = vec![0f32; rows];
    let ms = median_ms(args.repeats, || {
        kernels
            .matvec_float(&mf16, &x[..cols], &mut out)
            .expect("shapes were checked above");
    });
    lines.push((
        "F16 matvec (M=1)".to_string(),
        ms,
        2.0 * (rows * cols) as f64 / (ms * 1e-3) / 1e9,
        f16w.len() as f64 / (ms * 1e-3) / 1e9,
    ));
    // The activation quantizer on the same 32 x cols input (GB/s of f32 read).
    let ms = median_ms(args.repeats, || {
        kernels
            .quantize_acts(&x, &mut qs, &mut d)
            .expect("shapes were checked above");
    });
    lines.push((
        "Q8_0 quantize_acts (M=32)".to_string(),
        ms,
        f64::NAN,
        (x.len() * 4) as f64 / (ms * 1e-3) / 1e9,
    ));
    Ok(lines)
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.4}")
    } else {
        "null".into()
    }
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    if let Some(m) = &args.model {
        return model_bench(m, args);
    }
    let (rows, cols) = (args.rows, args.cols);
    if cols == 0 || cols % 32 != 0 || rows == 0 {
        return Err(format!(
            "bench: need rows > 0 and cols a multiple of 32 (got {rows} x {cols})"
        ));
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
    let probes = dram_probe(
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
            args.probe_rows,
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
    println!(
        "--- Real-DRAM wall probe ({} rows x {} blocks/row, {threads} threads) ---",
        args.probe_rows, args.probe_blocks
    );
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
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The end-to-end model bench (llama-bench's pp and tg): per repeat, tokens
/// per second of a `n_prompt`-token synthetic prompt prefilled in batches,
/// and of `n_gen` tokens decoded one by one, each from an empty KV cache.
/// One warm-up of each first (prefill whole, decode one token).
fn model_bench(path: &std::path::Path, args: &BenchArgs) -> Result<(), String> {
    use crate::engine::{self, Model};
    use kestrel_core::model::forward::forward;
    let model = Model::open(path)?;
    let w = model.weights(true)?;
    let eargs = EngineArgs {
        threads: args.threads,
        no_pin: args.no_pin,
        ctx: Some((args.n_prompt + args.n_gen).max(1)),
        ..EngineArgs::default()
    };
    let (k, pool, opts) = engine::setup(
        &w,
        &eargs,
        false,
        args.batch.clamp(1, kestrel_core::state::MAX_BATCH),
    );
    if opts.max_seq < args.n_prompt + args.n_gen {
        return Err(format!(
            "bench: the file holds at most {} tokens",
            opts.max_seq
        ));
    }
    let mut arena = engine::arena(&w, &opts)?;
    let mut s = engine::state(&w, opts, &mut arena)?;
    let vocab = w.cfg.vocab_size as usize;
    let toks: Vec<u32> = synthetic(args.n_prompt.max(args.n_gen), 7)
        .iter()
        .map(|v| ((v + 1.0) * 0.5 * vocab as f32) as u32 % vocab as u32)
        .collect();
    let e = |e: kestrel_core::Error| e.to_string();
    let mut pass = |n: usize, batch: usize| -> Result<f64, String> {
        s.pos = 0;
        let t = Instant::now();
        for c in toks[..n].chunks(batch) {
            forward(&w, &mut s, &k, &pool, c).map_err(e)?;
        }
        Ok(n as f64 / t.elapsed().as_secs_f64())
    };
    let reps = args.repeats.max(1);
    let (mut pp, mut tg) = (Vec::new(), Vec::new());
    if args.n_prompt > 0 {
        pass(args.n_prompt, opts.max_batch)?;
        for _ in 0..reps {
            pp.push(pass(args.n_prompt, opts.max_batch)?);
        }
    }
    if args.n_gen > 0 {
        pass(1, 1)?;
        for _ in 0..reps {
            tg.push(pass(args.n_gen, 1)?);
        }
    }
    let list = |v: &[f64]| v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(",");
    let (pps, tgs) = (list(&pp), list(&tg));
    let (pp_med, tg_med) = (median(&mut pp), median(&mut tg));
    let bytes = w.decode_bytes();
    let gbs = bytes as f64 * tg_med / 1e9;
    let probes = dram_probe(&pool, args.probe_rows, args.probe_blocks, reps.min(5));
    let threads = pool.threads();
    if args.json {
        let pr = probes
            .iter()
            .map(|p| {
                format!(
                    "{{\"name\":\"{}\",\"payload_gbs\":{},\"raw_gbs\":{}}}",
                    p.name,
                    num(p.payload_gbs),
                    num(p.raw_gbs)
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        println!(
            "{{\"kernels\":\"{}\",\"threads\":{threads},\"batch\":{},\"decode_bytes\":{bytes},\"pp\":{{\"n\":{},\"samples_ts\":[{pps}],\"median_ts\":{}}},\"tg\":{{\"n\":{},\"samples_ts\":[{tgs}],\"median_ts\":{}}},\"decode_gbs\":{},\"dram\":[{pr}]}}",
            k.name(),
            opts.max_batch,
            args.n_prompt,
            num(pp_med),
            args.n_gen,
            num(tg_med),
            num(gbs)
        );
        return Ok(());
    }
    println!(
        "{} | {} kernels, {threads} threads, batch {}",
        path.display(),
        k.name(),
        opts.max_batch
    );
    println!(
        "pp{:<5} {:>9.2} tok/s (median of {reps})",
        args.n_prompt, pp_med
    );
    println!(
        "tg{:<5} {:>9.2} tok/s (median of {reps}), {:.1} MB of weights per token, {gbs:.1} GB/s",
        args.n_gen,
        tg_med,
        bytes as f64 / 1e6
    );
    for p in &probes {
        println!(
            "DRAM {:<18} {:>6.1} GB/s payload, {:.1} raw",
            p.name, p.payload_gbs, p.raw_gbs
        );
    }
    Ok(())
}
