//! Walking the token trie from a lexeme state: the scratch of a walk
//! ([`Walk`], [`BelowRoom`], [`Runs`]) and [`Lexeme::walk_below`], which
//! reads only the trie children a state takes.

use super::*;

/// What a loop's walk finds below the escapes of its skeleton that are not
/// the root's children (see [`Lexeme::scan_escapes`]): each such escape's
/// parent is in the loop, so what its subtree keeps is the same for every
/// walk that enters the loop at a root child, whatever state it started
/// from. An unanchored pattern's search in a string has a new state at
/// each step of a partial match, and every one leads back into the loop:
/// each would scan every escape of the vocabulary again (every `a`-`f`
/// of every token, for a pattern of hex digits).
#[derive(Debug)]
pub(super) struct LoopWalk {
    pub(super) kept: Runs,
    pub(super) refused: Runs,
    /// In preorder.
    pub(super) exits: Vec<(u32, u32)>,
}

/// What a walk from one lexeme state has found so far.
pub(super) struct Walk {
    /// The tokens found, as a row of `words` words, once there are many
    /// (empty before): most states keep few tokens, and a row costs its
    /// zeroing and a pass over it to list them again.
    pub(super) inside: Vec<u32>,
    /// The tokens found while they are few, unsorted (empty once `inside`
    /// is made).
    pub(super) ids: Vec<u32>,
    pub(super) words: usize,
    pub(super) count: usize,
    pub(super) exits: Vec<(u32, u32)>,
}

impl Walk {
    pub(super) fn new(words: usize) -> Walk {
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
    pub(super) fn take_all_but(&mut self, trie: &TokenTrie, refused: &[&Runs]) {
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
    pub(super) fn take_from_root(&mut self, trie: &TokenTrie, kept: &[&Runs], refused: &[&Runs]) {
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
    pub(super) fn add(&mut self, tokens: &[u32]) {
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
    pub(super) fn into_index(mut self, trie: &TokenTrie) -> StateIndex {
        let mut exits = std::mem::take(&mut self.exits);
        // Whether the exits are in trie order already (the walks by pass
        // and by child list find them so): by node alone, each node being
        // an exit once.
        let (mut last, mut ordered) = (None, true);
        for &(n, _) in &exits {
            ordered &= last < Some(n);
            last = Some(n);
        }
        if !ordered {
            sort_exits(&mut exits);
        }
        let (exits, exit_span) = ExitList::new(trie, exits);
        StateIndex {
            inside: self.into_set(),
            exits,
            exit_span,
        }
    }

    /// The tokens found.
    pub(super) fn into_set(self) -> TokenSet {
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
    pub(super) pending: Vec<(u32, u32, u32, u32)>,
    pub(super) refused: Runs,
}

/// Ranges of `TokenTrie::tokens` met in preorder, adjacent ones joined.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    pub(crate) runs: Vec<(u32, u32)>,
    pub(super) count: usize,
}

impl Runs {
    pub(crate) fn clear(&mut self) {
        self.runs.clear();
        self.count = 0;
    }

    /// The parts of these runs within the tokens `start..end`, added to
    /// `out`.
    pub(super) fn clip_into(&self, (start, end): (u32, u32), out: &mut Runs) {
        let first = self.runs.partition_point(|&(_, b)| b <= start);
        for &(a, b) in &self.runs[first..] {
            if a >= end {
                break;
            }
            out.push(a.max(start), b.min(end));
        }
    }

    /// These runs less the token ranges `cut` (sorted, apart).
    pub(super) fn without(&self, cut: &[(u32, u32)]) -> Runs {
        let mut out = Runs::default();
        let mut k = 0;
        for &(mut a, b) in &self.runs {
            while k < cut.len() && cut[k].1 <= a {
                k += 1;
            }
            let mut j = k;
            while j < cut.len() && cut[j].0 < b {
                out.push(a, cut[j].0.max(a));
                a = a.max(cut[j].1);
                j += 1;
            }
            if a < b {
                out.push(a, b);
            }
        }
        out
    }

    #[inline]
    pub(super) fn push(&mut self, start: u32, end: u32) {
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

impl Lexeme {
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
        // As in [`Lexeme::scan_range`].
        let mut loops = LoopCache::default();
        // Nodes are popped in preorder (a node's children pushed last
        // first), and each is noted as an exit when popped: the exits come
        // out in trie order, with no sort (a name's 113,000 were
        // radix-sorted).
        let from_exit = exits.len();
        // Whether the state last asked about accepts (a name's children
        // mostly go to one state).
        let mut accepts = (DEAD, false);
        // The width and run of the state last popped (a name's nodes are
        // mostly in one state).
        let mut about = (DEAD, 0, None);
        while let Some((node, from, depth, run)) = pending.pop() {
            if run == WHOLE {
                push_exits_below(node as usize, depth, exits);
                continue;
            }
            if run & EXIT != 0 {
                exits.push((node, depth));
            }
            let run = run & !EXIT;
            if about.0 != from {
                about = (from, self.width(from), dfa.chain(from));
            }
            // How many bytes `from` takes, where it is not partway
            // through a run.
            let width = (run == 0).then_some(about.1);
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
            let chain = about.2;
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
            // Children in byte order (their token runs join), pushed to
            // be popped in that order.
            let pushed = pending.len();
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
                            let exit = if dfa.is_accepting(from) { EXIT } else { 0 };
                            pending.push((kid, from, depth + 1, run | exit));
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
                if accepts.0 != next {
                    accepts = (next, dfa.is_accepting(next));
                }
                let accepting = !leaf && accepts.1;
                let below = &trie.below[k];
                if accepting && end - k >= LOOP_SUBTREE && !below.non_ascii {
                    let bytes = loops.get(next, || accepting_loop(dfa.row(next), classes, next));
                    if (0..2).all(|w| below.ascii[w] & !bytes[w] == 0) {
                        kept.push(trie.token_start[k], trie.token_start[end]);
                        pending.push((kid, next, depth + 1, WHOLE));
                        continue;
                    }
                }
                kept.push(trie.token_start[k], trie.token_start[k + 1]);
                if !leaf {
                    pending.push((kid, next, depth + 1, if accepting { EXIT } else { 0 }));
                }
            }
            pending[pushed..].reverse();
        }
        debug_assert!(exits[from_exit..].is_sorted(), "exits in trie order");
    }

    /// One forward pass over the subtree of `node` (at `depth`, its bytes
    /// having led the DFA to `state`), skipping a subtree at the first byte
    /// the DFA refuses or taking it whole where the text step allows:
    /// [`Lexeme::scan_range`] with `stack` (made on first use, kept by the
    /// caller for its next pass) set up. Preorder keeps the tokens of the
    /// subtree in one range of `trie.tokens`, which the pass cuts into runs
    /// kept and runs refused.
    pub(super) fn scan_subtree<'s>(
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
    #[inline]
    pub(super) fn scan_range<'s>(
        &'s self,
        first: usize,
        end: usize,
        stack: &mut [&'s [u32]],
        kept: &mut Runs,
        refused: &mut Runs,
        exits: &mut Vec<(u32, u32)>,
    ) {
        // One subtree whose top byte is refused (a line feed below a
        // string's skeleton: most of a walk's escapes): refused here,
        // without the scan's setup.
        let trie = &*self.trie;
        if first >= end {
            return;
        }
        let n = trie.nodes[first];
        if n.next as usize == end
            && stack[n.depth as usize - 1][self.dfa().classes()[n.byte as usize] as usize] == DEAD
        {
            refused.push(trie.token_start[first], trie.token_start[end]);
            return;
        }
        self.scan_nodes(first, end, stack, kept, refused, exits);
    }

    /// [`Lexeme::scan_range`] past its first check (for a caller that
    /// made it).
    pub(super) fn scan_nodes<'s>(
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
        // The ASCII bytes that lead a state back to itself, where it
        // accepts (an identifier past its first letter).
        let mut loops = LoopCache::default();
        // The transitions and acceptance of the state last met: a name
        // stays in one state for most of its nodes.
        let mut last: (u32, &'s [u32], bool) = (DEAD, &[], false);
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
            let below = &trie.below[i];
            if step_of.0 != next {
                step_of = (next, self.runs.step(dfa, next).copied());
            }
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
            if last.0 != next {
                last = (next, dfa.row(next), dfa.is_accepting(next));
            }
            let accepting = last.2;
            if accepting && n.next as usize - i >= LOOP_SUBTREE && !below.non_ascii {
                let bytes = loops.get(next, || accepting_loop(dfa.row(next), classes, next));
                if (0..2).all(|w| below.ascii[w] & !bytes[w] == 0) {
                    // Every byte below leads back to `next`: each node
                    // keeps its tokens and is an exit where it has any
                    // below it, read off the trie without a step.
                    kept.push(trie.token_start[i], trie.token_start[n.next as usize]);
                    push_exits_below(i, n.depth, exits);
                    i = n.next as usize;
                    continue;
                }
            }
            stack[d] = last.1;
            kept.push(trie.token_start[i], trie.token_start[i + 1]);
            if accepting {
                exits.push((i as u32, n.depth));
            }
            i += 1;
        }
    }
}

/// The run of a [`Lexeme::walk_below`] pending node whose every byte
/// below leads back to its state, which accepts: its exits are every node
/// of it with nodes below ([`push_exits_below`]).
const WHOLE: u32 = u32::MAX;
/// A bit of the run of a [`Lexeme::walk_below`] pending node: the node is
/// an exit (its state accepts, and it has nodes below).
const EXIT: u32 = 1 << 30;

/// Nodes from which a subtree is looked at for an accepting loop over
/// all its bytes ([`accepting_loop`]): below, stepping node by node costs
/// less than finding the loop's bytes.
const LOOP_SUBTREE: usize = 4;

/// The exits of a subtree whose every node holds one accepting state
/// (its bytes all loop on it): node `top`, at walk depth `depth`, and
/// every node below it with nodes below it, as one entry
/// ([`WHOLE_EXIT`]).
fn push_exits_below(top: usize, depth: u32, exits: &mut Vec<(u32, u32)>) {
    exits.push((top as u32, depth | WHOLE_EXIT));
}

/// [`accepting_loop`] of the states a walk met lately, by state: a walk
/// goes back and forth between a few (an identifier's first and later
/// letters). Its slots are made on the first question: most scans (one
/// per escape of a string body's skeleton, a thousand a walk) ask none.
#[derive(Default)]
struct LoopCache(Option<[(u32, [u64; 2]); 4]>);

impl LoopCache {
    #[inline]
    fn get(&mut self, state: u32, make: impl FnOnce() -> [u64; 2]) -> [u64; 2] {
        let slots = self.0.get_or_insert([(DEAD, [0; 2]); 4]);
        let slot = &mut slots[state as usize % 4];
        if slot.0 != state {
            *slot = (state, make());
        }
        slot.1
    }
}

/// The ASCII bytes whose transition in `row` (by byte class) is `state`.
fn accepting_loop(row: &[u32], classes: &[u8; 256], state: u32) -> [u64; 2] {
    let mut loops = [0u64; 2];
    for b in 0..128u8 {
        if row[classes[b as usize] as usize] == state {
            loops[b as usize >> 6] |= 1 << (b & 63);
        }
    }
    loops
}

/// Sorts exits by node (each node once). A walk by child lists finds them
/// out of trie order, up to an exit at every node of the letters for an
/// identifier (113,000 on Llama 3): sorted by comparison, that was a
/// quarter of the instructions of a C grammar's first walks. Radix passes
/// of 11 bits of the node number instead, where there are many: two for a
/// trie of up to 4 million nodes, each with a table of 2,048 counts (with
/// 16-bit digits, zeroing two tables of 65,536 cost as much as the passes).
pub(super) fn sort_exits(exits: &mut Vec<(u32, u32)>) {
    const MANY: usize = 1 << 12;
    const BITS: u32 = 11;
    if exits.is_sorted() {
        return;
    }
    if exits.len() < MANY {
        exits.sort_unstable();
        return;
    }
    let top = exits.iter().map(|&(node, _)| node).max().unwrap_or(0);
    let passes = (u32::BITS - top.leading_zeros()).div_ceil(BITS).max(1);
    let mut from = std::mem::take(exits);
    let mut to = vec![(0, 0); from.len()];
    let mut starts = [0usize; (1 << BITS) + 1];
    for pass in 0..passes {
        let shift = pass * BITS;
        let digit = |node: u32| (node >> shift & ((1 << BITS) - 1)) as usize;
        starts.fill(0);
        for &(node, _) in &from {
            starts[digit(node) + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        for &exit in &from {
            let d = digit(exit.0);
            to[starts[d]] = exit;
            starts[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    *exits = from;
    // By node alone so far: a node listed twice (never met) is put in
    // the same order as a comparison sort would.
    if !exits.is_sorted() {
        exits.sort_unstable();
    }
}
