//! The `none` backend: every token allowed, for every spec. It does **not**
//! constrain anything; it exists as the floor of benchmarks (what mask
//! computation costs when there is nothing to compute).

use crate::error::{GrammarError, StepError};
use crate::grammar::{CompiledGrammar, GrammarBackend, GrammarObject, GrammarStats};
use crate::registry::{BackendConfig, BackendRegistration};
use crate::spec::{Constraint, SpecKind};
use crate::vocab::Vocabulary;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything allowed (but special and padding ids); stop tokens always allowed.
pub struct NoneBackend {
    vocab: Arc<Vocabulary>,
    /// The row every matcher copies: all grammar tokens and stop tokens set.
    row: Arc<Vec<u32>>,
    max_rollback: usize,
}

impl NoneBackend {
    pub fn new(vocab: Arc<Vocabulary>, config: &BackendConfig) -> Self {
        let mut row = vec![0u32; vocab.mask_words()];
        for (id, _) in vocab.grammar_tokens() {
            crate::bitmask::row_allow(&mut row, id);
        }
        for &id in vocab.stop_tokens() {
            crate::bitmask::row_allow(&mut row, id);
        }
        NoneBackend {
            vocab,
            row: Arc::new(row),
            max_rollback: config.max_rollback,
        }
    }
}

impl GrammarBackend for NoneBackend {
    fn name(&self) -> &str {
        "none"
    }

    fn supported_kinds(&self) -> &[SpecKind] {
        &SpecKind::ALL
    }

    fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    fn compile(&self, _constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        let t = Instant::now();
        Ok(Arc::new(NoneGrammar {
            vocab: self.vocab.clone(),
            row: self.row.clone(),
            max_rollback: self.max_rollback,
            compile_time: t.elapsed(),
        }))
    }
}

struct NoneGrammar {
    vocab: Arc<Vocabulary>,
    row: Arc<Vec<u32>>,
    max_rollback: usize,
    compile_time: Duration,
}

impl CompiledGrammar for NoneGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        Box::new(NoneMatcher {
            vocab: self.vocab.clone(),
            row: self.row.clone(),
            max_rollback: self.max_rollback,
            steps: 0,
            terminated: false,
            stats: GrammarStats {
                compile_time: self.compile_time,
                ..Default::default()
            },
        })
    }

    fn compile_time(&self) -> Duration {
        self.compile_time
    }
}

#[derive(Clone)]
struct NoneMatcher {
    vocab: Arc<Vocabulary>,
    row: Arc<Vec<u32>>,
    max_rollback: usize,
    /// Steps kept for rollback (capped at max_rollback).
    steps: usize,
    terminated: bool,
    stats: GrammarStats,
}

impl GrammarObject for NoneMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        if self.vocab.is_stop(token) {
            self.terminated = true;
        } else if self.vocab.grammar_bytes(token).is_none() {
            return Err(StepError::InvalidToken { token });
        }
        self.steps = (self.steps + 1).min(self.max_rollback);
        self.stats.tokens_accepted += 1;
        Ok(())
    }

    fn accept_bytes(&mut self, _bytes: &[u8]) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        self.steps = (self.steps + 1).min(self.max_rollback);
        Ok(())
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) {
        let t = Instant::now();
        row.copy_from_slice(&self.row);
        self.stats.record_mask(t.elapsed());
    }

    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        if k > self.steps {
            return Err(StepError::RollbackTooFar {
                requested: k,
                available: self.steps,
            });
        }
        self.steps -= k;
        if k > 0 {
            self.terminated = false;
        }
        self.stats.rollbacks += k as u64;
        Ok(())
    }

    fn rollback_available(&self) -> usize {
        self.steps
    }

    fn is_accepting(&self) -> bool {
        true
    }

    fn is_terminated(&self) -> bool {
        self.terminated
    }

    fn jump_forward(&self) -> Vec<u8> {
        Vec::new()
    }

    fn reset(&mut self) {
        self.steps = 0;
        self.terminated = false;
    }

    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(self.clone())
    }

    fn stats(&self) -> GrammarStats {
        self.stats.clone()
    }
}

inventory::submit! {
    BackendRegistration {
        name: "none",
        aliases: &[],
        description: "no constraint at all: every token allowed (benchmark floor)",
        factory: |config, vocab| {
            config.check_options("none", &[])?;
            Ok(Arc::new(NoneBackend::new(vocab, config)))
        },
    }
}
