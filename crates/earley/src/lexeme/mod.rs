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

use tokensieve_automata::Grow;
use tokensieve_automata::LazyCounted;
use tokensieve_automata::LazyProduct;
use tokensieve_automata::OtherKeys;
use tokensieve_automata::{ALL_LEADS, DEAD, utf8_live_leads};
use tokensieve_automata::{Automaton, ByteDfa, DfaLimits, TextRuns, TextStep};
use tokensieve_automata::{Chain, LazyDfa, Part, lazy};
use tokensieve_core::GrammarError;
use tokensieve_core::TokenTrie;
use tokensieve_core::trie::Utf8At;
use tokensieve_grammar::Verbatim;

mod automaton;
mod cache;
mod index;
mod json_body;
mod recipe;
mod rows;
mod signature;
mod skeleton;
#[cfg(test)]
mod tests;
mod walk;

pub(crate) use automaton::*;
pub(crate) use cache::*;
pub(crate) use index::*;
pub(crate) use json_body::*;
pub(crate) use recipe::*;
use signature::*;
pub(crate) use skeleton::*;
pub(crate) use walk::*;

/// The most NFA states a [`LazyDfa::language_key`] reads for
/// [`Lexeme::language_walk`]: a fused lexeme of a C grammar past its
/// keyword reaches a few dozen (at 64, 128 and 256: C's mask instructions
/// −2.3%, −2.8% and −3.1%, XML's −0.2%, +0.1% and +0.6%).
const LANGUAGE_KEY_STATES: usize = 128;

/// A lexeme's DFA over one vocabulary, with its states' indexes built on
/// first use.
pub(crate) struct Lexeme {
    /// The automaton, once made (see [`Making`]).
    dfa: OnceLock<LexDfa>,
    /// What a deferred automaton is made from: kept once it is made too,
    /// until a grammar holding the lexeme is dropped
    /// ([`Lexeme::release_recipe`]).
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
    /// The scans below the closing quotes of a chain's skeleton, by the
    /// skeleton and the state past the quote ([`Lexeme::quote_scans`]).
    quote_scans: Mutex<HashMap<QuoteKey, Arc<QuoteScans>>>,
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
            quote_scans: Mutex::default(),
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
            // Read in place, not taken: freeing a big object's syntax tree
            // (an allocation per node in `regex_syntax`'s drop) was a
            // quarter of the first mask that made it.
            let recipe = self.recipe.lock().unwrap_or_else(|e| e.into_inner());
            let recipe = recipe
                .as_ref()
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

    /// Frees the recipe of a lexeme made already: called as a grammar
    /// holding it is dropped, so that a made lexeme's syntax tree lives
    /// no longer than the grammars that held it unmade, and is freed
    /// outside any mask.
    pub(crate) fn release_recipe(&self) {
        if self.dfa.get().is_some() {
            let spent = self.recipe.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(spent);
        }
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
                .or_else(|| self.run_walk(state))
                .or_else(|| self.language_walk(state))
                .unwrap_or_else(|| Arc::new(self.build_state(state)))
        })
    }

    /// Whether this lexeme's states are found by the texts they read
    /// ([`Lexeme::language_walk`]).
    #[cfg(test)]
    pub(crate) fn language_keys(&self) -> bool {
        self.skeletons.language_keys
    }

    /// The index of `state` of a lazy automaton, found by the key of the
    /// texts it reads ([`LazyDfa::language_key`]) among those made before
    /// by any lexeme of this grammar (of any grammar where lexemes are
    /// shared), or made now and kept: the fused lexemes of a code grammar
    /// that go on alike past their first bytes (a keyword or an operator,
    /// then spaces, comments and a name) walked the same states, each its
    /// own. An index made while the automaton ran into its limits is not
    /// kept: it may be narrower than the texts the key stands for.
    /// `None` for other automata, or a state whose texts reach more than
    /// [`LANGUAGE_KEY_STATES`] NFA states.
    fn language_walk(&self, state: u32) -> Option<Arc<StateIndex>> {
        let LexDfa::Lazy(dfa) = self.dfa() else {
            return None;
        };
        if !self.skeletons.language_keys {
            return None;
        }
        let key = dfa.language_key(state, LANGUAGE_KEY_STATES)?;
        let walks = &self.skeletons.kept_walks;
        if let Some(known) = walks.get(WalkKey::Language, &key) {
            return Some(known);
        }
        let made = self.build_state(state);
        if dfa.exhausted() {
            return Some(Arc::new(made));
        }
        Some(walks.keep(WalkKey::Language, key, made))
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
                .map(|s| s.inside.bytes() + s.exits.bytes())
                .sum::<usize>()
            + loops
    }
}
