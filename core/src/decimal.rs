//! Decimal text to the nearest `f64` or `f32`, correctly rounded (ties to
//! even), without tables and without an allocator.
//!
//! core's `str::parse::<f64>` rounds correctly too, but its fast path brings a
//! 10 KB table of powers of five into every binary; JSON numbers (configs,
//! requests) and command-line values are few and short, so the classic
//! decimal-shift conversion serves them: the digits are kept as a decimal
//! number, halved or doubled by powers of two until they lie in [1/2, 1),
//! then the mantissa's bits are shifted out and rounded. It is exact for any
//! input: at most `MAX_DIGITS` significant digits are kept, enough to decide
//! every rounding of an `f64` (the longest decimal a halfway point between
//! two subnormals has is 767 digits), and any dropped nonzero digit is kept
//! as a sticky flag.

/// Significant digits kept; more are only a sticky "greater than" flag.
const MAX_DIGITS: usize = 800;

/// The largest shift done at once: `9 << MAX_SHIFT` plus a carry fits in u64.
const MAX_SHIFT: u32 = 60;

/// A nonnegative decimal `0.d[0]d[1]...d[nd-1] x 10^dp`, digits 0..=9.
struct Decimal {
    digits: [u8; MAX_DIGITS],
    nd: usize,
    dp: i32,
    /// A nonzero digit was dropped past `MAX_DIGITS`.
    truncated: bool,
}

/// An IEEE binary format: explicit mantissa bits, exponent bits, bias.
struct Format {
    mant_bits: u32,
    exp_bits: u32,
    bias: i32,
}

const F64: Format = Format {
    mant_bits: 52,
    exp_bits: 11,
    bias: -1023,
};
const F32: Format = Format {
    mant_bits: 23,
    exp_bits: 8,
    bias: -127,
};

/// Parses `s`: an optional sign, digits with at most one `.` (at least one
/// digit in all), and an optional exponent (`e` or `E`, optional sign,
/// digits). Nothing else: no spaces, no `inf` or `nan`, no hex. Returns the
/// nearest `f64`; it is infinite when the value is beyond `f64::MAX`'s
/// rounding range.
pub fn parse_f64(s: &str) -> Option<f64> {
    let (neg, mut d) = parse_decimal(s.as_bytes())?;
    let bits = to_bits(&mut d, &F64)?;
    Some(f64::from_bits(bits | (u64::from(neg) << 63)))
}

/// As [`parse_f64`], rounded once to the nearest `f32` (never through f64).
pub fn parse_f32(s: &str) -> Option<f32> {
    let (neg, mut d) = parse_decimal(s.as_bytes())?;
    let bits = to_bits(&mut d, &F32)?;
    let bits = u32::try_from(bits).ok()?;
    Some(f32::from_bits(bits | (u32::from(neg) << 31)))
}

/// The sign and the decimal of `s`, or `None` if `s` is not in the grammar.
fn parse_decimal(s: &[u8]) -> Option<(bool, Decimal)> {
    let mut d = Decimal {
        digits: [0; MAX_DIGITS],
        nd: 0,
        dp: 0,
        truncated: false,
    };
    let mut i = 0;
    let neg = match s.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let (mut saw_digit, mut saw_dot) = (false, false);
    // Digits before the point, counted to place it (`dp`), saturating: a
    // number of 2^31 digits is no concern, but the count must not overflow.
    let mut int_digits: i64 = 0;
    while let Some(&c) = s.get(i) {
        match c {
            b'.' if !saw_dot => saw_dot = true,
            b'0'..=b'9' => {
                saw_digit = true;
                if !saw_dot {
                    int_digits = int_digits.saturating_add(1);
                }
                if c == b'0' && d.nd == 0 {
                    // A leading zero: it moves the point, stores nothing.
                    if saw_dot {
                        d.dp = d.dp.saturating_sub(1);
                    } else {
                        int_digits -= 1;
                    }
                } else if d.nd < MAX_DIGITS {
                    d.digits[d.nd] = c - b'0';
                    d.nd += 1;
                } else if c != b'0' {
                    d.truncated = true;
                }
            }
            _ => break,
        }
        i += 1;
    }
    if !saw_digit {
        return None;
    }
    let mut exp: i64 = 0;
    if let Some(b'e' | b'E') = s.get(i) {
        i += 1;
        let exp_neg = match s.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while let Some(&c) = s.get(i).filter(|c| c.is_ascii_digit()) {
            // Saturate far beyond any representable exponent.
            exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
            i += 1;
        }
        if i == start {
            return None;
        }
        if exp_neg {
            exp = -exp;
        }
    }
    if i != s.len() {
        return None;
    }
    // The point: integer digits, minus leading zeros after it, plus the exponent.
    let dp = i64::from(d.dp)
        .saturating_add(int_digits)
        .saturating_add(exp);
    d.dp = dp.clamp(-100_000, 100_000) as i32;
    d.trim();
    Some((neg, d))
}

impl Decimal {
    /// Drops trailing zero digits (a zero number has `nd == 0`).
    fn trim(&mut self) {
        while self.nd > 0 && self.digits[self.nd - 1] == 0 {
            self.nd -= 1;
        }
        if self.nd == 0 {
            self.dp = 0;
        }
    }

    /// Multiplies by `2^k`, `k <= MAX_SHIFT`: the product's digits are made
    /// from the last digit up into `out`, then copied back.
    fn shift_left(&mut self, k: u32) {
        let mut out = [0u8; MAX_DIGITS + 20];
        let mut w = out.len();
        let mut n: u64 = 0;
        for &digit in self.digits[..self.nd].iter().rev() {
            n += u64::from(digit) << k;
            w -= 1;
            out[w] = (n % 10) as u8;
            n /= 10;
        }
        while n > 0 {
            w -= 1;
            out[w] = (n % 10) as u8;
            n /= 10;
        }
        let len = out.len() - w;
        self.dp += (len - self.nd) as i32;
        let kept = len.min(MAX_DIGITS);
        self.digits[..kept].copy_from_slice(&out[w..w + kept]);
        if out[w + kept..].iter().any(|&c| c != 0) {
            self.truncated = true;
        }
        self.nd = kept;
        self.trim();
    }

    /// Divides by `2^k`, `k <= MAX_SHIFT`.
    fn shift_right(&mut self, k: u32) {
        let (mut r, mut w) = (0usize, 0usize);
        let mut n: u64 = 0;
        // Read digits until the running value reaches 2^k.
        while n >> k == 0 {
            if r >= self.nd {
                if n == 0 {
                    self.nd = 0;
                    self.dp = 0;
                    return;
                }
                while n >> k == 0 {
                    n *= 10;
                    r += 1;
                }
                break;
            }
            n = n * 10 + u64::from(self.digits[r]);
            r += 1;
        }
        self.dp -= r as i32 - 1;
        let mask = (1u64 << k) - 1;
        while r < self.nd {
            let c = self.digits[r];
            self.digits[w] = (n >> k) as u8;
            w += 1;
            n = (n & mask) * 10 + u64::from(c);
            r += 1;
        }
        while n > 0 {
            let digit = (n >> k) as u8;
            if w < MAX_DIGITS {
                self.digits[w] = digit;
                w += 1;
            } else if digit > 0 {
                self.truncated = true;
            }
            n = (n & mask) * 10;
        }
        self.nd = w;
        self.trim();
    }

    /// Multiplies by `2^k` (any sign of `k`).
    fn shift(&mut self, mut k: i32) {
        if self.nd == 0 {
            return;
        }
        while k > 0 {
            let step = k.min(MAX_SHIFT as i32);
            self.shift_left(step as u32);
            k -= step;
        }
        while k < 0 {
            let step = (-k).min(MAX_SHIFT as i32);
            self.shift_right(step as u32);
            k += step;
        }
    }

    /// The integer part (at most 20 digits), rounded half to even by the
    /// digits after the point and the sticky flag.
    fn rounded_integer(&self) -> u64 {
        if self.dp < 0 {
            // Below 0.1: rounds to zero.
            return 0;
        }
        let dp = self.dp as usize;
        if dp > 20 {
            return u64::MAX;
        }
        let mut n: u64 = 0;
        for i in 0..dp {
            let digit = if i < self.nd { self.digits[i] } else { 0 };
            n = n * 10 + u64::from(digit);
        }
        let round_up = if dp >= self.nd {
            false
        } else if self.digits[dp] == 5 && dp + 1 == self.nd {
            // Exactly half, unless a dropped digit makes it more.
            self.truncated || n % 2 == 1
        } else {
            self.digits[dp] >= 5
        };
        n + u64::from(round_up)
    }
}

/// The largest power-of-two shift that keeps a decimal with point position
/// `dp` (|dp| digits of scale) from jumping past [1/2, 1) in one step.
fn shift_for(dp: i32) -> i32 {
    const STEPS: [i32; 9] = [1, 3, 6, 9, 13, 16, 19, 23, 26];
    STEPS.get(dp.unsigned_abs() as usize).copied().unwrap_or(27)
}

/// The sign-less IEEE bits of the nearest value of `f` to `d` (consumed).
fn to_bits(d: &mut Decimal, f: &Format) -> Option<u64> {
    let exp_max = (1i32 << f.exp_bits) - 1;
    let infinity = (exp_max as u64) << f.mant_bits;
    if d.nd == 0 || d.dp < -330 {
        return Some(0);
    }
    if d.dp > 310 {
        return Some(infinity);
    }
    // Scale into [1/2, 1), counting the binary exponent.
    let mut exp: i32 = 0;
    while d.dp > 0 {
        let n = shift_for(d.dp);
        d.shift(-n);
        exp += n;
    }
    while d.dp < 0 || (d.dp == 0 && d.nd > 0 && d.digits[0] < 5) {
        let n = shift_for(d.dp);
        d.shift(n);
        exp -= n;
    }
    if d.nd == 0 {
        return Some(0);
    }
    // [1, 2): the exponent of the leading bit.
    exp -= 1;
    // Below the smallest normal exponent: shift into the subnormal range.
    if exp < f.bias + 1 {
        let n = f.bias + 1 - exp;
        d.shift(-n);
        exp += n;
    }
    if exp - f.bias >= exp_max {
        return Some(infinity);
    }
    d.shift(1 + f.mant_bits as i32);
    let mut mant = d.rounded_integer();
    if mant == 2u64 << f.mant_bits {
        // Rounding carried into a new bit.
        mant >>= 1;
        exp += 1;
        if exp - f.bias >= exp_max {
            return Some(infinity);
        }
    }
    if mant & (1u64 << f.mant_bits) == 0 {
        // Subnormal (or zero): the biased exponent is 0.
        exp = f.bias;
    }
    let biased = u64::try_from(exp - f.bias).ok()?;
    Some((mant & ((1u64 << f.mant_bits) - 1)) | (biased << f.mant_bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        for bad in [
            "", "-", "+", ".", "e5", "1e", "1e+", "1..2", "1.2.3", " 1", "1 ", "inf", "nan",
            "0x10", "1e5x",
        ] {
            assert_eq!(parse_f64(bad), None, "{bad:?}");
        }
        assert_eq!(parse_f64("1."), Some(1.0));
        assert_eq!(parse_f64(".5"), Some(0.5));
        assert_eq!(parse_f64("-0"), Some(-0.0));
        assert!(parse_f64("-0").unwrap().is_sign_negative());
        assert_eq!(parse_f64("1e400"), Some(f64::INFINITY));
        assert_eq!(parse_f64("1e-400"), Some(0.0));
        assert_eq!(parse_f64("1e99999999999999999999999"), Some(f64::INFINITY));
        assert_eq!(parse_f64("0e99999999999999999999999"), Some(0.0));
    }

    extern crate std;
    use std::format;
    use std::string::String;

    /// Both results, bit for bit, against core's `str::parse` (the oracle).
    fn check(s: &str) {
        let want64 = s.parse::<f64>().unwrap();
        assert_eq!(
            parse_f64(s).map(f64::to_bits),
            Some(want64.to_bits()),
            "f64 {s}"
        );
        let want32 = s.parse::<f32>().unwrap();
        assert_eq!(
            parse_f32(s).map(f32::to_bits),
            Some(want32.to_bits()),
            "f32 {s}"
        );
    }

    #[test]
    fn edges_match_core() {
        let min_subnormal_exact = format!("{:.1100e}", 5e-324);
        for s in [
            "0",
            "1",
            "-1",
            "0.1",
            "0.3",
            "1e23",
            "8.589973e9",
            "2.2250738585072011e-308",
            "2.2250738585072012e-308",
            "2.2250738585072014e-308",
            "9007199254740993",
            "9007199254740995",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "4.9406564584124654e-324",
            "2.4703282292062327e-324",
            "2.4703282292062328e-324",
            "16777217",
            "16777219",
            "3.4028235e38",
            "3.4028236e38",
            "3.40282357e38",
            "1e-45",
            "7e-46",
            "1.401298464324817e-45",
            "7.006492321624085e-46",
            "7.006492321624086e-46",
            "123456789012345678901234567890",
            "0.000000000000000000000000000001234",
            "1.00000000000000011102230246251565404236316680908203125",
            "1.00000000000000011102230246251565404236316680908203124",
            "1.00000000000000011102230246251565404236316680908203126",
            "1.000000059604644775390625",
            "1.000000059604644775390624",
            "1.000000059604644775390626",
            &min_subnormal_exact,
        ] {
            check(s);
        }
    }

    /// A midpoint between two neighbouring f32 values is an f64, so its
    /// exact decimal is known: it, and it nudged either way in its last
    /// digit (far below any f64 could tell), must round as core rounds.
    #[test]
    fn random_texts_and_f32_midpoints_match_core() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            // Random digits and exponents.
            let r = next();
            let n = 1 + (r % 30) as usize;
            let mut s = String::new();
            if r & (1 << 40) != 0 {
                s.push('-');
            }
            for i in 0..n {
                let digit = (next() % 10) as u8;
                s.push((b'0' + digit) as char);
                if i == (r >> 8) as usize % n && r & (1 << 41) != 0 {
                    s.push('.');
                }
            }
            let e = ((r >> 16) % 700) as i64 - 350;
            s.push_str(&format!("e{e}"));
            check(&s);
            // Any f64, printed shortest and long.
            let x = f64::from_bits(next());
            if x.is_finite() {
                check(&format!("{x:e}"));
                check(&format!("{x:.25e}"));
            }
            // An f32 midpoint, exact and nudged.
            let bits = (next() as u32) & 0x7F7F_FFFF;
            let lo = f64::from(f32::from_bits(bits));
            let hi = f64::from(f32::from_bits(bits + 1));
            let mid = format!("{:.800e}", lo + (hi - lo) / 2.0);
            let (mant, exp) = mid.split_once('e').unwrap();
            let mant = mant.trim_end_matches('0');
            check(&format!("{mant}e{exp}"));
            check(&format!("{mant}0000000001e{exp}"));
            let last = mant.len() - 1;
            if mant.as_bytes()[last] > b'1' {
                let lower = format!(
                    "{}{}9999e{exp}",
                    &mant[..last],
                    (mant.as_bytes()[last] - 1) as char
                );
                check(&lower);
            }
        }
    }

    /// `n * factor^times` in decimal digits (most significant first).
    fn times_power(n: u64, factor: u32, times: u32) -> String {
        let mut digits: std::vec::Vec<u32> = format!("{n}")
            .bytes()
            .rev()
            .map(|b| u32::from(b - b'0'))
            .collect();
        for _ in 0..times {
            let mut carry = 0;
            for d in digits.iter_mut() {
                let v = *d * factor + carry;
                *d = v % 10;
                carry = v / 10;
            }
            while carry > 0 {
                digits.push(carry % 10);
                carry /= 10;
            }
        }
        digits
            .iter()
            .rev()
            .map(|&d| (b'0' + d as u8) as char)
            .collect()
    }

    /// The exact midpoints between neighbouring f64 values, subnormal,
    /// normal and huge (up to 767 significant digits), then the same with a
    /// 1 past the 800 digits kept (only the sticky flag sees it) and one
    /// unit less at the last digit: ties to even, above, below.
    #[test]
    fn f64_midpoints_long_and_sticky_match_core() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..300 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bits = match i {
                0 => 0,
                1 => 1,
                2 => 0x000F_FFFF_FFFF_FFFF,
                3 => 0x7FEF_FFFF_FFFF_FFFE,
                _ => state & 0x7FEF_FFFF_FFFF_FFFF,
            };
            // x = m * 2^e; the midpoint is (2m + 1) * 2^(e - 1).
            let raw_exp = (bits >> 52) as i32;
            let frac = bits & ((1 << 52) - 1);
            let (m, e) = if raw_exp == 0 {
                (frac, -1074)
            } else {
                (frac | 1 << 52, raw_exp - 1075)
            };
            let odd = 2 * m + 1;
            let mid = if e - 1 < 0 {
                format!("{}e{}", times_power(odd, 5, (1 - e) as u32), e - 1)
            } else {
                times_power(odd, 2, (e - 1) as u32)
            };
            check(&mid);
            let (mant, exp) = mid.split_once('e').unwrap_or((&mid, "0"));
            let pad = "0".repeat(820usize.saturating_sub(mant.len()));
            check(&format!("{mant}.{pad}1e{exp}"));
            let last = mant.len() - 1;
            if mant.as_bytes()[last] > b'0' {
                let below = format!(
                    "{}{}e{exp}",
                    &mant[..last],
                    (mant.as_bytes()[last] - 1) as char
                );
                check(&below);
            }
        }
    }
}
