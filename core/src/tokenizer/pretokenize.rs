//! The Qwen2 pre-tokenizer, by hand: Hugging Face's `Split` with the regex
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! and behaviour `Isolated`. Oniguruma tries the alternatives in order at each
//! position and takes the first that matches (with backtracking inside it);
//! every character starts some match, so the pieces tile the text.

use super::unicode::class;

/// The character at byte `i` of `s` and its length.
fn at(s: &str, i: usize) -> Option<(char, usize)> {
    let c = s.get(i..)?.chars().next()?;
    Some((c, c.len_utf8()))
}

/// End of the run of characters from `i` for which `f` holds.
fn run(s: &str, mut i: usize, f: impl Fn(char) -> bool) -> usize {
    while let Some((c, l)) = at(s, i) {
        if !f(c) {
            break;
        }
        i += l;
    }
    i
}

/// Length of a contraction after an apostrophe at `i` (`s t re ve m ll d`,
/// case-insensitive; Oniguruma's case folding also lets U+017F `ſ` stand for `s`).
fn contraction(s: &str, i: usize) -> Option<usize> {
    let (c1, l1) = at(s, i)?;
    let c1 = if c1 == '\u{17F}' { 's' } else { c1 };
    match c1.to_ascii_lowercase() {
        's' | 't' | 'm' | 'd' => return Some(l1),
        _ => {}
    }
    let (c2, l2) = at(s, i + l1)?;
    match (c1.to_ascii_lowercase(), c2.to_ascii_lowercase()) {
        ('r', 'e') | ('v', 'e') | ('l', 'l') => Some(l1 + l2),
        _ => None,
    }
}

fn is_letter(c: char) -> bool {
    class(c).is_letter()
}

fn is_newline(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// End (byte offset) of the piece that starts at `i`; `i` must be a character
/// boundary before the end of `s`. Always greater than `i`.
pub fn piece_end(s: &str, i: usize) -> usize {
    let Some((c, l)) = at(s, i) else {
        return s.len().max(i);
    };
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if c == '\'' {
        if let Some(n) = contraction(s, i + l) {
            return i + l + n;
        }
    }
    let k = class(c);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if k.is_letter() {
        return run(s, i, is_letter);
    }
    if !is_newline(c) && !k.is_number() {
        if let Some((c2, _)) = at(s, i + l) {
            if is_letter(c2) {
                return run(s, i + l, is_letter);
            }
        }
    }
    // \p{N}
    if k.is_number() {
        return i + l;
    }
    // ' '?[^\s\p{L}\p{N}]+[\r\n]*
    let punct = |c: char| {
        let k = class(c);
        !k.is_space() && !k.is_letter() && !k.is_number()
    };
    let from = if c == ' ' { i + l } else { i };
    let end = run(s, from, punct);
    if end > from {
        return run(s, end, is_newline);
    }
    // Only white space is left.
    let end = run(s, i, |c| class(c).is_space());
    // \s*[\r\n]+: up to the last line break of the run.
    let mut last_nl = None;
    let mut j = i;
    while j < end {
        let Some((c, l)) = at(s, j) else { break };
        j += l;
        if is_newline(c) {
            last_nl = Some(j);
        }
    }
    if let Some(e) = last_nl {
        return e;
    }
    // \s+(?!\S): the run, less its last character if a non-space follows.
    if end >= s.len() {
        return end.max(i + l);
    }
    let last_start = s
        .get(..end)
        .and_then(|h| h.char_indices().next_back())
        .map(|(p, _)| p);
    match last_start {
        Some(p) if p > i => p,
        // \s+: a single white-space character.
        _ => end.max(i + l),
    }
}

/// The pieces of `s`, in order.
pub struct Pieces<'s> {
    s: &'s str,
    i: usize,
}

impl<'s> Pieces<'s> {
    /// Splits `s`.
    pub fn new(s: &'s str) -> Self {
        Pieces { s, i: 0 }
    }
}

impl<'s> Iterator for Pieces<'s> {
    type Item = &'s str;
    fn next(&mut self) -> Option<&'s str> {
        if self.i >= self.s.len() {
            return None;
        }
        let mut end = piece_end(self.s, self.i);
        if end <= self.i {
            end = self.s.len();
        }
        let p = self.s.get(self.i..end);
        self.i = end;
        p
    }
}

#[cfg(test)]
mod tests {
    use super::Pieces;

    fn check(s: &str, want: &[&str]) {
        let mut it = Pieces::new(s);
        for w in want {
            assert_eq!(it.next(), Some(*w), "{s:?}");
        }
        assert_eq!(it.next(), None, "{s:?}");
    }

    /// Splits observed with Hugging Face `tokenizers` 0.23.3.
    #[test]
    fn splits_like_hf() {
        check("a  1", &["a", " ", " ", "1"]);
        check("  \n  a", &["  \n", " ", " a"]);
        check("\t\tb", &["\t", "\tb"]);
        check("\u{3000}\u{3000}a", &["\u{3000}", "\u{3000}a"]);
        check("a\u{a0}b", &["a", "\u{a0}b"]);
        check(" 's", &[" '", "s"]);
        check("'st", &["'s", "t"]);
        check("'\u{17F}tx", &["'\u{17F}", "tx"]);
        check("'Re", &["'Re"]);
        check("don't", &["don", "'t"]);
        check("x'\u{130}", &["x", "'\u{130}"]);
        check("12345", &["1", "2", "3", "4", "5"]);
        check("Hello, world!", &["Hello", ",", " world", "!"]);
        check("   ", &["   "]);
        check("", &[]);
    }
}
