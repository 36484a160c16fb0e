//! [`LazyProduct`]: the strings every one of several regexes matches (a
//! JSON string under a `pattern` or `format` and a length), as a DFA whose
//! states are made the first time a walk reaches them.
//!
//! Each regex is a [`LazyDfa`]; a state of the product is one state of
//! each, and a byte leads where it leads in all of them. Built whole
//! ([`crate::ByteDfa::intersection`]), the product of `format: email` and
//! `maxLength: 1024` has the email DFA's states times a thousand positions
//! and took most of a second to compile; made lazily, a compile costs the
//! regexes' NFAs and a walk only the states it reaches.
//!
//! A pair of live states need not be live together (`[a-z]{3,}` and
//! `.{0,2}`): a state is kept only once a search of the product from it has
//! met an accepting state, so every live state can still reach one, as in
//! every other automaton a walk reads. Past its limit on states it stops
//! making them: the transition is dead, which narrows the language, and
//! [`LazyProduct::exhausted`] says so, as [`LazyDfa::exhausted`] does.

use hashbrown::HashMap;
use regex_syntax::hir::{Hir, HirKind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use tokensieve_core::GrammarError;

use crate::counted::LazyCounted;
use crate::dfa::{ALL_LEADS, Automaton, DEAD, DfaLimits, TextRuns, TextStep};
use crate::grow::Grow;
use crate::lazy::{LazyDfa, SetTable};

const NOT_FORCED: u16 = 256;

/// What is known of one product state once it is made.
#[derive(Debug)]
struct Row {
    /// By byte class of the product.
    trans: Box<[u32]>,
    at_char_boundary: bool,
    forced: u16,
}

/// Whether a product state can reach an accepting one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Unknown,
    Live,
    DeadEnd,
}

/// A regex of the form `prefix X{min,max} C` is a counted part
/// ([`Part::Counted`]) from this `max` on: a string's length below it
/// costs few states, and a walk of a long token reaches its bounds from
/// every count anyway.
const COUNTED_FROM: u32 = 64;

/// The most states of the product with its count left out that
/// [`LazyProduct::reach`] makes: past it, no state is shifted.
const REACH_STATES: usize = 4096;

/// The last element of a held state's tuple (see [`LazyProduct::shifted`]).
const HELD: u32 = u32::MAX;

/// One regex of an intersection.
#[derive(Debug)]
enum Part {
    Dfa(Box<LazyDfa>),
    /// `prefix X{min,max} C` (a JSON string of bounded length: the quote,
    /// its characters, the quote) with its copies of `X` counted
    /// ([`LazyCounted`]) instead of a state per count, so that two states
    /// of the product that differ only by the count are seen to
    /// ([`LazyProduct::shifted`]). States `1..=prefix.len()` stand before
    /// each byte of the prefix; the counted automaton's state `x` is
    /// `x + prefix.len()`.
    Counted(Box<CountedPart>),
}

/// See [`Part::Counted`].
#[derive(Debug)]
struct CountedPart {
    counted: LazyCounted,
    prefix: Box<[u8]>,
    /// The counted automaton's classes, with each byte of the prefix in
    /// one of its own.
    classes: [u8; 256],
}

impl Part {
    /// The part of `pattern`: counted where it is `prefix X{min,max} C`
    /// with `max` at least [`COUNTED_FROM`] and counting is exact
    /// ([`LazyCounted::build`]), a lazy DFA otherwise.
    fn build(pattern: &str, limits: &DfaLimits) -> Result<Part, GrammarError> {
        let hir = crate::dfa::parse(pattern)?;
        if let Some(part) = Part::counted(&hir, pattern, limits) {
            return Ok(part);
        }
        LazyDfa::from_hir(&hir, limits).map(|d| Part::Dfa(Box::new(d)))
    }

    fn counted(hir: &Hir, pattern: &str, limits: &DfaLimits) -> Option<Part> {
        let HirKind::Concat(subs) = hir.kind() else {
            return None;
        };
        let (prefix, at): (Box<[u8]>, usize) = match subs.first()?.kind() {
            HirKind::Literal(lit) => (lit.0.clone(), 1),
            _ => (Box::default(), 0),
        };
        let HirKind::Repetition(rep) = subs.get(at)?.kind() else {
            return None;
        };
        let max = rep.max?;
        if max < COUNTED_FROM || prefix.len() > 8 {
            return None;
        }
        let tail = Hir::concat(subs[at + 1..].to_vec());
        let counted =
            LazyCounted::build(&rep.sub, rep.min, max, &tail, pattern.to_owned(), limits)?;
        if counted.id_bound() + prefix.len() as u64 >= u64::from(u32::MAX) {
            return None;
        }
        let mut classes = [0u8; 256];
        let mut ids: HashMap<(u8, u16), u8> = HashMap::new();
        for b in 0..=255u8 {
            let own = if prefix.contains(&b) {
                u16::from(b)
            } else {
                256
            };
            let next = ids.len() as u8;
            classes[b as usize] = *ids
                .entry((counted.classes()[b as usize], own))
                .or_insert(next);
        }
        Some(Part::Counted(Box::new(CountedPart {
            counted,
            prefix,
            classes,
        })))
    }

    #[inline]
    fn start(&self) -> u32 {
        match self {
            Part::Dfa(d) => d.start(),
            Part::Counted(c) if !c.prefix.is_empty() => 1,
            Part::Counted(c) => c.counted.start(),
        }
    }

    fn classes(&self) -> &[u8; 256] {
        match self {
            Part::Dfa(d) => d.classes(),
            Part::Counted(c) => &c.classes,
        }
    }

    #[inline]
    fn next(&self, q: u32, byte: u8) -> u32 {
        match self {
            Part::Dfa(d) => d.next(q, byte),
            Part::Counted(c) => {
                let CountedPart {
                    counted, prefix, ..
                } = &**c;
                let n = prefix.len() as u32;
                if q == DEAD {
                    DEAD
                } else if q <= n {
                    match prefix[q as usize - 1] == byte {
                        false => DEAD,
                        true if q == n => counted.start() + n,
                        true => q + 1,
                    }
                } else {
                    match counted.next(q - n, byte) {
                        DEAD => DEAD,
                        t => t + n,
                    }
                }
            }
        }
    }

    #[inline]
    fn is_accepting(&self, q: u32) -> bool {
        match self {
            Part::Dfa(d) => d.is_accepting(q),
            Part::Counted(c) => {
                let CountedPart {
                    counted, prefix, ..
                } = &**c;
                let n = prefix.len() as u32;
                q > n && counted.is_accepting(q - n)
            }
        }
    }

    fn at_char_boundary(&self, q: u32) -> bool {
        match self {
            Part::Dfa(d) => d.at_char_boundary(q),
            Part::Counted(c) => {
                let CountedPart {
                    counted, prefix, ..
                } = &**c;
                let n = prefix.len() as u32;
                if q == DEAD {
                    true
                } else if q <= n {
                    prefix[q as usize - 1] & 0xC0 != 0x80
                } else {
                    counted.at_char_boundary(q - n)
                }
            }
        }
    }

    fn nfa_states(&self) -> usize {
        match self {
            Part::Dfa(d) => d.nfa_states(),
            Part::Counted(c) => c.counted.nfa_states(),
        }
    }

    fn exhausted(&self) -> bool {
        match self {
            Part::Dfa(d) => d.exhausted(),
            Part::Counted(c) => c.counted.exhausted(),
        }
    }

    fn exhausted_error(&self) -> GrammarError {
        match self {
            Part::Dfa(d) => d.exhausted_error(),
            Part::Counted(c) => c.counted.exhausted_error(),
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Part::Dfa(d) => d.memory_bytes(),
            Part::Counted(c) => c.counted.memory_bytes(),
        }
    }

    /// The transitions of `q` as the part keeps them: byte `b` leads to
    /// `row[classes[b]] + offset` (dead stays dead). `None` (ask each
    /// byte) before a counted part's prefix is read.
    fn row(&self, q: u32) -> Option<(&[u32], &[u8; 256], u32)> {
        match self {
            Part::Dfa(d) => Some((d.row_of(q), d.classes(), 0)),
            Part::Counted(c) => {
                let n = c.prefix.len() as u32;
                (q > n).then(|| (c.counted.row_of(q - n), c.counted.classes(), n))
            }
        }
    }

    /// States this part has made (a counted part: rows read).
    fn num_states(&self) -> usize {
        match self {
            Part::Dfa(d) => d.num_states(),
            Part::Counted(c) => c.counted.num_states(),
        }
    }
}

impl Automaton for Part {
    fn start(&self) -> u32 {
        Part::start(self)
    }
    fn next(&self, state: u32, byte: u8) -> u32 {
        Part::next(self, state, byte)
    }
    fn is_accepting(&self, state: u32) -> bool {
        Part::is_accepting(self, state)
    }
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(self.classes())
    }
    fn row_by_class(&self, state: u32) -> Option<&[u32]> {
        match self {
            Part::Dfa(d) => Automaton::row_by_class(&**d, state),
            // Its ids and classes are not the counted automaton's.
            Part::Counted(_) => None,
        }
    }
    fn known_text_step(&self, state: u32) -> Option<Option<TextStep>> {
        match self {
            Part::Dfa(d) => Automaton::known_text_step(&**d, state),
            Part::Counted(c) => {
                let CountedPart {
                    counted, prefix, ..
                } = &**c;
                let n = prefix.len() as u32;
                if state <= n {
                    return None;
                }
                let step = counted.known_text_step(state - n)?;
                Some(step.map(|s| TextStep { to: s.to + n, ..s }))
            }
        }
    }
}

/// The product with its counted part's count held at `min` (see
/// [`LazyProduct::shifted`]): every count from `min` to below `max` reads
/// alike, and a count below `min` held at `min` reads more, so it reads
/// more than the product, and every state of the product, held, is one of
/// its states. Made whole, from the start, apart from the product's own
/// states (held ones included): a word count's is its pattern's states.
#[derive(Debug)]
struct Relaxed {
    /// The most bytes a state that can accept needs to.
    reach: u32,
    /// Its states, by tuple.
    ids: HashMap<Box<[u32]>, u32>,
    /// The fewest copies of the counted part's `X` each state must end to
    /// accept (`u32::MAX`: it cannot).
    copies: Vec<u32>,
}

/// The part that makes states, one thread at a time.
#[derive(Debug)]
struct Builder {
    /// The part states of each product state (0 is the dead state's).
    tuples: SetTable,
    fate: Vec<Fate>,
    bytes: usize,
    /// Search scratch, kept from one search to the next: the states met
    /// (marked with the search's number, and listed), the stack, the
    /// edges met, a state's parts and its successor's.
    seen: Vec<u32>,
    search: u32,
    met: Vec<u32>,
    stack: Vec<u32>,
    edges: Vec<(u32, u32)>,
    search_tuple: Vec<u32>,
    search_next: Vec<u32>,
    /// A row's scratch (a row's successors are searched from while it is
    /// made): the state's parts and a successor's.
    tuple: Vec<u32>,
    next: Vec<u32>,
}

/// The intersection of regexes, built as it is walked.
#[derive(Debug)]
pub struct LazyProduct {
    parts: Vec<Part>,
    /// The first counted part, if any: its count is what
    /// [`LazyProduct::shifted`] moves.
    counted: Option<usize>,
    /// The walk depth `shifted` was first asked for, the relaxed product
    /// (made when a state is first held), and each state's shift once
    /// asked.
    shift_depth: OnceLock<u32>,
    relaxed: OnceLock<Option<Relaxed>>,
    shifts: Grow<u32>,
    /// The text steps of each part's states, kept: many product states
    /// share a part's state ([`LazyProduct::parts_step`]).
    part_steps: Vec<TextRuns>,
    /// Byte classes of the product: bytes that every part puts in one
    /// class together.
    classes: [u8; 256],
    /// One byte of each class, and how many bytes the class holds.
    reps: Vec<u8>,
    class_size: Vec<u16>,
    rows: Grow<Row>,
    /// Whether each state accepts, known when it is made: a walk asks it
    /// of states it has not expanded (a text step asks it of every
    /// successor), and expanding a state searches from each successor.
    accepting: Grow<bool>,
    builder: Mutex<Builder>,
    states: AtomicUsize,
    max_states: usize,
    max_bytes: usize,
    exhausted: AtomicBool,
}

impl LazyProduct {
    /// The product of `patterns` (whole-output matches, the regex-syntax
    /// dialect): each pattern's NFA now, within `limits.nfa_size_limit`; at
    /// most `limits.max_dfa_states` product states and
    /// `limits.dfa_size_limit` heap bytes as it is walked (and as many for
    /// each part). Errors: a pattern that does not parse or build, no
    /// pattern, or patterns with no string in common.
    pub fn build(patterns: &[&str], limits: &DfaLimits) -> Result<LazyProduct, GrammarError> {
        if patterns.is_empty() {
            return Err(GrammarError::InvalidSpec(
                "an intersection of no regexes".into(),
            ));
        }
        let parts = patterns
            .iter()
            .map(|p| Part::build(p, limits))
            .collect::<Result<Vec<_>, _>>()?;
        let counted = parts.iter().position(|p| matches!(p, Part::Counted(_)));
        let mut classes = [0u8; 256];
        let mut reps = Vec::new();
        let mut class_size: Vec<u16> = Vec::new();
        let mut ids: HashMap<Vec<u8>, u8> = HashMap::new();
        for b in 0..=255u8 {
            let key: Vec<u8> = parts.iter().map(|p| p.classes()[b as usize]).collect();
            let next = ids.len();
            let c = *ids.entry(key).or_insert_with(|| {
                reps.push(b);
                class_size.push(0);
                next as u8
            });
            classes[b as usize] = c;
            class_size[c as usize] += 1;
        }
        let start: Box<[u32]> = parts.iter().map(Part::start).collect();
        let product = LazyProduct {
            part_steps: parts.iter().map(|_| TextRuns::new(0)).collect(),
            parts,
            counted,
            shift_depth: OnceLock::new(),
            relaxed: OnceLock::new(),
            shifts: Grow::default(),
            classes,
            reps,
            class_size,
            rows: Grow::default(),
            accepting: Grow::default(),
            builder: Mutex::new(Builder {
                tuples: SetTable::new(),
                fate: vec![Fate::DeadEnd],
                bytes: 0,
                seen: vec![0],
                search: 0,
                met: Vec::new(),
                stack: Vec::new(),
                edges: Vec::new(),
                search_tuple: Vec::new(),
                search_next: Vec::new(),
                tuple: Vec::new(),
                next: Vec::new(),
            }),
            states: AtomicUsize::new(1),
            max_states: limits.max_dfa_states,
            max_bytes: limits.dfa_size_limit,
            exhausted: AtomicBool::new(false),
        };
        let _ = product.accepting.get_or_init(DEAD, || false);
        let _ = product.rows.get_or_init(DEAD, || Row {
            trans: vec![DEAD; product.reps.len()].into_boxed_slice(),
            at_char_boundary: true,
            forced: NOT_FORCED,
        });
        {
            let mut b = product.builder.lock().unwrap_or_else(|e| e.into_inner());
            let id = product.intern(&mut b, &start);
            debug_assert_eq!(id, 1);
            if id == DEAD || !product.live(&mut b, id) {
                return Err(if product.exhausted() {
                    product.exhausted_error()
                } else {
                    GrammarError::InvalidSpec(
                        "the regexes of an intersection have no string in common".into(),
                    )
                });
            }
        }
        Ok(product)
    }

    /// The state at the start of the output.
    #[inline]
    pub fn start(&self) -> u32 {
        1
    }

    #[inline(always)]
    fn row(&self, state: u32) -> &Row {
        match self.rows.get(state) {
            Some(row) => row,
            None => self.rows.get_or_init(state, || self.expand(state)),
        }
    }

    /// The transitions of `state`, one per byte class.
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
        self.accepting.get(state).copied().unwrap_or(false)
    }

    /// The one byte that must come next in `state`, if any.
    #[inline]
    pub fn forced_byte(&self, state: u32) -> Option<u8> {
        let f = self.row(state).forced;
        (f != NOT_FORCED).then_some(f as u8)
    }

    /// Whether `state` sits on a UTF-8 character boundary.
    #[inline]
    pub fn at_char_boundary(&self, state: u32) -> bool {
        self.row(state).at_char_boundary
    }

    /// Product states made so far, the dead one included.
    pub fn num_states(&self) -> usize {
        self.states.load(Ordering::Relaxed)
    }

    /// The parts' NFA states (what compiling cost).
    pub fn nfa_states(&self) -> usize {
        self.parts.iter().map(Part::nfa_states).sum()
    }

    /// Whether a limit stopped the making of a state, here or in a part.
    pub fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::SeqCst) || self.parts.iter().any(Part::exhausted)
    }

    /// The error that [`LazyProduct::exhausted`] stands for.
    pub fn exhausted_error(&self) -> GrammarError {
        if let Some(part) = self.parts.iter().find(|p| p.exhausted()) {
            return part.exhausted_error();
        }
        let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        if b.tuples.len() >= self.max_states {
            GrammarError::LimitExceeded {
                what: format!(
                    "an intersection's lazily built DFA ({} states)",
                    b.tuples.len()
                ),
                limit: self.max_states,
                knob: "max_dfa_states".into(),
            }
        } else {
            GrammarError::LimitExceeded {
                what: format!(
                    "an intersection's lazily built DFA ({} heap bytes)",
                    b.bytes
                ),
                limit: self.max_bytes,
                knob: "dfa_size_limit".into(),
            }
        }
    }

    /// Heap bytes held (the parts, the states made).
    pub fn memory_bytes(&self) -> usize {
        let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        self.parts.iter().map(Part::memory_bytes).sum::<usize>() + b.bytes
    }

    /// The part states after the byte of class `class` from `tuple`, into
    /// `out`; `false` where a part refuses the byte.
    fn step(&self, tuple: &[u32], class: usize, out: &mut Vec<u32>) -> bool {
        let byte = self.reps[class];
        out.clear();
        for (&q, p) in tuple.iter().zip(&self.parts) {
            let t = p.next(q, byte);
            if t == DEAD {
                return false;
            }
            out.push(t);
        }
        if tuple.len() > self.parts.len() {
            self.hold(out);
            out.push(HELD);
        }
        true
    }

    /// The counted part's count in `tuple` (a tuple of part states) moved
    /// to `min`, where it is in the repetition.
    fn hold(&self, tuple: &mut [u32]) {
        let Some(j) = self.counted else {
            return;
        };
        let Part::Counted(c) = &self.parts[j] else {
            unreachable!("the counted part is counted");
        };
        let CountedPart {
            counted, prefix, ..
        } = &**c;
        let n = prefix.len() as u32;
        if tuple[j] > n
            && let Some((_, x)) = counted.counted_at(tuple[j] - n)
        {
            tuple[j] = counted.counted_state(counted.bounds().0, x) + n;
        }
    }

    fn accepts(&self, tuple: &[u32]) -> bool {
        tuple
            .iter()
            .zip(&self.parts)
            .all(|(&q, p)| p.is_accepting(q))
    }

    /// Makes the row of `state`: its live successors by class.
    fn expand(&self, state: u32) -> Row {
        // The first row a walk asks for makes the relaxed product (not a
        // compile: many intersections are never entered): every state
        // made from here is found live or not by a look-up instead of a
        // search (near `max`, a search from each of thousands of states a
        // walk makes).
        let _ = self.relaxed();
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut *b;
        // Copies into scratch kept by the builder (a search below uses
        // its own): no allocation a row.
        let mut tuple = std::mem::take(&mut b.tuple);
        tuple.clear();
        tuple.extend_from_slice(&b.tuples[state as usize]);
        let accepting = self.is_accepting(state);
        let mut trans = Vec::with_capacity(self.reps.len());
        let mut next = std::mem::take(&mut b.next);
        for class in 0..self.reps.len() {
            let id = if self.step(&tuple, class, &mut next) {
                let id = self.intern(b, &next);
                if id != DEAD && self.live(b, id) {
                    id
                } else {
                    DEAD
                }
            } else {
                DEAD
            };
            trans.push(id);
        }
        let at_char_boundary = self.parts[0].at_char_boundary(tuple[0]);
        b.tuple = tuple;
        b.next = next;
        b.bytes += trans.len() * 4 + std::mem::size_of::<Row>();
        let mut forced = NOT_FORCED;
        if !accepting {
            let mut live = (0..trans.len()).filter(|&c| trans[c] != DEAD);
            if let (Some(c), None) = (live.next(), live.next())
                && self.class_size[c] == 1
            {
                forced = self.reps[c] as u16;
            }
        }
        Row {
            trans: trans.into_boxed_slice(),
            at_char_boundary,
            forced,
        }
    }

    /// The id of `tuple`, made now if it is new (dead past the limits).
    fn intern(&self, b: &mut Builder, tuple: &[u32]) -> u32 {
        let hash = match b.tuples.find(tuple) {
            Ok(id) => return id,
            Err(hash) => hash,
        };
        let bytes = tuple.len() * 8 + 48;
        if b.tuples.len() >= self.max_states || b.bytes + bytes > self.max_bytes {
            if !self.exhausted.swap(true, Ordering::SeqCst) {
                crate::lazy::note_exhaustion();
            }
            return DEAD;
        }
        b.bytes += bytes;
        let id = b.tuples.push(hash, tuple);
        let _ = self.accepting.get_or_init(id, || self.accepts(tuple));
        b.fate.push(Fate::Unknown);
        b.seen.push(0);
        self.states.store(b.tuples.len(), Ordering::Relaxed);
        id
    }

    /// The text step of `state` ([`crate::dfa::text_step`]) made from its
    /// parts' steps, without making its row: the bytes every part's step
    /// takes lead each part to its step's target, so the product to the
    /// tuple of those, which must be live. A walk asks the step of every
    /// product state it meets, and a row asks a search of the product from
    /// every successor (a word-count `pattern` under `maxLength` makes
    /// thousands of product states a token). `None` (ask each byte) where a
    /// part has no step, the parts' steps share no ASCII byte, or their
    /// target is not live; `Some(None)` for a dead or accepting state,
    /// which has no step.
    fn parts_step(&self, state: u32) -> Option<Option<TextStep>> {
        if state == DEAD || self.is_accepting(state) {
            return Some(None);
        }
        let tuple: Vec<u32> = {
            let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
            b.tuples[state as usize].to_vec()
        };
        let (mut ascii, mut leads) = ([u64::MAX; 2], ALL_LEADS);
        let mut to = Vec::with_capacity(tuple.len());
        for ((&q, p), steps) in tuple.iter().zip(&self.parts).zip(&self.part_steps) {
            let step = steps.step(p, q)?;
            ascii = [ascii[0] & step.ascii[0], ascii[1] & step.ascii[1]];
            leads &= step.leads;
            to.push(step.to);
        }
        if ascii == [0, 0] {
            return None;
        }
        if tuple.len() > self.parts.len() {
            self.hold(&mut to);
            to.push(HELD);
        }
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let id = self.intern(&mut b, &to);
        // Every part's target is live and not accepting: so is the
        // tuple's, once a search finds it can end.
        if id == DEAD || !self.live(&mut b, id) {
            return None;
        }
        Some(Some(TextStep {
            ascii,
            utf8: leads == ALL_LEADS,
            leads,
            to: id,
        }))
    }

    /// A state whose walks of at most `depth` bytes find what walks from
    /// `state` find, as [`tokensieve_core::trie::TokenTrie`] walks do: `state` held
    /// (the same states of every part, the counted one's count moved to
    /// `min` and kept there at each copy's end, a state of the relaxed
    /// product, marked by a last element `HELD` in its tuple). That
    /// holds where the count is at least `min` and far enough from `max`
    /// that it does not meet it within `depth` bytes and the
    /// `LazyProduct::reach` after them: every count between reads alike,
    /// and a state a walk meets is live in both, as every state of the
    /// relaxed product that can accept can do so within the reach. A
    /// word count under `maxLength: 300` made a new product state at
    /// every trie node of every mask's walk (thousands a token, ~6 ms);
    /// held, walks meet the states of the pattern and a character's
    /// automaton only, made once. `state` itself otherwise, and always for
    /// a `depth` other than the first one asked (each state's answer is
    /// kept).
    pub fn shifted(&self, state: u32, depth: u32) -> u32 {
        let Some(j) = self.counted else {
            return state;
        };
        if state == DEAD || *self.shift_depth.get_or_init(|| depth) != depth {
            return state;
        }
        *self
            .shifts
            .get_or_init(state, || self.shift(state, j, depth))
    }

    fn shift(&self, state: u32, j: usize, depth: u32) -> u32 {
        let Part::Counted(c) = &self.parts[j] else {
            unreachable!("the counted part is counted");
        };
        let CountedPart {
            counted, prefix, ..
        } = &**c;
        let n = prefix.len() as u32;
        let mut tuple: Vec<u32> = {
            let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
            b.tuples[state as usize].to_vec()
        };
        let q = tuple[j];
        let Some((count, x)) = (q > n).then(|| counted.counted_at(q - n)).flatten() else {
            return state;
        };
        let (min, max) = counted.bounds();
        let room = |reach: u32| u64::from(count) + u64::from(depth) + u64::from(reach);
        if count < min || room(0) > u64::from(max) {
            return state;
        }
        match self.reach() {
            Some(reach) if room(reach) <= u64::from(max) => {}
            _ => return state,
        }
        tuple[j] = counted.counted_state(min, x) + n;
        tuple.push(HELD);
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let id = self.intern(&mut b, &tuple);
        // Live, as `state` is (see `reach`).
        if id == DEAD || !self.live(&mut b, id) {
            return state;
        }
        id
    }

    /// The most bytes any state of the relaxed product needs to reach an
    /// accepting one, where it can (see [`Relaxed`]); `None` (nothing is
    /// held) where the relaxed product is not made.
    fn reach(&self) -> Option<u32> {
        self.relaxed().map(|r| r.reach)
    }

    fn relaxed(&self) -> Option<&Relaxed> {
        self.relaxed.get_or_init(|| self.make_relaxed()).as_ref()
    }

    /// The relaxed product, made from the start as a whole (see
    /// [`Relaxed`]); `None` where the bounds leave no count between them,
    /// past [`REACH_STATES`], or where making it would take a part near
    /// its limits.
    fn make_relaxed(&self) -> Option<Relaxed> {
        let j = self.counted?;
        let Part::Counted(c) = &self.parts[j] else {
            return None;
        };
        let n = c.prefix.len() as u32;
        let (min, max) = c.counted.bounds();
        if min >= max {
            return None;
        }
        let mut start: Vec<u32> = self.parts.iter().map(Part::start).collect();
        self.hold(&mut start);
        let mut ids: HashMap<Box<[u32]>, u32> = HashMap::new();
        let mut tuples: Vec<Box<[u32]>> = vec![start.clone().into_boxed_slice()];
        ids.insert(start.into_boxed_slice(), 0);
        // Each edge, and whether it ends a copy of the counted part's `X`
        // (a count one past `min` before it is held).
        let mut edges: Vec<(u32, u32, bool)> = Vec::new();
        let mut next = Vec::new();
        let mut i = 0;
        while i < tuples.len() {
            // Making the relaxed product makes the parts' states: it stops
            // well before a part's limits, which would narrow the lexeme.
            if i % 64 == 0
                && self.parts.iter().any(|p| {
                    p.num_states() * 2 > self.max_states || p.memory_bytes() * 2 > self.max_bytes
                })
            {
                return None;
            }
            let tuple = tuples[i].clone();
            // Most byte classes go where the class before them went (a
            // `\S` splits the bytes into dozens of classes): one edge.
            let mut last: Vec<u32> = Vec::new();
            // Each part's row, read once for all the classes.
            let rows: Vec<_> = tuple
                .iter()
                .zip(&self.parts)
                .map(|(&q, p)| p.row(q))
                .collect();
            'classes: for class in 0..self.reps.len() {
                let byte = self.reps[class];
                next.clear();
                for ((&q, p), row) in tuple.iter().zip(&self.parts).zip(&rows) {
                    let t = match row {
                        Some((row, classes, offset)) => {
                            match row[classes[byte as usize] as usize] {
                                DEAD => DEAD,
                                t => t + offset,
                            }
                        }
                        None => p.next(q, byte),
                    };
                    if t == DEAD {
                        continue 'classes;
                    }
                    next.push(t);
                }
                if next == last {
                    continue;
                }
                last.clone_from(&next);
                let copy = next[j] > n
                    && c.counted
                        .counted_at(next[j] - n)
                        .is_some_and(|(k, _)| k > min);
                self.hold(&mut next);
                let to = match ids.get(next.as_slice()) {
                    Some(&to) => to,
                    None if tuples.len() >= REACH_STATES => return None,
                    None => {
                        let to = tuples.len() as u32;
                        ids.insert(next.clone().into_boxed_slice(), to);
                        tuples.push(next.clone().into_boxed_slice());
                        to
                    }
                };
                edges.push((i as u32, to, copy));
            }
            i += 1;
        }
        if self.parts.iter().any(Part::exhausted) {
            return None;
        }
        // Backwards from the accepting states: bytes, and copies (edges
        // that end one weigh 1, the others 0). The edges into each state
        // lie together in one list: counted per target, then placed.
        let mut start_of = vec![0usize; tuples.len() + 1];
        for &(_, to, _) in &edges {
            start_of[to as usize + 1] += 1;
        }
        for k in 0..tuples.len() {
            start_of[k + 1] += start_of[k];
        }
        let mut fill = start_of.clone();
        let mut into_list = vec![(0u32, false); edges.len()];
        for &(from, to, copy) in &edges {
            into_list[fill[to as usize]] = (from, copy);
            fill[to as usize] += 1;
        }
        let into = |k: u32| &into_list[start_of[k as usize]..start_of[k as usize + 1]];
        let mut bytes = vec![u32::MAX; tuples.len()];
        let mut copies = vec![u32::MAX; tuples.len()];
        let mut queue = std::collections::VecDeque::new();
        for (k, t) in tuples.iter().enumerate() {
            if self.accepts(t) {
                bytes[k] = 0;
                queue.push_back(k as u32);
            }
        }
        while let Some(k) = queue.pop_front() {
            for &(from, _) in into(k) {
                if bytes[from as usize] == u32::MAX {
                    bytes[from as usize] = bytes[k as usize] + 1;
                    queue.push_back(from);
                }
            }
        }
        for (k, &b) in bytes.iter().enumerate() {
            if b == 0 {
                copies[k] = 0;
                queue.push_back(k as u32);
            }
        }
        // Zero-one: an edge of no copy goes to the front, and a state may
        // be met again with fewer copies.
        while let Some(k) = queue.pop_front() {
            let at = copies[k as usize];
            for &(from, copy) in into(k) {
                let via = at + u32::from(copy);
                if via < copies[from as usize] {
                    copies[from as usize] = via;
                    if copy {
                        queue.push_back(from);
                    } else {
                        queue.push_front(from);
                    }
                }
            }
        }
        let reach = bytes.into_iter().filter(|&d| d != u32::MAX).max()?;
        Some(Relaxed { reach, ids, copies })
    }

    /// Whether a state can accept, read off the relaxed product where it
    /// is made: a held state where it can, a real one whose counted part
    /// is at `min` copies or more exactly when the fewest copies its held
    /// tuple needs fit in what is left to `max` (from there, the product
    /// reads what the relaxed one reads, but for copies past `max`).
    /// `None` to search: before the relaxed product is made (a walk far
    /// from the bounds makes it), and below `min`.
    fn live_by_copies(&self, tuple: &[u32]) -> Option<bool> {
        let j = self.counted?;
        let relaxed = self.relaxed.get()?.as_ref()?;
        if tuple.len() > self.parts.len() {
            // Held: a state of the relaxed product itself.
            let &id = relaxed.ids.get(&tuple[..self.parts.len()])?;
            return Some(relaxed.copies[id as usize] != u32::MAX);
        }
        let Part::Counted(c) = &self.parts[j] else {
            return None;
        };
        let n = c.prefix.len() as u32;
        if tuple[j] <= n {
            return None;
        }
        let (count, _) = c.counted.counted_at(tuple[j] - n)?;
        let (min, max) = c.counted.bounds();
        if count < min {
            return None;
        }
        let mut held = tuple.to_vec();
        self.hold(&mut held);
        let &id = relaxed.ids.get(held.as_slice())?;
        let copies = relaxed.copies[id as usize];
        Some(copies != u32::MAX && u64::from(count) + u64::from(copies) <= u64::from(max))
    }

    /// Whether an accepting state can be reached from `state`: a
    /// depth-first search of the product that stops at the first
    /// accepting or known live state it meets. Every state met on the way
    /// with an edge to a live one is live too, and is marked so: the next
    /// search, from a neighbour, ends where it starts. When the search
    /// finds nothing accepting, every state it met is a dead end.
    fn live(&self, b: &mut Builder, state: u32) -> bool {
        match b.fate[state as usize] {
            Fate::Live => return true,
            Fate::DeadEnd => return false,
            Fate::Unknown => {}
        }
        if let Some(live) = self.live_by_copies(&b.tuples[state as usize]) {
            b.fate[state as usize] = if live { Fate::Live } else { Fate::DeadEnd };
            return live;
        }
        b.search = b.search.wrapping_add(1);
        if b.search == 0 {
            b.seen.fill(0);
            b.search = 1;
        }
        let search = b.search;
        b.seen[state as usize] = search;
        let mut met = std::mem::take(&mut b.met);
        let mut stack = std::mem::take(&mut b.stack);
        // Edges met, in the order they were met.
        let mut edges = std::mem::take(&mut b.edges);
        let mut tuple = std::mem::take(&mut b.search_tuple);
        let mut next = std::mem::take(&mut b.search_next);
        met.clear();
        stack.clear();
        edges.clear();
        met.push(state);
        stack.push(state);
        let mut found = false;
        // Depth first, each state's successors looked at as they are met:
        // an accepting state is usually a few bytes past the last one taken
        // (a closing quote after a string's least length), where breadth
        // first makes every state of every shorter length first (on the
        // 55 slowest MaskBench compiles, 279k product states for the
        // first search from each start, 71k depth first).
        while let Some(s) = stack.pop() {
            if b.fate[s as usize] == Fate::Live || self.is_accepting(s) {
                b.fate[s as usize] = Fate::Live;
                found = true;
                break;
            }
            tuple.clear();
            tuple.extend_from_slice(&b.tuples[s as usize]);
            for class in 0..self.reps.len() {
                if !self.step(&tuple, class, &mut next) {
                    continue;
                }
                let id = self.intern(b, &next);
                if id == DEAD || b.fate[id as usize] == Fate::DeadEnd {
                    continue;
                }
                edges.push((s, id));
                if b.fate[id as usize] == Fate::Live || self.is_accepting(id) {
                    b.fate[id as usize] = Fate::Live;
                    found = true;
                    break;
                }
                if b.seen[id as usize] != search {
                    b.seen[id as usize] = search;
                    met.push(id);
                    stack.push(id);
                }
            }
            if found {
                break;
            }
        }
        if !found {
            // Nothing accepting within reach (unless a limit cut the search
            // short, which `exhausted` reports; the narrowing is then an
            // error).
            for &s in &met {
                b.fate[s as usize] = Fate::DeadEnd;
            }
        } else {
            // Back along the edges met (latest first, so most of it is one
            // pass): a state with a live successor is live.
            loop {
                let mut changed = false;
                for &(from, to) in edges.iter().rev() {
                    if b.fate[to as usize] == Fate::Live && b.fate[from as usize] != Fate::Live {
                        b.fate[from as usize] = Fate::Live;
                        changed = true;
                    }
                }
                if !changed {
                    break;
                }
            }
        }
        b.met = met;
        b.stack = stack;
        b.edges = edges;
        b.search_tuple = tuple;
        b.search_next = next;
        if !found {
            return false;
        }
        debug_assert_eq!(b.fate[state as usize], Fate::Live);
        true
    }
}

impl Automaton for LazyProduct {
    fn start(&self) -> u32 {
        LazyProduct::start(self)
    }
    fn next(&self, state: u32, byte: u8) -> u32 {
        LazyProduct::next(self, state, byte)
    }
    fn is_accepting(&self, state: u32) -> bool {
        LazyProduct::is_accepting(self, state)
    }
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(self.classes())
    }
    fn row_by_class(&self, state: u32) -> Option<&[u32]> {
        Some(self.row_of(state))
    }
    fn known_text_step(&self, state: u32) -> Option<Option<TextStep>> {
        self.parts_step(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ByteDfa;
    use crate::dfa::tests::limits;
    use crate::lazy::tests::walk;

    /// Every string over `alphabet` of up to `len` bytes.
    fn strings(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        let mut all = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..len {
            let mut next = Vec::new();
            for s in &last {
                for &c in alphabet {
                    let mut t = s.clone();
                    t.push(c);
                    next.push(t);
                }
            }
            all.extend(next.iter().cloned());
            last = next;
        }
        all
    }

    #[test]
    fn the_lazy_product_is_the_intersection_built_whole() {
        let cases: [(&[&str], &[u8]); 6] = [
            // A JSON string under a pattern and a length.
            (&[r#""[a-c]*b[a-c]*""#, r#""(?:[^"\\]){2,4}""#], b"\"abcx\\"),
            // Live apart, dead together past three letters.
            (&[r"[a-z]{3,}|x", r"[a-z]{0,2}|ab[a-z]"], b"abxyz"),
            (&[r"(a|b)*a(a|b){2}", r"(aa|b)*", r"[ab]{0,6}"], b"ab"),
            (&[r"é{1,3}|中x", r"[^x]{2}|..x"], "é中x".as_bytes()),
            (&[r"-?[0-9]+", r"[0-9-]{1,3}", r"-?[1-9][0-9]*|0"], b"-109"),
            // Accepting states met in the middle of a search's level, beside
            // dead ends of the same length.
            (&[r"(?:ab|ba){2,3}x?|a{6}", r"[abx]{4,5}|[ab]{6}"], b"abx"),
        ];
        for (patterns, alphabet) in cases {
            let eager = ByteDfa::intersection(patterns, &limits()).unwrap();
            let lazy = LazyProduct::build(patterns, &limits()).unwrap();
            for text in strings(alphabet, 6) {
                let (e, l) = (walk(&eager, &text), walk(&lazy, &text));
                assert_eq!(e.is_some(), l.is_some(), "{patterns:?} on {text:?}");
                if let (Some(e), Some(l)) = (e, l) {
                    assert_eq!(eager.is_accepting(e), lazy.is_accepting(l), "{text:?}");
                    assert_eq!(eager.forced_byte(e), lazy.forced_byte(l), "{text:?}");
                    assert_eq!(eager.at_char_boundary(e), lazy.at_char_boundary(l));
                }
            }
            assert!(!lazy.exhausted());
        }
    }

    /// A product's step made from its parts' steps keeps the promise of a
    /// text step: its ASCII bytes lead to its target, and so does every
    /// character of its lead bytes, through live states that do not
    /// accept; where its target is the one the by-byte step picked, it
    /// takes no byte or lead byte that one does not.
    #[test]
    fn steps_from_the_parts_are_text_steps() {
        let cases: [&[&str]; 4] = [
            &[r#""(?:\S+\s+){0,3}\S+""#, r#""[^"\\\x00-\x1F]{0,12}""#],
            &[r#""[^"\\]*a[^"\\]*""#, r#""[^"\\]{2,9}""#],
            &[r"[^\n\x{2028}]*é[^x]*!", r"[^y]{1,8}!"],
            &[r"(?:ab|ba){2,3}x?|a{6}", r"[abx]{4,5}|[ab]{6}"],
        ];
        // A few characters of each lead byte: its first and last, and
        // some between.
        let mut samples: Vec<Vec<char>> = vec![Vec::new(); 0xF4 - 0xC2 + 1];
        for c in (0x80..=0x10FFFFu32).filter_map(char::from_u32) {
            let lead = c.to_string().as_bytes()[0];
            let of = &mut samples[(lead - 0xC2) as usize];
            if of.len() < 2 || (c as u32).is_multiple_of(4099) {
                of.push(c);
            } else {
                *of.last_mut().unwrap() = c;
            }
        }
        let mut from_parts = 0;
        for patterns in cases {
            let p = LazyProduct::build(patterns, &limits()).unwrap();
            let mut seen = vec![p.start()];
            let mut k = 0;
            while k < seen.len() && seen.len() < 200 {
                let state = seen[k];
                k += 1;
                let by_byte = crate::dfa::text_step_by_byte(&p, state);
                match p.parts_step(state) {
                    Some(None) => assert_eq!(by_byte, None, "{patterns:?}, {state}"),
                    None => {}
                    Some(Some(step)) => {
                        from_parts += 1;
                        let by_byte = by_byte.expect("a step by byte too");
                        assert!(!p.is_accepting(step.to));
                        for b in (0..0x80u8)
                            .filter(|&b| step.ascii[b as usize / 64] >> (b % 64) & 1 == 1)
                        {
                            assert_eq!(p.next(state, b), step.to, "{patterns:?}, {state}, {b}");
                        }
                        for lead in (0xC2..=0xF4u8).filter(|&b| step.takes_lead(b)) {
                            for c in &samples[(lead - 0xC2) as usize] {
                                let mut at = state;
                                let bytes = c.to_string();
                                for &b in bytes.as_bytes() {
                                    assert!(at != DEAD && !p.is_accepting(at), "{c:?}");
                                    at = p.next(at, b);
                                }
                                assert_eq!(at, step.to, "{patterns:?}, {state}, {c:?}");
                            }
                        }
                        if by_byte.to == step.to {
                            assert_eq!(step.ascii[0] & !by_byte.ascii[0], 0);
                            assert_eq!(step.ascii[1] & !by_byte.ascii[1], 0);
                            assert_eq!(step.leads & !by_byte.leads, 0, "{patterns:?}, {state}");
                        }
                    }
                }
                for b in 0..=255u8 {
                    let t = p.next(state, b);
                    if t != DEAD && !seen.contains(&t) {
                        seen.push(t);
                    }
                }
            }
        }
        assert!(from_parts >= 20, "steps made from the parts: {from_parts}");
    }

    /// A string of bounded length whose count is a number: the product
    /// reads as the intersection built whole, on random texts that cross
    /// both bounds.
    #[test]
    fn a_counted_length_reads_as_its_regex() {
        // Each with the bytes of its texts' bodies, and of their last few
        // bytes (a body of the first kind goes on to the length's bounds).
        type Case<'a> = (&'a [&'a str], &'a [u8], &'a [u8]);
        let cases: [Case; 3] = [
            (
                &[r#""(?:[ab]+ ){0,40}[ab]+""#, r#""(?:[^"\\]|\\n){0,66}""#],
                b"aab",
                b"ab \\n\"",
            ),
            (
                &[r#""[^"\\]*:[ab]{5}""#, r#""[^"\\]{3,64}""#],
                b"ab:",
                b"ab:\"",
            ),
            // A prefix of two bytes, the second of a character of two.
            (
                &[r"é(?:[a-c]|é){0,70}!", r"é[a-c]*(?:é[a-c]*){0,3}!"],
                b"abc",
                "abé!".as_bytes(),
            ),
        ];
        let mut rng = tokensieve_core::testing::SplitMix64(37);
        for (patterns, body, end) in cases {
            let eager = ByteDfa::intersection(patterns, &limits()).unwrap();
            let lazy = LazyProduct::build(patterns, &limits()).unwrap();
            assert!(lazy.counted.is_some(), "{patterns:?} has a counted part");
            // With the relaxed product made first, states' fates are read
            // off it instead of searched.
            let read_off = LazyProduct::build(patterns, &limits()).unwrap();
            assert!(read_off.reach().is_some(), "{patterns:?}");
            let mut dead = 0;
            for _ in 0..3000 {
                let mut text: Vec<u8> = (0..rng.below(80))
                    .map(|_| body[rng.below(body.len())])
                    .collect();
                for _ in 0..rng.below(4) {
                    text.push(end[rng.below(end.len())]);
                }
                if rng.below(8) != 0 {
                    let first = patterns[0].chars().next().unwrap().to_string();
                    text.splice(0..0, first.bytes());
                }
                let e = walk(&eager, &text);
                dead += usize::from(e.is_none());
                for lazy in [&lazy, &read_off] {
                    let l = walk(lazy, &text);
                    assert_eq!(e.is_some(), l.is_some(), "{patterns:?} on {text:?}");
                    if let (Some(e), Some(l)) = (e, l) {
                        assert_eq!(eager.is_accepting(e), lazy.is_accepting(l), "{text:?}");
                        assert_eq!(eager.at_char_boundary(e), lazy.at_char_boundary(l));
                    }
                }
            }
            assert!(
                (300..=2700).contains(&dead),
                "{patterns:?}: {dead} texts refused"
            );
        }
    }

    /// A shifted state reads what its state reads: every text of up to the
    /// depth asked leads both to live states alike, accepting alike; and
    /// states are shifted (where a pattern's completion is long, only as
    /// far from `max` as it needs).
    #[test]
    fn a_shifted_state_reads_as_its_state() {
        let cases: [(&[&str], &[u8]); 3] = [
            (
                &[r#""(?:[ab]+ ){0,9}[ab]+""#, r#""(?:[^"\\]|\\n){0,70}""#],
                b"a \\n\"",
            ),
            // After the colon, twelve letters and the quote must follow.
            (&[r#""[^"\\]*:[ab]{12}""#, r#""[^"\\]{0,70}""#], b"ab:\""),
            (&[r#""[a-c ]*b[a-c ]*""#, r#""[^"\\]{9,80}""#], b"ab \""),
        ];
        let depth = 4;
        for (patterns, alphabet) in cases {
            let p = LazyProduct::build(patterns, &limits()).unwrap();
            let texts = strings(alphabet, depth);
            let mut seen = vec![p.start()];
            let mut k = 0;
            let mut shifted = 0;
            while k < seen.len() && seen.len() < 3000 {
                let state = seen[k];
                k += 1;
                let to = p.shifted(state, depth as u32);
                if to != state {
                    shifted += 1;
                    for text in &texts {
                        let (a, b) = (walk_from(&p, state, text), walk_from(&p, to, text));
                        assert_eq!(
                            a.is_some(),
                            b.is_some(),
                            "{patterns:?} {state}→{to} {text:?}"
                        );
                        if let (Some(a), Some(b)) = (a, b) {
                            assert_eq!(p.is_accepting(a), p.is_accepting(b), "{text:?}");
                        }
                    }
                }
                for &b in alphabet {
                    let t = p.next(state, b);
                    if t != DEAD && !seen.contains(&t) {
                        seen.push(t);
                    }
                }
            }
            assert!(shifted >= 20, "{patterns:?}: {shifted} states shifted");
        }
    }

    fn walk_from(a: &LazyProduct, mut state: u32, text: &[u8]) -> Option<u32> {
        for &b in text {
            state = a.next(state, b);
            if state == DEAD {
                return None;
            }
        }
        Some(state)
    }

    #[test]
    fn regexes_with_nothing_in_common_are_an_error_and_limits_narrow() {
        let none = LazyProduct::build(&[r"[a-z]{3,}", r"[a-z]{0,2}"], &limits());
        assert!(
            matches!(&none, Err(GrammarError::InvalidSpec(m)) if m.contains("no string in common")),
            "{none:?}"
        );
        assert!(LazyProduct::build(&[], &limits()).is_err());
        assert!(LazyProduct::build(&["a", "("], &limits()).is_err());
        // Twelve product states at most: a walk into a long counted run
        // stops, and says which limit stopped it.
        let small = DfaLimits {
            max_dfa_states: 12,
            ..limits()
        };
        let p = LazyProduct::build(&[r"[a-z]{0,100}", r"[a-c]*"], &small).unwrap();
        assert_eq!(walk(&p, b"abcabcabcabcabcabc"), None);
        assert!(p.exhausted());
        assert!(matches!(
            p.exhausted_error(),
            GrammarError::LimitExceeded { knob, .. } if knob == "max_dfa_states"
        ));
    }
}
