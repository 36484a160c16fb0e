//! Regex -> [`ByteDfa`]: a small, pruned, optionally minimized byte DFA whose
//! language is exactly the set of outputs the regex matches in full.
//!
//! The pipeline: `regex-syntax` parses (so back-references are reported
//! with their byte offset); a pattern without look-around is determinized
//! by making every state of its [`LazyDfa`] (our NFA, sets of NFA states
//! that can still reach a match), one with look-around by `regex-automata`'s
//! dense DFA (`MatchKind::All`, so the DFA tracks every match, not just the
//! leftmost-first one; anchored at the start), both under size limits; the
//! DFA is copied into our own table, where:
//!
//! - a state is *accepting* when a match ends at end of input from it
//!   (`regex-automata` delays match reporting by one byte, hence
//!   `next_eoi_state` + `is_match_state`);
//! - every state from which no accepting state can be reached is merged into
//!   the dead state, so "not dead" means "can still be completed". That is
//!   what makes the token index sound: a token is allowed only if the output
//!   can still be finished after it;
//! - Hopcroft minimization merges equivalent states, and byte classes that
//!   every state treats alike are merged.

use crate::grow::Grow;
use crate::lazy::{LazyDfa, Stop};
use crate::minimize::hopcroft;
use regex_automata::dfa::{Automaton as _, StartKind, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::Hir;
use std::collections::{HashMap, VecDeque};
use tokensieve_core::{GrammarError, Location};

/// The dead state: every transition from it leads back to it.
pub const DEAD: u32 = 0;

/// No forced byte (see [`ByteDfa::forced_byte`]).
const NOT_FORCED: u16 = 256;

/// Limits for [`ByteDfa::build`]; each backend sets them from its own config
/// (the knob names in errors are the regex-fsm ones, shared by earley).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DfaLimits {
    pub nfa_size_limit: usize,
    pub dfa_size_limit: usize,
    /// Heap bytes the determinizer may use for the NFA state sets behind
    /// the DFA's states (regex-automata's `determinize_size_limit`): their
    /// size, summed over the states made, is the work of determinization,
    /// where the DFA's own size is not (`.{0,1000}{4}` makes few states,
    /// each a set of thousands), so this is the knob that bounds its time.
    pub determinize_size_limit: usize,
    pub max_dfa_states: usize,
    pub minimize: bool,
}

/// One character of text from a DFA state (see [`ByteDfa::text_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextStep {
    /// Bit `b` of `ascii[b / 64]` set when ASCII byte `b` leads to `to`.
    pub ascii: [u64; 2],
    /// Whether every well-formed multi-byte character leads to `to`.
    pub utf8: bool,
    /// Bit `b - 0xC2` set when every well-formed character with lead byte
    /// `b` leads to `to` (all of them when `utf8`): a class that leaves out
    /// a few characters (`\S`, ECMAScript's `.`) takes most lead bytes
    /// whole.
    pub leads: u64,
    pub to: u32,
}

pub use tokensieve_core::trie::{ALL_LEADS, FIRST_LEAD};

impl TextStep {
    /// Whether every byte on the edges below a trie node is one this step
    /// takes (and multi-byte characters well-formed, each from a lead byte
    /// it takes).
    #[inline]
    pub fn covers(&self, below: &tokensieve_core::trie::Below) -> bool {
        below.ascii[0] & !self.ascii[0] == 0
            && below.ascii[1] & !self.ascii[1] == 0
            && (!below.non_ascii || (below.utf8 && below.leads & !self.leads == 0))
    }

    /// Whether this step takes every character `other` takes.
    fn includes(&self, other: &TextStep) -> bool {
        other.ascii[0] & !self.ascii[0] == 0
            && other.ascii[1] & !self.ascii[1] == 0
            && other.leads & !self.leads == 0
    }

    /// Whether every well-formed character starting with byte `b` (a lead
    /// byte) leads to `to`.
    #[inline]
    pub fn takes_lead(&self, b: u8) -> bool {
        (FIRST_LEAD..=0xF4).contains(&b) && self.leads >> (b - FIRST_LEAD) & 1 == 1
    }

    /// Whether the characters that start with byte `b` lead to `to`: the
    /// ASCII byte itself, or every well-formed character of a lead byte.
    #[inline]
    pub fn takes_first(&self, b: u8) -> bool {
        if b < 0x80 {
            self.ascii[b as usize / 64] >> (b % 64) & 1 == 1
        } else {
            self.takes_lead(b)
        }
    }
}

/// What a walk of a token trie needs of a byte automaton: an eager
/// [`ByteDfa`] or a lazily built [`crate::lazy::LazyDfa`]. State `0` is
/// dead; every other state can reach an accepting one.
pub trait Automaton {
    /// The state at the start of the output.
    fn start(&self) -> u32;
    /// The state after `byte` ([`DEAD`] when the byte cannot come next).
    fn next(&self, state: u32, byte: u8) -> u32;
    /// May the output end in `state`?
    fn is_accepting(&self, state: u32) -> bool;
    /// The byte class of every byte, where the automaton has them: two
    /// bytes of one class lead every state to the same state, so a caller
    /// asking about a range of bytes asks once per class.
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        None
    }
    /// The transitions of `state` by byte class ([`Automaton::byte_classes`]),
    /// where the automaton keeps them as a row.
    fn row_by_class(&self, _state: u32) -> Option<&[u32]> {
        None
    }
    /// The [`text_step`] of `state` where the automaton knows it without
    /// asking about each byte (`Some(None)`: it has none); `None` to ask.
    fn known_text_step(&self, _state: u32) -> Option<Option<TextStep>> {
        None
    }
}

/// [`text_step`] and how long each step repeats, worked out per state on
/// first use, for walks of a token trie: a subtree whose bytes a state's
/// step covers, no deeper than the step repeats, keeps every token in it
/// alive and passes no accepting state, so the walk takes its tokens in one
/// range without visiting its nodes.
#[derive(Debug)]
pub struct TextRuns {
    steps: Grow<Option<TextStep>>,
    runs: Grow<u32>,
    /// Runs are counted up to this many characters (the longest token).
    cap: u32,
}

impl TextRuns {
    /// Runs counted up to `cap` characters.
    pub fn new(cap: usize) -> TextRuns {
        TextRuns {
            steps: Grow::default(),
            runs: Grow::default(),
            cap: cap.min(u32::MAX as usize) as u32,
        }
    }

    /// The text step of `state`.
    pub fn step<A: Automaton + ?Sized>(&self, dfa: &A, state: u32) -> Option<&TextStep> {
        self.steps
            .get_or_init(state, || text_step(dfa, state))
            .as_ref()
    }

    /// How many characters in a row the step of `state` can take, each
    /// landing where the next one is taken by a step at least as wide (up to
    /// the cap; a loop repeats forever).
    pub fn run<A: Automaton + ?Sized>(&self, dfa: &A, state: u32) -> u32 {
        self.run_within(dfa, state, self.cap)
    }

    /// [`TextRuns::run`], counted no further than `limit`: the run when it
    /// is shorter, else at least `limit`. A walk asks how far a step
    /// repeats below a trie node only as deep as the node's subtree goes;
    /// counting on to the cap would make states no walk reaches (a string
    /// of bounded length inside a big lexeme: a DFA state per character,
    /// each made from the lexeme's NFA, a hundred and more of them).
    pub fn run_within<A: Automaton + ?Sized>(&self, dfa: &A, state: u32, limit: u32) -> u32 {
        if let Some(&known) = self.runs.get(state) {
            return known;
        }
        let Some(first) = self.step(dfa, state) else {
            return *self.runs.get_or_init(state, || 0);
        };
        let limit = limit.min(self.cap);
        let (mut run, mut at) = (1, *first);
        let exact = loop {
            if run >= limit {
                break run >= self.cap;
            }
            match self.step(dfa, at.to) {
                Some(next) if next.includes(first) => {
                    if next.to == at.to {
                        // A loop that takes what the first step takes.
                        run = self.cap;
                        break true;
                    }
                    run += 1;
                    at = *next;
                }
                _ => break true,
            }
        };
        // Only a run counted to its end is kept: one cut at `limit` may go
        // on.
        if exact {
            *self.runs.get_or_init(state, || run)
        } else {
            run
        }
    }

    /// Whether a walk in `state` at a trie node with `below` beneath it can
    /// take the whole subtree.
    #[inline]
    pub fn takes_subtree<A: Automaton + ?Sized>(
        &self,
        dfa: &A,
        state: u32,
        below: &tokensieve_core::trie::Below,
    ) -> bool {
        let height = u32::from(below.height);
        self.step(dfa, state).is_some_and(|s| s.covers(below))
            && self.run_within(dfa, state, height) >= height
    }
}

/// One character of text from `state`, for walks that take a whole trie
/// subtree at once: the ASCII bytes that all lead to one live, non-accepting
/// state `to` (the state itself when it loops, as a string body does; the
/// next one in a counted run, as `.{0,100}`), and whether every well-formed
/// multi-byte UTF-8 character leads there too through live, non-accepting
/// states. `None` when the state is dead or accepting (a walk must see every
/// place the output may end) or no ASCII byte leads to a live,
/// non-accepting state.
pub fn text_step<A: Automaton + ?Sized>(dfa: &A, state: u32) -> Option<TextStep> {
    if let Some(known) = dfa.known_text_step(state) {
        return known;
    }
    text_step_by_byte(dfa, state)
}

/// [`text_step`], asking the automaton about each byte.
///
/// Called for every state a trie walk meets (thousands in a first mask of
/// a big schema), so it allocates nothing and asks whether a state
/// accepts once per distinct target, not once per byte.
pub fn text_step_by_byte<A: Automaton + ?Sized>(dfa: &A, state: u32) -> Option<TextStep> {
    if state == DEAD || dfa.is_accepting(state) {
        return None;
    }
    let alive = |t: u32| t != DEAD && !dfa.is_accepting(t);
    // A byte of the class of the byte before it goes where that one went.
    let classes = dfa.byte_classes();
    let as_before = |b: u8| b > 0 && classes.is_some_and(|c| c[b as usize] == c[b as usize - 1]);
    let mut targets = [DEAD; 0x80];
    match (classes, dfa.row_by_class(state)) {
        (Some(classes), Some(row)) => {
            for (t, &c) in targets.iter_mut().zip(&classes[..0x80]) {
                *t = row[c as usize];
            }
        }
        _ => {
            for b in 0..0x80u8 {
                targets[b as usize] = if as_before(b) {
                    targets[b as usize - 1]
                } else {
                    dfa.next(state, b)
                };
            }
        }
    }
    // The state itself when it loops, else the commonest live target
    // (the lowest of those tied).
    let to = if targets.contains(&state) {
        state
    } else {
        let mut counts = [(DEAD, 0u32); 0x80];
        let mut distinct = 0;
        for &t in targets.iter().filter(|&&t| t != DEAD) {
            match counts[..distinct].iter_mut().find(|(s, _)| *s == t) {
                Some(c) => c.1 += 1,
                None => {
                    counts[distinct] = (t, 1);
                    distinct += 1;
                }
            }
        }
        counts[..distinct]
            .iter()
            .filter(|&&(s, _)| alive(s))
            .max_by_key(|&&(s, n)| (n, std::cmp::Reverse(s)))?
            .0
    };
    let mut ascii = [0u64; 2];
    for (b, _) in targets.iter().enumerate().filter(|&(_, &t)| t == to) {
        ascii[b / 64] |= 1 << (b % 64);
    }
    let leads = utf8_leads_to(dfa, state, to, as_before);
    Some(TextStep {
        ascii,
        utf8: leads == ALL_LEADS,
        leads,
        to,
    })
}

/// A UTF-8 continuation byte.
const CONT: (u8, u8) = (0x80, 0xBF);
/// Well-formed UTF-8 beyond ASCII, by lead byte (RFC 3629 table): the byte
/// ranges of each shape of character.
const UTF8_SHAPES: [&[(u8, u8)]; 8] = [
    &[(0xC2, 0xDF), CONT],
    &[(0xE0, 0xE0), (0xA0, 0xBF), CONT],
    &[(0xE1, 0xEC), CONT, CONT],
    &[(0xED, 0xED), (0x80, 0x9F), CONT],
    &[(0xEE, 0xEF), CONT, CONT],
    &[(0xF0, 0xF0), (0x90, 0xBF), CONT, CONT],
    &[(0xF1, 0xF3), CONT, CONT, CONT],
    &[(0xF4, 0xF4), (0x80, 0x8F), CONT, CONT],
];

/// The lead bytes of which every well-formed multi-byte UTF-8 character
/// leads from `state` to `to` through live, non-accepting states
/// ([`TextStep::leads`]). Lead bytes of one byte class go alike, so one of
/// each is asked about. The states partway through a character are kept in
/// two small lists; past their room the answer for that lead is no (a walk
/// then reads those bytes one by one: slower, as exact).
fn utf8_leads_to<A: Automaton + ?Sized>(
    dfa: &A,
    state: u32,
    to: u32,
    as_before: impl Fn(u8) -> bool,
) -> u64 {
    utf8_leads_where(dfa, state, as_before, |t| t == to)
}

/// The lead bytes of which every well-formed multi-byte UTF-8 character
/// leads from `state` through live, non-accepting states to one such
/// state, each of which is added to `ends` (those of characters from
/// leads that fail too: a caller gathering the states a walk may be in
/// gathers more, never fewer). For a walk whose characters may lead to
/// many states (see [`text_step`] for one).
pub fn utf8_live_leads<A: Automaton + ?Sized>(dfa: &A, state: u32, ends: &mut Vec<u32>) -> u64 {
    let classes = dfa.byte_classes();
    let as_before = |b: u8| b > 0 && classes.is_some_and(|c| c[b as usize] == c[b as usize - 1]);
    let alive = |t: u32| t != DEAD && !dfa.is_accepting(t);
    utf8_leads_where(dfa, state, as_before, |t| {
        let live = alive(t);
        if live && !ends.contains(&t) {
            ends.push(t);
        }
        live
    })
}

/// [`utf8_leads_to`], a character's last byte leading to a state `end`
/// says yes to.
fn utf8_leads_where<A: Automaton + ?Sized>(
    dfa: &A,
    state: u32,
    as_before: impl Fn(u8) -> bool,
    mut end: impl FnMut(u32) -> bool,
) -> u64 {
    const ROOM: usize = 64;
    let alive = |t: u32| t != DEAD && !dfa.is_accepting(t);
    // The first byte asked: a state that takes no multi-byte character
    // fails here, before any other work (and one that takes some, but not
    // from 0xC2, is said to take none: slower walks, as exact).
    if !alive(dfa.next(state, FIRST_LEAD)) {
        return 0;
    }
    // The bytes from 0x80 up that start a class, bit `b - 0x80`: only
    // one byte of each class is asked about.
    let starts: u128 = (0x80..=0xFFu8)
        .filter(|&b| !as_before(b))
        .fold(0, |set, b| set | 1 << (b - 0x80));
    let firsts = |lo: u8, hi: u8| {
        let (lo, hi) = (lo - 0x80, hi - 0x80);
        let range = (u128::MAX >> (127 - hi)) & (u128::MAX << lo);
        let mut set = starts & range | 1 << lo;
        std::iter::from_fn(move || {
            (set != 0).then(|| {
                let b = set.trailing_zeros() as u8;
                set &= set - 1;
                0x80 + b
            })
        })
    };
    let (mut states, mut next) = ([DEAD; ROOM], [DEAD; ROOM]);
    // Whether every character from the lead `b` of `shape` gets to `to`.
    let mut leads_to = |b: u8, shape: &[(u8, u8)]| {
        let t = dfa.next(state, b);
        if !alive(t) {
            return false;
        }
        states[0] = t;
        let mut len = 1;
        for (k, &(lo, hi)) in shape[1..].iter().enumerate() {
            let last = k + 2 == shape.len();
            let mut count = 0;
            for &q in &states[..len] {
                for b in firsts(lo, hi) {
                    let t = dfa.next(q, b);
                    if (last && !end(t)) || !alive(t) {
                        return false;
                    }
                    if !next[..count].contains(&t) {
                        if count == ROOM {
                            return false;
                        }
                        next[count] = t;
                        count += 1;
                    }
                }
            }
            std::mem::swap(&mut states, &mut next);
            len = count;
        }
        true
    };
    let mut leads = 0u64;
    for shape in UTF8_SHAPES {
        let (lo, hi) = shape[0];
        let mut classes = firsts(lo, hi).peekable();
        while let Some(b) = classes.next() {
            // The class of `b` within the shape's leads: up to the next
            // class's first byte.
            let end = classes.peek().map_or(hi, |&c| c - 1);
            if leads_to(b, shape) {
                leads |= lead_range(b, end);
            }
        }
    }
    leads
}

/// The bits of [`TextStep::leads`] of the lead bytes `lo..=hi`.
fn lead_range(lo: u8, hi: u8) -> u64 {
    (ALL_LEADS >> (0xF4 - hi)) & (ALL_LEADS << (lo - FIRST_LEAD))
}

/// A byte DFA over merged byte classes. State `0` is dead; every other state
/// can reach an accepting state.
#[derive(Debug, Clone)]
pub struct ByteDfa {
    classes: [u8; 256],
    stride: usize,
    /// `trans[state * stride + class]`.
    trans: Vec<u32>,
    accepting: Vec<bool>,
    /// The only byte that keeps a non-accepting state alive, if there is one.
    forced: Vec<u16>,
    /// UTF-8 continuation bytes still owed when in this state (0 = at a
    /// character boundary). Well defined because the language is valid UTF-8.
    pending_utf8: Vec<u8>,
    start: u32,
    /// States of the DFA as determinized, before pruning and minimization.
    pub raw_states: usize,
}

impl ByteDfa {
    /// Builds the DFA of `pattern` (whole-output match).
    pub fn build(pattern: &str, limits: &DfaLimits) -> Result<ByteDfa, GrammarError> {
        let hir = parse(pattern)?;
        if hir.properties().look_set().contains_word_unicode() {
            return Err(GrammarError::Unsupported {
                location: Location::None,
                what: "a Unicode word boundary (`\\b`, `\\B`, `\\<`, `\\>`; use `(?-u:\\b)` for an ASCII one)"
                    .into(),
            });
        }
        let hir = without_outer_anchors(hir);
        if LazyDfa::takes(&hir) {
            Self::determinize(&hir, limits)
        } else {
            // regex-automata's determinizer does work its set bytes do not
            // count (0.1-0.2 s a MiB on a pattern of 17 classes, where ours
            // does a MiB in 0.01-0.04 s): a quarter of the sets ends it
            // within about 0.5 s.
            let limits = DfaLimits {
                determinize_size_limit: limits.determinize_size_limit / LOOK_AROUND_SETS,
                ..*limits
            };
            Self::build_with_look_around(&hir, &limits).map_err(|e| match e {
                GrammarError::LimitExceeded { limit, knob, .. }
                    if knob == "determinize_size_limit" =>
                {
                    GrammarError::LimitExceeded {
                        what: "the regex's determinization (heap bytes of the NFA state sets \
                               behind its DFA states; a quarter of the limit for a regex with \
                               look-around)"
                            .into(),
                        limit: limit * LOOK_AROUND_SETS,
                        knob,
                    }
                }
                e => e,
            })
        }
    }

    /// The DFA [`Self::build`] makes of `pattern`, made by regex-automata's
    /// dense DFA whatever the pattern: the reference that tests and the
    /// `regex` fuzz target check `build`'s own determinizer against. Its
    /// limits count other sets than `build`'s, so one may refuse a pattern
    /// the other builds.
    pub fn build_by_regex_automata(
        pattern: &str,
        limits: &DfaLimits,
    ) -> Result<ByteDfa, GrammarError> {
        Self::build_with_look_around(&parse(pattern)?, limits)
    }

    /// Whether `self` and `other` are the same table: the same byte
    /// classes, states, transitions and accepting states (a minimized DFA
    /// numbered breadth-first, as [`Self::build`] makes it, is one table
    /// per language).
    pub fn same_table(&self, other: &ByteDfa) -> bool {
        self.classes == other.classes
            && self.stride == other.stride
            && self.trans == other.trans
            && self.accepting == other.accepting
            && self.forced == other.forced
            && self.pending_utf8 == other.pending_utf8
            && self.start == other.start
    }

    /// [`Self::build`] of a pattern without look-around: every state of
    /// its lazy DFA made, breadth-first from the start. The lazy DFA's
    /// NFA is made from the syntax tree in one pass and its states hold
    /// only NFA states that can still reach a match, so its sets are
    /// smaller than regex-automata's; on the 2,031 regexes of the MaskBench
    /// dev schemas this and the minimization take 21 s in all where
    /// regex-automata took 101 s (slowest 0.3 s against 1.7 s), and give
    /// the same table wherever both build. The work is bounded by the
    /// heap bytes of the sets (`determinize_size_limit`), of the sets and
    /// rows together (`dfa_size_limit`), and the states made (`max_dfa_states`
    /// × 8 before minimization).
    fn determinize(hir: &Hir, limits: &DfaLimits) -> Result<ByteDfa, GrammarError> {
        let raw_cap = limits.max_dfa_states.saturating_mul(8);
        let lazy = LazyDfa::from_hir(
            hir,
            &DfaLimits {
                max_dfa_states: raw_cap,
                ..*limits
            },
        )?
        .limit_set_bytes(limits.determinize_size_limit);
        let classes = *lazy.classes();
        let stride = lazy.row_of(DEAD).len();
        // Lazy ids are made in order, so ours are theirs renumbered in the
        // order this walk meets them (0 = not met yet; dead stays 0).
        let mut ids: Vec<u32> = vec![DEAD; 2];
        let mut order = vec![LazyDfa::START];
        ids[LazyDfa::START as usize] = 1;
        let mut trans = vec![DEAD; stride];
        let mut accepting = vec![false];
        let mut i = 0;
        while i < order.len() {
            let state = order[i];
            i += 1;
            accepting.push(lazy.is_accepting(state));
            let row = lazy.row_of(state);
            if lazy.exhausted() {
                return Err(determinization_error(&lazy, limits));
            }
            for &to in row {
                let to = to as usize;
                if to >= ids.len() {
                    ids.resize(to + 1, DEAD);
                }
                if to != DEAD as usize && ids[to] == DEAD {
                    ids[to] = order.len() as u32 + 1;
                    order.push(to as u32);
                }
                trans.push(ids[to]);
            }
        }
        let table = Table {
            classes,
            stride,
            trans,
            accepting,
            start: 1,
        };
        reduce(table, limits, "the regex's DFA")
    }

    /// [`Self::build`] of a pattern with look-around (`$`, an ASCII `\b`),
    /// which the lazy DFA does not take: regex-automata's dense DFA, its
    /// work bounded by its own `determinize_size_limit` and
    /// `dfa_size_limit`.
    fn build_with_look_around(hir: &Hir, limits: &DfaLimits) -> Result<ByteDfa, GrammarError> {
        let nfa = compile_nfa(hir, limits.nfa_size_limit)?;
        let dense = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .minimize(false)
                    .byte_classes(true)
                    .accelerate(false)
                    .specialize_start_states(false)
                    .dfa_size_limit(Some(limits.dfa_size_limit))
                    .determinize_size_limit(Some(limits.determinize_size_limit)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| {
                if e.is_size_limit_exceeded() {
                    size_limit_error(&e, limits)
                } else {
                    GrammarError::Unsupported {
                        location: Location::None,
                        what: format!("this regex as a DFA ({e})"),
                    }
                }
            })?;
        reduce(extract(&dense, limits)?, limits, "the regex's DFA")
    }

    /// The DFA of the outputs every one of `patterns` matches in full (the
    /// intersection of their languages): each pattern's DFA, then their
    /// product, pruned and minimized like one regex's. What a regex cannot
    /// say: a JSON string under a pattern *and* a length, or two patterns.
    /// An empty intersection is an error, as an empty regex is. Built
    /// whole, it can be the product of thousands of states by thousands;
    /// the earley backend makes it lazily ([`crate::product::LazyProduct`],
    /// whose tests take this one as their reference).
    pub fn intersection(patterns: &[&str], limits: &DfaLimits) -> Result<ByteDfa, GrammarError> {
        let Some((first, rest)) = patterns.split_first() else {
            return Err(GrammarError::InvalidSpec(
                "an intersection of no regexes".into(),
            ));
        };
        let mut dfa = ByteDfa::build(first, limits)?;
        for pattern in rest {
            let other = ByteDfa::build(pattern, limits)?;
            dfa = dfa.product(&other, limits)?;
        }
        Ok(dfa)
    }

    /// Whether no output matches two of `patterns` in full: each
    /// pattern's DFA once, then the product of each pair (an error past
    /// `limits`, as for [`ByteDfa::intersection`]).
    pub fn pairwise_disjoint(patterns: &[&str], limits: &DfaLimits) -> Result<bool, GrammarError> {
        let mut dfas = Vec::with_capacity(patterns.len());
        for pattern in patterns {
            match ByteDfa::build(pattern, limits) {
                Ok(dfa) => dfas.push(dfa),
                // A pattern that matches nothing meets no other.
                Err(e) if e == matches_nothing() => {}
                Err(e) => return Err(e),
            }
        }
        for (i, a) in dfas.iter().enumerate() {
            for b in &dfas[i + 1..] {
                match a.product(b, limits) {
                    Ok(_) => return Ok(false),
                    Err(e) if e == matches_nothing() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(true)
    }

    /// The product automaton of `self` and `other`: a pair of states
    /// accepts when both do, and dies when either does.
    fn product(&self, other: &ByteDfa, limits: &DfaLimits) -> Result<ByteDfa, GrammarError> {
        // Byte classes of the product: the distinct pairs of classes.
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let mut pair_class: HashMap<(u8, u8), u8> = HashMap::new();
        for b in 0..=255u8 {
            let pair = (self.classes[b as usize], other.classes[b as usize]);
            let next = pair_class.len();
            let c = *pair_class.entry(pair).or_insert_with(|| {
                reps.push(b);
                next as u8
            });
            classes[b as usize] = c;
        }
        let stride = reps.len();
        let raw_cap = limits.max_dfa_states.saturating_mul(8);
        let mut ids: HashMap<(u32, u32), u32> = HashMap::new();
        let mut order = vec![(self.start, other.start)];
        ids.insert((self.start, other.start), 1);
        let mut trans = vec![DEAD; stride];
        let mut accepting = vec![false];
        let mut i = 0;
        while i < order.len() {
            let (a, b) = order[i];
            i += 1;
            accepting.push(self.is_accepting(a) && other.is_accepting(b));
            for &rep in &reps {
                let next = (self.next(a, rep), other.next(b, rep));
                let id = if next.0 == DEAD || next.1 == DEAD {
                    DEAD
                } else if let Some(&id) = ids.get(&next) {
                    id
                } else {
                    let id = order.len() as u32 + 1;
                    if id as usize > raw_cap {
                        return Err(GrammarError::LimitExceeded {
                            what: "the intersection's unminimized DFA (states)".into(),
                            limit: raw_cap,
                            knob: "max_dfa_states (x8 before minimization)".into(),
                        });
                    }
                    ids.insert(next, id);
                    order.push(next);
                    id
                };
                trans.push(id);
            }
        }
        let table = Table {
            classes,
            stride,
            trans,
            accepting,
            start: 1,
        };
        reduce(table, limits, "the intersection's DFA")
    }

    /// The state at the start of the output.
    #[inline]
    pub fn start(&self) -> u32 {
        self.start
    }

    /// States, the dead one included.
    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }

    /// Distinct byte classes.
    pub fn num_classes(&self) -> usize {
        self.stride
    }

    /// The state after `byte` (state 0, dead, = the output can no longer match).
    #[inline(always)]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[state as usize * self.stride + self.classes[byte as usize] as usize]
    }

    /// Walks `bytes`; `Err(offset)` of the first byte that kills the output.
    #[inline]
    pub fn walk(&self, mut state: u32, bytes: &[u8]) -> Result<u32, usize> {
        for (i, &b) in bytes.iter().enumerate() {
            state = self.next(state, b);
            if state == DEAD {
                return Err(i);
            }
        }
        Ok(state)
    }

    /// May the output end in `state`?
    #[inline]
    pub fn is_accepting(&self, state: u32) -> bool {
        self.accepting[state as usize]
    }

    /// The one byte that must come next in `state` (a non-accepting state
    /// with a single live byte), if any.
    #[inline]
    pub fn forced_byte(&self, state: u32) -> Option<u8> {
        let f = self.forced[state as usize];
        (f != NOT_FORCED).then_some(f as u8)
    }

    /// Whether `state` sits on a UTF-8 character boundary.
    #[inline]
    pub fn at_char_boundary(&self, state: u32) -> bool {
        self.pending_utf8[state as usize] == 0
    }

    /// One character of text from `state` (see [`text_step`]).
    pub fn text_step(&self, state: u32) -> Option<TextStep> {
        text_step(self, state)
    }

    /// Bytes that lead from `state` to a live state (for error messages).
    pub fn live_bytes(&self, state: u32) -> Vec<u8> {
        (0..=255u8)
            .filter(|&b| self.next(state, b) != DEAD)
            .collect()
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.trans.len() * 4 + self.accepting.len() * 4 + 256
    }

    /// The transitions of `state`, one per byte class.
    #[inline(always)]
    pub fn row(&self, state: u32) -> &[u32] {
        &self.trans[state as usize * self.stride..(state as usize + 1) * self.stride]
    }

    /// The byte class of every byte.
    pub fn classes(&self) -> &[u8; 256] {
        &self.classes
    }

    #[inline(always)]
    pub fn class_of(&self, byte: u8) -> usize {
        self.classes[byte as usize] as usize
    }
}

impl Automaton for ByteDfa {
    #[inline]
    fn start(&self) -> u32 {
        self.start
    }
    #[inline]
    fn next(&self, state: u32, byte: u8) -> u32 {
        ByteDfa::next(self, state, byte)
    }
    #[inline]
    fn is_accepting(&self, state: u32) -> bool {
        ByteDfa::is_accepting(self, state)
    }
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(self.classes())
    }
    fn row_by_class(&self, state: u32) -> Option<&[u32]> {
        Some(self.row(state))
    }
}

/// The syntax tree of `pattern` (the regex-syntax dialect, UTF-8 only), as
/// [`ByteDfa::build`] reads it; errors name the construct and its offset.
pub fn parse(pattern: &str) -> Result<Hir, GrammarError> {
    crate::syntax::parse(pattern, 256).map_err(|e| syntax_error(pattern, &e))
}

/// Turns a `regex-syntax` error into ours, naming the construct and offset.
fn syntax_error(pattern: &str, err: &regex_syntax::Error) -> GrammarError {
    use regex_syntax::ast::ErrorKind;
    match err {
        regex_syntax::Error::Parse(e) => {
            let span = e.span();
            let offset = span.start.offset;
            let text = pattern.get(offset..).unwrap_or("");
            match e.kind() {
                ErrorKind::UnsupportedLookAround => {
                    let what = if text.starts_with("(?=") {
                        "look-ahead `(?=...)`"
                    } else if text.starts_with("(?!") {
                        "negative look-ahead `(?!...)`"
                    } else if text.starts_with("(?<=") {
                        "look-behind `(?<=...)`"
                    } else if text.starts_with("(?<!") {
                        "negative look-behind `(?<!...)`"
                    } else {
                        "look-around"
                    };
                    GrammarError::Unsupported {
                        location: Location::Offset(offset),
                        what: what.into(),
                    }
                }
                ErrorKind::UnsupportedBackreference => {
                    let shown = pattern.get(offset..span.end.offset).unwrap_or("\\N");
                    GrammarError::Unsupported {
                        location: Location::Offset(offset),
                        what: format!("back-reference `{shown}`"),
                    }
                }
                kind => GrammarError::InvalidRegex {
                    location: Location::Offset(offset),
                    message: kind.to_string(),
                },
            }
        }
        regex_syntax::Error::Translate(e) => GrammarError::InvalidRegex {
            location: Location::Offset(e.span().start.offset),
            message: e.kind().to_string(),
        },
        other => GrammarError::InvalidRegex {
            location: Location::None,
            message: other.to_string(),
        },
    }
}

/// A DFA table under construction.
struct Table {
    classes: [u8; 256],
    stride: usize,
    trans: Vec<u32>,
    accepting: Vec<bool>,
    start: u32,
}

/// Copies the reachable part of a dense DFA into a [`Table`], state 0 dead.
fn extract(dfa: &dense::DFA<Vec<u32>>, limits: &DfaLimits) -> Result<Table, GrammarError> {
    let byte_classes = dfa.byte_classes();
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        let c = byte_classes.get(b);
        classes[b as usize] = c;
        if c as usize == reps.len() {
            reps.push(b);
        }
    }
    let stride = reps.len();
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| GrammarError::Unsupported {
            location: Location::None,
            what: format!("this regex's start state ({e})"),
        })?;
    // The raw DFA may be larger than the final one (minimization shrinks
    // it), but not unboundedly: cap it at a generous multiple.
    let raw_cap = limits.max_dfa_states.saturating_mul(8);
    // Our id of each dense state (0 = not seen yet), by dense state index
    // (dense state ids are premultiplied by the stride).
    let stride2 = dfa.stride2();
    let index = |sid: regex_automata::util::primitives::StateID| sid.as_usize() >> stride2;
    // The transition table holds `states << stride2` u32s, so this bounds
    // the number of states.
    let mut ids: Vec<u32> = vec![0; ((dfa.memory_usage() / 4) >> stride2) + 1];
    let mut order = vec![start];
    let mut trans = vec![DEAD; stride];
    let mut accepting = vec![false];
    if dfa.is_dead_state(start) {
        return Err(matches_nothing());
    }
    ids[index(start)] = 1;
    let mut i = 0;
    while i < order.len() {
        let sid = order[i];
        i += 1;
        accepting.push(dfa.is_match_state(dfa.next_eoi_state(sid)));
        for &rep in &reps {
            let next = dfa.next_state(sid, rep);
            if dfa.is_quit_state(next) {
                return Err(GrammarError::Unsupported {
                    location: Location::None,
                    what: "a regex whose DFA gives up on some input".into(),
                });
            }
            let id = if dfa.is_dead_state(next) {
                DEAD
            } else if ids[index(next)] != 0 {
                ids[index(next)]
            } else {
                let id = order.len() as u32 + 1;
                if id as usize > raw_cap {
                    return Err(GrammarError::LimitExceeded {
                        what: "the regex's unminimized DFA (states)".into(),
                        limit: raw_cap,
                        knob: "max_dfa_states (x8 before minimization)".into(),
                    });
                }
                ids[index(next)] = id;
                order.push(next);
                id
            };
            trans.push(id);
        }
    }
    Ok(Table {
        classes,
        stride,
        trans,
        accepting,
        start: 1,
    })
}

/// A raw table pruned of dead ends, minimized (when the limits say so) and
/// finished, within the state limit (`what` names the automaton in the
/// error).
fn reduce(raw: Table, limits: &DfaLimits, what: &str) -> Result<ByteDfa, GrammarError> {
    let raw_states = raw.accepting.len();
    let pruned = prune_dead_ends(raw)?;
    let reduced = if limits.minimize {
        let blocks = hopcroft(&pruned.trans, pruned.stride, &pruned.accepting);
        quotient(&pruned, &blocks)
    } else {
        pruned
    };
    let mut dfa = finish(reduced);
    dfa.raw_states = raw_states;
    if dfa.num_states() > limits.max_dfa_states {
        return Err(GrammarError::LimitExceeded {
            what: format!("{what} ({} states)", dfa.num_states()),
            limit: limits.max_dfa_states,
            knob: "max_dfa_states".into(),
        });
    }
    Ok(dfa)
}

fn matches_nothing() -> GrammarError {
    GrammarError::InvalidSpec("the regex matches no string at all".into())
}

/// Sends every transition into a state that cannot reach acceptance to the
/// dead state, and drops such states.
fn prune_dead_ends(t: Table) -> Result<Table, GrammarError> {
    let n = t.accepting.len();
    let k = t.stride;
    // Reverse edges, CSR.
    let mut count = vec![0u32; n + 1];
    for &to in &t.trans {
        count[to as usize + 1] += 1;
    }
    count[DEAD as usize + 1] = 0; // edges into the dead state are not needed
    for i in 0..n {
        count[i + 1] += count[i];
    }
    let mut fill = count.clone();
    let mut from = vec![0u32; count[n] as usize];
    for (s, row) in t.trans.chunks_exact(k).enumerate() {
        for &to in row {
            if to != DEAD {
                from[fill[to as usize] as usize] = s as u32;
                fill[to as usize] += 1;
            }
        }
    }
    let mut live = vec![false; n];
    let mut queue: VecDeque<u32> = (1..n as u32).filter(|&s| t.accepting[s as usize]).collect();
    for &s in &queue {
        live[s as usize] = true;
    }
    while let Some(s) = queue.pop_front() {
        for &p in &from[count[s as usize] as usize..count[s as usize + 1] as usize] {
            if p != DEAD && !live[p as usize] {
                live[p as usize] = true;
                queue.push_back(p);
            }
        }
    }
    if !live[t.start as usize] {
        return Err(matches_nothing());
    }
    // Renumber live states (dead stays 0).
    let mut new_id = vec![DEAD; n];
    let mut next = 1u32;
    for s in 1..n {
        if live[s] {
            new_id[s] = next;
            next += 1;
        }
    }
    let m = next as usize;
    let mut trans = vec![DEAD; m * k];
    let mut accepting = vec![false; m];
    for s in 1..n {
        if live[s] {
            let ns = new_id[s] as usize;
            accepting[ns] = t.accepting[s];
            for c in 0..k {
                trans[ns * k + c] = new_id[t.trans[s * k + c] as usize];
            }
        }
    }
    Ok(Table {
        classes: t.classes,
        stride: k,
        trans,
        accepting,
        start: new_id[t.start as usize],
    })
}

/// The quotient DFA of a partition into blocks (`blocks[state]`).
fn quotient(t: &Table, blocks: &[u32]) -> Table {
    let k = t.stride;
    let nb = blocks.iter().map(|&b| b as usize + 1).max().unwrap_or(1);
    // Keep the dead state's block as 0.
    let dead_block = blocks[DEAD as usize];
    let remap = |b: u32| -> u32 {
        if b == dead_block {
            0
        } else if b == 0 {
            dead_block
        } else {
            b
        }
    };
    let mut trans = vec![DEAD; nb * k];
    let mut accepting = vec![false; nb];
    let mut done = vec![false; nb];
    for s in 0..t.accepting.len() {
        let b = remap(blocks[s]) as usize;
        if done[b] {
            continue;
        }
        done[b] = true;
        accepting[b] = t.accepting[s];
        for c in 0..k {
            trans[b * k + c] = remap(blocks[t.trans[s * k + c] as usize]);
        }
    }
    Table {
        classes: t.classes,
        stride: k,
        trans,
        accepting,
        start: remap(blocks[t.start as usize]),
    }
}

/// Renumbers states breadth-first from the start (dead = 0), merges byte
/// classes that every state treats alike, and precomputes the forced byte and
/// UTF-8 position of each state.
fn finish(t: Table) -> ByteDfa {
    let k = t.stride;
    let n = t.accepting.len();
    // Breadth-first order from the start: nearby states get nearby rows.
    let mut new_id = vec![u32::MAX; n];
    new_id[DEAD as usize] = DEAD;
    let mut order = vec![t.start];
    new_id[t.start as usize] = 1;
    let mut i = 0;
    while i < order.len() {
        let s = order[i] as usize;
        i += 1;
        for c in 0..k {
            let to = t.trans[s * k + c] as usize;
            if new_id[to] == u32::MAX {
                new_id[to] = order.len() as u32 + 1;
                order.push(to as u32);
            }
        }
    }
    let m = order.len() + 1;
    // Merge identical class columns.
    let mut column_class: HashMap<Vec<u32>, u8> = HashMap::new();
    let mut class_map = vec![0u8; k];
    for (c, slot) in class_map.iter_mut().enumerate() {
        let column: Vec<u32> = order
            .iter()
            .map(|&s| new_id[t.trans[s as usize * k + c] as usize])
            .collect();
        let next = column_class.len() as u8;
        *slot = *column_class.entry(column).or_insert(next);
    }
    let stride = column_class.len();
    let mut class_rep = vec![usize::MAX; stride];
    for (c, &nc) in class_map.iter().enumerate() {
        if class_rep[nc as usize] == usize::MAX {
            class_rep[nc as usize] = c;
        }
    }
    let mut trans = vec![DEAD; m * stride];
    let mut accepting = vec![false; m];
    for (idx, &s) in order.iter().enumerate() {
        let ns = idx + 1;
        accepting[ns] = t.accepting[s as usize];
        for nc in 0..stride {
            trans[ns * stride + nc] = new_id[t.trans[s as usize * k + class_rep[nc]] as usize];
        }
    }
    let mut classes = [0u8; 256];
    for b in 0..256 {
        classes[b] = class_map[t.classes[b] as usize];
    }
    let mut dfa = ByteDfa {
        classes,
        stride,
        trans,
        accepting,
        forced: vec![NOT_FORCED; m],
        pending_utf8: vec![0; m],
        start: 1,
        raw_states: 0,
    };
    let mut class_size = vec![0u32; stride];
    let mut class_byte = vec![0u8; stride];
    for b in 0..=255u8 {
        let c = dfa.class_of(b);
        class_size[c] += 1;
        class_byte[c] = b;
    }
    for s in 1..m {
        if dfa.accepting[s] {
            continue;
        }
        let mut live = (0..stride).filter(|&c| dfa.trans[s * stride + c] != DEAD);
        if let (Some(c), None) = (live.next(), live.next()) {
            if class_size[c] == 1 {
                dfa.forced[s] = class_byte[c] as u16;
            }
        }
    }
    // UTF-8 position, breadth-first from the start (at a boundary).
    let mut seen = vec![false; m];
    seen[1] = true;
    let mut queue = VecDeque::from([1u32]);
    while let Some(s) = queue.pop_front() {
        let pending = dfa.pending_utf8[s as usize];
        for b in 0..=255u8 {
            let to = dfa.next(s, b);
            if to == DEAD || seen[to as usize] {
                continue;
            }
            seen[to as usize] = true;
            dfa.pending_utf8[to as usize] = match b {
                0x80..=0xBF => pending.saturating_sub(1),
                0xC0..=0xDF => 1,
                0xE0..=0xEF => 2,
                0xF0..=0xFF => 3,
                _ => 0,
            };
            queue.push_back(to);
        }
    }
    dfa
}

thread_local! {
    /// One NFA compiler a thread, with the limit it was configured for:
    /// a compiler keeps its UTF-8 suffix cache (10,000 entries) from one
    /// build to the next instead of allocating it afresh.
    static COMPILER: std::cell::RefCell<Option<(usize, thompson::Compiler)>> =
        const { std::cell::RefCell::new(None) };
}

/// The error for a DFA build that ran into one of its two heap limits,
/// naming the one it was: regex-automata tells them apart only in its
/// message (`DeterminizeExceededSizeLimit` is not public).
fn size_limit_error(e: &dense::BuildError, limits: &DfaLimits) -> GrammarError {
    if e.to_string().starts_with("determinization exceeded") {
        GrammarError::LimitExceeded {
            what: "the regex's determinization (heap bytes of the NFA state sets behind its DFA states)".into(),
            limit: limits.determinize_size_limit,
            knob: "determinize_size_limit".into(),
        }
    } else {
        GrammarError::LimitExceeded {
            what: "the regex's DFA (heap bytes)".into(),
            limit: limits.dfa_size_limit,
            knob: "dfa_size_limit".into(),
        }
    }
}

/// The share of `determinize_size_limit` a pattern with look-around may
/// fill (see [`ByteDfa::build`]).
const LOOK_AROUND_SETS: usize = 4;

/// `hir` without the anchors that hold wherever they stand: a start of
/// text (or of a line) first in the pattern and an end of text (or of a
/// line) last in it, which a whole-output match satisfies anyway. So
/// `^[a-z]+$` is determinized as `[a-z]+` is, over the lazy DFA.
fn without_outer_anchors(hir: Hir) -> Hir {
    use regex_syntax::hir::{HirKind, Look};
    let is_start = |h: &Hir| {
        matches!(
            h.kind(),
            HirKind::Look(Look::Start | Look::StartLF | Look::StartCRLF)
        )
    };
    let is_end = |h: &Hir| {
        matches!(
            h.kind(),
            HirKind::Look(Look::End | Look::EndLF | Look::EndCRLF)
        )
    };
    match hir.kind() {
        HirKind::Look(_) if is_start(&hir) || is_end(&hir) => Hir::empty(),
        HirKind::Concat(parts) => {
            let start = parts.iter().take_while(|h| is_start(h)).count();
            let rest = &parts[start..];
            let end = rest.iter().rev().take_while(|h| is_end(h)).count();
            Hir::concat(rest[..rest.len() - end].to_vec())
        }
        HirKind::Alternation(branches) => Hir::alternation(
            branches
                .iter()
                .cloned()
                .map(without_outer_anchors)
                .collect(),
        ),
        HirKind::Capture(capture) => without_outer_anchors((*capture.sub).clone()),
        _ => hir,
    }
}

/// The error for a determinization ([`ByteDfa::determinize`]) that a
/// limit of its lazy DFA stopped, naming that limit.
fn determinization_error(lazy: &LazyDfa, limits: &DfaLimits) -> GrammarError {
    match lazy.stopped_by() {
        Some((Stop::States, states)) => GrammarError::LimitExceeded {
            what: format!("the regex's unminimized DFA ({states} states)"),
            limit: limits.max_dfa_states.saturating_mul(8),
            knob: "max_dfa_states (x8 before minimization)".into(),
        },
        Some((Stop::SetBytes, _)) => GrammarError::LimitExceeded {
            what: "the regex's determinization (heap bytes of the NFA state sets behind its DFA states)".into(),
            limit: limits.determinize_size_limit,
            knob: "determinize_size_limit".into(),
        },
        _ => GrammarError::LimitExceeded {
            what: "the regex's DFA (heap bytes)".into(),
            limit: limits.dfa_size_limit,
            knob: "dfa_size_limit".into(),
        },
    }
}

/// regex-automata's Thompson NFA of `hir` (no captures), within
/// `nfa_size_limit` heap bytes, for its DFA builder.
fn compile_nfa(hir: &Hir, nfa_size_limit: usize) -> Result<thompson::NFA, GrammarError> {
    COMPILER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot
            .as_ref()
            .is_none_or(|(limit, _)| *limit != nfa_size_limit)
        {
            let mut compiler = thompson::Compiler::new();
            compiler.configure(
                thompson::Config::new()
                    .nfa_size_limit(Some(nfa_size_limit))
                    .which_captures(thompson::WhichCaptures::None),
            );
            *slot = Some((nfa_size_limit, compiler));
        }
        let (_, compiler) = slot.as_ref().expect("set above");
        compiler
            .build_from_hir(hir)
            .map_err(|e| match e.size_limit() {
                Some(limit) => GrammarError::LimitExceeded {
                    what: "the regex's NFA (heap bytes)".into(),
                    limit,
                    knob: "nfa_size_limit".into(),
                },
                None => GrammarError::InvalidRegex {
                    location: Location::None,
                    message: e.to_string(),
                },
            })
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Limits no test pattern reaches but the one each test lowers.
    fn roomy() -> DfaLimits {
        DfaLimits {
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 32 << 20,
            max_dfa_states: 1 << 20,
            minimize: true,
        }
    }

    /// The knob of the limit `pattern` runs into under `limits`.
    fn knob(pattern: &str, limits: &DfaLimits) -> String {
        match ByteDfa::build(pattern, limits) {
            Err(GrammarError::LimitExceeded { knob, .. }) => knob,
            Ok(_) => panic!("{pattern}: compiled"),
            Err(e) => panic!("{pattern}: {e}"),
        }
    }

    /// Each of the determinizer's two heap limits is reported under its
    /// own knob: a few states that each hold hundreds of NFA states fill
    /// the sets first, many small states fill the table first.
    #[test]
    fn the_two_heap_limits_are_told_apart() {
        let roomy = roomy();
        let few_sets = DfaLimits {
            determinize_size_limit: 64 << 10,
            ..roomy
        };
        assert_eq!(knob("a{0,2000}", &few_sets), "determinize_size_limit");
        assert!(ByteDfa::build("a{0,2000}", &roomy).is_ok());
        let small_table = DfaLimits {
            dfa_size_limit: 64 << 10,
            ..roomy
        };
        let pairs = "(ab|cd|ef|gh|ij|kl|mn|op){0,1000}";
        assert_eq!(knob(pairs, &small_table), "dfa_size_limit");
        assert!(ByteDfa::build(pairs, &roomy).is_ok());
    }

    /// The determinizer over the lazy DFA gives, for every pattern
    /// without look-around, the very minimized table regex-automata's
    /// dense DFA gives (both minimized, numbered breadth-first, classes
    /// merged: a canonical form).
    #[test]
    fn both_determinizers_give_the_same_dfa() {
        let limits = DfaLimits {
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 32 << 20,
            max_dfa_states: 50_000,
            minimize: true,
        };
        for pattern in [
            "",
            "a",
            "a*",
            "(ab|a)*b?",
            "[a-z ]{0,300}",
            r#""([^"\\]|\\.)*""#,
            r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
            "(?s:.){2,5}x",
            "[\u{80}-\u{10FFFF}]+",
            r"\p{Greek}{1,3}|é",
            r#"\{("a":(true|false)(,"b":[0-9]{1,4})?)?\}"#,
            r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
            r"(?i:hello|wörld)+",
            r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))",
            r"[^a-z]{2,4}\P{N}",
            r"(a|b)*a(a|b){5}",
        ] {
            let ours = ByteDfa::build(pattern, &limits).unwrap();
            let theirs = ByteDfa::build_by_regex_automata(pattern, &limits).unwrap();
            assert!(ours.same_table(&theirs), "{pattern}");
            assert_eq!(ours.trans, theirs.trans, "{pattern}");
        }
    }

    /// Anchors first or last in a pattern hold anyway in a whole-output
    /// match: dropped, the pattern is the table regex-automata makes of it
    /// with them. Anchors inside it are kept (and go to regex-automata).
    #[test]
    fn outer_anchors_are_dropped_and_inner_ones_kept() {
        let limits = DfaLimits {
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 32 << 20,
            max_dfa_states: 50_000,
            minimize: true,
        };
        for (pattern, plain) in [
            ("^[a-z]+@x$", "[a-z]+@x"),
            (r"\A(ab|c)*\z", "(ab|c)*"),
            ("(?m)^a|b$", "a|b"),
            ("^^(a|b)+$$", "(a|b)+"),
            ("(^a)|(b$)", "a|b"),
            ("^", ""),
        ] {
            let hir = without_outer_anchors(parse(pattern).unwrap());
            assert!(LazyDfa::takes(&hir), "{pattern}");
            let ours = ByteDfa::build(pattern, &limits).unwrap();
            let reference = ByteDfa::build_by_regex_automata(pattern, &limits).unwrap();
            let unanchored = ByteDfa::build(plain, &limits).unwrap();
            assert!(ours.same_table(&reference), "{pattern}");
            assert!(ours.same_table(&unanchored), "{pattern}");
        }
        for pattern in ["a^?b", "(?-u:\\b)ab", "a$?b", "(^|x)a"] {
            let hir = without_outer_anchors(parse(pattern).unwrap());
            assert!(!LazyDfa::takes(&hir), "{pattern}");
            let ours = ByteDfa::build(pattern, &limits).unwrap();
            let reference = ByteDfa::build_by_regex_automata(pattern, &limits).unwrap();
            assert!(ours.same_table(&reference), "{pattern}");
        }
    }

    /// Each limit of the determinizer over the lazy DFA is reported under
    /// its own knob, and a pattern within them all builds.
    #[test]
    fn the_determinizers_limits_are_named() {
        let roomy = roomy();
        // The n-th byte from the end is an `a`: 2^n states.
        let wide = "(a|b)*a(a|b){12}";
        assert!(ByteDfa::build(wide, &roomy).is_ok());
        let few_states = DfaLimits {
            max_dfa_states: 500,
            ..roomy
        };
        assert_eq!(
            knob(wide, &few_states),
            "max_dfa_states (x8 before minimization)"
        );
        // With look-around, regex-automata fills at most a quarter of the
        // sets' limit, named as that limit.
        let counted = "a{0,2000}";
        let bounded = "(?-u:\\b)a{0,2000}";
        let sets = DfaLimits {
            determinize_size_limit: 128 << 10,
            ..roomy
        };
        assert!(ByteDfa::build(counted, &sets).is_ok());
        match ByteDfa::build(bounded, &sets) {
            Err(GrammarError::LimitExceeded { what, limit, knob }) => {
                assert_eq!(knob, "determinize_size_limit");
                assert_eq!(limit, 128 << 10);
                assert!(what.contains("look-around"), "{what}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// The text step as first written (vectors, a question per byte): the
    /// oracle of the one that allocates nothing.
    fn text_step_reference<A: Automaton + ?Sized>(dfa: &A, state: u32) -> Option<TextStep> {
        if state == DEAD || dfa.is_accepting(state) {
            return None;
        }
        let alive = |t: u32| t != DEAD && !dfa.is_accepting(t);
        // A byte of the class of the byte before it goes where that one went.
        let classes = dfa.byte_classes();
        let as_before =
            |b: u8| b > 0 && classes.is_some_and(|c| c[b as usize] == c[b as usize - 1]);
        let mut targets: Vec<u32> = Vec::with_capacity(0x80);
        match (classes, dfa.row_by_class(state)) {
            (Some(classes), Some(row)) => {
                targets.extend((0..0x80).map(|b| row[classes[b] as usize]));
            }
            _ => {
                for b in 0..0x80u8 {
                    let t = if as_before(b) {
                        targets[b as usize - 1]
                    } else {
                        dfa.next(state, b)
                    };
                    targets.push(t);
                }
            }
        }
        // The state itself when it loops, else the commonest target.
        let to = if targets.contains(&state) {
            state
        } else {
            let mut counts: Vec<(u32, usize)> = Vec::new();
            for &t in targets.iter().filter(|&&t| alive(t)) {
                match counts.iter_mut().find(|(s, _)| *s == t) {
                    Some(c) => c.1 += 1,
                    None => counts.push((t, 1)),
                }
            }
            counts
                .iter()
                .max_by_key(|&&(s, n)| (n, std::cmp::Reverse(s)))?
                .0
        };
        let mut ascii = [0u64; 2];
        for b in (0..0x80u8).filter(|&b| targets[b as usize] == to) {
            ascii[b as usize / 64] |= 1 << (b % 64);
        }
        // Each lead byte on its own.
        let mut leads = 0u64;
        for shape in UTF8_SHAPES {
            let (lo, hi) = shape[0];
            for lead in lo..=hi {
                let mut states = vec![state];
                let ok = std::iter::once((lead, lead))
                    .chain(shape[1..].iter().copied())
                    .enumerate()
                    .all(|(k, (lo, hi))| {
                        let last = k + 1 == shape.len();
                        let mut next = Vec::new();
                        for &q in &states {
                            for b in (lo..=hi).filter(|&b| b == lo || !as_before(b)) {
                                let t = dfa.next(q, b);
                                if (last && t != to) || !alive(t) {
                                    return false;
                                }
                                if !next.contains(&t) {
                                    next.push(t);
                                }
                            }
                        }
                        states = next;
                        true
                    });
                if ok {
                    leads |= 1 << (lead - FIRST_LEAD);
                }
            }
        }
        // A state that takes no character from 0xC2 takes none, as far as
        // a step says (the fast path asks that byte first).
        if !alive(dfa.next(state, FIRST_LEAD)) {
            leads = 0;
        }
        let utf8 = leads == ALL_LEADS;
        Some(TextStep {
            ascii,
            utf8,
            leads,
            to,
        })
    }

    /// Generous limits for tests.
    pub(crate) fn limits() -> DfaLimits {
        DfaLimits {
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 32 << 20,
            max_dfa_states: 50_000,
            minimize: true,
        }
    }

    fn full_match(dfa: &ByteDfa, s: &str) -> bool {
        dfa.walk(dfa.start(), s.as_bytes())
            .is_ok_and(|st| dfa.is_accepting(st))
    }

    /// Asks `0`'s automaton byte by byte: no byte classes.
    struct ByteByByte<'a>(&'a ByteDfa);

    impl Automaton for ByteByByte<'_> {
        fn start(&self) -> u32 {
            self.0.start()
        }
        fn next(&self, state: u32, byte: u8) -> u32 {
            self.0.next(state, byte)
        }
        fn is_accepting(&self, state: u32) -> bool {
            self.0.is_accepting(state)
        }
    }

    /// The text step of every state of eager and lazy automata (string
    /// bodies, counted runs, classes that split the UTF-8 ranges, many
    /// classes of multi-byte characters) is the reference's.
    #[test]
    fn text_steps_are_the_reference_steps() {
        let patterns = [
            r#""([^"\\\x00-\x1f]|\\["\\/bfnrt])*""#,
            "x[^é]*y",
            "[a-zé-ü]{2,5}!",
            r"(?:[\x{80}-\x{7FF}]|[\x{800}-\x{FFFF}&&[^\x{E000}-\x{E0FF}]]|a)*!",
            r"(?:[α-ω]|[а-я]|[一-龥]|[😀-🙏]|[\x{10000}-\x{10FFFF}]|\w)*!",
            ".{0,3}x",
            r#""[^"\\]{0,40}""#,
            r"(?:\S+\s+){0,3}\S+",
            "abc|abd|b[cd]*",
            // Every character taken, through a state per range partway.
            r"(?:[\x{80}-\x{3FF}]|[\x{400}-\x{FFFF}]|[\x{10000}-\x{10FFFF}]|a)*!",
            // All but a few characters: ECMAScript's `.`, and all but the
            // last of a lead byte's characters.
            r"[^\n\r\x{2028}\x{2029}]*!",
            r"[^\x{10FFFF}\x{7FF}]*!",
        ];
        let mut steps = 0;
        let mut some_leads = 0;
        for pattern in patterns {
            let dfa = ByteDfa::build(pattern, &limits()).unwrap();
            for state in 0..dfa.num_states() as u32 {
                let step = text_step(&dfa, state);
                assert_eq!(step, text_step_reference(&dfa, state), "{pattern}, {state}");
                steps += usize::from(step.is_some_and(|s| s.utf8));
                some_leads += usize::from(step.is_some_and(|s| s.leads != 0 && !s.utf8));
            }
            let lazy = crate::lazy::LazyDfa::build(pattern, &limits()).unwrap();
            let mut seen = vec![lazy.start()];
            let mut k = 0;
            while k < seen.len() && seen.len() < 2000 {
                let state = seen[k];
                k += 1;
                assert_eq!(
                    text_step(&lazy, state),
                    text_step_reference(&lazy, state),
                    "{pattern}, lazy {state}"
                );
                for b in 0..=255u8 {
                    let t = lazy.next(state, b);
                    if t != DEAD && !seen.contains(&t) {
                        seen.push(t);
                    }
                }
            }
        }
        assert!(steps >= 3, "steps that take every character were met");
        assert!(some_leads >= 3, "steps that take some lead bytes were met");
    }

    /// A text step read once per byte class is the step read byte by byte,
    /// in every state of automata whose classes split the UTF-8 ranges.
    #[test]
    fn text_steps_by_class_are_text_steps_by_byte() {
        for pattern in [
            r#""([^"\\\x00-\x1f]|\\["\\/bfnrt])*""#,
            "x[^é]*y",
            "[a-zé-ü]{2,5}!",
            r"(?:[\x{80}-\x{7FF}]|[\x{800}-\x{FFFF}&&[^\x{E000}-\x{E0FF}]]|a)*!",
            ".{0,3}x",
        ] {
            let dfa = ByteDfa::build(pattern, &limits()).unwrap();
            let mut steps = 0;
            for state in 1..dfa.num_states() as u32 {
                let by_class = text_step(&dfa, state);
                assert_eq!(
                    by_class,
                    text_step(&ByteByByte(&dfa), state),
                    "{pattern}, {state}"
                );
                steps += usize::from(by_class.is_some());
            }
            assert!(steps > 0, "{pattern} has a text step somewhere");
        }
    }

    #[test]
    fn text_steps_and_runs() {
        let dfa = ByteDfa::build(r#""([^"\\\x00-\x1f]|\\["\\/bfnrt])*""#, &limits()).unwrap();
        let body = dfa.next(dfa.start(), b'"');
        let step = dfa.text_step(body).expect("the string body loops");
        assert_eq!(step.to, body);
        assert!(step.utf8);
        let ones = |a: [u64; 2]| a[0].count_ones() + a[1].count_ones();
        assert_eq!(
            ones(step.ascii),
            128 - 32 - 2,
            "printable ASCII but quote and backslash"
        );
        assert_eq!(step.ascii[0] & (1 << b'"' | 1 << b'\n'), 0);
        assert_eq!(step.ascii[1] & (1 << (b'\\' - 64)), 0);
        // Accepting after the closing quote; only the quote at the start.
        assert_eq!(dfa.text_step(dfa.next(body, b'"')), None);
        let open = dfa.text_step(dfa.start()).unwrap();
        assert_eq!(
            (open.ascii, open.utf8, open.to),
            ([1 << b'"', 0], false, body)
        );
        let runs = TextRuns::new(100);
        assert_eq!(runs.run(&dfa, body), 100, "a loop runs as far as asked");

        // ASCII only: a non-ASCII character dies.
        let dfa = ByteDfa::build("x[a-z]*y", &limits()).unwrap();
        let step = dfa.text_step(dfa.next(dfa.start(), b'x')).unwrap();
        assert!(!step.utf8);
        assert_eq!(ones(step.ascii), 25, "a-z but y, which may end the output");

        // A loop that leaves on some characters (here `é`) takes no UTF-8.
        let dfa = ByteDfa::build("x[^é]*y", &limits()).unwrap();
        let step = dfa.text_step(dfa.next(dfa.start(), b'x')).unwrap();
        assert!(!step.utf8);
        // But every lead byte other than `é`'s.
        assert_eq!(step.leads, ALL_LEADS & !(1 << (0xC3 - FIRST_LEAD)));
        assert!(step.takes_lead(0xC2) && !step.takes_lead(0xC3) && !step.takes_lead(0x80));
        let below = |ascii: &[u8], non_ascii: bool, utf8: bool| tokensieve_core::trie::Below {
            ascii: ascii.iter().fold([0; 2], |mut s, &b| {
                s[b as usize / 64] |= 1 << (b % 64);
                s
            }),
            leads: if non_ascii {
                1 << (0xC3 - FIRST_LEAD)
            } else {
                0
            },
            non_ascii,
            utf8,
            height: 3,
        };
        assert!(step.covers(&below(b"abc", false, true)));
        assert!(!step.covers(&below(b"aby", false, true)));
        assert!(!step.covers(&below(b"a", true, true)));
        // Below a node with `中` (lead E4) and no `é`: taken.
        let cjk = tokensieve_core::trie::Below {
            leads: 1 << (0xE4 - FIRST_LEAD),
            ..below(b"a", true, true)
        };
        assert!(step.covers(&cjk));
        assert!(!step.covers(&tokensieve_core::trie::Below { utf8: false, ..cjk }));

        // A counted run: each character moves one state on, and the run
        // counts how many are left before the closing quote is owed.
        let dfa = ByteDfa::build(r#""[^"\\]{0,5}""#, &limits()).unwrap();
        let runs = TextRuns::new(100);
        let mut state = dfa.next(dfa.start(), b'"');
        for left in (1..=5).rev() {
            assert_eq!(runs.run(&dfa, state), left);
            let step = runs.step(&dfa, state).unwrap();
            assert!(step.utf8 && step.to != state);
            state = step.to;
        }
        assert_eq!(runs.run(&dfa, state), 0, "only the quote is left");
        let deep = tokensieve_core::trie::Below {
            height: 6,
            ..below(b"ab", true, true)
        };
        let start = dfa.next(dfa.start(), b'"');
        assert!(!runs.takes_subtree(&dfa, start, &deep));
        assert!(runs.takes_subtree(
            &dfa,
            start,
            &tokensieve_core::trie::Below { height: 5, ..deep }
        ));

        // Counted no further than asked: a lazy chain of 300 counts makes
        // the states of the first few only, and the cut run is not kept
        // as the whole one.
        let lazy = crate::lazy::LazyDfa::build(r#""[^"\\]{0,300}""#, &limits()).unwrap();
        let runs = TextRuns::new(128);
        let start = lazy.next(lazy.start(), b'"');
        let before = lazy.num_states();
        assert_eq!(runs.run_within(&lazy, start, 4), 4);
        let within = lazy.num_states() - before;
        assert_eq!(runs.run(&lazy, start), 128, "the whole run, to the cap");
        let whole = lazy.num_states() - before;
        assert!(
            whole > 128 && within * 16 < whole,
            "{within} states within 4, {whole} in all"
        );
        // A run that ends before the limit is the run, kept.
        let near_end = (0..297).fold(start, |s, _| runs.step(&lazy, s).unwrap().to);
        assert_eq!(runs.run_within(&lazy, near_end, 10), 3);
        assert_eq!(runs.runs.get(near_end), Some(&3));
        assert_eq!(
            runs.run_within(&lazy, near_end, 2),
            3,
            "the kept run, past a lower limit"
        );
    }

    #[test]
    fn whole_output_semantics() {
        let dfa = ByteDfa::build("a|ab", &limits()).unwrap();
        assert!(full_match(&dfa, "a"));
        assert!(full_match(&dfa, "ab"));
        assert!(!full_match(&dfa, "abb"));
        // No dead ends: after "ab" nothing more can come.
        let s = dfa.walk(dfa.start(), b"ab").unwrap();
        assert!(dfa.live_bytes(s).is_empty());
        assert_eq!(dfa.walk(dfa.start(), b"b"), Err(0));
    }

    #[test]
    fn minimization_merges_equivalent_states() {
        let plain = ByteDfa::build(
            "(abc|abd)x*",
            &DfaLimits {
                minimize: false,
                ..limits()
            },
        )
        .unwrap();
        let min = ByteDfa::build("(abc|abd)x*", &limits()).unwrap();
        assert!(min.num_states() <= plain.num_states());
        // dead, start, a, ab, (abc|abd)x*
        assert_eq!(min.num_states(), 5);
        for s in ["abc", "abdxx", "ab", "abe", ""] {
            assert_eq!(full_match(&plain, s), full_match(&min, s), "{s}");
        }
    }

    /// The product accepts exactly what both regexes accept, and keeps
    /// alive only what both can still complete.
    #[test]
    fn intersections_accept_what_every_regex_accepts() {
        let accepts = |dfa: &ByteDfa, text: &str| {
            dfa.walk(dfa.start(), text.as_bytes())
                .is_ok_and(|s| dfa.is_accepting(s))
        };
        let dfa = ByteDfa::intersection(&["[a-z]*x[a-z]*", "[a-z]{2,3}"], &limits()).unwrap();
        for (text, ok) in [
            ("ax", true),
            ("xab", true),
            ("axx", true),
            ("x", false),
            ("ab", false),
            ("abcx", false),
            ("", false),
        ] {
            assert_eq!(accepts(&dfa, text), ok, "{text:?}");
        }
        // `ab` is no match, but `abx` is: alive. `abc` can no longer get an
        // `x` within three letters: dead.
        assert!(dfa.walk(dfa.start(), b"ab").is_ok());
        assert!(dfa.walk(dfa.start(), b"abc").is_err());
        // Multi-byte characters and three regexes.
        let dfa = ByteDfa::intersection(&["\\PC*é\\PC*", ".{1,2}", "[^z]*"], &limits()).unwrap();
        assert!(accepts(&dfa, "é") && accepts(&dfa, "aé") && accepts(&dfa, "éé"));
        assert!(!accepts(&dfa, "aaé") && !accepts(&dfa, "zé") && !accepts(&dfa, "a"));
        assert!(matches!(
            ByteDfa::intersection(&["a+", "b+"], &limits()),
            Err(GrammarError::InvalidSpec(_))
        ));
    }

    #[test]
    fn forced_bytes_and_utf8_boundaries() {
        let dfa = ByteDfa::build("é[a-z]", &limits()).unwrap();
        let s0 = dfa.start();
        assert_eq!(dfa.forced_byte(s0), Some(0xC3));
        let s1 = dfa.next(s0, 0xC3);
        assert!(!dfa.at_char_boundary(s1));
        assert_eq!(dfa.forced_byte(s1), Some(0xA9));
        let s2 = dfa.next(s1, 0xA9);
        assert!(dfa.at_char_boundary(s2));
        assert_eq!(dfa.forced_byte(s2), None);
    }

    #[test]
    fn empty_language_is_an_error() {
        let e = ByteDfa::build(r"(?-u:a\bb)", &limits()).unwrap_err();
        assert!(e.to_string().contains("matches no string"), "{e}");
    }
}
