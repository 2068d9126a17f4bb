//! Lookups in the generated Unicode tables: character classes for the
//! pre-tokenizer, and the normalization data for NFC.

use super::unicode_data::{
    CLASS_RUNS, COMPOSE, DECOMP_FIRSTS, DECOMP_KEYS, DECOMP_SECONDS, NORM_RUNS,
};

/// A character's class, as the pre-tokenizer regex and `\w` see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// None of the others (punctuation, symbols, controls, unassigned).
    Other,
    /// `\p{L}`: Lu Ll Lt Lm Lo.
    Letter,
    /// Nd or Nl (in `\p{N}` and in `\w`).
    Digit,
    /// No (in `\p{N}`, not in `\w`).
    OtherNumber,
    /// White_Space (`\s`).
    Space,
    /// Mn Mc Me (in `\w` only).
    Mark,
    /// Pc (in `\w` only).
    Connector,
    /// So with Other_Alphabetic (in `\w` only).
    AlphaSymbol,
}

impl Class {
    /// In `\p{L}`.
    pub fn is_letter(self) -> bool {
        self == Class::Letter
    }
    /// In `\p{N}`.
    pub fn is_number(self) -> bool {
        matches!(self, Class::Digit | Class::OtherNumber)
    }
    /// In `\s`.
    pub fn is_space(self) -> bool {
        self == Class::Space
    }
}

/// Index of the last entry of `runs` whose start (`entry >> shift`) is <= `cp`.
fn run_index(runs: &[u32], shift: u32, cp: u32) -> usize {
    // runs[0] starts at code point 0, so the answer always exists.
    let n = runs.partition_point(|&e| (e >> shift) <= cp);
    n.saturating_sub(1)
}

/// The class of `c`.
pub fn class(c: char) -> Class {
    let cp = c as u32;
    if cp < 0x80 {
        return match cp {
            0x09..=0x0D | 0x20 => Class::Space,
            0x30..=0x39 => Class::Digit,
            0x41..=0x5A | 0x61..=0x7A => Class::Letter,
            0x5F => Class::Connector,
            _ => Class::Other,
        };
    }
    // The last run starting at or before `cp` (the first starts at 0).
    let run = |i: usize| {
        let b = &CLASS_RUNS[3 * i..3 * i + 3];
        u32::from_le_bytes([b[0], b[1], b[2], 0])
    };
    let (mut lo, mut hi) = (0, CLASS_RUNS.len() / 3);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if run(mid) >> 3 <= cp {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let e = run(lo.saturating_sub(1));
    match e & 7 {
        1 => Class::Letter,
        2 => Class::Digit,
        3 => Class::OtherNumber,
        4 => Class::Space,
        5 => Class::Mark,
        6 => Class::Connector,
        7 => Class::AlphaSymbol,
        _ => Class::Other,
    }
}

/// In the `regex` crate's Unicode `\w` (approximately: Alphabetic is taken as
/// L + Nl + marks + the Other_Alphabetic symbols; see docs/tokenizer.md).
pub fn is_word(c: char) -> bool {
    matches!(
        class(c),
        Class::Letter | Class::Digit | Class::Mark | Class::Connector | Class::AlphaSymbol
    ) || c == '\u{200C}'
        || c == '\u{200D}'
}

/// NFC quick-check value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qc {
    /// Always allowed in NFC.
    Yes,
    /// May compose with what precedes it.
    Maybe,
    /// Never in NFC.
    No,
}

/// `(quick check, canonical combining class)` of `c`.
pub fn norm_props(c: char) -> (Qc, u8) {
    let cp = c as u32;
    if cp < 0x300 {
        return (Qc::Yes, 0);
    }
    let e = NORM_RUNS
        .get(run_index(&NORM_RUNS, 10, cp))
        .copied()
        .unwrap_or(0);
    let qc = match (e >> 8) & 3 {
        0 => Qc::Yes,
        1 => Qc::Maybe,
        _ => Qc::No,
    };
    (qc, (e & 0xFF) as u8)
}

/// Canonical combining class of `c`.
pub fn ccc(c: char) -> u8 {
    norm_props(c).1
}

const MASK21: u64 = (1 << 21) - 1;

fn ch(v: u64) -> Option<char> {
    char::from_u32((v & MASK21) as u32)
}

/// One level of the canonical decomposition of `c` (Hangul excluded):
/// `(first, second)`, second `None` for singletons.
pub fn decompose_once(c: char) -> Option<(char, Option<char>)> {
    let cp = c as u64;
    if cp < 0xC0 {
        return None;
    }
    let i = DECOMP_KEYS.partition_point(|&k| u64::from(k >> 14) < cp);
    let e = decomp_entry(i)?;
    if e >> 42 != cp {
        return None;
    }
    let first = ch(e >> 21)?;
    let second = if e & MASK21 == 0 { None } else { ch(e) };
    Some((first, second))
}

const S_BASE: u32 = 0xAC00;
const L_BASE: u32 = 0x1100;
const V_BASE: u32 = 0x1161;
const T_BASE: u32 = 0x11A7;
const L_COUNT: u32 = 19;
const V_COUNT: u32 = 21;
const T_COUNT: u32 = 28;
const N_COUNT: u32 = V_COUNT * T_COUNT;
const S_COUNT: u32 = L_COUNT * N_COUNT;

/// Writes the full canonical decomposition of `c` into `buf` (at most 4
/// code points in Unicode 9.0); returns how many.
pub fn decompose_full(c: char, buf: &mut [char; 4]) -> usize {
    let cp = c as u32;
    if (S_BASE..S_BASE + S_COUNT).contains(&cp) {
        let s = cp - S_BASE;
        let l = char::from_u32(L_BASE + s / N_COUNT);
        let v = char::from_u32(V_BASE + (s % N_COUNT) / T_COUNT);
        let t = s % T_COUNT;
        let (Some(l), Some(v)) = (l, v) else {
            buf[0] = c;
            return 1;
        };
        buf[0] = l;
        buf[1] = v;
        if t == 0 {
            return 2;
        }
        match char::from_u32(T_BASE + t) {
            Some(t) => {
                buf[2] = t;
                3
            }
            None => 2,
        }
    } else {
        decompose_into(c, buf, 0)
    }
}

/// Recursive decomposition of non-Hangul `c` into `buf[at..]`; returns the new length.
fn decompose_into(c: char, buf: &mut [char; 4], at: usize) -> usize {
    match decompose_once(c) {
        None => {
            if let Some(slot) = buf.get_mut(at) {
                *slot = c;
                at + 1
            } else {
                at
            }
        }
        Some((a, b)) => {
            let n = decompose_into(a, buf, at);
            match b {
                // The second part of a canonical decomposition never decomposes
                // further except through this same recursion; the depth is
                // bounded by the data (at most 3 levels).
                Some(b) => decompose_into(b, buf, n),
                None => n,
            }
        }
    }
}

/// The primary composite of `(a, b)`, Hangul included.
pub fn compose(a: char, b: char) -> Option<char> {
    let (ca, cb) = (a as u32, b as u32);
    // Hangul L + V, LV + T.
    if (L_BASE..L_BASE + L_COUNT).contains(&ca) && (V_BASE..V_BASE + V_COUNT).contains(&cb) {
        return char::from_u32(S_BASE + ((ca - L_BASE) * V_COUNT + (cb - V_BASE)) * T_COUNT);
    }
    if (S_BASE..S_BASE + S_COUNT).contains(&ca)
        && (ca - S_BASE).is_multiple_of(T_COUNT)
        && (T_BASE + 1..T_BASE + T_COUNT).contains(&cb)
    {
        return char::from_u32(ca + (cb - T_BASE));
    }
    // COMPOSE lists DECOMP's recomposed entries by (first, second): the
    // entry's low 42 bits are that pair, its high bits the composite.
    let pair = |i: &u16| decomp_entry(usize::from(*i)).map_or(0, |e| e & PAIR_MASK);
    let key = ((ca as u64) << 21) | cb as u64;
    let i = COMPOSE.partition_point(|e| pair(e) < key);
    let e = decomp_entry(usize::from(*COMPOSE.get(i)?))?;
    if e & PAIR_MASK == key {
        char::from_u32((e >> 42) as u32)
    } else {
        None
    }
}

/// The `(first << 21) | second` bits of a decomposition entry.
const PAIR_MASK: u64 = (1 << 42) - 1;

/// Decomposition `i` (in code point order) as `(cp << 42) | (first << 21)
/// | second`, second 0 for singletons, from its three tables.
fn decomp_entry(i: usize) -> Option<u64> {
    let key = *DECOMP_KEYS.get(i)?;
    let second = *DECOMP_SECONDS.get((key >> 2) as usize & 127)?;
    let first = u64::from(key & 3) << 16 | u64::from(*DECOMP_FIRSTS.get(i)?);
    Some(u64::from(key >> 14) << 42 | first << 21 | u64::from(second))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every two-part decomposition recomposes exactly when COMPOSE lists
    /// it (the exclusions, e.g. U+0958, do not), and to its own code point.
    #[test]
    fn compose_finds_each_listed_pair_and_no_other() {
        let (mut listed, mut excluded) = (0, 0);
        for i in 0..DECOMP_KEYS.len() {
            let e = decomp_entry(i).unwrap();
            let (Some(c), Some(a), Some(b)) = (ch(e >> 42), ch(e >> 21), ch(e)) else {
                continue;
            };
            if e & MASK21 == 0 {
                continue;
            }
            if COMPOSE.iter().any(|&k| usize::from(k) == i) {
                assert_eq!(compose(a, b), Some(c), "{c:?}");
                listed += 1;
            } else {
                assert_eq!(compose(a, b), None, "{c:?} is excluded");
                excluded += 1;
            }
        }
        assert_eq!(listed, COMPOSE.len());
        assert!(excluded > 0);
        assert_eq!(compose('\u{0915}', '\u{093C}'), None); // U+0958, excluded
        assert_eq!(compose('e', '\u{0301}'), Some('é'));
        assert_eq!(compose('e', 'e'), None);
    }
}
