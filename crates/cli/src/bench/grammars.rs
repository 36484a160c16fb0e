//! `tokensieve bench grammars`: grammars walked over texts they accept, one
//! record per grammar in the MaskBench record format, so `bench report`
//! scores them as it scores schemas. A corpus folder holds `NAME.gbnf` and,
//! beside it, a folder `NAME/` of texts (`*.txt`, each one valid text,
//! walked whole). Each grammar is compiled once, in the order given, and
//! its texts walked in name order: the first text's masks are the
//! grammar's cold ones, later texts meet rows the first built.

use super::maskbench::run_record;
use super::progress::Progress;
use super::record::status_of;
use crate::common::{self, BadInput};
use anyhow::Context;
use clap::Args;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokensieve::Constraint;
use tokensieve::bench_protocol::CompileWorker;

#[derive(Args)]
pub struct GrammarsArgs {
    /// Backend name (see `tokensieve backends`).
    #[arg(long)]
    pub backend: String,
    /// A Hugging Face tokenizer.json or a GGUF model file.
    #[arg(long)]
    pub tokenizer: String,
    /// Output JSONL file: one record per grammar (id `NAME.gbnf`, split `NAME`).
    #[arg(long)]
    pub out: String,
    /// A compilation still running after this many milliseconds is
    /// cancelled and recorded as `"timeout": "compile"`.
    #[arg(long, default_value_t = 30_000)]
    pub compile_timeout_ms: u64,
    /// A backend knob, KEY=VALUE (repeatable), e.g. `shared_lexemes=false`
    /// for earley.
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Root rule of every grammar.
    #[arg(long, default_value = "root")]
    pub root: String,
    /// Corpus folders (each `NAME.gbnf` with its texts in `NAME/*.txt`), or
    /// single `.gbnf` files with their text folders beside them.
    #[arg(required = true)]
    pub inputs: Vec<String>,
}

/// One grammar of a corpus and its texts.
struct Corpus {
    name: String,
    grammar: String,
    texts: Vec<String>,
}

/// The `*.txt` files of `dir`, sorted, as text.
fn texts_in(dir: &Path) -> Result<Vec<String>, BadInput> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| BadInput(format!("the texts of a grammar, {}: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(BadInput(format!("no *.txt texts in {}", dir.display())));
    }
    paths
        .iter()
        .map(|p| common::read_file("text", &p.to_string_lossy()))
        .collect()
}

/// The grammars `inputs` name, each with its texts.
fn collect(inputs: &[String]) -> Result<Vec<Corpus>, BadInput> {
    let mut grammars = Vec::new();
    for input in inputs {
        let path = Path::new(input);
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| BadInput(format!("{input}: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "gbnf"))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(BadInput(format!("no *.gbnf grammars in {input}")));
            }
            grammars.extend(found);
        } else {
            grammars.push(path.to_path_buf());
        }
    }
    grammars
        .iter()
        .map(|g| {
            let name = g
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(Corpus {
                grammar: common::read_file("grammar", &g.to_string_lossy())?,
                texts: texts_in(&g.with_file_name(&name))?,
                name,
            })
        })
        .collect()
}

pub fn run(args: &GrammarsArgs) -> anyhow::Result<u8> {
    // Every grammar and text is read before the first compile.
    let corpora = collect(&args.inputs)?;
    let tok = common::load_tokenizer(&args.tokenizer)?;
    let backend =
        common::make_bench_backend(&args.backend, &common::backend_config(&args.options)?, &tok)?;
    let out_file = std::fs::File::create(&args.out)
        .map_err(|e| BadInput(format!("cannot create {}: {e}", args.out)))?;
    let mut out = std::io::BufWriter::new(out_file);
    let timeout = Duration::from_millis(args.compile_timeout_ms);
    let mut progress = Progress::new(corpora.len());
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut row = vec![0u32; backend.vocabulary().mask_words()];
    let mut worker = CompileWorker::new();
    for corpus in &corpora {
        let constraint = Constraint::ebnf(corpus.grammar.clone(), args.root.clone());
        common::check_kind(backend.as_ref(), &constraint)?;
        let tests: Vec<(bool, String)> = corpus.texts.iter().map(|t| (true, t.clone())).collect();
        let encode = |text: &str| tok.encode(text).map_err(|e| e.to_string());
        let id = format!("{}.gbnf", corpus.name);
        let record = run_record(
            (&id, &corpus.name),
            &tests,
            constraint,
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
        progress.item_done(&id, status);
    }
    eprintln!("{} records -> {}; {counts:?}", corpora.len(), args.out);
    Ok(0)
}
