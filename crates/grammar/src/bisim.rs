//! NFA states with the same future, found without building a DFA.
//!
//! A Thompson NFA holds a copy of a sub-expression for each place the regex
//! text writes it: `X(?:,X)*` (a JSON array) has two copies of `X`, and
//! "any subset of these members, in order" has a copy of a member for each
//! way to reach it. The copies are followed by the same continuation, so
//! they accept the same strings, and a minimized DFA merges their states; a
//! lazily built DFA, which is not minimized, would make (and a trie walk
//! would index) a state for each copy. [`representatives`] finds such
//! copies: it names, for each NFA state, one state of its class, where two
//! states share a class only when they are bisimilar (the same kind of
//! state, the same byte ranges, and successors that share classes, in
//! order), so a DFA state made of representatives is the same whichever
//! copy it was reached through.
//!
//! Pairs are proposed by a hash of each state's shape a few steps deep and
//! checked as Hopcroft and Karp check two DFAs for equivalence: assume the
//! pair equal, then every pair of successors, with a union-find; a
//! contradiction (a different kind or range) undoes the trial. Only proven
//! pairs are merged, so the result is sound whatever the hash proposes; a
//! work budget bounds what failed trials may cost.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use regex_automata::nfa::thompson::{self, State};
use regex_automata::util::primitives::StateID;

/// Steps of the shape hash that proposes pairs.
const SHAPE_ROUNDS: usize = 4;

/// The representative of each state of `nfa` (a state of its bisimulation
/// class, itself when none was proven), within about `budget_per_state`
/// steps of trial a state.
pub(crate) fn representatives(nfa: &thompson::NFA, budget_per_state: usize) -> Vec<u32> {
    let n = nfa.states().len();
    let mut label = Vec::with_capacity(n);
    let mut succ_at = Vec::with_capacity(n + 1);
    let mut succ: Vec<u32> = Vec::new();
    succ_at.push(0);
    for state in nfa.states() {
        label.push(label_hash(state));
        successors(state, &mut succ);
        succ_at.push(succ.len());
    }
    let next = |q: usize| &succ[succ_at[q]..succ_at[q + 1]];
    let mut shape = label.clone();
    for _ in 0..SHAPE_ROUNDS {
        shape = (0..n)
            .map(|q| {
                next(q)
                    .iter()
                    .fold(label[q], |h, &s| mix(h ^ shape[s as usize]))
            })
            .collect();
    }
    let mut uf = UnionFind::new(n);
    let mut budget = budget_per_state.saturating_mul(n);
    let mut first: HashMap<u64, u32, BuildHasherDefault<Prehashed>> =
        HashMap::with_capacity_and_hasher(n, Default::default());
    let mut stack = Vec::new();
    for q in (0..n as u32).rev() {
        let Some(&p) = first.get(&shape[q as usize]) else {
            first.insert(shape[q as usize], q);
            continue;
        };
        if budget == 0 {
            break;
        }
        if uf.find(p) == uf.find(q) {
            continue;
        }
        // Hopcroft-Karp: assume p ~ q, check each assumed pair.
        let mark = uf.log.len();
        uf.union(p, q);
        stack.clear();
        stack.push((p, q));
        let mut ok = true;
        while let Some((a, b)) = stack.pop() {
            budget = budget.saturating_sub(1);
            let (sa, sb) = (next(a as usize), next(b as usize));
            if budget == 0
                || label[a as usize] != label[b as usize]
                || sa.len() != sb.len()
                || !same_label(nfa, a, b)
            {
                ok = false;
                break;
            }
            for (&x, &y) in sa.iter().zip(sb) {
                if uf.union(x, y) {
                    stack.push((x, y));
                }
            }
        }
        if !ok {
            uf.undo(mark);
        }
        uf.log.clear();
    }
    (0..n as u32).map(|q| uf.find(q)).collect()
}

/// A 64-bit mix (the finalizer of SplitMix64): the shape hash's step.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The kind of a state and its byte ranges (not where it leads), hashed.
fn label_hash(state: &State) -> u64 {
    let range =
        |kind: u64, start: u8, end: u8| mix(kind << 16 | u64::from(start) << 8 | u64::from(end));
    match state {
        State::ByteRange { trans } => range(1, trans.start, trans.end),
        State::Sparse(s) => s
            .transitions
            .iter()
            .fold(mix(2), |h, t| mix(h ^ range(1, t.start, t.end))),
        State::Dense(_) => mix(3),
        State::Look { look, .. } => mix(4 << 32 | u64::from(look.as_repr())),
        State::Union { alternates } => mix(5 << 32 | alternates.len() as u64),
        State::BinaryUnion { .. } => mix(6),
        State::Capture { .. } => mix(7),
        State::Fail => mix(8),
        State::Match { pattern_id } => mix(9 << 32 | u64::from(pattern_id.as_u32())),
    }
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// Whether two states are of the same kind with the same byte ranges.
fn same_label(nfa: &thompson::NFA, a: u32, b: u32) -> bool {
    let state = |q: u32| nfa.state(StateID::new_unchecked(q as usize));
    match (state(a), state(b)) {
        (State::ByteRange { trans: x }, State::ByteRange { trans: y }) => {
            (x.start, x.end) == (y.start, y.end)
        }
        (State::Sparse(x), State::Sparse(y)) => {
            x.transitions.len() == y.transitions.len()
                && x.transitions
                    .iter()
                    .zip(y.transitions.iter())
                    .all(|(x, y)| (x.start, x.end) == (y.start, y.end))
        }
        (State::Dense(_), State::Dense(_)) => true,
        (State::Look { look: x, .. }, State::Look { look: y, .. }) => x == y,
        (State::Union { alternates: x }, State::Union { alternates: y }) => x.len() == y.len(),
        (State::BinaryUnion { .. }, State::BinaryUnion { .. })
        | (State::Capture { .. }, State::Capture { .. })
        | (State::Fail, State::Fail) => true,
        (State::Match { pattern_id: x }, State::Match { pattern_id: y }) => x == y,
        _ => false,
    }
}

/// Where a state leads, in order (a dense state's dead ends included).
fn successors(state: &State, out: &mut Vec<u32>) {
    match state {
        State::ByteRange { trans } => out.push(trans.next.as_u32()),
        State::Sparse(s) => out.extend(s.transitions.iter().map(|t| t.next.as_u32())),
        State::Dense(d) => out.extend(d.transitions.iter().map(|t| t.as_u32())),
        State::Look { next, .. } | State::Capture { next, .. } => out.push(next.as_u32()),
        State::Union { alternates } => out.extend(alternates.iter().map(|t| t.as_u32())),
        State::BinaryUnion { alt1, alt2 } => {
            out.push(alt1.as_u32());
            out.push(alt2.as_u32());
        }
        State::Fail | State::Match { .. } => {}
    }
}

/// Union by size without path compression, so a failed trial can be
/// undone from its log.
struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
    /// `(child root, the root it joined)` of each union of the trial.
    log: Vec<(u32, u32)>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
            log: Vec::new(),
        }
    }

    fn find(&self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            x = self.parent[x as usize];
        }
        x
    }

    /// Joins the classes of `a` and `b`; false when they were one already.
    fn union(&mut self, a: u32, b: u32) -> bool {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return false;
        }
        if self.size[a as usize] < self.size[b as usize] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b as usize] = a;
        self.size[a as usize] += self.size[b as usize];
        self.log.push((b, a));
        true
    }

    /// Undoes the unions logged after `mark`, latest first.
    fn undo(&mut self, mark: usize) {
        while self.log.len() > mark {
            let (child, root) = self.log.pop().expect("logged");
            self.parent[child as usize] = child;
            self.size[root as usize] -= self.size[child as usize];
        }
    }
}
