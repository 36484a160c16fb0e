//! `tokensieve bench e2e`: what constraints cost a real model per output
//! token, and what jump-forward gives back. One model, fixed prompts (MaskBench
//! schemas turned into requests), greedy decoding; only the mode changes:
//! unconstrained (the `none` backend), constrained, constrained + jump-forward.
//! Each mode's peak resident memory is its own: the kernel's high-water mark
//! is reset before every request (Linux only; elsewhere the column says n/a).
//! `--plot` draws the table's per-token figures as bars, one panel each.

use super::inputs::collect_json_files;
use super::plot::{self, BarPanel};
use crate::common::{self, BadInput};
use crate::generate::decoder::{self, DecodeOptions, Encoder, Sampling};
use crate::generate::{self as generate_cmd, model::CandleModel};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokensieve::gguf::GgufTokenizer;
use tokensieve::hf::HfTokenizer;
use tokensieve::maskbench::MaskBenchFile;
use tokensieve::{Constraint, ConstraintSpec, SpecOptions, Whitespace};

#[derive(Args)]
pub struct E2eArgs {
    /// The constrained backend to measure.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// A GGUF model (default: the one scripts/fetch-model.sh fetches).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Schemas to use: the first N (by file name) that the backend compiles
    /// and whose schema text is at most --max-schema-bytes.
    #[arg(long, default_value_t = 8)]
    pub limit: usize,
    #[arg(long, default_value_t = 600)]
    pub max_schema_bytes: usize,
    /// Output tokens per request at most.
    #[arg(long, default_value_t = 96)]
    pub max_tokens: usize,
    /// Also draw the modes side by side into this SVG (time per output
    /// token, output tokens/s, time to first token, forced share, validity,
    /// peak memory).
    #[arg(long)]
    pub plot: Option<String>,
    /// MaskBench files or directories.
    #[arg(required = true)]
    pub inputs: Vec<String>,
}

struct HfEncoder<'a>(&'a HfTokenizer);
impl Encoder for HfEncoder<'_> {
    fn encode(&self, text: &[u8]) -> Option<Vec<u32>> {
        self.0.encode(std::str::from_utf8(text).ok()?).ok()
    }
}

#[derive(Default)]
struct Totals {
    requests: usize,
    tokens: usize,
    forced: usize,
    valid: usize,
    ttft: Duration,
    decode: Duration,
    mask: Duration,
    compile: Duration,
    /// Forward passes after the prompt's, and their time.
    passes: usize,
    model: Duration,
    /// Each request's peak resident set, MiB; `None` where it could not be
    /// reset or read.
    peaks: Vec<Option<f64>>,
}

impl Totals {
    fn output_tokens(&self) -> f64 {
        self.tokens.max(1) as f64
    }

    fn forced_pct(&self) -> f64 {
        100.0 * self.forced as f64 / self.output_tokens()
    }

    fn ttft_ms(&self) -> f64 {
        self.ttft.as_secs_f64() * 1e3 / self.requests.max(1) as f64
    }

    fn ms_per_output_token(&self) -> f64 {
        self.decode.as_secs_f64() * 1e3 / self.output_tokens()
    }

    fn output_tokens_per_s(&self) -> f64 {
        self.output_tokens() / self.decode.as_secs_f64().max(1e-9)
    }

    fn valid_pct(&self) -> f64 {
        100.0 * self.valid as f64 / self.requests.max(1) as f64
    }

    /// The mode's peak resident set: the largest of its requests', unknown
    /// if any of them is (a max over part of the requests would understate it).
    fn peak_mib(&self) -> Option<f64> {
        let known: Vec<f64> = self.peaks.iter().copied().collect::<Option<_>>()?;
        known.into_iter().reduce(f64::max)
    }
}

const MODES: [(&str, bool, bool); 3] = [
    ("unconstrained", false, false),
    ("constrained", true, false),
    ("constrained + jump-forward", true, true),
];

pub fn run(args: &E2eArgs) -> anyhow::Result<u8> {
    if let Some(svg) = &args.plot {
        // Before minutes of model time, not after. Appending leaves a chart
        // from an earlier run intact until this one has its numbers.
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(svg)
            .map_err(|e| BadInput(format!("cannot write --plot {svg}: {e}")))?;
    }
    let model_path = args
        .model
        .clone()
        .unwrap_or_else(|| generate_cmd::model_dir().join(generate_cmd::DEFAULT_MODEL));
    if !model_path.exists() {
        return Err(BadInput(format!(
            "no model at {}: run scripts/fetch-model.sh (or pass --model PATH.gguf)",
            model_path.display()
        ))
        .into());
    }
    let shown = model_path.display().to_string();
    let gguf = GgufTokenizer::from_file(&model_path)?;
    let tok = HfTokenizer::from_gguf(&gguf, &shown)?;
    let mut model = CandleModel::load(&model_path)?;
    let tok = if model.vocab_rows > tok.vocabulary().tokenizer_size() {
        tok.with_vocab_size(model.vocab_rows)?
    } else {
        tok
    };
    let vocab = Arc::new(tok.vocabulary().clone());
    let config = common::backend_config(&[])?;
    let backend = tokensieve::create_backend(&args.backend, &config, vocab.clone())?;
    let none = tokensieve::create_backend("none", &config, vocab.clone())?;
    let options = SpecOptions {
        whitespace: Whitespace::Compact,
        ..Default::default()
    };

    // Pick the schemas: the first that fit and compile.
    let mut picked = Vec::new();
    for path in collect_json_files(&args.inputs)? {
        if picked.len() >= args.limit {
            break;
        }
        let file = MaskBenchFile::load(&path).map_err(BadInput)?;
        let schema = serde_json::to_string(&file.schema)?;
        if schema.len() > args.max_schema_bytes {
            continue;
        }
        let c =
            Constraint::with_options(ConstraintSpec::JsonSchema(schema.clone()), options.clone());
        if backend.compile(&c).is_ok() && jsonschema::validator_for(&file.schema).is_ok() {
            picked.push((file.id, file.schema, c));
        }
    }
    if picked.is_empty() {
        return Err(BadInput("no schema fits --max-schema-bytes and compiles".into()).into());
    }
    eprintln!(
        "[e2e] {} schemas, {} modes, greedy, --max-tokens {}",
        picked.len(),
        MODES.len(),
        args.max_tokens
    );

    let mut totals: Vec<Totals> = MODES.iter().map(|_| Totals::default()).collect();
    let mut process_peak = vm_hwm_mib();
    for (id, schema, constraint) in &picked {
        let text = format!(
            "Reply with only a JSON object that matches this JSON Schema, no prose:\n{}",
            serde_json::to_string(schema)?
        );
        let prompt = generate_cmd::chat_prompt(&tok, &gguf, &text)?
            .ok_or_else(|| BadInput(format!("{shown}: no ChatML template")))?;
        let validator = jsonschema::validator_for(schema)?;
        for (m, &(mode, constrained, jump)) in MODES.iter().enumerate() {
            // The model is loaded and stays: each request's peak is measured
            // from what is resident now. Reading before the reset keeps the
            // process-wide peak exact.
            process_peak = max_known(process_peak, vm_hwm_mib());
            let reset = reset_vm_hwm();
            let t = Instant::now();
            let grammar = if constrained {
                backend.compile(constraint)?
            } else {
                none.compile(&Constraint::new(ConstraintSpec::JsonObject))?
            };
            let compile = t.elapsed();
            let mut matcher = grammar.matcher();
            let opts = DecodeOptions {
                max_tokens: args.max_tokens,
                jump_forward: jump,
                sampling: Sampling {
                    temperature: 0.0,
                    top_p: 1.0,
                    seed: 0,
                },
            };
            let out = decoder::generate(
                &mut model,
                &tokensieve::CpuDevice,
                &HfEncoder(&tok),
                &vocab,
                &mut matcher,
                &prompt,
                &opts,
                &mut |_| {},
            )?;
            let peak = if reset { vm_hwm_mib() } else { None };
            process_peak = max_known(process_peak, peak);
            let valid = serde_json::from_slice::<serde_json::Value>(&out.text)
                .is_ok_and(|v| validator.is_valid(&v));
            let tot = &mut totals[m];
            tot.requests += 1;
            tot.tokens += out.tokens.len();
            tot.forced += out.forced;
            tot.valid += valid as usize;
            tot.ttft += compile + out.prompt_time;
            tot.decode += out.total_time - out.prompt_time;
            tot.mask += out.mask_time;
            tot.compile += compile;
            tot.passes += out.forward_passes.saturating_sub(1);
            tot.model += out.model_time;
            tot.peaks.push(peak);
            eprintln!(
                "[e2e] {id} {mode}: {} tokens ({} forced), {:.1} tokens/s, {}",
                out.tokens.len(),
                out.forced,
                out.tokens.len() as f64
                    / (out.total_time - out.prompt_time).as_secs_f64().max(1e-9),
                if valid { "valid" } else { "INVALID" }
            );
        }
    }

    println!(
        "| mode | requests | output tokens | forced share | TTFT mean ms | time per output token ms | output tokens/s | forward ms/step | mask µs/step | valid | peak memory MiB |"
    );
    println!("|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (t, (mode, _, _)) in totals.iter().zip(MODES) {
        println!(
            "| {mode} | {} | {} | {:.1}% | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {}/{} | {} |",
            t.requests,
            t.tokens,
            t.forced_pct(),
            t.ttft_ms(),
            t.ms_per_output_token(),
            t.output_tokens_per_s(),
            t.model.as_secs_f64() * 1e3 / t.passes.max(1) as f64,
            t.mask.as_secs_f64() * 1e6 / (t.passes + t.requests).max(1) as f64,
            t.valid,
            t.requests,
            t.peak_mib()
                .map_or_else(|| "n/a".to_string(), |mib| format!("{mib:.0}"))
        );
    }
    if let Some(peak) = max_known(process_peak, vm_hwm_mib()) {
        println!("\npeak resident memory of the process: {peak:.0} MiB");
    }
    if let Some(svg) = &args.plot {
        let model_name = model_path
            .file_name()
            .map_or(shown.clone(), |n| n.to_string_lossy().into_owned());
        let caption = format!(
            "tokensieve bench e2e: {model_name}, {}, {} MaskBench schema{}, greedy, --max-tokens {}",
            args.backend,
            picked.len(),
            if picked.len() == 1 { "" } else { "s" },
            args.max_tokens
        );
        draw(svg, &caption, &totals).map_err(|e| BadInput(format!("cannot draw {svg}: {e}")))?;
        eprintln!("plot -> {svg}");
    }
    Ok(0)
}

fn draw(svg: &str, caption: &str, totals: &[Totals]) -> Result<(), Box<dyn std::error::Error>> {
    let each = |f: fn(&Totals) -> f64| totals.iter().map(|t| Some(f(t))).collect();
    let panels = [
        BarPanel {
            title: "time per output token",
            y_desc: "ms (lower is better)",
            values: each(Totals::ms_per_output_token),
            decimals: 1,
            full_scale: None,
        },
        BarPanel {
            title: "output tokens/s",
            y_desc: "tokens/s (higher is better)",
            values: each(Totals::output_tokens_per_s),
            decimals: 1,
            full_scale: None,
        },
        BarPanel {
            title: "time to first token (mean)",
            y_desc: "ms, prefill + compile",
            values: each(Totals::ttft_ms),
            decimals: 0,
            full_scale: None,
        },
        BarPanel {
            title: "forced tokens (jump-forward)",
            y_desc: "% of output tokens",
            values: each(Totals::forced_pct),
            decimals: 1,
            full_scale: Some(100.0),
        },
        BarPanel {
            title: "valid outputs (jsonschema)",
            y_desc: "% of requests",
            values: each(Totals::valid_pct),
            decimals: 0,
            full_scale: Some(100.0),
        },
        BarPanel {
            title: "peak resident memory",
            y_desc: "MiB, model included",
            values: totals.iter().map(Totals::peak_mib).collect(),
            decimals: 0,
            full_scale: None,
        },
    ];
    let modes: Vec<&str> = MODES.iter().map(|(mode, _, _)| *mode).collect();
    plot::draw_bars(svg, caption, &modes, &panels)
}

/// The peak resident set since the process started or since the last
/// [`reset_vm_hwm`] (Linux `VmHWM`), MiB.
fn vm_hwm_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Resets the peak resident set to the current one (Linux 4.0+: "5" to
/// `/proc/self/clear_refs`); false where that is not possible.
fn reset_vm_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn max_known(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
