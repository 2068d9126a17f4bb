//! Shape errors: what every kernel returns when its slices do not fit the
//! dimensions it was given, and the checks shared by every architecture.

use crate::layout::{QK, QK_K};

/// A slice length (or a dimension) that does not fit the call: `what` names
/// it, `expected` is the length the other arguments require (`usize::MAX`
/// when that length overflows), `actual` the length given. A kernel that
/// returns one has written nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeError {
    /// The argument that does not fit.
    pub what: &'static str,
    /// The length the other arguments require.
    pub expected: usize,
    /// The length given.
    pub actual: usize,
}

impl core::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}: expected {}, got {}",
            self.what, self.expected, self.actual
        )
    }
}

/// `Ok` when `actual` is the `expected` length (`None`: it overflowed).
#[inline]
pub(crate) fn check_len(
    what: &'static str,
    expected: Option<usize>,
    actual: usize,
) -> Result<(), ShapeError> {
    match expected {
        Some(e) if e == actual => Ok(()),
        _ => Err(ShapeError {
            what,
            expected: expected.unwrap_or(usize::MAX),
            actual,
        }),
    }
}

/// The dimensions of a quantized GEMM whose slices were checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmShape {
    /// 32-column blocks per row.
    pub nb: usize,
    /// Row groups, the padded last one included (read by the architecture
    /// kernels only).
    #[cfg_attr(
        not(any(target_arch = "aarch64", target_arch = "x86_64")),
        allow(dead_code)
    )]
    pub groups: usize,
}

/// Checks the slices of a quantized GEMM (weights in row groups of
/// `group_rows` rows, `block_bytes` per 32-column super-block; `m`
/// activation rows; `out` = `m x rows`). Shared by every architecture.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_shape(
    group_rows: usize,
    block_bytes: usize,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &[f32],
) -> Result<GemmShape, ShapeError> {
    check_len(
        "gemm columns (a multiple of 32)",
        Some(cols.next_multiple_of(QK)),
        cols,
    )?;
    let nb = cols / QK;
    let groups = rows.div_ceil(group_rows);
    check_len(
        "weight bytes",
        groups
            .checked_mul(nb)
            .and_then(|n| n.checked_mul(block_bytes)),
        w.len(),
    )?;
    check_len("activation quants", m.checked_mul(cols), act_qs.len())?;
    check_len("activation scales", m.checked_mul(nb), act_d.len())?;
    check_len("output values", m.checked_mul(rows), out.len())?;
    Ok(GemmShape { nb, groups })
}

/// Checks a plain-float matrix-vector call: `w` is `rows x cols` elements
/// of `elem_bytes` bytes, `x` `cols` values, `out` `rows` values.
pub(crate) fn matvec_shape(
    elem_bytes: usize,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &[f32],
) -> Result<(), ShapeError> {
    check_len(
        "weight bytes",
        rows.checked_mul(cols)
            .and_then(|n| n.checked_mul(elem_bytes)),
        w.len(),
    )?;
    check_len("matvec input", Some(cols), x.len())?;
    check_len("matvec output", Some(rows), out.len())
}

/// Checks activation quantization: `x.len()` a multiple of 32, `qs` as long
/// as `x`, one scale per block in `d`.
pub(crate) fn quantize_shape(x: &[f32], qs: &[i8], d: &[f32]) -> Result<(), ShapeError> {
    check_len(
        "activation values (a multiple of 32)",
        Some(x.len().next_multiple_of(QK)),
        x.len(),
    )?;
    check_len("activation quants", Some(x.len()), qs.len())?;
    check_len("activation scales", Some(x.len() / QK), d.len())
}

/// Checks Q8_K activation quantization: `x.len()` a multiple of 256, `qs`
/// as long as `x`, one scale per 256 values in `d`, one sum per 32 in `sums`.
pub(crate) fn quantize_k_shape(
    x: &[f32],
    qs: &[i8],
    d: &[f32],
    sums: &[i16],
) -> Result<(), ShapeError> {
    check_len(
        "activation values (a multiple of 256)",
        Some(x.len().next_multiple_of(QK_K)),
        x.len(),
    )?;
    check_len("activation quants", Some(x.len()), qs.len())?;
    check_len("activation scales", Some(x.len() / QK_K), d.len())?;
    check_len("activation sums", Some(x.len() / QK), sums.len())
}

/// Checks an attention call over a cache: `n` rows of `hd` elements at
/// `stride` elements apart all lie inside a cache of `cache_len` elements.
pub(crate) fn attn_shape(
    hd: usize,
    n: usize,
    stride: usize,
    cache_len: usize,
) -> Result<(), ShapeError> {
    if n == 0 {
        return Ok(());
    }
    let end = (n - 1)
        .checked_mul(stride)
        .and_then(|e| e.checked_add(hd))
        .unwrap_or(usize::MAX);
    if end <= cache_len {
        Ok(())
    } else {
        Err(ShapeError {
            what: "cache elements the attention rows reach",
            expected: end,
            actual: cache_len,
        })
    }
}

/// Checks a grouped attention call (several query heads over the same
/// cached rows): `len` values (queries or probabilities) are `heads` rows
/// of equal length, `heads > 0`; returns that length.
pub(crate) fn attn_heads(
    what: &'static str,
    len: usize,
    heads: usize,
) -> Result<usize, ShapeError> {
    if heads > 0 && len.is_multiple_of(heads) {
        Ok(len / heads)
    } else {
        Err(ShapeError {
            what,
            expected: if heads == 0 {
                usize::MAX
            } else {
                len.next_multiple_of(heads)
            },
            actual: len,
        })
    }
}

/// Checks the output of a grouped attention call: `heads` rows of `hd`
/// values at `out_stride` apart (`out_stride >= hd`: rows do not overlap)
/// inside `out_len`.
pub(crate) fn attn_out_shape(
    heads: usize,
    hd: usize,
    out_stride: usize,
    out_len: usize,
) -> Result<(), ShapeError> {
    let end = (heads.max(1) - 1)
        .checked_mul(out_stride)
        .and_then(|e| e.checked_add(hd))
        .unwrap_or(usize::MAX);
    if out_stride >= hd && end <= out_len {
        Ok(())
    } else {
        Err(ShapeError {
            what: "attention output rows",
            expected: end,
            actual: out_len,
        })
    }
}

/// Whether the vector attention kernels take a call already accepted by
/// [`attn_shape`]: rows of a non-zero multiple of 8 elements that do not
/// overlap, at least one of them. Other calls go to the generic code.
#[allow(dead_code)]
pub(crate) fn attn_vector_ok(hd: usize, n: usize, stride: usize) -> bool {
    hd > 0 && hd.is_multiple_of(8) && n > 0 && stride >= hd
}

/// Checks SwiGLU over fused runs: `out` whole runs of 8, `gate_up` twice
/// as long.
pub(crate) fn swiglu_shape(out: &[f32], gate_up: &[f32]) -> Result<(), ShapeError> {
    check_len(
        "swiglu outputs (a multiple of 8)",
        Some(out.len().next_multiple_of(8)),
        out.len(),
    )?;
    check_len(
        "swiglu gate/up values",
        out.len().checked_mul(2),
        gate_up.len(),
    )
}

/// The dimensions of a k-quant GEMM whose slices were checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmKShape {
    /// 256-column super-blocks per row.
    pub nb: usize,
    /// Row groups, the padded last one included (read by the architecture
    /// kernels only).
    #[cfg_attr(
        not(any(target_arch = "aarch64", target_arch = "x86_64")),
        allow(dead_code)
    )]
    pub groups: usize,
}

/// Checks the slices of a k-quant GEMM with Q8_K activations (weights in
/// row groups of `group_rows` rows, `block_bytes` per 256-column
/// super-block; `m` activation rows with `cols` quants, `cols / 256` scales
/// and `cols / 32` sums each; `out` = `m x rows`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_k_shape(
    group_rows: usize,
    block_bytes: usize,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    act_sums: &[i16],
    m: usize,
    out: &[f32],
) -> Result<GemmKShape, ShapeError> {
    check_len(
        "gemm columns (a multiple of 256)",
        Some(cols.next_multiple_of(QK_K)),
        cols,
    )?;
    let nb = cols / QK_K;
    let groups = rows.div_ceil(group_rows);
    check_len(
        "weight bytes",
        groups
            .checked_mul(nb)
            .and_then(|n| n.checked_mul(block_bytes)),
        w.len(),
    )?;
    check_len("activation quants", m.checked_mul(cols), act_qs.len())?;
    check_len("activation scales", m.checked_mul(nb), act_d.len())?;
    check_len("activation sums", m.checked_mul(cols / QK), act_sums.len())?;
    check_len("output values", m.checked_mul(rows), out.len())?;
    Ok(GemmKShape { nb, groups })
}
