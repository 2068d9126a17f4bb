//! The string `format`s the constraint enforces, each a byte automaton over
//! the string's text (no escapes: every format's characters are plain
//! ASCII): `date`, `time` and `date-time` (RFC 3339: `YYYY-MM-DD`, days
//! checked against the month and leap years; `HH:MM:SS`, an optional
//! fraction, then `Z` or `+HH:MM`/`-HH:MM`; `T` between them), `uuid`
//! (8-4-4-4-12 hexadecimal digits), `ipv4` (four decimal octets 0-255
//! without leading zeros) and `email` (a conservative subset of RFC 5322:
//! `local@domain`, the local part of letters, digits and `.!#$%&'*+/=?^_`{|}~-`
//! without a leading, trailing or doubled dot, the domain dot-separated
//! labels of letters, digits and inner hyphens, at least two), `hostname`
//! (RFC 1123: such labels of 1 to 63 bytes, one or more, at most 253 bytes
//! in all), `uri` (RFC 3986's `scheme:` and its parts, with one narrowing:
//! no user information and no `[...]` host) and `uri-reference` (the same,
//! or a relative reference).
//!
//! A state is a `u64`: the phase and position in its low bits, the fields
//! read so far above them (see [`St`]).

/// No format.
pub const NONE: u8 = 0;
pub const DATE: u8 = 1;
pub const TIME: u8 = 2;
pub const DATE_TIME: u8 = 3;
pub const UUID: u8 = 4;
pub const IPV4: u8 = 5;
pub const EMAIL: u8 = 6;
pub const HOSTNAME: u8 = 7;
pub const URI: u8 = 8;
pub const URI_REFERENCE: u8 = 9;

/// The formats enforced, in code order from [`DATE`].
const ENFORCED: &str = "date time date-time uuid ipv4 email hostname uri uri-reference";
/// The formats JSON Schema defines that are not enforced here.
const DEFINED: &str = "iri iri-reference uri-template ipv6 \
    idn-hostname idn-email json-pointer relative-json-pointer regex duration";

/// The format a `format` value names: `Some(NONE)` for a name JSON Schema
/// does not define (an annotation), `None` for one it defines that is not
/// enforced here.
pub fn by_name(name: &str) -> Option<u8> {
    if let Some(i) = ENFORCED.split(' ').position(|n| n == name) {
        return Some(DATE + i as u8);
    }
    (!DEFINED.split_ascii_whitespace().any(|n| n == name)).then_some(NONE)
}

/// The fields of a state.
#[derive(Clone, Copy)]
struct St {
    /// Bytes read in the current part.
    pos: u8,
    /// The part: a format's own meaning (date-time: 0 date, 1 time, ...).
    part: u8,
    /// Numbers read so far (year, month; octet; ...), and the current one.
    a: u16,
    b: u16,
    cur: u16,
    /// A flag of the part (a fraction digit seen, a label's last byte a
    /// hyphen, ...).
    flag: bool,
}

impl St {
    fn unpack(s: u64) -> St {
        St {
            pos: s as u8,
            part: (s >> 8) as u8,
            a: (s >> 16) as u16,
            b: (s >> 32) as u16,
            cur: (s >> 48) as u16 & 0x7fff,
            flag: s >> 63 != 0,
        }
    }

    fn pack(self) -> u64 {
        self.pos as u64
            | (self.part as u64) << 8
            | (self.a as u64) << 16
            | (self.b as u64) << 32
            | ((self.cur & 0x7fff) as u64) << 48
            | (self.flag as u64) << 63
    }
}

fn digit(b: u8) -> Option<u16> {
    b.is_ascii_digit().then(|| (b - b'0') as u16)
}

fn days_in(year: u16, month: u16) -> u16 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A two-digit field from 1 (`from_one`) or 0 to `max`: its first digit
/// `cur` (at `first`) or both; every digit taken leaves a value to reach.
fn two_digits(s: &mut St, first: bool, c: u8, max: u16, from_one: bool) -> Option<u16> {
    let d = digit(c)?;
    if first {
        (d <= max / 10).then_some(())?;
        s.cur = d;
        return Some(d);
    }
    let v = s.cur * 10 + d;
    (v <= max && (v > 0 || !from_one)).then_some(v)
}

/// `c` at position `pos` of `YYYY-MM-DD` (`a` the year, from 1; `b` the
/// month).
fn date_step(mut s: St, c: u8) -> Option<St> {
    match s.pos {
        0..=3 => {
            s.a = s.a * 10 + digit(c)?;
            (s.pos < 3 || s.a > 0).then_some(())?;
        }
        4 | 7 if c == b'-' => {}
        5 | 6 => {
            let first = s.pos == 5;
            s.b = two_digits(&mut s, first, c, 12, true)?;
        }
        8 | 9 => {
            let (first, max) = (s.pos == 8, days_in(s.a, s.b));
            two_digits(&mut s, first, c, max, true)?;
        }
        _ => return None,
    }
    s.pos += 1;
    Some(s)
}

/// `b` in a time: part 0 `HH:MM:SS` (`pos` 0..8), part 1 after the
/// seconds (a fraction's `.`, or the offset), part 2 the fraction's digits
/// (`flag`: one seen), part 3 the offset `HH:MM` after its sign, part 4
/// done (`Z` or the offset read).
fn time_step(mut s: St, c: u8) -> Option<St> {
    let first = s.pos.is_multiple_of(3);
    match (s.part, s.pos) {
        (0 | 3, 0 | 1) => {
            two_digits(&mut s, first, c, 23, false)?;
        }
        (0, 2 | 5) | (3, 2) if c == b':' => {}
        (0 | 3, 3 | 4) | (0, 6 | 7) => {
            two_digits(&mut s, first, c, 59, false)?;
        }
        (1, _) | (2, _) => {
            return match c {
                b'.' if s.part == 1 => Some(St {
                    part: 2,
                    flag: false,
                    ..s
                }),
                b'0'..=b'9' if s.part == 2 => Some(St { flag: true, ..s }),
                b'Z' if s.part == 1 || s.flag => Some(St { part: 4, ..s }),
                b'+' | b'-' if s.part == 1 || s.flag => Some(St {
                    part: 3,
                    pos: 0,
                    ..s
                }),
                _ => None,
            }
        }
        _ => return None,
    }
    s.pos += 1;
    if s.part == 0 && s.pos == 8 {
        s.part = 1;
    } else if s.part == 3 && s.pos == 5 {
        s.part = 4;
    }
    Some(s)
}

fn time_done(s: St) -> bool {
    s.part == 4
}

/// Characters of an email's local part besides letters and digits.
const LOCAL: &[u8] = b".!#$%&'*+/=?^_`{|}~-";

/// A URI's parts (`St::part`): the scheme (or, in a reference, what may
/// still be one), just after `scheme:`, after a leading `/`, the host,
/// the port, the path, the query, the fragment, and a reference's first
/// path segment (no `:` in it).
const SCHEME: u8 = 0;
const HIER: u8 = 1;
const SLASH: u8 = 2;
const HOST: u8 = 3;
const PORT: u8 = 4;
const PATH: u8 = 5;
const QUERY: u8 = 6;
const FRAGMENT: u8 = 7;
const FIRST_SEGMENT: u8 = 8;

/// RFC 3986's `unreserved` and `sub-delims`.
fn uri_plain(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&c)
}

/// `c` in a URI (`reference`: or a relative reference) at `s`; `cur` counts
/// the hexadecimal digits a `%` still needs.
fn uri_step(mut s: St, c: u8, reference: bool) -> Option<St> {
    if s.cur > 0 {
        c.is_ascii_hexdigit().then_some(())?;
        s.cur -= 1;
        return Some(s);
    }
    let pchar = uri_plain(c) || c == b'%' || c == b':' || c == b'@';
    let to = |part| St { part, ..s };
    let next = match (s.part, c) {
        (SCHEME, _)
            if c.is_ascii_alphabetic()
                || (s.pos > 0 && b"+-.".contains(&c))
                || (s.pos > 0 && c.is_ascii_digit()) =>
        {
            St {
                pos: s.pos.saturating_add(1),
                ..s
            }
        }
        (SCHEME, b':') if s.pos > 0 => to(HIER),
        (SCHEME, b'/') if reference && s.pos == 0 => to(SLASH),
        (SCHEME | FIRST_SEGMENT, b'/') if reference => to(PATH),
        (SCHEME | FIRST_SEGMENT, _) if reference && pchar && c != b':' => to(FIRST_SEGMENT),
        (HIER, b'/') => to(SLASH),
        (SLASH, b'/') => to(HOST),
        (HOST, _) if uri_plain(c) || c == b'%' => s,
        (HOST, b':') => to(PORT),
        (PORT, _) if c.is_ascii_digit() => s,
        (SCHEME | FIRST_SEGMENT, _) if !reference => return None,
        (HOST | PORT | PATH | FIRST_SEGMENT, b'/') => to(PATH),
        (HIER | SLASH | PATH, _) if pchar => to(PATH),
        (QUERY | FRAGMENT, _) if pchar || c == b'/' || c == b'?' => s,
        (_, b'?') if s.part != FRAGMENT => to(QUERY),
        (_, b'#') if s.part != FRAGMENT => to(FRAGMENT),
        _ => return None,
    };
    Some(St {
        cur: (c == b'%') as u16 * 2,
        ..next
    })
}

/// The state after `c` (`None`: `c` cannot come here).
pub fn step(format: u8, state: u64, c: u8) -> Option<u64> {
    let mut s = St::unpack(state);
    let s = match format {
        DATE => date_step(s, c)?,
        TIME => time_step(s, c)?,
        DATE_TIME => {
            if s.part == 0 {
                if s.pos == 10 {
                    (c == b'T').then_some(())?;
                    St {
                        part: 1,
                        pos: 0,
                        ..s
                    }
                } else {
                    date_step(s, c)?
                }
            } else {
                let t = time_step(
                    St {
                        part: s.part - 1,
                        ..s
                    },
                    c,
                )?;
                St {
                    part: t.part + 1,
                    ..t
                }
            }
        }
        UUID => {
            let dash = matches!(s.pos, 8 | 13 | 18 | 23);
            if s.pos >= 36 || (dash && c != b'-') || (!dash && !c.is_ascii_hexdigit()) {
                return None;
            }
            s.pos += 1;
            s
        }
        IPV4 => {
            // `a` octets done, `pos` digits of the current one.
            if c == b'.' {
                if s.pos == 0 || s.a == 3 {
                    return None;
                }
                St {
                    a: s.a + 1,
                    pos: 0,
                    cur: 0,
                    ..s
                }
            } else {
                let d = digit(c)?;
                if (s.pos == 1 && s.cur == 0) || s.cur * 10 + d > 255 {
                    return None;
                }
                St {
                    pos: s.pos + 1,
                    cur: s.cur * 10 + d,
                    ..s
                }
            }
        }
        EMAIL => {
            // Part 0 the local part, 1 the domain (`a` labels ended by a
            // dot); `pos` bytes of the current atom or label (at most
            // 63), `flag` its last byte a hyphen.
            match (s.part, c) {
                (0, b'@') if s.pos > 0 => St {
                    part: 1,
                    pos: 0,
                    ..s
                },
                (0, b'.') if s.pos > 0 => St { pos: 0, ..s },
                (0, c) if c.is_ascii_alphanumeric() || LOCAL.contains(&c) && c != b'.' => {
                    if s.pos == 63 {
                        return None;
                    }
                    St {
                        pos: s.pos + 1,
                        ..s
                    }
                }
                (1, b'.') if s.pos > 0 && !s.flag => St {
                    a: s.a + 1,
                    pos: 0,
                    ..s
                },
                (1, c) if c.is_ascii_alphanumeric() || (c == b'-' && s.pos > 0) => {
                    if s.pos == 63 {
                        return None;
                    }
                    St {
                        pos: s.pos + 1,
                        flag: c == b'-',
                        ..s
                    }
                }
                _ => return None,
            }
        }
        HOSTNAME => {
            // `a`: bytes in all; `pos`: in the label; `flag`: its last
            // one a hyphen.
            if s.a >= 253 {
                return None;
            }
            s.a += 1;
            match c {
                b'.' if s.pos > 0 && !s.flag => St { pos: 0, ..s },
                b'-' if s.pos > 0 && s.pos < 63 => St {
                    pos: s.pos + 1,
                    flag: true,
                    ..s
                },
                _ if c.is_ascii_alphanumeric() && s.pos < 63 => St {
                    pos: s.pos + 1,
                    flag: false,
                    ..s
                },
                _ => return None,
            }
        }
        URI | URI_REFERENCE => uri_step(s, c, format == URI_REFERENCE)?,
        _ => s,
    };
    Some(s.pack())
}

/// Whether a string may end in `state`.
/// Beside `maxLength`: for a format whose values can grow without end,
/// the most bytes any state needs to end (`a@b.c` from the start of an
/// email; a byte is taken only if a value can still end within the
/// length); `None` for the fixed shapes, refused beside a length.
pub fn tail(format: u8) -> Option<u16> {
    match format {
        EMAIL => Some(5),
        HOSTNAME => Some(1),
        URI | URI_REFERENCE => Some(2),
        _ => None,
    }
}

/// The fewest bytes that end a value from `state`, of a format that has a
/// [`tail`] (at most that).
pub fn shortest(format: u8, state: u64) -> u16 {
    let s = St::unpack(state);
    match format {
        // `a@b.c`, `@b.c`; in the domain, `b.c`, `.c`, `c` or nothing.
        EMAIL => match (s.part, s.pos > 0 && !s.flag, s.a > 0) {
            (0, _, _) if s.pos == 0 => 5,
            (0, _, _) => 4,
            (_, false, false) => 3,
            (_, true, false) => 2,
            (_, false, true) => 1,
            (_, true, true) => 0,
        },
        HOSTNAME => (!done(format, state)) as u16,
        // The `%`'s digits; a scheme's `a:` or `:`.
        URI if s.part == SCHEME => s.cur + 2 - (s.pos > 0) as u16,
        _ => s.cur,
    }
}

pub fn done(format: u8, state: u64) -> bool {
    let s = St::unpack(state);
    match format {
        DATE => s.pos == 10,
        TIME => time_done(s),
        DATE_TIME => s.part == 5,
        UUID => s.pos == 36,
        IPV4 => s.a == 3 && s.pos > 0,
        EMAIL => s.part == 1 && s.a > 0 && s.pos > 0 && !s.flag,
        HOSTNAME => s.pos > 0 && !s.flag,
        URI => s.part != SCHEME && s.cur == 0,
        URI_REFERENCE => s.cur == 0,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    fn accepts(format: u8, text: &str) -> bool {
        let mut s = 0u64;
        for &c in text.as_bytes() {
            match step(format, s, c) {
                Some(n) => s = n,
                None => return false,
            }
        }
        done(format, s)
    }

    /// Every prefix a format takes can still end as one of its values
    /// (a constraint never leads into a dead end): each accepted byte,
    /// tried at every position of every value of the cases, leaves a
    /// state from which some completion is accepted.
    #[test]
    fn no_prefix_is_a_dead_end() {
        // Completions over the formats' byte alphabet, breadth-first,
        // each state once.
        fn completes(format: u8, s: u64) -> bool {
            let mut seen = std::collections::HashSet::from([s]);
            let mut queue = std::collections::VecDeque::from([s]);
            while let Some(s) = queue.pop_front() {
                if done(format, s) {
                    return true;
                }
                for &c in b"019aAfFTZ:+-.@" {
                    if let Some(n) = step(format, s, c) {
                        if seen.len() < 50_000 && seen.insert(n) {
                            queue.push_back(n);
                        }
                    }
                }
            }
            false
        }
        for format in [
            DATE,
            TIME,
            DATE_TIME,
            UUID,
            IPV4,
            EMAIL,
            HOSTNAME,
            URI,
            URI_REFERENCE,
        ] {
            let mut frontier = std::vec![0u64];
            for _ in 0..12 {
                let mut next = std::vec::Vec::new();
                for &s in &frontier {
                    assert!(completes(format, s), "{format} {s:x}");
                    for c in 0..=255u8 {
                        if let Some(n) = step(format, s, c) {
                            if next.len() < 40 && !next.contains(&n) {
                                next.push(n);
                            }
                        }
                    }
                }
                frontier = next;
            }
        }
    }

    #[test]
    fn each_format_takes_its_values_and_nothing_else() {
        let cases: [(u8, &[&str], &[&str]); 9] = [
            (
                DATE,
                &["2024-02-29", "2023-12-31", "0001-01-01"],
                &[
                    "2023-02-29",
                    "2024-13-01",
                    "2024-04-31",
                    "2024-1-01",
                    "2024-01-00",
                    "20240101",
                    "2024-01-011",
                    "0000-01-01",
                ],
            ),
            (
                TIME,
                &["23:59:59Z", "00:00:00.5+01:00", "12:30:00-05:30"],
                &[
                    "24:00:00Z",
                    "12:60:00Z",
                    "12:00:00",
                    "12:00:00.Z",
                    "12:00:00+1:00",
                    "12:00Z",
                ],
            ),
            (
                DATE_TIME,
                &["2024-02-29T12:00:00Z", "1999-12-31T23:59:59.999+14:00"],
                &[
                    "2024-02-29 12:00:00Z",
                    "2024-02-30T12:00:00Z",
                    "2024-02-29T12:00:00",
                    "2024-02-29",
                ],
            ),
            (
                UUID,
                &[
                    "123e4567-e89b-12d3-a456-426614174000",
                    "ABCDEF00-0000-0000-0000-000000000000",
                ],
                &[
                    "123e4567e89b12d3a456426614174000",
                    "123e4567-e89b-12d3-a456-42661417400",
                    "g23e4567-e89b-12d3-a456-426614174000",
                ],
            ),
            (
                IPV4,
                &["192.168.0.1", "0.0.0.0", "255.255.255.255"],
                &[
                    "256.0.0.1",
                    "01.2.3.4",
                    "1.2.3",
                    "1.2.3.4.5",
                    "1..2.3",
                    "1.2.3.4.",
                ],
            ),
            (
                EMAIL,
                &["a@b.co", "first.last+tag@mail.example.org", "x_y@a-b.io"],
                &[
                    "invalid_email",
                    "a@b",
                    "@b.co",
                    "a.@b.co",
                    "a..b@c.co",
                    "a@-b.co",
                    "a@b-.co",
                    "a@b..co",
                    "a b@c.co",
                ],
            ),
            (
                HOSTNAME,
                &[
                    "localhost",
                    "a-b.example.com",
                    "1.2.3.4",
                    "xn--bcher-kva.de",
                ],
                &["", "-a.com", "a-.com", "a..com", "a.com.", "a_b.com", "a b"],
            ),
            (
                URI,
                &[
                    "http://example.com/a/b?c=d&e#f",
                    "https://h:8080",
                    "mailto:a@b.co",
                    "urn:isbn:0451450523",
                    "file:///etc/hosts",
                    "a+b.c-d:x%2Fy",
                    "s:",
                    "http://h//a//b",
                ],
                &[
                    "",
                    "example.com",
                    "/a/b",
                    "1http://x",
                    "http://h:80x/",
                    "http://a b",
                    "http://h/%2",
                    "http://h/%zz",
                    "http://h/a#b#c",
                    "http://[::1]/",
                    "http://h/a\\b",
                ],
            ),
            (
                URI_REFERENCE,
                &[
                    "",
                    "a/b",
                    "../x?y#z",
                    "//h:1/p",
                    "/abs",
                    "#frag",
                    "?q",
                    "http://e.com/",
                    "a%20b",
                ],
                &["a:b:c d", "1a:b", "%4", "a b", "#a#b"],
            ),
        ];
        for (format, good, bad) in cases {
            for t in good {
                assert!(accepts(format, t), "{format} {t}");
            }
            for t in bad {
                assert!(!accepts(format, t), "{format} {t}");
            }
        }
        assert_eq!(by_name("date-time"), Some(DATE_TIME));
        assert_eq!(by_name("uri"), Some(URI));
        assert_eq!(by_name("ipv6"), None);
        assert_eq!(by_name("path"), Some(NONE));
    }
}
