//! Generated instances through both backends, judged by the `jsonschema`
//! crate: valid and near-miss values built from each schema's own keywords
//! (`tokensieve::instances`, fixed seed), fed as text through a fresh
//! matcher of `earley` and of `regex-fsm`, and compared with the
//! validator's verdict (`tokensieve::instance_check`). The test **fails** on
//!
//! - any invalid instance accepted (the output may end after it),
//! - a valid instance refused by a (schema, backend) pair that
//!   `tests/fixtures/instances_known.txt` does not list with its reason,
//!   or a listed pair that no longer refuses one (the list is kept exact),
//! - a valid, accepted instance whose Llama 3 tokens do not walk through
//!   the masks (a token missing from its mask, a mask that disagrees with
//!   the matcher, an end the mask does not allow).
//!
//! Compile errors and time-outs are counted, not failures. Schemas: the
//! MaskBench fixtures in `tests/fixtures/maskbench/` always; with
//! `../shared/data`, 100 MaskBench dev files (a fixed hash of their names
//! picks them) and every schema of the JSON-Schema-Test-Suite's draft
//! 2020-12 files.

/// Straight to stderr: libtest captures the output of passing tests.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokensieve::bench_protocol::{CompileOutcome, CompileWorker, catch_panic};
use tokensieve::hf::HfTokenizer;
use tokensieve::instance_check::{Encoder, Outcome, Verdict, check_grammar};
use tokensieve::instances::{InstanceOptions, instances};
use tokensieve::{BackendConfig, Constraint, Vocabulary};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Debug builds compile slowly; a time-out is only counted.
const COMPILE_LIMIT: Duration = Duration::from_secs(20);
const BACKENDS: [&str; 2] = ["earley", "regex-fsm"];
/// How many MaskBench dev files the sample takes.
const SAMPLE: usize = 100;
/// Larger files are left to the release run (`tokensieve bench
/// instances`): a debug compile of one takes seconds.
const SAMPLE_MAX_BYTES: u64 = 24 << 10;
const OPTIONS: InstanceOptions = InstanceOptions {
    seed: 2026,
    valid: 3,
    near_misses: 10,
    max_ref_depth: 3,
};
/// Valid instances per schema walked token by token.
const TOKEN_WALKS: usize = 2;
/// How many of the sampled MaskBench schemas are compiled a second time
/// for the Llama 3 vocabulary and walked token by token (a debug regex-fsm
/// index over 128k tokens takes seconds per schema).
const WALKED_SCHEMAS: usize = 12;

/// FNV-1a of a file name: the sample's fixed hash.
fn fnv(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// (id, schema) of every schema the test runs.
fn schemas() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let read = |p: &Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let mut fixtures: Vec<PathBuf> =
        std::fs::read_dir(Path::new(ROOT).join("tests/fixtures/maskbench"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    fixtures.sort();
    for p in fixtures {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, read(&p)["schema"].clone()));
    }
    let data = Path::new(ROOT).join("../shared/data");
    let dev = data.join("maskbench-dev");
    if !dev.is_dir() {
        tokensieve::skip!(
            "{} not found: only the {} fixture schemas run",
            dev.display(),
            out.len()
        );
        return out;
    }
    let mut files: Vec<(u64, String, PathBuf)> = std::fs::read_dir(&dev)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() <= SAMPLE_MAX_BYTES))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (fnv(&name), name, p)
        })
        .collect();
    files.sort();
    for (_, name, p) in files.into_iter().take(SAMPLE) {
        out.push((name, read(&p)["schema"].clone()));
    }
    let suite = data.join("json-schema-test-suite/tests/draft2020-12");
    let mut suite_files: Vec<PathBuf> = std::fs::read_dir(&suite)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    suite_files.sort();
    for p in suite_files {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        for (g, group) in read(&p).as_array().unwrap().iter().enumerate() {
            out.push((format!("jsts/{name}#{g}"), group["schema"].clone()));
        }
    }
    out
}

/// One line of the committed list of known refusals:
/// `<schema id or *> <backend or *> [text the instance's label contains]  # why`.
struct Known {
    id: String,
    backend: String,
    how: String,
    why: String,
}

impl Known {
    fn matches(&self, id: &str, backend: &str, how: &str) -> bool {
        (self.id == "*" || self.id == id)
            && (self.backend == "*" || self.backend == backend)
            && how.contains(&self.how)
    }
}

fn known() -> Vec<Known> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("tests/fixtures/instances_known.txt"))
        .expect("tests/fixtures/instances_known.txt exists");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            // Ids hold `#` (`jsts/items.json#3`): the reason follows ` #`.
            let (entry, why) = l.split_once(" #").unwrap_or((l, ""));
            let entry = entry.trim();
            let (id, rest) = entry.split_once(' ').unwrap_or((entry, ""));
            let rest = rest.trim();
            let (backend, how) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(!backend.is_empty(), "no backend in {l}");
            assert!(!why.trim().is_empty(), "no reason given for {l}");
            Known {
                id: id.into(),
                backend: backend.into(),
                how: how.trim().into(),
                why: why.trim().into(),
            }
        })
        .collect()
}

/// The validator's verdicts: formats as annotations, and asserted.
fn judge(schema: &Value) -> Option<impl Fn(&Value) -> Verdict> {
    let plain = catch_panic(|| jsonschema::validator_for(schema))
        .ok()?
        .ok()?;
    let formats = catch_panic(|| {
        jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
    })
    .ok()?
    .ok()?;
    Some(move |v: &Value| {
        let valid = catch_panic(|| plain.is_valid(v)).unwrap_or(false);
        Verdict {
            valid,
            format_valid: valid && catch_panic(|| formats.is_valid(v)).unwrap_or(false),
        }
    })
}

#[test]
fn generated_instances_agree_with_the_validator_on_both_backends() {
    // Whether text is in a grammar's language does not depend on the
    // vocabulary: the byte checks use the fixture vocabulary (every byte a
    // token), whose compiles are fast; the token walks a real one.
    let tiny = Arc::new(tokensieve::vocab::fixtures::json_tiny());
    let tokenizer_path = Path::new(ROOT).join("../shared/data/tokenizers/llama3/tokenizer.json");
    let llama = if tokenizer_path.exists() {
        let t = HfTokenizer::from_file(&tokenizer_path).expect("the Llama 3 tokenizer loads");
        Some((Arc::new(t.vocabulary().clone()), t))
    } else {
        tokensieve::skip!("{} not found: no token walks", tokenizer_path.display());
        None
    };
    let encode = |text: &str| llama.as_ref().and_then(|(_, t)| t.encode(text).ok());
    let make =
        |vocab: &Arc<Vocabulary>| -> Vec<(&'static str, Arc<dyn tokensieve::GrammarBackend>)> {
            BACKENDS
                .iter()
                .map(|name| {
                    let b =
                        tokensieve::create_backend(name, &BackendConfig::default(), vocab.clone())
                            .unwrap_or_else(|e| panic!("{name}: {e}"));
                    (*name, b)
                })
                .collect()
        };
    let backends = make(&tiny);
    let llama_backends = llama.as_ref().map(|(v, _)| make(v));

    let known = known();
    let mut failures = Vec::new();
    let mut refusing: BTreeSet<(String, String)> = BTreeSet::new();
    let mut used = vec![false; known.len()];
    let mut totals: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    let mut compile_errors: BTreeMap<&str, usize> = BTreeMap::new();
    let mut walks = 0;
    let mut no_validator = 0;
    let schemas = schemas();
    let mut walked_schemas = 0;
    let mut worker = CompileWorker::new();
    let mut spent: BTreeMap<&str, Duration> = BTreeMap::new();
    for (id, schema) in &schemas {
        let Some(judge) = judge(schema) else {
            no_validator += 1;
            continue;
        };
        let judged: Vec<_> = instances(schema, &OPTIONS)
            .into_iter()
            .map(|i| {
                let v = judge(&i.value);
                (i, v)
            })
            .collect();
        // The first sampled MaskBench schemas (after the fixtures) are also
        // walked token by token.
        let walk_this =
            llama_backends.is_some() && !id.starts_with("jsts/") && walked_schemas < WALKED_SCHEMAS;
        walked_schemas += usize::from(walk_this);
        for (b, (name, backend)) in backends.iter().enumerate() {
            let constraint = Constraint::json_schema(schema.to_string());
            let start = std::time::Instant::now();
            let grammar = match worker.compile(backend.clone(), constraint, Some(COMPILE_LIMIT)) {
                CompileOutcome::Ready { grammar, .. } => grammar,
                CompileOutcome::Failed { .. } | CompileOutcome::TimedOut => {
                    *compile_errors.entry(name).or_default() += 1;
                    continue;
                }
                CompileOutcome::Panicked { message } => {
                    failures.push(format!("{name} {id}: panic while compiling: {message}"));
                    continue;
                }
            };
            let compiled_at = std::time::Instant::now();
            *spent.entry("compile").or_default() += compiled_at - start;
            let r = match catch_panic(|| check_grammar(grammar.as_ref(), &tiny, &judged, None, 0)) {
                Ok(r) => r,
                Err(message) => {
                    failures.push(format!("{name} {id}: panic while matching: {message}"));
                    continue;
                }
            };
            *spent.entry("check").or_default() += compiled_at.elapsed();
            if start.elapsed() > Duration::from_secs(2) {
                report!(
                    "slow: {name} {id}: {:?} compile, {:?} check",
                    compiled_at - start,
                    compiled_at.elapsed()
                );
            }
            let t = totals.entry(name).or_default();
            for (k, c) in r.counts.iter().enumerate() {
                t[k] += c;
            }
            for f in &r.findings {
                match f.outcome {
                    Outcome::InvalidAccepted => failures.push(format!(
                        "{name} {id}: INVALID ACCEPTED ({}, {}): {}",
                        f.how, f.form, f.text
                    )),
                    Outcome::ValidRefused => {
                        refusing.insert((id.clone(), name.to_string()));
                        match known.iter().position(|k| k.matches(id, name, &f.how)) {
                            Some(k) => used[k] = true,
                            None => failures.push(format!(
                                "{name} {id}: valid instance refused, not in the known list ({}, {}): {}",
                                f.how, f.form, f.text
                            )),
                        }
                    }
                    _ => {}
                }
            }
            if walk_this && let Some((vocab, _)) = &llama {
                let backend = llama_backends.as_ref().unwrap()[b].1.clone();
                let constraint = Constraint::json_schema(schema.to_string());
                let CompileOutcome::Ready { grammar, .. } =
                    worker.compile(backend, constraint, Some(COMPILE_LIMIT))
                else {
                    continue;
                };
                let encoder: Encoder<'_> = &encode;
                match catch_panic(|| {
                    check_grammar(grammar.as_ref(), vocab, &judged, Some(encoder), TOKEN_WALKS)
                }) {
                    Ok(r) => {
                        walks += r.token_walks;
                        for t in &r.token_failures {
                            failures.push(format!("{name} {id}: token walk: {t}"));
                        }
                    }
                    Err(message) => {
                        failures.push(format!("{name} {id}: panic in a token walk: {message}"))
                    }
                }
            }
        }
    }
    let ids: BTreeSet<&String> = schemas.iter().map(|(id, _)| id).collect();
    let full = Path::new(ROOT)
        .join("../shared/data/maskbench-dev")
        .is_dir();
    for (k, entry) in known.iter().enumerate() {
        // Entries for schemas outside this run (no ../shared/data) are left be.
        let in_run = if entry.id == "*" {
            full
        } else {
            ids.contains(&entry.id)
        };
        if in_run && !used[k] {
            failures.push(format!(
                "{} {} {}: listed as refusing a valid instance ({}), but refuses none: remove the line",
                entry.id, entry.backend, entry.how, entry.why
            ));
        }
    }
    for (name, t) in &totals {
        let counts: Vec<String> = Outcome::ALL
            .iter()
            .zip(t)
            .map(|(o, c)| format!("{} {c}", o.name()))
            .collect();
        report!(
            "{name}: {} schemas, {} compile errors or time-outs; texts: {}",
            schemas.len(),
            compile_errors.get(name).unwrap_or(&0),
            counts.join(", ")
        );
    }
    report!("time spent: {spent:?}");
    report!(
        "{walks} token walks; {no_validator} schemas the validator cannot build; {} (schema, backend) pairs refuse a valid instance",
        refusing.len()
    );
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
