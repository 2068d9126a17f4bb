//! The Q5 architecture kernels of this build against [`crate::generic`],
//! bit for bit (as `arch_tests`): rows that do not fill a group, several
//! widths, 1..=9 activation rows, quant bytes where every byte value occurs
//! in every position, and raw scale bits (infinities and NaN included).

use crate::arch_tests::{
    assert_same, check_shape_errors, cpus, GemmFn, GemvFn, GenericGemmFn, Rng,
};
use crate::generic;
use crate::layout::{Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_1X4_BLOCK_BYTES, QK};
use std::vec;
use std::vec::Vec;

#[cfg(target_arch = "aarch64")]
use crate::aarch64 as arch;
#[cfg(target_arch = "x86_64")]
use crate::x86_64 as arch;

/// A repacked weight of `block_bytes` super-blocks whose first `f16s` f16
/// fields are scales (or minimums: normal, or with `raw` any bits) and
/// whose other bytes are random, or with `sweep` `(s * 167 + i * 71 + off)
/// mod 256` at byte `i` of super-block `s`: over 256 super-blocks every
/// byte value then occurs in every quant position (167 is odd).
fn weight(
    rng: &mut Rng,
    (block_bytes, f16s): (usize, usize),
    rows: usize,
    cols: usize,
    (raw, sweep): (bool, bool),
) -> Vec<u8> {
    let blocks = rows.div_ceil(Q5X4_ROWS) * cols / QK;
    let off = rng.next() as usize;
    let mut w = vec![0u8; blocks * block_bytes];
    for (s, sb) in w.chunks_exact_mut(block_bytes).enumerate() {
        for (i, b) in sb.iter_mut().enumerate() {
            *b = if sweep {
                (s.wrapping_mul(167) + i * 71 + off) as u8
            } else {
                rng.next() as u8
            };
        }
        for f in 0..f16s {
            let v = rng.f16_or_raw(raw);
            sb[2 * f..2 * f + 2].copy_from_slice(&v);
        }
    }
    w
}

/// Activation quants (every value, -128 included) and f32 scales.
fn acts(rng: &mut Rng, m: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
    let off = rng.next() as usize;
    let qs = (0..m * cols)
        .map(|i| {
            if i < 256 {
                (i.wrapping_mul(167).wrapping_add(off)) as u8 as i8
            } else {
                rng.next() as u8 as i8
            }
        })
        .collect();
    // Full f32 precision: every product rounds, so any other order of the
    // operations shows.
    let d = (0..m * cols / QK).map(|_| rng.float(0.05) + 0.06).collect();
    (qs, d)
}
fn check(
    cpu: arch::Cpu,
    layout: (usize, usize),
    (fast, gemv, reference): (GemmFn, GemvFn, GenericGemmFn),
    name: &str,
) {
    let mut rng = Rng(layout.0 as u64);
    for raw in [false, true] {
        for rows in [1, 3, 4, 5, 8, 9, 13, 17, 24] {
            // 65 and 66 blocks: past the x86 GEMV's expanded activations (64).
            for cols in [32, 64, 96, 896, 65 * 32, 66 * 32] {
                let w = weight(&mut rng, layout, rows, cols, (raw, false));
                for m in 1..=9 {
                    let (qs, d) = acts(&mut rng, m, cols);
                    let mut want = vec![f32::NAN; m * rows];
                    reference(&w, rows, cols, &qs, &d, m, &mut want).unwrap();
                    let mut got = vec![f32::NAN; m * rows];
                    fast(cpu, &w, rows, cols, &qs, &d, m, &mut got).unwrap();
                    let what = std::format!("{name} rows {rows} cols {cols} m {m} raw {raw}");
                    assert_same(&got, &want, &what);
                    if m == 1 {
                        let mut got = vec![f32::NAN; rows];
                        gemv(cpu, &w, rows, cols, &qs, &d, &mut got).unwrap();
                        assert_same(&got, &want, &what);
                    }
                }
            }
        }
    }
    // One GEMM of `m` fresh activation rows against `w`, fast against
    // the reference.
    let gemm = |rng: &mut Rng, w: &[u8], rows: usize, cols: usize, m: usize| {
        let (qs, d) = acts(rng, m, cols);
        let mut want = vec![f32::NAN; m * rows];
        reference(w, rows, cols, &qs, &d, m, &mut want).unwrap();
        let mut got = vec![f32::NAN; m * rows];
        fast(cpu, w, rows, cols, &qs, &d, m, &mut got).unwrap();
        let what = std::format!("{name} rows {rows} cols {cols} m {m}");
        assert_same(&got, &want, &what);
    };
    // Every byte value in every quant position of a super-block: 256 groups.
    let (rows, cols) = (4 * 256, 32);
    let w = weight(&mut rng, layout, rows, cols, (false, true));
    for m in [1, 4, 5] {
        gemm(&mut rng, &w, rows, cols, m);
    }
    // Batches past the x86 GEMM's per-call tables (12 rows of 66 blocks):
    // whole and partial calls.
    let (rows, cols) = (9, 66 * QK);
    let w = weight(&mut rng, layout, rows, cols, (false, false));
    for m in [13, 25] {
        gemm(&mut rng, &w, rows, cols, m);
    }
    // The widest rows the tables and the x86 512-bit tile take (384
    // blocks), and a batch past that tile's calls of 64 rows.
    let (rows, cols) = (17, 384 * QK);
    let w = weight(&mut rng, layout, rows, cols, (false, false));
    gemm(&mut rng, &w, rows, cols, 9);
    let (rows, cols) = (9, 2 * QK);
    let w = weight(&mut rng, layout, rows, cols, (false, false));
    gemm(&mut rng, &w, rows, cols, 70);
    // Rows wider than the x86 GEMV's expanded activation row and the
    // GEMM's tables (385 blocks).
    let (rows, cols) = (5, 385 * QK);
    let w = weight(&mut rng, layout, rows, cols, (false, false));
    for m in [1, 2, 5] {
        gemm(&mut rng, &w, rows, cols, m);
    }
    // Empty shapes: no rows, no activation rows, no columns.
    for (rows, cols, m) in [(0, 32, 2), (5, 32, 0), (5, 0, 3), (0, 0, 1)] {
        let w = weight(&mut rng, layout, rows, cols, (false, false));
        gemm(&mut rng, &w, rows, cols, m);
    }
    // Shape errors: the same error as the generic code, nothing written.
    let (rows, cols, m) = (5, 64, 2);
    let w = weight(&mut rng, layout, rows, cols, (false, false));
    let (qs, d) = acts(&mut rng, m, cols);
    check_shape_errors(cpu, (fast, reference), (&w, rows, cols, &qs, &d, m), name);
}

#[test]
fn gemm_q5_0x4_matches_generic() {
    // The AVX2 tiles and, where the CPU has them, the VNNI ones.
    for cpu in cpus() {
        check(
            cpu,
            (Q5_0X4_BLOCK_BYTES, Q5X4_ROWS),
            (
                arch::gemm_q5_0x4_q8_0,
                arch::gemv_q5_0x4_q8_0,
                generic::gemm_q5_0x4_q8_0,
            ),
            "q5_0x4",
        );
    }
}

#[test]
fn gemm_q5_1x4_matches_generic() {
    // The AVX2 tiles and, where the CPU has them, the VNNI ones.
    for cpu in cpus() {
        check(
            cpu,
            (Q5_1X4_BLOCK_BYTES, 2 * Q5X4_ROWS),
            (
                arch::gemm_q5_1x4_q8_0,
                arch::gemv_q5_1x4_q8_0,
                generic::gemm_q5_1x4_q8_0,
            ),
            "q5_1x4",
        );
    }
}

/// The generic decoding of one super-block: plane bit set means fifth bit
/// clear, nibbles raw (the layout's definition, independent of the kernel).
#[test]
fn q5x4_value_follows_the_layout() {
    let mut quants = [0u8; 80];
    // Row 2, weight 4p + k = 4 * 5 + 3 = 23: the high nibble of chunk 1.
    quants[16 + 4 * 2 + 3] = 0xa0;
    assert_eq!(generic::q5x4_value(&quants, 2, 23), 10);
    quants[64 + 4 * 2 + 3] = 1 << 5;
    assert_eq!(generic::q5x4_value(&quants, 2, 23), 10 - 16);
    // Row 0, weight 1: low nibble of chunk 0, plane bit 0 of byte 1.
    quants[1] = 0x0f;
    assert_eq!(generic::q5x4_value(&quants, 0, 1), 15);
    quants[64 + 1] = 1;
    assert_eq!(generic::q5x4_value(&quants, 0, 1), -1);
    // All-zero bytes (padding) are q = 16: value 0.
    assert_eq!(generic::q5x4_value(&[0; 80], 3, 31), 0);
}
