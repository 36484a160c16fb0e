//! What bounds a batch of mask rows on this machine: rows per second with
//! one and with two threads of (a) pure arithmetic, (b) a 16 KB row memset,
//! (c) a 16 KB row copy from as many distinct source rows as the batch has,
//! (d) real matchers filling their rows (MaskBench schemas, each matcher at
//! its own position of a valid instance, every round one token further),
//! warm (the grammars' mask caches filled by an earlier run over the same
//! positions) and cold (a fresh backend each run, so every mask needs parser
//! work). Threads are started once and wait for each round spinning, so no
//! figure includes waking a thread; that is measured apart, as (e), the time
//! from handing a job to a sleeping rayon pool thread to that thread
//! running it. The Python batch fill
//! (`tokensieve.fill_next_token_bitmask_batch`) pays (d) plus (e) plus its
//! own per-row costs (a lock and a shared counter per claim of rows).
//!
//! Usage: `batch_bound TOKENIZER.json BACKEND MASKBENCH_DIR [ROWS] [FILES]`
//! (ROWS 128, FILES 100: every k-th file of the directory, sorted).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokensieve::hf::HfTokenizer;
use tokensieve::maskbench::MaskBenchFile;
use tokensieve::{
    BackendConfig, CompiledGrammar, Constraint, ConstraintSpec, GrammarBackend, GrammarObject,
    SpecOptions, Vocabulary,
};

/// Tokens every matcher steps through, one a round.
const ROUNDS: usize = 16;
/// Runs per figure; the best is kept (the machine is shared).
const REPEATS: usize = 5;

/// Runs `rounds` rounds over `parts` (one per thread: part 0 on the calling
/// thread, the others on threads started once that spin between rounds):
/// each round every thread runs `fill` on its part (timed, from the start
/// signal to the last thread done), then `step` (untimed). Returns the
/// timed total.
fn split_rounds<T: Send>(
    parts: Vec<T>,
    rounds: usize,
    fill: impl Fn(&mut T) + Sync,
    step: impl Fn(&mut T, usize) + Sync,
) -> Duration {
    let threads = parts.len();
    // go: 2r + 1 = fill of round r, 2r + 2 = its step; done counts threads.
    let go = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let mut total = Duration::ZERO;
    std::thread::scope(|s| {
        let mut parts = parts.into_iter();
        let mut mine = parts.next().expect("one part at least");
        for mut part in parts {
            let (go, done, fill, step) = (&go, &done, &fill, &step);
            s.spawn(move || {
                for phase in 1..=2 * rounds {
                    wait_until(|| go.load(Ordering::Acquire) >= phase);
                    if phase % 2 == 1 {
                        fill(&mut part);
                    } else {
                        step(&mut part, phase / 2 - 1);
                    }
                    done.fetch_add(1, Ordering::AcqRel);
                }
            });
        }
        for r in 0..rounds {
            for phase in [2 * r + 1, 2 * r + 2] {
                let start = Instant::now();
                go.store(phase, Ordering::Release);
                if phase % 2 == 1 {
                    fill(&mut mine);
                } else {
                    step(&mut mine, r);
                }
                let target = phase * (threads - 1);
                wait_until(|| done.load(Ordering::Acquire) >= target);
                if phase % 2 == 1 {
                    total += start.elapsed();
                }
            }
        }
    });
    total
}

/// Spins a little, then yields: on a machine whose other jobs hold the
/// cores, a pure spin would wait for a descheduled thread for a whole time
/// slice.
fn wait_until(ready: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !ready() {
        if spins < 2000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// Contiguous chunks of `0..n`, one per thread.
fn chunks(n: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    (0..threads)
        .map(|t| t * n / threads..(t + 1) * n / threads)
        .collect()
}

fn best(f: impl Fn() -> f64) -> f64 {
    (0..REPEATS).map(|_| f()).fold(0.0, f64::max)
}

/// The token ids of a schema's valid instances.
type Instances = Vec<Arc<Vec<u32>>>;

struct Pick {
    grammar: usize,
    tokens: Arc<Vec<u32>>,
    start: usize,
}

fn load(
    tokenizer: &HfTokenizer,
    dir: &str,
    files: usize,
) -> anyhow::Result<(Vec<Constraint>, Vec<Instances>)> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let k = (paths.len() / files.max(1)).max(1);
    let (mut constraints, mut instances) = (Vec::new(), Vec::new());
    for path in paths.iter().step_by(k).take(files) {
        let file = MaskBenchFile::load(path).map_err(anyhow::Error::msg)?;
        let tests = file
            .tests
            .iter()
            .filter(|t| t.valid)
            .filter_map(|t| tokenizer.encode(&t.text()).ok())
            .filter(|t| t.len() > ROUNDS)
            .map(Arc::new)
            .collect();
        constraints.push(Constraint::with_options(
            ConstraintSpec::JsonSchema(file.schema.to_string()),
            SpecOptions::default(),
        ));
        instances.push(tests);
    }
    Ok((constraints, instances))
}

fn compile_all(
    backend: &dyn GrammarBackend,
    constraints: &[Constraint],
) -> Vec<Option<Arc<dyn CompiledGrammar>>> {
    constraints
        .iter()
        .map(|c| backend.compile(c).ok())
        .collect()
}

/// `rows` picks of (grammar, instance, start) whose instance the grammar
/// accepts from `start` for `ROUNDS` tokens, chosen by a fixed LCG.
fn picks(
    grammars: &[Option<Arc<dyn CompiledGrammar>>],
    instances: &[Instances],
    rows: usize,
) -> Vec<Pick> {
    let mut pool = Vec::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    for (g, (grammar, tests)) in grammars.iter().zip(instances).enumerate() {
        let Some(grammar) = grammar else { continue };
        for tokens in tests {
            let mut m = grammar.matcher();
            if m.accept_tokens(tokens).is_ok() {
                pool.push((g, tokens.clone(), next(tokens.len() - ROUNDS)));
            }
        }
    }
    assert!(
        !pool.is_empty(),
        "no schema compiled with an instance it accepts"
    );
    (0..rows)
        .map(|_| {
            let (grammar, tokens, start) = pool[next(pool.len())].clone();
            Pick {
                grammar,
                tokens,
                start,
            }
        })
        .collect()
}

type Part = (Vec<(Box<dyn GrammarObject>, usize)>, Vec<u32>);

/// A matcher, its pick's index and its row.
type Row = (Box<dyn GrammarObject>, usize, Vec<u32>);

/// The matchers of `picks` at their start positions, split into contiguous
/// chunks with a row buffer each.
fn positioned(
    grammars: &[Option<Arc<dyn CompiledGrammar>>],
    picks: &[Pick],
    threads: usize,
    words: usize,
) -> Vec<Part> {
    chunks(picks.len(), threads)
        .into_iter()
        .map(|range| {
            let ms = picks[range.clone()]
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let mut m = grammars[p.grammar].as_ref().expect("compiled").matcher();
                    m.accept_tokens(&p.tokens[..p.start]).expect("valid");
                    (m, range.start + i)
                })
                .collect();
            (ms, vec![0u32; range.len() * words])
        })
        .collect()
}

fn fill_rate(
    grammars: &[Option<Arc<dyn CompiledGrammar>>],
    picks: &[Pick],
    threads: usize,
    words: usize,
) -> f64 {
    // Every row behind its own lock, claimed one at a time off a shared
    // counter by whichever thread comes (as the Python batch fill shares
    // rows out): a thread the machine does not run leaves its rows to the
    // other rather than holding up the round.
    let rows: Vec<Mutex<Row>> = positioned(grammars, picks, 1, words)
        .into_iter()
        .flat_map(|(ms, _)| ms)
        .map(|(m, i)| Mutex::new((m, i, vec![0u32; words])))
        .collect();
    let (fill_next, step_next) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let claim = |next: &AtomicUsize, f: &dyn Fn(&mut Row)| loop {
        let i = next.fetch_add(1, Ordering::AcqRel);
        let Some(row) = rows.get(i) else { break };
        f(&mut row.lock().expect("no panic"));
    };
    let t = split_rounds(
        vec![(); threads],
        ROUNDS,
        |_| {
            // Phases are apart (every thread is done with one before the
            // next starts): resetting the other phase's counter is safe.
            step_next.store(0, Ordering::Release);
            claim(&fill_next, &|(m, _, row)| m.fill_bitmask(row));
        },
        |_, r| {
            fill_next.store(0, Ordering::Release);
            claim(&step_next, &|(m, i, _)| {
                let p = &picks[*i];
                m.accept_token(p.tokens[p.start + r]).expect("valid");
            });
        },
    );
    (picks.len() * ROUNDS) as f64 / t.as_secs_f64()
}

/// Rows per second of `per_row` over `rows` rows of `words` words, each
/// thread on its contiguous share (its own buffer).
fn plain_rate(rows: usize, words: usize, threads: usize, per_row: fn(&mut [u32], usize)) -> f64 {
    const REPS: usize = 200;
    let parts: Vec<(Vec<u32>, usize)> = chunks(rows, threads)
        .into_iter()
        .map(|r| (vec![0u32; r.len() * words], r.start))
        .collect();
    let t = split_rounds(
        parts,
        REPS,
        |(buf, first): &mut (Vec<u32>, usize)| {
            for (i, row) in buf.chunks_mut(words).enumerate() {
                per_row(row, *first + i);
            }
        },
        |_, _| {},
    );
    (rows * REPS) as f64 / t.as_secs_f64()
}

/// A row's worth of arithmetic (no memory traffic), about as long as a
/// cached mask fill.
fn alu_row(row: &mut [u32], i: usize) {
    let mut x = i as u64 | 1;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    row[0] = x as u32;
}

fn memset_row(row: &mut [u32], _: usize) {
    row.fill(u32::MAX);
}

/// Distinct source rows, one per row of the batch (a batch reads as many
/// cached masks as it has rows).
static SOURCES: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();

fn copy_row(row: &mut [u32], i: usize) {
    let src = SOURCES.get().expect("set");
    let w = row.len();
    let n = src.len() / w;
    row.copy_from_slice(&src[(i % n) * w..(i % n + 1) * w]);
}

/// Median time from handing a job to a sleeping rayon pool thread to the
/// job running, over `n` tries 2 ms apart (the pool sleeps between them).
fn wake_latency(n: usize) -> Duration {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let mut samples: Vec<Duration> = (0..n)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(2));
            let (tx, rx) = std::sync::mpsc::channel();
            let start = Instant::now();
            pool.spawn(move || {
                let _ = tx.send(start.elapsed());
            });
            rx.recv().expect("ran")
        })
        .collect();
    samples.sort();
    samples[n / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (tokenizer, backend_name, dir) = match args.as_slice() {
        [t, b, d, ..] => (t, b, d),
        _ => {
            anyhow::bail!("usage: batch_bound TOKENIZER.json BACKEND MASKBENCH_DIR [ROWS] [FILES]")
        }
    };
    let rows: usize = args.get(3).map_or(Ok(128), |s| s.parse())?;
    let files: usize = args.get(4).map_or(Ok(100), |s| s.parse())?;
    let tok = HfTokenizer::from_file(tokenizer)?;
    let vocab: Arc<Vocabulary> = Arc::new(tok.vocabulary().clone());
    let words = vocab.mask_words();
    let _ = SOURCES.set(
        (0..rows * words)
            .map(|i| (i as u32).wrapping_mul(2654435761))
            .collect(),
    );
    println!(
        "rows of {words} words ({} bytes), batches of {rows} rows",
        words * 4
    );
    let line = |what: &str, one: f64, two: f64| {
        println!(
            "{what:<44} 1 thread {one:>11.0} rows/s   2 threads {two:>11.0} rows/s   x{:.2}",
            two / one
        );
    };
    for (what, f) in [
        (
            "(a) arithmetic only (no memory)",
            alu_row as fn(&mut [u32], usize),
        ),
        ("(b) memset of a 16 KB row", memset_row),
        ("(c) copy of a 16 KB row, distinct sources", copy_row),
    ] {
        let one = best(|| plain_rate(rows, words, 1, f));
        let two = best(|| plain_rate(rows, words, 2, f));
        line(what, one, two);
    }

    let (constraints, instances) = load(&tok, dir, files)?;
    let config = BackendConfig::default();
    let backend = tokensieve::create_backend(backend_name, &config, vocab.clone())?;
    let grammars = compile_all(&*backend, &constraints);
    let picks = picks(&grammars, &instances, rows);
    // Warm: one untimed run fills the caches at every position measured.
    fill_rate(&grammars, &picks, 1, words);
    let one = best(|| fill_rate(&grammars, &picks, 1, words));
    let two = best(|| fill_rate(&grammars, &picks, 2, words));
    line(&format!("(d) {backend_name} fills, warm"), one, two);
    let cold = |threads| {
        best(|| {
            let fresh = tokensieve::create_backend(backend_name, &config, vocab.clone())
                .expect("created above");
            let grammars = compile_all(&*fresh, &constraints);
            fill_rate(&grammars, &picks, threads, words)
        })
    };
    let (one, two) = (cold(1), cold(2));
    line(&format!("(d) {backend_name} fills, cold"), one, two);
    println!(
        "(e) waking a sleeping pool thread: {:.1} µs (median of 200)",
        wake_latency(200).as_secs_f64() * 1e6
    );
    Ok(())
}
