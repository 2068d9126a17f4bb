//! Q3_Kx8: GGUF Q3_K super-blocks repacked 8 rows at a time, every value
//! kept exactly (docs/kernels.md, "Q3_Kx8"; the constants are
//! `kestrel_kernels::layout`'s).
//!
//! A GGUF Q3_K block (110 bytes, 256 weights) is `hmask[32]`, `qs[64]`,
//! `scales[12]` (sixteen 6-bit scales, ggml's packing), `d: f16`; weight `i
//! = 128n + 32j + l` (`n` 0..2, `j` 0..4, `l` 0..32) has `low` = bits `2j,
//! 2j + 1` of `qs[32n + l]` and `q = low - 4` unless bit `4n + j` of
//! `hmask[l]` is set (then `q = low`); its value is `d * (sc[i / 16] - 32) *
//! q` (as `dequantize_row_q3_K`).
//!
//! For row group `g` and super-block column `b` the Q3_Kx8 super-block (912
//! bytes, at `(g * nb + b) * 912`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * then for each 32-weight block `p` (0..8) 112 bytes at `16 + 112p`:
//!   * `8h + r` (`h` 0..2): `sc[2p + h] - 32` of row `r`, an `i8`;
//!   * for the 16-weight group `j = 2p + h`, with `f(i) = q(i) & 7` (the
//!     3-bit two's complement) and `w = 16j + k`: at `16 + 48h + 4r + k`
//!     (`r` 0..8, `k` 0..4) `f(w) << 5 | f(w + 4) << 2 | f(w + 8) & 3`; at
//!     `16 + 48h + 32 + 4(r % 4) + k`, in the low nibble for `r` < 4 and
//!     the high one otherwise, `(f(w + 8) >> 2) << 3 | f(w + 12)`.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`,
//! scales 0, `q = 0`).

use crate::error::{check_len, mul, Error};
use kestrel_kernels::layout::QK_K;

pub use kestrel_kernels::layout::{
    Q3KX8_BLOCK_BYTES, Q3KX8_PAIR_BYTES, Q3KX8_ROWS, Q3_K_BLOCK_BYTES,
};

/// Super-blocks per row: `cols / 256`, or an error naming the layout.
fn super_blocks(cols: usize) -> Result<usize, Error> {
    super::super_blocks_in("q3_k columns (a multiple of 256)", cols)
}

/// Bytes of a `rows x cols` matrix in Q3_Kx8, padding rows included.
pub fn q3_kx8_bytes(rows: usize, cols: usize) -> Result<usize, Error> {
    let blocks = mul(
        "q3_kx8 super-blocks",
        rows.div_ceil(Q3KX8_ROWS),
        super_blocks(cols)?,
    )?;
    mul("q3_kx8 matrix bytes", blocks, Q3KX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF Q3_K.
pub fn q3_k_bytes(rows: usize, cols: usize) -> Result<usize, Error> {
    let blocks = mul("q3_k blocks", rows, super_blocks(cols)?)?;
    mul("q3_k matrix bytes", blocks, Q3_K_BLOCK_BYTES)
}

/// The 3-bit two's complement `q & 7` of weight `i` of a GGUF Q3_K block.
#[inline]
fn gguf_f(block: &[u8], i: usize) -> u8 {
    let (n, j, l) = (i / 128, (i % 128) / 32, i % 32);
    let low = (block[32 + 32 * n + l] >> (2 * j)) & 3;
    let high = (block[l] >> (4 * n + j)) & 1;
    low | (high ^ 1) << 2
}

/// Sets weight `i` of a GGUF Q3_K block to the 3-bit `f` (its `qs` and
/// `hmask` bits, leaving the others).
#[inline]
fn set_gguf_f(block: &mut [u8], i: usize, f: u8) {
    let (n, j, l) = (i / 128, (i % 128) / 32, i % 32);
    let at = 32 + 32 * n + l;
    block[at] = (block[at] & !(3 << (2 * j))) | ((f & 3) << (2 * j));
    let bit = 1 << (4 * n + j);
    block[l] = if f & 4 == 0 {
        block[l] | bit
    } else {
        block[l] & !bit
    };
}

/// Scale `s` (0..16) of a GGUF Q3_K block, 0..64 (ggml's kmask packing).
#[inline]
fn gguf_scale(block: &[u8], s: usize) -> u8 {
    let lo = if s < 8 {
        block[96 + s] & 0x0f
    } else {
        block[88 + s] >> 4
    };
    lo | ((block[104 + s % 4] >> (2 * (s / 4))) & 3) << 4
}

/// Sets scale `s` of a GGUF Q3_K block to `v` (0..64).
#[inline]
fn set_gguf_scale(block: &mut [u8], s: usize, v: u8) {
    if s < 8 {
        block[96 + s] = (block[96 + s] & 0xf0) | (v & 0x0f);
    } else {
        block[88 + s] = (block[88 + s] & 0x0f) | (v << 4);
    }
    let (at, shift) = (104 + s % 4, 2 * (s / 4));
    block[at] = (block[at] & !(3 << shift)) | (((v >> 4) & 3) << shift);
}

/// The offsets in a super-block of weight `i`'s two bytes (`R`, `N`) for
/// row `r`, and `N`'s nibble shift.
#[inline]
fn places(r: usize, i: usize) -> (usize, usize, u32) {
    let (p, h, k) = (i / 32, (i / 16) % 2, i % 4);
    let g = 2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * p + 2 * Q3KX8_ROWS + 48 * h;
    (g + 4 * r + k, g + 32 + 4 * (r % 4) + k, 4 * (r / 4) as u32)
}

/// Writes one Q3_Kx8 super-block from up to 8 GGUF Q3_K blocks (`src[r]`
/// for row `r`; missing rows are padding).
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[108..110]);
        for j in 0..QK_K / 16 {
            let at = 2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * (j / 2) + Q3KX8_ROWS * (j % 2) + r;
            sb[at] = gguf_scale(block, j).wrapping_sub(32);
            for k in 0..4 {
                let w = 16 * j + k;
                let f = |s: usize| gguf_f(block, w + 4 * s);
                let (ra, na, shift) = places(r, w);
                sb[ra] = f(0) << 5 | f(1) << 2 | (f(2) & 3);
                sb[na] |= ((f(2) >> 2) << 3 | f(3)) << shift;
            }
        }
    }
}

/// Writes back the GGUF Q3_K block of row `r` of a Q3_Kx8 super-block.
fn unpack_super_block(sb: &[u8], r: usize, block: &mut [u8]) {
    block[108..110].copy_from_slice(&sb[2 * r..2 * r + 2]);
    for j in 0..QK_K / 16 {
        let at = 2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * (j / 2) + Q3KX8_ROWS * (j % 2) + r;
        set_gguf_scale(block, j, sb[at].wrapping_add(32));
        for k in 0..4 {
            let w = 16 * j + k;
            let (ra, na, shift) = places(r, w);
            let (rb, nb) = (sb[ra], sb[na] >> shift);
            set_gguf_f(block, w, rb >> 5);
            set_gguf_f(block, w + 4, (rb >> 2) & 7);
            set_gguf_f(block, w + 8, (rb & 3) | ((nb >> 3) & 1) << 2);
            set_gguf_f(block, w + 12, nb & 7);
        }
    }
}

/// Repacks a row-major GGUF Q3_K matrix (`rows x cols`, `cols` a multiple
/// of 256) into Q3_Kx8 (`out`: [`q3_kx8_bytes`] bytes).
pub fn repack_q3_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let nb = super_blocks(cols)?;
    check_len("q3_k source bytes", q3_k_bytes(rows, cols)?, src.len())?;
    check_len("q3_kx8 output bytes", q3_kx8_bytes(rows, cols)?, out.len())?;
    let row_len = nb * Q3_K_BLOCK_BYTES;
    for (i, sb) in out.chunks_exact_mut(Q3KX8_BLOCK_BYTES).enumerate() {
        let (g, b) = (i / nb, i % nb);
        let n = (rows - g * Q3KX8_ROWS).min(Q3KX8_ROWS);
        let mut blocks: [&[u8]; Q3KX8_ROWS] = [&[]; Q3KX8_ROWS];
        for (r, blk) in blocks.iter_mut().enumerate().take(n) {
            let row = g * Q3KX8_ROWS + r;
            *blk = &src[row * row_len + b * Q3_K_BLOCK_BYTES..][..Q3_K_BLOCK_BYTES];
        }
        pack_super_block(&blocks[..n], sb);
    }
    Ok(())
}

/// Inverse of [`repack_q3_k`]: the `rows` real rows as row-major GGUF Q3_K
/// bytes, identical to the bytes that were repacked.
pub fn unpack_q3_k(packed: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let nb = super_blocks(cols)?;
    check_len(
        "q3_kx8 matrix bytes",
        q3_kx8_bytes(rows, cols)?,
        packed.len(),
    )?;
    check_len("q3_k output bytes", q3_k_bytes(rows, cols)?, out.len())?;
    let row_len = nb * Q3_K_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / Q3KX8_ROWS, row % Q3KX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * Q3KX8_BLOCK_BYTES..][..Q3KX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * Q3_K_BLOCK_BYTES..][..Q3_K_BLOCK_BYTES];
            unpack_super_block(sb, r, block);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{dequantize_row, GgmlType};
    use kestrel_kernels::generic;

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
                    let d = crate::quant::f16::read_f16(sb, 2 * (row % 8));
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
        assert!(q3_kx8_bytes(usize::MAX, 256).is_err());
    }
}
