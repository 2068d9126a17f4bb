//! Repacked layouts, made once at conversion and read by the kernels: a
//! matrix in one ([`PackedMatrix`], its size checked) and the repacking of
//! GGUF rows into one ([`repack`], through the layout table). Each layout's
//! bytes are specified in its module (`kestrel_kernels::layouts`) and in
//! docs/kernels.md. A matrix whose row count is not a multiple of the group
//! size is padded with zero rows (scale 0, quants 0) up to the next whole
//! group; kernels compute the padding rows and never store them.

use crate::error::{check_len, Error};

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

/// Repacks a whole row-major GGUF matrix (`rows x cols`) of the block
/// type `layout` keeps into `layout`, through its module's repacker (the
/// layout table's); an error for a layout that keeps no GGUF blocks.
pub fn repack(
    layout: Layout,
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), Error> {
    let kept = layout.spec().kept.ok_or(Error::Unsupported {
        what: "repacking into a layout that keeps no GGUF blocks; layout code",
        value: layout.spec().layout_code as u64,
    })?;
    kept.repack_into(src, rows, cols, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked() {
        assert!(PackedMatrix::new(Layout::Q4_0x4, 5, 32, &[0; 72]).is_err());
        assert!(PackedMatrix::new(Layout::Q4_0x4, 5, 32, &[0; 144]).is_ok());
        assert!(Layout::Q8_0x8.matrix_bytes(8, 33).is_err());
        assert!(Layout::F32.matrix_bytes(usize::MAX, 4).is_err());
    }
}
