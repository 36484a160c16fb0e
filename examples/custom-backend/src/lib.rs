//! A third-party backend, registered without touching tokensieve's code.
//!
//! `example-choice` constrains output to one of a list of strings (the
//! `Choice` spec), by brute force: a token is allowed when the text so far
//! plus the token's bytes is a prefix of some choice. It is deliberately
//! simple (O(vocabulary × choices) per mask): the point is the registration.
//! Depending on this crate is enough for `tokensieve::create_backend
//! ("example-choice", ..)` to find it, through `inventory`.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tokensieve_core::bitmask::row_allow;
use tokensieve_core::{
    BackendRegistration, CompiledGrammar, Constraint, ConstraintSpec, GrammarBackend, GrammarError,
    GrammarObject, GrammarStats, SpecKind, StepError, Vocabulary,
};

/// The registered name.
pub const NAME: &str = "example-choice";

tokensieve_core::inventory::submit! {
    BackendRegistration {
        name: NAME,
        aliases: &[],
        description: "example third-party backend: one of a list of strings (brute force)",
        factory: |config, vocab| {
            // It reads no option: one given is a mistake to name.
            config.check_options(NAME, &[])?;
            Ok(Arc::new(ChoiceBackend { vocab, max_rollback: config.max_rollback }))
        },
    }
}

pub struct ChoiceBackend {
    vocab: Arc<Vocabulary>,
    max_rollback: usize,
}

impl GrammarBackend for ChoiceBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn supported_kinds(&self) -> &[SpecKind] {
        &[SpecKind::Choice]
    }

    fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        let t = Instant::now();
        let ConstraintSpec::Choice(choices) = &constraint.spec else {
            return Err(self.unsupported_spec(constraint.kind()));
        };
        if choices.is_empty() {
            return Err(GrammarError::InvalidSpec("empty choice list".into()));
        }
        Ok(Arc::new(ChoiceGrammar {
            vocab: self.vocab.clone(),
            choices: Arc::new(choices.iter().map(|c| c.as_bytes().to_vec()).collect()),
            max_rollback: self.max_rollback,
            compile_time: t.elapsed(),
        }))
    }
}

struct ChoiceGrammar {
    vocab: Arc<Vocabulary>,
    choices: Arc<Vec<Vec<u8>>>,
    max_rollback: usize,
    compile_time: Duration,
}

impl CompiledGrammar for ChoiceGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        Box::new(ChoiceMatcher {
            vocab: self.vocab.clone(),
            choices: self.choices.clone(),
            max_rollback: self.max_rollback,
            text: Vec::new(),
            step_ends: Vec::new(),
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
struct ChoiceMatcher {
    vocab: Arc<Vocabulary>,
    choices: Arc<Vec<Vec<u8>>>,
    max_rollback: usize,
    /// Output so far.
    text: Vec<u8>,
    /// `text.len()` before each kept step (the last `max_rollback` steps).
    step_ends: Vec<usize>,
    terminated: bool,
    stats: GrammarStats,
}

impl ChoiceMatcher {
    fn viable(&self, extra: &[u8]) -> bool {
        self.choices.iter().any(|c| {
            c.len() >= self.text.len() + extra.len()
                && c.starts_with(&self.text)
                && c[self.text.len()..].starts_with(extra)
        })
    }

    fn push_step(&mut self) {
        self.step_ends.push(self.text.len());
        if self.step_ends.len() > self.max_rollback {
            self.step_ends.remove(0);
        }
    }
}

impl GrammarObject for ChoiceMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        if self.vocab.is_stop(token) {
            if !self.is_accepting() {
                return Err(StepError::TokenRejected { token });
            }
            self.push_step();
            self.terminated = true;
            self.stats.tokens_accepted += 1;
            return Ok(());
        }
        let vocab = self.vocab.clone();
        let bytes = vocab
            .grammar_bytes(token)
            .ok_or(StepError::InvalidToken { token })?;
        if !self.viable(bytes) {
            return Err(StepError::TokenRejected { token });
        }
        self.push_step();
        self.text.extend_from_slice(bytes);
        self.stats.tokens_accepted += 1;
        Ok(())
    }

    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        if !self.viable(bytes) {
            return Err(StepError::BytesRejected { offset: 0 });
        }
        self.push_step();
        self.text.extend_from_slice(bytes);
        Ok(())
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) {
        let t = Instant::now();
        row.fill(0);
        if !self.terminated {
            for (id, bytes) in self.vocab.grammar_tokens() {
                if self.viable(bytes) {
                    row_allow(row, id);
                }
            }
            if self.is_accepting() {
                for &id in self.vocab.stop_tokens() {
                    row_allow(row, id);
                }
            }
        }
        self.stats.record_mask(t.elapsed());
    }

    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        if k > self.step_ends.len() {
            return Err(StepError::RollbackTooFar {
                requested: k,
                available: self.step_ends.len(),
            });
        }
        if k > 0 {
            let len = self.step_ends[self.step_ends.len() - k];
            self.step_ends.truncate(self.step_ends.len() - k);
            self.text.truncate(len);
            self.terminated = false;
            self.stats.rollbacks += k as u64;
        }
        Ok(())
    }

    fn rollback_available(&self) -> usize {
        self.step_ends.len()
    }

    fn is_accepting(&self) -> bool {
        self.choices.contains(&self.text)
    }

    fn is_terminated(&self) -> bool {
        self.terminated
    }

    fn jump_forward(&self) -> Vec<u8> {
        // The longest common continuation of every choice still viable,
        // cut back to a UTF-8 boundary; nothing if the output may end here.
        if self.terminated || self.is_accepting() {
            return Vec::new();
        }
        let mut live = self.choices.iter().filter(|c| c.starts_with(&self.text));
        let Some(first) = live.next() else {
            return Vec::new();
        };
        let mut common = &first[self.text.len()..];
        for c in live {
            let rest = &c[self.text.len()..];
            let n = common.iter().zip(rest).take_while(|(a, b)| a == b).count();
            common = &common[..n];
        }
        let valid = match std::str::from_utf8(common) {
            Ok(_) => common.len(),
            Err(e) => e.valid_up_to(),
        };
        common[..valid].to_vec()
    }

    fn reset(&mut self) {
        self.text.clear();
        self.step_ends.clear();
        self.terminated = false;
    }

    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(self.clone())
    }

    fn stats(&self) -> GrammarStats {
        self.stats.clone()
    }
}
