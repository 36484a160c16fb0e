//! Where compile time goes, per MaskBench file: lowering, DFA, token index.
//!
//! ```text
//! cargo run --release -p tokensieve-regex-fsm --example compile_stats -- [--tokenizer PATH] [--max-whitespace N] FILE.json...
//! ```
//!
//! The tokenizer defaults to ../shared/data/tokenizers/llama3/tokenizer.json.

use std::sync::Arc;
use std::time::Instant;
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::maskbench::MaskBenchFile;
use tokensieve_core::{Constraint, ConstraintSpec};
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut tokenizer = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/tokenizers/llama3/tokenizer.json"
    )
    .to_string();
    if let Some(i) = args.iter().position(|a| a == "--tokenizer") {
        tokenizer = args.remove(i + 1);
        args.remove(i);
    }
    let mut config = RegexFsmConfig::default();
    if let Some(i) = args.iter().position(|a| a == "--max-whitespace") {
        config.max_whitespace = args.remove(i + 1).parse()?;
        args.remove(i);
    }
    let vocab = Arc::new(HfTokenizer::from_file(&tokenizer)?.into_vocabulary());
    let backend = RegexFsmBackend::new(vocab, config);
    println!(
        "file\tregex_bytes\tlower_ms\traw_states\tstates\tclasses\tdfa_ms\tindex_ms\tmemory_kib\tunique_rows\tnodes_visited_m"
    );
    for path in args {
        let file = MaskBenchFile::load(path.as_ref())?;
        let constraint = Constraint::new(ConstraintSpec::JsonSchema(file.schema.to_string()));
        let t = Instant::now();
        let regex = match backend.lower(&constraint) {
            Ok(r) => r,
            Err(e) => {
                println!("{}\tlowering error: {e}", file.id);
                continue;
            }
        };
        let lower_ms = t.elapsed().as_secs_f64() * 1e3;
        match backend.compile_regex(&regex) {
            Ok(g) => {
                let s = g.build_stats();
                println!(
                    "{}\t{}\t{lower_ms:.1}\t{}\t{}\t{}\t{:.1}\t{:.1}\t{}\t{}\t{:.1}",
                    file.id,
                    regex.len(),
                    s.raw_dfa_states,
                    s.dfa_states,
                    s.byte_classes,
                    s.dfa_time.as_secs_f64() * 1e3,
                    s.index_time.as_secs_f64() * 1e3,
                    s.memory_bytes / 1024,
                    s.index.unique_rows,
                    s.index.nodes_visited as f64 / 1e6
                );
            }
            Err(e) => println!("{}\tcompile error: {e}", file.id),
        }
    }
    Ok(())
}
