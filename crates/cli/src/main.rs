//! The `tokensieve` command.
//!
//! Exit codes: 0 success (for `mask`: accepted; `generate`: valid output), 1
//! rejected (`mask`) or invalid/incomplete output (`generate`), 2 bad
//! input (one line on stderr: missing file, malformed tokenizer/spec, unknown
//! backend, a spec kind the backend does not support).

#[cfg(feature = "mimalloc")]
mod alloc;
mod bench;
mod common;
#[cfg(feature = "generate")]
mod generate;
mod mask;

use clap::{Parser, Subcommand};
use common::BadInput;
use std::process::ExitCode;

/// mimalloc in place of the platform's allocator (feature `mimalloc`, on by
/// default): a big schema's compile makes and drops millions of small
/// syntax-tree nodes, and glibc's malloc spent about a third of it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: alloc::MiMalloc = alloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "tokensieve",
    version,
    about = "Constrained decoding: token masks from schemas, regexes, choices and grammars"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List registered backends and the constraint kinds each supports.
    Backends,
    /// Describe a tokenizer (tokenizer.json or GGUF) as JSON: size, type, stop and special tokens.
    Vocab {
        /// A Hugging Face tokenizer.json, or a GGUF model file (its tokenizer).
        #[arg(long)]
        tokenizer: String,
        /// The model's vocab size (logit rows), when larger than the tokenizer's.
        #[arg(long)]
        vocab_size: Option<usize>,
    },
    /// Walk a text through a constraint, token by token.
    Mask(mask::MaskArgs),
    #[cfg(feature = "generate")]
    /// Generate with a real model (a quantized GGUF, on the CPU) under a constraint.
    Generate(generate::GenerateArgs),
    /// Benchmarks and conformance runs (MaskBench, JSON-Schema-Test-Suite).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    #[cfg(feature = "mimalloc")]
    alloc::keep_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Backends => backends(),
        Command::Vocab {
            tokenizer,
            vocab_size,
        } => vocab(&tokenizer, vocab_size),
        Command::Mask(args) => mask::run(&args),
        #[cfg(feature = "generate")]
        Command::Generate(args) => generate::run(&args),
        Command::Bench(cmd) => bench::run(cmd),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if let Some(bad) = e.downcast_ref::<BadInput>() {
                eprintln!("error: {bad}");
                ExitCode::from(2)
            } else {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        }
    }
}

fn backends() -> anyhow::Result<u8> {
    // Kinds are a property of a backend instance; a tiny vocabulary is enough
    // to instantiate each one and ask.
    let vocab = std::sync::Arc::new(tokensieve::vocab::fixtures::json_tiny());
    for info in tokensieve::available_backends() {
        let kinds = match tokensieve::create_backend(&info.name, &Default::default(), vocab.clone())
        {
            Ok(b) => b
                .supported_kinds()
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(","),
            Err(e) => format!("(cannot instantiate: {e})"),
        };
        let aliases = if info.aliases.is_empty() {
            String::new()
        } else {
            format!(" (alias {})", info.aliases.join(", "))
        };
        println!("{}{aliases}\t{kinds}\t{}", info.name, info.description);
    }
    Ok(0)
}

fn vocab(path: &str, vocab_size: Option<usize>) -> anyhow::Result<u8> {
    let tok = common::load_tokenizer_sized(path, vocab_size)?;
    let v = tok.vocabulary();
    let stops: Vec<serde_json::Value> = v
        .stop_tokens()
        .iter()
        .map(
            |&id| serde_json::json!({"id": id, "text": String::from_utf8_lossy(v.token_bytes(id))}),
        )
        .collect();
    let out = serde_json::json!({
        "vocab_size": v.vocab_size(),
        "tokenizer_size": v.tokenizer_size(),
        "type": v.vocab_type().as_str(),
        "stop_tokens": stops,
        "special_tokens": v.special_count(),
        "padding_tokens": v.vocab_size() - v.tokenizer_size(),
        "prepends_space": tok.prepends_space(),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(0)
}
