//! The `tokensieve` binary's public surface: subcommand names, output and exit
//! codes (0 accepted, 1 rejected, 2 bad input: one line on stderr, no panic).

use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tokensieve"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("running tokensieve")
}

/// `tokensieve mask --backend BACKEND --tokenizer TOK REST...`
fn mask(backend: &str, tok: &str, rest: &[&str]) -> Output {
    let mut args = vec!["mask", "--backend", backend, "--tokenizer", tok];
    args.extend_from_slice(rest);
    run(&args)
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Llama 3 from ../shared when present, else the repo's own byte-level fixture.
fn tokenizer() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = root.join("../shared/data/tokenizers/llama3/tokenizer.json");
    if shared.exists() {
        return shared.display().to_string();
    }
    eprintln!("note: ../shared/data absent, using the in-repo fixture tokenizer");
    root.join("crates/core/tests/fixtures/byte_level_bpe.json")
        .display()
        .to_string()
}

/// A folder of input files for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("tokensieve-cli-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes `name` with `content`; returns its path as an argument.
    fn file(&self, name: &str, content: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, content).unwrap();
        path.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn assert_bad_input(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(code(o), 2, "stderr: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn backends_lists_kinds() {
    let o = run(&["backends"]);
    assert_eq!(code(&o), 0);
    let out = stdout(&o);
    let none = out
        .lines()
        .find(|l| l.starts_with("none\t"))
        .expect("none listed");
    assert!(
        none.contains("json_schema") && none.contains("regex"),
        "{none}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("regex-fsm (alias outlines)\t")),
        "{out}"
    );
}

#[test]
fn vocab_describes_the_tokenizer() {
    let o = run(&["vocab", "--tokenizer", &tokenizer()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["type"], "byte_level");
    assert!(v["vocab_size"].as_u64().unwrap() > 256);
    assert!(!v["stop_tokens"].as_array().unwrap().is_empty());
}

#[test]
fn vocab_size_pads_and_is_checked() {
    let tok = tokenizer();
    let o = run(&["vocab", "--tokenizer", &tok]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = v["tokenizer_size"].as_u64().unwrap();
    let padded = (n + 64).to_string();
    let o = run(&["vocab", "--tokenizer", &tok, "--vocab-size", &padded]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["vocab_size"].as_u64().unwrap(), n + 64);
    assert_eq!(v["padding_tokens"].as_u64().unwrap(), 64);
    let ok = mask(
        "regex-fsm",
        &tok,
        &[
            "--vocab-size",
            &padded,
            "--regex",
            "[a-z]+",
            "--text",
            "abc",
        ],
    );
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    assert_bad_input(
        &run(&["vocab", "--tokenizer", &tok, "--vocab-size", "3"]),
        "smaller than the tokenizer",
    );
}

/// One token is "1 token"; the tokenizer may be the GGUF model that
/// `scripts/fetch-model.sh` brings, read by its first bytes.
#[test]
fn mask_counts_tokens_and_reads_a_gguf_tokenizer() {
    let one = mask(
        "earley",
        &tokenizer(),
        &["--regex", "[a-z]+", "--text", "a"],
    );
    assert_eq!(code(&one), 0, "{}", stderr(&one));
    assert_eq!(stdout(&one).lines().last(), Some("accepted: 1 token"));

    let models = match std::env::var_os("TOKENSIEVE_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/tokensieve/models"),
    };
    let gguf = models.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if !gguf.exists() {
        tokensieve::skip!(
            "no model at {} (run scripts/fetch-model.sh)",
            gguf.display()
        );
        return;
    }
    let o = mask(
        "earley",
        &gguf.display().to_string(),
        &["--regex", "[a-z]+ [0-9]{2}", "--text", "hello 42"],
    );
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).lines().last().unwrap().starts_with("accepted: "),
        "{}",
        stdout(&o)
    );
    let v = run(&["vocab", "--tokenizer", &gguf.display().to_string()]);
    assert_eq!(code(&v), 0, "{}", stderr(&v));
    assert!(stdout(&v).contains("49152"), "{}", stdout(&v));
}

#[test]
fn mask_accepts_and_rejects() {
    let tok = tokenizer();
    let ok = mask(
        "regex-fsm",
        &tok,
        &["--regex", "[a-z]+ [0-9]{2}", "--text", "hello 42"],
    );
    assert_eq!(code(&ok), 0, "{} {}", stdout(&ok), stderr(&ok));
    assert!(stdout(&ok).starts_with("accepted"));

    let bad = mask(
        "regex-fsm",
        &tok,
        &["--regex", "[a-z]+ [0-9]{2}", "--text", "hello 4x"],
    );
    assert_eq!(code(&bad), 1);
    let out = stdout(&bad);
    assert!(
        out.starts_with("rejected at token") && out.contains("tokens were allowed"),
        "{out}"
    );

    let short = mask(
        "regex-fsm",
        &tok,
        &["--choice", "yes", "--choice", "yesterday", "--text", "yest"],
    );
    assert_eq!(code(&short), 1);
    assert!(
        stdout(&short).contains("may not end here"),
        "{}",
        stdout(&short)
    );

    let choice = mask(
        "outlines",
        &tok,
        &["--choice", "yes", "--choice", "no", "--text", "no"],
    );
    assert_eq!(code(&choice), 0, "{}", stderr(&choice));
}

#[test]
fn mask_with_a_schema_file() {
    let scratch = Scratch::new("schema");
    let s = scratch.file("schema.json", r#"{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}"#);
    let tok = tokenizer();
    let ok = mask(
        "regex-fsm",
        &tok,
        &["--schema", &s, "--text", r#"{"a": 12}"#],
    );
    assert_eq!(code(&ok), 0, "{} {}", stdout(&ok), stderr(&ok));
    let bad = mask(
        "regex-fsm",
        &tok,
        &["--schema", &s, "--text", r#"{"a": "x"}"#],
    );
    assert_eq!(code(&bad), 1);
    let s = scratch.file("schema.json", "{not json");
    let malformed = mask("regex-fsm", &tok, &["--schema", &s, "--text", "{}"]);
    assert_bad_input(&malformed, "schema");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tok = tokenizer();
    assert_bad_input(
        &run(&["vocab", "--tokenizer", "/nonexistent/tokenizer.json"]),
        "/nonexistent/tokenizer.json",
    );

    let scratch = Scratch::new("bad");
    let junk = scratch.file("tokenizer.json", "{\"model\": 3}");
    assert_bad_input(&run(&["vocab", "--tokenizer", &junk]), "tokenizer.json");

    let unknown = mask("nope", &tok, &["--regex", "a", "--text", "a"]);
    assert_bad_input(&unknown, "unknown backend `nope`");

    let empty = mask(
        "regex-fsm",
        &tok,
        &["--grammar", "/dev/null", "--text", "a"],
    );
    assert_bad_input(&empty, "the grammar is empty");

    let regex = mask("regex-fsm", &tok, &["--regex", "(a", "--text", "a"]);
    assert_bad_input(&regex, "regex");

    let look = mask("regex-fsm", &tok, &["--regex", "a(?=b)", "--text", "a"]);
    assert_bad_input(&look, "look");

    let missing = mask(
        "regex-fsm",
        &tok,
        &["--schema", "/nonexistent.json", "--text", "a"],
    );
    assert_bad_input(&missing, "/nonexistent.json");
}

#[test]
fn backend_options_reach_the_backend() {
    let tok = tokenizer();
    let with_option = |regex: &str, option: &str| {
        mask(
            "regex-fsm",
            &tok,
            &["--regex", regex, "--text", regex, "--option", option],
        )
    };
    // 3 states cannot hold "abcde": the knob was applied.
    assert_bad_input(&with_option("abcde", "max_dfa_states=3"), "max_dfa_states");
    let o = with_option("abcde", "walk_cache_bytes=0");
    assert_eq!(code(&o), 0, "stderr: {}", stderr(&o));
    assert_bad_input(&with_option("a", "max_dfa_states=many"), "max_dfa_states");
    assert_bad_input(&with_option("a", "minimize"), "KEY=VALUE");
    // A misspelt knob is refused by name, not run with the default.
    assert_bad_input(&with_option("a", "max_dfa_state=3"), "`max_dfa_state`");
}

#[test]
fn regular_grammars_run_on_the_regex_backend() {
    let tok = tokenizer();
    let scratch = Scratch::new("gbnf");
    let list = scratch.file(
        "list.gbnf",
        "root ::= item (\", \" root)?\nitem ::= [a-c]+ | [0-9]{1,3}\n",
    );
    let walk =
        |file: &str, text: &str| mask("regex-fsm", &tok, &["--grammar", file, "--text", text]);
    let o = walk(&list, "cab, 42, a");
    assert_eq!(code(&o), 0, "stderr: {}", stderr(&o));
    let o = walk(&list, "cab,, a");
    assert_eq!(code(&o), 1, "stderr: {}", stderr(&o));
    // Nested brackets are context-free: an error naming the rule and line.
    let nested = scratch.file("nested.gbnf", "root ::= \"x\" | \"[\" root \"]\"\n");
    let o = walk(&nested, "[x]");
    assert_bad_input(&o, "rule `root`");
    assert!(stderr(&o).contains("line 1"), "{}", stderr(&o));
    // ... naming the backends that take it; the default one walks it.
    assert!(stderr(&o).contains("`auto`"), "{}", stderr(&o));
    let o = run(&[
        "mask",
        "--tokenizer",
        &tok,
        "--grammar",
        &nested,
        "--text",
        "[x]",
    ]);
    assert_eq!(code(&o), 0, "stderr: {}", stderr(&o));
}

#[test]
fn structural_tags_constrain_only_the_tagged_regions() {
    let tok = tokenizer();
    let scratch = Scratch::new("tag");
    let walk = |file: &str, text: &str| {
        mask(
            "regex-fsm",
            &tok,
            &["--structural-tag", file, "--text", text],
        )
    };
    let tag = scratch.file(
        "tag.json",
        r#"{"triggers": ["<f="], "tags": [{"begin": "<f=n>", "content": {"regex": "[0-9]{1,2}"}, "end": "</f>"}]}"#,
    );
    let o = walk(&tag, "ok <f=n>42</f> done");
    assert_eq!(code(&o), 0, "stderr: {}", stderr(&o));
    for rejected in ["ok <f=n>x</f>", "ok <f=m>1</f>"] {
        let o = walk(&tag, rejected);
        assert_eq!(code(&o), 1, "{rejected}: {}", stderr(&o));
    }
    let bad = scratch.file(
        "bad.json",
        r#"{"triggers": ["<g"], "tags": [{"begin": "<f=n>", "content": {"regex": "1"}, "end": ""}]}"#,
    );
    assert_bad_input(&walk(&bad, "x"), "starts with none of the triggers");
    let junk = scratch.file("junk.json", "{\"tags\": 3}");
    assert_bad_input(&walk(&junk, "x"), "structural tag");
}

#[test]
fn mask_text_may_begin_with_a_hyphen() {
    let tok = tokenizer();
    for text_args in [["--text", "-12"], ["--text=-12", ""]] {
        let mut args = vec!["--regex", "-?[0-9]+"];
        args.extend(text_args.iter().filter(|a| !a.is_empty()));
        let o = mask("regex-fsm", &tok, &args);
        assert_eq!(code(&o), 0, "{args:?}: {} {}", stdout(&o), stderr(&o));
        assert!(stdout(&o).starts_with("accepted"), "{}", stdout(&o));
    }
    // A markdown list, and a value that is rejected (not misread as a flag).
    let list = mask(
        "earley",
        &tok,
        &["--regex", "(- [a-z]+\n?)+", "--text", "- milk\n- eggs"],
    );
    assert_eq!(code(&list), 0, "{} {}", stdout(&list), stderr(&list));
    let o = mask("regex-fsm", &tok, &["--regex", "[0-9]+", "--text", "-5"]);
    assert_eq!(code(&o), 1, "{} {}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).starts_with("rejected at token 0"),
        "{}",
        stdout(&o)
    );
    // The flags after it are still flags.
    let o = mask("regex-fsm", &tok, &["--text", "-3", "--regex", "-[0-9]"]);
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));
}

#[test]
fn earley_runs_context_free_grammars_and_names_bad_ones() {
    let tok = tokenizer();
    let scratch = Scratch::new("earley");
    let nested = scratch.file("nested.gbnf", "root ::= \"x\" | \"[\" root \"]\"\n");
    let walk = |file: &str, text: &str| mask("earley", &tok, &["--grammar", file, "--text", text]);
    let o = walk(&nested, "[[x]]");
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));
    let o = walk(&nested, "[[x]");
    assert_eq!(code(&o), 1, "{} {}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("may not end here"), "{}", stdout(&o));
    // An unterminated string on line 2, column 10.
    let bad = scratch.file("bad.gbnf", "root ::= item\nitem ::= \"abc\n");
    let o = walk(&bad, "abc");
    assert_bad_input(&o, "line 2, column 10");
    // A rule used but never defined, on line 1, column 14.
    let bad = scratch.file("undefined.gbnf", "root ::= \"a\" item\n");
    assert_bad_input(&walk(&bad, "a"), "line 1, column 14");
}

/// `bench jsts` runs a suite file as mask walks: a group whose schema
/// compiles has its tests passed or failed, one whose schema is refused
/// counts as unsupported, and `--show-failures` names it with the error.
#[test]
fn jsts_counts_and_names_refused_groups() {
    let tok = tokenizer();
    let scratch = Scratch::new("jsts");
    let suite = scratch.file(
        "anchors.json",
        r##"[
          {"description": "an anchor", "schema": {"$ref": "#n", "$defs": {"a": {"$anchor": "n", "type": "integer"}}},
           "tests": [{"description": "an integer", "data": 1, "valid": true},
                     {"description": "a string", "data": "x", "valid": false}]},
          {"description": "a dynamic reference", "schema": {"$dynamicRef": "#n"},
           "tests": [{"description": "anything", "data": 1, "valid": true}]}
        ]"##,
    );
    let o = run(&[
        "bench",
        "jsts",
        "--backend",
        "earley",
        "--tokenizer",
        &tok,
        "--show-failures",
        &suite,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let row = stdout(&o)
        .lines()
        .find(|l| l.starts_with("| anchors.json") || l.contains("anchors.json |"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no row for the file: {}", stdout(&o)));
    // groups, tests, passed, failed, invalidations, unsupported, crashed
    assert!(row.contains("| 2 | 3 | 2 | 0 | 0 | 1 | 0 |"), "{row}");
    let err = stderr(&o);
    assert!(
        err.contains("UNSUPPORTED")
            && err.contains("a dynamic reference")
            && err.contains("$dynamicRef"),
        "{err}"
    );
}

/// `bench soak` serves batches from threads sharing one grammar cache,
/// with compiles cancelled and timed out at random, and counts what
/// happened; it fails (exit 1) when an instance labelled invalid gets
/// through, here a mislabelled one, which is how it would show a backend
/// accepting a wider language under load.
#[test]
fn soak_serves_batches_and_fails_on_an_invalid_instance_accepted() {
    let tok = tokenizer();
    let scratch = Scratch::new("soak");
    scratch.file(
        "point.json",
        r#"{"schema": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                       "required": ["x", "y"], "additionalProperties": false},
            "tests": [{"data": {"x": 1, "y": -20}, "valid": true},
                      {"data": {"x": 1}, "valid": false},
                      {"data": {"x": 1, "y": 2, "z": 3}, "valid": false}]}"#,
    );
    scratch.file(
        "tree.json",
        r##"{"schema": {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "string"},
                          "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "required": ["v"]}},
                       "$ref": "#/$defs/n"},
            "tests": [{"data": {"v": "a", "kids": [{"v": "b", "kids": [{"v": "c"}]}]}, "valid": true},
                      {"data": {"kids": []}, "valid": false}]}"##,
    );
    // A schema the backend refuses: every request for it is an error.
    scratch.file(
        "refused.json",
        r#"{"schema": {"type": "string", "not": {"anyOf": [{"pattern": "a"}]}},
            "tests": [{"data": "b", "valid": true}]}"#,
    );
    let soak = |dir: &str| {
        run(&[
            "bench",
            "soak",
            "--backend",
            "earley",
            "--tokenizer",
            &tok,
            "--requests",
            "30",
            "--rounds",
            "2",
            "--threads",
            "3",
            "--batch",
            "4",
            "--cache-entries",
            "2",
            "--cancel-percent",
            "20",
            "--timeout-percent",
            "20",
            dir,
        ])
    };
    let dir = scratch.0.display().to_string();
    let o = soak(&dir);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON summary");
    assert_eq!(summary["requests"], 60, "{summary}");
    assert!(summary["walks"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["tokens"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(
        summary["invalid_accepted"],
        serde_json::json!([]),
        "{summary}"
    );
    assert_eq!(
        summary["nondeterministic"],
        serde_json::json!([]),
        "{summary}"
    );
    assert_eq!(summary["valid_refused"], 0, "{summary}");
    assert!(
        summary["errors"]["Unsupported"].as_u64().unwrap() > 0,
        "{summary}"
    );
    assert!(
        summary["cache"]["evicted"].as_u64().unwrap() > 0,
        "{summary}"
    );
    assert!(
        summary["calls_us"]["fill_row"]["n"].as_u64().unwrap() > 0,
        "{summary}"
    );
    assert_eq!(
        summary["memory_mib"]["after_each_round"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    scratch.file(
        "mislabelled.json",
        r#"{"schema": {"type": "integer"}, "tests": [{"data": 7, "valid": false}]}"#,
    );
    let o = soak(&dir);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON summary");
    let accepted = summary["invalid_accepted"].as_array().unwrap();
    assert!(
        accepted
            .iter()
            .all(|a| a.as_str().unwrap().starts_with("mislabelled.json")),
        "{summary}"
    );
    assert!(!accepted.is_empty(), "{summary}");
    assert!(stderr(&o).contains("soak FAILED"), "{}", stderr(&o));
}

/// `bench grammars`: one MaskBench-format record per grammar, each text of
/// `NAME/` walked whole (a text the grammar refuses is recorded as
/// refused); a grammar without texts is bad input, named.
#[test]
fn bench_grammars_walks_each_grammar_over_its_texts() {
    let s = Scratch::new("bench-grammars");
    s.file(
        "list.gbnf",
        "root ::= \"[\" item (\",\" ws item)* \"]\"\nitem ::= [a-z]+\nws ::= \" \"*\n",
    );
    std::fs::create_dir_all(s.0.join("list")).unwrap();
    s.file("list/1.txt", "[apple, pear,plum]");
    s.file("list/2.txt", "[fig, 7]");
    s.file("word.gbnf", "root ::= \"yes\" | \"no\"\n");
    std::fs::create_dir_all(s.0.join("word")).unwrap();
    s.file("word/only.txt", "yes");
    let out = s.0.join("out.jsonl").display().to_string();
    let dir = s.0.display().to_string();
    let tok = tokenizer();
    let bench = || {
        run(&[
            "bench",
            "grammars",
            "--backend",
            "earley",
            "--tokenizer",
            &tok,
            "--out",
            &out,
            &dir,
        ])
    };
    let o = bench();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["id"], "list.gbnf");
    assert_eq!(records[0]["split"], "list");
    assert!(records[0]["compile_us"].is_u64());
    let tests = records[0]["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2);
    assert_eq!(tests[0]["accepted"], true);
    assert_eq!(tests[0]["end_ok"], true);
    assert_eq!(tests[1]["accepted"], false, "a digit is no item");
    assert_eq!(records[1]["id"], "word.gbnf");
    assert_eq!(records[1]["tests"][0]["accepted"], true);

    std::fs::remove_dir_all(s.0.join("word")).unwrap();
    let o = bench();
    assert_bad_input(&o, "word");
}
