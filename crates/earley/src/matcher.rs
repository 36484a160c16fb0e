//! [`EarleyMatcher`]: the per-request state: the current Earley set (which
//! points at the sets its items started in), a terminated flag, a bounded
//! history of earlier sets for rollback, and the last mask computed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use tokensieve_automata::lazy;
use tokensieve_core::{GrammarError, GrammarObject, GrammarStats, StepError};

use crate::backend::GrammarInner;
use crate::lexeme::LexDfa;
use crate::parser::{self, Budget, ESet, Summary, Walker, shape};

/// Longest [`GrammarObject::jump_forward`] answer, in bytes.
const MAX_JUMP_FORWARD: usize = 64 << 10;

/// A matcher of the earley backend (see [`GrammarObject`] for the contract).
///
/// - `accept_token` runs the parser over the token's bytes: a DFA step per
///   byte inside a lexeme, prediction and completion where one may end.
/// - `fill_bitmask` ORs the precomputed rows of the lexeme states in the
///   current set (tokens that stay inside a lexeme) and walks, through the
///   parser, only the trie subtrees of tokens that leave one. The last mask
///   is kept: inside a long string the set does not change from token to
///   token, and neither does the mask.
/// - Forking copies a few pointers: the chart is shared and immutable.
/// - After a step error (a named limit) the matcher refuses everything.
pub struct EarleyMatcher {
    grammar: Arc<GrammarInner>,
    cur: Arc<ESet>,
    terminated: bool,
    /// `(set, terminated)` before each kept step, oldest first.
    history: VecDeque<(Arc<ESet>, bool)>,
    poisoned: Option<StepError>,
    /// The set the last mask was computed for, and that mask.
    memo: Option<(Arc<ESet>, Memo)>,
    /// The row of the last [`Memo::Row`], kept for the next one.
    spare: Vec<u32>,
    walker: Walker,
    /// Scratch for the current set's shape and markers.
    shape: Vec<(u32, u32, u32)>,
    markers: Vec<Arc<ESet>>,
    stats: GrammarStats,
    /// [`lazy::exhaustions`] when this matcher last looked at its lexemes
    /// (`usize::MAX`: never).
    seen_exhaustions: usize,
}

/// A mask kept for the set it was computed for.
enum Memo {
    /// The tokens of one summary (no pending subtree): written again from
    /// it, so keeping the mask costs no copy of the row.
    Summary(Arc<Summary>),
    /// A copy of the row.
    Row(Vec<u32>),
    /// The row was computed once and not kept: most sets are filled once
    /// and then stepped from, so a copy of every such row (16 KB on Llama
    /// 3) went mostly unused. A second fill of the same set computes the
    /// row again and keeps a copy.
    Once,
}

impl std::fmt::Debug for EarleyMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarleyMatcher")
            .field("items", &self.cur.items.len())
            .field("terminated", &self.terminated)
            .field("poisoned", &self.poisoned)
            .field("rollback_available", &self.history.len())
            .finish()
    }
}

impl EarleyMatcher {
    pub(crate) fn new(grammar: Arc<GrammarInner>) -> Self {
        let stats = GrammarStats {
            compile_time: grammar.compile_time,
            ..Default::default()
        };
        EarleyMatcher {
            walker: Walker::new(&grammar.config),
            cur: grammar.initial.clone(),
            history: VecDeque::new(),
            grammar,
            terminated: false,
            poisoned: None,
            memo: None,
            spare: Vec::new(),
            shape: Vec::new(),
            markers: Vec::new(),
            stats,
            seen_exhaustions: usize::MAX,
        }
    }

    /// Lets go of the sets past the current one after a rollback or reset:
    /// the last mask's memo where it is of another set than the current
    /// one (no step can reach that set again; its row is kept for the
    /// next), and what the walker keeps of them. A memo of the current set
    /// (a mask, then tokens accepted unmasked, then rolled back: drafts)
    /// stays for its next fill.
    fn forget_dropped(&mut self) {
        if self
            .memo
            .as_ref()
            .is_some_and(|(set, _)| !Arc::ptr_eq(set, &self.cur))
        {
            if let Some((_, Memo::Row(old))) = self.memo.take() {
                self.spare = old;
            }
        }
        self.walker.forget_dropped();
    }

    /// What the memo keeps of the current set's mask, if it is of it.
    fn memo_of_cur(&self) -> Option<&Memo> {
        let (set, memo) = self.memo.as_ref()?;
        (Arc::ptr_eq(set, &self.cur) || set.items == self.cur.items).then_some(memo)
    }

    /// Writes the current set's mask into `row` from the memo, if it keeps
    /// one that fits (a summary, or a copy of a row of this length).
    fn replay(&self, row: &mut [u32]) -> bool {
        match self.memo_of_cur() {
            Some(Memo::Summary(summary)) => summary.write_into(row),
            Some(Memo::Row(mask)) if mask.len() == row.len() => row.copy_from_slice(mask),
            _ => return false,
        }
        true
    }

    /// Earley items in the current set (for diagnostics and tests).
    pub fn items(&self) -> usize {
        self.cur.items.len()
    }

    fn budget(&self) -> Budget {
        let c = &self.grammar.config;
        Budget::new(c.max_step_work, c.max_items)
    }

    fn check(&self) -> Result<(), StepError> {
        if let Some(e) = &self.poisoned {
            return Err(StepError::Poisoned(e.to_string()));
        }
        if self.terminated {
            return Err(StepError::Terminated);
        }
        Ok(())
    }

    /// The set after `bytes`; `Ok(Err(offset))` when a byte is refused.
    fn walk(&mut self, bytes: &[u8]) -> Result<Result<Arc<ESet>, usize>, StepError> {
        let mut budget = self.budget();
        let mut set = self.cur.clone();
        for (i, &b) in bytes.iter().enumerate() {
            match parser::advance(&self.grammar.cfg, &set, b, &mut budget) {
                Ok(Some(next)) => set = next,
                Ok(None) => return Ok(Err(i)),
                Err(e) => {
                    self.poisoned = Some(e.clone());
                    return Err(e);
                }
            }
        }
        Ok(Ok(set))
    }

    /// The mask of the current set: its shape's summary (cached in the
    /// grammar), then the pending subtrees. Past the step budget (a very
    /// ambiguous grammar, where summaries multiply the work) the mask is
    /// walked directly, with a fresh budget. Answers the summary when the
    /// mask is its tokens alone.
    fn compute_mask(
        &mut self,
        row: &mut [u32],
        budget: &mut Budget,
    ) -> Result<Option<Arc<Summary>>, StepError> {
        let g = &*self.grammar;
        shape(&g.cfg, &self.cur.items, &mut self.shape, &mut self.markers);
        let mut first = Budget::new(budget.max_work, budget.max_items);
        let summarized = match g.summaries.get(&self.shape) {
            Some(s) => Ok(s),
            None if parser::lexeme_items(&g.cfg, &self.cur) >= g.config.item_summaries => self
                .walker
                .summarize_by_items(
                    &g.cfg,
                    &g.trie,
                    &self.cur,
                    &self.markers,
                    g.vocab.mask_words(),
                    &g.summaries,
                    &mut first,
                )
                .map(|s| g.summaries.insert(&self.shape, s)),
            None => self
                .walker
                .summarize(
                    &g.cfg,
                    &g.trie,
                    &self.cur,
                    &self.markers,
                    g.vocab.mask_words(),
                    &mut first,
                )
                .map(|s| g.summaries.insert(&self.shape, s)),
        };
        let done = summarized.and_then(|summary| {
            self.walker.finish_mask(
                &g.cfg,
                &g.trie,
                &g.summaries,
                &summary,
                &self.markers,
                row,
                &mut first,
            )?;
            Ok(summary.is_whole().then_some(summary))
        });
        match done {
            Err(StepError::LimitExceeded { .. }) => self
                .walker
                .fill_direct(&g.cfg, &g.trie, &self.cur, row, budget)
                .map(|()| None),
            other => other,
        }
    }

    /// The limit a lazily built lexeme of this grammar ran into, if one
    /// did: it made a transition dead, so what was computed since may be
    /// narrower than the grammar, and the matcher refuses what comes next.
    /// The lexemes are looked at only when some lexeme of the process ran
    /// into a limit since the last look.
    fn exhausted(&mut self) -> Result<(), StepError> {
        let now = lazy::exhaustions();
        if now == self.seen_exhaustions {
            return Ok(());
        }
        self.seen_exhaustions = now;
        let found = self
            .grammar
            .cfg
            .lexemes
            .iter()
            .find_map(|l| l.made().and_then(LexDfa::exhausted));
        let Some(e) = found else {
            return Ok(());
        };
        let e = match e {
            GrammarError::LimitExceeded { what, limit, knob } => {
                StepError::LimitExceeded { what, limit, knob }
            }
            other => StepError::Poisoned(other.to_string()),
        };
        self.poisoned = Some(e.clone());
        Err(e)
    }

    fn push_history(&mut self) {
        let max = self.grammar.config.max_rollback;
        if max == 0 {
            return;
        }
        if self.history.len() == max {
            self.history.pop_front();
        }
        self.history.push_back((self.cur.clone(), self.terminated));
    }
}

impl GrammarObject for EarleyMatcher {
    fn accept_token(&mut self, token: u32) -> Result<(), StepError> {
        self.check()?;
        let g = self.grammar.clone();
        if g.vocab.is_stop(token) {
            if !parser::is_accepting(&g.cfg, &self.cur) {
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
        let walked = self.walk(bytes)?;
        self.exhausted()?;
        match walked {
            Ok(next) => {
                self.push_history();
                self.cur = next;
                self.stats.tokens_accepted += 1;
                Ok(())
            }
            Err(_) => Err(StepError::TokenRejected { token }),
        }
    }

    fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), StepError> {
        self.check()?;
        let walked = self.walk(bytes)?;
        self.exhausted()?;
        match walked {
            Ok(next) => {
                self.push_history();
                self.cur = next;
                Ok(())
            }
            Err(offset) => Err(StepError::BytesRejected { offset }),
        }
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) {
        let start = Instant::now();
        let g = self.grammar.clone();
        if self.terminated || self.poisoned.is_some() {
            row.fill(0);
        } else if !self.replay(row) {
            let again = matches!(self.memo_of_cur(), Some(Memo::Once));
            let mut budget = self.budget();
            match self.compute_mask(row, &mut budget) {
                // The tokens proven so far stay allowed (never a wider
                // mask); the matcher refuses what comes next.
                Err(e) => self.poisoned = Some(e),
                Ok(summary) => {
                    if let Some((_, Memo::Row(old))) = self.memo.take() {
                        self.spare = old;
                    }
                    if self.exhausted().is_ok() {
                        let memo = match summary {
                            Some(summary) => Memo::Summary(summary),
                            None if !again => Memo::Once,
                            None => {
                                // The last row's allocation is reused: a
                                // fresh 16 KB one per mask made glibc
                                // consolidate its free lists at every step
                                // (a third of the time of a cached mask).
                                let mut kept = std::mem::take(&mut self.spare);
                                kept.clear();
                                kept.extend_from_slice(row);
                                Memo::Row(kept)
                            }
                        };
                        self.memo = Some((self.cur.clone(), memo));
                    }
                }
            }
            // The markers hold older sets alive: let them go.
            self.markers.clear();
        }
        // After a stop token only stop tokens, as regex-fsm does, so an
        // engine that keeps sampling is never handed an empty row.
        if self.terminated || (self.poisoned.is_none() && parser::is_accepting(&g.cfg, &self.cur)) {
            for &id in g.vocab.stop_tokens() {
                if let Some(w) = row.get_mut(id as usize / 32) {
                    *w |= 1 << (id % 32);
                }
            }
        }
        self.stats.record_mask(start.elapsed());
    }

    fn rollback(&mut self, k: usize) -> Result<(), StepError> {
        if let Some(e) = &self.poisoned {
            return Err(StepError::Poisoned(e.to_string()));
        }
        if k > self.history.len() {
            return Err(StepError::RollbackTooFar {
                requested: k,
                available: self.history.len(),
            });
        }
        if k > 0 {
            let keep = self.history.len() - k;
            let (set, terminated) = self.history[keep].clone();
            self.history.truncate(keep);
            self.cur = set;
            self.terminated = terminated;
            self.stats.rollbacks += k as u64;
            self.forget_dropped();
        }
        Ok(())
    }

    fn rollback_available(&self) -> usize {
        self.history.len()
    }

    fn is_accepting(&self) -> bool {
        self.poisoned.is_none() && parser::is_accepting(&self.grammar.cfg, &self.cur)
    }

    fn is_terminated(&self) -> bool {
        self.terminated
    }

    fn jump_forward(&self) -> Vec<u8> {
        if self.terminated || self.poisoned.is_some() {
            return Vec::new();
        }
        let cfg = &self.grammar.cfg;
        let mut budget = self.budget();
        let mut set = self.cur.clone();
        let mut out = Vec::new();
        let mut keep = 0;
        while out.len() < MAX_JUMP_FORWARD && !parser::is_accepting(cfg, &set) {
            let Some(b) = parser::forced_byte(cfg, &set) else {
                break;
            };
            match parser::advance(cfg, &set, b, &mut budget) {
                Ok(Some(next)) => set = next,
                _ => break,
            }
            out.push(b);
            if parser::at_char_boundary(cfg, &set) {
                keep = out.len();
            }
        }
        out.truncate(keep);
        out
    }

    fn reset(&mut self) {
        self.cur = self.grammar.initial.clone();
        self.terminated = false;
        self.poisoned = None;
        self.history.clear();
        self.forget_dropped();
        self.stats = GrammarStats {
            compile_time: self.grammar.compile_time,
            ..Default::default()
        };
    }

    fn fork(&self) -> Box<dyn GrammarObject> {
        Box::new(EarleyMatcher {
            grammar: self.grammar.clone(),
            cur: self.cur.clone(),
            terminated: self.terminated,
            history: self.history.clone(),
            poisoned: self.poisoned.clone(),
            memo: None,
            spare: Vec::new(),
            walker: Walker::new(&self.grammar.config),
            shape: Vec::new(),
            markers: Vec::new(),
            stats: self.stats.clone(),
            seen_exhaustions: usize::MAX,
        })
    }

    fn stats(&self) -> GrammarStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EarleyBackend, EarleyConfig};
    use tokensieve_core::Constraint;

    /// After a rollback or a reset neither the matcher's memo of its last
    /// mask nor the walker holds the sets dropped: the set left behind is
    /// freed, and no closed completion kept by the walker alone names one.
    #[test]
    fn rollback_and_reset_let_go_of_the_sets_they_drop() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let gbnf = r#"
            root ::= "[" (item ("," item)*)? "]"
            item ::= "a" | root
        "#;
        let g = EarleyBackend::new(vocab.clone(), EarleyConfig::default())
            .compile_earley(&Constraint::ebnf(gbnf, "root"), &Default::default())
            .unwrap();
        let mut m = g.earley_matcher();
        let mut row = vec![0u32; vocab.mask_words()];
        // Single bytes are tokens of their own byte.
        let mut walk = |m: &mut EarleyMatcher, text: &[u8]| {
            for &b in text {
                m.fill_bitmask(&mut row);
                assert!(row[b as usize / 32] >> (b % 32) & 1 == 1, "{}", b as char);
                m.accept_token(u32::from(b)).unwrap();
            }
            m.fill_bitmask(&mut row);
        };
        let only_held_by_the_walker = |m: &EarleyMatcher| {
            m.walker
                .completion_sets()
                .filter(|s| Arc::strong_count(s) == 1)
                .count()
        };
        walk(&mut m, b"[[a],[[a],a");
        assert!(
            m.walker.completion_sets().next().is_some(),
            "the masks closed completions into older sets"
        );
        let newest = Arc::downgrade(&m.cur);
        m.rollback(m.rollback_available()).unwrap();
        assert!(
            newest.upgrade().is_none(),
            "the set rolled back from is freed"
        );
        assert_eq!(only_held_by_the_walker(&m), 0, "after a rollback");
        walk(&mut m, b"[a,[[a]");
        let newest = Arc::downgrade(&m.cur);
        m.reset();
        assert!(newest.upgrade().is_none(), "the set reset from is freed");
        assert_eq!(only_held_by_the_walker(&m), 0, "after a reset");
    }
}
