//! The compile service: a cache of compiled grammars keyed by the canonical
//! [`CacheKey`], filled by a pool of worker threads.
//!
//! [`GrammarCache::get_or_compile`] answers at once: a ready matcher (a fresh
//! one per request, forked from the cached grammar) or a [`PendingCompile`]
//! handle that can be polled, waited on with a timeout, or cancelled. Two
//! requests for the same key while it compiles share one compilation. Errors
//! are cached too (a bad schema does not get recompiled on every request).

use crate::error::GrammarError;
use crate::grammar::{CancelToken, CompiledGrammar, GrammarBackend, GrammarObject};
use crate::spec::{CacheKey, Constraint};
use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type CompileResult = Result<Arc<dyn CompiledGrammar>, GrammarError>;

/// Cache settings.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Compiler threads. Default: available parallelism, at most 8.
    pub workers: usize,
    /// Most entries kept; the oldest finished entry is evicted past it.
    /// Default 1024.
    pub max_entries: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            workers: std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
            max_entries: 1024,
        }
    }
}

/// Counters of a [`GrammarCache`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub compiled: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub evicted: u64,
    /// Sum of compile wall times.
    pub compile_time_total: Duration,
}

/// One compilation, shared by every handle waiting for it.
struct Slot {
    result: Mutex<Option<CompileResult>>,
    done: Condvar,
    cancelled: CancelToken,
}

impl Slot {
    fn new() -> Arc<Self> {
        Arc::new(Slot {
            result: Mutex::new(None),
            done: Condvar::new(),
            cancelled: CancelToken::new(),
        })
    }

    fn finish(&self, r: CompileResult) {
        let mut g = self.result.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(r);
        }
        self.done.notify_all();
    }
}

struct Job {
    constraint: Constraint,
    slot: Arc<Slot>,
}

struct Shared {
    backend: Arc<dyn GrammarBackend>,
    entries: Mutex<Entries>,
    stats: Mutex<CacheStats>,
    hits: AtomicU64,
    max_entries: usize,
}

#[derive(Default)]
struct Entries {
    map: HashMap<CacheKey, Arc<Slot>>,
    order: VecDeque<CacheKey>,
}

/// The answer to [`GrammarCache::get_or_compile`].
pub enum CacheResponse {
    /// The grammar was ready: here is a fresh matcher.
    Ready(Box<dyn GrammarObject>),
    /// The grammar failed to compile (possibly earlier, cached).
    Failed(GrammarError),
    /// Compilation is under way.
    Pending(PendingCompile),
}

/// A compilation in progress.
pub struct PendingCompile {
    slot: Arc<Slot>,
    shared: Arc<Shared>,
    key: CacheKey,
}

impl PendingCompile {
    /// `None` while compiling; then a fresh matcher or the error.
    pub fn poll(&self) -> Option<Result<Box<dyn GrammarObject>, GrammarError>> {
        let g = self.slot.result.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(matcher_from)
    }

    /// Waits up to `timeout`; [`GrammarError::Timeout`] if still compiling
    /// (the compilation goes on and later requests can still use it).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Box<dyn GrammarObject>, GrammarError> {
        let deadline = Instant::now() + timeout;
        let mut g = self.slot.result.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = g.as_ref() {
                return matcher_from(r);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(GrammarError::Timeout {
                    millis: timeout.as_millis(),
                });
            }
            g = self
                .slot
                .done
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits for the result, however long it takes.
    pub fn wait(&self) -> Result<Box<dyn GrammarObject>, GrammarError> {
        let mut g = self.slot.result.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = g.as_ref() {
                return matcher_from(r);
            }
            g = self.slot.done.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Cancels: waiters get [`GrammarError::Cancelled`], the entry is dropped
    /// from the cache, and a compilation that has not started never runs. One
    /// already running is asked to stop through its [`CancelToken`]
    /// (backends that poll it, like regex-fsm, stop at their next safe point;
    /// others finish in the background) and its result is discarded.
    pub fn cancel(&self) {
        self.slot.cancelled.cancel();
        self.slot.finish(Err(GrammarError::Cancelled));
        let mut e = self
            .shared
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if e.map
            .get(&self.key)
            .is_some_and(|s| Arc::ptr_eq(s, &self.slot))
        {
            e.map.remove(&self.key);
            e.order.retain(|k| k != &self.key);
        }
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .cancelled += 1;
    }

    pub fn key(&self) -> &CacheKey {
        &self.key
    }
}

fn matcher_from(r: &CompileResult) -> Result<Box<dyn GrammarObject>, GrammarError> {
    match r {
        Ok(g) => Ok(g.matcher()),
        Err(e) => Err(e.clone()),
    }
}

/// A thread-safe cache of compiled grammars for one backend.
pub struct GrammarCache {
    shared: Arc<Shared>,
    queue: Option<mpsc::Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl GrammarCache {
    pub fn new(backend: Arc<dyn GrammarBackend>) -> Self {
        Self::with_config(backend, CacheConfig::default())
    }

    pub fn with_config(backend: Arc<dyn GrammarBackend>, config: CacheConfig) -> Self {
        let shared = Arc::new(Shared {
            backend,
            entries: Mutex::new(Entries::default()),
            stats: Mutex::new(CacheStats::default()),
            hits: AtomicU64::new(0),
            max_entries: config.max_entries.max(1),
        });
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..config.workers.max(1))
            .map(|i| {
                let rx = rx.clone();
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("tokensieve-compile-{i}"))
                    .spawn(move || worker_loop(&rx, &shared))
                    .expect("spawning a compile worker thread")
            })
            .collect();
        GrammarCache {
            shared,
            queue: Some(tx),
            workers,
        }
    }

    pub fn backend(&self) -> &Arc<dyn GrammarBackend> {
        &self.shared.backend
    }

    /// A ready matcher, a cached error, or a pending handle. Never blocks on
    /// compilation.
    pub fn get_or_compile(&self, constraint: &Constraint) -> CacheResponse {
        let key = constraint.cache_key();
        let slot = {
            let mut e = self
                .shared
                .entries
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(slot) = e.map.get(&key).cloned() {
                drop(e);
                let g = slot.result.lock().unwrap_or_else(|e| e.into_inner());
                self.shared.hits.fetch_add(1, Ordering::Relaxed);
                return match g.as_ref() {
                    Some(Ok(grammar)) => CacheResponse::Ready(with_cache_hit(grammar.matcher())),
                    Some(Err(err)) => CacheResponse::Failed(err.clone()),
                    None => {
                        drop(g);
                        CacheResponse::Pending(PendingCompile {
                            slot,
                            shared: self.shared.clone(),
                            key,
                        })
                    }
                };
            }
            let slot = Slot::new();
            e.map.insert(key.clone(), slot.clone());
            e.order.push_back(key.clone());
            evict(&mut e, self.shared.max_entries, &self.shared.stats);
            slot
        };
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .misses += 1;
        let job = Job {
            constraint: constraint.clone(),
            slot: slot.clone(),
        };
        if let Some(q) = &self.queue {
            // The receiver lives as long as the workers, which live as long as self.
            let _ = q.send(job);
        }
        CacheResponse::Pending(PendingCompile {
            slot,
            shared: self.shared.clone(),
            key,
        })
    }

    /// Compiles (or fetches) and waits: the blocking convenience.
    pub fn matcher(&self, constraint: &Constraint) -> Result<Box<dyn GrammarObject>, GrammarError> {
        match self.get_or_compile(constraint) {
            CacheResponse::Ready(m) => Ok(m),
            CacheResponse::Failed(e) => Err(e),
            CacheResponse::Pending(p) => p.wait(),
        }
    }

    pub fn stats(&self) -> CacheStats {
        let mut s = self
            .shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        s.hits = self.shared.hits.load(Ordering::Relaxed);
        s
    }

    /// Entries currently held (ready, failed or pending).
    pub fn len(&self) -> usize {
        self.shared
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every entry (pending compilations still finish for their waiters).
    pub fn clear(&self) {
        let mut e = self
            .shared
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        e.map.clear();
        e.order.clear();
    }
}

impl Drop for GrammarCache {
    fn drop(&mut self) {
        self.queue.take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Evicts the oldest *finished* entries past the limit; pending ones stay.
fn evict(e: &mut Entries, max: usize, stats: &Mutex<CacheStats>) {
    let mut i = 0;
    while e.map.len() > max && i < e.order.len() {
        let key = e.order[i].clone();
        let finished = e
            .map
            .get(&key)
            .is_none_or(|s| s.result.lock().unwrap_or_else(|x| x.into_inner()).is_some());
        if finished {
            e.map.remove(&key);
            e.order.remove(i);
            stats.lock().unwrap_or_else(|x| x.into_inner()).evicted += 1;
        } else {
            i += 1;
        }
    }
}

fn worker_loop(rx: &Mutex<mpsc::Receiver<Job>>, shared: &Shared) {
    loop {
        let job = {
            let guard = rx.lock().unwrap_or_else(|e| e.into_inner());
            match guard.recv() {
                Ok(j) => j,
                Err(_) => return,
            }
        };
        if job.slot.cancelled.is_cancelled() {
            continue;
        }
        let t = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| {
            shared
                .backend
                .compile_cancellable(&job.constraint, &job.slot.cancelled)
        }))
        .unwrap_or_else(|p| Err(GrammarError::Panic(panic_message(&p))));
        let elapsed = t.elapsed();
        {
            let mut s = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
            s.compile_time_total += elapsed;
            match &result {
                Ok(_) => s.compiled += 1,
                Err(_) => s.failed += 1,
            }
        }
        if job.slot.cancelled.is_cancelled() {
            continue;
        }
        job.slot.finish(result);
    }
}

/// The text of a caught panic payload.
pub fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Marks a matcher's stats as coming from the cache.
fn with_cache_hit(inner: Box<dyn GrammarObject>) -> Box<dyn GrammarObject> {
    Box::new(CacheHit(inner))
}

/// A matcher handed out on a cache hit: identical, but its stats say so.
struct CacheHit(Box<dyn GrammarObject>);

impl GrammarObject for CacheHit {
    fn accept_token(&mut self, token: u32) -> Result<(), crate::error::StepError> {
        self.0.accept_token(token)
    }
    fn accept_tokens(&mut self, tokens: &[u32]) -> Result<(), crate::error::StepError> {
        self.0.accept_tokens(tokens)
    }
    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), crate::error::StepError> {
        self.0.accept_bytes(bytes)
    }
    fn fill_bitmask(&mut self, row: &mut [u32]) {
        self.0.fill_bitmask(row)
    }
    fn rollback(&mut self, k: usize) -> Result<(), crate::error::StepError> {
        self.0.rollback(k)
    }
    fn rollback_available(&self) -> usize {
        self.0.rollback_available()
    }
    fn is_accepting(&self) -> bool {
        self.0.is_accepting()
    }
    fn is_terminated(&self) -> bool {
        self.0.is_terminated()
    }
    fn jump_forward(&self) -> Vec<u8> {
        self.0.jump_forward()
    }
    fn reset(&mut self) {
        self.0.reset()
    }
    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(CacheHit(self.0.fork()))
    }
    fn maybe_init_reasoning(&mut self, thinking: bool) {
        self.0.maybe_init_reasoning(thinking)
    }
    fn stats(&self) -> crate::grammar::GrammarStats {
        let mut s = self.0.stats();
        s.cache_hit = true;
        s
    }
}
