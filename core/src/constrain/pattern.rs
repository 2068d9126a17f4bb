//! `pattern`: a regular-expression subset compiled to a position automaton
//! (Glushkov's construction: one state per character class of the
//! expression, no empty moves), run over a string's bytes.
//!
//! The subset: literals, `.`, classes `[...]` and `[^...]` with ranges,
//! the escapes `\d \D \w \W \s \S` and escaped punctuation, groups `(...)`
//! and `(?:...)`, alternation `|`, the quantifiers `* + ? {n} {n,} {n,m}`
//! (a lazy `?` after one changes nothing here), `^` at the start and `$`
//! at the end (JSON Schema's patterns are not anchored otherwise: a value
//! matches when some part of it does). Anything else (lookaround,
//! back-references, `\b`, `\u`, anchors inside) is refused.
//!
//! The characters a string may hold here are printable ASCII and space,
//! without `"` and `\`: every class is cut to them, so a value the
//! automaton takes needs no escape (a value with an escape or a non-ASCII
//! character is never taken: the constraint stays on the safe side). At
//! most 62 classes after the repetitions are written out; states from
//! which no value can end are dropped, so every prefix taken can be
//! completed.
//!
//! Beside `minLength` and `maxLength` a pattern is run with the lengths
//! of the values each state can still end after ([`Pattern::can_end_within`]):
//! a byte is taken only while some value of an allowed length remains.
//! That needs each state's lengths to be a whole range (no gaps, as
//! `^(aa)*$` has); a pattern whose are not is refused beside lengths.

/// Most classes of one pattern.
pub const MAX_POSITIONS: usize = 62;
/// The state before any byte.
const START: usize = 63;

/// A compiled pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pattern {
    /// The bytes (ASCII) each position takes.
    class: [u128; MAX_POSITIONS],
    /// The positions that may follow each position (`START`: the first).
    follow: [u64; 64],
    /// The states a value may end in.
    last: u64,
    /// The states from which a value can still end.
    live: u64,
    /// Of each live state, the fewest and the most bytes a value can
    /// still take after it (`u8::MAX`: no most).
    reach: [(u8, u8); 64],
    /// Whether every live state's lengths are its whole `reach` range.
    ranges: bool,
    /// The least and most characters of its values, of the pattern's own
    /// (a counted atom; else 0 and `u16::MAX`).
    own: (u16, u16),
}

/// The bytes a string may hold unescaped that the automaton takes.
const ALLOWED: u128 = {
    let mut m = 0u128;
    let mut b = 0x20;
    while b < 0x7f {
        if b != b'"' as u32 && b != b'\\' as u32 {
            m |= 1 << b;
        }
        b += 1;
    }
    m
};

fn range(lo: u8, hi: u8) -> u128 {
    let mut m = 0u128;
    let mut b = lo;
    while b <= hi && b < 128 {
        m |= 1 << b;
        b += 1;
    }
    m
}

const DIGIT: u128 = {
    let mut m = 0u128;
    let mut b = b'0';
    while b <= b'9' {
        m |= 1 << b;
        b += 1;
    }
    m
};

fn word() -> u128 {
    range(b'a', b'z') | range(b'A', b'Z') | DIGIT | 1 << b'_'
}

/// A part of the expression: its positions `lo..hi` (contiguous), the
/// positions that can come first and last, whether it takes the empty
/// string.
#[derive(Clone, Copy)]
struct Frag {
    lo: u8,
    hi: u8,
    first: u64,
    last: u64,
    empty: bool,
}

/// `a|b` of two fragments, `a`'s positions before `b`'s.
fn either(a: Frag, b: Frag) -> Frag {
    Frag {
        lo: a.lo,
        hi: b.hi,
        first: a.first | b.first,
        last: a.last | b.last,
        empty: a.empty || b.empty,
    }
}

/// The parser's operator stack entries.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    /// `(`: the fragments below it are outside the group.
    Open,
    /// `|` between alternatives.
    Alt,
}

struct Builder {
    p: Pattern,
    n: usize,
}

impl Builder {
    fn class(&mut self, c: u128) -> Option<Frag> {
        if self.n >= MAX_POSITIONS {
            return None;
        }
        let i = self.n;
        self.p.class[i] = c & ALLOWED;
        self.n += 1;
        Some(Frag {
            lo: i as u8,
            hi: i as u8 + 1,
            first: 1 << i,
            last: 1 << i,
            empty: false,
        })
    }

    fn link(&mut self, from: u64, to: u64) {
        let mut bits = from;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.p.follow[i] |= to;
        }
    }

    fn concat(&mut self, a: Frag, b: Frag) -> Frag {
        self.link(a.last, b.first);
        Frag {
            lo: a.lo,
            hi: b.hi,
            first: a.first | if a.empty { b.first } else { 0 },
            last: b.last | if b.empty { a.last } else { 0 },
            empty: a.empty && b.empty,
        }
    }

    /// A copy of `f`'s positions after the last one.
    fn copy(&mut self, f: Frag) -> Option<Frag> {
        let (lo, hi) = (f.lo as usize, f.hi as usize);
        let at = self.n;
        if at + (hi - lo) > MAX_POSITIONS {
            return None;
        }
        let shift = |m: u64| -> u64 {
            let inside = m & (((1u64 << hi) - 1) & !((1u64 << lo) - 1));
            (inside >> lo) << at
        };
        for i in lo..hi {
            self.p.class[at + i - lo] = self.p.class[i];
            self.p.follow[at + i - lo] = shift(self.p.follow[i]);
        }
        self.n += hi - lo;
        Some(Frag {
            lo: at as u8,
            hi: (at + hi - lo) as u8,
            first: shift(f.first),
            last: shift(f.last),
            empty: f.empty,
        })
    }

    /// `f` repeated `min` to `max` times (`None`: unbounded).
    fn repeat(&mut self, f: Frag, min: u32, max: Option<u32>) -> Option<Frag> {
        // Bounds past the positions there are refused (every copy of a
        // class takes one; an empty group's copies would only loop).
        if max.is_some_and(|m| m < min || m > MAX_POSITIONS as u32) || min > MAX_POSITIONS as u32 {
            return None;
        }
        let star = |b: &mut Builder, g: Frag| {
            b.link(g.last, g.first);
            Frag { empty: true, ..g }
        };
        let opt = |g: Frag| Frag { empty: true, ..g };
        // The copies: the first is `f` itself.
        let mut out: Option<Frag> = None;
        let mut used = false;
        let mut next = |b: &mut Builder| -> Option<Frag> {
            if used {
                b.copy(f)
            } else {
                used = true;
                Some(f)
            }
        };
        for _ in 0..min {
            let g = next(self)?;
            out = Some(match out {
                Some(o) => self.concat(o, g),
                None => g,
            });
        }
        match max {
            None => {
                let g = next(self)?;
                let g = star(self, g);
                out = Some(match out {
                    Some(o) => self.concat(o, g),
                    None => g,
                });
            }
            Some(m) => {
                for _ in min..m {
                    let g = next(self)?;
                    let g = opt(g);
                    out = Some(match out {
                        Some(o) => self.concat(o, g),
                        None => g,
                    });
                }
            }
        }
        Some(out.unwrap_or(Frag {
            lo: f.lo,
            hi: f.lo,
            first: 0,
            last: 0,
            empty: true,
        }))
    }
}

/// An escape's class (`c` after the `\`), `None` where refused.
fn escape(c: u8) -> Option<u128> {
    Some(match c {
        b'd' => DIGIT,
        b'D' => ALLOWED & !DIGIT,
        b'w' => word(),
        b'W' => ALLOWED & !word(),
        b's' => 1 << b' ',
        b'S' => ALLOWED & !(1 << b' '),
        c if c.is_ascii_punctuation() => 1 << c,
        _ => return None,
    })
}

/// Reads a class after its `[`: the class and the bytes read.
fn bracket(t: &[u8]) -> Option<(u128, usize)> {
    let mut i = 0;
    let negate = t.first() == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut m = 0u128;
    let mut first = true;
    loop {
        let c = *t.get(i)?;
        if c == b']' && !first {
            i += 1;
            break;
        }
        first = false;
        let (lo, single) = if c == b'\\' {
            let e = *t.get(i + 1)?;
            i += 2;
            let cls = escape(e)?;
            if cls.count_ones() != 1 {
                m |= cls;
                continue;
            }
            (cls.trailing_zeros() as u8, cls)
        } else {
            if c >= 0x80 {
                return None;
            }
            i += 1;
            (c, 1u128 << c)
        };
        // A range `lo-hi` (a `-` before `]` is itself).
        if t.get(i) == Some(&b'-') && t.get(i + 1).is_some_and(|&h| h != b']') {
            let mut h = t[i + 1];
            i += 2;
            if h == b'\\' {
                let e = escape(*t.get(i)?)?;
                i += 1;
                if e.count_ones() != 1 {
                    return None;
                }
                h = e.trailing_zeros() as u8;
            }
            if h < lo || h >= 0x80 {
                return None;
            }
            m |= range(lo, h);
        } else {
            m |= single;
        }
    }
    Some((if negate { ALLOWED & !m } else { m }, i))
}

/// Compiles `text`; `None`: outside the subset, or too large. Two forms
/// are written anew first: top-level alternatives with their own anchors
/// (`^a|b$` is `(^a)|(b$)`), as one anchored pattern; and a whole pattern
/// of one atom repeated `{m,n}` times past the positions (`^[a-z]{1,255}$`),
/// as the atom repeated any number of times within lengths of its own
/// ([`Pattern::own_lengths`]).
pub fn compile(text: &[u8]) -> Option<Pattern> {
    let mut alternatives = text.len() + 1;
    let mut anchored = false;
    let mut written: heapless::Vec<u8, 1024> = heapless::Vec::new();
    for (k, alt) in top_level(text).enumerate() {
        alternatives = k + 1;
        anchored |= alt.starts_with(b"^") || (alt.ends_with(b"$") && !alt.ends_with(b"\\$"));
        let (body, start) = match alt.strip_prefix(b"^") {
            Some(b) => (b, &b""[..]),
            None => (alt, &b".*"[..]),
        };
        let (body, end) = match body.strip_suffix(b"$") {
            Some(b) if !body.ends_with(b"\\$") => (b, &b""[..]),
            _ => (body, &b".*"[..]),
        };
        let sep = if k == 0 { &b"^(?:"[..] } else { &b"|"[..] };
        for part in [sep, start, b"(?:", body, b")", end] {
            written.extend_from_slice(part).ok()?;
        }
    }
    written.extend_from_slice(b")$").ok()?;
    if alternatives > 1 && anchored {
        return compile_one(&written);
    }
    compile_one(text).or_else(|| counted_atom(text))
}

/// `text`'s alternatives outside every group and class.
fn top_level(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let (mut depth, mut class, mut escaped, mut from, mut i) = (0i32, false, false, 0, 0);
    core::iter::from_fn(move || {
        while i <= text.len() {
            let c = text.get(i).copied();
            i += 1;
            match c {
                _ if escaped => escaped = false,
                Some(b'\\') => escaped = true,
                Some(b'[') if !class => class = true,
                Some(b']') if class => class = false,
                Some(b'(') if !class => depth += 1,
                Some(b')') if !class => depth -= 1,
                Some(b'|') if !class && depth == 0 => {
                    let alt = &text[from..i - 1];
                    from = i;
                    return Some(alt);
                }
                None => return Some(&text[from..]),
                _ => {}
            }
        }
        None
    })
}

/// `^A{m,n}$` (`{m,}`, `{m}`) for one atom `A` (a class, an escape, `.` or
/// a character): `^A*$` with lengths `m..=n` of its own.
fn counted_atom(text: &[u8]) -> Option<Pattern> {
    let t = text.strip_prefix(b"^")?.strip_suffix(b"$")?;
    let brace = t.iter().rposition(|&c| c == b'{')?;
    let (atom, quant) = (&t[..brace], t[brace + 1..].strip_suffix(b"}")?);
    let one = match atom {
        [b'[', .., b']'] => bracket(&atom[1..]).is_some_and(|(_, n)| n == atom.len() - 1),
        [b'\\', _] | [_] => atom != b"(" && atom != b"|",
        _ => false,
    };
    if !one {
        return None;
    }
    let quant = core::str::from_utf8(quant).ok()?;
    let (least, most) = match quant.split_once(',') {
        None => (quant.parse().ok()?, quant.parse().ok()?),
        Some((a, "")) => (a.parse().ok()?, u16::MAX),
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
    };
    let mut star: heapless::Vec<u8, 512> = heapless::Vec::new();
    for part in [&b"^"[..], atom, b"*$"] {
        star.extend_from_slice(part).ok()?;
    }
    let mut p = compile_one(&star)?;
    (least <= most).then_some(())?;
    p.own = (least, most);
    Some(p)
}

/// Compiles `text` as it is (see [`compile`]).
fn compile_one(text: &[u8]) -> Option<Pattern> {
    let mut b = Builder {
        p: Pattern {
            class: [0; MAX_POSITIONS],
            follow: [0; 64],
            last: 0,
            live: 0,
            reach: [(0, 0); 64],
            ranges: true,
            own: (0, u16::MAX),
        },
        n: 0,
    };
    let (mut t, mut anchored_start, mut anchored_end) = (text, false, false);
    if let Some(rest) = t.strip_prefix(b"^") {
        t = rest;
        anchored_start = true;
    }
    if t.ends_with(b"$") && !t.ends_with(b"\\$") {
        t = &t[..t.len() - 1];
        anchored_end = true;
    }
    // Unanchored: any characters around the expression.
    let mut frags: heapless::Vec<Frag, 64> = heapless::Vec::new();
    let mut ops: heapless::Vec<(Op, usize), 32> = heapless::Vec::new();
    // Fragments since the current group or alternative began, to
    // concatenate when it ends.
    let mut i = 0;
    if !anchored_start {
        let any = b.class(ALLOWED)?;
        let any = b.repeat(any, 0, None)?;
        frags.push(any).ok()?;
    }
    let fold =
        |b: &mut Builder, frags: &mut heapless::Vec<Frag, 64>, from: usize| -> Option<Frag> {
            let mut out: Option<Frag> = None;
            for k in from..frags.len() {
                let g = frags[k];
                out = Some(match out {
                    Some(o) => b.concat(o, g),
                    None => g,
                });
            }
            frags.truncate(from);
            out.or(Some(Frag {
                lo: b.n as u8,
                hi: b.n as u8,
                first: 0,
                last: 0,
                empty: true,
            }))
        };
    // The start of the current sequence (after `(` or `|`).
    let mut seq_start = frags.len();
    while i < t.len() {
        let c = t[i];
        i += 1;
        let atom = match c {
            b'(' => {
                if t.get(i) == Some(&b'?') {
                    if t.get(i + 1) != Some(&b':') {
                        return None;
                    }
                    i += 2;
                }
                ops.push((Op::Open, seq_start)).ok()?;
                seq_start = frags.len();
                continue;
            }
            b'|' => {
                // `^a|b$` is `(^a)|(b$)`: anchors with an alternation
                // outside every group are refused.
                if (anchored_start || anchored_end) && !ops.iter().any(|o| o.0 == Op::Open) {
                    return None;
                }
                let f = fold(&mut b, &mut frags, seq_start)?;
                frags.push(f).ok()?;
                ops.push((Op::Alt, seq_start)).ok()?;
                seq_start = frags.len();
                continue;
            }
            b')' => {
                let mut f = fold(&mut b, &mut frags, seq_start)?;
                // The alternatives of this group, innermost last.
                loop {
                    let (op, start) = ops.pop()?;
                    match op {
                        Op::Alt => f = either(frags.pop()?, f),
                        Op::Open => {
                            seq_start = start;
                            break;
                        }
                    }
                }
                f
            }
            b'[' => {
                let (m, n) = bracket(&t[i..])?;
                i += n;
                b.class(m)?
            }
            b'.' => b.class(ALLOWED)?,
            b'\\' => {
                let e = escape(*t.get(i)?)?;
                i += 1;
                b.class(e)?
            }
            b'^' | b'$' | b'*' | b'+' | b'?' | b'{' | b'}' | b']' => return None,
            c if c < 0x80 => b.class(1 << c)?,
            _ => return None,
        };
        // Its quantifier (`len` its bytes).
        let (min, max, len) = match t.get(i) {
            Some(b'*') => (0, None, 1),
            Some(b'+') => (1, None, 1),
            Some(b'?') => (0, Some(1), 1),
            Some(b'{') => {
                let close = t[i..].iter().position(|&c| c == b'}')?;
                let inner = core::str::from_utf8(&t[i + 1..i + close]).ok()?;
                let (lo, hi) = match inner.split_once(',') {
                    None => (inner.parse().ok()?, Some(inner.parse().ok()?)),
                    Some((lo, "")) => (lo.parse().ok()?, None),
                    Some((lo, hi)) => (lo.parse().ok()?, Some(hi.parse().ok()?)),
                };
                (lo, hi, close + 1)
            }
            _ => (1, Some(1), 0),
        };
        let quantified = len > 0;
        if quantified {
            i += len;
            // A lazy quantifier takes the same values.
            if t.get(i) == Some(&b'?') {
                i += 1;
            }
            if matches!(t.get(i), Some(b'*' | b'+' | b'?' | b'{')) {
                return None;
            }
        }
        let f = if quantified {
            b.repeat(atom, min, max)?
        } else {
            atom
        };
        frags.push(f).ok()?;
    }
    let mut f = fold(&mut b, &mut frags, seq_start)?;
    while let Some((op, _)) = ops.pop() {
        if op == Op::Open {
            return None;
        }
        f = either(frags.pop()?, f);
    }
    frags.push(f).ok()?;
    let mut f = fold(&mut b, &mut frags, 0)?;
    if !anchored_end {
        let any = b.class(ALLOWED)?;
        let any = b.repeat(any, 0, None)?;
        f = b.concat(f, any);
    }
    let p = &mut b.p;
    p.follow[START] = f.first;
    p.last = f.last | if f.empty { 1 << START } else { 0 };
    // Live states: those that end a value or lead to one (positions whose
    // class lost every byte lead nowhere).
    let usable = (0..b.n).fold(0u64, |m, i| if p.class[i] != 0 { m | 1 << i } else { m });
    let mut live = p.last & (usable | 1 << START);
    loop {
        let mut more = live;
        for i in (0..b.n).chain(core::iter::once(START)) {
            if (i == START || usable >> i & 1 == 1) && p.follow[i] & live & usable != 0 {
                more |= 1 << i;
            }
        }
        if more == live {
            break;
        }
        live = more;
    }
    p.live = live;
    p.lengths(live & (usable | 1 << START));
    // A pattern no value matches leaves the constraint no way to end.
    (live >> START & 1 == 1).then_some(*p)
}

/// Most steps walked from a state to find its lengths' period.
const MAX_WALK: usize = 250;

impl Pattern {
    /// `reach` and `ranges`: from each state of `states`, the states after
    /// k bytes in turn, until they die out or repeat; the lengths a value
    /// can end after are the k where they hold a last state (and, past a
    /// repeat, those of the cycle again).
    fn lengths(&mut self, states: u64) {
        for from in 0..64 {
            if states >> from & 1 == 0 {
                continue;
            }
            let mut walk: heapless::Vec<u64, MAX_WALK> = heapless::Vec::new();
            let mut set = 1u64 << from;
            let mut cycle = None;
            let mut gap = loop {
                if set == 0 {
                    break false;
                }
                if let Some(j) = walk.iter().position(|&w| w == set) {
                    cycle = Some(j);
                    break false;
                }
                if walk.push(set).is_err() {
                    // No end or period found within the walk.
                    break true;
                }
                set = self.successors(set) & states;
            };
            let ends = |k: usize| walk[k] & self.last != 0;
            let first = (0..walk.len()).find(|&k| ends(k)).unwrap_or(0);
            let last = (0..walk.len()).rfind(|&k| ends(k)).unwrap_or(0);
            let most = match cycle {
                Some(j) if (j..walk.len()).any(ends) => {
                    gap |= !(first.min(j)..walk.len()).all(ends);
                    u8::MAX
                }
                _ => {
                    gap |= !(first..=last).all(ends);
                    last.min(254) as u8
                }
            };
            self.ranges &= !gap;
            self.reach[from] = (first.min(254) as u8, most);
        }
    }

    /// Whether, in `set` after `chars` characters, some value can still
    /// end with at least `min` and at most `max` characters.
    pub fn can_end_within(&self, set: u64, chars: u16, min: u16, max: u16) -> bool {
        let mut bits = set & self.live;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let (fewest, most) = self.reach[i];
            let most = if most == u8::MAX {
                u16::MAX
            } else {
                chars + most as u16
            };
            if chars.saturating_add(fewest as u16) <= max && most >= min {
                return true;
            }
        }
        false
    }

    /// The least and most characters of a value, of the pattern's own.
    pub fn own_lengths(&self) -> (u16, u16) {
        self.own
    }

    /// Whether the lengths a value can end after form a range from every
    /// state (so [`Pattern::can_end_within`] can steer it).
    pub fn lengths_are_ranges(&self) -> bool {
        self.ranges
    }
}

impl Pattern {
    /// The state before any byte.
    pub const START: u64 = 1 << START;

    /// The positions that may follow those of `set`, on any byte.
    fn successors(&self, set: u64) -> u64 {
        let mut next = 0u64;
        let mut bits = set;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            next |= self.follow[i];
        }
        next
    }

    /// The states after `c` (`None`: no value continues with it).
    pub fn step(&self, set: u64, c: u8) -> Option<u64> {
        if c >= 0x80 || self.class_has_none(c) {
            return None;
        }
        let next = self.successors(set);
        let mut took = 0u64;
        let mut bits = next & self.live;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if i < MAX_POSITIONS && self.class[i] >> c & 1 == 1 {
                took |= 1 << i;
            }
        }
        (took != 0).then_some(took)
    }

    fn class_has_none(&self, c: u8) -> bool {
        ALLOWED >> c & 1 == 0
    }

    /// Whether a value may end in `set`.
    pub fn done(&self, set: u64) -> bool {
        set & self.last != 0
    }

    /// The states after `text` from the start (0: no value begins so).
    pub fn run(&self, text: &[u8]) -> u64 {
        text.iter()
            .try_fold(Self::START, |set, &c| self.step(set, c))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(p: &str, s: &str) -> bool {
        let Some(pat) = compile(p.as_bytes()) else {
            panic!("{p} not compiled");
        };
        let mut set = Pattern::START;
        for &c in s.as_bytes() {
            match pat.step(set, c) {
                Some(n) => set = n,
                None => return false,
            }
        }
        pat.done(set)
    }

    #[test]
    fn the_subset_matches_as_ecmascript_does() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("^[a-z]+$", &["abc", "z"], &["", "aB", "a1"]),
            (
                "^\\d{4}-\\d{2}$",
                &["2024-01"],
                &["2024-1", "20245-01", "2024-011"],
            ),
            ("abc", &["abc", "xabcx", "abcabc"], &["ab", "acb", ""]),
            ("^(ab|cd)*$", &["", "ab", "abcdab"], &["a", "abc", "ba"]),
            ("^a{2,3}b?$", &["aa", "aaa", "aab"], &["a", "aaaa", "ab"]),
            ("^[^0-9 ]+$", &["ab-c"], &["a1", "a b"]),
            ("^#[0-9a-fA-F]{6}$", &["#00ffAA"], &["#00ffA", "00ffaa"]),
            (
                "^(?:https?|ftp)://[^ /]+(/.*)?$",
                &["http://a.b/c", "ftp://x"],
                &["http:/a", "https://", "mailto:x"],
            ),
            ("^\\w+@\\w+\\.com$", &["a_1@b.com"], &["a@b.org", "@b.com"]),
            (
                "^[A-Z][a-z]*( [A-Z][a-z]*)*$",
                &["Ann Lee", "A"],
                &["ann", "Ann  Lee"],
            ),
            ("x*", &["", "yyy", "x"], &[]),
            // Top-level alternatives anchor alone.
            (
                "^dev|rc|stable$",
                &["dev1", "xrcx", "a stable", "rc"],
                &["adev", "stable ", "d"],
            ),
            ("^$|^[a-z]+$", &["", "ab"], &["a1", " "]),
            (
                "^(http)|(https)://(.*)$",
                &["httpx", "xhttps://y"],
                &["xhttp", "htt", "xhttps:/"],
            ),
        ];
        for (p, good, bad) in cases {
            for s in *good {
                assert!(matches(p, s), "{p} {s}");
            }
            for s in *bad {
                assert!(!matches(p, s), "{p} {s}");
            }
        }
        for p in [
            "a(?=b)", "(a)\\1", "\\bx", "a^b", "(ab", "ab)", "a**", "[b-a]", "\\u0041", "a{3,2}",
            "é",
        ] {
            assert!(compile(p.as_bytes()).is_none(), "{p}");
        }
        // Too many positions once repetitions are written out, or bounds
        // past them (an empty group's too: it must not loop).
        assert!(compile(b"^(?:[a-z]){70}$").is_none() && compile(b"[a-z]{70}").is_none());
        // One atom counted past the positions: any number of it, within
        // lengths of its own.
        let p = compile(b"^[0-9a-zA-Z_-]{1,255}$").unwrap();
        assert_eq!(p.own_lengths(), (1, 255));
        assert!(p.done(p.run(b"a_Z-9")) && p.run(b"a.b") == 0);
        assert_eq!(
            compile(b"^\\d{70,}$").unwrap().own_lengths(),
            (70, u16::MAX)
        );
        assert_eq!(compile(b"^a{3}$").unwrap().own_lengths(), (0, u16::MAX));
        assert!(compile(b"^(){0,4000000000}$").is_none());
        assert!(compile(b"^(a?){0,63}$").is_none() && compile(b"^(a?){0,62}$").is_some());
        // No value matches: refused, not a dead end.
        assert!(compile(b"^\"$").is_none());
    }
}
