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
        // Inside the token `xacab?`, `[a-z]+` starts after `xa` and after
        // `xaca` and is at the same state after `xacab`: the two items
        // differ by where they start, in levels whose waiting items are
        // alike but for older levels that are not (one `t` is followed by
        // `!`, the other by `?`). Taken as one item, a walk would lose a
        // token of the language.
        (
            "origins_apart",
            r#"
root ::= "<" "x" t "!" | "<" "x" "a" "c" t "?"
t    ::= "a" v
v    ::= [a-z]+ | "(" v ")"
"#
            .into(),
        ),
        // A run of letters past a name's first, then a character past
        // ASCII that only the rule the name completes, begun before the
        // run, takes: a level that loops on every letter takes no such
        // byte itself, and the tokens ending in `é` are found only through
        // the completion into that older set.
        (
            "letters_then_past_ascii",
            r#"
root ::= "<" seq "é" | "<" seq "."
seq  ::= name | name ws seq
name ::= [a-z]+
ws   ::= [ ]*
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
        "\"a\":1}", "xacab?", "<xacab?", "xacab!", "<xacab!", "aabé", "abbé", "bbbé", "aab.",
        "aaaabé", "ababbé", "abababé", "aaaab.",
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
/// Masks are walked both ways (`lexeme_walks` on and off: by the
/// lexemes' own walks where they can be, and by the parser at every node,
/// where the items of one lexeme that differ only by where they start meet
/// and are merged), the first walking on from only the exits of a lexeme
/// that a byte may follow (`follow_exits` 0), the second from all; the
/// first summarizing every set met item by item (`item_summaries` 1) and
/// walking every completion into an older set apart (`group_walks` 1),
/// the second every set whole and the completions of a mask together, the
/// third as by default.
fn check_masks(name: &str, gbnf: &str, vocab: &Arc<Vocabulary>, r: &mut SplitMix64) {
    let d = EarleyConfig::default();
    for way in [
        (true, 0, 1, 1),
        (false, usize::MAX, usize::MAX, usize::MAX),
        (true, d.follow_exits, d.item_summaries, d.group_walks),
    ] {
        check_masks_on(name, gbnf, vocab, r, 6, way);
    }
}

/// [`check_masks`] on `sentences` sentences, one way.
fn check_masks_on(
    name: &str,
    gbnf: &str,
    vocab: &Arc<Vocabulary>,
    r: &mut SplitMix64,
    sentences: usize,
    (lexeme_walks, follow_exits, item_summaries, group_walks): (bool, usize, usize, usize),
) {
    let g = Grammar::from_gbnf(gbnf, "root").unwrap();
    let config = EarleyConfig {
        lexeme_walks,
        follow_exits,
        item_summaries,
        group_walks,
        ..EarleyConfig::default()
    };
    let compiled = EarleyBackend::new(vocab.clone(), config)
        .compile(&Constraint::ebnf(gbnf, "root"))
        .unwrap();
    let eos = vocab.stop_tokens()[0];
    let mut row = vec![0u32; vocab.mask_words()];
    for _ in 0..sentences {
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
                    "{name} (lexeme walks {lexeme_walks}, item summaries from {item_summaries}, group walks from {group_walks}): token {:?} after {:?}\n{gbnf}",
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

/// Lexeme rules of [`adjacent_lexemes_gbnf`]: some match the empty
/// string, and several can follow each other with nothing between, so a
/// run of bytes splits into lexemes in many ways.
const LEXEME_RULES: &str = r#"ws ::= [ \t]*
txt ::= [a-c0-9]*
id ::= [a-c]+
num ::= [0-9]+
opt ::= "x"?
sp ::= " "
"#;

/// A random expression for [`adjacent_lexemes_gbnf`]: lexemes (the
/// nullable ones twice as likely), literals, the empty string, bare rule
/// references (recursion on the left, the right, in the middle) and
/// bracketed ones, groups, alternations and repetitions.
fn adjacent_expr(r: &mut SplitMix64, depth: u32) -> String {
    const ATOMS: [&str; 16] = [
        "ws",
        "ws",
        "txt",
        "txt",
        "opt",
        "id",
        "num",
        "sp",
        "\"\"",
        "\",\"",
        "\"a\"",
        "p",
        "q",
        "\"(\" p \")\"",
        "\"[\" q \"]\"",
        "\"<\" root \">\"",
    ];
    let base = if depth < 3 && r.below(3) == 0 {
        let parts: Vec<String> = (0..1 + r.below(3))
            .map(|_| adjacent_expr(r, depth + 1))
            .collect();
        let sep = if r.below(2) == 0 { " | " } else { " " };
        format!("({})", parts.join(sep))
    } else {
        ATOMS[r.below(ATOMS.len())].to_string()
    };
    let rep = ["", "", "*", "*", "+", "+", "?", "{2}", "{0,2}"][r.below(9)];
    let mut s = format!("{base}{rep}");
    if depth < 2 && r.below(2) == 0 {
        s = format!("{s} {}", adjacent_expr(r, depth + 1));
    }
    if depth < 2 && r.below(4) == 0 {
        s = format!("{s} | {}", adjacent_expr(r, depth + 1));
    }
    s
}

/// Nullable lexemes inside the repeated bodies of recursive rules, left
/// and right recursion, empty alternatives: half the grammars from one of
/// the shapes real grammars have (whitespace or text that may be empty
/// between recursive items), with random lexemes and extra alternatives,
/// half wholly random. Some are invalid (a rule that never finishes),
/// which the parser reports.
fn adjacent_lexemes_gbnf(r: &mut SplitMix64) -> String {
    const NULLABLE: [&str; 3] = ["ws", "txt", "opt"];
    const ANY: [&str; 6] = ["ws", "txt", "opt", "id", "num", "sp"];
    let gap = NULLABLE[r.below(NULLABLE.len())];
    let lex = ANY[r.below(ANY.len())];
    let extra = |r: &mut SplitMix64| {
        if r.below(2) == 0 {
            format!(" | {}", adjacent_expr(r, 1))
        } else {
            String::new()
        }
    };
    let (root, p, q) = match r.below(6) {
        // A list of items with an optional gap before each; an item
        // nests the list.
        0 => (
            format!("\"x\" p{}", extra(r)),
            format!("({gap} q)*{}", extra(r)),
            format!("\"(\" p \")\" | {lex}{}", extra(r)),
        ),
        // Text or nested elements, one or more.
        1 => (
            format!("\"<\" ({gap} | q)+ \">\"{}", extra(r)),
            format!("{lex}{}", extra(r)),
            format!("\"[\" ({gap} | root)+ \"]\"{}", extra(r)),
        ),
        // Left recursion through a gap.
        2 => (
            format!("p{}", extra(r)),
            format!("p {gap} q | q | \"\"{}", extra(r)),
            format!("\"(\" p \")\" | {lex}{}", extra(r)),
        ),
        // Right recursion through a gap.
        3 => (
            format!("p{}", extra(r)),
            format!("q {gap} p | \"\"{}", extra(r)),
            format!("\"(\" p \")\" | {lex}{}", extra(r)),
        ),
        _ => (
            adjacent_expr(r, 0),
            adjacent_expr(r, 1),
            adjacent_expr(r, 1),
        ),
    };
    format!("root ::= {root}\np ::= {p}\nq ::= {q}\n{LEXEME_RULES}")
}

/// Every single byte, and runs that split into the lexemes of
/// [`adjacent_lexemes_gbnf`] in many ways (long runs of letters, digits
/// and spaces: the splits of one are exponentially many in its length),
/// alone and next to the literals, and a stop token.
fn adjacent_vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
    let long = [
        "abcabcabcabcabcabcabcabc".to_string(),
        "a".repeat(28),
        "0123456789".repeat(3),
        "a1b2c3".repeat(4),
        " ".repeat(32),
        "\t".repeat(12),
        " \t".repeat(10),
        "abc abc abc abc abc abc ".into(),
    ];
    for t in long.iter().map(String::as_str).chain([
        "ab", "ba", "cab", "a1", "1a", "00", "  ", "    ", " a", "a ", " (", "((", "))", "()",
        "(a", "a)", " x", "x(", "xx", ", ", ",a", "[a", "a]", "[[", "]]", "<(", ")>", "<<", ">>",
        "\ta", "x a", "(ab)", "[ab]", "<ab>",
    ]) {
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

/// Long runs that the sampled sentences rarely hold: each of the
/// vocabulary's long tokens, alone and inside a sentence.
fn with_long_runs(sentence: &[u8], r: &mut SplitMix64) -> Vec<u8> {
    const RUNS: [&str; 4] = [
        "abcabcabcabcabcabcabcabcab",
        "0123456789012345678901",
        "                                  a",
        "a1b2c3a1b2c3a1b2c3",
    ];
    let mut s = sentence.to_vec();
    let at = r.below(s.len() + 1);
    s.splice(at..at, RUNS[r.below(RUNS.len())].bytes());
    s
}

/// Grammars whose lexemes can follow one another with nothing between
/// (nullable lexemes inside repeated and recursive bodies): the matcher
/// agrees with the recognizer on sentences, near misses and texts with
/// long runs; on one in sixteen, at every step of two sentences'
/// tokenization (walked both ways, [`check_masks`], in turn), the mask is exactly what `accept_token` takes (long
/// tokens included) and no step ends in an error.
#[test]
fn adjacent_lexeme_grammars_agree_with_the_recognizer() {
    let vocab = adjacent_vocab();
    let backend = backend(&vocab);
    let alphabet = b"ab0 \t(),x[]<>".to_vec();
    let mut r = SplitMix64(0xAD1A_CE47);
    let (mut grammars, mut texts, mut masked) = (0, 0, 0);
    let started = std::time::Instant::now();
    while grammars < 2000 {
        let gbnf = adjacent_lexemes_gbnf(&mut r);
        let Ok(g) = Grammar::from_gbnf(&gbnf, "root") else {
            continue;
        };
        grammars += 1;
        let compiled = backend
            .compile(&Constraint::ebnf(&gbnf, "root"))
            .unwrap_or_else(|e| panic!("{e}\n{gbnf}"));
        let mut m = compiled.matcher();
        for _ in 0..2 {
            let sentence = random_sentence(&g, &mut r, 5);
            let long = with_long_runs(&sentence, &mut r);
            let near = mutate(&sentence, &alphabet, &mut r);
            for text in [&sentence, &long, &near] {
                m.reset();
                let took = m.accept_bytes(text);
                let verdict = took.is_ok() && m.is_accepting();
                assert_eq!(
                    verdict,
                    g.accepts(text),
                    "on {:?} ({took:?})\n{gbnf}",
                    String::from_utf8_lossy(text)
                );
                texts += 1;
            }
        }
        if grammars % 16 == 0 {
            // Every other one walked by the parser at every node, its sets
            // summarized whole and a mask's completions walked together,
            // the others walking on from only the exits a byte may follow,
            // every set summarized item by item and every completion into
            // an older set walked apart.
            let way = if grammars % 32 != 0 {
                (true, 0, 1, 1)
            } else {
                (false, usize::MAX, usize::MAX, usize::MAX)
            };
            check_masks_on("adjacent lexemes", &gbnf, &vocab, &mut r, 2, way);
            masked += 1;
        }
    }
    eprintln!(
        "{grammars} grammars, {texts} texts, {masked} grammars' masks in {:.1?}",
        started.elapsed()
    );
}

/// A text of `gbnf` walked token by token (the longest token that is a
/// prefix of the rest, as a tokenizer would mostly pick): at every step
/// the mask holds the next token and `accept_token` takes it (no step
/// ends in an error), and at the end the stop token is allowed and taken.
fn walk_valid_text(gbnf: &str, vocab: &Arc<Vocabulary>, text: &str) {
    let compiled = backend(vocab)
        .compile(&Constraint::ebnf(gbnf, "root"))
        .unwrap();
    let mut m = compiled.matcher();
    let mut row = vec![0u32; vocab.mask_words()];
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let next = (0..vocab.vocab_size() as u32)
            .filter(|&t| !vocab.is_special(t))
            .filter(|&t| vocab.grammar_bytes(t).is_some_and(|b| rest.starts_with(b)))
            .max_by_key(|&t| vocab.token_bytes(t).len())
            .expect("every byte is a token");
        m.fill_bitmask(&mut row);
        let done = text.len() - rest.len();
        assert!(
            row_is_allowed(&row, next),
            "{:?} refused after {:?}",
            String::from_utf8_lossy(vocab.token_bytes(next)),
            &text[..done]
        );
        m.accept_token(next)
            .unwrap_or_else(|e| panic!("after {:?}: {e}", &text[..done]));
        rest = &rest[vocab.token_bytes(next).len()..];
    }
    m.fill_bitmask(&mut row);
    let eos = vocab.stop_tokens()[0];
    assert!(row_is_allowed(&row, eos) && m.is_accepting(), "{text:?}");
    m.accept_token(eos).unwrap();
    assert!(m.is_terminated());
}

/// Recursion through the body of a `*` whose other part is whitespace that
/// may be empty: a run of letters is any number of atoms.
#[test]
fn whitespace_that_may_be_empty_before_a_recursive_item() {
    let gbnf = r#"root ::= "x" expansion
expansion ::= (i atom)*
atom ::= "(" expansion ")" | [a-z]+
i ::= [ \t]*
"#;
    let vocab = adjacent_vocab();
    for text in [
        "x b",
        "x (b)",
        "x (b (c))",
        "x abcabcabcabcabcabcabcabc",
        "x ((abcabcabcabcabcabcabcabc)  (ab)\t(a))",
    ] {
        walk_valid_text(gbnf, &vocab, text);
    }
}

/// Text that may be empty, one or more times, between nested elements.
#[test]
fn text_that_may_be_empty_repeated_between_nested_elements() {
    let gbnf = r#"root ::= "<c>" (text | em)+ "</c>"
em ::= "<em>" (text | root)+ "</em>"
text ::= [a-z0-9]*
"#;
    let vocab = adjacent_vocab();
    for text in [
        "<c>1</c>",
        "<c></c>",
        "<c>a1b2c3a1b2c3a1b2c3a1b2c3<em>0123456789012345678901234567890</em></c>",
        "<c><em><c>ab</c>aaaaaaaaaaaaaaaaaaaaaaaaaaaa</em></c>",
    ] {
        walk_valid_text(gbnf, &vocab, text);
    }
}
