//! The backend contracts: a [`GrammarBackend`] compiles a [`Constraint`] into
//! an immutable, shareable [`CompiledGrammar`]; each request gets its own
//! cheap [`GrammarObject`] (matcher) from it.

use crate::error::{GrammarError, StepError};
use crate::spec::{Constraint, SpecKind};
use crate::vocab::Vocabulary;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Asks a compilation in progress to stop. Cloning shares the flag: whoever
/// holds a clone can cancel; the backend polls it at its own safe points and
/// then returns [`GrammarError::Cancelled`]. Backends that never poll simply
/// finish (the result is then thrown away by whoever cancelled).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once cancelled: for `?` at a backend's safe points.
    pub fn check(&self) -> Result<(), GrammarError> {
        if self.is_cancelled() {
            Err(GrammarError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Compiles constraints for one vocabulary. Thread-safe; compilation is the
/// expensive, cacheable step.
pub trait GrammarBackend: Send + Sync {
    /// The registered name (`regex-fsm`, `none`, …).
    fn name(&self) -> &str;

    /// Spec kinds this backend compiles; others are a
    /// [`GrammarError::UnsupportedSpec`].
    fn supported_kinds(&self) -> &[SpecKind];

    /// The vocabulary masks are computed over.
    fn vocabulary(&self) -> &Arc<Vocabulary>;

    /// Compiles a constraint. Must never panic on bad input and never accept a
    /// wider language than asked: what it cannot express is an error.
    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError>;

    /// [`compile`](Self::compile) that stops early, with
    /// [`GrammarError::Cancelled`], once `cancel` is cancelled: what a
    /// serving engine calls for a request that may be aborted while its
    /// grammar compiles. The default does not poll (it compiles to the end).
    fn compile_cancellable(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        let _ = cancel;
        self.compile(constraint)
    }

    /// The error for a spec kind this backend does not support.
    fn unsupported_spec(&self, kind: SpecKind) -> GrammarError {
        GrammarError::UnsupportedSpec {
            backend: self.name().to_string(),
            kind: kind.to_string(),
            supported: self
                .supported_kinds()
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// A compiled constraint: immutable, shared between requests.
pub trait CompiledGrammar: Send + Sync {
    /// A fresh matcher at the start of the output.
    fn matcher(&self) -> Box<dyn GrammarObject>;

    /// How long compilation took.
    fn compile_time(&self) -> Duration;

    /// Approximate heap bytes held (index tables …), for cache accounting.
    fn memory_bytes(&self) -> usize {
        0
    }
}

/// Per-request matcher state. A token rejected by any method leaves the state
/// unchanged.
///
/// Stop tokens: [`fill_bitmask`](Self::fill_bitmask) allows a stop token
/// exactly when [`is_accepting`](Self::is_accepting); accepting one terminates
/// the matcher. Special and padding ids are never allowed.
pub trait GrammarObject: Send {
    /// Advances by one token.
    fn accept_token(&mut self, token: u32) -> Result<(), StepError>;

    /// Advances by several tokens; stops at the first rejected one and returns
    /// its error (the tokens before it stay accepted).
    fn accept_tokens(&mut self, tokens: &[u32]) -> Result<(), StepError> {
        tokens.iter().try_for_each(|&t| self.accept_token(t))
    }

    /// Advances by raw bytes (for jump-forward); counts as one step for
    /// [`rollback`](Self::rollback). All-or-nothing.
    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError>;

    /// Writes this request's mask into `row` (`ceil(vocab_size/32)` words),
    /// overwriting every word.
    fn fill_bitmask(&mut self, row: &mut [u32]);

    /// Undoes the last `k` steps (tokens or byte runs). At most
    /// `BackendConfig::max_rollback` steps are kept.
    fn rollback(&mut self, k: usize) -> Result<(), StepError>;

    /// How many steps [`rollback`](Self::rollback) can undo right now.
    fn rollback_available(&self) -> usize;

    /// May the output end here?
    fn is_accepting(&self) -> bool;

    /// Has a stop token been accepted?
    fn is_terminated(&self) -> bool;

    /// Bytes that are certain to come next, whatever is sampled (may be
    /// empty). Never splits a UTF-8 character.
    fn jump_forward(&self) -> Vec<u8>;

    /// Back to the start, as from [`CompiledGrammar::matcher`].
    fn reset(&mut self);

    /// An independent copy of this matcher in its current state (SGLang's
    /// `copy()`): cheap, shares the compiled grammar.
    fn fork(&self) -> Box<dyn GrammarObject>;

    /// Reasoning models: `true` = the request starts inside a thinking section
    /// (unconstrained until the think-end token). Only the reasoner wrapper
    /// acts on it.
    fn maybe_init_reasoning(&mut self, _thinking: bool) {}

    /// Counters for this request.
    fn stats(&self) -> GrammarStats;
}

/// What a matcher has done so far, and how its grammar was obtained.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GrammarStats {
    /// Wall time of the compilation that produced this matcher's grammar.
    pub compile_time: Duration,
    /// Whether the grammar came from a cache.
    pub cache_hit: bool,
    /// Masks filled.
    pub masks: u64,
    /// Total and worst time spent filling masks.
    pub mask_time_total: Duration,
    pub mask_time_max: Duration,
    /// Tokens accepted (including a stop token).
    pub tokens_accepted: u64,
    /// Rollback steps performed.
    pub rollbacks: u64,
}

impl GrammarStats {
    /// Records one mask fill of duration `d`.
    pub fn record_mask(&mut self, d: Duration) {
        self.masks += 1;
        self.mask_time_total += d;
        if d > self.mask_time_max {
            self.mask_time_max = d;
        }
    }
}
