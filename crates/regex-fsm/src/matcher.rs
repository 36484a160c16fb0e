//! [`RegexMatcher`]: the per-request state: one DFA state, a terminated flag
//! and a bounded history for rollback. Everything else is shared.

use crate::backend::GrammarInner;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tokensieve_core::{GrammarObject, GrammarStats, StepError};

/// A matcher of the regex backend (see [`GrammarObject`] for the contract).
///
/// - `accept_token` walks the DFA over the token's bytes (no per-state
///   transition table: a few table reads per byte).
/// - `fill_bitmask` copies the state's precomputed row and sets the stop
///   tokens when the output may end here. After a stop token has been
///   accepted, the row allows **only the stop tokens**: the output is over,
///   nothing else may follow, and an engine that keeps sampling (or fills the
///   row regardless) is never handed an empty mask.
/// - `jump_forward` follows states with a single live byte, cut back to the
///   last UTF-8 character boundary.
#[derive(Clone)]
pub struct RegexMatcher {
    grammar: Arc<GrammarInner>,
    state: u32,
    terminated: bool,
    /// `(state, terminated)` before each kept step, oldest first.
    history: VecDeque<(u32, bool)>,
    stats: GrammarStats,
}

impl std::fmt::Debug for RegexMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegexMatcher")
            .field("state", &self.state)
            .field("terminated", &self.terminated)
            .field("rollback_available", &self.history.len())
            .finish()
    }
}

impl RegexMatcher {
    pub(crate) fn new(grammar: Arc<GrammarInner>) -> Self {
        let stats = GrammarStats {
            compile_time: grammar.compile_time,
            ..Default::default()
        };
        RegexMatcher {
            state: grammar.dfa.start(),
            history: VecDeque::with_capacity(grammar.max_rollback.min(64)),
            grammar,
            terminated: false,
            stats,
        }
    }

    /// The current DFA state (for diagnostics and tests).
    pub fn state(&self) -> u32 {
        self.state
    }

    /// Forgets all but the last `keep` steps kept for rollback: a matcher
    /// rebuilt by replaying an output (the `auto` backend's move onto a
    /// table) keeps only the window the matcher it replaces had.
    pub fn forget_rollback_beyond(&mut self, keep: usize) {
        let extra = self.history.len().saturating_sub(keep);
        self.history.drain(..extra);
    }

    fn push_history(&mut self) {
        let max = self.grammar.max_rollback;
        if max == 0 {
            return;
        }
        if self.history.len() == max {
            self.history.pop_front();
        }
        self.history.push_back((self.state, self.terminated));
    }
}

impl GrammarObject for RegexMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        let g = &*self.grammar;
        if g.vocab.is_stop(token) {
            if !g.dfa.is_accepting(self.state) {
                return Err(StepError::TokenRejected { token });
            }
            self.push_history();
            self.terminated = true;
            self.stats.tokens_accepted += 1;
            return Ok(());
        }
        let Some(bytes) = g.vocab.grammar_bytes(token) else {
            return Err(StepError::InvalidToken { token });
        };
        match g.dfa.walk(self.state, bytes) {
            Ok(next) => {
                self.push_history();
                self.state = next;
                self.stats.tokens_accepted += 1;
                Ok(())
            }
            Err(_) => Err(StepError::TokenRejected { token }),
        }
    }

    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError> {
        if self.terminated {
            return Err(StepError::Terminated);
        }
        match self.grammar.dfa.walk(self.state, bytes) {
            Ok(next) => {
                self.push_history();
                self.state = next;
                Ok(())
            }
            Err(offset) => Err(StepError::BytesRejected { offset }),
        }
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) {
        let start = Instant::now();
        let g = &*self.grammar;
        if self.terminated {
            row.fill(0);
        } else {
            g.index.fill(self.state, row);
        }
        if self.terminated || g.dfa.is_accepting(self.state) {
            for &id in g.vocab.stop_tokens() {
                if let Some(w) = row.get_mut(id as usize / 32) {
                    *w |= 1 << (id % 32);
                }
            }
        }
        self.stats.record_mask(start.elapsed());
    }

    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        if k > self.history.len() {
            return Err(StepError::RollbackTooFar {
                requested: k,
                available: self.history.len(),
            });
        }
        if k > 0 {
            let keep = self.history.len() - k;
            let (state, terminated) = self.history[keep];
            self.history.truncate(keep);
            self.state = state;
            self.terminated = terminated;
            self.stats.rollbacks += k as u64;
        }
        Ok(())
    }

    fn rollback_available(&self) -> usize {
        self.history.len()
    }

    fn is_accepting(&self) -> bool {
        self.grammar.dfa.is_accepting(self.state)
    }

    fn is_terminated(&self) -> bool {
        self.terminated
    }

    fn jump_forward(&self) -> Vec<u8> {
        if self.terminated {
            return Vec::new();
        }
        let dfa = &self.grammar.dfa;
        let mut state = self.state;
        let mut out = Vec::new();
        let mut keep = 0;
        // A forced chain cannot loop (every state can reach acceptance, and
        // a forced state is not accepting), so this bound is never reached.
        while out.len() < dfa.num_states() {
            let Some(b) = dfa.forced_byte(state) else {
                break;
            };
            state = dfa.next(state, b);
            out.push(b);
            if dfa.at_char_boundary(state) {
                keep = out.len();
            }
        }
        out.truncate(keep);
        out
    }

    fn reset(&mut self) {
        self.state = self.grammar.dfa.start();
        self.terminated = false;
        self.history.clear();
        self.stats = GrammarStats {
            compile_time: self.grammar.compile_time,
            ..Default::default()
        };
    }

    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(self.clone())
    }

    fn stats(&self) -> GrammarStats {
        self.stats.clone()
    }
}
