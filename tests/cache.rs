//! The compile service: pending handles (poll, wait with timeout, cancel),
//! shared compilations, cache hits handing out fresh matchers, cached errors,
//! caught panics. No test depends on timing: a gated backend blocks
//! compilation until the test opens the gate.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tokensieve::vocab::fixtures;
use tokensieve::{
    BackendConfig, CacheConfig, CacheResponse, CompiledGrammar, Constraint, ConstraintSpec,
    GrammarBackend, GrammarCache, GrammarError, SpecKind, Vocabulary, none_backend::NoneBackend,
};

/// Compiles like `none`, but only once the gate is open; panics on the regex
/// `panic`, fails on the regex `fail`.
struct GatedBackend {
    inner: NoneBackend,
    vocab: Arc<Vocabulary>,
    gate: Arc<(Mutex<bool>, Condvar)>,
    compiles: Mutex<usize>,
}

impl GatedBackend {
    fn new() -> Arc<Self> {
        let vocab = Arc::new(fixtures::json_tiny());
        Arc::new(GatedBackend {
            inner: NoneBackend::new(vocab.clone(), &BackendConfig::default()),
            vocab,
            gate: Arc::new((Mutex::new(false), Condvar::new())),
            compiles: Mutex::new(0),
        })
    }

    fn open(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }
}

impl GrammarBackend for GatedBackend {
    fn name(&self) -> &str {
        "gated"
    }
    fn supported_kinds(&self) -> &[SpecKind] {
        &[SpecKind::Regex]
    }
    fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }
    fn compile(&self, c: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        let mut open = self.gate.0.lock().unwrap();
        while !*open {
            open = self.gate.1.wait(open).unwrap();
        }
        drop(open);
        *self.compiles.lock().unwrap() += 1;
        match &c.spec {
            ConstraintSpec::Regex(r) if r == "panic" => panic!("boom in compile"),
            ConstraintSpec::Regex(r) if r == "fail" => {
                Err(GrammarError::InvalidSpec("fail".into()))
            }
            _ => self.inner.compile(c),
        }
    }
}

fn cache(backend: Arc<GatedBackend>) -> GrammarCache {
    GrammarCache::with_config(
        backend,
        CacheConfig {
            workers: 2,
            max_entries: 3,
        },
    )
}

fn pending(r: CacheResponse) -> tokensieve::PendingCompile {
    match r {
        CacheResponse::Pending(p) => p,
        _ => panic!("expected a pending compilation"),
    }
}

#[test]
fn pending_then_ready_then_cache_hit() {
    let b = GatedBackend::new();
    let c = cache(b.clone());
    let p = pending(c.get_or_compile(&Constraint::regex("a")));
    assert!(p.poll().is_none());
    assert!(matches!(
        p.wait_timeout(Duration::from_millis(10)),
        Err(GrammarError::Timeout { .. })
    ));
    // A second request for the same key shares the compilation.
    let p2 = pending(c.get_or_compile(&Constraint::regex("a")));
    b.open();
    let m = p.wait().unwrap();
    assert!(!m.stats().cache_hit);
    assert!(p2.wait_timeout(Duration::from_secs(60)).is_ok());
    match c.get_or_compile(&Constraint::regex("a")) {
        CacheResponse::Ready(m) => assert!(m.stats().cache_hit),
        _ => panic!("expected a cache hit"),
    }
    assert_eq!(*b.compiles.lock().unwrap(), 1);
    let s = c.stats();
    assert_eq!((s.misses, s.compiled), (1, 1));
    assert!(s.hits >= 2);
}

#[test]
fn hits_hand_out_independent_matchers() {
    let b = GatedBackend::new();
    b.open();
    let c = cache(b);
    let mut m1 = c.matcher(&Constraint::regex("x")).unwrap();
    let m2 = c.matcher(&Constraint::regex("x")).unwrap();
    m1.accept_token(b'a' as u32).unwrap();
    assert_eq!(m1.rollback_available(), 1);
    assert_eq!(m2.rollback_available(), 0);
}

#[test]
fn cancel_wakes_waiters_and_drops_the_entry() {
    let b = GatedBackend::new();
    let c = cache(b.clone());
    let p = pending(c.get_or_compile(&Constraint::regex("c")));
    p.cancel();
    assert!(matches!(p.wait(), Err(GrammarError::Cancelled)));
    assert_eq!(c.len(), 0);
    assert_eq!(c.stats().cancelled, 1);
    b.open();
    // A new request compiles afresh.
    assert!(c.matcher(&Constraint::regex("c")).is_ok());
}

#[test]
fn errors_and_panics_are_cached_results() {
    let b = GatedBackend::new();
    b.open();
    let c = cache(b.clone());
    assert!(matches!(
        c.matcher(&Constraint::regex("fail")),
        Err(GrammarError::InvalidSpec(_))
    ));
    assert!(matches!(
        c.get_or_compile(&Constraint::regex("fail")),
        CacheResponse::Failed(_)
    ));
    match c.matcher(&Constraint::regex("panic")) {
        Err(GrammarError::Panic(msg)) => assert!(msg.contains("boom"), "{msg}"),
        other => panic!("expected a caught panic, got {:?}", other.err()),
    }
    // The pool survived the panic.
    assert!(c.matcher(&Constraint::regex("ok")).is_ok());
    assert_eq!(c.stats().failed, 2);
}

#[test]
fn oldest_finished_entries_are_evicted() {
    let b = GatedBackend::new();
    b.open();
    let c = cache(b);
    for r in ["1", "2", "3", "4", "5"] {
        c.matcher(&Constraint::regex(r)).unwrap();
    }
    assert_eq!(c.len(), 3);
    assert_eq!(c.stats().evicted, 2);
}

/// Compiles like `none`, except that the regex `block` runs until its
/// compilation is cancelled (or a failsafe far beyond the test's waits).
struct CancellableBackend {
    inner: NoneBackend,
    vocab: Arc<Vocabulary>,
    started: std::sync::atomic::AtomicBool,
    saw_cancel: std::sync::atomic::AtomicBool,
}

impl GrammarBackend for CancellableBackend {
    fn name(&self) -> &str {
        "cancellable"
    }
    fn supported_kinds(&self) -> &[SpecKind] {
        &[SpecKind::Regex]
    }
    fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }
    fn compile(&self, c: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        self.inner.compile(c)
    }
    fn compile_cancellable(
        &self,
        c: &Constraint,
        cancel: &tokensieve::CancelToken,
    ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        if matches!(&c.spec, ConstraintSpec::Regex(r) if r == "block") {
            self.started
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let failsafe = std::time::Instant::now() + Duration::from_secs(300);
            while std::time::Instant::now() < failsafe {
                if let Err(e) = cancel.check() {
                    self.saw_cancel
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.inner.compile(c)
    }
}

#[test]
fn cancel_stops_a_running_compilation_and_frees_its_worker() {
    let vocab = Arc::new(fixtures::json_tiny());
    let backend = Arc::new(CancellableBackend {
        inner: NoneBackend::new(vocab.clone(), &BackendConfig::default()),
        vocab,
        started: std::sync::atomic::AtomicBool::new(false),
        saw_cancel: std::sync::atomic::AtomicBool::new(false),
    });
    // One worker: the next compilation can only run once the blocked one
    // has stopped.
    let cache = GrammarCache::with_config(
        backend.clone(),
        CacheConfig {
            workers: 1,
            max_entries: 4,
        },
    );
    let blocked = pending(cache.get_or_compile(&Constraint::regex("block")));
    let next = pending(cache.get_or_compile(&Constraint::regex("after")));
    // Cancel once it runs (a compilation cancelled before it starts is
    // skipped, which is another path).
    while !backend.started.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    blocked.cancel();
    assert!(matches!(
        blocked.wait_timeout(Duration::from_secs(1)),
        Err(GrammarError::Cancelled)
    ));
    // Without cooperative cancellation the worker would stay blocked for the
    // failsafe's 300 s, well past this wait.
    assert!(next.wait_timeout(Duration::from_secs(120)).is_ok());
    assert!(backend.saw_cancel.load(std::sync::atomic::Ordering::SeqCst));
}
