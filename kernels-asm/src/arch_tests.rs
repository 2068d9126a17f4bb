//! The architecture kernels of this build against [`crate::generic`], bit
//! for bit: odd sizes and tails, every byte value of the quant bytes
//! (-128 included), shape errors. On a CPU without the token's features
//! (qemu's cortex-a53, an x86_64 without AVX2) only the detection is
//! checked, against `KESTREL_EXPECT_KERNELS` when the test runner sets it.

use crate::generic;
use crate::layout::{
    Q4X4_BLOCK_BYTES, Q4X4_ROWS, Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_1X4_BLOCK_BYTES,
    Q8X8_BLOCK_BYTES, Q8X8_ROWS, QK,
};
use crate::layouts::{iq4nl, q4_0, q5, q8_0};
use crate::ShapeError;
use std::format;
use std::vec;
use std::vec::Vec;

#[cfg(target_arch = "aarch64")]
use crate::aarch64 as arch;
#[cfg(target_arch = "x86_64")]
use crate::x86_64 as arch;

/// The token, when the CPU has its features; checks the expectation the
/// test scripts state (`aarch64-dotprod`, `x86_64-avx2` or `scalar`).
pub(crate) fn cpu() -> Option<arch::Cpu> {
    let cpu = arch::Cpu::detect();
    if let Ok(expect) = std::env::var("KESTREL_EXPECT_KERNELS") {
        if expect == "scalar" {
            // Forced scalar runs may still be on a CPU with the features:
            // only a runner that really lacks them must not detect them.
            if std::env::var("KESTREL_KERNELS").is_err() {
                assert!(cpu.is_none(), "a token was detected, expected none");
            }
        } else {
            assert!(cpu.is_some(), "expected the kernels {expect}");
        }
    }
    cpu
}

/// Every kernel set the token can select: on x86_64 with a VNNI form the
/// VNNI tiles and the AVX2 ones, and the AVX-VNNI tiles too where the CPU
/// has both AVX512-VNNI and AVX-VNNI.
pub(crate) fn variants(cpu: arch::Cpu) -> Vec<arch::Cpu> {
    #[cfg(target_arch = "x86_64")]
    if cpu.has_vnni() {
        let mut all = vec![cpu, cpu.without_vnni()];
        if cpu.vnni() != arch::Vnni::Avx {
            all.extend(cpu.with_avx_vnni());
        }
        return all;
    }
    vec![cpu]
}

/// The name of a kernel set the tests run (`avx2`, `avx-vnni`,
/// `avx512-vnni`; `dotprod`).
pub(crate) fn variant_name(cpu: arch::Cpu) -> &'static str {
    #[cfg(target_arch = "x86_64")]
    return match cpu.vnni() {
        arch::Vnni::No => "avx2",
        arch::Vnni::Avx => "avx-vnni",
        arch::Vnni::Avx512 => "avx512-vnni",
    };
    #[cfg(target_arch = "aarch64")]
    {
        let _ = cpu;
        "dotprod"
    }
}

/// Every kernel set of this architecture's tests.
const ALL_VARIANTS: &[&str] = if cfg!(target_arch = "x86_64") {
    &["avx2", "avx-vnni", "avx512-vnni"]
} else {
    &["dotprod"]
};

/// The kernel sets the bit-exact tests run on this CPU and those they
/// cannot, named (a run that covers less says so); the sets
/// `KESTREL_EXPECT_KERNELS` implies (scripts/test.sh sets it from the CPU's
/// flags: `x86_64-avx512vnni` the AVX2 and AVX512-VNNI tiles, and the
/// AVX-VNNI ones too in a build with `--cfg kestrel_avx_vnni_as_evex`;
/// `x86_64-avxvnni` the AVX2 and AVX-VNNI tiles; `x86_64-avx2` the AVX2
/// ones, `aarch64-dotprod`, `scalar` none) must all run, or the test fails;
/// with `KESTREL_EXPECT_AVX_VNNI=1` (a CPU with both VNNI forms) the
/// AVX-VNNI tiles must run as well.
#[test]
fn kernel_sets_run_and_skipped_are_named() {
    let run: Vec<&str> = cpus().into_iter().map(variant_name).collect();
    let skipped: Vec<&str> = ALL_VARIANTS
        .iter()
        .copied()
        .filter(|v| !run.contains(v))
        .collect();
    let encoding = if cfg!(kestrel_avx_vnni_as_evex) {
        " (the AVX-VNNI tiles in the EVEX encoding: --cfg kestrel_avx_vnni_as_evex)"
    } else {
        ""
    };
    std::println!("kernel sets tested: {run:?}; not on this CPU: {skipped:?}{encoding}");
    let Ok(expect) = std::env::var("KESTREL_EXPECT_KERNELS") else {
        return;
    };
    let needed: &[&str] = match expect.as_str() {
        "x86_64-avx512vnni" if cfg!(kestrel_avx_vnni_as_evex) => {
            &["avx2", "avx512-vnni", "avx-vnni"]
        }
        "x86_64-avx512vnni" => &["avx2", "avx512-vnni"],
        "x86_64-avxvnni" => &["avx2", "avx-vnni"],
        "x86_64-avx2" => &["avx2"],
        "aarch64-dotprod" => &["dotprod"],
        _ => &[],
    };
    for n in needed {
        assert!(run.contains(n), "{expect}: the {n} kernels did not run");
    }
    // scripts/test.sh sets it where the CPU has AVX-VNNI beside AVX512-VNNI:
    // the VEX tiles then run natively, not only in their EVEX build.
    if std::env::var("KESTREL_EXPECT_AVX_VNNI").is_ok_and(|v| v == "1") {
        assert!(
            run.contains(&"avx-vnni"),
            "{expect} with AVX-VNNI: the avx-vnni kernels did not run"
        );
    }
}

/// Every kernel set of this CPU ([`variants`] of its token; none without one).
pub(crate) fn cpus() -> Vec<arch::Cpu> {
    cpu().map(variants).unwrap_or_default()
}

/// A deterministic stream of pseudo-random numbers (64-bit LCG, high bits),
/// for every architecture test file.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// A float in [-scale, scale).
    pub(crate) fn float(&mut self, scale: f32) -> f32 {
        (self.next() as f32 / (1u64 << 31) as f32 - 1.0) * scale
    }

    /// Bytes where every value 0..=255 occurs (a shuffled sweep first).
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v: Vec<u8> = (0..n).map(|_| self.next() as u8).collect();
        let off = self.next() as usize;
        for (i, b) in v.iter_mut().take(256).enumerate() {
            *b = (i.wrapping_mul(167).wrapping_add(off)) as u8;
        }
        v
    }

    /// An f16 scale: normal and about 0.06 in size, or (`raw`) any bits.
    pub(crate) fn f16_or_raw(&mut self, raw: bool) -> [u8; 2] {
        if raw {
            return (self.next() as u16).to_le_bytes();
        }
        let s = self.float(0.05) + if self.next() & 1 == 0 { 0.06 } else { -0.06 };
        generic::f32_to_f16(s).to_le_bytes()
    }

    /// A finite f16 (any sign, normal or subnormal, moderate exponent so
    /// that sums of 9 super-blocks stay finite).
    pub(crate) fn d_f16(&mut self) -> [u8; 2] {
        let bits = (self.next() as u16) & 0xbfff; // exponent field <= 0x0f
        bits.to_le_bytes()
    }
}

/// Same bits, or both NaN (NaN payloads are not specified).
pub(crate) fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Every element [`same`], or a panic naming `what`, the index and both bit patterns.
pub(crate) fn assert_same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            same(*g, *w),
            "{what}: [{i}] {g:e} ({:#x}) != {w:e} ({:#x})",
            g.to_bits(),
            w.to_bits()
        );
    }
}

/// A repacked weight whose first `f16s` f16 fields per super-block are
/// scales (or minimums): normal, or with `raw` any bits; its other bytes
/// random, or with `sweep` `(s * 167 + i * 71 + off) mod 256` at byte `i`
/// of super-block `s` (over 256 super-blocks every byte value occurs in
/// every position: 167 is odd).
fn weight(
    rng: &mut Rng,
    (group_rows, block_bytes, f16s): (usize, usize, usize),
    rows: usize,
    cols: usize,
    (raw, sweep): (bool, bool),
) -> Vec<u8> {
    let blocks = rows.div_ceil(group_rows) * cols / QK;
    let mut w = rng.bytes(blocks * block_bytes);
    let off = rng.next() as usize;
    for (s, sb) in w.chunks_exact_mut(block_bytes).enumerate() {
        if sweep {
            for (i, b) in sb.iter_mut().enumerate() {
                *b = (s.wrapping_mul(167) + i * 71 + off) as u8;
            }
        }
        for f in 0..f16s {
            let v = rng.f16_or_raw(raw);
            sb[2 * f..2 * f + 2].copy_from_slice(&v);
        }
    }
    w
}

/// Activation quants (every value, or -127..=127 only) and scales.
fn acts(rng: &mut Rng, m: usize, cols: usize, with_min: bool) -> (Vec<i8>, Vec<f32>) {
    let mut qs: Vec<i8> = rng.bytes(m * cols).into_iter().map(|b| b as i8).collect();
    if !with_min {
        for q in &mut qs {
            if *q == i8::MIN {
                *q = -127;
            }
        }
    }
    // Full f32 precision (the quantizer's scales are f16 values): every
    // product rounds, so any other order of the operations shows.
    let d = (0..m * cols / QK).map(|_| rng.float(0.05) + 0.06).collect();
    (qs, d)
}

pub(crate) type GemmFn =
    fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], usize, &mut [f32]) -> Result<(), ShapeError>;
pub(crate) type GenericGemmFn =
    fn(&[u8], usize, usize, &[i8], &[f32], usize, &mut [f32]) -> Result<(), ShapeError>;
/// One GEMM call's arguments: weight, rows, cols, quants, scales, m.
pub(crate) type GemmArgs<'a> = (&'a [u8], usize, usize, &'a [i8], &'a [f32], usize);
pub(crate) type GemvFn =
    fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &mut [f32]) -> Result<(), ShapeError>;

/// A GEMM of Q8_0 activations (`fast`, and `gemv` for one row) against
/// its generic twin, bit for bit, for a layout of `group_rows`-row groups
/// of `block_bytes`-byte super-blocks that begin with `f16s` f16 fields.
fn check_gemm(
    cpu: arch::Cpu,
    (group_rows, block_bytes, f16s): (usize, usize, usize),
    fast: GemmFn,
    gemv: GemvFn,
    reference: GenericGemmFn,
    name: &str,
) {
    let layout = (group_rows, block_bytes, f16s);
    let mut rng = Rng(block_bytes as u64);
    // `fast` (and `gemv` for one row) against `reference`, bit for bit.
    let check =
        |w: &[u8], (rows, cols, m): (usize, usize, usize), qs: &[i8], d: &[f32], what: &str| {
            let mut want = vec![f32::NAN; m * rows];
            reference(w, rows, cols, qs, d, m, &mut want).unwrap();
            let mut got = vec![f32::NAN; m * rows];
            fast(cpu, w, rows, cols, qs, d, m, &mut got).unwrap();
            assert_same(&got, &want, what);
            if m == 1 && rows > 0 && cols > 0 {
                let mut got = vec![f32::NAN; rows];
                gemv(cpu, w, rows, cols, qs, d, &mut got).unwrap();
                assert_same(&got, &want, what);
            }
        };
    // 33 rows: two whole 16-row units of the x86 512-bit VNNI tiles and a
    // last one of 1 row (9 Q4_0x4 groups: the last unit repeats its group).
    for rows in [1, 3, 4, 5, 8, 9, 13, 17, 24, 33] {
        // 65 and 66 blocks: past the x86 GEMV's expanded activations (64).
        for cols in [32, 96, 160, 65 * 32, 66 * 32] {
            let w = weight(&mut rng, layout, rows, cols, (false, false));
            for m in [1, 2, 3, 4, 5, 7, 9] {
                for with_min in [false, true] {
                    let (qs, d) = acts(&mut rng, m, cols, with_min);
                    let what = std::format!("{name} rows {rows} cols {cols} m {m} -128 {with_min}");
                    check(&w, (rows, cols, m), &qs, &d, &what);
                }
            }
        }
    }
    // Batches the x86 Q4_0x4 GEMM splits into calls so each call's
    // activation patterns fit its table (1,024 blocks): 200 blocks x 9 rows
    // (calls of 4, 4, 1), 65 x 13 (12 + 1), and 257 blocks (too wide for a
    // tile of patterns: formed in the tiles); 70 rows: the x86 VNNI GEMMs
    // take 64 per call (their block-sum table), in tiles of 8 (64 + 6).
    for (cols, m) in [
        (200 * 32, 9),
        (65 * 32, 13),
        (66 * 32, 25),
        (257 * 32, 6),
        (96, 70),
    ] {
        let rows = 9;
        let w = weight(&mut rng, layout, rows, cols, (false, false));
        let (qs, d) = acts(&mut rng, m, cols, false);
        check(
            &w,
            (rows, cols, m),
            &qs,
            &d,
            &std::format!("{name} rows {rows} cols {cols} m {m}"),
        );
    }
    // Rows of 384 blocks (12,288 columns: the widest the x86 GEMV and
    // tiled Q4 GEMM take, the latter 4 activation rows per call: 9 = 4 + 4
    // + 1), of 280 (the 1.5B model's down projection) and past 384.
    for rows in [5, 9] {
        for cols in [280 * 32, 384 * 32, 385 * 32, 387 * 32] {
            let w = weight(&mut rng, layout, rows, cols, (false, false));
            for m in [1, 3, 9] {
                let (qs, d) = acts(&mut rng, m, cols, m == 3);
                let what = std::format!("{name} rows {rows} cols {cols} m {m}");
                check(&w, (rows, cols, m), &qs, &d, &what);
            }
        }
    }
    // Raw scale bits (infinities, NaN, subnormals): NaN where both are.
    for (rows, cols) in [(1, 32), (5, 96), (9, 896)] {
        let w = weight(&mut rng, layout, rows, cols, (true, false));
        for m in [1, 4, 5] {
            let (qs, d) = acts(&mut rng, m, cols, true);
            check(
                &w,
                (rows, cols, m),
                &qs,
                &d,
                &std::format!("{name} raw scales"),
            );
        }
    }
    // Every byte value in every position of a super-block: 256 of them.
    let (rows, cols) = (group_rows * 256, 32);
    let w = weight(&mut rng, layout, rows, cols, (false, true));
    for m in [1, 4, 5] {
        let (qs, d) = acts(&mut rng, m, cols, true);
        check(
            &w,
            (rows, cols, m),
            &qs,
            &d,
            &std::format!("{name} every byte"),
        );
    }
    // Empty shapes: no rows, no activation rows, no columns.
    for (rows, cols, m) in [(0, 32, 2), (5, 32, 0), (5, 0, 3), (0, 0, 1)] {
        let w = weight(&mut rng, layout, rows, cols, (false, false));
        let (qs, d) = acts(&mut rng, m, cols, false);
        check(&w, (rows, cols, m), &qs, &d, name);
    }
    // Shape errors: the same error as the generic code, nothing written.
    let (rows, cols, m) = (5, 64, 2);
    let w = weight(&mut rng, layout, rows, cols, (false, false));
    let (qs, d) = acts(&mut rng, m, cols, false);
    check_shape_errors(cpu, (fast, reference), (&w, rows, cols, &qs, &d, m), name);
}

/// Five wrong shapes around `(w, rows, cols, qs, d, m)` (a weight byte
/// short, 32 quants short, a scale short, a column too many, an activation
/// row too many): `fast` returns the generic code's error and writes
/// nothing. Shared by every GEMM of Q8_0 activations.
pub(crate) fn check_shape_errors(
    cpu: arch::Cpu,
    (fast, reference): (GemmFn, GenericGemmFn),
    (w, rows, cols, qs, d, m): GemmArgs,
    name: &str,
) {
    let cases: [GemmArgs; 5] = [
        (&w[1..], rows, cols, qs, d, m),
        (w, rows, cols, &qs[32..], d, m),
        (w, rows, cols, qs, &d[1..], m),
        (w, rows, cols + 1, qs, d, m),
        (w, rows, cols, qs, d, m + 1),
    ];
    for (w, rows, cols, qs, d, m) in cases {
        let mut want = vec![f32::NAN; 2 * rows];
        let mut got = vec![f32::NAN; 2 * rows];
        let e = reference(w, rows, cols, qs, d, m, &mut want).unwrap_err();
        assert_eq!(
            fast(cpu, w, rows, cols, qs, d, m, &mut got),
            Err(e),
            "{name}"
        );
        assert!(got.iter().all(|v| v.is_nan()), "{name}: written on error");
    }
}

#[test]
fn gemm_q4_0x4_and_iq4_nlx4_match_generic() {
    for cpu in cpus() {
        std::println!("q4_0x4, iq4_nlx4: {cpu:?}");
        let shape = (Q4X4_ROWS, Q4X4_BLOCK_BYTES, Q4X4_ROWS);
        let q4 = (q4_0::arch::gemm_q4_0x4_q8_0, q4_0::arch::gemv_q4_0x4_q8_0);
        check_gemm(
            cpu,
            shape,
            q4.0,
            q4.1,
            q4_0::generic::gemm_q4_0x4_q8_0,
            "q4_0x4",
        );
        use iq4nl::{arch as a, generic as g};
        let iq4 = (a::gemm_iq4_nlx4_q8_0, a::gemv_iq4_nlx4_q8_0);
        check_gemm(cpu, shape, iq4.0, iq4.1, g::gemm_iq4_nlx4_q8_0, "iq4_nlx4");
    }
}

#[test]
fn gemm_q5_0x4_and_q5_1x4_match_generic() {
    for cpu in cpus() {
        check_gemm(
            cpu,
            (Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5X4_ROWS),
            q5::arch::gemm_q5_0x4_q8_0,
            q5::arch::gemv_q5_0x4_q8_0,
            q5::generic::gemm_q5_0x4_q8_0,
            "q5_0x4",
        );
        check_gemm(
            cpu,
            (Q5X4_ROWS, Q5_1X4_BLOCK_BYTES, 2 * Q5X4_ROWS),
            q5::arch::gemm_q5_1x4_q8_0,
            q5::arch::gemv_q5_1x4_q8_0,
            q5::generic::gemm_q5_1x4_q8_0,
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
    assert_eq!(q5::generic::q5x4_value(&quants, 2, 23), 10);
    quants[64 + 4 * 2 + 3] = 1 << 5;
    assert_eq!(q5::generic::q5x4_value(&quants, 2, 23), 10 - 16);
    // Row 0, weight 1: low nibble of chunk 0, plane bit 0 of byte 1.
    quants[1] = 0x0f;
    assert_eq!(q5::generic::q5x4_value(&quants, 0, 1), 15);
    quants[64 + 1] = 1;
    assert_eq!(q5::generic::q5x4_value(&quants, 0, 1), -1);
    // All-zero bytes (padding) are q = 16: value 0.
    assert_eq!(q5::generic::q5x4_value(&[0; 80], 3, 31), 0);
}

#[test]
fn gemm_q8_0x8_matches_generic() {
    for cpu in cpus() {
        std::println!("q8_0x8: {cpu:?}");
        check_gemm(
            cpu,
            (Q8X8_ROWS, Q8X8_BLOCK_BYTES, Q8X8_ROWS),
            q8_0::arch::gemm_q8_0x8_q8_0,
            q8_0::arch::gemv_q8_0x8_q8_0,
            q8_0::generic::gemm_q8_0x8_q8_0,
            "q8_0x8",
        );
    }
}

#[test]
fn matvec_matches_generic() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(3);
    for rows in [0, 1, 7, 8, 9, 17] {
        for cols in [0, 1, 7, 8, 33] {
            let x: Vec<f32> = (0..cols).map(|_| rng.float(2.0)).collect();
            let w32: Vec<u8> = (0..rows * cols)
                .flat_map(|_| rng.float(1.0).to_le_bytes())
                .collect();
            let w16: Vec<u8> = (0..rows * cols)
                .flat_map(|_| generic::f32_to_f16(rng.float(1.0)).to_le_bytes())
                .collect();
            let (mut want, mut got) = (vec![f32::NAN; rows], vec![f32::NAN; rows]);
            generic::matvec_f32(&w32, rows, cols, &x, &mut want).unwrap();
            arch::matvec_f32(cpu, &w32, rows, cols, &x, &mut got).unwrap();
            assert_same(&got, &want, "matvec_f32");
            generic::matvec_f16(&w16, rows, cols, &x, &mut want).unwrap();
            arch::matvec_f16(cpu, &w16, rows, cols, &x, &mut got).unwrap();
            assert_same(&got, &want, "matvec_f16");
            if cols > 0 {
                let e = generic::matvec_f32(&w32, rows, cols, &x[1..], &mut want).unwrap_err();
                assert_eq!(
                    arch::matvec_f32(cpu, &w32, rows, cols, &x[1..], &mut got),
                    Err(e)
                );
            }
        }
    }
}

/// Inputs every quantizer test mixes in: signed zeros, NaN, infinities,
/// tiny, huge and subnormal values, halves.
pub(crate) const SPECIAL: [f32; 13] = [
    0.0,
    -0.0,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    1e-30,
    -1e38,
    3.0e38,
    0.5,
    -1.5,
    127.0,
    -63.5,
    1e-45,
];

#[test]
fn quantize_acts_matches_generic() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(4);
    let special = SPECIAL;
    for blocks in [0, 1, 2, 5] {
        for kind in 0..4 {
            let x: Vec<f32> = (0..blocks * QK)
                .map(|i| match kind {
                    0 => rng.float(3.0),
                    1 => special[i % special.len()],
                    // Exact halves after scaling: max 127, values k + 0.5.
                    2 if i % QK == 0 => 127.0,
                    2 => (i % 255) as f32 - 127.0 + 0.5,
                    _ if i % 7 == 0 => special[(i / 7) % special.len()],
                    _ => rng.float(1e-3),
                })
                .collect();
            let (mut q0, mut d0) = (vec![0i8; x.len()], vec![0f32; blocks]);
            let (mut q1, mut d1) = (vec![1i8; x.len()], vec![1f32; blocks]);
            generic::quantize_acts_q8_0(&x, &mut q0, &mut d0).unwrap();
            arch::quantize_acts_q8_0(cpu, &x, &mut q1, &mut d1).unwrap();
            assert_eq!(q1, q0, "quants, {blocks} blocks, kind {kind}");
            assert_same(&d1, &d0, "scales");
        }
    }
    let x = [0.5f32; 48];
    let e = generic::quantize_acts_q8_0(&x, &mut [0; 48], &mut [0.0; 1]).unwrap_err();
    assert_eq!(
        arch::quantize_acts_q8_0(cpu, &x, &mut [0; 48], &mut [0.0; 1]),
        Err(e)
    );
    let e = generic::quantize_acts_q8_0(&x[..32], &mut [0; 32], &mut [0.0; 2]).unwrap_err();
    assert_eq!(
        arch::quantize_acts_q8_0(cpu, &x[..32], &mut [0; 32], &mut [0.0; 2]),
        Err(e)
    );
}

#[test]
fn attention_matches_generic() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(5);
    for hd in [7, 8, 12, 16, 24, 64] {
        for n in [0usize, 1, 2, 3, 4, 5, 6, 9] {
            for extra in [0, 3] {
                let stride = hd + extra;
                let len = n.saturating_sub(1) * stride + hd;
                let k32: Vec<f32> = (0..len).map(|_| rng.float(2.0)).collect();
                let k16: Vec<u16> = k32.iter().map(|&v| generic::f32_to_f16(v)).collect();
                let q: Vec<f32> = (0..hd).map(|_| rng.float(1.0)).collect();
                let probs: Vec<f32> = (0..n).map(|_| rng.float(0.5).abs()).collect();
                let (mut want, mut got) = (vec![f32::NAN; n], vec![f32::NAN; n]);
                generic::attn_scores_f16(&q, &k16, stride, 0.125, &mut want).unwrap();
                arch::attn_scores_f16(cpu, &q, &k16, stride, 0.125, &mut got).unwrap();
                assert_same(&got, &want, "attn_scores_f16");
                generic::attn_scores_f32(&q, &k32, stride, 0.125, &mut want).unwrap();
                arch::attn_scores_f32(cpu, &q, &k32, stride, 0.125, &mut got).unwrap();
                assert_same(&got, &want, "attn_scores_f32");
                let (mut want, mut got) = (vec![f32::NAN; hd], vec![f32::NAN; hd]);
                generic::attn_values_f16(&probs, &k16, stride, &mut want).unwrap();
                arch::attn_values_f16(cpu, &probs, &k16, stride, &mut got).unwrap();
                assert_same(&got, &want, "attn_values_f16");
                generic::attn_values_f32(&probs, &k32, stride, &mut want).unwrap();
                arch::attn_values_f32(cpu, &probs, &k32, stride, &mut got).unwrap();
                assert_same(&got, &want, "attn_values_f32");
                if n > 0 {
                    let short = &k16[..len - 1];
                    let mut scores = vec![f32::NAN; n];
                    let e =
                        generic::attn_scores_f16(&q, short, stride, 1.0, &mut scores).unwrap_err();
                    let r = arch::attn_scores_f16(cpu, &q, short, stride, 1.0, &mut scores);
                    assert_eq!(r, Err(e));
                    assert!(scores.iter().all(|v| v.is_nan()), "written on error");
                    let short = &k32[..len - 1];
                    let e =
                        generic::attn_scores_f32(&q, short, stride, 1.0, &mut scores).unwrap_err();
                    let r = arch::attn_scores_f32(cpu, &q, short, stride, 1.0, &mut scores);
                    assert_eq!(r, Err(e));
                    let mut out = vec![f32::NAN; hd];
                    let e = generic::attn_values_f32(&probs, short, stride, &mut out).unwrap_err();
                    let r = arch::attn_values_f32(cpu, &probs, short, stride, &mut out);
                    assert_eq!(r, Err(e));
                    assert!(
                        scores.iter().chain(&out).all(|v| v.is_nan()),
                        "written on error"
                    );
                }
            }
        }
    }
}

/// The grouped kernels (several query heads over the same cached rows)
/// against the generic ones, which are the one-head kernels head by head:
/// 1 to 9 heads (past the 8 of one pass), odd and vector row lengths (40:
/// a 32-column tile and an 8-column one), row counts across the values'
/// 64-row blocks, padded strides and output strides, shape errors.
#[test]
fn grouped_attention_matches_generic() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(7);
    for heads in 1..=9 {
        for hd in [7, 8, 24, 40, 64] {
            for n in [0usize, 1, 2, 5, 8, 9, 14, 17, 23, 64, 65, 150] {
                let stride = hd + (heads % 3);
                let out_stride = hd + 4 * (heads % 2);
                let len = n.saturating_sub(1) * stride + hd;
                let k32: Vec<f32> = (0..len).map(|_| rng.float(2.0)).collect();
                let k16: Vec<u16> = k32.iter().map(|&v| generic::f32_to_f16(v)).collect();
                let qs: Vec<f32> = (0..heads * hd).map(|_| rng.float(1.0)).collect();
                let probs: Vec<f32> = (0..heads * n).map(|_| rng.float(0.5).abs()).collect();
                let what = std::format!("heads {heads} hd {hd} n {n}");
                let (mut want, mut got) = (vec![f32::NAN; heads * n], vec![f32::NAN; heads * n]);
                generic::attn_scores_f16_heads(&qs, heads, &k16, stride, 0.125, &mut want).unwrap();
                for g in 0..heads {
                    let mut one = vec![f32::NAN; n];
                    let q = &qs[g * hd..(g + 1) * hd];
                    generic::attn_scores_f16(q, &k16, stride, 0.125, &mut one).unwrap();
                    assert_same(&want[g * n..(g + 1) * n], &one, &what);
                }
                arch::attn_scores_f16_heads(cpu, &qs, heads, &k16, stride, 0.125, &mut got)
                    .unwrap();
                assert_same(&got, &want, &std::format!("scores f16 {what}"));
                generic::attn_scores_f32_heads(&qs, heads, &k32, stride, 0.125, &mut want).unwrap();
                arch::attn_scores_f32_heads(cpu, &qs, heads, &k32, stride, 0.125, &mut got)
                    .unwrap();
                assert_same(&got, &want, &std::format!("scores f32 {what}"));
                let out_len = (heads - 1) * out_stride + hd;
                let (mut want, mut got) = (vec![f32::NAN; out_len], vec![f32::NAN; out_len]);
                let args = (hd, out_stride);
                generic::attn_values_f16_heads(
                    &probs, heads, &k16, stride, args.0, &mut want, args.1,
                )
                .unwrap();
                for g in 0..heads {
                    let mut one = vec![f32::NAN; hd];
                    let p = &probs[g * n..(g + 1) * n];
                    generic::attn_values_f16(p, &k16, stride, &mut one).unwrap();
                    assert_same(&want[g * out_stride..g * out_stride + hd], &one, &what);
                }
                let r = arch::attn_values_f16_heads(
                    cpu, &probs, heads, &k16, stride, hd, &mut got, out_stride,
                );
                r.unwrap();
                assert_same(&got, &want, &std::format!("values f16 {what}"));
                generic::attn_values_f32_heads(
                    &probs, heads, &k32, stride, hd, &mut want, out_stride,
                )
                .unwrap();
                let r = arch::attn_values_f32_heads(
                    cpu, &probs, heads, &k32, stride, hd, &mut got, out_stride,
                );
                r.unwrap();
                assert_same(&got, &want, &std::format!("values f32 {what}"));
                if n > 0 {
                    // A cache one element short, a query short of a whole
                    // head, an output one element short: the generic error,
                    // nothing written.
                    let short = &k16[..len - 1];
                    let mut scores = vec![f32::NAN; heads * n];
                    let e =
                        generic::attn_scores_f16_heads(&qs, heads, short, stride, 1.0, &mut scores)
                            .unwrap_err();
                    let r = arch::attn_scores_f16_heads(
                        cpu,
                        &qs,
                        heads,
                        short,
                        stride,
                        1.0,
                        &mut scores,
                    );
                    assert_eq!(r, Err(e), "{what}");
                    if heads > 1 {
                        let q = &qs[..heads * hd - 1];
                        let e = generic::attn_scores_f16_heads(
                            q,
                            heads,
                            &k16,
                            stride,
                            1.0,
                            &mut scores,
                        )
                        .unwrap_err();
                        let r = arch::attn_scores_f16_heads(
                            cpu,
                            q,
                            heads,
                            &k16,
                            stride,
                            1.0,
                            &mut scores,
                        );
                        assert_eq!(r, Err(e), "{what}");
                    }
                    assert!(
                        scores.iter().all(|v| v.is_nan()),
                        "{what}: written on error"
                    );
                    let mut out = vec![f32::NAN; out_len - 1];
                    let e = generic::attn_values_f16_heads(
                        &probs, heads, &k16, stride, hd, &mut out, out_stride,
                    )
                    .unwrap_err();
                    let r = arch::attn_values_f16_heads(
                        cpu, &probs, heads, &k16, stride, hd, &mut out, out_stride,
                    );
                    assert_eq!(r, Err(e), "{what}");
                    assert!(out.iter().all(|v| v.is_nan()), "{what}: written on error");
                    // The f32 cache one element short: the same errors.
                    let short = &k32[..len - 1];
                    let e =
                        generic::attn_scores_f32_heads(&qs, heads, short, stride, 1.0, &mut scores)
                            .unwrap_err();
                    let r = arch::attn_scores_f32_heads(
                        cpu,
                        &qs,
                        heads,
                        short,
                        stride,
                        1.0,
                        &mut scores,
                    );
                    assert_eq!(r, Err(e), "{what}");
                    let mut out = vec![f32::NAN; out_len];
                    let e = generic::attn_values_f32_heads(
                        &probs, heads, short, stride, hd, &mut out, out_stride,
                    )
                    .unwrap_err();
                    let r = arch::attn_values_f32_heads(
                        cpu, &probs, heads, short, stride, hd, &mut out, out_stride,
                    );
                    assert_eq!(r, Err(e), "{what}");
                    assert!(
                        scores.iter().chain(&out).all(|v| v.is_nan()),
                        "{what}: written on error"
                    );
                }
            }
        }
    }
    let e = generic::attn_scores_f16_heads(&[0.0; 8], 0, &[0; 8], 8, 1.0, &mut []).unwrap_err();
    assert_eq!(
        arch::attn_scores_f16_heads(cpu, &[0.0; 8], 0, &[0; 8], 8, 1.0, &mut []),
        Err(e)
    );
}

/// Value `i` of a softmax test's rows in case `case` (of a block of
/// `rows` rows): 0 random, 1 random with special values, 2 a maximum of
/// zero (-0.0 and 0.0 in some order, the rest below), 3 random with -inf,
/// 4 nothing but -inf, 5 -inf and NaN.
fn softmax_value(rng: &mut Rng, special: &[f32], (case, rows, i): (usize, usize, usize)) -> f32 {
    match case {
        0 => rng.float(50.0),
        1 if i % 6 == 1 => special[(i / 6) % special.len()],
        1 => rng.float(50.0),
        2 if i % 5 == 0 => [0.0, -0.0][(i / 5 + rows) % 2],
        2 => -rng.float(50.0).abs() - 1.0,
        3 if i % 4 == 0 => f32::NEG_INFINITY,
        3 => rng.float(90.0),
        5 if i % 3 == 0 => f32::NAN,
        _ => f32::NEG_INFINITY,
    }
}

#[test]
fn activations_match_generic() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(6);
    let special = [
        0.0,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -88.0,
        89.0,
        -87.4,
        1e-40,
    ];
    for n in 0..40 {
        let x: Vec<f32> = (0..n)
            .map(|i| {
                if i % 5 == 0 {
                    special[(i / 5) % special.len()]
                } else {
                    rng.float(100.0)
                }
            })
            .collect();
        let (mut want, mut got) = (x.clone(), x.clone());
        generic::exp_minus(&mut want, 3.5);
        arch::exp_minus(cpu, &mut got, 3.5);
        assert_same(&got, &want, "exp_minus");
        let (mut want, mut got) = (x.clone(), x.clone());
        generic::gelu_tanh_in_place(&mut want);
        arch::gelu_tanh_in_place(cpu, &mut got);
        assert_same(&got, &want, "gelu_tanh");
        for (w, &v) in want.iter().zip(&x) {
            assert!(same(*w, generic::gelu_tanh(v)), "gelu_tanh_in_place({v})");
        }
    }
    for runs in 0..6 {
        let gu: Vec<f32> = (0..16 * runs)
            .map(|i| {
                if i % 7 == 0 {
                    special[(i / 7) % special.len()]
                } else {
                    rng.float(30.0)
                }
            })
            .collect();
        let (mut want, mut got) = (vec![f32::NAN; 8 * runs], vec![f32::NAN; 8 * runs]);
        generic::swiglu_runs(&mut want, &gu).unwrap();
        arch::swiglu_runs(cpu, &mut got, &gu).unwrap();
        assert_same(&got, &want, "swiglu_runs");
    }
    // Softmax rows: blocks of 1..=8 rows (and more, and a partial last
    // row), lengths with and without a tail of 8, special values, rows
    // whose maximum is a zero of either sign, rows without a number.
    for rows in 1..=10usize {
        for n in [1usize, 3, 8, 9, 16, 23, 40, 67] {
            for case in 0..4 {
                let len = rows * n + if case == 3 { n / 2 } else { 0 };
                let x: Vec<f32> = (0..len)
                    .map(|i| softmax_value(&mut rng, &special, (case, rows, i)))
                    .collect();
                let (mut want, mut got) = (x.clone(), x.clone());
                generic::softmax_rows(&mut want, n);
                arch::softmax_rows(cpu, &mut got, n);
                assert_same(
                    &got,
                    &want,
                    &format!("softmax_rows rows {rows} n {n} case {case}"),
                );
            }
        }
    }
    // Online softmax tiles: the same rows, from running maxima below,
    // equal to and above the rows' (and -inf, a zero of either sign), and
    // rows of nothing but -inf (and NaN).
    let floors = [f32::NEG_INFINITY, -0.0, 0.0, 3.0, 60.0, -1e30];
    for rows in 1..=10usize {
        for n in [0usize, 1, 3, 4, 8, 9, 16, 23, 40, 67] {
            for case in 0..6 {
                let x: Vec<f32> = (0..rows * n)
                    .map(|i| softmax_value(&mut rng, &special, (case, rows, i)))
                    .collect();
                let maxes: Vec<f32> = (0..rows)
                    .map(|g| floors[(g + case) % floors.len()])
                    .collect();
                let (mut want, mut got) = (x.clone(), x.clone());
                let (mut want_max, mut got_max) = (maxes.clone(), maxes.clone());
                let (mut want_sum, mut got_sum) = (vec![f32::NAN; rows], vec![f32::NAN; rows]);
                generic::softmax_rows_online(&mut want, n, &mut want_max, &mut want_sum).unwrap();
                arch::softmax_rows_online(cpu, &mut got, n, &mut got_max, &mut got_sum).unwrap();
                let what = format!("softmax_rows_online rows {rows} n {n} case {case}");
                assert_same(&got, &want, &what);
                assert_same(&got_max, &want_max, &what);
                assert_same(&got_sum, &want_sum, &what);
            }
        }
    }
    let e = generic::softmax_rows_online(&mut [0.0; 6], 4, &mut [0.0; 2], &mut [0.0; 2]);
    let e = e.unwrap_err();
    let got = arch::softmax_rows_online(cpu, &mut [0.0; 6], 4, &mut [0.0; 2], &mut [0.0; 2]);
    assert_eq!(got, Err(e));
    for len in 0..20 {
        let x: Vec<f32> = (0..len).map(|_| rng.float(10.0)).collect();
        let (mut want, mut got) = (x.clone(), x.clone());
        generic::softmax_rows(&mut want, 0);
        arch::softmax_rows(cpu, &mut got, 0);
        assert_same(&got, &want, "softmax_rows n 0");
    }
    let gu = [1.0f32; 32];
    let e = generic::swiglu_runs(&mut [0.0; 8], &gu).unwrap_err();
    assert_eq!(arch::swiglu_runs(cpu, &mut [0.0; 8], &gu), Err(e));
    let e = generic::swiglu_runs(&mut [0.0; 12], &gu[..24]).unwrap_err();
    assert_eq!(arch::swiglu_runs(cpu, &mut [0.0; 12], &gu[..24]), Err(e));
}

/// The gated delta rule of one head against generic, bit for bit: key
/// dimensions 1 to 33, value dimensions from 1 to past two strips with
/// every tail (the state, the output and the untouched columns), decays
/// and strengths of 0, 1 and between, the state holding zeros, signed
/// zeros and large values.
#[test]
fn delta_rule_matches_generic() {
    let Some(cpu) = cpu() else { return };
    let mut rng = Rng(55);
    for dk in [1usize, 2, 7, 32, 33] {
        for dv in [1usize, 3, 4, 8, 15, 16, 17, 31, 32, 33, 48, 64, 65, 79] {
            for (decay, beta) in [(0.93f32, 0.6f32), (1.0, 1.0), (0.0, 0.0), (0.5, 0.99)] {
                let state: Vec<f32> = (0..dk * dv)
                    .map(|i| match i % 11 {
                        0 => 0.0,
                        1 => -0.0,
                        2 => rng.float(1e4),
                        _ => rng.float(2.0),
                    })
                    .collect();
                let k: Vec<f32> = (0..dk).map(|_| rng.float(0.5)).collect();
                let q: Vec<f32> = (0..dk).map(|_| rng.float(0.5)).collect();
                let v: Vec<f32> = (0..dv).map(|_| rng.float(3.0)).collect();
                let (mut sw, mut sg) = (state.clone(), state.clone());
                let (mut ow, mut og) = (vec![f32::NAN; dv], vec![f32::NAN; dv]);
                generic::delta_rule(&mut sw, &k, &q, &v, decay, beta, &mut ow).unwrap();
                arch::delta_rule(cpu, &mut sg, &k, &q, &v, decay, beta, &mut og).unwrap();
                assert_same(&sg, &sw, &format!("delta_rule state dk {dk} dv {dv}"));
                assert_same(&og, &ow, &format!("delta_rule out dk {dk} dv {dv}"));
            }
        }
    }
    let (mut s, mut o) = (vec![0f32; 6], vec![0f32; 3]);
    let err = arch::delta_rule(
        cpu, &mut s, &[0.0; 2], &[0.0; 3], &[0.0; 3], 1.0, 1.0, &mut o,
    );
    assert!(err.is_err(), "a query of the wrong length is a shape error");
}
