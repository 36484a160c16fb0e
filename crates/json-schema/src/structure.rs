//! Lowering of each JSON type from a [`Merged`] conjunction: strings,
//! numbers, arrays and objects.

use super::ecma::{SearchPattern, Universe};
use super::layout::key_text;
use super::lower::{
    ARRAY, BOOLEAN, Contains, Dependency, FRACTION, INTEGER, Lowerer, Merged, NULL, Node, OBJECT,
    STRING, STRING_CHAR, any_string, kind_of,
};
use super::numeric::{self, Dec, INTEGER as INTEGER_RE, Int, NON_INTEGER, NUMBER};
use super::rx::{self, Lang, Prec};
use super::unevaluated::Member;
use serde_json::Value;
use tokensieve_automata::json_keys::is_unescaped_key_char;
use tokensieve_core::GrammarError;
use tokensieve_grammar::pieces::Verbatim;
use tokensieve_grammar::regular::class_weight;

/// Leaves of the divide-and-conquer over optional members: each leaf is a
/// chain that costs two copies of each member and three nesting levels per
/// member; above the leaves, each halving costs one more copy of the right
/// half and three levels.
const OPTIONAL_CHAIN_LEAF: usize = 6;

/// Largest absolute exclusive bound on a `number` (see `lower_number`).
const EXCLUSIVE_NUMBER_BOUND_LIMIT: u64 = 100_000_000;
/// Fraction digits allowed when a `number` has an exclusive bound.
const EXCLUSIVE_FRACTION_DIGITS: u32 = 6;

/// Most states (position, count) of an array with `contains`; each is a
/// piece of the regex, and pieces of later positions are copied into
/// earlier ones.
const MAX_CONTAINS_STATES: u64 = 4096;

/// Most items in the trie of the arrays of distinct constants that
/// `uniqueItems` enumerates (each a copy of one constant's regex).
const MAX_UNIQUE_ITEMS: usize = 4096;

/// Most constant values one position of a `uniqueItems` array may take.
const MAX_UNIQUE_CHOICES: usize = 64;

/// An array's items after the merge: the element regex and sub-schemas at
/// each prefix position, those of the rest, and the item counts.
struct ArrayShape<'a> {
    prefix: Vec<Lang>,
    prefix_nodes: Vec<Vec<Node<'a>>>,
    rest: Lang,
    rest_nodes: Vec<Node<'a>>,
    min: u64,
    max: Option<u64>,
}

/// The walk over arrays of distinct constants: `prefix[i]` and `rest` list
/// the (value index, regex) choices at each position.
struct UniqueWalk<'w> {
    prefix: &'w [Vec<(usize, Lang)>],
    rest: &'w [(usize, Lang)],
    min: u64,
    max: Option<u64>,
    sep: Lang,
    ptr: &'w str,
}

impl UniqueWalk<'_> {
    /// The items from position `i` on, the values in `used` taken.
    fn from(&self, i: u64, used: &mut [bool], budget: &mut usize) -> Result<Lang, GrammarError> {
        let mut alternatives = Vec::new();
        if i > 0 && i >= self.min {
            alternatives.push(Lang::empty());
        }
        if self.max.is_none_or(|x| i < x) {
            let choices = self
                .prefix
                .get(i as usize)
                .map_or(self.rest, |c| c.as_slice());
            for (v, lang) in choices {
                if used[*v] {
                    continue;
                }
                if *budget == 0 {
                    return Err(GrammarError::LimitExceeded {
                        what: format!("items of the arrays of distinct values at {}", self.ptr),
                        limit: MAX_UNIQUE_ITEMS,
                        knob: "MAX_UNIQUE_ITEMS".into(),
                    });
                }
                *budget -= 1;
                used[*v] = true;
                let after = self.from(i + 1, used, budget);
                used[*v] = false;
                let item = if i == 0 {
                    lang.clone()
                } else {
                    rx::seq([self.sep.clone(), lang.clone()])
                };
                alternatives.push(rx::seq([item, after?]));
            }
        }
        Ok(rx::alt(alternatives))
    }
}

/// The sub-schemas that apply to the member `name`: its `properties` entry
/// and matching `patternProperties` in each part, else that part's
/// `additionalProperties`.
pub(crate) fn member_nodes<'a>(
    lowerer: &mut Lowerer<'a>,
    m: &Merged<'a>,
    name: &str,
) -> Result<Vec<Node<'a>>, GrammarError> {
    let mut nodes = Vec::new();
    for part in m.obj_parts.iter() {
        let mut matched = false;
        for (prop, node) in &part.props {
            if *prop == name {
                nodes.push(node.clone());
                matched = true;
            }
        }
        for (pattern, node) in &part.pattern_props {
            if lowerer.name_matches(pattern, &node.ptr, name)? {
                nodes.push(node.clone());
                matched = true;
            }
        }
        if !matched && let Some(additional) = &part.additional {
            nodes.push(additional.clone());
        }
    }
    Ok(nodes)
}

/// A schema that constrains nothing (true, {}, or annotations only).
fn is_trivial(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(obj) => obj.keys().all(|k| !super::lower::is_known_assertion(k)),
        _ => false,
    }
}

/// The bodies of JSON strings whose value is none of `words`: a walk of the
/// words' trie that either stops where no word ends, or leaves the trie with
/// a character no word continues with (then anything may follow). Characters
/// on the trie are spelled one way (raw, or the escape `serde_json` writes),
/// and a `\u` escape is offered only once off the trie: a string spelling a
/// trie character that way is refused, a narrower language, never a wider.
pub(crate) fn string_complement(words: &[&str]) -> Lang {
    #[derive(Default)]
    struct Trie {
        end: bool,
        next: std::collections::BTreeMap<char, Trie>,
    }
    let mut root = Trie::default();
    for word in words {
        let mut node = &mut root;
        for c in word.chars() {
            node = node.next.entry(c).or_default();
        }
        node.end = true;
    }
    fn walk(node: &Trie) -> Lang {
        let any = rx::repeat(Lang::atom(STRING_CHAR, 5), 0, None);
        if node.next.is_empty() {
            // Past a leaf every continuation differs from every word.
            return if node.end {
                rx::repeat(Lang::atom(STRING_CHAR, 5), 1, None)
            } else {
                any
            };
        }
        let mut alternatives = Vec::new();
        if !node.end {
            alternatives.push(Lang::empty());
        }
        let mut raw = String::from(r#"[^"\\\x00-\x1F"#);
        for c in node.next.keys() {
            raw.push_str(&format!("\\x{{{:X}}}", u32::from(*c)));
        }
        raw.push(']');
        let escapes: String = [
            ('"', '"'),
            ('\\', '\\'),
            ('/', '/'),
            ('b', '\u{8}'),
            ('f', '\u{c}'),
            ('n', '\n'),
            ('r', '\r'),
            ('t', '\t'),
        ]
        .iter()
        .filter(|(_, decoded)| !node.next.contains_key(decoded))
        .map(|(e, _)| regex_syntax::escape(&e.to_string()))
        .collect();
        let mut leave = Lang::atom(raw, 1);
        if !escapes.is_empty() {
            leave = rx::alt([leave, Lang::atom(format!("\\\\[{escapes}]"), 2)]);
        }
        alternatives.push(rx::seq([leave, any]));
        for (c, child) in &node.next {
            let spelled = serde_json::to_string(&c.to_string()).expect("a string serializes");
            let spelled = &spelled[1..spelled.len() - 1];
            alternatives.push(rx::seq([Lang::lit(spelled), walk(child)]));
        }
        rx::alt(alternatives)
    }
    walk(&root)
}

impl<'a> Lowerer<'a> {
    /// A string under `m`'s pattern, format, length and excluded values.
    /// Each is a regex of the string's content; where one regex cannot say
    /// them together (a pattern with several variable parts and a length,
    /// a format and a length, two patterns), context-free mode writes
    /// their intersection as a rule of its own (the backend builds the
    /// product automaton), and regular mode is an error naming the
    /// keyword.
    pub(crate) fn lower_string(&mut self, m: &Merged<'a>) -> Result<Lang, GrammarError> {
        let quote = Lang::lit("\"");
        let (min, max) = (m.min_len, m.max_len);
        if max.is_some_and(|x| x < min) {
            return Ok(Lang::Never);
        }
        let intersect = self.context_free();
        let mut constraints: Vec<(Lang, String)> = Vec::new();
        // Whether the length is a constraint of its own, not folded into
        // a pattern's or format's regex.
        let mut length_apart = false;
        let mut patterns: Vec<&str> = Vec::new();
        for (pattern, ptr) in &m.patterns {
            if patterns.contains(pattern) {
                continue;
            }
            patterns.push(pattern);
            let unsupported =
                |e: String| GrammarError::unsupported_at(ptr, format!("pattern {pattern:?}: {e}"));
            let sp = SearchPattern::parse(pattern).map_err(unsupported)?;
            self.check_repeat(u64::from(sp.max_repeat()), ptr)?;
            let lang = match sp.lower(Universe::JsonUnescaped, min, max) {
                Ok(lang) => lang,
                Err(_) if intersect => {
                    length_apart = true;
                    sp.lower(Universe::JsonUnescaped, 0, None)
                        .map_err(unsupported)?
                }
                Err(e) => return Err(unsupported(e)),
            };
            constraints.push((lang, ptr.clone()));
        }
        let mut formats: Vec<&str> = Vec::new();
        for (name, ptr) in &m.formats {
            if formats.contains(name) {
                continue;
            }
            formats.push(name);
            let (text, lo, hi) =
                super::format::format_regex(name).expect("only known formats are recorded");
            let within = lo >= min && max.is_none_or(|mx| hi.is_some_and(|h| h <= mx));
            let outside = hi.is_some_and(|h| h < min) || max.is_some_and(|mx| lo > mx);
            let lang = if outside {
                Lang::Never
            } else if within || intersect {
                length_apart |= !within;
                Lang::atom(format!("(?:{text})"), 8)
            } else {
                return Err(GrammarError::unsupported_at(
                    &m.len_ptr,
                    format!("minLength/maxLength combined with format {name:?}"),
                ));
            };
            constraints.push((lang, ptr.clone()));
        }
        if let Some((_, ptr)) = m.not_strings.first() {
            let bounded = min > 0 || max.is_some();
            if !intersect && (!constraints.is_empty() || bounded) {
                return Err(GrammarError::unsupported_at(
                    ptr,
                    "excluding string values (by `not` or `if`) together with a pattern, format or length",
                ));
            }
            let words: Vec<&str> = m.not_strings.iter().map(|(w, _)| *w).collect();
            constraints.push((string_complement(&words), ptr.clone()));
            length_apart |= bounded;
        }
        if constraints.is_empty() || length_apart {
            let min = self.check_repeat(min, &m.len_ptr)?;
            let max = max.map(|x| self.check_repeat(x, &m.len_ptr)).transpose()?;
            let ptr = m.len_ptr.clone();
            constraints.push((rx::repeat(Lang::atom(STRING_CHAR, 5), min, max), ptr));
        }
        if constraints.len() == 1 {
            let content = constraints.pop().expect("one").0;
            return Ok(rx::seq([quote.clone(), content, quote]));
        }
        let mut regexes = Vec::with_capacity(constraints.len());
        for (content, _) in &constraints {
            match rx::seq([quote.clone(), content.clone(), quote.clone()]).text() {
                Some(text) => regexes.push(text.to_owned()),
                None => return Ok(Lang::Never),
            }
        }
        regexes.sort();
        regexes.dedup();
        match self.intersection_ref(regexes, &constraints[1].1)? {
            Some(rule) => Ok(rule),
            None => Err(GrammarError::unsupported_at(
                &constraints[1].1,
                "several patterns/formats on one string (their intersection)",
            )),
        }
    }

    pub(crate) fn lower_number(&mut self, m: &Merged<'a>) -> Result<Lang, GrammarError> {
        let integers = m.types & INTEGER != 0;
        let fractions = m.types & FRACTION != 0;
        let mut multiple: Option<(u64, &str)> = None;
        // The coarsest `multipleOf` 10^-d among them: a decimal is a
        // multiple of 10^-d exactly when it needs at most d fraction digits.
        let mut decimals: Option<(u32, &str)> = None;
        for (k, ptr) in &m.multiple_of {
            if k.fract() != 0.0 {
                let Some(d) = decimal_step(*k) else {
                    return Err(GrammarError::unsupported_at(
                        ptr,
                        format!("multipleOf {k} (neither an integer nor a power of 1/10)"),
                    ));
                };
                if decimals.is_none_or(|(old, _)| d < old) {
                    decimals = Some((d, ptr));
                }
                continue;
            }
            if *k > 1e15 {
                return Err(GrammarError::unsupported_at(ptr, format!("multipleOf {k}")));
            }
            let k = *k as u64;
            match multiple {
                None => multiple = Some((k, ptr)),
                Some((old, _)) if old == k => {}
                Some(_) => {
                    return Err(GrammarError::unsupported_at(
                        ptr,
                        "several multipleOf values",
                    ));
                }
            }
        }
        if !fractions {
            // Integers only: bounds round inwards.
            let mut lo: Option<Int> = None;
            for b in &m.lower {
                let v = bound_value(b)?;
                let v = match v {
                    BoundValue::Exact(i) if b.exclusive => i.succ(),
                    BoundValue::Exact(i) => i,
                    BoundValue::Fraction(f) => int_of(f.ceil()),
                };
                lo = Some(match lo {
                    Some(old) if old > v => old,
                    _ => v,
                });
            }
            let mut hi: Option<Int> = None;
            for b in &m.upper {
                let v = match bound_value(b)? {
                    BoundValue::Exact(i) if b.exclusive => i.pred(),
                    BoundValue::Exact(i) => i,
                    BoundValue::Fraction(f) => int_of(f.floor()),
                };
                hi = Some(match hi {
                    Some(old) if old < v => old,
                    _ => v,
                });
            }
            if let Some((k, ptr)) = multiple {
                if lo.is_some() || hi.is_some() {
                    return Err(GrammarError::unsupported_at(
                        ptr,
                        "multipleOf combined with minimum/maximum",
                    ));
                }
                return multiple_of_regex(k)
                    .ok_or_else(|| GrammarError::unsupported_at(ptr, format!("multipleOf {k}")));
            }
            if lo.is_none() && hi.is_none() {
                return Ok(Lang::atom(format!("(?:{INTEGER_RE})"), 4));
            }
            return Ok(numeric::int_range(lo.as_ref(), hi.as_ref()));
        }
        if !integers {
            // Non-integral numbers only (e.g. `not: {type: integer}`).
            if let Some(b) = m.lower.first().or(m.upper.first()) {
                return Err(GrammarError::unsupported_at(
                    &b.ptr,
                    "bounds on numbers that must not be integers",
                ));
            }
            if let Some((_, ptr)) = multiple.or(decimals.map(|(_, p)| (0, p))) {
                return Err(GrammarError::unsupported_at(
                    ptr,
                    "multipleOf on numbers that must not be integers",
                ));
            }
            return Ok(Lang::atom(format!("(?:{NON_INTEGER})"), 6));
        }
        // With `multipleOf` 10^-d: decimals written without exponent, with
        // at most d fraction digits (every multiple has such a spelling).
        let decimals = decimals.map(|(d, _)| d);
        if m.lower.is_empty() && m.upper.is_empty() {
            if decimals.is_some() {
                return Ok(numeric::number_with_bounds(None, None, decimals));
            }
            return Ok(Lang::atom(format!("(?:{NUMBER})"), 6));
        }
        // Decimals between decimal bounds, compared exactly. A validator
        // that parses the literal as a double rounds monotonically, so an
        // inclusive bound (the double's shortest spelling, which parses back
        // to it) holds for the double too. Rounding could reach an exclusive
        // bound: with one, literals get at most EXCLUSIVE_FRACTION_DIGITS
        // fraction digits, and the bound no more, within
        // ±EXCLUSIVE_NUMBER_BOUND_LIMIT, where such decimals are distinct
        // doubles.
        let mut exclusive_seen = false;
        let mut pick = |bounds: &[super::lower::Bound<'a>],
                        want_max: bool|
         -> Result<Option<(Dec, bool)>, GrammarError> {
            let mut best: Option<(Dec, bool)> = None;
            for b in bounds {
                let (v, magnitude_ok) = match bound_value(b)? {
                    BoundValue::Exact(v) => {
                        if !exactly_double(&v) {
                            return Err(GrammarError::unsupported_at(
                                &b.ptr,
                                "a bound on a `number` that is not exactly a double",
                            ));
                        }
                        let ok = within_magnitude(&v, EXCLUSIVE_NUMBER_BOUND_LIMIT);
                        (Dec::from_int(&v), ok)
                    }
                    BoundValue::Fraction(f) => {
                        let v = Dec::parse(&f.to_string()).expect("a finite double's spelling");
                        if b.exclusive && v.frac.len() > EXCLUSIVE_FRACTION_DIGITS as usize {
                            return Err(GrammarError::unsupported_at(
                                &b.ptr,
                                format!(
                                    "an exclusive bound on a `number` with more than \
                                     {EXCLUSIVE_FRACTION_DIGITS} fraction digits"
                                ),
                            ));
                        }
                        (v, f.abs() <= EXCLUSIVE_NUMBER_BOUND_LIMIT as f64)
                    }
                };
                if b.exclusive {
                    exclusive_seen = true;
                    if !magnitude_ok {
                        return Err(GrammarError::unsupported_at(
                            &b.ptr,
                            format!(
                                "an exclusive bound on a `number` beyond ±{EXCLUSIVE_NUMBER_BOUND_LIMIT}"
                            ),
                        ));
                    }
                }
                let better = match &best {
                    None => true,
                    Some((old, old_excl)) => {
                        let ord = v.cmp(old);
                        (if want_max { ord.is_gt() } else { ord.is_lt() })
                            || (ord.is_eq() && b.exclusive && !old_excl)
                    }
                };
                if better {
                    best = Some((v, b.exclusive));
                }
            }
            Ok(best)
        };
        let lower = pick(&m.lower, true)?;
        let upper = pick(&m.upper, false)?;
        let digits = match (
            exclusive_seen.then_some(EXCLUSIVE_FRACTION_DIGITS),
            decimals,
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(numeric::number_with_bounds(
            lower.as_ref().map(|(v, e)| (v, *e)),
            upper.as_ref().map(|(v, e)| (v, *e)),
            digits,
        ))
    }

    pub(crate) fn lower_array(&mut self, m: &Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        let contains = match m.contains.as_slice() {
            [] => None,
            [one] => Some(one),
            [_, second, ..] => {
                return Err(GrammarError::unsupported_at(
                    &second.node.ptr,
                    "several `contains` on one array",
                ));
            }
        };
        let prefix_len = m
            .arr_parts
            .iter()
            .map(|p| p.prefix.len())
            .max()
            .unwrap_or(0);
        let mut max = m.max_items;
        let min = m.min_items;
        if max.is_some_and(|x| x < min) {
            return Ok(Lang::Never);
        }
        // The element at position i (< prefix_len) and the rest.
        let mut prefix = Vec::new();
        let mut prefix_nodes = Vec::new();
        for i in 0..prefix_len {
            if max.is_some_and(|x| i as u64 >= x) {
                break;
            }
            let mut nodes: Vec<Node<'a>> = m
                .arr_parts
                .iter()
                .filter_map(|p| p.prefix.get(i).or(p.rest.as_ref()).cloned())
                .collect();
            nodes.extend(self.unevaluated_item_nodes(m, Some(i))?);
            let element = self.lower_value(nodes.clone(), level + 1)?;
            if element.is_never() {
                max = Some(i as u64);
                break;
            }
            prefix.push(element);
            prefix_nodes.push(nodes);
        }
        let mut rest_nodes: Vec<Node<'a>> =
            m.arr_parts.iter().filter_map(|p| p.rest.clone()).collect();
        rest_nodes.extend(self.unevaluated_item_nodes(m, None)?);
        let rest = if max.is_some_and(|x| x <= prefix.len() as u64) {
            Lang::Never
        } else {
            self.lower_value(rest_nodes.clone(), level + 1)?
        };
        if rest.is_never() {
            max = Some(max.map_or(prefix.len() as u64, |x| x.min(prefix.len() as u64)));
        }
        if max.is_some_and(|x| x < min) {
            return Ok(Lang::Never);
        }
        let shape = ArrayShape {
            prefix,
            prefix_nodes,
            rest,
            rest_nodes,
            min,
            max,
        };
        // At most one item: distinct by default.
        if let Some(ptr) = &m.unique_items
            && max.is_none_or(|x| x > 1)
        {
            if contains.is_some() {
                return Err(GrammarError::unsupported_at(
                    ptr,
                    "`uniqueItems` together with `contains`",
                ));
            }
            return self.lower_unique_array(&shape, ptr, level);
        }
        if let Some(contains) = contains {
            return self.lower_contains_array(&shape, contains, level);
        }
        let sep = self.layout.item_sep(level);
        let body = self.items_from(0, &shape.prefix, &shape.rest, &shape, &sep, &m.items_ptr)?;
        Ok(self.array_container(body, min == 0, level))
    }

    /// `[body]`, or `[]` too when `empty` (`body` never matches nothing).
    fn array_container(&self, body: Lang, empty: bool, level: u32) -> Lang {
        match (body.is_never(), empty) {
            (true, true) => self.layout.container('[', Lang::empty(), true, ']', level),
            (true, false) => Lang::Never,
            (false, _) => self.layout.container('[', body, empty, ']', level),
        }
    }

    /// The items of an array from position `i` on, each after a separator
    /// (but the first of the array, which is required: the empty array is
    /// the caller's), position `j` in `fill[j]` (past `fill`, in `rest`),
    /// within the shape's item counts.
    fn items_from(
        &self,
        i: u64,
        fill: &[Lang],
        rest: &Lang,
        shape: &ArrayShape<'a>,
        sep: &Lang,
        ptr: &str,
    ) -> Result<Lang, GrammarError> {
        let (min, max) = (shape.min, shape.max);
        let k = fill.len() as u64;
        if i == 0 && k == 0 {
            if max == Some(0) {
                return Ok(Lang::Never);
            }
            let lo = self.check_repeat(min.max(1) - 1, ptr)?;
            let hi = max.map(|x| self.check_repeat(x - 1, ptr)).transpose()?;
            return Ok(rx::seq([
                rest.clone(),
                rx::repeat(rx::seq([sep.clone(), rest.clone()]), lo, hi),
            ]));
        }
        // Items past `fill`, each after a separator.
        let start = i.max(k);
        let mut tail = if max.is_some_and(|x| x <= start) {
            Lang::empty()
        } else {
            let lo = self.check_repeat(min.saturating_sub(start), ptr)?;
            let hi = max.map(|x| self.check_repeat(x - start, ptr)).transpose()?;
            rx::repeat(rx::seq([sep.clone(), rest.clone()]), lo, hi)
        };
        for j in (i..k).rev() {
            let item = fill[j as usize].clone();
            if j == 0 {
                tail = rx::seq([item, tail]);
            } else {
                tail = rx::seq([sep.clone(), item, tail]);
                if j >= min {
                    tail = rx::opt(tail);
                }
            }
        }
        Ok(tail)
    }

    /// An array with `contains`: its items as the shape says, at least
    /// `minContains` and at most `maxContains` of them valid under the
    /// `contains` schema. Read left to right, the count of such items so far
    /// is the state: below the bound that matters (`minContains`, or with a
    /// `maxContains` that one), an item either counts (the item schema and
    /// the `contains` schema) or not; once there, every later item is a
    /// filler. Fillers are any item when only `minContains` counts (exact:
    /// the count is then a lower bound, so any item may be left uncounted),
    /// and items *not* valid under the `contains` schema when `maxContains`
    /// does (that negation may drop cases: a subset). Past the prefix and
    /// `minItems`, without `maxItems`, the rest is a loop on the remaining
    /// count.
    fn lower_contains_array(
        &mut self,
        shape: &ArrayShape<'a>,
        contains: &Contains<'a>,
        level: u32,
    ) -> Result<Lang, GrammarError> {
        let ptr = contains.node.ptr.as_str();
        let (kmin, kmax) = (contains.min, contains.max);
        if kmax.is_some_and(|x| x < kmin) {
            return Ok(Lang::Never);
        }
        let (min, max) = (shape.min, shape.max);
        let k = shape.prefix.len() as u64;
        let cap = kmax.unwrap_or(kmin);
        // Positions up to `last` are states; past it (no `maxItems`), the loop.
        let last = max.unwrap_or_else(|| k.max(min).max(1));
        let states = (last + 1).saturating_mul(cap.min(last + 1));
        if states > MAX_CONTAINS_STATES {
            return Err(GrammarError::LimitExceeded {
                what: format!("cases of `contains` at {ptr} ({states})"),
                limit: MAX_CONTAINS_STATES as usize,
                knob: "MAX_CONTAINS_STATES".into(),
            });
        }
        let mut hits = Vec::new();
        let mut fills = Vec::new();
        for (i, nodes) in shape.prefix_nodes.iter().enumerate() {
            let (hit, fill) = self.contains_pair(nodes, &shape.prefix[i], contains, level)?;
            hits.push(hit);
            fills.push(fill);
        }
        let (rest_hit, rest_fill) = if shape.rest.is_never() {
            (Lang::Never, Lang::Never)
        } else {
            self.contains_pair(&shape.rest_nodes, &shape.rest, contains, level)?
        };
        let sep = self.layout.item_sep(level);
        if cap == 0 {
            // `maxContains: 0`: every item a filler.
            let body = self.items_from(0, &fills, &rest_fill, shape, &sep, ptr)?;
            return Ok(self.array_container(body, min == 0, level));
        }
        // Row `i`: for each count `c` (< cap, at most `i`), the items from
        // position `i` on.
        let counts = |i: u64| cap.min(i + 1);
        let mut row: Vec<Lang> = Vec::new();
        for c in 0..counts(last) {
            row.push(if max.is_some() {
                if c >= kmin {
                    Lang::empty()
                } else {
                    Lang::Never
                }
            } else {
                // The loop: fillers, then the remaining count of hits, each
                // followed by fillers.
                let lo = self.check_repeat(kmin.saturating_sub(c), ptr)?;
                let hi = self.check_repeat(kmax.map_or(kmin - c, |x| x - c), ptr)?;
                let fillers = rx::repeat(rx::seq([sep.clone(), rest_fill.clone()]), 0, None);
                rx::seq([
                    fillers.clone(),
                    rx::repeat(
                        rx::seq([sep.clone(), rest_hit.clone(), fillers]),
                        lo,
                        Some(hi),
                    ),
                ])
            });
        }
        for i in (0..last).rev() {
            let (hit, fill) = match hits.get(i as usize) {
                Some(hit) => (hit.clone(), fills[i as usize].clone()),
                None => (rest_hit.clone(), rest_fill.clone()),
            };
            let before = if i == 0 { Lang::empty() } else { sep.clone() };
            // Once the count reaches `cap`, only fillers follow.
            let done = if counts(i) == cap {
                self.items_from(i + 1, &fills, &rest_fill, shape, &sep, ptr)?
            } else {
                Lang::Never
            };
            let mut next = Vec::new();
            for c in 0..counts(i) {
                let end = i > 0 && i >= min && c >= kmin;
                let after_hit = if c + 1 == cap {
                    done.clone()
                } else {
                    row[c as usize + 1].clone()
                };
                let lang = rx::alt([
                    if end { Lang::empty() } else { Lang::Never },
                    rx::seq([before.clone(), fill.clone(), row[c as usize].clone()]),
                    rx::seq([before.clone(), hit.clone(), after_hit]),
                ]);
                self.check(&lang, ptr)?;
                next.push(lang);
            }
            row = next;
        }
        let body = row.swap_remove(0);
        Ok(self.array_container(body, min == 0 && kmin == 0, level))
    }

    /// For one position of an array with `contains`: an item that counts
    /// (valid under both), and a filler (`element` itself, or with a
    /// `maxContains` an item not valid under the `contains` schema).
    fn contains_pair(
        &mut self,
        nodes: &[Node<'a>],
        element: &Lang,
        contains: &Contains<'a>,
        level: u32,
    ) -> Result<(Lang, Lang), GrammarError> {
        let mut both = nodes.to_vec();
        both.push(contains.node.clone());
        let hit = self.lower_value(both, level + 1)?;
        let fill = if contains.max.is_some() {
            self.lower_value_excluding(nodes.to_vec(), vec![contains.node.clone()], level + 1)?
        } else {
            element.clone()
        };
        Ok((hit, fill))
    }

    /// An array with `uniqueItems` whose items each take one of finitely
    /// many constant values: every sequence of pairwise distinct values (by
    /// JSON equality), as a trie of at most [`MAX_UNIQUE_ITEMS`] items.
    fn lower_unique_array(
        &mut self,
        shape: &ArrayShape<'a>,
        ptr: &str,
        level: u32,
    ) -> Result<Lang, GrammarError> {
        let mut values: Vec<&'a Value> = Vec::new();
        let mut choices = Vec::new();
        let rest_open = !shape.rest.is_never();
        let positions = shape
            .prefix_nodes
            .iter()
            .chain(rest_open.then_some(&shape.rest_nodes));
        for nodes in positions {
            let Some(found) = self.finite_values(nodes, level + 1)? else {
                return Err(GrammarError::unsupported_at(
                    ptr,
                    "`uniqueItems` on items that are not one of a few constants \
                     (`enum`, `const`, booleans, null)",
                ));
            };
            let mut here = Vec::new();
            for (v, lang) in found {
                let index = match values.iter().position(|u| super::layout::json_eq(u, v)) {
                    Some(index) => index,
                    None => {
                        values.push(v);
                        values.len() - 1
                    }
                };
                here.push((index, lang));
            }
            choices.push(here);
        }
        let rest = if rest_open {
            choices.pop().expect("the rest's choices")
        } else {
            Vec::new()
        };
        let walk = UniqueWalk {
            prefix: &choices,
            rest: &rest,
            min: shape.min,
            max: shape.max,
            sep: self.layout.item_sep(level),
            ptr,
        };
        let mut used = vec![false; values.len()];
        let mut budget = MAX_UNIQUE_ITEMS;
        let body = walk.from(0, &mut used, &mut budget)?;
        self.check(&body, ptr)?;
        Ok(self.array_container(body, shape.min == 0, level))
    }

    /// The values valid under the conjunction `nodes`, each with its
    /// spellings, when they are finitely many constants (an `enum` or
    /// `const`, or only booleans and null); `None` otherwise.
    fn finite_values(
        &mut self,
        nodes: &[Node<'a>],
        level: u32,
    ) -> Result<Option<Vec<(&'a Value, Lang)>>, GrammarError> {
        let Some(first) = nodes.first() else {
            return Ok(None);
        };
        self.enter_schema(&first.ptr.clone())?;
        let base = self.ref_stack.len();
        let result = self.finite_values_inner(nodes, level, base);
        self.ref_stack.truncate(base);
        self.depth -= 1;
        result
    }

    fn finite_values_inner(
        &mut self,
        nodes: &[Node<'a>],
        level: u32,
        base: usize,
    ) -> Result<Option<Vec<(&'a Value, Lang)>>, GrammarError> {
        static NULL_VALUE: Value = Value::Null;
        static TRUE: Value = Value::Bool(true);
        static FALSE: Value = Value::Bool(false);
        let mut merged = Merged::new(base);
        for node in nodes {
            if !self.expand(&mut merged, node.clone())? {
                return Ok(Some(Vec::new()));
            }
        }
        if !merged.disjunctions.is_empty() {
            return Ok(None);
        }
        let candidates: Vec<&'a Value> = match &merged.enum_vals {
            Some(values) => values.clone(),
            None if merged.types & !(NULL | BOOLEAN) == 0 => vec![&NULL_VALUE, &TRUE, &FALSE],
            None => return Ok(None),
        };
        let candidates: Vec<&'a Value> = candidates
            .into_iter()
            .filter(|v| merged.types & kind_of(v) != 0)
            .collect();
        // More choices than this at one position give more arrays than the
        // trie holds as soon as two items are allowed.
        if candidates.len() > MAX_UNIQUE_CHOICES {
            return Ok(None);
        }
        let mut found = Vec::new();
        for v in candidates {
            let mut one = merged.clone();
            one.enum_vals = Some(vec![v]);
            let lang = self.lower_merged(one, level)?;
            if !lang.is_never() {
                found.push((v, lang));
            }
        }
        Ok(Some(found))
    }

    /// A value under the conjunction `nodes` (an empty conjunction: any value).
    fn lower_value(&mut self, nodes: Vec<Node<'a>>, level: u32) -> Result<Lang, GrammarError> {
        if nodes.is_empty() {
            let depth = self.free_depth();
            self.any_value(depth, level)
        } else {
            self.lower_nodes(nodes, level)
        }
    }

    /// A value under the conjunction `nodes` and valid under none of `nots`.
    fn lower_value_excluding(
        &mut self,
        nodes: Vec<Node<'a>>,
        nots: Vec<Node<'a>>,
        level: u32,
    ) -> Result<Lang, GrammarError> {
        if nots.is_empty() {
            return self.lower_value(nodes, level);
        }
        let ptr = nots[0].ptr.clone();
        // Negations can unfold a recursive schema without end: count them
        // as schema nesting.
        self.enter_schema(&ptr)?;
        let saved = self.ref_stack.len();
        let mut merged = Merged::new(saved);
        let mut result = Ok(true);
        for node in nodes {
            result = self.expand(&mut merged, node);
            if !matches!(result, Ok(true)) {
                break;
            }
        }
        merged.nots.extend(nots);
        let result = match result {
            Ok(true) => self.lower_merged(merged, level),
            Ok(false) => Ok(Lang::Never),
            Err(e) => Err(e),
        };
        self.ref_stack.truncate(saved);
        self.depth -= 1;
        let lang = result?;
        self.check(&lang, &ptr)?;
        Ok(lang)
    }

    pub(crate) fn lower_object_with_dependencies(
        &mut self,
        mut m: Merged<'a>,
        level: u32,
    ) -> Result<Lang, GrammarError> {
        if m.dependencies.is_empty() {
            return self.lower_object(&m, level);
        }
        let (trigger, dependency, _ptr) = m.dependencies.remove(0);
        if m.forbidden.contains(&trigger) {
            return self.lower_object_with_dependencies(m, level);
        }
        let declared = m.required.contains(&trigger)
            || m.obj_parts
                .iter()
                .any(|p| p.props.iter().any(|(n, _)| *n == trigger));
        if !declared {
            // Never generated as a declared member; keep it out of the extra
            // members too.
            m.forbidden.push(trigger);
            return self.lower_object_with_dependencies(m, level);
        }
        let absent = if m.required.contains(&trigger) {
            Lang::Never
        } else {
            let mut ma = m.clone();
            ma.forbidden.push(trigger.clone());
            self.lower_object_with_dependencies(ma, level)?
        };
        let mut mp = m;
        if !mp.required.contains(&trigger) {
            mp.required.push(trigger);
        }
        let present = match dependency {
            Dependency::Names(names) => {
                for name in names {
                    if !mp.required.contains(&name) {
                        mp.required.push(name);
                    }
                }
                self.lower_object_with_dependencies(mp, level)?
            }
            Dependency::Schema(node, origin) => {
                mp.types = OBJECT;
                let saved = self.ref_stack.len();
                let result = match self.expand_under(&mut mp, node, &origin) {
                    Ok(true) => self.lower_merged(mp, level),
                    Ok(false) => Ok(Lang::Never),
                    Err(e) => Err(e),
                };
                self.ref_stack.truncate(saved);
                result?
            }
        };
        Ok(rx::alt([absent, present]))
    }

    fn lower_object(&mut self, m: &Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        let free = m.obj_parts.is_empty()
            && m.required.is_empty()
            && m.forbidden.is_empty()
            && m.min_props.is_none()
            && m.max_props.is_none()
            && m.property_names.is_empty()
            && !m.no_extras
            && !m.uneval_props.iter().any(|u| u.constrains())
            && !self.options.strict;
        if free {
            let depth = self.free_depth().max(1);
            return self.any_of_kind(OBJECT, depth, level);
        }
        // Declared names, in order: `properties` of each part, then required
        // names declared nowhere.
        let mut names: Vec<String> = Vec::new();
        for part in m.obj_parts.iter() {
            for (name, _) in &part.props {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
        for name in &m.required {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let mut items: Vec<(Lang, bool)> = Vec::new();
        for name in &names {
            let required = m.required.contains(name);
            let allowed = !m.forbidden.contains(name) && self.name_allowed(m, name)?;
            let value = if allowed {
                let mut nodes = member_nodes(self, m, name)?;
                nodes.extend(self.unevaluated_member_nodes(m, Member::Named(name))?);
                let nots: Vec<Node<'a>> = m
                    .member_nots
                    .iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, node)| node.clone())
                    .collect();
                self.lower_value_excluding(nodes, nots, level + 1)?
            } else {
                Lang::Never
            };
            if value.is_never() {
                if required {
                    return Ok(Lang::Never);
                }
                continue;
            }
            let key = Lang::lit(&key_text(name));
            items.push((self.layout.member(key, value), required));
        }
        let mut excluded = names.clone();
        excluded.extend(m.forbidden.iter().cloned());
        // Under `maxProperties`, extra members counted: where no member is
        // declared, the first and up to `n - 1` more (a repeated key only
        // lowers the count); beside declared ones, as many more as the
        // declared members leave room for if all were present (a subset
        // where some are optional). The bound is on the extras after the
        // first member, declared or extra (see below).
        let declared = items.len() as u64;
        let (extras_allowed, max_extras) = match &m.max_props {
            None => (true, None),
            Some((n, ptr)) if names.is_empty() && *n > 0 => {
                (true, Some(self.check_repeat(*n - 1, ptr)?))
            }
            // (Declared names that cannot appear leave none: the bound is
            // then the one without them.)
            Some((n, ptr)) if *n > declared => {
                let more = if declared == 0 { *n - 1 } else { *n - declared };
                match self.check_repeat(more, ptr) {
                    Ok(more) => (true, Some(more)),
                    Err(_) => (false, None),
                }
            }
            Some(_) => (false, None),
        };
        let extra = if extras_allowed {
            self.extra_member(m, &excluded, level)?
        } else {
            None
        };
        let required_count = items.iter().filter(|(_, r)| *r).count() as u64;
        let mut nonempty = false;
        if let Some((n, ptr)) = &m.min_props
            && *n > required_count
        {
            if *n == 1 {
                nonempty = true;
            } else {
                return Err(GrammarError::unsupported_at(
                    ptr,
                    "minProperties above the number of required properties",
                ));
            }
        }
        if let Some((n, ptr)) = &m.max_props {
            if (items.len() as u64) > *n {
                if required_count > *n {
                    return Ok(Lang::Never);
                }
                return Err(GrammarError::unsupported_at(
                    ptr,
                    "maxProperties below the number of declared properties",
                ));
            }
        }
        let sep = self.layout.item_sep(level);
        // Each optional member's text is written about log2(n) + 2 times
        // (`nonempty_subsequence`): objects of many optional members nested
        // in one another multiply, and a real schema's would be hundreds of
        // MiB. Its length is bounded before any of it is written.
        let bound = members_len(&items, sep.len() as u64);
        if bound > self.limits.max_regex_len as u64 {
            let at = object_ptr(m);
            return Err(GrammarError::LimitExceeded {
                what: format!(
                    "regex length for {at} (up to {bound} bytes, counted before writing it)"
                ),
                limit: self.limits.max_regex_len,
                knob: "LoweringLimits::max_regex_len".into(),
            });
        }
        let (body, optional) = match (items.is_empty(), extra) {
            (true, None) if nonempty => return Ok(Lang::Never),
            (true, None) => (Lang::empty(), true),
            (true, Some(member)) => {
                let more = rx::repeat(rx::seq([sep.clone(), member.clone()]), 0, max_extras);
                (rx::seq([member, more]), !nonempty)
            }
            (false, None) => members_sequence(items, &sep, nonempty),
            // The extra members after the declared ones, written once: a
            // run of extras inside every branch of the declared members'
            // subsets would copy it (and, in the context-free mode, the
            // rule of its values) into each. `D (, E)*`, or where no
            // member need be declared, `(D | E) (, E)*`: each extra is
            // written twice at most. Under `maxProperties` n, at most
            // n - |D| in the repetition: members, at most |D| + n - |D|
            // after declared ones, 1 + n - |D| (|D| at least 1) after an
            // extra.
            (false, Some(member)) => {
                let (declared, optional) = members_sequence(items, &sep, false);
                let more = rx::repeat(rx::seq([sep.clone(), member.clone()]), 0, max_extras);
                if optional {
                    (rx::seq([rx::alt([declared, member]), more]), !nonempty)
                } else {
                    (rx::seq([declared, more]), false)
                }
            }
        };
        Ok(self.layout.container('{', body, optional, '}', level))
    }

    /// One extra member (`"key": value`), when extra members may be
    /// generated (see the module docs for when).
    fn extra_member(
        &mut self,
        m: &Merged<'a>,
        excluded: &[String],
        level: u32,
    ) -> Result<Option<Lang>, GrammarError> {
        // Under `propertyNames`, an extra key must also be a valid name:
        // the intersection of the two key languages, which only
        // context-free mode can write.
        let named = !m.property_names.is_empty();
        if m.no_extras || (named && !self.context_free()) {
            return Ok(None);
        }
        if m.obj_parts.iter().any(|p| !p.pattern_props.is_empty()) {
            if named {
                return Ok(None);
            }
            return self.pattern_member(m, excluded, level);
        }
        let mut nodes = Vec::new();
        let mut trivial = true;
        for part in m.obj_parts.iter() {
            match &part.additional {
                None if self.options.strict => return Ok(None),
                None => {}
                Some(node) => {
                    if node.v == &Value::Bool(false) {
                        return Ok(None);
                    }
                    trivial &= is_trivial(node.v);
                    nodes.push(node.clone());
                }
            }
        }
        if m.obj_parts.is_empty() && self.options.strict {
            return Ok(None);
        }
        let unevaluated = self.unevaluated_member_nodes(m, Member::Unmatched)?;
        trivial &= unevaluated.is_empty();
        nodes.extend(unevaluated);
        let value = if trivial {
            // "Any value": only with an explicit depth bound.
            let depth = match self.options.max_depth {
                Some(depth) => depth,
                // Context-free mode: values of any depth, as a rule.
                None if self.unbounded() => 0,
                None => return Ok(None),
            };
            self.any_value(depth, level + 1)?
        } else {
            self.lower_nodes(nodes, level + 1)?
        };
        if value.is_never() {
            return Ok(None);
        }
        let key = if named {
            match self.valid_names(m, quoted_key_complement(excluded).0)? {
                Some(key) => key,
                None => return Ok(None),
            }
        } else if excluded.is_empty() && m.member_nots.is_empty() {
            // No name to keep out: any key, escapes included (as an object
            // of any value writes its keys).
            any_string()
        } else {
            self.key_complement(excluded, || quoted_key_complement(excluded))
        };
        Ok(Some(self.layout.member(key, value)))
    }

    /// The keys of `key` that are valid under `propertyNames` (their
    /// intersection, a rule), or `None` when the names' language is empty,
    /// cannot be lowered, or holds a rule itself (no extra members: the
    /// subset from before).
    fn valid_names(&mut self, m: &Merged<'a>, key: Lang) -> Result<Option<Lang>, GrammarError> {
        // Names are strings: the rest of the names' language (objects,
        // numbers, any value as a rule) is no key.
        static STRING: std::sync::LazyLock<Value> =
            std::sync::LazyLock::new(|| serde_json::json!({"type": "string"}));
        let mut nodes = m.property_names.clone();
        nodes.push(Node {
            v: &STRING,
            ptr: format!("{}/(a name)", nodes[0].ptr),
        });
        let names = match self.lower_nodes(nodes, 0) {
            Ok(names) => names,
            Err(GrammarError::Unsupported { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let (Some(names_text), Some(key_text)) = (names.text(), key.text()) else {
            return Ok(None);
        };
        let is_rule = |c: char| c as u32 >= tokensieve_grammar::compose::PLACEHOLDER_BASE;
        if names_text.chars().any(is_rule) {
            return Ok(None);
        }
        let mut regexes = vec![names_text.to_owned(), key_text.to_owned()];
        regexes.sort();
        let ptr = m.property_names[0].ptr.clone();
        self.intersection_ref(regexes, &ptr)
    }

    /// Members whose keys match a `patternProperties` pattern of an
    /// object: `"key": value`, the key in the pattern's language
    /// (characters that need no escape, so the decoded key is the written
    /// one) but the object's named properties, the value under the
    /// pattern's schema. Several patterns are served where no key matches
    /// two of them (their key languages' DFAs meet nowhere), each with its
    /// own members. A subset: keys that match no pattern are not
    /// generated, and neither is anything for patterns that share keys
    /// (whose values would need both schemas); beside named properties,
    /// only in context-free mode (where the pattern matches a name, the
    /// key is an intersection).
    fn pattern_member(
        &mut self,
        m: &Merged<'a>,
        excluded: &[String],
        level: u32,
    ) -> Result<Option<Lang>, GrammarError> {
        let [part] = m.obj_parts.as_slice() else {
            return Ok(None);
        };
        if !self.limits.pattern_members {
            return Ok(None);
        }
        // Beside named properties, only in context-free mode: the regular
        // lowering writes every object as one regex, and members under a
        // pattern beside the named ones double it (past its size limits
        // in MaskBench files regex-fsm served without them).
        if !excluded.is_empty() && !self.context_free() {
            return Ok(None);
        }
        let mut keys = Vec::with_capacity(part.pattern_props.len());
        for (pattern, node) in &part.pattern_props {
            // A pattern the lowering cannot read: no members, as below.
            let Some(key) = self.pattern_key(pattern, node)? else {
                return Ok(None);
            };
            keys.push(key);
        }
        if keys.len() > 1 && !self.keys_disjoint(&keys) {
            return Ok(None);
        }
        let mut members = Vec::with_capacity(keys.len());
        for ((pattern, node), key) in part.pattern_props.iter().zip(keys) {
            if let Some(member) = self.one_pattern_member(m, pattern, node, key, excluded, level)? {
                members.push(member);
            }
        }
        Ok((!members.is_empty()).then(|| rx::alt(members)))
    }

    /// The keys (unquoted, unescaped) `pattern` matches, or `None` where
    /// the lowering cannot write them.
    fn pattern_key(
        &mut self,
        pattern: &str,
        node: &Node<'a>,
    ) -> Result<Option<Lang>, GrammarError> {
        let Ok(search) = SearchPattern::parse(pattern) else {
            return Ok(None);
        };
        if self
            .check_repeat(u64::from(search.max_repeat()), &node.ptr)
            .is_err()
        {
            return Ok(None);
        }
        Ok(search.lower(Universe::JsonUnescaped, 0, None).ok())
    }

    /// Whether no key is in two of `keys`, decided by their DFAs (not
    /// decided, within small limits: no).
    fn keys_disjoint(&self, keys: &[Lang]) -> bool {
        let limits = tokensieve_automata::dfa::DfaLimits {
            nfa_size_limit: 1 << 20,
            dfa_size_limit: 1 << 20,
            determinize_size_limit: 1 << 20,
            max_dfa_states: 4_096,
            minimize: false,
        };
        let texts: Option<Vec<&str>> = keys.iter().map(Lang::text).collect();
        texts.is_some_and(|texts| {
            tokensieve_automata::dfa::ByteDfa::pairwise_disjoint(&texts, &limits).unwrap_or(false)
        })
    }

    /// The members of one pattern, its keys `key`; `None` where there are
    /// none or the lowering cannot write them.
    fn one_pattern_member(
        &mut self,
        m: &Merged<'a>,
        pattern: &str,
        node: &Node<'a>,
        key: Lang,
        excluded: &[String],
        level: u32,
    ) -> Result<Option<Lang>, GrammarError> {
        // Named keys the pattern also matches are no keys of these members.
        let mut named = Vec::new();
        for name in excluded {
            match self.name_matches(pattern, &node.ptr, name) {
                Ok(true) => named.push(name.clone()),
                Ok(false) => {}
                Err(_) => return Ok(None),
            }
        }
        let mut nodes = vec![node.clone()];
        nodes.extend(self.unevaluated_member_nodes(m, Member::MatchingPatterns)?);
        // A value schema the lowering cannot serve leaves these members out
        // (the subset from before), rather than failing the whole schema.
        let value = match self.lower_nodes(nodes, level + 1) {
            Ok(value) => value,
            Err(GrammarError::Unsupported { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        if key.is_never() || value.is_never() {
            return Ok(None);
        }
        let key = rx::seq([Lang::lit("\""), key, Lang::lit("\"")]);
        if named.is_empty() {
            return Ok(Some(self.layout.member(key, value)));
        }
        // Beside named properties, the pattern's keys but the names (a
        // named key's value is the named property's, under the pattern's
        // schema too): the intersection of the two key languages, which
        // only context-free mode can write, as under `propertyNames`.
        let others = quoted_key_complement(&named).0;
        let (Some(pattern_text), Some(others_text)) = (key.text(), others.text()) else {
            return Ok(None);
        };
        let mut regexes = vec![pattern_text.to_owned(), others_text.to_owned()];
        regexes.sort();
        Ok(self
            .intersection_ref(regexes, &node.ptr)?
            .map(|key| self.layout.member(key, value)))
    }

    /// Any value of the given kinds nested at most `depth` levels.
    pub(crate) fn any_of_kind(
        &mut self,
        kinds: u8,
        depth: u32,
        level: u32,
    ) -> Result<Lang, GrammarError> {
        let mut parts = Vec::new();
        if kinds & NULL != 0 {
            parts.push(Lang::lit("null"));
        }
        if kinds & BOOLEAN != 0 {
            parts.push(rx::alt([Lang::lit("true"), Lang::lit("false")]));
        }
        if kinds & (INTEGER | FRACTION) != 0 {
            parts.push(if kinds & FRACTION != 0 && kinds & INTEGER == 0 {
                Lang::atom(format!("(?:{NON_INTEGER})"), 6)
            } else if kinds & FRACTION != 0 {
                Lang::atom(format!("(?:{NUMBER})"), 6)
            } else {
                Lang::atom(format!("(?:{INTEGER_RE})"), 4)
            });
        }
        let string = any_string();
        if kinds & STRING != 0 {
            parts.push(string.clone());
        }
        if depth > 0 && kinds & (ARRAY | OBJECT) != 0 {
            let inner = self.any_value(depth - 1, level + 1)?;
            let sep = self.layout.item_sep(level);
            if kinds & ARRAY != 0 {
                let items = rx::seq([
                    inner.clone(),
                    rx::repeat(rx::seq([sep.clone(), inner.clone()]), 0, None),
                ]);
                parts.push(self.layout.container('[', items, true, ']', level));
            }
            if kinds & OBJECT != 0 {
                let member = self.layout.member(string, inner);
                let members =
                    rx::seq([member.clone(), rx::repeat(rx::seq([sep, member]), 0, None)]);
                parts.push(self.layout.container('{', members, true, '}', level));
            }
        }
        Ok(rx::alt(parts))
    }
}

/// Members in order, optional ones possibly absent, separators only between
/// present ones. Returns the body and whether it may be empty.
fn members_sequence(items: Vec<(Lang, bool)>, sep: &Lang, nonempty: bool) -> (Lang, bool) {
    match items.iter().position(|(_, required)| *required) {
        Some(first) => {
            // Before the first required member: a possibly empty run of
            // optional ones, each followed by a separator. After it: each
            // member after a separator. Linear, and flat.
            let mut parts = Vec::new();
            let leading: Vec<Lang> = items[..first].iter().map(|(l, _)| l.clone()).collect();
            if !leading.is_empty() {
                parts.push(rx::opt(rx::seq([
                    nonempty_subsequence(&leading, sep),
                    sep.clone(),
                ])));
            }
            parts.push(items[first].0.clone());
            for (lang, required) in items.into_iter().skip(first + 1) {
                let piece = rx::seq([sep.clone(), lang]);
                parts.push(if required { piece } else { rx::opt(piece) });
            }
            (rx::seq(parts), false)
        }
        None => {
            let all: Vec<Lang> = items.into_iter().map(|(l, _)| l).collect();
            (nonempty_subsequence(&all, sep), !nonempty)
        }
    }
}

/// Bytes a regex combinator adds around its parts, at most (`(?:`, `)?`,
/// `|`), for the bounds below.
const COMBINATOR_BYTES: u64 = 8;

/// An upper bound of the length of [`members_sequence`]'s text for these
/// items, worked out from their lengths alone.
fn members_len(items: &[(Lang, bool)], sep: u64) -> u64 {
    let lens: Vec<u64> = items.iter().map(|(l, _)| l.len() as u64).collect();
    let member = |len: u64| sep.saturating_add(len).saturating_add(COMBINATOR_BYTES);
    match items.iter().position(|(_, required)| *required) {
        Some(first) => {
            let leading = if first == 0 {
                0
            } else {
                member(nonempty_subsequence_len(&lens[..first], sep))
            };
            lens[first + 1..]
                .iter()
                .fold(leading.saturating_add(lens[first]), |total, &len| {
                    total.saturating_add(member(len))
                })
        }
        None => nonempty_subsequence_len(&lens, sep),
    }
}

/// An upper bound of the length of [`nonempty_subsequence`]'s text for
/// items of these lengths.
fn nonempty_subsequence_len(lens: &[u64], sep: u64) -> u64 {
    let member = |len: u64| sep.saturating_add(len).saturating_add(COMBINATOR_BYTES);
    let Some((&first, rest)) = lens.split_first() else {
        return 0;
    };
    if lens.len() <= OPTIONAL_CHAIN_LEAF {
        return rest.iter().fold(first, |chain, &len| {
            chain
                .saturating_add(member(len))
                .saturating_add(len)
                .saturating_add(COMBINATOR_BYTES)
        });
    }
    let (left, right) = lens.split_at(lens.len() / 2);
    let any_right = right
        .iter()
        .fold(0u64, |total, &len| total.saturating_add(member(len)));
    nonempty_subsequence_len(left, sep)
        .saturating_add(any_right)
        .saturating_add(nonempty_subsequence_len(right, sep))
        .saturating_add(COMBINATOR_BYTES)
}

/// The JSON pointer of the object whose members `m` declares, told from
/// its first declared member's (`…/properties/NAME`); the schema root's
/// when it declares none.
fn object_ptr(m: &Merged<'_>) -> String {
    let member = m
        .obj_parts
        .iter()
        .find_map(|part| part.props.first().map(|(_, node)| node.ptr.as_str()));
    match member.and_then(|ptr| ptr.rsplitn(3, '/').nth(2)) {
        Some("") => "schema root".into(),
        Some(parent) => parent.into(),
        None => "an object".into(),
    }
}

/// Non-empty subsequences of `items` (in order), joined by `sep`.
fn nonempty_subsequence(items: &[Lang], sep: &Lang) -> Lang {
    if items.len() <= OPTIONAL_CHAIN_LEAF {
        // H(k+1) = H(k) (sep I_k)? | I_k
        let mut chain = items[0].clone();
        for item in &items[1..] {
            chain = rx::alt([
                rx::seq([chain, rx::opt(rx::seq([sep.clone(), item.clone()]))]),
                item.clone(),
            ]);
        }
        return chain;
    }
    let (left, right) = items.split_at(items.len() / 2);
    // First present member on the left: then any subset of the right; or
    // nothing on the left.
    let any_right = rx::seq(
        right
            .iter()
            .map(|item| rx::opt(rx::seq([sep.clone(), item.clone()]))),
    );
    rx::alt([
        rx::seq([nonempty_subsequence(left, sep), any_right]),
        nonempty_subsequence(right, sep),
    ])
}

/// String content (no escapes) that is none of `names`: a string that
/// leaves the names' trie (a path, then a character no name continues
/// with, then any characters) or stops inside it where no name ends.
///
/// Written as nested tries, so the text grows with the trie, not with the
/// sum of its paths' lengths; a trie deeper than [`NESTED_TRIE_LEVELS`] is
/// written flat below that level, which bounds the text's nesting. Every
/// way of leaving shares one tail of any characters. A character that
/// leaves is split in two: ASCII, a small class per node, and non-ASCII,
/// one shared class after every node with no non-ASCII child. Classes of
/// all of Unicode at every node would make an automaton of a dozen states
/// per node (their UTF-8 sequences), where these make one.
fn key_complement(names: &[String]) -> (KeyTrie, Lang) {
    let root = key_trie(names);
    let lang = root.complement();
    (root, lang)
}

/// The trie of `names`, but those no key spells unescaped: a name with a
/// character a key writes escaped (a quote, a backslash, a control
/// character) equals no string of unescaped characters, so it excludes
/// nothing, and a path through it would let such a character into a key
/// unescaped.
fn key_trie(names: &[String]) -> KeyTrie {
    let mut root = KeyTrie::default();
    for name in names
        .iter()
        .filter(|n| n.chars().all(is_unescaped_key_char))
    {
        root.insert(name);
    }
    root
}

/// What the syntax tree of [`quoted_key_complement`] of `root`'s names
/// weighs ([`KeyTrie::weights`], the quotes and the two classes of
/// [`KeyTrie::complement`]).
fn quoted_weight(root: &KeyTrie) -> u64 {
    2 + root.weights(0).iter().sum::<u64>() + class_weight(char::MAX) + class_weight(char::MAX)
}

/// [`key_complement`] in quotes: a whole key, and what its syntax tree
/// weighs ([`quoted_weight`]; no string of it is empty).
pub(crate) fn quoted_key_complement(names: &[String]) -> (Lang, Verbatim) {
    let (root, complement) = key_complement(names);
    let quoted = rx::seq([Lang::lit("\""), complement, Lang::lit("\"")]);
    let verbatim = Verbatim {
        weight: quoted_weight(&root),
        depth: quoted.nest().saturating_add(1),
        nullable: false,
        keys: None,
    };
    (quoted, verbatim)
}

/// No less than the depth of any [`quoted_key_complement`]'s syntax tree:
/// the trie is written nested [`NESTED_TRIE_LEVELS`] deep at most, a few
/// levels of tree each (MaskBench's deepest is 54).
const QUOTED_KEYS_DEPTH: u32 = 128;

/// Weight of [`quoted_key_complement`] from which its text is long enough
/// for a verbatim rule of the lowering: on MaskBench, 6 of the 2,635 texts
/// under 512 bytes weigh this or more, none of the 4,636 longer ones less.
pub(crate) const DEFERRED_KEYS_WEIGHT: u64 = 72;

/// What [`quoted_key_complement`] of `names` says of its text without
/// writing it, where it weighs [`DEFERRED_KEYS_WEIGHT`] or more: its
/// weight, and a bound on its depth ([`QUOTED_KEYS_DEPTH`]).
pub(crate) fn deferred_key_complement(names: &[String]) -> Option<Verbatim> {
    let weight = quoted_weight(&key_trie(names));
    (weight >= DEFERRED_KEYS_WEIGHT).then_some(Verbatim {
        weight,
        depth: QUOTED_KEYS_DEPTH,
        nullable: false,
        keys: None,
    })
}

/// Trie levels written nested in [`key_complement`]; deeper ones flat.
const NESTED_TRIE_LEVELS: usize = 12;

/// Every character an unescaped JSON string holds that is not ASCII.
const NON_ASCII_CLASS: &str = r"[\x{80}-\x{10FFFF}]";

/// The names of an object's properties as a trie, for [`key_complement`].
#[derive(Default)]
struct KeyTrie {
    end: bool,
    children: Vec<(char, KeyTrie)>,
}

/// What a walk of a [`KeyTrie`] writes, for each node (path `P`).
#[derive(Clone, Copy)]
enum TriePart {
    /// `P` then an ASCII character no name continues `P` with, or a
    /// non-ASCII one where some name does continue `P` with one.
    LeaveHere,
    /// `P` where no name continues with a non-ASCII character.
    BeforeNonAscii,
    /// `P` where no name ends.
    Short,
}

impl TriePart {
    /// The parts a key's complement is made of.
    const ALL: [TriePart; 3] = [
        TriePart::LeaveHere,
        TriePart::BeforeNonAscii,
        TriePart::Short,
    ];
}

impl KeyTrie {
    fn insert(&mut self, name: &str) {
        let mut node = self;
        for c in name.chars() {
            let i = match node.children.iter().position(|(k, _)| *k == c) {
                Some(i) => i,
                None => {
                    node.children.push((c, KeyTrie::default()));
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i].1;
        }
        node.end = true;
    }

    /// [`key_complement`] of this trie's names (the text).
    ///
    /// (Where no name holds a non-ASCII character, `[ASCII]*[non-ASCII]`
    /// could stand for the trie's paths before the non-ASCII class, a
    /// fifth less text; but that thread outlives a key's leaving the trie,
    /// so the state after leaving is no longer one loop a mask walk takes
    /// whole: 7% more mask work on the slowest-masking MaskBench files.)
    fn complement(&self) -> Lang {
        let any = Lang::atom(super::ecma::UNESCAPED_CLASS, 1);
        let leave = rx::alt([
            self.part(TriePart::LeaveHere, 0),
            rx::seq([
                self.part(TriePart::BeforeNonAscii, 0),
                Lang::atom(NON_ASCII_CLASS, 1),
            ]),
        ]);
        rx::alt([
            rx::seq([leave, rx::repeat(any, 0, None)]),
            self.part(TriePart::Short, 0),
        ])
    }

    /// What [`KeyTrie::part`]'s syntax tree weighs for each part (the
    /// bytes of its literals, each class what [`class_weight`] says), or a
    /// little more: the tree may join single characters into a class. The
    /// three parts in one walk of the trie ([`TriePart::ALL`]'s order).
    fn weights(&self, depth: usize) -> [u64; 3] {
        let add = |total: &mut [u64; 3], more: [u64; 3]| {
            for (t, m) in total.iter_mut().zip(more) {
                *t += m;
            }
        };
        let mut total = [0u64; 3];
        if depth >= NESTED_TRIE_LEVELS {
            // One alternative per node: its path, then its own part.
            let mut stack: Vec<(u64, &KeyTrie)> = vec![(0, self)];
            while let Some((path, node)) = stack.pop() {
                add(
                    &mut total,
                    node.own_weights().map(|(count, own)| count * path + own),
                );
                for (c, child) in &node.children {
                    stack.push((path + c.len_utf8() as u64, child));
                }
            }
            return total;
        }
        add(&mut total, self.own_weights().map(|(_, own)| own));
        for (c, child) in &self.children {
            let edge = c.len_utf8() as u64;
            add(&mut total, child.weights(depth + 1).map(|w| edge + w));
        }
        total
    }

    /// [`KeyTrie::own_weight`] of each part ([`TriePart::ALL`]'s order).
    fn own_weights(&self) -> [(u64, u64); 3] {
        TriePart::ALL.map(|part| self.own_weight(part))
    }

    /// How many alternatives [`KeyTrie::own`] writes, and what they weigh.
    fn own_weight(&self, part: TriePart) -> (u64, u64) {
        let non_ascii = self.children.iter().any(|(c, _)| !c.is_ascii());
        match part {
            TriePart::LeaveHere => {
                let ascii = u64::from(self.leaves_ascii());
                let other = u64::from(non_ascii);
                (ascii + other, ascii + other * class_weight(char::MAX))
            }
            TriePart::BeforeNonAscii if !non_ascii => (1, 0),
            TriePart::Short if !self.end => (1, 0),
            TriePart::BeforeNonAscii | TriePart::Short => (0, 0),
        }
    }

    /// `part` of every node of this subtree, as one language (`depth`:
    /// this node's level in the whole trie). Written straight into one
    /// text ([`KeyTrie::write`]) as [`rx::alt`] and [`rx::seq`] would
    /// write it: composed, each level copied its subtree's text again.
    fn part(&self, part: TriePart, depth: usize) -> Lang {
        let mut text = String::new();
        let written = self.write(part, depth, &mut text);
        written.lang(text)
    }

    /// Writes [`KeyTrie::part`] at the end of `out`; what was written.
    fn write(&self, part: TriePart, depth: usize, out: &mut String) -> Written {
        let mut alt = Alternation::new(out);
        if depth >= NESTED_TRIE_LEVELS {
            // One alternative per node: its path, then its own part.
            let mut stack: Vec<(String, &KeyTrie)> = vec![(String::new(), self)];
            while let Some((path, node)) = stack.pop() {
                node.write_own(part, &path, out, &mut alt);
                for (c, child) in &node.children {
                    let mut p = path.clone();
                    p.push(*c);
                    stack.push((p, child));
                }
            }
            return alt.finish(out);
        }
        self.write_own(part, "", out, &mut alt);
        for (c, child) in &self.children {
            let at = alt.separate(out);
            push_escaped(out, *c);
            let body = out.len();
            let written = child.write(part, depth + 1, out);
            let c_weight = c.len_utf8() as u64;
            let item = match written.prec {
                // The empty language: no alternative.
                None => {
                    out.truncate(at);
                    continue;
                }
                Some(Prec::Empty) => Written::atom(0, c_weight),
                Some(prec) => {
                    let nest = match prec {
                        Prec::Alt => {
                            out.insert_str(body, "(?:");
                            out.push(')');
                            written.nest + 1
                        }
                        // A concatenation inside one adds no level.
                        Prec::Concat => written.nest.saturating_sub(1),
                        _ => written.nest,
                    };
                    Written {
                        prec: Some(Prec::Concat),
                        nest: nest + 1,
                        weight: c_weight + written.weight,
                    }
                }
            };
            alt.push(item);
        }
        alt.finish(out)
    }

    /// What this node itself adds to `part`, after `path`, as
    /// alternatives of `alt`: for [`TriePart::LeaveHere`], a class of the
    /// ASCII characters no name continues with here (if any is left) and
    /// one of the non-ASCII characters but those a name continues with
    /// (if any does); for the other parts, the empty string where this
    /// node has one.
    fn write_own(&self, part: TriePart, path: &str, out: &mut String, alt: &mut Alternation) {
        let non_ascii = self.children.iter().any(|(c, _)| !c.is_ascii());
        match part {
            TriePart::LeaveHere => {
                if self.leaves_ascii() {
                    alt.item(out, path, Some(1), |out| {
                        push_ascii_key_class_without(&self.children, out)
                    });
                }
                if non_ascii {
                    alt.item(out, path, Some(3), |out| {
                        out.push('[');
                        out.push_str(NON_ASCII_CLASS);
                        out.push_str("--[");
                        for (c, _) in self.children.iter().filter(|(c, _)| !c.is_ascii()) {
                            out.push_str("\\x{");
                            out.push_str(&format!("{:X}", *c as u32));
                            out.push('}');
                        }
                        out.push_str("]]");
                    });
                }
            }
            TriePart::BeforeNonAscii if !non_ascii => alt.item(out, path, None, |_| {}),
            TriePart::Short if !self.end => alt.item(out, path, None, |_| {}),
            TriePart::BeforeNonAscii | TriePart::Short => {}
        }
    }

    /// Whether some ASCII character of a key continues no name here.
    fn leaves_ascii(&self) -> bool {
        ascii_key_chars_without(&self.children) != 0
    }

    /// [`KeyTrie::write_own`]'s alternatives as languages, composed (the
    /// reference the one-pass writer is checked against).
    #[cfg(test)]
    fn own(&self, part: TriePart) -> Vec<Lang> {
        let non_ascii: Vec<char> = self
            .children
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| !c.is_ascii())
            .collect();
        match part {
            TriePart::LeaveHere => {
                let mut own = Vec::new();
                if let Some(class) = ascii_key_class_without(&self.children) {
                    own.push(Lang::atom(class, 1));
                }
                if !non_ascii.is_empty() {
                    let members: String = non_ascii
                        .iter()
                        .map(|c| format!("\\x{{{:X}}}", *c as u32))
                        .collect();
                    own.push(Lang::atom(format!("[{NON_ASCII_CLASS}--[{members}]]"), 3));
                }
                own
            }
            TriePart::BeforeNonAscii if non_ascii.is_empty() => vec![Lang::empty()],
            TriePart::Short if !self.end => vec![Lang::empty()],
            TriePart::BeforeNonAscii | TriePart::Short => Vec::new(),
        }
    }
}

/// What [`KeyTrie::write`] wrote: the precedence of its text (`None`: the
/// empty language, nothing written) and the figures [`rx::Rx`] keeps.
#[derive(Clone, Copy)]
struct Written {
    prec: Option<Prec>,
    nest: u32,
    weight: u64,
}

impl Written {
    fn atom(nest: u32, weight: u64) -> Written {
        Written {
            prec: Some(Prec::Atom),
            nest,
            weight,
        }
    }

    fn lang(self, text: String) -> Lang {
        match self.prec {
            None => Lang::Never,
            Some(Prec::Empty) => Lang::empty(),
            Some(prec) => Lang::Re(rx::Rx {
                text,
                prec,
                nest: self.nest,
                weight: self.weight,
            }),
        }
    }
}

/// An alternation written in place, as [`rx::alt`] joins its parts:
/// alternatives that are the empty string make it optional (a trie's
/// alternatives are distinct: none is a duplicate to drop).
struct Alternation {
    start: usize,
    kept: u32,
    empty: bool,
    /// The one alternative so far.
    first: Written,
    /// The deepest alternative's nest (as a member of the join).
    nest: u32,
    weight: u64,
}

impl Alternation {
    fn new(out: &str) -> Alternation {
        Alternation {
            start: out.len(),
            kept: 0,
            empty: false,
            first: Written {
                prec: None,
                nest: 0,
                weight: 0,
            },
            nest: 0,
            weight: 0,
        }
    }

    /// Starts an alternative, writing the `|` before it: where it began.
    fn separate(&self, out: &mut String) -> usize {
        let at = out.len();
        if self.kept > 0 {
            out.push('|');
        }
        at
    }

    fn push(&mut self, item: Written) {
        if self.kept == 0 {
            self.first = item;
        }
        self.kept += 1;
        let nest = if item.prec == Some(Prec::Alt) {
            item.nest.saturating_sub(1)
        } else {
            item.nest
        };
        self.nest = self.nest.max(nest);
        self.weight += item.weight;
    }

    /// `path` then an own part of its node ([`KeyTrie::write_own`]) as an
    /// alternative: a class of nest `own` that `write_own` writes, or the
    /// empty string where `own` is `None`.
    fn item(
        &mut self,
        out: &mut String,
        path: &str,
        own: Option<u32>,
        write_own: impl FnOnce(&mut String),
    ) {
        let chars = path.chars().count();
        if own.is_none() && chars == 0 {
            self.empty = true;
            return;
        }
        self.separate(out);
        for c in path.chars() {
            push_escaped(out, c);
        }
        let before = out.len();
        write_own(out);
        let own_weight = (out.len() - before) as u64;
        let path_weight = path.len() as u64;
        // A literal of one character is an atom of nest 0, of more a
        // concatenation of nest 1; a class is an atom.
        let item = match (chars, own) {
            (0, Some(nest)) => Written::atom(nest, own_weight),
            (1, None) => Written::atom(0, path_weight),
            (_, None) => Written {
                prec: Some(Prec::Concat),
                nest: 1,
                weight: path_weight,
            },
            (_, Some(nest)) => Written {
                prec: Some(Prec::Concat),
                nest: nest + 1,
                weight: path_weight + own_weight,
            },
        };
        self.push(item);
    }

    /// The alternation, made optional where the empty string is in it.
    fn finish(self, out: &mut String) -> Written {
        let joined = match self.kept {
            0 => {
                out.truncate(self.start);
                return Written {
                    prec: self.empty.then_some(Prec::Empty),
                    nest: 0,
                    weight: 0,
                };
            }
            1 => self.first,
            _ => Written {
                prec: Some(Prec::Alt),
                nest: self.nest + 1,
                weight: self.weight,
            },
        };
        if !self.empty {
            return joined;
        }
        // `x?`, or `(?:x)?` where `x` is no atom.
        let nest = if joined.prec == Some(Prec::Atom) {
            out.push('?');
            joined.nest + 1
        } else {
            out.insert_str(self.start, "(?:");
            out.push_str(")?");
            joined.nest + 2
        };
        Written {
            prec: Some(Prec::Quantified),
            nest,
            weight: joined.weight,
        }
    }
}

/// `c` as a literal of a regex.
fn push_escaped(out: &mut String, c: char) {
    if regex_syntax::is_meta_character(c) {
        out.push('\\');
    }
    out.push(c);
}

/// [`push_ascii_key_class_without`]'s class; `None` when no character is
/// left.
#[cfg(test)]
fn ascii_key_class_without(children: &[(char, KeyTrie)]) -> Option<String> {
    let mut class = String::new();
    push_ascii_key_class_without(children, &mut class);
    (class.len() > 2).then_some(class)
}

/// Writes the ASCII characters an unescaped JSON string holds (space to
/// DEL but `"` and `\`) other than the `children`'s, as a class (`[]`
/// when none is left: callers ask [`KeyTrie::leaves_ascii`] first).
fn push_ascii_key_class_without(children: &[(char, KeyTrie)], class: &mut String) {
    let mut left = ascii_key_chars_without(children);
    class.push('[');
    // Each run of set bits is a range of the class.
    while left != 0 {
        let start = left.trailing_zeros();
        let len = (!(left >> start)).trailing_zeros();
        let end = start + len - 1;
        push_class_char(class, start as u8);
        if end > start {
            class.push('-');
            push_class_char(class, end as u8);
        }
        left &= !(((1u128 << len) - 1) << start);
    }
    class.push(']');
}

/// The ASCII characters an unescaped JSON string holds (space to DEL but
/// `"` and `\`) other than the `children`'s, as bits by code.
fn ascii_key_chars_without(children: &[(char, KeyTrie)]) -> u128 {
    let key_chars = (u128::MAX << 0x20) & !(1 << b'"') & !(1 << b'\\');
    children
        .iter()
        .filter(|(c, _)| c.is_ascii())
        .fold(key_chars, |left, (c, _)| left & !(1 << *c as u32))
}

/// ASCII `b` as a class member: printable ones as themselves (escaped
/// where they mean something in a class), DEL as `\x7F`.
fn push_class_char(class: &mut String, b: u8) {
    if b == 0x7F {
        class.push_str("\\x7F");
    } else {
        if regex_syntax::is_meta_character(b as char) {
            class.push('\\');
        }
        class.push(b as char);
    }
}

/// Fraction digit strings `D` with `0.D >= 0.F` (`F` non-empty, no
/// trailing zero): `D` agrees with `F` up to a larger digit, or starts
/// with all of `F`.
/// `d` when `k` is 10^-d (0.1, 0.01, …, as a double: the double nearest to
/// it), for d in 1..=15.
fn decimal_step(k: f64) -> Option<u32> {
    let text = k.to_string();
    let zeros = text.strip_prefix("0.")?.strip_suffix('1')?;
    (zeros.bytes().all(|c| c == b'0') && zeros.len() < 15).then(|| zeros.len() as u32 + 1)
}

enum BoundValue {
    Exact(Int),
    Fraction(f64),
}

fn bound_value(b: &super::lower::Bound<'_>) -> Result<BoundValue, GrammarError> {
    let Value::Number(n) = b.value else {
        return Err(GrammarError::schema_at(&b.ptr, "a bound must be a number"));
    };
    if let Some(i) = n.as_i64() {
        return Ok(BoundValue::Exact(
            Int::parse(&i.to_string()).expect("an integer"),
        ));
    }
    if let Some(u) = n.as_u64() {
        return Ok(BoundValue::Exact(
            Int::parse(&u.to_string()).expect("an integer"),
        ));
    }
    let f = n
        .as_f64()
        .filter(|f| f.is_finite())
        .ok_or_else(|| GrammarError::schema_at(&b.ptr, "a bound must be finite"))?;
    if f.fract() != 0.0 {
        return Ok(BoundValue::Fraction(f));
    }
    // An integer literal beyond 2^64 reaches us as a double, possibly
    // rounded; only exponent-sized values (1e300) are taken as written.
    if f.abs() >= 18_446_744_073_709_551_616.0 && f.abs() < 1e300 {
        return Err(GrammarError::unsupported_at(
            &b.ptr,
            "an integer bound beyond 2^64 (it may have been rounded)",
        ));
    }
    Ok(BoundValue::Exact(int_of(f)))
}

fn int_of(f: f64) -> Int {
    Int::parse(&format!("{f:.0}")).expect("an integral double prints as an integer")
}

fn exactly_double(v: &Int) -> bool {
    let text = format!("{}{}", if v.neg { "-" } else { "" }, v.mag.digits());
    match text.parse::<f64>() {
        Ok(f) => int_of(f) == *v,
        Err(_) => false,
    }
}

fn within_magnitude(v: &Int, limit: u64) -> bool {
    v.mag <= numeric::Nat::new(&limit.to_string())
}

/// Integers that are multiples of `k`, for the `k` with a digit rule.
fn multiple_of_regex(k: u64) -> Option<Lang> {
    let text = match k {
        1 => INTEGER_RE.to_string(),
        2 => "-?(?:[02468]|[1-9][0-9]*[02468])".to_string(),
        5 => "-?(?:[05]|[1-9][0-9]*[05])".to_string(),
        _ => {
            let s = k.to_string();
            let zeros = s.len() - 1;
            if s.starts_with('1') && s[1..].bytes().all(|b| b == b'0') {
                format!("-?(?:0|[1-9][0-9]*0{{{zeros}}})")
            } else {
                return None;
            }
        }
    };
    Some(Lang::atom(format!("(?:{text})"), 5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokensieve_core::testing::SplitMix64;

    /// Names longer than the nested levels (written flat below them),
    /// sharing long prefixes, with non-ASCII characters deep down: keys
    /// near the names (cut, changed at one place, made longer) are extra
    /// keys exactly when they are no name, and the text grows with the
    /// trie, not with its paths' lengths.
    #[test]
    fn key_complement_of_long_names() {
        let stem = "a".repeat(NESTED_TRIE_LEVELS + 6);
        let names: Vec<String> = vec![
            format!("{stem}b"),
            format!("{stem}bc"),
            format!("{stem}é"),
            format!("{stem}éx"),
            format!("{}z", &stem[..NESTED_TRIE_LEVELS - 1]),
            "q".repeat(3 * NESTED_TRIE_LEVELS),
        ];
        let Lang::Re(rx) = key_complement(&names).1 else {
            panic!("no key at all");
        };
        let letters: usize = names.iter().map(|n| n.chars().count()).sum();
        assert!(rx.text.len() < 60 * letters, "{} bytes", rx.text.len());
        assert!(
            rx.nest <= 3 * NESTED_TRIE_LEVELS as u32 + 16,
            "nest {}",
            rx.nest
        );
        let re = regex_automata::meta::Regex::new(&format!("^(?:{})$", rx.text)).unwrap();
        let alphabet = ['a', 'b', 'c', 'é', 'x', 'z', 'q', 'ü', '~', '"'];
        let mut rng = SplitMix64(7);
        for _ in 0..3_000 {
            let base: Vec<char> = names[rng.below(names.len())].chars().collect();
            let mut key = base.clone();
            match rng.below(4) {
                0 => key.truncate(rng.below(base.len() + 1)),
                1 => {
                    let at = rng.below(base.len());
                    key[at] = alphabet[rng.below(alphabet.len())];
                }
                2 => key.push(alphabet[rng.below(alphabet.len())]),
                _ => {}
            }
            let key: String = key.into_iter().collect();
            let expected = !names.contains(&key) && !key.contains('"');
            assert_eq!(re.is_match(&key), expected, "{key:?}");
        }
    }

    /// Extra keys are every string of unescaped characters but the
    /// declared names (prefixes of each other, the empty name, non-ASCII
    /// among them), and the text holds one tail of "any character" only.
    #[test]
    fn key_complement_is_every_other_key() {
        // Names a key writes escaped exclude nothing (were they on the
        // trie, their paths would let a quote or a control character into
        // a key unescaped).
        let names: Vec<String> = [
            "", "a", "ab", "abc", "b", "dé", "déf", "x-y", "a\nb", "x\"", "y\\z",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for k in [0, 1, 3, names.len() - 3, names.len()] {
            let excluded = &names[k.min(names.len())..];
            let Lang::Re(rx) = key_complement(excluded).1 else {
                panic!("no key at all");
            };
            let tail = format!("{}*", crate::ecma::UNESCAPED_CLASS);
            assert_eq!(rx.text.matches(&tail).count(), 1, "{}", rx.text);
            let re = regex_automata::meta::Regex::new(&format!("^(?:{})$", rx.text)).unwrap();
            let alphabet = [
                'a', 'b', 'c', 'd', 'é', 'f', 'x', '-', 'y', 'z', '\n', '"', '\\',
            ];
            let mut rng = SplitMix64(k as u64);
            for _ in 0..6_000 {
                let len = rng.below(5);
                let key: String = (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                let expected = !excluded.contains(&key) && key.chars().all(is_unescaped_key_char);
                assert_eq!(re.is_match(&key), expected, "{key:?} against {excluded:?}");
            }
        }
    }

    /// A key built straight from the names ([`tokensieve_automata::json_keys::OtherKeys`])
    /// is the language of the regex written for them, byte for byte:
    /// names that are prefixes of each other, the empty name, characters
    /// of two, three and four bytes, names written escaped; texts with
    /// quotes, backslashes, control characters and bytes no UTF-8 holds.
    #[test]
    fn other_keys_built_from_the_names_are_the_key_complement() {
        use tokensieve_automata::json_keys::OtherKeys;
        use tokensieve_automata::lazy::{LazyDfa, Part};
        let limits = tokensieve_automata::dfa::DfaLimits {
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 32 << 20,
            max_dfa_states: 50_000,
            minimize: false,
        };
        let run = |d: &LazyDfa, bytes: &[u8]| {
            let mut at = d.start();
            for &b in bytes {
                at = d.next(at, b);
                if at == tokensieve_automata::dfa::DEAD {
                    return false;
                }
            }
            d.is_accepting(at)
        };
        let chars = ['a', 'b', '-', 'é', 'ê', '€', '😀', '"', '\\', '\n', '\x7F'];
        let mut rng = SplitMix64(29);
        for case in 0..60 {
            let count = rng.below(6) + usize::from(case % 10 == 0) * 40;
            let mut names: Vec<String> = (0..count)
                .map(|_| {
                    (0..rng.below(4))
                        .map(|_| chars[rng.below(chars.len())])
                        .collect()
                })
                .collect();
            if case % 3 == 0 {
                names.push(String::new());
            }
            let text = quoted_key_complement(&names).0;
            let text = text.text().expect("a key language");
            let written = LazyDfa::build(text, &limits).unwrap();
            let keys = OtherKeys::new(&names);
            let built = LazyDfa::from_sources(&[Part::OtherKeys(&keys)], &limits).unwrap();
            let mut texts: Vec<Vec<u8>> = Vec::new();
            for name in &names {
                let quoted = format!("\"{name}\"");
                texts.push(quoted.clone().into_bytes());
                texts.push(quoted[..quoted.len() - 1].to_string().into_bytes());
                texts.push(format!("\"{name}a\"").into_bytes());
                texts.push(format!("\"{name}é\"").into_bytes());
            }
            for _ in 0..400 {
                let mut t = vec![b'"'];
                for _ in 0..rng.below(6) {
                    match rng.below(12) {
                        0 => t.push([0x80, 0xFF, 0xC3, 0xE2, 0x00][rng.below(5)]),
                        _ => {
                            let c = chars[rng.below(chars.len())];
                            t.extend_from_slice(c.to_string().as_bytes());
                        }
                    }
                }
                if rng.below(4) != 0 {
                    t.push(b'"');
                }
                texts.push(t);
            }
            for t in &texts {
                assert_eq!(
                    run(&built, t),
                    run(&written, t),
                    "{:?} with names {names:?}",
                    String::from_utf8_lossy(t)
                );
            }
        }
    }

    /// What a quoted key complement tells of itself without being parsed
    /// (a verbatim rule's figures) is what its syntax tree measures, or a
    /// little more: never less, so no lexeme is charged less than it costs.
    #[test]
    fn a_key_complement_knows_its_measure() {
        let stem = "a".repeat(NESTED_TRIE_LEVELS + 6);
        let sets: Vec<Vec<String>> = vec![
            vec!["a".into()],
            vec![
                "".into(),
                "ab".into(),
                "abc".into(),
                "dé".into(),
                "x-y".into(),
            ],
            vec![format!("{stem}b"), format!("{stem}é"), "q".repeat(40)],
            [
                "apiVersion",
                "kind",
                "metadata",
                "spec",
                "status",
                "annotations",
                "labels",
                "name",
                "namespace",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ];
        // Many names, deep and wide, sharing prefixes.
        let mut rng = SplitMix64(43);
        let random: Vec<String> = (0..300)
            .map(|_| {
                let len = 1 + rng.below(40);
                (0..len)
                    .map(|_| ['a', 'b', '-', 'é'][rng.below(4)])
                    .collect()
            })
            .collect();
        let chain: Vec<String> = (1..60).map(|n| "k".repeat(n)).collect();
        for names in sets.into_iter().chain([random, chain]) {
            let names: Vec<String> = names;
            let (lang, verbatim) = quoted_key_complement(&names);
            // Told without writing the text: the same weight, a bound on
            // the depth.
            if let Some(unwritten) = deferred_key_complement(&names) {
                assert_eq!(unwritten.weight, verbatim.weight, "{names:?}");
                assert!(unwritten.depth >= verbatim.depth, "{names:?}");
            } else {
                assert!(verbatim.weight < DEFERRED_KEYS_WEIGHT, "{names:?}");
            }
            let text = lang.text().expect("a key");
            let tree = tokensieve_automata::syntax::parse(text, 1 << 12).unwrap();
            let measure = tokensieve_grammar::regular::Measure::of(&tree);
            assert!(!verbatim.nullable);
            assert_eq!(
                tree.properties().minimum_len() == Some(0),
                verbatim.nullable
            );
            assert!(
                verbatim.weight >= measure.weight && verbatim.weight <= 2 * measure.weight,
                "{names:?}: {} for {}",
                verbatim.weight,
                measure.weight
            );
            assert!(
                verbatim.depth >= measure.depth,
                "{names:?}: {} for {}",
                verbatim.depth,
                measure.depth
            );
        }
    }

    /// [`KeyTrie::part`] as the combinators write it, level by level (what
    /// [`KeyTrie::write`] writes in one pass).
    fn composed(node: &KeyTrie, part: TriePart, depth: usize) -> Lang {
        if depth >= NESTED_TRIE_LEVELS {
            let mut alternatives = Vec::new();
            let mut stack: Vec<(String, &KeyTrie)> = vec![(String::new(), node)];
            while let Some((path, node)) = stack.pop() {
                for own in node.own(part) {
                    alternatives.push(rx::seq([Lang::lit(&path), own]));
                }
                for (c, child) in &node.children {
                    let mut p = path.clone();
                    p.push(*c);
                    stack.push((p, child));
                }
            }
            return rx::alt(alternatives);
        }
        let mut alternatives = node.own(part);
        for (c, child) in &node.children {
            alternatives.push(rx::seq([
                Lang::lit(&c.to_string()),
                composed(child, part, depth + 1),
            ]));
        }
        rx::alt(alternatives)
    }

    /// The trie's text written in one pass is the combinators' text, with
    /// their precedence, nest and weight, for every part, at every level
    /// (names deeper than the nested levels, non-ASCII, meta characters,
    /// names that are prefixes of others, the empty name).
    #[test]
    fn a_trie_written_in_one_pass_is_the_composed_one() {
        let alphabet = ['a', 'b', '.', '(', 'é', '\u{1F600}', 'z', '-', ' ', '*'];
        let mut rng = SplitMix64(11);
        for round in 0..300 {
            let mut trie = KeyTrie::default();
            let count = 1 + rng.below(12);
            for _ in 0..count {
                let len = match round % 3 {
                    0 => rng.below(4),
                    1 => rng.below(10),
                    _ => NESTED_TRIE_LEVELS - 2 + rng.below(6),
                };
                let name: String = (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                trie.insert(&name);
            }
            for part in [
                TriePart::LeaveHere,
                TriePart::BeforeNonAscii,
                TriePart::Short,
            ] {
                for depth in [0, NESTED_TRIE_LEVELS - 1, NESTED_TRIE_LEVELS] {
                    let (one, reference) = (trie.part(part, depth), composed(&trie, part, depth));
                    match (&one, &reference) {
                        (Lang::Never, Lang::Never) => {}
                        (Lang::Re(a), Lang::Re(b)) => {
                            assert_eq!(a.text, b.text);
                            assert_eq!(
                                (a.prec, a.nest, a.weight),
                                (b.prec, b.nest, b.weight),
                                "{}",
                                a.text
                            );
                        }
                        _ => panic!("{one:?} against {reference:?}"),
                    }
                }
            }
        }
    }

    /// The class of a node's ASCII leaving characters, written from a bit
    /// set, holds exactly the characters a key may hold and no child
    /// continues with.
    #[test]
    fn an_ascii_leaving_class_is_every_other_key_character() {
        let mut rng = SplitMix64(5);
        for round in 0..500 {
            let mut children: Vec<(char, KeyTrie)> = Vec::new();
            let count = if round % 50 == 0 { 96 } else { rng.below(12) };
            for _ in 0..count {
                let c = match rng.below(4) {
                    0 => ['"', '\\', ' ', '\x7F', '-', ']', '['][rng.below(7)],
                    1 => 'é',
                    _ => char::from(0x20 + rng.below(96) as u8),
                };
                if !children.iter().any(|(k, _)| *k == c) {
                    children.push((c, KeyTrie::default()));
                }
            }
            let class = ascii_key_class_without(&children);
            let expected: Vec<char> = (0x20u8..=0x7F)
                .map(char::from)
                .filter(|&c| c != '"' && c != '\\' && !children.iter().any(|(k, _)| *k == c))
                .collect();
            let Some(class) = class else {
                assert!(expected.is_empty(), "no class for {expected:?}");
                continue;
            };
            let re = regex_automata::meta::Regex::new(&format!("^{class}$")).unwrap();
            for b in 0u8..=0x7F {
                let c = char::from(b);
                assert_eq!(
                    re.is_match(&c.to_string()),
                    expected.contains(&c),
                    "{class} at {c:?}"
                );
            }
        }
    }
}
