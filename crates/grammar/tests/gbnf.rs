//! The GBNF front end end to end: sample grammars with accept/reject strings
//! (through the reference recognizer), a differential check against
//! `regex_automata` on regular grammars, and every error with its place.

use regex_automata::meta::Regex;
use tokensieve_core::{GrammarError, Location};
use tokensieve_grammar::Grammar;
use tokensieve_grammar::gbnf::{self, GbnfLimits};

fn fixture(name: &str) -> Grammar {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Grammar::from_gbnf(&text, "root").unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn check(grammar: &Grammar, name: &str, accept: &[&str], reject: &[&str]) {
    for s in accept {
        assert!(grammar.accepts(s.as_bytes()), "{name} should accept {s:?}");
    }
    for s in reject {
        assert!(!grammar.accepts(s.as_bytes()), "{name} should reject {s:?}");
    }
}

// ---- sample grammars -------------------------------------------------------

#[test]
fn json_fixture() {
    let g = fixture("json.gbnf");
    check(
        &g,
        "json",
        &[
            "{}",
            "[]",
            "null",
            "true ",
            "-0",
            "12.5e-3",
            "1E+10",
            r#"{"a": 1, "b": [true, false, null], "c": {"d": "e"}}"#,
            r#"["\u00e9\n", "caf\u00E9", "é😀", "\"quoted\" \\ /"]"#,
            "{\n  \"k\": [1,\n    2]\n}",
            r#"[[[[[]]]]]"#,
        ],
        &[
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "01",
            "1.",
            "-",
            "tru",
            "\"unterminated",
            "\"bad \\x escape\"",
            "\"raw \u{1} control\"",
            "\"bad \\u12 escape\"",
            "{'a': 1}",
            " {}",
        ],
    );
    // The 16-digit bound of the sample: 1 + 15 more digits.
    assert!(g.accepts(b"1234567890123456"));
    assert!(!g.accepts(b"12345678901234567"));
}

#[test]
fn arithmetic_fixture() {
    let g = fixture("arithmetic.gbnf");
    check(
        &g,
        "arithmetic",
        &[
            "1=1\n",
            "x+1=y\n",
            "a *(b +2)= c_1\n",
            "(x)=2\n10/2=5\n",
            "( ( a ) )=b\n",
        ],
        &["", "1=1", "=1\n", "1==1\n", "(a=b\n", "A=b\n", "1=1\n\n"],
    );
}

#[test]
fn list_fixture() {
    let g = fixture("list.gbnf");
    check(
        &g,
        "list",
        &["- a\n", "- first item\n- second\n", "- ünïcödé ✓\n"],
        &[
            "",
            "- \n",
            "-a\n",
            "- a",
            "- a\nb\n",
            "- a\u{2028}b\n",
            "* a\n",
        ],
    );
}

#[test]
fn chess_fixture() {
    let g = fixture("chess.gbnf");
    check(
        &g,
        "chess",
        &[
            "1. e4 e5\n2. Nf3 Nc6\n",
            "1. d4 d5\n2. c4 dxc4\n3. Nf3 Nf6\n10. O-O O-O-O\n",
            "1. e4 e5\n2. Qh5 Nc6\n3. Bc4 Nf6\n4. Qxf7# Ke7\n",
        ],
        &[
            "1. e4 e5\n",
            "1. e9 e5\n2. a3 a6\n",
            "2. e4 e5\n3. a3 a6\n",
            "1. e4 e5\n2. Pe4 e5\n",
            "1. e4 e5\n100. a3 a6\n",
        ],
    );
    // "Qxf7#" alone in a second pair fails: a pair needs two moves.
    assert!(!g.accepts(b"1. e4 e5\n2. Qxf7#\n"));
}

#[test]
fn c_identifiers_fixture() {
    let g = fixture("c_identifiers.gbnf");
    let long_ok = format!("a{}", "b".repeat(31));
    let long_bad = format!("a{}", "b".repeat(32));
    check(
        &g,
        "c_identifiers",
        &["x", "_", "main, argc,argv", "a,b,c,d,e,f,g,h", &long_ok],
        &[
            "",
            "1x",
            "a,",
            "a,,b",
            "a,b,c,d,e,f,g,h,i",
            "a-b",
            &long_bad,
        ],
    );
}

// ---- differential check against regex_automata ----------------------------

/// Every string over `alphabet` up to `max_len` characters.
fn all_strings(alphabet: &[&str], max_len: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for a in alphabet {
                next.push(format!("{s}{a}"));
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

fn cross_check(gbnf_text: &str, regex: &str, alphabet: &[&str], max_len: usize) {
    let grammar =
        Grammar::from_gbnf(gbnf_text, "root").unwrap_or_else(|e| panic!("{gbnf_text}: {e}"));
    let re = Regex::new(&format!("^(?:{regex})$")).unwrap();
    let mut accepted = 0;
    let strings = all_strings(alphabet, max_len);
    for s in &strings {
        let expected = re.is_match(s.as_bytes());
        assert_eq!(
            grammar.accepts(s.as_bytes()),
            expected,
            "grammar {gbnf_text:?} vs regex {regex:?} on {s:?}"
        );
        accepted += usize::from(expected);
    }
    // Bytes that are not UTF-8 never match a grammar over characters.
    for bad in [&b"\xff"[..], b"\xc3", b"a\x80", b"\xed\xa0\x80"] {
        assert!(!grammar.accepts(bad), "{gbnf_text:?} accepted {bad:?}");
        assert!(!re.is_match(bad));
    }
    assert!(accepted > 0, "{regex}: the sample accepts nothing");
    assert!(
        accepted < strings.len(),
        "{regex}: the sample accepts everything"
    );
}

#[test]
fn regular_grammars_agree_with_regex() {
    let cases: &[(&str, &str, &[&str], usize)] = &[
        (
            r#"root ::= "a" [bc]* "d"?"#,
            "a[bc]*d?",
            &["a", "b", "c", "d"],
            5,
        ),
        (
            r#"root ::= ("ab" | "c"){2,4}"#,
            "(?:ab|c){2,4}",
            &["a", "b", "c"],
            7,
        ),
        (
            r#"root ::= [a-c]{1,3} ("-" [a-c]{2})*"#,
            "[a-c]{1,3}(?:-[a-c]{2})*",
            &["a", "c", "d", "-"],
            6,
        ),
        (
            "root ::= x+ y?\nx ::= \"a\" | \"bc\"\ny ::= [^a]",
            "(?:a|bc)+[^a]?",
            &["a", "b", "c", "é", "\n"],
            5,
        ),
        (
            r#"root ::= "a" . "b""#,
            "(?s)a.b",
            &["a", "b", "\n", "é", "😀"],
            4,
        ),
        (r#"root ::= "ab"{3,}"#, "(?:ab){3,}", &["a", "b"], 8),
        (r#"root ::= "a"{0} "b" "c"{1}"#, "bc", &["a", "b", "c"], 4),
        (
            r#"root ::= (("a" "b"?){1,2} "c"){0,2}"#,
            "(?:(?:ab?){1,2}c){0,2}",
            &["a", "b", "c"],
            7,
        ),
        (
            r#"root ::= [\x41-\x43] "\u00e9"+ [\U0001F600]?"#,
            "[A-C]é+😀?",
            &["A", "C", "D", "é", "e", "😀"],
            4,
        ),
        (
            r#"root ::= "\"" [^"\\]* "\"""#,
            r#""[^"\\]*""#,
            &["\"", "\\", "a", "é"],
            5,
        ),
        (
            r#"root ::= [-a] [a-] [\-\]\[] [^^]"#,
            r"[-a][a-][\-\]\[][^^]",
            &["-", "a", "]", "[", "^", "b"],
            4,
        ),
        (
            "root ::= \"x\"*? \"y\"+? # operators stack\n",
            "x*y*",
            &["x", "y", "z"],
            5,
        ),
        // Left recursion is fine for Earley (llama.cpp would reject it).
        (
            "root ::= root \"+\" n | n\nn ::= [0-9]",
            "[0-9](?:\\+[0-9])*",
            &["1", "+", "a"],
            6,
        ),
    ];
    for &(gbnf_text, regex, alphabet, max_len) in cases {
        cross_check(gbnf_text, regex, alphabet, max_len);
    }
}

// ---- layout: newlines, comments, line endings ------------------------------

#[test]
fn rules_span_lines_until_the_next_definition() {
    let g = Grammar::from_gbnf(
        "root ::= \"a\"\n   \"b\"\n | \"c\" # comment\n\n# between rules\nother ::= \"z\"\n",
        "root",
    )
    .unwrap();
    check(&g, "spanning", &["ab", "c"], &["a", "b", "abc", "z"]);
}

#[test]
fn newlines_inside_groups_and_after_bars() {
    let g = Grammar::from_gbnf(
        "root ::= (\n  \"a\" # first\n  |\n  \"b\"\n)\n  \"c\"\n",
        "root",
    )
    .unwrap();
    check(&g, "groups", &["ac", "bc"], &["a", "c", "abc"]);
}

#[test]
fn crlf_line_endings() {
    let g = Grammar::from_gbnf("root ::= a \"!\"\r\na ::= \"x\" |\r\n  \"y\"\r\n", "root").unwrap();
    check(&g, "crlf", &["x!", "y!"], &["x", "!"]);
}

#[test]
fn empty_bodies_and_alternatives_match_the_empty_string() {
    let g = Grammar::from_gbnf("root ::= a \"x\" b\na ::=\nb ::= \"y\" | ", "root").unwrap();
    check(&g, "empty", &["x", "xy"], &["", "y", "ax"]);
    let g = Grammar::from_gbnf("root ::= \"\" () (\"\")* ", "root").unwrap();
    check(&g, "epsilon", &[""], &["a"]);
}

#[test]
fn root_argument_picks_the_start_rule() {
    let text = "root ::= \"a\"\nother ::= \"b\" root";
    assert!(Grammar::from_gbnf(text, "other").unwrap().accepts(b"ba"));
    assert!(!Grammar::from_gbnf(text, "other").unwrap().accepts(b"a"));
}

#[test]
fn unreachable_rules_are_allowed() {
    let g = Grammar::from_gbnf("root ::= \"a\"\nunused ::= \"b\"+", "root").unwrap();
    check(&g, "unreachable", &["a"], &["b"]);
}

#[test]
fn ambiguous_and_nullable_grammars() {
    // Exponentially many parses, and nullable rules in every position.
    let g = Grammar::from_gbnf("root ::= s\ns ::= s s | \"a\" | e\ne ::= e? e*", "root").unwrap();
    check(&g, "ambiguous", &["", "a", "aaaaaaaaaaaa"], &["b", "aab"]);
}

// ---- errors, each with its place -------------------------------------------

fn error(text: &str) -> GrammarError {
    match Grammar::from_gbnf(text, "root") {
        Ok(g) => panic!("{text:?} parsed:\n{g}"),
        Err(e) => e,
    }
}

/// Asserts an `InvalidGrammar` at `line:column` whose message has `needle`.
fn invalid_at(text: &str, line: usize, column: usize, needle: &str) {
    match error(text) {
        GrammarError::InvalidGrammar {
            location: Location::LineColumn { line: l, column: c },
            message,
        } => {
            assert_eq!(
                (l, c),
                (line, column),
                "{text:?}: wrong place for {message:?}"
            );
            assert!(
                message.contains(needle),
                "{text:?}: {message:?} lacks {needle:?}"
            );
        }
        other => panic!("{text:?}: expected InvalidGrammar, got {other:?}"),
    }
}

fn limit_exceeded(text: &str, limits: &GbnfLimits, knob: &str) {
    match gbnf::parse(text, "root", limits) {
        Err(GrammarError::LimitExceeded { knob: k, .. }) => {
            assert_eq!(k, format!("GbnfLimits::{knob}"));
        }
        other => panic!("expected LimitExceeded({knob}), got {other:?}"),
    }
}

#[test]
fn undefined_rule_is_named_where_used() {
    invalid_at(
        "root ::= a b\na ::= \"x\" c",
        1,
        12,
        "undefined rule `b` (used in the definition of `root`); also undefined: c",
    );
    // Unreachable rules are still checked.
    invalid_at("root ::= \"a\"\nunused ::=  missing", 2, 13, "`missing`");
}

#[test]
fn missing_root_lists_the_rules() {
    match error("a ::= \"x\"\nb ::= a") {
        GrammarError::InvalidGrammar {
            location: Location::None,
            message,
        } => assert!(
            message.contains("`root` is not defined") && message.contains("a, b"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    match gbnf::parse("root ::= \"x\"", "start", &GbnfLimits::default()) {
        Err(GrammarError::InvalidGrammar { message, .. }) => {
            assert!(message.contains("`start`"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn duplicate_definitions_are_errors() {
    invalid_at(
        "root ::= \"a\"\n  root ::= \"b\"",
        2,
        3,
        "defined twice (first at line 1, column 1)",
    );
}

#[test]
fn unterminated_things_point_at_their_opening() {
    invalid_at("root ::= \"abc", 1, 10, "unterminated string literal");
    invalid_at("root ::= \"abc\n\"", 1, 10, "cannot span lines");
    invalid_at("root ::= [abc", 1, 10, "unterminated character class");
    invalid_at("root ::= [abc\n]", 1, 10, "unterminated character class");
    invalid_at("root ::= \"x\" (\"a\" \"b\"", 1, 14, "unclosed `(`");
    invalid_at(
        "root ::= (\"a\"\nnext ::= \"b\"",
        1,
        10,
        "unclosed `(`: expected `)` before the definition of `next`",
    );
    invalid_at("root ::= \"a\" )", 1, 14, "unmatched `)`");
    invalid_at("root ::= \"a{2", 1, 10, "unterminated string literal");
    invalid_at("root ::= \"a\"{2", 1, 15, "expected `,` or `}`");
    invalid_at("root ::= \"\\", 1, 11, "incomplete escape");
}

#[test]
fn bad_escapes() {
    invalid_at("root ::= \"a\\qb\"", 1, 12, "unknown escape `\\q`");
    invalid_at("root ::= [\\d]", 1, 11, "unknown escape `\\d`");
    invalid_at("root ::= \"\\x4\"", 1, 11, "exactly 2 hex digits");
    invalid_at("root ::= \"\\u12G4\"", 1, 11, "exactly 4 hex digits");
    invalid_at("root ::= \"\\uD800\"", 1, 11, "not a Unicode scalar value");
    invalid_at(
        "root ::= [\\U00110000]",
        1,
        11,
        "not a Unicode scalar value",
    );
}

#[test]
fn bad_classes_and_repetitions() {
    invalid_at("root ::= [a-cz-a]", 1, 14, "inverted range `z-a`");
    invalid_at("root ::= [\\u00e9-\\x41]", 1, 11, "inverted range");
    invalid_at("root ::= []", 1, 10, "empty character class");
    invalid_at(
        "root ::= [^\\x00-\\U0010FFFF]",
        1,
        10,
        "matches no character",
    );
    invalid_at(
        "root ::= \"a\"{3,1}",
        1,
        13,
        "minimum 3 is greater than the maximum 1",
    );
    invalid_at("root ::= \"a\"{,3}", 1, 14, "expected a number");
    invalid_at("root ::= * \"a\"", 1, 10, "`*` must follow an item");
    invalid_at("root ::= \"a\" | +\"b\"", 1, 16, "`+` must follow an item");
    invalid_at("root ::= ( ? )", 1, 12, "`?` must follow an item");
}

#[test]
fn bad_layout() {
    invalid_at("", 1, 1, "the grammar is empty");
    invalid_at("  # only a comment\n\n", 1, 1, "the grammar is empty");
    invalid_at(
        "root ::= \"a\" b ::= \"c\"",
        1,
        14,
        "`b` must start on a new line",
    );
    invalid_at(
        "root \"a\"",
        1,
        6,
        "expected `::=` after the rule name `root`",
    );
    invalid_at("::= \"a\"", 1, 1, "expected a rule name");
    invalid_at("root ::= \"a\"\n| \"b\"\n\n)", 4, 1, "unmatched `)`");
    invalid_at("root ::= <think> \"a\"", 1, 10, "token references");
    invalid_at("root ::= \"a\" ; \"b\"", 1, 14, "unexpected ';'");
    // Columns count characters, not bytes.
    invalid_at("root ::= \"é\" \"ü\" [z-a]", 1, 19, "inverted range");
}

#[test]
fn rules_that_never_finish_are_errors() {
    invalid_at(
        "root ::= \"x\" | a\na ::= \"x\" a",
        2,
        1,
        "rule `a` can never produce a finite string",
    );
    invalid_at("root ::= root", 1, 1, "rule `root` can never produce");
    invalid_at(
        "root ::= \"a\"\n\nb ::= (\"x\" b | b \"y\")+",
        3,
        1,
        "rule `b`",
    );
    // ...but recursion with a way out is fine.
    Grammar::from_gbnf("root ::= \"x\" root | \"\"", "root").unwrap();
}

// ---- pathological inputs: errors, never crashes -----------------------------

/// The parser keeps open groups on the heap, so a small stack is enough.
const STACK: usize = 128 * 1024;

#[test]
fn deep_nesting_is_a_limit_not_a_stack_overflow() {
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(10_000), ")".repeat(10_000));
    limit_exceeded(&deep, &GbnfLimits::default(), "max_nesting_depth");
    let unclosed = format!("root ::= {}", "(".repeat(10_000));
    limit_exceeded(&unclosed, &GbnfLimits::default(), "max_nesting_depth");
    // At the limit it parses, even on a small thread stack.
    let ok = format!("root ::= {}\"a\"{}", "(".repeat(128), ")*".repeat(128));
    let grammar = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || Grammar::from_gbnf(&ok, "root"))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    assert!(grammar.accepts(b"aaa"));
    assert!(grammar.accepts(b""));
}

#[test]
fn huge_repetitions_are_limits() {
    let limits = GbnfLimits::default();
    limit_exceeded("root ::= \"a\"{10001}", &limits, "max_repetition");
    limit_exceeded(
        "root ::= \"a\"{0,99999999999999999999999}",
        &limits,
        "max_repetition",
    );
    limit_exceeded("root ::= \"a\"{4294967296,}", &limits, "max_repetition");
    // Each is allowed alone; together they exceed the size budget, and the
    // parser stops before building the expansion that would.
    let many = format!("root ::= {}", "\"a\"{10000} ".repeat(200));
    limit_exceeded(&many, &limits, "max_grammar_size");
    let tight = GbnfLimits {
        max_grammar_size: 100,
        ..GbnfLimits::default()
    };
    limit_exceeded("root ::= [a-z]{0,200}", &tight, "max_grammar_size");
    // Nested repetitions add up rather than multiply.
    let nested = Grammar::from_gbnf("root ::= ((\"ab\"{1000}){1000}){1000}", "root").unwrap();
    assert!(nested.size() < 10_000, "size {}", nested.size());
}

#[test]
fn bounded_repetition_is_exact() {
    let g = Grammar::from_gbnf("root ::= \"ab\"{3,250}", "root").unwrap();
    for n in [0, 2, 3, 4, 100, 250, 251] {
        let s = "ab".repeat(n);
        assert_eq!(g.accepts(s.as_bytes()), (3..=250).contains(&n), "n = {n}");
    }
    assert!(!g.accepts(b"ababa"));
}

#[test]
fn limit_errors_say_where() {
    let e = error("root ::=\n  \"a\"{20000}");
    let text = e.to_string();
    assert!(
        text.contains("repetition count 20000 at line 2, column 7")
            && text.contains("GbnfLimits::max_repetition"),
        "{text}"
    );
}

#[test]
fn long_rule_chains_stay_linear() {
    // Defined in the order that makes repeated-pass fixpoints quadratic.
    let n = 20_000;
    let mut text = String::from("root ::= r0\n");
    for i in 0..n {
        text.push_str(&format!("r{i} ::= \"x\" r{}\n", i + 1));
    }
    text.push_str(&format!("r{n} ::= \"end\"\n"));
    let start = std::time::Instant::now();
    let g = Grammar::from_gbnf(&text, "root").unwrap();
    assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
    assert_eq!(g.rules().len(), n + 2);
    // The same chain without its end never finishes: the first rule defined
    // is the one named.
    let broken = text.replace(&format!("r{n} ::= \"end\"\n"), &format!("r{n} ::= r{n}\n"));
    match Grammar::from_gbnf(&broken, "root") {
        Err(GrammarError::InvalidGrammar {
            location: Location::LineColumn { line: 1, column: 1 },
            message,
        }) => assert!(
            message.contains("rule `root` can never produce"),
            "{message}"
        ),
        other => panic!("{:?}", other.map(|g| g.rules().len())),
    }
}
