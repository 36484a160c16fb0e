//! Constraint specifications: what the output must look like, and how.
//!
//! A [`Constraint`] is a [`ConstraintSpec`] plus [`SpecOptions`]. Its
//! [`Constraint::cache_key`] is canonical: two constraints that must compile to
//! the same grammar have the same key (JSON is re-serialised compactly, keeping
//! key order, because property order is the order output is generated in).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of a [`ConstraintSpec`], for capability lists and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecKind {
    JsonSchema,
    JsonObject,
    Regex,
    Choice,
    Ebnf,
    StructuralTag,
}

impl SpecKind {
    /// Every kind, in a stable order.
    pub const ALL: [SpecKind; 6] = [
        SpecKind::JsonSchema,
        SpecKind::JsonObject,
        SpecKind::Regex,
        SpecKind::Choice,
        SpecKind::Ebnf,
        SpecKind::StructuralTag,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SpecKind::JsonSchema => "json_schema",
            SpecKind::JsonObject => "json_object",
            SpecKind::Regex => "regex",
            SpecKind::Choice => "choice",
            SpecKind::Ebnf => "ebnf",
            SpecKind::StructuralTag => "structural_tag",
        }
    }
}

impl fmt::Display for SpecKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the output must match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintSpec {
    /// A JSON Schema document, as JSON text.
    JsonSchema(String),
    /// Any JSON object (`{...}`), the `json_object` response format.
    JsonObject,
    /// A regular expression that the whole output must match.
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// An EBNF/GBNF grammar (llama.cpp syntax) and the name of its root rule.
    Ebnf { grammar: String, root: String },
    /// Free text in which tagged regions are constrained (function calling).
    StructuralTag(StructuralTag),
}

impl ConstraintSpec {
    pub fn kind(&self) -> SpecKind {
        match self {
            ConstraintSpec::JsonSchema(_) => SpecKind::JsonSchema,
            ConstraintSpec::JsonObject => SpecKind::JsonObject,
            ConstraintSpec::Regex(_) => SpecKind::Regex,
            ConstraintSpec::Choice(_) => SpecKind::Choice,
            ConstraintSpec::Ebnf { .. } => SpecKind::Ebnf,
            ConstraintSpec::StructuralTag(_) => SpecKind::StructuralTag,
        }
    }
}

/// Free text where, after a trigger string, a tagged region
/// `begin content end` is constrained (XGrammar's structural tag).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StructuralTag {
    pub tags: Vec<TagItem>,
    /// Prefixes of `begin` strings that switch from free text into a tag.
    pub triggers: Vec<String>,
}

/// One tagged region of a [`StructuralTag`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TagItem {
    pub begin: String,
    /// The constraint on the text between `begin` and `end`.
    pub content: Box<ConstraintSpec>,
    pub end: String,
}

/// Whitespace policy for JSON output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Whitespace {
    /// Any JSON whitespace where JSON allows it (backends may bound its length;
    /// the regex backend does, see its config).
    #[default]
    Any,
    /// No whitespace at all: `{"a":1,"b":[1,2]}`.
    Compact,
    /// Exactly these separators, optionally pretty-printed with `indent` spaces
    /// (like Python's `json.dumps(indent=.., separators=(item, key))`).
    Fixed {
        item_separator: String,
        key_separator: String,
        indent: Option<u32>,
    },
}

/// How a spec is turned into a grammar. Every field has a default that matches
/// what JSON Schema itself means.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct SpecOptions {
    pub whitespace: Whitespace,
    /// Strict mode: objects without `additionalProperties` allow no extra
    /// properties (XGrammar/OpenAI "strict"); off = JSON Schema semantics.
    pub strict: bool,
    /// Bound for recursive schemas and `JsonObject` in backends that cannot
    /// express recursion (the regex backend). `None` = such specs are an error.
    pub max_depth: Option<u32>,
}

/// A spec with its options: the unit that is compiled and cached.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Constraint {
    pub spec: ConstraintSpec,
    #[serde(default)]
    pub options: SpecOptions,
}

/// The canonical form of a [`Constraint`], used as the cache key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(String);

impl CacheKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Constraint {
    pub fn new(spec: ConstraintSpec) -> Self {
        Constraint {
            spec,
            options: SpecOptions::default(),
        }
    }

    pub fn with_options(spec: ConstraintSpec, options: SpecOptions) -> Self {
        Constraint { spec, options }
    }

    pub fn json_schema(schema: impl Into<String>) -> Self {
        Self::new(ConstraintSpec::JsonSchema(schema.into()))
    }

    pub fn regex(pattern: impl Into<String>) -> Self {
        Self::new(ConstraintSpec::Regex(pattern.into()))
    }

    pub fn choice<S: Into<String>>(choices: impl IntoIterator<Item = S>) -> Self {
        Self::new(ConstraintSpec::Choice(
            choices.into_iter().map(Into::into).collect(),
        ))
    }

    pub fn ebnf(grammar: impl Into<String>, root: impl Into<String>) -> Self {
        Self::new(ConstraintSpec::Ebnf {
            grammar: grammar.into(),
            root: root.into(),
        })
    }

    pub fn kind(&self) -> SpecKind {
        self.spec.kind()
    }

    /// The canonical key. JSON Schema text is parsed and re-serialised
    /// compactly (key order kept: it is the generation order); text that does
    /// not parse is kept verbatim so the compile step reports the error.
    pub fn cache_key(&self) -> CacheKey {
        let mut spec = self.spec.clone();
        canonicalize(&mut spec);
        let doc = serde_json::json!({ "spec": spec, "options": self.options });
        CacheKey(doc.to_string())
    }
}

fn canonicalize(spec: &mut ConstraintSpec) {
    match spec {
        ConstraintSpec::JsonSchema(text) => {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                *text = v.to_string();
            }
        }
        ConstraintSpec::StructuralTag(tag) => {
            for item in &mut tag.tags {
                canonicalize(&mut item.content);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_ignores_json_formatting_but_keeps_order() {
        let a =
            Constraint::json_schema(r#"{ "type": "object",  "properties": {"a": {}, "b": {}} }"#);
        let b = Constraint::json_schema(r#"{"type":"object","properties":{"a":{},"b":{}}}"#);
        let c = Constraint::json_schema(r#"{"type":"object","properties":{"b":{},"a":{}}}"#);
        assert_eq!(a.cache_key(), b.cache_key());
        assert_ne!(a.cache_key(), c.cache_key());
    }

    #[test]
    fn cache_key_distinguishes_kinds_and_options() {
        let r = Constraint::regex("a");
        let c = Constraint::choice(["a"]);
        assert_ne!(r.cache_key(), c.cache_key());
        let mut strict = Constraint::regex("a");
        strict.options.strict = true;
        assert_ne!(r.cache_key(), strict.cache_key());
    }
}
