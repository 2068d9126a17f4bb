//! ggml tensor types and tensor infos.

use super::reader::Cursor;
use crate::Error;

/// Weights per K-quant super-block.
pub const QK_K: usize = 256;

/// ggml's largest tensor name is 63 bytes (`GGML_MAX_NAME` is 64 with the NUL).
pub const MAX_NAME_LEN: usize = 63;

/// ggml's largest number of dimensions (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// The ggml tensor types this build reads, with ggml's numeric ids.
///
/// Block sizes (weights per block) and type sizes (bytes per block) are
/// ggml's, as gguf-py's `GGML_QUANT_SIZES` lists them.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// f32, 1 weight in 4 bytes.
    F32 = 0,
    /// IEEE half, 1 weight in 2 bytes.
    F16 = 1,
    /// 32 weights in 18 bytes: `d: f16`, 16 nibble bytes.
    Q4_0 = 2,
    /// 32 weights in 20 bytes: `d, m: f16`, 16 nibble bytes.
    Q4_1 = 3,
    /// 32 weights in 22 bytes: `d: f16`, `qh: u32`, 16 nibble bytes.
    Q5_0 = 6,
    /// 32 weights in 24 bytes: `d, m: f16`, `qh: u32`, 16 nibble bytes.
    Q5_1 = 7,
    /// 32 weights in 34 bytes: `d: f16`, 32 x `i8`.
    Q8_0 = 8,
    /// 32 weights in 36 bytes: `d, s: f16`, 32 x `i8` (parsed; ggml has no
    /// dequantizer for it, neither has this crate).
    Q8_1 = 9,
    /// 256 weights in 84 bytes.
    Q2_K = 10,
    /// 256 weights in 110 bytes.
    Q3_K = 11,
    /// 256 weights in 144 bytes.
    Q4_K = 12,
    /// 256 weights in 176 bytes.
    Q5_K = 13,
    /// 256 weights in 210 bytes.
    Q6_K = 14,
    /// 256 weights in 292 bytes: `d: f32`, 256 x `i8`, 16 x `i16` sums.
    Q8_K = 15,
    /// 256 weights in 66 bytes: `d: f16`, per 32 weights 4 indices into the
    /// IQ2_XXS grid of 8-weight points and a word of signs (7 bits per 8
    /// weights) and a 4-bit scale.
    IQ2_XXS = 16,
    /// 256 weights in 74 bytes: `d: f16`, per 8 weights a word of a 9-bit
    /// index into the IQ2_XS grid of 8-weight points and 7 sign bits, per
    /// 16 weights a 4-bit scale.
    IQ2_XS = 17,
    /// 256 weights in 98 bytes: `d: f16`, 64 indices into the IQ3_XXS grid
    /// of 4-weight points, 8 words of signs (7 bits per 8 weights) and a
    /// 4-bit scale.
    IQ3_XXS = 18,
    /// 32 weights in 18 bytes: `d: f16`, 16 nibble bytes indexing the
    /// 16 IQ4_NL values.
    IQ4_NL = 20,
    /// 256 weights in 110 bytes: `d: f16`, 64 low bytes and 8 bytes of
    /// ninth bits of indices into the 512-point IQ3_S grid, 32 sign bytes,
    /// 4 bytes of 4-bit scales.
    IQ3_S = 21,
    /// 256 weights in 82 bytes: `d: f16`, per 8 weights the low byte of an
    /// index into the 1024-point IQ2_S grid and a sign byte, 8 bytes of
    /// the indices' two high bits, per 16 weights a 4-bit scale.
    IQ2_S = 22,
    /// 256 weights in 136 bytes: `d: f16`, `scales_h: u16`, `scales_l[4]`
    /// (eight 6-bit scales), 128 nibble bytes indexing the IQ4_NL values.
    IQ4_XS = 23,
    /// bfloat16, 1 weight in 2 bytes.
    BF16 = 30,
}

impl GgmlType {
    /// Every supported type.
    pub const ALL: [GgmlType; 22] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_K,
        GgmlType::IQ2_XXS,
        GgmlType::IQ2_XS,
        GgmlType::IQ3_XXS,
        GgmlType::IQ4_NL,
        GgmlType::IQ2_S,
        GgmlType::IQ3_S,
        GgmlType::IQ4_XS,
        GgmlType::BF16,
    ];

    /// The type with ggml id `id`, if this build supports it.
    pub const fn from_id(id: u32) -> Option<GgmlType> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            9 => GgmlType::Q8_1,
            10 => GgmlType::Q2_K,
            11 => GgmlType::Q3_K,
            12 => GgmlType::Q4_K,
            13 => GgmlType::Q5_K,
            14 => GgmlType::Q6_K,
            15 => GgmlType::Q8_K,
            16 => GgmlType::IQ2_XXS,
            17 => GgmlType::IQ2_XS,
            22 => GgmlType::IQ2_S,
            18 => GgmlType::IQ3_XXS,
            20 => GgmlType::IQ4_NL,
            21 => GgmlType::IQ3_S,
            23 => GgmlType::IQ4_XS,
            30 => GgmlType::BF16,
            _ => return None,
        })
    }

    /// ggml's id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// ggml's name ("q4_K", ...).
    pub const fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q8_1 => "q8_1",
            GgmlType::Q2_K => "q2_K",
            GgmlType::Q3_K => "q3_K",
            GgmlType::Q4_K => "q4_K",
            GgmlType::Q5_K => "q5_K",
            GgmlType::Q6_K => "q6_K",
            GgmlType::Q8_K => "q8_K",
            GgmlType::IQ2_XXS => "iq2_xxs",
            GgmlType::IQ2_XS => "iq2_xs",
            GgmlType::IQ2_S => "iq2_s",
            GgmlType::IQ3_XXS => "iq3_xxs",
            GgmlType::IQ4_NL => "iq4_nl",
            GgmlType::IQ3_S => "iq3_s",
            GgmlType::IQ4_XS => "iq4_xs",
            GgmlType::BF16 => "bf16",
        }
    }

    /// Weights per block (1 for the float types).
    pub const fn block_size(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q8_1
            | GgmlType::IQ4_NL => 32,
            GgmlType::Q2_K
            | GgmlType::Q3_K
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
            | GgmlType::Q8_K
            | GgmlType::IQ2_XXS
            | GgmlType::IQ2_XS
            | GgmlType::IQ2_S
            | GgmlType::IQ3_XXS
            | GgmlType::IQ3_S
            | GgmlType::IQ4_XS => QK_K,
        }
    }

    /// Bytes per block.
    pub const fn type_size(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 | GgmlType::IQ4_NL => 2 + 16,
            GgmlType::Q4_1 => 2 + 2 + 16,
            GgmlType::Q5_0 => 2 + 4 + 16,
            GgmlType::Q5_1 => 2 + 2 + 4 + 16,
            GgmlType::Q8_0 => 2 + 32,
            GgmlType::Q8_1 => 4 + 32,
            GgmlType::Q2_K => 2 + 2 + QK_K / 16 + QK_K / 4,
            GgmlType::Q3_K => 2 + QK_K / 4 + QK_K / 8 + 12,
            GgmlType::Q4_K => 2 + 2 + QK_K / 2 + 12,
            GgmlType::Q5_K => 2 + 2 + QK_K / 2 + QK_K / 8 + 12,
            GgmlType::Q6_K => 2 + QK_K / 2 + QK_K / 4 + QK_K / 16,
            GgmlType::Q8_K => 4 + QK_K + QK_K / 8,
            GgmlType::IQ4_XS => 2 + 2 + QK_K / 64 + QK_K / 2,
            GgmlType::IQ2_XXS => 2 + QK_K / 4,
            GgmlType::IQ2_XS => 2 + QK_K / 4 + QK_K / 32,
            GgmlType::IQ2_S => 2 + QK_K / 4 + QK_K / 16,
            GgmlType::IQ3_XXS => 2 + 3 * QK_K / 8,
            GgmlType::IQ3_S => 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64,
        }
    }

    /// Bytes of a row of `n` weights, or `None` when `n` is not a multiple of
    /// the block size or the size overflows `usize`.
    pub fn row_bytes(self, n: u64) -> Option<usize> {
        let bs = self.block_size() as u64;
        if !n.is_multiple_of(bs) {
            return None;
        }
        let bytes = (n / bs).checked_mul(self.type_size() as u64)?;
        usize::try_from(bytes).ok()
    }

    /// Whether [`super::dequantize_row`] handles this type (all but Q8_1).
    pub const fn can_dequantize(self) -> bool {
        !matches!(self, GgmlType::Q8_1)
    }
}

/// One tensor: its name, shape, type and data, borrowed from the file.
/// (`Debug` shows the data's length, not its bytes.)
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TensorInfo<'a> {
    pub(crate) name: &'a str,
    pub(crate) ty: GgmlType,
    pub(crate) n_dims: usize,
    pub(crate) ne: [u64; MAX_DIMS],
    pub(crate) offset: u64,
    pub(crate) index: usize,
    pub(crate) info_at: usize,
    pub(crate) data: &'a [u8],
}

impl core::fmt::Debug for TensorInfo<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TensorInfo")
            .field("name", &self.name)
            .field("ty", &self.ty)
            .field("dims", &self.dims())
            .field("offset", &self.offset)
            .field("index", &self.index)
            .field("data_len", &self.data.len())
            .finish()
    }
}

impl<'a> TensorInfo<'a> {
    /// The name (UTF-8, at most 63 bytes).
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The ggml type.
    pub fn ggml_type(&self) -> GgmlType {
        self.ty
    }

    /// The dimensions as stored (`n_dims` of them, 0 to 4), fastest-varying
    /// first as in ggml: a matrix of `rows` rows of `cols` weights is `[cols, rows]`.
    pub fn dims(&self) -> &[u64] {
        self.ne.get(..self.n_dims).unwrap_or(&self.ne)
    }

    /// The four ggml dimensions `ne[0..4]`, the unused ones 1.
    pub fn ne(&self) -> [u64; MAX_DIMS] {
        self.ne
    }

    /// Number of weights (validated at parse time to fit `i64`).
    pub fn n_elements(&self) -> u64 {
        self.ne.iter().product()
    }

    /// Weights per row (`ne[0]`).
    pub fn row_len(&self) -> u64 {
        self.ne[0]
    }

    /// Number of rows (`ne[1] * ne[2] * ne[3]`).
    pub fn n_rows(&self) -> u64 {
        self.ne[1..].iter().product()
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        // Validated at parse time; 0 is unreachable.
        self.ty.row_bytes(self.ne[0]).unwrap_or(0)
    }

    /// Row `i`'s bytes, if `i < n_rows()`.
    pub fn row(&self, i: u64) -> Option<&'a [u8]> {
        let rb = self.row_bytes();
        let start = usize::try_from(i).ok()?.checked_mul(rb)?;
        self.data.get(start..start.checked_add(rb)?)
    }

    /// The data offset relative to the start of the data section.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Position in the file's tensor list.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Byte offset in the file of this tensor's info record.
    pub fn info_offset(&self) -> usize {
        self.info_at
    }

    /// The data: exactly `n_rows() * row_bytes()` bytes.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
}

/// A tensor info as read from the file, before the data section is known.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawInfo<'a> {
    pub(crate) name: &'a str,
    pub(crate) ty: GgmlType,
    pub(crate) n_dims: usize,
    pub(crate) ne: [u64; MAX_DIMS],
    pub(crate) offset: u64,
    pub(crate) nbytes: usize,
    pub(crate) info_at: usize,
}

/// Reads and validates one tensor info record (everything but the data range,
/// which needs the data section's start and the neighbours).
pub(crate) fn read_info<'a>(
    cur: &mut Cursor<'a>,
    index: usize,
    alignment: usize,
) -> Result<RawInfo<'a>, Error> {
    let info_at = cur.pos();
    let bad = |what: &'static str, value: u64| Error::BadTensor {
        what,
        index: index as u64,
        at: info_at as u64,
        value,
    };
    const TRUNC: &str = "tensor info runs past the end of the file";

    let name = cur.string(TRUNC).map_err(|_| bad(TRUNC, 0))?;
    if name.len() > MAX_NAME_LEN {
        return Err(bad(
            "name is longer than ggml's 63 bytes",
            name.len() as u64,
        ));
    }
    let name = core::str::from_utf8(name).map_err(|_| bad("name is not valid UTF-8", 0))?;

    let n_dims = cur.u32(TRUNC).map_err(|_| bad(TRUNC, 0))?;
    if n_dims as usize > MAX_DIMS {
        return Err(bad("more than 4 dimensions", n_dims.into()));
    }
    let n_dims = n_dims as usize;
    let mut ne = [1u64; MAX_DIMS];
    let mut count: u64 = 1;
    for d in ne.iter_mut().take(n_dims) {
        let v = cur.u64(TRUNC).map_err(|_| bad(TRUNC, 0))?;
        if v == 0 {
            return Err(bad("a dimension is zero", 0));
        }
        if v > i64::MAX as u64 {
            return Err(bad("a dimension is negative or too large", v));
        }
        count = count
            .checked_mul(v)
            .filter(|&c| c <= i64::MAX as u64)
            .ok_or(bad("element count overflows", v))?;
        *d = v;
    }

    let id = cur.u32(TRUNC).map_err(|_| bad(TRUNC, 0))?;
    let ty = GgmlType::from_id(id).ok_or(bad("unknown or unsupported ggml type", id.into()))?;
    if !ne[0].is_multiple_of(ty.block_size() as u64) {
        return Err(bad(
            "row length ne[0] is not a multiple of the type's block size",
            ne[0],
        ));
    }
    let rows = count / ne[0].max(1); // ne[1] * ne[2] * ne[3]
    let nbytes = ty
        .row_bytes(ne[0])
        .and_then(|rb| (rb as u64).checked_mul(rows))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(bad("byte size overflows", count))?;

    let offset = cur.u64(TRUNC).map_err(|_| bad(TRUNC, 0))?;
    if offset.checked_rem(alignment as u64) != Some(0) {
        return Err(bad(
            "data offset is not a multiple of the alignment",
            offset,
        ));
    }
    Ok(RawInfo {
        name,
        ty,
        n_dims,
        ne,
        offset,
        nbytes,
        info_at,
    })
}
