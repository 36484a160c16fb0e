//! [`LazyDfa`]: a byte DFA whose states are made the first time a walk
//! reaches them, from the regex's Thompson NFA (`crate::nfa`, made from
//! the syntax tree in one pass). Compiling it costs the NFA only; a
//! grammar whose lexemes have thousands of states between them
//! pays, at each step, only for the states that step reaches (the idea of
//! llguidance's lexer and of `regex-automata`'s hybrid DFA, here with
//! stable state ids, shared by threads, and states that can never accept
//! cut off: every live state can still reach an accepting one). A set's
//! threads whose texts a wide loop of the set reads too are left out of it
//! (`LazyDfa::prune`): after a search's match, one state, not one per
//! partial match going on.
//!
//! Made for regexes without look-around (anchors, word boundaries); those
//! go to [`crate::ByteDfa`]. Past its limits (states, heap bytes) it stops
//! making states: the transition is dead, which narrows the language, and
//! [`LazyDfa::exhausted`] says so, for the caller to report as an error
//! naming the limit.

use hashbrown::HashTable;
use std::rc::Rc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use regex_syntax::hir::Hir;
use tokensieve_core::{GrammarError, Location};

use crate::dfa::{Automaton, DEAD, DfaLimits, TextStep};
use crate::grow::Grow;
use crate::json_keys::OtherKeys;
use crate::nfa::{Mix, Nfa, State, Transition};

const NOT_FORCED: u16 = 256;

/// Lazy DFAs of this process that ran into a limit: a matcher compares it
/// with the count it last saw, and looks at its own lexemes only when it
/// moved.
static EXHAUSTIONS: AtomicUsize = AtomicUsize::new(0);

/// Counts one more automaton run into a limit (see [`exhaustions`]): also
/// for an automaton whose deferred build failed, which a caller holding it
/// reports the same way.
pub fn note_exhaustion() {
    EXHAUSTIONS.fetch_add(1, Ordering::SeqCst);
}

/// How many lazy DFAs of this process have run into a limit so far.
pub fn exhaustions() -> usize {
    EXHAUSTIONS.load(Ordering::SeqCst)
}

/// What is known of one state once it is made.
#[derive(Debug)]
struct Row {
    /// By byte class.
    trans: Box<[u32]>,
    accepting: bool,
    /// UTF-8 continuation bytes still owed (0 at a character boundary).
    pending: u8,
    /// The only byte a non-accepting state can take, if there is one.
    forced: u16,
}

/// The most classes an expansion sorts as a list ([`LazyDfa::expand`]):
/// more are put in order through a bitset.
const SORTED_TOUCHED: usize = 16;

/// The part that makes states, one thread at a time.
#[derive(Debug)]
struct Builder {
    /// The NFA states of each DFA state (0 is the dead state's, empty).
    sets: SetTable,
    /// UTF-8 bytes owed in each DFA state.
    pending: Vec<u8>,
    /// Heap bytes of the sets and rows made so far.
    bytes: usize,
    /// Heap bytes of the sets alone: the work of making them.
    set_bytes: usize,
    /// The limit that stopped the making of a state, once one has.
    stopped_by: Option<Stop>,
    /// Closure scratch: NFA states met in this closure (by generation).
    mark: Vec<u32>,
    /// [`LazyDfa::language_key`]'s scratch: the number of each NFA state
    /// met (those `mark` holds at the generation).
    number: Vec<u32>,
    generation: u32,
    stack: Vec<u32>,
    /// Expansion scratch: the NFA states each byte class leads to (all
    /// empty between expansions).
    seeds: Vec<Vec<u32>>,
    /// Expansion scratch: the classes given seeds.
    touched: Vec<u8>,
    /// Expansion scratch: each distinct seed set's first class, its owed
    /// bytes and its state.
    made: Vec<(usize, u8, u32)>,
    /// Closure scratch: the set it found.
    out: Vec<u32>,
    /// Expansion scratch: the set of the state expanded.
    set: Vec<u32>,
    /// Whether the text of one NFA state (the second) is all the first's
    /// can read, by pair, as far as [`LazyDfa::includes`] could tell.
    includes: hashbrown::HashMap<(u32, u32), bool>,
    /// Pairs of states [`LazyDfa::includes`] may still look at, for this
    /// automaton: past them, sets are kept whole.
    inclusion_budget: usize,
    /// [`LazyDfa::shortest`] of the states asked about.
    shortest: hashbrown::HashMap<u32, Option<u32>>,
    /// [`LazyDfa::includes`]'s scratch.
    walk_room: WalkRoom,
    /// [`LazyDfa::first_classes`] of the states [`LazyDfa::prune`] met.
    first: hashbrown::HashMap<u32, [u64; 4]>,
    /// Pairs of threads asked about, and how many were taken in.
    inclusion_asked: u32,
    inclusion_yes: u32,
}

impl Builder {
    /// A generation of `mark` no NFA state holds yet: every state is
    /// unmarked for it.
    fn next_generation(&mut self) -> u32 {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.mark.fill(0);
            self.generation = 1;
        }
        self.generation
    }
}

/// What [`LazyDfa::includes`] reads a pair's bytes into, kept between
/// walks: by byte class, where the state goes and where the set goes (the
/// classes the state reads, `touched`), and the first class of each
/// distinct pair of targets (`steps`: most of a loop's classes lead where
/// another did).
#[derive(Debug, Default)]
struct WalkRoom {
    to_t: Vec<Vec<u32>>,
    to_set: Vec<Vec<u32>>,
    touched: Vec<usize>,
    steps: Vec<usize>,
}

/// A limit of [`LazyDfa`] that stopped the making of a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `max_dfa_states` states made.
    States,
    /// `dfa_size_limit` heap bytes of sets and rows.
    Bytes,
    /// [`LazyDfa::limit_set_bytes`] heap bytes of sets.
    SetBytes,
}

/// Fewest byte classes a loop's state reads for [`LazyDfa::prune`] to ask
/// whether it takes in the others of its set.
const WIDE_LOOP: u32 = 8;

/// Most NFA states in a set that [`LazyDfa::prune`] looks into (a search's
/// set after its match holds one thread a character of the partial match:
/// 26 for a run of 24 hex digits).
const PRUNED_SET: usize = 64;

/// Pairs of NFA states and sets [`LazyDfa::includes`] looks at for one
/// question (most answer at the first byte), and for one automaton.
const INCLUSION_PAIRS: usize = 128;
const INCLUSION_BUDGET: usize = 1 << 14;

/// Walks [`LazyDfa::prune`] takes for an automaton before it looks at how
/// many were answered yes (fewer than one in four: it asks no more).
const INCLUSION_TRIAL: u32 = 8;

/// The kinds of NFA state in a [`LazyDfa::language_key`] (above any
/// count or byte range written there).
const KEY_BYTES: u32 = 1 << 31;
const KEY_UNION: u32 = KEY_BYTES + 1;
const KEY_MATCH: u32 = KEY_BYTES + 2;
const KEY_RUN: u32 = KEY_BYTES + 3;

/// Most NFA states [`LazyDfa::shortest`] meets.
const SHORTEST_STATES: usize = 256;

/// The states of a lazily built automaton, each a set (or tuple) of ids,
/// numbered in the order they were made, each kept once and found by
/// [`set_hash`]. Id 0 is the dead state's, an empty set found by no search.
pub(crate) struct SetTable {
    sets: Vec<Box<[u32]>>,
    /// The id of each set but the dead state's (the sets are in `sets`,
    /// which the table rehashes from as it grows).
    ids: HashTable<u32>,
}

impl SetTable {
    pub(crate) fn new() -> SetTable {
        SetTable {
            sets: vec![Box::new([])],
            ids: HashTable::new(),
        }
    }

    /// States made, the dead one included.
    pub(crate) fn len(&self) -> usize {
        self.sets.len()
    }

    /// The id of `set`, or the hash to [`SetTable::push`] it with.
    pub(crate) fn find(&self, set: &[u32]) -> Result<u32, u64> {
        let hash = set_hash(set);
        match self.ids.find(hash, |&id| *self.sets[id as usize] == *set) {
            Some(&id) => Ok(id),
            None => Err(hash),
        }
    }

    /// Makes `set` (not made yet, `hash` from [`SetTable::find`]) the next
    /// state; its id.
    pub(crate) fn push(&mut self, hash: u64, set: &[u32]) -> u32 {
        let id = self.sets.len() as u32;
        self.sets.push(set.into());
        let sets = &self.sets;
        self.ids
            .insert_unique(hash, id, |&id| set_hash(&sets[id as usize]));
        id
    }
}

impl std::ops::Index<usize> for SetTable {
    type Output = [u32];
    fn index(&self, id: usize) -> &[u32] {
        &self.sets[id]
    }
}

impl std::fmt::Debug for SetTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetTable")
            .field("states", &self.len())
            .finish()
    }
}

/// The hash a set of NFA states is found by ([`Mix`] over its ids).
fn set_hash(set: &[u32]) -> u64 {
    let mut h = Mix::new(set.len() as u64);
    set.iter().for_each(|&q| h.add(u64::from(q)));
    h.finish()
}

/// A run of one set of ASCII bytes that a state reads up to `left` times
/// in a row, going on as it did on every other byte: a bounded repetition
/// of a class, as JSON's whitespace `[ \t\n\r]{0,20}` between tokens
/// (see [`LazyDfa::chain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    /// The bytes of the run, bit `b` of `bytes[b / 64]`.
    pub bytes: [u64; 2],
    /// How many of them the state can still read: after `j < left` of
    /// them the automaton is in a state that takes every other byte to
    /// where this one does, accepts alike, and is on a character boundary
    /// alike; after `left`, it is in `after`.
    pub left: u32,
    /// The state after the whole run (a state of the automaton, made).
    pub after: u32,
}

impl Chain {
    /// Whether `byte` is one of the run's.
    #[inline]
    pub fn has(&self, byte: u8) -> bool {
        byte < 0x80 && self.bytes[byte as usize / 64] >> (byte % 64) & 1 == 1
    }
}

/// A DFA built as it is walked.
pub struct LazyDfa {
    nfa: Nfa,
    /// NFA states from which a match can be reached.
    live: Vec<bool>,
    classes: [u8; 256],
    /// One byte of each class, and how many bytes the class holds.
    reps: Vec<u8>,
    class_size: Vec<u16>,
    rows: Grow<Row>,
    /// Whether each state accepts, known when it is made: a text step asks
    /// it of every successor of a state, most of which no walk expands.
    accepting: Grow<bool>,
    /// The run of each state asked about ([`LazyDfa::chain`]).
    chains: Grow<Option<Chain>>,
    builder: Mutex<Builder>,
    states: AtomicUsize,
    max_states: usize,
    max_bytes: usize,
    max_set_bytes: usize,
    exhausted: AtomicBool,
}

impl std::fmt::Debug for LazyDfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyDfa")
            .field("nfa_states", &self.nfa.len())
            .field("states", &self.num_states())
            .finish()
    }
}

/// A part of a lazily built DFA's regex ([`LazyDfa::from_sources`]).
#[derive(Debug, Clone, Copy)]
pub enum Part<'a> {
    /// A syntax tree (no look-around, some text matching it).
    Tree(&'a Hir),
    /// A quoted object key that is none of some names, built from them
    /// (never empty).
    OtherKeys(&'a OtherKeys),
}

impl LazyDfa {
    /// Whether `hir` can be built lazily: no look-around.
    pub fn takes(hir: &Hir) -> bool {
        hir.properties().look_set().is_empty()
    }

    /// What [`LazyDfa::from_hir`] refuses that `hir`'s properties tell
    /// without building anything: look-around, and a regex that matches
    /// nothing. What is left to fail is the NFA's size.
    pub fn check_tree(hir: &Hir) -> Result<(), GrammarError> {
        if !LazyDfa::takes(hir) {
            return Err(GrammarError::Unsupported {
                location: Location::None,
                what: "look-around in a lazily built DFA".into(),
            });
        }
        // A length means some text matches; no length may still (an
        // alternation with one branch of nothing has none): then look.
        if hir.properties().minimum_len().is_none() && matches_nothing(hir) {
            return Err(no_match());
        }
        Ok(())
    }

    /// Whether `hir` matches the empty text (its DFA's start accepts),
    /// told without building it.
    pub fn matches_empty(hir: &Hir) -> bool {
        match hir.properties().minimum_len() {
            Some(len) => len == 0,
            // No length: some part matches nothing, maybe not all.
            None => empty_matches(hir),
        }
    }

    /// Parses `pattern` (whole-output match, the regex-syntax dialect) and
    /// makes its NFA.
    pub fn build(pattern: &str, limits: &DfaLimits) -> Result<LazyDfa, GrammarError> {
        LazyDfa::from_hir(&crate::dfa::parse(pattern)?, limits)
    }

    /// The lazy DFA of `hir`: its NFA now (within `nfa_size_limit`), its
    /// states as they are reached, at most `max_dfa_states` of them and
    /// `dfa_size_limit` heap bytes.
    pub fn from_hir(hir: &Hir, limits: &DfaLimits) -> Result<LazyDfa, GrammarError> {
        LazyDfa::from_parts(&[hir], limits)
    }

    /// [`LazyDfa::from_hir`] of the concatenation of `parts`, without a
    /// tree of it built (a copy of each part): parts parsed once and
    /// shared by several lexemes.
    pub fn from_parts(parts: &[&Hir], limits: &DfaLimits) -> Result<LazyDfa, GrammarError> {
        let parts: Vec<Part<'_>> = parts.iter().map(|&hir| Part::Tree(hir)).collect();
        LazyDfa::from_sources(&parts, limits)
    }

    /// [`LazyDfa::from_parts`] of parts some of which are no syntax tree:
    /// an object's other keys built from the names ([`Part::OtherKeys`]).
    pub fn from_sources(parts: &[Part<'_>], limits: &DfaLimits) -> Result<LazyDfa, GrammarError> {
        for part in parts {
            if let Part::Tree(hir) = part {
                LazyDfa::check_tree(hir)?;
            }
        }
        let nfa = Nfa::of_parts(parts, limits.nfa_size_limit)?;
        let live = co_reachable(&nfa);
        let classes = nfa.byte_classes();
        let mut reps = Vec::new();
        let mut class_size = Vec::new();
        for b in 0..=255u8 {
            let c = classes[b as usize];
            if c as usize == reps.len() {
                reps.push(b);
                class_size.push(0);
            }
            class_size[c as usize] += 1;
        }
        let n = nfa.len();
        let dfa = LazyDfa {
            nfa,
            live,
            classes,
            reps,
            class_size,
            rows: Grow::default(),
            accepting: Grow::default(),
            chains: Grow::default(),
            builder: Mutex::new(Builder {
                sets: SetTable::new(),
                pending: vec![0],
                bytes: 0,
                set_bytes: 0,
                stopped_by: None,
                mark: vec![0; n],
                number: Vec::new(),
                generation: 0,
                stack: Vec::new(),
                seeds: Vec::new(),
                touched: Vec::new(),
                made: Vec::new(),
                out: Vec::new(),
                set: Vec::new(),
                includes: hashbrown::HashMap::new(),
                inclusion_budget: INCLUSION_BUDGET,
                shortest: hashbrown::HashMap::new(),
                walk_room: WalkRoom::default(),
                first: hashbrown::HashMap::new(),
                inclusion_asked: 0,
                inclusion_yes: 0,
            }),
            states: AtomicUsize::new(1),
            max_states: limits.max_dfa_states,
            max_bytes: limits.dfa_size_limit,
            max_set_bytes: usize::MAX,
            exhausted: AtomicBool::new(false),
        };
        let _ = dfa.accepting.get_or_init(DEAD, || false);
        let _ = dfa.rows.get_or_init(DEAD, || Row {
            trans: vec![DEAD; dfa.reps.len()].into_boxed_slice(),
            accepting: false,
            pending: 0,
            forced: NOT_FORCED,
        });
        {
            let mut b = dfa.builder.lock().unwrap_or_else(|e| e.into_inner());
            let start = dfa.nfa.start();
            dfa.closure(&mut b, &[start]);
            if b.out.is_empty() {
                return Err(no_match());
            }
            let id = dfa.intern_out(&mut b, 0);
            debug_assert_eq!(id, LazyDfa::START);
        }
        Ok(dfa)
    }

    /// The start state of every lazy DFA.
    pub const START: u32 = 1;

    /// The state at the start of the output ([`LazyDfa::START`]).
    #[inline]
    pub fn start(&self) -> u32 {
        LazyDfa::START
    }

    #[inline(always)]
    fn row(&self, state: u32) -> &Row {
        match self.rows.get(state) {
            Some(row) => row,
            None => self.made_row(state),
        }
    }

    /// The row of a state no walk has reached yet, made now: kept out of
    /// line, so that the look-ups inlined into every walk stay small.
    #[cold]
    #[inline(never)]
    fn made_row(&self, state: u32) -> &Row {
        self.rows.get_or_init(state, || self.expand(state))
    }

    /// The transitions of `state`, one per byte class (the state made
    /// now if no walk has reached it yet).
    #[inline]
    pub fn row_of(&self, state: u32) -> &[u32] {
        &self.row(state).trans
    }

    /// The byte class of every byte.
    pub fn classes(&self) -> &[u8; 256] {
        &self.classes
    }

    /// The state after `byte` (dead when the byte cannot come next).
    #[inline]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.row(state).trans[self.classes[byte as usize] as usize]
    }

    /// May the output end in `state`?
    #[inline]
    pub fn is_accepting(&self, state: u32) -> bool {
        match self.accepting.get(state) {
            Some(&a) => a,
            None => self.row(state).accepting,
        }
    }

    /// The one byte that must come next in `state` (a non-accepting state
    /// with a single live byte), if any.
    #[inline]
    pub fn forced_byte(&self, state: u32) -> Option<u8> {
        let f = self.row(state).forced;
        (f != NOT_FORCED).then_some(f as u8)
    }

    /// Whether `state` sits on a UTF-8 character boundary.
    #[inline]
    pub fn at_char_boundary(&self, state: u32) -> bool {
        self.row(state).pending == 0
    }

    /// One character of text from `state` (see [`crate::dfa::text_step`]).
    pub fn text_step(&self, state: u32) -> Option<TextStep> {
        crate::dfa::text_step(self, state)
    }

    /// Bytes that lead from `state` to a live state.
    pub fn live_bytes(&self, state: u32) -> Vec<u8> {
        (0..=255u8)
            .filter(|&b| self.next(state, b) != DEAD)
            .collect()
    }

    /// States made so far, the dead one included.
    pub fn num_states(&self) -> usize {
        self.states.load(Ordering::Relaxed)
    }

    /// The NFA's states (what compiling cost).
    pub fn nfa_states(&self) -> usize {
        self.nfa.len()
    }

    /// Whether a limit stopped the making of a state: some transition that
    /// should lead somewhere was made dead, and the language is narrower
    /// than the regex's from there on.
    pub fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::SeqCst)
    }

    /// The error that [`LazyDfa::exhausted`] stands for.
    pub fn exhausted_error(&self) -> GrammarError {
        let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        match b.stopped_by {
            Some(Stop::States) => GrammarError::LimitExceeded {
                what: format!("a lexeme's lazily built DFA ({} states)", b.sets.len()),
                limit: self.max_states,
                knob: "max_dfa_states".into(),
            },
            Some(Stop::SetBytes) => GrammarError::LimitExceeded {
                what: format!(
                    "a lexeme's lazily built DFA ({} heap bytes of NFA state sets)",
                    b.set_bytes
                ),
                limit: self.max_set_bytes,
                knob: "determinize_size_limit".into(),
            },
            _ => GrammarError::LimitExceeded {
                what: format!("a lexeme's lazily built DFA ({} heap bytes)", b.bytes),
                limit: self.max_bytes,
                knob: "dfa_size_limit".into(),
            },
        }
    }

    /// The limit that stopped the making of a state, if one has, and what
    /// it had counted: states, or heap bytes.
    pub fn stopped_by(&self) -> Option<(Stop, usize)> {
        let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        b.stopped_by.map(|stop| {
            let count = match stop {
                Stop::States => b.sets.len(),
                Stop::Bytes => b.bytes,
                Stop::SetBytes => b.set_bytes,
            };
            (stop, count)
        })
    }

    /// Bounds the heap bytes of the NFA state sets behind the states made
    /// (by default only `dfa_size_limit` bounds them, with the rows): the
    /// sets' total size is the work of making them.
    pub fn limit_set_bytes(mut self, bytes: usize) -> LazyDfa {
        self.max_set_bytes = bytes;
        self
    }

    /// Heap bytes held (the NFA, the states made, their sets).
    pub fn memory_bytes(&self) -> usize {
        let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        self.nfa.memory_usage() + b.bytes + self.live.len() + b.mark.len() * 4
    }

    /// Makes the row of `state`: its successors by class (made as sets,
    /// not yet expanded), whether it accepts, its forced byte.
    fn expand(&self, state: u32) -> Row {
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut *b;
        // Copied into scratch (left in place: the table rehashes from its
        // sets as it grows).
        let mut set = std::mem::take(&mut b.set);
        set.clear();
        set.extend_from_slice(&b.sets[state as usize]);
        let pending = b.pending[state as usize];
        let accepting = set.iter().any(|&q| self.nfa.is_match(q));
        // The seeds of every class in one pass over the set: each NFA
        // state's byte ranges cover whole classes (the classes are cut at
        // every range's ends), so a range is the classes from its first
        // byte's to its last byte's. Each class's seeds come in the set's
        // order, as stepping class by class would give them.
        let n = self.reps.len();
        // Left empty by every expansion (only the classes it touched are
        // cleared: a key's state touches one class of a hundred).
        let mut seeds = std::mem::take(&mut b.seeds);
        if seeds.len() < n {
            seeds.resize_with(n, Vec::new);
        }
        let mut touched = std::mem::take(&mut b.touched);
        touched.clear();
        let add = |seeds: &mut [Vec<u32>], touched: &mut Vec<u8>, start: u8, end: u8, to: u32| {
            let (first, last) = (self.classes[start as usize], self.classes[end as usize]);
            debug_assert!(
                self.reps[first as usize] == start
                    && self
                        .reps
                        .get(last as usize + 1)
                        .is_none_or(|&r| r as usize == end as usize + 1),
                "a byte range that splits a class"
            );
            for c in first..=last {
                let s = &mut seeds[c as usize];
                if s.is_empty() {
                    touched.push(c);
                }
                s.push(to);
            }
        };
        for &q in set.iter() {
            if let Some((ranges, run_to)) = self.reading(q) {
                for t in ranges {
                    add(
                        &mut seeds,
                        &mut touched,
                        t.start,
                        t.end,
                        run_to.unwrap_or(t.next),
                    );
                }
            }
        }
        // In class order, as a pass over every class would make them: read
        // off the classes' bits (sorting a wide state's hundred classes
        // was a sixth of its expansion).
        if touched.len() > SORTED_TOUCHED {
            let mut bits = [0u64; 4];
            for &c in &touched {
                bits[c as usize / 64] |= 1 << (c % 64);
            }
            touched.clear();
            for (w, &word) in bits.iter().enumerate() {
                let mut x = word;
                while x != 0 {
                    touched.push((w * 64) as u8 + x.trailing_zeros() as u8);
                    x &= x - 1;
                }
            }
        } else {
            touched.sort_unstable();
        }
        let mut trans = vec![DEAD; n];
        // Most classes of a wide state (a string body) lead to one of a few
        // states: each distinct seed set is closed and interned once
        // (`made`: the first class of each, its owed bytes, its state).
        let mut made = std::mem::take(&mut b.made);
        made.clear();
        for &c in &touched {
            let c = c as usize;
            let byte = self.reps[c];
            let owed = match byte {
                0x80..=0xBF => pending.saturating_sub(1),
                0xC0..=0xDF => 1,
                0xE0..=0xEF => 2,
                0xF0..=0xFF => 3,
                _ => 0,
            };
            let next = if let Some(&(_, _, id)) = made
                .iter()
                .find(|&&(first, o, _)| o == owed && seeds[first] == seeds[c])
            {
                id
            } else {
                self.closure(b, &seeds[c]);
                let id = if b.out.is_empty() {
                    DEAD
                } else {
                    self.intern_out(b, owed)
                };
                made.push((c, owed, id));
                id
            };
            trans[c] = next;
        }
        let mut forced = NOT_FORCED;
        if !accepting {
            // Only a touched class is live.
            let mut live = touched
                .iter()
                .map(|&c| c as usize)
                .filter(|&c| trans[c] != DEAD);
            if let (Some(c), None) = (live.next(), live.next()) {
                if self.class_size[c] == 1 {
                    forced = self.reps[c] as u16;
                }
            }
        }
        for &c in &touched {
            seeds[c as usize].clear();
        }
        b.seeds = seeds;
        b.touched = touched;
        b.made = made;
        b.set = set;
        b.bytes += trans.len() * 4 + std::mem::size_of::<Row>();
        Row {
            trans: trans.into_boxed_slice(),
            accepting,
            pending,
            forced,
        }
    }

    /// A key of the texts `state` reads from here on, the same for two
    /// states of any two automata whose NFA states, and those they lead
    /// to, are alike: each met in the order a walk from the state's own
    /// meets them (its set's states first, in the set's order) and written
    /// as its kind with its byte ranges and the numbers of the states they
    /// lead to, after the UTF-8 bytes the state owes. States with one key
    /// read the same texts (the converse need not hold). Fused lexemes of a
    /// code grammar that go on alike past their first bytes (a keyword, a
    /// space, then a name) reach states with one key from different
    /// lexemes. `None` past `max` NFA states.
    pub fn language_key(&self, state: u32, max: usize) -> Option<Vec<u32>> {
        if state == DEAD {
            return None;
        }
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut *b;
        if b.sets[state as usize].len() > max {
            return None;
        }
        let g = b.next_generation();
        b.number.resize(b.mark.len(), 0);
        let set = &b.sets[state as usize];
        // The states met, by number (the closure's stack, lent).
        let mut order = std::mem::take(&mut b.stack);
        order.clear();
        let mut key = vec![u32::from(b.pending[state as usize]), set.len() as u32];
        let (mark, number) = (&mut b.mark, &mut b.number);
        let mut numbered = |q: u32, order: &mut Vec<u32>| {
            if mark[q as usize] != g {
                mark[q as usize] = g;
                number[q as usize] = order.len() as u32;
                order.push(q);
            }
            number[q as usize]
        };
        for &q in set.iter() {
            numbered(q, &mut order);
        }
        let ranges = |ranges: &[Transition], key: &mut Vec<u32>| {
            key.push(ranges.len() as u32);
            key.extend(
                ranges
                    .iter()
                    .map(|t| u32::from(t.start) << 8 | u32::from(t.end)),
            );
        };
        let mut k = 0;
        while let Some(&q) = order.get(k) {
            k += 1;
            match self.nfa.state(q) {
                State::Bytes(list) => {
                    key.push(KEY_BYTES);
                    ranges(list, &mut key);
                    for t in list {
                        let n = numbered(t.next, &mut order);
                        key.push(n);
                    }
                }
                State::Union(alternates) => {
                    key.push(KEY_UNION);
                    key.push(alternates.len() as u32);
                    for &a in alternates {
                        let n = numbered(a, &mut order);
                        key.push(n);
                    }
                }
                State::Match => key.push(KEY_MATCH),
                State::Run {
                    ranges: list,
                    to,
                    exit,
                    left,
                } => {
                    key.push(KEY_RUN);
                    ranges(list, &mut key);
                    let n = numbered(to, &mut order);
                    key.push(n);
                    let n = numbered(exit, &mut order);
                    key.extend([n, left]);
                }
            }
            if order.len() > max {
                b.stack = order;
                return None;
            }
        }
        b.stack = order;
        Some(key)
    }

    /// The run of one class of bytes that `state` is partway through, if
    /// it is one a walk can go down without making its states: `state`'s
    /// NFA states are copies of bounded repetitions of one ASCII class
    /// (`X` in `X{0,n}`, each the copy with `left` more to go: one, or one
    /// before each of an object's keys) and the closure of what follows
    /// the repetitions, none of which reads a byte of the class. After `j`
    /// bytes of the class its states are the `j`-th copies after these
    /// and the same closure: every other byte goes where it
    /// goes from `state`, and it accepts as `state` does. So does a DFA
    /// made of it, state by state ([`Chain`]).
    ///
    /// `None` for a state of no such run, or of one with fewer than two
    /// bytes left (nothing to gain), or past the limits.
    pub fn chain(&self, state: u32) -> Option<Chain> {
        if let Some(&known) = self.chains.get(state) {
            return known;
        }
        *self.chains.get_or_init(state, || self.find_chain(state))
    }

    fn find_chain(&self, state: u32) -> Option<Chain> {
        if state == DEAD {
            return None;
        }
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut *b;
        if b.pending[state as usize] != 0 {
            return None;
        }
        let set = &b.sets[state as usize];
        // Copies of one class with as many bytes left, each before its own
        // exit (the whitespace before each of an object's keys): each
        // byte of the class moves every one of them to its next copy, and
        // the rest of the set, their exits' closure, stays.
        let mut links: Vec<(u32, u32)> = Vec::new();
        let mut run = None;
        for &q in set {
            if let Some((bytes, left, exit)) = self.link(q).filter(|l| l.1 >= 2) {
                if run.is_some_and(|r| r != (bytes, left)) {
                    return None;
                }
                run = Some((bytes, left));
                links.push((q, exit));
            }
        }
        let (bytes, left) = run?;
        let rest: Vec<u32> = set
            .iter()
            .copied()
            .filter(|&r| !links.iter().any(|&(q, _)| q == r))
            .collect();
        let reads_the_class = |r: u32| match self.nfa.state(r) {
            State::Bytes(ranges) | State::Run { ranges, .. } => ranges.iter().any(|t| {
                (t.start..=t.end).any(|c| c < 0x80 && bytes[c as usize / 64] >> (c % 64) & 1 == 1)
            }),
            _ => false,
        };
        if rest.is_empty() || rest.iter().any(|&r| reads_the_class(r)) {
            return None;
        }
        let exits: Vec<u32> = links.iter().map(|&(_, exit)| exit).collect();
        self.closure(b, &exits);
        if b.out != rest {
            return None;
        }
        let after = self.intern_out(b, 0);
        (after != DEAD).then_some(Chain { bytes, left, after })
    }

    /// If NFA state `q` is a copy of `X` in `X{0,n}` with `X` a class of
    /// ASCII bytes ([`State::Run`]): the class, how many bytes of it may
    /// come from `q` on, and the exit.
    fn link(&self, q: u32) -> Option<([u64; 2], u32, u32)> {
        let State::Run {
            ranges, exit, left, ..
        } = self.nfa.state(q)
        else {
            return None;
        };
        let mut bytes = [0u64; 2];
        for t in ranges {
            if t.end >= 0x80 {
                return None;
            }
            for c in t.start..=t.end {
                bytes[c as usize / 64] |= 1 << (c % 64);
            }
        }
        Some((bytes, left, exit))
    }

    /// The id of the set in `b.out` (the last closure), made now if it is
    /// new (dead past the limits).
    fn intern_out(&self, b: &mut Builder, pending: u8) -> u32 {
        let hash = match b.sets.find(&b.out) {
            Ok(id) => return id,
            Err(hash) => hash,
        };
        let bytes = b.out.len() * 8 + 48;
        let stop = if b.sets.len() >= self.max_states {
            Some(Stop::States)
        } else if b.bytes + bytes > self.max_bytes {
            Some(Stop::Bytes)
        } else if b.set_bytes + bytes > self.max_set_bytes {
            Some(Stop::SetBytes)
        } else {
            None
        };
        if let Some(stop) = stop {
            b.stopped_by.get_or_insert(stop);
            if !self.exhausted.swap(true, Ordering::SeqCst) {
                EXHAUSTIONS.fetch_add(1, Ordering::SeqCst);
            }
            return DEAD;
        }
        let accepting = b.out.iter().any(|&q| self.nfa.is_match(q));
        b.bytes += bytes;
        b.set_bytes += bytes;
        let id = b.sets.push(hash, &b.out);
        let _ = self.accepting.get_or_init(id, || accepting);
        b.pending.push(pending);
        self.states.store(b.sets.len(), Ordering::Relaxed);
        id
    }

    /// The states an NFA in `seeds` may be in before its next byte, into
    /// `b.out`: the ones that read a byte or match, from which a match can
    /// be reached, sorted (a DFA state's key).
    fn closure(&self, b: &mut Builder, seeds: &[u32]) {
        let g = b.next_generation();
        b.out.clear();
        let mut stack = std::mem::take(&mut b.stack);
        stack.clear();
        stack.extend(seeds.iter().rev());
        while let Some(q) = stack.pop() {
            if b.mark[q as usize] == g || !self.live[q as usize] {
                continue;
            }
            b.mark[q as usize] = g;
            self.close_over(q, &mut b.out, &mut stack);
        }
        b.stack = stack;
        b.out.sort_unstable();
        if b.inclusion_budget > 0
            && (2..=PRUNED_SET).contains(&b.out.len())
            && b.out.iter().any(|&q| self.nfa.in_loop(q))
        {
            self.prune(b);
        }
    }

    /// Takes out of `b.out` the threads whose text another thread's takes
    /// in: the set reads the same texts without them. After a search's
    /// match (`.*[0-9a-f]{24}.*` in a string) the set holds the search's
    /// `.*` after the match and a thread for every partial match still
    /// going on, each a state of its own for every count of hex digits
    /// read (the lazy DFA is not minimized); all of them are the one
    /// state of the `.*` that reads everything, and a walk takes whole the
    /// subtrees its text step covers. Only a thread on a loop is asked to
    /// take in others (the ones that can); the answer for each pair of
    /// NFA states is kept.
    fn prune(&self, b: &mut Builder) {
        let n = b.out.len();
        let mut gone = [false; PRUNED_SET];
        // The classes each thread reads (kept by state): a byte `t` reads
        // and `q` does not answers no (most pairs). Only a loop of many
        // classes is asked to take in others: a search's `.*` reads every
        // character; a loop of digits or of an array's items takes in
        // little, and asking would cost most sets something.
        let mut first = [[0u64; 4]; PRUNED_SET];
        let mut wide = [false; PRUNED_SET];
        for (k, &q) in b.out.iter().enumerate() {
            let f = *b.first.entry(q).or_insert_with(|| self.first_classes(q));
            first[k] = f;
            wide[k] =
                self.nfa.in_loop(q) && f.iter().map(|w| w.count_ones()).sum::<u32>() >= WIDE_LOOP;
        }
        if !wide[..n].contains(&true) {
            return;
        }
        for i in 0..n {
            let q = b.out[i];
            if gone[i] || !wide[i] {
                continue;
            }
            for j in 0..n {
                let t = b.out[j];
                if j == i
                    || gone[j]
                    || self.nfa.is_match(t)
                    || (0..4).any(|w| first[j][w] & !first[i][w] != 0)
                {
                    continue;
                }
                let known = b.includes.get(&(q, t)).copied();
                let takes = known.unwrap_or_else(|| {
                    if b.inclusion_budget == 0 {
                        return false;
                    }
                    // Most pairs answer at their first bytes; a longer
                    // walk is taken only for a state whose shortest text is
                    // no shorter than `q`'s (a partial match's rest is,
                    // against the search's `.*` before the match).
                    let quick = self.includes(
                        (q, t),
                        &b.includes,
                        (&mut b.inclusion_budget, &mut b.walk_room),
                        4,
                    );
                    let answer = quick.unwrap_or_else(|| {
                        let shorter = match (self.shortest(b, t), self.shortest(b, q)) {
                            (Some(a), Some(b)) => a < b,
                            _ => false,
                        };
                        if shorter {
                            return false;
                        }
                        let long = (q, t);
                        let answer = self.includes(
                            long,
                            &b.includes,
                            (&mut b.inclusion_budget, &mut b.walk_room),
                            INCLUSION_PAIRS,
                        ) == Some(true);
                        // Where few threads are taken in (a word count's
                        // copies, each a state of its own), the walks cost
                        // more than the states they save: past a few long
                        // walks with few yeses, no more are asked.
                        b.inclusion_asked += 1;
                        b.inclusion_yes += u32::from(answer);
                        if b.inclusion_asked >= INCLUSION_TRIAL
                            && b.inclusion_yes * 4 < b.inclusion_asked
                        {
                            b.inclusion_budget = 0;
                        }
                        answer
                    });
                    b.includes.insert((q, t), answer);
                    answer
                });
                gone[j] = takes;
            }
        }
        let mut k = 0;
        b.out.retain(|_| {
            k += 1;
            !gone[k - 1]
        });
    }

    /// Whether every text NFA state `t` reads to a match, `q` reads to a
    /// match too (both closure members: byte, run or match states), told
    /// by walking pairs of a state `t` reaches and the set `q` reaches by
    /// the same bytes: a pair whose set holds the state is answered, a
    /// byte the state reads and the set does not, or a match the set does
    /// not reach, answers no. `None` past `limit` pairs (or `budget`,
    /// which it spends): a thread kept that could have gone costs states,
    /// never text.
    fn includes(
        &self,
        (q, t): (u32, u32),
        known: &hashbrown::HashMap<(u32, u32), bool>,
        (budget, room): (&mut usize, &mut WalkRoom),
        limit: usize,
    ) -> Option<bool> {
        // A state of the set known to take in the state's texts answers
        // for the pair (the partial matches of a search, asked about from
        // the longest: each answers for the one before).
        let answered = |m: u32, set: &[u32]| {
            set.binary_search(&m).is_ok() || set.iter().any(|&s| known.get(&(s, m)) == Some(&true))
        };
        let mut seen: hashbrown::HashSet<(u32, Rc<[u32]>)> = hashbrown::HashSet::new();
        let mut pending: Vec<(u32, Rc<[u32]>)> = vec![(t, Rc::from([q]))];
        // Closures asked for in this search, by their seeds.
        let mut closures: hashbrown::HashMap<Vec<u32>, Option<Rc<[u32]>>> =
            hashbrown::HashMap::new();
        // `seeds` sorted, without repeats.
        let mut close = |seeds: &[u32]| -> Option<Rc<[u32]>> {
            if let Some(known) = closures.get(seeds) {
                return known.clone();
            }
            let found: Option<Rc<[u32]>> = self.closed(seeds).map(Rc::from);
            closures.insert(seeds.to_vec(), found.clone());
            found
        };
        // What each class `t` reads leads to: from `t`, from the set (the
        // first class of each distinct pair of targets: most of a loop's
        // classes lead where another did).
        let WalkRoom {
            to_t,
            to_set,
            touched,
            steps,
        } = room;
        to_t.resize_with(self.reps.len(), Vec::new);
        to_set.resize_with(self.reps.len(), Vec::new);
        let mut pairs = 0;
        while let Some((t, set)) = pending.pop() {
            if answered(t, &set) {
                continue;
            }
            if pairs >= limit || *budget == 0 {
                return None;
            }
            pairs += 1;
            *budget -= 1;
            if self.nfa.is_match(t) {
                if !set.iter().any(|&s| self.nfa.is_match(s)) {
                    return Some(false);
                }
                continue;
            }
            let (ranges, run_to) = self.reading(t).expect("a closure holds no union");
            // By class, what `t` reads it into, then the set (only the
            // classes `t` reads); the last pair's (of this walk or the
            // last) cleared first.
            for &c in touched.iter() {
                to_t[c].clear();
                to_set[c].clear();
            }
            touched.clear();
            let target = |r: &Transition| run_to.unwrap_or(r.next);
            for r in ranges {
                let (first, last) = (self.classes[r.start as usize], self.classes[r.end as usize]);
                for (c, to) in to_t
                    .iter_mut()
                    .enumerate()
                    .take(last as usize + 1)
                    .skip(first as usize)
                {
                    if to.is_empty() {
                        touched.push(c);
                    }
                    to.push(target(r));
                }
            }
            for &s in set.iter() {
                let Some((ranges, run_to)) = self.reading(s) else {
                    continue;
                };
                for r in ranges {
                    let (first, last) =
                        (self.classes[r.start as usize], self.classes[r.end as usize]);
                    for c in first as usize..=last as usize {
                        if !to_t[c].is_empty() {
                            to_set[c].push(run_to.unwrap_or(r.next));
                        }
                    }
                }
            }
            // A pair is worth the classes it reads (a wide state's, a
            // hundred, cost as a dozen of a digit's).
            let cost = touched.len() / 8;
            pairs += cost;
            *budget = budget.saturating_sub(cost);
            // The first class of each distinct pair of targets.
            steps.clear();
            for &c in touched.iter() {
                to_t[c].sort_unstable();
                to_t[c].dedup();
                to_set[c].sort_unstable();
                to_set[c].dedup();
                if !steps
                    .iter()
                    .any(|&f| to_t[f] == to_t[c] && to_set[f] == to_set[c])
                {
                    steps.push(c);
                }
            }
            let mut answer = None;
            for &c in steps.iter() {
                let Some(t_after) = close(&to_t[c]) else {
                    answer = Some(false);
                    break;
                };
                if t_after.is_empty() {
                    continue;
                }
                let set_after = match close(&to_set[c]) {
                    Some(after) if !after.is_empty() => after,
                    _ => {
                        answer = Some(false);
                        break;
                    }
                };
                for &m in t_after.iter() {
                    if !answered(m, &set_after) && seen.insert((m, set_after.clone())) {
                        pending.push((m, set_after.clone()));
                    }
                }
            }
            if let Some(answer) = answer {
                return Some(answer);
            }
        }
        Some(true)
    }

    /// One state met by a closure: a state that reads or matches is a
    /// member (`out`); a union's alternates and a run's exit are followed
    /// (`stack`). What [`LazyDfa::closure`] and [`LazyDfa::closed`] share.
    #[inline]
    fn close_over(&self, q: u32, out: &mut Vec<u32>, stack: &mut Vec<u32>) {
        match self.nfa.state(q) {
            State::Bytes(_) | State::Match => out.push(q),
            State::Union(alternates) => stack.extend(alternates.iter().rev()),
            State::Run { exit, .. } => {
                out.push(q);
                stack.push(exit);
            }
        }
    }

    /// The ranges NFA state `q` reads and, for a run's copy, the one state
    /// all of them lead to (a range state's lead where each says); `None`
    /// for a union or the match.
    fn reading(&self, q: u32) -> Option<(&[Transition], Option<u32>)> {
        match self.nfa.state(q) {
            State::Bytes(ranges) => Some((ranges, None)),
            State::Run { ranges, to, .. } => Some((ranges, Some(to))),
            State::Union(_) | State::Match => None,
        }
    }

    /// The byte classes NFA state `q` (a closure member) reads, as bits.
    fn first_classes(&self, q: u32) -> [u64; 4] {
        let mut set = [0u64; 4];
        let Some((ranges, _)) = self.reading(q) else {
            return set;
        };
        for r in ranges {
            let (first, last) = (self.classes[r.start as usize], self.classes[r.end as usize]);
            for c in first as usize..=last as usize {
                set[c / 64] |= 1 << (c % 64);
            }
        }
        set
    }

    /// The length of the shortest text NFA state `q` reads to a match
    /// (kept by state), or `None` where the search meets more than
    /// [`SHORTEST_STATES`] states.
    fn shortest(&self, b: &mut Builder, q: u32) -> Option<u32> {
        if let Some(&known) = b.shortest.get(&q) {
            return known;
        }
        // Breadth first by length: empty moves at the same length, bytes
        // one longer.
        let mut met: hashbrown::HashSet<u32> = hashbrown::HashSet::new();
        let mut level = vec![q];
        let mut length = 0;
        let found = 'search: loop {
            let mut next = Vec::new();
            let mut i = 0;
            while i < level.len() {
                let s = level[i];
                i += 1;
                if !met.insert(s) {
                    continue;
                }
                if met.len() > SHORTEST_STATES {
                    break 'search None;
                }
                match self.nfa.state(s) {
                    State::Match => break 'search Some(length),
                    State::Union(alternates) => level.extend_from_slice(alternates),
                    State::Run { to, exit, .. } => {
                        level.push(exit);
                        next.push(to);
                    }
                    State::Bytes(ranges) => next.extend(ranges.iter().map(|t| t.next)),
                }
            }
            if next.is_empty() {
                break None;
            }
            level = next;
            length += 1;
        };
        b.shortest.insert(q, found);
        // Its states are what it cost (a pair of the inclusion's walk is
        // worth about a few dozen).
        b.inclusion_budget = b.inclusion_budget.saturating_sub(met.len() / 32);
        found
    }

    /// The live closure members of `seeds`, sorted (as [`LazyDfa::closure`]
    /// finds them, without its scratch, for a few states): `None` past
    /// [`PRUNED_SET`] states met.
    fn closed(&self, seeds: &[u32]) -> Option<Vec<u32>> {
        let mut out: Vec<u32> = Vec::new();
        let mut met: Vec<u32> = Vec::new();
        let mut stack: Vec<u32> = seeds.to_vec();
        while let Some(q) = stack.pop() {
            if met.contains(&q) || !self.live[q as usize] {
                continue;
            }
            if met.len() == PRUNED_SET {
                return None;
            }
            met.push(q);
            self.close_over(q, &mut out, &mut stack);
        }
        out.sort_unstable();
        Some(out)
    }
}

impl Automaton for LazyDfa {
    #[inline]
    fn start(&self) -> u32 {
        1
    }
    #[inline]
    fn next(&self, state: u32, byte: u8) -> u32 {
        LazyDfa::next(self, state, byte)
    }
    #[inline]
    fn is_accepting(&self, state: u32) -> bool {
        LazyDfa::is_accepting(self, state)
    }
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(self.classes())
    }
    fn row_by_class(&self, state: u32) -> Option<&[u32]> {
        Some(self.row_of(state))
    }
}

/// Whether the empty text matches `hir` (read from the tree).
fn empty_matches(hir: &Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(_) | HirKind::Class(_) => false,
        HirKind::Capture(c) => empty_matches(&c.sub),
        HirKind::Repetition(r) => r.min == 0 || empty_matches(&r.sub),
        HirKind::Concat(subs) => subs.iter().all(empty_matches),
        HirKind::Alternation(subs) => subs.iter().any(empty_matches),
    }
}

/// Whether no text at all matches `hir`.
fn matches_nothing(hir: &Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Look(_) => false,
        HirKind::Class(Class::Unicode(c)) => c.ranges().is_empty(),
        HirKind::Class(Class::Bytes(c)) => c.ranges().is_empty(),
        HirKind::Capture(c) => matches_nothing(&c.sub),
        HirKind::Repetition(r) => r.min > 0 && matches_nothing(&r.sub),
        HirKind::Concat(subs) => subs.iter().any(matches_nothing),
        HirKind::Alternation(subs) => subs.iter().all(matches_nothing),
    }
}

fn no_match() -> GrammarError {
    GrammarError::InvalidSpec("the regex matches no string at all".into())
}

/// Which NFA states can reach a match state.
fn co_reachable(nfa: &Nfa) -> Vec<bool> {
    // Without a state that fails (an empty class, a branch of nothing),
    // every path of a Thompson NFA goes on to its match: each fragment's
    // exit is wired into the next one and every loop has an exit. Only
    // then is every state live, and the search below is skipped (most
    // lexemes: a tenth of a median compile). Debug builds check the claim
    // on every NFA the tests make.
    let fails = |state: State<'_>| match state {
        State::Bytes(ranges) => ranges.is_empty(),
        State::Union(alternates) => alternates.is_empty(),
        State::Match | State::Run { .. } => false,
    };
    if !nfa.states().any(fails) {
        let live = vec![true; nfa.len()];
        debug_assert!(
            searched_co_reachable(nfa)
                .iter()
                .enumerate()
                .all(|(q, &l)| l || nfa.is_match(q as u32)),
            "a state of an NFA without a failing state that cannot reach its match"
        );
        return live;
    }
    searched_co_reachable(nfa)
}

/// [`co_reachable`] by a search backwards from the match states.
fn searched_co_reachable(nfa: &Nfa) -> Vec<bool> {
    let n = nfa.len();
    let each_edge = |mut edge: Box<dyn FnMut(usize, u32) + '_>| {
        for (q, state) in nfa.states().enumerate() {
            match state {
                State::Bytes(ranges) => ranges.iter().for_each(|t| edge(q, t.next)),
                State::Union(alternates) => alternates.iter().for_each(|&t| edge(q, t)),
                State::Run { to, exit, .. } => {
                    edge(q, to);
                    edge(q, exit);
                }
                State::Match => {}
            }
        }
    };
    // Edges into each state, as one array (counted, then filled).
    let mut start = vec![0u32; n + 1];
    each_edge(Box::new(|_, to| start[to as usize + 1] += 1));
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut from = vec![0u32; start[n] as usize];
    each_edge(Box::new(|q, to| {
        from[fill[to as usize] as usize] = q as u32;
        fill[to as usize] += 1;
    }));
    let mut live = vec![false; n];
    let mut stack: Vec<u32> = (0..n as u32).filter(|&q| nfa.is_match(q)).collect();
    for &q in &stack {
        live[q as usize] = true;
    }
    while let Some(q) = stack.pop() {
        for &p in &from[start[q as usize] as usize..start[q as usize + 1] as usize] {
            if !live[p as usize] {
                live[p as usize] = true;
                stack.push(p);
            }
        }
    }
    live
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ByteDfa;
    use crate::dfa::tests::limits;

    /// Walks `text` in both automata of `regex`, byte by byte: each byte
    /// refused by both or by neither, each state accepting alike.
    fn walks_alike(lazy: &LazyDfa, eager: &ByteDfa, text: &[u8], regex: &str) {
        let (mut l, mut e) = (lazy.start(), eager.start());
        for &byte in text {
            l = lazy.next(l, byte);
            e = eager.next(e, byte);
            assert_eq!(l == DEAD, e == DEAD, "{regex} on {text:?}");
            if l == DEAD {
                break;
            }
            assert_eq!(lazy.is_accepting(l), eager.is_accepting(e), "{regex}");
        }
    }

    /// Walks `text`; `None` when a byte is refused.
    pub(crate) fn walk(a: &impl Automaton, text: &[u8]) -> Option<u32> {
        let mut s = a.start();
        for &b in text {
            s = a.next(s, b);
            if s == DEAD {
                return None;
            }
        }
        Some(s)
    }

    /// States of two automata that go on alike past different first
    /// bytes have one [`LazyDfa::language_key`], and read the same texts;
    /// states that go on differently (another class, a bounded run of
    /// another length, another byte after the name) have different keys.
    #[test]
    fn states_that_read_the_same_texts_share_a_language_key() {
        let ws = r"([ \t\n]|/\*([^*]|\*+[^*/])*\*+/)*";
        let tail = format!("{ws}[a-z_][a-z0-9_]*{ws};");
        let key = |regex: &str, prefix: &str| {
            let dfa = LazyDfa::build(regex, &limits()).unwrap();
            let state = walk(&dfa, prefix.as_bytes()).expect("a prefix of the regex");
            let key = dfa
                .language_key(state, 256)
                .expect("a key within 256 states");
            (dfa, state, key)
        };
        let (a, sa, ka) = key(&format!("struct {tail}"), "struct ");
        let (b, sb, kb) = key(&format!("enum{tail}"), "enum");
        assert_eq!(ka, kb, "the same texts past `struct ` and `enum`");
        let texts: [&[u8]; 9] = [
            b"",
            b"x;",
            b"  name_1 ;",
            b"/* c */x/**/;",
            b"x",
            b"1x;",
            b"x y;",
            b"/* ",
            b"x ;;",
        ];
        for text in texts {
            let (x, y) = (walk_from(&a, sa, text), walk_from(&b, sb, text));
            assert_eq!(x.is_some(), y.is_some(), "{text:?}");
            if let (Some(x), Some(y)) = (x, y) {
                assert_eq!(a.is_accepting(x), b.is_accepting(y), "{text:?}");
            }
        }
        let others = [
            format!("union {ws}[a-z_][a-z0-9_]*{ws},"),
            format!("union {ws}[a-z][a-z0-9_]*{ws};"),
            format!("union {ws}[a-z_][a-z0-9_]{{0,7}}{ws};"),
        ];
        for other in &others {
            assert_ne!(key(other, "union ").2, ka, "{other}");
        }
        let (_, _, short) = key(&format!("union {ws}[a-z_][a-z0-9_]{{0,6}}{ws};"), "union ");
        let (_, _, long) = key(&format!("union {ws}[a-z_][a-z0-9_]{{0,7}}{ws};"), "union ");
        assert_ne!(short, long, "runs of different lengths");
        assert_eq!(
            LazyDfa::build(&tail, &limits()).unwrap().language_key(1, 4),
            None
        );
    }

    /// Walks `text` from `state`; `None` when a byte is refused.
    fn walk_from(a: &impl Automaton, mut s: u32, text: &[u8]) -> Option<u32> {
        for &b in text {
            s = a.next(s, b);
            if s == DEAD {
                return None;
            }
        }
        Some(s)
    }

    #[test]
    fn lazy_and_eager_dfas_agree_on_every_prefix() {
        let regexes = [
            r#""([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*""#,
            r"-?(0|[1-9][0-9]{0,15})(\.[0-9]+)?([eE][-+]?[0-9]+)?",
            r"(a|b)*a(a|b){3}",
            r"([ \t\n]|//[^\n]*\n|/\*([^*]|\*+[^*/])*\*+/)*",
            r"é{2,3}|中+x|😀?",
            // Dead ends: `b` cannot be followed by anything that matches.
            r"a+|b[^\x00-\x{10FFFF}]",
        ];
        let texts: [&[u8]; 14] = [
            b"",
            b"\"ab\\n\\u00e9\"",
            b"\"a",
            b"-12.5e+3",
            b"0123",
            b"abaab",
            b"aaaa",
            b"// x\n/* ** */ \t",
            b"/* *",
            "éé".as_bytes(),
            "ééé".as_bytes(),
            "中中x".as_bytes(),
            "😀".as_bytes(),
            b"b",
        ];
        for regex in regexes {
            let eager = ByteDfa::build(regex, &limits()).unwrap();
            let lazy = LazyDfa::build(regex, &limits()).unwrap();
            for text in texts {
                for end in 0..=text.len() {
                    let (e, l) = (walk(&eager, &text[..end]), walk(&lazy, &text[..end]));
                    assert_eq!(e.is_some(), l.is_some(), "{regex} on {:?}", &text[..end]);
                    if let (Some(e), Some(l)) = (e, l) {
                        assert_eq!(eager.is_accepting(e), lazy.is_accepting(l), "{regex}");
                        assert_eq!(eager.forced_byte(e), lazy.forced_byte(l), "{regex}");
                        assert_eq!(eager.at_char_boundary(e), lazy.at_char_boundary(l));
                        assert_eq!(eager.live_bytes(e), lazy.live_bytes(l), "{regex}");
                    }
                }
            }
            assert!(!lazy.exhausted());
        }
    }

    #[test]
    fn states_are_made_only_as_walked() {
        let lazy = LazyDfa::build(r"[a-z]{0,500}!", &limits()).unwrap();
        assert_eq!(lazy.num_states(), 2, "the dead state and the start");
        let end = walk(&lazy, b"abc!").unwrap();
        assert!(lazy.is_accepting(end));
        assert!(lazy.num_states() < 10, "{}", lazy.num_states());
    }

    /// A bounded run of a class (JSON's whitespace between tokens) is
    /// told from the state before it: every state partway through goes on
    /// as that state does on every other byte, accepts alike, and the run
    /// ends in the state it names. Loops and runs that another part of
    /// the state could also read are no runs.
    #[test]
    fn a_run_of_a_class_goes_on_as_its_first_state() {
        let ws = "[ \\t\\n\\r]";
        // The regex, the text before the run's state, the bytes left. In
        // the last, the state after `a` also ends the text (the loop may
        // stop): a byte of the run stops that, so the run starts a byte
        // later.
        for (regex, before, left) in [
            (format!("a{ws}{{0,20}}(?:b|c[ ]*)"), "a", 20),
            (format!("a{ws}{{0,5}}"), "a", 5),
            (format!("a(?:{ws}{{0,4}},{ws}{{0,3}}x)*"), "a ", 3),
            // One run before each of two texts, one of them optional (an
            // alternation would be factored into one run): both move on
            // together.
            (format!("a(?:{ws}{{0,6}}x)?{ws}{{0,6}}\"y"), "a", 6),
        ] {
            let dfa = LazyDfa::build(&regex, &limits()).unwrap();
            let first = walk(&dfa, before.as_bytes()).unwrap();
            let run = dfa.chain(first).unwrap_or_else(|| panic!("{regex}: a run"));
            assert_eq!(run.left, left, "{regex}");
            assert!(run.has(b' ') && run.has(b'\t') && !run.has(b'a'), "{regex}");
            let mut at = first;
            for j in 1..=left {
                at = dfa.next(at, if j % 2 == 0 { b'\n' } else { b' ' });
                assert_ne!(at, DEAD, "{regex}: {j} bytes into the run");
                if j == left {
                    assert_eq!(at, run.after, "{regex}: the state after the run");
                    assert_eq!(dfa.next(at, b' '), DEAD, "{regex}: no byte past it");
                    break;
                }
                assert_eq!(dfa.is_accepting(at), dfa.is_accepting(first), "{regex}");
                for b in (0..=255u8).filter(|&b| !run.has(b)) {
                    assert_eq!(
                        dfa.next(at, b),
                        dfa.next(first, b),
                        "{regex}: byte {b} at {j}"
                    );
                }
                let rest = dfa.chain(at).map(|c| (c.left, c.after));
                let expected = (left - j >= 2).then_some((left - j, run.after));
                assert_eq!(rest, expected, "{regex}: the run from {j} bytes in");
            }
        }
        for regex in [
            "a[ ]*b",
            "a[ ]{2,}b",
            "a[ ]{0,3}[ ]?b",
            "a(?:[ ]{0,4}|[ ]x)",
            "a[ ]{0,1}b",
            "a(?:[ ]{0,4},x)*",
            // Two runs, one shorter or of another class.
            "a(?:[ ]{0,4}b|[ ]{0,3}c)",
            "a(?:[ ]{0,4}b|[\\t]{0,4}c)",
        ] {
            let dfa = LazyDfa::build(regex, &limits()).unwrap();
            let first = walk(&dfa, b"a").unwrap();
            assert_eq!(dfa.chain(first), None, "{regex}");
        }
    }

    #[test]
    fn a_state_limit_narrows_and_says_so() {
        let small = DfaLimits {
            max_dfa_states: 8,
            ..limits()
        };
        let lazy = LazyDfa::build(r"[a-z]{0,500}!", &small).unwrap();
        assert!(walk(&lazy, b"abc!").is_some());
        assert!(!lazy.exhausted());
        assert!(
            walk(&lazy, b"abcdefgh").is_none(),
            "no states past the limit"
        );
        assert!(lazy.exhausted());
        let err = lazy.exhausted_error().to_string();
        assert!(err.contains("max_dfa_states"), "{err}");
    }

    /// Copies of a sub-expression with one continuation (a JSON array's
    /// items, members reachable several ways) make one set of DFA states
    /// (their NFA states are one, [`crate::nfa`]): a walk over many items
    /// makes about as many states as over two. Random texts over
    /// copy-heavy regexes: lazy and eager agree on every prefix.
    #[test]
    fn copies_of_a_sub_expression_share_their_states() {
        let item = r#"\{"(?:name|id)":(?:"[a-z]*"|[0-9]+)\}"#;
        let array = format!(r"\[(?:{item}(?:,{item})*)?\]");
        let lazy = LazyDfa::build(&array, &limits()).unwrap();
        let two = br#"[{"name":"ab"},{"id":12}]"#;
        assert!(walk(&lazy, two).is_some_and(|s| lazy.is_accepting(s)));
        let after_two = lazy.num_states();
        let many = br#"[{"id":1},{"name":"x"},{"id":77},{"name":"yz"},{"id":3}]"#;
        assert!(walk(&lazy, many).is_some_and(|s| lazy.is_accepting(s)));
        assert!(
            lazy.num_states() <= after_two + 2,
            "{after_two} states after two items, {} after five",
            lazy.num_states()
        );

        // Copies that differ only at their ends are not merged.
        let near = LazyDfa::build(r"(?:abcdefgh1,)*abcdefgh2|xabcdefgh3", &limits()).unwrap();
        for (text, ok) in [
            (&b"abcdefgh1,abcdefgh2"[..], true),
            (b"abcdefgh2", true),
            (b"abcdefgh1,abcdefgh1", false),
            (b"abcdefgh2,abcdefgh2", false),
            (b"xabcdefgh3", true),
            (b"xabcdefgh2", false),
        ] {
            let end = walk(&near, text).filter(|&s| near.is_accepting(s));
            assert_eq!(end.is_some(), ok, "{}", String::from_utf8_lossy(text));
        }

        let regexes = [
            array.clone(),
            r"(?:ab|cd)(?:,(?:ab|cd))*|(?:ab|ce)(?:;(?:ab|ce))*".to_string(),
            r"a(?:,b)?(?:,c)?|b(?:,c)?|c|(?:b|c)(?:x|y)*z".to_string(),
        ];
        let mut rng = tokensieve_core::testing::SplitMix64(11);
        let alphabet = br#"abcdexyz,;[]{}"nmi:0123"#;
        for regex in &regexes {
            let lazy = LazyDfa::build(regex, &limits()).unwrap();
            let eager = ByteDfa::build(regex, &limits()).unwrap();
            for _ in 0..2_000 {
                let len = rng.below(30);
                let text: Vec<u8> = (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                walks_alike(&lazy, &eager, &text, regex);
            }
        }
    }

    /// After a search's match, the threads of partial matches are the
    /// `.*` after it: one state reads every character, where a set kept
    /// whole made a state per count of hex digits read. The language is
    /// the regex's, byte by byte (against the eager DFA), with and without
    /// a match, in searches whose partial matches are not all taken in.
    #[test]
    fn a_search_after_its_match_is_one_state() {
        let search = r#""[^"\\]*[0-9a-f]{8}[^"\\]*""#;
        let dfa = LazyDfa::build(search, &limits()).unwrap();
        let matched = walk(&dfa, b"\"x0123abcd").unwrap();
        for &b in b"0123456789abcdefxyz !" {
            assert_eq!(dfa.next(matched, b), matched, "{}", b as char);
        }
        assert!(dfa.is_accepting(dfa.next(matched, b'"')));
        // Before a match, a partial one is a state of its own.
        let partial = walk(&dfa, b"\"x0123").unwrap();
        assert_ne!(dfa.next(partial, b'a'), partial);
        assert!(!dfa.is_accepting(dfa.next(partial, b'"')));

        let regexes = [
            search,
            r#""[^"\\]*[0-9a-f]{3}[^"\\]*""#,
            // A tail narrower than the head: nothing is taken in after a
            // match but what the tail reads.
            r#""[a-z0-9]*[0-9]{3}[a-f]*""#,
            r#""(?:[a-z]|\\n)*ab(?:[a-z]|\\n)*""#,
            r#"(?:x[ab]*){2,}y|x[ab]{2}y"#,
            r#"[ab]*a[ab]{2}|b*"#,
            // A loop that reads every byte of a thread beside it, and is
            // no shorter, and yet does not take it in.
            r#""(?:[a-c]*x|[a-c]{2}y)""#,
            r#"(?:[abx]*x|[ab]{2}[xy]{2})c"#,
        ];
        let mut rng = tokensieve_core::testing::SplitMix64(7);
        let alphabet = br#""0189abcfgxyn\ "#;
        for regex in regexes {
            let lazy = LazyDfa::build(regex, &limits()).unwrap();
            let eager = ByteDfa::build(regex, &limits()).unwrap();
            for i in 0..4_000 {
                let len = rng.below(24);
                let mut text: Vec<u8> = (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                if i % 2 == 0 {
                    text.insert(0, b'"');
                }
                walks_alike(&lazy, &eager, &text, regex);
            }
        }
    }

    /// What the tree says without a DFA (a deferred lexeme's start, a
    /// regex of no text) is what the DFA says.
    #[test]
    fn the_tree_tells_the_empty_text_and_no_text() {
        for regex in [
            "",
            "a",
            "a*",
            "a|",
            "(?:a|b*)c?",
            "a+|b[^\\x00-\\x{10FFFF}]",
            "a*|[^\\x00-\\x{10FFFF}]",
            "(?:[^\\x00-\\x{10FFFF}])*",
        ] {
            let hir = crate::dfa::parse(regex).unwrap();
            assert!(LazyDfa::check_tree(&hir).is_ok(), "{regex}");
            let dfa = LazyDfa::from_hir(&hir, &limits()).unwrap();
            assert_eq!(
                LazyDfa::matches_empty(&hir),
                dfa.is_accepting(dfa.start()),
                "{regex}"
            );
        }
        for regex in [
            "[^\\x00-\\x{10FFFF}]",
            "a[^\\x00-\\x{10FFFF}]|[^\\x00-\\x{10FFFF}]+",
        ] {
            let hir = crate::dfa::parse(regex).unwrap();
            assert!(LazyDfa::check_tree(&hir).is_err(), "{regex}");
        }
    }

    #[test]
    fn a_regex_of_no_string_and_look_around_are_refused() {
        assert!(LazyDfa::build(r"[^\x00-\x{10FFFF}]", &limits()).is_err());
        assert!(LazyDfa::build(r"(?-u:\b)a", &limits()).is_err());
        assert!(LazyDfa::build(r"a$", &limits()).is_err());
    }
}
