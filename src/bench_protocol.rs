//! The MaskBench run protocol (`../shared/bench/CONTRACT.md`, section 3) as
//! one implementation shared by `tokensieve bench maskbench` (direct mode),
//! `tokensieve bench packs` (pack mode), `tokensieve bench jsts` and the
//! sampled MaskBench conformance test, so that all of them time, accept and
//! judge tokens the same way.
//!
//! - [`compile_timed`]: schema text in memory -> a matcher ready for its first
//!   mask, with the wall time it took (TTFM).
//! - [`compile_with_timeout`]: the same on a worker thread, cancelled after a
//!   time limit, with a panic inside the backend caught; [`CompileWorker`]
//!   keeps that thread for a run of compiles, and walks each file's tests
//!   there too ([`CompileWorker::run`]: one thread, as section 3 asks).
//! - [`walk`]: one instance's tokens through a fresh matcher, timing every
//!   step (fill the complete mask, check the token's bit, accept it), then the
//!   untimed end check.
//!
//! ```
//! use std::sync::Arc;
//! use tokensieve::bench_protocol::{compile_timed, walk, WalkOptions};
//!
//! let vocab = Arc::new(tokensieve::vocab::fixtures::json_tiny());
//! let backend = tokensieve::create_backend("none", &Default::default(), vocab.clone())?;
//! let (grammar, _elapsed) = compile_timed(backend.as_ref(), r#"{"type": "object"}"#);
//! let tokens = vocab.encode_greedy(br#"{"a": 1}"#).unwrap();
//! let mut row = vec![0u32; vocab.mask_words()];
//! let w = walk(grammar?.as_ref(), &vocab, &tokens, &mut row, WalkOptions::default());
//! assert!(w.accepted && w.end_ok == Some(true));
//! assert_eq!(w.mask_ns.len(), tokens.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::bitmask::row_is_allowed;
use crate::{
    CancelToken, CompiledGrammar, Constraint, GrammarBackend, GrammarError, GrammarObject,
    Vocabulary,
};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Extra (untimed) checks a conformance run wants and a benchmark does not.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkOptions {
    /// When a token's bit is clear, also try `accept_token` on a fork of the
    /// matcher: if it takes the token, the mask was too narrow (an engine
    /// bug, reported in [`Walk::mismatch`]). At the end, compare the end
    /// check with `is_accepting`.
    pub check_consistency: bool,
}

/// What one instance's walk did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// Every token was in the mask and accepted.
    pub accepted: bool,
    /// Why not: `"token K (id T) not in mask"`, or `"engine error ..."` when
    /// a token in the mask was refused. `None` when accepted.
    pub reason: Option<String>,
    /// May the output end after the last token (a stop token is in the mask)?
    /// `None` when the walk was rejected.
    pub end_ok: Option<bool>,
    /// Nanoseconds per step: fill mask + check bit + accept. The rejected
    /// token's step is included, so `mask_ns.len()` is the number of tokens
    /// looked at.
    pub mask_ns: Vec<u64>,
    /// Only with [`WalkOptions::check_consistency`]: a disagreement between
    /// the mask and the matcher (a clear bit whose token `accept_token`
    /// takes, or an end check that disagrees with `is_accepting`).
    pub mismatch: Option<String>,
}

impl Walk {
    /// A set bit whose token the matcher then refused.
    pub fn is_engine_error(&self) -> bool {
        self.reason
            .as_deref()
            .is_some_and(|r| r.starts_with("engine error"))
    }

    /// Accepted, and the output may end there: the instance is in the
    /// language (MaskBench's own scoring ignores the end; see `accepted`).
    pub fn matches(&self) -> bool {
        self.accepted && self.end_ok == Some(true)
    }
}

/// Compiles `schema_text` as a JSON Schema with the backend's default
/// options and creates the first matcher: the time from the schema in memory
/// to a matcher that can compute its first mask (TTFM). The matcher itself is
/// dropped; every test starts from a fresh one.
pub fn compile_timed(
    backend: &dyn GrammarBackend,
    schema_text: &str,
) -> (Result<Arc<dyn CompiledGrammar>, GrammarError>, Duration) {
    compile_timed_cancellable(backend, schema_text, &CancelToken::new())
}

/// [`compile_timed`] through [`GrammarBackend::compile_cancellable`].
pub fn compile_timed_cancellable(
    backend: &dyn GrammarBackend,
    schema_text: &str,
    cancel: &CancelToken,
) -> (Result<Arc<dyn CompiledGrammar>, GrammarError>, Duration) {
    compile_constraint_timed(backend, &Constraint::json_schema(schema_text), cancel)
}

/// [`compile_timed_cancellable`] for any constraint (a grammar walked over
/// MaskBench instances instead of their schemas, say).
pub fn compile_constraint_timed(
    backend: &dyn GrammarBackend,
    constraint: &Constraint,
    cancel: &CancelToken,
) -> (Result<Arc<dyn CompiledGrammar>, GrammarError>, Duration) {
    let start = Instant::now();
    let result = backend
        .compile_cancellable(constraint, cancel)
        .inspect(|grammar| drop(std::hint::black_box(grammar.matcher())));
    (result, start.elapsed())
}

/// How a compilation under a time limit ended.
pub enum CompileOutcome {
    /// Compiled in `elapsed`.
    Ready {
        grammar: Arc<dyn CompiledGrammar>,
        elapsed: Duration,
    },
    /// The backend returned an error after `elapsed`.
    Failed {
        error: GrammarError,
        elapsed: Duration,
    },
    /// The backend panicked; the panic was caught.
    Panicked { message: String },
    /// Not done within the limit. The compilation is cancelled and its
    /// thread detached: a backend that polls its [`CancelToken`] stops at its
    /// next safe point; one that does not keeps a CPU busy until it finishes
    /// (Rust cannot kill a thread), which disturbs the timing of what runs
    /// next.
    TimedOut,
}

/// [`compile_timed`] on a worker thread, waited for at most `timeout`
/// (`None`: no limit), with a panic inside the backend caught. A thread of
/// its own each call; a run of many compiles uses a [`CompileWorker`].
pub fn compile_with_timeout(
    backend: Arc<dyn GrammarBackend>,
    schema_text: String,
    timeout: Option<Duration>,
) -> CompileOutcome {
    compile_constraint_with_timeout(backend, Constraint::json_schema(schema_text), timeout)
}

/// [`compile_with_timeout`] for any constraint.
pub fn compile_constraint_with_timeout(
    backend: Arc<dyn GrammarBackend>,
    constraint: Constraint,
    timeout: Option<Duration>,
) -> CompileOutcome {
    CompileWorker::new().compile(backend, constraint, timeout)
}

/// One piece of work for a [`CompileWorker`]'s thread: a compile, or what
/// a caller runs after it ([`CompileWorker::run`]). It sends its own result.
type WorkerJob = Box<dyn FnOnce() + Send>;

/// A thread that compiles one constraint at a time, kept from one compile
/// to the next, as an inference server keeps its compile workers: a run of
/// files then times each compile, not the start of a thread with cold
/// thread-local buffers and a fresh allocator heap. (What a backend caches
/// across compiles is its own, and a benchmark turns it off by option; this
/// keeps nothing of a compile but the thread.) After a time-out the thread
/// is left to finish or notice its cancellation, and the next compile
/// starts a new one.
///
/// [`CompileWorker::run`] runs more work on the same thread: a benchmark
/// walks its tests there, so that one thread compiles and masks, as the
/// contract's "one thread" asks and as an engine benchmarked in a process
/// of its own does (a grammar built on one thread and used and freed on
/// another pays for it: its memory sits in the other thread's allocator
/// arena and caches).
#[derive(Default)]
pub struct CompileWorker {
    jobs: Option<mpsc::Sender<WorkerJob>>,
}

impl CompileWorker {
    /// No thread yet: the first compile starts it.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`compile_constraint_timed`] on the worker's thread, waited for at
    /// most `timeout` (`None`: no limit), with a panic inside the backend
    /// caught.
    pub fn compile(
        &mut self,
        backend: Arc<dyn GrammarBackend>,
        constraint: Constraint,
        timeout: Option<Duration>,
    ) -> CompileOutcome {
        let (reply, outcome) = mpsc::channel();
        let cancel = CancelToken::new();
        let job_cancel = cancel.clone();
        let job: WorkerJob = Box::new(move || {
            let compiled = catch_panic(|| {
                compile_constraint_timed(backend.as_ref(), &constraint, &job_cancel)
            });
            let outcome = match compiled {
                Ok((Ok(grammar), elapsed)) => CompileOutcome::Ready { grammar, elapsed },
                Ok((Err(error), elapsed)) => CompileOutcome::Failed { error, elapsed },
                Err(message) => CompileOutcome::Panicked { message },
            };
            // The receiver is gone after a time-out; nothing to tell then.
            let _ = reply.send(outcome);
        });
        if let Err(message) = self.send(job) {
            return CompileOutcome::Panicked { message };
        }
        self.wait(&outcome, &cancel, timeout)
    }

    /// Runs `f` on the worker's thread (after the compile before it) and
    /// waits for it, with no time limit; a panic inside is caught and given
    /// back as its message.
    pub fn run<T: Send + 'static>(
        &mut self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let (reply, result) = mpsc::channel();
        let job: WorkerJob = Box::new(move || {
            let _ = reply.send(catch_panic(f));
        });
        self.send(job)?;
        result.recv().unwrap_or_else(|_| {
            self.jobs = None;
            Err("the worker thread ended without a result".into())
        })
    }

    /// Hands `job` to the worker's thread. A thread that died (only a panic
    /// outside a caught job can end one) gives its job back: then once more
    /// on a new thread.
    fn send(&mut self, mut job: WorkerJob) -> Result<(), String> {
        for _ in 0..2 {
            let jobs = self
                .thread()
                .map_err(|e| format!("cannot start a compile thread: {e}"))?;
            match jobs.send(job) {
                Ok(()) => return Ok(()),
                Err(mpsc::SendError(back)) => {
                    job = back;
                    self.jobs = None;
                }
            }
        }
        Err("the compile thread ended twice without a result".into())
    }

    /// The sender of the worker's thread, started if there is none.
    fn thread(&mut self) -> std::io::Result<&mpsc::Sender<WorkerJob>> {
        if self.jobs.is_none() {
            let (tx, rx) = mpsc::channel::<WorkerJob>();
            std::thread::Builder::new()
                .name("tokensieve-compile".into())
                // Ends when the worker drops its sender (dropped, or after a
                // time-out).
                .spawn(move || rx.into_iter().for_each(|job| job()))?;
            self.jobs = Some(tx);
        }
        Ok(self.jobs.as_ref().expect("started above"))
    }

    /// The outcome of the job sent, or a time-out (which cancels the job
    /// and leaves its thread).
    fn wait(
        &mut self,
        outcome: &mpsc::Receiver<CompileOutcome>,
        cancel: &CancelToken,
        timeout: Option<Duration>,
    ) -> CompileOutcome {
        let received = match timeout {
            Some(limit) => outcome
                .recv_timeout(limit)
                .map_err(|e| matches!(e, mpsc::RecvTimeoutError::Timeout)),
            None => outcome.recv().map_err(|_| false),
        };
        match received {
            Ok(outcome) => outcome,
            Err(true) => {
                cancel.cancel();
                self.jobs = None;
                CompileOutcome::TimedOut
            }
            // The reply was dropped unsent: only if the thread panicked
            // outside the caught compile, which also ended it.
            Err(false) => {
                self.jobs = None;
                CompileOutcome::Panicked {
                    message: "compile thread ended without a result".into(),
                }
            }
        }
    }
}

/// Runs `f`, turning a panic into its message.
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| crate::cache::panic_message(&p))
}

/// Walks `tokens` through a fresh matcher of `grammar` (contract §3, steps 2
/// and 3). `row` is a preallocated mask row of `vocab.mask_words()` words;
/// it is overwritten. Panics inside the backend are not caught here (wrap the
/// call in [`catch_panic`] where a panic must not end the run).
pub fn walk(
    grammar: &dyn CompiledGrammar,
    vocab: &Vocabulary,
    tokens: &[u32],
    row: &mut [u32],
    options: WalkOptions,
) -> Walk {
    let mut matcher = grammar.matcher();
    let mut mask_ns = Vec::with_capacity(tokens.len());
    for (i, &t) in tokens.iter().enumerate() {
        let start = Instant::now();
        matcher.fill_bitmask(row);
        let allowed = row_is_allowed(row, t);
        let step = if allowed {
            matcher.accept_token(t)
        } else {
            Ok(())
        };
        mask_ns.push(start.elapsed().as_nanos() as u64);
        if !allowed {
            let mismatch = if options.check_consistency {
                let mut fork = matcher.fork();
                fork.accept_token(t)
                    .ok()
                    .map(|()| format!("token {i} (id {t}) not in mask, but accept_token takes it"))
            } else {
                None
            };
            return Walk {
                accepted: false,
                reason: Some(format!("token {i} (id {t}) not in mask")),
                end_ok: None,
                mask_ns,
                mismatch,
            };
        }
        if let Err(e) = step {
            return Walk {
                accepted: false,
                reason: Some(format!(
                    "engine error at token {i} (id {t}): in the mask but refused: {e}"
                )),
                end_ok: None,
                mask_ns,
                mismatch: None,
            };
        }
    }
    let end_ok = may_end(matcher.as_mut(), vocab, row);
    let mismatch = (options.check_consistency && end_ok != matcher.is_accepting()).then(|| {
        format!(
            "at the end: a stop token is {} in the mask, but is_accepting() = {}",
            if end_ok { "set" } else { "clear" },
            matcher.is_accepting()
        )
    });
    Walk {
        accepted: true,
        reason: None,
        end_ok: Some(end_ok),
        mask_ns,
        mismatch,
    }
}

/// May the output end here: a stop token's bit is set in a freshly computed
/// mask. A vocabulary without stop tokens falls back to `is_accepting`.
pub fn may_end(matcher: &mut dyn GrammarObject, vocab: &Vocabulary, row: &mut [u32]) -> bool {
    let stops = vocab.stop_tokens();
    if stops.is_empty() {
        return matcher.is_accepting();
    }
    matcher.fill_bitmask(row);
    stops.iter().any(|&s| row_is_allowed(row, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SpecKind;

    /// A backend whose grammar allows exactly the bytes of one text, with a
    /// switch that makes its masks lie, to check what `walk` reports.
    struct Literal {
        vocab: Arc<Vocabulary>,
        lie: Lie,
        panic_on_compile: bool,
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Lie {
        None,
        /// The mask allows every token; accept_token still checks.
        WideMask,
        /// The mask allows nothing; accept_token still checks.
        NarrowMask,
    }
    struct LiteralGrammar {
        text: Vec<u8>,
        vocab: Arc<Vocabulary>,
        lie: Lie,
    }
    struct LiteralMatcher {
        text: Vec<u8>,
        pos: usize,
        done: bool,
        vocab: Arc<Vocabulary>,
        lie: Lie,
    }

    impl GrammarBackend for Literal {
        fn name(&self) -> &str {
            "literal"
        }
        fn supported_kinds(&self) -> &[SpecKind] {
            &SpecKind::ALL
        }
        fn vocabulary(&self) -> &Arc<Vocabulary> {
            &self.vocab
        }
        fn compile(&self, c: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
            if self.panic_on_compile {
                panic!("boom");
            }
            let crate::ConstraintSpec::JsonSchema(s) = &c.spec else {
                return Err(GrammarError::InvalidSpec("schema only".into()));
            };
            if s.contains("sleep") {
                std::thread::sleep(Duration::from_millis(500));
            }
            Ok(Arc::new(LiteralGrammar {
                text: s.as_bytes().to_vec(),
                vocab: self.vocab.clone(),
                lie: self.lie,
            }))
        }
    }
    impl CompiledGrammar for LiteralGrammar {
        fn matcher(&self) -> Box<dyn GrammarObject> {
            Box::new(LiteralMatcher {
                text: self.text.clone(),
                pos: 0,
                done: false,
                vocab: self.vocab.clone(),
                lie: self.lie,
            })
        }
        fn compile_time(&self) -> Duration {
            Duration::ZERO
        }
    }
    impl LiteralMatcher {
        fn takes(&self, t: u32) -> bool {
            if self.done {
                return false;
            }
            if self.vocab.is_stop(t) {
                return self.pos == self.text.len();
            }
            self.vocab
                .grammar_bytes(t)
                .is_some_and(|b| self.text[self.pos..].starts_with(b))
        }
    }
    impl GrammarObject for LiteralMatcher {
        fn accept_token(&mut self, token: u32) -> Result<(), crate::StepError> {
            if !self.takes(token) {
                return Err(crate::StepError::TokenRejected { token });
            }
            if self.vocab.is_stop(token) {
                self.done = true;
            } else {
                self.pos += self.vocab.token_bytes(token).len();
            }
            Ok(())
        }
        fn accept_bytes(&mut self, _: &[u8]) -> Result<(), crate::StepError> {
            Err(crate::StepError::BytesRejected { offset: 0 })
        }
        fn fill_bitmask(&mut self, row: &mut [u32]) {
            for (i, w) in row.iter_mut().enumerate() {
                *w = 0;
                for b in 0..32u32 {
                    let t = i as u32 * 32 + b;
                    let allow = match self.lie {
                        Lie::None => (t as usize) < self.vocab.vocab_size() && self.takes(t),
                        Lie::WideMask => true,
                        Lie::NarrowMask => false,
                    };
                    if allow {
                        *w |= 1 << b;
                    }
                }
            }
        }
        fn rollback(&mut self, k: usize) -> Result<(), crate::StepError> {
            Err(crate::StepError::RollbackTooFar {
                requested: k,
                available: 0,
            })
        }
        fn rollback_available(&self) -> usize {
            0
        }
        fn is_accepting(&self) -> bool {
            self.pos == self.text.len()
        }
        fn is_terminated(&self) -> bool {
            self.done
        }
        fn jump_forward(&self) -> Vec<u8> {
            Vec::new()
        }
        fn reset(&mut self) {
            self.pos = 0;
        }
        fn fork(&self) -> Box<dyn GrammarObject> {
            Box::new(LiteralMatcher {
                text: self.text.clone(),
                vocab: self.vocab.clone(),
                ..*self
            })
        }
        fn stats(&self) -> crate::GrammarStats {
            Default::default()
        }
    }

    fn setup(lie: Lie) -> (Arc<Vocabulary>, Literal) {
        let vocab = Arc::new(crate::vocab::fixtures::json_tiny());
        let backend = Literal {
            vocab: vocab.clone(),
            lie,
            panic_on_compile: false,
        };
        (vocab, backend)
    }

    fn run(lie: Lie, grammar_text: &str, text: &str, check: bool) -> Walk {
        let (vocab, backend) = setup(lie);
        let (g, _) = compile_timed(&backend, grammar_text);
        let tokens = vocab.encode_greedy(text.as_bytes()).unwrap();
        let mut row = vec![0u32; vocab.mask_words()];
        walk(
            g.unwrap().as_ref(),
            &vocab,
            &tokens,
            &mut row,
            WalkOptions {
                check_consistency: check,
            },
        )
    }

    #[test]
    fn accepts_and_times_every_token() {
        let w = run(Lie::None, r#"{"name": 12}"#, r#"{"name": 12}"#, true);
        assert!(w.accepted && w.matches() && w.reason.is_none() && w.mismatch.is_none());
        assert_eq!(
            w.mask_ns.len(),
            5,
            "{{\" name \": 12 }} in the greedy fixture tokenization"
        );
    }

    #[test]
    fn prefix_is_accepted_but_cannot_end() {
        let w = run(Lie::None, r#"{"name": 12}"#, r#"{"name": 1"#, true);
        assert!(w.accepted);
        assert_eq!(w.end_ok, Some(false));
        assert!(!w.matches());
        assert!(w.mismatch.is_none());
    }

    #[test]
    fn rejection_names_the_token_and_counts_its_step() {
        let w = run(Lie::None, r#"{"name": 12}"#, r#"{"name": 13}"#, true);
        assert!(!w.accepted && !w.is_engine_error());
        let reason = w.reason.unwrap();
        assert!(
            reason.starts_with("token 4 (id ") && reason.ends_with(") not in mask"),
            "{reason}"
        );
        assert_eq!(w.mask_ns.len(), 5, "the rejected \"3\" is timed too");
        assert!(w.mismatch.is_none());
    }

    #[test]
    fn a_refused_token_in_the_mask_is_an_engine_error() {
        let w = run(Lie::WideMask, "ab", "ac", false);
        assert!(!w.accepted && w.is_engine_error(), "{:?}", w.reason);
    }

    #[test]
    fn a_too_narrow_mask_is_a_mismatch_only_when_checked() {
        let w = run(Lie::NarrowMask, "ab", "ab", true);
        assert!(!w.accepted);
        assert!(w.mismatch.unwrap().contains("accept_token takes it"));
        let w = run(Lie::NarrowMask, "ab", "ab", false);
        assert!(w.mismatch.is_none());
    }

    #[test]
    fn end_check_disagreeing_with_is_accepting_is_a_mismatch() {
        // NarrowMask never sets a stop bit although the matcher accepts.
        let (vocab, backend) = setup(Lie::NarrowMask);
        let g = compile_timed(&backend, "").0.unwrap();
        let mut row = vec![0u32; vocab.mask_words()];
        let w = walk(
            g.as_ref(),
            &vocab,
            &[],
            &mut row,
            WalkOptions {
                check_consistency: true,
            },
        );
        assert_eq!(w.end_ok, Some(false));
        assert!(w.mismatch.unwrap().contains("is_accepting() = true"));
    }

    /// One worker for a run: compiles in turn, and a time-out or a panic
    /// in one compile leaves the next to a working thread.
    #[test]
    fn a_worker_goes_on_after_time_outs_and_panics() {
        let (_, backend) = setup(Lie::None);
        let backend: Arc<dyn GrammarBackend> = Arc::new(backend);
        let panicking: Arc<dyn GrammarBackend> = Arc::new(Literal {
            vocab: backend.vocabulary().clone(),
            lie: Lie::None,
            panic_on_compile: true,
        });
        let short = Some(Duration::from_millis(20));
        let schema = |s: &str| Constraint::json_schema(s);
        let mut worker = CompileWorker::new();
        for _ in 0..2 {
            assert!(matches!(
                worker.compile(backend.clone(), schema("ok"), short),
                CompileOutcome::Ready { .. }
            ));
            assert!(matches!(
                worker.compile(backend.clone(), schema("sleep"), short),
                CompileOutcome::TimedOut
            ));
            assert!(matches!(
                worker.compile(backend.clone(), schema("ok"), None),
                CompileOutcome::Ready { .. }
            ));
            match worker.compile(panicking.clone(), schema("x"), None) {
                CompileOutcome::Panicked { message } => assert_eq!(message, "boom"),
                _ => panic!("expected a caught panic"),
            }
        }
    }

    /// Work run after a compile runs on the worker's own thread, the same
    /// from one call to the next; a panic in it is caught and the worker
    /// goes on.
    #[test]
    fn work_runs_on_the_compile_thread() {
        let (_, backend) = setup(Lie::None);
        let backend: Arc<dyn GrammarBackend> = Arc::new(backend);
        let mut worker = CompileWorker::new();
        let here = || {
            let me = std::thread::current();
            (me.id(), me.name().map(str::to_string))
        };
        assert!(matches!(
            worker.compile(backend.clone(), Constraint::json_schema("ok"), None),
            CompileOutcome::Ready { .. }
        ));
        let first = worker.run(here).unwrap();
        assert_ne!(first.0, std::thread::current().id());
        assert_eq!(first.1.as_deref(), Some("tokensieve-compile"));
        let message = worker.run(|| panic!("walk exploded")).unwrap_err();
        assert_eq!(message, "walk exploded");
        assert!(matches!(
            worker.compile(backend, Constraint::json_schema("ok"), None),
            CompileOutcome::Ready { .. }
        ));
        assert_eq!(worker.run(here).unwrap(), first);
    }

    #[test]
    fn compile_timeout_panic_and_success() {
        let (_, backend) = setup(Lie::None);
        let backend: Arc<dyn GrammarBackend> = Arc::new(backend);
        let short = Some(Duration::from_millis(20));
        assert!(matches!(
            compile_with_timeout(backend.clone(), "sleep".into(), short),
            CompileOutcome::TimedOut
        ));
        assert!(matches!(
            compile_with_timeout(backend.clone(), "ok".into(), short),
            CompileOutcome::Ready { .. }
        ));
        let panicking: Arc<dyn GrammarBackend> = Arc::new(Literal {
            vocab: backend.vocabulary().clone(),
            lie: Lie::None,
            panic_on_compile: true,
        });
        match compile_with_timeout(panicking, "x".into(), None) {
            CompileOutcome::Panicked { message } => assert_eq!(message, "boom"),
            _ => panic!("expected a caught panic"),
        }
    }
}
