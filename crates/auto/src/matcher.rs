//! [`AutoMatcher`]: a matcher on earley that keeps the steps it accepted,
//! so that it can move onto the regex-fsm table, at the same position and
//! with the same rollback history, at its first call after the table is
//! built.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use tokensieve_core::{GrammarObject, GrammarStats, StepError};

use crate::backend::GrammarParts;

/// One step accepted on earley, as it is replayed onto the table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Token(u32),
    Bytes(Vec<u8>),
}

/// The steps accepted on earley since the start: those rollback can still
/// undo, one by one, and the bytes of all the older ones, which only
/// matter as a prefix.
#[derive(Debug, Clone, Default)]
struct StepLog {
    /// The bytes of the steps past the rollback window, and whether there
    /// is any such step (an empty `accept_bytes` is a step too).
    settled: Option<Vec<u8>>,
    /// The last steps, at most `max_rollback`, oldest first.
    recent: VecDeque<Step>,
}

/// What the matcher runs on now.
enum Half {
    /// Earley's matcher; the log is `None` once no table can come (or the
    /// matcher cannot move: a step error poisoned it, a stop token left
    /// the window).
    Earley {
        matcher: Box<dyn GrammarObject>,
        log: Option<StepLog>,
    },
    Table(Box<dyn GrammarObject>),
}

/// A matcher of the auto backend (see [`GrammarObject`] for the contract).
///
/// On earley it records each accepted step (a token id, or the bytes of an
/// `accept_bytes`; 4 bytes a token), keeping the steps rollback can undo
/// apart from the bytes of older ones. At its first `&mut` call after the
/// table is built (`fill_bitmask`, `accept_*`, `rollback`, `reset`) it
/// replays them into a fresh regex-fsm matcher: the older bytes as one step
/// (pushed out of the rollback window by the steps after it), then each
/// recent step, and keeps the window of the recent steps. That costs one DFA step per byte of the output so far
/// (microseconds for a few thousand bytes), once. Both halves serve the same
/// language, so masks, acceptance and rollback are the same before and
/// after the move.
pub struct AutoMatcher {
    parts: Arc<GrammarParts>,
    half: Half,
    /// Set by [`AutoMatcher::pin_to_earley`].
    pinned: bool,
    stats: GrammarStats,
}

impl std::fmt::Debug for AutoMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoMatcher")
            .field("on_table", &self.on_table())
            .field("rollback_available", &self.rollback_available())
            .finish()
    }
}

impl AutoMatcher {
    pub(crate) fn new(parts: Arc<GrammarParts>) -> Self {
        let stats = GrammarStats {
            compile_time: parts.compile_time,
            cache_hit: parts.cache_hit,
            ..Default::default()
        };
        AutoMatcher {
            half: Self::fresh_half(&parts, false),
            parts,
            pinned: false,
            stats,
        }
    }

    /// A matcher at the start: on the table when it is built (unless
    /// pinned to earley and there is an earley half), else on earley.
    fn fresh_half(parts: &GrammarParts, pinned: bool) -> Half {
        match parts.table() {
            Some(table) if !(pinned && parts.earley.is_some()) => {
                Half::Table(Box::new(table.regex_matcher()))
            }
            _ => Half::Earley {
                matcher: Box::new(parts.earley().earley_matcher()),
                log: parts.may_get_table().then(StepLog::default),
            },
        }
    }

    /// Whether this matcher runs on the regex-fsm table now.
    pub fn on_table(&self) -> bool {
        matches!(self.half, Half::Table(_))
    }

    /// Keeps this matcher on earley (`true`) even once the table is built
    /// (and after a `reset`, where the grammar has an earley half: one
    /// compiled with its table already cached has none), or lets it move
    /// (`false`, the default) at its next call: for a differential check,
    /// or to choose the step of the move. Forks inherit it.
    pub fn pin_to_earley(&mut self, pinned: bool) {
        self.pinned = pinned;
    }

    /// Moves onto the table if it is built and this matcher may move.
    fn maybe_move(&mut self) {
        if self.pinned {
            return;
        }
        let Half::Earley {
            matcher,
            log: Some(log),
        } = &mut self.half
        else {
            return;
        };
        let Some(table) = self.parts.table() else {
            return;
        };
        let mut moved = table.regex_matcher();
        let replayed = (|| {
            if let Some(bytes) = &log.settled {
                moved.accept_bytes(bytes)?;
            }
            for step in &log.recent {
                match step {
                    Step::Token(t) => moved.accept_token(*t)?,
                    Step::Bytes(b) => moved.accept_bytes(b)?,
                }
            }
            // The prefix step is out of earley's window (rollbacks may
            // have left fewer recent steps than the window holds).
            moved.forget_rollback_beyond(log.recent.len());
            Ok::<(), StepError>(())
        })();
        // Both halves serve one language: a replay that fails, or ends
        // anywhere else, would be a bug; the matcher then stays on earley
        // rather than change what it accepts.
        let same = replayed.is_ok()
            && moved.rollback_available() == matcher.rollback_available()
            && moved.is_terminated() == matcher.is_terminated()
            && moved.is_accepting() == matcher.is_accepting();
        debug_assert!(same, "the table disagrees with earley after {log:?}");
        self.half = if same {
            Half::Table(Box::new(moved))
        } else {
            Half::Earley {
                matcher: std::mem::replace(matcher, Box::new(NoMatcher)),
                log: None,
            }
        };
    }

    fn inner(&self) -> &dyn GrammarObject {
        match &self.half {
            Half::Earley { matcher, .. } => &**matcher,
            Half::Table(m) => &**m,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn GrammarObject {
        match &mut self.half {
            Half::Earley { matcher, .. } => &mut **matcher,
            Half::Table(m) => &mut **m,
        }
    }

    /// Runs a step on the current half and, on earley, logs it when it was
    /// accepted (a poisoning error ends the log: that state cannot move).
    fn step(
        &mut self,
        step: impl FnOnce() -> Step,
        run: impl FnOnce(&mut dyn GrammarObject) -> Result<(), StepError>,
    ) -> Result<(), StepError> {
        self.maybe_move();
        let max = self.parts.max_rollback;
        let result = run(self.inner_mut());
        if let Half::Earley { log, .. } = &mut self.half {
            match &result {
                Ok(()) => {
                    let mut ended = false;
                    if let Some(l) = log.as_mut() {
                        l.recent.push_back(step());
                        while l.recent.len() > max {
                            let old = l.recent.pop_front().expect("longer than max");
                            let bytes = match &old {
                                Step::Bytes(b) => Some(b.as_slice()),
                                Step::Token(t) => {
                                    let vocab = &self.parts.vocab;
                                    // A stop token out of the window: the
                                    // output ended for good, nothing to move.
                                    (!vocab.is_stop(*t))
                                        .then(|| vocab.grammar_bytes(*t).unwrap_or_default())
                                }
                            };
                            match bytes {
                                Some(b) => l.settled.get_or_insert_default().extend_from_slice(b),
                                None => {
                                    ended = true;
                                    break;
                                }
                            }
                        }
                    }
                    if ended {
                        *log = None;
                    }
                }
                Err(
                    StepError::TokenRejected { .. }
                    | StepError::BytesRejected { .. }
                    | StepError::InvalidToken { .. }
                    | StepError::Terminated,
                ) => {}
                Err(_) => *log = None,
            }
        }
        result
    }
}

/// The placeholder left for an instant while a matcher changes halves.
struct NoMatcher;

impl GrammarObject for NoMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        Err(StepError::TokenRejected { token })
    }
    fn accept_bytes(&mut self, _: &[u8]) -> Result<(), StepError> {
        Err(StepError::BytesRejected { offset: 0 })
    }
    fn fill_bitmask(&mut self, row: &mut [u32]) {
        row.fill(0)
    }
    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        Err(StepError::RollbackTooFar {
            requested: k,
            available: 0,
        })
    }
    fn rollback_available(&self) -> usize {
        0
    }
    fn is_accepting(&self) -> bool {
        false
    }
    fn is_terminated(&self) -> bool {
        false
    }
    fn jump_forward(&self) -> Vec<u8> {
        Vec::new()
    }
    fn reset(&mut self) {}
    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(NoMatcher)
    }
    fn stats(&self) -> GrammarStats {
        GrammarStats::default()
    }
}

impl GrammarObject for AutoMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        let result = self.step(|| Step::Token(token), |m| m.accept_token(token));
        if result.is_ok() {
            self.stats.tokens_accepted += 1;
        }
        result
    }

    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError> {
        self.step(|| Step::Bytes(bytes.to_vec()), |m| m.accept_bytes(bytes))
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) {
        let start = Instant::now();
        self.maybe_move();
        self.inner_mut().fill_bitmask(row);
        self.stats.record_mask(start.elapsed());
    }

    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        self.maybe_move();
        self.inner_mut().rollback(k)?;
        if let Half::Earley { log: Some(l), .. } = &mut self.half {
            // Earley keeps exactly the window the log keeps.
            let keep = l.recent.len().saturating_sub(k);
            l.recent.truncate(keep);
        }
        self.stats.rollbacks += k as u64;
        Ok(())
    }

    fn rollback_available(&self) -> usize {
        self.inner().rollback_available()
    }

    fn is_accepting(&self) -> bool {
        self.inner().is_accepting()
    }

    fn is_terminated(&self) -> bool {
        self.inner().is_terminated()
    }

    fn jump_forward(&self) -> Vec<u8> {
        self.inner().jump_forward()
    }

    fn reset(&mut self) {
        self.half = Self::fresh_half(&self.parts, self.pinned);
        self.stats = GrammarStats {
            compile_time: self.parts.compile_time,
            cache_hit: self.parts.cache_hit,
            ..Default::default()
        };
    }

    fn fork(&self) -> Box<dyn GrammarObject> {
        let half = match &self.half {
            Half::Earley { matcher, log } => Half::Earley {
                matcher: matcher.fork(),
                log: log.clone(),
            },
            Half::Table(m) => Half::Table(m.fork()),
        };
        Box::new(AutoMatcher {
            parts: self.parts.clone(),
            half,
            pinned: self.pinned,
            stats: self.stats.clone(),
        })
    }

    fn maybe_init_reasoning(&mut self, thinking: bool) {
        self.inner_mut().maybe_init_reasoning(thinking)
    }

    fn stats(&self) -> GrammarStats {
        self.stats.clone()
    }
}
