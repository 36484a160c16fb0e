//! Index build time and memory, and per-call mask / accept times, of the
//! regex backend on real vocabularies.
//!
//! ```text
//! cargo run --release -p tokensieve-regex-fsm --example index_stats [-- llama3 qwen2.5 ...]
//! ```
//!
//! Reads `../shared/data/tokenizers/<name>/tokenizer.json` (relative to the
//! workspace root). Single-threaded unless `--parallel` is given; `--cold`
//! turns the loop-walk cache off, so no regex reuses an earlier one's walks.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::{GrammarObject, SpecOptions};
use tokensieve_json_schema as json_schema;
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

const WS: &str = r"[ \t\n\r]{0,20}";
const STRING: &str = r#""([^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*""#;
const INTEGER: &str = r"-?(0|[1-9][0-9]{0,15})";

/// A small JSON-schema-like regex: `{"name": string, "age": integer,
/// "tags": [string, ...]}` with bounded whitespace, written by hand (the
/// shape the JSON Schema lowering produces).
fn person_regex() -> String {
    let key = |k: &str| format!(r#"{WS}"{k}"{WS}:{WS}"#);
    format!(
        r"\{{{}{STRING}{WS},{}{INTEGER}{WS},{}\[{WS}({STRING}({WS},{WS}{STRING}){{0,}})?{WS}\]{WS}\}}",
        key("name"),
        key("age"),
        key("tags"),
    )
}

/// A larger one: ten properties (enum, number, boolean, nested object,
/// array of objects, optional-free), about what a tool-call schema gives.
fn order_regex() -> String {
    let key = |k: &str| format!(r#"{WS}"{k}"{WS}:{WS}"#);
    let number = r"-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,3})?";
    let address = format!(
        r"\{{{}{STRING}{WS},{}{STRING}{WS},{}{STRING}{WS}\}}",
        key("street"),
        key("city"),
        key("zip")
    );
    let item = format!(
        r"\{{{}{STRING}{WS},{}{INTEGER}{WS},{}{number}{WS}\}}",
        key("sku"),
        key("quantity"),
        key("price")
    );
    format!(
        r#"\{{{}{INTEGER}{WS},{}"(pending|paid|shipped|cancelled)"{WS},{}{STRING}{WS},{}{STRING}{WS},{}(true|false){WS},{}{number}{WS},{}{address}{WS},{}\[{WS}({item}({WS},{WS}{item}){{0,}})?{WS}\]{WS},{}(null|{STRING}){WS},{}"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}"{WS}\}}"#,
        key("id"),
        key("status"),
        key("customer"),
        key("email"),
        key("gift"),
        key("total"),
        key("shipping"),
        key("items"),
        key("note"),
        key("date"),
    )
}

const SCHEMA: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"]}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parallel = args.iter().any(|a| a == "--parallel");
    let minimize = !args.iter().any(|a| a == "--no-minimize");
    // Cold: no loop walk is reused from an earlier regex of the run.
    let walk_cache_bytes = if args.iter().any(|a| a == "--cold") {
        0
    } else {
        RegexFsmConfig::default().walk_cache_bytes
    };
    let mut names: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(|s| s.as_str())
        .collect();
    if names.is_empty() {
        names = vec!["llama3", "qwen2.5", "mistral7b"];
    }
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/tokenizers"
    );
    let mut regexes: Vec<(String, String)> = vec![
        ("[a-z]+".into(), "[a-z]+".into()),
        ("free string".into(), r#""([^"\\]|\\.)*""#.into()),
        ("person (hand-written JSON regex)".into(), person_regex()),
        ("order (hand-written, 10 props)".into(), order_regex()),
    ];
    let words: Vec<String> = (0..100)
        .map(|i| format!("{}ing_{}", ["runn", "jump", "walk", "swimm"][i % 4], i / 4))
        .collect();
    let escaped: Vec<String> = words.iter().map(|w| regex_syntax::escape(w)).collect();
    regexes.push((
        "choice (100 words)".into(),
        format!("(?:{})", escaped.join("|")),
    ));
    match json_schema::schema_to_regex(SCHEMA, &SpecOptions::default(), 20) {
        Ok(r) => regexes.push(("person (json_schema lowering)".into(), r)),
        Err(e) => println!("(json_schema lowering not available: {e})"),
    }
    for name in names {
        let path = format!("{root}/{name}/tokenizer.json");
        if !std::path::Path::new(&path).exists() {
            println!("skipped: {path} not found");
            continue;
        }
        let tok = HfTokenizer::from_file(&path)?;
        let vocab = Arc::new(tok.into_vocabulary());
        let t = Instant::now();
        let config = RegexFsmConfig {
            parallel_build: parallel,
            minimize,
            walk_cache_bytes,
            ..Default::default()
        };
        let backend = RegexFsmBackend::new(vocab.clone(), config);
        println!(
            "\n== {name}: {} tokens, trie {} nodes, {:.1} MiB, built in {:.1} ms",
            vocab.vocab_size(),
            backend.trie().num_nodes(),
            backend.trie().memory_bytes() as f64 / (1 << 20) as f64,
            t.elapsed().as_secs_f64() * 1e3
        );
        println!(
            "{:<34} {:>7} {:>7} {:>7} {:>8} {:>9} {:>8} {:>9} {:>9} {:>8} {:>9} {:>11}",
            "regex",
            "raw st",
            "states",
            "classes",
            "dfa ms",
            "index ms",
            "Mnodes",
            "rows d/s",
            "mem KiB",
            "fill ns",
            "fill max",
            "accept ns+rb"
        );
        for (label, pattern) in &regexes {
            // Best of 3 builds.
            let mut best = None;
            for _ in 0..3 {
                let g = backend.compile_regex(pattern)?;
                let s = g.build_stats().clone();
                if best
                    .as_ref()
                    .is_none_or(|(b, _): &(tokensieve_regex_fsm::BuildStats, _)| {
                        s.dfa_time + s.index_time < b.dfa_time + b.index_time
                    })
                {
                    best = Some((s, g));
                }
            }
            let (s, g) = best.expect("built three times");
            let (fill_ns, fill_max_ns, accept_ns) = time_steps(&g, &vocab);
            println!(
                "{:<34} {:>7} {:>7} {:>7} {:>8.2} {:>9.2} {:>8.1} {:>9} {:>9.0} {:>8.0} {:>9.0} {:>11.0}",
                label,
                s.raw_dfa_states,
                s.dfa_states,
                s.byte_classes,
                s.dfa_time.as_secs_f64() * 1e3,
                s.index_time.as_secs_f64() * 1e3,
                s.index.nodes_visited as f64 / 1e6,
                format!("{}/{}", s.index.dense_rows, s.index.sparse_rows),
                s.memory_bytes as f64 / 1024.0,
                fill_ns,
                fill_max_ns,
                accept_ns,
            );
        }
    }
    Ok(())
}

/// Per-call ns of `fill_bitmask` (mean over the visited states, and the
/// slowest state) and of `accept_token` (mean), along a random walk through
/// allowed tokens (restarting when the output ends).
fn time_steps(
    g: &tokensieve_regex_fsm::RegexGrammar,
    vocab: &tokensieve_core::Vocabulary,
) -> (f64, f64, f64) {
    const REPS: u32 = 200;
    let mut row = vec![0u32; vocab.mask_words()];
    let mut m = g.regex_matcher();
    let (mut fill_sum, mut fill_max, mut fills) = (0.0f64, 0.0f64, 0u32);
    let (mut accept_sum, mut accepts) = (0.0f64, 0u32);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300 {
        // Best of 5 batches: the machine is shared, preemption is noise.
        let mut per = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..REPS {
                m.fill_bitmask(black_box(&mut row));
            }
            per = per.min(t.elapsed().as_secs_f64() * 1e9 / REPS as f64);
        }
        fill_sum += per;
        fill_max = fill_max.max(per);
        fills += 1;
        let allowed: Vec<u32> = (0..vocab.tokenizer_size() as u32)
            .filter(|&id| row[id as usize / 32] >> (id % 32) & 1 == 1 && !vocab.is_stop(id))
            .collect();
        if allowed.is_empty() {
            m.reset();
            continue;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let token = allowed[(rng % allowed.len() as u64) as usize];
        let mut per = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..REPS {
                m.accept_token(black_box(token)).expect("allowed token");
                m.rollback(1).expect("one step kept");
            }
            per = per.min(t.elapsed().as_secs_f64() * 1e9 / REPS as f64);
        }
        accept_sum += per;
        accepts += 1;
        m.accept_token(token).expect("allowed token");
    }
    (
        fill_sum / fills as f64,
        fill_max,
        accept_sum / accepts.max(1) as f64,
    )
}
