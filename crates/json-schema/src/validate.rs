//! An exact check of one concrete JSON value against schema objects, with
//! "cannot tell" as an answer.
//!
//! The lowering keeps an `enum`/`const` value only when the rest of its
//! conjunction allows it. Asking the rest's *language* is not enough: that
//! language may be a strict subset of the valid texts (a `not` it cannot
//! negate exactly, values it bounds in depth, rules of the context-free
//! mode that a regex cannot follow), and a valid value then goes missing,
//! often with the whole schema ("no JSON value satisfies this schema").
//! [`Validator`] answers the question on the value itself, with JSON
//! Schema's meaning of each keyword as the lowering reads it (a `$ref`
//! beside other keywords is conjoined with them; an array `items` is a
//! tuple; draft-4 boolean `exclusiveMinimum`; `1.0` is an integer).
//!
//! A verdict is `Some(true)` (valid), `Some(false)` (invalid) or `None`
//! (cannot tell): a keyword it does not know to decide (`unevaluated*` that
//! constrain, `$dynamicRef`, a known `format` the string fails, a
//! non-integral `multipleOf`), too deep a `$ref` chain, or work past its
//! budget. An invalid verdict from any keyword decides the schema object
//! whatever the others say; a valid one needs every constraining keyword
//! decided.
//!
//! Under a `not` an "invalid" keeps the value, so a verdict must hold in
//! every reading a validator may take, not only the lowering's: where
//! ECMA-262 and Python's `re` may differ on a pattern, where numbers beyond
//! 2^53 would be rounded, where draft 7 reads `contains` or a `$ref` beside
//! other keywords otherwise, or under a meta-schema of the document's own,
//! the check says "cannot tell". The tests hold it to the
//! JSON-Schema-Test-Suite and to MaskBench's labels: no verdict differs.

use super::layout::json_eq;
use super::lower::{INTEGER, Lowerer, is_known_assertion, kind_of};
use serde_json::{Map, Number, Value};
use std::cmp::Ordering;

/// Deepest nesting of sub-schemas (`$ref`s included) one check follows;
/// past it the answer is "cannot tell". A recursive `$ref` that consumes
/// no part of the value (`{"$ref": "#"}`) ends here.
pub(crate) const MAX_VALIDATE_DEPTH: u32 = 64;

/// Most schema-object visits (plus item comparisons for `uniqueItems`)
/// one value's check may make before it answers "cannot tell". Default
/// 100 000: well under a millisecond for the enums of real schemas.
pub(crate) const MAX_VALIDATE_STEPS: u64 = 100_000;

/// Most steps all the checks of one document's lowering may take together
/// (an `enum` of many values, checked again in each case of a split).
/// Default 10 000 000, a second or so at worst; values checked after it
/// runs out are undecided.
pub(crate) const MAX_VALIDATE_DOCUMENT_STEPS: u64 = 10_000_000;

/// Valid, invalid, or `None`: cannot tell.
pub(crate) type Verdict = Option<bool>;

/// Both hold: invalid as soon as one is, valid when both are.
fn and(a: Verdict, b: Verdict) -> Verdict {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// The largest integer below which every integer is an `f64` exactly.
const EXACT_F64_INT: f64 = 9_007_199_254_740_992.0;

/// The check of values against the schema objects of one document; holds
/// the [`Lowerer`] for its `$ref` resolution, its pattern cache and the
/// document's budget of steps ([`Lowerer::validate_steps_left`]).
pub(crate) struct Validator<'l, 'a> {
    lowerer: &'l mut Lowerer<'a>,
    /// Steps left to the check under way.
    steps_left: u64,
    /// The check under way applied a `type` that allows integers but not
    /// all numbers to a number: draft 4 reads `1.0` as no integer there,
    /// so the value must be spelled as an integer.
    integer_tested: bool,
    /// The document declares a draft before 2019-09, where `$ref` makes
    /// its siblings be ignored (the lowering conjoins them).
    ref_overrides_siblings: bool,
}

impl<'l, 'a> Validator<'l, 'a> {
    pub fn new(lowerer: &'l mut Lowerer<'a>) -> Self {
        let ref_overrides_siblings = lowerer
            .root
            .get("$schema")
            .and_then(Value::as_str)
            .is_some_and(|uri| {
                ["draft-03", "draft-04", "draft-06", "draft-07"]
                    .iter()
                    .any(|d| uri.contains(d))
            });
        Validator {
            lowerer,
            steps_left: 0,
            integer_tested: false,
            ref_overrides_siblings,
        }
    }

    /// Whether the last [`Validator::check`] applied an integer-only `type`
    /// to a number (see [`Validator::integer_tested`]'s field).
    pub fn integer_tested(&self) -> bool {
        self.integer_tested
    }

    /// Whether `value` is valid under every schema of `all` and under none
    /// of `none`, within [`MAX_VALIDATE_STEPS`] (and what is left of the
    /// document's [`MAX_VALIDATE_DOCUMENT_STEPS`]).
    pub fn check(&mut self, all: &[&'a Value], none: &[&'a Value], value: &Value) -> Verdict {
        // A meta-schema of its own may turn vocabularies off (assertions
        // then constrain nothing): not decided here.
        if let Some(meta) = self.lowerer.root.get("$schema")
            && !meta.as_str().is_some_and(is_standard_meta_schema)
        {
            return None;
        }
        let budget = MAX_VALIDATE_STEPS.min(self.lowerer.validate_steps_left);
        self.steps_left = budget;
        self.integer_tested = false;
        let verdict = self.check_within_budget(all, none, value);
        self.lowerer.validate_steps_left -= budget - self.steps_left;
        verdict
    }

    fn check_within_budget(
        &mut self,
        all: &[&'a Value],
        none: &[&'a Value],
        value: &Value,
    ) -> Verdict {
        let mut verdict = Some(true);
        for schema in all {
            verdict = and(verdict, self.at(schema, value, 0));
            if verdict == Some(false) {
                return verdict;
            }
        }
        for schema in none {
            verdict = and(verdict, self.at(schema, value, 0).map(|b| !b));
            if verdict == Some(false) {
                return verdict;
            }
        }
        verdict
    }

    /// Takes `n` steps of the budget; `None` when they are not left.
    fn spend(&mut self, n: u64) -> Option<()> {
        self.steps_left = self.steps_left.checked_sub(n)?;
        Some(())
    }

    /// `value` under the schema `schema`, `depth` sub-schemas down.
    fn at(&mut self, schema: &'a Value, value: &Value, depth: u32) -> Verdict {
        if depth > MAX_VALIDATE_DEPTH {
            return None;
        }
        self.spend(1)?;
        let obj = match schema {
            Value::Bool(b) => return Some(*b),
            Value::Object(obj) => obj,
            _ => return None,
        };
        // Before 2019-09 a `$ref` overrides the keywords beside it, which
        // the lowering conjoins: a verdict would hold for one reading only.
        if self.ref_overrides_siblings
            && obj.contains_key("$ref")
            && obj.keys().any(|k| k != "$ref" && is_known_assertion(k))
        {
            return None;
        }
        // Under `strict` an object schema closes objects in ways that depend
        // on the lowering's own reading; not decided here.
        if self.lowerer.options.strict && value.is_object() {
            return None;
        }
        let mut verdict = Some(true);
        let mut members_done = false;
        let mut items_done = false;
        for (key, v) in obj {
            let here = match key.as_str() {
                "properties" | "patternProperties" | "additionalProperties" => {
                    if std::mem::replace(&mut members_done, true) {
                        continue;
                    }
                    match value {
                        Value::Object(members) => self.members(obj, members, depth),
                        _ => Some(true),
                    }
                }
                "items" | "prefixItems" | "additionalItems" => {
                    if std::mem::replace(&mut items_done, true) {
                        continue;
                    }
                    match value {
                        Value::Array(items) => self.items(obj, items, depth),
                        _ => Some(true),
                    }
                }
                _ => self.keyword(obj, key, v, value, depth),
            };
            verdict = and(verdict, here);
            if verdict == Some(false) {
                return verdict;
            }
        }
        verdict
    }

    /// One keyword of the schema object `obj` (the ones that go in groups,
    /// members and items, are [`Validator::members`] and
    /// [`Validator::items`]).
    fn keyword(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        v: &'a Value,
        value: &Value,
        depth: u32,
    ) -> Verdict {
        let next = depth + 1;
        match key {
            "$ref" => {
                // Where the document embeds resources, a reference means what
                // the resource it is written in says, and the check does not
                // know where it is: undecided.
                if !self.lowerer.one_resource() {
                    return None;
                }
                let reference = v.as_str()?;
                let (target, _) = self.lowerer.resolve(reference, "").ok()?;
                self.at(target, value, next)
            }
            "type" => {
                if value.is_number() && integer_only(v) {
                    self.integer_tested = true;
                }
                type_holds(v, value)
            }
            "enum" => {
                let values = v.as_array()?;
                self.spend(values.len() as u64)?;
                Some(values.iter().any(|x| json_eq(x, value)))
            }
            "const" => Some(json_eq(v, value)),
            "minLength" | "maxLength" => {
                let n = count(v)?;
                let Value::String(s) = value else {
                    return Some(true);
                };
                let len = s.chars().count() as u64;
                Some(if key == "minLength" {
                    len >= n
                } else {
                    len <= n
                })
            }
            "pattern" => {
                let pattern = v.as_str()?;
                match value {
                    Value::String(s) => self.pattern_matches(pattern, s),
                    _ => Some(true),
                }
            }
            "format" => self.format_holds(v.as_str()?, value),
            "minimum" | "maximum" => {
                let bound = v.as_number()?;
                let Value::Number(n) = value else {
                    return Some(true);
                };
                // Draft 4: a boolean `exclusiveMinimum` makes `minimum` strict.
                let (sibling, below) = if key == "minimum" {
                    ("exclusiveMinimum", Ordering::Less)
                } else {
                    ("exclusiveMaximum", Ordering::Greater)
                };
                let exclusive = obj.get(sibling) == Some(&Value::Bool(true));
                let order = compare(n, bound)?;
                Some(order != below && !(exclusive && order == Ordering::Equal))
            }
            "exclusiveMinimum" | "exclusiveMaximum" => match v {
                Value::Bool(_) => Some(true),
                Value::Number(bound) => {
                    let Value::Number(n) = value else {
                        return Some(true);
                    };
                    let wanted = if key == "exclusiveMinimum" {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    };
                    Some(compare(n, bound)? == wanted)
                }
                _ => None,
            },
            "multipleOf" => {
                let k = v.as_number()?;
                match value {
                    Value::Number(n) => multiple_of(n, k),
                    _ => Some(true),
                }
            }
            "required" => {
                let Value::Array(names) = v else {
                    // `required: false` is draft 3's default; `true` is not
                    // read here.
                    return (v == &Value::Bool(false)).then_some(true);
                };
                let Value::Object(members) = value else {
                    return Some(true);
                };
                let mut verdict = Some(true);
                for name in names {
                    verdict = and(verdict, Some(members.contains_key(name.as_str()?)));
                }
                verdict
            }
            "minProperties" | "maxProperties" => {
                let n = count(v)?;
                let Value::Object(members) = value else {
                    return Some(true);
                };
                let len = members.len() as u64;
                Some(if key == "minProperties" {
                    len >= n
                } else {
                    len <= n
                })
            }
            "propertyNames" => {
                let Value::Object(members) = value else {
                    return Some(true);
                };
                let mut verdict = Some(true);
                for name in members.keys() {
                    verdict = and(verdict, self.at(v, &Value::String(name.clone()), next));
                    if verdict == Some(false) {
                        break;
                    }
                }
                verdict
            }
            "dependentRequired" | "dependentSchemas" | "dependencies" => {
                let deps = v.as_object()?;
                let Value::Object(members) = value else {
                    return Some(true);
                };
                let mut verdict = Some(true);
                for (trigger, dep) in deps {
                    let here = match dep {
                        Value::Array(names) if key != "dependentSchemas" => {
                            if !members.contains_key(trigger) {
                                continue;
                            }
                            let mut all = Some(true);
                            for name in names {
                                all = and(all, Some(members.contains_key(name.as_str()?)));
                            }
                            all
                        }
                        Value::Object(_) | Value::Bool(_) if key != "dependentRequired" => {
                            if !members.contains_key(trigger) {
                                continue;
                            }
                            self.at(dep, value, next)
                        }
                        _ => None,
                    };
                    verdict = and(verdict, here);
                    if verdict == Some(false) {
                        break;
                    }
                }
                verdict
            }
            "minItems" | "maxItems" => {
                let n = count(v)?;
                let Value::Array(items) = value else {
                    return Some(true);
                };
                let len = items.len() as u64;
                Some(if key == "minItems" {
                    len >= n
                } else {
                    len <= n
                })
            }
            "uniqueItems" => match (v, value) {
                (Value::Bool(false), _) => Some(true),
                (Value::Bool(true), Value::Array(items)) => {
                    self.spend((items.len() as u64).saturating_mul(items.len() as u64) / 2)?;
                    Some(
                        items
                            .iter()
                            .enumerate()
                            .all(|(i, a)| items[i + 1..].iter().all(|b| !json_eq(a, b))),
                    )
                }
                (Value::Bool(true), _) => Some(true),
                _ => None,
            },
            "contains" => {
                let bound = |k: &str| obj.get(k).map(count);
                let min = match bound("minContains") {
                    None => 1,
                    Some(n) => n?,
                };
                let max = match bound("maxContains") {
                    None => None,
                    Some(n) => Some(n?),
                };
                let Value::Array(items) = value else {
                    return Some(true);
                };
                let (mut found, mut unknown) = (0u64, 0u64);
                for item in items {
                    match self.at(v, item, next) {
                        Some(true) => found += 1,
                        Some(false) => {}
                        None => unknown += 1,
                    }
                }
                let most = found + unknown;
                let verdict = |min: u64, max: Option<u64>| {
                    if most < min || max.is_some_and(|max| found > max) {
                        Some(false)
                    } else if found >= min && max.is_none_or(|max| most <= max) {
                        Some(true)
                    } else {
                        None
                    }
                };
                // Before 2019-09 `minContains`/`maxContains` are unknown and
                // `contains` asks for one match: decided where both readings
                // agree (a `not` around it turns either way round).
                let (now, before) = (verdict(min, max), verdict(1, None));
                if now == before { now } else { None }
            }
            "not" => self.at(v, value, next).map(|b| !b),
            "allOf" | "anyOf" | "oneOf" => {
                let branches = v.as_array()?;
                if branches.is_empty() {
                    return None;
                }
                let (mut holds, mut unknown) = (0usize, 0usize);
                for branch in branches {
                    match self.at(branch, value, next) {
                        Some(true) => holds += 1,
                        Some(false) if key == "allOf" => return Some(false),
                        Some(false) => {}
                        None => unknown += 1,
                    }
                    if key == "anyOf" && holds > 0 {
                        return Some(true);
                    }
                    if key == "oneOf" && holds > 1 {
                        return Some(false);
                    }
                }
                match key {
                    "allOf" => (unknown == 0).then_some(true),
                    "anyOf" => (unknown == 0).then_some(false),
                    _ => (unknown == 0).then_some(holds == 1),
                }
            }
            "if" => {
                let then = obj.get("then");
                let otherwise = obj.get("else");
                if then.is_none() && otherwise.is_none() {
                    return Some(true);
                }
                let condition = self.at(v, value, next);
                let mut branch = |b: Option<&'a Value>| match b {
                    Some(schema) => self.at(schema, value, next),
                    None => Some(true),
                };
                match condition {
                    Some(true) => branch(then),
                    Some(false) => branch(otherwise),
                    // Either branch may be the one: decided only when they agree.
                    None => {
                        let (a, b) = (branch(then), branch(otherwise));
                        if a == b { a } else { None }
                    }
                }
            }
            "unevaluatedProperties" | "unevaluatedItems" => {
                let applies = if key == "unevaluatedProperties" {
                    value.is_object()
                } else {
                    value.is_array()
                };
                // What the keyword sees depends on every applicator around
                // it; only one that allows everything is decided.
                let allows_all =
                    v == &Value::Bool(true) || v.as_object().is_some_and(Map::is_empty);
                (!applies || allows_all).then_some(true)
            }
            // Not decided here; draft 3's assertions are not read either.
            "$dynamicRef" | "$recursiveRef" | "divisibleBy" | "disallow" | "extends" => None,
            // Annotations, `then`/`else` (read with `if`),
            // `minContains`/`maxContains` (read with `contains`), and
            // unknown keywords constrain nothing.
            _ => Some(true),
        }
    }

    /// `properties`, `patternProperties` and `additionalProperties` of `obj`
    /// on an object's members: a member takes its declared schema and those
    /// of the patterns its name matches, or else `additionalProperties`.
    fn members(
        &mut self,
        obj: &'a Map<String, Value>,
        members: &Map<String, Value>,
        depth: u32,
    ) -> Verdict {
        let next = depth + 1;
        let declared = match obj.get("properties") {
            None => None,
            Some(v) => Some(v.as_object()?),
        };
        let patterns = match obj.get("patternProperties") {
            None => None,
            Some(v) => Some(v.as_object()?),
        };
        let additional = obj.get("additionalProperties");
        let mut verdict = Some(true);
        for (name, member) in members {
            // Whether some `properties`/`patternProperties` entry applies
            // (`None`: a pattern may or may not match).
            let mut covered = Some(false);
            if let Some(schema) = declared.and_then(|d| d.get(name)) {
                covered = Some(true);
                verdict = and(verdict, self.at(schema, member, next));
            }
            for (pattern, schema) in patterns.into_iter().flatten() {
                match self.pattern_matches(pattern, name) {
                    Some(false) => {}
                    Some(true) => {
                        covered = Some(true);
                        verdict = and(verdict, self.at(schema, member, next));
                    }
                    None => {
                        // A schema the member satisfies anyway may apply or not.
                        if self.at(schema, member, next) != Some(true) {
                            verdict = and(verdict, None);
                        }
                        if covered == Some(false) {
                            covered = None;
                        }
                    }
                }
            }
            if let Some(schema) = additional {
                match covered {
                    Some(true) => {}
                    Some(false) => verdict = and(verdict, self.at(schema, member, next)),
                    None => {
                        if self.at(schema, member, next) != Some(true) {
                            verdict = and(verdict, None);
                        }
                    }
                }
            }
            if verdict == Some(false) {
                return verdict;
            }
        }
        verdict
    }

    /// `prefixItems`, `items` and `additionalItems` of `obj` on an array's
    /// items, as the lowering reads them: an array `items` is a tuple
    /// followed by `additionalItems`; beside `prefixItems`, `items` is the
    /// schema of the items after the prefix.
    fn items(&mut self, obj: &'a Map<String, Value>, items: &[Value], depth: u32) -> Verdict {
        static NONE: [Value; 0] = [];
        let (prefix, rest): (&'a [Value], Option<&'a Value>) =
            match (obj.get("prefixItems"), obj.get("items")) {
                (Some(Value::Array(prefix)), None) => (prefix, None),
                (Some(Value::Array(prefix)), Some(rest @ (Value::Object(_) | Value::Bool(_)))) => {
                    (prefix, Some(rest))
                }
                (Some(_), _) => return None,
                (None, Some(Value::Array(prefix))) => (prefix, obj.get("additionalItems")),
                (None, Some(rest)) => (&NONE, Some(rest)),
                (None, None) => return Some(true),
            };
        let mut verdict = Some(true);
        for (i, item) in items.iter().enumerate() {
            let Some(schema) = prefix.get(i).or(rest) else {
                break;
            };
            verdict = and(verdict, self.at(schema, item, depth + 1));
            if verdict == Some(false) {
                return verdict;
            }
        }
        verdict
    }

    /// Whether `s` contains a match of the ECMA-262 `pattern`, where
    /// Python's `re` (what many validators use) says the same: decided when
    /// the translation matches (it takes only what both engines accept),
    /// or when it is exact ([`super::ecma::SearchPattern::is_exact`]) and
    /// does not. Left undecided: strings with characters beyond the Basic
    /// Multilingual Plane (two code units to ECMA-262 without the `u`
    /// flag), a miss on a string with a line terminator (Python's `$`
    /// matches before a final newline, its `.` takes `\r`), and patterns
    /// with `{,` (a literal to ECMA-262, a count from 0 to Python).
    fn pattern_matches(&mut self, pattern: &str, s: &str) -> Verdict {
        if s.chars().any(|c| c as u32 > 0xFFFF) || pattern.contains("{,") {
            return None;
        }
        let line_break = s.contains(['\n', '\r', '\u{2028}', '\u{2029}']);
        if !self.lowerer.exact_patterns.contains_key(pattern) {
            let compiled = super::ecma::SearchPattern::parse(pattern)
                .ok()
                .and_then(|sp| {
                    let regex = regex_automata::meta::Regex::builder()
                        .configure(
                            regex_automata::meta::Regex::config().nfa_size_limit(Some(16 << 20)),
                        )
                        .build(&sp.search_regex())
                        .ok()?;
                    Some((regex, sp.is_exact()))
                });
            self.lowerer
                .exact_patterns
                .insert(pattern.to_string(), compiled);
        }
        let (regex, exact) = self.lowerer.exact_patterns.get(pattern)?.as_ref()?;
        if regex.is_match(s) {
            Some(true)
        } else {
            (*exact && !line_break).then_some(false)
        }
    }

    /// A `format` as the lowering reads it: an unknown one constrains
    /// nothing; a known one holds for a non-string and for a string its
    /// regex (a subset of every reading) matches, and is undecided for
    /// other strings (some validators treat it as an annotation).
    fn format_holds(&mut self, format: &str, value: &Value) -> Verdict {
        let Value::String(s) = value else {
            return Some(true);
        };
        let Some((regex, min, max)) = super::format::format_regex(format) else {
            return Some(true);
        };
        let key = format!("format:{format}");
        if !self.lowerer.exact_patterns.contains_key(&key) {
            let compiled = regex_automata::meta::Regex::new(&format!(r"\A(?:{regex})\z"))
                .ok()
                .map(|r| (r, false));
            self.lowerer.exact_patterns.insert(key.clone(), compiled);
        }
        let (regex, _) = self.lowerer.exact_patterns.get(&key)?.as_ref()?;
        let len = s.chars().count() as u64;
        let fits = len >= min && max.is_none_or(|max| len <= max);
        (fits && regex.is_match(s)).then_some(true)
    }
}

/// Whether a `type` keyword allows `value` (`None` for a malformed one).
fn type_holds(v: &Value, value: &Value) -> Verdict {
    let one = |name: &Value| -> Verdict {
        Some(match name.as_str()? {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            // As the lowering reads it: a number without a fraction (`1.0`
            // too) is an integer.
            "integer" => value.is_number() && kind_of(value) == INTEGER,
            _ => return None,
        })
    };
    match v {
        Value::Array(names) => {
            let mut any = false;
            for name in names {
                // A malformed name is undecided even beside a match.
                any |= one(name)?;
            }
            Some(any)
        }
        name => one(name),
    }
}

/// Whether a `$schema` names one of the drafts' own meta-schemas.
fn is_standard_meta_schema(uri: &str) -> bool {
    let rest = uri
        .strip_prefix("http://json-schema.org/")
        .or_else(|| uri.strip_prefix("https://json-schema.org/"));
    rest.is_some_and(|r| r.starts_with("draft") || r.starts_with("schema"))
}

/// Whether a `type` keyword allows integers but not all numbers.
fn integer_only(v: &Value) -> bool {
    let names: &[Value] = match v {
        Value::Array(names) => names,
        name => std::slice::from_ref(name),
    };
    names.iter().any(|n| n == "integer") && !names.iter().any(|n| n == "number")
}

/// A non-negative integer keyword value (`minLength`, `maxItems`, ...).
fn count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
            .map(|f| f as u64)
    })
}

/// A number as an integer, when it is one that an `f64` holds exactly or
/// that was written as an integer.
fn as_integer(n: &Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Some(i128::from(u));
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && f.abs() < EXACT_F64_INT).then_some(f as i128)
}

/// The order of two numbers, where every validator agrees: `None` when an
/// integer beyond 2^53 is involved (validators that compare as `f64` round
/// it).
fn compare(a: &Number, b: &Number) -> Option<Ordering> {
    let safe = |n: &Number| n.is_f64() || as_integer(n).is_some_and(|i| i.abs() <= 1 << 53);
    if !safe(a) || !safe(b) {
        return None;
    }
    if let (Some(x), Some(y)) = (as_integer(a), as_integer(b)) {
        return Some(x.cmp(&y));
    }
    a.as_f64()?.partial_cmp(&b.as_f64()?)
}

/// `multipleOf`, where every reading agrees: integers by an integer, and a
/// non-integer is no multiple of an integer. Fractions are left undecided
/// (validators differ on `0.3` and `0.1`).
fn multiple_of(n: &Number, k: &Number) -> Verdict {
    let k_int = as_integer(k).filter(|k| *k > 0);
    match (as_integer(n), k_int) {
        (Some(x), Some(k)) => Some(x % k == 0),
        (None, Some(_)) if n.as_f64().is_some_and(|f| f.fract() != 0.0) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LoweringLimits;
    use serde_json::json;
    use tokensieve_core::SpecOptions;

    fn verdict_with(schema: &Value, value: &Value, options: &SpecOptions) -> Verdict {
        let limits = LoweringLimits::default();
        let mut lowerer = Lowerer::new(schema, options, 0, &limits).expect("a lowerer");
        Validator::new(&mut lowerer).check(&[schema], &[], value)
    }

    /// The verdict on each value in turn.
    #[track_caller]
    fn verdicts(schema: Value, cases: &[(Value, Verdict)]) {
        for (value, expected) in cases {
            let got = verdict_with(&schema, value, &SpecOptions::default());
            assert_eq!(got, *expected, "{schema} on {value}");
        }
    }

    const VALID: Verdict = Some(true);
    const INVALID: Verdict = Some(false);
    const UNKNOWN: Verdict = None;

    #[test]
    fn boolean_schemas_type_enum_const() {
        verdicts(json!(true), &[(json!([1]), VALID)]);
        verdicts(json!(false), &[(json!(null), INVALID)]);
        verdicts(
            json!({"type": "integer"}),
            &[
                (json!(1), VALID),
                (json!(1.0), VALID),
                (json!(1.5), INVALID),
                (json!("1"), INVALID),
            ],
        );
        verdicts(
            json!({"type": ["string", "null"]}),
            &[
                (json!(null), VALID),
                (json!("a"), VALID),
                (json!(0), INVALID),
            ],
        );
        verdicts(json!({"type": "color"}), &[(json!(0), UNKNOWN)]);
        verdicts(
            json!({"enum": [[0.0], {"a": 1}]}),
            &[
                (json!([0]), VALID),
                (json!({"a": 1.0}), VALID),
                (json!([false]), INVALID),
                (json!({"a": 1, "b": 2}), INVALID),
            ],
        );
        verdicts(
            json!({"const": {"a": [1, "x"]}}),
            &[
                (json!({"a": [1.0, "x"]}), VALID),
                (json!({"a": [true, "x"]}), INVALID),
            ],
        );
    }

    #[test]
    fn object_keywords() {
        let schema = json!({
            "properties": {"foo": {"type": "integer"}, "bar": true},
            "patternProperties": {"^v": {"type": "string"}, "o$": {"minimum": 0}},
            "additionalProperties": false,
            "required": ["bar"]
        });
        verdicts(
            schema,
            &[
                (json!({"bar": 1, "foo": 2, "vroom": "x"}), VALID),
                // `foo` matches `o$` too: both schemas apply.
                (json!({"bar": 1, "foo": -2}), INVALID),
                (json!({"bar": 1, "foo": "2"}), INVALID),
                (json!({"bar": 1, "vroom": 2}), INVALID),
                (json!({"bar": 1, "other": 2}), INVALID),
                (json!({"foo": 2}), INVALID),
                (json!([1, 2]), VALID),
            ],
        );
        verdicts(
            json!({"additionalProperties": {"type": "boolean"}, "properties": {"a": {}}}),
            &[
                (json!({"a": 1, "b": true}), VALID),
                (json!({"b": 1}), INVALID),
            ],
        );
        verdicts(
            json!({"propertyNames": {"maxLength": 2}, "minProperties": 1, "maxProperties": 2}),
            &[
                (json!({"ab": 1}), VALID),
                (json!({"abc": 1}), INVALID),
                (json!({}), INVALID),
                (json!({"a": 1, "b": 2, "c": 3}), INVALID),
                (json!("abc"), VALID),
            ],
        );
        // A pattern whose translation is not ECMA-262's exactly decides a
        // match, but not a miss.
        verdicts(
            json!({"patternProperties": {"\\s": {"type": "integer"}}, "additionalProperties": false}),
            &[(json!({"a b": 1}), VALID), (json!({"ab": 1}), UNKNOWN)],
        );
    }

    #[test]
    fn dependencies() {
        verdicts(
            json!({"dependentRequired": {"a": ["b"]}}),
            &[
                (json!({"a": 1, "b": 2}), VALID),
                (json!({"b": 2}), VALID),
                (json!({"a": 1}), INVALID),
            ],
        );
        verdicts(
            json!({"dependentSchemas": {"a": {"required": ["c"]}}}),
            &[(json!({"a": 1, "c": 2}), VALID), (json!({"a": 1}), INVALID)],
        );
        verdicts(
            json!({"dependencies": {"a": ["b"], "c": {"maxProperties": 1}}}),
            &[
                (json!({"a": 1, "b": 2}), VALID),
                (json!({"a": 1}), INVALID),
                (json!({"c": 1, "d": 2}), INVALID),
                (json!({"c": 1}), VALID),
            ],
        );
    }

    #[test]
    fn array_keywords() {
        verdicts(
            json!({"items": [{"type": "integer"}, {"type": "string"}], "additionalItems": false}),
            &[
                (json!([1, "a"]), VALID),
                (json!([1]), VALID),
                (json!([1, "a", 2]), INVALID),
                (json!(["a"]), INVALID),
            ],
        );
        verdicts(
            json!({"prefixItems": [{"type": "integer"}], "items": {"type": "string"}, "minItems": 2, "maxItems": 3}),
            &[
                (json!([1, "a"]), VALID),
                (json!([1]), INVALID),
                (json!([1, 2]), INVALID),
                (json!([1, "a", "b", "c"]), INVALID),
            ],
        );
        verdicts(
            json!({"items": {"type": "integer"}, "additionalItems": false}),
            &[(json!([1, 2, 3]), VALID), (json!([1, 2.5]), INVALID)],
        );
        verdicts(
            json!({"uniqueItems": true}),
            &[
                (json!([1, "1", [1]]), VALID),
                (json!([1, 1.0]), INVALID),
                (json!([{"a": 1}, {"a": 1}]), INVALID),
            ],
        );
        // Decided where 2019-09's counts and draft 7's one match (it knows
        // no `minContains`/`maxContains`) agree.
        verdicts(
            json!({"contains": {"const": 1}, "minContains": 2, "maxContains": 3}),
            &[
                (json!([1, 2, 1]), VALID),
                (json!([2]), INVALID),
                (json!([1, 2]), UNKNOWN),
                (json!([1, 1, 1, 1]), UNKNOWN),
                (json!({}), VALID),
            ],
        );
        verdicts(
            json!({"contains": {"const": 1}, "minContains": 0}),
            &[(json!([1]), VALID), (json!([2]), UNKNOWN)],
        );
        verdicts(
            json!({"contains": {"type": "string"}}),
            &[
                (json!([1, "a"]), VALID),
                (json!([1, 2]), INVALID),
                (json!([]), INVALID),
            ],
        );
        // An undecided item may or may not count.
        verdicts(
            json!({"contains": {"type": "string", "pattern": "\\s"}}),
            &[
                (json!(["a", "b"]), UNKNOWN),
                (json!(["a", "b c"]), VALID),
                (json!([1, null]), INVALID),
            ],
        );
    }

    #[test]
    fn string_keywords() {
        verdicts(
            json!({"minLength": 2, "maxLength": 2}),
            &[
                (json!("é😀"), VALID),
                (json!("a"), INVALID),
                (json!("abc"), INVALID),
                (json!(5), VALID),
            ],
        );
        verdicts(
            json!({"pattern": "^a[0-9]+$"}),
            &[
                (json!("a12"), VALID),
                (json!("a"), INVALID),
                (json!("xa1"), INVALID),
                (json!(1), VALID),
            ],
        );
        // Search semantics: unanchored patterns match anywhere.
        verdicts(
            json!({"pattern": "b"}),
            &[(json!("abc"), VALID), (json!("ac"), INVALID)],
        );
        // Class escapes are ASCII in ECMA-262, Unicode in Python: a match
        // of what both accept decides, a miss does not.
        verdicts(
            json!({"pattern": "^\\d+$"}),
            &[(json!("12"), VALID), (json!("1x"), UNKNOWN)],
        );
        verdicts(
            json!({"pattern": "^[0-9]+$"}),
            &[(json!("12"), VALID), (json!("1x"), INVALID)],
        );
        // Python's `$` matches before a final newline; `{,2}` is a literal
        // to ECMA-262 and a count to Python.
        verdicts(
            json!({"pattern": "^a$"}),
            &[(json!("a\n"), UNKNOWN), (json!("b"), INVALID)],
        );
        verdicts(json!({"pattern": "^a{,2}$"}), &[(json!("a{,2}"), UNKNOWN)]);
        verdicts(
            json!({"pattern": "^[^\\d]$"}),
            &[(json!("x"), VALID), (json!("1"), UNKNOWN)],
        );
        // Look-ahead does not translate; characters beyond the BMP are two
        // code units to ECMA-262.
        verdicts(json!({"pattern": "(?=a)"}), &[(json!("a"), UNKNOWN)]);
        verdicts(json!({"pattern": "^.$"}), &[(json!("😀"), UNKNOWN)]);
        // A known format: matched strings are valid in every reading, the
        // others undecided; non-strings and unknown formats are valid.
        verdicts(
            json!({"format": "date"}),
            &[
                (json!("2024-01-31"), VALID),
                (json!("yesterday"), UNKNOWN),
                (json!(3), VALID),
            ],
        );
        verdicts(json!({"format": "no-such-format"}), &[(json!("x"), VALID)]);
    }

    #[test]
    fn numeric_keywords() {
        verdicts(
            json!({"minimum": 1, "maximum": 2.5}),
            &[
                (json!(1), VALID),
                (json!(2.5), VALID),
                (json!(0.99), INVALID),
                (json!(3), INVALID),
                (json!("x"), VALID),
            ],
        );
        verdicts(
            json!({"exclusiveMinimum": 1, "exclusiveMaximum": 3}),
            &[
                (json!(2), VALID),
                (json!(1), INVALID),
                (json!(3.0), INVALID),
            ],
        );
        // Draft 4: boolean modifiers of `minimum`/`maximum`.
        verdicts(
            json!({"minimum": 1, "exclusiveMinimum": true, "maximum": 3, "exclusiveMaximum": false}),
            &[(json!(1), INVALID), (json!(1.5), VALID), (json!(3), VALID)],
        );
        // Up to 2^53 integers compare exactly; beyond, validators that
        // compare as `f64` round them.
        verdicts(
            json!({"maximum": 9007199254740992_u64}),
            &[
                (json!(9007199254740992_u64), VALID),
                (json!(-9007199254740992_i64), VALID),
                (json!(9007199254740993_u64), UNKNOWN),
            ],
        );
        verdicts(
            json!({"multipleOf": 2}),
            &[
                (json!(8), VALID),
                (json!(8.0), VALID),
                (json!(7), INVALID),
                (json!(7.5), INVALID),
            ],
        );
        // Validators differ on fractions.
        verdicts(json!({"multipleOf": 0.1}), &[(json!(0.3), UNKNOWN)]);
    }

    #[test]
    fn combinators() {
        verdicts(
            json!({"allOf": [{"type": "integer"}, {"minimum": 2}]}),
            &[
                (json!(2), VALID),
                (json!(1), INVALID),
                (json!(2.5), INVALID),
            ],
        );
        verdicts(
            json!({"anyOf": [{"type": "integer"}, {"minimum": 2}]}),
            &[
                (json!(1), VALID),
                (json!(2.5), VALID),
                (json!(1.5), INVALID),
            ],
        );
        verdicts(
            json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]}),
            &[
                (json!(1), VALID),
                (json!(2.5), VALID),
                (json!(2), INVALID),
                (json!(1.5), INVALID),
            ],
        );
        verdicts(
            json!({"not": {"enum": [[false]]}}),
            &[(json!([0.0]), VALID), (json!([false]), INVALID)],
        );
        verdicts(
            json!({"not": {"not": {"enum": [[{"foo": "bar"}]]}}}),
            &[
                (json!([{"foo": "bar"}]), VALID),
                (json!([{"foo": "baz"}]), INVALID),
            ],
        );
        verdicts(
            json!({"if": {"type": "integer"}, "then": {"minimum": 3}, "else": {"type": "string"}}),
            &[
                (json!(5), VALID),
                (json!(1), INVALID),
                (json!("x"), VALID),
                (json!(null), INVALID),
            ],
        );
        // An undecided condition: decided only when both branches agree.
        verdicts(
            json!({"if": {"pattern": "\\s"}, "then": {"maxLength": 5}, "else": {"maxLength": 1}}),
            &[
                (json!("a"), VALID),
                (json!("abcdefg"), INVALID),
                (json!("abc"), UNKNOWN),
            ],
        );
        // `then` alone, with no `if`, constrains nothing.
        verdicts(json!({"then": false}), &[(json!(1), VALID)]);
        verdicts(
            json!({"oneOf": [{"type": "string", "pattern": "\\s"}, {"type": "integer"}]}),
            &[
                (json!("ab"), UNKNOWN),
                (json!("a b"), VALID),
                (json!(1), VALID),
            ],
        );
        // A keyword of another type holds: two branches do.
        verdicts(
            json!({"oneOf": [{"pattern": "\\s"}, {"type": "integer"}]}),
            &[(json!(1), INVALID)],
        );
    }

    #[test]
    fn refs_resolve_and_recursion_is_bounded() {
        let tree = json!({
            "$defs": {"pos": {"minimum": 1}},
            "type": "object",
            "properties": {"v": {"$ref": "#/$defs/pos"}, "next": {"$ref": "#"}},
            "additionalProperties": false
        });
        verdicts(
            tree,
            &[
                (json!({"v": 1, "next": {"v": 2, "next": {}}}), VALID),
                (json!({"v": 1, "next": {"v": 0}}), INVALID),
                (json!({"v": 1, "next": {"w": 1}}), INVALID),
            ],
        );
        verdicts(json!({"$ref": "#"}), &[(json!(1), UNKNOWN)]);
        verdicts(json!({"$ref": "#/$defs/missing"}), &[(json!(1), UNKNOWN)]);
        // `$ref` beside other keywords is conjoined with them.
        verdicts(
            json!({"$defs": {"i": {"type": "integer"}}, "$ref": "#/$defs/i", "minimum": 3}),
            &[
                (json!(3), VALID),
                (json!(2), INVALID),
                (json!(3.5), INVALID),
            ],
        );
    }

    #[test]
    fn keywords_not_decided_leave_the_verdict_open_unless_another_fails() {
        let schema =
            json!({"unevaluatedProperties": false, "properties": {"a": {"type": "integer"}}});
        verdicts(
            schema,
            &[
                (json!({"a": 1}), UNKNOWN),
                (json!({"a": "x"}), INVALID),
                (json!("s"), VALID),
            ],
        );
        verdicts(json!({"unevaluatedItems": true}), &[(json!([1]), VALID)]);
        verdicts(
            json!({"$dynamicRef": "#x", "type": "string"}),
            &[(json!("a"), UNKNOWN), (json!(1), INVALID)],
        );
        // Annotations and unknown keywords say nothing.
        verdicts(
            json!({"title": "t", "description": "d", "default": 3, "examples": [1], "$comment": "c", "x-vendor": false}),
            &[(json!(1), VALID)],
        );
        // Under `strict`, objects are left to the lowering.
        let strict = SpecOptions {
            strict: true,
            ..SpecOptions::default()
        };
        let schema = json!({"type": "object"});
        assert_eq!(verdict_with(&schema, &json!({"a": 1}), &strict), UNKNOWN);
        assert_eq!(verdict_with(&schema, &json!(1), &strict), INVALID);
    }

    /// The JSON-Schema-Test-Suite for draft 2020-12 (from `../shared/data`
    /// when it is there): every verdict the check gives is the suite's.
    #[test]
    fn verdicts_agree_with_the_json_schema_test_suite() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/json-schema-test-suite/tests/draft2020-12");
        if !dir.is_dir() {
            tokensieve_core::skip!("{} not found", dir.display());
            return;
        }
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("the suite's folder")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let options = SpecOptions::default();
        let (mut decided, mut undecided) = (0, 0);
        let mut wrong = Vec::new();
        for path in &files {
            let text = std::fs::read_to_string(path).expect("a suite file");
            let groups: Value = serde_json::from_str(&text).expect("a suite file is JSON");
            for group in groups.as_array().expect("a list of groups") {
                for test in group["tests"].as_array().expect("a list of tests") {
                    let expected = test["valid"].as_bool().expect("a verdict");
                    match verdict_with(&group["schema"], &test["data"], &options) {
                        Some(got) if got == expected => decided += 1,
                        Some(got) => wrong.push(format!(
                            "{}: {} / {}: said {got}",
                            path.file_name().unwrap().to_string_lossy(),
                            group["description"],
                            test["description"]
                        )),
                        None => undecided += 1,
                    }
                }
            }
        }
        eprintln!("{decided} verdicts agree with the suite, {undecided} undecided");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(decided > 500, "only {decided} decided");
    }

    /// The MaskBench dev set (from `../shared/data` when it is there): its
    /// instances are labelled valid or not; every verdict the check gives
    /// is the label.
    #[test]
    fn verdicts_agree_with_the_maskbench_labels() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/maskbench-dev");
        if !dir.is_dir() {
            tokensieve_core::skip!("{} not found", dir.display());
            return;
        }
        let options = SpecOptions::default();
        let (mut decided, mut undecided) = (0, 0);
        let mut wrong = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the MaskBench folder") {
            let path = entry.expect("a directory entry").path();
            let text = std::fs::read_to_string(&path).expect("a MaskBench file");
            let file: Value = serde_json::from_str(&text).expect("a MaskBench file is JSON");
            for test in file["tests"].as_array().into_iter().flatten() {
                let expected = test["valid"].as_bool().expect("a label");
                match verdict_with(&file["schema"], &test["data"], &options) {
                    Some(got) if got == expected => decided += 1,
                    Some(got) => wrong.push(format!(
                        "{}: {}: said {got}",
                        path.file_name().unwrap().to_string_lossy(),
                        test["description"]
                    )),
                    None => undecided += 1,
                }
            }
        }
        eprintln!("{decided} verdicts agree with MaskBench, {undecided} undecided");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_meta_schema_of_its_own_leaves_everything_undecided() {
        let custom = json!({"$schema": "http://localhost:1234/no-validation.json", "minimum": 2});
        verdicts(custom, &[(json!(1), UNKNOWN)]);
        let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 2});
        verdicts(draft4, &[(json!(1), INVALID)]);
    }

    #[test]
    fn a_ref_beside_other_keywords_before_2019_09_is_undecided() {
        // Draft 7 ignores `maxItems` here, the lowering conjoins it.
        let draft7 = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"a": {"type": "array"}},
            "$ref": "#/definitions/a",
            "maxItems": 1
        });
        verdicts(draft7, &[(json!([1, 2]), UNKNOWN), (json!("x"), UNKNOWN)]);
        let plain = json!({"$defs": {"a": {"type": "array"}}, "$ref": "#/$defs/a", "maxItems": 1});
        verdicts(plain, &[(json!([1, 2]), INVALID), (json!([1]), VALID)]);
    }

    #[test]
    fn work_is_bounded() {
        // Every item against the end of a long enum, many times over: the
        // budget runs out and the answer is "cannot tell", not a long wait.
        let values: Vec<Value> = (0..10_000).map(|i| json!(i)).collect();
        let schema = json!({"items": {"enum": values}});
        let options = SpecOptions::default();
        let value = Value::Array((0..1_000).map(|_| json!(9_999)).collect());
        assert_eq!(verdict_with(&schema, &value, &options), UNKNOWN);
        let few = Value::Array((0..5).map(|_| json!(9_999)).collect());
        assert_eq!(verdict_with(&schema, &few, &options), VALID);
        let many = Value::Array((0..1_000).map(|i| json!(i)).collect());
        let unique = json!({"uniqueItems": true});
        assert_eq!(verdict_with(&unique, &many, &options), UNKNOWN);
    }
}
