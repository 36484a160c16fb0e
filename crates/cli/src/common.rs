//! What every subcommand shares: loading a tokenizer, creating a backend,
//! turning command-line flags into a constraint, and the "bad input" error
//! that exits with code 2.

use std::fmt;
use std::sync::Arc;
use tokensieve::gguf::GgufTokenizer;
use tokensieve::hf::HfTokenizer;
use tokensieve::{BackendConfig, Constraint, GrammarBackend, GrammarError};

/// Bad input: printed as one line on stderr, exit code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

impl From<GrammarError> for BadInput {
    fn from(e: GrammarError) -> Self {
        BadInput(e.to_string())
    }
}

/// A tokenizer from a Hugging Face `tokenizer.json`, or from the metadata of
/// a GGUF model file (such as the one `scripts/fetch-model.sh` brings),
/// told apart by the file's first bytes.
pub fn load_tokenizer(path: &str) -> Result<HfTokenizer, BadInput> {
    if is_gguf(path) {
        let gguf = GgufTokenizer::from_file(path)?;
        return HfTokenizer::from_gguf(&gguf, path).map_err(BadInput::from);
    }
    HfTokenizer::from_file(path).map_err(BadInput::from)
}

/// Whether `path` starts with GGUF's magic bytes (a file that cannot be
/// read is left to the tokenizer.json loader, whose error names it).
fn is_gguf(path: &str) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"GGUF")
}

/// Loads a tokenizer and, when given, sets the model's vocab size (logit
/// rows padded beyond the tokenizer: those ids are always masked).
pub fn load_tokenizer_sized(
    path: &str,
    vocab_size: Option<usize>,
) -> Result<HfTokenizer, BadInput> {
    let tok = load_tokenizer(path)?;
    match vocab_size {
        Some(n) => tok.with_vocab_size(n).map_err(BadInput::from),
        None => Ok(tok),
    }
}

/// `--option KEY=VALUE` flags (repeatable) into a [`BackendConfig`]: each
/// lands in `options` under KEY; a backend refuses a KEY it does not read.
pub fn backend_config(options: &[String]) -> Result<BackendConfig, BadInput> {
    let mut config = BackendConfig::default();
    for option in options {
        let Some((key, value)) = option.split_once('=') else {
            return Err(BadInput(format!(
                "--option {option:?}: expected KEY=VALUE (e.g. walk_cache_bytes=0)"
            )));
        };
        config
            .options
            .insert(key.trim().into(), value.trim().into());
    }
    Ok(config)
}

pub fn make_backend(
    name: &str,
    config: &BackendConfig,
    tok: &HfTokenizer,
) -> Result<Arc<dyn GrammarBackend>, BadInput> {
    let vocab = Arc::new(tok.vocabulary().clone());
    tokensieve::create_backend(name, config, vocab).map_err(BadInput::from)
}

/// [`make_backend`] for the benchmarks: a compile error is the named
/// backend's alone (its time too), no other backend is tried to name those
/// that take the constraint.
pub fn make_bench_backend(
    name: &str,
    config: &BackendConfig,
    tok: &HfTokenizer,
) -> Result<Arc<dyn GrammarBackend>, BadInput> {
    let vocab = Arc::new(tok.vocabulary().clone());
    tokensieve::create_backend_alone(name, config, vocab).map_err(BadInput::from)
}

/// `n` and a noun, singular for one: "1 token", "3 tokens".
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Reads a file given on the command line, naming it in the error.
pub fn read_file(what: &str, path: &str) -> Result<String, BadInput> {
    std::fs::read_to_string(path).map_err(|e| BadInput(format!("cannot read {what} {path}: {e}")))
}

/// Checks that `constraint` is a kind `backend` supports, before compiling.
pub fn check_kind(backend: &dyn GrammarBackend, constraint: &Constraint) -> Result<(), BadInput> {
    let kind = constraint.kind();
    if backend.supported_kinds().contains(&kind) {
        Ok(())
    } else {
        Err(backend.unsupported_spec(kind).into())
    }
}
