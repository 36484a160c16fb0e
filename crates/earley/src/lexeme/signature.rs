//! Walks shared by signature: where a walk's result depends only on what
//! a state does to a known set of trie paths (the text of tokens past a
//! string's closing quote), two states that read those paths alike walk
//! alike, whichever lexeme and grammar they are in. [`TextTrie`] merges
//! the paths, [`TextTrie::signature`] reads them from a state, and
//! [`KeptWalks`] keeps indexes by signature.

use super::*;

/// Trie paths merged by their bytes: the subtrees below some nodes of
/// the token trie, as one trie whose root stands for all of those
/// nodes. A few thousand nodes where the subtrees hold tens of
/// thousands (most tokens past a quote begin with the same `,`, `:`,
/// `}` or `)`).
#[derive(Debug)]
pub(super) struct TextTrie {
    /// The children of node `i` (node 0: the root) are
    /// `kid_bytes[kid_start[i]..kid_start[i + 1]]`, the same range of
    /// `kid_nodes`.
    kid_start: Vec<u32>,
    kid_bytes: Vec<u8>,
    kid_nodes: Vec<u32>,
}

impl TextTrie {
    /// The subtrees strictly below `nodes` (trie nodes at their depths),
    /// merged: the root is every one of `nodes`.
    pub(super) fn below(trie: &TokenTrie, nodes: &[(u32, u32)]) -> TextTrie {
        TextTrie::merge(trie, nodes.iter().map(|&(n, d)| (n as usize + 1, n, d)))
    }

    /// The subtrees of `nodes`, each node's own byte included, merged: the
    /// root is the parent of every one of `nodes`.
    pub(super) fn at(trie: &TokenTrie, nodes: &[u32]) -> TextTrie {
        let parent_depth = |n: u32| trie.nodes[n as usize].depth - 1;
        TextTrie::merge(
            trie,
            nodes.iter().map(|&n| (n as usize, n, parent_depth(n))),
        )
    }

    /// Merges, for each `(first, top, depth)`, the preorder range of trie
    /// nodes from `first` to the end of `top`'s subtree, rooted at
    /// `depth`.
    fn merge(trie: &TokenTrie, ranges: impl Iterator<Item = (usize, u32, u32)>) -> TextTrie {
        // Edges as (parent, byte, child), then laid out child list by
        // child list: one map lookup per trie node merged, no list per
        // node (the texts past a run of whitespace merge most of the trie).
        let mut edges: Vec<(u32, u8, u32)> = Vec::new();
        let mut find: HashMap<(u32, u8), u32> = HashMap::with_capacity(trie.nodes.len() / 2);
        // The merged node at each depth of the current path.
        let mut at = vec![0u32; trie.max_depth + 1];
        for (first, top, depth) in ranges {
            at[depth as usize] = 0;
            for i in first..trie.nodes[top as usize].next as usize {
                let n = trie.nodes[i];
                let parent = at[n.depth as usize - 1];
                let q = *find.entry((parent, n.byte)).or_insert_with(|| {
                    let q = edges.len() as u32 + 1;
                    edges.push((parent, n.byte, q));
                    q
                });
                at[n.depth as usize] = q;
            }
        }
        let nodes = edges.len() + 1;
        let mut kid_start = vec![0u32; nodes + 1];
        for &(parent, _, _) in &edges {
            kid_start[parent as usize + 1] += 1;
        }
        for i in 0..nodes {
            kid_start[i + 1] += kid_start[i];
        }
        let mut fill = kid_start.clone();
        let mut kids = vec![(0u8, 0u32); edges.len()];
        for &(parent, byte, child) in &edges {
            kids[fill[parent as usize] as usize] = (byte, child);
            fill[parent as usize] += 1;
        }
        for q in 0..nodes {
            kids[kid_start[q] as usize..kid_start[q + 1] as usize].sort_unstable();
        }
        TextTrie {
            kid_start,
            kid_bytes: kids.iter().map(|&(b, _)| b).collect(),
            kid_nodes: kids.iter().map(|&(_, q)| q).collect(),
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.kid_start.len() - 1
    }

    /// What `state` does to the merged paths, read from the root: whether
    /// it accepts, then each node it reads to a live state, in
    /// depth-first order, as the node's number times two, plus one where
    /// that state accepts. A walk that depends on these paths alone is
    /// the same from two states with the same signature. `None` past
    /// [`SIGNATURE_NODES`] live nodes: a state that reads most of the
    /// paths (a string's `.*`) is walked, where the walk takes whole
    /// subtrees that a signature would read node by node.
    pub(super) fn signature(&self, dfa: &LexDfa, state: u32) -> Option<Vec<u32>> {
        let mut signature = vec![u32::from(dfa.is_accepting(state))];
        let classes = dfa.classes();
        let mut stack = vec![(0u32, state)];
        while let Some((q, from)) = stack.pop() {
            let range =
                self.kid_start[q as usize] as usize..self.kid_start[q as usize + 1] as usize;
            let row = dfa.kept_row(from);
            let bytes = &self.kid_bytes[range.clone()];
            for (&b, &kid) in bytes.iter().zip(&self.kid_nodes[range]) {
                let next = match row {
                    Some(row) => row[classes[b as usize] as usize],
                    None => dfa.next(from, b),
                };
                if next == DEAD {
                    continue;
                }
                if signature.len() > SIGNATURE_NODES {
                    return None;
                }
                signature.push(kid << 1 | u32::from(dfa.is_accepting(next)));
                if self.kid_start[kid as usize] < self.kid_start[kid as usize + 1] {
                    stack.push((kid, next));
                }
            }
        }
        Some(signature)
    }
}

/// The most live nodes a signature reads ([`TextTrie::signature`]).
pub(super) const SIGNATURE_NODES: usize = 2048;

/// The text of tokens past a bounded run of ASCII bytes (JSON's
/// whitespace, `[ \t\n\r]{0,n}`, a [`Chain`] of the lazy automaton),
/// for a walk from a state at the run's start. Through the run's bytes
/// the state stays the same on every other byte, so the walk keeps the
/// run's own tokens whatever the state, ends at each of their nodes
/// where the state accepts, and goes on below each child of another byte
/// (an escape) from the state's transition on it, and below each child
/// that reads the run's last byte from the state after the run. Which
/// tokens past the run it keeps depends on the escapes' subtrees and on
/// those past the run's end alone: merged, their signatures are the
/// walk's.
#[derive(Debug)]
pub(super) struct RunTexts {
    bytes: [u64; 2],
    left: u32,
    /// The escapes' subtrees, each escape's byte included, read from the
    /// state at the run's start.
    escapes: TextTrie,
    /// The subtrees below the children that read the run's last byte,
    /// read from the state after the run.
    ends: TextTrie,
}

impl RunTexts {
    /// The texts past a run of `bytes` (ASCII) read at most `left` times.
    pub(super) fn new(trie: &TokenTrie, bytes: [u64; 2], left: u32) -> RunTexts {
        let has = |b: u8| b < 0x80 && bytes[b as usize / 64] >> (b % 64) & 1 == 1;
        let (mut escapes, mut ends) = (Vec::new(), Vec::new());
        let mut stack = vec![(0u32, 0u32)];
        while let Some((node, run)) = stack.pop() {
            let (bs, kids) = trie.kids(node as usize);
            for (&b, &kid) in bs.iter().zip(kids) {
                if !has(b) {
                    escapes.push(kid);
                } else if run + 1 < left {
                    stack.push((kid, run + 1));
                } else {
                    ends.push((kid, trie.nodes[kid as usize].depth));
                }
            }
        }
        RunTexts {
            bytes,
            left,
            escapes: TextTrie::at(trie, &escapes),
            ends: TextTrie::below(trie, &ends),
        }
    }

    /// Whether a walk from a state with `chain` is read from these texts.
    pub(super) fn serves(&self, chain: &Chain) -> bool {
        (chain.bytes, chain.left) == (self.bytes, self.left)
    }

    /// The signature of a walk from `state`, at the start of `chain` (a
    /// run these texts serve): the state's on the escapes' text, then the
    /// state's after the run on the text past its end.
    pub(super) fn signature(&self, dfa: &LexDfa, state: u32, chain: &Chain) -> Option<Vec<u32>> {
        let mut signature = self.escapes.signature(dfa, state)?;
        signature.push(u32::MAX);
        if chain.after != DEAD {
            signature.extend(self.ends.signature(dfa, chain.after)?);
        }
        Some(signature)
    }

    /// The key of the walks read from these texts.
    pub(super) fn key(&self) -> WalkKey {
        WalkKey::Run(self.bytes, self.left)
    }
}

/// Which walk a signature was read for: the paths it was read on, and
/// what the walk adds to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum WalkKey {
    /// Past the closing quote of a [`Body`] ([`Lexeme::past_the_quote`]).
    PastQuote(Body),
    /// From the start of a run of these bytes, read at most this many
    /// times ([`RunTexts`]).
    Run([u64; 2], u32),
    /// From a state of a lazy automaton, whose signature is the key of
    /// the texts it reads ([`LazyDfa::language_key`]).
    Language,
}

/// Indexes by walk and signature, up to [`KEPT_WALK_BYTES`] of them, and
/// up to [`KEPT_LANGUAGE_BYTES`] more for [`WalkKey::Language`].
#[derive(Debug, Default)]
pub(super) struct KeptWalks(Mutex<KeptInner>);

#[derive(Debug, Default)]
struct KeptInner {
    by_signature: HashMap<WalkKey, HashMap<Box<[u32]>, Arc<StateIndex>>>,
    bytes: usize,
    language_bytes: usize,
}

/// The most heap bytes [`KeptWalks`] holds (an index of a string body
/// holds its row, 16 KiB on Llama 3's vocabulary); past it, walks are
/// made and not kept.
pub(super) const KEPT_WALK_BYTES: usize = 32 << 20;

/// The most heap bytes [`KeptWalks`] holds for [`WalkKey::Language`]: a
/// process serving many grammars keeps their lexeme states apart from
/// the JSON walks above, which they would otherwise crowd out.
pub(super) const KEPT_LANGUAGE_BYTES: usize = 16 << 20;

impl KeptWalks {
    pub(super) fn get(&self, key: WalkKey, signature: &[u32]) -> Option<Arc<StateIndex>> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.by_signature.get(&key)?.get(signature).cloned()
    }

    /// Keeps `made` for `key` and `signature` if there is room, and
    /// returns the index kept for them (the first made, where two threads
    /// made it at once).
    pub(super) fn keep(
        &self,
        key: WalkKey,
        signature: Vec<u32>,
        made: StateIndex,
    ) -> Arc<StateIndex> {
        let made = Arc::new(made);
        let bytes = made.inside.bytes() + made.exits.bytes() + signature.len() * 4;
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let kept = &mut *kept;
        let (held, limit) = match key {
            WalkKey::Language => (&mut kept.language_bytes, KEPT_LANGUAGE_BYTES),
            _ => (&mut kept.bytes, KEPT_WALK_BYTES),
        };
        if *held + bytes > limit {
            return made;
        }
        let walks = kept.by_signature.entry(key).or_default();
        match walks.entry(signature.into_boxed_slice()) {
            hashbrown::hash_map::Entry::Occupied(e) => e.get().clone(),
            hashbrown::hash_map::Entry::Vacant(e) => {
                *held += bytes;
                e.insert(made).clone()
            }
        }
    }
}
