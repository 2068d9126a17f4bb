//! Constrained JSON output: a JSON schema compiled into a fixed-capacity
//! table ([`Schema`]), a byte-level matcher that accepts exactly the
//! prefixes of JSON texts valid under it ([`Matcher`]), and the token mask
//! over a vocabulary sorted by bytes ([`Vocab`]), walked as a trie so that
//! tokens sharing a rejected prefix are rejected together.
//!
//! Supported: `type` (`object`, `array`, `string`, `number`, `integer`,
//! `boolean`, `null`, or a list of them), `properties`,
//! `additionalProperties` (absent or `true`: other keys take any value;
//! `false`: none; a schema: their values follow it; a key that spells a
//! property is that property, once; while a key could still spell one, an
//! escape in it must be one no name holds: not `\/` nor `\u`),
//! `patternProperties` (one pattern: a key it matches takes its schema;
//! see `Schema::key_pattern_of`), `minProperties`, `maxProperties`,
//! `required` (a name beside the properties is one more, of the other
//! keys' or the pattern's schema), `items` (`additionalItems` beside a
//! schema `items` holds always), `minItems`, `maxItems`, `minLength`,
//! `maxLength` (characters; an escape is one), `format` (the ones
//! [`format`] enforces; an undefined name is an annotation), `pattern`
//! (the subset [`pattern`] compiles; beside lengths, see
//! `Pattern::can_end_within`), `minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum` on integers and numbers (a digit is accepted only
//! when some value in range still starts with the digits so far; see
//! `Schema::in_bounds` and `NumBounds::allow`: a bounded number is
//! compared exactly as a decimal and written without an exponent), `enum`
//! and `const` of scalars (values outside `type` left out), `$ref` as a
//! JSON pointer into the root, `allOf` of one schema, `anyOf` of a schema
//! and `{"type": "null"}`, and `anyOf`/`oneOf` of schemas whose values
//! begin with different bytes (a `Union` node: the first byte picks the
//! schema); beside `$ref`, `anyOf`, `oneOf` and `allOf`, the keywords a
//! `Refinement` narrows with. Annotations and unknown keywords are
//! ignored. Any other keyword, and a union of schemas that can begin
//! alike, is refused by name ([`SchemaError`], with the place of its
//! schema) by [`Schema::compile`]; [`Schema::compile_lenient`] (OpenAI's
//! rule without `strict`) leaves such a keyword out and enforces the rest,
//! and follows the first schema of such a union that can begin with a
//! value's first byte (valid output; a later schema is not chosen for that
//! byte). An object with `additionalProperties: false` and no properties
//! takes only `{}`; a schema without `type` any value (`{"type":
//! "json_object"}` mode is a free object).
//!
//! A tool call over several functions ([`Schema::compile_call`], best
//! effort as `compile_lenient`) is a union keyed on the name: `{"name":
//! N, "arguments": A}` where `A` follows the parameters of the function
//! `N` names (a `Select` node, picked when the name's enum value is
//! complete; `arguments` cannot come first).
//!
//! Output rules: whitespace runs are at most [`MAX_WS`] bytes, numbers
//! [`MAX_NUMBER`] bytes, nesting [`MAX_DEPTH`] levels; strings are valid
//! UTF-8 and valid JSON string text; `}` only once every required property
//! was written; nothing after the top value. No allocation, no recursion.

use crate::json::{write_python_json, Value};
use core::fmt::{self, Write};

mod format;
mod pattern;
#[cfg(all(feature = "alloc", feature = "constrain"))]
pub mod sorted;

/// Most schema nodes (each subschema is one).
pub const MAX_NODES: usize = 1024;
/// Most properties, over all objects of a schema.
pub const MAX_PROPS: usize = 2048;
/// Most properties of one object.
pub const MAX_OBJECT_PROPS: usize = 64;
/// Most `enum` values, over all enums of a schema (at most 64 per enum).
pub const MAX_ENUM: usize = 2048;
/// Most functions of a tool-call schema ([`Schema::compile_call`]).
pub const MAX_CALLS: usize = 16;
/// Most schemas `Select` and `Union` nodes choose among, together.
pub const MAX_CHOICES: usize = 512;
/// Most `pattern`s of a schema.
pub const MAX_PATTERNS: usize = 16;
/// Bytes of property names and enum values, together.
pub const MAX_TEXT: usize = 65535;
/// Most nesting of objects, arrays and strings in the output.
pub const MAX_DEPTH: usize = 24;
/// Most whitespace bytes in a row outside strings.
pub const MAX_WS: u8 = 16;
/// Most bytes of one number.
pub const MAX_NUMBER: u8 = 32;

/// The node index meaning "any JSON value".
const ANY: u16 = u16::MAX;
/// An object's `extra` when it takes no key but its properties'.
const NO_EXTRA: u16 = u16::MAX - 1;
/// An object's key its `patternProperties` pattern matched (an
/// `ObjSt::Colon`'s `prop`): its value follows the pattern's schema.
const PATTERN_KEY: u16 = u16::MAX - 2;
/// A `Union`'s `items` when it is a `oneOf` (no value may hold for two of
/// its schemas).
const ONE_OF: u16 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Any,
    Object,
    Array,
    String,
    Number,
    Integer,
    Boolean,
    Null,
    Enum,
    /// One of several schemas, `choices[first..first + count]`, chosen by
    /// the enum value its object's discriminant property took (a tool
    /// call's arguments, by the function's name).
    Select,
    /// `anyOf` of schemas whose values begin differently (a string or an
    /// integer, an object or an array, ...): `choices[first..first +
    /// count]`, the one its value's first byte can begin chosen there.
    Union,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    kind: Kind,
    /// Also accepts `null` (`"type": [T, "null"]`).
    nullable: bool,
    /// Object: its properties, `props[first..first + count]`. Enum: its
    /// values, `enums[first..first + count]`.
    first: u16,
    count: u16,
    /// Object: what a key that is not a property's takes
    /// (`additionalProperties`): `ANY` any value (absent or `true`),
    /// `NO_EXTRA` none (`false`: only the properties' keys; with none,
    /// only `{}`), else the node its values follow.
    extra: u16,
    /// Object: bit i set when property i is required.
    required: u64,
    /// Object: bit i set when property i can take no value (an optional
    /// one whose `enum` has no value of its `type`): its key is refused.
    never: u64,
    /// Array: the items' node, and the bounds on their count. Object: the
    /// discriminant property whose enum value picks a `Select` property's
    /// schema (`ANY`: none).
    items: u16,
    min_items: u16,
    max_items: u16,
    /// Integer: the bounds (`minimum`, `maximum`, and the exclusive forms
    /// made inclusive), `i64::MIN`/`i64::MAX` when absent.
    lo: i64,
    hi: i64,
}

const EMPTY_NODE: Node = Node {
    kind: Kind::Any,
    nullable: false,
    first: 0,
    count: 0,
    extra: ANY,
    required: 0,
    never: 0,
    items: ANY,
    min_items: 0,
    max_items: u16::MAX,
    lo: i64::MIN,
    hi: i64::MAX,
};

/// A bounded `number`'s values are compared in units of 10^-12, exactly.
const NUM_FRAC_DIGITS: u32 = 12;
/// 1.0 in those units.
const NUM_ONE: i64 = 10i64.pow(NUM_FRAC_DIGITS);
/// Most significant digits a bounded `number` is written with (past
/// them a bound's own 15 digits leave nothing to decide).
const NUM_MAX_MANT: u64 = 10u64.pow(17);
/// `x * 10^k`, `None` on overflow (one place for the scaling).
#[inline(never)]
fn scale10(x: i64, k: u32) -> Option<i64> {
    let mut x = Some(x);
    for _ in 0..k {
        x = x?.checked_mul(10);
    }
    x
}
/// Most `number` schemas with bounds in one schema.
pub const MAX_NUMBER_BOUNDS: usize = 16;

/// A `number` schema's bounds in units of 10^-12 (`None`: no such bound),
/// each with whether it is exclusive.
#[derive(Clone, Copy, Debug, Default)]
struct NumBounds {
    lo: Option<(i64, bool)>,
    hi: Option<(i64, bool)>,
}

impl NumBounds {
    /// The magnitudes a value of sign `neg` may have: the lower bound (0,
    /// inclusive, at least) and the upper one, each with its exclusivity.
    fn magnitudes(&self, neg: bool) -> ((i64, bool), Option<(i64, bool)>) {
        let flip = |b: Option<(i64, bool)>| b.map(|(v, open)| (-v, open));
        let (lo, hi) = match neg {
            true => (flip(self.hi), flip(self.lo)),
            false => (self.lo, self.hi),
        };
        let lo = match lo {
            Some((v, open)) if v >= 0 => (v, open),
            _ => (0, false),
        };
        (lo, hi)
    }

    /// Whether an allowed value of sign `neg` has a magnitude in `[a, b)`
    /// (`b` `None`: no end; `point`: `a` alone; `a` `None`: beyond every
    /// bound, as past 9.2 * 10^6).
    fn meets(&self, neg: bool, a: Option<i64>, b: Option<i64>, point: bool) -> bool {
        let ((lo, lo_open), hi) = self.magnitudes(neg);
        let Some(a) = a else {
            return hi.is_none();
        };
        if point {
            let above = a > lo || (a == lo && !lo_open);
            return above && hi.is_none_or(|(h, open)| a < h || (a == h && !open));
        }
        // [a, b) met with the bounds: from max(a, lo) to min(b, hi).
        let (l, l_open) = match lo.cmp(&a) {
            core::cmp::Ordering::Greater => (lo, lo_open),
            core::cmp::Ordering::Equal => (a, lo_open),
            core::cmp::Ordering::Less => (a, false),
        };
        let (u, u_open) = match (b, hi) {
            (None, None) => return true,
            (Some(b), None) => (b, true),
            (None, Some(h)) => h,
            (Some(b), Some((h, open))) if h < b => (h, open),
            (Some(b), Some(_)) => (b, true),
        };
        l < u || (l == u && !l_open && !u_open)
    }

    /// Whether some allowed value begins as a number written so far: sign
    /// `neg`, its digits `mant` (those after the point, `fd`, included),
    /// grammar state `st` (`Matcher::number`), `done`: ending here.
    fn allow(&self, neg: bool, mant: u64, fd: u8, st: u8, done: bool) -> bool {
        // The value so far and one unit of its last place, in units.
        let at = scale10(mant as i64, NUM_FRAC_DIGITS - fd as u32);
        let next = scale10(mant as i64 + 1, NUM_FRAC_DIGITS - fd as u32);
        match st {
            // `-` alone: any magnitude.
            0 => self.meets(neg, Some(0), None, false),
            // Complete, or the fraction's last place reached.
            _ if done || (st == 4 && fd as u32 == NUM_FRAC_DIGITS) => {
                self.meets(neg, at, None, true)
            }
            // A leading 0: [0, 1).
            1 => self.meets(neg, Some(0), Some(NUM_ONE), false),
            // Integer digits m: [m, m + 1) * 10^j for some j >= 0 (a past
            // every bound once it overflows).
            2 => {
                let (mut a, mut b) = (at, next);
                while a.is_some() && !self.meets(neg, a, b, false) {
                    a = a.and_then(|x| scale10(x, 1));
                    b = b.and_then(|x| scale10(x, 1));
                }
                self.meets(neg, a, b, false)
            }
            // After the point: [x, x + one unit of the last place).
            _ => self.meets(neg, at, next, false),
        }
    }
}

/// The floor and ceiling of a JSON number text, exactly (no rounding
/// through `f64`), each saturated to +-2^100 (far beyond `i64`); `None`
/// when the text is not a JSON number.
fn integer_floor_ceil(text: &str) -> Option<(i128, i128)> {
    const FAR: i128 = 1 << 100;
    let b = text.as_bytes();
    let (neg, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        _ => (false, 0),
    };
    // The digits (integer part, then fraction) and the power of ten of
    // the last one.
    let (mut int, mut frac_nonzero, mut digits_at) = (0i128, false, 0i64);
    let mut saw_digit = false;
    let mut point = false;
    let mut mant: [u8; 64] = [0; 64];
    let mut n = 0usize;
    while i < b.len() {
        match b[i] {
            c @ b'0'..=b'9' => {
                saw_digit = true;
                if n < mant.len() {
                    mant[n] = c - b'0';
                    n += 1;
                    if point {
                        digits_at -= 1;
                    }
                } else if !point {
                    // Beyond 64 digits: only the magnitude matters.
                    digits_at += 1;
                } else if c != b'0' {
                    frac_nonzero = true;
                }
            }
            b'.' if !point => point = true,
            b'e' | b'E' => break,
            _ => return None,
        }
        i += 1;
    }
    if !saw_digit {
        return None;
    }
    let mut exp: i64 = 0;
    if i < b.len() {
        let rest = &text[i + 1..];
        let (eneg, digits) = match rest.as_bytes().first() {
            Some(b'-') => (true, &rest[1..]),
            Some(b'+') => (false, &rest[1..]),
            _ => (false, rest),
        };
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        for c in digits.bytes() {
            exp = (exp * 10 + (c - b'0') as i64).min(1 << 20);
        }
        if eneg {
            exp = -exp;
        }
    }
    // The value is mant[..n] x 10^(digits_at + exp), with the fraction's
    // digits past the first 64 nonzero when `frac_nonzero`.
    let shift = digits_at + exp;
    let keep = (n as i64 + shift.min(0)).max(0) as usize;
    for &d in &mant[..keep.min(n)] {
        int = (int * 10 + d as i128).min(FAR);
    }
    for _ in 0..shift.max(0) {
        int = (int * 10).min(FAR);
    }
    if mant[keep.min(n)..n].iter().any(|&d| d != 0) {
        frac_nonzero = true;
    }
    let (floor, ceil) = match (neg, frac_nonzero) {
        (false, false) => (int, int),
        (false, true) => (int, int + 1),
        (true, false) => (-int, -int),
        (true, true) => (-int - 1, -int),
    };
    Some((floor, ceil))
}

/// A bound's JSON number text in units of 10^-12, when it is exact there
/// with room for a digit finer (a multiple of 100 units: 10^-10), of at
/// most 15 significant digits and at most 10^6 in magnitude.
fn number_units(text: &str) -> Option<i64> {
    // Read as mant * 10^(pending + place + exp), trailing zeros held back
    // in `pending` (JSON's grammar: the parser checked the text).
    let (mut mant, mut sig, mut pending, mut place) = (0i64, 0u32, 0i32, 0i32);
    let (mut neg, mut frac, mut exp, mut exp_neg, mut in_exp) = (false, false, 0i32, false, false);
    for c in text.bytes() {
        match c {
            b'-' if in_exp => exp_neg = true,
            b'-' => neg = true,
            b'.' => frac = true,
            b'e' | b'E' => in_exp = true,
            b'0'..=b'9' if in_exp => exp = (exp * 10 + (c - b'0') as i32).min(999),
            b'0' => {
                place -= frac as i32;
                pending += (mant != 0) as i32;
            }
            b'1'..=b'9' => {
                place -= frac as i32;
                sig += pending as u32 + 1;
                if sig > 15 {
                    return None;
                }
                mant = scale10(mant, pending as u32 + 1)? + (c - b'0') as i64;
                pending = 0;
            }
            _ => {}
        }
    }
    if mant == 0 {
        return Some(0);
    }
    let shift = pending + place + if exp_neg { -exp } else { exp } + NUM_FRAC_DIGITS as i32;
    if !(2..=18).contains(&shift) {
        return None;
    }
    let units = scale10(mant, shift as u32)?;
    (units <= NUM_ONE * 10i64.pow(6)).then_some(if neg { -units } else { units })
}

/// A byte range of `Schema::text`.
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    start: u16,
    len: u16,
}

/// Why a schema cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaError {
    /// A keyword this engine does not implement (its name, or what of it,
    /// at most 48 bytes: every refusal's text fits; its length), and where
    /// the schema holding it begins: a byte offset into the compiled
    /// schema's text (0 when not known).
    Unsupported([u8; 48], usize, usize),
    /// More than a fixed capacity holds.
    TooLarge(&'static str),
    /// Not a valid schema.
    Invalid(&'static str),
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            SchemaError::Unsupported(name, len, _) => {
                let name = core::str::from_utf8(&name[..*len]).unwrap_or("?");
                write!(f, "unsupported JSON schema keyword '{name}'")
            }
            SchemaError::TooLarge(what) => write!(f, "JSON schema too large: {what}"),
            SchemaError::Invalid(what) => write!(f, "invalid JSON schema: {what}"),
        }
    }
}

impl SchemaError {
    /// The error as `'{root}{path}': {error}`, the path (`.key`, `[i]`)
    /// leading from `schema`, the value compiled, to the subschema the
    /// error is about (none when it is the whole schema or not known):
    /// the one wording of the server's 400, `kestrel schema check` and the
    /// C ABI.
    pub fn at<'a>(&'a self, root: &'a str, schema: &'a Value<'a>) -> SchemaErrorAt<'a> {
        SchemaErrorAt {
            error: self,
            root,
            schema,
        }
    }
}

/// [`SchemaError::at`].
pub struct SchemaErrorAt<'a> {
    error: &'a SchemaError,
    root: &'a str,
    schema: &'a Value<'a>,
}

/// One step of a path into a JSON value.
#[derive(Clone, Copy)]
enum PathStep<'a> {
    Key(&'a str),
    Index(usize),
}

/// Deepest path [`SchemaError::at`] names (deeper: none).
const PATH_STEPS: usize = 64;

/// Where an object's or array's text begins in memory.
fn text_start(v: &Value) -> Option<usize> {
    match v {
        Value::Object(o) => Some(o.raw().as_ptr() as usize),
        Value::Array(a) => Some(a.raw().as_ptr() as usize),
        _ => None,
    }
}

/// Pushes the steps from `v` to the object or array inside it whose text
/// begins at address `target`; whether there is one (the steps pushed
/// are then left, else taken back).
fn path_to<'a>(
    v: &Value<'a>,
    target: usize,
    path: &mut heapless::Vec<PathStep<'a>, PATH_STEPS>,
) -> bool {
    let inside = |x: &Value| {
        let raw = match x {
            Value::Object(o) => o.raw(),
            Value::Array(a) => a.raw(),
            _ => return false,
        };
        let base = raw.as_ptr() as usize;
        base <= target && target < base + raw.len()
    };
    let step = |at: PathStep<'a>, x: Value<'a>, path: &mut heapless::Vec<_, PATH_STEPS>| {
        if path.push(at).is_err() {
            return false;
        }
        let found = text_start(&x) == Some(target) || (inside(&x) && path_to(&x, target, path));
        if !found {
            path.pop();
        }
        found
    };
    if let Some(items) = v.iter_object() {
        for (key, x) in items {
            if step(PathStep::Key(key.raw()), x, path) {
                return true;
            }
        }
    } else if let Some(items) = v.as_array() {
        for (i, x) in items.iter().enumerate() {
            if step(PathStep::Index(i), x, path) {
                return true;
            }
        }
    }
    false
}

impl fmt::Display for SchemaErrorAt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let path = SchemaPath::new(self.schema, self.error.offset().unwrap_or(0));
        write!(f, "'{}{path}': {}", self.root, self.error)
    }
}

/// The path (`.key`, `[i]`) from a schema's value to the subschema whose
/// text starts `offset` bytes into it (what [`SchemaError::offset`] and
/// [`Schema::dropped`] give), as text; empty for offset 0 or a place not
/// found.
pub struct SchemaPath<'a> {
    schema: &'a Value<'a>,
    offset: usize,
}

impl<'a> SchemaPath<'a> {
    /// The path to `offset` in `schema`.
    pub fn new(schema: &'a Value<'a>, offset: usize) -> SchemaPath<'a> {
        SchemaPath { schema, offset }
    }
}

impl fmt::Display for SchemaPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut path = heapless::Vec::new();
        let Some(base) = text_start(self.schema) else {
            return Ok(());
        };
        if self.offset == 0 || !path_to(self.schema, base + self.offset, &mut path) {
            return Ok(());
        }
        for step in &path {
            match step {
                PathStep::Key(k) => write!(f, ".{k}")?,
                PathStep::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// The kinds of value, by the byte each begins with (`Schema::starts`).
const START_OBJECT: u8 = 1;
const START_ARRAY: u8 = 2;
const START_STRING: u8 = 4;
const START_NUMBER: u8 = 8;
const START_TRUE: u8 = 16;
const START_FALSE: u8 = 32;
const START_NULL: u8 = 64;
const START_ANY: u8 = 127;

/// The kind of value byte `b` begins (0: none).
fn start_of(b: u8) -> u8 {
    match b {
        b'{' => START_OBJECT,
        b'[' => START_ARRAY,
        b'"' => START_STRING,
        b'-' | b'0'..=b'9' => START_NUMBER,
        b't' => START_TRUE,
        b'f' => START_FALSE,
        b'n' => START_NULL,
        _ => 0,
    }
}

/// `{"type": "null"}` alone (an `Optional`'s other half).
fn is_null_schema(x: &Value) -> bool {
    x.get("type").is_some_and(|t| t.str_eq("null"))
        && x.iter_object().into_iter().flatten().count() == 1
}

/// The keywords a schema node implements (`fill`), space-separated; the
/// others that constrain a value (JSON Schema's assertions and
/// applicators, drafts 3 to 2020-12) are refused by name, or left out by
/// a best-effort compile.
const IMPLEMENTED: &str = "type properties required additionalProperties minProperties \
    maxProperties patternProperties items minItems maxItems minLength maxLength minimum maximum exclusiveMinimum exclusiveMaximum enum const \
    $defs definitions";

/// JSON Schema's keywords that constrain a value which a node does not
/// implement (`$ref` and `anyOf` only where `fill_node` takes them),
/// space-separated.
const CONSTRAINING: &str = "$ref $dynamicRef $recursiveRef allOf anyOf oneOf not if then \
    else dependentSchemas dependentRequired dependencies prefixItems additionalItems contains \
    minContains maxContains uniqueItems unevaluatedItems unevaluatedProperties \
    propertyNames pattern format multipleOf \
    divisibleBy disallow extends contentEncoding contentMediaType contentSchema";

/// Whether `key` is one of the space-separated `words`.
fn listed(words: &str, key: &crate::json::Str) -> bool {
    words.split_ascii_whitespace().any(|k| key.eq_str(k))
}

/// Whether keyword `key` (with `value`) of node `idx` is refused (or left
/// out by a best-effort compile): one that constrains a value and is not
/// implemented, or an identifier that moves the base of `#` references (an
/// `$id` or draft 4's `id` below the root, unless a `#name` anchor).
/// Annotations and unknown keywords (`title`, `description`, `examples`,
/// `$comment`, `readOnly`, `deprecated`, `x-...`, a tool's own) are
/// ignored, as the specification says.
fn refused_keyword(idx: u16, refs: bool, key: &crate::json::Str, value: &Value) -> bool {
    if listed(IMPLEMENTED, key) {
        return false;
    }
    if key.eq_str("$id") || key.eq_str("id") {
        let anchor = value.as_str_raw().is_some_and(|t| t.starts_with('#'));
        return idx != 0 && !anchor && refs;
    }
    if key.eq_str("pattern") {
        return pattern_of(value).is_none();
    }
    if key.eq_str("dependencies") || key.eq_str("dependentRequired") {
        // Implemented where it lists names ([`Schema::dependencies_of`]).
        let names = |(_, d): (crate::json::Str, Value)| d.as_array().is_some();
        return !value.iter_object().is_some_and(|mut o| o.all(names));
    }
    if key.eq_str("format") {
        // An enforced format or a name JSON Schema does not define (an
        // annotation); refused: one it defines that is not enforced.
        return format_of(value).is_none();
    }
    listed(CONSTRAINING, key)
}

/// The automaton of a `pattern` value, if in the subset [`pattern`]
/// compiles (its text decoded, at most 512 bytes).
fn pattern_of(v: &Value) -> Option<pattern::Pattern> {
    pattern_of_str(&v.as_str()?)
}

/// [`pattern_of`] of a pattern's text.
fn pattern_of_str(v: &crate::json::Str) -> Option<pattern::Pattern> {
    let mut text: heapless::Vec<u8, 512> = heapless::Vec::new();
    for c in v.chars() {
        let mut buf = [0u8; 4];
        text.extend_from_slice(c.encode_utf8(&mut buf).as_bytes())
            .ok()?;
    }
    pattern::compile(&text)
}

/// The format a `format` value names ([`format::by_name`]).
fn format_of(v: &Value) -> Option<u8> {
    format::by_name(v.as_str()?.as_plain()?)
}

/// Sorts `v` by `less` (a few values at compile time: small code beats
/// a fast sort here).
fn insertion_sort<T: Copy>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && less(&v[j], &v[j - 1]) {
            v.swap(j, j - 1);
            j -= 1;
        }
    }
}

/// The kind a `type` name means.
fn kind_named(t: &crate::json::Str) -> Result<Kind, SchemaError> {
    let names = [
        "object", "array", "string", "number", "integer", "boolean", "null",
    ];
    let kinds = [
        Kind::Object,
        Kind::Array,
        Kind::String,
        Kind::Number,
        Kind::Integer,
        Kind::Boolean,
        Kind::Null,
    ];
    let at = names.iter().position(|n| t.eq_str(n));
    at.map(|i| kinds[i])
        .ok_or(SchemaError::Invalid("unknown 'type'"))
}

/// Keywords beside a `$ref`, `anyOf` or `oneOf` that narrow what it takes
/// (JSON Schema applies both), applied once every node is compiled
/// ([`Schema::refine`]): `type`, `minItems`/`maxItems`,
/// `minLength`/`maxLength`.
#[derive(Clone, Copy, Debug)]
struct Refinement {
    node: u16,
    /// Where its schema's text begins (a best-effort compile names it).
    at: usize,
    kind: Option<Kind>,
    /// (least, most) items of an array, characters of a string.
    items: Option<(u16, u16)>,
    lengths: Option<(u16, u16)>,
}

fn unsupported(name: &str) -> SchemaError {
    let mut b = [0u8; 48];
    let mut n = 0;
    for c in name.chars() {
        if n + c.len_utf8() > b.len() {
            break;
        }
        n += c.encode_utf8(&mut b[n..]).len();
    }
    SchemaError::Unsupported(b, n, 0)
}

impl SchemaError {
    /// An unsupported keyword's schema: its byte offset into the text of
    /// the schema compiled ([`Schema::compile`]'s argument).
    pub fn offset(&self) -> Option<usize> {
        match self {
            SchemaError::Unsupported(_, _, at) => Some(*at),
            _ => None,
        }
    }
}

/// The offset of `sub`'s text in `root`'s (0 when it is not inside).
/// Where an object's or array's text begins in memory, and its length
/// ((0, 0) for other values).
fn text_span(v: &Value) -> (usize, usize) {
    match v {
        Value::Object(o) => (o.raw().as_ptr() as usize, o.raw().len()),
        Value::Array(a) => (a.raw().as_ptr() as usize, a.raw().len()),
        _ => (0, 0),
    }
}

fn offset_in(root: &Value, sub: &Value) -> usize {
    match (root, sub) {
        (Value::Object(r), Value::Object(s)) => {
            let at = (s.raw().as_ptr() as usize).wrapping_sub(r.raw().as_ptr() as usize);
            if at < r.raw().len() {
                at
            } else {
                0
            }
        }
        _ => 0,
    }
}

/// Most keywords a best-effort compile lists as left out (more are
/// counted).
pub const MAX_DROPPED: usize = 8;

/// A compiled schema.
#[derive(Clone, Debug)]
pub struct Schema {
    nodes: [Node; MAX_NODES],
    n_nodes: usize,
    /// (name, node) of each property.
    props: [(Span, u16); MAX_PROPS],
    n_props: usize,
    /// Each enum value's JSON text.
    enums: [Span; MAX_ENUM],
    n_enums: usize,
    /// The schemas `Select` nodes choose among.
    choices: [u16; MAX_CHOICES],
    n_choices: usize,
    /// The bounds of `number` nodes that have some (`Node::first`).
    num_bounds: [NumBounds; MAX_NUMBER_BOUNDS],
    n_num_bounds: usize,
    /// Compiling best effort: a keyword it cannot enforce is left out
    /// (the node follows the rest, or takes any value) instead of refused.
    lenient: bool,
    /// The schema's text may hold a `$ref` (or an escape that could spell
    /// one): a nested `id`/`$id`, which would move the base of the
    /// references, is refused; without, it is an annotation.
    refs: bool,
    /// The keywords a best-effort compile left out: where the subschema
    /// holding each begins (its address while compiling, then its byte
    /// offset in the schema's text), its name (cut to 24 bytes) and the
    /// name's length; how many in all.
    dropped: [(usize, [u8; 24], u8); MAX_DROPPED],
    n_dropped: usize,
    /// Nodes of a `type` list's union, each the schema with one of the
    /// list's types (node, the type's place in the list).
    forced: heapless::Vec<(u16, u8), 64>,
    /// The `pattern`s' automata (a string node's `lo` is its index).
    patterns: heapless::Vec<pattern::Pattern, MAX_PATTERNS>,
    /// The keywords beside references and unions, to apply.
    refinements: heapless::Vec<Refinement, 64>,
    /// Each object with `patternProperties`: the object's node, its
    /// pattern (in `patterns`) and the node of that pattern's schema.
    key_patterns: heapless::Vec<(u16, u8, u16), 256>,
    /// Each dependency (`dependencies` listing names): the object's node,
    /// a property and the properties it requires once written.
    deps: heapless::Vec<(u16, u8, u64), 256>,
    text: [u8; MAX_TEXT],
    n_text: usize,
    root: u16,
}

/// Appends into the schema's text.
struct TextWriter<'s> {
    s: &'s mut Schema,
}

impl Write for TextWriter<'_> {
    fn write_str(&mut self, t: &str) -> fmt::Result {
        let end = self.s.n_text + t.len();
        let dst = self.s.text.get_mut(self.s.n_text..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(t.as_bytes());
        self.s.n_text = end;
        Ok(())
    }
}

impl Schema {
    fn empty() -> Schema {
        Schema {
            nodes: [EMPTY_NODE; MAX_NODES],
            n_nodes: 0,
            props: [(Span::default(), 0); MAX_PROPS],
            n_props: 0,
            enums: [Span::default(); MAX_ENUM],
            n_enums: 0,
            choices: [0; MAX_CHOICES],
            n_choices: 0,
            num_bounds: [NumBounds { lo: None, hi: None }; MAX_NUMBER_BOUNDS],
            n_num_bounds: 0,
            lenient: false,
            refs: true,
            dropped: [(0, [0; 24], 0); MAX_DROPPED],
            n_dropped: 0,
            forced: heapless::Vec::new(),
            patterns: heapless::Vec::new(),
            key_patterns: heapless::Vec::new(),
            deps: heapless::Vec::new(),
            refinements: heapless::Vec::new(),
            text: [0; MAX_TEXT],
            n_text: 0,
            root: 0,
        }
    }

    /// Any JSON object (OpenAI's `{"type": "json_object"}`).
    pub fn any_object() -> Schema {
        let mut s = Schema::empty();
        s.nodes[0] = Node {
            kind: Kind::Object,
            ..EMPTY_NODE
        };
        s.n_nodes = 1;
        s
    }

    /// Compiles a JSON schema; a keyword the constraint cannot enforce is
    /// an error naming it (OpenAI's `strict`).
    pub fn compile(schema: &Value) -> Result<Schema, SchemaError> {
        Self::compile_as(schema, false)
    }

    /// Compiles a JSON schema best effort: what the constraint can enforce
    /// is enforced, a keyword it cannot is left out (a subschema it cannot
    /// follow at all takes any value). Too large or invalid schemas are
    /// still errors.
    pub fn compile_lenient(schema: &Value) -> Result<Schema, SchemaError> {
        Self::compile_as(schema, true)
    }

    fn compile_as(schema: &Value, lenient: bool) -> Result<Schema, SchemaError> {
        let mut s = Schema::empty();
        s.lenient = lenient;
        let (base, len) = text_span(schema);
        let raw = match schema {
            Value::Object(o) => o.raw().as_bytes(),
            _ => &[],
        };
        s.refs = raw.windows(4).any(|w| w == b"$ref" || &w[..2] == b"\\u");
        let mut work: heapless::Vec<(Value, u16), MAX_NODES> = heapless::Vec::new();
        s.root = s.alloc()?;
        let _ = work.push((*schema, s.root));
        while let Some((v, idx)) = work.pop() {
            s.fill_node(idx, &v, schema, &mut work)?;
        }
        s.apply_refinements()?;
        s.check_never()?;
        s.key_unions()?;
        s.check_unions()?;
        s.check_nesting()?;
        // The left-out keywords' places, as offsets into the schema's text.
        for d in s.dropped.iter_mut().take(s.n_dropped) {
            let at = d.0.wrapping_sub(base);
            d.0 = if at < len { at } else { 0 };
        }
        Ok(s)
    }

    /// Records keyword `name` of the subschema `v` as left out.
    fn drop_keyword(&mut self, v: &Value, name: &str) {
        self.drop_at(text_span(v).0, name);
    }

    /// Records keyword `name` of the subschema whose text is at `at` as
    /// left out.
    fn drop_at(&mut self, at: usize, name: &str) {
        if let Some(d) = self.dropped.get_mut(self.n_dropped) {
            let n = name.len().min(24);
            d.0 = at;
            d.1[..n].copy_from_slice(&name.as_bytes()[..n]);
            d.2 = n as u8;
        }
        self.n_dropped += 1;
    }

    /// The keywords a best-effort compile ([`Schema::compile_lenient`])
    /// left out, at most [`MAX_DROPPED`] of them: each name (cut to 24
    /// bytes) and the byte offset in the schema's text of the subschema
    /// holding it (0: the schema itself).
    pub fn dropped(&self) -> impl Iterator<Item = (&str, usize)> {
        self.dropped
            .iter()
            .take(self.n_dropped)
            .map(|(at, name, n)| {
                (
                    core::str::from_utf8(&name[..*n as usize]).unwrap_or("?"),
                    *at,
                )
            })
    }

    /// How many keywords a best-effort compile left out (the list of
    /// [`Schema::dropped`] stops at [`MAX_DROPPED`]).
    pub fn dropped_count(&self) -> usize {
        self.n_dropped
    }

    /// The most objects and arrays a value of node `idx` nests (`guard`
    /// bounds the walk: the nodes hold no cycle, and are at most
    /// [`MAX_NODES`]).
    fn nesting(&self, idx: u16, guard: usize) -> usize {
        if idx == ANY || guard > MAX_NODES {
            return 0;
        }
        let n = self.node(idx);
        let deepest = |children: &mut dyn Iterator<Item = u16>| {
            children
                .map(|c| self.nesting(c, guard + 1))
                .max()
                .unwrap_or(0)
        };
        let range = n.first as usize..n.first as usize + n.count as usize;
        match n.kind {
            Kind::Object => {
                let extra = (n.extra != NO_EXTRA).then_some(n.extra);
                let by_pattern = self.key_pattern(idx).map(|k| k.1);
                let props = self.props[range].iter().map(|p| p.1);
                1 + deepest(&mut props.chain(extra).chain(by_pattern))
            }
            Kind::Array => 1 + deepest(&mut core::iter::once(n.items)),
            Kind::Select | Kind::Union => deepest(&mut self.choices[range].iter().copied()),
            _ => 0,
        }
    }

    /// A schema whose values nest deeper than the output's
    /// [`MAX_DEPTH`] levels could not be completed: refused.
    fn check_nesting(&self) -> Result<(), SchemaError> {
        if self.nesting(self.root, 0) > MAX_DEPTH {
            return Err(SchemaError::TooLarge(
                "objects and arrays nested deeper than 24 levels",
            ));
        }
        Ok(())
    }

    /// [`Schema::fill_ref`], with an unsupported keyword's place recorded,
    /// or (lenient) the node made to take any value.
    fn fill_node<'v>(
        &mut self,
        idx: u16,
        v: &Value<'v>,
        root: &Value<'v>,
        work: &mut heapless::Vec<(Value<'v>, u16), MAX_NODES>,
    ) -> Result<(), SchemaError> {
        match self.fill_ref(idx, v, root, work) {
            Err(SchemaError::Unsupported(name, len, _)) if self.lenient => {
                // The subschema is left out whole: named by the keyword
                // that made it so.
                self.nodes[idx as usize] = EMPTY_NODE;
                let name = core::str::from_utf8(&name[..len]).unwrap_or("?");
                self.drop_keyword(v, name);
                Ok(())
            }
            Err(SchemaError::Unsupported(name, len, _)) => {
                Err(SchemaError::Unsupported(name, len, offset_in(root, v)))
            }
            r => r,
        }
    }

    /// Fills node `idx` from `v`, first resolving what pydantic writes
    /// around a schema: a `$ref` to `#/$defs/NAME` (or `#/definitions/NAME`)
    /// of `root` (non-recursive: a cycle runs out of nodes), and `anyOf` of
    /// a schema and `{"type": "null"}` (an `Optional`): that schema, also
    /// accepting `null`.
    fn fill_ref<'v>(
        &mut self,
        idx: u16,
        v: &Value<'v>,
        root: &Value<'v>,
        work: &mut heapless::Vec<(Value<'v>, u16), MAX_NODES>,
    ) -> Result<(), SchemaError> {
        let mut v = *v;
        let mut nullable = false;
        // A chain of references and optionals, bounded like the nodes.
        for _ in 0..MAX_NODES {
            if let Some(r) = v.get("$ref") {
                // A constraint beside the reference would be dropped with
                // the schema it is in: refused (annotations are not
                // constraints).
                self.beside(idx, &v, "$ref", "$ref (beside other keywords)")?;
                let r = r
                    .as_str()
                    .ok_or(SchemaError::Invalid("'$ref' must be a string"))?;
                // A JSON pointer into the root (`#/$defs/NAME`,
                // `#/properties/a/items/0`, `#`), of plain segments.
                let target = r.as_plain().and_then(|r| {
                    let mut at = *root;
                    let Some(path) = r.strip_prefix("#/") else {
                        return (r == "#").then_some(at);
                    };
                    for seg in path.split('/') {
                        if seg.contains(['~', '%']) {
                            return None;
                        }
                        at = match at {
                            Value::Array(a) => a.iter().nth(seg.parse().ok()?)?,
                            _ => at.get(seg)?,
                        };
                    }
                    Some(at)
                });
                v = target.ok_or(unsupported("$ref"))?;
                continue;
            }
            // `allOf` of one schema is that schema (keywords beside it as
            // beside a reference); of several, refused.
            if let Some(all) = v.get("allOf") {
                let mut list = all
                    .as_array()
                    .ok_or(SchemaError::Invalid("'allOf' must be a list"))?
                    .iter();
                let (Some(one), None) = (list.next(), list.next()) else {
                    return Err(unsupported("allOf"));
                };
                self.beside(idx, &v, "allOf", "allOf (beside other keywords)")?;
                v = one;
                continue;
            }
            // `oneOf`: a union whose schemas no value can hold together
            // (checked once they are compiled: `check_unions`).
            if v.get("oneOf").is_some() {
                return self.fill_union(idx, &v, "oneOf", nullable, work);
            }
            if let Some(any) = v.get("anyOf") {
                let list = any
                    .as_array()
                    .ok_or(SchemaError::Invalid("'anyOf' must be a list"))?;
                if list.len() > 2 || (list.len() == 2 && !list.iter().any(|x| is_null_schema(&x))) {
                    return self.fill_union(idx, &v, "anyOf", nullable, work);
                }
                self.beside(idx, &v, "anyOf", "anyOf (beside other keywords)")?;
                let mut other = None;
                let mut nulls = 0;
                for x in list.iter() {
                    if is_null_schema(&x) {
                        nulls += 1;
                    } else if other.replace(x).is_some() {
                        return Err(unsupported("anyOf"));
                    }
                }
                if nulls != 1 {
                    return Err(unsupported("anyOf"));
                }
                v = other.ok_or(SchemaError::Invalid("'anyOf' without a schema"))?;
                nullable = true;
                continue;
            }
            break;
        }
        self.fill(idx, &v, work)?;
        if nullable {
            self.nodes[idx as usize].nullable = true;
        }
        Ok(())
    }

    /// What `v` holds beside `keyword` (a `$ref`, `anyOf` or `oneOf` of
    /// node `idx`): annotations and definitions, ignored; the keywords a
    /// [`Refinement`] narrows with, recorded; any other constraint
    /// refused (as `what`).
    fn beside(
        &mut self,
        idx: u16,
        v: &Value,
        keyword: &str,
        what: &str,
    ) -> Result<(), SchemaError> {
        let mut r = Refinement {
            node: idx,
            at: text_span(v).0,
            kind: None,
            items: None,
            lengths: None,
        };
        for (key, value) in v.iter_object().into_iter().flatten() {
            let count = || {
                value
                    .as_u64()
                    .map(|n| n.min(u16::MAX as u64 - 1) as u16)
                    .ok_or(SchemaError::Invalid(
                        "a length or a count must be a whole number",
                    ))
            };
            let (bounds, least) = match () {
                _ if key.eq_str("minItems") => (&mut r.items, true),
                _ if key.eq_str("maxItems") => (&mut r.items, false),
                _ if key.eq_str("minLength") => (&mut r.lengths, true),
                _ if key.eq_str("maxLength") => (&mut r.lengths, false),
                _ if key.eq_str("type") => {
                    let t = value.as_str().ok_or_else(|| unsupported(what))?;
                    r.kind = Some(kind_named(&t)?);
                    continue;
                }
                _ if key.eq_str(keyword) || listed("$defs definitions", &key) => continue,
                _ if listed(IMPLEMENTED, &key)
                    || listed(CONSTRAINING, &key)
                    || refused_keyword(idx, self.refs, &key, &value) =>
                {
                    return Err(unsupported(what))
                }
                _ => continue,
            };
            let b = bounds.get_or_insert((0, u16::MAX));
            *(if least { &mut b.0 } else { &mut b.1 }) = count()?;
        }
        if r.kind.is_some() || r.items.is_some() || r.lengths.is_some() {
            self.refinements.push(r).map_err(|_| {
                SchemaError::TooLarge("more than 64 keywords beside $ref, anyOf or oneOf")
            })?;
        }
        Ok(())
    }

    /// Whether node `idx` takes no value (an `enum` or `const` none of
    /// whose values is of its `type`).
    fn never(&self, idx: u16) -> bool {
        let n = self.node(idx);
        n.kind == Kind::Enum && n.count == 0
    }

    /// Nodes that take no value: an optional property's key is refused
    /// (`Node::never`), `additionalProperties` becomes `false`, an array
    /// of them is empty; where a value must be written (the root, a
    /// required property, a non-empty array, a pattern's keys, a union of
    /// nothing else), the schema is refused.
    fn check_never(&mut self) -> Result<(), SchemaError> {
        let refused = SchemaError::Invalid("an enum or const without a value of the schema's type");
        if self.never(self.root) {
            return Err(refused);
        }
        for idx in 0..self.n_nodes {
            let mut n = self.nodes[idx];
            let choices = n.first as usize..(n.first + n.count) as usize;
            match n.kind {
                Kind::Object => {
                    for i in 0..n.count {
                        if self.never(self.props[(n.first + i) as usize].1) {
                            if n.required >> i & 1 == 1 {
                                return Err(refused);
                            }
                            n.never |= 1 << i;
                        }
                    }
                    if n.extra != NO_EXTRA && self.never(n.extra) {
                        n.extra = NO_EXTRA;
                    }
                    // A property that requires one taking no value takes
                    // none (in turn, through chains of dependencies).
                    let mut grown = true;
                    while grown {
                        grown = false;
                        for &(_, a, needs) in self.deps.iter().filter(|d| d.0 == idx as u16) {
                            if n.never & needs != 0 && n.never >> a & 1 == 0 {
                                if n.required >> a & 1 == 1 {
                                    return Err(refused);
                                }
                                n.never |= 1 << a;
                                grown = true;
                            }
                        }
                    }
                    // (A pattern that matches the name of a property taking
                    // no value would let its key through: refused too.)
                    if let Some((p, schema)) = self.key_pattern(idx as u16) {
                        let names_one = (0..n.count).any(|i| {
                            n.never >> i & 1 == 1
                                && p.done(p.run(self.prop_name((n.first + i) as usize)))
                        });
                        if self.never(schema) || names_one {
                            return Err(refused);
                        }
                    }
                }
                Kind::Array if self.never(n.items) && n.min_items > 0 => return Err(refused),
                Kind::Union | Kind::Select
                    if self.choices[choices.clone()].iter().all(|&c| self.never(c)) =>
                {
                    return Err(refused)
                }
                _ => {}
            }
            self.nodes[idx] = n;
        }
        Ok(())
    }

    /// Applies every [`Refinement`] (best effort: one that cannot be is
    /// left out).
    fn apply_refinements(&mut self) -> Result<(), SchemaError> {
        for r in self.refinements.clone() {
            match self.refine(&r) {
                Err(SchemaError::Unsupported(name, len, _)) if self.lenient => {
                    let name = core::str::from_utf8(&name[..len]).unwrap_or("?");
                    self.drop_at(r.at, name);
                }
                other => other?,
            }
        }
        Ok(())
    }

    /// Applies a [`Refinement`] to its node, compiled: its values narrowed
    /// to the `type` ([`Schema::narrow_kind`]), its array's or string's
    /// bounds to the intersection.
    fn refine(&mut self, r: &Refinement) -> Result<(), SchemaError> {
        if let Some(kind) = r.kind {
            self.narrow_kind(r.node, kind, 0)?;
        }
        let n = &mut self.nodes[r.node as usize];
        for (bounds, kind, what) in [
            (
                r.items,
                Kind::Array,
                "minItems or maxItems (beside $ref, anyOf or oneOf)",
            ),
            (
                r.lengths,
                Kind::String,
                "minLength or maxLength (beside $ref, anyOf or oneOf)",
            ),
        ] {
            let Some((least, most)) = bounds else {
                continue;
            };
            // A string's lengths only where nothing else reads its
            // characters (a pattern's or a format's automaton).
            if n.kind != kind || (kind == Kind::String && (n.lo >= 0 || n.items != ANY)) {
                return Err(unsupported(what));
            }
            n.min_items = n.min_items.max(least);
            n.max_items = n.max_items.min(most);
            if n.min_items > n.max_items {
                return Err(SchemaError::Invalid(
                    "bounds beside $ref, anyOf or oneOf no value meets",
                ));
            }
        }
        Ok(())
    }

    /// Narrows node `idx` to values of `kind` (`type` beside a reference or
    /// a union): `null` beside it left out, any value made that kind, a
    /// union's schemas each narrowed; a node with values of another kind
    /// is refused.
    fn narrow_kind(&mut self, idx: u16, kind: Kind, depth: usize) -> Result<(), SchemaError> {
        let refused = unsupported("type (beside $ref, anyOf or oneOf)");
        if idx == ANY || depth > MAX_NODES {
            return Err(refused);
        }
        let n = self.nodes[idx as usize];
        let fits = match n.kind {
            k if k == kind => true,
            Kind::Integer => kind == Kind::Number,
            Kind::Any => {
                self.nodes[idx as usize].kind = kind;
                true
            }
            Kind::Union | Kind::Select => {
                for i in n.first..n.first + n.count {
                    self.narrow_kind(self.choices[i as usize], kind, depth + 1)?;
                }
                true
            }
            Kind::Enum => (n.first..n.first + n.count).all(|i| {
                let text = self.bytes(self.enums[i as usize]);
                let first = text.first().copied().unwrap_or(0);
                match kind {
                    Kind::String => first == b'"',
                    Kind::Boolean => first == b't' || first == b'f',
                    Kind::Null => first == b'n',
                    Kind::Number => first == b'-' || first.is_ascii_digit(),
                    _ => false,
                }
            }),
            _ => false,
        };
        if !fits {
            return Err(refused);
        }
        if kind != Kind::Null {
            self.nodes[idx as usize].nullable = false;
        }
        Ok(())
    }

    /// Node `idx` as a union of the schemas of `v`'s `keyword` (`anyOf`,
    /// or a `oneOf` whose schemas begin apart; beside it only
    /// annotations), each its own node, queued; `nullable`: `null` too.
    fn fill_union<'v>(
        &mut self,
        idx: u16,
        v: &Value<'v>,
        keyword: &str,
        nullable: bool,
        work: &mut heapless::Vec<(Value<'v>, u16), MAX_NODES>,
    ) -> Result<(), SchemaError> {
        let beside = if keyword == "anyOf" {
            "anyOf (beside other keywords)"
        } else {
            "oneOf (beside other keywords)"
        };
        self.beside(idx, v, keyword, beside)?;
        let mut node = Node {
            kind: Kind::Union,
            nullable,
            first: self.n_choices as u16,
            // `oneOf`: exclusive (`ONE_OF`), and where its text is (best
            // effort leaves its exclusivity out there).
            items: if keyword == "oneOf" { ONE_OF } else { ANY },
            lo: text_span(v).0 as i64,
            ..EMPTY_NODE
        };
        for x in v
            .get(keyword)
            .and_then(|a| a.as_array())
            .into_iter()
            .flat_map(|a| a.iter())
        {
            let child = self.alloc()?;
            *self
                .choices
                .get_mut(self.n_choices)
                .ok_or(SchemaError::TooLarge(
                    "more than 512 anyOf schemas and functions",
                ))? = child;
            self.n_choices += 1;
            node.count += 1;
            work.push((x, child))
                .map_err(|_| SchemaError::TooLarge("more than 1024 subschemas"))?;
        }
        self.nodes[idx as usize] = node;
        Ok(())
    }

    /// Node `idx` as the union of `v` with each non-null type of its `type`
    /// `list` (queued, the type forced); `nullable`: `null` too.
    fn fill_type_union<'v>(
        &mut self,
        idx: u16,
        v: &Value<'v>,
        list: &crate::json::Array<'v>,
        nullable: bool,
        work: &mut heapless::Vec<(Value<'v>, u16), MAX_NODES>,
    ) -> Result<(), SchemaError> {
        let mut node = Node {
            kind: Kind::Union,
            nullable,
            first: self.n_choices as u16,
            ..EMPTY_NODE
        };
        for (pos, t) in list.iter().enumerate() {
            if t.as_str().is_some_and(|t| t.eq_str("null")) {
                continue;
            }
            let child = self.alloc()?;
            *self
                .choices
                .get_mut(self.n_choices)
                .ok_or(SchemaError::TooLarge(
                    "more than 512 anyOf schemas and functions",
                ))? = child;
            self.n_choices += 1;
            node.count += 1;
            self.forced
                .push((child, pos as u8))
                .map_err(|_| SchemaError::TooLarge("more than 64 types in type lists"))?;
            work.push((*v, child))
                .map_err(|_| SchemaError::TooLarge("more than 1024 subschemas"))?;
        }
        self.nodes[idx as usize] = node;
        Ok(())
    }

    /// The schema of one tool call, `{"name": N, "arguments": A}` (in that
    /// order: `arguments` cannot start before `name` is written), where N
    /// is one of the functions' names and A follows the parameters schema
    /// of the function N names: a union keyed on the name. `functions`:
    /// each function's name (letters, digits, `_`, `-`) and parameters.
    pub fn compile_call(functions: &[(&str, Value)]) -> Result<Schema, SchemaError> {
        if functions.is_empty() {
            return Err(SchemaError::Invalid("a tool call without functions"));
        }
        if functions.len() > MAX_CALLS {
            return Err(SchemaError::TooLarge("more than 16 functions"));
        }
        let mut s = Schema::empty();
        s.lenient = true;
        let mut work: heapless::Vec<(Value, u16), MAX_NODES> = heapless::Vec::new();
        s.root = s.alloc()?;
        let (name, arguments) = (s.alloc()?, s.alloc()?);
        let mut root = Node {
            kind: Kind::Object,
            first: s.n_props as u16,
            required: 0b11,
            // Property 0, the name, picks the arguments' schema.
            items: 0,
            // A call has no other key.
            extra: NO_EXTRA,
            ..EMPTY_NODE
        };
        for (prop, child) in [("name", name), ("arguments", arguments)] {
            let span = s.span_of(|w| w.write_str(prop))?;
            s.props[s.n_props] = (span, child);
            s.n_props += 1;
            root.count += 1;
        }
        s.nodes[s.root as usize] = root;
        let mut names = Node {
            kind: Kind::Enum,
            first: s.n_enums as u16,
            ..EMPTY_NODE
        };
        let mut select = Node {
            kind: Kind::Select,
            first: s.n_choices as u16,
            ..EMPTY_NODE
        };
        // The functions in the order of their names: an enum's values are
        // sorted, and the name's place picks the arguments' schema.
        let mut order: heapless::Vec<usize, MAX_CALLS> = (0..functions.len()).collect();
        insertion_sort(&mut order, |&a, &b| functions[a].0 < functions[b].0);
        // The names first: an enum's values are contiguous.
        for f in order.iter().map(|&i| functions[i].0) {
            if f.is_empty()
                || !f
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(SchemaError::Invalid("a function name"));
            }
            let span = s.span_of(|w| {
                w.write_char('"')?;
                w.write_str(f)?;
                w.write_char('"')
            })?;
            s.enums[s.n_enums] = span;
            s.n_enums += 1;
            names.count += 1;
        }
        // The choices first, contiguous (a union inside a function's
        // parameters adds its own choices after them).
        let mut children = [0u16; MAX_CALLS];
        for child in children.iter_mut().take(functions.len()) {
            *child = s.alloc()?;
            s.choices[s.n_choices] = *child;
            s.n_choices += 1;
            select.count += 1;
        }
        for (&i, &child) in order.iter().zip(&children) {
            let params = &functions[i].1;
            // Each function's schema whole, its `$ref`s into its own `$defs`.
            work.push((*params, child))
                .map_err(|_| SchemaError::TooLarge("more than 1024 subschemas"))?;
            while let Some((v, idx)) = work.pop() {
                s.fill_node(idx, &v, params, &mut work)?;
            }
        }
        s.nodes[name as usize] = names;
        s.nodes[arguments as usize] = select;
        s.apply_refinements()?;
        s.check_never()?;
        s.check_unions()?;
        // Arguments are an object, even where the parameters give no type
        // or could not be followed.
        for &child in children.iter().take(functions.len()) {
            if s.nodes[child as usize].kind == Kind::Any {
                s.nodes[child as usize] = Node {
                    kind: Kind::Object,
                    ..EMPTY_NODE
                };
            }
        }
        s.check_nesting()?;
        // Several schemas: no one text the places are offsets into.
        for d in s.dropped.iter_mut() {
            d.0 = 0;
        }
        Ok(s)
    }

    /// The kinds of value node `idx` can begin (`START_*` bits; `depth`
    /// bounds the walk through unions).
    fn starts(&self, idx: u16, depth: usize) -> u8 {
        let n = self.node(idx);
        let null = if n.nullable { START_NULL } else { 0 };
        null | match n.kind {
            Kind::Any => START_ANY,
            Kind::Object => START_OBJECT,
            Kind::Array => START_ARRAY,
            Kind::String => START_STRING,
            Kind::Number | Kind::Integer => START_NUMBER,
            Kind::Boolean => START_TRUE | START_FALSE,
            Kind::Null => START_NULL,
            Kind::Enum => (0..n.count as usize)
                .filter_map(|i| self.bytes(self.enums[n.first as usize + i]).first())
                .fold(0, |m, &b| m | start_of(b)),
            Kind::Select | Kind::Union if depth < MAX_NODES => (0..n.count as usize)
                .fold(0, |m, i| {
                    m | self.starts(self.choices[n.first as usize + i], depth + 1)
                }),
            Kind::Select | Kind::Union => START_ANY,
        }
    }

    /// Every union's schemas begin differently: the first byte of a value
    /// picks one. (Lenient: a union whose schemas can begin alike is kept,
    /// and the first schema that can begin with a value's first byte is
    /// followed: the output is valid, though a later schema is never
    /// chosen for that byte.)
    /// A union of closed objects (`additionalProperties: false`) whose
    /// property names are all different becomes one object keyed on its
    /// first key: the branch that names it holds for the rest (its keys
    /// only, its required ones before `}`). The object's properties are
    /// the branches' in turn; `min_items` counts the branches,
    /// `max_items` is where they are in `choices`.
    fn key_unions(&mut self) -> Result<(), SchemaError> {
        for idx in 0..self.n_nodes {
            let u = self.nodes[idx];
            if u.kind != Kind::Union || u.count < 2 {
                continue;
            }
            // The branches' properties in turn, if every branch is a
            // closed object.
            let mut props: heapless::Vec<usize, MAX_OBJECT_PROPS> = heapless::Vec::new();
            let mut keyable = true;
            for k in 0..u.count {
                let n = self.node(self.choices[(u.first + k) as usize]);
                keyable &= n.kind == Kind::Object
                    && n.extra == NO_EXTRA
                    && !n.nullable
                    && n.min_items == 0
                    && n.items == ANY
                    && (n.lo, n.hi) == (i64::MIN, i64::MAX)
                    && n.never == 0
                    && self
                        .key_pattern(self.choices[(u.first + k) as usize])
                        .is_none()
                    && !self
                        .deps
                        .iter()
                        .any(|d| d.0 == self.choices[(u.first + k) as usize]);
                for i in n.first..n.first + n.count {
                    keyable &= props.push(i as usize).is_ok();
                }
            }
            // The names, all different.
            keyable &= props.iter().enumerate().all(|(k, &i)| {
                props[..k]
                    .iter()
                    .all(|&j| self.prop_name(i) != self.prop_name(j))
            });
            // A `oneOf`'s `{}` may hold for one branch at most.
            let empty = (0..u.count)
                .filter(|&k| self.node(self.choices[(u.first + k) as usize]).required == 0)
                .count();
            if !keyable
                || (u.items == ONE_OF && empty > 1)
                || self.n_props + props.len() > MAX_PROPS
            {
                continue;
            }
            let (first, total) = (self.n_props, props.len());
            for &i in &props {
                self.props[self.n_props] = self.props[i];
                self.n_props += 1;
            }
            self.nodes[idx] = Node {
                kind: Kind::Object,
                nullable: u.nullable,
                first: first as u16,
                count: total as u16,
                extra: NO_EXTRA,
                min_items: u.count,
                max_items: u.first,
                ..EMPTY_NODE
            };
        }
        Ok(())
    }

    /// Of a keyed object ([`Schema::key_unions`]): the branch holding
    /// property `prop`.
    fn branch_of(&self, n: &Node, prop: u16) -> u8 {
        let mut at = 0u16;
        for b in 0..n.min_items {
            at += self.node(self.choices[(n.max_items + b) as usize]).count;
            if prop < at {
                return b as u8;
            }
        }
        u8::MAX
    }

    /// Of a keyed object, branch `b`'s properties and its required ones,
    /// as masks of the object's properties.
    fn branch_masks(&self, n: &Node, b: u8) -> (u64, u64) {
        let mut at = 0u16;
        for k in 0..n.min_items {
            let c = self.node(self.choices[(n.max_items + k) as usize]);
            if k == b as u16 {
                let mask = if c.count == 0 {
                    0
                } else {
                    (u64::MAX >> (64 - c.count as u32)) << at
                };
                return (mask, c.required << at);
            }
            at += c.count;
        }
        (0, 0)
    }

    /// (Best effort, a `oneOf` whose schemas can begin alike follows its
    /// first one that can begin with a value's first byte, as `anyOf`,
    /// and says `oneOf` was left out: a value it holds might hold for
    /// another of them.)
    fn check_unions(&mut self) -> Result<(), SchemaError> {
        for idx in 0..self.n_nodes {
            let n = self.nodes[idx];
            let one_of = n.items == ONE_OF;
            if n.kind != Kind::Union || (self.lenient && !one_of) {
                continue;
            }
            let mut seen = if n.nullable { START_NULL } else { 0 };
            for i in 0..n.count as usize {
                let starts = self.starts(self.choices[n.first as usize + i], 0);
                if seen & starts != 0 && self.lenient {
                    // The left-out place: the `oneOf`'s schema.
                    self.drop_at(n.lo as usize, "oneOf");
                    break;
                }
                if seen & starts != 0 {
                    return Err(unsupported(if one_of {
                        "oneOf (schemas that can begin alike)"
                    } else {
                        "anyOf (schemas that can begin alike)"
                    }));
                }
                seen |= starts;
            }
        }
        Ok(())
    }

    fn alloc(&mut self) -> Result<u16, SchemaError> {
        if self.n_nodes >= MAX_NODES {
            return Err(SchemaError::TooLarge("more than 1024 subschemas"));
        }
        self.n_nodes += 1;
        Ok((self.n_nodes - 1) as u16)
    }

    fn span_of(
        &mut self,
        write: impl FnOnce(&mut TextWriter) -> fmt::Result,
    ) -> Result<Span, SchemaError> {
        let start = self.n_text;
        write(&mut TextWriter { s: self })
            .map_err(|_| SchemaError::TooLarge("more than 65535 bytes of names and enum values"))?;
        Ok(Span {
            start: start as u16,
            len: (self.n_text - start) as u16,
        })
    }

    /// Whether integer node `idx`'s bounds allow the value with sign `neg`
    /// and magnitude `mag` (`done`), or else some value whose digits start
    /// with `mag`'s (a magnitude of 0 is complete: no digit follows a
    /// leading zero). Always true for a node without bounds.
    fn in_bounds(&self, idx: u16, neg: bool, mag: u64, done: bool) -> bool {
        let n = self.node(idx);
        if idx == ANY || (n.lo == i64::MIN && n.hi == i64::MAX) {
            return true;
        }
        // The magnitudes allowed with this sign, as [a, b].
        let (lo, hi) = (n.lo as i128, n.hi as i128);
        let (a, b) = if neg {
            (0.max(-hi), -lo)
        } else {
            (0.max(lo), hi)
        };
        let mag = mag as i128;
        if a > b {
            return false;
        }
        if mag >= a && mag <= b {
            return true;
        }
        if done || mag == 0 {
            return false;
        }
        // More digits: [mag * 10^j, (mag + 1) * 10^j - 1] for j >= 1.
        let (mut first, mut last) = (mag, mag);
        while first <= b {
            (first, last) = (first * 10, last * 10 + 9);
            if first <= b && last >= a {
                return true;
            }
        }
        false
    }

    /// Whether node `idx` allows a number written so far (sign `neg`,
    /// digits `mag`, `fd` of them after the point, grammar state `st`;
    /// `done`: ending here): an integer's bounds, a bounded number's, or
    /// anything.
    fn num_allows(&self, idx: u16, neg: bool, mag: u64, fd: u8, st: u8, done: bool) -> bool {
        let n = self.node(idx);
        match n.kind {
            Kind::Integer if st == 0 => n.lo <= 0,
            Kind::Integer => self.in_bounds(idx, neg, mag, done),
            Kind::Number if n.count == 1 => {
                self.num_bounds[n.first as usize].allow(neg, mag, fd, st, done)
            }
            _ => true,
        }
    }

    /// Whether node `idx` is a number with bounds (written without an
    /// exponent, with at most 17 significant digits and 12 after the point).
    fn bounded_number(&self, idx: u16) -> bool {
        let n = self.node(idx);
        n.kind == Kind::Number && n.count == 1
    }

    fn bytes(&self, s: Span) -> &[u8] {
        &self.text[s.start as usize..(s.start + s.len) as usize]
    }

    /// Fills node `idx` from `v`, queueing its subschemas.
    fn fill<'v>(
        &mut self,
        idx: u16,
        v: &Value<'v>,
        work: &mut heapless::Vec<(Value<'v>, u16), MAX_NODES>,
    ) -> Result<(), SchemaError> {
        let obj = v
            .as_object()
            .ok_or(SchemaError::Invalid("a schema must be an object"))?;
        let mut node = EMPTY_NODE;
        for (key, value) in obj.iter() {
            // `additionalItems` constrains only the items past an `items`
            // list (drafts 4 to 2019-09): beside a schema, or without
            // `items`, every array meets it.
            let vacuous =
                key.eq_str("additionalItems") && !matches!(v.get("items"), Some(Value::Array(_)));
            if vacuous || !refused_keyword(idx, self.refs, &key, &value) {
                continue;
            }
            let mut name: heapless::String<32> = heapless::String::new();
            for c in key.chars() {
                if name.push(c).is_err() {
                    break;
                }
            }
            if self.lenient {
                self.drop_keyword(v, &name);
                continue;
            }
            return Err(unsupported(&name));
        }
        // The type: a name, or [name, "null"]; a list of several other
        // names is the union of the schema with each of them (a node of
        // that union has its type forced).
        let mut kind = None;
        let forced = self.forced.iter().find(|f| f.0 == idx).map(|f| f.1);
        match v.get("type") {
            None => {}
            Some(Value::String(t)) => kind = Some(t),
            Some(Value::Array(list)) => {
                let mut several = false;
                for (pos, t) in list.iter().enumerate() {
                    let t = t
                        .as_str()
                        .ok_or(SchemaError::Invalid("'type' must name types"))?;
                    if forced.is_some() {
                        if forced == Some(pos as u8) {
                            kind = Some(t);
                        }
                    } else if t.eq_str("null") {
                        node.nullable = true;
                    } else if kind.replace(t).is_some() {
                        several = true;
                    }
                }
                if several {
                    return self.fill_type_union(idx, v, &list, node.nullable, work);
                }
            }
            Some(_) => return Err(SchemaError::Invalid("'type' must be a string or a list")),
        }
        // A value of `enum` or `const` outside `type` can never validate:
        // left out (both keywords hold); none left is refused.
        let nullable = node.nullable;
        let fits = |x: &Value| {
            kind.is_none() && !nullable
                || match x {
                    Value::Null => nullable || kind.is_some_and(|t| t.eq_str("null")),
                    Value::Bool(_) => kind.is_some_and(|t| t.eq_str("boolean")),
                    Value::String(_) => kind.is_some_and(|t| t.eq_str("string")),
                    Value::Array(_) => kind.is_some_and(|t| t.eq_str("array")),
                    Value::Object(_) => kind.is_some_and(|t| t.eq_str("object")),
                    Value::Number(n) => kind.is_some_and(|t| {
                        t.eq_str("number")
                            || (t.eq_str("integer")
                                && integer_floor_ceil(n.raw()).is_some_and(|(f, c)| f == c))
                    }),
                }
        };
        let enum_values = match (v.get("enum"), v.get("const")) {
            (Some(Value::Array(a)), None) => Some(a.iter()),
            (None, Some(c)) => {
                // One value: the schema's own text holds it.
                self.enum_values(&mut node, core::iter::once(c).filter(fits))?;
                None
            }
            (None, None) => None,
            _ => {
                return Err(SchemaError::Invalid(
                    "'enum' must be a list (and not beside 'const')",
                ))
            }
        };
        if let Some(values) = enum_values {
            self.enum_values(&mut node, values.filter(fits))?;
        }
        if node.kind == Kind::Enum {
            let bounded = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
            if bounded.iter().any(|k| v.get(k).is_some()) {
                return Err(unsupported("minimum or maximum (beside enum or const)"));
            }
            node.nullable = false;
            self.nodes[idx as usize] = node;
            return Ok(());
        }
        let props = v.get("properties");
        // Without `type`, a keyword of one kind makes the node that kind:
        // its values are a subset of the valid ones (which the keyword
        // constrains only when they are of its kind), never one it forbids.
        let has = |keys: &[&str]| keys.iter().any(|k| v.get(k).is_some());
        // An enforced `pattern` (as `format`).
        let pattern = v.get("pattern").and_then(|p| pattern_of(&p));
        // An enforced `format` (one refused was left out or is an error).
        let format = v
            .get("format")
            .and_then(|f| format_of(&f))
            .filter(|&c| c != format::NONE);
        node.kind = match kind {
            None if has(&[
                "properties",
                "required",
                "additionalProperties",
                "minProperties",
                "maxProperties",
                "patternProperties",
                "dependencies",
                "dependentRequired",
            ]) =>
            {
                Kind::Object
            }
            None if has(&["items", "minItems", "maxItems"]) => Kind::Array,
            None if has(&["minLength", "maxLength"]) || format.is_some() || pattern.is_some() => {
                Kind::String
            }
            None if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) => {
                Kind::Number
            }
            None => Kind::Any,
            Some(t) => kind_named(&t)?,
        };
        if node.kind == Kind::Object {
            // Keys beside the properties take any value, none, or follow
            // the schema `additionalProperties` names.
            node.extra = match v.get("additionalProperties") {
                None | Some(Value::Bool(true)) => ANY,
                Some(Value::Bool(false)) => NO_EXTRA,
                Some(extra) => {
                    let child = self.alloc()?;
                    work.push((extra, child))
                        .map_err(|_| SchemaError::TooLarge("more than 1024 subschemas"))?;
                    child
                }
            };
            if let Some(p) = props {
                let p = p
                    .as_object()
                    .ok_or(SchemaError::Invalid("'properties' must be an object"))?;
                if p.len() > MAX_OBJECT_PROPS {
                    return Err(SchemaError::TooLarge(
                        "more than 64 properties in one object",
                    ));
                }
                node.first = self.n_props as u16;
                for (name, sub) in p.iter() {
                    let plain = name
                        .as_plain()
                        .filter(|n| n.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'))
                        .ok_or_else(|| unsupported("properties (a name that needs escapes)"))?;
                    if self.n_props >= MAX_PROPS {
                        return Err(SchemaError::TooLarge("more than 2048 properties"));
                    }
                    let span = self.span_of(|w| w.write_str(plain))?;
                    let child = self.alloc()?;
                    self.props[self.n_props] = (span, child);
                    self.n_props += 1;
                    node.count += 1;
                    work.push((sub, child))
                        .map_err(|_| SchemaError::TooLarge("more than 1024 subschemas"))?;
                }
                // A name twice would make two properties match one key.
                for i in 0..node.count as usize {
                    for j in 0..i {
                        let (a, b) = (node.first as usize + i, node.first as usize + j);
                        if self.bytes(self.props[a].0) == self.bytes(self.props[b].0) {
                            return Err(SchemaError::Invalid("a property named twice"));
                        }
                    }
                }
            }
            let key_pattern = match self.key_pattern_of(v, &node, work) {
                Err(SchemaError::Unsupported(..)) if self.lenient => {
                    self.drop_keyword(v, "patternProperties");
                    None
                }
                k => k?,
            };
            if let Some(req) = v.get("required") {
                let req = req
                    .as_array()
                    .ok_or(SchemaError::Invalid("'required' must be a list"))?;
                for r in req.iter() {
                    let r = r
                        .as_str()
                        .ok_or(SchemaError::Invalid("'required' must list names"))?;
                    let i = self.property_named(&mut node, &r, key_pattern)?.ok_or(
                        SchemaError::Invalid("a required property not in 'properties'"),
                    )?;
                    node.required |= 1 << i;
                }
            }
            if let Some((pat, schema)) = key_pattern {
                self.key_patterns.push((idx, pat, schema)).map_err(|_| {
                    SchemaError::TooLarge("more than 256 objects with patternProperties")
                })?;
            }
            // `minProperties`, `maxProperties` in `lo`, `hi`; bounds no
            // object can meet are refused (the output would find no end).
            for (k, bound) in [
                ("minProperties", &mut node.lo),
                ("maxProperties", &mut node.hi),
            ] {
                if let Some(n) = v.get(k) {
                    *bound = n.as_u64().map(|n| n.min(u16::MAX as u64) as i64).ok_or(
                        SchemaError::Invalid("minProperties and maxProperties must be counts"),
                    )?;
                }
            }
            let most = match node.extra {
                NO_EXTRA if key_pattern.is_none() => node.count as i64,
                _ => i64::MAX,
            };
            if node.lo > node.hi.min(most) || (node.required.count_ones() as i64) > node.hi {
                return Err(SchemaError::Invalid(
                    "minProperties or maxProperties that no object meets",
                ));
            }
            for keyword in ["dependencies", "dependentRequired"] {
                let Some(deps) = v.get(keyword) else {
                    continue;
                };
                match self.dependencies_of(idx, &mut node, &deps, key_pattern) {
                    Err(SchemaError::Unsupported(..)) if self.lenient => {
                        self.drop_keyword(v, keyword)
                    }
                    r => r?,
                }
            }
        }
        if node.kind == Kind::String {
            // Characters (an escape counts one), in the array bounds' fields.
            let bound = |k: &str| -> Result<Option<u16>, SchemaError> {
                match v.get(k) {
                    None => Ok(None),
                    Some(n) => n
                        .as_u64()
                        .map(|n| Some(n.min(u16::MAX as u64 - 1) as u16))
                        .ok_or(SchemaError::Invalid(
                            "minLength and maxLength must be counts",
                        )),
                }
            };
            node.min_items = bound("minLength")?.unwrap_or(0);
            node.max_items = bound("maxLength")?.unwrap_or(u16::MAX);
            if node.min_items > node.max_items {
                return Err(SchemaError::Invalid("minLength above maxLength"));
            }
            // Beside a length, a format whose values can grow (`email`,
            // `hostname`, `uri`) is run within it (see `format::tail`),
            // as a pattern whose values' lengths are ranges (see
            // `Pattern::can_end_within`) is; other formats and patterns
            // beside a length (or a format beside a pattern) are refused,
            // or best effort left out (the length and the string kept).
            // A pattern's own lengths (a counted atom) join the string's.
            let own = pattern.map(|p| p.own_lengths());
            if let Some((least, most)) = own {
                node.min_items = node.min_items.max(least);
                node.max_items = node.max_items.min(most);
                if node.min_items > node.max_items {
                    return Err(SchemaError::Invalid(
                        "a pattern's lengths beside minLength above maxLength",
                    ));
                }
            }
            let (min, max) = (node.min_items, node.max_items);
            let fits = |f: u8| {
                format::tail(f).is_some_and(|t| {
                    (max == u16::MAX || min.saturating_add(t) <= max)
                        && (f != format::HOSTNAME || min <= 253)
                })
            };
            let lengths =
                has(&["minLength", "maxLength"]) || own.is_some_and(|o| o != (0, u16::MAX));
            if let Some(f) = format {
                if !lengths || fits(f) {
                    node.items = f as u16;
                } else if self.lenient {
                    self.drop_keyword(v, "format");
                } else {
                    return Err(unsupported("format (beside minLength or maxLength)"));
                }
            }
            if let Some(p) = pattern {
                let within = p.lengths_are_ranges()
                    && p.can_end_within(pattern::Pattern::START, 0, min, max);
                if (!lengths || within) && format.is_none() {
                    node.lo = self.add_pattern(p)? as i64;
                } else if self.lenient {
                    self.drop_keyword(v, "pattern");
                } else {
                    return Err(unsupported(
                        "pattern (beside minLength, maxLength or format)",
                    ));
                }
            }
        }
        self.bounds(&mut node, v, forced.is_some())?;
        if node.kind == Kind::Array {
            if let Some(items) = v.get("items") {
                let child = self.alloc()?;
                node.items = child;
                work.push((items, child))
                    .map_err(|_| SchemaError::TooLarge("more than 1024 subschemas"))?;
            }
            let bound = |k: &str| -> Result<Option<u16>, SchemaError> {
                match v.get(k) {
                    None => Ok(None),
                    Some(n) => n
                        .as_u64()
                        .map(|n| Some(n.min(u16::MAX as u64) as u16))
                        .ok_or(SchemaError::Invalid("minItems and maxItems must be counts")),
                }
            };
            node.min_items = bound("minItems")?.unwrap_or(0);
            node.max_items = bound("maxItems")?.unwrap_or(u16::MAX);
            if node.min_items > node.max_items {
                return Err(SchemaError::Invalid("minItems above maxItems"));
            }
        }
        self.nodes[idx as usize] = node;
        Ok(())
    }

    /// The index among `node`'s properties of the one named `name`; a
    /// name beside them that the object may have (its pattern's, or any
    /// with `additionalProperties` not `false`) becomes one more property
    /// of the schema such keys take; `None` where no key can be `name`.
    fn property_named(
        &mut self,
        node: &mut Node,
        name: &crate::json::Str,
        key_pattern: Option<(u8, u16)>,
    ) -> Result<Option<usize>, SchemaError> {
        let found = (0..node.count as usize)
            .find(|&i| name.eq_str_bytes(self.bytes(self.props[node.first as usize + i].0)));
        if let Some(i) = found {
            return Ok(Some(i));
        }
        // A name the pattern matches takes its schema.
        let by_pattern = key_pattern
            .filter(|&(pat, _)| {
                let p = &self.patterns[pat as usize];
                name.as_plain().is_some_and(|n| p.done(p.run(n.as_bytes())))
            })
            .map(|k| k.1);
        if node.extra == NO_EXTRA && by_pattern.is_none() {
            return Ok(None);
        }
        let name = name
            .as_plain()
            .filter(|n| n.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'))
            .ok_or_else(|| unsupported("a property name that needs escapes"))?;
        if node.count as usize >= MAX_OBJECT_PROPS {
            return Err(SchemaError::TooLarge(
                "more than 64 properties in one object",
            ));
        }
        if self.n_props >= MAX_PROPS {
            return Err(SchemaError::TooLarge("more than 2048 properties"));
        }
        if node.count == 0 {
            node.first = self.n_props as u16;
        }
        let span = self.span_of(|w| w.write_str(name))?;
        self.props[self.n_props] = (span, by_pattern.unwrap_or(node.extra));
        self.n_props += 1;
        node.count += 1;
        Ok(Some(node.count as usize - 1))
    }

    /// `dependencies` in its form listing names (draft 4 to 7; its form
    /// with schemas is refused by [`refused_keyword`]) or
    /// `dependentRequired`: once property `a` is written, the names it
    /// lists are required too (`Schema::deps`, read by
    /// [`Schema::dependent_required`]). A property whose listed name no
    /// key can be takes no value (its key refused). Beside
    /// `maxProperties` they are refused: a key could then leave no room
    /// for the names it requires.
    fn dependencies_of(
        &mut self,
        idx: u16,
        node: &mut Node,
        deps: &Value,
        key_pattern: Option<(u8, u16)>,
    ) -> Result<(), SchemaError> {
        let invalid = SchemaError::Invalid("'dependencies' must map names to lists of names");
        let deps = deps.as_object().ok_or(invalid)?;
        if node.hi != i64::MAX {
            return Err(unsupported("dependencies (beside maxProperties)"));
        }
        for (name, list) in deps.iter() {
            let list = list.as_array().ok_or(invalid)?;
            let mut mask = 0u64;
            let mut possible = true;
            for r in list.iter() {
                let r = r.as_str().ok_or(invalid)?;
                match self.property_named(node, &r, key_pattern)? {
                    Some(i) => mask |= 1 << i,
                    None => possible = false,
                }
            }
            // A key no object can have needs nothing.
            let Some(a) = self.property_named(node, &name, key_pattern)? else {
                continue;
            };
            if !possible {
                if node.required >> a & 1 == 1 {
                    return Err(SchemaError::Invalid(
                        "a required property that depends on a name no key can be",
                    ));
                }
                node.never |= 1 << a;
            }
            mask &= !(1 << a);
            if mask != 0 {
                self.deps
                    .push((idx, a as u8, mask))
                    .map_err(|_| SchemaError::TooLarge("more than 256 dependencies"))?;
            }
        }
        Ok(())
    }

    /// The properties of object `obj` that the ones written (`seen`)
    /// require through its dependencies.
    fn dependent_required(&self, obj: u16, seen: u64) -> u64 {
        self.deps
            .iter()
            .filter(|&&(o, a, _)| o == obj && seen >> a & 1 == 1)
            .fold(0, |m, d| m | d.2)
    }

    /// Object `idx`'s `patternProperties` (of `v`, whose properties `node`
    /// holds): one pattern in the subset, which no property's name matches
    /// unless its schema takes any value (a key would follow two schemas);
    /// its pattern's index and its schema's node.
    fn key_pattern_of<'v>(
        &mut self,
        v: &Value<'v>,
        node: &Node,
        work: &mut heapless::Vec<(Value<'v>, u16), MAX_NODES>,
    ) -> Result<Option<(u8, u16)>, SchemaError> {
        let Some(pp) = v.get("patternProperties") else {
            return Ok(None);
        };
        let pp = pp.as_object().ok_or(SchemaError::Invalid(
            "'patternProperties' must be an object",
        ))?;
        let mut entries = pp.iter();
        let Some((text, sub)) = entries.next() else {
            return Ok(None);
        };
        if entries.next().is_some() {
            return Err(unsupported("patternProperties (more than one pattern)"));
        }
        // (A key's characters are not counted: a pattern with lengths of
        // its own is outside the subset there.)
        let p = pattern_of_str(&text)
            .filter(|p| p.own_lengths() == (0, u16::MAX))
            .ok_or_else(|| unsupported("patternProperties (a pattern outside the subset)"))?;
        let any = match sub {
            Value::Bool(true) => true,
            Value::Bool(false) => return Err(unsupported("patternProperties (false)")),
            _ => sub.iter_object().is_some_and(|mut o| {
                o.all(|(k, _)| listed("title description $comment examples default", &k))
            }),
        };
        for i in node.first as usize..(node.first + node.count) as usize {
            if !any && p.done(p.run(self.prop_name(i))) {
                return Err(unsupported(
                    "patternProperties (matching a property's name)",
                ));
            }
        }
        let schema = if any {
            ANY
        } else {
            let child = self.alloc()?;
            work.push((sub, child))
                .map_err(|_| SchemaError::TooLarge("more than 1024 subschemas"))?;
            child
        };
        Ok(Some((self.add_pattern(p)?, schema)))
    }

    /// Pattern `p`'s index in `patterns`: one the same, or `p` added.
    fn add_pattern(&mut self, p: pattern::Pattern) -> Result<u8, SchemaError> {
        if let Some(at) = self.patterns.iter().position(|q| *q == p) {
            return Ok(at as u8);
        }
        self.patterns
            .push(p)
            .map_err(|_| SchemaError::TooLarge("more than 16 patterns"))?;
        Ok(self.patterns.len() as u8 - 1)
    }

    /// A node's bounds from `minimum`, `maximum`, `exclusiveMinimum` and
    /// `exclusiveMaximum` (numbers). An integer's are made inclusive (a
    /// fractional bound rounded inward); a number's are kept exactly in
    /// units of 10^-12 (see [`number_units`]), and its values are then
    /// written without an exponent. Refused on other types.
    fn bounds(&mut self, node: &mut Node, v: &Value, forced: bool) -> Result<(), SchemaError> {
        let keys = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"];
        let mut num = NumBounds::default();
        for (i, key) in keys.into_iter().enumerate() {
            let Some(b) = v.get(key) else { continue };
            if !matches!(node.kind, Kind::Integer | Kind::Number) {
                // In a `type` list's union, bounds hold for its numbers only.
                if self.lenient || forced {
                    continue;
                }
                return Err(unsupported(if i < 2 {
                    "minimum (on a type other than integer or number)"
                } else {
                    "maximum (on a type other than integer or number)"
                }));
            }
            let Value::Number(text) = b else {
                return Err(SchemaError::Invalid("a bound must be a number"));
            };
            if node.kind == Kind::Number {
                let Some(at) = number_units(text.raw()) else {
                    if self.lenient {
                        self.drop_keyword(v, key);
                        continue;
                    }
                    return Err(unsupported(if i < 2 {
                        "minimum (of a number: 15 digits, multiple of 1e-10, at most 1e6)"
                    } else {
                        "maximum (of a number: 15 digits, multiple of 1e-10, at most 1e6)"
                    }));
                };
                let bound = Some((at, i % 2 == 1));
                // The tighter of two bounds on one side.
                if i < 2 {
                    if num.lo.is_none_or(|(l, open)| at > l || (at == l && !open)) {
                        num.lo = bound;
                    }
                } else if num.hi.is_none_or(|(h, open)| at < h || (at == h && !open)) {
                    num.hi = bound;
                }
                continue;
            }
            // The inclusive integer bound, from the text exactly. A lower
            // bound above i64 (an upper one below) leaves no integer the
            // constraint writes: refused. Past the other end it bounds
            // nothing the constraint writes.
            let (floor, ceil) = integer_floor_ceil(text.raw())
                .ok_or(SchemaError::Invalid("a bound must be a number"))?;
            let bound = match i {
                0 => ceil,
                1 => floor + 1,
                2 => floor,
                _ => ceil - 1,
            };
            if i < 2 {
                if bound > i64::MAX as i128 {
                    return Err(SchemaError::TooLarge(
                        "a minimum above 2^63 - 1 (the integers written are 64-bit)",
                    ));
                }
                node.lo = node.lo.max(bound.max(i64::MIN as i128) as i64);
            } else {
                if bound < i64::MIN as i128 {
                    return Err(SchemaError::TooLarge(
                        "a maximum below -2^63 (the integers written are 64-bit)",
                    ));
                }
                node.hi = node.hi.min(bound.min(i64::MAX as i128) as i64);
            }
        }
        if node.lo > node.hi {
            return Err(SchemaError::Invalid(
                "no integer between minimum and maximum",
            ));
        }
        if num.lo.is_some() || num.hi.is_some() {
            if !num.meets(false, Some(0), None, false) && !num.meets(true, Some(0), None, false) {
                return Err(SchemaError::Invalid(
                    "no number between minimum and maximum",
                ));
            }
            let slot = self
                .num_bounds
                .get_mut(self.n_num_bounds)
                .ok_or(SchemaError::TooLarge("more than 16 bounded numbers"))?;
            *slot = num;
            node.first = self.n_num_bounds as u16;
            node.count = 1;
            self.n_num_bounds += 1;
        }
        Ok(())
    }

    /// Makes `node` an enum of `values` (scalars), stored as JSON text.
    fn enum_values<'v>(
        &mut self,
        node: &mut Node,
        values: impl Iterator<Item = Value<'v>>,
    ) -> Result<(), SchemaError> {
        node.kind = Kind::Enum;
        node.first = self.n_enums as u16;
        let text_start = self.n_text;
        for value in values {
            if self.n_enums >= MAX_ENUM {
                return Err(SchemaError::TooLarge("more than 2048 enum values"));
            }
            // Scalars only, as the output writes them (strings re-escaped).
            if matches!(value, Value::Array(_) | Value::Object(_)) {
                return Err(unsupported("enum (of objects or arrays)"));
            }
            let span = self.span_of(|w| write_python_json(w, &value))?;
            self.enums[self.n_enums] = span;
            self.n_enums += 1;
            node.count += 1;
        }
        // No value left: a node that takes none (see `check_never`).
        self.sort_enum(node);
        // The same values as an enum compiled before (one definition
        // referenced from many places): its run, shared.
        let (first, count) = (node.first as usize, node.count as usize);
        let same = |a: usize| {
            (0..count).all(|i| self.bytes(self.enums[a + i]) == self.bytes(self.enums[first + i]))
        };
        let earlier = self.nodes[..self.n_nodes]
            .iter()
            .filter(|n| n.kind == Kind::Enum && n.count as usize == count)
            .map(|n| n.first as usize)
            .find(|&a| a < first && same(a));
        if let Some(at) = earlier {
            (self.n_enums, self.n_text) = (first, text_start);
            node.first = at as u16;
        }
        Ok(())
    }

    /// Sorts enum node `n`'s values by their text (the matcher's runs of
    /// candidates).
    fn sort_enum(&mut self, n: &Node) {
        let (text, enums) = (&self.text, &mut self.enums);
        let at = |s: &Span| &text[s.start as usize..(s.start + s.len) as usize];
        insertion_sort(
            &mut enums[n.first as usize..(n.first + n.count) as usize],
            |a, b| at(a) < at(b),
        );
    }

    /// Object `obj`'s `patternProperties`: its pattern and that pattern's
    /// schema.
    fn key_pattern(&self, obj: u16) -> Option<(&pattern::Pattern, u16)> {
        let &(_, pat, schema) = self.key_patterns.iter().find(|k| k.0 == obj)?;
        Some((&self.patterns[pat as usize], schema))
    }

    fn node(&self, idx: u16) -> Node {
        if idx == ANY {
            EMPTY_NODE
        } else {
            self.nodes[idx as usize]
        }
    }

    /// A property's name.
    fn prop_name(&self, i: usize) -> &[u8] {
        self.bytes(self.props[i].0)
    }
}

/// Where an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ObjSt {
    /// After `{`: a key or `}`.
    Open,
    /// After `,`: a key.
    NextKey,
    /// After a key: `:`, then property `prop`'s value (`ANY` for a free key).
    Colon { prop: u16 },
    /// After a value: `,` or `}`.
    AfterValue,
}

/// Where an array is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArrSt {
    Open,
    NextValue,
    AfterValue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// Before a value of this node.
    Value(u16),
    Object {
        node: u16,
        seen: u64,
        st: ObjSt,
        /// The enum value (index) its discriminant property took, if any.
        choice: u8,
        /// Keys written so far (saturating; `minProperties`,
        /// `maxProperties`).
        keys: u16,
    },
    Array {
        node: u16,
        count: u16,
        st: ArrSt,
    },
    /// Inside a string: `esc` 1 after `\`, 2..=5 hex digits to come;
    /// `utf8` continuation bytes to come, the next in `lo..=hi`; `key`: an
    /// object's free key; `chars` so far, and at least `min`, at most
    /// `max` of them (`minLength`, `maxLength`; an escape is one, and a
    /// `\u` surrogate pair one: JSON Schema counts code points). In a
    /// `\u` escape `lo` classes its digits so far (0 none, 1 `D`, 2 a
    /// high surrogate, 3 a low one, 4 a low one due, 5 due and `D`); out
    /// of one, `hi` 1 after a high surrogate, whose low half must follow.
    Str {
        esc: u8,
        utf8: u8,
        lo: u8,
        hi: u8,
        key: bool,
        chars: u16,
        min: u16,
        max: u16,
    },
    /// An object's other key while its `patternProperties` pattern may
    /// still match it: the pattern's states (plain ASCII only meanwhile).
    PatKey {
        set: u64,
    },
    /// A declared property name after its `"`: candidates, bytes matched;
    /// `esc`: after a `\\` (an open object's other key, if the escape is
    /// one no name holds).
    Key {
        cand: u64,
        off: u16,
        esc: bool,
        /// Only a property's name: `maxProperties` leaves room for the
        /// required ones alone.
        props_only: bool,
    },
    /// A number: its state (see `Matcher::number`), bytes so far; its
    /// node (an integer's or a number's bounds), sign and digits so far
    /// (an integer's saturated), `fd` of them after the point.
    Num {
        integer: bool,
        st: u8,
        len: u8,
        node: u16,
        neg: bool,
        mag: u64,
        fd: u8,
    },
    /// A string of a `format` ([`format`]) after its `"`: the format and
    /// its automaton's state; its node (`minLength`, `maxLength`) and the
    /// characters so far (bytes: a format's are ASCII).
    Formatted {
        fmt: u8,
        st: u64,
        node: u16,
        chars: u16,
    },
    /// A string of a `pattern` after its `"`: the pattern's index, its
    /// automaton's states; its node and the characters so far (bytes: a
    /// pattern's are ASCII).
    Patterned {
        pat: u8,
        set: u64,
        node: u16,
        chars: u16,
    },
    /// `true`, `false` or `null`, `off` bytes matched.
    Lit {
        word: u8,
        off: u8,
    },
    /// An enum value: its candidates, the node's values `lo..hi` (sorted:
    /// those that begin with the bytes so far are a run), bytes matched.
    Enum {
        node: u16,
        lo: u16,
        hi: u16,
        off: u16,
    },
}

const WORDS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// The position in the output: a stack of frames (no recursion).
#[derive(Clone, Debug)]
pub struct Matcher {
    stack: [Frame; MAX_DEPTH],
    len: usize,
    /// Whitespace bytes in a row.
    ws: u8,
}

/// What a frame does with a byte.
enum Step {
    Accept,
    Reject,
    /// The frame is complete without this byte: pop it, give the byte to
    /// the frame below.
    PopRetry,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

impl Matcher {
    /// At the start of the output.
    pub fn new(schema: &Schema) -> Matcher {
        let mut m = Matcher {
            stack: [Frame::Value(0); MAX_DEPTH],
            len: 1,
            ws: 0,
        };
        m.stack[0] = Frame::Value(schema.root);
        m
    }

    /// Copies `other` into `self` (only the live frames).
    pub fn copy_from(&mut self, other: &Matcher) {
        self.stack[..other.len].copy_from_slice(&other.stack[..other.len]);
        self.len = other.len;
        self.ws = other.ws;
    }

    /// This state as far as what can follow it goes: inside a string of no
    /// `maxLength` (a pattern's or a format's too), the characters past
    /// its `minLength` are not counted (nothing that follows depends on
    /// them: [`pattern::Pattern::can_end_within`] only through the most
    /// characters). Two states of equal keys ([`Matcher::same_state`])
    /// take the same tokens.
    pub fn mask_key(&self, s: &Schema) -> Matcher {
        let mut key = self.clone();
        match key.stack[..key.len].last_mut() {
            Some(Frame::Str {
                chars,
                min,
                max: u16::MAX,
                ..
            }) => *chars = (*chars).min(*min),
            Some(Frame::Patterned { node, chars, .. } | Frame::Formatted { node, chars, .. }) => {
                let n = s.node(*node);
                if n.max_items == u16::MAX {
                    *chars = (*chars).min(n.min_items);
                }
            }
            _ => {}
        }
        key
    }

    /// Whether two matchers stand at the same state.
    pub fn same_state(&self, other: &Matcher) -> bool {
        self.len == other.len
            && self.ws == other.ws
            && self.stack[..self.len] == other.stack[..other.len]
    }

    /// Whether the output may end here: the top value is complete.
    pub fn can_end(&self, s: &Schema) -> bool {
        match self.len {
            0 => true,
            1 => match self.stack[0] {
                Frame::Num {
                    st,
                    node,
                    neg,
                    mag,
                    fd,
                    ..
                } => matches!(st, 1 | 2 | 4 | 7) && s.num_allows(node, neg, mag, fd, st, true),
                Frame::Enum { node, lo, off, .. } => {
                    s.enums[(s.node(node).first + lo) as usize].len == off
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// Which plain tokens (see [`Vocab`]) this state accepts, whatever
    /// their bytes, every other plain token being refused (but for
    /// [`PlainFit::Ascii`]: the others may be taken too): inside a string
    /// with nothing pending (as many characters as its `maxLength` leaves
    /// room for), in an open object's key between characters (no pattern:
    /// diverging from every name goes on as a free key), in a key its
    /// `patternProperties` pattern may still match
    /// (plain ASCII while the object is open). Inside a pattern's or a
    /// format's string of no `maxLength`, and in a closed object's
    /// pattern key: the tokens of the state's [`closed_class`]
    /// ([`PlainFit::Class`]). [`PlainFit::Walk`] elsewhere: each token
    /// must be walked.
    pub fn plain_fit(&self, s: &Schema) -> PlainFit {
        let below = self.len.checked_sub(2).and_then(|i| self.stack.get(i));
        let object = |props_only: bool| match below {
            Some(&Frame::Object { node, .. }) => {
                let n = s.node(node);
                Some((node, n.extra != NO_EXTRA && !props_only))
            }
            _ => None,
        };
        match self.stack[..self.len].last() {
            Some(&Frame::Str {
                esc: 0,
                utf8: 0,
                hi: 0,
                chars,
                max,
                ..
            }) => match max {
                u16::MAX => PlainFit::All,
                _ => PlainFit::Chars(max.saturating_sub(chars)),
            },
            Some(&Frame::Key {
                cand,
                off,
                esc: false,
                props_only,
            }) => match object(props_only) {
                // Not inside a character of the names matched so far.
                Some((node, true)) if s.key_pattern(node).is_none() => {
                    let first = s.node(node).first as usize;
                    let between = cand == 0 || {
                        let name = s.prop_name(first + cand.trailing_zeros() as usize);
                        name.get(off as usize).is_none_or(|b| b & 0xC0 != 0x80)
                    };
                    if between {
                        PlainFit::All
                    } else {
                        PlainFit::Walk
                    }
                }
                _ => PlainFit::Walk,
            },
            Some(&Frame::PatKey { set }) => match object(false) {
                Some((_, true)) => PlainFit::Ascii,
                // A closed object's key goes on only while its pattern may
                // still match.
                Some((node, false)) => s.key_pattern(node).map_or(PlainFit::Walk, |(p, _)| {
                    class_fit(set, &|t, b| p.step(t, b))
                }),
                None => PlainFit::Walk,
            },
            // Without `maxLength` a byte's step does not depend on the
            // count but for `can_end_within`'s least, which more
            // characters only meet more easily: checked at the next count.
            Some(&Frame::Patterned {
                pat,
                set,
                node,
                chars,
            }) if s.node(node).max_items == u16::MAX => {
                let p = &s.patterns[pat as usize];
                let (min, next) = (s.node(node).min_items, chars.saturating_add(1));
                class_fit(set, &|t, b| {
                    p.step(t, b)
                        .filter(|&t| p.can_end_within(t, next, min, u16::MAX))
                })
            }
            Some(&Frame::Formatted { fmt, st, node, .. }) if s.node(node).max_items == u16::MAX => {
                class_fit(st, &|t, b| format::step(fmt, t, b))
            }
            _ => PlainFit::Walk,
        }
    }

    fn push(&mut self, f: Frame) -> bool {
        if self.len >= MAX_DEPTH {
            return false;
        }
        self.stack[self.len] = f;
        self.len += 1;
        true
    }

    /// Takes one byte; false (and the state unspecified) when no valid
    /// output continues with it.
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn advance(&mut self, s: &Schema, b: u8) -> bool {
        loop {
            let Some(&top) = self.stack[..self.len].last() else {
                return false;
            };
            match self.step(s, top, b) {
                Step::Accept => {
                    // Whitespace inside a string is text, not a run.
                    if !is_ws(b) || self.in_string() {
                        self.ws = 0;
                    }
                    return true;
                }
                Step::Reject => return false,
                Step::PopRetry => self.len -= 1,
            }
        }
    }

    fn in_string(&self) -> bool {
        matches!(self.stack[..self.len].last(), Some(Frame::Str { .. }))
    }

    /// Whitespace between tokens, up to the run's cap.
    fn ws(&mut self, b: u8) -> Option<Step> {
        if !is_ws(b) {
            return None;
        }
        if self.ws >= MAX_WS {
            return Some(Step::Reject);
        }
        self.ws += 1;
        Some(Step::Accept)
    }

    fn set_top(&mut self, f: Frame) {
        self.stack[self.len - 1] = f;
    }

    /// A byte inside a string (a `Str`, `Patterned` or `Formatted` top
    /// frame) that does not close it: `Ok(Some(frame))` the top frame
    /// after it, `Ok(None)` refused; `Err(())` when the byte may close the
    /// string or `f` is no string (the whole matcher must take it). Only
    /// the top frame changes: the mask walks strings on frames alone.
    fn inside_string(s: &Schema, f: Frame, b: u8) -> Result<Option<Frame>, ()> {
        match f {
            Frame::Str {
                esc: 0,
                utf8: 0,
                hi: 0,
                ..
            } if b == b'"' => Err(()),
            Frame::Str {
                esc,
                utf8,
                lo,
                hi,
                key,
                chars,
                min,
                max,
            } => {
                // The next (esc, utf8, lo, hi), and whether the byte begins
                // a character (counted against `max`).
                let (next, begins) = if utf8 > 0 {
                    if !(lo..=hi).contains(&b) {
                        return Ok(None);
                    }
                    // The character's last byte leaves `lo` and `hi` 0.
                    let next = if utf8 == 1 {
                        (0, 0, 0, 0)
                    } else {
                        (0, utf8 - 1, 0x80, 0xBF)
                    };
                    (next, false)
                } else if esc == 1 {
                    let next = match b {
                        b'u' => (5, 0, if hi == 1 { 4 } else { 0 }, 0),
                        // After a high surrogate: its low half only.
                        _ if hi == 1 => return Ok(None),
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => (0, 0, 0, 0),
                        _ => return Ok(None),
                    };
                    (next, false)
                } else if esc >= 2 {
                    if !b.is_ascii_hexdigit() {
                        return Ok(None);
                    }
                    let d = b | 0x20;
                    let class = match (esc, lo) {
                        (5, 4) if d == b'd' => 5,
                        (5, 4) => return Ok(None),
                        (5, _) => (d == b'd') as u8,
                        (4, 1) => match d {
                            b'8'..=b'9' | b'a'..=b'b' => 2,
                            // A low surrogate alone.
                            b'c'..=b'f' => return Ok(None),
                            _ => 0,
                        },
                        (4, 5) if matches!(d, b'c'..=b'f') => 3,
                        (4, 5) => return Ok(None),
                        (_, class) => class,
                    };
                    let next = match esc {
                        // Complete: a high surrogate awaits its low half.
                        2 => (0, 0, 0, (class == 2) as u8),
                        _ => (esc - 1, 0, class, 0),
                    };
                    (next, false)
                } else if hi == 1 {
                    // The low half's `\`, not counted: the pair is one.
                    if b != b'\\' {
                        return Ok(None);
                    }
                    ((1, 0, 0, 1), false)
                } else {
                    let next = match b {
                        _ if chars >= max => return Ok(None),
                        b'\\' => (1, 0, 0, 0),
                        0..=0x1F | b'"' => return Ok(None),
                        0x20..=0x7F => (0, 0, 0, 0),
                        _ => match crate::json::utf8_lead(b) {
                            Some((need, lo, hi)) => (0, need, lo, hi),
                            None => return Ok(None),
                        },
                    };
                    (next, true)
                };
                let (esc, utf8, lo, hi) = next;
                Ok(Some(Frame::Str {
                    esc,
                    utf8,
                    lo,
                    hi,
                    key,
                    chars: chars + begins as u16,
                    min,
                    max,
                }))
            }
            Frame::Patterned {
                pat,
                set,
                node,
                chars,
            } if b != b'"' => {
                let p = &s.patterns[pat as usize];
                let n = s.node(node);
                // A byte only while a value of an allowed length can
                // still end.
                let chars = chars.saturating_add(1);
                Ok(p.step(set, b)
                    .filter(|&set| p.can_end_within(set, chars, n.min_items, n.max_items))
                    .map(|set| Frame::Patterned {
                        pat,
                        set,
                        node,
                        chars,
                    }))
            }
            Frame::Formatted {
                fmt,
                st,
                node,
                chars,
            } if b != b'"' => {
                let n = s.node(node);
                // Beside `maxLength`, a byte only while the value can
                // still end within it.
                let chars = chars.saturating_add(1);
                Ok(format::step(fmt, st, b)
                    .filter(|&st| {
                        n.max_items == u16::MAX || chars + format::shortest(fmt, st) <= n.max_items
                    })
                    .map(|st| Frame::Formatted {
                        fmt,
                        st,
                        node,
                        chars,
                    }))
            }
            _ => Err(()),
        }
    }

    #[cfg_attr(kestrel_shipped, optimize(speed))]
    fn step(&mut self, s: &Schema, top: Frame, b: u8) -> Step {
        match top {
            Frame::Value(idx) => {
                if let Some(st) = self.ws(b) {
                    return st;
                }
                self.len -= 1;
                if self.start_value(s, idx, b) {
                    Step::Accept
                } else {
                    Step::Reject
                }
            }
            Frame::Object {
                node,
                seen,
                st,
                choice,
                keys,
            } => self.object(s, node, seen, st, choice, keys, b),
            Frame::Array { node, count, st } => {
                if let Some(st) = self.ws(b) {
                    return st;
                }
                let n = s.node(node);
                let close = b == b']';
                match st {
                    ArrSt::Open | ArrSt::AfterValue if close => {
                        if count >= n.min_items {
                            self.len -= 1;
                            Step::Accept
                        } else {
                            Step::Reject
                        }
                    }
                    ArrSt::AfterValue if b == b',' && count < n.max_items => {
                        self.set_top(Frame::Array {
                            node,
                            count,
                            st: ArrSt::NextValue,
                        });
                        Step::Accept
                    }
                    ArrSt::Open | ArrSt::NextValue if count < n.max_items => {
                        self.set_top(Frame::Array {
                            node,
                            count: count + 1,
                            st: ArrSt::AfterValue,
                        });
                        if self.start_value(s, n.items, b) {
                            Step::Accept
                        } else {
                            Step::Reject
                        }
                    }
                    _ => Step::Reject,
                }
            }
            Frame::Str {
                esc: 0,
                utf8: 0,
                hi: 0,
                key,
                chars,
                min,
                ..
            } if b == b'"' => {
                if chars < min {
                    return Step::Reject;
                }
                self.len -= 1;
                if key {
                    if let Some(Frame::Object {
                        node,
                        seen,
                        choice,
                        keys,
                        ..
                    }) = self.stack[..self.len].last().copied()
                    {
                        self.set_top(Frame::Object {
                            node,
                            seen,
                            st: ObjSt::Colon { prop: ANY },
                            choice,
                            keys,
                        });
                    }
                }
                Step::Accept
            }
            Frame::Patterned {
                pat,
                set,
                node,
                chars,
            } if b == b'"' => {
                let p = &s.patterns[pat as usize];
                if !p.done(set) || chars < s.node(node).min_items {
                    return Step::Reject;
                }
                self.len -= 1;
                Step::Accept
            }
            Frame::Formatted {
                fmt,
                st,
                node,
                chars,
            } if b == b'"' => {
                if !format::done(fmt, st) || chars < s.node(node).min_items {
                    return Step::Reject;
                }
                self.len -= 1;
                Step::Accept
            }
            Frame::Str { .. } | Frame::Patterned { .. } | Frame::Formatted { .. } => {
                match Self::inside_string(s, top, b) {
                    Ok(Some(f)) => {
                        self.set_top(f);
                        Step::Accept
                    }
                    _ => Step::Reject,
                }
            }
            Frame::PatKey { set } => {
                let Some(Frame::Object {
                    node,
                    seen,
                    choice,
                    keys,
                    ..
                }) = self.stack[..self.len - 1].last().copied()
                else {
                    return Step::Reject;
                };
                let Some((p, _)) = s.key_pattern(node) else {
                    return Step::Reject;
                };
                let open = s.node(node).extra != NO_EXTRA;
                if b == b'"' {
                    let prop = match p.done(set) {
                        true => PATTERN_KEY,
                        false if open => ANY,
                        false => return Step::Reject,
                    };
                    self.len -= 1;
                    self.set_top(Frame::Object {
                        node,
                        seen,
                        st: ObjSt::Colon { prop },
                        choice,
                        keys,
                    });
                    return Step::Accept;
                }
                // While the pattern may match, plain ASCII only (its
                // automaton reads no escapes); once it cannot, an open
                // object's key goes on as any string.
                if b == b'\\' || !(0x20..0x80).contains(&b) {
                    return Step::Reject;
                }
                match p.step(set, b) {
                    Some(set) => self.set_top(Frame::PatKey { set }),
                    None if open => self.set_top(Frame::Str {
                        esc: 0,
                        utf8: 0,
                        lo: 0,
                        hi: 0,
                        key: true,
                        chars: 0,
                        min: 0,
                        max: u16::MAX,
                    }),
                    None => return Step::Reject,
                }
                Step::Accept
            }
            Frame::Key {
                cand,
                off,
                esc,
                props_only,
            } => {
                let Some(Frame::Object {
                    node,
                    seen,
                    choice,
                    keys,
                    ..
                }) = self.stack[..self.len - 1].last().copied()
                else {
                    return Step::Reject;
                };
                let n = s.node(node);
                let open = n.extra != NO_EXTRA && !props_only;
                let name = |i: u32| s.prop_name(n.first as usize + i as usize);
                // The object's pattern's states on the key so far (a
                // prefix of every candidate's name): 0 if it cannot match.
                let key_pattern = s.key_pattern(node).filter(|_| !props_only);
                // The key so far: a prefix of every candidate's name.
                let so_far = match cand {
                    0 => &[][..],
                    _ => &name(cand.trailing_zeros())[..off as usize],
                };
                let pattern_states = || key_pattern.map_or(0, |(p, _)| p.run(so_far));
                if b == b'"' && !esc {
                    // The candidate whose name ends here (a property seen
                    // already: refused), else another key.
                    let mut prop = ANY;
                    let mut bits = cand;
                    while bits != 0 {
                        let i = bits.trailing_zeros();
                        bits &= bits - 1;
                        if name(i).len() == off as usize {
                            prop = i as u16;
                        }
                    }
                    if prop == ANY && key_pattern.is_some_and(|(p, _)| p.done(pattern_states())) {
                        prop = PATTERN_KEY;
                    }
                    if (prop == ANY && !open)
                        || (prop < PATTERN_KEY && (seen | n.never) & 1 << prop != 0)
                    {
                        return Step::Reject;
                    }
                    // A keyed object's first key chooses its branch.
                    let choice = if n.min_items > 0 && choice == u8::MAX {
                        s.branch_of(&n, prop)
                    } else {
                        choice
                    };
                    self.len -= 1;
                    self.set_top(Frame::Object {
                        node,
                        seen,
                        st: ObjSt::Colon { prop },
                        choice,
                        keys,
                    });
                    return Step::Accept;
                }
                let mut keep = 0u64;
                let mut bits = cand;
                while bits != 0 {
                    let i = bits.trailing_zeros();
                    bits &= bits - 1;
                    if name(i).get(off as usize) == Some(&b) {
                        keep |= 1 << i;
                    }
                }
                if keep == 0 || esc {
                    // Past every property's name: a key the object's
                    // pattern may still match goes on with it (`esc` is
                    // never set while it may: a backslash is refused).
                    let set = if esc { 0 } else { pattern_states() };
                    if set != 0 {
                        let rest = Frame::PatKey { set };
                        self.set_top(rest);
                        return self.step(s, rest, b);
                    }
                    // Else another key of an open
                    // object, the rest of it a string. An escape while a
                    // name could still be spelled is one of the characters
                    // no name holds (a quote, a backslash, a control
                    // character), never `\\/` or `\\u` (which might spell
                    // one).
                    if !open
                        || (esc && !matches!(b, b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't'))
                    {
                        return Step::Reject;
                    }
                    if cand != 0 && b == b'\\' {
                        self.set_top(Frame::Key {
                            cand,
                            off,
                            esc: true,
                            props_only,
                        });
                        return Step::Accept;
                    }
                    let rest = Frame::Str {
                        esc: esc as u8,
                        utf8: 0,
                        lo: 0,
                        hi: 0,
                        key: true,
                        chars: 0,
                        min: 0,
                        max: u16::MAX,
                    };
                    self.set_top(rest);
                    // Diverging inside a character of the names: the string
                    // takes that character's bytes so far first.
                    let partial = match so_far.iter().rposition(|&c| !(0x80..0xC0).contains(&c)) {
                        Some(p) if so_far[p] >= 0xC0 => &so_far[p..],
                        _ => &[][..],
                    };
                    for &c in partial.iter().chain([b].iter()) {
                        let top = self.stack[self.len - 1];
                        if !matches!(self.step(s, top, c), Step::Accept) {
                            return Step::Reject;
                        }
                    }
                    return Step::Accept;
                }
                self.set_top(Frame::Key {
                    cand: keep,
                    off: off + 1,
                    esc: false,
                    props_only,
                });
                Step::Accept
            }
            Frame::Num {
                integer,
                st,
                len,
                node,
                neg,
                mag,
                fd,
            } => match Self::number(st, integer, b) {
                Some(next) if len < MAX_NUMBER => {
                    let (mut mag, mut fd) = (mag, fd);
                    if b.is_ascii_digit() && next != 7 {
                        let digit = (b - b'0') as u64;
                        mag = mag.saturating_mul(10).saturating_add(digit);
                        fd += (next == 4) as u8;
                    }
                    // A bounded number: no exponent, a point only with room
                    // for a digit after it.
                    let full = |m: u64| m >= NUM_MAX_MANT;
                    if s.bounded_number(node)
                        && (next >= 5
                            || full(mag)
                            || (next == 3 && full(mag.saturating_mul(10)))
                            || fd as u32 > NUM_FRAC_DIGITS)
                    {
                        return Step::Reject;
                    }
                    if !s.num_allows(node, neg, mag, fd, next, false) {
                        return Step::Reject;
                    }
                    self.set_top(Frame::Num {
                        integer,
                        st: next,
                        len: len + 1,
                        node,
                        neg,
                        mag,
                        fd,
                    });
                    Step::Accept
                }
                Some(_) => Step::Reject,
                None if matches!(st, 1 | 2 | 4 | 7)
                    && s.num_allows(node, neg, mag, fd, st, true) =>
                {
                    Step::PopRetry
                }
                None => Step::Reject,
            },
            Frame::Lit { word, off } => {
                let w = WORDS[word as usize];
                if w.get(off as usize) != Some(&b) {
                    return Step::Reject;
                }
                if off as usize + 1 == w.len() {
                    self.len -= 1;
                } else {
                    self.set_top(Frame::Lit { word, off: off + 1 });
                }
                Step::Accept
            }
            Frame::Enum { node, lo, hi, off } => {
                let n = s.node(node);
                let value = |i: u16| s.bytes(s.enums[(n.first + i) as usize]);
                let at = off as usize;
                // Of the candidates (sorted, sharing the bytes so far), those
                // going on with `b` are a run; one ending here comes first.
                let from = (lo..hi).find(|&i| value(i).get(at) == Some(&b));
                if let Some(from) = from {
                    let to = (from..hi)
                        .find(|&i| value(i).get(at) != Some(&b))
                        .unwrap_or(hi);
                    // Strings and words end themselves; numbers end at the next byte.
                    let ended = (from..to).all(|i| {
                        let v = value(i);
                        v.len() == at + 1 && !v[0].is_ascii_digit() && v[0] != b'-'
                    });
                    if ended {
                        self.len -= 1;
                        self.chosen(s, node, from as u32);
                    } else {
                        self.set_top(Frame::Enum {
                            node,
                            lo: from,
                            hi: to,
                            off: off + 1,
                        });
                    }
                    Step::Accept
                } else if value(lo).len() == at {
                    self.len -= 1;
                    self.chosen(s, node, lo as u32);
                    // The byte goes to the frame below (as `PopRetry`).
                    self.len += 1;
                    Step::PopRetry
                } else {
                    Step::Reject
                }
            }
        }
    }

    /// Enum node `node` took its value `i`: when that is the discriminant
    /// property of the object below (the frame now on top), the object
    /// records it, which picks its `Select` property's schema.
    fn chosen(&mut self, s: &Schema, node: u16, i: u32) {
        let Some(Frame::Object {
            node: obj,
            seen,
            st,
            keys,
            ..
        }) = self.stack[..self.len].last().copied()
        else {
            return;
        };
        let o = s.node(obj);
        if o.items == ANY || o.items >= o.count {
            return;
        }
        if s.props[o.first as usize + o.items as usize].1 == node {
            self.set_top(Frame::Object {
                node: obj,
                seen,
                st,
                choice: i as u8,
                keys,
            });
        }
    }

    /// The number grammar: 0 after `-`; 1 after a leading `0`; 2 in the
    /// integer digits; 3 after `.`; 4 in the fraction; 5 after `e`; 6 after
    /// the exponent's sign; 7 in the exponent. `None`: not a continuation.
    fn number(st: u8, integer: bool, b: u8) -> Option<u8> {
        let digit = b.is_ascii_digit();
        match (st, b) {
            (0, b'0') => Some(1),
            (0, _) if digit => Some(2),
            (1 | 2, b'.') if !integer => Some(3),
            (1 | 2 | 4, b'e' | b'E') if !integer => Some(5),
            (2, _) if digit => Some(2),
            (3 | 4, _) if digit => Some(4),
            (5, b'+' | b'-') => Some(6),
            (5..=7, _) if digit => Some(7),
            _ => None,
        }
    }

    /// Starts a value of node `idx` with byte `b` (whitespace was skipped).
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    fn start_value(&mut self, s: &Schema, idx: u16, b: u8) -> bool {
        let n = s.node(idx);
        if n.nullable && b == b'n' {
            return self.push(Frame::Lit { word: 2, off: 1 });
        }
        if n.kind == Kind::Union {
            // The one schema a value beginning with `b` can be.
            let alt = (0..n.count as usize)
                .map(|i| s.choices[n.first as usize + i])
                .find(|&alt| s.starts(alt, 0) & start_of(b) != 0);
            return alt.is_some_and(|alt| self.start_value(s, alt, b));
        }
        let any = n.kind == Kind::Any;
        match b {
            b'{' if any || n.kind == Kind::Object => self.push(Frame::Object {
                node: idx,
                seen: 0,
                st: ObjSt::Open,
                choice: u8::MAX,
                keys: 0,
            }),
            b'[' if any || n.kind == Kind::Array => self.push(Frame::Array {
                node: idx,
                count: 0,
                st: ArrSt::Open,
            }),
            b'"' if !any && n.kind == Kind::String && n.lo >= 0 => self.push(Frame::Patterned {
                pat: n.lo as u8,
                set: pattern::Pattern::START,
                node: idx,
                chars: 0,
            }),
            b'"' if !any && n.kind == Kind::String && n.items != ANY => {
                self.push(Frame::Formatted {
                    fmt: n.items as u8,
                    st: 0,
                    node: idx,
                    chars: 0,
                })
            }
            b'"' if any || n.kind == Kind::String => self.push(Frame::Str {
                esc: 0,
                utf8: 0,
                lo: 0,
                hi: 0,
                key: false,
                chars: 0,
                min: if any { 0 } else { n.min_items },
                max: if any { u16::MAX } else { n.max_items },
            }),
            b'-' | b'0'..=b'9' if any || matches!(n.kind, Kind::Number | Kind::Integer) => {
                let st = match b {
                    b'-' => 0,
                    b'0' => 1,
                    _ => 2,
                };
                let (neg, mag) = (b == b'-', b.saturating_sub(b'0') as u64);
                s.num_allows(idx, neg, mag, 0, st, false)
                    && self.push(Frame::Num {
                        integer: n.kind == Kind::Integer,
                        st,
                        len: 1,
                        node: idx,
                        neg,
                        mag,
                        fd: 0,
                    })
            }
            b't' | b'f' if any || n.kind == Kind::Boolean => self.push(Frame::Lit {
                word: if b == b't' { 0 } else { 1 },
                off: 1,
            }),
            b'n' if any || n.kind == Kind::Null => self.push(Frame::Lit { word: 2, off: 1 }),
            _ if n.kind == Kind::Enum && n.count > 0 => {
                let all = Frame::Enum {
                    node: idx,
                    lo: 0,
                    hi: n.count,
                    off: 0,
                };
                // Match the first byte through the enum frame.
                self.push(all) && matches!(self.step(s, all, b), Step::Accept)
            }
            _ => false,
        }
    }

    #[cfg_attr(kestrel_shipped, optimize(speed))]
    #[allow(clippy::too_many_arguments)]
    fn object(
        &mut self,
        s: &Schema,
        node: u16,
        seen: u64,
        st: ObjSt,
        choice: u8,
        keys: u16,
        b: u8,
    ) -> Step {
        if let Some(st) = self.ws(b) {
            return st;
        }
        let n = s.node(node);
        let key_pattern = s.key_pattern(node);
        // Keys of any name (`additionalProperties` not `false`), or only
        // those the pattern matches beside the properties'.
        let any_key = n.extra != NO_EXTRA;
        let open = any_key || key_pattern.is_some();
        let free = n.count == 0 && open;
        // The properties a key may still name (not one that takes no
        // value).
        let mut all = if n.count == 0 {
            0
        } else {
            u64::MAX >> (64 - n.count as u32) & !n.never
        };
        let mut required = n.required | s.dependent_required(node, seen);
        // A keyed object: the chosen branch's keys; before one is chosen,
        // `}` only where a branch needs none.
        if n.min_items > 0 {
            if choice == u8::MAX {
                let empty_ok = (0..n.min_items as u8).any(|k| s.branch_masks(&n, k).1 == 0);
                required = if empty_ok { 0 } else { u64::MAX };
            } else {
                (all, required) = s.branch_masks(&n, choice);
            }
        }
        // `minProperties` and `maxProperties` (`lo`, `hi`): a key only
        // below the most, and only a required one's while the rest of the
        // room is theirs; `}` from the least.
        let (keys, missing) = (keys as i64, (required & !seen).count_ones() as i64);
        let props_only = keys + missing >= n.hi;
        match (st, b) {
            (ObjSt::Open | ObjSt::AfterValue, b'}') => {
                if seen & required == required && keys >= n.lo {
                    self.len -= 1;
                    Step::Accept
                } else {
                    Step::Reject
                }
            }
            (ObjSt::AfterValue, b',') if (open || seen != all) && keys < n.hi => {
                self.set_top(Frame::Object {
                    node,
                    seen,
                    st: ObjSt::NextKey,
                    choice,
                    keys: keys as u16,
                });
                Step::Accept
            }
            (ObjSt::Open | ObjSt::NextKey, b'"') if keys < n.hi => {
                let ok = if free && !props_only && key_pattern.is_some() {
                    self.push(Frame::PatKey {
                        set: pattern::Pattern::START,
                    })
                } else if free && !props_only {
                    self.push(Frame::Str {
                        esc: 0,
                        utf8: 0,
                        lo: 0,
                        hi: 0,
                        key: true,
                        chars: 0,
                        min: 0,
                        max: u16::MAX,
                    })
                } else {
                    // A property whose schema its discriminant picks waits
                    // for the discriminant's value. An open object's key
                    // is checked against every property (one seen again is
                    // refused when it ends); a key that leaves them all is
                    // another key.
                    // A key that takes any name is checked against every
                    // property's (one seen, or taking no value, refused
                    // when it ends: the key can always go on as another);
                    // else only the names still to write are offered (a
                    // seen one could be neither ended nor gone on from,
                    // where only the pattern's keys are the others).
                    let mut cand = match (props_only, any_key) {
                        (true, _) => required & !seen,
                        (false, true) => all | n.never,
                        (false, false) => all & !seen,
                    };
                    if choice == u8::MAX && n.min_items == 0 {
                        for i in 0..n.count as usize {
                            if s.node(s.props[n.first as usize + i].1).kind == Kind::Select {
                                cand &= !(1 << i);
                            }
                        }
                    }
                    (cand != 0 || (open && !props_only))
                        && self.push(Frame::Key {
                            cand,
                            off: 0,
                            esc: false,
                            props_only,
                        })
                };
                if ok {
                    Step::Accept
                } else {
                    Step::Reject
                }
            }
            (ObjSt::Colon { prop }, b':') => {
                let (mut child, seen) = if prop == ANY {
                    (n.extra, seen)
                } else if prop == PATTERN_KEY {
                    (key_pattern.map_or(ANY, |k| k.1), seen)
                } else {
                    (
                        s.props[n.first as usize + prop as usize].1,
                        seen | 1 << prop,
                    )
                };
                let c = s.node(child);
                if c.kind == Kind::Select {
                    if choice as u16 >= c.count {
                        return Step::Reject;
                    }
                    child = s.choices[c.first as usize + choice as usize];
                }
                self.set_top(Frame::Object {
                    node,
                    seen,
                    st: ObjSt::AfterValue,
                    choice,
                    keys: (keys as u16).saturating_add(1),
                });
                if self.push(Frame::Value(child)) {
                    Step::Accept
                } else {
                    Step::Reject
                }
            }
            _ => Step::Reject,
        }
    }

    /// Whether the bytes can follow, without changing `self`.
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn accepts(&self, s: &Schema, bytes: &[u8], scratch: &mut Matcher) -> bool {
        scratch.copy_from(self);
        !bytes.is_empty() && bytes.iter().all(|&b| scratch.advance(s, b))
    }
}

/// Which plain tokens a state accepts whole ([`Matcher::plain_fit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainFit {
    /// Every plain token.
    All,
    /// The plain tokens of ASCII bytes only (others may be taken too).
    Ascii,
    /// The plain tokens of at most this many characters.
    Chars(u16),
    /// The tokens of at most this many bytes (`u16::MAX`: any) made only
    /// of the bytes of this class (bit `b`: byte `b`, plain ASCII), taken
    /// without a walk; the others walked. Inside a pattern's or a
    /// format's string ([`class_fit`]).
    Class(u128, u16),
    /// No rule: walk every token.
    Walk,
}

/// Printable ASCII but `"` and `\` (bit `b`: byte `b`).
const PLAIN_ASCII_BYTES: u128 =
    ((1u128 << 0x7F) - (1u128 << 0x20)) & !(1u128 << b'"') & !(1u128 << b'\\');

/// States a [`closed_class`] follows at most.
const CLASS_STATES: usize = 8;

/// Most bytes of a [`counted_class`]'s room.
const CLASS_ROOM: u16 = 16;

/// A class of tokens an automaton (`step`: the next state, `None` where
/// no value goes on) takes from `start` without a walk: its
/// [`closed_class`], of any length, else its [`counted_class`].
fn class_fit(start: u64, step: &dyn Fn(u64, u8) -> Option<u64>) -> PlainFit {
    match closed_class(start, step) {
        Some(class) => PlainFit::Class(class, u16::MAX),
        None => {
            counted_class(start, step).map_or(PlainFit::Walk, |(c, room)| PlainFit::Class(c, room))
        }
    }
}

/// The plain ASCII bytes `start` takes, and the most bytes of them
/// (`room`, at most [`CLASS_ROOM`]) that every state reached on the way
/// takes too, as in a counted pattern (`^[0-9A-Za-z]{8}-...`: alphanumeric
/// bytes, as many as the count has left): a token of at most `room` of
/// them is taken from `start`. `None` when no byte is taken.
fn counted_class(start: u64, step: &dyn Fn(u64, u8) -> Option<u64>) -> Option<(u128, u16)> {
    let mut class = 0u128;
    let mut bytes = PLAIN_ASCII_BYTES;
    while bytes != 0 {
        let b = bytes.trailing_zeros() as u8;
        bytes &= bytes - 1;
        if step(start, b).is_some() {
            class |= 1u128 << b;
        }
    }
    if class == 0 {
        return None;
    }
    // The states after `depth - 1` bytes of the class; every class byte
    // from each of them defined makes `depth` bytes safe.
    let mut level = [start; CLASS_STATES];
    let mut n = 1;
    for depth in 1..=CLASS_ROOM {
        let mut next = [0u64; CLASS_STATES];
        let mut m = 0;
        for &t in &level[..n] {
            let mut bytes = class;
            while bytes != 0 {
                let b = bytes.trailing_zeros() as u8;
                bytes &= bytes - 1;
                let Some(u) = step(t, b) else {
                    return (depth > 1).then_some((class, depth - 1));
                };
                if !next[..m].contains(&u) {
                    let Some(slot) = next.get_mut(m) else {
                        return (depth > 1).then_some((class, depth - 1));
                    };
                    *slot = u;
                    m += 1;
                }
            }
        }
        (level, n) = (next, m);
    }
    Some((class, CLASS_ROOM))
}

/// The plain ASCII bytes that keep an automaton (`step`: the next state,
/// `None` where no value goes on) within a set of at most
/// [`CLASS_STATES`] states from `start`, every step of each defined: a
/// token made of them is taken from `start`, whatever its length. `None`
/// when the states grow past that, or no byte is left.
fn closed_class(start: u64, step: &dyn Fn(u64, u8) -> Option<u64>) -> Option<u128> {
    let mut states = [start; CLASS_STATES];
    let mut n = 1;
    let mut class = PLAIN_ASCII_BYTES;
    let mut changed = true;
    while changed {
        changed = false;
        let mut i = 0;
        while i < n {
            let mut bytes = class;
            while bytes != 0 {
                let b = bytes.trailing_zeros() as u8;
                bytes &= bytes - 1;
                match step(states[i], b) {
                    None => {
                        class &= !(1u128 << b);
                        changed = true;
                    }
                    Some(t) if !states[..n].contains(&t) => {
                        *states.get_mut(n)? = t;
                        n += 1;
                        changed = true;
                    }
                    Some(_) => {}
                }
            }
            i += 1;
        }
    }
    (class != 0).then_some(class)
}

/// Plain tokens counted by characters in [`Vocab::plain_upto`]: one
/// bitset for each count from 1 to this.
pub const PLAIN_COUNTS: usize = 16;

/// Whether a token's bytes are plain string text (no `"`, `\`, control
/// bytes; UTF-8 characters, the last one perhaps begun but not ended; at
/// most [`MAX_TOKEN_BYTES`]): its characters (a begun one counts, as a
/// string counts it at its first byte) and whether they are all ASCII.
pub fn plain_token(bytes: &[u8]) -> Option<(u16, bool)> {
    let whole = match core::str::from_utf8(bytes) {
        Ok(text) => text,
        // Valid up to a last character that the end of the token cuts.
        Err(e) if e.error_len().is_none() => {
            core::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?
        }
        Err(_) => return None,
    };
    let begun = (whole.len() < bytes.len()) as usize;
    let plain = !bytes.is_empty()
        && bytes.len() <= MAX_TOKEN_BYTES
        && bytes.iter().all(|&c| c >= 0x20 && c != b'"' && c != b'\\');
    plain.then(|| ((whole.chars().count() + begun) as u16, bytes.is_ascii()))
}

/// A token (id `id`, sorted position `i`, bytes `bytes`) in a [`Vocab`]'s
/// plain-token tables, for the host that builds them: its bits set in
/// `plain`, `ascii` and `upto` (`plain_ids`, `plain_ascii_ids`,
/// `plain_upto`: [`PLAIN_COUNTS`] bitsets of `plain.len()` words),
/// `longest` raised to its characters, and `i` added to the position lists
/// it joins, `lists` being `[unplain, not_plain_ascii, not_short_plain]`.
#[allow(clippy::too_many_arguments)]
pub fn classify_token<L: Extend<u32>>(
    id: u32,
    i: u32,
    bytes: &[u8],
    plain: &mut [u64],
    ascii: &mut [u64],
    upto: &mut [u64],
    longest: &mut u16,
    lists: [&mut L; 3],
) {
    let (w, bit, words) = (id as usize / 64, 1u64 << (id % 64), plain.len());
    let joins = match plain_token(bytes) {
        None => [true; 3],
        Some((chars, is_ascii)) => {
            plain[w] |= bit;
            if is_ascii {
                ascii[w] |= bit;
            }
            for k in chars as usize..=PLAIN_COUNTS {
                upto[(k - 1) * words + w] |= bit;
            }
            *longest = (*longest).max(chars);
            [false, !is_ascii, chars as usize > PLAIN_COUNTS]
        }
    };
    for (list, joins) in lists.into_iter().zip(joins) {
        if joins {
            list.extend([i]);
        }
    }
}

/// The vocabulary sorted by token bytes, for the mask: tokens sharing a
/// prefix are neighbours, so a prefix is matched once for all of them.
/// Built by the caller (it allocates): `order` the token ids in byte order
/// (tokens that may never be generated, such as added tokens, left out),
/// `offsets[i]..offsets[i + 1]` token `order[i]`'s bytes in `bytes`,
/// `skip[i]` the first position after `i` whose first byte differs;
/// `unplain` (sorted positions) and the bitsets over ids tell the tokens
/// of plain string text ([`plain_token`]) from the others.
pub struct Vocab<'a> {
    /// Token ids in the order of their bytes.
    pub order: &'a [u32],
    /// Where each sorted token's bytes start (one more entry at the end).
    pub offsets: &'a [u32],
    /// The tokens' bytes, in sorted order.
    pub bytes: &'a [u8],
    /// The first sorted position after each whose first byte differs.
    pub skip: &'a [u32],
    /// The first sorted position after each whose first two bytes differ.
    pub skip2: &'a [u32],
    /// Each token id's sorted position (`u32::MAX`: never generated).
    pub position: &'a [u32],
    /// The sorted positions of the tokens that are not plain, ascending.
    pub unplain: &'a [u32],
    /// One bit per token id: plain string text.
    pub plain_ids: &'a [u64],
    /// The same, of ASCII bytes only.
    pub plain_ascii_ids: &'a [u64],
    /// The sorted positions of the tokens not in `plain_ascii_ids`.
    pub not_plain_ascii: &'a [u32],
    /// [`PLAIN_COUNTS`] bitsets like `plain_ids` one after the other: the
    /// `k`th (from 1) the plain tokens of at most `k` characters.
    pub plain_upto: &'a [u64],
    /// The most characters of a plain token.
    pub longest_plain: u16,
    /// The sorted positions of the tokens not in the last of
    /// `plain_upto` (not plain, or plain of more characters).
    pub not_short_plain: &'a [u32],
    /// Per sorted position, the token's [`byte_set`] (a token is tested
    /// against a [`PlainFit::Class`] at once); empty: classes are not
    /// used (those states walk every token).
    pub byte_sets: &'a [u128],
}

/// A token's bytes as a set (bit `b`: byte `b`) when they are all plain
/// ASCII (printable, not `"` or `\`) and at most [`MAX_TOKEN_BYTES`];
/// else bit 0 alone, in no class.
pub fn byte_set(bytes: &[u8]) -> u128 {
    let set = bytes
        .iter()
        .fold(0u128, |set, &b| set | 1u128 << (b & 0x7F));
    let plain = !bytes.is_empty()
        && bytes.len() <= MAX_TOKEN_BYTES
        && bytes.iter().all(|&b| b < 0x80)
        && set & !PLAIN_ASCII_BYTES == 0;
    if plain {
        set
    } else {
        1
    }
}

/// Longest token, in bytes, the mask walks (longer tokens are never allowed).
pub const MAX_TOKEN_BYTES: usize = 128;

impl Vocab<'_> {
    /// The bytes of token `id`, if it may be generated.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        let i = *self.position.get(id as usize)? as usize;
        (i < self.order.len()).then(|| self.token(i))
    }

    fn token(&self, i: usize) -> &[u8] {
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        self.bytes.get(a..b).unwrap_or(&[])
    }

    /// The bitset of the plain tokens `fit` takes, when it is one of ours,
    /// and the sorted positions of the tokens still to walk.
    fn plain_block(&self, fit: PlainFit) -> Option<(&[u64], &[u32])> {
        let words = self.plain_ids.len();
        let block = match fit {
            PlainFit::All => self.plain_ids,
            // The others may be taken too: an ASCII byte can end the
            // key's pattern, and the key goes on as any string.
            PlainFit::Ascii => return Some((self.plain_ascii_ids, self.not_plain_ascii)),
            PlainFit::Chars(room) if room >= self.longest_plain => self.plain_ids,
            PlainFit::Chars(0) => &[],
            // Room for more than the counted ones: those as a block, the
            // longer ones walked.
            PlainFit::Chars(room) if room as usize > PLAIN_COUNTS => {
                let last = (PLAIN_COUNTS - 1) * words;
                return Some((
                    self.plain_upto.get(last..last + words)?,
                    self.not_short_plain,
                ));
            }
            PlainFit::Chars(room) => {
                let k = room as usize;
                self.plain_upto.get((k - 1) * words..k * words)?
            }
            PlainFit::Walk | PlainFit::Class(..) => return None,
        };
        Some((block, self.unplain))
    }

    /// Calls `allow(id)` for every token that can follow `m`, except,
    /// where a rule tells which plain-text tokens follow
    /// ([`Matcher::plain_fit`]), those: then it returns their bitset, to
    /// be allowed as a block by the caller, and walks only the others
    /// (the plain tokens outside the block are refused, or walked).
    /// `states` holds at least [`MAX_TOKEN_BYTES`] + 1 matchers (scratch).
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn allowed<'v>(
        &'v self,
        s: &Schema,
        m: &Matcher,
        states: &mut [Matcher],
        allow: &mut dyn FnMut(u32),
    ) -> Option<&'v [u64]> {
        if states.len() <= MAX_TOKEN_BYTES {
            return None;
        }
        let fit = m.plain_fit(s);
        let (block, list) = self.plain_block(fit).unzip();
        // The class whose tokens (of at most `room` bytes) are taken
        // without a walk (0: none).
        let (class, room) = match fit {
            PlainFit::Class(c, room) if self.byte_sets.len() == self.order.len() => {
                (c, room as usize)
            }
            _ => (0, 0),
        };
        states[0].copy_from(m);
        // Inside a string the walk keeps the top frame alone (`frames[d]`
        // after d bytes, the rest of the stack `m`'s) until a byte may
        // close it; `None`: the whole matcher is in `states[d]`.
        let mut frames = [None; MAX_TOKEN_BYTES + 1];
        frames[0] = m.stack[..m.len].last().copied().filter(|f| {
            matches!(
                f,
                Frame::Str { .. } | Frame::Patterned { .. } | Frame::Formatted { .. }
            )
        });
        let n = list.map_or(self.order.len(), |l| l.len());
        // Bytes of the previous token matched into `states` (states[d] is
        // after d bytes), and the length of its prefix found invalid.
        let mut matched = 0usize;
        let mut dead: Option<usize> = None;
        let mut prev: &[u8] = &[];
        let mut j = 0;
        while j < n {
            let i = list.map_or(j, |l| l[j] as usize);
            if class != 0
                && self.byte_sets[i] & !class == 0
                && (self.offsets[i + 1] - self.offsets[i]) as usize <= room
            {
                // Taken whole, not stepped: the states stay those of the
                // last token walked (`prev`).
                allow(self.order[i]);
                j += 1;
                continue;
            }
            let tok = self.token(i);
            if tok.is_empty() || tok.len() > MAX_TOKEN_BYTES {
                j += 1;
                continue;
            }
            let common = prev.iter().zip(tok).take_while(|(a, b)| a == b).count();
            if dead.is_some_and(|d| common >= d) {
                j += 1;
                continue;
            }
            let mut d = common.min(matched);
            dead = None;
            while d < tok.len() {
                let inside = frames[d].map(|f| (f, Matcher::inside_string(s, f, tok[d])));
                let ok = match inside {
                    Some((_, Ok(next))) => {
                        frames[d + 1] = next;
                        next.is_some()
                    }
                    _ => {
                        let (done, rest) = states.split_at_mut(d + 1);
                        match inside {
                            Some((f, _)) => {
                                rest[0].copy_from(m);
                                rest[0].set_top(f);
                            }
                            None => rest[0].copy_from(&done[d]),
                        }
                        frames[d + 1] = None;
                        rest[0].advance(s, tok[d])
                    }
                };
                if !ok {
                    dead = Some(d + 1);
                    break;
                }
                d += 1;
            }
            matched = d;
            prev = tok;
            if dead.is_none() {
                allow(self.order[i]);
            } else if matches!(dead, Some(1 | 2)) {
                // A refused first byte (or pair): skip every token that
                // starts with it.
                let skip = if dead == Some(1) {
                    self.skip
                } else {
                    self.skip2
                };
                let next = skip[i] as usize;
                j = match list {
                    None => next.max(j + 1),
                    Some(l) => j + 1 + l[j + 1..].partition_point(|&p| (p as usize) < next),
                };
                continue;
            }
            j += 1;
        }
        block
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::json::parse;
    use std::vec::Vec;

    fn schema(text: &str) -> Schema {
        Schema::compile(&parse(text.as_bytes()).unwrap()).unwrap()
    }

    /// Whether `out` is a complete valid output.
    fn complete(s: &Schema, out: &str) -> bool {
        let mut m = Matcher::new(s);
        out.bytes().all(|b| m.advance(s, b)) && m.can_end(s)
    }

    /// Whether `out` is a valid prefix.
    fn prefix(s: &Schema, out: &str) -> bool {
        let mut m = Matcher::new(s);
        out.bytes().all(|b| m.advance(s, b))
    }

    /// The bytes of `alphabet` that can follow `m` (random walks).
    fn takes(s: &Schema, m: &Matcher, alphabet: &[u8]) -> Vec<u8> {
        alphabet
            .iter()
            .copied()
            .filter(|&b| m.clone().advance(s, b))
            .collect()
    }

    /// Integer bounds: every integer from -300 to 300 is a complete output
    /// exactly when it is in range, every prefix of one in range is a valid
    /// prefix, and nothing else (a digit that can no longer lead into the
    /// range, a `-` where no negative is allowed, `-0`) gets in; the
    /// An object with `additionalProperties: false` and no properties
    /// takes only `{}` (it took any keys: MaskBench's Github_trivial o44006
    /// and o79447); one without (`properties: {}` too) takes any keys.
    #[test]
    fn an_object_closed_without_properties_is_empty() {
        let s = schema(r#"{"type":"object","properties":{}}"#);
        assert!(complete(&s, "{}") && complete(&s, r#"{"key":"value"}"#));
        for text in [
            r#"{"type":"object","properties":{},"additionalProperties":false}"#,
            r#"{"type":"object","additionalProperties":false}"#,
        ] {
            let s = Schema::compile(&parse(text.as_bytes()).unwrap()).unwrap();
            assert!(complete(&s, "{}") && complete(&s, "{ }"), "{text}");
            assert!(!prefix(&s, r#"{""#), "{text}");
            assert!(!complete(&s, r#"{"key":"value"}"#), "{text}");
        }
        let s = Schema::compile(&parse(br#"{"type":"object"}"#).unwrap()).unwrap();
        assert!(complete(&s, r#"{"key":"value"}"#) && complete(&s, "{}"));
    }

    /// Annotations and unknown keywords are ignored, strict included; a
    /// keyword that constrains and is not implemented is refused by its
    /// whole name; an `$id` below the root that moves the base of `#`
    /// references is refused, the root's and `#name` anchors ignored.
    #[test]
    fn unknown_keywords_are_ignored_and_constraints_refused_in_full() {
        let ignored = r##"{"$id":"http://x/s","id":"http://x/t","$comment":"c","type":"object","x-kind":{"a":1},
            "readOnly":true,"deprecated":false,"example":3,"esriDocumentation":"u","_format":"date",
            "properties":{"a":{"type":"string","title":"A","$id":"#a","examples":["x"]}}}"##;
        let s = Schema::compile(&parse(ignored.as_bytes()).unwrap()).unwrap();
        assert!(complete(&s, r#"{"a":"x"}"#));
        for (text, name) in [
            (r#"{"type":"string","format":"ipv6"}"#, "format"),
            (
                r#"{"type":"object","propertyNames":{"maxLength":3}}"#,
                "propertyNames",
            ),
            (
                r#"{"type":"array","items":[{"type":"string"}],"additionalItems":false}"#,
                "additionalItems",
            ),
            (r#"{"type":"array","uniqueItems":true}"#, "uniqueItems"),
            (
                r#"{"type":"object","unevaluatedProperties":false}"#,
                "unevaluatedProperties",
            ),
            (
                r##"{"$defs":{"i":{"type":"integer"}},"properties":{"a":{"$id":"http://x/a","type":"string"},"b":{"$ref":"#/$defs/i"}}}"##,
                "$id",
            ),
            (
                r#"{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object"}]}"#,
                "anyOf (schemas that can begin alike)",
            ),
        ] {
            let e = Schema::compile(&parse(text.as_bytes()).unwrap()).unwrap_err();
            let want = std::format!("unsupported JSON schema keyword '{name}'");
            assert_eq!(std::format!("{e}"), want, "{text}");
        }
    }

    /// `minProperties` and `maxProperties` count every key (declared or
    /// not); a key is taken only while the rest of the room can still hold
    /// the required ones, so no prefix is a dead end; bounds no object
    /// meets are refused.
    #[test]
    fn property_counts() {
        let s = schema(
            r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["b"],"minProperties":2,"maxProperties":3}"#,
        );
        for good in [
            r#"{"a":1,"b":2}"#,
            r#"{"b":2,"x":null}"#,
            r#"{"x":1,"b":2,"y":3}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [r#"{"b":2}"#, r#"{"a":1,"b":2,"x":3,"y":4}"#, "{}"] {
            assert!(!complete(&s, bad), "{bad}");
        }
        // Two keys written, one left: only the required `b`.
        assert!(!prefix(&s, r#"{"a":1,"x":2,"y""#));
        assert!(!prefix(&s, r#"{"a":1,"x":2,"a""#));
        assert!(prefix(&s, r#"{"a":1,"x":2,"b""#));
        let free = schema(r#"{"minProperties":1,"maxProperties":1}"#);
        assert!(complete(&free, r#"{"k":[]}"#));
        assert!(!complete(&free, "{}"));
        assert!(!prefix(&free, r#"{"k":[],"#));
        let none = schema(r#"{"type":"object","maxProperties":0}"#);
        assert!(complete(&none, "{}") && !prefix(&none, r#"{""#));
        // Vacuous `additionalItems`: beside a schema `items`, or none.
        let arr = schema(r#"{"type":"array","items":{"type":"string"},"additionalItems":false}"#);
        assert!(complete(&arr, r#"["a","b"]"#) && !complete(&arr, "[1]"));
        for impossible in [
            r#"{"type":"object","properties":{"a":{}},"additionalProperties":false,"minProperties":2}"#,
            r#"{"minProperties":3,"maxProperties":2}"#,
            r#"{"properties":{"a":{},"b":{}},"required":["a","b"],"maxProperties":1}"#,
            r#"{"type":"object","minProperties":-1}"#,
        ] {
            assert!(
                Schema::compile(&parse(impossible.as_bytes()).unwrap()).is_err(),
                "{impossible}"
            );
        }
    }

    /// Without `type`, a kind's keyword makes the node that kind (it was
    /// ignored: `required` in an untyped `items`, MaskBench's Github_easy
    /// o10030, took objects without the required keys).
    #[test]
    fn an_untyped_schema_takes_the_kind_of_its_keywords() {
        for (text, good, bad) in [
            (r#"{"additionalProperties":false}"#, "{}", r#"{"b":1}"#),
            (r#"{"minLength":2}"#, r#""ab""#, r#""a""#),
            (r#"{"maximum":5}"#, "5", "6"),
            (r#"{"maxItems":1}"#, "[1]", "[1,2]"),
        ] {
            let s = Schema::compile(&parse(text.as_bytes()).unwrap()).unwrap();
            assert!(complete(&s, good) && !complete(&s, bad), "{text}");
        }
        // A required key beside the properties is one more property, of
        // the other keys' schema (any value here).
        let s = schema(r#"{"items":{"host":{"type":"string"},"required":["host"]}}"#);
        assert!(complete(&s, r#"[{"host":1},{"host":"h","port":2}]"#));
        assert!(!complete(&s, r#"[{"port":2}]"#));
    }

    /// A best-effort compile lists what it left out, with where.
    #[test]
    fn a_lenient_compile_names_what_it_leaves_out() {
        let text = r#"{"type":"object","properties":{"s":{"type":"string","pattern":"^(?=a)"},"n":{"type":"number","minimum":1e-11},"u":{"type":"string","format":"ipv6"}}}"#;
        let v = parse(text.as_bytes()).unwrap();
        let s = Schema::compile_lenient(&v).unwrap();
        let got: std::vec::Vec<(&str, usize)> = s.dropped().collect();
        let at = |sub: &str| text.find(sub).unwrap();
        assert_eq!(s.dropped_count(), 3);
        assert!(
            got.contains(&("pattern", at(r#"{"type":"string","pattern""#))),
            "{got:?}"
        );
        assert!(
            got.contains(&("minimum", at(r#"{"type":"number""#))),
            "{got:?}"
        );
        assert!(
            got.contains(&("format", at(r#"{"type":"string","format""#))),
            "{got:?}"
        );
        // Nothing left out, nothing listed; strict lists nothing (it refuses).
        let plain = Schema::compile_lenient(&parse(br#"{"type":"string"}"#).unwrap()).unwrap();
        assert_eq!(plain.dropped_count(), 0);
    }

    /// String lengths count code points: a `\u` surrogate pair is one
    /// character; a surrogate alone (a high one not followed by its low
    /// half, a low one first) is not written.
    #[test]
    fn surrogate_pairs_are_one_character_and_never_split() {
        let one = schema(r#"{"type":"string","minLength":1,"maxLength":1}"#);
        assert!(complete(&one, r#""\ud83d\ude00""#));
        assert!(complete(&one, r#""\uD83D\uDE00""#));
        assert!(complete(&one, r#""\u00e9""#));
        assert!(!complete(&one, r#""\ud83d\ude00x""#));
        for lone in [
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\ud83dx""#,
            r#""\ud83d\n""#,
            r#""\ud83d\u0041""#,
        ] {
            assert!(!complete(&one, lone), "{lone}");
        }
        let two = schema(r#"{"type":"string","minLength":2}"#);
        assert!(!complete(&two, r#""\ud83d\ude00""#));
        assert!(complete(&two, r#""\ud83d\ude00\ud83d\ude00""#));
        assert!(complete(&two, "\"ab\""));
        // Any string (no bounds): the same rules.
        let any = schema(r#"{"type":"string"}"#);
        assert!(!complete(&any, r#""\ud83d""#) && complete(&any, r#""\ud83d\ude00""#));
    }

    /// A schema nesting objects deeper than the output's levels is refused;
    /// every depth it accepts can be completed.
    #[test]
    fn nesting_the_output_cannot_hold_is_refused() {
        let nested = |n: usize| {
            let mut schema = std::string::String::from(r#"{"type":"object"}"#);
            let mut value = std::string::String::from("{}");
            for _ in 1..n {
                schema = std::format!(
                    r#"{{"type":"object","properties":{{"a":{schema}}},"required":["a"]}}"#
                );
                value = std::format!(r#"{{"a":{value}}}"#);
            }
            (schema, value)
        };
        let mut accepted = 0;
        for n in 1..40 {
            let (schema, value) = nested(n);
            match Schema::compile(&parse(schema.as_bytes()).unwrap()) {
                Ok(s) => {
                    assert!(
                        complete(&s, &value),
                        "{n} levels accepted but not completable"
                    );
                    accepted = n;
                }
                Err(e) => assert!(std::format!("{e}").contains("nested deeper"), "{n}: {e}"),
            }
        }
        assert_eq!(accepted, MAX_DEPTH);
    }

    /// A constraint beside `$ref` or beside an optional's `anyOf` would be
    /// dropped with its schema: refused (annotations are fine); an `enum`
    /// or `const` value outside `type` can never validate: left out, and
    /// refused when none is left.
    #[test]
    fn keywords_that_would_be_dropped_or_break_the_type_are_refused() {
        for refused in [
            r##"{"$defs":{"i":{"type":"integer"}},"$ref":"#/$defs/i","maximum":5}"##,
            r#"{"anyOf":[{"type":"integer"},{"type":"null"}],"maximum":5}"#,
            r#"{"type":"string","const":5}"#,
            r#"{"type":"integer","enum":[2.5]}"#,
        ] {
            let v = parse(refused.as_bytes()).unwrap();
            assert!(Schema::compile(&v).is_err(), "{refused}");
        }
        for fine in [
            r##"{"$defs":{"i":{"type":"integer"}},"$ref":"#/$defs/i","title":"I","description":"d"}"##,
            r#"{"anyOf":[{"type":"integer"},{"type":"null"}],"default":null,"title":"N"}"#,
            r#"{"type":"integer","enum":[1,2,3.0]}"#,
            r#"{"type":["string","null"],"enum":["a",null]}"#,
            r#"{"type":"null","const":null}"#,
        ] {
            let v = parse(fine.as_bytes()).unwrap();
            assert!(Schema::compile(&v).is_ok(), "{fine}");
        }
        let s = schema(r#"{"type":"string","enum":["a","b"]}"#);
        assert!(complete(&s, r#""a""#) && !complete(&s, "5"));
        let s = schema(r#"{"type":"integer","enum":[1,2.5]}"#);
        assert!(complete(&s, "1") && !complete(&s, "2.5"));
        let s = schema(r#"{"type":["string","null"],"enum":["a",1,null]}"#);
        assert!(complete(&s, r#""a""#) && complete(&s, "null") && !complete(&s, "1"));
    }

    /// Integer bounds are read from their text exactly: 2^53 + 1 is not
    /// rounded to 2^53; a minimum above 2^63 - 1 (a maximum below -2^63)
    /// leaves no integer the constraint writes and is refused, strict or
    /// not (never dropped); past the other end a bound bounds nothing it
    /// writes.
    #[test]
    fn integer_bounds_are_exact_at_any_magnitude() {
        let s =
            schema(r#"{"type":"integer","minimum":9007199254740993,"maximum":9007199254740993}"#);
        assert!(complete(&s, "9007199254740993"));
        assert!(!complete(&s, "9007199254740992"));
        // 9.2233720368547758e18 is ...800 exactly (f64 would make it 2^63).
        let s = schema(r#"{"type":"integer","exclusiveMinimum":9.2233720368547758e18}"#);
        assert!(complete(&s, "9223372036854775807") && !complete(&s, "9223372036854775800"));
        let s = schema(r#"{"type":"integer","minimum":1e2,"maximum":2.5e2}"#);
        assert!(complete(&s, "100") && complete(&s, "250") && !complete(&s, "99"));
        let s = schema(r#"{"type":"integer","maximum":-0.5,"minimum":-1e400}"#);
        assert!(complete(&s, "-1") && !complete(&s, "0"));
        let s = schema(r#"{"type":"integer","maximum":1e400}"#);
        assert!(complete(&s, "9223372036854775807"));
        for refused in [
            r#"{"type":"integer","minimum":1e19}"#,
            r#"{"type":"integer","minimum":1e308}"#,
            r#"{"type":"integer","minimum":18446744073709551616}"#,
            r#"{"type":"integer","exclusiveMinimum":9223372036854775807}"#,
            r#"{"type":"integer","maximum":-9223372036854775809}"#,
        ] {
            let v = parse(refused.as_bytes()).unwrap();
            assert!(Schema::compile(&v).is_err(), "{refused}");
            assert!(Schema::compile_lenient(&v).is_err(), "{refused}");
        }
        assert_eq!(integer_floor_ceil("-2.5"), Some((-3, -2)));
        assert_eq!(integer_floor_ceil("2.5e1"), Some((25, 25)));
        assert_eq!(integer_floor_ceil("1e-3"), Some((0, 1)));
        assert_eq!(integer_floor_ceil("-0.0"), Some((0, 0)));
        assert_eq!(integer_floor_ceil("12x"), None);
    }

    /// exclusive and fractional forms are made inclusive; a bound on a
    /// number, or beside an enum, is refused.
    #[test]
    fn integer_bounds() {
        let cases = [
            (r#""minimum":10,"maximum":250"#, 10, 250),
            (r#""minimum":-17,"maximum":-3"#, -17, -3),
            (r#""exclusiveMinimum":-5.5,"exclusiveMaximum":7"#, -5, 6),
            (r#""minimum":0"#, 0, i64::MAX),
            (r#""maximum":-1"#, i64::MIN, -1),
            (r#""minimum":99,"maximum":101"#, 99, 101),
        ];
        for (bounds, lo, hi) in cases {
            let s = schema(&std::format!(r#"{{"type":"integer",{bounds}}}"#));
            for v in -300i64..=300 {
                let text = std::format!("{v}");
                let ok = (lo..=hi).contains(&v);
                assert_eq!(complete(&s, &text), ok, "{bounds}: {text}");
                // Each prefix of a value in range is accepted.
                if ok {
                    for end in 1..text.len() {
                        assert!(prefix(&s, &text[..end]), "{bounds}: {}", &text[..end]);
                    }
                }
                // Inside an object, the value ends at the `}`.
                let o = schema(&std::format!(
                    r#"{{"type":"object","properties":{{"n":{{"type":"integer",{bounds}}}}},"required":["n"]}}"#
                ));
                assert_eq!(complete(&o, &std::format!(r#"{{"n":{v}}}"#)), ok, "{text}");
            }
            // No prefix that leads nowhere: a digit past the range.
            assert_eq!(prefix(&s, "-"), lo <= 0, "{bounds}");
            assert_eq!(complete(&s, "-0"), (lo..=hi).contains(&0), "{bounds}");
        }
        let s = schema(r#"{"type":"integer","minimum":10,"maximum":250}"#);
        for bad in ["2509", "3", "1000", "9", "0", "251", "-1"] {
            assert!(!complete(&s, bad), "{bad}");
        }
        assert!(prefix(&s, "3") && prefix(&s, "25") && prefix(&s, "250"));
        for dead in ["251", "2500", "00", "-", "1000"] {
            assert!(!prefix(&s, dead), "{dead}");
        }
        for refused in [
            r#"{"type":"string","maximum":1}"#,
            r#"{"type":"integer","enum":[1,2],"maximum":1}"#,
        ] {
            let e = Schema::compile(&parse(refused.as_bytes()).unwrap());
            assert!(matches!(e, Err(SchemaError::Unsupported(..))), "{refused}");
        }
        for invalid in [
            r#"{"type":"integer","minimum":3,"maximum":2}"#,
            r#"{"type":"integer","exclusiveMinimum":2,"exclusiveMaximum":3}"#,
            r#"{"type":"integer","minimum":"1"}"#,
            r#"{"type":"integer","exclusiveMinimum":true}"#,
        ] {
            let e = Schema::compile(&parse(invalid.as_bytes()).unwrap());
            assert!(matches!(e, Err(SchemaError::Invalid(_))), "{invalid}");
        }
    }

    /// A plain decimal's exact value in units of 10^-24, saturated past
    /// +-10^14 (the test's own reading, for its oracle: another scale and
    /// width than the constraint's).
    fn units_of(text: &str) -> Option<i128> {
        let (neg, t) = match text.strip_prefix('-') {
            Some(t) => (true, t),
            None => (false, text),
        };
        let (int, frac) = t.split_once('.').unwrap_or((t, ""));
        let mut v: i128 = 0;
        for c in int.bytes() {
            v = v * 10 + (c - b'0') as i128;
            if v > 100_000_000_000_000 {
                return Some(if neg { -i128::MAX / 2 } else { i128::MAX / 2 });
            }
        }
        v *= 10i128.pow(24);
        for (i, c) in frac.bytes().enumerate() {
            v += (c - b'0') as i128 * 10i128.pow(23 - i as u32);
        }
        Some(if neg { -v } else { v })
    }

    /// Number bounds: a decimal is a complete output exactly when its exact
    /// value is in range (every decimal of up to 3 places in [-20, 20], and
    /// chosen edges), a number with bounds is written without an exponent,
    /// and no accepted prefix leads nowhere (random walks over digits, `-`
    /// and `.` always find a way to end, and each end is in range).
    #[test]
    fn number_bounds() {
        // The oracle's own exact reading of the bounds.
        let unit = |x: &str| units_of(x).unwrap();
        let cases = [
            (
                r#""minimum":0.5,"maximum":2.5"#,
                Some((unit("0.5"), false)),
                Some((unit("2.5"), false)),
            ),
            (
                r#""exclusiveMinimum":0,"exclusiveMaximum":1"#,
                Some((0, true)),
                Some((unit("1"), true)),
            ),
            (
                r#""minimum":-1.25,"exclusiveMaximum":-0.75"#,
                Some((unit("-1.25"), false)),
                Some((unit("-0.75"), true)),
            ),
            (r#""exclusiveMinimum":-3"#, Some((unit("-3"), true)), None),
            (
                r#""maximum":100,"exclusiveMinimum":99.99"#,
                Some((unit("99.99"), true)),
                Some((unit("100"), false)),
            ),
            (
                r#""minimum":1e-3,"maximum":2E-3"#,
                Some((unit("0.001"), false)),
                Some((unit("0.002"), false)),
            ),
            (
                r#""minimum":0.1,"maximum":0.1"#,
                Some((unit("0.1"), false)),
                Some((unit("0.1"), false)),
            ),
            (
                r#""exclusiveMinimum":5,"maximum":5.000001,"minimum":4"#,
                Some((unit("5"), true)),
                Some((unit("5.000001"), false)),
            ),
            (
                r#""minimum":-1e6,"exclusiveMaximum":0.0000000001"#,
                Some((unit("-1000000"), false)),
                Some((unit("0.0000000001"), true)),
            ),
            (r#""maximum":-0.0"#, None, Some((0, false))),
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for (bounds, lo, hi) in cases {
            let s = schema(&std::format!(r#"{{"type":"number",{bounds}}}"#));
            let in_range = |text: &str| {
                let Some(v) = units_of(text) else {
                    return false;
                };
                lo.is_none_or(|(l, open): (i128, bool)| v > l || (v == l && !open))
                    && hi.is_none_or(|(h, open): (i128, bool)| v < h || (v == h && !open))
            };
            for k in -20_000i64..=20_000 {
                let text = std::format!(
                    "{}{}.{:03}",
                    if k < 0 { "-" } else { "" },
                    k.abs() / 1000,
                    k.abs() % 1000
                );
                assert_eq!(complete(&s, &text), in_range(&text), "{bounds}: {text}");
                let short = text.trim_end_matches('0').trim_end_matches('.');
                assert_eq!(complete(&s, short), in_range(short), "{bounds}: {short}");
            }
            for edge in [
                "0.499999999999",
                "0.4999999999999",
                "2.500000000001",
                "-0",
                "5.0000009999",
                "5.000000000001",
                "99.990000000001",
                "99.9900000000001",
                "0.0010",
                "100.000",
                "0.00000000001",
                "-999999.999999999999",
                "-1000000.00000000001",
                "12345678901234567",
                "123456789012345678",
            ] {
                // At most 17 significant digits, 12 after the point.
                let digits = edge.trim_start_matches('-').replace('.', "");
                let places = edge.split_once('.').map_or(0, |(_, f)| f.len());
                let ok = digits.trim_start_matches('0').len() <= 17 && places <= 12;
                assert_eq!(complete(&s, edge), ok && in_range(edge), "{bounds}: {edge}");
            }
            assert!(
                !prefix(&s, "1e") && !prefix(&s, "0E"),
                "{bounds}: an exponent"
            );
            // Random walks: never stuck, every end in range.
            for _ in 0..3000 {
                let mut m = Matcher::new(&s);
                let mut text = std::string::String::new();
                loop {
                    let next = takes(&s, &m, b"-0123456789.");
                    let end = m.can_end(&s);
                    assert!(end || !next.is_empty(), "{bounds}: stuck after {text:?}");
                    if next.is_empty() || (end && rand(4) == 0) {
                        break;
                    }
                    let b = next[rand(next.len())];
                    assert!(m.advance(&s, b));
                    text.push(b as char);
                }
                assert!(in_range(&text), "{bounds}: {text} out of range");
            }
        }
        // Schemas: a bound of more than 15 digits, past 1e6 or finer than
        // 1e-10 is refused strictly and left out leniently; no number
        // between is invalid.
        for refused in [
            r#"{"type":"number","minimum":0.1234567890123456}"#,
            r#"{"type":"number","maximum":1e15}"#,
            r#"{"type":"number","maximum":1000000.5}"#,
            r#"{"type":"number","minimum":-1e7}"#,
            r#"{"type":"number","maximum":1e-11}"#,
        ] {
            let v = parse(refused.as_bytes()).unwrap();
            assert!(
                matches!(Schema::compile(&v), Err(SchemaError::Unsupported(..))),
                "{refused}"
            );
            let s = Schema::compile_lenient(&v).unwrap();
            assert!(complete(&s, "12345678.5e3"), "{refused}");
        }
        for invalid in [
            r#"{"type":"number","minimum":3,"maximum":2}"#,
            r#"{"type":"number","exclusiveMinimum":2,"maximum":2}"#,
        ] {
            let e = Schema::compile(&parse(invalid.as_bytes()).unwrap());
            assert!(matches!(e, Err(SchemaError::Invalid(_))), "{invalid}");
        }
    }

    /// Best effort (no `strict`): a keyword the constraint cannot enforce
    /// is left out and the rest still holds; strictly it is refused with
    /// the place of its schema.
    #[test]
    fn lenient_schemas_enforce_the_rest() {
        let text = r#"{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"]},"at":{"type":"string","format":"ipv6"},"n":{"anyOf":[{"type":"integer"},{"type":"number"}]},"k":{"type":"integer","minimum":10}},"required":["unit","at","n","k"],"additionalProperties":false}"#;
        let v = parse(text.as_bytes()).unwrap();
        let e = Schema::compile(&v).unwrap_err();
        let at = e.offset().unwrap();
        assert!(
            text[at..].starts_with(r#"{"type":"string","format""#),
            "{e}"
        );
        let s = Schema::compile_lenient(&v).unwrap();
        // `n`'s union begins alike: its first schema, `integer`, is followed.
        assert!(complete(&s, r#"{"unit":"c","at":"x","n":15,"k":10}"#));
        assert!(complete(&s, r#"{"unit":"f","at":"","n":-2,"k":99}"#));
        assert!(!complete(&s, r#"{"unit":"f","at":"","n":"any","k":99}"#));
        assert!(!complete(&s, r#"{"unit":"f","at":"","n":1.5,"k":99}"#));
        assert!(!complete(&s, r#"{"unit":"kelvin","at":"x","n":1,"k":10}"#));
        assert!(!complete(&s, r#"{"unit":"c","at":"x","n":1,"k":3}"#));
        assert!(!complete(&s, r#"{"unit":"c","at":1,"n":1,"k":10}"#));
        // A call's arguments stay an object where the parameters give
        // nothing to follow.
        let f = parse(br#"{"anyOf":[{"type":"object"},{"type":"object"}]}"#).unwrap();
        let call = Schema::compile_call(&[("f", f)]).unwrap();
        assert!(complete(&call, r#"{"name":"f","arguments":{"a":1}}"#));
        assert!(!complete(&call, r#"{"name":"f","arguments":3}"#));
    }

    /// `minLength` and `maxLength` count characters: a multi-byte UTF-8
    /// character and an escape are one each.
    #[test]
    fn string_lengths() {
        let s = schema(
            r#"{"type":"object","properties":{"code":{"type":"string","minLength":2,"maxLength":3}},"required":["code"]}"#,
        );
        for good in [
            r#"{"code":"ab"}"#,
            r#"{"code":"abc"}"#,
            r#"{"code":"éé"}"#,
            r#"{"code":"a\n\u00e9"}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"code":""}"#,
            r#"{"code":"a"}"#,
            r#"{"code":"abcd"}"#,
            r#"{"code":"ééé\n"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        // A bounded string takes the plain tokens of as many characters
        // as it has room for.
        let mut m = Matcher::new(&s);
        for b in br#"{"code":"a"#.iter() {
            assert!(m.advance(&s, *b));
        }
        assert_eq!(m.plain_fit(&s), PlainFit::Chars(2));
        let free = schema(r#"{"type":"string"}"#);
        let mut m = Matcher::new(&free);
        assert_eq!(m.plain_fit(&free), PlainFit::Walk);
        assert!(m.advance(&free, b'"') && m.plain_fit(&free) == PlainFit::All);
        let v = parse(br#"{"type":"string","minLength":3,"maxLength":2}"#).unwrap();
        assert!(Schema::compile(&v).is_err());
    }

    /// What pydantic writes: `$defs` with `$ref`s, and `Optional` fields as
    /// `anyOf` of a schema and null (with `default` and `title` beside).
    #[test]
    fn refs_into_defs_and_optionals() {
        let s = schema(
            r##"{"$defs":{"Unit":{"enum":["c","f"],"title":"Unit"},
                 "Place":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
               "type":"object","properties":{
                 "unit":{"$ref":"#/$defs/Unit"},
                 "place":{"$ref":"#/$defs/Place"},
                 "note":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Note"},
                 "pick":{"anyOf":[{"$ref":"#/$defs/Unit"},{"type":"null"}]}},
               "required":["unit","place"]}"##,
        );
        for good in [
            r#"{"unit":"c","place":{"city":"Oslo"}}"#,
            r#"{"unit":"f","place":{"city":"Oslo"},"note":null,"pick":null}"#,
            r#"{"unit":"f","place":{"city":"Oslo"},"note":"hi","pick":"c"}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"unit":"k","place":{"city":"Oslo"}}"#,
            r#"{"unit":null,"place":{"city":"Oslo"}}"#,
            r#"{"unit":"c","place":{}}"#,
            r#"{"unit":"c","place":{"city":"Oslo"},"note":3}"#,
            r#"{"unit":"c","place":{"city":"Oslo"},"pick":"x"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        for refused in [
            r##"{"$ref":"#/$defs/Missing"}"##,
            r##"{"$ref":"http://x/y.json"}"##,
            r#"{"anyOf":[{"type":"string"}]}"#,
        ] {
            let v = parse(refused.as_bytes()).unwrap();
            assert!(Schema::compile(&v).is_err(), "{refused}");
        }
        // A reference cycle runs out of nodes instead of looping.
        let v = parse(
            br##"{"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}}}},"$ref":"#/$defs/N"}"##,
        )
        .unwrap();
        assert!(matches!(Schema::compile(&v), Err(SchemaError::TooLarge(_))));
    }

    /// `anyOf` of schemas that begin differently (pydantic's `Union[int,
    /// str]`, `Union[List[str], Model, None]`): the value's first byte picks
    /// the schema, which then holds to the end; schemas that can begin alike
    /// are refused by name.
    /// A string's `pattern` in the subset is its automaton (unanchored
    /// where the pattern is); outside it, or beside a length, refused.
    #[test]
    fn patterns_are_enforced_or_refused() {
        let s = schema(
            r#"{"type":"object","properties":{"c":{"type":"string","pattern":"^[A-Z]{2}-\\d+$"},"w":{"pattern":"ab"}},"additionalProperties":false}"#,
        );
        assert!(complete(&s, r#"{"c":"AB-12","w":"xaby"}"#));
        for bad in [
            r#"{"c":"AB-"}"#,
            r#"{"c":"ab-1"}"#,
            r#"{"w":"ba"}"#,
            r#"{"c":"AB-1\u0031"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        assert!(!prefix(&s, r#"{"c":"A1"#) && prefix(&s, r#"{"c":"AB-9"#));
        // Beside lengths: a byte only while a value of an allowed length
        // can still end (no prefix is a dead end).
        let s = schema(r#"{"type":"string","pattern":"^[0-9a-f]*$","minLength":3,"maxLength":3}"#);
        assert!(complete(&s, r#""a0f""#) && !complete(&s, r#""a0""#) && !prefix(&s, r#""a0f1"#));
        let s = schema(r#"{"type":"string","pattern":"^[a-z]+@x$","maxLength":4}"#);
        assert!(complete(&s, r#""ab@x""#) && prefix(&s, r#""ab"#) && !prefix(&s, r#""abc"#));
        let s = schema(r#"{"type":"string","pattern":"[A-z]+","minLength":3,"maxLength":5}"#);
        assert!(
            complete(&s, r#""1a2""#)
                && !complete(&s, r#""123""#)
                && !prefix(&s, r#""12345"#)
                && prefix(&s, r#""1234"#)
        );
        // A counted atom's own lengths join minLength and maxLength.
        let s = schema(r#"{"type":"string","pattern":"^[a-z]{2,400}$","minLength":3}"#);
        assert!(complete(&s, r#""abc""#) && !complete(&s, r#""ab""#) && !complete(&s, r#""ab1""#));
        assert!(!prefix(&s, &std::format!("\"{}", "a".repeat(401))));
        for text in [
            // Lengths with a gap (2, 4, ...), and none within the bounds.
            r#"{"type":"string","pattern":"^(aa)*$","maxLength":3}"#,
            r#"{"type":"string","pattern":"^a{5}$","maxLength":3}"#,
            r#"{"type":"string","pattern":"(?!a)"}"#,
        ] {
            assert!(
                Schema::compile(&parse(text.as_bytes()).unwrap()).is_err(),
                "{text}"
            );
        }
        let text = br#"{"type":"string","pattern":"^(aa)*$","maxLength":3}"#;
        let s = Schema::compile_lenient(&parse(text).unwrap()).unwrap();
        assert!(complete(&s, r#""xyz""#) && !complete(&s, r#""wxyz""#) && !complete(&s, "1"));
    }

    /// A string's `format` (date, time, date-time, uuid, ipv4, email) is
    /// its automaton; a name JSON Schema does not define is an annotation;
    /// one it defines and the constraint does not enforce is refused.
    #[test]
    fn formats_are_enforced_or_refused() {
        let s = schema(
            r#"{"type":"object","properties":{"d":{"type":"string","format":"date"},"u":{"format":"uuid"},"p":{"type":"string","format":"path"}},"additionalProperties":false}"#,
        );
        assert!(complete(
            &s,
            r#"{"d":"2024-02-29","u":"123e4567-e89b-12d3-a456-426614174000","p":"a b"}"#
        ));
        for bad in [
            r#"{"d":"2023-02-29"}"#,
            r#"{"d":"2024-02-29 "}"#,
            r#"{"u":"x"}"#,
            r#"{"d":"\u0032"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        assert!(!prefix(&s, r#"{"d":"2024-3"#) && prefix(&s, r#"{"d":"2024-1"#));
        for text in [
            r#"{"type":"string","format":"ipv6"}"#,
            r#"{"type":"string","format":"date","maxLength":10}"#,
        ] {
            assert!(
                Schema::compile(&parse(text.as_bytes()).unwrap()).is_err(),
                "{text}"
            );
        }
        // Beside a length: a byte only while an email can still end
        // within it.
        let s = schema(r#"{"type":"string","format":"email","minLength":6,"maxLength":11}"#);
        assert!(complete(&s, r#""ab@c.de""#) && !complete(&s, r#""a@b.c""#));
        assert!(prefix(&s, r#""abcdefg@"#) && !prefix(&s, r#""abcdefgh@"#));
        assert!(complete(&s, r#""abcdef@g.h""#) && !prefix(&s, r#""abcdef@ghi"#));
        // Best effort beside a length no value fits: the format left out,
        // the string and its length kept.
        let text = br#"{"type":"string","format":"email","maxLength":4}"#;
        let s = Schema::compile_lenient(&parse(text).unwrap()).unwrap();
        assert!(complete(&s, r#""abcd""#) && !complete(&s, r#""abcde""#) && !complete(&s, "[1]"));
        assert_eq!(
            s.dropped().map(|d| d.0).collect::<Vec<_>>(),
            std::vec!["format"]
        );
    }

    /// An enum of any size: its values sorted, the candidates a run;
    /// prefixes of one another (strings end at their quote, numbers at
    /// the next byte).
    #[test]
    fn large_enums_and_prefixes() {
        let values: Vec<std::string::String> = (0..300).map(|i| std::format!("\"v{i}\"")).collect();
        let text = std::format!(r#"{{"enum":[{},"v",1,12,-3,true,null]}}"#, values.join(","));
        let s = schema(&text);
        for good in [
            r#""v0""#,
            r#""v299""#,
            r#""v""#,
            "1",
            "12",
            "-3",
            "true",
            "null",
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#""v300""#,
            r#""w""#,
            "123",
            "-",
            "2",
            "false",
            r#""v2990""#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        let obj = schema(&std::format!(
            r#"{{"type":"object","properties":{{"k":{text}}}}}"#
        ));
        assert!(complete(&obj, r#"{"k":12}"#) && complete(&obj, r#"{"k":1 }"#));
        assert!(!prefix(&obj, r#"{"k":13"#));
        // One definition of 300 values referenced from 40 places: one run
        // of values, shared (12,000 would not fit the table).
        let props: Vec<std::string::String> = (0..40)
            .map(|i| std::format!(r##""p{i}":{{"$ref":"#/$defs/e"}}"##))
            .collect();
        let text = std::format!(
            r#"{{"$defs":{{"e":{{"enum":[{}]}}}},"properties":{{{}}}}}"#,
            values.join(","),
            props.join(",")
        );
        let shared = schema(&text);
        assert!(complete(&shared, r#"{"p0":"v7","p39":"v299"}"#));
        assert!(!complete(&shared, r#"{"p3":"v300"}"#));
    }

    /// Random walks through objects with patterns, property counts and
    /// properties that take no value: at every prefix taken some byte
    /// still goes on, or the output can end (no dead end).
    #[test]
    fn no_prefix_of_an_object_is_a_dead_end() {
        let schemas = [
            r#"{"properties":{"ab":{"type":"integer"},"x":{"type":"string","maxLength":2}},"patternProperties":{"^a[0-9]$":{"type":"boolean"}},"additionalProperties":false,"required":["x"],"maxProperties":3}"#,
            r#"{"properties":{"ab":{"type":"integer"},"b":{"type":"null","enum":[1]}},"patternProperties":{"^c+$":{"type":"null"}},"additionalProperties":{"type":"integer","minimum":0,"maximum":3},"minProperties":2,"maxProperties":4}"#,
            r#"{"properties":{"a":{"type":"string","format":"uri","maxLength":6},"b":{"type":"object","enum":[1]}},"additionalProperties":false,"minProperties":1}"#,
            r#"{"patternProperties":{"^[ab]{1,3}$":{"type":"array","items":{"enum":["a","ab"]},"maxItems":2}},"additionalProperties":false,"maxProperties":2}"#,
            r#"{"properties":{"a":{"type":"integer"},"b":{"type":"null"},"c":{"enum":[1],"type":"string"}},"additionalProperties":false,"dependencies":{"a":["b"],"b":["a"],"bb":["c"]},"dependentRequired":{"d":["a"]}}"#,
            r#"{"properties":{"a":{"type":"integer"}},"patternProperties":{"^a.$":{"type":"null"}},"additionalProperties":false,"dependencies":{"a":["ab","a"],"ab":["ac"],"x":["a"]},"minProperties":1}"#,
        ];
        let alphabet: Vec<u8> = (0x20..0x7f).collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for text in schemas {
            let s = schema(text);
            for _ in 0..400 {
                let mut m = Matcher::new(&s);
                let mut out = std::vec::Vec::new();
                for _ in 0..80 {
                    let next = takes(&s, &m, &alphabet);
                    assert!(
                        !next.is_empty() || m.can_end(&s),
                        "{text}: dead end after {}",
                        std::string::String::from_utf8_lossy(&out)
                    );
                    if next.is_empty() {
                        break;
                    }
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let b = next[seed as usize % next.len()];
                    assert!(m.advance(&s, b));
                    out.push(b);
                }
            }
        }
    }

    /// Mask keys: inside a string of no `maxLength` (plain, a pattern's or
    /// a format's) states that differ only in characters past
    /// `minLength` share a key, and such states take the same bytes
    /// (every prefix of random strings); with `maxLength`, or below
    /// `minLength`, the count stays in the key.
    #[test]
    fn mask_keys_forget_only_the_characters_nothing_depends_on() {
        let at = |s: &Schema, out: &str| {
            let mut m = Matcher::new(s);
            assert!(out.bytes().all(|b| m.advance(s, b)), "{out}");
            m
        };
        let alphabet: Vec<u8> = (0x20..0x7f).collect();
        for (text, same, apart) in [
            (
                r#"{"type":"string","pattern":"^[a-z]([a-z0-9_-]*[a-z])?$"}"#,
                ["\"ab", "\"abcd"],
                ["\"a", "\"a1"],
            ),
            (
                r#"{"type":"string","pattern":"^[a-z]+$","minLength":3}"#,
                ["\"abc", "\"abcdef"],
                ["\"ab", "\"abc"],
            ),
            (
                r#"{"type":"string","pattern":"^[a-z]+$","maxLength":9}"#,
                ["\"ab", "\"ab"],
                ["\"ab", "\"abc"],
            ),
            (
                r#"{"type":"string","format":"uri"}"#,
                ["\"http://a/b", "\"http://a/bcd"],
                ["\"http://a/b", "\"http://a/b?"],
            ),
            (
                r#"{"type":"string","format":"uri","minLength":12}"#,
                ["\"http://a/bcde", "\"http://a/bcdef"],
                ["\"http://a/b", "\"http://a/bc"],
            ),
        ] {
            let s = schema(text);
            let key = |out: &str| at(&s, out).mask_key(&s);
            assert!(key(same[0]).same_state(&key(same[1])), "{text}: {same:?}");
            assert!(
                !key(apart[0]).same_state(&key(apart[1])),
                "{text}: {apart:?}"
            );
            // Random strings: states of equal keys take the same bytes.
            let mut seen: Vec<(Matcher, Vec<u8>)> = Vec::new();
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..60 {
                let mut m = at(&s, "\"");
                for _ in 0..24 {
                    let next = takes(&s, &m, &alphabet);
                    let k = m.mask_key(&s);
                    match seen.iter().find(|(other, _)| other.same_state(&k)) {
                        Some((_, bytes)) => assert_eq!(bytes, &next, "{text}"),
                        None => seen.push((k, next.clone())),
                    }
                    let inside: Vec<u8> = next.into_iter().filter(|&b| b != b'"').collect();
                    if inside.is_empty() {
                        break;
                    }
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    assert!(m.advance(&s, inside[seed as usize % inside.len()]));
                }
            }
        }
    }

    /// `dependencies` listing names (and `dependentRequired`): once a key
    /// is written, `}` waits for the names it lists (through chains of
    /// them); a name beside the properties is one more key the object
    /// may have; a key that requires one no object can have is refused.
    /// Its form with schemas, and names beside `maxProperties`, are
    /// refused (left out without strict).
    #[test]
    fn dependencies_require_the_names_they_list() {
        let s = schema(
            r#"{"type":"object","properties":{"card":{"type":"string"},"addr":{"type":"string"}},"dependencies":{"card":["addr","zip"],"zip":["city"]}}"#,
        );
        for good in [
            "{}",
            r#"{"addr":"x"}"#,
            r#"{"card":"1","addr":"x","zip":1,"city":2}"#,
            r#"{"city":null,"zip":1,"addr":"x","card":"1"}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"card":"1"}"#,
            r#"{"card":"1","addr":"x"}"#,
            r#"{"card":"1","addr":"x","zip":1}"#,
            r#"{"zip":1}"#,
        ] {
            assert!(prefix(&s, &bad[..bad.len() - 1]), "{bad}");
            assert!(!complete(&s, bad), "{bad}");
        }
        let closed = schema(
            r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":false,"dependentRequired":{"a":["b"],"b":["x"],"y":["a"]}}"#,
        );
        assert!(complete(&closed, "{}") && !prefix(&closed, r#"{"b""#));
        assert!(!prefix(&closed, r#"{"a""#), "a needs b, which needs x");
        for (text, err) in [
            (
                r#"{"type":"object","dependencies":{"a":{"required":["b"]}}}"#,
                "unsupported JSON schema keyword 'dependencies'",
            ),
            (
                r#"{"type":"object","dependencies":{"a":["b"]},"maxProperties":3}"#,
                "unsupported JSON schema keyword 'dependencies (beside maxProperties)'",
            ),
            (
                r#"{"type":"object","properties":{"a":{}},"additionalProperties":false,"required":["a"],"dependencies":{"a":["b"]}}"#,
                "invalid JSON schema: a required property that depends on a name no key can be",
            ),
        ] {
            let e = Schema::compile(&parse(text.as_bytes()).unwrap()).unwrap_err();
            assert_eq!(std::format!("{e}"), err, "{text}");
        }
        let lenient = Schema::compile_lenient(
            &parse(br#"{"type":"object","dependencies":{"a":["b"]},"maxProperties":3}"#).unwrap(),
        )
        .unwrap();
        assert!(complete(&lenient, r#"{"a":1}"#) && lenient.dropped().count() == 1);
    }

    /// A property whose `enum` has no value of its `type` can never be
    /// written: optional, its key is refused (a closed object does not
    /// offer it, so no prefix is a dead end); required, or where a value
    /// must be written, the schema is refused.
    #[test]
    fn a_property_that_takes_no_value_is_left_out() {
        let closed = schema(
            r#"{"type":"object","properties":{"b":{"type":"object","enum":["x"]},"a":{"type":"integer"}},"additionalProperties":false}"#,
        );
        assert!(complete(&closed, r#"{"a":1}"#) && complete(&closed, "{}"));
        assert!(!prefix(&closed, r#"{"b"#) && !prefix(&closed, r#"{"a":1,"#));
        let open = schema(
            r#"{"type":"object","properties":{"b":{"type":"string","const":1}},"additionalProperties":{"enum":[1],"type":"string"},"patternProperties":{"^z":{"type":"integer"}}}"#,
        );
        assert!(complete(&open, r#"{"z1":2}"#) && !complete(&open, r#"{"b":1}"#));
        assert!(!complete(&open, r#"{"bc":1}"#) && !prefix(&open, r#"{"b":"#));
        let arrays = schema(r#"{"type":"array","items":{"type":"null","enum":[0]}}"#);
        assert!(complete(&arrays, "[]") && !prefix(&arrays, "[0"));
        for refused in [
            r#"{"type":"object","properties":{"b":{"type":"object","enum":["x"]}},"required":["b"]}"#,
            r#"{"type":"array","items":{"type":"null","enum":[0]},"minItems":1}"#,
            r#"{"anyOf":[{"type":"string","enum":[1]},{"type":"integer","enum":["a"]}]}"#,
            r#"{"type":"boolean","const":"yes"}"#,
        ] {
            assert!(
                Schema::compile(&parse(refused.as_bytes()).unwrap()).is_err(),
                "{refused}"
            );
        }
    }

    /// Beside `$ref`, `anyOf` and `oneOf` (and `allOf` of one schema, which
    /// is that schema): annotations and unknown keywords are ignored; `type`, `minItems`/`maxItems` and
    /// `minLength`/`maxLength` narrow the schema (both apply); any other
    /// constraint is refused.
    #[test]
    fn keywords_beside_references_and_unions() {
        let s = schema(
            r##"{"$defs":{"list":{"type":"array","items":{"type":"string"},"maxItems":5},"s":{"type":"string"}},
            "type":"object","properties":{
            "a":{"$ref":"#/$defs/list","maxItems":2,"minItems":1,"propertyOrder":3,"x-y":{}},
            "b":{"$ref":"#/$defs/s","maxLength":2,"type":"string"},
            "c":{"type":"integer","anyOf":[{"type":"integer"},{"type":"null"}],"readOnly":true},
            "d":{"type":"object","oneOf":[{"type":"object","properties":{"x":{}},"required":["x"],"additionalProperties":false},{"properties":{"y":{}},"required":["y"],"additionalProperties":false}]},
            "e":{"type":"string","anyOf":[{"enum":["p","q"]},{"type":"null"}]},
            "f":{"allOf":[{"$ref":"#/$defs/list"}],"minItems":2,"title":"F"}}}"##,
        );
        for good in [
            r#"{"a":["x","y"],"b":"ab","c":3,"d":{"y":1},"e":"q"}"#,
            r#"{"d":{"x":[]},"f":["x","y","z"]}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"a":["x","y","z"]}"#,
            r#"{"a":[]}"#,
            r#"{"f":["x"]}"#,
            r#"{"f":["x",1]}"#,
            r#"{"b":"abc"}"#,
            r#"{"c":null}"#,
            r#"{"d":{"x":1,"y":2}}"#,
            r#"{"e":null}"#,
            r#"{"e":"r"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        for refused in [
            r##"{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","type":"integer"}"##,
            r##"{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxItems":1}"##,
            r##"{"$defs":{"s":{"type":"string","format":"date"}},"$ref":"#/$defs/s","maxLength":1}"##,
            r#"{"type":"string","oneOf":[{"type":"string"},{"type":"integer"}]}"#,
            r#"{"anyOf":[{"type":"string"},{"type":"integer"}],"pattern":"a"}"#,
            r#"{"anyOf":[{"type":"integer"},{"type":"null"}],"minimum":1}"#,
            r#"{"allOf":[{"type":"integer"},{"minimum":1}]}"#,
            r#"{"allOf":[{"type":"integer"}],"minimum":1}"#,
        ] {
            assert!(
                Schema::compile(&parse(refused.as_bytes()).unwrap()).is_err(),
                "{refused}"
            );
        }
    }

    /// `patternProperties` (one pattern): a key it matches takes its
    /// schema, any other `additionalProperties`'; a property's name is
    /// that property (refused where the pattern matches it too, unless its
    /// schema is any value); a required name it matches is one more key of
    /// its schema.
    #[test]
    fn pattern_properties() {
        let s = schema(
            r#"{"type":"object","properties":{"author":{"type":"string"}},"patternProperties":{"^c[1-9]$":{"type":"integer"}},"additionalProperties":false,"required":["c1"]}"#,
        );
        for good in [
            r#"{"c1":1}"#,
            r#"{"author":"a","c2":3,"c1":4}"#,
            r#"{"c2":1,"c1":2}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"c1":"x"}"#,
            r#"{"c0":1,"c1":1}"#,
            r#"{"c12":1,"c1":1}"#,
            r#"{"a":1,"c1":1}"#,
            r#"{"author":1,"c1":1}"#,
            r#"{"c2":1}"#,
            r#"{"\u0063\u0031":1}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        // Open: other keys take `additionalProperties` (here any value);
        // a key sharing a property's first bytes goes on with the pattern.
        let s = schema(
            r#"{"type":"object","properties":{"ab":{"type":"boolean"}},"patternProperties":{"^a[0-9]+$":{"type":"string"}},"additionalProperties":{"type":"null"}}"#,
        );
        for good in [
            r#"{"ab":true,"a1":"x","zz":null}"#,
            r#"{"a":null,"a12":"y","abc":null}"#,
            r#"{"a1x":null}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        // While the pattern may match, a key is plain ASCII (its automaton
        // reads no escapes): the constraint stays on the safe side.
        assert!(!prefix(&s, r#"{"\u0061"#) && !prefix(&s, "{\"\u{e9}"));
        for bad in [
            r#"{"a1":null}"#,
            r#"{"zz":"x"}"#,
            r#"{"ab":null}"#,
            r#"{"a":"x"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        // No properties: every key is the pattern's, or refused.
        let s = schema(
            r#"{"patternProperties":{"[a-zA-Z]+":{"type":"array","items":{"type":"string"},"minItems":1}},"additionalProperties":false}"#,
        );
        assert!(complete(&s, r#"{"e1":["x"],"Zz":["y"]}"#));
        assert!(!complete(&s, r#"{"12":["x"]}"#) && !complete(&s, r#"{"e":[]}"#));
        assert!(!prefix(&s, r#"{"1\"#) && prefix(&s, r#"{"1a"#));
        // Only the pattern's keys beside the properties: a property written
        // already is not offered again (its name could be neither ended
        // nor gone on from: a dead end the real 0.5B model walked into).
        let s = schema(
            r#"{"properties":{"homepage":{"type":"string"}},"patternProperties":{"^x-[a-z]+$":{"type":"integer"}},"additionalProperties":false}"#,
        );
        assert!(complete(&s, r#"{"homepage":"h","x-a":1}"#));
        assert!(!prefix(&s, r#"{"homepage":"h","h"#) && prefix(&s, r#"{"homepage":"h","x"#));
        for refused in [
            r#"{"patternProperties":{"^a":{"type":"string"},"^b":{"type":"string"}}}"#,
            r#"{"properties":{"ax":{"type":"string"}},"patternProperties":{"^a":{"type":"string"}}}"#,
            r#"{"patternProperties":{"(?=a)":{"type":"string"}}}"#,
        ] {
            let e = Schema::compile(&parse(refused.as_bytes()).unwrap()).unwrap_err();
            assert!(
                std::format!("{e}").contains("patternProperties"),
                "{refused}: {e}"
            );
        }
        // Any value for the matching keys: a property's name may match.
        let s = schema(
            r#"{"properties":{"ax":{"type":"string"}},"patternProperties":{"^a":{}},"additionalProperties":false}"#,
        );
        assert!(complete(&s, r#"{"ax":"s","ay":[1]}"#) && !complete(&s, r#"{"ax":1}"#));
    }

    /// Beside lengths, every prefix a pattern or a format takes can still
    /// be completed within them (walked over a small alphabet: every
    /// prefix reached has a completion).
    #[test]
    fn no_prefix_is_a_dead_end_beside_lengths() {
        fn completes(s: &Schema, m: &Matcher, depth: usize) -> bool {
            let mut scratch = m.clone();
            if scratch.advance(s, b'"') && scratch.can_end(s) {
                return true;
            }
            depth > 0
                && b"a0Z-@.:/%_ ".iter().any(|&b| {
                    let mut next = m.clone();
                    next.advance(s, b) && completes(s, &next, depth - 1)
                })
        }
        fn walk(s: &Schema, m: &Matcher, depth: usize, text: &mut Vec<u8>) {
            assert!(
                completes(s, m, 8),
                "{}",
                std::string::String::from_utf8_lossy(text)
            );
            if depth == 0 {
                return;
            }
            for &b in b"a0Z-@.:/%_ " {
                let mut next = m.clone();
                if next.advance(s, b) {
                    text.push(b);
                    walk(s, &next, depth - 1, text);
                    text.pop();
                }
            }
        }
        for text in [
            r#"{"type":"string","pattern":"^[a-z]+@[a-z0-9]$","maxLength":4}"#,
            r#"{"type":"string","pattern":"^(a|0Z)+-?$","minLength":3,"maxLength":4}"#,
            r#"{"type":"string","pattern":"a0","minLength":4,"maxLength":5}"#,
            r#"{"type":"string","pattern":"^[\\w-]([\\w/-]*[\\w-])?$","maxLength":3}"#,
            r#"{"type":"string","format":"email","minLength":2,"maxLength":7}"#,
            r#"{"type":"string","format":"hostname","minLength":3,"maxLength":4}"#,
            r#"{"type":"string","format":"uri","maxLength":5}"#,
            r#"{"type":"string","format":"uri-reference","minLength":1,"maxLength":3}"#,
        ] {
            let s = schema(text);
            let mut m = Matcher::new(&s);
            assert!(m.advance(&s, b'"'), "{text}");
            walk(&s, &m, 6, &mut Vec::new());
        }
    }

    /// A union of closed objects with different property names is keyed
    /// on the first key: that key's branch holds for the rest.
    #[test]
    fn unions_of_closed_objects_are_keyed_on_their_first_key() {
        let s = schema(
            r#"{"anyOf":[{"type":"object","properties":{"sum":{"type":"integer"},"n":{"type":"integer"}},"required":["sum"],"additionalProperties":false},
                         {"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}]}"#,
        );
        for good in [r#"{"sum":1}"#, r#"{"n":2,"sum":1}"#, r#"{"name":"x"}"#] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            "{}",
            r#"{"sum":1,"name":"x"}"#,
            r#"{"n":2}"#,
            r#"{"name":1}"#,
            r#"{"x":1}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        // A branch that needs no key takes `{}`; names shared: refused.
        let s = schema(
            r#"{"anyOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},{"type":"object","properties":{"b":{}},"required":["b"],"additionalProperties":false}]}"#,
        );
        assert!(complete(&s, "{}") && complete(&s, r#"{"b":1}"#));
        let text = r#"{"anyOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},{"type":"object","properties":{"a":{}},"additionalProperties":false}]}"#;
        assert!(Schema::compile(&parse(text.as_bytes()).unwrap()).is_err());
    }

    /// A `type` list of several types is the union of the schema with each
    /// (the other keywords hold where they apply).
    #[test]
    fn type_lists_are_unions() {
        let s = schema(r#"{"type":["string","integer"],"minimum":3,"maxLength":2}"#);
        for good in [r#""ab""#, "3", "40"] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in ["2", r#""abc""#, "null", "3.5"] {
            assert!(!complete(&s, bad), "{bad}");
        }
        let s = schema(
            r#"{"type":["object","string","null"],"properties":{"a":{"type":"integer"}},"required":["a"]}"#,
        );
        for good in [r#"{"a":1}"#, r#""x""#, "null"] {
            assert!(complete(&s, good), "{good}");
        }
        assert!(!complete(&s, r#"{"a":"x"}"#) && !complete(&s, "{}"));
        let text = r#"{"type":["integer","number"]}"#;
        assert!(Schema::compile(&parse(text.as_bytes()).unwrap()).is_err());
    }

    /// `oneOf` whose schemas' `type`s begin apart is their union (at most
    /// one holds); one whose schemas could both hold a value is refused.
    #[test]
    fn one_of_schemas_that_begin_apart() {
        let s = schema(
            r#"{"oneOf":[{"type":"string","maxLength":2},{"type":["integer","null"],"minimum":3},{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}]}"#,
        );
        for good in [r#""ab""#, "3", "null", r#"{"a":true}"#] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [r#""abc""#, "2", "true", "{}", "[]"] {
            assert!(!complete(&s, bad), "{bad}");
        }
        let s = schema(
            r##"{"$defs":{"a":{"type":"string"},"b":{"type":"integer"}},"oneOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]}"##,
        );
        assert!(complete(&s, r#""x""#) && complete(&s, "3") && !complete(&s, "null"));
        // Closed objects of different keys: keyed on the first one.
        let s = schema(
            r#"{"oneOf":[{"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"b":{}},"additionalProperties":false}]}"#,
        );
        assert!(
            complete(&s, r#"{"a":1}"#) && complete(&s, "{}") && !complete(&s, r#"{"a":1,"b":2}"#)
        );
        // Best effort: the first schema that can begin with the byte, and
        // `oneOf` said left out.
        let text = br#"{"type":"object","properties":{"n":{"oneOf":[{"type":"integer"},{"type":"number"}]}}}"#;
        let s = Schema::compile_lenient(&parse(text).unwrap()).unwrap();
        assert!(complete(&s, r#"{"n":5}"#) && !complete(&s, r#"{"n":"x"}"#));
        let dropped: Vec<(&str, usize)> = s.dropped().collect();
        assert_eq!(dropped, std::vec![("oneOf", 35)]);
        for text in [
            r#"{"oneOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},{"type":"object","properties":{"b":{}},"additionalProperties":false}]}"#,
            r#"{"oneOf":[{"type":"integer"},{"type":"number"}]}"#,
            r#"{"oneOf":[{"type":"string"},{"enum":["a"]}]}"#,
            r#"{"oneOf":[{"type":"string"}],"minLength":2}"#,
        ] {
            assert!(
                Schema::compile(&parse(text.as_bytes()).unwrap()).is_err(),
                "{text}"
            );
        }
    }

    /// A nested `id` or `$id` moves the base of references: refused in a
    /// schema with a `$ref`, an annotation in one without.
    #[test]
    fn nested_ids_matter_only_beside_references() {
        let s =
            schema(r#"{"type":"object","properties":{"a":{"id":"http://x/a","type":"integer"}}}"#);
        assert!(complete(&s, r#"{"a":1}"#) && !complete(&s, r#"{"a":"x"}"#));
        let text = br##"{"$defs":{"i":{"type":"integer"}},"properties":{"a":{"$id":"http://x/a","properties":{"b":{"$ref":"#/$defs/i"}}}}}"##;
        assert!(Schema::compile(&parse(text).unwrap()).is_err());
    }

    #[test]
    fn unions_of_schemas_that_begin_differently() {
        let schema = r#"{"type":"object","properties":{
            "id":{"anyOf":[{"type":"integer","minimum":1},{"type":"string","maxLength":3}],"title":"Id"},
            "tags":{"anyOf":[{"type":"array","items":{"type":"string"},"maxItems":2},
                             {"type":"object","properties":{"k":{"type":"boolean"}},"required":["k"]},
                             {"type":"null"}]},
            "mode":{"anyOf":[{"enum":["a","b"]},{"type":"boolean"},{"anyOf":[{"type":"integer"},{"type":"null"}]}]}},
            "required":["id","tags","mode"]}"#;
        let s = Schema::compile(&parse(schema.as_bytes()).unwrap()).unwrap();
        for good in [
            r#"{"id":7,"tags":["x","y"],"mode":"a"}"#,
            r#"{"id":"abc","tags":{"k":true},"mode":false}"#,
            r#"{"id":"","tags":null,"mode":null}"#,
            r#"{"id":12,"tags":[],"mode":-3}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"id":0,"tags":[],"mode":"a"}"#,
            r#"{"id":"abcd","tags":[],"mode":"a"}"#,
            r#"{"id":true,"tags":[],"mode":"a"}"#,
            r#"{"id":1,"tags":["x","y","z"],"mode":"a"}"#,
            r#"{"id":1,"tags":{},"mode":"a"}"#,
            r#"{"id":1,"tags":[],"mode":"c"}"#,
            r#"{"id":1,"tags":[],"mode":1.5}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        for refused in [
            r#"{"anyOf":[{"type":"integer"},{"type":"number"}]}"#,
            r#"{"anyOf":[{"type":"object"},{"properties":{"a":{}}}]}"#,
            r#"{"anyOf":[{"type":"string"},{"enum":["a",1]}]}"#,
            r#"{"anyOf":[{"type":"string"},{}]}"#,
            r#"{"anyOf":[{"type":"string"},{"type":"integer"}],"minLength":2}"#,
            r#"{"anyOf":[{"type":"string"},{"type":"null"},{"type":"null"}]}"#,
        ] {
            let v = parse(refused.as_bytes()).unwrap();
            let e = Schema::compile(&v).unwrap_err();
            assert!(std::format!("{e}").contains("anyOf"), "{refused}: {e}");
            // Best effort compiles each.
            Schema::compile_lenient(&v).unwrap();
        }
        // Best effort, schemas that begin alike: the first that can begin
        // with the value's first byte is followed to the end.
        let lenient =
            |text: &str| Schema::compile_lenient(&parse(text.as_bytes()).unwrap()).unwrap();
        let s = lenient(
            r#"{"anyOf":[{"type":"integer","maximum":9},{"type":"number"},{"type":"string"}]}"#,
        );
        assert!(complete(&s, "7") && complete(&s, r#""x""#));
        assert!(!complete(&s, "12") && !complete(&s, "1.5"));
        let s = lenient(
            r#"{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},{"type":"object"}]}"#,
        );
        assert!(complete(&s, r#"{"a":1}"#) && !complete(&s, r#"{"b":1}"#));
    }

    /// A tool call over several functions: the arguments follow the named
    /// function's parameters (a union keyed on the name), and cannot come
    /// before the name.
    #[test]
    fn a_call_of_several_functions_follows_the_named_ones_parameters() {
        let weather = parse(
            br#"{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"]}"#,
        )
        .unwrap();
        let count =
            parse(br#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#)
                .unwrap();
        let get = parse(br#"{"type":"object","properties":{"key":{"type":"string"}}}"#).unwrap();
        // `get` is a prefix of `get_weather`: the closing quote decides.
        let s = Schema::compile_call(&[("get_weather", weather), ("count", count), ("get", get)])
            .unwrap();
        for good in [
            r#"{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}"#,
            r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#,
            r#"{"name":"count","arguments":{"n":3}}"#,
            r#"{"name":"get","arguments":{"key":"k"}}"#,
            r#"{"name":"get","arguments":{}}"#,
            // Parameters without `additionalProperties: false` take other
            // keys too.
            r#"{"name":"get","arguments":{"city":"Paris"}}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"name":"get_weather","arguments":{"city":"Paris","unit":"kelvin"}}"#,
            r#"{"name":"get_weather","arguments":{"n":3}}"#,
            r#"{"name":"count","arguments":{"city":"Paris"}}"#,
            r#"{"name":"count","arguments":{"n":"3"}}"#,
            r#"{"name":"get","arguments":{"key":1}}"#,
            r#"{"arguments":{"n":3},"name":"count"}"#,
            r#"{"name":"other","arguments":{}}"#,
            r#"{"name":"count"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        assert!(!prefix(&s, r#"{"arg"#));
        assert!(prefix(
            &s,
            r#"{"name":"get_weather","arguments":{"unit":"c"#
        ));
        assert!(!prefix(&s, r#"{"name":"count","arguments":{"n":""#));
        assert!(matches!(
            Schema::compile_call(&[]),
            Err(SchemaError::Invalid(_))
        ));
    }

    /// A union in one function's parameters adds choices of its own: every
    /// function still gets its own parameters (its union's children come
    /// after the functions' entries).
    #[test]
    fn a_union_in_one_function_leaves_the_others_their_parameters() {
        let a = parse(br#"{"type":"object","properties":{"x":{"anyOf":[{"type":"integer"},{"type":"string"}]}},"required":["x"]}"#).unwrap();
        let b =
            parse(br#"{"type":"object","properties":{"y":{"type":"boolean"}},"required":["y"]}"#)
                .unwrap();
        let c = parse(br#"{"type":"object","properties":{"z":{"anyOf":[{"type":"array"},{"type":"null"},{"type":"boolean"}]}}}"#).unwrap();
        let s = Schema::compile_call(&[("a", a), ("b", b), ("c", c)]).unwrap();
        for good in [
            r#"{"name":"a","arguments":{"x":1}}"#,
            r#"{"name":"a","arguments":{"x":"s"}}"#,
            r#"{"name":"b","arguments":{"y":true}}"#,
            r#"{"name":"c","arguments":{"z":[1]}}"#,
            r#"{"name":"c","arguments":{"z":null}}"#,
            r#"{"name":"c","arguments":{}}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"name":"b","arguments":1}"#,
            r#"{"name":"b","arguments":{"y":1}}"#,
            r#"{"name":"c","arguments":{"z":"s"}}"#,
            r#"{"name":"a","arguments":{"x":true}}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
    }

    /// Keys beside the properties: any value without
    /// `additionalProperties` (or with `true`), none with `false`, else its
    /// schema's values; a property's key is never taken as another key.
    #[test]
    fn keys_beside_the_properties_follow_additional_properties() {
        let s = schema(
            r#"{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"null"}},
               "additionalProperties":{"type":"string","maxLength":2}}"#,
        );
        for good in [
            r#"{"a":1,"b":"xy"}"#,
            r#"{"b":"","a":1,"ab":null,"abc":"z","":"e"}"#,
            "{}",
        ] {
            assert!(complete(&s, good), "{good}");
        }
        for bad in [
            r#"{"a":1,"b":2}"#,
            r#"{"a":"x"}"#,
            r#"{"abc":"xyz"}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"ab":null,"ab":"x"}"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        let s = schema(r#"{"properties":{"a":{}},"additionalProperties":false}"#);
        assert!(complete(&s, r#"{"a":[1]}"#));
        assert!(!prefix(&s, r#"{"b"#) && !complete(&s, r#"{"a":1,"a":2}"#));
    }

    #[test]
    fn objects_properties_required_and_types() {
        let s = schema(
            r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
               "tags":{"type":"array","items":{"type":"string"},"maxItems":2},
               "kind":{"enum":["cat","dog",3,null]},"ok":{"type":["boolean","null"]},
               "score":{"type":"number"}},"required":["name","age"]}"#,
        );
        for good in [
            r#"{"name":"Tom","age":3}"#,
            r#"{ "age" : -12 , "name" : "é\"\u00e9" }"#,
            r#"{"name":"","age":0,"tags":["a","b"],"kind":"dog","ok":null,"score":-1.5e+3}"#,
            r#"{"name":"x","age":1,"kind":3,"ok":true}"#,
            r#"{"name":"x","age":1,"kind":null}"#,
            // Keys beside the properties (no `additionalProperties: false`).
            r#"{"name":"Tom","age":3,"extra":{"a":[1]},"nam":2,"names":"x"}"#,
            r#"{"x\"y":1,"name":"Tom","é\u00e9":[],"age":3}"#,
        ] {
            assert!(complete(&s, good), "{good}");
        }
        // An escape while a property's name could still be spelled is one
        // no name holds, never `\u` or `\/` (`\u006eame` would be `name`);
        // after, any escape.
        assert!(!prefix(&s, r#"{"na\u"#) && !prefix(&s, r#"{"\u006e"#));
        assert!(!prefix(&s, r#"{"\/"#) && !prefix(&s, r#"{"na\x"#));
        assert!(prefix(&s, r#"{"nx\u00e9"#), "a");
        assert!(prefix(&s, r#"{"name\"""#), "b");
        assert!(complete(&s, r#"{"name\"":1,"name":"a","age":1}"#), "c");
        assert!(complete(&s, r#"{"na\nme":1,"\t":2,"name":"a","age":1}"#));
        for bad in [
            r#"{"name":"Tom"}"#,
            r#"{"name":"Tom","age":3.5}"#,
            r#"{"name":"Tom","age":3,"name":"x"}"#,
            r#"{"name":"Tom","age":3,"extra":1,"age":4}"#,
            r#"{"name":"a","age":1,"tags":["a","b","c"]}"#,
            r#"{"name":"a","age":1,"kind":"cow"}"#,
            r#"{"name":"a","age":01}"#,
            r#"{"name":"a\x","age":1}"#,
            "{\"name\":\"a\u{1}\",\"age\":1}",
            r#"{"name":"a","age":1} "#,
            r#"["name"]"#,
        ] {
            assert!(!complete(&s, bad), "{bad}");
        }
        // Prefixes: a number may continue; a partial key is fine.
        assert!(prefix(&s, r#"{"na"#) && prefix(&s, r#"{"nx"#));
        assert!(prefix(&s, r#"{"name":"a","age":12"#));
        // Whitespace runs are capped.
        assert!(prefix(
            &s,
            &std::format!("{{{}", " ".repeat(MAX_WS as usize))
        ));
        assert!(!prefix(
            &s,
            &std::format!("{{{}", " ".repeat(MAX_WS as usize + 1))
        ));
    }

    #[test]
    fn free_objects_any_values_and_roots() {
        let s = Schema::any_object();
        assert!(complete(&s, r#"{"a":[1,{"b":null}],"c":"d","e":{}}"#));
        assert!(complete(&s, "{}"));
        assert!(!complete(&s, "[]"));
        assert!(!complete(&s, r#"{"a":}"#));
        // A number at the root ends when the output ends.
        let s = schema(r#"{"type":"number"}"#);
        assert!(complete(&s, "12.5"));
        assert!(!complete(&s, "12."));
        // Invalid UTF-8 inside strings is refused byte by byte.
        let s = schema(r#"{"type":"string"}"#);
        let mut m = Matcher::new(&s);
        assert!(m.advance(&s, b'"'));
        assert!(!m.clone().advance(&s, 0xC0));
        assert!(m.advance(&s, 0xE2) && !m.clone().advance(&s, 0x20));
    }

    #[test]
    fn unsupported_and_oversized_schemas_are_refused_by_name() {
        let err = |t: &str| {
            std::string::ToString::to_string(
                &Schema::compile(&parse(t.as_bytes()).unwrap()).unwrap_err(),
            )
        };
        assert!(err(r#"{"type":"string","pattern":"(a)\\1"}"#).contains("'pattern'"));
        assert!(err(r##"{"$ref":"#/x"}"##).contains("'$ref'"));
        assert!(err(r#"{"anyOf":[]}"#).contains("'anyOf'"));
        assert!(
            err(r#"{"type":"object","additionalProperties":false,"required":["x"]}"#)
                .contains("not in 'properties'")
        );
        assert!(err(r#"{"enum":[{"a":1}]}"#).contains("enum"));
        let mut big = std::string::String::from(r#"{"type":"object","properties":{"#);
        for i in 0..70 {
            big.push_str(&std::format!("\"p{i}\":{{}},"));
        }
        big.pop();
        big.push_str("}}");
        assert!(err(&big).contains("too large"));
    }

    /// A [`Vocab`]'s tables, owned: what a host builds once per model.
    struct OwnedVocab {
        order: Vec<u32>,
        offsets: Vec<u32>,
        bytes: Vec<u8>,
        skip: Vec<u32>,
        skip2: Vec<u32>,
        position: Vec<u32>,
        unplain: Vec<u32>,
        plain: Vec<u64>,
        plain_ascii: Vec<u64>,
        not_plain_ascii: Vec<u32>,
        plain_upto: Vec<u64>,
        longest: u16,
        not_short_plain: Vec<u32>,
        byte_sets: Vec<u128>,
    }

    impl OwnedVocab {
        fn new(tokens: &[&[u8]]) -> OwnedVocab {
            let mut order: Vec<u32> = (0..tokens.len() as u32).collect();
            order.sort_by(|&a, &b| tokens[a as usize].cmp(tokens[b as usize]));
            let words = tokens.len().div_ceil(64);
            let mut v = OwnedVocab {
                offsets: std::vec![0u32],
                bytes: Vec::new(),
                skip: Vec::new(),
                skip2: Vec::new(),
                position: std::vec![u32::MAX; tokens.len()],
                unplain: Vec::new(),
                plain: std::vec![0; words],
                plain_ascii: std::vec![0; words],
                not_plain_ascii: Vec::new(),
                plain_upto: std::vec![0; words * PLAIN_COUNTS],
                longest: 0,
                not_short_plain: Vec::new(),
                byte_sets: Vec::new(),
                order,
            };
            for (i, &id) in v.order.iter().enumerate() {
                let t = tokens[id as usize];
                v.bytes.extend_from_slice(t);
                v.offsets.push(v.bytes.len() as u32);
                v.position[id as usize] = i as u32;
                v.byte_sets.push(byte_set(t));
                classify_token(
                    id,
                    i as u32,
                    t,
                    &mut v.plain,
                    &mut v.plain_ascii,
                    &mut v.plain_upto,
                    &mut v.longest,
                    [
                        &mut v.unplain,
                        &mut v.not_plain_ascii,
                        &mut v.not_short_plain,
                    ],
                );
                let first = |j: usize, n: usize| &tokens[v.order[j] as usize][..n];
                let next = |n: usize| {
                    (i + 1..tokens.len())
                        .find(|&j| {
                            t.len() < n
                                || tokens[v.order[j] as usize].len() < n
                                || first(j, n) != &t[..n]
                        })
                        .unwrap_or(tokens.len()) as u32
                };
                v.skip.push(next(1));
                v.skip2.push(next(2));
            }
            v
        }

        fn view(&self) -> Vocab<'_> {
            Vocab {
                order: &self.order,
                offsets: &self.offsets,
                bytes: &self.bytes,
                skip: &self.skip,
                skip2: &self.skip2,
                position: &self.position,
                unplain: &self.unplain,
                plain_ids: &self.plain,
                plain_ascii_ids: &self.plain_ascii,
                not_plain_ascii: &self.not_plain_ascii,
                plain_upto: &self.plain_upto,
                longest_plain: self.longest,
                not_short_plain: &self.not_short_plain,
                byte_sets: &self.byte_sets,
            }
        }
    }

    /// At every prefix of valid outputs, the mask (walked tokens and the
    /// plain block) is exactly the tokens `accepts` takes: free strings,
    /// bounded ones, an open object's keys (ASCII and non-ASCII names),
    /// keys a pattern may match, a closed object's.
    #[test]
    fn the_mask_equals_checking_every_token() {
        let tokens: Vec<&[u8]> = std::vec![
            b"{",
            b"{\"",
            b"{\"c",
            b"\"",
            b"\"city",
            b"city",
            b"ci",
            b"\":",
            b"\": \"",
            b" ",
            b"  ",
            b"Paris",
            b"\"}",
            b"\",",
            b",",
            b"n",
            b"\"n\":",
            b"12",
            b"1",
            b"}",
            b"\xC3",
            b"\xC3\xA9",
            b"\xC3\xA9\xC3\xA9",
            b"\xC3\xA8",
            b"\\n",
            b"x\"",
            b"\n",
            b"a b",
            b"ab",
            b"abcdef",
            b"x-",
            b"x-a",
            b"-",
            b"\xE6\x97\xA5\xE6\x9C\xAC",
            b"\"\xC3\xA9",
            // Characters begun and not ended; a lead byte's bad second
            // byte; continuation bytes alone.
            b"\xE6\x97",
            b"a\xE6",
            b"ab\xE6\x97",
            b"\xC3\xA9\xE6",
            b"\xE0\x80",
            b"\xED\xA0",
            b"\xF4\x90",
            b"\x97\xA5",
            b"\xA5\xE6\x9C\xAC",
            // For patterns and formats.
            b"ab-",
            b"12\"",
            b"2024",
            b"-01",
            b"-31\"",
            b"http",
            b"://",
            b"a.b",
            b"/c",
            b"\",\"",
            // Longer than the counted plain tokens: 18 and 24 characters.
            b"abcdefghijklmnopqr",
            b"abcdefghijklmnopqrstuvwx",
            // For the classes of patterns and formats without maxLength.
            b"www",
            b"-data",
            b"a1",
            b"a_b9",
            b"x.y",
            b"A",
            b"?q=1",
            b"#f",
            b"a@b",
        ];
        let owned = OwnedVocab::new(&tokens);
        let vocab = owned.view();
        let cases: [(&str, &[&str]); 12] = [
            (
                r#"{"type":"array","items":{"type":"string","pattern":"^[0-9a-z]{8}-[0-9a-z]{4}$|^x[a-z]{2,5}"}}"#,
                &[r#"["abcd1234-ab12","xwww","a1b9x1yb-www1"]"#],
            ),
            (
                r#"{"type":"object","patternProperties":{"^x-[a-z]+$":{"type":"integer"}},"additionalProperties":false}"#,
                &[r#"{"x-ab":1,"x-www":12}"#],
            ),
            (
                r#"{"type":"object","properties":{"u":{"type":"string","pattern":"^[a-z]([a-z0-9_-]*[a-z])?$"},"w":{"type":"string","pattern":"^[\\w.-]+$","minLength":6},"e":{"type":"string","pattern":"ab"}}}"#,
                &[
                    r#"{"u":"www-data","w":"a_b9x.yA","e":"xabwww"}"#,
                    r#"{"u":"a1ab","w":"wwwAx.y"}"#,
                ],
            ),
            (
                r#"{"type":"object","properties":{"u":{"type":"string","format":"uri"},"h":{"type":"string","format":"hostname"},"m":{"type":"string","format":"email","minLength":3}}}"#,
                &[r#"{"u":"http://www.a/b?q=1#f","h":"www-data.a1","m":"a@b.www"}"#],
            ),
            (
                r#"{"type":"array","items":{"type":"string","pattern":"^[0-7]{3,4}$|^x[a-z]*$"}}"#,
                &[r#"["755","xwww","x"]"#],
            ),
            (
                r#"{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+-[0-9]{2}$"},"d":{"type":"string","format":"date"},"u":{"type":"string","format":"uri","maxLength":20}}}"#,
                &[r#"{"id":"ab-12","d":"2024-01-31","u":"http://a.b/c"}"#],
            ),
            (
                r#"{"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer"}},"required":["city"]}"#,
                &[
                    r#"{"city": "Paris", "n": 12}"#,
                    r#"{"city":"x","n":1}"#,
                    r#"{"cityx":"a b","city":"é"}"#,
                ],
            ),
            (
                r#"{"type":"object","properties":{"city":{"type":"string","maxLength":3}},"additionalProperties":false}"#,
                &[r#"{"city":"éab"}"#, r#"{"city":"ab"}"#, r#"{"city":"a日"}"#],
            ),
            (
                r#"{"type":"object","properties":{"city":{"type":"string","maxLength":20}}}"#,
                &[r#"{"city":"abcdefghijklmnopqrab"}"#, r#"{"city":"é"}"#],
            ),
            (
                r#"{"type":"object","properties":{"cé":{"type":"integer"},"ci":{"type":"string","minLength":2}}}"#,
                &[r#"{"cé":1,"ci":"abcdef","cè":"x"}"#, r#"{"céé":"日本"}"#],
            ),
            (
                r#"{"type":"object","properties":{"city":{}},"patternProperties":{"^x-[a-z]+$":{"type":"integer"}}}"#,
                &[r#"{"x-ab":1,"city":"n","x-":"ab","xy":"é"}"#],
            ),
            (
                r#"{"type":"object","properties":{"city":{}},"patternProperties":{"^x-[a-z]+$":{"type":"integer"}},"additionalProperties":false}"#,
                &[r#"{"x-ab":1,"city":"n"}"#],
            ),
        ];
        let (mut checked, mut classes, mut counted) = (0, 0, 0);
        for (text, outputs) in cases {
            let s = schema(text);
            let mut states = std::vec![Matcher::new(&s); MAX_TOKEN_BYTES + 1];
            let mut scratch = Matcher::new(&s);
            for out in outputs {
                assert!(complete(&s, out), "{out} under {text}");
                let mut m = Matcher::new(&s);
                for (at, &b) in out.as_bytes().iter().enumerate() {
                    let mut got = Vec::new();
                    if let Some(block) = vocab.allowed(&s, &m, &mut states, &mut |id| got.push(id))
                    {
                        got.extend((0..tokens.len() as u32).filter(|&id| {
                            block
                                .get(id as usize / 64)
                                .is_some_and(|w| w >> (id % 64) & 1 == 1)
                        }));
                    }
                    got.sort();
                    let want: Vec<u32> = (0..tokens.len() as u32)
                        .filter(|&id| m.accepts(&s, tokens[id as usize], &mut scratch))
                        .collect();
                    let so_far = std::string::String::from_utf8_lossy(&out.as_bytes()[..at]);
                    assert_eq!(got, want, "after {so_far:?} of {out} under {text}");
                    checked += 1;
                    classes += matches!(m.plain_fit(&s), PlainFit::Class(..)) as usize;
                    counted += matches!(m.plain_fit(&s), PlainFit::Class(_, room) if room < u16::MAX)
                        as usize;
                    assert!(m.advance(&s, b));
                }
            }
        }
        assert!(
            checked > 150 && classes > 30 && counted > 10,
            "{checked} masks, {classes} by a class, {counted} of them counted"
        );
    }
}
