//! How long each input takes to compile on both backends with a real
//! vocabulary: the fuzzers' slow inputs and time-outs (their `artifacts/`),
//! or any files, as regexes, GBNF grammars (root `root`) or JSON Schemas.
//! Prints one line per input and backend: milliseconds, backend, file,
//! and `ok` or the error.
//!
//! `cargo run --release -p tokensieve-fuzz --example compile_times -- TOKENIZER.json regex|gbnf|json_schema FILE...`

use std::sync::Arc;
use std::time::Instant;

use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::{Constraint, GrammarBackend};
use tokensieve_earley::{EarleyBackend, EarleyConfig};
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, tokenizer, kind, files @ ..] = args.as_slice() else {
        return Err("usage: compile_times TOKENIZER.json regex|gbnf|json_schema FILE...".into());
    };
    let vocab = Arc::new(HfTokenizer::from_file(tokenizer)?.into_vocabulary());
    let regex_fsm = RegexFsmBackend::new(vocab.clone(), RegexFsmConfig::default());
    let earley = EarleyBackend::new(vocab, EarleyConfig::default());
    let backends: [&dyn GrammarBackend; 2] = [&regex_fsm, &earley];
    for path in files {
        let Ok(text) = String::from_utf8(std::fs::read(path)?) else {
            continue;
        };
        let constraint = match kind.as_str() {
            "regex" => Constraint::regex(text),
            "gbnf" => Constraint::ebnf(text, "root"),
            "json_schema" => Constraint::json_schema(text),
            other => return Err(format!("unknown kind {other}").into()),
        };
        for backend in backends {
            let started = Instant::now();
            let outcome = match backend.compile(&constraint) {
                Ok(grammar) => {
                    drop(grammar.matcher());
                    "ok".to_string()
                }
                Err(e) => e.to_string(),
            };
            let ms = started.elapsed().as_secs_f64() * 1e3;
            let name = path.rsplit('/').next().unwrap_or(path);
            println!("{ms:.1}\t{}\t{name}\t{outcome}", backend.name());
        }
    }
    Ok(())
}
