//! NFC normalization (Unicode 9.0 data, as Hugging Face `tokenizers` uses),
//! with a quick check so that text already in NFC costs one scan.
//!
//! The normalizer streams: it decomposes each character, keeps the current
//! combining sequence (a starter and the marks after it) in a caller buffer,
//! sorts the marks by combining class as they arrive, composes the sequence
//! when the next starter comes, and writes finished text as UTF-8.

use super::unicode::{ccc, compose, decompose_full, norm_props, Qc};
use crate::error::Error;

/// Whether `s` is certainly in NFC (quick check "yes"). `false` means it may
/// not be: normalize it.
pub fn is_nfc_quick(s: &str) -> bool {
    // Every character below U+0300 is NFC_QC=Yes with combining class 0, and
    // its UTF-8 bytes are all below 0xCC.
    if s.bytes().all(|b| b < 0xCC) {
        return true;
    }
    let mut last = 0u8;
    for c in s.chars() {
        if (c as u32) < 0x300 {
            last = 0;
            continue;
        }
        let (qc, k) = norm_props(c);
        if qc != Qc::Yes || (k != 0 && last > k) {
            return false;
        }
        last = k;
    }
    true
}

struct Normalizer<'o, 'w> {
    out: &'o mut [u8],
    len: usize,
    /// The current combining sequence, as code points.
    seq: &'w mut [u32],
    n: usize,
}

fn to_char(v: u32) -> char {
    char::from_u32(v).unwrap_or('\u{FFFD}')
}

impl Normalizer<'_, '_> {
    fn put(&mut self, c: char) -> Result<(), Error> {
        let l = c.len_utf8();
        let have = self.out.len();
        match self.out.get_mut(self.len..self.len + l) {
            Some(dst) => {
                c.encode_utf8(dst);
                self.len += l;
                Ok(())
            }
            None => Err(Error::BufferTooSmall {
                what: "tokenizer text scratch (NFC output)",
                need: self.len + l,
                have,
            }),
        }
    }

    fn push(&mut self, c: char) -> Result<usize, Error> {
        let have = self.seq.len();
        let slot = self.seq.get_mut(self.n).ok_or(Error::BufferTooSmall {
            what: "tokenizer work scratch (combining sequence)",
            need: self.n + 1,
            have,
        })?;
        *slot = c as u32;
        self.n += 1;
        Ok(self.n - 1)
    }

    fn starter_first(&self) -> bool {
        self.n > 0 && self.seq.first().is_some_and(|&c| ccc(to_char(c)) == 0)
    }

    /// Composes the marks of the sequence into its starter, in place.
    fn compose_pending(&mut self) {
        if !self.starter_first() {
            return;
        }
        let mut s = to_char(self.seq[0]);
        let mut kept = 1;
        let mut last_kept: Option<u8> = None;
        for i in 1..self.n {
            let m = to_char(self.seq[i]);
            let k = ccc(m);
            let blocked = last_kept.is_some_and(|c| c >= k);
            match (blocked, compose(s, m)) {
                (false, Some(c)) => s = c,
                _ => {
                    self.seq[kept] = m as u32;
                    kept += 1;
                    last_kept = Some(k);
                }
            }
        }
        self.seq[0] = s as u32;
        self.n = kept;
    }

    fn flush(&mut self) -> Result<(), Error> {
        for i in 0..self.n {
            self.put(to_char(self.seq[i]))?;
        }
        self.n = 0;
        Ok(())
    }

    fn feed(&mut self, d: char) -> Result<(), Error> {
        let k = ccc(d);
        if k == 0 {
            self.compose_pending();
            if self.n == 1 && self.starter_first() {
                if let Some(c) = compose(to_char(self.seq[0]), d) {
                    self.seq[0] = c as u32;
                    return Ok(());
                }
            }
            self.flush()?;
            self.push(d)?;
            return Ok(());
        }
        let floor = usize::from(self.starter_first());
        let mut at = self.push(d)?;
        // Stable insertion by combining class among the marks.
        while at > floor && ccc(to_char(self.seq[at - 1])) > k {
            self.seq.swap(at - 1, at);
            at -= 1;
        }
        Ok(())
    }
}

/// Writes the NFC form of `s` into `out`; returns its length in bytes. `work`
/// holds one combining sequence (a starter and its marks), so it needs as
/// many entries as the longest such sequence, plus one.
pub fn nfc_into(s: &str, out: &mut [u8], work: &mut [u32]) -> Result<usize, Error> {
    let mut nz = Normalizer {
        out,
        len: 0,
        seq: work,
        n: 0,
    };
    let mut buf = ['\0'; 4];
    for c in s.chars() {
        // Nothing below U+00C0 decomposes.
        if (c as u32) < 0xC0 {
            nz.feed(c)?;
            continue;
        }
        let n = decompose_full(c, &mut buf);
        for &d in buf.iter().take(n) {
            nz.feed(d)?;
        }
    }
    nz.compose_pending();
    nz.flush()?;
    Ok(nz.len)
}

#[cfg(test)]
mod tests {
    use super::{is_nfc_quick, nfc_into};

    fn nfc<'o>(s: &str, out: &'o mut [u8]) -> &'o str {
        let mut work = [0u32; 32];
        let n = nfc_into(s, out, &mut work).unwrap();
        core::str::from_utf8(&out[..n]).unwrap()
    }

    #[test]
    fn composes_reorders_and_decomposes() {
        let mut b = [0u8; 64];
        assert_eq!(nfc("e\u{301}", &mut b), "\u{e9}");
        assert_eq!(nfc("\u{1100}\u{1161}\u{11a8}", &mut b), "\u{ac01}");
        assert_eq!(nfc("\u{c5}\u{323}", &mut b), "\u{1ea0}\u{30a}");
        assert_eq!(nfc("a\u{301}\u{328}", &mut b), "\u{105}\u{301}");
        assert_eq!(nfc("\u{958}", &mut b), "\u{915}\u{93c}");
        assert_eq!(nfc("\u{212b}", &mut b), "\u{c5}");
        assert_eq!(nfc("\u{301}x", &mut b), "\u{301}x");
        // Composes only in Unicode 13+; HF's normalizer has Unicode 9.0.
        assert_eq!(nfc("\u{11935}\u{11930}", &mut b), "\u{11935}\u{11930}");
    }

    #[test]
    fn quick_check_and_small_buffers() {
        assert!(is_nfc_quick("plain \u{e9} \u{4e2d} \u{ac00}"));
        assert!(!is_nfc_quick("e\u{301}"));
        assert!(!is_nfc_quick("\u{323}\u{301}\u{300}\u{323}"));
        let mut small = [0u8; 1];
        let mut work = [0u32; 4];
        assert!(nfc_into("ab", &mut small, &mut work).is_err());
        assert!(nfc_into(
            "a\u{301}\u{302}\u{303}\u{304}\u{305}",
            &mut [0u8; 64],
            &mut work
        )
        .is_err());
    }
}
