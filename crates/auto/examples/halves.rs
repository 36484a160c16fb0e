//! What each half of the auto backend costs on real MaskBench files: the
//! compile (earley's, what the first mask waits for), the background build
//! of the table (wall time until it is ready), and the time of a mask and
//! its token's step on earley and on the table, over the valid instances
//! of the files whose language is regular (the others never move), and the
//! move itself after a whole instance (its replay and first mask).
//!
//!     cargo run --release -p tokensieve-auto --example halves -- \
//!         ../shared/data/tokenizers/llama3/tokenizer.json ../shared/data/maskbench-dev/*.json

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokensieve_auto::{AutoBackend, AutoConfig};
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::maskbench::MaskBenchFile;
use tokensieve_core::{CancelToken, Constraint, GrammarObject};

/// Per token: fill the mask, then accept the token (MaskBench's TBM).
fn walk(m: &mut dyn GrammarObject, tokens: &[u32], row: &mut [u32], out: &mut Vec<Duration>) {
    for &t in tokens {
        let start = Instant::now();
        m.fill_bitmask(row);
        let ok = m.accept_token(t).is_ok();
        out.push(start.elapsed());
        if !ok {
            return;
        }
    }
}

fn percentiles(label: &str, mut v: Vec<Duration>) {
    v.sort();
    let at = |p: f64| {
        v.get(((v.len() as f64 * p / 100.0) as usize).min(v.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    println!(
        "{label}: n={} p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        v.len(),
        at(50.0),
        at(99.0),
        at(100.0)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let tokenizer = args
        .next()
        .ok_or("usage: halves TOKENIZER.json FILE.json...")?;
    let tok = HfTokenizer::from_file(&tokenizer)?;
    let vocab = Arc::new(tok.vocabulary().clone());
    let backend = AutoBackend::new(
        vocab.clone(),
        AutoConfig {
            // Every file builds its own table (no file repeats anyway).
            table_cache_entries: 0,
            ..AutoConfig::default()
        },
    );
    let mut row = vec![0u32; vocab.mask_words()];
    let (mut compiles, mut builds) = (Vec::new(), Vec::new());
    let (mut on_earley, mut on_table) = (Vec::new(), Vec::new());
    let (mut files, mut regular) = (0, 0);
    let mut moves: Vec<(Duration, u64)> = Vec::new();
    for path in args {
        let file = MaskBenchFile::load(std::path::Path::new(&path))?;
        let constraint = Constraint::json_schema(file.schema.to_string());
        let start = Instant::now();
        let Ok(grammar) = backend.compile_auto(&constraint, &CancelToken::new()) else {
            continue;
        };
        compiles.push(start.elapsed());
        files += 1;
        let start = Instant::now();
        if !grammar.wait_for_table() {
            continue;
        }
        builds.push(start.elapsed());
        regular += 1;
        for test in file.tests.iter().filter(|t| t.valid) {
            let tokens = tok.encode(&test.text())?;
            let mut earley = grammar.auto_matcher();
            earley.pin_to_earley(true);
            earley.reset();
            walk(&mut earley, &tokens, &mut row, &mut on_earley);
            let mut table = grammar.auto_matcher();
            walk(&mut table, &tokens, &mut row, &mut on_table);
            // The move after the whole instance on earley: the replay of
            // every step into the table's matcher, then its mask.
            let bytes = earley.stats().tokens_accepted;
            earley.pin_to_earley(false);
            let start = Instant::now();
            earley.fill_bitmask(&mut row);
            moves.push((start.elapsed(), bytes));
        }
    }
    println!("{files} files compiled, {regular} with a table");
    percentiles("compile (first mask ready)", compiles);
    percentiles("table build, wall", builds);
    percentiles("mask + step on earley", on_earley);
    percentiles("mask + step on the table", on_table);
    let tokens: u64 = moves.iter().map(|m| m.1).sum();
    let longest = moves.iter().map(|m| m.1).max().unwrap_or(0);
    println!(
        "moves after a whole instance: {} moves, {tokens} tokens replayed in all, the longest {longest}",
        moves.len()
    );
    percentiles(
        "move (replay + first mask on the table)",
        moves.into_iter().map(|m| m.0).collect(),
    );
    Ok(())
}
