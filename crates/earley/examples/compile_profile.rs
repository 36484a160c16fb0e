//! Where compile time goes: compiles the JSON Schema of every MaskBench
//! file given (or of every file in a folder) `REPS` times on a real
//! tokenizer and prints the median compile per file, slowest first (the ten
//! slowest on stderr, every file in µs on stdout). Run it
//! under `perf record` to see which phase costs.
//!
//! A `.gbnf` file is compiled as a grammar. `EARLEY_COLD=1` builds every
//! lexeme afresh for each compile (`shared_lexemes: false`).
//!
//! `cargo run --release -p tokensieve-earley --example compile_profile -- TOKENIZER.json REPS FILE_OR_DIR...`

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokensieve_core::Constraint;
use tokensieve_core::hf::HfTokenizer;
use tokensieve_earley::{EarleyBackend, EarleyConfig};

/// The allocator the CLI runs with (its source), so the profile is of what
/// it spends.
#[path = "../../cli/src/alloc.rs"]
mod alloc;

#[global_allocator]
static GLOBAL: alloc::MiMalloc = alloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    alloc::keep_memory();
    let args: Vec<String> = std::env::args().collect();
    let tok = HfTokenizer::from_file(&args[1])?;
    let reps: usize = args[2].parse()?;
    let vocab = Arc::new(tok.vocabulary().clone());
    let config = EarleyConfig {
        shared_lexemes: std::env::var_os("EARLEY_COLD").is_none(),
        ..EarleyConfig::default()
    };
    let backend = EarleyBackend::new(vocab, config);
    let mut files = Vec::new();
    for arg in &args[3..] {
        let path = std::path::Path::new(arg);
        if path.is_dir() {
            let mut found: Vec<_> = std::fs::read_dir(path)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.to_path_buf());
        }
    }
    let mut times: Vec<(Duration, String)> = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path)?;
        let constraint = if path.extension().is_some_and(|e| e == "gbnf") {
            Constraint::ebnf(text, "root")
        } else {
            let file: serde_json::Value = serde_json::from_str(&text)?;
            Constraint::json_schema(file["schema"].to_string())
        };
        let mut each = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            let ok = backend
                .compile_earley(&constraint, &Default::default())
                .is_ok();
            each.push(t.elapsed());
            if !ok {
                break;
            }
        }
        each.sort();
        times.push((each[each.len() / 2], path.display().to_string()));
    }
    times.sort();
    let total: Duration = times.iter().map(|t| t.0).sum();
    eprintln!(
        "{} files, median of medians {:?}, total {:?}",
        times.len(),
        times[times.len() / 2].0,
        total
    );
    for (t, name) in times.iter().rev().take(10) {
        eprintln!("{t:>12?} {name}");
    }
    // Every file, slowest first, in µs: for picking files by compile time.
    for (t, name) in times.iter().rev() {
        println!("{} {name}", t.as_micros());
    }
    Ok(())
}
