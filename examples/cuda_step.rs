//! One constrained decoding step on a CUDA GPU, timed part by part: the mask
//! is filled on the CPU by a real backend for a real tokenizer, copied to the
//! GPU and applied there to device-resident logits, as an inference engine
//! whose model runs on the GPU would do it.
//!
//! The "model" is a random logit generator (its logits are copied to the GPU
//! before each step and that copy is not timed: a model on the GPU writes them
//! there). Each step then takes the greedy token from the masked logits read
//! back from the GPU, checks that the mask allowed it and feeds it to the
//! matcher, so the whole loop stays inside the constraint; the output is
//! checked against it at the end.
//!
//! Reported per step (median and maximum over the run's steps): `fill`, the
//! CPU filling one bitmask row; `apply`, from the bitmask copy's start to the
//! stream's synchronisation after the kernel (what the step waits for);
//! `kernel`, the kernel alone between two CUDA events.
//!
//! ```text
//! cargo run --release --features cuda --example cuda_step -- \
//!     TOKENIZER.json SCHEMA.json [BACKEND] [STEPS]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokensieve::cuda::CudaDevice;
use tokensieve::cuda::cudarc::driver::sys::CUevent_flags;
use tokensieve::{BackendConfig, Constraint, ConstraintSpec, Vocabulary};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: cuda_step TOKENIZER.json SCHEMA.json [BACKEND] [STEPS]";
    let tokenizer = args.next().ok_or(usage)?;
    let schema_path = args.next().ok_or(usage)?;
    let backend_name = args.next().unwrap_or_else(|| "auto".into());
    let steps: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(256);

    let vocab: Arc<Vocabulary> =
        Arc::new(tokensieve::hf::HfTokenizer::from_file(&tokenizer)?.into_vocabulary());
    let n = vocab.vocab_size();
    let schema = std::fs::read_to_string(&schema_path)?;
    let backend =
        tokensieve::create_backend(&backend_name, &BackendConfig::default(), vocab.clone())?;
    let t = Instant::now();
    let grammar = backend.compile(&Constraint::new(ConstraintSpec::JsonSchema(schema)))?;
    let compile = t.elapsed();

    let device = CudaDevice::new(0)?;
    let stream = device.stream().clone();
    let ctx = stream.context().clone();
    println!(
        "device {} {:?}; backend {backend_name}; vocab {n}; compile {compile:.2?}",
        device.device_name(),
        device.compute_capability()
    );
    let words = n.div_ceil(32);
    let mut row = vec![0u32; words];
    let mut logits_dev = stream.alloc_zeros::<f32>(n)?;
    let mut mask_dev = stream.alloc_zeros::<u32>(words)?;
    let mut logits = vec![0f32; n];
    let (start, end) = (
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?,
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?,
    );

    let mut matcher = grammar.matcher();
    let mut rng = tokensieve::testing::SplitMix64(42);
    let (mut fill, mut apply, mut kernel) = (Vec::new(), Vec::new(), Vec::new());
    let mut output = Vec::new();
    // Warm-up launch: module load and first-launch costs stay out of the figures.
    device.apply_inplace(&mut logits_dev, n, &mask_dev, None)?;
    device.synchronize()?;
    for _ in 0..steps {
        for x in logits.iter_mut() {
            *x = (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
        }
        stream.memcpy_htod(&logits, &mut logits_dev)?;
        stream.synchronize()?;

        let t0 = Instant::now();
        matcher.fill_bitmask(&mut row);
        let t1 = Instant::now();
        stream.memcpy_htod(&row, &mut mask_dev)?;
        start.record(&stream)?;
        device.apply_inplace(&mut logits_dev, n, &mask_dev, None)?;
        end.record(&stream)?;
        stream.synchronize()?;
        let t2 = Instant::now();
        fill.push(t1 - t0);
        apply.push(t2 - t1);
        kernel.push(Duration::from_secs_f64(
            f64::from(start.elapsed_ms(&end)?) / 1e3,
        ));

        stream.memcpy_dtoh(&logits_dev, &mut logits)?;
        let token = (0..n)
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .expect("a vocabulary has tokens");
        if row[token / 32] >> (token % 32) & 1 == 0 || logits[token] == f32::NEG_INFINITY {
            return Err(format!("step {}: the GPU left no allowed token", fill.len()).into());
        }
        matcher.accept_token(token as u32)?;
        if matcher.is_terminated() {
            break;
        }
        output.extend_from_slice(vocab.token_bytes(token as u32));
    }
    let text = String::from_utf8_lossy(&output);
    let ended = matcher.is_terminated();
    println!(
        "{} steps, output {} bytes, {}: {}",
        fill.len(),
        output.len(),
        if ended {
            "complete"
        } else {
            "cut at the step limit"
        },
        text.chars().take(120).collect::<String>()
    );
    if ended {
        serde_json::from_slice::<serde_json::Value>(&output)
            .map_err(|e| format!("the output is not JSON: {e}"))?;
    }
    for (name, xs) in [
        ("fill", &mut fill),
        ("apply", &mut apply),
        ("kernel", &mut kernel),
    ] {
        xs.sort();
        println!(
            "{name:>7}: median {:>9.2?}  p90 {:>9.2?}  max {:>9.2?}",
            xs[xs.len() / 2],
            xs[xs.len() * 9 / 10],
            xs[xs.len() - 1]
        );
    }
    Ok(())
}
