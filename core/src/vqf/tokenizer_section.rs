//! The tokenizer section (docs/vqf.md): tables stored ready to use, so
//! loading the tokenizer is zero work and lookups need no allocation.

use super::write::{Sink, Tally};
use crate::error::Error;

/// Bytes of the fixed part: 8 u32 fields, then `byte_to_id`.
const FIXED: usize = 32 + 256 * 4;
/// Added-token flag: special (not split, skipped when decoding specials).
pub const ADDED_SPECIAL: u32 = 1;
/// Added-token flag: strips whitespace on the left.
pub const ADDED_LSTRIP: u32 = 2;
/// Added-token flag: strips whitespace on the right.
pub const ADDED_RSTRIP: u32 = 4;
/// Added-token flag: matched against normalized text.
pub const ADDED_NORMALIZED: u32 = 8;
/// Added-token flag: only matches whole words.
pub const ADDED_SINGLE_WORD: u32 = 16;
/// Pre-tokenizer id of the Qwen2 split regex.
pub const PRETOKENIZER_QWEN2: u32 = 1;
/// Normalizer ids.
pub const NORMALIZER_NONE: u32 = 0;
/// NFC normalization.
pub const NORMALIZER_NFC: u32 = 1;

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A validated view of the tokenizer tables.
#[derive(Clone, Copy, Debug)]
pub struct TokenizerTables<'a> {
    /// Entries of the token table.
    pub n_tokens: u32,
    /// Merge records.
    pub n_merges: u32,
    /// Added-token records.
    pub n_added: u32,
    /// Pre-tokenizer id.
    pub pretokenizer: u32,
    /// Normalizer id.
    pub normalizer: u32,
    byte_to_id: &'a [u8],
    offsets: &'a [u8],
    merges: &'a [u8],
    added: &'a [u8],
    blob: &'a [u8],
    template: &'a [u8],
}

impl<'a> TokenizerTables<'a> {
    /// Validates a tokenizer section: sizes, offsets, ids, sort order, and
    /// that every merge's bytes are its parts' bytes.
    pub fn parse(s: &'a [u8]) -> Result<Self, Error> {
        let bad = |what: &'static str| Error::BadTokenizer { what };
        if s.len() < FIXED {
            return Err(bad("section shorter than its fixed fields"));
        }
        let n_tokens = u32_at(s, 0);
        let n_merges = u32_at(s, 4);
        let n_added = u32_at(s, 8);
        let pretokenizer = u32_at(s, 12);
        let normalizer = u32_at(s, 16);
        let template_len = u32_at(s, 20) as u64;
        let blob_len = u32_at(s, 24) as u64;
        if u32_at(s, 28) != 0 {
            return Err(bad("reserved field must be zero"));
        }
        if pretokenizer != PRETOKENIZER_QWEN2 {
            return Err(bad("unknown pre-tokenizer"));
        }
        if normalizer > NORMALIZER_NFC {
            return Err(bad("unknown normalizer"));
        }
        if n_tokens == 0 || n_tokens > 4_194_304 || n_merges > 4_194_304 || n_added > 65_536 {
            return Err(bad("table counts out of range"));
        }
        let offsets_len = (n_tokens as u64 + 1) * 4;
        let merges_len = n_merges as u64 * 16;
        let added_len = n_added as u64 * 8;
        let total = FIXED as u64 + offsets_len + merges_len + added_len + blob_len + template_len;
        let padded = total.div_ceil(4) * 4;
        if s.len() as u64 != padded {
            return Err(bad("section size does not match its counts"));
        }
        if s[total as usize..].iter().any(|&b| b != 0) {
            return Err(bad("padding must be zero"));
        }
        let mut at = FIXED;
        let mut take = |n: u64| {
            let part = &s[at..at + n as usize];
            at += n as usize;
            part
        };
        let t = TokenizerTables {
            n_tokens,
            n_merges,
            n_added,
            pretokenizer,
            normalizer,
            byte_to_id: &s[32..FIXED],
            offsets: take(offsets_len),
            merges: take(merges_len),
            added: take(added_len),
            blob: take(blob_len),
            template: take(template_len),
        };
        let mut prev = 0u32;
        for i in 0..=n_tokens as usize {
            let o = u32_at(t.offsets, 4 * i);
            if o < prev || (i == 0 && o != 0) {
                return Err(bad("token offsets must start at 0 and not decrease"));
            }
            prev = o;
        }
        if prev as u64 != blob_len {
            return Err(bad("last token offset must equal the blob length"));
        }
        for b in 0..256 {
            let id = u32_at(t.byte_to_id, 4 * b);
            if id >= n_tokens || t.token_bytes(id) != Some(&[b as u8][..]) {
                return Err(bad("byte_to_id must map each byte to its one-byte token"));
            }
        }
        let mut last = None;
        for i in 0..n_merges as usize {
            let [l, r, _rank, m] = t.merge_record(i);
            if l >= n_tokens || r >= n_tokens || m >= n_tokens {
                return Err(bad("merge id out of range"));
            }
            if last.is_some_and(|p| p >= (l, r)) {
                return Err(bad("merges must be sorted strictly by (left, right)"));
            }
            last = Some((l, r));
            let (lb, rb, mb) = (t.token_bytes(l), t.token_bytes(r), t.token_bytes(m));
            match (lb, rb, mb) {
                (Some(lb), Some(rb), Some(mb))
                    if mb.len() == lb.len() + rb.len()
                        && mb.starts_with(lb)
                        && mb.ends_with(rb) => {}
                _ => return Err(bad("a merge's bytes must be its parts' bytes")),
            }
        }
        for i in 0..n_added as usize {
            let (id, flags) = t.added(i);
            if id >= n_tokens || flags >= 32 || t.token_bytes(id).is_none_or(|b| b.is_empty()) {
                return Err(bad("added token id, flags or content invalid"));
            }
        }
        Ok(t)
    }

    /// The bytes of token `id`, if it is in the table.
    pub fn token_bytes(&self, id: u32) -> Option<&'a [u8]> {
        if id >= self.n_tokens {
            return None;
        }
        let i = id as usize * 4;
        let a = u32_at(self.offsets, i) as usize;
        let b = u32_at(self.offsets, i + 4) as usize;
        self.blob.get(a..b)
    }

    /// The token of a single byte.
    pub fn byte_id(&self, byte: u8) -> u32 {
        u32_at(self.byte_to_id, 4 * byte as usize)
    }

    fn merge_record(&self, i: usize) -> [u32; 4] {
        let at = 16 * i;
        [
            u32_at(self.merges, at),
            u32_at(self.merges, at + 4),
            u32_at(self.merges, at + 8),
            u32_at(self.merges, at + 12),
        ]
    }

    /// The merge of `(left, right)`: `(rank, merged id)`, by binary search.
    #[inline]
    pub fn merge(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let key = ((left as u64) << 32) | right as u64;
        let (mut lo, mut hi) = (0usize, self.n_merges as usize);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let r: &[u8; 16] = self.merges.get(16 * mid..16 * mid + 16)?.try_into().ok()?;
            let word = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
            let k = ((word(0) as u64) << 32) | word(4) as u64;
            match k.cmp(&key) {
                core::cmp::Ordering::Equal => return Some((word(8), word(12))),
                core::cmp::Ordering::Less => lo = mid + 1,
                core::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }

    /// Added token `i`: `(id, flags)`.
    pub fn added(&self, i: usize) -> (u32, u32) {
        if i >= self.n_added as usize {
            return (u32::MAX, 0);
        }
        (u32_at(self.added, 8 * i), u32_at(self.added, 8 * i + 4))
    }

    /// The chat template text (UTF-8 Jinja), possibly empty.
    pub fn chat_template(&self) -> &'a [u8] {
        self.template
    }
}

/// What the converter hands to [`encode`].
pub struct TokenizerInput<'i> {
    /// Every token's raw bytes, by id.
    pub tokens: &'i [&'i [u8]],
    /// `[left, right, rank, merged]`, sorted strictly by (left, right).
    pub merges: &'i [[u32; 4]],
    /// `(id, flags)` of the added tokens.
    pub added: &'i [(u32, u32)],
    /// The token of each byte.
    pub byte_to_id: &'i [u32; 256],
    /// Normalizer id.
    pub normalizer: u32,
    /// Chat template text.
    pub template: &'i [u8],
}

/// Writes a tokenizer section; returns its size. The result is validated by
/// [`TokenizerTables::parse`] before this returns... by the caller's reload.
pub fn encode(input: &TokenizerInput<'_>, sink: &mut dyn Sink) -> Result<u64, Error> {
    let too_big = Error::Overflow {
        what: "tokenizer section",
    };
    let blob_len: u64 = input.tokens.iter().map(|t| t.len() as u64).sum();
    let n_tokens = u32::try_from(input.tokens.len()).map_err(|_| too_big)?;
    let n_merges = u32::try_from(input.merges.len()).map_err(|_| too_big)?;
    let n_added = u32::try_from(input.added.len()).map_err(|_| too_big)?;
    let blob32 = u32::try_from(blob_len).map_err(|_| too_big)?;
    let tpl32 = u32::try_from(input.template.len()).map_err(|_| too_big)?;
    let mut out = Tally::new(sink);
    for v in [
        n_tokens,
        n_merges,
        n_added,
        PRETOKENIZER_QWEN2,
        input.normalizer,
        tpl32,
        blob32,
        0,
    ] {
        out.write(&v.to_le_bytes())?;
    }
    for id in input.byte_to_id {
        out.write(&id.to_le_bytes())?;
    }
    let mut off = 0u32;
    out.write(&off.to_le_bytes())?;
    for t in input.tokens {
        off += t.len() as u32;
        out.write(&off.to_le_bytes())?;
    }
    for m in input.merges {
        for v in m {
            out.write(&v.to_le_bytes())?;
        }
    }
    for &(id, flags) in input.added {
        out.write(&id.to_le_bytes())?;
        out.write(&flags.to_le_bytes())?;
    }
    for t in input.tokens {
        out.write(t)?;
    }
    out.write(input.template)?;
    let pad = (4 - out.written % 4) % 4;
    out.write(&[0u8; 4][..pad as usize])?;
    Ok(out.written)
}
