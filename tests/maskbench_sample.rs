//! Sampled MaskBench conformance: every registered backend (but `none`,
//! which allows everything by design) walks real MaskBench instances with
//! the benchmark's own protocol (`tokensieve::bench_protocol::walk`, with the
//! consistency checks on), and the test **fails** on
//!
//! - an invalidation error: an invalid instance accepted where the output may
//!   end (output the schema forbids got through),
//! - a panic inside the backend (compile or matching),
//! - a mask/matcher disagreement: a token in the mask that `accept_token`
//!   refuses, a token outside the mask that `accept_token` takes (tried on a
//!   fork), or an end check (stop token in the mask) that disagrees with
//!   `is_accepting`.
//!
//! Validation errors (valid instances rejected), compile errors and compile
//! timeouts are measurements, printed as counts.
//!
//! Inputs: the small MaskBench files in `tests/fixtures/maskbench/` always;
//! the 40 files named in `tests/fixtures/maskbench_sample.txt` from
//! `../shared/data/maskbench-dev` when it exists (else "skipped: ..."). With
//! `../shared/data/tokenizers/llama3/tokenizer.json` instances are tokenized
//! as MaskBench does; without it, the fixture vocabulary with greedy
//! tokenization.

/// Writes straight to the process's stderr: libtest captures `println!` of
/// passing tests, and the CI log must show what ran and what was skipped.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokensieve::bench_protocol::{
    CompileOutcome, WalkOptions, catch_panic, compile_with_timeout, walk,
};
use tokensieve::hf::HfTokenizer;
use tokensieve::maskbench::MaskBenchFile;
use tokensieve::{BackendConfig, Vocabulary};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Generous: debug builds compile slowly, and a time-out is only counted.
const COMPILE_LIMIT: Duration = Duration::from_secs(120);

enum Tokenizer {
    Hf(Box<HfTokenizer>),
    Greedy,
}

struct Setup {
    vocab: Arc<Vocabulary>,
    tokenizer: Tokenizer,
    label: &'static str,
}

impl Setup {
    fn load() -> Setup {
        let path = Path::new(ROOT).join("../shared/data/tokenizers/llama3/tokenizer.json");
        if path.exists() {
            let tok = HfTokenizer::from_file(&path).expect("the Llama 3 tokenizer loads");
            Setup {
                vocab: Arc::new(tok.vocabulary().clone()),
                tokenizer: Tokenizer::Hf(Box::new(tok)),
                label: "llama3",
            }
        } else {
            report!(
                "note: {} not found; using the fixture vocabulary",
                path.display()
            );
            Setup {
                vocab: Arc::new(tokensieve::vocab::fixtures::json_tiny()),
                tokenizer: Tokenizer::Greedy,
                label: "json_tiny",
            }
        }
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        match &self.tokenizer {
            Tokenizer::Hf(t) => t.encode(text).expect("instance text tokenizes"),
            Tokenizer::Greedy => self
                .vocab
                .encode_greedy(text.as_bytes())
                .expect("the fixture vocabulary has every byte"),
        }
    }
}

fn sample_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(Path::new(ROOT).join("tests/fixtures/maskbench"))
            .expect("tests/fixtures/maskbench exists")
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
    files.sort();
    let dev = Path::new(ROOT).join("../shared/data/maskbench-dev");
    if dev.is_dir() {
        let list =
            std::fs::read_to_string(Path::new(ROOT).join("tests/fixtures/maskbench_sample.txt"))
                .expect("tests/fixtures/maskbench_sample.txt exists");
        let names: Vec<&str> = list
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        assert!(
            names.len() >= 30,
            "the sample list names {} files",
            names.len()
        );
        files.extend(names.iter().map(|n| dev.join(n)));
    } else {
        tokensieve::skip!(
            "{} not found, only the {} fixture files run",
            dev.display(),
            files.len()
        );
    }
    files
}

#[derive(Default, Debug)]
struct Counts {
    files: usize,
    compiled: usize,
    compile_errors: usize,
    timeouts: usize,
    tests: usize,
    passed: usize,
    validation_errors: usize,
    /// Invalid instances accepted only as a prefix (the output may not end).
    invalid_prefixes: usize,
}

#[test]
fn maskbench_sample_has_no_invalidation_crash_or_mask_mismatch() {
    let setup = Setup::load();
    let files: Vec<MaskBenchFile> = sample_files()
        .iter()
        .map(|f| MaskBenchFile::load(f).unwrap_or_else(|e| panic!("sample file: {e}")))
        .collect();
    let backends: Vec<String> = tokensieve::available_backends()
        .into_iter()
        .map(|b| b.name)
        .filter(|n| n != "none")
        .collect();
    if backends.is_empty() {
        tokensieve::skip!("no backend other than `none` is registered");
        return;
    }

    let mut failures: Vec<String> = Vec::new();
    let mut row = vec![0u32; setup.vocab.mask_words()];
    // Tokenize once; every backend sees the same tokens.
    let tokenized: Vec<Vec<(bool, Vec<u32>)>> = files
        .iter()
        .map(|f| {
            f.tests
                .iter()
                .map(|t| (t.valid, setup.encode(&t.text())))
                .collect()
        })
        .collect();
    for name in &backends {
        let backend = match tokensieve::create_backend(
            name,
            &BackendConfig::default(),
            setup.vocab.clone(),
        ) {
            Ok(b) => b,
            Err(e) => {
                report!(
                    "{name}: cannot be created for {} ({e}); skipped",
                    setup.label
                );
                continue;
            }
        };
        let mut c = Counts::default();
        for (file, tests) in files.iter().zip(&tokenized) {
            c.files += 1;
            let grammar = match compile_with_timeout(
                backend.clone(),
                file.schema.to_string(),
                Some(COMPILE_LIMIT),
            ) {
                CompileOutcome::Ready { grammar, .. } => grammar,
                CompileOutcome::Failed { .. } => {
                    c.compile_errors += 1;
                    continue;
                }
                CompileOutcome::TimedOut => {
                    c.timeouts += 1;
                    continue;
                }
                CompileOutcome::Panicked { message } => {
                    failures.push(format!(
                        "{name} {}: panic while compiling: {message}",
                        file.id
                    ));
                    continue;
                }
            };
            c.compiled += 1;
            for (k, (valid, tokens)) in tests.iter().enumerate() {
                c.tests += 1;
                let options = WalkOptions {
                    check_consistency: true,
                };
                let w = match catch_panic(|| {
                    walk(grammar.as_ref(), &setup.vocab, tokens, &mut row, options)
                }) {
                    Ok(w) => w,
                    Err(message) => {
                        failures.push(format!(
                            "{name} {} test {k}: panic while matching: {message}",
                            file.id
                        ));
                        continue;
                    }
                };
                let what = format!("{name} {} test {k} (valid={valid})", file.id);
                if let Some(m) = &w.mismatch {
                    failures.push(format!("{what}: mask/matcher mismatch: {m}"));
                }
                if w.is_engine_error() {
                    failures.push(format!(
                        "{what}: {}",
                        w.reason.as_deref().unwrap_or_default()
                    ));
                }
                match (*valid, w.matches()) {
                    (false, true) => failures.push(format!(
                        "{what}: invalidation error: invalid instance accepted ({} tokens)",
                        tokens.len()
                    )),
                    (true, false) => c.validation_errors += 1,
                    _ => c.passed += 1,
                }
                if !valid && w.accepted && !w.matches() {
                    c.invalid_prefixes += 1;
                }
            }
        }
        report!("{name} ({}): {c:?}", setup.label);
    }
    assert!(
        failures.is_empty(),
        "{} conformance failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
