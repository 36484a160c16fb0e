//! Records the token bitmasks real backends fill while walking MaskBench
//! instances, as input for the GPU apply benchmarks: the masks a serving
//! stack would apply, rather than random ones.
//!
//! For every `STRIDE`-th MaskBench file (sorted by name), each backend
//! compiles the schema (at most 10 s) and walks the file's first valid
//! instance token by token; of the walk's masks (one before each token and
//! one after the last) it keeps `PER_FILE`, evenly spaced, until it holds
//! `ROWS` rows. The rows of all backends go into one file:
//!
//! ```text
//! bytes 0..8   b"TSMASKS1"
//! bytes 8..20  vocab (tokens), words per row, rows: little-endian u32
//! then         rows × words little-endian u32 (bit t%32 of word t/32 set = token t allowed)
//! ```
//!
//! `benches/fixtures/masks/` holds them for Llama 3 and Qwen2.5, 3,000 rows
//! each (1,500 per backend, every 6th file of `maskbench-dev`), compressed
//! with `xz -9` (48 MB to 115 KB: many rows repeat, rows apart);
//! `benches/apply.rs` (`APPLY_MASKS=real`), `benches/cuda_kernel_variants.py`
//! and `benches/python_cuda_apply.py` replay them.
//!
//! ```text
//! cargo run --release --example record_masks -- \
//!     TOKENIZER.json OUT.bin MASKBENCH_DIR [ROWS=1500] [STRIDE=6] [PER_FILE=6] [BACKENDS=earley,regex-fsm]
//! xz -9 OUT.bin
//! ```

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use tokensieve::bench_protocol::{CompileOutcome, CompileWorker};
use tokensieve::maskbench::MaskBenchFile;
use tokensieve::{BackendConfig, Constraint, Vocabulary};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: record_masks TOKENIZER.json OUT.masks MASKBENCH_DIR [ROWS] [STRIDE] \
                 [PER_FILE] [BACKENDS]";
    let mut args = std::env::args().skip(1);
    let tokenizer_path = args.next().ok_or(usage)?;
    let out_path = args.next().ok_or(usage)?;
    let dir = args.next().ok_or(usage)?;
    let rows_per_backend: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1500);
    let stride: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(6);
    let per_file: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(6);
    let backends = args
        .next()
        .unwrap_or_else(|| "earley,regex-fsm".to_string());

    let tokenizer = tokensieve::hf::HfTokenizer::from_file(&tokenizer_path)?;
    let vocab: Arc<Vocabulary> = Arc::new(tokenizer.vocabulary().clone());
    let words = vocab.vocab_size().div_ceil(32);
    let mut files: Vec<_> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|x| x == "json"));
    files.sort();

    let mut rows: Vec<u32> = Vec::new();
    for name in backends.split(',') {
        let backend = tokensieve::create_backend(name, &BackendConfig::default(), vocab.clone())?;
        let (mut kept, mut walked) = (0usize, 0usize);
        let mut worker = CompileWorker::new();
        for path in files.iter().step_by(stride.max(1)) {
            if kept >= rows_per_backend {
                break;
            }
            let file = MaskBenchFile::load(path)?;
            let Some(test) = file.tests.iter().find(|t| t.valid) else {
                continue;
            };
            let Ok(tokens) = tokenizer.encode(&test.text()) else {
                continue;
            };
            let constraint = Constraint::json_schema(file.schema.to_string());
            let timeout = Some(Duration::from_secs(10));
            let CompileOutcome::Ready { grammar, .. } =
                worker.compile(backend.clone(), constraint, timeout)
            else {
                continue;
            };
            // Steps 0..=len: the mask before each token and the one after the last.
            let steps = tokens.len() + 1;
            let take = per_file.min(steps).min(rows_per_backend - kept);
            let chosen: Vec<usize> = (0..take).map(|i| i * steps / take).collect();
            let mut matcher = grammar.matcher();
            let mut row = vec![0u32; words];
            let mut file_rows = Vec::new();
            for step in 0..steps {
                if chosen.binary_search(&step).is_ok() {
                    matcher.fill_bitmask(&mut row);
                    file_rows.extend_from_slice(&row);
                }
                if step < tokens.len() && matcher.accept_token(tokens[step]).is_err() {
                    file_rows.clear();
                    break;
                }
            }
            kept += file_rows.len() / words;
            walked += usize::from(!file_rows.is_empty());
            rows.extend_from_slice(&file_rows);
        }
        eprintln!("{name}: {kept} rows from {walked} files");
    }

    let count = rows.len() / words;
    let mut out = std::io::BufWriter::new(std::fs::File::create(&out_path)?);
    out.write_all(b"TSMASKS1")?;
    for x in [vocab.vocab_size(), words, count] {
        out.write_all(&u32::try_from(x)?.to_le_bytes())?;
    }
    for w in &rows {
        out.write_all(&w.to_le_bytes())?;
    }
    out.flush()?;
    let allowed: u64 = rows.iter().map(|w| u64::from(w.count_ones())).sum();
    eprintln!(
        "{out_path}: {count} rows of {} tokens, {:.1}% allowed on average",
        vocab.vocab_size(),
        100.0 * allowed as f64 / (count * vocab.vocab_size()) as f64
    );
    Ok(())
}
