//! Decoding: token bytes, joined, made valid UTF-8 the way Hugging Face's
//! ByteLevel decoder does (`String::from_utf8_lossy` over the whole byte
//! string: each maximal invalid subpart becomes one U+FFFD), incrementally.

/// U+FFFD REPLACEMENT CHARACTER.
const REPLACEMENT: &str = "\u{FFFD}";

/// An incremental lossy UTF-8 decoder: feed bytes in any chunks, get the same
/// text as `String::from_utf8_lossy` on their concatenation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Utf8Lossy {
    buf: [u8; 4],
    have: u8,
    need: u8,
    lo: u8,
    hi: u8,
}

impl Utf8Lossy {
    /// Bytes held back (an incomplete character).
    pub fn pending(&self) -> usize {
        self.have as usize
    }

    /// Feeds `bytes`, handing complete text to `emit` (valid runs of `bytes`
    /// are passed through without copying).
    pub fn feed(&mut self, bytes: &[u8], emit: &mut dyn FnMut(&str)) {
        let mut i = 0;
        // Finish a held character first.
        while self.need > 0 {
            let Some(&b) = bytes.get(i) else { return };
            if self.accept(b) {
                i += 1;
                if self.need == 0 {
                    let n = self.have as usize;
                    self.have = 0;
                    match core::str::from_utf8(&self.buf[..n]) {
                        Ok(s) => emit(s),
                        Err(_) => emit(REPLACEMENT),
                    }
                }
            } else {
                self.have = 0;
                self.need = 0;
                emit(REPLACEMENT);
            }
        }
        let mut rest = bytes.get(i..).unwrap_or(&[]);
        while !rest.is_empty() {
            match core::str::from_utf8(rest) {
                Ok(s) => {
                    emit(s);
                    return;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    if let Ok(s) = core::str::from_utf8(good) {
                        if !s.is_empty() {
                            emit(s);
                        }
                    }
                    match e.error_len() {
                        Some(n) => {
                            emit(REPLACEMENT);
                            rest = bad.get(n..).unwrap_or(&[]);
                        }
                        None => {
                            // An incomplete character at the end: hold it.
                            for &b in bad {
                                if self.need == 0 {
                                    self.start(b);
                                } else {
                                    self.accept(b);
                                }
                            }
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Starts a multi-byte character with lead byte `b` (known valid lead).
    fn start(&mut self, b: u8) {
        let (need, lo, hi) = crate::json::utf8_lead(b).unwrap_or((0, 0, 0));
        self.buf[0] = b;
        self.have = 1;
        self.need = need;
        self.lo = lo;
        self.hi = hi;
    }

    /// Takes continuation byte `b` if it fits; false if it breaks the character.
    fn accept(&mut self, b: u8) -> bool {
        if b < self.lo || b > self.hi {
            return false;
        }
        if let Some(slot) = self.buf.get_mut(self.have as usize) {
            *slot = b;
        }
        self.have += 1;
        self.need = self.need.saturating_sub(1);
        self.lo = 0x80;
        self.hi = 0xBF;
        true
    }

    /// Ends the stream: an incomplete character becomes one U+FFFD.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&str)) {
        if self.have > 0 {
            emit(REPLACEMENT);
        }
        *self = Utf8Lossy::default();
    }
}

#[cfg(test)]
mod tests {
    use super::Utf8Lossy;

    /// Feeds `bytes` split at every position; the text must not depend on the split.
    fn check(bytes: &[u8], want: &str) {
        for cut in 0..=bytes.len() {
            let mut d = Utf8Lossy::default();
            let mut got = [0u8; 64];
            let mut n = 0;
            let mut emit = |s: &str| {
                got[n..n + s.len()].copy_from_slice(s.as_bytes());
                n += s.len();
            };
            d.feed(&bytes[..cut], &mut emit);
            d.feed(&bytes[cut..], &mut emit);
            d.finish(&mut emit);
            assert_eq!(
                core::str::from_utf8(&got[..n]),
                Ok(want),
                "{bytes:?} cut {cut}"
            );
        }
    }

    /// Expected values are `String::from_utf8_lossy` of the same bytes.
    #[test]
    fn matches_from_utf8_lossy() {
        check(b"abc", "abc");
        check("é😀".as_bytes(), "é😀");
        check(&[0xF0, 0x9F, b'a'], "\u{FFFD}a");
        check(&[0xE9, 0xFF, 0xC3], "\u{FFFD}\u{FFFD}\u{FFFD}");
        check(&[0xED, 0xA0, 0x80], "\u{FFFD}\u{FFFD}\u{FFFD}");
        check(&[0xE0, 0x80], "\u{FFFD}\u{FFFD}");
        check(
            &[0xF4, 0x90, 0x80, 0x80],
            "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}",
        );
        check(&[0xF0, 0x9F, 0x98], "\u{FFFD}");
        check(&[0xC3, 0xA9, 0x80, b'x'], "é\u{FFFD}x");
    }
}
