//! The architecture's Q6_Kx8 kernels against [`crate::generic`], bit for
//! bit (f32 bits; NaN only where both are NaN): rows that do not fill a
//! group, 1..9 super-blocks per row, 1..7 activation rows, every byte
//! value in every position of the weight bytes (the packed bytes are a
//! permutation of the GGUF bits, so this covers every GGUF byte too),
//! activation quants with and without -128, shape errors.

use crate::arch_tests::{assert_same, cpus, Rng};
use crate::generic;
use crate::layout::{Q6KX8_BLOCK_BYTES, Q6KX8_ROWS, QK, QK_K};
use crate::ShapeError;
use std::vec;
use std::vec::Vec;

#[cfg(target_arch = "aarch64")]
use crate::aarch64 as arch;
#[cfg(target_arch = "x86_64")]
use crate::x86_64 as arch;

/// A Q6_Kx8 weight of `rows x cols`: byte `p` of super-block `n` is `n +
/// 167 p + off` for the first 256 super-blocks of the stream `sweep` counts
/// (every value in every position over 256 of them), random after; with
/// `finite_d` the rows' `d` are then made finite.
fn weight(rng: &mut Rng, rows: usize, cols: usize, sweep: &mut usize, finite_d: bool) -> Vec<u8> {
    let blocks = rows.div_ceil(Q6KX8_ROWS) * cols / QK_K;
    let mut w = vec![0u8; blocks * Q6KX8_BLOCK_BYTES];
    let off = rng.next() as usize;
    for sb in w.chunks_exact_mut(Q6KX8_BLOCK_BYTES) {
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

fn check(cpu: arch::Cpu, rows: usize, cols: usize, m: usize, w: &[u8], rng: &mut Rng) {
    for with_min in [false, true] {
        let (qs, d, sums) = acts(rng, m, cols, with_min);
        let mut want = vec![f32::NAN; m * rows];
        generic::gemm_q6_kx8_q8_k(w, rows, cols, &qs, &d, &sums, m, &mut want).unwrap();
        let mut got = vec![f32::NAN; m * rows];
        arch::gemm_q6_kx8_q8_k(cpu, w, rows, cols, &qs, &d, &sums, m, &mut got).unwrap();
        let what = std::format!("q6_kx8 rows {rows} cols {cols} m {m} -128 {with_min}");
        assert_same(&got, &want, &what);
        if m == 1 {
            let mut got = vec![f32::NAN; rows];
            arch::gemv_q6_kx8_q8_k(cpu, w, rows, cols, &qs, &d, &sums, &mut got).unwrap();
            assert_same(&got, &want, &what);
        }
    }
}

#[test]
fn gemm_q6_kx8_matches_generic() {
    for cpu in cpus() {
        let mut rng = Rng(6);
        let mut sweep = 256; // random bytes, finite d
        for rows in [1, 3, 7, 8, 9, 15, 16, 17, 23] {
            for cols in [256, 512, 1536] {
                let w = weight(&mut rng, rows, cols, &mut sweep, true);
                for m in 1..=7 {
                    check(cpu, rows, cols, m, &w, &mut rng);
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
            let w = weight(&mut rng, rows, cols, &mut sweep, true);
            check(cpu, rows, cols, m, &w, &mut rng);
        }
    }
}

/// Every byte value in every position of the weight bytes, `d` included
/// (infinities and NaNs: compared as NaN where both are NaN), then the
/// same bytes with finite `d`.
#[test]
fn gemm_q6_kx8_every_byte() {
    for cpu in cpus() {
        let mut rng = Rng(7);
        for finite_d in [false, true] {
            let mut sweep = 0;
            let (rows, cols) = (64, 32 * QK_K);
            let w = weight(&mut rng, rows, cols, &mut sweep, finite_d);
            assert_eq!(sweep, 256);
            // 1 and 4 rows: the one-group tiles; 5: with AVX512-VNNI the
            // 512-bit tile.
            for m in [1, 4, 5] {
                check(cpu, rows, cols, m, &w, &mut rng);
            }
        }
    }
}

/// Empty shapes and shape errors: the generic result, or the same error
/// with nothing written.
#[test]
fn gemm_q6_kx8_shapes() {
    for cpu in cpus() {
        shapes(cpu);
    }
}

fn shapes(cpu: arch::Cpu) {
    let mut rng = Rng(8);
    let mut sweep = 256;
    for (rows, cols, m) in [(0, 256, 2), (5, 256, 0), (5, 0, 3), (0, 0, 1)] {
        let w = weight(&mut rng, rows, cols, &mut sweep, true);
        let (qs, d, s) = acts(&mut rng, m, cols, false);
        let mut want = vec![f32::NAN; m * rows];
        generic::gemm_q6_kx8_q8_k(&w, rows, cols, &qs, &d, &s, m, &mut want).unwrap();
        let mut got = vec![f32::NAN; m * rows];
        arch::gemm_q6_kx8_q8_k(cpu, &w, rows, cols, &qs, &d, &s, m, &mut got).unwrap();
        assert_same(&got, &want, "empty");
    }
    let (rows, cols, m) = (5, 512, 2);
    let w = weight(&mut rng, rows, cols, &mut sweep, true);
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
        let e: ShapeError =
            generic::gemm_q6_kx8_q8_k(w, rows, cols, qs, d, s, m, &mut want).unwrap_err();
        assert_eq!(
            arch::gemm_q6_kx8_q8_k(cpu, w, rows, cols, qs, d, s, m, &mut got),
            Err(e)
        );
        assert!(got.iter().all(|v| v.is_nan()), "written on error");
        if m == 1 {
            assert_eq!(
                arch::gemv_q6_kx8_q8_k(cpu, w, rows, cols, qs, d, s, &mut got),
                Err(e)
            );
        }
    }
}
