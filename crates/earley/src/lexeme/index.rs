//! The token index of a lexeme state: [`TokenSet`] (tokens as sorted ids
//! or a row), [`StateIndex`] (what one state does to the vocabulary), and
//! the thresholds that decide how a state's walk is shared.

use tokensieve_core::TokenTrie;

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
    /// Where the lexeme may end after a node's bytes and the tokens below
    /// the node go on past it.
    pub exits: ExitList,
    /// Trie nodes below the exits, summed: what walking them all costs at
    /// most.
    pub exit_span: usize,
}

/// A bit of the depth of a walk's exit `(trie node, its depth)`: the entry
/// stands for the node and every node below it that has nodes below it,
/// each an exit at its own depth. A walk writes a subtree whose every byte
/// loops on one accepting state so (a name's letters: 113,000 exits on
/// Llama 3's vocabulary in a few hundred entries), and a reader that can
/// tell from the node alone that none of them leads on passes over the
/// subtree at once.
pub(crate) const WHOLE_EXIT: u32 = 1 << 31;

/// The exits one entry of a walk stands for ([`WHOLE_EXIT`]), in trie
/// order.
#[inline]
pub(crate) fn exits_of(
    trie: &TokenTrie,
    (node, depth): (u32, u32),
) -> impl Iterator<Item = (u32, u32)> + '_ {
    let whole = depth & WHOLE_EXIT != 0;
    let depth = depth & !WHOLE_EXIT;
    let end = if whole {
        trie.nodes[node as usize].next
    } else {
        node + 1
    };
    let base = trie.nodes[node as usize].depth;
    (node..end).filter_map(move |k| {
        let n = trie.nodes[k as usize];
        (!whole || n.next > k + 1).then_some((k, depth + n.depth - base))
    })
}

/// How many exits one entry stands for, and the trie nodes below them
/// summed.
#[inline]
pub(crate) fn exit_count_and_span(trie: &TokenTrie, (node, depth): (u32, u32)) -> (usize, usize) {
    let n = node as usize;
    if depth & WHOLE_EXIT == 0 {
        return (1, (trie.nodes[n].next - node) as usize);
    }
    let end = trie.nodes[n].next as usize;
    (
        (trie.inner_before[end] - trie.inner_before[n]) as usize,
        (trie.inner_span_before[end] - trie.inner_span_before[n]) as usize,
    )
}

/// The exits of a lexeme state, in trie order, a subtree at a time where
/// the walk wrote one so ([`WHOLE_EXIT`]).
#[derive(Debug, Default)]
pub(crate) struct ExitList {
    entries: Vec<(u32, u32)>,
    count: usize,
}

impl ExitList {
    /// The list of a walk's entries (in trie order), and what walking
    /// below them all costs at most.
    pub(crate) fn new(trie: &TokenTrie, entries: Vec<(u32, u32)>) -> (ExitList, usize) {
        let (mut count, mut span) = (0, 0);
        debug_assert!(
            entries.windows(2).all(|w| {
                let whole = w[0].1 & WHOLE_EXIT != 0;
                let end = if whole {
                    trie.nodes[w[0].0 as usize].next
                } else {
                    w[0].0 + 1
                };
                w[1].0 >= end
            }),
            "exits in trie order, none inside a subtree listed whole"
        );
        for &entry in &entries {
            let (c, s) = exit_count_and_span(trie, entry);
            count += c;
            span += s;
        }
        (ExitList { entries, count }, span)
    }

    /// How many exits.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The walk's entries, some standing for subtrees ([`WHOLE_EXIT`]).
    pub(crate) fn entries(&self) -> &[(u32, u32)] {
        &self.entries
    }

    /// Every exit, in trie order.
    pub(crate) fn iter<'a>(&'a self, trie: &'a TokenTrie) -> impl Iterator<Item = (u32, u32)> + 'a {
        self.entries.iter().flat_map(move |&e| exits_of(trie, e))
    }

    /// Heap bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.entries.len() * 8
    }
}

/// A state with at least this many live bytes is walked by a forward scan
/// of the trie, not child list by child list (see [`Lexeme::build_state`]).
/// A pattern's `[0-9A-Za-z]` (62 bytes) walked child list by child list
/// read every alphanumeric node down to its bound: 0.5 ms a first walk.
/// From 64 to 24, mask instructions: 284 MaskBench files -1.5%, XML
/// -5.7%, SQL -0.8%, C +1.0%, GBNF even.
pub(super) const WIDE: u32 = 24;

/// A node with more children than this is walked from a state of few
/// bytes by looking up the children of the state's bytes, where the
/// bytes are at most this share (1/8) of the children
/// ([`Lexeme::walk_below`]). Below [`WIDE`]: room for every byte.
pub(super) const FEW: usize = WIDE as usize;
pub(super) const FEW_SHARE: usize = 8;

/// A state whose walk is made from the loop it leads into
/// ([`Lexeme::deviation`]) differs from the loop on at most this share
/// (1/8) of the root's children, and on at most [`DEVIATION_NODES`] nodes
/// in all; beyond, it walks the loop's escapes itself.
pub(super) const DEVIATION_SHARE: usize = 8;
pub(super) const DEVIATION_NODES: usize = 4096;

/// Most pairs of states [`Lexeme::same_walks`] compares.
pub(super) const ALIKE_PAIRS: usize = 8;

/// The most states a free zone gathers ([`Lexeme::free_zone`]). A search
/// for a long alternation (`srn:reference-data/...:RESTRICTED|CLASSIFIED|
/// ...`, unanchored) has hundreds of partial matches, each a state of the
/// zone: with 128 its states were scanned escape by escape (14,000-15,000
/// of them, 1.3-2.3 ms a state). A gathering that fails marks what it met,
/// so a lexeme pays for it about once per this many states.
pub(super) const ZONE_STATES: usize = 1024;

/// A loop state is walked through its free zone, if it has a wider one,
/// only where its own skeleton has at least this many escapes: gathering
/// a zone makes the states it meets (a millisecond for a count of words),
/// and a JSON string body's skeleton has about 1,500 (Llama 3).
#[cfg(not(test))]
pub(super) const ZONE_ESCAPES: usize = 2048;
/// One in tests, whose vocabularies are small: every wider zone walked.
#[cfg(test)]
pub(super) const ZONE_ESCAPES: usize = 1;

/// Nor does a skeleton of fewer escapes keep a wider zone from being
/// walked if the subtrees below them hold at least this share of the trie
/// (1/4): a loop of digits beside a search's `.*` after its match has
/// every other child of the root as an escape, a full-trie scan (3.3 ms in
/// Github_hard o44202), and its zone is two states. Such a zone is
/// gathered only as far as [`SMALL_ZONE_STATES`]: a word count's loops
/// have escapes as wide and no zone, and gathering 1,024 of its states
/// for nothing cost its masks a fifth more.
pub(super) const ZONE_SPAN_SHARE: usize = 4;
pub(super) const SMALL_ZONE_STATES: usize = 16;

/// A chain with fewer characters left than this is walked through the
/// skeleton of exactly that many ([`Lexeme::chain_skeleton`]); a longer
/// one through that of its run rounded down to a power of two (a skeleton
/// per power: few, whatever the bounds). Near a chain's end most tokens
/// are longer than what is left: with a shorter budget, each of them
/// would be scanned from the budget down to the run's end (the last
/// characters of a string of fixed length: milliseconds per token).
pub(super) const EXACT_BUDGETS: u32 = 16;

/// The budget of the skeleton of a chain whose run is `run` characters, on
/// a trie `full` bytes deep (see [`Lexeme::chain_skeleton`]).
pub(super) fn chain_budget(run: u32, full: u32) -> u32 {
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
pub(super) fn chain_budgets(full: u32) -> Vec<u32> {
    let mut budgets: Vec<u32> = (1..full).map(|run| chain_budget(run, full)).collect();
    budgets.dedup();
    budgets
}
