//! The `GrammarObject` contract on the auto backend, with the fixture
//! vocabulary `json_tiny`: seeded random walks (tokens from the mask,
//! refused and special tokens, byte runs, jump-forward, rollback, fork,
//! reset) where every answer of an auto matcher equals a plain earley
//! matcher's, before, during and after its move onto the table, with short
//! and long rollback windows; the table cache and its bounds; specs that
//! stay on earley; cancellation of builds nobody waits for; the registry.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokensieve_auto::{AutoBackend, AutoConfig, AutoGrammar, TableState};
use tokensieve_core::bitmask::row_allowed_tokens;
use tokensieve_core::testing::SplitMix64;
use tokensieve_core::{
    BackendConfig, CancelToken, CompiledGrammar, Constraint, GrammarBackend, GrammarError,
    GrammarObject, Vocabulary, instantiate_backend,
};
use tokensieve_earley::{EarleyBackend, EarleyConfig};

fn tiny() -> Arc<Vocabulary> {
    Arc::new(tokensieve_core::vocab::fixtures::json_tiny())
}

fn config(max_rollback: usize) -> AutoConfig {
    AutoConfig {
        max_rollback,
        ..AutoConfig::default()
    }
}

/// Regular specs of every kind that has one (the table gets built).
fn regular_specs() -> Vec<Constraint> {
    vec![
        Constraint::regex(r"[0-9]{1,3}(\.[0-9]+)?|-?(ab|é|😀)+c?"),
        Constraint::choice(["true", "false", "maybe", "the end"]),
        Constraint::ebnf(
            r#"root ::= "{" ws "\"a\"" ws ":" ws num ("," ws num)* ws "}"
num ::= "-"? [0-9]+
ws ::= [ \n]?"#,
            "root",
        ),
        Constraint::json_schema(
            r#"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"enum": ["x", "yz"]}, "maxItems": 3}}, "required": ["name"], "additionalProperties": false}"#,
        ),
    ]
}

fn mask(m: &mut dyn GrammarObject, words: usize) -> Vec<u32> {
    let mut row = vec![0xDEAD_BEEF; words];
    m.fill_bitmask(&mut row);
    row
}

/// Everything observable about a matcher's position (stats aside).
fn observe(m: &mut dyn GrammarObject, words: usize) -> (Vec<u32>, bool, bool, usize, Vec<u8>) {
    (
        mask(m, words),
        m.is_accepting(),
        m.is_terminated(),
        m.rollback_available(),
        m.jump_forward(),
    )
}

/// Auto and earley answer alike at every step of seeded walks on each
/// regular spec, and a matcher released at a chosen step moves onto the
/// table there and keeps answering alike.
#[test]
fn masks_and_steps_equal_earleys_before_and_after_the_move() {
    let vocab = tiny();
    let words = vocab.mask_words();
    for max_rollback in [0, 3, 32] {
        let backend = AutoBackend::new(vocab.clone(), config(max_rollback));
        let earley = EarleyBackend::new(
            vocab.clone(),
            EarleyConfig {
                max_rollback,
                ..EarleyConfig::default()
            },
        );
        for spec in regular_specs() {
            let grammar = backend.compile_auto(&spec, &CancelToken::new()).unwrap();
            let reference = earley.compile(&spec).unwrap();
            assert!(grammar.wait_for_table(), "{spec:?} has a table");
            for seed in 0..12u64 {
                let mut rng = SplitMix64(seed ^ 0xA070);
                let move_at = rng.below(30);
                let mut auto = grammar.auto_matcher();
                // Started after the table was built: on it from the start.
                assert!(auto.on_table());
                auto.reset();
                // A matcher kept on earley, released at `move_at`.
                let mut pinned = fresh_on_earley(&backend, &spec);
                pinned.0.pin_to_earley(true);
                let mut reference = reference.matcher();
                let mut ops = Vec::new();
                let mut ended = false;
                for step in 0..50 {
                    if step == move_at {
                        pinned.0.pin_to_earley(false);
                    }
                    let m: &mut dyn GrammarObject = &mut pinned.0;
                    let seen = observe(m, words);
                    let expected = observe(&mut *reference, words);
                    assert_eq!(
                        seen, expected,
                        "{spec:?} rollback {max_rollback} seed {seed} step {step} after {ops:?}"
                    );
                    // A stop token out of the window (none is kept) ends
                    // the output for good: that matcher does not move.
                    ended |= max_rollback == 0 && seen.2 && !pinned.0.on_table();
                    assert_eq!(
                        pinned.0.on_table(),
                        step >= move_at && !ended,
                        "{spec:?} rollback {max_rollback} seed {seed} step {step} after {ops:?}"
                    );
                    let allowed = row_allowed_tokens(&seen.0, vocab.vocab_size());
                    let op = rng.below(100);
                    let m = &mut pinned.0;
                    if op < 60 && !allowed.is_empty() {
                        let t = allowed[rng.below(allowed.len())];
                        ops.push(format!("token {t}"));
                        assert_eq!(m.accept_token(t), reference.accept_token(t));
                    } else if op < 68 {
                        let t = rng.below(vocab.vocab_size() + 3) as u32;
                        ops.push(format!("maybe {t}"));
                        assert_eq!(m.accept_token(t), reference.accept_token(t), "{ops:?}");
                    } else if op < 76 {
                        let bytes = if seen.4.is_empty() {
                            b"1a".to_vec()
                        } else {
                            seen.4.clone()
                        };
                        ops.push(format!("bytes {:?}", String::from_utf8_lossy(&bytes)));
                        assert_eq!(m.accept_bytes(&bytes), reference.accept_bytes(&bytes));
                    } else if op < 92 {
                        let k = rng.below(seen.3 + 2);
                        ops.push(format!("rollback {k}"));
                        assert_eq!(m.rollback(k), reference.rollback(k));
                    } else if op < 97 {
                        // A fork answers as the original, and goes its own way.
                        ops.push("fork".into());
                        let (mut f, mut rf) = (m.fork(), reference.fork());
                        assert_eq!(observe(&mut *f, words), observe(&mut *rf, words));
                        if let Some(&t) = allowed.first() {
                            assert_eq!(f.accept_token(t), rf.accept_token(t));
                            assert_eq!(observe(&mut *f, words), observe(&mut *rf, words));
                        }
                    } else {
                        ops.push("reset".into());
                        m.reset();
                        reference.reset();
                        ended = false;
                    }
                }
            }
        }
    }
}

/// A matcher on earley (made before its grammar's table is built), as its
/// concrete type, with the grammar that keeps its build alive.
struct OnEarley(
    tokensieve_auto::AutoMatcher,
    #[allow(dead_code)] AutoGrammar,
);

fn fresh_on_earley(backend: &AutoBackend, spec: &Constraint) -> OnEarley {
    // A backend of its own with no cache: its first compile has no table.
    let _ = backend;
    let own = AutoBackend::new(
        tiny(),
        AutoConfig {
            table_cache_entries: 0,
            ..backend.config().clone()
        },
    );
    let grammar = own.compile_auto(spec, &CancelToken::new()).unwrap();
    let mut m = grammar.auto_matcher();
    // Pinned and reset: at the start, on earley, whenever the build ends.
    m.pin_to_earley(true);
    m.reset();
    assert!(!m.on_table());
    grammar.wait_for_table();
    OnEarley(m, grammar)
}

/// The move keeps the rollback history: steps taken on earley are undone on
/// the table, one by one, to the start, with the masks of each position.
#[test]
fn rollback_after_the_move_undoes_steps_taken_before_it() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let spec = &regular_specs()[3];
    let backend = AutoBackend::new(vocab.clone(), config(32));
    let OnEarley(mut m, grammar) = fresh_on_earley(&backend, spec);
    let text: &[&[u8]] = &[
        b"{\"",
        b"name",
        b"\": ",
        b"\"ab",
        b"c\"",
        b", \"age\": 4",
        b"2",
    ];
    let mut masks = Vec::new();
    for piece in text {
        masks.push(mask(&mut m, words));
        m.accept_bytes(piece).unwrap();
    }
    assert!(!m.on_table());
    assert!(grammar.wait_for_table());
    m.pin_to_earley(false);
    assert_eq!(m.rollback_available(), text.len());
    m.accept_bytes(b"}").unwrap();
    assert!(m.on_table() && m.is_accepting());
    m.rollback(1).unwrap();
    for (i, expected) in masks.iter().enumerate().rev() {
        m.rollback(1).unwrap();
        assert_eq!(&mask(&mut m, words), expected, "after rolling back to {i}");
    }
    assert_eq!(m.rollback_available(), 0);
    assert!(m.rollback(1).is_err());
}

/// With a short window, the steps out of it are replayed as one prefix:
/// the position and the window are still earley's.
#[test]
fn a_long_output_moves_with_its_window() {
    let vocab = tiny();
    let spec = Constraint::regex("(ab|c)*d");
    let backend = AutoBackend::new(vocab.clone(), config(2));
    let OnEarley(mut m, grammar) = fresh_on_earley(&backend, &spec);
    for _ in 0..100 {
        m.accept_bytes(b"ab").unwrap();
        m.accept_token(b'c' as u32).unwrap();
    }
    assert!(grammar.wait_for_table());
    m.pin_to_earley(false);
    assert_eq!(m.rollback_available(), 2);
    let d = b'd' as u32;
    m.accept_token(d).unwrap();
    assert!(m.on_table() && m.is_accepting());
    m.rollback(2).unwrap();
    assert_eq!(
        m.rollback(1),
        Err(tokensieve_core::StepError::RollbackTooFar {
            requested: 1,
            available: 0
        })
    );
    assert!(m.accept_token(d).is_ok());
    // The counters run across the move: 100 `c` and two `d` tokens (byte
    // runs are no tokens), two steps rolled back, no mask yet.
    let stats = m.stats();
    assert_eq!(
        (stats.tokens_accepted, stats.rollbacks, stats.masks),
        (102, 2, 0)
    );
    m.fill_bitmask(&mut vec![0; vocab.mask_words()]);
    assert_eq!(m.stats().masks, 1);
    m.reset();
    assert_eq!(m.stats().tokens_accepted, 0);
}

/// A stop token accepted on earley is replayed onto the table (the
/// matcher stays terminated); rolled back, it can go on.
#[test]
fn a_terminated_matcher_moves_terminated() {
    let vocab = tiny();
    let eos = vocab.stop_tokens()[0];
    let backend = AutoBackend::new(vocab.clone(), config(8));
    let OnEarley(mut m, grammar) = fresh_on_earley(&backend, &Constraint::regex("[0-9]+"));
    m.accept_bytes(b"12").unwrap();
    m.accept_token(eos).unwrap();
    assert!(grammar.wait_for_table());
    m.pin_to_earley(false);
    assert_eq!(
        m.accept_token(b'3' as u32),
        Err(tokensieve_core::StepError::Terminated)
    );
    assert!(m.on_table() && m.is_terminated());
    m.rollback(1).unwrap();
    m.accept_token(b'3' as u32).unwrap();
    assert!(m.is_accepting() && !m.is_terminated());
}

/// Specs whose language is not regular, or whose table is past the
/// budget, stay on earley: no error, the same masks.
#[test]
fn specs_without_a_table_stay_on_earley() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let backend = AutoBackend::new(
        vocab.clone(),
        AutoConfig {
            table_max_dfa_states: 20,
            ..AutoConfig::default()
        },
    );
    let earley = EarleyBackend::new(vocab.clone(), EarleyConfig::default());
    let specs = [
        // Nested brackets.
        Constraint::ebnf(r#"root ::= "[" root* "]""#, "root"),
        // Any JSON (any depth).
        Constraint::new(tokensieve_core::ConstraintSpec::JsonObject),
        // Extra members with any value (JSON Schema's default).
        Constraint::json_schema(r#"{"type": "object", "properties": {"a": {"type": "integer"}}}"#),
        // Regular, but over 20 DFA states.
        Constraint::regex("[a-z]{30}"),
    ];
    for spec in &specs {
        let grammar = backend.compile_auto(spec, &CancelToken::new()).unwrap();
        assert!(!grammar.wait_for_table(), "{spec:?}");
        assert_eq!(grammar.table_state(), TableState::None);
        let mut m = grammar.auto_matcher();
        let mut reference = earley.compile(spec).unwrap().matcher();
        for piece in [b"[".as_slice(), b"{", b"a"] {
            assert_eq!(mask(&mut m, words), mask(&mut *reference, words));
            let _ = (m.accept_bytes(piece), reference.accept_bytes(piece));
        }
        assert!(!m.on_table());
        // Known to have none: a second compile queues nothing.
        let again = backend.compile_auto(spec, &CancelToken::new()).unwrap();
        assert_eq!(again.table_state(), TableState::None);
    }
    // Earley's errors are the user's errors.
    let e = backend
        .compile_auto(&Constraint::regex("(a"), &CancelToken::new())
        .unwrap_err();
    assert!(matches!(e, GrammarError::InvalidRegex { .. }), "{e}");
}

/// A later compile of the same constraint gets the table from the cache
/// (every matcher on it from the start, marked as a cache hit); the cache
/// keeps at most `table_cache_entries`.
#[test]
fn later_compiles_get_the_table_from_a_bounded_cache() {
    let vocab = tiny();
    let backend = AutoBackend::new(
        vocab,
        AutoConfig {
            table_cache_entries: 2,
            ..AutoConfig::default()
        },
    );
    let specs: Vec<Constraint> = (0..4)
        .map(|i| Constraint::regex(format!("x{i}[0-9]+")))
        .collect();
    let first = backend
        .compile_auto(&specs[0], &CancelToken::new())
        .unwrap();
    assert!(first.wait_for_table());
    let again = backend
        .compile_auto(&specs[0], &CancelToken::new())
        .unwrap();
    assert_eq!(again.table_state(), TableState::Ready);
    let m = again.auto_matcher();
    assert!(m.on_table() && m.stats().cache_hit);
    for spec in &specs[1..] {
        assert!(
            backend
                .compile_auto(spec, &CancelToken::new())
                .unwrap()
                .wait_for_table()
        );
    }
    wait_idle(&backend);
    assert_eq!(backend.tables_kept(), 2);
    // The first was evicted: compiled again, it waits for a new build.
    let evicted = backend
        .compile_auto(&specs[0], &CancelToken::new())
        .unwrap();
    assert!(!evicted.auto_matcher().stats().cache_hit);
    assert!(evicted.wait_for_table());
}

fn wait_idle(backend: &AutoBackend) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while backend.background_running() {
        assert!(
            Instant::now() < deadline,
            "the background thread never ends"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A build nobody waits for any more is cancelled: dropping the grammar
/// (and its matchers) before its table is built ends the background work
/// early, keeps nothing, and the thread exits.
#[test]
fn dropping_the_grammar_cancels_its_build_and_the_thread_exits() {
    let vocab = tiny();
    let backend = AutoBackend::new(
        vocab,
        AutoConfig {
            table_max_dfa_states: 200_000,
            ..AutoConfig::default()
        },
    );
    // Thousands of DFA states, each a trie walk: long enough to cancel.
    let big = Constraint::regex("[a-z]{1,200}[0-9]{1,200}[A-Z]{1,200}");
    let slow = backend.compile_auto(&big, &CancelToken::new()).unwrap();
    let quick = backend
        .compile_auto(&Constraint::regex("[0-9]+"), &CancelToken::new())
        .unwrap();
    let m = slow.auto_matcher();
    drop(slow);
    drop(m);
    // The queue behind it still gets served.
    assert!(quick.wait_for_table());
    wait_idle(&backend);
    assert_eq!(backend.tables_kept(), 1, "the cancelled build is not kept");
    // Idle now: a new build starts a new thread.
    let again = backend
        .compile_auto(&Constraint::regex("[0-9]*x"), &CancelToken::new())
        .unwrap();
    assert!(again.wait_for_table());
    wait_idle(&backend);
}

/// Compiles of one constraint while its table is being built share the
/// build; with tables off there is no build and no thread.
#[test]
fn compiles_share_a_build_and_tables_can_be_off() {
    let vocab = tiny();
    let backend = AutoBackend::new(vocab.clone(), AutoConfig::default());
    let spec = Constraint::regex("[a-f]{1,50}");
    let a = backend.compile_auto(&spec, &CancelToken::new()).unwrap();
    let b = backend.compile_auto(&spec, &CancelToken::new()).unwrap();
    assert!(a.wait_for_table() && b.wait_for_table());
    assert!(std::ptr::eq(
        a.table().unwrap().dfa(),
        b.table().unwrap().dfa()
    ));

    let off = AutoBackend::new(
        vocab,
        AutoConfig {
            tables: false,
            ..AutoConfig::default()
        },
    );
    let g = off.compile_auto(&spec, &CancelToken::new()).unwrap();
    assert_eq!(g.table_state(), TableState::None);
    assert!(!off.background_running());
}

/// Through the registry, with options of its own and earley's.
#[test]
fn the_registry_makes_it_with_its_options() {
    let vocab = tiny();
    let mut config = BackendConfig::default();
    config
        .options
        .insert("table_max_dfa_states".into(), "64".into());
    config.options.insert("max_items".into(), "5000".into());
    let backend = instantiate_backend("auto", &config, vocab.clone()).unwrap();
    assert_eq!(backend.name(), "auto");
    let g = backend.compile(&Constraint::regex("[0-9]+")).unwrap();
    let mut m = g.matcher();
    m.accept_bytes(b"42").unwrap();
    assert!(m.is_accepting());
    config.options.insert("max_dfa_state".into(), "1".into());
    let e = instantiate_backend("auto", &config, vocab).err().unwrap();
    assert!(e.to_string().contains("max_dfa_state"), "{e}");
}

/// A batch fill (rows in parallel from a batch of 64) gives each auto
/// matcher's own mask, whether it is on earley, on the table, or moves
/// during the fill.
#[test]
fn batch_fill_gives_each_matchers_own_row() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let backend = AutoBackend::new(vocab.clone(), config(8));
    let spec = &regular_specs()[3];
    let OnEarley(pinned, grammar) = fresh_on_earley(&backend, spec);
    let prefixes: [&[u8]; 4] = [
        b"",
        b"{\"",
        b"{\"name\": \"a",
        b"{\"name\": \"ab\", \"tags\": [\"x\"",
    ];
    let mut matchers: Vec<Box<dyn GrammarObject>> = Vec::new();
    for i in 0..64 {
        // A quarter stay on earley, a quarter move at the fill, the rest
        // start on the table.
        let mut m = match i % 4 {
            0 => pinned.fork(),
            1 => {
                let mut m = grammar.auto_matcher();
                m.pin_to_earley(true);
                m.reset();
                m.accept_bytes(prefixes[i % 4]).unwrap();
                m.pin_to_earley(false);
                Box::new(m) as Box<dyn GrammarObject>
            }
            _ => grammar.matcher(),
        };
        if i % 4 != 1 {
            m.accept_bytes(prefixes[i % 4]).unwrap();
        }
        matchers.push(m);
    }
    let expected: Vec<Vec<u32>> = matchers
        .iter()
        .map(|m| mask(&mut *m.fork(), words))
        .collect();
    let mut batch = tokensieve_core::TokenBitmask::new(matchers.len(), vocab.vocab_size());
    let mut slots: Vec<Option<&mut dyn GrammarObject>> = matchers
        .iter_mut()
        .map(|m| Some(&mut **m as &mut dyn GrammarObject))
        .collect();
    batch.fill_batch(&mut slots);
    for (i, row) in expected.iter().enumerate() {
        assert_eq!(batch.row(i), row.as_slice(), "row {i}");
    }
}
