//! The single-thread per-kernel lines (`--rows` x `--cols`): Q4_0x4 and
//! Q8_0x8 GEMV and GEMM (4 activation rows: a batched decode step; 32: a
//! prefill), the GEMVs and 4- and 32-row GEMMs of the layouts that keep
//! GGUF blocks (Q5_0x4, Q5_1x4, Q4_Kx4, Q5_Kx4, Q6_Kx8, IQ4_NLx4: timed on pseudo-random
//! block bytes, which cost what real ones do), the F16 matvec and the activation
//! quantizer.

use super::median_ms;
use super::synthetic::synthetic;
use super::BenchArgs;
use crate::error::Result;
use kestrel_core::kernels::{Acts, Kernels};
use kestrel_core::quant::{q4_0, q8_0, repack};

/// The single-thread kernel lines: (name, ms, GFLOPS, GB/s; NaN = none).
pub(super) fn kernel_lines(
    kernels: &Kernels,
    args: &BenchArgs,
) -> Result<Vec<(String, f64, f64, f64)>> {
    let (rows, cols) = (args.rows, args.cols);
    let mut lines = Vec::new();
    let w = synthetic(rows * cols, 1);
    let x = synthetic(cols * 32, 2);

    let nb = cols / 32;
    let mut q4 = vec![0u8; rows * nb * q4_0::BLOCK_BYTES];
    let mut q8 = vec![0u8; rows * nb * q8_0::BLOCK_BYTES];
    for r in 0..rows {
        let row = &w[r * cols..(r + 1) * cols];
        q4_0::quantize_row_bytes(row, &mut q4[r * nb * 18..(r + 1) * nb * 18])?;
        q8_0::quantize_row_bytes(row, &mut q8[r * nb * 34..(r + 1) * nb * 34])?;
    }
    let l4 = repack::Layout::Q4_0x4;
    let l8 = repack::Layout::Q8_0x8;
    let mut p4 = vec![0u8; l4.matrix_bytes(rows, cols)?];
    let mut p8 = vec![0u8; l8.matrix_bytes(rows, cols)?];
    repack::repack(l4, &q4, rows, cols, &mut p4)?;
    repack::repack(l8, &q8, rows, cols, &mut p8)?;
    let m4 = repack::PackedMatrix::new(l4, rows, cols, &p4)?;
    let m8 = repack::PackedMatrix::new(l8, rows, cols, &p8)?;

    let mut qs = vec![0i8; x.len()];
    let mut d = vec![0f32; x.len() / 32];
    kernels.quantize_acts(&x, &mut qs, &mut d)?;

    for (name, mat, m) in [
        ("Q4_0x4 gemv (M=1)", &m4, 1usize),
        ("Q8_0x8 gemv (M=1)", &m8, 1),
        // The server's decode step at --parallel 4.
        ("Q4_0x4 gemm (M=4)", &m4, 4),
        ("Q8_0x8 gemm (M=4)", &m8, 4),
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
    // The GGUF-block layouts, M=1, M=4 (the server's step at --parallel 4)
    // and M=32 (a prefill; cols a multiple of 256 for the k-quants).
    const K_ROWS: usize = 32;
    let mut qs_k = vec![0i8; K_ROWS * cols];
    let mut d_k = vec![0f32; K_ROWS * cols / 256];
    let mut sums_k = vec![0i16; K_ROWS * cols / 32];
    let k_ok = cols % 256 == 0;
    if k_ok {
        kernels.quantize_acts_k(&x[..K_ROWS * cols], &mut qs_k, &mut d_k, &mut sums_k)?;
    }
    // Every layout made from GGUF blocks but the two above.
    let gguf_layouts = repack::Layout::ALL.into_iter().filter(|l| {
        l.spec().kept.is_some() && !matches!(l, repack::Layout::Q4_0x4 | repack::Layout::Q8_0x8)
    });
    for layout in gguf_layouts {
        let name = layout.spec().name;
        let k_quant = layout.block_cols() == 256;
        if k_quant && !k_ok {
            continue;
        }
        let bytes = random_block_bytes(layout.matrix_bytes(rows, cols)?);
        let mat = repack::PackedMatrix::new(layout, rows, cols, &bytes)?;
        for m in [1, 4, K_ROWS] {
            let acts = if k_quant {
                Acts {
                    x: &[],
                    qs: &qs_k[..m * cols],
                    d: &d_k[..m * cols / 256],
                    sums: &sums_k[..m * cols / 32],
                }
            } else {
                Acts {
                    x: &[],
                    qs: &qs[..m * cols],
                    d: &d[..m * nb],
                    sums: &[],
                }
            };
            let mut out = vec![0f32; m * rows];
            let ms = median_ms(args.repeats, || {
                kernels
                    .gemm_quantized(&mat, &acts, m, &mut out)
                    .expect("shapes were checked above");
            });
            let flops = 2.0 * (m * rows * cols) as f64;
            let gbs = bytes.len() as f64 / (ms * 1e-3) / 1e9;
            let kind = if m == 1 { "gemv" } else { "gemm" };
            lines.push((
                format!("{name} {kind} (M={m})"),
                ms,
                flops / (ms * 1e-3) / 1e9,
                gbs,
            ));
        }
    }
    // f16 weights (plain matvec, M=1).
    let f16w: Vec<u8> = w
        .iter()
        .flat_map(|v| kestrel_core::quant::f16::f32_to_f16(*v).to_le_bytes())
        .collect();
    let mf16 = repack::PackedMatrix::new(repack::Layout::F16, rows, cols, &f16w)?;
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

/// `n` pseudo-random bytes (xorshift), every f16 scale among them a finite
/// value: bit 14 of each byte pair is cleared, so no exponent is all ones.
fn random_block_bytes(n: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let b = (state >> 32) as u8;
            if i % 2 == 1 {
                b & 0xBF
            } else {
                b
            }
        })
        .collect()
}
