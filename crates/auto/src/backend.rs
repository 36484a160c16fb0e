//! [`AutoBackend`] (earley at once, a regex-fsm table in the background),
//! its bounded table cache and background thread, and the compiled
//! [`AutoGrammar`].

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokensieve_core::{
    CancelToken, CompiledGrammar, Constraint, GrammarBackend, GrammarError, GrammarObject,
    SpecKind, Vocabulary,
};
use tokensieve_earley::{EarleyBackend, EarleyConfig, EarleyGrammar};
use tokensieve_regex_fsm::{RegexFsmBackend, RegexGrammar};

use crate::config::AutoConfig;
use crate::matcher::AutoMatcher;

/// The auto backend for one vocabulary: an earley backend that answers
/// every compile, a regex-fsm backend that builds tables in the
/// background, and the cache of tables built (see the crate docs).
pub struct AutoBackend {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AutoBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoBackend")
            .field("vocab_size", &self.shared.earley.vocabulary().vocab_size())
            .field("config", &self.shared.config)
            .finish()
    }
}

/// What the backend and its background thread share.
struct Shared {
    config: AutoConfig,
    earley: EarleyBackend,
    regex: RegexFsmBackend,
    tables: Mutex<Tables>,
}

/// The table cache and the background thread's queue.
#[derive(Default)]
struct Tables {
    /// Finished builds, least recently used first: a table, or `None` for
    /// a constraint that has none (not regular, or past the budget).
    done: VecDeque<(Constraint, Option<RegexGrammar>)>,
    /// Heap bytes of the tables in `done`.
    done_bytes: usize,
    /// Builds queued or running, for a compile of the same constraint to
    /// share: alive while some grammar waits for them.
    building: Vec<(Constraint, Weak<Claim>)>,
    /// Builds waiting for the background thread, oldest first.
    queue: VecDeque<Arc<Build>>,
    /// Whether a background thread is running (it exits once the queue is
    /// empty: no thread outlives the work).
    worker: bool,
}

/// One background build of a table.
pub(crate) struct Build {
    constraint: Constraint,
    cancel: CancelToken,
    /// The outcome, once finished: a table, or `None` (the grammar stays
    /// on earley). Read without a lock by every matcher at every call.
    outcome: OnceLock<Option<RegexGrammar>>,
    finished: Mutex<bool>,
    done: Condvar,
}

impl Build {
    fn finish(&self, outcome: Option<RegexGrammar>) {
        let _ = self.outcome.set(outcome);
        *self.finished.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.done.notify_all();
    }

    fn wait(&self) -> Option<&RegexGrammar> {
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        while !*finished {
            finished = self.done.wait(finished).unwrap_or_else(|e| e.into_inner());
        }
        drop(finished);
        self.outcome.get().and_then(Option::as_ref)
    }
}

/// The grammars' hold on a build: when the last grammar (and the last of
/// its matchers) waiting for it is dropped, the build is cancelled, so no
/// background work goes on for nobody (regex-fsm stops at its next trie
/// walk).
pub(crate) struct Claim(Arc<Build>);

impl Drop for Claim {
    fn drop(&mut self) {
        if self.0.outcome.get().is_none() {
            self.0.cancel.cancel();
        }
    }
}

impl AutoBackend {
    /// A backend for `vocab`. Builds (or reuses) the vocabulary's token
    /// trie, shared by both halves.
    pub fn new(vocab: Arc<Vocabulary>, config: AutoConfig) -> Self {
        // Both halves keep the same rollback window, or a move would
        // change what rollback can undo.
        let earley = EarleyConfig {
            max_rollback: config.max_rollback,
            ..config.earley.clone()
        };
        AutoBackend {
            shared: Arc::new(Shared {
                earley: EarleyBackend::new(vocab.clone(), earley),
                regex: RegexFsmBackend::new(vocab, config.table_config()),
                config,
                tables: Mutex::new(Tables::default()),
            }),
        }
    }

    pub fn config(&self) -> &AutoConfig {
        &self.shared.config
    }

    /// Finished builds the table cache holds (tables, and constraints
    /// known to have none).
    pub fn tables_kept(&self) -> usize {
        self.shared.lock().done.len()
    }

    /// Whether the background thread is running (it exits once its queue
    /// is empty).
    pub fn background_running(&self) -> bool {
        self.shared.lock().worker
    }

    /// Compiles with the concrete grammar type: the cached table when one
    /// is there, else earley's grammar with a table build queued (or
    /// joined) when the spec may have one.
    pub fn compile_auto(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<AutoGrammar, GrammarError> {
        let started = Instant::now();
        let shared = &self.shared;
        if shared.config.tables
            && let Some(Some(table)) = self.cached(constraint)
        {
            return Ok(AutoGrammar::new(GrammarParts {
                vocab: self.vocabulary().clone(),
                earley: None,
                ready: Some(table),
                claim: None,
                max_rollback: shared.config.max_rollback,
                compile_time: started.elapsed(),
                cache_hit: true,
            }));
        }
        let earley = shared.earley.compile_earley(constraint, cancel)?;
        let claim = if shared.config.tables {
            self.claim(constraint)
        } else {
            None
        };
        Ok(AutoGrammar::new(GrammarParts {
            vocab: self.vocabulary().clone(),
            earley: Some(earley),
            ready: None,
            claim,
            max_rollback: shared.config.max_rollback,
            compile_time: started.elapsed(),
            cache_hit: false,
        }))
    }

    /// The cached outcome for `constraint` (marked as just used), if any.
    fn cached(&self, constraint: &Constraint) -> Option<Option<RegexGrammar>> {
        let mut tables = self.shared.lock();
        let i = tables.done.iter().position(|(c, _)| c == constraint)?;
        let entry = tables.done.remove(i)?;
        let outcome = entry.1.clone();
        tables.done.push_back(entry);
        Some(outcome)
    }

    /// A hold on the build of `constraint`'s table: one already queued or
    /// running, or a new one for the background thread. `None` when the
    /// cache knows it has none.
    fn claim(&self, constraint: &Constraint) -> Option<Arc<Claim>> {
        let mut tables = self.shared.lock();
        if tables
            .done
            .iter()
            .any(|(c, t)| c == constraint && t.is_none())
        {
            return None;
        }
        tables.building.retain(|(_, w)| w.strong_count() > 0);
        if let Some(claim) = tables
            .building
            .iter()
            .find(|(c, _)| c == constraint)
            .and_then(|(_, w)| w.upgrade())
        {
            return Some(claim);
        }
        let build = Arc::new(Build {
            constraint: constraint.clone(),
            cancel: CancelToken::new(),
            outcome: OnceLock::new(),
            finished: Mutex::new(false),
            done: Condvar::new(),
        });
        let claim = Arc::new(Claim(build.clone()));
        tables
            .building
            .push((constraint.clone(), Arc::downgrade(&claim)));
        tables.queue.push_back(build);
        if !tables.worker {
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("tokensieve-auto-table".into())
                .spawn(move || shared.work());
            match spawned {
                Ok(_) => tables.worker = true,
                // No thread to be had: nothing is built, every grammar
                // stays on earley.
                Err(_) => {
                    for build in tables.queue.drain(..) {
                        build.finish(None);
                    }
                    tables.building.clear();
                    return None;
                }
            }
        }
        Some(claim)
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The background thread: builds queued tables one at a time, and
    /// exits as soon as the queue is empty.
    fn work(&self) {
        background_priority();
        loop {
            let build = {
                let mut tables = self.lock();
                match tables.queue.pop_front() {
                    Some(build) => build,
                    None => {
                        tables.worker = false;
                        return;
                    }
                }
            };
            if build.cancel.is_cancelled() {
                build.finish(None);
                continue;
            }
            // A panic inside a build is no table, never a dead thread
            // with builds waiting behind it.
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                self.build_table(&build.constraint, &build.cancel)
            }))
            .unwrap_or(None);
            let cancelled = build.cancel.is_cancelled();
            // In the cache before anyone waiting learns of it: a compile
            // after `wait_for_table` finds it there.
            {
                let mut tables = self.lock();
                tables
                    .building
                    .retain(|(c, w)| w.strong_count() > 0 && *c != build.constraint);
                if !cancelled {
                    self.keep(&mut tables, build.constraint.clone(), outcome.clone());
                }
            }
            build.finish(if cancelled { None } else { outcome });
        }
    }

    /// The table of `constraint`, built from the very language earley
    /// serves for it; `None` where that language is not regular or the
    /// build fails (a limit of the budget, a vocabulary that cannot
    /// complete the output, cancellation).
    fn build_table(&self, constraint: &Constraint, cancel: &CancelToken) -> Option<RegexGrammar> {
        let pattern = self.earley.regular_regex(constraint).ok()??;
        cancel.check().ok()?;
        self.regex.compile_regex_cancellable(&pattern, cancel).ok()
    }

    /// Puts a finished build in the cache, evicting the least recently used
    /// past the bounds.
    fn keep(&self, tables: &mut Tables, constraint: Constraint, outcome: Option<RegexGrammar>) {
        let config = &self.config;
        if config.table_cache_entries == 0 {
            return;
        }
        let bytes = outcome.as_ref().map_or(0, |t| t.memory_bytes());
        if bytes > config.table_cache_bytes {
            return;
        }
        if let Some(i) = tables.done.iter().position(|(c, _)| *c == constraint)
            && let Some((_, old)) = tables.done.remove(i)
        {
            tables.done_bytes -= old.map_or(0, |t| t.memory_bytes());
        }
        tables.done.push_back((constraint, outcome));
        tables.done_bytes += bytes;
        while tables.done.len() > config.table_cache_entries
            || tables.done_bytes > config.table_cache_bytes
        {
            let Some((_, old)) = tables.done.pop_front() else {
                break;
            };
            tables.done_bytes -= old.map_or(0, |t| t.memory_bytes());
        }
    }
}

/// Puts the calling thread in the idle scheduling class (Linux): the
/// build runs on a core nothing else wants (a second core while the
/// caller masks on the first), and never slows the threads that answer
/// masks. A machine busy on every core builds no table (matchers stay on
/// earley, which is always right). Elsewhere, the default priority.
fn background_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `sched_setscheduler` on pid 0 changes only the calling
        // thread's policy and reads `param`, a valid local, for the call.
        // Failure (a sandbox forbidding it) leaves the default priority.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        }
    }
}

impl GrammarBackend for AutoBackend {
    fn name(&self) -> &str {
        crate::BACKEND_NAME
    }

    fn supported_kinds(&self) -> &[SpecKind] {
        &tokensieve_earley::SUPPORTED_KINDS
    }

    fn vocabulary(&self) -> &Arc<Vocabulary> {
        self.shared.earley.vocabulary()
    }

    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        self.compile_cancellable(constraint, &CancelToken::new())
    }

    fn compile_cancellable(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        Ok(Arc::new(self.compile_auto(constraint, cancel)?))
    }
}

/// Where a grammar's table stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableState {
    /// Queued or being built in the background; matchers are on earley.
    Building,
    /// Built: matchers move onto it at their next call, new ones start on it.
    Ready,
    /// None will come (the language is not regular, the build failed or
    /// went past the budget, or tables are off): earley serves every mask.
    None,
}

pub(crate) struct GrammarParts {
    pub vocab: Arc<Vocabulary>,
    pub earley: Option<EarleyGrammar>,
    /// The table, when it was there at compile (from the cache).
    pub ready: Option<RegexGrammar>,
    /// The build to wait for, when not.
    pub claim: Option<Arc<Claim>>,
    pub max_rollback: usize,
    pub compile_time: Duration,
    pub cache_hit: bool,
}

impl GrammarParts {
    /// The table, when there is one now.
    pub fn table(&self) -> Option<&RegexGrammar> {
        self.ready.as_ref().or_else(|| {
            self.claim
                .as_ref()
                .and_then(|c| c.0.outcome.get())
                .and_then(Option::as_ref)
        })
    }

    /// Whether a table may still come.
    pub fn may_get_table(&self) -> bool {
        self.claim
            .as_ref()
            .is_some_and(|c| c.0.outcome.get().is_none_or(Option::is_some))
    }

    pub fn earley(&self) -> &EarleyGrammar {
        self.earley
            .as_ref()
            .expect("a grammar without its earley half has its table from the start")
    }
}

/// A compiled constraint of the auto backend: earley's grammar and a table
/// being built, or the table alone when the cache had it. Cloning it or
/// making a matcher is cheap.
#[derive(Clone)]
pub struct AutoGrammar {
    parts: Arc<GrammarParts>,
}

impl std::fmt::Debug for AutoGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoGrammar")
            .field("table", &self.table_state())
            .field("compile_time", &self.parts.compile_time)
            .finish()
    }
}

impl AutoGrammar {
    fn new(parts: GrammarParts) -> Self {
        AutoGrammar {
            parts: Arc::new(parts),
        }
    }

    /// A fresh matcher with its concrete type: on the table when it is
    /// ready, else on earley (moving onto the table once it is).
    pub fn auto_matcher(&self) -> AutoMatcher {
        AutoMatcher::new(self.parts.clone())
    }

    /// Where the table stands now.
    pub fn table_state(&self) -> TableState {
        if self.parts.table().is_some() {
            TableState::Ready
        } else if self.parts.may_get_table() {
            TableState::Building
        } else {
            TableState::None
        }
    }

    /// Blocks until the background build of this grammar's table has
    /// finished (at once when there is none to wait for) and says whether
    /// there is a table: what makes a move happen at a chosen step in tests
    /// and benchmarks. The build's work is bounded by the table budget.
    pub fn wait_for_table(&self) -> bool {
        if self.parts.ready.is_some() {
            return true;
        }
        self.parts
            .claim
            .as_ref()
            .is_some_and(|c| c.0.wait().is_some())
    }

    /// The table, when built.
    pub fn table(&self) -> Option<&RegexGrammar> {
        self.parts.table()
    }
}

impl CompiledGrammar for AutoGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        Box::new(self.auto_matcher())
    }

    fn compile_time(&self) -> Duration {
        self.parts.compile_time
    }

    fn memory_bytes(&self) -> usize {
        self.parts.earley.as_ref().map_or(0, |g| g.memory_bytes())
            + self.parts.table().map_or(0, |t| t.memory_bytes())
    }
}
