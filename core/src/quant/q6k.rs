//! Q6_Kx8: GGUF Q6_K super-blocks repacked 8 rows at a time, every value
//! kept exactly (docs/kernels.md, "Q6_Kx8"; the constants are
//! `kestrel_kernels::layout`'s).
//!
//! A GGUF Q6_K block (210 bytes, 256 weights) is `ql[128]`, `qh[64]`,
//! `scales[16]: i8`, `d: f16`; weight `i = 128n + 32c + l` (`n` 0..2, `c`
//! 0..4, `l` 0..32) has the 6-bit quant `q` whose low 4 bits are the low
//! (`c` < 2) or high (`c` >= 2) nibble of `ql[64n + 32(c & 1) + l]` and
//! whose high 2 bits are bits `2c, 2c + 1` of `qh[32n + l]`; its value is
//! `d * scales[i / 16] * (q - 32)` (as `dequantize_row_q6_K`).
//!
//! For row group `g` and super-block column `b` the Q6_Kx8 super-block
//! (1680 bytes, at `(g * nb + b) * 1680`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * then for each 32-weight block `p` (0..8) 208 bytes at `16 + 208p`:
//!   * `8h + r` (`h` 0..2): `scales[2p + h]` of row `r` (copied);
//!   * `16 + 96h + 32s + 4r + k` (`s` 0..3, `k` 0..4), for the 16-weight
//!     group `j = 2p + h`: `((q(16j + 4s + k) ^ 32) << 2) | ((q(16j + 12 +
//!     k) ^ 32) >> (4 - 2s) & 3)`.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`,
//! scales 0, `q = 32`, so every padding weight is exactly 0).

use crate::error::{check_len, mul, Error};
use kestrel_kernels::layout::QK_K;

pub use kestrel_kernels::layout::{
    Q6KX8_BLOCK_BYTES, Q6KX8_PAIR_BYTES, Q6KX8_ROWS, Q6_K_BLOCK_BYTES,
};

/// Super-blocks per row: `cols / 256`, or an error when `cols` is not a
/// multiple of 256.
fn super_blocks(cols: usize) -> Result<usize, Error> {
    if cols.is_multiple_of(QK_K) {
        Ok(cols / QK_K)
    } else {
        Err(Error::SizeMismatch {
            what: "q6_k columns (a multiple of 256)",
            expected: cols.next_multiple_of(QK_K),
            actual: cols,
        })
    }
}

/// Bytes of a `rows x cols` matrix in Q6_Kx8, the padding rows of the last
/// group included: `ceil(rows / 8) * (cols / 256) * 1680`.
pub fn q6_kx8_bytes(rows: usize, cols: usize) -> Result<usize, Error> {
    let groups = rows.div_ceil(Q6KX8_ROWS);
    mul(
        "q6_kx8 matrix bytes",
        mul("q6_kx8 super-blocks", groups, super_blocks(cols)?)?,
        Q6KX8_BLOCK_BYTES,
    )
}

/// Bytes of the same matrix as row-major GGUF Q6_K: `rows * (cols / 256) *
/// 210`.
pub fn q6_k_bytes(rows: usize, cols: usize) -> Result<usize, Error> {
    mul(
        "q6_k matrix bytes",
        mul("q6_k blocks", rows, super_blocks(cols)?)?,
        Q6_K_BLOCK_BYTES,
    )
}

/// The 6-bit quant `q` of weight `i` in a GGUF Q6_K block.
#[inline]
fn gguf_q(block: &[u8], i: usize) -> u8 {
    let (n, c, l) = (i / 128, (i % 128) / 32, i % 32);
    let ql = block[64 * n + 32 * (c & 1) + l];
    let lo = if c < 2 { ql & 0x0f } else { ql >> 4 };
    let hi = (block[128 + 32 * n + l] >> (2 * c)) & 3;
    lo | (hi << 4)
}

/// Sets the 6-bit quant of weight `i` in a GGUF Q6_K block (its `ql` nibble
/// and `qh` bits, leaving the others).
#[inline]
fn set_gguf_q(block: &mut [u8], i: usize, q: u8) {
    let (n, c, l) = (i / 128, (i % 128) / 32, i % 32);
    let at = 64 * n + 32 * (c & 1) + l;
    block[at] = if c < 2 {
        (block[at] & 0xf0) | (q & 0x0f)
    } else {
        (block[at] & 0x0f) | (q << 4)
    };
    let at = 128 + 32 * n + l;
    block[at] = (block[at] & !(3 << (2 * c))) | (((q >> 4) & 3) << (2 * c));
}

/// Writes one Q6_Kx8 super-block from up to 8 GGUF Q6_K blocks (`src[r]`
/// for row `r`; missing rows are padding).
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[208..210]);
        for p in 0..QK_K / 32 {
            let pb = &mut sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * p..][..Q6KX8_PAIR_BYTES];
            for h in 0..2 {
                let j = 2 * p + h;
                pb[8 * h + r] = block[192 + j];
                for s in 0..3 {
                    for k in 0..4 {
                        let a = gguf_q(block, 16 * j + 4 * s + k) ^ 32;
                        let t = ((gguf_q(block, 16 * j + 12 + k) ^ 32) >> (4 - 2 * s)) & 3;
                        pb[16 + 96 * h + 32 * s + 4 * r + k] = (a << 2) | t;
                    }
                }
            }
        }
    }
}

/// Writes back the GGUF Q6_K block of row `r` of a Q6_Kx8 super-block.
fn unpack_super_block(sb: &[u8], r: usize, block: &mut [u8]) {
    block[208..210].copy_from_slice(&sb[2 * r..2 * r + 2]);
    for p in 0..QK_K / 32 {
        let pb = &sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * p..][..Q6KX8_PAIR_BYTES];
        for h in 0..2 {
            let j = 2 * p + h;
            block[192 + j] = pb[8 * h + r];
            let g = &pb[16 + 96 * h..][..96];
            for k in 0..4 {
                let at = |s: usize| g[32 * s + 4 * r + k];
                for s in 0..3 {
                    set_gguf_q(block, 16 * j + 4 * s + k, (at(s) >> 2) ^ 32);
                }
                let d = ((at(0) & 3) << 4) | ((at(1) & 3) << 2) | (at(2) & 3);
                set_gguf_q(block, 16 * j + 12 + k, d ^ 32);
            }
        }
    }
}

/// Repacks a row-major GGUF Q6_K matrix (`rows x cols`, `cols` a multiple
/// of 256: `rows * cols / 256` blocks of 210 bytes) into Q6_Kx8 (`out`:
/// [`q6_kx8_bytes`] bytes; the last group padded with zero rows).
pub fn repack_q6_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let nb = super_blocks(cols)?;
    check_len("q6_k source bytes", q6_k_bytes(rows, cols)?, src.len())?;
    check_len("q6_kx8 output bytes", q6_kx8_bytes(rows, cols)?, out.len())?;
    if nb == 0 {
        return Ok(());
    }
    let row_len = nb * Q6_K_BLOCK_BYTES;
    for (i, sb) in out.chunks_exact_mut(Q6KX8_BLOCK_BYTES).enumerate() {
        let (g, b) = (i / nb, i % nb);
        let first = g * Q6KX8_ROWS;
        let n = (rows - first).min(Q6KX8_ROWS);
        let mut blocks: [&[u8]; Q6KX8_ROWS] = [&[]; Q6KX8_ROWS];
        for (r, blk) in blocks.iter_mut().enumerate().take(n) {
            *blk = &src[(first + r) * row_len + b * Q6_K_BLOCK_BYTES..][..Q6_K_BLOCK_BYTES];
        }
        pack_super_block(&blocks[..n], sb);
    }
    Ok(())
}

/// Inverse of [`repack_q6_k`]: writes the `rows` real rows of a Q6_Kx8
/// matrix back as row-major GGUF Q6_K bytes (`out`: [`q6_k_bytes`] bytes),
/// identical to the bytes that were repacked.
pub fn unpack_q6_k(packed: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let nb = super_blocks(cols)?;
    check_len(
        "q6_kx8 matrix bytes",
        q6_kx8_bytes(rows, cols)?,
        packed.len(),
    )?;
    check_len("q6_k output bytes", q6_k_bytes(rows, cols)?, out.len())?;
    let row_len = nb * Q6_K_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / Q6KX8_ROWS, row % Q6KX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * Q6KX8_BLOCK_BYTES..][..Q6KX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * Q6_K_BLOCK_BYTES..][..Q6_K_BLOCK_BYTES];
            unpack_super_block(sb, r, block);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::dequantize_row;
    use crate::gguf::GgmlType;
    use kestrel_kernels::generic;

    const MAX_ROWS: usize = 11;
    const MAX_COLS: usize = 1536;
    const SRC: usize = MAX_ROWS * MAX_COLS / QK_K * Q6_K_BLOCK_BYTES;
    const PACKED: usize = MAX_ROWS.div_ceil(8) * MAX_COLS / QK_K * Q6KX8_BLOCK_BYTES;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) as u32
        }
    }

    /// Random GGUF Q6_K blocks: every byte value in every position over the
    /// first 256 blocks (a sweep), random after; `d` a finite f16.
    fn gguf_blocks(rng: &mut Rng, out: &mut [u8]) {
        for (n, block) in out.chunks_exact_mut(Q6_K_BLOCK_BYTES).enumerate() {
            let off = rng.next() as usize;
            for (p, b) in block.iter_mut().enumerate() {
                *b = if n < 256 {
                    (n + 37 * p + off) as u8
                } else {
                    rng.next() as u8
                };
            }
            // A finite d: exponent field below 0x1f.
            let mut d = rng.next() as u16;
            if (d >> 10) & 0x1f == 0x1f {
                d &= !(1 << 14);
            }
            block[208..210].copy_from_slice(&d.to_le_bytes());
        }
    }

    #[test]
    fn bit_positions_match_the_dequantizer() {
        let mut rng = Rng(1);
        let mut block = [0u8; Q6_K_BLOCK_BYTES];
        gguf_blocks(&mut rng, &mut block);
        block[208..210].copy_from_slice(&0x3c00u16.to_le_bytes()); // d = 1
        let mut want = [0.0f32; QK_K];
        dequantize_row(GgmlType::Q6_K, &block, &mut want).unwrap();
        for (i, &w) in want.iter().enumerate() {
            let q = gguf_q(&block, i) as i32 - 32;
            assert_eq!(
                w,
                (block[192 + i / 16] as i8 as i32 * q) as f32,
                "weight {i}"
            );
        }
        // set_gguf_q rebuilds the same block from the quants.
        let mut copy = block;
        copy[..192].fill(0);
        for i in 0..QK_K {
            set_gguf_q(&mut copy, i, gguf_q(&block, i));
        }
        assert_eq!(copy, block);
    }

    #[test]
    fn round_trip_is_identical() {
        let mut rng = Rng(2);
        let mut src = [0u8; SRC];
        let mut packed = [0u8; PACKED];
        let mut back = [0u8; SRC];
        for (rows, cols) in [(1, 256), (8, 256), (9, 512), (11, 1536), (7, 768), (0, 256)] {
            let n = q6_k_bytes(rows, cols).unwrap();
            let pn = q6_kx8_bytes(rows, cols).unwrap();
            gguf_blocks(&mut rng, &mut src[..n]);
            packed[..pn].fill(0xa5);
            repack_q6_k(&src[..n], rows, cols, &mut packed[..pn]).unwrap();
            back[..n].fill(0x5a);
            unpack_q6_k(&packed[..pn], rows, cols, &mut back[..n]).unwrap();
            assert_eq!(&back[..n], &src[..n], "{rows} x {cols}");
            // Padding rows: all zero.
            let nb = cols / QK_K;
            for g in 0..rows.div_ceil(8) {
                for b in 0..nb {
                    let sb = &packed[(g * nb + b) * Q6KX8_BLOCK_BYTES..][..Q6KX8_BLOCK_BYTES];
                    for r in rows.saturating_sub(8 * g).min(8)..8 {
                        assert_eq!(&sb[2 * r..2 * r + 2], &[0, 0]);
                        for i in 0..QK_K {
                            assert_eq!(generic::q6kx8_weight(sb, r, i), 0);
                        }
                        for j in 0..16 {
                            assert_eq!(generic::q6kx8_scale(sb, r, j), 0);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn sizes_are_checked() {
        let mut out = [0u8; Q6KX8_BLOCK_BYTES];
        let src = [0u8; Q6_K_BLOCK_BYTES];
        assert!(repack_q6_k(&src, 1, 255, &mut out).is_err());
        assert!(repack_q6_k(&src[..209], 1, 256, &mut out).is_err());
        assert!(repack_q6_k(&src, 1, 256, &mut out[..1679]).is_err());
        assert!(repack_q6_k(&src, 1, 256, &mut out).is_ok());
        let mut back = [0u8; Q6_K_BLOCK_BYTES];
        assert!(unpack_q6_k(&out, 2, 256, &mut back).is_err());
        assert!(unpack_q6_k(&out, 1, 256, &mut back).is_ok());
        assert_eq!(q6_kx8_bytes(9, 512).unwrap(), 2 * 2 * 1680);
        assert!(q6_kx8_bytes(usize::MAX, 256).is_err());
    }

    /// The packed weights read through the kernel crate's accessors are the
    /// GGUF dequantizer's values, and the generic GEMM is the dot product
    /// of the dequantized weights and activations within f32 rounding.
    #[test]
    fn generic_matches_dequantized_dot() {
        let mut rng = Rng(3);
        let (rows, cols) = (11, 1536);
        let nb = cols / QK_K;
        let mut src = [0u8; SRC];
        let n = q6_k_bytes(rows, cols).unwrap();
        gguf_blocks(&mut rng, &mut src[..n]);
        // Keep d moderate (the sums of large d would overflow f32).
        for block in src[..n].chunks_exact_mut(Q6_K_BLOCK_BYTES) {
            let d = (rng.next() % 0x1800 + 0x1800) as u16 | ((rng.next() as u16 & 1) << 15);
            block[208..210].copy_from_slice(&d.to_le_bytes());
        }
        let mut packed = [0u8; PACKED];
        let pn = q6_kx8_bytes(rows, cols).unwrap();
        repack_q6_k(&src[..n], rows, cols, &mut packed[..pn]).unwrap();
        // Dequantized weights, row-major.
        let mut wf = [0.0f32; MAX_ROWS * MAX_COLS];
        dequantize_row(GgmlType::Q6_K, &src[..n], &mut wf[..rows * cols]).unwrap();
        // The accessors give the dequantizer's values.
        for row in 0..rows {
            for b in 0..nb {
                let sb = &packed[((row / 8) * nb + b) * Q6KX8_BLOCK_BYTES..];
                let d = crate::quant::f16::read_f16(sb, 2 * (row % 8));
                for i in 0..QK_K {
                    let s = generic::q6kx8_scale(sb, row % 8, i / 16) as f32;
                    let q = generic::q6kx8_weight(sb, row % 8, i) as f32;
                    assert_eq!(
                        wf[row * cols + b * QK_K + i].to_bits(),
                        (d * s * q).to_bits()
                    );
                }
            }
        }
        const M: usize = 3;
        let mut x = [0.0f32; M * MAX_COLS];
        for v in x[..M * cols].iter_mut() {
            *v = (rng.next() as f32 / (1u64 << 31) as f32 - 1.0) * 3.0;
        }
        let mut qs = [0i8; M * MAX_COLS];
        let mut ad = [0.0f32; M * MAX_COLS / QK_K];
        let mut sums = [0i16; M * MAX_COLS / 32];
        generic::quantize_acts_q8_k(
            &x[..M * cols],
            &mut qs[..M * cols],
            &mut ad[..M * nb],
            &mut sums[..M * cols / 32],
        )
        .unwrap();
        let mut out = [0.0f32; M * MAX_ROWS];
        generic::gemm_q6_kx8_q8_k(
            &packed[..pn],
            rows,
            cols,
            &qs[..M * cols],
            &ad[..M * nb],
            &sums[..M * cols / 32],
            M,
            &mut out[..M * rows],
        )
        .unwrap();
        for t in 0..M {
            for r in 0..rows {
                let (mut exact, mut mag) = (0.0f64, 0.0f64);
                for c in 0..cols {
                    let a = qs[t * cols + c] as f64 * ad[t * nb + c / QK_K] as f64;
                    let p = wf[r * cols + c] as f64 * a;
                    exact += p;
                    mag += p.abs();
                }
                let got = out[t * rows + r] as f64;
                let tol = mag * (nb as f64 + 3.0) * f32::EPSILON as f64;
                assert!(
                    (got - exact).abs() <= tol,
                    "t {t} r {r}: {got} vs {exact} (tol {tol})"
                );
            }
        }
    }
}
