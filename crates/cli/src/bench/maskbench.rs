//! `tokensieve bench maskbench`: direct mode of the MaskBench contract. Reads
//! MaskBench files, tokenizes every instance, compiles each schema under a
//! time limit, walks every test and writes one record per file (flushed),
//! whatever happens inside the backend.

use super::inputs::collect_json_files;
use super::progress::Progress;
use super::record::{status_of, test_json};
use crate::common::{self, BadInput};
use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokensieve::GrammarBackend;
use tokensieve::bench_protocol::{CompileOutcome, CompileWorker, WalkOptions, catch_panic, walk};
use tokensieve::maskbench::MaskBenchFile;
use tokensieve::{Constraint, ConstraintSpec};

#[derive(Args)]
pub struct MaskbenchArgs {
    /// Backend name (see `tokensieve backends`).
    #[arg(long)]
    pub backend: String,
    /// A Hugging Face tokenizer.json or a GGUF model file (MaskBench used Llama 3.1's tokenizer).
    #[arg(long)]
    pub tokenizer: String,
    /// Output JSONL file: one record per MaskBench file.
    #[arg(long)]
    pub out: String,
    /// A compilation still running after this many milliseconds is cancelled
    /// and recorded as `"timeout": "compile"` (regex-fsm stops at its next
    /// trie walk; a backend that does not poll keeps a CPU busy until done).
    #[arg(long, default_value_t = 30_000)]
    pub compile_timeout_ms: u64,
    /// A backend knob, KEY=VALUE (repeatable), e.g. `walk_cache_bytes=0`
    /// for regex-fsm (the knobs are listed in its `RegexFsmConfig`).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Walk the valid instances under this GBNF grammar instead of each
    /// file's schema (invalid instances are left out: they may well be
    /// valid JSON). Measures a grammar engine on real JSON text.
    #[arg(long, conflicts_with = "json")]
    pub grammar: Option<String>,
    /// Root rule of --grammar.
    #[arg(long, default_value = "root", requires = "grammar")]
    pub root: String,
    /// Walk the valid instances under the builtin JSON grammar
    /// (`json_object`) instead of each file's schema.
    #[arg(long)]
    pub json: bool,
    /// MaskBench files, or directories of them (their `*.json`, not recursive).
    #[arg(required = true)]
    pub inputs: Vec<String>,
}

impl MaskbenchArgs {
    /// The constraint that replaces every file's schema, if any.
    fn replacement(&self) -> Result<Option<Constraint>, BadInput> {
        if self.json {
            return Ok(Some(Constraint::new(ConstraintSpec::JsonObject)));
        }
        Ok(match &self.grammar {
            Some(path) => Some(Constraint::ebnf(
                common::read_file("grammar", path)?,
                self.root.clone(),
            )),
            None => None,
        })
    }
}

pub fn run(args: &MaskbenchArgs) -> anyhow::Result<u8> {
    let files = collect_json_files(&args.inputs)?;
    let tok = common::load_tokenizer(&args.tokenizer)?;
    let backend =
        common::make_bench_backend(&args.backend, &common::backend_config(&args.options)?, &tok)?;
    // Every file is parsed before the first compile, so a malformed file
    // stops the run before hours are spent.
    let loaded = files
        .iter()
        .map(|f| {
            MaskBenchFile::load(f).map_err(|e| BadInput(format!("malformed MaskBench file {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let out_file = std::fs::File::create(&args.out)
        .map_err(|e| BadInput(format!("cannot create {}: {e}", args.out)))?;
    let mut out = std::io::BufWriter::new(out_file);

    let replacement = args.replacement()?;
    if let Some(c) = &replacement {
        common::check_kind(backend.as_ref(), c)?;
    }
    let timeout = Duration::from_millis(args.compile_timeout_ms);
    let mut progress = Progress::new(loaded.len());
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut row = vec![0u32; backend.vocabulary().mask_words()];
    // One compile thread for the run (a new one after a time-out).
    let mut worker = CompileWorker::new();
    for file in &loaded {
        let encode = |text: &str| tok.encode(text).map_err(|e| e.to_string());
        let record = run_file(
            file,
            replacement.as_ref(),
            &encode,
            &backend,
            &mut worker,
            timeout,
            &mut row,
        );
        serde_json::to_writer(&mut out, &record)?;
        writeln!(out)?;
        out.flush()
            .with_context(|| format!("writing {}", args.out))?;
        let status = status_of(&record);
        *counts.entry(status).or_default() += 1;
        let ttfm = record["compile_us"].as_u64().map_or_else(
            || "-".to_string(),
            |us| format!("{:.1}ms", us as f64 / 1000.0),
        );
        progress.item_done(&file.id, &format!("{status} ttfm={ttfm}"));
    }
    eprintln!("{} records -> {}; {counts:?}", loaded.len(), args.out);
    Ok(0)
}

/// The record of one MaskBench file: its schema, or `replacement` over its
/// valid instances only (invalid ones may well be valid JSON).
fn run_file(
    file: &MaskBenchFile,
    replacement: Option<&Constraint>,
    encode: &dyn Fn(&str) -> Result<Vec<u32>, String>,
    backend: &Arc<dyn GrammarBackend>,
    worker: &mut CompileWorker,
    timeout: Duration,
    row: &mut Vec<u32>,
) -> Value {
    let tests: Vec<(bool, String)> = file
        .tests
        .iter()
        .filter(|t| replacement.is_none() || t.valid)
        .map(|t| (t.valid, t.text()))
        .collect();
    let constraint = match replacement {
        Some(c) => c.clone(),
        None => Constraint::json_schema(file.schema.to_string()),
    };
    run_record(
        (&file.id, &file.split()),
        &tests,
        constraint,
        encode,
        backend,
        worker,
        timeout,
        row,
    )
}

/// The record (contract section 3) of one constraint, compiled by `worker`
/// within `timeout`, and its tests, `(valid, text)`, walked: a MaskBench
/// file's, or a grammar's texts (`bench grammars`). `name` is the record's
/// id and split. Never fails: what goes wrong is recorded in it.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_record(
    (id, split): (&str, &str),
    tests: &[(bool, String)],
    constraint: Constraint,
    encode: &dyn Fn(&str) -> Result<Vec<u32>, String>,
    backend: &Arc<dyn GrammarBackend>,
    worker: &mut CompileWorker,
    timeout: Duration,
    row: &mut Vec<u32>,
) -> Value {
    let mut record = json!({
        "id": id,
        "split": split,
        "engine": backend.name(),
        "version": env!("CARGO_PKG_VERSION"),
        "compile_us": null,
        "compile_error": null,
        "tests": [],
        "timeout": null,
        "timeout_s": null,
        "crash": null,
        "oom": false,
    });
    // Tokenizing is not part of anything timed.
    let mut tokenized = Vec::with_capacity(tests.len());
    for (k, (valid, text)) in tests.iter().enumerate() {
        match encode(text) {
            Ok(ids) => tokenized.push((*valid, ids)),
            Err(e) => {
                record["crash"] = json!(format!("tokenizer failed on test {k}: {e}"));
                return record;
            }
        }
    }
    let grammar = match worker.compile(backend.clone(), constraint, Some(timeout)) {
        CompileOutcome::Ready { grammar, elapsed } => {
            record["compile_us"] = json!(elapsed.as_micros() as u64);
            grammar
        }
        CompileOutcome::Failed { error, elapsed } => {
            record["compile_us"] = json!(elapsed.as_micros() as u64);
            record["compile_error"] = json!(error.to_string());
            return record;
        }
        CompileOutcome::Panicked { message } => {
            record["crash"] = json!(format!("panic while compiling: {message}"));
            return record;
        }
        CompileOutcome::TimedOut => {
            record["timeout"] = json!("compile");
            record["timeout_s"] = json!(timeout.as_secs_f64());
            return record;
        }
    };
    // The tests are walked on the thread that compiled (contract §3: one
    // thread), which also drops the grammar.
    let vocab = backend.vocabulary().clone();
    let mut owned_row = std::mem::take(row);
    let walked = worker.run(move || {
        let mut tests = Vec::with_capacity(tokenized.len());
        let mut crash = None;
        for (k, (valid, ids)) in tokenized.iter().enumerate() {
            match catch_panic(|| {
                walk(
                    grammar.as_ref(),
                    &vocab,
                    ids,
                    &mut owned_row,
                    WalkOptions::default(),
                )
            }) {
                Ok(w) => tests.push(test_json(*valid, &w)),
                Err(message) => {
                    // The tests finished before the panic are real
                    // measurements and stay in the record; the file counts
                    // as a crash.
                    crash = Some(format!("panic while matching test {k}: {message}"));
                    break;
                }
            }
        }
        (tests, crash, owned_row)
    });
    let tests = match walked {
        Ok((tests, crash, owned_row)) => {
            *row = owned_row;
            if let Some(message) = crash {
                record["crash"] = json!(message);
            }
            tests
        }
        Err(message) => {
            *row = vec![0u32; backend.vocabulary().mask_words()];
            record["crash"] = json!(format!("the walk's thread failed: {message}"));
            Vec::new()
        }
    };
    record["tests"] = Value::Array(tests);
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokensieve::{CompiledGrammar, Constraint, GrammarError, SpecKind, Vocabulary};

    /// Delegates to `none`, but panics where told to: in `compile` on a
    /// schema containing "panic-compile", and in `fill_bitmask` on one
    /// containing "panic-mask".
    struct Faulty(Arc<dyn GrammarBackend>);
    struct FaultyGrammar(Arc<dyn CompiledGrammar>, bool);

    impl GrammarBackend for Faulty {
        fn name(&self) -> &str {
            "faulty"
        }
        fn supported_kinds(&self) -> &[SpecKind] {
            self.0.supported_kinds()
        }
        fn vocabulary(&self) -> &Arc<Vocabulary> {
            self.0.vocabulary()
        }
        fn compile(&self, c: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
            let tokensieve::ConstraintSpec::JsonSchema(text) = &c.spec else {
                unreachable!("only schemas here")
            };
            if text.contains("panic-compile") {
                panic!("compile exploded");
            }
            if text.contains("unsupported") {
                return Err(GrammarError::unsupported_at("/x", "`unsupported`"));
            }
            if text.contains("slow") {
                std::thread::sleep(Duration::from_millis(300));
            }
            Ok(Arc::new(FaultyGrammar(
                self.0.compile(c)?,
                text.contains("panic-mask"),
            )))
        }
    }

    impl CompiledGrammar for FaultyGrammar {
        fn matcher(&self) -> Box<dyn tokensieve::GrammarObject> {
            let inner = self.0.matcher();
            if self.1 {
                Box::new(PanicOnMask(inner))
            } else {
                inner
            }
        }
        fn compile_time(&self) -> Duration {
            Duration::ZERO
        }
    }

    struct PanicOnMask(Box<dyn tokensieve::GrammarObject>);
    impl tokensieve::GrammarObject for PanicOnMask {
        fn accept_token(&mut self, t: u32) -> Result<(), tokensieve::StepError> {
            self.0.accept_token(t)
        }
        fn accept_bytes(&mut self, b: &[u8]) -> Result<(), tokensieve::StepError> {
            self.0.accept_bytes(b)
        }
        fn fill_bitmask(&mut self, _row: &mut [u32]) {
            panic!("mask exploded");
        }
        fn rollback(&mut self, k: usize) -> Result<(), tokensieve::StepError> {
            self.0.rollback(k)
        }
        fn rollback_available(&self) -> usize {
            self.0.rollback_available()
        }
        fn is_accepting(&self) -> bool {
            self.0.is_accepting()
        }
        fn is_terminated(&self) -> bool {
            self.0.is_terminated()
        }
        fn jump_forward(&self) -> Vec<u8> {
            self.0.jump_forward()
        }
        fn reset(&mut self) {
            self.0.reset()
        }
        fn fork(&self) -> Box<dyn tokensieve::GrammarObject> {
            Box::new(PanicOnMask(self.0.fork()))
        }
        fn stats(&self) -> tokensieve::GrammarStats {
            self.0.stats()
        }
    }

    fn record_for(schema: serde_json::Value) -> Value {
        record_within(schema, Duration::from_secs(30))
    }

    fn record_within(schema: serde_json::Value, limit: Duration) -> Value {
        let vocab = Arc::new(tokensieve::vocab::fixtures::json_tiny());
        let none = tokensieve::create_backend("none", &Default::default(), vocab.clone()).unwrap();
        let backend: Arc<dyn GrammarBackend> = Arc::new(Faulty(none));
        let text = json!({"schema": schema, "tests": [{"valid": true, "data": {"a": 1}}, {"valid": false, "data": 2}]});
        let file = MaskBenchFile::parse("S_x---1.json", &text.to_string()).unwrap();
        let encode = |t: &str| {
            vocab
                .encode_greedy(t.as_bytes())
                .ok_or_else(|| "no token".to_string())
        };
        let mut row = vec![0u32; vocab.mask_words()];
        let worker = &mut CompileWorker::new();
        run_file(&file, None, &encode, &backend, worker, limit, &mut row)
    }

    #[test]
    fn a_normal_file_has_every_field() {
        let r = record_for(json!({"type": "object"}));
        assert_eq!(r["id"], "S_x---1.json");
        assert_eq!(r["split"], "S_x");
        assert_eq!(r["engine"], "faulty");
        assert_eq!(r["version"], env!("CARGO_PKG_VERSION"));
        assert!(r["compile_us"].is_u64());
        assert!(r["compile_error"].is_null() && r["timeout"].is_null() && r["crash"].is_null());
        assert_eq!(r["oom"], false);
        let tests = r["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 2);
        // `none` allows everything: both accepted, the invalid one too.
        assert_eq!(tests[1]["valid"], false);
        assert_eq!(tests[1]["accepted"], true);
        assert_eq!(
            tests[0]["tokens"],
            tests[0]["mask_ns"].as_array().unwrap().len()
        );
        assert_eq!(status_of(&r), "invalidation_error");
    }

    #[test]
    fn a_replacement_constraint_walks_only_the_valid_instances() {
        let vocab = Arc::new(tokensieve::vocab::fixtures::json_tiny());
        let backend =
            tokensieve::create_backend("earley", &Default::default(), vocab.clone()).unwrap();
        let text = json!({"schema": {"type": "string"}, "tests": [
            {"valid": true, "data": {"a": [1, true]}},
            {"valid": false, "data": {"a": 1}},
            {"valid": true, "data": [2]}]});
        let file = MaskBenchFile::parse("S_x---1.json", &text.to_string()).unwrap();
        let encode = |t: &str| {
            vocab
                .encode_greedy(t.as_bytes())
                .ok_or_else(|| "no token".to_string())
        };
        let mut row = vec![0u32; vocab.mask_words()];
        let json_object = Constraint::new(ConstraintSpec::JsonObject);
        let r = run_file(
            &file,
            Some(&json_object),
            &encode,
            &backend,
            &mut CompileWorker::new(),
            Duration::from_secs(30),
            &mut row,
        );
        let tests = r["tests"].as_array().unwrap();
        // The schema is ignored; the invalid instance is left out; an
        // array is not a JSON object.
        assert_eq!(tests.len(), 2);
        assert_eq!(tests[0]["accepted"], true);
        assert_eq!(tests[1]["accepted"], false);
    }

    #[test]
    fn compile_error_timeout_and_panics_are_recorded() {
        let r = record_for(json!({"unsupported": true}));
        assert!(
            r["compile_error"]
                .as_str()
                .unwrap()
                .contains("`unsupported` is not supported")
        );
        assert!(r["compile_us"].is_u64());
        assert_eq!(r["tests"], json!([]));

        let r = record_within(json!({"slow": true}), Duration::from_millis(100));
        assert_eq!(r["timeout"], "compile");
        assert_eq!(r["timeout_s"], 0.1);
        assert!(r["compile_us"].is_null());

        let r = record_for(json!({"panic-compile": true}));
        assert_eq!(r["crash"], "panic while compiling: compile exploded");

        let r = record_for(json!({"panic-mask": true}));
        assert_eq!(r["crash"], "panic while matching test 0: mask exploded");
        assert!(r["compile_us"].is_u64());
        assert_eq!(status_of(&r), "crash");
    }
}
