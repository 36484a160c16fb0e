//! Numbers: the JSON number grammar, exact digit-range regexes for integer
//! bounds, and bounded decimals.
//!
//! Bounds are exact decimal integers (digit strings), so a range like
//! `minimum: -3, maximum: 1e20` is generated digit by digit with no
//! overflow. Non-integer bounds on `number` are not lowered here (see
//! [`number_with_bounds`]).

use super::rx::{self, Lang};
use std::cmp::Ordering;

pub(crate) const INTEGER: &str = r"-?(?:0|[1-9][0-9]*)";
pub(crate) const NUMBER: &str = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";
/// Numbers that are not integers (what `number` minus `integer` leaves, e.g.
/// under `not: {type: integer}`): a decimal whose fraction has a non-zero
/// digit, without exponent (`1.0` and `1e2` are integers in JSON Schema; a
/// subset, so sound).
pub(crate) const NON_INTEGER: &str = r"-?(?:0|[1-9][0-9]*)\.[0-9]*[1-9]";

/// A non-negative integer as canonical decimal digits ("0", "17", ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nat(String);

impl Nat {
    pub fn new(digits: &str) -> Nat {
        let t = digits.trim_start_matches('0');
        Nat(if t.is_empty() { "0".into() } else { t.into() })
    }

    pub fn zero() -> Nat {
        Nat("0".into())
    }

    pub fn is_zero(&self) -> bool {
        self.0 == "0"
    }

    pub fn digits(&self) -> &str {
        &self.0
    }

    pub fn succ(&self) -> Nat {
        let mut d: Vec<u8> = self.0.bytes().collect();
        let mut i = d.len();
        loop {
            if i == 0 {
                d.insert(0, b'1');
                break;
            }
            i -= 1;
            if d[i] == b'9' {
                d[i] = b'0';
            } else {
                d[i] += 1;
                break;
            }
        }
        Nat(String::from_utf8(d).expect("ascii"))
    }

    /// `self - 1`; `self` must be positive.
    pub fn pred(&self) -> Nat {
        debug_assert!(!self.is_zero());
        let mut d: Vec<u8> = self.0.bytes().collect();
        let mut i = d.len();
        loop {
            i -= 1;
            if d[i] == b'0' {
                d[i] = b'9';
            } else {
                d[i] -= 1;
                break;
            }
        }
        Nat::new(std::str::from_utf8(&d).expect("ascii"))
    }
}

impl PartialOrd for Nat {
    fn partial_cmp(&self, other: &Nat) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Nat {
    fn cmp(&self, other: &Nat) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

/// A signed integer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Int {
    pub neg: bool,
    pub mag: Nat,
}

impl Int {
    pub fn from_nat(neg: bool, mag: Nat) -> Int {
        let neg = neg && !mag.is_zero();
        Int { neg, mag }
    }

    pub fn parse(text: &str) -> Option<Int> {
        let (neg, digits) = match text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, text),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Int::from_nat(neg, Nat::new(digits)))
    }

    pub fn succ(&self) -> Int {
        if self.neg {
            Int::from_nat(true, self.mag.pred())
        } else {
            Int::from_nat(false, self.mag.succ())
        }
    }

    pub fn pred(&self) -> Int {
        if self.neg || self.mag.is_zero() {
            Int::from_nat(true, self.mag.succ())
        } else {
            Int::from_nat(false, self.mag.pred())
        }
    }
}

impl PartialOrd for Int {
    fn partial_cmp(&self, other: &Int) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Int {
    fn cmp(&self, other: &Int) -> Ordering {
        match (self.neg, other.neg) {
            (false, false) => self.mag.cmp(&other.mag),
            (true, true) => other.mag.cmp(&self.mag),
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        }
    }
}

/// Canonical non-negative integers (no leading zeros) in `lo..=hi`
/// (`hi = None`: unbounded).
pub(crate) fn nat_range(lo: &Nat, hi: Option<&Nat>) -> Lang {
    if let Some(hi) = hi
        && hi < lo
    {
        return Lang::Never;
    }
    let lo_len = lo.digits().len();
    let mut parts = Vec::new();
    let last_len = hi.map(|h| h.digits().len());
    let top = last_len.unwrap_or(lo_len);
    for len in lo_len..=top {
        let a = if len == lo_len {
            lo.digits().to_string()
        } else {
            format!("1{}", "0".repeat(len - 1))
        };
        let b = match hi {
            Some(h) if h.digits().len() == len => h.digits().to_string(),
            _ => "9".repeat(len),
        };
        parts.push(same_length_range(a.as_bytes(), b.as_bytes()));
    }
    if hi.is_none() {
        // Every number longer than `lo`.
        parts.push(Lang::atom(format!("[1-9][0-9]{{{lo_len},}}"), 3));
    }
    rx::alt(parts)
}

/// Digit strings of the same length `n` between `a` and `b` inclusive.
fn same_length_range(a: &[u8], b: &[u8]) -> Lang {
    debug_assert_eq!(a.len(), b.len());
    if a.is_empty() {
        return Lang::empty();
    }
    if a == b {
        return Lang::lit(std::str::from_utf8(a).expect("ascii"));
    }
    let rest = a.len() - 1;
    let any_rest = |n: usize| -> Lang {
        match n {
            0 => Lang::empty(),
            1 => Lang::atom("[0-9]", 1),
            n => Lang::atom(format!("[0-9]{{{n}}}"), 2),
        }
    };
    let digit_class = |x: u8, y: u8| -> Lang {
        if x == y {
            Lang::lit(&(x as char).to_string())
        } else {
            Lang::atom(format!("[{}-{}]", x as char, y as char), 1)
        }
    };
    if a[0] == b[0] {
        return rx::seq([digit_class(a[0], a[0]), same_length_range(&a[1..], &b[1..])]);
    }
    let a_tail_min = a[1..].iter().all(|&d| d == b'0');
    let b_tail_max = b[1..].iter().all(|&d| d == b'9');
    let mut parts = Vec::new();
    let mut mid_lo = a[0] + 1;
    let mut mid_hi = b[0] - 1;
    if a_tail_min {
        mid_lo = a[0];
    } else {
        let nines = vec![b'9'; rest];
        parts.push(rx::seq([
            digit_class(a[0], a[0]),
            same_length_range(&a[1..], &nines),
        ]));
    }
    if b_tail_max {
        mid_hi = b[0];
    }
    if mid_lo <= mid_hi {
        parts.push(rx::seq([digit_class(mid_lo, mid_hi), any_rest(rest)]));
    }
    if !b_tail_max {
        let zeros = vec![b'0'; rest];
        parts.push(rx::seq([
            digit_class(b[0], b[0]),
            same_length_range(&zeros, &b[1..]),
        ]));
    }
    rx::alt(parts)
}

/// JSON integers (canonical spelling) in `lo..=hi`.
pub(crate) fn int_range(lo: Option<&Int>, hi: Option<&Int>) -> Lang {
    if let (Some(l), Some(h)) = (lo, hi)
        && h < l
    {
        return Lang::Never;
    }
    let mut parts = Vec::new();
    // Non-negative part: [max(lo, 0), hi].
    if hi.is_none_or(|h| !h.neg) {
        let from = match lo {
            Some(l) if !l.neg => l.mag.clone(),
            _ => Nat::zero(),
        };
        parts.push(nat_range(&from, hi.map(|h| &h.mag)));
    }
    // Negative part: -x for x in [max(1, -hi), -lo].
    if lo.is_none_or(|l| l.neg) {
        let from = match hi {
            Some(h) if h.neg => h.mag.clone(),
            _ => Nat::new("1"),
        };
        let to = lo.map(|l| &l.mag);
        let mags = nat_range(&from, to);
        parts.push(rx::seq([Lang::lit("-"), mags]));
    }
    rx::alt(parts)
}

/// What the fraction of a decimal must be, for one range of integer parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frac {
    /// Absent or any digits.
    Any,
    /// Absent or all zeros (the value is the integer part).
    Zero,
    /// Present with a non-zero digit.
    NonZero,
}

/// One piece of a bounded decimal: magnitudes whose integer part lies in
/// `lo..=hi`, with a fraction condition, on one side of zero.
#[derive(Clone, Debug)]
struct Piece {
    negative: bool,
    lo: Nat,
    hi: Option<Nat>,
    frac: Frac,
}

/// JSON numbers without exponent whose value lies within the integer bounds.
/// `lower`/`upper` are `(bound, exclusive)`. `max_frac_digits` limits the
/// fraction (used with exclusive bounds, so that no literal can round to the
/// bound when a validator parses it as a double).
pub(crate) fn number_with_bounds(
    lower: Option<(&Int, bool)>,
    upper: Option<(&Int, bool)>,
    max_frac_digits: Option<u32>,
) -> Lang {
    let mut pieces = vec![
        Piece {
            negative: false,
            lo: Nat::zero(),
            hi: None,
            frac: Frac::Any,
        },
        Piece {
            negative: true,
            lo: Nat::zero(),
            hi: None,
            frac: Frac::Any,
        },
    ];
    if let Some((m, exclusive)) = lower {
        pieces = pieces
            .into_iter()
            .flat_map(|p| restrict_lower(p, m, exclusive))
            .collect();
    }
    if let Some((m, exclusive)) = upper {
        // v <= m  <=>  -v >= -m: mirror, restrict, mirror back.
        let neg_m = Int::from_nat(!m.neg, m.mag.clone());
        pieces = pieces
            .into_iter()
            .map(|p| Piece {
                negative: !p.negative,
                ..p
            })
            .flat_map(|p| restrict_lower(p, &neg_m, exclusive))
            .map(|p| Piece {
                negative: !p.negative,
                ..p
            })
            .collect();
    }
    let any_frac = match max_frac_digits {
        None => Lang::atom(r"[0-9]+", 2),
        Some(n) => Lang::atom(format!("[0-9]{{1,{n}}}"), 2),
    };
    let parts = pieces.into_iter().map(|p| {
        let ints = nat_range(&p.lo, p.hi.as_ref());
        let frac = match p.frac {
            Frac::Any => rx::opt(rx::seq([Lang::lit("."), any_frac.clone()])),
            Frac::Zero => rx::opt(match max_frac_digits {
                None => Lang::atom(r"\.0+", 2),
                Some(n) => Lang::atom(format!(r"\.0{{1,{n}}}"), 2),
            }),
            Frac::NonZero => match max_frac_digits {
                None => Lang::atom(r"\.[0-9]*[1-9][0-9]*", 2),
                Some(n) => {
                    // A non-zero fraction of at most n digits: its last
                    // non-zero digit is at position k (1-based).
                    rx::seq([
                        Lang::lit("."),
                        rx::alt((1..=n).map(|k| {
                            rx::seq([
                                rx::repeat(Lang::atom("[0-9]", 1), k - 1, Some(k - 1)),
                                Lang::atom("[1-9]", 1),
                                rx::repeat(Lang::atom("0", 0), 0, Some(n - k)),
                            ])
                        })),
                    ])
                }
            },
        };
        rx::seq([
            if p.negative {
                Lang::lit("-")
            } else {
                Lang::empty()
            },
            ints,
            frac,
        ])
    });
    rx::alt(parts.collect::<Vec<_>>())
}

/// The part of piece `p` with value >= m (or > m).
fn restrict_lower(p: Piece, m: &Int, exclusive: bool) -> Vec<Piece> {
    let mut out = Vec::new();
    if !p.negative {
        // v = A.F >= 0.
        if m.neg {
            // Every non-negative value is > m.
            out.push(p);
            return out;
        }
        let k = &m.mag;
        // A > k: any fraction.
        intersect(&p, k.succ(), None, Frac::Any, &mut out);
        // A == k: v >= k always, v > k iff the fraction is non-zero.
        intersect(
            &p,
            k.clone(),
            Some(k.clone()),
            if exclusive { Frac::NonZero } else { Frac::Any },
            &mut out,
        );
    } else {
        // v = -(A.F); v >= m  <=>  A.F <= -m.
        if !m.neg && (!m.mag.is_zero() || exclusive) {
            // m > 0, or v > 0: no negative (or negative-zero) value qualifies.
            return out;
        }
        let k = &m.mag; // -m = k >= 0
        // A < k: A.F < k, both for <= and <.
        if !k.is_zero() {
            intersect(&p, Nat::zero(), Some(k.pred()), Frac::Any, &mut out);
        }
        // A == k: A.F <= k iff the fraction is zero; A.F < k never.
        if !exclusive {
            intersect(&p, k.clone(), Some(k.clone()), Frac::Zero, &mut out);
        }
    }
    out
}

fn intersect(p: &Piece, lo: Nat, hi: Option<Nat>, frac: Frac, out: &mut Vec<Piece>) {
    let lo = lo.max(p.lo.clone());
    let hi = match (hi, &p.hi) {
        (Some(a), Some(b)) => Some(a.min(b.clone())),
        (Some(a), None) => Some(a),
        (None, b) => b.clone(),
    };
    if hi.as_ref().is_some_and(|h| *h < lo) {
        return;
    }
    let frac = match (p.frac, frac) {
        (Frac::Any, f) | (f, Frac::Any) => f,
        (a, b) if a == b => a,
        _ => return,
    };
    out.push(Piece {
        negative: p.negative,
        lo,
        hi,
        frac,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;

    fn whole(l: &Lang) -> Regex {
        Regex::new(&format!("^(?:{})$", l.text().unwrap_or("[a&&b]"))).unwrap()
    }

    fn int(s: &str) -> Int {
        Int::parse(s).unwrap()
    }

    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [
            (Some(1), Some(12)),
            (Some(-15), Some(7)),
            (Some(0), None),
            (None, Some(-3)),
            (Some(95), Some(1234)),
            (Some(-100), Some(-7)),
            (Some(5), Some(5)),
        ] {
            let l = int_range(
                lo.map(|v: i64| int(&v.to_string())).as_ref(),
                hi.map(|v: i64| int(&v.to_string())).as_ref(),
            );
            let r = whole(&l);
            for v in -2000i64..2000 {
                let want = lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
                assert_eq!(r.is_match(&v.to_string()), want, "{v} in {lo:?}..={hi:?}");
            }
            assert!(!r.is_match("-0") || lo.is_none_or(|l| l <= 0));
            assert!(!r.is_match("01"));
        }
        let big = int_range(Some(&int("0")), Some(&int("100000000000000000000")));
        let r = whole(&big);
        assert!(r.is_match("99999999999999999999"));
        assert!(r.is_match("100000000000000000000"));
        assert!(!r.is_match("100000000000000000001"));
    }

    #[test]
    fn nat_arithmetic() {
        assert_eq!(Nat::new("999").succ(), Nat::new("1000"));
        assert_eq!(Nat::new("1000").pred(), Nat::new("999"));
        assert_eq!(int("-1").succ(), int("0"));
        assert_eq!(int("0").pred(), int("-1"));
        assert!(int("-5") < int("-4"));
    }

    #[test]
    fn bounded_decimals() {
        let check = |lower: Option<(&str, bool)>,
                     upper: Option<(&str, bool)>,
                     frac: Option<u32>| {
            let lo = lower.map(|(v, e)| (int(v), e));
            let hi = upper.map(|(v, e)| (int(v), e));
            let l = number_with_bounds(
                lo.as_ref().map(|(v, e)| (v, *e)),
                hi.as_ref().map(|(v, e)| (v, *e)),
                frac,
            );
            let r = whole(&l);
            for text in [
                "0", "-0", "0.0", "-0.0", "0.5", "-0.5", "1", "1.0", "1.5", "-1", "-1.0", "-1.5",
                "2", "2.25", "-2", "9.99", "10", "10.0", "10.01", "-10", "-10.5", "123",
            ] {
                let v: f64 = text.parse().unwrap();
                let want = lower.is_none_or(|(m, e)| {
                    let m: f64 = m.parse().unwrap();
                    if e { v > m } else { v >= m }
                }) && upper.is_none_or(|(m, e)| {
                    let m: f64 = m.parse().unwrap();
                    if e { v < m } else { v <= m }
                });
                assert_eq!(r.is_match(text), want, "{text} with {lower:?} {upper:?}");
            }
        };
        check(Some(("0", false)), None, None);
        check(Some(("0", true)), None, None);
        check(Some(("-1", false)), Some(("1", false)), None);
        check(Some(("-1", true)), Some(("1", true)), Some(6));
        check(None, Some(("10", false)), None);
        check(Some(("-10", false)), Some(("-1", true)), None);
        check(Some(("2", true)), Some(("10", true)), Some(3));
    }
}
