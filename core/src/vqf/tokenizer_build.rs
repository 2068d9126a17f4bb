//! Building the VQF tokenizer tables from a BPE vocabulary, at conversion
//! (feature `alloc`).
//! Sources (tokenizer.json or GGUF metadata) give token strings in GPT-2's
//! byte-level alphabet; the tables store raw bytes, merges sorted by pair,
//! and the byte -> token map, so the engine's tokenizer loads with no work.

use super::tokenizer_section::{self, TokenizerInput};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// GPT-2's `bytes_to_unicode`: the printable character standing for each byte.
pub fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut extra = 0u32;
    for (b, slot) in table.iter_mut().enumerate() {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        *slot = if printable {
            char::from_u32(b as u32).unwrap_or('\0')
        } else {
            extra += 1;
            char::from_u32(255 + extra).unwrap_or('\0')
        };
    }
    table
}

/// Code points of the byte-level alphabet: all below 256 + 68 (the 68
/// non-printable bytes are numbered from U+0100 up).
const ALPHABET_END: usize = 256 + 68;

/// The byte each character of the alphabet stands for, by code point.
pub fn char_to_byte() -> [Option<u8>; ALPHABET_END] {
    let mut inverse = [None; ALPHABET_END];
    for (b, c) in byte_to_char().into_iter().enumerate() {
        if let Some(slot) = inverse.get_mut(c as usize) {
            *slot = Some(b as u8);
        }
    }
    inverse
}

/// Decodes a byte-level token string into raw bytes, or `None` if it holds a
/// character outside the alphabet (`inverse` from [`char_to_byte`]).
pub fn decode_byte_level(s: &str, inverse: &[Option<u8>; ALPHABET_END]) -> Option<Vec<u8>> {
    s.chars()
        .map(|c| inverse.get(c as usize).copied().flatten())
        .collect()
}

/// A token as the source describes it.
pub struct SourceToken {
    /// The token text: byte-level encoded for ordinary tokens, literal for added ones.
    pub text: String,
    /// An added token (special or user-defined): its text is literal.
    pub added: Option<u32>,
    /// A placeholder (GGUF `[PAD..]` / unused): no bytes.
    pub unused: bool,
}

/// The tables, owned, ready for [`tokenizer_section::encode`].
pub struct Tables {
    /// Raw bytes of each token, by id.
    pub tokens: Vec<Vec<u8>>,
    /// `[left, right, rank, merged]`, sorted by (left, right).
    pub merges: Vec<[u32; 4]>,
    /// `(id, flags)` of added tokens.
    pub added: Vec<(u32, u32)>,
    /// The token of each byte.
    pub byte_to_id: [u32; 256],
    /// Normalizer id.
    pub normalizer: u32,
    /// Chat template bytes.
    pub template: Vec<u8>,
}

impl Tables {
    /// Builds the tables. `tokens[i]` is token id `i` (holes allowed as
    /// `unused`); `merges` are the (left, right) strings in rank order.
    pub fn build(
        tokens: &[SourceToken],
        merges: &[(String, String)],
        nfc: bool,
        template: &str,
    ) -> Result<Tables, String> {
        let chars = byte_to_char();
        let inverse = char_to_byte();
        let mut bytes = Vec::with_capacity(tokens.len());
        let mut by_text: BTreeMap<&str, u32> = BTreeMap::new();
        let mut added = Vec::new();
        for (id, t) in tokens.iter().enumerate() {
            let id = id as u32;
            if t.unused {
                bytes.push(Vec::new());
                continue;
            }
            match t.added {
                Some(flags) => {
                    if t.text.is_empty() {
                        return Err(format!("tokenizer: added token {id} is empty"));
                    }
                    bytes.push(t.text.as_bytes().to_vec());
                    added.push((id, flags));
                }
                None => {
                    let b = decode_byte_level(&t.text, &inverse).ok_or_else(|| {
                        format!(
                            "tokenizer: token {id} (\"{}\") is not byte-level text",
                            t.text.escape_debug()
                        )
                    })?;
                    bytes.push(b);
                    by_text.entry(t.text.as_str()).or_insert(id);
                }
            }
        }
        let mut byte_to_id = [0u32; 256];
        for (b, slot) in byte_to_id.iter_mut().enumerate() {
            let c = chars[b].to_string();
            *slot = *by_text
                .get(c.as_str())
                .ok_or_else(|| format!("tokenizer: no token for byte 0x{b:02x}"))?;
        }
        // Later duplicates of a pair win, as Hugging Face's BPE map does.
        let mut pairs: BTreeMap<(u32, u32), (u32, u32)> = BTreeMap::new();
        for (rank, (l, r)) in merges.iter().enumerate() {
            let lid = *by_text.get(l.as_str()).ok_or_else(|| {
                format!(
                    "tokenizer: merge {rank}: unknown token \"{}\"",
                    l.escape_debug()
                )
            })?;
            let rid = *by_text.get(r.as_str()).ok_or_else(|| {
                format!(
                    "tokenizer: merge {rank}: unknown token \"{}\"",
                    r.escape_debug()
                )
            })?;
            let joined = format!("{l}{r}");
            let mid = *by_text.get(joined.as_str()).ok_or_else(|| {
                format!(
                    "tokenizer: merge {rank}: result \"{}\" not in the vocabulary",
                    joined.escape_debug()
                )
            })?;
            pairs.insert((lid, rid), (rank as u32, mid));
        }
        // A BTreeMap iterates in key order: the merges come out sorted by (left, right).
        let merges: Vec<[u32; 4]> = pairs
            .into_iter()
            .map(|((l, r), (rank, m))| [l, r, rank, m])
            .collect();
        Ok(Tables {
            tokens: bytes,
            merges,
            added,
            byte_to_id,
            normalizer: if nfc {
                tokenizer_section::NORMALIZER_NFC
            } else {
                tokenizer_section::NORMALIZER_NONE
            },
            template: template.as_bytes().to_vec(),
        })
    }

    /// Extends the token table with empty tokens up to `n` entries, so every
    /// id the model can produce (its vocabulary is often larger than the
    /// tokenizer's) decodes, to nothing, as Hugging Face does.
    pub fn pad_to(&mut self, n: usize) {
        if self.tokens.len() < n {
            self.tokens.resize(n, Vec::new());
        }
    }

    /// Runs `f` with the borrowed view the encoder takes.
    pub fn with_input<R>(&self, f: impl FnOnce(&TokenizerInput<'_>) -> R) -> R {
        let refs: Vec<&[u8]> = self.tokens.iter().map(|t| t.as_slice()).collect();
        let input = TokenizerInput {
            tokens: &refs,
            merges: &self.merges,
            added: &self.added,
            byte_to_id: &self.byte_to_id,
            normalizer: self.normalizer,
            template: &self.template,
        };
        f(&input)
    }
}

/// Added-token flags from the usual booleans.
pub fn added_flags(
    special: bool,
    lstrip: bool,
    rstrip: bool,
    normalized: bool,
    single_word: bool,
) -> u32 {
    use tokenizer_section::{
        ADDED_LSTRIP, ADDED_NORMALIZED, ADDED_RSTRIP, ADDED_SINGLE_WORD, ADDED_SPECIAL,
    };
    (special as u32 * ADDED_SPECIAL)
        | (lstrip as u32 * ADDED_LSTRIP)
        | (rstrip as u32 * ADDED_RSTRIP)
        | (normalized as u32 * ADDED_NORMALIZED)
        | (single_word as u32 * ADDED_SINGLE_WORD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vqf::tokenizer_section::ADDED_SPECIAL;

    use alloc::vec;

    #[test]
    fn gpt2_alphabet() {
        let t = byte_to_char();
        assert_eq!(t[b'a' as usize], 'a');
        assert_eq!(t[b' ' as usize], '\u{120}'); // 'Ġ'
        assert_eq!(t[b'\n' as usize], '\u{10a}'); // 'Ċ'
        let unique: alloc::collections::BTreeSet<char> = t.iter().copied().collect();
        assert_eq!(unique.len(), 256);
    }

    #[test]
    fn builds_sorted_tables() {
        let chars = byte_to_char();
        let mut tokens: Vec<SourceToken> = chars
            .iter()
            .map(|c| SourceToken {
                text: c.to_string(),
                added: None,
                unused: false,
            })
            .collect();
        tokens.push(SourceToken {
            text: "ab".into(),
            added: None,
            unused: false,
        });
        tokens.push(SourceToken {
            text: "<|x|>".into(),
            added: Some(ADDED_SPECIAL),
            unused: false,
        });
        tokens.push(SourceToken {
            text: "[PAD]".into(),
            added: None,
            unused: true,
        });
        let t = Tables::build(&tokens, &[("a".into(), "b".into())], true, "tpl").unwrap();
        assert_eq!(t.tokens[256], b"ab");
        // Tokens are in byte order, so 'a' is id 97 and 'b' id 98.
        assert_eq!(t.merges, vec![[97, 98, 0, 256]]);
        assert_eq!(t.added, vec![(257, ADDED_SPECIAL)]);
        assert!(t.tokens[258].is_empty());
        let mut sink = Vec::new();
        struct V<'a>(&'a mut Vec<u8>);
        impl crate::vqf::write::Sink for V<'_> {
            fn write(&mut self, b: &[u8]) -> Result<(), crate::Error> {
                self.0.extend_from_slice(b);
                Ok(())
            }
        }
        t.with_input(|i| tokenizer_section::encode(i, &mut V(&mut sink)))
            .unwrap();
        let tables = crate::vqf::tokenizer_section::TokenizerTables::parse(&sink).unwrap();
        assert_eq!(
            tables.merge(tables.byte_id(b'a'), tables.byte_id(b'b')),
            Some((0, 256))
        );
        assert_eq!(tables.token_bytes(257), Some(&b"<|x|>"[..]));
        assert_eq!(tables.chat_template(), b"tpl");
    }
}
