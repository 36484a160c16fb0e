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
//! The classes are the coarsest partition of the states into kinds (a
//! state's kind and byte ranges) in which every class's members lead, slot
//! by slot, into the same classes: Hopcroft's partition refinement (as in
//! DFA minimization, with "the `j`-th successor" for the letters),
//! O(k·m·log n) for `n` states, `m` edges and at most `k` successors a
//! state, with no budget and nothing left unproven.

use crate::nfa::{Nfa, State};
use hashbrown::HashTable;

/// The representative of each state of `nfa`: the least state of its
/// bisimulation class.
pub(crate) fn representatives(nfa: &Nfa) -> Vec<u32> {
    let n = nfa.len();
    let mut label = Vec::with_capacity(n);
    let mut succ_at = Vec::with_capacity(n + 1);
    let mut succ: Vec<u32> = Vec::new();
    succ_at.push(0);
    for state in nfa.states() {
        label.push(label_hash(state));
        successors(state, &mut succ);
        succ_at.push(succ.len());
    }
    let mut p = Partition::by_kind(nfa, &label, &succ_at);
    // Predecessors of each state: `(p, j)` for `succ[p][j] == t`, by `t`.
    let mut pred_at = vec![0u32; n + 1];
    for &t in &succ {
        pred_at[t as usize + 1] += 1;
    }
    for t in 0..n {
        pred_at[t + 1] += pred_at[t];
    }
    let mut fill = pred_at.clone();
    let mut pred = vec![(0u32, 0u32); succ.len()];
    for q in 0..n {
        for (j, &t) in succ[succ_at[q]..succ_at[q + 1]].iter().enumerate() {
            pred[fill[t as usize] as usize] = (j as u32, q as u32);
            fill[t as usize] += 1;
        }
    }
    // Every block splits the others to start with; then, of a block split
    // that is not waiting, only the smaller half.
    let mut waiting: Vec<u32> = (0..p.blocks.len() as u32).collect();
    let mut pending = vec![true; p.blocks.len()];
    // The predecessors into the splitter, by slot (reused buckets).
    let slots = (0..n)
        .map(|q| succ_at[q + 1] - succ_at[q])
        .max()
        .unwrap_or(0);
    let mut by_slot: Vec<Vec<u32>> = vec![Vec::new(); slots];
    let mut used: Vec<u32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    while let Some(b) = waiting.pop() {
        pending[b as usize] = false;
        let (start, end) = p.blocks[b as usize];
        for &t in &p.elems[start as usize..end as usize] {
            for &(j, q) in &pred[pred_at[t as usize] as usize..pred_at[t as usize + 1] as usize] {
                if by_slot[j as usize].is_empty() {
                    used.push(j);
                }
                by_slot[j as usize].push(q);
            }
        }
        for j in used.drain(..) {
            for &q in &by_slot[j as usize] {
                let y = p.mark(q);
                if p.marked[y as usize] == 1 {
                    touched.push(y);
                }
            }
            by_slot[j as usize].clear();
            for y in touched.drain(..) {
                if let Some(z) = p.split(y) {
                    pending.push(false);
                    let (ys, zs) = (p.size(y), p.size(z));
                    if pending[y as usize] || zs <= ys {
                        pending[z as usize] = true;
                        waiting.push(z);
                    } else {
                        pending[y as usize] = true;
                        waiting.push(y);
                    }
                }
            }
        }
    }
    let mut least: Vec<u32> = p
        .blocks
        .iter()
        .map(|&(start, end)| {
            p.elems[start as usize..end as usize]
                .iter()
                .copied()
                .min()
                .expect("no block is empty")
        })
        .collect();
    least.shrink_to_fit();
    (0..n).map(|q| least[p.block_of[q] as usize]).collect()
}

/// A partition of states into blocks that can be split: each block a range
/// of `elems`, its marked members first.
struct Partition {
    elems: Vec<u32>,
    /// Where each state is in `elems`.
    at: Vec<u32>,
    block_of: Vec<u32>,
    /// `(start, end)` of each block in `elems`.
    blocks: Vec<(u32, u32)>,
    /// Marked members of each block (at its start).
    marked: Vec<u32>,
}

impl Partition {
    /// States by kind: the same label, the same number of successors.
    fn by_kind(nfa: &Nfa, label: &[u64], succ_at: &[usize]) -> Partition {
        let n = label.len();
        let degree = |q: usize| (succ_at[q + 1] - succ_at[q]) as u64;
        // States grouped by (label, degree), each group in state order: a
        // table of the keys met (the label is a hash already), then a
        // counting sort by group. (A comparison sort of the states by key
        // was most of the partition's cost on big NFAs.)
        let mut keys: HashTable<(u64, u64, u32)> = HashTable::new();
        let mut group_of = vec![0u32; n];
        for q in 0..n {
            let key = (label[q], degree(q));
            let hash = key.0 ^ mix(key.1);
            let next = keys.len() as u32;
            let g = match keys.find(hash, |e| (e.0, e.1) == key) {
                Some(e) => e.2,
                None => {
                    keys.insert_unique(hash, (key.0, key.1, next), |e| e.0 ^ mix(e.1));
                    next
                }
            };
            group_of[q] = g;
        }
        let mut group_at = vec![0u32; keys.len() + 1];
        for &g in &group_of {
            group_at[g as usize + 1] += 1;
        }
        for g in 0..keys.len() {
            group_at[g + 1] += group_at[g];
        }
        let mut fill = group_at.clone();
        let mut order = vec![0u32; n];
        for (q, &g) in group_of.iter().enumerate() {
            order[fill[g as usize] as usize] = q as u32;
            fill[g as usize] += 1;
        }
        let mut blocks = Vec::new();
        let mut block_of = vec![0u32; n];
        let mut elems = Vec::with_capacity(n);
        for g in 0..keys.len() {
            let (i, j) = (group_at[g] as usize, group_at[g + 1] as usize);
            // One hash, one kind: kinds whose hashes collide are told
            // apart here, each member against each kind met so far.
            let group = &order[i..j];
            let mut push = |kind: &[u32]| {
                let start = elems.len() as u32;
                for &q in kind {
                    block_of[q as usize] = blocks.len() as u32;
                    elems.push(q);
                }
                blocks.push((start, elems.len() as u32));
            };
            if group.iter().all(|&q| same_label(nfa, group[0], q)) {
                push(group);
            } else {
                let mut kinds: Vec<Vec<u32>> = Vec::new();
                for &q in group {
                    match kinds.iter_mut().find(|k| same_label(nfa, k[0], q)) {
                        Some(k) => k.push(q),
                        None => kinds.push(vec![q]),
                    }
                }
                for kind in &kinds {
                    push(kind);
                }
            }
        }
        let mut at = vec![0u32; n];
        for (k, &q) in elems.iter().enumerate() {
            at[q as usize] = k as u32;
        }
        let marked = vec![0; blocks.len()];
        Partition {
            elems,
            at,
            block_of,
            blocks,
            marked,
        }
    }

    fn size(&self, b: u32) -> u32 {
        let (start, end) = self.blocks[b as usize];
        end - start
    }

    /// Marks `q` (once), moving it among the marked first of its block;
    /// returns its block.
    fn mark(&mut self, q: u32) -> u32 {
        let b = self.block_of[q as usize];
        let (start, _) = self.blocks[b as usize];
        let first_unmarked = start + self.marked[b as usize];
        let i = self.at[q as usize];
        if i < first_unmarked {
            return b;
        }
        let other = self.elems[first_unmarked as usize];
        self.elems.swap(i as usize, first_unmarked as usize);
        self.at[other as usize] = i;
        self.at[q as usize] = first_unmarked;
        self.marked[b as usize] += 1;
        b
    }

    /// Splits the marked members of `b` off into a new block, unless all
    /// or none are marked; clears the marks.
    fn split(&mut self, b: u32) -> Option<u32> {
        let (start, end) = self.blocks[b as usize];
        let mid = start + std::mem::take(&mut self.marked[b as usize]);
        if mid == start || mid == end {
            return None;
        }
        let z = self.blocks.len() as u32;
        self.blocks[b as usize] = (mid, end);
        self.blocks.push((start, mid));
        self.marked.push(0);
        for &q in &self.elems[start as usize..mid as usize] {
            self.block_of[q as usize] = z;
        }
        Some(z)
    }
}

/// A 64-bit mix (the finalizer of SplitMix64): the shape hash's step.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The kind of a state and its byte ranges (not where it leads), hashed.
fn label_hash(state: State<'_>) -> u64 {
    let range =
        |kind: u64, start: u8, end: u8| mix(kind << 16 | u64::from(start) << 8 | u64::from(end));
    match state {
        State::Bytes(ranges) => ranges
            .iter()
            .fold(mix(2), |h, t| mix(h ^ range(1, t.start, t.end))),
        State::Union(alternates) => mix(5 << 32 | alternates.len() as u64),
        State::Match => mix(9 << 32),
    }
}

/// Whether two states are of the same kind with the same byte ranges.
fn same_label(nfa: &Nfa, a: u32, b: u32) -> bool {
    match (nfa.state(a), nfa.state(b)) {
        (State::Bytes(x), State::Bytes(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(x, y)| (x.start, x.end) == (y.start, y.end))
        }
        (State::Union(x), State::Union(y)) => x.len() == y.len(),
        (State::Match, State::Match) => true,
        _ => false,
    }
}

/// Where a state leads, in order.
fn successors(state: State<'_>, out: &mut Vec<u32>) {
    match state {
        State::Bytes(ranges) => out.extend(ranges.iter().map(|t| t.next)),
        State::Union(alternates) => out.extend_from_slice(alternates),
        State::Match => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokensieve_core::testing::SplitMix64;

    fn nfa(regex: &str) -> Nfa {
        Nfa::new(&crate::dfa::parse(regex).unwrap(), 10 << 20).unwrap()
    }

    /// The coarsest bisimulation by Moore's refinement: classes by kind,
    /// then by the classes of the successors, until nothing splits.
    fn moore(nfa: &Nfa) -> Vec<u32> {
        let n = nfa.len();
        let mut succ = vec![Vec::new(); n];
        for (q, state) in nfa.states().enumerate() {
            successors(state, &mut succ[q]);
        }
        let mut kinds: Vec<u32> = Vec::new();
        let mut class: Vec<u32> = (0..n as u32)
            .map(|q| {
                let found = kinds.iter().position(|&k| {
                    same_label(nfa, k, q) && succ[k as usize].len() == succ[q as usize].len()
                });
                found.unwrap_or_else(|| {
                    kinds.push(q);
                    kinds.len() - 1
                }) as u32
            })
            .collect();
        loop {
            let mut ids = std::collections::HashMap::new();
            let next: Vec<u32> = (0..n)
                .map(|q| {
                    let key: Vec<u32> = std::iter::once(class[q])
                        .chain(succ[q].iter().map(|&t| class[t as usize]))
                        .collect();
                    let len = ids.len() as u32;
                    *ids.entry(key).or_insert(len)
                })
                .collect();
            let before = class.iter().collect::<std::collections::HashSet<_>>().len();
            if ids.len() == before {
                return next;
            }
            class = next;
        }
    }

    /// A random regex of literals, classes, sequences, alternations and
    /// repetitions (copies of a sub-expression made by counts).
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

    /// Two states share a representative exactly when Moore's refinement
    /// puts them in one class, on hand-written and random regexes.
    #[test]
    fn representatives_are_the_coarsest_bisimulation() {
        let mut regexes: Vec<String> = [
            r"x(?:,x)*",
            r"(?:ab|cb)d",
            r"[ \t]{0,20}:[ \t]{0,20}",
            r#""(?:a|b)"(?:,"(?:a|b)")*"#,
            r"(?:é|[a-c]){2,6}!",
        ]
        .map(String::from)
        .to_vec();
        let mut r = SplitMix64(3);
        regexes.extend((0..300).map(|_| random_regex(&mut r, 4)));
        let mut merged = 0;
        for regex in &regexes {
            let Ok(hir) = crate::dfa::parse(regex) else {
                continue;
            };
            let Ok(nfa) = Nfa::new(&hir, 10 << 20) else {
                continue;
            };
            let reps = representatives(&nfa);
            let classes = moore(&nfa);
            for p in 0..reps.len() {
                assert!(
                    reps[reps[p] as usize] == reps[p] && reps[p] as usize <= p,
                    "{regex}"
                );
                for q in 0..p {
                    assert_eq!(
                        reps[p] == reps[q],
                        classes[p] == classes[q],
                        "{regex}: states {q} and {p}"
                    );
                }
            }
            merged += reps
                .iter()
                .enumerate()
                .filter(|&(q, &r)| q as u32 != r)
                .count();
        }
        assert!(merged > 50, "copies were found");
        // The two copies of `x` in a JSON-array shape are one class.
        let reps = representatives(&nfa(r"x(?:,x)*"));
        assert!(reps.iter().enumerate().any(|(q, &r)| q as u32 != r));
    }
}
