//! # tokensieve-reasoner
//!
//! Wraps any backend for reasoning models (`<think> … </think>` then the
//! answer). While the request is thinking, every token of the tokenizer is
//! allowed; the think-end token switches to the inner grammar and is **never
//! fed to it**; from then on the inner grammar constrains. Rollback undoes
//! thinking tokens, the switch and inner tokens together, in order.
//!
//! Use it through `tokensieve::create_backend` with
//! `BackendConfig::think_end_token` set, or wrap a backend yourself with
//! [`ReasonerBackend::new`]. A matcher starts thinking; call
//! `maybe_init_reasoning(false)` on a fresh matcher for a request whose prompt
//! already closed the thinking section (or a model that skips it).
//!
//! While thinking, [`GrammarObject::is_accepting`] is `false` (no answer has
//! been produced yet) although stop tokens are in the (full) mask: a model that
//! stops while thinking ends its request, which is its choice to make.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokensieve_core::{
    CancelToken, CompiledGrammar, Constraint, GrammarBackend, GrammarError, GrammarObject,
    GrammarStats, SpecKind, StepError, Vocabulary,
};

/// A backend whose matchers think freely until the think-end token.
pub struct ReasonerBackend {
    inner: Arc<dyn GrammarBackend>,
    think_end: u32,
    max_rollback: usize,
    name: String,
}

impl ReasonerBackend {
    /// Wraps `inner`; `think_end` is the think-end token's text (e.g.
    /// `</think>`), which must be exactly one token of the vocabulary;
    /// `max_rollback` bounds the steps kept for rollback (as
    /// `BackendConfig::max_rollback` does for the inner backend).
    pub fn new(
        inner: Arc<dyn GrammarBackend>,
        think_end: &str,
        max_rollback: usize,
    ) -> Result<Self, GrammarError> {
        let vocab = inner.vocabulary();
        let id = find_token(vocab, think_end.as_bytes()).ok_or_else(|| {
            GrammarError::InvalidConfig(format!(
                "think-end token {think_end:?} is not a single token of the vocabulary"
            ))
        })?;
        Ok(Self::with_token_id(inner, id, max_rollback))
    }

    /// Wraps `inner` with the think-end token given by id.
    pub fn with_token_id(
        inner: Arc<dyn GrammarBackend>,
        think_end: u32,
        max_rollback: usize,
    ) -> Self {
        let name = format!("{}+reasoner", inner.name());
        ReasonerBackend {
            inner,
            think_end,
            max_rollback,
            name,
        }
    }

    pub fn think_end_token(&self) -> u32 {
        self.think_end
    }
}

/// The id whose bytes are exactly `text`; special tokens first (a think-end
/// marker is normally an added token).
fn find_token(vocab: &Vocabulary, text: &[u8]) -> Option<u32> {
    let ids = 0..vocab.tokenizer_size() as u32;
    let matches: Vec<u32> = ids.filter(|&id| vocab.token_bytes(id) == text).collect();
    matches
        .iter()
        .copied()
        .find(|&id| vocab.is_special(id))
        .or_else(|| matches.first().copied())
}

impl GrammarBackend for ReasonerBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn supported_kinds(&self) -> &[SpecKind] {
        self.inner.supported_kinds()
    }

    fn vocabulary(&self) -> &Arc<Vocabulary> {
        self.inner.vocabulary()
    }

    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        self.compile_cancellable(constraint, &CancelToken::new())
    }

    fn compile_cancellable(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        let inner = self.inner.compile_cancellable(constraint, cancel)?;
        Ok(Arc::new(ReasonerGrammar {
            inner,
            vocab: self.inner.vocabulary().clone(),
            think_end: self.think_end,
            max_rollback: self.max_rollback,
        }))
    }
}

struct ReasonerGrammar {
    inner: Arc<dyn CompiledGrammar>,
    vocab: Arc<Vocabulary>,
    think_end: u32,
    max_rollback: usize,
}

impl CompiledGrammar for ReasonerGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        let inner = self.inner.matcher();
        Box::new(ReasonerMatcher {
            inner,
            vocab: self.vocab.clone(),
            think_end: self.think_end,
            max_rollback: self.max_rollback,
            thinking: true,
            starts_thinking: true,
            terminated: false,
            history: VecDeque::new(),
            thought_tokens: 0,
            thinking_masks: 0,
            thinking_mask_time: Duration::ZERO,
        })
    }

    fn compile_time(&self) -> Duration {
        self.inner.compile_time()
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
}

/// One step, for rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A token while thinking (`stop`: it was a stop token, which terminated).
    Thought { stop: bool },
    /// The think-end token.
    ThinkEnd,
    /// A step the inner matcher took.
    Inner,
}

struct ReasonerMatcher {
    inner: Box<dyn GrammarObject>,
    vocab: Arc<Vocabulary>,
    think_end: u32,
    max_rollback: usize,
    thinking: bool,
    starts_thinking: bool,
    terminated: bool,
    /// The last `max_rollback` steps.
    history: VecDeque<Step>,
    thought_tokens: u64,
    thinking_masks: u64,
    thinking_mask_time: Duration,
}

impl ReasonerMatcher {
    fn push(&mut self, step: Step) {
        self.history.push_back(step);
        if self.history.len() > self.max_rollback {
            self.history.pop_front();
        }
    }
}

impl GrammarObject for ReasonerMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        if !self.thinking {
            self.inner.accept_token(token)?;
            self.push(Step::Inner);
            return Ok(());
        }
        if token as usize >= self.vocab.tokenizer_size() {
            return Err(StepError::InvalidToken { token });
        }
        if token == self.think_end {
            self.thinking = false;
            self.push(Step::ThinkEnd);
            return Ok(());
        }
        let stop = self.vocab.is_stop(token);
        self.terminated = stop;
        self.thought_tokens += 1;
        self.push(Step::Thought { stop });
        Ok(())
    }

    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        if self.thinking {
            self.push(Step::Thought { stop: false });
            return Ok(());
        }
        self.inner.accept_bytes(bytes)?;
        self.push(Step::Inner);
        Ok(())
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) {
        if !self.thinking {
            return self.inner.fill_bitmask(row);
        }
        let t = Instant::now();
        row.fill(0);
        if !self.terminated {
            // Every tokenizer id; padding ids (beyond it) stay clear.
            let n = self.vocab.tokenizer_size();
            row[..n / 32].fill(u32::MAX);
            if !n.is_multiple_of(32) {
                row[n / 32] = (1u32 << (n % 32)) - 1;
            }
        }
        self.thinking_masks += 1;
        self.thinking_mask_time += t.elapsed();
    }

    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        let available = self.rollback_available();
        if k > available {
            return Err(StepError::RollbackTooFar {
                requested: k,
                available,
            });
        }
        let mut inner_steps = 0;
        for _ in 0..k {
            match self.history.pop_back().expect("k <= history length") {
                Step::Inner => inner_steps += 1,
                Step::ThinkEnd => self.thinking = true,
                Step::Thought { stop } => {
                    if stop {
                        self.terminated = false;
                    }
                }
            }
        }
        if inner_steps > 0 {
            self.inner.rollback(inner_steps)?;
        }
        Ok(())
    }

    fn rollback_available(&self) -> usize {
        // Inner steps are kept only as far as the inner matcher keeps them:
        // count back until the inner budget runs out.
        let mut inner_left = self.inner.rollback_available();
        let mut n = 0;
        for step in self.history.iter().rev() {
            if *step == Step::Inner {
                if inner_left == 0 {
                    break;
                }
                inner_left -= 1;
            }
            n += 1;
        }
        n
    }

    fn is_accepting(&self) -> bool {
        !self.thinking && self.inner.is_accepting()
    }

    fn is_terminated(&self) -> bool {
        self.terminated || self.inner.is_terminated()
    }

    fn jump_forward(&self) -> Vec<u8> {
        if self.thinking {
            Vec::new()
        } else {
            self.inner.jump_forward()
        }
    }

    fn reset(&mut self) {
        self.inner.reset();
        self.thinking = self.starts_thinking;
        self.terminated = false;
        self.history.clear();
    }

    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(ReasonerMatcher {
            inner: self.inner.fork(),
            vocab: self.vocab.clone(),
            think_end: self.think_end,
            max_rollback: self.max_rollback,
            thinking: self.thinking,
            starts_thinking: self.starts_thinking,
            terminated: self.terminated,
            history: self.history.clone(),
            thought_tokens: self.thought_tokens,
            thinking_masks: self.thinking_masks,
            thinking_mask_time: self.thinking_mask_time,
        })
    }

    fn maybe_init_reasoning(&mut self, thinking: bool) {
        self.starts_thinking = thinking;
        self.thinking = thinking;
    }

    fn stats(&self) -> GrammarStats {
        let mut s = self.inner.stats();
        s.masks += self.thinking_masks;
        s.mask_time_total += self.thinking_mask_time;
        s.tokens_accepted += self.thought_tokens;
        s
    }
}
