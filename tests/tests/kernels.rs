//! Kernels against references, over many shapes.
//!
//! 1. The scalar reference on the repacked layouts against a plain
//!    dequantize-then-dot in f64 (the only difference allowed is f32
//!    rounding of the block sums).
//! 2. The kernel set this CPU gets against the scalar reference: bit for bit.

use kestrel_core::kernels::Kernels;
use kestrel_core::quant::repack::{Layout, PackedMatrix};
use kestrel_core::quant::{f16, q4_0, q8_0, reference, repack};
use kestrel_tests::{cosine, detected_kernels, noise, ramp};

/// A quantized test matrix, both as repacked bytes and dequantized f32.
struct Matrix {
    packed: Vec<u8>,
    deq: Vec<f32>,
    layout: Layout,
    rows: usize,
    cols: usize,
}

impl Matrix {
    fn new(layout: Layout, rows: usize, cols: usize, values: &[f32]) -> Matrix {
        let nb = cols / 32;
        let bb = match layout {
            Layout::Q4_0x4 => q4_0::BLOCK_BYTES,
            _ => q8_0::BLOCK_BYTES,
        };
        let mut gguf = vec![0u8; rows * nb * bb];
        for r in 0..rows {
            let row = &values[r * cols..(r + 1) * cols];
            let dst = &mut gguf[r * nb * bb..(r + 1) * nb * bb];
            match layout {
                Layout::Q4_0x4 => q4_0::quantize_row_bytes(row, dst).unwrap(),
                _ => q8_0::quantize_row_bytes(row, dst).unwrap(),
            }
        }
        let mut deq = vec![0f32; rows * cols];
        match layout {
            Layout::Q4_0x4 => q4_0::dequantize_row_bytes(&gguf, &mut deq).unwrap(),
            _ => q8_0::dequantize_row_bytes(&gguf, &mut deq).unwrap(),
        }
        let mut packed = vec![0u8; layout.matrix_bytes(rows, cols).unwrap()];
        repack::repack(layout, &gguf, rows, cols, &mut packed).unwrap();
        Matrix {
            packed,
            deq,
            layout,
            rows,
            cols,
        }
    }

    fn view(&self) -> PackedMatrix<'_> {
        PackedMatrix::new(self.layout, self.rows, self.cols, &self.packed).unwrap()
    }
}

struct Acts {
    qs: Vec<i8>,
    d: Vec<f32>,
    deq: Vec<f32>,
}

fn acts(values: &[f32]) -> Acts {
    let mut qs = vec![0i8; values.len()];
    let mut d = vec![0f32; values.len() / 32];
    q8_0::quantize_acts(values, &mut qs, &mut d).unwrap();
    let deq = qs
        .iter()
        .enumerate()
        .map(|(i, &q)| q as f32 * d[i / 32])
        .collect();
    Acts { qs, d, deq }
}

/// Weight values of several kinds, chosen by `kind`.
fn weights(kind: usize, n: usize, seed: u64) -> Vec<f32> {
    match kind % 6 {
        0 => cosine(n, seed as f32),
        1 => ramp(n).iter().map(|v| v - 0.5).collect(),
        2 => noise(n, seed, 1.0),
        3 => vec![0.0; n],
        4 => vec![-0.25; n],
        // f16-subnormal scales: max |x| / 127 < 6.1e-5
        _ => noise(n, seed, 1e-4),
    }
}

fn activation_values(kind: usize, n: usize, seed: u64) -> Vec<f32> {
    match kind % 4 {
        0 => cosine(n, 0.5 + seed as f32),
        1 => ramp(n),
        2 => noise(n, seed, 3.0),
        // -128/127 style extremes: one spike per block forces a scale of |spike|/127
        _ => (0..n)
            .map(|i| {
                if i % 32 == 7 {
                    -128.0
                } else if i % 32 == 9 {
                    127.0
                } else {
                    (i % 5) as f32
                }
            })
            .collect(),
    }
}

fn check_reference(w: &Matrix, a: &Acts, m: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * w.rows];
    let view = w.view();
    reference::gemm_q8_0(&view, &a.qs, &a.d, m, &mut out).unwrap();
    for t in 0..m {
        for r in 0..w.rows {
            let wr = &w.deq[r * w.cols..(r + 1) * w.cols];
            let ar = &a.deq[t * w.cols..(t + 1) * w.cols];
            let exact: f64 = wr.iter().zip(ar).map(|(&x, &y)| x as f64 * y as f64).sum();
            let mag: f64 = wr
                .iter()
                .zip(ar)
                .map(|(&x, &y)| (x as f64 * y as f64).abs())
                .sum();
            let got = out[t * w.rows + r] as f64;
            let bound = mag * 4.0 * f32::EPSILON as f64 * (w.cols / 32) as f64 + 1e-30;
            assert!(
                (got - exact).abs() <= bound,
                "{:?} {}x{} m={m} t={t} r={r}: {got} vs {exact} (bound {bound})",
                w.layout,
                w.rows,
                w.cols
            );
        }
    }
    out
}

fn check_kernels(kernels: &Kernels, w: &Matrix, a: &Acts, m: usize, want: &[f32]) {
    let mut out = vec![f32::NAN; m * w.rows];
    kernels
        .gemm_q8(&w.view(), &a.qs, &a.d, m, &mut out)
        .unwrap();
    for (i, (g, r)) in out.iter().zip(want).enumerate() {
        assert_eq!(
            g.to_bits(),
            r.to_bits(),
            "{} {:?} {}x{} m={m} index {i}: {g} vs reference {r}",
            kernels.name(),
            w.layout,
            w.rows,
            w.cols
        );
    }
}

const COLS: [usize; 8] = [32, 64, 96, 128, 160, 288, 544, 1024];

#[test]
fn gemv_all_row_counts_and_tails() {
    let kernels = detected_kernels();
    let mut cases = 0;
    for layout in [Layout::Q4_0x4, Layout::Q8_0x8] {
        for rows in 1..=17 {
            for (ci, &cols) in COLS.iter().enumerate() {
                let kind = rows + ci;
                let w = Matrix::new(layout, rows, cols, &weights(kind, rows * cols, rows as u64));
                let a = acts(&activation_values(kind, cols, ci as u64));
                let want = check_reference(&w, &a, 1);
                check_kernels(&kernels, &w, &a, 1, &want);
                cases += 1;
            }
        }
    }
    println!(
        "gemv: {cases} shapes, kernels {} match the reference bit for bit",
        kernels.name()
    );
}

#[test]
fn gemm_batches_up_to_33() {
    let kernels = detected_kernels();
    let mut cases = 0;
    for layout in [Layout::Q4_0x4, Layout::Q8_0x8] {
        for &rows in &[1usize, 3, 4, 8, 9, 17] {
            for &cols in &[32usize, 96, 288] {
                let w = Matrix::new(layout, rows, cols, &weights(rows, rows * cols, cols as u64));
                for m in 1..=33 {
                    let a = acts(&activation_values(m, m * cols, m as u64));
                    let want = check_reference(&w, &a, m);
                    check_kernels(&kernels, &w, &a, m, &want);
                    cases += 1;
                }
            }
        }
    }
    println!(
        "gemm: {cases} shapes, kernels {} match the reference bit for bit",
        kernels.name()
    );
}

#[test]
fn extreme_blocks() {
    // All-equal, zero, +-127/-128 and f16-subnormal weight blocks against
    // extreme activations.
    let kernels = detected_kernels();
    let cols = 128;
    for layout in [Layout::Q4_0x4, Layout::Q8_0x8] {
        let mut values = vec![0f32; 9 * cols];
        for (i, v) in values.iter_mut().enumerate() {
            let (r, c) = (i / cols, i % cols);
            *v = match r {
                0 => 1.0,
                1 => 0.0,
                2 => {
                    if c % 2 == 0 {
                        127.0
                    } else {
                        -128.0
                    }
                }
                3 => 1e-7 * (c as f32 - 64.0),
                4 => -1e-3,
                5 => 65504.0 * if c % 3 == 0 { 1.0 } else { -0.5 },
                _ => (c as f32 * 0.37).sin(),
            };
        }
        let w = Matrix::new(layout, 9, cols, &values);
        let a = acts(&activation_values(3, cols, 0));
        let want = check_reference(&w, &a, 1);
        check_kernels(&kernels, &w, &a, 1, &want);
    }
}

#[test]
fn matvec_float_matches_f64() {
    for &(rows, cols) in &[(1usize, 1usize), (3, 7), (17, 33), (5, 1024)] {
        let w = noise(rows * cols, 5, 1.0);
        let x = noise(cols, 6, 2.0);
        let f32_bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        let f16_bytes: Vec<u8> = w
            .iter()
            .flat_map(|v| f16::f32_to_f16(*v).to_le_bytes())
            .collect();
        for (layout, bytes) in [(Layout::F32, &f32_bytes), (Layout::F16, &f16_bytes)] {
            let m = PackedMatrix::new(layout, rows, cols, bytes).unwrap();
            let mut out = vec![0f32; rows];
            reference::matvec_float(&m, &x, &mut out).unwrap();
            for r in 0..rows {
                let wr = |i: usize| match layout {
                    Layout::F32 => w[r * cols + i] as f64,
                    _ => f16::f16_to_f32(f16::f32_to_f16(w[r * cols + i])) as f64,
                };
                let exact: f64 = (0..cols).map(|i| wr(i) * x[i] as f64).sum();
                let mag: f64 = (0..cols).map(|i| (wr(i) * x[i] as f64).abs()).sum();
                assert!(
                    (out[r] as f64 - exact).abs()
                        <= mag * cols as f64 * f32::EPSILON as f64 + 1e-30
                );
            }
        }
    }
}

#[test]
fn kernel_path_is_the_expected_one() {
    let kernels = detected_kernels();
    println!(
        "kernel path on {}: {}",
        std::env::consts::ARCH,
        kernels.name()
    );
    // scripts/test.sh says which path each CPU model must take.
    if let Ok(want) = std::env::var("KESTREL_EXPECT_KERNELS") {
        assert_eq!(kernels.name(), want, "wrong kernel path for this CPU");
    }
}

#[test]
fn shape_errors_are_errors_not_panics() {
    let w = Matrix::new(Layout::Q4_0x4, 5, 64, &cosine(5 * 64, 0.0));
    let a = acts(&cosine(64, 1.0));
    let k = detected_kernels();
    let mut out = vec![0f32; 4];
    assert!(k.gemm_q8(&w.view(), &a.qs, &a.d, 1, &mut out).is_err());
    let mut out = vec![0f32; 5];
    assert!(k
        .gemm_q8(&w.view(), &a.qs[..32], &a.d[..1], 1, &mut out)
        .is_err());
    assert!(k.gemm_q8(&w.view(), &a.qs, &a.d, 2, &mut out).is_err());
    assert!(PackedMatrix::new(Layout::Q4_0x4, 5, 64, &w.packed[1..]).is_err());
}

/// Nasty activation blocks for the quantizer: ties at .5, values just under
/// a tie, zeros, subnormals, huge values, infinities and NaNs.
fn nasty_blocks() -> Vec<f32> {
    let mut v = Vec::new();
    // d = 1 exactly (amax 127): x * id is x, so ties stay ties.
    let mut b = [0f32; 32];
    b[0] = 127.0;
    for (i, x) in b.iter_mut().enumerate().skip(1) {
        *x = match i % 6 {
            0 => i as f32 + 0.5,
            1 => -(i as f32) - 0.5,
            2 => 0.499_999_97,
            3 => -0.499_999_97,
            4 => 0.5,
            _ => -0.5,
        };
    }
    v.extend_from_slice(&b);
    v.extend_from_slice(&[0.0; 32]);
    v.extend((0..32).map(|i| if i % 2 == 0 { -0.0 } else { 0.0 }));
    // Subnormal blocks: d is subnormal (1 / d overflows to infinity).
    v.extend(
        (0..32).map(|i| f32::from_bits(i as u32 * 7 + 1) * if i % 3 == 0 { -1.0 } else { 1.0 }),
    );
    v.extend((0..32).map(|i| {
        if i == 5 {
            f32::from_bits(0x0080_0000)
        } else {
            f32::from_bits(i)
        }
    }));
    // Huge values: d overflows f16.
    v.extend((0..32).map(|i| f32::MAX / (i as f32 + 1.0) * if i % 2 == 0 { 1.0 } else { -1.0 }));
    v.extend((0..32).map(|i| 65504.0 * 127.0 * (i as f32 - 16.0) / 16.0));
    // Infinities and NaNs.
    v.extend((0..32).map(|i| match i {
        3 => f32::INFINITY,
        9 => f32::NEG_INFINITY,
        _ => i as f32,
    }));
    v.extend((0..32).map(|i| {
        if i % 4 == 1 {
            f32::NAN
        } else {
            i as f32 * 0.3 - 4.0
        }
    }));
    v.extend([f32::NAN; 32]);
    v.extend((0..32).map(|i| if i == 0 { -f32::NAN } else { 1e-3 * i as f32 }));
    // Scales where x * (1 / d) lands next to a tie.
    for s in 0..64u32 {
        let amax = 1.0 + s as f32 * 0.013_7;
        v.extend((0..32).map(|i| {
            if i == 0 {
                amax
            } else {
                let d = amax / 127.0;
                let k = (i as f32 - 16.0) + 0.5;
                f32::from_bits((k * d).to_bits().wrapping_add(s % 3).wrapping_sub(1))
            }
        }));
    }
    v.extend(noise(32 * 40, 11, 30.0));
    v.extend(cosine(32 * 8, 0.5));
    v
}

#[test]
fn quantize_acts_matches_scalar_bytes() {
    let kernels = detected_kernels();
    let x = nasty_blocks();
    let nb = x.len() / 32;
    let (mut want_qs, mut want_d) = (vec![0i8; x.len()], vec![0f32; nb]);
    q8_0::quantize_acts(&x, &mut want_qs, &mut want_d).unwrap();
    // Every prefix of whole blocks, so lengths 32 .. x.len() are covered.
    for n in [1, 2, 3, 5, nb] {
        let (mut qs, mut d) = (vec![7i8; 32 * n], vec![f32::NAN; n]);
        kernels
            .quantize_acts(&x[..32 * n], &mut qs, &mut d)
            .unwrap();
        assert_eq!(qs, want_qs[..32 * n], "{} quants", kernels.name());
        for (i, (g, w)) in d.iter().zip(&want_d).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{} scale of block {i}",
                kernels.name()
            );
        }
    }
    let (mut qs, mut d) = (vec![0i8; 31], vec![0f32; 1]);
    assert!(kernels.quantize_acts(&x[..31], &mut qs, &mut d).is_err());
    let (mut qs, mut d) = (vec![0i8; 64], vec![0f32; 1]);
    assert!(kernels.quantize_acts(&x[..64], &mut qs, &mut d).is_err());
    println!(
        "quantize_acts: {nb} blocks, kernels {} match the scalar bytes",
        kernels.name()
    );
}

/// Blocks that stress the activation quantizer: exact ties, the value just
/// below one half, zeros, subnormals, huge values, infinities and NaN.
fn nasty_activation_blocks() -> Vec<f32> {
    let mut v: Vec<f32> = Vec::new();
    let mut block = |f: &dyn Fn(usize) -> f32| v.extend((0..32).map(f));
    // amax 127 gives d = 1, id = 1: every x.5 is a tie, 0.49999997 is not.
    block(&|i| match i {
        0 => 127.0,
        1 => 0.49999997,
        2 => -0.49999997,
        3 => 0.5,
        4 => -0.5,
        5 => 1.5,
        6 => -2.5,
        7 => 126.5,
        8 => -126.5,
        9 => -127.0,
        10 => 0.50000006,
        11 => -0.0,
        _ => (i as f32 - 16.0) + 0.5,
    });
    // Ties after scaling by a non-trivial id.
    block(&|i| (i as f32 - 15.5) * 0.1);
    block(&|i| 0.49999997 * (i as f32 + 1.0));
    block(&|_| 0.0);
    block(&|i| if i % 2 == 0 { 0.0 } else { -0.0 });
    // Subnormal inputs: d underflows or id overflows to infinity.
    block(&|i| f32::from_bits(i as u32 + 1));
    block(&|i| -f32::from_bits(0x0040_0000 + i as u32 * 77));
    block(&|i| f32::MIN_POSITIVE * (i as f32 - 7.0));
    // Huge values, f16 overflow of the scale.
    block(&|i| f32::MAX * if i % 3 == 0 { 1.0 } else { -0.7 });
    block(&|i| 65504.0 * 127.0 * (i as f32 / 31.0));
    block(&|i| 65520.0 * 127.0 * if i == 5 { -1.0 } else { 0.25 });
    // Infinities and NaN (NaN is ignored by max |x| and quantizes to 0).
    block(&|i| if i == 3 { f32::INFINITY } else { i as f32 });
    block(&|i| {
        if i == 30 {
            f32::NEG_INFINITY
        } else {
            -(i as f32)
        }
    });
    block(&|i| {
        if i % 4 == 1 {
            f32::NAN
        } else {
            i as f32 * 0.3 - 4.0
        }
    });
    block(&|_| f32::NAN);
    block(&|i| if i == 0 { -f32::NAN } else { 1e-3 * i as f32 });
    v
}

fn check_quantize(kernels: &Kernels, x: &[f32]) {
    let (mut q0, mut d0) = (vec![0i8; x.len()], vec![0f32; x.len() / 32]);
    let (mut q1, mut d1) = (vec![1i8; x.len()], vec![1f32; x.len() / 32]);
    q8_0::quantize_acts(x, &mut q0, &mut d0).unwrap();
    kernels.quantize_acts(x, &mut q1, &mut d1).unwrap();
    for b in 0..x.len() / 32 {
        assert_eq!(
            d0[b].to_bits(),
            d1[b].to_bits(),
            "{} block {b}: scale {} vs reference {} (x {:?})",
            kernels.name(),
            d1[b],
            d0[b],
            &x[b * 32..b * 32 + 32]
        );
        assert_eq!(
            q0[b * 32..b * 32 + 32],
            q1[b * 32..b * 32 + 32],
            "{} block {b}: quants differ (x {:?})",
            kernels.name(),
            &x[b * 32..b * 32 + 32]
        );
    }
}

#[test]
fn quantize_acts_matches_reference_on_nasty_inputs() {
    let kernels = detected_kernels();
    check_quantize(&kernels, &nasty_activation_blocks());
    // Random bit patterns: every exponent, NaN payloads, subnormals.
    // Signalling NaNs are made quiet: no arithmetic produces one, and the
    // NEON reduction treats them differently from the scalar loop (the
    // documented exception in docs/kernels.md).
    let mut s = 0x1234_5678_9abc_def1u64;
    let bits: Vec<f32> = (0..32 * 4096)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let b = (s >> 32) as u32;
            let nan = b & 0x7f80_0000 == 0x7f80_0000 && b & 0x007f_ffff != 0;
            f32::from_bits(if nan { b | 0x0040_0000 } else { b })
        })
        .collect();
    check_quantize(&kernels, &bits);
    // Ordinary data at many scales, and the kernel tests' activations.
    for (i, scale) in [1e-30f32, 1e-8, 1e-3, 1.0, 3.0, 1e4, 1e30]
        .iter()
        .enumerate()
    {
        check_quantize(&kernels, &noise(32 * 64, i as u64 + 3, *scale));
    }
    for kind in 0..4 {
        check_quantize(&kernels, &activation_values(kind, 32 * 33, kind as u64));
    }
    // Shape errors are errors.
    let x = vec![0f32; 64];
    let (mut q, mut d) = (vec![0i8; 64], vec![0f32; 2]);
    assert!(kernels
        .quantize_acts(&x[..48], &mut q[..48], &mut d)
        .is_err());
    assert!(kernels.quantize_acts(&x, &mut q[..32], &mut d).is_err());
    assert!(kernels.quantize_acts(&x, &mut q, &mut d[..1]).is_err());
    println!(
        "quantize_acts: kernels {} match the reference bit for bit",
        kernels.name()
    );
}

#[test]
fn minus_128_activation_quants_match_the_reference() {
    // The quantizer never makes -128, but the kernels must still agree with
    // the reference on any quant bytes (the AVX2 Q8_0x8 kernel falls back).
    let kernels = detected_kernels();
    for layout in [Layout::Q4_0x4, Layout::Q8_0x8] {
        for &(rows, m) in &[(9usize, 1usize), (17, 5)] {
            let cols = 96;
            let w = Matrix::new(layout, rows, cols, &weights(2, rows * cols, 7));
            let mut a = acts(&activation_values(2, m * cols, 3));
            for (i, q) in a.qs.iter_mut().enumerate() {
                if i % 3 == 0 {
                    *q = -128;
                }
            }
            let mut want = vec![0f32; m * rows];
            let view = w.view();
            reference::gemm_q8_0(&view, &a.qs, &a.d, m, &mut want).unwrap();
            check_kernels(&kernels, &w, &a, m, &want);
        }
    }
}

#[test]
fn matvec_float_kernels_match_the_reference() {
    let kernels = detected_kernels();
    let mut cases = 0;
    let shapes = (1..=17usize)
        .flat_map(|r| [1usize, 7, 8, 9, 16, 33, 64].map(|c| (r, c)))
        .chain([(5, 1024), (64, 896)]);
    for (rows, cols) in shapes {
        let mut w = noise(rows * cols, rows as u64 * 31 + cols as u64, 1.0);
        // Extremes: zeros, signed zeros, subnormal and huge weights.
        for (i, v) in w.iter_mut().enumerate() {
            match i % 23 {
                3 => *v = 0.0,
                5 => *v = -0.0,
                7 => *v = 1e-40,
                11 => *v = 3e4,
                _ => {}
            }
        }
        let x = noise(cols, 7 + cols as u64, 2.0);
        let f32_bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        let f16_bytes: Vec<u8> = w
            .iter()
            .flat_map(|v| f16::f32_to_f16(*v).to_le_bytes())
            .collect();
        for (layout, bytes) in [(Layout::F32, &f32_bytes), (Layout::F16, &f16_bytes)] {
            // An odd offset: the kernels must not assume alignment.
            let mut shifted = vec![0u8; bytes.len() + 1];
            shifted[1..].copy_from_slice(bytes);
            let m = PackedMatrix::new(layout, rows, cols, &shifted[1..]).unwrap();
            let mut want = vec![0f32; rows];
            reference::matvec_float(&m, &x, &mut want).unwrap();
            let mut got = vec![f32::NAN; rows];
            kernels.matvec_float(&m, &x, &mut got).unwrap();
            for r in 0..rows {
                assert_eq!(
                    got[r].to_bits(),
                    want[r].to_bits(),
                    "{} {layout:?} {rows}x{cols} row {r}: {} vs reference {}",
                    kernels.name(),
                    got[r],
                    want[r]
                );
            }
            assert!(kernels.matvec_float(&m, &x[..cols - 1], &mut got).is_err());
            cases += 1;
        }
    }
    println!(
        "matvec_float: {cases} shapes, kernels {} match the reference bit for bit",
        kernels.name()
    );
}

/// The attention kernels (scores over the f16 key cache, weighted sum over
/// the f16 value cache) against the scalar reference, bit for bit: head
/// sizes with and without an 8-multiple, 1..40 cached rows, strides wider
/// than a head (GQA layout), unaligned starts, and extreme cache values.
#[test]
fn attention_kernels_match_the_reference() {
    use kestrel_core::model::ops;
    use kestrel_core::state::KvView;
    let kernels = detected_kernels();
    let mut cases = 0;
    for hd in [8usize, 16, 24, 64, 128, 12, 2] {
        for (n, stride_extra) in [
            (1usize, 0usize),
            (2, 8),
            (3, 0),
            (4, 24),
            (5, 64),
            (17, 8),
            (40, 0),
        ] {
            let stride = hd + stride_extra;
            let len = (n - 1) * stride + hd + 3;
            let mut cache: Vec<u16> = noise(len, (hd * 100 + n) as u64, 3.0)
                .iter()
                .map(|&v| f16::f32_to_f16(v))
                .collect();
            // Zeros, signed zeros, subnormal halves, the largest half.
            for (i, c) in cache.iter_mut().enumerate() {
                match i % 29 {
                    2 => *c = 0x0000,
                    4 => *c = 0x8000,
                    6 => *c = 0x0001,
                    8 => *c = 0x83ff,
                    10 => *c = 0x7bff,
                    _ => {}
                }
            }
            let q = noise(hd, 5 + hd as u64, 1.5);
            for start in [0usize, 1, 3] {
                let view = KvView::F16(&cache[start..]);
                let mut want = vec![0f32; n];
                Kernels::Scalar.attn_scores(&q, view, stride, 0.125, &mut want);
                let mut got = vec![f32::NAN; n];
                kernels.attn_scores(&q, view, stride, 0.125, &mut got);
                for j in 0..n {
                    assert_eq!(
                        got[j].to_bits(),
                        want[j].to_bits(),
                        "{} scores hd {hd} n {n} stride {stride} row {j}: {} vs {}",
                        kernels.name(),
                        got[j],
                        want[j]
                    );
                }
                let mut probs = noise(n, n as u64, 1.0);
                ops::softmax(&mut probs);
                let mut want = vec![0f32; hd];
                Kernels::Scalar.attn_values(&probs, view, stride, &mut want);
                let mut got = vec![f32::NAN; hd];
                kernels.attn_values(&probs, view, stride, &mut got);
                for i in 0..hd {
                    assert_eq!(
                        got[i].to_bits(),
                        want[i].to_bits(),
                        "{} values hd {hd} n {n} stride {stride} elem {i}: {} vs {}",
                        kernels.name(),
                        got[i],
                        want[i]
                    );
                }
                cases += 1;
            }
        }
    }
    // An f32 cache (vector code on x86_64, the reference path on aarch64).
    let cache = noise(3 * 64, 9, 1.0);
    let q = noise(64, 10, 1.0);
    let mut want = vec![0f32; 3];
    let mut got = vec![0f32; 3];
    Kernels::Scalar.attn_scores(&q, KvView::F32(&cache), 64, 1.0, &mut want);
    kernels.attn_scores(&q, KvView::F32(&cache), 64, 1.0, &mut got);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&want), bits(&got));
    println!(
        "attention: {cases} cases, kernels {} match the reference bit for bit",
        kernels.name()
    );
}

/// The online-softmax attention of a block of query rows
/// (`model::attend`): every kernel set gives the scalar kernels' bits; a
/// row's output does not depend on the other rows of its block (each row
/// alone gives the same bits); rows of 1 to 4 tiles and lengths on and
/// next to the tile edges agree with the softmax attention computed in
/// f64 from the same cache. The online tile itself, from a maximum of
/// `-inf` and scaled by `1 / sum`, is the softmax's bits, and so are two
/// tiles whose first holds nothing but `-inf`.
#[test]
fn online_attention_matches_f64_and_is_row_independent() {
    use kestrel_core::model::attend::{attend, Cached, Work};
    use kestrel_core::state::{attention_work_per_row, KvView, KEY_TILE};
    let kernels = detected_kernels();
    for n in [1usize, 7, 8, 33, 200] {
        for rows in [1usize, 3, 8, 11] {
            let mut want = noise(rows * n, (n * 10 + rows) as u64, 40.0);
            let got = want.clone();
            for row in want.chunks_mut(n) {
                kestrel_core::model::ops::softmax(row);
            }
            for k in [&kernels, &Kernels::Scalar] {
                let mut maxes = vec![f32::NEG_INFINITY; rows];
                let mut sums = vec![0f32; rows];
                let mut x = got.clone();
                k.softmax_rows_online(&mut x, n, &mut maxes, &mut sums);
                for (row, &s) in x.chunks_mut(n).zip(&sums) {
                    let inv = 1.0 / s;
                    row.iter_mut().for_each(|v| *v *= inv);
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&x), bits(&want), "{} online tile n {n}", k.name());
            }
        }
    }
    // A first tile of nothing but -inf adds nothing: two tiles give the
    // softmax of the whole row (the -inf positions 0).
    let mut row = vec![f32::NEG_INFINITY; 5];
    row.extend(noise(7, 3, 20.0));
    let mut want = row.clone();
    kestrel_core::model::ops::softmax(&mut want);
    for k in [&kernels, &Kernels::Scalar] {
        let (mut max, mut sum, mut first) = ([f32::NEG_INFINITY], [0f32], row[..5].to_vec());
        k.softmax_rows_online(&mut first, 5, &mut max, &mut sum);
        assert_eq!((max[0], sum[0]), (f32::NEG_INFINITY, 0.0), "{}", k.name());
        let (mut max2, mut sum2, mut second) = (max, [0f32], row[5..].to_vec());
        k.softmax_rows_online(&mut second, 7, &mut max2, &mut sum2);
        let a = kestrel_core::model::ops::exp(max[0] - max2[0]);
        let inv = 1.0 / (sum[0] * a + sum2[0]);
        let got: Vec<f32> = first.iter().chain(&second).map(|&e| e * inv).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{} -inf tile", k.name());
    }
    let (hd, stride, cached_rows) = (16usize, 40usize, 3 * KEY_TILE + 5);
    let lens = [
        1,
        cached_rows,
        KEY_TILE - 1,
        KEY_TILE,
        KEY_TILE + 1,
        2 * KEY_TILE,
        2 * KEY_TILE + 1,
        5,
        cached_rows,
        3 * KEY_TILE,
    ];
    let rows = lens.len();
    let scale = 0.25;
    let raw = noise(cached_rows * stride + hd, 77, 2.0);
    let halves: Vec<u16> = raw.iter().map(|&v| f16::f32_to_f16(v)).collect();
    let raw_v = noise(cached_rows * stride + hd, 78, 2.0);
    let halves_v: Vec<u16> = raw_v.iter().map(|&v| f16::f32_to_f16(v)).collect();
    let qs = noise(rows * hd, 79, 1.5);
    // Head at element 8 of each row (a view that does not start at 0).
    let caches: [(KvView, KvView); 2] = [
        (KvView::F16(&halves[8..]), KvView::F16(&halves_v[8..])),
        (KvView::F32(&raw[8..]), KvView::F32(&raw_v[8..])),
    ];
    for (keys, values) in caches {
        let cached = Cached {
            keys,
            values,
            stride,
        };
        let run = |k: &Kernels, pick: &[usize]| -> Vec<f32> {
            let mut buf = vec![f32::NAN; pick.len() * attention_work_per_row(hd).unwrap()];
            let mut w = Work::carve(&mut buf, pick.len(), hd);
            for (q, &i) in w.qs.chunks_exact_mut(hd).zip(pick) {
                q.copy_from_slice(&qs[i * hd..(i + 1) * hd]);
            }
            attend(k, cached, hd, scale, pick.len(), &|r| lens[pick[r]], &mut w);
            w.out[..pick.len() * hd].to_vec()
        };
        let all: Vec<usize> = (0..rows).collect();
        let want = run(&Kernels::Scalar, &all);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&run(&kernels, &all)),
            bits(&want),
            "{}",
            kernels.name()
        );
        for i in 0..rows {
            let alone = run(&kernels, &[i]);
            assert_eq!(
                bits(&alone),
                bits(&want[i * hd..(i + 1) * hd]),
                "row {i} alone"
            );
            // The softmax attention in f64 over the same cached values.
            let at = |view: KvView, j: usize, c: usize| view.get(j * stride + c) as f64;
            let q = &qs[i * hd..(i + 1) * hd];
            let s: Vec<f64> = (0..lens[i])
                .map(|j| (0..hd).map(|c| q[c] as f64 * at(keys, j, c)).sum::<f64>() * scale as f64)
                .collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
            let l: f64 = e.iter().sum();
            for c in 0..hd {
                let o: f64 = e
                    .iter()
                    .enumerate()
                    .map(|(j, p)| p * at(values, j, c))
                    .sum::<f64>()
                    / l;
                let g = want[i * hd + c] as f64;
                assert!(
                    (g - o).abs() <= 2e-5 * (1.0 + o.abs()),
                    "row {i} elem {c}: {g} vs {o}"
                );
            }
        }
    }
}

/// The matrix-multiply epilogues (store, residual add, SwiGLU on the fused
/// gate/up runs) give the bits of a plain multiply followed by the separate
/// operation, for one token and for a batch, serially and split over a pool
/// of 1..=4 threads (parts must keep whole SwiGLU runs).
#[test]
fn matmul_epilogues_match_the_separate_operations() {
    use kestrel_core::kernels::{Acts as KActs, Epilogue};
    use kestrel_core::model::ops;
    use kestrel_core::parallel::Serial;
    let kernels = detected_kernels();
    let pools: Vec<kestrel::pool::Pool> = (1..=4).map(kestrel::pool::Pool::new).collect();
    for layout in [Layout::Q4_0x4, Layout::Q8_0x8] {
        for (rows, cols) in [(48usize, 64usize), (208, 96), (16, 32), (1040, 128)] {
            let w = Matrix::new(layout, rows, cols, &weights(1, rows * cols, rows as u64));
            for m in [1usize, 3, 7] {
                let a = acts(&activation_values(0, m * cols, m as u64));
                let x = noise(m * cols, 3, 1.0);
                let acts = KActs {
                    x: &x,
                    qs: &a.qs,
                    d: &a.d,
                    sums: &[],
                };
                let mut plain = vec![0f32; m * rows];
                let mut tmp = vec![0f32; m * rows];
                kernels
                    .matmul(&Serial, &w.view(), &acts, m, &mut plain, &mut tmp)
                    .unwrap();
                let base = noise(m * rows, 11, 2.0);
                let mut want_add = base.clone();
                ops::add_in_place(&mut want_add, &plain);
                let mut want_swiglu = vec![0f32; m * rows / 2];
                for t in 0..m {
                    ops::swiglu_runs(
                        &mut want_swiglu[t * rows / 2..(t + 1) * rows / 2],
                        &plain[t * rows..(t + 1) * rows],
                    )
                    .unwrap();
                }
                for pool in &pools {
                    for (epi, want) in [
                        (Epilogue::Store, &plain),
                        (Epilogue::Add, &want_add),
                        (Epilogue::SwiGlu, &want_swiglu),
                    ] {
                        let mut got = if epi == Epilogue::Add {
                            base.clone()
                        } else {
                            vec![f32::NAN; want.len()]
                        };
                        kernels
                            .matmul_into(pool, &w.view(), &acts, m, epi, &mut got, &mut tmp)
                            .unwrap();
                        let same = got
                            .iter()
                            .zip(want.iter())
                            .all(|(g, r)| g.to_bits() == r.to_bits());
                        assert!(
                            same,
                            "{layout:?} {rows}x{cols} m={m} {epi:?} {} threads",
                            kestrel_core::parallel::Parallel::threads(pool)
                        );
                    }
                }
            }
        }
    }
    // SwiGLU needs whole runs of 16 rows.
    let w = Matrix::new(Layout::Q8_0x8, 24, 32, &weights(1, 24 * 32, 1));
    let a = acts(&activation_values(0, 32, 1));
    let acts = KActs {
        x: &[],
        qs: &a.qs,
        d: &a.d,
        sums: &[],
    };
    let (mut out, mut tmp) = (vec![0f32; 12], vec![0f32; 24]);
    assert!(kernels
        .matmul_into(
            &Serial,
            &w.view(),
            &acts,
            1,
            Epilogue::SwiGlu,
            &mut out,
            &mut tmp
        )
        .is_err());
}

/// The engine's `exp` (branch-free, vectorizable, the same bits everywhere)
/// against f64 `exp` over its whole range: within 2 ulp, 0 below the
/// range, NaN through. And SiLU / softmax built on it.
#[test]
fn exp_is_within_two_ulp() {
    use kestrel_core::model::ops;
    let mut worst = 0u32;
    let mut x = -87.3f32;
    while x < 88.0 {
        for dx in [0.0f32, 1e-3, 0.3466, 0.5] {
            let v = (x + dx).min(88.0);
            let got = ops::exp(v);
            let want = (v as f64).exp() as f32;
            let ulps = (got.to_bits() as i64 - want.to_bits() as i64).unsigned_abs() as u32;
            worst = worst.max(ulps);
            assert!(ulps <= 2, "exp({v}) = {got}, want {want} ({ulps} ulp)");
        }
        x += 0.0137;
    }
    for v in [0.0f32, -0.0, 1.0, -1.0, 1e-8, -1e-8] {
        assert!((ops::exp(v) - (v as f64).exp() as f32).abs() <= f32::EPSILON);
    }
    assert_eq!(ops::exp(-100.0), 0.0);
    assert_eq!(ops::exp(f32::NEG_INFINITY), 0.0);
    assert!(ops::exp(f32::INFINITY).is_finite());
    assert!(ops::exp(f32::NAN).is_nan());
    assert!((ops::silu(3.0) - 3.0 / (1.0 + (-3.0f64).exp()) as f32).abs() < 1e-6);
    assert!(ops::silu(-200.0).abs() < 1e-30);
    let mut p = [1.0f32, 2.0, f32::NEG_INFINITY, 3.0];
    ops::softmax(&mut p);
    assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6 && p[2] == 0.0);
    println!("exp: worst error {worst} ulp over [-87.3, 88]");
}

/// The vectorized SwiGLU and softmax against the scalar `ops` versions, bit
/// for bit: every length up to 70 (tails), values across exp's whole range
/// and past it, zeros, infinities.
#[test]
fn swiglu_and_softmax_kernels_match_the_reference() {
    use kestrel_core::model::ops;
    let kernels = detected_kernels();
    let special = [
        0.0f32,
        -0.0,
        1e-40,
        -1e-40,
        87.0,
        -87.0,
        88.5,
        -88.5,
        100.0,
        -100.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    for runs in [0usize, 1, 2, 3, 7, 16] {
        let mut gu = noise(16 * runs, runs as u64 + 1, 30.0);
        for (i, v) in gu.iter_mut().enumerate() {
            if i % 5 == 0 {
                *v = special[(i / 5) % special.len()];
            }
        }
        let mut want = vec![0f32; 8 * runs];
        ops::swiglu_runs(&mut want, &gu).unwrap();
        let mut got = vec![f32::NAN; 8 * runs];
        kernels.swiglu_runs(&mut got, &gu);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{} swiglu runs {runs} elem {i} (g {}): {g} vs {w}",
                kernels.name(),
                gu[16 * (i / 8) + i % 8]
            );
        }
    }
    for n in 1..=70usize {
        let mut x = noise(n, n as u64, 40.0);
        if n > 3 {
            x[1] = -1e30;
            x[2] = f32::NEG_INFINITY;
        }
        let mut want = x.clone();
        ops::softmax(&mut want);
        let mut got = x.clone();
        kernels.softmax(&mut got);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{} softmax n {n} elem {i}: {g} vs {w}",
                kernels.name()
            );
        }
    }
    // Rows softmaxed together (up to 8 in lockstep, then the rest) give
    // each row the one-row softmax's bits; a partial last row is a row.
    for rows in 1..=10usize {
        for n in [1usize, 2, 7, 33] {
            let mut x = noise(rows * n + n / 2, (rows * 100 + n) as u64, 40.0);
            for (i, v) in x.iter_mut().enumerate() {
                if i % 11 == 3 {
                    *v = special[(i / 11) % special.len()];
                }
            }
            let mut want = x.clone();
            for row in want.chunks_mut(n) {
                ops::softmax(row);
            }
            for k in [&kernels, &kestrel_core::kernels::Kernels::Scalar] {
                let mut got = x.clone();
                k.softmax_rows(&mut got, n);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
                assert!(same, "{} softmax_rows rows {rows} n {n}", k.name());
            }
        }
    }
    println!(
        "swiglu/softmax: kernels {} match the reference bit for bit",
        kernels.name()
    );
}

/// The engine's one sort (heapsort) against the standard library's, on
/// every length up to 300 and a large one, with many equal keys.
#[test]
fn heapsort_sorts_like_std() {
    for n in (0..300usize).chain([10_007]) {
        let v: Vec<u32> = noise(n, n as u64 + 3, 50.0)
            .iter()
            .map(|x| (x.abs() as u32) % 97)
            .collect();
        let mut a = v.clone();
        kestrel_core::sort::sort_by(&mut a, |x, y| x.cmp(y));
        let mut b = v;
        b.sort();
        assert_eq!(a, b, "length {n}");
    }
}

/// Batches past the tiled GEMMs' per-call limit (64 rows) match the
/// reference bit for bit.
#[test]
fn gemm_batches_past_64_rows() {
    let kernels = detected_kernels();
    for layout in [Layout::Q4_0x4, Layout::Q8_0x8] {
        let (rows, cols, m) = (24usize, 96usize, 70usize);
        let w = Matrix::new(layout, rows, cols, &weights(2, rows * cols, 5));
        let a = acts(&activation_values(1, m * cols, 9));
        let mut want = vec![0f32; m * rows];
        reference::gemm_q8_0(&w.view(), &a.qs, &a.d, m, &mut want).unwrap();
        check_kernels(&kernels, &w, &a, m, &want);
    }
}

/// `Exec::linear` gives the same bits on 1 to 4 threads as on one, for a
/// Q8_0-activation layout (Q8_0x8) and a Q8_K one (Q4_Kx4): batches of 8
/// rows and more quantize their activations in parts over the pool (each
/// part its own rows' quants, scales and sums), smaller ones in one piece.
#[test]
fn linear_gives_the_same_bits_on_any_thread_count() {
    use kestrel_core::parallel::{Parallel, Serial};
    use kestrel_kernels::layouts::q4k;
    let kernels = detected_kernels();
    let pools: Vec<kestrel::pool::Pool> = (1..=4).map(kestrel::pool::Pool::new).collect();
    let (rows, cols) = (64usize, 512usize);
    // Q4_K super-blocks (144 bytes per 256 weights): finite scales (d and
    // dmin 2^-6), every other byte from the noise.
    let mut q4k_src: Vec<u8> = noise(rows * cols / 256 * 144, 5, 1.0)
        .iter()
        .map(|v| (v * 127.0) as i8 as u8)
        .collect();
    for block in q4k_src.chunks_exact_mut(144) {
        block[..4].copy_from_slice(&[0x00, 0x24, 0x00, 0x24]);
    }
    let mut q4k_packed = vec![0u8; Layout::Q4Kx4.matrix_bytes(rows, cols).unwrap()];
    q4k::repack_q4_k(&q4k_src, rows, cols, &mut q4k_packed).unwrap();
    let q8 = Matrix::new(Layout::Q8_0x8, rows, cols, &weights(1, rows * cols, 9));
    let matrices = [
        q8.view(),
        PackedMatrix::new(Layout::Q4Kx4, rows, cols, &q4k_packed).unwrap(),
    ];
    for w in &matrices {
        for m in [1usize, 4, 8, 11, 33] {
            let x = noise(m * cols, m as u64, 3.0);
            let want = linear_on(&kernels, &Serial, w, &x, m);
            for pool in &pools {
                let got = linear_on(&kernels, pool, w, &x, m);
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{:?} m {m} {} threads",
                    w.layout,
                    pool.threads()
                );
            }
        }
    }
}

/// `W x` for the `m` rows of `x` through `Exec::linear` on `pool`.
fn linear_on<P: kestrel_core::parallel::Parallel>(
    kernels: &Kernels,
    pool: &P,
    w: &PackedMatrix,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    use kestrel_core::kernels::Epilogue;
    use kestrel_core::model::linear::Exec;
    use kestrel_core::state::Scratch;
    let (mut tmp, mut qs, mut d, mut sums) = (
        vec![0f32; m * w.rows],
        vec![0i8; m * w.cols],
        vec![0f32; m * w.cols / 32],
        vec![0i16; m * w.cols / 32],
    );
    let mut scratch = Scratch {
        tmp: &mut tmp,
        act_qs: &mut qs,
        act_d: &mut d,
        act_sums: &mut sums,
    };
    let mut out = vec![0f32; m * w.rows];
    Exec { kernels, pool }
        .linear(w, x, m, &mut scratch, Epilogue::Store, &mut out)
        .unwrap();
    out
}
