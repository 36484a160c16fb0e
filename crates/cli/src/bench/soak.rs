//! `tokensieve bench soak`: the engine under load. Worker threads share
//! compiled grammars through one [`GrammarCache`] and walk MaskBench
//! instances in batches (one bitmask, rows filled by `fill_batch`), with
//! compiles cancelled and timed out at random, rollbacks and forks along the
//! way, for a fixed number of requests per round. It reports requests
//! served, errors by kind, each call's p50/p99/max, peak memory and the
//! resident memory after each round, and fails (exit status 1) on an
//! invalid instance accepted, a walk whose outcome differs from the same
//! walk elsewhere in the run, a panic, or memory that keeps growing from
//! round to round.

use super::inputs::collect_json_files;
use crate::common::{self, BadInput};
use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokensieve::bench_protocol::may_end;
use tokensieve::maskbench::MaskBenchFile;
use tokensieve::testing::SplitMix64;
use tokensieve::{
    CacheConfig, CacheResponse, Constraint, GrammarCache, GrammarError, GrammarObject,
    TokenBitmask, Vocabulary,
};

#[derive(Args)]
pub struct SoakArgs {
    /// Backend name (see `tokensieve backends`).
    #[arg(long, default_value = "earley")]
    pub backend: String,
    /// A Hugging Face tokenizer.json or a GGUF model file.
    #[arg(long)]
    pub tokenizer: String,
    /// Requests per round; a request walks `--batch` instances together.
    #[arg(long, default_value_t = 500)]
    pub requests: u64,
    /// Rounds; the cache is cleared after each and resident memory read
    /// (telling a leak from caches that fill takes six or more).
    #[arg(long, default_value_t = 6)]
    pub rounds: u32,
    /// Threads serving requests.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Instances walked together by one request, one bitmask row each.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Compiler threads of the shared cache.
    #[arg(long, default_value_t = 2)]
    pub compile_threads: usize,
    /// Most grammars the cache keeps (small values make it evict).
    #[arg(long, default_value_t = 256)]
    pub cache_entries: usize,
    /// Percent of pending compiles a request cancels.
    #[arg(long, default_value_t = 5)]
    pub cancel_percent: u64,
    /// Percent of pending compiles a request waits for at most 0–2 ms.
    #[arg(long, default_value_t = 5)]
    pub timeout_percent: u64,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A backend knob, KEY=VALUE (repeatable).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Also write the summary as JSON to this file.
    #[arg(long)]
    pub out: Option<String>,
    /// MaskBench files, or directories of them.
    #[arg(required = true)]
    pub inputs: Vec<String>,
}

/// One instance: its file's constraint, its label and its tokens.
struct Case {
    file: usize,
    valid: bool,
    tokens: Vec<u32>,
}

/// How a walk ended: tokens accepted before the first refused one (all of
/// them when none was), and whether the output could end there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    accepted: usize,
    end_ok: bool,
}

/// What the threads count together.
#[derive(Default)]
struct Tally {
    requests: u64,
    walks: u64,
    tokens: u64,
    errors: BTreeMap<String, u64>,
    valid_refused: u64,
    invalid_accepted: Vec<String>,
    nondeterministic: Vec<String>,
    compile_ns: Times,
    fill_row_ns: Times,
    accept_ns: Times,
    rollback_ns: Times,
    fork_ns: Times,
}

/// Call times, in nanoseconds, as a log histogram of fixed size: exact
/// below 32 ns, then 32 buckets per power of two (a quantile read from it
/// is within 3% of the time's), and the exact maximum. The soak's own
/// bookkeeping then takes the same memory whatever it times: a list of
/// every call's time grew by 9 MiB a round of 400 requests, which the
/// memory check read as a leak.
#[derive(Debug, Clone)]
struct Times {
    counts: Vec<u64>,
    n: u64,
    max: u64,
}

/// Sub-buckets per power of two, as a power of two.
const SUB_BITS: u32 = 5;

impl Default for Times {
    fn default() -> Self {
        Times {
            counts: vec![0; ((64 - SUB_BITS as usize) + 1) << SUB_BITS],
            n: 0,
            max: 0,
        }
    }
}

impl Times {
    fn bucket(ns: u64) -> usize {
        if ns < 1 << SUB_BITS {
            return ns as usize;
        }
        let top = 63 - ns.leading_zeros();
        let sub = (ns >> (top - SUB_BITS)) & ((1 << SUB_BITS) - 1);
        (((top - SUB_BITS + 1) << SUB_BITS) as u64 + sub) as usize
    }

    /// The middle of `bucket`'s times.
    fn value(bucket: usize) -> f64 {
        let sub = 1usize << SUB_BITS;
        if bucket < sub {
            return bucket as f64;
        }
        let top = (bucket >> SUB_BITS) as u32 + SUB_BITS - 1;
        let low = (1u64 << top) + ((bucket & (sub - 1)) as u64) * (1u64 << (top - SUB_BITS));
        low as f64 + (1u64 << (top - SUB_BITS)) as f64 / 2.0
    }

    fn push(&mut self, ns: u64) {
        self.counts[Times::bucket(ns)] += 1;
        self.n += 1;
        self.max = self.max.max(ns);
    }

    fn merge(&mut self, other: &Times) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.n += other.n;
        self.max = self.max.max(other.max);
    }

    /// The time at quantile `q`, in nanoseconds (the maximum at 1).
    fn quantile(&self, q: f64) -> f64 {
        if q >= 1.0 {
            return self.max as f64;
        }
        let rank = ((self.n - 1) as f64 * q).round() as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Times::value(b).min(self.max as f64);
            }
        }
        self.max as f64
    }
}

impl Tally {
    fn error(&mut self, kind: &str) {
        *self.errors.entry(kind.to_string()).or_default() += 1;
    }

    fn merge(&mut self, other: Tally) {
        self.requests += other.requests;
        self.walks += other.walks;
        self.tokens += other.tokens;
        for (k, n) in other.errors {
            *self.errors.entry(k).or_default() += n;
        }
        self.valid_refused += other.valid_refused;
        self.invalid_accepted.extend(other.invalid_accepted);
        self.nondeterministic.extend(other.nondeterministic);
        self.compile_ns.merge(&other.compile_ns);
        self.fill_row_ns.merge(&other.fill_row_ns);
        self.accept_ns.merge(&other.accept_ns);
        self.rollback_ns.merge(&other.rollback_ns);
        self.fork_ns.merge(&other.fork_ns);
    }
}

/// The variant name of an error (`LimitExceeded`, `Timeout`, …).
fn kind(e: &GrammarError) -> String {
    let debug = format!("{e:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("Unknown")
        .to_string()
}

/// Everything one request needs from the run.
struct Shared<'a> {
    args: &'a SoakArgs,
    cases: &'a [Case],
    ids: &'a [String],
    constraints: &'a [Constraint],
    cache: &'a GrammarCache,
    vocab: &'a Vocabulary,
    /// The first outcome seen of each case: every later walk must match.
    outcomes: &'a Mutex<HashMap<usize, Outcome>>,
}

pub fn run(args: &SoakArgs) -> anyhow::Result<u8> {
    if args.batch == 0 || args.threads == 0 || args.rounds == 0 {
        return Err(BadInput("--batch, --threads and --rounds must be at least 1".into()).into());
    }
    let files = collect_json_files(&args.inputs)?;
    let tok = common::load_tokenizer(&args.tokenizer)?;
    let backend =
        common::make_backend(&args.backend, &common::backend_config(&args.options)?, &tok)?;
    let mut cases = Vec::new();
    let mut ids = Vec::new();
    let mut constraints = Vec::new();
    for path in &files {
        let file = MaskBenchFile::load(path)
            .map_err(|e| BadInput(format!("malformed MaskBench file {e}")))?;
        for test in &file.tests {
            let tokens = tok
                .encode(&test.text())
                .map_err(|e| BadInput(format!("{}: tokenizer: {e}", file.id)))?;
            cases.push(Case {
                file: ids.len(),
                valid: test.valid,
                tokens,
            });
        }
        constraints.push(Constraint::json_schema(file.schema.to_string()));
        ids.push(file.id);
    }
    if cases.is_empty() {
        return Err(BadInput("no MaskBench instances in the inputs".into()).into());
    }
    let cache = GrammarCache::with_config(
        backend.clone(),
        CacheConfig {
            workers: args.compile_threads.max(1),
            max_entries: args.cache_entries.max(1),
        },
    );
    let outcomes = Mutex::new(HashMap::new());
    let shared = Shared {
        args,
        cases: &cases,
        ids: &ids,
        constraints: &constraints,
        cache: &cache,
        vocab: backend.vocabulary(),
        outcomes: &outcomes,
    };
    #[cfg(feature = "mimalloc")]
    crate::alloc::return_memory();
    let baseline = memory().0;
    let started = Instant::now();
    let mut total = Tally::default();
    let mut resident = Vec::new();
    for round in 0..args.rounds {
        let next = AtomicU64::new(0);
        let tallies: Vec<Tally> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..args.threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut tally = Tally::default();
                        let mut bitmask = TokenBitmask::new(args.batch, shared.vocab.vocab_size());
                        loop {
                            let r = next.fetch_add(1, Ordering::Relaxed);
                            if r >= args.requests {
                                break tally;
                            }
                            let seed = args.seed ^ (u64::from(round) << 40) ^ r;
                            serve(&shared, seed, &mut bitmask, &mut tally);
                        }
                    })
                })
                .collect();
            // A worker that panicked counts as one panic.
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        let mut t = Tally::default();
                        t.error("Panic");
                        t
                    })
                })
                .collect()
        });
        for t in tallies {
            total.merge(t);
        }
        cache.clear();
        #[cfg(feature = "mimalloc")]
        crate::alloc::return_memory();
        let rss = memory().0;
        eprintln!(
            "round {}: {} requests, resident {:.1} MiB",
            round + 1,
            args.requests,
            rss as f64 / (1 << 20) as f64
        );
        resident.push(rss);
    }
    let elapsed = started.elapsed();
    let peak = memory().1;
    let leak = growing(&resident);
    let stats = cache.stats();
    let summary = json!({
        "backend": backend.name(),
        "files": ids.len(),
        "instances": cases.len(),
        "threads": args.threads,
        "batch": args.batch,
        "rounds": args.rounds,
        "seed": args.seed,
        "seconds": elapsed.as_secs_f64(),
        "requests": total.requests,
        "walks": total.walks,
        "tokens": total.tokens,
        "errors": total.errors,
        "valid_refused": total.valid_refused,
        "invalid_accepted": total.invalid_accepted,
        "nondeterministic": total.nondeterministic,
        "cache": {
            "hits": stats.hits, "misses": stats.misses, "compiled": stats.compiled,
            "failed": stats.failed, "cancelled": stats.cancelled, "evicted": stats.evicted,
        },
        "calls_us": {
            "compile": tails(&total.compile_ns),
            "fill_row": tails(&total.fill_row_ns),
            "accept_token": tails(&total.accept_ns),
            "rollback": tails(&total.rollback_ns),
            "fork": tails(&total.fork_ns),
        },
        "memory_mib": {
            "before": mib(baseline),
            "after_each_round": resident.iter().map(|&b| mib(b)).collect::<Vec<_>>(),
            "peak": mib(peak),
            "growing": leak,
        },
    });
    let text = serde_json::to_string_pretty(&summary)?;
    println!("{text}");
    if let Some(path) = &args.out {
        std::fs::write(path, &text).with_context(|| format!("writing {path}"))?;
    }
    let panics = total
        .errors
        .iter()
        .filter(|(k, _)| k.as_str() == "Panic" || k.as_str() == "Poisoned")
        .map(|(_, n)| n)
        .sum::<u64>();
    let failed = !total.invalid_accepted.is_empty()
        || !total.nondeterministic.is_empty()
        || panics > 0
        || leak;
    if failed {
        eprintln!(
            "soak FAILED: {} invalid accepted, {} nondeterministic walks, {panics} panics, memory growing: {leak}",
            total.invalid_accepted.len(),
            total.nondeterministic.len()
        );
    }
    Ok(u8::from(failed))
}

/// One request: `batch` instances picked at random, a matcher for each
/// from the cache (maybe cancelled or timed out), then walked together.
fn serve(shared: &Shared<'_>, seed: u64, bitmask: &mut TokenBitmask, tally: &mut Tally) {
    let args = shared.args;
    let mut rng = SplitMix64(seed);
    tally.requests += 1;
    let picks: Vec<usize> = (0..args.batch)
        .map(|_| rng.below(shared.cases.len()))
        .collect();
    let mut matchers: Vec<Option<Box<dyn GrammarObject>>> = Vec::with_capacity(picks.len());
    for &c in &picks {
        let constraint = &shared.constraints[shared.cases[c].file];
        let start = Instant::now();
        let got = match shared.cache.get_or_compile(constraint) {
            CacheResponse::Ready(m) => Ok(m),
            CacheResponse::Failed(e) => Err(e),
            CacheResponse::Pending(p) => {
                let roll = rng.below(100);
                if roll < args.cancel_percent as usize {
                    p.cancel();
                    Err(GrammarError::Cancelled)
                } else if roll < (args.cancel_percent + args.timeout_percent) as usize {
                    p.wait_timeout(Duration::from_micros(rng.below(2_000) as u64))
                } else {
                    p.wait()
                }
            }
        };
        match got {
            Ok(m) => {
                tally.compile_ns.push(start.elapsed().as_nanos() as u64);
                matchers.push(Some(m));
            }
            Err(e) => {
                tally.error(&kind(&e));
                matchers.push(None);
            }
        }
    }
    // Walk the batch in lockstep: one fill of every live row, then one
    // token each.
    let mut pos = vec![0usize; picks.len()];
    let mut live: Vec<bool> = matchers.iter().map(Option::is_some).collect();
    let mut ends: Vec<Option<Outcome>> = vec![None; picks.len()];
    let mut row = vec![0u32; shared.vocab.mask_words()];
    while live.iter().any(|&l| l) {
        let n_live = live.iter().filter(|&&l| l).count() as u64;
        let mut refs: Vec<Option<&mut (dyn GrammarObject + '_)>> = matchers
            .iter_mut()
            .zip(&live)
            .map(|(m, &l)| if l { m.as_deref_mut() } else { None })
            .collect();
        let start = Instant::now();
        bitmask.fill_batch(&mut refs);
        let per_row = start.elapsed().as_nanos() as u64 / n_live;
        drop(refs);
        for i in 0..picks.len() {
            if !live[i] {
                continue;
            }
            tally.fill_row_ns.push(per_row);
            let case = &shared.cases[picks[i]];
            let m = matchers[i].as_mut().expect("live rows have a matcher");
            if pos[i] == case.tokens.len() {
                let end_ok = may_end(m.as_mut(), shared.vocab, &mut row);
                ends[i] = Some(Outcome {
                    accepted: pos[i],
                    end_ok,
                });
                live[i] = false;
                continue;
            }
            let t = case.tokens[pos[i]];
            if !bitmask.is_allowed(i, t) {
                ends[i] = Some(Outcome {
                    accepted: pos[i],
                    end_ok: false,
                });
                live[i] = false;
                continue;
            }
            let start = Instant::now();
            let step = m.accept_token(t);
            tally.accept_ns.push(start.elapsed().as_nanos() as u64);
            if let Err(e) = step {
                *tally.errors.entry(format!("step: {e}")).or_default() += 1;
                live[i] = false;
                continue;
            }
            pos[i] += 1;
            tally.tokens += 1;
            // Now and then undo the token and take it again, or carry on
            // with a fork: both must leave the walk where it was.
            match rng.below(100) {
                0 => {
                    let start = Instant::now();
                    let back = m.rollback(1);
                    tally.rollback_ns.push(start.elapsed().as_nanos() as u64);
                    if let Err(e) = back.and_then(|()| m.accept_token(t)) {
                        *tally.errors.entry(format!("rollback: {e}")).or_default() += 1;
                        live[i] = false;
                    }
                }
                1 => {
                    let start = Instant::now();
                    let fork = m.fork();
                    tally.fork_ns.push(start.elapsed().as_nanos() as u64);
                    matchers[i] = Some(fork);
                }
                _ => {}
            }
        }
    }
    for (i, end) in ends.into_iter().enumerate() {
        let Some(outcome) = end else { continue };
        tally.walks += 1;
        let case = &shared.cases[picks[i]];
        let whole = outcome.accepted == case.tokens.len() && outcome.end_ok;
        let id = &shared.ids[case.file];
        if case.valid && !whole {
            tally.valid_refused += 1;
        }
        if !case.valid && whole {
            tally
                .invalid_accepted
                .push(format!("{id}: invalid instance accepted"));
        }
        let mut seen = shared.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        match seen.get(&picks[i]) {
            None => {
                seen.insert(picks[i], outcome);
            }
            Some(first) if *first != outcome => tally
                .nondeterministic
                .push(format!("{id}: {first:?} then {outcome:?}")),
            Some(_) => {}
        }
    }
}

/// Whether resident memory keeps growing from round to round. Freed
/// memory is given back to the OS before each reading, but pages the
/// allocator still uses in part stay, and the process-wide caches
/// (lexemes, walks, summaries) fill up to their byte limits over the first
/// rounds, so memory does grow, but less and less: a
/// leak grows by the same amount every round, since every round does the
/// same work. Growing: the last third of the rounds still adds more than
/// 4 MiB a round and more than a third of what the first third added.
/// With fewer than three rounds: the last more than 10% + 32 MiB above the
/// first.
fn growing(resident: &[u64]) -> bool {
    let n = resident.len();
    if n < 3 {
        let (first, last) = (resident[0], resident[n - 1]);
        return last > first + first / 10 + (32 << 20);
    }
    let third = n / 3;
    let per_round = |from: usize, to: usize| {
        resident[to].saturating_sub(resident[from]) as f64 / (to - from) as f64
    };
    let early = per_round(0, third);
    let late = per_round(n - 1 - third, n - 1);
    late > (4 << 20) as f64 && late > early / 3.0
}

/// p50, p99 and max of `times`, in microseconds.
fn tails(times: &Times) -> Value {
    if times.n == 0 {
        return json!(null);
    }
    let at = |q: f64| times.quantile(q) / 1000.0;
    json!({"n": times.n, "p50": at(0.5), "p99": at(0.99), "max": at(1.0)})
}

fn mib(bytes: u64) -> f64 {
    (bytes as f64 / (1 << 20) as f64 * 10.0).round() / 10.0
}

/// Resident and peak resident bytes of this process (`/proc/self/status`;
/// 0 where it cannot be read).
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    use super::{Times, growing};

    /// Quantiles from the histogram are within 3% of the exact ones, the
    /// maximum is exact, and merging two histograms is one of their union.
    #[test]
    fn times_keep_quantiles_within_three_percent() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut all = Vec::new();
        let (mut a, mut b) = (Times::default(), Times::default());
        for i in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 1 ns to about 17 s, spread over every power of two.
            let ns = (x >> (30 + x % 34)).max(1);
            all.push(ns);
            if i % 2 == 0 { a.push(ns) } else { b.push(ns) }
        }
        a.merge(&b);
        all.sort_unstable();
        assert_eq!(a.n, all.len() as u64);
        assert_eq!(a.quantile(1.0), *all.last().unwrap() as f64);
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999] {
            let exact = all[((all.len() - 1) as f64 * q).round() as usize] as f64;
            let got = a.quantile(q);
            assert!(
                (got - exact).abs() <= exact * 0.03 + 0.5,
                "q {q}: {got} against {exact}"
            );
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn growth_that_does_not_slow_down_is_a_leak() {
        let leak: Vec<u64> = (0..8).map(|r| (600 + 20 * r) * MIB).collect();
        assert!(growing(&leak));
        // Caches filling up: each round adds less.
        let filling: Vec<u64> = [611, 638, 664, 674, 696, 704, 710, 716]
            .iter()
            .map(|m| m * MIB)
            .collect();
        assert!(!growing(&filling));
        assert!(!growing(&[600 * MIB; 5]));
        // Two rounds: only a large jump counts.
        assert!(!growing(&[600 * MIB, 620 * MIB]));
        assert!(growing(&[600 * MIB, 800 * MIB]));
    }
}
