//! The architecture's Q4_Kx4 kernels and Q8_K activation quantizer against
//! [`crate::generic`], bit for bit: rows that do not fill a group, 1 to 7
//! activation rows, every byte value in every position of the super-block
//! (the f16 `d`/`dmin` kept finite), shape errors. Without the token's
//! features only the generic code runs (see `arch_tests.rs`).

use crate::arch_tests::{assert_same, cpu, cpus, Rng, SPECIAL};
use crate::generic;
use crate::layout::{Q4KX4_BLOCK_BYTES, Q4KX4_ROWS, Q5KX4_BLOCK_BYTES, QK, QK_K};
use crate::ShapeError;
use std::vec;
use std::vec::Vec;

#[cfg(target_arch = "aarch64")]
use crate::aarch64 as arch;
#[cfg(target_arch = "x86_64")]
use crate::x86_64 as arch;

/// A Q4_Kx4 weight: super-block `s` holds byte `(s + 37 p + off) mod 256`
/// at position `p` (so 256 consecutive super-blocks show every value at
/// every position), then the 8 f16 `d`/`dmin` replaced by finite values.
fn weight(rng: &mut Rng, rows: usize, cols: usize, bb: usize) -> Vec<u8> {
    let nsb = rows.div_ceil(Q4KX4_ROWS) * cols / QK_K;
    let off = rng.next() as usize;
    let mut w = vec![0u8; nsb * bb];
    for (s, sb) in w.chunks_exact_mut(bb).enumerate() {
        for (p, b) in sb.iter_mut().enumerate() {
            *b = (s + 37 * p + off) as u8;
        }
        for k in 0..2 * Q4KX4_ROWS {
            let h = rng.normal_f16();
            sb[2 * k..2 * k + 2].copy_from_slice(&h);
        }
    }
    w
}

/// Q8_K activations: random quants (-128 included), full-precision scales,
/// the sums of each 32 quants.
fn acts(rng: &mut Rng, m: usize, cols: usize) -> (Vec<i8>, Vec<f32>, Vec<i16>) {
    let qs: Vec<i8> = (0..m * cols).map(|_| rng.next() as i8).collect();
    let d = (0..m * cols / QK_K)
        .map(|_| rng.float(0.05) + 0.06)
        .collect();
    let sums = qs
        .chunks_exact(QK)
        .map(|c| c.iter().map(|&q| q as i16).sum())
        .collect();
    (qs, d, sums)
}

fn check(cpu: arch::Cpu, rng: &mut Rng, rows: usize, cols: usize, m: usize) {
    check_layout(cpu, rng, rows, cols, m, false);
    check_layout(cpu, rng, rows, cols, m, true);
}

type GemmG =
    fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Result<(), ShapeError>;
type GemmA = fn(
    arch::Cpu,
    &[u8],
    usize,
    usize,
    &[i8],
    &[f32],
    &[i16],
    usize,
    &mut [f32],
) -> Result<(), ShapeError>;
type GemvA =
    fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &[i16], &mut [f32]) -> Result<(), ShapeError>;

/// Q4_Kx4 (`q5` false) or Q5_Kx4, GEMM and GEMV, against generic.
fn check_layout(cpu: arch::Cpu, rng: &mut Rng, rows: usize, cols: usize, m: usize, q5: bool) {
    let bb = if q5 {
        Q5KX4_BLOCK_BYTES
    } else {
        Q4KX4_BLOCK_BYTES
    };
    let w = weight(rng, rows, cols, bb);
    let (qs, d, sums) = acts(rng, m, cols);
    let (gemm_g, gemm_a, gemv_a): (GemmG, GemmA, GemvA) = if q5 {
        (
            generic::gemm_q5_kx4_q8_k,
            arch::gemm_q5_kx4_q8_k,
            arch::gemv_q5_kx4_q8_k,
        )
    } else {
        (
            generic::gemm_q4_kx4_q8_k,
            arch::gemm_q4_kx4_q8_k,
            arch::gemv_q4_kx4_q8_k,
        )
    };
    let what = if q5 { "q5_k" } else { "q4_k" };
    let mut want = vec![0f32; m * rows];
    gemm_g(&w, rows, cols, &qs, &d, &sums, m, &mut want).unwrap();
    let mut got = vec![f32::NAN; m * rows];
    gemm_a(cpu, &w, rows, cols, &qs, &d, &sums, m, &mut got).unwrap();
    let msg = std::format!("{what} gemm rows {rows} cols {cols} m {m}");
    assert_same(&got, &want, &msg);
    if m == 1 {
        let mut got = vec![f32::NAN; rows];
        gemv_a(cpu, &w, rows, cols, &qs, &d, &sums, &mut got).unwrap();
        assert_same(
            &got,
            &want,
            &std::format!("{what} gemv rows {rows} cols {cols}"),
        );
    }
}

#[test]
fn gemm_q4_kx4_matches_generic() {
    for cpu in cpus() {
        let mut rng = Rng(21);
        for rows in [1, 2, 3, 4, 5, 7, 8, 9, 13, 17] {
            for cols in [256, 512, 1536] {
                for m in 1..=7 {
                    check(cpu, &mut rng, rows, cols, m);
                }
            }
        }
    }
}

/// Batches past the x86 GEMM's per-call pattern tables (20 rows of 1,536
/// columns) and the 512-bit tile's calls (64 rows): whole and partial
/// calls; and rows wider than the tables (392 blocks of 32), which form the
/// patterns in the tile.
#[test]
fn gemm_k_batches_past_the_tables_and_wide_rows() {
    for cpu in cpus() {
        let mut rng = Rng(25);
        for m in [21, 45, 70] {
            check(cpu, &mut rng, 9, 1536, m);
        }
        // Several 16-row units (the last one partial) with whole 8-row
        // tiles of the 512-bit tile, and a partial one.
        check(cpu, &mut rng, 33, 512, 8);
        check(cpu, &mut rng, 33, 256, 17);
        check(cpu, &mut rng, 5, 49 * QK_K, 5);
    }
}

#[test]
fn gemm_q4_kx4_every_byte_in_every_position() {
    for cpu in cpus() {
        let mut rng = Rng(22);
        // 16 groups x 16 super-blocks = 256 consecutive super-blocks.
        check(cpu, &mut rng, 64, 16 * QK_K, 1);
        // 4 rows: with AVX512-VNNI the Q5_K one-stream tile.
        check(cpu, &mut rng, 63, 16 * QK_K, 4);
        check(cpu, &mut rng, 63, 16 * QK_K, 5);
    }
}

/// Every f16 bit pattern as `d` / `dmin` (subnormals, zeros, 65504,
/// infinities, NaNs): the same bits, or NaN on both sides.
#[test]
fn gemm_k_any_f16_scales() {
    for cpu in cpus() {
        let mut rng = Rng(24);
        for q5 in [false, true] {
            let bb = if q5 {
                Q5KX4_BLOCK_BYTES
            } else {
                Q4KX4_BLOCK_BYTES
            };
            let (rows, cols, m) = (8, 4 * QK_K, 5);
            for pass in 0..16u32 {
                let mut w = weight(&mut rng, rows, cols, bb);
                for (k, sb) in w.chunks_exact_mut(bb).enumerate() {
                    for h in 0..2 * Q4KX4_ROWS {
                        // Passes 0-7 sweep the non-negative patterns in
                        // steps of 64 (random low bits), 8-15 random ones.
                        let bits = if pass < 8 {
                            ((pass as usize * 8 + k) * 8 + h) as u32 * 64 + (rng.next() & 63)
                        } else {
                            rng.next()
                        };
                        sb[2 * h..2 * h + 2].copy_from_slice(&(bits as u16).to_le_bytes());
                    }
                }
                let (qs, d, sums) = acts(&mut rng, m, cols);
                let mut want = vec![0f32; m * rows];
                let mut got = vec![0f32; m * rows];
                let mut gv = vec![0f32; rows];
                let (q1, d1, s1) = (&qs[..cols], &d[..cols / QK_K], &sums[..cols / QK]);
                if q5 {
                    generic::gemm_q5_kx4_q8_k(&w, rows, cols, &qs, &d, &sums, m, &mut want)
                        .unwrap();
                    arch::gemm_q5_kx4_q8_k(cpu, &w, rows, cols, &qs, &d, &sums, m, &mut got)
                        .unwrap();
                    arch::gemv_q5_kx4_q8_k(cpu, &w, rows, cols, q1, d1, s1, &mut gv).unwrap();
                } else {
                    generic::gemm_q4_kx4_q8_k(&w, rows, cols, &qs, &d, &sums, m, &mut want)
                        .unwrap();
                    arch::gemm_q4_kx4_q8_k(cpu, &w, rows, cols, &qs, &d, &sums, m, &mut got)
                        .unwrap();
                    arch::gemv_q4_kx4_q8_k(cpu, &w, rows, cols, q1, d1, s1, &mut gv).unwrap();
                }
                assert_same(&got, &want, &std::format!("q5 {q5} pass {pass} gemm"));
                assert_same(
                    &gv,
                    &want[..rows],
                    &std::format!("q5 {q5} pass {pass} gemv"),
                );
            }
        }
    }
}

#[test]
fn gemm_q4_kx4_shape_errors() {
    let Some(cpu) = cpu() else { return };
    let w = vec![0u8; Q4KX4_BLOCK_BYTES];
    let (qs, d, s) = (vec![0i8; 256], vec![1f32; 1], vec![0i16; 8]);
    let mut out = [0f32; 8];
    let cases: [(usize, usize, usize, usize, usize, usize); 5] = [
        (4, 255, 256, 1, 8, 4),
        (5, 256, 256, 1, 8, 5),
        (4, 256, 255, 1, 8, 4),
        (4, 256, 256, 1, 7, 4),
        (4, 256, 256, 1, 8, 3),
    ];
    type Gemm = fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> R;
    type Arch = fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> R;
    type ArchGemv = fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &[i16], &mut [f32]) -> R;
    type R = Result<(), ShapeError>;
    let w5 = vec![0u8; Q5KX4_BLOCK_BYTES];
    let layouts: [(&[u8], Gemm, Arch, ArchGemv); 2] = [
        (
            &w,
            generic::gemm_q4_kx4_q8_k,
            arch::gemm_q4_kx4_q8_k,
            arch::gemv_q4_kx4_q8_k,
        ),
        (
            &w5,
            generic::gemm_q5_kx4_q8_k,
            arch::gemm_q5_kx4_q8_k,
            arch::gemv_q5_kx4_q8_k,
        ),
    ];
    for (w, reference, gemm, gemv) in layouts {
        for (rows, cols, nq, nd, ns, no) in cases {
            let (qs, d, s) = (&qs[..nq], &d[..nd], &s[..ns]);
            let e = reference(w, rows, cols, qs, d, s, 1, &mut out[..no]);
            assert!(e.is_err());
            assert_eq!(gemm(cpu, w, rows, cols, qs, d, s, 1, &mut out[..no]), e);
            assert_eq!(gemv(cpu, w, rows, cols, qs, d, s, &mut out[..no]), e);
        }
    }
    assert!(arch::gemm_q5_kx4_q8_k(
        cpu,
        &w[..Q4KX4_BLOCK_BYTES],
        4,
        256,
        &qs,
        &d,
        &s,
        1,
        &mut out[..4]
    )
    .is_err());
    // Zero columns and zero activation rows are accepted.
    assert!(arch::gemm_q4_kx4_q8_k(cpu, &[], 4, 0, &[], &[], &[], 1, &mut out[..4]).is_ok());
    assert!(arch::gemm_q4_kx4_q8_k(cpu, &w, 4, 256, &[], &[], &[], 0, &mut []).is_ok());
}

#[test]
fn quantize_acts_q8_k_matches_generic() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(23);
    let special = SPECIAL;
    for blocks in [0, 1, 3, 5] {
        for kind in 0..8 {
            let x: Vec<f32> = (0..blocks * QK_K)
                .map(|i| match kind {
                    0 => rng.float(3.0),
                    1 => special[i % special.len()],
                    // Exact halves after scaling: max 127, values k + 0.5.
                    2 if i % QK_K == 0 => 127.0,
                    2 => (i % 255) as f32 - 127.0 + 0.5,
                    3 if i % 7 == 0 => special[(i / 7) % special.len()],
                    3 => rng.float(1e-3),
                    // Whole blocks of zeros, NaNs, infinities.
                    4 => [0.0, f32::NAN, f32::INFINITY, -0.0, f32::NEG_INFINITY][(i / QK_K) % 5],
                    // One NaN or infinity in an otherwise ordinary block.
                    5 if i % QK_K == 100 => [f32::NAN, f32::INFINITY, -1.0][(i / QK_K) % 3],
                    5 => rng.float(2.0),
                    // Subnormal blocks.
                    6 => rng.float(1e-38),
                    // Random bits, either sign; NaNs quieted (a signalling
                    // NaN restarts the scalar fold's maximum, see
                    // aarch64::quantize_acts_q8_0).
                    _ => {
                        let v = f32::from_bits(rng.next() ^ (rng.next() << 31));
                        if v.is_nan() {
                            f32::from_bits(v.to_bits() | 0x0040_0000)
                        } else {
                            v
                        }
                    }
                })
                .collect();
            let n = x.len();
            let (mut q0, mut d0, mut s0) = (vec![0i8; n], vec![0f32; n / QK_K], vec![0i16; n / QK]);
            let (mut q1, mut d1, mut s1) = (vec![1i8; n], vec![1f32; n / QK_K], vec![1i16; n / QK]);
            generic::quantize_acts_q8_k(&x, &mut q0, &mut d0, &mut s0).unwrap();
            arch::quantize_acts_q8_k(cpu, &x, &mut q1, &mut d1, &mut s1).unwrap();
            assert_eq!(q1, q0, "quants, {blocks} blocks, kind {kind}");
            assert_same(&d1, &d0, "scales");
            assert_eq!(s1, s0, "sums, {blocks} blocks, kind {kind}");
        }
    }
    let x = [0.5f32; 512];
    let (mut q, mut d, mut s) = ([0i8; 512], [0f32; 2], [0i16; 16]);
    for (nx, nq, nd, ns) in [
        (384, 384, 1, 12),
        (256, 255, 1, 8),
        (256, 256, 2, 8),
        (256, 256, 1, 9),
    ] {
        let e = generic::quantize_acts_q8_k(&x[..nx], &mut q[..nq], &mut d[..nd], &mut s[..ns]);
        assert!(e.is_err());
        let got = arch::quantize_acts_q8_k(cpu, &x[..nx], &mut q[..nq], &mut d[..nd], &mut s[..ns]);
        assert_eq!(got, e);
    }
}

/// A fixed workload for counting executed instructions per kernel under
/// qemu's insncount plugin (docs/kernels.md): 64 rows x 1024 columns, the
/// GEMV once and the GEMM with 4 activation rows once, for both layouts,
/// and the Q8_K quantizer on 4096 values. Checks nothing but the shapes.
#[test]
#[ignore = "bench/insncount.sh's workload, not a check"]
fn insncount_workload() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(31);
    let (rows, cols) = (64, 1024);
    let (qs, d, s) = acts(&mut rng, 4, cols);
    let w4 = weight(&mut rng, rows, cols, Q4KX4_BLOCK_BYTES);
    let w5 = weight(&mut rng, rows, cols, Q5KX4_BLOCK_BYTES);
    let mut out = vec![0f32; 4 * rows];
    let (q1, d1, s1) = (&qs[..cols], &d[..cols / QK_K], &s[..cols / QK]);
    arch::gemv_q4_kx4_q8_k(cpu, &w4, rows, cols, q1, d1, s1, &mut out[..rows]).unwrap();
    arch::gemm_q4_kx4_q8_k(cpu, &w4, rows, cols, &qs, &d, &s, 4, &mut out).unwrap();
    arch::gemv_q5_kx4_q8_k(cpu, &w5, rows, cols, q1, d1, s1, &mut out[..rows]).unwrap();
    arch::gemm_q5_kx4_q8_k(cpu, &w5, rows, cols, &qs, &d, &s, 4, &mut out).unwrap();
    let x: Vec<f32> = (0..4096).map(|_| rng.float(2.0)).collect();
    let (mut q, mut dd, mut ss) = (vec![0i8; 4096], vec![0f32; 16], vec![0i16; 128]);
    arch::quantize_acts_q8_k(cpu, &x, &mut q, &mut dd, &mut ss).unwrap();
}
