//! `tokensieve bench instances`: generated valid and near-miss instances of
//! every schema (`tokensieve::instances`, built from the schema's own
//! keywords) through each backend, each text's verdict compared with the
//! `jsonschema` crate's (`tokensieve::instance_check`), counted per class
//! and backend. Inputs: MaskBench files (`{"schema", ...}`) and
//! JSON-Schema-Test-Suite files (a list of groups, each with a `schema`),
//! or directories of them.
//!
//! Exit code 1 when any backend accepted an invalid instance or a valid
//! accepted instance's tokens did not walk through the masks; 0 otherwise
//! (a valid instance refused is a measurement); 2 for bad input.

use super::inputs::json_files_in;
use super::progress::Progress;
use crate::common::{self, BadInput};
use clap::Args;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokensieve::Constraint;
use tokensieve::bench_protocol::{CompileOutcome, CompileWorker, catch_panic};
use tokensieve::instance_check::{Encoder, Outcome, Verdict, check_grammar};
use tokensieve::instances::{InstanceOptions, instances};

#[derive(Args)]
pub struct InstancesArgs {
    /// Backend names (repeatable; default: earley and regex-fsm).
    #[arg(long = "backend")]
    pub backends: Vec<String>,
    /// A Hugging Face tokenizer.json, or a GGUF model file (its tokenizer).
    #[arg(long)]
    pub tokenizer: String,
    /// The generator's seed.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Values meant to be valid per schema.
    #[arg(long, default_value_t = 4)]
    pub valid: usize,
    /// Near misses of each valid value at most.
    #[arg(long, default_value_t = 12)]
    pub near_misses: usize,
    /// Valid, accepted instances per schema walked token by token.
    #[arg(long, default_value_t = 2)]
    pub token_walks: usize,
    /// A compilation still running after this many milliseconds is
    /// abandoned (counted with the compile errors).
    #[arg(long, default_value_t = 30_000)]
    pub compile_timeout_ms: u64,
    /// Print every instance text that does not agree (and every token walk
    /// that failed) on stderr: backend, schema, class, how it was made.
    #[arg(long)]
    pub show_findings: bool,
    /// MaskBench files, JSON-Schema-Test-Suite files, or directories of
    /// either (not recursive).
    #[arg(required = true)]
    pub inputs: Vec<String>,
}

/// Counts of one backend over one source.
#[derive(Default, Clone, Copy)]
struct Tally {
    schemas: usize,
    compiled: usize,
    compile_errors: usize,
    timeouts: usize,
    crashed: usize,
    texts: [usize; 4],
    /// Schemas with at least one text of each class.
    schemas_with: [usize; 4],
    token_walks: usize,
    token_failures: usize,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.schemas += o.schemas;
        self.compiled += o.compiled;
        self.compile_errors += o.compile_errors;
        self.timeouts += o.timeouts;
        self.crashed += o.crashed;
        for k in 0..4 {
            self.texts[k] += o.texts[k];
            self.schemas_with[k] += o.schemas_with[k];
        }
        self.token_walks += o.token_walks;
        self.token_failures += o.token_failures;
    }

    fn row(&self, backend: &str, source: &str) -> String {
        let t = |o: Outcome| {
            let k = Outcome::ALL.iter().position(|x| *x == o).unwrap();
            format!("{} ({})", self.texts[k], self.schemas_with[k])
        };
        format!(
            "| {backend} | {source} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.schemas,
            self.compiled,
            self.compile_errors,
            self.crashed,
            t(Outcome::InvalidAccepted),
            t(Outcome::ValidRefused),
            t(Outcome::FormatOnly),
            t(Outcome::Agree),
            self.token_walks,
            self.token_failures,
        )
    }
}

/// (source, id, schema) of every input: `maskbench` files by name,
/// `jsts` groups as `file#group`.
fn load_schemas(inputs: &[String]) -> Result<Vec<(&'static str, String, Value)>, BadInput> {
    let mut out = Vec::new();
    // Not de-duplicated by file name: the suite's drafts share their names.
    let mut files = Vec::new();
    for input in inputs {
        let path = Path::new(input);
        if path.is_dir() {
            files.extend(json_files_in(path)?);
        } else if path.is_file() {
            files.push(path.to_path_buf());
        } else {
            return Err(BadInput(format!("no such file or directory: {input}")));
        }
    }
    for path in files {
        let shown = path.display().to_string();
        let text = common::read_file("input", &shown)?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| BadInput(format!("{shown}: not JSON: {e}")))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(shown.clone());
        match &v {
            Value::Array(groups) => {
                let draft = suite_draft(&path);
                for (g, group) in groups.iter().enumerate() {
                    let mut schema = group.get("schema").cloned().ok_or_else(|| {
                        BadInput(format!("{shown}: test-suite group {g} has no schema"))
                    })?;
                    // The suite's older drafts do not name themselves; the
                    // validator would read them as 2020-12.
                    if let (Some(draft), Value::Object(m)) = (draft, &mut schema)
                        && !m.contains_key("$schema")
                    {
                        m.insert("$schema".into(), draft.into());
                    }
                    let dir = path
                        .parent()
                        .and_then(Path::file_name)
                        .map(|d| d.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    out.push(("jsts", format!("{dir}/{name}#{g}"), schema));
                }
            }
            Value::Object(m) if m.contains_key("schema") => {
                out.push(("maskbench", name, m["schema"].clone()));
            }
            _ => {
                return Err(BadInput(format!(
                    "{shown}: neither a MaskBench file nor a test-suite file"
                )));
            }
        }
    }
    if out.is_empty() {
        return Err(BadInput("no schemas in the inputs".into()));
    }
    Ok(out)
}

/// The meta-schema URI of a test-suite file's draft, from its directory's
/// name (`tests/draft7/items.json`).
fn suite_draft(path: &Path) -> Option<&'static str> {
    let dir = path.parent()?.file_name()?.to_str()?;
    Some(match dir {
        "draft4" => "http://json-schema.org/draft-04/schema#",
        "draft6" => "http://json-schema.org/draft-06/schema#",
        "draft7" => "http://json-schema.org/draft-07/schema#",
        "draft2019-09" => "https://json-schema.org/draft/2019-09/schema",
        "draft2020-12" => "https://json-schema.org/draft/2020-12/schema",
        _ => return None,
    })
}

/// The validator's verdicts (formats as annotations, and asserted), or
/// `None` where it cannot build a validator for the schema.
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

pub fn run(args: &InstancesArgs) -> anyhow::Result<u8> {
    let schemas = load_schemas(&args.inputs)?;
    let tok = common::load_tokenizer(&args.tokenizer)?;
    let names: Vec<String> = if args.backends.is_empty() {
        vec!["earley".into(), "regex-fsm".into()]
    } else {
        args.backends.clone()
    };
    let backends = names
        .iter()
        .map(|n| common::make_backend(n, &Default::default(), &tok).map(|b| (n.as_str(), b)))
        .collect::<Result<Vec<_>, _>>()?;
    let vocab = backends[0].1.vocabulary().clone();
    let encode = |text: &str| tok.encode(text).ok();
    let encoder: Encoder<'_> = &encode;
    let options = InstanceOptions {
        seed: args.seed,
        valid: args.valid,
        near_misses: args.near_misses,
        ..Default::default()
    };
    let timeout = Duration::from_millis(args.compile_timeout_ms);
    let mut tallies: BTreeMap<(String, &str), Tally> = BTreeMap::new();
    let mut no_validator = 0;
    let mut intents = [[0usize; 2]; 2];
    let mut worker = CompileWorker::new();
    let mut progress = Progress::new(schemas.len());
    for (source, id, schema) in &schemas {
        let Some(judge) = judge(schema) else {
            no_validator += 1;
            progress.item_done(id, "no validator");
            continue;
        };
        let judged: Vec<_> = instances(schema, &options)
            .into_iter()
            .map(|i| {
                let v = judge(&i.value);
                (i, v)
            })
            .collect();
        for (i, v) in &judged {
            let meant = usize::from(i.intent != tokensieve::instances::Intent::Valid);
            intents[meant][usize::from(!v.valid)] += 1;
        }
        let mut status = Vec::new();
        for (name, backend) in &backends {
            let t = tallies.entry((name.to_string(), source)).or_default();
            t.schemas += 1;
            let constraint = Constraint::json_schema(schema.to_string());
            let grammar = match worker.compile(backend.clone(), constraint, Some(timeout)) {
                CompileOutcome::Ready { grammar, .. } => grammar,
                CompileOutcome::Failed { .. } => {
                    t.compile_errors += 1;
                    continue;
                }
                CompileOutcome::TimedOut => {
                    t.compile_errors += 1;
                    t.timeouts += 1;
                    continue;
                }
                CompileOutcome::Panicked { message } => {
                    t.crashed += 1;
                    eprintln!("CRASH {name} {id}: panic while compiling: {message}");
                    continue;
                }
            };
            t.compiled += 1;
            let r = match catch_panic(|| {
                check_grammar(
                    grammar.as_ref(),
                    &vocab,
                    &judged,
                    Some(encoder),
                    args.token_walks,
                )
            }) {
                Ok(r) => r,
                Err(message) => {
                    t.crashed += 1;
                    eprintln!("CRASH {name} {id}: panic while matching: {message}");
                    continue;
                }
            };
            for k in 0..4 {
                t.texts[k] += r.counts[k];
                t.schemas_with[k] += usize::from(r.counts[k] > 0);
            }
            t.token_walks += r.token_walks;
            t.token_failures += r.token_failures.len();
            if r.count(Outcome::InvalidAccepted) > 0 {
                status.push(format!("{name}: INVALID ACCEPTED"));
            }
            if args.show_findings {
                for f in &r.findings {
                    eprintln!(
                        "{} {name} {id} ({}, {}): {}",
                        f.outcome.name(),
                        f.how,
                        f.form,
                        f.text
                    );
                }
                for w in &r.token_failures {
                    eprintln!("token-walk {name} {id}: {w}");
                }
            }
        }
        progress.item_done(id, &status.join("; "));
    }
    println!("## Generated instances against the `jsonschema` crate\n");
    println!(
        "| backend | source | schemas | compiled | compile errors | crashed | invalid-accepted | valid-refused | format-only | agree | token walks | token failures |"
    );
    println!("|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut worst = 0;
    for (name, _) in &backends {
        let mut total = Tally::default();
        for ((backend, source), t) in &tallies {
            if backend == name {
                println!("{}", t.row(name, source));
                total.add(t);
            }
        }
        println!("{}", total.row(name, "**all**"));
        worst += total.texts[0] + total.token_failures + total.crashed;
    }
    println!(
        "\nTexts per class (in brackets: schemas with at least one). Each instance is fed in its \
         compact and its Python `json.dumps` spelling. Compile errors include {} time-outs at {} ms. \
         {} schemas had no validator (the `jsonschema` crate refused them). Generator: seed {}, {} \
         valid values and at most {} near misses each per schema; of the values meant valid, {} \
         were valid and {} not; of the near misses, {} were invalid and {} valid.",
        tallies.values().map(|t| t.timeouts).sum::<usize>(),
        args.compile_timeout_ms,
        no_validator,
        args.seed,
        args.valid,
        args.near_misses,
        intents[0][0],
        intents[0][1],
        intents[1][1],
        intents[1][0],
    );
    Ok(if worst > 0 { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_of_both_kinds_and_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let mb = dir.path().join("a.json");
        std::fs::write(&mb, r#"{"schema": {"type": "integer"}, "tests": []}"#).unwrap();
        let suite = dir.path().join("b.json");
        std::fs::write(
            &suite,
            r#"[{"schema": {"type": "string"}, "tests": []}, {"schema": true, "tests": []}]"#,
        )
        .unwrap();
        let all = load_schemas(&[dir.path().display().to_string()]).unwrap();
        let ids: Vec<_> = all.iter().map(|(s, id, _)| format!("{s}:{id}")).collect();
        let dir_name = dir.path().file_name().unwrap().to_string_lossy();
        assert_eq!(
            ids,
            [
                "maskbench:a.json".to_string(),
                format!("jsts:{dir_name}/b.json#0"),
                format!("jsts:{dir_name}/b.json#1")
            ]
        );
        // A test-suite file of an older draft gets its `$schema`.
        let draft7 = dir.path().join("draft7");
        std::fs::create_dir(&draft7).unwrap();
        std::fs::write(
            draft7.join("b.json"),
            r#"[{"schema": {"items": [true]}, "tests": []}]"#,
        )
        .unwrap();
        let all = load_schemas(&[draft7.display().to_string()]).unwrap();
        assert_eq!(
            all[0].2["$schema"],
            "http://json-schema.org/draft-07/schema#"
        );
        std::fs::write(&mb, "3").unwrap();
        let err = load_schemas(&[mb.display().to_string()]).unwrap_err();
        assert!(err.0.contains("neither"), "{err}");
    }
}
