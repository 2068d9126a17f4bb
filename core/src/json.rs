//! A zero-copy, allocation-free JSON reader (RFC 8259), and a string escaper
//! for writing JSON.
//!
//! [`parse`] validates the whole document in one linear pass, without
//! recursion (nesting is tracked in a 128-bit stack, so at most [`MAX_DEPTH`]
//! arrays/objects may be open at once), and returns a [`Value`]: a view of
//! the top value that borrows the input. Arrays, objects and strings stay
//! raw slices of the input; they are re-scanned lazily by the accessors
//! ([`Value::get`], [`Value::iter_array`], [`Value::iter_object`],
//! [`Str::chars`], ...). Those re-scans only ever see validated text, so they
//! do not fail; they are still written to stop (never panic) on anything
//! unexpected.
//!
//! What is accepted is RFC 8259's grammar, strictly:
//! * the input must be UTF-8 (no byte order mark), with only `' '`, `\t`,
//!   `\n`, `\r` around the single top-level value (any value, not only
//!   objects and arrays);
//! * numbers: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
//!   (no `+`, no leading zeros, no `.5`/`5.`, no `NaN`/`Infinity`);
//! * strings: no raw control characters (< U+0020); escapes are `\" \\ \/
//!   \b \f \n \r \t \uXXXX`; a `\uXXXX` surrogate must be a high surrogate
//!   immediately followed by an escaped low surrogate (a lone surrogate cannot
//!   be decoded to UTF-8 and is rejected);
//! * no trailing commas, no comments, literals `true`/`false`/`null` only.
//!
//! Duplicate object keys are not rejected by [`parse`] (that would not be
//! linear without memory); [`Object::get`] returns the *last* value for a key,
//! as Python's `json` does.
//!
//! Costs: [`parse`] is O(n) in the input length. [`Object::get`] and
//! [`Array::get`] are O(size of the container) per call; iterators are O(size
//! of the elements they step over).

use core::cmp::Ordering;
use core::fmt;

use crate::error::Error;

/// The deepest nesting of arrays and objects [`parse`] accepts.
pub const MAX_DEPTH: usize = 128;

fn err(what: &'static str, offset: usize) -> Error {
    Error::Json { what, offset }
}

/// Validates `bytes` as one JSON text and returns a view of its value.
pub fn parse(bytes: &[u8]) -> Result<Value<'_>, Error> {
    let text =
        core::str::from_utf8(bytes).map_err(|e| err("json: invalid UTF-8", e.valid_up_to()))?;
    let b = text.as_bytes();
    let start = skip_ws(b, 0);
    let end = validate(b, start)?;
    let after = skip_ws(b, end);
    if after != b.len() {
        return Err(err("json: unexpected characters after the value", after));
    }
    match value_at(text, start) {
        Some((v, _)) => Ok(v),
        None => Err(err("json: internal error re-reading the value", start)),
    }
}

// ---------------------------------------------------------------------------
// Validation (the single pass).

#[inline]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Validates the value starting at `i` (whitespace skipped) and returns the
/// offset just past it.
fn validate(b: &[u8], mut i: usize) -> Result<usize, Error> {
    // Bit `d` of `stack` is 1 when the container at depth `d` is an object.
    let mut stack: u128 = 0;
    let mut depth: usize = 0;
    'value: loop {
        // A value is expected at `i`.
        match b.get(i) {
            Some(&c @ (b'{' | b'[')) => {
                if depth >= MAX_DEPTH {
                    return Err(err("json: nesting deeper than 128", i));
                }
                let is_object = c == b'{';
                if is_object {
                    stack |= 1u128 << depth;
                } else {
                    stack &= !(1u128 << depth);
                }
                depth += 1;
                i = skip_ws(b, i + 1);
                let close = if is_object { b'}' } else { b']' };
                if b.get(i) == Some(&close) {
                    depth -= 1;
                    i += 1;
                } else if is_object {
                    i = member_key(b, i)?;
                    continue 'value;
                } else {
                    continue 'value;
                }
            }
            Some(b'"') => i = scan_string(b, i)?,
            Some(b't') => i = literal(b, i, b"true")?,
            Some(b'f') => i = literal(b, i, b"false")?,
            Some(b'n') => i = literal(b, i, b"null")?,
            Some(b'-' | b'0'..=b'9') => i = scan_number(b, i)?,
            Some(_) => return Err(err("json: expected a value", i)),
            None => return Err(err("json: unexpected end, expected a value", i)),
        }
        // A value ended just before `i`: close containers until one goes on.
        loop {
            if depth == 0 {
                return Ok(i);
            }
            i = skip_ws(b, i);
            let in_object = (stack >> (depth - 1)) & 1 == 1;
            match (b.get(i), in_object) {
                (Some(b','), false) => {
                    i = skip_ws(b, i + 1);
                    continue 'value;
                }
                (Some(b','), true) => {
                    i = member_key(b, skip_ws(b, i + 1))?;
                    continue 'value;
                }
                (Some(b']'), false) | (Some(b'}'), true) => {
                    depth -= 1;
                    i += 1;
                }
                (None, _) => return Err(err("json: unexpected end inside an array or object", i)),
                (Some(_), false) => return Err(err("json: expected ',' or ']'", i)),
                (Some(_), true) => return Err(err("json: expected ',' or '}'", i)),
            }
        }
    }
}

/// `"key" :` at `i`; returns the offset of the member's value.
fn member_key(b: &[u8], i: usize) -> Result<usize, Error> {
    if b.get(i) != Some(&b'"') {
        return Err(err("json: expected a string key", i));
    }
    let i = skip_ws(b, scan_string(b, i)?);
    if b.get(i) != Some(&b':') {
        return Err(err("json: expected ':' after a key", i));
    }
    Ok(skip_ws(b, i + 1))
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, Error> {
    let end = i.saturating_add(word.len());
    if b.get(i..end) == Some(word) {
        Ok(end)
    } else {
        Err(err("json: invalid literal", i))
    }
}

fn scan_digits(b: &[u8], mut i: usize) -> usize {
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

/// Validates the number at `i` and returns the offset just past it.
fn scan_number(b: &[u8], i: usize) -> Result<usize, Error> {
    let mut j = i;
    if b.get(j) == Some(&b'-') {
        j += 1;
    }
    match b.get(j) {
        Some(b'0') => {
            j += 1;
            if let Some(b'0'..=b'9') = b.get(j) {
                return Err(err("json: number with a leading zero", j));
            }
        }
        Some(b'1'..=b'9') => j = scan_digits(b, j + 1),
        _ => return Err(err("json: number: expected a digit", j)),
    }
    if b.get(j) == Some(&b'.') {
        let k = scan_digits(b, j + 1);
        if k == j + 1 {
            return Err(err("json: number: expected a digit after '.'", k));
        }
        j = k;
    }
    if let Some(b'e' | b'E') = b.get(j) {
        j += 1;
        if let Some(b'+' | b'-') = b.get(j) {
            j += 1;
        }
        let k = scan_digits(b, j);
        if k == j {
            return Err(err("json: number: expected a digit in the exponent", k));
        }
        j = k;
    }
    Ok(j)
}

fn hex_digit(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some(u32::from(c - b'0')),
        b'a'..=b'f' => Some(u32::from(c - b'a') + 10),
        b'A'..=b'F' => Some(u32::from(c - b'A') + 10),
        _ => None,
    }
}

/// The four hex digits at `b[i..i + 4]`.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let d = b.get(i..i.checked_add(4)?)?;
    let mut v = 0;
    for &c in d {
        v = (v << 4) | hex_digit(c)?;
    }
    Some(v)
}

/// Validates the string whose opening quote is at `i` (the input is already
/// known to be UTF-8) and returns the offset just past its closing quote.
fn scan_string(b: &[u8], i: usize) -> Result<usize, Error> {
    let mut j = i + 1;
    loop {
        match b.get(j) {
            None => return Err(err("json: unterminated string", i)),
            Some(b'"') => return Ok(j + 1),
            Some(b'\\') => match b.get(j + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                Some(b'u') => {
                    let cp = hex4(b, j + 2).ok_or(err("json: \\u needs four hex digits", j))?;
                    match cp {
                        0xD800..=0xDBFF => {
                            let lo = if b.get(j + 6..j + 8) == Some(b"\\u") {
                                hex4(b, j + 8)
                            } else {
                                None
                            };
                            match lo {
                                Some(0xDC00..=0xDFFF) => j += 12,
                                _ => return Err(err("json: unpaired high surrogate", j)),
                            }
                        }
                        0xDC00..=0xDFFF => return Err(err("json: unpaired low surrogate", j)),
                        _ => j += 6,
                    }
                }
                _ => return Err(err("json: invalid escape", j)),
            },
            Some(&c) if c < 0x20 => return Err(err("json: control character in a string", j)),
            Some(_) => j += 1,
        }
    }
}

// ---------------------------------------------------------------------------
// Re-scanning validated text. These return `None` (never panic) on anything
// unexpected, which cannot happen on text that `validate` accepted.

/// Offset just past the string whose opening quote is at `i`.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i.checked_add(1)?;
    loop {
        match *b.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j = j.checked_add(2)?,
            _ => j += 1,
        }
    }
}

/// Offset just past the array or object opening at `i`.
fn skip_container(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        match *b.get(j)? {
            b'"' => {
                j = skip_string(b, j)?;
                continue;
            }
            b'{' | b'[' => depth = depth.checked_add(1)?,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
}

/// The value starting at `i` and the offset just past it.
fn value_at(text: &str, i: usize) -> Option<(Value<'_>, usize)> {
    let b = text.as_bytes();
    match *b.get(i)? {
        b'"' => {
            let end = skip_string(b, i)?;
            let raw = text.get(i + 1..end.checked_sub(1)?)?;
            Some((Value::String(Str { raw }), end))
        }
        b'{' => {
            let end = skip_container(b, i)?;
            Some((
                Value::Object(Object {
                    raw: text.get(i..end)?,
                }),
                end,
            ))
        }
        b'[' => {
            let end = skip_container(b, i)?;
            Some((
                Value::Array(Array {
                    raw: text.get(i..end)?,
                }),
                end,
            ))
        }
        b't' if b.get(i..i + 4) == Some(b"true") => Some((Value::Bool(true), i + 4)),
        b'f' if b.get(i..i + 5) == Some(b"false") => Some((Value::Bool(false), i + 5)),
        b'n' if b.get(i..i + 4) == Some(b"null") => Some((Value::Null, i + 4)),
        b'-' | b'0'..=b'9' => {
            let mut end = i + 1;
            while let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') = b.get(end) {
                end += 1;
            }
            Some((
                Value::Number(Number {
                    raw: text.get(i..end)?,
                }),
                end,
            ))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Values.

/// A validated JSON value, borrowing the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, kept as its text.
    Number(Number<'a>),
    /// A string, kept as its text between the quotes (escapes not decoded).
    String(Str<'a>),
    /// An array, kept as its text from `[` to `]`.
    Array(Array<'a>),
    /// An object, kept as its text from `{` to `}`.
    Object(Object<'a>),
}

impl<'a> Value<'a> {
    /// The JSON type's name, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_number(&self) -> Option<Number<'a>> {
        match *self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<Str<'a>> {
        match *self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<Array<'a>> {
        match *self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<Object<'a>> {
        match *self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// For an object: the value of `key` (compared after decoding escapes;
    /// the last one if the key is repeated). `None` for other types.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.as_object()?.get(key)
    }

    /// For an array: its elements, lazily.
    pub fn iter_array(&self) -> Option<ArrayIter<'a>> {
        Some(self.as_array()?.iter())
    }

    /// For an object: its `(key, value)` members in document order, lazily.
    pub fn iter_object(&self) -> Option<ObjectIter<'a>> {
        Some(self.as_object()?.iter())
    }

    /// For a number: the nearest `f64` (correctly rounded); `None` if it
    /// overflows to infinity or this is not a number.
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number()?.as_f64()
    }

    /// For a number: the nearest `f32` (rounded once, from the decimal text).
    pub fn as_f32(&self) -> Option<f32> {
        self.as_number()?.as_f32()
    }

    /// For a number with an exact integer value in `i64` (`3`, `-2`, `1e3`,
    /// `2.50e1`): that value. `None` for fractions, overflow and non-numbers.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number()?.as_i64()
    }

    /// Like [`Value::as_i64`], for `u64` (`-0` is 0).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number()?.as_u64()
    }

    /// Like [`Value::as_u64`], for `usize`.
    pub fn as_usize(&self) -> Option<usize> {
        self.as_number()?.as_usize()
    }

    /// For a string: its raw text between the quotes, escapes not decoded.
    pub fn as_str_raw(&self) -> Option<&'a str> {
        Some(self.as_str()?.raw())
    }

    /// For a string: whether its decoded contents equal `s` (`false` for
    /// other types).
    pub fn str_eq(&self, s: &str) -> bool {
        self.as_str().is_some_and(|v| v.eq_str(s))
    }

    /// For a string: decodes it into `out` as UTF-8 and returns the length
    /// written. An error if this is not a string or `out` is too short.
    pub fn unescape_into(&self, out: &mut [u8]) -> Result<usize, Error> {
        match self.as_str() {
            Some(s) => s.unescape_into(out),
            None => Err(Error::Unsupported {
                what: "json: unescape of a value that is not a string",
                value: 0,
            }),
        }
    }
}

/// A JSON number, kept as its validated text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Number<'a> {
    raw: &'a str,
}

impl<'a> Number<'a> {
    /// The number's text, as written.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// Whether the text is a plain integer: optional `-`, digits, no
    /// fraction and no exponent.
    pub fn is_integer_literal(&self) -> bool {
        let digits = self.raw.strip_prefix('-').unwrap_or(self.raw);
        !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())
    }

    /// The nearest `f64` (crate::decimal rounds correctly); `None` when the
    /// value overflows to infinity.
    pub fn as_f64(&self) -> Option<f64> {
        crate::decimal::parse_f64(self.raw).filter(|x| x.is_finite())
    }

    /// The nearest `f32`, rounded once from the decimal text; `None` when it
    /// overflows to infinity.
    pub fn as_f32(&self) -> Option<f32> {
        crate::decimal::parse_f32(self.raw).filter(|x| x.is_finite())
    }

    /// The exact integer value if it fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        let (neg, mag) = exact_integer(self.raw)?;
        if neg {
            if mag <= 1u64 << 63 {
                Some((mag as i64).wrapping_neg())
            } else {
                None
            }
        } else {
            i64::try_from(mag).ok()
        }
    }

    /// The exact integer value if it fits in `u64` (`-0` is 0).
    pub fn as_u64(&self) -> Option<u64> {
        match exact_integer(self.raw)? {
            (true, 0) => Some(0),
            (false, m) => Some(m),
            (true, _) => None,
        }
    }

    /// The exact integer value if it fits in `usize`.
    pub fn as_usize(&self) -> Option<usize> {
        usize::try_from(self.as_u64()?).ok()
    }
}

/// The exact value of a JSON number as (negative, magnitude), if it is an
/// integer whose magnitude fits in `u64`.
fn exact_integer(raw: &str) -> Option<(bool, u64)> {
    let b = raw.as_bytes();
    let (neg, rest) = match b.split_first() {
        Some((b'-', r)) => (true, r),
        _ => (false, b),
    };
    let (mant, exp) = match rest.iter().position(|&c| c == b'e' || c == b'E') {
        Some(p) => (rest.get(..p)?, Some(rest.get(p + 1..)?)),
        None => (rest, None),
    };
    let (int, frac) = match mant.iter().position(|&c| c == b'.') {
        Some(p) => (mant.get(..p)?, mant.get(p + 1..)?),
        None => (mant, &[][..]),
    };
    // The decimal exponent, clamped far outside the range that matters.
    const CLAMP: i64 = 1 << 40;
    let mut e: i64 = 0;
    if let Some(exp) = exp {
        let (eneg, digits) = match exp.split_first() {
            Some((b'-', r)) => (true, r),
            Some((b'+', r)) => (false, r),
            _ => (false, exp),
        };
        for &c in digits {
            if !c.is_ascii_digit() {
                return None;
            }
            e = (e * 10 + i64::from(c - b'0')).min(CLAMP);
        }
        if eneg {
            e = -e;
        }
    }
    // value = D * 10^(e - frac.len()), D = the digits of int and frac.
    let n = int.len().checked_add(frac.len())?;
    let digit = |k: usize| -> Option<u8> {
        let c = if k < int.len() {
            *int.get(k)?
        } else {
            *frac.get(k - int.len())?
        };
        if c.is_ascii_digit() {
            Some(c - b'0')
        } else {
            None
        }
    };
    let mut first = None;
    let mut last = 0;
    for k in 0..n {
        if digit(k)? != 0 {
            if first.is_none() {
                first = Some(k);
            }
            last = k;
        }
    }
    let Some(first) = first else {
        return Some((neg, 0));
    };
    let frac_len = i64::try_from(frac.len()).ok()?.min(CLAMP);
    let trailing = i64::try_from(n - 1 - last).ok()?.min(CLAMP);
    let scale = e - frac_len + trailing;
    let sig = last - first + 1;
    if scale < 0 || sig > 20 || scale > 20 || sig as i64 + scale > 20 {
        return None;
    }
    let mut v: u128 = 0;
    for k in first..=last {
        v = v * 10 + u128::from(digit(k)?);
    }
    for _ in 0..scale {
        v *= 10;
    }
    u64::try_from(v).ok().map(|m| (neg, m))
}

/// A JSON string, kept as its validated text between the quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Str<'a> {
    raw: &'a str,
}

impl<'a> Str<'a> {
    /// The raw text between the quotes, escapes not decoded.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// The contents without copying, when the string has no escapes.
    pub fn as_plain(&self) -> Option<&'a str> {
        if self.raw.as_bytes().contains(&b'\\') {
            None
        } else {
            Some(self.raw)
        }
    }

    /// The decoded characters.
    pub fn chars(&self) -> Chars<'a> {
        Chars { rest: self.raw }
    }

    /// The decoded contents as UTF-8 bytes.
    pub fn bytes(&self) -> Bytes<'a> {
        Bytes {
            rest: self.raw.as_bytes(),
            buf: [0; 4],
            pos: 0,
            len: 0,
        }
    }

    /// The length of the decoded contents in UTF-8 bytes.
    pub fn decoded_len(&self) -> usize {
        match self.as_plain() {
            Some(s) => s.len(),
            None => self.chars().map(char::len_utf8).sum(),
        }
    }

    /// Whether the decoded contents equal `s`.
    pub fn eq_str(&self, s: &str) -> bool {
        match self.as_plain() {
            Some(p) => p == s,
            None => self.bytes().eq(s.bytes()),
        }
    }

    /// Compares the decoded contents of two strings (byte order of their
    /// UTF-8, which is code point order).
    pub fn cmp_decoded(&self, other: &Str<'_>) -> Ordering {
        match (self.as_plain(), other.as_plain()) {
            (Some(a), Some(b)) => a.cmp(b),
            _ => self.bytes().cmp(other.bytes()),
        }
    }

    /// Decodes the string into `out` as UTF-8 and returns the length written.
    pub fn unescape_into(&self, out: &mut [u8]) -> Result<usize, Error> {
        let needed = self.decoded_len();
        let Some(dst) = out.get_mut(..needed) else {
            return Err(Error::BufferTooSmall {
                what: "json: unescaped string",
                need: needed,
                have: out.len(),
            });
        };
        for (d, s) in dst.iter_mut().zip(self.bytes()) {
            *d = s;
        }
        Ok(needed)
    }

    /// Decodes the string into `out` and returns it as a `&str`.
    pub fn unescape_to_str<'b>(&self, out: &'b mut [u8]) -> Result<&'b str, Error> {
        let n = self.unescape_into(out)?;
        let written = out.get(..n).unwrap_or(&[]);
        core::str::from_utf8(written)
            .map_err(|e| err("json: string decodes to invalid UTF-8", e.valid_up_to()))
    }
}

/// Decodes the escape at the start of `b` (`b[0] == b'\\'`): the character and
/// the number of bytes it used.
fn decode_escape(b: &[u8]) -> Option<(char, usize)> {
    let c = match *b.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let hi = hex4(b, 2)?;
            if (0xD800..0xDC00).contains(&hi) {
                if b.get(6..8) != Some(b"\\u") {
                    return None;
                }
                let lo = hex4(b, 8)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return None;
                }
                let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Some((char::from_u32(cp)?, 12));
            }
            return Some((char::from_u32(hi)?, 6));
        }
        _ => return None,
    };
    Some((c, 2))
}

/// The decoded characters of a [`Str`].
#[derive(Clone, Debug)]
pub struct Chars<'a> {
    rest: &'a str,
}

impl Iterator for Chars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let b = self.rest.as_bytes();
        let (c, used) = if *b.first()? == b'\\' {
            match decode_escape(b) {
                Some(d) => d,
                None => {
                    self.rest = "";
                    return None;
                }
            }
        } else {
            let c = self.rest.chars().next()?;
            (c, c.len_utf8())
        };
        self.rest = self.rest.get(used..).unwrap_or("");
        Some(c)
    }
}

/// The decoded UTF-8 bytes of a [`Str`].
#[derive(Clone, Debug)]
pub struct Bytes<'a> {
    rest: &'a [u8],
    buf: [u8; 4],
    pos: u8,
    len: u8,
}

impl Iterator for Bytes<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        if self.pos < self.len {
            let c = *self.buf.get(usize::from(self.pos))?;
            self.pos += 1;
            return Some(c);
        }
        let (&first, tail) = self.rest.split_first()?;
        if first != b'\\' {
            self.rest = tail;
            return Some(first);
        }
        let Some((c, used)) = decode_escape(self.rest) else {
            self.rest = &[];
            return None;
        };
        self.rest = self.rest.get(used..).unwrap_or(&[]);
        let n = c.encode_utf8(&mut self.buf).len();
        self.len = n as u8;
        self.pos = 1;
        Some(self.buf[0])
    }
}

/// A JSON array, kept as its validated text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Array<'a> {
    raw: &'a str,
}

impl<'a> Array<'a> {
    /// The text from `[` to `]`.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// The elements, lazily.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            text: self.raw,
            pos: 1,
        }
    }

    /// The number of elements (O(size of the array)).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Element `i` (O(size of the elements before it)).
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        self.iter().nth(i)
    }
}

impl<'a> IntoIterator for Array<'a> {
    type Item = Value<'a>;
    type IntoIter = ArrayIter<'a>;
    fn into_iter(self) -> ArrayIter<'a> {
        self.iter()
    }
}

/// The elements of an [`Array`].
#[derive(Clone, Copy, Debug)]
pub struct ArrayIter<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        let b = self.text.as_bytes();
        let mut i = skip_ws(b, self.pos);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
        match value_at(self.text, i) {
            Some((v, end)) => {
                self.pos = end;
                Some(v)
            }
            None => {
                self.pos = b.len();
                None
            }
        }
    }
}

/// A JSON object, kept as its validated text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Object<'a> {
    raw: &'a str,
}

impl<'a> Object<'a> {
    /// The text from `{` to `}`.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// The `(key, value)` members in document order, lazily.
    pub fn iter(&self) -> ObjectIter<'a> {
        ObjectIter {
            text: self.raw,
            pos: 1,
        }
    }

    /// The number of members (O(size of the object)).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The value of `key`, compared after decoding escapes. If the key is
    /// repeated, the last value (as Python's `json` does); the whole object is
    /// scanned.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        let mut found = None;
        for (k, v) in self.iter() {
            if k.eq_str(key) {
                found = Some(v);
            }
        }
        found
    }

    /// The value of the *first* member named `key`; stops there. For
    /// objects known to have unique keys this is [`Object::get`], cheaper.
    pub fn find(&self, key: &str) -> Option<Value<'a>> {
        self.iter().find(|(k, _)| k.eq_str(key)).map(|(_, v)| v)
    }
}

impl<'a> IntoIterator for Object<'a> {
    type Item = (Str<'a>, Value<'a>);
    type IntoIter = ObjectIter<'a>;
    fn into_iter(self) -> ObjectIter<'a> {
        self.iter()
    }
}

/// The members of an [`Object`].
#[derive(Clone, Copy, Debug)]
pub struct ObjectIter<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> ObjectIter<'a> {
    fn member(&self, i: usize) -> Option<(Str<'a>, Value<'a>, usize)> {
        let b = self.text.as_bytes();
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(b, i)?;
        let key = Str {
            raw: self.text.get(i + 1..key_end - 1)?,
        };
        let colon = skip_ws(b, key_end);
        if b.get(colon) != Some(&b':') {
            return None;
        }
        let (v, end) = value_at(self.text, skip_ws(b, colon + 1))?;
        Some((key, v, end))
    }
}

impl<'a> Iterator for ObjectIter<'a> {
    type Item = (Str<'a>, Value<'a>);

    fn next(&mut self) -> Option<(Str<'a>, Value<'a>)> {
        let b = self.text.as_bytes();
        let mut i = skip_ws(b, self.pos);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
        match self.member(i) {
            Some((k, v, end)) => {
                self.pos = end;
                Some((k, v))
            }
            None => {
                self.pos = b.len();
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Writing.

/// Writes `s` as a JSON string literal (with its quotes): `"` and `\` are
/// escaped, control characters become `\n`, `\t`, ... or `\u00XX`; everything
/// else is written as is (UTF-8).
pub fn write_json_str<W: fmt::Write + ?Sized>(w: &mut W, s: &str) -> fmt::Result {
    w.write_char('"')?;
    let mut start = 0;
    for (i, c) in s.bytes().enumerate() {
        let short = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        // `i` is an ASCII byte, so both slices fall on character boundaries.
        w.write_str(s.get(start..i).unwrap_or(""))?;
        if short.is_empty() {
            write!(w, "\\u{:04x}", c)?;
        } else {
            w.write_str(short)?;
        }
        start = i + 1;
    }
    w.write_str(s.get(start..).unwrap_or(""))?;
    w.write_char('"')
}

/// For a UTF-8 lead byte: how many continuation bytes its character
/// needs and the range the first of them must fall in (which refuses
/// overlong forms, surrogates and code points above U+10FFFF); the others
/// are 0x80..=0xBF. `None` for an ASCII, continuation or invalid byte.
pub fn utf8_lead(b: u8) -> Option<(u8, u8, u8)> {
    Some(match b {
        0xC2..=0xDF => (1, 0x80, 0xBF),
        0xE0 => (2, 0xA0, 0xBF),
        0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
        0xED => (2, 0x80, 0x9F),
        0xF0 => (3, 0x90, 0xBF),
        0xF1..=0xF3 => (3, 0x80, 0xBF),
        0xF4 => (3, 0x80, 0x8F),
        _ => return None,
    })
}

impl Str<'_> {
    /// Whether the decoded contents equal the bytes `b`.
    pub fn eq_str_bytes(&self, b: &[u8]) -> bool {
        self.bytes().eq(b.iter().copied())
    }
}

/// Writes `v` as Python's `json.dumps(v, ensure_ascii=False)` does, which
/// is Hugging Face's `tojson` in chat templates: members in document order,
/// `", "` between items and `": "` after keys, strings decoded and escaped
/// again as Python escapes them ([`write_json_str`]), numbers as written
/// (Python prints a number it parsed the same way unless it has an exponent
/// or trailing zeros: `1e3` would print as `1000.0`). One pass over the
/// validated text, no recursion.
pub fn write_python_json<W: fmt::Write + ?Sized>(w: &mut W, v: &Value) -> fmt::Result {
    let raw = match v {
        Value::Null => return w.write_str("null"),
        Value::Bool(b) => return w.write_str(if *b { "true" } else { "false" }),
        Value::Number(n) => return w.write_str(n.raw()),
        Value::String(s) => return write_python_str(w, s),
        Value::Array(a) => a.raw(),
        Value::Object(o) => o.raw(),
    };
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let end = skip_string(b, i).ok_or(fmt::Error)?;
                let text = raw.get(i + 1..end - 1).ok_or(fmt::Error)?;
                write_python_str(w, &Str { raw: text })?;
                i = end;
            }
            b',' => {
                w.write_str(", ")?;
                i += 1;
            }
            b':' => {
                w.write_str(": ")?;
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => {
                // Brackets, numbers and literals: ASCII up to the next
                // separator, space or string.
                let end = b[i..]
                    .iter()
                    .position(|c| b"\",: \t\n\r".contains(c))
                    .map_or(b.len(), |k| i + k);
                w.write_str(raw.get(i..end).ok_or(fmt::Error)?)?;
                i = end;
            }
        }
    }
    Ok(())
}

/// A decoded string written back as [`write_json_str`] escapes it.
fn write_python_str<W: fmt::Write + ?Sized>(w: &mut W, s: &Str) -> fmt::Result {
    if let Some(plain) = s.as_plain() {
        return write_json_str(w, plain);
    }
    w.write_char('"')?;
    for c in s.chars() {
        let mut buf = [0u8; 4];
        let one = c.encode_utf8(&mut buf);
        // The escaped form without its quotes.
        let mut quoted: heapless::String<8> = heapless::String::new();
        write_json_str(&mut quoted, one)?;
        w.write_str(quoted.get(1..quoted.len() - 1).unwrap_or(""))?;
    }
    w.write_char('"')
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;
    use std::vec::Vec;

    #[test]
    fn python_json_dumps() {
        let cases = [
            (
                r#"{"a":1,"b":[true,null,{"c":"d"}],"e":{}}"#,
                r#"{"a": 1, "b": [true, null, {"c": "d"}], "e": {}}"#,
            ),
            (
                " [ 1 , -2.5e3 , \"x\\u00e9\\n\\/\\u0001\" ] ",
                "[1, -2.5e3, \"x\u{e9}\\n/\\u0001\"]",
            ),
            (r#""caf\u00e9 \ud83d\ude00""#, "\"caf\u{e9} \u{1f600}\""),
            (r#"{"k, :":"v\"}"}"#, r#"{"k, :": "v\"}"}"#),
            ("[]", "[]"),
            ("3", "3"),
        ];
        for (input, want) in cases {
            let mut out = String::new();
            write_python_json(&mut out, &ok(input)).unwrap();
            assert_eq!(out, want, "{input}");
        }
    }

    fn ok(s: &str) -> Value<'_> {
        match parse(s.as_bytes()) {
            Ok(v) => v,
            Err(e) => panic!("{s:?} rejected: {e}"),
        }
    }

    fn bad(s: &[u8]) -> (&'static str, usize) {
        match parse(s) {
            Ok(v) => panic!("{:?} accepted as {v:?}", String::from_utf8_lossy(s)),
            Err(Error::Json { what, offset }) => (what, offset),
            Err(e) => panic!("unexpected error {e}"),
        }
    }

    #[test]
    fn scalars_at_top_level() {
        assert_eq!(ok("null"), Value::Null);
        assert_eq!(ok(" true "), Value::Bool(true));
        assert_eq!(ok("\t\r\nfalse\n"), Value::Bool(false));
        assert_eq!(ok("0").as_i64(), Some(0));
        assert_eq!(ok("\"\"").as_str_raw(), Some(""));
        assert!(ok("[]").as_array().unwrap().is_empty());
        assert!(ok("{}").as_object().unwrap().is_empty());
    }

    #[test]
    fn structure_errors() {
        assert_eq!(bad(b""), ("json: unexpected end, expected a value", 0));
        assert_eq!(bad(b"   ").1, 3);
        assert_eq!(bad(b"[1,]"), ("json: expected a value", 3));
        assert_eq!(bad(b"{\"a\":1,}"), ("json: expected a string key", 7));
        assert_eq!(bad(b"[1 2]"), ("json: expected ',' or ']'", 3));
        assert_eq!(bad(b"{\"a\" 1}"), ("json: expected ':' after a key", 5));
        assert_eq!(bad(b"{\"a\":1 \"b\":2}"), ("json: expected ',' or '}'", 7));
        assert_eq!(bad(b"{1:2}"), ("json: expected a string key", 1));
        assert_eq!(
            bad(b"[1"),
            ("json: unexpected end inside an array or object", 2)
        );
        assert_eq!(
            bad(b"[1]]"),
            ("json: unexpected characters after the value", 3)
        );
        assert_eq!(bad(b"1 2").1, 2);
        assert_eq!(bad(b"[}").0, "json: expected a value");
        assert_eq!(bad(b"{]").0, "json: expected a string key");
        assert_eq!(bad(b"tru").0, "json: invalid literal");
        assert_eq!(bad(b"nul").0, "json: invalid literal");
        assert_eq!(bad(b"True").0, "json: expected a value");
        assert_eq!(
            bad(b"truex").0,
            "json: unexpected characters after the value"
        );
        assert_eq!(bad(b"[,1]").0, "json: expected a value");
        assert_eq!(bad(b"\xef\xbb\xbf{}").0, "json: expected a value");
        assert_eq!(
            bad(b"{} \x0c").0,
            "json: unexpected characters after the value"
        );
        assert_eq!(bad(b"/* */ {}").0, "json: expected a value");
        assert_eq!(bad(b"[1,\x00]").0, "json: expected a value");
    }

    #[test]
    fn numbers_follow_the_grammar() {
        for s in [
            "0",
            "-0",
            "1",
            "-1",
            "10",
            "0.5",
            "-0.5",
            "1e5",
            "1E5",
            "1e+5",
            "1e-5",
            "1.5e5",
            "0e0",
            "-0.0e-0",
            "123456789012345678901234567890",
        ] {
            assert_eq!(ok(s).as_number().unwrap().raw(), s, "{s}");
        }
        for (s, what) in [
            ("01", "json: number with a leading zero"),
            ("-01", "json: number with a leading zero"),
            ("00", "json: number with a leading zero"),
            ("+1", "json: expected a value"),
            (".5", "json: expected a value"),
            ("1.", "json: number: expected a digit after '.'"),
            ("1.e5", "json: number: expected a digit after '.'"),
            ("1e", "json: number: expected a digit in the exponent"),
            ("1e+", "json: number: expected a digit in the exponent"),
            ("-", "json: number: expected a digit"),
            ("-a", "json: number: expected a digit"),
            ("- 1", "json: number: expected a digit"),
            ("NaN", "json: expected a value"),
            ("Infinity", "json: expected a value"),
            ("-Infinity", "json: number: expected a digit"),
            ("0x10", "json: unexpected characters after the value"),
            ("1.5.5", "json: unexpected characters after the value"),
            ("1e5e5", "json: unexpected characters after the value"),
        ] {
            assert_eq!(bad(s.as_bytes()).0, what, "{s}");
        }
    }

    #[test]
    fn exact_integers() {
        let i = |s: &str| ok(s).as_i64();
        let u = |s: &str| ok(s).as_u64();
        assert_eq!(i("0"), Some(0));
        assert_eq!(i("-0"), Some(0));
        assert_eq!(u("-0"), Some(0));
        assert_eq!(u("-0.0e5"), Some(0));
        assert_eq!(i("-1"), Some(-1));
        assert_eq!(u("-1"), None);
        assert_eq!(i("1e3"), Some(1000));
        assert_eq!(i("1E+3"), Some(1000));
        assert_eq!(i("2.50e1"), Some(25));
        assert_eq!(i("1000e-3"), Some(1));
        assert_eq!(i("1.0"), Some(1));
        assert_eq!(i("0.000"), Some(0));
        assert_eq!(i("1.5"), None);
        assert_eq!(i("1e-1"), None);
        assert_eq!(i("15e-1"), None);
        assert_eq!(i("150e-1"), Some(15));
        assert_eq!(i("9223372036854775807"), Some(i64::MAX));
        assert_eq!(i("9223372036854775808"), None);
        assert_eq!(i("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(i("-9223372036854775809"), None);
        assert_eq!(u("18446744073709551615"), Some(u64::MAX));
        assert_eq!(u("18446744073709551616"), None);
        assert_eq!(u("1.8446744073709551615e19"), Some(u64::MAX));
        assert_eq!(u("1e19"), Some(10_000_000_000_000_000_000));
        assert_eq!(u("1e20"), None);
        assert_eq!(u("0e999999999999999999999"), Some(0));
        assert_eq!(u("1e999999999999999999999"), None);
        assert_eq!(u("1e-999999999999999999999"), None);
        assert_eq!(
            u("00000000000000000000000000001e0".trim_start_matches('0')),
            Some(1)
        );
        assert_eq!(u("100000000000000000000000e-23"), Some(1));
        assert_eq!(u("100000000000000000000000e-22"), Some(10));
        assert_eq!(u("0.00000000000000000000000001e26"), Some(1));
        assert_eq!(ok("1").as_usize(), Some(1));
        assert_eq!(ok("\"1\"").as_i64(), None);
        assert!(ok("12").as_number().unwrap().is_integer_literal());
        assert!(ok("-12").as_number().unwrap().is_integer_literal());
        assert!(!ok("1e2").as_number().unwrap().is_integer_literal());
        assert!(!ok("1.0").as_number().unwrap().is_integer_literal());
    }

    #[test]
    fn floats_round_correctly() {
        assert_eq!(ok("1e-06").as_f64(), Some(1e-6));
        assert_eq!(ok("1e-06").as_f32(), Some(1e-6f32));
        assert_eq!(ok("1000000").as_f64(), Some(1e6));
        assert_eq!(ok("0.1").as_f64(), Some(0.1));
        assert_eq!(
            ok("-0").as_f64().map(f64::to_bits),
            Some((-0.0f64).to_bits())
        );
        // Halfway between 1 and the next double: ties to even (down).
        assert_eq!(
            ok("1.00000000000000011102230246251565404236316680908203125").as_f64(),
            Some(1.0)
        );
        // Just above halfway: up.
        assert_eq!(
            ok("1.00000000000000011102230246251565404236316680908203126").as_f64(),
            Some(1.0 + f64::EPSILON)
        );
        assert_eq!(
            ok("2.2250738585072014e-308").as_f64(),
            Some(f64::MIN_POSITIVE)
        );
        assert_eq!(ok("4.9e-324").as_f64(), Some(f64::from_bits(1)));
        assert_eq!(ok("1e-400").as_f64(), Some(0.0));
        assert_eq!(ok("1.7976931348623157e308").as_f64(), Some(f64::MAX));
        assert_eq!(ok("1e400").as_f64(), None);
        assert_eq!(ok("-1e400").as_f64(), None);
        assert_eq!(ok("1e39").as_f32(), None);
        assert_eq!(ok("true").as_f64(), None);
    }

    #[test]
    fn strings_and_escapes() {
        let s = ok(r#""a\"b\\c\/d\be\ff\ng\rh\ti\u0041\u00e9\u20ac\ud83d\ude00""#);
        let want = "a\"b\\c/d\u{8}e\u{c}f\ng\rh\tiA\u{e9}\u{20ac}\u{1f600}";
        assert!(s.str_eq(want));
        assert!(!s.str_eq("a"));
        assert!(!s.str_eq(""));
        let st = s.as_str().unwrap();
        assert_eq!(st.as_plain(), None);
        assert_eq!(st.chars().collect::<String>(), want);
        assert_eq!(st.bytes().collect::<Vec<u8>>(), want.as_bytes());
        assert_eq!(st.decoded_len(), want.len());
        let mut buf = [0u8; 64];
        let n = s.unescape_into(&mut buf).unwrap();
        assert_eq!(&buf[..n], want.as_bytes());
        assert_eq!(st.unescape_to_str(&mut buf).unwrap(), want);
        let mut small = [0u8; 4];
        assert_eq!(
            s.unescape_into(&mut small),
            Err(Error::BufferTooSmall {
                what: "json: unescaped string",
                need: want.len(),
                have: 4
            })
        );
        // Exactly enough room.
        let mut exact = [0u8; 3];
        assert_eq!(ok(r#""\u20ac""#).unescape_into(&mut exact), Ok(3));
        assert_eq!(&exact, "\u{20ac}".as_bytes());
        assert!(ok(r#""\u0000""#).str_eq("\0"));
        assert!(ok(r#""\uD834\uDD1E""#).str_eq("\u{1d11e}"));
        assert!(ok("\"h\u{e9}llo \u{4e16}\"").str_eq("h\u{e9}llo \u{4e16}"));
        assert_eq!(ok("\"plain\"").as_str().unwrap().as_plain(), Some("plain"));
        assert_eq!(
            ok("1").unescape_into(&mut buf).unwrap_err(),
            Error::Unsupported {
                what: "json: unescape of a value that is not a string",
                value: 0
            }
        );
        assert!(!ok("1").str_eq("1"));
    }

    #[test]
    fn string_errors() {
        for (s, what) in [
            (&b"\"abc"[..], "json: unterminated string"),
            (b"\"abc\\\"", "json: unterminated string"),
            (b"\"a\\x\"", "json: invalid escape"),
            (b"\"a\\'\"", "json: invalid escape"),
            (b"\"a\\\n\"", "json: invalid escape"),
            (b"\"\\u12\"", "json: \\u needs four hex digits"),
            (b"\"\\u12G4\"", "json: \\u needs four hex digits"),
            (b"\"\\U0041\"", "json: invalid escape"),
            (b"\"\\ud800\"", "json: unpaired high surrogate"),
            (b"\"\\ud800x\"", "json: unpaired high surrogate"),
            (b"\"\\ud800\\u0041\"", "json: unpaired high surrogate"),
            (b"\"\\ud800\\ud800\"", "json: unpaired high surrogate"),
            (b"\"\\ud800\\n\"", "json: unpaired high surrogate"),
            (b"\"\\udc00\"", "json: unpaired low surrogate"),
            (b"\"\\udfff\\ud800\"", "json: unpaired low surrogate"),
            (b"\"a\tb\"", "json: control character in a string"),
            (b"\"a\nb\"", "json: control character in a string"),
            (b"\"\x00\"", "json: control character in a string"),
            (b"\"\x1f\"", "json: control character in a string"),
            (b"'a'", "json: expected a value"),
        ] {
            assert_eq!(bad(s).0, what, "{:?}", String::from_utf8_lossy(s));
        }
        // DEL and other non-control characters are fine unescaped.
        assert!(ok("\"\x7f\"").str_eq("\x7f"));
    }

    #[test]
    fn invalid_utf8_is_rejected() {
        for (s, at) in [
            (&b"\"\x80\""[..], 1),
            (b"\"\xc3\"", 1),
            (b"\"\xc0\xaf\"", 1),         // overlong '/'
            (b"\"\xe0\x80\xaf\"", 1),     // overlong
            (b"\"\xed\xa0\x80\"", 1),     // UTF-8-encoded surrogate
            (b"\"\xf4\x90\x80\x80\"", 1), // above U+10FFFF
            (b"\"\xff\"", 1),
            (b"[\"ok\", \"\xe2\x82\"]", 8), // truncated sequence
        ] {
            assert_eq!(bad(s), ("json: invalid UTF-8", at));
        }
    }

    #[test]
    fn depth_limit() {
        let mut s = String::new();
        for _ in 0..MAX_DEPTH {
            s.push('[');
        }
        for _ in 0..MAX_DEPTH {
            s.push(']');
        }
        let v = ok(&s);
        // Walk down the 128 levels.
        let mut cur = v;
        let mut levels = 1;
        while let Some(inner) = cur.iter_array().unwrap().next() {
            cur = inner;
            levels += 1;
        }
        assert_eq!(levels, MAX_DEPTH);
        let deeper = std::format!("[{s}]");
        assert_eq!(
            bad(deeper.as_bytes()),
            ("json: nesting deeper than 128", MAX_DEPTH)
        );
        // Objects count too, and a huge depth fails without recursion.
        let mut o = String::new();
        for _ in 0..100_000 {
            o.push_str("{\"a\":");
        }
        assert_eq!(bad(o.as_bytes()).0, "json: nesting deeper than 128");
        let mut mixed = String::new();
        for _ in 0..64 {
            mixed.push_str("{\"k\":[");
        }
        mixed.push('1');
        for _ in 0..64 {
            mixed.push_str("]}");
        }
        ok(&mixed);
    }

    #[test]
    fn objects_and_arrays() {
        let v =
            ok(r#" { "a" : 1 , "b":[true, null, "x", 2.5, {"c":[]}], "a\u0062": "esc", "a": 3 } "#);
        assert_eq!(
            v.get("a").unwrap().as_i64(),
            Some(3),
            "the last duplicate wins"
        );
        assert!(v.get("ab").unwrap().str_eq("esc"), "escaped key");
        assert_eq!(v.get("c"), None);
        assert_eq!(v.get("b").unwrap().get("x"), None);
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 4);
        let keys: Vec<&str> = obj.iter().map(|(k, _)| k.raw()).collect();
        assert_eq!(keys, ["a", "b", "a\\u0062", "a"]);
        let b = v.get("b").unwrap().as_array().unwrap();
        assert_eq!(b.len(), 5);
        let items: Vec<Value> = b.iter().collect();
        assert_eq!(items[0], Value::Bool(true));
        assert_eq!(items[1], Value::Null);
        assert!(items[2].str_eq("x"));
        assert_eq!(items[3].as_f64(), Some(2.5));
        assert_eq!(items[4].get("c").unwrap().as_array().unwrap().raw(), "[]");
        assert_eq!(b.get(3).unwrap().as_f64(), Some(2.5));
        assert_eq!(b.get(5), None);
        assert!(v.iter_array().is_none());
        assert!(b.iter().next().unwrap().iter_object().is_none());
        assert_eq!(ok("[ ]").as_array().unwrap().len(), 0);
        assert_eq!(ok("{ }").as_object().unwrap().len(), 0);
        assert_eq!(ok("[[],[[]],{}]").as_array().unwrap().len(), 3);
        // Strings containing brackets, quotes and escapes do not confuse the re-scan.
        let tricky = ok(r#"[ "]", "\"]", "\\", {"}": "{"}, "[\\\"" ]"#);
        let t: Vec<Value> = tricky.iter_array().unwrap().collect();
        assert_eq!(t.len(), 5);
        assert!(t[1].str_eq("\"]"));
        assert!(t[2].str_eq("\\"));
        assert!(t[3].get("}").unwrap().str_eq("{"));
        assert!(t[4].str_eq("[\\\""));
        assert_eq!(ok("[1,2]").type_name(), "array");
    }

    #[test]
    fn decoded_comparison_orders_by_code_point() {
        let v = ok(r#"["a", "b", "\u0061", "ab", "\u00e9", "\ud83d\ude00", "\uffff"]"#);
        let s: Vec<Str> = v
            .iter_array()
            .unwrap()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert_eq!(s[0].cmp_decoded(&s[1]), Ordering::Less);
        assert_eq!(s[0].cmp_decoded(&s[2]), Ordering::Equal);
        assert_eq!(s[3].cmp_decoded(&s[2]), Ordering::Greater);
        assert_eq!(s[4].cmp_decoded(&s[1]), Ordering::Greater);
        assert_eq!(s[5].cmp_decoded(&s[6]), Ordering::Greater);
    }

    #[test]
    fn accessors_never_panic_on_unvalidated_text() {
        // The views are only built by `parse`, but their scanners must stop
        // cleanly on anything; feed them raw garbage directly.
        for raw in [
            "[",
            "[1,",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1,",
            "[\"\\",
            "{,}",
            "[}",
            "{1}",
            "[\"]",
        ] {
            let a = Array { raw };
            let _ = a.iter().count();
            let o = Object { raw };
            let _ = o.iter().count();
            let _ = o.get("a");
        }
        for raw in [
            "\\",
            "\\u",
            "\\u12",
            "\\ud800",
            "\\ud800\\u",
            "\\ud800\\u0041",
            "\\udc00",
            "a\\q",
        ] {
            let s = Str { raw };
            let _ = s.chars().count();
            let _ = s.bytes().count();
            let _ = s.eq_str("a");
            let mut out = [0u8; 16];
            let _ = s.unescape_into(&mut out);
        }
        for raw in ["", "-", "1e", "e", "1.", "--1", "1e-", "1x", ".", "1..2"] {
            let n = Number { raw };
            let _ = (n.as_i64(), n.as_u64(), n.as_f64());
        }
    }

    #[test]
    fn writer_escapes_and_round_trips() {
        let mut out = String::new();
        write_json_str(&mut out, "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é😀/").unwrap();
        assert_eq!(
            out,
            "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}é😀/\""
        );
        let back = ok(&out);
        assert!(back.str_eq("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é😀/"));
        let mut every = String::new();
        for c in (0u32..0x800)
            .chain(0xfff0..0x10010)
            .filter_map(char::from_u32)
        {
            every.push(c);
        }
        let mut out = String::new();
        write_json_str(&mut out, &every).unwrap();
        assert!(ok(&out).str_eq(&every));
        let mut empty = String::new();
        write_json_str(&mut empty, "").unwrap();
        assert_eq!(empty, "\"\"");
    }
}
