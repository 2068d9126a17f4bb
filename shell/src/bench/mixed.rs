//! The mixed-precision table: a Qwen-like layer with dual Q8_0/Q4_0
//! weights, decode (M=1) and prefill (M=32) through the threaded
//! `Kernels::matmul` on the pool.

use super::median_ms;
use super::synthetic::{synthetic, synthetic_packed};
use super::BenchArgs;
use crate::error::Result;
use crate::pool::Pool;
use kestrel_core::kernels::{Acts, Epilogue, Kernels};
use kestrel_core::quant::repack;

/// One timed line.
pub(super) struct Line {
    pub(super) name: String,
    pub(super) ms: f64,
    pub(super) gflops: f64,
}

/// The `--bench-mixed` table: decode (M=1) and prefill (M=32) on a
/// Qwen-like layer with dual Q8_0/Q4_0 weights, threaded `matmul`.
pub(super) fn mixed(
    kernels: &Kernels,
    pool: &Pool,
    args: &BenchArgs,
) -> Result<(f64, Vec<Line>, Vec<Line>, String)> {
    let h = args.hidden;
    let qkv = args.q_heads * args.head_dim + 2 * args.kv_heads * args.head_dim;
    let ffn = args.ffn;
    if !h.is_multiple_of(32) || !ffn.is_multiple_of(32) || qkv == 0 {
        return Err("bench: hidden and ffn must be multiples of 32".into());
    }
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
                let w = repack::PackedMatrix::new(layout, rows, cols, bytes)?;
                let mut err = Ok(());
                let ms = median_ms(args.repeats, || {
                    // What the engine does per matmul: quantize the
                    // activations, multiply (threaded) with the epilogue.
                    let r = kernels.quantize_acts(&x, &mut qs, &mut d).and_then(|()| {
                        let acts = Acts {
                            x: &x,
                            qs: &qs,
                            d: &d,
                            sums: &[],
                        };
                        kernels.matmul_into(pool, &w, &acts, m, epi, &mut out, &mut tmp)
                    });
                    if r.is_err() {
                        err = r;
                    }
                });
                err?;
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
