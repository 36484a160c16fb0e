//! Valid and near-miss JSON instances of a JSON Schema, built from the schema
//! itself (never from its lowering), for testing a constrained decoder
//! against an independent validator.
//!
//! [`instances`] reads the schema's keywords and builds values meant to be
//! valid (types, properties, items, bounds, lengths, `pattern`s, `format`s,
//! `enum`/`const`, `$ref`s unfolded to a bounded depth, one branch of each
//! `anyOf`/`oneOf`, `allOf` merged), then mutates each at the boundaries the
//! schema draws: a length or a count one past its bound, a number just
//! outside its range or off its `multipleOf`, a required member left out, an
//! extra member, a value of the wrong type, an `enum` value's neighbour, a
//! pattern-matching string with one character changed. A value's
//! [`Intent`] is what the generator meant, not a verdict: keywords it does
//! not model (`not`, `if`, `oneOf`'s exclusivity, `unevaluated*`,
//! `dependentSchemas`, ...) can make a meant-valid value invalid and a near
//! miss valid, so a caller judges every instance with a validator (the
//! `jsonschema` crate in this workspace's tests) and compares the decoder's
//! verdict with that one.
//!
//! Deterministic: the same schema and [`InstanceOptions`] give the same
//! instances on every machine (a `SplitMix64` stream of its own, no global
//! randomness).
//!
//! ```
//! use tokensieve_json_schema::instances::{instances, InstanceOptions, Intent};
//!
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string", "maxLength": 3}},
//!     "required": ["name"],
//!     "additionalProperties": false
//! });
//! let all = instances(&schema, &InstanceOptions::default());
//! assert!(all.iter().any(|i| i.intent == Intent::Valid));
//! // One near miss is the name one character too long.
//! assert!(all.iter().any(|i| i.how.contains("maxLength+1")));
//! ```

use regex_syntax::hir::{Class, Hir, HirKind, Look};
use serde_json::{Map, Number, Value};

use crate::ecma::{SearchPattern, Universe};

/// What [`instances`] builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceOptions {
    /// The seed of the random stream.
    pub seed: u64,
    /// How many values meant to be valid are built (duplicates are kept
    /// once). Default 4.
    pub valid: usize,
    /// At most this many near misses of each valid value. Default 12.
    pub near_misses: usize,
    /// How many times one `$ref` may be unfolded along a path (recursive
    /// schemas end there: an optional member or an empty array is left
    /// out). Default 3.
    pub max_ref_depth: u32,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        InstanceOptions {
            seed: 0x5eed,
            valid: 4,
            near_misses: 12,
            max_ref_depth: 3,
        }
    }
}

/// What the generator meant an instance to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Built to satisfy every keyword the generator models.
    Valid,
    /// A valid value changed at one place to break one keyword (or to sit
    /// exactly on a bound, which may be valid: the label says which).
    NearMiss,
}

/// One generated instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub value: Value,
    pub intent: Intent,
    /// `valid`, or where and how the value was changed:
    /// `/properties/name: maxLength+1`.
    pub how: String,
}

/// Valid and near-miss instances of `schema` (a JSON Schema document),
/// each value once. A schema the generator cannot build a value for
/// (`false`, a contradiction, a `$ref` to another document) gives what it
/// can: values of any type, judged by the caller's validator like the rest.
pub fn instances(schema: &Value, options: &InstanceOptions) -> Vec<Instance> {
    let mut generator = Generator {
        root: schema,
        rng: Rng(options.seed ^ 0x9e37_79b9_7f4a_7c15),
        refs: Vec::new(),
        max_ref_depth: options.max_ref_depth,
        nodes: 0,
    };
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |out: &mut Vec<Instance>, value: Value, intent, how: String| {
        if seen.insert(value.to_string()) {
            out.push(Instance { value, intent, how });
        }
    };
    for attempt in 0..options.valid.max(1) {
        generator.nodes = 0;
        generator.refs.clear();
        let value = match generator.value(schema, 0) {
            Some(v) => v,
            // Nothing the generator models fits: a value of any type, for
            // the validator to judge (the first attempt only; a schema of
            // contradictions gives one).
            None if attempt == 0 => generator.any(2),
            None => continue,
        };
        let mut misses = Vec::new();
        generator.nodes = 0;
        generator.refs.clear();
        generator.near_misses(schema, &value, "", 0, &mut misses);
        push(&mut out, value, Intent::Valid, "valid".into());
        // A fixed-size sample, drawn from the stream so that it is
        // deterministic.
        while misses.len() > options.near_misses {
            let k = generator.rng.below(misses.len() as u64) as usize;
            misses.swap_remove(k);
        }
        for (v, how) in misses {
            push(&mut out, v, Intent::NearMiss, how);
        }
    }
    out
}

/// SplitMix64: a tiny generator whose stream is the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn pick<'v, T>(&mut self, items: &'v [T]) -> &'v T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Nodes of one value at most: a schema asking for thousands of items gets
/// what fits, and the validator says the rest.
const MAX_NODES: usize = 4000;
/// Nesting of generated values at most (past it, optional parts are left
/// out).
const MAX_DEPTH: u32 = 24;

struct Generator<'s> {
    root: &'s Value,
    rng: Rng,
    /// The `$ref`s unfolded along the current path.
    refs: Vec<String>,
    max_ref_depth: u32,
    nodes: usize,
}

/// Keywords whose members are merged key by key when two schema objects
/// are combined (`allOf`, a `$ref` beside other keywords).
const MAP_KEYWORDS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentRequired",
];

const TYPES: [&str; 7] = [
    "null", "boolean", "integer", "number", "string", "array", "object",
];

impl<'s> Generator<'s> {
    /// The schema object `schema` stands for, with its `$ref` followed,
    /// its `allOf` merged in and one `anyOf`/`oneOf` branch chosen (each
    /// merged into the rest), or `None` for `false` and for a `$ref` that
    /// cannot be followed (or is unfolded too often on this path).
    fn view(&mut self, schema: &Value, depth: u32) -> Option<Map<String, Value>> {
        let mut m = match schema {
            Value::Bool(true) => return Some(Map::new()),
            Value::Object(m) => m.clone(),
            _ => return None,
        };
        if depth > MAX_DEPTH {
            return None;
        }
        if let Some(Value::String(r)) = m.remove("$ref") {
            let count = self.refs.iter().filter(|x| **x == r).count() as u32;
            if count >= self.max_ref_depth {
                return None;
            }
            let target = self.resolve(&r)?;
            self.refs.push(r);
            let inner = self.view(&target, depth + 1);
            self.refs.pop();
            m = merge(inner?, m);
        }
        if let Some(Value::Array(all)) = m.remove("allOf") {
            for branch in &all {
                let inner = self.view(branch, depth + 1)?;
                m = merge(m, inner);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = m.remove(key) {
                if branches.is_empty() {
                    return None;
                }
                // A branch that cannot be built is skipped for another.
                let start = self.rng.below(branches.len() as u64) as usize;
                let mut chosen = None;
                for k in 0..branches.len() {
                    let branch = &branches[(start + k) % branches.len()];
                    if let Some(inner) = self.view(branch, depth + 1) {
                        chosen = Some(inner);
                        break;
                    }
                }
                m = merge(m, chosen?);
            }
        }
        Some(m)
    }

    /// The sub-schema a `$ref` names: `#`, a JSON pointer, an anchor, or an
    /// embedded resource's `$id` (with a pointer after it).
    fn resolve(&self, reference: &str) -> Option<Value> {
        let (base, fragment) = match reference.split_once('#') {
            Some((b, f)) => (b, f),
            None => (reference, ""),
        };
        let mut doc = self.root;
        if !base.is_empty() {
            doc = find_resource(self.root, base)?;
        }
        if fragment.is_empty() {
            return Some(doc.clone());
        }
        if let Some(pointer) = fragment.strip_prefix('/') {
            let mut at = doc;
            for token in pointer.split('/') {
                let token = percent_decode(token).replace("~1", "/").replace("~0", "~");
                at = match at {
                    Value::Object(m) => m.get(&token)?,
                    Value::Array(a) => a.get(token.parse::<usize>().ok()?)?,
                    _ => return None,
                };
            }
            return Some(at.clone());
        }
        find_anchor(doc, fragment).cloned()
    }

    /// A value meant to be valid under `schema`.
    fn value(&mut self, schema: &Value, depth: u32) -> Option<Value> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return None;
        }
        let m = self.view(schema, depth)?;
        if let Some(c) = m.get("const") {
            return Some(c.clone());
        }
        if let Some(Value::Array(values)) = m.get("enum") {
            if values.is_empty() {
                return None;
            }
            return Some(self.rng.pick(values).clone());
        }
        let ty = self.pick_type(&m)?;
        Some(match ty {
            "null" => Value::Null,
            "boolean" => Value::Bool(self.rng.chance(0.5)),
            "integer" => self.integer(&m)?,
            "number" => self.number(&m)?,
            "string" => Value::String(self.string(&m)),
            "array" => self.array(&m, depth)?,
            "object" => self.object(&m, depth)?,
            _ => return None,
        })
    }

    /// The types `m` allows, from `type` or, without one, from the
    /// keywords that only apply to some type.
    fn types(&self, m: &Map<String, Value>) -> Vec<&'static str> {
        match m.get("type") {
            Some(Value::String(t)) => TYPES.iter().copied().filter(|x| x == t).collect(),
            Some(Value::Array(ts)) => TYPES
                .iter()
                .copied()
                .filter(|x| ts.iter().any(|t| t == x))
                .collect(),
            _ => {
                let has = |keys: &[&str]| keys.iter().any(|k| m.contains_key(*k));
                let mut out = Vec::new();
                if has(&[
                    "properties",
                    "required",
                    "additionalProperties",
                    "patternProperties",
                    "minProperties",
                    "maxProperties",
                ]) {
                    out.push("object");
                }
                if has(&["items", "prefixItems", "minItems", "maxItems", "contains"]) {
                    out.push("array");
                }
                if has(&["minLength", "maxLength", "pattern", "format"]) {
                    out.push("string");
                }
                if has(&[
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum",
                    "multipleOf",
                ]) {
                    out.push("number");
                }
                if out.is_empty() {
                    out.extend(TYPES);
                }
                out
            }
        }
    }

    fn pick_type(&mut self, m: &Map<String, Value>) -> Option<&'static str> {
        let types = self.types(m);
        if types.is_empty() {
            return None;
        }
        Some(*self.rng.pick(&types))
    }

    /// Any JSON value, nested at most `depth` levels.
    fn any(&mut self, depth: u32) -> Value {
        let kinds = if depth == 0 { 5 } else { 7 };
        match self.rng.below(kinds) {
            0 => Value::Null,
            1 => Value::Bool(self.rng.chance(0.5)),
            2 => Value::from(self.rng.below(2000) as i64 - 1000),
            3 => number_value(self.rng.below(100_000) as f64 / 100.0 - 500.0),
            4 => Value::String(self.free_string(0, Some(8))),
            5 => {
                let n = self.rng.below(3);
                Value::Array((0..n).map(|_| self.any(depth - 1)).collect())
            }
            _ => {
                let n = self.rng.below(3);
                let mut m = Map::new();
                for i in 0..n {
                    m.insert(format!("k{i}"), self.any(depth - 1));
                }
                Value::Object(m)
            }
        }
    }

    /// The closed range an integer must lie in, from the bounds of any
    /// draft (draft 4's boolean `exclusive*` included).
    fn bounds(m: &Map<String, Value>) -> (Option<f64>, bool, Option<f64>, bool) {
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        let mut lo = num("minimum");
        let mut lo_open = false;
        let mut hi = num("maximum");
        let mut hi_open = false;
        match m.get("exclusiveMinimum") {
            Some(Value::Bool(true)) => lo_open = true,
            Some(Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(0.0);
                if lo.is_none_or(|l| x >= l) {
                    lo = Some(x);
                    lo_open = true;
                }
            }
            _ => {}
        }
        match m.get("exclusiveMaximum") {
            Some(Value::Bool(true)) => hi_open = true,
            Some(Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(0.0);
                if hi.is_none_or(|h| x <= h) {
                    hi = Some(x);
                    hi_open = true;
                }
            }
            _ => {}
        }
        (lo, lo_open, hi, hi_open)
    }

    fn integer(&mut self, m: &Map<String, Value>) -> Option<Value> {
        let (lo, lo_open, hi, hi_open) = Self::bounds(m);
        let lo = lo.map(|l| if lo_open { l.floor() + 1.0 } else { l.ceil() });
        let hi = hi.map(|h| if hi_open { h.ceil() - 1.0 } else { h.floor() });
        let (lo, hi) = span(lo, hi, 1000.0);
        let step = m
            .get("multipleOf")
            .and_then(Value::as_f64)
            .filter(|s| *s > 0.0 && s.fract() == 0.0)
            .unwrap_or(1.0);
        let (k_lo, k_hi) = ((lo / step).ceil(), (hi / step).floor());
        if k_lo > k_hi {
            return None;
        }
        let k = k_lo + self.rng.below((k_hi - k_lo).min(1e9) as u64 + 1) as f64;
        let x = k * step;
        Some(if x.abs() < 9e15 {
            Value::from(x as i64)
        } else {
            number_value(x)
        })
    }

    fn number(&mut self, m: &Map<String, Value>) -> Option<Value> {
        if let Some(step) = m.get("multipleOf").and_then(Value::as_f64)
            && step > 0.0
        {
            let (lo, lo_open, hi, hi_open) = Self::bounds(m);
            let (lo, hi) = span(lo, hi, 100.0 * step);
            let mut k_lo = (lo / step).ceil();
            let mut k_hi = (hi / step).floor();
            if lo_open && k_lo * step <= lo {
                k_lo += 1.0;
            }
            if hi_open && k_hi * step >= hi {
                k_hi -= 1.0;
            }
            if k_lo > k_hi {
                return None;
            }
            let k = k_lo + self.rng.below((k_hi - k_lo).min(1e9) as u64 + 1) as f64;
            return Some(multiple(k, step));
        }
        if self.rng.chance(0.3) {
            return self.integer(m);
        }
        let (lo, lo_open, hi, hi_open) = Self::bounds(m);
        let (lo, hi) = span(lo, hi, 1000.0);
        // Two decimals, strictly inside an open bound.
        for _ in 0..8 {
            let x = lo + (hi - lo) * (self.rng.below(10_001) as f64 / 10_000.0);
            let x = (x * 100.0).round() / 100.0;
            let inside = (if lo_open { x > lo } else { x >= lo })
                && (if hi_open { x < hi } else { x <= hi });
            if inside {
                return Some(number_value(x));
            }
        }
        None
    }

    fn string(&mut self, m: &Map<String, Value>) -> String {
        let min = m.get("minLength").and_then(Value::as_u64).unwrap_or(0);
        let max = m.get("maxLength").and_then(Value::as_u64);
        if let Some(Value::String(p)) = m.get("pattern") {
            let mut last = None;
            for _ in 0..8 {
                match self.pattern_string(p) {
                    Some(s) => {
                        let n = s.chars().count() as u64;
                        if n >= min && max.is_none_or(|x| n <= x) {
                            return s;
                        }
                        last = Some(s);
                    }
                    None => break,
                }
            }
            if let Some(s) = last {
                return s;
            }
        }
        if let Some(Value::String(f)) = m.get("format")
            && let Some(s) = self.format_string(f)
        {
            return s;
        }
        self.free_string(min, max)
    }

    /// A string of `min..=max` characters (a few more than `min` when
    /// unbounded), mostly ASCII, sometimes characters that need an escape
    /// or more than one UTF-8 byte.
    fn free_string(&mut self, min: u64, max: Option<u64>) -> String {
        let top = max.unwrap_or(min + 8).min(min + 8);
        let n = min + self.rng.below(top.saturating_sub(min) + 1);
        let mut s = String::new();
        for _ in 0..n.min(MAX_NODES as u64) {
            s.push(self.free_char());
        }
        s
    }

    fn free_char(&mut self) -> char {
        const PLAIN: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.";
        const SPECIAL: [char; 12] = [
            '"', '\\', '\n', '\t', '\u{1}', '/', 'é', '日', '😀', '\u{7f}', '\u{2028}', '\'',
        ];
        if self.rng.chance(0.9) {
            *self.rng.pick(PLAIN) as char
        } else {
            *self.rng.pick(&SPECIAL)
        }
    }

    /// A string that contains a match of the ECMA-262 `pattern` (read as
    /// `regex-syntax` syntax where it parses so, else through this crate's
    /// translation of ECMA-262 syntax), or `None` where neither reads it.
    fn pattern_string(&mut self, pattern: &str) -> Option<String> {
        if let Ok(hir) = regex_syntax::ParserBuilder::new().build().parse(pattern) {
            let look = hir.properties().look_set_prefix();
            let anchored_start = look.contains(Look::Start);
            let anchored_end = hir.properties().look_set_suffix().contains(Look::End);
            let mut s = String::new();
            if !anchored_start && self.rng.chance(0.3) {
                s.push_str(&self.free_string(1, Some(2)).replace(['"', '\\'], "a"));
            }
            self.sample(&hir, &mut s);
            if !anchored_end && self.rng.chance(0.3) {
                s.push_str(&self.free_string(1, Some(2)).replace(['"', '\\'], "a"));
            }
            return Some(s);
        }
        let lang = SearchPattern::parse(pattern)
            .ok()?
            .lower(Universe::JsonUnescaped, 0, None)
            .ok()?;
        let hir = regex_syntax::Parser::new().parse(lang.text()?).ok()?;
        let mut s = String::new();
        self.sample(&hir, &mut s);
        Some(s)
    }

    /// Appends a random member of `hir`'s language to `out`: unbounded
    /// repetitions a few times at most, class characters mostly printable
    /// ASCII when the class has some.
    fn sample(&mut self, hir: &Hir, out: &mut String) {
        if out.len() > 4 * MAX_NODES {
            return;
        }
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Literal(l) => out.push_str(&String::from_utf8_lossy(&l.0)),
            HirKind::Class(Class::Unicode(c)) => {
                let ranges = c.ranges();
                if ranges.is_empty() {
                    return;
                }
                let ascii: Vec<char> = ranges
                    .iter()
                    .flat_map(|r| {
                        let lo = (r.start() as u32).max(0x20);
                        let hi = (r.end() as u32).min(0x7e);
                        (lo..=hi).filter_map(char::from_u32)
                    })
                    .filter(|c| *c != '"' && *c != '\\')
                    .collect();
                if !ascii.is_empty() && self.rng.chance(0.9) {
                    out.push(*self.rng.pick(&ascii));
                } else {
                    let r = self.rng.pick(ranges);
                    let width = r.end() as u32 - r.start() as u32;
                    let c = (r.start() as u32 + self.rng.below(width as u64 + 1) as u32)
                        .min(r.end() as u32);
                    out.push(char::from_u32(c).unwrap_or(r.start()));
                }
            }
            HirKind::Class(Class::Bytes(c)) => {
                let ascii: Vec<u8> = c
                    .ranges()
                    .iter()
                    .flat_map(|r| r.start().max(0x20)..=r.end().min(0x7e))
                    .collect();
                if !ascii.is_empty() {
                    out.push(*self.rng.pick(&ascii) as char);
                }
            }
            HirKind::Repetition(r) => {
                let extra = match r.max {
                    Some(max) => (max - r.min).min(3),
                    None => 3,
                };
                let n = r.min.min(MAX_NODES as u32) + self.rng.below(extra as u64 + 1) as u32;
                for _ in 0..n {
                    self.sample(&r.sub, out);
                }
            }
            HirKind::Capture(c) => self.sample(&c.sub, out),
            HirKind::Concat(items) => {
                for h in items {
                    self.sample(h, out);
                }
            }
            HirKind::Alternation(items) => {
                let h = self.rng.pick(items);
                self.sample(h, out);
            }
        }
    }

    /// A string in a `format` (RFC 3339, RFC 4122, RFC 5321 and so on),
    /// written from the format's own definition; `None` for a format
    /// without one here.
    fn format_string(&mut self, format: &str) -> Option<String> {
        let d = |g: &mut Self, n: u64| g.rng.below(n);
        let date = |g: &mut Self| {
            format!(
                "{:04}-{:02}-{:02}",
                1970 + d(g, 80),
                1 + d(g, 12),
                1 + d(g, 28)
            )
        };
        let time = |g: &mut Self| {
            let zone = match d(g, 3) {
                0 => "Z".to_string(),
                1 => format!("+{:02}:{:02}", d(g, 14), 30 * d(g, 2)),
                _ => format!("-{:02}:00", d(g, 12)),
            };
            let frac = if g.rng.chance(0.3) {
                format!(".{}", d(g, 1000))
            } else {
                String::new()
            };
            format!(
                "{:02}:{:02}:{:02}{frac}{zone}",
                d(g, 24),
                d(g, 60),
                d(g, 60)
            )
        };
        let word = |g: &mut Self, n: u64| -> String {
            (0..1 + d(g, n))
                .map(|_| (b'a' + d(g, 26) as u8) as char)
                .collect()
        };
        Some(match format {
            "date" => date(self),
            "time" => time(self),
            "date-time" => format!("{}T{}", date(self), time(self)),
            "uuid" => {
                let hex = |g: &mut Self, n: usize| -> String {
                    (0..n)
                        .map(|_| char::from_digit(d(g, 16) as u32, 16).unwrap())
                        .collect()
                };
                format!(
                    "{}-{}-{}-{}-{}",
                    hex(self, 8),
                    hex(self, 4),
                    hex(self, 4),
                    hex(self, 4),
                    hex(self, 12)
                )
            }
            "email" | "idn-email" => format!("{}@{}.com", word(self, 8), word(self, 8)),
            "hostname" | "idn-hostname" => format!("{}.{}.org", word(self, 8), word(self, 8)),
            "ipv4" => format!(
                "{}.{}.{}.{}",
                d(self, 256),
                d(self, 256),
                d(self, 256),
                d(self, 256)
            ),
            "ipv6" => (0..8)
                .map(|_| format!("{:x}", d(self, 65536)))
                .collect::<Vec<_>>()
                .join(":"),
            "uri" | "iri" | "url" => format!("https://{}.com/{}", word(self, 8), word(self, 6)),
            "uri-reference" | "iri-reference" => format!("/{}/{}", word(self, 6), word(self, 6)),
            "json-pointer" => format!("/{}/{}", word(self, 6), d(self, 10)),
            _ => return None,
        })
    }

    fn array(&mut self, m: &Map<String, Value>, depth: u32) -> Option<Value> {
        let (prefix, rest) = item_schemas(m);
        let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let max = m.get("maxItems").and_then(Value::as_u64);
        let top = max.unwrap_or(min + 3).min(min + 3);
        let mut n = min + self.rng.below(top.saturating_sub(min) + 1);
        if depth > MAX_DEPTH / 2 {
            n = min;
        }
        if matches!(rest, Some(Value::Bool(false))) {
            n = n.min(prefix.len() as u64);
        }
        let unique = m.get("uniqueItems") == Some(&Value::Bool(true));
        let mut items: Vec<Value> = Vec::new();
        for i in 0..n.min(MAX_NODES as u64) as usize {
            let schema = prefix.get(i).or(rest.as_ref()).cloned();
            let mut item = None;
            for _ in 0..if unique { 6 } else { 1 } {
                let candidate = match &schema {
                    Some(s) => self.value(s, depth + 1),
                    None => Some(self.any(1)),
                };
                if let Some(c) = candidate
                    && !(unique && items.contains(&c))
                {
                    item = Some(c);
                    break;
                }
            }
            match item {
                Some(v) => items.push(v),
                None if (i as u64) < min => return None,
                None => break,
            }
        }
        if let Some(c) = m.get("contains")
            && max.is_none_or(|x| (items.len() as u64) < x)
            && let Some(v) = self.value(c, depth + 1)
        {
            let at = self.rng.below(items.len() as u64 + 1) as usize;
            if at >= prefix.len() {
                items.insert(at, v);
            }
        }
        Some(Value::Array(items))
    }

    fn object(&mut self, m: &Map<String, Value>, depth: u32) -> Option<Value> {
        let empty = Map::new();
        let props = m
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let max_props = m.get("maxProperties").and_then(Value::as_u64);
        let min_props = m.get("minProperties").and_then(Value::as_u64).unwrap_or(0);
        let optional_p = if depth > MAX_DEPTH / 2 { 0.0 } else { 0.5 };
        let mut out = Map::new();
        for (name, schema) in props {
            let needed = required.contains(&name.as_str());
            if !needed && !self.rng.chance(optional_p) {
                continue;
            }
            if !needed && max_props.is_some_and(|x| out.len() as u64 >= x) {
                continue;
            }
            match self.value(schema, depth + 1) {
                Some(v) => {
                    out.insert(name.clone(), v);
                }
                None if needed => return None,
                None => {}
            }
        }
        for name in &required {
            if !out.contains_key(*name) {
                let v = self.member_value(m, name, depth)?;
                out.insert((*name).to_string(), v);
            }
        }
        // A member under a `patternProperties` pattern, or an extra one.
        if depth <= MAX_DEPTH / 2 && self.rng.chance(0.3) {
            if let Some(Value::Object(pp)) = m.get("patternProperties")
                && !pp.is_empty()
            {
                let keys: Vec<&String> = pp.keys().collect();
                let pattern = *self.rng.pick(&keys);
                if let Some(key) = self.pattern_string(pattern)
                    && !out.contains_key(&key)
                    && let Some(v) = self.value(&pp[pattern], depth + 1)
                {
                    out.insert(key, v);
                }
            } else if let Some(extra @ Value::Object(_)) = m.get("additionalProperties")
                && let Some(v) = self.value(extra, depth + 1)
            {
                out.insert(format!("extra{}", self.rng.below(100)), v);
            }
        }
        let mut k = 0;
        while (out.len() as u64) < min_props && k < min_props + 4 {
            k += 1;
            let name = format!("more{k}");
            if let Some(v) = self.member_value(m, &name, depth) {
                out.insert(name, v);
            }
        }
        // dependentRequired (and draft 7's array-valued dependencies).
        for key in ["dependentRequired", "dependencies"] {
            if let Some(Value::Object(deps)) = m.get(key) {
                for (trigger, needs) in deps {
                    if !out.contains_key(trigger) {
                        continue;
                    }
                    for need in needs.as_array().into_iter().flatten() {
                        if let Some(n) = need.as_str()
                            && !out.contains_key(n)
                        {
                            let v = self.member_value(m, n, depth)?;
                            out.insert(n.to_string(), v);
                        }
                    }
                }
            }
        }
        Some(Value::Object(out))
    }

    /// A value for member `name` of an object under `m`: its property's
    /// schema, the first matching pattern's, or `additionalProperties`'.
    fn member_value(&mut self, m: &Map<String, Value>, name: &str, depth: u32) -> Option<Value> {
        match member_schema(m, name) {
            Some(s) => self.value(&s, depth + 1),
            None => Some(self.any(1)),
        }
    }

    /// Near misses of the valid `value` under `schema` (at `pointer`),
    /// appended to `out` as whole values at this level.
    fn near_misses(
        &mut self,
        schema: &Value,
        value: &Value,
        pointer: &str,
        depth: u32,
        out: &mut Vec<(Value, String)>,
    ) {
        self.nodes += 1;
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            return;
        }
        let Some(m) = self.view(schema, depth) else {
            return;
        };
        let at = |how: String| {
            if pointer.is_empty() {
                format!("/: {how}")
            } else {
                format!("{pointer}: {how}")
            }
        };
        // A value of a type the schema does not allow.
        let types = self.types(&m);
        if m.contains_key("type") {
            let wrong: Vec<&str> = TYPES
                .iter()
                .copied()
                .filter(|t| !(types.contains(t) || (*t == "integer" && types.contains(&"number"))))
                .collect();
            if !wrong.is_empty() {
                let t = *self.rng.pick(&wrong);
                out.push((typed_value(t), at(format!("wrong type {t}"))));
            }
        }
        if let Some(c) = m.get("const") {
            for (k, v) in neighbours(c).into_iter().enumerate() {
                out.push((v, at(format!("const neighbour {k}"))));
            }
        }
        if let Some(Value::Array(values)) = m.get("enum")
            && !values.is_empty()
        {
            let v = self.rng.pick(values).clone();
            for (k, n) in neighbours(&v).into_iter().enumerate() {
                out.push((n, at(format!("enum neighbour {k}"))));
            }
        }
        match value {
            Value::String(s) => self.string_misses(&m, s, &at, out),
            Value::Number(n) => Self::number_misses(&m, n, &at, out),
            Value::Array(items) => self.array_misses(&m, items, pointer, depth, &at, out),
            Value::Object(members) => self.object_misses(&m, members, pointer, depth, &at, out),
            _ => {}
        }
    }

    fn string_misses(
        &mut self,
        m: &Map<String, Value>,
        s: &str,
        at: &dyn Fn(String) -> String,
        out: &mut Vec<(Value, String)>,
    ) {
        let chars: Vec<char> = s.chars().collect();
        if let Some(min) = m.get("minLength").and_then(Value::as_u64)
            && min > 0
        {
            let cut: String = self.fit(&chars, min - 1);
            out.push((Value::String(cut), at("minLength-1".into())));
            out.push((Value::String(self.fit(&chars, min)), at("minLength".into())));
        }
        if let Some(max) = m.get("maxLength").and_then(Value::as_u64)
            && max < MAX_NODES as u64
        {
            out.push((
                Value::String(self.fit(&chars, max + 1)),
                at("maxLength+1".into()),
            ));
            out.push((Value::String(self.fit(&chars, max)), at("maxLength".into())));
            // Characters that take an escape or several UTF-8 bytes still
            // count one each.
            let wide: Vec<char> = ['é', '\n', '😀', '"', '日']
                .into_iter()
                .cycle()
                .take(max as usize + 1)
                .collect();
            out.push((
                Value::String(wide[..max as usize].iter().collect()),
                at("maxLength, wide characters".into()),
            ));
            out.push((
                Value::String(wide.iter().collect()),
                at("maxLength+1, wide characters".into()),
            ));
        }
        let broken = m.contains_key("pattern") || m.contains_key("format");
        if broken {
            let what = if m.contains_key("pattern") {
                "pattern"
            } else {
                "format"
            };
            for edit in ["replace", "delete", "insert", "insert", "insert"] {
                let mut c = chars.clone();
                let k = match self.rng.below(3) {
                    // At the ends, where an anchor decides.
                    0 => 0,
                    1 => c.len().saturating_sub(usize::from(edit != "insert")),
                    _ => self.rng.below(c.len() as u64 + 1) as usize,
                };
                let replacement = *self.rng.pick(&['x', '0', '-', ' ', 'Z', '.', 'é']);
                match edit {
                    "replace" if k < c.len() => c[k] = replacement,
                    "delete" if k < c.len() => {
                        c.remove(k);
                    }
                    "insert" => c.insert(k, replacement),
                    _ => continue,
                }
                out.push((
                    Value::String(c.into_iter().collect()),
                    at(format!("{what} broken ({edit} at {k})")),
                ));
            }
        }
    }

    /// `chars` cut or padded to `n` characters (padding repeats the last
    /// character, so a pattern's character class still holds).
    fn fit(&mut self, chars: &[char], n: u64) -> String {
        let n = n as usize;
        let mut c: Vec<char> = chars.iter().copied().take(n).collect();
        let pad = chars.last().copied().unwrap_or('a');
        while c.len() < n {
            c.push(pad);
        }
        c.into_iter().collect()
    }

    fn number_misses(
        m: &Map<String, Value>,
        n: &Number,
        at: &dyn Fn(String) -> String,
        out: &mut Vec<(Value, String)>,
    ) {
        let integer = m.get("type").is_some_and(|t| t == "integer");
        let eps = if integer { 1.0 } else { 1e-3 };
        let mut bound = |key: &str, x: Option<f64>, delta: f64, how: &str| {
            if let Some(x) = x {
                out.push((number_value(x + delta), at(format!("{key}{how}"))));
            }
        };
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        bound("minimum", num("minimum"), 0.0, "");
        bound("minimum", num("minimum"), -eps, "-ε");
        bound("minimum", num("minimum"), -1.0, "-1");
        bound("maximum", num("maximum"), 0.0, "");
        bound("maximum", num("maximum"), eps, "+ε");
        bound("maximum", num("maximum"), 1.0, "+1");
        bound("exclusiveMinimum", num("exclusiveMinimum"), 0.0, "");
        bound("exclusiveMinimum", num("exclusiveMinimum"), eps, "+ε");
        bound("exclusiveMaximum", num("exclusiveMaximum"), 0.0, "");
        bound("exclusiveMaximum", num("exclusiveMaximum"), -eps, "-ε");
        if !integer {
            // Past the bound in the seventh decimal, and in the twelfth.
            for tiny in [1e-7, 1e-12] {
                let scale = |x: f64| tiny * x.abs().max(1.0);
                if let Some(x) = num("minimum") {
                    out.push((number_value(x - scale(x)), at(format!("minimum-{tiny:e}"))));
                }
                if let Some(x) = num("maximum") {
                    out.push((number_value(x + scale(x)), at(format!("maximum+{tiny:e}"))));
                }
                if let Some(x) = num("exclusiveMinimum") {
                    out.push((
                        number_value(x - scale(x)),
                        at(format!("exclusiveMinimum-{tiny:e}")),
                    ));
                }
                if let Some(x) = num("exclusiveMaximum") {
                    out.push((
                        number_value(x + scale(x)),
                        at(format!("exclusiveMaximum+{tiny:e}")),
                    ));
                }
            }
        }
        // Zero written `-0.0`: equal to 0 for every bound.
        if ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
            .iter()
            .any(|k| num(k) == Some(0.0))
            && let Some(z) = Number::from_f64(-0.0)
        {
            out.push((Value::Number(z), at("-0.0".into())));
        }
        let x = n.as_f64().unwrap_or(0.0);
        if let Some(step) = num("multipleOf")
            && step > 0.0
        {
            out.push((
                number_value(x + step / 2.0),
                at("multipleOf off by half".into()),
            ));
            out.push((number_value(x + step), at("multipleOf next".into())));
        }
        if integer {
            out.push((number_value(x + 0.5), at("integer + 0.5".into())));
        }
    }

    fn array_misses(
        &mut self,
        m: &Map<String, Value>,
        items: &[Value],
        pointer: &str,
        depth: u32,
        at: &dyn Fn(String) -> String,
        out: &mut Vec<(Value, String)>,
    ) {
        let (prefix, rest) = item_schemas(m);
        if let Some(min) = m.get("minItems").and_then(Value::as_u64)
            && min > 0
            && (min as usize) <= items.len()
        {
            out.push((
                Value::Array(items[..min as usize - 1].to_vec()),
                at("minItems-1".into()),
            ));
        }
        let grow = |n: u64| -> Option<Vec<Value>> {
            let last = items.last()?;
            let mut v = items.to_vec();
            while (v.len() as u64) < n {
                v.push(last.clone());
            }
            Some(v)
        };
        if let Some(max) = m.get("maxItems").and_then(Value::as_u64)
            && max < MAX_NODES as u64
            && let Some(v) = grow(max + 1)
        {
            out.push((Value::Array(v), at("maxItems+1".into())));
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true))
            && let Some(first) = items.first()
        {
            let mut v = items.to_vec();
            v.push(first.clone());
            out.push((Value::Array(v), at("uniqueItems duplicate".into())));
            // The same number spelled `1.0`: equal in JSON Schema.
            if let Some(n) = first.as_i64()
                && let Some(f) = Number::from_f64(n as f64)
            {
                let mut v = items.to_vec();
                v.push(Value::Number(f));
                out.push((
                    Value::Array(v),
                    at("uniqueItems duplicate as a float".into()),
                ));
            }
        }
        if matches!(rest, Some(Value::Bool(false))) && !prefix.is_empty() {
            let mut v = items.to_vec();
            v.push(Value::Null);
            out.push((Value::Array(v), at("extra item".into())));
        }
        // Nested: each of the first items, changed in place.
        for (i, item) in items.iter().enumerate().take(3) {
            let Some(schema) = prefix.get(i).or(rest.as_ref()) else {
                continue;
            };
            let mut inner = Vec::new();
            let child = format!("{pointer}/{i}");
            self.near_misses(schema, item, &child, depth + 1, &mut inner);
            for (v, how) in self.sampled(inner, 4) {
                let mut whole = items.to_vec();
                whole[i] = v;
                out.push((Value::Array(whole), how));
            }
        }
    }

    fn object_misses(
        &mut self,
        m: &Map<String, Value>,
        members: &Map<String, Value>,
        pointer: &str,
        depth: u32,
        at: &dyn Fn(String) -> String,
        out: &mut Vec<(Value, String)>,
    ) {
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for name in required.iter().take(3) {
            if members.contains_key(*name) {
                let mut v = members.clone();
                v.shift_remove(*name);
                out.push((Value::Object(v), at(format!("required {name} missing"))));
            }
        }
        // An extra member: a fresh name, and a declared name changed by one
        // character.
        let mut extra = members.clone();
        extra.insert("zz_extra".into(), Value::from(1));
        out.push((Value::Object(extra), at("extra member".into())));
        if let Some(Value::Object(props)) = m.get("properties")
            && let Some(name) = props.keys().next()
        {
            let mut v = members.clone();
            v.insert(format!("{name}x"), Value::from(1));
            out.push((Value::Object(v), at(format!("extra member {name}x"))));
        }
        // A member whose key matched a `patternProperties` pattern, its key
        // changed by one character (an extra member where none are allowed).
        if let Some(Value::Object(pp)) = m.get("patternProperties")
            && let Some(pattern) = pp.keys().next()
            && let Some(key) = self.pattern_string(pattern)
        {
            let mut v = members.clone();
            let mut c: Vec<char> = key.chars().collect();
            let k = self.rng.below(c.len() as u64 + 1) as usize;
            c.insert(k, '~');
            v.insert(c.into_iter().collect(), Value::from(1));
            out.push((
                Value::Object(v),
                at("extra member, a pattern key broken".into()),
            ));
        }
        if let Some(max) = m.get("maxProperties").and_then(Value::as_u64) {
            let mut v = members.clone();
            let mut k = 0;
            while (v.len() as u64) <= max && k <= max + 1 {
                v.insert(format!("p{k}"), Value::from(k));
                k += 1;
            }
            out.push((Value::Object(v), at("maxProperties+1".into())));
        }
        if let Some(min) = m.get("minProperties").and_then(Value::as_u64)
            && min > 0
        {
            let v: Map<String, Value> = members
                .iter()
                .take(min as usize - 1)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            out.push((Value::Object(v), at("minProperties-1".into())));
        }
        // Nested: each member's value, changed in place.
        let names: Vec<String> = members.keys().cloned().collect();
        for name in names.iter().take(8) {
            let Some(schema) = member_schema(m, name) else {
                continue;
            };
            let mut inner = Vec::new();
            let child = format!("{pointer}/{}", name.replace('~', "~0").replace('/', "~1"));
            self.near_misses(&schema, &members[name], &child, depth + 1, &mut inner);
            for (v, how) in self.sampled(inner, 4) {
                let mut whole = members.clone();
                whole.insert(name.clone(), v);
                out.push((Value::Object(whole), how));
            }
        }
    }

    /// At most `n` of `items`, drawn from the stream.
    fn sampled<T>(&mut self, mut items: Vec<T>, n: usize) -> Vec<T> {
        while items.len() > n {
            let k = self.rng.below(items.len() as u64) as usize;
            items.swap_remove(k);
        }
        items
    }
}

/// `a` and `b` as one schema object: their keywords side by side, the
/// members of keyword maps (`properties`, ...) merged, `required` joined,
/// `type`s intersected; for any other keyword both have, `b`'s is kept.
fn merge(mut a: Map<String, Value>, b: Map<String, Value>) -> Map<String, Value> {
    for (k, v) in b {
        match (a.get_mut(&k), v) {
            (Some(Value::Object(x)), Value::Object(y)) if MAP_KEYWORDS.contains(&k.as_str()) => {
                for (name, s) in y {
                    x.insert(name, s);
                }
            }
            (Some(Value::Array(x)), Value::Array(y)) if k == "required" => {
                for name in y {
                    if !x.contains(&name) {
                        x.push(name);
                    }
                }
            }
            (Some(x), y) if k == "type" => {
                let set = |t: &Value| -> Vec<Value> {
                    match t {
                        Value::Array(a) => a.clone(),
                        other => vec![other.clone()],
                    }
                };
                let right = set(&y);
                let both: Vec<Value> = set(x)
                    .into_iter()
                    .filter(|t| {
                        right.contains(t)
                            || (t == "integer" && right.contains(&Value::from("number")))
                    })
                    .collect();
                *x = Value::Array(both);
            }
            (_, y) => {
                a.insert(k, y);
            }
        }
    }
    a
}

/// An array schema's positional item schemas and the schema of the items
/// after them (`prefixItems` + `items`, or draft 7's array `items` +
/// `additionalItems`).
fn item_schemas(m: &Map<String, Value>) -> (Vec<Value>, Option<Value>) {
    match (m.get("prefixItems"), m.get("items")) {
        (Some(Value::Array(p)), rest) => (p.clone(), rest.cloned()),
        (None, Some(Value::Array(p))) => (p.clone(), m.get("additionalItems").cloned()),
        (_, rest) => (Vec::new(), rest.cloned()),
    }
}

/// The schema of member `name` of an object under `m`: its property's,
/// else the first `patternProperties` pattern it matches, else
/// `additionalProperties` (`None`: anything).
fn member_schema(m: &Map<String, Value>, name: &str) -> Option<Value> {
    if let Some(s) = m.get("properties").and_then(|p| p.get(name)) {
        return Some(s.clone());
    }
    if let Some(Value::Object(pp)) = m.get("patternProperties") {
        for (pattern, s) in pp {
            let found = regex_automata::meta::Regex::new(pattern).is_ok_and(|re| re.is_match(name));
            if found {
                return Some(s.clone());
            }
        }
    }
    m.get("additionalProperties").cloned()
}

/// Lower and upper ends for a random pick: the bounds given, or `width`
/// around the one given (around 0 with neither).
fn span(lo: Option<f64>, hi: Option<f64>, width: f64) -> (f64, f64) {
    let clamp = |x: f64| x.clamp(-1e15, 1e15);
    match (lo, hi) {
        (Some(l), Some(h)) => (clamp(l), clamp(h)),
        (Some(l), None) => (clamp(l), clamp(l) + width),
        (None, Some(h)) => (clamp(h) - width, clamp(h)),
        (None, None) => (-width / 10.0, width),
    }
}

/// `k * step` written with no more decimals than `step` has (so that
/// `3 * 0.1` is `0.3`, not `0.30000000000000004`).
fn multiple(k: f64, step: f64) -> Value {
    let decimals = {
        let text = format!("{step}");
        text.split_once('.').map_or(0, |(_, f)| f.len())
    };
    if decimals == 0 && (k * step).abs() < 9e15 {
        return Value::from((k * step) as i64);
    }
    let text = format!("{:.*}", decimals.min(15), k * step);
    text.parse::<f64>().map_or(Value::Null, number_value)
}

/// A JSON number for `x`: an integer where it is one (and fits), else a
/// float (non-finite values, which JSON cannot hold, become 0).
fn number_value(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        return Value::from(x as i64);
    }
    Number::from_f64(x).map_or(Value::from(0), Value::Number)
}

/// A small value of JSON type `t`.
fn typed_value(t: &str) -> Value {
    match t {
        "null" => Value::Null,
        "boolean" => Value::Bool(true),
        "integer" => Value::from(7),
        "number" => number_value(2.5),
        "string" => Value::from("text"),
        "array" => Value::Array(vec![Value::from(1)]),
        _ => {
            let mut m = Map::new();
            m.insert("k".into(), Value::from(1));
            Value::Object(m)
        }
    }
}

/// Values one step from `v`: [`neighbour`], and for a string the string
/// one character shorter and one longer, for an array one item shorter,
/// for an object one member fewer and its first member's value changed.
fn neighbours(v: &Value) -> Vec<Value> {
    let mut out = vec![neighbour(v)];
    match v {
        Value::String(s) => {
            let mut c: Vec<char> = s.chars().collect();
            c.push('a');
            out.push(Value::String(c.iter().collect()));
            c.pop();
            if c.pop().is_some() {
                out.push(Value::String(c.into_iter().collect()));
            }
        }
        Value::Array(a) if !a.is_empty() => {
            out.push(Value::Array(a[..a.len() - 1].to_vec()));
            let mut b = a.clone();
            b[0] = neighbour(&a[0]);
            out.push(Value::Array(b));
        }
        Value::Object(m) if !m.is_empty() => {
            let mut fewer = m.clone();
            if let Some(first) = m.keys().next() {
                fewer.shift_remove(first);
            }
            out.push(Value::Object(fewer));
            let mut changed = m.clone();
            if let Some((_, first)) = changed.iter_mut().next() {
                *first = neighbour(first);
            }
            out.push(Value::Object(changed));
        }
        _ => {}
    }
    out
}

/// A value one step from `v`: a string with its last character changed
/// (or one added), a number plus one, the other boolean, `null` for
/// anything else.
fn neighbour(v: &Value) -> Value {
    match v {
        Value::String(s) => {
            let mut c: Vec<char> = s.chars().collect();
            match c.last_mut() {
                Some(x) if *x != 'z' => *x = if x.is_ascii_alphanumeric() { 'z' } else { 'a' },
                _ => c.push('a'),
            }
            Value::String(c.into_iter().collect())
        }
        Value::Number(n) => number_value(n.as_f64().unwrap_or(0.0) + 1.0),
        Value::Bool(b) => Value::Bool(!b),
        Value::Null => Value::from(0),
        _ => Value::Null,
    }
}

/// The sub-schema of `root` whose `$id` (or draft 4's `id`) is `uri` or
/// ends with it.
fn find_resource<'v>(root: &'v Value, uri: &str) -> Option<&'v Value> {
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                for key in ["$id", "id"] {
                    if let Some(Value::String(id)) = m.get(key) {
                        let id = id.trim_end_matches('#');
                        if id == uri || id.ends_with(&format!("/{uri}")) {
                            return Some(v);
                        }
                    }
                }
                for (k, child) in m {
                    if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                        stack.push(child);
                    }
                }
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    None
}

/// The sub-schema of `doc` that declares anchor `name` (`$anchor`,
/// `$dynamicAnchor`, or an `$id` of `#name`).
fn find_anchor<'v>(doc: &'v Value, name: &str) -> Option<&'v Value> {
    let mut stack = vec![doc];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                let named = |k: &str, want: &str| m.get(k).and_then(Value::as_str) == Some(want);
                if named("$anchor", name)
                    || named("$dynamicAnchor", name)
                    || named("$id", &format!("#{name}"))
                    || named("id", &format!("#{name}"))
                {
                    return Some(v);
                }
                for (k, child) in m {
                    if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                        stack.push(child);
                    }
                }
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    None
}

/// `%XX` escapes of a URI fragment decoded (a `$ref`'s pointer is a URI
/// fragment).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hows(schema: &Value) -> Vec<String> {
        instances(schema, &InstanceOptions::default())
            .into_iter()
            .map(|i| i.how)
            .collect()
    }

    #[test]
    fn same_seed_same_instances_other_seed_others() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string", "pattern": "^[a-z]{2,5}$"},
            "b": {"type": "array", "items": {"type": "integer", "minimum": 3}}
        }});
        let one = instances(&schema, &InstanceOptions::default());
        let two = instances(&schema, &InstanceOptions::default());
        assert_eq!(one, two);
        let other = instances(
            &schema,
            &InstanceOptions {
                seed: 99,
                ..Default::default()
            },
        );
        assert_ne!(one, other);
    }

    #[test]
    fn valid_values_follow_the_keywords_modelled() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 10, "maximum": 12},
                "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
                "day": {"type": "string", "format": "date"},
                "tags": {"type": "array", "items": {"enum": ["x", "y"]},
                         "minItems": 1, "maxItems": 2},
                "price": {"type": "number", "multipleOf": 0.25, "exclusiveMinimum": 0}
            },
            "required": ["id", "code", "day", "tags", "price"],
            "additionalProperties": false
        });
        for i in instances(&schema, &InstanceOptions::default()) {
            if i.intent != Intent::Valid {
                continue;
            }
            let v = &i.value;
            let id = v["id"].as_i64().unwrap();
            assert!((10..=12).contains(&id), "{v}");
            let code = v["code"].as_str().unwrap();
            assert!(
                code.len() == 6
                    && code.as_bytes()[3] == b'-'
                    && code[..3].chars().all(|c| c.is_ascii_uppercase()),
                "{v}"
            );
            assert_eq!(v["day"].as_str().unwrap().len(), 10, "{v}");
            let tags = v["tags"].as_array().unwrap();
            assert!((1..=2).contains(&tags.len()), "{v}");
            let price = v["price"].as_f64().unwrap();
            assert!(price > 0.0 && (price * 4.0).fract() == 0.0, "{v}");
            assert_eq!(v.as_object().unwrap().len(), 5, "{v}");
        }
    }

    #[test]
    fn near_misses_sit_at_the_bounds() {
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "string", "minLength": 2, "maxLength": 4}},
            "required": ["n"],
            "additionalProperties": false
        });
        let all = instances(
            &schema,
            &InstanceOptions {
                near_misses: 100,
                ..Default::default()
            },
        );
        let find = |how: &str| {
            all.iter()
                .find(|i| i.how == how)
                .unwrap_or_else(|| panic!("no {how} among {all:#?}"))
        };
        assert_eq!(
            find("/n: maxLength+1").value["n"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            5
        );
        assert_eq!(
            find("/n: minLength-1").value["n"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            1
        );
        assert!(
            !find("/: required n missing")
                .value
                .as_object()
                .unwrap()
                .contains_key("n")
        );
        assert!(find("/: extra member").value.get("zz_extra").is_some());
    }

    #[test]
    fn recursion_ends_at_the_ref_depth() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "properties": {
                "next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}
            }, "required": ["v"]}},
            "$ref": "#/$defs/node"
        });
        let all = instances(&schema, &InstanceOptions::default());
        assert!(
            all.iter()
                .any(|i| i.intent == Intent::Valid && i.value.get("v").is_some())
        );
        fn depth(v: &Value) -> usize {
            v.get("next").map_or(0, |n| 1 + depth(n))
        }
        assert!(all.iter().all(|i| depth(&i.value) <= 3), "{all:#?}");
    }

    #[test]
    fn a_false_schema_still_gives_one_value_to_judge() {
        assert_eq!(hows(&json!(false)), ["valid"]);
        assert!(!hows(&json!({"$ref": "other.json#/x"})).is_empty());
    }
}
