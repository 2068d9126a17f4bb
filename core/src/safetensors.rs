//! A zero-copy safetensors reader, validating the file once as Hugging Face's
//! `safetensors` crate does, and then some.
//!
//! Layout: `N: u64 LE`, `N` bytes of JSON header, then the data section. The
//! header maps tensor names to `{"dtype": "F32", "shape": [..],
//! "data_offsets": [begin, end]}` (offsets relative to the data section), plus
//! an optional `"__metadata__"` object of string values.
//!
//! [`SafeTensors::parse`] checks, before returning anything:
//! * the file has the 8-byte length; `N <= 100 MB` and `8 + N <= file length`;
//! * the header starts with `{` and is strict JSON ([`crate::json`]);
//! * no top-level key (tensor name) and no `__metadata__` key appears twice
//!   (compared after decoding escapes);
//! * `__metadata__`, when present, is an object whose values are strings (or
//!   `null`, read as absent, which the reference crate also accepts);
//! * every tensor entry is an object with exactly one `dtype` (a known name:
//!   [`Dtype`]), `shape` (at most [`MAX_DIMS`] plain non-negative integers)
//!   and `data_offsets` (two plain non-negative integers, `begin <= end <=`
//!   data length); other fields are ignored, as the reference crate does;
//! * `product(shape) * bits(dtype)` (checked arithmetic) is a whole number of
//!   bytes equal to `end - begin`;
//! * the non-empty tensors tile the data section exactly: no gap, no
//!   overlap, no trailing bytes; an empty tensor must sit on a boundary
//!   (offset 0, the end, or the end of another tensor), as the reference crate
//!   requires.
//!
//! Cost, with `n` tensors and a header of `h` bytes, and no allocation:
//! * O(h) when the header lists the tensors in data order with names sorted
//!   (what the `safetensors` library writes for single-dtype files);
//! * tiling: O(h) when the header order is the data order (what the library
//!   writes, for any mix of dtypes). Otherwise the ranges are checked for
//!   overlap in blocks of [`BLOCK`] = 128, sorted in a stack buffer (2 KB on
//!   64-bit targets):
//!   O(ceil(n / 128) * h);
//! * repeated names: the names form `k` strictly increasing runs (k = 1 for
//!   sorted names, about the number of dtypes for library-written files).
//!   Either each pair of runs is merged, O(k * h), or the names are checked
//!   in sorted blocks of 128, O(ceil(n / 128) * h), whichever is cheaper.
//!
//! So that a hostile header cannot take quadratic time, a slow path whose
//! passes times entries would exceed [`MAX_WORK`] (2^24) is refused with an
//! error. In practice, headers with up to about 46,000 tensors are accepted in
//! any order, and sorted headers have no limit.
//!
//! Lookups afterwards re-scan the header: [`SafeTensors::tensor`] is O(h).

use core::cmp::Ordering;

use crate::error::Error;
use crate::json::{self, Object, ObjectIter, Str, Value};
use crate::quant::f16::{bf16_to_f32, f16_to_f32};

/// The largest header accepted, in bytes (the reference crate's limit).
pub const MAX_HEADER_LEN: usize = 100_000_000;

/// The most dimensions a tensor may have.
pub const MAX_DIMS: usize = 8;

/// How many entries the slow validation paths keep on the stack at once.
pub const BLOCK: usize = 128;

/// The most header entries a slow validation path may visit (passes times
/// entries) before refusing the file.
pub const MAX_WORK: usize = 1 << 24;

const METADATA_KEY: &str = "__metadata__";

fn err(what: &'static str, offset: usize) -> Error {
    Error::Safetensors { what, offset }
}

/// Where `part` (a sub-slice of `file`) starts in `file`; 0 if it is not one.
fn offset_of(file: &[u8], part: &str) -> usize {
    let off = (part.as_ptr() as usize).wrapping_sub(file.as_ptr() as usize);
    if off <= file.len() {
        off
    } else {
        0
    }
}

/// The element types of safetensors 0.8.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// Boolean, one byte.
    BOOL,
    /// 4-bit float (MXFP4 E2M1), two per byte.
    F4,
    /// 6-bit float E2M3 (MXFP6), packed.
    F6_E2M3,
    /// 6-bit float E3M2 (MXFP6), packed.
    F6_E3M2,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// 8-bit float E5M2.
    F8_E5M2,
    /// 8-bit float E4M3.
    F8_E4M3,
    /// 8-bit exponent-only scale E8M0.
    F8_E8M0,
    /// 8-bit float E4M3, "fnuz" variant.
    F8_E4M3FNUZ,
    /// 8-bit float E5M2, "fnuz" variant.
    F8_E5M2FNUZ,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// IEEE single.
    F32,
    /// Complex of two f32.
    C64,
    /// IEEE double.
    F64,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
}

impl Dtype {
    /// Every dtype.
    pub const ALL: [Dtype; 22] = [
        Dtype::BOOL,
        Dtype::F4,
        Dtype::F6_E2M3,
        Dtype::F6_E3M2,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8_E5M2,
        Dtype::F8_E4M3,
        Dtype::F8_E8M0,
        Dtype::F8_E4M3FNUZ,
        Dtype::F8_E5M2FNUZ,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::C64,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
    ];

    /// The name used in headers (`"F32"`, `"BF16"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::BOOL => "BOOL",
            Dtype::F4 => "F4",
            Dtype::F6_E2M3 => "F6_E2M3",
            Dtype::F6_E3M2 => "F6_E3M2",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8_E5M2 => "F8_E5M2",
            Dtype::F8_E4M3 => "F8_E4M3",
            Dtype::F8_E8M0 => "F8_E8M0",
            Dtype::F8_E4M3FNUZ => "F8_E4M3FNUZ",
            Dtype::F8_E5M2FNUZ => "F8_E5M2FNUZ",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::C64 => "C64",
            Dtype::F64 => "F64",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
        }
    }

    /// The dtype with header name `name` (exact, case-sensitive).
    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bits per element.
    pub fn bits(self) -> usize {
        match self {
            Dtype::F4 => 4,
            Dtype::F6_E2M3 | Dtype::F6_E3M2 => 6,
            Dtype::BOOL
            | Dtype::U8
            | Dtype::I8
            | Dtype::F8_E5M2
            | Dtype::F8_E4M3
            | Dtype::F8_E8M0
            | Dtype::F8_E4M3FNUZ
            | Dtype::F8_E5M2FNUZ => 8,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 16,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 32,
            Dtype::C64 | Dtype::F64 | Dtype::I64 | Dtype::U64 => 64,
        }
    }

    /// Bytes per element for F32, F16 and BF16, the types readable as f32.
    fn float_bytes(self) -> Option<usize> {
        match self {
            Dtype::F32 => Some(4),
            Dtype::F16 | Dtype::BF16 => Some(2),
            _ => None,
        }
    }
}

/// Why a tensor has no byte length.
enum BadLen {
    Overflow,
    PartialByte,
}

/// The byte length of `shape` elements of `dtype`.
fn byte_len(dtype: Dtype, shape: &[usize]) -> Result<usize, BadLen> {
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or(BadLen::Overflow)?;
    let bits = numel.checked_mul(dtype.bits()).ok_or(BadLen::Overflow)?;
    if !bits.is_multiple_of(8) {
        return Err(BadLen::PartialByte);
    }
    Ok(bits / 8)
}

/// One tensor: its dtype, shape and bytes (little-endian, row-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorView<'a> {
    dtype: Dtype,
    shape: [usize; MAX_DIMS],
    ndim: usize,
    data: &'a [u8],
}

impl<'a> TensorView<'a> {
    /// A view of `data` as a `dtype` tensor of `shape`; the length must match.
    pub fn new(dtype: Dtype, shape: &[usize], data: &'a [u8]) -> Result<Self, Error> {
        let mut dims = [0usize; MAX_DIMS];
        let Some(dst) = dims.get_mut(..shape.len()) else {
            return Err(Error::OutOfRange {
                what: "safetensors: tensor dimensions",
                value: shape.len(),
                max: MAX_DIMS,
            });
        };
        dst.copy_from_slice(shape);
        let len = byte_len(dtype, shape).map_err(|e| match e {
            BadLen::Overflow => Error::Overflow {
                what: "safetensors: tensor size",
            },
            BadLen::PartialByte => Error::Unsupported {
                what: "safetensors: a sub-byte tensor that is not a whole number of bytes",
                value: 0,
            },
        })?;
        crate::error::check_len("safetensors: tensor data", len, data.len())?;
        Ok(TensorView {
            dtype,
            shape: dims,
            ndim: shape.len(),
            data,
        })
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The dimensions, outermost first (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        self.shape.get(..self.ndim).unwrap_or(&[])
    }

    /// The tensor's bytes, borrowed from the file.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape()
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or(0)
    }

    /// Row length: the innermost dimension (1 for a scalar).
    pub fn cols(&self) -> usize {
        self.shape().last().copied().unwrap_or(1)
    }

    /// Number of rows: the product of all dimensions but the innermost (1
    /// for a scalar or a vector).
    pub fn rows(&self) -> usize {
        let s = self.shape();
        s.get(..s.len().saturating_sub(1))
            .unwrap_or(&[])
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or(0)
    }

    /// Element `i` (row-major) of an F32, F16 or BF16 tensor, as f32 (exact);
    /// `None` for other dtypes or `i >= numel`.
    pub fn f32_at(&self, i: usize) -> Option<f32> {
        let es = self.dtype.float_bytes()?;
        let start = i.checked_mul(es)?;
        let b = self.data.get(start..start.checked_add(es)?)?;
        Some(decode_f32(self.dtype, b))
    }

    /// Converts row `row` (see [`TensorView::rows`]) of an F32, F16 or BF16
    /// tensor to f32; `out.len()` must be [`TensorView::cols`].
    pub fn to_f32_row(&self, row: usize, out: &mut [f32]) -> Result<(), Error> {
        let es = self.float_bytes()?;
        let (rows, cols) = (self.rows(), self.cols());
        if row >= rows {
            return Err(Error::OutOfRange {
                what: "safetensors: tensor row",
                value: row,
                max: rows.saturating_sub(1),
            });
        }
        crate::error::check_len("safetensors: row output", cols, out.len())?;
        let row_bytes = crate::error::mul("safetensors: row", cols, es)?;
        let start = crate::error::mul("safetensors: row", row, row_bytes)?;
        let src = start
            .checked_add(row_bytes)
            .and_then(|end| self.data.get(start..end))
            .ok_or(Error::Overflow {
                what: "safetensors: row past the tensor data",
            })?;
        self.convert(src, out);
        Ok(())
    }

    /// Converts the whole F32, F16 or BF16 tensor to f32; `out.len()` must be
    /// [`TensorView::numel`].
    pub fn to_f32(&self, out: &mut [f32]) -> Result<(), Error> {
        let es = self.float_bytes()?;
        let want = self.data.len() / es;
        crate::error::check_len("safetensors: tensor output", want, out.len())?;
        self.convert(self.data, out);
        Ok(())
    }

    fn float_bytes(&self) -> Result<usize, Error> {
        self.dtype.float_bytes().ok_or(Error::Unsupported {
            what: "safetensors: f32 conversion of a dtype other than F32, F16, BF16",
            value: 0,
        })
    }

    fn convert(&self, src: &[u8], out: &mut [f32]) {
        let es = self.dtype.float_bytes().unwrap_or(4);
        for (o, b) in out.iter_mut().zip(src.chunks_exact(es)) {
            *o = decode_f32(self.dtype, b);
        }
    }
}

/// One little-endian F32/F16/BF16 element (`b` holds exactly its bytes).
fn decode_f32(dtype: Dtype, b: &[u8]) -> f32 {
    match (dtype, b) {
        (Dtype::F32, &[a, b, c, d]) => f32::from_le_bytes([a, b, c, d]),
        (Dtype::F16, &[a, b]) => f16_to_f32(u16::from_le_bytes([a, b])),
        (Dtype::BF16, &[a, b]) => bf16_to_f32(u16::from_le_bytes([a, b])),
        _ => f32::NAN,
    }
}

/// A tensor entry of the header, validated.
struct Info {
    dtype: Dtype,
    shape: [usize; MAX_DIMS],
    ndim: usize,
    begin: usize,
    end: usize,
}

/// A plain non-negative integer (`[0-9]+`) that fits in `usize`.
fn plain_usize(v: Value<'_>, at: usize, what: &'static str) -> Result<usize, Error> {
    let n = v.as_number().ok_or(err(what, at))?;
    if !n.is_integer_literal() || n.raw().starts_with('-') {
        return Err(err(what, at));
    }
    n.as_usize()
        .ok_or(err("safetensors: integer too large for this platform", at))
}

/// Validates the entry `v` of the tensor whose name is at file offset `at`.
fn parse_info(v: Value<'_>, data_len: usize, at: usize) -> Result<Info, Error> {
    let obj = v
        .as_object()
        .ok_or(err("safetensors: tensor entry is not an object", at))?;
    let (mut dtype, mut shape, mut offsets) = (None, None, None);
    for (k, x) in obj.iter() {
        let slot = if k.eq_str("dtype") {
            &mut dtype
        } else if k.eq_str("shape") {
            &mut shape
        } else if k.eq_str("data_offsets") {
            &mut offsets
        } else {
            continue;
        };
        if slot.is_some() {
            return Err(err("safetensors: repeated field in a tensor entry", at));
        }
        *slot = Some(x);
    }
    let dtype = dtype
        .ok_or(err("safetensors: tensor entry without dtype", at))?
        .as_str()
        .ok_or(err("safetensors: dtype is not a string", at))?;
    let dtype = Dtype::ALL
        .into_iter()
        .find(|d| dtype.eq_str(d.name()))
        .ok_or(err("safetensors: unknown dtype", at))?;
    let shape_arr = shape
        .ok_or(err("safetensors: tensor entry without shape", at))?
        .as_array()
        .ok_or(err("safetensors: shape is not an array", at))?;
    let mut dims = [0usize; MAX_DIMS];
    let mut ndim = 0;
    for x in shape_arr.iter() {
        let slot = dims
            .get_mut(ndim)
            .ok_or(err("safetensors: more than 8 dimensions", at))?;
        *slot = plain_usize(
            x,
            at,
            "safetensors: shape entry is not a non-negative integer",
        )?;
        ndim += 1;
    }
    let offs = offsets
        .ok_or(err("safetensors: tensor entry without data_offsets", at))?
        .as_array()
        .ok_or(err("safetensors: data_offsets is not an array", at))?;
    const TWO: &str = "safetensors: data_offsets must hold two integers";
    let mut it = offs.iter();
    let begin = plain_usize(it.next().ok_or(err(TWO, at))?, at, TWO)?;
    let end = plain_usize(it.next().ok_or(err(TWO, at))?, at, TWO)?;
    if it.next().is_some() {
        return Err(err(TWO, at));
    }
    if begin > end {
        return Err(err("safetensors: data_offsets begin after end", at));
    }
    if end > data_len {
        return Err(err(
            "safetensors: data_offsets past the end of the data",
            at,
        ));
    }
    let len = byte_len(dtype, dims.get(..ndim).unwrap_or(&[])).map_err(|e| match e {
        BadLen::Overflow => err("safetensors: tensor size overflows", at),
        BadLen::PartialByte => err(
            "safetensors: sub-byte tensor is not a whole number of bytes",
            at,
        ),
    })?;
    if end - begin != len {
        return Err(err(
            "safetensors: data_offsets length does not match dtype and shape",
            at,
        ));
    }
    Ok(Info {
        dtype,
        shape: dims,
        ndim,
        begin,
        end,
    })
}

impl Info {
    fn view<'a>(&self, data: &'a [u8]) -> Option<TensorView<'a>> {
        Some(TensorView {
            dtype: self.dtype,
            shape: self.shape,
            ndim: self.ndim,
            data: data.get(self.begin..self.end)?,
        })
    }
}

/// A validated safetensors file.
#[derive(Clone, Copy, Debug)]
pub struct SafeTensors<'a> {
    file: &'a [u8],
    header: Object<'a>,
    metadata: Option<Object<'a>>,
    data: &'a [u8],
    data_start: usize,
    len: usize,
}

impl<'a> SafeTensors<'a> {
    /// Validates a whole safetensors file (see the module documentation for
    /// every check) and returns a view of it.
    pub fn parse(file: &'a [u8]) -> Result<Self, Error> {
        let len_bytes: [u8; 8] = file.get(..8).and_then(|b| b.try_into().ok()).ok_or(err(
            "safetensors: file shorter than the 8-byte header length",
            0,
        ))?;
        let n = u64::from_le_bytes(len_bytes);
        if n > MAX_HEADER_LEN as u64 {
            return Err(err("safetensors: header length above 100 MB", 0));
        }
        let n = n as usize; // <= 100 MB: fits any usize of 32 bits or more
        let data_start = 8 + n;
        if data_start > file.len() {
            return Err(err(
                "safetensors: header length past the end of the file",
                0,
            ));
        }
        let header_bytes = file.get(8..data_start).unwrap_or(&[]);
        if header_bytes.first() != Some(&b'{') {
            return Err(err("safetensors: header does not start with '{'", 8));
        }
        let header = json::parse(header_bytes).map_err(|e| match e {
            Error::Json { what, offset } => Error::Json {
                what,
                offset: offset.saturating_add(8),
            },
            e => e,
        })?;
        let header = header
            .as_object()
            .ok_or(err("safetensors: header is not an object", 8))?;
        let data = file.get(data_start..).unwrap_or(&[]);

        check_unique_keys(file, header)?;
        let mut metadata = None;
        let mut count = 0usize;
        let mut sum = 0usize;
        let mut cursor = 0usize;
        let mut in_order = true;
        for (k, v) in header.iter() {
            let at = offset_of(file, k.raw());
            if k.eq_str(METADATA_KEY) {
                if v.is_null() {
                    continue;
                }
                let m = v
                    .as_object()
                    .ok_or(err("safetensors: __metadata__ is not an object", at))?;
                for (mk, mv) in m.iter() {
                    if mv.as_str().is_none() {
                        return Err(err(
                            "safetensors: __metadata__ value is not a string",
                            offset_of(file, mk.raw()),
                        ));
                    }
                }
                check_unique_keys(file, m)?;
                metadata = Some(m);
                continue;
            }
            let info = parse_info(v, data.len(), at)?;
            count += 1;
            sum = sum
                .checked_add(info.end - info.begin)
                .ok_or(err("safetensors: tensors overlap", data_start))?;
            if in_order && info.begin == cursor {
                cursor = info.end;
            } else {
                in_order = false;
            }
        }
        if sum > data.len() {
            return Err(err("safetensors: tensors overlap", data_start));
        }
        if sum < data.len() {
            return Err(err(
                "safetensors: tensors do not cover the data section (gap or trailing bytes)",
                data_start,
            ));
        }
        let st = SafeTensors {
            file,
            header,
            metadata,
            data,
            data_start,
            len: count,
        };
        if !in_order {
            st.check_tiling()?;
        }
        Ok(st)
    }

    /// The header lists the tensors out of data order. The sizes add up to
    /// the data length and every range is inside it, so the tensors tile the
    /// data section exactly when the non-empty ones are pairwise disjoint;
    /// an empty tensor must also not sit strictly inside a non-empty one.
    /// Checked in blocks of [`BLOCK`] non-empty ranges, sorted on the stack:
    /// each block against itself, then against every later tensor and every
    /// empty one by binary search. O(ceil(n / BLOCK) * h), no allocation.
    fn check_tiling(&self) -> Result<(), Error> {
        let n = self.len;
        if n.div_ceil(BLOCK).saturating_mul(n) > MAX_WORK {
            return Err(err(
                "safetensors: header too costly to validate (too many tensors out of data order)",
                8,
            ));
        }
        let mut start = 0usize; // entry index where the next block starts
        loop {
            let mut buf = [(0usize, 0usize); BLOCK];
            let mut cnt = 0usize;
            let mut end = start; // entry index just past the block
            for (i, (_, e)) in self.entries().enumerate().skip(start) {
                if e.end == e.begin {
                    end = i + 1;
                    continue;
                }
                let Some(slot) = buf.get_mut(cnt) else { break };
                *slot = (e.begin, e.end);
                cnt += 1;
                end = i + 1;
            }
            let Some(block) = buf.get_mut(..cnt) else {
                return Ok(());
            };
            if block.is_empty() {
                return Ok(());
            }
            crate::sort::sort_by(block, |a, b| a.cmp(b));
            for w in block.windows(2) {
                if let [a, b] = w {
                    if a.1 > b.0 {
                        return Err(err("safetensors: tensors overlap", self.data_start));
                    }
                }
            }
            for (i, (k, e)) in self.entries().enumerate() {
                let empty = e.end == e.begin;
                if i < end && !empty {
                    // In this block, or in an earlier one (which was
                    // checked against this block then).
                    continue;
                }
                // The range with the largest start below e.end is the only
                // one that can overlap e (the block is sorted and disjoint).
                let p = block.partition_point(|r| r.0 < e.end);
                let hit = p
                    .checked_sub(1)
                    .and_then(|q| block.get(q))
                    .is_some_and(|r| r.1 > e.begin);
                if hit {
                    let at = offset_of(self.file, k.raw());
                    return Err(if empty {
                        err("safetensors: empty tensor inside another tensor's data", at)
                    } else {
                        err("safetensors: tensors overlap", at)
                    });
                }
            }
            start = end;
        }
    }

    /// The tensor entries (not `__metadata__`), re-validated.
    fn entries(&self) -> impl Iterator<Item = (Str<'a>, Info)> + 'a {
        let data_len = self.data.len();
        self.header.iter().filter_map(move |(k, v)| {
            if k.eq_str(METADATA_KEY) {
                return None;
            }
            parse_info(v, data_len, 0).ok().map(|i| (k, i))
        })
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the file holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The tensor named `name` (O(header size)).
    pub fn tensor(&self, name: &str) -> Option<TensorView<'a>> {
        if name == METADATA_KEY {
            return None;
        }
        let v = self.header.find(name)?;
        parse_info(v, self.data.len(), 0).ok()?.view(self.data)
    }

    /// Every tensor with its name, in header order.
    pub fn tensors(&self) -> Tensors<'a> {
        Tensors {
            it: self.header.iter(),
            data: self.data,
        }
    }

    /// The `__metadata__` value for `key`, if any.
    pub fn metadata(&self, key: &str) -> Option<Str<'a>> {
        self.metadata?.find(key)?.as_str()
    }

    /// The whole `__metadata__` object (its values are all strings).
    pub fn metadata_object(&self) -> Option<Object<'a>> {
        self.metadata
    }

    /// The data section.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Where the data section starts in the file (`8 + N`).
    pub fn data_offset(&self) -> usize {
        self.data_start
    }
}

/// The tensors of a [`SafeTensors`], with their names, in header order.
#[derive(Clone, Debug)]
pub struct Tensors<'a> {
    it: ObjectIter<'a>,
    data: &'a [u8],
}

impl<'a> Iterator for Tensors<'a> {
    type Item = (Str<'a>, TensorView<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (k, v) = self.it.next()?;
            if k.eq_str(METADATA_KEY) {
                continue;
            }
            let view = parse_info(v, self.data.len(), 0).ok()?.view(self.data)?;
            return Some((k, view));
        }
    }
}

/// The next key of the strictly increasing run `it` is in, if the run goes on.
fn run_next<'a>(it: &mut ObjectIter<'a>, prev: &mut Option<Str<'a>>) -> Option<Str<'a>> {
    let mut peek = *it;
    let (k, _) = peek.next()?;
    if let Some(p) = prev {
        if k.cmp_decoded(p) != Ordering::Greater {
            return None;
        }
    }
    *it = peek;
    *prev = Some(k);
    Some(k)
}

fn at_end(mut it: ObjectIter<'_>) -> bool {
    it.next().is_none()
}

/// Rejects an object with a repeated key (decoded comparison), without
/// memory. Keys in one strictly increasing run are distinct. With `k` runs,
/// either each pair of runs is merged (O(k * h)), or keys are taken in
/// blocks of [`BLOCK`], sorted on the stack, and every later key is looked
/// up in each block (O(ceil(n / BLOCK) * h)), whichever is cheaper.
fn check_unique_keys(file: &[u8], obj: Object<'_>) -> Result<(), Error> {
    let mut runs = 0usize;
    let mut n = 0usize;
    let mut prev: Option<Str<'_>> = None;
    for (k, _) in obj.iter() {
        n += 1;
        if prev.is_none_or(|p| k.cmp_decoded(&p) != Ordering::Greater) {
            runs += 1;
        }
        prev = Some(k);
    }
    if runs <= 1 {
        return Ok(());
    }
    let blocks = n.div_ceil(BLOCK);
    if runs.min(blocks).saturating_mul(n) > MAX_WORK {
        return Err(err(
            "safetensors: header too costly to check for repeated names",
            offset_of(file, obj.raw()),
        ));
    }
    if runs <= blocks {
        unique_by_runs(file, obj)
    } else {
        unique_by_blocks(file, obj)
    }
}

fn dup(file: &[u8], k: Str<'_>) -> Error {
    err(
        "safetensors: repeated name in the header",
        offset_of(file, k.raw()),
    )
}

fn unique_by_blocks(file: &[u8], obj: Object<'_>) -> Result<(), Error> {
    let mut start = obj.iter();
    loop {
        let mut buf = [Str::default(); BLOCK];
        let mut cnt = 0usize;
        let mut rest = start;
        while let Some(slot) = buf.get_mut(cnt) {
            let Some((k, _)) = rest.next() else { break };
            *slot = k;
            cnt += 1;
        }
        let Some(block) = buf.get_mut(..cnt) else {
            break;
        };
        if block.is_empty() {
            return Ok(());
        }
        crate::sort::sort_by(block, |a, b| a.cmp_decoded(b));
        for w in block.windows(2) {
            if let [a, b] = w {
                if a.cmp_decoded(b) == Ordering::Equal {
                    return Err(dup(file, *b));
                }
            }
        }
        let after = rest;
        for (k, _) in rest {
            if block.binary_search_by(|p| p.cmp_decoded(&k)).is_ok() {
                return Err(dup(file, k));
            }
        }
        start = after;
    }
    Ok(())
}

fn unique_by_runs(file: &[u8], obj: Object<'_>) -> Result<(), Error> {
    let mut a_start = obj.iter();
    loop {
        // `b` walks the runs after run `a`, one at a time.
        let mut b = a_start;
        let mut p = None;
        while run_next(&mut b, &mut p).is_some() {}
        if at_end(b) {
            return Ok(());
        }
        let next_a = b;
        while !at_end(b) {
            let mut a = a_start;
            let (mut pa, mut pb) = (None, None);
            let mut ka = run_next(&mut a, &mut pa);
            let mut kb = run_next(&mut b, &mut pb);
            while let (Some(x), Some(y)) = (ka, kb) {
                match x.cmp_decoded(&y) {
                    Ordering::Equal => return Err(dup(file, y)),
                    Ordering::Less => ka = run_next(&mut a, &mut pa),
                    Ordering::Greater => kb = run_next(&mut b, &mut pb),
                }
            }
            while kb.is_some() {
                kb = run_next(&mut b, &mut pb);
            }
        }
        a_start = next_a;
    }
}
