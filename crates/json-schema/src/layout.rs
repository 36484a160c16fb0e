//! Where whitespace may go: the [`Whitespace`] policy as regex pieces, and
//! constant JSON values spelled under it.

use super::rx::{self, Lang};
use serde_json::Value;
use tokensieve_core::maskbench::dumps_python;
use tokensieve_core::{GrammarError, Whitespace};

/// The whitespace policy, resolved to regex pieces.
#[derive(Clone, Debug)]
pub(crate) enum Layout {
    /// `[ \t\n\r]{0,n}` between any two tokens (none before the first token
    /// or after the last: a subset, and what generated JSON looks like).
    Any { ws: Lang },
    /// No whitespace at all.
    Compact,
    /// Exactly these separators; with `indent`, Python `json.dumps(indent=n)`
    /// line breaks (a newline and `n` spaces per level inside non-empty
    /// containers).
    Fixed {
        item: String,
        key: String,
        indent: Option<u32>,
    },
}

impl Layout {
    pub fn new(policy: &Whitespace, max_whitespace: u32) -> Result<Layout, GrammarError> {
        Ok(match policy {
            Whitespace::Any if max_whitespace == 0 => Layout::Compact,
            Whitespace::Any => Layout::Any {
                ws: rx::repeat(Lang::atom(r"[ \t\n\r]", 1), 0, Some(max_whitespace)),
            },
            Whitespace::Compact => Layout::Compact,
            Whitespace::Fixed {
                item_separator,
                key_separator,
                indent,
            } => {
                check_separator(item_separator, ',', "item_separator")?;
                check_separator(key_separator, ':', "key_separator")?;
                Layout::Fixed {
                    item: item_separator.clone(),
                    key: key_separator.clone(),
                    indent: *indent,
                }
            }
        })
    }

    /// Whether the regex depends on the nesting level (only with indent).
    pub fn level_matters(&self) -> bool {
        matches!(
            self,
            Layout::Fixed {
                indent: Some(_),
                ..
            }
        )
    }

    fn newline(&self, level: u32) -> Lang {
        match self {
            Layout::Fixed {
                indent: Some(n), ..
            } => Lang::lit(&format!("\n{}", " ".repeat((n * level) as usize))),
            _ => Lang::empty(),
        }
    }

    /// Between the key and the value of a member.
    pub fn key_sep(&self) -> Lang {
        match self {
            Layout::Any { ws } => rx::seq([ws.clone(), Lang::lit(":"), ws.clone()]),
            Layout::Compact => Lang::lit(":"),
            Layout::Fixed { key, .. } => Lang::lit(key),
        }
    }

    /// Between two items of a container at `level` (the items are at `level + 1`).
    pub fn item_sep(&self, level: u32) -> Lang {
        match self {
            Layout::Any { ws } => rx::seq([ws.clone(), Lang::lit(","), ws.clone()]),
            Layout::Compact => Lang::lit(","),
            Layout::Fixed { item, .. } => rx::seq([Lang::lit(item), self.newline(level + 1)]),
        }
    }

    /// A container at `level`: `open`, then `body` (which may be absent when
    /// `body_optional`), then `close`.
    pub fn container(
        &self,
        open: char,
        body: Lang,
        body_optional: bool,
        close: char,
        level: u32,
    ) -> Lang {
        let open = Lang::lit(&open.to_string());
        let close = Lang::lit(&close.to_string());
        match self {
            Layout::Any { ws } => {
                let inner = rx::seq([body, ws.clone()]);
                let inner = if body_optional { rx::opt(inner) } else { inner };
                rx::seq([open, ws.clone(), inner, close])
            }
            Layout::Compact | Layout::Fixed { indent: None, .. } => {
                let inner = if body_optional { rx::opt(body) } else { body };
                rx::seq([open, inner, close])
            }
            Layout::Fixed { .. } => {
                let inner = rx::seq([self.newline(level + 1), body, self.newline(level)]);
                let inner = if body_optional { rx::opt(inner) } else { inner };
                rx::seq([open, inner, close])
            }
        }
    }

    /// An object member `"key": value`.
    pub fn member(&self, key: Lang, value: Lang) -> Lang {
        rx::seq([key, self.key_sep(), value])
    }

    /// Every spelling of the constant `v` under this policy (for `Any`, any
    /// whitespace between tokens; numbers also in their other common
    /// spellings), at `level`.
    pub fn constant(&self, v: &Value, level: u32) -> Lang {
        match v {
            Value::Null | Value::Bool(_) | Value::String(_) => Lang::lit(&dumps_python(v)),
            Value::Number(n) => rx::alt(number_spellings(n).iter().map(|s| Lang::lit(s))),
            Value::Array(items) => {
                let sep = self.item_sep(level);
                let mut parts = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        parts.push(sep.clone());
                    }
                    parts.push(self.constant(item, level + 1));
                }
                self.container('[', rx::seq(parts), items.is_empty(), ']', level)
            }
            Value::Object(members) => {
                let sep = self.item_sep(level);
                let mut parts = Vec::new();
                for (i, (k, item)) in members.iter().enumerate() {
                    if i > 0 {
                        parts.push(sep.clone());
                    }
                    parts
                        .push(self.member(Lang::lit(&key_text(k)), self.constant(item, level + 1)));
                }
                self.container('{', rx::seq(parts), members.is_empty(), '}', level)
            }
        }
    }

    /// The one canonical spelling of `v` at `level` (the first alternative of
    /// [`Layout::constant`], with no optional whitespace).
    pub fn canonical(&self, v: &Value, level: u32) -> String {
        match self {
            Layout::Any { .. } | Layout::Compact => compact(v),
            Layout::Fixed { item, key, indent } => {
                let mut out = String::new();
                pretty(&mut out, v, item, key, *indent, level);
                out
            }
        }
    }
}

fn check_separator(sep: &str, punct: char, name: &str) -> Result<(), GrammarError> {
    let trimmed = sep.trim_matches([' ', '\t', '\n', '\r']);
    if trimmed.len() == 1 && trimmed.starts_with(punct) {
        Ok(())
    } else {
        Err(GrammarError::InvalidConfig(format!(
            "whitespace {name} {sep:?} is not `{punct}` with JSON whitespace around it"
        )))
    }
}

/// A JSON string literal for `key`, spelled as Python's `json.dumps` does.
pub(crate) fn key_text(key: &str) -> String {
    dumps_python(&Value::String(key.to_string()))
}

/// The spellings of a number constant: Python's repr (what MaskBench and most
/// clients print), serde_json's, and for integral values both `3` and `3.0`.
pub(crate) fn number_spellings(n: &serde_json::Number) -> Vec<String> {
    let mut out = vec![dumps_python(&Value::Number(n.clone())), n.to_string()];
    if let Some(f) = n.as_f64()
        && n.is_f64()
        && f.fract() == 0.0
        && f.abs() < 1e15
    {
        out.push(format!("{}", f as i64));
    }
    if n.is_i64() || n.is_u64() {
        out.push(format!("{n}.0"));
    } else if let Some(f) = n.as_f64() {
        // Rust's and JavaScript's shortest exponent form: `1e-5`.
        out.push(format!("{f:e}"));
    }
    out.sort();
    out.dedup();
    out
}

fn compact(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(compact).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!("{}:{}", key_text(k), compact(x)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => dumps_python(other),
    }
}

fn pretty(out: &mut String, v: &Value, item: &str, key: &str, indent: Option<u32>, level: u32) {
    let newline = |out: &mut String, level: u32| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat((n * level) as usize));
        }
    };
    match v {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            newline(out, level + 1);
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                    newline(out, level + 1);
                }
                pretty(out, x, item, key, indent, level + 1);
            }
            newline(out, level);
            out.push(']');
        }
        Value::Object(m) if !m.is_empty() => {
            out.push('{');
            newline(out, level + 1);
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                    newline(out, level + 1);
                }
                out.push_str(&key_text(k));
                out.push_str(key);
                pretty(out, x, item, key, indent, level + 1);
            }
            newline(out, level);
            out.push('}');
        }
        other => out.push_str(&compact(other)),
    }
}

/// The values [`json_eq`] finds among, for asking of many values whether
/// each is one of them: strings (most `enum` values) by a hash set,
/// numbers by their value as a double (equal numbers have one; the few
/// that share it are told apart by [`json_eq`]), the rest one by one. An
/// `enum` of a few thousand strings (real schemas have them) compared
/// pairwise cost a compile tens of milliseconds.
pub(crate) struct JsonSet<'a> {
    strings: hashbrown::HashSet<&'a str>,
    numbers: hashbrown::HashMap<u64, Vec<&'a Value>>,
    others: Vec<&'a Value>,
}

/// The bucket of a number in a [`JsonSet`]: its value as a double, zero's
/// two signs as one.
fn number_key(n: &serde_json::Number) -> u64 {
    let x = n.as_f64().unwrap_or(f64::NAN);
    if x == 0.0 { 0 } else { x.to_bits() }
}

impl<'a> JsonSet<'a> {
    pub(crate) fn new() -> Self {
        JsonSet {
            strings: hashbrown::HashSet::new(),
            numbers: hashbrown::HashMap::new(),
            others: Vec::new(),
        }
    }

    /// Adds `v`; whether it was not there yet (by [`json_eq`]).
    pub(crate) fn insert(&mut self, v: &'a Value) -> bool {
        match v {
            Value::String(s) => self.strings.insert(s.as_str()),
            _ if self.contains(v) => false,
            Value::Number(n) => {
                self.numbers.entry(number_key(n)).or_default().push(v);
                true
            }
            _ => {
                self.others.push(v);
                true
            }
        }
    }

    /// Whether one of the values is [`json_eq`] to `v`.
    pub(crate) fn contains(&self, v: &Value) -> bool {
        match v {
            // A string equals only the same string.
            Value::String(s) => self.strings.contains(s.as_str()),
            Value::Number(n) => self
                .numbers
                .get(&number_key(n))
                .is_some_and(|same| same.iter().any(|u| json_eq(u, v))),
            _ => self.others.iter().any(|u| json_eq(u, v)),
        }
    }
}

impl<'a> FromIterator<&'a Value> for JsonSet<'a> {
    fn from_iter<I: IntoIterator<Item = &'a Value>>(values: I) -> Self {
        let mut set = JsonSet::new();
        for v in values {
            set.insert(v);
        }
        set
    }
}

/// JSON Schema equality: numbers by value (`1 == 1.0`), objects regardless
/// of key order, booleans never equal to numbers.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;
    use serde_json::json;

    fn whole(l: &Lang) -> Regex {
        Regex::new(&format!("^(?:{})$", l.text().unwrap())).unwrap()
    }

    #[test]
    fn constants_under_each_policy() {
        let v = json!({"a": [1, 2.5, "x\"y"], "b": {}});
        let any = Layout::new(&Whitespace::Any, 3).unwrap();
        let r = whole(&any.constant(&v, 0));
        assert!(r.is_match(r#"{"a":[1,2.5,"x\"y"],"b":{}}"#));
        assert!(r.is_match(r#"{"a": [1, 2.5, "x\"y"], "b": { }}"#));
        assert!(r.is_match(r#"{"a":[1.0,2.5,"x\"y"],"b":{}}"#));
        assert!(!r.is_match(r#"{"b":{},"a":[1,2.5,"x\"y"]}"#));
        assert!(!r.is_match(r#" {"a":[1,2.5,"x\"y"],"b":{}}"#));
        let fixed = Layout::new(
            &Whitespace::Fixed {
                item_separator: ",".into(),
                key_separator: ": ".into(),
                indent: Some(2),
            },
            0,
        )
        .unwrap();
        let text = "{\n  \"a\": [\n    1,\n    2.5,\n    \"x\\\"y\"\n  ],\n  \"b\": {}\n}";
        assert!(whole(&fixed.constant(&v, 0)).is_match(text));
        assert_eq!(fixed.canonical(&v, 0), text);
        assert!(
            whole(&Layout::Compact.constant(&v, 0)).is_match(&Layout::Compact.canonical(&v, 0))
        );
    }

    #[test]
    fn bad_separators_are_config_errors() {
        let bad = Whitespace::Fixed {
            item_separator: ";".into(),
            key_separator: ":".into(),
            indent: None,
        };
        assert!(Layout::new(&bad, 0).is_err());
    }

    #[test]
    fn equality() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(!json_eq(&json!(1), &json!(true)));
        assert!(json_eq(&json!({"a": 1, "b": 2}), &json!({"b": 2, "a": 1})));
    }

    /// The set answers as [`json_eq`] does, pair by pair, on values of
    /// every kind: strings by the hash set, the rest one by one.
    #[test]
    fn json_set_is_json_eq() {
        let values = json!([
            "a", "b", "1", "", 1, 1.0, 2, -0.0, 0, true, false, null, [1, "a"], [1.0, "a"],
            9007199254740993_u64, 9007199254740992_u64, 9007199254740992.0, -5, -5.0, 1e300,
            {"a": 1, "b": [2]}, {"b": [2.0], "a": 1}, {"a": "1"}, "true", "null"
        ]);
        let values = values.as_array().unwrap();
        let mut set = JsonSet::new();
        for (i, v) in values.iter().enumerate() {
            let before = &values[..i];
            let known = before.iter().any(|u| json_eq(u, v));
            assert_eq!(set.contains(v), known, "{v} among {before:?}");
            assert_eq!(set.insert(v), !known, "{v}");
            assert!(set.contains(v));
        }
        for v in [
            json!("c"),
            json!(3),
            json!([1]),
            json!({"a": 2}),
            json!(1.5),
        ] {
            assert!(!set.contains(&v), "{v}");
        }
    }
}
