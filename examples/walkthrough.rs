//! The whole constrained-decoding loop in one screen: compile a constraint,
//! then per step fill the mask, apply it to the logits, sample, accept.
//!
//! The "model" is a deterministic random logit generator, so the example runs
//! anywhere; whatever it proposes, the output is guaranteed to match the
//! constraint.
//!
//!     cargo run --example walkthrough                       # built-in tiny vocabulary
//!     cargo run --example walkthrough -- path/to/tokenizer.json

use std::sync::Arc;
use tokensieve::{
    BackendConfig, Constraint, ConstraintSpec, CpuDevice, LogitsMut, MaskDevice, SpecOptions,
    TokenBitmask, Vocabulary, Whitespace,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. A vocabulary: token id -> bytes, with stop tokens.
    let vocab: Arc<Vocabulary> = match std::env::args().nth(1) {
        Some(path) => Arc::new(tokensieve::hf::HfTokenizer::from_file(path)?.into_vocabulary()),
        None => Arc::new(tokensieve::vocab::fixtures::json_tiny()),
    };

    // 2. A backend (by name, from the registry) and a compiled constraint.
    let backend = tokensieve::create_backend("auto", &BackendConfig::default(), vocab.clone())?;
    let schema = r#"{"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 8},
                       "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"], "additionalProperties": false}"#;
    // Compact JSON (no whitespace), so jump-forward has certain bytes to offer.
    let options = SpecOptions {
        whitespace: Whitespace::Compact,
        ..Default::default()
    };
    let grammar = backend.compile(&Constraint::with_options(
        ConstraintSpec::JsonSchema(schema.into()),
        options,
    ))?;

    // 3. One matcher per request; one bitmask row per request in the batch.
    let mut matcher = grammar.matcher();
    let mut bitmask = TokenBitmask::new(1, vocab.vocab_size());
    let mut logits = vec![0f32; vocab.vocab_size()];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut output = Vec::new();
    let mut forced_bytes = 0;

    for _step in 0..200 {
        // The model's logits (here: noise).
        for x in logits.iter_mut() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            *x = (rng >> 40) as f32 / (1u64 << 24) as f32;
        }
        // Certain bytes can be appended without asking the model (jump-forward).
        let forced = matcher.jump_forward();
        if !forced.is_empty() {
            matcher.accept_bytes(&forced)?;
            output.extend_from_slice(&forced);
            forced_bytes += forced.len();
        }
        // Mask, apply, sample (greedy), accept.
        matcher.fill_bitmask(bitmask.row_mut(0));
        CpuDevice.apply_token_bitmask_inplace(
            LogitsMut::F32(&mut logits),
            vocab.vocab_size(),
            bitmask.as_slice(),
            None,
        )?;
        let token = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .expect("non-empty") as u32;
        matcher.accept_token(token)?;
        if matcher.is_terminated() {
            break;
        }
        output.extend_from_slice(vocab.token_bytes(token));
    }

    let text = String::from_utf8_lossy(&output);
    println!("{text}");
    let stats = matcher.stats();
    eprintln!(
        "compiled in {:?}; {forced_bytes} bytes by jump-forward; {} masks, mean {:?}, worst {:?}",
        stats.compile_time,
        stats.masks,
        stats.mask_time_total / stats.masks.max(1) as u32,
        stats.mask_time_max
    );
    Ok(())
}
