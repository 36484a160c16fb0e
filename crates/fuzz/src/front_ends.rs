//! The front-end targets: `gbnf` (the GBNF parser, then both backends),
//! `regex` (the regex front end of both backends, and `ByteDfa`'s two
//! determinizers checked against each other) and `json_schema` (any bytes
//! as a schema, and structure-aware mutations of the input when it is
//! JSON, as a real schema's would be). Each compiles with both backends and
//! walks what compiled ([`backends::walk`]).

use serde_json::{Map, Value, json};
use tokensieve_automata::{ByteDfa, DfaLimits, LazyDfa};
use tokensieve_core::Constraint;
use tokensieve_core::testing::SplitMix64;
use tokensieve_grammar::testing::random_sentence;
use tokensieve_grammar::{Grammar, Symbol};

use crate::backends::{Relation, accepts_sentence, check_error, compile_both, walk};
use crate::input_seed;
use tokensieve_regex_fsm::RegexFsmConfig;

/// Tokens walked after each compile: enough to reach past a schema's first
/// key or a grammar's first repetition, cheap on a small vocabulary.
const WALK_STEPS: usize = 16;

/// The GBNF parser on any text (root `root`), then, when it parses, both
/// backends: two random sentences of the grammar are taken whole by each
/// matcher, and the grammars are walked.
pub fn gbnf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let grammar = match Grammar::from_gbnf(text, "root") {
        Ok(g) => g,
        Err(e) => return check_error("gbnf", &e),
    };
    let compiled = compile_both(&Constraint::ebnf(text, "root"));
    let seed = input_seed(data);
    if sentences_are_short(&grammar) {
        let mut r = SplitMix64(seed);
        for _ in 0..2 {
            let sentence = random_sentence(&grammar, &mut r, SENTENCE_DEPTH);
            accepts_sentence(&compiled, &sentence);
        }
    }
    walk(&compiled, Relation::Equal, seed, WALK_STEPS);
}

/// How deep [`random_sentence`] picks alternatives at random.
const SENTENCE_DEPTH: usize = 4;

/// Whether every sentence [`random_sentence`] can draw at
/// [`SENTENCE_DEPTH`] is short (at most 64 KiB, by a bound): repetition
/// counts multiply through nesting (`(("a"{100}){100}){100}` is a small
/// grammar whose shortest sentence is a megabyte), and the oracle is not
/// what is under test.
fn sentences_are_short(grammar: &Grammar) -> bool {
    const MAX: u64 = 1 << 16;
    let rules = grammar.rules();
    // Shortest sentence of each rule (saturating), by a fixpoint.
    let mut shortest = vec![u64::MAX; rules.len()];
    loop {
        let mut changed = false;
        for (i, rule) in rules.iter().enumerate() {
            for alt in &rule.alternatives {
                let len = alt.iter().fold(0u64, |n, s| {
                    n.saturating_add(match s {
                        Symbol::Literal(b) => b.len() as u64,
                        Symbol::Class(_) => 4,
                        Symbol::NonTerminal(t) => shortest[t.index()],
                    })
                });
                if len < shortest[i] {
                    shortest[i] = len;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    // Past the random levels each symbol costs at most the longest
    // shortest way out of any alternative; each random level multiplies by
    // the longest alternative.
    let widest = rules
        .iter()
        .flat_map(|r| &r.alternatives)
        .map(|a| a.len() as u64)
        .max()
        .unwrap_or(0)
        .max(1);
    let way_out = rules
        .iter()
        .flat_map(|r| &r.alternatives)
        .map(|a| {
            a.iter().fold(0u64, |n, s| {
                n.saturating_add(match s {
                    Symbol::Literal(b) => b.len() as u64,
                    Symbol::Class(_) => 4,
                    Symbol::NonTerminal(t) => shortest[t.index()],
                })
            })
        })
        .max()
        .unwrap_or(0);
    let bound = (0..SENTENCE_DEPTH as u32).fold(way_out.max(1), |n, _| n.saturating_mul(widest));
    bound <= MAX
}

/// The regex front end of both backends on any text, then a walk.
pub fn regex(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    determinizers_agree(text);
    let compiled = compile_both(&Constraint::regex(text));
    walk(&compiled, Relation::Equal, input_seed(data), WALK_STEPS);
}

/// `ByteDfa::build`'s own determinizer (over the lazy DFA, which earley's
/// lexemes use too) against regex-automata's, for a pattern the first
/// takes (no look-around): where both build within regex-fsm's limits,
/// the minimized tables are the same.
fn determinizers_agree(text: &str) {
    let Ok(hir) = tokensieve_automata::dfa::parse(text) else {
        return;
    };
    if !LazyDfa::takes(&hir) {
        return;
    }
    let c = RegexFsmConfig::default();
    let limits = DfaLimits {
        nfa_size_limit: c.nfa_size_limit,
        dfa_size_limit: c.dfa_size_limit,
        determinize_size_limit: c.determinize_size_limit,
        max_dfa_states: c.max_dfa_states,
        minimize: true,
    };
    // Only where ours builds: regex-automata's determinizer on a pattern
    // past ours's limits can take a minute in the instrumented build.
    let Ok(ours) = ByteDfa::build(text, &limits) else {
        return;
    };
    if let Ok(reference) = ByteDfa::build_by_regex_automata(text, &limits) {
        assert!(
            ours.same_table(&reference),
            "the two determinizers disagree on {text:?}"
        );
    }
}

/// Any text as a JSON Schema with both backends; when it is JSON, also a
/// structure-aware mutation of it (keywords set to edge values, subschemas
/// moved, deleted or wrapped in `not`/`anyOf`/`allOf`), compiled and
/// walked. On MaskBench seeds these are real schemas a little off.
pub fn json_schema(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let seed = input_seed(data);
    let compiled = compile_both(&Constraint::json_schema(text));
    walk(&compiled, Relation::Subset, seed, WALK_STEPS);
    let Ok(schema) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let mut r = SplitMix64(seed);
    let mut mutated = schema;
    for _ in 0..1 + r.below(3) {
        mutate_schema(&mut mutated, &mut r);
    }
    let compiled = compile_both(&Constraint::json_schema(mutated.to_string()));
    walk(&compiled, Relation::Subset, r.next_u64(), WALK_STEPS);
}

/// A step into a JSON value.
#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The paths of every object and array in `v` (the root first).
fn containers(v: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::Object(map) => {
            out.push(path.clone());
            for (k, child) in map {
                path.push(Step::Key(k.clone()));
                containers(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            out.push(path.clone());
            for (i, child) in items.iter().enumerate() {
                path.push(Step::Index(i));
                containers(child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

/// Keywords a mutation sets, the ones real schemas use and the ones that
/// make compiles work hard.
const KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "$ref",
    "$defs",
    "definitions",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "unevaluatedProperties",
    "$anchor",
    "$id",
];

/// Values a mutation sets a keyword to: edges of every type.
fn edge_value(r: &mut SplitMix64) -> Value {
    match r.below(30) {
        0 => json!(0),
        1 => json!(-1),
        2 => json!(1),
        3 => json!(1e308),
        4 => json!(0.1),
        5 => json!(9_007_199_254_740_993u64),
        6 => json!(-2.5e-7),
        7 => json!(""),
        8 => json!("^a*$"),
        9 => json!("(a|b)*c{3,5}"),
        10 => json!("[^\\d]+@\\w{2,}"),
        11 => json!(true),
        12 => json!(false),
        13 => Value::Null,
        14 => json!([]),
        15 => json!({}),
        16 => json!([1, "a", null, {"b": [true]}]),
        17 => json!({"type": "string"}),
        18 => json!("#"),
        19 => json!("#/$defs/x"),
        20 => json!({"$ref": "#"}),
        21 => json!("date-time"),
        22 => json!("email"),
        23 => json!(["string", "null"]),
        24 => json!({"not": {}}),
        25 => json!("integer"),
        26 => json!("object"),
        27 => json!(["a", "b"]),
        28 => json!({"x": {"type": "integer", "minimum": 3}}),
        _ => json!(40),
    }
}

/// One random change to `schema`.
fn mutate_schema(schema: &mut Value, r: &mut SplitMix64) {
    let mut paths = Vec::new();
    containers(schema, &mut Vec::new(), &mut paths);
    if paths.is_empty() {
        *schema = edge_value(r);
        return;
    }
    let target = paths[r.below(paths.len())].clone();
    let donor = {
        let path = &paths[r.below(paths.len())];
        at_mut(schema, path)
            .map(|v| v.clone())
            .unwrap_or(Value::Null)
    };
    let Some(node) = at_mut(schema, &target) else {
        return;
    };
    match r.below(6) {
        // A keyword set to an edge value, or to another subschema.
        0 | 1 => {
            if let Value::Object(map) = node {
                let key = KEYWORDS[r.below(KEYWORDS.len())].to_string();
                let value = if r.below(3) == 0 {
                    donor
                } else {
                    edge_value(r)
                };
                map.insert(key, value);
            } else if let Value::Array(items) = node {
                items.push(edge_value(r));
            }
        }
        // A member or item deleted.
        2 => match node {
            Value::Object(map) if !map.is_empty() => {
                let i = r.below(map.len());
                let key = map.keys().nth(i).cloned().expect("i < len");
                map.shift_remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                items.remove(r.below(items.len()));
            }
            _ => {}
        },
        // Another subschema moved here.
        3 => *node = donor,
        // Wrapped in a combinator with another subschema.
        4 => {
            let inner = std::mem::take(node);
            let mut map = Map::new();
            match r.below(4) {
                0 => {
                    map.insert("not".into(), inner);
                }
                1 => {
                    map.insert("anyOf".into(), json!([inner, donor]));
                }
                2 => {
                    map.insert("allOf".into(), json!([inner, donor]));
                }
                _ => {
                    map.insert("oneOf".into(), json!([inner, donor]));
                }
            }
            *node = Value::Object(map);
        }
        // A value duplicated into a sibling key.
        _ => {
            if let Value::Object(map) = node
                && let Some(key) = map.keys().nth(r.below(map.len().max(1))).cloned()
            {
                let value = map[&key].clone();
                map.insert(format!("{key}_{}", r.below(10)), value);
            }
        }
    }
}
