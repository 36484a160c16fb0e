//! What the front end costs and writes: lowers the JSON Schema of each
//! MaskBench file given (context-free, as the earley backend takes it) and
//! prints the lowering's and the piece split's time, the regex text's size
//! and its rules; with `SHOW=1`, the text itself; with `PIECES=1`, the
//! pieces the split makes of it (regexes between slashes, rule references).
//!
//! `cargo run --release -p tokensieve-json-schema --example dump_lowering -- FILE...`

use std::time::Instant;

use tokensieve_core::SpecOptions;
use tokensieve_json_schema::{LoweringLimits, schema_to_grammar};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The earley backend's limits (counted repetitions to 65,535).
    let limits = LoweringLimits {
        max_repeat: u16::MAX as u32,
        max_expanded_len: 1 << 40,
        ..LoweringLimits::default()
    };
    for path in std::env::args().skip(1) {
        let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        let schema = file["schema"].to_string();
        let t = Instant::now();
        let lowered = schema_to_grammar(&schema, &SpecOptions::default(), 20, &limits);
        let lower = t.elapsed();
        let g = match lowered {
            Ok(g) => g,
            Err(e) => {
                println!("{path}: {e}");
                continue;
            }
        };
        let t = Instant::now();
        let pieces = g.to_pieces();
        let split = t.elapsed();
        let text: usize = g.root.len() + g.rules.iter().map(String::len).sum::<usize>();
        println!(
            "{path}: lower {lower:?}, split {split:?} ({}), {text} bytes of regex, {} rules",
            if pieces.is_ok() { "ok" } else { "error" },
            g.rules.len()
        );
        if let (Some(_), Ok(p)) = (std::env::var_os("PIECES"), &pieces) {
            for (i, rule) in p.rules.iter().enumerate() {
                for alt in rule {
                    let parts: Vec<String> = alt
                        .iter()
                        .map(|piece| match piece {
                            tokensieve_grammar::Piece::Regex { regex, .. } => {
                                format!("/{regex}/")
                            }
                            other => format!("{other:?}"),
                        })
                        .collect();
                    println!("piece-rule {i}: {}", parts.join(" "));
                }
            }
        }
        if std::env::var_os("SHOW").is_some() {
            println!("root {}", g.root);
            for (i, rule) in g.rules.iter().enumerate() {
                println!("rule {i} {rule}");
            }
        }
    }
    Ok(())
}
