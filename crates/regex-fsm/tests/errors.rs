//! Bad input is an `Err` with a message that says what and where: never a
//! panic, never a silently different language, and never unbounded time.

mod common;

use common::tiny_backend;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokensieve_core::{Constraint, GrammarBackend, GrammarError, Location, SpecKind, Vocabulary};
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

fn compile_err(pattern: &str) -> GrammarError {
    let t = Instant::now();
    let err = match tiny_backend().compile(&Constraint::regex(pattern)) {
        Ok(_) => panic!("{pattern:?} must not compile"),
        Err(e) => e,
    };
    // Generous for debug builds; release takes milliseconds.
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "{pattern:?} took {:?}",
        t.elapsed()
    );
    err
}

#[test]
fn look_ahead_is_unsupported_with_offset() {
    let e = compile_err("ab(?=c)");
    assert_eq!(
        e,
        GrammarError::Unsupported {
            location: Location::Offset(2),
            what: "look-ahead `(?=...)`".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "offset 2: look-ahead `(?=...)` is not supported"
    );
    assert!(
        compile_err("(?!x)y")
            .to_string()
            .contains("negative look-ahead")
    );
    assert!(compile_err("(?<=x)y").to_string().contains("look-behind"));
    assert!(
        compile_err("(?<!x)y")
            .to_string()
            .contains("negative look-behind")
    );
}

#[test]
fn back_reference_is_unsupported_with_offset() {
    let e = compile_err(r"(a)\1");
    assert!(
        matches!(&e, GrammarError::Unsupported { location: Location::Offset(3), what } if what.contains(r"back-reference `\1`")),
        "{e:?}"
    );
}

#[test]
fn invalid_syntax_is_invalid_regex() {
    for (pattern, offset) in [
        ("(ab", 0),
        ("a{2,1}", 1),
        ("[z-a]", 1),
        ("*a", 0),
        ("a\\p{Nope}", 1),
    ] {
        let e = compile_err(pattern);
        assert!(
            matches!(&e, GrammarError::InvalidRegex { location: Location::Offset(o), .. } if *o == offset),
            "{pattern:?}: {e:?}"
        );
    }
    // Invalid UTF-8 in the language is refused, not silently widened.
    assert!(matches!(
        compile_err(r"(?-u:\xFF)"),
        GrammarError::InvalidRegex { .. }
    ));
}

#[test]
fn unicode_word_boundary_is_unsupported() {
    let e = compile_err(r"\bfoo\b");
    assert!(e.to_string().contains("Unicode word boundary"), "{e}");
}

#[test]
fn huge_repetition_exceeds_a_named_limit() {
    let e = compile_err("(a|b){1000}{1000}");
    assert!(
        matches!(&e, GrammarError::LimitExceeded { knob, .. } if knob == "nfa_size_limit"),
        "{e:?}"
    );
}

#[test]
fn dfa_and_state_limits_are_named() {
    let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
    let small = |config: RegexFsmConfig| RegexFsmBackend::new(vocab.clone(), config);
    let e = small(RegexFsmConfig {
        max_dfa_states: 10,
        ..Default::default()
    })
    .compile_regex("[a-z]{20}")
    .unwrap_err();
    assert!(
        matches!(&e, GrammarError::LimitExceeded { knob, limit: 10, .. } if knob == "max_dfa_states"),
        "{e:?}"
    );
    let e = small(RegexFsmConfig {
        dfa_size_limit: 10_000,
        ..Default::default()
    })
    .compile_regex(r"\w{10}")
    .unwrap_err();
    assert!(
        matches!(&e, GrammarError::LimitExceeded { knob, .. } if knob == "dfa_size_limit"),
        "{e:?}"
    );
    // Few DFA states, each a set of hundreds of NFA states: the
    // determinizer's work, bounded apart from the table's size.
    let e = small(RegexFsmConfig {
        determinize_size_limit: 64 << 10,
        ..Default::default()
    })
    .compile_regex("a{0,2000}")
    .unwrap_err();
    assert!(
        matches!(&e, GrammarError::LimitExceeded { knob, limit: 65536, .. } if knob == "determinize_size_limit"),
        "{e:?}"
    );
    let e = small(RegexFsmConfig {
        max_index_bytes: 100,
        ..Default::default()
    })
    .compile_regex("[a-z]{0,30}")
    .unwrap_err();
    assert!(
        matches!(&e, GrammarError::LimitExceeded { knob, .. } if knob == "max_index_bytes"),
        "{e:?}"
    );
    assert!(e.to_string().contains("max_index_bytes"));
}

/// The compile's work budget (`max_compile_work`, trie nodes visited by
/// the index build) stops a regex whose DFA is small but whose states each
/// walk much of the vocabulary, and the answer does not depend on what the
/// process-wide walk cache holds: a regex that fails cold fails warm.
#[test]
fn the_compile_work_budget_is_named_and_deterministic() {
    let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
    let backend = |max_compile_work: u64| {
        RegexFsmBackend::new(
            vocab.clone(),
            RegexFsmConfig {
                max_compile_work,
                ..Default::default()
            },
        )
    };
    let pattern = r#"([a-z ]{0,20}[.!?]){0,20}"#;
    let done = backend(u64::MAX).compile_regex(pattern).unwrap();
    let nodes = done.build_stats().index.nodes_visited;
    assert!(nodes > 1_000, "{nodes}");
    for _ in 0..2 {
        // The second round finds the region walks of the first in the cache.
        let e = backend(nodes / 2).compile_regex(pattern).unwrap_err();
        assert!(
            matches!(&e, GrammarError::LimitExceeded { knob, limit, .. }
                if knob == "max_compile_work" && *limit as u64 == nodes / 2),
            "{e:?}"
        );
        assert!(e.to_string().contains("trie walks"), "{e}");
    }
    backend(nodes).compile_regex(pattern).unwrap();
}

#[test]
fn empty_language_and_empty_choice_are_errors() {
    assert!(matches!(compile_err("a$b"), GrammarError::InvalidSpec(_)));
    assert!(matches!(
        compile_err(r"[^\s\S]"),
        GrammarError::InvalidSpec(_)
    ));
    let e = tiny_backend()
        .compile(&Constraint::choice(Vec::<String>::new()))
        .err()
        .unwrap();
    assert!(matches!(e, GrammarError::InvalidSpec(_)), "{e:?}");
}

#[test]
fn grammars_compile_when_regular_and_say_why_not_otherwise() {
    let backend = tiny_backend();
    for kind in [
        SpecKind::Ebnf,
        SpecKind::StructuralTag,
        SpecKind::JsonSchema,
    ] {
        assert!(backend.supported_kinds().contains(&kind), "{kind:?}");
    }
    assert!(
        backend
            .compile(&Constraint::ebnf("root ::= \"a\"+", "root"))
            .is_ok()
    );
    let e = backend
        .compile(&Constraint::ebnf(
            "root ::= \"a\"\nlist ::= \"(\" list \")\" | root",
            "list",
        ))
        .err()
        .unwrap();
    assert!(
        matches!(&e, GrammarError::Unsupported { what, .. } if what.contains("rule `list`")),
        "{e:?}"
    ); // Regular, but its regex nests deeper than the regex parser allows: the
    // error speaks of the grammar, not of an offset into a regex nobody wrote.
    let mut deep = String::from("root ::= r0\n");
    for i in 0..400 {
        deep.push_str(&format!(
            "r{i} ::= \"a\" r{} | \"b\" r0 | \"c\"\n",
            (i + 1) % 400
        ));
    }
    let e = backend
        .compile(&Constraint::ebnf(deep, "root"))
        .err()
        .unwrap();
    assert!(
        matches!(&e, GrammarError::Unsupported { what, .. } if what.contains("this ebnf as a regular expression")),
        "{e:?}"
    );
}

#[test]
fn vocabulary_that_cannot_spell_the_regex_is_an_error() {
    // No token starts with 'x'.
    let vocab = Arc::new(Vocabulary::from_byte_tokens(["a", "b", "ab"]));
    let backend = RegexFsmBackend::new(vocab, RegexFsmConfig::default());
    let e = backend.compile_regex("x[ab]*").unwrap_err();
    assert!(
        matches!(&e, GrammarError::Vocabulary { message, .. } if message.contains("'x'")),
        "{e:?}"
    );
    // Spellable: fine.
    assert!(backend.compile_regex("(ab)+").is_ok());
}

#[test]
fn a_cancelled_compilation_stops_with_cancelled() {
    let backend = tiny_backend();
    let cancel = tokensieve_core::CancelToken::new();
    let schema = Constraint::new(tokensieve_core::ConstraintSpec::JsonSchema(
        r#"{"type": "object", "properties": {"a": {"type": "string"}}}"#.into(),
    ));
    assert!(backend.compile_cancellable(&schema, &cancel).is_ok());
    cancel.cancel();
    let e = backend.compile_cancellable(&schema, &cancel).err().unwrap();
    assert!(matches!(e, GrammarError::Cancelled), "{e:?}");
    let e = backend
        .compile_regex_cancellable("[a-z]+", &cancel)
        .unwrap_err();
    assert!(matches!(e, GrammarError::Cancelled), "{e:?}");
}

/// Members for `patternProperties` grow a schema's automaton; past the DFA
/// limits the schema is served without them (the smaller language from
/// before they were generated), not refused.
#[test]
fn pattern_members_past_the_limits_fall_back_to_none() {
    let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
    let schema = r#"{"type": "object", "patternProperties": {"^[a-z]{3,12}$": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99999}, "maxItems": 6}}, "additionalProperties": false}"#;
    let accepts = |backend: &RegexFsmBackend, text: &str| {
        let mut m = backend
            .compile(&Constraint::json_schema(schema))
            .unwrap()
            .matcher();
        m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    };
    let roomy = RegexFsmBackend::new(vocab.clone(), RegexFsmConfig::default());
    assert!(accepts(&roomy, r#"{"abc": [1, 2]}"#));
    assert!(accepts(&roomy, "{}"));
    let tight = RegexFsmBackend::new(
        vocab,
        RegexFsmConfig {
            max_dfa_states: 60,
            ..Default::default()
        },
    );
    assert!(!accepts(&tight, r#"{"abc": [1, 2]}"#));
    assert!(accepts(&tight, "{}"));
}
