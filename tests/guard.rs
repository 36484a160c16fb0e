//! The serving boundary: a panic injected into a backend's compile or into
//! one matcher's call is that compile's error or that matcher's sticky error
//! state; the grammar's other matchers and the cache keep working.

use std::sync::{Arc, Once};
use std::time::Duration;

use tokensieve::bitmask::row_allowed_tokens;
use tokensieve::vocab::fixtures;
use tokensieve::{
    BackendConfig, CacheResponse, CompiledGrammar, Constraint, ConstraintSpec, GrammarBackend,
    GrammarCache, GrammarError, GrammarObject, GrammarStats, SpecKind, StepError, Vocabulary,
    create_backend, register_backend,
};

const INJECTED: &str = "injected panic";

/// Keeps the injected panics' messages out of the test output.
fn quiet_injected_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|m| m.contains(INJECTED));
            if !injected {
                default(info);
            }
        }));
    });
}

/// regex-fsm, but its compile panics on the regex `panic`, and its matchers
/// panic when asked to accept the token `z` or to fill after accepting `y`.
struct Injecting(Arc<dyn GrammarBackend>);

struct InjectingGrammar(Arc<dyn CompiledGrammar>, Arc<Vocabulary>);

struct InjectingMatcher {
    inner: Box<dyn GrammarObject>,
    vocab: Arc<Vocabulary>,
    fill_panics: bool,
}

impl GrammarBackend for Injecting {
    fn name(&self) -> &str {
        "injecting"
    }
    fn supported_kinds(&self) -> &[SpecKind] {
        self.0.supported_kinds()
    }
    fn vocabulary(&self) -> &Arc<Vocabulary> {
        self.0.vocabulary()
    }
    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        if constraint.spec == ConstraintSpec::Regex("panic".into()) {
            panic!("{INJECTED} in compile");
        }
        let inner = self.0.compile(constraint)?;
        Ok(Arc::new(InjectingGrammar(
            inner,
            self.0.vocabulary().clone(),
        )))
    }
}

impl CompiledGrammar for InjectingGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        Box::new(InjectingMatcher {
            inner: self.0.matcher(),
            vocab: self.1.clone(),
            fill_panics: false,
        })
    }
    fn compile_time(&self) -> Duration {
        self.0.compile_time()
    }
}

impl InjectingMatcher {
    fn id(&self, text: &[u8]) -> u32 {
        self.vocab.encode_greedy(text).unwrap()[0]
    }
}

impl GrammarObject for InjectingMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        if token == self.id(b"z") {
            panic!("{INJECTED} in accept_token");
        }
        self.fill_panics |= token == self.id(b"y");
        self.inner.accept_token(token)
    }
    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError> {
        self.inner.accept_bytes(bytes)
    }
    fn fill_bitmask(&mut self, row: &mut [u32]) {
        row.fill(u32::MAX);
        if self.fill_panics {
            panic!("{INJECTED} in fill_bitmask");
        }
        self.inner.fill_bitmask(row)
    }
    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        self.inner.rollback(k)
    }
    fn rollback_available(&self) -> usize {
        self.inner.rollback_available()
    }
    fn is_accepting(&self) -> bool {
        self.inner.is_accepting()
    }
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }
    fn jump_forward(&self) -> Vec<u8> {
        self.inner.jump_forward()
    }
    fn reset(&mut self) {
        self.inner.reset()
    }
    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(InjectingMatcher {
            inner: self.inner.fork(),
            vocab: self.vocab.clone(),
            fill_panics: self.fill_panics,
        })
    }
    fn stats(&self) -> GrammarStats {
        self.inner.stats()
    }
}

fn injecting_backend() -> (Arc<dyn GrammarBackend>, Arc<Vocabulary>) {
    quiet_injected_panics();
    register_backend(
        "injecting",
        "regex-fsm with injected panics",
        |config, vocab| {
            Ok(Arc::new(Injecting(tokensieve::create_backend(
                "regex-fsm",
                config,
                vocab,
            )?)))
        },
    );
    let vocab = Arc::new(fixtures::json_tiny());
    let backend = create_backend("injecting", &BackendConfig::default(), vocab.clone()).unwrap();
    (backend, vocab)
}

fn allowed(m: &mut dyn GrammarObject, vocab: &Vocabulary) -> Vec<u32> {
    let mut row = vec![0; vocab.mask_words()];
    m.fill_bitmask(&mut row);
    row_allowed_tokens(&row, vocab.vocab_size())
}

#[test]
fn a_panic_in_compile_is_that_compiles_error() {
    let (backend, _) = injecting_backend();
    let err = backend.compile(&Constraint::regex("panic")).err().unwrap();
    assert!(
        matches!(&err, GrammarError::Panic(m) if m.contains(INJECTED)),
        "{err}"
    );
    // The backend still compiles.
    assert!(backend.compile(&Constraint::regex("[a-z]+")).is_ok());
}

#[test]
fn a_panic_in_a_matcher_poisons_that_matcher_only() {
    let (backend, vocab) = injecting_backend();
    let grammar = backend.compile(&Constraint::regex("[a-z]+")).unwrap();
    let id = |t: &[u8]| vocab.encode_greedy(t).unwrap()[0];
    let (mut hit, mut other) = (grammar.matcher(), grammar.matcher());
    hit.accept_token(id(b"a")).unwrap();

    let err = hit.accept_token(id(b"z")).unwrap_err();
    assert!(
        matches!(&err, StepError::Poisoned(m) if m.contains(INJECTED)),
        "{err}"
    );
    // Sticky: every later call answers the same error, masks allow nothing.
    for result in [
        hit.accept_token(id(b"a")),
        hit.accept_bytes(b"a"),
        hit.rollback(1),
    ] {
        assert!(matches!(result, Err(StepError::Poisoned(_))), "{result:?}");
    }
    assert!(allowed(&mut *hit, &vocab).is_empty());
    assert!(!hit.is_accepting() && hit.jump_forward().is_empty());
    hit.reset();
    assert!(matches!(
        hit.accept_token(id(b"a")),
        Err(StepError::Poisoned(_))
    ));
    let mut forked = hit.fork();
    assert!(matches!(
        forked.accept_token(id(b"a")),
        Err(StepError::Poisoned(_))
    ));

    // The grammar's other matcher is untouched.
    assert!(allowed(&mut *other, &vocab).contains(&id(b"a")));
    other.accept_token(id(b"b")).unwrap();
    assert!(other.is_accepting());

    // A panic halfway through a fill leaves no half-written row.
    let mut filling = grammar.matcher();
    filling.accept_token(id(b"y")).unwrap();
    assert!(allowed(&mut *filling, &vocab).is_empty());
    assert!(matches!(
        filling.accept_token(id(b"a")),
        Err(StepError::Poisoned(m)) if m.contains("fill_bitmask")
    ));
}

#[test]
fn the_cache_keeps_serving_after_a_matcher_panics() {
    let (backend, vocab) = injecting_backend();
    let cache = GrammarCache::new(backend);
    let constraint = Constraint::regex("[a-z]+");
    let id = |t: &[u8]| vocab.encode_greedy(t).unwrap()[0];
    let matcher = |response| match response {
        CacheResponse::Ready(m) => m,
        CacheResponse::Pending(p) => p.wait().unwrap(),
        CacheResponse::Failed(e) => panic!("{e}"),
    };
    let mut first = matcher(cache.get_or_compile(&constraint));
    assert!(first.accept_token(id(b"z")).is_err());
    let mut second = matcher(cache.get_or_compile(&constraint));
    second.accept_token(id(b"a")).unwrap();
    assert!(second.is_accepting());
}
