//! `tokensieve generate`: bad input exits 2 with one line, always; with the
//! real model (scripts/fetch-model.sh) the output is schema-valid JSON and
//! jump-forward does not change a greedy answer. `bench e2e`, the same model
//! over MaskBench schemas, prints its table and draws its chart. Tests that
//! need the model print that they skipped when it is absent.
#![cfg(feature = "generate")]

use std::path::PathBuf;
use std::process::{Command, Output};
use tokensieve::gguf::write::{Value, gguf};

fn run(args: &[&str], models: Option<&std::path::Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tokensieve"));
    c.arg("generate").args(args);
    if let Some(dir) = models {
        c.env("TOKENSIEVE_MODELS", dir);
    }
    c.output().expect("running tokensieve")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `(sampled, forced)` from the report line on stderr.
fn counts(o: &Output) -> (usize, usize) {
    let e = stderr(o);
    let after = e.split_once(" tokens (").expect("a report line").1;
    let mut words = after.split([' ', ',']);
    let sampled = words.next().unwrap().parse().unwrap();
    assert_eq!(words.next(), Some("sampled"));
    let forced = words.find(|w| !w.is_empty()).unwrap().parse().unwrap();
    (sampled, forced)
}

fn one_error_line(o: &Output) -> String {
    let e = stderr(o);
    assert_eq!(code(o), 2, "stderr: {e}");
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(e.starts_with("error: ") && !e.contains("panicked"), "{e}");
    e
}

/// The fetched model, when present (as `generate` finds it by default).
fn model() -> Option<PathBuf> {
    let dir = match std::env::var_os("TOKENSIEVE_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/tokensieve/models"),
    };
    let p = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.exists() {
        Some(p)
    } else {
        tokensieve::skip!("no model at {} (run scripts/fetch-model.sh)", p.display());
        None
    }
}

#[test]
fn a_missing_model_names_the_fetch_script() {
    let empty = tempfile::tempdir().unwrap();
    let o = run(&["--json", "hi"], Some(empty.path()));
    let e = one_error_line(&o);
    assert!(e.contains("scripts/fetch-model.sh"), "{e}");
    let o = run(&["--json", "--model", "/nonexistent/m.gguf", "hi"], None);
    assert!(one_error_line(&o).contains("/nonexistent/m.gguf"));
}

#[test]
fn a_gguf_of_another_architecture_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mamba.gguf");
    let bytes = gguf(&[
        ("general.architecture", Value::Str("mamba")),
        ("tokenizer.ggml.model", Value::Str("gpt2")),
        ("tokenizer.ggml.pre", Value::Str("gpt2")),
        (
            "tokenizer.ggml.tokens",
            Value::Strs(vec!["a", "b", "ab", "<|endoftext|>"]),
        ),
        ("tokenizer.ggml.token_type", Value::I32s(vec![1, 1, 1, 3])),
        ("tokenizer.ggml.merges", Value::Strs(vec!["a b"])),
        ("tokenizer.ggml.eos_token_id", Value::U32(3)),
    ]);
    std::fs::write(&path, bytes).unwrap();
    let o = run(&["--json", "--model", path.to_str().unwrap(), "hi"], None);
    let e = one_error_line(&o);
    assert!(e.contains("architecture `mamba` is not supported"), "{e}");
    // Not a GGUF at all: the tokenizer reader says so first.
    std::fs::write(&path, b"not a model").unwrap();
    let o = run(&["--json", "--model", path.to_str().unwrap(), "hi"], None);
    assert!(one_error_line(&o).contains("not a GGUF file"));
}

#[test]
fn the_real_model_answers_in_the_schema() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("person.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150}},
            "required": ["name", "age"]}"#,
    )
    .unwrap();
    let args = |extra: &'static [&'static str]| {
        let mut a = vec![
            "--model".to_string(),
            model.display().to_string(),
            "--schema".into(),
            schema.display().to_string(),
            "--max-tokens".into(),
            "24".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push("Give a person's name and age as JSON.".into());
        a
    };
    let a = args(&[]);
    let o = run(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>(), None);
    let e = stderr(&o);
    assert_eq!(code(&o), 0, "{e}");
    assert!(e.contains("valid against the schema"), "{e}");
    let value: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert!(
        value["name"].is_string() && value["age"].is_u64(),
        "{value}"
    );
    // Keys and punctuation are certain: jump-forward writes them.
    let (sampled, forced) = counts(&o);
    assert!(forced > 0 && sampled > 0, "{e}");
}

#[test]
fn the_real_model_gives_the_same_greedy_choice_with_and_without_jump_forward() {
    let Some(model) = model() else { return };
    let m = model.display().to_string();
    let base = [
        "--model",
        &m,
        "--choice",
        "the answer is positive",
        "--choice",
        "the answer is negative",
        "Is 'I loved every minute of it' positive or negative?",
    ];
    let with = run(&base, None);
    let mut no_jump = vec!["--no-jump-forward"];
    no_jump.extend_from_slice(&base);
    let without = run(&no_jump, None);
    assert_eq!(code(&with), 0, "{}", stderr(&with));
    assert_eq!(code(&without), 0, "{}", stderr(&without));
    assert_eq!(with.stdout, without.stdout);
    // "the answer is " is certain from the start: jump-forward samples
    // only the one token that picks the word, and forces the rest.
    let (sampled, forced) = counts(&with);
    assert!(forced > 0, "{}", stderr(&with));
    assert!(sampled < counts(&without).0, "{}", stderr(&with));
    assert_eq!(counts(&without).1, 0);
}

#[test]
fn a_spec_the_backend_refuses_is_bad_input() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let grammar = dir.path().join("nested.gbnf");
    std::fs::write(&grammar, "root ::= \"[\" root \"]\" | \"x\"\n").unwrap();
    let m = model.display().to_string();
    let o = run(
        &[
            "--model",
            &m,
            "--backend",
            "regex-fsm",
            "--grammar",
            grammar.to_str().unwrap(),
            "hi",
        ],
        None,
    );
    let e = one_error_line(&o);
    assert!(e.contains("root"), "{e}");
    // ... and names the backends that take it (the default among them).
    assert!(e.contains("`auto`") && e.contains("`earley`"), "{e}");
}

#[test]
fn every_mask_device_gives_the_cpu_answer_or_says_why_not() {
    let Some(model) = model() else { return };
    let m = model.display().to_string();
    let args = |device: &'static str| {
        vec![
            "--model",
            &m,
            "--device",
            device,
            "--max-tokens",
            "12",
            "--regex",
            "[a-z]+( [a-z]+)*",
            "Name a fruit.",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let cpu = run(
        &args("cpu").iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        None,
    );
    assert!(matches!(code(&cpu), 0 | 1), "{}", stderr(&cpu));
    for device in ["wgpu", "cuda"] {
        let o = run(
            &args(device).iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            None,
        );
        let e = stderr(&o);
        match code(&o) {
            // Compiled in and present: masks agree bit for bit, so greedy output does too.
            0 | 1 => assert_eq!(o.stdout, cpu.stdout, "{device}: {e}"),
            2 => {
                let last = e.lines().last().unwrap_or_default();
                assert!(
                    last.starts_with(&format!("error: --device {device}")),
                    "{e}"
                );
            }
            other => panic!("{device}: exit {other}: {e}"),
        }
    }
}

const E2E_MODES: [&str; 3] = ["unconstrained", "constrained", "constrained + jump-forward"];

fn bench_e2e(args: &[&str]) -> Output {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/maskbench");
    Command::new(env!("CARGO_BIN_EXE_tokensieve"))
        .args(["bench", "e2e"])
        .args(args)
        .arg(fixtures)
        .output()
        .expect("running tokensieve")
}

#[test]
fn bench_e2e_refuses_a_plot_path_it_cannot_write_before_loading_the_model() {
    let o = bench_e2e(&["--plot", "/nonexistent/dir/e2e.svg"]);
    assert!(one_error_line(&o).contains("--plot /nonexistent/dir/e2e.svg"));
}

#[test]
fn bench_e2e_reports_peak_memory_per_mode_and_draws_every_mode() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("e2e.svg");
    // One schema, a few tokens: three prefills and 24 steps of model time.
    let o = bench_e2e(&[
        "--model",
        model.to_str().unwrap(),
        "--limit",
        "1",
        "--max-tokens",
        "8",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert_eq!(code(&o), 0, "{e}");

    let table = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows[0].last(), Some(&"peak memory MiB"), "{table}");
    let modes: Vec<&str> = rows[2..].iter().map(|r| r[0]).collect();
    assert_eq!(modes, E2E_MODES, "{table}");
    for row in &rows[2..] {
        assert_eq!(row.len(), rows[0].len(), "{table}");
        // A figure where the kernel's peak could be reset, else "n/a".
        let peak = row.last().unwrap();
        assert!(
            *peak == "n/a" || peak.parse::<f64>().is_ok_and(|mib| mib > 0.0),
            "{table}"
        );
    }

    let chart = std::fs::read_to_string(&svg).expect("the chart is written");
    assert!(
        chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"),
        "not an SVG: {}",
        &chart[..chart.len().min(200)]
    );
    // The legend names each mode; the panels are there.
    for name in E2E_MODES
        .iter()
        .chain(&["time per output token", "output tokens/s"])
    {
        assert!(
            chart.lines().any(|l| l.trim() == *name),
            "{name:?} not drawn in {}",
            svg.display()
        );
    }
    assert!(e.contains("plot -> "), "{e}");
}
