//! Lexemes: the regular parts of a grammar as byte DFAs, and what each DFA
//! state does to the vocabulary.
//!
//! For a lexeme state `s`, one walk of the token trie (pruned at the first
//! byte the DFA refuses) splits the tokens it can start into:
//!
//! - **inside**: tokens whose every byte stays in the lexeme. They are
//!   allowed whatever the parser stack is (an Earley item sits in the
//!   lexeme at `s`, and every grammar rule can finish), so they are a
//!   precomputed row;
//! - **exits**: trie nodes where the lexeme may end (an accepting state) and
//!   the token goes on. Only those tokens depend on the stack; the matcher
//!   walks their subtrees through the parser.
//!
//! A lexeme's DFA is eager ([`ByteDfa`]: minimized, its size known when
//! compiled) or lazy ([`LazyDfa`]: the grammar rules of a GBNF grammar,
//! whose states are made as walks reach them, so a compile costs their NFAs
//! only).
//!
//! Both are computed the first time a mask needs the state and kept for
//! every later grammar with the same lexeme on the same vocabulary (a
//! process-wide cache keyed by regex and vocabulary fingerprint): the JSON
//! string body is walked once per process, not once per schema
//! ([`crate::EarleyConfig::shared_lexemes`] turns this off for a cold
//! benchmark).

use hashbrown::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex_syntax::hir::Hir;

use tokensieve_core::GrammarError;
use tokensieve_grammar::counted::LazyCounted;
use tokensieve_grammar::dfa::{ALL_LEADS, DEAD, utf8_live_leads};
use tokensieve_grammar::grow::Grow;
use tokensieve_grammar::keys::OtherKeys;
use tokensieve_grammar::lazy::{self, Chain, LazyDfa, Part};
use tokensieve_grammar::pieces::Verbatim;
use tokensieve_grammar::product::LazyProduct;
use tokensieve_grammar::trie::Utf8At;
use tokensieve_grammar::{Automaton, ByteDfa, DfaLimits, TextRuns, TextStep, TokenTrie};

/// A lexeme's automaton: built whole, or as it is walked (one regex's, or
/// the intersection of several).
// One per lexeme, inside its `Arc`: boxing the big variant would add a
// pointer chase to every DFA step.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum LexDfa {
    Eager(ByteDfa),
    Lazy(LazyDfa),
    /// An intersection of regexes (see [`LazyProduct`]).
    Product(LazyProduct),
    /// A long counted repetition and what follows it (see
    /// [`LazyCounted`]), made by the piece split.
    Counted(Arc<LazyCounted>),
    /// A deferred lazy DFA that could not be made (see [`Lexeme::dfa`]):
    /// no byte goes in, and [`LexDfa::exhausted`] names why.
    Failed(GrammarError),
}

/// Every byte in one class, for [`LexDfa::Failed`].
static ONE_CLASS: [u8; 256] = [0; 256];
/// The one transition of a [`LexDfa::Failed`] state.
static DEAD_ROW: [u32; 1] = [DEAD];

impl LexDfa {
    #[inline]
    pub(crate) fn start(&self) -> u32 {
        match self {
            LexDfa::Eager(d) => d.start(),
            LexDfa::Lazy(d) => d.start(),
            LexDfa::Product(d) => d.start(),
            LexDfa::Counted(d) => d.start(),
            LexDfa::Failed(_) => LazyDfa::START,
        }
    }

    // Always inlined: a walk's inner loop (see `walk_below`) asks it of
    // every child, and a call there costs more than the lookup.
    #[inline(always)]
    pub(crate) fn next(&self, state: u32, byte: u8) -> u32 {
        match self {
            LexDfa::Eager(d) => d.next(state, byte),
            LexDfa::Lazy(d) => d.next(state, byte),
            LexDfa::Product(d) => d.next(state, byte),
            LexDfa::Counted(d) => d.next(state, byte),
            LexDfa::Failed(_) => DEAD,
        }
    }

    /// The transitions of `state` by byte class where the automaton keeps
    /// them as a row; `None` where it would make the row for the asking
    /// (a counted repetition's: a state per class) or has none: ask
    /// [`LexDfa::next`] byte by byte.
    #[inline]
    pub(crate) fn kept_row(&self, state: u32) -> Option<&[u32]> {
        match self {
            LexDfa::Eager(d) => Some(d.row(state)),
            LexDfa::Lazy(d) => Some(d.row_of(state)),
            LexDfa::Product(d) => Some(d.row_of(state)),
            LexDfa::Counted(_) | LexDfa::Failed(_) => None,
        }
    }

    /// The transitions of `state` by byte class (see [`LexDfa::classes`]).
    #[inline]
    pub(crate) fn row(&self, state: u32) -> &[u32] {
        match self {
            LexDfa::Eager(d) => d.row(state),
            LexDfa::Lazy(d) => d.row_of(state),
            LexDfa::Product(d) => d.row_of(state),
            LexDfa::Counted(d) => d.row_of(state),
            LexDfa::Failed(_) => &DEAD_ROW,
        }
    }

    #[inline]
    pub(crate) fn classes(&self) -> &[u8; 256] {
        match self {
            LexDfa::Eager(d) => d.classes(),
            LexDfa::Lazy(d) => d.classes(),
            LexDfa::Product(d) => d.classes(),
            LexDfa::Counted(d) => d.classes(),
            LexDfa::Failed(_) => &ONE_CLASS,
        }
    }

    #[inline]
    pub(crate) fn is_accepting(&self, state: u32) -> bool {
        match self {
            LexDfa::Eager(d) => d.is_accepting(state),
            LexDfa::Lazy(d) => d.is_accepting(state),
            LexDfa::Product(d) => d.is_accepting(state),
            LexDfa::Counted(d) => d.is_accepting(state),
            LexDfa::Failed(_) => false,
        }
    }

    #[inline]
    pub(crate) fn forced_byte(&self, state: u32) -> Option<u8> {
        match self {
            LexDfa::Eager(d) => d.forced_byte(state),
            LexDfa::Lazy(d) => d.forced_byte(state),
            LexDfa::Product(d) => d.forced_byte(state),
            LexDfa::Counted(d) => d.forced_byte(state),
            LexDfa::Failed(_) => None,
        }
    }

    #[inline]
    pub(crate) fn at_char_boundary(&self, state: u32) -> bool {
        match self {
            LexDfa::Eager(d) => d.at_char_boundary(state),
            LexDfa::Lazy(d) => d.at_char_boundary(state),
            LexDfa::Product(d) => d.at_char_boundary(state),
            LexDfa::Counted(d) => d.at_char_boundary(state),
            LexDfa::Failed(_) => true,
        }
    }

    /// States: all of an eager DFA's, those made so far of a lazy one.
    pub(crate) fn num_states(&self) -> usize {
        match self {
            LexDfa::Eager(d) => d.num_states(),
            LexDfa::Lazy(d) => d.num_states(),
            LexDfa::Product(d) => d.num_states(),
            LexDfa::Counted(d) => d.num_states(),
            LexDfa::Failed(_) => 0,
        }
    }

    /// What compiling made, in DFA states: an eager DFA's states; for a
    /// lazy one, a quarter of its NFA states (what its compile cost; an
    /// NFA state is about a quarter of a DFA state's weight, as
    /// `Lowering::fits_lazily_in` reads a tree's measure).
    pub(crate) fn compiled_states(&self) -> usize {
        match self {
            LexDfa::Eager(d) => d.num_states(),
            LexDfa::Lazy(d) => d.nfa_states().div_ceil(4),
            LexDfa::Product(d) => d.nfa_states().div_ceil(4),
            LexDfa::Counted(d) => d.nfa_states().div_ceil(4),
            LexDfa::Failed(_) => 0,
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        match self {
            LexDfa::Eager(d) => d.memory_bytes(),
            LexDfa::Lazy(d) => d.memory_bytes(),
            LexDfa::Product(d) => d.memory_bytes(),
            LexDfa::Counted(d) => d.memory_bytes(),
            LexDfa::Failed(_) => 0,
        }
    }

    /// The limit a lazy DFA ran into (a transition it made dead), if any.
    /// The run of one class of bytes `state` is partway through, where the
    /// automaton can tell (see [`LazyDfa::chain`]).
    #[inline]
    pub(crate) fn chain(&self, state: u32) -> Option<Chain> {
        match self {
            LexDfa::Lazy(d) => d.chain(state),
            _ => None,
        }
    }

    pub(crate) fn exhausted(&self) -> Option<GrammarError> {
        match self {
            LexDfa::Lazy(d) if d.exhausted() => Some(d.exhausted_error()),
            LexDfa::Product(d) if d.exhausted() => Some(d.exhausted_error()),
            LexDfa::Counted(d) if d.exhausted() => Some(d.exhausted_error()),
            LexDfa::Failed(e) => Some(e.clone()),
            _ => None,
        }
    }
}

impl Automaton for LexDfa {
    #[inline]
    fn start(&self) -> u32 {
        LexDfa::start(self)
    }
    #[inline]
    fn next(&self, state: u32, byte: u8) -> u32 {
        LexDfa::next(self, state, byte)
    }
    #[inline]
    fn is_accepting(&self, state: u32) -> bool {
        LexDfa::is_accepting(self, state)
    }
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(self.classes())
    }
    #[inline]
    fn row_by_class(&self, state: u32) -> Option<&[u32]> {
        Some(self.row(state))
    }
    #[inline]
    fn known_text_step(&self, state: u32) -> Option<Option<TextStep>> {
        match self {
            LexDfa::Counted(d) => d.known_text_step(state),
            LexDfa::Product(d) => Automaton::known_text_step(d, state),
            _ => None,
        }
    }
}

/// Tokens as a set: sorted ids when few, a bitmask row when many.
#[derive(Debug)]
pub(crate) enum TokenSet {
    Sparse(Vec<u32>),
    Dense(Vec<u32>),
}

impl TokenSet {
    /// The set of a row: kept as the row when it holds many tokens, as
    /// sorted ids when few. One pass, which stops where the ids become too
    /// many to keep, and skips empty stretches of the row a block of words
    /// at a time (a row of few tokens is mostly zeros).
    pub(crate) fn from_row(mut row: Vec<u32>) -> TokenSet {
        TokenSet::from_scratch(&mut row)
    }

    /// [`TokenSet::from_row`] of a row to be used again: the set takes
    /// the row (leaving it empty) when it is kept as the row, and leaves
    /// it all zeros otherwise (the words of its ids cleared, for a caller
    /// that keeps one row from set to set).
    pub(crate) fn from_scratch(row: &mut Vec<u32>) -> TokenSet {
        const BLOCK: usize = 16;
        let mut ids = Vec::new();
        for (b, block) in row.chunks(BLOCK).enumerate() {
            // Most blocks of a row of few tokens are zero: one OR over the
            // block (a cache line, in vector registers) tells before its
            // words are looked at one by one.
            if block.iter().fold(0, |any, &w| any | w) == 0 {
                continue;
            }
            // The block's nonzero words, a bit each: a block of few
            // tokens is read word by word only where they are.
            let mut words = block
                .iter()
                .enumerate()
                .fold(0u32, |set, (i, &w)| set | u32::from(w != 0) << i);
            while words != 0 {
                let i = words.trailing_zeros() as usize;
                words &= words - 1;
                let mut bits = block[i];
                while bits != 0 {
                    ids.push(((b * BLOCK + i) * 32) as u32 + bits.trailing_zeros());
                    bits &= bits - 1;
                }
            }
            if TokenSet::dense_for(ids.len(), row.len()) {
                return TokenSet::Dense(std::mem::take(row));
            }
        }
        for &id in &ids {
            row[id as usize / 32] = 0;
        }
        TokenSet::Sparse(ids)
    }

    /// Whether `count` tokens of a row of `words` words are kept as the
    /// row: once their ids (a word each) would take an eighth of its
    /// memory.
    pub(crate) fn dense_for(count: usize, words: usize) -> bool {
        count * 32 >= words * 4
    }

    /// Adds these tokens to `row`.
    pub(crate) fn or_into(&self, row: &mut [u32]) {
        match self {
            TokenSet::Sparse(ids) => {
                // A row shorter than the vocabulary's takes the ids it has.
                for &id in ids {
                    if let Some(w) = row.get_mut(id as usize / 32) {
                        *w |= 1 << (id % 32);
                    }
                }
            }
            TokenSet::Dense(bits) => {
                for (w, b) in row.iter_mut().zip(bits) {
                    *w |= b;
                }
            }
        }
    }

    /// Makes `row` these tokens (a copy of a dense row, not a clear and an
    /// OR: one pass over the row instead of two).
    pub(crate) fn write_into(&self, row: &mut [u32]) {
        match self {
            TokenSet::Dense(bits) if bits.len() == row.len() => row.copy_from_slice(bits),
            _ => {
                row.fill(0);
                self.or_into(row);
            }
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        match self {
            TokenSet::Sparse(v) | TokenSet::Dense(v) => v.len() * 4,
        }
    }
}

/// What a lexeme state does to the vocabulary.
#[derive(Debug)]
pub(crate) struct StateIndex {
    /// Tokens that stay inside the lexeme.
    pub inside: TokenSet,
    /// `(trie node, its depth)`: the lexeme may end after the node's bytes
    /// and the tokens below the node go on past it.
    pub exits: Vec<(u32, u32)>,
    /// Trie nodes below the exits, summed: what walking them all costs at
    /// most.
    pub exit_span: usize,
}

/// A state with at least this many live bytes is walked by a forward scan
/// of the trie, not child list by child list (see [`Lexeme::build_state`]).
const WIDE: u32 = 64;

/// A node with more children than this is walked from a state of few
/// bytes by looking up the children of the state's bytes, where the
/// bytes are at most this share (1/8) of the children
/// ([`Lexeme::walk_below`]). Below [`WIDE`]: room for every byte.
const FEW: usize = WIDE as usize;
const FEW_SHARE: usize = 8;

/// A state whose walk is made from the loop it leads into
/// ([`Lexeme::deviation`]) differs from the loop on at most this share
/// (1/8) of the root's children, and on at most [`DEVIATION_NODES`] nodes
/// in all; beyond, it walks the loop's escapes itself.
const DEVIATION_SHARE: usize = 8;
const DEVIATION_NODES: usize = 4096;

/// Most pairs of states [`Lexeme::same_walks`] compares.
const ALIKE_PAIRS: usize = 8;

/// The most states a free zone gathers ([`Lexeme::free_zone`]). A search
/// for a long alternation (`srn:reference-data/...:RESTRICTED|CLASSIFIED|
/// ...`, unanchored) has hundreds of partial matches, each a state of the
/// zone: with 128 its states were scanned escape by escape (14,000-15,000
/// of them, 1.3-2.3 ms a state). A gathering that fails marks what it met,
/// so a lexeme pays for it about once per this many states.
const ZONE_STATES: usize = 1024;

/// A loop state is walked through its free zone, if it has a wider one,
/// only where its own skeleton has at least this many escapes: gathering
/// a zone makes the states it meets (a millisecond for a count of words),
/// and a JSON string body's skeleton has about 1,500 (Llama 3).
#[cfg(not(test))]
const ZONE_ESCAPES: usize = 2048;
/// One in tests, whose vocabularies are small: every wider zone walked.
#[cfg(test)]
const ZONE_ESCAPES: usize = 1;

/// Nor does a skeleton of fewer escapes keep a wider zone from being
/// walked if the subtrees below them hold at least this share of the trie
/// (1/4): a loop of digits beside a search's `.*` after its match has
/// every other child of the root as an escape, a full-trie scan (3.3 ms in
/// Github_hard o44202), and its zone is two states. Such a zone is
/// gathered only as far as [`SMALL_ZONE_STATES`]: a word count's loops
/// have escapes as wide and no zone, and gathering 1,024 of its states
/// for nothing cost its masks a fifth more.
const ZONE_SPAN_SHARE: usize = 4;
const SMALL_ZONE_STATES: usize = 16;

/// A chain with fewer characters left than this is walked through the
/// skeleton of exactly that many ([`Lexeme::chain_skeleton`]); a longer
/// one through that of its run rounded down to a power of two (a skeleton
/// per power: few, whatever the bounds). Near a chain's end most tokens
/// are longer than what is left: with a shorter budget, each of them
/// would be scanned from the budget down to the run's end (the last
/// characters of a string of fixed length: milliseconds per token).
const EXACT_BUDGETS: u32 = 16;

/// The budget of the skeleton of a chain whose run is `run` characters, on
/// a trie `full` bytes deep (see [`Lexeme::chain_skeleton`]).
fn chain_budget(run: u32, full: u32) -> u32 {
    if run >= full {
        full
    } else if run >= EXACT_BUDGETS {
        1 << run.ilog2()
    } else {
        run
    }
}

/// Every budget below `full` that [`chain_budget`] gives (19 on Llama 3's
/// trie: 1 to 15, 16, 32 and 64), in order.
fn chain_budgets(full: u32) -> Vec<u32> {
    let mut budgets: Vec<u32> = (1..full).map(|run| chain_budget(run, full)).collect();
    budgets.dedup();
    budgets
}

/// What a loop's walk finds below the escapes of its skeleton that are not
/// the root's children (see [`Lexeme::scan_escapes`]): each such escape's
/// parent is in the loop, so what its subtree keeps is the same for every
/// walk that enters the loop at a root child, whatever state it started
/// from. An unanchored pattern's search in a string has a new state at
/// each step of a partial match, and every one leads back into the loop:
/// each would scan every escape of the vocabulary again (every `a`-`f`
/// of every token, for a pattern of hex digits).
#[derive(Debug)]
struct LoopWalk {
    kept: Runs,
    refused: Runs,
    /// In preorder.
    exits: Vec<(u32, u32)>,
}

/// What a walk from one lexeme state has found so far.
struct Walk {
    /// The tokens found, as a row of `words` words, once there are many
    /// (empty before): most states keep few tokens, and a row costs its
    /// zeroing and a pass over it to list them again.
    inside: Vec<u32>,
    /// The tokens found while they are few, unsorted (empty once `inside`
    /// is made).
    ids: Vec<u32>,
    words: usize,
    count: usize,
    exits: Vec<(u32, u32)>,
}

impl Walk {
    fn new(words: usize) -> Walk {
        Walk {
            inside: Vec::new(),
            ids: Vec::new(),
            words,
            count: 0,
            exits: Vec::new(),
        }
    }

    /// Every token of the trie but the runs in `refused` (the walk's only
    /// part: from the root).
    fn take_all_but(&mut self, trie: &TokenTrie, refused: &[&Runs]) {
        self.ids.clear();
        if self.inside.is_empty() {
            self.inside = trie.all.clone();
        } else {
            self.inside.copy_from_slice(&trie.all);
        }
        self.count = trie.tokens.len();
        for runs in refused {
            for &(a, b) in &runs.runs {
                for &t in &trie.tokens[a as usize..b as usize] {
                    self.inside[t as usize / 32] &= !(1 << (t % 32));
                }
            }
            self.count -= runs.count;
        }
    }

    /// The tokens of a walk from the root that keeps the runs `kept` and
    /// refuses the runs `refused` (between them, every token): from every
    /// token, clearing the refused ones, when those are fewer.
    fn take_from_root(&mut self, trie: &TokenTrie, kept: &[&Runs], refused: &[&Runs]) {
        let count = |runs: &[&Runs]| runs.iter().map(|r| r.count).sum::<usize>();
        if count(refused) < count(kept) {
            self.take_all_but(trie, refused);
        } else {
            for runs in kept {
                for &(a, b) in &runs.runs {
                    self.add(&trie.tokens[a as usize..b as usize]);
                }
            }
        }
    }

    #[inline]
    fn add(&mut self, tokens: &[u32]) {
        self.count += tokens.len();
        // Ids while a sparse set would keep them (`TokenSet::dense_for`).
        if self.inside.is_empty() && !TokenSet::dense_for(self.count, self.words) {
            self.ids.extend_from_slice(tokens);
            return;
        }
        if self.inside.is_empty() {
            self.inside = vec![0u32; self.words];
            for &t in &self.ids {
                self.inside[t as usize / 32] |= 1 << (t % 32);
            }
            self.ids = Vec::new();
        }
        for &t in tokens {
            self.inside[t as usize / 32] |= 1 << (t % 32);
        }
    }

    /// The index of the tokens and exits found (exits in trie order).
    fn into_index(mut self, trie: &TokenTrie) -> StateIndex {
        let mut exits = std::mem::take(&mut self.exits);
        exits.sort_unstable();
        let exit_span = exits
            .iter()
            .map(|&(n, _)| (trie.nodes[n as usize].next - n) as usize)
            .sum();
        StateIndex {
            inside: self.into_set(),
            exits,
            exit_span,
        }
    }

    /// The tokens found.
    fn into_set(self) -> TokenSet {
        if self.inside.is_empty() {
            let mut ids = self.ids;
            ids.sort_unstable();
            ids.dedup();
            TokenSet::Sparse(ids)
        } else {
            TokenSet::from_row(self.inside)
        }
    }
}

/// The scratch of [`Lexeme::walk_below`], kept by its caller from one
/// walk to the next.
#[derive(Debug, Default)]
pub(crate) struct BelowRoom {
    /// Nodes to walk below: the node, its state, its depth and how many
    /// bytes of the state's run ([`Chain`]) were read past the state.
    pending: Vec<(u32, u32, u32, u32)>,
    refused: Runs,
}

/// Ranges of `TokenTrie::tokens` met in preorder, adjacent ones joined.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    pub(crate) runs: Vec<(u32, u32)>,
    count: usize,
}

impl Runs {
    pub(crate) fn clear(&mut self) {
        self.runs.clear();
        self.count = 0;
    }

    /// The parts of these runs within the tokens `start..end`, added to
    /// `out`.
    fn clip_into(&self, (start, end): (u32, u32), out: &mut Runs) {
        let first = self.runs.partition_point(|&(_, b)| b <= start);
        for &(a, b) in &self.runs[first..] {
            if a >= end {
                break;
            }
            out.push(a.max(start), b.min(end));
        }
    }

    #[inline]
    fn push(&mut self, start: u32, end: u32) {
        if start == end {
            return;
        }
        self.count += (end - start) as usize;
        match self.runs.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => self.runs.push((start, end)),
        }
    }
}

/// What a walk of the trie from a loop state (a string body) finds that
/// depends on its text step alone: through the bytes the step takes, the
/// walk stays in the state, so the subtrees it takes whole and the nodes
/// where a byte leaves it are the same for every state with that step.
/// Lexemes of one grammar share it (a schema has a string body in many
/// lexemes: every string value, every key), and each walks only the
/// escapes with its own DFA.
#[derive(Debug, Default)]
pub(crate) struct Skeleton {
    /// Tokens kept whatever the state: subtrees taken whole, and the
    /// tokens of the nodes passed in the loop.
    kept: Runs,
    /// Tokens that break UTF-8 partway through a character.
    refused: Runs,
    /// Nodes reached in the loop whose byte the step does not take (a
    /// quote, a backslash, a control byte; a non-ASCII one when the step
    /// does not take every character), in preorder: the walk goes on below
    /// each with the state's own transition. And, in a skeleton with a
    /// budget, the nodes that would start a character past it.
    escapes: Vec<u32>,
    /// Trie nodes below the escapes, summed: what scanning them all costs.
    escape_nodes: usize,
    /// The characters on the path above each escape: a walk down a chain
    /// of states (a string of bounded length) goes on below the escape
    /// from the chain's state after that many characters.
    escape_chars: Vec<u32>,
    /// The most characters above an escape.
    deepest: u32,
    /// In a skeleton with a budget, the nodes that would start a character
    /// past it, by byte (not among the escapes): every one of them is
    /// `budget` characters down, so one byte's nodes all go where the
    /// chain's state after the budget sends that byte. A chain near its
    /// end (the last characters of a string of fixed length) has tens of
    /// thousands of them and takes few bytes there (the closing quote): a
    /// byte it refuses refuses its nodes' tokens at once.
    frontier: Vec<Frontier>,
    /// The characters of the budget (see [`Skeleton::new`]).
    budget: u32,
}

/// The nodes of a [`Skeleton`]'s frontier with one byte, and their tokens.
#[derive(Debug)]
struct Frontier {
    byte: u8,
    nodes: Vec<u32>,
    tokens: Runs,
}

impl Skeleton {
    /// The walk in the loop of `step`. Through a multi-byte character the
    /// walk's state is the loop's own partway through it when the step
    /// takes the character's lead byte ([`TextStep::leads`]: every
    /// well-formed character from it returns to the loop): only the UTF-8
    /// decoder matters (a byte that breaks UTF-8 is refused, as our
    /// automata, made for UTF-8 text, refuse it). Otherwise a non-ASCII
    /// byte is an escape (a class that leaves out a few characters, as
    /// `\S` does, has escapes at their lead bytes only).
    ///
    /// The walk takes at most `budget` characters of the step (every token
    /// when it is the trie's depth): a node that would start one more is in
    /// the frontier, and a subtree is taken whole only if its deepest path stays
    /// within the budget. Such a skeleton serves every state from which
    /// the step repeats at least `budget` times ([`TextRuns::run`]): the
    /// states of a bounded string's count chain.
    fn new(trie: &TokenTrie, step: &TextStep, budget: u32) -> Skeleton {
        let mut s = Skeleton {
            budget,
            ..Skeleton::default()
        };
        let mut frontier: Vec<Vec<u32>> = Vec::new();
        // The decoder at each depth of the current path; the loop itself
        // at a character boundary. And the characters completed there.
        let mut at = vec![Utf8At::Boundary; trie.max_depth + 1];
        let mut chars = vec![0u32; trie.max_depth + 1];
        let mut i = 1;
        while i < trie.nodes.len() {
            let n = trie.nodes[i];
            let next = n.next as usize;
            let leaf = next == i + 1;
            let parent = at[n.depth as usize - 1];
            let done = chars[n.depth as usize - 1];
            if parent == Utf8At::Boundary && done == budget {
                if frontier.is_empty() {
                    frontier.resize_with(256, Vec::new);
                }
                frontier[n.byte as usize].push(i as u32);
                i = next;
                continue;
            }
            let here = if parent == Utf8At::Boundary && n.byte < 0x80 {
                let takes = step.ascii[n.byte as usize / 64] >> (n.byte % 64) & 1 == 1;
                takes.then_some(Utf8At::Boundary)
            } else if parent == Utf8At::Boundary && !step.utf8 && !step.takes_lead(n.byte) {
                None
            } else if step.leads != 0 {
                match parent.step(n.byte) {
                    Some(here) => Some(here),
                    None => {
                        s.refused.push(trie.token_start[i], trie.token_start[next]);
                        i = next;
                        continue;
                    }
                }
            } else {
                None
            };
            match here {
                None => {
                    s.escape(i as u32, done, next - i);
                    i = next;
                }
                Some(Utf8At::Boundary)
                    if !leaf
                        && step.covers(&trie.below[i])
                        && done + 1 + u32::from(trie.below[i].height) <= budget =>
                {
                    s.kept.push(trie.token_start[i], trie.token_start[next]);
                    i = next;
                }
                Some(here) => {
                    s.kept.push(trie.token_start[i], trie.token_start[i + 1]);
                    at[n.depth as usize] = here;
                    chars[n.depth as usize] = done + u32::from(here == Utf8At::Boundary);
                    i += 1;
                }
            }
        }
        for (byte, nodes) in frontier.into_iter().enumerate() {
            if nodes.is_empty() {
                continue;
            }
            let mut tokens = Runs::default();
            for &n in &nodes {
                let next = trie.nodes[n as usize].next as usize;
                tokens.push(trie.token_start[n as usize], trie.token_start[next]);
            }
            s.frontier.push(Frontier {
                byte: byte as u8,
                nodes,
                tokens,
            });
        }
        if !s.frontier.is_empty() {
            s.deepest = budget;
        }
        s
    }

    fn escape(&mut self, node: u32, chars: u32, below: usize) {
        self.escapes.push(node);
        self.escape_nodes += below;
        self.escape_chars.push(chars);
        self.deepest = self.deepest.max(chars);
    }
}

/// Skeletons by text step and budget ([`Skeleton::new`]).
#[derive(Debug, Default)]
struct SkeletonTable(Mutex<Vec<(SkeletonKey, Arc<Skeleton>)>>);

/// A skeleton's step and budget.
type SkeletonKey = (StepKey, u32);

impl SkeletonTable {
    fn get(&self, trie: &TokenTrie, step: &TextStep, budget: u32) -> Arc<Skeleton> {
        let key = ((step.ascii, step.leads), budget);
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, s)) = known.iter().find(|(k, _)| *k == key) {
            return s.clone();
        }
        let s = Arc::new(Skeleton::new(trie, step, budget));
        known.push((key, s.clone()));
        s
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The skeletons of one grammar's lexemes (a grammar has one or two steps:
/// string bodies with and without escapes; a budget for each length of
/// bounded strings walked), those of a JSON string's body being the
/// vocabulary's.
#[derive(Debug, Default)]
pub(crate) struct Skeletons {
    vocab: Option<VocabSkeleton>,
    own: SkeletonTable,
    /// The walks of other keys' bodies past their quote
    /// ([`Lexeme::past_the_quote`] from a key's [`Body::Key`]), by what
    /// follows the keys in their lexeme ([`Lexeme::after_keys`]): every
    /// object of a grammar that allows other keys has a lexeme of its
    /// own for them, and the same colon and spaces after them.
    past_keys: Mutex<HashMap<Arc<str>, Arc<StateIndex>>>,
}

/// A text step as far as a skeleton depends on it: its ASCII bytes and
/// the lead bytes of the characters it takes.
type StepKey = ([u64; 2], u64);

/// The step of a JSON string's body: every character but the quote, the
/// backslash and the control characters U+0000 to U+001F (RFC 8259).
const JSON_STRING_BODY: StepKey = ([0xFFFF_FFFB_0000_0000, 0xFFFF_FFFF_EFFF_FFFF], ALL_LEADS);

/// The skeletons of a JSON string's body on one vocabulary: what every
/// string value and key of a JSON grammar walks through. They depend on the
/// vocabulary alone, so a backend keeps them, with the token trie: the
/// free body's (a walk of the whole trie, about 0.5 ms on Llama 3's) and
/// those of bounded strings' budgets made with it, and every grammar's
/// [`Skeletons`] asks them first.
#[derive(Debug, Clone)]
pub(crate) struct VocabSkeleton(Arc<VocabWalks>);

/// What a vocabulary keeps of JSON strings for every grammar on it (see
/// [`VocabSkeleton`]).
#[derive(Debug, Default)]
struct VocabWalks {
    table: SkeletonTable,
    /// The walk from the body of a string that ends its lexeme (made on
    /// first use; `None` if the reference automaton cannot be built).
    body: OnceLock<Option<BodyWalk>>,
    /// The same for a key's body ([`Body::Key`]).
    key_body: OnceLock<Option<BodyWalk>>,
}

/// The string bodies a vocabulary keeps the walk of ([`BodyWalk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Body {
    /// A JSON string's, `STRING_CHAR*"`: any character, escapes too.
    Value,
    /// An object's other keys' (any key but the named properties), whose
    /// characters are those no key writes escaped, `[^"\\\x00-\x1F]*"`
    /// ([`OtherKeys`]): the body a value's walk cannot serve, as the
    /// value's takes a backslash where the key's dies.
    Key,
}

impl Body {
    fn regex(self) -> String {
        match self {
            Body::Value => format!(r#"{}*""#, tokensieve_grammar::json_schema::STRING_CHAR),
            Body::Key => r#"[^"\\\x00-\x1F]*""#.to_string(),
        }
    }
}

/// The walk from an unconstrained JSON string's body to the end of its
/// lexeme at the closing quote, `STRING_CHAR*"`: the same for every
/// lexeme whose automaton goes on from a state as this one's does from
/// its start (a string value at the end of its lexeme), whichever lexeme
/// and grammar it is in.
#[derive(Debug)]
struct BodyWalk {
    dfa: ByteDfa,
    index: Arc<StateIndex>,
}

/// The most states of a lexeme compared with [`BodyWalk`]'s automaton
/// (which has nine).
const BODY_STATES: usize = 32;

impl VocabSkeleton {
    pub(crate) fn json_string_body(trie: &TokenTrie) -> VocabSkeleton {
        let walks = VocabWalks::default();
        let (ascii, leads) = JSON_STRING_BODY;
        let step = TextStep {
            ascii,
            utf8: true,
            leads,
            to: 0,
        };
        // And every budget's: a bounded string near its end asks one,
        // each a walk of the whole trie (1-4 ms on Llama 3's, the most for
        // the least budgets, whose frontier holds most tokens), which made
        // the first mask of each of them in a process a slow one. About 37
        // ms for all of them, once per vocabulary, with the trie.
        let full = trie.max_depth as u32;
        walks.table.get(trie, &step, full);
        for budget in chain_budgets(full) {
            walks.table.get(trie, &step, budget);
        }
        VocabSkeleton(Arc::new(walks))
    }

    /// The [`BodyWalk`] on `trie` (the vocabulary's: every lexeme holding
    /// this has it), made now if no walk has needed it yet.
    fn body(&self, body: Body, trie: &Arc<TokenTrie>, words: usize) -> Option<&BodyWalk> {
        let slot = match body {
            Body::Value => &self.0.body,
            Body::Key => &self.0.key_body,
        };
        slot.get_or_init(|| {
            let regex = body.regex();
            let limits = DfaLimits {
                nfa_size_limit: 1 << 20,
                dfa_size_limit: 1 << 20,
                max_dfa_states: BODY_STATES,
                minimize: true,
            };
            let dfa = ByteDfa::build(&regex, &limits).ok()?;
            let lexeme = Lexeme::new(
                Making::Now(LexDfa::Eager(dfa.clone())),
                trie.clone(),
                words,
                Arc::new(Skeletons::starting_with(self)),
            );
            let index = Arc::new(lexeme.build_state(dfa.start()));
            Some(BodyWalk { dfa, index })
        })
        .as_ref()
    }
}

impl Skeletons {
    /// A grammar's skeletons, asking the vocabulary's first.
    pub(crate) fn starting_with(known: &VocabSkeleton) -> Skeletons {
        Skeletons {
            vocab: Some(known.clone()),
            ..Skeletons::default()
        }
    }

    /// The skeleton of `step` within `budget` characters (the trie's
    /// depth: no budget).
    fn get(&self, trie: &TokenTrie, step: &TextStep, budget: u32) -> Arc<Skeleton> {
        match &self.vocab {
            Some(v) if (step.ascii, step.leads) == JSON_STRING_BODY => {
                v.0.table.get(trie, step, budget)
            }
            _ => self.own.get(trie, step, budget),
        }
    }
}

/// A lexeme's DFA over one vocabulary, with its states' indexes built on
/// first use.
pub(crate) struct Lexeme {
    /// The automaton, once made (see [`Making`]).
    dfa: OnceLock<LexDfa>,
    /// What a deferred automaton is made from, until it is.
    recipe: Mutex<Option<Recipe>>,
    /// What compiling this lexeme costs in DFA states (see
    /// [`Lexeme::compiled_states`]).
    charged: usize,
    /// Whether the empty text is in the lexeme, for [`Lexeme::accepts`]
    /// at the start of one not made yet.
    nullable: bool,
    pub trie: Arc<TokenTrie>,
    words: usize,
    /// The string-body walks of the grammar this lexeme was made for.
    skeletons: Arc<Skeletons>,
    /// The index of each state walked (shared where the walk is the
    /// vocabulary's: [`Lexeme::body_walk`]).
    states: Grow<Arc<StateIndex>>,
    first: Grow<[u64; 4]>,
    /// The bytes of each byte class of the automaton, as 256-bit sets.
    class_bytes: OnceLock<Vec<[u64; 4]>>,
    runs: TextRuns,
    /// The free zone of each state asked about and of the states it
    /// gathered ([`Lexeme::free_zone`]).
    zones: Grow<Option<TextStep>>,
    /// The [`LoopWalk`] of each loop state walked through a skeleton.
    loops: Mutex<HashMap<u32, Arc<LoopWalk>>>,
    /// Pairs of states [`Lexeme::same_walks`] was asked about, and its
    /// answers.
    alike: Mutex<HashMap<(u32, u32), bool>>,
    /// Where the lexeme is an object's other keys between syntax trees
    /// that hold no quote ([`Recipe::after_keys`]): the trees after the
    /// keys, printed, whose language is the lexeme's past the keys'
    /// closing quote.
    after_keys: Option<Arc<str>>,
}

impl std::fmt::Debug for Lexeme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lexeme")
            .field("states", &self.made().map_or(0, LexDfa::num_states))
            .finish()
    }
}

impl Lexeme {
    fn new(
        making: Making,
        trie: Arc<TokenTrie>,
        words: usize,
        skeletons: Arc<Skeletons>,
    ) -> Lexeme {
        let runs = TextRuns::new(trie.max_depth);
        let mut after_keys = None;
        let (dfa, recipe, charged, nullable) = match making {
            Making::Now(dfa) => {
                let (charged, nullable) = (dfa.compiled_states(), dfa.is_accepting(dfa.start()));
                (OnceLock::from(dfa), None, charged, nullable)
            }
            Making::Later(recipe) => {
                after_keys = recipe.after_keys();
                let charged = recipe.weight.div_ceil(4) as usize;
                let nullable = recipe.nullable;
                (OnceLock::new(), Some(recipe), charged, nullable)
            }
        };
        Lexeme {
            dfa,
            recipe: Mutex::new(recipe),
            charged,
            nullable,
            trie,
            words,
            skeletons,
            states: Grow::default(),
            first: Grow::default(),
            class_bytes: OnceLock::new(),
            runs,
            zones: Grow::default(),
            loops: Mutex::default(),
            alike: Mutex::default(),
            after_keys,
        }
    }

    /// The automaton, made now if it was deferred and nothing has needed
    /// it yet. A deferred build that fails (its NFA past
    /// `nfa_size_limit`) leaves the lexeme empty and reports the failure
    /// as a lazy DFA reports a limit ([`LexDfa::exhausted`]): the step
    /// that needed it fails naming it, and no mask is ever wider.
    #[inline]
    pub(crate) fn dfa(&self) -> &LexDfa {
        match self.dfa.get() {
            Some(dfa) => dfa,
            None => self.make_dfa(),
        }
    }

    #[cold]
    fn make_dfa(&self) -> &LexDfa {
        self.dfa.get_or_init(|| {
            let recipe = self
                .recipe
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .expect("a lexeme not made yet has its recipe");
            let made = match &recipe.source {
                TreeSource::Tree(tree) => LazyDfa::from_hir(tree, &recipe.limits),
                TreeSource::Parts(parts, texts) => parts_dfa(parts, texts, &recipe.limits),
            };
            match made {
                Ok(dfa) => LexDfa::Lazy(dfa),
                Err(e) => {
                    lazy::note_exhaustion();
                    LexDfa::Failed(e)
                }
            }
        })
    }

    /// The automaton's start state, without making a deferred one (a
    /// lazy DFA starts at [`LazyDfa::START`]): predicting a lexeme does
    /// not make it, only walking into it does.
    #[inline]
    pub(crate) fn start(&self) -> u32 {
        match self.dfa.get() {
            Some(dfa) => dfa.start(),
            None => LazyDfa::START,
        }
    }

    /// Whether the lexeme may end in `state`; at the start of a lexeme
    /// not made yet, without making it (every set predicts the first
    /// lexemes of its rules and asks this of each).
    #[inline]
    pub(crate) fn accepts(&self, state: u32) -> bool {
        match self.dfa.get() {
            Some(dfa) => dfa.is_accepting(state),
            None if state == LazyDfa::START => self.nullable,
            None => self.make_dfa().is_accepting(state),
        }
    }

    /// What compiling this lexeme was charged against
    /// `max_total_lexeme_states`: its automaton's
    /// [`LexDfa::compiled_states`], or for a deferred one a quarter of its
    /// tree's weight (about its NFA states, as
    /// `Lowering::fits_lazily_in` reads it).
    pub(crate) fn compiled_states(&self) -> usize {
        self.charged
    }

    /// The automaton if it is made (a deferred one is not made to be
    /// looked at).
    pub(crate) fn made(&self) -> Option<&LexDfa> {
        self.dfa.get()
    }

    /// The state whose index serves `state`: itself, but for a counted
    /// repetition far from its bounds, the state at its least count that
    /// every trie walk from `state` agrees with
    /// ([`LazyCounted::shifted`]), and for an intersection under a long
    /// length, the state with that length's count so moved
    /// ([`LazyProduct::shifted`]).
    #[inline]
    pub(crate) fn index_state(&self, state: u32) -> u32 {
        // Counted and intersection lexemes are made at compile: asking
        // does not make one.
        match self.dfa.get() {
            Some(LexDfa::Counted(d)) => d.shifted(state, self.trie.max_depth as u32),
            Some(LexDfa::Product(d)) => d.shifted(state, self.trie.max_depth as u32),
            _ => state,
        }
    }

    /// The index of `state` (built now if no mask has needed it yet).
    pub(crate) fn state(&self, state: u32) -> &StateIndex {
        let state = self.index_state(state);
        self.states.get_or_init(state, || {
            self.body_walk(state)
                .unwrap_or_else(|| Arc::new(self.build_state(state)))
        })
    }

    /// The vocabulary's walk of a string's body ([`BodyWalk`]) if `state`
    /// goes on as that body does up to its closing quote: every byte
    /// string leads from both to live states alike, accepting alike (the
    /// automata are compared state by state from there, as far as
    /// [`BODY_STATES`]), and every closing quote to one state of the
    /// lexeme. Where that state ends the lexeme as the body's does (no
    /// byte goes on), the walk is the body's, shared; where the lexeme
    /// goes on after the quote (a string value in a lexeme that runs on
    /// to the next key, its separators and spaces), it is the body's with
    /// what the vocabulary's tokens do past each closing quote walked
    /// from that state: the body's exits, a few hundred trie nodes, where
    /// walking the body again read its 1,500 escapes. The [`Body`] asked
    /// is a value's where the state takes a backslash, else a key's (an
    /// object's other keys, then their colon: in MaskBench's slow masks,
    /// most of the walks through escapes left were of these). Past a
    /// key's quote, the other keys' lexemes of one grammar with the same
    /// text after the keys share one walk ([`Skeletons`]), as every
    /// object's lexeme of them otherwise made its own.
    fn body_walk(&self, state: u32) -> Option<Arc<StateIndex>> {
        let vocab = self.skeletons.vocab.as_ref()?;
        if !self.is_wide(state) || self.loop_into(state).is_none() {
            return None;
        }
        let dfa = self.dfa();
        // A value's body takes a backslash (an escape), a key's does not:
        // the one whose walk may serve is asked.
        let kind = if dfa.row(state)[dfa.classes()[b'\\' as usize] as usize] != DEAD {
            Body::Value
        } else {
            Body::Key
        };
        let body = vocab.body(kind, &self.trie, self.words)?;
        let after = self.after_the_body(state, body, kind == Body::Key)?;
        if dfa.is_accepting(after) && dfa.row(after).iter().all(|&t| t == DEAD) {
            return Some(body.index.clone());
        }
        // Past a key's quote, the language is the text after the keys (the
        // lexeme is the keys then that text, and the loop is the keys'
        // own): one walk serves every such lexeme of the grammar.
        let shared = match (kind, &self.after_keys) {
            (Body::Key, Some(text)) => Some(text),
            _ => None,
        };
        let Some(text) = shared else {
            return Some(Arc::new(self.past_the_quote(&body.index, after)));
        };
        let known = self
            .skeletons
            .past_keys
            .lock()
            .expect("key walks")
            .get(text)
            .cloned();
        if let Some(known) = known {
            return Some(known);
        }
        // Made without the lock held: two lexemes may both make it, and
        // the first is kept.
        let made = Arc::new(self.past_the_quote(&body.index, after));
        let mut walks = self.skeletons.past_keys.lock().expect("key walks");
        Some(walks.entry(text.clone()).or_insert(made).clone())
    }

    /// The state `state` reaches at `body`'s closing quote, where it goes
    /// on as `body` does up to it (see [`Lexeme::body_walk`]). With
    /// `one_each`, each of the body's states goes with one state of the
    /// lexeme only: a key's loop does (after the names, one state per
    /// state of the body), and a search inside a string, whose states a
    /// body's would all meet, is told apart at its second state, not
    /// after [`BODY_STATES`] of them (a key body's walk asked of every
    /// wide loop without a backslash cost more than it saved).
    fn after_the_body(&self, state: u32, body: &BodyWalk, one_each: bool) -> Option<u32> {
        let dfa = self.dfa();
        let classes = dfa.classes();
        // Each state of the lexeme met, with the body's state it goes on
        // as (the body's automaton is minimal: one each), up to the
        // closing quote (the body's one accepting state, where it ends).
        let mut pairs = vec![(state, body.dfa.start())];
        let mut after_quote = None;
        let mut k = 0;
        while let Some(&(x, y)) = pairs.get(k) {
            k += 1;
            if dfa.is_accepting(x) || body.dfa.is_accepting(y) {
                return None;
            }
            let row = dfa.row(x);
            // Most bytes go where the byte before them went.
            let mut last = (DEAD, DEAD);
            for b in 0..=255u8 {
                let next = (row[classes[b as usize] as usize], body.dfa.next(y, b));
                if next == last {
                    continue;
                }
                last = next;
                match next {
                    (DEAD, DEAD) => {}
                    (DEAD, _) | (_, DEAD) => return None,
                    (x, y) if body.dfa.is_accepting(y) => match after_quote {
                        Some(a) if a != x => return None,
                        _ => after_quote = Some(x),
                    },
                    (x, y) => match pairs.iter().find(|p| p.0 == x) {
                        Some(p) if p.1 != y => return None,
                        Some(_) => {}
                        None if pairs.len() >= BODY_STATES => return None,
                        None if one_each && pairs.iter().any(|p| p.1 == y) => return None,
                        None => pairs.push((x, y)),
                    },
                }
            }
        }
        let after = after_quote?;
        // A state met as the body's and as the one after the quote is
        // left to the lexeme's own walk.
        (!pairs.iter().any(|p| p.0 == after)).then_some(after)
    }

    /// The index of a state that goes on as the body indexed `body` does
    /// up to the closing quote, and from `after` past it: the body's
    /// tokens (each ends inside the body or at the quote, where `after`
    /// is live), and below each of the body's exits what a walk from
    /// `after` keeps and where it may end. An exit is one where `after`
    /// accepts, as it is the body's.
    fn past_the_quote(&self, body: &StateIndex, after: u32) -> StateIndex {
        let trie = &*self.trie;
        let mut walk = Walk::new(self.words);
        match &body.inside {
            TokenSet::Sparse(ids) => walk.add(ids),
            // A row taken whole: what is added is or-ed into it.
            TokenSet::Dense(row) => walk.inside = row.clone(),
        }
        let ends_here = self.dfa().is_accepting(after);
        let mut kept = Runs::default();
        let room = &mut BelowRoom::default();
        for &(node, depth) in &body.exits {
            if ends_here {
                walk.exits.push((node, depth));
            }
            self.walk_below(node, after, depth, (&mut kept, &mut walk.exits), room);
        }
        for &(a, b) in &kept.runs {
            walk.add(&trie.tokens[a as usize..b as usize]);
        }
        walk.into_index(trie)
    }

    /// The bytes `state` can take, as a 256-bit set.
    pub(crate) fn first_bytes(&self, state: u32) -> &[u64; 4] {
        self.first.get_or_init(state, || {
            let row = self.dfa().row(state);
            let mut set = [0u64; 4];
            // A row may have columns past the byte classes (none a byte's).
            for (bytes, &to) in self.class_bytes().iter().zip(row) {
                if to != DEAD {
                    for (w, b) in set.iter_mut().zip(bytes) {
                        *w |= b;
                    }
                }
            }
            set
        })
    }

    fn class_bytes(&self) -> &[[u64; 4]] {
        self.class_bytes.get_or_init(|| {
            let classes = self.dfa().classes();
            let count = classes.iter().max().map_or(0, |&c| c as usize + 1);
            let mut sets = vec![[0u64; 4]; count];
            for (b, &c) in classes.iter().enumerate() {
                sets[c as usize][b >> 6] |= 1 << (b & 63);
            }
            sets
        })
    }

    /// Whether the index of `state` is built.
    pub(crate) fn is_built(&self, state: u32) -> bool {
        self.states.get(self.index_state(state)).is_some()
    }

    /// One depth-first walk of the trie from `state`, skipping a subtree at
    /// the first byte the DFA refuses, and taking a subtree whole where the
    /// DFA state's text step covers everything below it for as deep as it
    /// goes ([`TextRuns`]): in a string body, free or of bounded length,
    /// only the subtrees holding a quote, a backslash or a control byte are
    /// walked.
    fn build_state(&self, state: u32) -> StateIndex {
        let trie = &*self.trie;
        // A list of ids while few, a row once many: a wide state (a string
        // body) holds most of the vocabulary, and sorting its ids would
        // cost more than the walk.
        let mut walk = Walk::new(self.words);
        // A wide loop at the root (a string body) walks through the
        // grammar's skeleton of it, and so does a chain of states (a
        // string of bounded length); another wide state scans the whole
        // trie in one pass.
        if self.is_wide(state) {
            if let Some((skeleton, into)) = self.loop_skeleton(state) {
                let limit = if skeleton.escapes.len() >= ZONE_ESCAPES {
                    ZONE_STATES
                } else if skeleton.escape_nodes * ZONE_SPAN_SHARE >= trie.nodes.len() {
                    SMALL_ZONE_STATES
                } else {
                    0
                };
                if limit > 0 && self.zone_is_wider(state, limit) {
                    // A search in a string (an unanchored `pattern`): the
                    // loop's escapes are the bytes that go on a partial
                    // match, most of the trie; the zone's are the quote's
                    // and the backslash's.
                    let zone = *self
                        .free_zone(state, limit)
                        .expect("a zone wider than the step");
                    self.scan_zone(state, &zone, &mut walk);
                } else if let Some(index) = (state != into && self.index_state(into) == into)
                    .then(|| self.deviation(state, into))
                    .flatten()
                {
                    return index;
                } else {
                    self.scan_escapes(state, into, &skeleton, &mut walk);
                }
            } else if let Some(skeleton) = self.chain_skeleton(state) {
                self.scan_chain(state, &skeleton, &mut walk);
            } else {
                // A pass from the root covers every token: where the
                // refused runs hold fewer (most of a wide state's), the row
                // starts from every token and they are cleared.
                let (mut kept, mut refused) = (Runs::default(), Runs::default());
                let at = (0, state, 0);
                let exits = &mut walk.exits;
                self.scan_subtree(at, &mut Vec::new(), &mut kept, &mut refused, exits);
                walk.take_from_root(trie, &[&kept], &[&refused]);
            }
        } else {
            let mut kept = Runs::default();
            let room = &mut BelowRoom::default();
            self.walk_below(0, state, 0, (&mut kept, &mut walk.exits), room);
            for &(a, b) in &kept.runs {
                walk.add(&trie.tokens[a as usize..b as usize]);
            }
        }
        walk.into_index(trie)
    }

    /// The free zone of `state`: the characters (ASCII bytes and the lead
    /// bytes of multi-byte ones) that keep every string of them, read from
    /// `state`, in live states where the lexeme does not end. A text step
    /// says that of the characters that lead to one state; a zone allows
    /// many (in `.*[0-9a-f]{64}.*` a hex digit goes on a partial match,
    /// another character starts it again, and every one of them stays in
    /// the search): a walk takes a subtree whole where the zone covers its
    /// bytes, wherever in the search they lead.
    ///
    /// Gathered by taking bytes out: from the bytes `state` takes without
    /// ending, the states they reach are gathered; where one kills or ends
    /// on a byte of the set, the bytes that first reached it leave the set
    /// (those it fails, at `state` itself; the lead bytes of characters
    /// that fail, always), and the states are gathered again, until every
    /// gathered state keeps every byte of the set. Many sets may hold; this
    /// one keeps the characters a body goes on with (an escape's backslash
    /// leaves, not the letters the escape refuses). Every state gathered is
    /// given the same zone (its own may be wider; this one holds from it
    /// too). `None` where nothing is free, or past `limit` states (a
    /// string of bounded length gathers a state per character: its walks
    /// are the chain's); a state that a gathering of a smaller limit met
    /// keeps that `None` (always sound: its walks scan escapes). A zone is
    /// a [`TextStep`] whose `to` is the state it was gathered from.
    fn free_zone(&self, state: u32, limit: usize) -> Option<&TextStep> {
        if let Some(known) = self.zones.get(state) {
            return known.as_ref();
        }
        let (zone, members, met) = self.gather_zone(state, limit);
        for &m in &members {
            let _ = self.zones.slot(m).set(zone);
        }
        // A state met on the way but left out holds no zone of its own
        // (none is always sound): gathering from each of them again
        // would cost a gathering per state (a word count's).
        for m in met {
            let _ = self.zones.slot(m).set(None);
        }
        self.zones.get_or_init(state, || zone).as_ref()
    }

    /// The zone of `state`, the states it gathered, and every other state
    /// met on the way (see [`Lexeme::free_zone`]).
    fn gather_zone(&self, state: u32, limit: usize) -> (Option<TextStep>, Vec<u32>, Vec<u32>) {
        let dfa = self.dfa();
        if state == DEAD || dfa.is_accepting(state) {
            return (None, Vec::new(), Vec::new());
        }
        let classes = self.class_bytes();
        let ascii_of = |c: &[u64; 4]| [c[0], c[1]];
        // The ASCII bytes a state takes to a live state where the lexeme
        // goes on.
        let quiet = |t: u32| {
            let mut set = [0u64; 2];
            for (c, &to) in classes.iter().zip(dfa.row(t)) {
                if to != DEAD && !dfa.is_accepting(to) {
                    let bytes = ascii_of(c);
                    set = [set[0] | bytes[0], set[1] | bytes[1]];
                }
            }
            set
        };
        let mut ascii = quiet(state);
        let mut ends = Vec::new();
        let mut leads = utf8_live_leads(dfa, state, &mut ends);
        // The states gathered, each with the bytes that first reached it
        // (`None`: a multi-byte character) and how many characters from
        // `state` it is.
        let mut members: Vec<(u32, Option<[u64; 2]>, u32)> = Vec::new();
        let mut seen: hashbrown::HashSet<u32> = hashbrown::HashSet::new();
        let mut met: hashbrown::HashSet<u32> = hashbrown::HashSet::new();
        loop {
            met.extend(members.iter().map(|m| m.0));
            members.clear();
            seen.clear();
            members.push((state, Some([0, 0]), 0));
            seen.insert(state);
            let (mut kept_ascii, mut kept_leads) = (ascii, leads);
            // The depth of the nearest states that failed: deeper ones are
            // left for the next round (they may be reached only through the
            // bytes that leave now).
            let mut failed_at = u32::MAX;
            let mut i = 0;
            while i < members.len() {
                if members.len() > limit {
                    met.extend(members.iter().map(|m| m.0));
                    return (None, Vec::new(), met.into_iter().collect());
                }
                let (t, entry, depth) = members[i];
                if depth > failed_at {
                    break;
                }
                i += 1;
                // Bytes of the zone `t` kills or ends on, and whether a
                // character of the zone's leads fails from it.
                let mut failing = [0u64; 2];
                let mut leads_kept = leads;
                for (c, &to) in classes.iter().zip(dfa.row(t)) {
                    let bytes = ascii_of(c);
                    let bytes = [bytes[0] & ascii[0], bytes[1] & ascii[1]];
                    if bytes == [0, 0] {
                        continue;
                    }
                    if to == DEAD || dfa.is_accepting(to) {
                        failing = [failing[0] | bytes[0], failing[1] | bytes[1]];
                    } else if seen.insert(to) {
                        members.push((to, Some(bytes), depth + 1));
                    }
                }
                if leads != 0 {
                    ends.clear();
                    leads_kept &= utf8_live_leads(dfa, t, &mut ends);
                    for &to in &ends {
                        if seen.insert(to) {
                            members.push((to, None, depth + 1));
                        }
                    }
                }
                if failing == [0, 0] && leads_kept == leads {
                    continue;
                }
                failed_at = depth;
                kept_leads &= leads_kept;
                match entry {
                    _ if failing == [0, 0] => {}
                    Some(bytes) if depth > 0 => {
                        kept_ascii = [kept_ascii[0] & !bytes[0], kept_ascii[1] & !bytes[1]]
                    }
                    Some(_) => {
                        kept_ascii = [kept_ascii[0] & !failing[0], kept_ascii[1] & !failing[1]]
                    }
                    None => kept_leads = 0,
                }
            }
            if (kept_ascii, kept_leads) == (ascii, leads) {
                break;
            }
            (ascii, leads) = (kept_ascii, kept_leads);
        }
        let members: Vec<u32> = members.into_iter().map(|(m, ..)| m).collect();
        met.extend(members.iter().copied());
        if ascii == [0, 0] {
            return (None, Vec::new(), met.into_iter().collect());
        }
        let zone = TextStep {
            ascii,
            utf8: leads == ALL_LEADS,
            leads,
            to: state,
        };
        for m in &members {
            met.remove(m);
        }
        (Some(zone), members, met.into_iter().collect())
    }

    /// Whether the free zone of `state` takes more than its text step: a
    /// walk through the zone keeps more subtrees whole than the step's.
    fn zone_is_wider(&self, state: u32, limit: usize) -> bool {
        // A zone wider than a step that takes every multi-byte character
        // has another ASCII byte, whose state keeps every byte of the step
        // alive: in a string's body, the backslash's escape kills most
        // letters, and the quote ends the lexeme. Nothing to gather then.
        let dfa = self.dfa();
        let step = self.runs.step(dfa, state).copied();
        if let Some(step) = step
            && step.leads == ALL_LEADS
        {
            let first = self.first_bytes(state);
            let classes = self.class_bytes();
            let narrows = |b: usize| {
                let t = dfa.next(state, b as u8);
                t == DEAD
                    || dfa.is_accepting(t)
                    || classes.iter().zip(dfa.row(t)).any(|(c, &to)| {
                        (c[0] & step.ascii[0] != 0 || c[1] & step.ascii[1] != 0)
                            && (to == DEAD || dfa.is_accepting(to))
                    })
            };
            let mut others = [first[0] & !step.ascii[0], first[1] & !step.ascii[1]];
            let mut wider = false;
            for (w, word) in others.iter_mut().enumerate() {
                while *word != 0 && !wider {
                    wider = !narrows(w * 64 + word.trailing_zeros() as usize);
                    *word &= *word - 1;
                }
            }
            if !wider {
                return false;
            }
        }
        let Some(zone) = self.free_zone(state, limit).copied() else {
            return false;
        };
        match step {
            None => true,
            Some(step) => {
                let within = |a: u64, b: u64| a & !b == 0;
                within(step.ascii[0], zone.ascii[0])
                    && within(step.ascii[1], zone.ascii[1])
                    && within(step.leads, zone.leads)
                    && (step.ascii, step.leads) != (zone.ascii, zone.leads)
            }
        }
    }

    /// Whether `state` takes at least [`WIDE`] bytes: its walks scan the
    /// trie in preorder rather than child list by child list.
    pub(crate) fn is_wide(&self, state: u32) -> bool {
        self.width(state) >= WIDE
    }

    /// How many bytes `state` can take.
    fn width(&self, state: u32) -> u32 {
        self.first_bytes(state).iter().map(|w| w.count_ones()).sum()
    }

    /// The walk of the trie below `node` (at `depth`, its bytes having led
    /// the DFA to `state`): the tokens that stay inside the lexeme, as runs
    /// of `TokenTrie::tokens` (not in preorder), and the exits, nodes
    /// below `node` where the lexeme may end and the tokens go on.
    ///
    /// Depth first through each node's list of children, skipping a
    /// subtree at the first byte the DFA refuses and taking it whole where
    /// the state's text step covers everything below it: a state that
    /// kills most bytes reads one short list per live node, not every
    /// child's node (the root alone has a child for nearly every byte). A
    /// wide state scans its subtree in preorder instead, one forward pass
    /// over the nodes ([`Lexeme::scan_range`]).
    pub(crate) fn walk_below(
        &self,
        node: u32,
        state: u32,
        depth: u32,
        (kept, exits): (&mut Runs, &mut Vec<(u32, u32)>),
        room: &mut BelowRoom,
    ) {
        let trie = &*self.trie;
        let dfa = self.dfa();
        let BelowRoom { pending, refused } = room;
        pending.clear();
        pending.push((node, state, depth, 0));
        // The scans' stack (what they refuse is not asked for).
        let mut stack = Vec::new();
        // The children of a few-byte state's bytes (see below).
        let (mut few_bytes, mut few_kids) = ([0u8; FEW], [0u32; FEW]);
        while let Some((node, from, depth, run)) = pending.pop() {
            // How many bytes `from` takes, where it is not partway
            // through a run.
            let width = (run == 0).then(|| self.width(from));
            if width.is_some_and(|w| w >= WIDE) {
                let at = (node, from, depth);
                refused.clear();
                self.scan_subtree(at, &mut stack, kept, refused, exits);
                continue;
            }
            // Whitespace between JSON tokens: a state per count of bytes
            // read, each a copy of the first on every other byte. Its
            // bytes are counted here, and no state is made but the one
            // after the run.
            let chain = dfa.chain(from);
            // The state's transitions, once a byte outside its run asks
            // (a run's bytes make no state, nor does asking for none).
            let mut row: Option<Option<&[u32]>> = None;
            let classes = dfa.classes();
            let (mut bytes, mut kids) = trie.kids(node as usize);
            // A state of few bytes at a node of many children (a key's at
            // the root, which has a child for nearly every byte) looks up
            // the children of its bytes instead of reading every child.
            if let Some(count) = width.filter(|_| chain.is_none() && bytes.len() > FEW) {
                if (count as usize) * FEW_SHARE <= bytes.len() {
                    let mut n = 0;
                    for (w, &word) in self.first_bytes(from).iter().enumerate() {
                        let mut bits = word;
                        while bits != 0 {
                            let b = (w * 64) as u8 + bits.trailing_zeros() as u8;
                            bits &= bits - 1;
                            if let Ok(i) = bytes.binary_search(&b) {
                                (few_bytes[n], few_kids[n]) = (b, kids[i]);
                                n += 1;
                            }
                        }
                    }
                    (bytes, kids) = (&few_bytes[..n], &few_kids[..n]);
                }
            }
            for (&b, &kid) in bytes.iter().zip(kids) {
                let k = kid as usize;
                let next = match chain {
                    Some(c) if c.has(b) && run + 1 < c.left => {
                        let end = trie.nodes[k].next as usize;
                        let leaf = end == k + 1;
                        // `run + 1` bytes into the run: live, accepting as
                        // `from` does; its subtree whole if it is bytes of
                        // the run, no more of them than are left, and
                        // nothing in it may end the lexeme.
                        let run = run + 1;
                        let below = &trie.below[k];
                        if !leaf
                            && !dfa.is_accepting(from)
                            && below.ascii[0] & !c.bytes[0] == 0
                            && below.ascii[1] & !c.bytes[1] == 0
                            && !below.non_ascii
                            && run + u32::from(below.height) <= c.left
                        {
                            kept.push(trie.token_start[k], trie.token_start[end]);
                            continue;
                        }
                        kept.push(trie.token_start[k], trie.token_start[k + 1]);
                        if !leaf {
                            if dfa.is_accepting(from) {
                                exits.push((kid, depth + 1));
                            }
                            pending.push((kid, from, depth + 1, run));
                        }
                        continue;
                    }
                    Some(c) if c.has(b) => c.after,
                    // Another byte goes where it goes from `from`.
                    _ => match *row.get_or_insert_with(|| dfa.kept_row(from)) {
                        Some(row) => row[classes[b as usize] as usize],
                        None => dfa.next(from, b),
                    },
                };
                // Most children die here: their nodes (far apart in the
                // trie) are read only when they live.
                if next == DEAD {
                    continue;
                }
                let end = trie.nodes[k].next as usize;
                let leaf = end == k + 1;
                if !leaf && self.runs.takes_subtree(dfa, next, &trie.below[k]) {
                    kept.push(trie.token_start[k], trie.token_start[end]);
                    continue;
                }
                kept.push(trie.token_start[k], trie.token_start[k + 1]);
                if !leaf {
                    if dfa.is_accepting(next) {
                        exits.push((kid, depth + 1));
                    }
                    pending.push((kid, next, depth + 1, 0));
                }
            }
        }
    }

    /// One forward pass over the subtree of `node` (at `depth`, its bytes
    /// having led the DFA to `state`), skipping a subtree at the first byte
    /// the DFA refuses or taking it whole where the text step allows:
    /// [`Lexeme::scan_range`] with `stack` (made on first use, kept by the
    /// caller for its next pass) set up. Preorder keeps the tokens of the
    /// subtree in one range of `trie.tokens`, which the pass cuts into runs
    /// kept and runs refused.
    fn scan_subtree<'s>(
        &'s self,
        (node, state, depth): (u32, u32, u32),
        stack: &mut Vec<&'s [u32]>,
        kept: &mut Runs,
        refused: &mut Runs,
        exits: &mut Vec<(u32, u32)>,
    ) {
        let trie = &*self.trie;
        if stack.is_empty() {
            // The transitions of the state at each depth of the current path.
            stack.resize(trie.max_depth + 1, &[]);
        }
        stack[depth as usize] = self.dfa().row(state);
        let end = trie.nodes[node as usize].next as usize;
        self.scan_range(node as usize + 1, end, stack, kept, refused, exits);
    }

    /// The scan's pass over the nodes `first..end` (one subtree, or one
    /// node and its subtree), `stack` holding the transitions of the state
    /// above `first`: token runs kept and refused, and the exits.
    fn scan_range<'s>(
        &'s self,
        first: usize,
        end: usize,
        stack: &mut [&'s [u32]],
        kept: &mut Runs,
        refused: &mut Runs,
        exits: &mut Vec<(u32, u32)>,
    ) {
        let trie = &*self.trie;
        let dfa = self.dfa();
        let classes = dfa.classes();
        // The step of the state last asked about: a string body asks about
        // the same state at nearly every node.
        let mut step_of = (DEAD, None::<TextStep>);
        // Subtrees whose bytes a step covers for fewer characters than
        // they go deep (a string of bounded length): `(end, top)`, every
        // node before `end` no deeper than `top` keeps its tokens without
        // a DFA step; those one deeper read on from the state at `top`.
        let mut zones: Vec<(usize, u32)> = Vec::new();
        let mut i = first;
        while i < end {
            let n = trie.nodes[i];
            while zones.last().is_some_and(|z| i >= z.0) {
                zones.pop();
            }
            if zones.last().is_some_and(|z| n.depth <= z.1) {
                kept.push(trie.token_start[i], trie.token_start[i + 1]);
                i += 1;
                continue;
            }
            let d = n.depth as usize;
            let next = stack[d - 1][classes[n.byte as usize] as usize];
            if next == DEAD {
                refused.push(trie.token_start[i], trie.token_start[n.next as usize]);
                i = n.next as usize;
                continue;
            }
            if n.next as usize == i + 1 {
                // A leaf: its tokens live, nothing below to ask a step of.
                kept.push(trie.token_start[i], trie.token_start[i + 1]);
                i += 1;
                continue;
            }
            if step_of.0 != next {
                step_of = (next, self.runs.step(dfa, next).copied());
            }
            let below = &trie.below[i];
            if step_of.1.is_some_and(|s| s.covers(below)) {
                let height = u32::from(below.height);
                let run = self.runs.run_within(dfa, next, height);
                if run >= height {
                    kept.push(trie.token_start[i], trie.token_start[n.next as usize]);
                    i = n.next as usize;
                    continue;
                }
                if !below.non_ascii {
                    // One byte, one character: `run` bytes below the node
                    // stay on the step's chain of live, non-accepting
                    // states, whatever the bytes.
                    let mut at = next;
                    for _ in 0..run {
                        at = self.runs.step(dfa, at).expect("a run's steps").to;
                    }
                    let top = n.depth + run;
                    stack[top as usize] = dfa.row(at);
                    zones.push((n.next as usize, top));
                    kept.push(trie.token_start[i], trie.token_start[i + 1]);
                    i += 1;
                    continue;
                }
            }
            stack[d] = dfa.row(next);
            kept.push(trie.token_start[i], trie.token_start[i + 1]);
            if dfa.is_accepting(next) && n.next as usize > i + 1 {
                exits.push((i as u32, n.depth));
            }
            i += 1;
        }
    }

    /// The [`Skeleton`] that serves `state`, and the loop it walks in, if
    /// `state` is a loop a walk can share: its text step leads back to it
    /// and covers every depth (a string body), so which subtrees it takes
    /// whole and where its bytes leave it depend on the step alone. Or if
    /// `state`'s text step leads into such a loop (a string body right
    /// after its opening quote, a state of its own in a DFA that is not
    /// minimized, whose first character may be narrower): below each
    /// first byte of that step the walk is the loop's.
    fn loop_skeleton(&self, state: u32) -> Option<(Arc<Skeleton>, u32)> {
        let into = self.loop_into(state)?;
        let step = *self.runs.step(self.dfa(), into)?;
        let full = self.trie.max_depth as u32;
        Some((self.skeletons.get(&self.trie, &step, full), into))
    }

    /// The loop of [`Lexeme::loop_skeleton`], without its skeleton (a walk
    /// of the whole trie the first time a grammar asks for its step).
    fn loop_into(&self, state: u32) -> Option<u32> {
        let dfa = self.dfa();
        let into = self.runs.step(dfa, state)?.to;
        let step = *self.runs.step(dfa, into)?;
        (step.to == into && self.runs.run(dfa, into) as usize >= self.trie.max_depth)
            .then_some(into)
    }

    /// The [`Skeleton`] that serves `state` as the start of a chain: its
    /// text step repeats, each time to a state of its own (the count of a
    /// bounded string). The budget is the run below [`EXACT_BUDGETS`], the
    /// run rounded down to a power of two above it, or the trie's depth
    /// where the run covers every token: the skeletons of one step are
    /// then few, whatever the bounds (those of a JSON string's body are
    /// the vocabulary's, made once per process).
    fn chain_skeleton(&self, state: u32) -> Option<Arc<Skeleton>> {
        let dfa = self.dfa();
        let step = *self.runs.step(dfa, state)?;
        let (run, full) = (self.runs.run(dfa, state), self.trie.max_depth as u32);
        Some(
            self.skeletons
                .get(&self.trie, &step, chain_budget(run, full)),
        )
    }

    /// The walk from `state` through a chain's skeleton: every token the
    /// skeleton keeps, and the subtree of each escape scanned as
    /// [`Lexeme::scan`] would, from the chain's state after the characters
    /// above it.
    fn scan_chain(&self, state: u32, skeleton: &Skeleton, walk: &mut Walk) {
        let trie = &*self.trie;
        let dfa = self.dfa();
        // The chain's states, each the step of the one before: within the
        // run, as the skeleton's budget is.
        let mut rows: Vec<&[u32]> = Vec::with_capacity(skeleton.deepest as usize + 1);
        let mut at = state;
        rows.push(dfa.row(at));
        for _ in 0..skeleton.deepest {
            at = self.runs.step(dfa, at).expect("a step within the run").to;
            rows.push(dfa.row(at));
        }
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let mut kept = Runs::default();
        let mut refused = Runs::default();
        for (&e, &chars) in skeleton.escapes.iter().zip(&skeleton.escape_chars) {
            let e = e as usize;
            stack[trie.nodes[e].depth as usize - 1] = rows[chars as usize];
            let end = trie.nodes[e].next as usize;
            self.scan_range(e, end, &mut stack, &mut kept, &mut refused, &mut walk.exits);
        }
        // Past the budget: a byte the state there refuses refuses every
        // node of it; the others are scanned.
        let mut refused_bytes = Vec::new();
        let classes = dfa.classes();
        for f in &skeleton.frontier {
            // The state after the budget: a frontier is that far down.
            let row = rows[skeleton.budget as usize];
            if row[classes[f.byte as usize] as usize] == DEAD {
                refused_bytes.push(&f.tokens);
                continue;
            }
            for &e in &f.nodes {
                let e = e as usize;
                stack[trie.nodes[e].depth as usize - 1] = row;
                let end = trie.nodes[e].next as usize;
                self.scan_range(e, end, &mut stack, &mut kept, &mut refused, &mut walk.exits);
            }
        }
        refused_bytes.extend([&skeleton.refused, &refused]);
        walk.take_from_root(trie, &[&skeleton.kept, &kept], &refused_bytes);
    }

    /// The walk from `state` through the skeleton of its free zone `zone`
    /// ([`Lexeme::free_zone`]): every token the skeleton keeps (its bytes
    /// all the zone's: the walk stays in the zone's states), and the
    /// subtree of each escape scanned from the state the walk is in at its
    /// parent, read down the escape's path (escapes come in preorder: each
    /// path goes on from the last one's).
    fn scan_zone(&self, state: u32, zone: &TextStep, walk: &mut Walk) {
        let trie = &*self.trie;
        let dfa = self.dfa();
        let classes = dfa.classes();
        let skeleton = self.skeletons.get(trie, zone, trie.max_depth as u32);
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        // The nodes down to the last escape's parent: each with the end of
        // its subtree and the state after its byte.
        let mut path = vec![(0u32, trie.nodes.len() as u32, state)];
        let (mut kept, mut refused) = (Runs::default(), Runs::default());
        for &e in &skeleton.escapes {
            while path.last().is_some_and(|&(_, end, _)| end <= e) {
                path.pop();
            }
            while let Some(&(node, _, at)) = path.last() {
                let (_, kids) = trie.kids(node as usize);
                let child = kids[kids.partition_point(|&k| k <= e) - 1];
                if child == e {
                    break;
                }
                let n = trie.nodes[child as usize];
                let next = dfa.row(at)[classes[n.byte as usize] as usize];
                debug_assert!(next != DEAD, "a zone's byte kills no state of it");
                path.push((child, n.next, next));
            }
            let at = path.last().expect("the root stays on the path").2;
            let n = trie.nodes[e as usize];
            stack[n.depth as usize - 1] = dfa.row(at);
            let end = n.next as usize;
            self.scan_range(
                e as usize,
                end,
                &mut stack,
                &mut kept,
                &mut refused,
                &mut walk.exits,
            );
        }
        walk.take_from_root(
            trie,
            &[&skeleton.kept, &kept],
            &[&skeleton.refused, &refused],
        );
    }

    /// The walk from `state` through the skeleton of the loop `into`:
    /// every token the skeleton keeps, and the subtree of each escape
    /// scanned as [`Lexeme::scan`] would. From a state that is not the loop
    /// itself, the root's children whose byte `state`'s step takes (into the
    /// loop) are the skeleton's, and the others are scanned from `state`.
    fn scan_escapes(&self, state: u32, into: u32, skeleton: &Skeleton, walk: &mut Walk) {
        let trie = &*self.trie;
        let dfa = self.dfa();
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let (first, row) = (dfa.row(state), dfa.row(into));
        // Below the root's children, the escapes are the loop walk's.
        let looped = self.loop_walk(into, skeleton);
        let mut kept = Runs::default();
        let mut refused = Runs::default();
        if state == into {
            let roots: Vec<u32> = skeleton
                .escapes
                .iter()
                .copied()
                .filter(|&e| trie.nodes[e as usize].depth == 1)
                .collect();
            self.scan_escape_nodes(
                &roots,
                (first, row),
                &mut stack,
                &mut kept,
                &mut refused,
                walk,
            );
            for &(a, b) in &looped.kept.runs {
                kept.push(a, b);
            }
            for &(a, b) in &looped.refused.runs {
                refused.push(a, b);
            }
            walk.exits.extend_from_slice(&looped.exits);
            walk.take_from_root(
                trie,
                &[&skeleton.kept, &kept],
                &[&skeleton.refused, &refused],
            );
            return;
        }
        let step = *self.runs.step(dfa, state).expect("a step into the loop");
        let (bytes, kids) = trie.kids(0);
        for (&b, &c) in bytes.iter().zip(kids) {
            let (c, end) = (c as usize, trie.nodes[c as usize].next as usize);
            let into_loop = if b < 0x80 {
                step.ascii[b as usize / 64] >> (b % 64) & 1 == 1
            } else {
                step.takes_lead(b)
            };
            if !into_loop {
                stack[0] = first;
                self.scan_range(c, end, &mut stack, &mut kept, &mut refused, &mut walk.exits);
                continue;
            }
            let tokens = (trie.token_start[c], trie.token_start[end]);
            skeleton.kept.clip_into(tokens, &mut kept);
            skeleton.refused.clip_into(tokens, &mut refused);
            // The child itself may be an escape of the loop (a byte that
            // leads into it from `state` but not from the loop); those
            // below it are the loop walk's.
            if skeleton.escapes.binary_search(&(c as u32)).is_ok() {
                self.scan_escape_nodes(
                    &[c as u32],
                    (first, row),
                    &mut stack,
                    &mut kept,
                    &mut refused,
                    walk,
                );
            }
            looped.kept.clip_into(tokens, &mut kept);
            looped.refused.clip_into(tokens, &mut refused);
            let from = looped.exits.partition_point(|&(e, _)| (e as usize) < c);
            let to = looped.exits.partition_point(|&(e, _)| (e as usize) < end);
            walk.exits.extend_from_slice(&looped.exits[from..to]);
        }
        walk.take_from_root(trie, &[&kept], &[&refused]);
    }

    /// The index of `state`, which leads into the loop `into` (the state
    /// of a key after its first characters, where most characters go on
    /// into any other key's body), made from the loop's own index where
    /// the two walks go alike but for a few bytes. The walks are followed
    /// together, a state of each: where both reach the same state, or
    /// states that read every text alike ([`Lexeme::same_walks`]: the
    /// lazy automaton makes a state of its own for the middle of a
    /// character after each), their subtrees are one; where only this
    /// state's lives, its subtree is scanned; where only the loop's, it
    /// is cleared; where both live, the node is kept and its exit mended,
    /// and the walks go on below. An object's other keys (any string but
    /// the named properties) walked their body's escapes once per
    /// character typed of a named key (10,000 walks of ~100 µs in a pass
    /// over MaskBench); the loop's index is the vocabulary's string body's.
    /// `None` where the two differ on more than a [`DEVIATION_SHARE`] of
    /// the root's children, or on more than [`DEVIATION_NODES`] nodes.
    /// (Not for a state whose loop's index is another state's, as a
    /// counted repetition's is: that one may be `state`'s own.)
    fn deviation(&self, state: u32, into: u32) -> Option<StateIndex> {
        let trie = &*self.trie;
        let dfa = self.dfa();
        let classes = dfa.classes();
        // Only the middles of characters (no ASCII byte live, the same
        // bytes live in both) are compared: a comparison makes the states
        // it meets, and a key's next character and the body's are apart.
        // The pairs met, most of them many times (every lead byte of a
        // character), are asked of the lexeme once each.
        let mut met_pairs: Vec<((u32, u32), bool)> = Vec::new();
        let mut differ = |a: u32, b: u32| {
            if a == b {
                return false;
            }
            if a == DEAD || b == DEAD {
                return true;
            }
            let live = self.first_bytes(a);
            if live[0] | live[1] != 0 || live != self.first_bytes(b) {
                return true;
            }
            match met_pairs.iter().find(|p| p.0 == (a, b)) {
                Some(&(_, same)) => !same,
                None => {
                    let same = self.same_walks(a, b);
                    met_pairs.push(((a, b), same));
                    !same
                }
            }
        };
        let (root, looped) = (dfa.row(state), dfa.row(into));
        let (bytes, _) = trie.kids(0);
        let apart = bytes
            .iter()
            .map(|&b| classes[b as usize] as usize)
            .filter(|&c| differ(root[c], looped[c]))
            .count();
        if apart * DEVIATION_SHARE > bytes.len() {
            return None;
        }
        let index = self.state(into);
        let mut walk = Walk::new(self.words);
        walk.inside = vec![0u32; self.words];
        index.inside.write_into(&mut walk.inside);
        // Subtrees and nodes the loop's walk no longer speaks for: its
        // exits there are dropped.
        let mut replaced: Vec<(u32, u32)> = Vec::new();
        let (mut kept, mut refused) = (Runs::default(), Runs::default());
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let mut todo = vec![(0usize, state, into)];
        let mut met = 0;
        while let Some((c, at, loop_at)) = todo.pop() {
            let (row, loop_row) = (dfa.row(at), dfa.row(loop_at));
            let (bytes, kids) = trie.kids(c);
            for (&b, &k) in bytes.iter().zip(kids) {
                let class = classes[b as usize] as usize;
                let (next, loop_next) = (row[class], loop_row[class]);
                if !differ(next, loop_next) {
                    continue;
                }
                met += 1;
                if met > DEVIATION_NODES {
                    return None;
                }
                let (k, end) = (k as usize, trie.nodes[k as usize].next as usize);
                let depth = trie.nodes[k].depth;
                if next == DEAD || loop_next == DEAD {
                    for &t in trie.subtree_tokens(k) {
                        walk.inside[t as usize / 32] &= !(1 << (t % 32));
                    }
                    replaced.push((k as u32, end as u32));
                    if next != DEAD {
                        stack[depth as usize - 1] = row;
                        let exits = &mut walk.exits;
                        self.scan_range(k, end, &mut stack, &mut kept, &mut refused, exits);
                    }
                    continue;
                }
                // Both keep the node's tokens; it is an exit as this
                // state's walk accepts there.
                if end > k + 1 {
                    replaced.push((k as u32, k as u32 + 1));
                    if dfa.is_accepting(next) {
                        walk.exits.push((k as u32, depth));
                    }
                    todo.push((k, next, loop_next));
                }
            }
        }
        for &(a, b) in &kept.runs {
            for &t in &trie.tokens[a as usize..b as usize] {
                walk.inside[t as usize / 32] |= 1 << (t % 32);
            }
        }
        // The ranges are disjoint (nothing is walked inside one): each
        // exit is looked up among them, not compared with every one.
        replaced.sort_unstable();
        walk.exits
            .extend(index.exits.iter().copied().filter(|&(n, _)| {
                let after = replaced.partition_point(|&(a, _)| a <= n);
                after == 0 || replaced[after - 1].1 <= n
            }));
        Some(walk.into_index(trie))
    }

    /// Whether states `a` and `b` read every text alike (both die, both
    /// accept): every pair of states the same bytes lead them to is one
    /// state twice, or a pair whose bytes again lead alike, as far as
    /// [`ALIKE_PAIRS`] pairs (the middles of a character after two states
    /// of a body meet again within three bytes). Answers are kept.
    fn same_walks(&self, a: u32, b: u32) -> bool {
        let alike = || self.alike.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&known) = alike().get(&(a, b)) {
            return known;
        }
        let dfa = self.dfa();
        let classes = self.class_bytes().len();
        let mut pairs = vec![(a, b)];
        let mut k = 0;
        let ok = 'check: {
            while let Some(&(x, y)) = pairs.get(k) {
                k += 1;
                if x == DEAD || y == DEAD || dfa.is_accepting(x) != dfa.is_accepting(y) {
                    break 'check false;
                }
                let (rx, ry) = (dfa.row(x), dfa.row(y));
                for c in 0..classes {
                    let next = (rx[c], ry[c]);
                    if next.0 == next.1 || pairs.contains(&next) {
                        continue;
                    }
                    if pairs.len() >= ALIKE_PAIRS {
                        break 'check false;
                    }
                    pairs.push(next);
                }
            }
            true
        };
        alike().insert((a, b), ok);
        ok
    }

    /// The [`LoopWalk`] of the loop state `into` through `skeleton`, made
    /// on first use.
    fn loop_walk(&self, into: u32, skeleton: &Skeleton) -> Arc<LoopWalk> {
        if let Some(known) = self
            .loops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&into)
        {
            return known.clone();
        }
        let trie = &*self.trie;
        let row = self.dfa().row(into);
        let deep: Vec<u32> = skeleton
            .escapes
            .iter()
            .copied()
            .filter(|&e| trie.nodes[e as usize].depth > 1)
            .collect();
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let mut kept = Runs::default();
        let mut refused = Runs::default();
        let mut walk = Walk::new(self.words);
        self.scan_escape_nodes(
            &deep,
            (row, row),
            &mut stack,
            &mut kept,
            &mut refused,
            &mut walk,
        );
        let made = Arc::new(LoopWalk {
            kept,
            refused,
            exits: walk.exits,
        });
        self.loops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(into)
            .or_insert(made)
            .clone()
    }

    /// [`Lexeme::scan_range`] below each escape node of `nodes`, its parent
    /// in the state of `rows.0` at the root's children, of `rows.1` below.
    fn scan_escape_nodes<'s>(
        &'s self,
        nodes: &[u32],
        rows: (&'s [u32], &'s [u32]),
        stack: &mut [&'s [u32]],
        kept: &mut Runs,
        refused: &mut Runs,
        walk: &mut Walk,
    ) {
        let trie = &*self.trie;
        for &e in nodes {
            let e = e as usize;
            let depth = trie.nodes[e].depth as usize;
            stack[depth - 1] = if depth == 1 { rows.0 } else { rows.1 };
            let end = trie.nodes[e].next as usize;
            self.scan_range(e, end, stack, kept, refused, &mut walk.exits);
        }
    }

    /// Heap bytes of the indexes built so far, with the walks kept for
    /// later ones.
    pub(crate) fn memory_bytes(&self) -> usize {
        let loops: usize = self
            .loops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|w| (w.kept.runs.len() + w.refused.runs.len() + w.exits.len()) * 8)
            .sum();
        self.made().map_or(0, LexDfa::memory_bytes)
            + self
                .states
                .iter()
                // The vocabulary's string-body walk is the vocabulary's.
                .filter(|s| Arc::strong_count(s) == 1)
                .map(|s| s.inside.bytes() + s.exits.len() * 8)
                .sum::<usize>()
            + loops
    }
}

/// Lexemes by `(vocabulary fingerprint, regex, DFA state limit)`, shared by
/// every grammar of the process, so the indexes of common lexemes (the JSON
/// string body, whitespace, numbers) outlive the grammar that built them.
/// Past [`CACHE_ENTRIES`] lexemes, those no grammar holds are dropped.
struct LexemeCache {
    map: HashMap<(u64, String, usize), Result<Arc<Lexeme>, GrammarError>>,
    /// The size at which an insertion sweeps out the lexemes no grammar
    /// holds: twice what the last sweep left, at least [`CACHE_ENTRIES`].
    /// (A sweep reads every entry; where live grammars hold more than
    /// `CACHE_ENTRIES` lexemes, the backend's kept summaries among them, one
    /// sweep per insertion made every compile pay for all the others'.)
    sweep_at: usize,
}

const CACHE_ENTRIES: usize = 512;

static CACHE: Mutex<Option<LexemeCache>> = Mutex::new(None);

/// The process's lexeme cache, made on first use.
fn lexeme_cache(cache: &mut Option<LexemeCache>) -> &mut LexemeCache {
    cache.get_or_insert_with(|| LexemeCache {
        map: HashMap::new(),
        sweep_at: CACHE_ENTRIES,
    })
}

/// What a grammar's lexemes share of the vocabulary: its token trie, the
/// words of a mask row, and the grammar's string-body skeletons.
pub(crate) struct LexVocab {
    pub trie: Arc<TokenTrie>,
    pub words: usize,
    pub skeletons: Arc<Skeletons>,
}

/// The lexeme of `regex` on the vocabulary of `trie` (whole-match regex in
/// the regex-syntax dialect), shared with every other grammar using it.
pub(crate) fn lexeme(
    regex: &str,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    shared(
        || regex.to_string(),
        vocab,
        limits,
        share,
        || ByteDfa::build(regex, limits).map(|d| Making::Now(LexDfa::Eager(d))),
    )
}

/// How a lexeme gets its automaton.
// Made once per lexeme and moved into it at once: boxing would only add
// an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Making {
    /// Made at compile.
    Now(LexDfa),
    /// A lazy DFA made from its syntax tree the first time a walk or a
    /// step enters the lexeme ([`Lexeme::dfa`]): a big schema has hundreds
    /// of lexemes, and an output enters a few of them.
    Later(Recipe),
}

/// What a deferred lazy DFA is made from.
pub(crate) struct Recipe {
    pub source: TreeSource,
    pub limits: DfaLimits,
    /// The tree's [`Measure`](tokensieve_grammar::regular::Measure)
    /// weight (about its NFA states).
    pub weight: u64,
    /// Whether the tree matches the empty text.
    pub nullable: bool,
}

/// Where a deferred lexeme's syntax tree comes from.
pub(crate) enum TreeSource {
    /// Built already.
    Tree(Arc<Hir>),
    /// Parts one after the other, some regex text not parsed yet (a
    /// [`tokensieve_grammar::pieces::Piece::Verbatim`]'s, alone or in a
    /// run of pieces joined with one): parsed when the lexeme is made,
    /// through `texts`, so a text two lexemes hold is parsed once; a
    /// regex that does not parse then makes a lexeme that fails.
    Parts(Vec<SourcePart>, Arc<ParsedTexts>),
}

/// A part of a [`TreeSource::Parts`].
#[derive(Clone)]
pub(crate) enum SourcePart {
    Tree(Arc<Hir>),
    Text(Arc<str>),
    /// An object's other keys, built from the names, never parsed.
    Keys(Arc<OtherKeys>),
}

impl Recipe {
    /// Where the parts are an object's other keys then syntax trees: the
    /// trees, printed (see [`Lexeme::after_keys`]). Only where no other
    /// part holds a quote (a colon and spaces after the keys, a comma and
    /// spaces before them): a loop that ends at a quote is then the keys'
    /// own, and past their quote only the trees after them are left (none
    /// before them reads a quote, so none of them is still going on).
    fn after_keys(&self) -> Option<Arc<str>> {
        let TreeSource::Parts(parts, _) = &self.source else {
            return None;
        };
        let at = parts
            .iter()
            .position(|p| matches!(p, SourcePart::Keys(_)))?;
        let quoteless = |p: &SourcePart| matches!(p, SourcePart::Tree(t) if !holds_quote(t));
        if !parts[..at].iter().all(quoteless) {
            return None;
        }
        let mut text = String::new();
        for part in &parts[at + 1..] {
            match part {
                SourcePart::Tree(t) if !holds_quote(t) => text.push_str(&format!("(?:{t})")),
                _ => return None,
            }
        }
        Some(Arc::from(text))
    }
}

/// Whether some text of `hir` holds a quote.
fn holds_quote(hir: &Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => false,
        HirKind::Literal(l) => l.0.contains(&b'"'),
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .any(|r| r.start() <= '"' && '"' <= r.end()),
        HirKind::Class(Class::Bytes(c)) => c
            .ranges()
            .iter()
            .any(|r| r.start() <= b'"' && b'"' <= r.end()),
        HirKind::Repetition(r) => holds_quote(&r.sub),
        HirKind::Capture(c) => holds_quote(&c.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(holds_quote),
    }
}

impl SourcePart {
    /// The part of a verbatim piece's `regex`: the names it is built from
    /// where the writer gave them, else the text.
    pub(crate) fn of_text(regex: &str, verbatim: &Verbatim) -> SourcePart {
        match &verbatim.keys {
            Some(keys) => SourcePart::Keys(keys.clone()),
            None => SourcePart::Text(Arc::from(regex)),
        }
    }
}

/// The trees of the regex texts a grammar's deferred lexemes have parsed,
/// by text: an object's "any other key" (a verbatim rule, up to 100 KB of
/// text) stands in the run of its first member and in the run after a
/// comma, two lexemes of one text. A tree is kept while a lexeme not
/// made yet may ask for it (the grammar's life at most: the recipes hold
/// this table).
#[derive(Default)]
pub(crate) struct ParsedTexts(Mutex<HashMap<Arc<str>, Arc<Hir>>>);

impl ParsedTexts {
    /// The tree of `text`, parsed now if no lexeme has parsed it yet (not
    /// holding the table meanwhile: lexemes of other texts are made by
    /// other threads at once).
    fn tree(&self, text: &Arc<str>) -> Result<Arc<Hir>, GrammarError> {
        if let Some(tree) = self.known().get(text) {
            return Ok(tree.clone());
        }
        let tree = Arc::new(tokensieve_grammar::dfa::parse(text)?);
        Ok(self.known().entry(text.clone()).or_insert(tree).clone())
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Hir>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The lazy DFA of `parts` one after the other (their texts parsed through
/// `texts`).
pub(crate) fn parts_dfa(
    parts: &[SourcePart],
    texts: &ParsedTexts,
    limits: &DfaLimits,
) -> Result<LazyDfa, GrammarError> {
    let trees = parts
        .iter()
        .map(|part| match part {
            SourcePart::Tree(tree) => Ok(Some(tree.clone())),
            SourcePart::Text(text) => texts.tree(text).map(Some),
            SourcePart::Keys(_) => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<Part<'_>> = parts
        .iter()
        .zip(&trees)
        .map(|(part, tree)| match (part, tree) {
            (SourcePart::Keys(keys), _) => Part::OtherKeys(keys),
            (_, tree) => Part::Tree(tree.as_deref().expect("a tree for every other part")),
        })
        .collect();
    LazyDfa::from_sources(&refs, limits)
}

/// The lexeme of `regex` with a lazily built DFA, made by `build` (from
/// its syntax tree, now or on first use) unless the process has it
/// already; shared like [`lexeme`].
pub(crate) fn lazy_lexeme(
    regex: &str,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
    build: impl FnOnce() -> Result<Making, GrammarError>,
) -> Result<Arc<Lexeme>, GrammarError> {
    // NUL never appears in a regex we build, so this key is no regex's.
    shared(|| format!("\0~{regex}"), vocab, limits, share, build)
}

/// The lexeme of a counted repetition (`key` names its regex), shared like
/// [`lexeme`]: the automaton the piece split made, unless the process has
/// this lexeme already.
pub(crate) fn counted_lexeme(
    key: &str,
    automaton: Arc<LazyCounted>,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    shared(
        || key.to_string(),
        vocab,
        limits,
        share,
        || Ok(Making::Now(LexDfa::Counted(automaton))),
    )
}

/// The lexeme of the texts every one of `regexes` matches (their
/// intersection, a product of lazy DFAs whose states are made as walks
/// reach them), shared like [`lexeme`].
pub(crate) fn intersection_lexeme(
    regexes: &[String],
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    // NUL never appears in a regex we build, so this key is no regex's.
    let key = || format!("\0&{}", regexes.join("\0"));
    shared(key, vocab, limits, share, || {
        let patterns: Vec<&str> = regexes.iter().map(String::as_str).collect();
        LazyProduct::build(&patterns, limits).map(|d| Making::Now(LexDfa::Product(d)))
    })
}

/// The cached lexeme of `key` (written only if it is looked up), or the
/// one `build` makes (kept, failure included); without `share`, a new one,
/// neither read from the cache nor kept in it (a cold compile:
/// [`crate::EarleyConfig::shared_lexemes`]).
fn shared(
    key: impl FnOnce() -> String,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
    build: impl FnOnce() -> Result<Making, GrammarError>,
) -> Result<Arc<Lexeme>, GrammarError> {
    let make = |making| {
        Arc::new(Lexeme::new(
            making,
            vocab.trie.clone(),
            vocab.words,
            vocab.skeletons.clone(),
        ))
    };
    if !share {
        return build().map(make);
    }
    let key = (vocab.trie.fingerprint(), key(), limits.max_dfa_states);
    {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let map = &lexeme_cache(&mut cache).map;
        // A lazy lexeme that ran into its limit narrowed its language:
        // every grammar holding it fails its steps; a new one starts afresh.
        match map.get(&key) {
            Some(Ok(l)) if l.made().is_some_and(|d| d.exhausted().is_some()) => {}
            Some(l) => return l.clone(),
            None => {}
        }
    }
    // Failures are kept too: a grammar tries each of its regular rules as
    // a lexeme, and one that is too big should cost one attempt a process.
    let lexeme = build().map(make);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = lexeme_cache(&mut cache);
    if cache.map.len() >= cache.sweep_at {
        cache
            .map
            .retain(|_, l| l.as_ref().is_ok_and(|l| Arc::strong_count(l) > 1));
        cache.sweep_at = (2 * cache.map.len()).max(CACHE_ENTRIES);
    }
    cache.map.insert(key, lexeme.clone());
    lexeme
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokensieve_core::Vocabulary;
    use tokensieve_core::testing::SplitMix64;

    /// Every byte, then random tokens of ASCII, quotes, backslashes and
    /// pieces of multi-byte characters (cut anywhere, so some tokens are
    /// not well-formed UTF-8), and long ASCII ones.
    fn vocabulary() -> Vocabulary {
        let pieces: [&[u8]; 16] = [
            b"a",
            b"b",
            b"y",
            b" ",
            b"\"",
            b"\\",
            b":",
            b"\n",
            "é".as_bytes(),
            "中".as_bytes(),
            "😀".as_bytes(),
            // A line separator, a no-break space (both `\s`) and a
            // character with the separator's lead byte.
            "\u{2028}".as_bytes(),
            "\u{a0}".as_bytes(),
            "€".as_bytes(),
            b"\xff",
            // A character cut short: what follows breaks UTF-8.
            b"\xc3",
        ];
        let mut rng = SplitMix64(7);
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for _ in 0..3000 {
            let mut t = Vec::new();
            for _ in 0..1 + rng.below(5) {
                t.extend_from_slice(pieces[rng.below(pieces.len())]);
            }
            let cut = rng.below(3);
            t.drain(..cut.min(t.len() - 1));
            tokens.push(t);
        }
        // Long tokens of many characters (words and spaces, a quote or a
        // backslash here and there): deeper than a bounded string's budget.
        for _ in 0..500 {
            let t: Vec<u8> = (0..6 + rng.below(20))
                .map(|_| b"aby :\"\\"[rng.below(7)])
                .collect();
            tokens.push(t);
        }
        Vocabulary::from_byte_tokens(tokens)
    }

    /// Limits wide enough for every automaton of these tests.
    fn limits(minimize: bool) -> DfaLimits {
        DfaLimits {
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            max_dfa_states: 10_000,
            minimize,
        }
    }

    /// `regex` as an eager lexeme on `trie` (of `vocab`), with skeletons
    /// of its own.
    fn eager_lexeme(
        regex: &str,
        vocab: &Vocabulary,
        trie: &Arc<TokenTrie>,
        limits: &DfaLimits,
    ) -> Lexeme {
        Lexeme::new(
            Making::Now(LexDfa::Eager(ByteDfa::build(regex, limits).unwrap())),
            trie.clone(),
            vocab.mask_words(),
            Arc::default(),
        )
    }

    /// The walk without taking subtrees whole: every node visited.
    fn plain_walk(l: &Lexeme, state: u32) -> (Vec<u32>, Vec<(u32, u32)>) {
        let trie = &*l.trie;
        let (mut inside, mut exits) = (Vec::new(), Vec::new());
        let mut stack = vec![DEAD; trie.max_depth + 1];
        stack[0] = state;
        let mut i = 1;
        while i < trie.nodes.len() {
            let node = trie.nodes[i];
            let next = l.dfa().next(stack[node.depth as usize - 1], node.byte);
            if next == DEAD {
                i = node.next as usize;
                continue;
            }
            stack[node.depth as usize] = next;
            let range = trie.token_start[i] as usize..trie.token_start[i + 1] as usize;
            inside.extend_from_slice(&trie.tokens[range]);
            if l.dfa().is_accepting(next) && node.next as usize > i + 1 {
                exits.push((i as u32, node.depth));
            }
            i += 1;
        }
        inside.sort_unstable();
        (inside, exits)
    }

    /// The index of `state` holds the tokens and exits of the full walk.
    fn assert_walks_as_a_full_walk(l: &Lexeme, state: u32, what: &str) {
        assert_index_is_the_full_walk(l, state, &l.build_state(state), what);
    }

    /// `index` (of `state`) holds the tokens and exits of the full walk.
    fn assert_index_is_the_full_walk(l: &Lexeme, state: u32, index: &StateIndex, what: &str) {
        let (inside, exits) = plain_walk(l, state);
        let mut row = vec![0u32; l.words];
        index.inside.or_into(&mut row);
        let got: Vec<u32> = (0..(l.words * 32) as u32)
            .filter(|&t| row[t as usize / 32] & (1 << (t % 32)) != 0)
            .collect();
        assert_eq!(got, inside, "{what}, state {state}");
        assert_eq!(index.exits, exits, "{what}, state {state}");
    }

    /// A row kept from set to set: a sparse set leaves it all zeros (a
    /// stale bit would be a token the next set allows wrongly), a dense
    /// one takes it.
    #[test]
    fn a_kept_row_is_left_empty_by_the_set_made_of_it() {
        let words = 4096;
        let mut row = vec![0u32; words];
        for id in [0u32, 31, 32, 4000, 77_777, 131_071] {
            row[id as usize / 32] |= 1 << (id % 32);
        }
        match TokenSet::from_scratch(&mut row) {
            TokenSet::Sparse(ids) => assert_eq!(ids, [0, 31, 32, 4000, 77_777, 131_071]),
            TokenSet::Dense(_) => panic!("six tokens are kept as ids"),
        }
        assert_eq!(row.len(), words, "a sparse set leaves the row");
        assert!(row.iter().all(|&w| w == 0), "and leaves it all zeros");
        let mut row = vec![u32::MAX; words];
        match TokenSet::from_scratch(&mut row) {
            TokenSet::Dense(bits) => {
                assert!(bits.len() == words && bits.iter().all(|&w| w == u32::MAX))
            }
            TokenSet::Sparse(_) => panic!("every token is kept as the row"),
        }
        assert!(row.is_empty(), "a dense set takes the row");
    }

    #[test]
    fn subtrees_taken_whole_give_the_rows_of_a_full_walk() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let limits = limits(true);
        let regexes = [
            r#""([^"\\\x00-\x1f]|\\["\\/bfnrt])*""#,
            r#""([^"\\]|\\.)*" *: *"#,
            r#"[^é"]*"#,
            r#"a[^"\n]{0,6}y"#,
            r#""[^"\\]{2,40}""#,
            r#"([ab ]|中)*:"#,
            // A loop that keeps most of the vocabulary: its row starts
            // from every token and clears what its escapes refuse.
            r"[^\n]*\n",
            // States whose step leads into a loop with other bytes: the
            // first character narrower (not `a`, not `é`) or wider (a
            // quote, where the loop takes none) than the loop's.
            r#"[^"a\\][^"\\]*""#,
            r#""[^"é]([^"\\]|\\.)*""#,
            r#"[^\n]([^"\\]|\\["n])*!"#,
            // Unanchored searches in a string (a JSON Schema `pattern`):
            // each step of a partial match is a state of its own whose
            // walks fall back into the loop (the loop walk).
            r#""[^"\\]*ab[^"\\]*""#,
            r#""[^"\\]*[ab]{3}[^"\\]*""#,
            r#""[^"\\]*(y:|中é)[^"\\]*" *:"#,
            // With JSON escapes, a search whose partial matches take
            // letters of the body: each walks the zone of the search (every
            // character but the quote and the backslash), not the loop's
            // skeleton, whose escapes are every letter of the match.
            r#""(?:[^"\\]|\\["\\/bfnrt])*[aby]{2}(?:[^"\\]|\\["\\/bfnrt])*""#,
            r#""[^"\\]*(?:a|é){2}[^"\\]*""#,
            // A letter after which a character fails: its lead byte
            // leaves the zone.
            r#""(?:[^"\\a]|a[^"\\é])*""#,
            // Strings of bounded length: chains of states, each count its
            // own, walked through skeletons with budgets below and at the
            // trie's depth.
            r#""(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]){0,40}" *,"#,
            r#"(?:[^"\\:]|\\["\\]|中){3,12}:"#,
            // Near a chain's end (strings of fixed or bounded length):
            // most tokens are deeper than what is left, and the state
            // after the budget takes a quote only; with a long budget,
            // most of the vocabulary is kept and the frontier's refusals
            // are cleared from every token.
            r#""[^"\\]{9}""#,
            r#"[^"\\]{0,12}","#,
            // Loops that take most characters but not all: their escapes
            // are at the lead bytes of those they leave out.
            r#""[^"\\\x00-\x1F\x{2028}\x{2029}]*""#,
            r#""(?:[^"\\\s]|\\["\\])*"\s*"#,
            r#""(?:[^"\\\s]{1,3}\s){0,9}[^"\\\s]+""#,
        ];
        let mut taken_whole = 0;
        let mut into_loop = 0;
        let mut loop_walks = 0;
        let mut chains = [0; 2];
        let mut zones = 0;
        for regex in regexes {
            let l = eager_lexeme(regex, &vocab, &trie, &limits);
            for state in 1..l.dfa().num_states() as u32 {
                assert_walks_as_a_full_walk(&l, state, regex);
                taken_whole += usize::from(l.runs.run(l.dfa(), state) > 1);
                into_loop += usize::from(l.loop_skeleton(state).is_some_and(|(_, into)| {
                    into != state
                        && l.first_bytes(state)
                            .iter()
                            .map(|w| w.count_ones())
                            .sum::<u32>()
                            >= WIDE
                }));
                zones += usize::from(
                    l.is_wide(state)
                        && l.loop_skeleton(state).is_some()
                        && l.zone_is_wider(state, ZONE_STATES),
                );
                if l.loop_skeleton(state).is_none() && l.chain_skeleton(state).is_some() {
                    let budgeted = l.runs.run(l.dfa(), state) < trie.max_depth as u32;
                    chains[usize::from(budgeted)] += 1;
                }
            }
            loop_walks += l.loops.lock().unwrap().len();
        }
        assert!(
            chains.iter().all(|&n| n >= 3),
            "chains walked with and without a budget: {chains:?}"
        );
        assert!(taken_whole >= 3, "the loops this test is about were found");
        assert!(loop_walks >= 3, "walks into a loop took the loop walk");
        assert!(into_loop >= 3, "states leading into a loop were found");
        assert!(zones >= 4, "searches walked through their zones: {zones}");
    }

    /// A search in a JSON string for a long alternation (an unanchored
    /// `pattern` from a MaskBench schema), in a DFA that is not minimized,
    /// as a lazy one is not: its loops' zones hold every partial match,
    /// more states than a gathering of 128 reached (none was found, and
    /// each loop was scanned escape by escape). The loops walk through
    /// their zones, and every walk is the full walk.
    #[test]
    fn a_long_search_walks_through_its_zone() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let limits = limits(false);
        // (The line break and the indent after `\` are not in the string.)
        let search = "(?:srn:reference-data/ResourceSecurityClassification:RESTRICTED\
                      |CLASSIFIED|CONFIDENTIAL|MOST-CONFIDENTIAL:[0-9]*)";
        let body = r#"(?:[^"\\]|\\["\\/bfnrt])*"#;
        let l = eager_lexeme(
            &format!(r#""{body}{search}{body}""#),
            &vocab,
            &trie,
            &limits,
        );
        assert!(
            l.dfa().num_states() > 200,
            "a search of {} states",
            l.dfa().num_states()
        );
        let mut zones = 0;
        for state in 1..l.dfa().num_states() as u32 {
            assert_walks_as_a_full_walk(&l, state, "a search for a long alternation");
            zones += usize::from(
                l.is_wide(state)
                    && l.loop_skeleton(state).is_some()
                    && l.zone_is_wider(state, ZONE_STATES),
            );
        }
        assert!(zones >= 5, "loops walked through their zones: {zones}");
    }

    /// The last characters of strings of fixed and bounded length, on a
    /// vocabulary of words (most tokens shorter than the strings, some
    /// longer): each count is walked through the skeleton of exactly what
    /// is left, whose frontier is refused a byte at a time where the
    /// count's end refuses the byte. Where most tokens are kept, the walk
    /// starts from every token and clears the refused ones, so every
    /// refusal must be counted: each walk is the full walk.
    #[test]
    fn chains_near_their_end_walk_as_a_full_walk() {
        let mut rng = SplitMix64(11);
        let mut tokens: Vec<Vec<u8>> = (0x20..0x7Fu8).map(|b| vec![b]).collect();
        for _ in 0..2000 {
            let most = if rng.below(6) == 0 { 24 } else { 6 };
            let len = 1 + rng.below(most);
            tokens.push((0..len).map(|_| b"abcdefgh xyz\\"[rng.below(13)]).collect());
        }
        for _ in 0..100 {
            let len = 1 + rng.below(12);
            let mut t: Vec<u8> = (0..len).map(|_| b"abxy "[rng.below(5)]).collect();
            t.extend_from_slice(b"\",");
            tokens.push(t);
        }
        let vocab = Vocabulary::from_byte_tokens(tokens);
        let trie = Arc::new(TokenTrie::new(&vocab));
        let (mut frontiers, mut cleared) = (0, 0);
        for regex in [r#""[^"\\]{9}" *,"#, r#""[^"\\]{0,12}" *,"#] {
            let l = eager_lexeme(regex, &vocab, &trie, &limits(true));
            for state in 1..l.dfa().num_states() as u32 {
                assert_walks_as_a_full_walk(&l, state, regex);
                let Some(skeleton) = l.chain_skeleton(state) else {
                    continue;
                };
                if l.loop_skeleton(state).is_some() || skeleton.frontier.is_empty() {
                    continue;
                }
                assert_eq!(skeleton.budget, l.runs.run(l.dfa(), state), "{regex}");
                frontiers += 1;
                cleared += usize::from(plain_walk(&l, state).0.len() * 2 > trie.tokens.len());
            }
        }
        assert!(
            frontiers >= 10,
            "chains walked through a frontier: {frontiers}"
        );
        assert!(cleared >= 4, "walks that cleared the refused: {cleared}");
    }

    /// A string value that ends its lexeme walks its body once for every
    /// lexeme on the vocabulary (the vocabulary's walk, whatever the key
    /// before it); a body that goes on past its quote takes that walk and
    /// walks only what comes after the quote; a body of other characters
    /// walks its own. Every walk is the full walk.
    #[test]
    fn string_bodies_share_the_vocabularys_walk() {
        #[derive(Debug, PartialEq, Clone, Copy)]
        enum Body {
            /// The vocabulary's walk itself.
            Shared,
            /// The vocabulary's walk, with what follows the quote walked.
            PastTheQuote,
            /// The lexeme's own walk through the body's escapes.
            Own,
        }
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let limits = limits(false);
        let body = tokensieve_grammar::json_schema::STRING_CHAR;
        let known = VocabSkeleton::json_string_body(&trie);
        let seeded = Arc::new(Skeletons::starting_with(&known));
        // The regex, and how its body state (after the prefix) is walked.
        let cases = [
            (format!(r#""a" *: *"{body}*""#), Body::Shared),
            (format!(r#"\{{"b":"{body}*""#), Body::Shared),
            // Not accepting after the quote, then accepting and going on,
            // then a key and another string.
            (format!(r#""c":"{body}*" *,"#), Body::PastTheQuote),
            (format!(r#""e":"{body}*" *"#), Body::PastTheQuote),
            (
                format!(r#""f":"{body}*" *, *"g": *"{body}*""#),
                Body::PastTheQuote,
            ),
            (r#""d":"(?:[^"\\é]|\\["\\/bfnrt])*""#.to_string(), Body::Own),
        ];
        let mut walked = Vec::new();
        for (regex, expected) in &cases {
            let dfa = ByteDfa::build(regex, &limits).unwrap();
            let l = Lexeme::new(
                Making::Now(LexDfa::Eager(dfa)),
                trie.clone(),
                vocab.mask_words(),
                seeded.clone(),
            );
            let prefix = regex
                .split_inclusive(':')
                .next()
                .unwrap()
                .replace([' ', '*', '\\'], "");
            let mut state = l.dfa().start();
            for b in format!("{prefix}\"").bytes() {
                state = l.dfa().next(state, b);
            }
            assert!(state != DEAD && l.is_wide(state), "{regex}: a body state");
            l.state(state);
            let index = l.states.get(state).unwrap().clone();
            let body_walk = known
                .body(super::Body::Value, &trie, vocab.mask_words())
                .unwrap();
            let how = if Arc::ptr_eq(&index, &body_walk.index) {
                Body::Shared
            } else if l.loops.lock().unwrap().is_empty() {
                Body::PastTheQuote
            } else {
                Body::Own
            };
            assert_eq!(how, *expected, "{regex}: how the body is walked");
            for s in 1..l.dfa().num_states() as u32 {
                assert_index_is_the_full_walk(&l, s, l.state(s), regex);
            }
            walked.push(how);
        }
        assert_eq!(walked, cases.map(|c| c.1));
    }

    /// A key's body (characters no key writes escaped: an object's other
    /// keys) walks from the vocabulary's walk of that body, as a value's
    /// does from a value's: shared where the lexeme ends at the quote,
    /// walked past the quote where it goes on to the colon, never through
    /// the body's escapes; other keys' lexemes of one grammar with the same
    /// text after the keys share that walk, where nothing else in them
    /// reads a quote; and every state's index is the full walk.
    #[test]
    fn key_bodies_share_the_vocabularys_walk() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let known = VocabSkeleton::json_string_body(&trie);
        let seeded = Arc::new(Skeletons::starting_with(&known));
        let key = known.body(Body::Key, &trie, vocab.mask_words()).unwrap();
        let c = r#"[^"\\\x00-\x1F]"#;
        let lexeme = |regex: &str, minimal: bool| {
            let dfa = ByteDfa::build(regex, &limits(minimal)).unwrap();
            Lexeme::new(
                Making::Now(LexDfa::Eager(dfa)),
                trie.clone(),
                vocab.mask_words(),
                seeded.clone(),
            )
        };
        let after = |l: &Lexeme, text: &str| {
            let state = text
                .bytes()
                .fold(l.dfa().start(), |s, b| l.dfa().next(s, b));
            assert!(state != DEAD && l.is_wide(state), "{text}: a body state");
            state
        };
        // The regex, and whether its body's walk is the vocabulary's own.
        let cases = [
            (format!(r#""{c}*""#), true),
            (format!(r#""{c}*" *: *"#), false),
            // Any key but "ab" and "b".
            (
                format!(
                    r#""(?:|[^"\\\x00-\x1Fab]{c}*|a|a[^"\\\x00-\x1Fb]{c}*|ab{c}+|b{c}+)" *: *"#
                ),
                false,
            ),
        ];
        for minimal in [false, true] {
            for (regex, shared) in &cases {
                let l = lexeme(regex, minimal);
                let state = after(&l, "\"x");
                l.state(state);
                let index = l.states.get(state).unwrap().clone();
                assert_eq!(Arc::ptr_eq(&index, &key.index), *shared, "{regex}");
                assert!(
                    l.loops.lock().unwrap().is_empty(),
                    "{regex}: escapes walked"
                );
                for s in 1..l.dfa().num_states() as u32 {
                    assert_index_is_the_full_walk(&l, s, l.state(s), regex);
                }
            }
        }
        // Other keys' lexemes as the lowering makes them (the keys from
        // their names, then text): those of one grammar with the same text
        // after the keys share one walk past the quote. A quote in a part
        // but the keys leaves a lexeme to its own: before the keys, a
        // string just like a key's body (whose quote the pair of walks
        // cannot tell from the key's) would be going on past the quote.
        let tree = |t: &str| SourcePart::Tree(Arc::new(tokensieve_grammar::dfa::parse(t).unwrap()));
        let keys = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            SourcePart::Keys(Arc::new(OtherKeys::new(&names)))
        };
        let parts_lexeme = |parts: Vec<SourcePart>| {
            let recipe = Recipe {
                source: TreeSource::Parts(parts, Arc::default()),
                limits: limits(false),
                weight: 100,
                nullable: false,
            };
            Lexeme::new(
                Making::Later(recipe),
                trie.clone(),
                vocab.mask_words(),
                seeded.clone(),
            )
        };
        let colon = " *: *";
        let string_before = format!(r#"(?:"{c}*" *: *y *, *)?"#);
        // The lexeme, the text to its keys' body, and whether it shares.
        let cases = [
            (
                parts_lexeme(vec![keys(&["ab", "b"]), tree(colon)]),
                "\"x",
                true,
            ),
            (
                parts_lexeme(vec![tree(" *, *"), keys(&["a", "y"]), tree(colon)]),
                " , \"x",
                true,
            ),
            (
                parts_lexeme(vec![tree(&string_before), keys(&["b"]), tree(colon)]),
                "\"x",
                false,
            ),
            (
                parts_lexeme(vec![keys(&["b"]), tree(&format!("{colon}\"a\""))]),
                "\"x",
                false,
            ),
        ];
        let mut shared: Option<Arc<StateIndex>> = None;
        for (l, text, shares) in &cases {
            assert_eq!(l.after_keys.is_some(), *shares, "{text}");
            let state = after(l, text);
            l.state(state);
            let index = l.states.get(state).unwrap().clone();
            assert!(l.loops.lock().unwrap().is_empty(), "{text}: escapes walked");
            match &shared {
                Some(first) => assert_eq!(Arc::ptr_eq(first, &index), *shares, "{text}"),
                None => shared = Some(index),
            }
            let mut s = 1;
            while s < l.dfa().num_states() as u32 {
                assert_index_is_the_full_walk(l, s, l.state(s), text);
                s += 1;
            }
        }
        // A string value after the colon, its body a key's: past its quote
        // only the comma is left, not the colon and the string.
        let l = parts_lexeme(vec![keys(&["b"]), tree(&format!(r#"{colon}"{c}*" *,"#))]);
        assert!(l.after_keys.is_none());
        for text in ["\"x", "\"q\" : \"x"] {
            let state = after(&l, text);
            assert_index_is_the_full_walk(&l, state, l.state(state), text);
        }
    }

    /// An object's other keys: any key but the named ones, then its colon.
    /// A state partway through a named key (most characters go on into
    /// any other key's body, the next one of the name and the quote after
    /// it do not) is walked from the body's own walk, differing only along
    /// the names; each such walk is the full walk, and so is every other.
    #[test]
    fn keys_but_the_named_ones_walk_from_the_body() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let c = r#"(?:[^"\\]|\\["\\/bfnrt])"#;
        // Every key but "ab", "aby", "b" and "é" (whose middle is a state
        // of its own, apart from the body's middle of a character).
        let keys = format!(
            r#""(?:|[^"\\abé]{c}*|a|a[^"\\b]{c}*|ab[^"\\y]{c}*|aby{c}+|b{c}+|é{c}+)" *: *"#
        );
        // A string, or its first characters "ab" alone: the state after
        // them may end where the body's loop may not.
        let prefix = format!(r#""(?:ab|{c}*")"#);
        // Any string but "ab", which goes on with an x: after "ab" the
        // quote leads where the body's quote does not end.
        let apart = format!(r#""(?:|[^"\\a]{c}*|a|a[^"\\b]{c}*|ab{c}+)"|"ab"x"#);
        let (mut deviated, mut alike) = (0, 0);
        for regex in [&keys, &prefix, &apart] {
            // Eager, minimal or not, and lazy: the lazy automaton makes a
            // state of its own for the middle of a character after a key's
            // first characters and after the body, which walk alike.
            let lazy = LazyDfa::build(regex, &limits(false)).unwrap();
            let lexemes = [
                eager_lexeme(regex, &vocab, &trie, &limits(false)),
                eager_lexeme(regex, &vocab, &trie, &limits(true)),
                Lexeme::new(
                    Making::Now(LexDfa::Lazy(lazy)),
                    trie.clone(),
                    vocab.mask_words(),
                    Arc::default(),
                ),
            ];
            for l in &lexemes {
                // (A lazy automaton makes states as they are walked.)
                let mut state = 1;
                while state < l.dfa().num_states() as u32 {
                    if l.is_wide(state)
                        && let Some((_, into)) = l.loop_skeleton(state)
                        && into != state
                        && let Some(index) = l.deviation(state, into)
                    {
                        assert_index_is_the_full_walk(l, state, &index, "deviation");
                        deviated += 1;
                    }
                    assert_walks_as_a_full_walk(l, state, regex);
                    state += 1;
                }
                alike += l
                    .alike
                    .lock()
                    .unwrap()
                    .values()
                    .filter(|&&same| same)
                    .count();
            }
        }
        assert!(alike >= 1, "states found to walk alike: {alike}");
        assert!(deviated >= 20, "states walked from the body: {deviated}");
    }

    /// Intersections (a pattern under a length) walk as every node would:
    /// their text steps are made from their parts' steps.
    #[test]
    fn intersections_give_the_rows_of_a_full_walk() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let cases: [&[&str]; 3] = [
            &[
                r#""(?:[^"\\\s]+\s+){0,3}[^"\\\s]+""#,
                r#""[^"\\\x00-\x1F]{0,14}""#,
            ],
            &[r#""[^"\\]*a[^"\\]*" *,"#, r#""[^"\\]{2,30}" *,"#],
            &[r#""[^"\\\x{2028}]*""#, r#""[^"\\]{0,40}""#],
        ];
        let mut states = 0;
        for patterns in cases {
            let product = LazyProduct::build(patterns, &limits(false)).unwrap();
            let l = Lexeme::new(
                Making::Now(LexDfa::Product(product)),
                trie.clone(),
                vocab.mask_words(),
                Arc::default(),
            );
            let mut seen = vec![l.dfa().start()];
            let mut k = 0;
            while k < seen.len() && k < 60 {
                let state = seen[k];
                k += 1;
                assert_walks_as_a_full_walk(&l, state, &format!("{patterns:?}"));
                states += 1;
                for b in 0..=255u8 {
                    let t = l.dfa().next(state, b);
                    if t != DEAD && !seen.contains(&t) {
                        seen.push(t);
                    }
                }
            }
        }
        assert!(states >= 100, "{states} states walked");
    }

    /// Intersections under a long length: a state whose count its index
    /// moves ([`LazyProduct::shifted`]) gets the tokens and exits of its
    /// own full walk, a pattern with a long completion (after the colon,
    /// 24 letters, longer than any token) and a least length included.
    #[test]
    fn intersections_under_a_long_length_index_as_their_full_walk() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let char = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt])"#;
        // Each with the bytes its random texts are made of.
        let cases = [
            (
                vec![
                    r#""(?:[^"\\\s]+\s+){0,5}[^"\\\s]+""#.to_owned(),
                    format!(r#""{char}{{0,70}}""#),
                ],
                &b"ab  \\n"[..],
            ),
            (
                vec![
                    r#""[^"\\]*:[ab]{24}""#.to_owned(),
                    format!(r#""{char}{{0,100}}""#),
                ],
                &b"ab:"[..],
            ),
            (
                vec![
                    r#""[^"\\]*y[^"\\]*""#.to_owned(),
                    format!(r#""{char}{{9,90}}""#),
                ],
                &b"aby"[..],
            ),
        ];
        let mut rng = SplitMix64(37);
        let mut shifted = 0;
        for (patterns, alphabet) in &cases {
            let regexes: Vec<&str> = patterns.iter().map(String::as_str).collect();
            let product = LazyProduct::build(&regexes, &limits(false)).unwrap();
            let l = Lexeme::new(
                Making::Now(LexDfa::Product(product)),
                trie.clone(),
                vocab.mask_words(),
                Arc::default(),
            );
            // The states of random texts, as far as each goes: counts up
            // to the length's bounds.
            let mut seen = hashbrown::HashSet::new();
            for _ in 0..40 {
                let mut state = l.dfa().next(l.dfa().start(), b'"');
                for _ in 0..110 {
                    if state == DEAD {
                        break;
                    }
                    if seen.insert(state) {
                        let index = l.state(state);
                        assert_index_is_the_full_walk(&l, state, index, &format!("{patterns:?}"));
                        shifted += usize::from(l.index_state(state) != state);
                    }
                    state = l.dfa().next(state, alphabet[rng.below(alphabet.len())]);
                }
            }
        }
        assert!(shifted >= 100, "{shifted} states indexed through a shift");
    }

    /// A row becomes its sorted ids while they would take less than an
    /// eighth of its memory, and stays the row from there on, wherever
    /// they lie.
    #[test]
    fn rows_of_few_tokens_are_ids_and_of_many_the_row() {
        let words = 64;
        let limit = words / 8;
        for count in [0, 1, limit - 1, limit, words * 32] {
            for spread in [1, 7919] {
                // From the last token down, `spread` apart (7,919 is
                // prime: no id twice).
                let bits = words * 32;
                let mut ids: Vec<u32> = (0..count)
                    .map(|i| (bits - 1 - i * spread % bits) as u32)
                    .collect();
                let mut row = vec![0u32; words];
                for &t in &ids {
                    row[t as usize / 32] |= 1 << (t % 32);
                }
                ids.sort_unstable();
                match TokenSet::from_row(row.clone()) {
                    TokenSet::Sparse(got) => {
                        assert!(count < limit, "{count} ids kept as ids");
                        assert_eq!(got, ids);
                    }
                    TokenSet::Dense(got) => {
                        assert!(count >= limit, "{count} ids kept as a row");
                        assert_eq!(got, row);
                    }
                }
            }
        }
    }

    /// A JSON string (the JSON Schema lowering's string, escapes and all)
    /// walks through the skeleton the backend makes with the vocabulary,
    /// finding what it finds with one made from its own step.
    #[test]
    fn a_json_string_walks_through_the_vocabulary_skeleton() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let limits = limits(false);
        let string = &format!(
            r#""{}*" *, *"#,
            tokensieve_grammar::json_schema::STRING_CHAR
        );
        let seeded = Arc::new(Skeletons::starting_with(&VocabSkeleton::json_string_body(
            &trie,
        )));
        let own = Arc::new(Skeletons::default());
        let lexeme = |skeletons: &Arc<Skeletons>| {
            let dfa = ByteDfa::build(string, &limits).unwrap();
            Lexeme::new(
                Making::Now(LexDfa::Eager(dfa)),
                trie.clone(),
                vocab.mask_words(),
                skeletons.clone(),
            )
        };
        let (a, b) = (lexeme(&seeded), lexeme(&own));
        for state in 1..a.dfa().num_states() as u32 {
            let (x, y) = (a.build_state(state), b.build_state(state));
            let (mut rx, mut ry) = (
                vec![0u32; vocab.mask_words()],
                vec![0u32; vocab.mask_words()],
            );
            x.inside.or_into(&mut rx);
            y.inside.or_into(&mut ry);
            assert_eq!(rx, ry, "state {state}");
            assert_eq!(x.exits, y.exits, "state {state}");
        }
        let own = own.own.0.lock().unwrap();
        assert_eq!(own.len(), 1, "the string's body walked through a skeleton");
        assert_eq!(
            own[0].0,
            (JSON_STRING_BODY, trie.max_depth as u32),
            "the body's step is the vocabulary's"
        );
        assert_eq!(seeded.own.len(), 0, "no skeleton made beside it");
    }

    /// The vocabulary's skeletons hold every budget a chain may ask of a
    /// JSON string's body: a bounded string walks to its end without
    /// making one (a mask would pay for it), and each walk is the full walk.
    #[test]
    fn bounded_json_strings_walk_through_the_vocabularys_budgets() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let full = trie.max_depth as u32;
        for run in 1..full + 8 {
            let budget = chain_budget(run, full);
            assert!(
                budget == full || chain_budgets(full).contains(&budget),
                "{run}"
            );
        }
        let known = VocabSkeleton::json_string_body(&trie);
        let made = chain_budgets(full).len() + 1;
        assert_eq!(known.0.table.len(), made);
        let seeded = Arc::new(Skeletons::starting_with(&known));
        let body = tokensieve_grammar::json_schema::STRING_CHAR;
        let mut chains = 0;
        for regex in [
            format!(r#""{body}{{0,40}}""#),
            format!(r#""{body}{{7}}" *,"#),
        ] {
            let dfa = ByteDfa::build(&regex, &limits(false)).unwrap();
            let l = Lexeme::new(
                Making::Now(LexDfa::Eager(dfa)),
                trie.clone(),
                vocab.mask_words(),
                seeded.clone(),
            );
            for state in 1..l.dfa().num_states() as u32 {
                chains += usize::from(l.chain_skeleton(state).is_some());
                assert_index_is_the_full_walk(&l, state, l.state(state), &regex);
            }
        }
        assert!(chains >= 20, "{chains} chains walked");
        // (Other steps, a `\u` escape's hex digits, a run of spaces, are
        // the grammar's own.)
        let own = seeded.own.0.lock().unwrap();
        assert!(
            own.iter().all(|(k, _)| k.0 != JSON_STRING_BODY),
            "no body skeleton made beside the vocabulary's"
        );
        assert_eq!(known.0.table.len(), made, "no budget made at a mask");
    }

    /// Whitespace between JSON tokens is walked by counting its bytes (the
    /// state's run, [`LazyDfa::chain`]): the first walk makes no state per
    /// count, and the walk from every state gives the rows of a full walk.
    #[test]
    fn whitespace_runs_walk_as_a_full_walk() {
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(&vocab));
        let ws = r"[ \t\n\r]";
        for regex in [
            format!(r#"\{{{ws}{{0,20}}"a"{ws}{{0,20}}:{ws}{{0,20}}(?:y|"b*"){ws}{{0,20}}\}}"#),
            format!(r":{ws}{{0,12}}"),
            format!(r"a{ws}{{0,9}}(?:b{ws}{{0,9}})*"),
        ] {
            let dfa = LazyDfa::build(&regex, &limits(false)).unwrap();
            let l = Lexeme::new(
                Making::Now(LexDfa::Lazy(dfa)),
                trie.clone(),
                vocab.mask_words(),
                Arc::new(Skeletons::default()),
            );
            let start = l.start();
            let _ = l.build_state(start);
            // The start, the state after its first byte, the one after the
            // whole run (and the dead one).
            assert!(
                l.dfa().num_states() <= 5,
                "{regex}: {} states made by the first walk",
                l.dfa().num_states()
            );
            // Every state a text reaches, each run partway through.
            let mut states = vec![start];
            let mut k = 0;
            while let Some(&state) = states.get(k) {
                k += 1;
                for b in 0..=255u8 {
                    let next = l.dfa().next(state, b);
                    if next != DEAD && !states.contains(&next) {
                        states.push(next);
                    }
                }
            }
            let runs = states
                .iter()
                .filter(|&&s| l.dfa().chain(s).is_some())
                .count();
            assert!(runs >= 8, "{regex}: {runs} states partway through a run");
            for &state in &states {
                assert_walks_as_a_full_walk(&l, state, &format!("{regex} from state {state}"));
            }
        }
    }

    /// A regex text two lexemes hold (an object's "any other key", in the
    /// run of its first member and in the run after a comma) is parsed
    /// once, and the lexeme of parts matches what their joined text does.
    #[test]
    fn a_text_of_two_lexemes_is_parsed_once() {
        let texts = ParsedTexts::default();
        let key: Arc<str> = Arc::from(r#""(?:[a-c]|d[a-z]*)""#);
        let comma = Arc::new(tokensieve_grammar::dfa::parse(r"[ ]?,[ ]?").unwrap());
        let colon = Arc::new(tokensieve_grammar::dfa::parse(r":[0-9]+").unwrap());
        let first = parts_dfa(
            &[
                SourcePart::Text(key.clone()),
                SourcePart::Tree(colon.clone()),
            ],
            &texts,
            &limits(false),
        )
        .unwrap();
        let tree = texts.tree(&Arc::from(&*key)).unwrap();
        let after = parts_dfa(
            &[
                SourcePart::Tree(comma),
                SourcePart::Text(Arc::from(&*key)),
                SourcePart::Tree(colon),
            ],
            &texts,
            &limits(false),
        )
        .unwrap();
        assert!(Arc::ptr_eq(&tree, &texts.tree(&key).unwrap()));
        assert_eq!(texts.known().len(), 1);
        let joined = [
            (first, format!("(?:{key})(?::[0-9]+)")),
            (after, format!("(?:[ ]?,[ ]?)(?:{key})(?::[0-9]+)")),
        ];
        let accepts = |a: &LazyDfa, bytes: &[u8]| {
            let mut s = a.start();
            for &b in bytes {
                s = a.next(s, b);
            }
            s != DEAD && a.is_accepting(s)
        };
        for (i, text, ok) in [
            (0, &br#""a":0"#[..], true),
            (0, br#""dab":12"#, true),
            (0, br#""e":1"#, false),
            (0, br#":0"a""#, false),
            (1, br#" , "d":0"#, true),
            (1, br#","b":3"#, true),
            (1, br#""b":3,"#, false),
        ] {
            let dfa = &joined[i].0;
            assert_eq!(accepts(dfa, text), ok, "{}", String::from_utf8_lossy(text));
        }
        let mut rng = SplitMix64(17);
        let alphabet = br#"abcdz" ,:0"#;
        for (dfa, text) in &joined {
            let reference = LazyDfa::build(text, &limits(false)).unwrap();
            for _ in 0..2_000 {
                let bytes: Vec<u8> = (0..rng.below(10))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                assert_eq!(
                    accepts(dfa, &bytes),
                    accepts(&reference, &bytes),
                    "{text} on {bytes:?}"
                );
            }
        }
    }
}
