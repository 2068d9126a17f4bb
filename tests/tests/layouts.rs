//! The layouts written whole (`kestrel_kernels::layouts`): each repacker
//! keeps the GGUF bytes (its round trip through the tests' inverse gives
//! them back), the generic accessors give ggml's dequantized values bit for
//! bit, and sizes that do not fit are refused. (The kernels against their
//! generic twins: the kernel crate's `arch_tests`.)

use kestrel_core::gguf::{dequantize_row, GgmlType};
use kestrel_kernels::layout::QK_K;
use kestrel_kernels::layouts::q3k::generic;
use kestrel_kernels::layouts::q3k::*;
use kestrel_tests::unpack_q3_k;

const MAX_ROWS: usize = 11;
const MAX_COLS: usize = 1024;
const SRC: usize = MAX_ROWS * MAX_COLS / QK_K * Q3_K_BLOCK_BYTES;
const PACKED: usize = MAX_ROWS.div_ceil(8) * MAX_COLS / QK_K * Q3KX8_BLOCK_BYTES;

/// Pseudo-random GGUF Q3_K blocks (every byte value in every position
/// over the first 256 blocks), `d` a moderate finite f16.
fn gguf_blocks(seed: u64, out: &mut [u8]) {
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as u32
    };
    for (n, block) in out.chunks_exact_mut(Q3_K_BLOCK_BYTES).enumerate() {
        let off = next() as usize;
        for (p, b) in block.iter_mut().enumerate() {
            *b = if n < 256 {
                (n + 37 * p + off) as u8
            } else {
                next() as u8
            };
        }
        let d = (next() % 0x1800 + 0x1800) as u16 | ((next() as u16 & 1) << 15);
        block[108..110].copy_from_slice(&d.to_le_bytes());
    }
}

#[test]
fn round_trip_and_values_are_the_dequantizer_s() {
    let mut src = [0u8; SRC];
    let mut packed = [0u8; PACKED];
    let mut back = [0u8; SRC];
    let mut wf = [0.0f32; MAX_ROWS * MAX_COLS];
    for (seed, (rows, cols)) in [(1, 256), (8, 256), (9, 512), (11, 1024), (0, 256)]
        .into_iter()
        .enumerate()
    {
        let n = q3_k_bytes(rows, cols).unwrap();
        let pn = q3_kx8_bytes(rows, cols).unwrap();
        gguf_blocks(seed as u64, &mut src[..n]);
        packed[..pn].fill(0xa5);
        repack_q3_k(&src[..n], rows, cols, &mut packed[..pn]).unwrap();
        back[..n].fill(0x5a);
        unpack_q3_k(&packed[..pn], rows, cols, &mut back[..n]).unwrap();
        assert_eq!(&back[..n], &src[..n], "{rows} x {cols}");
        // The kernel crate's accessors give the dequantizer's values;
        // padding rows are zero.
        dequantize_row(GgmlType::Q3_K, &src[..n], &mut wf[..rows * cols]).unwrap();
        let nb = cols / QK_K;
        for row in 0..rows.next_multiple_of(8) {
            for b in 0..nb {
                let sb = &packed[((row / 8) * nb + b) * Q3KX8_BLOCK_BYTES..];
                let d = kestrel_core::quant::f16::read_f16(sb, 2 * (row % 8));
                for i in 0..QK_K {
                    let s = generic::q3kx8_scale(sb, row % 8, i / 16) as f32;
                    let q = generic::q3kx8_weight(sb, row % 8, i) as f32;
                    if row >= rows {
                        assert_eq!((d, s, q), (0.0, 0.0, 0.0));
                    } else {
                        let want = wf[row * cols + b * QK_K + i];
                        assert_eq!(want.to_bits(), (d * s * q).to_bits(), "{row} {i}");
                    }
                }
            }
        }
    }
}

#[test]
fn sizes_are_checked() {
    let mut out = [0u8; Q3KX8_BLOCK_BYTES];
    let src = [0u8; Q3_K_BLOCK_BYTES];
    assert!(repack_q3_k(&src, 1, 255, &mut out).is_err());
    assert!(repack_q3_k(&src[..109], 1, 256, &mut out).is_err());
    assert!(repack_q3_k(&src, 1, 256, &mut out[..911]).is_err());
    assert!(repack_q3_k(&src, 1, 256, &mut out).is_ok());
    let mut back = [0u8; Q3_K_BLOCK_BYTES];
    assert!(unpack_q3_k(&out, 2, 256, &mut back).is_err());
    assert!(unpack_q3_k(&out, 1, 256, &mut back).is_ok());
    assert_eq!(q3_kx8_bytes(9, 512).unwrap(), 2 * 2 * 912);
    assert!(q3_kx8_bytes(usize::MAX, 256).is_none());
}
