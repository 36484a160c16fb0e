//! Writes the masks the Rust API gives at every prefix of each accepted
//! string of the conformance corpus, for the pytest suite to compare the
//! Python bindings against bit for bit.
//!
//! Usage: `conformance_masks CORPUS.json TOKENIZER.json BACKEND OUT.bin`.
//! stdout: one JSON line per (case, accepted string) with the tokens the
//! tokenizer gives, the row in OUT.bin of the mask before each token and of
//! the final mask (OUT.bin holds rows of `ceil(vocab_size / 32)` u32,
//! little-endian), whether each token was accepted, and whether the end was
//! allowed. Cases the backend cannot compile are listed with their error.

use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use tokensieve::hf::HfTokenizer;
use tokensieve::{BackendConfig, Constraint, ConstraintSpec};

fn spec_of(v: &Value) -> Result<Constraint, String> {
    let (kind, arg) = v
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or("spec is not an object")?;
    let text = |v: &Value| v.as_str().map(str::to_string).ok_or("expected a string");
    Ok(match kind.as_str() {
        "regex" => Constraint::regex(text(arg)?),
        "choice" => Constraint::choice(
            arg.as_array()
                .ok_or("choice is not a list")?
                .iter()
                .map(text)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        "json_schema" => Constraint::new(ConstraintSpec::JsonSchema(arg.to_string())),
        "json_object" => Constraint::new(ConstraintSpec::JsonObject),
        "structural_tag" => {
            Constraint::new(serde_json::from_value(v.clone()).map_err(|e| e.to_string())?)
        }
        "ebnf" => Constraint::ebnf(text(&arg["grammar"])?, text(&arg["root"])?),
        other => return Err(format!("unknown spec kind {other}")),
    })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [corpus, tokenizer, backend, out] = args.as_slice() else {
        anyhow::bail!("usage: conformance_masks CORPUS.json TOKENIZER.json BACKEND OUT.bin");
    };
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(corpus)?)?;
    let tok = HfTokenizer::from_file(tokenizer)?;
    let vocab = Arc::new(tok.vocabulary().clone());
    let backend = tokensieve::create_backend(backend, &BackendConfig::default(), vocab.clone())?;
    let mut bin = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut stdout = std::io::stdout().lock();
    let mut rows_written = 0usize;
    let mut row = vec![0u32; vocab.mask_words()];
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let constraint = spec_of(&case["spec"]).map_err(anyhow::Error::msg)?;
        let grammar = match backend.compile(&constraint) {
            Ok(g) => g,
            Err(e) => {
                writeln!(
                    stdout,
                    "{}",
                    json!({"case": name, "compile_error": e.to_string()})
                )?;
                continue;
            }
        };
        for text in case["accept"].as_array().into_iter().flatten() {
            let text = text.as_str().unwrap_or_default();
            let tokens = match tok.encode(text) {
                Ok(t) => t,
                Err(e) => {
                    writeln!(
                        stdout,
                        "{}",
                        json!({"case": name, "text": text, "encode_error": e.to_string()})
                    )?;
                    continue;
                }
            };
            let mut m = grammar.matcher();
            let first_row = rows_written;
            let mut accepted = Vec::new();
            for &t in &tokens {
                m.fill_bitmask(&mut row);
                for w in &row {
                    bin.write_all(&w.to_le_bytes())?;
                }
                rows_written += 1;
                let ok = m.accept_token(t).is_ok();
                accepted.push(ok);
                if !ok {
                    break;
                }
            }
            m.fill_bitmask(&mut row);
            for w in &row {
                bin.write_all(&w.to_le_bytes())?;
            }
            rows_written += 1;
            writeln!(
                stdout,
                "{}",
                json!({"case": name, "text": text, "tokens": tokens, "first_row": first_row,
                       "rows": rows_written - first_row, "accepted": accepted,
                       "end": m.is_accepting()})
            )?;
        }
    }
    bin.flush()?;
    Ok(())
}
