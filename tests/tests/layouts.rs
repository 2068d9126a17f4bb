//! The layouts written whole (`kestrel_kernels::layouts`; the 8-row Q6_Kx8, Q3_Kx8,
//! IQ4_XSx8, Q2_Kx8, IQ3_XXSx8, IQ3_Sx8, IQ2_XXSx8, IQ2_XSx8 and IQ2_Sx8 and
//! the 4-row Q4_Kx4 and Q5_Kx4 here, whose GGUF blocks are 256 weights; and
//! Q5_0x4, Q5_1x4, Q4_0x4, IQ4_NLx4 and Q8_0x8, of 32-weight blocks): each repacker
//! keeps the GGUF bytes (its round trip through the tests' inverse gives
//! them back), the generic accessors give ggml's dequantized values bit for
//! bit, and sizes that do not fit are refused. (The kernels against their
//! generic twins: the kernel crate's `arch_tests`.)

use kestrel_core::gguf::{dequantize_row, GgmlType};
use kestrel_core::quant::f16::read_f16;
use kestrel_core::Error;
use kestrel_kernels::layout::QK_K;
use kestrel_kernels::layouts::{
    iq2s, iq2xs, iq2xxs, iq3s, iq3xxs, iq4nl, iq4xs, q2k, q3k, q4_0, q4k, q5, q5k, q6k, q8_0,
};
use kestrel_kernels::ShapeError;
use kestrel_tests::{
    unpack_iq2_s, unpack_iq2_xs, unpack_iq2_xxs, unpack_iq3_s, unpack_iq3_xxs, unpack_iq4_nl,
    unpack_iq4_xs, unpack_q2_k, unpack_q3_k, unpack_q4_0, unpack_q4_k, unpack_q5_0, unpack_q5_1,
    unpack_q5_k, unpack_q6_k, unpack_q8_0,
};

const MAX_ROWS: usize = 11;
const MAX_COLS: usize = 1024;
/// Room for the largest GGUF rows and packed matrices of the tests.
const SRC: usize = MAX_ROWS * MAX_COLS / QK_K * 210;
const PACKED: usize = MAX_ROWS.div_ceil(8) * MAX_COLS / QK_K * 8 * 210;

/// `(src, rows, cols, out)`: GGUF rows to the layout's bytes.
type Repack = fn(&[u8], usize, usize, &mut [u8]) -> Result<(), ShapeError>;
/// `(packed, rows, cols, out)`: the layout's bytes back to GGUF rows.
type Unpack = fn(&[u8], usize, usize, &mut [u8]) -> Result<(), Error>;

/// One 8-row layout written whole: its GGUF type and block, where the
/// block's f16 `d` is, its sizes, repacker, the tests' inverse and the
/// value of weight `i` of row `r` of a super-block from the generic
/// accessors, in ggml's dequantizer's operations.
struct Whole {
    ty: GgmlType,
    block_bytes: usize,
    d_at: usize,
    super_block_bytes: usize,
    packed_bytes: fn(usize, usize) -> Option<usize>,
    repack: Repack,
    unpack: Unpack,
    value: fn(&[u8], usize, usize) -> f32,
}

const LAYOUTS: [Whole; 9] = [
    Whole {
        ty: GgmlType::Q6_K,
        block_bytes: q6k::Q6_K_BLOCK_BYTES,
        d_at: 208,
        super_block_bytes: q6k::Q6KX8_BLOCK_BYTES,
        packed_bytes: q6k::q6_kx8_bytes,
        repack: q6k::repack_q6_k,
        unpack: unpack_q6_k,
        value: |sb, r, i| {
            // ggml: d * scale * (q - 32), `d * scale` first.
            let s = q6k::generic::q6kx8_scale(sb, r, i / 16) as f32;
            read_f16(sb, 2 * r) * s * q6k::generic::q6kx8_weight(sb, r, i) as f32
        },
    },
    Whole {
        ty: GgmlType::Q3_K,
        block_bytes: q3k::Q3_K_BLOCK_BYTES,
        d_at: 108,
        super_block_bytes: q3k::Q3KX8_BLOCK_BYTES,
        packed_bytes: q3k::q3_kx8_bytes,
        repack: q3k::repack_q3_k,
        unpack: unpack_q3_k,
        value: |sb, r, i| {
            let s = q3k::generic::q3kx8_scale(sb, r, i / 16) as f32;
            read_f16(sb, 2 * r) * s * q3k::generic::q3kx8_weight(sb, r, i) as f32
        },
    },
    Whole {
        ty: GgmlType::IQ4_XS,
        block_bytes: iq4xs::IQ4_XS_BLOCK_BYTES,
        d_at: 0,
        super_block_bytes: iq4xs::IQ4XSX8_BLOCK_BYTES,
        packed_bytes: iq4xs::iq4_xsx8_bytes,
        repack: iq4xs::repack_iq4_xs,
        unpack: unpack_iq4_xs,
        value: |sb, r, i| {
            let s = iq4xs::generic::iq4xsx8_scale(sb, r, i / 16) as f32;
            read_f16(sb, 2 * r) * s * iq4xs::generic::iq4xsx8_weight(sb, r, i) as f32
        },
    },
    Whole {
        ty: GgmlType::Q2_K,
        block_bytes: q2k::Q2_K_BLOCK_BYTES,
        d_at: 80,
        super_block_bytes: q2k::Q2KX8_BLOCK_BYTES,
        packed_bytes: q2k::q2_kx8_bytes,
        repack: q2k::repack_q2_k,
        unpack: unpack_q2_k,
        value: |sb, r, i| {
            let (sc, m) = q2k::generic::q2kx8_scale_min(sb, r, i / 16);
            let (d, dmin) = (read_f16(sb, 2 * r), read_f16(sb, 16 + 2 * r));
            (d * sc as f32) * q2k::generic::q2kx8_weight(sb, r, i) as f32 - dmin * m as f32
        },
    },
    Whole {
        ty: GgmlType::IQ3_XXS,
        block_bytes: iq3xxs::IQ3_XXS_BLOCK_BYTES,
        d_at: 0,
        super_block_bytes: iq3xxs::IQ3XXSX8_BLOCK_BYTES,
        packed_bytes: iq3xxs::iq3_xxsx8_bytes,
        repack: iq3xxs::repack_iq3_xxs,
        unpack: unpack_iq3_xxs,
        value: |sb, r, i| {
            // ggml: d * (0.5 + ls) * 0.5 * g * sign, the scale 2 ls + 1.
            let ls = (iq3xxs::generic::iq3xxsx8_scale(sb, r, i / 32) - 1) / 2;
            let v = iq3xxs::generic::iq3xxsx8_weight(sb, r, i);
            let sign = if v < 0 { -1.0 } else { 1.0 };
            read_f16(sb, 2 * r) * (0.5 + ls as f32) * 0.5 * v.abs() as f32 * sign
        },
    },
    Whole {
        ty: GgmlType::IQ3_S,
        block_bytes: iq3s::IQ3_S_BLOCK_BYTES,
        d_at: 0,
        super_block_bytes: iq3s::IQ3SX8_BLOCK_BYTES,
        packed_bytes: iq3s::iq3_sx8_bytes,
        repack: iq3s::repack_iq3_s,
        unpack: unpack_iq3_s,
        value: |sb, r, i| {
            // ggml: d * (1 + 2 ls) * g * sign.
            let s = iq3s::generic::iq3sx8_scale(sb, r, i / 32);
            let v = iq3s::generic::iq3sx8_weight(sb, r, i);
            let sign = if v < 0 { -1.0 } else { 1.0 };
            read_f16(sb, 2 * r) * s as f32 * v.abs() as f32 * sign
        },
    },
    Whole {
        ty: GgmlType::IQ2_XXS,
        block_bytes: iq2xxs::IQ2_XXS_BLOCK_BYTES,
        d_at: 0,
        super_block_bytes: iq2xxs::IQ2XXSX8_BLOCK_BYTES,
        packed_bytes: iq2xxs::iq2_xxsx8_bytes,
        repack: iq2xxs::repack_iq2_xxs,
        unpack: unpack_iq2_xxs,
        value: |sb, r, i| {
            // ggml: d * (0.5 + ls) * 0.25 * g * sign, the scale 2 ls + 1.
            let ls = (iq2xxs::generic::iq2xxsx8_scale(sb, r, i / 32) - 1) / 2;
            let v = iq2xxs::generic::iq2xxsx8_weight(sb, r, i);
            let sign = if v < 0 { -1.0 } else { 1.0 };
            read_f16(sb, 2 * r) * (0.5 + ls as f32) * 0.25 * v.abs() as f32 * sign
        },
    },
    Whole {
        ty: GgmlType::IQ2_XS,
        block_bytes: iq2xs::IQ2_XS_BLOCK_BYTES,
        d_at: 0,
        super_block_bytes: iq2xs::IQ2XSX8_BLOCK_BYTES,
        packed_bytes: iq2xs::iq2_xsx8_bytes,
        repack: iq2xs::repack_iq2_xs,
        unpack: unpack_iq2_xs,
        value: |sb, r, i| {
            // ggml: d * (0.5 + ls) * 0.25 * g * sign, a scale per 16.
            let ls = (iq2xs::generic::iq2xsx8_scale(sb, r, i / 16) - 1) / 2;
            let v = iq2xs::generic::iq2xsx8_weight(sb, r, i);
            let sign = if v < 0 { -1.0 } else { 1.0 };
            read_f16(sb, 2 * r) * (0.5 + ls as f32) * 0.25 * v.abs() as f32 * sign
        },
    },
    Whole {
        ty: GgmlType::IQ2_S,
        block_bytes: iq2s::IQ2_S_BLOCK_BYTES,
        d_at: 0,
        super_block_bytes: iq2s::IQ2SX8_BLOCK_BYTES,
        packed_bytes: iq2s::iq2_sx8_bytes,
        repack: iq2s::repack_iq2_s,
        unpack: unpack_iq2_s,
        value: |sb, r, i| {
            // ggml: d * (0.5 + ls) * 0.25 * g * sign, a scale per 16.
            let ls = (iq2s::generic::iq2sx8_scale(sb, r, i / 16) - 1) / 2;
            let v = iq2s::generic::iq2sx8_weight(sb, r, i);
            let sign = if v < 0 { -1.0 } else { 1.0 };
            read_f16(sb, 2 * r) * (0.5 + ls as f32) * 0.25 * v.abs() as f32 * sign
        },
    },
];

/// Pseudo-random GGUF blocks of `k`'s type (every byte value in every
/// position over the first 256 blocks), `d` a moderate finite f16.
fn gguf_blocks(k: &Whole, seed: u64, out: &mut [u8]) {
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as u32
    };
    for (n, block) in out.chunks_exact_mut(k.block_bytes).enumerate() {
        let off = next() as usize;
        for (p, b) in block.iter_mut().enumerate() {
            *b = if n < 256 {
                (n + 37 * p + off) as u8
            } else {
                next() as u8
            };
        }
        let d = (next() % 0x1800 + 0x1800) as u16 | ((next() as u16 & 1) << 15);
        block[k.d_at..k.d_at + 2].copy_from_slice(&d.to_le_bytes());
    }
}

#[test]
fn round_trip_and_values_are_the_dequantizer_s() {
    let mut src = vec![0u8; SRC];
    let mut packed = vec![0u8; PACKED];
    let mut back = vec![0u8; SRC];
    let mut wf = vec![0.0f32; MAX_ROWS * MAX_COLS];
    for k in &LAYOUTS {
        for (seed, (rows, cols)) in [(1, 256), (8, 256), (9, 512), (11, 1024), (0, 256)]
            .into_iter()
            .enumerate()
        {
            let n = rows * cols / QK_K * k.block_bytes;
            let pn = (k.packed_bytes)(rows, cols).unwrap();
            gguf_blocks(k, seed as u64, &mut src[..n]);
            packed[..pn].fill(0xa5);
            (k.repack)(&src[..n], rows, cols, &mut packed[..pn]).unwrap();
            back[..n].fill(0x5a);
            (k.unpack)(&packed[..pn], rows, cols, &mut back[..n]).unwrap();
            assert_eq!(&back[..n], &src[..n], "{:?} {rows} x {cols}", k.ty);
            // The kernel crate's accessors give the dequantizer's values;
            // padding rows are zero.
            dequantize_row(k.ty, &src[..n], &mut wf[..rows * cols]).unwrap();
            let nb = cols / QK_K;
            for row in 0..rows.next_multiple_of(8) {
                for b in 0..nb {
                    let sb = &packed[((row / 8) * nb + b) * k.super_block_bytes..];
                    for i in 0..QK_K {
                        let got = (k.value)(sb, row % 8, i);
                        if row >= rows {
                            assert_eq!(got, 0.0, "padding row {row}");
                        } else {
                            let want = wf[row * cols + b * QK_K + i];
                            assert_eq!(want.to_bits(), got.to_bits(), "{:?} {row} {i}", k.ty);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn sizes_are_checked() {
    for k in &LAYOUTS {
        let mut out = vec![0u8; k.super_block_bytes];
        let src = vec![0u8; k.block_bytes];
        let bb = k.block_bytes;
        assert!((k.repack)(&src, 1, 255, &mut out).is_err());
        assert!((k.repack)(&src[..bb - 1], 1, 256, &mut out).is_err());
        let sbb = k.super_block_bytes;
        assert!((k.repack)(&src, 1, 256, &mut out[..sbb - 1]).is_err());
        assert!((k.repack)(&src, 1, 256, &mut out).is_ok());
        let mut back = vec![0u8; bb];
        assert!((k.unpack)(&out, 2, 256, &mut back).is_err());
        assert!((k.unpack)(&out, 1, 256, &mut back).is_ok());
        assert_eq!((k.packed_bytes)(9, 512).unwrap(), 2 * 2 * sbb);
        assert!((k.packed_bytes)(usize::MAX, 256).is_none());
    }
    assert_eq!(
        iq4xs::iq4_xsx8_bytes(16, 4096),
        iq4xs::iq4_xs_bytes(16, 4096)
    );
}

/// A 4-row layout that keeps its rows' GGUF bytes permuted (Q4_Kx4,
/// Q5_Kx4): its type, sizes, repacker, the tests' inverse, where byte `i`
/// of row `r`'s block goes, and its generic GEMM (Q8_K activations).
struct Scattered {
    ty: GgmlType,
    block_bytes: usize,
    super_block_bytes: usize,
    packed_bytes: fn(usize, usize) -> Option<usize>,
    repack: Repack,
    unpack: Unpack,
    offset: fn(usize, usize) -> usize,
    gemm: GenericQ8K,
}

/// `(w, rows, cols, qs, d, sums, m, out)`: a generic GEMM with Q8_K
/// activations.
type GenericQ8K =
    fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Result<(), ShapeError>;

const SCATTERED: [Scattered; 2] = [
    Scattered {
        ty: GgmlType::Q4_K,
        block_bytes: q4k::Q4_K_BLOCK_BYTES,
        super_block_bytes: q4k::Q4KX4_BLOCK_BYTES,
        packed_bytes: q4k::q4_kx4_bytes,
        repack: q4k::repack_q4_k,
        unpack: unpack_q4_k,
        offset: q4k::q4_kx4_offset,
        gemm: q4k::generic::gemm_q4_kx4_q8_k,
    },
    Scattered {
        ty: GgmlType::Q5_K,
        block_bytes: q5k::Q5_K_BLOCK_BYTES,
        super_block_bytes: q5k::Q5KX4_BLOCK_BYTES,
        packed_bytes: q5k::q5_kx4_bytes,
        repack: q5k::repack_q5_k,
        unpack: unpack_q5_k,
        offset: q5k::q5_kx4_offset,
        gemm: q5k::generic::gemm_q5_kx4_q8_k,
    },
];

/// Random GGUF K-quant rows: every byte random, `d` and `dmin` (the first
/// four bytes) finite normal f16 values of either sign.
fn k_rows(k: &Scattered, seed: u64, rows: usize, cols: usize) -> Vec<u8> {
    let mut x = seed;
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as u32
    };
    let mut v: Vec<u8> = (0..rows * cols / QK_K * k.block_bytes)
        .map(|_| next() as u8)
        .collect();
    for blk in v.chunks_exact_mut(k.block_bytes) {
        for at in [0, 2] {
            let d = (next() % 0x1800 + 0x1400) as u16 | ((next() as u16 & 1) << 15);
            blk[at..at + 2].copy_from_slice(&d.to_le_bytes());
        }
    }
    v
}

#[test]
fn four_row_k_layouts_keep_their_bytes() {
    for k in &SCATTERED {
        for rows in 1..=9 {
            for cols in [256, 512, 1536] {
                let src = k_rows(k, rows as u64, rows, cols);
                let mut packed = vec![0xaau8; (k.packed_bytes)(rows, cols).unwrap()];
                (k.repack)(&src, rows, cols, &mut packed).unwrap();
                let mut back = vec![0u8; src.len()];
                (k.unpack)(&packed, rows, cols, &mut back).unwrap();
                assert_eq!(back, src, "{:?} {rows} x {cols}", k.ty);
                // Padding rows are zeros.
                let nb = cols / QK_K;
                let last = &packed[(rows.div_ceil(4) - 1) * nb * k.super_block_bytes..];
                for sb in last.chunks_exact(k.super_block_bytes) {
                    for r in (rows - 1) % 4 + 1..4 {
                        for i in 0..k.block_bytes {
                            assert_eq!(sb[(k.offset)(r, i)], 0, "{:?}", k.ty);
                        }
                    }
                }
            }
        }
        // The offsets are a permutation of the super-block.
        let mut seen = vec![false; k.super_block_bytes];
        for r in 0..4 {
            for i in 0..k.block_bytes {
                let o = (k.offset)(r, i);
                assert!(!seen[o], "{:?}", k.ty);
                seen[o] = true;
            }
        }
        // Sizes that do not fit are refused.
        let bb = k.block_bytes;
        let mut out = vec![0u8; k.super_block_bytes];
        assert!((k.repack)(&vec![0; bb], 1, 255, &mut out).is_err());
        assert!((k.repack)(&vec![0; bb - 1], 1, 256, &mut out).is_err());
        let sbb = k.super_block_bytes;
        assert!((k.repack)(&vec![0; bb], 1, 256, &mut out[..sbb - 1]).is_err());
        assert!((k.unpack)(&out, 1, 256, &mut vec![0; bb + 1]).is_err());
        assert_eq!((k.packed_bytes)(5, 512).unwrap(), 2 * 2 * sbb);
        assert!((k.packed_bytes)(usize::MAX, 256).is_none());
    }
}

/// Each 4-row K layout's generic kernel against a dot product of ggml's
/// dequantized weights with the dequantized Q8_K activations, in f64.
#[test]
fn four_row_k_generic_kernels_match_the_dequantized_dot() {
    use kestrel_kernels::generic::quantize_acts_q8_k;
    for k in &SCATTERED {
        for (seed, (rows, cols, m)) in [(5, 256, 1), (7, 512, 3), (4, 1536, 2), (1, 768, 1)]
            .into_iter()
            .enumerate()
        {
            let src = k_rows(k, 11 + seed as u64, rows, cols);
            let mut packed = vec![0u8; (k.packed_bytes)(rows, cols).unwrap()];
            (k.repack)(&src, rows, cols, &mut packed).unwrap();
            let x: Vec<f32> = (0..m * cols)
                .map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let mut qs = vec![0i8; m * cols];
            let mut d = vec![0f32; m * cols / QK_K];
            let mut sums = vec![0i16; m * cols / 32];
            quantize_acts_q8_k(&x, &mut qs, &mut d, &mut sums).unwrap();
            let mut out = vec![0f32; m * rows];
            (k.gemm)(&packed, rows, cols, &qs, &d, &sums, m, &mut out).unwrap();
            let mut wf = vec![0f32; rows * cols];
            dequantize_row(k.ty, &src, &mut wf).unwrap();
            for t in 0..m {
                for r in 0..rows {
                    let (mut dot, mut mag) = (0f64, 0f64);
                    for c in 0..cols {
                        let a = d[t * cols / QK_K + c / QK_K] as f64 * qs[t * cols + c] as f64;
                        let w = wf[r * cols + c] as f64;
                        dot += w * a;
                        mag += (w * a).abs();
                    }
                    let got = out[t * rows + r] as f64;
                    assert!(
                        (got - dot).abs() <= 1e-5 * mag + 1e-30,
                        "{:?} rows {rows} cols {cols} t {t} r {r}: {got} vs {dot}",
                        k.ty
                    );
                }
            }
        }
    }
}

/// `(w, rows, cols, qs, d, m, out)`: a generic GEMM with Q8_0 activations.
type GenericQ8_0 =
    fn(&[u8], usize, usize, &[i8], &[f32], usize, &mut [f32]) -> Result<(), ShapeError>;

/// The Q5 layouts (32-weight blocks, 4 rows): their format, GGUF type,
/// sizes, repacker, the tests' inverse and generic GEMM.
/// One Q5 layout of [`Q5_LAYOUTS`].
type Q5Layout = (
    q5::Q5Format,
    GgmlType,
    fn(usize, usize) -> Option<usize>,
    Repack,
    Unpack,
    GenericQ8_0,
);

const Q5_LAYOUTS: [Q5Layout; 2] = [
    (
        q5::Q5_0,
        GgmlType::Q5_0,
        q5::q5_0x4_bytes,
        q5::repack_q5_0,
        unpack_q5_0,
        q5::generic::gemm_q5_0x4_q8_0,
    ),
    (
        q5::Q5_1,
        GgmlType::Q5_1,
        q5::q5_1x4_bytes,
        q5::repack_q5_1,
        unpack_q5_1,
        q5::generic::gemm_q5_1x4_q8_0,
    ),
];

/// `n` GGUF Q5 blocks of pseudo-random bytes; with `scales`, every `d`
/// (and `m`) a normal f16 around 0.01 of either sign.
fn q5_blocks(f: q5::Q5Format, seed: u32, n: usize, scales: bool) -> Vec<u8> {
    let mut x = seed;
    let mut next = move || {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        x >> 8
    };
    let mut out = vec![0u8; n * f.block_bytes];
    for blk in out.chunks_exact_mut(f.block_bytes) {
        for b in blk.iter_mut() {
            *b = next() as u8;
        }
        if scales {
            for h in 0..f.f16s {
                let e = (next() % 0x400) as u16 | 0x2000 | ((next() as u16 & 1) << 15);
                blk[2 * h..2 * h + 2].copy_from_slice(&e.to_le_bytes());
            }
        }
    }
    out
}

#[test]
fn q5_layouts_keep_their_bytes_and_check_sizes() {
    for (f, ty, bytes, repack, unpack, _) in Q5_LAYOUTS {
        for rows in 1..=9 {
            for cols in [32, 64, 96] {
                let nb = cols / 32;
                let src = q5_blocks(f, (rows * cols) as u32, rows * nb, false);
                let mut packed = vec![0xa5u8; bytes(rows, cols).unwrap()];
                repack(&src, rows, cols, &mut packed).unwrap();
                // Padding rows: every byte that belongs to them is zero.
                let last = &packed[(rows.div_ceil(4) - 1) * nb * f.super_bytes..];
                for sb in last.chunks_exact(f.super_bytes) {
                    for r in (rows - 1) % 4 + 1..4 {
                        for h in 0..f.f16s {
                            assert_eq!(sb[8 * h + 2 * r..][..2], [0, 0], "{ty:?}");
                        }
                        let q = &sb[8 * f.f16s..];
                        for k in 0..4 {
                            assert_eq!(q[64 + 4 * r + k], 0, "{ty:?}");
                            for c in 0..4 {
                                assert_eq!(q[16 * c + 4 * r + k], 0, "{ty:?}");
                            }
                        }
                    }
                }
                let mut back = vec![0u8; src.len()];
                unpack(&packed, rows, cols, &mut back).unwrap();
                assert_eq!(back, src, "{ty:?} rows {rows} cols {cols}");
            }
        }
        // 2 rows x 64 columns: one group of 2 super-blocks.
        let bb = 2 * f.block_bytes;
        let sbb = 2 * f.super_bytes;
        assert_eq!(bytes(9, 96), Some(3 * 3 * f.super_bytes));
        assert!(bytes(4, 48).is_none());
        assert!(bytes(usize::MAX, 64).is_none());
        let mut out = vec![0u8; sbb];
        assert!(repack(&vec![0; bb * 2], 2, 64, &mut out[..sbb - 1]).is_err());
        assert!(repack(&vec![0; bb * 2 - 1], 2, 64, &mut out).is_err());
        assert!(repack(&vec![0; bb * 2], 2, 64, &mut out).is_ok());
        assert!(unpack(&out, 2, 64, &mut vec![0; bb * 2 + 1]).is_err());
        assert!(unpack(&out, 2, 64, &mut vec![0; bb * 2]).is_ok());
    }
}

/// Each Q5 layout's generic kernel against ggml's dequantized weights
/// dotted in f64 with the dequantized Q8_0 activations.
#[test]
fn q5_generic_kernels_match_the_dequantized_dot() {
    use kestrel_kernels::generic::quantize_acts_q8_0;
    const ROWS: usize = 7;
    const COLS: usize = 96;
    const M: usize = 3;
    for (f, ty, bytes, repack, _, gemm) in Q5_LAYOUTS {
        let nb = COLS / 32;
        let src = q5_blocks(f, 99 + f.block_bytes as u32, ROWS * nb, true);
        let mut packed = vec![0u8; bytes(ROWS, COLS).unwrap()];
        repack(&src, ROWS, COLS, &mut packed).unwrap();
        let mut wf = vec![0.0f32; ROWS * COLS];
        dequantize_row(ty, &src, &mut wf).unwrap();
        let x: Vec<f32> = (0..M * COLS)
            .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let mut qs = vec![0i8; M * COLS];
        let mut d = vec![0.0f32; M * COLS / 32];
        quantize_acts_q8_0(&x, &mut qs, &mut d).unwrap();
        let mut out = vec![0.0f32; M * ROWS];
        gemm(&packed, ROWS, COLS, &qs, &d, M, &mut out).unwrap();
        for t in 0..M {
            for r in 0..ROWS {
                let (mut dot, mut mag) = (0.0f64, 0.0f64);
                for j in 0..COLS {
                    let a = qs[t * COLS + j] as f64 * d[t * nb + j / 32] as f64;
                    let p = wf[r * COLS + j] as f64 * a;
                    dot += p;
                    mag += p.abs();
                }
                let got = out[t * ROWS + r] as f64;
                assert!(
                    (got - dot).abs() <= 1e-6 * mag + 1e-9,
                    "{ty:?} t {t} r {r}: {got} vs {dot} (magnitude {mag})"
                );
            }
        }
    }
}

/// The layouts of 32-weight GGUF blocks the converter also makes from
/// values: Q4_0x4, IQ4_NLx4 (Q4_0x4's arrangement, nibbles unchanged) and
/// Q8_0x8. Each: GGUF block bytes, rows per group, super-block bytes, the
/// repacker and the tests' inverse.
const X32_LAYOUTS: [(GgmlType, usize, usize, usize, Repack, Unpack); 3] = [
    (
        GgmlType::Q4_0,
        q4_0::Q4_0_BLOCK_BYTES,
        q4_0::Q4X4_ROWS,
        q4_0::Q4X4_BLOCK_BYTES,
        q4_0::repack_q4_0,
        unpack_q4_0,
    ),
    (
        GgmlType::IQ4_NL,
        q4_0::Q4_0_BLOCK_BYTES,
        q4_0::Q4X4_ROWS,
        q4_0::Q4X4_BLOCK_BYTES,
        iq4nl::repack_iq4_nl,
        unpack_iq4_nl,
    ),
    (
        GgmlType::Q8_0,
        q8_0::Q8_0_BLOCK_BYTES,
        q8_0::Q8X8_ROWS,
        q8_0::Q8X8_BLOCK_BYTES,
        q8_0::repack_q8_0,
        unpack_q8_0,
    ),
];

/// Each repacker keeps its GGUF bytes (the round trip through the tests'
/// inverse gives them back), padding rows are all zero (scale 0 and, for
/// Q4_0x4, the nibbles `8 ^ 8`), and sizes that do not fit are refused.
#[test]
fn x32_layouts_keep_their_bytes_and_check_sizes() {
    for (ty, block, group, sbb, repack, unpack) in X32_LAYOUTS {
        for rows in 1..=17 {
            for cols in [32, 64, 96] {
                let nb = cols / 32;
                let mut x = (rows * 131 + cols) as u32;
                let src: Vec<u8> = (0..rows * nb * block)
                    .map(|_| {
                        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        (x >> 24) as u8
                    })
                    .collect();
                let packed_len = rows.div_ceil(group) * nb * sbb;
                let mut packed = vec![0xa5u8; packed_len];
                repack(&src, rows, cols, &mut packed).unwrap();
                // Padding rows: their scales and quants are zero.
                let last = &packed[(rows.div_ceil(group) - 1) * nb * sbb..];
                for sb in last.chunks_exact(sbb) {
                    for r in (rows - 1) % group + 1..group {
                        assert_eq!(sb[2 * r..2 * r + 2], [0, 0], "{ty:?}");
                        // Chunk `c` holds 4 bytes of each row, row `r` at `4r`.
                        for c in 0..(sbb - 2 * group) / (4 * group) {
                            let at = 2 * group + 4 * group * c + 4 * r;
                            assert_eq!(sb[at..at + 4], [0; 4], "{ty:?} row {r} chunk {c}");
                        }
                    }
                }
                let mut back = vec![0u8; src.len()];
                unpack(&packed, rows, cols, &mut back).unwrap();
                assert_eq!(back, src, "{ty:?} rows {rows} cols {cols}");
            }
        }
        let mut out = vec![0u8; 2 * sbb];
        let src = vec![0u8; 2 * block];
        assert!(
            repack(&src, 1, 64, &mut out[..2 * sbb - 1]).is_err(),
            "{ty:?}"
        );
        assert!(
            repack(&src[..2 * block - 1], 1, 64, &mut out).is_err(),
            "{ty:?}"
        );
        assert!(repack(&src, 1, 48, &mut out).is_err(), "{ty:?}");
        assert!(repack(&src, 1, 64, &mut out).is_ok(), "{ty:?}");
    }
}
