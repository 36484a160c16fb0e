//! `tokensieve bench jsts`: the JSON-Schema-Test-Suite as mask walks. Each
//! group's schema is compiled once; each test's instance is serialized as
//! MaskBench does (Python's `json.dumps`), tokenized and walked; the walk
//! passes when `accepted && end_ok` equals the test's `valid`. A measurement:
//! it exits 0 whatever the pass rate (2 for bad input).

use super::inputs::json_files_in;
use crate::common::{self, BadInput};
use clap::Args;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokensieve::bench_protocol::{
    CompileOutcome, WalkOptions, catch_panic, compile_with_timeout, walk,
};
use tokensieve::maskbench::dumps_python;

#[derive(Args)]
pub struct JstsArgs {
    /// Backend name (see `tokensieve backends`).
    #[arg(long)]
    pub backend: String,
    /// A Hugging Face tokenizer.json, or a GGUF model file (its tokenizer).
    #[arg(long)]
    pub tokenizer: String,
    /// Also run the `optional/` subdirectories (formats, bignum, …).
    #[arg(long)]
    pub optional: bool,
    /// A compilation still running after this many milliseconds is abandoned
    /// (its group's tests count as unsupported).
    #[arg(long, default_value_t = 30_000)]
    pub compile_timeout_ms: u64,
    /// Print every failed test (file, group, test, why), and every group
    /// whose schema did not compile (file, group, the error).
    #[arg(long)]
    pub show_failures: bool,
    /// A backend knob, KEY=VALUE (repeatable), e.g. `walk_cache_bytes=0`
    /// for regex-fsm (the knobs are listed in its `RegexFsmConfig`).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// A draft directory of the suite (e.g. `tests/draft2020-12`) or one file.
    pub dir: String,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    groups: usize,
    tests: usize,
    passed: usize,
    failed: usize,
    /// Failed tests whose instance is invalid but was accepted (may end).
    invalidations: usize,
    /// Tests of groups whose schema did not compile (error or time limit).
    unsupported: usize,
    /// Of `unsupported`: groups that hit the compile time limit.
    timeouts: usize,
    /// Tests of groups where the backend panicked (compile or walk).
    crashed: usize,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.groups += o.groups;
        self.tests += o.tests;
        self.passed += o.passed;
        self.failed += o.failed;
        self.invalidations += o.invalidations;
        self.unsupported += o.unsupported;
        self.timeouts += o.timeouts;
        self.crashed += o.crashed;
    }

    fn row(&self, name: &str) -> String {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "-".to_string()
            } else {
                format!("{:.1}%", 100.0 * a as f64 / b as f64)
            }
        };
        format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.groups,
            self.tests,
            self.passed,
            self.failed,
            self.invalidations,
            self.unsupported,
            self.crashed,
            pct(self.passed, self.tests),
            pct(self.passed, self.passed + self.failed),
        )
    }
}

fn suite_files(dir: &Path, optional: bool) -> Result<Vec<PathBuf>, BadInput> {
    if dir.is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    if !dir.is_dir() {
        return Err(BadInput(format!("no such directory: {}", dir.display())));
    }
    let mut files = json_files_in(dir)?;
    let opt = dir.join("optional");
    if optional && opt.is_dir() {
        let mut stack = vec![opt];
        while let Some(d) = stack.pop() {
            files.extend(json_files_in(&d)?);
            let subdirs = std::fs::read_dir(&d)
                .map_err(|e| BadInput(format!("cannot read {}: {e}", d.display())))?;
            stack.extend(
                subdirs
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir()),
            );
        }
    }
    Ok(files)
}

/// One suite file: `[{description, schema, tests: [{description, data, valid}]}]`.
struct Group {
    description: String,
    schema: Value,
    tests: Vec<(String, Value, bool)>,
}

fn parse_suite_file(path: &Path) -> Result<Vec<Group>, BadInput> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| BadInput(format!("cannot read {shown}: {e}")))?;
    let bad = |what: String| BadInput(format!("malformed test-suite file {shown}: {what}"));
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let groups = v
        .as_array()
        .ok_or_else(|| bad("not a list of groups".into()))?;
    groups
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let schema = group
                .get("schema")
                .cloned()
                .ok_or_else(|| bad(format!("group {g} has no schema")))?;
            let tests = group["tests"]
                .as_array()
                .ok_or_else(|| bad(format!("group {g} has no tests")))?
                .iter()
                .enumerate()
                .map(|(t, test)| {
                    let data = test
                        .get("data")
                        .cloned()
                        .ok_or_else(|| bad(format!("group {g} test {t} has no data")))?;
                    let valid = test["valid"]
                        .as_bool()
                        .ok_or_else(|| bad(format!("group {g} test {t} has no valid")))?;
                    Ok((
                        test["description"].as_str().unwrap_or("").to_string(),
                        data,
                        valid,
                    ))
                })
                .collect::<Result<Vec<_>, BadInput>>()?;
            Ok(Group {
                description: group["description"].as_str().unwrap_or("").to_string(),
                schema,
                tests,
            })
        })
        .collect()
}

pub fn run(args: &JstsArgs) -> anyhow::Result<u8> {
    let dir = Path::new(&args.dir);
    let files = suite_files(dir, args.optional)?;
    if files.is_empty() {
        return Err(BadInput(format!("no .json files in {}", dir.display())).into());
    }
    let suites = files
        .iter()
        .map(|f| parse_suite_file(f).map(|g| (f, g)))
        .collect::<Result<Vec<_>, _>>()?;
    let tok = common::load_tokenizer(&args.tokenizer)?;
    let backend =
        common::make_bench_backend(&args.backend, &common::backend_config(&args.options)?, &tok)?;
    let vocab = backend.vocabulary().clone();
    let mut row = vec![0u32; vocab.mask_words()];
    let timeout = Duration::from_millis(args.compile_timeout_ms);

    println!(
        "## JSON-Schema-Test-Suite as mask walks: backend `{}`\n",
        backend.name()
    );
    println!(
        "| file | groups | tests | passed | failed | invalidations | unsupported | crashed | pass rate | pass rate (compiled) |"
    );
    println!("|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut total = Tally::default();
    for (path, groups) in &suites {
        let name = path.strip_prefix(dir).unwrap_or(path).display().to_string();
        let name = if name.is_empty() {
            path.display().to_string()
        } else {
            name
        };
        let mut tally = Tally::default();
        for group in groups {
            tally.groups += 1;
            tally.tests += group.tests.len();
            let fail = |test: &str, why: &str| {
                if args.show_failures {
                    eprintln!("FAIL {name} / {} / {test}: {why}", group.description);
                }
            };
            let grammar = match compile_with_timeout(
                backend.clone(),
                group.schema.to_string(),
                Some(timeout),
            ) {
                CompileOutcome::Ready { grammar, .. } => grammar,
                CompileOutcome::Failed { error, .. } => {
                    tally.unsupported += group.tests.len();
                    if args.show_failures {
                        eprintln!("UNSUPPORTED {name} / {}: {error}", group.description);
                    }
                    continue;
                }
                CompileOutcome::TimedOut => {
                    tally.unsupported += group.tests.len();
                    tally.timeouts += 1;
                    if args.show_failures {
                        eprintln!(
                            "UNSUPPORTED {name} / {}: compile timed out",
                            group.description
                        );
                    }
                    continue;
                }
                CompileOutcome::Panicked { message } => {
                    tally.crashed += group.tests.len();
                    fail("(compile)", &format!("panic: {message}"));
                    continue;
                }
            };
            for (k, (description, data, valid)) in group.tests.iter().enumerate() {
                let tokens = match tok.encode(&dumps_python(data)) {
                    Ok(t) => t,
                    Err(e) => {
                        tally.failed += 1;
                        fail(description, &format!("tokenizer: {e}"));
                        continue;
                    }
                };
                match catch_panic(|| {
                    walk(
                        grammar.as_ref(),
                        &vocab,
                        &tokens,
                        &mut row,
                        WalkOptions::default(),
                    )
                }) {
                    Err(message) => {
                        // The rest of the group is not trusted after a panic.
                        tally.crashed += group.tests.len() - k;
                        fail(description, &format!("panic: {message}"));
                        break;
                    }
                    Ok(w) if w.matches() == *valid => tally.passed += 1,
                    Ok(w) => {
                        tally.failed += 1;
                        if !valid {
                            tally.invalidations += 1;
                        }
                        let why = if *valid {
                            format!(
                                "valid instance rejected: {}",
                                w.reason.as_deref().unwrap_or("may not end there")
                            )
                        } else {
                            "invalid instance accepted".to_string()
                        };
                        fail(
                            description,
                            &format!("{why}; instance {}", dumps_python(data)),
                        );
                    }
                }
            }
        }
        println!("{}", tally.row(&name));
        total.add(&tally);
    }
    println!("{}", total.row("**TOTAL**"));
    println!(
        "\npass rate = passed / tests; pass rate (compiled) = passed / (passed + failed). \
         A test passes when `accepted && end_ok` equals its `valid`. Unsupported = tests of groups whose \
         schema did not compile ({} of them hit the {} ms compile limit); invalidations = invalid \
         instances accepted (also counted in failed).",
        total.timeouts, args.compile_timeout_ms
    );
    Ok(0)
}
