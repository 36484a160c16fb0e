//! The `GrammarObject` contract on the earley backend, with the fixture
//! vocabulary `json_tiny` (every byte, a few JSON pieces, `<eos>`) and small
//! GBNF grammars: stop tokens and termination, special and padding ids,
//! all-or-nothing steps, rollback, fork, reset, jump-forward, stats,
//! cancellation, the errors of compile, and the step limits that end a
//! pathological step in a named error.

use std::sync::Arc;

use tokensieve_core::bitmask::{row_allowed_tokens, row_is_allowed};
use tokensieve_core::{
    BackendConfig, CancelToken, CompiledGrammar, Constraint, ConstraintSpec, GrammarBackend,
    GrammarError, GrammarObject, Location, StepError, StructuralTag, TagItem, VocabType,
    Vocabulary, instantiate_backend,
};
use tokensieve_earley::{EarleyBackend, EarleyConfig};

fn tiny() -> Arc<Vocabulary> {
    Arc::new(tokensieve_core::vocab::fixtures::json_tiny())
}

fn backend_with(config: EarleyConfig) -> EarleyBackend {
    EarleyBackend::new(tiny(), config)
}

fn compile(gbnf: &str) -> Arc<dyn CompiledGrammar> {
    backend_with(EarleyConfig::default())
        .compile(&Constraint::ebnf(gbnf, "root"))
        .unwrap_or_else(|e| panic!("{e}\n{gbnf}"))
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../grammar/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The mask, from a row full of garbage (every word must be overwritten).
fn mask(m: &mut dyn GrammarObject, words: usize) -> Vec<u32> {
    let mut row = vec![0xDEAD_BEEF; words];
    m.fill_bitmask(&mut row);
    row
}

fn id(b: u8) -> u32 {
    b as u32
}

/// Everything observable about a matcher's position (stats aside).
#[derive(Debug, PartialEq)]
struct Observed {
    mask: Vec<u32>,
    accepting: bool,
    terminated: bool,
    rollback_available: usize,
    jump_forward: Vec<u8>,
}

fn observe(m: &mut dyn GrammarObject, words: usize) -> Observed {
    Observed {
        mask: mask(m, words),
        accepting: m.is_accepting(),
        terminated: m.is_terminated(),
        rollback_available: m.rollback_available(),
        jump_forward: m.jump_forward(),
    }
}

#[test]
fn stop_tokens_only_when_accepting_and_then_terminated() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let eos = vocab.stop_tokens()[0];
    let g = compile(r#"root ::= "a" ("b" root)?"#);
    let mut m = g.matcher();
    assert!(!row_is_allowed(&mask(&mut *m, words), eos));
    assert_eq!(
        m.accept_token(eos),
        Err(StepError::TokenRejected { token: eos })
    );
    m.accept_token(id(b'a')).unwrap();
    let row = mask(&mut *m, words);
    assert_eq!(
        row_allowed_tokens(&row, vocab.vocab_size()),
        [id(b'b'), eos]
    );
    m.accept_token(id(b'b')).unwrap();
    assert!(!row_is_allowed(&mask(&mut *m, words), eos));
    assert!(m.accept_token(eos).is_err());
    m.accept_token(id(b'a')).unwrap();
    m.accept_token(eos).unwrap();
    assert!(m.is_terminated());
    // After the end: only stop tokens, nothing is accepted.
    let row = mask(&mut *m, words);
    assert_eq!(row_allowed_tokens(&row, vocab.vocab_size()), [eos]);
    assert_eq!(m.accept_token(id(b'b')), Err(StepError::Terminated));
    assert_eq!(m.accept_token(eos), Err(StepError::Terminated));
    assert_eq!(m.accept_bytes(b"b"), Err(StepError::Terminated));
    assert!(m.jump_forward().is_empty());
    assert_eq!(m.stats().tokens_accepted, 4);
    // Rolling the stop token back un-terminates.
    m.rollback(1).unwrap();
    assert!(!m.is_terminated() && m.is_accepting());
    m.accept_token(id(b'b')).unwrap();
    assert!(!m.is_accepting());
}

/// Several stop tokens, special tokens, an empty token and padding rows.
fn odd_vocab() -> Arc<Vocabulary> {
    let vocab = Vocabulary::new(
        VocabType::Raw,
        [
            (b"a".to_vec(), false),
            (b"<s>".to_vec(), true),
            (b"</s>".to_vec(), true),
            (b"aa".to_vec(), false),
            (Vec::new(), false),
            (b"<|eot|>".to_vec(), true),
            (b"b".to_vec(), false),
        ],
    )
    .with_stop_tokens(&[2, 5])
    .unwrap()
    .with_vocab_size(40)
    .unwrap();
    Arc::new(vocab)
}

#[test]
fn special_padding_and_empty_ids_are_invalid_and_never_allowed() {
    let vocab = odd_vocab();
    let backend = EarleyBackend::new(vocab.clone(), EarleyConfig::default());
    let g = backend
        .compile(&Constraint::ebnf(r#"root ::= ("a" | "b")*"#, "root"))
        .unwrap();
    let mut m = g.matcher();
    let row = mask(&mut *m, vocab.mask_words());
    assert_eq!(
        row_allowed_tokens(&row, vocab.vocab_size()),
        [0, 2, 3, 5, 6]
    );
    for bad in [1, 4, 7, 35, 39, 40, 1_000_000] {
        assert_eq!(
            m.accept_token(bad),
            Err(StepError::InvalidToken { token: bad }),
            "id {bad}"
        );
    }
    assert_eq!(m.rollback_available(), 0);
    m.accept_token(3).unwrap();
    // Either stop token ends the output; after it, both are allowed.
    m.fork().accept_token(2).unwrap();
    m.accept_token(5).unwrap();
    let row = mask(&mut *m, vocab.mask_words());
    assert_eq!(row_allowed_tokens(&row, vocab.vocab_size()), [2, 5]);
}

#[test]
fn rejected_steps_leave_the_state_unchanged() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let g = compile(r#"root ::= "ab" ("c" | "[" root "]")"#);
    let mut m = g.matcher();
    m.accept_bytes(b"ab[").unwrap();
    let before = observe(&mut *m, words);
    assert_eq!(
        m.accept_bytes(b"abx"),
        Err(StepError::BytesRejected { offset: 2 })
    );
    assert_eq!(
        m.accept_bytes(b"abc]]"),
        Err(StepError::BytesRejected { offset: 4 })
    );
    assert_eq!(
        m.accept_token(id(b'x')),
        Err(StepError::TokenRejected { token: id(b'x') })
    );
    // `accept_tokens` keeps the tokens before the refused one.
    assert_eq!(
        m.accept_tokens(&[id(b'a'), id(b'b'), id(b'x')]),
        Err(StepError::TokenRejected { token: id(b'x') })
    );
    assert_eq!(m.rollback_available(), 3);
    m.rollback(2).unwrap();
    assert_eq!(observe(&mut *m, words), before);
    m.accept_bytes(b"abc]").unwrap();
    assert!(m.is_accepting());
}

#[test]
fn accept_bytes_is_one_step_for_rollback() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let g = compile(r#"root ::= "[" root "]" | [a-z]+"#);
    let mut m = g.matcher();
    let start = observe(&mut *m, words);
    m.accept_token(id(b'[')).unwrap();
    let after_bracket = observe(&mut *m, words);
    m.accept_bytes(b"[[abc]]").unwrap();
    assert_eq!(m.rollback_available(), 2);
    assert!(!m.is_accepting());
    m.rollback(1).unwrap();
    assert_eq!(observe(&mut *m, words), after_bracket);
    m.rollback(1).unwrap();
    assert_eq!(observe(&mut *m, words), start);
}

/// The JSON fixture grammar, a text that `json_tiny` spells in multi-byte
/// tokens, and its tokens.
fn json_walk() -> (Arc<dyn CompiledGrammar>, Vec<u32>) {
    let vocab = tiny();
    let text = br#"{"name": "the abc", "age": [12, 0.5e-3, {"id": null}]}"#;
    let ids = vocab.encode_greedy(text).unwrap();
    assert_eq!(vocab.decode(&ids), text);
    (compile(&fixture("json.gbnf")), ids)
}

/// A mask filled again in the same state is the same mask, whether the
/// matcher kept it (a summary, a copy of the row) or computes it again: a
/// row is copied only at its second fill, so the first, second and third
/// fills take three different paths. Each fill gets a buffer of garbage.
#[test]
fn filling_again_gives_the_same_mask() {
    let words = tiny().mask_words();
    let (g, ids) = json_walk();
    let mut m = g.matcher();
    let fill = |m: &mut dyn GrammarObject, garbage: u32| {
        let mut row = vec![garbage; words];
        m.fill_bitmask(&mut row);
        row
    };
    for (i, &t) in ids.iter().enumerate() {
        let first = fill(&mut *m, 0);
        assert!(first.iter().any(|&w| w != 0), "step {i}: an empty mask");
        for (k, garbage) in [u32::MAX, 0xA5A5_A5A5, 0].into_iter().enumerate() {
            assert_eq!(fill(&mut *m, garbage), first, "step {i}, fill {}", k + 2);
        }
        m.accept_token(t).unwrap();
    }
    assert_eq!(fill(&mut *m, u32::MAX), fill(&mut *m, 0));
}

#[test]
fn rollback_round_trips_state_and_masks() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let (g, ids) = json_walk();
    let n = ids.len();
    assert!(n > 10 && n < 32, "{n} tokens");
    let mut m = g.matcher();
    let mut seen = vec![observe(&mut *m, words)];
    for &t in &ids {
        m.accept_token(t).unwrap();
        seen.push(observe(&mut *m, words));
    }
    assert!(m.is_accepting());
    m.accept_token(vocab.stop_tokens()[0]).unwrap();
    m.rollback(1).unwrap();
    assert_eq!(observe(&mut *m, words), seen[n]);
    m.rollback(3).unwrap();
    assert_eq!(observe(&mut *m, words), seen[n - 3]);
    // Replay, then roll all the way back, one step and several at a time.
    for (i, &t) in ids.iter().enumerate().skip(n - 3) {
        m.accept_token(t).unwrap();
        assert_eq!(observe(&mut *m, words), seen[i + 1]);
    }
    for k in (n - 5..n).rev() {
        m.rollback(1).unwrap();
        assert_eq!(observe(&mut *m, words), seen[k]);
    }
    let k = m.rollback_available();
    assert_eq!(k, n - 5);
    assert_eq!(
        m.rollback(k + 1),
        Err(StepError::RollbackTooFar {
            requested: k + 1,
            available: k
        })
    );
    // A refused rollback changes nothing.
    assert_eq!(observe(&mut *m, words), seen[n - 5]);
    m.rollback(k).unwrap();
    assert_eq!(observe(&mut *m, words), seen[0]);
    m.rollback(0).unwrap();
    assert_eq!(m.stats().rollbacks, (1 + 3 + 5 + k) as u64);
}

#[test]
fn rollback_history_is_bounded_by_max_rollback() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let (_, ids) = json_walk();
    let json = fixture("json.gbnf");
    let backend = backend_with(EarleyConfig {
        max_rollback: 3,
        ..Default::default()
    });
    let g = backend.compile(&Constraint::ebnf(&*json, "root")).unwrap();
    let mut m = g.matcher();
    let mut seen = vec![observe(&mut *m, words)];
    for &t in &ids[..8] {
        m.accept_token(t).unwrap();
        seen.push(observe(&mut *m, words));
    }
    assert_eq!(m.rollback_available(), 3);
    assert_eq!(
        m.rollback(4),
        Err(StepError::RollbackTooFar {
            requested: 4,
            available: 3
        })
    );
    m.rollback(3).unwrap();
    let mut expected = seen.swap_remove(5);
    expected.rollback_available = 0;
    assert_eq!(observe(&mut *m, words), expected);
    assert_eq!(
        m.rollback(1),
        Err(StepError::RollbackTooFar {
            requested: 1,
            available: 0
        })
    );

    // max_rollback = 0 keeps nothing.
    let none = backend_with(EarleyConfig {
        max_rollback: 0,
        ..Default::default()
    });
    let mut m = none
        .compile(&Constraint::ebnf(&*json, "root"))
        .unwrap()
        .matcher();
    m.accept_token(ids[0]).unwrap();
    assert_eq!(m.rollback_available(), 0);
    assert!(matches!(
        m.rollback(1),
        Err(StepError::RollbackTooFar { .. })
    ));
}

#[test]
fn fork_is_independent() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let eos = vocab.stop_tokens()[0];
    let (g, ids) = json_walk();
    let mut a = g.matcher();
    a.accept_tokens(&ids[..6]).unwrap();
    let a_before = observe(&mut *a, words);
    let mut b = a.fork();
    assert_eq!(observe(&mut *b, words), a_before);
    // Advance the fork to the end and past it; the original stays put.
    b.accept_tokens(&ids[6..]).unwrap();
    b.accept_token(eos).unwrap();
    assert!(b.is_terminated());
    assert_eq!(observe(&mut *a, words), a_before);
    // Roll the fork back further than where it forked.
    b.rollback(ids.len() - 2).unwrap();
    assert_eq!(observe(&mut *a, words), a_before);
    // Advance the original: the fork does not move.
    let b_now = observe(&mut *b, words);
    a.accept_tokens(&ids[6..]).unwrap();
    assert_eq!(observe(&mut *b, words), b_now);
    assert!(a.is_accepting() && !b.is_accepting());
    // A fork keeps the history: it can roll back what came before it.
    let mut c = a.fork();
    c.rollback(ids.len() - 6).unwrap();
    assert_eq!(observe(&mut *c, words), a_before);
    // Forking a terminated matcher gives a terminated one.
    a.accept_token(eos).unwrap();
    let mut d = a.fork();
    assert!(d.is_terminated());
    assert_eq!(d.accept_token(id(b' ')), Err(StepError::Terminated));
}

#[test]
fn reset_goes_back_to_the_start() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let (g, ids) = json_walk();
    let mut fresh = g.matcher();
    let start = observe(&mut *fresh, words);
    let mut m = g.matcher();
    m.accept_tokens(&ids).unwrap();
    m.accept_token(vocab.stop_tokens()[0]).unwrap();
    mask(&mut *m, words);
    m.rollback(2).unwrap();
    m.reset();
    assert_eq!(observe(&mut *m, words), start);
    let s = m.stats();
    assert_eq!((s.tokens_accepted, s.rollbacks), (0, 0));
    assert_eq!(s.compile_time, g.compile_time());
    m.accept_tokens(&ids).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn stats_count_masks_tokens_and_rollbacks() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let g = compile(r#"root ::= [0-9]+ | "(" root ")""#);
    let mut m = g.matcher();
    for _ in 0..3 {
        mask(&mut *m, words);
    }
    m.accept_token(id(b'(')).unwrap();
    m.accept_token(id(b'1')).unwrap();
    m.accept_bytes(b")").unwrap();
    m.accept_token(vocab.stop_tokens()[0]).unwrap();
    m.rollback(2).unwrap();
    let s = m.stats();
    assert_eq!(s.masks, 3);
    assert!(s.mask_time_max <= s.mask_time_total);
    // Byte runs are steps, not tokens.
    assert_eq!(s.tokens_accepted, 3);
    assert_eq!(s.rollbacks, 2);
    assert_eq!(s.compile_time, g.compile_time());
    assert!(g.memory_bytes() > 0);
}

#[test]
fn masks_are_utf8_correct_at_the_byte_level() {
    let vocab = tiny();
    let words = vocab.mask_words();
    for (gbnf, allowed_bytes, refused_bytes) in [
        // Any character but `a`: lead bytes of 2-, 3- and 4-byte characters,
        // never a lone continuation byte or a byte UTF-8 never uses.
        (
            "root ::= [^a]",
            &[0xC2, 0xC3, 0xDF, 0xE0, 0xE6, 0xEF, 0xF0, 0xF4][..],
            &[b'a', 0x80, 0xA9, 0xBF, 0xC0, 0xC1, 0xF5, 0xFF][..],
        ),
        ("root ::= \"é\"", &[0xC3][..], &[0xC2, 0xA9, 0xE9][..]),
        ("root ::= [é-ê] \"!\"", &[0xC3][..], &[0xC2, 0xC4, 0xA9][..]),
        (
            "root ::= [^\"\\\\]*",
            &[0xC3, 0xF0][..],
            &[b'"', b'\\', 0x80, 0xFF][..],
        ),
    ] {
        let g = compile(gbnf);
        let mut m = g.matcher();
        let row = mask(&mut *m, words);
        for &b in allowed_bytes {
            assert!(row_is_allowed(&row, id(b)), "{gbnf}: {b:#X} refused");
        }
        for &b in refused_bytes {
            assert!(!row_is_allowed(&row, id(b)), "{gbnf}: {b:#X} allowed");
        }
        // The whole vocabulary, at the start and inside a character.
        for prefix in [&b""[..], &[0xC3][..]] {
            let mut m = g.matcher();
            if m.accept_bytes(prefix).is_err() {
                continue;
            }
            let row = mask(&mut *m, words);
            for t in 0..vocab.vocab_size() as u32 {
                assert_eq!(
                    row_is_allowed(&row, t),
                    m.fork().accept_token(t).is_ok(),
                    "{gbnf} after {prefix:X?}: {:?}",
                    vocab.token_bytes(t)
                );
            }
        }
    }
    // Inside é only its continuation byte is allowed.
    let mut m = compile("root ::= \"é\" | \"ê\"").matcher();
    m.accept_bytes(&[0xC3]).unwrap();
    let row = mask(&mut *m, words);
    assert_eq!(row_allowed_tokens(&row, vocab.vocab_size()), [0xA9, 0xAA]);
}

/// Rows shorter or longer than `mask_words` (a caller's mistake) are
/// filled as far as they go, never a panic; the words past the vocabulary
/// are zero.
#[test]
fn short_or_long_rows_never_panic() {
    let vocab = tiny();
    let g = compile("root ::= [a-z]+");
    let mut m = g.matcher();
    let mut short = vec![u32::MAX; 2];
    m.fill_bitmask(&mut short);
    m.fill_bitmask(&mut short);
    assert_eq!(short, [0, 0]); // ids 0 to 63: no letter among them
    let mut m = g.matcher();
    let mut long = vec![u32::MAX; vocab.mask_words() + 3];
    m.fill_bitmask(&mut long);
    m.fill_bitmask(&mut long);
    assert!(long[vocab.mask_words()..].iter().all(|&w| w == 0));
    assert!(row_is_allowed(&long, id(b'z')));
}

/// The same where the mask allows one token, which a summary keeps as a
/// list of ids rather than a row.
#[test]
fn short_rows_of_a_mask_of_few_tokens_never_panic() {
    let vocab = tiny();
    let g = compile("root ::= \"z\"");
    let mut m = g.matcher();
    let mut short = vec![u32::MAX; 2];
    m.fill_bitmask(&mut short);
    m.fill_bitmask(&mut short);
    assert_eq!(short, [0, 0]); // ids 0 to 63: no letter among them
    let mut row = vec![u32::MAX; vocab.mask_words()];
    m.fill_bitmask(&mut row);
    assert!(row_is_allowed(&row, id(b'z')));
    let allowed: u32 = row.iter().map(|w| w.count_ones()).sum();
    assert_eq!(allowed, 1);
}

/// The same, with the row length changing between two masks of one
/// matcher in the same state (the second mask comes from the kept one).
#[test]
fn rows_of_changing_length_never_panic() {
    let vocab = tiny();
    let g = compile("root ::= [a-z]+");
    let mut m = g.matcher();
    let mut short = vec![u32::MAX; 2];
    m.fill_bitmask(&mut short);
    let mut long = vec![u32::MAX; vocab.mask_words() + 3];
    m.fill_bitmask(&mut long);
    assert!(long[vocab.mask_words()..].iter().all(|&w| w == 0));
    assert!(row_is_allowed(&long, id(b'z')));
    // Ids 0 to 63: no letter among them.
    m.fill_bitmask(&mut short);
    assert_eq!(short, [0, 0]);
}

fn jump_forward(gbnf: &str, prefix: &[u8]) -> Vec<u8> {
    let mut m = compile(gbnf).matcher();
    m.accept_bytes(prefix)
        .unwrap_or_else(|e| panic!("{prefix:?}: {e}\n{gbnf}"));
    m.jump_forward()
}

#[test]
fn jump_forward_follows_certain_bytes() {
    let g = r#"root ::= "{\"name\": " [0-9]+ "}""#;
    assert_eq!(jump_forward(g, b""), br#"{"name": "#);
    assert_eq!(jump_forward(g, b"{\"na"), br#"me": "#);
    assert_eq!(jump_forward(g, br#"{"name": "#), b""); // any of ten digits
    assert_eq!(jump_forward(g, br#"{"name": 4"#), b""); // a digit or `}`
    assert_eq!(jump_forward(g, br#"{"name": 4}"#), b""); // the end
    // Through rules: predicted, then completed.
    let g = r#"
root  ::= pair ("," pair)*
pair  ::= "<" key "=" value ">"
key   ::= "k"
value ::= [0-9] | "(" pair ")"
"#;
    assert_eq!(jump_forward(g, b""), b"<k=");
    assert_eq!(jump_forward(g, b"<k=("), b"<k=");
    assert_eq!(jump_forward(g, b"<k=(<k=1"), b">)>");
    // Accepting: the output may end here, so nothing is certain.
    assert_eq!(jump_forward(g, b"<k=1>"), b"");
    // The builtin JSON grammar starts with `{`, then anything may come.
    let backend = backend_with(EarleyConfig::default());
    let m = backend
        .compile(&Constraint::new(ConstraintSpec::JsonObject))
        .unwrap()
        .matcher();
    assert_eq!(m.jump_forward(), b"{");
}

#[test]
fn jump_forward_is_empty_at_a_choice_or_where_output_may_end() {
    assert_eq!(jump_forward(r#"root ::= "yes" | "no""#, b""), b"");
    assert_eq!(jump_forward(r#"root ::= "[" root "]" | "x""#, b""), b"");
    assert_eq!(
        jump_forward(r#"root ::= "[" root "]" | "x""#, b"[[x"),
        b"]]"
    );
    assert_eq!(jump_forward(r#"root ::= "ab" "c"?"#, b""), b"ab");
    assert_eq!(jump_forward(r#"root ::= "ab" "c"?"#, b"ab"), b"");
    assert_eq!(jump_forward(r#"root ::= "ab" | "abc""#, b"a"), b"b");
    assert_eq!(jump_forward(r#"root ::= "ab" | "abc""#, b"ab"), b"");
    assert_eq!(jump_forward(r#"root ::= "" | "x""#, b""), b"");
}

#[test]
fn jump_forward_never_splits_a_character() {
    // é = C3 A9, ê = C3 AA: the shared lead byte alone is never jumped.
    let g = r#"root ::= "x" [0-9] "é!""#;
    assert_eq!(jump_forward(g, b""), b"x");
    assert_eq!(jump_forward(g, b"x5"), "é!".as_bytes());
    // Inside a character, the rest of it is certain.
    assert_eq!(jump_forward(g, b"x5\xC3"), b"\xA9!");
    let g = r#"root ::= "ab" ("é!" | "ê?")"#;
    assert_eq!(jump_forward(g, b""), b"ab");
    assert_eq!(jump_forward(g, b"ab"), b"");
    // 本 = E6 9C AC, 未 = E6 9C AA: two certain bytes, cut back to "x日".
    assert_eq!(
        jump_forward(r#"root ::= "x日" ("本" | "未")"#, b""),
        "x日".as_bytes()
    );
    // 😀 = F0 9F 98 80, 😁 = .. 81: three certain bytes, none kept.
    let g = r#"root ::= "a" ("😀" | "😁") "b""#;
    assert_eq!(jump_forward(g, b""), b"a");
    assert_eq!(jump_forward(g, b"a"), b"");
    assert_eq!(jump_forward(g, "a😀".as_bytes()), b"b");
    // Certain bytes through a rule, ending in a whole character.
    let g = "root ::= \"<\" tail\ntail ::= \"日本\" | \"日本語\"";
    assert_eq!(jump_forward(g, b""), "<日本".as_bytes());
}

#[test]
fn jump_forward_bytes_are_accepted_as_one_step() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let g = compile(r#"root ::= "{\"name\": " [0-9]+ "}""#);
    let mut m = g.matcher();
    let jf = m.jump_forward();
    m.accept_bytes(&jf).unwrap();
    assert_eq!(m.rollback_available(), 1);
    let row = mask(&mut *m, words);
    let allowed: Vec<u32> = row_allowed_tokens(&row, vocab.vocab_size());
    let digits: Vec<u32> = (b'0'..=b'9').map(id).collect();
    // Digits and the multi-digit tokens of json_tiny ("00", "12", "123").
    assert!(digits.iter().all(|d| allowed.contains(d)), "{allowed:?}");
    assert!(
        allowed
            .iter()
            .all(|&t| { vocab.token_bytes(t).iter().all(u8::is_ascii_digit) })
    );
    m.rollback(1).unwrap();
    assert_eq!(m.jump_forward(), jf);
}

#[test]
fn compile_cancellable_stops_when_cancelled() {
    let backend = backend_with(EarleyConfig::default());
    let cancel = CancelToken::new();
    cancel.cancel();
    for constraint in [
        Constraint::ebnf(fixture("json.gbnf"), "root"),
        Constraint::ebnf(r#"root ::= "a""#, "root"),
        Constraint::new(ConstraintSpec::JsonObject),
        Constraint::regex("[a-z]+"),
        Constraint::choice(["yes", "no"]),
    ] {
        assert_eq!(
            backend
                .compile_cancellable(&constraint, &cancel)
                .err()
                .map(|e| e.to_string()),
            Some(GrammarError::Cancelled.to_string()),
            "{constraint:?}"
        );
        assert!(
            matches!(
                backend.compile_earley(&constraint, &cancel),
                Err(GrammarError::Cancelled)
            ),
            "{constraint:?}"
        );
        // Not cancelled: it compiles.
        backend
            .compile_cancellable(&constraint, &CancelToken::new())
            .unwrap();
    }
}

#[test]
fn specs_it_cannot_serve_are_errors_saying_so() {
    let backend = backend_with(EarleyConfig::default());
    // Recursion with an indented layout would need a rule per depth.
    let mut indented = Constraint::json_schema(
        r##"{"type": "object", "properties": {"next": {"$ref": "#"}}, "additionalProperties": false}"##,
    );
    indented.options.whitespace = tokensieve_core::Whitespace::Fixed {
        item_separator: ",".into(),
        key_separator: ": ".into(),
        indent: Some(2),
    };
    match backend.compile(&indented) {
        Err(GrammarError::Unsupported { what, .. }) => {
            assert!(what.contains("indented layout"), "{what}");
        }
        other => panic!("{:?}", other.err()),
    }
    assert!(matches!(
        backend.compile(&Constraint::choice(Vec::<String>::new())),
        Err(GrammarError::InvalidSpec(_))
    ));
}

fn tag(content: ConstraintSpec) -> Constraint {
    Constraint::new(ConstraintSpec::StructuralTag(StructuralTag {
        triggers: vec!["<f=".into()],
        tags: vec![TagItem {
            begin: "<f=n>".into(),
            content: Box::new(content),
            end: "</f>".into(),
        }],
    }))
}

#[test]
fn structural_tags_take_context_free_contents_and_schemas() {
    let backend = backend_with(EarleyConfig::default());
    let g = backend
        .compile(&tag(ConstraintSpec::Ebnf {
            grammar: r#"root ::= "[" root "]" | [0-9]+"#.into(),
            root: "root".into(),
        }))
        .unwrap();
    for (text, ok) in [
        ("ok <f=n>[[42]]</f> done", true),
        ("no tags at all", true),
        ("ok <f=n>[[42]</f>", false),
        ("ok <f=n>x</f>", false),
        ("ok <f=m>1</f>", false),
    ] {
        let mut m = g.matcher();
        let full = m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting();
        assert_eq!(full, ok, "{text}");
    }
    // A JSON Schema content, recursive too.
    let g = backend
        .compile(&tag(ConstraintSpec::JsonSchema(
            r##"{"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}}"##
                .into(),
        )))
        .unwrap();
    for (text, ok) in [
        ("ok <f=n>[1, [2, [[]]]]</f>", true),
        ("ok <f=n>[1, [\"x\"]]</f>", false),
    ] {
        let mut m = g.matcher();
        let full = m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting();
        assert_eq!(full, ok, "{text}");
    }
    let nested = tag(tag(ConstraintSpec::Regex("1".into())).spec);
    assert!(matches!(
        backend.compile(&nested),
        Err(GrammarError::InvalidSpec(_))
    ));
}

#[test]
fn bad_grammars_name_the_line_and_column() {
    let backend = backend_with(EarleyConfig::default());
    for (gbnf, line, column) in [
        // An unterminated string on line 2.
        ("root ::= item\nitem ::= \"abc\n", 2, 10),
        // A rule that is never defined.
        ("root ::= \"a\" item\n", 1, 14),
        // A rule that can never finish.
        ("root ::= \"a\" | loop\nloop ::= \"(\" loop\n", 2, 1),
        // A character class that is not closed.
        ("root ::= [a-z\n", 1, 10),
    ] {
        match backend.compile(&Constraint::ebnf(gbnf, "root")) {
            Err(e @ GrammarError::InvalidGrammar { .. }) => {
                let GrammarError::InvalidGrammar { location, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(
                    *location,
                    Location::LineColumn { line, column },
                    "{gbnf:?}: {e}"
                );
                assert!(
                    e.to_string()
                        .contains(&format!("line {line}, column {column}")),
                    "{e}"
                );
            }
            other => panic!("{gbnf:?}: {:?}", other.err()),
        }
    }
}

/// `s ::= s s | "a"`: after n `a`s the set holds O(n) items and closing it
/// costs O(n²) work, so a small limit is soon reached.
const AMBIGUOUS: &str = "root ::= s\ns ::= s s | \"a\"";

/// Feeds `a`s until a step fails; returns the error and the steps taken.
fn feed_until_limit(m: &mut dyn GrammarObject) -> (StepError, usize) {
    for n in 0..10_000 {
        if let Err(e) = m.accept_token(id(b'a')) {
            return (e, n);
        }
    }
    panic!("no limit reached in 10,000 tokens");
}

#[test]
fn an_ambiguous_grammar_hits_max_items_and_poisons_the_matcher() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let backend = backend_with(EarleyConfig {
        max_items: 64,
        ..Default::default()
    });
    let g = backend
        .compile(&Constraint::ebnf(AMBIGUOUS, "root"))
        .unwrap();
    let mut m = g.matcher();
    let (e, n) = feed_until_limit(&mut *m);
    assert!(
        matches!(&e, StepError::LimitExceeded { knob, limit: 64, .. } if knob == "max_items"),
        "{e}"
    );
    assert!(n > 5, "the limit hit after only {n} tokens");
    assert!(e.to_string().contains("max_items"), "{e}");
    // Refuses everything after, with the reason.
    for next in [
        m.accept_token(id(b'a')),
        m.accept_bytes(b"a"),
        m.accept_token(vocab.stop_tokens()[0]),
        m.rollback(1),
    ] {
        match next {
            Err(StepError::Poisoned(why)) => assert!(why.contains("max_items"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(!m.is_accepting());
    assert!(m.jump_forward().is_empty());
    assert!(mask(&mut *m, words).iter().all(|&w| w == 0));
    // A fork of a poisoned matcher is poisoned; reset starts afresh.
    assert!(matches!(
        m.fork().accept_token(id(b'a')),
        Err(StepError::Poisoned(_))
    ));
    m.reset();
    m.accept_token(id(b'a')).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn an_ambiguous_grammar_hits_max_step_work() {
    let backend = backend_with(EarleyConfig {
        max_step_work: 2_000,
        ..Default::default()
    });
    let g = backend
        .compile(&Constraint::ebnf(AMBIGUOUS, "root"))
        .unwrap();
    let mut m = g.matcher();
    let (e, n) = feed_until_limit(&mut *m);
    assert!(
        matches!(&e, StepError::LimitExceeded { knob, limit: 2_000, .. } if knob == "max_step_work"),
        "{e}"
    );
    assert!(n > 5, "the limit hit after only {n} tokens");
    assert!(matches!(
        m.accept_token(id(b'a')),
        Err(StepError::Poisoned(why)) if why.contains("max_step_work")
    ));
    // One byte run is one step: the same input in one piece fails at once.
    let mut m = g.matcher();
    let e = m.accept_bytes(&vec![b'a'; 10 * n]).unwrap_err();
    assert!(
        matches!(&e, StepError::LimitExceeded { knob, .. } if knob == "max_step_work"),
        "{e}"
    );
}

/// A mask that runs out of `max_step_work` poisons the matcher and holds
/// only tokens proven acceptable: never a wider mask. Before the limit,
/// masks agree with `accept_token` on every token.
#[test]
fn a_mask_cut_short_by_a_limit_is_never_wider() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let backend = backend_with(EarleyConfig {
        max_step_work: 400,
        ..Default::default()
    });
    let g = backend
        .compile(&Constraint::ebnf(
            "root ::= s\ns ::= s s | \"a\" | \"(\" s \")\"",
            "root",
        ))
        .unwrap();
    let mut m = g.matcher();
    for n in 0..1_000 {
        let before = m.fork();
        let row = mask(&mut *m, words);
        let poisoned = matches!(m.accept_bytes(b""), Err(StepError::Poisoned(_)));
        for t in 0..vocab.vocab_size() as u32 {
            let took = before.fork().accept_token(t);
            if poisoned {
                if row_is_allowed(&row, t) {
                    assert!(
                        !matches!(took, Err(StepError::TokenRejected { .. })),
                        "after {n} tokens: token {t} allowed but refused"
                    );
                }
            } else {
                assert_eq!(row_is_allowed(&row, t), took.is_ok(), "after {n}: {t}");
            }
        }
        if poisoned {
            assert!(n > 3, "poisoned after only {n} tokens");
            assert!(matches!(
                m.accept_token(id(b'a')),
                Err(StepError::Poisoned(why)) if why.contains("max_step_work")
            ));
            assert!(!row_is_allowed(&row, vocab.stop_tokens()[0]));
            return;
        }
        m.rollback(1).unwrap(); // the empty byte run above
        m.accept_token(id(b'a')).unwrap();
    }
    panic!("no mask ran out of max_step_work");
}

#[test]
fn limits_come_through_the_registry() {
    std::hint::black_box(tokensieve_earley::BACKEND_NAME);
    let mut config = BackendConfig {
        max_rollback: 2,
        ..Default::default()
    };
    config.options.insert("max_items".into(), "64".into());
    let backend = instantiate_backend("earley", &config, tiny()).unwrap();
    assert_eq!(backend.name(), "earley");
    let mut m = backend
        .compile(&Constraint::ebnf(AMBIGUOUS, "root"))
        .unwrap()
        .matcher();
    for _ in 0..4 {
        m.accept_token(id(b'a')).unwrap();
    }
    assert_eq!(m.rollback_available(), 2);
    let (e, _) = feed_until_limit(&mut *m);
    assert!(e.to_string().contains("max_items"), "{e}");
    config.options.insert("max_items".into(), "0".into());
    assert!(instantiate_backend("earley", &config, tiny()).is_err());
}

#[test]
fn ten_thousand_nested_arrays_are_accepted() {
    let vocab = tiny();
    let words = vocab.mask_words();
    let depth = 10_000;
    let backend = backend_with(EarleyConfig::default());
    for (name, constraint, open, close) in [
        (
            "json_object",
            Constraint::new(ConstraintSpec::JsonObject),
            &br#"{"a": "#[..],
            &b"}"[..],
        ),
        (
            "json.gbnf",
            Constraint::ebnf(fixture("json.gbnf"), "root"),
            &b""[..],
            &b""[..],
        ),
    ] {
        let g = backend.compile(&constraint).unwrap();
        let mut m = g.matcher();
        m.accept_bytes(open).unwrap();
        for _ in 0..depth {
            m.accept_token(id(b'[')).unwrap();
        }
        // Deep inside: another array, a value or a closing bracket; never
        // the end of the output or a closing brace.
        let row = mask(&mut *m, words);
        for t in [b'[', b']', b'1', b'"', b'{'] {
            assert!(row_is_allowed(&row, id(t)), "{name}: {:?}", t as char);
        }
        assert!(!row_is_allowed(&row, id(b'}')), "{name}");
        assert!(!row_is_allowed(&row, vocab.stop_tokens()[0]), "{name}");
        m.accept_token(id(b'7')).unwrap();
        let fork = m.fork();
        for i in 0..depth {
            if i % 2_500 == 0 {
                let row = mask(&mut *m, words);
                assert!(row_is_allowed(&row, id(b']')) && !row_is_allowed(&row, id(b'}')));
            }
            m.accept_token(id(b']')).unwrap();
        }
        assert!(m.accept_token(id(b']')).is_err(), "{name}");
        m.accept_bytes(close).unwrap();
        assert!(m.is_accepting(), "{name}");
        m.accept_token(vocab.stop_tokens()[0]).unwrap();
        // Dropping a chart 10,000 sets deep is a loop, not a recursion.
        drop(m);
        drop(fork);
        drop(g);
    }
}

/// Lexemes built afresh for a compile (`shared_lexemes: false`, a cold
/// benchmark) give the same matcher as lexemes shared process-wide: the
/// same observations at every step of a walk.
#[test]
fn unshared_lexemes_match_like_shared_ones() {
    let (_, ids) = json_walk();
    let words = tiny().mask_words();
    let grammar = fixture("json.gbnf");
    let cold = EarleyConfig {
        shared_lexemes: false,
        ..EarleyConfig::default()
    };
    let compiled: Vec<Arc<dyn CompiledGrammar>> = [EarleyConfig::default(), cold]
        .into_iter()
        .map(|c| {
            backend_with(c)
                .compile(&Constraint::ebnf(&grammar, "root"))
                .unwrap()
        })
        .collect();
    let mut shared = compiled[0].matcher();
    let mut fresh = compiled[1].matcher();
    for &t in &ids {
        assert_eq!(
            observe(shared.as_mut(), words),
            observe(fresh.as_mut(), words)
        );
        shared.accept_token(t).unwrap();
        fresh.accept_token(t).unwrap();
    }
    assert_eq!(
        observe(shared.as_mut(), words),
        observe(fresh.as_mut(), words)
    );
    assert!(fresh.is_accepting());
}

/// Mask summaries kept from one compile serve the next compile of the same
/// constraint only when it has the very same lexemes. A cold backend
/// (`shared_lexemes: false`) builds its lexemes afresh, and a lazily built
/// lexeme numbers its states in the order walks reach them: walking one
/// branch after the first compile and the other after the second gives the
/// same ids to different states, so a summary kept from the first must not
/// answer for the second. (Tokens are at most a few bytes, so each mask
/// reaches only a few states ahead.)
#[test]
fn kept_summaries_never_answer_for_other_lexemes() {
    let cold = EarleyConfig {
        shared_lexemes: false,
        ..EarleyConfig::default()
    };
    let a = [&[b'a'; 40][..], b"1"].concat();
    let b = [&[b'b'; 40][..], b"2"].concat();
    let gbnf = format!(
        r#"root ::= "{}" | "{}""#,
        String::from_utf8_lossy(&a),
        String::from_utf8_lossy(&b)
    );
    let constraint = Constraint::ebnf(gbnf, "root");
    let masks_along = |backend: &EarleyBackend, text: &[u8]| {
        let g = backend.compile(&constraint).unwrap();
        let mut m = g.matcher();
        let words = backend.vocabulary().mask_words();
        let mut masks = Vec::new();
        for &b in text {
            masks.push(mask(&mut *m, words));
            m.accept_token(id(b)).unwrap();
        }
        masks
    };
    let backend = backend_with(cold.clone());
    masks_along(&backend, &a);
    let second = masks_along(&backend, &b);
    assert_eq!(second, masks_along(&backend_with(cold), &b));
}
