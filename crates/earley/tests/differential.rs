//! The matcher against the reference recognizer (`Grammar::accepts`), byte
//! by byte, on random grammars and on hand-written ones; and its masks
//! against `accept_token`, token by token, on a small vocabulary.

use std::sync::Arc;

use tokensieve_core::bitmask::row_is_allowed;
use tokensieve_core::testing::SplitMix64;
use tokensieve_core::{Constraint, GrammarBackend, GrammarObject, Vocabulary};
use tokensieve_earley::{EarleyBackend, EarleyConfig};
use tokensieve_grammar::Grammar;
use tokensieve_grammar::testing::{mutate, random_gbnf, random_sentence, random_text};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../grammar/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Hand-written grammars: (name, GBNF).
fn hand_written() -> Vec<(&'static str, String)> {
    vec![
        ("json", fixture("json.gbnf")),
        ("arithmetic", fixture("arithmetic.gbnf")),
        ("list", fixture("list.gbnf")),
        ("chess", fixture("chess.gbnf")),
        ("c_identifiers", fixture("c_identifiers.gbnf")),
        (
            "brackets",
            r#"root ::= ( "(" root ")" | "[" root "]" | "{" root "}" | [a-c] )*"#.into(),
        ),
        (
            "expr",
            r#"
root   ::= expr
expr   ::= expr [-+] term | term
term   ::= term [*/] factor | factor
factor ::= "-" factor | "(" expr ")" | [0-9]+ ("." [0-9]+)?
"#
            .into(),
        ),
        (
            "sql",
            r#"
root    ::= select ";"
select  ::= "SELECT " cols " FROM " ident where? 
cols    ::= "*" | ident (", " ident)*
where   ::= " WHERE " cond
cond    ::= cond " AND " cond | cond " OR " cond | "(" cond ")" | ident " = " value | ident " IN (" select ")"
value   ::= [0-9]+ | "'" [^']* "'"
ident   ::= [a-z_] [a-z0-9_]*
"#
            .into(),
        ),
        (
            "left_list",
            r#"
root ::= list
list ::= list "," item | item
item ::= [a-z]+ | "<" list ">"
"#
            .into(),
        ),
        (
            "ambiguous",
            r#"
root ::= s
s ::= s s | "a" | "" | "b" s "b"
"#
            .into(),
        ),
        // Tokens that end a string and start the next one, or end a key
        // and hold its value: a lexeme item alone at a node, ending
        // deeper in the token (its exits), the parser going on from there.
        (
            "strings",
            r#"
root ::= "[" ( str ("," str)* )? "]" | "{" ( key num ("," key num)* )? "}"
str  ::= "\"" [a-z]* "\""
key  ::= "\"" [a-z0-9]+ "\":"
num  ::= [0-9]+ | "[" num "]"
"#
            .into(),
        ),
        // Sets of a few lexeme items and of more than a mask summarizes
        // item by item (one walk from the trie root then).
        ("many_keys_12", many_keys(12)),
        ("many_keys_300", many_keys(300)),
    ]
}

/// An object of `n` optional members in order, each its own key, then any
/// other keys, values nesting: the set at a key holds a key lexeme per
/// member still to come, and one for any key.
fn many_keys(n: usize) -> String {
    let mut g = String::from("root ::= \"{\" ");
    for i in 0..n {
        g += &format!("m{i}? ");
    }
    g += "extra* \"}\"\n";
    for i in 0..n {
        g += &format!(r#"m{i} ::= "\"k{i}\":" value ",""#);
        g += "\n";
    }
    // A recursive value: the members are rules, not one regular lexeme.
    g += r#"extra ::= "\"" [a-z]+ "\":" value ","
value ::= [0-9] | "[" value "]""#;
    g
}

/// Every single byte, some multi-byte pieces of the grammars above, and a
/// stop token.
fn small_vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
    for t in [
        "ab", "ba", "a(", "()", ")a", "((", "))", "é", "(é", "é)", "bc", "ca)", "\":", "\": ",
        "{\"", "\"}", "[]", "{}", "12", "1.5", "e-", ", ", "SELECT", " FROM ", "_id", " = ", "'x'",
        "aa", "aaa", "bb", "<a", ">,", "- ", "\n", "  ", "true", "nul", "\\u", ",\"", "\"k", "k1",
        ":1", "a\",\"b", "ab\",", "\",\"\"", "b\"]", "aa\",\"", "k1\":1,", "a1\":[", "12,\"",
        "\"a\":1}",
    ] {
        tokens.push((t.as_bytes().to_vec(), false));
    }
    tokens.push((b"<eos>".to_vec(), true));
    let eos = tokens.len() as u32 - 1;
    Arc::new(
        Vocabulary::new(tokensieve_core::VocabType::Raw, tokens)
            .with_stop_tokens(&[eos])
            .unwrap(),
    )
}

fn backend(vocab: &Arc<Vocabulary>) -> EarleyBackend {
    EarleyBackend::new(vocab.clone(), EarleyConfig::default())
}

/// The matcher's verdict on a whole text.
fn matcher_accepts(m: &mut dyn GrammarObject, text: &[u8]) -> bool {
    m.reset();
    m.accept_bytes(text).is_ok() && m.is_accepting()
}

/// Byte-level verdicts on sentences of the grammar, their near misses and
/// random texts must equal the recognizer's.
fn check_verdicts(name: &str, gbnf: &str, backend: &EarleyBackend, r: &mut SplitMix64) -> usize {
    let g = Grammar::from_gbnf(gbnf, "root").unwrap();
    let compiled = backend
        .compile(&Constraint::ebnf(gbnf, "root"))
        .unwrap_or_else(|e| panic!("{name}: {e}\n{gbnf}"));
    let mut m = compiled.matcher();
    let alphabet: Vec<u8> = b"ab()[]{}<>,;=*+-. 0123456789\"'\n\\e"
        .iter()
        .copied()
        .chain([0xC3, 0xA9])
        .collect();
    let mut checked = 0;
    for _ in 0..30 {
        let sentence = random_sentence(&g, r, 6);
        assert!(
            g.accepts(&sentence),
            "{name}: the sampler made a non-sentence"
        );
        assert!(
            matcher_accepts(&mut *m, &sentence),
            "{name}: rejects {:?}\n{gbnf}",
            String::from_utf8_lossy(&sentence)
        );
        for _ in 0..4 {
            let near = mutate(&sentence, &alphabet, r);
            assert_eq!(
                matcher_accepts(&mut *m, &near),
                g.accepts(&near),
                "{name}: on {:?}\n{gbnf}",
                String::from_utf8_lossy(&near)
            );
            checked += 1;
        }
        let text = random_text(r, 8);
        assert_eq!(
            matcher_accepts(&mut *m, &text),
            g.accepts(&text),
            "{name}: on {:?}\n{gbnf}",
            String::from_utf8_lossy(&text)
        );
        checked += 2;
    }
    checked
}

#[test]
fn hand_written_grammars_agree_with_the_recognizer() {
    let vocab = small_vocab();
    let backend = backend(&vocab);
    let mut r = SplitMix64(11);
    for (name, gbnf) in hand_written() {
        check_verdicts(name, &gbnf, &backend, &mut r);
    }
}

/// The same with lexeme DFAs built whole at compile (`lazy_lexemes:
/// false`), the form JSON Schema pieces take.
#[test]
fn eager_lexemes_agree_with_the_recognizer() {
    let vocab = small_vocab();
    let config = EarleyConfig {
        lazy_lexemes: false,
        ..EarleyConfig::default()
    };
    let backend = EarleyBackend::new(vocab.clone(), config);
    let mut r = SplitMix64(12);
    for (name, gbnf) in hand_written() {
        check_verdicts(name, &gbnf, &backend, &mut r);
    }
    for _ in 0..100 {
        let gbnf = random_gbnf(&mut r);
        if Grammar::from_gbnf(&gbnf, "root").is_ok() {
            check_verdicts("random", &gbnf, &backend, &mut r);
        }
    }
}

/// A lazily built lexeme that reaches its state limit mid-walk ends the
/// walk in an error naming the limit; the matcher refuses everything after
/// (its masks hold only what was proven before), and a new compile of the
/// same grammar starts from a new lexeme.
#[test]
fn a_lazy_lexeme_past_its_state_limit_is_a_step_error() {
    let vocab = small_vocab();
    let config = EarleyConfig {
        max_dfa_states: 24,
        ..EarleyConfig::default()
    };
    let backend = EarleyBackend::new(vocab.clone(), config);
    // The eighth letter from the end is an `a`: 256 DFA states.
    let gbnf = r#"root ::= "(" [ab]* "a" [ab] [ab] [ab] [ab] [ab] [ab] [ab] ")" | "[" root "]""#;
    for _ in 0..2 {
        let g = backend.compile(&Constraint::ebnf(gbnf, "root")).unwrap();
        let mut m = g.matcher();
        m.accept_bytes(b"[(ab").unwrap();
        let err = m.accept_bytes(b"aabbbabaabbaababbbab").unwrap_err();
        assert!(err.to_string().contains("max_dfa_states"), "{err}");
        assert!(m.accept_bytes(b")").is_err(), "refused after the error");
        let mut row = vec![u32::MAX; vocab.mask_words()];
        m.fill_bitmask(&mut row);
        assert!(row.iter().all(|&w| w == 0), "nothing is allowed after");
        // Below the limit all is well.
        let mut m = backend
            .compile(&Constraint::ebnf(gbnf, "root"))
            .unwrap()
            .matcher();
        m.accept_bytes(b"[(abbbbbbb)]").unwrap();
        assert!(m.is_accepting());
    }
}

#[test]
fn random_grammars_agree_with_the_recognizer() {
    let vocab = small_vocab();
    let backend = backend(&vocab);
    let mut r = SplitMix64(0x5EED);
    let mut grammars = 0;
    for _ in 0..300 {
        let gbnf = random_gbnf(&mut r);
        if Grammar::from_gbnf(&gbnf, "root").is_err() {
            continue;
        }
        grammars += 1;
        check_verdicts("random", &gbnf, &backend, &mut r);
    }
    assert!(grammars > 150, "only {grammars} random grammars were valid");
}

/// At every step of a walk, the mask allows exactly the tokens that
/// `accept_token` takes (every token of the small vocabulary), and the stop
/// token exactly when the output may end.
fn check_masks(name: &str, gbnf: &str, vocab: &Arc<Vocabulary>, r: &mut SplitMix64) {
    let g = Grammar::from_gbnf(gbnf, "root").unwrap();
    let compiled = backend(vocab)
        .compile(&Constraint::ebnf(gbnf, "root"))
        .unwrap();
    let eos = vocab.stop_tokens()[0];
    let mut row = vec![0u32; vocab.mask_words()];
    for _ in 0..6 {
        let sentence = random_sentence(&g, r, 5);
        let mut m = compiled.matcher();
        let mut at = 0;
        loop {
            m.fill_bitmask(&mut row);
            for t in 0..vocab.vocab_size() as u32 {
                let took = m.fork().accept_token(t).is_ok();
                assert_eq!(
                    row_is_allowed(&row, t),
                    took,
                    "{name}: token {:?} after {:?}\n{gbnf}",
                    String::from_utf8_lossy(vocab.token_bytes(t)),
                    String::from_utf8_lossy(&sentence[..at])
                );
            }
            assert_eq!(row_is_allowed(&row, eos), m.is_accepting());
            if at == sentence.len() {
                break;
            }
            // Advance by a random allowed token that is a prefix of the rest.
            let rest = &sentence[at..];
            let fits: Vec<u32> = (0..vocab.vocab_size() as u32)
                .filter(|&t| {
                    vocab
                        .grammar_bytes(t)
                        .is_some_and(|b| rest.starts_with(b) && row_is_allowed(&row, t))
                })
                .collect();
            assert!(!fits.is_empty(), "{name}: no token continues {rest:?}");
            let t = fits[r.below(fits.len())];
            m.accept_token(t).unwrap();
            at += vocab.token_bytes(t).len();
        }
        assert!(m.is_accepting());
        m.accept_token(eos).unwrap();
        assert!(m.is_terminated());
    }
}

#[test]
fn masks_match_accept_token_on_hand_written_grammars() {
    let vocab = small_vocab();
    let mut r = SplitMix64(5);
    for (name, gbnf) in hand_written() {
        check_masks(name, &gbnf, &vocab, &mut r);
    }
}

#[test]
fn masks_match_accept_token_on_random_grammars() {
    let vocab = small_vocab();
    let mut r = SplitMix64(77);
    let mut checked = 0;
    while checked < 60 {
        let gbnf = random_gbnf(&mut r);
        if Grammar::from_gbnf(&gbnf, "root").is_err() {
            continue;
        }
        check_masks("random", &gbnf, &vocab, &mut r);
        checked += 1;
    }
}

/// 100,000 nested brackets: accepted, rolled back, and the chart (a chain
/// of 100,000 sets) dropped without overflowing the stack.
#[test]
fn deep_nesting_is_neither_recursion_nor_a_stack_overflow() {
    let vocab = small_vocab();
    let grammar = backend(&vocab)
        .compile(&Constraint::ebnf(r#"root ::= "[" root? "]""#, "root"))
        .unwrap();
    let depth = 100_000;
    let mut m = grammar.matcher();
    m.accept_bytes(&vec![b'['; depth]).unwrap();
    assert!(!m.is_accepting());
    m.accept_bytes(&vec![b']'; depth - 1]).unwrap();
    assert!(!m.is_accepting());
    let mut row = vec![0u32; vocab.mask_words()];
    m.fill_bitmask(&mut row);
    assert!(row_is_allowed(&row, b']' as u32) && !row_is_allowed(&row, b'[' as u32));
    m.accept_bytes(b"]").unwrap();
    assert!(m.is_accepting());
    drop(m);
}

/// Compiles end in a grammar or in an error naming a limit, whatever the
/// grammar: a long chain of rules (the regular solver stops copying them
/// at its bound), and lexemes beyond the per-grammar state budget.
#[test]
fn compiles_are_bounded() {
    let vocab = small_vocab();
    let n = 4_000;
    let mut gbnf = String::from("root ::= \"(\" root \")\" | r3999\nr0 ::= \"ab\"\n");
    for i in 1..n {
        gbnf.push_str(&format!("r{i} ::= r{} \"x\"\n", i - 1));
    }
    let grammar = backend(&vocab)
        .compile(&Constraint::ebnf(&gbnf, "root"))
        .unwrap();
    let mut m = grammar.matcher();
    let text = format!("((ab{}))", "x".repeat(n - 1));
    assert!(m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting());

    let config = EarleyConfig {
        max_total_lexeme_states: 3,
        ..EarleyConfig::default()
    };
    let small = EarleyBackend::new(vocab.clone(), config);
    let err = small
        .compile(&Constraint::ebnf(
            r#"root ::= "[" root "]" | "abcdef" | "ghijkl""#,
            "root",
        ))
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("max_total_lexeme_states"), "{err}");
}
