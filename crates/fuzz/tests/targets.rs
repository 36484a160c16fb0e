//! Each fuzz target's body over its committed seeds and regression inputs
//! plus a fixed number of seeded mutations of each: the fuzz targets run
//! on stable in every `cargo test`, so they cannot rot.

use tokensieve_core::skip;
use tokensieve_fuzz::replay::{self, Input};
use tokensieve_fuzz::target;

/// Runs the target named `name` over `inputs` and `mutations` seeded
/// mutations of each; at least `min_inputs` inputs must be there (so an
/// emptied seed folder fails the test).
fn replay(name: &str, inputs: &[Input], min_inputs: usize, mutations: usize) {
    assert!(
        inputs.len() >= min_inputs,
        "{name}: {} seeds, expected at least {min_inputs}",
        inputs.len()
    );
    let t = target(name).expect("a target");
    let runs = replay::run(t, inputs, mutations, 0x5EED ^ name.len() as u64);
    eprintln!("{name}: {runs} runs");
}

#[test]
fn gbnf() {
    replay("gbnf", &replay::seeds("gbnf"), 9, 40);
}

#[test]
fn regex() {
    replay("regex", &replay::seeds("regex"), 7, 40);
}

#[test]
fn json_schema() {
    replay("json_schema", &replay::seeds("json_schema"), 12, 1);
}

/// MaskBench dev schemas (one in 200) through the `json_schema` body
/// (which compiles each and a structure-aware mutation of it).
#[test]
fn json_schema_on_maskbench_dev() {
    let Some(dir) = replay::maskbench_dir() else {
        skip!("../shared/data/maskbench-dev not found: MaskBench schemas not fuzzed");
        return;
    };
    let schemas = replay::maskbench_schemas(&dir, 200);
    replay("json_schema", &schemas, 10, 0);
}

#[test]
fn tokenizer_json() {
    replay("tokenizer_json", &replay::seeds("tokenizer_json"), 3, 40);
}

#[test]
fn tiktoken() {
    replay("tiktoken", &replay::seeds("tiktoken"), 2, 100);
}

#[test]
fn gguf() {
    replay("gguf", &replay::seeds("gguf"), 2, 100);
}

#[test]
fn matcher() {
    replay("matcher", &replay::seeds("matcher"), 13, 10);
}
