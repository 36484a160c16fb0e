//! The registry through the facade: link-time registration by a crate outside
//! core (examples/custom-backend), run-time registration, lookup order,
//! unknown names, and the reasoner wrapper.

use std::sync::Arc;
use tokensieve::bitmask::row_allowed_tokens;
use tokensieve::vocab::fixtures;
use tokensieve::{BackendConfig, Constraint, GrammarError, create_backend, register_backend};

// Depending on the example crate is all it takes; this `use` only keeps the
// name in one place.
use tokensieve_example_custom_backend::NAME as THIRD_PARTY;

#[test]
fn third_party_backend_is_found_by_name_and_constrains() {
    assert!(
        tokensieve::available_backends()
            .iter()
            .any(|b| b.name == THIRD_PARTY)
    );
    let vocab = Arc::new(fixtures::json_tiny());
    let backend = create_backend(THIRD_PARTY, &BackendConfig::default(), vocab.clone()).unwrap();
    let mut m = backend
        .compile(&Constraint::choice(["true", "tree"]))
        .unwrap()
        .matcher();
    let mut row = vec![0; vocab.mask_words()];
    m.fill_bitmask(&mut row);
    let allowed: Vec<Vec<u8>> = row_allowed_tokens(&row, vocab.vocab_size())
        .into_iter()
        .map(|t| vocab.token_bytes(t).to_vec())
        .collect();
    assert_eq!(allowed, vec![b"t".to_vec(), b"true".to_vec()]);
    m.accept_tokens(&vocab.encode_greedy(b"tree").unwrap())
        .unwrap();
    assert!(m.is_accepting());
}

#[test]
fn builtin_backends_are_listed() {
    let names: Vec<String> = tokensieve::available_backends()
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert!(names.contains(&"none".to_string()), "{names:?}");
    #[cfg(feature = "regex-fsm")]
    assert!(names.contains(&"regex-fsm".to_string()), "{names:?}");
    #[cfg(feature = "auto")]
    assert!(names.contains(&"auto".to_string()), "{names:?}");
}

#[test]
fn unknown_backend_error_lists_available_names() {
    let err = create_backend(
        "no-such-backend",
        &BackendConfig::default(),
        Arc::new(fixtures::json_tiny()),
    )
    .err()
    .unwrap();
    assert!(matches!(err, GrammarError::UnknownBackend { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("no-such-backend") && msg.contains("none") && msg.contains(THIRD_PARTY),
        "{msg}"
    );
}

#[test]
fn runtime_registration_comes_before_link_time() {
    // Shadow the third-party name with a run-time backend that is really `none`.
    register_backend("shadow-test", "test", |c, v| {
        Ok(Arc::new(tokensieve::none_backend::NoneBackend::new(v, c)))
    });
    let b = create_backend(
        "shadow-test",
        &BackendConfig::default(),
        Arc::new(fixtures::json_tiny()),
    )
    .unwrap();
    assert_eq!(b.name(), "none");
    let first = tokensieve::available_backends().into_iter().next().unwrap();
    assert_eq!(first.origin, "runtime");
}

#[cfg(feature = "reasoner")]
#[test]
fn think_end_token_wraps_in_the_reasoner() {
    let mut tokens: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
    tokens.push((b"</think>".to_vec(), true));
    let vocab = Arc::new(tokensieve::Vocabulary::new(
        tokensieve::VocabType::Raw,
        tokens,
    ));
    let config = BackendConfig {
        think_end_token: Some("</think>".into()),
        ..Default::default()
    };
    let b = create_backend(THIRD_PARTY, &config, vocab.clone()).unwrap();
    assert_eq!(b.name(), "example-choice+reasoner");
    let mut m = b.compile(&Constraint::choice(["ok"])).unwrap().matcher();
    m.accept_token(b'z' as u32).unwrap(); // thinking: anything goes
    m.accept_token(256).unwrap(); // </think>
    assert!(m.accept_token(b'z' as u32).is_err());
    m.accept_tokens(&[b'o' as u32, b'k' as u32]).unwrap();
    assert!(m.is_accepting());

    let bad = BackendConfig {
        think_end_token: Some("</reasoning>".into()),
        ..Default::default()
    };
    assert!(create_backend(THIRD_PARTY, &bad, vocab).is_err());
}

/// A backend refusing a constraint as unsupported names the registered
/// backends that compile it; a syntax error names none, and `none` (which
/// takes everything by allowing everything) is never named.
#[cfg(all(feature = "regex-fsm", feature = "earley", feature = "auto"))]
#[test]
fn a_refusal_names_the_backends_that_take_the_constraint() {
    let vocab = Arc::new(fixtures::json_tiny());
    let config = BackendConfig::default();
    let regex = create_backend("regex-fsm", &config, vocab.clone()).unwrap();
    let recursive = Constraint::json_schema(
        r##"{"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}"##,
    );
    let e = regex.compile(&recursive).err().unwrap();
    let GrammarError::TakenElsewhere { error, takers } = &e else {
        panic!("{e:?}");
    };
    assert!(
        matches!(**error, GrammarError::Unsupported { .. }),
        "{error:?}"
    );
    assert!(takers.contains(&"earley".to_string()), "{takers:?}");
    assert!(takers.contains(&"auto".to_string()), "{takers:?}");
    assert!(
        !takers.iter().any(|t| t == "none" || t == "regex-fsm"),
        "{takers:?}"
    );
    let text = e.to_string();
    assert!(text.starts_with(&error.to_string()), "{text}");
    assert!(
        text.contains("`earley`") && text.contains("backends take it"),
        "{text}"
    );
    assert!(matches!(e.refusal(), GrammarError::Unsupported { .. }));

    // The other way: earley refuses an indented `json_object`, which
    // regex-fsm writes out to a bounded depth.
    let indented = Constraint::with_options(
        tokensieve::ConstraintSpec::JsonObject,
        tokensieve::SpecOptions {
            whitespace: tokensieve::Whitespace::Fixed {
                item_separator: ",".into(),
                key_separator: ": ".into(),
                indent: Some(2),
            },
            strict: false,
            max_depth: Some(2),
        },
    );
    let earley = create_backend("earley", &config, vocab.clone()).unwrap();
    let e = earley.compile(&indented).err().unwrap();
    assert!(
        matches!(&e, GrammarError::TakenElsewhere { takers, .. } if takers == &["regex-fsm".to_string()]),
        "{e}"
    );

    // Alone (for benchmarks): the refusal itself, nothing else compiled.
    let alone = tokensieve::create_backend_alone("regex-fsm", &config, vocab.clone()).unwrap();
    let e = alone.compile(&recursive).err().unwrap();
    assert!(matches!(e, GrammarError::Unsupported { .. }), "{e:?}");

    // A syntax error is the user's to fix: no backend named.
    let e = regex.compile(&Constraint::regex("(a")).err().unwrap();
    assert!(matches!(e, GrammarError::InvalidRegex { .. }), "{e:?}");
}

/// Naming the takers of a refused constraint compiles it with every other
/// backend: under the caller's cancel token, so a request cancelled while
/// its compile is refused costs no further compile. A backend that
/// refuses one marked regex, cancelling the caller's token as it does
/// (as a serving engine would when the request is aborted meanwhile).
#[cfg(feature = "earley")]
#[test]
fn takers_are_asked_under_the_callers_cancel_token() {
    use tokensieve::{CancelToken, CompiledGrammar, ConstraintSpec, GrammarBackend, SpecKind};
    const MARKED: &str = "cancelled-while-refused-[0-9]";
    struct CancelsAndRefuses(Arc<tokensieve::Vocabulary>);
    impl GrammarBackend for CancelsAndRefuses {
        fn name(&self) -> &str {
            "cancels-and-refuses"
        }
        fn supported_kinds(&self) -> &[SpecKind] {
            &[SpecKind::Regex]
        }
        fn vocabulary(&self) -> &Arc<tokensieve::Vocabulary> {
            &self.0
        }
        fn compile(&self, c: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
            self.compile_cancellable(c, &CancelToken::new())
        }
        fn compile_cancellable(
            &self,
            c: &Constraint,
            cancel: &CancelToken,
        ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
            if matches!(&c.spec, ConstraintSpec::Regex(p) if p == MARKED) {
                cancel.cancel();
            }
            Err(GrammarError::Unsupported {
                location: tokensieve::Location::None,
                what: "anything".into(),
            })
        }
    }
    register_backend("cancels-and-refuses", "test", |_, v| {
        Ok(Arc::new(CancelsAndRefuses(v)))
    });
    let vocab = Arc::new(fixtures::json_tiny());
    let b = create_backend("cancels-and-refuses", &BackendConfig::default(), vocab).unwrap();
    let marked = Constraint::regex(MARKED);
    // Its own token, not the caller's: earley is asked and named.
    let e = b.compile(&marked).err().unwrap();
    assert!(
        matches!(&e, GrammarError::TakenElsewhere { takers, .. } if takers.iter().any(|t| t == "earley")),
        "{e:?}"
    );
    // The caller's token, cancelled by the refusal: nobody else compiles.
    let e = b
        .compile_cancellable(&marked, &CancelToken::new())
        .err()
        .unwrap();
    assert!(matches!(e, GrammarError::Unsupported { .. }), "{e:?}");
}
