//! `tokensieve mask`: tokenize a text, walk it through a matcher, report.

use crate::common::{self, BadInput};
use clap::Args;
use tokensieve::bitmask::{row_count_allowed, row_is_allowed};
use tokensieve::{Constraint, ConstraintSpec, SpecOptions, Whitespace};

#[derive(Args)]
#[command(group(clap::ArgGroup::new("spec").required(true).args(["schema", "json", "regex", "choice", "grammar", "structural_tag"])))]
pub struct MaskArgs {
    /// Backend name (see `tokensieve backends`).
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// A Hugging Face tokenizer.json, or a GGUF model file (its tokenizer).
    #[arg(long)]
    pub tokenizer: String,
    /// A JSON Schema file.
    #[arg(long)]
    pub schema: Option<String>,
    /// Any JSON object.
    #[arg(long)]
    pub json: bool,
    /// A regular expression the whole text must match (may begin with `-`).
    #[arg(long, allow_hyphen_values = true)]
    pub regex: Option<String>,
    /// One allowed string (repeat the flag for each choice; may begin with
    /// `-`).
    #[arg(long, allow_hyphen_values = true)]
    pub choice: Vec<String>,
    /// An EBNF/GBNF grammar file.
    #[arg(long)]
    pub grammar: Option<String>,
    /// A structural tag as JSON: `{"triggers": ["<function="], "tags":
    /// [{"begin": "<function=f>", "content": {"json_schema": "..."}, "end":
    /// "</function>"}]}` (free text; each trigger opens one of its tags).
    #[arg(long)]
    pub structural_tag: Option<String>,
    /// Root rule of --grammar.
    #[arg(long, default_value = "root")]
    pub root: String,
    /// Whitespace in JSON: any (default) or compact.
    #[arg(long, default_value = "any", value_parser = ["any", "compact"])]
    pub whitespace: String,
    /// Strict mode: no additional properties unless the schema allows them.
    #[arg(long)]
    pub strict: bool,
    /// Bound recursive schemas / --json to this nesting depth (regex backend).
    #[arg(long)]
    pub max_depth: Option<u32>,
    /// The model's vocab size (logit rows), when larger than the tokenizer's.
    #[arg(long)]
    pub vocab_size: Option<usize>,
    /// A backend knob, KEY=VALUE (repeatable), e.g. `walk_cache_bytes=0`
    /// for regex-fsm (the knobs are listed in its `RegexFsmConfig`).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// The text to walk through the constraint. It may begin with `-` (a
    /// negative number, a markdown list): `--text -1` and `--text=-1` both
    /// read it as the text, not as a flag.
    #[arg(long, allow_hyphen_values = true)]
    pub text: String,
}

impl MaskArgs {
    pub fn constraint(&self) -> Result<Constraint, BadInput> {
        let spec = if let Some(path) = &self.schema {
            ConstraintSpec::JsonSchema(common::read_file("schema", path)?)
        } else if self.json {
            ConstraintSpec::JsonObject
        } else if let Some(r) = &self.regex {
            ConstraintSpec::Regex(r.clone())
        } else if !self.choice.is_empty() {
            ConstraintSpec::Choice(self.choice.clone())
        } else if let Some(path) = &self.grammar {
            ConstraintSpec::Ebnf {
                grammar: common::read_file("grammar", path)?,
                root: self.root.clone(),
            }
        } else if let Some(path) = &self.structural_tag {
            let text = common::read_file("structural tag", path)?;
            ConstraintSpec::StructuralTag(
                serde_json::from_str(&text)
                    .map_err(|e| BadInput(format!("structural tag {path}: {e}")))?,
            )
        } else {
            return Err(BadInput("no constraint given".into()));
        };
        let options = SpecOptions {
            whitespace: if self.whitespace == "compact" {
                Whitespace::Compact
            } else {
                Whitespace::Any
            },
            strict: self.strict,
            max_depth: self.max_depth,
        };
        Ok(Constraint::with_options(spec, options))
    }
}

pub fn run(args: &MaskArgs) -> anyhow::Result<u8> {
    let tok = common::load_tokenizer_sized(&args.tokenizer, args.vocab_size)?;
    let backend =
        common::make_backend(&args.backend, &common::backend_config(&args.options)?, &tok)?;
    let constraint = args.constraint()?;
    common::check_kind(backend.as_ref(), &constraint)?;
    let grammar = backend.compile(&constraint).map_err(BadInput::from)?;
    let tokens = tok.encode(&args.text)?;
    let vocab = backend.vocabulary().clone();
    let mut matcher = grammar.matcher();
    let mut row = vec![0u32; vocab.mask_words()];
    for (i, &t) in tokens.iter().enumerate() {
        matcher.fill_bitmask(&mut row);
        let allowed = row_count_allowed(&row, vocab.vocab_size());
        let shown = String::from_utf8_lossy(vocab.token_bytes(t));
        if !row_is_allowed(&row, t) {
            println!(
                "rejected at token {i} (id {t}, {shown:?}): {allowed} tokens were allowed there"
            );
            return Ok(1);
        }
        if let Err(e) = matcher.accept_token(t) {
            println!("engine error at token {i} (id {t}, {shown:?}): in the mask but refused: {e}");
            return Ok(1);
        }
    }
    if !matcher.is_accepting() {
        println!(
            "rejected at the end: {} allowed, but the output may not end here",
            common::count(tokens.len(), "token")
        );
        return Ok(1);
    }
    println!("accepted: {}", common::count(tokens.len(), "token"));
    Ok(0)
}
