//! [`LazyCounted`]: `X{min,max}` followed by `C` as a DFA that counts the
//! copies of `X` instead of holding one copy of `X`'s states for each of
//! them.
//!
//! A JSON string with `maxLength: 32767` is `"` then 32,767 optional
//! characters, then `"`. As a regex, the automaton of that repetition has
//! one state per character and position; its NFA alone outweighs every
//! other part of a schema, and a walk of the token trie from each of its
//! positions is a new walk. Cut into blocks of rules (what the piece split
//! does without this), every token that crosses a block's end goes through
//! the parser: tens of milliseconds a mask in long free text.
//!
//! Here a state is a count and a state of `X` (or, once past the last copy,
//! a state of `C`), its id worked out from those: `X`'s automaton is made
//! once, whatever the count. Which tokens a
//! walk from a state keeps depends on the count only near the bounds: a
//! walk of the trie reads at most `depth` bytes, so from any count at
//! least `min` and at most `max - depth` it meets neither bound, and it
//! finds what it finds from the count `min` with the same state of `X`.
//! [`LazyCounted::shifted`] names that state, for a caller that keeps
//! what each state's walk found: one walk serves every position of the
//! string but its last `depth` characters.
//!
//! Made only where it is exact and deterministic: `X` matches no empty
//! string, no match of `X` is a prefix of another (a copy ends where its
//! automaton accepts), and no first byte of `X` is a first byte of `C` (at
//! a copy's end, the next byte says whether another copy or `C` starts).
//! JSON string characters and the closing quote are all of that;
//! [`LazyCounted::build`] says `None` otherwise.

use hashbrown::{HashMap, HashSet};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use regex_syntax::hir::Hir;
use tokensieve_core::GrammarError;

use crate::dfa::{Automaton, DEAD, DfaLimits, TextStep};
use crate::grow::Grow;
use crate::lazy::LazyDfa;

/// Counts this close to a bound get the lowest state ids (see
/// [`LazyCounted::slot`]): more than any vocabulary's longest token, which
/// is how far a trie walk reads.
#[cfg(not(test))]
const BOUND_REACH: u32 = 1024;
/// Small in tests, so that short repetitions have counts between the
/// bounds' neighbourhoods too.
#[cfg(test)]
const BOUND_REACH: u32 = 2;

/// Most states of `X` explored to check that its matches are prefix-free.
const MAX_BODY_STATES: usize = 4096;

/// Where a state is: at a count of copies in a state of `X`, or in `C`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Dead,
    Body { count: u32, q: u32 },
    Tail(u32),
}

/// A state of `X` and the side of `min` its count is on (see
/// [`LazyCounted::known_text_step`]).
type StepKind = (u32, u8);

/// `X{min,max} C`, walked as it is read (see the module docs).
///
/// A state's id is worked out from what it is, not kept: `(count, q)` is
/// `1 + count * w + q - 1` (`w` the live states of `X`, all made when it is
/// checked), a state `t` of `C` comes after every count. So a text of any
/// length costs no memory a character; only the transitions of states a
/// trie walk reads are kept.
pub struct LazyCounted {
    /// The regex it stands for (`X{min,max}C` in the regex-syntax
    /// dialect): what two of them are compared by.
    key: String,
    body: LazyDfa,
    tail: LazyDfa,
    min: u32,
    max: u32,
    /// Live states of `X`.
    width: u32,
    /// One more than the highest id.
    id_bound: u64,
    /// Counts up to this one have the lowest ids (see [`LazyCounted::slot`]).
    low_end: u32,
    /// Counts from this one to `max` come next; the counts between last.
    high_start: u32,

    classes: [u8; 256],
    /// One byte of each class, and how many bytes the class holds.
    reps: Vec<u8>,
    class_size: Vec<u16>,
    /// The transitions of the states walks have read, by class.
    rows: Grow<Box<[u32]>>,
    rows_made: AtomicUsize,
    /// The text step of the first state met of each kind (a state of `X`;
    /// the count `min` or more, `min - 1`, or less), and its count.
    steps: Mutex<HashMap<StepKind, (u32, Option<TextStep>)>>,
}

impl std::fmt::Debug for LazyCounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyCounted")
            .field("min", &self.min)
            .field("max", &self.max)
            .field("states", &self.num_states())
            .finish()
    }
}

impl PartialEq for LazyCounted {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for LazyCounted {}

impl LazyCounted {
    /// `body{min,max}` then `tail` (`key` the regex text of the whole), or
    /// `None` where counting would not be exact or deterministic (see the
    /// module docs), where its ids would not fit in a `u32`, or where a
    /// part does not build as a lazy DFA: the caller then writes the
    /// repetition out. Each part's NFA is made now, within
    /// `limits.nfa_size_limit`; `C`'s states are made as walks reach them,
    /// within `limits` as a [`LazyDfa`]'s.
    pub fn build(
        body: &Hir,
        min: u32,
        max: u32,
        tail: &Hir,
        key: String,
        limits: &DfaLimits,
    ) -> Option<LazyCounted> {
        if min > max || max == 0 {
            return None;
        }
        let body = LazyDfa::from_hir(body, limits).ok()?;
        let tail = LazyDfa::from_hir(tail, limits).ok()?;
        if !prefix_free(&body) {
            return None;
        }
        let (b0, t0) = (body.start(), tail.start());
        if (0..=255u8).any(|b| body.next(b0, b) != DEAD && tail.next(t0, b) != DEAD) {
            return None;
        }
        // Every state of `X` is made: `prefix_free` walked them all.
        let width = body.num_states() as u64 - 1;
        // Body ids are odd, tail ids even (see `LazyCounted::id`).
        let body_ids = 2 * (u64::from(max) + 1) * width;
        let tail_ids = 2 * (limits.max_dfa_states as u64 + 1);
        let id_bound = body_ids.max(tail_ids);
        if id_bound >= u64::from(u32::MAX) {
            return None;
        }
        let low_end = max.min(min.saturating_add(2 * BOUND_REACH));
        let high_start = max.saturating_sub(BOUND_REACH).max(low_end + 1);
        let mut classes = [0u8; 256];
        let mut reps = Vec::new();
        let mut class_size: Vec<u16> = Vec::new();
        let mut ids: HashMap<(u8, u8), u8> = HashMap::new();
        for b in 0..=255u8 {
            let pair = (body.classes()[b as usize], tail.classes()[b as usize]);
            let next = ids.len();
            let c = *ids.entry(pair).or_insert_with(|| {
                reps.push(b);
                class_size.push(0);
                next as u8
            });
            classes[b as usize] = c;
            class_size[c as usize] += 1;
        }
        Some(LazyCounted {
            key,
            body,
            tail,
            min,
            max,
            width: width as u32,
            id_bound,
            low_end,
            high_start,
            classes,
            reps,
            class_size,
            rows: Grow::default(),
            rows_made: AtomicUsize::new(0),
            steps: Mutex::default(),
        })
    }

    /// The state at the start of the output.
    #[inline]
    pub fn start(&self) -> u32 {
        self.id(At::Body {
            count: 0,
            q: self.body.start(),
        })
    }

    /// Where a count's states are among the ids: the counts near either
    /// bound first, the counts between after them. Walks and the indexes
    /// kept per state (tables indexed by state id) only read states near
    /// the bounds (a state between stands for one at `min`, see
    /// [`LazyCounted::shifted`]), so those tables stay as small as the
    /// bounds' neighbourhoods, however long the string.
    #[inline]
    fn slot(&self, count: u32) -> u32 {
        if count <= self.low_end {
            count
        } else if count >= self.high_start {
            self.low_end + 1 + (count - self.high_start)
        } else {
            self.low_end + 1 + (self.max + 1 - self.high_start) + (count - self.low_end - 1)
        }
    }

    /// The count of a slot ([`LazyCounted::slot`] undone).
    #[inline]
    fn count_of(&self, slot: u32) -> u32 {
        let high = (self.max + 1).saturating_sub(self.high_start);
        if slot <= self.low_end {
            slot
        } else if slot <= self.low_end + high {
            self.high_start + (slot - self.low_end - 1)
        } else {
            self.low_end + 1 + (slot - self.low_end - 1 - high)
        }
    }

    /// A state's id: the body's `(slot, q)` numbered in slot order, the
    /// tail's states in theirs, interleaved (odd ids the body's, even ones
    /// the tail's), so that neither part's ids are pushed up by the other's
    /// and the tables a walker keeps per id stay as small as the states it
    /// meets (the tail after every count would start past a million in a
    /// string of `maxLength: 65535`).
    #[inline]
    fn id(&self, at: At) -> u32 {
        match at {
            At::Dead => DEAD,
            At::Body { count, q } => 1 + 2 * (self.slot(count) * self.width + q - 1),
            At::Tail(t) => 2 * t,
        }
    }

    #[inline]
    fn at(&self, state: u32) -> At {
        if state == DEAD {
            At::Dead
        } else if state % 2 == 1 {
            let i = state / 2;
            At::Body {
                count: self.count_of(i / self.width),
                q: i % self.width + 1,
            }
        } else {
            At::Tail(state / 2)
        }
    }

    /// Where `byte` leads from `at`: on in the copy of `X` (to the next
    /// copy's start where it ends), or into `C` at a copy's end once there
    /// are `min` copies.
    #[inline]
    fn step(&self, at: At, byte: u8) -> At {
        match at {
            At::Dead => At::Dead,
            At::Tail(t) => match self.tail.next(t, byte) {
                DEAD => At::Dead,
                t => At::Tail(t),
            },
            At::Body { count, q } => {
                let b0 = self.body.start();
                if q != b0 || count < self.max {
                    let t = self.body.next(q, byte);
                    if t != DEAD {
                        return if self.body.is_accepting(t) {
                            At::Body {
                                count: count + 1,
                                q: b0,
                            }
                        } else {
                            At::Body { count, q: t }
                        };
                    }
                }
                if q == b0 && count >= self.min {
                    let t = self.tail.next(self.tail.start(), byte);
                    if t != DEAD {
                        return At::Tail(t);
                    }
                }
                At::Dead
            }
        }
    }

    /// The transitions of `state`, one per byte class (kept once read).
    #[inline]
    pub fn row_of(&self, state: u32) -> &[u32] {
        match self.rows.get(state) {
            Some(row) => row,
            None => self.rows.get_or_init(state, || {
                self.rows_made.fetch_add(1, Ordering::Relaxed);
                let at = self.at(state);
                self.reps
                    .iter()
                    .map(|&b| self.id(self.step(at, b)))
                    .collect()
            }),
        }
    }

    /// The byte class of every byte.
    pub fn classes(&self) -> &[u8; 256] {
        &self.classes
    }

    /// The state after `byte` (dead when the byte cannot come next).
    #[inline]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.id(self.step(self.at(state), byte))
    }

    /// May the output end in `state`?
    #[inline]
    pub fn is_accepting(&self, state: u32) -> bool {
        match self.at(state) {
            At::Dead => false,
            At::Tail(t) => self.tail.is_accepting(t),
            At::Body { count, q } => {
                q == self.body.start()
                    && count >= self.min
                    && self.tail.is_accepting(self.tail.start())
            }
        }
    }

    /// The one byte that must come next in `state`, if any.
    pub fn forced_byte(&self, state: u32) -> Option<u8> {
        if self.is_accepting(state) {
            return None;
        }
        let at = self.at(state);
        let mut live = (0..self.reps.len()).filter(|&c| self.step(at, self.reps[c]) != At::Dead);
        match (live.next(), live.next()) {
            (Some(c), None) if self.class_size[c] == 1 => Some(self.reps[c]),
            _ => None,
        }
    }

    /// Whether `state` sits on a UTF-8 character boundary.
    #[inline]
    pub fn at_char_boundary(&self, state: u32) -> bool {
        match self.at(state) {
            At::Dead => true,
            At::Tail(t) => self.tail.at_char_boundary(t),
            At::Body { q, .. } => self.body.at_char_boundary(q),
        }
    }

    /// The state whose walks of at most `depth` bytes find what walks from
    /// `state` find, as [`tokensieve_core::trie::TokenTrie`] walks do: the same state
    /// of `X` at the count `min`, where `state`'s count is at least `min`
    /// and `depth` copies from `max` (reading `depth` bytes, a walk ends
    /// fewer than `depth` copies later, so it meets neither bound from
    /// either count); `state` itself otherwise.
    #[inline]
    pub fn shifted(&self, state: u32, depth: u32) -> u32 {
        match self.at(state) {
            At::Body { count, q }
                if count > self.min && count.saturating_add(depth) <= self.max =>
            {
                self.id(At::Body { count: self.min, q })
            }
            _ => state,
        }
    }

    /// The bounds `min` and `max` of the count.
    pub fn bounds(&self) -> (u32, u32) {
        (self.min, self.max)
    }

    /// The count and the state of `X` of `state`, where it is in the
    /// repetition (not in `C`, not dead).
    #[inline]
    pub fn counted_at(&self, state: u32) -> Option<(u32, u32)> {
        match self.at(state) {
            At::Body { count, q } => Some((count, q)),
            _ => None,
        }
    }

    /// The state at `count` copies (at most `max`) in `q`, a state of `X`
    /// that [`LazyCounted::counted_at`] gave.
    #[inline]
    pub fn counted_state(&self, count: u32, q: u32) -> u32 {
        debug_assert!(count <= self.max && (1..=self.width).contains(&q));
        self.id(At::Body { count, q })
    }

    /// One more than the highest id a state can have.
    pub fn id_bound(&self) -> u64 {
        self.id_bound
    }

    /// The text step of `state` ([`crate::dfa::text_step`]) read off the
    /// step of another state with the same state of `X`, on the same side
    /// of `min` (see `side`), below `max`: the bytes are the same, and
    /// where they lead is as many copies on (a count only moves which
    /// state of the repetition a byte leads to, not whether it leads
    /// there). `None` (ask each byte) for the first state of its kind, a
    /// state of `C`, and a state at `max`.
    pub fn known_text_step(&self, state: u32) -> Option<Option<TextStep>> {
        let At::Body { count, q } = self.at(state) else {
            return None;
        };
        if count >= self.max {
            return None;
        }
        // Where a step may land (one copy on at most) accepts or not
        // alike within a kind.
        let side = match self.min.checked_sub(count) {
            None | Some(0) => 0,
            Some(1) => 1,
            Some(_) => 2,
        };
        let kind = (q, side);
        let known = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        let Some(&(base, step)) = known.get(&kind) else {
            drop(known);
            let step = crate::dfa::text_step_by_byte(self, state);
            self.steps
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(kind, (count, step));
            return Some(step);
        };
        drop(known);
        let Some(mut step) = step else {
            return Some(None);
        };
        if let At::Body { count: c, q } = self.at(step.to) {
            step.to = self.id(At::Body {
                count: c - base + count,
                q,
            });
        }
        Some(Some(step))
    }

    /// States whose transitions walks have read.
    pub fn num_states(&self) -> usize {
        self.rows_made.load(Ordering::Relaxed)
    }

    /// The parts' NFA states (what compiling cost).
    pub fn nfa_states(&self) -> usize {
        self.body.nfa_states() + self.tail.nfa_states()
    }

    /// Whether a limit stopped the making of a state of a part.
    pub fn exhausted(&self) -> bool {
        self.body.exhausted() || self.tail.exhausted()
    }

    /// The error that [`LazyCounted::exhausted`] stands for.
    pub fn exhausted_error(&self) -> GrammarError {
        if self.body.exhausted() {
            self.body.exhausted_error()
        } else {
            self.tail.exhausted_error()
        }
    }

    /// Heap bytes held (the parts, the rows read).
    pub fn memory_bytes(&self) -> usize {
        self.body.memory_bytes()
            + self.tail.memory_bytes()
            + self.num_states() * (self.reps.len() * 4 + 32)
    }
}

/// Whether `dfa` matches no empty string and no match of it is a prefix of
/// another (no accepting state has a live transition), explored up to
/// [`MAX_BODY_STATES`] states (more: not known, so no).
fn prefix_free(dfa: &LazyDfa) -> bool {
    let start = dfa.start();
    if dfa.is_accepting(start) {
        return false;
    }
    let reps: Vec<u8> = {
        let mut seen = [false; 256];
        (0..=255u8)
            .filter(|&b| !std::mem::replace(&mut seen[dfa.classes()[b as usize] as usize], true))
            .collect()
    };
    let mut seen: HashSet<u32> = HashSet::from_iter([start]);
    let mut queue = VecDeque::from([start]);
    while let Some(s) = queue.pop_front() {
        let accepting = dfa.is_accepting(s);
        for &b in &reps {
            let t = dfa.next(s, b);
            if t == DEAD {
                continue;
            }
            if accepting {
                return false;
            }
            if seen.len() >= MAX_BODY_STATES {
                return false;
            }
            if seen.insert(t) {
                queue.push_back(t);
            }
        }
    }
    !dfa.exhausted()
}

impl Automaton for LazyCounted {
    fn start(&self) -> u32 {
        LazyCounted::start(self)
    }
    fn next(&self, state: u32, byte: u8) -> u32 {
        LazyCounted::next(self, state, byte)
    }
    fn is_accepting(&self, state: u32) -> bool {
        LazyCounted::is_accepting(self, state)
    }
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(self.classes())
    }
    fn row_by_class(&self, state: u32) -> Option<&[u32]> {
        Some(self.row_of(state))
    }
    fn known_text_step(&self, state: u32) -> Option<Option<TextStep>> {
        LazyCounted::known_text_step(self, state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ByteDfa;
    use crate::dfa::text_step_by_byte;
    use tokensieve_core::testing::SplitMix64;

    const CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt])"#;

    fn limits() -> DfaLimits {
        DfaLimits {
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 32 << 20,
            max_dfa_states: 10_000,
            minimize: true,
        }
    }

    fn counted(body: &str, min: u32, max: u32, tail: &str) -> Option<LazyCounted> {
        let parse = |r: &str| crate::dfa::parse(r).unwrap();
        let key = format!("{body}{{{min},{max}}}{tail}");
        LazyCounted::build(&parse(body), min, max, &parse(tail), key, &limits())
    }

    /// Random text of the pieces a string body meets: up to `chars`
    /// characters (letters, an escape, a two-byte character, a space),
    /// then maybe an end (a quote, a semicolon) or a byte no body takes (a
    /// lone backslash, a byte that breaks UTF-8).
    fn text(r: &mut SplitMix64, chars: usize) -> Vec<u8> {
        let chars_of: [&[u8]; 5] = [b"a", b"b", b"\\n", " ".as_bytes(), "\u{e9}".as_bytes()];
        let ends: [&[u8]; 6] = [b"\"", b"\"  ", b";", b"\\", b"\xc3", b""];
        let mut t = Vec::new();
        for _ in 0..r.below(chars + 1) {
            t.extend_from_slice(chars_of[r.below(chars_of.len())]);
        }
        t.extend_from_slice(ends[r.below(ends.len())]);
        t
    }

    /// The state after `text` (dead once a byte is refused).
    fn walk(a: &impl Automaton, from: u32, text: &[u8]) -> Vec<u32> {
        let mut at = from;
        let mut states = vec![at];
        for &b in text {
            at = if at == DEAD { DEAD } else { a.next(at, b) };
            states.push(at);
        }
        states
    }

    #[test]
    fn counting_keeps_the_language_of_the_written_out_repetition() {
        let cases = [
            (CHAR, 0, 3, r#"""#),
            (CHAR, 2, 5, r#"" *"#),
            (CHAR, 4, 4, r#"""#),
            // Counts between the bounds' neighbourhoods (their ids last).
            (CHAR, 1, 20, r#"""#),
            // A tail that matches the empty string: the end of any copy
            // from `min` on accepts.
            ("ab|é", 1, 4, "(?:;)?"),
        ];
        let mut r = SplitMix64(11);
        for (body, min, max, tail) in cases {
            let c = counted(body, min, max, tail).expect("countable");
            let whole = format!("(?:{body}){{{min},{max}}}(?:{tail})");
            let dfa = ByteDfa::build(&whole, &limits()).unwrap();
            let mut accepted = 0;
            let mut met = std::collections::BTreeSet::new();
            for _ in 0..4000 {
                let t = text(&mut r, max as usize + 2);
                let ours = walk(&c, c.start(), &t);
                let theirs = walk(&dfa, dfa.start(), &t);
                for (k, (&a, &b)) in ours.iter().zip(&theirs).enumerate() {
                    let shown = String::from_utf8_lossy(&t[..k]);
                    assert_eq!(a == DEAD, b == DEAD, "{whole}: {shown:?}");
                    if a != DEAD {
                        met.insert(a);
                        assert_eq!(c.is_accepting(a), dfa.is_accepting(b), "{whole}: {shown:?}");
                        assert_eq!(c.forced_byte(a), dfa.forced_byte(b), "{whole}: {shown:?}");
                        assert_eq!(c.at_char_boundary(a), dfa.at_char_boundary(b), "{shown:?}");
                        accepted += usize::from(c.is_accepting(a));
                    }
                }
            }
            assert!(accepted > 100, "{whole}: the texts reach its ends");
            // Every state met: its known text step is the one asked
            // byte by byte.
            for &s in &met {
                if let Some(known) = c.known_text_step(s) {
                    assert_eq!(known, text_step_by_byte(&c, s), "{whole}, state {s}");
                }
            }
        }
    }

    /// Every count and state of `X` has its own id, and the counts near
    /// either bound have the lowest.
    #[test]
    fn ids_name_each_count_once_the_bounds_first() {
        for (min, max) in [(0, 3), (0, 40), (3, 40), (9, 9), (0, 1)] {
            let c = counted(CHAR, min, max, r#"""#).unwrap();
            let mut seen = std::collections::HashSet::new();
            let near = |count: u32| count <= min + 2 * BOUND_REACH || count + BOUND_REACH >= max;
            let last_near = (0..=max)
                .filter(|&k| near(k))
                .map(|k| c.slot(k))
                .max()
                .unwrap();
            for count in 0..=max {
                for q in 1..=c.width {
                    let id = c.id(At::Body { count, q });
                    assert!(id % 2 == 1 && seen.insert(id), "{min},{max}: {count} {q}");
                    assert_eq!(c.at(id), At::Body { count, q });
                }
                assert_eq!(
                    c.slot(count) <= last_near,
                    near(count),
                    "{min},{max}: {count}"
                );
            }
        }
    }

    /// What follows the repetition gets ids as low as the counts near
    /// the bounds do, however long the repetition: a walker's tables per
    /// id (a lexeme's index, its first bytes) grow with the highest id it
    /// meets, and the text after a `maxLength: 65535` string placed after
    /// every count made them tens of megabytes at its first mask.
    #[test]
    fn what_follows_a_long_repetition_keeps_low_ids() {
        let c = counted(CHAR, 0, 65_535, r#"", *"#).unwrap();
        let states = walk(&c, c.start(), br#"ab\n", "#);
        assert!(!states.contains(&DEAD), "{states:?}");
        assert!(
            states.iter().all(|&s| s < 64),
            "ids past the counts near the start: {states:?}"
        );
        assert!(c.is_accepting(*states.last().unwrap()));
    }

    #[test]
    fn a_shifted_state_walks_as_the_state_it_stands_for() {
        let depth = 6;
        let c = counted(CHAR, 3, 40, r#"" *"#).unwrap();
        let mut r = SplitMix64(5);
        let mut shifted = 0;
        for _ in 0..300 {
            // Somewhere in the repetition, then every short text from there.
            let mut lead = text(&mut r, 40);
            lead.retain(|&b| b != b'"');
            let Some(&from) = walk(&c, c.start(), &lead).last().filter(|&&s| s != DEAD) else {
                continue;
            };
            let to = c.shifted(from, depth);
            if to == from {
                continue;
            }
            shifted += 1;
            let At::Body { count, .. } = c.at(from) else {
                panic!("a state of the repetition");
            };
            assert!(count > 3 && count + depth <= 40, "{count}");
            for _ in 0..50 {
                let t = text(&mut r, depth as usize);
                let t = &t[..t.len().min(depth as usize)];
                let a = walk(&c, from, t);
                let b = walk(&c, to, t);
                for (&x, &y) in a.iter().zip(&b) {
                    assert_eq!(x == DEAD, y == DEAD, "{t:?}");
                    assert_eq!(
                        x != DEAD && c.is_accepting(x),
                        y != DEAD && c.is_accepting(y)
                    );
                }
            }
        }
        assert!(
            shifted > 50,
            "the walks reached the middle of the repetition"
        );
        // Near the bounds, a state stands for itself.
        let near_max = walk(&c, c.start(), &[b'a'; 37]);
        assert_eq!(c.shifted(near_max[37], depth), near_max[37]);
        assert_eq!(c.shifted(near_max[2], depth), near_max[2]);
    }

    #[test]
    fn repetitions_that_cannot_be_counted_are_refused() {
        // A copy that may go on where another ends.
        assert!(counted("a|ab", 0, 9, ";").is_none());
        // A byte that may start a copy or the tail.
        assert!(counted("a", 0, 9, "a;").is_none());
        // A copy that may be empty.
        assert!(counted("a?", 0, 9, ";").is_none());
        assert!(counted("a", 5, 4, ";").is_none());
        assert!(counted("a", 0, 9, ";").is_some());
    }
}
