//! The serving boundary: a panic inside a backend never reaches the engine.
//!
//! [`GuardedBackend`] wraps any backend. A panic while compiling is a
//! [`GrammarError::Panic`]; a panic inside a matcher call turns that matcher
//! (and only it) into a sticky error state: every later call answers
//! [`StepError::Poisoned`] with the panic's message, a mask is all zeros, and
//! the compiled grammar, its other matchers and the [`crate::GrammarCache`]
//! holding it keep working. The facade's `create_backend` hands out guarded
//! backends, so every user of the public API gets this.
//!
//! A guarded call costs one `catch_unwind`, which does nothing until a panic
//! unwinds (no allocation, no lock).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use crate::cache::panic_message;
use crate::{
    CancelToken, CompiledGrammar, Constraint, GrammarBackend, GrammarError, GrammarObject,
    GrammarStats, SpecKind, StepError, Vocabulary,
};

/// A backend whose compiles and matchers catch panics (see the module docs).
pub struct GuardedBackend(pub Arc<dyn GrammarBackend>);

impl GrammarBackend for GuardedBackend {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn supported_kinds(&self) -> &[SpecKind] {
        self.0.supported_kinds()
    }

    fn vocabulary(&self) -> &Arc<Vocabulary> {
        self.0.vocabulary()
    }

    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        guard_compile(|| self.0.compile(constraint))
    }

    fn compile_cancellable(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        guard_compile(|| self.0.compile_cancellable(constraint, cancel))
    }
}

fn guard_compile(
    compile: impl FnOnce() -> Result<Arc<dyn CompiledGrammar>, GrammarError>,
) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
    let grammar = catch_unwind(AssertUnwindSafe(compile))
        .unwrap_or_else(|p| Err(GrammarError::Panic(panic_message(&p))))?;
    Ok(Arc::new(GuardedGrammar(grammar)))
}

/// A compiled grammar whose matchers are [`Guarded`].
struct GuardedGrammar(Arc<dyn CompiledGrammar>);

impl CompiledGrammar for GuardedGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        match catch_unwind(AssertUnwindSafe(|| self.0.matcher())) {
            Ok(inner) => Box::new(Guarded::new(inner)),
            Err(p) => Box::new(Guarded {
                inner: None,
                poisoned: Some(panic_message(&p)),
                stats: GrammarStats::default(),
            }),
        }
    }

    fn compile_time(&self) -> Duration {
        self.0.compile_time()
    }

    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }
}

/// A matcher that turns a panic of the one it wraps into a sticky error.
pub struct Guarded {
    /// `None` when making the matcher itself panicked.
    inner: Option<Box<dyn GrammarObject>>,
    /// The message of the panic that poisoned this matcher.
    poisoned: Option<String>,
    /// The stats as of the panic (the inner matcher is not asked again).
    stats: GrammarStats,
}

impl Guarded {
    /// Guards `inner`.
    pub fn new(inner: Box<dyn GrammarObject>) -> Guarded {
        Guarded {
            inner: Some(inner),
            poisoned: None,
            stats: GrammarStats::default(),
        }
    }

    /// The panic message, once a call has panicked.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Runs `f` on the inner matcher, or answers `dead` once poisoned. A
    /// panic poisons the matcher and drops the inner one (its state may be
    /// half updated), keeping its last stats.
    fn call<T>(
        &mut self,
        dead: impl FnOnce(&str) -> T,
        f: impl FnOnce(&mut dyn GrammarObject) -> T,
    ) -> T {
        let inner = match (&self.poisoned, self.inner.as_deref_mut()) {
            (None, Some(inner)) => inner,
            (Some(why), _) => return dead(why),
            (None, None) => unreachable!("a matcher without its inner one is poisoned"),
        };
        match catch_unwind(AssertUnwindSafe(|| f(&mut *inner))) {
            Ok(t) => t,
            Err(p) => {
                let why = panic_message(&p);
                if let Some(inner) = self.inner.take() {
                    // Its stats are plain counters: reading them cannot be
                    // harmed by the state the panic left.
                    self.stats =
                        catch_unwind(AssertUnwindSafe(|| inner.stats())).unwrap_or_default();
                    // Dropping a broken state may panic too: caught as well.
                    let _ = catch_unwind(AssertUnwindSafe(|| drop(inner)));
                }
                let answer = dead(&why);
                self.poisoned = Some(why);
                answer
            }
        }
    }

    fn peek<T>(&self, dead: T, f: impl FnOnce(&dyn GrammarObject) -> T) -> T {
        match (&self.poisoned, self.inner.as_deref()) {
            (None, Some(inner)) => catch_unwind(AssertUnwindSafe(|| f(inner))).unwrap_or(dead),
            _ => dead,
        }
    }
}

fn poisoned(why: &str) -> StepError {
    StepError::Poisoned(format!("the backend panicked: {why}"))
}

impl GrammarObject for Guarded {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        self.call(|w| Err(poisoned(w)), |m| m.accept_token(token))
    }

    fn accept_tokens(&mut self, tokens: &[u32]) -> Result<(), StepError> {
        self.call(|w| Err(poisoned(w)), |m| m.accept_tokens(tokens))
    }

    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError> {
        self.call(|w| Err(poisoned(w)), |m| m.accept_bytes(bytes))
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) {
        // A poisoned matcher allows nothing (as a backend's own error state
        // does); a panic halfway through a fill must not leave its half row.
        let done = self.call(
            |_| false,
            |m| {
                m.fill_bitmask(row);
                true
            },
        );
        if !done {
            row.fill(0);
        }
    }

    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        self.call(|w| Err(poisoned(w)), |m| m.rollback(k))
    }

    fn rollback_available(&self) -> usize {
        self.peek(0, |m| m.rollback_available())
    }

    fn is_accepting(&self) -> bool {
        self.peek(false, |m| m.is_accepting())
    }

    fn is_terminated(&self) -> bool {
        self.peek(false, |m| m.is_terminated())
    }

    fn jump_forward(&self) -> Vec<u8> {
        self.peek(Vec::new(), |m| m.jump_forward())
    }

    fn reset(&mut self) {
        // The state after a panic is not trusted, not even reset.
        self.call(|_| (), |m| m.reset())
    }

    fn fork(&self) -> Box<dyn GrammarObject> {
        let inner = match (&self.poisoned, self.inner.as_deref()) {
            (None, Some(inner)) => catch_unwind(AssertUnwindSafe(|| inner.fork())),
            _ => Err(Box::new("forked from a poisoned matcher") as Box<dyn std::any::Any + Send>),
        };
        match inner {
            Ok(inner) => Box::new(Guarded::new(inner)),
            Err(p) => Box::new(Guarded {
                inner: None,
                poisoned: Some(self.poisoned.clone().unwrap_or_else(|| panic_message(&p))),
                stats: self.stats.clone(),
            }),
        }
    }

    fn maybe_init_reasoning(&mut self, thinking: bool) {
        self.call(|_| (), |m| m.maybe_init_reasoning(thinking))
    }

    fn stats(&self) -> GrammarStats {
        match (&self.poisoned, self.inner.as_deref()) {
            (None, Some(inner)) => {
                catch_unwind(AssertUnwindSafe(|| inner.stats())).unwrap_or_default()
            }
            _ => self.stats.clone(),
        }
    }
}
