//! Regex conformance: every pattern of the table, on its accept and reject
//! strings and on every short string over its alphabet, must give the same
//! full-match verdict as `regex_automata::meta::Regex` (`^(?:...)$`); and on
//! the `json_tiny` fixture vocabulary every mask bit, at every prefix of the
//! accepted strings, must agree with an independent "can this still be
//! completed" oracle.

mod common;

use common::{FullMatch, PrefixOracle, allowed, tiny_backend};
use tokensieve_core::{GrammarObject, Vocabulary};
use tokensieve_regex_fsm::RegexGrammar;

/// (pattern, strings it matches in full, strings it does not).
const TABLE: &[(&str, &[&str], &[&str])] = &[
    ("abc", &["abc"], &["", "ab", "abcd", "abd"]),
    ("a|ab", &["a", "ab"], &["", "b", "abb"]),
    ("[a-z]+", &["a", "hello"], &["", "Hello", "a1"]),
    ("[0-9]{3}", &["123", "000"], &["12", "1234", "12a"]),
    ("[0-9]{2,4}", &["12", "123", "1234"], &["1", "12345"]),
    ("a{0,3}", &["", "a", "aaa"], &["aaaa", "b"]),
    ("x{3,}", &["xxx", "xxxxx"], &["xx", ""]),
    ("(ab)*", &["", "ab", "abab"], &["a", "aba", "ba"]),
    ("(ab)+c?", &["ab", "abc", "ababc"], &["", "c", "abcc"]),
    (r"\d+", &["123", "٣٤"], &["", "a", "1a"]),
    ("[[:digit:]]+", &["42"], &["٣", ""]),
    (r"\w+", &["héllo", "abc_1", "日本"], &["a b", "!", ""]),
    (r"\s*x\s*", &[" x ", "x", "\tx\n"], &["xx", " y ", ""]),
    (".", &["a", "é", "😀"], &["", "ab", "\n"]),
    ("(?s:.)", &["\n", "a"], &["ab", ""]),
    ("[^a-c]", &["d", "é", "😀"], &["a", "b", ""]),
    ("é+", &["é", "éé"], &["e", "ée", ""]),
    ("😀|😁", &["😀", "😁"], &["😂", "😀😁"]),
    ("[α-ω]{2}", &["αβ", "ωω"], &["α", "ab"]),
    (r"\p{Greek}+", &["αβγ", "Ω"], &["abc", "αb"]),
    (r"\p{Han}{1,2}", &["日", "日本"], &["日本語", "a"]),
    (
        r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
        &["0", "-12.5", "1e10", "3.0E-2"],
        &["01", "1.", "-", "1e", "+1"],
    ),
    (
        r#""([^"\\]|\\.)*""#,
        &[r#""""#, r#""a\"b""#, r#""x\\""#, "\"é😀\""],
        &[r#"""""#, r#""abc"#, r#""a\""#, ""],
    ),
    (
        "true|false|null",
        &["true", "false", "null"],
        &["tru", "nulll", ""],
    ),
    (r"\(\)\[\]\{\}", &["()[]{}"], &["()", "()[]{}x"]),
    (r"a\.b", &["a.b"], &["axb", "a.bb"]),
    (r"\x41\u{e9}", &["Aé"], &["Ae", "A"]),
    (r"\t\n", &["\t\n"], &[" \n", "\t"]),
    ("^abc$", &["abc"], &["abcd", "ab"]),
    (r"(?m)^a$\n^b$", &["a\nb"], &["a\nc", "ab", "a\n"]),
    ("(?i)hello", &["HeLLo", "hello"], &["helo", "hello!"]),
    ("(?i)straße", &["straße", "STRAßE"], &["strasse", "strae"]),
    ("[a-c&&b-d]", &["b", "c"], &["a", "d"]),
    ("[a-z--aeiou]+", &["bcd", "xyz"], &["bad", ""]),
    ("(a|b)*abb", &["abb", "aabb", "babb"], &["ab", "abba", ""]),
    (
        "(foo|foobar)(baz)?",
        &["foo", "foobar", "foobaz", "foobarbaz"],
        &["fooba", "baz"],
    ),
    (r"[\x00-\x7F]*", &["", "hello\u{1}"], &["é", "aé"]),
    (
        "(?:[0-9a-fA-F]{2}:){2}[0-9a-fA-F]{2}",
        &["aa:BB:09"],
        &["aa:bb", "aa:bb:cc:dd", "ag:bb:cc"],
    ),
    (
        r"\d{4}-\d{2}-\d{2}",
        &["2024-01-31"],
        &["2024-1-31", "2024-01-311"],
    ),
    ("[[:alpha:]]+", &["abc"], &["ab1", ""]),
    (r"(?-u:\b)foo(?-u:\b)", &["foo"], &["foox", "fo"]),
    ("a*?", &["", "aaa"], &["b", "ab"]),
    ("(a|ab)(c|bcd)", &["abcd", "ac", "abc"], &["abd", "a"]),
    (r"\\+", &["\\", "\\\\"], &["", "/"]),
    ("(?x) a b # a comment\n", &["ab"], &["a b", "a"]),
    ("(|a)b", &["b", "ab"], &["a", "aab"]),
    ("", &[""], &["a", " "]),
    ("[ -~]{0,5}", &["", "hi!", "~~~~~"], &["\u{7f}", "abcdef"]),
    (r"\{[ \t\n\r]{0,2}\}", &["{}", "{ \n}"], &["{   }", "{"]),
    (
        r#"\{"name": "[a-z]+", "age": [0-9]{1,3}\}"#,
        &[r#"{"name": "bob", "age": 42}"#],
        &[
            r#"{"name": "", "age": 42}"#,
            r#"{"name": "bob", "age": 4242}"#,
        ],
    ),
    (
        "(?:ab|cd|ef){1,3}",
        &["ab", "cdef", "efabcd"],
        &["", "abcdefab", "ac"],
    ),
    ("[😀-😂]+", &["😀😂", "😁"], &["😃", "😀a"]),
];

fn compile(pattern: &str) -> RegexGrammar {
    tiny_backend()
        .compile_regex(pattern)
        .unwrap_or_else(|e| panic!("{pattern:?} must compile: {e}"))
}

/// Full match through the matcher: all bytes at once, and byte by byte.
fn matcher_full_match(g: &RegexGrammar, s: &[u8]) -> bool {
    let mut whole = g.regex_matcher();
    let at_once = whole.accept_bytes(s).is_ok() && whole.is_accepting();
    let mut m = g.regex_matcher();
    let mut ok = true;
    for &b in s {
        if m.accept_bytes(&[b]).is_err() {
            ok = false;
            break;
        }
    }
    let byte_by_byte = ok && m.is_accepting();
    assert_eq!(at_once, byte_by_byte, "walk disagreement on {s:?}");
    at_once
}

/// Every string of length <= 3 over the characters of the table row.
fn short_strings(row: (&str, &[&str], &[&str])) -> Vec<String> {
    let mut alphabet: Vec<char> = row.1.iter().chain(row.2).flat_map(|s| s.chars()).collect();
    alphabet.sort_unstable();
    alphabet.dedup();
    alphabet.truncate(8);
    let mut out = vec![String::new()];
    let mut layer = vec![String::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for s in &layer {
            for &c in &alphabet {
                let mut t = s.clone();
                t.push(c);
                next.push(t);
            }
        }
        out.extend(next.iter().cloned());
        layer = next;
    }
    out
}

#[test]
fn table_is_large_enough() {
    assert!(TABLE.len() >= 40, "{} patterns", TABLE.len());
}

#[test]
fn full_match_agrees_with_meta_regex() {
    let mut checks = 0;
    for &(pattern, accept, reject) in TABLE {
        let g = compile(pattern);
        let oracle = FullMatch::new(pattern);
        for s in accept {
            assert!(
                oracle.is_match(s.as_bytes()),
                "table error: {pattern:?} ~ {s:?}"
            );
            assert!(
                matcher_full_match(&g, s.as_bytes()),
                "{pattern:?} must accept {s:?}"
            );
        }
        for s in reject {
            assert!(
                !oracle.is_match(s.as_bytes()),
                "table error: {pattern:?} !~ {s:?}"
            );
            assert!(
                !matcher_full_match(&g, s.as_bytes()),
                "{pattern:?} must reject {s:?}"
            );
        }
        for s in short_strings((pattern, accept, reject)) {
            assert_eq!(
                matcher_full_match(&g, s.as_bytes()),
                oracle.is_match(s.as_bytes()),
                "{pattern:?} on {s:?}"
            );
            checks += 1;
        }
    }
    assert!(checks > 5_000, "{checks}");
}

/// At every prefix of every accepted string (greedy-tokenized), the next
/// token is allowed, and for every token of the vocabulary the mask bit is
/// set exactly when the prefix plus the token can still be completed (and
/// the matcher accepts exactly the tokens the mask allows).
#[test]
fn masks_agree_with_prefix_oracle_on_tiny_vocab() {
    let backend = tiny_backend();
    let vocab: &Vocabulary = tokensieve_core::GrammarBackend::vocabulary(&backend);
    let eos = vocab.stop_tokens()[0];
    let mut row = vec![0u32; vocab.mask_words()];
    let mut checked = 0usize;
    for &(pattern, accept, _) in TABLE {
        let g = backend.compile_regex(pattern).unwrap();
        let mut oracle = PrefixOracle::new(pattern);
        for s in accept {
            let ids = vocab
                .encode_greedy(s.as_bytes())
                .expect("every byte is a token");
            let mut m = g.regex_matcher();
            let mut prefix: Vec<u8> = Vec::new();
            for (step, &next) in ids.iter().enumerate().chain([(ids.len(), &eos)]) {
                m.fill_bitmask(&mut row);
                assert!(
                    allowed(&row, next),
                    "{pattern:?} {s:?}: token {next} ({:?}) not allowed after {:?}",
                    String::from_utf8_lossy(vocab.token_bytes(next)),
                    String::from_utf8_lossy(&prefix)
                );
                assert_eq!(
                    allowed(&row, eos),
                    oracle.full_match(&prefix),
                    "{pattern:?} eos"
                );
                for id in 0..vocab.vocab_size() as u32 {
                    let Some(bytes) = vocab.grammar_bytes(id) else {
                        continue;
                    };
                    let mut extended = prefix.clone();
                    extended.extend_from_slice(bytes);
                    let expect = oracle.viable(&extended);
                    assert_eq!(
                        allowed(&row, id),
                        expect,
                        "{pattern:?}: token {:?} after {:?}",
                        String::from_utf8_lossy(bytes),
                        String::from_utf8_lossy(&prefix)
                    );
                    assert_eq!(m.fork().accept_token(id).is_ok(), expect);
                    checked += 1;
                }
                m.accept_token(next).unwrap();
                if step < ids.len() {
                    prefix.extend_from_slice(vocab.token_bytes(next));
                }
            }
            assert!(m.is_terminated());
        }
    }
    assert!(checked > 50_000, "{checked}");
}
