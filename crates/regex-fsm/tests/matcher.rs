//! Matcher behaviour: stop tokens, special and padding ids, all-or-nothing
//! steps, rollback, fork, jump-forward, stats, and the registry entry.

mod common;

use common::{allowed, tiny_backend};
use std::sync::Arc;
use tokensieve_core::{
    BackendConfig, Constraint, GrammarBackend, GrammarObject, StepError, VocabType, Vocabulary,
    instantiate_backend,
};
use tokensieve_regex_fsm::{IndexStats, RegexFsmBackend, RegexFsmConfig};

fn tiny() -> Arc<Vocabulary> {
    Arc::new(tokensieve_core::vocab::fixtures::json_tiny())
}

fn mask(m: &mut dyn GrammarObject, words: usize) -> Vec<u32> {
    let mut row = vec![0xDEAD_BEEF; words];
    m.fill_bitmask(&mut row);
    row
}

#[test]
fn stop_tokens_only_when_accepting_and_then_terminated() {
    let vocab = tiny();
    let eos = vocab.stop_tokens()[0];
    let g = tiny_backend().compile(&Constraint::regex("ab?")).unwrap();
    let mut m = g.matcher();
    let words = vocab.mask_words();
    assert!(!allowed(&mask(&mut *m, words), eos));
    assert_eq!(
        m.accept_token(eos),
        Err(StepError::TokenRejected { token: eos })
    );
    m.accept_token(b'a' as u32).unwrap();
    let row = mask(&mut *m, words);
    assert!(allowed(&row, eos) && allowed(&row, b'b' as u32) && !allowed(&row, b'a' as u32));
    m.accept_token(eos).unwrap();
    assert!(m.is_terminated());
    // After the end, only stop tokens are allowed, nothing is accepted.
    let row = mask(&mut *m, words);
    assert_eq!(
        tokensieve_core::bitmask::row_allowed_tokens(&row, vocab.vocab_size()),
        vec![eos]
    );
    assert_eq!(m.accept_token(b'b' as u32), Err(StepError::Terminated));
    assert_eq!(m.accept_bytes(b"b"), Err(StepError::Terminated));
    assert!(m.jump_forward().is_empty());
    // Rolling the stop token back un-terminates.
    m.rollback(1).unwrap();
    assert!(!m.is_terminated());
    m.accept_token(b'b' as u32).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn special_and_padding_ids_are_invalid_and_never_allowed() {
    let vocab = Vocabulary::new(
        VocabType::Raw,
        [
            (b"a".to_vec(), false),
            (b"<s>".to_vec(), true),
            (b"</s>".to_vec(), true),
            (b"aa".to_vec(), false),
        ],
    )
    .with_stop_tokens(&[2])
    .unwrap()
    .with_vocab_size(40)
    .unwrap();
    let vocab = Arc::new(vocab);
    let backend = RegexFsmBackend::new(vocab.clone(), RegexFsmConfig::default());
    let g = backend.compile(&Constraint::regex(".*")).unwrap();
    let mut m = g.matcher();
    let row = mask(&mut *m, vocab.mask_words());
    assert_eq!(
        tokensieve_core::bitmask::row_allowed_tokens(&row, vocab.vocab_size()),
        vec![0, 2, 3]
    );
    for bad in [1, 35, 39, 40, 1_000_000] {
        assert_eq!(
            m.accept_token(bad),
            Err(StepError::InvalidToken { token: bad })
        );
    }
    assert_eq!(m.rollback_available(), 0);
}

#[test]
fn rejected_steps_leave_the_state_unchanged() {
    let vocab = tiny();
    let g = tiny_backend().compile(&Constraint::regex("abc")).unwrap();
    let mut m = g.matcher();
    let before = mask(&mut *m, vocab.mask_words());
    assert_eq!(
        m.accept_bytes(b"abx"),
        Err(StepError::BytesRejected { offset: 2 })
    );
    assert_eq!(
        m.accept_token(b'x' as u32),
        Err(StepError::TokenRejected { token: b'x' as u32 })
    );
    assert_eq!(mask(&mut *m, vocab.mask_words()), before);
    assert_eq!(m.rollback_available(), 0);
    m.accept_bytes(b"abc").unwrap();
    assert!(m.is_accepting());
    assert_eq!(m.rollback_available(), 1);
}

#[test]
fn rollback_round_trips_masks() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let pattern = r#"\{"name": "[a-z ]+", "age": [0-9]{1,3}\}"#;
    let text = br#"{"name": "the abc", "age": 123}"#;
    let ids = vocab.encode_greedy(text).unwrap();
    let g = tiny_backend().compile(&Constraint::regex(pattern)).unwrap();
    let mut m = g.matcher();
    let mut masks = vec![mask(&mut *m, words)];
    for &id in &ids {
        m.accept_token(id).unwrap();
        masks.push(mask(&mut *m, words));
    }
    m.accept_token(vocab.stop_tokens()[0]).unwrap();
    let n = ids.len();
    assert!(n > 5 && n <= 32);
    m.rollback(1).unwrap();
    assert_eq!(mask(&mut *m, words), masks[n]);
    m.rollback(3).unwrap();
    assert_eq!(mask(&mut *m, words), masks[n - 3]);
    // Replay, then roll all the way back.
    for &id in &ids[n - 3..] {
        m.accept_token(id).unwrap();
    }
    assert_eq!(mask(&mut *m, words), masks[n]);
    let k = m.rollback_available();
    assert_eq!(k, n);
    assert_eq!(
        m.rollback(k + 1),
        Err(StepError::RollbackTooFar {
            requested: k + 1,
            available: k
        })
    );
    m.rollback(k).unwrap();
    assert_eq!(mask(&mut *m, words), masks[0]);
    assert_eq!(m.stats().rollbacks, 1 + 3 + k as u64);
    m.rollback(0).unwrap();
}

#[test]
fn rollback_history_is_bounded() {
    let vocab = tiny();
    let backend = RegexFsmBackend::new(
        vocab.clone(),
        RegexFsmConfig {
            max_rollback: 3,
            ..Default::default()
        },
    );
    let g = backend.compile(&Constraint::regex("[a-z]*")).unwrap();
    let mut m = g.matcher();
    for _ in 0..5 {
        m.accept_token(b'q' as u32).unwrap();
    }
    m.accept_bytes(b"zz").unwrap();
    assert_eq!(m.rollback_available(), 3);
    m.rollback(3).unwrap();
    assert!(m.rollback(1).is_err());
    let none = RegexFsmBackend::new(
        vocab,
        RegexFsmConfig {
            max_rollback: 0,
            ..Default::default()
        },
    );
    let mut m = none
        .compile(&Constraint::regex("[a-z]*"))
        .unwrap()
        .matcher();
    m.accept_token(b'q' as u32).unwrap();
    assert_eq!(m.rollback_available(), 0);
}

#[test]
fn fork_is_independent() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let g = tiny_backend()
        .compile(&Constraint::regex("(ab|cd)+"))
        .unwrap();
    let mut a = g.matcher();
    a.accept_token(b'a' as u32).unwrap();
    let mut b = a.fork();
    let a_mask = mask(&mut *a, words);
    assert_eq!(mask(&mut *b, words), a_mask);
    b.accept_token(b'b' as u32).unwrap();
    b.accept_token(b'c' as u32).unwrap();
    assert_eq!(mask(&mut *a, words), a_mask);
    assert!(!a.is_accepting());
    assert_eq!(a.rollback_available(), 1);
    assert_eq!(b.rollback_available(), 3);
    a.reset();
    assert_eq!(a.rollback_available(), 0);
    assert_eq!(a.stats().masks, 0);
    assert!(b.accept_token(b'd' as u32).is_ok() && b.is_accepting());
}

#[test]
fn jump_forward_follows_certain_bytes() {
    let backend = tiny_backend();
    let g = backend
        .compile(&Constraint::regex(r#"\{"name": "[a-z]+"\}"#))
        .unwrap();
    let mut m = g.matcher();
    assert_eq!(m.jump_forward(), br#"{"name": ""#);
    m.accept_token(b'{' as u32).unwrap();
    let jf = m.jump_forward();
    assert_eq!(jf, br#""name": ""#);
    m.accept_bytes(&jf).unwrap();
    assert!(m.jump_forward().is_empty()); // a letter is needed, any of 26
    m.accept_bytes(b"bob").unwrap();
    assert!(m.jump_forward().is_empty()); // another letter or `"`
    m.accept_bytes(b"\"").unwrap();
    assert_eq!(m.jump_forward(), b"}");
    m.accept_bytes(b"}").unwrap();
    assert!(m.is_accepting());
    assert!(m.jump_forward().is_empty()); // accepting: the output may end
}

#[test]
fn jump_forward_never_splits_a_character() {
    let backend = tiny_backend();
    let jf = |pattern: &str, prefix: &[u8]| {
        let g = backend.compile(&Constraint::regex(pattern)).unwrap();
        let mut m = g.matcher();
        m.accept_bytes(prefix).unwrap();
        m.jump_forward()
    };
    assert_eq!(jf("日本[0-9]", b""), "日本".as_bytes());
    // 本 = E6 9C AC, 未 = E6 9C AA: two certain bytes, cut back to "x日".
    assert_eq!(jf("x日(本|未)", b""), "x日".as_bytes());
    assert_eq!(jf("(é|ê)x", b""), b"");
    // Inside a character, the rest of it is certain.
    assert_eq!(jf("é[a-z]", &[0xC3]), &[0xA9]);
    assert_eq!(jf("éx", &[0xC3]), &[0xA9, b'x']);
    // Both 😀 (F0 9F 98 80) and 😁 (.. 81) share three bytes: none is kept.
    assert_eq!(jf("a(😀|😁)", b""), b"a");
    assert_eq!(jf("a(😀|😁)", b"a"), b"");
}

#[test]
fn stats_count_masks_tokens_and_rollbacks() {
    let vocab = tiny();
    let g = tiny_backend()
        .compile(&Constraint::regex("[0-9]+"))
        .unwrap();
    let mut m = g.matcher();
    for _ in 0..3 {
        mask(&mut *m, vocab.mask_words());
    }
    m.accept_token(b'1' as u32).unwrap();
    m.accept_token(vocab.stop_tokens()[0]).unwrap();
    m.rollback(1).unwrap();
    let s = m.stats();
    assert_eq!(s.masks, 3);
    assert!(s.mask_time_max <= s.mask_time_total);
    assert_eq!(s.tokens_accepted, 2);
    assert_eq!(s.rollbacks, 1);
    assert_eq!(s.compile_time, g.compile_time());
    assert!(g.memory_bytes() > 0);
}

#[test]
fn short_or_long_rows_never_panic() {
    let vocab = tiny();
    let g = tiny_backend()
        .compile(&Constraint::regex("[a-z]+"))
        .unwrap();
    let mut m = g.matcher();
    let mut short = vec![u32::MAX; 2];
    m.fill_bitmask(&mut short);
    let mut long = vec![u32::MAX; vocab.mask_words() + 3];
    m.fill_bitmask(&mut long);
    assert!(long[vocab.mask_words()..].iter().all(|&w| w == 0));
    assert!(allowed(&long, b'z' as u32));
}

#[test]
fn choice_lowers_to_an_alternation() {
    let vocab = tiny();
    let g = tiny_backend()
        .compile(&Constraint::choice(["yes", "no", "a.b"]))
        .unwrap();
    for (text, ok) in [
        ("yes", true),
        ("no", true),
        ("a.b", true),
        ("axb", false),
        ("ye", false),
    ] {
        let mut m = g.matcher();
        let full = m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting();
        assert_eq!(full, ok, "{text}");
    }
    let mut m = g.matcher();
    let row = mask(&mut *m, vocab.mask_words());
    let allowed_ids = tokensieve_core::bitmask::row_allowed_tokens(&row, vocab.vocab_size());
    assert_eq!(allowed_ids, vec![b'a' as u32, b'n' as u32, b'y' as u32]);
}

#[test]
fn registered_under_its_name_and_alias() {
    std::hint::black_box(tokensieve_regex_fsm::BACKEND_NAME);
    let mut config = BackendConfig {
        max_rollback: 2,
        ..Default::default()
    };
    config.options.insert("max_dfa_states".into(), "4".into());
    for name in ["regex-fsm", "outlines"] {
        let backend = instantiate_backend(name, &config, tiny()).unwrap();
        assert_eq!(backend.name(), "regex-fsm");
        let mut m = backend
            .compile(&Constraint::regex("[0-9]+"))
            .unwrap()
            .matcher();
        for _ in 0..4 {
            m.accept_token(b'7' as u32).unwrap();
        }
        assert_eq!(m.rollback_available(), 2);
        // The option reached the backend: 6 states are too many.
        let e = backend.compile(&Constraint::regex("abcde")).err().unwrap();
        assert!(e.to_string().contains("max_dfa_states"), "{e}");
    }
    config
        .options
        .insert("max_dfa_states".into(), "many".into());
    assert!(instantiate_backend("regex-fsm", &config, tiny()).is_err());
}

#[test]
fn parallel_build_gives_the_same_masks() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let pattern = r#""([^"\\]|\\.)*"|[0-9]{1,5}|\{"(ab|cd)": (true|false)\}"#;
    // No walk cache, so both builds share the same walks; only the nodes
    // visited may differ (each parallel walker has its own subtree memo).
    let build = |parallel_build| {
        RegexFsmBackend::new(
            vocab.clone(),
            RegexFsmConfig {
                parallel_build,
                walk_cache_bytes: 0,
                ..Default::default()
            },
        )
        .compile_regex(pattern)
        .unwrap()
    };
    let (serial, parallel) = (build(false), build(true));
    let counted = |g: &tokensieve_regex_fsm::RegexGrammar| IndexStats {
        nodes_visited: 0,
        ..g.build_stats().index.clone()
    };
    assert_eq!(counted(&serial), counted(&parallel));
    let text = br#"{"cd": false}"#;
    let (mut a, mut b) = (serial.regex_matcher(), parallel.regex_matcher());
    for &byte in text {
        assert_eq!(mask(&mut a, words), mask(&mut b, words));
        a.accept_bytes(&[byte]).unwrap();
        b.accept_bytes(&[byte]).unwrap();
    }
    assert!(a.is_accepting() && b.is_accepting());
}

#[test]
fn json_specs_go_through_the_lowering() {
    let vocab = tiny();
    let backend = tiny_backend();
    let schema = r#"{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}"#;
    let constraint = Constraint::json_schema(schema);
    let expected = tokensieve_json_schema::schema_to_regex(
        schema,
        &constraint.options,
        backend.config().max_whitespace,
    );
    assert_eq!(backend.lower(&constraint), expected);
    if let Ok(pattern) = expected {
        let g = backend.compile(&constraint).unwrap();
        for (text, ok) in [(r#"{"a": 12}"#, true), (r#"{"a":"x"}"#, false)] {
            let mut m = g.matcher();
            let ids = vocab.encode_greedy(text.as_bytes()).unwrap();
            let full = m.accept_tokens(&ids).is_ok() && m.is_accepting();
            assert_eq!(full, ok, "{pattern}: {text}");
        }
    }
    // Unbounded nesting cannot be a regex: an error, not a wider language.
    assert!(
        backend
            .compile(&Constraint::new(
                tokensieve_core::ConstraintSpec::JsonObject
            ))
            .is_err()
    );
}
