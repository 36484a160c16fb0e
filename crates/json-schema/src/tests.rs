//! Keyword-by-keyword tests of the lowering: accepted and rejected texts,
//! error pointers, recursion and limits.

use super::*;
use regex_automata::meta::Regex;
use serde_json::{Value, json};
use tokensieve_core::Whitespace;
use tokensieve_core::error::Location;

fn lower_with(schema: &Value, options: &SpecOptions) -> Result<Regex, GrammarError> {
    let text = schema_to_regex(&schema.to_string(), options, 2)?;
    Ok(Regex::builder()
        .syntax(regex_automata::util::syntax::Config::new().nest_limit(256))
        .build(&format!("^(?:{text})$"))
        .expect("the lowered regex builds"))
}

fn lower(schema: Value) -> Regex {
    lower_with(&schema, &SpecOptions::default()).unwrap_or_else(|e| panic!("{schema}: {e}"))
}

#[track_caller]
fn check(schema: Value, accept: &[&str], reject: &[&str]) {
    let r = lower(schema.clone());
    for text in accept {
        assert!(r.is_match(text), "{schema} should accept {text}");
    }
    for text in reject {
        assert!(!r.is_match(text), "{schema} should reject {text}");
    }
}

fn error(schema: Value) -> GrammarError {
    match lower_with(&schema, &SpecOptions::default()) {
        Ok(_) => panic!("{schema} should not lower"),
        Err(e) => e,
    }
}

#[track_caller]
fn unsupported_at(schema: Value, pointer: &str) {
    match error(schema.clone()) {
        GrammarError::Unsupported {
            location: Location::Pointer(p),
            ..
        } => assert_eq!(p, pointer, "{schema}"),
        other => panic!("{schema}: expected Unsupported at {pointer}, got {other:?}"),
    }
}

#[track_caller]
fn invalid_at(schema: Value, pointer: &str) {
    match error(schema.clone()) {
        GrammarError::InvalidSchema {
            location: Location::Pointer(p),
            ..
        } => assert_eq!(p, pointer, "{schema}"),
        other => panic!("{schema}: expected InvalidSchema at {pointer}, got {other:?}"),
    }
}

#[test]
fn scalar_types() {
    check(
        json!({"type": "string"}),
        &[r#""""#, r#""a\"\\\n\u00e9é""#, r#""😀""#],
        &["a", r#""\x""#, "\"\u{1}\"", r#""\ud800""#],
    );
    check(
        json!({"type": "integer"}),
        &["0", "-12", "120"],
        &["01", "1.5", "-", "1e3", "-0.0"],
    );
    check(
        json!({"type": "number"}),
        &["0", "-1.5", "2e10", "1E-5", "0.25"],
        &["01", ".5", "1.", "+1", "NaN"],
    );
    check(
        json!({"type": "boolean"}),
        &["true", "false"],
        &["null", "1"],
    );
    check(json!({"type": "null"}), &["null"], &["nul", "\"null\""]);
    check(
        json!({"type": ["string", "null"]}),
        &["null", "\"x\""],
        &["1"],
    );
}

#[test]
fn enum_and_const() {
    check(
        json!({"enum": ["a", 1, null, {"k": [true, 2.5]}]}),
        &[
            r#""a""#,
            "1",
            "1.0",
            "null",
            r#"{"k":[true,2.5]}"#,
            r#"{ "k" : [ true , 2.5 ] }"#,
        ],
        &[r#""b""#, "2", r#"{"k":[true]}"#, "true"],
    );
    check(json!({"const": 1e-5}), &["1e-05", "1e-5"], &["0.0001"]);
    // Values the rest of the schema forbids are dropped.
    check(
        json!({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1}),
        &[r#""a""#],
        &["1", r#""bb""#],
    );
    assert!(matches!(
        error(json!({"type": "string", "enum": [1]})),
        GrammarError::InvalidSchema { .. }
    ));
}

#[test]
fn properties_required_and_optional_commas() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}, "d": {"type": "integer"}},
        "required": ["b", "d"],
        "additionalProperties": false
    });
    let r = lower(schema);
    let names = ["a", "b", "c", "d"];
    for mask in 0u32..16 {
        let present: Vec<&str> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, n)| *n)
            .collect();
        let text = format!(
            "{{{}}}",
            present
                .iter()
                .map(|n| format!("\"{n}\": 1"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let valid = present.contains(&"b") && present.contains(&"d");
        assert_eq!(r.is_match(&text), valid, "{text}");
    }
    for bad in [
        r#"{"b":1,"d":1,}"#,
        r#"{,"b":1,"d":1}"#,
        r#"{"b":1 "d":1}"#,
        r#"{"d":1,"b":1}"#,
        r#"{"b":"x","d":1}"#,
    ] {
        assert!(!r.is_match(bad), "{bad}");
    }
}

#[test]
fn many_optional_properties_every_subset() {
    let mut props = serde_json::Map::new();
    for i in 0..10 {
        props.insert(format!("p{i}"), json!({"type": "integer"}));
    }
    let r = lower(json!({"type": "object", "properties": props, "additionalProperties": false}));
    for mask in 0u32..1024 {
        let text = format!(
            "{{{}}}",
            (0..10)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| format!("\"p{i}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(r.is_match(&text), "{text}");
    }
    assert!(!r.is_match(r#"{"p1":1,"p0":0}"#));
    assert!(!r.is_match(r#"{"p1":1,,"p2":0}"#));
    assert!(!r.is_match(r#"{"p1":1,"p1":1}"#));
}

#[test]
fn additional_properties() {
    let declared = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    // Absent, no max_depth: no extra members (a subset).
    check(
        declared.clone(),
        &[r#"{"a":1}"#, "{}"],
        &[r#"{"a":1,"b":2}"#],
    );
    // With max_depth: extra members with any value, after the declared ones.
    let options = SpecOptions {
        max_depth: Some(2),
        ..SpecOptions::default()
    };
    let r = lower_with(&declared, &options).unwrap();
    assert!(r.is_match(r#"{"a":1,"b":{"c":[1,2]}}"#));
    assert!(r.is_match(r#"{"b":"x"}"#));
    assert!(
        !r.is_match(r#"{"a":1,"a":"x"}"#),
        "a declared name is not an extra key"
    );
    assert!(!r.is_match(r#"{"a":"x"}"#));
    // Strict: none, even with max_depth.
    let strict = SpecOptions {
        strict: true,
        max_depth: Some(2),
        ..SpecOptions::default()
    };
    assert!(
        !lower_with(&declared, &strict)
            .unwrap()
            .is_match(r#"{"a":1,"b":2}"#)
    );
    // A schema: extra members whose values satisfy it, keys not declared.
    check(
        json!({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "string"}}),
        &[
            r#"{"id":1,"x":"y","z":"w"}"#,
            r#"{"x":"y"}"#,
            r#"{"i":"y"}"#,
            r#"{"idx":"y"}"#,
        ],
        &[r#"{"x":1}"#, r#"{"id":"y"}"#, r#"{"id":1,"id":"y"}"#],
    );
    check(
        json!({"type": "object", "additionalProperties": {"type": "integer"}}),
        &["{}", r#"{"a":1,"b":2}"#],
        &[r#"{"a":"x"}"#],
    );
}

#[test]
fn pattern_properties_and_property_names() {
    check(
        json!({"type": "object", "properties": {"foo": {}, "bar": {"type": "string"}}, "patternProperties": {"^f": {"type": "integer"}}}),
        &[r#"{"foo":1,"bar":"x"}"#],
        &[r#"{"foo":"x"}"#, r#"{"fa":1}"#],
    );
    check(
        json!({"type": "object", "properties": {"ok": {"type": "integer"}, "NO": {"type": "integer"}}, "propertyNames": {"pattern": "^[a-z]+$"}}),
        &[r#"{"ok":1}"#],
        &[r#"{"NO":1}"#],
    );
}

#[test]
fn arrays() {
    check(
        json!({"type": "array", "items": {"type": "integer"}}),
        &["[]", "[1]", "[1, 2,3]"],
        &["[1,]", "[,1]", "[\"a\"]"],
    );
    check(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}),
        &["[1,2]", "[1,2,3]"],
        &["[1]", "[1,2,3,4]", "[]"],
    );
    check(
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
        &["[]", r#"["a"]"#, r#"["a",1]"#],
        &[r#"["a",1,2]"#, "[1]"],
    );
    check(
        json!({"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "null"}, "minItems": 2}),
        &[r#"["a",null]"#, r#"["a",null,null]"#],
        &[r#"["a"]"#, r#"["a",1]"#],
    );
    unsupported_at(
        json!({"type": "array", "uniqueItems": true}),
        "/uniqueItems",
    );
    check(
        json!({"type": "array", "uniqueItems": true, "maxItems": 1}),
        &["[]", "[1]"],
        &["[1,2]"],
    );
}

/// Both forms: the regex and the context-free grammar.
#[track_caller]
fn check_both(schema: Value, accept: &[&str], reject: &[&str]) {
    check(schema.clone(), accept, reject);
    check_cf(schema, accept, reject);
}

#[test]
fn contains_counts_items_at_least_min_contains() {
    check_both(
        json!({"type": "array", "contains": {"type": "integer"}}),
        &[
            "[1]",
            r#"["a", 1]"#,
            r#"[1, "a"]"#,
            r#"["a", [], 2, null]"#,
            "[1,2,3]",
        ],
        &["[]", r#"["a"]"#, r#"["a", 1.5, null]"#],
    );
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "minContains": 2}),
        &["[1,1]", "[1, 2, 1]", "[1.0, 1]", r#"[1, "x", 1, 1]"#],
        &["[]", "[1]", "[1,2,3]", "[2,1,2]"],
    );
    // Items and contains: a counted item satisfies both.
    check_both(
        json!({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}}),
        &["[5]", "[1, 7]", "[9, 1, 2]"],
        &["[]", "[1, 4]", "[1, 5.5]", r#"[1, "a", 6]"#],
    );
    // `contains: false` leaves no array; other types are untouched.
    check_both(
        json!({"contains": false}),
        &["1", "\"a\"", "{}"],
        &["[]", "[1]"],
    );
    // minContains 0: no constraint.
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "minContains": 0}),
        &["[]", "[2]", "[1]"],
        &["[1,]"],
    );
}

#[test]
fn max_contains_bounds_the_count_with_negated_fillers() {
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "maxContains": 1}),
        &["[1]", "[2, 1]", "[1, 2, 3]", r#"[1, "1", null, true, [1]]"#],
        &[
            "[]",
            "[1, 1]",
            "[2, 1, 3, 1.0]",
            "[1, 1e0]",
            "[2, 3]",
            "[1, 10e-1]",
        ],
    );
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 1}),
        &["[]", "[2]", "[1]", "[2, 1, 3]"],
        &["[1, 1]", "[1, 2, 1]"],
    );
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "minContains": 2, "maxContains": 3}),
        &["[1,1]", "[1,2,1,1]", "[2,1,2,1,2]"],
        &["[1]", "[1,1,1,1]", "[2,2]"],
    );
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 0}),
        &["[]", "[2]", "[2, 3]"],
        &["[1]", "[2, 1]"],
    );
    check_both(
        json!({"contains": {"const": 1}, "minContains": 3, "maxContains": 1}),
        &["1", "{}"],
        &["[]", "[1]", "[1,1,1]"],
    );
    check_both(
        json!({"type": "array", "items": {"type": "boolean"}, "contains": {"const": true}, "maxContains": 2}),
        &[
            "[true]",
            "[false, true, true]",
            "[true, false, false, true, false]",
        ],
        &["[false]", "[true, true, true]", "[true, 1]"],
    );
}

#[test]
fn contains_with_prefix_items_and_item_counts() {
    check_both(
        json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "contains": {"type": "string"}, "maxContains": 1}),
        &[r#"["a"]"#, r#"["a", 1, 2]"#],
        &["[]", "[1]", r#"["a", "b"]"#],
    );
    check_both(
        json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "contains": {"type": "string"}, "minContains": 2}),
        &[r#"[1, "a", "b"]"#, r#"[1, "a", 2, "b"]"#],
        &[r#"[1, "a"]"#, r#"[1, "a", 2]"#, r#"["a", "a"]"#],
    );
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "minItems": 3}),
        &["[1, 2, 3]", "[2, 3, 1]", "[1, 1, 1, 1]"],
        &["[1]", "[1, 1]", "[2, 3, 4]"],
    );
    check_both(
        json!({"type": "array", "contains": {"const": 1}, "maxContains": 2, "minItems": 1, "maxItems": 3}),
        &["[1]", "[2, 1]", "[1, 1, 2]", "[2, 1, 1]"],
        &["[]", "[2]", "[1, 1, 1]", "[1, 2, 2, 2]"],
    );
    // Separators and layout as for any array.
    check_both(
        json!({"type": "array", "contains": {"const": 1}}),
        &["[ 2 , 1 ]", "[1 ]"],
        &["[2 1]", "[,1]", "[1,]"],
    );
    // A `contains` under `allOf` with an `items` elsewhere: one conjunction.
    check_both(
        json!({"type": "array", "allOf": [{"items": {"type": "integer"}}, {"contains": {"const": 3}}]}),
        &["[3]", "[1, 3]"],
        &["[1]", r#"["3"]"#, "[3, 1.5]"],
    );
    unsupported_at(
        json!({"type": "array", "allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}]}),
        "/allOf/1/contains",
    );
    // Too many counting states: an error, not a blow-up.
    assert!(matches!(
        error(
            json!({"type": "array", "contains": {"const": 1}, "minContains": 100, "maxItems": 5000})
        ),
        GrammarError::LimitExceeded { .. }
    ));
}

#[test]
fn negated_constants_cut_integers_booleans_and_null_exactly() {
    check_both(
        json!({"not": {"const": 1}}),
        &[
            "0", "2", "-1", "1.5", "0.999", "true", "null", r#""1""#, "[1]",
        ],
        &["1", "1.0", "1e0", "10e-1", "0.1e1", "1.00"],
    );
    check_both(
        json!({"type": ["boolean", "null", "integer"], "not": {"enum": [true, null, 0, 7]}}),
        &["false", "1", "-1", "6", "8"],
        &["true", "null", "0", "-0", "7", "7.0"],
    );
}

#[test]
fn unique_items_over_constants() {
    check_both(
        json!({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true}),
        &["[]", "[true]", "[false, true]", "[ true , false ]"],
        &["[true, true]", "[false, true, false]", "[1]"],
    );
    check_both(
        json!({"type": "array", "items": {"enum": [1, 2, "a", {"k": 1}]}, "uniqueItems": true, "minItems": 2}),
        &["[1, 2]", r#"[2, "a", 1]"#, r#"[{"k": 1}, 1, "a", 2]"#],
        &[
            "[1]",
            "[1, 1]",
            "[1, 1.0]",
            "[2, 1, 2]",
            r#"[{"k": 1}, {"k": 1.0}]"#,
        ],
    );
    // A tuple of constants; 1 and 1.0 are one value.
    check_both(
        json!({"type": "array", "prefixItems": [{"const": 1}, {"enum": [1.0, 2]}], "items": false, "uniqueItems": true}),
        &["[]", "[1]", "[1, 2]"],
        &["[1, 1]", "[1, 1.0]", "[1, 2, 3]"],
    );
    check_both(
        json!({"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "items": false, "uniqueItems": true}),
        &["[]", "[true]", "[true, false]", "[false, true]"],
        &["[true, true]", "[false, false]"],
    );
    // Integer-only items keep integer spellings.
    check_both(
        json!({"type": "array", "items": {"type": "integer", "enum": [1, 2]}, "uniqueItems": true}),
        &["[2, 1]"],
        &["[1.0]", "[1, 1]"],
    );
    unsupported_at(
        json!({"type": "array", "prefixItems": [{"type": "boolean"}], "uniqueItems": true}),
        "/uniqueItems",
    );
    unsupported_at(
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 2}),
        "/uniqueItems",
    );
    assert!(matches!(
        error(
            json!({"type": "array", "items": {"enum": (0..40).collect::<Vec<_>>()}, "uniqueItems": true})
        ),
        GrammarError::LimitExceeded { .. }
    ));
    // Unique items with at most one item hold for any items.
    check_both(
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 1}),
        &["[]", r#"["a"]"#],
        &[r#"["a", "b"]"#],
    );
}

#[test]
fn string_lengths_count_characters() {
    check(
        json!({"type": "string", "minLength": 2, "maxLength": 3}),
        &[r#""ab""#, r#""é😀""#, r#""\n\"\\""#, r#""a\u00e9""#],
        &[r#""a""#, r#""abcd""#, r#""\n\n\n\n""#],
    );
}

#[test]
fn patterns_search_semantics() {
    check(
        json!({"type": "string", "pattern": "abc"}),
        &[r#""xabcx""#, r#""abc""#],
        &[r#""ab""#],
    );
    check(
        json!({"type": "string", "pattern": "^[a-z]+-\\d{2}$"}),
        &[r#""ab-12""#],
        &[r#""ab-123""#, r#""Ab-12""#, r#""ab-١٢""#],
    );
    check(
        json!({"type": "string", "pattern": "^[A-Z]", "maxLength": 3}),
        &[r#""Abc""#],
        &[r#""Abcd""#, r#""abc""#],
    );
    unsupported_at(
        json!({"properties": {"foo": {"type": "string", "pattern": "^(?=a)"}}}),
        "/properties/foo/pattern",
    );
    unsupported_at(json!({"type": "string", "pattern": "(a)\\1"}), "/pattern");
    let e = error(json!({"properties": {"foo": {"type": "string", "pattern": "(?!x)"}}}));
    assert!(
        e.to_string().contains("/properties/foo/pattern") && e.to_string().contains("look-ahead"),
        "{e}"
    );
}

#[test]
fn formats() {
    check(
        json!({"type": "string", "format": "date"}),
        &[r#""2024-02-29""#],
        &[r#""2023-02-29""#, r#""x""#],
    );
    check(
        json!({"type": "string", "format": "uuid"}),
        &[r#""123e4567-e89b-12d3-a456-426614174000""#],
        &[r#""123""#],
    );
    // Unknown formats are annotations.
    check(
        json!({"type": "string", "format": "int32"}),
        &[r#""anything""#],
        &[],
    );
}

#[test]
fn integer_and_number_bounds() {
    check(
        json!({"type": "integer", "minimum": 1, "maximum": 12}),
        &["1", "9", "10", "12"],
        &["0", "13", "-1", "1.0"],
    );
    check(
        json!({"type": "integer", "exclusiveMinimum": 0}),
        &["1", "100"],
        &["0", "-3"],
    );
    check(
        json!({"type": "integer", "minimum": 0, "exclusiveMinimum": true}),
        &["1"],
        &["0"],
    );
    check(
        json!({"type": "integer", "minimum": -2.5, "maximum": 2.5}),
        &["-2", "2"],
        &["-3", "3"],
    );
    check(
        json!({"type": "number", "minimum": 0}),
        &["0", "0.5", "3", "0.0"],
        &["-1", "-0.5"],
    );
    check(
        json!({"type": "number", "minimum": -90, "maximum": 90}),
        &["-90", "90", "45.5", "-89.999"],
        &["90.5", "-90.01", "100"],
    );
    check(
        json!({"type": "number", "exclusiveMaximum": 1, "minimum": 0}),
        &["0", "0.999999"],
        &["1", "1.0", "0.9999999"],
    );
    check(
        json!({"type": "number", "multipleOf": 1}),
        &["3", "-4"],
        &["3.5"],
    );
    check(
        json!({"type": "integer", "multipleOf": 10}),
        &["0", "30", "-120"],
        &["5", "15"],
    );
    check(
        json!({"type": "number", "minimum": 0.5}),
        &["0.5", "0.75", "3"],
        &["0.49", "0", "-0.5"],
    );
    unsupported_at(json!({"type": "number", "multipleOf": 0.25}), "/multipleOf");
    unsupported_at(json!({"type": "integer", "multipleOf": 7}), "/multipleOf");
}

/// `multipleOf` 10^-d on numbers, alone and with integer bounds, checked
/// against exact decimal arithmetic on every literal of a grid: accepted
/// literals are multiples within the bounds, and every such literal without
/// exponent and with at most d fraction digits is accepted (`0.1` and `0.01`
/// as schemas write them, doubles near 10^-d).
#[test]
fn decimal_multiple_of_on_numbers() {
    // Literals -25.0000 … 25.0000 in many spellings, as (text, value in
    // 10^-4 units, fraction digits without trailing zeros, has exponent).
    let mut literals: Vec<(String, i64, usize, bool)> = Vec::new();
    for units in (-250_000i64..=250_000)
        .step_by(997)
        .chain([0, 10_000, -10_000, 250_000, -50])
    {
        let (sign, mag) = (if units < 0 { "-" } else { "" }, units.unsigned_abs());
        let (int, frac) = (mag / 10_000, format!("{:04}", mag % 10_000));
        let significant = frac.trim_end_matches('0').len();
        for digits in [0usize, 1, 2, 3, 4, 6] {
            if digits < significant || (digits == 0 && significant > 0) {
                continue;
            }
            let text = match digits {
                0 => format!("{sign}{int}"),
                _ => format!("{sign}{int}.{:0<digits$}", frac.trim_end_matches('0')),
            };
            literals.push((text, units, significant, false));
        }
        if significant == 0 && int > 0 {
            literals.push((format!("{sign}{int}e0"), units, 0, true));
        }
    }
    let cases = [
        (json!({"type": "number", "multipleOf": 0.01}), 2, None, None),
        (
            json!({"type": "number", "multipleOf": 0.1, "minimum": 0}),
            1,
            Some((0, false)),
            None,
        ),
        (
            json!({"type": "number", "multipleOf": 0.001, "minimum": -3, "exclusiveMaximum": 7}),
            3,
            Some((-3, false)),
            Some((7, true)),
        ),
        (
            json!({"type": "number", "allOf": [{"multipleOf": 0.01}, {"multipleOf": 0.1}]}),
            1,
            None,
            None,
        ),
    ];
    for (schema, d, lo, hi) in cases {
        let r = lower(schema.clone());
        let step = 10i64.pow(4 - d as u32);
        for (text, units, significant, exponent) in &literals {
            let multiple = units % step == 0;
            let within = lo.is_none_or(|(b, excl): (i64, bool)| {
                let b = b * 10_000;
                if excl { *units > b } else { *units >= b }
            }) && hi.is_none_or(|(b, excl): (i64, bool)| {
                let b = b * 10_000;
                if excl { *units < b } else { *units <= b }
            });
            let spelled = !exponent && text.split('.').nth(1).is_none_or(|f| f.len() <= d);
            let accepted = r.is_match(text);
            if accepted {
                assert!(multiple && within, "{schema} accepts {text}");
            }
            if multiple && within && spelled {
                assert!(accepted, "{schema} rejects {text}");
            }
            assert!(*significant <= 4);
        }
    }
    // Integers are multiples of any 10^-d; numbers that must not be integers
    // with such a step are refused.
    check(
        json!({"type": "integer", "multipleOf": 0.1}),
        &["0", "-7", "12"],
        &["1.5", "1.0"],
    );
    check(
        json!({"type": "number", "multipleOf": 0.1, "minimum": 0.5}),
        &["0.5", "0.6", "12.3", "1"],
        &["0.4", "0.55", "-1"],
    );
    unsupported_at(
        json!({"type": "number", "multipleOf": 0.1, "not": {"type": "integer"}}),
        "/multipleOf",
    );
}

#[test]
fn non_integer_bounds_on_number() {
    check(
        json!({"type": "number", "minimum": 0.3}),
        &[
            "0.3", "0.30", "0.31", "0.4", "0.9999", "1", "1.5", "12", "0.300001",
        ],
        &["0.29", "0.2999", "0.0", "0", "-1", "0.03", "0.1"],
    );
    check(
        json!({"type": "number", "minimum": 2.05, "maximum": 10}),
        &["2.05", "2.1", "2.051", "3", "10", "10.0"],
        &["2.04", "2.049", "2", "2.0", "10.5", "11"],
    );
    check(
        json!({"type": "number", "minimum": 0.5, "maximum": 0.9}),
        &["0.5", "0.75", "0.9", "0.90", "0.8999"],
        &["0.49", "0.91", "0.9001", "1", "0", "-0.7"],
    );
    check(
        json!({"type": "number", "minimum": 0.5, "exclusiveMaximum": 3}),
        &["0.5", "2.999999", "1"],
        &["3", "3.0", "2.9999999", "0.4"],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": -1.5, "maximum": -0.25}),
        &["-1.49", "-1", "-0.25", "-0.250"],
        &["-1.5", "-1.50", "-2", "-0.2", "0", "-0.2499"],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": 1.1}),
        &["1.100001", "1.2", "2"],
        &["1.1", "1.10", "1.0999", "1"],
    );
    // No value: the schema is refused, not served by an empty matcher.
    let _ = error(json!({"type": "number", "minimum": 0.5, "maximum": 0}));
    // An exclusive bound spelled with more digits than a literal may carry
    // could be reached by a validator's rounding.
    unsupported_at(
        json!({"type": "number", "exclusiveMinimum": 0.1234567}),
        "/exclusiveMinimum",
    );
}

#[test]
fn any_of_one_of_all_of() {
    check(
        json!({"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        &["1", "\"a\""],
        &["null"],
    );
    check(
        json!({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
                         {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]}]}),
        &[r#"{"kind":"a","x":1}"#, r#"{"kind":"b"}"#],
        &[r#"{"kind":"c"}"#],
    );
    // Overlapping branches: each restricted to values the others reject.
    check(
        json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
        &["1.5", "-0.25"],
        &["1", "0", "-3", "1.0", "2e3"],
    );
    check(
        json!({"type": "object", "properties": {"v": {"oneOf": [{}, {"type": "string"}]}}, "required": ["v"]}),
        &[r#"{"v":1}"#, r#"{"v":null}"#],
        &[r#"{"v":"a"}"#],
    );
    unsupported_at(
        json!({"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]}),
        "/oneOf",
    );
    unsupported_at(
        json!({"oneOf": [{"format": "date"}, {"type": "string", "maxLength": 3}]}),
        "/oneOf",
    );
    check(
        json!({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"a": {"minimum": 5}, "b": {"type": "string"}}}]}),
        &[r#"{"a":5}"#, r#"{"a":7,"b":"x"}"#],
        &[r#"{"a":4}"#, "{}", r#"{"a":5,"b":1}"#],
    );
    // additionalProperties of one branch applies to the other's properties.
    check(
        json!({"allOf": [{"properties": {"a": {}}, "additionalProperties": false}, {"properties": {"b": {}}}], "type": "object"}),
        &[r#"{"a":1}"#],
        &[r#"{"b":1}"#],
    );
    // Distribution: required alternatives.
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        &[r#"{"a":1}"#, r#"{"b":1}"#, r#"{"a":1,"b":2}"#],
        &["{}"],
    );
}

/// A branch whose disjunction is still to split (a `$ref` to a `oneOf`)
/// has the kinds its branches' own `type`s allow: disjoint from an array.
#[test]
fn one_of_branch_kinds_through_a_disjunction() {
    check(
        json!({
            "$defs": {"tool": {"oneOf": [
                {"type": "string"},
                {"type": "object", "properties": {"version": {"type": "string"}}, "required": ["version"]}
            ]}},
            "oneOf": [
                {"type": "array", "items": {"$ref": "#/$defs/tool"}},
                {"$ref": "#/$defs/tool"}
            ]
        }),
        &[
            r#""1.0""#,
            r#"{"version":"x"}"#,
            r#"["a",{"version":"b"}]"#,
            "[]",
        ],
        &["1", "[1]", "{}", "null"],
    );
}

#[test]
fn one_of_overlapping_branches_are_restricted() {
    // Exactly one of the required names.
    let props =
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}});
    check(
        json!({"type": "object", "properties": props, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        &[r#"{"a":1}"#, r#"{"b":1}"#, r#"{"a":1,"c":2}"#],
        &["{}", r#"{"a":1,"b":2}"#, r#"{"c":1}"#],
    );
    // Two of three names: {a, b} and {b, c} overlap on {a, b, c}.
    check(
        json!({"type": "object", "properties": props, "oneOf": [{"required": ["a", "b"]}, {"required": ["b", "c"]}]}),
        &[r#"{"a":1,"b":2}"#, r#"{"b":1,"c":2}"#],
        &[r#"{"a":1,"b":2,"c":3}"#, r#"{"b":1}"#],
    );
    // Discriminator in `properties` without `required`: an object lacking
    // it is valid under every branch, so under none of `oneOf`.
    check(
        json!({"type": "object", "oneOf": [
            {"properties": {"kind": {"enum": ["x"]}, "n": {"type": "integer"}}},
            {"properties": {"kind": {"enum": ["y"]}, "n": {"type": "string"}}}
        ]}),
        &[
            r#"{"kind":"x"}"#,
            r#"{"kind":"y","n":"s"}"#,
            r#"{"kind":"x","n":1}"#,
            r#"{"n":1}"#,
        ],
        &[
            "{}",
            r#"{"kind":"z"}"#,
            r#"{"kind":"x","n":"s"}"#,
            r#"{"n":null}"#,
        ],
    );
    // A member valid under one branch only.
    check(
        json!({"type": "object", "required": ["v"], "oneOf": [
            {"properties": {"v": {"type": "string"}}},
            {"properties": {"v": {"minLength": 2}}}
        ]}),
        &[r#"{"v":"a"}"#, r#"{"v":1}"#, r#"{"v":null}"#],
        &[r#"{"v":"ab"}"#, r#"{"v":"abc"}"#],
    );
    // Strings anchored at different literal prefixes are disjoint.
    check(
        json!({"oneOf": [{"type": "string", "pattern": "^https?://.+$"}, {"type": "string", "pattern": "^\\./.+$"}, {"enum": ["ftp", "mailto:x", 1]}]}),
        &[
            r#""http://a""#,
            r#""https://a/b""#,
            r#""./a""#,
            r#""ftp""#,
            "1",
        ],
        &[r#""../a""#, r#""a""#, r#""http:/""#],
    );
    unsupported_at(
        json!({"oneOf": [{"type": "string", "pattern": "^https?://.+$"}, {"enum": ["./x", "https://y"]}]}),
        "/oneOf",
    );
    // Branches of listed values are disjoint when no value of one is in
    // the other (as JSON Schema compares them: 1 is 1.0, key order aside).
    check(
        json!({"oneOf": [{"enum": ["a", 1, {"k": [1], "j": 0}]}, {"enum": ["b", 2, {"k": [2]}, "1"]}]}),
        &[
            r#""a""#,
            "1",
            r#"{"k":[1],"j":0}"#,
            r#""b""#,
            "2",
            r#""1""#,
            r#"{"k":[2]}"#,
        ],
        &[r#""c""#, "3", r#"{"k":[3]}"#],
    );
    // A value in both is in neither.
    check(
        json!({"oneOf": [{"enum": ["a", 1]}, {"enum": ["b", 1.0]}]}),
        &[r#""a""#, r#""b""#],
        &["1", "1.0"],
    );
    check(
        json!({"oneOf": [{"enum": ["a", {"k": 1, "j": 2}]}, {"enum": [{"j": 2, "k": 1}, 3]}]}),
        &[r#""a""#, "3"],
        &[r#"{"k":1,"j":2}"#, r#"{"j":2,"k":1}"#],
    );
    unsupported_at(
        json!({"type": "string", "oneOf": [{"pattern": "^ab"}, {"pattern": "^a"}]}),
        "/oneOf",
    );
    // Negating `properties` unfolds a recursive schema: a limit, not a hang.
    assert!(
        lower_with(
            &json!({"$defs": {"t": {"properties": {"c": {"$ref": "#/$defs/t"}}}},
                    "oneOf": [{"$ref": "#/$defs/t"}, {"type": "object"}]}),
            &SpecOptions::default()
        )
        .is_err()
    );
}

#[test]
fn not() {
    check(
        json!({"not": {"type": "string"}}),
        &["1", "null", "[]"],
        &["\"a\""],
    );
    check(
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "not": {"required": ["a"]}}),
        &[r#"{"b":1}"#, "{}"],
        &[r#"{"a":1}"#],
    );
    check(
        json!({"type": "string", "enum": ["a", "b"], "not": {"const": "a"}}),
        &[r#""b""#],
        &[r#""a""#],
    );
    check(
        json!({"type": "integer", "not": {"minimum": 3}}),
        &["2", "-5"],
        &["3", "4"],
    );
    unsupported_at(json!({"type": "string", "not": {"pattern": "a"}}), "/not");
    // String constants are excluded by a complement; the first characters of
    // the words are spelled one way only.
    check(
        json!({"type": "string", "not": {"enum": ["US", "U", "a\"b"]}}),
        &[
            r#""""#,
            r#""UK""#,
            r#""USA""#,
            r#""X""#,
            r#""a\nb""#,
            r#""Ub""#,
            r#""x\u0041""#,
        ],
        &[r#""US""#, r#""U""#, r#""a\"b""#, r#""\u0055S""#, "1"],
    );
    check(
        json!({"not": {"enum": [true, null, "x"]}}),
        &["false", "1", r#""y""#, "[]"],
        &["true", "null", r#""x""#],
    );
    unsupported_at(
        json!({"type": "string", "maxLength": 3, "not": {"const": "a"}}),
        "/not/const",
    );
    assert!(matches!(
        error(json!({"not": {}})),
        GrammarError::InvalidSchema { .. }
    ));
}

#[test]
fn refs_and_recursion() {
    check(
        json!({"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}}),
        &["[1,2]"],
        &["[0]"],
    );
    check(
        json!({"definitions": {"a~b/c": {"type": "null"}}, "properties": {"x": {"$ref": "#/definitions/a~0b~1c"}}, "required": ["x"], "type": "object"}),
        &[r#"{"x":null}"#],
        &[r#"{"x":1}"#],
    );
    invalid_at(
        json!({"properties": {"x": {"$ref": "#/definitions/missing"}}}),
        "/properties/x/$ref",
    );
    unsupported_at(json!({"$ref": "other.json#/x"}), "/$ref");
    let tree = json!({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    });
    unsupported_at(tree.clone(), "/$defs/node/properties/kids/items/$ref");
    let options = SpecOptions {
        max_depth: Some(2),
        ..SpecOptions::default()
    };
    let r = lower_with(&tree, &options).unwrap();
    assert!(r.is_match(r#"{"v":1}"#));
    assert!(r.is_match(r#"{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}"#));
    assert!(!r.is_match(r#"{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[{"v":4}]}]}]}"#));
}

#[test]
fn malformed_schemas_are_errors_with_pointers() {
    assert!(matches!(
        schema_to_regex("{not json", &SpecOptions::default(), 0),
        Err(GrammarError::InvalidSchema { .. })
    ));
    invalid_at(
        json!({"properties": {"a": {"type": "strnig"}}}),
        "/properties/a/type",
    );
    invalid_at(
        json!({"properties": {"a": {"minLength": -1}}}),
        "/properties/a/minLength",
    );
    invalid_at(
        json!({"properties": {"a": {"enum": "x"}}}),
        "/properties/a/enum",
    );
    invalid_at(json!({"properties": {"a": 3}}), "/properties/a");
    // A key holding `~` or `/` is escaped in the pointer.
    invalid_at(
        json!({"properties": {"a~b/c": {"type": "strnig"}}}),
        "/properties/a~0b~1c/type",
    );
    invalid_at(
        json!({"definitions": {"x/~y": {"minLength": -1}}, "properties": {"a": {"$ref": "#/definitions/x~1~0y"}}}),
        "/definitions/x~1~0y/minLength",
    );
    invalid_at(json!({"required": "a"}), "/required");
    unsupported_at(
        json!({"properties": {"a": {"type": "string", "not": {"pattern": "a"}}}}),
        "/properties/a/not",
    );
}

#[test]
fn if_then_else() {
    let schema = json!({
        "type": "object",
        "properties": {"country": {"type": "string"}, "code": {"type": "string"}},
        "if": {"properties": {"country": {"const": "US"}}, "required": ["country"]},
        "then": {"properties": {"code": {"pattern": "^[0-9]{5}$"}}},
        "else": {"properties": {"code": {"pattern": "^[A-Z][0-9][A-Z]$"}}}
    });
    let accept = [
        r#"{"country":"US","code":"12345"}"#,
        r#"{"country":"CA","code":"K1A"}"#,
        r#"{"code":"K1A"}"#,
        r#"{"country":"US"}"#,
    ];
    let reject = [
        r#"{"country":"US","code":"K1A"}"#,
        r#"{"country":"CA","code":"12345"}"#,
        r#"{"code":"12345"}"#,
    ];
    check(schema.clone(), &accept, &reject);
    check_cf(schema, &accept, &reject);
    // A missing branch is `true`.
    check(
        json!({"if": {"type": "integer"}, "then": {"minimum": 10}}),
        &["10", "\"a\"", "1.5", "null"],
        &["9"],
    );
    check(
        json!({"type": "integer", "if": {"minimum": 10}, "else": {"maximum": 3}}),
        &["10", "11", "3", "-4"],
        &["5", "9"],
    );
    // Its branches are outside the scope tracking of `unevaluated*`.
    unsupported_at(
        json!({"if": {"properties": {"a": {}}}, "then": {"required": ["a"]}, "unevaluatedProperties": false}),
        "/unevaluatedProperties",
    );
    // `if` whose negation cannot be written: an error naming it.
    unsupported_at(
        json!({"type": "string", "if": {"pattern": "a"}, "then": {"maxLength": 3}}),
        "/if/pattern",
    );
}

#[test]
fn limits_not_blow_ups() {
    let e = error(json!({"type": "string", "maxLength": 1_000_000}));
    assert!(matches!(e, GrammarError::LimitExceeded { .. }), "{e}");
    let e = error(json!({"type": "array", "maxItems": 1_000_000}));
    assert!(matches!(e, GrammarError::LimitExceeded { .. }), "{e}");
    let e = error(json!({"enum": (0..20_000).collect::<Vec<_>>()}));
    assert!(matches!(e, GrammarError::LimitExceeded { .. }), "{e}");
    // Deep nesting: an error, not a stack overflow.
    let mut deep = json!({"type": "integer"});
    for _ in 0..120 {
        deep = json!({"type": "array", "items": deep});
    }
    assert!(schema_to_regex(&deep.to_string(), &SpecOptions::default(), 0).is_err());
    // Exponential recursion under max_depth hits a limit, it does not hang.
    let wide = json!({"$defs": {"n": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}, "c": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"});
    let options = SpecOptions {
        max_depth: Some(30),
        ..SpecOptions::default()
    };
    assert!(schema_to_regex(&wide.to_string(), &options, 0).is_err());
}

/// Objects of many optional members nested in one another multiply their
/// text (each member is written about log2(n) + 2 times at each level):
/// the length is bounded before the text is written, so the lowering
/// neither builds hundreds of MiB nor takes seconds to refuse it.
#[test]
fn nested_optional_members_are_refused_before_they_are_written() {
    let mut defs = serde_json::Map::new();
    defs.insert("level_0".into(), json!({"type": "string"}));
    for level in 1..10 {
        let props: serde_json::Map<String, Value> = (0..12)
            .map(|i| {
                (
                    format!("member_{i}"),
                    json!({"$ref": format!("#/$defs/level_{}", level - 1)}),
                )
            })
            .collect();
        defs.insert(
            format!("level_{level}"),
            json!({"type": "object", "properties": props}),
        );
    }
    let schema = json!({"$defs": defs, "type": "object", "properties": {"outer": {"$ref": "#/$defs/level_9"}}});
    let e = schema_to_regex(&schema.to_string(), &SpecOptions::default(), 0).unwrap_err();
    let GrammarError::LimitExceeded { what, knob, .. } = &e else {
        panic!("{e}");
    };
    assert_eq!(knob, "LoweringLimits::max_regex_len");
    assert!(what.contains("counted before writing it"), "{e}");
    assert!(what.starts_with("regex length for /$defs/level_4 "), "{e}");
}

#[test]
fn annotations_and_unknown_keywords_are_ignored() {
    check(
        json!({"title": "t", "description": "d", "$comment": "c", "examples": [1], "default": 3, "deprecated": true, "x-foo": {"type": "string"}, "readOnly": true, "type": "integer"}),
        &["3"],
        &["\"a\""],
    );
}

#[test]
fn dependent_required() {
    check(
        json!({"type": "object", "properties": {"card": {"type": "integer"}, "billing": {"type": "string"}}, "dependentRequired": {"card": ["billing"]}}),
        &["{}", r#"{"billing":"x"}"#, r#"{"card":1,"billing":"x"}"#],
        &[r#"{"card":1}"#],
    );
}

#[test]
fn whitespace_policies() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}, "b": {"type": "object"}}, "required": ["a", "b"]});
    let compact = SpecOptions {
        whitespace: Whitespace::Compact,
        ..SpecOptions::default()
    };
    let r = lower_with(&schema, &compact).unwrap();
    assert!(r.is_match(r#"{"a":[1,2],"b":{}}"#));
    assert!(!r.is_match(r#"{"a": [1,2],"b":{}}"#));
    let pretty = SpecOptions {
        whitespace: Whitespace::Fixed {
            item_separator: ",".into(),
            key_separator: ": ".into(),
            indent: Some(2),
        },
        ..SpecOptions::default()
    };
    let r = lower_with(&schema, &pretty).unwrap();
    // Python: json.dumps({"a": [1, 2], "b": {}}, indent=2)
    assert!(r.is_match("{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}"));
    assert!(!r.is_match(r#"{"a": [1, 2], "b": {}}"#));
    let spaced = SpecOptions {
        whitespace: Whitespace::Fixed {
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            indent: None,
        },
        ..SpecOptions::default()
    };
    let r = lower_with(&schema, &spaced).unwrap();
    assert!(r.is_match(r#"{"a": [1, 2], "b": {}}"#));
    assert!(!r.is_match(r#"{"a":[1,2],"b":{}}"#));
    // Any: bounded runs between tokens, none outside.
    let r = lower(schema);
    assert!(r.is_match("{ \"a\" :\n[1 ,2],\t\"b\":{  }}"));
    assert!(!r.is_match(" {\"a\":[],\"b\":{}}"));
    assert!(
        !r.is_match("{\"a\":[],   \"b\":{}}"),
        "max_whitespace is 2 in these tests"
    );
}

#[test]
fn json_object() {
    assert!(matches!(
        json_object_regex(&SpecOptions::default(), 0),
        Err(GrammarError::Unsupported { .. })
    ));
    let options = SpecOptions {
        max_depth: Some(2),
        ..SpecOptions::default()
    };
    let text = json_object_regex(&options, 1).unwrap();
    let r = Regex::new(&format!("^(?:{text})$")).unwrap();
    assert!(r.is_match(r#"{"a": [1, "x", null], "b": {"c": true}}"#));
    assert!(r.is_match("{}"));
    assert!(!r.is_match(r#"{"a": [[1]]}"#), "depth 3");
    assert!(!r.is_match("[]"));
}

#[test]
fn unconstrained_values_are_bounded_json() {
    let r = lower(json!({"type": "object", "properties": {"meta": {}}, "required": ["meta"]}));
    assert!(r.is_match(r#"{"meta":{"x":[1,2]}}"#));
    assert!(r.is_match(r#"{"meta":"s"}"#));
    assert!(!r.is_match(r#"{"meta":nope}"#));
}

#[test]
fn pattern_properties_alone_generate_members_with_matching_keys() {
    let schema = json!({
        "type": "object",
        "patternProperties": {"^[a-f0-9]{4}$": {"type": "integer"}},
        "additionalProperties": false,
        "minProperties": 1
    });
    check(
        schema,
        &[r#"{"ab12":1}"#, r#"{"ab12": 1, "0000": -3}"#],
        &[
            "{}",
            r#"{"ab1":1}"#,
            r#"{"ab12":"1"}"#,
            r#"{"abcd5":1}"#,
            r#"{"AB12":1}"#,
        ],
    );
    // Unanchored: a key that contains a match.
    check(
        json!({"patternProperties": {"x": {"type": "boolean"}}, "additionalProperties": false}),
        &["{}", r#"{"axb":true}"#],
        &[r#"{"ab":true}"#, r#"{"x":1}"#],
    );
    // Named properties beside a pattern: no pattern members in the regular
    // lowering, only the named ones (the context-free one writes them: the
    // earley crate's `pattern_members_beside_named_properties`).
    check(
        json!({"properties": {"id": {"type": "integer"}}, "patternProperties": {"^a": {"type": "string"}}, "additionalProperties": false}),
        &["{}", r#"{"id":1}"#],
        &[r#"{"ab":"x"}"#],
    );
    // Beside a name the pattern does not match, the context-free lowering's
    // key is the pattern's alone (no intersection: the reference grammar
    // takes it).
    check_cf(
        json!({"properties": {"id": {"type": "integer"}}, "patternProperties": {"^a": {"type": "string"}}, "additionalProperties": false}),
        &["{}", r#"{"id":1}"#, r#"{"ab":"x"}"#, r#"{"id":1,"a":"y"}"#],
        &[r#"{"ab":1}"#, r#"{"b":"x"}"#, r#"{"id":"x"}"#],
    );
}

#[test]
fn integral_constants_of_integer_only_schemas_are_spelled_as_integers() {
    // Draft 4 calls `1.0` no integer; `1` is one in every draft.
    check(
        json!({"type": "integer", "enum": [1, 2.0]}),
        &["1", "2"],
        &["1.0", "2.0", "1e0"],
    );
    check(json!({"const": 1}), &["1", "1.0"], &["2"]);
}

/// The context-free lowering as a grammar (checked by the reference
/// recognizer).
fn grammar_of(
    schema: Value,
    options: &SpecOptions,
) -> Result<tokensieve_grammar::Grammar, GrammarError> {
    schema_to_grammar(&schema.to_string(), options, 2, &LoweringLimits::default())?
        .to_grammar(&tokensieve_grammar::GbnfLimits::default())
}

#[track_caller]
fn check_cf(schema: Value, accept: &[&str], reject: &[&str]) {
    let g = grammar_of(schema.clone(), &SpecOptions::default())
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    for text in accept {
        assert!(g.accepts(text.as_bytes()), "{schema} should accept {text}");
    }
    for text in reject {
        assert!(!g.accepts(text.as_bytes()), "{schema} should reject {text}");
    }
}

/// A recursive schema's grammar stands for rules by characters of planes 15
/// and 16: a schema that could write one is refused, wherever the
/// character or its escape is (a key, a constant, a pattern), and a long
/// description without a backslash is no such string.
#[test]
fn recursive_schemas_that_could_write_a_placeholder_are_refused() {
    let with = |extra: Value| {
        let mut schema = json!({
            "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
            "type": "object",
            "properties": {"t": {"$ref": "#/$defs/t"}},
            "description": "x".repeat(10_000)
        });
        schema["properties"]["extra"] = extra;
        grammar_of(schema, &SpecOptions::default())
    };
    assert!(with(json!({"type": "string", "pattern": "^a+\\\\b$"})).is_ok());
    for extra in [
        json!({"const": "a\u{F0001}"}),
        json!({"const": "\u{10FFFD}"}),
        json!({"type": "string", "pattern": "\\u{F0000}"}),
        json!({"type": "string", "pattern": "\\uDB80\\uDC00"}),
        json!({"type": "string", "pattern": "\\u{10ffff}"}),
        json!({"type": "object", "properties": {"k\u{F0000}": {}}}),
    ] {
        let e = with(extra.clone()).expect_err(&extra.to_string());
        assert!(e.to_string().contains("planes 15 and 16"), "{extra}: {e}");
    }
}

#[test]
fn context_free_mode_makes_rules_of_recursion_and_free_values() {
    let tree = json!({
        "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 2}},
        "$ref": "#/$defs/t"
    });
    // The regex lowering refuses it; the grammar goes to any depth.
    assert!(matches!(
        lower_with(&tree, &SpecOptions::default()),
        Err(GrammarError::Unsupported { .. })
    ));
    let deep = format!("{}{}", "[".repeat(30), "]".repeat(30));
    check_cf(
        tree,
        &["[]", "[[],[[]]]", &deep],
        &["[[],[],[]]", "[1]", "[[]"],
    );
    // No recursion, no free values, no extras: no rules, the regex itself.
    let closed = schema_to_grammar(
        r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}"#,
        &SpecOptions::default(),
        2,
        &LoweringLimits::default(),
    )
    .unwrap();
    assert!(closed.rules.is_empty(), "{:?}", closed.rule_sources);
    // Free values and extra members nest to any depth.
    let deep = format!(r#"{{"a": 1, "b": {}0{}}}"#, "[".repeat(30), "]".repeat(30));
    check_cf(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
        &[
            r#"{"a": 1}"#,
            r#"{"a": 1, "x": {"y": [null]}}"#,
            r#"{"x": 2}"#,
            &deep,
            "{}",
        ],
        &[
            r#"{"a": "1"}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"x": 2, "a": 1}"#,
        ],
    );
    // `max_depth` still bounds what it bounded.
    let bounded = SpecOptions {
        max_depth: Some(2),
        ..SpecOptions::default()
    };
    let g = grammar_of(json!({}), &bounded).unwrap();
    assert!(g.accepts(b"[[[1]]]") && !g.accepts(b"[[[[1]]]]"));
}

/// A recursive `$ref` met inside a conjunction (an `anyOf` branch merged
/// with its parent, two member schemas of one key) is a rule where the
/// others only name types the target lies within, nothing where they allow
/// none of its types, and otherwise expanded once more, which ends where
/// the other conjuncts forbid the recursion's way back.
#[test]
fn recursion_inside_conjunctions() {
    let deep = format!("{}{{}}{}", r#"{"kids": ["#.repeat(20), "]}".repeat(20));
    check_cf(
        json!({
            "$defs": {"node": {
                "type": "object",
                "properties": {
                    "kids": {"type": "array", "items": {"type": "object", "anyOf": [{"$ref": "#/$defs/node"}]}},
                    "name": {"type": "string"}
                },
                "additionalProperties": false
            }},
            "$ref": "#/$defs/node"
        }),
        &["{}", r#"{"kids": [{"name": "a"}, {"kids": []}]}"#, &deep],
        &[
            r#"{"kids": [1]}"#,
            r#"{"kids": [{"x": 1}]}"#,
            r#"{"kids": [{"kids": [2]}]}"#,
        ],
    );
    // A string can never be the object: no items at all.
    check_cf(
        json!({
            "$defs": {"node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"type": "string", "anyOf": [{"$ref": "#/$defs/node"}]}}}
            }},
            "$ref": "#/$defs/node"
        }),
        &["{}", r#"{"kids": []}"#],
        &[r#"{"kids": [{}]}"#, r#"{"kids": ["a"]}"#],
    );
    // Items that are the recursive object and more (`allOf` of a `$ref`
    // back to it and `required`): the items' sub-schema, met inside itself,
    // is a rule.
    let deep = format!(
        r#"{{"children": [{}{{"text": "b"}}{}]}}"#,
        r#"{"text": "a", "children": ["#.repeat(15),
        "]}".repeat(15)
    );
    check_cf(
        json!({
            "$defs": {"item": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "children": {"type": "array", "items": {"allOf": [
                        {"$ref": "#/$defs/item"},
                        {"required": ["text"]}
                    ]}}
                },
                "additionalProperties": false
            }},
            "$ref": "#/$defs/item"
        }),
        &[
            "{}",
            r#"{"children": [{"text": "a"}]}"#,
            r#"{"children": [{"text": "a", "children": [{"text": "b"}]}]}"#,
            &deep,
        ],
        &[
            r#"{"children": [{}]}"#,
            r#"{"children": [{"text": "a", "children": [{}]}]}"#,
            r#"{"children": [{"text": 1}]}"#,
        ],
    );
    // The root and more, inside the root: that sub-schema is its own rule
    // (a number has no properties to count).
    check_cf(
        json!({"properties": {"next": {"$ref": "#", "minProperties": 1}}}),
        &[
            "{}",
            r#"{"next": {"x": 1}}"#,
            r#"{"next": {"next": {"x": 1}}}"#,
            r#"{"next": 1}"#,
            "1",
        ],
        &[
            r#"{"next": {}}"#,
            r#"{"next": {"next": {}}}"#,
            r#"{"next": {"next": {"next": {}}}}"#,
        ],
    );
    // A recursive branch of a `oneOf` has its target's types: disjoint
    // from a string and an array.
    check_cf(
        json!({
            "$defs": {"el": {
                "type": "object",
                "properties": {"kids": {"oneOf": [
                    {"type": "string"},
                    {"$ref": "#/$defs/el"},
                    {"type": "array", "items": {"$ref": "#/$defs/el"}}
                ]}},
                "additionalProperties": false
            }},
            "$ref": "#/$defs/el"
        }),
        &[
            "{}",
            r#"{"kids": "a"}"#,
            r#"{"kids": {"kids": []}}"#,
            r#"{"kids": [{"kids": "b"}, {}]}"#,
        ],
        &[r#"{"kids": 1}"#, r#"{"kids": [1]}"#, r#"{"kids": null}"#],
    );
    // A key matched by `properties` and `patternProperties` (a recursive
    // `$ref` conjoined with a string, or with a list of redirects) is in
    // the earley crate's `pattern_members_beside_named_properties`: the
    // keys only the pattern names are an intersection there, which the
    // reference grammar does not take.
}

#[test]
fn context_free_mode_errors_name_where() {
    let unique =
        json!({"properties": {"next": {"$ref": "#", "type": "array", "uniqueItems": true}}});
    match grammar_of(unique, &SpecOptions::default()) {
        Err(GrammarError::Unsupported { location, .. }) => {
            assert_eq!(
                location,
                Location::Pointer("/properties/next/uniqueItems".into())
            );
        }
        other => panic!("{other:?}"),
    }
    let endless = json!({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"});
    let e = grammar_of(endless, &SpecOptions::default()).unwrap_err();
    assert!(e.to_string().contains("/$defs/a"), "{e}");
    let limits = LoweringLimits {
        max_rules: 1,
        ..LoweringLimits::default()
    };
    let two = json!({
        "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}}},
        "properties": {"a": {"$ref": "#/$defs/a"}, "b": {}}
    });
    let e = schema_to_grammar(&two.to_string(), &SpecOptions::default(), 2, &limits).unwrap_err();
    assert!(matches!(e, GrammarError::LimitExceeded { .. }), "{e}");
}

#[test]
fn max_properties_bounds_extra_members() {
    let schema =
        json!({"type": "object", "maxProperties": 2, "additionalProperties": {"type": "integer"}});
    let accept = ["{}", r#"{"a":1}"#, r#"{"a":1,"b":2}"#];
    let reject = [r#"{"a":1,"b":2,"c":3}"#, r#"{"a":"x"}"#];
    check(schema.clone(), &accept, &reject);
    check_cf(schema, &accept, &reject);
    check_cf(
        json!({"maxProperties": 1, "minProperties": 1}),
        &[r#"{"a":[1,{"b":null}]}"#],
        &["{}", r#"{"a":1,"b":2}"#],
    );
    // Beside declared members, as many extras as they leave room for if
    // all were present (one here; two when the first member is an extra).
    let beside = json!({"properties": {"a": {}}, "maxProperties": 2, "additionalProperties": {"type": "integer"}});
    let accept = [
        "{}",
        r#"{"a":1}"#,
        r#"{"b":1}"#,
        r#"{"a":"x","b":2}"#,
        r#"{"b":1,"c":2}"#,
    ];
    let reject = [
        r#"{"a":1,"b":2,"c":3}"#,
        r#"{"b":1,"c":2,"d":3}"#,
        r#"{"b":"x"}"#,
    ];
    check(beside.clone(), &accept, &reject);
    check_cf(beside, &accept, &reject);
    // A declared member that cannot appear leaves room for none.
    let never = json!({"properties": {"a": false}, "maxProperties": 1, "additionalProperties": {"type": "integer"}});
    let accept = ["{}", r#"{"b":1}"#];
    let reject = [r#"{"b":1,"c":2}"#, r#"{"a":1}"#];
    check(never.clone(), &accept, &reject);
    check_cf(never, &accept, &reject);
}

#[test]
fn unevaluated_properties_see_their_own_scope() {
    // Evaluated by the schema object itself.
    check(
        json!({"type": "object", "properties": {"foo": {"type": "string"}}, "unevaluatedProperties": false}),
        &[r#"{"foo":"a"}"#, "{}"],
        &[r#"{"foo":"a","bar":1}"#, r#"{"bar":1}"#],
    );
    // Members nothing evaluates are valid under the schema.
    check(
        json!({"type": "object", "properties": {"foo": {}}, "unevaluatedProperties": {"type": "integer"}}),
        &[r#"{"foo":"a","x":1}"#, r#"{"x":1,"y":2}"#],
        &[r#"{"x":"a"}"#, r#"{"foo":"a","x":[]}"#],
    );
    // By an `allOf` branch, a `$ref` target, `additionalProperties`.
    check(
        json!({"allOf": [{"properties": {"bar": {}}}], "properties": {"foo": {}}, "unevaluatedProperties": false}),
        &[r#"{"bar":1,"foo":2}"#, r#"{"bar":1}"#],
        &[r#"{"bar":1,"foo":2,"baz":3}"#, r#"{"baz":3}"#],
    );
    check(
        json!({"$defs": {"d": {"properties": {"bar": {}}}}, "$ref": "#/$defs/d", "unevaluatedProperties": false}),
        &[r#"{"bar":1}"#],
        &[r#"{"baz":1}"#],
    );
    check(
        json!({"allOf": [{"additionalProperties": {"type": "integer"}}], "unevaluatedProperties": false}),
        &[r#"{"x":1}"#],
        &[r#"{"x":"a"}"#],
    );
    // By the `anyOf`/`oneOf` branch that holds (one at a time: narrower
    // than the specification when several hold, never wider).
    let any = json!({
        "anyOf": [
            {"properties": {"a": {}}, "required": ["a"]},
            {"properties": {"b": {}}, "required": ["b"]}
        ],
        "unevaluatedProperties": false
    });
    check(
        any,
        &[r#"{"a":1}"#, r#"{"b":1}"#],
        &[r#"{"a":1,"c":1}"#, r#"{"a":1,"b":2}"#],
    );
    // By a `dependentSchemas` schema whose trigger is present.
    check(
        json!({"properties": {"foo": {}}, "dependentSchemas": {"foo": {"properties": {"bar": {}}}}, "unevaluatedProperties": false}),
        &[r#"{"foo":1,"bar":2}"#, r#"{"foo":1}"#],
        &[r#"{"bar":2}"#],
    );
    // Not by what a `not` evaluates.
    check(
        json!({"type": "object", "not": {"not": {"properties": {"a": {}}}}, "unevaluatedProperties": false}),
        &["{}"],
        &[r#"{"a":1}"#],
    );
}

#[test]
fn nested_unevaluated_properties_keep_to_their_scope() {
    // The inner keyword does not see the outer `properties`.
    check(
        json!({"allOf": [{"properties": {"foo": {}}, "unevaluatedProperties": false}], "properties": {"bar": {}}}),
        &[r#"{"foo":1}"#, "{}"],
        &[r#"{"bar":1}"#, r#"{"foo":1,"bar":2}"#],
    );
    // Two schemas of one member, merged: each keyword sees its own.
    check(
        json!({
            "properties": {"a": {"properties": {"x": {}}, "unevaluatedProperties": false}},
            "allOf": [{"properties": {"a": {"properties": {"y": {}}}}}],
            "required": ["a"]
        }),
        &[r#"{"a":{"x":1}}"#, r#"{"a":{}}"#],
        &[r#"{"a":{"y":1}}"#, r#"{"a":{"x":1,"y":2}}"#],
    );
    // An `anyOf` branch's keyword sees that branch only.
    check(
        json!({
            "properties": {"foo": {}},
            "anyOf": [{"properties": {"bar": {}}, "unevaluatedProperties": false}]
        }),
        &[r#"{"bar":1}"#],
        &[r#"{"foo":1}"#, r#"{"foo":1,"bar":2}"#],
    );
    // A keyword inside evaluates everything it was given: the outer one
    // then has nothing left (context-free mode: extra members of any value).
    check_cf(
        json!({"allOf": [{"unevaluatedProperties": true}], "unevaluatedProperties": false}),
        &[r#"{"x": 1}"#, "{}"],
        &["[]1"],
    );
    check_cf(
        json!({
            "allOf": [{"properties": {"foo": {}}, "unevaluatedProperties": {"type": "integer"}}],
            "unevaluatedProperties": false
        }),
        &[r#"{"foo": "a", "x": 1}"#],
        &[r#"{"foo": "a", "x": "b"}"#],
    );
    // A keyword in a `oneOf` branch whose negation the restriction needs.
    check(
        json!({
            "oneOf": [
                {"properties": {"a": {}}, "required": ["a"]},
                {"required": ["b"], "properties": {"b": {}}, "unevaluatedProperties": true}
            ],
            "unevaluatedProperties": false
        }),
        &[r#"{"a":1}"#, r#"{"b":1}"#],
        &[r#"{"a":1,"b":2}"#, r#"{"c":1}"#],
    );
}

#[test]
fn unevaluated_items_see_their_own_scope() {
    check(
        json!({"prefixItems": [{"type": "integer"}], "unevaluatedItems": false}),
        &["[1]", "[]"],
        &["[1,2]", "[\"a\"]"],
    );
    check(
        json!({"prefixItems": [{}], "unevaluatedItems": {"type": "string"}}),
        &["[1,\"a\",\"b\"]", "[1]"],
        &["[1,2]"],
    );
    check(
        json!({"allOf": [{"prefixItems": [true, true]}], "prefixItems": [true], "unevaluatedItems": false}),
        &["[1,2]"],
        &["[1,2,3]"],
    );
    check(
        json!({"allOf": [{"items": {"type": "integer"}}], "unevaluatedItems": false}),
        &["[1,2,3]"],
        &["[\"a\"]"],
    );
    // The inner keyword sees one item evaluated, not the outer two.
    check(
        json!({"allOf": [{"prefixItems": [true], "unevaluatedItems": false}], "prefixItems": [true, true]}),
        &["[1]", "[]"],
        &["[1,2]"],
    );
    // A nested keyword evaluates every item for the outer one.
    check(
        json!({"allOf": [{"unevaluatedItems": {"type": "integer"}}], "unevaluatedItems": false}),
        &["[1,2]"],
        &["[\"a\"]"],
    );
    // Not by what a `not` evaluates.
    check(
        json!({"type": "array", "not": {"not": {"prefixItems": [true]}}, "unevaluatedItems": false}),
        &["[]"],
        &["[1]"],
    );
}

#[test]
fn unevaluated_keywords_beside_untracked_evaluation_are_errors() {
    unsupported_at(
        json!({"if": {"properties": {"a": {}}}, "unevaluatedProperties": false}),
        "/unevaluatedProperties",
    );
    unsupported_at(
        json!({"allOf": [{"contains": {"type": "string"}, "minContains": 0}], "unevaluatedItems": false}),
        "/unevaluatedItems",
    );
    unsupported_at(
        json!({"$dynamicRef": "#x", "unevaluatedProperties": false}),
        "/$dynamicRef",
    );
    // Out of scope: a `contains` beside the keyword's schema object only.
    check(
        json!({"allOf": [{"contains": {"type": "string"}, "minContains": 0}, {"prefixItems": [true], "unevaluatedItems": false}]}),
        &["[1]"],
        &["[1,2]"],
    );
}

#[test]
fn negations_of_negations_keep_every_keyword() {
    // The sub-schema a double negation conjoins keeps its own combinators.
    check(
        json!({"not": {"not": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}),
        &["\"a\"", "1"],
        &["null", "[]"],
    );
    check(
        json!({"not": {"not": {"not": {"type": "string"}}}}),
        &["1", "null"],
        &["\"a\""],
    );
    // Two cases expanding one `$ref`: each gets it.
    check(
        json!({
            "$defs": {"x": {"type": "string"}},
            "not": {"allOf": [{"not": {"$ref": "#/$defs/x"}}, {"not": {"$ref": "#/$defs/x"}}]}
        }),
        &["\"a\""],
        &["null", "1"],
    );
}

#[test]
fn not_one_of_is_none_or_several() {
    check(
        json!({"type": "object", "properties": {"c": {}, "d": {}}, "not": {"oneOf": [{"required": ["c"]}, {"required": ["d"]}]}}),
        &["{}", r#"{"c":1,"d":2}"#],
        &[r#"{"c":1}"#, r#"{"d":2}"#],
    );
    // Applicators that allow everything have no negation case: the
    // restriction of overlapping `oneOf` branches stays exact.
    check(
        json!({
            "type": "object",
            "properties": {"b": {}, "xx": {}},
            "oneOf": [
                {"required": ["b"], "properties": {"b": true}},
                {"required": ["xx"], "patternProperties": {"x": true}, "additionalProperties": true}
            ]
        }),
        &[r#"{"b":1}"#, r#"{"xx":1}"#],
        &[r#"{"b":1,"xx":2}"#, "{}"],
    );
}

/// Objects nested in objects, each with optional members and extras
/// allowed: each level writes its members in several copies, so written in
/// place the innermost object would be copied once per level above it. A
/// long sub-schema's language is a rule, written once.
#[test]
fn long_nested_objects_are_rules_written_once() {
    let mut schema = json!({"type": "string"});
    for level in 0..5 {
        let mut props = serde_json::Map::new();
        for i in 0..6 {
            props.insert(format!("m{level}_{i}"), json!({"type": "integer"}));
        }
        props.insert("inner".into(), schema);
        for i in 6..9 {
            props.insert(format!("m{level}_{i}"), json!({"type": "string"}));
        }
        schema = json!({"properties": props});
    }
    let g = schema_to_grammar(
        &schema.to_string(),
        &SpecOptions::default(),
        2,
        &LoweringLimits::default(),
    )
    .unwrap();
    let written = g.root.len() + g.rules.iter().map(String::len).sum::<usize>();
    let level_rules = g
        .rule_sources
        .iter()
        .filter(|s| s.ends_with("/properties/inner"))
        .count();
    assert!(level_rules >= 2, "{:?}", g.rule_sources);
    assert!(written < 100_000, "{written} bytes of regex");
    let doc = r#"{"m4_0": 1, "inner": {"inner": {"inner": {"inner": {"m0_3": 7, "inner": "s", "zz": [1]}}, "m2_8": "x"}}, "m4_7": "y"}"#;
    check_cf(
        schema,
        &[doc, "{}", r#"{"inner": {}}"#],
        &[
            &doc.replace(r#""inner": "s""#, r#""inner": 5"#),
            &doc.replace(r#""m0_3": 7"#, r#""m0_3": "7""#),
            r#"{"inner": {"m3_0": 1.5}}"#,
        ],
    );
}

/// A sub-schema of a kilobyte or so of regex (an object of six optional
/// strings) is already a rule of its own, written once however often the
/// members above it are copied; a small one (an integer) stays in place.
#[test]
fn mid_sized_sub_schemas_are_rules_too() {
    let strings: serde_json::Map<String, Value> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|k| (k.to_string(), json!({"type": "string"})))
        .collect();
    let schema = json!({
        "properties": {"x": {"properties": strings}, "y": {"type": "integer"}}
    });
    let g = schema_to_grammar(
        &schema.to_string(),
        &SpecOptions::default(),
        2,
        &LoweringLimits::default(),
    )
    .unwrap();
    assert!(
        g.rule_sources.iter().any(|s| s == "/properties/x"),
        "{:?}",
        g.rule_sources
    );
    assert!(
        !g.rule_sources.iter().any(|s| s == "/properties/y"),
        "{:?}",
        g.rule_sources
    );
    check_cf(
        schema,
        &[
            r#"{"x": {"b": "1", "f": ""}, "y": 2}"#,
            r#"{"y": 2, "z": {}}"#,
            "{}",
        ],
        &[r#"{"x": {"b": 1}}"#, r#"{"x": {"b": "1"}, "y": "2"}"#],
    );
}

/// A grammar of rules whose rules alone sum past the size limit is
/// refused before they are linked (the linked grammar holds each whole),
/// and one within it links.
#[test]
fn rules_past_the_grammar_size_are_refused_before_linking() {
    let schema = json!({
        "$defs": {"node": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 40},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
        }}},
        "$ref": "#/$defs/node"
    });
    let g = schema_to_grammar(
        &schema.to_string(),
        &SpecOptions::default(),
        2,
        &LoweringLimits::default(),
    )
    .unwrap();
    let roomy = tokensieve_grammar::GbnfLimits::default();
    assert!(g.to_grammar(&roomy).is_ok());
    // The smallest limit each rule's grammar is made within: their sum
    // is past it.
    let regexes: Vec<String> = std::iter::once(g.root.clone())
        .chain((0..g.rules.len()).map(|i| g.rule_regex(i).into_owned()))
        .collect();
    let within = |size: usize| {
        let limits = tokensieve_grammar::GbnfLimits {
            max_grammar_size: size,
            ..roomy.clone()
        };
        let parts: Result<Vec<_>, _> = regexes
            .iter()
            .map(|r| tokensieve_grammar::compose::from_regex(r, &limits))
            .collect();
        parts.ok()
    };
    let (mut lo, mut hi) = (1, roomy.max_grammar_size);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if within(mid).is_some() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let sum: usize = within(lo).unwrap().iter().map(|p| p.size()).sum();
    assert!(sum > lo, "{sum} {lo}");
    let small = tokensieve_grammar::GbnfLimits {
        max_grammar_size: lo,
        ..roomy
    };
    match g.to_grammar(&small) {
        Err(GrammarError::LimitExceeded { what, knob, .. }) => {
            assert_eq!(knob, "GbnfLimits::max_grammar_size");
            assert!(what.contains("rules)"), "{what}");
        }
        other => panic!("{other:?}"),
    }
}

/// A pattern with several variable parts under a length, two patterns,
/// excluded values under a length: regular mode refuses them, naming the
/// keyword; context-free mode makes each string one intersection rule of
/// its regexes (matched by a backend's product automaton), whose own text
/// matches nothing, and which a grammar of rules cannot hold.
#[test]
fn strings_under_constraints_no_one_regex_says_are_intersections() {
    let intersections = |schema: &Value| {
        let g = schema_to_grammar(
            &schema.to_string(),
            &SpecOptions::default(),
            2,
            &LoweringLimits::default(),
        )
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
        let err = g.to_grammar(&tokensieve_grammar::GbnfLimits::default());
        assert!(
            g.intersections.is_empty() || matches!(err, Err(GrammarError::Unsupported { .. })),
            "{schema}: {err:?}"
        );
        for (rule, _) in &g.intersections {
            let own = Regex::new(&format!("^(?:{})$", g.rules[*rule])).unwrap();
            assert!(!own.is_match("\"ab\"") && !own.is_match("") && !own.is_match("\"\""));
        }
        g.intersections
            .iter()
            .map(|(_, r)| r.len())
            .collect::<Vec<_>>()
    };
    let pattern_and_length =
        json!({"type": "string", "pattern": "^[a-z]+-[a-z]+$", "maxLength": 8});
    unsupported_at(pattern_and_length.clone(), "/pattern");
    assert_eq!(intersections(&pattern_and_length), [2]);
    let two_patterns =
        json!({"allOf": [{"pattern": "^a"}, {"pattern": "[0-9]"}], "type": "string"});
    unsupported_at(two_patterns.clone(), "/allOf/1/pattern");
    assert_eq!(intersections(&two_patterns), [2]);
    let excluded = json!({"type": "string", "not": {"const": "ab"}, "maxLength": 3});
    assert_eq!(intersections(&excluded), [2]);
    // One regex says it: no intersection.
    let folded = json!({"type": "string", "pattern": "^x[a-z]*$", "maxLength": 8});
    assert_eq!(intersections(&folded), Vec::<usize>::new());
    // The same constraints twice in one document: one rule.
    let twice = json!({
        "type": "object",
        "properties": {"a": pattern_and_length.clone(), "b": pattern_and_length}
    });
    assert_eq!(intersections(&twice), [2]);
}

#[test]
fn enum_values_are_checked_against_the_schema_objects_themselves() {
    // A negated enum of containers has no case of its own, and a negation
    // of a negation keeps its sub-schema: the values decide.
    check_both(
        json!({"allOf": [{"enum": [[0.0]]}, {"not": {"enum": [[false]]}}]}),
        &["[0.0]", "[0]", "[ 0.0 ]"],
        &["[false]", "[]"],
    );
    check_both(
        json!({"allOf": [{"enum": [[{"foo": "bar"}]]}, {"not": {"not": {"enum": [[{"foo": "bar"}]]}}}]}),
        &[r#"[{"foo": "bar"}]"#],
        &[r#"[{"foo": "baz"}]"#],
    );
    check_both(
        json!({"allOf": [{"enum": [{"bar": {}, "foo": []}]}, {"not": {"properties": {"bar": {"type": "string"}, "foo": {"type": "integer"}}}}]}),
        &[r#"{"bar": {}, "foo": []}"#],
        &[],
    );
    check_both(
        json!({"allOf": [{"enum": [{"foo": false}]}, {"not": {"enum": [6, "foo", [], true, {"foo": 12}]}}]}),
        &[r#"{"foo": false}"#],
        &[],
    );
    check_both(
        json!({"allOf": [{"enum": [{"a": 1.0}]}, {"not": {"enum": [{"a": true}]}}]}),
        &[r#"{"a": 1.0}"#, r#"{"a": 1}"#],
        &[r#"{"a": true}"#],
    );
    // Negations the lowering cannot express at all.
    check_both(
        json!({"allOf": [{"enum": [[1, "foo", true]]}, {"not": {"items": false}}]}),
        &[r#"[1, "foo", true]"#],
        &[],
    );
    check_both(
        json!({"allOf": [{"enum": [7, 8]}, {"not": {"multipleOf": 2}}]}),
        &["7"],
        &["8"],
    );
    check_both(
        json!({"allOf": [{"enum": [1.5, 1, 3]}, {"not": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}}]}),
        &["1.5", "3"],
        &["1"],
    );
    check_both(
        json!({"allOf": [{"enum": [1.1, 2]}, {"not": {"type": "integer"}}]}),
        &["1.1"],
        &["2", "2.0"],
    );
}

#[test]
fn enum_values_the_rest_forbids_are_excluded() {
    check_both(
        json!({
            "enum": [[0], [false], 3, 4, "a"],
            "not": {"enum": [[false]]},
            "anyOf": [
                {"type": "array"},
                {"type": "integer", "multipleOf": 2},
                {"type": "string", "maxLength": 0}
            ]
        }),
        &["[0]", "4"],
        &["[false]", "3", "\"a\""],
    );
    // A member's value under a negated `properties`: its own schema is an
    // enum, the negation comes from outside it.
    check_both(
        json!({
            "type": "object",
            "properties": {"a": {"enum": [1, 2, [3]]}},
            "required": ["a"],
            "additionalProperties": false,
            "not": {"properties": {"a": {"anyOf": [{"const": 1}, {"type": "array"}]}}}
        }),
        &[r#"{"a": 2}"#],
        &[r#"{"a": 1}"#, r#"{"a": [3]}"#],
    );
    // Overlapping `oneOf` branches: a value valid under both is out.
    check_both(
        json!({"enum": [1, 2, 3, "a", [0]], "oneOf": [{"type": "integer"}, {"minimum": 2}]}),
        &["1", "\"a\"", "[0]"],
        &["2", "3"],
    );
    check_both(
        json!({"enum": [1, 5, "x", "y"], "if": {"type": "integer"}, "then": {"minimum": 3}, "else": {"const": "y"}}),
        &["5", "\"y\""],
        &["1", "\"x\""],
    );
    check_both(
        json!({
            "$defs": {"small": {"maximum": 2}},
            "enum": [{"n": 1}, {"n": 3}, {"m": 1}],
            "properties": {"n": {"$ref": "#/$defs/small"}},
            "required": ["n"]
        }),
        &[r#"{"n": 1}"#],
        &[r#"{"n": 3}"#, r#"{"m": 1}"#],
    );
}

#[test]
fn enum_values_under_an_integer_only_type_are_spelled_as_integers() {
    // Draft 4 calls `1.0` no integer: where an integer-only `type` decided
    // a value, it is spelled as an integer only.
    check_both(
        json!({"enum": [1.0, 2.5], "anyOf": [{"type": "integer"}, {"const": 2.5}]}),
        &["1", "2.5"],
        &["1.0", "2.50"],
    );
    check_both(
        json!({"enum": [1, 2.5], "not": {"const": 3}}),
        &["1", "1.0", "2.5"],
        &["3"],
    );
}

#[test]
fn enum_values_the_check_cannot_decide_go_by_the_lowering() {
    // `unevaluatedProperties` is left to the lowering; a value another
    // keyword rejects is out either way.
    check_both(
        json!({
            "enum": [{"a": 1}, {"b": 1}, {"a": "x"}],
            "properties": {"a": {"type": "integer"}},
            "unevaluatedProperties": false
        }),
        &[r#"{"a": 1}"#],
        &[r#"{"b": 1}"#, r#"{"a": "x"}"#],
    );
    // Undecided values where the rest cannot be lowered: the values found
    // valid stay, the undecided ones go.
    check_both(
        json!({"enum": ["a b", "ab", 1], "not": {"type": "string", "pattern": "\\s"}}),
        &["1"],
        &["\"a b\"", "\"ab\""],
    );
    // Nothing found valid: the lowering's own error stands.
    unsupported_at(json!({"enum": ["ab"], "not": {"pattern": "\\s"}}), "/not");
}

/// A chain of `$ref`s nests the lowering as deep as `max_schema_depth`
/// with a shallow document. On a thread of 256 KiB of stack a chain within
/// the limit lowers (the lowering runs on a stack of its own), and one at it
/// is a `LimitExceeded` error, not a stack overflow.
#[test]
fn a_deep_ref_chain_lowers_on_a_small_stack() {
    let chain = |n: usize| {
        let mut defs = serde_json::Map::new();
        for i in 0..n {
            let next = if i + 1 == n {
                json!({"type": "integer"})
            } else {
                json!({"$ref": format!("#/$defs/d{}", i + 1)})
            };
            defs.insert(
                format!("d{i}"),
                json!({"type": "object", "properties": {"a": next}, "required": ["a"]}),
            );
        }
        json!({"$defs": defs, "$ref": "#/$defs/d0"}).to_string()
    };
    let lower = |n: usize| {
        let text = chain(n);
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                schema_to_grammar(
                    &text,
                    &SpecOptions::default(),
                    0,
                    &LoweringLimits::default(),
                )
                .map(|_| ())
            })
            .unwrap()
            .join()
            .expect("no stack overflow")
    };
    let limit = LoweringLimits::default().max_schema_depth as usize;
    lower(limit - 1).expect("a chain within the limit lowers");
    let e = lower(limit).unwrap_err();
    assert!(matches!(e, GrammarError::LimitExceeded { .. }), "{e}");
}

/// The key of an object's extra members (any string but its property
/// names) is a long regex: in context-free mode it is one verbatim rule
/// per set of names, kept unparsed by the piece split in the place of each
/// reference to it, and the language is the same.
#[test]
fn an_extra_members_key_is_one_verbatim_rule_per_set_of_names() {
    let names: Vec<String> = (0..40).map(|i| format!("property_{i}")).collect();
    let object = |value: Value| {
        let properties: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| (n.clone(), json!({"type": "string"})))
            .collect();
        json!({"type": "object", "properties": properties, "additionalProperties": value})
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "a": object(json!({"type": "integer"})),
            "b": object(json!({"type": "boolean"})),
        },
        "additionalProperties": false
    });
    let g = schema_to_grammar(
        &schema.to_string(),
        &SpecOptions::default(),
        2,
        &LoweringLimits::default(),
    )
    .unwrap();
    assert_eq!(g.verbatim.len(), 1, "{:?}", g.rule_sources);
    let (rule, verbatim) = g.verbatim[0].clone();
    assert!(!verbatim.nullable);
    // The names go with the text, for a backend that builds the key from
    // them.
    let keys = verbatim.keys.expect("the names of the other keys");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(keys.names(), sorted);
    assert!(g.rules[rule].len() >= 512, "{} bytes", g.rules[rule].len());
    let pieces = g.to_pieces().unwrap();
    let mut in_place = 0;
    for (i, alternatives) in pieces.rules.iter().enumerate() {
        for piece in alternatives.iter().flatten() {
            assert_ne!(
                *piece,
                tokensieve_grammar::pieces::Piece::Rule(rule + 1),
                "rule {i} refers to it"
            );
            if i != rule + 1 && matches!(piece, tokensieve_grammar::pieces::Piece::Verbatim { .. })
            {
                in_place += 1;
            }
        }
    }
    // An extra member first or after another, in each object.
    assert!(in_place >= 2, "{in_place} in place");
    check_cf(
        schema,
        &[
            r#"{"a":{"property_1":"x","property_12x":3},"b":{"other":true}}"#,
            r#"{"a":{"property_":1,"property_400":2}}"#,
        ],
        &[
            r#"{"a":{"property_1":3}}"#,
            r#"{"b":{"property_39":true}}"#,
            r#"{"a":{"x":true}}"#,
        ],
    );
}

/// Lists of authors or references (an `anyOf` of two `$ref`s), the `anyOf`
/// said once or twice. (WashingtonPost's schemas say it twice for one
/// member, by `properties` and by a `patternProperties` matching every key.)
fn credits(twice: bool) -> Value {
    let author: serde_json::Map<String, Value> = (0..8)
        .map(|i| (format!("a{i}"), json!({"type": "string"})))
        .chain([("name".to_string(), json!({"type": "string"}))])
        .collect();
    let either = json!({"anyOf": [{"$ref": "#/$defs/author"}, {"$ref": "#/$defs/ref"}]});
    let items = if twice {
        json!({"type": "object", "allOf": [either, either]})
    } else {
        json!({"type": "object", "anyOf": either["anyOf"]})
    };
    let list = json!({"type": "array", "items": items});
    json!({
        "$defs": {
            "author": {"type": "object", "properties": author, "required": ["name"],
                       "additionalProperties": false},
            "ref": {"type": "object", "properties": {"id": {"type": "string"}},
                    "required": ["id"], "additionalProperties": false}
        },
        "type": "object",
        "properties": {"by": list, "photos_by": list}
    })
}

/// `X ∧ X = X`: a disjunction met twice in one conjunction is split once,
/// and its branches (the rest adding no more than a `type` they keep to)
/// are lowered as nodes: each `$ref` target a rule written once. Split into
/// every pair of branches, `credits(true)` wrote its author object in
/// eight copies.
#[test]
fn a_repeated_disjunction_is_split_once_into_shared_rules() {
    let written = |schema: &Value| {
        let g = schema_to_grammar(
            &schema.to_string(),
            &SpecOptions::default(),
            2,
            &LoweringLimits::default(),
        )
        .unwrap();
        let text = g.root.len() + g.rules.iter().map(String::len).sum::<usize>();
        (text, g.rule_sources)
    };
    let (once, _) = written(&credits(false));
    let (twice, sources) = written(&credits(true));
    assert!(sources.iter().any(|s| s == "/$defs/author"), "{sources:?}");
    assert!(twice < once + once / 2, "{twice} bytes against {once}");
    let valid = r#"{"by": [{"a3": "x", "name": "n"}, {"id": "1"}], "photos_by": []}"#;
    let wrong = [
        r#"{"by": [{"id": "1", "name": "n"}]}"#,
        r#"{"by": [{"a3": "x"}]}"#,
        r#"{"photos_by": [[]]}"#,
    ];
    check_both(credits(true), &[valid, "{}"], &wrong);
}

/// Disjunctions that only look alike are both kept: an `anyOf` and a
/// `oneOf` of the same branches, and the same `$ref` text under two bases.
#[test]
fn disjunctions_alike_in_text_only_are_both_kept() {
    let branches = json!([{"type": "integer"}, {"type": "number"}]);
    check_both(
        json!({"allOf": [{"anyOf": branches}, {"oneOf": branches}]}),
        &["1.5", "-0.25"],
        &["1", "0", "\"a\""],
    );
    // A plain `$ref`, and one with more beside it.
    for x in [
        json!({"$ref": "#/$defs/x"}),
        json!({"$ref": "#/$defs/x", "maxLength": 5}),
    ] {
        check_both(
            json!({
                "$defs": {"x": {"type": "string"}},
                "allOf": [
                    {"$id": "http://example.com/inner", "$defs": {"x": {"type": "integer"}},
                     "anyOf": [x, {"type": "null"}]},
                    {"anyOf": [x, {"type": "null"}]}
                ]
            }),
            &["null"],
            &["1", "\"s\""],
        );
    }
}

/// A `$ref` fragment inside a sub-schema with an `$id` of its own points
/// into that resource (the root's `$defs/x` is another schema); one the
/// resource does not hold is read from the root, as real schemas mean it
/// (Github_medium o47944 points from inside `"id": "schema/resource"` to
/// `#/definitions/resource/...`). An anchor-like `$id` is no resource.
#[test]
fn a_fragment_inside_an_embedded_resource_is_the_resources() {
    let schema = json!({
        "$defs": {"x": {"type": "string"}, "only_root": {"type": "boolean"}},
        "definitions": {"x": {"type": "string"}},
        "type": "object",
        "properties": {
            "inner": {"$id": "http://example.com/inner", "$defs": {"x": {"type": "integer"}},
                      "$ref": "#/$defs/x"},
            "legacy": {"id": "legacy", "definitions": {"x": {"type": "null"}},
                       "properties": {"y": {"$ref": "#/definitions/x"}}},
            "root": {"$id": "http://example.com/r", "$ref": "#/$defs/only_root"},
            "anchor": {"$id": "#here", "$defs": {"x": {"type": "integer"}}, "$ref": "#/$defs/x"}
        }
    });
    check_both(
        schema,
        &[
            r#"{"inner": 1, "legacy": {"y": null}, "root": true, "anchor": "s"}"#,
            "{}",
        ],
        &[
            r#"{"inner": "s"}"#,
            r#"{"legacy": {"y": "s"}}"#,
            r#"{"root": "s"}"#,
            r#"{"anchor": 1}"#,
        ],
    );
    // The key spelled with an escape is the same keyword.
    let escaped = r##"{"$defs": {"x": {"type": "string"}}, "properties": {"inner":
        {"\u0024id": "http://example.com/inner", "$defs": {"x": {"type": "integer"}},
         "$ref": "#/$defs/x"}}}"##;
    let text = schema_to_regex(escaped, &SpecOptions::default(), 2).unwrap();
    let r = Regex::new(&format!("^(?:{text})$")).unwrap();
    assert!(r.is_match(r#"{"inner":1}"#) && !r.is_match(r#"{"inner":"s"}"#));
}

/// In draft 7 and older every keyword beside a `$ref` is ignored, `$id`
/// included: the `$ref` resolves against the enclosing base (here to the
/// number), not against the sibling `$id` (which would name the string and
/// accept `"a"`, an invalid instance). From the JSON-Schema-Test-Suite's
/// draft 7 `ref.json`, as the instance generator found it.
#[test]
fn a_sibling_id_of_a_ref_is_ignored_in_draft_7() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "http://localhost:1234/sibling_id/base/",
        "definitions": {
            "foo": {"$id": "http://localhost:1234/sibling_id/foo.json", "type": "string"},
            "base_foo": {"$id": "foo.json", "type": "number"}
        },
        "allOf": [{"$id": "http://localhost:1234/sibling_id/", "$ref": "foo.json"}]
    });
    check_both(schema, &["1", "2.5"], &[r#""a""#, r#""text""#]);
}

/// Asked to leave an object's other keys unwritten (for a backend that
/// builds them from their names), the lowering makes their verbatim rule
/// of the names and a stand-in text; the rule's regex, written when asked
/// for, is the key the lowering writes otherwise: the same grammar.
#[test]
fn other_keys_left_unwritten_are_the_written_ones() {
    let properties: serde_json::Map<String, Value> = (0..40)
        .map(|i| (format!("alpha_{i}"), json!({"type": "integer"})))
        .chain([("ключ".to_string(), json!({"type": "integer"}))])
        .collect();
    let schema = json!({"properties": properties, "additionalProperties": {"type": "string"}});
    let lowered = |unwritten: bool| {
        let limits = LoweringLimits {
            other_keys_unwritten: unwritten,
            ..LoweringLimits::default()
        };
        schema_to_grammar(&schema.to_string(), &SpecOptions::default(), 2, &limits).unwrap()
    };
    let (written, unwritten) = (lowered(false), lowered(true));
    let keys_rule = |g: &SchemaGrammar| {
        let (i, v) = g.verbatim.first().expect("a verbatim rule of the keys");
        assert!(v.keys.is_some());
        *i
    };
    let (w, u) = (keys_rule(&written), keys_rule(&unwritten));
    assert!(unwritten.rules[u].starts_with(tokensieve_automata::json_keys::STAND_IN_MARK));
    assert!(!written.rules[w].starts_with(tokensieve_automata::json_keys::STAND_IN_MARK));
    assert!(unwritten.rules[u].len() < written.rules[w].len());
    let same = |a: &str, b: &str| {
        let (a, b) = (
            Regex::new(&format!("^(?:{a})$")).unwrap(),
            Regex::new(&format!("^(?:{b})$")).unwrap(),
        );
        for key in [
            "\"alpha_3\"",
            "\"alpha_\"",
            "\"alpha_40\"",
            "\"ключ\"",
            "\"клю\"",
            "\"\"",
        ] {
            assert_eq!(a.is_match(key), b.is_match(key), "{key}");
        }
    };
    same(&unwritten.rule_regex(u), &written.rule_regex(w));
    let grammars = [written, unwritten].map(|g| {
        g.to_grammar(&tokensieve_grammar::GbnfLimits::default())
            .unwrap()
    });
    for text in [
        r#"{"alpha_3": 1}"#,
        r#"{"alpha_3": "x"}"#,
        r#"{"alpha_": "x"}"#,
        r#"{"alpha_": 1}"#,
        r#"{"ключ": 1, "клю": "x"}"#,
        r#"{"": "y"}"#,
    ] {
        let verdicts = grammars.each_ref().map(|g| g.accepts(text.as_bytes()));
        assert_eq!(verdicts[0], verdicts[1], "{text}");
    }
    assert!(grammars[1].accepts(br#"{"alpha_": "x"}"#));
    assert!(!grammars[1].accepts(br#"{"alpha_3": "x"}"#));
}

/// A `$ref` may name an embedded resource by its URI (its `$id` resolved
/// against the base of the resource around it), and a sub-schema by an
/// anchor (`$anchor`, `$dynamicAnchor`, or an `$id` of the form `#name`)
/// declared in the resource the reference names (a reference inside a
/// resource is resolved against it): the same anchor name in two
/// resources is two schemas.
#[test]
fn references_name_resources_by_uri_and_schemas_by_anchor() {
    let schema = json!({
        "$id": "http://example.com/root.json",
        "type": "object",
        "properties": {
            "plain": {"$ref": "#int"},
            "legacy": {"$ref": "#legacy"},
            "nested": {"$ref": "http://example.com/dir/nested.json#str"},
            "relative": {"$ref": "dir/nested.json#/$defs/b"},
            "child": {"$ref": "child1#same"},
            "dynamic": {"$ref": "#dyn"},
            "inner": {"$ref": "dir/nested.json#/$defs/c"},
            "sibling": {"$ref": "dir/nested.json#/$defs/o"}
        },
        "$defs": {
            "i": {"$anchor": "int", "type": "integer"},
            "l": {"$id": "#legacy", "type": "null"},
            "n": {"$id": "dir/nested.json", "$defs": {
                "a": {"$anchor": "str", "type": "string"},
                "b": {"type": "boolean"},
                "c": {"$ref": "#str"},
                "o": {"$ref": "other.json"}
            }},
            "ot": {"$id": "dir/other.json", "type": "null"},
            "c": {"$id": "child1", "allOf": [
                {"$id": "child2", "$anchor": "same", "type": "number"},
                {"$anchor": "same", "type": "string"}
            ]},
            "d": {"$dynamicAnchor": "dyn", "const": 7}
        }
    });
    check_both(
        schema,
        &[
            r#"{"plain": 1, "legacy": null, "nested": "s", "relative": true, "child": "s", "dynamic": 7, "inner": "s", "sibling": null}"#,
            "{}",
        ],
        &[
            r#"{"plain": "s"}"#,
            r#"{"legacy": 1}"#,
            r#"{"nested": 1}"#,
            r#"{"relative": "s"}"#,
            r#"{"child": 1}"#,
            r#"{"dynamic": 8}"#,
            r#"{"inner": 1}"#,
            r#"{"sibling": 1}"#,
        ],
    );
    // An anchor inside a resource is not the document's; a name nobody
    // declares, a URI no resource has, a name declared twice in one
    // resource and two resources of one URI are errors naming where.
    for (schema, at, says) in [
        (
            json!({"$ref": "#a", "$defs": {"r": {"$id": "r.json", "$anchor": "a"}}}),
            "/$ref",
            "does not declare",
        ),
        (json!({"$ref": "#nowhere"}), "/$ref", "does not declare"),
        (
            json!({"$ref": "other.json#/x", "$defs": {"r": {"$id": "r.json"}}}),
            "/$ref",
            "another document",
        ),
        (
            json!({"$ref": "#a", "$defs": {"x": {"$anchor": "a"}, "y": {"$anchor": "a"}}}),
            "/$defs/y",
            "declared twice",
        ),
        (
            json!({"$ref": "x.json", "$defs": {"a": {"$id": "x.json"}, "b": {"$id": "./x.json"}}}),
            "/$defs/b",
            "also the resource at",
        ),
    ] {
        let e = grammar_of(schema, &SpecOptions::default()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(at) && text.contains(says), "{text}");
    }
}

/// The values of an `enum` beside a `$ref` are checked against the
/// reference's target where the reference is written: inside an embedded
/// resource, that resource's definition or anchor (the root's of the same
/// path or name is another schema).
#[test]
fn enum_values_meet_references_in_their_resource() {
    let schema = json!({
        "$defs": {"x": {"type": "string"}, "y": {"$anchor": "y", "type": "string"}},
        "properties": {
            "p": {"$id": "http://example.com/p", "$defs": {"x": {"type": "integer"}},
                  "properties": {"a": {"$ref": "#/$defs/x"}},
                  "enum": [{"a": 1}, {"a": "s"}]},
            "q": {"$id": "http://example.com/q", "$defs": {"y": {"$anchor": "y", "type": "integer"}},
                  "properties": {"a": {"$ref": "#y"}},
                  "enum": [{"a": 2}, {"a": "t"}]}
        }
    });
    check_both(
        schema,
        &[r#"{"p": {"a": 1}, "q": {"a": 2}}"#, "{}"],
        &[r#"{"p": {"a": "s"}}"#, r#"{"q": {"a": "t"}}"#],
    );
}

/// Several `patternProperties` patterns give members of each where no key
/// matches two of them (decided on their automata, not only their
/// prefixes); patterns that share keys give none (a shared key's value
/// would have to meet both schemas), as before.
#[test]
fn disjoint_key_patterns_each_give_members() {
    check_both(
        json!({
            "type": "object",
            "patternProperties": {
                "^a_": {"type": "integer"},
                "^b_": {"type": "string"},
                "^c:([0-3]):x$": {"type": "boolean"},
                "^c:([0-3]):y$": {"type": "null"}
            },
            "additionalProperties": false
        }),
        &[
            "{}",
            r#"{"a_1": 1, "b_x": "s"}"#,
            r#"{"b_": "t", "a_": 2, "c:2:x": true, "c:0:y": null}"#,
        ],
        &[
            r#"{"a_1": "s"}"#,
            r#"{"b_x": 1}"#,
            r#"{"c:2:x": null}"#,
            r#"{"c:4:x": true}"#,
            r#"{"d": 1}"#,
        ],
    );
    // "ab" matches both: no members at all.
    check_both(
        json!({
            "type": "object",
            "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}},
            "additionalProperties": false
        }),
        &["{}"],
        &[r#"{"ab": 1}"#, r#"{"ab": "s"}"#, r#"{"a": 1}"#],
    );
}

/// Extra members of an object with no name to keep out (no declared,
/// required or forbidden name) take any key, escapes included, as an
/// object of any value does; beside declared names, a key that spells one
/// escaped is still no extra key.
#[test]
fn extra_keys_with_no_name_to_keep_out_may_be_escaped() {
    check_both(
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        &[
            r#"{"Vendor\\Namespace\\": "src/"}"#,
            r#"{"q\"": "y", "\u00e9t\u00E9": "z", "tab\there": ""}"#,
            "{}",
        ],
        &[r#"{"a\\b": 1}"#, r#"{"\u12": "x"}"#, r#"{"\x": "x"}"#],
    );
    check_both(
        json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "additionalProperties": {"type": "string"}
        }),
        &[r#"{"n": 1, "m": "s"}"#],
        &[r#"{"\u006e": "s"}"#, r#"{"n": "s"}"#],
    );
}

/// Whether the automata's fast parser reads `text` (and then as
/// regex-syntax reads it: a difference fails the test).
fn reads_fast_as_regex_syntax_reads(text: &str) -> bool {
    let Some(hir) = tokensieve_automata::syntax::parse_fast_only(text, 256) else {
        return false;
    };
    let slow = regex_syntax::ParserBuilder::new()
        .utf8(true)
        .nest_limit(256)
        .build()
        .parse(text);
    assert_eq!(Ok(&hir), slow.as_ref(), "{text}");
    true
}

/// What the JSON Schema lowering writes for MaskBench's schemas (every
/// fifth file of `../shared/data/maskbench-dev`, when it is there):
/// nearly all of it is read fast, and as regex-syntax reads it.
#[test]
fn maskbench_lowerings_read_as_regex_syntax_reads_them() {
    use crate::{LoweringLimits, schema_to_grammar};
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/maskbench-dev");
    if !dir.is_dir() {
        tokensieve_core::skip!("{} not found", dir.display());
        return;
    }
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("the MaskBench folder")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    paths.sort();
    let limits = LoweringLimits {
        max_repeat: u16::MAX as u32,
        ..LoweringLimits::default()
    };
    let (mut fast_texts, mut slow_texts) = (0, 0);
    for path in paths.iter().step_by(5) {
        let text = std::fs::read_to_string(path).expect("a MaskBench file");
        let file: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let schema = file["schema"].to_string();
        let options = tokensieve_core::SpecOptions::default();
        let Ok(g) = schema_to_grammar(&schema, &options, 20, &limits) else {
            continue;
        };
        for text in std::iter::once(&g.root).chain(&g.rules) {
            if reads_fast_as_regex_syntax_reads(text) {
                fast_texts += 1;
            } else {
                slow_texts += 1;
            }
        }
    }
    eprintln!("{fast_texts} texts read fast, {slow_texts} left to regex-syntax");
    assert!(
        fast_texts > 20 * slow_texts,
        "{fast_texts} texts read fast, {slow_texts} not"
    );
}
