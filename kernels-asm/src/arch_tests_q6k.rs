//! The architecture's Q6_Kx8 and Q3_Kx8 kernels against [`crate::generic`], bit for
//! bit (f32 bits; NaN only where both are NaN): rows that do not fill a
//! group, 1..9 super-blocks per row, 1..7 activation rows, every byte
//! value in every position of the weight bytes (the packed bytes are a
//! permutation of the GGUF bits, so this covers every GGUF byte too),
//! activation quants with and without -128, shape errors.

use crate::arch_tests::{assert_same, cpus, Rng};
use crate::generic;
use crate::layout::{Q3KX8_BLOCK_BYTES, Q6KX8_BLOCK_BYTES, Q6KX8_ROWS, QK, QK_K};
use crate::ShapeError;
use std::vec;
use std::vec::Vec;

#[cfg(target_arch = "aarch64")]
use crate::aarch64 as arch;
#[cfg(target_arch = "x86_64")]
use crate::x86_64 as arch;

type Gemm = fn(
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
type Gemv =
    fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &[i16], &mut [f32]) -> Result<(), ShapeError>;
type Generic =
    fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Result<(), ShapeError>;

/// One 8-row K layout's super-block bytes, kernels and name.
#[derive(Clone, Copy)]
struct K8 {
    bytes: usize,
    gemm: Gemm,
    gemv: Gemv,
    generic: Generic,
    name: &'static str,
}

/// The layouts under test.
const LAYOUTS: [K8; 2] = [
    K8 {
        bytes: Q6KX8_BLOCK_BYTES,
        gemm: arch::gemm_q6_kx8_q8_k,
        gemv: arch::gemv_q6_kx8_q8_k,
        generic: generic::gemm_q6_kx8_q8_k,
        name: "q6_kx8",
    },
    K8 {
        bytes: Q3KX8_BLOCK_BYTES,
        gemm: arch::gemm_q3_kx8_q8_k,
        gemv: arch::gemv_q3_kx8_q8_k,
        generic: generic::gemm_q3_kx8_q8_k,
        name: "q3_kx8",
    },
];

/// A weight of `rows x cols` in `k`'s layout: byte `p` of super-block `n` is `n +
/// 167 p + off` for the first 256 super-blocks of the stream `sweep` counts
/// (every value in every position over 256 of them), random after; with
/// `finite_d` the rows' `d` are then made finite.
fn weight(
    k: K8,
    rng: &mut Rng,
    (rows, cols): (usize, usize),
    sweep: &mut usize,
    finite_d: bool,
) -> Vec<u8> {
    let blocks = rows.div_ceil(Q6KX8_ROWS) * cols / QK_K;
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
            for r in 0..Q6KX8_ROWS {
                let d = rng.d_f16();
                sb[2 * r..2 * r + 2].copy_from_slice(&d);
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

fn check(k: K8, cpu: arch::Cpu, (rows, cols, m): (usize, usize, usize), w: &[u8], rng: &mut Rng) {
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
fn gemm_k8_matches_generic() {
    for (cpu, k) in cpus().into_iter().flat_map(|c| LAYOUTS.map(|k| (c, k))) {
        let mut rng = Rng(6);
        let mut sweep = 256; // random bytes, finite d
        for rows in [1, 3, 7, 8, 9, 15, 16, 17, 23] {
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
        // tables (12,544 columns: the AVX2 tiles).
        for (rows, cols, m) in [
            (5, 2304, 9),
            (11, 2304, 13),
            (17, 1536, 40),
            (3, 12_288, 33),
            (9, 12_544, 5),
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
fn gemm_k8_every_byte() {
    for (cpu, k) in cpus().into_iter().flat_map(|c| LAYOUTS.map(|k| (c, k))) {
        let mut rng = Rng(7);
        for finite_d in [false, true] {
            let mut sweep = 0;
            let (rows, cols) = (64, 32 * QK_K);
            let w = weight(k, &mut rng, (rows, cols), &mut sweep, finite_d);
            assert_eq!(sweep, 256);
            // 1 and 4 rows: the one-group tiles; 5: with AVX512-VNNI the
            // 512-bit tile.
            for m in [1, 4, 5] {
                check(k, cpu, (rows, cols, m), &w, &mut rng);
            }
        }
    }
}

/// Empty shapes and shape errors: the generic result, or the same error
/// with nothing written.
#[test]
fn gemm_k8_shapes() {
    for (cpu, k) in cpus().into_iter().flat_map(|c| LAYOUTS.map(|k| (c, k))) {
        shapes(k, cpu);
    }
}

fn shapes(k: K8, cpu: arch::Cpu) {
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
        (&w, rows + 4, cols, &qs, &d, &s, m),
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
