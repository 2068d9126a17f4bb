//! The architecture's K-quant kernels (Q4_Kx4, Q5_Kx4, Q6_Kx8, Q3_Kx8,
//! IQ4_XSx8, Q2_Kx8, IQ3_XXSx8,
//! IQ3_Sx8, IQ2_XXSx8, IQ2_XSx8, IQ2_Sx8) and
//! Q8_K activation quantizer against [`crate::generic`], bit for bit (f32
//! bits; NaN only where both are NaN): rows that do not fill a group, 1..49
//! super-blocks per row, 1..70 activation rows, every byte value in every
//! position of the weight bytes (the packed bytes are a permutation of the
//! GGUF bits, so this covers every GGUF byte too), every f16 pattern as a
//! scale, activation quants with and without -128, shape errors.

use crate::arch_tests::{assert_same, cpu, cpus, Rng, SPECIAL};
use crate::generic;
use crate::layout::{QK, QK_K};
use crate::layouts::q4k::{Q4KX4_BLOCK_BYTES, Q4KX4_ROWS};
use crate::layouts::q5k::Q5KX4_BLOCK_BYTES;
use crate::layouts::q6k::{Q6KX8_BLOCK_BYTES, Q6KX8_ROWS};
use crate::layouts::{iq2s, iq2xs, iq2xxs, iq3s, iq3xxs, iq4xs, q2k, q3k, q4k, q5k, q6k};
use crate::ShapeError;
use std::vec;
use std::vec::Vec;

#[cfg(target_arch = "aarch64")]
use crate::aarch64 as arch;
#[cfg(target_arch = "x86_64")]
use crate::x86_64 as arch;

type R = Result<(), ShapeError>;
type Gemm = fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> R;
type Gemv = fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &[i16], &mut [f32]) -> R;
type Generic = fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> R;

/// One K layout's group rows, super-block bytes, kernels and name (every
/// one begins with eight f16: `d` and `dmin` of 4 rows, or `d` of 8).
#[derive(Clone, Copy)]
struct KKernels {
    rows: usize,
    bytes: usize,
    gemm: Gemm,
    gemv: Gemv,
    generic: Generic,
    name: &'static str,
}

/// The layouts under test.
const LAYOUTS: [KKernels; 11] = [
    KKernels {
        rows: Q4KX4_ROWS,
        bytes: Q4KX4_BLOCK_BYTES,
        gemm: q4k::arch::gemm_q4_kx4_q8_k,
        gemv: q4k::arch::gemv_q4_kx4_q8_k,
        generic: q4k::generic::gemm_q4_kx4_q8_k,
        name: "q4_kx4",
    },
    KKernels {
        rows: Q4KX4_ROWS,
        bytes: Q5KX4_BLOCK_BYTES,
        gemm: q5k::arch::gemm_q5_kx4_q8_k,
        gemv: q5k::arch::gemv_q5_kx4_q8_k,
        generic: q5k::generic::gemm_q5_kx4_q8_k,
        name: "q5_kx4",
    },
    KKernels {
        rows: Q6KX8_ROWS,
        bytes: Q6KX8_BLOCK_BYTES,
        gemm: q6k::arch::gemm_q6_kx8_q8_k,
        gemv: q6k::arch::gemv_q6_kx8_q8_k,
        generic: q6k::generic::gemm_q6_kx8_q8_k,
        name: "q6_kx8",
    },
    KKernels {
        rows: q3k::Q3KX8_ROWS,
        bytes: q3k::Q3KX8_BLOCK_BYTES,
        gemm: q3k::arch::gemm_q3_kx8_q8_k,
        gemv: q3k::arch::gemv_q3_kx8_q8_k,
        generic: q3k::generic::gemm_q3_kx8_q8_k,
        name: "q3_kx8",
    },
    KKernels {
        rows: iq4xs::IQ4XSX8_ROWS,
        bytes: iq4xs::IQ4XSX8_BLOCK_BYTES,
        gemm: iq4xs::arch::gemm_iq4_xsx8_q8_k,
        gemv: iq4xs::arch::gemv_iq4_xsx8_q8_k,
        generic: iq4xs::generic::gemm_iq4_xsx8_q8_k,
        name: "iq4_xsx8",
    },
    KKernels {
        rows: q2k::Q2KX8_ROWS,
        bytes: q2k::Q2KX8_BLOCK_BYTES,
        gemm: q2k::arch::gemm_q2_kx8_q8_k,
        gemv: q2k::arch::gemv_q2_kx8_q8_k,
        generic: q2k::generic::gemm_q2_kx8_q8_k,
        name: "q2_kx8",
    },
    KKernels {
        rows: iq3xxs::IQ3XXSX8_ROWS,
        bytes: iq3xxs::IQ3XXSX8_BLOCK_BYTES,
        gemm: iq3xxs::arch::gemm_iq3_xxsx8_q8_k,
        gemv: iq3xxs::arch::gemv_iq3_xxsx8_q8_k,
        generic: iq3xxs::generic::gemm_iq3_xxsx8_q8_k,
        name: "iq3_xxsx8",
    },
    KKernels {
        rows: iq3s::IQ3SX8_ROWS,
        bytes: iq3s::IQ3SX8_BLOCK_BYTES,
        gemm: iq3s::arch::gemm_iq3_sx8_q8_k,
        gemv: iq3s::arch::gemv_iq3_sx8_q8_k,
        generic: iq3s::generic::gemm_iq3_sx8_q8_k,
        name: "iq3_sx8",
    },
    KKernels {
        rows: iq2xxs::IQ2XXSX8_ROWS,
        bytes: iq2xxs::IQ2XXSX8_BLOCK_BYTES,
        gemm: iq2xxs::arch::gemm_iq2_xxsx8_q8_k,
        gemv: iq2xxs::arch::gemv_iq2_xxsx8_q8_k,
        generic: iq2xxs::generic::gemm_iq2_xxsx8_q8_k,
        name: "iq2_xxsx8",
    },
    KKernels {
        rows: iq2xs::IQ2XSX8_ROWS,
        bytes: iq2xs::IQ2XSX8_BLOCK_BYTES,
        gemm: iq2xs::arch::gemm_iq2_xsx8_q8_k,
        gemv: iq2xs::arch::gemv_iq2_xsx8_q8_k,
        generic: iq2xs::generic::gemm_iq2_xsx8_q8_k,
        name: "iq2_xsx8",
    },
    KKernels {
        rows: iq2s::IQ2SX8_ROWS,
        bytes: iq2s::IQ2SX8_BLOCK_BYTES,
        gemm: iq2s::arch::gemm_iq2_sx8_q8_k,
        gemv: iq2s::arch::gemv_iq2_sx8_q8_k,
        generic: iq2s::generic::gemm_iq2_sx8_q8_k,
        name: "iq2_sx8",
    },
];

/// A weight of `rows x cols` in `k`'s layout: byte `p` of super-block `n` is `n +
/// 167 p + off` for the first 256 super-blocks of the stream `sweep` counts
/// (every value in every position over 256 of them), random after; with
/// `finite_d` the rows' `d` are then made finite.
fn weight(
    k: KKernels,
    rng: &mut Rng,
    (rows, cols): (usize, usize),
    sweep: &mut usize,
    finite_d: bool,
) -> Vec<u8> {
    let blocks = rows.div_ceil(k.rows) * cols / QK_K;
    let mut w = vec![0u8; blocks * k.bytes];
    let off = rng.next() as usize;
    for sb in w.chunks_exact_mut(k.bytes) {
        let n = *sweep;
        *sweep += 1;
        for (p, b) in sb.iter_mut().enumerate() {
            *b = if n < 256 {
                n.wrapping_add(p.wrapping_mul(167)).wrapping_add(off) as u8
            } else {
                rng.next() as u8
            };
        }
        if finite_d {
            for h in 0..8 {
                let d = rng.d_f16();
                sb[2 * h..2 * h + 2].copy_from_slice(&d);
            }
        }
    }
    w
}

/// Activation quants (every value, or -127..=127 only), scales and sums.
fn acts(rng: &mut Rng, m: usize, cols: usize, with_min: bool) -> (Vec<i8>, Vec<f32>, Vec<i16>) {
    let off = rng.next() as usize;
    let mut qs: Vec<i8> = (0..m * cols)
        .map(|i| {
            if i < 256 {
                (i.wrapping_mul(167).wrapping_add(off)) as u8 as i8
            } else {
                rng.next() as u8 as i8
            }
        })
        .collect();
    if !with_min {
        for q in &mut qs {
            if *q == i8::MIN {
                *q = -127;
            }
        }
    }
    let d = (0..m * cols / QK_K)
        .map(|_| rng.float(0.05) + 0.06)
        .collect();
    let sums = qs
        .chunks_exact(QK)
        .map(|c| c.iter().map(|&v| v as i16).sum())
        .collect();
    (qs, d, sums)
}

fn check(
    k: KKernels,
    cpu: arch::Cpu,
    (rows, cols, m): (usize, usize, usize),
    w: &[u8],
    rng: &mut Rng,
) {
    for with_min in [false, true] {
        let (qs, d, sums) = acts(rng, m, cols, with_min);
        let mut want = vec![f32::NAN; m * rows];
        (k.generic)(w, rows, cols, &qs, &d, &sums, m, &mut want).unwrap();
        let mut got = vec![f32::NAN; m * rows];
        (k.gemm)(cpu, w, rows, cols, &qs, &d, &sums, m, &mut got).unwrap();
        let what = std::format!("{} rows {rows} cols {cols} m {m} -128 {with_min}", k.name);
        assert_same(&got, &want, &what);
        if m == 1 {
            let mut got = vec![f32::NAN; rows];
            (k.gemv)(cpu, w, rows, cols, &qs, &d, &sums, &mut got).unwrap();
            assert_same(&got, &want, &what);
        }
    }
}

#[test]
fn gemm_k_matches_generic() {
    for (cpu, k) in cpus().into_iter().flat_map(|c| LAYOUTS.map(|k| (c, k))) {
        let mut rng = Rng(6);
        let mut sweep = 256; // random bytes, finite d
        for rows in [1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 23] {
            for cols in [256, 512, 1536] {
                let w = weight(k, &mut rng, (rows, cols), &mut sweep, true);
                for m in 1..=7 {
                    check(k, cpu, (rows, cols, m), &w, &mut rng);
                }
            }
        }
        // 9 rows in one batch of the VNNI tiles' tables, 13 in two (12 + 1),
        // 40 and 33 past the 512-bit tile's calls of 32 (the widest rows
        // its table takes: 12,288 columns), and rows too wide for the
        // tables (12,544 columns: the AVX2 tiles); batches past the x86
        // K GEMM's pattern tables (21 rows of 1,536 columns) and its
        // 512-bit tile's calls (64 rows); several 16-row units (the last
        // one partial) with whole and partial 8-row tiles; 131 rows past the
        // x86 codebook prompt GEMM's calls of 128.
        for (rows, cols, m) in [
            (5, 2304, 9),
            (11, 2304, 13),
            (17, 1536, 40),
            (3, 12_288, 33),
            (9, 12_544, 5),
            (9, 1536, 21),
            (9, 1536, 70),
            (33, 512, 8),
            (33, 256, 17),
            (9, 256, 131),
        ] {
            let w = weight(k, &mut rng, (rows, cols), &mut sweep, true);
            check(k, cpu, (rows, cols, m), &w, &mut rng);
        }
    }
}

/// Every byte value in every position of the weight bytes, `d` included
/// (infinities and NaNs: compared as NaN where both are NaN), then the
/// same bytes with finite `d`.
#[test]
fn gemm_k_every_byte() {
    for (cpu, k) in cpus().into_iter().flat_map(|c| LAYOUTS.map(|k| (c, k))) {
        let mut rng = Rng(7);
        for finite_d in [false, true] {
            let mut sweep = 0;
            let (rows, cols) = (64, 32 * QK_K);
            let w = weight(k, &mut rng, (rows, cols), &mut sweep, finite_d);
            assert!(sweep >= 256);
            // 1 and 4 rows: the one-group tiles; 5: with AVX512-VNNI the
            // 512-bit tile.
            for m in [1, 4, 5] {
                check(k, cpu, (rows, cols, m), &w, &mut rng);
            }
        }
    }
}

/// Every f16 bit pattern as the eight leading scales (`d`, `dmin`:
/// subnormals, zeros, 65504, infinities, NaNs): the same bits, or NaN on
/// both sides.
#[test]
fn gemm_k_any_f16_scales() {
    for (cpu, k) in cpus().into_iter().flat_map(|c| LAYOUTS.map(|k| (c, k))) {
        let mut rng = Rng(24);
        let (rows, cols, m) = (8, 4 * QK_K, 5);
        for pass in 0..16u32 {
            let mut w = weight(k, &mut rng, (rows, cols), &mut 256, true);
            for (b, sb) in w.chunks_exact_mut(k.bytes).enumerate() {
                for h in 0..8 {
                    // Passes 0-7 sweep the non-negative patterns in steps
                    // of 64 (random low bits), 8-15 random ones.
                    let bits = if pass < 8 {
                        ((pass as usize * 8 + b) * 8 + h) as u32 * 64 + (rng.next() & 63)
                    } else {
                        rng.next()
                    };
                    sb[2 * h..2 * h + 2].copy_from_slice(&(bits as u16).to_le_bytes());
                }
            }
            check(k, cpu, (rows, cols, m), &w, &mut rng);
            check(k, cpu, (rows, cols, 1), &w, &mut rng);
        }
    }
}

/// Empty shapes and shape errors: the generic result, or the same error
/// with nothing written.
#[test]
fn gemm_k_shapes() {
    for (cpu, k) in cpus().into_iter().flat_map(|c| LAYOUTS.map(|k| (c, k))) {
        shapes(k, cpu);
    }
}

fn shapes(k: KKernels, cpu: arch::Cpu) {
    let mut rng = Rng(8);
    let mut sweep = 256;
    for (rows, cols, m) in [(0, 256, 2), (5, 256, 0), (5, 0, 3), (0, 0, 1)] {
        let w = weight(k, &mut rng, (rows, cols), &mut sweep, true);
        let (qs, d, s) = acts(&mut rng, m, cols, false);
        let mut want = vec![f32::NAN; m * rows];
        (k.generic)(&w, rows, cols, &qs, &d, &s, m, &mut want).unwrap();
        let mut got = vec![f32::NAN; m * rows];
        (k.gemm)(cpu, &w, rows, cols, &qs, &d, &s, m, &mut got).unwrap();
        assert_same(&got, &want, "empty");
    }
    let (rows, cols, m) = (5, 512, 2);
    let w = weight(k, &mut rng, (rows, cols), &mut sweep, true);
    let (qs, d, s) = acts(&mut rng, m, cols, false);
    type Args<'a> = (
        &'a [u8],
        usize,
        usize,
        &'a [i8],
        &'a [f32],
        &'a [i16],
        usize,
    );
    let cases: [Args; 7] = [
        (&w[1..], rows, cols, &qs, &d, &s, m),
        (&w, rows, cols, &qs[32..], &d, &s, m),
        (&w, rows, cols, &qs, &d[1..], &s, m),
        (&w, rows, cols, &qs, &d, &s[1..], m),
        (&w, rows, cols + 32, &qs, &d, &s, m),
        (&w, rows, cols, &qs, &d, &s, m + 1),
        (&w, rows + k.rows, cols, &qs, &d, &s, m),
    ];
    for (w, rows, cols, qs, d, s, m) in cases {
        let mut want = vec![f32::NAN; 2 * rows];
        let mut got = vec![f32::NAN; 2 * rows];
        let e: ShapeError = (k.generic)(w, rows, cols, qs, d, s, m, &mut want).unwrap_err();
        assert_eq!((k.gemm)(cpu, w, rows, cols, qs, d, s, m, &mut got), Err(e));
        assert!(got.iter().all(|v| v.is_nan()), "written on error");
        if m == 1 {
            assert_eq!((k.gemv)(cpu, w, rows, cols, qs, d, s, &mut got), Err(e));
        }
    }
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
    let (qs, d, s) = acts(&mut rng, 4, cols, true);
    let w4 = weight(LAYOUTS[0], &mut rng, (rows, cols), &mut 256, true);
    let w5 = weight(LAYOUTS[1], &mut rng, (rows, cols), &mut 256, true);
    let mut out = vec![0f32; 4 * rows];
    let (q1, d1, s1) = (&qs[..cols], &d[..cols / QK_K], &s[..cols / QK]);
    q4k::arch::gemv_q4_kx4_q8_k(cpu, &w4, rows, cols, q1, d1, s1, &mut out[..rows]).unwrap();
    q4k::arch::gemm_q4_kx4_q8_k(cpu, &w4, rows, cols, &qs, &d, &s, 4, &mut out).unwrap();
    q5k::arch::gemv_q5_kx4_q8_k(cpu, &w5, rows, cols, q1, d1, s1, &mut out[..rows]).unwrap();
    q5k::arch::gemm_q5_kx4_q8_k(cpu, &w5, rows, cols, &qs, &d, &s, 4, &mut out).unwrap();
    let x: Vec<f32> = (0..4096).map(|_| rng.float(2.0)).collect();
    let (mut q, mut dd, mut ss) = (vec![0i8; 4096], vec![0f32; 16], vec![0i16; 128]);
    arch::quantize_acts_q8_k(cpu, &x, &mut q, &mut dd, &mut ss).unwrap();
}
