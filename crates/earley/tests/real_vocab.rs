//! The earley backend on real vocabularies (every
//! `../shared/data/tokenizers/*/tokenizer.json`): context-free languages
//! (JSON through `json_object` and through llama.cpp-style GBNF, arithmetic
//! with nested parentheses, nested brackets) walked through the real
//! tokenization of valid and invalid texts. At every step the mask must
//! allow the next token of a valid text, and must agree with `accept_token`
//! on a sample of the vocabulary. Skipped, with a message, when the data
//! folder is absent.
//!
//! Each tokenizer is loaded once for the whole file (a few seconds each in
//! a debug build) and shared by the tests.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use tokensieve_core::bitmask::{row_allowed_tokens, row_is_allowed};
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::testing::SplitMix64;
use tokensieve_core::{
    CompiledGrammar, Constraint, ConstraintSpec, GrammarBackend, GrammarObject, Vocabulary,
};
use tokensieve_earley::{EarleyBackend, EarleyConfig};

/// Tokens drawn from the whole vocabulary at each step.
const SAMPLE: usize = 300;
/// Tokens drawn from those the mask allows at each step (so the sample
/// checks that allowed tokens are taken, not only that refused ones are not).
const SAMPLE_ALLOWED: usize = 40;

struct Loaded {
    name: String,
    tok: HfTokenizer,
    vocab: Arc<Vocabulary>,
    backend: EarleyBackend,
}

/// Every tokenizer of the shared data folder, loaded once; `None` (and a
/// "skipped" line) when the folder is absent.
fn tokenizers() -> Option<&'static [Loaded]> {
    static LOADED: OnceLock<Option<Vec<Loaded>>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let root =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/tokenizers");
            let Ok(dir) = std::fs::read_dir(&root) else {
                tokensieve_core::skip!("{} not found", root.display());
                return None;
            };
            let mut files: Vec<(String, PathBuf)> = dir
                .filter_map(|e| e.ok())
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.path().join("tokenizer.json"),
                    )
                })
                .filter(|(_, p)| p.is_file())
                .collect();
            files.sort();
            let started = std::time::Instant::now();
            let loaded: Vec<Loaded> = files
                .into_iter()
                .map(|(name, path)| {
                    // A tokenizer in the folder that the loader cannot read
                    // is a failure, not a skip: the regex backend's tests
                    // read them all.
                    let tok = HfTokenizer::from_file(&path)
                        .unwrap_or_else(|e| panic!("{name}: cannot load: {e}"));
                    let vocab = Arc::new(tok.vocabulary().clone());
                    let backend = EarleyBackend::new(vocab.clone(), EarleyConfig::default());
                    Loaded {
                        name,
                        tok,
                        vocab,
                        backend,
                    }
                })
                .collect();
            eprintln!(
                "{} tokenizers loaded in {:.1?}",
                loaded.len(),
                started.elapsed()
            );
            if loaded.is_empty() {
                tokensieve_core::skip!("no tokenizer.json under {}", root.display());
                return None;
            }
            Some(loaded)
        })
        .as_deref()
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../grammar/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A mask and `accept_token` agree on `SAMPLE` ids drawn afresh at each
/// step, `SAMPLE_ALLOWED` ids the mask allows, the stop tokens and `next`.
fn check_sample(
    what: &str,
    vocab: &Vocabulary,
    m: &dyn GrammarObject,
    row: &[u32],
    next: Option<u32>,
    r: &mut SplitMix64,
) {
    let n = vocab.vocab_size();
    let allowed = row_allowed_tokens(row, n);
    let mut ids: Vec<u32> = (0..SAMPLE).map(|_| r.below(n) as u32).collect();
    if !allowed.is_empty() {
        ids.extend((0..SAMPLE_ALLOWED).map(|_| allowed[r.below(allowed.len())]));
    }
    ids.extend(vocab.stop_tokens());
    ids.extend(next);
    for id in ids {
        let bit = row_is_allowed(row, id);
        let took = m.fork().accept_token(id).is_ok();
        assert_eq!(
            bit,
            took,
            "{what}: token {id} {:?}: mask bit {bit}, accept_token {took}",
            String::from_utf8_lossy(vocab.token_bytes(id)),
        );
    }
    for &stop in vocab.stop_tokens() {
        assert_eq!(row_is_allowed(row, stop), m.is_accepting(), "{what}: stop");
    }
}

/// How one text's walk ended.
#[derive(Debug, PartialEq)]
enum Walk {
    /// Every token taken, then a stop token.
    Accepted,
    /// Refused (by the mask and by `accept_token`) at this token index;
    /// `tokens` when every token was taken but a stop token was refused.
    RejectedAt(usize),
}

/// Walks `text`, through its real tokenization, checking the mask against
/// `accept_token` at every step. Returns the number of steps checked too.
fn walk(
    l: &Loaded,
    case: &str,
    grammar: &dyn CompiledGrammar,
    text: &str,
    r: &mut SplitMix64,
) -> (Walk, usize) {
    let ids = l
        .tok
        .encode(text)
        .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", l.name));
    assert_eq!(
        l.vocab.decode(&ids),
        text.as_bytes(),
        "{}: {text:?}",
        l.name
    );
    let mut m = grammar.matcher();
    let mut row = vec![0u32; l.vocab.mask_words()];
    let mut prefix = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        m.fill_bitmask(&mut row);
        let what = format!(
            "{}: {case}: {text:?} after {:?}",
            l.name,
            String::from_utf8_lossy(&prefix)
        );
        check_sample(&what, &l.vocab, &*m, &row, Some(id), r);
        let in_mask = row_is_allowed(&row, id);
        let took = m.accept_token(id);
        assert_eq!(in_mask, took.is_ok(), "{what}: token {id}: {took:?}");
        if !in_mask {
            return (Walk::RejectedAt(i), i + 1);
        }
        prefix.extend_from_slice(l.vocab.token_bytes(id));
    }
    m.fill_bitmask(&mut row);
    let what = format!("{}: {case}: {text:?} at the end", l.name);
    check_sample(&what, &l.vocab, &*m, &row, None, r);
    let stop = l.vocab.stop_tokens()[0];
    if m.accept_token(stop).is_err() {
        assert!(!m.is_accepting(), "{what}");
        return (Walk::RejectedAt(ids.len()), ids.len() + 1);
    }
    assert!(m.is_terminated(), "{what}");
    (Walk::Accepted, ids.len() + 1)
}

/// One grammar: valid texts are accepted through every real tokenization,
/// invalid ones refused at some token (or at the stop token when every
/// token is a valid prefix).
fn run_case(case: &str, constraint: &Constraint, good: &[&str], bad: &[&str]) {
    run_case_on(|_| true, case, constraint, good, bad);
}

/// [`run_case`] on the tokenizers whose folder name `pick` takes.
fn run_case_on(
    pick: impl Fn(&str) -> bool,
    case: &str,
    constraint: &Constraint,
    good: &[&str],
    bad: &[&str],
) {
    let Some(loaded) = tokenizers() else {
        return;
    };
    let started = std::time::Instant::now();
    let mut r = SplitMix64(0x00EA_41E7);
    let mut steps = 0;
    let loaded: Vec<&Loaded> = loaded.iter().filter(|l| pick(&l.name)).collect();
    for &l in &loaded {
        let grammar = l
            .backend
            .compile(constraint)
            .unwrap_or_else(|e| panic!("{}: {case}: {e}", l.name));
        for text in good {
            let (verdict, n) = walk(l, case, &*grammar, text, &mut r);
            assert_eq!(verdict, Walk::Accepted, "{}: {case}: {text:?}", l.name);
            steps += n;
        }
        for text in bad {
            let (verdict, n) = walk(l, case, &*grammar, text, &mut r);
            assert_ne!(
                verdict,
                Walk::Accepted,
                "{}: {case}: {text:?} must be rejected",
                l.name
            );
            steps += n;
        }
    }
    eprintln!(
        "{case}: {} tokenizers, {steps} steps checked in {:.1?}",
        loaded.len(),
        started.elapsed()
    );
}

/// Valid JSON objects for both JSON grammars: nesting, every escape,
/// numbers, non-ASCII text, and whitespace that both allow (`json.gbnf`
/// allows one space or a newline and indentation between tokens).
const JSON_GOOD: &[&str] = &[
    r#"{"name": "Zoë \"the\" 日本", "tags": ["a b", "日本", "😀"], "n": -12.5e+3, "ok": true, "none": null}"#,
    r#"{"a":{"b":[1,[2,[3,{}]],{"c":[]}]},"d":"\u00e9\\n\/\t","e":[[[[[0]]]]]}"#,
    "{\n  \"config\": {\n    \"depth\": [0, 1.0, -0.5E-2, 1e9],\n    \"empty\": {}\n  }\n}",
    r#"{"code": "fn main() { println!(\"{}\", [1, 2][0]); }", "x": false}"#,
];

/// Invalid JSON for both grammars.
const JSON_BAD: &[&str] = &[
    r#"{"a": 01}"#,
    r#"{"a": [1, 2,]}"#,
    r#"{"a" 1}"#,
    r#"{"a": tru}"#,
    r#"{"a": "tab	inside"}"#,
    r#"{"a": "\x41"}"#,
    r#"{"a": [1, 2]]}"#,
    r#"{"a": {"b": [1, 2}}"#,
    r#"{"a": [{"b": 1}"#,
    r#"{'a': 1}"#,
];

#[test]
fn json_object_on_real_tokenizers() {
    let mut bad = JSON_BAD.to_vec();
    // The builtin grammar is an object at the top, with nothing after it.
    bad.extend([r#"["top", "level"]"#, r#"{"a": 1} "#, "42"]);
    run_case(
        "json_object",
        &Constraint::new(ConstraintSpec::JsonObject),
        JSON_GOOD,
        &bad,
    );
}

#[test]
fn json_gbnf_on_real_tokenizers() {
    let mut good = JSON_GOOD.to_vec();
    // `root ::= value`: any value at the top, trailing whitespace allowed.
    good.extend([
        r#"["top", {"level": [1, 2.5]}] "#,
        "42",
        r#""just a string""#,
    ]);
    let mut bad = JSON_BAD.to_vec();
    // Its whitespace is one space or a newline and indentation.
    bad.extend([r#"{"a":  1}"#, "[1 2]"]);
    run_case(
        "json.gbnf",
        &Constraint::ebnf(fixture("json.gbnf"), "root"),
        &good,
        &bad,
    );
}

/// Left-recursive arithmetic with nested parentheses.
const ARITHMETIC: &str = r#"
root   ::= expr
expr   ::= expr " "? [-+] " "? term | term
term   ::= term " "? [*/] " "? factor | factor
factor ::= "-" factor | "(" expr ")" | [0-9]+ ("." [0-9]+)? | [a-z]+
"#;

#[test]
fn arithmetic_on_real_tokenizers() {
    run_case(
        "arithmetic",
        &Constraint::ebnf(ARITHMETIC, "root"),
        &[
            "(1 + 2) * -(3.5 / (x - 4))",
            "((((((((((42))))))))))",
            "a*(b+(c-(d/(e*(f+1)))))",
            "-(-(-1)) - 2*3/4+500.25",
            "total + (price * (1 + rate/100)) - (discount)",
        ],
        &[
            "(1 + 2",
            "1 + * 2",
            "((3)))",
            "1 +  2",
            "2(3)",
            "()",
            "(1 + 2) * (3",
            "1.2.3",
            "x = 1",
        ],
    );
}

/// Words in nested parentheses, separated by whitespace that may be empty:
/// every split of a word into words is a derivation, and a mask walks
/// nearly every token of letters. The first mask after `x` was past the
/// default step budget (twenty million item operations) and refused every
/// valid text. Walked on Llama 3's vocabulary alone: a debug build takes
/// seconds a mask over the letters of a whole vocabulary.
const SPLIT_WORDS: &str = r#"
root ::= "x" ws seq
seq  ::= item (ws item)*
item ::= [a-z]+ | "(" ws seq ws ")"
ws   ::= [ \t]*
"#;

#[test]
fn words_that_split_into_words_on_real_tokenizers() {
    run_case_on(
        |name| name == "llama3",
        "split words",
        &Constraint::ebnf(SPLIT_WORDS, "root"),
        &["x ab (cd ef)gh\t( (i) )"],
        &["x (a", "x a)", "x A"],
    );
}

/// Names that split into names, then a character past ASCII that only the
/// rule begun before the names takes: after a name, a level loops on every
/// letter and takes no byte past ASCII itself; the tokens of letters then
/// `é` are found only through the completion into the set where the
/// sequence began.
const SPLIT_WORDS_THEN_ACCENT: &str = r#"
root ::= "x" ws seq ws end
seq  ::= item (ws item)*
item ::= [a-z]+
end  ::= "é" | "."
ws   ::= [ \t]*
"#;

/// Every token of lowercase letters then bytes past ASCII, at prefixes
/// inside and between names: mask bit against `accept_token`.
#[test]
fn words_then_a_character_past_ascii_on_real_tokenizers() {
    let Some(loaded) = tokenizers() else {
        return;
    };
    for l in loaded.iter().filter(|l| l.name == "llama3") {
        let grammar = l
            .backend
            .compile(&Constraint::ebnf(SPLIT_WORDS_THEN_ACCENT, "root"))
            .unwrap_or_else(|e| panic!("{}: {e}", l.name));
        let words: Vec<u32> = (0..l.vocab.vocab_size() as u32)
            .filter(|&t| {
                let bytes = l.vocab.token_bytes(t);
                let past = bytes.iter().position(|&b| b >= 0x80);
                past.is_some_and(|k| k >= 3 && bytes[..k].iter().all(u8::is_ascii_lowercase))
            })
            .collect();
        assert!(words.len() > 100, "{}: {} such tokens", l.name, words.len());
        let mut row = vec![0u32; l.vocab.mask_words()];
        let mut allowed = 0;
        for prefix in ["x", "x ab", "x ab cd", "x abc", "x ab\tcde"] {
            let mut m = grammar.matcher();
            m.accept_bytes(prefix.as_bytes())
                .unwrap_or_else(|e| panic!("{}: {prefix:?}: {e:?}", l.name));
            m.fill_bitmask(&mut row);
            for &t in &words {
                let bit = row_is_allowed(&row, t);
                let took = m.fork().accept_token(t).is_ok();
                assert_eq!(
                    bit,
                    took,
                    "{}: after {prefix:?}: token {t} {:?}",
                    l.name,
                    String::from_utf8_lossy(l.vocab.token_bytes(t))
                );
                allowed += usize::from(took);
            }
        }
        assert!(
            allowed > 0,
            "{}: no token of letters then `é` taken",
            l.name
        );
    }
}

/// A C-like postfix loop (`postfix ::= name suffix*`, lowered to the left
/// recursion `T ::= name | T suffix`): in one token of dashes, every `--`
/// completes `T` again in the set where the name began, which the mask
/// walks in one pass rather than one completion level per suffix (Llama
/// 3 has a token of 96 dashes: 48 of them).
const POSTFIX_LOOP: &str = r#"
root    ::= stmt+
stmt    ::= expr ";" ws
expr    ::= postfix (ws "+" ws postfix)*
postfix ::= name suffix*
suffix  ::= "--" | "++" | "." name | "(" ws ")" | "[" ws expr ws "]"
name    ::= [a-z]+
ws      ::= [ \n]*
"#;

#[test]
fn postfix_loops_inside_a_token_on_real_tokenizers() {
    let dashes = format!("a{};", "-".repeat(96));
    let mixed = "x.y.z()[i++]--;\nb + c.d----++;".to_string();
    run_case_on(
        |name| name == "llama3",
        "postfix loop",
        &Constraint::ebnf(POSTFIX_LOOP, "root"),
        &[&dashes, &mixed, "a--------------------------------;"],
        &["a-;", "a---;", "a.;", "a(;"],
    );
}

/// Four kinds of brackets, nested in any order, between runs of text.
/// Text runs alternate with groups, so the grammar is unambiguous.
const BRACKETS: &str = r#"
root  ::= text? (group text?)*
group ::= "(" root ")" | "[" root "]" | "{" root "}" | "<" root ">"
text  ::= [a-z0-9 ,.]+
"#;

#[test]
fn nested_brackets_on_real_tokenizers() {
    run_case(
        "brackets",
        &Constraint::ebnf(BRACKETS, "root"),
        &[
            "([{<a, b>}])",
            "f(x[1]{y}) and (((nested [deep {deeper <deepest>}])))",
            "[[[[[[[[[[[[]]]]]]]]]]]]",
            "a, b. (c) [d]",
            "",
        ],
        &[
            "([)]",
            "(((x))",
            "{a}]",
            "<a>)",
            "[[[[[[[[[[[[]]]]]]]]]]]",
            "(a) B",
        ],
    );
}

/// A real product record (MaskBench Github_ultra o39532: an object of 153
/// optional members beside any other key, integers under a 13-digit
/// maximum) through its valid instances on Llama 3: after a value, every
/// later member's key is an item, about a hundred of them at each node of
/// a run of whitespace or a comma, walked lexeme by lexeme; every mask
/// must agree with `accept_token`. Skipped, with a message, when the
/// MaskBench folder is absent.
#[test]
fn keys_of_a_large_real_object_on_llama3() {
    let Some(loaded) = tokenizers() else {
        return;
    };
    let Some(l) = loaded.iter().find(|l| l.name == "llama3") else {
        tokensieve_core::skip!("no llama3 tokenizer");
        return;
    };
    let path = format!(
        "{}/../../../shared/data/maskbench-dev/Github_ultra---o39532.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let Ok(text) = std::fs::read_to_string(&path) else {
        tokensieve_core::skip!("{path} not found");
        return;
    };
    let file: serde_json::Value = serde_json::from_str(&text).expect("a MaskBench file");
    let constraint = Constraint::new(ConstraintSpec::JsonSchema(file["schema"].to_string()));
    let grammar = l.backend.compile(&constraint).expect("o39532 compiles");
    let mut r = SplitMix64(0x0039_5320);
    let mut walked = 0;
    for test in file["tests"].as_array().expect("tests") {
        if test["valid"] != true {
            continue;
        }
        let instance = serde_json::to_string(&test["data"]).expect("an instance");
        let (verdict, _) = walk(l, "o39532", &*grammar, &instance, &mut r);
        assert_eq!(verdict, Walk::Accepted, "o39532: {instance}");
        walked += 1;
    }
    assert!(walked > 0, "o39532 has valid instances");
}

/// Names that may follow names with nothing between (`item (ws item)*`
/// with `ws ::= [ \t]*`, as in GBNF itself): after a name, every token of
/// letters and digits ends it anywhere or goes on with it, and every split
/// completes the rules above in older sets. Each step must be done
/// within 200,000 item operations (a hundredth of the default
/// `max_step_work`; 50,000–100,000 are needed), where walking every letter
/// node of the vocabulary through the parser took more than 400,000: runs
/// of letters are taken whole once the parser's level repeats, and
/// subtrees whose tokens are all found already are not walked again.
const NAMES_AFTER_NAMES: &str = r#"
root   ::= rule+
rule   ::= name ws "::=" ws alts "\n"
alts   ::= seq (ws "|" ws seq)*
seq    ::= item (ws item)*
item   ::= (name | "\"" [a-z+*/() -]* "\"" | "(" ws alts ws ")") [*+?]?
name   ::= [a-zA-Z] [a-zA-Z0-9_-]*
ws     ::= [ \t]*
"#;

#[test]
fn names_after_names_fill_within_a_small_budget_on_llama3() {
    let Some(loaded) = tokenizers() else {
        return;
    };
    let Some(l) = loaded.iter().find(|l| l.name == "llama3") else {
        tokensieve_core::skip!("no llama3 tokenizer");
        return;
    };
    let config = EarleyConfig {
        max_step_work: 200_000,
        shared_lexemes: false,
        ..EarleyConfig::default()
    };
    let backend = EarleyBackend::new(l.vocab.clone(), config);
    let grammar = backend
        .compile(&Constraint::ebnf(NAMES_AFTER_NAMES, "root"))
        .expect("compiles");
    let text = "root ::= expr\nexpr ::= term (ws (\"+\" | \"-\") ws term)*\n\
                term ::= factor (ws \"*\" ws factor)* | \"(\" expr \")\"\n";
    let mut r = SplitMix64(0x4e41_4d45);
    let (verdict, _) = walk(l, "names after names", &*grammar, text, &mut r);
    assert_eq!(verdict, Walk::Accepted);
}

/// The masks of sets summarized item by item (each item's walk kept
/// apart, the completions into the set itself walked for it) and of
/// completions into older sets walked group by group (each group's walk
/// kept apart) equal those of sets summarized whole and completions walked
/// together, and the default's, mask for mask, on code grammars of the
/// benchmark corpus (`benches/fixtures/grammars`) with Llama 3: the grammar
/// of GBNF, whose runs of names complete the same rule into the set again
/// inside one token, SQL, and C.
#[test]
fn summaries_made_apart_give_the_same_masks_on_llama3() {
    let Some(l) = tokenizers().and_then(|all| all.iter().find(|l| l.name == "llama3")) else {
        tokensieve_core::skip!("no llama3 tokenizer");
        return;
    };
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benches/fixtures/grammars");
    let read = |path: &str| {
        let path = corpus.join(path);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    for (grammar, text) in [
        ("gbnf.gbnf", "gbnf/1-arithmetic.txt"),
        ("sql.gbnf", "sql/1-reports.txt"),
        ("tinyc.gbnf", "tinyc/1-list.txt"),
    ] {
        let constraint = Constraint::ebnf(read(grammar), "root");
        let text = read(text);
        let ids = l.tok.encode(&text).unwrap();
        let d = EarleyConfig::default();
        let ways = [
            (1, 1),
            (usize::MAX, usize::MAX),
            (d.item_summaries, d.group_walks),
        ];
        let compiled = ways.map(|(item_summaries, group_walks)| {
            let config = EarleyConfig {
                item_summaries,
                group_walks,
                // Each compile makes its own summaries.
                shared_lexemes: false,
                ..EarleyConfig::default()
            };
            EarleyBackend::new(l.vocab.clone(), config)
                .compile(&constraint)
                .unwrap_or_else(|e| panic!("{grammar}: {e}"))
        });
        let mut matchers = compiled.map(|c| c.matcher());
        let mut rows = [(); 3].map(|_| vec![0u32; l.vocab.mask_words()]);
        for (i, &id) in ids.iter().enumerate() {
            for (m, row) in matchers.iter_mut().zip(&mut rows) {
                m.fill_bitmask(row);
            }
            assert!(
                rows[0] == rows[1] && rows[0] == rows[2],
                "{grammar}: the masks differ after {:?}",
                String::from_utf8_lossy(&l.vocab.decode(&ids[..i]))
            );
            assert!(row_is_allowed(&rows[0], id), "{grammar}: token {i} refused");
            for m in &mut matchers {
                m.accept_token(id).unwrap();
            }
        }
    }
}
