//! `tokensieve generate`: a real model answering under a constraint, on the
//! CPU. The model is a quantized GGUF run by candle ([`model`]); the loop
//! (mask, apply, sample, accept, jump-forward) is model-independent
//! ([`decoder`]); the vocabulary comes from the GGUF's own tokenizer
//! metadata (`tokensieve::gguf`) or from `--tokenizer`.

pub mod decoder;
pub mod model;

use crate::common::{self, BadInput};
use crate::mask::MaskArgs;
use clap::Args;
use decoder::{DecodeOptions, Encoder, Sampling, StopReason};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokensieve::gguf::GgufTokenizer;
use tokensieve::hf::HfTokenizer;
use tokensieve::{ConstraintSpec, SpecOptions, Whitespace};

/// The model `scripts/fetch-model.sh` fetches.
pub const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The model cache folder: `$TOKENSIEVE_MODELS`, else `~/.cache/tokensieve/models`.
pub fn model_dir() -> PathBuf {
    match std::env::var_os("TOKENSIEVE_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| ".".into()))
            .join(".cache/tokensieve/models"),
    }
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("spec").required(true).args(["schema", "json", "regex", "choice", "grammar", "structural_tag"])))]
pub struct GenerateArgs {
    /// Backend name (see `tokensieve backends`).
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// A JSON Schema file (the output is checked against it with the
    /// `jsonschema` crate before exit: 0 valid, 1 not).
    #[arg(long)]
    pub schema: Option<String>,
    /// Any JSON object.
    #[arg(long)]
    pub json: bool,
    /// A regular expression the whole output must match.
    #[arg(long)]
    pub regex: Option<String>,
    /// One allowed answer (repeat the flag for each choice).
    #[arg(long)]
    pub choice: Vec<String>,
    /// An EBNF/GBNF grammar file.
    #[arg(long)]
    pub grammar: Option<String>,
    /// A structural tag as JSON (see `tokensieve mask --help`).
    #[arg(long)]
    pub structural_tag: Option<String>,
    /// Root rule of --grammar.
    #[arg(long, default_value = "root")]
    pub root: String,
    /// Whitespace in JSON: compact (default here: fewer tokens) or any.
    #[arg(long, default_value = "compact", value_parser = ["any", "compact"])]
    pub whitespace: String,
    /// Bound recursive schemas / --json to this nesting depth (regex backend).
    #[arg(long)]
    pub max_depth: Option<u32>,
    /// A backend knob, KEY=VALUE (repeatable).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Stop sampling once the output has this many tokens (forced ones
    /// included; a jump-forward under way may end past it).
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Nucleus sampling mass (with --temperature > 0).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Sample every token, even where the grammar is certain of the next bytes.
    #[arg(long)]
    pub no_jump_forward: bool,
    /// Feed PROMPT as is, without the model's chat template.
    #[arg(long)]
    pub no_chat_template: bool,
    /// A GGUF model (default: SmolLM2-135M-Instruct from scripts/fetch-model.sh).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The model's tokenizer.json, instead of the GGUF's own tokenizer.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Where the mask is applied to the logits: cpu, or wgpu / cuda when the
    /// CLI is built with that feature (the logits live on the host either way).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "wgpu", "cuda"])]
    pub device: String,
    /// Only the final report on stderr, no loading messages.
    #[arg(long, short)]
    pub quiet: bool,
    /// The user's message.
    pub prompt: String,
}

impl GenerateArgs {
    fn constraint(&self) -> Result<tokensieve::Constraint, BadInput> {
        // The same flags as `mask`: one place turns them into a constraint.
        let as_mask = MaskArgs {
            backend: self.backend.clone(),
            tokenizer: String::new(),
            schema: self.schema.clone(),
            json: self.json,
            regex: self.regex.clone(),
            choice: self.choice.clone(),
            grammar: self.grammar.clone(),
            structural_tag: self.structural_tag.clone(),
            root: self.root.clone(),
            whitespace: self.whitespace.clone(),
            strict: false,
            max_depth: self.max_depth,
            vocab_size: None,
            options: Vec::new(),
            text: String::new(),
        };
        let c = as_mask.constraint()?;
        let options = SpecOptions {
            whitespace: if self.whitespace == "any" {
                Whitespace::Any
            } else {
                Whitespace::Compact
            },
            ..c.options.clone()
        };
        Ok(tokensieve::Constraint::with_options(c.spec, options))
    }
}

struct HfEncoder<'a>(&'a HfTokenizer);

impl Encoder for HfEncoder<'_> {
    fn encode(&self, text: &[u8]) -> Option<Vec<u32>> {
        self.0.encode(std::str::from_utf8(text).ok()?).ok()
    }
}

/// The ChatML conversation SmolLM2, Qwen and others are trained on, with the
/// template's own default system message when it has one.
pub fn chat_prompt(
    tok: &HfTokenizer,
    gguf: &GgufTokenizer,
    prompt: &str,
) -> Result<Option<Vec<u32>>, BadInput> {
    let template = gguf.chat_template.as_deref().unwrap_or("");
    let (Some(start), Some(end)) = (
        tok.token_to_id("<|im_start|>"),
        tok.token_to_id("<|im_end|>"),
    ) else {
        return Ok(None);
    };
    if !template.is_empty() && !template.contains("<|im_start|>") {
        return Ok(None);
    }
    let system = template
        .split_once("<|im_start|>system\n")
        .and_then(|(_, rest)| {
            let text = rest.split_once("<|im_end|>")?.0;
            (!text.contains("{{") && !text.contains("{%")).then_some(text)
        });
    let mut ids = Vec::new();
    let mut turn = |role: &str, text: Option<&str>| -> Result<(), BadInput> {
        ids.push(start);
        match text {
            Some(t) => {
                ids.extend(tok.encode(&format!("{role}\n{t}"))?);
                ids.push(end);
                ids.extend(tok.encode("\n")?);
            }
            None => ids.extend(tok.encode(&format!("{role}\n"))?),
        }
        Ok(())
    };
    if let Some(system) = system {
        turn("system", Some(system))?;
    }
    turn("user", Some(prompt))?;
    turn("assistant", None)?;
    Ok(Some(ids))
}

/// The mask device named by `--device`; one not compiled in is bad input.
fn mask_device(name: &str) -> Result<Box<dyn tokensieve::MaskDevice>, BadInput> {
    let unavailable = |e: tokensieve::DeviceError| BadInput(format!("--device {name}: {e}"));
    match name {
        "cpu" => Ok(Box::new(tokensieve::CpuDevice)),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(Box::new(
            tokensieve::wgpu::WgpuDevice::new().map_err(unavailable)?,
        )),
        #[cfg(feature = "cuda")]
        "cuda" => Ok(Box::new(
            tokensieve::cuda::CudaDevice::new(0).map_err(unavailable)?,
        )),
        other => {
            let _ = unavailable;
            Err(BadInput(format!(
                "--device {other} is not compiled in: build the CLI with --features {other}"
            )))
        }
    }
}

pub fn run(args: &GenerateArgs) -> anyhow::Result<u8> {
    let t0 = Instant::now();
    let model_path = match &args.model {
        Some(p) => p.clone(),
        None => {
            let p = model_dir().join(DEFAULT_MODEL);
            if !p.exists() {
                return Err(BadInput(format!(
                    "no model at {}: run scripts/fetch-model.sh (or pass --model PATH.gguf)",
                    p.display()
                ))
                .into());
            }
            p
        }
    };
    if !model_path.exists() {
        return Err(BadInput(format!("no model at {}", model_path.display())).into());
    }
    let shown = model_path.display().to_string();
    let gguf = GgufTokenizer::from_file(&model_path)?;
    let tok = match &args.tokenizer {
        Some(path) => common::load_tokenizer(path)?,
        None => HfTokenizer::from_gguf(&gguf, &shown)?,
    };
    let constraint = args.constraint()?;
    let device = mask_device(&args.device)?;
    let mut model = model::CandleModel::load(&model_path)?;
    let tok = if model.vocab_rows > tok.vocabulary().tokenizer_size() {
        tok.with_vocab_size(model.vocab_rows)?
    } else {
        tok
    };
    let vocab = Arc::new(tok.vocabulary().clone());
    let backend = tokensieve::create_backend(
        &args.backend,
        &common::backend_config(&args.options)?,
        vocab.clone(),
    )
    .map_err(BadInput::from)?;
    common::check_kind(backend.as_ref(), &constraint)?;
    let compile_start = Instant::now();
    let grammar = backend.compile(&constraint).map_err(BadInput::from)?;
    let compile_time = compile_start.elapsed();

    let prompt = match (
        args.no_chat_template,
        chat_prompt(&tok, &gguf, &args.prompt)?,
    ) {
        (false, Some(ids)) => ids,
        _ => {
            let mut ids = Vec::new();
            if gguf.add_bos_token == Some(true) {
                ids.extend(gguf.bos_token_id);
            }
            ids.extend(tok.encode(&args.prompt)?);
            ids
        }
    };
    if !args.quiet {
        eprintln!(
            "[tokensieve] {} ({} ids), backend {}, device {}, compiled in {:.1} ms; prompt {} tokens; ready in {:.2} s",
            model_path
                .file_name()
                .map(|f| f.to_string_lossy())
                .unwrap_or_default(),
            vocab.vocab_size(),
            backend.name(),
            device.name(),
            compile_time.as_secs_f64() * 1e3,
            prompt.len(),
            t0.elapsed().as_secs_f64()
        );
    }

    let options = DecodeOptions {
        max_tokens: args.max_tokens,
        jump_forward: !args.no_jump_forward,
        sampling: Sampling {
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
        },
    };
    let mut matcher = grammar.matcher();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let outcome = decoder::generate(
        &mut model,
        device.as_ref(),
        &HfEncoder(&tok),
        &vocab,
        &mut matcher,
        &prompt,
        &options,
        &mut |bytes| {
            let _ = out.write_all(bytes);
            let _ = out.flush();
        },
    )?;
    let _ = writeln!(out);
    drop(out);

    let n = outcome.tokens.len();
    let decode_time = outcome.model_time + outcome.mask_time;
    let tps = n as f64
        / (outcome.total_time - outcome.prompt_time)
            .as_secs_f64()
            .max(1e-9);
    eprintln!(
        "[tokensieve] {n} tokens ({} sampled, {} forced, {} boundaries retokenized) in {:.2} s: {tps:.1} tokens/s; \
         prompt {} tokens in {:.2} s; mask {:.1} µs/step ({:.2}% of decode); stop: {}",
        outcome.sampled,
        outcome.forced,
        outcome.retokenized,
        outcome.total_time.as_secs_f64(),
        prompt.len(),
        outcome.prompt_time.as_secs_f64(),
        outcome.mask_time.as_secs_f64() * 1e6 / outcome.forward_passes.max(1) as f64,
        100.0 * outcome.mask_time.as_secs_f64() / decode_time.as_secs_f64().max(1e-9),
        match outcome.stop {
            Some(StopReason::StopToken(id)) =>
                format!("{:?}", String::from_utf8_lossy(vocab.token_bytes(id))),
            _ => format!("--max-tokens {}", args.max_tokens),
        }
    );

    if outcome.stop == Some(StopReason::MaxTokens) && !matcher.is_accepting() {
        eprintln!(
            "[tokensieve] incomplete: --max-tokens {} reached before the output could end",
            args.max_tokens
        );
        return Ok(1);
    }
    if let ConstraintSpec::JsonSchema(schema) = &constraint.spec {
        return Ok(validate(schema, &outcome.text));
    }
    Ok(0)
}

/// Checks the output against the schema with an independent validator:
/// 0 valid, 1 not (which would be a bug in the backend).
fn validate(schema: &str, text: &[u8]) -> u8 {
    let schema: serde_json::Value = match serde_json::from_str(schema) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("[tokensieve] the schema is not JSON: {e}");
            return 1;
        }
    };
    let instance: serde_json::Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("[tokensieve] INVALID: the output is not JSON: {e}");
            return 1;
        }
    };
    match jsonschema::validator_for(&schema) {
        Err(e) => {
            eprintln!("[tokensieve] jsonschema cannot check this schema: {e}");
            1
        }
        Ok(v) => match v.validate(&instance) {
            Ok(()) => {
                eprintln!("[tokensieve] valid against the schema (jsonschema)");
                0
            }
            Err(e) => {
                eprintln!(
                    "[tokensieve] INVALID against the schema at {}: {e}",
                    e.instance_path()
                );
                1
            }
        },
    }
}
