//! A zero-copy GGUF (v2 and v3, little-endian) parser.
//!
//! [`Gguf::parse`] validates the whole header once (see docs/gguf.md for the
//! list of checks) and keeps only offsets: the metadata and tensor-info
//! sections are walked again on each lookup. Everything returned borrows from
//! the caller's bytes; nothing allocates and no input can make it panic.
//!
//! ```text
//! "GGUF"  version: u32  n_tensors: u64  n_kv: u64
//! n_kv x      { key: string, type: u32, value }
//! n_tensors x { name: string, n_dims: u32, ne: n_dims x u64, type: u32, offset: u64 }
//! padding to `general.alignment` (default 32)
//! data section: tensor i at data_start + offset_i
//! ```
//! A string is a `u64` byte length and the bytes; an array value is an
//! element type (`u32`), a count (`u64`) and the elements.

mod dequant;
mod reader;
mod tensor;
mod value;

pub use dequant::dequantize_row;
pub use tensor::{GgmlType, TensorInfo, MAX_DIMS, MAX_NAME_LEN, QK_K};
pub use value::{Array, ArrayIter, Value, ValueType};

use reader::Cursor;
use tensor::{read_info, RawInfo};
use value::read_value;

use crate::Error;

/// The file magic.
pub const MAGIC: [u8; 4] = *b"GGUF";

/// The alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: usize = 32;

/// The metadata key that sets the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Bytes before the metadata: magic, version, tensor count, metadata count.
const HEADER_BYTES: usize = 24;
/// The smallest metadata entry: an empty key (8), a type (4), a 1-byte value.
const MIN_KV_BYTES: usize = 13;
/// The smallest tensor info: an empty name (8), `n_dims` 0 (4), type (4), offset (8).
const MIN_INFO_BYTES: usize = 24;
/// Names compared per pass of the duplicate check (stack buffers of hashes
/// and names: 1.5 KiB on 64-bit targets, 1 KiB on 32-bit ones).
const DUP_CHUNK: usize = 64;

/// The most tensors a file may declare. A kestrel limit, not GGUF's: it
/// bounds the duplicate-name check, which is quadratic without an allocator.
/// Real Qwen GGUF files have a few hundred to about two thousand tensors
/// (llama.cpp stores each layer's MoE experts as one tensor).
pub const MAX_TENSORS: usize = 1 << 14;

/// The most metadata entries a file may declare (a kestrel limit, as
/// [`MAX_TENSORS`]; real files have well under a hundred). Each pass of the
/// duplicate-key check walks the arrays after its chunk, so this bounds it.
pub const MAX_KV: usize = 1 << 10;

/// A parsed GGUF file: the caller's bytes and the offsets of its sections.
/// (`Debug` shows the sizes, not the bytes.)
#[derive(Clone, Copy)]
pub struct Gguf<'a> {
    bytes: &'a [u8],
    version: u32,
    n_kv: usize,
    n_tensors: usize,
    info_start: usize,
    data_start: usize,
    alignment: usize,
}

impl core::fmt::Debug for Gguf<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gguf")
            .field("len", &self.bytes.len())
            .field("version", &self.version)
            .field("n_kv", &self.n_kv)
            .field("n_tensors", &self.n_tensors)
            .field("info_start", &self.info_start)
            .field("data_start", &self.data_start)
            .field("alignment", &self.alignment)
            .finish()
    }
}

impl<'a> Gguf<'a> {
    /// Parses and validates a whole GGUF file.
    pub fn parse(bytes: &'a [u8]) -> Result<Gguf<'a>, Error> {
        let mut cur = Cursor::at(bytes, 0);
        let magic: [u8; 4] = cur.array("file is shorter than the GGUF magic")?;
        if magic != MAGIC {
            return Err(Error::Malformed {
                what: "magic is not \"GGUF\"",
                at: 0,
            });
        }
        let version = cur.u32("file ends inside the header")?;
        if version != 2 && version != 3 {
            let what = if version != 0 && version & 0xffff == 0 {
                "GGUF version (byte-swapped: a big-endian file?)"
            } else if version == 1 {
                "GGUF version (v1 is obsolete; 2 and 3 are supported)"
            } else {
                "GGUF version (2 and 3 are supported)"
            };
            return Err(Error::Unsupported {
                what,
                value: version.into(),
            });
        }
        let n_tensors = cur.u64("file ends inside the header")?;
        let n_kv = cur.u64("file ends inside the header")?;
        let room = cur.remaining();
        let n_kv = usize::try_from(n_kv)
            .ok()
            .filter(|&n| n <= room / MIN_KV_BYTES)
            .ok_or(Error::Malformed {
                what: "metadata count is larger than the file can hold",
                at: 16,
            })?;
        if n_kv > MAX_KV {
            return Err(Error::OutOfRange {
                what: "GGUF metadata count",
                value: n_kv,
                max: MAX_KV,
            });
        }
        let n_tensors = usize::try_from(n_tensors)
            .ok()
            .filter(|&n| n <= room.saturating_sub(n_kv * MIN_KV_BYTES) / MIN_INFO_BYTES)
            .ok_or(Error::Malformed {
                what: "tensor count is larger than the file can hold",
                at: 8,
            })?;
        if n_tensors > MAX_TENSORS {
            return Err(Error::OutOfRange {
                what: "GGUF tensor count",
                value: n_tensors,
                max: MAX_TENSORS,
            });
        }

        // Metadata: every key UTF-8, every value well formed.
        let mut alignment = DEFAULT_ALIGNMENT;
        for _ in 0..n_kv {
            let (key, value, at) = read_kv(&mut cur)?;
            if key == ALIGNMENT_KEY {
                alignment = match value {
                    Value::U32(a) if a != 0 && a.is_power_of_two() => a as usize,
                    Value::U32(_) => {
                        return Err(Error::Malformed {
                            what: "general.alignment is not a nonzero power of two",
                            at: at as u64,
                        })
                    }
                    _ => {
                        return Err(Error::Malformed {
                            what: "general.alignment is not a uint32",
                            at: at as u64,
                        })
                    }
                };
            }
        }

        // Tensor infos: each valid on its own, data offsets ascending and
        // non-overlapping (each tensor starts at or after the previous end).
        let info_start = cur.pos();
        let mut end: u64 = 0;
        let mut last: Option<RawInfo<'a>> = None;
        for index in 0..n_tensors {
            let t = read_info(&mut cur, index, alignment)?;
            if t.offset < end {
                return Err(bad_tensor(
                    "data overlaps the previous tensor's (offsets must ascend)",
                    index,
                    &t,
                    t.offset,
                ));
            }
            end = t.offset.checked_add(t.nbytes as u64).ok_or(bad_tensor(
                "data end overflows",
                index,
                &t,
                t.offset,
            ))?;
            last = Some(t);
        }

        // The data section starts at the aligned end of the header.
        let data_start = cur
            .pos()
            .checked_add(alignment - 1)
            .map(|p| p & !(alignment - 1))
            .ok_or(Error::Malformed {
                what: "data section start overflows",
                at: cur.pos() as u64,
            })?;
        if let Some(t) = last {
            let avail = bytes.len().saturating_sub(data_start) as u64;
            if data_start > bytes.len() || end > avail {
                // Name the first tensor whose data does not fit.
                let mut c = Cursor::at(bytes, info_start);
                for index in 0..n_tensors {
                    let u = read_info(&mut c, index, alignment)?;
                    if data_start > bytes.len() || u.offset.saturating_add(u.nbytes as u64) > avail
                    {
                        return Err(bad_tensor(
                            "data runs past the end of the file",
                            index,
                            &u,
                            u.offset,
                        ));
                    }
                }
                return Err(bad_tensor(
                    "data runs past the end of the file",
                    n_tensors.saturating_sub(1),
                    &t,
                    t.offset,
                ));
            }
        }

        let g = Gguf {
            bytes,
            version,
            n_kv,
            n_tensors,
            info_start,
            data_start,
            alignment,
        };
        g.check_unique_keys()?;
        g.check_unique_names()?;
        Ok(g)
    }

    /// The file version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The number of metadata entries.
    pub fn kv_count(&self) -> usize {
        self.n_kv
    }

    /// The number of tensors.
    pub fn tensor_count(&self) -> usize {
        self.n_tensors
    }

    /// The byte offset of the data section in the file.
    pub fn data_offset(&self) -> usize {
        self.data_start
    }

    /// The whole file.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The metadata entries in file order.
    pub fn kvs(&self) -> KvIter<'a> {
        KvIter {
            cur: Cursor::at(self.bytes, HEADER_BYTES),
            left: self.n_kv,
        }
    }

    /// The value of metadata key `key`.
    pub fn metadata(&self, key: &str) -> Option<Value<'a>> {
        self.kvs().find(|&(k, _)| k == key).map(|(_, v)| v)
    }

    /// `key` as a `u32`: any integer type whose value fits.
    pub fn get_u32(&self, key: &str) -> Option<u32> {
        self.metadata(key)?.as_u32()
    }

    /// `key` as a `u64`: any integer type whose value fits.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.metadata(key)?.as_u64()
    }

    /// `key` as an `i64`: any integer type whose value fits.
    pub fn get_i64(&self, key: &str) -> Option<i64> {
        self.metadata(key)?.as_i64()
    }

    /// `key` as an `f32`: a `float32`, or a `float64` rounded to nearest.
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.metadata(key)?.as_f32()
    }

    /// `key` as a `bool`.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.metadata(key)?.as_bool()
    }

    /// `key` as a string that is valid UTF-8.
    pub fn get_str(&self, key: &str) -> Option<&'a str> {
        self.metadata(key)?.as_str()
    }

    /// `key` as an array.
    pub fn get_array(&self, key: &str) -> Option<Array<'a>> {
        self.metadata(key)?.as_array()
    }

    /// The tensors in file order.
    pub fn tensors(&self) -> TensorIter<'a> {
        TensorIter {
            bytes: self.bytes,
            cur: Cursor::at(self.bytes, self.info_start),
            index: 0,
            n: self.n_tensors,
            alignment: self.alignment,
            data_start: self.data_start,
        }
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<TensorInfo<'a>> {
        self.tensors().find(|t| t.name == name)
    }

    /// Rejects a repeated metadata key (as llama.cpp does).
    fn check_unique_keys(&self) -> Result<(), Error> {
        check_unique(
            Cursor::at(self.bytes, HEADER_BYTES),
            self.n_kv,
            |c| read_kv(c).map(|(k, _, _)| k),
            |_, _, at| Error::Malformed {
                what: "duplicate metadata key",
                at: at as u64,
            },
        )
    }

    /// Rejects a repeated tensor name (as llama.cpp does).
    fn check_unique_names(&self) -> Result<(), Error> {
        check_unique(
            Cursor::at(self.bytes, self.info_start),
            self.n_tensors,
            info_name,
            |first, second, at| Error::BadTensor {
                what: "duplicate tensor name (the value is the first one's index)",
                index: second as u64,
                at: at as u64,
                value: first as u64,
            },
        )
    }
}

/// The name of the tensor a [`Error::BadTensor`] from `bytes` is about, for a
/// message (`None` for other errors or when the name itself is unreadable).
pub fn error_tensor_name<'a>(bytes: &'a [u8], err: &Error) -> Option<&'a str> {
    match *err {
        Error::BadTensor { at, .. } => {
            let at = usize::try_from(at).ok()?;
            Cursor::at(bytes, at).str("tensor name").ok()
        }
        _ => None,
    }
}

fn bad_tensor(what: &'static str, index: usize, t: &RawInfo<'_>, value: u64) -> Error {
    Error::BadTensor {
        what,
        index: index as u64,
        at: t.info_at as u64,
        value,
    }
}

/// Reads one metadata entry: its key, its value, and the entry's offset.
fn read_kv<'a>(cur: &mut Cursor<'a>) -> Result<(&'a str, Value<'a>, usize), Error> {
    let at = cur.pos();
    let key = cur.str("metadata key runs past the end of the file")?;
    let type_at = cur.pos();
    let id = cur.u32("metadata value type runs past the end of the file")?;
    let ty = ValueType::from_id(id).ok_or(Error::Malformed {
        what: "unknown metadata value type",
        at: type_at as u64,
    })?;
    let value = read_value(cur, ty, false)?;
    Ok((key, value, at))
}

/// A 64-bit hash of a name, 8 bytes per step: the duplicate check compares
/// these first and the names only when they are equal.
fn name_hash(s: &str) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let (chunks, rest) = s.as_bytes().as_chunks::<8>();
    let mut h = (s.len() as u64).wrapping_mul(K);
    for c in chunks {
        h = (h ^ u64::from_le_bytes(*c)).wrapping_mul(K).rotate_left(29);
    }
    let mut last = [0u8; 8];
    for (d, &b) in last.iter_mut().zip(rest) {
        *d = b;
    }
    (h ^ u64::from_le_bytes(last)).wrapping_mul(K)
}

/// Checks that the `n` names `next` reads from `cur` on are distinct, without
/// allocating: names and their hashes are taken `DUP_CHUNK` at a time into
/// stack buffers, and each chunk is compared with itself and with every later
/// name, hash first. That costs `n / 64` walks of the section and `n^2 / 2`
/// hash comparisons: 47 walks for a 3000-tensor file (the [`MAX_TENSORS`] and
/// [`MAX_KV`] caps bound the worst case; docs/gguf.md has timings).
/// `dup(first_index, second_index, second_offset)` makes the error.
fn check_unique<'a>(
    mut cur: Cursor<'a>,
    n: usize,
    next: impl Fn(&mut Cursor<'a>) -> Result<&'a str, Error>,
    dup: impl Fn(usize, usize, usize) -> Error,
) -> Result<(), Error> {
    let mut done = 0;
    while done < n {
        let take = (n - done).min(DUP_CHUNK);
        let mut hashes = [0u64; DUP_CHUNK];
        let mut names: [&str; DUP_CHUNK] = [""; DUP_CHUNK];
        // The first index j < upto whose (hash, name) equals (h, name).
        let find = |hashes: &[u64; DUP_CHUNK], names: &[&str; DUP_CHUNK], upto, h, name| {
            let hs = hashes.get(..upto).unwrap_or(&[]);
            hs.iter()
                .enumerate()
                .filter(|&(_, &x)| x == h)
                .map(|(j, _)| j)
                .find(|&j| names.get(j) == Some(&name))
        };
        for i in 0..take {
            let at = cur.pos();
            let name = next(&mut cur)?;
            let h = name_hash(name);
            if let Some(j) = find(&hashes, &names, i, h, name) {
                return Err(dup(done + j, done + i, at));
            }
            if let (Some(hs), Some(ns)) = (hashes.get_mut(i), names.get_mut(i)) {
                *hs = h;
                *ns = name;
            }
        }
        let mut rest = cur.clone();
        for k in done + take..n {
            let at = rest.pos();
            let name = next(&mut rest)?;
            if let Some(j) = find(&hashes, &names, take, name_hash(name), name) {
                return Err(dup(done + j, k, at));
            }
        }
        done += take;
    }
    Ok(())
}

/// Reads a validated tensor info record's name and skips the rest.
fn info_name<'a>(cur: &mut Cursor<'a>) -> Result<&'a str, Error> {
    const W: &str = "tensor info runs past the end of the file";
    let name = cur.str(W)?;
    let n_dims = cur.u32(W)? as usize;
    // ne (8 bytes each), type (4), offset (8).
    cur.take(n_dims.min(MAX_DIMS) * 8 + 12, W)?;
    Ok(name)
}

/// Iterator over the metadata entries: `(key, value)`.
#[derive(Clone, Debug)]
pub struct KvIter<'a> {
    cur: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for KvIter<'a> {
    type Item = (&'a str, Value<'a>);

    fn next(&mut self) -> Option<(&'a str, Value<'a>)> {
        if self.left == 0 {
            return None;
        }
        match read_kv(&mut self.cur) {
            Ok((k, v, _)) => {
                self.left -= 1;
                Some((k, v))
            }
            // Unreachable after validation; stop rather than panic.
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

impl ExactSizeIterator for KvIter<'_> {}

/// Iterator over the tensors in file order.
#[derive(Clone)]
pub struct TensorIter<'a> {
    bytes: &'a [u8],
    cur: Cursor<'a>,
    index: usize,
    n: usize,
    alignment: usize,
    data_start: usize,
}

impl<'a> Iterator for TensorIter<'a> {
    type Item = TensorInfo<'a>;

    fn next(&mut self) -> Option<TensorInfo<'a>> {
        if self.index >= self.n {
            return None;
        }
        let t = read_info(&mut self.cur, self.index, self.alignment).ok();
        let data = t.and_then(|t| {
            let start = self
                .data_start
                .checked_add(usize::try_from(t.offset).ok()?)?;
            self.bytes.get(start..start.checked_add(t.nbytes)?)
        });
        match (t, data) {
            (Some(t), Some(data)) => {
                let info = TensorInfo {
                    name: t.name,
                    ty: t.ty,
                    n_dims: t.n_dims,
                    ne: t.ne,
                    offset: t.offset,
                    index: self.index,
                    info_at: t.info_at,
                    data,
                };
                self.index += 1;
                Some(info)
            }
            // Unreachable after validation; stop rather than panic.
            _ => {
                self.index = self.n;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.n.saturating_sub(self.index);
        (left, Some(left))
    }
}

impl ExactSizeIterator for TensorIter<'_> {}

impl core::fmt::Debug for TensorIter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "TensorIter {{ index: {}, n: {} }}", self.index, self.n)
    }
}
