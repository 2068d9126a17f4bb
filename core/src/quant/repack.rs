//! Repacked layouts, made once at conversion and read by the kernels.
//! docs/kernels.md specifies both byte by byte; in short:
//!
//! * **Q4_0x4** ("4x4"): rows are taken four at a time (a *row group*). For
//!   row group `g` and block column `b` (32 weights) there is one 72-byte
//!   super-block at `(g * nb + b) * 72`: the four rows' f16 scales (8 bytes,
//!   row 0 first), then 64 quant bytes. Quant byte `16 * c + 4 * r + k`
//!   (chunk `c` 0..4, row `r` 0..4, `k` 0..4) is byte `4 * c + k` of row `r`'s
//!   GGUF block, XOR 0x88: its low nibble is weight `4c + k`, its high nibble
//!   weight `16 + 4c + k`, both now two's-complement 4-bit values `q - 8`.
//!   One 16-byte chunk thus holds 4 rows x 4 consecutive weights: exactly one
//!   `sdot` by-lane operand.
//! * **Q8_0x8** ("8x8"): rows taken eight at a time. For row group `g` and
//!   block column `b` one 272-byte super-block at `(g * nb + b) * 272`: eight
//!   f16 scales (16 bytes), then 256 quant bytes; byte `32 * c + 4 * r + k`
//!   (chunk `c` 0..8, row `r` 0..8, `k` 0..4) is quant `4c + k` of row `r`.
//!   One 32-byte chunk is 8 rows x 4 weights: two `sdot` operands, or one
//!   AVX2 register.
//!
//! A matrix whose row count is not a multiple of the group size is padded with
//! zero rows (scale 0, quants 0) up to the next whole group; kernels compute
//! the padding rows and never store them. The column count must be a multiple
//! of 32.

use super::f16::read_f16;
use super::{blocks_in, q4_0, q8_0};
use crate::error::{check_len, mul, Error};

pub use kestrel_kernels::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS, Q8X8_BLOCK_BYTES, Q8X8_ROWS};

pub use super::layout::{ActFormat, Layout};

/// A weight matrix in one of the stored layouts, its size checked.
#[derive(Clone, Copy, Debug)]
pub struct PackedMatrix<'a> {
    /// The layout of `bytes`.
    pub layout: Layout,
    /// Output rows (without padding).
    pub rows: usize,
    /// Input columns.
    pub cols: usize,
    /// Exactly `layout.matrix_bytes(rows, cols)` bytes.
    pub bytes: &'a [u8],
}

impl<'a> PackedMatrix<'a> {
    /// Checks that `bytes` is exactly the size `layout` needs for `rows x cols`.
    pub fn new(layout: Layout, rows: usize, cols: usize, bytes: &'a [u8]) -> Result<Self, Error> {
        check_len(
            "packed matrix bytes",
            layout.matrix_bytes(rows, cols)?,
            bytes.len(),
        )?;
        Ok(PackedMatrix {
            layout,
            rows,
            cols,
            bytes,
        })
    }

    /// Number of row groups, padding included.
    pub fn groups(&self) -> usize {
        self.rows.div_ceil(self.layout.group_rows())
    }

    /// The rows `row0 .. row0 + n` as a matrix of their own; `row0` must be
    /// a multiple of the group size.
    pub fn sub_rows(&self, row0: usize, n: usize) -> Result<PackedMatrix<'a>, Error> {
        let g = self.layout.group_rows();
        let end = row0
            .checked_add(n)
            .ok_or(Error::Overflow { what: "row range" })?;
        if !row0.is_multiple_of(g) || end > self.rows {
            return Err(Error::OutOfRange {
                what: "sub-matrix rows",
                value: end,
                max: self.rows,
            });
        }
        let gb = self.layout.group_bytes(self.cols)?;
        let bytes = self
            .bytes
            .get(row0 / g * gb..end.div_ceil(g) * gb)
            .ok_or(Error::Overflow { what: "sub-matrix" })?;
        PackedMatrix::new(self.layout, n, self.cols, bytes)
    }

    /// The bytes of row group `g` (panics if `g >= groups()`).
    pub fn group(&self, g: usize) -> &'a [u8] {
        // The size was checked in `new`, so this cannot overflow.
        let n = self.bytes.len() / self.groups().max(1);
        &self.bytes[g * n..(g + 1) * n]
    }
}

/// Repacks up to four rows of GGUF Q4_0 bytes (`rows_bytes.len()` must be a
/// whole number of rows of `cols` weights) into one Q4_0x4 row group.
/// Missing rows are padding (scale 0, quants 0).
pub fn repack_q4_0x4_group(rows_bytes: &[u8], cols: usize, out: &mut [u8]) -> Result<(), Error> {
    repack_nibble_x4_group(rows_bytes, cols, out, 0x88)
}

/// The 4-row nibble repacking of Q4_0x4 and the layouts of its arrangement
/// (IQ4_NLx4), each nibble byte XOR `xor`.
pub fn repack_nibble_x4_group(
    rows_bytes: &[u8],
    cols: usize,
    out: &mut [u8],
    xor: u8,
) -> Result<(), Error> {
    let nb = blocks_in("q4_0x4 columns", cols)?;
    let row_len = nb * q4_0::BLOCK_BYTES;
    let nrows = rows_bytes.len().checked_div(row_len).unwrap_or(0);
    check_len("q4_0 rows bytes", nrows * row_len, rows_bytes.len())?;
    if nrows > Q4X4_ROWS {
        return Err(Error::OutOfRange {
            what: "rows in one q4_0x4 group",
            value: nrows,
            max: Q4X4_ROWS,
        });
    }
    check_len("q4_0x4 group bytes", nb * Q4X4_BLOCK_BYTES, out.len())?;
    for (b, sb) in out.chunks_exact_mut(Q4X4_BLOCK_BYTES).enumerate() {
        sb.fill(0);
        for r in 0..nrows {
            let src = &rows_bytes[r * row_len + b * q4_0::BLOCK_BYTES..][..q4_0::BLOCK_BYTES];
            sb[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
            for c in 0..4 {
                for k in 0..4 {
                    sb[8 + 16 * c + 4 * r + k] = src[2 + 4 * c + k] ^ xor;
                }
            }
        }
    }
    Ok(())
}

/// Inverse of [`repack_q4_0x4_group`]: writes the group's `nrows` real rows
/// back as GGUF Q4_0 bytes.
pub fn unpack_q4_0x4_group(group: &[u8], cols: usize, out_rows: &mut [u8]) -> Result<(), Error> {
    unpack_nibble_x4_group(group, cols, out_rows, 0x88)
}

/// Inverse of [`repack_nibble_x4_group`] with the same `xor`.
pub fn unpack_nibble_x4_group(
    group: &[u8],
    cols: usize,
    out_rows: &mut [u8],
    xor: u8,
) -> Result<(), Error> {
    let nb = blocks_in("q4_0x4 columns", cols)?;
    check_len("q4_0x4 group bytes", nb * Q4X4_BLOCK_BYTES, group.len())?;
    let row_len = nb * q4_0::BLOCK_BYTES;
    let nrows = out_rows.len().checked_div(row_len).unwrap_or(0);
    check_len("q4_0 rows bytes", nrows * row_len, out_rows.len())?;
    if nrows > Q4X4_ROWS {
        return Err(Error::OutOfRange {
            what: "rows in one q4_0x4 group",
            value: nrows,
            max: Q4X4_ROWS,
        });
    }
    for (b, sb) in group.chunks_exact(Q4X4_BLOCK_BYTES).enumerate() {
        for r in 0..nrows {
            let dst = &mut out_rows[r * row_len + b * q4_0::BLOCK_BYTES..][..q4_0::BLOCK_BYTES];
            dst[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for c in 0..4 {
                for k in 0..4 {
                    dst[2 + 4 * c + k] = sb[8 + 16 * c + 4 * r + k] ^ xor;
                }
            }
        }
    }
    Ok(())
}

/// Repacks up to eight rows of GGUF Q8_0 bytes into one Q8_0x8 row group.
/// Missing rows are padding (scale 0, quants 0).
pub fn repack_q8_0x8_group(rows_bytes: &[u8], cols: usize, out: &mut [u8]) -> Result<(), Error> {
    let nb = blocks_in("q8_0x8 columns", cols)?;
    let row_len = nb * q8_0::BLOCK_BYTES;
    let nrows = rows_bytes.len().checked_div(row_len).unwrap_or(0);
    check_len("q8_0 rows bytes", nrows * row_len, rows_bytes.len())?;
    if nrows > Q8X8_ROWS {
        return Err(Error::OutOfRange {
            what: "rows in one q8_0x8 group",
            value: nrows,
            max: Q8X8_ROWS,
        });
    }
    check_len("q8_0x8 group bytes", nb * Q8X8_BLOCK_BYTES, out.len())?;
    for (b, sb) in out.chunks_exact_mut(Q8X8_BLOCK_BYTES).enumerate() {
        sb.fill(0);
        for r in 0..nrows {
            let src = &rows_bytes[r * row_len + b * q8_0::BLOCK_BYTES..][..q8_0::BLOCK_BYTES];
            sb[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
            for c in 0..8 {
                sb[16 + 32 * c + 4 * r..][..4].copy_from_slice(&src[2 + 4 * c..][..4]);
            }
        }
    }
    Ok(())
}

/// Inverse of [`repack_q8_0x8_group`].
pub fn unpack_q8_0x8_group(group: &[u8], cols: usize, out_rows: &mut [u8]) -> Result<(), Error> {
    let nb = blocks_in("q8_0x8 columns", cols)?;
    check_len("q8_0x8 group bytes", nb * Q8X8_BLOCK_BYTES, group.len())?;
    let row_len = nb * q8_0::BLOCK_BYTES;
    let nrows = out_rows.len().checked_div(row_len).unwrap_or(0);
    check_len("q8_0 rows bytes", nrows * row_len, out_rows.len())?;
    if nrows > Q8X8_ROWS {
        return Err(Error::OutOfRange {
            what: "rows in one q8_0x8 group",
            value: nrows,
            max: Q8X8_ROWS,
        });
    }
    for (b, sb) in group.chunks_exact(Q8X8_BLOCK_BYTES).enumerate() {
        for r in 0..nrows {
            let dst = &mut out_rows[r * row_len + b * q8_0::BLOCK_BYTES..][..q8_0::BLOCK_BYTES];
            dst[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for c in 0..8 {
                dst[2 + 4 * c..][..4].copy_from_slice(&sb[16 + 32 * c + 4 * r..][..4]);
            }
        }
    }
    Ok(())
}

/// Repacks a whole row-major GGUF Q4_0 matrix (`rows x cols`) into Q4_0x4.
pub fn repack_q4_0x4(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    repack_matrix(src, rows, cols, out, Layout::Q4_0x4)
}

/// Repacks a whole row-major GGUF Q8_0 matrix (`rows x cols`) into Q8_0x8.
pub fn repack_q8_0x8(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), Error> {
    repack_matrix(src, rows, cols, out, Layout::Q8_0x8)
}

/// Repacks one row group: (GGUF rows, columns, output group).
type RepackGroupFn = fn(&[u8], usize, &mut [u8]) -> Result<(), Error>;

fn repack_matrix(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
    layout: Layout,
) -> Result<(), Error> {
    let (block_bytes, repack_group): (usize, RepackGroupFn) = match layout {
        Layout::Q4_0x4 => (q4_0::BLOCK_BYTES, repack_q4_0x4_group),
        Layout::Q8_0x8 => (q8_0::BLOCK_BYTES, repack_q8_0x8_group),
        _ => {
            return Err(Error::OutOfRange {
                what: "repack layout",
                value: 0,
                max: 0,
            })
        }
    };
    let row_len = mul("row bytes", blocks_in("repack columns", cols)?, block_bytes)?;
    check_len(
        "repack source bytes",
        mul("source bytes", rows, row_len)?,
        src.len(),
    )?;
    check_len(
        "repack output bytes",
        layout.matrix_bytes(rows, cols)?,
        out.len(),
    )?;
    let group_rows = layout.group_rows();
    let group_bytes = layout.group_bytes(cols)?;
    if group_bytes == 0 {
        return Ok(());
    }
    for (g, dst) in out.chunks_exact_mut(group_bytes).enumerate() {
        let first = g * group_rows;
        let last = (first + group_rows).min(rows);
        repack_group(&src[first * row_len..last * row_len], cols, dst)?;
    }
    Ok(())
}

/// The f16 scale of row `r` in a Q4_0x4 super-block.
#[inline]
pub fn q4x4_scale(super_block: &[u8], r: usize) -> f32 {
    read_f16(super_block, 2 * r)
}

/// The f16 scale of row `r` in a Q8_0x8 super-block.
#[inline]
pub fn q8x8_scale(super_block: &[u8], r: usize) -> f32 {
    read_f16(super_block, 2 * r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gguf_rows(rows: usize, cols: usize, seed: u32, q4: bool) -> ([u8; 4096], usize) {
        let mut buf = [0u8; 4096];
        let mut x = [0.0f32; 32];
        let bb = if q4 {
            q4_0::BLOCK_BYTES
        } else {
            q8_0::BLOCK_BYTES
        };
        let n = rows * cols / 32;
        let mut s = seed;
        for i in 0..n {
            for v in x.iter_mut() {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                *v = (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
            }
            if q4 {
                buf[i * bb..][..bb].copy_from_slice(&q4_0::BlockQ4_0::quantize(&x).to_bytes());
            } else {
                buf[i * bb..][..bb].copy_from_slice(&q8_0::BlockQ8_0::quantize(&x).to_bytes());
            }
        }
        (buf, n * bb)
    }

    #[test]
    fn q4x4_round_trip_with_padding() {
        for rows in 1..=9 {
            let cols = 64;
            let (src, len) = gguf_rows(rows, cols, rows as u32, true);
            let mut packed = [0u8; 4096];
            let plen = Layout::Q4_0x4.matrix_bytes(rows, cols).unwrap();
            repack_q4_0x4(&src[..len], rows, cols, &mut packed[..plen]).unwrap();
            let m = PackedMatrix::new(Layout::Q4_0x4, rows, cols, &packed[..plen]).unwrap();
            let row_len = 2 * q4_0::BLOCK_BYTES;
            let mut back = [0u8; 4096];
            for g in 0..m.groups() {
                let first = g * 4;
                let last = (first + 4).min(rows);
                unpack_q4_0x4_group(m.group(g), cols, &mut back[first * row_len..last * row_len])
                    .unwrap();
                // Padding rows are zero scale, zero quants (0x88 ^ 0x88).
                for r in last - first..4 {
                    for b in 0..2 {
                        let sb = &m.group(g)[b * Q4X4_BLOCK_BYTES..][..Q4X4_BLOCK_BYTES];
                        assert_eq!(&sb[2 * r..2 * r + 2], &[0, 0]);
                        for c in 0..4 {
                            assert_eq!(&sb[8 + 16 * c + 4 * r..][..4], &[0; 4]);
                        }
                    }
                }
            }
            assert_eq!(&back[..len], &src[..len]);
        }
    }

    #[test]
    fn q8x8_round_trip_with_padding() {
        for rows in 1..=17 {
            let cols = 32;
            let (src, len) = gguf_rows(rows, cols, 7 + rows as u32, false);
            let mut packed = [0u8; 4096];
            let plen = Layout::Q8_0x8.matrix_bytes(rows, cols).unwrap();
            repack_q8_0x8(&src[..len], rows, cols, &mut packed[..plen]).unwrap();
            let m = PackedMatrix::new(Layout::Q8_0x8, rows, cols, &packed[..plen]).unwrap();
            let row_len = q8_0::BLOCK_BYTES;
            let mut back = [0u8; 4096];
            for g in 0..m.groups() {
                let first = g * 8;
                let last = (first + 8).min(rows);
                unpack_q8_0x8_group(m.group(g), cols, &mut back[first * row_len..last * row_len])
                    .unwrap();
            }
            assert_eq!(&back[..len], &src[..len]);
        }
    }

    #[test]
    fn sizes_are_checked() {
        assert!(PackedMatrix::new(Layout::Q4_0x4, 5, 32, &[0; 72]).is_err());
        assert!(PackedMatrix::new(Layout::Q4_0x4, 5, 32, &[0; 144]).is_ok());
        assert!(Layout::Q8_0x8.matrix_bytes(8, 33).is_err());
        assert!(Layout::F32.matrix_bytes(usize::MAX, 4).is_err());
    }
}
