//! `out[r] = W[r] . x` for plain f32 / f16 weights with AVX2: 8 rows per
//! vector, one per lane, columns in order.

use super::Avx2;
use crate::shape::{matvec_shape, ShapeError};
use core::arch::x86_64::*;

/// The element type of a plain (unquantized) weight matrix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Float {
    F32,
    F16,
}

/// `out[r] = W[r] . x` for a row-major f32 weight (`rows x cols`, little
/// endian bytes, any alignment), summed in column order in f32 with a
/// separate multiply and add per column: bit-identical to
/// [`crate::generic::matvec_f32`].
///
/// A shape error unless `w.len() == rows * cols * 4`, `x.len() == cols`
/// and `out.len() == rows`.
pub fn matvec_f32(
    _cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    matvec(Float::F32, w, rows, cols, x, out)
}

/// As [`matvec_f32`] for an f16 weight (`w.len() == rows * cols * 2`); each
/// weight is widened to f32 exactly before the multiply.
pub fn matvec_f16(
    _cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    matvec(Float::F16, w, rows, cols, x, out)
}

fn matvec(
    kind: Float,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    let esize = if kind == Float::F32 { 4 } else { 2 };
    matvec_shape(esize, w, rows, cols, x, out)?;
    if cols == 0 {
        out.fill(0.0);
        return Ok(());
    }
    let row_bytes = cols * esize;
    for (g, o) in out.chunks_mut(8).enumerate() {
        let r0 = 8 * g;
        // Rows past the end repeat the last row; only real rows are stored.
        let rp: [&[u8]; 8] = core::array::from_fn(|i| {
            let r = (r0 + i).min(rows - 1);
            &w[r * row_bytes..(r + 1) * row_bytes]
        });
        let mut res = [0.0f32; 8];
        let next = w.as_ptr().wrapping_add((r0 + 8) * row_bytes);
        // SAFETY: each of the 8 row slices holds `cols` elements of `kind`
        // (sliced above from a buffer of rows * cols elements), `x` holds
        // `cols` floats (checked), `res` 8; `next` is only prefetched; the
        // token proves AVX2/FMA/F16C.
        unsafe { matvec_rows8(kind, &rp, next, x, &mut res) };
        o.copy_from_slice(&res[..o.len()]);
    }
    Ok(())
}

/// 8 rows (one per lane) dotted with `x`, columns in order.
///
/// # Safety
/// Every `rows[i]` must hold `x.len()` elements of `kind` (4 or 2 bytes
/// each), and the CPU must implement AVX2, FMA and F16C. `next` is only
/// prefetched, never read: any address.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn matvec_rows8(
    kind: Float,
    rows: &[&[u8]; 8],
    next: *const u8,
    x: &[f32],
    res: &mut [f32; 8],
) {
    // SAFETY: every row slice holds `x.len()` elements of `kind` (the function
    // contract), so the column loads below are in bounds; `next` is only
    // prefetched; the CPU implements AVX2, FMA and F16C.
    unsafe {
        let cols = x.len();
        debug_assert!(rows
            .iter()
            .all(|r| r.len() >= cols * if kind == Float::F32 { 4 } else { 2 }));
        let mut acc = _mm256_setzero_ps();
        let full = cols / 8;
        for j8 in 0..full {
            let load = |r: &[u8]| -> __m256 {
                // SAFETY: elements 8 * j8 .. 8 * j8 + 8 are inside the row
                // (j8 < cols / 8); unaligned loads.
                {
                    match kind {
                        Float::F32 => _mm256_loadu_ps(r.as_ptr().add(32 * j8).cast()),
                        Float::F16 => {
                            _mm256_cvtph_ps(_mm_loadu_si128(r.as_ptr().add(16 * j8).cast()))
                        }
                    }
                }
            };
            // Prefetch the next 8 rows (the bytes at `next`) at the rate these
            // are read: 8 rows x 8 elements per step. A prefetch never faults,
            // `wrapping_add` keeps the address arithmetic defined.
            let esize = if kind == Float::F32 { 4 } else { 2 };
            for k in 0..esize {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * (esize * j8 + k)).cast());
            }
            let v: [__m256; 8] = core::array::from_fn(|i| load(rows[i]));
            // 8 x 8 transpose: c[k] = column 8 * j8 + k of the 8 rows.
            let t0 = _mm256_unpacklo_ps(v[0], v[1]);
            let t1 = _mm256_unpackhi_ps(v[0], v[1]);
            let t2 = _mm256_unpacklo_ps(v[2], v[3]);
            let t3 = _mm256_unpackhi_ps(v[2], v[3]);
            let t4 = _mm256_unpacklo_ps(v[4], v[5]);
            let t5 = _mm256_unpackhi_ps(v[4], v[5]);
            let t6 = _mm256_unpacklo_ps(v[6], v[7]);
            let t7 = _mm256_unpackhi_ps(v[6], v[7]);
            let s0 = _mm256_shuffle_ps(t0, t2, 0x44);
            let s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            let s2 = _mm256_shuffle_ps(t1, t3, 0x44);
            let s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            let s4 = _mm256_shuffle_ps(t4, t6, 0x44);
            let s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            let s6 = _mm256_shuffle_ps(t5, t7, 0x44);
            let s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            let c = [
                _mm256_permute2f128_ps(s0, s4, 0x20),
                _mm256_permute2f128_ps(s1, s5, 0x20),
                _mm256_permute2f128_ps(s2, s6, 0x20),
                _mm256_permute2f128_ps(s3, s7, 0x20),
                _mm256_permute2f128_ps(s0, s4, 0x31),
                _mm256_permute2f128_ps(s1, s5, 0x31),
                _mm256_permute2f128_ps(s2, s6, 0x31),
                _mm256_permute2f128_ps(s3, s7, 0x31),
            ];
            for (k, ck) in c.iter().enumerate() {
                let xj = _mm256_set1_ps(*x.get_unchecked(8 * j8 + k));
                acc = _mm256_add_ps(acc, _mm256_mul_ps(*ck, xj));
            }
        }
        for j in 8 * full..cols {
            let e: [f32; 8] = core::array::from_fn(|i| match kind {
                Float::F32 => {
                    let b = &rows[i][4 * j..4 * j + 4];
                    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                }
                Float::F16 => {
                    let h = u16::from_le_bytes([rows[i][2 * j], rows[i][2 * j + 1]]);
                    // Exact widening (F16C, enabled on this function).
                    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
                }
            });
            let col = _mm256_loadu_ps(e.as_ptr());
            acc = _mm256_add_ps(acc, _mm256_mul_ps(col, _mm256_set1_ps(x[j])));
        }
        _mm256_storeu_ps(res.as_mut_ptr(), acc);
    }
}
