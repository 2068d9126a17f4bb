//! Metadata values: the 13 GGUF value types, a borrowed [`Value`], and a lazy
//! [`Array`] view whose elements are decoded on iteration.

use super::reader::Cursor;
use crate::Error;

/// A GGUF metadata value type, with its id in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `uint8` (id 0).
    U8 = 0,
    /// `int8` (id 1).
    I8 = 1,
    /// `uint16` (id 2).
    U16 = 2,
    /// `int16` (id 3).
    I16 = 3,
    /// `uint32` (id 4).
    U32 = 4,
    /// `int32` (id 5).
    I32 = 5,
    /// `float32` (id 6).
    F32 = 6,
    /// `bool`, one byte, 0 or 1 (id 7).
    Bool = 7,
    /// `string`: a `u64` byte length, then the bytes (id 8).
    Str = 8,
    /// `array`: element type (`u32`), count (`u64`), elements (id 9).
    Array = 9,
    /// `uint64` (id 10).
    U64 = 10,
    /// `int64` (id 11).
    I64 = 11,
    /// `float64` (id 12).
    F64 = 12,
}

impl ValueType {
    /// The type with id `id`, if there is one.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::Str,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The id stored in the file.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// Bytes of one value, or `None` for strings and arrays.
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::Str | ValueType::Array => None,
        }
    }
}

/// One metadata value, borrowed from the file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// `uint8`.
    U8(u8),
    /// `int8`.
    I8(i8),
    /// `uint16`.
    U16(u16),
    /// `int16`.
    I16(i16),
    /// `uint32`.
    U32(u32),
    /// `int32`.
    I32(i32),
    /// `uint64`.
    U64(u64),
    /// `int64`.
    I64(i64),
    /// `float32`.
    F32(f32),
    /// `float64`.
    F64(f64),
    /// `bool`.
    Bool(bool),
    /// `string`: the raw bytes (GGUF says UTF-8; [`Value::as_str`] checks).
    Str(&'a [u8]),
    /// `array`: a lazy view.
    Array(Array<'a>),
}

impl<'a> Value<'a> {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::Str(_) => ValueType::Str,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// Any integer value as `i128` (every GGUF integer fits), else `None`.
    fn as_int(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// An integer of any width whose value fits `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_int().and_then(|v| u64::try_from(v).ok())
    }

    /// An integer of any width whose value fits `u32`.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_int().and_then(|v| u32::try_from(v).ok())
    }

    /// An integer of any width whose value fits `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_int().and_then(|v| i64::try_from(v).ok())
    }

    /// An integer of any width whose value fits `i32`.
    pub fn as_i32(&self) -> Option<i32> {
        self.as_int().and_then(|v| i32::try_from(v).ok())
    }

    /// A `float32`, or a `float64` rounded to the nearest `f32`.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// A `float64`, or a `float32` widened (exactly).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// A string's raw bytes.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A string that is valid UTF-8.
    pub fn as_str(&self) -> Option<&'a str> {
        self.as_bytes().and_then(|s| core::str::from_utf8(s).ok())
    }

    /// An array.
    pub fn as_array(&self) -> Option<Array<'a>> {
        match *self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// A metadata array, validated at parse time and decoded lazily.
/// (`Debug` shows the type and length, not the elements.)
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Array<'a> {
    elem: ValueType,
    len: usize,
    bytes: &'a [u8],
}

impl core::fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Array of {} values", self.len)
    }
}

impl<'a> Array<'a> {
    /// The element type (never [`ValueType::Array`]: nested arrays are rejected).
    pub fn elem_type(&self) -> ValueType {
        self.elem
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements' bytes as stored: `len * size` little-endian values, or
    /// for strings each one's `u64` length followed by its bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The elements in order.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            elem: self.elem,
            left: self.len,
            cur: Cursor::at(self.bytes, 0),
        }
    }

    /// Element `i`: O(1) for fixed-size types, O(i) for strings.
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        if i >= self.len {
            return None;
        }
        match self.elem.fixed_size() {
            Some(size) => {
                let at = i.checked_mul(size)?;
                read_value(&mut Cursor::at(self.bytes, at), self.elem, true).ok()
            }
            None => self.iter().nth(i),
        }
    }
}

impl<'a> IntoIterator for Array<'a> {
    type Item = Value<'a>;
    type IntoIter = ArrayIter<'a>;
    fn into_iter(self) -> ArrayIter<'a> {
        self.iter()
    }
}

/// Iterator over an [`Array`]'s elements.
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    elem: ValueType,
    left: usize,
    cur: Cursor<'a>,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        match read_value(&mut self.cur, self.elem, true) {
            Ok(v) => {
                self.left -= 1;
                Some(v)
            }
            // Unreachable for a validated array; stop rather than panic.
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

/// Reads (and validates) one value of type `ty`. Arrays are allowed only when
/// `in_array` is false: GGUF readers (llama.cpp's included) reject nested arrays.
pub(crate) fn read_value<'a>(
    cur: &mut Cursor<'a>,
    ty: ValueType,
    in_array: bool,
) -> Result<Value<'a>, Error> {
    const W: &str = "metadata value runs past the end of the file";
    Ok(match ty {
        ValueType::U8 => Value::U8(cur.u8(W)?),
        ValueType::I8 => Value::I8(i8::from_le_bytes(cur.array(W)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(cur.array(W)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(cur.array(W)?)),
        ValueType::U32 => Value::U32(cur.u32(W)?),
        ValueType::I32 => Value::I32(i32::from_le_bytes(cur.array(W)?)),
        ValueType::U64 => Value::U64(cur.u64(W)?),
        ValueType::I64 => Value::I64(i64::from_le_bytes(cur.array(W)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(cur.array(W)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(cur.array(W)?)),
        ValueType::Bool => {
            let at = cur.pos();
            match cur.u8(W)? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => return Err(Cursor::err("bool value is neither 0 nor 1", at)),
            }
        }
        ValueType::Str => Value::Str(cur.string("string runs past the end of the file")?),
        ValueType::Array if in_array => {
            return Err(Cursor::err("nested arrays are not supported", cur.pos()))
        }
        ValueType::Array => Value::Array(read_array(cur)?),
    })
}

/// Reads and validates an array: element type, count, then every element
/// (each string's length is checked; each bool must be 0 or 1).
fn read_array<'a>(cur: &mut Cursor<'a>) -> Result<Array<'a>, Error> {
    let type_at = cur.pos();
    let id = cur.u32("array element type runs past the end of the file")?;
    let elem = ValueType::from_id(id).ok_or(Cursor::err("unknown array element type", type_at))?;
    if elem == ValueType::Array {
        return Err(Cursor::err("nested arrays are not supported", type_at));
    }
    let len_at = cur.pos();
    let len = cur.u64("array length runs past the end of the file")?;
    let too_long = Cursor::err("array length exceeds the file", len_at);
    let len = usize::try_from(len).map_err(|_| too_long)?;
    let start = cur.pos();
    let bytes = match elem.fixed_size() {
        Some(size) => {
            let total = len.checked_mul(size).ok_or(too_long)?;
            if total > cur.remaining() {
                return Err(too_long);
            }
            let bytes = cur.take(total, "array runs past the end of the file")?;
            if elem == ValueType::Bool {
                if let Some(i) = bytes.iter().position(|&b| b > 1) {
                    return Err(Cursor::err(
                        "bool value is neither 0 nor 1",
                        start.saturating_add(i),
                    ));
                }
            }
            bytes
        }
        None => {
            // Each string takes at least its 8-byte length.
            if len > cur.remaining() / 8 {
                return Err(too_long);
            }
            for _ in 0..len {
                cur.string("string in array runs past the end of the file")?;
            }
            cur.since(start)
        }
    };
    Ok(Array { elem, len, bytes })
}
