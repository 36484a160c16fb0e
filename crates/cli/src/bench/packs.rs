//! `tokensieve bench packs`: pack mode of the MaskBench contract, for an
//! external driver (peerbench's `run.py --engine cmd:...`). stdout carries
//! only JSON lines, each flushed: `ready`, then per pack `compiled` and the
//! result record. No time limits (the driver kills the process), no caught
//! panics (a panic ends the process and the driver records a crash).

use super::record::test_json;
use crate::common::{self, BadInput};
use clap::Args;
use serde_json::{Value, json};
use std::io::Write;
use tokensieve::GrammarBackend;
use tokensieve::bench_protocol::{WalkOptions, compile_timed, walk};

#[derive(Args)]
pub struct PacksArgs {
    /// Backend name (see `tokensieve backends`).
    #[arg(long)]
    pub backend: String,
    /// A Hugging Face tokenizer.json or GGUF model file (the one the packs were tokenized with).
    #[arg(long)]
    pub tokenizer: String,
    /// A backend knob, KEY=VALUE (repeatable), e.g. `walk_cache_bytes=0`
    /// for regex-fsm (the knobs are listed in its `RegexFsmConfig`).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Pack files: `{"id", "schema", "tests": [{"valid", "text", "tokens"}]}`.
    pub packs: Vec<String>,
}

/// One pack, as the driver wrote it.
struct Pack {
    id: String,
    schema: Value,
    tests: Vec<(bool, Vec<u32>)>,
}

fn parse_pack(path: &str) -> Result<Pack, BadInput> {
    let text = common::read_file("pack", path)?;
    let bad = |what: &str| BadInput(format!("malformed pack {path}: {what}"));
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(&format!("not JSON: {e}")))?;
    let id = v["id"]
        .as_str()
        .ok_or_else(|| bad("no string \"id\""))?
        .to_string();
    let schema = v
        .get("schema")
        .cloned()
        .ok_or_else(|| bad("no \"schema\""))?;
    let tests = v["tests"]
        .as_array()
        .ok_or_else(|| bad("no \"tests\" array"))?
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let valid = t["valid"]
                .as_bool()
                .ok_or_else(|| bad(&format!("test {k} has no boolean \"valid\"")))?;
            let tokens = t["tokens"]
                .as_array()
                .ok_or_else(|| bad(&format!("test {k} has no \"tokens\" array")))?
                .iter()
                .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
                .collect::<Option<Vec<u32>>>()
                .ok_or_else(|| bad(&format!("test {k}: a token is not a u32 id")))?;
            Ok((valid, tokens))
        })
        .collect::<Result<Vec<_>, BadInput>>()?;
    Ok(Pack { id, schema, tests })
}

fn emit(out: &mut impl Write, v: &Value) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, v)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

pub fn run(args: &PacksArgs) -> anyhow::Result<u8> {
    let tok = common::load_tokenizer(&args.tokenizer)?;
    let backend =
        common::make_bench_backend(&args.backend, &common::backend_config(&args.options)?, &tok)?;
    // Checked before `ready`: a malformed pack is bad input, not a crash.
    let packs = args
        .packs
        .iter()
        .map(|p| parse_pack(p))
        .collect::<Result<Vec<_>, _>>()?;
    run_packs(backend.as_ref(), packs, &mut std::io::stdout().lock())?;
    Ok(0)
}

/// The protocol's stdout, written to `out`.
fn run_packs(
    backend: &dyn GrammarBackend,
    packs: Vec<Pack>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let vocab = backend.vocabulary().clone();
    let mut row = vec![0u32; vocab.mask_words()];
    emit(
        out,
        &json!({"event": "ready", "engine": backend.name(), "version": env!("CARGO_PKG_VERSION")}),
    )?;
    for pack in packs {
        let schema_text = pack.schema.to_string();
        let (compiled, elapsed) = compile_timed(backend, &schema_text);
        let compile_us = elapsed.as_micros() as u64;
        let compile_error = compiled.as_ref().err().map(|e| e.to_string());
        emit(
            out,
            &json!({"event": "compiled", "id": pack.id, "compile_us": compile_us, "compile_error": compile_error}),
        )?;
        let tests: Vec<Value> = match &compiled {
            Ok(grammar) => pack
                .tests
                .iter()
                .map(|(valid, tokens)| {
                    test_json(
                        *valid,
                        &walk(
                            grammar.as_ref(),
                            &vocab,
                            tokens,
                            &mut row,
                            WalkOptions::default(),
                        ),
                    )
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        emit(
            out,
            &json!({"id": pack.id, "compile_us": compile_us, "compile_error": compile_error, "tests": tests}),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn write_pack(dir: &std::path::Path, name: &str, text: &str) -> String {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    #[test]
    fn speaks_the_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let vocab = Arc::new(tokensieve::vocab::fixtures::json_tiny());
        let tokens = vocab.encode_greedy(br#"{"a": 1}"#).unwrap();
        let pack = json!({"id": "X---1.json", "schema": {"type": "object"},
            "tests": [{"valid": true, "text": "{\"a\": 1}", "tokens": tokens}, {"valid": false, "tokens": [300000]}]});
        let p = write_pack(dir.path(), "p.json", &pack.to_string());
        let backend = tokensieve::create_backend("none", &Default::default(), vocab).unwrap();
        let mut out = Vec::new();
        run_packs(backend.as_ref(), vec![parse_pack(&p).unwrap()], &mut out).unwrap();
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["event"], "ready");
        assert_eq!(lines[0]["engine"], "none");
        assert_eq!(lines[1]["event"], "compiled");
        assert_eq!(lines[1]["id"], "X---1.json");
        assert!(lines[1]["compile_error"].is_null());
        let rec = &lines[2];
        assert_eq!(rec["id"], "X---1.json");
        assert!(rec.get("event").is_none());
        let tests = rec["tests"].as_array().unwrap();
        assert_eq!(tests[0]["accepted"], true);
        assert_eq!(tests[0]["end_ok"], true);
        assert_eq!(tests[0]["tokens"], tokens.len());
        assert_eq!(tests[0]["mask_ns"].as_array().unwrap().len(), tokens.len());
        // An id outside the vocabulary is never in a mask.
        assert_eq!(tests[1]["accepted"], false);
        assert_eq!(tests[1]["reason"], "token 0 (id 300000) not in mask");
        assert!(tests[1]["end_ok"].is_null());
    }

    #[test]
    fn malformed_packs_are_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        for (text, expect) in [
            ("not json", "not JSON"),
            (r#"{"schema": {}, "tests": []}"#, "no string \"id\""),
            (
                r#"{"id": "a", "schema": {}, "tests": [{"valid": true, "tokens": [-1]}]}"#,
                "not a u32",
            ),
            (
                r#"{"id": "a", "schema": {}, "tests": [{"tokens": [1]}]}"#,
                "boolean \"valid\"",
            ),
        ] {
            let p = write_pack(dir.path(), "bad.json", text);
            let err = parse_pack(&p).err().expect(text);
            assert!(
                err.0.contains(expect) && err.0.contains("bad.json"),
                "{}",
                err.0
            );
        }
        assert!(parse_pack("/nonexistent/pack.json").is_err());
    }
}
