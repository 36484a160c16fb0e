//! Criterion benches of every registered backend on the same inputs:
//!
//! - `compile/<backend>/<vocab>`: JSON Schema -> compiled grammar, per fixture;
//! - `mask_fill/<backend>/<vocab>/<position>`: one complete mask, at the
//!   start of the output, right after the first key (`{"key": `) and inside
//!   the first string value (positions reached by walking the instance's own
//!   tokens, as llguidance's `compute_mask` bench does);
//! - `accept/<backend>/<vocab>`: accepting all of an instance's tokens from a
//!   fresh matcher (throughput in tokens).
//!
//! Every fixture is also walked under the GBNF JSON grammar
//! (`crates/grammar/tests/fixtures/json.gbnf`, inputs named `gbnf_json:<id>`),
//! which only context-free backends compile; and `compile_grammar/<backend>`
//! compiles the grammars of `benches/fixtures/grammars/` (a 100-rule C-like
//! grammar) and the JSON one (`compile_grammar_cold/earley`: with no
//! lexeme kept from an earlier compile). A mask is measured on a fork of the matcher at
//! the position (a fork starts without the last mask a matcher keeps).
//!
//! Inputs: the MaskBench files in `benches/fixtures/maskbench/` (schema plus
//! the first valid instance, serialized as MaskBench does); the Llama 3
//! vocabulary when `../shared/data/tokenizers/llama3/tokenizer.json` exists,
//! else the in-repo fixture vocabulary with greedy tokenization. A backend
//! that cannot compile a fixture is skipped for it, with a note on stderr.
//!
//! `cargo bench --bench backends [-- FILTER]`

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokensieve::hf::HfTokenizer;
use tokensieve::maskbench::MaskBenchFile;
use tokensieve::{BackendConfig, CompiledGrammar, Constraint, GrammarBackend, Vocabulary};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A fixture, tokenized for one vocabulary.
struct Input {
    name: String,
    constraint: Constraint,
    text: String,
    tokens: Vec<u32>,
}

fn load_vocab() -> (&'static str, Arc<Vocabulary>, Option<HfTokenizer>) {
    let path = Path::new(ROOT).join("../shared/data/tokenizers/llama3/tokenizer.json");
    if path.exists() {
        let tok = HfTokenizer::from_file(&path).expect("the Llama 3 tokenizer loads");
        ("llama3", Arc::new(tok.vocabulary().clone()), Some(tok))
    } else {
        eprintln!(
            "note: {} not found; benching with the fixture vocabulary",
            path.display()
        );
        (
            "json_tiny",
            Arc::new(tokensieve::vocab::fixtures::json_tiny()),
            None,
        )
    }
}

fn load_inputs(vocab: &Vocabulary, tok: Option<&HfTokenizer>) -> Vec<Input> {
    let dir = Path::new(ROOT).join("benches/fixtures/maskbench");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("benches/fixtures/maskbench exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let file = MaskBenchFile::load(p).expect("fixture loads");
            let test = file
                .tests
                .iter()
                .find(|t| t.valid)
                .expect("fixture has a valid instance");
            let text = test.text();
            let tokens = match tok {
                Some(t) => t.encode(&text).expect("instance tokenizes"),
                None => vocab
                    .encode_greedy(text.as_bytes())
                    .expect("fixture vocabulary has every byte"),
            };
            Input {
                name: file.id.trim_end_matches(".json").to_string(),
                constraint: Constraint::json_schema(file.schema.to_string()),
                text,
                tokens,
            }
        })
        .flat_map(|schema_input| {
            let json = Constraint::ebnf(
                grammar_text("crates/grammar/tests/fixtures/json.gbnf"),
                "root",
            );
            let grammar_input = Input {
                name: format!("gbnf_json:{}", schema_input.name),
                constraint: json,
                text: schema_input.text.clone(),
                tokens: schema_input.tokens.clone(),
            };
            [schema_input, grammar_input]
        })
        .collect()
}

fn grammar_text(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).expect("grammar fixture")
}

/// How many of `input.tokens` to accept to reach each position: right after
/// the first `": ` (after a key), and strictly inside the first string value
/// (the token boundary must fall inside it; else the position is left out).
fn positions(input: &Input, vocab: &Vocabulary) -> Vec<(&'static str, usize)> {
    let mut out = vec![("start", 0)];
    let bytes = input.text.as_bytes();
    let mut ends = Vec::with_capacity(input.tokens.len());
    let mut len = 0;
    for &t in &input.tokens {
        len += vocab.token_bytes(t).len();
        ends.push(len);
    }
    let prefix_tokens = |at_least: usize| ends.iter().position(|&e| e >= at_least).map(|i| i + 1);
    let key_end = input.text.find("\": ").map(|i| i + 3);
    if let Some(k) = key_end.and_then(prefix_tokens) {
        out.push(("after_key", k));
    }
    // The first string value: from its opening quote to the next unescaped one.
    let open = input.text.find("\": \"").map(|i| i + 3);
    let close = open
        .and_then(|o| (o + 1..bytes.len()).find(|&i| bytes[i] == b'"' && bytes[i - 1] != b'\\'));
    if let (Some(open), Some(close)) = (open, close) {
        if let Some(i) = ends.iter().position(|&e| e > open + 1 && e < close) {
            out.push(("in_string", i + 1));
        }
    }
    out
}

fn compiled(backend: &dyn GrammarBackend, input: &Input) -> Option<Arc<dyn CompiledGrammar>> {
    match backend.compile(&input.constraint) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("skip {} on {}: {e}", backend.name(), input.name);
            None
        }
    }
}

/// The grammars of `compile_grammar/`.
const GRAMMARS: [(&str, &str); 2] = [
    ("json.gbnf", "crates/grammar/tests/fixtures/json.gbnf"),
    ("tinyc.gbnf", "benches/fixtures/grammars/tinyc.gbnf"),
];

/// `compile_grammar_cold/earley`: the grammars compiled as a process's
/// first compile would be, every lexeme built afresh (`shared_lexemes`
/// off; the vocabulary's trie exists), which is what a grammar's compile
/// targets are measured by.
fn compile_cold(c: &mut Criterion, vocab: &Arc<Vocabulary>, vocab_name: &str) {
    let mut config = BackendConfig::default();
    config
        .options
        .insert("shared_lexemes".into(), "false".into());
    let backend = tokensieve::create_backend("earley", &config, vocab.clone())
        .expect("the earley backend takes shared_lexemes");
    bench_grammars(
        c,
        &format!("compile_grammar_cold/earley/{vocab_name}"),
        backend.as_ref(),
    );
}

/// One compile of each of [`GRAMMARS`] per iteration, in group `group`.
fn bench_grammars(c: &mut Criterion, group: &str, backend: &dyn GrammarBackend) {
    let mut bench = c.benchmark_group(group);
    bench
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for (label, path) in GRAMMARS {
        let constraint = Constraint::ebnf(grammar_text(path), "root");
        if let Err(e) = backend.compile(&constraint) {
            eprintln!("skip {group} on {label}: {e}");
            continue;
        }
        bench.bench_function(label, |b| {
            b.iter(|| {
                black_box(
                    backend
                        .compile(black_box(&constraint))
                        .expect("compiled before"),
                )
            })
        });
    }
    bench.finish();
}

fn benches(c: &mut Criterion) {
    let (vocab_name, vocab, tok) = load_vocab();
    let inputs = load_inputs(&vocab, tok.as_ref());
    for info in tokensieve::available_backends() {
        let backend = match tokensieve::create_backend(
            &info.name,
            &BackendConfig::default(),
            vocab.clone(),
        ) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("skip backend {}: {e}", info.name);
                continue;
            }
        };
        let name = backend.name().to_string();
        let grammars: Vec<(&Input, Arc<dyn CompiledGrammar>)> = inputs
            .iter()
            .filter_map(|i| compiled(backend.as_ref(), i).map(|g| (i, g)))
            .collect();
        if grammars.is_empty() {
            eprintln!("skip backend {name}: it compiles none of the fixtures");
            continue;
        }

        let mut group = c.benchmark_group(format!("compile/{name}/{vocab_name}"));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(5));
        for (input, _) in &grammars {
            group.bench_function(&input.name, |b| {
                b.iter(|| {
                    black_box(
                        backend
                            .compile(black_box(&input.constraint))
                            .expect("compiled before"),
                    )
                })
            });
        }
        group.finish();

        bench_grammars(
            c,
            &format!("compile_grammar/{name}/{vocab_name}"),
            backend.as_ref(),
        );
        if name == "earley" {
            compile_cold(c, &vocab, vocab_name);
        }

        let mut row = vec![0u32; vocab.mask_words()];
        for position in ["start", "after_key", "in_string"] {
            let mut group = c.benchmark_group(format!("mask_fill/{name}/{vocab_name}/{position}"));
            group.throughput(Throughput::Elements(1));
            for (input, grammar) in &grammars {
                let Some(&(_, k)) = positions(input, &vocab)
                    .iter()
                    .find(|(p, _)| *p == position)
                else {
                    eprintln!(
                        "skip mask_fill/{position} on {}: no token boundary there",
                        input.name
                    );
                    continue;
                };
                let mut matcher = grammar.matcher();
                if let Err(e) = matcher.accept_tokens(&input.tokens[..k]) {
                    eprintln!(
                        "skip mask_fill/{name}/{position} on {}: the instance is rejected ({e})",
                        input.name
                    );
                    continue;
                }
                group.bench_function(&input.name, |b| {
                    b.iter_batched(
                        || matcher.fork(),
                        |mut m| {
                            m.fill_bitmask(black_box(&mut row));
                            m
                        },
                        BatchSize::SmallInput,
                    )
                });
            }
            group.finish();
        }

        let mut group = c.benchmark_group(format!("accept/{name}/{vocab_name}"));
        for (input, grammar) in &grammars {
            if let Err(e) = grammar.matcher().accept_tokens(&input.tokens) {
                eprintln!(
                    "skip accept/{name} on {}: the instance is rejected ({e})",
                    input.name
                );
                continue;
            }
            group.throughput(Throughput::Elements(input.tokens.len() as u64));
            group.bench_function(&input.name, |b| {
                b.iter_batched(
                    || grammar.matcher(),
                    |mut m| {
                        m.accept_tokens(black_box(&input.tokens))
                            .expect("accepted before");
                        m
                    },
                    BatchSize::SmallInput,
                )
            });
        }
        group.finish();
    }
}

criterion_group!(backends, benches);
criterion_main!(backends);
