//! Where mask time goes: walks JSON texts under a constraint on a real
//! tokenizer and prints, per token, the mask time and the token, slowest
//! first.
//!
//! `cargo run --release -p tokensieve-earley --example mask_profile -- TOKENIZER.json [GBNF_FILE|SCHEMA.json] [KEY=VALUE...] < texts.txt`
//! (one text per line, or a JSON string per line for texts with newlines;
//! a `.json` file is a JSON Schema, another file a GBNF
//! grammar, none the builtin JSON grammar;
//! `KEY=VALUE` are `EarleyConfig` knobs). `REPS=N` compiles and walks
//! the texts `N` times, each time afresh (cold with
//! `shared_lexemes=false`), and keeps each token's median: for `perf`.
//! `WALKS=M` walks the texts `M` times per compile (every walk after the
//! first finds its summaries made: the steady state). The time of each
//! token is its mask and its step (`accept_token`), as `tokensieve bench`
//! times it; the step's own median is printed too. `TOP=K` prints the K
//! slowest tokens (default 40), each with its mask's number.
//! `HASHES=FILE` writes a hash of every
//! mask of the first compile's walks to `FILE`, one per line (the later
//! walks find their summaries made): two builds compared
//! mask for mask (`cmp`) on real schemas and texts; with `IDS=1`, each
//! hash is followed by a line of the mask's token ids (to see what two
//! builds disagree on). `PROFILE_AT=K` computes the K-th mask of the first
//! walk (counted over all texts, from 0) in a function of its own, for
//! callgrind's `--toggle-collect='*profiled_mask*'`.

use std::io::BufRead;
use std::sync::Arc;
use std::time::Instant;

use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::{CompiledGrammar, Constraint, ConstraintSpec};
use tokensieve_earley::{EarleyBackend, EarleyConfig};

/// The allocator the CLI runs with (its source), so the profile is of what
/// `tokensieve bench` spends: glibc's `realloc` of the long lists a
/// summary grows was a sixth of a GBNF mask's instructions.
#[path = "../../cli/src/alloc.rs"]
mod alloc;

#[global_allocator]
static GLOBAL: alloc::MiMalloc = alloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    alloc::keep_memory();
    let args: Vec<String> = std::env::args().collect();
    let tok = HfTokenizer::from_file(&args[1])?;
    let vocab = Arc::new(tok.vocabulary().clone());
    let mut config = tokensieve_core::BackendConfig::default();
    for kv in args.iter().skip(2).filter(|a| a.contains('=')) {
        let (k, v) = kv.split_once('=').expect("KEY=VALUE");
        config.options.insert(k.into(), v.into());
    }
    let backend = EarleyBackend::new(vocab.clone(), EarleyConfig::from_backend_config(&config)?);
    let constraint = match args.get(2).filter(|a| !a.contains('=')) {
        Some(path) if path.ends_with(".json") => {
            Constraint::new(ConstraintSpec::JsonSchema(std::fs::read_to_string(path)?))
        }
        Some(path) => Constraint::ebnf(std::fs::read_to_string(path)?, "root"),
        None => Constraint::new(ConstraintSpec::JsonObject),
    };
    let reps: usize = std::env::var("REPS").map_or(Ok(1), |r| r.parse())?;
    let walks: usize = std::env::var("WALKS").map_or(Ok(1), |r| r.parse())?;
    let mut texts = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        // A line in quotes is a JSON string: text with newlines (a program).
        let text = if line.starts_with('"') {
            serde_json::from_str::<String>(&line)?
        } else {
            line
        };
        let ids = tok.encode(&text)?;
        texts.push((text, ids));
    }
    let mut row = vec![0u32; vocab.mask_words()];
    // Per token of every text: its mask times (one per rep), the text
    // before it and the token.
    let mut times: Vec<(Vec<u128>, String, String)> = Vec::new();
    let mut steps: Vec<u128> = Vec::new();
    let mut grammar: Option<std::sync::Arc<tokensieve_earley::EarleyGrammar>> = None;
    let ids_too = std::env::var_os("IDS").is_some();
    let profile_at: Option<usize> = std::env::var("PROFILE_AT")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut hashes = match std::env::var("HASHES") {
        Ok(path) => Some(std::io::BufWriter::new(std::fs::File::create(path)?)),
        Err(_) => None,
    };
    for rep in 0..reps * walks {
        if rep % walks == 0 {
            let t = Instant::now();
            let compiled = backend.compile_earley(&constraint, &Default::default())?;
            if rep == 0 {
                eprintln!("compile {:?}: {compiled:?}", t.elapsed());
            }
            grammar = Some(std::sync::Arc::new(compiled));
        }
        let grammar = grammar.as_ref().expect("compiled");
        let mut k = 0;
        for (line, ids) in &texts {
            let mut m = grammar.matcher();
            for (i, &id) in ids.iter().enumerate() {
                let t = Instant::now();
                if profile_at == Some(k) && rep == 0 {
                    profiled_mask(&mut m, &mut row);
                } else {
                    m.fill_bitmask(&mut row);
                }
                let mask = t.elapsed();
                if let Some(out) = hashes.as_mut().filter(|_| rep < walks) {
                    use std::hash::{Hash, Hasher};
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    row.hash(&mut h);
                    std::io::Write::write_all(out, format!("{:016x}\n", h.finish()).as_bytes())?;
                    if ids_too {
                        let ids: Vec<String> = (0..row.len() * 32)
                            .filter(|&t| row[t / 32] >> (t % 32) & 1 == 1)
                            .map(|t| t.to_string())
                            .collect();
                        std::io::Write::write_all(out, format!("{}\n", ids.join(" ")).as_bytes())?;
                    }
                }
                let rejected = m.accept_token(id).is_err();
                let ns = t.elapsed().as_nanos();
                steps.push((t.elapsed() - mask).as_nanos());
                if rep == 0 {
                    let before = vocab.decode(&ids[i.saturating_sub(3)..i]);
                    times.push((
                        Vec::with_capacity(reps * walks),
                        String::from_utf8_lossy(&before).into_owned(),
                        String::from_utf8_lossy(vocab.token_bytes(id)).into_owned(),
                    ));
                }
                times[k].0.push(ns);
                k += 1;
                if rejected {
                    eprintln!("rejected {line:?} at {i}");
                    break;
                }
            }
        }
    }
    // Each token's median, its text before, the token and its mask's
    // number (for `PROFILE_AT`).
    let mut times: Vec<(u128, String, String, usize)> = times
        .into_iter()
        .enumerate()
        .map(|(k, (mut each, before, token))| {
            each.sort_unstable();
            (each[each.len() / 2], before, token, k)
        })
        .collect();
    times.sort_by_key(|t| std::cmp::Reverse(t.0));
    let n = times.len();
    if n == 0 {
        return Ok(());
    }
    let mut sorted: Vec<u128> = times.iter().map(|t| t.0).collect();
    sorted.sort_unstable();
    steps.sort_unstable();
    println!(
        "steps alone: p50 {} ns, p90 {} ns",
        steps[steps.len() / 2],
        steps[steps.len() * 9 / 10]
    );
    println!(
        "{n} masks; p50 {} ns, p90 {} ns, p99 {} ns, max {} ns",
        sorted[n / 2],
        sorted[n * 9 / 10],
        sorted[n * 99 / 100],
        sorted[n - 1]
    );
    let top: usize = std::env::var("TOP").map_or(Ok(40), |t| t.parse())?;
    for (ns, before, token, k) in times.iter().take(top) {
        println!("{ns:>9} ns  #{k:<5} after {before:?} -> {token:?}");
    }
    Ok(())
}

/// One mask on its own, for `valgrind --tool=callgrind
/// --toggle-collect='*profiled_mask*'` (`PROFILE_AT=K`: the K-th mask of
/// the first walk, counted over all texts from 0).
#[inline(never)]
fn profiled_mask(m: &mut Box<dyn tokensieve_core::grammar::GrammarObject>, row: &mut [u32]) {
    m.fill_bitmask(row);
}
