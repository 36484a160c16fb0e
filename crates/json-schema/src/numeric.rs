//! Numbers: the JSON number grammar, exact digit-range regexes for integer
//! bounds, and bounded decimals.
//!
//! Bounds are exact decimals (digit strings), so a range like
//! `minimum: -3.25, maximum: 1e20` is generated digit by digit with no
//! overflow or rounding.

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
    // Lengths of two digits and more whose every number is in the range,
    // one after another, are one repetition (`[1-9][0-9]{1,11}`, not
    // eleven alternatives: an automaton with a thread per length).
    let mut whole: Option<(usize, usize)> = None;
    let end_whole = |parts: &mut Vec<Lang>, whole: &mut Option<(usize, usize)>| {
        if let Some((first, last)) = whole.take() {
            let rest = if first == last {
                format!("[0-9]{{{}}}", first - 1)
            } else {
                format!("[0-9]{{{},{}}}", first - 1, last - 1)
            };
            parts.push(rx::seq([Lang::atom("[1-9]", 1), Lang::atom(rest, 2)]));
        }
    };
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
        let every = len >= 2
            && a.strip_prefix('1')
                .is_some_and(|z| z.bytes().all(|d| d == b'0'))
            && b.bytes().all(|d| d == b'9');
        if every {
            whole = Some(whole.map_or((len, len), |(first, _)| (first, len)));
            continue;
        }
        end_whole(&mut parts, &mut whole);
        parts.push(same_length_range(a.as_bytes(), b.as_bytes()));
    }
    end_whole(&mut parts, &mut whole);
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

/// JSON integers in `lo..=hi`: canonical spellings, and `-0` where the
/// range holds zero (JSON Schema compares values, and `-0` is 0).
pub(crate) fn int_range(lo: Option<&Int>, hi: Option<&Int>) -> Lang {
    if let (Some(l), Some(h)) = (lo, hi)
        && h < l
    {
        return Lang::Never;
    }
    let mut parts = Vec::new();
    if lo.is_none_or(|l| l.neg || l.mag.is_zero()) && hi.is_none_or(|h| !h.neg || h.mag.is_zero()) {
        parts.push(Lang::lit("-0"));
    }
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

/// A decimal bound: sign, integer part and fraction digits without trailing
/// zeros (zero is never negative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dec {
    pub neg: bool,
    pub int: Nat,
    pub frac: String,
}

impl Dec {
    pub fn from_int(i: &Int) -> Dec {
        Dec {
            neg: i.neg,
            int: i.mag.clone(),
            frac: String::new(),
        }
    }

    /// A JSON number's text (`-12.50`, `1e-7`, `2.5E+3`) as its exact
    /// decimal value; `None` for anything else or an exponent beyond ±400.
    pub fn parse(text: &str) -> Option<Dec> {
        let (neg, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], rest[i + 1..].parse::<i32>().ok()?),
            None => (rest, 0),
        };
        if exp.abs() > 400 {
            return None;
        }
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digit_str = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() || !digit_str(int) || !digit_str(frac) {
            return None;
        }
        // All digits, and where the point goes among them.
        let digits = format!("{int}{frac}");
        let point = int.len() as i64 + i64::from(exp);
        let (int, frac) = if point <= 0 {
            (
                String::new(),
                format!("{}{digits}", "0".repeat((-point) as usize)),
            )
        } else if point as usize >= digits.len() {
            let pad = point as usize - digits.len();
            (format!("{digits}{}", "0".repeat(pad)), String::new())
        } else {
            let (i, f) = digits.split_at(point as usize);
            (i.to_string(), f.to_string())
        };
        let int = Nat::new(&int);
        let frac = frac.trim_end_matches('0').to_string();
        let neg = neg && !(int.is_zero() && frac.is_empty());
        Some(Dec { neg, int, frac })
    }

    fn is_zero(&self) -> bool {
        self.int.is_zero() && self.frac.is_empty()
    }

    fn negated(&self) -> Dec {
        Dec {
            neg: !self.neg && !self.is_zero(),
            ..self.clone()
        }
    }
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, other: &Dec) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Dec {
    fn cmp(&self, other: &Dec) -> Ordering {
        let magnitude = || {
            self.int
                .cmp(&other.int)
                .then_with(|| self.frac.as_str().cmp(other.frac.as_str()))
        };
        match (self.neg, other.neg) {
            (false, false) => magnitude(),
            (true, true) => magnitude().reverse(),
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        }
    }
}

/// The fraction (the digits after the point, as the value 0.f) must lie
/// above `lo` and below `hi`, each `(digits without trailing zeros,
/// strict)`; `None`: no bound. `("", false)` as `lo` is no bound either.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Frac {
    lo: Option<(String, bool)>,
    hi: Option<(String, bool)>,
}

impl Frac {
    fn any() -> Frac {
        Frac { lo: None, hi: None }
    }

    fn at_least(digits: &str, strict: bool) -> Frac {
        Frac {
            lo: (strict || !digits.is_empty()).then(|| (digits.to_string(), strict)),
            hi: None,
        }
    }

    fn at_most(digits: &str, strict: bool) -> Frac {
        Frac {
            lo: None,
            hi: Some((digits.to_string(), strict)),
        }
    }

    /// Both conditions, or `None` when no fraction meets them. Fraction
    /// digit strings without trailing zeros compare as their values.
    fn and(&self, other: &Frac) -> Option<Frac> {
        let tighter =
            |a: &Option<(String, bool)>, b: &Option<(String, bool)>, want: Ordering| match (a, b) {
                (None, x) | (x, None) => x.clone(),
                (Some((x, xs)), Some((y, ys))) => match x.cmp(y) {
                    Ordering::Equal => Some((x.clone(), *xs || *ys)),
                    o if o == want => Some((x.clone(), *xs)),
                    _ => Some((y.clone(), *ys)),
                },
            };
        let lo = tighter(&self.lo, &other.lo, Ordering::Greater);
        let hi = tighter(&self.hi, &other.hi, Ordering::Less);
        if let (Some((l, ls)), Some((h, hs))) = (&lo, &hi) {
            match l.cmp(h) {
                Ordering::Greater => return None,
                Ordering::Equal if *ls || *hs => return None,
                _ => {}
            }
        }
        if let Some((h, true)) = &hi
            && h.is_empty()
        {
            return None;
        }
        Some(Frac { lo, hi })
    }

    /// Whether a value with no fraction (or an all-zero one) qualifies.
    fn zero_ok(&self) -> bool {
        self.lo.is_none()
            && self
                .hi
                .as_ref()
                .is_none_or(|(h, strict)| !(h.is_empty() && *strict))
    }
}

/// Non-empty digit strings of at most `left` digits (`None`: any length)
/// whose value 0.s meets `lo` and `hi` (as in [`Frac`], `lo` never
/// `("", false)`).
fn fraction_digits(lo: Option<(&str, bool)>, hi: Option<(&str, bool)>, left: Option<u32>) -> Lang {
    if left == Some(0) {
        return Lang::Never;
    }
    let upto = |n: u32| left.map(|l| l.saturating_sub(n));
    let any_digits = |min: u32, max: Option<u32>| rx::repeat(Lang::atom("[0-9]", 1), min, max);
    match (lo, hi) {
        (_, Some(("", true))) => Lang::Never,
        (Some(("", true)), Some(("", false))) => Lang::Never,
        // All zeros.
        (None, Some(("", false))) => rx::repeat(Lang::lit("0"), 1, left),
        (None, None) => any_digits(1, left),
        // A non-zero digit somewhere: zeros, the first non-zero digit, any.
        (Some(("", true)), None) => match left {
            None => rx::seq([
                rx::repeat(Lang::lit("0"), 0, None),
                Lang::atom("[1-9]", 1),
                any_digits(0, None),
            ]),
            // Its first non-zero digit at position k.
            Some(n) => rx::alt((0..n).map(|k| {
                rx::seq([
                    rx::repeat(Lang::lit("0"), k, Some(k)),
                    Lang::atom("[1-9]", 1),
                    any_digits(0, Some(n - k - 1)),
                ])
            })),
        },
        _ => {
            // Split on the first digit c: below lo's first digit (or above
            // hi's) fails; equal to it keeps that bound for the rest;
            // strictly between, the rest is free.
            let first =
                |b: Option<(&str, bool)>| b.map(|(g, _)| g.bytes().next().map_or(0, |d| d - b'0'));
            let (l0, h0) = (first(lo), first(hi));
            // The bound on the digits after c. `("", false)` left of a lower
            // bound is met; of an upper one, it asks for zeros.
            fn rest_of(
                b: Option<(&str, bool)>,
                c: u8,
                d: Option<u8>,
                lower: bool,
            ) -> Option<(&str, bool)> {
                match (b, d) {
                    (Some((g, strict)), Some(d)) if c == d => {
                        let tail = g.get(1..).unwrap_or("");
                        (!lower || strict || !tail.is_empty()).then_some((tail, strict))
                    }
                    _ => None,
                }
            }
            let mut alternatives = Vec::new();
            let (from, to) = (l0.unwrap_or(0), h0.unwrap_or(9));
            let mut c = from;
            while c <= to {
                let (lo_next, hi_next) = (rest_of(lo, c, l0, true), rest_of(hi, c, h0, false));
                if lo_next.is_none() && hi_next.is_none() {
                    // A run of free digits up to hi's (tight) one.
                    let mut end = c;
                    while end < to && Some(end + 1) != h0 {
                        end += 1;
                    }
                    let class = if c == end {
                        Lang::lit(&c.to_string())
                    } else {
                        Lang::atom(format!("[{c}-{end}]"), 1)
                    };
                    alternatives.push(rx::seq([class, any_digits(0, upto(1))]));
                    c = end + 1;
                    continue;
                }
                let ends_here = lo_next.is_none()
                    && hi_next.is_none_or(|(h, strict)| !(h.is_empty() && strict));
                let more = fraction_digits(lo_next, hi_next, upto(1));
                let tail = if ends_here { rx::opt(more) } else { more };
                alternatives.push(rx::seq([Lang::lit(&c.to_string()), tail]));
                c += 1;
            }
            rx::alt(alternatives)
        }
    }
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

/// JSON numbers without exponent whose value lies within the bounds.
/// `lower`/`upper` are `(bound, exclusive)`. `max_frac_digits` limits the
/// fraction (used with exclusive bounds, so that no literal can round to the
/// bound when a validator parses it as a double, and for `multipleOf` 10^-d).
pub(crate) fn number_with_bounds(
    lower: Option<(&Dec, bool)>,
    upper: Option<(&Dec, bool)>,
    max_frac_digits: Option<u32>,
) -> Lang {
    let mut pieces = vec![
        Piece {
            negative: false,
            lo: Nat::zero(),
            hi: None,
            frac: Frac::any(),
        },
        Piece {
            negative: true,
            lo: Nat::zero(),
            hi: None,
            frac: Frac::any(),
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
        let neg_m = m.negated();
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
    let parts = pieces.into_iter().map(|p| {
        let ints = nat_range(&p.lo, p.hi.as_ref());
        let lo = p.frac.lo.as_ref().map(|(g, s)| (g.as_str(), *s));
        let hi = p.frac.hi.as_ref().map(|(g, s)| (g.as_str(), *s));
        let digits = rx::seq([Lang::lit("."), fraction_digits(lo, hi, max_frac_digits)]);
        let frac = if p.frac.zero_ok() {
            rx::opt(digits)
        } else {
            digits
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
fn restrict_lower(p: Piece, m: &Dec, exclusive: bool) -> Vec<Piece> {
    let mut out = Vec::new();
    let (k, g) = (&m.int, m.frac.as_str());
    if !p.negative {
        // v = A.F >= 0.
        if m.neg {
            // Every non-negative value is > m.
            out.push(p);
            return out;
        }
        // A > k: any fraction.
        intersect(&p, k.succ(), None, Frac::any(), &mut out);
        // A == k: the fraction at least (above) m's.
        intersect(
            &p,
            k.clone(),
            Some(k.clone()),
            Frac::at_least(g, exclusive),
            &mut out,
        );
    } else {
        // v = -(A.F); v >= m  <=>  A.F <= -m.
        if !m.neg && !m.is_zero() {
            // m > 0: no negative (or negative-zero) value qualifies.
            return out;
        }
        // -m = k.g >= 0. A < k: A.F < k.g, both for <= and <.
        if !k.is_zero() {
            intersect(&p, Nat::zero(), Some(k.pred()), Frac::any(), &mut out);
        }
        // A == k: the fraction at most (below) m's.
        intersect(
            &p,
            k.clone(),
            Some(k.clone()),
            Frac::at_most(g, exclusive),
            &mut out,
        );
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
    let Some(frac) = p.frac.and(&frac) else {
        return;
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
            // `-0` is zero: in the language exactly when zero is.
            let zero = lo.is_none_or(|l| l <= 0) && hi.is_none_or(|h| h >= 0);
            assert_eq!(r.is_match("-0"), zero, "-0 in {lo:?}..={hi:?}");
            assert!(!r.is_match("01"));
        }
        // Ranges over many lengths, some whole (every number of the
        // length in), checked against a big sample of each length.
        let mut rng = tokensieve_core::testing::SplitMix64(5);
        for (lo, hi) in [
            (0u64, 4_105_172_262_000u64),
            (7, 999_999_999_999),
            (10, 99_999),
            (123, 98_765_432),
            (1_000, 1_000_000),
        ] {
            let l = nat_range(&Nat::new(&lo.to_string()), Some(&Nat::new(&hi.to_string())));
            let r = whole(&l);
            for len in 1..=14u32 {
                let (min, max) = (10u64.pow(len - 1) * u64::from(len > 1), 10u64.pow(len) - 1);
                for v in [min, max, lo, hi, lo.saturating_sub(1), hi + 1]
                    .into_iter()
                    .chain((0..200).map(|_| min + rng.next_u64() % (max - min + 1)))
                {
                    let want = (lo..=hi).contains(&v);
                    assert_eq!(r.is_match(&v.to_string()), want, "{v} in {lo}..={hi}");
                }
            }
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

    /// A decimal text with at most 4 fraction digits in units of 10^-4.
    fn units(text: &str) -> i64 {
        let (neg, t) = text.strip_prefix('-').map_or((false, text), |t| (true, t));
        let (i, f) = t.split_once('.').unwrap_or((t, ""));
        assert!(f.len() <= 4, "{text}");
        let v = i.parse::<i64>().unwrap() * 10_000 + format!("{f:0<4}").parse::<i64>().unwrap();
        if neg { -v } else { v }
    }

    /// Every literal of a grid (-30 … 30 by 0.0001-unit steps of 37, and the
    /// bounds' neighbours, each in several spellings) against exact decimal
    /// comparison: accepted exactly when within the bounds, for spellings
    /// without exponent and within the digit limit.
    #[test]
    fn bounded_decimals() {
        let check = |lower: Option<(&str, bool)>,
                     upper: Option<(&str, bool)>,
                     frac: Option<u32>| {
            let lo = lower.map(|(v, e)| (Dec::parse(v).unwrap(), e));
            let hi = upper.map(|(v, e)| (Dec::parse(v).unwrap(), e));
            let l = number_with_bounds(
                lo.as_ref().map(|(v, e)| (v, *e)),
                hi.as_ref().map(|(v, e)| (v, *e)),
                frac,
            );
            let r = whole(&l);
            let mut values: Vec<i64> = (-300_000i64..=300_000).step_by(37).collect();
            for (b, _) in lower.iter().chain(upper.iter()) {
                let u = units(b);
                values.extend([u - 10_000, u - 1, u, u + 1, u + 10_000, -u, -u + 1, -u - 1]);
            }
            for u in values {
                let (sign, mag) = (if u < 0 { "-" } else { "" }, u.unsigned_abs());
                let frac_digits = format!("{:04}", mag % 10_000);
                let significant = frac_digits.trim_end_matches('0');
                let int = mag / 10_000;
                let mut spellings = vec![];
                for extra in 0..=2usize {
                    let f = format!("{significant}{}", "0".repeat(extra));
                    spellings.push(if f.is_empty() {
                        format!("{sign}{int}")
                    } else {
                        format!("{sign}{int}.{f}")
                    });
                }
                if significant.is_empty() {
                    spellings.push(format!("{sign}{int}.0"));
                }
                if u == 0 {
                    spellings.extend(["-0".to_string(), "-0.0".to_string(), "0.00".to_string()]);
                }
                let want = lower.is_none_or(|(m, e)| if e { u > units(m) } else { u >= units(m) })
                    && upper.is_none_or(|(m, e)| if e { u < units(m) } else { u <= units(m) });
                for text in spellings {
                    let digits = text.split_once('.').map_or(0, |(_, f)| f.len() as u32);
                    let got = r.is_match(&text);
                    if got {
                        assert!(want, "{text} accepted with {lower:?} {upper:?} {frac:?}");
                    } else if want && frac.is_none_or(|n| digits <= n) {
                        panic!("{text} rejected with {lower:?} {upper:?} {frac:?}");
                    }
                }
            }
        };
        check(Some(("0", false)), None, None);
        check(Some(("0", true)), None, None);
        check(Some(("-1", false)), Some(("1", false)), None);
        check(Some(("-1", true)), Some(("1", true)), Some(6));
        check(None, Some(("10", false)), None);
        check(Some(("-10", false)), Some(("-1", true)), None);
        check(Some(("2", true)), Some(("10", true)), Some(3));
        // Non-integer bounds.
        check(Some(("0.3", false)), None, None);
        check(Some(("2.05", false)), Some(("10", false)), None);
        check(Some(("-2.5", true)), Some(("2.5", true)), Some(6));
        check(Some(("1.25", true)), Some(("1.75", false)), None);
        check(Some(("1.2", false)), Some(("1.2", false)), None);
        check(Some(("1.2", true)), Some(("1.2", false)), None);
        check(Some(("-0.05", false)), Some(("0.05", true)), Some(1));
        check(Some(("-7.0509", false)), Some(("-7.05", true)), None);
        check(None, Some(("-0.0001", false)), Some(2));
        check(Some(("0.0001", true)), Some(("0.01", false)), Some(4));
        check(Some(("-29.99", false)), Some(("29.99", false)), Some(2));
    }

    #[test]
    fn decimal_texts_parse_exactly() {
        let dec = |t: &str| Dec::parse(t).map(|d| (d.neg, d.int.digits().to_string(), d.frac));
        let d = |neg: bool, i: &str, f: &str| Some((neg, i.to_string(), f.to_string()));
        assert_eq!(dec("12.50"), d(false, "12", "5"));
        assert_eq!(dec("-0.0"), d(false, "0", ""));
        assert_eq!(dec("1e-7"), d(false, "0", "0000001"));
        assert_eq!(dec("-2.5E+3"), d(true, "2500", ""));
        assert_eq!(dec("123.456e-1"), d(false, "12", "3456"));
        assert_eq!(dec("0.000"), d(false, "0", ""));
        assert_eq!(dec("1e999"), None);
        assert_eq!(dec("1."), d(false, "1", ""));
        assert_eq!(dec(".5"), None);
        assert!(Dec::parse("-1.5").unwrap() < Dec::parse("-1.25").unwrap());
        assert!(Dec::parse("0.05").unwrap() > Dec::parse("0.0499").unwrap());
    }
}
