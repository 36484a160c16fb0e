//! The byte NFA a [`crate::lazy::LazyDfa`] runs on, made from a syntax
//! tree in one backward pass.
//!
//! A lazily built lexeme costs its NFA at compile (or at its first walk),
//! so the NFA's construction is on the compile's path for every lexeme of
//! a grammar: regex-automata's Thompson compiler, which builds an
//! intermediate graph, then remaps it into its NFA (capture slots, look
//! sets, an unanchored prefix nobody here runs), spent about a thousand
//! instructions a state. This one writes each state once, into flat
//! arrays: a sub-expression is compiled *after* its continuation, so each
//! state knows where it leads when it is made and nothing is patched but a
//! loop's entry.
//!
//! States are of four kinds: byte ranges (each to its own next state),
//! unions (empty moves), the one match state, and the copies of a bounded
//! repetition of a byte class (`[ \t\n\r]{0,20}` between JSON's tokens),
//! each of which reads the class into the next copy and moves to the
//! repetition's exit: a block of them is one slot a copy, where ranges and
//! a union per copy, each hashed to be found again, had been most of an
//! object's NFA. An empty class is a range state with no ranges (it
//! fails). A Unicode class becomes the
//! UTF-8 byte sequences of its characters as a trie from the first byte.
//!
//! Each state is made once: one with the same ranges to the same states,
//! or the same alternates, is the one made before, and a loop (`x*`,
//! whose entry is the one state patched) is made once for each tree and
//! state after it. Since a sub-expression is made after its continuation,
//! copies of it before the same state come out as the same states: the two
//! `x` of a JSON array's `x(?:,x)*`, a member reachable by several paths
//! through optional members before it, the continuation bytes of a wide
//! class. A DFA state is then one set of NFA states whichever copy a walk
//! went through, where each copy made its own states before (a lazy DFA
//! is not minimized): on every MaskBench file no two states are left with
//! the same future (a Hopcroft bisimulation run past a lazy DFA's 4,096th
//! state, 2–8 ms in one mask, merged none).

use hashbrown::{HashMap, HashTable};
use std::rc::Rc;
use std::sync::OnceLock;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};
use regex_syntax::utf8::{Utf8Range, Utf8Sequences};
use tokensieve_core::{GrammarError, Location};

use crate::json_keys::OtherKeys;
pub(crate) use crate::lazy::Part;

/// One byte range of a state and the state it leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Transition {
    pub start: u8,
    pub end: u8,
    pub next: u32,
}

/// A state, as [`Nfa::state`] shows it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum State<'a> {
    /// Reads one byte: the ranges it takes (none: the state fails), in
    /// the order they were written (a byte may be in two of them).
    Bytes(&'a [Transition]),
    /// Moves to each of these without reading.
    Union(&'a [u32]),
    /// The whole text matched.
    Match,
    /// One copy of a class of single bytes in a bounded repetition
    /// (`X` in `X{0,n}`, as JSON's whitespace `[ \t\n\r]{0,20}`): reads
    /// a byte of `ranges` (their own `next` is not read) into `to`, the
    /// copy after it (or the exit after the last), and moves to `exit`
    /// without reading. `left` bytes of the class may come from here on.
    /// A block of such copies is one state per copy and one list of
    /// ranges for all of them: no union per copy, and nothing hashed.
    Run {
        ranges: &'a [Transition],
        to: u32,
        exit: u32,
        left: u32,
    },
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Bytes,
    Union,
    Match,
    /// A copy of a [`Block`] (its slot's `at`), with `len` bytes left.
    Run,
}

/// The copies of one bounded repetition of a byte class ([`State::Run`]):
/// numbered from `base` (one byte left) up, each reading into the one
/// below it, the one at `base` into `exit`.
#[derive(Debug, Clone, Copy)]
struct Block {
    /// The class's ranges in the range pool.
    at: u32,
    len: u32,
    exit: u32,
    base: u32,
    /// How many copies (the most bytes left).
    copies: u32,
}

/// A state's kind and where its ranges or alternatives are in their pool.
#[derive(Debug, Clone, Copy)]
struct Slot {
    kind: Kind,
    /// Made inside the body of an unbounded repetition (`x*`, `x{2,}`):
    /// a state on a loop (see [`Nfa::in_loop`]).
    in_loop: bool,
    at: u32,
    len: u32,
}

/// A byte NFA matching the whole text from [`Nfa::start`].
#[derive(Debug)]
pub(crate) struct Nfa {
    slots: Vec<Slot>,
    ranges: Vec<Transition>,
    alternates: Vec<u32>,
    blocks: Vec<Block>,
    start: u32,
}

/// Heap bytes of one state's slot (the pools are counted by their items).
const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

impl Nfa {
    /// The NFA of `hir` (whole-text match; no look-around), within
    /// `size_limit` heap bytes.
    #[cfg(test)]
    pub(crate) fn new(hir: &Hir, size_limit: usize) -> Result<Nfa, GrammarError> {
        Nfa::compiled(&[Part::Tree(hir)], size_limit, true)
    }

    /// The NFA of `parts` one after the other (their concatenation,
    /// without a tree of it built; whole-text match, no look-around),
    /// within `size_limit` heap bytes.
    pub(crate) fn of_parts(parts: &[Part<'_>], size_limit: usize) -> Result<Nfa, GrammarError> {
        Nfa::compiled(parts, size_limit, true)
    }

    /// [`Nfa::new`] with a state for every place the regex writes one
    /// (none shared): what sharing is tested against.
    #[cfg(test)]
    pub(crate) fn with_copies(hir: &Hir, size_limit: usize) -> Result<Nfa, GrammarError> {
        Nfa::compiled(&[Part::Tree(hir)], size_limit, false)
    }

    fn compiled(parts: &[Part<'_>], size_limit: usize, share: bool) -> Result<Nfa, GrammarError> {
        let mut c = Compiler::new(size_limit);
        c.share = share;
        // The state table and pools of the last NFA made on this thread,
        // emptied: a lexeme's NFA is a few hundred states, and growing
        // them from nothing was a fifth of making it.
        let scratch = SCRATCH.with(|s| s.take()).unwrap_or_default();
        c.made = scratch.made;
        c.nfa.slots = scratch.slots;
        c.nfa.ranges = scratch.ranges;
        c.nfa.alternates = scratch.alternates;
        let mut next = c.push(Kind::Match, 0, 0)?;
        for part in parts.iter().rev() {
            next = match *part {
                Part::Tree(hir) => c.compile(hir, next)?,
                Part::OtherKeys(keys) => c.other_keys(keys, next)?,
            };
        }
        let nfa = Nfa {
            slots: c.nfa.slots.to_vec(),
            ranges: c.nfa.ranges.to_vec(),
            alternates: c.nfa.alternates.to_vec(),
            blocks: std::mem::take(&mut c.nfa.blocks),
            start: next,
        };
        if c.nfa.slots.capacity() <= SCRATCH_STATES {
            c.made.clear();
            c.nfa.slots.clear();
            c.nfa.ranges.clear();
            c.nfa.alternates.clear();
            let scratch = Scratch {
                made: c.made,
                slots: c.nfa.slots,
                ranges: c.nfa.ranges,
                alternates: c.nfa.alternates,
            };
            SCRATCH.with(|s| s.set(Some(scratch)));
        }
        Ok(nfa)
    }

    pub(crate) fn start(&self) -> u32 {
        self.start
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    pub(crate) fn state(&self, q: u32) -> State<'_> {
        let s = self.slots[q as usize];
        let (at, end) = (s.at as usize, (s.at + s.len) as usize);
        match s.kind {
            Kind::Bytes => State::Bytes(&self.ranges[at..end]),
            Kind::Union => State::Union(&self.alternates[at..end]),
            Kind::Match => State::Match,
            Kind::Run => {
                let b = self.blocks[s.at as usize];
                State::Run {
                    ranges: &self.ranges[b.at as usize..(b.at + b.len) as usize],
                    to: if s.len > 1 { q - 1 } else { b.exit },
                    exit: b.exit,
                    left: s.len,
                }
            }
        }
    }

    /// Whether `q` was made inside the body of an unbounded repetition:
    /// a state whose paths come back to it, what a thread that takes in
    /// others' texts is (a search's `.*` after its match). A hint, not a
    /// promise: a state made before, outside the loop, and found again
    /// inside it is not marked.
    #[inline]
    pub(crate) fn in_loop(&self, q: u32) -> bool {
        self.slots[q as usize].in_loop
    }

    #[inline]
    pub(crate) fn is_match(&self, q: u32) -> bool {
        matches!(self.slots[q as usize].kind, Kind::Match)
    }

    /// Every state, in order.
    pub(crate) fn states(&self) -> impl Iterator<Item = State<'_>> {
        (0..self.slots.len() as u32).map(|q| self.state(q))
    }

    /// The byte classes: bytes no range tells apart share a class (cut at
    /// every range's two ends), numbered from 0 in byte order.
    pub(crate) fn byte_classes(&self) -> [u8; 256] {
        let mut cut = [false; 257];
        for t in &self.ranges {
            cut[t.start as usize] = true;
            cut[t.end as usize + 1] = true;
        }
        let mut classes = [0u8; 256];
        let mut class = 0u8;
        for b in 1..256 {
            if cut[b] {
                class += 1;
            }
            classes[b] = class;
        }
        classes
    }

    pub(crate) fn memory_usage(&self) -> usize {
        self.slots.capacity() * SLOT_BYTES
            + self.ranges.capacity() * std::mem::size_of::<Transition>()
            + self.alternates.capacity() * 4
            + self.blocks.capacity() * std::mem::size_of::<Block>()
    }
}

/// What [`Nfa::compiled`] keeps on its thread from one NFA to the next
/// (emptied), so that a new NFA grows no table.
#[derive(Default)]
struct Scratch {
    made: HashTable<(u64, u32)>,
    slots: Vec<Slot>,
    ranges: Vec<Transition>,
    alternates: Vec<u32>,
}

/// Most states of an NFA whose tables are kept as [`Scratch`] (a big
/// one's are freed with it).
const SCRATCH_STATES: usize = 1 << 14;

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

struct Compiler<'h> {
    nfa: Nfa,
    size_limit: usize,
    /// Every byte or union state made, with its hash ([`slot_hash`], kept
    /// so that growing the table hashes no state again), found by its kind
    /// and its ranges or alternates: a state made again is the one made
    /// before.
    made: HashTable<(u64, u32)>,
    /// Unbounded repetitions compiled, by the hash of their tree and the
    /// state after them: the entry of the same loop before the same state.
    loops: HashMap<(u64, u32), Vec<(&'h Hir, u32)>>,
    /// [`hir_hash`] of the repetitions hashed so far (by address).
    hashes: HashMap<*const Hir, u64>,
    /// Templates copied, by address and the state after them: the entry
    /// of the copy (the template kept alive, so the address stays its).
    copies: HashMap<(*const Template, u32), (Rc<Template>, u32)>,
    /// Blocks of a bounded repetition of a byte class, by the hash of the
    /// class and the exit: the block with the most copies, whose lower
    /// copies serve a repetition of fewer.
    blocks: HashMap<(u64, u32), u32>,
    /// Whether states are shared as above (always, but in tests).
    share: bool,
    /// How many loop bodies the compiler is inside ([`Slot::in_loop`]).
    loop_depth: u32,
    /// The entry of every loop made ([`Compiler::looped`]), in the order
    /// made: ascending.
    loop_entries: Vec<u32>,
}

impl<'h> Compiler<'h> {
    fn new(size_limit: usize) -> Compiler<'h> {
        Compiler {
            nfa: Nfa {
                slots: Vec::new(),
                ranges: Vec::new(),
                alternates: Vec::new(),
                blocks: Vec::new(),
                start: 0,
            },
            size_limit,
            made: HashTable::new(),
            loops: HashMap::new(),
            hashes: HashMap::new(),
            copies: HashMap::new(),
            blocks: HashMap::new(),
            share: true,
            loop_depth: 0,
            loop_entries: Vec::new(),
        }
    }

    fn push(&mut self, kind: Kind, at: u32, len: u32) -> Result<u32, GrammarError> {
        let bytes = (self.nfa.slots.len() + 1) * SLOT_BYTES
            + self.nfa.ranges.len() * std::mem::size_of::<Transition>()
            + self.nfa.alternates.len() * 4;
        if bytes > self.size_limit {
            return Err(GrammarError::LimitExceeded {
                what: "the regex's NFA (heap bytes)".into(),
                limit: self.size_limit,
                knob: "nfa_size_limit".into(),
            });
        }
        self.nfa.slots.push(Slot {
            kind,
            in_loop: self.loop_depth > 0,
            at,
            len,
        });
        Ok(self.nfa.slots.len() as u32 - 1)
    }

    /// The state of the last `len` entries of the pool of `kind` (just
    /// written): one made before with the same ones (the entries taken
    /// back), or a new one.
    fn intern(&mut self, kind: Kind, len: usize) -> Result<u32, GrammarError> {
        let nfa = &self.nfa;
        let at = match kind {
            Kind::Bytes => nfa.ranges.len() - len,
            _ => nfa.alternates.len() - len,
        };
        if !self.share {
            return self.push(kind, at as u32, len as u32);
        }
        let hash = slot_hash(nfa, kind, at, len);
        let same = |&(h, q): &(u64, u32)| {
            if h != hash {
                return false;
            }
            let s = nfa.slots[q as usize];
            match (kind, s.kind) {
                (Kind::Bytes, Kind::Bytes) => {
                    nfa.ranges[s.at as usize..(s.at + s.len) as usize] == nfa.ranges[at..]
                }
                (Kind::Union, Kind::Union) => {
                    nfa.alternates[s.at as usize..(s.at + s.len) as usize] == nfa.alternates[at..]
                }
                _ => false,
            }
        };
        if let Some(&(_, q)) = self.made.find(hash, same) {
            match kind {
                Kind::Bytes => self.nfa.ranges.truncate(at),
                _ => self.nfa.alternates.truncate(at),
            }
            return Ok(q);
        }
        let q = self.push(kind, at as u32, len as u32)?;
        self.made.insert_unique(hash, (hash, q), |&(h, _)| h);
        Ok(q)
    }

    fn bytes(&mut self, ranges: impl IntoIterator<Item = Transition>) -> Result<u32, GrammarError> {
        let at = self.nfa.ranges.len();
        self.nfa.ranges.extend(ranges);
        let len = self.nfa.ranges.len() - at;
        self.intern(Kind::Bytes, len)
    }

    /// A union of `alternates` (one alone is itself, no state).
    fn union(&mut self, alternates: &[u32]) -> Result<u32, GrammarError> {
        if let [one] = alternates {
            return Ok(*one);
        }
        self.nfa.alternates.extend_from_slice(alternates);
        self.intern(Kind::Union, alternates.len())
    }

    /// The entry of `hir` followed by the state `next`.
    fn compile(&mut self, hir: &'h Hir, next: u32) -> Result<u32, GrammarError> {
        match hir.kind() {
            HirKind::Empty => Ok(next),
            HirKind::Literal(lit) => {
                let mut at = next;
                for &b in lit.0.iter().rev() {
                    at = self.bytes([Transition {
                        start: b,
                        end: b,
                        next: at,
                    }])?;
                }
                Ok(at)
            }
            HirKind::Class(Class::Bytes(class)) => {
                self.bytes(class.ranges().iter().map(|r| Transition {
                    start: r.start(),
                    end: r.end(),
                    next,
                }))
            }
            HirKind::Class(Class::Unicode(class)) => {
                let ranges = class.ranges();
                if ranges.last().is_none_or(|r| r.end().is_ascii()) {
                    // One byte a character: one state.
                    return self.bytes(ranges.iter().map(|r| Transition {
                        start: r.start() as u8,
                        end: r.end() as u8,
                        next,
                    }));
                }
                let template = template(ranges);
                self.instantiate(&template, next)
            }
            HirKind::Look(_) => Err(GrammarError::Unsupported {
                location: Location::None,
                what: "look-around in a lazily built DFA".into(),
            }),
            HirKind::Capture(c) => self.compile(&c.sub, next),
            HirKind::Concat(subs) => {
                let mut at = next;
                for sub in subs.iter().rev() {
                    at = self.compile(sub, at)?;
                }
                Ok(at)
            }
            HirKind::Alternation(subs) => {
                let mut entries = Vec::with_capacity(subs.len());
                for sub in subs {
                    entries.push(self.compile(sub, next)?);
                }
                self.union(&entries)
            }
            // `x{min,}`: one loop, made once for each state it leads to
            // (a tree written in two places before the same state, as the
            // two `x` of `x(?:,x)*`, is one loop, whose states no step
            // then tells apart).
            HirKind::Repetition(r) if r.max.is_none() => {
                if !self.share {
                    return self.looped(r, next);
                }
                let hash = self.hir_hash(hir);
                if let Some(known) = self.loops.get(&(hash, next))
                    && let Some(&(_, entry)) = known.iter().find(|(h, _)| *h == hir)
                {
                    return Ok(entry);
                }
                let entry = self.looped(r, next)?;
                self.loops
                    .entry((hash, next))
                    .or_default()
                    .push((hir, entry));
                Ok(entry)
            }
            // Optional copies, each of which may end the repetition, nested
            // from the last, then the required ones. Every copy makes its
            // states, so the size limit ends a repetition of many:
            // `Hir::repetition` caps the count of what matches only the
            // empty text at one.
            HirKind::Repetition(r) => {
                let optional = r.max.unwrap_or(r.min) - r.min;
                if optional >= 2
                    && let Some(class) = byte_class(&r.sub)
                {
                    let mut at = if self.reads_back(&class, next) {
                        next
                    } else {
                        self.run(&class, optional, next)?
                    };
                    for _ in 0..r.min {
                        at = self.compile(&r.sub, at)?;
                    }
                    return Ok(at);
                }
                let mut at = next;
                for _ in r.min..r.max.unwrap_or(r.min) {
                    let body = self.compile(&r.sub, at)?;
                    at = self.union(&[body, next])?;
                }
                for _ in 0..r.min {
                    at = self.compile(&r.sub, at)?;
                }
                Ok(at)
            }
        }
    }

    /// `X{0,copies}` before `next`, `X` the byte class of `class` (not
    /// empty): a block of [`State::Run`] copies, its entry the copy with
    /// `copies` bytes left. One made before for the same class and state
    /// with at least as many copies serves (its lower copies).
    fn run(&mut self, class: &[(u8, u8)], copies: u32, next: u32) -> Result<u32, GrammarError> {
        let mut h = Mix::new(u64::from(next));
        class
            .iter()
            .for_each(|&(a, b)| h.add(u64::from(a) << 8 | u64::from(b)));
        let key = (h.finish(), next);
        if self.share
            && let Some(&i) = self.blocks.get(&key)
        {
            let b = self.nfa.blocks[i as usize];
            let same = self.nfa.ranges[b.at as usize..(b.at + b.len) as usize]
                .iter()
                .map(|t| (t.start, t.end))
                .eq(class.iter().copied());
            if same && b.copies >= copies {
                return Ok(b.base + copies - 1);
            }
        }
        let at = self.nfa.ranges.len() as u32;
        self.nfa.ranges.extend(
            class
                .iter()
                .map(|&(start, end)| Transition { start, end, next }),
        );
        let block = self.nfa.blocks.len() as u32;
        let base = self.nfa.slots.len() as u32;
        self.nfa.blocks.push(Block {
            at,
            len: class.len() as u32,
            exit: next,
            base,
            copies,
        });
        for left in 1..=copies {
            self.push(Kind::Run, block, left)?;
        }
        if self.share {
            self.blocks.insert(key, block);
        }
        Ok(base + copies - 1)
    }

    /// Whether `next` reads every byte of `class` back into itself
    /// through its empty moves (`next` is a loop `Y*` with the class
    /// within `Y`): then `X{0,n}` before it matches what `next` alone
    /// does, and its copies are left out. A search for a bounded run
    /// (`[a-zA-Z0-9_-]{1,40}` in a string: `.*X{1,40}.*`) otherwise kept a
    /// thread for every copy after its match, a lazy DFA state of its own
    /// for each of 40 characters, each walked anew.
    fn reads_back(&self, class: &[(u8, u8)], next: u32) -> bool {
        // Most runs come before no loop (JSON's whitespace before a colon,
        // a quote or a union of keys).
        if self.loop_entries.binary_search(&next).is_err() {
            return false;
        }
        // The states `next` reaches without reading (at most 16), and the
        // bytes that lead from one of them back to `next`.
        let mut reached = [0u32; 16];
        reached[0] = next;
        let (mut len, mut k) = (1, 0);
        let mut back = [0u64; 4];
        let bytes = |(a, b): (u8, u8)| (a..=b).map(|x| (x as usize / 64, 1u64 << (x % 64)));
        while k < len {
            let q = reached[k];
            k += 1;
            match self.nfa.state(q) {
                State::Union(alternates) => {
                    for &a in alternates {
                        if !reached[..len].contains(&a) {
                            if len == reached.len() {
                                return false;
                            }
                            reached[len] = a;
                            len += 1;
                        }
                    }
                }
                State::Bytes(ranges) => {
                    for t in ranges.iter().filter(|t| t.next == next) {
                        bytes((t.start, t.end)).for_each(|(w, bit)| back[w] |= bit);
                    }
                }
                State::Match | State::Run { .. } => {}
            }
        }
        class
            .iter()
            .all(|&range| bytes(range).all(|(w, bit)| back[w] & bit != 0))
    }

    /// `x{min,}` (`r`) before `next`: a loop through one copy of `x`,
    /// entered through the last of the required ones (or skipped).
    fn looped(&mut self, r: &'h Repetition, next: u32) -> Result<u32, GrammarError> {
        // Made apart (not interned): its alternates are written once the
        // body is made.
        let looped = self.push(Kind::Union, 0, 0)?;
        self.loop_entries.push(looped);
        self.loop_depth += 1;
        let body = self.compile(&r.sub, looped);
        self.loop_depth -= 1;
        let body = body?;
        let pool = self.nfa.alternates.len() as u32;
        self.nfa.alternates.extend_from_slice(&[body, next]);
        self.nfa.slots[looped as usize].at = pool;
        self.nfa.slots[looped as usize].len = 2;
        if r.min == 0 {
            return Ok(looped);
        }
        let mut at = body;
        for _ in 1..r.min {
            at = self.compile(&r.sub, at)?;
        }
        Ok(at)
    }

    /// A hash of `hir`'s tree (equal trees hash equal), each repetition's
    /// kept: the loops inside a loop are hashed once, with it.
    fn hir_hash(&mut self, hir: &'h Hir) -> u64 {
        let key = hir as *const Hir;
        let repetition = matches!(hir.kind(), HirKind::Repetition(_));
        if repetition && let Some(&h) = self.hashes.get(&key) {
            return h;
        }
        let mut h = Mix::new(hir_tag(hir));
        match hir.kind() {
            HirKind::Empty => {}
            HirKind::Literal(lit) => lit.0.iter().for_each(|&b| h.add(u64::from(b))),
            HirKind::Class(Class::Unicode(c)) => {
                for r in c.ranges() {
                    h.add(u64::from(r.start()) << 32 | u64::from(r.end()));
                }
            }
            HirKind::Class(Class::Bytes(c)) => {
                for r in c.ranges() {
                    h.add(u64::from(r.start()) << 8 | u64::from(r.end()));
                }
            }
            HirKind::Look(look) => h.add(u64::from(look.as_repr())),
            HirKind::Repetition(r) => {
                h.add(u64::from(r.min));
                h.add(r.max.map_or(u64::MAX, u64::from));
                h.add(u64::from(r.greedy));
                let sub = self.hir_hash(&r.sub);
                h.add(sub);
            }
            HirKind::Capture(c) => {
                let sub = self.hir_hash(&c.sub);
                h.add(sub);
            }
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                for sub in subs {
                    let sub = self.hir_hash(sub);
                    h.add(sub);
                }
            }
        }
        let h = h.finish();
        if repetition {
            self.hashes.insert(key, h);
        }
        h
    }

    /// A copy of `template`'s states leading to `next`; its entry.
    fn instantiate(&mut self, template: &Rc<Template>, next: u32) -> Result<u32, GrammarError> {
        let key = (Rc::as_ptr(template), next);
        if self.share
            && let Some(&(_, entry)) = self.copies.get(&key)
        {
            return Ok(entry);
        }
        let base = self.nfa.slots.len() as u32;
        let mut at = 0;
        for &end in &template.ends {
            let ranges = template.ranges[at..end as usize]
                .iter()
                .map(|t| Transition {
                    next: if t.next == TO_NEXT {
                        next
                    } else {
                        base + t.next
                    },
                    ..*t
                });
            at = end as usize;
            // Pushed, not interned: the copy's states are numbered from
            // `base` in the template's order.
            let start = self.nfa.ranges.len();
            self.nfa.ranges.extend(ranges);
            let len = self.nfa.ranges.len() - start;
            self.push(Kind::Bytes, start as u32, len as u32)?;
        }
        let entry = base + template.entry;
        self.copies.insert(key, (template.clone(), entry));
        Ok(entry)
    }

    /// A quoted key that is none of `keys`' names before `next`: one byte
    /// state a node of the names' trie (no empty moves), whose ranges lead
    /// to its children (a non-ASCII child through the continuation bytes
    /// of its character), to the closing quote where no name ends, and
    /// with every other character of a key to the rest of any key
    /// ([`free_key_rest`]). Only a non-ASCII child shares its first byte
    /// with characters that leave the trie: elsewhere a byte leads to
    /// one state, as in a DFA.
    fn other_keys(&mut self, keys: &OtherKeys, next: u32) -> Result<u32, GrammarError> {
        let rest = self.compile(free_key_rest(), next)?;
        let trie = keys.trie();
        // Non-ASCII characters that leave the trie where no name goes on
        // with one: a template made once, copied once before `rest`.
        let all_non_ascii = [ClassUnicodeRange::new('\u{80}', '\u{10FFFF}')];
        let leave_all = self.leave_non_ascii(&all_non_ascii, rest)?;
        let mut states = vec![0u32; trie.len()];
        let mut ranges: Vec<Transition> = Vec::new();
        // Children come after their node: made first, from the last.
        for (i, node) in trie.iter().enumerate().rev() {
            ranges.clear();
            // ASCII: each child's byte to it, the bytes between to the
            // rest of any key, and the closing quote where no name ends.
            let mut from = 0x20u8;
            for &(c, child) in node.children.iter().filter(|(c, _)| c.is_ascii()) {
                let b = c as u8;
                push_key_bytes(&mut ranges, from, b, rest);
                ranges.push(Transition {
                    start: b,
                    end: b,
                    next: states[child as usize],
                });
                from = b + 1;
            }
            push_key_bytes(&mut ranges, from, 0x80, rest);
            if !node.end {
                ranges.push(Transition {
                    start: b'"',
                    end: b'"',
                    next,
                });
            }
            // Non-ASCII: each child's character through its continuation
            // bytes, every other one to the rest of any key.
            let mut wide = Vec::new();
            for &(c, child) in node.children.iter().filter(|(c, _)| !c.is_ascii()) {
                let mut utf8 = [0u8; 4];
                let bytes = c.encode_utf8(&mut utf8).as_bytes();
                let mut at = states[child as usize];
                for &b in bytes[1..].iter().rev() {
                    at = self.bytes([Transition {
                        start: b,
                        end: b,
                        next: at,
                    }])?;
                }
                ranges.push(Transition {
                    start: bytes[0],
                    end: bytes[0],
                    next: at,
                });
                wide.push(c);
            }
            let leave = if wide.is_empty() {
                leave_all
            } else {
                let mut others = ClassUnicode::new(all_non_ascii);
                others.difference(&ClassUnicode::new(
                    wide.iter().map(|&c| ClassUnicodeRange::new(c, c)),
                ));
                self.leave_non_ascii(others.ranges(), rest)?
            };
            if let Some(leave) = leave {
                let State::Bytes(first) = self.nfa.state(leave) else {
                    unreachable!("a class's entry reads a byte");
                };
                ranges.extend_from_slice(first);
            }
            states[i] = self.bytes(ranges.iter().copied())?;
        }
        self.bytes([Transition {
            start: b'"',
            end: b'"',
            next: states[0],
        }])
    }

    /// The entry of the UTF-8 sequences of `class` (non-ASCII characters)
    /// before `next`, or `None` for an empty class (the same class made
    /// earlier before the same state is that copy, see
    /// [`Compiler::instantiate`]).
    fn leave_non_ascii(
        &mut self,
        class: &[ClassUnicodeRange],
        next: u32,
    ) -> Result<Option<u32>, GrammarError> {
        if class.is_empty() {
            return Ok(None);
        }
        self.instantiate(&template(class), next).map(Some)
    }

    /// The trie of UTF-8 `sequences` (in code point order, so those with
    /// one first range are together) leading to `next`.
    fn utf8_trie(&mut self, sequences: &[&[Utf8Range]], next: u32) -> Result<u32, GrammarError> {
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < sequences.len() {
            let first = sequences[i][0];
            let mut j = i + 1;
            while j < sequences.len() && sequences[j][0] == first {
                j += 1;
            }
            let to = if sequences[i].len() == 1 {
                next
            } else {
                let rest: Vec<&[Utf8Range]> = sequences[i..j].iter().map(|s| &s[1..]).collect();
                self.utf8_trie(&rest, next)?
            };
            ranges.push(Transition {
                start: first.start,
                end: first.end,
                next: to,
            });
            i = j;
        }
        self.bytes(ranges)
    }
}

/// The byte ranges of `hir` if it reads one byte whatever it reads (a
/// class of bytes, a class of ASCII characters, one byte), in order.
fn byte_class(hir: &Hir) -> Option<Vec<(u8, u8)>> {
    match hir.kind() {
        HirKind::Class(Class::Bytes(c)) if !c.ranges().is_empty() => {
            Some(c.ranges().iter().map(|r| (r.start(), r.end())).collect())
        }
        HirKind::Class(Class::Unicode(c))
            if !c.ranges().is_empty() && c.ranges().iter().all(|r| r.end().is_ascii()) =>
        {
            Some(
                c.ranges()
                    .iter()
                    .map(|r| (r.start() as u8, r.end() as u8))
                    .collect(),
            )
        }
        HirKind::Literal(lit) if lit.0.len() == 1 => Some(vec![(lit.0[0], lit.0[0])]),
        HirKind::Capture(c) => byte_class(&c.sub),
        _ => None,
    }
}

/// Pushes the bytes from `from` up to `to` (not included) that a key
/// holds unescaped (not `"`, not `\`) as ranges leading to `rest`.
fn push_key_bytes(ranges: &mut Vec<Transition>, from: u8, to: u8, rest: u32) {
    let mut start = from;
    for cut in [b'"', b'\\', to] {
        let end = cut.min(to);
        if start < end {
            ranges.push(Transition {
                start,
                end: end - 1,
                next: rest,
            });
        }
        start = start.max(cut + 1);
        if start >= to {
            return;
        }
    }
}

/// Every character a JSON string holds unescaped, any number of them, and
/// the closing quote: what follows a key once it has left the trie of the
/// names ([`Compiler::other_keys`]).
fn free_key_rest() -> &'static Hir {
    static REST: OnceLock<Hir> = OnceLock::new();
    REST.get_or_init(|| {
        crate::dfa::parse(r#"[^"\\\x00-\x1F]*""#).expect("the rest of a key is a regex")
    })
}

/// The hash a state is found by in [`Compiler::made`]: its kind and the
/// `len` entries of its pool from `at`.
fn slot_hash(nfa: &Nfa, kind: Kind, at: usize, len: usize) -> u64 {
    let mut h = Mix::new(kind as u64);
    match kind {
        Kind::Bytes => {
            for t in &nfa.ranges[at..at + len] {
                h.add(u64::from(t.start) | u64::from(t.end) << 8 | u64::from(t.next) << 16);
            }
        }
        _ => nfa.alternates[at..at + len]
            .iter()
            .for_each(|&q| h.add(u64::from(q))),
    }
    h.finish()
}

/// A tag per kind of tree node, for [`Compiler::hir_hash`].
fn hir_tag(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty => 1,
        HirKind::Literal(_) => 2,
        HirKind::Class(Class::Unicode(_)) => 3,
        HirKind::Class(Class::Bytes(_)) => 4,
        HirKind::Look(_) => 5,
        HirKind::Repetition(_) => 6,
        HirKind::Capture(_) => 7,
        HirKind::Concat(_) => 8,
        HirKind::Alternation(_) => 9,
    }
}

/// A multiply-rotate hash (as FxHash) with a finalizer that spreads it
/// over every bit (`HashTable` takes buckets from the low bits, tags from
/// the high ones).
pub(crate) struct Mix(u64);

impl Mix {
    pub(crate) fn new(seed: u64) -> Mix {
        Mix(seed)
    }

    pub(crate) fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    pub(crate) fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

/// The `next` of a [`Template`]'s transition that leaves the class.
const TO_NEXT: u32 = u32::MAX;

/// The UTF-8 trie of a Unicode class, made once a thread and copied into
/// each NFA that holds the class (a JSON schema's lexemes hold the string
/// character class in every string): its states in order, state `i` the
/// ranges up to `ends[i]`, each leading to another state of the template
/// or, at [`TO_NEXT`], out of the class.
struct Template {
    ranges: Vec<Transition>,
    ends: Vec<u32>,
    entry: u32,
}

/// Classes kept a thread (the distinct non-ASCII classes of a grammar are
/// few; past this many, the oldest make way).
const TEMPLATES: usize = 32;

thread_local! {
    static KEPT: std::cell::RefCell<Vec<(Vec<ClassUnicodeRange>, Rc<Template>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The template of the class of `ranges` (not empty), made now if this
/// thread has not kept it.
fn template(ranges: &[ClassUnicodeRange]) -> Rc<Template> {
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some((_, t)) = kept.iter().find(|(r, _)| r.as_slice() == ranges) {
            return t.clone();
        }
        let sequences: Vec<Vec<Utf8Range>> = ranges
            .iter()
            .flat_map(|r| Utf8Sequences::new(r.start(), r.end()))
            .map(|s| s.as_slice().to_vec())
            .collect();
        let slices: Vec<&[Utf8Range]> = sequences.iter().map(Vec::as_slice).collect();
        let mut c = Compiler::new(usize::MAX);
        let entry = c
            .utf8_trie(&slices, TO_NEXT)
            .expect("no limit on a class's trie");
        let t = Rc::new(Template {
            ends: c.nfa.slots.iter().map(|s| s.at + s.len).collect(),
            ranges: c.nfa.ranges,
            entry,
        });
        if kept.len() == TEMPLATES {
            kept.remove(0);
        }
        kept.push((ranges.to_vec(), t.clone()));
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokensieve_core::testing::SplitMix64;

    fn nfa(regex: &str) -> Nfa {
        Nfa::new(&crate::dfa::parse(regex).unwrap(), 10 << 20).unwrap()
    }

    /// Whether the NFA matches `text` whole (a set simulation).
    fn matches(nfa: &Nfa, text: &[u8]) -> bool {
        fn close(nfa: &Nfa, set: &mut Vec<u32>) {
            let mut stack = set.clone();
            while let Some(q) = stack.pop() {
                let alts = match nfa.state(q) {
                    State::Union(alts) => alts,
                    State::Run { exit, .. } => &[exit][..],
                    _ => &[],
                };
                for &a in alts {
                    if !set.contains(&a) {
                        set.push(a);
                        stack.push(a);
                    }
                }
            }
        }
        let mut set = vec![nfa.start()];
        close(nfa, &mut set);
        for &b in text {
            let mut next = Vec::new();
            for &q in &set {
                let (ranges, to) = match nfa.state(q) {
                    State::Bytes(ranges) => (ranges, None),
                    State::Run { ranges, to, .. } => (ranges, Some(to)),
                    _ => continue,
                };
                for t in ranges {
                    let next_state = to.unwrap_or(t.next);
                    if (t.start..=t.end).contains(&b) && !next.contains(&next_state) {
                        next.push(next_state);
                    }
                }
            }
            close(nfa, &mut next);
            set = next;
        }
        set.iter().any(|&q| nfa.is_match(q))
    }

    #[test]
    fn the_nfa_matches_what_the_regex_matches() {
        let regexes = [
            r"abc",
            r"a|bc|",
            r"(?:ab)*c",
            r"a{2,4}",
            r"(?:a|b){0,3}c",
            r"(?:x?){3,}y",
            r"[^a]é",
            r"\p{Greek}+",
            r"[\x{800}-\x{83F}\x{880}-\x{8BF}]",
            r"(?-u:[a-c\x00])x",
            r"😀|中",
            r"a+|b[^\x00-\x{10FFFF}]",
            r"é{2,3}|中+x|😀?",
        ];
        let texts: [&[u8]; 16] = [
            b"",
            b"abc",
            b"a",
            b"bc",
            b"ababc",
            b"c",
            b"aa",
            b"aaaaa",
            b"abac",
            b"xxxxy",
            b"y",
            "bé".as_bytes(),
            "αβγ".as_bytes(),
            "\u{800}".as_bytes(),
            "\u{840}".as_bytes(),
            "😀".as_bytes(),
        ];
        for regex in regexes {
            let reference = crate::ByteDfa::build(regex, &crate::dfa::tests::limits()).unwrap();
            let nfa = nfa(regex);
            for text in texts {
                let expected = crate::lazy::tests::walk(&reference, text)
                    .is_some_and(|s| reference.is_accepting(s));
                assert_eq!(
                    matches(&nfa, text),
                    expected,
                    "{regex} on {:?}",
                    String::from_utf8_lossy(text)
                );
            }
            // Every range is a run of whole byte classes.
            let classes = nfa.byte_classes();
            for t in &nfa.ranges {
                let (start, end) = (t.start as usize, t.end as usize);
                assert!(
                    start == 0 || classes[start] != classes[start - 1],
                    "{regex}"
                );
                assert!(end == 255 || classes[end] != classes[end + 1], "{regex}");
            }
        }
    }

    /// A random regex of literals, classes, sequences, alternations and
    /// repetitions (copies of a sub-expression made by counts and by the
    /// array shape `x(?:,x)*`).
    fn random_regex(r: &mut SplitMix64, depth: u32) -> String {
        const ATOMS: [&str; 5] = ["a", "b", "é", "[a-c]", ","];
        if depth == 0 || r.below(3) == 0 {
            return ATOMS[r.below(ATOMS.len())].to_string();
        }
        let mut one = || random_regex(r, depth - 1);
        let (x, y) = (one(), one());
        match r.below(6) {
            0 | 1 => format!("{x}{y}"),
            2 => format!("(?:{x}|{y})"),
            3 => format!("(?:{x})*"),
            4 => format!("(?:{x}){{1,3}}"),
            _ => format!("{x}(?:,{x})*{y}"),
        }
    }

    /// Copies of a tree before one state are one set of states: the first
    /// item of an array adds no state to the loop of the others, and a
    /// member reachable two ways is made once. Trees before different
    /// states, or different trees, are not merged: on hand-written and
    /// random regexes the NFA matches what the NFA with every copy
    /// matches.
    #[test]
    fn copies_before_one_state_are_one() {
        for item in [
            "x",
            r#""[a-c]*""#,
            r#"\{"a":"[^"]*"(?:,"b":[0-9]+)?\}"#,
            "é+",
        ] {
            let array = nfa(&format!("{item}(?:,{item})*"));
            let rest = nfa(&format!("(?:,{item})*"));
            assert_eq!(array.len(), rest.len(), "{item}");
            let hir = crate::dfa::parse(&format!("{item}(?:,{item})*")).unwrap();
            assert!(Nfa::with_copies(&hir, 10 << 20).unwrap().len() > array.len());
        }
        // `b(?:,c)?` and `c` are made once, for the first alternative.
        assert_eq!(
            nfa(r"a(?:,b)?(?:,c)?|b(?:,c)?|c").len(),
            nfa(r"a(?:,b)?(?:,c)?").len() + 1
        );
        let mut regexes: Vec<String> = [
            // One loop before two states, and two before one.
            r"(?:a*)b|(?:a*)c",
            r"(?:ab)*(?:ab)*c",
            r"(?:é+)x|(?:é+)y|é+",
            r"(?:a|b)*(?:a|c)*",
            r"(?:a{2,}|a+)b|(?:a+)?c",
        ]
        .map(String::from)
        .to_vec();
        let mut r = SplitMix64(5);
        regexes.extend((0..300).map(|_| random_regex(&mut r, 4)));
        let alphabet = ["a", "b", "c", "é", ",", "x", "y"];
        for regex in &regexes {
            let Ok(hir) = crate::dfa::parse(regex) else {
                continue;
            };
            let (Ok(shared), Ok(copies)) =
                (Nfa::new(&hir, 10 << 20), Nfa::with_copies(&hir, 10 << 20))
            else {
                continue;
            };
            for _ in 0..200 {
                let text: String = (0..r.below(12))
                    .map(|_| alphabet[r.below(alphabet.len())])
                    .collect();
                assert_eq!(
                    matches(&shared, text.as_bytes()),
                    matches(&copies, text.as_bytes()),
                    "{regex} on {text:?}"
                );
            }
        }
    }

    /// `X{m,n}` of a byte class is `m` byte states and a block of `n - m`
    /// copies, one slot each; a block before the same state with more
    /// copies serves one with fewer. Each matches what the regex matches
    /// (against the eager DFA, on random texts of the classes' bytes and
    /// others).
    #[test]
    fn a_bounded_run_of_a_class_is_a_block_of_copies() {
        // Match, `x`, twenty copies.
        assert_eq!(nfa(r"[ \t\n\r]{0,20}x").len(), 22);
        // `b`, a block of five, `a`, and the copies of three are the
        // block's: no state more for the second branch.
        assert_eq!(
            nfa(r"(?:a[ ]{0,5}|[ ]{0,3})b").len(),
            nfa(r"(?:a[ ]{0,5})b").len() + 1
        );
        let regexes = [
            r"[ \t]{0,20}x",
            r"a{2,6}",
            r"(?:a[ ]{0,5}|[ ]{0,3})b",
            r"(?:[ ]{0,3}|a[ ]{0,5})b",
            r"(?:[ab]{1,4},){0,3}[ab]{0,2}",
            r"(?:[ ]{0,4},[ ]{0,4}x)*[ ]{0,2}",
            r"(?-u:[a\x00]{0,3})b",
            r"x{0,3}x{0,2}y",
        ];
        let alphabet: [&[u8]; 7] = [b" ", b"\t", b"a", b"b", b",", b"x", b"y"];
        let mut r = SplitMix64(11);
        // Every count of a byte of the runs around each bound.
        let counted = (0..9).flat_map(|k| {
            [b"", b"a" as &[u8]]
                .into_iter()
                .flat_map(move |a| [b' ', b'x'].map(|c| [a, &vec![c; k][..], b"b"].concat()))
        });
        for regex in regexes {
            let reference = crate::ByteDfa::build(regex, &crate::dfa::tests::limits()).unwrap();
            let nfa = nfa(regex);
            let random: Vec<Vec<u8>> = (0..2_000)
                .map(|_| {
                    let zero = regex.contains("x00") && r.below(2) == 0;
                    let n = r.below(14);
                    let rest = (0..n).flat_map(|_| alphabet[r.below(alphabet.len())]);
                    zero.then_some(&0u8)
                        .into_iter()
                        .chain(rest)
                        .copied()
                        .collect()
                })
                .collect();
            for text in counted.clone().chain(random) {
                let expected = crate::lazy::tests::walk(&reference, &text)
                    .is_some_and(|s| reference.is_accepting(s));
                assert_eq!(
                    matches(&nfa, &text),
                    expected,
                    "{regex} on {:?}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
    }

    /// `X{0,n}` before a loop that reads every byte of `X` back into
    /// itself is the loop: no block of copies, the same texts. Before a
    /// loop of a narrower class, or one whose body does not come back at
    /// once, the copies stay.
    #[test]
    fn a_bounded_run_before_a_loop_that_reads_it_is_the_loop() {
        let cases = [
            (r"[a-c]{1,40}[a-d]*x", false),
            (r"y[ab]{0,9}(?:[^y]|yy)*x", false),
            (r"[a-c]{0,20}[a-b]*x", true),
            (r"[ab]{0,20}(?:ab)*x", true),
            (r"[ab]{0,5}(?:[ab]y)*x", true),
        ];
        let alphabet: [&[u8]; 5] = [b"a", b"b", b"c", b"y", b"x"];
        let mut r = SplitMix64(13);
        for (regex, copies) in cases {
            let nfa = nfa(regex);
            assert_eq!(!nfa.blocks.is_empty(), copies, "{regex}: copies kept");
            let reference = crate::ByteDfa::build(regex, &crate::dfa::tests::limits()).unwrap();
            let texts = (0..3_000).map(|_| {
                let n = r.below(50);
                (0..n)
                    .flat_map(|_| alphabet[r.below(alphabet.len())])
                    .copied()
                    .collect::<Vec<u8>>()
            });
            let long = (0..60).map(|k| [&vec![b'a'; k][..], b"x"].concat());
            for text in long.chain(texts) {
                let expected = crate::lazy::tests::walk(&reference, &text)
                    .is_some_and(|s| reference.is_accepting(s));
                assert_eq!(matches(&nfa, &text), expected, "{regex} on {text:?}");
            }
        }
    }

    #[test]
    fn a_wide_class_shares_its_continuation_bytes() {
        let letters = nfa(r"\p{L}");
        assert!(letters.len() < 1_000, "{} states", letters.len());
        let error = Nfa::new(&crate::dfa::parse(r"\p{L}{500}").unwrap(), 1 << 20).unwrap_err();
        assert!(error.to_string().contains("nfa_size_limit"), "{error}");
    }
}
