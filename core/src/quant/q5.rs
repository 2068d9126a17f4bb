//! The Q5_0x4 and Q5_1x4 repacked layouts: GGUF Q5_0 / Q5_1 blocks, 4 rows
//! interleaved, holding every block's values exactly (docs/kernels.md
//! "Q5_0x4 and Q5_1x4").
//!
//! For row group `g` and block column `b` there is one 88-byte super-block
//! at `(g * nb + b) * 88`:
//!
//! * bytes `0..8`: the four rows' `d` (f16 LE, row 0 first);
//! * bytes `8..72`: 64 nibble bytes; byte `8 + 16c + 4r + k` (chunk `c`,
//!   row `r`, `k` 0..4) is byte `4c + k` of row `r`'s GGUF `qs`, unchanged:
//!   the low 4 bits of weights `4c + k` (low nibble) and `16 + 4c + k` (high
//!   nibble), as Q4_0x4 without its XOR;
//! * bytes `72..88`: the fifth-bit plane; bit `p` of byte `72 + 4r + k` is
//!   `1 - qh[4p + k]`, the inverted fifth bit of row `r`'s weight `4p + k`
//!   (the sign bit of `q - 16` in 5-bit two's complement).
//!
//! Q5_1x4 super-blocks are 96 bytes: the four `d`, then the four `m` (f16
//! LE, bytes `8..16`), then the same 64 nibble bytes and 16 plane bytes
//! (at `16` and `80`).
//!
//! Rows past the matrix's last (up to the next multiple of 4) are all-zero
//! bytes: scale 0 and `q - 16 = 0`. The column count must be a multiple of
//! 32. [`unpack_q5_0`] / [`unpack_q5_1`] give back the GGUF bytes of the
//! real rows exactly.

use super::blocks_in;
use crate::error::{check_len, mul, Error};

pub use kestrel_kernels::layout::{
    Q5X4_ROWS, Q5_0X4_BLOCK_BYTES, Q5_0_BLOCK_BYTES, Q5_1X4_BLOCK_BYTES, Q5_1_BLOCK_BYTES,
};

/// One Q5 format's sizes: GGUF block bytes, f16 header fields per row
/// (`d`; Q5_1 also `m`), super-block bytes.
#[derive(Clone, Copy)]
struct Q5Format {
    name: &'static str,
    block_bytes: usize,
    f16s: usize,
    super_bytes: usize,
}

const Q5_0: Q5Format = Q5Format {
    name: "q5_0x4",
    block_bytes: Q5_0_BLOCK_BYTES,
    f16s: 1,
    super_bytes: Q5_0X4_BLOCK_BYTES,
};

const Q5_1: Q5Format = Q5Format {
    name: "q5_1x4",
    block_bytes: Q5_1_BLOCK_BYTES,
    f16s: 2,
    super_bytes: Q5_1X4_BLOCK_BYTES,
};

/// Bytes of a `rows x cols` Q5_0x4 matrix, padding rows included.
pub fn q5_0x4_bytes(rows: usize, cols: usize) -> Result<usize, Error> {
    matrix_bytes(Q5_0, rows, cols)
}

/// Repacks a row-major GGUF Q5_0 matrix (`rows x cols / 32` blocks of 22
/// bytes) into Q5_0x4 (`out`: [`q5_0x4_bytes`] bytes).
pub fn repack_q5_0(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    repack(Q5_0, src, rows, cols, out)
}

/// The inverse of [`repack_q5_0`]: writes the real rows of a Q5_0x4 matrix
/// back as row-major GGUF Q5_0 blocks (`out`: `rows x cols / 32 x 22`
/// bytes), byte for byte the ones it was made from.
pub fn unpack_q5_0(packed: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    unpack(Q5_0, packed, rows, cols, out)
}

/// Bytes of a `rows x cols` Q5_1x4 matrix, padding rows included.
pub fn q5_1x4_bytes(rows: usize, cols: usize) -> Result<usize, Error> {
    matrix_bytes(Q5_1, rows, cols)
}

/// Repacks a row-major GGUF Q5_1 matrix (`rows x cols / 32` blocks of 24
/// bytes) into Q5_1x4 (`out`: [`q5_1x4_bytes`] bytes).
pub fn repack_q5_1(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    repack(Q5_1, src, rows, cols, out)
}

/// The inverse of [`repack_q5_1`]: the real rows as row-major GGUF Q5_1
/// blocks (`out`: `rows x cols / 32 x 24` bytes), byte for byte.
pub fn unpack_q5_1(packed: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    unpack(Q5_1, packed, rows, cols, out)
}

fn matrix_bytes(f: Q5Format, rows: usize, cols: usize) -> Result<usize, Error> {
    let group = mul("q5 group bytes", blocks_in(f.name, cols)?, f.super_bytes)?;
    mul("q5 matrix bytes", rows.div_ceil(Q5X4_ROWS), group)
}

/// Checks the GGUF and the packed lengths; returns (blocks per row, GGUF
/// row bytes).
fn check(
    f: Q5Format,
    gguf: usize,
    packed: usize,
    rows: usize,
    cols: usize,
) -> Result<(usize, usize), Error> {
    let nb = blocks_in(f.name, cols)?;
    let row_len = mul("q5 row bytes", nb, f.block_bytes)?;
    check_len("q5 gguf bytes", mul("q5 gguf bytes", rows, row_len)?, gguf)?;
    check_len("q5 packed bytes", matrix_bytes(f, rows, cols)?, packed)?;
    Ok((nb, row_len))
}

fn repack(f: Q5Format, src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let (nb, row_len) = check(f, src.len(), out.len(), rows, cols)?;
    let head = 2 * f.f16s;
    for (i, sb) in out.chunks_exact_mut(f.super_bytes).enumerate() {
        let (g, b) = (i / nb, i % nb);
        sb.fill(0);
        for r in 0..Q5X4_ROWS.min(rows - g * Q5X4_ROWS) {
            let row = g * Q5X4_ROWS + r;
            let blk = &src[row * row_len + b * f.block_bytes..][..f.block_bytes];
            for h in 0..f.f16s {
                sb[8 * h + 2 * r..][..2].copy_from_slice(&blk[2 * h..2 * h + 2]);
            }
            let qh = u32::from_le_bytes([blk[head], blk[head + 1], blk[head + 2], blk[head + 3]]);
            let qs = &blk[head + 4..];
            let quants = &mut sb[4 * head..];
            for k in 0..4 {
                let mut plane = 0u8;
                for p in 0..8 {
                    plane |= ((!qh >> (4 * p + k)) as u8 & 1) << p;
                }
                quants[64 + 4 * r + k] = plane;
                for c in 0..4 {
                    quants[16 * c + 4 * r + k] = qs[4 * c + k];
                }
            }
        }
    }
    Ok(())
}

fn unpack(
    f: Q5Format,
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), Error> {
    let (nb, row_len) = check(f, out.len(), packed.len(), rows, cols)?;
    let head = 2 * f.f16s;
    for (i, sb) in packed.chunks_exact(f.super_bytes).enumerate() {
        let (g, b) = (i / nb, i % nb);
        for r in 0..Q5X4_ROWS.min(rows - g * Q5X4_ROWS) {
            let row = g * Q5X4_ROWS + r;
            let blk = &mut out[row * row_len + b * f.block_bytes..][..f.block_bytes];
            for h in 0..f.f16s {
                blk[2 * h..2 * h + 2].copy_from_slice(&sb[8 * h + 2 * r..][..2]);
            }
            let quants = &sb[4 * head..];
            let mut qh = 0u32;
            for k in 0..4 {
                let plane = !quants[64 + 4 * r + k];
                for p in 0..8 {
                    qh |= ((plane >> p) as u32 & 1) << (4 * p + k);
                }
                for c in 0..4 {
                    blk[head + 4 + 4 * c + k] = quants[16 * c + 4 * r + k];
                }
            }
            blk[head..head + 4].copy_from_slice(&qh.to_le_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{dequantize_row, GgmlType};
    use kestrel_kernels::generic;

    /// A deterministic stream of pseudo-random numbers (32-bit LCG).
    struct Rng(u32);

    impl Rng {
        fn next(&mut self) -> u32 {
            self.0 = self.0.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            self.0 >> 8
        }
    }

    /// `n` GGUF blocks of random bytes; with `scales`, every `d` (and `m`)
    /// is a normal f16 around 0.01 of either sign.
    fn gguf_blocks(rng: &mut Rng, f: Q5Format, n: usize, scales: bool, out: &mut [u8]) {
        for blk in out[..n * f.block_bytes].chunks_exact_mut(f.block_bytes) {
            for b in blk.iter_mut() {
                *b = rng.next() as u8;
            }
            if scales {
                for h in 0..f.f16s {
                    let s = (rng.next() % 1000) as f32 * 1e-5 + 0.005;
                    let s = if rng.next() & 1 == 0 { s } else { -s };
                    let bits = generic::f32_to_f16(s).to_le_bytes();
                    blk[2 * h..2 * h + 2].copy_from_slice(&bits);
                }
            }
        }
    }

    fn round_trip(f: Q5Format) {
        let mut rng = Rng(f.block_bytes as u32);
        for rows in 1..=9 {
            for cols in [32, 64, 96] {
                let nb = cols / 32;
                let len = rows * nb * f.block_bytes;
                let mut src = [0u8; 9 * 3 * 24];
                gguf_blocks(&mut rng, f, rows * nb, false, &mut src);
                let plen = matrix_bytes(f, rows, cols).unwrap();
                let mut packed = [0xa5u8; 3 * 3 * 4 * 24];
                repack(f, &src[..len], rows, cols, &mut packed[..plen]).unwrap();
                // Padding rows: every byte that belongs to them is zero.
                let last = &packed[(rows.div_ceil(4) - 1) * nb * f.super_bytes..plen];
                for sb in last.chunks_exact(f.super_bytes) {
                    for r in (rows - 1) % 4 + 1..4 {
                        for h in 0..f.f16s {
                            assert_eq!(sb[8 * h + 2 * r..][..2], [0, 0]);
                        }
                        let q = &sb[8 * f.f16s..];
                        for k in 0..4 {
                            assert_eq!(q[64 + 4 * r + k], 0);
                            for c in 0..4 {
                                assert_eq!(q[16 * c + 4 * r + k], 0);
                            }
                        }
                    }
                }
                let mut back = [0u8; 9 * 3 * 24];
                unpack(f, &packed[..plen], rows, cols, &mut back[..len]).unwrap();
                assert_eq!(&back[..len], &src[..len], "rows {rows} cols {cols}");
            }
        }
    }

    #[test]
    fn q5_0_round_trip_is_lossless() {
        round_trip(Q5_0);
    }

    #[test]
    fn q5_1_round_trip_is_lossless() {
        round_trip(Q5_1);
    }

    #[test]
    fn q5_sizes_are_checked() {
        assert_eq!(q5_1x4_bytes(9, 96), Ok(3 * 3 * 96));
        assert!(q5_1x4_bytes(4, 48).is_err());
        assert_eq!(q5_0x4_bytes(5, 64), Ok(2 * 2 * 88));
        assert!(q5_0x4_bytes(5, 33).is_err());
        assert!(q5_0x4_bytes(usize::MAX, 64).is_err());
        // 2 rows x 64 columns: 88 GGUF bytes, one group of 2 super-blocks.
        let mut out = [0u8; 176];
        assert!(repack_q5_0(&[0; 88], 2, 64, &mut out[..175]).is_err());
        assert!(repack_q5_0(&[0; 87], 2, 64, &mut out).is_err());
        assert!(repack_q5_0(&[0; 88], 2, 64, &mut out).is_ok());
        assert!(unpack_q5_0(&out, 2, 64, &mut [0; 89]).is_err());
        assert!(unpack_q5_0(&out, 2, 64, &mut [0; 88]).is_ok());
    }

    /// Rows x activation rows of one kernel call: dequantized weights
    /// (ggml's dequantizer) dotted in f64 with the dequantized activations,
    /// against the kernel's f32 result.
    type Gemm = fn(
        &[u8],
        usize,
        usize,
        &[i8],
        &[f32],
        usize,
        &mut [f32],
    ) -> Result<(), kestrel_kernels::ShapeError>;

    fn kernel_matches_dequantized(f: Q5Format, ty: GgmlType, gemm: Gemm) {
        const ROWS: usize = 7;
        const COLS: usize = 96;
        const M: usize = 3;
        let mut rng = Rng(99 + f.block_bytes as u32);
        let nb = COLS / 32;
        let mut src = [0u8; ROWS * 3 * 24];
        let len = ROWS * nb * f.block_bytes;
        gguf_blocks(&mut rng, f, ROWS * nb, true, &mut src);
        let mut packed = [0u8; 2 * 3 * 96];
        let plen = matrix_bytes(f, ROWS, COLS).unwrap();
        repack(f, &src[..len], ROWS, COLS, &mut packed[..plen]).unwrap();
        let mut wf = [0.0f32; ROWS * COLS];
        dequantize_row(ty, &src[..len], &mut wf).unwrap();
        let mut x = [0.0f32; M * COLS];
        for v in x.iter_mut() {
            *v = (rng.next() % 2001) as f32 / 1000.0 - 1.0;
        }
        let mut qs = [0i8; M * COLS];
        let mut d = [0.0f32; M * COLS / 32];
        generic::quantize_acts_q8_0(&x, &mut qs, &mut d).unwrap();
        let mut out = [0.0f32; M * ROWS];
        gemm(&packed[..plen], ROWS, COLS, &qs, &d, M, &mut out).unwrap();
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
                    "t {t} r {r}: {got} vs {dot} (magnitude {mag})"
                );
            }
        }
    }

    #[test]
    fn q5_0_kernel_matches_dequantized_weights() {
        kernel_matches_dequantized(Q5_0, GgmlType::Q5_0, generic::gemm_q5_0x4_q8_0);
    }

    #[test]
    fn q5_1_kernel_matches_dequantized_weights() {
        kernel_matches_dequantized(Q5_1, GgmlType::Q5_1, generic::gemm_q5_1x4_q8_0);
    }
}
