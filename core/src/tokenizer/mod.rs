//! Qwen's byte-level BPE tokenizer, as Hugging Face `tokenizers` 0.23.3 runs
//! the Qwen2/Qwen3 `tokenizer.json`, with no allocation (docs/tokenizer.md).
//!
//! Encoding: (1) added tokens are found in the raw text, leftmost-longest,
//! honouring their lstrip / rstrip / single_word / normalized flags; (2) the
//! other segments are normalized (NFC, when the tables say so); (3) split by
//! the Qwen2 pre-tokenizer regex ([`pretokenize`]); (4) each piece's bytes go
//! through BPE ([`bpe`]). No BOS is added.
//!
//! Decoding joins token bytes and makes them UTF-8 as Hugging Face's ByteLevel
//! decoder does; [`StreamDecoder`] does it one id at a time.

pub mod bpe;
pub mod decode;
pub mod nfc;
pub mod pretokenize;
#[rustfmt::skip]
mod unicode_data;
pub mod unicode;

use crate::error::Error;
use crate::vqf::tokenizer_section::{
    TokenizerTables, ADDED_LSTRIP, ADDED_NORMALIZED, ADDED_RSTRIP, ADDED_SINGLE_WORD,
    ADDED_SPECIAL, NORMALIZER_NFC,
};
use core::ops::Range;
use decode::Utf8Lossy;
use unicode::{class, is_word};

/// Caller memory for [`Tokenizer::encode`].
///
/// * `text` receives the NFC form of a chunk of text that is not already in
///   NFC (chunks end at line starts and before " word"; see
///   docs/tokenizer.md). Text that passes the NFC quick check needs none.
///   `3 * text.len()` bytes is always enough.
/// * `work` holds the BPE state of one pre-token ([`bpe::WORK_PER_BYTE`] u32
///   per byte of the longest pre-token) and, during NFC, one combining
///   sequence. [`EncodeScratch::work_len_for`] gives the size.
pub struct EncodeScratch<'s> {
    text: &'s mut [u8],
    work: &'s mut [u32],
}

impl<'s> EncodeScratch<'s> {
    /// Wraps the two buffers.
    pub fn new(text: &'s mut [u8], work: &'s mut [u32]) -> Self {
        EncodeScratch { text, work }
    }

    /// `work` entries needed for pre-tokens of up to `max_piece_bytes` bytes.
    pub const fn work_len_for(max_piece_bytes: usize) -> usize {
        max_piece_bytes.saturating_mul(bpe::WORK_PER_BYTE)
    }
}

/// Options of [`Tokenizer::encode_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Treat added tokens flagged special as plain text (Hugging Face's
    /// `encode_special_tokens` / transformers' `split_special_tokens`).
    /// Added tokens that are not special are still matched.
    pub split_special: bool,
}

/// A segment of text: plain text (`true` when it holds data, see
/// [`Tokenizer::encode_each_data`]), or an added token's id.
enum Seg<'s> {
    Text(&'s str, bool),
    Added(u32),
}

/// Whether the byte range `a..b` of a text meets one of the `data` ranges.
fn meets(data: &[Range<usize>], a: usize, b: usize) -> bool {
    data.iter().any(|r| r.start < b && a < r.end)
}

/// The tokenizer: a view of the tables plus a few bytes of summary.
#[derive(Clone, Copy, Debug)]
pub struct Tokenizer<'a> {
    t: TokenizerTables<'a>,
    /// Bit b set: some added token starts with byte b.
    first_bytes: [u32; 8],
    added_sorted: bool,
    any_normalized_added: bool,
}

/// The byte a GPT-2 byte-level character stands for.
fn byte_level_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cp as u8),
        0x100..=0x120 => Some((cp - 0x100) as u8),
        0x121..=0x142 => Some((cp - 0x121 + 0x7F) as u8),
        0x143 => Some(0xAD),
        _ => None,
    }
}

impl<'a> Tokenizer<'a> {
    /// A tokenizer over validated tables (no allocation; one pass over the
    /// added-token records).
    pub fn new(tables: TokenizerTables<'a>) -> Self {
        let mut tok = Tokenizer {
            t: tables,
            first_bytes: [0; 8],
            added_sorted: true,
            any_normalized_added: false,
        };
        let mut last = None;
        for i in 0..tables.n_added as usize {
            let (id, flags) = tables.added(i);
            if let Some(b) = tok.added_text(id, flags, |t| t.first().copied()) {
                tok.first_bytes[(b >> 5) as usize] |= 1 << (b & 31);
            }
            if last.is_some_and(|l| l >= id) {
                tok.added_sorted = false;
            }
            last = Some(id);
            tok.any_normalized_added |= flags & ADDED_NORMALIZED != 0;
        }
        tok
    }

    /// Runs `f` on the text added token `id` is matched as (and decodes
    /// from): its content, or for a token flagged normalized under NFC, the
    /// NFC form of its content, as Hugging Face caches it (content whose NFC
    /// form exceeds 256 bytes is used as it is).
    fn added_text<R>(&self, id: u32, flags: u32, f: impl FnOnce(&[u8]) -> R) -> R {
        let content = self.t.token_bytes(id).unwrap_or(&[]);
        if flags & ADDED_NORMALIZED == 0 || self.t.normalizer != NORMALIZER_NFC {
            return f(content);
        }
        match core::str::from_utf8(content) {
            Ok(text) if !nfc::is_nfc_quick(text) => {
                let mut buf = [0u8; 256];
                let mut work = [0u32; 64];
                match nfc::nfc_into(text, &mut buf, &mut work) {
                    Ok(n) => f(buf.get(..n).unwrap_or(&[])),
                    Err(_) => f(content),
                }
            }
            _ => f(content),
        }
    }

    /// The tables.
    pub fn tables(&self) -> &TokenizerTables<'a> {
        &self.t
    }

    /// The id of the added token whose text is exactly `text` (e.g.
    /// `<|im_end|>`), by a linear scan of the added tokens.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        (0..self.t.n_added as usize)
            .map(|i| self.t.added(i).0)
            .find(|&id| self.t.token_bytes(id) == Some(text.as_bytes()))
    }

    /// The flags of `id` if it is an added token.
    pub fn added_flags(&self, id: u32) -> Option<u32> {
        let n = self.t.n_added as usize;
        if self.added_sorted {
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let (mid_id, flags) = self.t.added(mid);
                match mid_id.cmp(&id) {
                    core::cmp::Ordering::Equal => return Some(flags),
                    core::cmp::Ordering::Less => lo = mid + 1,
                    core::cmp::Ordering::Greater => hi = mid,
                }
            }
            None
        } else {
            (0..n)
                .map(|i| self.t.added(i))
                .find(|&(i, _)| i == id)
                .map(|(_, f)| f)
        }
    }

    /// Whether `id` is an added token flagged special.
    pub fn is_special(&self, id: u32) -> bool {
        self.added_flags(id).is_some_and(|f| f & ADDED_SPECIAL != 0)
    }

    /// Encodes `text` into `out`; returns the number of ids. If `out` is too
    /// small, the error says how many ids the text needs.
    pub fn encode(
        &self,
        text: &str,
        out: &mut [u32],
        scratch: &mut EncodeScratch<'_>,
    ) -> Result<usize, Error> {
        self.encode_with(text, EncodeOptions::default(), out, scratch)
    }

    /// [`Tokenizer::encode`] with options.
    pub fn encode_with(
        &self,
        text: &str,
        options: EncodeOptions,
        out: &mut [u32],
        scratch: &mut EncodeScratch<'_>,
    ) -> Result<usize, Error> {
        self.encode_data(text, &[], options, out, scratch)
    }

    /// [`Tokenizer::encode_with`] of a text whose byte ranges `data` are
    /// data ([`Tokenizer::encode_each_data`]).
    pub fn encode_data(
        &self,
        text: &str,
        data: &[Range<usize>],
        options: EncodeOptions,
        out: &mut [u32],
        scratch: &mut EncodeScratch<'_>,
    ) -> Result<usize, Error> {
        let mut n = 0usize;
        self.encode_each_data(text, data, options, scratch, &mut |id| {
            if let Some(slot) = out.get_mut(n) {
                *slot = id;
            }
            n += 1;
        })?;
        if n > out.len() {
            return Err(Error::BufferTooSmall {
                what: "token ids",
                need: n,
                have: out.len(),
            });
        }
        Ok(n)
    }

    /// Encodes `text`, handing each id to `sink` in order.
    pub fn encode_each(
        &self,
        text: &str,
        options: EncodeOptions,
        scratch: &mut EncodeScratch<'_>,
        sink: &mut dyn FnMut(u32),
    ) -> Result<(), Error> {
        self.encode_each_data(text, &[], options, scratch, sink)
    }

    /// [`Tokenizer::encode_each`] of a text whose byte ranges `data` are
    /// data (a chat message's content, a tool result: text from a request
    /// or a user): no added token, special or not, is matched on a byte of
    /// them, so data never becomes control tokens (`<|im_start|>` in a
    /// message is text). Outside them added tokens match as usual, and
    /// the text between added tokens is pre-tokenized as one piece across
    /// the ranges' edges, so a text without added-token strings encodes
    /// exactly as [`Tokenizer::encode_each`] encodes it.
    pub fn encode_each_data(
        &self,
        text: &str,
        data: &[Range<usize>],
        options: EncodeOptions,
        scratch: &mut EncodeScratch<'_>,
        sink: &mut dyn FnMut(u32),
    ) -> Result<(), Error> {
        let EncodeScratch { text: tbuf, work } = scratch;
        self.split_added(
            text,
            false,
            options.split_special,
            data,
            &mut |seg| match seg {
                Seg::Added(id) => {
                    sink(id);
                    Ok(())
                }
                Seg::Text(s, plain) => self.encode_segment(s, plain, options, tbuf, work, sink),
            },
        )
    }

    /// A segment between added tokens: normalize, then the rest (`plain`:
    /// it holds data, so no normalized added token is matched in it).
    fn encode_segment(
        &self,
        s: &str,
        plain: bool,
        options: EncodeOptions,
        tbuf: &mut [u8],
        work: &mut [u32],
        sink: &mut dyn FnMut(u32),
    ) -> Result<(), Error> {
        if self.t.normalizer != NORMALIZER_NFC || nfc::is_nfc_quick(s) {
            return self.encode_normalized(s, plain, options, work, sink);
        }
        if self.any_normalized_added {
            // Normalized added tokens may span any boundary: one chunk.
            let n = nfc::nfc_into(s, tbuf, work)?;
            let norm = core::str::from_utf8(tbuf.get(..n).unwrap_or(&[])).unwrap_or("");
            return self.encode_normalized(norm, plain, options, work, sink);
        }
        // Chunks that NFC and the pre-tokenizer both handle independently.
        let bytes = s.as_bytes();
        let mut start = 0;
        for p in 1..=bytes.len() {
            let cut = p == bytes.len() || {
                let (prev, cur) = (bytes[p - 1], bytes[p]);
                let after_line = (prev == b'\n' || prev == b'\r')
                    && cur < 0x80
                    && !matches!(cur, b' ' | 0x09..=0x0D);
                let before_word =
                    cur == b' ' && bytes.get(p + 1).is_some_and(|b| b.is_ascii_alphabetic());
                after_line || before_word
            };
            if !cut {
                continue;
            }
            let Some(chunk) = s.get(start..p) else {
                continue;
            };
            start = p;
            if nfc::is_nfc_quick(chunk) {
                self.encode_normalized(chunk, plain, options, work, sink)?;
            } else {
                let n = nfc::nfc_into(chunk, tbuf, work)?;
                let norm = core::str::from_utf8(tbuf.get(..n).unwrap_or(&[])).unwrap_or("");
                self.encode_normalized(norm, plain, options, work, sink)?;
            }
        }
        Ok(())
    }

    /// Normalized text: added tokens flagged normalized, then pre-tokens and BPE.
    fn encode_normalized(
        &self,
        s: &str,
        plain: bool,
        options: EncodeOptions,
        work: &mut [u32],
        sink: &mut dyn FnMut(u32),
    ) -> Result<(), Error> {
        if !self.any_normalized_added || plain {
            return self.encode_plain(s, work, sink);
        }
        self.split_added(s, true, options.split_special, &[], &mut |seg| match seg {
            Seg::Added(id) => {
                sink(id);
                Ok(())
            }
            Seg::Text(p, _) => self.encode_plain(p, work, sink),
        })
    }

    fn encode_plain(
        &self,
        s: &str,
        work: &mut [u32],
        sink: &mut dyn FnMut(u32),
    ) -> Result<(), Error> {
        for piece in pretokenize::Pieces::new(s) {
            bpe::bpe(&self.t, piece.as_bytes(), work, sink)?;
        }
        Ok(())
    }

    /// The longest added token (of the pass: `normalized` or not) that
    /// matches `s` at byte `p`: `(end, id, flags)`.
    fn added_at(&self, s: &[u8], p: usize, normalized: bool) -> Option<(usize, u32, u32)> {
        let b = *s.get(p)?;
        if self.first_bytes[(b >> 5) as usize] & (1 << (b & 31)) == 0 {
            return None;
        }
        let mut best: Option<(usize, u32, u32)> = None;
        for i in 0..self.t.n_added as usize {
            let (id, flags) = self.t.added(i);
            if (flags & ADDED_NORMALIZED != 0) != normalized {
                continue;
            }
            let len = self.added_text(id, flags, |tok| {
                let hit = !tok.is_empty() && s.get(p..).is_some_and(|r| r.starts_with(tok));
                if hit {
                    tok.len()
                } else {
                    0
                }
            });
            if len > 0 && best.is_none_or(|(e, _, _)| p + len > e) {
                best = Some((p + len, id, flags));
            }
        }
        best
    }

    /// Splits `s` on added tokens as Hugging Face's `AddedVocabulary` does:
    /// leftmost-longest, non-overlapping matches; matches that are skipped
    /// (special ones when splitting specials, or failing single_word) still
    /// consume their text. A match meeting a `data` range is no match (the
    /// search goes on at the next byte); text segments say whether they
    /// meet one.
    fn split_added(
        &self,
        s: &str,
        normalized: bool,
        split_special: bool,
        data: &[Range<usize>],
        f: &mut dyn FnMut(Seg<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let bytes = s.as_bytes();
        let mut done = 0; // end of the last emitted segment
        let mut pos = 0; // where the search resumes
        while pos < bytes.len() {
            let Some((start, end, id, flags)) = (pos..bytes.len()).find_map(|p| {
                self.added_at(bytes, p, normalized)
                    .filter(|&(e, _, _)| !meets(data, p, e))
                    .map(|(e, id, fl)| (p, e, id, fl))
            }) else {
                break;
            };
            pos = end;
            if split_special && flags & ADDED_SPECIAL != 0 {
                continue;
            }
            let (Some(before), Some(after)) = (s.get(..start), s.get(end..)) else {
                continue;
            };
            if flags & ADDED_SINGLE_WORD != 0 {
                let start_space = before.chars().next_back().is_none_or(|c| !is_word(c));
                let stop_space = after.chars().next().is_none_or(|c| !is_word(c));
                if !start_space || !stop_space {
                    continue;
                }
            }
            let mut start = start;
            let mut stop = end;
            if flags & ADDED_LSTRIP != 0 {
                let trimmed = before.trim_end_matches(|c| class(c).is_space()).len();
                start = trimmed.max(done);
            }
            if flags & ADDED_RSTRIP != 0 {
                let trimmed = after.trim_start_matches(|c| class(c).is_space()).len();
                stop += after.len() - trimmed;
            }
            let start = start.max(done);
            if done < start {
                if let Some(t) = s.get(done..start) {
                    f(Seg::Text(t, meets(data, done, start)))?;
                }
            }
            f(Seg::Added(id))?;
            done = stop.max(done);
        }
        if done < bytes.len() {
            if let Some(t) = s.get(done..) {
                f(Seg::Text(t, meets(data, done, bytes.len())))?;
            }
        }
        Ok(())
    }

    /// Hands the bytes `id` decodes to (Hugging Face's ByteLevel decoder:
    /// added tokens whose characters are all in the byte-level alphabet map
    /// through it, others are their UTF-8 text) to `f`.
    pub fn token_decode_bytes(&self, id: u32, f: &mut dyn FnMut(&[u8])) -> Result<(), Error> {
        let bytes = self.t.token_bytes(id).ok_or(Error::OutOfRange {
            what: "token id",
            value: id as usize,
            max: self.t.n_tokens.saturating_sub(1) as usize,
        })?;
        let Some(flags) = self.added_flags(id) else {
            f(bytes);
            return Ok(());
        };
        self.added_text(id, flags, |bytes| {
            if bytes.iter().all(|b| (0x21..=0x7E).contains(b)) {
                f(bytes);
                return;
            }
            let text = core::str::from_utf8(bytes).unwrap_or("");
            if !text.is_empty() && text.chars().all(|c| byte_level_byte(c).is_some()) {
                for c in text.chars() {
                    if let Some(b) = byte_level_byte(c) {
                        f(&[b]);
                    }
                }
            } else {
                f(bytes);
            }
        });
        Ok(())
    }

    /// Decodes `ids` into `out` as Hugging Face's `decode` does (invalid UTF-8
    /// becomes U+FFFD); returns the length in bytes. `skip_special` drops the
    /// added tokens flagged special. Ids outside the table are an error.
    pub fn decode_into(
        &self,
        ids: &[u32],
        skip_special: bool,
        out: &mut [u8],
    ) -> Result<usize, Error> {
        let mut d = StreamDecoder::new(skip_special);
        let mut w = Writer {
            out,
            len: 0,
            need: 0,
        };
        for &id in ids {
            d.step_with(self, id, &mut |s| w.put(s))?;
        }
        d.finish_with(&mut |s| w.put(s));
        w.result("decoded text")
    }
}

/// Writes text into a byte buffer, counting what does not fit.
struct Writer<'o> {
    out: &'o mut [u8],
    len: usize,
    need: usize,
}

impl Writer<'_> {
    fn put(&mut self, s: &str) {
        self.need += s.len();
        if let Some(dst) = self.out.get_mut(self.len..self.len + s.len()) {
            dst.copy_from_slice(s.as_bytes());
            self.len += s.len();
        } else {
            self.len = self.out.len() + 1; // mark overflow: later writes fail too
        }
    }
    fn result(&self, what: &'static str) -> Result<usize, Error> {
        if self.need > self.out.len() {
            return Err(Error::BufferTooSmall {
                what,
                need: self.need,
                have: self.out.len(),
            });
        }
        Ok(self.need)
    }
}

/// Decodes one id at a time into complete UTF-8 text: bytes of an incomplete
/// character are held back until it completes (or breaks, then it becomes
/// U+FFFD as in a full decode).
#[derive(Clone, Copy, Debug)]
pub struct StreamDecoder {
    utf8: Utf8Lossy,
    skip_special: bool,
}

impl StreamDecoder {
    /// A decoder; `skip_special` drops added tokens flagged special.
    pub fn new(skip_special: bool) -> Self {
        StreamDecoder {
            utf8: Utf8Lossy::default(),
            skip_special,
        }
    }

    /// Bytes held back.
    pub fn pending(&self) -> usize {
        self.utf8.pending()
    }

    /// Takes `id`, handing the text it completes to `emit` (possibly none).
    pub fn step_with(
        &mut self,
        tok: &Tokenizer<'_>,
        id: u32,
        emit: &mut dyn FnMut(&str),
    ) -> Result<(), Error> {
        if self.skip_special && tok.is_special(id) {
            return Ok(());
        }
        let utf8 = &mut self.utf8;
        tok.token_decode_bytes(id, &mut |b| utf8.feed(b, emit))
    }

    /// Takes `id` and writes the text it completes into `out`. If `out` is
    /// too small the decoder is left unchanged and the error gives the size
    /// (at most 3 bytes per token byte plus 4).
    pub fn step<'o>(
        &mut self,
        tok: &Tokenizer<'_>,
        id: u32,
        out: &'o mut [u8],
    ) -> Result<&'o str, Error> {
        let mut trial = *self;
        let mut need = 0usize;
        trial.step_with(tok, id, &mut |s| need += s.len())?;
        let mut w = Writer {
            out,
            len: 0,
            need: 0,
        };
        if need <= w.out.len() {
            self.step_with(tok, id, &mut |s| w.put(s))?;
        } else {
            w.need = need;
        }
        let n = w.result("decoded text chunk")?;
        let out = w.out;
        Ok(core::str::from_utf8(out.get(..n).unwrap_or(&[])).unwrap_or(""))
    }

    /// Ends the stream: held bytes become one U+FFFD.
    pub fn finish_with(&mut self, emit: &mut dyn FnMut(&str)) {
        self.utf8.finish(emit);
    }

    /// Ends the stream into `out` (at most 3 bytes).
    pub fn finish<'o>(&mut self, out: &'o mut [u8]) -> Result<&'o str, Error> {
        if self.pending() > 0 && out.len() < 3 {
            return Err(Error::BufferTooSmall {
                what: "decoded text chunk",
                need: 3,
                have: out.len(),
            });
        }
        let mut w = Writer {
            out,
            len: 0,
            need: 0,
        };
        self.finish_with(&mut |s| w.put(s));
        let n = w.result("decoded text chunk")?;
        let out = w.out;
        Ok(core::str::from_utf8(out.get(..n).unwrap_or(&[])).unwrap_or(""))
    }
}
