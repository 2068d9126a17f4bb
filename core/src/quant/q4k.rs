//! Q4_Kx4: GGUF Q4_K super-blocks repacked four rows at a time, every byte
//! of the GGUF blocks kept (docs/kernels.md, "Q4_Kx4"), for the kernels
//! `kestrel_kernels::*::gemv_q4_kx4_q8_k` / `gemm_q4_kx4_q8_k`.
//!
//! GGUF Q4_K (256 weights, 144 bytes): `d: f16`, `dmin: f16`, 12 bytes of
//! 6-bit scales and mins, 128 nibble bytes. Row group `g` (rows `4g..4g+3`)
//! of a `rows x cols` matrix is `cols / 256` consecutive 576-byte
//! super-blocks; in super-block `b`, for row `r` of the group:
//!
//! * bytes `2r..2r+2`: the row's `d`; bytes `8+2r..10+2r`: its `dmin`;
//! * byte `16 + 16w + 4r + k` (`w` 0..3, `k` 0..4): its scale byte `4w + k`;
//! * byte `64 + 128j + 16c + 4r + k` (half `j` 0..4, chunk `c` 0..8, `k`
//!   0..4): its nibble byte `32j + 4c + k`.
//!
//! Rows past the matrix's last row (the padding of the last group) are all
//! zero bytes. [`unpack_q4_k`] inverts [`repack_q4_k`] exactly.

use crate::error::{check_len, mul, Error};

pub use kestrel_kernels::layout::{
    K_SCALE_BYTES, Q4KX4_BLOCK_BYTES, Q4KX4_QS_AT, Q4KX4_ROWS, Q4KX4_SCALES_AT, Q4_K_BLOCK_BYTES,
    QK_K,
};

/// Where byte `i` (0..144) of row `r`'s GGUF Q4_K block sits in a Q4_Kx4
/// super-block.
#[inline]
pub fn q4_kx4_offset(r: usize, i: usize) -> usize {
    match i {
        0..2 => 2 * r + i,
        2..4 => 8 + 2 * r + (i - 2),
        4..16 => {
            let s = i - 4;
            Q4KX4_SCALES_AT + 16 * (s / 4) + 4 * r + s % 4
        }
        _ => {
            let q = i - 16;
            Q4KX4_QS_AT + 128 * (q / 32) + 16 * ((q % 32) / 4) + 4 * r + q % 4
        }
    }
}

/// Super-blocks per row of `cols` weights (`cols` a multiple of 256).
fn blocks_per_row(cols: usize) -> Result<usize, Error> {
    if cols.is_multiple_of(QK_K) {
        Ok(cols / QK_K)
    } else {
        Err(Error::NotBlockAligned {
            what: "q4_k columns (a multiple of 256)",
            len: cols,
        })
    }
}

/// Bytes of a `rows x cols` matrix in Q4_Kx4, padding rows included
/// (`ceil(rows / 4) * cols / 256 * 576`: 4.5 bits per weight, as GGUF).
pub fn q4_kx4_bytes(rows: usize, cols: usize) -> Result<usize, Error> {
    let nb = blocks_per_row(cols)?;
    mul(
        "q4_kx4 matrix bytes",
        mul("q4_kx4 blocks", rows.div_ceil(Q4KX4_ROWS), nb)?,
        Q4KX4_BLOCK_BYTES,
    )
}

/// Repacks a `rows x cols` matrix of GGUF Q4_K blocks (row-major, `cols /
/// 256` blocks of 144 bytes per row) into Q4_Kx4 (`out`:
/// [`q4_kx4_bytes`] bytes; the last group's missing rows are zeros).
pub fn repack_q4_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let nb = blocks_per_row(cols)?;
    let row_len = mul("q4_k row bytes", nb, Q4_K_BLOCK_BYTES)?;
    check_len(
        "q4_k matrix bytes",
        mul("q4_k matrix bytes", rows, row_len)?,
        src.len(),
    )?;
    check_len("q4_kx4 matrix bytes", q4_kx4_bytes(rows, cols)?, out.len())?;
    for (sbi, sb) in out.chunks_exact_mut(Q4KX4_BLOCK_BYTES).enumerate() {
        let (g, b) = (sbi / nb, sbi % nb);
        sb.fill(0);
        for r in 0..Q4KX4_ROWS {
            let row = g * Q4KX4_ROWS + r;
            if row >= rows {
                break;
            }
            let blk = &src[row * row_len + b * Q4_K_BLOCK_BYTES..][..Q4_K_BLOCK_BYTES];
            for (i, &byte) in blk.iter().enumerate() {
                sb[q4_kx4_offset(r, i)] = byte;
            }
        }
    }
    Ok(())
}

/// Inverse of [`repack_q4_k`]: writes the `rows` real rows of a Q4_Kx4
/// matrix back as GGUF Q4_K blocks (`out`: `rows * cols / 256 * 144`
/// bytes), identical to the bytes that were repacked.
pub fn unpack_q4_k(packed: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let nb = blocks_per_row(cols)?;
    let row_len = mul("q4_k row bytes", nb, Q4_K_BLOCK_BYTES)?;
    check_len(
        "q4_kx4 matrix bytes",
        q4_kx4_bytes(rows, cols)?,
        packed.len(),
    )?;
    check_len(
        "q4_k matrix bytes",
        mul("q4_k matrix bytes", rows, row_len)?,
        out.len(),
    )?;
    for (row, dst_row) in out.chunks_exact_mut(row_len).enumerate() {
        let (g, r) = (row / Q4KX4_ROWS, row % Q4KX4_ROWS);
        for (b, dst) in dst_row.chunks_exact_mut(Q4_K_BLOCK_BYTES).enumerate() {
            let sb = &packed[(g * nb + b) * Q4KX4_BLOCK_BYTES..][..Q4KX4_BLOCK_BYTES];
            for (i, byte) in dst.iter_mut().enumerate() {
                *byte = sb[q4_kx4_offset(r, i)];
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{dequantize_row, GgmlType};
    extern crate std;
    use kestrel_kernels::generic;
    use std::vec;
    use std::vec::Vec;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) as u32
        }
        fn float(&mut self) -> f32 {
            self.next() as f32 / (1u64 << 31) as f32 - 1.0
        }
    }

    /// Random GGUF Q4_K rows: every byte random, `d`/`dmin` finite normal
    /// f16 values (any sign).
    fn gguf_rows(rng: &mut Rng, rows: usize, cols: usize) -> Vec<u8> {
        let mut v: Vec<u8> = (0..rows * cols / QK_K * Q4_K_BLOCK_BYTES)
            .map(|_| rng.next() as u8)
            .collect();
        for blk in v.chunks_exact_mut(Q4_K_BLOCK_BYTES) {
            for at in [0, 2] {
                let x = (0.001 + 0.02 * (rng.next() % 1000) as f32 / 1000.0)
                    * if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
                blk[at..at + 2].copy_from_slice(&generic::f32_to_f16(x).to_le_bytes());
            }
        }
        v
    }

    #[test]
    fn round_trip_is_identical() {
        let mut rng = Rng(7);
        for rows in 1..=9 {
            for cols in [256, 512, 1536] {
                let src = gguf_rows(&mut rng, rows, cols);
                let mut packed = vec![0xAAu8; q4_kx4_bytes(rows, cols).unwrap()];
                repack_q4_k(&src, rows, cols, &mut packed).unwrap();
                let mut back = vec![0u8; src.len()];
                unpack_q4_k(&packed, rows, cols, &mut back).unwrap();
                assert_eq!(back, src, "rows {rows} cols {cols}");
                // Padding rows are zeros.
                let nb = cols / QK_K;
                let last = &packed[(rows.div_ceil(4) - 1) * nb * Q4KX4_BLOCK_BYTES..];
                for sb in last.chunks_exact(Q4KX4_BLOCK_BYTES) {
                    for r in (rows - 1) % 4 + 1..4 {
                        for i in 0..Q4_K_BLOCK_BYTES {
                            assert_eq!(sb[q4_kx4_offset(r, i)], 0);
                        }
                    }
                }
            }
        }
        // The offsets are a permutation of the super-block.
        let mut seen = [false; Q4KX4_BLOCK_BYTES];
        for r in 0..4 {
            for i in 0..Q4_K_BLOCK_BYTES {
                let o = q4_kx4_offset(r, i);
                assert!(!seen[o]);
                seen[o] = true;
            }
        }
    }

    #[test]
    fn shape_errors() {
        let mut out = vec![0u8; 576];
        assert!(repack_q4_k(&[0; 144], 1, 255, &mut out).is_err());
        assert!(repack_q4_k(&[0; 143], 1, 256, &mut out).is_err());
        assert!(repack_q4_k(&[0; 144], 1, 256, &mut out[..575]).is_err());
        assert!(unpack_q4_k(&out, 1, 256, &mut [0; 145]).is_err());
        assert_eq!(q4_kx4_bytes(5, 512).unwrap(), 2 * 2 * 576);
    }

    /// The generic kernel against a dot product of the GGUF-dequantized
    /// weights with the dequantized Q8_K activations, in f64.
    #[test]
    fn generic_kernel_matches_dequantized_dot() {
        let mut rng = Rng(11);
        for (rows, cols, m) in [(5, 256, 1), (7, 512, 3), (4, 1536, 2), (1, 768, 1)] {
            let src = gguf_rows(&mut rng, rows, cols);
            let mut packed = vec![0u8; q4_kx4_bytes(rows, cols).unwrap()];
            repack_q4_k(&src, rows, cols, &mut packed).unwrap();
            let x: Vec<f32> = (0..m * cols).map(|_| rng.float()).collect();
            let mut qs = vec![0i8; m * cols];
            let mut d = vec![0f32; m * cols / QK_K];
            let mut sums = vec![0i16; m * cols / 32];
            generic::quantize_acts_q8_k(&x, &mut qs, &mut d, &mut sums).unwrap();
            let mut out = vec![0f32; m * rows];
            generic::gemm_q4_kx4_q8_k(&packed, rows, cols, &qs, &d, &sums, m, &mut out).unwrap();
            let mut wf = vec![0f32; rows * cols];
            dequantize_row(GgmlType::Q4_K, &src, &mut wf).unwrap();
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
                        "rows {rows} cols {cols} t {t} r {r}: {got} vs {dot} (|.| {mag})"
                    );
                }
            }
        }
    }
}
