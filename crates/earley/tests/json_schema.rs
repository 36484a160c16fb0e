//! JSON Schema on the earley backend, through the front end's context-free
//! lowering (`tokensieve_json_schema::schema_to_grammar`).
//!
//! What would break if it went wrong:
//! - **never an invalid output**: random sentences of each schema's grammar
//!   and near misses of them; every text the matcher accepts must be JSON
//!   valid under the schema (checked by the `jsonschema` crate), and the
//!   matcher's verdict must equal the reference recognizer's on the same
//!   grammar;
//! - **recursion and values of any depth**: hand-labelled instances nested far
//!   deeper than any depth bound a regex could carry;
//! - **JSON Schema's own semantics** for extra members (allowed unless
//!   forbidden, or under `strict`), and the errors for what cannot be served.
//!
//! Inputs: hand-written schemas and the MaskBench fixtures in the repo
//! always; the 40 files of `tests/fixtures/maskbench_sample.txt` from
//! `../shared/data/maskbench-dev` when it exists (else it says it skipped).

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokensieve_core::testing::SplitMix64;
use tokensieve_core::{Constraint, GrammarBackend, GrammarError, SpecOptions};
use tokensieve_earley::{EarleyBackend, EarleyConfig};
use tokensieve_grammar::GbnfLimits;
use tokensieve_grammar::testing::{mutate, random_sentence};
use tokensieve_json_schema::{LoweringLimits, schema_to_grammar};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn backend() -> EarleyBackend {
    EarleyBackend::new(
        Arc::new(tokensieve_core::vocab::fixtures::json_tiny()),
        EarleyConfig::default(),
    )
}

/// The matcher's verdict on a whole text: every byte accepted and the
/// output may end there.
fn accepts(backend: &EarleyBackend, constraint: &Constraint, text: &[u8]) -> bool {
    let compiled = backend
        .compile(constraint)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut m = compiled.matcher();
    m.accept_bytes(text).is_ok() && m.is_accepting()
}

const TREE: &str = r##"{
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
      },
      "required": ["value"],
      "additionalProperties": false
    }
  },
  "$ref": "#/$defs/node"
}"##;

const LINKED_LIST: &str = r##"{
  "type": "object",
  "properties": {"head": {"type": "string"}, "tail": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}},
  "required": ["head", "tail"],
  "additionalProperties": false
}"##;

const MUTUAL: &str = r##"{
  "definitions": {
    "expr": {"anyOf": [{"type": "number"}, {"$ref": "#/definitions/call"}]},
    "call": {
      "type": "object",
      "properties": {"fn": {"enum": ["add", "mul"]}, "args": {"type": "array", "items": {"$ref": "#/definitions/expr"}, "minItems": 1}},
      "required": ["fn", "args"],
      "additionalProperties": false
    }
  },
  "$ref": "#/definitions/expr"
}"##;

/// `unevaluatedProperties` at two levels: the inner keyword sees only its
/// `allOf` branch, the outer one the whole object.
const UNEVALUATED_NESTED: &str = r#"{
  "type": "object",
  "properties": {"foo": {"type": "string"}},
  "allOf": [{"properties": {"bar": {"type": "integer"}, "foo": true}, "unevaluatedProperties": {"type": "null"}}],
  "anyOf": [{"properties": {"baz": {"const": "baz"}}, "required": ["baz"]}, {"properties": {"qux": {"type": "boolean"}}}],
  "unevaluatedProperties": {"type": "array", "maxItems": 1}
}"#;

/// Two schemas of one member, each with its own `unevaluatedProperties`.
const UNEVALUATED_MERGED_MEMBER: &str = r#"{
  "properties": {"a": {"properties": {"x": {"type": "integer"}}, "unevaluatedProperties": {"type": "string"}}},
  "allOf": [{"properties": {"a": {"properties": {"y": {"type": "null"}}}}}]
}"#;

const UNEVALUATED_ITEMS: &str = r#"{
  "type": "array",
  "prefixItems": [{"type": "integer"}],
  "allOf": [{"prefixItems": [true, {"type": "string"}]}, {"prefixItems": [{"minimum": 0}], "unevaluatedItems": {"type": "integer"}}],
  "unevaluatedItems": {"type": "boolean"}
}"#;

const OPEN_OBJECT: &str = r#"{
  "type": "object",
  "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
  "required": ["id"]
}"#;

/// `contains` with both bounds: counted items and their negation.
const CONTAINS_BOUNDED: &str = r#"{
  "type": "array",
  "items": {"type": ["integer", "boolean", "null"]},
  "contains": {"const": 1},
  "minContains": 1,
  "maxContains": 2
}"#;

/// `contains` at least twice, after a tuple prefix, inside an object.
const CONTAINS_PREFIX: &str = r#"{
  "type": "object",
  "properties": {
    "xs": {
      "type": "array",
      "prefixItems": [{"type": "string"}],
      "items": {"type": "integer"},
      "contains": {"minimum": 5},
      "minContains": 2,
      "maxItems": 6
    }
  },
  "required": ["xs"],
  "additionalProperties": false
}"#;

/// `uniqueItems` over constants (1 and 1.0 are one value).
const UNIQUE_CONSTANTS: &str = r#"{
  "type": "array",
  "items": {"enum": [1, 1.0, 2, "a", null, true, {"k": [1]}]},
  "uniqueItems": true
}"#;

/// `uniqueItems` over a tuple of booleans.
const UNIQUE_TUPLE: &str = r#"{
  "prefixItems": [{"type": "boolean"}, {"type": "boolean"}],
  "items": false,
  "uniqueItems": true
}"#;

/// Enums filtered by the rest of their conjunction: a `not` of containers
/// and of `multipleOf` (neither has a negation of its own), values the
/// `not`s rule out among ones they leave.
const ENUM_NOT: &str = r#"{
  "allOf": [
    {"enum": [[0.0], [false], {"a": 1}, {"a": true}, 7, 8, "x", null]},
    {"not": {"enum": [[false], {"a": true}]}},
    {"not": {"type": "number", "multipleOf": 2}},
    {"not": {"not": {"type": ["array", "object", "number", "string"]}}}
  ]
}"#;

/// An enum member under `anyOf` branches that take some of its values.
const ENUM_ANY_OF: &str = r#"{
  "type": "object",
  "properties": {
    "p": {
      "enum": [1, 2.0, 2.5, [1, 2], [1, "x"], {"k": null}],
      "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "integer", "minimum": 2}]
    }
  },
  "required": ["p"],
  "additionalProperties": false
}"#;

/// An enum under overlapping `oneOf` branches and `if`/`then`: a value
/// under both branches, and one whose `then` fails, are out.
const ENUM_ONE_OF_IF: &str = r#"{
  "enum": [1, 2, 3, "a", "", [0], {"n": 1}],
  "oneOf": [{"type": "integer"}, {"minimum": 2}],
  "if": {"type": "string"},
  "then": {"maxLength": 0},
  "else": {"not": {"type": "object", "required": ["n"]}}
}"#;

fn nested_tree(depth: usize) -> String {
    let mut text = r#"{"value": 0}"#.to_string();
    for i in 1..=depth {
        text = format!(r#"{{"value": {i}, "children": [{text}, {{"value": -1}}]}}"#);
    }
    text
}

#[test]
fn recursion_goes_to_any_depth() {
    let b = backend();
    let tree = Constraint::json_schema(TREE);
    assert!(accepts(&b, &tree, nested_tree(0).as_bytes()));
    assert!(accepts(&b, &tree, nested_tree(60).as_bytes()));
    // Deep inside, a string where an integer must be.
    let bad = nested_tree(40).replacen(r#""value": 0"#, r#""value": "0""#, 1);
    assert!(!accepts(&b, &tree, bad.as_bytes()));
    // `additionalProperties: false` holds at every level.
    let extra = nested_tree(30).replacen(r#"{"value": -1}"#, r#"{"value": -1, "x": 1}"#, 1);
    assert!(!accepts(&b, &tree, extra.as_bytes()));
    assert!(!accepts(&b, &tree, br#"{"children": []}"#));

    let list = Constraint::json_schema(LINKED_LIST);
    let mut text = r#"{"head": "end", "tail": null}"#.to_string();
    for i in 0..50 {
        text = format!(r#"{{"head": "n{i}", "tail": {text}}}"#);
    }
    assert!(accepts(&b, &list, text.as_bytes()));
    assert!(!accepts(
        &b,
        &list,
        br#"{"head": "a", "tail": {"head": 1, "tail": null}}"#
    ));

    let mutual = Constraint::json_schema(MUTUAL);
    assert!(accepts(
        &b,
        &mutual,
        br#"{"fn": "add", "args": [1, {"fn": "mul", "args": [2, {"fn": "add", "args": [3]}]}]}"#
    ));
    assert!(accepts(&b, &mutual, b"2.5"));
    assert!(!accepts(&b, &mutual, br#"{"fn": "add", "args": []}"#));
    assert!(!accepts(&b, &mutual, br#"{"fn": "sub", "args": [1]}"#));
}

#[test]
fn unconstrained_values_nest_to_any_depth_and_extra_members_follow_json_schema() {
    let b = backend();
    let any = Constraint::json_schema("{}");
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    assert!(accepts(&b, &any, deep.as_bytes()));
    assert!(accepts(
        &b,
        &any,
        br#"{"a": [null, true, {"b": "\u00e9\n"}], "c": -1.5e3}"#
    ));
    assert!(!accepts(&b, &any, b"[1,]"));
    assert!(!accepts(
        &b,
        &any,
        format!("{}1{}", "[".repeat(20), "]".repeat(19)).as_bytes()
    ));

    let open = Constraint::json_schema(OPEN_OBJECT);
    // Extra members are allowed, with any value, after the declared ones.
    assert!(accepts(
        &b,
        &open,
        br#"{"id": 1, "tags": ["x"], "more": {"deep": [[[{}]]]}}"#
    ));
    assert!(accepts(&b, &open, br#"{"id": 1, "note": "x"}"#));
    // A declared name is no extra member: its own schema holds.
    assert!(!accepts(&b, &open, br#"{"id": 1, "tags": 3}"#));
    assert!(!accepts(&b, &open, br#"{"tags": []}"#));
    // Strict mode: none.
    let mut strict = Constraint::json_schema(OPEN_OBJECT);
    strict.options = SpecOptions {
        strict: true,
        ..SpecOptions::default()
    };
    assert!(accepts(&b, &strict, br#"{"id": 1, "tags": ["x"]}"#));
    assert!(!accepts(&b, &strict, br#"{"id": 1, "note": "x"}"#));
}

/// Extra members' keys are strings of unescaped characters but the
/// declared names: a declared name that a key writes escaped (a newline,
/// a quote, a backslash in it) opens no way for that character unescaped
/// (when they did, `{"a<newline>": 1}` and `{"q"": 1}` were accepted).
#[test]
fn names_written_escaped_let_no_raw_character_into_other_keys() {
    let b = backend();
    let schema = r#"{"type": "object", "properties": {
        "a\nb": {"type": "integer"}, "q\"r": {"type": "integer"}, "s\\t": {"type": "integer"}}}"#;
    let c = Constraint::json_schema(schema);
    assert!(accepts(&b, &c, br#"{"a\nb": 1}"#));
    assert!(accepts(&b, &c, br#"{"q\"r": 1, "s\\t": 2}"#));
    assert!(accepts(&b, &c, br#"{"a": 1}"#));
    for bad in [
        &b"{\"a\n\": 1}"[..],
        b"{\"a\nb\": 1}",
        b"{\"q\"\": 1}",
        b"{\"s\\\": 1}",
    ] {
        assert!(!accepts(&b, &c, bad), "{}", String::from_utf8_lossy(bad));
    }
}

/// An object of many properties takes as the key of its extra members
/// any string but their names, an automaton built from the names (not
/// from the long regex written for them): prefixes and extensions of a
/// name are other keys, a name is its own property's. With lexemes too
/// small for the key, it is taken apart from its text, which the lowering
/// left unwritten and is written then.
#[test]
fn extra_members_of_a_large_object_take_every_other_key() {
    let small = EarleyConfig {
        max_lexeme_states: 24,
        max_dfa_states: 96,
        ..EarleyConfig::default()
    };
    for config in [EarleyConfig::default(), small] {
        extra_members_take_every_other_key(EarleyBackend::new(
            Arc::new(tokensieve_core::vocab::fixtures::json_tiny()),
            config,
        ));
    }
}

fn extra_members_take_every_other_key(b: EarleyBackend) {
    let mut properties: Vec<String> = (0..40)
        .map(|i| format!("\"alpha_{i}\": {{\"type\": \"integer\"}}"))
        .collect();
    properties.push("\"ключ\": {\"type\": \"integer\"}".into());
    let schema = format!(
        r#"{{"type": "object", "properties": {{{}}}, "additionalProperties": {{"type": "string"}}}}"#,
        properties.join(", ")
    );
    let c = Constraint::json_schema(&schema);
    let cases = [
        (r#"{"alpha_3": 1}"#, true),
        (r#"{"alpha_3": "x"}"#, false),
        (r#"{"alpha_": "x"}"#, true),
        (r#"{"alpha_": 1}"#, false),
        (r#"{"alpha_3x": "x"}"#, true),
        (r#"{"alpha_39": 2, "alpha_40": "y"}"#, true),
        (r#"{"alpha_40": 2}"#, false),
        (r#"{"": "x"}"#, true),
        (r#"{"ключ": 1}"#, true),
        (r#"{"ключ": "x"}"#, false),
        (r#"{"клю": "x"}"#, true),
        (r#"{"ключи": "x"}"#, true),
        (r#"{"клюя": "x"}"#, true),
        // Other keys are written unescaped (a narrower language).
        (r#"{"a\"b": "x"}"#, false),
        ("{\"a\nb\": \"x\"}", false),
        (r#"{"a"b": "x"}"#, false),
    ];
    for (text, expected) in cases {
        assert_eq!(accepts(&b, &c, text.as_bytes()), expected, "{text}");
    }
}

#[test]
fn what_cannot_be_served_is_an_error_naming_where() {
    let b = backend();
    // A recursive $ref merged with other keywords is served where the
    // merged sub-schema recurs into itself (it is a rule of its own) ...
    let merged = Constraint::json_schema(
        r##"{"type": "object", "properties": {"next": {"$ref": "#", "maxProperties": 2}}}"##,
    );
    // (Inside `next`, extra members are left out beside `maxProperties`:
    // the lowering's subset.)
    let deep = format!("{}{{}}{}", r#"{"next": "#.repeat(20), "}".repeat(20));
    assert!(accepts(&b, &merged, deep.as_bytes()));
    assert!(accepts(&b, &merged, br#"{"next": {"next": {}}, "a": 1}"#));
    assert!(!accepts(&b, &merged, br#"{"next": []}"#));
    assert!(!accepts(&b, &merged, br#"{"next": {"next": 1}}"#));
    // ... and an error where expanding it once more does not end.
    let merged = r##"{"type": "object", "properties": {"next": {"allOf": [{"$ref": "#"}, {"properties": {"next": {"maxProperties": 1}}}]}}}"##;
    match b.compile(&Constraint::json_schema(merged)) {
        Err(GrammarError::Unsupported { location, what }) => {
            assert!(
                location.to_string().contains("/properties/next"),
                "{location}"
            );
            assert!(what.contains("recursive"), "{what}");
        }
        other => panic!("{:?}", other.err()),
    }
    // Recursion no finite value satisfies.
    let endless = r##"{"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"}"##;
    let err = b
        .compile(&Constraint::json_schema(endless))
        .err()
        .expect("no finite value");
    assert!(err.to_string().contains("/$defs/a"), "{err}");
    // The placeholder characters of the grammar's rules, in a recursive schema.
    let private = "{\"properties\": {\"a\": {\"const\": \"\u{F0001}\"}, \"b\": {\"$ref\": \"#\"}}}";
    match b.compile(&Constraint::json_schema(private)) {
        Err(GrammarError::Unsupported { what, .. }) => assert!(what.contains("plane"), "{what}"),
        other => panic!("{:?}", other.err()),
    }
    // Not JSON.
    assert!(b.compile(&Constraint::json_schema("{")).is_err());
}

/// Random sentences of the schema's grammar and near misses of them: the
/// matcher agrees with the recognizer, and whatever it accepts is valid.
fn differential(name: &str, schema_text: &str, cases: usize, seed: u64) -> Result<usize, String> {
    differential_on(&backend(), name, schema_text, cases, seed)
}

/// [`differential`] on the backend `b`.
fn differential_on(
    b: &EarleyBackend,
    name: &str,
    schema_text: &str,
    cases: usize,
    seed: u64,
) -> Result<usize, String> {
    let schema: Value = serde_json::from_str(schema_text).map_err(|e| format!("{name}: {e}"))?;
    let Ok(validator) = jsonschema::validator_for(&schema) else {
        return Ok(0);
    };
    let options = SpecOptions::default();
    let max_whitespace = EarleyConfig::default().max_whitespace;
    let lowered = match schema_to_grammar(
        schema_text,
        &options,
        max_whitespace,
        &LoweringLimits::default(),
    ) {
        Ok(lowered) => lowered,
        Err(_) => return Ok(0),
    };
    let Ok(grammar) = lowered.to_grammar(&GbnfLimits::default()) else {
        return Ok(0);
    };
    let mut constraint = Constraint::json_schema(schema_text);
    constraint.options = options;
    let compiled = match b.compile(&constraint) {
        Ok(c) => c,
        Err(e) => {
            return Err(format!(
                "{name}: the grammar exists but earley refused: {e}"
            ));
        }
    };
    let mut r = SplitMix64(seed);
    let mut checked = 0;
    for i in 0..cases {
        let sentence = random_sentence(&grammar, &mut r, 40);
        let text = if i % 2 == 0 {
            sentence
        } else {
            mutate(&sentence, b"{}[]\",:0123456789-.eE truefalsnul\\", &mut r)
        };
        let mut m = compiled.matcher();
        let verdict = m.accept_bytes(&text).is_ok() && m.is_accepting();
        let reference = grammar.accepts(&text);
        let shown = String::from_utf8_lossy(&text);
        if verdict != reference {
            return Err(format!(
                "{name}: matcher says {verdict}, recognizer {reference} on {shown}"
            ));
        }
        if i % 2 == 0 && !verdict {
            return Err(format!(
                "{name}: a sentence of its own grammar refused: {shown}"
            ));
        }
        if verdict {
            let value: Value = match serde_json::from_slice(&minus_zero_as_zero(&text)) {
                Ok(value) => value,
                // Valid JSON that serde_json cannot hold as a Value (`1e400`);
                // the grammar's numbers are checked on every other text.
                Err(e) if e.to_string().contains("number out of range") => continue,
                Err(e) => return Err(format!("{name}: accepted text is not JSON ({e}): {shown}")),
            };
            if let Err(e) = validator.validate(&value) {
                return Err(format!(
                    "{name}: INVALID output accepted ({e} at {}): {shown}",
                    e.instance_path()
                ));
            }
            checked += 1;
        }
    }
    Ok(checked)
}

/// `text` with every number token `-0` written `0`. serde_json reads `-0`
/// as the float -0.0, which a draft-4 validator then calls no integer,
/// though JSON Schema says `-0` is one (no fraction, no exponent).
fn minus_zero_as_zero(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if in_string {
            in_string = escaped || b != b'"';
            escaped = !escaped && b == b'\\';
        } else if b == b'"' {
            in_string = true;
        } else if b == b'-'
            && text.get(i + 1) == Some(&b'0')
            && !matches!(text.get(i + 2), Some(b'0'..=b'9' | b'.' | b'e' | b'E'))
        {
            i += 1;
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// Regexes too big for one lexeme are taken apart only as far as needed
/// (`PieceGrammar::fit`): under tiny automaton limits every hand-written
/// schema is served that way, and the language is the same.
/// Both ways: lazily built lexemes (split by their measure) and eager ones
/// (split where their DFA does not fit).
#[test]
fn pieces_taken_apart_keep_the_language() {
    for lazy_lexemes in [true, false] {
        pieces_taken_apart_keep_the_language_with(lazy_lexemes);
    }
}

fn pieces_taken_apart_keep_the_language_with(lazy_lexemes: bool) {
    let tiny = EarleyBackend::new(
        Arc::new(tokensieve_core::vocab::fixtures::json_tiny()),
        EarleyConfig {
            max_dfa_states: 40,
            max_lexeme_states: 12,
            lazy_lexemes,
            ..EarleyConfig::default()
        },
    );
    let schemas = [
        ("tree", TREE),
        ("open_object", OPEN_OBJECT),
        ("enum_any_of", ENUM_ANY_OF),
        (
            "members",
            r#"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 9},
                "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 5},
                "n": {"type": "integer", "minimum": -40, "maximum": 1234}, "ok": {"type": "boolean"}},
                "required": ["n"], "additionalProperties": false}"#,
        ),
    ];
    let mut failures = Vec::new();
    let mut helper_rules = 0;
    for (i, (name, schema)) in schemas.iter().enumerate() {
        let constraint = Constraint::json_schema(*schema);
        let cancel = tokensieve_core::CancelToken::new();
        let (lexemes, rules) = backend()
            .compile_earley(&constraint, &cancel)
            .unwrap()
            .sizes();
        let apart = tiny.compile_earley(&constraint, &cancel).unwrap().sizes();
        assert!(
            apart.0 > lexemes && apart.1 >= rules,
            "{name}: taken apart into more lexemes ({apart:?} vs {:?})",
            (lexemes, rules)
        );
        helper_rules += apart.1 - rules;
        let label = format!("{name} (lazy lexemes: {lazy_lexemes})");
        match differential_on(&tiny, &label, schema, 200, 40 + i as u64) {
            Ok(n) => assert!(n > 0, "{name}: nothing accepted, so nothing was checked"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        helper_rules > 0,
        "some alternation or repetition became a rule"
    );

    // Counted and open repetitions cut in parts keep their bounds.
    let bounded = [
        (
            r#"{"type": "string", "minLength": 3, "maxLength": 30}"#,
            (0..34)
                .map(|n| format!("\"{}\"", "é".repeat(n)))
                .collect::<Vec<_>>(),
            3..=30,
        ),
        (
            r#"{"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}},
                "required": ["a"], "additionalProperties": false}, "minItems": 3}"#,
            (0..8)
                .map(|n| format!("[{}]", vec![r#"{"a": 12}"#; n].join(", ")))
                .collect(),
            3..=usize::MAX,
        ),
    ];
    for (schema, texts, valid) in bounded {
        let constraint = Constraint::json_schema(schema);
        for (n, text) in texts.iter().enumerate() {
            assert_eq!(
                accepts(&tiny, &constraint, text.as_bytes()),
                valid.contains(&n),
                "{schema} taken apart (lazy lexemes: {lazy_lexemes}), on {text}"
            );
        }
    }
}

#[test]
fn sentences_and_near_misses_never_yield_an_invalid_output() {
    let mut failures = Vec::new();
    let hand = [
        ("tree", TREE),
        ("linked_list", LINKED_LIST),
        ("mutual", MUTUAL),
        ("open_object", OPEN_OBJECT),
        ("any", "{}"),
        (
            "if_then_else",
            r#"{"type": "object", "properties": {"kind": {"enum": ["a", "b", "c"]}, "n": {"type": "integer"}},
                "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                "then": {"properties": {"n": {"minimum": 5}}, "required": ["n"]},
                "else": {"properties": {"n": {"maximum": -5}}}}"#,
        ),
        (
            "not_strings",
            r#"{"type": "object", "properties": {"s": {"type": "string", "not": {"enum": ["ab", "a", "b\"c"]}},
                "t": {"if": {"type": "string"}, "then": {"not": {"const": "x"}}, "else": {"type": "boolean"}}}}"#,
        ),
        ("contains_bounded", CONTAINS_BOUNDED),
        ("contains_prefix", CONTAINS_PREFIX),
        ("unique_constants", UNIQUE_CONSTANTS),
        ("unique_tuple", UNIQUE_TUPLE),
        ("unevaluated_nested", UNEVALUATED_NESTED),
        ("unevaluated_merged_member", UNEVALUATED_MERGED_MEMBER),
        ("unevaluated_items", UNEVALUATED_ITEMS),
        ("enum_not", ENUM_NOT),
        ("enum_any_of", ENUM_ANY_OF),
        ("enum_one_of_if", ENUM_ONE_OF_IF),
    ];
    for (i, (name, schema)) in hand.iter().enumerate() {
        match differential(name, schema, 60, 7 + i as u64) {
            Ok(n) => assert!(n > 0, "{name}: nothing accepted, so nothing was checked"),
            Err(e) => failures.push(e),
        }
    }
    let fixtures = Path::new(ROOT).join("../../tests/fixtures/maskbench");
    let mut files: Vec<_> = std::fs::read_dir(&fixtures)
        .unwrap_or_else(|e| panic!("{}: {e}", fixtures.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    let sample = Path::new(ROOT).join("../../tests/fixtures/maskbench_sample.txt");
    let dev = Path::new(ROOT).join("../../../shared/data/maskbench-dev");
    if dev.is_dir() {
        let names = std::fs::read_to_string(&sample).expect("the sample list");
        files.extend(
            names
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(|l| dev.join(l)),
        );
    } else {
        tokensieve_core::skip!("{} not found; fixture files only", dev.display());
    }
    files.sort();
    let mut checked_files = 0;
    for (i, path) in files.iter().enumerate() {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file: Value = serde_json::from_str(&text).expect("a MaskBench file is JSON");
        let schema = file["schema"].to_string();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        match differential(&name, &schema, 20, 100 + i as u64) {
            Ok(n) => checked_files += usize::from(n > 0),
            Err(e) => failures.push(e),
        }
    }
    eprintln!(
        "{checked_files} of {} MaskBench schemas checked",
        files.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked_files > 0);
}

/// Each enum value the rest of its schema allows is served, in every
/// spelling of it; the others are not, nor `2.0` where an integer-only
/// `type` decided (draft 4 calls it no integer).
#[test]
fn enum_values_are_kept_exactly_when_the_rest_of_the_schema_allows_them() {
    let b = backend();
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            ENUM_NOT,
            &["[0.0]", "[0]", r#"{"a": 1}"#, "7", r#""x""#],
            &["[false]", r#"{"a": true}"#, "8", "null"],
        ),
        (
            ENUM_ANY_OF,
            &[r#"{"p": 2}"#, r#"{"p": [1, 2]}"#],
            &[
                r#"{"p": 1}"#,
                r#"{"p": 2.0}"#,
                r#"{"p": 2.5}"#,
                r#"{"p": [1, "x"]}"#,
                r#"{"p": {"k": null}}"#,
            ],
        ),
        (
            ENUM_ONE_OF_IF,
            &["1", r#""""#, "[0]"],
            &["2", "3", r#""a""#, r#"{"n": 1}"#],
        ),
    ];
    for (schema, valid, invalid) in cases {
        let constraint = Constraint::json_schema(schema);
        for text in valid {
            assert!(
                accepts(&b, &constraint, text.as_bytes()),
                "{schema}: {text} refused"
            );
        }
        for text in invalid {
            assert!(
                !accepts(&b, &constraint, text.as_bytes()),
                "{schema}: {text} accepted"
            );
        }
    }
}

/// Two strings of `maxLength: 4096` (as in Snowplow's schemas): too big
/// together for one lexeme, they used to send the whole schema to the
/// grammar taken apart, where a string is a chain of 4096 nested rules and
/// one mask inside it cost more than 20 million item operations. Each
/// string is now one counted lexeme (blocks of characters where it cannot
/// be counted): every token of these instances is in its mask and
/// accepted on a budget of `max_step_work` far below the default.
const LONG_STRINGS: &str = r#"{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 4096},
    "value": {"type": ["string", "null"], "minLength": 70, "maxLength": 4096}
  },
  "required": ["name", "value"],
  "additionalProperties": false
}"#;

/// Walks `text` token by token (greedy tokens of the vocabulary) as a
/// sampler would: the mask, the token's bit, the token. `Ok` with whether
/// the output may end there; `Err` when a token is not in its mask or the
/// matcher refuses one that was.
fn walk_with_masks(
    compiled: &dyn tokensieve_core::CompiledGrammar,
    vocab: &tokensieve_core::Vocabulary,
    text: &str,
) -> Result<bool, String> {
    let ids = vocab
        .encode_greedy(text.as_bytes())
        .ok_or("the vocabulary cannot spell it")?;
    let mut m = compiled.matcher();
    let mut row = vec![0u32; vocab.mask_words()];
    for (i, &id) in ids.iter().enumerate() {
        m.fill_bitmask(&mut row);
        if row[id as usize / 32] & (1 << (id % 32)) == 0 {
            return Err(format!("token {i} (id {id}) not in the mask"));
        }
        m.accept_token(id)
            .map_err(|e| format!("token {i} (id {id}) in the mask but refused: {e}"))?;
    }
    Ok(m.is_accepting())
}

#[test]
fn long_max_length_strings_cost_little_per_token() {
    let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
    let frugal = EarleyBackend::new(
        vocab.clone(),
        EarleyConfig {
            max_step_work: 20_000,
            ..EarleyConfig::default()
        },
    );
    let compiled = frugal
        .compile(&Constraint::json_schema(LONG_STRINGS))
        .unwrap_or_else(|e| panic!("{e}"));
    let name: String = "ab\\u00e9 the é😀 ".repeat(90);
    let value: String = "x\\\"12".repeat(30);
    for text in [
        format!(r#"{{"name": "{name}", "value": "{value}"}}"#),
        r#"{"name": "", "value": null}"#.to_string(),
        format!(
            r#"{{"name": "session_id", "value": "{}"}}"#,
            "1234567890".repeat(7)
        ),
    ] {
        let shown: String = text.chars().take(60).collect();
        assert_eq!(
            walk_with_masks(&*compiled, &vocab, &text),
            Ok(true),
            "{shown}"
        );
    }
}

/// Text fields as real schemas write them (`maxLength` 32,767 and 65,535),
/// past the front end's default count limit of 10,000, in an array whose
/// expanded size is past its default 16 MiB: earley counts them.
const TEXT_FIELDS: &str = r#"{
  "type": "array",
  "maxItems": 300,
  "items": {
    "type": "object",
    "properties": {
      "body": {"type": "string", "maxLength": 32767},
      "note": {"type": "string", "minLength": 2, "maxLength": 65535}
    },
    "required": ["body", "note"],
    "additionalProperties": false
  }
}"#;

#[test]
fn text_fields_of_tens_of_thousands_of_characters_keep_their_bounds() {
    let compiled = backend()
        .compile(&Constraint::json_schema(TEXT_FIELDS))
        .unwrap_or_else(|e| panic!("{e}"));
    let item = |body: usize, note: usize| {
        format!(
            r#"{{"body": "{}", "note": "{}"}}"#,
            "ab\\né".repeat(body / 4) + &"z".repeat(body % 4),
            "x".repeat(note)
        )
    };
    for (items, ok) in [
        (vec![item(32767, 2)], true),
        (vec![item(32768, 2)], false),
        (vec![item(0, 65535), item(3, 2)], true),
        (vec![item(0, 65536)], false),
        (vec![item(5, 1)], false),
        (vec![item(1, 2); 300], true),
        (vec![item(1, 2); 301], false),
    ] {
        let text = format!("[{}]", items.join(", "));
        let mut m = compiled.matcher();
        let accepted = m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting();
        let shown: String = text.chars().take(50).collect();
        assert_eq!(
            accepted,
            ok,
            "{} items, {} bytes: {shown}…",
            items.len(),
            text.len()
        );
    }
}

#[test]
fn long_max_length_strings_keep_their_bounds() {
    let b = backend();
    let schema = Constraint::json_schema(LONG_STRINGS);
    let instance = |name: &str, value: &str| format!(r#"{{"name": "{name}", "value": {value}}}"#);
    let quoted = |s: String| format!("\"{s}\"");
    // Characters, not bytes: an escape or a multi-byte character is one.
    let chars = |n: usize| -> String {
        ["a", "\\u0041", "é", "\\n", "😀"]
            .iter()
            .cycle()
            .take(n)
            .copied()
            .collect()
    };
    // (characters of name, of value (None: null), valid)
    for (name, value, ok) in [
        (4096, None, true),
        (4097, None, false),
        (0, Some(70), true),
        (0, Some(69), false),
        (1, Some(4096), true),
        (1, Some(4097), false),
        (4096, Some(4096), true),
        (64, Some(128), true),
        (63, Some(127), true),
    ] {
        let value_text = value.map_or("null".to_string(), |n| quoted(chars(n)));
        let text = instance(&chars(name), &value_text);
        assert_eq!(
            accepts(&b, &schema, text.as_bytes()),
            ok,
            "name of {name} characters, value of {value:?}"
        );
    }
}

/// Strings under constraints that no one regex says together — a pattern
/// with several variable parts and a length, two patterns, excluded values
/// and a length, a format and a length — are their intersection, one
/// automaton. On random strings over each schema's alphabet the matcher
/// must accept exactly the valid ones (`exact`), or at least never an
/// invalid one (formats, whose regexes may be narrower than the validator).
#[test]
fn intersected_string_constraints_accept_exactly_the_valid_strings() {
    let cases: [(&str, &str, bool); 5] = [
        (
            r#"{"type": "string", "pattern": "^[ab]+-[ab]+$", "minLength": 4, "maxLength": 6}"#,
            "ab-",
            true,
        ),
        (
            r#"{"type": "string", "allOf": [{"pattern": "a"}, {"pattern": "b$"}], "maxLength": 4}"#,
            "abc",
            true,
        ),
        (
            r#"{"type": "string", "not": {"enum": ["ab", "abc", "b"]}, "minLength": 1, "maxLength": 3}"#,
            "abcé",
            true,
        ),
        (
            r#"{"type": "string", "pattern": "^(a+b)*$", "not": {"const": "ab"}, "maxLength": 5}"#,
            "ab",
            true,
        ),
        (
            r#"{"type": "string", "format": "ipv4", "maxLength": 9}"#,
            "019.",
            false,
        ),
    ];
    let b = backend();
    for (schema_text, alphabet, exact) in cases {
        let schema: Value = serde_json::from_str(schema_text).unwrap();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        let compiled = b
            .compile(&Constraint::json_schema(schema_text))
            .unwrap_or_else(|e| panic!("{schema_text}: {e}"));
        let letters: Vec<char> = alphabet.chars().collect();
        let mut r = SplitMix64(7);
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..4000 {
            let len = (r.next_u64() % 11) as usize;
            let s: String = (0..len)
                .map(|_| letters[(r.next_u64() % letters.len() as u64) as usize])
                .collect();
            let text = serde_json::to_string(&s).unwrap();
            let mut m = compiled.matcher();
            let verdict = m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting();
            let valid = validator.is_valid(&Value::String(s));
            assert!(
                !verdict || valid,
                "{schema_text}: INVALID output accepted: {text}"
            );
            assert!(
                !exact || verdict == valid,
                "{schema_text}: valid {text} refused"
            );
            if verdict {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(
            accepted > 0 && refused > 0,
            "{schema_text}: {accepted} accepted, {refused} refused"
        );
    }
}

/// Under `propertyNames`, extra members have keys that are valid names
/// and not declared ones (the intersection of the two key languages).
/// Random objects: nothing invalid is accepted, and the hand-picked valid
/// ones are.
#[test]
fn extra_members_under_property_names_have_valid_names() {
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            r#"{"propertyNames": {"maxLength": 3}}"#,
            &[
                r#"{"f": {}, "foo": {}}"#,
                "{}",
                r#"{"ab": [1, {"x": null}]}"#,
            ],
            &[r#"{"fooo": 1}"#, r#"{"f": 1, "abcd": 2}"#],
        ),
        (
            r#"{"properties": {"aa": {"type": "integer"}}, "propertyNames": {"pattern": "^a+$"}}"#,
            &[
                r#"{"aa": 1}"#,
                r#"{"aa": 1, "a": "x", "aaa": 2}"#,
                r#"{"aaaa": true}"#,
            ],
            &[r#"{"aa": "x"}"#, r#"{"b": 1}"#, r#"{"aa": 1, "ab": 2}"#],
        ),
        (
            r#"{"propertyNames": {"enum": ["x", "yy"]}, "additionalProperties": {"type": "number"}}"#,
            &[r#"{"x": 1}"#, r#"{"x": 1, "yy": 2.5}"#],
            &[r#"{"z": 1}"#, r#"{"x": "1"}"#],
        ),
    ];
    members_check(&cases, &['a', 'x', 'y', 'z'], 11);
}

/// Each schema of `cases` accepts its valid texts and refuses its invalid
/// ones; and of 2,000 random objects (keys of `alphabet`, values `1`,
/// `"s"`, `2.5` or `{}`), none it accepts is invalid by the reference
/// validator (and some are accepted, some refused).
fn members_check(cases: &[(&str, &[&str], &[&str])], alphabet: &[char], seed: u64) {
    let b = backend();
    let mut r = SplitMix64(seed);
    let (mut accepted, mut refused) = (0, 0);
    for &(schema_text, accept, reject) in cases {
        let schema: Value = serde_json::from_str(schema_text).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let compiled = b
            .compile(&Constraint::json_schema(schema_text))
            .unwrap_or_else(|e| panic!("{schema_text}: {e}"));
        let verdict = |text: &str| {
            let mut m = compiled.matcher();
            m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting()
        };
        for text in accept {
            assert!(verdict(text), "{schema_text}: valid {text} refused");
        }
        for text in reject {
            assert!(!verdict(text), "{schema_text}: invalid {text} accepted");
        }
        for _ in 0..2000 {
            let members: Vec<String> = (0..r.next_u64() % 4)
                .map(|_| {
                    let key: String = (0..r.next_u64() % 5)
                        .map(|_| alphabet[(r.next_u64() % alphabet.len() as u64) as usize])
                        .collect();
                    let value = ["1", "\"s\"", "2.5", "{}"][(r.next_u64() % 4) as usize];
                    format!("\"{key}\": {value}")
                })
                .collect();
            let text = format!("{{{}}}", members.join(", "));
            if verdict(&text) {
                accepted += 1;
                let value: Value = serde_json::from_str(&text).unwrap();
                assert!(
                    validator.is_valid(&value),
                    "{schema_text}: INVALID output accepted: {text}"
                );
            } else {
                refused += 1;
            }
        }
    }
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

/// Beside named properties, members whose keys only a `patternProperties`
/// pattern names have keys in the pattern's language but the names (the
/// intersection of the two key languages) and values under the pattern's
/// schema; a named key the pattern matches takes both schemas (and where
/// they allow nothing together, cannot appear). Recursion through the
/// pattern's schema included.
#[test]
fn pattern_members_beside_named_properties() {
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (
            r#"{"properties": {"aa": {"type": "integer"}}, "patternProperties": {"^a+$": {"type": "number"}}, "additionalProperties": false}"#,
            &[
                "{}",
                r#"{"aa": 1}"#,
                r#"{"aa": 1, "a": 2.5, "aaa": 3}"#,
                r#"{"aaaa": 1}"#,
            ],
            &[
                r#"{"aa": 2.5}"#,
                r#"{"a": "s"}"#,
                r#"{"y": 1}"#,
                r#"{"aa": 1, "ax": 2}"#,
            ],
        ),
        (
            // Unanchored: any key holding an `x`; `xa` must be a string
            // and an integer, so it is never written.
            r#"{"properties": {"xa": {"type": "string"}}, "patternProperties": {"x": {"type": "integer"}}, "additionalProperties": false}"#,
            &["{}", r#"{"x": 1, "yxa": 2}"#, r#"{"axy": 1}"#],
            &[
                r#"{"xa": "s"}"#,
                r#"{"xa": 1}"#,
                r#"{"x": "s"}"#,
                r#"{"a": 1}"#,
            ],
        ),
        (
            // "alpha" is a string by `properties` and the recursive object
            // by `patternProperties`: it cannot appear; other lowercase
            // keys hold the object again.
            r##"{"$defs": {"sync": {"type": "object", "properties": {"alpha": {"type": "string"}}, "patternProperties": {"^[a-z]+$": {"$ref": "#/$defs/sync"}}}}, "$ref": "#/$defs/sync"}"##,
            &["{}", r#"{"beta": {}}"#, r#"{"beta": {"ax": {"y": {}}}}"#],
            &[
                r#"{"alpha": "x"}"#,
                r#"{"alpha": {}}"#,
                r#"{"alpha": 1}"#,
                r#"{"beta": 1}"#,
                r#"{"beta": {"alpha": {}}}"#,
            ],
        ),
        (
            // "links" is a list of redirects by `properties` and of
            // contents by `patternProperties`: each item is both, and a
            // redirect allows no key a content does, so the recursion
            // stops after one expansion; other keys from `l` list
            // contents.
            r##"{"$defs": {"content": {"type": "object", "properties": {"links": {"type": "array", "items": {"$ref": "#/$defs/redirect"}}}, "patternProperties": {"^l": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/content"}]}}}, "additionalProperties": false}, "redirect": {"type": "object", "properties": {"url": {"type": "string"}}, "additionalProperties": false}}, "$ref": "#/$defs/content"}"##,
            &[
                "{}",
                r#"{"links": []}"#,
                r#"{"links": [{}, {}]}"#,
                r#"{"lx": [{"la": []}, {}]}"#,
            ],
            &[
                r#"{"links": [{"url": "a"}]}"#,
                r#"{"links": [{"links": []}]}"#,
                r#"{"title": 1}"#,
                r#"{"lx": [1]}"#,
            ],
        ),
    ];
    members_check(&cases, &['a', 'l', 'x', 'y'], 12);
}

/// A string too long for one lexeme (its lexemes limited to 300 states
/// here), counted: one lexeme, not a chain of block rules; and every mask
/// through it, before `minLength`, in the middle (where masks are read
/// from the index of the least count) and up to `maxLength`, allows
/// exactly the tokens `accept_token` takes.
#[test]
fn masks_in_a_counted_string_match_accept_token() {
    let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
    let backend = EarleyBackend::new(
        vocab.clone(),
        EarleyConfig {
            max_dfa_states: 300,
            ..EarleyConfig::default()
        },
    );
    let schema = r#"{"type": "object", "properties": {
        "note": {"type": "string", "minLength": 3, "maxLength": 200}},
        "required": ["note"], "additionalProperties": false}"#;
    let constraint = Constraint::json_schema(schema);
    let grammar = backend
        .compile_earley(&constraint, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let shown = format!("{grammar:?}");
    // The string and its closing quote in one lexeme: no rules of blocks.
    assert!(shown.contains("rules: 2,"), "{shown}");
    let compiled: Arc<dyn tokensieve_core::CompiledGrammar> = Arc::new(grammar);
    let mut row = vec![0u32; vocab.mask_words()];
    for chars in [0, 2, 3, 30, 150, 199, 200, 201] {
        let text = format!(
            r#"{{"note": "{}"}}"#,
            "ab\\né".repeat(chars / 4) + &"x".repeat(chars % 4)
        );
        let ids = vocab.encode_greedy(text.as_bytes()).unwrap();
        let mut m = compiled.matcher();
        let mut ok = true;
        for &id in &ids {
            m.fill_bitmask(&mut row);
            for t in 0..vocab.vocab_size() as u32 {
                let took = m.fork().accept_token(t).is_ok();
                assert_eq!(
                    row[t as usize / 32] >> (t % 32) & 1 == 1,
                    took,
                    "{chars} characters: token {:?}",
                    String::from_utf8_lossy(vocab.token_bytes(t))
                );
            }
            if m.accept_token(id).is_err() {
                ok = false;
                break;
            }
        }
        assert_eq!(ok && m.is_accepting(), (3..=200).contains(&chars), "{text}");
    }
}
